/* Connections between two IAs on one host, through one real datd: each
 * IA is its own client of datd (its own control connection); the tests
 * that need two processes fork one. */
#include "config.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libdat/dto_engine.h"
#include "libdat/ep.h"
#include "libdat/evd.h"
#include "libdat/evd_wait.h"
#include "libdat/ia.h"
#include "tests/conn/conn_test.h"
#include "tests/evd/evd_waiter_peek.h"

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

TestSuite(same_host, .init = setup, .fini = teardown, .timeout = CONN_TEST_TIMEOUT);

/* dat_ep_connect(3DAT), dat_cr_query(3DAT), dat_cr_accept(3DAT): the
 * private data of the request reaches the passive side (dat_cr_query), the
 * accept's reaches the active side in DAT_CONNECTION_EVENT_ESTABLISHED;
 * both EPs end Connected. */
static void accept_with_private_data(DAT_COUNT n)
{
        unsigned char out[256], back[256];
        DAT_EP_HANDLE aep = side_ep(&a), pep = side_ep(&p);
        DAT_CONN_QUAL q = fresh_qual();
        DAT_PSP_HANDLE psp = side_psp(&p, q);
        DAT_CR_PARAM param;
        DAT_CR_HANDLE cr;
        DAT_EVENT ev;

        cr_assert_leq(n, (DAT_COUNT)sizeof(out));
        fill_pattern(out, (size_t)n, 1);
        fill_pattern(back, (size_t)n, 99);
        cr = connect_and_get_cr(&a, aep, &p, q, out, n);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        cr_assert_eq(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param), DAT_SUCCESS);
        cr_assert_eq(param.private_data_size, n);
        cr_expect_eq(memcmp(param.private_data, out, (size_t)n), 0);
        cr_expect_not_null(param.remote_ia_address_ptr);
        cr_expect_eq(param.local_ep_handle, DAT_HANDLE_NULL);
        cr_assert_eq(dat_cr_accept(cr, pep, n, back), DAT_SUCCESS);
        ev = expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(ev.event_data.connect_event_data.ep_handle, aep);
        cr_assert_eq(ev.event_data.connect_event_data.private_data_size, n);
        cr_expect_eq(memcmp(ev.event_data.connect_event_data.private_data, back, (size_t)n), 0);
        ev = expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(ev.event_data.connect_event_data.ep_handle, pep);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_CONNECTED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_CONNECTED);
        /* The CR is gone once accepted. */
        cr_expect_eq(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
}

Test(same_host, accept_carries_64_bytes_of_private_data_both_ways)
{
        accept_with_private_data(64);
}

Test(same_host, accept_carries_the_maximum_private_data_both_ways)
{
        accept_with_private_data(a.pattr.max_private_data_size);
}

/* dat_cr_reject(3DAT) / dat_ep_connect(3DAT): "The rejection of the
 * connection by the remote Consumer is reported ... through a
 * DAT_CONNECTION_EVENT_PEER_REJECTED event" and the EP goes Disconnected;
 * the reject's private data reaches the active side. */
Test(same_host, reject_is_peer_rejected_with_private_data)
{
        check_reject(&a, &p);
}

/* dat_ep_connect(3DAT): "remote Consumer is not listening on the requested
 * Connection Qualifier" -> DAT_CONNECTION_EVENT_NON_PEER_REJECTED, the EP
 * Disconnected. */
Test(same_host, no_listener_is_non_peer_rejected)
{
        check_no_listener(&a, &p);
}

/* dat_ep_connect(3DAT): "When the timeout expired prior to completion of
 * the Connection establishment, the local Endpoint is automatically
 * transitioned into a DAT_EP_STATE_DISCONNECTED state and ... a
 * DAT_CONNECTION_EVENT_TIMED_OUT event". */
Test(same_host, unanswered_request_times_out)
{
        check_timeout(&a, &p);
}

/* dat_psp_create(3DAT): a conn_qual already taken on the IA ->
 * DAT_CONN_QUAL_IN_USE, across processes of the host; it is free again
 * once its listener's process is gone. */
Test(same_host, conn_qual_in_use_across_processes)
{
        DAT_CONN_QUAL q = fresh_qual();
        DAT_PSP_HANDLE psp;
        DAT_RETURN r;
        int done;
        pid_t child = fork_listener("datd-shm", q, false, &done);

        cr_expect_eq(dat_psp_create(p.ia, q, p.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp),
                     ERR(DAT_CONN_QUAL_IN_USE, DAT_NO_SUBTYPE));
        kill_listener(child);
        /* datd learns of the death from the closed socket, in its own time:
         * ask until it has (bounded). */
        for (int i = 0; i < 500; i++) {
                r = dat_psp_create(p.ia, q, p.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp);
                if (r != ERR(DAT_CONN_QUAL_IN_USE, DAT_NO_SUBTYPE))
                        break;
                usleep(20000);
        }
        cr_expect_eq(r, DAT_SUCCESS, "0x%08x", r);
}

/* dat_psp_create_any(3DAT): the provider picks a free conn_qual and returns
 * it; dat_psp_query reports it; a connection to it arrives there. */
Test(same_host, psp_create_any_returns_a_reachable_conn_qual)
{
        DAT_CONN_QUAL q = 0;
        DAT_PSP_HANDLE psp;
        DAT_PSP_PARAM param;
        DAT_EP_HANDLE aep = side_ep(&a);
        DAT_CR_HANDLE cr;
        DAT_EVENT ev;

        cr_assert_eq(dat_psp_create_any(p.ia, &q, p.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp),
                     DAT_SUCCESS);
        cr_assert_eq(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &param), DAT_SUCCESS);
        cr_expect_eq(param.conn_qual, q);
        cr_expect_eq(param.ia_handle, p.ia);
        cr_expect_eq(param.evd_handle, p.cr_evd);
        cr_expect_eq(param.psp_flags, DAT_PSP_CONSUMER_FLAG);
        cr_assert_eq(dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&p.address, q, DAT_TIMEOUT_INFINITE,
                                    0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_SUCCESS);
        ev = expect_event(p.cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        cr_expect_eq(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp);
        cr = ev.event_data.cr_arrival_event_data.cr_handle;
        cr_expect_eq(dat_cr_reject(cr, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED);
}

/* dat_rsp_create(3DAT): the EP goes Reserved; a request moves it to
 * Passive Connection Pending; dat_cr_accept with DAT_HANDLE_NULL uses it
 * ("If the local Endpoint is specified by the Connection Request, the
 * ep_handle shall be DAT_HANDLE_NULL") and it ends Connected. */
Test(same_host, rsp_reserves_its_ep_and_accepts_on_it)
{
        DAT_EP_HANDLE aep = side_ep(&a), pep = side_ep(&p);
        DAT_CONN_QUAL q = fresh_qual();
        DAT_RSP_HANDLE rsp;
        DAT_RSP_PARAM rp;
        DAT_CR_PARAM cp;
        DAT_CR_HANDLE cr;

        cr_assert_eq(dat_rsp_create(p.ia, q, pep, p.cr_evd, &rsp), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_RESERVED);
        cr_assert_eq(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &rp), DAT_SUCCESS);
        cr_expect_eq(rp.ep_handle, pep);
        cr_expect_eq(rp.conn_qual, q);
        /* dat_ep_free(3DAT): not in the Reserved state. */
        cr_expect_eq(DAT_GET_TYPE(dat_ep_free(pep)), DAT_INVALID_STATE);
        cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
        cr_assert_eq(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS);
        cr_expect_eq(cp.local_ep_handle, pep);
        cr_assert_eq(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_CONNECTED);
        cr_expect_eq(dat_rsp_free(rsp), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_CONNECTED);
}

/* dat_rsp_free(3DAT): the EP still Reserved goes back to Unconnected. */
Test(same_host, rsp_free_gives_the_ep_back_unconnected)
{
        DAT_EP_HANDLE pep = side_ep(&p);
        DAT_RSP_HANDLE rsp;

        cr_assert_eq(dat_rsp_create(p.ia, fresh_qual(), pep, p.cr_evd, &rsp), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_RESERVED);
        cr_assert_eq(dat_rsp_free(rsp), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_UNCONNECTED);
        cr_expect_eq(dat_ep_free(pep), DAT_SUCCESS);
}

/* dat_cr_handoff(3DAT): the request moves to the listener of another
 * conn_qual of the same IA, where it arrives as a new request; the handed
 * off CR is gone. */
Test(same_host, handoff_moves_the_request_to_another_conn_qual)
{
        check_handoff(&a, &p);
}

/* dat_ep_dup_connect(3DAT): "The remote end of the requested connection
 * shall be the same as the remote end of the dup_ep_handle": the request
 * arrives at the listener the duplicated EP connected to; the EP goes
 * Active Connection Pending, then Connected on acceptance. */
Test(same_host, dup_connect_reaches_the_same_remote_end)
{
        check_dup_connect(&a, &p);
}

/* dat_ep_dup_connect(3DAT): the peer's reject is PEER_REJECTED and the EP
 * goes Disconnected, as for dat_ep_connect. */
Test(same_host, dup_connect_rejected_is_peer_rejected)
{
        DAT_EP_HANDLE aep, pep, aep2 = side_ep(&a);
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVENT ev;

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        cr_assert_eq(dat_ep_dup_connect(aep2, aep, DAT_TIMEOUT_INFINITE, 0, NULL,
                                        DAT_QOS_BEST_EFFORT), DAT_SUCCESS);
        ev = expect_event(p.cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        cr_assert_eq(dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL),
                     DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED);
        cr_expect_eq(ep_state_of(aep2), DAT_EP_STATE_DISCONNECTED);
}

/* dat_ep_disconnect(3DAT): graceful and abrupt both end with
 * DAT_CONNECTION_EVENT_DISCONNECTED and Disconnected EPs on both sides. */
static void disconnect_both_sides(DAT_CLOSE_FLAGS flags)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        cr_assert_eq(dat_ep_disconnect(aep, flags), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_DISCONNECTED);
        /* dat_ep_reset(3DAT): Disconnected -> Unconnected, ready again. */
        cr_expect_eq(dat_ep_reset(aep), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_UNCONNECTED);
}

Test(same_host, graceful_disconnect_is_disconnected_on_both_sides)
{
        disconnect_both_sides(DAT_CLOSE_GRACEFUL_FLAG);
}

Test(same_host, abrupt_disconnect_is_disconnected_on_both_sides)
{
        disconnect_both_sides(DAT_CLOSE_ABRUPT_FLAG);
}

/* dat_ep_free(3DAT): freeing a Connected EP disconnects it: the peer gets
 * DAT_CONNECTION_EVENT_DISCONNECTED (or BROKEN). */
Test(same_host, freeing_a_connected_ep_disconnects_the_peer)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVENT ev;

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        cr_assert_eq(dat_ep_free(aep), DAT_SUCCESS);
        ev = wait_event(p.conn_evd);
        cr_expect(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED ||
                  ev.event_number == DAT_CONNECTION_EVENT_BROKEN, "0x%x", ev.event_number);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_DISCONNECTED);
}

/* The issue: "a peer process that dies -> its peers get
 * DAT_CONNECTION_EVENT_BROKEN promptly"; the EP goes Disconnected. */
Test(same_host, peer_process_killed_is_broken)
{
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EP_HANDLE aep = side_ep(&a);
        int done;
        char c;
        pid_t child = fork_listener("datd-shm", q, true, &done);

        cr_assert_eq(dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&a.address, q, DAT_TIMEOUT_INFINITE,
                                    0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_assert_eq(read(done, &c, 1), 1);
        kill_listener(child);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
}

/* The issue: "listener dies mid-request": a request pending at a listener
 * whose process dies ends, for the active side, as a connection that was
 * not established (NON_PEER_REJECTED, or BROKEN) and the EP Disconnected. */
Test(same_host, listener_dies_mid_request)
{
        check_listener_dies_mid_request(&a, &p, "datd-shm");
}

/* dat_ia_close(3DAT) abrupt with listeners, requests and connections
 * live: everything goes, the peer sees its connection end. */
Test(same_host, abrupt_close_with_connections_ends_them)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVENT ev;

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        cr_assert_eq(dat_ia_close(a.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        a.ia = DAT_HANDLE_NULL;
        ev = wait_event(p.conn_evd);
        cr_expect(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED ||
                  ev.event_number == DAT_CONNECTION_EVENT_BROKEN, "0x%x", ev.event_number);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_DISCONNECTED);
}

/* DESIGN.md, progress thread: when datd goes away the IA's connections
 * are broken (DAT_CONNECTION_EVENT_BROKEN, EP Disconnected), the IA's
 * async EVD gets an asynchronous error naming the IA, later calls that
 * need datd fail, and dat_ia_close still closes. */
Test(same_host, datd_dying_breaks_connections_and_reports_async_error)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();
        DAT_PSP_HANDLE psp;
        DAT_EVENT ev;
        int status;

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        cr_assert_gt(conn_datd.pid, 0);
        kill(conn_datd.pid, SIGKILL);
        waitpid(conn_datd.pid, &status, 0);
        conn_datd.pid = 0;
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_DISCONNECTED);
        ev = wait_event(a.async_evd);
        cr_expect_eq(ev.event_number, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR);
        cr_expect_eq(ev.event_data.asynch_error_event_data.dat_handle, a.ia);
        cr_expect_eq(DAT_GET_TYPE(dat_psp_create(a.ia, q, a.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp)),
                     DAT_INTERNAL_ERROR);
        cr_expect_eq(dat_ia_close(a.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        a.ia = DAT_HANDLE_NULL;
}

/* `datctl --json ep list` lists every EP with its state. */
static unsigned listed_in_state(const char *state)
{
        char *datctl = build_path("daemon/datctl");
        char address[PATH_MAX + 32], want[64];
        char *argv[] = { datctl, address, "--json", "ep", "list", NULL };
        char *out = NULL;
        unsigned n = 0;
        int status;

        snprintf(address, sizeof(address), "--address=%s", conn_datd.bus_address);
        snprintf(want, sizeof(want), "\"state\": \"%s\"", state);
        status = run_capture(argv, &out, 10000);
        free(datctl);
        cr_assert_eq(status, 0, "datctl ep list: %s", out ? out : "");
        for (const char *at = out; (at = strstr(at, want)) != NULL; at += strlen(want))
                n++;
        free(out);
        return n;
}

/* A round trip on each IA's control connection: datd has read every
 * state change libdat sent before it. */
static void sync_with_datd(void)
{
        DAT_PZ_HANDLE pz;

        cr_assert_eq(dat_pz_create(a.ia, &pz), DAT_SUCCESS);
        cr_assert_eq(dat_pz_free(pz), DAT_SUCCESS);
        cr_assert_eq(dat_pz_create(p.ia, &pz), DAT_SUCCESS);
        cr_assert_eq(dat_pz_free(pz), DAT_SUCCESS);
}

/* The EP's state as datd shows it (datctl ep list) follows every change
 * the connection makes: Connected on both sides, then Disconnected. */
Test(same_host, datctl_ep_list_follows_connection_states)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        sync_with_datd();
        cr_expect_eq(listed_in_state("CONNECTED"), 2);
        cr_assert_eq(dat_ep_disconnect(pep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        sync_with_datd();
        cr_expect_eq(listed_in_state("DISCONNECTED"), 2);
        cr_expect_eq(listed_in_state("CONNECTED"), 0);
}

/* dat_ep_disconnect(3DAT): "requests a termination of a connection or
 * connection establishment": a pending connect ends with the EP
 * Disconnected and DAT_CONNECTION_EVENT_DISCONNECTED. */
Test(same_host, disconnect_aborts_a_pending_connect)
{
        DAT_EP_HANDLE aep = side_ep(&a);
        DAT_CONN_QUAL q = fresh_qual();

        side_psp(&p, q);
        connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        cr_assert_eq(dat_ep_disconnect(aep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
}

/* dat_cr_accept(3DAT): "If the provided local Endpoint does not satisfy
 * the requested Connection Request, the operation fails without any effect
 * on the local Endpoint, Pending Connection Request, private data": too
 * much private data, an EP that is not Unconnected, no EP for a PSP's
 * request -- each refused, and the request can still be accepted. */
Test(same_host, failed_accept_leaves_the_request_pending)
{
        static unsigned char pd[1024];
        DAT_EP_HANDLE aep = side_ep(&a), pep = side_ep(&p), busy = side_ep(&p);
        DAT_CONN_QUAL q = fresh_qual();
        DAT_CR_PARAM cp;
        DAT_CR_HANDLE cr;
        DAT_RETURN r;

        side_psp(&p, q);
        cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        cr_expect_eq(dat_cr_accept(cr, pep, p.pattr.max_private_data_size + 1, pd), ARG(3));
        cr_expect_eq(dat_cr_accept(cr, pep, 4, NULL), ARG(4));
        cr_expect_eq(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, NULL),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        cr_expect_eq(dat_cr_accept(cr, a.conn_evd, 0, NULL),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        /* An EP of the other IA is not a local EP of this request. */
        cr_expect_eq(dat_cr_accept(cr, aep, 0, NULL), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        cr_assert_eq(dat_ep_connect(busy, (DAT_IA_ADDRESS_PTR)&p.address, fresh_qual(),
                                    DAT_TIMEOUT_INFINITE, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
                     DAT_SUCCESS);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
        r = dat_cr_accept(cr, busy, 0, NULL);
        cr_expect_eq(r, ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED), "0x%08x", r);
        cr_expect_eq(dat_cr_reject(cr, p.pattr.max_private_data_size + 1, pd), ARG(2));
        cr_assert_eq(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_UNCONNECTED);
        cr_assert_eq(dat_cr_accept(cr, pep, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
}

/* dat_cr_accept(3DAT): "If the local Endpoint is specified by the
 * Connection Request, the ep_handle shall be DAT_HANDLE_NULL": another EP
 * for an RSP's request is an invalid parameter. */
Test(same_host, rsp_request_accepted_on_another_ep_is_invalid_parameter)
{
        DAT_EP_HANDLE aep = side_ep(&a), pep = side_ep(&p), other = side_ep(&p);
        DAT_CONN_QUAL q = fresh_qual();
        DAT_RSP_HANDLE rsp;
        DAT_CR_HANDLE cr;

        cr_assert_eq(dat_rsp_create(p.ia, q, pep, p.cr_evd, &rsp), DAT_SUCCESS);
        cr = connect_and_get_cr(&a, aep, &p, q, NULL, 0);
        cr_expect_eq(dat_cr_accept(cr, other, 0, NULL), ARG(2));
        cr_expect_eq(ep_state_of(other), DAT_EP_STATE_UNCONNECTED);
        /* dat_ep_free(3DAT): a rejected request "transitions the Endpoint
         * into the Unconnected state". */
        cr_assert_eq(dat_cr_reject(cr, 0, NULL), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_UNCONNECTED);
}

/* dat_ia_close(3DAT): a graceful close with a live listener is refused
 * (DAT_INVALID_STATE); dat_psp_free then lets it close. */
Test(same_host, graceful_ia_close_with_a_listener_is_invalid_state)
{
        DAT_PSP_HANDLE psp = side_psp(&p, fresh_qual());

        cr_expect_eq(DAT_GET_TYPE(dat_ia_close(p.ia, DAT_CLOSE_GRACEFUL_FLAG)), DAT_INVALID_STATE);
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
        cr_expect_eq(dat_psp_free(psp), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP));
}

/* dat_evd_dequeue on an EVD of connection events takes nothing from the
 * data paths: only the progress thread fills it.  Polling them for it cost
 * a consumer waiting for its connections a read of every TCP channel of the
 * IA per call, and counted as the application polling them, which keeps
 * the progress thread from watching them. */
Test(same_host, dequeue_on_a_connection_evd_leaves_the_data_paths_alone)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();
        struct ia *ia;
        uint64_t before;
        DAT_EVENT ev;

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        ia = ia_lookup(a.ia);
        cr_assert_not_null(ia);
        before = __atomic_load_n(&ia->dto.app_polls, __ATOMIC_RELAXED);
        for (int i = 0; i < 1000; i++)
                cr_assert_eq(dat_evd_dequeue(a.conn_evd, &ev), DAT_QUEUE_EMPTY);
        cr_expect_eq(__atomic_load_n(&ia->dto.app_polls, __ATOMIC_RELAXED), before,
                     "a connection EVD's dequeue polled the data paths");
        for (int i = 0; i < 1000; i++)
                (void)dat_evd_dequeue(a.dto_evd, &ev);
        cr_expect_gt(__atomic_load_n(&ia->dto.app_polls, __ATOMIC_RELAXED), before,
                     "a DTO EVD's dequeue polls them");
        cr_assert_eq(dat_ep_disconnect(aep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
}

/* With several TCP connections, an application's poll asks one epoll which
 * channels are readable (dto_ia.c, ask_readiness) instead of reading every
 * one: messages on each of them still arrive, whichever side polls. */
Test(same_host, polling_many_tcp_connections_moves_every_one)
{
        enum { CONNS = 8, LEN = 64 };
        static unsigned char buf[2 * CONNS][LEN];
        DAT_EP_HANDLE aep[CONNS], pep[CONNS];
        DAT_CONN_QUAL q = fresh_qual();
        DAT_LMR_HANDLE lmr[2];
        DAT_LMR_CONTEXT lctx[2];
        DAT_DTO_COOKIE cookie = { .as_64 = 0 };
        struct side ta, tp;
        unsigned sends = 0, recvs = 0;
        uint32_t seq_before;
        struct ia *ia;
        DAT_EVENT ev;

        side_open_ia(&ta, "datd-tcp");
        side_open_ia(&tp, "datd-tcp");
        side_psp(&tp, q);
        ia = ia_lookup(tp.ia);
        cr_assert_not_null(ia);
        for (int i = 0; i < CONNS; i++) {
                connect_pair(&ta, &tp, q, &aep[i], &pep[i]);
                /* Below four, no channel is in it: a socket in an epoll
                 * costs every packet a callback, asked or not. */
                if (i == 2)
                        cr_expect_eq(ia->dto.n_fd_polled, 0u, "three channels in the polls' epoll");
        }
        lmr[0] = side_lmr(&ta, buf, sizeof(buf), &lctx[0]);
        lmr[1] = side_lmr(&tp, buf, sizeof(buf), &lctx[1]);
        cr_expect_eq(ia->dto.n_fd_polled, (uint32_t)CONNS, "the channels are in the polls' epoll");
        seq_before = ia->dto.poll_seq;
        for (int i = 0; i < CONNS; i++) {
                DAT_LMR_TRIPLET r = { .lmr_context = lctx[1],
                                      .virtual_address = (DAT_VADDR)(uintptr_t)buf[CONNS + i],
                                      .segment_length = LEN };
                DAT_LMR_TRIPLET s = { .lmr_context = lctx[0],
                                      .virtual_address = (DAT_VADDR)(uintptr_t)buf[i],
                                      .segment_length = LEN };

                memset(buf[i], 'a' + i, LEN);
                cr_assert_eq(dat_ep_post_recv(pep[i], 1, &r, cookie, DAT_COMPLETION_DEFAULT_FLAG),
                             DAT_SUCCESS);
                cr_assert_eq(dat_ep_post_send(aep[i], 1, &s, cookie, DAT_COMPLETION_DEFAULT_FLAG),
                             DAT_SUCCESS);
        }
        /* Both sides only poll (bounded: 10 s). */
        for (time_t end = time(NULL) + 10; (sends < CONNS || recvs < CONNS) && time(NULL) < end;) {
                if (dat_evd_dequeue(tp.dto_evd, &ev) == DAT_SUCCESS) {
                        cr_assert_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
                        recvs++;
                }
                if (dat_evd_dequeue(ta.dto_evd, &ev) == DAT_SUCCESS) {
                        cr_assert_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
                        sends++;
                }
        }
        cr_expect_eq(recvs, CONNS);
        cr_expect_eq(sends, CONNS);
        for (int i = 0; i < CONNS; i++)
                cr_expect_eq(buf[CONNS + i][LEN - 1], 'a' + i, "connection %d's message", i);
        /* The progress thread may have delivered every completion before
         * a dequeue found its EVD empty: polls of an empty EVD ask. */
        for (time_t end = time(NULL) + 5; ia->dto.poll_seq == seq_before && time(NULL) < end;)
                (void)dat_evd_dequeue(tp.dto_evd, &ev);
        cr_expect_neq(ia->dto.poll_seq, seq_before, "the polls asked the epoll");
        for (int i = 0; i < CONNS; i++) {
                cr_assert_eq(dat_ep_disconnect(aep[i], DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
                expect_event(ta.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
                expect_event(tp.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
                cr_assert_eq(dat_ep_free(aep[i]), DAT_SUCCESS);
                cr_assert_eq(dat_ep_free(pep[i]), DAT_SUCCESS);
                if (i == CONNS - 4)
                        cr_expect_eq(ia->dto.n_fd_polled, 0u,
                                     "three channels left, still in the polls' epoll");
        }
        cr_expect_eq(ia->dto.n_fd_polled, 0u, "the channels left the polls' epoll");
        cr_assert_eq(dat_lmr_free(lmr[0]), DAT_SUCCESS);
        cr_assert_eq(dat_lmr_free(lmr[1]), DAT_SUCCESS);
        side_close(&ta);
        side_close(&tp);
}

/* The cross-memory attach probe of an EP's data path, read under its lock. */
struct probe_state {
        bool hello_sent, cma_answered, cma_from_peer, cma_to_peer, last_request_cma;
};

static struct probe_state probe_state_of(DAT_EP_HANDLE handle)
{
        struct ep *ep = ep_lookup(handle);
        struct probe_state st;
        struct dto_ep *d;

        cr_assert(ep != NULL && ep->dto != NULL);
        d = ep->dto;
        dat_lock(&d->lock);
        st = (struct probe_state){
                .hello_sent = d->hello_sent,
                .cma_answered = d->cma_answered,
                .cma_from_peer = d->cma_from_peer,
                .cma_to_peer = d->cma_to_peer,
                /* Entries stay in the ring after their completion. */
                .last_request_cma = d->tail != 0 && d->req[(d->tail - 1) % d->req_cap].cma,
        };
        dat_unlock(&d->lock);
        return st;
}

/* A Send of len bytes from buf[0] on aep into buf[1] on pep, both
 * completions awaited. */
static void send_between(DAT_EP_HANDLE aep, DAT_LMR_CONTEXT actx, DAT_EP_HANDLE pep,
                         DAT_LMR_CONTEXT pctx, unsigned char *const buf[2], size_t len)
{
        DAT_DTO_COOKIE cookie = { .as_64 = len };
        DAT_LMR_TRIPLET r = { .lmr_context = pctx,
                              .virtual_address = (DAT_VADDR)(uintptr_t)buf[1],
                              .segment_length = len };
        DAT_LMR_TRIPLET s = { .lmr_context = actx,
                              .virtual_address = (DAT_VADDR)(uintptr_t)buf[0],
                              .segment_length = len };
        DAT_EVENT ev;

        fill_pattern(buf[0], len, (unsigned char)len);
        memset(buf[1], 0, len);
        cr_assert_eq(dat_ep_post_recv(pep, 1, &r, cookie, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        cr_assert_eq(dat_ep_post_send(aep, 1, &s, cookie, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        ev = expect_event(p.dto_evd, DAT_DTO_COMPLETION_EVENT);
        cr_assert_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        ev = expect_event(a.dto_evd, DAT_DTO_COMPLETION_EVENT);
        cr_assert_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        cr_assert_eq(memcmp(buf[0], buf[1], len), 0, "the %zu-byte message arrived intact", len);
}

/* libdat/dto_wire.h: no probe of cross-memory attach until a payload could
 * use it; the first such payload waits for the probe's answer, so that it
 * goes by cross-memory attach like every one after it (the two sides are
 * one process here: the probe succeeds). */
Test(same_host, the_first_large_payload_waits_for_the_probe_and_goes_by_cma)
{
        enum { BIG = 64 * 1024 };
        static unsigned char mem[2][BIG];
        unsigned char *const buf[2] = { mem[0], mem[1] };
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();
        DAT_LMR_HANDLE lmr[2];
        DAT_LMR_CONTEXT lctx[2];
        struct probe_state sa, sp;

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        lmr[0] = side_lmr(&a, mem, sizeof(mem), &lctx[0]);
        lmr[1] = side_lmr(&p, mem, sizeof(mem), &lctx[1]);
        send_between(aep, lctx[0], pep, lctx[1], buf, 64);
        sa = probe_state_of(aep);
        sp = probe_state_of(pep);
        cr_expect(!sa.hello_sent && !sa.cma_answered && !sa.last_request_cma,
                  "a 64-byte Send made the probe");
        cr_expect(!sp.hello_sent && !sp.cma_to_peer, "the passive side probed or was probed");
        send_between(aep, lctx[0], pep, lctx[1], buf, BIG);
        sa = probe_state_of(aep);
        sp = probe_state_of(pep);
        cr_expect(sa.hello_sent && sa.cma_answered && sa.cma_from_peer,
                  "the active side's probe: sent %d, answered %d, allowed %d", sa.hello_sent,
                  sa.cma_answered, sa.cma_from_peer);
        cr_expect(sa.last_request_cma, "the first 64 KiB Send went inline");
        cr_expect(sp.cma_to_peer && !sp.hello_sent, "the passive side read the probe, sent none");
        cr_assert_eq(dat_ep_disconnect(aep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        cr_assert_eq(dat_ep_free(aep), DAT_SUCCESS);
        cr_assert_eq(dat_ep_free(pep), DAT_SUCCESS);
        cr_assert_eq(dat_lmr_free(lmr[0]), DAT_SUCCESS);
        cr_assert_eq(dat_lmr_free(lmr[1]), DAT_SUCCESS);
}

/* The rounds the IA's progress thread makes over the next 300 ms: a
 * handful when it sleeps, tens of thousands when it spins. */
static uint64_t progress_rounds_in_300_ms(struct ia *ia)
{
        struct timespec nap = { 0, 300 * 1000 * 1000 };
        uint64_t rounds = __atomic_load_n(&ia->dto.rounds, __ATOMIC_RELAXED);

        nanosleep(&nap, NULL);
        return __atomic_load_n(&ia->dto.rounds, __ATOMIC_RELAXED) - rounds;
}

/* After the peer's BYE (dto_wire.h) nothing more comes on the channel
 * until datd's event ends the connection: the progress thread sleeps
 * meanwhile.  It used to take the end of the peer's stream for work and
 * poll without sleeping until the event came, on the CPU datd needed to
 * send it.  Here the BYE goes without a disconnect (datd never hears of
 * it); it wakes nobody (an orderly end leaves that to datd's event), so
 * the passive side's application polls it in, and a kick gives the
 * progress thread the round datd's event would.  Over the 300 ms after,
 * the thread must make a handful of rounds (a spinning one makes tens of
 * thousands). */
Test(same_host, the_peer_bye_leaves_the_progress_thread_asleep)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();
        struct ep *a_ep, *p_ep;
        struct ia *ia = ia_lookup(p.ia);
        uint64_t rounds;
        bool bye = false;

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        a_ep = ep_lookup(aep);
        p_ep = ep_lookup(pep);
        cr_assert(a_ep && a_ep->dto && p_ep && p_ep->dto);
        dat_lock(&a_ep->dto->lock);
        dto_tx_bye(a_ep->dto);
        dat_unlock(&a_ep->dto->lock);
        for (time_t end = time(NULL) + 5; !bye && time(NULL) < end;) {
                DAT_EVENT ev;

                (void)dat_evd_dequeue(p.dto_evd, &ev);
                dat_lock(&p_ep->dto->lock);
                bye = p_ep->dto->peer_bye;
                dat_unlock(&p_ep->dto->lock);
                if (!bye)
                        dat_nap();
        }
        cr_assert(bye, "the passive side never read the BYE");
        cr_assert_not_null(ia);
        /* A round of the progress thread now, as datd's event would make
         * it: it must find nothing to do on the channel. */
        dto_ia_kick(ia);
        rounds = progress_rounds_in_300_ms(ia);
        cr_expect_lt(rounds, 50u, "the progress thread made %llu rounds waiting for datd's event",
                     (unsigned long long)rounds);
        cr_assert_eq(dat_ep_free(aep), DAT_SUCCESS);
        cr_assert_eq(dat_ep_free(pep), DAT_SUCCESS);
}

/* Whether the epoll epfd of this process watches fd (its fdinfo lists a
 * "tfd:" line for each descriptor in it). */
static bool epoll_has(int epfd, int fd)
{
        char path[64], line[256];
        bool found = false;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
        f = fopen(path, "r");
        cr_assert_not_null(f, "%s", path);
        while (!found && fgets(line, sizeof(line), f)) {
                int tfd;

                found = sscanf(line, "tfd: %d", &tfd) == 1 && tfd == fd;
        }
        fclose(f);
        return found;
}

/* While the application polls, its channels leave the progress thread's
 * epoll the next time that thread wakes (one there watched for nothing
 * still costs a TCP socket a callback per packet); once the application
 * sleeps in dat_evd_wait, they are watched again. */
Test(same_host, a_polled_channel_leaves_the_progress_threads_epoll_until_the_application_sleeps)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();
        struct ia *ia = ia_lookup(a.ia);
        struct ep *a_ep;
        int epfd, fd;
        bool in = true;

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        a_ep = ep_lookup(aep);
        cr_assert(ia && a_ep && a_ep->dto && a_ep->dto->ch);
        epfd = ia->dto.epfd;
        fd = a_ep->dto->ch->poll_fd;
        cr_assert_geq(epfd, 0);
        for (time_t end = time(NULL) + 5; in && time(NULL) < end;) {
                DAT_EVENT ev;

                /* Polls for 20 ms between looks; the kick is the
                 * progress thread's wake-up a message would be. */
                dto_ia_kick(ia);
                for (int i = 0; i < 2000; i++) {
                        (void)dat_evd_dequeue(a.dto_evd, &ev);
                        if (i % 100 == 0)
                                dat_nap();
                }
                in = epoll_has(epfd, fd);
        }
        cr_expect_not(in, "the polled channel is still in the progress thread's epoll");
        for (time_t end = time(NULL) + 5; !in && time(NULL) < end;) {
                DAT_EVENT ev;
                DAT_COUNT nmore;

                (void)dat_evd_wait(a.dto_evd, 50 * 1000, 1, &ev, &nmore);
                in = epoll_has(epfd, fd);
        }
        cr_expect(in, "the channel is not watched again while the application sleeps");
        cr_assert_eq(dat_ep_disconnect(aep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        cr_assert_eq(dat_ep_free(aep), DAT_SUCCESS);
        cr_assert_eq(dat_ep_free(pep), DAT_SUCCESS);
}

/* The write end of the pipe whose read end is fd (another descriptor of
 * this process, open for writing, on the same pipe), or -1. */
static int pipe_writer_of(int fd)
{
        struct stat want, st;
        int found = -1;

        if (fstat(fd, &want) != 0 || !S_ISFIFO(want.st_mode))
                return -1;
        for (int i = 0; i < 1024 && found < 0; i++)
                if (i != fd && fstat(i, &st) == 0 && S_ISFIFO(st.st_mode) &&
                    st.st_ino == want.st_ino && st.st_dev == want.st_dev &&
                    (fcntl(i, F_GETFL) & O_ACCMODE) == O_WRONLY)
                        found = i;
        return found;
}

/* A shm doorbell is a pipe (daemon/channel.h): once the peer's end closes
 * its write end (it tore its end down, or died) epoll reports the read end
 * hung up for as long as it is watched, asked for it or not.  The peer's
 * end of the channel is gone then: the data path breaks
 * (DAT_CONNECTION_EVENT_BROKEN) and the progress thread, which must stop
 * watching it, sleeps.  Here the active end's write end is closed under it
 * (replaced with /dev/null), its process still there. */
Test(same_host, a_doorbell_hung_up_breaks_the_connection_and_the_thread_sleeps)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();
        struct ep *p_ep;
        struct ia *ia = ia_lookup(p.ia);
        uint64_t rounds;
        int writer, null_fd;

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        p_ep = ep_lookup(pep);
        cr_assert(p_ep && p_ep->dto && ia);
        writer = pipe_writer_of(p_ep->dto->ch->poll_fd);
        cr_assert_geq(writer, 0, "the passive end's doorbell is no pipe with a writer here");
        null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        cr_assert_geq(null_fd, 0);
        cr_assert_eq(dup2(null_fd, writer), writer);
        close(null_fd);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_DISCONNECTED);
        rounds = progress_rounds_in_300_ms(ia);
        cr_expect_lt(rounds, 50u, "the progress thread made %llu rounds after the hang-up",
                     (unsigned long long)rounds);
        cr_assert_eq(dat_ep_free(aep), DAT_SUCCESS);
        cr_assert_eq(dat_ep_free(pep), DAT_SUCCESS);
}

/* ---- a waiter on connection events reads datd's socket itself ---------- */

struct evd_waiter {
        DAT_EVD_HANDLE evd;
        DAT_RETURN ret;
        DAT_EVENT event;
};

static void *wait_on_evd(void *arg)
{
        struct evd_waiter *w = arg;
        DAT_COUNT nmore;

        w->ret = dat_evd_wait(w->evd, DAT_TIMEOUT_INFINITE, 1, &w->event, &nmore);
        return NULL;
}

/* Joins the waiter, which must have returned within 10 s (else the test
 * fails, and its process takes the thread along). */
static void join_waiter(pthread_t t)
{
        struct timespec end;

        clock_gettime(CLOCK_REALTIME, &end);
        end.tv_sec += 10;
        cr_assert_eq(pthread_timedjoin_np(t, NULL, &end), 0, "the waiter was never woken");
}

/* Until the thread waiting on evd_handle reads datd's socket (bounded). */
static void until_the_waiter_reads(DAT_EVD_HANDLE evd_handle)
{
        struct evd *evd = evd_lookup(evd_handle);

        cr_assert_not_null(evd);
        cr_assert(evd_waiter_within_5_s(evd, EVD_WAITER_READS),
                  "the waiter never took datd's socket over");
}

/* A thread blocked in dat_evd_wait on an EVD of connection requests reads
 * and dispatches what datd sends itself: the request reaches it without a
 * round of the progress thread (which used to read it, post it and wake
 * the waiter: one wake-up and hand-over more, on each such event). */
Test(same_host, a_waiter_on_connection_events_reads_them_itself)
{
        struct evd_waiter w = { .evd = p.cr_evd };
        DAT_EP_HANDLE aep = side_ep(&a);
        DAT_CONN_QUAL q = fresh_qual();
        struct ia *ia = ia_lookup(p.ia);
        uint64_t rounds;
        pthread_t t;

        side_psp(&p, q);
        cr_assert_not_null(ia);
        cr_assert_eq(pthread_create(&t, NULL, wait_on_evd, &w), 0);
        until_the_waiter_reads(p.cr_evd);
        rounds = __atomic_load_n(&ia->dto.rounds, __ATOMIC_RELAXED);
        cr_assert_eq(dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&p.address, q, DAT_TIMEOUT_INFINITE,
                                    0, NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                     DAT_SUCCESS);
        join_waiter(t);
        cr_assert_eq(w.ret, DAT_SUCCESS, "dat_evd_wait: 0x%08x", w.ret);
        cr_expect_eq(w.event.event_number, DAT_CONNECTION_REQUEST_EVENT);
        rounds = __atomic_load_n(&ia->dto.rounds, __ATOMIC_RELAXED) - rounds;
        cr_expect_eq(rounds, 0u, "the progress thread made %llu rounds for the request",
                     (unsigned long long)rounds);
        cr_assert_eq(dat_cr_reject(w.event.event_data.cr_arrival_event_data.cr_handle, 0, NULL),
                     DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED);
        cr_assert_eq(dat_ep_free(aep), DAT_SUCCESS);
}

/* Such a waiter is not in the futex: anything else posted to its EVD (a
 * software event here; a BROKEN the progress thread finds) kicks it out of
 * its poll of datd's socket. */
Test(same_host, a_post_wakes_a_waiter_that_reads_datds_socket)
{
        struct evd_waiter w = { 0 };
        DAT_EVENT ev = { .event_number = DAT_SOFTWARE_EVENT };
        pthread_t t;

        cr_assert_eq(dat_evd_create(p.ia, 8, DAT_HANDLE_NULL,
                                    DAT_EVD_CONNECTION_FLAG | DAT_EVD_SOFTWARE_FLAG, &w.evd),
                     DAT_SUCCESS);
        cr_assert_eq(pthread_create(&t, NULL, wait_on_evd, &w), 0);
        until_the_waiter_reads(w.evd);
        ev.event_data.software_event_data.pointer = &w;
        cr_assert_eq(dat_evd_post_se(w.evd, &ev), DAT_SUCCESS);
        join_waiter(t);
        cr_expect_eq(w.ret, DAT_SUCCESS, "dat_evd_wait: 0x%08x", w.ret);
        cr_expect_eq(w.event.event_number, DAT_SOFTWARE_EVENT);
        cr_expect_eq(w.event.event_data.software_event_data.pointer, &w);
        cr_assert_eq(dat_evd_free(w.evd), DAT_SUCCESS);
}

/* ep_test_hard_break_hook: another thread's dat_ep_set_watermark, made to
 * come between the hard watermark's break and its disarming. */
static struct {
        unsigned calls;
        DAT_COUNT hard;
} rearm_hook;

static void rearm_in_the_window(struct ep *ep)
{
        rearm_hook.calls++;
        cr_assert_eq(dat_ep_set_watermark(ep->obj.handle, DAT_WATERMARK_INFINITE, rearm_hook.hard),
                     DAT_SUCCESS);
}

/* Receives beyond a hard high watermark of 1 on a connection of IA ia_name
 * break it; a new setting (3) made in the window before the break's
 * disarming stays armed, the break counted once. */
static void check_a_setting_made_during_the_break_stays_armed(const char *ia_name)
{
        DAT_DTO_COOKIE cookie = { .as_64 = 0 };
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EP_HANDLE aep, pep;
        struct side ta, tp;
        unsigned soft, hard;
        DAT_COUNT watermark;
        bool armed;
        struct ep *ep;

        side_open_ia(&ta, ia_name);
        side_open_ia(&tp, ia_name);
        side_psp(&tp, q);
        connect_pair(&ta, &tp, q, &aep, &pep);
        cr_assert_eq(dat_ep_set_watermark(pep, DAT_WATERMARK_INFINITE, 1), DAT_SUCCESS);
        rearm_hook.calls = 0;
        rearm_hook.hard = 3;
        ep_test_hard_break_hook = rearm_in_the_window;
        for (int i = 0; i < 2; i++)
                cr_assert_eq(dat_ep_post_recv(pep, 0, NULL, cookie, DAT_COMPLETION_DEFAULT_FLAG),
                             DAT_SUCCESS);
        ep_test_hard_break_hook = NULL;
        expect_event(tp.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        cr_assert_eq(rearm_hook.calls, 1u, "the break ran the hook %u times", rearm_hook.calls);
        ep = ep_lookup(pep);
        cr_assert_not_null(ep);
        dat_object_lock();
        armed = ep->hard_hw_armed;
        watermark = ep->hard_high_watermark;
        dat_object_unlock();
        ep_watermark_events(ep, &soft, &hard);
        cr_expect_eq(watermark, 3);
        cr_expect(armed, "%s: the break disarmed the setting made after it", ia_name);
        cr_expect_eq(hard, 1u);
        side_close(&ta);
        side_close(&tp);
}

/* dat_ep_set_watermark(3DAT) racing the hard watermark's break (libdat/ep.c,
 * hard_fired): the break disarms the setting it fired for, not a newer
 * one, on shm ... */
Test(same_host, a_watermark_set_during_the_hard_break_stays_armed_shm)
{
        check_a_setting_made_during_the_break_stays_armed("datd-shm");
}

/* ... and tcp. */
Test(same_host, a_watermark_set_during_the_hard_break_stays_armed_tcp)
{
        check_a_setting_made_during_the_break_stays_armed("datd-tcp");
}
