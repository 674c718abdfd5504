/* Connections through one datd (PROTOCOL.md, "Connections"): raw protocol
 * clients listen, connect, accept, reject, hand off, duplicate, disconnect
 * and die, and every event and refusal the DAT man pages name is checked on
 * both ends. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "common/macro.h"
#include "tests/daemon/bus-client.h"
#include "tests/daemon/child.h"
#include "tests/daemon/conn-expect.h"
#include "tests/daemon/raw-client.h"
#include "tests/harness.h"

#define DAT_ERR_TYPE(s) ((uint32_t) (s) & 0x3fff0000u)
#define QUIET_MS 200    /* how long "no event" is watched */

static struct datd_instance d;
static struct cc a = { .fd = -1 }, b = { .fd = -1 }, x = { .fd = -1 };
static sd_bus *bus;
static struct sockaddr_storage lo;
static socklen_t lo_len;

static void teardown(void)
{
        cc_close(&a);
        cc_close(&b);
        cc_close(&x);
        bus = sd_bus_flush_close_unref(bus);
        datd_stop(&d);
}

/* One timeout for every suite of this program (criterion 2.4 leaks one
 * record per distinct value). */
#define TEST_TIMEOUT_S 60
TestSuite(datd_conn, .timeout = TEST_TIMEOUT_S, .fini = teardown);

/* datd with shm and tcp IAs on 127.0.0.1, and extra top-level JSON (may be
 * ""); clients a and b on the shm IA. */
static void start(const char *extra)
{
        char config[1024];

        snprintf(config, sizeof(config),
                 "{\"log_level\": \"debug\", \"verbs\": false, \"ias\": ["
                 "{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"},"
                 "{\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"127.0.0.1\"}]%s%s}",
                 extra[0] ? ", " : "", extra);
        cr_assert_eq(datd_start(&d, config), 0, "datd did not start");
        cr_assert_eq(cc_open(&a, d.socket_path, "shm"), 0);
        cr_assert_eq(cc_open(&b, d.socket_path, "shm"), 0);
        lo_len = cc_addr4(&lo, "127.0.0.1");
}

static void stop(void)
{
        cc_close(&a);
        cc_close(&b);
        cc_close(&x);
        bus = sd_bus_flush_close_unref(bus);
        cr_expect_eq(datd_stop(&d), 0, "datd's exit status after SIGTERM");
}

/* A CONNECT to 127.0.0.1. */
static uint32_t connect_ok(struct cc *c, uint64_t qual, uint64_t timeout_us, const void *pd,
                           uint32_t pd_len)
{
        return expect_connect(c, &lo, lo_len, qual, timeout_us, pd, pd_len);
}

static void establish(uint64_t qual, uint32_t *a_conn, uint32_t *b_conn)
{
        expect_established(&a, &b, &lo, lo_len, qual, a_conn, b_conn);
}

/* dat_psp_create(3DAT): DAT_CONN_QUAL_IN_USE when the conn_qual is taken on
 * the IA, by any process of the host. */
Test(datd_conn, conn_qual_in_use_across_clients)
{
        uint32_t id;

        start("");
        id = expect_listen(&a, 4000);
        cr_expect_eq(cc_listen(&b, DATP_LISTENER_PSP, 4000, NULL, NULL), DAT_CONN_QUAL_IN_USE | DAT_CLASS_ERROR);
        cr_expect_eq(cc_listen(&b, DATP_LISTENER_RSP, 4000, NULL, NULL), DAT_CONN_QUAL_IN_USE | DAT_CLASS_ERROR);
        cr_expect_eq(cc_listen(&a, DATP_LISTENER_PSP, 4000, NULL, NULL), DAT_CONN_QUAL_IN_USE | DAT_CLASS_ERROR);
        /* Another IA has its own conn_quals. */
        cr_assert_eq(cc_open(&x, d.socket_path, "tcp"), 0);
        expect_listen(&x, 4000);
        /* dat_psp_free(3DAT): the conn_qual is free again. */
        cr_expect_eq(cc_unlisten(&a, id), DAT_SUCCESS);
        expect_listen(&b, 4000);
        stop();
}

Test(datd_conn, unlisten_of_someone_elses_listener_is_invalid_handle)
{
        uint32_t id;

        start("");
        id = expect_listen(&a, 4001);
        cr_expect_eq(DAT_ERR_TYPE(cc_unlisten(&b, id)), DAT_INVALID_HANDLE);
        cr_expect_eq(DAT_ERR_TYPE(cc_unlisten(&a, id + 1000)), DAT_INVALID_HANDLE);
        stop();
}

/* dat_psp_create_any(3DAT): the provider picks a free conn_qual;
 * DAT_CONN_QUAL_UNAVAILABLE when none is left. */
Test(datd_conn, psp_any_picks_a_free_conn_qual_from_the_range)
{
        uint64_t q1 = 0, q2 = 0;

        start("\"conn_qual_any_range\": [5000, 5002]");
        expect_listen(&b, 5001);
        cr_assert_eq(cc_listen(&a, DATP_LISTENER_PSP_ANY, 0, NULL, &q1), DAT_SUCCESS);
        cr_assert_eq(cc_listen(&a, DATP_LISTENER_PSP_ANY, 0, NULL, &q2), DAT_SUCCESS);
        cr_expect(q1 >= 5000 && q1 <= 5002 && q1 != 5001, "picked %lu", (unsigned long) q1);
        cr_expect(q2 >= 5000 && q2 <= 5002 && q2 != 5001 && q2 != q1, "picked %lu", (unsigned long) q2);
        cr_expect_eq(DAT_ERR_TYPE(cc_listen(&b, DATP_LISTENER_PSP_ANY, 0, NULL, NULL)),
                     DAT_CONN_QUAL_UNAVAILABLE);
        cr_expect_eq(DAT_ERR_TYPE(cc_listen(&b, DATP_LISTENER_PSP, q1, NULL, NULL)), DAT_CONN_QUAL_IN_USE);
        stop();
}

/* Listeners die with their process: the conn_qual is free for another. */
Test(datd_conn, listener_dies_with_its_client)
{
        long s = -1;

        start("");
        expect_listen(&a, 4002);
        cc_close(&a);
        for (int i = 0; i < 500 && s != DAT_SUCCESS; i++) {
                s = cc_listen(&b, DATP_LISTENER_PSP, 4002, NULL, NULL);
                if (s != DAT_SUCCESS)
                        usleep(10000);
        }
        cr_expect_eq(s, DAT_SUCCESS, "conn_qual still taken after its owner died");
        stop();
}

Test(datd_conn, max_listeners_per_client_is_enforced)
{
        start("\"limits\": {\"max_listeners_per_client\": 2}");
        expect_listen(&a, 1);
        expect_listen(&a, 2);
        cr_expect_eq(DAT_ERR_TYPE(cc_listen(&a, DATP_LISTENER_PSP, 3, NULL, NULL)),
                     DAT_INSUFFICIENT_RESOURCES);
        expect_listen(&b, 3);
        stop();
}

/* dat_ep_connect(3DAT) / dat_cr_accept(3DAT): the passive side gets the
 * request with the connecter's private data; both ends get ESTABLISHED, the
 * active one with the accepter's private data. */
static void accept_with_private_data(uint32_t n)
{
        uint8_t pd1[DATP_PRIVATE_DATA_MAX], pd2[DATP_PRIVATE_DATA_MAX];
        union datp_message req, ev;
        uint32_t b_conn, a_conn = 0, cr;

        fill_pattern(pd1, n, 1);
        fill_pattern(pd2, n, 101);
        expect_listen(&a, 4100);
        b_conn = connect_ok(&b, 4100, 5000000, pd1, n);
        cr = expect_request(&a, &req);
        cr_expect_eq(req.ev_conn_request.pd_len, n);
        cr_expect_eq(memcmp(req.ev_conn_request.private_data, pd1, n), 0);
        cr_expect_eq(req.ev_conn_request.conn_qual, 4100);
        cr_expect_eq(req.ev_conn_request.remote_address.ss_family, AF_INET);
        cr_assert_eq(cc_accept(&a, cr, pd2, n, &a_conn), DAT_SUCCESS);
        cr_assert_neq(a_conn, 0);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, &ev);
        cr_expect_eq(ev.ev_conn.pd_len, n);
        cr_expect_eq(memcmp(ev.ev_conn.private_data, pd2, n), 0);
        cr_expect_eq(ev.ev_conn.ep_handle, 0x7000);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, &ev);
        cr_expect_eq(ev.ev_conn.pd_len, n);
        cr_expect_eq(memcmp(ev.ev_conn.private_data, pd1, n), 0);
        cr_expect_eq(ev.ev_conn.ep_handle, 0x8000);
}

Test(datd_conn, accept_establishes_both_ends_with_64_bytes_of_private_data)
{
        start("");
        accept_with_private_data(64);
        stop();
}

Test(datd_conn, accept_establishes_both_ends_with_the_maximum_private_data)
{
        start("\"limits\": {\"max_private_data\": 256}");
        accept_with_private_data(DATP_PRIVATE_DATA_MAX);
        stop();
}

/* Private data beyond the IA's max_private_data is refused synchronously. */
Test(datd_conn, private_data_beyond_the_limit_is_refused)
{
        uint8_t pd[128] = { 1 };

        start("\"limits\": {\"max_private_data\": 64}");
        expect_listen(&a, 4101);
        cr_expect_eq(DAT_ERR_TYPE(cc_connect(&b, (struct sockaddr *) &lo, lo_len, 4101, UINT64_MAX,
                                             pd, 65, NULL)), DAT_INVALID_PARAMETER);
        stop();
}

/* dat_cr_reject(3DAT): the active side gets PEER_REJECTED with the
 * rejecter's private data. */
Test(datd_conn, reject_is_peer_rejected_with_private_data)
{
        uint8_t pd[64];
        union datp_message ev;
        uint32_t b_conn, cr;

        start("");
        fill_pattern(pd, sizeof(pd), 9);
        expect_listen(&a, 4200);
        b_conn = connect_ok(&b, 4200, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        cr_assert_eq(cc_reject(&a, cr, pd, sizeof(pd)), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_PEER_REJECTED, &ev);
        cr_expect_eq(ev.ev_conn.pd_len, sizeof(pd));
        cr_expect_eq(memcmp(ev.ev_conn.private_data, pd, sizeof(pd)), 0);
        /* The request is gone. */
        cr_expect_eq(DAT_ERR_TYPE(cc_accept(&a, cr, NULL, 0, NULL)), DAT_INVALID_HANDLE);
        stop();
}

/* Only the listener's process may answer its requests. */
Test(datd_conn, another_client_cannot_answer_a_request)
{
        uint32_t cr;

        start("");
        expect_listen(&a, 4201);
        connect_ok(&b, 4201, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        cr_expect_eq(DAT_ERR_TYPE(cc_accept(&b, cr, NULL, 0, NULL)), DAT_INVALID_HANDLE);
        cr_expect_eq(DAT_ERR_TYPE(cc_reject(&b, cr, NULL, 0)), DAT_INVALID_HANDLE);
        stop();
}

/* dat_ep_connect(3DAT): no listener on the remote conn_qual ->
 * DAT_CONNECTION_EVENT_NON_PEER_REJECTED. */
Test(datd_conn, no_listener_is_non_peer_rejected)
{
        uint32_t b_conn;

        start("");
        b_conn = connect_ok(&b, 4300, UINT64_MAX, NULL, 0);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        stop();
}

/* dat_ep_connect(3DAT): a QoS the passive side's IA does not offer is a
 * non-peer reject (the listener never sees the request). */
Test(datd_conn, qos_the_listeners_ia_does_not_offer_is_non_peer_rejected)
{
        uint32_t b_conn = 0;

        start("");
        expect_listen(&a, 4310);
        cr_assert_eq(cc_connect_qos(&b, (struct sockaddr *) &lo, lo_len, 4310,
                                    DAT_QOS_LOW_LATENCY, &b_conn), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN_REQUEST, QUIET_MS), 0,
                     "the listener saw a request its IA's QoS refuses");
        stop();
}

/* datd.conf "qos": an IA that offers a class lets requests for it through;
 * best effort (DAT_QOS_BEST_EFFORT, 0) is always offered. */
static void qos_offered_reaches_the_listener(uint32_t qos)
{
        char config[1024];
        uint32_t b_conn = 0;

        snprintf(config, sizeof(config),
                 "{\"log_level\": \"debug\", \"verbs\": false, \"ias\": ["
                 "{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\","
                 " \"qos\": [\"best_effort\", \"low_latency\", \"premium\"]}]}");
        cr_assert_eq(datd_start(&d, config), 0, "datd did not start");
        cr_assert_eq(cc_open(&a, d.socket_path, "shm"), 0);
        cr_assert_eq(cc_open(&b, d.socket_path, "shm"), 0);
        lo_len = cc_addr4(&lo, "127.0.0.1");
        expect_listen(&a, 4320);
        cr_assert_eq(cc_connect_qos(&b, (struct sockaddr *) &lo, lo_len, 4320, qos, &b_conn),
                     DAT_SUCCESS);
        expect_request(&a, NULL);
        stop();
}

Test(datd_conn, qos_the_listeners_ia_offers_reaches_the_listener)
{
        qos_offered_reaches_the_listener(DAT_QOS_LOW_LATENCY | DAT_QOS_PREMIUM);
}

Test(datd_conn, best_effort_reaches_the_listener_on_an_ia_offering_more)
{
        qos_offered_reaches_the_listener(DAT_QOS_BEST_EFFORT);
}

/* dat_ep_connect(3DAT): no answer within timeout -> TIMED_OUT; the request
 * is withdrawn, and an accept of it fails on the passive EP. */
Test(datd_conn, timeout_is_timed_out_and_a_late_accept_fails)
{
        uint32_t b_conn, a_conn = 0, cr;

        start("");
        expect_listen(&a, 4400);
        b_conn = connect_ok(&b, 4400, 100000, NULL, 0);
        cr = expect_request(&a, NULL);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_TIMED_OUT, NULL);
        cr_expect_eq(cc_accept(&a, cr, NULL, 0, &a_conn), DAT_SUCCESS);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL);
        cr_expect_eq(cc_no_event(&b, DATP_EV_CONN, QUIET_MS), 0, "the active side heard more");
        stop();
}

/* dat_cr_handoff(3DAT): the request moves to the listener of another
 * conn_qual of the same IA, which may accept it. */
Test(datd_conn, handoff_moves_the_request_to_another_listener)
{
        uint8_t pd[64];
        union datp_message req;
        uint32_t b_conn, x_conn = 0, cr;

        start("");
        cr_assert_eq(cc_open(&x, d.socket_path, "shm"), 0);
        fill_pattern(pd, sizeof(pd), 3);
        expect_listen(&a, 4500);
        expect_listen(&x, 4501);
        b_conn = connect_ok(&b, 4500, UINT64_MAX, pd, sizeof(pd));
        cr = expect_request(&a, NULL);
        cr_expect_eq(DAT_ERR_TYPE(cc_handoff(&a, cr, 4599)), DAT_INVALID_PARAMETER,
                     "handoff to a conn_qual nobody listens on");
        cr_assert_eq(cc_handoff(&a, cr, 4501), DAT_SUCCESS);
        cr = expect_request(&x, &req);
        cr_expect_eq(req.ev_conn_request.conn_qual, 4501);
        cr_expect_eq(req.ev_conn_request.pd_len, sizeof(pd));
        cr_expect_eq(memcmp(req.ev_conn_request.private_data, pd, sizeof(pd)), 0);
        cr_expect_eq(DAT_ERR_TYPE(cc_accept(&a, cr, NULL, 0, NULL)), DAT_INVALID_HANDLE,
                     "the old listener's process still owns the request");
        cr_assert_eq(cc_accept(&x, cr, NULL, 0, &x_conn), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_ev_conn(&x, x_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        stop();
}

/* dat_ep_dup_connect(3DAT): the new connection goes to the same remote IA
 * and conn_qual as the duplicated one, which must be connected. */
Test(datd_conn, dup_connect_reaches_the_same_listener)
{
        uint32_t a_conn, b_conn, dup, a_dup = 0, cr, pending;
        union datp_message req;

        start("");
        establish(4600, &a_conn, &b_conn);
        cr_assert_eq(cc_dup_connect(&b, b_conn, UINT64_MAX, NULL, 0, &dup), DAT_SUCCESS);
        cr = expect_request(&a, &req);
        cr_expect_eq(req.ev_conn_request.conn_qual, 4600);
        cr_assert_eq(cc_accept(&a, cr, NULL, 0, &a_dup), DAT_SUCCESS);
        expect_ev_conn(&b, dup, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_ev_conn(&a, a_dup, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        /* Not this client's connection, no connection, a pending one. */
        cr_expect_eq(DAT_ERR_TYPE(cc_dup_connect(&a, b_conn, UINT64_MAX, NULL, 0, NULL)), DAT_INVALID_HANDLE);
        cr_expect_eq(DAT_ERR_TYPE(cc_dup_connect(&b, 999999, UINT64_MAX, NULL, 0, NULL)), DAT_INVALID_HANDLE);
        pending = connect_ok(&b, 4600, UINT64_MAX, NULL, 0);
        cr_expect_eq(DAT_ERR_TYPE(cc_dup_connect(&b, pending, UINT64_MAX, NULL, 0, NULL)), DAT_INVALID_STATE);
        stop();
}

/* dat_ep_disconnect(3DAT): DISCONNECTED on both ends, whichever end asks,
 * graceful or abrupt. */
Test(datd_conn, disconnect_by_the_active_side_reaches_both)
{
        uint32_t a_conn, b_conn;

        start("");
        establish(4700, &a_conn, &b_conn);
        cr_assert_eq(cc_disconnect(&b, b_conn, DATP_CLOSE_GRACEFUL), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        cr_expect_eq(DAT_ERR_TYPE(cc_disconnect(&a, a_conn, DATP_CLOSE_ABRUPT)), DAT_INVALID_HANDLE);
        stop();
}

Test(datd_conn, disconnect_by_the_passive_side_reaches_both)
{
        uint32_t a_conn, b_conn;

        start("");
        establish(4701, &a_conn, &b_conn);
        cr_assert_eq(cc_disconnect(&a, a_conn, DATP_CLOSE_ABRUPT), DAT_SUCCESS);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        stop();
}

/* DATP_DISCONNECT_NO_EVENT: the end that asked has ended itself, and hears
 * nothing more of the connection; the other end is told as always, and
 * the connection is gone at datd. */
Test(datd_conn, a_disconnect_without_event_tells_only_the_other_end)
{
        uint32_t a_conn, b_conn;

        start("");
        establish(4703, &a_conn, &b_conn);
        cr_assert_eq(cc_disconnect(&b, b_conn, DATP_CLOSE_GRACEFUL | DATP_DISCONNECT_NO_EVENT),
                     DAT_SUCCESS);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        cr_expect_eq(cc_no_event(&b, DATP_EV_CONN, 200), 0, "an EV_CONN for the end that asked");
        cr_expect_eq(DAT_ERR_TYPE(cc_disconnect(&b, b_conn, DATP_CLOSE_ABRUPT)), DAT_INVALID_HANDLE);
        stop();
}

/* A pending connect that is disconnected is withdrawn. */
Test(datd_conn, disconnect_of_a_pending_connect_withdraws_it)
{
        uint32_t b_conn, a_conn = 0, cr;

        start("");
        expect_listen(&a, 4702);
        b_conn = connect_ok(&b, 4702, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        cr_assert_eq(cc_disconnect(&b, b_conn, DATP_CLOSE_ABRUPT), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        cr_expect_eq(cc_accept(&a, cr, NULL, 0, &a_conn), DAT_SUCCESS);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL);
        stop();
}

/* The issue: a peer process that dies -> BROKEN promptly (the bound here is
 * generous; datd sends it as it sees the hangup). */
Test(datd_conn, death_of_the_passive_process_breaks_the_active_end)
{
        uint32_t a_conn, b_conn;

        start("");
        establish(4800, &a_conn, &b_conn);
        cc_close(&a);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_BROKEN, NULL);
        stop();
}

Test(datd_conn, death_of_the_active_process_breaks_the_passive_end)
{
        uint32_t a_conn, b_conn;

        start("");
        establish(4801, &a_conn, &b_conn);
        cc_close(&b);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_BROKEN, NULL);
        stop();
}

/* A listener that goes while a request waits: the active side is refused,
 * not by the peer. */
Test(datd_conn, listener_death_mid_request_is_non_peer_rejected)
{
        uint32_t b_conn;

        start("");
        expect_listen(&a, 4900);
        b_conn = connect_ok(&b, 4900, UINT64_MAX, NULL, 0);
        expect_request(&a, NULL);
        cc_close(&a);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        stop();
}

Test(datd_conn, unlisten_mid_request_is_non_peer_rejected)
{
        uint32_t b_conn, id;

        start("");
        id = expect_listen(&a, 4901);
        b_conn = connect_ok(&b, 4901, UINT64_MAX, NULL, 0);
        expect_request(&a, NULL);
        cr_assert_eq(cc_unlisten(&a, id), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        stop();
}

/* limits.max_pending_requests: a full backlog refuses new requests. */
Test(datd_conn, full_backlog_is_non_peer_rejected)
{
        uint32_t c1, c2, c3;

        start("\"limits\": {\"max_pending_requests\": 2}");
        expect_listen(&a, 5100);
        c1 = connect_ok(&b, 5100, UINT64_MAX, NULL, 0);
        c2 = connect_ok(&b, 5100, UINT64_MAX, NULL, 0);
        c3 = connect_ok(&b, 5100, UINT64_MAX, NULL, 0);
        expect_ev_conn(&b, c3, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        expect_request(&a, NULL);
        expect_request(&a, NULL);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN_REQUEST, QUIET_MS), 0);
        cr_expect_neq(c1, c2);
        stop();
}

Test(datd_conn, max_pending_connects_per_client_is_enforced)
{
        start("\"limits\": {\"max_pending_connects_per_client\": 1}");
        expect_listen(&a, 5200);
        connect_ok(&b, 5200, UINT64_MAX, NULL, 0);
        cr_expect_eq(DAT_ERR_TYPE(cc_connect(&b, (struct sockaddr *) &lo, lo_len, 5200, UINT64_MAX,
                                             NULL, 0, NULL)), DAT_INSUFFICIENT_RESOURCES);
        stop();
}

Test(datd_conn, max_connections_per_client_is_enforced)
{
        uint32_t a_conn, b_conn;

        start("\"limits\": {\"max_connections_per_client\": 1}");
        establish(5300, &a_conn, &b_conn);
        cr_expect_eq(DAT_ERR_TYPE(cc_connect(&b, (struct sockaddr *) &lo, lo_len, 5300, UINT64_MAX,
                                             NULL, 0, NULL)), DAT_INSUFFICIENT_RESOURCES);
        stop();
}

/* 127.0.0.1 names the connecting IA itself: a listener on another IA with
 * the same address is not reached through loopback. */
Test(datd_conn, loopback_stays_on_the_connecting_ia)
{
        uint32_t b_conn;

        start("");
        cc_close(&a);
        cr_assert_eq(cc_open(&a, d.socket_path, "tcp"), 0);
        expect_listen(&a, 5400);
        b_conn = connect_ok(&b, 5400, UINT64_MAX, NULL, 0);
        /* b is on shm at 127.0.0.1: that is its own IA, where nobody listens. */
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        stop();
}

/* D-Bus ListListeners(): the listener, its kind, conn_qual, pending and
 * accepted requests (DBUS-API.md). */
Test(datd_conn, list_listeners_shows_pending_and_accepted_requests)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        uint64_t client_id, qual, accepted;
        uint32_t pid, pending, id, a_conn, b_conn;
        const char *command, *ia, *kind;
        int r, rows = 0;

        start("");
        establish(6000, &a_conn, &b_conn);
        connect_ok(&b, 6000, UINT64_MAX, NULL, 0);
        expect_request(&a, NULL);
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0);
        r = sd_bus_call_method(bus, "org.datd.Datd1", "/org/datd/Datd1", "org.datd.Datd1.Manager",
                               "ListListeners", &error, &reply, "");
        cr_assert_geq(r, 0, "ListListeners: %s", error.message);
        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "(tussstutu)"), 0);
        while ((r = sd_bus_message_read(reply, "(tussstutu)", &client_id, &pid, &command, &ia, &kind,
                                        &qual, &pending, &accepted, &id)) > 0) {
                rows++;
                cr_expect_eq(pid, (uint32_t) getpid());
                cr_expect_str_eq(ia, "shm");
                cr_expect_str_eq(kind, "PSP");
                cr_expect_eq(qual, 6000);
                cr_expect_eq(pending, 1);
                cr_expect_eq(accepted, 1);
        }
        cr_expect_eq(rows, 1);
        sd_bus_error_free(&error);
        stop();
}

/* D-Bus ListConnections(): both ends of a same-host connection, their
 * roles, addresses, state and peer; GetCounters() counts them. */
Test(datd_conn, list_connections_shows_both_ends)
{
        struct bus_connection rows[4];
        uint64_t established = 0;
        uint32_t a_conn, b_conn;
        int active = 0, passive = 0;
        size_t n;

        start("");
        establish(6001, &a_conn, &b_conn);
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0);
        cr_assert_eq(bus_list_connections(bus, rows, ARRAY_SIZE(rows), &n), 0);
        cr_expect_eq(n, 2);
        for (size_t i = 0; i < n && i < ARRAY_SIZE(rows); i++) {
                const struct bus_connection *r = &rows[i];

                cr_expect_str_eq(r->state, "ESTABLISHED");
                cr_expect_str_eq(r->local_address, "127.0.0.1");
                cr_expect_str_eq(r->remote_address, "127.0.0.1");
                cr_expect_eq(r->remote_conn_qual, 6001);
                cr_expect_eq(r->peer_pid, (uint32_t) getpid());
                cr_expect_eq(r->bytes_sent + r->bytes_received, 0);
                /* Both ends on the shm IA: each holds the connection's region. */
                cr_expect_gt(r->shm_bytes, 2 * 262144, "shm_bytes %" PRIu64, r->shm_bytes);
                if (strcmp(r->role, "active") == 0) {
                        active++;
                        cr_expect_eq(r->id, b_conn);
                } else {
                        passive++;
                        cr_expect_eq(r->id, a_conn);
                }
        }
        cr_expect_eq(active, 1);
        cr_expect_eq(passive, 1);
        cr_assert_eq(bus_counter(bus, "established", &established), 0);
        cr_expect_eq(established, 2);
        stop();
}

/* datctl listener list and connection list (datctl(8)), text and --json. */
Test(datd_conn, datctl_lists_listeners_and_connections)
{
        _cleanup_free_ char *datctl = build_path("daemon/datctl"), *address = NULL;
        char *out = NULL;
        uint32_t a_conn, b_conn;
        int status;

        start("");
        establish(6002, &a_conn, &b_conn);
        cr_assert_geq(asprintf(&address, "--address=%s", d.bus_address), 0);
        status = run_capture((char *const[]) { datctl, address, (char *) "listener", (char *) "list",
                                               NULL }, &out, 10000);
        cr_assert_eq(status, 0, "%s", out ? out : "");
        cr_expect_not_null(strstr(out, " shm PSP "), "%s", out);
        cr_expect_not_null(strstr(out, " 6002 "), "%s", out);
        cr_expect_not_null(strstr(out, "1 listener listed."), "%s", out);
        free(out);
        status = run_capture((char *const[]) { datctl, address, (char *) "--json", (char *) "connection",
                                               (char *) "list", NULL }, &out, 10000);
        cr_assert_eq(status, 0, "%s", out ? out : "");
        cr_expect_not_null(strstr(out, "\"role\": \"active\""), "%s", out);
        cr_expect_not_null(strstr(out, "\"role\": \"passive\""), "%s", out);
        cr_expect_not_null(strstr(out, "\"state\": \"ESTABLISHED\""), "%s", out);
        cr_expect_not_null(strstr(out, "\"remote_conn_qual\": 6002"), "%s", out);
        free(out);
        stop();
}

/* Registers an EP object of handle on c's IA (as libdat's dat_ep_create
 * does); its datd id. */
static uint32_t register_ep(struct cc *c, uint64_t handle)
{
        struct datp_obj_create req = { .ia_id = c->ia_id };
        union datp_message reply;

        raw_obj_desc(&req.desc, DATP_OBJ_EP, handle, 0);
        datp_header_init(&req.hdr, DATP_OBJ_CREATE, RAW_VERSION, sizeof(req), 0);
        cr_assert_eq(cc_call(c, &req.hdr, &reply, sizeof(reply.obj_create_reply)), 0);
        cr_assert_eq(reply.obj_create_reply.status.dat_status, DAT_SUCCESS);
        return reply.obj_create_reply.obj_id;
}

static void unregister(struct cc *c, uint32_t obj_id)
{
        struct datp_obj_destroy req = { .ia_id = c->ia_id, .obj_id = obj_id };
        union datp_message reply;

        datp_header_init(&req.hdr, DATP_OBJ_DESTROY, RAW_VERSION, sizeof(req), 0);
        cr_assert_eq(cc_call(c, &req.hdr, &reply, sizeof(reply.obj_destroy_reply)), 0);
}

/* The state datctl shows for the EP of this handle. */
static const char *ep_state(uint64_t handle)
{
        static struct bus_endpoint rows[512];
        size_t n;

        cr_assert_eq(bus_list_endpoints(bus, rows, ARRAY_SIZE(rows), &n), 0);
        for (size_t i = 0; i < n && i < ARRAY_SIZE(rows); i++)
                if (rows[i].handle == handle)
                        return rows[i].state;
        return "(no such EP)";
}

/* datd's copy of an EP's state follows the connection datd drives
 * (CONNECT, CR_ACCEPT and the events it sends): libdat sends no update for
 * those.  The EPs are found by handle among many, registered and freed
 * in an order that moves them around datd's index. */
Test(datd_conn, ep_state_follows_the_connection_without_updates)
{
        uint32_t ids[300], a_conn, b_conn, cr;
        union datp_message req;

        start("\"limits\": {\"max_eps\": 4096}");
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0);
        for (unsigned i = 0; i < ARRAY_SIZE(ids); i++)
                ids[i] = register_ep(&b, 0x100000 + (uint64_t) i * 0x40);
        register_ep(&b, 0x7000);
        for (unsigned i = 0; i < ARRAY_SIZE(ids); i += 2)
                unregister(&b, ids[i]);
        register_ep(&a, 0x8000);
        cr_expect_str_eq(ep_state(0x7000), "UNCONNECTED");

        expect_listen(&a, 6003);
        b_conn = connect_ok(&b, 6003, 5000000, NULL, 0);
        cr_expect_str_eq(ep_state(0x7000), "ACTIVE_CONNECTION_PENDING");
        cr = expect_request(&a, &req);
        cr_assert_eq(cc_accept(&a, cr, NULL, 0, &a_conn), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        cr_expect_str_eq(ep_state(0x7000), "CONNECTED");
        cr_expect_str_eq(ep_state(0x8000), "CONNECTED");

        cr_assert_eq(cc_disconnect(&b, b_conn, DATP_CLOSE_GRACEFUL), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        cr_expect_str_eq(ep_state(0x7000), "DISCONNECTED");
        cr_expect_str_eq(ep_state(0x8000), "DISCONNECTED");
        /* The EPs left standing are all still there. */
        for (unsigned i = 1; i < ARRAY_SIZE(ids); i += 2)
                cr_expect_str_eq(ep_state(0x100000 + (uint64_t) i * 0x40), "UNCONNECTED");
        stop();
}

/* dat_rsp_create(3DAT): an RSP generates at most one connection request;
 * later requests are refused, not by the peer. */
Test(datd_conn, rsp_delivers_one_request_only)
{
        uint32_t c1, c2;

        start("");
        cr_assert_eq(cc_listen(&a, DATP_LISTENER_RSP, 6100, NULL, NULL), DAT_SUCCESS);
        c1 = connect_ok(&b, 6100, UINT64_MAX, NULL, 0);
        expect_request(&a, NULL);
        c2 = connect_ok(&b, 6100, UINT64_MAX, NULL, 0);
        expect_ev_conn(&b, c2, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN_REQUEST, QUIET_MS), 0);
        cr_expect_neq(c1, c2);
        stop();
}

/* PROTOCOL.md §9: the terminal EV_CONNs a peer's exit makes, one for every
 * connection a client had with it, wait for room without counting against
 * max_pending_replies.  A client that reads its socket, only later than
 * they come, gets them all and stays; datd once dropped it with every
 * other connection it had. */
#define FLOOD_CONNS 1000        /* more than a socket holds */

Test(datd_conn, a_peer_exit_does_not_drop_a_client_with_many_connections_to_it)
{
        union datp_message ev;
        uint32_t a_conn, x_conn, b_conn, cr;
        struct datp_ia_query q = {};
        struct datp_ia_query_reply reply;
        unsigned broken = 0;

        cr_assert_eq(datd_start(&d, "{\"log_level\": \"notice\", \"verbs\": false, \"ias\": ["
                                "{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"}],"
                                "\"limits\": {\"max_pending_replies\": 8, \"shm_ring_bytes\": 4096,"
                                " \"max_spare_channels_per_client\": 0}}"), 0);
        cr_assert_eq(cc_open(&a, d.socket_path, "shm"), 0);
        cr_assert_eq(cc_open(&b, d.socket_path, "shm"), 0);
        cr_assert_eq(cc_open(&x, d.socket_path, "shm"), 0);
        lo_len = cc_addr4(&lo, "127.0.0.1");
        /* a's connection with x, which b's exit must leave alone. */
        expect_established(&a, &x, &lo, lo_len, 6400, &a_conn, &x_conn);
        for (unsigned i = 0; i < FLOOD_CONNS; i++) {
                b_conn = connect_ok(&b, 6400, UINT64_MAX, NULL, 0);
                cr = expect_request(&a, NULL);
                cr_assert_eq(cc_accept(&a, cr, NULL, 0, &a_conn), DAT_SUCCESS);
                expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
                expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        }
        cc_close(&b);
        /* a is busy while datd sees b go. */
        usleep(300 * 1000);
        while (broken < FLOOD_CONNS) {
                int r = cc_event(&a, DATP_EV_CONN, &ev, EV_MS);

                cr_assert_eq(r, 0, "after %u BROKEN: %s", broken, strerror(-r));
                cr_assert_eq(ev.ev_conn.event, DAT_CONNECTION_EVENT_BROKEN);
                broken++;
        }
        /* a is still a client of datd, and its connection with x is up. */
        datp_header_init(&q.hdr, DATP_IA_QUERY, a.version, sizeof(q), 0);
        q.ia_id = a.ia_id;
        cr_assert_eq(cc_call(&a, &q.hdr, &reply, sizeof(reply)), 0, "datd dropped the survivor");
        cr_expect_eq(cc_no_event(&x, DATP_EV_CONN, QUIET_MS), 0, "x's connection with a ended");
        stop();
}

/* PROTOCOL.md, CONNECT: a timeout_us too far ahead for datd's clock to
 * arm is DAT_TIMEOUT_INFINITE.  Such a request reaches the listener and
 * waits for its answer; it once failed the active end after it had been
 * put in the listener's backlog, where it stayed, never announced and
 * never answered, filling the backlog. */
Test(datd_conn, connect_timeout_too_far_to_arm_is_infinite)
{
        uint32_t c1, c2;

        start("\"limits\": {\"max_pending_requests\": 1}");
        expect_listen(&a, 6200);
        c1 = connect_ok(&b, 6200, UINT64_MAX - 1, NULL, 0);
        cr_assert_eq(cc_reject(&a, expect_request(&a, NULL), NULL, 0), DAT_SUCCESS);
        expect_ev_conn(&b, c1, DAT_CONNECTION_EVENT_PEER_REJECTED, NULL);
        /* The backlog of one is free again, and no request waits for ever. */
        c2 = connect_ok(&b, 6200, UINT64_MAX - 1, NULL, 0);
        expect_request(&a, NULL);
        cr_expect_eq(cc_no_event(&b, DATP_EV_CONN, QUIET_MS), 0, "the request did not wait");
        cr_expect_neq(c1, c2);
        stop();
}

/* datd.conf(5), allow_users: an IA's policy holds for connections to its
 * listeners from another IA of the host as it does for IA_OPEN.  A user
 * refused the restricted IA, connecting through an open one to the
 * restricted IA's address, is refused NON_PEER_REJECTED, and the listener
 * hears nothing; root still gets through. */
#define SECURE_ADDRESS "192.0.2.2"

static const char *policy_socket;

/* As nobody: CONNECT through IA "open" to conn_qual 6300 at the restricted
 * IA's address; the EV_CONN it got, or -errno. */
static int connect_to_secure_as_child(void *arg)
{
        struct cc u = { .fd = -1 };
        struct sockaddr_storage to;
        socklen_t len = cc_addr4(&to, SECURE_ADDRESS);
        union datp_message ev;
        uint32_t conn;
        long s;
        int r;

        r = cc_open(&u, policy_socket, "open");
        if (r < 0)
                return r;
        s = cc_connect(&u, (struct sockaddr *) &to, len, 6300, UINT64_MAX, NULL, 0, &conn);
        r = s != DAT_SUCCESS ? -EPROTO : cc_event(&u, DATP_EV_CONN, &ev, EV_MS);
        cc_close(&u);
        return r < 0 ? r : (int) ev.ev_conn.event;
}

Test(datd_conn, ia_policy_holds_for_connections_from_another_ia)
{
        struct sockaddr_storage to;
        socklen_t len = cc_addr4(&to, SECURE_ADDRESS);
        int result_fd, result = 0;
        pid_t kid;

        cr_assert_eq(datd_start(&d, "{\"verbs\": false, \"ias\": ["
                                "{\"name\": \"secure\", \"transport\": \"shm\", \"address\": \""
                                SECURE_ADDRESS "\", \"allow_users\": [\"daemon\"]},"
                                "{\"name\": \"open\", \"transport\": \"shm\"}]}"), 0);
        cr_assert_eq(cc_open(&a, d.socket_path, "secure"), 0);
        cr_assert_eq(cc_open(&b, d.socket_path, "open"), 0);
        expect_listen(&a, 6300);
        policy_socket = d.socket_path;
        kid = child_run_as(NOBODY_UID, NOGROUP_GID, connect_to_secure_as_child, NULL, 0, &result_fd);
        cr_assert_gt(kid, 0);
        cr_assert_eq(child_result(result_fd, 10000, &result), 0);
        close(result_fd);
        child_kill(&kid);
        cr_expect_eq(result, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, "nobody's connection: %d", result);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN_REQUEST, QUIET_MS), 0,
                     "the restricted IA's listener heard of a refused user");
        /* root may use every IA: the same connection reaches the listener. */
        expect_connect(&b, &to, len, 6300, UINT64_MAX, NULL, 0);
        expect_request(&a, NULL);
        stop();
}
