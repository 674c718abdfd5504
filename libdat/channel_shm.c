/* The shm data channel (channel.h): the two byte rings of shm_link.h in
 * the sealed memfd datd made for the connection, the two doorbells, and a
 * pidfd of the peer (readable once it exits: the survivor breaks the
 * connection without waiting for datd). */
#include "config.h"

#include "libdat/channel.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libdat/shm_link.h"
#include "libdat/shm_region.h"

struct channel_shm {
        struct channel ch;
        struct shm_link link;
        void *mem;
        size_t size;
        int doorbell_mine;
        int doorbell_peer;
        bool closed;                    /* our direction is closed */
};

static struct channel_shm *to_shm(struct channel *ch)
{
        return (struct channel_shm *)ch;
}

static ssize_t shm_writev(struct channel *ch, const struct iovec *iov, int iovcnt)
{
        ssize_t n = shm_link_writev(&to_shm(ch)->link, iov, iovcnt);

        return n < 0 ? -EPIPE : n;
}

static ssize_t shm_readv(struct channel *ch, const struct iovec *iov, int iovcnt)
{
        ssize_t n = shm_link_readv(&to_shm(ch)->link, iov, iovcnt);

        return n < 0 ? -EPIPE : n;
}

static bool shm_readable(struct channel *ch)
{
        struct shm_link *l = &to_shm(ch)->link;

        return shm_link_readable(l) > 0 || shm_link_peer_closed(l);
}

static bool shm_arm(struct channel *ch, bool want_room)
{
        return shm_link_arm(&to_shm(ch)->link, want_room);
}

static void shm_disarm(struct channel *ch)
{
        shm_link_disarm(&to_shm(ch)->link);
}

static void shm_woken(struct channel *ch)
{
        shm_link_doorbell_drain(&to_shm(ch)->link);
}

static unsigned shm_poll_events(struct channel *ch, bool want_data, bool want_room)
{
        (void)ch;
        (void)want_data;
        (void)want_room;
        /* Room and data both ring the same doorbell. */
        return EPOLLIN;
}

static void shm_shutdown(struct channel *ch)
{
        to_shm(ch)->closed = true;
        shm_link_close_tx(&to_shm(ch)->link);
}

static void shm_destroy(struct channel *ch)
{
        struct channel_shm *s = to_shm(ch);

        /* The end of our stream: after a BYE it is an orderly end, without
         * one (a failure) the peer takes it for a broken connection. */
        if (!__atomic_load_n(&s->closed, __ATOMIC_RELAXED))
                shm_link_close_tx(&s->link);
        shm_region_unmap(s->mem, s->size);
        close(s->doorbell_mine);
        close(s->doorbell_peer);
        if (ch->peer_pidfd >= 0)
                close(ch->peer_pidfd);
        free(s);
}

static const struct channel_ops shm_ops = {
        .name = "shm",
        .writev = shm_writev,
        .readv = shm_readv,
        .readable = shm_readable,
        .arm = shm_arm,
        .disarm = shm_disarm,
        .woken = shm_woken,
        .poll_events = shm_poll_events,
        .shutdown = shm_shutdown,
        .destroy = shm_destroy,
};

/* A doorbell is a datagram socket (daemon/channel.h): anything else could
 * block us, raise SIGPIPE, or never become readable.  getsockopt fails on
 * anything that is no socket. */
static bool doorbell_ok(int fd)
{
        int type = 0;
        socklen_t len = sizeof(type);

        return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_DGRAM;
}

int channel_shm_create(const struct datp_ev_data_channel *ev, int *fds, unsigned nfds,
                       struct channel **out)
{
        struct channel_shm *s;
        int r;

        if (nfds < DATP_CHANNEL_SHM_FDS_MIN || nfds > DATP_CHANNEL_MAX_FDS || ev->side > 1 ||
            ev->region_size != shm_link_region_size(ev->ring_size) ||
            !doorbell_ok(fds[1]) || !doorbell_ok(fds[2])) {
                channel_close_fds(fds, nfds);
                return -EPROTO;
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
                channel_close_fds(fds, nfds);
                return -ENOMEM;
        }
        r = shm_region_map(fds[0], (size_t)ev->region_size, &s->mem, &s->size);
        if (r == 0 && s->size != ev->region_size)
                r = -EPROTO;
        if (r == 0)
                r = shm_link_attach(s->mem, s->size, ev->ring_size, ev->side, fds[1], fds[2],
                                    &s->link);
        if (r < 0) {
                if (s->mem)
                        shm_region_unmap(s->mem, s->size);
                free(s);
                channel_close_fds(fds, nfds);
                return r;
        }
        /* The mapping keeps the memory; the descriptor is not needed. */
        close(fds[0]);
        s->doorbell_mine = fds[1];
        s->doorbell_peer = fds[2];
        s->ch.ops = &shm_ops;
        s->ch.poll_fd = s->doorbell_mine;
        s->ch.peer_pid = ev->peer_pid;
        s->ch.peer_pidfd = nfds > 3 ? fds[3] : -1;
        s->ch.same_host = ev->peer_pid > 0;
        for (unsigned i = 0; i < nfds; i++)
                fds[i] = -1;
        *out = &s->ch;
        return 0;
}
