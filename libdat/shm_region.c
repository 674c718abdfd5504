/* Sealed memfd regions for the shm transport (see shm_region.h). */
#include "config.h"

#include "libdat/shm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"

#define REGION_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static size_t page_round(size_t size)
{
        size_t page = (size_t)sysconf(_SC_PAGESIZE);

        if (size > SIZE_MAX - page)
                return 0;
        return (size + page - 1) / page * page;
}

int shm_region_create_unmapped(size_t size, int *fd, size_t *rounded)
{
        _cleanup_close_ int f = -1;

        size = page_round(size);
        if (size == 0 || size > (size_t)INT64_MAX)
                return -EINVAL;
        f = memfd_create("datd-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (f < 0)
                return -errno;
        if (ftruncate(f, (off_t)size) < 0 || fcntl(f, F_ADD_SEALS, REGION_SEALS) < 0)
                return -errno;
        *fd = TAKE_FD(f);
        *rounded = size;
        return 0;
}

int shm_region_create(size_t size, int *fd, void **mem)
{
        size_t rounded;
        void *m;
        int f, k = shm_region_create_unmapped(size, &f, &rounded);

        if (k < 0)
                return k;
        m = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
        if (m == MAP_FAILED) {
                k = -errno;
                close(f);
                return k;
        }
        *fd = f;
        *mem = m;
        return 0;
}

int shm_region_map(int fd, size_t max_size, void **mem, size_t *size)
{
        struct stat st;
        int seals = fcntl(fd, F_GET_SEALS);
        void *m;

        /* EINVAL: not a file that takes seals (not a memfd). */
        if (seals < 0)
                return errno == EINVAL ? -EPROTO : -errno;
        if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
                return -EPROTO;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uintmax_t)st.st_size > max_size)
                return -EPROTO;
        m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
                return -errno;
        *mem = m;
        *size = (size_t)st.st_size;
        return 0;
}

void shm_region_unmap(void *mem, size_t size)
{
        if (mem)
                munmap(mem, size);
}
