/* Checks that a range of this process's address space is memory a
 * consumer may register: mapped from end to end, with the access the LMR's
 * privileges need, and, for DAT_MEM_TYPE_SHARED_VIRTUAL, shared. */
#ifndef DATD_LIBDAT_MEM_RANGE_H
#define DATD_LIBDAT_MEM_RANGE_H

#include <stddef.h>
#include <stdint.h>

enum {
        MEM_RANGE_READ = 1 << 0,        /* every page readable */
        MEM_RANGE_WRITE = 1 << 1,       /* every page writable */
        MEM_RANGE_SHARED = 1 << 2,      /* every page a shared mapping (MAP_SHARED) */
};

/* [start, start + length), page-aligned, length > 0 and not wrapping.
 * Returns 0 when every page is mapped with what need asks (MEM_RANGE_*),
 * -EFAULT when some page is not mapped, -EACCES when a page lacks the
 * access asked, -EPERM when a page is not shared but MEM_RANGE_SHARED was
 * asked.  Reads /proc/self/maps; where that cannot be read, checks only
 * that the pages are mapped (mincore(2)) and ignores need. */
int mem_range_check(uintptr_t start, size_t length, unsigned need);

/* The page size, and a value rounded down / up to it. */
size_t mem_page_size(void);
uintptr_t mem_page_floor(uintptr_t v);
uintptr_t mem_page_ceil(uintptr_t v);

#endif
