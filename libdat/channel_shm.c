/* The shm data channel (channel.h): the two byte rings of shm_link.h in
 * the sealed memfd datd made for the connection, the two doorbells (pipes,
 * or from a datd of protocol version 2 or less datagram sockets: see
 * daemon/channel.h), and a pidfd of the peer (readable once it exits: the
 * survivor breaks the connection without waiting for datd).  A channel
 * datd lets us keep goes to the IA's shm_keep.h when it is destroyed, and
 * comes back from there for a later connection. */
#include "config.h"

#include "libdat/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libdat/shm_direct.h"
#include "libdat/shm_keep.h"
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
        struct shm_keep *keep;          /* kept channels: where it goes at the end */
        uint32_t channel_id;            /* kept channels: datd's id */
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

static void *shm_reserve(struct channel *ch, size_t len)
{
        return shm_link_reserve(&to_shm(ch)->link, len);
}

static void shm_commit(struct channel *ch, size_t len)
{
        shm_link_commit(&to_shm(ch)->link, len);
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

static bool shm_consume(struct channel *ch, bool look)
{
        return shm_link_consume(&to_shm(ch)->link, look);
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

static void shm_quiet(struct channel *ch, bool on)
{
        shm_link_quiet(&to_shm(ch)->link, on);
}

static void shm_shutdown(struct channel *ch)
{
        to_shm(ch)->closed = true;
        shm_link_close_tx(&to_shm(ch)->link);
}

/* What s holds beyond the link: its end of the channel. */
static struct shm_kept end_of(const struct channel_shm *s)
{
        return (struct shm_kept){
                .id = s->channel_id,
                .mem = s->mem,
                .size = s->size,
                .ring_size = s->link.ring_size,
                .side = s->link.side,
                .doorbell_mine = s->doorbell_mine,
                .doorbell_peer = s->doorbell_peer,
                .guard = s->guard,
                .peer_pidfd = s->ch.peer_pidfd,
                .peer_pid = s->ch.peer_pid,
        };
}

static void shm_destroy(struct channel *ch)
{
        struct channel_shm *s = to_shm(ch);
        struct shm_kept end = end_of(s), *e = NULL;

        /* Before the peer's pidfd goes: a revocation may wait for it. */
        shm_direct_destroy(s->ch.direct);
        /* The end of our stream: after a BYE it is an orderly end, without
         * one (a failure) the peer takes it for a broken connection. */
        if (!__atomic_load_n(&s->closed, __ATOMIC_RELAXED))
                shm_link_close_tx(&s->link);
        if (s->keep) {
                /* Out of memory, it goes as if it were not kept. */
                e = malloc(sizeof(*e));
                if (e) {
                        *e = end;
                        shm_keep_put(s->keep, e, s->ch.graceful_end);
                }
                shm_keep_unref(s->keep);
        }
        if (!e)
                shm_kept_close(&end);
        free(s);
}

static const struct channel_ops shm_ops = {
        .name = "shm",
        .writev = shm_writev,
        .readv = shm_readv,
        .quiet = shm_quiet,
        .reserve = shm_reserve,
        .commit = shm_commit,
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

/* A channel datd kept for us, laid out afresh (DATP_CHANNEL_REUSE): as
 * it was when it was first sent, nothing passed, nothing to map. */
static int reuse_kept(const struct datp_ev_data_channel *ev, struct shm_keep *keep,
                      struct channel_shm *s)
{
        struct shm_kept *e = keep ? shm_keep_take(keep, ev->channel_id) : NULL;
        int r;

        if (!e)
                return -EPROTO;
        if (e->size != ev->region_size || e->ring_size != ev->ring_size || e->side != ev->side) {
                shm_kept_free(e);
                return -EPROTO;
        }
        r = shm_link_attach(e->mem, e->size, e->ring_size, e->side, e->doorbell_mine,
                            e->doorbell_peer, &s->link);
        if (r < 0) {
                shm_kept_free(e);
                return r;
        }
        /* A ring the last connection left on the doorbell is not drained
         * here: an orderly end rings nothing (dto_tx_bye), and a read that
         * nearly always found nothing cost every reuse a system call; the
         * rare stale ring costs one wake-up, which takes it. */
        s->mem = e->mem;
        s->size = e->size;
        s->doorbell_mine = e->doorbell_mine;
        s->doorbell_peer = e->doorbell_peer;
        s->guard = e->guard;
        s->ch.peer_pidfd = e->peer_pidfd;
        s->ch.peer_pid = e->peer_pid;
        free(e);
        return 0;
}

/* A channel sent with its descriptors: maps the region and takes them. */
static int attach_new(const struct datp_ev_data_channel *ev, int *fds, unsigned nfds,
                      struct channel_shm *s)
{
        bool pipes = ev->flags & DATP_CHANNEL_PIPES;
        unsigned pidfd_at = datp_channel_shm_fds(ev->flags);
        int r;

        if (!doorbells_ok(ev, fds, nfds))
                return -EPROTO;
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
                return r;
        }
        s->link.doorbell_sock = !pipes;
        /* The mapping keeps the memory; the descriptor is not needed. */
        close(fds[0]);
        s->doorbell_mine = fds[1];
        s->doorbell_peer = fds[2];
        s->guard = pipes ? fds[3] : -1;
        s->ch.peer_pid = ev->peer_pid;
        s->ch.peer_pidfd = nfds > pidfd_at ? fds[pidfd_at] : -1;
        for (unsigned i = 0; i < nfds; i++)
                fds[i] = -1;
        return 0;
}

int channel_shm_create(const struct datp_ev_data_channel *ev, int *fds, unsigned nfds,
                       struct shm_keep *keep, struct channel **out)
{
        struct channel_shm *s;
        int r;

        if (ev->side > 1 || ev->region_size != shm_link_region_size(ev->ring_size)) {
                channel_close_fds(fds, nfds);
                return -EPROTO;
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
                channel_close_fds(fds, nfds);
                return -ENOMEM;
        }
        if (ev->flags & DATP_CHANNEL_REUSE)
                r = reuse_kept(ev, keep, s);
        else
                r = attach_new(ev, fds, nfds, s);
        if (r < 0) {
                free(s);
                channel_close_fds(fds, nfds);
                return r;
        }
        if ((ev->flags & DATP_CHANNEL_KEEP) && keep) {
                s->keep = shm_keep_ref(keep);
                s->channel_id = ev->channel_id;
        }
        s->ch.ops = &shm_ops;
        s->ch.poll_fd = s->doorbell_mine;
        s->ch.same_host = ev->peer_pid > 0;
        s->ch.direct = shm_direct_new(s->ch.peer_pid, s->ch.peer_pidfd);
        *out = &s->ch;
        return 0;
}
