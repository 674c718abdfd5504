/* Send / Receive between two processes (dat_ep_post_send(3DAT),
 * dat_ep_post_recv(3DAT)), and the two ways of taking their completions
 * (dat_evd_wait(3DAT), dat_evd_dequeue(3DAT)), on the transport this
 * program was built for (tests/dto/dto_fixture.h). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(send);

/* Guard bytes checked on both sides of a receive's data. */
#define GUARD 16

struct sizes {
        const DAT_VLEN *v;
        unsigned n;
};

/* One message of len bytes from sender to receiver: the sender's data at an
 * unaligned offset of the first half of its buffer, the receiver's buffer
 * at another unaligned offset of the second half, with guard bytes around
 * it that must stay as they were. */
static void one_message(struct dto_side *s, bool sending, DAT_VLEN len, unsigned i)
{
        DAT_VLEN half = s->mem.len / 2, off = 1 + 3 * i, roff = half + 5 + i;
        uint64_t seed = 100 + i, guard_seed = 900 + i;

        if (sending) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, off, len);

                dto_fill(s->mem.buf + off, len, seed);
                dto_barrier(s); /* the receive is posted */
                dto_send_wait(s, s->ep[0], &iov, 1, seed);
        } else {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, roff, len + GUARD);
                unsigned char *at = s->mem.buf + roff;

                dto_fill(at - GUARD, len + 3 * GUARD, guard_seed);
                dto_post_recv(s, s->ep[0], &iov, 1, seed);
                dto_barrier(s);
                dto_expect_recv(s, s->ep[0], seed, len);
                dto_verify(at, len, seed);
                dto_verify_at(at - GUARD, GUARD, guard_seed, 0);
                dto_verify_at(at + len, 2 * GUARD, guard_seed, GUARD + len);
        }
}

static void sizes_both_ways(struct dto_side *s, void *arg)
{
        const struct sizes *sz = arg;

        /* client -> server, then server -> client */
        for (unsigned i = 0; i < sz->n; i++)
                one_message(s, s->role == DTO_CLIENT, sz->v[i], i);
        for (unsigned i = 0; i < sz->n; i++)
                one_message(s, s->role == DTO_SERVER, sz->v[i], i);
}

/* dat_ep_post_send(3DAT): "transfer of all the data from the local_iov ...
 * to the remote side"; dat_ep_post_recv(3DAT): the message lands in the
 * local_iov, its size is the completion's transfered_length, nothing beyond
 * it is written.  Sizes 0 .. 64 KiB + 3 at unaligned offsets, both ways. */
Test(DTO_SUITE(send), small_messages_arrive_intact_both_ways)
{
        struct sizes sz = { dto_small_sizes, dto_n_small_sizes };

        dto_run(NULL, sizes_both_ways, sizes_both_ways, &sz);
}

/* The same for 1 MiB and 16 MiB (the IA's max_message_size): the payloads
 * that go by cross-memory attach where the kernel allows it. */
Test(DTO_SUITE(send), large_messages_arrive_intact_both_ways)
{
        struct sizes sz = { dto_large_sizes, dto_n_large_sizes };
        struct dto_config cfg = { .buf_len = 2 * (DTO_LARGEST_SIZE + 4096) };

        dto_run(&cfg, sizes_both_ways, sizes_both_ways, &sz);
}

/* ---- a backlog of sends --------------------------------------------------- */

/* Sends of 9 to 12 KiB (inline: below DTO_CMA_THRESHOLD), 40 of them: more
 * than a channel holds (the shm ring's 256 KiB; a small TCP socket buffer
 * on tcpsmall), so that while the peer takes none, later frames go out in
 * pieces as room frees. */
#define BACKLOG_N 40
#define BACKLOG_SLOT 12800

static DAT_VLEN backlog_len(unsigned k)
{
        return 9000 + 83 * k;
}

static void backlog_sender(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned k = 0; k < BACKLOG_N; k++) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 1 + k * BACKLOG_SLOT, backlog_len(k));

                dto_fill(s->mem.buf + 1 + k * BACKLOG_SLOT, backlog_len(k), 500 + k);
                DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(k),
                                               DAT_COMPLETION_DEFAULT_FLAG),
                              DAT_SUCCESS);
        }
        dto_barrier(s);
        for (unsigned k = 0; k < BACKLOG_N; k++)
                dto_expect_dto(s->request_evd, s->ep[0], k, DAT_DTO_SUCCESS, backlog_len(k),
                               DAT_DTO_SEND);
}

static void backlog_receiver(struct dto_side *s, void *arg)
{
        (void)arg;
        /* No receive yet: the first Send waits for one (receiver not
         * ready), everything behind it in the channel. */
        dto_barrier(s);
        for (unsigned k = 0; k < BACKLOG_N; k++) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 3 + k * BACKLOG_SLOT, BACKLOG_SLOT - 8);

                dto_post_recv(s, s->ep[0], &iov, 1, k);
        }
        for (unsigned k = 0; k < BACKLOG_N; k++) {
                dto_expect_recv(s, s->ep[0], k, backlog_len(k));
                dto_verify(s->mem.buf + 3 + k * BACKLOG_SLOT, backlog_len(k), 500 + k);
        }
}

/* dat_ep_post_send(3DAT): posting returns at once, whatever the channel
 * holds; the messages go when there is room, in post order and intact
 * (each that did not fit whole goes on from where it stopped). */
Test(DTO_SUITE(send), sends_posted_while_the_peer_takes_none_arrive_intact_in_order)
{
        static const char *const env[] = { "DATD_RNR_TIMEOUT_MS=30000", NULL };
        struct dto_config cfg = { .buf_len = BACKLOG_N * BACKLOG_SLOT + 4096, .env = env };

        dto_run(&cfg, backlog_receiver, backlog_sender, NULL);
}

/* ---- gather / scatter ------------------------------------------------------ */

struct segs {
        DAT_VLEN base, step;    /* the sender's segment k has base + k * step bytes */
};

/* The sender gathers max_request_iov segments scattered over its buffer;
 * the receiver scatters into max_recv_iov segments of another shape: 3/4 of
 * them hold the message, the rest must stay untouched. */
static void gather_scatter(struct dto_side *s, bool sending, const struct segs *g, uint64_t seed)
{
        DAT_LMR_TRIPLET iov[64];
        unsigned n = (unsigned)(sending ? s->ep_attr.max_request_iov : s->ep_attr.max_recv_iov);
        DAT_VLEN total = 0, stride = s->mem.len / 64, at = 0;
        unsigned peer_n;

        DTO_ASSERT(n >= 1 && n <= 64);
        dto_put_u64(s, n);
        peer_n = (unsigned)dto_get_u64(s);
        for (unsigned k = 0; k < (sending ? n : peer_n); k++)
                total += g->base + k * g->step;
        if (sending) {
                for (unsigned k = 0; k < n; k++) {
                        iov[k] = dto_iov(&s->mem, k * stride + 1 + k % 7, g->base + k * g->step);
                        dto_fill_at((void *)(uintptr_t)iov[k].virtual_address,
                                    iov[k].segment_length, seed, at);
                        at += iov[k].segment_length;
                }
                dto_barrier(s);
                dto_send_wait(s, s->ep[0], iov, n, seed);
                return;
        }
        /* receiving: n segments of total / (3n/4) bytes, rounded up */
        {
                unsigned used = n * 3 / 4 ? n * 3 / 4 : 1;
                DAT_VLEN seg = (total + used - 1) / used + 1;

                DTO_ASSERTF(seg < stride, "segments of %llu bytes do not fit the buffer",
                            (unsigned long long)seg);
                for (unsigned k = 0; k < n; k++) {
                        iov[k] = dto_iov(&s->mem, k * stride + 3 + k % 5, seg);
                        dto_fill((void *)(uintptr_t)iov[k].virtual_address, seg, 7000 + k);
                }
                dto_post_recv(s, s->ep[0], iov, n, seed);
                dto_barrier(s);
                dto_expect_recv(s, s->ep[0], seed, total);
                /* dat_ep_post_recv(3DAT): front segments filled completely,
                 * one partially, the ones after it not at all */
                for (unsigned k = 0; k < n; k++) {
                        const unsigned char *p = (const void *)(uintptr_t)iov[k].virtual_address;
                        DAT_VLEN filled = at >= total ? 0 : total - at < seg ? total - at : seg;

                        dto_verify_at(p, filled, seed, at);
                        dto_verify_at(p + filled, seg - filled, 7000 + k, filled);
                        at += filled;
                }
        }
}

static void gather_scatter_both_ways(struct dto_side *s, void *arg)
{
        gather_scatter(s, s->role == DTO_CLIENT, arg, 41);
        gather_scatter(s, s->role == DTO_SERVER, arg, 42);
}

/* dat_ep_post_send(3DAT): "the local_iov segments are traversed in the I/O
 * Vector order"; dat_ep_post_recv(3DAT): filled in I/O Vector order, front
 * segments completely, one partially, the rest not at all.  As many
 * segments as the EP allows (the IA's max_iov_segments_per_dto), a message
 * under 16 KiB (inline). */
Test(DTO_SUITE(send), segments_gather_and_scatter_in_order_small)
{
        struct segs g = { .base = 1, .step = 37 };
        struct dto_config cfg = { .buf_len = 1 << 20 };

        dto_run(&cfg, gather_scatter_both_ways, gather_scatter_both_ways, &g);
}

/* The same with a message over DTO_CMA_THRESHOLD (about 200 KiB). */
Test(DTO_SUITE(send), segments_gather_and_scatter_in_order_large)
{
        struct segs g = { .base = 4097, .step = 1237 };
        struct dto_config cfg = { .buf_len = 4 << 20 };

        dto_run(&cfg, gather_scatter_both_ways, gather_scatter_both_ways, &g);
}

/* ---- zero-length ----------------------------------------------------------- */

static void zero_segments_client(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);
        DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 0, NULL, dto_cookie(5), 0), DAT_SUCCESS);
        dto_expect_dto(s->request_evd, s->ep[0], 5, DAT_DTO_SUCCESS, 0, DAT_DTO_SEND);
}

static void zero_segments_server(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 64);

        (void)arg;
        dto_fill(s->mem.buf, 64, 3);
        dto_post_recv(s, s->ep[0], &iov, 1, 6);
        dto_barrier(s);
        dto_expect_recv(s, s->ep[0], 6, 0);
        dto_verify(s->mem.buf, 64, 3);
}

/* dat_ep_post_send(3DAT): num_segments "can be 0 for 0 size message",
 * local_iov "can be NULL for 0 size message": it consumes a receive, which
 * completes with length 0 and its buffer untouched. */
Test(DTO_SUITE(send), zero_segments_send_an_empty_message)
{
        dto_run(NULL, zero_segments_server, zero_segments_client, NULL);
}

/* ---- ordering -------------------------------------------------------------- */

#define N_ORDERED 32
#define ORDERED_SLOT 40000

static DAT_VLEN ordered_len(unsigned k)
{
        return (DAT_VLEN)((k * 2731u) % ORDERED_SLOT); /* some above 16 KiB, one 0 */
}

struct order_check {
        bool requests;  /* assert the sender's completions' order, else the receiver's */
};

static void ordered_sender(struct dto_side *s, void *arg)
{
        const struct order_check *oc = arg;
        DAT_DTO_COMPLETION_EVENT_DATA got[N_ORDERED];
        DAT_LMR_TRIPLET iov;

        for (unsigned k = 0; k < N_ORDERED; k++)
                dto_fill(s->mem.buf + k * ORDERED_SLOT, ordered_len(k), 300 + k);
        dto_barrier(s); /* every receive is posted */
        for (unsigned k = 0; k < N_ORDERED; k++) {
                iov = dto_iov(&s->mem, k * ORDERED_SLOT, ordered_len(k));
                DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(1000 + k), 0),
                              DAT_SUCCESS);
        }
        for (unsigned k = 0; k < N_ORDERED; k++) {
                DAT_EVENT ev = dto_wait_event(s->request_evd);

                got[k] = ev.event_data.dto_completion_event_data;
                DTO_ASSERT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT);
                DTO_ASSERT_EQ(got[k].status, DAT_DTO_SUCCESS);
                DTO_ASSERT_EQ(got[k].operation, DAT_DTO_SEND);
        }
        if (!oc->requests)
                return;
        /* dat_ep_post_send(3DAT) on a reliable connection: in post order */
        for (unsigned k = 0; k < N_ORDERED; k++) {
                DTO_ASSERTF(got[k].user_cookie.as_64 == 1000 + k,
                            "completion %u has cookie %llu, expected %u", k,
                            (unsigned long long)got[k].user_cookie.as_64, 1000 + k);
                DTO_ASSERT_EQ(got[k].transfered_length, ordered_len(k));
        }
}

static void ordered_receiver(struct dto_side *s, void *arg)
{
        const struct order_check *oc = arg;

        for (unsigned k = 0; k < N_ORDERED; k++) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, k * ORDERED_SLOT, ORDERED_SLOT);

                dto_post_recv(s, s->ep[0], &iov, 1, 2000 + k);
        }
        dto_barrier(s);
        for (unsigned k = 0; k < N_ORDERED; k++) {
                DAT_EVENT ev = dto_wait_event(s->recv_evd);
                const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
                unsigned slot;

                DTO_ASSERT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT);
                DTO_ASSERT_EQ(d->status, DAT_DTO_SUCCESS);
                DTO_ASSERT_EQ(d->operation, DAT_DTO_RECEIVE);
                slot = (unsigned)(d->user_cookie.as_64 - 2000);
                DTO_ASSERTF(slot < N_ORDERED, "cookie %llu", (unsigned long long)d->user_cookie.as_64);
                if (oc->requests)
                        continue; /* the other test's rule */
                /* receives are consumed in post order and complete in the
                 * order the messages arrive (= the sender's post order) */
                DTO_ASSERTF(slot == k, "receive completion %u is the receive posted %u-th", k,
                            slot);
                DTO_ASSERT_EQ(d->transfered_length, ordered_len(k));
                dto_verify(s->mem.buf + k * ORDERED_SLOT, ordered_len(k), 300 + k);
        }
}

/* dat_ep_post_send(3DAT) / the DTO completion stream of a reliable
 * connection: requests complete on the request EVD in the order they were
 * posted, each with its own user_cookie and transfered_length. */
Test(DTO_SUITE(send), sends_complete_in_post_order)
{
        struct order_check oc = { .requests = true };
        struct dto_config cfg = { .buf_len = N_ORDERED * ORDERED_SLOT };

        dto_run(&cfg, ordered_receiver, ordered_sender, &oc);
}

/* dat_ep_post_recv(3DAT): receives are matched in the order they were
 * posted and complete in the order the messages arrive, with the message's
 * length (mixed sizes make a reordering visible). */
Test(DTO_SUITE(send), receives_complete_in_arrival_order)
{
        struct order_check oc = { .requests = false };
        struct dto_config cfg = { .buf_len = N_ORDERED * ORDERED_SLOT };

        dto_run(&cfg, ordered_receiver, ordered_sender, &oc);
}

/* ---- a receive posted before the connection -------------------------------- */

static void early_recv_server(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 4096);
        DAT_EP_STATE st;

        (void)arg;
        DTO_ASSERT_EQ(dat_ep_get_status(s->ep[0], &st, NULL, NULL), DAT_SUCCESS);
        DTO_ASSERT_EQ(st, DAT_EP_STATE_UNCONNECTED);
        dto_post_recv(s, s->ep[0], &iov, 1, 77);
        dto_expect_empty(s->recv_evd); /* no transfer before Connected */
        dto_connect(s);
        dto_expect_recv(s, s->ep[0], 77, 3000);
        dto_verify(s->mem.buf, 3000, 78);
}

static void early_recv_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 3000);

        (void)arg;
        dto_fill(s->mem.buf, 3000, 78);
        dto_connect(s);
        dto_send_wait(s, s->ep[0], &iov, 1, 79);
}

/* dat_ep_post_recv(3DAT): "The operation is valid for all states of the
 * Endpoint. The actual data transfer does not take place until the Endpoint
 * is in the DAT_EP_STATE_CONNECTED state": a receive posted to an
 * Unconnected EP takes the first message after the connection. */
Test(DTO_SUITE(send), receive_posted_while_unconnected_takes_the_first_message)
{
        struct dto_config cfg = { .no_connect = true };

        dto_run(&cfg, early_recv_server, early_recv_client, NULL);
}

/* ---- waiting and polling ---------------------------------------------------- */

static void idle_waiter(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 64);
        DAT_EVENT ev;
        DAT_COUNT nmore = -1;
        double cpu0, wall0, cpu, wall;
        DAT_RETURN r;

        (void)arg;
        dto_post_recv(s, s->ep[0], &iov, 1, 1); /* a receive outstanding, nothing coming */
        cpu0 = dto_cpu_seconds();
        wall0 = dto_wall_seconds();
        r = dat_evd_wait(s->recv_evd, 1000000, 1, &ev, &nmore);
        cpu = dto_cpu_seconds() - cpu0;
        wall = dto_wall_seconds() - wall0;
        DTO_ASSERT_TYPE(r, DAT_TIMEOUT_EXPIRED);
        DTO_ASSERT_EQ(nmore, 0);
        /* the whole process (the IA's progress thread included) sleeps */
        DTO_ASSERTF(cpu < 0.2 * wall, "%.3f s of CPU in a %.3f s idle dat_evd_wait", cpu, wall);
        dto_barrier(s);
}

static void idle_peer(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);
}

/* dat_evd_wait(3DAT): the consumer is "blocked waiting for the event
 * arrival" until the timeout (DAT_TIMEOUT_EXPIRED, nmore the queue size):
 * blocked, not spinning, so the CPU time of a 1 s idle wait on a connected
 * EP is a small fraction of it. */
Test(DTO_SUITE(send), evd_wait_sleeps_while_idle)
{
        dto_run(NULL, idle_waiter, idle_peer, NULL);
}

static void woken_receiver(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 512);
        struct dto_waiter w;

        (void)arg;
        dto_post_recv(s, s->ep[0], &iov, 1, 11);
        dto_waiter_start(&w, s->recv_evd, 1, DTO_WAIT_US);
        dto_barrier(s); /* the waiter sleeps: send now */
        dto_waiter_join(&w);
        DTO_ASSERT_EQ(w.ret, DAT_SUCCESS);
        dto_check_dto(&w.event, s->ep[0], 11, DAT_DTO_SUCCESS, 512, DAT_DTO_RECEIVE);
        dto_verify(s->mem.buf, 512, 12);
}

static void waking_sender(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 512);

        (void)arg;
        dto_fill(s->mem.buf, 512, 12);
        dto_barrier(s);
        dto_send_wait(s, s->ep[0], &iov, 1, 13);
}

/* dat_evd_wait(3DAT): a consumer blocked on the EVD is woken by the arrival
 * of the completion (the message came while it slept) and gets it. */
Test(DTO_SUITE(send), evd_wait_wakes_on_a_completion)
{
        dto_run(NULL, woken_receiver, waking_sender, NULL);
}

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441            /* the same on every architecture */
#endif
#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef NATIVE_AUDIT_ARCH

/* A kernel without epoll_pwait2 (before Linux 5.11), or a seccomp policy
 * that refuses it: the role's epoll_pwait2 fails with ENOSYS from here on. */
static void without_epoll_pwait2(const struct dto_side *s)
{
        struct sock_filter code[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_AUDIT_ARCH, 0, 3),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_epoll_pwait2, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };

        (void)s;
        DTO_ASSERT_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        DTO_ASSERT_EQ(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
        /* The filter holds: a bad descriptor would say EBADF. */
        DTO_ASSERT_EQ(syscall(SYS_epoll_pwait2, -1, NULL, 1, NULL, NULL, 0), -1);
        DTO_ASSERT_EQ(errno, ENOSYS);
}

/* Where epoll_pwait2 is missing, libdat's progress thread waits with
 * epoll_wait: the IAs open, messages flow both ways, and a consumer asleep
 * in dat_evd_wait is woken by a completion.  (Without the fallback the
 * progress thread ends at its first wait and the IA is unusable.) */
Test(DTO_SUITE(send), the_data_path_runs_without_epoll_pwait2)
{
        static const DAT_VLEN v[] = { 8, 5000 };
        struct sizes sz = { v, 2 };
        struct dto_config cfg = { .buf_len = 1 << 20, .pre_open = without_epoll_pwait2 };

        dto_run(&cfg, sizes_both_ways, sizes_both_ways, &sz);
        dto_run(&cfg, woken_receiver, waking_sender, NULL);
}
#endif

static void polling_side(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 20000);
        bool sending = s->role == DTO_CLIENT;
        DAT_EVENT ev;

        (void)arg;
        if (sending) {
                dto_fill(s->mem.buf, 20000, 21);
                dto_barrier(s);
                DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(22), 0),
                              DAT_SUCCESS);
                ev = dto_poll_event(s->request_evd);
                dto_check_dto(&ev, s->ep[0], 22, DAT_DTO_SUCCESS, 20000, DAT_DTO_SEND);
        } else {
                dto_post_recv(s, s->ep[0], &iov, 1, 23);
                dto_barrier(s);
                ev = dto_poll_event(s->recv_evd);
                dto_check_dto(&ev, s->ep[0], 23, DAT_DTO_SUCCESS, 20000, DAT_DTO_RECEIVE);
                dto_verify(s->mem.buf, 20000, 21);
        }
}

/* dat_evd_dequeue(3DAT): a consumer that only polls (never waits) sees
 * both ends' completions: the data path moves without dat_evd_wait. */
Test(DTO_SUITE(send), completions_reach_a_polling_consumer)
{
        dto_run(NULL, polling_side, polling_side, NULL);
}

/* ---- a stream's acknowledgements held back ---------------------------------- */

/* Over tcp a request posted behind several unacknowledged ones says its
 * acknowledgement may wait (dto_wire.h: DTO_F_ACK_LATER), and the receiver
 * then acknowledges a few at a time.  Whatever is left held back when the
 * stream stops, the sender asks for once it waits: every burst completes
 * whole, however many requests it holds past the last batch, whether the
 * sender polls or sleeps, and whether the receiving process polls or takes
 * nothing (RDMA Writes). */
#define BURST_MAX 12
#define BURST_ROUNDS 4          /* bursts of 1..BURST_MAX requests, this many times */
#define BURST_LEN 64

struct burst {
        bool write;             /* RDMA Writes (the target never polls), else Sends */
        bool polls;             /* both sides dat_evd_dequeue until it comes, else dat_evd_wait */
};

static DAT_DTO_COMPLETION_EVENT_DATA burst_next(DAT_EVD_HANDLE evd, bool polls, DAT_EP_HANDLE ep,
                                                uint64_t cookie, DAT_DTOS op)
{
        DAT_EVENT ev;

        if (!polls)
                return dto_expect_dto(evd, ep, cookie, DAT_DTO_SUCCESS, BURST_LEN, op);
        ev = dto_poll_event(evd);
        return dto_check_dto(&ev, ep, cookie, DAT_DTO_SUCCESS, BURST_LEN, op);
}

static void burst_sender(struct dto_side *s, const struct burst *b)
{
        for (unsigned i = 0; i < BURST_ROUNDS * BURST_MAX; i++) {
                unsigned n = 1 + i % BURST_MAX;
                DAT_EP_HANDLE ep = s->ep[i % s->n_eps];

                dto_barrier(s); /* the receives are posted */
                for (unsigned k = 0; k < n; k++) {
                        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, k * BURST_LEN, BURST_LEN);
                        uint64_t cookie = n * 100 + k;

                        dto_fill(s->mem.buf + k * BURST_LEN, BURST_LEN, cookie);
                        if (b->write) {
                                DAT_RMR_TRIPLET r = dto_riov(&s->peer, k * BURST_LEN, BURST_LEN);

                                DTO_ASSERT_EQ(dat_ep_post_rdma_write(ep, 1, &iov, dto_cookie(cookie),
                                                                     &r, DAT_COMPLETION_DEFAULT_FLAG),
                                              DAT_SUCCESS);
                        } else {
                                DTO_ASSERT_EQ(dat_ep_post_send(ep, 1, &iov, dto_cookie(cookie),
                                                               DAT_COMPLETION_DEFAULT_FLAG),
                                              DAT_SUCCESS);
                        }
                }
                for (unsigned k = 0; k < n; k++)
                        burst_next(s->request_evd, b->polls, ep, n * 100 + k,
                                   b->write ? DAT_DTO_RDMA_WRITE : DAT_DTO_SEND);
                dto_barrier(s); /* all of the burst is acknowledged */
        }
}

static void burst_receiver(struct dto_side *s, const struct burst *b)
{
        for (unsigned i = 0; i < BURST_ROUNDS * BURST_MAX; i++) {
                unsigned n = 1 + i % BURST_MAX;
                DAT_EP_HANDLE ep = s->ep[i % s->n_eps];

                if (!b->write)
                        for (unsigned k = 0; k < n; k++) {
                                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, k * BURST_LEN, BURST_LEN);

                                dto_post_recv(s, ep, &iov, 1, n * 100 + k);
                        }
                dto_barrier(s);
                /* The Writes' target takes nothing: its progress thread
                 * places them, and sleeps with what it may hold back. */
                if (!b->write)
                        for (unsigned k = 0; k < n; k++) {
                                burst_next(s->recv_evd, b->polls, ep, n * 100 + k,
                                           DAT_DTO_RECEIVE);
                                dto_verify(s->mem.buf + k * BURST_LEN, BURST_LEN, n * 100 + k);
                        }
                dto_barrier(s);
                if (b->write)
                        for (unsigned k = 0; k < n; k++)
                                dto_verify(s->mem.buf + k * BURST_LEN, BURST_LEN, n * 100 + k);
        }
}

static void burst_role(struct dto_side *s, void *arg)
{
        if (s->role == DTO_CLIENT)
                burst_sender(s, arg);
        else
                burst_receiver(s, arg);
}

Test(DTO_SUITE(send), every_burst_of_sends_completes_while_both_sides_poll)
{
        struct burst b = { .polls = true };

        dto_run(NULL, burst_role, burst_role, &b);
}

/* Eight connections polled through one EVD: with that many the poll asks
 * the kernel which channels have data, and one whose peer holds back its
 * acknowledgements has none, yet must ask for them. */
Test(DTO_SUITE(send), every_burst_of_sends_on_eight_connections_completes_while_both_sides_poll)
{
        struct dto_config cfg = { .n_eps = 8 };
        struct burst b = { .polls = true };

        dto_run(&cfg, burst_role, burst_role, &b);
}

Test(DTO_SUITE(send), every_burst_of_sends_completes_while_both_sides_sleep)
{
        struct burst b = { .polls = false };

        dto_run(NULL, burst_role, burst_role, &b);
}

Test(DTO_SUITE(send), every_burst_of_rdma_writes_completes_while_the_target_takes_nothing)
{
        struct burst b = { .write = true, .polls = true };

        dto_run(NULL, burst_role, burst_role, &b);
}

Test(DTO_SUITE(send), every_burst_of_rdma_writes_completes_while_the_initiator_sleeps)
{
        struct burst b = { .write = true, .polls = false };

        dto_run(NULL, burst_role, burst_role, &b);
}

/* A receiver stalled on a Send that has no receive yet reads nothing behind
 * it, the sender's asking included: what it holds back of the requests
 * before that Send goes at once.  dat_ep_post_send(3DAT): the Writes
 * posted before it complete while it waits. */
static void stalled_sender(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned i = 0; i < BURST_ROUNDS * BURST_MAX; i++) {
                unsigned n = 1 + i % BURST_MAX;
                DAT_LMR_TRIPLET last = dto_iov(&s->mem, n * BURST_LEN, BURST_LEN);

                dto_barrier(s);
                for (unsigned k = 0; k < n; k++) {
                        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, k * BURST_LEN, BURST_LEN);
                        DAT_RMR_TRIPLET r = dto_riov(&s->peer, k * BURST_LEN, BURST_LEN);

                        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(n * 100 + k),
                                                             &r, DAT_COMPLETION_DEFAULT_FLAG),
                                      DAT_SUCCESS);
                }
                DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &last, dto_cookie(n * 100 + 99),
                                               DAT_COMPLETION_DEFAULT_FLAG),
                              DAT_SUCCESS);
                for (unsigned k = 0; k < n; k++)
                        dto_expect_dto(s->request_evd, s->ep[0], n * 100 + k, DAT_DTO_SUCCESS,
                                       BURST_LEN, DAT_DTO_RDMA_WRITE);
                dto_barrier(s); /* the Writes completed: the receiver may post */
                dto_expect_dto(s->request_evd, s->ep[0], n * 100 + 99, DAT_DTO_SUCCESS, BURST_LEN,
                               DAT_DTO_SEND);
        }
}

static void stalled_receiver(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, s->mem.len / 2, BURST_LEN);

        (void)arg;
        for (unsigned i = 0; i < BURST_ROUNDS * BURST_MAX; i++) {
                unsigned n = 1 + i % BURST_MAX;

                dto_barrier(s);
                dto_barrier(s);
                dto_post_recv(s, s->ep[0], &iov, 1, n * 100 + 99);
                dto_expect_recv(s, s->ep[0], n * 100 + 99, BURST_LEN);
        }
}

Test(DTO_SUITE(send), writes_before_a_send_that_waits_for_a_receive_complete_meanwhile)
{
        static const char *const env[] = { "DATD_RNR_TIMEOUT_MS=30000", NULL };
        struct dto_config cfg = { .env = env };

        dto_run(&cfg, stalled_receiver, stalled_sender, NULL);
}

/* How long a burst's completions take is a matter of its frames and the
 * round trip, not of a timer: the peer's kernel may hold its TCP
 * acknowledgement of a last small segment for 40 ms or more, and a sender
 * that asked only once its kernel heard of every byte waited that long
 * for the last completions of one burst in ten or more.  Bursts of 6
 * Writes (the last ones flagged) alternate with bursts of 1 (never
 * flagged), to a target whose process takes nothing (its progress thread
 * places them: a wake-up each, some 80 us here): a burst of 6 that takes
 * 100 times the median burst of 1 is a stall, and at most 9 of 180 may
 * stall.  A ratio on the same machine in the same run, never a time.  A
 * loaded machine delays a wake-up now and then, a timer stalls all along:
 * with the sender asking only once its send queue is empty, 4 to 31 of each
 * 60 bursts stalled (32 to 74 of 180), with the mend none; the CI's make
 * check, tests running beside each other, once found 7 of 60 on shm, where
 * no timer is.  So a measure that finds more is taken once again, and only
 * two in a row that do fail. */
#define TIMED_ROUNDS 180
#define TIMED_STALLS_MAX 9
#define TIMED_TRIES 2

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

/* One measure: how many of TIMED_ROUNDS bursts of 6 stalled; *one: the
 * median burst of 1, in seconds. */
static unsigned timed_measure(struct dto_side *s, double *one)
{
        static double took[2][TIMED_ROUNDS];
        unsigned stalls = 0;

        for (unsigned i = 0; i < 2 * TIMED_ROUNDS; i++) {
                unsigned n = i % 2 ? 6 : 1;
                double t0;

                dto_barrier(s);
                t0 = dto_wall_seconds();
                for (unsigned k = 0; k < n; k++) {
                        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, k * BURST_LEN, BURST_LEN);
                        DAT_RMR_TRIPLET r = dto_riov(&s->peer, k * BURST_LEN, BURST_LEN);

                        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(k), &r,
                                                             DAT_COMPLETION_DEFAULT_FLAG),
                                      DAT_SUCCESS);
                }
                for (unsigned k = 0; k < n; k++) {
                        DAT_EVENT ev = dto_poll_event(s->request_evd);

                        dto_check_dto(&ev, s->ep[0], k, DAT_DTO_SUCCESS, BURST_LEN, DAT_DTO_RDMA_WRITE);
                }
                took[i % 2][i / 2] = dto_wall_seconds() - t0;
        }
        qsort(took[0], TIMED_ROUNDS, sizeof(took[0][0]), cmp_double);
        *one = took[0][TIMED_ROUNDS / 2];
        for (unsigned i = 0; i < TIMED_ROUNDS; i++)
                stalls += took[1][i] > 100 * *one;
        return stalls;
}

static void timed_sender(struct dto_side *s, void *arg)
{
        unsigned stalls[TIMED_TRIES] = { 0 };
        double one[TIMED_TRIES] = { 0 };
        unsigned tries = 0;

        (void)arg;
        /* After each measure the target hears whether another follows. */
        for (;;) {
                bool again;

                stalls[tries] = timed_measure(s, &one[tries]);
                tries++;
                again = stalls[tries - 1] > TIMED_STALLS_MAX && tries < TIMED_TRIES;
                dto_put_u64(s, again);
                if (!again)
                        break;
        }
        DTO_ASSERTF(stalls[tries - 1] <= TIMED_STALLS_MAX,
                    "bursts of 6 Writes that took over 100 times the median burst of 1, of %u, in %u "
                    "measures: %u (median %.0f us), %u (%.0f us)",
                    TIMED_ROUNDS, tries, stalls[0], one[0] * 1e6, stalls[1], one[1] * 1e6);
}

static void timed_target(struct dto_side *s, void *arg)
{
        (void)arg;
        do {
                for (unsigned i = 0; i < 2 * TIMED_ROUNDS; i++)
                        dto_barrier(s);
        } while (dto_get_u64(s));
}

Test(DTO_SUITE(send), a_burst_completes_in_the_time_of_its_frames_while_the_target_takes_nothing)
{
        dto_run(NULL, timed_target, timed_sender, NULL);
}

/* ---- acknowledgements a poll held back ------------------------------------ */

/* A Send of the first 64 bytes of this side's buffer. */
static void post_send_64(struct dto_side *s, uint64_t cookie)
{
        DAT_LMR_TRIPLET out = dto_iov(&s->mem, 0, 64);

        DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &out, dto_cookie(cookie),
                                       DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
}

/* An application's poll that finds the peer's answer hands it over before
 * it completes our requests the answer acknowledged (dto_engine.h,
 * acks_held): they complete at the next poll, off the way to our next
 * post.  Nothing may tell the difference: the client's Send 1 is answered,
 * the acknowledgement in the answer's frame (each side froze the other's
 * progress thread: only the applications' polls move the data paths, the
 * server's answer goes right after the step that took Send 1, with no lone
 * acknowledgement before it); the client takes the answer with
 * dat_evd_dequeue, and then, without a look at its request EVD, ... */
static void held_server(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET in = dto_iov(&s->mem, s->mem.len / 2, 64);
        struct dto_frozen frozen;
        pid_t client;
        DAT_EVENT ev;

        (void)arg;
        dto_put_u64(s, (uint64_t)getpid());
        client = (pid_t)dto_get_u64(s);
        DTO_ASSERT_EQ(dat_ep_post_recv(s->ep[0], 1, &in, dto_cookie(1), DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_freeze_helpers(client, &frozen);
        dto_barrier(s);
        ev = dto_poll_event(s->recv_evd);
        dto_check_dto(&ev, s->ep[0], 1, DAT_DTO_SUCCESS, 64, DAT_DTO_RECEIVE);
        /* Its completion is not waited for: the client may break the
         * connection before it acknowledges the answer.  From here on the
         * client thaws this side's progress thread, which takes the rest. */
        post_send_64(s, 2);
        dto_barrier(s);
        /* The client's checks are done (one polls its request EVD first
         * thing after the barrier above): its progress thread may run. */
        dto_barrier(s);
        dto_thaw(&frozen);
        dto_barrier(s);
}

/* The client's side up to its Send 1: the receive for the answer posted,
 * the server's progress thread frozen (held_server thaws the client's). */
static void held_client_begin(struct dto_side *s, struct dto_frozen *server_frozen)
{
        DAT_LMR_TRIPLET in = dto_iov(&s->mem, s->mem.len / 2, 64);
        pid_t server = (pid_t)dto_get_u64(s);

        dto_put_u64(s, (uint64_t)getpid());
        DTO_ASSERT_EQ(dat_ep_post_recv(s->ep[0], 1, &in, dto_cookie(2), DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_freeze_helpers(server, server_frozen);
        dto_barrier(s);
}

/* Polls evd (dat_evd_dequeue only) for the answer's receive completion. */
static void held_client_answer(struct dto_side *s, DAT_EVD_HANDLE evd)
{
        DAT_EVENT ev = dto_poll_event(evd);

        dto_check_dto(&ev, s->ep[0], 2, DAT_DTO_SUCCESS, 64, DAT_DTO_RECEIVE);
}

/* The client's side up to the answer taken; Send 1 still unreaped. */
static void held_client_start(struct dto_side *s, struct dto_frozen *server_frozen)
{
        held_client_begin(s, server_frozen);
        post_send_64(s, 1);
        held_client_answer(s, s->recv_evd);
}

/* The client's end: the server's last barriers (held_server). */
static void held_client_finish(struct dto_side *s)
{
        for (unsigned i = 0; i < 3; i++)
                dto_barrier(s);
}

/* A completion of the client's requests, polled for (its progress thread
 * is frozen: a dat_evd_wait would sleep on it). */
static void held_client_expect(struct dto_side *s, uint64_t cookie,
                               DAT_DTO_COMPLETION_STATUS status, DAT_DTOS op)
{
        DAT_EVENT ev = dto_poll_event(s->request_evd);

        dto_check_dto(&ev, s->ep[0], cookie, status, DTO_ANY_LENGTH, op);
}

/* ... posts again on a queue of one request: Send 1 was acknowledged, its
 * place is free (it was before acknowledgements could wait). */
static void held_full_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET out = dto_iov(&s->mem, 0, 64);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, 64);
        struct dto_frozen server_frozen;

        (void)arg;
        held_client_start(s, &server_frozen);
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &out, dto_cookie(3), &remote,
                                             DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_thaw(&server_frozen);
        held_client_expect(s, 1, DAT_DTO_SUCCESS, DAT_DTO_SEND);
        held_client_expect(s, 3, DAT_DTO_SUCCESS, DAT_DTO_RDMA_WRITE);
        held_client_finish(s);
}

Test(DTO_SUITE(send), a_request_the_answer_acknowledged_leaves_its_place_in_the_queue)
{
        struct dto_config cfg = { .max_request_dtos = 1 };

        dto_run(&cfg, held_server, held_full_client, NULL);
}

/* ... posts a Send longer than the transport allows, which ends the
 * connection (DAT_DTO_ERR_LOCAL_LENGTH): Send 1 was acknowledged, it
 * completes DAT_DTO_SUCCESS, not flushed. */
static void held_break_client(struct dto_side *s, void *arg)
{
        DAT_VLEN big = (DAT_VLEN)s->ep_attr.max_message_size + 1;
        struct dto_mem huge = dto_mem_new(s, DAT_HANDLE_NULL, big, DAT_MEM_PRIV_ALL_FLAG);
        DAT_LMR_TRIPLET too_long = dto_iov(&huge, 0, big);
        struct dto_frozen server_frozen;

        (void)arg;
        held_client_start(s, &server_frozen);
        DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &too_long, dto_cookie(3),
                                       DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_thaw(&server_frozen);
        held_client_expect(s, 1, DAT_DTO_SUCCESS, DAT_DTO_SEND);
        held_client_expect(s, 3, DAT_DTO_ERR_LOCAL_LENGTH, DAT_DTO_SEND);
        held_client_finish(s);
        dto_mem_free(&huge);
}

Test(DTO_SUITE(send), a_request_the_answer_acknowledged_succeeds_when_the_connection_breaks_next)
{
        struct dto_config cfg = { .timeout_ms = 40000 };

        dto_run(&cfg, held_server, held_break_client, NULL);
}

/* With one EVD for both (held back, the completion would come after the
 * answer), the order stays what the wire said: Send 1's completion, then
 * the answer. */
static void held_shared_client(struct dto_side *s, void *arg)
{
        struct dto_frozen server_frozen;
        DAT_EVENT ev;

        (void)arg;
        DTO_ASSERT(s->request_evd == s->recv_evd);
        held_client_begin(s, &server_frozen);
        post_send_64(s, 1);
        ev = dto_poll_event(s->recv_evd);
        dto_check_dto(&ev, s->ep[0], 1, DAT_DTO_SUCCESS, 64, DAT_DTO_SEND);
        held_client_answer(s, s->recv_evd);
        dto_thaw(&server_frozen);
        held_client_finish(s);
}

Test(DTO_SUITE(send), with_one_evd_a_request_completes_before_the_answer_that_acknowledged_it)
{
        struct dto_config cfg = { .shared_dto_evd = true };

        dto_run(&cfg, held_server, held_shared_client, NULL);
}

/* ... reads its status and disconnects gracefully: Send 1 was
 * acknowledged, nothing is outstanding (request_idle), and the EP is
 * Disconnected at once, not Disconnect Pending. */
static void held_disconnect_client(struct dto_side *s, void *arg)
{
        struct dto_frozen server_frozen;
        DAT_BOOLEAN request_idle = DAT_FALSE;
        DAT_EP_STATE state;

        (void)arg;
        held_client_start(s, &server_frozen);
        DTO_ASSERT_EQ(dat_ep_get_status(s->ep[0], NULL, NULL, &request_idle), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_get_status(s->ep[0], &state, NULL, NULL), DAT_SUCCESS);
        dto_thaw(&server_frozen);
        DTO_ASSERTF(request_idle == DAT_TRUE, "a request the answer acknowledged is outstanding");
        DTO_ASSERTF(state == DAT_EP_STATE_DISCONNECTED, "state %d after a graceful disconnect with "
                    "nothing outstanding", (int)state);
        held_client_expect(s, 1, DAT_DTO_SUCCESS, DAT_DTO_SEND);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        held_client_finish(s);
}

Test(DTO_SUITE(send), a_request_the_answer_acknowledged_is_not_outstanding_for_a_disconnect)
{
        dto_run(NULL, held_server, held_disconnect_client, NULL);
}

/* ... with a second thread asleep in dat_evd_wait on the request EVD
 * since before the answer: the poll that takes the answer wakes it with
 * Send 1's completion (held back, only the progress thread, frozen here,
 * or a grace of milliseconds would have). */
static void held_waiter_client(struct dto_side *s, void *arg)
{
        struct dto_frozen server_frozen;
        struct dto_waiter w;

        (void)arg;
        held_client_begin(s, &server_frozen);
        dto_waiter_start(&w, s->request_evd, 1, 3 * 1000 * 1000);
        usleep(50 * 1000); /* past its spinning, asleep */
        post_send_64(s, 1);
        held_client_answer(s, s->recv_evd);
        dto_waiter_join(&w);
        dto_thaw(&server_frozen);
        DTO_ASSERT_EQ(w.ret, DAT_SUCCESS);
        dto_check_dto(&w.event, s->ep[0], 1, DAT_DTO_SUCCESS, 64, DAT_DTO_SEND);
        held_client_finish(s);
}

Test(DTO_SUITE(send), a_request_the_answer_acknowledged_wakes_a_thread_waiting_for_it)
{
        dto_run(NULL, held_server, held_waiter_client, NULL);
}

#if DTO_TRANSPORT == DTO_SHM
/* ... polls its request EVD (the answer already in the ring: on shm the
 * server's post put it there before the barrier): the poll that takes the
 * answer returns Send 1's completion, the one it looks for. */
static void held_request_poll_client(struct dto_side *s, void *arg)
{
        struct dto_frozen server_frozen;
        DAT_RETURN first;
        DAT_EVENT ev;

        (void)arg;
        held_client_begin(s, &server_frozen);
        post_send_64(s, 1);
        dto_barrier(s); /* the server posted its answer */
        first = dat_evd_dequeue(s->request_evd, &ev);
        dto_thaw(&server_frozen);
        DTO_ASSERTF(first == DAT_SUCCESS, "the poll that took the answer returned 0x%x", first);
        dto_check_dto(&ev, s->ep[0], 1, DAT_DTO_SUCCESS, 64, DAT_DTO_SEND);
        held_client_answer(s, s->recv_evd);
        dto_barrier(s);
        dto_barrier(s);
}

Test(DTO_SUITE(send), a_poll_of_the_request_evd_that_takes_the_answer_returns_the_acknowledged)
{
        dto_run(NULL, held_server, held_request_poll_client, NULL);
}
#endif

/* ... had asked for a graceful disconnect while Send 1 was outstanding,
 * then takes the answer: the disconnect goes on in that poll (an
 * application waiting for the connection's end may poll no data path:
 * here it only reads the EP's state with dat_ep_query). */
static void held_pending_client(struct dto_side *s, void *arg)
{
        struct dto_frozen server_frozen;
        DAT_EP_STATE state = DAT_EP_STATE_DISCONNECT_PENDING;
        DAT_EP_PARAM param;
        double deadline;

        (void)arg;
        held_client_begin(s, &server_frozen);
        post_send_64(s, 1);
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        held_client_answer(s, s->recv_evd);
        deadline = dto_wall_seconds() + 2;
        while (state != DAT_EP_STATE_DISCONNECTED && dto_wall_seconds() < deadline) {
                DTO_ASSERT_EQ(dat_ep_query(s->ep[0], DAT_EP_FIELD_EP_STATE, &param), DAT_SUCCESS);
                state = param.ep_state;
        }
        dto_thaw(&server_frozen);
        DTO_ASSERTF(state == DAT_EP_STATE_DISCONNECTED, "state %d: the graceful disconnect waits",
                    (int)state);
        held_client_expect(s, 1, DAT_DTO_SUCCESS, DAT_DTO_SEND);
        held_client_finish(s);
}

Test(DTO_SUITE(send), a_graceful_disconnect_goes_on_in_the_poll_that_takes_the_last_acknowledgement)
{
        dto_run(NULL, held_server, held_pending_client, NULL);
}

/* ---- an event handed to the dequeue that waits for it --------------------- */

/* A dat_evd_dequeue that finds its EVD empty takes the event its poll
 * makes straight, without the ring (libdat/evd_ring.c, handoff) -- never
 * where the ring would do more than hold it.  The client posts a receive,
 * the server (which froze the client's progress thread: only the client's
 * application polls) sends once the client is ready, and ... */
static void handoff_server(struct dto_side *s, void *arg)
{
        pid_t client = (pid_t)dto_get_u64(s);
        struct dto_frozen frozen;

        (void)arg;
        dto_freeze_helpers(client, &frozen);
        dto_barrier(s);
        dto_barrier(s); /* the client is ready */
        /* Its completion is not waited for: only the client's application
         * could acknowledge it, and it polls no more once it has it. */
        post_send_64(s, 1);
        dto_barrier(s);
        dto_thaw(&frozen);
        dto_barrier(s);
}

static void handoff_client_start(struct dto_side *s)
{
        DAT_LMR_TRIPLET in = dto_iov(&s->mem, s->mem.len / 2, 64);

        dto_put_u64(s, (uint64_t)getpid());
        DTO_ASSERT_EQ(dat_ep_post_recv(s->ep[0], 1, &in, dto_cookie(1), DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_barrier(s);
}

/* Takes cno off evd and frees it. */
static void cno_detach_free(DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno)
{
        DTO_ASSERT_EQ(dat_evd_modify_cno(evd, DAT_HANDLE_NULL), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_cno_free(cno), DAT_SUCCESS);
}

/* ... the receive EVD feeds a CNO: the message triggers it, though the
 * dequeue that made the event takes it at once (dat_evd_modify_cno(3DAT):
 * the EVD's notification events trigger its CNO). */
static void handoff_cno_client(struct dto_side *s, void *arg)
{
        DAT_CNO_HANDLE cno;
        DAT_EVD_HANDLE triggered = DAT_HANDLE_NULL;
        DAT_EVENT ev;

        (void)arg;
        handoff_client_start(s);
        DTO_ASSERT_EQ(dat_cno_create(s->ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_evd_modify_cno(s->recv_evd, cno), DAT_SUCCESS);
        dto_barrier(s);
        ev = dto_poll_event(s->recv_evd);
        dto_check_dto(&ev, s->ep[0], 1, DAT_DTO_SUCCESS, 64, DAT_DTO_RECEIVE);
        DTO_ASSERT_EQ(dat_cno_wait(cno, 0, &triggered), DAT_SUCCESS);
        DTO_ASSERT(triggered == s->recv_evd);
        dto_barrier(s);
        dto_barrier(s);
        cno_detach_free(s->recv_evd, cno);
}

Test(DTO_SUITE(send), an_event_a_dequeue_takes_at_once_still_triggers_the_cno_of_its_evd)
{
        dto_run(NULL, handoff_server, handoff_cno_client, NULL);
}

/* ... a second thread waits on the receive EVD: the dequeues polling
 * meanwhile are refused (dat_evd_dequeue(3DAT): DAT_INVALID_STATE while a
 * waiter owns the EVD), and the waiter gets the message. */
static void handoff_waiter_client(struct dto_side *s, void *arg)
{
        struct dto_waiter w;
        double deadline;

        (void)arg;
        handoff_client_start(s);
        dto_waiter_start(&w, s->recv_evd, 1, 3 * 1000 * 1000);
        usleep(50 * 1000); /* past its spinning, asleep: our polls take the message */
        dto_barrier(s);
        deadline = dto_wall_seconds() + 2;
        while (!atomic_load(&w.done) && dto_wall_seconds() < deadline) {
                DAT_EVENT ev;
                DAT_RETURN r = dat_evd_dequeue(s->recv_evd, &ev);

                /* Refused while the waiter owns the EVD, empty after. */
                DTO_ASSERTF(r != DAT_SUCCESS, "a dequeue beside a waiter took the event");
        }
        dto_waiter_join(&w);
        DTO_ASSERT_EQ(w.ret, DAT_SUCCESS);
        dto_check_dto(&w.event, s->ep[0], 1, DAT_DTO_SUCCESS, 64, DAT_DTO_RECEIVE);
        dto_barrier(s);
        dto_barrier(s);
}

Test(DTO_SUITE(send), a_dequeue_beside_a_waiter_takes_no_event_its_poll_makes)
{
        dto_run(NULL, handoff_server, handoff_waiter_client, NULL);
}

/* ... the request EVD feeds a CNO whose proxy agent dequeues that EVD
 * (an agent is the consumer's code, run inside libdat's calls: here inside
 * the client's dequeue of its receive EVD, whose poll completes Send 1 and
 * makes the receive's event): the receive's event still comes, and the
 * agent got Send 1's. */
struct draining_agent {
        DAT_EVD_HANDLE evd;
        unsigned calls, events;
        uint64_t cookie;
};

static void drain_evd(DAT_PVOID instance_data, DAT_EVD_HANDLE evd)
{
        struct draining_agent *a = instance_data;
        DAT_EVENT ev;

        (void)evd;
        a->calls++;
        while (dat_evd_dequeue(a->evd, &ev) == DAT_SUCCESS) {
                a->events++;
                a->cookie = ev.event_data.dto_completion_event_data.user_cookie.as_64;
        }
}

static void handoff_agent_client(struct dto_side *s, void *arg)
{
        struct draining_agent agent = { .evd = s->request_evd };
        DAT_OS_WAIT_PROXY_AGENT proxy = { .instance_data = &agent, .proxy_agent_func = drain_evd };
        struct dto_frozen server_frozen;
        DAT_CNO_HANDLE cno;

        (void)arg;
        DTO_ASSERT_EQ(dat_cno_create(s->ia, proxy, &cno), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_evd_modify_cno(s->request_evd, cno), DAT_SUCCESS);
        held_client_start(s, &server_frozen);
        dto_thaw(&server_frozen);
        DTO_ASSERT_EQ(agent.calls, 1u);
        DTO_ASSERT_EQ(agent.events, 1u);
        DTO_ASSERT_EQ(agent.cookie, 1u);
        held_client_finish(s);
        cno_detach_free(s->request_evd, cno);
}

Test(DTO_SUITE(send), an_agent_that_dequeues_inside_a_poll_loses_no_event_of_it)
{
        dto_run(NULL, held_server, handoff_agent_client, NULL);
}
