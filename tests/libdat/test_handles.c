/* Handles: the table (handle.c, linked in from libdatcore) and every entry
 * point's handle check.  NULL, freed, wrong-type and garbage handles (random
 * pointer-sized values, pointers to the stack and the heap, the special
 * DAT_EVD_ASYNC_EXISTS/DAT_EVD_OUT_OF_SCOPE values) must come back as
 * DAT_INVALID_HANDLE with the subtype of the expected kind, never crash and
 * never touch the memory they point at (the sanitizer build checks that).
 *
 * Objects made here are of kind CSP: DAT 2.0's ABI has no dat_csp_* entry
 * point, so no code of libdat ever treats one as its own struct, and a CSP
 * handle is the wrong type for every exported function that takes a typed
 * handle. */
#include "config.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/dat_registry.h>

#include "libdat/handle.h"
#include "libdat/ia.h"

static void fake_destroy(struct dat_object *obj)
{
        dat_object_fini(obj);
        free(obj);
}

static const struct dat_object_ops fake_ops = {
        .type = DAT_HANDLE_TYPE_CSP,
        .name = "CSP",
        .invalid_subtype = DAT_INVALID_HANDLE_CSP,
        .destroy = fake_destroy,
};

static struct dat_object *fake_new(struct dat_object *parent)
{
        struct dat_object *obj = calloc(1, sizeof(*obj));

        cr_assert_not_null(obj);
        cr_assert_eq(dat_object_init(obj, &fake_ops, parent), DAT_SUCCESS);
        return obj;
}

#define INVALID(sub) (DAT_CLASS_ERROR | DAT_INVALID_HANDLE | (sub))

#define EXPECT_INVALID(call, sub, what)                                                       \
        cr_expect_eq((call), INVALID(sub), "%s with %s handle: 0x%08x", #call, what, (call))

/* Every exported function that takes a handle of one kind as its first
 * handle argument, called with h. */
static void expect_all_typed_calls_refuse(DAT_HANDLE h, const char *what)
{
        DAT_REGION_DESCRIPTION region = { .for_va = NULL };
        DAT_DTO_COOKIE dto_cookie = { .as_64 = 0 };
        DAT_RMR_COOKIE rmr_cookie = { .as_64 = 0 };
        DAT_HANDLE out = DAT_HANDLE_NULL;
        DAT_EVD_HANDLE evd_out = DAT_HANDLE_NULL;
        DAT_IA_ATTR ia_attr;
        DAT_PROVIDER_ATTR provider_attr;
        DAT_CONN_QUAL qual = 0;
        DAT_COUNT count = 0;
        DAT_EVENT event;
        DAT_EP_STATE state;
        DAT_BOOLEAN b1, b2;
        DAT_LMR_CONTEXT lmr_context;
        DAT_RMR_CONTEXT rmr_context;
        DAT_VLEN vlen;
        DAT_VADDR vaddr;
        DAT_PZ_PARAM pz_param;
        DAT_LMR_PARAM lmr_param;
        DAT_RMR_PARAM rmr_param;
        DAT_EP_PARAM ep_param;
        DAT_CR_PARAM cr_param;
        DAT_PSP_PARAM psp_param;
        DAT_RSP_PARAM rsp_param;
        DAT_CNO_PARAM cno_param;
        DAT_SRQ_PARAM srq_param;
        DAT_EVD_PARAM evd_param;
        DAT_SRQ_ATTR srq_attr = { 0 };

        EXPECT_INVALID(dat_ia_close(h, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_ia_close(h, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_ia_query(h, &evd_out, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, &provider_attr),
                       DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dats_get_ia_handle(h, &out), DAT_INVALID_HANDLE_IA, what);

        EXPECT_INVALID(dat_pz_create(h, &out), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_pz_query(h, DAT_PZ_FIELD_ALL, &pz_param), DAT_INVALID_HANDLE_PZ, what);
        EXPECT_INVALID(dat_pz_free(h), DAT_INVALID_HANDLE_PZ, what);

        EXPECT_INVALID(dat_lmr_create(h, DAT_MEM_TYPE_VIRTUAL, region, 0, DAT_HANDLE_NULL, 0, DAT_VA_TYPE_VA,
                                      &out, &lmr_context, &rmr_context, &vlen, &vaddr),
                       DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_lmr_query(h, DAT_LMR_FIELD_ALL, &lmr_param), DAT_INVALID_HANDLE_LMR, what);
        EXPECT_INVALID(dat_lmr_free(h), DAT_INVALID_HANDLE_LMR, what);
        EXPECT_INVALID(dat_lmr_sync_rdma_read(h, NULL, 0), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_lmr_sync_rdma_write(h, NULL, 0), DAT_INVALID_HANDLE_IA, what);

        EXPECT_INVALID(dat_rmr_create(h, &out), DAT_INVALID_HANDLE_PZ, what);
        EXPECT_INVALID(dat_rmr_query(h, DAT_RMR_FIELD_ALL, &rmr_param), DAT_INVALID_HANDLE_RMR, what);
        EXPECT_INVALID(dat_rmr_bind(h, DAT_HANDLE_NULL, NULL, 0, DAT_VA_TYPE_VA, DAT_HANDLE_NULL, rmr_cookie, 0,
                                    &rmr_context),
                       DAT_INVALID_HANDLE_RMR, what);
        EXPECT_INVALID(dat_rmr_free(h), DAT_INVALID_HANDLE_RMR, what);

        EXPECT_INVALID(dat_ep_create(h, NULL, NULL, NULL, NULL, NULL, &out), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_ep_create_with_srq(h, NULL, NULL, NULL, NULL, NULL, NULL, &out), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_ep_query(h, DAT_EP_FIELD_ALL, &ep_param), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_modify(h, 0, &ep_param), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_connect(h, NULL, 0, 0, 0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_dup_connect(h, NULL, 0, 0, NULL, DAT_QOS_BEST_EFFORT), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_disconnect(h, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_post_send(h, 0, NULL, dto_cookie, 0), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_post_recv(h, 0, NULL, dto_cookie, 0), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_post_rdma_read(h, 0, NULL, dto_cookie, NULL, 0), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_post_rdma_write(h, 0, NULL, dto_cookie, NULL, 0), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_get_status(h, &state, &b1, &b2), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_free(h), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_reset(h), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_recv_query(h, &count, &count), DAT_INVALID_HANDLE_EP, what);
        EXPECT_INVALID(dat_ep_set_watermark(h, 0, 0), DAT_INVALID_HANDLE_EP, what);

        EXPECT_INVALID(dat_cr_query(h, DAT_CR_FIELD_ALL, &cr_param), DAT_INVALID_HANDLE_CR, what);
        EXPECT_INVALID(dat_cr_accept(h, NULL, 0, NULL), DAT_INVALID_HANDLE_CR, what);
        EXPECT_INVALID(dat_cr_reject(h, 0, NULL), DAT_INVALID_HANDLE_CR, what);
        EXPECT_INVALID(dat_cr_handoff(h, 0), DAT_INVALID_HANDLE_CR, what);

        EXPECT_INVALID(dat_psp_create(h, 0, NULL, DAT_PSP_CONSUMER_FLAG, &out), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_psp_create_any(h, &qual, NULL, DAT_PSP_CONSUMER_FLAG, &out), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_psp_query(h, DAT_PSP_FIELD_ALL, &psp_param), DAT_INVALID_HANDLE_PSP, what);
        EXPECT_INVALID(dat_psp_free(h), DAT_INVALID_HANDLE_PSP, what);

        EXPECT_INVALID(dat_rsp_create(h, 0, NULL, NULL, &out), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_rsp_query(h, DAT_RSP_FIELD_ALL, &rsp_param), DAT_INVALID_HANDLE_RSP, what);
        EXPECT_INVALID(dat_rsp_free(h), DAT_INVALID_HANDLE_RSP, what);

        EXPECT_INVALID(dat_cno_create(h, DAT_OS_WAIT_PROXY_AGENT_NULL, &out), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_cno_modify_agent(h, DAT_OS_WAIT_PROXY_AGENT_NULL), DAT_INVALID_HANDLE_CNO, what);
        EXPECT_INVALID(dat_cno_query(h, DAT_CNO_FIELD_ALL, &cno_param), DAT_INVALID_HANDLE_CNO, what);
        EXPECT_INVALID(dat_cno_free(h), DAT_INVALID_HANDLE_CNO, what);
        EXPECT_INVALID(dat_cno_wait(h, 0, &evd_out), DAT_INVALID_HANDLE_CNO, what);

        EXPECT_INVALID(dat_srq_create(h, NULL, &srq_attr, &out), DAT_INVALID_HANDLE_IA, what);
        EXPECT_INVALID(dat_srq_free(h), DAT_INVALID_HANDLE_SRQ, what);
        EXPECT_INVALID(dat_srq_post_recv(h, 0, NULL, dto_cookie), DAT_INVALID_HANDLE_SRQ, what);
        EXPECT_INVALID(dat_srq_query(h, DAT_SRQ_FIELD_ALL, &srq_param), DAT_INVALID_HANDLE_SRQ, what);
        EXPECT_INVALID(dat_srq_resize(h, 1), DAT_INVALID_HANDLE_SRQ, what);
        EXPECT_INVALID(dat_srq_set_lw(h, 1), DAT_INVALID_HANDLE_SRQ, what);

        EXPECT_INVALID(dat_evd_create(h, 1, NULL, DAT_EVD_DEFAULT_FLAG, &out), DAT_INVALID_HANDLE_IA, what);
        /* EVD handles have no role-free subtype: the argument position names it. */
        EXPECT_INVALID(dat_evd_modify_cno(h, NULL), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_enable(h), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_disable(h), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_wait(h, 0, 1, &event, &count), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_set_unwaitable(h), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_clear_unwaitable(h), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_resize(h, 1), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_post_se(h, &event), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_dequeue(h, &event), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_query(h, DAT_EVD_FIELD_ALL, &evd_param), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_evd_free(h), DAT_INVALID_HANDLE1, what);
}

/* The functions that take a handle of any kind. */
static void expect_generic_calls_refuse(DAT_HANDLE h, const char *what)
{
        DAT_HANDLE_TYPE type;
        DAT_CONTEXT context = { .as_64 = 42 };

        EXPECT_INVALID(dat_get_handle_type(h, &type), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_set_consumer_context(h, context), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_get_consumer_context(h, &context), DAT_INVALID_HANDLE1, what);
        EXPECT_INVALID(dat_extension_op(h, 0), DAT_INVALID_HANDLE1, what);
}

static void expect_every_call_refuses(DAT_HANDLE h, const char *what)
{
        expect_all_typed_calls_refuse(h, what);
        expect_generic_calls_refuse(h, what);
}

Test(handles, null_handle_is_invalid_everywhere)
{
        expect_every_call_refuses(DAT_HANDLE_NULL, "NULL");
}

Test(handles, garbage_values_are_invalid_everywhere)
{
        static const uintptr_t garbage[] = {
                0x1234567, 0x1, 0x2, 0x8, 0xfff, 0x7fffffffffff, 0xffffffffffffffff, 0xdeadbeefcafef00d,
                0xda7a000000000000, 0xda7a000000000001, 0xda7a0000000fffff, 0xda7affffffffffff,
        };

        for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
                char what[64];

                snprintf(what, sizeof(what), "garbage %#lx", (unsigned long)garbage[i]);
                expect_every_call_refuses((DAT_HANDLE)garbage[i], what);
        }
}

Test(handles, special_evd_values_are_not_handles)
{
        expect_every_call_refuses(DAT_EVD_ASYNC_EXISTS, "DAT_EVD_ASYNC_EXISTS");
        expect_every_call_refuses(DAT_EVD_OUT_OF_SCOPE, "DAT_EVD_OUT_OF_SCOPE");
}

Test(handles, pointers_to_the_stack_and_heap_are_invalid_and_never_read)
{
        uint64_t on_stack[8];
        void *on_heap = malloc(64);
        void *doomed = malloc(64);
        /* The value of a pointer that was freed, kept as a number so that the
         * compiler does not object to its use. */
        volatile uintptr_t freed_value = (uintptr_t)doomed;
        DAT_HANDLE freed;

        /* Content that would look like a provider table if anything read it. */
        memset(on_stack, 0x41, sizeof(on_stack));
        memset(on_heap, 0x41, 64);
        free(doomed);
        freed = (DAT_HANDLE)freed_value;
        expect_every_call_refuses(on_stack, "stack pointer");
        expect_every_call_refuses(&on_stack[3], "unaligned-offset stack pointer");
        expect_every_call_refuses(on_heap, "heap pointer");
        /* Under ASan, reading this would be a use-after-free report. */
        expect_every_call_refuses(freed, "freed heap pointer");
        free(on_heap);
}

Test(handles, a_handle_of_another_kind_is_invalid_for_every_typed_call)
{
        struct dat_object *csp = fake_new(NULL);

        expect_all_typed_calls_refuse(csp->handle, "CSP");
        fake_destroy(csp);
}

Test(handles, a_freed_handle_is_invalid_everywhere)
{
        struct dat_object *obj = fake_new(NULL);
        DAT_HANDLE h = obj->handle;

        fake_destroy(obj);
        expect_every_call_refuses(h, "freed");
}

Test(handles, get_handle_type_names_the_kind)
{
        struct dat_object *obj = fake_new(NULL);
        DAT_HANDLE_TYPE type = DAT_HANDLE_TYPE_IA;

        cr_expect_eq(dat_get_handle_type(obj->handle, &type), DAT_SUCCESS);
        cr_expect_eq(type, DAT_HANDLE_TYPE_CSP);
        cr_expect_eq(dat_get_handle_type(obj->handle, NULL),
                     DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG2);
        fake_destroy(obj);
}

Test(handles, consumer_context_round_trips_and_starts_at_zero)
{
        struct dat_object *a = fake_new(NULL), *b = fake_new(NULL);
        DAT_CONTEXT in = { .as_64 = 0x0123456789abcdefULL }, out = { .as_64 = 1 };

        cr_expect_eq(dat_get_consumer_context(a->handle, &out), DAT_SUCCESS);
        cr_expect_eq(out.as_64, 0);
        cr_expect_eq(dat_set_consumer_context(a->handle, in), DAT_SUCCESS);
        cr_expect_eq(dat_get_consumer_context(a->handle, &out), DAT_SUCCESS);
        cr_expect_eq(out.as_64, in.as_64);
        in.as_ptr = &in;
        cr_expect_eq(dat_set_consumer_context(b->handle, in), DAT_SUCCESS);
        cr_expect_eq(dat_get_consumer_context(b->handle, &out), DAT_SUCCESS);
        cr_expect_eq(out.as_ptr, &in);
        /* Each object keeps its own. */
        cr_expect_eq(dat_get_consumer_context(a->handle, &out), DAT_SUCCESS);
        cr_expect_eq(out.as_64, 0x0123456789abcdefULL);
        cr_expect_eq(dat_get_consumer_context(a->handle, NULL),
                     DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG2);
        fake_destroy(a);
        fake_destroy(b);
}

Test(handle_table, lookup_checks_the_type)
{
        struct dat_object *obj = fake_new(NULL);

        cr_expect_eq(dat_object_lookup(obj->handle, DAT_HANDLE_TYPE_CSP), obj);
        cr_expect_eq(dat_object_lookup_any(obj->handle), obj);
        for (int t = DAT_HANDLE_TYPE_CR; t < DAT_HANDLE_TYPE_CSP; t++)
                cr_expect_null(dat_object_lookup(obj->handle, (DAT_HANDLE_TYPE)t), "type %d", t);
        fake_destroy(obj);
}

Test(handle_table, a_freed_handle_stays_invalid_after_its_slot_is_reused)
{
        struct dat_object *first = fake_new(NULL);
        DAT_HANDLE stale = first->handle;

        fake_destroy(first);
        /* Enough create/free cycles to come back to the first slot many times. */
        for (int i = 0; i < 10000; i++) {
                struct dat_object *obj = fake_new(NULL);

                cr_assert_neq(obj->handle, stale);
                cr_assert_null(dat_object_lookup_any(stale));
                cr_assert_eq(dat_object_lookup_any(obj->handle), obj);
                fake_destroy(obj);
        }
}

Test(handle_table, many_live_handles_are_distinct_and_valid)
{
        enum { N = 5000 }; /* several chunks of the table */
        static struct dat_object *objs[N];

        for (int i = 0; i < N; i++)
                objs[i] = fake_new(NULL);
        for (int i = 0; i < N; i++) {
                cr_assert_eq(dat_object_lookup(objs[i]->handle, DAT_HANDLE_TYPE_CSP), objs[i]);
                if (i > 0)
                        cr_assert_neq(objs[i]->handle, objs[i - 1]->handle);
        }
        for (int i = 0; i < N; i += 2)
                fake_destroy(objs[i]);
        for (int i = 0; i < N; i++) {
                if (i % 2)
                        cr_assert_eq(dat_object_lookup_any(objs[i]->handle), objs[i]);
        }
        for (int i = 1; i < N; i += 2)
                fake_destroy(objs[i]);
}

Test(handle_table, children_are_counted_and_destroyed_newest_first)
{
        struct dat_object *parent = fake_new(NULL);
        struct dat_object *a = fake_new(parent), *b = fake_new(parent), *c = fake_new(parent);
        DAT_HANDLE ha = a->handle, hb = b->handle, hc = c->handle;

        cr_expect_eq(parent->n_children, 3);
        cr_expect_eq(parent->children.prev, &c->sibling);
        fake_destroy(b);
        cr_expect_eq(parent->n_children, 2);
        dat_object_destroy_children(parent);
        cr_expect_eq(parent->n_children, 0);
        cr_expect_null(dat_object_lookup_any(ha));
        cr_expect_null(dat_object_lookup_any(hb));
        cr_expect_null(dat_object_lookup_any(hc));
        cr_expect_not_null(dat_object_lookup_any(parent->handle));
        fake_destroy(parent);
}

Test(handle_table, no_child_can_join_a_parent_being_freed)
{
        struct dat_object *parent = fake_new(NULL);
        struct dat_object child = { 0 };

        parent->closing = true;
        cr_expect_eq(dat_object_init(&child, &fake_ops, parent), INVALID(DAT_INVALID_HANDLE_CSP));
        cr_expect_eq(parent->n_children, 0);
        cr_expect_null(child.ops);
        fake_destroy(parent);
}

/* Lookups race with creates and frees in other threads: every thread always
 * finds its own live object, and never its freed one. */
#define RACE_THREADS 4
#define RACE_ROUNDS 20000

static void *race_worker(void *arg)
{
        DAT_HANDLE *shared = arg;

        for (int i = 0; i < RACE_ROUNDS; i++) {
                struct dat_object *obj = calloc(1, sizeof(*obj));
                DAT_HANDLE other = __atomic_load_n(shared, __ATOMIC_RELAXED), mine;

                if (!obj || dat_object_init(obj, &fake_ops, NULL) != DAT_SUCCESS)
                        return (void *)1;
                __atomic_store_n(shared, obj->handle, __ATOMIC_RELAXED);
                /* Another thread's object, maybe being freed right now: the
                 * answer may be either, but the lookup itself must be safe
                 * (it is not dereferenced: that would be the consumer's race). */
                (void)dat_object_lookup(other, DAT_HANDLE_TYPE_CSP);
                if (dat_object_lookup_any(obj->handle) != obj)
                        return (void *)2;
                mine = obj->handle;
                fake_destroy(obj);
                if (dat_object_lookup_any(mine))
                        return (void *)3;
        }
        return NULL;
}

Test(handle_table, concurrent_create_lookup_free)
{
        pthread_t t[RACE_THREADS];
        DAT_HANDLE shared = DAT_HANDLE_NULL;

        for (int i = 0; i < RACE_THREADS; i++)
                cr_assert_eq(pthread_create(&t[i], NULL, race_worker, &shared), 0);
        for (int i = 0; i < RACE_THREADS; i++) {
                void *r;

                pthread_join(t[i], &r);
                cr_expect_null(r, "worker %d failed with %p", i, r);
        }
}
