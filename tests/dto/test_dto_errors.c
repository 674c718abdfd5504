/* Error completions (libdat/dto.h, "Error completions") between two
 * processes, on the transport this program was built for: every error
 * completion dto.h names, the target's memory verified untouched where the
 * fault was an access it must refuse, and what follows every error
 * completion -- both EPs go Disconnected with DAT_CONNECTION_EVENT_BROKEN,
 * and every other DTO still outstanding (several requests posted behind the
 * faulty one, receives on both sides) completes DAT_DTO_ERR_FLUSHED, in
 * order, each exactly once.
 *
 * A local segment outside its LMR is no error completion but a synchronous
 * DAT_INVALID_PARAMETER (the man pages' rule, which dto.h adopted); the
 * test for it is here too, beside the one completion that remains
 * DAT_DTO_ERR_LOCAL_PROTECTION (a receive whose LMR went away).
 *
 * The server is the target, the client the initiator.  Layout of both
 * sides' s->mem (256 KiB): the server's is filled with SEED_MEM and must
 * never change; the RMR under test covers [RMR_OFF, RMR_OFF + RMR_LEN) of
 * it, so that the byte after the RMR is still inside the LMR.  The
 * client's holds an image of the target ([0, 128 KiB), so that the bytes
 * a legal access would move are known), foreign data to write
 * ([FOREIGN_OFF, +32 KiB): never present in the target) and scratch space
 * for reads ([SCRATCH_OFF, +64 KiB)).
 *
 * The gate: so that the requests "behind" the faulty one are surely posted
 * before the fault can be seen (a fault found at once would disconnect the
 * EP under the later posts), the client first posts a Send (cookie 9) that
 * waits for a receive, then the faulty request, then the ones behind it,
 * and only then lets the server post the receive the gate waits for (99).
 * Requests are served in order, so the fault is met after all were posted.
 * (A fault the initiator itself finds -- a length beyond its limits -- has
 * no gate: the requests behind it either are posted before the connection
 * ends or are posted to a Disconnected EP, where dat_ep_post_send(3DAT) and
 * the others flush them at once: the same completions either way.) */
#include "config.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tests/dto/dto_fault.h"
#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(errors);

#define SEED_MEM 1000
#define SEED_PZ2 2000
#define SEED_FOREIGN 3000
#define SEED_MSG 4000

#define RMR_OFF (64u * 1024)
#define RMR_LEN (16u * 1024)            /* == DTO_CMA_THRESHOLD: the large-payload path */
#define FOREIGN_OFF (128u * 1024)
#define SCRATCH_OFF (192u * 1024)
#define BEHIND_OFF (192u * 1024)        /* where the valid write behind the fault aims */
#define MSG_LEN 64u
#define RX_LEN (64u * 1024)             /* each side's receive buffers (a separate LMR) */

/* ---- RDMA faults: the target refuses, DAT_DTO_ERR_REMOTE_ACCESS ----------- */

enum rdma_fault_kind {
        WRONG_CONTEXT,          /* an rmr_context the target never gave out */
        PAST_END,               /* the RMR's range shifted by one byte */
        WRAPPING,               /* target_address + length wraps around 2^64 */
        NO_PRIVILEGE,           /* a Write to a read-only RMR, a Read from a write-only one */
        OTHER_PZ,               /* an RMR of another PZ than the target EP's */
};

struct rdma_fault {
        enum rdma_fault_kind kind;
        DAT_DTOS op;            /* DAT_DTO_RDMA_WRITE or DAT_DTO_RDMA_READ */
};

static DAT_MEM_PRIV_FLAGS rmr_privileges(const struct rdma_fault *f)
{
        if (f->kind != NO_PRIVILEGE)
                return DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
        return f->op == DAT_DTO_RDMA_WRITE ? DAT_MEM_PRIV_REMOTE_READ_FLAG
                                           : DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
}

/* The receives a side keeps outstanding while the fault happens. */
static void post_receives(struct dto_side *s, const struct dto_mem *rx, unsigned n,
                          uint64_t first_cookie, struct dto_posted_list *l)
{
        for (unsigned i = 0; i < n; i++)
                dto_post_recv_one(s->ep[0], dto_iov(rx, i * 4096, 4096), first_cookie + i, l);
}

static struct dto_mem rx_mem(struct dto_side *s)
{
        return dto_mem_new(s, DAT_HANDLE_NULL, RX_LEN, DAT_MEM_PRIV_ALL_FLAG);
}

/* Server: waits until the client posted the gate, the faulty request and
 * the ones behind it; posts the gate's receive and then n receives of 4096
 * bytes (cookies 100...; the first is *first instead if first is not NULL),
 * recorded in recvs; sees the gate pass. */
static void open_gate(struct dto_side *s, const struct dto_mem *rx, unsigned n,
                      const DAT_LMR_TRIPLET *first, struct dto_posted_list *recvs)
{
        dto_get_u64(s);
        dto_post_recv_one(s->ep[0], dto_iov(rx, RX_LEN - 4096, 4096), 99, NULL);
        for (unsigned i = 0; i < n; i++)
                dto_post_recv_one(s->ep[0], i == 0 && first ? *first : dto_iov(rx, i * 4096, 4096),
                                  100 + i, recvs);
        dto_expect_recv(s, s->ep[0], 99, MSG_LEN);
}

/* l without its first entry. */
static struct dto_posted_list all_but_first(const struct dto_posted_list *l)
{
        struct dto_posted_list rest = { .n = l->n - 1 };

        memcpy(rest.d, l->d + 1, rest.n * sizeof(rest.d[0]));
        return rest;
}

/* Client: the gate Send. */
static void post_gate(struct dto_side *s)
{
        dto_post_send_one(s->ep[0], dto_iov(&s->mem, FOREIGN_OFF, MSG_LEN), 9, NULL);
}

/* The target's side of every fault: its receives flush, its connection
 * breaks, and not one byte of its memory changed. */
static void target_sees_the_break(struct dto_side *s, struct dto_posted_list *recvs)
{
        dto_expect_broken(s, s->ep[0]);
        dto_expect_all(s->recv_evd, s->ep[0], recvs, DAT_DTO_ERR_FLUSHED);
        dto_expect_no_event(s->recv_evd, 100000);
        dto_expect_empty(s->request_evd);
        dto_verify(s->mem.buf, s->mem.len, SEED_MEM);
}

static void rdma_fault_server(struct dto_side *s, void *arg)
{
        const struct rdma_fault *f = arg;
        struct dto_mem rx = rx_mem(s), pz2_mem = { 0 };
        DAT_EP_HANDLE bind_ep = s->ep[0];
        const struct dto_mem *target = &s->mem;
        DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
        struct dto_posted_list recvs = { 0 };
        struct dto_remote r;

        if (f->kind == OTHER_PZ) {
                /* ep[1] is moved to a second PZ before it connects; the RMR
                 * under test lives there, and is used over ep[0]. */
                DAT_EP_PARAM p = { 0 };

                DTO_ASSERT_EQ(dat_pz_create(s->ia, &pz2), DAT_SUCCESS);
                p.pz_handle = pz2;
                DTO_ASSERT_EQ(dat_ep_modify(s->ep[1], DAT_EP_FIELD_PZ_HANDLE, &p), DAT_SUCCESS);
                pz2_mem = dto_mem_new(s, pz2, 2 * RMR_OFF, DAT_MEM_PRIV_ALL_FLAG);
                dto_fill(pz2_mem.buf, pz2_mem.len, SEED_PZ2);
                target = &pz2_mem;
                bind_ep = s->ep[1];
        }
        if (s->cfg->no_connect)
                dto_connect(s);
        dto_fill(s->mem.buf, s->mem.len, SEED_MEM);
        r = dto_rmr_bind_range(s, bind_ep, pz2, target, RMR_OFF, RMR_LEN, rmr_privileges(f));
        dto_put(s, &r, sizeof(r));
        dto_barrier(s);
        open_gate(s, &rx, 3, NULL, &recvs);
        target_sees_the_break(s, &recvs);
        if (f->kind == OTHER_PZ) {
                dto_verify(pz2_mem.buf, pz2_mem.len, SEED_PZ2);
                /* The fault broke ep[0]'s connection only. */
                DTO_ASSERT_EQ(dto_ep_state(s->ep[1]), DAT_EP_STATE_CONNECTED);
        }
        dto_barrier(s);
}

/* The remote triplet of the faulty access. */
static DAT_RMR_TRIPLET faulty_remote(const struct rdma_fault *f, const struct dto_remote *r,
                                     const struct dto_side *s, DAT_SEG_LENGTH *len)
{
        DAT_RMR_TRIPLET t = { .virtual_address = r->addr, .segment_length = RMR_LEN,
                              .rmr_context = r->rmr_context };

        *len = RMR_LEN;
        switch (f->kind) {
        case WRONG_CONTEXT:
                t.rmr_context = ~r->rmr_context;
                DTO_ASSERT(t.rmr_context != s->peer.rmr_context);
                break;
        case PAST_END:
                t.virtual_address += 1;
                break;
        case WRAPPING:
                *len = MSG_LEN;
                t.virtual_address = UINT64_MAX - MSG_LEN / 2 + 1;
                t.segment_length = MSG_LEN;
                break;
        case NO_PRIVILEGE:
        case OTHER_PZ:
                break;
        }
        return t;
}

/* Proves the RMR itself is good before the fault: a Read of it returns the
 * target's bytes, or (write-only RMR) a Write of the very same bytes
 * succeeds. */
static void control_access(struct dto_side *s, DAT_EP_HANDLE ep, const struct rdma_fault *f,
                           const struct dto_remote *r)
{
        DAT_RMR_TRIPLET whole = dto_riov(r, 0, RMR_LEN);
        DAT_LMR_TRIPLET image = dto_iov(&s->mem, RMR_OFF, RMR_LEN);
        DAT_LMR_TRIPLET scratch = dto_iov(&s->mem, SCRATCH_OFF, RMR_LEN);

        if (rmr_privileges(f) & DAT_MEM_PRIV_REMOTE_READ_FLAG) {
                dto_rdma_read_wait(s, ep, &scratch, 1, 1, &whole);
                DTO_ASSERTF(memcmp(s->mem.buf + SCRATCH_OFF, s->mem.buf + RMR_OFF, RMR_LEN) == 0,
                            "the control Read of the RMR returned other bytes than the target's");
        } else {
                dto_rdma_write_wait(s, ep, &image, 1, 1, &whole);
        }
}

/* Behind a faulty request: Sends, a legal Write that must not land, a legal
 * Read; all of them must flush. */
static void post_behind(struct dto_side *s, uint64_t first_cookie, struct dto_posted_list *reqs)
{
        DAT_LMR_TRIPLET msg = dto_iov(&s->mem, FOREIGN_OFF, MSG_LEN);
        DAT_LMR_TRIPLET foreign = dto_iov(&s->mem, FOREIGN_OFF, 4096);
        DAT_LMR_TRIPLET scratch = dto_iov(&s->mem, SCRATCH_OFF + RMR_LEN, 4096);

        dto_post_send_one(s->ep[0], msg, first_cookie, reqs);
        dto_post_write(s->ep[0], foreign, first_cookie + 1, dto_riov(&s->peer, BEHIND_OFF, 4096),
                       reqs);
        dto_post_send_one(s->ep[0], msg, first_cookie + 2, reqs);
        dto_post_read(s->ep[0], scratch, first_cookie + 3, dto_riov(&s->peer, 0, 4096), reqs);
}

/* The initiator's side after its faulty request (reqs[0]) and those behind
 * it were posted: (the gate opens,) the error completion, the flushes in
 * order, the break. */
static void initiator_sees_the_break(struct dto_side *s, const struct dto_posted_list *reqs,
                                     DAT_DTO_COMPLETION_STATUS error,
                                     struct dto_posted_list *recvs, bool gated)
{
        struct dto_posted_list behind = all_but_first(reqs);

        if (gated) {
                dto_put_u64(s, 1); /* open the gate */
                dto_expect_dto(s->request_evd, s->ep[0], 9, DAT_DTO_SUCCESS, MSG_LEN,
                               DAT_DTO_SEND);
        }
        dto_expect_dto(s->request_evd, s->ep[0], reqs->d[0].cookie, error, DTO_ANY_LENGTH,
                       reqs->d[0].op);
        dto_expect_all(s->request_evd, s->ep[0], &behind, DAT_DTO_ERR_FLUSHED);
        dto_expect_broken(s, s->ep[0]);
        dto_expect_all(s->recv_evd, s->ep[0], recvs, DAT_DTO_ERR_FLUSHED);
        dto_expect_no_event(s->request_evd, 100000);
        dto_expect_empty(s->recv_evd);
}

static void rdma_fault_client(struct dto_side *s, void *arg)
{
        const struct rdma_fault *f = arg;
        struct dto_posted_list reqs = { 0 }, recvs = { 0 };
        struct dto_mem rx = rx_mem(s);
        DAT_EP_HANDLE control_ep = f->kind == OTHER_PZ ? s->ep[1] : s->ep[0];
        DAT_SEG_LENGTH len;
        DAT_RMR_TRIPLET remote;
        struct dto_remote r;

        if (s->cfg->no_connect)
                dto_connect(s);
        dto_get(s, &r, sizeof(r));
        dto_fill(s->mem.buf, FOREIGN_OFF, f->kind == OTHER_PZ ? SEED_PZ2 : SEED_MEM);
        dto_fill(s->mem.buf + FOREIGN_OFF, 32 * 1024, SEED_FOREIGN);
        post_receives(s, &rx, 2, 200, &recvs);
        dto_barrier(s);
        control_access(s, control_ep, f, &r);
        remote = faulty_remote(f, &r, s, &len);
        post_gate(s);
        if (f->op == DAT_DTO_RDMA_WRITE)
                dto_post_write(s->ep[0], dto_iov(&s->mem, FOREIGN_OFF, len), 10, remote, &reqs);
        else
                dto_post_read(s->ep[0], dto_iov(&s->mem, SCRATCH_OFF, len), 10, remote, &reqs);
        post_behind(s, 11, &reqs);
        initiator_sees_the_break(s, &reqs, DAT_DTO_ERR_REMOTE_ACCESS, &recvs, true);
        if (f->kind == OTHER_PZ)
                DTO_ASSERT_EQ(dto_ep_state(s->ep[1]), DAT_EP_STATE_CONNECTED);
        dto_barrier(s);
}

static void run_rdma_fault(enum rdma_fault_kind kind, DAT_DTOS op)
{
        struct rdma_fault f = { .kind = kind, .op = op };
        struct dto_config cfg = { 0 };

        if (kind == OTHER_PZ) {
                cfg.n_eps = 2;
                cfg.no_connect = true;
        }
        dto_run(&cfg, rdma_fault_server, rdma_fault_client, &f);
}

/* dat_rmr_free(3DAT), dat_lmr_free(3DAT): an RDMA with an rmr_context the
 * target does not know fails with DAT_DTO_ERR_REMOTE_ACCESS and the
 * connection is broken (dto.h: both EPs Disconnected, BROKEN, the rest
 * flushed); the target's memory is not touched. */
Test(DTO_SUITE(errors), rdma_write_with_a_wrong_rmr_context_is_remote_access)
{
        run_rdma_fault(WRONG_CONTEXT, DAT_DTO_RDMA_WRITE);
}

/* dat_rmr_free(3DAT), dto.h: the same for an RDMA Read of an unknown
 * rmr_context. */
Test(DTO_SUITE(errors), rdma_read_with_a_wrong_rmr_context_is_remote_access)
{
        run_rdma_fault(WRONG_CONTEXT, DAT_DTO_RDMA_READ);
}

/* dto.h: an RDMA whose bounds the target refuses -> REMOTE_ACCESS; one byte
 * past the RMR is outside it even though it is inside the LMR. */
Test(DTO_SUITE(errors), rdma_write_one_byte_past_the_rmr_is_remote_access)
{
        run_rdma_fault(PAST_END, DAT_DTO_RDMA_WRITE);
}

/* dto.h: the same for an RDMA Read one byte past the RMR. */
Test(DTO_SUITE(errors), rdma_read_one_byte_past_the_rmr_is_remote_access)
{
        run_rdma_fault(PAST_END, DAT_DTO_RDMA_READ);
}

/* dto.h: bounds -> REMOTE_ACCESS; an address whose end wraps around 2^64
 * must not pass a bounds check by overflowing. */
Test(DTO_SUITE(errors), rdma_write_to_a_wrapping_address_is_remote_access)
{
        run_rdma_fault(WRAPPING, DAT_DTO_RDMA_WRITE);
}

/* dto.h: the same for an RDMA Read whose end wraps around 2^64. */
Test(DTO_SUITE(errors), rdma_read_from_a_wrapping_address_is_remote_access)
{
        run_rdma_fault(WRAPPING, DAT_DTO_RDMA_READ);
}

/* dat_rmr_bind(3DAT): mem_privileges restrict the remote accesses; dto.h:
 * privileges the target refuses -> REMOTE_ACCESS.  A Write to an RMR bound
 * with remote read only. */
Test(DTO_SUITE(errors), rdma_write_to_a_read_only_rmr_is_remote_access)
{
        run_rdma_fault(NO_PRIVILEGE, DAT_DTO_RDMA_WRITE);
}

/* dat_rmr_bind(3DAT), dto.h: the same for a Read from an RMR bound with
 * remote write only. */
Test(DTO_SUITE(errors), rdma_read_from_a_write_only_rmr_is_remote_access)
{
        run_rdma_fault(NO_PRIVILEGE, DAT_DTO_RDMA_READ);
}

/* dat_rmr_create(3DAT): the PZ restricts access to an RMR to authorised
 * connections; dto.h: an RMR of another PZ than the target EP's ->
 * REMOTE_ACCESS (the same RMR works over an EP of its PZ). */
Test(DTO_SUITE(errors), rdma_write_to_an_rmr_of_another_pz_is_remote_access)
{
        run_rdma_fault(OTHER_PZ, DAT_DTO_RDMA_WRITE);
}

/* dat_rmr_create(3DAT), dto.h: the same for an RDMA Read of an RMR of
 * another PZ. */
Test(DTO_SUITE(errors), rdma_read_from_an_rmr_of_another_pz_is_remote_access)
{
        run_rdma_fault(OTHER_PZ, DAT_DTO_RDMA_READ);
}

/* ---- a message longer than the receive buffer ------------------------------ */

static void long_send_server(struct dto_side *s, void *arg)
{
        struct dto_mem rx = rx_mem(s);
        struct dto_posted_list recvs = { 0 }, rest;
        DAT_LMR_TRIPLET too_short = dto_iov(&rx, 0, MSG_LEN);

        (void)arg;
        dto_fill(s->mem.buf, s->mem.len, SEED_MEM);
        dto_barrier(s);
        /* After the gate's: a receive too short for the long message, two
         * more that would fit the messages behind it. */
        open_gate(s, &rx, 3, &too_short, &recvs);
        dto_expect_dto(s->recv_evd, s->ep[0], 100, DAT_DTO_LENGTH_ERROR, DTO_ANY_LENGTH,
                       DAT_DTO_RECEIVE);
        rest = all_but_first(&recvs);
        target_sees_the_break(s, &rest);
        dto_barrier(s);
}

static void long_send_client(struct dto_side *s, void *arg)
{
        struct dto_posted_list reqs = { 0 }, recvs = { 0 };
        struct dto_mem rx = rx_mem(s);

        (void)arg;
        dto_fill(s->mem.buf + FOREIGN_OFF, 32 * 1024, SEED_FOREIGN);
        post_receives(s, &rx, 2, 200, &recvs);
        dto_barrier(s);
        post_gate(s);
        dto_post_send_one(s->ep[0], dto_iov(&s->mem, FOREIGN_OFF, 2 * MSG_LEN), 10, &reqs);
        post_behind(s, 11, &reqs);
        initiator_sees_the_break(s, &reqs, DAT_DTO_ERR_REMOTE_RESPONDER, &recvs, true);
        dto_barrier(s);
}

/* dat_ep_post_recv(3DAT): an incoming message larger than the local_iov ->
 * the Receive completes DAT_DTO_LENGTH_ERROR; dto.h: the Send
 * DAT_DTO_ERR_REMOTE_RESPONDER, and the connection breaks. */
Test(DTO_SUITE(errors), send_longer_than_the_receive_is_length_error_and_remote_responder)
{
        dto_run(NULL, long_send_server, long_send_client, NULL);
}

/* ---- a receive whose LMR went away ----------------------------------------- */

static void freed_lmr_server(struct dto_side *s, void *arg)
{
        struct dto_mem rx = rx_mem(s), gone = rx_mem(s);
        struct dto_posted_list recvs = { 0 };

        (void)arg;
        dto_fill(s->mem.buf, s->mem.len, SEED_MEM);
        dto_fill(gone.buf, gone.len, SEED_FOREIGN);
        dto_post_recv_one(s->ep[0], dto_iov(&gone, 0, 4096), 100, NULL);
        post_receives(s, &rx, 2, 101, &recvs);
        /* The memory stays mapped: only its registration goes. */
        DTO_ASSERT_EQ(dat_lmr_free(gone.lmr), DAT_SUCCESS);
        dto_barrier(s);
        dto_expect_dto(s->recv_evd, s->ep[0], 100, DAT_DTO_ERR_LOCAL_PROTECTION, DTO_ANY_LENGTH,
                       DAT_DTO_RECEIVE);
        target_sees_the_break(s, &recvs);
        dto_verify(gone.buf, gone.len, SEED_FOREIGN);
        dto_barrier(s);
}

static void freed_lmr_client(struct dto_side *s, void *arg)
{
        struct dto_posted_list reqs = { 0 }, recvs = { 0 };
        struct dto_mem rx = rx_mem(s);

        (void)arg;
        dto_fill(s->mem.buf + FOREIGN_OFF, 32 * 1024, SEED_MSG);
        post_receives(s, &rx, 2, 200, &recvs);
        dto_barrier(s);
        dto_post_send_one(s->ep[0], dto_iov(&s->mem, FOREIGN_OFF, MSG_LEN), 10, &reqs);
        post_behind(s, 11, &reqs);
        initiator_sees_the_break(s, &reqs, DAT_DTO_ERR_REMOTE_RESPONDER, &recvs, false);
        dto_barrier(s);
}

/* dto.h: a receive whose LMR went away (dat_lmr_free(3DAT): a DTO using a
 * destroyed LMR "shall fail and report a protection violation") completes
 * DAT_DTO_ERR_LOCAL_PROTECTION when the message comes, the Send
 * DAT_DTO_ERR_REMOTE_RESPONDER; the connection breaks; the buffer, no longer
 * registered, is not written. */
Test(DTO_SUITE(errors), receive_whose_lmr_was_freed_is_local_protection)
{
        dto_run(NULL, freed_lmr_server, freed_lmr_client, NULL);
}

/* ---- receiver not ready ---------------------------------------------------- */

static void rnr_server(struct dto_side *s, void *arg)
{
        struct dto_posted_list none = { 0 };

        (void)arg;
        dto_fill(s->mem.buf, s->mem.len, SEED_MEM);
        dto_barrier(s);
        target_sees_the_break(s, &none);
        dto_barrier(s);
}

static void rnr_client(struct dto_side *s, void *arg)
{
        struct dto_posted_list reqs = { 0 }, recvs = { 0 };
        struct dto_mem rx = rx_mem(s);

        (void)arg;
        dto_fill(s->mem.buf + FOREIGN_OFF, 32 * 1024, SEED_FOREIGN);
        post_receives(s, &rx, 2, 200, &recvs);
        dto_barrier(s);
        dto_post_send_one(s->ep[0], dto_iov(&s->mem, FOREIGN_OFF, MSG_LEN), 10, &reqs);
        post_behind(s, 11, &reqs);
        initiator_sees_the_break(s, &reqs, DAT_DTO_ERR_RECEIVER_NOT_READY, &recvs, false);
        dto_barrier(s);
}

/* dto.h: a Send with no receive posted on the target within the
 * receiver-not-ready time ($DATD_RNR_TIMEOUT_MS, here 300 ms in both
 * processes) completes DAT_DTO_ERR_RECEIVER_NOT_READY, and the connection
 * breaks. */
Test(DTO_SUITE(errors), send_with_no_receive_is_receiver_not_ready)
{
        static const char *const env[] = { "DATD_RNR_TIMEOUT_MS=300", NULL };
        struct dto_config cfg = { .env = env };

        dto_run(&cfg, rnr_server, rnr_client, NULL);
}

static const DAT_SEG_LENGTH late_sizes[] = { 100, 20000, 1 };

static void late_receive_server(struct dto_side *s, void *arg)
{
        uint64_t off = 0;

        (void)arg;
        dto_get_u64(s); /* the client's Sends are posted and found no receive */
        for (unsigned i = 0; i < 3; i++, off += 32 * 1024)
                dto_post_recv(s, s->ep[0],
                              (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, off, 32 * 1024) }, 1, 100 + i);
        off = 0;
        for (unsigned i = 0; i < 3; i++, off += 32 * 1024) {
                dto_expect_recv(s, s->ep[0], 100 + i, late_sizes[i]);
                dto_verify(s->mem.buf + off, late_sizes[i], SEED_MSG + i);
        }
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_CONNECTED);
}

static void late_receive_client(struct dto_side *s, void *arg)
{
        uint64_t off = 0;

        (void)arg;
        for (unsigned i = 0; i < 3; i++, off += 32 * 1024) {
                dto_fill(s->mem.buf + off, late_sizes[i], SEED_MSG + i);
                dto_post_send_one(s->ep[0], dto_iov(&s->mem, off, late_sizes[i]), 10 + i, NULL);
        }
        /* No receive is posted yet: no Send can have completed. */
        dto_expect_no_event(s->request_evd, 200000);
        dto_put_u64(s, 1);
        for (unsigned i = 0; i < 3; i++)
                dto_expect_dto(s->request_evd, s->ep[0], 10 + i, DAT_DTO_SUCCESS, late_sizes[i],
                               DAT_DTO_SEND);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_CONNECTED);
}

/* dto.h: an arriving Send waits up to the receiver-not-ready time for a
 * receive: receives posted after the Sends arrived, within that time (here
 * 3 s), take them in order and nothing breaks. */
Test(DTO_SUITE(errors), send_waits_for_a_receive_posted_within_the_rnr_time)
{
        static const char *const env[] = { "DATD_RNR_TIMEOUT_MS=3000", NULL };
        struct dto_config cfg = { .env = env };

        dto_run(&cfg, late_receive_server, late_receive_client, NULL);
}

static const DAT_SEG_LENGTH stalled_sizes[] = { 100, 3000 };

static void stalled_receiver(struct dto_side *s, void *arg)
{
        DAT_EVENT ev;
        DAT_COUNT nmore;
        double cpu0, wall0, cpu, wall;

        (void)arg;
        dto_get_u64(s); /* the client's Sends are posted */
        /* They arrive and wait for a receive: while they wait, nothing
         * else comes, and the process sleeps. */
        cpu0 = dto_cpu_seconds();
        wall0 = dto_wall_seconds();
        DTO_ASSERT_TYPE(dat_evd_wait(s->recv_evd, 600000, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED);
        cpu = dto_cpu_seconds() - cpu0;
        wall = dto_wall_seconds() - wall0;
        DTO_ASSERTF(cpu < 0.2 * wall, "%.3f s of CPU in %.3f s with a Send waiting for a receive",
                    cpu, wall);
        for (unsigned i = 0; i < 2; i++)
                dto_post_recv(s, s->ep[0],
                              (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 8192 * i, 8192) }, 1, 200 + i);
        for (unsigned i = 0; i < 2; i++) {
                dto_expect_recv(s, s->ep[0], 200 + i, stalled_sizes[i]);
                dto_verify(s->mem.buf + 8192 * i, stalled_sizes[i], SEED_MSG + 10 + i);
        }
}

static void stalled_sender(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned i = 0; i < 2; i++) {
                dto_fill(s->mem.buf + 8192 * i, stalled_sizes[i], SEED_MSG + 10 + i);
                dto_post_send_one(s->ep[0], dto_iov(&s->mem, 8192 * i, stalled_sizes[i]), 20 + i,
                                  NULL);
        }
        dto_put_u64(s, 1);
        for (unsigned i = 0; i < 2; i++)
                dto_expect_dto(s->request_evd, s->ep[0], 20 + i, DAT_DTO_SUCCESS, stalled_sizes[i],
                               DAT_DTO_SEND);
}

/* A Send that waits for a receive (within the receiver-not-ready time) and
 * the one queued behind it make the receiving process neither spin nor
 * lose a byte: on shm its frame may be read in place in the ring, and what
 * is left of it moves aside while it waits, so that the ring the progress
 * thread sleeps on is empty. */
Test(DTO_SUITE(errors), a_send_waiting_for_a_receive_lets_the_receiver_sleep)
{
        static const char *const env[] = { "DATD_RNR_TIMEOUT_MS=5000", NULL };
        struct dto_config cfg = { .env = env };

        dto_run(&cfg, stalled_receiver, stalled_sender, NULL);
}

/* ---- a local segment outside its LMR (man page: synchronous) -------------- */

static void outside_lmr_server(struct dto_side *s, void *arg)
{
        struct dto_mem rx = rx_mem(s);

        (void)arg;
        dto_fill(s->mem.buf, s->mem.len, SEED_MEM);
        dto_fill(rx.buf, rx.len, SEED_FOREIGN);
        dto_post_recv(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, MSG_LEN) }, 1, 100);
        dto_barrier(s);
        /* The client's refused posts did nothing: its first Send is the one
         * this receive gets, and our memory is as it was. */
        dto_expect_recv(s, s->ep[0], 100, MSG_LEN);
        dto_verify(s->mem.buf, MSG_LEN, SEED_MSG);
        dto_verify_at(s->mem.buf + MSG_LEN, s->mem.len - MSG_LEN, SEED_MEM, MSG_LEN);
        dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&rx, 0, MSG_LEN) }, 1, 101);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_CONNECTED);
        dto_barrier(s);
}

/* Every post kind with iov, expecting DAT_INVALID_PARAMETER. */
static void expect_refused_everywhere(struct dto_side *s, DAT_LMR_TRIPLET iov)
{
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, iov.segment_length);
        DAT_EP_HANDLE ep = s->ep[0];
        DAT_DTO_COOKIE c = dto_cookie(99);

        DTO_ASSERT_TYPE(dat_ep_post_send(ep, 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG),
                        DAT_INVALID_PARAMETER);
        DTO_ASSERT_TYPE(dat_ep_post_recv(ep, 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG),
                        DAT_INVALID_PARAMETER);
        DTO_ASSERT_TYPE(dat_ep_post_rdma_write(ep, 1, &iov, c, &remote,
                                               DAT_COMPLETION_DEFAULT_FLAG),
                        DAT_INVALID_PARAMETER);
        DTO_ASSERT_TYPE(dat_ep_post_rdma_read(ep, 1, &iov, c, &remote,
                                              DAT_COMPLETION_DEFAULT_FLAG),
                        DAT_INVALID_PARAMETER);
}

static void outside_lmr_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET past = dto_iov(&s->mem, s->mem.len - MSG_LEN, MSG_LEN);
        DAT_LMR_TRIPLET before = dto_iov(&s->mem, 0, MSG_LEN);
        struct dto_mem rx = rx_mem(s);

        (void)arg;
        dto_fill(s->mem.buf, s->mem.len, SEED_MEM);
        dto_fill(rx.buf, rx.len, SEED_FOREIGN);
        past.segment_length += 1;       /* ends one byte after the LMR */
        before.virtual_address -= 1;    /* starts one byte before it */
        dto_barrier(s);
        expect_refused_everywhere(s, past);
        expect_refused_everywhere(s, before);
        dto_expect_empty(s->request_evd);
        dto_expect_empty(s->recv_evd);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_CONNECTED);
        dto_verify(s->mem.buf, s->mem.len, SEED_MEM);
        /* The EP still works, and its first completions are these. */
        dto_post_recv(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&rx, 4096, MSG_LEN) }, 1, 11);
        dto_fill(s->mem.buf, MSG_LEN, SEED_MSG);
        dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, MSG_LEN) }, 1, 10);
        dto_expect_recv(s, s->ep[0], 11, MSG_LEN);
        dto_verify(rx.buf + 4096, MSG_LEN, SEED_FOREIGN);
        dto_barrier(s);
}

/* dat_ep_post_send(3DAT), dat_ep_post_recv(3DAT),
 * dat_ep_post_rdma_write(3DAT), dat_ep_post_rdma_read(3DAT): "one of the
 * IOV segments pointed to a memory outside its LMR" -> DAT_INVALID_PARAMETER
 * (dto.h: synchronous, ARG3): nothing is posted, nothing moves, the
 * connection stays up. */
Test(DTO_SUITE(errors), local_segment_outside_its_lmr_is_refused_with_invalid_parameter)
{
        dto_run(NULL, outside_lmr_server, outside_lmr_client, NULL);
}

/* ---- beyond the transport's / EP's size limits ------------------------------ */

static void too_long_send_server(struct dto_side *s, void *arg)
{
        DAT_VLEN big = (DAT_VLEN)s->ep_attr.max_message_size + 4096;
        struct dto_mem huge = dto_mem_new(s, DAT_HANDLE_NULL, big, DAT_MEM_PRIV_ALL_FLAG);
        DAT_LMR_TRIPLET long_enough = dto_iov(&huge, 0, big);
        struct dto_posted_list recvs = { 0 };
        struct dto_mem rx = rx_mem(s);

        (void)arg;
        dto_fill(s->mem.buf, s->mem.len, SEED_MEM);
        /* Long enough for the message: the fault is the sender's alone. */
        dto_post_recv_one(s->ep[0], long_enough, 100, &recvs);
        post_receives(s, &rx, 2, 101, &recvs);
        dto_barrier(s);
        target_sees_the_break(s, &recvs);
        dto_barrier(s);
}

static void too_long_send_client(struct dto_side *s, void *arg)
{
        DAT_SEG_LENGTH max = (DAT_SEG_LENGTH)s->ep_attr.max_message_size;
        struct dto_mem big = dto_mem_new(s, DAT_HANDLE_NULL, (DAT_VLEN)max + 4096,
                                         DAT_MEM_PRIV_ALL_FLAG);
        struct dto_posted_list reqs = { 0 }, recvs = { 0 };
        struct dto_mem rx = rx_mem(s);

        (void)arg;
        dto_fill(s->mem.buf + FOREIGN_OFF, 32 * 1024, SEED_FOREIGN);
        post_receives(s, &rx, 2, 200, &recvs);
        dto_barrier(s);
        dto_post_send_one(s->ep[0], dto_iov(&big, 0, (DAT_VLEN)max + 1), 10, &reqs);
        post_behind(s, 11, &reqs);
        initiator_sees_the_break(s, &reqs, DAT_DTO_ERR_LOCAL_LENGTH, &recvs, false);
        dto_barrier(s);
}

/* dto.h: a Send longer than the transport's max_message_size (16 MiB; the
 * EP's attribute is the same here) completes DAT_DTO_ERR_LOCAL_LENGTH; the
 * connection breaks. */
Test(DTO_SUITE(errors), send_beyond_max_message_size_is_local_length)
{
        struct dto_config cfg = { .timeout_ms = 40000 };

        dto_run(&cfg, too_long_send_server, too_long_send_client, NULL);
}

#define SMALL_RDMA_SIZE (64u * 1024)

static void small_rdma_size(const struct dto_side *s, DAT_EP_ATTR *attr)
{
        (void)s;
        attr->max_rdma_size = SMALL_RDMA_SIZE;
}

static void beyond_rdma_size_server(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_fill(s->mem.buf, SMALL_RDMA_SIZE + 1, SEED_MEM);
        dto_barrier(s);
        dto_barrier(s);
        if (*(const DAT_DTOS *)arg == DAT_DTO_RDMA_WRITE)
                dto_verify(s->mem.buf, SMALL_RDMA_SIZE + 1, SEED_FOREIGN);
}

static void beyond_rdma_size_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET local = dto_iov(&s->mem, 0, SMALL_RDMA_SIZE + 1);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, SMALL_RDMA_SIZE + 1);

        dto_fill(s->mem.buf, SMALL_RDMA_SIZE + 1, SEED_FOREIGN);
        dto_barrier(s);
        if (*(const DAT_DTOS *)arg == DAT_DTO_RDMA_WRITE) {
                dto_rdma_write_wait(s, s->ep[0], &local, 1, 10, &remote);
        } else {
                dto_rdma_read_wait(s, s->ep[0], &local, 1, 10, &remote);
                dto_verify(s->mem.buf, SMALL_RDMA_SIZE + 1, SEED_MEM);
        }
        dto_barrier(s);
}

/* dto.h: the EP's max_rdma_size is what the consumer asked for, and, as
 * with DAPL's providers (whose programs set 64 KiB and move more), no
 * limit on the posts: only the transport's (1 GiB) is.  An RDMA Write
 * beyond the EP's 64 KiB completes and lands. */
Test(DTO_SUITE(errors), rdma_write_beyond_the_eps_max_rdma_size_still_lands)
{
        static const DAT_DTOS op = DAT_DTO_RDMA_WRITE;
        struct dto_config cfg = { .ep_attr = small_rdma_size };

        dto_run(&cfg, beyond_rdma_size_server, beyond_rdma_size_client, (void *)&op);
}

/* The same for an RDMA Read. */
Test(DTO_SUITE(errors), rdma_read_beyond_the_eps_max_rdma_size_still_fetches)
{
        static const DAT_DTOS op = DAT_DTO_RDMA_READ;
        struct dto_config cfg = { .ep_attr = small_rdma_size };

        dto_run(&cfg, beyond_rdma_size_server, beyond_rdma_size_client, (void *)&op);
}
