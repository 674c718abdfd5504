/* The tcp data channel (channel.h): a connected TCP socket datd handed
 * over.  The stream is the socket's; readv/writev are single system calls
 * straight from and into the DTO engine's buffers (registered memory for
 * payloads), so large transfers make no extra copy. */
#include "config.h"

#include "libdat/channel.h"
#include "libdat/raw_syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct channel_tcp {
        struct channel ch;
        int fd;
        bool eof;
        int lowat;                      /* SO_RCVLOWAT now: 1 or LONG_PAYLOAD_LOWAT */
};

static struct channel_tcp *to_tcp(struct channel *ch)
{
        return (struct channel_tcp *)ch;
}

/* A frame up to this long (a header and a payload of up to 4 KiB) is
 * gathered into one buffer and sent with send().  Measured on this
 * project's test machine (TCP loopback, a 40-byte header): sendmsg() of
 * the two pieces costs 100-250 ns more than copying them and send() of
 * one, for payloads of 8 B to 4 KiB, the copy included.  Much beyond that
 * the copy costs more than it saves. */
#define TCP_GATHER_MAX (4096u + 64u)

/* The socket calls without glibc's wrappers: the engine's reads and writes
 * never block (MSG_DONTWAIT), so they are no cancellation points
 * (dat_evd_dequeue is not one), and the wrappers cost two atomic updates of
 * the thread's cancel state per call of a polling loop; and in place
 * (raw_syscall.h), not through syscall(), one return fewer to mispredict
 * after each. */
static ssize_t sys_recv(int fd, void *buf, size_t len, int flags)
{
        return raw_syscall6(SYS_recvfrom, fd, (long)buf, (long)len, flags, 0, 0);
}

static ssize_t sys_send(int fd, const void *buf, size_t len, int flags)
{
        return raw_syscall6(SYS_sendto, fd, (long)buf, (long)len, flags, 0, 0);
}

static ssize_t sys_recvmsg(int fd, struct msghdr *msg, int flags)
{
        return raw_syscall6(SYS_recvmsg, fd, (long)msg, flags, 0, 0, 0);
}

static ssize_t sys_sendmsg(int fd, const struct msghdr *msg, int flags)
{
        return raw_syscall6(SYS_sendmsg, fd, (long)msg, flags, 0, 0, 0);
}

/* Whether fd is readable now (its low-water mark reached, its end or an
 * error there): ppoll() with a zero timeout, no signal mask. */
static bool sys_readable_now(int fd)
{
        struct pollfd p = { .fd = fd, .events = POLLIN };
        struct timespec zero = { 0, 0 };

        return raw_syscall6(SYS_ppoll, (long)&p, 1, (long)&zero, 0, 0, 0) != 0;
}

static ssize_t tcp_send_gathered(int fd, const struct iovec *iov, int iovcnt, size_t total)
{
        unsigned char buf[TCP_GATHER_MAX];
        size_t at = 0;

        for (int i = 0; i < iovcnt; i++) {
                /* An empty piece may have no buffer at all (NULL). */
                if (iov[i].iov_len == 0)
                        continue;
                memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
                at += iov[i].iov_len;
        }
        return sys_send(fd, buf, total, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static ssize_t tcp_writev(struct channel *ch, const struct iovec *iov, int iovcnt)
{
        struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
        int fd = to_tcp(ch)->fd;
        size_t total = 0;
        ssize_t n;

        for (int i = 0; i < iovcnt && total <= TCP_GATHER_MAX; i++)
                total += iov[i].iov_len;
        do
                if (iovcnt == 1)
                        n = sys_send(fd, iov[0].iov_base, iov[0].iov_len,
                                     MSG_NOSIGNAL | MSG_DONTWAIT);
                else if (total <= TCP_GATHER_MAX)
                        n = tcp_send_gathered(fd, iov, iovcnt, total);
                else
                        n = sys_sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n >= 0)
                return n;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
        return -EPIPE;
}

/* The socket's send queue: bytes the peer's kernel has not acknowledged.
 * An error says nothing is known: as if some were left (the caller then
 * waits for what it waits for anyway). */
static size_t tcp_unsent(struct channel *ch)
{
        int n = 0;

        if (ioctl(to_tcp(ch)->fd, SIOCOUTQ, &n) < 0)
                return 1;
        return n > 0 ? (size_t)n : 0;
}

static ssize_t tcp_readv(struct channel *ch, const struct iovec *iov, int iovcnt)
{
        struct channel_tcp *t = to_tcp(ch);
        ssize_t n;
        int err;

        if (t->eof)
                return -EPIPE;
        /* While a long payload comes (tcp_expect), a read waits until a
         * good part of it is there, as epoll does: ppoll() asks without
         * taking the socket's lock, which recv() takes. */
        if (t->lowat > 1 && !sys_readable_now(t->fd))
                return 0;
        /* One buffer (the engine's small reads): recv() spares the kernel
         * the message header and the iovec import of recvmsg(). */
        do {
                if (iovcnt == 1) {
                        n = sys_recv(t->fd, iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT);
                } else {
                        struct msghdr msg = { .msg_iov = (struct iovec *)iov,
                                              .msg_iovlen = (size_t)iovcnt };

                        n = sys_recvmsg(t->fd, &msg, MSG_DONTWAIT);
                }
                err = n < 0 ? errno : 0;
        } while (err == EINTR);
        if (n > 0)
                return n;
        if (n == 0) {
                /* Asked for nothing is not end of stream. */
                size_t want = 0;

                for (int i = 0; i < iovcnt; i++)
                        want += iov[i].iov_len;
                if (want == 0)
                        return 0;
                t->eof = true;
                return -EPIPE;
        }
        if (err == EAGAIN || err == EWOULDBLOCK)
                return 0;
        t->eof = true;
        return -EPIPE;
}

/* The receive low-water mark while at least this much of a payload is
 * still to come.  Read as it trickles in (a read for every few KiB
 * arrived, an acknowledgement opening the window for each), a long
 * payload cost the receiving side's CPU more than the sender's; read 256
 * KiB at a time, 1 MiB and 16 MiB Sends, RDMA Writes and Reads across two
 * network namespaces went 10-20% faster (waiting in dat_evd_wait), 16 MiB
 * ones also when polling; 1 MiB at a time was slower than none (measured
 * 64 KiB, 128, 256, 512 KiB and 1 MiB).  The kernel bounds the mark by
 * the receive buffer, and says readable anyway when the buffer or the
 * window runs short, so a mark above what can come never stalls. */
#define LONG_PAYLOAD_LOWAT (256 * 1024)

static void tcp_expect(struct channel *ch, uint64_t bytes)
{
        struct channel_tcp *t = to_tcp(ch);
        int want = bytes >= LONG_PAYLOAD_LOWAT ? LONG_PAYLOAD_LOWAT : 1;

        if (want != t->lowat &&
            setsockopt(t->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) == 0)
                t->lowat = want;
}

/* The kernel tells readiness through epoll: always worth a try. */
static bool tcp_readable(struct channel *ch)
{
        return !to_tcp(ch)->eof;
}

static bool tcp_arm(struct channel *ch, bool want_data, bool want_room)
{
        (void)ch;
        (void)want_data;
        (void)want_room;
        return true;
}

static void tcp_disarm(struct channel *ch)
{
        (void)ch;
}

static void tcp_woken(struct channel *ch)
{
        (void)ch;
}

static unsigned tcp_poll_events(struct channel *ch, bool want_data, bool want_room)
{
        (void)ch;
        /* The peer's end of stream is data too: it stays readable. */
        return (want_data ? EPOLLIN | EPOLLRDHUP : 0) | (want_room ? EPOLLOUT : 0);
}

static void tcp_shutdown(struct channel *ch)
{
        struct channel_tcp *t = to_tcp(ch);

        /* Later, at destroy, when the peer's FIN has usually come
         * (channel.h). */
        if (ch->fin_last && ch->graceful_end && !t->eof)
                return;
        shutdown(t->fd, SHUT_WR);
}

static bool tcp_ends_after_peer(struct channel *ch)
{
        return ch->fin_last && ch->graceful_end && !to_tcp(ch)->eof;
}

static void tcp_destroy(struct channel *ch)
{
        struct channel_tcp *t = to_tcp(ch);
        char sink[4096];

        /* Unread bytes at close() make the kernel reset the connection,
         * which can destroy what the peer has not read yet of ours (an
         * error response, a BYE): read what is there first. */
        shutdown(t->fd, SHUT_WR);
        for (int i = 0; i < 64 && recv(t->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
                ;
        close(t->fd);
        if (ch->peer_pidfd >= 0)
                close(ch->peer_pidfd);
        free(t);
}

static const struct channel_ops tcp_ops = {
        .name = "tcp",
        .writev = tcp_writev,
        .readv = tcp_readv,
        .expect = tcp_expect,
        .readable = tcp_readable,
        .arm = tcp_arm,
        .disarm = tcp_disarm,
        .woken = tcp_woken,
        .poll_events = tcp_poll_events,
        .shutdown = tcp_shutdown,
        .ends_after_peer = tcp_ends_after_peer,
        .destroy = tcp_destroy,
        .unsent = tcp_unsent,
};

/* $DATD_TCP_SOCKBUF bytes of socket buffer each way, for tests that make
 * every frame go in pieces (the kernel's own sizing otherwise). */
static void set_buffer_sizes(int fd)
{
        const char *e = getenv("DATD_TCP_SOCKBUF");
        long v = e ? strtol(e, NULL, 10) : 0;
        int n = (int)v;

        if (v <= 0 || v > (1 << 30))
                return;
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof(n));
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof(n));
}

int channel_tcp_create(const struct datp_ev_data_channel *ev, int *fds, unsigned nfds,
                       struct channel **out)
{
        struct channel_tcp *t;
        int one = 1, type = 0, flags;
        socklen_t len = sizeof(type);

        /* getsockopt fails on anything that is no socket. */
        if (nfds != 1 || getsockopt(fds[0], SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
            type != SOCK_STREAM) {
                channel_close_fds(fds, nfds);
                return -EPROTO;
        }
        t = calloc(1, sizeof(*t));
        if (!t) {
                channel_close_fds(fds, nfds);
                return -ENOMEM;
        }
        /* Latency first: a DTO frame goes out when it is posted. */
        (void)setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        set_buffer_sizes(fds[0]);
        flags = fcntl(fds[0], F_GETFL);
        if (flags >= 0)
                (void)fcntl(fds[0], F_SETFL, flags | O_NONBLOCK);
        t->fd = fds[0];
        fds[0] = -1;
        t->lowat = 1;
        t->ch.ops = &tcp_ops;
        t->ch.poll_fd = t->fd;
        t->ch.peer_pid = ev->peer_pid;
        t->ch.peer_pidfd = -1;
        t->ch.same_host = false;
        t->ch.lingers = true;
        t->ch.poll_by_fd = true;
        *out = &t->ch;
        return 0;
}
