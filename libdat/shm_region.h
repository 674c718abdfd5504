/* The memory a shm connection's rings live in: a sealed memfd that datd or
 * one side creates and passes to the other (SCM_RIGHTS, or inheritance).
 *
 * The creator seals the size (F_SEAL_SHRINK | F_SEAL_GROW) and then the
 * seals themselves (F_SEAL_SEAL), so that neither side can truncate the
 * file under the other's mapping (a SIGBUS on the next access).  The side
 * that maps a received descriptor refuses one without those seals. */
#ifndef DATD_LIBDAT_SHM_REGION_H
#define DATD_LIBDAT_SHM_REGION_H

#include <stddef.h>

/* Creates a sealed memfd of size bytes (rounded up to pages, MFD_CLOEXEC)
 * and maps it read-write, shared.  0 with *fd and *mem, or -errno
 * (-EINVAL for size 0). */
int shm_region_create(size_t size, int *fd, void **mem);

/* The same memfd, unmapped: 0 with *fd and *size (the rounded size), or
 * -errno.  For a creator that only writes a header (pwrite): the file
 * reads as zeros everywhere else, and no mapping is made and undone. */
int shm_region_create_unmapped(size_t size, int *fd, size_t *rounded);

/* Maps a received memfd: its size by fstat, at most max_size bytes.  0 with
 * *mem and *size, -EPROTO when it is not a sealed memfd of a size in
 * (0, max_size], or -errno.  The caller keeps fd. */
int shm_region_map(int fd, size_t max_size, void **mem, size_t *size);

/* Unmaps what create or map returned.  Accepts NULL. */
void shm_region_unmap(void *mem, size_t size);

#endif
