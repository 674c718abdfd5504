/* Connections between two hosts (network namespaces on one segment, a
 * datd in each, tests/netns.h): the two datds negotiate over their CM
 * link.  This process is a client of both datds (their control sockets
 * are filesystem paths, reachable from any namespace); the TCP between
 * the hosts is datd's. */
#include "config.h"

#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/conn/conn_test.h"
#include "tests/netns.h"

static struct test_net *net;
static struct datd_instance d0, d1;
static struct side a, p; /* a on host 0, p on host 1 */

static void setup(void)
{
        const char *why = NULL;

        if (!test_net_available(&why))
                cr_skip_test("%s", why);
        cr_assert_eq(test_net_create(&net, 2), 0);
        cr_assert_eq(test_net_datd_start(net, 0, &d0), 0, "datd on host 0");
        cr_assert_eq(test_net_datd_start(net, 1, &d1), 0, "datd on host 1");
        datd_export_env(&d0);
        side_open_ia(&a, "datd-tcp");
        datd_export_env(&d1);
        side_open_ia(&p, "datd-tcp");
}

static void teardown(void)
{
        side_close(&a);
        side_close(&p);
        datd_stop(&d0);
        datd_stop(&d1);
        test_net_destroy(&net);
}

TestSuite(cross_host, .init = setup, .fini = teardown, .timeout = CONN_TEST_TIMEOUT);

/* The issue: "the IA address that dat_ia_query reports is the host's IPv4
 * ... sockaddr that a remote peer passes to dat_ep_connect"; dat_cr_accept
 * (3DAT) across hosts: ESTABLISHED on both sides, private data both ways. */
Test(cross_host, accept_connects_both_hosts_with_private_data)
{
        unsigned char out[64], back[64];
        DAT_EP_HANDLE aep = side_ep(&a), pep = side_ep(&p);
        DAT_CONN_QUAL q = fresh_qual();
        DAT_CR_PARAM cp;
        DAT_CR_HANDLE cr;
        DAT_EVENT ev;

        memset(out, 0x5a, sizeof(out));
        memset(back, 0xa5, sizeof(back));
        side_psp(&p, q);
        cr = connect_and_get_cr(&a, aep, &p, q, out, sizeof(out));
        cr_assert_eq(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS);
        cr_assert_eq(cp.private_data_size, (DAT_COUNT)sizeof(out));
        cr_expect_eq(memcmp(cp.private_data, out, sizeof(out)), 0);
        /* dat_cr_query(3DAT): the remote IA address is the active host's. */
        cr_assert_eq(cp.remote_ia_address_ptr->sa_family, AF_INET);
        cr_expect_eq(((struct sockaddr_in *)cp.remote_ia_address_ptr)->sin_addr.s_addr,
                     ((struct sockaddr_in *)&a.address)->sin_addr.s_addr);
        cr_expect_neq(((struct sockaddr_in *)&a.address)->sin_addr.s_addr,
                      ((struct sockaddr_in *)&p.address)->sin_addr.s_addr);
        cr_assert_eq(dat_cr_accept(cr, pep, sizeof(back), back), DAT_SUCCESS);
        ev = expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_assert_eq(ev.event_data.connect_event_data.private_data_size, (DAT_COUNT)sizeof(back));
        cr_expect_eq(memcmp(ev.event_data.connect_event_data.private_data, back, sizeof(back)), 0);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_CONNECTED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_CONNECTED);
        /* dat_ep_disconnect(3DAT): DISCONNECTED on both hosts. */
        cr_assert_eq(dat_ep_disconnect(aep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_DISCONNECTED);
}

/* dat_cr_reject(3DAT) across hosts: PEER_REJECTED, EP Disconnected. */
Test(cross_host, reject_is_peer_rejected)
{
        check_reject(&a, &p);
}

/* dat_ep_connect(3DAT): the timeout expires before the remote consumer
 * answers -> TIMED_OUT, EP Disconnected. */
Test(cross_host, unanswered_request_times_out)
{
        check_timeout(&a, &p);
}

/* dat_ep_connect(3DAT): no listener on the remote host's conn_qual ->
 * NON_PEER_REJECTED, EP Disconnected. */
Test(cross_host, no_listener_is_non_peer_rejected)
{
        check_no_listener(&a, &p);
}

/* The issue: "listener dies mid-request": the listening process on the
 * remote host dies with the request pending -> the active side's
 * connection is not established (NON_PEER_REJECTED or BROKEN). */
Test(cross_host, listener_dies_mid_request)
{
        datd_export_env(&d1);
        check_listener_dies_mid_request(&a, &p, "datd-tcp");
}

/* The issue: "peer host link cut (ip link down)": a connection to a host
 * whose cable is pulled breaks (DAT_CONNECTION_EVENT_BROKEN, EP
 * Disconnected) within the bound. */
Test(cross_host, link_cut_breaks_the_connection)
{
        DAT_EP_HANDLE aep, pep;
        DAT_CONN_QUAL q = fresh_qual();

        side_psp(&p, q);
        connect_pair(&a, &p, q, &aep, &pep);
        cr_assert_eq(test_net_link_down(net, 1), 0);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        cr_expect_eq(ep_state_of(pep), DAT_EP_STATE_DISCONNECTED);
}

/* dat_ep_dup_connect(3DAT) across hosts: the request reaches the remote
 * end of the duplicated EP (same host, same conn_qual). */
Test(cross_host, dup_connect_reaches_the_same_remote_end)
{
        check_dup_connect(&a, &p);
}

/* dat_cr_handoff(3DAT) of a request that came from another host. */
Test(cross_host, handoff_moves_the_request_to_another_conn_qual)
{
        check_handoff(&a, &p);
}

/* TCP connections of a host in TIME_WAIT (ss inside its namespace). */
static unsigned time_wait_count(unsigned host)
{
        char *argv[] = { "ss", "-Htn", "state", "time-wait", NULL };
        char *out = NULL;
        unsigned n = 0;

        cr_assert_eq(test_net_run_in(net, host, argv, &out, 10000), 0, "ss in host %u", host);
        for (const char *c = out; c && *c; c++)
                n += *c == '\n';
        free(out);
        return n;
}

/* A data connection closed on the host that connected it would hold one of
 * that host's ephemeral ports in TIME_WAIT for a minute: a thousand
 * connections a second to one peer used half the port range, and connect()
 * then crawled (the rate fell sixfold) before it would have failed.  The
 * active end's FIN goes after the passive end's (channel.h), so the TIME_WAIT
 * stays on the accepting host, where it holds no port another connection
 * needs. */
Test(cross_host, closed_connections_leave_no_time_wait_on_the_connecting_host)
{
        enum { CONNS = 40 };
        DAT_CONN_QUAL q = fresh_qual();
        unsigned before = time_wait_count(0), after;

        side_psp(&p, q);
        for (int i = 0; i < CONNS; i++) {
                DAT_EP_HANDLE aep, pep;

                connect_pair(&a, &p, q, &aep, &pep);
                cr_assert_eq(dat_ep_disconnect(aep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
                expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
                expect_event(p.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
                cr_assert_eq(dat_ep_free(pep), DAT_SUCCESS);
                cr_assert_eq(dat_ep_free(aep), DAT_SUCCESS);
        }
        after = time_wait_count(0);
        cr_expect_leq(after - before, CONNS / 10, "%u of %d connections in TIME_WAIT on the connecting host",
                      after - before, CONNS);
}

enum { AT_ONCE_CONNS = 10 };

/* The accepting side of connections_ended_at_once..., in a process of its
 * own on host 1 (the datd libdat reaches is host 1's): accepts
 * AT_ONCE_CONNS connections one after the other on qual, says when each is
 * established (a byte on up_fd), frees each EP once it is disconnected.
 * Returns the exit status: 0, or the step that failed. */
static int at_once_acceptor(void *arg, int ready_fd, int up_fd)
{
        struct child_listener l;
        DAT_COUNT more;
        DAT_EVENT ev;

        if (!child_listener_open(&l, "datd-tcp", *(const DAT_CONN_QUAL *)arg))
                return 2;
        if (write(ready_fd, "r", 1) != 1)
                return 3;
        for (int i = 0; i < AT_ONCE_CONNS; i++) {
                DAT_EP_HANDLE ep;

                if (dat_evd_wait(l.cr_evd, CONN_EVENT_WAIT_US, 1, &ev, &more) ||
                    ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
                    dat_ep_create(l.ia, l.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, l.conn_evd, NULL, &ep) ||
                    dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL))
                        return 4;
                if (dat_evd_wait(l.conn_evd, CONN_EVENT_WAIT_US, 1, &ev, &more) ||
                    ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED || write(up_fd, "u", 1) != 1)
                        return 5;
                if (dat_evd_wait(l.conn_evd, CONN_EVENT_WAIT_US, 1, &ev, &more) ||
                    ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED || dat_ep_free(ep))
                        return 6;
        }
        return 0;
}

/* The same when the connecting side does not wait for the accepting one:
 * it frees its EP, or resets it for another connection, as soon as its own
 * DISCONNECTED comes.  The accepting process is stopped (SIGSTOP) from
 * before the disconnect until then, so it cannot have ended its end of
 * the TCP connection first; the connecting side's close waits for that end
 * (channel_closer.h).  Closed at once, every connection was in TIME_WAIT
 * on the connecting host. */
Test(cross_host, connections_ended_at_once_by_the_connecting_side_leave_no_time_wait_there)
{
        DAT_CONN_QUAL q = fresh_qual();
        unsigned before = time_wait_count(0), after;
        DAT_EP_HANDLE reused = DAT_HANDLE_NULL;
        int up, status;
        pid_t child = fork_child(at_once_acceptor, &q, &up);
        char c;

        for (int i = 0; i < AT_ONCE_CONNS; i++) {
                DAT_EP_HANDLE aep = side_ep(&a);

                cr_assert_eq(dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&p.address, q, CONN_EVENT_WAIT_US, 0,
                                            NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                             DAT_SUCCESS);
                expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
                cr_assert_eq(read(up, &c, 1), 1, "the accepting process failed");
                cr_assert_eq(kill(child, SIGSTOP), 0);
                cr_assert_eq(waitpid(child, &status, WUNTRACED), child);
                cr_assert_eq(dat_ep_disconnect(aep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
                expect_event(a.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
                if (i % 2 == 0) {
                        cr_assert_eq(dat_ep_free(aep), DAT_SUCCESS);
                } else {
                        cr_assert_eq(dat_ep_reset(aep), DAT_SUCCESS);
                        if (reused != DAT_HANDLE_NULL)
                                cr_assert_eq(dat_ep_free(reused), DAT_SUCCESS);
                        reused = aep;
                }
                cr_assert_eq(kill(child, SIGCONT), 0);
        }
        cr_assert_eq(waitpid(child, &status, 0), child);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the accepting process: status 0x%x",
                  status);
        if (reused != DAT_HANDLE_NULL)
                cr_assert_eq(dat_ep_free(reused), DAT_SUCCESS);
        close(up);
        after = time_wait_count(0);
        cr_expect_leq(after - before, AT_ONCE_CONNS / 10,
                      "%u of %d connections in TIME_WAIT on the connecting host", after - before,
                      AT_ONCE_CONNS);
}
