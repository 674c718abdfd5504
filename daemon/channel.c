/* Data channels (channel.h). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/channel.h"
#include "libdat/shm_link.h"
#include "libdat/shm_region.h"

/* Linux 6.5; older kernels refuse it (ENOPROTOOPT).  The value of the
 * generic socket options: alpha, mips, parisc and sparc number them
 * otherwise and get no fallback here. */
#if !defined(SO_PEERPIDFD) && !defined(__alpha__) && !defined(__mips__) && \
        !defined(__hppa__) && !defined(__sparc__)
#define SO_PEERPIDFD 77
#endif

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434      /* the same on every architecture */
#endif

/* closep() that also forgets the descriptor: safe to call twice. */
static void close_forget(int *fd)
{
        closep(fd);
        *fd = -1;
}

/* A pipe, both ends non-blocking, and a second read end that is an open
 * file of its own (a dup would share the first one's flags).  One page of
 * buffer, room for 512 rings where one per announced sleep is made: the
 * kernel counts 16 pages for a new pipe against its owner's user (root's,
 * shared with every other root process), and past
 * /proc/sys/fs/pipe-user-pages-soft that user's new pipes get 2. */
static int doorbell_pipe(int ends[2], int *guard)
{
        char path[64];

        if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        (void)fcntl(ends[0], F_SETPIPE_SZ, (int)sysconf(_SC_PAGESIZE));
        snprintf(path, sizeof(path), "/proc/self/fd/%d", ends[0]);
        *guard = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        return *guard < 0 ? -errno : 0;
}

int shm_channel_new(uint32_t ring_size, bool pipes, ShmRegion **ret)
{
        size_t size = shm_link_region_size(ring_size);
        ShmRegion *r;
        int k;

        if (size == 0)
                return -EINVAL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->memfd = -1;
        for (int side = 0; side < 2; side++)
                r->doorbell[side][0] = r->doorbell[side][1] = r->guard[side] = -1;
        r->pipes = pipes;
        r->refs = 2;
        r->size = size;
        r->ring_size = ring_size;
        /* The file is whole pages: r->size is what the ends will fstat.
         * It is laid out without being mapped: datd never touches the
         * rings. */
        k = shm_region_create_unmapped(size, &r->memfd, &r->size);
        if (k < 0)
                goto fail;
        k = shm_link_init_fd(r->memfd, r->size, ring_size);
        if (k < 0)
                goto fail;
        for (int side = 0; side < 2; side++) {
                if (pipes)
                        k = doorbell_pipe(r->doorbell[side], &r->guard[side]);
                else
                        k = socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0,
                                       r->doorbell[side]) < 0 ? -errno : 0;
                if (k < 0)
                        goto fail;
        }
        *ret = r;
        return 0;
fail:
        r->refs = 1;
        shm_channel_unref(r);
        return k;
}

void shm_channel_sent(ShmRegion *r)
{
        r->sent = true;
        for (int side = 0; side < 2; side++) {
                close_forget(&r->doorbell[side][0]);
                close_forget(&r->doorbell[side][1]);
                close_forget(&r->guard[side]);
        }
}

ShmRegion *shm_channel_unref(ShmRegion *r)
{
        if (!r || --r->refs > 0)
                return NULL;
        shm_channel_sent(r);
        close_forget(&r->memfd);
        uid_charge_drop(&r->fd_charge[0]);
        uid_charge_drop(&r->fd_charge[1]);
        free(r);
        return NULL;
}

int channel_pidfd(int sock, pid_t pid)
{
        long r;

#ifdef SO_PEERPIDFD
        int fd = -1;
        socklen_t len = sizeof(fd);

        if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0)
                return fd;
        /* Only a kernel without it falls back to the PID: with it, a
         * failure means the process is gone, and its PID may name another
         * one by now. */
        if (errno != ENOPROTOOPT)
                return -errno;
#else
        (void)sock;
#endif
        if (pid <= 0)
                return -ESRCH;
        r = syscall(SYS_pidfd_open, pid, 0);
        return r < 0 ? -errno : (int) r;
}
