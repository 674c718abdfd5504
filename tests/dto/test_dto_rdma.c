/* RDMA Write and RDMA Read between two processes (dat_ep_post_rdma_write
 * (3DAT), dat_ep_post_rdma_read(3DAT)), RMR binding (dat_rmr_bind(3DAT)),
 * and the order of requests of every kind, on the transport this program
 * was built for (tests/dto/dto_fixture.h). */
#include "config.h"

#include <criterion/criterion.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(rdma);

#define GUARD 16

struct sizes {
        const DAT_VLEN *v;
        unsigned n;
};

/* The target's region for transfer i: an unaligned offset in the second
 * half of its buffer, GUARD bytes of guard pattern on both sides. */
static DAT_VLEN target_off(const struct dto_side *s, unsigned i)
{
        return s->mem.len / 2 + GUARD + 5 + i;
}

static DAT_VLEN initiator_off(unsigned i)
{
        return GUARD + 1 + 3 * i;
}

static void fill_guarded(unsigned char *at, DAT_VLEN len, uint64_t guard_seed)
{
        dto_fill(at - GUARD, len + 2 * GUARD, guard_seed);
}

static void verify_guarded(const unsigned char *at, DAT_VLEN len, uint64_t seed,
                           uint64_t guard_seed)
{
        dto_verify(at, len, seed);
        dto_verify_at(at - GUARD, GUARD, guard_seed, 0);
        dto_verify_at(at + len, GUARD, guard_seed, GUARD + len);
}

/* One RDMA Write of len bytes into the target's buffer. */
static void one_write(struct dto_side *s, bool initiator, DAT_VLEN len, unsigned i)
{
        uint64_t seed = 500 + i, guard_seed = 600 + i;

        if (initiator) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, initiator_off(i), len);
                DAT_RMR_TRIPLET remote = dto_riov(&s->peer, s->peer.len / 2 + GUARD + 5 + i, len);

                dto_fill(s->mem.buf + initiator_off(i), len, seed);
                dto_barrier(s); /* the target's guard is in place */
                dto_rdma_write_wait(s, s->ep[0], &iov, 1, seed, &remote);
                dto_barrier(s);
        } else {
                unsigned char *at = s->mem.buf + target_off(s, i);

                fill_guarded(at, len, guard_seed);
                dto_barrier(s);
                dto_barrier(s); /* the initiator's Write completed */
                verify_guarded(at, len, seed, guard_seed);
        }
}

/* One RDMA Read of len bytes of the target's buffer. */
static void one_read(struct dto_side *s, bool initiator, DAT_VLEN len, unsigned i)
{
        uint64_t seed = 700 + i, guard_seed = 800 + i;

        if (initiator) {
                unsigned char *at = s->mem.buf + initiator_off(i);
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, initiator_off(i), len);
                DAT_RMR_TRIPLET remote = dto_riov(&s->peer, s->peer.len / 2 + GUARD + 5 + i, len);

                fill_guarded(at, len, guard_seed);
                dto_barrier(s); /* the target's data is in place */
                dto_rdma_read_wait(s, s->ep[0], &iov, 1, seed, &remote);
                verify_guarded(at, len, seed, guard_seed);
                dto_barrier(s);
        } else {
                dto_fill(s->mem.buf + target_off(s, i), len, seed);
                dto_barrier(s);
                dto_barrier(s);
                /* dat_ep_post_rdma_read(3DAT) reads: the source is unchanged */
                dto_verify(s->mem.buf + target_off(s, i), len, seed);
        }
}

static void writes_both_ways(struct dto_side *s, void *arg)
{
        const struct sizes *sz = arg;

        for (unsigned i = 0; i < sz->n; i++)
                one_write(s, s->role == DTO_CLIENT, sz->v[i], i);
        for (unsigned i = 0; i < sz->n; i++)
                one_write(s, s->role == DTO_SERVER, sz->v[i], i);
}

static void reads_both_ways(struct dto_side *s, void *arg)
{
        const struct sizes *sz = arg;

        for (unsigned i = 0; i < sz->n; i++)
                one_read(s, s->role == DTO_CLIENT, sz->v[i], i);
        for (unsigned i = 0; i < sz->n; i++)
                one_read(s, s->role == DTO_SERVER, sz->v[i], i);
}

static const struct dto_config large_cfg = { .buf_len = 2 * (DTO_LARGEST_SIZE + 4096) };

/* dat_ep_post_rdma_write(3DAT): "transfer of all the data specified by the
 * local_iov ... into the remote_buffer": exactly those bytes land at the
 * target's address, nothing around them.  Sizes 0 .. 64 KiB + 3, unaligned,
 * both ways. */
Test(DTO_SUITE(rdma), small_writes_land_intact_both_ways)
{
        struct sizes sz = { dto_small_sizes, dto_n_small_sizes };

        dto_run(NULL, writes_both_ways, writes_both_ways, &sz);
}

/* The same for 1 MiB and 16 MiB (cross-memory attach where allowed). */
Test(DTO_SUITE(rdma), large_writes_land_intact_both_ways)
{
        struct sizes sz = { dto_large_sizes, dto_n_large_sizes };

        dto_run(&large_cfg, writes_both_ways, writes_both_ways, &sz);
}

#define CROSSING_ROUNDS 100
#define CROSSING_POLL_SECONDS 10

/* Both ends post one RDMA Write at the same moment and then only poll
 * (dat_evd_dequeue) for its completion: neither posts anything that would
 * carry the acknowledgement of the other's Write.  Each Write completes all
 * the same: an acknowledgement owed goes out on its own when the polls find
 * nothing else to do (before, both polled for ever: the progress thread
 * leaves a polled IA to its application, and the application's polls
 * looked only at the channels). */
static void crossing_writes(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned round = 0; round < CROSSING_ROUNDS; round++) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 64);
                DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 4096, 64);
                DAT_DTO_COOKIE cookie = { .as_64 = round };
                double deadline = dto_wall_seconds() + CROSSING_POLL_SECONDS;
                uint64_t spins = 0;
                DAT_EVENT ev;

                dto_barrier(s);
                DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, cookie, &remote,
                                                     DAT_COMPLETION_DEFAULT_FLAG),
                              DAT_SUCCESS);
                /* Bounded by the clock, not by a count of polls: an empty
                 * poll takes 15 ns or a system call, and the other end's
                 * acknowledgement may come from its progress thread, which
                 * a loaded machine runs late. */
                while (dat_evd_dequeue(s->request_evd, &ev) != DAT_SUCCESS)
                        DTO_ASSERTF((++spins & 1023) != 0 || dto_wall_seconds() < deadline,
                                    "round %u: the Write did not complete in %d s while both "
                                    "ends polled", round, CROSSING_POLL_SECONDS);
                dto_check_dto(&ev, s->ep[0], round, DAT_DTO_SUCCESS, 64, DAT_DTO_RDMA_WRITE);
        }
}

Test(DTO_SUITE(rdma), writes_crossing_complete_while_both_ends_only_poll)
{
        dto_run(NULL, crossing_writes, crossing_writes, NULL);
}

/* ---- an acknowledgement owed --------------------------------------------------- */

#define OWED_OFF 8192

/* The end that owes: its progress thread frozen by the peer, it posts its
 * Write while the peer's sits unread in its channel, and then, with the
 * peer's lone acknowledgement of its Write behind the peer's Write, polls
 * until its own Write completes and goes away (a pipe read) -- its
 * progress thread still frozen: only what those polls sent reaches the
 * peer. */
static void owes_then_leaves(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 64);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, OWED_OFF, 64);
        DAT_EVENT ev;

        (void)arg;
        dto_put_u64(s, (uint64_t)getpid());
        DTO_ASSERT_EQ(dto_get_u64(s), 1); /* frozen; the peer's Write is in our channel */
        dto_fill(s->mem.buf, 64, 41);
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(2), &remote,
                                             DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_put_u64(s, 2);
        DTO_ASSERT_EQ(dto_get_u64(s), 3); /* its acknowledgement of ours follows its Write */
        ev = dto_poll_event(s->request_evd);
        dto_check_dto(&ev, s->ep[0], 2, DAT_DTO_SUCCESS, 64, DAT_DTO_RDMA_WRITE);
        dto_put_u64(s, 4);
        dto_barrier(s);
}

static void is_owed(struct dto_side *s, void *arg)
{
        pid_t peer = (pid_t)dto_get_u64(s);
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 64);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, OWED_OFF, 64);
        double deadline = dto_wall_seconds() + DTO_WAIT_US / 1e6;
        struct dto_frozen frozen;
        DAT_EVENT ev;

        (void)arg;
        dto_freeze_helpers(peer, &frozen);
        dto_fill(s->mem.buf, 64, 42);
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(1), &remote,
                                             DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_put_u64(s, 1);
        DTO_ASSERT_EQ(dto_get_u64(s), 2);
        /* The peer's Write lands here (our Write went before it took
         * ours: it carries no acknowledgement); the poll after the one
         * that placed it acknowledges it on its own, behind our Write.
         * Ours cannot complete meanwhile: the peer takes nothing. */
        while (!dto_matches(s->mem.buf + OWED_OFF, 64, 41)) {
                DTO_ASSERTF(dto_wall_seconds() < deadline, "the peer's Write never landed");
                dto_expect_empty(s->request_evd);
        }
        for (unsigned i = 0; i < 100; i++)
                dto_expect_empty(s->request_evd);
        dto_put_u64(s, 3);
        DTO_ASSERT_EQ(dto_get_u64(s), 4);
        /* The peer polled until its Write completed, and went: what it
         * owes us for ours went out in those polls, or never does. */
        ev = dto_wait_event(s->request_evd);
        dto_thaw(&frozen);
        dto_check_dto(&ev, s->ep[0], 1, DAT_DTO_SUCCESS, 64, DAT_DTO_RDMA_WRITE);
        dto_barrier(s);
}

/* An end whose polls took the peer's request and then, in a later step or
 * the same, only the peer's lone acknowledgement (the peer has nothing to
 * carry one: it waits) acknowledges at once: its application may leave
 * as soon as its own request completes, and the peer's request would
 * otherwise wait for its progress thread (here frozen: for ever; in life
 * a millisecond or more). */
Test(DTO_SUITE(rdma), an_end_that_leaves_after_its_completion_has_acknowledged_the_peer)
{
        dto_run(NULL, is_owed, owes_then_leaves, NULL);
}

/* The same with Writes whose acknowledgement may wait (tcp: posted with 4
 * or more unacknowledged, DTO_F_ACK_LATER).  The end that writes: its
 * peer's progress thread frozen (and its own, by the peer: what it posts
 * after the peer acknowledged its first three is flagged, that
 * acknowledgement unread), it posts 3 Writes, then 3 more, and polls for
 * all six. */
#define HELD_WRITES 6

static void writes_held_back(struct dto_side *s, void *arg)
{
        pid_t peer;
        double deadline;
        struct dto_frozen frozen;
        DAT_EVENT ev;

        (void)arg;
        dto_put_u64(s, (uint64_t)getpid());
        peer = (pid_t)dto_get_u64(s);
        dto_freeze_helpers(peer, &frozen);
        dto_put_u64(s, 1);
        DTO_ASSERT_EQ(dto_get_u64(s), 2); /* the peer froze ours */
        for (unsigned k = 0; k < HELD_WRITES; k++) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, k * 64, 64);
                DAT_RMR_TRIPLET remote = dto_riov(&s->peer, OWED_OFF + k * 64, 64);

                if (k == HELD_WRITES / 2) {
                        dto_put_u64(s, 3);
                        /* The first three placed and acknowledged. */
                        DTO_ASSERT_EQ(dto_get_u64(s), 4);
                }
                dto_fill(s->mem.buf + k * 64, 64, 50 + k);
                DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(k), &remote,
                                                     DAT_COMPLETION_DEFAULT_FLAG),
                              DAT_SUCCESS);
        }
        dto_put_u64(s, 5);
        DTO_ASSERT_EQ(dto_get_u64(s), 6); /* all placed, the peer's Read posted */
        /* These polls also serve the peer's Read; after its completion
         * the peer polls no more, and its progress thread is frozen. */
        deadline = dto_wall_seconds() + DTO_WAIT_US / 1e6;
        for (unsigned k = 0; k < HELD_WRITES; k++) {
                while (dat_evd_dequeue(s->request_evd, &ev) != DAT_SUCCESS)
                        if (dto_wall_seconds() > deadline) {
                                dto_thaw(&frozen);
                                DTO_FAIL("Write %u did not complete: the peer left owing its "
                                         "acknowledgement", k);
                        }
                dto_check_dto(&ev, s->ep[0], k, DAT_DTO_SUCCESS, 64, DAT_DTO_RDMA_WRITE);
        }
        /* Polls on until the peer's Read completed (they serve it). */
        for (;;) {
                struct pollfd p = { .fd = s->sock, .events = POLLIN };

                if (poll(&p, 1, 0) > 0)
                        break;
                dto_expect_empty(s->request_evd);
        }
        DTO_ASSERT_EQ(dto_get_u64(s), 7);
        dto_thaw(&frozen);
        dto_barrier(s);
}

/* The end written to: it polls until the first three Writes are placed
 * (and acknowledged at once), posts an RDMA Read, polls until the last
 * three are placed (their acknowledgement held back), then until the Read
 * completes -- a step that takes only its response -- and leaves, its
 * progress thread frozen. */
static void reads_then_leaves(struct dto_side *s, void *arg)
{
        pid_t peer = (pid_t)dto_get_u64(s);
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 64);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, 64);
        double deadline = dto_wall_seconds() + DTO_WAIT_US / 1e6;
        struct dto_frozen frozen;
        DAT_EVENT ev;

        (void)arg;
        dto_put_u64(s, (uint64_t)getpid());
        DTO_ASSERT_EQ(dto_get_u64(s), 1);
        dto_freeze_helpers(peer, &frozen);
        dto_put_u64(s, 2);
        for (unsigned half = 0; half < 2; half++) {
                unsigned last = half ? HELD_WRITES - 1 : HELD_WRITES / 2 - 1;

                DTO_ASSERT_EQ(dto_get_u64(s), half ? 5 : 3);
                /* Posted before the last Writes are placed: its frame
                 * carries no acknowledgement of them. */
                if (half)
                        DTO_ASSERT_EQ(dat_ep_post_rdma_read(s->ep[0], 1, &iov, dto_cookie(9), &remote,
                                                            DAT_COMPLETION_DEFAULT_FLAG),
                                      DAT_SUCCESS);
                while (!dto_matches(s->mem.buf + OWED_OFF + last * 64, 64, 50 + last)) {
                        DTO_ASSERTF(dto_wall_seconds() < deadline, "Write %u never landed", last);
                        dto_expect_empty(s->recv_evd);
                }
                for (unsigned i = 0; i < 100; i++)
                        dto_expect_empty(s->recv_evd);
                dto_put_u64(s, half ? 6 : 4);
        }
        ev = dto_poll_event(s->request_evd);
        dto_check_dto(&ev, s->ep[0], 9, DAT_DTO_SUCCESS, 64, DAT_DTO_RDMA_READ);
        dto_put_u64(s, 7);
        dto_barrier(s);
        dto_thaw(&frozen);
}

/* What an end holds back (DTO_F_ACK_LATER) waits only in a step that found
 * nothing at all: one that took its own Read's response acknowledges at
 * once, and its application may leave. */
Test(DTO_SUITE(rdma), an_end_that_leaves_after_its_read_completed_has_acknowledged_held_back_writes)
{
        dto_run(NULL, reads_then_leaves, writes_held_back, NULL);
}

/* dat_ep_post_rdma_read(3DAT): "transfer of all the data specified by the
 * remote_buffer ... into the local_iov": the target's bytes arrive, nothing
 * around the local segment is written.  Sizes 0 .. 64 KiB + 3, both ways. */
Test(DTO_SUITE(rdma), small_reads_fetch_intact_both_ways)
{
        struct sizes sz = { dto_small_sizes, dto_n_small_sizes };

        dto_run(NULL, reads_both_ways, reads_both_ways, &sz);
}

/* The same for 1 MiB and 16 MiB. */
Test(DTO_SUITE(rdma), large_reads_fetch_intact_both_ways)
{
        struct sizes sz = { dto_large_sizes, dto_n_large_sizes };

        dto_run(&large_cfg, reads_both_ways, reads_both_ways, &sz);
}

/* ---- gather / scatter ------------------------------------------------------ */

/* n local segments of odd sizes scattered over the first half of the
 * buffer; returns the total. */
static DAT_VLEN scattered_iov(struct dto_side *s, DAT_LMR_TRIPLET *iov, unsigned n)
{
        DAT_VLEN stride = s->mem.len / 2 / 64, total = 0;

        for (unsigned k = 0; k < n; k++) {
                iov[k] = dto_iov(&s->mem, k * stride + 1 + k % 5, 1000 + 1531 * k);
                total += iov[k].segment_length;
        }
        return total;
}

static void rdma_segments_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov[64];
        unsigned nw = (unsigned)s->ep_attr.max_rdma_write_iov;
        unsigned nr = (unsigned)s->ep_attr.max_rdma_read_iov;
        DAT_VLEN total, at = 0;
        DAT_RMR_TRIPLET remote;

        (void)arg;
        DTO_ASSERT(nw >= 1 && nw <= 64 && nr >= 1 && nr <= 64);
        /* Write: gather nw segments into one remote range */
        total = scattered_iov(s, iov, nw);
        for (unsigned k = 0; k < nw; k++) {
                dto_fill_at((void *)(uintptr_t)iov[k].virtual_address, iov[k].segment_length,
                            31, at);
                at += iov[k].segment_length;
        }
        remote = dto_riov(&s->peer, 3, total);
        dto_rdma_write_wait(s, s->ep[0], iov, nw, 1, &remote);
        dto_put_u64(s, total);
        /* Read: scatter one remote range (the server's pattern 32) into nr segments */
        total = scattered_iov(s, iov, nr);
        memset(s->mem.buf, 0, s->mem.len / 2);
        remote = dto_riov(&s->peer, s->peer.len / 2 + 7, total);
        dto_barrier(s);
        dto_rdma_read_wait(s, s->ep[0], iov, nr, 2, &remote);
        at = 0;
        for (unsigned k = 0; k < nr; k++) {
                dto_verify_at((void *)(uintptr_t)iov[k].virtual_address, iov[k].segment_length,
                              32, at);
                at += iov[k].segment_length;
        }
}

static void rdma_segments_server(struct dto_side *s, void *arg)
{
        DAT_VLEN total;

        (void)arg;
        total = dto_get_u64(s);
        dto_verify(s->mem.buf + 3, total, 31);
        dto_fill(s->mem.buf + s->mem.len / 2 + 7, s->mem.len / 2 - 7, 32);
        dto_barrier(s);
}

/* dat_ep_post_rdma_write(3DAT): the local_iov segments are traversed in I/O
 * Vector order; dat_ep_post_rdma_read(3DAT): filled in I/O Vector order.
 * As many segments as the EP allows (max_rdma_write_iov /
 * max_rdma_read_iov), over 16 KiB in all. */
Test(DTO_SUITE(rdma), segments_gather_and_scatter_in_iov_order)
{
        struct dto_config cfg = { .buf_len = 8 << 20 };

        dto_run(&cfg, rdma_segments_server, rdma_segments_client, NULL);
}

/* ---- no help from the target ----------------------------------------------- */

#define READ_OFF 131072 /* the region read, apart from the one written at 3 */

static void passive_target(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_fill(s->mem.buf + READ_OFF, 100000, 44);
        dto_barrier(s);
        /* blocked in recv(2) on the socketpair: no DAT call until "done" */
        DTO_ASSERT_EQ(dto_get_u64(s), 1);
        dto_verify(s->mem.buf + 3, 100000, 43);
}

static void active_initiator(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100000);
        DAT_RMR_TRIPLET remote;

        (void)arg;
        dto_fill(s->mem.buf, 100000, 43);
        dto_barrier(s);
        remote = dto_riov(&s->peer, 3, 100000);
        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 1, &remote);
        remote = dto_riov(&s->peer, READ_OFF, 100000);
        iov = dto_iov(&s->mem, READ_OFF, 100000);
        dto_rdma_read_wait(s, s->ep[0], &iov, 1, 2, &remote);
        dto_verify(s->mem.buf + READ_OFF, 100000, 44);
        dto_put_u64(s, 1);
}

/* dat_ep_post_rdma_write(3DAT) / dat_ep_post_rdma_read(3DAT): one-sided:
 * the remote Consumer takes no part (posts nothing, dequeues nothing); the
 * target application here sits in a blocking read of a pipe the whole
 * time, and both complete. */
Test(DTO_SUITE(rdma), rdma_completes_without_the_target_consumer)
{
        dto_run(NULL, passive_target, active_initiator, NULL);
}

/* ---- RMR bind ---------------------------------------------------------------- */

#define WINDOW_OFF 4099
#define WINDOW_LEN 10000
#define WINDOW2_OFF (65536 + 7)        /* a rebind's window, apart from the first */

struct bound {
        DAT_VADDR addr;
        DAT_RMR_CONTEXT context;
};

/* dat_rmr_bind on ep[0] (window of mem, or length 0 to unbind), waits for
 * its completion; returns the new context. */
static DAT_RMR_CONTEXT bind_window(struct dto_side *s, DAT_RMR_HANDLE rmr, DAT_VLEN off,
                                   DAT_VLEN len, uint64_t cookie)
{
        DAT_LMR_TRIPLET t = dto_iov(&s->mem, off, len);
        DAT_RMR_CONTEXT ctx = 0;
        DAT_EVENT ev;
        DAT_RMR_COOKIE c;

        c.as_64 = cookie;
        DTO_ASSERT_EQ(dat_rmr_bind(rmr, s->mem.lmr, &t,
                                   DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
                                   DAT_VA_TYPE_VA, s->ep[0], c, DAT_COMPLETION_DEFAULT_FLAG,
                                   &ctx), DAT_SUCCESS);
        ev = dto_wait_event(s->request_evd);
        DTO_ASSERT_EQ(ev.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.status, DAT_RMR_BIND_SUCCESS);
        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.user_cookie.as_64, cookie);
        DTO_ASSERT(ev.event_data.rmr_completion_event_data.rmr_handle == rmr);
        return ctx;
}

static void send_bound(struct dto_side *s, DAT_VLEN off, DAT_RMR_CONTEXT ctx)
{
        struct bound b = { (DAT_VADDR)(uintptr_t)(s->mem.buf + off), ctx };

        dto_put(s, &b, sizeof(b));
}

static struct bound get_bound(struct dto_side *s)
{
        struct bound b;

        dto_get(s, &b, sizeof(b));
        return b;
}

static DAT_RMR_TRIPLET bound_triplet(const struct bound *b, DAT_VLEN len)
{
        return (DAT_RMR_TRIPLET){ .virtual_address = b->addr, .segment_length = len,
                                  .rmr_context = b->context };
}

static void bind_server(struct dto_side *s, void *arg)
{
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
        DAT_RMR_CONTEXT ctx;

        (void)arg;
        DTO_ASSERT_EQ(dat_rmr_create(s->pz, &rmr), DAT_SUCCESS);
        ctx = bind_window(s, rmr, WINDOW_OFF, WINDOW_LEN, 91);
        dto_fill(s->mem.buf + WINDOW_OFF + WINDOW_LEN / 2, WINDOW_LEN / 2, 92);
        send_bound(s, WINDOW_OFF, ctx);
        dto_barrier(s); /* the client wrote the first half and read the second */
        dto_verify(s->mem.buf + WINDOW_OFF, WINDOW_LEN / 2, 93);
}

static void bind_client(struct dto_side *s, void *arg)
{
        struct bound b = get_bound(s);
        DAT_RMR_TRIPLET remote = bound_triplet(&b, WINDOW_LEN / 2);
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, WINDOW_LEN / 2);

        (void)arg;
        dto_fill(s->mem.buf, WINDOW_LEN / 2, 93);
        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 1, &remote);
        remote.virtual_address += WINDOW_LEN / 2;
        iov = dto_iov(&s->mem, 65536, WINDOW_LEN / 2);
        dto_rdma_read_wait(s, s->ep[0], &iov, 1, 2, &remote);
        dto_verify(s->mem.buf + 65536, WINDOW_LEN / 2, 92);
        dto_barrier(s);
}

/* dat_rmr_bind(3DAT): binding completes with an rmr_bind completion event
 * (cookie, RMR, success) on the EP's request EVD, and the new rmr_context
 * "can be transferred ... to a Consumer on a remote host to be used for an
 * RDMA DTO": RDMA Write and Read through it reach the bound window. */
Test(DTO_SUITE(rdma), bound_rmr_context_gives_remote_access)
{
        dto_run(NULL, bind_server, bind_client, NULL);
}

struct unbind_case {
        bool rebind;    /* bind to another window instead of unbinding */
};

static void unbind_server(struct dto_side *s, void *arg)
{
        const struct unbind_case *uc = arg;
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
        DAT_RMR_CONTEXT ctx;

        DTO_ASSERT_EQ(dat_rmr_create(s->pz, &rmr), DAT_SUCCESS);
        ctx = bind_window(s, rmr, WINDOW_OFF, WINDOW_LEN, 1);
        send_bound(s, WINDOW_OFF, ctx);
        dto_barrier(s); /* the client used it */
        if (uc->rebind) {
                DAT_RMR_CONTEXT fresh = bind_window(s, rmr, WINDOW2_OFF, WINDOW_LEN, 2);

                DTO_ASSERT_NEQ(fresh, ctx);
                send_bound(s, WINDOW2_OFF, fresh);
        } else {
                bind_window(s, rmr, 0, 0, 2);
        }
        dto_fill(s->mem.buf + WINDOW_OFF, WINDOW_LEN, 66);
        dto_barrier(s); /* the old context is gone: the client tries it */
        dto_barrier(s);
        /* the refused Write did not land */
        dto_verify(s->mem.buf + WINDOW_OFF, WINDOW_LEN, 66);
        if (uc->rebind)
                dto_verify(s->mem.buf + WINDOW2_OFF, 100, 68);
}

static void unbind_client(struct dto_side *s, void *arg)
{
        const struct unbind_case *uc = arg;
        struct bound old = get_bound(s);
        DAT_RMR_TRIPLET remote = bound_triplet(&old, 100);
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);
        DAT_EP_STATE st;

        dto_fill(s->mem.buf, 100, 67);
        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 1, &remote);
        dto_barrier(s);
        if (uc->rebind) {
                struct bound fresh = get_bound(s);
                DAT_RMR_TRIPLET r2 = bound_triplet(&fresh, 100);

                dto_fill(s->mem.buf, 100, 68);
                dto_rdma_write_wait(s, s->ep[0], &iov, 1, 2, &r2);
        }
        dto_barrier(s);
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(3), &remote, 0),
                      DAT_SUCCESS);
        dto_expect_dto(s->request_evd, s->ep[0], 3, DAT_DTO_ERR_REMOTE_ACCESS, DTO_ANY_LENGTH,
                       DAT_DTO_RDMA_WRITE);
        /* dto.h: an error completion breaks the connection */
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
        DTO_ASSERT_EQ(dat_ep_get_status(s->ep[0], &st, NULL, NULL), DAT_SUCCESS);
        DTO_ASSERT_EQ(st, DAT_EP_STATE_DISCONNECTED);
        dto_barrier(s);
}

/* dat_rmr_bind(3DAT): "Any RDMA DTO that uses the previous value of
 * rmr_context after the dat_rmr_bind() is completed fail and report a
 * protection violation": unbound (lmr_triplet length 0), the context that
 * worked a moment ago is refused by the target (DAT_DTO_ERR_REMOTE_ACCESS)
 * and nothing lands. */
Test(DTO_SUITE(rdma), unbound_rmr_context_is_refused)
{
        struct unbind_case uc = { .rebind = false };

        dto_run(NULL, unbind_server, unbind_client, &uc);
}

/* The same after binding the RMR again elsewhere: the new context (a
 * different value) works, the previous one is refused. */
Test(DTO_SUITE(rdma), rebound_rmr_refuses_its_previous_context)
{
        struct unbind_case uc = { .rebind = true };

        dto_run(NULL, unbind_server, unbind_client, &uc);
}

/* ---- request order across kinds ---------------------------------------------- */

static void mixed_client(struct dto_side *s, void *arg)
{
        static const struct {
                DAT_DTOS op;
                DAT_VLEN len;
        } plan[] = {
                { DAT_DTO_RDMA_WRITE, 1 << 20 }, { DAT_DTO_SEND, 10 },
                { DAT_DTO_RDMA_READ, 100000 }, { DAT_DTO_RDMA_WRITE, 5 },
                { DAT_DTO_BIND_MW, 4096 }, { DAT_DTO_SEND, 70000 },
                { DAT_DTO_RDMA_READ, 1 }, { DAT_DTO_SEND, 0 },
        };
        const unsigned n = sizeof(plan) / sizeof(plan[0]);
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
        DAT_RMR_CONTEXT ctx;
        DAT_VLEN at = 0;

        (void)arg;
        DTO_ASSERT_EQ(dat_rmr_create(s->pz, &rmr), DAT_SUCCESS);
        dto_barrier(s); /* the server's receives are posted */
        for (unsigned k = 0; k < n; at += plan[k].len + 64, k++) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, at, plan[k].len);
                DAT_RMR_TRIPLET remote = dto_riov(&s->peer, at, plan[k].len);
                DAT_RMR_COOKIE c;
                DAT_RETURN r;

                c.as_64 = 100 + k;
                switch (plan[k].op) {
                case DAT_DTO_SEND:
                        r = dat_ep_post_send(s->ep[0], 1, &iov, c, 0);
                        break;
                case DAT_DTO_RDMA_WRITE:
                        r = dat_ep_post_rdma_write(s->ep[0], 1, &iov, c, &remote, 0);
                        break;
                case DAT_DTO_RDMA_READ:
                        r = dat_ep_post_rdma_read(s->ep[0], 1, &iov, c, &remote, 0);
                        break;
                default:
                        r = dat_rmr_bind(rmr, s->mem.lmr, &iov, DAT_MEM_PRIV_REMOTE_READ_FLAG,
                                         DAT_VA_TYPE_VA, s->ep[0], c, 0, &ctx);
                        break;
                }
                DTO_ASSERTF(r == DAT_SUCCESS, "post %u: 0x%08x", k, r);
        }
        for (unsigned k = 0; k < n; k++) {
                DAT_EVENT ev = dto_wait_event(s->request_evd);

                if (plan[k].op == DAT_DTO_BIND_MW) {
                        DTO_ASSERTF(ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT,
                                    "completion %u: event 0x%x, expected the bind", k,
                                    ev.event_number);
                        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.user_cookie.as_64,
                                      100 + k);
                        continue;
                }
                dto_check_dto(&ev, s->ep[0], 100 + k, DAT_DTO_SUCCESS, plan[k].len, plan[k].op);
        }
}

static void mixed_server(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 3 << 20, 100000);

        (void)arg;
        for (unsigned k = 0; k < 3; k++)
                dto_post_recv(s, s->ep[0], &iov, 1, k);
        dto_barrier(s);
        for (unsigned k = 0; k < 3; k++)
                dto_expect_dto(s->recv_evd, s->ep[0], k, DAT_DTO_SUCCESS, DTO_ANY_LENGTH,
                               DAT_DTO_RECEIVE);
}

/* The DTO completion stream (dat_ep_post_send(3DAT) and siblings on a
 * reliable connection, dat_rmr_bind(3DAT) "fences" what follows it):
 * requests of every kind complete on the request EVD in post order, a
 * large Write before a tiny Send, a bind in its place, each with its
 * cookie, length and operation. */
Test(DTO_SUITE(rdma), requests_of_every_kind_complete_in_post_order)
{
        struct dto_config cfg = { .buf_len = 4 << 20 };

        dto_run(&cfg, mixed_server, mixed_client, NULL);
}

/* ---- lengths known at post time -------------------------------------------- */

static void length_mismatch_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, 200);
        DAT_RETURN r;

        (void)arg;
        /* dat_ep_post_rdma_read(3DAT): local buffer too small for the remote data */
        r = dat_ep_post_rdma_read(s->ep[0], 1, &iov, dto_cookie(1), &remote, 0);
        DTO_ASSERT_TYPE(r, DAT_LENGTH_ERROR);
        /* dat_ep_post_rdma_write(3DAT): remote buffer too small for the local data */
        iov.segment_length = 200;
        remote.segment_length = 100;
        r = dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(2), &remote, 0);
        DTO_ASSERT_TYPE(r, DAT_LENGTH_ERROR);
        /* nothing was posted: the next request's completion is the first */
        remote.segment_length = 200;
        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 3, &remote);
}

static void nothing_server(struct dto_side *s, void *arg)
{
        (void)s;
        (void)arg;
}

/* dat_ep_post_rdma_read(3DAT) and dat_ep_post_rdma_write(3DAT):
 * DAT_LENGTH_ERROR when the receiving buffer is too small for the sending
 * buffer's data (both sizes are known when posting); nothing is posted. */
Test(DTO_SUITE(rdma), rdma_length_mismatch_is_refused)
{
        dto_run(NULL, nothing_server, length_mismatch_client, NULL);
}

/* ---- long payloads, each with a small message right behind it ------------- */

/* Around the length from which a TCP receiver waits for a good part of a
 * payload before it reads (channel_tcp.c: 256 KiB), and well beyond. */
static const DAT_VLEN long_lens[] = { (256 << 10) - 1, 256 << 10, (256 << 10) + 1,
                                      (640 << 10) + 3, 1 << 20 };
#define N_LONG (sizeof(long_lens) / sizeof(long_lens[0]))
#define TAIL_LEN 8

enum long_op { LONG_SEND, LONG_WRITE, LONG_READ };

static void post_tail(struct dto_side *s, uint64_t cookie)
{
        DAT_LMR_TRIPLET tail = dto_iov(&s->mem, 0, TAIL_LEN);

        dto_fill(s->mem.buf, TAIL_LEN, cookie);
        DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &tail, dto_cookie(cookie), 0), DAT_SUCCESS);
}

/* The initiator: for each length the long operation and an 8-byte Send
 * behind it, every completion taken by polling alone. */
static void long_initiator(struct dto_side *s, void *arg)
{
        enum long_op op = *(const enum long_op *)arg;

        for (unsigned i = 0; i < N_LONG; i++) {
                DAT_VLEN len = long_lens[i];
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, initiator_off(i), len);
                DAT_RMR_TRIPLET remote = dto_riov(&s->peer, target_off(s, i), len);
                uint64_t seed = 1100 + i;
                DAT_EVENT ev;

                if (op != LONG_READ)
                        dto_fill(s->mem.buf + initiator_off(i), len, seed);
                dto_barrier(s); /* the target's receives and data are in place */
                if (op == LONG_SEND)
                        DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(seed), 0),
                                      DAT_SUCCESS);
                else if (op == LONG_WRITE)
                        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(seed),
                                                             &remote, 0),
                                      DAT_SUCCESS);
                else
                        DTO_ASSERT_EQ(dat_ep_post_rdma_read(s->ep[0], 1, &iov, dto_cookie(seed),
                                                            &remote, 0),
                                      DAT_SUCCESS);
                post_tail(s, 2000 + i);
                ev = dto_poll_event(s->request_evd);
                dto_check_dto(&ev, s->ep[0], seed, DAT_DTO_SUCCESS, len,
                              op == LONG_SEND    ? DAT_DTO_SEND
                              : op == LONG_WRITE ? DAT_DTO_RDMA_WRITE
                                                 : DAT_DTO_RDMA_READ);
                ev = dto_poll_event(s->request_evd);
                dto_check_dto(&ev, s->ep[0], 2000 + i, DAT_DTO_SUCCESS, TAIL_LEN, DAT_DTO_SEND);
                if (op == LONG_READ)
                        dto_verify(s->mem.buf + initiator_off(i), len, seed);
        }
}

static void long_target(struct dto_side *s, void *arg)
{
        enum long_op op = *(const enum long_op *)arg;

        for (unsigned i = 0; i < N_LONG; i++) {
                DAT_VLEN len = long_lens[i];
                DAT_LMR_TRIPLET tail = dto_iov(&s->mem, s->mem.len - 64, TAIL_LEN);
                unsigned char *at = s->mem.buf + target_off(s, i);
                uint64_t seed = 1100 + i;
                DAT_EVENT ev;

                if (op == LONG_SEND) {
                        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, target_off(s, i), len);

                        dto_post_recv(s, s->ep[0], &iov, 1, seed);
                } else if (op == LONG_READ) {
                        dto_fill(at, len, seed);
                }
                dto_post_recv(s, s->ep[0], &tail, 1, 2000 + i);
                dto_barrier(s);
                if (op == LONG_SEND) {
                        ev = dto_poll_event(s->recv_evd);
                        dto_check_dto(&ev, s->ep[0], seed, DAT_DTO_SUCCESS, len, DAT_DTO_RECEIVE);
                }
                ev = dto_poll_event(s->recv_evd);
                dto_check_dto(&ev, s->ep[0], 2000 + i, DAT_DTO_SUCCESS, TAIL_LEN, DAT_DTO_RECEIVE);
                dto_verify(s->mem.buf + s->mem.len - 64, TAIL_LEN, 2000 + i);
                if (op != LONG_READ)
                        dto_verify(at, len, seed);
        }
}

/* dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT),
 * dat_ep_post_rdma_read(3DAT): payloads of 256 KiB - 1 .. 1 MiB arrive
 * whole, and the 8-byte Send posted right behind each arrives too, to
 * consumers that only poll.  On TCP the receiver reads such a payload 256
 * KiB at a time (SO_RCVLOWAT): a mark left up after the payload would
 * leave the small message behind it unread. */
Test(DTO_SUITE(rdma), long_payloads_and_the_message_behind_each_reach_polling_consumers)
{
        static const enum long_op ops[] = { LONG_SEND, LONG_WRITE, LONG_READ };
        struct dto_config cfg = { .buf_len = 2 * ((1 << 20) + 4096) };

        for (unsigned k = 0; k < 3; k++)
                dto_run(&cfg, long_target, long_initiator, (void *)&ops[k]);
}
