/* Direct RDMA Writes on the shm transport (libdat/shm_direct.h): into
 * shared memory libdat provides (DAT_MEM_TYPE_SHARED_VIRTUAL), the
 * initiator's Writes land without the target process, and they stop when
 * the window stops being reachable.  shm only: the other transports have
 * no direct Writes (the RDMA bodies run on them, and on shm with shared
 * memory, in test_dto_rdma). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/dto/dto_fixture.h"

#include <dat2/dat_ib_extensions.h>

DTO_TEST_SUITE(direct);

#define SLOT_LEN 256
#define N_WRITES 8

/* The target: shared memory, described to the initiator, then its pid. */
static struct dto_mem target_setup(struct dto_side *s, DAT_VLEN len)
{
        struct dto_mem m = dto_shared_mem_new(s, DAT_HANDLE_NULL, len, DAT_MEM_PRIV_ALL_FLAG);

        memset(m.buf, 0, len);
        (void)dto_exchange(s, &m);
        dto_put_u64(s, (uint64_t)getpid());
        return m;
}

/* The initiator: the target's shared memory and pid; two Writes through
 * the channel first, the second of which brings the target's export (an
 * export waits for a second Write in a row to a context). */
static struct dto_remote initiator_setup(struct dto_side *s, pid_t *target)
{
        struct dto_mem none = { 0 };
        struct dto_remote r = dto_exchange(s, &none);
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, SLOT_LEN);
        DAT_RMR_TRIPLET remote = dto_riov(&r, 0, SLOT_LEN);

        *target = (pid_t)dto_get_u64(s);
        dto_fill(s->mem.buf, SLOT_LEN, 1);
        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 1, &remote);
        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 2, &remote);
        return r;
}

/* ---- without the target ----------------------------------------------------- */

static void frozen_target(struct dto_side *s, void *arg)
{
        struct dto_mem m = target_setup(s, N_WRITES * SLOT_LEN);

        (void)arg;
        /* Frozen by the initiator from here until it says so: this
         * thread takes nothing either. */
        DTO_ASSERT_EQ(dto_get_u64(s), 1);
        for (unsigned k = 1; k < N_WRITES; k++)
                dto_verify(m.buf + k * SLOT_LEN, SLOT_LEN, 10 + k);
        dto_barrier(s);
        dto_mem_free(&m);
}

static void writes_to_frozen(struct dto_side *s, void *arg)
{
        const bool *direct = arg;
        pid_t target;
        struct dto_remote r = initiator_setup(s, &target);
        struct dto_frozen frozen;

        dto_freeze_helpers(target, &frozen);
        for (unsigned k = 1; k < N_WRITES; k++) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, k * SLOT_LEN, SLOT_LEN);
                DAT_RMR_TRIPLET remote = dto_riov(&r, k * SLOT_LEN, SLOT_LEN);

                dto_fill(s->mem.buf + k * SLOT_LEN, SLOT_LEN, 10 + k);
                DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(10 + k),
                                                     &remote, DAT_COMPLETION_DEFAULT_FLAG),
                              DAT_SUCCESS);
                if (*direct) {
                        /* Placed by the copy: complete already. */
                        dto_expect_dto(s->request_evd, s->ep[0], 10 + k, DAT_DTO_SUCCESS,
                                       SLOT_LEN, DAT_DTO_RDMA_WRITE);
                } else if (k == 1) {
                        /* Through the channel, nobody there takes it. */
                        dto_expect_no_event(s->request_evd, 300 * 1000);
                }
        }
        dto_thaw(&frozen);
        if (!*direct)
                for (unsigned k = 1; k < N_WRITES; k++)
                        dto_expect_dto(s->request_evd, s->ep[0], 10 + k, DAT_DTO_SUCCESS,
                                       SLOT_LEN, DAT_DTO_RDMA_WRITE);
        dto_put_u64(s, 1);
        dto_barrier(s);
}

/* Whether one process may take another's descriptors (pidfd_getfd(2)),
 * between two siblings as the roles are: ptrace's permission, which a
 * Yama ptrace_scope of 1 or a container's seccomp filter withholds.
 * Without it libdat makes no direct Write (the Writes go through the
 * channel), and there is nothing to test. */
static bool siblings_may_take_descriptors(void)
{
        pid_t holder, taker;
        int status = -1;

        holder = fork();
        if (holder == 0) {
                pause();
                _exit(0);
        }
        cr_assert_gt(holder, 0);
        taker = fork();
        if (taker == 0) {
                int pidfd = (int)syscall(SYS_pidfd_open, holder, 0);

                _exit(pidfd >= 0 && syscall(SYS_pidfd_getfd, pidfd, 2, 0) >= 0 ? 0 : 1);
        }
        if (taker > 0)
                waitpid(taker, &status, 0);
        kill(holder, SIGKILL);
        waitpid(holder, NULL, 0);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* dto.h: "RDMA lands without the target application's help"; into shared
 * memory on shm without the target process at all: its progress thread
 * frozen and its application in no DAT call, the Writes after the first
 * complete (the data is in the target memory when they do). */
Test(DTO_SUITE(direct), writes_into_shared_memory_land_while_the_target_process_is_frozen)
{
        bool direct = true;

        if (!siblings_may_take_descriptors())
                cr_skip_test("a process may not take its sibling's descriptors here (pidfd_getfd)");
        dto_run(NULL, frozen_target, writes_to_frozen, &direct);
}

/* The control of the test above: with direct Writes turned off
 * (DATD_SHM_NO_DIRECT) the same Writes go through the channel, and a
 * frozen target takes nothing until it thaws. */
Test(DTO_SUITE(direct), without_direct_writes_a_frozen_target_takes_nothing)
{
        static const char *const env[] = { "DATD_SHM_NO_DIRECT=1", NULL };
        struct dto_config cfg = { .env = env };
        bool direct = false;

        dto_run(&cfg, frozen_target, writes_to_frozen, &direct);
}

/* ---- windows too long to map ------------------------------------------------------ */

/* shm_direct.h, SHM_DIRECT_WINDOW_MAX: below the target's window (a page),
 * in one role only: the other exports or maps as ever. */
static void window_max_for(const struct dto_side *s, enum dto_role role)
{
        if (s->role == role)
                DTO_ASSERTF(setenv("DATD_SHM_DIRECT_WINDOW_MAX", "1024", 1) == 0, "setenv: %m");
}

static void window_max_in_initiator(const struct dto_side *s)
{
        window_max_for(s, DTO_CLIENT);
}

static void window_max_in_target(const struct dto_side *s)
{
        window_max_for(s, DTO_SERVER);
}

/* A window longer than the importer maps (its exporter says how long:
 * the importer bounds it) is not mapped: the Writes to it go through the
 * channel, and a frozen target takes nothing. */
Test(DTO_SUITE(direct), a_window_longer_than_the_importer_maps_is_not_mapped)
{
        struct dto_config cfg = { .pre_open = window_max_in_initiator };
        bool direct = false;

        if (!siblings_may_take_descriptors())
                cr_skip_test("a process may not take its sibling's descriptors here (pidfd_getfd)");
        dto_run(&cfg, frozen_target, writes_to_frozen, &direct);
}

/* The same bound on the exporter's side: such a window is not exported. */
Test(DTO_SUITE(direct), a_window_longer_than_the_exporter_offers_is_not_exported)
{
        struct dto_config cfg = { .pre_open = window_max_in_target };
        bool direct = false;

        if (!siblings_may_take_descriptors())
                cr_skip_test("a process may not take its sibling's descriptors here (pidfd_getfd)");
        dto_run(&cfg, frozen_target, writes_to_frozen, &direct);
}

/* ---- order ---------------------------------------------------------------------- */

#define SPOT (SLOT_LEN * 2)

static void order_target(struct dto_side *s, void *arg)
{
        struct dto_mem m = target_setup(s, 4 * SLOT_LEN);
        DAT_LMR_TRIPLET rx = dto_iov(&s->mem, 0, 64);

        (void)arg;
        /* For the immediate data. */
        DTO_ASSERT_EQ(dat_ep_post_recv(s->ep[0], 1, &rx, dto_cookie(7), DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_put_u64(s, 1);
        DTO_ASSERT_EQ(dto_get_u64(s), 2); /* thawed */
        DTO_ASSERT_EQ(dto_wait_event(s->recv_evd).event_number, DAT_IB_DTO_EVENT);
        dto_barrier(s); /* every request of the initiator completed */
        dto_verify(m.buf + SPOT, SLOT_LEN, 32);
        dto_barrier(s);
        dto_mem_free(&m);
}

static void order_initiator(struct dto_side *s, void *arg)
{
        pid_t target;
        struct dto_remote r;
        struct dto_frozen frozen;
        DAT_RMR_TRIPLET remote;
        DAT_LMR_TRIPLET first, second;

        (void)arg;
        r = initiator_setup(s, &target);
        remote = dto_riov(&r, SPOT, SLOT_LEN);
        first = dto_iov(&s->mem, SLOT_LEN, SLOT_LEN);
        second = dto_iov(&s->mem, 2 * SLOT_LEN, SLOT_LEN);
        dto_fill(s->mem.buf + SLOT_LEN, SLOT_LEN, 31);
        dto_fill(s->mem.buf + 2 * SLOT_LEN, SLOT_LEN, 32);
        DTO_ASSERT_EQ(dto_get_u64(s), 1); /* its receive is posted */
        dto_freeze_helpers(target, &frozen);
        /* With immediate data a Write always goes through the channel:
         * it waits there, the target frozen.  The plain Write to the same
         * spot behind it must not land first. */
        DTO_ASSERT_EQ(dat_ib_post_rdma_write_immed(s->ep[0], 1, &first, dto_cookie(31), &remote, 5,
                                                   DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &second, dto_cookie(32), &remote,
                                             DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_thaw(&frozen);
        dto_put_u64(s, 2);
        DTO_ASSERT_EQ(dto_wait_event(s->request_evd).event_number, DAT_IB_DTO_EVENT);
        dto_expect_dto(s->request_evd, s->ep[0], 32, DAT_DTO_SUCCESS, SLOT_LEN, DAT_DTO_RDMA_WRITE);
        dto_barrier(s);
        dto_barrier(s);
}

/* A reliable connection places an EP's Writes in order, and completes its
 * requests in order: a Write is copied straight in only when nothing of
 * the EP's is outstanding, never past a Write still in the channel. */
Test(DTO_SUITE(direct), a_write_never_lands_before_an_earlier_one_still_in_the_channel)
{
        dto_run(NULL, order_target, order_initiator, NULL);
}

/* ---- revocation ------------------------------------------------------------------- */

/* The initiator, after initiator_setup: a Write of pattern seed into the
 * target's second slot (straight in), *iov and *remote where it went;
 * then tells the target. */
static void write_second_slot(struct dto_side *s, uint64_t seed, DAT_LMR_TRIPLET *iov,
                              DAT_RMR_TRIPLET *remote)
{
        pid_t target;
        struct dto_remote r = initiator_setup(s, &target);

        *iov = dto_iov(&s->mem, SLOT_LEN, SLOT_LEN);
        *remote = dto_riov(&r, SLOT_LEN, SLOT_LEN);
        dto_fill(s->mem.buf + SLOT_LEN, SLOT_LEN, seed);
        dto_rdma_write_wait(s, s->ep[0], iov, 1, seed, remote);
        dto_put_u64(s, 1);
}

/* A Write the target must refuse: DAT_DTO_ERR_REMOTE_ACCESS, and the
 * connection breaks (dto.h: error completions). */
static void write_refused(struct dto_side *s, DAT_LMR_TRIPLET *iov, const DAT_RMR_TRIPLET *remote,
                          uint64_t cookie)
{
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, iov, dto_cookie(cookie), remote,
                                             DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_expect_dto(s->request_evd, s->ep[0], cookie, DAT_DTO_ERR_REMOTE_ACCESS, DTO_ANY_LENGTH,
                       DAT_DTO_RDMA_WRITE);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
}

static void freeing_target(struct dto_side *s, void *arg)
{
        struct dto_mem m = target_setup(s, 2 * SLOT_LEN);

        (void)arg;
        DTO_ASSERT_EQ(dto_get_u64(s), 1); /* the second Write went */
        dto_verify(m.buf + SLOT_LEN, SLOT_LEN, 41);
        dto_mem_free(&m);
        dto_put_u64(s, 2);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
        dto_barrier(s);
}

/* The initiator of a revocation test: a Write straight in (pattern
 * *arg), then, once the target says the window is gone, one it refuses. */
static void writes_after_revocation(struct dto_side *s, void *arg)
{
        const uint64_t *seed = arg;
        DAT_LMR_TRIPLET iov;
        DAT_RMR_TRIPLET remote;

        write_second_slot(s, *seed, &iov, &remote);
        DTO_ASSERT_EQ(dto_get_u64(s), 2); /* the window is gone */
        dto_fill(s->mem.buf + SLOT_LEN, SLOT_LEN, *seed + 1);
        write_refused(s, &iov, &remote, *seed + 1);
        dto_barrier(s);
}

/* dat_lmr_free(3DAT): the LMR's rmr_context is no longer valid once the
 * call returns; a peer that mapped its memory writes no more into it
 * (the Write through the channel is refused: DAT_DTO_ERR_REMOTE_ACCESS,
 * and the connection breaks, as dto.h says of error completions). */
Test(DTO_SUITE(direct), a_write_after_the_target_freed_its_lmr_is_refused)
{
        uint64_t seed = 41;

        dto_run(NULL, freeing_target, writes_after_revocation, &seed);
}

/* dat_rmr_bind of [0, len) of m with remote write on ep[0] (len 0:
 * unbinds), waited for; the new context. */
static DAT_RMR_CONTEXT bind_of(struct dto_side *s, DAT_RMR_HANDLE rmr, const struct dto_mem *m,
                               DAT_VLEN len)
{
        DAT_LMR_TRIPLET window = dto_iov(m, 0, len);
        DAT_RMR_COOKIE c = { .as_64 = len };
        DAT_RMR_CONTEXT ctx = 0;
        DAT_EVENT ev;

        DTO_ASSERT_EQ(dat_rmr_bind(rmr, m->lmr, &window, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA,
                                   s->ep[0], c, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                      DAT_SUCCESS);
        ev = dto_wait_event(s->request_evd);
        DTO_ASSERT_EQ(ev.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.status, DAT_RMR_BIND_SUCCESS);
        return ctx;
}

static void unbinding_target(struct dto_side *s, void *arg)
{
        struct dto_mem m = dto_shared_mem_new(s, DAT_HANDLE_NULL, 2 * SLOT_LEN, DAT_MEM_PRIV_ALL_FLAG);
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;

        (void)arg;
        memset(m.buf, 0, 2 * SLOT_LEN);
        DTO_ASSERT_EQ(dat_rmr_create(s->pz, &rmr), DAT_SUCCESS);
        m.rmr_context = bind_of(s, rmr, &m, 2 * SLOT_LEN);
        (void)dto_exchange(s, &m);
        dto_put_u64(s, (uint64_t)getpid());
        DTO_ASSERT_EQ(dto_get_u64(s), 1); /* it wrote three times, the third straight in */
        dto_verify(m.buf + SLOT_LEN, SLOT_LEN, 61);
        (void)bind_of(s, rmr, &m, 0);
        dto_put_u64(s, 2);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
        dto_verify(m.buf + SLOT_LEN, SLOT_LEN, 61);
        dto_barrier(s);
        DTO_ASSERT_EQ(dat_rmr_free(rmr), DAT_SUCCESS);
        dto_mem_free(&m);
}

/* dat_rmr_bind(3DAT): "Any RDMA DTO that uses the previous value of
 * rmr_context after the dat_rmr_bind() is completed fail": unbound, a
 * window the peer had mapped takes no more of its Writes (refused, and
 * nothing lands). */
Test(DTO_SUITE(direct), a_write_after_the_target_unbound_its_rmr_is_refused)
{
        uint64_t seed = 61;

        dto_run(NULL, unbinding_target, writes_after_revocation, &seed);
}

static void survivor_target(struct dto_side *s, void *arg)
{
        struct dto_mem m = target_setup(s, 2 * SLOT_LEN);

        (void)arg;
        DTO_ASSERT_EQ(dto_get_u64(s), 1);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
        dto_verify(m.buf + SLOT_LEN, SLOT_LEN, 51);
        /* The peer that mapped it is gone: freeing waits for nobody. */
        dto_mem_free(&m);
}

static void writes_then_dies(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov;
        DAT_RMR_TRIPLET remote;

        (void)arg;
        write_second_slot(s, 51, &iov, &remote);
        dto_die(s);
}

/* A peer that mapped our memory and died: the connection breaks, and the
 * memory frees as ever.  (An importer that dies in the middle of a copy:
 * tests/libdat/test_shm_direct.) */
Test(DTO_SUITE(direct), memory_a_dead_peer_wrote_into_frees)
{
        dto_run(NULL, survivor_target, writes_then_dies, NULL);
}

/* ---- an initiator that may not map -------------------------------------------- */

/* The client may not take the peer's descriptors: pidfd_getfd fails with
 * EPERM, as between two users or in a sandbox. */
static void refuse_pidfd_getfd(const struct dto_side *s)
{
        struct sock_filter filter[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_getfd, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { .len = sizeof(filter) / sizeof(filter[0]), .filter = filter };

        if (s->role != DTO_CLIENT)
                return;
        DTO_ASSERTF(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS: %m");
        DTO_ASSERTF(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0, "seccomp: %m");
}

static void two_windows_target(struct dto_side *s, void *arg)
{
        struct dto_mem a = dto_shared_mem_new(s, DAT_HANDLE_NULL, SLOT_LEN, DAT_MEM_PRIV_ALL_FLAG);
        struct dto_mem b = dto_shared_mem_new(s, DAT_HANDLE_NULL, SLOT_LEN, DAT_MEM_PRIV_ALL_FLAG);

        (void)arg;
        (void)dto_exchange(s, &a);
        (void)dto_exchange(s, &b);
        dto_put_u64(s, (uint64_t)getpid());
        dto_barrier(s); /* every Write completed */
        /* The last round's patterns (70 + 2 * round + window). */
        dto_verify(a.buf, SLOT_LEN, 72);
        dto_verify(b.buf, SLOT_LEN, 73);
        dto_barrier(s);
        dto_mem_free(&a);
        dto_mem_free(&b);
}

static void writes_to_two_windows(struct dto_side *s, void *arg)
{
        struct dto_mem none = { 0 };
        struct dto_remote r[2];
        struct dto_frozen frozen;
        pid_t target;

        (void)arg;
        r[0] = dto_exchange(s, &none);
        r[1] = dto_exchange(s, &none);
        target = (pid_t)dto_get_u64(s);
        /* Two Writes in a row to each window, all in the channel before
         * the target takes any: it exports both at once, and the two
         * EXPORTs come together. */
        dto_freeze_helpers(target, &frozen);
        for (unsigned round = 0; round < 2; round++) {
                for (unsigned k = 0; k < 4; k++) {
                        unsigned w = k / 2;
                        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, w * SLOT_LEN, SLOT_LEN);
                        DAT_RMR_TRIPLET remote = dto_riov(&r[w], 0, SLOT_LEN);

                        dto_fill(s->mem.buf + w * SLOT_LEN, SLOT_LEN, 70 + 2 * round + w);
                        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(k), &remote,
                                                             DAT_COMPLETION_DEFAULT_FLAG),
                                      DAT_SUCCESS);
                        if (round == 0 && k == 3)
                                dto_thaw(&frozen);
                        if (round == 1 || k == 3)
                                for (unsigned j = round == 1 ? k : 0; j <= k; j++)
                                        dto_expect_dto(s->request_evd, s->ep[0], j, DAT_DTO_SUCCESS,
                                                       SLOT_LEN, DAT_DTO_RDMA_WRITE);
                }
        }
        dto_expect_no_event(s->conn_evd, 100 * 1000);
        dto_barrier(s);
        dto_barrier(s);
}

/* An EXPORT the initiator cannot use (no pidfd_getfd on the peer) makes it
 * ask no more; the target's other EXPORTs already on their way are let
 * go, and the connection stays up, its Writes going through the channel. */
Test(DTO_SUITE(direct), exports_an_initiator_cannot_take_leave_the_connection_up)
{
        struct dto_config cfg = { .pre_open = refuse_pidfd_getfd };

        dto_run(&cfg, two_windows_target, writes_to_two_windows, NULL);
}
