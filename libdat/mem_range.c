/* Address space checks for memory registration (see mem_range.h).
 *
 * /proc/self/maps lists the mappings in address order, so one pass over
 * it finds holes and permissions for the whole range: O(mappings), which
 * is what registration costs anyway.  Nothing here touches the memory
 * itself (no faults, no change to the consumer's madvise state). */
#include "config.h"

#include "libdat/mem_range.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

size_t mem_page_size(void)
{
        static size_t page;

        if (!page)
                page = (size_t)sysconf(_SC_PAGESIZE);
        return page;
}

uintptr_t mem_page_floor(uintptr_t v)
{
        return v & ~(uintptr_t)(mem_page_size() - 1);
}

uintptr_t mem_page_ceil(uintptr_t v)
{
        return mem_page_floor(v + mem_page_size() - 1);
}

/* Without /proc: mapped or not, page by page, in bounded steps. */
static int check_mapped_only(uintptr_t start, size_t length)
{
        unsigned char vec[256];
        size_t step = sizeof(vec) * mem_page_size();

        for (size_t off = 0; off < length; off += step) {
                size_t n = length - off < step ? length - off : step;

                if (mincore((void *)(start + off), n, vec) < 0)
                        return errno == ENOMEM ? -EFAULT : -errno;
        }
        return 0;
}

/* The problem (a negative errno as mem_range_check returns) with one
 * mapping's permission string "rwxs"/"rw-p" for need, or 0. */
static int check_perms(const char *perms, unsigned need)
{
        if ((need & MEM_RANGE_READ) && perms[0] != 'r')
                return -EACCES;
        if ((need & MEM_RANGE_WRITE) && perms[1] != 'w')
                return -EACCES;
        if ((need & MEM_RANGE_SHARED) && perms[3] != 's')
                return -EPERM;
        return 0;
}

int mem_range_check(uintptr_t start, size_t length, unsigned need)
{
        uintptr_t end = start + length, cursor = start;
        FILE *f = fopen("/proc/self/maps", "re");
        char line[512];
        int problem = 0;

        if (!f)
                return check_mapped_only(start, length);
        while (cursor < end && fgets(line, sizeof(line), f)) {
                unsigned long lo, hi;
                char perms[5];
                bool whole_line = strchr(line, '\n') != NULL;

                /* A long path name: skip the rest of the line. */
                while (!whole_line) {
                        char rest[256];

                        if (!fgets(rest, sizeof(rest), f))
                                break;
                        whole_line = strchr(rest, '\n') != NULL;
                }
                if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3 || strlen(perms) != 4)
                        continue;
                if (hi <= cursor)
                        continue;
                if (lo > cursor)
                        break; /* a hole at cursor */
                if (!problem)
                        problem = check_perms(perms, need);
                cursor = hi;
        }
        fclose(f);
        if (cursor < end)
                return -EFAULT;
        return problem;
}
