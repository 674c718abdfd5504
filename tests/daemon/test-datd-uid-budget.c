/* The per-uid limits of datd.conf (daemon/uid_budget.h): the clients of one
 * user, however many, take no more than their uid's share of datd's
 * descriptors, listeners and object memory, so that another user (root
 * here) still gets them; and a user's clients give back everything when
 * they go.  The hostile user is nobody, in forked children that hold what
 * they got until killed. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "common/macro.h"
#include "tests/daemon/child.h"
#include "tests/daemon/conn-client.h"
#include "tests/daemon/raw-client.h"
#include "tests/harness.h"

#define DAT_ERR(type, subtype) ((uint32_t) (DAT_CLASS_ERROR | (type) | (subtype)))

/* More than any budget below allows, few enough to stay quick. */
#define TRIES 40

static struct datd_instance d;
static pid_t kids[2];

static void teardown(void)
{
        child_kill(&kids[0]);
        child_kill(&kids[1]);
        datd_stop(&d);
}

TestSuite(datd_uid_budget, .fini = teardown, .timeout = 60);

static void start(const char *limits)
{
        char config[1024];

        snprintf(config, sizeof(config),
                 "{\"log_level\": \"debug\", \"verbs\": false, \"conn_qual_any_range\": [5000, 5009],"
                 " \"ias\": [{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"}],"
                 " \"limits\": {%s}}", limits);
        cr_assert_eq(datd_start(&d, config), 0, "datd did not start");
}

static bool log_says(const char *needle)
{
        _cleanup_free_ char *log = read_file_str(d.log_path);

        return log && strstr(log, needle);
}

/* A result of child fn, run as nobody and kept (holding what it got) in
 * kids[slot]. */
static int as_nobody(int (*fn)(void *), unsigned slot)
{
        int result_fd, result;

        kids[slot] = child_run_as(NOBODY_UID, NOGROUP_GID, fn, NULL, 1, &result_fd);
        cr_assert_gt(kids[slot], 0);
        cr_assert_eq(child_result(result_fd, 30000, &result), 0, "the child did not answer");
        close(result_fd);
        return result;
}

/* ---- descriptors ----------------------------------------------------------- */

/* One shm connection between two clients of this process, on conn_qual
 * qual: 1 once both ends are ESTABLISHED, 0 if datd failed it, -errno. */
static int shm_connection(struct cc *l, struct cc *a, uint64_t qual)
{
        struct sockaddr_storage ss;
        socklen_t len = cc_addr4(&ss, "127.0.0.1");
        union datp_message ev;
        uint32_t conn;
        long s;

        s = cc_connect(a, (struct sockaddr *) &ss, len, qual, 5000000, NULL, 0, &conn);
        if (s != 0)
                return s < 0 ? (int) s : 0;
        if (cc_event(l, DATP_EV_CONN_REQUEST, &ev, 5000) < 0)
                return -ETIMEDOUT;
        if (cc_accept(l, ev.ev_conn_request.cr_id, NULL, 0, &conn) != 0)
                return 0;
        if (cc_event(a, DATP_EV_CONN, &ev, 5000) < 0)
                return -ETIMEDOUT;
        if (ev.ev_conn.event != DAT_CONNECTION_EVENT_ESTABLISHED) {
                (void) cc_event(l, DATP_EV_CONN, &ev, 5000);
                return 0;
        }
        if (cc_event(l, DATP_EV_CONN, &ev, 5000) < 0)
                return -ETIMEDOUT;
        return ev.ev_conn.event == DAT_CONNECTION_EVENT_ESTABLISHED;
}

/* Connections between two new clients until datd fails one (or TRIES):
 * how many were made, or -errno. */
static int fill_connections(uint64_t qual)
{
        static struct cc l = { .fd = -1 }, a = { .fd = -1 };
        uint32_t lid;
        uint64_t got;
        int n = 0, k;

        if (cc_open(&l, d.socket_path, "shm") < 0 || cc_open(&a, d.socket_path, "shm") < 0)
                return -ECONNREFUSED;
        if (cc_listen(&l, DATP_LISTENER_PSP, qual, &lid, &got) != 0)
                return -EADDRINUSE;
        while (n < TRIES && (k = shm_connection(&l, &a, qual)) > 0)
                n++;
        return k < 0 ? k : n;
}

static int fill_connections_7100(void *arg)
{
        return fill_connections(7100);
}

static int fill_connections_7101(void *arg)
{
        return fill_connections(7101);
}

/* datd.conf max_fds_per_uid: each shm connection keeps its region's
 * descriptor open in datd; one user's clients get no more than the budget,
 * another user's still connect, and a user whose clients are gone has all
 * of it back. */
Test(datd_uid_budget, max_fds_per_uid_bounds_one_users_connections)
{
        struct cc l = { .fd = -1 }, a = { .fd = -1 };
        uint32_t lid;
        uint64_t got;

        start("\"max_fds_per_uid\": 4");
        cr_expect_eq(as_nobody(fill_connections_7100, 0), 4, "nobody's connections");
        cr_expect(log_says("max_fds_per_uid reached"), "the log does not say why");
        /* Root is held to the pool, not to a per-uid budget. */
        cr_assert_eq(cc_open(&l, d.socket_path, "shm"), 0);
        cr_assert_eq(cc_open(&a, d.socket_path, "shm"), 0);
        cr_assert_eq(cc_listen(&l, DATP_LISTENER_PSP, 7200, &lid, &got), 0);
        for (int i = 0; i < 6; i++)
                cr_expect_eq(shm_connection(&l, &a, 7200), 1, "root's connection %d", i);
        /* Gone with its clients: the budget is whole again. */
        child_kill(&kids[0]);
        cr_expect_eq(as_nobody(fill_connections_7101, 1), 4, "nobody's connections once more");
        cc_close(&l);
        cc_close(&a);
        cr_expect_eq(datd_stop(&d), 0);
}

/* As many new clients as max_clients (8) leaves beside root's two: 0 once
 * every one is answered, else the first failure. */
static int open_clients(void *arg)
{
        static struct cc c[6];

        for (unsigned i = 0; i < ARRAY_SIZE(c); i++) {
                int r = cc_open(&c[i], d.socket_path, "shm");

                if (r < 0)
                        return r;
        }
        return 0;
}

/* The reserve: connections take no more descriptors than RLIMIT_NOFILE
 * leaves beside what max_clients, max_bus_connections and max_cm_links
 * may need, so that a new client is still accepted when they are all
 * taken, whoever took them (root here, to whom no per-uid budget applies). */
Test(datd_uid_budget, connections_leave_the_reserve_to_new_clients)
{
        struct rlimit rl = { 200, 200 };
        struct cc l = { .fd = -1 }, a = { .fd = -1 };
        uint32_t lid;
        uint64_t got;
        int n = 0, k;

        /* datd inherits it: 200 - (64 + 2 x 8 + 2 x 2 + 17) leaves 99. */
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        start("\"max_clients\": 8, \"max_bus_connections\": 2, \"max_cm_links\": 1,"
              " \"max_connections_per_client\": 1024");
        cr_assert_eq(cc_open(&l, d.socket_path, "shm"), 0);
        cr_assert_eq(cc_open(&a, d.socket_path, "shm"), 0);
        cr_assert_eq(cc_listen(&l, DATP_LISTENER_PSP, 7300, &lid, &got), 0);
        while (n < 200 && (k = shm_connection(&l, &a, 7300)) > 0)
                n++;
        cr_expect_eq(n, 99, "root's connections");
        cr_expect(log_says("descriptor pool (RLIMIT_NOFILE less the reserve) reached"),
                  "the log does not say why");
        cr_expect_eq(as_nobody(open_clients, 0), 0, "new clients were not accepted");
        cc_close(&l);
        cc_close(&a);
        cr_expect_eq(datd_stop(&d), 0);
}

/* ---- listeners ------------------------------------------------------------- */

/* PSP_ANY listeners on two clients until datd refuses: how many, or
 * -errno; a refusal other than the quota's is a failure. */
static int fill_listeners(void *arg)
{
        static struct cc c[2] = { { .fd = -1 }, { .fd = -1 } };
        int n = 0;

        for (unsigned i = 0; i < 2; i++) {
                if (cc_open(&c[i], d.socket_path, "shm") < 0)
                        return -ECONNREFUSED;
                for (int k = 0; k < TRIES; k++) {
                        uint32_t lid;
                        uint64_t got;
                        long s = cc_listen(&c[i], DATP_LISTENER_PSP_ANY, 0, &lid, &got);

                        if (s == (long) DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_NO_SUBTYPE))
                                break;
                        if (s != 0)
                                return -EPROTO;
                        n++;
                }
        }
        return n;
}

/* datd.conf max_listeners_per_uid: one user's clients, each within
 * max_listeners_per_client, do not take all of conn_qual_any_range. */
Test(datd_uid_budget, max_listeners_per_uid_leaves_the_range_to_others)
{
        struct cc r = { .fd = -1 };
        uint32_t lid;
        uint64_t got;

        start("\"max_listeners_per_client\": 5, \"max_listeners_per_uid\": 6");
        cr_expect_eq(as_nobody(fill_listeners, 0), 6, "nobody's listeners");
        cr_expect(log_says("max_listeners_per_uid (6) reached"), "the log does not say why");
        cr_assert_eq(cc_open(&r, d.socket_path, "shm"), 0);
        for (int i = 0; i < 4; i++)
                cr_expect_eq(cc_listen(&r, DATP_LISTENER_PSP_ANY, 0, &lid, &got), 0,
                             "root's listener %d", i);
        child_kill(&kids[0]);
        cr_expect_eq(as_nobody(fill_listeners, 1), 6, "nobody's listeners once more");
        cc_close(&r);
        cr_expect_eq(datd_stop(&d), 0);
}

/* ---- object memory --------------------------------------------------------- */

#define OBJECT_BYTES_BUDGET 65536
#define LMRS_PER_CLIENT 1000u

/* LMRs on two clients until datd refuses (LMRS_PER_CLIENT each at most):
 * how many, or -errno. */
static int fill_objects(void *arg)
{
        int n = 0;

        for (unsigned i = 0; i < 2; i++) {
                struct datp_ia_open_reply open;
                int fd = raw_connect_hello(d.socket_path);

                if (fd < 0 || raw_ia_open(fd, "shm", &open) < 0 || open.status.dat_status != 0)
                        return -ECONNREFUSED;
                for (unsigned k = 0; k < LMRS_PER_CLIENT; k++) {
                        struct datp_obj_create_reply reply;
                        struct datp_obj_desc desc;

                        raw_obj_desc(&desc, DATP_OBJ_LMR, (uint64_t) k + 1, 4096);
                        if (raw_obj_create(fd, open.ia_id, &desc, &reply) < 0)
                                return -EPIPE;
                        if (reply.status.dat_status ==
                            DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY))
                                break;
                        if (reply.status.dat_status != 0)
                                return -EPROTO;
                        n++;
                }
        }
        return n;
}

/* datd.conf max_object_bytes_per_uid: the object tables of one user's
 * clients stay within it (each client is within max_lmrs); root's do not
 * count against it, and the user's clients give it back when they go. */
Test(datd_uid_budget, max_object_bytes_per_uid_bounds_one_users_objects)
{
        char limits[128];
        int n;

        snprintf(limits, sizeof(limits), "\"max_lmrs\": %u, \"max_object_bytes_per_uid\": %d",
                 LMRS_PER_CLIENT, OBJECT_BYTES_BUDGET);
        start(limits);
        n = as_nobody(fill_objects, 0);
        /* An object slot is 112 bytes; the first table's last growth is cut
         * to what fits. */
        cr_expect(n > OBJECT_BYTES_BUDGET / 112 / 2 && n <= OBJECT_BYTES_BUDGET / 112,
                  "nobody's LMRs: %d", n);
        cr_expect(log_says("max_object_bytes_per_uid (65536) reached"), "the log does not say why");
        cr_expect_eq(fill_objects(NULL), (int) (2 * LMRS_PER_CLIENT), "root's LMRs");
        child_kill(&kids[0]);
        cr_expect_eq(as_nobody(fill_objects, 1), n, "nobody's LMRs once more");
        cr_expect_eq(datd_stop(&d), 0);
}
