/* Connections between hosts (PROTOCOL.md, "datd to datd"): two or three
 * hosts as network namespaces (tests/netns.h), a datd in each, and raw
 * protocol clients of each datd.  A client reaches its datd through the
 * datd's filesystem socket from any namespace, and every TCP connection of
 * the negotiation is made by the datds inside their hosts, so the clients
 * stay in the test process.  Every event and refusal the DAT man pages name
 * is checked on both hosts. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "common/macro.h"
#include "daemon/cm.h"
#include "tests/daemon/bus-client.h"
#include "tests/daemon/child.h"
#include "tests/daemon/conn-expect.h"
#include "tests/harness.h"
#include "tests/netns.h"

#define DAT_ERR_TYPE(s) ((uint32_t) (s) & 0x3fff0000u)

static struct test_net *net;
static struct datd_instance datd[3];
/* a: the passive side on host 1; b: the active side on host 0. */
static struct cc a = { .fd = -1 }, b = { .fd = -1 }, x = { .fd = -1 };
static struct sockaddr_storage host1;
static socklen_t host1_len;

static void setup(void)
{
        const char *why;

        if (!test_net_available(&why))
                cr_skip_test("%s", why);
}

static void teardown(void)
{
        cc_close(&a);
        cc_close(&b);
        cc_close(&x);
        for (unsigned i = 0; i < 3; i++)
                datd_stop(&datd[i]);
        test_net_destroy(&net);
}

/* One timeout for every suite of this program. */
#define TEST_TIMEOUT_S 60
TestSuite(datd_conn_hosts, .init = setup, .fini = teardown, .timeout = TEST_TIMEOUT_S);

/* n_hosts hosts, a datd on hosts 0 and 1; a on host 1's tcp IA, b on host 0's. */
static void start(unsigned n_hosts)
{
        cr_assert_eq(test_net_create(&net, n_hosts), 0);
        for (unsigned i = 0; i < 2; i++)
                cr_assert_eq(test_net_datd_start(net, i, &datd[i]), 0, "datd on host %u", i);
        cr_assert_eq(cc_open(&a, datd[1].socket_path, "tcp"), 0);
        cr_assert_eq(cc_open(&b, datd[0].socket_path, "tcp"), 0);
        host1_len = cc_addr4(&host1, test_net_host_addr4(net, 1));
}

static void stop(void)
{
        cc_close(&a);
        cc_close(&b);
        cc_close(&x);
        for (unsigned i = 0; i < 2; i++)
                cr_expect_eq(datd_stop(&datd[i]), 0, "datd %u's exit status after SIGTERM", i);
}

/* b on host 0 connects to a on host 1. */
static void establish(uint64_t qual, uint32_t *a_conn, uint32_t *b_conn)
{
        expect_established(&a, &b, &host1, host1_len, qual, a_conn, b_conn);
}

/* dat_ep_connect(3DAT), dat_cr_accept(3DAT) across hosts: the request
 * carries the connecter's private data and address, ESTABLISHED reaches both
 * ends with the peer's private data. */
Test(datd_conn_hosts, accept_establishes_both_ends_with_private_data)
{
        uint8_t pd1[64], pd2[64];
        union datp_message req, ev;
        uint32_t b_conn, a_conn = 0, cr;
        struct sockaddr_storage host0;

        start(2);
        fill_pattern(pd1, sizeof(pd1), 1);
        fill_pattern(pd2, sizeof(pd2), 77);
        expect_listen(&a, 100);
        b_conn = expect_connect(&b, &host1, host1_len, 100, 5000000, pd1, sizeof(pd1));
        cr = expect_request(&a, &req);
        cr_expect_eq(req.ev_conn_request.pd_len, sizeof(pd1));
        cr_expect_eq(memcmp(req.ev_conn_request.private_data, pd1, sizeof(pd1)), 0);
        cc_addr4(&host0, test_net_host_addr4(net, 0));
        cr_expect_eq(memcmp(&((struct sockaddr_in *) &req.ev_conn_request.remote_address)->sin_addr,
                            &((struct sockaddr_in *) &host0)->sin_addr, 4), 0,
                     "the request names the connecter's IA address");
        cr_assert_eq(cc_accept(&a, cr, pd2, sizeof(pd2), &a_conn), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, &ev);
        cr_expect_eq(ev.ev_conn.pd_len, sizeof(pd2));
        cr_expect_eq(memcmp(ev.ev_conn.private_data, pd2, sizeof(pd2)), 0);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, &ev);
        cr_expect_eq(ev.ev_conn.pd_len, sizeof(pd1));
        cr_expect_eq(memcmp(ev.ev_conn.private_data, pd1, sizeof(pd1)), 0);
        stop();
}

/* dat_cr_reject(3DAT): PEER_REJECTED with the rejecter's private data. */
Test(datd_conn_hosts, reject_is_peer_rejected_with_private_data)
{
        uint8_t pd[64];
        union datp_message ev;
        uint32_t b_conn, cr;

        start(2);
        fill_pattern(pd, sizeof(pd), 5);
        expect_listen(&a, 101);
        b_conn = expect_connect(&b, &host1, host1_len, 101, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        cr_assert_eq(cc_reject(&a, cr, pd, sizeof(pd)), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_PEER_REJECTED, &ev);
        cr_expect_eq(ev.ev_conn.pd_len, sizeof(pd));
        cr_expect_eq(memcmp(ev.ev_conn.private_data, pd, sizeof(pd)), 0);
        stop();
}

/* dat_ep_connect(3DAT): no listener on the remote conn_qual -> NON_PEER_REJECTED. */
Test(datd_conn_hosts, no_listener_is_non_peer_rejected)
{
        uint32_t b_conn;

        start(2);
        b_conn = expect_connect(&b, &host1, host1_len, 102, UINT64_MAX, NULL, 0);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        stop();
}

/* A host with no datd on the CM port: DAT_CONNECTION_EVENT_UNREACHABLE. */
Test(datd_conn_hosts, a_host_without_datd_is_unreachable)
{
        struct sockaddr_storage host2;
        socklen_t len;
        uint32_t b_conn;

        start(3);
        len = cc_addr4(&host2, test_net_host_addr4(net, 2));
        b_conn = expect_connect(&b, &host2, len, 103, UINT64_MAX, NULL, 0);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_UNREACHABLE, NULL);
        stop();
}

/* Timeout: TIMED_OUT on the active host; the passive host's late accept
 * fails (ACCEPT_COMPLETION_ERROR). */
Test(datd_conn_hosts, timeout_is_timed_out_and_a_late_accept_fails)
{
        uint32_t b_conn, a_conn = 0, cr;

        start(2);
        expect_listen(&a, 104);
        b_conn = expect_connect(&b, &host1, host1_len, 104, 200000, NULL, 0);
        cr = expect_request(&a, NULL);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_TIMED_OUT, NULL);
        usleep(100000); /* the withdrawal crosses the link */
        cr_expect_eq(cc_accept(&a, cr, NULL, 0, &a_conn), DAT_SUCCESS);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL);
        stop();
}

/* The listener's process dies while a request waits: NON_PEER_REJECTED. */
Test(datd_conn_hosts, listener_death_mid_request_is_non_peer_rejected)
{
        uint32_t b_conn;

        start(2);
        expect_listen(&a, 105);
        b_conn = expect_connect(&b, &host1, host1_len, 105, UINT64_MAX, NULL, 0);
        expect_request(&a, NULL);
        cc_close(&a);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        stop();
}

/* dat_ep_disconnect(3DAT): DISCONNECTED on both hosts. */
Test(datd_conn_hosts, disconnect_reaches_both_hosts)
{
        uint32_t a_conn, b_conn;

        start(2);
        establish(106, &a_conn, &b_conn);
        cr_assert_eq(cc_disconnect(&b, b_conn, DATP_CLOSE_GRACEFUL), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        stop();
}

/* The issue: a peer process that dies -> BROKEN on the other host. */
Test(datd_conn_hosts, death_of_the_peer_process_is_broken_on_the_other_host)
{
        uint32_t a_conn, b_conn;

        start(2);
        establish(107, &a_conn, &b_conn);
        cc_close(&a);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_BROKEN, NULL);
        stop();
}

/* The peer host's cable is cut: the CM link's keepalive fails and both ends
 * get BROKEN (two missed keepalives of cm_keepalive_ms: about two seconds). */
Test(datd_conn_hosts, link_cut_breaks_both_ends)
{
        uint32_t a_conn, b_conn;

        start(2);
        establish(108, &a_conn, &b_conn);
        cr_assert_eq(test_net_link_down(net, 1), 0);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_BROKEN, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_BROKEN, NULL);
        stop();
}

/* A stall of the whole machine (a VM descheduled, a host swapping): both
 * datds stop for three keepalive periods and go on.  Neither heard the
 * other meanwhile, and neither was silent by its own doing: the link and
 * the connection stay (each datd's keepalive timer comes late, and a late
 * timer judges no link by the time it slept through).  It used to break
 * the connection (seen in the dapl2 suite under ASan on a loaded machine). */
Test(datd_conn_hosts, a_stall_of_both_hosts_breaks_nothing)
{
        struct timespec stall = { .tv_sec = 3 };
        uint32_t a_conn, b_conn;

        start(2);
        establish(113, &a_conn, &b_conn);
        for (unsigned i = 0; i < 2; i++)
                cr_assert_eq(kill(datd[i].pid, SIGSTOP), 0);
        nanosleep(&stall, NULL);
        for (unsigned i = 0; i < 2; i++)
                cr_assert_eq(kill(datd[i].pid, SIGCONT), 0);
        cr_expect_eq(cc_no_event(&b, DATP_EV_CONN, 2500), 0, "host 1's end got an event");
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN, 100), 0, "host 0's end got an event");
        cr_assert_eq(cc_disconnect(&b, b_conn, DATP_CLOSE_GRACEFUL), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        stop();
}

/* dat_cr_handoff(3DAT) of a request from another host. */
Test(datd_conn_hosts, handoff_of_a_remote_request)
{
        uint32_t b_conn, x_conn = 0, cr;
        union datp_message req;

        start(2);
        cr_assert_eq(cc_open(&x, datd[1].socket_path, "tcp"), 0);
        expect_listen(&a, 109);
        expect_listen(&x, 110);
        b_conn = expect_connect(&b, &host1, host1_len, 109, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        cr_assert_eq(cc_handoff(&a, cr, 110), DAT_SUCCESS);
        cr = expect_request(&x, &req);
        cr_expect_eq(req.ev_conn_request.conn_qual, 110);
        cr_assert_eq(cc_accept(&x, cr, NULL, 0, &x_conn), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_ev_conn(&x, x_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        stop();
}

/* dat_ep_dup_connect(3DAT): same remote host and conn_qual. */
Test(datd_conn_hosts, dup_connect_reaches_the_same_remote_listener)
{
        uint32_t a_conn, b_conn, dup = 0, a_dup = 0, cr;
        union datp_message req;

        start(2);
        establish(111, &a_conn, &b_conn);
        cr_assert_eq(cc_dup_connect(&b, b_conn, UINT64_MAX, NULL, 0, &dup), DAT_SUCCESS);
        cr = expect_request(&a, &req);
        cr_expect_eq(req.ev_conn_request.conn_qual, 111);
        cr_assert_eq(cc_accept(&a, cr, NULL, 0, &a_dup), DAT_SUCCESS);
        expect_ev_conn(&b, dup, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_ev_conn(&a, a_dup, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        stop();
}

/* limits.max_cm_links: a connect to one host more than the links allowed is
 * UNREACHABLE; the hosts already linked stay reachable. */
Test(datd_conn_hosts, max_cm_links_is_enforced)
{
        _cleanup_free_ char *base = NULL, *config = NULL;
        struct sockaddr_storage host2;
        socklen_t len;
        uint32_t a_conn, b_conn, c;

        cr_assert_eq(test_net_create(&net, 3), 0);
        base = test_net_datd_config(net, 0, false);
        cr_assert_not_null(base);
        /* Host 0's config with one link at most. */
        cr_assert_geq(asprintf(&config, "%.*s, \"limits\": {\"max_cm_links\": 1}}",
                               (int) (strrchr(base, '}') - base), base), 0);
        datd[0].netns = test_net_host_ns(net, 0);
        cr_assert_eq(datd_start(&datd[0], config), 0);
        for (unsigned i = 1; i < 3; i++)
                cr_assert_eq(test_net_datd_start(net, i, &datd[i]), 0, "datd on host %u", i);
        cr_assert_eq(cc_open(&a, datd[1].socket_path, "tcp"), 0);
        cr_assert_eq(cc_open(&b, datd[0].socket_path, "tcp"), 0);
        cr_assert_eq(cc_open(&x, datd[2].socket_path, "tcp"), 0);
        host1_len = cc_addr4(&host1, test_net_host_addr4(net, 1));
        len = cc_addr4(&host2, test_net_host_addr4(net, 2));
        expect_listen(&x, 112);
        establish(112, &a_conn, &b_conn);
        c = expect_connect(&b, &host2, len, 112, UINT64_MAX, NULL, 0);
        expect_ev_conn(&b, c, DAT_CONNECTION_EVENT_UNREACHABLE, NULL);
        cr_expect_eq(cc_no_event(&x, DATP_EV_CONN_REQUEST, 200), 0, "host 2 heard the request");
        for (unsigned i = 0; i < 3; i++)
                cr_expect_eq(datd_stop(&datd[i]), 0, "datd %u's exit status after SIGTERM", i);
}

/* An shm IA on the tcp IA's address (listed first): a request from
 * another host still reaches the tcp IA's listener (the data of a
 * connection between hosts goes over TCP). */
Test(datd_conn_hosts, an_shm_ia_on_the_same_address_does_not_hide_the_tcp_listener)
{
        _cleanup_free_ char *base = NULL, *config = NULL;
        const char *loopback = "\"127.0.0.1\"";
        uint32_t a_conn, b_conn;
        char *at;

        cr_assert_eq(test_net_create(&net, 2), 0);
        base = test_net_datd_config(net, 1, false);
        cr_assert_not_null(base);
        at = strstr(base, loopback);
        cr_assert_not_null(at, "no shm IA on 127.0.0.1 in %s", base);
        cr_assert_geq(asprintf(&config, "%.*s\"%s\"%s", (int) (at - base), base,
                               test_net_host_addr4(net, 1), at + strlen(loopback)), 0);
        datd[1].netns = test_net_host_ns(net, 1);
        cr_assert_eq(datd_start(&datd[1], config), 0);
        cr_assert_eq(test_net_datd_start(net, 0, &datd[0]), 0);
        cr_assert_eq(cc_open(&a, datd[1].socket_path, "tcp"), 0);
        cr_assert_eq(cc_open(&b, datd[0].socket_path, "tcp"), 0);
        host1_len = cc_addr4(&host1, test_net_host_addr4(net, 1));
        establish(116, &a_conn, &b_conn);
        stop();
}

/* A connect to this host's own address stays on this host: from the tcp IA
 * that has the address, and from the shm IA (its address is 127.0.0.1; the
 * host address is the tcp IA's, so that IA's listener takes it). */
Test(datd_conn_hosts, the_hosts_own_address_stays_on_the_host)
{
        uint32_t c, cr, a_conn = 0;

        start(2);
        cr_assert_eq(cc_open(&x, datd[1].socket_path, "tcp"), 0);
        expect_listen(&a, 113);
        c = expect_connect(&x, &host1, host1_len, 113, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        cr_assert_eq(cc_accept(&a, cr, NULL, 0, &a_conn), DAT_SUCCESS);
        expect_ev_conn(&x, c, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        cc_close(&x);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_BROKEN, NULL);
        cr_assert_eq(cc_open(&x, datd[1].socket_path, "shm"), 0);
        c = expect_connect(&x, &host1, host1_len, 113, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        cr_assert_eq(cc_reject(&a, cr, NULL, 0), DAT_SUCCESS);
        expect_ev_conn(&x, c, DAT_CONNECTION_EVENT_PEER_REJECTED, NULL);
        stop();
}

/* The CM port is open to any host: a peer that breaks the CM protocol (bad
 * magic, a message before HELLO) loses its link, and datd keeps serving. */
Test(datd_conn_hosts, a_peer_breaking_the_cm_protocol_is_cut_off)
{
        /* Not CM at all; a CM header (magic, version 2, CONNECT_REQ, 16 bytes) before HELLO. */
        static const struct { const char *bytes; size_t len; } junk[] = {
                { "GET / HTTP/1.0\r\n\r\n", 18 },
                { "DATC\0\2\0\2\0\0\0\x10\0\0\0\0", 16 },
        };
        struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(7471) };
        uint32_t a_conn, b_conn;

        start(2);
        inet_pton(AF_INET, test_net_host_addr4(net, 1), &to.sin_addr);
        for (size_t i = 0; i < ARRAY_SIZE(junk); i++) {
                char buf[512];
                struct timeval tv = { .tv_sec = 5 };
                int fd = test_net_socket(net, 0, AF_INET, SOCK_STREAM, 0);
                ssize_t n;

                cr_assert_geq(fd, 0);
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                cr_assert_eq(connect(fd, (struct sockaddr *) &to, sizeof(to)), 0, "%s", strerror(errno));
                cr_assert_eq(write(fd, junk[i].bytes, junk[i].len), (ssize_t) junk[i].len);
                /* datd's HELLO may come first; then the close. */
                do
                        n = read(fd, buf, sizeof(buf));
                while (n > 0);
                /* Closed with our junk unread: a reset is a close too. */
                cr_expect(n == 0 || errno == ECONNRESET, "junk %zu: the link was not closed (%s)", i,
                          strerror(errno));
                close(fd);
        }
        establish(114, &a_conn, &b_conn);
        stop();
}

/* ---- a test playing the active side's datd (PROTOCOL.md, "datd to datd") */

#define CM_PORT 7471

/* A TCP connection from host `from` to host 1's datd's cm_port, its
 * receive buffer rcvbuf bytes unless 0. */
static int cm_connect_rcvbuf(unsigned from, int rcvbuf)
{
        struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(CM_PORT) };
        struct timeval tv = { .tv_sec = 5 };
        int fd = test_net_socket(net, from, AF_INET, SOCK_STREAM, 0);

        cr_assert_geq(fd, 0);
        inet_pton(AF_INET, test_net_host_addr4(net, 1), &to.sin_addr);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (rcvbuf)
                setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
        cr_assert_eq(connect(fd, (struct sockaddr *) &to, sizeof(to)), 0, "%s", strerror(errno));
        return fd;
}

static int cm_connect_from(unsigned from)
{
        return cm_connect_rcvbuf(from, 0);
}

static void cm_header(struct cm_header *h, uint16_t type, size_t len)
{
        *h = (struct cm_header){ .magic = htonl(CM_MAGIC), .version = htons(CM_VERSION),
                                 .type = htons(type), .length = htonl((uint32_t) len) };
}

static void cm_write(int fd, const void *msg, size_t len)
{
        cr_assert_eq(write(fd, msg, len), (ssize_t) len, "%s", strerror(errno));
}

/* The next message of type on the link (HELLO and KEEPALIVE skipped). */
static void cm_read(int fd, uint16_t type, void *msg, size_t len)
{
        for (;;) {
                uint8_t buf[CM_MAX_MESSAGE];
                struct cm_header *h = (struct cm_header *) buf;
                size_t got = 0, want = sizeof(*h);

                while (got < want) {
                        ssize_t n = read(fd, buf + got, want - got);

                        cr_assert_gt(n, 0, "the link ended or timed out waiting for type %u", type);
                        got += (size_t) n;
                        if (got == sizeof(*h)) {
                                want = ntohl(h->length);
                                cr_assert(want >= sizeof(*h) && want <= sizeof(buf));
                        }
                }
                if (ntohs(h->type) == type) {
                        cr_assert_eq(got, len);
                        memcpy(msg, buf, len);
                        return;
                }
        }
}

static void cm_send_conn_msg(int fd, uint16_t type, uint32_t src, uint32_t dst, uint32_t reason,
                             uint64_t qual)
{
        struct cm_conn c = {
                .src_conn_id = htonl(src),
                .dst_conn_id = htonl(dst),
                .reason = htonl(reason),
                .pid = htonl(1),
                .conn_qual = htobe64(qual),
        };

        cm_header(&c.hdr, type, sizeof(c));
        if (type == CM_CONNECT_REQ) {
                c.src.family = htons(AF_INET);
                inet_pton(AF_INET, test_net_host_addr4(net, 2), c.src.addr);
                c.dst.family = htons(AF_INET);
                inet_pton(AF_INET, test_net_host_addr4(net, 1), c.dst.addr);
        }
        cm_write(fd, &c, sizeof(c));
}

/* Plays the active datd on link: a request from our_id to conn_qual qual,
 * accepted by a; *accept is the passive datd's ACCEPT, *a_conn a's end. */
static void fake_request_accepted(int link, uint32_t our_id, uint64_t qual, struct cm_conn *accept,
                                  uint32_t *a_conn)
{
        uint32_t cr;

        cm_send_conn_msg(link, CM_CONNECT_REQ, our_id, 0, CM_REASON_NONE, qual);
        cr = expect_request(&a, NULL);
        cr_assert_eq(cc_accept(&a, cr, NULL, 0, a_conn), DAT_SUCCESS);
        cm_read(link, CM_ACCEPT, accept, sizeof(*accept));
        cr_assert_eq(ntohl(accept->dst_conn_id), our_id);
}

/* The data connection from host 2 the ACCEPT asked for: its socket. */
static int fake_data_connection(uint32_t our_id, const struct cm_conn *accept)
{
        struct cm_data data = { .src_conn_id = htonl(our_id), .dst_conn_id = accept->src_conn_id };
        int dfd = cm_connect_from(2);

        cm_header(&data.hdr, CM_DATA, sizeof(data));
        memcpy(data.token, accept->token, sizeof(data.token));
        cm_write(dfd, &data, sizeof(data));
        return dfd;
}

/* Host 2's link to host 1, HELLO said, its receive buffer rcvbuf bytes
 * unless 0. */
static int fake_link_as(int rcvbuf, const char host_id[16])
{
        struct cm_hello hello = { .keepalive_ms = htonl(1000) };
        int link = cm_connect_rcvbuf(2, rcvbuf);

        cm_header(&hello.hdr, CM_HELLO, sizeof(hello));
        memcpy(hello.host_id, host_id, sizeof(hello.host_id));
        cm_write(link, &hello, sizeof(hello));
        return link;
}

static int fake_link_rcvbuf(int rcvbuf)
{
        return fake_link_as(rcvbuf, "test-active-datd");
}

static int fake_link(void)
{
        return fake_link_rcvbuf(0);
}

/* The active process sees its second connection ESTABLISHED and at once
 * disconnects its first (dtestcm does, over 1 000 connections): READY of
 * the second, then DISCONNECT of the first, on the link, while the second's
 * data connection is still on its way on its own socket.  The passive host
 * keeps the order they were sent in: ESTABLISHED of the second, then
 * DISCONNECTED of the first (dtestcm's server counts ESTABLISHED events
 * before it waits for DISCONNECTED ones, and frees the EP each names). */
Test(datd_conn_hosts, what_follows_ready_waits_for_its_data_connection)
{
        const uint32_t first_id = 4301, second_id = 4302;
        struct cm_conn first, second;
        uint32_t a_first, a_second;
        int link, dfd1, dfd2;

        start(3);       /* host 2 has no datd: the test is its datd */
        expect_listen(&a, 116);
        link = fake_link();
        fake_request_accepted(link, first_id, 116, &first, &a_first);
        cm_send_conn_msg(link, CM_READY, first_id, ntohl(first.src_conn_id), CM_REASON_NONE, 0);
        dfd1 = fake_data_connection(first_id, &first);
        expect_ev_conn(&a, a_first, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);

        fake_request_accepted(link, second_id, 116, &second, &a_second);
        cm_send_conn_msg(link, CM_READY, second_id, ntohl(second.src_conn_id), CM_REASON_NONE, 0);
        cm_send_conn_msg(link, CM_DISCONNECT, first_id, ntohl(first.src_conn_id),
                         CM_REASON_DISCONNECTED, 0);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN, 300), 0,
                     "the first connection's DISCONNECTED overtook the second's ESTABLISHED");
        dfd2 = fake_data_connection(second_id, &second);
        expect_ev_conn(&a, a_second, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_ev_conn(&a, a_first, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        close(dfd1);
        close(dfd2);
        close(link);
        stop();
}

/* The active side's datd says READY (its end ESTABLISHED), and its process
 * disconnects at once, before the data connection reaches the passive host
 * (it comes on another TCP connection than the link's, so the passive datd
 * may well see it after the DISCONNECT): the passive end still sees the
 * connection it accepted, ESTABLISHED and then DISCONNECTED, not
 * ACCEPT_COMPLETION_ERROR (which would contradict the active end's
 * ESTABLISHED). */
Test(datd_conn_hosts, a_disconnect_overtaking_the_data_connection_still_establishes)
{
        const uint32_t our_id = 4242;
        struct cm_conn accept;
        uint32_t a_conn, passive_id;
        int link, dfd;

        start(3);       /* host 2 has no datd: the test is its datd */
        expect_listen(&a, 115);
        link = fake_link();
        fake_request_accepted(link, our_id, 115, &accept, &a_conn);
        passive_id = ntohl(accept.src_conn_id);
        cm_send_conn_msg(link, CM_READY, our_id, passive_id, CM_REASON_NONE, 0);
        cm_send_conn_msg(link, CM_DISCONNECT, our_id, passive_id, CM_REASON_DISCONNECTED, 0);
        /* Nothing yet: the passive end waits for its data connection. */
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN, 300), 0, "an EV_CONN before the data connection");
        dfd = fake_data_connection(our_id, &accept);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        close(dfd);
        close(link);
        stop();
}

static void keepalive(int link)
{
        struct cm_header h;

        cm_header(&h, CM_KEEPALIVE, sizeof(h));
        cm_write(link, &h, sizeof(h));
}

/* Keeps link up (a keepalive every 300 ms) until c gets an EV_CONN, within
 * ms: 0 and the event in *ev, or -ETIMEDOUT. */
static int keep_link_until_ev_conn(int link, struct cc *c, int ms, union datp_message *ev)
{
        for (int t = 0; t < ms; t += 300) {
                keepalive(link);
                if (cc_event(c, DATP_EV_CONN, ev, 300) == 0)
                        return 0;
        }
        return -ETIMEDOUT;
}

/* How many connection ends datd lists (ListConnections). */
static size_t n_connections_listed(const struct datd_instance *d)
{
        sd_bus *bus = NULL;
        size_t n = SIZE_MAX;

        cr_assert_eq(bus_client_open(d->bus_address, &bus), 0);
        cr_assert_eq(bus_list_connections(bus, NULL, 0, &n), 0);
        sd_bus_flush_close_unref(bus);
        return n;
}

/* PROTOCOL.md §14: a passive end has 10 s and two keepalive periods from
 * its ACCEPT to become ESTABLISHED.  A remote datd that keeps its link up
 * and never says READY (here: once without a data connection, once with
 * one) does not keep the end ACCEPTING, its data socket open and its
 * process's connection count taken: the end gets ACCEPT_COMPLETION_ERROR,
 * the remote datd DISCONNECT BROKEN. */
Test(datd_conn_hosts, an_accepting_end_without_ready_is_given_up)
{
        const uint32_t id_bare = 4401, id_data = 4402;
        struct cm_conn accept_bare, accept_data, disc;
        union datp_message ev;
        uint32_t a_bare, a_data;
        int link, dfd;
        char byte;

        start(3);       /* host 2 has no datd: the test is its datd */
        expect_listen(&a, 117);
        link = fake_link();
        fake_request_accepted(link, id_bare, 117, &accept_bare, &a_bare);
        fake_request_accepted(link, id_data, 117, &accept_data, &a_data);
        dfd = fake_data_connection(id_data, &accept_data);
        cr_assert_eq(n_connections_listed(&datd[1]), 2);
        /* 10 s + 2 x cm_keepalive_ms (1 s), and some room. */
        for (unsigned i = 0; i < 2; i++) {
                cr_assert_eq(keep_link_until_ev_conn(link, &a, 15000, &ev), 0,
                             "end %u still ACCEPTING after 15 s", i);
                cr_expect(ev.ev_conn.conn_id == a_bare || ev.ev_conn.conn_id == a_data);
                cr_expect_eq(ev.ev_conn.event, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
        }
        cr_expect_eq(n_connections_listed(&datd[1]), 0, "an end given up is still listed");
        cm_read(link, CM_DISCONNECT, &disc, sizeof(disc));
        cr_expect_eq(ntohl(disc.reason), CM_REASON_BROKEN);
        cr_expect_eq(read(dfd, &byte, 1), 0, "the data connection was not closed");
        close(dfd);
        close(link);
        stop();
}

static long elapsed_ms(const struct timespec *since)
{
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

/* A child process writing keepalives on link as fast as it can, for 5 s
 * at most (the test kills it sooner). */
static pid_t keepalive_flood(int link)
{
        static uint8_t blob[1 << 16];
        pid_t pid;

        for (size_t i = 0; i < sizeof(blob); i += sizeof(struct cm_header))
                cm_header((struct cm_header *) (blob + i), CM_KEEPALIVE, sizeof(struct cm_header));
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                struct timespec start;

                clock_gettime(CLOCK_MONOTONIC, &start);
                while (elapsed_ms(&start) < 5000)
                        if (write(link, blob, sizeof(blob)) < 0)
                                _exit(1);
                _exit(0);
        }
        return pid;
}

/* A CM peer that floods its link with keepalives takes its turn with the
 * others: datd's clients are answered meanwhile (without a bound on the
 * messages read per wakeup, a LISTEN waited seconds, for as long as the
 * flood lasted, and the keepalive timer did not run). */
Test(datd_conn_hosts, a_cm_peer_flooding_its_link_does_not_starve_clients)
{
        uint32_t listener;
        uint64_t qual;
        pid_t flood;
        int link;

        start(3);       /* host 2 has no datd: the test is its datd */
        link = fake_link();
        expect_listen(&a, 118);         /* the HELLO is in */
        flood = keepalive_flood(link);
        usleep(300000);
        for (unsigned k = 0; k < 5; k++) {
                struct timespec t0;
                long r, ms;

                clock_gettime(CLOCK_MONOTONIC, &t0);
                r = cc_listen(&a, DATP_LISTENER_PSP, 119 + k, &listener, &qual);
                ms = elapsed_ms(&t0);
                cr_expect_eq(r, DAT_SUCCESS);
                /* An answer takes a millisecond; without the bound the
                 * flood held it for the rest of its 5 s.  Half of that
                 * leaves a loaded machine (the sanitizers' build) room. */
                cr_expect_lt(ms, 2500, "LISTEN %u answered in %ld ms during the flood", k, ms);
        }
        child_kill(&flood);
        close(link);
        stop();
}

/* As start(n_hosts), the datd of host `limited` with these "limits" (a
 * JSON object). */
static void start_limited(unsigned n_hosts, unsigned limited, const char *limits)
{
        _cleanup_free_ char *base = NULL, *config = NULL;

        cr_assert_eq(test_net_create(&net, n_hosts), 0);
        base = test_net_datd_config(net, limited, false);
        cr_assert_not_null(base);
        cr_assert_geq(asprintf(&config, "%.*s, \"limits\": %s}", (int) (strrchr(base, '}') - base),
                               base, limits), 0);
        datd[limited].netns = test_net_host_ns(net, limited);
        cr_assert_eq(datd_start(&datd[limited], config), 0);
        cr_assert_eq(test_net_datd_start(net, !limited, &datd[!limited]), 0);
        cr_assert_eq(cc_open(&a, datd[1].socket_path, "tcp"), 0);
        cr_assert_eq(cc_open(&b, datd[0].socket_path, "tcp"), 0);
        host1_len = cc_addr4(&host1, test_net_host_addr4(net, 1));
}

/* dat_ia_query(3DAT): a listener's process never gets more private data
 * than its host's max_private_data, whatever another host's datd sends (up
 * to the wire's 256 bytes): the request is refused (REJECT NON_PEER). */
Test(datd_conn_hosts, a_remote_request_beyond_max_private_data_is_refused)
{
        struct cm_conn req = {
                .src_conn_id = htonl(4501),
                .pid = htonl(1),
                .conn_qual = htobe64(120),
                .pd_len = htonl(65),
        }, reject;
        int link;

        start_limited(3, 1, "{\"max_private_data\": 64}");
        expect_listen(&a, 120);
        link = fake_link();
        cm_header(&req.hdr, CM_CONNECT_REQ, sizeof(req));
        req.src.family = htons(AF_INET);
        inet_pton(AF_INET, test_net_host_addr4(net, 2), req.src.addr);
        req.dst.family = htons(AF_INET);
        inet_pton(AF_INET, test_net_host_addr4(net, 1), req.dst.addr);
        fill_pattern(req.private_data, 65, 3);
        cm_write(link, &req, sizeof(req));
        cm_read(link, CM_REJECT, &reject, sizeof(reject));
        cr_expect_eq(ntohl(reject.dst_conn_id), 4501);
        cr_expect_eq(ntohl(reject.reason), CM_REASON_NON_PEER);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN_REQUEST, 100), 0,
                     "the listener got a request with 65 bytes of private data (limit 64)");
        close(link);
        stop();
}

/* Host 2's CM port, where the test plays the passive datd: the listening
 * socket. */
static int cm_listen_on_host2(void)
{
        struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(CM_PORT) };
        int one = 1, lfd = test_net_socket(net, 2, AF_INET, SOCK_STREAM, 0);

        cr_assert_geq(lfd, 0);
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        cr_assert_eq(bind(lfd, (struct sockaddr *) &any, sizeof(any)), 0, "%s", strerror(errno));
        cr_assert_eq(listen(lfd, 1), 0);
        return lfd;
}

/* The link host 0's datd made to host 2's CM port, its HELLO answered. */
static int fake_passive_link(int lfd)
{
        struct cm_hello hello = { .keepalive_ms = htonl(1000) };
        struct timeval tv = { .tv_sec = 5 };
        struct pollfd p = { .fd = lfd, .events = POLLIN };
        int link;

        cr_assert_eq(poll(&p, 1, 5000), 1, "host 0's datd did not connect");
        link = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        cr_assert_geq(link, 0, "%s", strerror(errno));
        setsockopt(link, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        cm_header(&hello.hdr, CM_HELLO, sizeof(hello));
        memcpy(hello.host_id, "test-passiv-datd", sizeof(hello.host_id));
        cm_write(link, &hello, sizeof(hello));
        return link;
}

/* dat_ep_connect(3DAT): the active process never gets more private data
 * than its host's max_private_data either: an ACCEPT with more fails the
 * connection (NON_PEER_REJECTED), and the passive datd is told (DISCONNECT
 * WITHDRAWN). */
Test(datd_conn_hosts, a_remote_accept_beyond_max_private_data_fails_the_connection)
{
        struct cm_conn req, acc = { .src_conn_id = htonl(4601), .pid = htonl(1) }, disc;
        struct sockaddr_storage host2;
        socklen_t len;
        uint32_t b_conn;
        int lfd, link;

        start_limited(3, 0, "{\"max_private_data\": 64}");
        lfd = cm_listen_on_host2();
        len = cc_addr4(&host2, test_net_host_addr4(net, 2));
        b_conn = expect_connect(&b, &host2, len, 121, UINT64_MAX, NULL, 0);
        link = fake_passive_link(lfd);
        cm_read(link, CM_CONNECT_REQ, &req, sizeof(req));
        cm_header(&acc.hdr, CM_ACCEPT, sizeof(acc));
        acc.dst_conn_id = req.src_conn_id;
        acc.pd_len = htonl(65);
        fill_pattern(acc.private_data, 65, 9);
        cm_write(link, &acc, sizeof(acc));
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        cm_read(link, CM_DISCONNECT, &disc, sizeof(disc));
        cr_expect_eq(ntohl(disc.dst_conn_id), 4601);
        cr_expect_eq(ntohl(disc.reason), CM_REASON_WITHDRAWN);
        close(link);
        close(lfd);
        stop();
}

/* An incoming socket on the CM port has two keepalive periods from its
 * connect to say what it is (HELLO or DATA), however it spends them: one
 * that drips a byte every 300 ms is closed all the same (the bound used to
 * start again at every byte, and such sockets could hold every slot). */
Test(datd_conn_hosts, a_cm_socket_dripping_bytes_is_closed_in_time)
{
        struct cm_hello hello = {};
        struct timespec t0;
        bool closed = false;
        int fd;

        start(3);
        cm_header(&hello.hdr, CM_HELLO, sizeof(hello));
        fd = cm_connect_from(2);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        /* Two periods of 1 s, the keepalive timer's half period, room: 4 s
         * (a whole HELLO would take 21.6 s at this pace). */
        for (size_t i = 0; i < sizeof(hello) && !closed && elapsed_ms(&t0) < 4000; i++) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char byte;

                if (send(fd, (const uint8_t *) &hello + i, 1, MSG_NOSIGNAL) < 0 ||
                    (poll(&p, 1, 300) == 1 && read(fd, &byte, 1) <= 0))
                        closed = true;  /* datd writes nothing to it: EOF or reset */
        }
        cr_expect(closed, "a socket dripping its HELLO is still open after %ld ms", elapsed_ms(&t0));
        close(fd);
        stop();
}

/* Whether datd closes the link fd within ms, kept up meanwhile (a
 * keepalive every 200 ms, datd's own read and dropped): EOF or a reset. */
static bool cm_closed_within(int fd, int ms)
{
        struct cm_header h;

        cm_header(&h, CM_KEEPALIVE, sizeof(h));
        for (int t = 0; t < ms; t += 200) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                uint8_t buf[CM_MAX_MESSAGE];

                if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) < 0)
                        return true;
                if (poll(&p, 1, 200) == 1 && read(fd, buf, sizeof(buf)) <= 0)
                        return true;
        }
        return false;
}

/* One link per pair of datds (PROTOCOL.md §14): a host that opens link
 * after link replaces its own, and takes one of max_cm_links, not all of
 * them: another host still gets a link, and its connection is made. */
Test(datd_conn_hosts, one_host_has_one_incoming_link)
{
        int links[3];
        uint32_t a_conn, b_conn;

        start_limited(3, 1, "{\"max_cm_links\": 2}");
        for (unsigned i = 0; i < ARRAY_SIZE(links); i++) {
                links[i] = fake_link();
                expect_listen(&a, 122 + i);     /* a round trip: the HELLO is in */
        }
        for (unsigned i = 0; i + 1 < ARRAY_SIZE(links); i++)
                cr_expect(cm_closed_within(links[i], 1000), "link %u was not replaced", i);
        cr_expect(!cm_closed_within(links[2], 400), "the newest link was closed");
        establish(125, &a_conn, &b_conn);
        for (unsigned i = 0; i < ARRAY_SIZE(links); i++)
                close(links[i]);
        stop();
}

/* ... but a HELLO with another host_id from that host, while its link is
 * up, is refused, and the link stays: any process there (not its datd,
 * whose host_id it cannot know) could otherwise break every connection
 * over it. */
Test(datd_conn_hosts, another_datd_from_a_linked_host_is_refused)
{
        struct cm_conn accept;
        uint32_t a_conn;
        int link, impostor;

        start(3);       /* host 2 has no datd: the test is its datd */
        expect_listen(&a, 126);
        link = fake_link();
        expect_listen(&a, 127);         /* a round trip: the HELLO is in */
        impostor = fake_link_as(0, "someone-else-16b");
        cr_expect(cm_closed_within(impostor, 1000), "the second link was not refused");
        cr_expect(!cm_closed_within(link, 400), "the first link was closed");
        /* It still carries a request, and its accept. */
        fake_request_accepted(link, 4401, 126, &accept, &a_conn);
        close(impostor);
        close(link);
        stop();
}

/* limits.max_cm_send_bytes: a peer that reads nothing loses its link when
 * that much waits unsent, also when the last message is sent outside the
 * link's own reading (here: the REJECTs of a closed listener's requests).
 * The link used to be switched off and kept for ever (its unread bytes
 * counted as heard), holding its max_cm_links slot: another host could not
 * link any more. */
Test(datd_conn_hosts, a_link_whose_peer_reads_nothing_is_freed)
{
        const unsigned n_requests = 1000;       /* 368 KB of REJECTs */
        struct cm_header ka;
        union datp_message ev;
        uint32_t a_conn, b_conn;
        int link;

        start_limited(3, 1, "{\"max_cm_links\": 1, \"max_cm_send_bytes\": 65536, "
                            "\"max_pending_requests\": 1024}");
        expect_listen(&a, 126);
        link = fake_link_rcvbuf(4096);          /* reads nothing from here on */
        for (unsigned i = 0; i < n_requests; i++)
                cm_send_conn_msg(link, CM_CONNECT_REQ, 5000 + i, 0, CM_REASON_NONE, 126);
        for (unsigned i = 0; i < n_requests; i++)
                cr_assert_eq(cc_event(&a, DATP_EV_CONN_REQUEST, &ev, EV_MS), 0, "request %u", i);
        cc_close(&a);                           /* every request refused at once */
        cm_header(&ka, CM_KEEPALIVE, sizeof(ka));
        for (unsigned i = 0; i < 16; i++)       /* left unread at datd */
                send(link, &ka, sizeof(ka), MSG_NOSIGNAL | MSG_DONTWAIT);
        usleep(200000);
        cr_assert_eq(cc_open(&a, datd[1].socket_path, "tcp"), 0);
        establish(127, &a_conn, &b_conn);
        close(link);
        stop();
}

/* ---- this host's addresses and the IAs' policy (datd.conf(5), ACCESS POLICY) */

#define SECURE_QUAL 6301
#define QUIET_MS 300    /* how long "no request" is watched */

/* Host 1's datd (of n_hosts, host 0's datd as ever) serves a tcp IA
 * "secure" on the host's address that only daemon may open, and an shm IA
 * "open" without an address; a is root on secure, listening at SECURE_QUAL. */
static void start_secure(unsigned n_hosts)
{
        _cleanup_free_ char *config = NULL;

        cr_assert_eq(test_net_create(&net, n_hosts), 0);
        cr_assert_geq(asprintf(&config, "{\"log_level\": \"debug\", \"verbs\": false, \"ias\": ["
                               "{\"name\": \"secure\", \"transport\": \"tcp\", \"address\": \"%s\", "
                               "\"allow_users\": [\"daemon\"]},"
                               "{\"name\": \"open\", \"transport\": \"shm\"}]}",
                               test_net_host_addr4(net, 1)), 0);
        datd[1].netns = test_net_host_ns(net, 1);
        cr_assert_eq(datd_start(&datd[1], config), 0);
        cr_assert_eq(test_net_datd_start(net, 0, &datd[0]), 0);
        cr_assert_eq(cc_open(&a, datd[1].socket_path, "secure"), 0);
        expect_listen(&a, SECURE_QUAL);
}

static struct sockaddr_storage nobody_to;
static socklen_t nobody_to_len;

/* As nobody, refused IA "secure": CONNECT through host 1's IA "open" to
 * nobody_to, conn_qual SECURE_QUAL; the EV_CONN it got, or -errno. */
static int nobody_connects(void *arg)
{
        struct cc u = { .fd = -1 };
        union datp_message ev;
        uint32_t conn;
        long s;
        int r;

        (void) arg;
        r = cc_open(&u, datd[1].socket_path, "open");
        if (r < 0)
                return r;
        s = cc_connect(&u, (struct sockaddr *) &nobody_to, nobody_to_len, SECURE_QUAL, UINT64_MAX,
                       NULL, 0, &conn);
        r = s != DAT_SUCCESS ? -EPROTO : cc_event(&u, DATP_EV_CONN, &ev, EV_MS);
        cc_close(&u);
        return r < 0 ? r : (int) ev.ev_conn.event;
}

/* nobody_connects() to ss in a child: its result. */
static int nobody_connect_to(const struct sockaddr_storage *ss, socklen_t len)
{
        int result_fd, result = -ETIMEDOUT;
        pid_t kid;

        nobody_to = *ss;
        nobody_to_len = len;
        kid = child_run_as(NOBODY_UID, NOGROUP_GID, nobody_connects, NULL, 0, &result_fd);
        cr_assert_gt(kid, 0);
        cr_expect_eq(child_result(result_fd, 2 * EV_MS, &result), 0);
        close(result_fd);
        child_kill(&kid);
        return result;
}

/* connect(2) takes 0.0.0.0 and :: for this host, and so does datd: as
 * loopback, they stay on the connecting IA.  They went to the CM port of
 * datd itself, whose request came back as another host's and reached the
 * first tcp IA, restricted or not: nobody reached secure's listener through
 * "open" (the review's repro). */
Test(datd_conn_hosts, the_unspecified_address_stays_on_the_connecting_ia)
{
        static const char *const unspecified[] = { "0.0.0.0", "::" };
        struct sockaddr_storage to;
        uint32_t c;

        start_secure(2);
        cr_assert_eq(cc_open(&b, datd[1].socket_path, "open"), 0);
        cr_assert_eq(cc_open(&x, datd[1].socket_path, "open"), 0);
        expect_listen(&b, SECURE_QUAL + 1);
        for (size_t i = 0; i < ARRAY_SIZE(unspecified); i++) {
                socklen_t len = i == 0 ? cc_addr4(&to, unspecified[i]) : cc_addr6(&to, unspecified[i]);
                int result = nobody_connect_to(&to, len);

                /* "open" has no listener at SECURE_QUAL. */
                cr_expect_eq(result, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, "%s: %d",
                             unspecified[i], result);
                cr_expect_eq(cc_no_event(&a, DATP_EV_CONN_REQUEST, QUIET_MS), 0,
                             "%s: secure's listener heard of nobody", unspecified[i]);
                /* ... and "open"'s own listener is there. */
                c = expect_connect(&x, &to, len, SECURE_QUAL + 1, UINT64_MAX, NULL, 0);
                cr_assert_eq(cc_reject(&b, expect_request(&b, NULL), NULL, 0), DAT_SUCCESS);
                expect_ev_conn(&x, c, DAT_CONNECTION_EVENT_PEER_REJECTED, NULL);
        }
        stop();
}

/* ::ffff:a.b.c.d is a.b.c.d: an IA's address in that form is the IA, its
 * policy included.  Not recognised, it went to datd's own CM port, and
 * nobody reached secure's listener. */
Test(datd_conn_hosts, a_v4_mapped_address_is_its_ipv4_address)
{
        _cleanup_free_ char *mapped = NULL;
        struct sockaddr_storage to;
        socklen_t len;
        int result;

        start_secure(2);
        cr_assert_geq(asprintf(&mapped, "::ffff:%s", test_net_host_addr4(net, 1)), 0);
        len = cc_addr6(&to, mapped);
        result = nobody_connect_to(&to, len);
        cr_expect_eq(result, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, "nobody's connection: %d", result);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN_REQUEST, QUIET_MS), 0,
                     "secure's listener heard of nobody");
        /* root, through "open", reaches secure's listener at that address. */
        cr_assert_eq(cc_open(&x, datd[1].socket_path, "open"), 0);
        expect_connect(&x, &to, len, SECURE_QUAL, UINT64_MAX, NULL, 0);
        expect_request(&a, NULL);
        stop();
}

/* A restricted IA is reached from another host at its own address only,
 * never as the stand-in for an address of the host no tcp IA has (here
 * host 1's IPv6 address): datd.conf(5), ACCESS POLICY.  The first tcp IA
 * stood in, whatever its policy. */
Test(datd_conn_hosts, a_restricted_ia_stands_in_for_no_other_address)
{
        struct sockaddr_storage to;
        socklen_t len;
        uint32_t c;

        start_secure(2);
        cr_assert_eq(cc_open(&b, datd[0].socket_path, "tcp"), 0);
        len = cc_addr6(&to, test_net_host_addr6(net, 1));
        c = expect_connect(&b, &to, len, SECURE_QUAL, UINT64_MAX, NULL, 0);
        expect_ev_conn(&b, c, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN_REQUEST, QUIET_MS), 0,
                     "secure's listener heard of a request for another address");
        len = cc_addr4(&to, test_net_host_addr4(net, 1));
        expect_connect(&b, &to, len, SECURE_QUAL, UINT64_MAX, NULL, 0);
        expect_request(&a, NULL);
        stop();
}

/* Whether datd answers a HELLO of host_id on a link from host `from` to
 * host 1's address `to` (0: EOF or a reset first, within 1 s). */
static bool hello_answered(unsigned from, const char *to, const uint8_t host_id[16])
{
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(CM_PORT) };
        struct cm_hello hello = { .keepalive_ms = htonl(1000) };
        struct timeval tv = { .tv_sec = 1 };
        int fd = test_net_socket(net, from, AF_INET, SOCK_STREAM, 0);
        bool answered;

        cr_assert_geq(fd, 0);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        inet_pton(AF_INET, to, &sin.sin_addr);
        cr_assert_eq(connect(fd, (struct sockaddr *) &sin, sizeof(sin)), 0, "%s", strerror(errno));
        cm_header(&hello.hdr, CM_HELLO, sizeof(hello));
        memcpy(hello.host_id, host_id, sizeof(hello.host_id));
        cm_write(fd, &hello, sizeof(hello));
        answered = read(fd, &hello, sizeof(hello)) == (ssize_t) sizeof(hello);
        close(fd);
        return answered;
}

/* A CM link is never to this host (PROTOCOL.md §14): what comes over a
 * link is another host's, out of reach of the IAs' policy.  A HELLO with
 * datd's own host_id is refused either way (a link datd made to itself),
 * and so is one on a connection from an address of this host, where no
 * other datd runs.  Both were taken as another host's datd. */
Test(datd_conn_hosts, a_cm_link_to_this_host_is_refused)
{
        struct cm_hello own;
        struct sockaddr_storage host2;
        socklen_t len;
        uint32_t b_conn;
        int link, lfd;

        start(3);       /* host 2 has no datd: the test is its datd */
        /* datd 1's host_id, from its answer to a link of host 2. */
        link = fake_link();
        cm_read(link, CM_HELLO, &own, sizeof(own));
        cr_expect(!hello_answered(0, test_net_host_addr4(net, 1), own.host_id),
                  "a HELLO with datd's own host_id made a link");
        cr_expect(!hello_answered(1, "127.0.0.1", (const uint8_t *) "from-this-host-1"),
                  "a link from loopback was taken for another host's");
        cr_expect(!hello_answered(1, test_net_host_addr4(net, 1), (const uint8_t *) "from-this-host-2"),
                  "a link from this host's address was taken for another host's");
        close(link);

        /* Outgoing: host 2 answers datd 0's HELLO with datd 0's own. */
        lfd = cm_listen_on_host2();
        len = cc_addr4(&host2, test_net_host_addr4(net, 2));
        b_conn = expect_connect(&b, &host2, len, 131, UINT64_MAX, NULL, 0);
        {
                struct pollfd p = { .fd = lfd, .events = POLLIN };
                struct timeval tv = { .tv_sec = 2 };
                uint8_t buf[CM_MAX_MESSAGE];
                ssize_t n;

                cr_assert_eq(poll(&p, 1, 5000), 1, "host 0's datd did not connect");
                link = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                cr_assert_geq(link, 0, "%s", strerror(errno));
                setsockopt(link, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                cm_read(link, CM_HELLO, &own, sizeof(own));
                cm_write(link, &own, sizeof(own));
                expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_UNREACHABLE, NULL);
                /* Its CONNECT_REQ went out behind its HELLO; then the close. */
                do
                        n = read(link, buf, sizeof(buf));
                while (n > 0);
                cr_expect(n == 0 || errno == ECONNRESET, "the link to itself was not closed (%s)",
                          strerror(errno));
        }
        close(link);
        close(lfd);
        stop();
}
