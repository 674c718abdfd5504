/* The shm data channel (channel.h): the two byte rings of shm_link.h in
 * the sealed memfd datd made for the connection, the two doorbells (pipes,
 * or from a datd of protocol version 2 or less datagram sockets: see
 * daemon/channel.h), and a pidfd of the peer (readable once it exits: the
 * survivor breaks the connection without waiting for datd). */
#include "config.h"

#include "libdat/channel.h"

#include <errno.h>
#include <fcntl.h>
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
        int guard;                      /* pipes: a read end of the peer's; else -1 */
        bool closed;                    /* our direction is closed */
        bool hung_up;                   /* our doorbell has no ringer left */
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

/* Once our doorbell has no ringer left, the peer's end of the channel is
 * gone: what it wrote is in the ring (it wrote before it closed), and after
 * that comes the end of its stream, with or without its mark. */
static ssize_t shm_readv(struct channel *ch, const struct iovec *iov, int iovcnt)
{
        struct channel_shm *s = to_shm(ch);
        ssize_t n = shm_link_readv(&s->link, iov, iovcnt);

        if (n == 0 && __atomic_load_n(&s->hung_up, __ATOMIC_RELAXED) &&
            shm_link_readable(&s->link) == 0)
                return -EPIPE;
        return n < 0 ? -EPIPE : n;
}

static const void *shm_peek(struct channel *ch, size_t max, size_t *len)
{
        struct channel_shm *s = to_shm(ch);
        const void *p = shm_link_peek(&s->link, max, len);

        /* An empty ring at the end of the stream: a read says so. */
        if (!p && *len == 0 &&
            (__atomic_load_n(&s->hung_up, __ATOMIC_RELAXED) || shm_link_peer_closed(&s->link)))
                *len = 1;
        return p;
}

static bool shm_consume(struct channel *ch)
{
        return shm_link_consume(&to_shm(ch)->link);
}

static bool shm_readable(struct channel *ch)
{
        struct channel_shm *s = to_shm(ch);

        return shm_link_rx_ready(&s->link) || __atomic_load_n(&s->hung_up, __ATOMIC_RELAXED);
}

static bool shm_arm(struct channel *ch, bool want_data, bool want_room)
{
        return shm_link_arm(&to_shm(ch)->link, want_data, want_room);
}

static void shm_disarm(struct channel *ch)
{
        shm_link_disarm(&to_shm(ch)->link);
}

static void shm_woken(struct channel *ch)
{
        shm_link_doorbell_drain(&to_shm(ch)->link);
}

/* A pipe whose every write end is closed: the peer closed its end of the
 * channel, or died.  Sockets never hang up. */
static void shm_hangup(struct channel *ch)
{
        __atomic_store_n(&to_shm(ch)->hung_up, true, __ATOMIC_RELAXED);
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
        if (s->guard >= 0)
                close(s->guard);
        if (ch->peer_pidfd >= 0)
                close(ch->peer_pidfd);
        free(s);
}

static const struct channel_ops shm_ops = {
        .name = "shm",
        .writev = shm_writev,
        .readv = shm_readv,
        .peek = shm_peek,
        .consume = shm_consume,
        .readable = shm_readable,
        .arm = shm_arm,
        .disarm = shm_disarm,
        .woken = shm_woken,
        .hangup = shm_hangup,
        .poll_events = shm_poll_events,
        .shutdown = shm_shutdown,
        .destroy = shm_destroy,
};

/* A doorbell of datd's protocol version 2 or less is a datagram socket
 * (daemon/channel.h): anything else could block us, raise SIGPIPE, or
 * never become readable.  getsockopt fails on anything that is no socket. */
static bool doorbell_socket_ok(int fd)
{
        int type = 0;
        socklen_t len = sizeof(type);

        return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_DGRAM;
}

/* A pipe's end, as datd makes them: open for reading or for writing alone
 * (what a pipe's ends are; never a socket, which is both) and non-blocking.
 * Its own open file: no one else can clear the flag. */
static bool doorbell_pipe_ok(int fd, int mode)
{
        int fl = fcntl(fd, F_GETFL);

        return fl >= 0 && (fl & O_ACCMODE) == mode && (fl & O_NONBLOCK);
}

/* The descriptors of ev's kind of doorbells: the count, and each one. */
static bool doorbells_ok(const struct datp_ev_data_channel *ev, const int *fds, unsigned nfds)
{
        if (nfds < datp_channel_shm_fds(ev->flags) || nfds > datp_channel_shm_fds(ev->flags) + 1)
                return false;
        if (!(ev->flags & DATP_CHANNEL_PIPES))
                return doorbell_socket_ok(fds[1]) && doorbell_socket_ok(fds[2]);
        return doorbell_pipe_ok(fds[1], O_RDONLY) && doorbell_pipe_ok(fds[2], O_WRONLY) &&
               doorbell_pipe_ok(fds[3], O_RDONLY);
}

int channel_shm_create(const struct datp_ev_data_channel *ev, int *fds, unsigned nfds,
                       struct channel **out)
{
        bool pipes = ev->flags & DATP_CHANNEL_PIPES;
        unsigned pidfd_at = datp_channel_shm_fds(ev->flags);
        struct channel_shm *s;
        int r;

        if (ev->side > 1 || ev->region_size != shm_link_region_size(ev->ring_size) ||
            !doorbells_ok(ev, fds, nfds)) {
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
        if (r == 0) {
                shm_link_prefault(s->mem, s->size, ev->ring_size);
                r = shm_link_attach(s->mem, s->size, ev->ring_size, ev->side, fds[1], fds[2],
                                    &s->link);
        }
        if (r < 0) {
                if (s->mem)
                        shm_region_unmap(s->mem, s->size);
                free(s);
                channel_close_fds(fds, nfds);
                return r;
        }
        s->link.doorbell_sock = !pipes;
        /* The mapping keeps the memory; the descriptor is not needed. */
        close(fds[0]);
        s->doorbell_mine = fds[1];
        s->doorbell_peer = fds[2];
        s->guard = pipes ? fds[3] : -1;
        s->ch.ops = &shm_ops;
        s->ch.poll_fd = s->doorbell_mine;
        s->ch.peer_pid = ev->peer_pid;
        s->ch.peer_pidfd = nfds > pidfd_at ? fds[pidfd_at] : -1;
        s->ch.same_host = ev->peer_pid > 0;
        for (unsigned i = 0; i < nfds; i++)
                fds[i] = -1;
        *out = &s->ch;
        return 0;
}
