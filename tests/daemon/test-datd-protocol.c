/* The protocol as a well-behaved client sees it: HELLO negotiation, then
 * IA_OPEN / IA_QUERY / IA_CLOSE with their DAT return codes and the policy. */
#include "config.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "tests/daemon/child.h"
#include "tests/daemon/raw-client.h"
#include "tests/harness.h"

static struct datd_instance d;
static pid_t child;

static void teardown(void)
{
        child_kill(&child);
        datd_stop(&d);
}

TestSuite(datd_protocol, .timeout = 30, .fini = teardown);

/* Every test ends here: whatever it did, datd exits 0 on SIGTERM (no crash,
 * no sanitizer report); the teardown only cleans up after failures. */
static void stop(void)
{
        int status = datd_stop(&d);

        cr_expect_eq(status, 0, "datd's exit status after SIGTERM: %d", status);
}

#define IAS_SHM_TCP \
        "\"ias\": [{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"}," \
        " {\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"127.0.0.1\"}]"

static void start(const char *config)
{
        cr_assert_eq(datd_start(&d, config), 0, "datd did not start");
}

static int connect_hello(void)
{
        int fd = raw_connect_hello(d.socket_path);

        cr_assert_geq(fd, 0, "connect + HELLO: %s", strerror(-fd));
        return fd;
}

/* datd with this config (as start()) and a new connection past HELLO. */
static int start_connect(const char *config)
{
        start(config);
        return connect_hello();
}

/* datd with this config and a new connection that has not said HELLO. */
static int start_before_hello(const char *config)
{
        int fd;

        start(config);
        fd = raw_connect(d.socket_path);
        cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
        return fd;
}

/* A HELLO offering versions min_version..max_version, kept in *h. */
static void send_hello(int fd, struct datp_hello *h, uint16_t min_version, uint16_t max_version)
{
        raw_hello_init(h, min_version, max_version);
        cr_assert_eq(raw_send(fd, h, sizeof(*h)), 0, "send HELLO");
}

static void expect_dat_error(uint32_t status, uint32_t type)
{
        cr_expect(status & DAT_CLASS_ERROR, "0x%08x is no error", status);
        cr_expect_eq(DAT_GET_TYPE(status), type, "0x%08x, expected type 0x%08x", status, type);
}

/* ---- HELLO ----------------------------------------------------------------- */

/* datd answers the highest version both speak. */
static void expect_hello_reply(int fd, const struct datp_hello *h)
{
        uint16_t version = h->max_version < DATP_VERSION_MAX ? h->max_version : DATP_VERSION_MAX;

        union datp_message msg;
        ssize_t n = raw_recv(fd, &msg, RAW_TIMEOUT_MS);

        cr_assert_eq(n, (ssize_t) sizeof(struct datp_hello_reply));
        cr_assert_eq(datp_validate(&msg, (size_t) n, 0, DATP_TO_CLIENT, 0, NULL), 0);
        cr_expect_eq(msg.hdr.type, DATP_HELLO | DATP_REPLY);
        cr_expect_eq(msg.hdr.request_id, h->hdr.request_id);
        cr_expect_eq(msg.hello_reply.status.dat_status, DAT_SUCCESS);
        cr_expect_eq(msg.hello_reply.version, version);
        cr_expect_eq(msg.hdr.version, version);
        cr_expect_eq(msg.hello_reply.max_message, DATP_MAX_MESSAGE);
        cr_expect_str_eq(msg.hello_reply.daemon_version, PACKAGE_VERSION);
}

Test(datd_protocol, hello_negotiates_version_1)
{
        struct datp_hello h;
        int fd;

        fd = start_before_hello(NULL);
        send_hello(fd, &h, 1, 1);
        expect_hello_reply(fd, &h);
        close(fd);
        stop();
}

/* Version 4 (kept shm channels) is this build's highest; version 3
 * (shm doorbells that are pipes) and version 2 (DISCONNECT's NO_EVENT)
 * are still spoken. */
Test(datd_protocol, hello_negotiates_version_4_3_or_2)
{
        struct datp_hello h;
        int fd;

        cr_assert_eq(DATP_VERSION_MAX, 4);
        fd = start_before_hello(NULL);
        send_hello(fd, &h, 1, 4);
        expect_hello_reply(fd, &h);
        close(fd);
        fd = raw_connect(d.socket_path);
        cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
        send_hello(fd, &h, 3, 3);
        expect_hello_reply(fd, &h);
        close(fd);
        fd = raw_connect(d.socket_path);
        cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
        send_hello(fd, &h, 2, 2);
        expect_hello_reply(fd, &h);
        close(fd);
        stop();
}

Test(datd_protocol, hello_from_a_newer_client_settles_on_ours)
{
        struct datp_hello h;
        int fd;

        fd = start_before_hello(NULL);
        send_hello(fd, &h, 1, 9);
        expect_hello_reply(fd, &h);
        close(fd);
        stop();
}

static void expect_fatal_error(int fd, int code, uint16_t bad_type, uint32_t request_id)
{
        struct datp_error e;

        cr_assert_eq(raw_expect_error(fd, &e), 0);
        cr_expect_eq(e.code, code, "code %d, expected %d (%s)", e.code, code, e.reason);
        cr_expect_eq(e.fatal, 1);
        cr_expect_eq(e.bad_type, bad_type);
        cr_expect_eq(e.hdr.request_id, request_id);
        cr_expect_eq(raw_wait_eof(fd, RAW_TIMEOUT_MS), 0, "datd kept the connection open");
}

Test(datd_protocol, hello_without_a_common_version_is_fatal)
{
        struct datp_hello h;
        int fd;

        fd = start_before_hello(NULL);
        send_hello(fd, &h, 5, 7);
        expect_fatal_error(fd, DATP_E_VERSION, DATP_HELLO, h.hdr.request_id);
        close(fd);
        stop();
}

Test(datd_protocol, a_request_before_hello_is_fatal)
{
        struct datp_ia_query q;
        int fd;

        fd = start_before_hello(NULL);
        raw_ia_query_init(&q, 1);
        cr_assert_eq(raw_send(fd, &q, sizeof(q)), 0);
        expect_fatal_error(fd, DATP_E_STATE, DATP_IA_QUERY, q.hdr.request_id);
        close(fd);
        stop();
}

Test(datd_protocol, a_second_hello_is_refused_but_not_fatal)
{
        struct datp_ia_open_reply reply;
        struct datp_hello h;
        struct datp_error e;
        int fd;

        fd = start_connect(NULL);
        /* In the negotiated version: another one would be DATP_E_VERSION. */
        send_hello(fd, &h, 1, RAW_VERSION);
        cr_assert_eq(raw_expect_error(fd, &e), 0);
        cr_expect_eq(e.code, DATP_E_STATE);
        cr_expect_eq(e.fatal, 0);
        cr_assert_eq(raw_ia_open(fd, "shm", &reply), 0);
        cr_expect_eq(reply.status.dat_status, DAT_SUCCESS);
        close(fd);
        stop();
}

/* ---- IA_OPEN / IA_QUERY / IA_CLOSE ------------------------------------------ */

Test(datd_protocol, ia_open_fills_the_info_and_the_quotas)
{
        unsigned major = 0, minor = 0;
        struct datp_ia_open_reply reply;
        const struct sockaddr_in *sin;
        int fd;

        start("{" IAS_SHM_TCP ", \"verbs\": false, \"limits\": {\"max_eps\": 111, \"max_evds\": 222,"
              " \"max_pzs\": 33, \"max_lmrs\": 444, \"max_rmrs\": 555, \"max_srqs\": 66,"
              " \"max_lmr_bytes\": 8589934592, \"max_private_data\": 200}}");
        fd = connect_hello();
        cr_assert_eq(raw_ia_open(fd, "shm", &reply), 0);
        cr_assert_eq(reply.status.dat_status, DAT_SUCCESS);
        cr_expect_eq(reply.status.sys_errno, 0);
        cr_expect_neq(reply.ia_id, 0);
        cr_expect_str_eq(reply.info.name, "shm");
        cr_expect_str_eq(reply.info.transport, "shm");
        cr_expect_str_eq(reply.info.adapter_name, "shm");
        cr_expect_str_eq(reply.info.vendor_name, "datd");
        sscanf(PACKAGE_VERSION, "%u.%u", &major, &minor);
        cr_expect_eq(reply.info.hw_version_major, major);
        cr_expect_eq(reply.info.hw_version_minor, minor);
        cr_expect_eq(reply.info.fw_version_major, major);
        cr_expect_eq(reply.info.fw_version_minor, minor);
        cr_assert_eq(reply.info.address_len, sizeof(struct sockaddr_in));
        sin = (const struct sockaddr_in *) &reply.info.address;
        cr_expect_eq(sin->sin_family, AF_INET);
        cr_expect_eq(sin->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
        cr_expect_eq(reply.info.max_eps, 111);
        cr_expect_eq(reply.info.max_evds, 222);
        cr_expect_eq(reply.info.max_pzs, 33);
        cr_expect_eq(reply.info.max_lmrs, 444);
        cr_expect_eq(reply.info.max_rmrs, 555);
        cr_expect_eq(reply.info.max_srqs, 66);
        cr_expect_eq(reply.info.max_lmr_bytes, 8589934592ull);
        cr_expect_eq(reply.info.max_private_data, 200);
        close(fd);
        stop();
}

Test(datd_protocol, ia_open_tcp_names_its_interface)
{
        struct datp_ia_open_reply reply;
        int fd;

        fd = start_connect(NULL);
        cr_assert_eq(raw_ia_open(fd, "tcp", &reply), 0);
        cr_assert_eq(reply.status.dat_status, DAT_SUCCESS);
        cr_expect_str_eq(reply.info.transport, "tcp");
        /* 127.0.0.1 lives on the loopback interface. */
        cr_expect_str_eq(reply.info.adapter_name, "lo");
        cr_expect_gt(reply.info.mtu, 0);
        cr_expect_eq(reply.info.address.ss_family, AF_INET);
        close(fd);
        stop();
}

Test(datd_protocol, ia_query_returns_what_ia_open_returned)
{
        struct datp_ia_query_reply query;
        struct datp_ia_open_reply open;
        int fd;

        fd = start_connect(NULL);
        cr_assert_eq(raw_ia_open(fd, "tcp", &open), 0);
        cr_assert_eq(open.status.dat_status, DAT_SUCCESS);
        cr_assert_eq(raw_ia_query(fd, open.ia_id, &query), 0);
        cr_assert_eq(query.status.dat_status, DAT_SUCCESS);
        cr_expect_eq(memcmp(&query.info, &open.info, sizeof(query.info)), 0);
        close(fd);
        stop();
}

/* A client that sends many requests before it reads a reply: what its
 * socket has no room for waits in datd (limits.max_pending_replies) and
 * comes when it reads, every reply once, in request order. */
#define LATE_READER_REQUESTS 600

static void send_queries(int fd, uint32_t ia_id, uint32_t *first_id, unsigned n, unsigned *sent)
{
        *sent = 0;
        for (unsigned i = 0; i < n; i++) {
                struct datp_ia_query q;

                raw_ia_query_init(&q, ia_id);
                if (i == 0)
                        *first_id = q.hdr.request_id;
                if (raw_send(fd, &q, sizeof(q)) < 0)
                        return;
                (*sent)++;
        }
}

Test(datd_protocol, a_client_that_reads_late_gets_every_reply_in_order)
{
        struct datp_ia_open_reply open;
        uint32_t first = 0;
        unsigned sent;
        int fd;

        fd = start_connect(NULL);
        cr_assert_eq(raw_ia_open(fd, "shm", &open), 0);
        send_queries(fd, open.ia_id, &first, LATE_READER_REQUESTS, &sent);
        cr_assert_eq(sent, LATE_READER_REQUESTS);
        for (unsigned i = 0; i < LATE_READER_REQUESTS; i++) {
                union datp_message m;
                ssize_t n = raw_recv(fd, &m, RAW_TIMEOUT_MS);

                cr_assert_eq(n, (ssize_t)sizeof(struct datp_ia_query_reply), "reply %u", i);
                cr_assert_eq(m.hdr.type, DATP_IA_QUERY | DATP_REPLY);
                cr_assert_eq(m.hdr.request_id, first + i, "reply %u in request order", i);
                cr_assert_eq(m.ia_query_reply.status.dat_status, DAT_SUCCESS);
        }
        close(fd);
        stop();
}

/* One that never reads is dropped once more replies wait than
 * limits.max_pending_replies allows; datd goes on serving others. */
Test(datd_protocol, a_client_that_never_reads_is_dropped_past_max_pending_replies)
{
        struct datp_ia_open_reply open;
        uint32_t first = 0;
        unsigned sent;
        int fd, other;

        fd = start_connect("{" IAS_SHM_TCP ", \"verbs\": false, \"limits\": {\"max_pending_replies\": 8}}");
        cr_assert_eq(raw_ia_open(fd, "shm", &open), 0);
        send_queries(fd, open.ia_id, &first, LATE_READER_REQUESTS, &sent);
        cr_expect_eq(raw_wait_eof(fd, RAW_TIMEOUT_MS), 0, "datd closed its socket");
        close(fd);
        other = connect_hello();
        cr_expect_eq(raw_ia_open(other, "shm", &open), 0);
        close(other);
        stop();
}

Test(datd_protocol, each_open_is_a_new_instance)
{
        struct datp_ia_open_reply a, b;
        int fd;

        fd = start_connect(NULL);
        cr_assert_eq(raw_ia_open(fd, "shm", &a), 0);
        cr_assert_eq(raw_ia_open(fd, "shm", &b), 0);
        cr_assert_eq(a.status.dat_status, DAT_SUCCESS);
        cr_assert_eq(b.status.dat_status, DAT_SUCCESS);
        cr_expect_neq(a.ia_id, b.ia_id);
        close(fd);
        stop();
}

Test(datd_protocol, an_unknown_ia_is_provider_not_found)
{
        struct datp_ia_open_reply reply;
        int fd;

        fd = start_connect(NULL);
        cr_assert_eq(raw_ia_open(fd, "no-such-ia", &reply), 0);
        expect_dat_error(reply.status.dat_status, DAT_PROVIDER_NOT_FOUND);
        cr_expect_eq(reply.ia_id, 0);
        close(fd);
        stop();
}

Test(datd_protocol, max_ias_per_client_is_insufficient_resources)
{
        struct datp_ia_open_reply a, b, c;
        struct datp_ia_close_reply closed;
        int fd, other;

        fd = start_connect("{" IAS_SHM_TCP ", \"verbs\": false, \"limits\": {\"max_ias_per_client\": 2}}");
        cr_assert_eq(raw_ia_open(fd, "shm", &a), 0);
        cr_assert_eq(raw_ia_open(fd, "tcp", &b), 0);
        cr_assert_eq(a.status.dat_status, DAT_SUCCESS);
        cr_assert_eq(b.status.dat_status, DAT_SUCCESS);
        cr_assert_eq(raw_ia_open(fd, "shm", &c), 0);
        expect_dat_error(c.status.dat_status, DAT_INSUFFICIENT_RESOURCES);

        /* The limit is per client, and counts what is open now. */
        other = connect_hello();
        cr_assert_eq(raw_ia_open(other, "shm", &c), 0);
        cr_expect_eq(c.status.dat_status, DAT_SUCCESS);
        cr_assert_eq(raw_ia_close(fd, a.ia_id, DATP_CLOSE_ABRUPT, &closed), 0);
        cr_assert_eq(closed.status.dat_status, DAT_SUCCESS);
        cr_assert_eq(raw_ia_open(fd, "shm", &c), 0);
        cr_expect_eq(c.status.dat_status, DAT_SUCCESS);
        close(other);
        close(fd);
        stop();
}

Test(datd_protocol, ia_close_of_an_unknown_id_is_invalid_handle)
{
        struct datp_ia_close_reply reply;
        int fd;

        fd = start_connect(NULL);
        cr_assert_eq(raw_ia_close(fd, 12345, DATP_CLOSE_GRACEFUL, &reply), 0);
        expect_dat_error(reply.status.dat_status, DAT_INVALID_HANDLE);
        close(fd);
        stop();
}

Test(datd_protocol, ia_query_of_an_unknown_id_is_invalid_handle)
{
        struct datp_ia_query_reply reply;
        int fd;

        fd = start_connect(NULL);
        cr_assert_eq(raw_ia_query(fd, 12345, &reply), 0);
        expect_dat_error(reply.status.dat_status, DAT_INVALID_HANDLE);
        close(fd);
        stop();
}

Test(datd_protocol, a_closed_instance_is_gone)
{
        struct datp_ia_query_reply query;
        struct datp_ia_close_reply closed;
        struct datp_ia_open_reply open;
        int fd;

        fd = start_connect(NULL);
        cr_assert_eq(raw_ia_open(fd, "shm", &open), 0);
        cr_assert_eq(open.status.dat_status, DAT_SUCCESS);
        cr_assert_eq(raw_ia_close(fd, open.ia_id, DATP_CLOSE_GRACEFUL, &closed), 0);
        cr_expect_eq(closed.status.dat_status, DAT_SUCCESS);
        cr_assert_eq(raw_ia_query(fd, open.ia_id, &query), 0);
        expect_dat_error(query.status.dat_status, DAT_INVALID_HANDLE);
        cr_assert_eq(raw_ia_close(fd, open.ia_id, DATP_CLOSE_GRACEFUL, &closed), 0);
        expect_dat_error(closed.status.dat_status, DAT_INVALID_HANDLE);
        close(fd);
        stop();
}

Test(datd_protocol, ia_ids_belong_to_their_client)
{
        struct datp_ia_query_reply query;
        struct datp_ia_open_reply open;
        int a, b;

        a = start_connect(NULL);
        b = connect_hello();
        cr_assert_eq(raw_ia_open(a, "shm", &open), 0);
        cr_assert_eq(open.status.dat_status, DAT_SUCCESS);
        cr_assert_eq(raw_ia_query(b, open.ia_id, &query), 0);
        expect_dat_error(query.status.dat_status, DAT_INVALID_HANDLE);
        close(a);
        close(b);
        stop();
}

/* ---- policy ----------------------------------------------------------------- */

static const char *child_socket;

/* In a child that dropped to nobody: the dat_status of IA_OPEN "shm". */
static int open_shm_as_child(void *arg)
{
        struct datp_ia_open_reply reply;
        int fd = raw_connect_hello(child_socket), r;

        if (fd < 0)
                return fd;
        r = raw_ia_open(fd, "shm", &reply);
        close(fd);
        return r < 0 ? r : (int) reply.status.dat_status;
}

/* IA_OPEN "shm" as nobody:nogroup, which must reach datd and get an answer. */
static uint32_t open_shm_as_nobody(void)
{
        int result_fd, result = 0;

        child_socket = d.socket_path;
        child = child_run_as(NOBODY_UID, NOGROUP_GID, open_shm_as_child, NULL, 0, &result_fd);
        cr_assert_gt(child, 0);
        cr_assert_eq(child_result(result_fd, 10000, &result), 0);
        close(result_fd);
        /* A small negative result is the child's own failure, not a status. */
        cr_assert(result >= 0 || result < -4095, "child failed: %s", strerror(-result));
        return (uint32_t) result;
}

#define SHM_ALLOWING(key, names) \
        "{\"verbs\": false, \"ias\": [{\"name\": \"shm\", \"transport\": \"shm\", \"" key "\": " names "}]}"

Test(datd_protocol, policy_denies_a_user_it_does_not_name)
{
        struct datp_ia_open_reply reply;
        int fd;

        start(SHM_ALLOWING("allow_users", "[\"daemon\"]"));
        expect_dat_error(open_shm_as_nobody(), DAT_PRIVILEGES_VIOLATION);
        /* root is always allowed. */
        fd = connect_hello();
        cr_assert_eq(raw_ia_open(fd, "shm", &reply), 0);
        cr_expect_eq(reply.status.dat_status, DAT_SUCCESS);
        close(fd);
        stop();
}

Test(datd_protocol, policy_admits_a_user_it_names)
{
        start(SHM_ALLOWING("allow_users", "[\"daemon\", \"nobody\"]"));
        cr_expect_eq(open_shm_as_nobody(), DAT_SUCCESS);
        stop();
}

Test(datd_protocol, policy_admits_a_member_of_a_group_it_names)
{
        start(SHM_ALLOWING("allow_groups", "[\"nogroup\"]"));
        cr_expect_eq(open_shm_as_nobody(), DAT_SUCCESS);
        stop();
}

Test(datd_protocol, an_empty_allow_list_admits_only_root)
{
        start(SHM_ALLOWING("allow_users", "[]"));
        expect_dat_error(open_shm_as_nobody(), DAT_PRIVILEGES_VIOLATION);
        stop();
}
