/* Data channels (channel.h). */
#include <config.h>

#include <errno.h>
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

int shm_channel_new(uint32_t ring_size, ShmRegion **ret)
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
                r->doorbell[side][0] = r->doorbell[side][1] = -1;
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
        for (int side = 0; side < 2; side++)
                if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0,
                               r->doorbell[side]) < 0) {
                        k = -errno;
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
        for (int side = 0; side < 2; side++) {
                close_forget(&r->doorbell[side][0]);
                close_forget(&r->doorbell[side][1]);
        }
}

ShmRegion *shm_channel_unref(ShmRegion *r)
{
        if (!r || --r->refs > 0)
                return NULL;
        shm_channel_sent(r);
        close_forget(&r->memfd);
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
