/* The object model (PROTOCOL.md, "OBJ_CREATE / OBJ_UPDATE / OBJ_DESTROY"):
 * raw protocol clients register, change and destroy objects; datd's quotas
 * (datd.conf limits per open IA), ids, IA_CLOSE and client death are
 * checked through the replies and through D-Bus (ListObjects,
 * ListEndpoints, ListClients, GetCounters). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "tests/daemon/bus-client.h"
#include "tests/daemon/child.h"
#include "tests/daemon/raw-client.h"
#include "tests/harness.h"

static struct datd_instance d;
static pid_t child;
static sd_bus *bus;
static int fd = -1, other_fd = -1;

static void teardown(void)
{
        if (fd >= 0)
                close(fd);
        if (other_fd >= 0)
                close(other_fd);
        fd = other_fd = -1;
        bus = sd_bus_flush_close_unref(bus);
        child_kill(&child);
        datd_stop(&d);
}

/* One timeout for every suite of this program: criterion 2.4 leaks a timeout
 * record per distinct value (LeakSanitizer fails the run). */
#define TEST_TIMEOUT_S 60
TestSuite(datd_objects, .timeout = TEST_TIMEOUT_S, .fini = teardown);

/* Every test ends here: whatever it did, datd exits 0 on SIGTERM (no crash,
 * no sanitizer report, nothing leaked). */
static void stop(void)
{
        int status;

        bus = sd_bus_flush_close_unref(bus);
        status = datd_stop(&d);
        cr_expect_eq(status, 0, "datd's exit status after SIGTERM: %d", status);
}

/* datd with the shm and tcp IAs and these limits (JSON members, may be ""). */
static void start(const char *limits)
{
        char config[1024];
        int r;

        snprintf(config, sizeof(config),
                 "{\"log_level\": \"debug\", \"verbs\": false, \"ias\": ["
                 "{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"},"
                 "{\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"127.0.0.1\"}],"
                 " \"limits\": {%s}}", limits);
        cr_assert_eq(datd_start(&d, config), 0, "datd did not start");
        r = bus_client_open(d.bus_address, &bus);
        cr_assert_eq(r, 0, "private bus: %s", strerror(-r));
}

static uint32_t open_ia(int sock, const char *name)
{
        struct datp_ia_open_reply reply;

        cr_assert_eq(raw_ia_open(sock, name, &reply), 0);
        cr_assert_eq(reply.status.dat_status, DAT_SUCCESS, "IA_OPEN %s: 0x%08x", name,
                     reply.status.dat_status);
        return reply.ia_id;
}

/* A new connection with "shm" open. */
static int connect_open(uint32_t *ia_id)
{
        int sock = raw_connect_hello(d.socket_path);

        cr_assert_geq(sock, 0, "connect + HELLO: %s", strerror(-sock));
        *ia_id = open_ia(sock, "shm");
        return sock;
}

/* OBJ_CREATE of desc: the reply's dat_status, *obj_id (may be NULL) its id. */
static uint32_t create_desc(int sock, uint32_t ia_id, const struct datp_obj_desc *desc,
                            uint32_t *obj_id)
{
        struct datp_obj_create_reply reply;
        int r = raw_obj_create(sock, ia_id, desc, &reply);

        cr_assert_eq(r, 0, "OBJ_CREATE: %s", strerror(-r));
        if (obj_id)
                *obj_id = reply.obj_id;
        return reply.status.dat_status;
}

static uint32_t create(int sock, uint32_t ia_id, uint32_t kind, uint64_t handle, uint64_t length,
                       uint32_t *obj_id)
{
        struct datp_obj_desc desc;

        raw_obj_desc(&desc, kind, handle, length);
        return create_desc(sock, ia_id, &desc, obj_id);
}

/* An object that must be accepted: its id. */
static uint32_t create_ok(int sock, uint32_t ia_id, uint32_t kind, uint64_t handle, uint64_t length)
{
        uint32_t id = 0, status = create(sock, ia_id, kind, handle, length, &id);

        cr_assert_eq(status, DAT_SUCCESS, "OBJ_CREATE kind %u: 0x%08x", kind, status);
        cr_assert_neq(id, 0);
        return id;
}

static uint32_t update(int sock, uint32_t ia_id, uint32_t obj_id, const struct datp_obj_desc *desc)
{
        struct datp_obj_update_reply reply;
        int r = raw_obj_update(sock, ia_id, obj_id, desc, &reply);

        cr_assert_eq(r, 0, "OBJ_UPDATE: %s", strerror(-r));
        return reply.status.dat_status;
}

static uint32_t destroy(int sock, uint32_t ia_id, uint32_t obj_id)
{
        struct datp_obj_destroy_reply reply;
        int r = raw_obj_destroy(sock, ia_id, obj_id, &reply);

        cr_assert_eq(r, 0, "OBJ_DESTROY: %s", strerror(-r));
        return reply.status.dat_status;
}

static uint64_t counter(const char *name)
{
        uint64_t value = 0;

        cr_assert_eq(bus_counter(bus, name, &value), 0, "%s", name);
        return value;
}

#define MAX_ROWS 64

/* ListObjects() into rows; returns how many there are. */
static size_t list_objects(struct bus_object rows[MAX_ROWS])
{
        size_t n = 0;
        int r = bus_list_objects(bus, rows, MAX_ROWS, &n);

        cr_assert_eq(r, 0, "ListObjects: %s", strerror(-r));
        return n;
}

static uint64_t n_objects_property(void)
{
        uint64_t n = UINT64_MAX;

        cr_assert_geq(sd_bus_get_property_trivial(bus, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                                  "NObjects", NULL, 't', &n), 0);
        return n;
}

static size_t n_objects_listed(void)
{
        struct bus_object rows[MAX_ROWS];

        return list_objects(rows);
}

static const struct bus_object *find_listed(const struct bus_object *rows, size_t n, uint32_t id)
{
        for (size_t i = 0; i < n && i < MAX_ROWS; i++)
                if (rows[i].id == id)
                        return &rows[i];
        return NULL;
}

static void expect_status(uint32_t status, uint32_t expected)
{
        cr_expect_eq(status, expected, "dat_status 0x%08x, expected 0x%08x", status, expected);
}

#define DAT_ERROR(type, subtype) ((uint32_t) (DAT_CLASS_ERROR | (type) | (subtype)))

/* datd with these limits (as start()) and fd a new connection with "shm"
 * open: that IA's id. */
static uint32_t start_open(const char *limits)
{
        uint32_t ia_id;

        start(limits);
        fd = connect_open(&ia_id);
        return ia_id;
}

/* An OBJ_CREATE that a quota must refuse with this resource subtype. */
static void expect_refused(int sock, uint32_t ia_id, uint32_t kind, uint64_t handle, uint64_t length,
                           uint32_t subtype)
{
        expect_status(create(sock, ia_id, kind, handle, length, NULL),
                      DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, subtype));
}

/* An OBJ_DESTROY of an id this connection and IA do not own. */
static void expect_no_such_object(int sock, uint32_t ia_id, uint32_t obj_id)
{
        expect_status(destroy(sock, ia_id, obj_id), DAT_ERROR(DAT_INVALID_HANDLE, DAT_NO_SUBTYPE));
}

/* ---- create, update, destroy ------------------------------------------------ */

static const struct {
        uint32_t kind;
        const char *name;
} kinds[] = {
        { DATP_OBJ_PZ, "PZ" },   { DATP_OBJ_EVD, "EVD" }, { DATP_OBJ_CNO, "CNO" },
        { DATP_OBJ_LMR, "LMR" }, { DATP_OBJ_RMR, "RMR" }, { DATP_OBJ_EP, "EP" },
        { DATP_OBJ_SRQ, "SRQ" },
};

#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

Test(datd_objects, obj_create_registers_every_kind_and_lists_it)
{
        struct bus_object rows[MAX_ROWS];
        uint32_t ia, ids[N_KINDS];
        size_t n;

        ia = start_open("");
        for (size_t i = 0; i < N_KINDS; i++)
                ids[i] = create_ok(fd, ia, kinds[i].kind, 0x1000 + i, 4096);
        n = list_objects(rows);
        cr_assert_eq(n, N_KINDS);
        for (size_t i = 0; i < N_KINDS; i++) {
                const struct bus_object *o = find_listed(rows, n, ids[i]);
                struct datp_obj_desc desc;

                raw_obj_desc(&desc, kinds[i].kind, 0x1000 + i, 4096);
                cr_assert_not_null(o, "%s not listed", kinds[i].name);
                cr_expect_str_eq(o->kind, kinds[i].name);
                cr_expect_eq(o->pid, (uint32_t) getpid());
                cr_expect_str_eq(o->ia, "shm");
                cr_expect_eq(o->handle, desc.handle);
                cr_expect_eq(o->pz_handle, desc.pz_handle);
                cr_expect_eq(o->length, desc.length);
                cr_expect_eq(o->qlen, desc.qlen);
        }
        cr_expect_str_eq(find_listed(rows, n, ids[5])->state, "UNCONNECTED");
        cr_expect_str_eq(find_listed(rows, n, ids[6])->state, "OPERATIONAL");
        cr_expect_str_eq(find_listed(rows, n, ids[0])->state, "");
        cr_expect_eq(counter("objects_registered"), N_KINDS);
        cr_expect_eq(counter("objects_refused"), 0);
        stop();
}

Test(datd_objects, obj_ids_are_distinct_and_never_zero)
{
        uint32_t ia, a, b;

        ia = start_open("");
        a = create_ok(fd, ia, DATP_OBJ_EP, 0x10, 0);
        b = create_ok(fd, ia, DATP_OBJ_EP, 0x11, 0);
        cr_expect_neq(a, b);
        stop();
}

/* An EP's handle names it (obj_id 0): one EP per handle on a connection,
 * while other kinds may share a handle value. */
Test(datd_objects, a_second_ep_with_the_same_handle_is_refused)
{
        uint32_t ia;

        ia = start_open("");
        create_ok(fd, ia, DATP_OBJ_EP, 0x10, 0);
        expect_status(create(fd, ia, DATP_OBJ_EP, 0x10, 0, NULL),
                      DAT_ERROR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        create_ok(fd, ia, DATP_OBJ_PZ, 0x10, 0);
        create_ok(fd, ia, DATP_OBJ_PZ, 0x10, 0);
        cr_expect_eq(n_objects_listed(), 3);
        stop();
}

static uint32_t destroy_ep_by_handle(int sock, uint32_t ia_id, uint64_t handle)
{
        struct datp_obj_destroy_reply reply;
        int r = raw_obj_destroy_named(sock, ia_id, 0, handle, &reply);

        cr_assert_eq(r, 0, "OBJ_DESTROY: %s", strerror(-r));
        return reply.status.dat_status;
}

/* How libdat names the EPs it registers without waiting for their id. */
Test(datd_objects, obj_id_0_names_the_ep_of_the_handle)
{
        struct bus_endpoint rows[2];
        struct datp_obj_desc desc;
        uint32_t ia, pz;
        size_t n;

        ia = start_open("");
        create_ok(fd, ia, DATP_OBJ_EP, 0x42, 0);
        pz = create_ok(fd, ia, DATP_OBJ_PZ, 0x43, 0);
        raw_obj_desc(&desc, DATP_OBJ_EP, 0x42, 0);
        desc.state = DAT_EP_STATE_CONNECTED;
        expect_status(update(fd, ia, 0, &desc), DAT_SUCCESS);
        cr_assert_eq(bus_list_endpoints(bus, rows, 2, &n), 0);
        cr_assert_eq(n, 1);
        cr_expect_str_eq(rows[0].state, "CONNECTED");
        /* Only EPs are found by handle. */
        raw_obj_desc(&desc, DATP_OBJ_PZ, 0x43, 0);
        expect_status(update(fd, ia, 0, &desc), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        expect_status(destroy_ep_by_handle(fd, ia, 0x43),
                      DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        expect_status(destroy_ep_by_handle(fd, ia, 0x42), DAT_SUCCESS);
        expect_status(destroy_ep_by_handle(fd, ia, 0x42),
                      DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        cr_expect_eq(n_objects_listed(), 1);
        expect_status(destroy(fd, ia, pz), DAT_SUCCESS);
        /* The handle is free again. */
        create_ok(fd, ia, DATP_OBJ_EP, 0x42, 0);
        stop();
}

Test(datd_objects, obj_update_replaces_the_description)
{
        struct bus_endpoint rows[2];
        struct datp_obj_desc desc;
        uint32_t ia, id;
        size_t n;

        ia = start_open("");
        id = create_ok(fd, ia, DATP_OBJ_EP, 0x42, 0);
        raw_obj_desc(&desc, DATP_OBJ_EP, 0x42, 0);
        desc.state = DAT_EP_STATE_CONNECTED;
        desc.pz_handle = 0x6000;
        desc.max_recv_dtos = 99;
        expect_status(update(fd, ia, id, &desc), DAT_SUCCESS);
        cr_assert_eq(bus_list_endpoints(bus, rows, 2, &n), 0);
        cr_assert_eq(n, 1);
        cr_expect_str_eq(rows[0].state, "CONNECTED");
        cr_expect_eq(rows[0].pz_handle, 0x6000);
        cr_expect_eq(rows[0].max_recv_dtos, 99);
        cr_expect_eq(rows[0].id, id);
        stop();
}

/* proto/PROTOCOL.md: a request with request_id 0 asks for no answer.
 * datd carries it out (the update shows) and the next packet on the
 * socket is the reply to the request after it, not one to request 0. */
Test(datd_objects, a_request_with_request_id_0_is_carried_out_and_not_answered)
{
        struct bus_endpoint rows[2];
        struct datp_obj_update u = { .hdr = { .type = DATP_OBJ_UPDATE } };
        struct datp_ia_query q;
        union datp_message m;
        uint32_t ia, id;
        size_t n;

        ia = start_open("");
        id = create_ok(fd, ia, DATP_OBJ_EP, 0x42, 0);
        u.ia_id = ia;
        u.obj_id = id;
        raw_obj_desc(&u.desc, DATP_OBJ_EP, 0x42, 0);
        u.desc.state = DAT_EP_STATE_CONNECTED;
        datp_header_init(&u.hdr, DATP_OBJ_UPDATE, RAW_VERSION, sizeof(u), 0);
        cr_assert_eq(raw_send(fd, &u, sizeof(u)), 0);
        raw_ia_query_init(&q, ia);
        cr_assert_eq(raw_send(fd, &q, sizeof(q)), 0);
        cr_assert_gt(raw_recv(fd, &m, RAW_TIMEOUT_MS), 0);
        cr_expect_eq(m.hdr.type, DATP_IA_QUERY | DATP_REPLY, "got type 0x%x first", m.hdr.type);
        cr_expect_eq(m.hdr.request_id, q.hdr.request_id);
        cr_assert_eq(bus_list_endpoints(bus, rows, 2, &n), 0);
        cr_assert_eq(n, 1);
        cr_expect_str_eq(rows[0].state, "CONNECTED");
        stop();
}

Test(datd_objects, obj_destroy_removes_the_object)
{
        struct bus_object rows[MAX_ROWS];
        uint32_t ia, a, b;
        size_t n;

        ia = start_open("");
        a = create_ok(fd, ia, DATP_OBJ_PZ, 0x1, 0);
        b = create_ok(fd, ia, DATP_OBJ_PZ, 0x2, 0);
        expect_status(destroy(fd, ia, a), DAT_SUCCESS);
        n = list_objects(rows);
        cr_assert_eq(n, 1);
        cr_expect_eq(rows[0].id, b);
        expect_no_such_object(fd, ia, a);
        stop();
}

/* ---- quotas: datd.conf limits per open IA ------------------------------------ */

/* limit = 3 objects of kind: the fourth is refused with the subtype, counted
 * in objects_refused, and accepted again once one of the three is gone. */
static void expect_quota_holds(uint32_t kind, const char *limit, uint32_t subtype)
{
        char limits[64], line[64], *log;
        uint32_t ia, ids[3], id = 1;

        snprintf(limits, sizeof(limits), "\"%s\": 3", limit);
        ia = start_open(limits);
        for (size_t i = 0; i < 3; i++)
                ids[i] = create_ok(fd, ia, kind, 0x100 + i, 1);
        expect_status(create(fd, ia, kind, 0x200, 1, &id),
                      DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, subtype));
        cr_expect_eq(id, 0);
        cr_expect_eq(counter("objects_refused"), 1);
        cr_expect_eq(n_objects_listed(), 3);
        log = read_file_str(d.log_path);
        cr_assert_not_null(log);
        snprintf(line, sizeof(line), ": %s (3) reached.", limit);
        cr_expect_not_null(strstr(log, line), "no log line naming %s:\n%s", limit, log);
        free(log);

        expect_status(destroy(fd, ia, ids[1]), DAT_SUCCESS);
        create_ok(fd, ia, kind, 0x201, 1);
        stop();
}

Test(datd_objects, max_pzs_bounds_the_pzs_of_an_ia)
{
        expect_quota_holds(DATP_OBJ_PZ, "max_pzs", DAT_RESOURCE_PROTECTION_DOMAIN);
}

Test(datd_objects, max_evds_bounds_the_evds_of_an_ia)
{
        expect_quota_holds(DATP_OBJ_EVD, "max_evds", DAT_RESOURCE_TEVD);
}

Test(datd_objects, max_evds_bounds_the_cnos_of_an_ia)
{
        expect_quota_holds(DATP_OBJ_CNO, "max_evds", DAT_RESOURCE_TEVD);
}

Test(datd_objects, max_lmrs_bounds_the_lmrs_of_an_ia)
{
        expect_quota_holds(DATP_OBJ_LMR, "max_lmrs", DAT_RESOURCE_MEMORY_REGION);
}

Test(datd_objects, max_rmrs_bounds_the_rmrs_of_an_ia)
{
        expect_quota_holds(DATP_OBJ_RMR, "max_rmrs", DAT_RESOURCE_MEMORY_REGION);
}

Test(datd_objects, max_eps_bounds_the_eps_of_an_ia)
{
        expect_quota_holds(DATP_OBJ_EP, "max_eps", DAT_RESOURCE_TEP);
}

Test(datd_objects, max_srqs_bounds_the_srqs_of_an_ia)
{
        expect_quota_holds(DATP_OBJ_SRQ, "max_srqs", DAT_RESOURCE_SRQ);
}

Test(datd_objects, evds_and_cnos_count_together_against_max_evds)
{
        uint32_t ia;

        ia = start_open("\"max_evds\": 2");
        create_ok(fd, ia, DATP_OBJ_EVD, 0x1, 0);
        create_ok(fd, ia, DATP_OBJ_CNO, 0x2, 0);
        expect_refused(fd, ia, DATP_OBJ_EVD, 0x3, 0, DAT_RESOURCE_TEVD);
        expect_refused(fd, ia, DATP_OBJ_CNO, 0x4, 0, DAT_RESOURCE_TEVD);
        stop();
}

Test(datd_objects, a_quota_counts_one_kind_only)
{
        uint32_t ia;

        ia = start_open("\"max_eps\": 1");
        create_ok(fd, ia, DATP_OBJ_EP, 0x1, 0);
        for (size_t i = 0; i < N_KINDS; i++)
                if (kinds[i].kind != DATP_OBJ_EP)
                        create_ok(fd, ia, kinds[i].kind, 0x10 + i, 1);
        stop();
}

Test(datd_objects, max_lmr_bytes_bounds_the_sum_of_lmr_lengths)
{
        uint32_t ia, big;

        ia = start_open("\"max_lmr_bytes\": 1000");
        create_ok(fd, ia, DATP_OBJ_LMR, 0x1, 600);
        big = create_ok(fd, ia, DATP_OBJ_LMR, 0x2, 400);
        expect_refused(fd, ia, DATP_OBJ_LMR, 0x3, 1, DAT_RESOURCE_MEMORY);
        expect_status(destroy(fd, ia, big), DAT_SUCCESS);
        create_ok(fd, ia, DATP_OBJ_LMR, 0x4, 400);
        stop();
}

Test(datd_objects, an_lmr_length_that_would_wrap_the_sum_is_refused)
{
        uint32_t ia;

        ia = start_open("\"max_lmr_bytes\": 1000");
        create_ok(fd, ia, DATP_OBJ_LMR, 0x1, 10);
        expect_refused(fd, ia, DATP_OBJ_LMR, 0x2, UINT64_MAX - 5, DAT_RESOURCE_MEMORY);
        expect_refused(fd, ia, DATP_OBJ_LMR, 0x3, 1001, DAT_RESOURCE_MEMORY);
        create_ok(fd, ia, DATP_OBJ_LMR, 0x4, 990);
        stop();
}

Test(datd_objects, an_lmr_update_past_max_lmr_bytes_is_refused)
{
        struct bus_object rows[MAX_ROWS];
        struct datp_obj_desc desc;
        uint32_t ia, id;

        ia = start_open("\"max_lmr_bytes\": 1000");
        create_ok(fd, ia, DATP_OBJ_LMR, 0x1, 500);
        id = create_ok(fd, ia, DATP_OBJ_LMR, 0x2, 500);
        raw_obj_desc(&desc, DATP_OBJ_LMR, 0x2, 501);
        expect_status(update(fd, ia, id, &desc),
                      DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY));
        cr_assert_eq(list_objects(rows), 2);
        cr_expect_eq(find_listed(rows, 2, id)->length, 500, "the refused update was applied");
        /* Its own old length does not count against the new one. */
        desc.length = 400;
        expect_status(update(fd, ia, id, &desc), DAT_SUCCESS);
        stop();
}

Test(datd_objects, quotas_hold_per_open_ia)
{
        uint32_t shm, tcp;

        shm = start_open("\"max_eps\": 1");
        tcp = open_ia(fd, "tcp");
        create_ok(fd, shm, DATP_OBJ_EP, 0x1, 0);
        create_ok(fd, tcp, DATP_OBJ_EP, 0x2, 0);
        expect_refused(fd, tcp, DATP_OBJ_EP, 0x3, 0, DAT_RESOURCE_TEP);
        stop();
}

/* The log line at info names pid, uid, kind and limit; a client that keeps
 * hitting the same limit is logged once until one of its objects goes. */
static size_t count_in_log(const char *needle)
{
        char *log = read_file_str(d.log_path);
        size_t n = 0;

        cr_assert_not_null(log);
        for (const char *p = log; (p = strstr(p, needle)); p++)
                n++;
        free(log);
        return n;
}

Test(datd_objects, a_quota_refusal_is_logged_once_with_pid_uid_kind_and_limit)
{
        char line[160];
        uint32_t ia, id;

        ia = start_open("\"max_eps\": 1");
        id = create_ok(fd, ia, DATP_OBJ_EP, 0x1, 0);
        for (int i = 0; i < 3; i++)
                create(fd, ia, DATP_OBJ_EP, 0x2, 0, NULL);
        snprintf(line, sizeof(line), "(pid %d, uid %u, ", (int) getpid(), (unsigned) getuid());
        cr_expect_eq(count_in_log(line), 1, "pid and uid");
        cr_expect_eq(count_in_log("info: Client "), 1, "the refusal is not logged at info");
        cr_expect_eq(count_in_log("EP refused: max_eps (1) reached."), 1);
        /* A destroy re-arms it. */
        expect_status(destroy(fd, ia, id), DAT_SUCCESS);
        create_ok(fd, ia, DATP_OBJ_EP, 0x3, 0);
        create(fd, ia, DATP_OBJ_EP, 0x4, 0, NULL);
        cr_expect_eq(count_in_log("EP refused: max_eps (1) reached."), 2);
        stop();
}

Test(datd_objects, evds_and_cnos_refused_under_max_evds_are_logged_once)
{
        uint32_t ia;

        ia = start_open("\"max_evds\": 1");
        create_ok(fd, ia, DATP_OBJ_EVD, 0x1, 0);
        create(fd, ia, DATP_OBJ_CNO, 0x2, 0, NULL);
        create(fd, ia, DATP_OBJ_EVD, 0x3, 0, NULL);
        /* One limit, one line, whichever kind hit it. */
        cr_expect_eq(count_in_log(": max_evds (1) reached."), 1);
        stop();
}

/* ---- unknown ids -------------------------------------------------------------- */

Test(datd_objects, obj_create_on_an_unknown_ia_is_invalid_handle_ia)
{
        uint32_t ia, id = 1;

        ia = start_open("");
        expect_status(create(fd, ia + 1, DATP_OBJ_PZ, 0x1, 0, &id),
                      DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(id, 0);
        expect_status(create(fd, 0, DATP_OBJ_PZ, 0x1, 0, NULL),
                      DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(n_objects_listed(), 0);
        cr_expect_eq(counter("objects_refused"), 2);
        stop();
}

Test(datd_objects, obj_update_and_destroy_on_an_unknown_ia_are_invalid_handle_ia)
{
        struct datp_obj_desc desc;
        uint32_t ia, id;

        ia = start_open("");
        id = create_ok(fd, ia, DATP_OBJ_EP, 0x1, 0);
        raw_obj_desc(&desc, DATP_OBJ_EP, 0x1, 0);
        expect_status(update(fd, ia + 1, id, &desc), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        expect_status(destroy(fd, ia + 1, id), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(n_objects_listed(), 1);
        stop();
}

Test(datd_objects, obj_update_of_an_unknown_object_is_invalid_handle_of_its_kind)
{
        struct datp_obj_desc desc;
        uint32_t ia, id;

        ia = start_open("");
        id = create_ok(fd, ia, DATP_OBJ_EP, 0x1, 0);
        raw_obj_desc(&desc, DATP_OBJ_EP, 0x1, 0);
        expect_status(update(fd, ia, id + 1, &desc), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        expect_status(update(fd, ia, UINT32_MAX, &desc), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        /* obj_id 0: by handle, and no EP has this one. */
        raw_obj_desc(&desc, DATP_OBJ_EP, 0x2, 0);
        expect_status(update(fd, ia, 0, &desc), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        raw_obj_desc(&desc, DATP_OBJ_LMR, 0x1, 1);
        expect_status(update(fd, ia, id + 1, &desc), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR));
        stop();
}

Test(datd_objects, obj_destroy_of_an_unknown_object_is_invalid_handle)
{
        uint32_t ia;

        ia = start_open("");
        create_ok(fd, ia, DATP_OBJ_PZ, 0x1, 0);
        expect_no_such_object(fd, ia, 0);
        expect_no_such_object(fd, ia, 12345);
        cr_expect_eq(n_objects_listed(), 1);
        stop();
}

Test(datd_objects, a_stale_id_does_not_reach_the_object_that_reuses_its_slot)
{
        uint32_t ia, stale, fresh;

        ia = start_open("");
        stale = create_ok(fd, ia, DATP_OBJ_PZ, 0x1, 0);
        expect_status(destroy(fd, ia, stale), DAT_SUCCESS);
        fresh = create_ok(fd, ia, DATP_OBJ_PZ, 0x2, 0);
        cr_expect_neq(fresh, stale);
        expect_no_such_object(fd, ia, stale);
        cr_expect_eq(n_objects_listed(), 1);
        stop();
}

Test(datd_objects, an_object_is_reached_only_through_its_own_ia)
{
        uint32_t shm, tcp, id;

        shm = start_open("");
        tcp = open_ia(fd, "tcp");
        id = create_ok(fd, shm, DATP_OBJ_PZ, 0x1, 0);
        expect_no_such_object(fd, tcp, id);
        expect_status(destroy(fd, shm, id), DAT_SUCCESS);
        stop();
}

Test(datd_objects, object_ids_belong_to_their_connection)
{
        uint32_t ia, other_ia, id;

        ia = start_open("");
        other_fd = connect_open(&other_ia);
        id = create_ok(fd, ia, DATP_OBJ_PZ, 0x1, 0);
        cr_assert_eq(other_ia, ia, "both connections number their first IA alike");
        expect_no_such_object(other_fd, ia, id);
        cr_expect_eq(n_objects_listed(), 1);
        stop();
}

/* ---- what an update may change ---------------------------------------------------- */

Test(datd_objects, obj_update_that_changes_the_kind_is_invalid_parameter)
{
        struct bus_object rows[MAX_ROWS];
        struct datp_obj_desc desc;
        uint32_t ia, id;

        ia = start_open("");
        id = create_ok(fd, ia, DATP_OBJ_EVD, 0x1, 0);
        raw_obj_desc(&desc, DATP_OBJ_CNO, 0x1, 0);
        expect_status(update(fd, ia, id, &desc), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        cr_assert_eq(list_objects(rows), 1);
        cr_expect_str_eq(rows[0].kind, "EVD");
        stop();
}

Test(datd_objects, obj_update_that_changes_the_handle_is_invalid_parameter)
{
        struct bus_object rows[MAX_ROWS];
        struct datp_obj_desc desc;
        uint32_t ia, id;

        ia = start_open("");
        id = create_ok(fd, ia, DATP_OBJ_EP, 0x1, 0);
        raw_obj_desc(&desc, DATP_OBJ_EP, 0x2, 0);
        expect_status(update(fd, ia, id, &desc), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        cr_assert_eq(list_objects(rows), 1);
        cr_expect_eq(rows[0].handle, 0x1);
        stop();
}

/* ---- what takes objects away -------------------------------------------------------- */

Test(datd_objects, abrupt_ia_close_drops_the_objects_of_that_ia_only)
{
        struct datp_ia_close_reply closed;
        struct bus_object rows[MAX_ROWS];
        uint32_t shm, tcp, kept;
        size_t n;

        shm = start_open("");
        tcp = open_ia(fd, "tcp");
        for (size_t i = 0; i < N_KINDS; i++)
                create_ok(fd, shm, kinds[i].kind, 0x100 + i, 1);
        kept = create_ok(fd, tcp, DATP_OBJ_EP, 0x200, 0);
        cr_assert_eq(raw_ia_close(fd, shm, DATP_CLOSE_ABRUPT, &closed), 0);
        expect_status(closed.status.dat_status, DAT_SUCCESS);
        n = list_objects(rows);
        cr_assert_eq(n, 1);
        cr_expect_eq(rows[0].id, kept);
        cr_expect_str_eq(rows[0].ia, "tcp");
        stop();
}

Test(datd_objects, graceful_ia_close_with_objects_is_invalid_state)
{
        struct datp_ia_close_reply closed;
        uint32_t ia, id;

        ia = start_open("");
        id = create_ok(fd, ia, DATP_OBJ_PZ, 0x1, 0);
        /* dat_ia_close(3DAT): graceful close with live children -> DAT_INVALID_STATE */
        cr_assert_eq(raw_ia_close(fd, ia, DATP_CLOSE_GRACEFUL, &closed), 0);
        expect_status(closed.status.dat_status, DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE));
        cr_expect_eq(n_objects_listed(), 1);
        /* Still open, and closes once its children are gone. */
        expect_status(destroy(fd, ia, id), DAT_SUCCESS);
        cr_assert_eq(raw_ia_close(fd, ia, DATP_CLOSE_GRACEFUL, &closed), 0);
        expect_status(closed.status.dat_status, DAT_SUCCESS);
        stop();
}

Test(datd_objects, a_closed_connection_drops_its_objects)
{
        uint32_t ia;

        ia = start_open("");
        other_fd = connect_open(&ia);
        create_ok(fd, ia, DATP_OBJ_EP, 0x1, 0);
        create_ok(other_fd, ia, DATP_OBJ_EP, 0x2, 0);
        cr_expect_eq(n_objects_property(), 2);
        close(fd);
        fd = -1;
        for (int i = 0; i < 500 && n_objects_listed() > 1; i++)
                usleep(10000);
        cr_expect_eq(n_objects_listed(), 1);
        cr_expect_eq(n_objects_property(), 1);
        stop();
}

static const char *child_socket;

/* A client process that registers EPs and LMRs, then holds them. */
static int register_and_hold(void *arg)
{
        struct datp_ia_open_reply opened;
        struct datp_obj_create_reply reply;
        struct datp_obj_desc desc;
        int sock = raw_connect_hello(child_socket), r;

        if (sock < 0)
                return sock;
        r = raw_ia_open(sock, "shm", &opened);
        for (uint32_t i = 0; r == 0 && i < 10; i++) {
                raw_obj_desc(&desc, i % 2 ? DATP_OBJ_EP : DATP_OBJ_LMR, 0x100 + i, 4096);
                r = raw_obj_create(sock, opened.ia_id, &desc, &reply);
                if (r == 0 && reply.status.dat_status != DAT_SUCCESS)
                        r = -EIO;
        }
        /* sock stays open until the child is killed. */
        return r;
}

Test(datd_objects, a_dead_clients_objects_are_dropped)
{
        struct bus_endpoint eps[8];
        int result_fd, result = -1;
        size_t n = 0;

        start("");
        child_socket = d.socket_path;
        child = child_run_as(getuid(), getgid(), register_and_hold, NULL, 1, &result_fd);
        cr_assert_gt(child, 0);
        cr_assert_eq(child_result(result_fd, 10000, &result), 0);
        close(result_fd);
        cr_assert_eq(result, 0, "the client failed: %s", strerror(-result));
        cr_assert_eq(n_objects_listed(), 10);
        cr_assert_eq(bus_list_endpoints(bus, eps, 8, &n), 0);
        cr_assert_eq(n, 5);
        cr_expect_eq(eps[0].pid, (uint32_t) child);

        child_kill(&child);
        for (int i = 0; i < 500 && n_objects_listed() > 0; i++)
                usleep(10000);
        cr_expect_eq(n_objects_listed(), 0);
        cr_assert_eq(bus_list_endpoints(bus, eps, 8, &n), 0);
        cr_expect_eq(n, 0);
        stop();
}

/* ---- D-Bus ------------------------------------------------------------------------------ */

Test(datd_objects, list_endpoints_shows_every_field_of_an_ep)
{
        struct bus_endpoint ep;
        struct datp_obj_desc desc;
        uint32_t ia, id;
        size_t n;

        ia = start_open("");
        raw_obj_desc(&desc, DATP_OBJ_EP, 0x7f00dead0000ull, 0);
        desc.state = DAT_EP_STATE_ACTIVE_CONNECTION_PENDING;
        cr_assert_eq(create_desc(fd, ia, &desc, &id), DAT_SUCCESS);
        create_ok(fd, ia, DATP_OBJ_PZ, 0x5000, 0); /* not an EP: not listed */
        cr_assert_eq(bus_list_endpoints(bus, &ep, 1, &n), 0);
        cr_assert_eq(n, 1);
        cr_expect_neq(ep.client_id, 0);
        cr_expect_eq(ep.pid, (uint32_t) getpid());
        cr_expect_gt(strlen(ep.command), 0);
        cr_expect_str_eq(ep.ia, "shm");
        cr_expect_eq(ep.handle, desc.handle);
        cr_expect_eq(ep.pz_handle, desc.pz_handle);
        cr_expect_str_eq(ep.state, "ACTIVE_CONNECTION_PENDING");
        cr_expect_eq(ep.max_recv_dtos, desc.max_recv_dtos);
        cr_expect_eq(ep.max_request_dtos, desc.max_request_dtos);
        cr_expect_eq(ep.max_recv_iov, desc.max_recv_iov);
        cr_expect_eq(ep.max_request_iov, desc.max_request_iov);
        cr_expect_eq(ep.max_message_size, desc.max_message_size);
        cr_expect_eq(ep.id, id);
        stop();
}

#define MANY_EPS 20000

Test(datd_objects, list_endpoints_holds_every_ep_of_a_large_client)
{
        struct bus_endpoint *eps = calloc(MANY_EPS + 1, sizeof(*eps));
        unsigned char *seen = calloc(MANY_EPS, 1);
        char limits[64];
        uint32_t ia;
        size_t n = 0;

        cr_assert(eps && seen);
        snprintf(limits, sizeof(limits), "\"max_eps\": %d", MANY_EPS);
        ia = start_open(limits);
        for (uint64_t i = 0; i < MANY_EPS; i++)
                create_ok(fd, ia, DATP_OBJ_EP, 0x10000 + i, 0);
        cr_assert_eq(bus_list_endpoints(bus, eps, MANY_EPS + 1, &n), 0);
        cr_assert_eq(n, MANY_EPS);
        for (size_t i = 0; i < n; i++) {
                uint64_t k = eps[i].handle - 0x10000;

                cr_assert_lt(k, MANY_EPS, "handle %#llx", (unsigned long long) eps[i].handle);
                cr_assert_eq(seen[k], 0, "handle %#llx twice", (unsigned long long) eps[i].handle);
                seen[k] = 1;
        }
        free(eps);
        free(seen);
        stop();
}

Test(datd_objects, list_clients_counts_objects_eps_and_lmr_bytes)
{
        uint32_t ia, n_objects = 0, n_eps = 0;
        uint64_t lmr_bytes = 0;

        ia = start_open("");
        create_ok(fd, ia, DATP_OBJ_EP, 0x1, 0);
        create_ok(fd, ia, DATP_OBJ_EP, 0x2, 0);
        create_ok(fd, ia, DATP_OBJ_LMR, 0x3, 1000);
        create_ok(fd, ia, DATP_OBJ_LMR, 0x4, 24);
        create_ok(fd, ia, DATP_OBJ_PZ, 0x5, 0);
        cr_assert_eq(bus_client_objects(bus, getpid(), &n_objects, &n_eps, &lmr_bytes), 0);
        cr_expect_eq(n_objects, 5);
        cr_expect_eq(n_eps, 2);
        cr_expect_eq(lmr_bytes, 1024);
        stop();
}

Test(datd_objects, an_invalid_description_is_refused_and_registers_nothing)
{
        struct datp_obj_create req = {};
        struct datp_error e;
        uint32_t ia;

        ia = start_open("");
        /* An EP with a length: datp_validate() refuses it before datd looks. */
        datp_header_init(&req.hdr, DATP_OBJ_CREATE, RAW_VERSION, sizeof(req), 77);
        req.ia_id = ia;
        raw_obj_desc(&req.desc, DATP_OBJ_EP, 0x1, 0);
        req.desc.length = 4096;
        cr_assert_eq(raw_send(fd, &req, sizeof(req)), 0);
        cr_assert_eq(raw_expect_error(fd, &e), 0);
        cr_expect_eq(e.code, DATP_E_FIELD);
        cr_expect_eq(e.fatal, 0);
        cr_expect_eq(n_objects_listed(), 0);
        create_ok(fd, ia, DATP_OBJ_EP, 0x1, 0);
        stop();
}
