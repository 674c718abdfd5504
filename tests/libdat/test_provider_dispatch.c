/* Every entry point of libdat that takes a handle, on another provider's
 * objects (libdat/foreign.h): the call reaches that provider's function
 * for it in its DAT_PROVIDER (struct dat_provider), with the provider's
 * own handle (for an IA, the provider's IA handle, dats_get_ia_handle's
 * answer, not libdat's) and every other argument as the consumer gave
 * it, in its place.  The provider is the suite's fake_provider.so with
 * its table of every slot (instance data "all-slots"), which writes the
 * slot, the handle and the arguments of each call into its log; each
 * argument has a value of its own, so a call to the wrong slot or two
 * arguments swapped shows. */
#include "config.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/dat_registry.h>
#include <dat2/udat.h>

#include "tests/libdat/fake_provider.h"
#include "tests/libdat/libdat_test.h"

/* Exported by libdat2.so.2 (for providers), declared by no header. */
DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *ia_handle_p);

static const char *const conf =
        "fake-all u2.0 threadsafe default " FAKE_PROVIDER_PATH " fake.2.0 \"" FAKE_PROVIDER_ALL_SLOTS
        "\" \"\"\n";

/* The provider's log and its exports (dlsym), the IA the test opened, the
 * provider's own handle of it and its async EVD. */
static struct fake_provider_log *plog;
static const DAT_PROVIDER *table;
static DAT_CR_HANDLE (*new_cr)(DAT_HANDLE);
static int (*object_type)(DAT_HANDLE);
static DAT_IA_HANDLE ia, pia;
static DAT_EVD_HANDLE async_evd;

#define P(x) ((uint64_t)(uintptr_t)(x))   /* a pointer argument, as the log has it */
#define V(x) ((uint64_t)(x))              /* an integer argument */

static void setup(void)
{
        void *lib;

        use_dat_conf(conf);
        /* No datd listens here: only the provider's IA opens. */
        setenv("DATD_SOCKET", "/nonexistent/datd.sock", 1);
        async_evd = DAT_HANDLE_NULL;
        ia = pia = DAT_HANDLE_NULL;
        cr_assert_eq(dat_ia_open("fake-all", 0x21, &async_evd, &ia), DAT_SUCCESS);
        lib = dlopen(FAKE_PROVIDER_PATH, RTLD_NOW | RTLD_NOLOAD);
        cr_assert_not_null(lib, "%s is not loaded: %s", FAKE_PROVIDER_PATH, dlerror());
        plog = dlsym(lib, "fake_provider_log");
        cr_assert_not_null(plog);
        {
                const DAT_PROVIDER *(*t)(void);

                *(void **)&t = dlsym(lib, "fake_provider_table_all");
                cr_assert_not_null(t);
                table = t();
        }
        *(void **)&new_cr = dlsym(lib, "fake_provider_new_cr");
        *(void **)&object_type = dlsym(lib, "fake_provider_object_type");
        cr_assert_not_null(new_cr);
        cr_assert_not_null(object_type);
        cr_assert_str_eq(plog->instance_data, FAKE_PROVIDER_ALL_SLOTS);
        cr_assert_eq(plog->register_result, DAT_SUCCESS);
        /* The open itself: the consumer's queue length in its place. */
        cr_expect_str_eq(plog->last_call, "ia_open");
        cr_expect_eq(plog->nargs, 4);
        cr_expect_eq(plog->args[1], V(0x21));
        cr_expect_str_eq(plog->opened_name, "fake-all");
        cr_assert_eq(dats_get_ia_handle(ia, &pia), DAT_SUCCESS);
        cr_assert_neq(pia, ia);
        cr_assert_not_null(async_evd);
}

static void teardown(void)
{
        if (ia)
                (void)dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

TestSuite(dispatch, .init = setup, .fini = teardown, .timeout = 60);

/* The provider's object of that type, the one it handed out. */
static void expect_object(DAT_HANDLE h, DAT_HANDLE_TYPE type, const char *what)
{
        cr_expect_not_null(h, "%s: no handle", what);
        if (!h)
                return;
        cr_expect_eq(*(const DAT_PROVIDER *const *)h, table, "%s: not the provider's object", what);
        cr_expect_eq(object_type(h), (int)type, "%s: an object of type %d, not %d", what,
                     object_type(h), (int)type);
}

/* The last call the provider saw is slot, with handle h and the n
 * arguments args, and it is the only one since `calls`. */
static void expect_call(const char *what, unsigned calls, const char *slot, DAT_HANDLE h,
                        const uint64_t *args, int n)
{
        cr_expect_eq(plog->calls, calls + 1, "%s: %u calls reached the provider, not 1", what,
                     plog->calls - calls);
        cr_expect_str_eq(plog->last_call, slot, "%s reached %s, not %s", what, plog->last_call,
                         slot);
        cr_expect_eq(plog->last_handle, h, "%s: the provider got handle %p, not %p", what,
                     plog->last_handle, h);
        cr_expect_eq(plog->nargs, n, "%s: %s got %d arguments after its handle, not %d", what,
                     plog->last_call, plog->nargs, n);
        for (int i = 0; i < n && i < FAKE_LOG_ARGS; i++)
                cr_expect_eq(plog->args[i], args[i],
                             "%s: argument %d after the handle is %#llx, not %#llx", what, i + 2,
                             (unsigned long long)plog->args[i], (unsigned long long)args[i]);
}

#define ARGS_(...) ((const uint64_t[]){ __VA_ARGS__ })
#define NARGS_(...) ((int)(sizeof(ARGS_(__VA_ARGS__)) / sizeof(uint64_t)))

/* call returns ret, and reaches the provider's slot with handle h and the
 * arguments that follow, in that order. */
#define DISPATCH(ret, call, slot, h, ...)                                               \
        do {                                                                            \
                unsigned calls_ = plog->calls;                                          \
                DAT_RETURN got_ = (call);                                               \
                cr_expect_eq(got_, (DAT_RETURN)(ret), "%s: %#x, not %#x", #call,        \
                             (unsigned)got_, (unsigned)(ret));                          \
                expect_call(#call, calls_, slot, h, ARGS_(__VA_ARGS__),                 \
                            NARGS_(__VA_ARGS__));                                       \
        } while (0)

/* Objects of the provider made through libdat (their creation is tested
 * below, argument by argument). */
static DAT_PZ_HANDLE make_pz(void)
{
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;

        cr_assert_eq(dat_pz_create(ia, &pz), DAT_SUCCESS);
        return pz;
}

static DAT_EVD_HANDLE make_evd(void)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

        cr_assert_eq(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd), DAT_SUCCESS);
        return evd;
}

static DAT_CNO_HANDLE make_cno(void)
{
        DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;

        cr_assert_eq(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS);
        return cno;
}

static DAT_EP_HANDLE make_ep(DAT_PZ_HANDLE pz, DAT_EVD_HANDLE evd)
{
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;

        cr_assert_eq(dat_ep_create(ia, pz, evd, evd, evd, NULL, &ep), DAT_SUCCESS);
        return ep;
}

static DAT_LMR_HANDLE make_lmr(DAT_PZ_HANDLE pz, void *buf)
{
        DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
        DAT_LMR_CONTEXT lctx;
        DAT_RMR_CONTEXT rctx;
        DAT_VLEN len;
        DAT_VADDR addr;

        cr_assert_eq(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL,
                                    (DAT_REGION_DESCRIPTION){ .for_va = buf }, 64, pz,
                                    DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lctx, &rctx,
                                    &len, &addr),
                     DAT_SUCCESS);
        return lmr;
}

static void agent_func(DAT_PVOID instance_data, DAT_EVD_HANDLE evd)
{
        (void)instance_data;
        (void)evd;
}

static void other_agent_func(DAT_PVOID instance_data, DAT_EVD_HANDLE evd)
{
        (void)instance_data;
        (void)evd;
}

/* ---- the IA and the generic entry points ----------------------------------------- */

Test(dispatch, ia_query_and_the_generic_calls)
{
        DAT_EVD_HANDLE evd_out = DAT_HANDLE_NULL;
        DAT_IA_ATTR attr;
        DAT_PROVIDER_ATTR pattr;
        DAT_HANDLE_TYPE type = 0;
        DAT_CONTEXT context = { .as_64 = 0 };
        DAT_PZ_HANDLE pz = make_pz();

        DISPATCH(DAT_SUCCESS, dat_ia_query(ia, &evd_out, 0x1101, &attr, 0x1102, &pattr),
                 "ia_query", pia, P(&evd_out), V(0x1101), P(&attr), V(0x1102), P(&pattr));
        /* The provider's own IA handle, as its queries give it, goes as it is. */
        DISPATCH(DAT_SUCCESS, dat_ia_query(pia, &evd_out, 0x1103, &attr, 0x1104, &pattr),
                 "ia_query", pia, P(&evd_out), V(0x1103), P(&attr), V(0x1104), P(&pattr));

        DISPATCH(DAT_SUCCESS, dat_get_handle_type(ia, &type), "get_handle_type", pia, P(&type));
        cr_expect_eq(type, DAT_HANDLE_TYPE_IA);
        DISPATCH(DAT_SUCCESS, dat_get_handle_type(pz, &type), "get_handle_type", pz, P(&type));
        cr_expect_eq(type, DAT_HANDLE_TYPE_PZ);
        DISPATCH(DAT_SUCCESS, dat_get_handle_type(async_evd, &type), "get_handle_type", async_evd,
                 P(&type));
        cr_expect_eq(type, DAT_HANDLE_TYPE_EVD);

        DISPATCH(DAT_SUCCESS, dat_set_consumer_context(ia, (DAT_CONTEXT){ .as_64 = 0x1105 }),
                 "set_consumer_context", pia, V(0x1105));
        DISPATCH(DAT_SUCCESS, dat_set_consumer_context(pz, (DAT_CONTEXT){ .as_64 = 0x1106 }),
                 "set_consumer_context", pz, V(0x1106));
        DISPATCH(DAT_SUCCESS, dat_get_consumer_context(ia, &context), "get_consumer_context", pia,
                 P(&context));
        cr_expect_eq(context.as_64, 0x1105);
        DISPATCH(DAT_SUCCESS, dat_get_consumer_context(pz, &context), "get_consumer_context", pz,
                 P(&context));
        cr_expect_eq(context.as_64, 0x1106);

        /* dat_extension_op: the operation and its variable arguments, as a
         * va_list. */
        DISPATCH(DAT_SUCCESS, dat_extension_op(pz, (DAT_EXTENDED_OP)0x1107, 0x1108),
                 "handle_extendedop", pz, V(0x1107), V(0x1108));
        DISPATCH(DAT_SUCCESS, dat_extension_op(ia, (DAT_EXTENDED_OP)0x1109, 0x110a),
                 "handle_extendedop", pia, V(0x1109), V(0x110a));
        cr_expect_eq(plog->ext_op, 0x1109);
        cr_expect_eq(plog->ext_arg, 0x110a);

        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
}

Test(dispatch, ia_close)
{
        DAT_PZ_HANDLE pz = make_pz();

        /* A graceful close with a PZ left: the provider's refusal. */
        DISPATCH(DAT_INVALID_STATE, dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "ia_close", pia,
                 V(DAT_CLOSE_GRACEFUL_FLAG));
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
        DISPATCH(DAT_SUCCESS, dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), "ia_close", pia,
                 V(DAT_CLOSE_ABRUPT_FLAG));
        ia = DAT_HANDLE_NULL;
        cr_expect_eq(plog->live_objects, 0);
}

/* ---- PZ ------------------------------------------------------------------------ */

Test(dispatch, pz)
{
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL, pz2 = DAT_HANDLE_NULL;
        DAT_PZ_PARAM param = { 0 };

        DISPATCH(DAT_SUCCESS, dat_pz_create(ia, &pz), "pz_create", pia, P(&pz));
        expect_object(pz, DAT_HANDLE_TYPE_PZ, "dat_pz_create");
        DISPATCH(DAT_SUCCESS, dat_pz_create(pia, &pz2), "pz_create", pia, P(&pz2));
        expect_object(pz2, DAT_HANDLE_TYPE_PZ, "dat_pz_create");
        DISPATCH(DAT_SUCCESS, dat_pz_query(pz, (DAT_PZ_PARAM_MASK)0x1201, &param), "pz_query", pz,
                 V(0x1201), P(&param));
        cr_expect_eq(param.ia_handle, pia);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz2), "pz_free", pz2);
}

/* ---- CNO ------------------------------------------------------------------------- */

Test(dispatch, cno)
{
        int data1, data2;
        DAT_OS_WAIT_PROXY_AGENT agent = { &data1, agent_func };
        DAT_OS_WAIT_PROXY_AGENT agent2 = { &data2, other_agent_func };
        DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
        DAT_CNO_PARAM param;
        DAT_EVD_HANDLE evd_out = (DAT_EVD_HANDLE)&data1;

        DISPATCH(DAT_SUCCESS, dat_cno_create(ia, agent, &cno), "cno_create", pia, P(&data1),
                 P(agent_func), P(&cno));
        expect_object(cno, DAT_HANDLE_TYPE_CNO, "dat_cno_create");
        DISPATCH(DAT_SUCCESS, dat_cno_modify_agent(cno, agent2), "cno_modify_agent", cno,
                 P(&data2), P(other_agent_func));
        DISPATCH(DAT_SUCCESS, dat_cno_query(cno, (DAT_CNO_PARAM_MASK)0x1301, &param), "cno_query",
                 cno, V(0x1301), P(&param));
        DISPATCH(DAT_TIMEOUT_EXPIRED, dat_cno_wait(cno, 0x1302, &evd_out), "cno_wait", cno,
                 V(0x1302), P(&evd_out));
        cr_expect_null(evd_out);
        DISPATCH(DAT_SUCCESS, dat_cno_free(cno), "cno_free", cno);
}

/* ---- EVD ---------------------------------------------------------------------------- */

static const struct {
        const char *entry, *slot;
        DAT_RETURN (*call)(DAT_EVD_HANDLE);
} evd_switches[] = {
        { "dat_evd_enable", "evd_enable", dat_evd_enable },
        { "dat_evd_disable", "evd_disable", dat_evd_disable },
        { "dat_evd_set_unwaitable", "evd_set_unwaitable", dat_evd_set_unwaitable },
        { "dat_evd_clear_unwaitable", "evd_clear_unwaitable", dat_evd_clear_unwaitable },
};

Test(dispatch, evd)
{
        DAT_CNO_HANDLE cno = make_cno(), cno2 = make_cno();
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_EVD_PARAM param;
        DAT_EVENT event = { .event_number = DAT_SOFTWARE_EVENT }, event2;
        DAT_COUNT nmore;

        DISPATCH(DAT_SUCCESS, dat_evd_create(ia, 0x1401, cno, (DAT_EVD_FLAGS)0x1402, &evd),
                 "evd_create", pia, V(0x1401), P(cno), V(0x1402), P(&evd));
        expect_object(evd, DAT_HANDLE_TYPE_EVD, "dat_evd_create");
        DISPATCH(DAT_SUCCESS, dat_evd_query(evd, (DAT_EVD_PARAM_MASK)0x1403, &param), "evd_query",
                 evd, V(0x1403), P(&param));
        DISPATCH(DAT_SUCCESS, dat_evd_modify_cno(evd, cno2), "evd_modify_cno", evd, P(cno2));
        DISPATCH(DAT_SUCCESS, dat_evd_modify_cno(evd, DAT_HANDLE_NULL), "evd_modify_cno", evd,
                 P(NULL));
        for (size_t i = 0; i < sizeof(evd_switches) / sizeof(evd_switches[0]); i++) {
                unsigned calls = plog->calls;

                cr_expect_eq(evd_switches[i].call(evd), DAT_SUCCESS, "%s", evd_switches[i].entry);
                expect_call(evd_switches[i].entry, calls, evd_switches[i].slot, evd, NULL, 0);
        }
        DISPATCH(DAT_TIMEOUT_EXPIRED, dat_evd_wait(evd, 0x1404, 0x1405, &event2, &nmore),
                 "evd_wait", evd, V(0x1404), V(0x1405), P(&event2), P(&nmore));
        DISPATCH(DAT_SUCCESS, dat_evd_resize(evd, 0x1406), "evd_resize", evd, V(0x1406));
        DISPATCH(DAT_SUCCESS, dat_evd_post_se(evd, &event), "evd_post_se", evd, P(&event));
        DISPATCH(DAT_QUEUE_EMPTY, dat_evd_dequeue(evd, &event2), "evd_dequeue", evd, P(&event2));
        /* The async EVD the provider made at the open is its own too. */
        DISPATCH(DAT_QUEUE_EMPTY, dat_evd_dequeue(async_evd, &event2), "evd_dequeue", async_evd,
                 P(&event2));
        DISPATCH(DAT_SUCCESS, dat_evd_free(evd), "evd_free", evd);
        DISPATCH(DAT_SUCCESS, dat_cno_free(cno), "cno_free", cno);
        DISPATCH(DAT_SUCCESS, dat_cno_free(cno2), "cno_free", cno2);
}

/* ---- EP ------------------------------------------------------------------------------ */

Test(dispatch, ep_create_query_connect)
{
        DAT_PZ_HANDLE pz = make_pz();
        DAT_EVD_HANDLE recv = make_evd(), request = make_evd(), connect = make_evd();
        DAT_SRQ_ATTR srq_attr = { .max_recv_dtos = 4, .max_recv_iov = 1 };
        DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
        DAT_EP_ATTR attr = { 0 };
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL, ep2 = DAT_HANDLE_NULL;
        DAT_EP_PARAM param, param2 = { .pz_handle = pz, .recv_evd_handle = recv,
                                       .connect_evd_handle = connect };
        DAT_SOCK_ADDR addr;
        char pd[8], pd2[8];
        DAT_EP_STATE state = 0;
        DAT_BOOLEAN recv_idle = DAT_FALSE, request_idle = DAT_TRUE;
        DAT_COUNT nbufs = 0, span = 0;

        cr_assert_eq(dat_srq_create(ia, pz, &srq_attr, &srq), DAT_SUCCESS);
        DISPATCH(DAT_SUCCESS, dat_ep_create(ia, pz, recv, request, connect, &attr, &ep),
                 "ep_create", pia, P(pz), P(recv), P(request), P(connect), P(&attr), P(&ep));
        expect_object(ep, DAT_HANDLE_TYPE_EP, "dat_ep_create");
        DISPATCH(DAT_SUCCESS,
                 dat_ep_create_with_srq(ia, pz, connect, recv, request, srq, &attr, &ep2),
                 "ep_create_with_srq", pia, P(pz), P(connect), P(recv), P(request), P(srq),
                 P(&attr), P(&ep2));
        expect_object(ep2, DAT_HANDLE_TYPE_EP, "dat_ep_create_with_srq");

        DISPATCH(DAT_SUCCESS, dat_ep_query(ep, 0x1501, &param), "ep_query", ep, V(0x1501),
                 P(&param));
        DISPATCH(DAT_SUCCESS, dat_ep_modify(ep, 0x1502, &param2), "ep_modify", ep, V(0x1502),
                 P(&param2));
        DISPATCH(DAT_SUCCESS,
                 dat_ep_connect(ep, &addr, 0x1503, 0x1504, 0x1505, pd, (DAT_QOS)0x1506,
                                (DAT_CONNECT_FLAGS)0x1507),
                 "ep_connect", ep, P(&addr), V(0x1503), V(0x1504), V(0x1505), P(pd), V(0x1506),
                 V(0x1507));
        DISPATCH(DAT_SUCCESS, dat_ep_dup_connect(ep, ep2, 0x1508, 0x1509, pd2, (DAT_QOS)0x150a),
                 "ep_dup_connect", ep, P(ep2), V(0x1508), V(0x1509), P(pd2), V(0x150a));
        DISPATCH(DAT_SUCCESS, dat_ep_disconnect(ep, (DAT_CLOSE_FLAGS)0x150b), "ep_disconnect", ep,
                 V(0x150b));
        DISPATCH(DAT_SUCCESS, dat_ep_get_status(ep, &state, &recv_idle, &request_idle),
                 "ep_get_status", ep, P(&state), P(&recv_idle), P(&request_idle));
        cr_expect_eq(state, DAT_EP_STATE_UNCONNECTED);
        cr_expect_eq(recv_idle, DAT_TRUE);
        cr_expect_eq(request_idle, DAT_FALSE);
        DISPATCH(DAT_SUCCESS, dat_ep_recv_query(ep, &nbufs, &span), "ep_recv_query", ep, P(&nbufs),
                 P(&span));
        cr_expect_eq(nbufs, 3);
        cr_expect_eq(span, 4);
        DISPATCH(DAT_SUCCESS, dat_ep_set_watermark(ep, 0x150c, 0x150d), "ep_set_watermark", ep,
                 V(0x150c), V(0x150d));
        DISPATCH(DAT_SUCCESS, dat_ep_reset(ep), "ep_reset", ep);

        DISPATCH(DAT_SUCCESS, dat_ep_free(ep2), "ep_free", ep2);
        DISPATCH(DAT_SUCCESS, dat_ep_free(ep), "ep_free", ep);
        DISPATCH(DAT_SUCCESS, dat_srq_free(srq), "srq_free", srq);
        DISPATCH(DAT_SUCCESS, dat_evd_free(connect), "evd_free", connect);
        DISPATCH(DAT_SUCCESS, dat_evd_free(request), "evd_free", request);
        DISPATCH(DAT_SUCCESS, dat_evd_free(recv), "evd_free", recv);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
}

Test(dispatch, ep_posts)
{
        DAT_PZ_HANDLE pz = make_pz();
        DAT_EVD_HANDLE evd = make_evd();
        DAT_EP_HANDLE ep = make_ep(pz, evd);
        DAT_LMR_TRIPLET iov[2] = { { .lmr_context = 7, .virtual_address = 0x1000,
                                     .segment_length = 64 } };
        DAT_RMR_TRIPLET rmr[2] = { { .rmr_context = 9, .virtual_address = 0x2000,
                                     .segment_length = 64 } };

        DISPATCH(DAT_SUCCESS,
                 dat_ep_post_send(ep, 0x1601, &iov[0], (DAT_DTO_COOKIE){ .as_64 = 0x1602 },
                                  (DAT_COMPLETION_FLAGS)0x1603),
                 "ep_post_send", ep, V(0x1601), P(&iov[0]), V(0x1602), V(0x1603));
        DISPATCH(DAT_SUCCESS,
                 dat_ep_post_recv(ep, 0x1604, &iov[1], (DAT_DTO_COOKIE){ .as_64 = 0x1605 },
                                  (DAT_COMPLETION_FLAGS)0x1606),
                 "ep_post_recv", ep, V(0x1604), P(&iov[1]), V(0x1605), V(0x1606));
        DISPATCH(DAT_SUCCESS,
                 dat_ep_post_rdma_write(ep, 0x1607, &iov[0], (DAT_DTO_COOKIE){ .as_64 = 0x1608 },
                                        &rmr[0], (DAT_COMPLETION_FLAGS)0x1609),
                 "ep_post_rdma_write", ep, V(0x1607), P(&iov[0]), V(0x1608), P(&rmr[0]),
                 V(0x1609));
        DISPATCH(DAT_SUCCESS,
                 dat_ep_post_rdma_read(ep, 0x160a, &iov[1], (DAT_DTO_COOKIE){ .as_64 = 0x160b },
                                       &rmr[1], (DAT_COMPLETION_FLAGS)0x160c),
                 "ep_post_rdma_read", ep, V(0x160a), P(&iov[1]), V(0x160b), P(&rmr[1]),
                 V(0x160c));
        DISPATCH(DAT_SUCCESS, dat_ep_free(ep), "ep_free", ep);
        DISPATCH(DAT_SUCCESS, dat_evd_free(evd), "evd_free", evd);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
}

/* ---- CR --------------------------------------------------------------------------------- */

Test(dispatch, cr)
{
        DAT_PZ_HANDLE pz = make_pz();
        DAT_EVD_HANDLE evd = make_evd();
        DAT_EP_HANDLE ep = make_ep(pz, evd);
        /* No event of the fake's carries one: it hands one out itself. */
        DAT_CR_HANDLE cr = new_cr(pia);
        DAT_CR_PARAM param;
        char pd[8], pd2[8];

        expect_object(cr, DAT_HANDLE_TYPE_CR, "fake_provider_new_cr");
        DISPATCH(DAT_SUCCESS, dat_cr_query(cr, (DAT_CR_PARAM_MASK)0x1701, &param), "cr_query", cr,
                 V(0x1701), P(&param));
        DISPATCH(DAT_SUCCESS, dat_cr_accept(cr, ep, 0x1702, pd), "cr_accept", cr, P(ep),
                 V(0x1702), P(pd));
        DISPATCH(DAT_SUCCESS, dat_cr_accept(cr, DAT_HANDLE_NULL, 0x1703, pd2), "cr_accept", cr,
                 P(NULL), V(0x1703), P(pd2));
        DISPATCH(DAT_SUCCESS, dat_cr_reject(cr, 0x1704, pd2), "cr_reject", cr, V(0x1704), P(pd2));
        DISPATCH(DAT_SUCCESS, dat_cr_handoff(cr, 0x1705), "cr_handoff", cr, V(0x1705));
        DISPATCH(DAT_SUCCESS, dat_ep_free(ep), "ep_free", ep);
        DISPATCH(DAT_SUCCESS, dat_evd_free(evd), "evd_free", evd);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
}

/* ---- LMR and RMR ---------------------------------------------------------------------- */

Test(dispatch, lmr)
{
        static char buf[256];
        DAT_PZ_HANDLE pz = make_pz();
        DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL, lmr2 = DAT_HANDLE_NULL;
        DAT_LMR_CONTEXT lctx = 0, lctx2;
        DAT_RMR_CONTEXT rctx = 0, rctx2;
        DAT_VLEN len = 0, len2;
        DAT_VADDR addr = 0, addr2;
        DAT_LMR_PARAM param;
        DAT_LMR_TRIPLET seg[2] = { { .lmr_context = 0x1c } };

        DISPATCH(DAT_SUCCESS,
                 dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){ .for_va = buf },
                                0x1801, pz, (DAT_MEM_PRIV_FLAGS)0x1802, (DAT_VA_TYPE)0x1803, &lmr,
                                &lctx, &rctx, &len, &addr),
                 "lmr_create", pia, V(DAT_MEM_TYPE_VIRTUAL), P(buf), V(0x1801), P(pz), V(0x1802),
                 V(0x1803), P(&lmr), P(&lctx), P(&rctx), P(&len), P(&addr));
        expect_object(lmr, DAT_HANDLE_TYPE_LMR, "dat_lmr_create");
        cr_expect_eq(lctx, 0x1c);
        cr_expect_eq(rctx, 0x2c);
        cr_expect_eq(len, 0x1801);
        cr_expect_eq(addr, (DAT_VADDR)(uintptr_t)buf);
        /* One of the provider's LMRs in the region is the provider's to see. */
        DISPATCH(DAT_SUCCESS,
                 dat_lmr_create(ia, DAT_MEM_TYPE_LMR, (DAT_REGION_DESCRIPTION){ .for_lmr_handle = lmr },
                                0x1804, pz, (DAT_MEM_PRIV_FLAGS)0x1805, (DAT_VA_TYPE)0x1806, &lmr2,
                                &lctx2, &rctx2, &len2, &addr2),
                 "lmr_create", pia, V(DAT_MEM_TYPE_LMR), P(lmr), V(0x1804), P(pz), V(0x1805),
                 V(0x1806), P(&lmr2), P(&lctx2), P(&rctx2), P(&len2), P(&addr2));
        expect_object(lmr2, DAT_HANDLE_TYPE_LMR, "dat_lmr_create");
        DISPATCH(DAT_SUCCESS, dat_lmr_query(lmr, (DAT_LMR_PARAM_MASK)0x1807, &param), "lmr_query",
                 lmr, V(0x1807), P(&param));
        DISPATCH(DAT_SUCCESS, dat_lmr_sync_rdma_read(ia, &seg[0], 0x1808), "lmr_sync_rdma_read",
                 pia, P(&seg[0]), V(0x1808));
        DISPATCH(DAT_SUCCESS, dat_lmr_sync_rdma_write(ia, &seg[1], 0x1809), "lmr_sync_rdma_write",
                 pia, P(&seg[1]), V(0x1809));
        DISPATCH(DAT_SUCCESS, dat_lmr_free(lmr2), "lmr_free", lmr2);
        DISPATCH(DAT_SUCCESS, dat_lmr_free(lmr), "lmr_free", lmr);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
}

Test(dispatch, rmr)
{
        static char buf[256];
        DAT_PZ_HANDLE pz = make_pz();
        DAT_EVD_HANDLE evd = make_evd();
        DAT_EP_HANDLE ep = make_ep(pz, evd);
        DAT_LMR_HANDLE lmr = make_lmr(pz, buf);
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
        DAT_RMR_PARAM param;
        DAT_RMR_CONTEXT context = 0;
        DAT_LMR_TRIPLET triplet = { .lmr_context = 0x1c, .virtual_address = (uintptr_t)buf,
                                    .segment_length = 64 };

        DISPATCH(DAT_SUCCESS, dat_rmr_create(pz, &rmr), "rmr_create", pz, P(&rmr));
        expect_object(rmr, DAT_HANDLE_TYPE_RMR, "dat_rmr_create");
        DISPATCH(DAT_SUCCESS, dat_rmr_query(rmr, (DAT_RMR_PARAM_MASK)0x1901, &param), "rmr_query",
                 rmr, V(0x1901), P(&param));
        DISPATCH(DAT_SUCCESS,
                 dat_rmr_bind(rmr, lmr, &triplet, (DAT_MEM_PRIV_FLAGS)0x1902, (DAT_VA_TYPE)0x1903,
                              ep, (DAT_RMR_COOKIE){ .as_64 = 0x1904 },
                              (DAT_COMPLETION_FLAGS)0x1905, &context),
                 "rmr_bind", rmr, P(lmr), P(&triplet), V(0x1902), V(0x1903), P(ep), V(0x1904),
                 V(0x1905), P(&context));
        cr_expect_eq(context, 0x3c);
        DISPATCH(DAT_SUCCESS, dat_rmr_free(rmr), "rmr_free", rmr);
        DISPATCH(DAT_SUCCESS, dat_lmr_free(lmr), "lmr_free", lmr);
        DISPATCH(DAT_SUCCESS, dat_ep_free(ep), "ep_free", ep);
        DISPATCH(DAT_SUCCESS, dat_evd_free(evd), "evd_free", evd);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
}

/* ---- PSP and RSP ---------------------------------------------------------------------- */

Test(dispatch, psp_and_rsp)
{
        DAT_PZ_HANDLE pz = make_pz();
        DAT_EVD_HANDLE evd = make_evd(), cr_evd = make_evd();
        DAT_EP_HANDLE ep = make_ep(pz, evd);
        DAT_PSP_HANDLE psp = DAT_HANDLE_NULL, psp2 = DAT_HANDLE_NULL;
        DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
        DAT_CONN_QUAL qual = 0;
        DAT_PSP_PARAM psp_param;
        DAT_RSP_PARAM rsp_param;

        DISPATCH(DAT_SUCCESS, dat_psp_create(ia, 0x1a01, cr_evd, (DAT_PSP_FLAGS)0x1a02, &psp),
                 "psp_create", pia, V(0x1a01), P(cr_evd), V(0x1a02), P(&psp));
        expect_object(psp, DAT_HANDLE_TYPE_PSP, "dat_psp_create");
        DISPATCH(DAT_SUCCESS, dat_psp_create_any(ia, &qual, cr_evd, (DAT_PSP_FLAGS)0x1a03, &psp2),
                 "psp_create_any", pia, P(&qual), P(cr_evd), V(0x1a03), P(&psp2));
        expect_object(psp2, DAT_HANDLE_TYPE_PSP, "dat_psp_create_any");
        cr_expect_eq(qual, 0x5150);
        DISPATCH(DAT_SUCCESS, dat_psp_query(psp, (DAT_PSP_PARAM_MASK)0x1a04, &psp_param),
                 "psp_query", psp, V(0x1a04), P(&psp_param));
        DISPATCH(DAT_SUCCESS, dat_rsp_create(ia, 0x1a05, ep, cr_evd, &rsp), "rsp_create", pia,
                 V(0x1a05), P(ep), P(cr_evd), P(&rsp));
        expect_object(rsp, DAT_HANDLE_TYPE_RSP, "dat_rsp_create");
        DISPATCH(DAT_SUCCESS, dat_rsp_query(rsp, (DAT_RSP_PARAM_MASK)0x1a06, &rsp_param),
                 "rsp_query", rsp, V(0x1a06), P(&rsp_param));
        DISPATCH(DAT_SUCCESS, dat_rsp_free(rsp), "rsp_free", rsp);
        DISPATCH(DAT_SUCCESS, dat_psp_free(psp2), "psp_free", psp2);
        DISPATCH(DAT_SUCCESS, dat_psp_free(psp), "psp_free", psp);
        DISPATCH(DAT_SUCCESS, dat_ep_free(ep), "ep_free", ep);
        DISPATCH(DAT_SUCCESS, dat_evd_free(cr_evd), "evd_free", cr_evd);
        DISPATCH(DAT_SUCCESS, dat_evd_free(evd), "evd_free", evd);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
}

/* ---- SRQ ----------------------------------------------------------------------------- */

Test(dispatch, srq)
{
        DAT_PZ_HANDLE pz = make_pz();
        DAT_SRQ_ATTR attr = { .max_recv_dtos = 4, .max_recv_iov = 1 };
        DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
        DAT_SRQ_PARAM param;
        DAT_LMR_TRIPLET iov = { .lmr_context = 7, .virtual_address = 0x1000,
                                .segment_length = 64 };

        DISPATCH(DAT_SUCCESS, dat_srq_create(ia, pz, &attr, &srq), "srq_create", pia, P(pz),
                 P(&attr), P(&srq));
        expect_object(srq, DAT_HANDLE_TYPE_SRQ, "dat_srq_create");
        DISPATCH(DAT_SUCCESS,
                 dat_srq_post_recv(srq, 0x1b01, &iov, (DAT_DTO_COOKIE){ .as_64 = 0x1b02 }),
                 "srq_post_recv", srq, V(0x1b01), P(&iov), V(0x1b02));
        DISPATCH(DAT_SUCCESS, dat_srq_query(srq, (DAT_SRQ_PARAM_MASK)0x1b03, &param), "srq_query",
                 srq, V(0x1b03), P(&param));
        DISPATCH(DAT_SUCCESS, dat_srq_resize(srq, 0x1b04), "srq_resize", srq, V(0x1b04));
        DISPATCH(DAT_SUCCESS, dat_srq_set_lw(srq, 0x1b05), "srq_set_lw", srq, V(0x1b05));
        DISPATCH(DAT_SUCCESS, dat_srq_free(srq), "srq_free", srq);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
}

/* ---- every IA-taking entry point, given the provider's own IA handle ------------------ */

Test(dispatch, the_providers_own_ia_handle_goes_as_it_is)
{
        static char buf[64];
        DAT_PZ_HANDLE pz = make_pz();
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
        DAT_LMR_CONTEXT lctx;
        DAT_RMR_CONTEXT rctx;
        DAT_VLEN len;
        DAT_VADDR addr;
        DAT_LMR_TRIPLET seg = { 0 };
        DAT_HANDLE_TYPE type;

        DISPATCH(DAT_SUCCESS, dat_cno_create(pia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno),
                 "cno_create", pia, P(NULL), P(NULL), P(&cno));
        DISPATCH(DAT_SUCCESS, dat_evd_create(pia, 0x1c01, cno, (DAT_EVD_FLAGS)0x1c02, &evd),
                 "evd_create", pia, V(0x1c01), P(cno), V(0x1c02), P(&evd));
        DISPATCH(DAT_SUCCESS, dat_ep_create(pia, pz, evd, evd, evd, NULL, &ep), "ep_create", pia,
                 P(pz), P(evd), P(evd), P(evd), P(NULL), P(&ep));
        DISPATCH(DAT_SUCCESS,
                 dat_lmr_create(pia, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){ .for_va = buf },
                                0x1c03, pz, (DAT_MEM_PRIV_FLAGS)0x1c04, (DAT_VA_TYPE)0x1c05, &lmr,
                                &lctx, &rctx, &len, &addr),
                 "lmr_create", pia, V(DAT_MEM_TYPE_VIRTUAL), P(buf), V(0x1c03), P(pz), V(0x1c04),
                 V(0x1c05), P(&lmr), P(&lctx), P(&rctx), P(&len), P(&addr));
        DISPATCH(DAT_SUCCESS, dat_lmr_sync_rdma_read(pia, &seg, 0x1c06), "lmr_sync_rdma_read", pia,
                 P(&seg), V(0x1c06));
        DISPATCH(DAT_SUCCESS, dat_get_handle_type(pia, &type), "get_handle_type", pia, P(&type));
        cr_expect_eq(type, DAT_HANDLE_TYPE_IA);
        DISPATCH(DAT_SUCCESS, dat_lmr_free(lmr), "lmr_free", lmr);
        DISPATCH(DAT_SUCCESS, dat_ep_free(ep), "ep_free", ep);
        DISPATCH(DAT_SUCCESS, dat_evd_free(evd), "evd_free", evd);
        DISPATCH(DAT_SUCCESS, dat_cno_free(cno), "cno_free", cno);
        DISPATCH(DAT_SUCCESS, dat_pz_free(pz), "pz_free", pz);
}
