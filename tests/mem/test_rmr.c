/* Remote Memory Regions against a real datd: dat_rmr_create(3DAT),
 * dat_rmr_query(3DAT), dat_rmr_free(3DAT), the max_rmrs quota, every local
 * check of dat_rmr_bind(3DAT), and the bind's effect as the data path will
 * apply it (rmr_bind_prepare/complete, rmr_context_find). */
#include "config.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "libdat/ep.h"
#include "libdat/ia.h"
#include "libdat/lmr.h"
#include "libdat/mem_ctx.h"
#include "libdat/pz.h"
#include "libdat/rmr.h"
#include "tests/mem/mem_test.h"

static void start(void)
{
        mem_datd_start(NULL);
}

static void start_two_rmrs(void)
{
        mem_datd_start(mem_config_with_limits("\"max_rmrs\": 2"));
}

TestSuite(rmr, .init = start, .fini = mem_datd_stop, .timeout = 30);
TestSuite(rmr_bind, .init = start, .fini = mem_datd_stop, .timeout = 30);
TestSuite(rmr_quota, .init = start_two_rmrs, .fini = mem_datd_stop, .timeout = 30);

#define RW (DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
#define REMOTE_RW (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
#define BAD_RMR ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR)
#define COOKIE ((DAT_RMR_COOKIE){ .as_64 = 0x5eed })

static uintptr_t up(const void *p)
{
        return (uintptr_t)p;
}

static DAT_RMR_HANDLE new_rmr(DAT_PZ_HANDLE pz)
{
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_rmr_create(pz, &rmr);

        cr_assert_eq(r, DAT_SUCCESS, "dat_rmr_create: 0x%08x", r);
        return rmr;
}

static DAT_EP_HANDLE new_ep(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, const DAT_EP_ATTR *attr)
{
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_ep_create(ia, pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, attr, &ep);

        cr_assert_eq(r, DAT_SUCCESS, "dat_ep_create: 0x%08x", r);
        return ep;
}

/* Everything a valid bind names: an RMR, an LMR with local read and write
 * over two pages, an EP, all on one PZ of one IA. */
struct bind {
        DAT_IA_HANDLE ia;
        DAT_PZ_HANDLE pz;
        char *buf;
        struct mem_lmr lmr;
        DAT_RMR_HANDLE rmr;
        DAT_EP_HANDLE ep;
        DAT_LMR_TRIPLET triplet;        /* the LMR's second page */
        DAT_RMR_CONTEXT ctx;
};

static struct bind setup(void)
{
        struct bind b;

        b.ia = mem_open_ia();
        b.pz = mem_pz(b.ia);
        b.buf = mem_pages(2, PROT_READ | PROT_WRITE);
        b.lmr = mem_lmr_ok(b.ia, b.pz, b.buf, 2 * mem_page(), RW);
        b.rmr = new_rmr(b.pz);
        b.ep = new_ep(b.ia, b.pz, NULL);
        b.triplet = (DAT_LMR_TRIPLET){ up(b.buf) + mem_page(), (DAT_SEG_LENGTH)mem_page(),
                                       b.lmr.lmr_context };
        b.ctx = 0;
        return b;
}

static void teardown(struct bind *b)
{
        cr_expect_eq(dat_ia_close(b->ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

/* dat_rmr_bind with b's values, changed by the caller where a test says. */
static DAT_RETURN try_bind(struct bind *b, DAT_LMR_HANDLE lmr, DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va,
                           DAT_EP_HANDLE ep, DAT_COMPLETION_FLAGS flags)
{
        return dat_rmr_bind(b->rmr, lmr, &b->triplet, priv, va, ep, COOKIE, flags, &b->ctx);
}

static DAT_RETURN bind_default(struct bind *b)
{
        return try_bind(b, b->lmr.handle, REMOTE_RW, DAT_VA_TYPE_VA, b->ep, DAT_COMPLETION_DEFAULT_FLAG);
}

#define UNCONNECTED ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED)

/* ---- create, query, free ------------------------------------------------ */

/* dat_rmr_create(3DAT), dat_rmr_query(3DAT): an unbound RMR on its PZ */
Test(rmr, create_gives_an_unbound_rmr_on_its_pz)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);
        DAT_RMR_HANDLE rmr = new_rmr(pz);
        DAT_RMR_PARAM p;
        DAT_HANDLE_TYPE t;

        cr_expect_eq(dat_get_handle_type(rmr, &t), DAT_SUCCESS);
        cr_expect_eq(t, DAT_HANDLE_TYPE_RMR);
        memset(&p, 0xa5, sizeof(p));
        cr_assert_eq(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p), DAT_SUCCESS);
        cr_expect_eq(p.ia_handle, ia);
        cr_expect_eq(p.pz_handle, pz);
        cr_expect_eq(p.rmr_scope, DAT_RMR_SCOPE_PZ);
        cr_expect_eq(p.rmr_context, 0u);
        cr_expect_eq(p.lmr_triplet.segment_length, 0u);
        cr_expect_eq(dat_rmr_free(rmr), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

Test(rmr, create_without_an_output_is_invalid_arg2)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);

        cr_expect_eq(dat_rmr_create(pz, NULL), ERR_ARG(2));
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS, "nothing holds the PZ");
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* dat_rmr_query(3DAT): an invalid mask -> DAT_INVALID_PARAMETER */
Test(rmr, query_with_a_bad_mask_or_no_output_is_invalid_parameter)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_RMR_HANDLE rmr = new_rmr(mem_pz(ia));
        DAT_RMR_PARAM p;

        cr_expect_eq(dat_rmr_query(rmr, (DAT_RMR_PARAM_MASK)0x80, &p), ERR_ARG(2));
        cr_expect_eq(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, NULL), ERR_ARG(3));
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(rmr, bad_handles_are_invalid_handle_on_every_entry_point)
{
        struct bind b = setup();
        DAT_RMR_HANDLE freed = new_rmr(b.pz);
        DAT_PZ_HANDLE freed_pz = mem_stale_handle(b.ia);
        int x;
        DAT_RMR_PARAM p;
        DAT_RMR_HANDLE out;

        cr_assert_eq(dat_rmr_free(freed), DAT_SUCCESS);
        const DAT_HANDLE bad[] = { DAT_HANDLE_NULL, freed, GARBAGE_HANDLE, (DAT_HANDLE)&x, b.lmr.handle };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_expect_eq(dat_rmr_query(bad[i], DAT_RMR_FIELD_ALL, &p), BAD_RMR, "%zu", i);
                cr_expect_eq(dat_rmr_free(bad[i]), BAD_RMR, "%zu", i);
                cr_expect_eq(dat_rmr_bind(bad[i], b.lmr.handle, &b.triplet, REMOTE_RW, DAT_VA_TYPE_VA,
                                          b.ep, COOKIE, 0, &b.ctx),
                             BAD_RMR, "%zu", i);
        }
        const DAT_HANDLE bad_pz[] = { DAT_HANDLE_NULL, freed_pz, GARBAGE_HANDLE, (DAT_HANDLE)&x, b.ia };
        for (size_t i = 0; i < sizeof(bad_pz) / sizeof(bad_pz[0]); i++)
                cr_expect_eq(dat_rmr_create(bad_pz[i], &out), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ),
                             "%zu", i);
        teardown(&b);
}

/* dat_rmr_create(3DAT): resource limitations (max_rmrs) -> DAT_INSUFFICIENT_RESOURCES */
Test(rmr_quota, the_rmr_over_max_rmrs_is_refused_and_leaves_nothing)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);
        DAT_RMR_HANDLE a = new_rmr(pz), b = new_rmr(pz), c = GARBAGE_HANDLE;

        cr_expect_eq(DAT_GET_TYPE(dat_rmr_create(pz, &c)), DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(c, GARBAGE_HANDLE);
        cr_expect_eq(dat_rmr_free(a), DAT_SUCCESS);
        c = new_rmr(pz);
        cr_expect_eq(dat_rmr_free(b), DAT_SUCCESS);
        cr_expect_eq(dat_rmr_free(c), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS, "no refused RMR holds the PZ");
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

/* ---- dat_rmr_bind: the local checks ------------------------------------ */

/* dat_rmr_bind(3DAT): valid on CONNECTED or DISCONNECTED EPs only: every
 * other check passes, then the unconnected EP -> DAT_INVALID_STATE. */
Test(rmr_bind, a_valid_bind_on_an_unconnected_ep_is_invalid_state)
{
        struct bind b = setup();
        DAT_RMR_PARAM p;

        cr_expect_eq(bind_default(&b), UNCONNECTED);
        /* Nothing changed: still unbound, and the LMR is free to go. */
        cr_assert_eq(dat_rmr_query(b.rmr, DAT_RMR_FIELD_ALL, &p), DAT_SUCCESS);
        cr_expect_eq(p.rmr_context, 0u);
        cr_expect_eq(dat_lmr_free(b.lmr.handle), DAT_SUCCESS);
        teardown(&b);
}

Test(rmr_bind, every_state_but_connected_and_disconnected_is_invalid_state)
{
        struct bind b = setup();
        const DAT_EP_STATE refused[] = {
                DAT_EP_STATE_RESERVED, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING,
                DAT_EP_STATE_ACTIVE_CONNECTION_PENDING, DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING,
                DAT_EP_STATE_DISCONNECT_PENDING, DAT_EP_STATE_COMPLETION_PENDING,
        };

        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                cr_assert_eq(ep_test_force_state(b.ep, refused[i]), DAT_SUCCESS);
                cr_expect_eq(DAT_GET_TYPE(bind_default(&b)), DAT_INVALID_STATE, "state %d", refused[i]);
        }
        /* Past every check the bind is posted (tests/dto checks what it
         * does on a real connection; on a Disconnected EP it completes
         * flushed). */
        cr_assert_eq(ep_test_force_state(b.ep, DAT_EP_STATE_DISCONNECTED), DAT_SUCCESS);
        cr_expect_eq(bind_default(&b), DAT_SUCCESS);
        teardown(&b);
}

Test(rmr_bind, a_null_triplet_is_invalid_arg3)
{
        struct bind b = setup();

        cr_expect_eq(dat_rmr_bind(b.rmr, b.lmr.handle, NULL, REMOTE_RW, DAT_VA_TYPE_VA, b.ep, COOKIE, 0, &b.ctx),
                     ERR_ARG(3));
        teardown(&b);
}

Test(rmr_bind, an_lmr_that_is_not_a_live_lmr_of_the_ia_is_invalid_handle_lmr)
{
        struct bind b = setup();
        DAT_IA_HANDLE ia2 = mem_open_ia();
        struct mem_lmr other = mem_lmr_ok(ia2, mem_pz(ia2), b.buf, 64, RW);
        int x;
        const DAT_HANDLE bad[] = { other.handle, DAT_HANDLE_NULL, GARBAGE_HANDLE, (DAT_HANDLE)&x, b.rmr };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_expect_eq(try_bind(&b, bad[i], REMOTE_RW, DAT_VA_TYPE_VA, b.ep, 0),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR), "%zu", i);
        dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG);
        teardown(&b);
}

/* dat_rmr_bind(3DAT): target_address or segment_length exceeding the
 * limits of the existing LMR -> DAT_INVALID_PARAMETER */
Test(rmr_bind, a_window_outside_the_lmr_is_invalid_arg3)
{
        struct bind b = setup();

        b.triplet.virtual_address += 1;
        cr_expect_eq(bind_default(&b), ERR_ARG(3));
        b.triplet.virtual_address = up(b.buf) - 8;
        b.triplet.segment_length = 16;
        cr_expect_eq(bind_default(&b), ERR_ARG(3));
        b.triplet.virtual_address = up(b.buf);
        b.triplet.segment_length = (DAT_SEG_LENGTH)(2 * mem_page());
        cr_expect_eq(bind_default(&b), UNCONNECTED);
        teardown(&b);
}

/* The triplet names the LMR by its context: another LMR's is invalid. */
Test(rmr_bind, a_triplet_with_another_lmrs_context_is_invalid_arg3)
{
        struct bind b = setup();
        struct mem_lmr other = mem_lmr_ok(b.ia, b.pz, b.buf, 2 * mem_page(), RW);

        b.triplet.lmr_context = other.lmr_context;
        cr_expect_eq(bind_default(&b), ERR_ARG(3));
        teardown(&b);
}

/* dat_rmr_bind(3DAT): remote read needs the LMR's local read, remote
 * write its local write -> DAT_PRIVILEGES_VIOLATION */
Test(rmr_bind, remote_privileges_the_lmr_cannot_back_are_privileges_violation)
{
        struct bind b = setup();
        struct mem_lmr ro = mem_lmr_ok(b.ia, b.pz, b.buf, mem_page(), DAT_MEM_PRIV_LOCAL_READ_FLAG);
        struct mem_lmr wo = mem_lmr_ok(b.ia, b.pz, b.buf, mem_page(), DAT_MEM_PRIV_LOCAL_WRITE_FLAG);

        b.triplet = (DAT_LMR_TRIPLET){ up(b.buf), 64, ro.lmr_context };
        cr_expect_eq(try_bind(&b, ro.handle, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, b.ep, 0),
                     ERR(DAT_PRIVILEGES_VIOLATION, DAT_PRIVILEGES_RDMA_WRITE));
        cr_expect_eq(try_bind(&b, ro.handle, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, b.ep, 0), UNCONNECTED);
        b.triplet.lmr_context = wo.lmr_context;
        cr_expect_eq(try_bind(&b, wo.handle, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, b.ep, 0),
                     ERR(DAT_PRIVILEGES_VIOLATION, DAT_PRIVILEGES_RDMA_READ));
        cr_expect_eq(try_bind(&b, wo.handle, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_VA_TYPE_VA, b.ep, 0),
                     ERR(DAT_PRIVILEGES_VIOLATION, DAT_PRIVILEGES_READ));
        cr_expect_eq(try_bind(&b, wo.handle, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, b.ep, 0), UNCONNECTED);
        teardown(&b);
}

Test(rmr_bind, privilege_bits_outside_all_flag_are_invalid_arg4)
{
        struct bind b = setup();

        cr_expect_eq(try_bind(&b, b.lmr.handle, (DAT_MEM_PRIV_FLAGS)0x80, DAT_VA_TYPE_VA, b.ep, 0), ERR_ARG(4));
        teardown(&b);
}

/* Protection: the RMR, its LMR and the EP must share the PZ. */
Test(rmr_bind, an_lmr_on_another_pz_is_protection_violation)
{
        struct bind b = setup();
        struct mem_lmr other = mem_lmr_ok(b.ia, mem_pz(b.ia), b.buf, 2 * mem_page(), RW);

        b.triplet.lmr_context = other.lmr_context;
        cr_expect_eq(try_bind(&b, other.handle, REMOTE_RW, DAT_VA_TYPE_VA, b.ep, 0),
                     ERR(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE));
        teardown(&b);
}

Test(rmr_bind, an_ep_on_another_pz_is_protection_violation)
{
        struct bind b = setup();
        DAT_EP_HANDLE other = new_ep(b.ia, mem_pz(b.ia), NULL);

        cr_expect_eq(try_bind(&b, b.lmr.handle, REMOTE_RW, DAT_VA_TYPE_VA, other, 0),
                     ERR(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE));
        teardown(&b);
}

Test(rmr_bind, an_ep_that_is_not_a_live_ep_of_the_ia_is_invalid_handle_ep)
{
        struct bind b = setup();
        DAT_IA_HANDLE ia2 = mem_open_ia();
        DAT_EP_HANDLE foreign = new_ep(ia2, mem_pz(ia2), NULL);
        DAT_EP_HANDLE freed = new_ep(b.ia, b.pz, NULL);
        int x;

        cr_assert_eq(dat_ep_free(freed), DAT_SUCCESS);
        const DAT_HANDLE bad[] = { foreign, freed, DAT_HANDLE_NULL, GARBAGE_HANDLE, (DAT_HANDLE)&x, b.pz };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_expect_eq(try_bind(&b, b.lmr.handle, REMOTE_RW, DAT_VA_TYPE_VA, bad[i], 0),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP), "%zu", i);
        dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG);
        teardown(&b);
}

/* dat_ia_query: zb_supported false */
Test(rmr_bind, zero_based_va_is_model_not_supported_and_others_invalid_arg5)
{
        struct bind b = setup();

        cr_expect_eq(try_bind(&b, b.lmr.handle, REMOTE_RW, DAT_VA_TYPE_ZB, b.ep, 0),
                     ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE));
        cr_expect_eq(try_bind(&b, b.lmr.handle, REMOTE_RW, (DAT_VA_TYPE)5, b.ep, 0), ERR_ARG(5));
        teardown(&b);
}

/* dat_rmr_bind(3DAT): completion flags are SUPPRESS, UNSIGNALLED, BARRIER_FENCE */
Test(rmr_bind, other_completion_flags_are_invalid_arg8)
{
        struct bind b = setup();

        cr_expect_eq(try_bind(&b, b.lmr.handle, REMOTE_RW, DAT_VA_TYPE_VA, b.ep, DAT_COMPLETION_SOLICITED_WAIT_FLAG),
                     ERR_ARG(8));
        cr_expect_eq(try_bind(&b, b.lmr.handle, REMOTE_RW, DAT_VA_TYPE_VA, b.ep, (DAT_COMPLETION_FLAGS)0x100),
                     ERR_ARG(8));
        cr_expect_eq(try_bind(&b, b.lmr.handle, REMOTE_RW, DAT_VA_TYPE_VA, b.ep,
                          DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG),
                     UNCONNECTED);
        teardown(&b);
}

/* dat_rmr_bind(3DAT): UNSIGNALLED is valid only if the EP's request
 * completion flags have it; otherwise DAT_INVALID_PARAMETER. */
Test(rmr_bind, unsignalled_needs_an_ep_configured_for_it)
{
        struct bind b = setup();
        DAT_EP_PARAM param;
        DAT_EP_HANDLE quiet;

        cr_assert_eq(dat_ep_query(b.ep, DAT_EP_FIELD_ALL, &param), DAT_SUCCESS);
        cr_expect_eq(try_bind(&b, b.lmr.handle, REMOTE_RW, DAT_VA_TYPE_VA, b.ep, DAT_COMPLETION_UNSIGNALLED_FLAG),
                     ERR_ARG(8));
        param.ep_attr.request_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
        quiet = new_ep(b.ia, b.pz, &param.ep_attr);
        cr_expect_eq(try_bind(&b, b.lmr.handle, REMOTE_RW, DAT_VA_TYPE_VA, quiet, DAT_COMPLETION_UNSIGNALLED_FLAG),
                     UNCONNECTED);
        teardown(&b);
}

Test(rmr_bind, a_bind_without_an_rmr_context_output_is_invalid_arg9)
{
        struct bind b = setup();

        cr_expect_eq(dat_rmr_bind(b.rmr, b.lmr.handle, &b.triplet, REMOTE_RW, DAT_VA_TYPE_VA, b.ep, COOKIE, 0, NULL),
                     ERR_ARG(9));
        teardown(&b);
}

/* dat_rmr_bind(3DAT): a zero length binds to no memory: the LMR is not looked at. */
Test(rmr_bind, an_unbind_ignores_the_lmr)
{
        struct bind b = setup();

        b.triplet = (DAT_LMR_TRIPLET){ 0, 0, 0 };
        cr_expect_eq(dat_rmr_bind(b.rmr, GARBAGE_HANDLE, &b.triplet, 0, DAT_VA_TYPE_VA, b.ep, COOKIE, 0, NULL),
                     UNCONNECTED);
        teardown(&b);
}

/* ---- the bind as the data path completes it ---------------------------- */

static DAT_RMR_CONTEXT bind_now(struct bind *b, DAT_LMR_HANDLE lmr, const DAT_LMR_TRIPLET *t,
                                DAT_MEM_PRIV_FLAGS priv)
{
        struct rmr *rmr = rmr_lookup(b->rmr);
        DAT_RMR_CONTEXT ctx = 0;

        cr_assert_not_null(rmr);
        cr_assert_eq(rmr_bind_prepare(rmr, lmr, t, priv, DAT_VA_TYPE_VA, &ctx), DAT_SUCCESS);
        rmr_bind_complete(rmr, true);
        return ctx;
}

static DAT_RETURN remote(struct bind *b, DAT_RMR_CONTEXT ctx, uintptr_t addr, DAT_VLEN len,
                         DAT_MEM_PRIV_FLAGS priv)
{
        struct lmr *lmr;
        struct pz *pz;

        return rmr_context_find(ia_lookup(b->ia), ctx, addr, len, priv, &lmr, &pz);
}

/* dat_rmr_bind(3DAT), dat_rmr_query(3DAT): a completed bind gives the RMR
 * its window and a context remote peers can use, within the window and
 * the privileges only. */
Test(rmr_bind, a_completed_bind_opens_exactly_its_window)
{
        struct bind b = setup();
        DAT_RMR_CONTEXT ctx = bind_now(&b, b.lmr.handle, &b.triplet, DAT_MEM_PRIV_REMOTE_READ_FLAG);
        uintptr_t w = up(b.buf) + mem_page();
        struct lmr *lmr;
        struct pz *pz;
        DAT_RMR_PARAM p;

        cr_assert_eq(dat_rmr_query(b.rmr, DAT_RMR_FIELD_ALL, &p), DAT_SUCCESS);
        cr_expect_eq(p.rmr_context, ctx);
        cr_expect_eq(p.lmr_triplet.virtual_address, w);
        cr_expect_eq(p.mem_priv, DAT_MEM_PRIV_REMOTE_READ_FLAG);
        cr_expect_eq(rmr_context_find(ia_lookup(b.ia), ctx, w + 8, 8, DAT_MEM_PRIV_REMOTE_READ_FLAG, &lmr, &pz),
                     DAT_SUCCESS);
        cr_expect_eq(lmr->obj.handle, b.lmr.handle);
        cr_expect_eq(pz->obj.handle, b.pz);
        cr_expect_eq(remote(&b, ctx, w - 1, 8, DAT_MEM_PRIV_REMOTE_READ_FLAG), ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE));
        cr_expect_eq(remote(&b, ctx, w + mem_page() - 4, 8, DAT_MEM_PRIV_REMOTE_READ_FLAG),
                     ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE));
        cr_expect_eq(remote(&b, ctx, w + mem_page() - 8, 8, DAT_MEM_PRIV_REMOTE_READ_FLAG), DAT_SUCCESS);
        cr_expect_eq(remote(&b, ctx, w, 8, DAT_MEM_PRIV_REMOTE_WRITE_FLAG),
                     ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE));
        cr_expect_eq(remote(&b, ctx, w, 8, 0), DAT_SUCCESS);
        teardown(&b);
}

/* dat_lmr_free(3DAT): the LMR cannot be destroyed while an RMR uses it;
 * dat_rmr_free(3DAT): a bound RMR may be freed, which lets the LMR go. */
Test(rmr_bind, a_bound_lmr_cannot_be_freed_until_its_rmr_is)
{
        struct bind b = setup();
        DAT_RMR_CONTEXT ctx = bind_now(&b, b.lmr.handle, &b.triplet, REMOTE_RW);

        cr_expect_eq(dat_lmr_free(b.lmr.handle), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE));
        cr_expect_eq(dat_rmr_free(b.rmr), DAT_SUCCESS);
        cr_expect_eq(remote(&b, ctx, b.triplet.virtual_address, 8, 0), ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        cr_expect_eq(dat_lmr_free(b.lmr.handle), DAT_SUCCESS);
        teardown(&b);
}

/* dat_rmr_bind(3DAT): RDMAs with the previous rmr_context fail once a new
 * bind completes; a zero length unbinds. */
Test(rmr_bind, rebinding_retires_the_old_context_and_unbinding_frees_the_lmr)
{
        struct bind b = setup();
        struct mem_lmr second = mem_lmr_ok(b.ia, b.pz, b.buf, mem_page(), RW);
        DAT_LMR_TRIPLET t2 = { up(b.buf), 64, second.lmr_context }, none = { 0, 0, 0 };
        DAT_RMR_CONTEXT first = bind_now(&b, b.lmr.handle, &b.triplet, REMOTE_RW);
        DAT_RMR_CONTEXT again = bind_now(&b, second.handle, &t2, REMOTE_RW);

        cr_expect_neq(first, again);
        cr_expect_eq(remote(&b, first, b.triplet.virtual_address, 8, 0), ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        cr_expect_eq(remote(&b, again, up(b.buf), 8, 0), DAT_SUCCESS);
        /* The first LMR is no longer in use, the second is. */
        cr_expect_eq(dat_lmr_free(b.lmr.handle), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_free(second.handle), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE));
        cr_expect_eq(bind_now(&b, DAT_HANDLE_NULL, &none, 0), 0u);
        cr_expect_eq(remote(&b, again, up(b.buf), 8, 0), ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        cr_expect_null(mem_ctx_find(again, MEM_CTX_REMOTE), "an unbound RMR has no context");
        cr_expect_eq(dat_lmr_free(second.handle), DAT_SUCCESS);
        teardown(&b);
}

/* dat_rmr_bind(3DAT): a bind that fails (is flushed) changes nothing, and
 * the new context never resolves. */
Test(rmr_bind, a_failed_bind_keeps_the_previous_binding)
{
        struct bind b = setup();
        DAT_RMR_CONTEXT first = bind_now(&b, b.lmr.handle, &b.triplet, REMOTE_RW);
        struct mem_lmr second = mem_lmr_ok(b.ia, b.pz, b.buf, mem_page(), RW);
        DAT_LMR_TRIPLET t2 = { up(b.buf), 64, second.lmr_context };
        struct rmr *rmr = rmr_lookup(b.rmr);
        DAT_RMR_CONTEXT drawn;

        cr_assert_eq(rmr_bind_prepare(rmr, second.handle, &t2, REMOTE_RW, DAT_VA_TYPE_VA, &drawn), DAT_SUCCESS);
        cr_expect_eq(remote(&b, drawn, up(b.buf), 8, 0), ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE),
                     "not before the bind completes");
        cr_expect_eq(dat_lmr_free(second.handle), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE),
                     "a posted bind uses its LMR");
        rmr_bind_complete(rmr, false);
        cr_expect_eq(remote(&b, first, b.triplet.virtual_address, 8, 0), DAT_SUCCESS);
        cr_expect_eq(remote(&b, drawn, up(b.buf), 8, 0), ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        cr_expect_eq(dat_lmr_free(second.handle), DAT_SUCCESS);
        teardown(&b);
}

/* An LMR's own rmr_context reaches the LMR, like a bound RMR's. */
Test(rmr_bind, an_lmrs_own_rmr_context_reaches_what_it_registered)
{
        struct bind b = setup();
        struct mem_lmr l = mem_lmr_ok(b.ia, b.pz, b.buf, mem_page(), DAT_MEM_PRIV_REMOTE_WRITE_FLAG);

        cr_expect_eq(remote(&b, l.rmr_context, up(b.buf), mem_page(), DAT_MEM_PRIV_REMOTE_WRITE_FLAG), DAT_SUCCESS);
        cr_expect_eq(remote(&b, l.rmr_context, up(b.buf), mem_page() + 1, 0), ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE));
        cr_expect_eq(remote(&b, l.rmr_context, up(b.buf), 8, DAT_MEM_PRIV_REMOTE_READ_FLAG),
                     ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE));
        cr_expect_eq(remote(&b, l.lmr_context, up(b.buf), 8, 0), ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE),
                     "a local context is no remote key");
        teardown(&b);
}

/* dat_ia_close(3DAT) abrupt: everything goes, whatever the order of
 * creation of bound RMRs and their LMRs (ASan watches the teardown). */
Test(rmr_bind, an_abrupt_close_frees_bound_rmrs_older_and_newer_than_their_lmr)
{
        struct bind b = setup();                /* the RMR is older than a new LMR... */
        struct mem_lmr newer = mem_lmr_ok(b.ia, b.pz, b.buf, mem_page(), RW);
        DAT_LMR_TRIPLET t = { up(b.buf), 64, newer.lmr_context };
        DAT_RMR_HANDLE younger = new_rmr(b.pz); /* ...and younger than b.lmr */
        DAT_RMR_HANDLE older = b.rmr;
        DAT_HANDLE_TYPE ty;

        bind_now(&b, newer.handle, &t, REMOTE_RW);
        b.rmr = younger;
        bind_now(&b, b.lmr.handle, &b.triplet, REMOTE_RW);
        teardown(&b);
        cr_expect_neq(dat_get_handle_type(older, &ty), DAT_SUCCESS);
        cr_expect_neq(dat_get_handle_type(younger, &ty), DAT_SUCCESS);
        cr_expect_neq(dat_get_handle_type(newer.handle, &ty), DAT_SUCCESS);
}
