/* dat_cr_accept and dat_ep_connect return once the request is sent:
 * datd's answer (the connection's id, or a refusal) comes on the progress
 * thread before the connection's events.  What must still hold: the call
 * completes while datd is busy, a refusal reaches the EPs as events, a
 * disconnect or free before the answer waits for it (it needs the
 * connection's id), and a burst of them is bounded. */
#include "config.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "libdat/datd_conn.h"
#include "tests/conn/conn_test.h"

static struct side a, a2, p; /* active (two clients), passive */

static void open_sides(void)
{
        side_open(&a);
        side_open(&a2);
        side_open(&p);
}

static void setup(void)
{
        conn_datd_start();
        open_sides();
}

/* Each IA is its own client of datd: p may hold one connection. */
static void setup_one_connection_per_client(void)
{
        cr_assert_eq(datd_start(&conn_datd,
                                "{\"ias\": [{\"name\": \"shm\", \"transport\": \"shm\","
                                " \"address\": \"127.0.0.1\"},"
                                " {\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"127.0.0.1\"}],"
                                " \"verbs\": false,"
                                " \"limits\": {\"max_connections_per_client\": 1,"
                                " \"max_pending_connects_per_client\": 1}}"),
                     0, "datd did not start");
        datd_export_env(&conn_datd);
        open_sides();
}

static void teardown(void)
{
        side_close(&a);
        side_close(&a2);
        side_close(&p);
        conn_datd_stop();
}

TestSuite(accept, .init = setup, .fini = teardown, .timeout = CONN_TEST_TIMEOUT);
TestSuite(accept_refused, .init = setup_one_connection_per_client, .fini = teardown,
          .timeout = CONN_TEST_TIMEOUT);

/* A call run on a thread while datd is stopped. */
struct call {
        DAT_CR_HANDLE cr;
        DAT_EP_HANDLE ep;
        bool disconnect;                /* dat_ep_disconnect(ep) instead of accepting */
        const struct side *connect_to;  /* dat_ep_connect(ep) to it instead */
        DAT_CONN_QUAL qual;
        DAT_RETURN ret;
        bool done;
};

static void *run_call(void *arg)
{
        struct call *c = arg;

        if (c->connect_to)
                c->ret = dat_ep_connect(c->ep, (DAT_IA_ADDRESS_PTR)&c->connect_to->address, c->qual,
                                        DAT_TIMEOUT_INFINITE, 0, NULL, DAT_QOS_BEST_EFFORT,
                                        DAT_CONNECT_DEFAULT_FLAG);
        else if (c->disconnect)
                c->ret = dat_ep_disconnect(c->ep, DAT_CLOSE_ABRUPT_FLAG);
        else
                c->ret = dat_cr_accept(c->cr, c->ep, 0, NULL);
        __atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
        return NULL;
}

/* Whether c finishes within 2 s (no timing is asserted: a call that
 * waits for the stopped datd never finishes before SIGCONT). */
static bool finishes_while_stopped(struct call *c)
{
        struct timespec nap = { 0, 10 * 1000 * 1000 };

        for (int i = 0; i < 200; i++) {
                if (__atomic_load_n(&c->done, __ATOMIC_ACQUIRE))
                        return true;
                nanosleep(&nap, NULL);
        }
        return __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
}

/* Runs c on a thread while datd (stopped by the caller) stays stopped for
 * up to 2 s, then lets datd go on and waits for c: whether c finished
 * before. */
static bool finished_before_datd_went_on(struct call *c)
{
        pthread_t t;
        bool quick;

        cr_assert_eq(pthread_create(&t, NULL, run_call, c), 0);
        quick = finishes_while_stopped(c);
        cr_assert_eq(kill(conn_datd.pid, SIGCONT), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        return quick;
}

Test(accept, accept_returns_without_waiting_for_datd)
{
        DAT_EP_HANDLE aep = side_ep(&a), pep = side_ep(&p);
        DAT_CONN_QUAL q = fresh_qual();
        struct call c = { .ep = pep };

        side_psp(&p, q);
        c.cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        cr_assert_eq(kill(conn_datd.pid, SIGSTOP), 0);
        cr_expect(finished_before_datd_went_on(&c), "dat_cr_accept waited for the stopped datd");
        cr_assert_eq(c.ret, DAT_SUCCESS, "dat_cr_accept: 0x%08x", c.ret);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_CONNECTED);
}

/* The next connection event of side s, after an ESTABLISHED if one comes
 * first, is DISCONNECTED, and ep is Disconnected. */
static void expect_disconnected_maybe_after_established(const struct side *s, DAT_EP_HANDLE ep)
{
        DAT_EVENT ev = wait_event(s->conn_evd);

        if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
                ev = wait_event(s->conn_evd);
        cr_expect_eq(ev.event_number, DAT_CONNECTION_EVENT_DISCONNECTED, "event 0x%x",
                     ev.event_number);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_DISCONNECTED);
}

/* The disconnect needs the connection's id, which datd has not answered
 * yet: it waits for the answer, and then ends the connection at datd too
 * (the active side hears of it). */
Test(accept, disconnect_before_datd_answered_the_accept_ends_the_connection)
{
        DAT_EP_HANDLE aep = side_ep(&a), pep = side_ep(&p);
        DAT_CONN_QUAL q = fresh_qual();
        struct call c = { .ep = pep, .disconnect = true };
        DAT_CR_HANDLE cr;

        side_psp(&p, q);
        cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        cr_assert_eq(kill(conn_datd.pid, SIGSTOP), 0);
        cr_assert_eq(dat_cr_accept(cr, pep, 0, NULL), DAT_SUCCESS);
        cr_assert_eq(ep_state_of(pep), DAT_EP_STATE_COMPLETION_PENDING);
        cr_expect_not(finished_before_datd_went_on(&c),
                      "the disconnect did not wait for datd's answer");
        cr_assert_eq(c.ret, DAT_SUCCESS, "dat_ep_disconnect: 0x%08x", c.ret);
        /* Either side may see ESTABLISHED first (the connection was made
         * before the disconnect reached datd); both end Disconnected. */
        expect_disconnected_maybe_after_established(&p, pep);
        expect_disconnected_maybe_after_established(&a, aep);
        /* Nothing of the ended connection comes later to the passive EP. */
        cr_expect(evd_empty(p.conn_evd));
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_DISCONNECTED);
}

struct burst {
        DAT_CR_HANDLE cr[DATD_LATER_MAX + 8];
        DAT_EP_HANDLE ep[DATD_LATER_MAX + 8];
        int n;
        int accepted;                   /* dat_cr_accept calls returned */
        int failed;
};

static void *accept_burst(void *arg)
{
        struct burst *b = arg;

        for (int i = 0; i < b->n; i++) {
                if (dat_cr_accept(b->cr[i], b->ep[i], 0, NULL) != DAT_SUCCESS)
                        b->failed++;
                __atomic_add_fetch(&b->accepted, 1, __ATOMIC_RELEASE);
        }
        return NULL;
}

/* Accepts whose answers are due are bounded (DATD_LATER_MAX): a burst
 * must not let datd's queue of packets for the client outgrow its
 * max_pending_replies (datd then drops the client).  With datd stopped,
 * the accepts past the bound wait; all complete once it runs again. */
Test(accept, a_burst_of_accepts_is_held_back_at_the_bound)
{
        static struct burst b;
        DAT_EP_HANDLE aep[DATD_LATER_MAX + 8];
        DAT_CONN_QUAL q = fresh_qual();
        struct timespec nap = { 0, 20 * 1000 * 1000 };
        int early;
        pthread_t t;

        b = (struct burst){ .n = DATD_LATER_MAX + 8 };
        side_psp(&p, q);
        for (int i = 0; i < b.n; i++) {
                aep[i] = side_ep(&a);
                b.ep[i] = side_ep(&p);
                b.cr[i] = connect_and_get_cr(&a, aep[i], &p, q, NULL, 0);
        }
        cr_assert_eq(kill(conn_datd.pid, SIGSTOP), 0);
        cr_assert_eq(pthread_create(&t, NULL, accept_burst, &b), 0);
        for (int i = 0; i < 100; i++)
                nanosleep(&nap, NULL);
        early = __atomic_load_n(&b.accepted, __ATOMIC_ACQUIRE);
        cr_assert_eq(kill(conn_datd.pid, SIGCONT), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_expect_eq(early, DATD_LATER_MAX, "%d accepts returned while datd was stopped", early);
        cr_expect_eq(b.failed, 0);
        for (int i = 0; i < b.n; i++) {
                expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
                expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        }
}

/* datd refuses the accept (max_connections_per_client): the accepting EP
 * gets DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR and the active side,
 * whose request is gone, DAT_CONNECTION_EVENT_NON_PEER_REJECTED. */
Test(accept_refused, a_refused_accept_is_an_accept_completion_error_on_both_sides)
{
        DAT_EP_HANDLE aep, pep, aep2 = side_ep(&a2), pep2 = side_ep(&p);
        DAT_CONN_QUAL q = fresh_qual();
        DAT_CR_HANDLE cr;

        side_psp(&p, q);
        aep = side_ep(&a);
        pep = side_ep(&p);
        cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        cr_assert_eq(dat_cr_accept(cr, pep, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr = connect_and_get_cr(&a2, aep2, &p, q, NULL, 0);
        cr_assert_eq(dat_cr_accept(cr, pep2, 0, NULL), DAT_SUCCESS);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
        cr_expect_eq(ep_state_of(pep2), DAT_EP_STATE_DISCONNECTED);
        expect_event(a2.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
        cr_expect_eq(ep_state_of(aep2), DAT_EP_STATE_DISCONNECTED);
        /* The refused EP is usable again after a reset. */
        cr_expect_eq(dat_ep_reset(pep2), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(pep2), DAT_EP_STATE_UNCONNECTED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_CONNECTED);
}

Test(accept, connect_returns_without_waiting_for_datd)
{
        DAT_EP_HANDLE aep = side_ep(&a), pep = side_ep(&p);
        DAT_CONN_QUAL q = fresh_qual();
        struct call c = { .ep = aep, .connect_to = &p, .qual = q };
        DAT_EVENT ev;

        side_psp(&p, q);
        cr_assert_eq(kill(conn_datd.pid, SIGSTOP), 0);
        cr_expect(finished_before_datd_went_on(&c), "dat_ep_connect waited for the stopped datd");
        cr_assert_eq(c.ret, DAT_SUCCESS, "dat_ep_connect: 0x%08x", c.ret);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        ev = expect_event(p.cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        cr_assert_eq(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, pep, 0, NULL),
                     DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        /* The connection's id came with the answer: the disconnect reaches the peer. */
        cr_assert_eq(dat_ep_disconnect(aep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
}

/* datd refuses a connect (max_pending_connects_per_client 1, one pending):
 * the EP gets DAT_CONNECTION_EVENT_NON_PEER_REJECTED and goes Disconnected;
 * the pending one is untouched. */
Test(accept_refused, a_refused_connect_is_non_peer_rejected)
{
        DAT_EP_HANDLE first = side_ep(&a), second = side_ep(&a);
        DAT_CONN_QUAL q = fresh_qual();

        side_psp(&p, q);
        cr_assert_eq(dat_ep_connect(first, (DAT_IA_ADDRESS_PTR)&p.address, q, DAT_TIMEOUT_INFINITE,
                                    0, NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                     DAT_SUCCESS);
        expect_event(p.cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        cr_assert_eq(dat_ep_connect(second, (DAT_IA_ADDRESS_PTR)&p.address, q, DAT_TIMEOUT_INFINITE,
                                    0, NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                     DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
        cr_expect_eq(ep_state_of(second), DAT_EP_STATE_DISCONNECTED);
        cr_expect_eq(ep_state_of(first), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        cr_expect(evd_empty(p.cr_evd), "the refused connect reached the listener");
        cr_expect_eq(dat_ep_reset(second), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(second), DAT_EP_STATE_UNCONNECTED);
}
