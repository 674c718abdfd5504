/* The dynamic registry: other providers' libraries, loaded by dat_ia_open
 * for the dat.conf entries that name them (dat_provider_init(3DAT)) or
 * registered by the application itself, and the calls on their objects,
 * which libdat's entry points hand to them (dat_registry_add_provider(3DAT),
 * dat_registry_remove_provider(3DAT); libdat/foreign.h).  The provider is
 * the suite's fake_provider.so, which says which calls reached it; Debian's
 * libdaplofa.so.2 is loaded too where it is installed. */
#include "config.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dat2/dat_ib_extensions.h>
#include <dat2/dat_registry.h>
#include <dat2/udat.h>

#include "tests/harness.h"
#include "tests/libdat/fake_provider.h"
#include "tests/libdat/libdat_test.h"

#define ERR(type, sub) (DAT_CLASS_ERROR | (type) | (sub))

/* Exported by libdat2.so.2 (for providers), declared by no header. */
DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *ia_handle_p);

static const char *const conf =
        "fake u2.0 threadsafe default " FAKE_PROVIDER_PATH " fake.2.0 \"instance 1\" \"\"\n"
        "fake-silent u2.0 threadsafe nondefault " FAKE_PROVIDER_PATH " fake.2.0 \"no-register\" \"\"\n"
        "fake-missing u2.0 threadsafe nondefault /nonexistent/libnothing.so.2 fake.2.0 \"\" \"\"\n"
        "fake-noinit u2.0 threadsafe nondefault libm.so.6 fake.2.0 \"\" \"\"\n"
        "fake-nodev u2.0 threadsafe nondefault " FAKE_PROVIDER_PATH " fake.2.0 \"" FAKE_PROVIDER_NO_DEVICE "\" \"\"\n"
        "ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"ib0 0\" \"\"\n"
        "datd-shm u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm\" \"\"\n";

static void setup(void)
{
        use_dat_conf(conf);
        /* No datd listens here: only other providers' IAs open. */
        setenv("DATD_SOCKET", "/nonexistent/datd.sock", 1);
}

TestSuite(providers, .init = setup, .timeout = 60);

/* What the provider library saw: the one libdat loaded (RTLD_NOLOAD), or
 * loaded here for a test that registers it by hand. */
static struct fake_provider_log *provider_log(bool load)
{
        void *lib = dlopen(FAKE_PROVIDER_PATH, RTLD_NOW | (load ? 0 : RTLD_NOLOAD));
        struct fake_provider_log *log;

        cr_assert_not_null(lib, "%s is not loaded: %s", FAKE_PROVIDER_PATH, dlerror());
        log = dlsym(lib, "fake_provider_log");
        cr_assert_not_null(log);
        return log;
}

/* The provider's own DAT_PROVIDER, as its objects name it. */
static const DAT_PROVIDER *provider_table(void)
{
        void *lib = dlopen(FAKE_PROVIDER_PATH, RTLD_NOW | RTLD_NOLOAD);
        const DAT_PROVIDER *(*table)(void);

        cr_assert_not_null(lib);
        *(void **)&table = dlsym(lib, "fake_provider_table");
        cr_assert_not_null(table);
        return table();
}

static const DAT_PROVIDER *provider_of(DAT_HANDLE h)
{
        return *(const DAT_PROVIDER *const *)h;
}

static DAT_IA_HANDLE open_fake(DAT_EVD_HANDLE *async_evd)
{
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;

        *async_evd = DAT_HANDLE_NULL;
        cr_assert_eq(dat_ia_open("fake", 16, async_evd, &ia), DAT_SUCCESS);
        return ia;
}

static DAT_IA_HANDLE provider_ia(DAT_IA_HANDLE ia)
{
        DAT_IA_HANDLE p = DAT_HANDLE_NULL;

        cr_assert_eq(dats_get_ia_handle(ia, &p), DAT_SUCCESS);
        return p;
}

Test(providers, a_dat_conf_entry_of_another_library_is_loaded_and_opened_through_it)
{
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd), pia;
        struct fake_provider_log *log = provider_log(false);

        /* dat_provider_init(3DAT): the entry's name, version, thread safety
         * and instance data (its ia_params). */
        cr_expect_eq(log->inits, 1);
        cr_expect_str_eq(log->init_info.ia_name, "fake");
        cr_expect_eq(log->init_info.dapl_version_major, 2);
        cr_expect_eq(log->init_info.dapl_version_minor, 0);
        cr_expect_eq(log->init_info.is_thread_safe, DAT_TRUE);
        cr_expect_str_eq(log->instance_data, "instance 1");
        cr_expect_eq(log->register_result, DAT_SUCCESS);
        cr_expect_str_eq(log->opened_name, "fake");
        cr_expect_eq(log->async_qlen, 16);
        /* The consumer's IA handle is libdat's, mapped to the provider's;
         * the async EVD the provider made is the provider's own. */
        pia = provider_ia(ia);
        cr_expect_neq(pia, ia);
        cr_expect_eq(provider_of(pia), provider_table());
        cr_assert_not_null(evd);
        cr_expect_eq(provider_of(evd), provider_table());
        /* A second open of the name does not initialize the library again. */
        {
                DAT_EVD_HANDLE evd2;
                DAT_IA_HANDLE ia2 = open_fake(&evd2);

                cr_expect_eq(log->inits, 1);
                cr_expect_neq(provider_ia(ia2), pia);
                cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        }
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(providers, calls_on_its_objects_reach_it_with_its_own_handles)
{
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd), pia = provider_ia(ia);
        struct fake_provider_log *log = provider_log(false);
        DAT_LMR_TRIPLET iov = { .lmr_context = 7, .virtual_address = 0x1000, .segment_length = 64 };
        DAT_DTO_COOKIE cookie = { .as_64 = 0xc00c1e };
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL, pz2 = DAT_HANDLE_NULL;
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        DAT_RMR_TRIPLET rmr = { .rmr_context = 9, .virtual_address = 0x2000, .segment_length = 64 };
        DAT_PZ_PARAM param;
        DAT_EVENT event;
        DAT_COUNT nmore;
        int live;

        cr_assert_eq(dat_pz_create(ia, &pz), DAT_SUCCESS);
        cr_expect_str_eq(log->last_call, "pz_create");
        cr_expect_eq(log->last_handle, pia, "the provider got libdat's IA handle");
        cr_expect_eq(provider_of(pz), provider_table());
        cr_assert_eq(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), DAT_SUCCESS);
        cr_expect_str_eq(log->last_call, "pz_query");
        cr_expect_eq(log->last_handle, pz);
        /* The provider's own IA handle, as its queries give it, works too. */
        cr_expect_eq(param.ia_handle, pia);
        cr_assert_eq(dat_pz_create(param.ia_handle, &pz2), DAT_SUCCESS);
        cr_expect_eq(log->last_handle, pia);

        cr_assert_eq(dat_ep_create(ia, pz, evd, evd, evd, NULL, &ep), DAT_SUCCESS);
        cr_expect_str_eq(log->last_call, "ep_create");
        cr_assert_eq(dat_ep_post_send(ep, 1, &iov, cookie, DAT_COMPLETION_SUPPRESS_FLAG),
                     DAT_SUCCESS);
        cr_expect_str_eq(log->last_call, "ep_post_send");
        cr_expect_eq(log->last_handle, ep);
        cr_expect_eq(log->segments, 1);
        cr_expect_eq(log->iov, &iov);
        cr_expect_eq(log->cookie, 0xc00c1e);
        cr_expect_eq(log->completion_flags, DAT_COMPLETION_SUPPRESS_FLAG);

        /* The data path's entry points look at other providers only once
         * libdat's own lookup failed: each still reaches the provider. */
        cookie.as_64 = 0xbeef;
        cr_assert_eq(dat_ep_post_recv(ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG),
                     DAT_SUCCESS);
        cr_expect_str_eq(log->last_call, "ep_post_recv");
        cr_expect_eq(log->cookie, 0xbeef);
        cr_assert_eq(dat_ep_post_rdma_write(ep, 1, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG),
                     DAT_SUCCESS);
        cr_expect_str_eq(log->last_call, "ep_post_rdma_write");
        cr_expect_eq(log->remote, &rmr);
        cr_assert_eq(dat_ep_post_rdma_read(ep, 1, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG),
                     DAT_SUCCESS);
        cr_expect_str_eq(log->last_call, "ep_post_rdma_read");
        cr_expect_eq(log->last_handle, ep);
        cr_expect_eq(dat_evd_wait(evd, 5, 1, &event, &nmore), DAT_TIMEOUT_EXPIRED);
        cr_expect_str_eq(log->last_call, "evd_wait");
        cr_expect_eq(log->last_handle, evd);
        cr_expect_eq(log->wait_timeout, 5);

        live = log->live_objects;
        cr_expect_eq(dat_ep_free(ep), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz2), DAT_SUCCESS);
        cr_expect_eq(log->live_objects, live - 3);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(providers, what_the_provider_leaves_out_is_not_implemented)
{
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd);
        DAT_SRQ_ATTR attr = { .max_recv_dtos = 4, .max_recv_iov = 1 };
        DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
        DAT_EVENT event;

        cr_assert_eq(dat_pz_create(ia, &pz), DAT_SUCCESS);
        cr_expect_eq(DAT_GET_TYPE(dat_srq_create(ia, pz, &attr, &srq)), DAT_NOT_IMPLEMENTED);
        cr_expect_eq(DAT_GET_TYPE(dat_evd_dequeue(evd, &event)), DAT_NOT_IMPLEMENTED);
        cr_expect_eq(DAT_GET_TYPE(dat_lmr_free(pz)), DAT_NOT_IMPLEMENTED);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(providers, the_generic_calls_reach_it_for_its_ia_and_its_objects)
{
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd), pia = provider_ia(ia);
        struct fake_provider_log *log = provider_log(false);
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
        DAT_HANDLE_TYPE type;
        DAT_CONTEXT context = { .as_64 = 0 };
        DAT_IA_ATTR attr;

        cr_assert_eq(dat_pz_create(ia, &pz), DAT_SUCCESS);
        cr_expect_eq(dat_get_handle_type(ia, &type), DAT_SUCCESS);
        cr_expect_eq(type, DAT_HANDLE_TYPE_IA);
        cr_expect_eq(log->last_handle, pia);
        cr_expect_eq(dat_get_handle_type(pz, &type), DAT_SUCCESS);
        cr_expect_eq(type, DAT_HANDLE_TYPE_PZ);
        cr_expect_eq(dat_set_consumer_context(ia, (DAT_CONTEXT){ .as_64 = 11 }), DAT_SUCCESS);
        cr_expect_eq(dat_set_consumer_context(pz, (DAT_CONTEXT){ .as_64 = 12 }), DAT_SUCCESS);
        cr_expect_eq(dat_get_consumer_context(ia, &context), DAT_SUCCESS);
        cr_expect_eq(context.as_64, 11);
        cr_expect_eq(dat_get_consumer_context(pz, &context), DAT_SUCCESS);
        cr_expect_eq(context.as_64, 12);
        cr_expect_eq(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADAPTER_NAME, &attr, 0, NULL),
                     DAT_SUCCESS);
        cr_expect_str_eq(attr.adapter_name, "fake adapter");
        cr_expect_eq(log->last_handle, pia);
        /* dat_extension_op's variable arguments go on as a va_list. */
        cr_expect_eq(dat_extension_op(pz, (DAT_EXTENDED_OP)42, 7), DAT_SUCCESS);
        cr_expect_str_eq(log->last_call, "handle_extendedop");
        cr_expect_eq(log->ext_op, 42);
        cr_expect_eq(log->ext_arg, 7);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(providers, a_handle_no_provider_owns_is_still_invalid)
{
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd);
        struct fake_provider_log *log = provider_log(false);
        /* An object of nobody's: its first word names no provider. */
        static const void *junk[4] = { "not a provider" };
        DAT_PZ_PARAM param;
        DAT_IA_ATTR attr;
        unsigned calls;

        calls = log->calls;
        cr_expect_eq(dat_pz_query((DAT_PZ_HANDLE)junk, DAT_PZ_FIELD_ALL, &param),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        cr_expect_eq(dat_pz_query(DAT_HANDLE_NULL, DAT_PZ_FIELD_ALL, &param),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        cr_expect_eq(dat_ia_query((DAT_IA_HANDLE)junk, NULL, DAT_IA_FIELD_IA_ADAPTER_NAME, &attr,
                                  0, NULL),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(log->calls, calls, "a call reached the provider");
        /* A closed IA's libdat handle is stale. */
        cr_assert_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        cr_expect_str_eq(log->last_call, "ia_close");
        cr_expect_eq(log->close_flags, DAT_CLOSE_GRACEFUL_FLAG);
        calls = log->calls;
        cr_expect_eq(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADAPTER_NAME, &attr, 0, NULL),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(log->calls, calls, "a call on the closed IA reached the provider");
}

Test(providers, a_value_that_cannot_be_an_object_is_never_read)
{
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd);
        static const void *junk[4] = { "not a provider" };
        DAT_IA_HANDLE mapped;
        DAT_EVENT event;

        /* With a provider registered, what is not libdat's is read as a
         * provider's object, unless it cannot be an address: none of these
         * faults. */
        cr_expect_eq(dat_evd_dequeue(DAT_EVD_ASYNC_EXISTS, &event),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
        cr_expect_eq(dat_evd_dequeue(DAT_EVD_OUT_OF_SCOPE, &event),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
        cr_expect_eq(dat_evd_dequeue((DAT_EVD_HANDLE)0x1234, &event),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
        cr_expect_eq(dat_ia_close((DAT_IA_HANDLE)0x10, DAT_CLOSE_ABRUPT_FLAG),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(dats_get_ia_handle((DAT_IA_HANDLE)0x1, &mapped),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        /* Off a pointer's alignment. */
        cr_expect_eq(dat_evd_dequeue((DAT_EVD_HANDLE)((char *)junk + 1), &event),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

struct opener {
        pthread_barrier_t *go;
        DAT_IA_HANDLE ia;
        DAT_RETURN ret;
};

static void *open_at_once(void *arg)
{
        struct opener *o = arg;
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

        pthread_barrier_wait(o->go);
        o->ret = dat_ia_open("fake", 8, &evd, &o->ia);
        return NULL;
}

Test(providers, first_opens_at_once_initialize_the_library_once)
{
        enum { N = 8 };
        struct opener o[N];
        pthread_barrier_t go;
        pthread_t t[N];

        pthread_barrier_init(&go, NULL, N);
        for (int i = 0; i < N; i++) {
                o[i] = (struct opener){ .go = &go };
                cr_assert_eq(pthread_create(&t[i], NULL, open_at_once, &o[i]), 0);
        }
        for (int i = 0; i < N; i++)
                pthread_join(t[i], NULL);
        /* A second init would fail to register, and DAPL's providers then
         * free the provider the first one registered. */
        cr_expect_eq(provider_log(false)->inits, 1);
        for (int i = 0; i < N; i++) {
                cr_expect_eq(o[i].ret, DAT_SUCCESS, "open %d: 0x%08x", i, o[i].ret);
                cr_expect_eq(dat_ia_close(o[i].ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        }
        pthread_barrier_destroy(&go);
}

Test(providers, its_ia_closes_by_the_handle_it_gave_itself_too)
{
        DAT_PROVIDER_INFO info = { .ia_name = "fake", .dapl_version_major = 2 };
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd), pia = provider_ia(ia);
        DAT_IA_ATTR attr;

        cr_expect_eq(dat_ia_close(pia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(provider_log(false)->last_handle, pia);
        /* libdat's handle of it went with it, and so did its open count. */
        cr_expect_eq(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADAPTER_NAME, &attr, 0, NULL),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(dat_registry_remove_provider(provider_table(), &info), DAT_SUCCESS);
}

Test(providers, a_close_it_refuses_leaves_the_ia_open)
{
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd);
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
        DAT_IA_ATTR attr;

        cr_assert_eq(dat_pz_create(ia, &pz), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE);
        cr_expect_eq(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADAPTER_NAME, &attr, 0, NULL),
                     DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        cr_expect_eq(provider_log(false)->live_objects, 0);
}

Test(providers, the_ib_query_open_and_close_of_its_ia_go_through_libdat)
{
        DAT_PROVIDER_INFO info = { .ia_name = "fake", .dapl_version_major = 2 };
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_IA_ATTR attr;

        cr_assert_eq(dat_ib_open_query("fake", &ia, DAT_IA_FIELD_IA_ADAPTER_NAME, &attr, 0, NULL),
                     DAT_SUCCESS);
        cr_expect_str_eq(attr.adapter_name, "fake adapter");
        cr_expect_eq(dat_registry_remove_provider(provider_table(), &info),
                     ERR(DAT_PROVIDER_IN_USE, 0));
        cr_expect_eq(dat_ib_close_query(ia), DAT_SUCCESS);
        cr_expect_str_eq(provider_log(false)->last_call, "ia_close");
        cr_expect_eq(dat_registry_remove_provider(provider_table(), &info), DAT_SUCCESS);
        cr_expect_eq(provider_log(false)->live_objects, 0);
}

struct closer {
        DAT_IA_HANDLE ia;
        DAT_RETURN ret;
};

static void *close_ia(void *arg)
{
        struct closer *c = arg;

        c->ret = dat_ia_close(c->ia, DAT_CLOSE_ABRUPT_FLAG);
        return NULL;
}

Test(providers, an_ia_being_closed_is_nobodys_to_call)
{
        void *lib = dlopen(FAKE_PROVIDER_PATH, RTLD_NOW);
        void (*hold)(bool);
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd), pia = provider_ia(ia), mapped;
        struct fake_provider_log *log = provider_log(false);
        struct closer c = { .ia = ia };
        DAT_HANDLE_TYPE type;
        DAT_IA_ATTR attr;
        unsigned closes;
        pthread_t t;

        *(void **)&hold = dlsym(lib, "fake_provider_hold_close");
        cr_assert_not_null(hold);
        hold(true);
        cr_assert_eq(pthread_create(&t, NULL, close_ia, &c), 0);
        while (!__atomic_load_n(&log->closes_held, __ATOMIC_ACQUIRE))
                usleep(1000);
        closes = log->closes;
        /* The close is at the provider: by either handle, the IA is gone. */
        cr_expect_eq(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADAPTER_NAME, &attr, 0, NULL),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(dat_ia_query(pia, NULL, DAT_IA_FIELD_IA_ADAPTER_NAME, &attr, 0, NULL),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(dat_ia_close(pia, DAT_CLOSE_ABRUPT_FLAG),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(DAT_GET_TYPE(dat_get_handle_type(ia, &type)), DAT_INVALID_HANDLE);
        cr_expect_eq(dats_get_ia_handle(ia, &mapped), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(log->closes, closes, "the provider got a second close");
        hold(false);
        pthread_join(t, NULL);
        cr_expect_eq(c.ret, DAT_SUCCESS);
}

Test(providers, only_its_ias_are_closed_or_mapped_as_ias)
{
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd), mapped;
        struct fake_provider_log *log = provider_log(false);
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
        unsigned closes;

        cr_assert_eq(dat_pz_create(ia, &pz), DAT_SUCCESS);
        closes = log->closes;
        cr_expect_eq(dats_get_ia_handle(pz, &mapped), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(dat_ia_close(pz, DAT_CLOSE_ABRUPT_FLAG),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(log->closes, closes, "a PZ went to the provider's ia_close");
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(providers, its_own_not_found_is_its_answer)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;

        /* DAPL's providers answer so without their device: the name is
         * still theirs, and no other open of it is tried. */
        cr_expect_eq(dat_ia_open("fake-nodev", 8, &evd, &ia),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED));
        cr_expect_eq(provider_log(false)->opens, 1);
        cr_expect_eq(dat_ia_open("fake-nodev", 8, &evd, &ia),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED));
        cr_expect_eq(provider_log(false)->opens, 2);
        cr_expect_eq(provider_log(false)->inits, 1);
}

Test(providers, an_async_evd_that_is_no_object_is_refused_unread)
{
        /* Aligned, in the user half, and unmapped: libdat reads it safely
         * before any provider gets it. */
        DAT_EVD_HANDLE evd = (DAT_EVD_HANDLE)(uintptr_t)0x7e0000000000ull;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;

        cr_expect_eq(dat_ia_open("fake", 8, &evd, &ia),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC));
        cr_expect_eq(ia, DAT_HANDLE_NULL);
        cr_expect_eq(provider_log(false)->opens, 0);
}

Test(providers, a_provider_with_open_ias_is_in_use_and_its_name_comes_back_after)
{
        DAT_PROVIDER_INFO info = { .ia_name = "fake", .dapl_version_major = 2 };
        struct fake_provider_log *log;
        DAT_EVD_HANDLE evd;
        DAT_IA_HANDLE ia = open_fake(&evd);

        log = provider_log(false);
        cr_expect_eq(dat_registry_remove_provider(provider_table(), &info),
                     ERR(DAT_PROVIDER_IN_USE, 0));
        cr_assert_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(dat_registry_remove_provider(provider_table(), &info), DAT_SUCCESS);
        cr_expect_eq(dat_registry_remove_provider(provider_table(), &info),
                     ERR(DAT_INVALID_PARAMETER, 0));
        /* The next open finds the name unregistered: the library, still
         * loaded, is initialized again and registers it again. */
        ia = open_fake(&evd);
        cr_expect_eq(log->inits, 2);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

static DAT_RETURN open_traced(const char *name, char **trace)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_RETURN r;

        trace_capture_begin();
        r = dat_ia_open((DAT_NAME_PTR)name, 8, &evd, &ia);
        *trace = trace_capture_end();
        cr_expect_eq(ia, DAT_HANDLE_NULL);
        return r;
}

Test(providers, a_library_that_does_not_serve_the_name_leaves_it_not_found)
{
        char *trace;

        cr_expect_eq(open_traced("fake-missing", &trace),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED));
        cr_expect_not_null(strstr(trace, "cannot load provider library /nonexistent/libnothing.so.2"),
                           "trace: %s", trace);
        free(trace);
        cr_expect_eq(open_traced("fake-noinit", &trace),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED));
        cr_expect_not_null(strstr(trace, "libm.so.6 has no dat_provider_init"), "trace: %s", trace);
        free(trace);
        /* Its init ran, and registered nothing. */
        cr_expect_eq(open_traced("fake-silent", &trace),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED));
        cr_expect_not_null(strstr(trace, "no provider registered \"fake-silent\""), "trace: %s",
                           trace);
        free(trace);
        cr_expect_eq(provider_log(false)->inits, 1);
        cr_expect_str_eq(provider_log(false)->instance_data, "no-register");
}

Test(providers, libdat_objects_are_not_handed_to_another_provider)
{
        /* A value with libdat's tag: no provider's object. */
        DAT_EVD_HANDLE evd = (DAT_EVD_HANDLE)(uintptr_t)0xda7a000000000001ull;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;

        DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        struct fake_provider_log *log;
        unsigned calls;

        cr_expect_eq(dat_ia_open("fake", 8, &evd, &ia),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC));
        cr_expect_eq(ia, DAT_HANDLE_NULL);
        log = provider_log(true);
        cr_expect_eq(log->live_objects, 0);
        /* In a call on the provider's objects, none of libdat's goes along. */
        ia = open_fake(&async_evd);
        cr_assert_eq(dat_pz_create(ia, &pz), DAT_SUCCESS);
        calls = log->calls;
        cr_expect_eq(dat_ep_create(ia, (DAT_PZ_HANDLE)evd, async_evd, async_evd, async_evd, NULL,
                                   &ep),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        cr_expect_eq(dat_ep_create(ia, pz, async_evd, evd, async_evd, NULL, &ep),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST));
        cr_expect_eq(log->calls, calls, "a call with libdat's handle reached the provider");
        cr_expect_eq(ep, DAT_HANDLE_NULL);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(providers, another_providers_object_is_not_handed_to_one)
{
        DAT_PROVIDER_INFO info = { .ia_name = "fake-2", .dapl_version_major = 2 };
        const DAT_PROVIDER *(*table2)(void);
        DAT_EVD_HANDLE evd1, evd2 = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia1 = open_fake(&evd1), ia2 = DAT_HANDLE_NULL;
        DAT_PZ_HANDLE pz1 = DAT_HANDLE_NULL, pz2 = DAT_HANDLE_NULL;
        DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
        DAT_LMR_CONTEXT lmr_context;
        DAT_RMR_CONTEXT rmr_context;
        DAT_VLEN reg_len;
        DAT_VADDR reg_addr;
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        struct fake_provider_log *log = provider_log(false);
        void *lib = dlopen(FAKE_PROVIDER_PATH, RTLD_NOW | RTLD_NOLOAD);
        unsigned calls;

        *(void **)&table2 = dlsym(lib, "fake_provider_table2");
        cr_assert_not_null(table2);
        cr_assert_eq(dat_registry_add_provider(table2(), &info), DAT_SUCCESS);
        cr_assert_eq(dat_ia_open("fake-2", 8, &evd2, &ia2), DAT_SUCCESS);
        cr_expect_eq(provider_of(provider_ia(ia2)), table2());
        cr_assert_eq(dat_pz_create(ia1, &pz1), DAT_SUCCESS);
        cr_assert_eq(dat_pz_create(ia2, &pz2), DAT_SUCCESS);
        calls = log->calls;
        cr_expect_eq(dat_ep_create(ia1, pz2, evd1, evd1, evd1, NULL, &ep),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        cr_expect_eq(dat_ep_create(ia1, pz1, evd1, evd2, evd1, NULL, &ep),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST));
        /* A handle inside the region of an LMR create counts too. */
        cr_expect_eq(dat_lmr_create(ia1, DAT_MEM_TYPE_LMR,
                                    (DAT_REGION_DESCRIPTION){ .for_lmr_handle = pz2 }, 64, pz1,
                                    DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lmr_context,
                                    &rmr_context, &reg_len, &reg_addr),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR));
        /* An EP modify hands the provider the handles its mask names. */
        cr_assert_eq(dat_ep_create(ia1, pz1, evd1, evd1, evd1, NULL, &ep), DAT_SUCCESS);
        calls = log->calls;
        {
                DAT_EP_PARAM param = { .pz_handle = pz2 };

                cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE, &param),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        }
        cr_expect_eq(dat_ep_free(ep), DAT_SUCCESS);
        ep = DAT_HANDLE_NULL;
        calls++;
        cr_expect_eq(log->calls, calls, "a call with another provider's object went through");
        cr_expect_eq(ep, DAT_HANDLE_NULL);
        /* The async EVD of an open is the provider's own, or none. */
        {
                DAT_EVD_HANDLE other = evd2;
                DAT_IA_HANDLE ia3 = DAT_HANDLE_NULL;

                cr_expect_eq(dat_ia_open("fake", 8, &other, &ia3),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC));
                cr_expect_eq(ia3, DAT_HANDLE_NULL);
        }
        cr_expect_eq(dat_pz_free(pz1), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz2), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia1, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

/* ---- registration by hand ------------------------------------------------ */

Test(providers, registration_checks_its_arguments_and_names_one_provider_each)
{
        const DAT_PROVIDER *p;
        DAT_PROVIDER other = { 0 };
        DAT_PROVIDER_INFO info = { .ia_name = "by-hand", .dapl_version_major = 2 };
        DAT_PROVIDER_INFO unnamed = { .dapl_version_major = 2 };
        DAT_PROVIDER_INFO unknown = { .ia_name = "no-such-name", .dapl_version_major = 2 };
        void *lib = dlopen(FAKE_PROVIDER_PATH, RTLD_NOW);
        const DAT_PROVIDER *(*table)(void);

        *(void **)&table = dlsym(lib, "fake_provider_table");
        p = table();
        cr_expect_eq(dat_registry_add_provider(NULL, &info), ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
        cr_expect_eq(dat_registry_add_provider(p, NULL), ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
        cr_expect_eq(dat_registry_add_provider(p, &unnamed), ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
        cr_expect_eq(dat_registry_add_provider(p, &info), DAT_SUCCESS);
        cr_expect_eq(dat_registry_add_provider(p, &info), ERR(DAT_PROVIDER_ALREADY_REGISTERED, 0));
        cr_expect_eq(dat_registry_add_provider(&other, &info),
                     ERR(DAT_PROVIDER_ALREADY_REGISTERED, 0));
        cr_expect_eq(dat_registry_remove_provider(NULL, &info), ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
        cr_expect_eq(dat_registry_remove_provider(p, NULL), ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
        cr_expect_eq(dat_registry_remove_provider(p, &unknown), ERR(DAT_INVALID_PARAMETER, 0));
        cr_expect_eq(dat_registry_remove_provider(&other, &info), ERR(DAT_INVALID_PARAMETER, 0));
        cr_expect_eq(dat_registry_remove_provider(p, &info), DAT_SUCCESS);
        cr_expect_eq(dat_registry_add_provider(p, &info), DAT_SUCCESS);
}

Test(providers, an_application_may_register_a_provider_itself)
{
        DAT_PROVIDER_INFO info = { .ia_name = "app-fake", .dapl_version_major = 2,
                                   .dapl_version_minor = 0, .is_thread_safe = DAT_FALSE };
        void *lib = dlopen(FAKE_PROVIDER_PATH, RTLD_NOW);
        DAT_PROVIDER_INIT_FUNC init;
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;

        cr_assert_not_null(lib);
        /* dat_provider_init(3DAT): an application that loads a provider
         * itself may call it as the registry would. */
        *(void **)&init = dlsym(lib, DAT_PROVIDER_INIT_FUNC_STR);
        cr_assert_not_null(init);
        init(&info, "by the application");
        cr_expect_eq(provider_log(false)->register_result, DAT_SUCCESS);
        /* Not in dat.conf: the registration is what opens it, by the rules
         * of dat.conf's entries. */
        cr_expect_eq(dat_ia_openv("app-fake", 8, &evd, &ia, 3, 0, DAT_FALSE),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_MAJOR_NOT_FOUND));
        cr_expect_eq(dat_ia_openv("app-fake", 8, &evd, &ia, 2, 1, DAT_FALSE),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_MINOR_NOT_FOUND));
        cr_expect_eq(dat_ia_openv("app-fake", 8, &evd, &ia, 2, 0, DAT_TRUE),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_THREAD_SAFETY_NOT_FOUND));
        cr_expect_eq(ia, DAT_HANDLE_NULL);
        cr_assert_eq(dat_ia_open("app-fake", 8, &evd, &ia), DAT_SUCCESS);
        cr_expect_str_eq(provider_log(false)->opened_name, "app-fake");
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        /* An IA it opened through the provider's own table is the
         * provider's to close. */
        evd = DAT_HANDLE_NULL;
        ia = DAT_HANDLE_NULL;
        cr_assert_eq(provider_table()->ia_open_func("app-fake", 8, &evd, &ia), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_str_eq(provider_log(false)->last_call, "ia_close");
        cr_expect_eq(provider_log(false)->last_handle, ia);
}

Test(providers, the_list_has_the_entries_of_other_libraries)
{
        DAT_PROVIDER_INFO info[8], *list[8];
        DAT_COUNT n = 0;

        for (int i = 0; i < 8; i++)
                list[i] = &info[i];
        cr_assert_eq(dat_registry_list_providers(8, &n, list), DAT_SUCCESS);
        cr_assert_eq(n, 7);
        cr_expect_str_eq(info[0].ia_name, "fake");
        cr_expect_str_eq(info[5].ia_name, "ofa-v2-ib0");
        cr_expect_eq(info[5].is_thread_safe, DAT_FALSE);
        cr_expect_str_eq(info[6].ia_name, "datd-shm");
}

/* ---- beside datd's IAs ------------------------------------------------------ */

static struct datd_instance datd;

static void start_datd(void)
{
        start_private_datd(&datd);
}

static void stop_datd(void)
{
        datd_stop(&datd);
}

TestSuite(beside_datd, .init = start_datd, .fini = stop_datd, .timeout = 60);

Test(beside_datd, an_ia_of_datd_and_one_of_another_provider_keep_their_objects_apart)
{
        DAT_PROVIDER_INFO info = { .ia_name = "app-fake", .dapl_version_major = 2 };
        void *lib = dlopen(FAKE_PROVIDER_PATH, RTLD_NOW);
        DAT_EVD_HANDLE evd1 = DAT_HANDLE_NULL, evd2 = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia1 = DAT_HANDLE_NULL, ia2 = DAT_HANDLE_NULL;
        DAT_PZ_HANDLE pz1 = DAT_HANDLE_NULL, pz2 = DAT_HANDLE_NULL;
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        struct fake_provider_log *log;
        DAT_PROVIDER_INIT_FUNC init;
        DAT_HANDLE_TYPE type;
        DAT_PZ_PARAM param;
        unsigned calls;

        cr_assert_not_null(lib);
        *(void **)&init = dlsym(lib, DAT_PROVIDER_INIT_FUNC_STR);
        init(&info, "");
        log = provider_log(false);
        cr_assert_eq(dat_ia_open("datd-shm", 8, &evd1, &ia1), DAT_SUCCESS, "log: %s",
                     datd.log_path);
        cr_assert_eq(dat_ia_open("app-fake", 8, &evd2, &ia2), DAT_SUCCESS);
        cr_assert_eq(dat_pz_create(ia1, &pz1), DAT_SUCCESS);
        calls = log->calls;
        cr_assert_eq(dat_pz_query(pz1, DAT_PZ_FIELD_ALL, &param), DAT_SUCCESS);
        cr_expect_eq(param.ia_handle, ia1);
        cr_expect_eq(dat_get_handle_type(ia1, &type), DAT_SUCCESS);
        cr_expect_eq(type, DAT_HANDLE_TYPE_IA);
        cr_expect_eq(log->calls, calls, "a call on datd's IA reached the other provider");
        cr_assert_eq(dat_pz_create(ia2, &pz2), DAT_SUCCESS);
        cr_expect_eq(log->calls, calls + 1);
        /* One provider's object in a call on the other's. */
        cr_expect_eq(DAT_GET_TYPE(dat_ep_create(ia1, pz2, evd1, evd1, evd1, NULL, &ep)),
                     DAT_INVALID_HANDLE);
        cr_expect_eq(dat_ep_create(ia2, pz1, evd2, evd2, evd2, NULL, &ep),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        cr_expect_eq(ep, DAT_HANDLE_NULL);
        cr_expect_eq(log->calls, calls + 1);
        cr_expect_eq(dat_pz_free(pz2), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz1), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia1, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        cr_expect_eq(log->live_objects, 0);
}

/* ---- Debian's own provider ------------------------------------------------ */

Test(providers, debians_libdaplofa_registers_through_this_libdat)
{
        void *lib = dlopen("libdaplofa.so.2", RTLD_NOW | RTLD_GLOBAL);
        char *trace;
        DAT_RETURN r;

        /* Its libdat2 symbols bind to ours: it is loadable once libdat2.so.2
         * is in the process, as in any consumer. */
        if (!lib)
                cr_skip_test("libdaplofa.so.2 (package libdapl2) is not installed: %s", dlerror());
        r = open_traced("ofa-v2-ib0", &trace);
        cr_expect_not_null(strstr(trace, "calling dat_provider_init of libdaplofa.so.2 with \"ib0 0\""),
                           "trace: %s", trace);
        cr_expect_not_null(strstr(trace, "dat_registry_add_provider(\"ofa-v2-ib0\"): 0x00000000"),
                           "trace: %s", trace);
        /* No RDMA device here: its ia_open answers, and it is its answer. */
        cr_expect_not_null(strstr(trace, "its provider's ia_open answered"), "trace: %s", trace);
        cr_expect_neq(r, ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED));
        free(trace);
}
