/* Cookie-named shared memory (see mem_shm.h). */
#include "config.h"

#include "libdat/mem_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "libdat/mem_range.h"

/* Bounds the wait for another process that is unlinking the name at the
 * same moment (it holds the exclusive lock only around shm_unlink). */
#define ATTACH_TRIES 1000

void mem_shm_name(const char cookie[DAT_LMR_COOKIE_SIZE], char buf[MEM_SHM_NAME_MAX])
{
        int n = snprintf(buf, MEM_SHM_NAME_MAX, "/datd-lmr-%u-", (unsigned)geteuid());

        for (size_t i = 0; i < DAT_LMR_COOKIE_SIZE; i++)
                n += snprintf(buf + n, MEM_SHM_NAME_MAX - (size_t)n, "%02x",
                              (unsigned char)cookie[i]);
}

static DAT_RETURN errno_to_dat(int err)
{
        switch (err) {
        case ENOMEM:
        case ENOSPC:
        case EFBIG:
        case EMFILE:
        case ENFILE:
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        case EACCES:
        case EPERM:
                /* The name exists and is another user's. */
                return DAT_ERR(DAT_INVALID_STATE, DAT_NO_SUBTYPE);
        default:
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
}

/* Whether fd is still the object the name names (not unlinked, and not
 * replaced by a new one, since we opened it). */
static bool still_named(const char *name, int fd)
{
        struct stat a, b;
        int probe = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        bool same;

        if (probe < 0)
                return false;
        same = fstat(fd, &a) == 0 && fstat(probe, &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
        close(probe);
        return same;
}

/* Opens the object under its name, creating it if there is none (*created
 * says which), with a shared lock held on our descriptor; retries while
 * another process is unlinking it. */
static DAT_RETURN open_locked(const char *name, int *out, bool *created)
{
        for (int tries = 0; tries < ATTACH_TRIES; tries++) {
                int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

                *created = fd >= 0;
                if (fd < 0 && errno == EEXIST)
                        fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
                if (fd < 0 && errno != ENOENT)
                        return errno_to_dat(errno);
                if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) == 0 && still_named(name, fd)) {
                        *out = fd;
                        return DAT_SUCCESS;
                }
                if (fd >= 0)
                        close(fd);
                nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
        }
        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
}

/* Refuses an object that is not ours alone, and grows it to length. */
static DAT_RETURN check_and_size(int fd, size_t length)
{
        struct stat st;

        if (fstat(fd, &st) < 0)
                return errno_to_dat(errno);
        if (st.st_uid != geteuid() || (st.st_mode & 077))
                return DAT_ERR(DAT_INVALID_STATE, DAT_NO_SUBTYPE);
        if ((uint64_t)st.st_size >= length)
                return DAT_SUCCESS;
        /* fallocate only grows: two processes sizing at once cannot shrink
         * what the other one asked for, as ftruncate could. */
        if (fallocate(fd, 0, 0, (off_t)length) == 0)
                return DAT_SUCCESS;
        if (errno == EOPNOTSUPP && ftruncate(fd, (off_t)length) == 0)
                return DAT_SUCCESS;
        return errno_to_dat(errno);
}

DAT_RETURN mem_shm_attach(const char cookie[DAT_LMR_COOKIE_SIZE], size_t length,
                          struct mem_shm **out)
{
        char name[MEM_SHM_NAME_MAX];
        struct mem_shm *shm;
        bool created;
        DAT_RETURN ret;

        shm = calloc(1, sizeof(*shm));
        if (!shm)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        memcpy(shm->cookie, cookie, DAT_LMR_COOKIE_SIZE);
        shm->length = mem_page_ceil(length);
        shm->refs = 1;
        mem_shm_name(cookie, name);
        ret = open_locked(name, &shm->fd, &created);
        if (ret != DAT_SUCCESS)
                goto err_free;
        ret = check_and_size(shm->fd, shm->length);
        if (ret != DAT_SUCCESS)
                goto err_close;
        shm->addr = mmap(NULL, shm->length, PROT_READ | PROT_WRITE, MAP_SHARED, shm->fd, 0);
        if (shm->addr == MAP_FAILED) {
                ret = errno_to_dat(errno);
                goto err_close;
        }
        *out = shm;
        return DAT_SUCCESS;

err_close:
        /* Created just now and nobody else has it: do not leave it behind. */
        if (created && flock(shm->fd, LOCK_EX | LOCK_NB) == 0)
                shm_unlink(name);
        close(shm->fd);
err_free:
        free(shm);
        return ret;
}

struct mem_shm *mem_shm_ref(struct mem_shm *shm)
{
        __atomic_add_fetch(&shm->refs, 1, __ATOMIC_RELAXED);
        return shm;
}

void mem_shm_unref(struct mem_shm *shm)
{
        char name[MEM_SHM_NAME_MAX];

        if (!shm || __atomic_sub_fetch(&shm->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        munmap(shm->addr, shm->length);
        /* The exclusive lock succeeds only if no other mapping (ours or
         * another process's) holds its shared lock: we are the last user. */
        if (flock(shm->fd, LOCK_EX | LOCK_NB) == 0) {
                mem_shm_name(shm->cookie, name);
                shm_unlink(name);
        }
        close(shm->fd);
        free(shm);
}
