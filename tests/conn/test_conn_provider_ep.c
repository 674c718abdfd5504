/* Provider-created EPs (DAT_PSP_PROVIDER_FLAG) against a real datd: the
 * request's EP is made by libdat, reported by dat_cr_query, registered
 * with datd, configured by the consumer with dat_ep_modify and accepted
 * with dat_cr_accept(cr, DAT_HANDLE_NULL, ...), or freed by dat_cr_reject. */
#include "config.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libdat/ep.h"
#include "libdat/evd_wait.h"
#include "tests/harness.h"
#include "tests/conn/conn_test.h"

static struct side a, p; /* active, passive */

static void setup(void)
{
        conn_datd_start();
        side_open(&a);
        side_open(&p);
}

static void teardown(void)
{
        side_close(&a);
        side_close(&p);
        conn_datd_stop();
}

TestSuite(provider_ep, .init = setup, .fini = teardown, .timeout = CONN_TEST_TIMEOUT);

static DAT_PSP_HANDLE provider_psp(const struct side *s, DAT_CONN_QUAL q)
{
        DAT_PSP_HANDLE psp;

        cr_assert_eq(dat_psp_create(s->ia, q, s->cr_evd, DAT_PSP_PROVIDER_FLAG, &psp), DAT_SUCCESS);
        return psp;
}

/* The EP dat_cr_query names for cr. */
static DAT_EP_HANDLE cr_ep(DAT_CR_HANDLE cr)
{
        DAT_CR_PARAM param;

        cr_assert_eq(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param), DAT_SUCCESS);
        return param.local_ep_handle;
}

/* dat_ep_modify(3DAT): the PZ and the connection EVD, in a state its table
 * allows for them (Tentative Connection Pending and its unconfigured twin). */
static void configure(const struct side *s, DAT_EP_HANDLE ep)
{
        DAT_EP_PARAM param = { .pz_handle = s->pz, .connect_evd_handle = s->conn_evd };

        cr_assert_eq(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE,
                                   &param), DAT_SUCCESS);
}

/* How many lines of `datctl ep list --json` contain needle: datd's view of
 * this host's EPs (the max_eps quota counts them). */
static int datd_ep_lines_with(const char *needle)
{
        char cmd[1200];
        char *datctl = build_path("daemon/datctl");
        FILE *f;
        int n = -1;

        cr_assert_not_null(datctl);
        snprintf(cmd, sizeof(cmd), "%s ep list --json 2>/dev/null | grep -cF '%s'", datctl, needle);
        free(datctl);
        f = popen(cmd, "r");
        if (!f)
                return -1;
        if (fscanf(f, "%d", &n) != 1)
                n = -1;
        pclose(f);
        return n;
}

/* How many EPs datd holds for this host: the passive side's are what
 * matters, the active side's stay constant. */
static int datd_ep_count(void)
{
        return datd_ep_lines_with("\"handle\"");
}

/* dat_psp_create(3DAT): DAT_PSP_PROVIDER "indicates that the Consumer wants
 * to get an Endpoint from the Provider"; dat_cr_query(3DAT) reports it as
 * local_ep_handle.  It has the provider's defaults and no PZ or EVDs yet:
 * DAT 2.0's DAT_EP_STATE_UNCONFIGURED_TENTATIVE. */
Test(provider_ep, request_comes_with_an_unconfigured_tentative_ep)
{
        DAT_EP_HANDLE aep = side_ep(&a), pep;
        DAT_CONN_QUAL q = fresh_qual();
        DAT_PSP_HANDLE psp = provider_psp(&p, q);
        DAT_CR_HANDLE cr = connect_and_get_cr(&a, aep, &p, q, "hi", 2);
        DAT_EP_PARAM param;

        pep = cr_ep(cr);
        cr_assert_neq(pep, DAT_HANDLE_NULL);
        cr_assert_eq(dat_ep_query(pep, DAT_EP_FIELD_ALL, &param), DAT_SUCCESS);
        cr_expect_eq(param.ep_state, DAT_EP_STATE_UNCONFIGURED_TENTATIVE);
        cr_expect_eq(param.ia_handle, p.ia);
        cr_expect_eq(param.pz_handle, DAT_HANDLE_NULL);
        cr_expect_eq(param.connect_evd_handle, DAT_HANDLE_NULL);
        cr_expect_eq(param.ep_attr.service_type, DAT_SERVICE_TYPE_RC);
        /* dat_ep_free(3DAT): not while Tentative Connection Pending. */
        cr_expect_eq(dat_ep_free(pep), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFTENTATIVE));
        cr_expect_eq(dat_cr_reject(cr, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED);
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
}

/* dat_ep_modify(3DAT) configures it: once it has a PZ and a connection
 * EVD it is Tentative Connection Pending; dat_cr_accept(3DAT) with
 * DAT_HANDLE_NULL ("If the local Endpoint is specified by the Connection
 * Request, the ep_handle shall be DAT_HANDLE_NULL") connects it: both
 * sides ESTABLISHED with the private data, both EPs Connected. */
Test(provider_ep, modify_then_accept_connects_both_sides)
{
        unsigned char out[64], back[64];
        DAT_EP_HANDLE aep = side_ep(&a), pep;
        DAT_CONN_QUAL q = fresh_qual();
        DAT_PSP_HANDLE psp = provider_psp(&p, q);
        DAT_CR_HANDLE cr;
        DAT_EVENT ev;

        fill_pattern(out, sizeof(out), 3);
        fill_pattern(back, sizeof(back), 77);
        cr = connect_and_get_cr(&a, aep, &p, q, out, 64);
        pep = cr_ep(cr);
        configure(&p, pep);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
        /* datd is told the state the consumer sees (datctl ep list). */
        cr_expect_eq(datd_ep_lines_with("\"TENTATIVE_CONNECTION_PENDING\""), 1);
        cr_expect_eq(datd_ep_lines_with("\"UNCONFIGURED_TENTATIVE\""), 0);
        cr_assert_eq(dat_cr_accept(cr, DAT_HANDLE_NULL, 64, back), DAT_SUCCESS);
        ev = expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_assert_eq(ev.event_data.connect_event_data.private_data_size, 64);
        cr_expect_eq(memcmp(ev.event_data.connect_event_data.private_data, back, 64), 0);
        ev = expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(ev.event_data.connect_event_data.ep_handle, pep);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_CONNECTED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_CONNECTED);
        /* The EP is the consumer's now. */
        cr_expect_eq(dat_ep_disconnect(pep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        cr_expect_eq(dat_ep_free(pep), DAT_SUCCESS);
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
}

/* dat_cr_accept(3DAT): DAT_INVALID_STATE for an EP in the wrong state; an
 * EP without a PZ and connection EVD cannot take a connection.  The
 * request stays: configured afterwards, the accept works. */
Test(provider_ep, accept_before_configuring_is_invalid_state)
{
        DAT_EP_HANDLE aep = side_ep(&a), pep;
        DAT_CONN_QUAL q = fresh_qual();
        DAT_PSP_HANDLE psp = provider_psp(&p, q);
        DAT_CR_HANDLE cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);

        pep = cr_ep(cr);
        cr_expect_eq(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, NULL),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFTENTATIVE));
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_UNCONFIGURED_TENTATIVE);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        /* Another EP than the request's: DAT_INVALID_PARAMETER. */
        cr_expect_eq(dat_cr_accept(cr, side_ep(&p), 0, NULL), ARG(2));
        configure(&p, pep);
        cr_assert_eq(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
}

/* dat_cr_reject(3DAT): the active side gets PEER_REJECTED; the
 * Provider-created EP, made for this request only, is destroyed (its handle
 * is dead, datd forgets it). */
Test(provider_ep, reject_frees_the_ep_and_the_peer_is_rejected)
{
        DAT_EP_HANDLE aep = side_ep(&a), pep;
        DAT_CONN_QUAL q = fresh_qual();
        DAT_PSP_HANDLE psp = provider_psp(&p, q);
        int before = datd_ep_count();
        DAT_CR_HANDLE cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        DAT_EP_PARAM param;

        pep = cr_ep(cr);
        cr_expect_eq(datd_ep_count(), before + 1, "the provider EP is registered with datd");
        configure(&p, pep); /* what it holds is given back too */
        cr_assert_eq(dat_cr_reject(cr, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
        cr_expect_eq(dat_ep_query(pep, DAT_EP_FIELD_ALL, &param),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        cr_expect_eq(datd_ep_count(), before);
        /* The PZ and EVD are not held any more. */
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
}

/* dat_psp_create_any(3DAT) takes the same flags. */
Test(provider_ep, psp_create_any_takes_the_provider_flag)
{
        DAT_EP_HANDLE aep = side_ep(&a);
        DAT_PSP_HANDLE psp;
        DAT_PSP_PARAM param;
        DAT_CONN_QUAL q;
        DAT_CR_HANDLE cr;

        cr_assert_eq(dat_psp_create_any(p.ia, &q, p.cr_evd, DAT_PSP_PROVIDER_FLAG, &psp), DAT_SUCCESS);
        cr_assert_eq(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &param), DAT_SUCCESS);
        cr_expect_eq(param.psp_flags, DAT_PSP_PROVIDER_FLAG);
        cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        cr_expect_neq(cr_ep(cr), DAT_HANDLE_NULL);
        cr_expect_eq(dat_cr_reject(cr, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED);
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
}

#define BURST 8

/* dat_psp_create(3DAT): the Provider creates "an implicit Endpoint for each
 * incoming Connection Request": a
 * burst of requests each gets its own, all accepted. */
Test(provider_ep, each_request_of_a_burst_gets_its_own_ep)
{
        DAT_EP_HANDLE aep[BURST], pep[BURST];
        DAT_CONN_QUAL q = fresh_qual();
        DAT_PSP_HANDLE psp = provider_psp(&p, q);

        for (int i = 0; i < BURST; i++) {
                aep[i] = side_ep(&a);
                cr_assert_eq(dat_ep_connect(aep[i], (DAT_IA_ADDRESS_PTR)&p.address, q,
                                            CONN_EVENT_WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
                                            DAT_CONNECT_DEFAULT_FLAG), DAT_SUCCESS);
        }
        for (int i = 0; i < BURST; i++) {
                DAT_EVENT ev = expect_event(p.cr_evd, DAT_CONNECTION_REQUEST_EVENT);
                DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;

                pep[i] = cr_ep(cr);
                cr_assert_neq(pep[i], DAT_HANDLE_NULL);
                for (int k = 0; k < i; k++)
                        cr_assert_neq(pep[i], pep[k]);
                configure(&p, pep[i]);
                cr_assert_eq(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, NULL), DAT_SUCCESS);
        }
        for (int i = 0; i < BURST; i++) {
                expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
                expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        }
        for (int i = 0; i < BURST; i++) {
                cr_expect_eq(ep_state_of(aep[i]), DAT_EP_STATE_CONNECTED);
                cr_expect_eq(ep_state_of(pep[i]), DAT_EP_STATE_CONNECTED);
        }
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
}

/* dat_ia_close(3DAT), abrupt: the IA's objects go with it, the
 * provider-created EPs and their requests too, including those still being
 * made; the active sides lose their requests (rejected or
 * broken, whichever datd saw first) and nothing is left in datd. */
Test(provider_ep, abrupt_ia_close_with_requests_in_flight)
{
        DAT_EP_HANDLE aep[BURST];
        DAT_CONN_QUAL q = fresh_qual();
        int before = datd_ep_count();
        struct side c;

        side_open(&c);
        (void)provider_psp(&c, q);
        for (int i = 0; i < BURST; i++) {
                aep[i] = side_ep(&a);
                cr_assert_eq(dat_ep_connect(aep[i], (DAT_IA_ADDRESS_PTR)&c.address, q,
                                            CONN_EVENT_WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
                                            DAT_CONNECT_DEFAULT_FLAG), DAT_SUCCESS);
        }
        /* Some requests have their EP, some are still being made. */
        expect_event(c.cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        cr_assert_eq(dat_ia_close(c.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        for (int i = 0; i < BURST; i++) {
                DAT_EVENT ev = wait_event(a.conn_evd);

                cr_expect(ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED, "event 0x%x",
                          ev.event_number);
        }
        for (int i = 0; i < BURST; i++)
                cr_expect_eq(ep_state_of(aep[i]), DAT_EP_STATE_DISCONNECTED);
        cr_expect_eq(datd_ep_count(), before + BURST, "only the active EPs are left");
}

/* A datd whose max_eps quota allows each client (each IA) two EPs. */
static const char quota_config[] =
        "{\n"
        "  \"log_level\": \"debug\",\n"
        "  \"ias\": [ {\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"} ],\n"
        "  \"verbs\": false,\n"
        "  \"limits\": { \"max_eps\": 2 }\n"
        "}\n";

static void quota_setup(void)
{
        char *bin = build_path("daemon/datd");
        bool built = bin && access(bin, X_OK) == 0;

        free(bin);
        if (!built)
                cr_skip_test("daemon/datd is not built in this tree");
        cr_assert_eq(datd_start(&conn_datd, quota_config), 0, "datd did not start");
        datd_export_env(&conn_datd);
        side_open(&a);
        side_open(&p);
}

TestSuite(provider_ep_quota, .init = quota_setup, .fini = teardown, .timeout = CONN_TEST_TIMEOUT);

/* dat_ep_create(3DAT): DAT_INSUFFICIENT_RESOURCES when the provider cannot
 * make an EP; the provider-created EP counts against datd's max_eps like
 * any other.  With the quota used up the request is refused: the active
 * side is rejected, the passive consumer never sees it, nothing is left in
 * datd.  Once an EP is freed the next request gets its EP. */
Test(provider_ep_quota, request_without_room_for_an_ep_is_refused)
{
        DAT_EP_HANDLE aep = side_ep(&a), pep1, pep2, extra;
        DAT_CONN_QUAL q = fresh_qual();
        DAT_PSP_HANDLE psp = provider_psp(&p, q);
        DAT_CR_HANDLE cr;
        DAT_EVENT ev;
        int before;

        pep1 = side_ep(&p);
        pep2 = side_ep(&p);
        cr_assert_eq(dat_ep_create(p.ia, p.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, p.conn_evd, NULL,
                                   &extra), ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
        before = datd_ep_count();
        cr_assert_eq(dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&p.address, q, CONN_EVENT_WAIT_US, 0,
                                    NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG), DAT_SUCCESS);
        ev = wait_event(a.conn_evd);
        /* The consumer never refused it: the provider could not make the EP. */
        cr_expect_eq(ev.event_number, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, "event 0x%x",
                     ev.event_number);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
        cr_expect(evd_empty(p.cr_evd), "the consumer saw a request it could not get an EP for");
        cr_expect_eq(datd_ep_count(), before);

        cr_assert_eq(dat_ep_free(pep2), DAT_SUCCESS);
        cr_assert_eq(dat_ep_reset(aep), DAT_SUCCESS);
        cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        cr_expect_neq(cr_ep(cr), DAT_HANDLE_NULL);
        cr_expect_eq(dat_cr_reject(cr, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED);
        cr_expect_eq(dat_ep_free(pep1), DAT_SUCCESS);
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
}

/* A thread in dat_psp_free or dat_rsp_free waits for the provider EPs in
 * flight (ep_provider_drain).  Cancelled there it used to die holding
 * their lock (a condition wait is a cancellation point, and no cleanup
 * handler let the lock go): the EP's end, and every later listener's
 * free, waited for good.  The drain is no cancellation point now: the
 * thread drains, and is cancelled at its next cancellation point. */
struct drainer {
        pid_t tid;
        bool drained;
};

static void *drain_main(void *arg)
{
        struct drainer *d = arg;

        __atomic_store_n(&d->tid, gettid(), __ATOMIC_RELEASE);
        ep_provider_drain();
        __atomic_store_n(&d->drained, true, __ATOMIC_RELEASE);
        pthread_testcancel();
        return NULL;
}

static void *provider_end_main(void *arg)
{
        (void)arg;
        ep_provider_end();
        return NULL;
}

/* Joins thread within 5 s; false when it is still running. */
static bool joined_within_5_s(pthread_t thread, void **result)
{
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        return pthread_timedjoin_np(thread, result, &until) == 0;
}

Test(provider_ep, a_thread_cancelled_while_it_drains_provider_eps_leaves_the_lock_free)
{
        struct drainer d = { 0 };
        pthread_t drainer, ender;
        void *result = NULL;
        char path[64];
        bool asleep = false;

        /* A provider EP in flight, as cr.c has one while it is made. */
        ep_provider_begin();
        cr_assert_eq(pthread_create(&drainer, NULL, drain_main, &d), 0);
        while (!__atomic_load_n(&d.tid, __ATOMIC_ACQUIRE))
                dat_nap();
        snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)d.tid);
        for (time_t end = time(NULL) + 5; !asleep && time(NULL) < end; dat_nap())
                asleep = proc_stat_state(path) == 'S';
        cr_assert(asleep, "the drain never waited");
        cr_assert_eq(pthread_cancel(drainer), 0);
        cr_assert_eq(pthread_create(&ender, NULL, provider_end_main, NULL), 0);
        cr_assert(joined_within_5_s(ender, NULL),
                  "ep_provider_end waited 5 s: the cancelled drain kept the lock");
        cr_assert(joined_within_5_s(drainer, &result), "the cancelled drain never ended");
        cr_expect(__atomic_load_n(&d.drained, __ATOMIC_ACQUIRE), "the drain did not finish first");
        cr_expect_eq(result, PTHREAD_CANCELED);
}
