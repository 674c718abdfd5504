/* Clients that misbehave: malformed packets, descriptors, floods, too many
 * connections, sudden death.  datd answers, drops or refuses them, and keeps
 * serving everyone else. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "tests/daemon/bus-client.h"
#include "tests/daemon/child.h"
#include "tests/daemon/raw-client.h"
#include "tests/harness.h"

static struct datd_instance d;
static pid_t child;
static sd_bus *bus;

static void teardown(void)
{
        bus = sd_bus_flush_close_unref(bus);
        child_kill(&child);
        datd_stop(&d);
}

TestSuite(datd_hostile, .timeout = 30, .fini = teardown);

/* Every test ends here: whatever it did, datd exits 0 on SIGTERM (no crash,
 * no sanitizer report); the teardown only cleans up after failures. */
static void stop(void)
{
        int status = datd_stop(&d);

        cr_expect_eq(status, 0, "datd's exit status after SIGTERM: %d", status);
}

#define CONFIG_WITH_LIMITS(limits) \
        "{\"verbs\": false, \"ias\": [{\"name\": \"shm\", \"transport\": \"shm\"}], " \
        "\"limits\": {" limits "}}"

static void start(const char *config)
{
        int r;

        cr_assert_eq(datd_start(&d, config), 0, "datd did not start");
        r = bus_client_open(d.bus_address, &bus);
        cr_assert_eq(r, 0, "private bus: %s", strerror(-r));
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

static uint64_t counter(const char *name)
{
        uint64_t v = 0;

        cr_assert_eq(bus_counter(bus, name, &v), 0, "GetCounters %s", name);
        return v;
}

/* datd is alive and a new, polite client gets an IA. */
static void expect_datd_serves(void)
{
        struct datp_ia_open_reply reply;
        int fd = connect_hello();

        cr_assert_eq(raw_ia_open(fd, "shm", &reply), 0);
        cr_assert_eq(reply.status.dat_status, DAT_SUCCESS);
        close(fd);
}

/* The connection still takes requests after a non-fatal error. */
static void expect_still_open(int fd)
{
        struct datp_ia_query_reply reply;

        cr_assert_eq(raw_ia_query(fd, 4242, &reply), 0);
        cr_expect_eq(DAT_GET_TYPE(reply.status.dat_status), DAT_INVALID_HANDLE);
}

static void expect_error(int fd, int code, bool fatal, struct datp_error *ret)
{
        struct datp_error e;

        cr_assert_eq(raw_expect_error(fd, &e), 0, "no valid DATP_ERROR");
        cr_expect_eq(e.code, code, "code %d, expected %d (%s)", e.code, code, e.reason);
        cr_expect_eq(e.fatal, fatal, "fatal %u (%s)", e.fatal, e.reason);
        cr_expect(e.status.dat_status & DAT_CLASS_ERROR);
        cr_expect_neq(e.reason[0], '\0');
        if (fatal)
                cr_expect_eq(raw_wait_eof(fd, RAW_TIMEOUT_MS), 0, "datd kept the connection");
        else
                expect_still_open(fd);
        if (ret)
                *ret = e;
}

/* A hostile request of len bytes at msg, and the DATP_ERROR it must get
 * (as expect_error()). */
static void send_expect_error(int fd, const void *msg, size_t len, int code, bool fatal,
                              struct datp_error *ret)
{
        cr_assert_eq(raw_send(fd, msg, len), 0, "send");
        expect_error(fd, code, fatal, ret);
}

/* ---- malformed packets ------------------------------------------------------ */

Test(datd_hostile, a_truncated_packet_is_refused)
{
        struct datp_ia_query q;
        struct datp_error e;
        int fd;

        fd = start_connect(NULL);
        raw_ia_query_init(&q, 1);
        send_expect_error(fd, &q, 10, DATP_E_SHORT, false, &e);
        cr_expect_eq(e.bad_type, 0);
        cr_expect_eq(e.hdr.request_id, 0);
        close(fd);
        expect_datd_serves();
        stop();
}

Test(datd_hostile, an_oversized_packet_is_refused)
{
        static unsigned char big[DATP_MAX_MESSAGE + 100];
        struct datp_ia_query q;
        int fd;

        fd = start_connect(NULL);
        raw_ia_query_init(&q, 1);
        q.hdr.length = sizeof(big);
        memcpy(big, &q, sizeof(q));
        send_expect_error(fd, big, sizeof(big), DATP_E_OVERSIZE, false, NULL);
        close(fd);
        expect_datd_serves();
        stop();
}

Test(datd_hostile, a_wrong_size_for_the_type_is_refused)
{
        struct {
                struct datp_ia_query q;
                uint32_t extra;
        } msg = {};
        int fd;

        fd = start_connect(NULL);
        raw_ia_query_init(&msg.q, 1);
        msg.q.hdr.length = sizeof(msg);
        send_expect_error(fd, &msg, sizeof(msg), DATP_E_SIZE, false, NULL);
        close(fd);
        stop();
}

Test(datd_hostile, a_header_length_that_lies_is_refused)
{
        struct datp_ia_query q;
        int fd;

        fd = start_connect(NULL);
        raw_ia_query_init(&q, 1);
        q.hdr.length += 8;
        send_expect_error(fd, &q, sizeof(q), DATP_E_LENGTH, false, NULL);
        close(fd);
        stop();
}

Test(datd_hostile, fields_out_of_range_are_refused)
{
        struct datp_ia_close c;
        struct datp_ia_open o;
        int fd;

        fd = start_connect(NULL);
        raw_ia_close_init(&c, 1, 7);
        send_expect_error(fd, &c, sizeof(c), DATP_E_FIELD, false, NULL);
        /* A name without its NUL must not be read past its array. */
        raw_ia_open_init(&o, "shm");
        memset(o.ia_name, 'A', sizeof(o.ia_name));
        send_expect_error(fd, &o, sizeof(o), DATP_E_FIELD, false, NULL);
        close(fd);
        expect_datd_serves();
        stop();
}

Test(datd_hostile, an_unknown_type_is_refused)
{
        struct datp_ia_query q;
        struct datp_error e;
        int fd;

        fd = start_connect(NULL);
        raw_ia_query_init(&q, 1);
        q.hdr.type = 0x1234;
        send_expect_error(fd, &q, sizeof(q), DATP_E_TYPE, false, &e);
        cr_expect_eq(e.bad_type, 0x1234);
        cr_expect_eq(e.hdr.request_id, q.hdr.request_id);
        close(fd);
        stop();
}

Test(datd_hostile, a_reply_sent_to_datd_is_refused)
{
        struct datp_ia_close_reply r = {};
        int fd;

        fd = start_connect(NULL);
        datp_header_init(&r.hdr, DATP_IA_CLOSE | DATP_REPLY, RAW_VERSION, sizeof(r), 77);
        send_expect_error(fd, &r, sizeof(r), DATP_E_DIRECTION, false, NULL);
        close(fd);
        stop();
}

Test(datd_hostile, a_wrong_magic_is_fatal)
{
        struct datp_ia_query q;
        struct datp_error e;
        int fd;

        fd = start_connect(NULL);
        raw_ia_query_init(&q, 1);
        q.hdr.magic = 0xdeadbeef;
        send_expect_error(fd, &q, sizeof(q), DATP_E_MAGIC, true, &e);
        /* Nothing in a header with a wrong magic is to be believed. */
        cr_expect_eq(e.bad_type, 0);
        close(fd);
        expect_datd_serves();
        stop();
}

Test(datd_hostile, a_wrong_version_after_hello_is_fatal)
{
        struct datp_ia_query q;
        int fd;

        fd = start_connect(NULL);
        raw_ia_query_init(&q, 1);
        q.hdr.version = RAW_VERSION == 1 ? 2 : RAW_VERSION - 1;
        send_expect_error(fd, &q, sizeof(q), DATP_E_VERSION, true, NULL);
        close(fd);
        expect_datd_serves();
        stop();
}

Test(datd_hostile, descriptors_are_closed_and_refused)
{
        struct datp_ia_query q;
        int fd, p[2];

        signal(SIGPIPE, SIG_IGN);
        fd = start_connect(NULL);
        cr_assert_eq(pipe(p), 0);
        raw_ia_query_init(&q, 1);
        cr_assert_eq(raw_send_with_fd(fd, &q, sizeof(q), p[0]), 0);
        close(p[0]);
        expect_error(fd, DATP_E_FDS, false, NULL);
        /* datd kept no copy of the read end: the pipe has no reader left. */
        cr_expect_eq(write(p[1], "x", 1), -1);
        cr_expect_eq(errno, EPIPE);
        close(p[1]);
        close(fd);
        stop();
}

Test(datd_hostile, too_many_protocol_errors_drop_the_client)
{
        struct datp_ia_query q;
        int fd;

        fd = start_connect(CONFIG_WITH_LIMITS("\"max_protocol_errors\": 3"));
        raw_ia_query_init(&q, 1);
        q.hdr.type = 0x1234;
        for (int i = 1; i <= 3; i++) {
                cr_assert_eq(raw_send(fd, &q, sizeof(q)), 0);
                /* The third error reaches the limit and is the last. */
                expect_error(fd, DATP_E_TYPE, i == 3, NULL);
        }
        close(fd);
        cr_expect_eq(counter("protocol_errors"), 3);
        cr_expect_eq(counter("clients_dropped"), 1);
        expect_datd_serves();
        stop();
}

/* Random packets, half of them behind a believable header, on connections
 * that datd keeps dropping: it must answer or drop, never crash. */
Test(datd_hostile, random_packets_never_hurt_datd)
{
        unsigned seed = 12345;
        union datp_message msg;
        int fd = -1;

        signal(SIGPIPE, SIG_IGN);
        start(NULL);
        for (int i = 0; i < 3000; i++) {
                size_t len = 1 + (size_t) rand_r(&seed) % (sizeof(struct datp_ia_open) + 16);

                if (fd < 0)
                        fd = connect_hello();
                for (size_t k = 0; k < len; k++)
                        msg.bytes[k] = (unsigned char) rand_r(&seed);
                if (len >= sizeof(msg.hdr) && i % 2 == 0)
                        datp_header_init(&msg.hdr, (uint16_t) (1 + rand_r(&seed) % 5), RAW_VERSION,
                                         (uint32_t) len, (uint32_t) i);
                if (raw_send(fd, &msg, len) < 0 || raw_recv(fd, &msg, RAW_TIMEOUT_MS) <= 0) {
                        close(fd);
                        fd = -1;
                }
        }
        if (fd >= 0)
                close(fd);
        expect_datd_serves();
        cr_expect_gt(counter("protocol_errors"), 0);
        stop();
}

/* ---- floods and limits ------------------------------------------------------ */

Test(datd_hostile, a_flooding_client_does_not_starve_others)
{
        struct datp_ia_query_reply reply;
        struct datp_ia_open_reply open;
        struct datp_ia_query q;
        int flood, calm, sent = 0;
        bool dropped = false;

        signal(SIGPIPE, SIG_IGN);
        calm = start_connect(NULL);
        cr_assert_eq(raw_ia_open(calm, "shm", &open), 0);
        cr_assert_eq(open.status.dat_status, DAT_SUCCESS);
        flood = connect_hello();
        raw_ia_query_init(&q, 4242);

        /* The flood never reads a reply: datd must queue up to its limit,
         * then drop it, and meanwhile answer the other client. */
        for (int round = 0; round < 2000 && !dropped; round++) {
                for (int k = 0; k < 64; k++) {
                        if (send(flood, &q, sizeof(q), MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
                                sent++;
                                continue;
                        }
                        dropped = errno == EPIPE || errno == ECONNRESET;
                        cr_assert(dropped || errno == EAGAIN, "send: %s", strerror(errno));
                        break;
                }
                cr_assert_eq(raw_ia_query(calm, open.ia_id, &reply), 0,
                             "the other client was not answered within 5 s (round %d)", round);
                cr_assert_eq(reply.status.dat_status, DAT_SUCCESS);
        }
        cr_expect(dropped, "datd kept a client that sent %d requests and read no reply", sent);
        cr_expect_eq(counter("clients_dropped"), 1);
        close(flood);
        close(calm);
        expect_datd_serves();
        stop();
}

static void expect_refused_at_accept(void)
{
        int fd = raw_connect(d.socket_path);

        /* connect() succeeds on the backlog; datd then closes it. */
        cr_assert_geq(fd, 0);
        cr_expect_eq(raw_wait_eof(fd, RAW_TIMEOUT_MS), 0, "the extra connection stayed open");
        close(fd);
}

static void wait_n_clients(uint32_t n)
{
        uint32_t now = UINT32_MAX;

        for (int i = 0; i < 500 && now != n; i++) {
                cr_assert_geq(sd_bus_get_property_trivial(bus, DATD_BUS_DEST, DATD_BUS_OBJECT,
                                                          DATD_BUS_IFACE, "NClients", NULL, 'u',
                                                          &now), 0);
                if (now != n)
                        usleep(10000);
        }
        cr_assert_eq(now, n, "NClients %u, expected %u", now, n);
}

Test(datd_hostile, max_clients_closes_extra_connections)
{
        int a, b, c;

        a = start_connect(CONFIG_WITH_LIMITS("\"max_clients\": 2"));
        b = connect_hello();
        expect_refused_at_accept();
        cr_expect_eq(counter("clients_rejected"), 1);
        /* The limit is on connections now, not ever. */
        close(a);
        wait_n_clients(1);
        c = connect_hello();
        close(b);
        close(c);
        stop();
}

Test(datd_hostile, max_clients_per_uid_closes_extra_connections)
{
        int a;

        a = start_connect(CONFIG_WITH_LIMITS("\"max_clients_per_uid\": 1"));
        expect_refused_at_accept();
        cr_expect_eq(counter("clients_rejected"), 1);
        close(a);
        stop();
}

/* ---- a client that dies ----------------------------------------------------- */

static const char *child_socket;

static int open_shm_and_hold(void *arg)
{
        struct datp_ia_open_reply reply;
        int fd = raw_connect_hello(child_socket), r;

        if (fd < 0)
                return fd;
        r = raw_ia_open(fd, "shm", &reply);
        /* fd stays open: the child holds it until it is killed. */
        return r < 0 ? r : (int) reply.status.dat_status;
}

Test(datd_hostile, a_killed_clients_ia_instances_are_freed)
{
        int result_fd, result = -1;
        uint32_t open = 0;
        char ias[64] = "";
        bool listed = true;
        pid_t pid;

        start(NULL);
        child_socket = d.socket_path;
        child = pid = child_run_as(0, 0, open_shm_and_hold, NULL, 1, &result_fd);
        cr_assert_gt(child, 0);
        cr_assert_eq(child_result(result_fd, 10000, &result), 0);
        close(result_fd);
        cr_assert_eq(result, DAT_SUCCESS);
        cr_assert_eq(bus_ia_open_count(bus, "shm", &open), 0);
        cr_assert_eq(open, 1);
        cr_assert_eq(bus_client_by_pid(bus, pid, &listed, ias, sizeof(ias)), 0);
        cr_assert(listed);
        cr_expect_str_eq(ias, "shm");

        child_kill(&child);
        for (int i = 0; i < 500 && (open > 0 || listed); i++) {
                usleep(10000);
                cr_assert_eq(bus_ia_open_count(bus, "shm", &open), 0);
                cr_assert_eq(bus_client_by_pid(bus, pid, &listed, ias, sizeof(ias)), 0);
        }
        cr_expect_eq(open, 0, "the dead client's IA is still open");
        cr_expect_not(listed, "the dead client is still listed");
        cr_expect_eq(counter("ia_closes"), 1);
        stop();
}
