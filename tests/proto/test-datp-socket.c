/* datp_send()/datp_recv() over a real socketpair(AF_UNIX, SOCK_SEQPACKET). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/proto/datp_samples.h"

/* Highest descriptor number the leak checks look at. */
#define FD_SCAN 1024

static int sv[2];

static void open_pair(void)
{
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0, "%m");
}

static void close_pair(void)
{
        close(sv[0]);
        close(sv[1]);
}

TestSuite(datp_socket, .init = open_pair, .fini = close_pair, .timeout = 10);

static bool fd_open(int fd)
{
        return fcntl(fd, F_GETFD) >= 0;
}

struct fd_snapshot {
        bool open[FD_SCAN];
};

static void snapshot_fds(struct fd_snapshot *snap)
{
        for (int fd = 0; fd < FD_SCAN; fd++)
                snap->open[fd] = fd_open(fd);
}

/* Every descriptor open now was open at the snapshot, except the ones allowed. */
static void expect_no_new_fds(const struct fd_snapshot *before, const int *allowed, unsigned n)
{
        for (int fd = 0; fd < FD_SCAN; fd++) {
                bool ok = before->open[fd] || !fd_open(fd);

                for (unsigned i = 0; i < n && !ok; i++)
                        ok = allowed[i] == fd;
                cr_expect(ok, "fd %d leaked", fd);
        }
}

/* Sends n copies of fd in one packet carrying a valid IA_CLOSE, bypassing
 * datp_send()'s DATP_MAX_FDS limit. */
static void send_raw_fds(int fd, unsigned n)
{
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 64)];
        } control = { 0 };
        union datp_message m;
        struct iovec iov = { .iov_base = &m };
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = CMSG_SPACE(sizeof(int) * n),
        };
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&mh);

        cr_assert_leq(n, 64);
        datp_sample_build_type(DATP_IA_CLOSE, &m);
        iov.iov_len = m.hdr.length;
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n);
        for (unsigned i = 0; i < n; i++)
                memcpy(CMSG_DATA(cmsg) + i * sizeof(int), &fd, sizeof(int));
        cr_assert_eq(sendmsg(sv[0], &mh, MSG_NOSIGNAL), (ssize_t) iov.iov_len, "%m");
}

Test(datp_socket, every_type_crosses_the_socket_intact)
{
        for (size_t i = 0; i < datp_n_samples; i++) {
                const struct datp_sample *s = &datp_samples[i];
                union datp_message out, in;
                unsigned nfds = 99;
                size_t len = datp_sample_build(s, &out);
                ssize_t n;

                cr_assert_eq(datp_send(sv[0], &out.hdr, NULL, 0), 0);
                n = datp_recv(sv[1], &in, NULL, 0, &nfds);
                cr_assert_eq(n, (ssize_t) len, "%s", datp_type_name(s->type));
                cr_expect_eq(nfds, 0);
                cr_expect_arr_eq(&in, &out, len);
                cr_expect_eq(datp_validate(&in, n, nfds, s->dir, s->version, NULL), DATP_OK);
        }
}

Test(datp_socket, oversized_packet_is_reported_with_its_real_length)
{
        static unsigned char big[DATP_MAX_MESSAGE + 100];
        union datp_message in;
        unsigned nfds;
        ssize_t n;

        datp_sample_build_type(DATP_IA_CLOSE, (union datp_message *) big);
        cr_assert_eq(send(sv[0], big, sizeof(big), 0), (ssize_t) sizeof(big), "%m");
        n = datp_recv(sv[1], &in, NULL, 0, &nfds);
        cr_expect_eq(n, (ssize_t) sizeof(big));
        cr_expect_eq(datp_validate(&in, n, nfds, DATP_TO_DAEMON, 1, NULL), -DATP_E_OVERSIZE);
}

Test(datp_socket, send_refuses_lengths_outside_header_and_max_message)
{
        union datp_message m;

        datp_sample_build_type(DATP_IA_CLOSE, &m);
        m.hdr.length = DATP_MAX_MESSAGE + 1;
        cr_expect_eq(datp_send(sv[0], &m.hdr, NULL, 0), -EMSGSIZE);
        m.hdr.length = sizeof(m.hdr) - 1;
        cr_expect_eq(datp_send(sv[0], &m.hdr, NULL, 0), -EINVAL);
}

/* datp_send_many: each message its own packet, in order, whole. */
Test(datp_socket, send_many_sends_each_message_as_its_own_packet_in_order)
{
        static const uint16_t types[] = { DATP_CHANNEL_RELEASE, DATP_DISCONNECT, DATP_CONNECT };
        union datp_message out[3], in;
        const struct datp_header *hdrs[3];
        unsigned nfds;

        for (unsigned i = 0; i < 3; i++) {
                datp_sample_build_type(types[i], &out[i]);
                hdrs[i] = &out[i].hdr;
        }
        unsigned sent = 99;

        cr_assert_eq(datp_send_many(sv[0], hdrs, 3, &sent), 0);
        cr_expect_eq(sent, 3);
        for (unsigned i = 0; i < 3; i++) {
                ssize_t n = datp_recv(sv[1], &in, NULL, 0, &nfds);

                cr_assert_eq(n, (ssize_t)out[i].hdr.length, "packet %u", i);
                cr_expect_arr_eq(&in, &out[i], (size_t)n);
        }
        cr_expect_eq(datp_send_many(sv[0], hdrs, 0, NULL), 0, "nothing to send");
}

/* A message datp_send would refuse makes the batch send nothing at all; a
 * batch above DATP_SEND_MANY_MAX is refused whole. */
Test(datp_socket, send_many_refuses_a_bad_message_before_sending_any)
{
        union datp_message a, b;
        const struct datp_header *hdrs[DATP_SEND_MANY_MAX + 1];
        char byte;

        datp_sample_build_type(DATP_IA_CLOSE, &a);
        datp_sample_build_type(DATP_IA_CLOSE, &b);
        b.hdr.length = DATP_MAX_MESSAGE + 1;
        hdrs[0] = &a.hdr;
        hdrs[1] = &b.hdr;
        unsigned sent = 99;

        cr_expect_eq(datp_send_many(sv[0], hdrs, 2, &sent), -EMSGSIZE);
        cr_expect_eq(sent, 0);
        b.hdr.length = sizeof(b.hdr) - 1;
        cr_expect_eq(datp_send_many(sv[0], hdrs, 2, NULL), -EINVAL);
        for (unsigned i = 0; i <= DATP_SEND_MANY_MAX; i++)
                hdrs[i] = &a.hdr;
        cr_expect_eq(datp_send_many(sv[0], hdrs, DATP_SEND_MANY_MAX + 1, NULL), -EINVAL);
        cr_expect_eq(recv(sv[1], &byte, 1, MSG_DONTWAIT), -1, "nothing went");
        cr_expect_eq(errno, EAGAIN);
}

/* On a non-blocking socket that fills in the middle of a batch: -EAGAIN,
 * and *sent says how many went (what datd queues the rest after). */
Test(datp_socket, send_many_on_a_socket_that_fills_says_how_many_went)
{
        union datp_message m;
        const struct datp_header *hdrs[DATP_SEND_MANY_MAX];
        unsigned sent = 0, total = 0, got = 0;
        int r = 0;

        datp_sample_build_type(DATP_IA_OPEN | DATP_REPLY, &m);
        for (unsigned i = 0; i < DATP_SEND_MANY_MAX; i++)
                hdrs[i] = &m.hdr;
        cr_assert_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
        /* Bounded: the socket buffer fills long before this many packets. */
        for (int i = 0; i < 10000 && r == 0; i++) {
                r = datp_send_many(sv[0], hdrs, DATP_SEND_MANY_MAX, &sent);
                total += sent;
                if (r == 0)
                        cr_assert_eq(sent, DATP_SEND_MANY_MAX);
        }
        cr_expect_eq(r, -EAGAIN);
        cr_expect_lt(sent, DATP_SEND_MANY_MAX);
        cr_assert_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
        while (recv(sv[1], &m, sizeof(m), 0) > 0)
                got++;
        cr_expect_eq(got, total, "every packet said to have gone is there, and no other");
}

Test(datp_socket, send_many_to_a_closed_peer_is_epipe)
{
        union datp_message a;
        const struct datp_header *hdrs[1] = { &a.hdr };

        datp_sample_build_type(DATP_IA_CLOSE, &a);
        close(sv[1]);
        sv[1] = -1;
        cr_expect_eq(datp_send_many(sv[0], hdrs, 1, NULL), -EPIPE);
}

Test(datp_socket, send_refuses_more_than_max_fds)
{
        union datp_message m;
        int fds[DATP_MAX_FDS + 1];

        for (unsigned i = 0; i < DATP_MAX_FDS + 1; i++)
                fds[i] = 0;
        datp_sample_build_type(DATP_IA_CLOSE, &m);
        cr_expect_eq(datp_send(sv[0], &m.hdr, fds, DATP_MAX_FDS + 1), -EINVAL);
        cr_expect_eq(datp_send(sv[0], &m.hdr, NULL, 1), -EINVAL);
}

Test(datp_socket, fds_received_with_max_fds_zero_are_closed_and_counted)
{
        struct fd_snapshot before;
        union datp_message m, in;
        int fds[2] = { sv[0], sv[1] };
        unsigned nfds = 0;
        ssize_t n;

        datp_sample_build_type(DATP_IA_CLOSE, &m);
        snapshot_fds(&before);
        cr_assert_eq(datp_send(sv[0], &m.hdr, fds, 2), 0);
        n = datp_recv(sv[1], &in, NULL, 0, &nfds);
        cr_expect_eq(n, (ssize_t) m.hdr.length);
        cr_expect_eq(nfds, 2);
        expect_no_new_fds(&before, NULL, 0);
        cr_expect_eq(datp_validate(&in, n, nfds, DATP_TO_DAEMON, 1, NULL), -DATP_E_FDS);
}

Test(datp_socket, fds_beyond_max_fds_are_closed_and_the_kept_one_is_cloexec)
{
        struct fd_snapshot before;
        union datp_message m, in;
        int out[3] = { sv[0], sv[0], sv[0] };
        int got[2] = { 99, 99 };
        unsigned nfds = 0;

        datp_sample_build_type(DATP_IA_CLOSE, &m);
        snapshot_fds(&before);
        cr_assert_eq(datp_send(sv[0], &m.hdr, out, 3), 0);
        cr_assert_eq(datp_recv(sv[1], &in, got, 1, &nfds), (ssize_t) m.hdr.length);
        cr_expect_eq(nfds, 3);
        cr_assert_geq(got[0], 0);
        cr_expect_eq(got[1], 99, "datp_recv wrote past max_fds");
        cr_expect(fcntl(got[0], F_GETFD) & FD_CLOEXEC, "received fd is not close-on-exec");
        expect_no_new_fds(&before, got, 1);
        close(got[0]);
}

Test(datp_socket, truncated_control_data_closes_every_fd_and_still_counts)
{
        struct fd_snapshot before;
        union datp_message in;
        int got[4] = { 99, 99, 99, 99 };
        unsigned nfds = 0;

        snapshot_fds(&before);
        send_raw_fds(sv[0], DATP_MAX_FDS + 4);
        cr_assert_gt(datp_recv(sv[1], &in, got, 4, &nfds), 0);
        cr_expect_geq(nfds, 1);
        for (unsigned i = 0; i < 4; i++)
                cr_expect_eq(got[i], -1, "slot %u holds %d after MSG_CTRUNC", i, got[i]);
        expect_no_new_fds(&before, NULL, 0);
}

Test(datp_socket, slots_without_a_received_fd_are_minus_one)
{
        union datp_message m, in;
        int got[3] = { 99, 99, 99 };
        unsigned nfds = 99;

        datp_sample_build_type(DATP_IA_QUERY, &m);
        cr_assert_eq(datp_send(sv[0], &m.hdr, NULL, 0), 0);
        cr_assert_eq(datp_recv(sv[1], &in, got, 3, &nfds), (ssize_t) m.hdr.length);
        cr_expect_eq(nfds, 0);
        for (unsigned i = 0; i < 3; i++)
                cr_expect_eq(got[i], -1);
}

Test(datp_socket, recv_returns_zero_on_orderly_shutdown)
{
        union datp_message in;
        unsigned nfds;

        close(sv[0]);
        sv[0] = -1;
        cr_expect_eq(datp_recv(sv[1], &in, NULL, 0, &nfds), 0);
}

Test(datp_socket, recv_on_an_empty_nonblocking_socket_is_eagain)
{
        union datp_message in;
        unsigned nfds;

        cr_assert_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
        cr_expect_eq(datp_recv(sv[1], &in, NULL, 0, &nfds), -EAGAIN);
}

Test(datp_socket, send_on_a_full_nonblocking_socket_is_eagain)
{
        union datp_message m;
        int r = 0;

        datp_sample_build_type(DATP_IA_OPEN | DATP_REPLY, &m);
        cr_assert_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
        /* Bounded: the socket buffer fills long before this many packets. */
        for (int i = 0; i < 100000 && r == 0; i++)
                r = datp_send(sv[0], &m.hdr, NULL, 0);
        cr_expect_eq(r, -EAGAIN);
}

Test(datp_socket, send_to_a_closed_peer_is_epipe)
{
        union datp_message m;

        datp_sample_build_type(DATP_IA_CLOSE | DATP_REPLY, &m);
        close(sv[1]);
        sv[1] = -1;
        cr_expect_eq(datp_send(sv[0], &m.hdr, NULL, 0), -EPIPE);
}

static volatile sig_atomic_t interrupted;

static void on_sigusr1(int sig)
{
        interrupted = 1;
}

struct interrupter {
        pthread_t target;
        int sock;
};

/* Interrupts the main thread's blocking datp_recv(), then sends the packet. */
static void *interrupt_then_send(void *arg)
{
        const struct interrupter *it = arg;
        const struct timespec pause = { .tv_nsec = 50 * 1000 * 1000 };
        union datp_message m;

        datp_sample_build_type(DATP_IA_QUERY, &m);
        nanosleep(&pause, NULL);
        pthread_kill(it->target, SIGUSR1);
        nanosleep(&pause, NULL);
        datp_send(it->sock, &m.hdr, NULL, 0);
        return NULL;
}

Test(datp_socket, recv_retries_after_eintr)
{
        /* No SA_RESTART: the kernel returns EINTR and datp_recv must retry. */
        struct sigaction sa = { .sa_handler = on_sigusr1 };
        struct interrupter it = { .target = pthread_self(), .sock = sv[0] };
        union datp_message in;
        unsigned nfds;
        pthread_t thread;
        ssize_t n;

        cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
        cr_assert_eq(pthread_create(&thread, NULL, interrupt_then_send, &it), 0);
        n = datp_recv(sv[1], &in, NULL, 0, &nfds);
        pthread_join(thread, NULL);
        cr_expect(interrupted, "the signal never arrived");
        cr_expect_eq(n, (ssize_t) sizeof(struct datp_ia_query));
}

/* ---- datp_try_recv_batch ------------------------------------------------ */

/* What one datp_try_recv_batch call fills. */
static struct batch {
        union datp_message in[DATP_BATCH_MAX];
        int fds[DATP_BATCH_MAX][DATP_MAX_FDS];
        ssize_t lens[DATP_BATCH_MAX];
        unsigned nfds[DATP_BATCH_MAX];
} b;

static int take_batch(unsigned n)
{
        return datp_try_recv_batch(sv[1], b.in, n, b.fds, b.lens, b.nfds);
}

/* The packets that are there, in order, each with its own length and
 * descriptors; fewer than asked when fewer wait; -EAGAIN when none. */
Test(datp_socket, a_batch_takes_the_packets_there_in_order_with_their_fds)
{
        union datp_message m[3];
        int out[2] = { sv[0], sv[0] };
        struct fd_snapshot before;

        datp_sample_build_type(DATP_IA_QUERY, &m[0]);
        datp_sample_build_type(DATP_IA_CLOSE, &m[1]);
        datp_sample_build_type(DATP_OBJ_CREATE, &m[2]);
        snapshot_fds(&before);
        cr_assert_eq(datp_send(sv[0], &m[0].hdr, NULL, 0), 0);
        cr_assert_eq(datp_send(sv[0], &m[1].hdr, out, 2), 0);
        cr_assert_eq(datp_send(sv[0], &m[2].hdr, NULL, 0), 0);
        cr_assert_eq(take_batch(DATP_BATCH_MAX), 3);
        for (unsigned i = 0; i < 3; i++) {
                cr_expect_eq(b.lens[i], (ssize_t)m[i].hdr.length, "packet %u", i);
                cr_expect_eq(memcmp(&b.in[i], &m[i], m[i].hdr.length), 0, "packet %u", i);
        }
        cr_expect_eq(b.nfds[0], 0);
        cr_expect_eq(b.fds[0][0], -1);
        cr_expect_eq(b.nfds[1], 2);
        cr_assert_geq(b.fds[1][0], 0);
        cr_assert_geq(b.fds[1][1], 0);
        cr_expect_eq(b.fds[1][2], -1);
        cr_expect(fcntl(b.fds[1][0], F_GETFD) & FD_CLOEXEC, "received fd is not close-on-exec");
        cr_expect_eq(b.nfds[2], 0);
        expect_no_new_fds(&before, b.fds[1], 2);
        close(b.fds[1][0]);
        close(b.fds[1][1]);
        cr_expect_eq(take_batch(DATP_BATCH_MAX), -EAGAIN);
}

/* Asked for fewer than wait: the rest stay for the next call. */
Test(datp_socket, a_batch_leaves_what_it_was_not_asked_for)
{
        union datp_message m;

        datp_sample_build_type(DATP_IA_QUERY, &m);
        for (int i = 0; i < 3; i++)
                cr_assert_eq(datp_send(sv[0], &m.hdr, NULL, 0), 0);
        cr_expect_eq(take_batch(2), 2);
        cr_expect_eq(take_batch(2), 1);
        cr_expect_eq(b.lens[0], (ssize_t)m.hdr.length);
        cr_expect_eq(take_batch(0), -EINVAL);
        cr_expect_eq(take_batch(DATP_BATCH_MAX + 1), -EINVAL);
}

/* The end of the connection is a packet of length 0, as for datp_recv. */
Test(datp_socket, a_batch_after_the_peer_closed_says_length_zero)
{
        union datp_message m;
        int n;

        datp_sample_build_type(DATP_IA_QUERY, &m);
        cr_assert_eq(datp_send(sv[0], &m.hdr, NULL, 0), 0);
        close(sv[0]);
        sv[0] = -1;
        n = take_batch(DATP_BATCH_MAX);
        cr_assert_geq(n, 2);
        cr_expect_eq(b.lens[0], (ssize_t)m.hdr.length);
        cr_expect_eq(b.lens[1], 0);
}
