/* The real datctl against a real datd (tests/harness.h): status, ia list and
 * client list, as text and as JSON, with real client processes connected
 * over datd's protocol; and the exit status when datd is not there or the
 * command line is wrong. */
#include <config.h>

#include <criterion/criterion.h>
#include <dat2/udat.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "proto/datp.h"
#include "tests/datctl/datctl-run.h"
#include "tests/harness.h"

#define PROBE_COMMAND "datctl-probe"
#define PROBE_READY_TIMEOUT_MS 5000

static struct datd_instance datd;

/* The client process of a test, killed by teardown whatever happens. */
static pid_t probe_pid;
static int probe_hold_fd = -1;

static void keep_off_the_host(void)
{
        /* datctl must never fall through to the host's datd. */
        unsetenv("DATD_BUS_ADDRESS");
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/datctl-test/system_bus_socket", 1);
}

static void start_datd(void)
{
        keep_off_the_host();
        cr_assert_eq(datd_start(&datd, NULL), 0, "datd did not start");
}

/* Whether the next probe registers objects (probe_register()), and how
 * many EPs besides (probe_register_many()). */
static bool probe_objects;
static unsigned probe_many_eps;

static void stop_all(void)
{
        probe_objects = false;
        probe_many_eps = 0;
        if (probe_pid > 0) {
                kill(probe_pid, SIGKILL);
                waitpid(probe_pid, NULL, 0);
                probe_pid = 0;
        }
        if (probe_hold_fd >= 0) {
                close(probe_hold_fd);
                probe_hold_fd = -1;
        }
        datd_stop(&datd);
}

/* One timeout for every suite: criterion 2.4 leaks its timeout record when
 * suites of one program have different ones (LeakSanitizer fails the run). */
#define TEST_TIMEOUT_S 60
TestSuite(datctl, .init = start_datd, .fini = stop_all, .timeout = TEST_TIMEOUT_S);
TestSuite(datctl_cli, .init = keep_off_the_host, .timeout = TEST_TIMEOUT_S);

static uint64_t now_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* ---- a real client: HELLO and IA_OPEN over datd's socket ---------------- */

static int probe_exchange(int sock, struct datp_header *request, uint16_t reply_type,
                          union datp_message *reply)
{
        unsigned nfds;
        ssize_t n;
        int r;

        r = datp_send(sock, request, NULL, 0);
        if (r < 0)
                return r;
        n = datp_recv(sock, reply, NULL, 0, &nfds);
        if (n < 0)
                return (int)n;
        if (n < (ssize_t)sizeof(struct datp_header) + (ssize_t)sizeof(struct datp_status) ||
            reply->hdr.type != reply_type)
                return -EPROTO;
        /* Every reply body starts with struct datp_status. */
        return ((const struct datp_status *)(reply->bytes + sizeof(struct datp_header)))->dat_status
               ? -EACCES : 0;
}

/* What a probe registers on its IA when asked to (probe_objects): two EPs
 * (one connected), an LMR of 1 MiB and a PZ, as libdat would describe them. */
#define PROBE_HANDLE_EP1 0x7f00aa001000ull
#define PROBE_HANDLE_EP2 0x7f00aa002000ull
#define PROBE_HANDLE_LMR 0x7f00aa003000ull
#define PROBE_HANDLE_PZ 0x7f00aa004000ull
#define PROBE_LMR_LENGTH (1u << 20)

static const struct datp_obj_desc probe_descs[] = {
        { .kind = DATP_OBJ_PZ, .handle = PROBE_HANDLE_PZ },
        { .kind = DATP_OBJ_EP, .state = 0 /* DAT_EP_STATE_UNCONNECTED */, .handle = PROBE_HANDLE_EP1,
          .pz_handle = PROBE_HANDLE_PZ, .max_recv_dtos = 16, .max_request_dtos = 32,
          .max_recv_iov = 2, .max_request_iov = 3, .max_message_size = 4096 },
        { .kind = DATP_OBJ_EP, .state = 9 /* DAT_EP_STATE_CONNECTED */, .handle = PROBE_HANDLE_EP2,
          .pz_handle = PROBE_HANDLE_PZ, .max_recv_dtos = 16, .max_request_dtos = 32,
          .max_recv_iov = 2, .max_request_iov = 3, .max_message_size = 4096 },
        { .kind = DATP_OBJ_LMR, .handle = PROBE_HANDLE_LMR, .pz_handle = PROBE_HANDLE_PZ,
          .length = PROBE_LMR_LENGTH },
};

/* How many more EPs the next probe registers (the long-list tests): with
 * handles MANY_EP_HANDLE(i), no PZ, pipelined 32 at a time (datd.conf's
 * max_pending_replies is 64). */
#define MANY_EP_HANDLE(i) (0x7f2000000000ull + (uint64_t)(i) * 0x100)
#define PROBE_PIPELINE 32

static int probe_register_many(int sock, uint16_t version, uint32_t ia_id, unsigned n)
{
        union datp_message reply;
        unsigned done = 0;

        while (done < n) {
                unsigned batch = n - done < PROBE_PIPELINE ? n - done : PROBE_PIPELINE;

                for (unsigned i = 0; i < batch; i++) {
                        struct datp_obj_create create = { .ia_id = ia_id, .desc = probe_descs[1] };
                        int r;

                        create.desc.handle = MANY_EP_HANDLE(done + i);
                        create.desc.pz_handle = 0;
                        create.desc.state = 0;
                        datp_header_init(&create.hdr, DATP_OBJ_CREATE, version, sizeof(create),
                                         100 + done + i);
                        r = datp_send(sock, &create.hdr, NULL, 0);
                        if (r < 0)
                                return r;
                }
                for (unsigned i = 0; i < batch; i++) {
                        unsigned nfds;
                        ssize_t len = datp_recv(sock, &reply, NULL, 0, &nfds);

                        if (len < 0)
                                return (int)len;
                        if (reply.hdr.type != (DATP_OBJ_CREATE | DATP_REPLY) ||
                            ((const struct datp_status *)(reply.bytes + sizeof(struct datp_header)))
                                    ->dat_status)
                                return -EPROTO;
                }
                done += batch;
        }
        return 0;
}

static int probe_register(int sock, uint16_t version, uint32_t ia_id)
{
        union datp_message reply;
        int r = 0;

        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(probe_descs); i++) {
                struct datp_obj_create create = { .ia_id = ia_id, .desc = probe_descs[i] };

                datp_header_init(&create.hdr, DATP_OBJ_CREATE, version, sizeof(create), 10 + i);
                r = probe_exchange(sock, &create.hdr, DATP_OBJ_CREATE | DATP_REPLY, &reply);
        }
        return r;
}

static int probe_session(const char *socket_path, const char *ia_name)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct datp_hello hello = { .min_version = DATP_VERSION_MIN,
                                    .max_version = DATP_VERSION_MAX };
        struct datp_ia_open open_ia = {};
        union datp_message reply;
        int sock, r;

        sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (sock < 0)
                return -errno;
        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
        if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        datp_header_init(&hello.hdr, DATP_HELLO, DATP_VERSION_MAX, sizeof(hello), 1);
        r = probe_exchange(sock, &hello.hdr, DATP_HELLO | DATP_REPLY, &reply);
        if (r < 0)
                return r;
        datp_header_init(&open_ia.hdr, DATP_IA_OPEN, reply.hello_reply.version,
                         sizeof(open_ia), 2);
        if (datp_set_string(open_ia.ia_name, sizeof(open_ia.ia_name), ia_name) < 0)
                return -ENAMETOOLONG;
        r = probe_exchange(sock, &open_ia.hdr, DATP_IA_OPEN | DATP_REPLY, &reply);
        if (r == 0 && probe_objects)
                r = probe_register(sock, open_ia.hdr.version, reply.ia_open_reply.ia_id);
        if (r == 0 && probe_many_eps)
                r = probe_register_many(sock, open_ia.hdr.version, reply.ia_open_reply.ia_id,
                                        probe_many_eps);
        return r;
        /* The socket stays open: the client stays connected until it dies. */
}

/* Forks a client named command (its /proc/PID/comm) that connects to datd,
 * says HELLO, opens ia_name, and stays until teardown kills it. */
static void start_probe(const char *command, const char *ia_name)
{
        int ready[2], hold[2];
        char answer[128] = "";
        struct pollfd p;
        ssize_t n;

        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(hold, O_CLOEXEC), 0);
        probe_pid = fork();
        cr_assert_geq(probe_pid, 0);
        if (probe_pid == 0) {
                char c;
                int r;

                close(ready[0]);
                close(hold[1]);
                prctl(PR_SET_NAME, command);
                r = probe_session(datd.socket_path, ia_name);
                if (r < 0) {
                        dprintf(ready[1], "F%s", strerror(-r));
                        _exit(1);
                }
                (void)!write(ready[1], "R", 1);
                /* Until the test closes its end, or dies. */
                while (read(hold[0], &c, 1) < 0 && errno == EINTR)
                        ;
                _exit(0);
        }
        close(ready[1]);
        close(hold[0]);
        probe_hold_fd = hold[1];
        p = (struct pollfd) { .fd = ready[0], .events = POLLIN };
        /* Registering a hundred thousand EPs takes a few seconds under sanitizers. */
        cr_assert_eq(poll(&p, 1, PROBE_READY_TIMEOUT_MS + (int)(probe_many_eps / 10)), 1,
                     "the client did not get ready");
        n = read(ready[0], answer, sizeof(answer) - 1);
        close(ready[0]);
        cr_assert_gt(n, 0);
        answer[n] = '\0';
        cr_assert_eq(answer[0], 'R', "the client failed to open %s: %s", ia_name, answer + 1);
}

/* ---- helpers --------------------------------------------------------------- */

/* The one line of output that contains needle (malloc'd); asserts there is
 * exactly one. */
static char *line_with(const char *output, const char *needle)
{
        const char *hit = strstr(output, needle), *start, *end;

        cr_assert_not_null(hit, "no line with '%s' in:\n%s", needle, output);
        cr_assert_null(strstr(hit + 1, needle), "more than one '%s' in:\n%s", needle, output);
        if (*hit == '\n')      /* a needle may anchor itself at a line start */
                hit++;
        for (start = hit; start > output && start[-1] != '\n'; start--)
                ;
        end = strchrnul(hit, '\n');
        return strndup(start, (size_t)(end - start));
}

static json_t *find_by(json_t *array, const char *key, const char *value)
{
        size_t i;
        json_t *item;

        json_array_foreach(array, i, item)
                if (strcmp(json_string_value(json_object_get(item, key)) ?: "", value) == 0)
                        return item;
        cr_assert_fail("no object with %s=%s", key, value);
        return NULL;
}

static void assert_json_string(json_t *object, const char *key, const char *expected)
{
        json_t *v = json_object_get(object, key);

        cr_assert(json_is_string(v), "%s is not a string", key);
        cr_assert_str_eq(json_string_value(v), expected, "%s", key);
}

static void assert_json_integer(json_t *object, const char *key, json_int_t expected)
{
        json_t *v = json_object_get(object, key);

        cr_assert(json_is_integer(v), "%s is not an integer", key);
        cr_assert_eq(json_integer_value(v), expected, "%s: %lld, expected %lld", key,
                     (long long)json_integer_value(v), (long long)expected);
}

/* "2026-11-22T06:12:01Z" that says the same second as usec. */
static void assert_iso8601_matches(json_t *object, const char *key)
{
        char usec_key[64], expected[32];
        json_t *usec;
        time_t sec;
        struct tm tm;

        snprintf(usec_key, sizeof(usec_key), "%s_usec", key);
        usec = json_object_get(object, usec_key);
        cr_assert(json_is_integer(usec), "%s is not an integer", usec_key);
        sec = (time_t)(json_integer_value(usec) / 1000000);
        gmtime_r(&sec, &tm);
        strftime(expected, sizeof(expected), "%Y-%m-%dT%H:%M:%SZ", &tm);
        assert_json_string(object, key, expected);
}

static char *address_arg(void)
{
        char *arg;

        cr_assert_geq(asprintf(&arg, "--address=%s", datd.bus_address), 0);
        return arg;
}

/* ---- status ------------------------------------------------------------------ */

Test(datctl, status_shows_directories_clients_ias_and_counters)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = datctl_run_ok(address, "status", NULL);
        _cleanup_free_ char *dir = NULL, *sock = NULL;

        cr_assert_geq(asprintf(&dir, " Runtime dir: %s\n", datd.runtime_dir), 0);
        cr_assert_geq(asprintf(&sock, "      Socket: %s\n", datd.socket_path), 0);
        cr_assert_not_null(strstr(out, "     Version: "), "%s", out);
        cr_assert_not_null(strstr(out, "     Started: "), "%s", out);
        cr_assert_not_null(strstr(out, " UTC (up "), "%s", out);
        cr_assert_not_null(strstr(out, dir), "%s", out);
        cr_assert_not_null(strstr(out, sock), "%s", out);
        cr_assert_not_null(strstr(out, "     Clients: 0\n"), "%s", out);
        cr_assert_not_null(strstr(out, "     Objects: 0\n"), "%s", out);
        cr_assert_not_null(strstr(out, "         IAs: 2 (2 up)\n"), "%s", out);
        cr_assert_not_null(strstr(out, "    Counters: "), "%s", out);
        cr_assert_not_null(strstr(out, " clients_accepted "), "%s", out);
}

Test(datctl, status_json_has_every_field)
{
        _cleanup_free_ char *address = address_arg();
        uint64_t before = now_usec();
        _cleanup_(json_decrefp) json_t *status = datctl_run_json(address, "status", NULL);
        json_t *start, *counters;

        cr_assert(json_is_object(status));
        cr_assert(json_is_string(json_object_get(status, "version")));
        cr_assert_gt(strlen(json_string_value(json_object_get(status, "version"))), 0);
        assert_json_string(status, "runtime_directory", datd.runtime_dir);
        assert_json_string(status, "socket_path", datd.socket_path);
        assert_json_integer(status, "n_clients", 0);
        assert_json_integer(status, "n_objects", 0);
        assert_json_integer(status, "n_kept_channels", 0);
        assert_json_integer(status, "n_spare_channels", 0);
        assert_json_integer(status, "n_ias", 2);
        assert_json_integer(status, "n_ias_up", 2);
        start = json_object_get(status, "start_timestamp_usec");
        cr_assert(json_is_integer(start));
        cr_assert_gt(json_integer_value(start), 0);
        cr_assert_leq((uint64_t)json_integer_value(start), before, "datd started in the future");
        assert_iso8601_matches(status, "start_timestamp");
        cr_assert(json_is_integer(json_object_get(status, "uptime_usec")));
        cr_assert_geq(json_integer_value(json_object_get(status, "uptime_usec")), 0);
        counters = json_object_get(status, "counters");
        cr_assert(json_is_object(counters));
        cr_assert(json_is_integer(json_object_get(counters, "clients_accepted")));
        cr_assert(json_is_integer(json_object_get(counters, "ia_opens")));
}

Test(datctl, status_counts_a_connected_client)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_(json_decrefp) json_t *status = NULL;

        start_probe(PROBE_COMMAND, "shm");
        status = datctl_run_json(address, "status", NULL);
        assert_json_integer(status, "n_clients", 1);
        cr_assert_geq(json_integer_value(json_object_get(json_object_get(status, "counters"),
                                                         "ia_opens")), 1);
}

/* ---- ia list ------------------------------------------------------------------- */

Test(datctl, ia_list_shows_shm_and_tcp_with_transport_and_address)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = datctl_run_ok(address, "ia", "list", NULL);
        _cleanup_free_ char *header = NULL, *shm = NULL, *tcp = NULL;

        header = line_with(out, "NAME");
        cr_assert_not_null(strstr(header, "TRANSPORT"), "%s", header);
        cr_assert_not_null(strstr(header, "ADDRESS"), "%s", header);
        /* The harness's datd.conf names them "shm" and "tcp", both on 127.0.0.1. */
        shm = line_with(out, "\nshm ");
        cr_assert_not_null(strstr(shm, " shm "), "no transport in: %s", shm);
        cr_assert_not_null(strstr(shm, " 127.0.0.1 "), "no address in: %s", shm);
        tcp = line_with(out, "\ntcp ");
        cr_assert_not_null(strstr(tcp, " tcp "), "no transport in: %s", tcp);
        cr_assert_not_null(strstr(tcp, " 127.0.0.1 "), "no address in: %s", tcp);
        cr_assert_not_null(strstr(out, "\n\n2 IAs listed.\n"), "%s", out);
}

Test(datctl, ia_list_json_has_every_field)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_(json_decrefp) json_t *ias = datctl_run_json(address, "ia", "list", NULL);
        json_t *shm, *tcp;

        cr_assert(json_is_array(ias));
        cr_assert_eq(json_array_size(ias), 2);
        shm = find_by(ias, "name", "shm");
        tcp = find_by(ias, "name", "tcp");
        assert_json_string(shm, "transport", "shm");
        assert_json_string(tcp, "transport", "tcp");
        assert_json_string(tcp, "address", "127.0.0.1");
        assert_json_string(tcp, "state", "up");
        cr_assert(json_is_string(json_object_get(tcp, "adapter")));
        assert_json_integer(tcp, "open", 0);
        cr_assert_eq(json_object_size(tcp), 6, "unexpected keys in the IA object");
}

Test(datctl, ia_list_counts_open_instances)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_(json_decrefp) json_t *ias = NULL;

        start_probe(PROBE_COMMAND, "shm");
        ias = datctl_run_json(address, "ia", "list", NULL);
        assert_json_integer(find_by(ias, "name", "shm"), "open", 1);
        assert_json_integer(find_by(ias, "name", "tcp"), "open", 0);
}

/* ---- client list ----------------------------------------------------------------- */

Test(datctl, client_list_without_clients_says_none)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = datctl_run_ok(address, "client", "list", NULL);
        _cleanup_(json_decrefp) json_t *clients = datctl_run_json(address, "client", "list", NULL);

        cr_assert_not_null(strstr(out, "0 clients listed.\n"), "%s", out);
        cr_assert(json_is_array(clients));
        cr_assert_eq(json_array_size(clients), 0);
}

Test(datctl, client_list_shows_pid_user_command_and_ia)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL, *line = NULL, *pid = NULL, *uid = NULL;
        struct passwd *pw = getpwuid(getuid());

        start_probe(PROBE_COMMAND, "shm");
        out = datctl_run_ok(address, "client", "list", NULL);
        line = line_with(out, PROBE_COMMAND);
        cr_assert_geq(asprintf(&pid, " %d ", (int)probe_pid), 0);
        cr_assert_geq(asprintf(&uid, " %u ", (unsigned)getuid()), 0);
        cr_assert_not_null(strstr(line, pid), "no pid %d in: %s", (int)probe_pid, line);
        cr_assert_not_null(strstr(line, uid), "no uid in: %s", line);
        if (pw)
                cr_assert_not_null(strstr(line, pw->pw_name), "no user in: %s", line);
        cr_assert_not_null(strstr(line, " shm "), "no IA in: %s", line);
        cr_assert_not_null(strstr(line, " UTC "), "no time in: %s", line);
        cr_assert_not_null(strstr(out, "\n\n1 client listed.\n"), "%s", out);
}

Test(datctl, client_list_json_has_every_field)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_(json_decrefp) json_t *clients = NULL;
        uint64_t before = now_usec(), since;
        json_t *c, *ias;

        start_probe(PROBE_COMMAND, "shm");
        clients = datctl_run_json(address, "client", "list", NULL);
        cr_assert(json_is_array(clients));
        cr_assert_eq(json_array_size(clients), 1);
        c = json_array_get(clients, 0);
        cr_assert(json_is_integer(json_object_get(c, "id")));
        assert_json_integer(c, "pid", probe_pid);
        assert_json_integer(c, "uid", getuid());
        assert_json_integer(c, "gid", getgid());
        assert_json_string(c, "command", PROBE_COMMAND);
        ias = json_object_get(c, "ias");
        cr_assert(json_is_array(ias));
        cr_assert_eq(json_array_size(ias), 1);
        cr_assert_str_eq(json_string_value(json_array_get(ias, 0)) ?: "", "shm");
        since = (uint64_t)json_integer_value(json_object_get(c, "connected_since_usec"));
        /* The realtime clock's granularity can put datd's stamp a little
         * before ours; a second either side is plenty for "now". */
        cr_assert_geq(since + 1000000, before, "connected before the test began");
        cr_assert_leq(since, now_usec(), "connected in the future");
        assert_iso8601_matches(c, "connected_since");
        assert_json_integer(c, "objects", 0);
        assert_json_integer(c, "eps", 0);
        assert_json_integer(c, "lmr_bytes", 0);
        cr_assert_eq(json_object_size(c), 11, "unexpected keys in the client object");
}

Test(datctl, client_list_escapes_control_characters_a_client_put_in_its_name)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL;

        /* A client chooses its own comm; it must not reach the terminal raw. */
        start_probe("evil\033[2J", "shm");
        out = datctl_run_ok(address, "client", "list", NULL);
        cr_assert_not_null(strstr(out, "evil\\x1b[2J"), "%s", out);
        cr_assert_null(strchr(out, '\033'), "a raw ESC reached the output");
}

Test(datctl, client_list_shows_a_name_that_is_not_utf8)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL;

        /* datd puts U+FFFD for each invalid byte: ListClients() stays valid
         * D-Bus for everyone, and the name still shows. */
        start_probe("bad\xff\xfe", "shm");
        out = datctl_run_ok(address, "client", "list", NULL);
        cr_assert_not_null(strstr(out, " bad\xef\xbf\xbd\xef\xbf\xbd "), "%s", out);
}

Test(datctl, status_counts_the_objects_clients_registered)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_(json_decrefp) json_t *status = NULL;

        probe_objects = true;
        start_probe(PROBE_COMMAND, "shm");
        status = datctl_run_json(address, "status", NULL);
        assert_json_integer(status, "n_objects", ARRAY_SIZE(probe_descs));
        cr_assert_eq(json_integer_value(json_object_get(json_object_get(status, "counters"),
                                                        "objects_registered")),
                     (json_int_t)ARRAY_SIZE(probe_descs));
}

Test(datctl, client_list_shows_eps_and_lmr_bytes)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL, *header = NULL, *line = NULL;

        probe_objects = true;
        start_probe(PROBE_COMMAND, "shm");
        out = datctl_run_ok(address, "client", "list", NULL);
        header = line_with(out, "COMMAND");
        cr_assert_not_null(strstr(header, " EPS LMR BYTES "), "%s", header);
        line = line_with(out, PROBE_COMMAND);
        cr_assert_not_null(strstr(line, " shm   2      1.0M "), "%s", line);
}

/* ---- ep list and object list --------------------------------------------------- */

Test(datctl, ep_list_without_endpoints_says_none)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL;
        _cleanup_(json_decrefp) json_t *eps = NULL;

        start_probe(PROBE_COMMAND, "shm");
        out = datctl_run_ok(address, "ep", "list", NULL);
        cr_assert_not_null(strstr(out, "\n\n0 endpoints listed.\n"), "%s", out);
        eps = datctl_run_json(address, "ep", "list", NULL);
        cr_assert(json_is_array(eps));
        cr_assert_eq(json_array_size(eps), 0);
}

Test(datctl, ep_list_shows_owner_ia_handle_state_pz_and_limits)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL, *header = NULL, *line = NULL, *owner = NULL;

        probe_objects = true;
        start_probe(PROBE_COMMAND, "shm");
        out = datctl_run_ok(address, "ep", "list", NULL);
        header = line_with(out, "OWNER");
        cr_assert_not_null(strstr(header, "OWNER "), "%s", header);
        cr_assert_not_null(strstr(header, " IA "), "%s", header);
        cr_assert_not_null(strstr(header, " HANDLE "), "%s", header);
        cr_assert_not_null(strstr(header, " STATE "), "%s", header);
        cr_assert_not_null(strstr(header, " PZ "), "%s", header);
        line = line_with(out, "0x7f00aa002000");
        cr_assert_geq(asprintf(&owner, "%d/" PROBE_COMMAND " shm ", (int)probe_pid), 0);
        cr_assert_eq(strncmp(line, owner, strlen(owner)), 0, "no owner in: %s", line);
        cr_assert_not_null(strstr(line, " CONNECTED "), "%s", line);
        cr_assert_not_null(strstr(line, " 0x7f00aa004000 "), "no PZ in: %s", line);
        cr_assert_not_null(strstr(line, "   16      32        2       3    4.0K "), "%s", line);
        free(line);
        line = line_with(out, "0x7f00aa001000");
        cr_assert_not_null(strstr(line, " UNCONNECTED "), "%s", line);
        cr_assert_null(strstr(out, "0x7f00aa003000"), "an LMR among the endpoints:\n%s", out);
        cr_assert_not_null(strstr(out, "\n\n2 endpoints listed.\n"), "%s", out);
}

Test(datctl, ep_list_json_has_every_field)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_(json_decrefp) json_t *eps = NULL;
        json_t *ep;

        probe_objects = true;
        start_probe(PROBE_COMMAND, "shm");
        eps = datctl_run_json(address, "ep", "list", NULL);
        cr_assert(json_is_array(eps));
        cr_assert_eq(json_array_size(eps), 2);
        ep = find_by(eps, "handle", "0x7f00aa002000");
        cr_assert(json_is_integer(json_object_get(ep, "client_id")));
        assert_json_integer(ep, "pid", probe_pid);
        assert_json_string(ep, "command", PROBE_COMMAND);
        assert_json_string(ep, "ia", "shm");
        assert_json_string(ep, "pz_handle", "0x7f00aa004000");
        assert_json_string(ep, "state", "CONNECTED");
        assert_json_integer(ep, "max_recv_dtos", 16);
        assert_json_integer(ep, "max_request_dtos", 32);
        assert_json_integer(ep, "max_recv_iov", 2);
        assert_json_integer(ep, "max_request_iov", 3);
        assert_json_integer(ep, "max_message_size", 4096);
        cr_assert(json_is_integer(json_object_get(ep, "id")));
        cr_assert_gt(json_integer_value(json_object_get(ep, "id")), 0);
        cr_assert_eq(json_object_size(ep), 13, "unexpected keys in the endpoint object");
}

Test(datctl, object_list_shows_every_object_with_its_kind)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL, *header = NULL, *lmr = NULL, *pz = NULL;

        probe_objects = true;
        start_probe(PROBE_COMMAND, "shm");
        out = datctl_run_ok(address, "object", "list", NULL);
        header = line_with(out, "OWNER");
        cr_assert_not_null(strstr(header, " KIND "), "%s", out);
        lmr = line_with(out, " shm LMR ");
        cr_assert_not_null(strstr(lmr, " 0x7f00aa003000 0x7f00aa004000 "), "%s", lmr);
        cr_assert_not_null(strstr(lmr, " 1.0M "), "%s", lmr);
        pz = line_with(out, " shm PZ ");
        cr_assert_not_null(strstr(pz, " 0x7f00aa004000 -"), "%s", pz);
        cr_assert_not_null(strstr(out, "\n\n4 objects listed.\n"), "%s", out);
}

Test(datctl, object_list_json_has_every_field)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_(json_decrefp) json_t *objects = NULL;
        json_t *lmr, *pz;

        probe_objects = true;
        start_probe(PROBE_COMMAND, "shm");
        objects = datctl_run_json(address, "object", "list", NULL);
        cr_assert(json_is_array(objects));
        cr_assert_eq(json_array_size(objects), 4);
        lmr = find_by(objects, "kind", "LMR");
        cr_assert(json_is_integer(json_object_get(lmr, "client_id")));
        assert_json_integer(lmr, "pid", probe_pid);
        assert_json_string(lmr, "command", PROBE_COMMAND);
        assert_json_string(lmr, "ia", "shm");
        assert_json_string(lmr, "handle", "0x7f00aa003000");
        assert_json_string(lmr, "pz_handle", "0x7f00aa004000");
        assert_json_string(lmr, "state", "");
        assert_json_integer(lmr, "length", PROBE_LMR_LENGTH);
        assert_json_integer(lmr, "qlen", 0);
        cr_assert(json_is_integer(json_object_get(lmr, "id")));
        cr_assert_eq(json_object_size(lmr), 11, "unexpected keys in the object");
        pz = find_by(objects, "kind", "PZ");
        cr_assert(json_is_null(json_object_get(pz, "pz_handle")), "a PZ has no PZ");
}

/* ---- long lists (issue 7) and the one JSON format ------------------------------ */

#define MANY_EPS 100000
/* The test datd, with room for them (max_eps is per client). */
static const char *const many_eps_config =
        "{\n"
        "  \"log_level\": \"notice\",\n"
        "  \"ias\": [\n"
        "    {\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"},\n"
        "    {\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"127.0.0.1\"}\n"
        "  ],\n"
        "  \"verbs\": false,\n"
        "  \"limits\": {\"max_eps\": 131072}\n"
        "}\n";

static size_t count_lines(const char *s)
{
        size_t n = 0;

        for (; *s; s++)
                n += *s == '\n';
        return n;
}

/* datctl(8), --json: every endpoint datd lists is in the array, however
 * many (issue 7: a hundred thousand, which datctl streams row by row),
 * and the text is what jansson prints for it; the table has one line each. */
Test(datctl, ep_list_of_a_hundred_thousand_endpoints_is_complete_in_json_and_text)
{
        _cleanup_free_ char *address = NULL, *out = NULL, *first = NULL, *last = NULL;
        _cleanup_(json_decrefp) json_t *eps = NULL;
        size_t i, mine = 0;
        json_t *ep;

        datd_stop(&datd);
        cr_assert_eq(datd_start(&datd, many_eps_config), 0, "datd did not start");
        address = address_arg();
        probe_many_eps = MANY_EPS;
        start_probe(PROBE_COMMAND, "shm");

        eps = datctl_run_json_exact(address, "ep", "list", NULL);
        cr_assert(json_is_array(eps));
        cr_assert_eq(json_array_size(eps), MANY_EPS, "%zu endpoints listed", json_array_size(eps));
        json_array_foreach(eps, i, ep)
                mine += strcmp(json_string_value(json_object_get(ep, "command")) ?: "",
                               PROBE_COMMAND) == 0;
        cr_assert_eq(mine, MANY_EPS);
        cr_assert_geq(asprintf(&first, "0x%llx", MANY_EP_HANDLE(0)), 0);
        cr_assert_geq(asprintf(&last, "0x%llx", MANY_EP_HANDLE(MANY_EPS - 1)), 0);
        find_by(eps, "handle", first);
        find_by(eps, "handle", last);

        out = datctl_run_ok(address, "ep", "list", NULL);
        /* The header, a line per endpoint, an empty line and the count. */
        cr_assert_eq(count_lines(out), MANY_EPS + 3, "%zu lines", count_lines(out));
        cr_assert_not_null(strstr(out, "\n\n100000 endpoints listed.\n"));
        cr_assert_not_null(strstr(out, last), "the last endpoint is missing from the table");
}

/* datctl(8), --json: strings a client chose (its command) come out as
 * JSON strings, quotes, backslashes and control characters escaped
 * exactly as in datctl's other JSON (jansson's text). */
Test(datctl, json_lists_escape_a_command_like_jansson)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_(json_decrefp) json_t *clients = NULL, *eps = NULL, *objects = NULL;
        static const char command[] = "q\"b\\t\tn\x01\x7f\xc3\xa9";

        probe_objects = true;
        start_probe(command, "shm");
        clients = datctl_run_json_exact(address, "client", "list", NULL);
        assert_json_string(json_array_get(clients, 0), "command", command);
        eps = datctl_run_json_exact(address, "ep", "list", NULL);
        cr_assert_eq(json_array_size(eps), 2);
        assert_json_string(json_array_get(eps, 0), "command", command);
        objects = datctl_run_json_exact(address, "object", "list", NULL);
        cr_assert_eq(json_array_size(objects), ARRAY_SIZE(probe_descs));
}

/* datctl(8): an empty list is "[]" in JSON, as jansson prints it. */
Test(datctl, json_empty_lists_are_exact)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_(json_decrefp) json_t *listeners = NULL, *connections = NULL;

        listeners = datctl_run_json_exact(address, "listener", "list", NULL);
        cr_assert_eq(json_array_size(listeners), 0);
        connections = datctl_run_json_exact(address, "connection", "list", NULL);
        cr_assert_eq(json_array_size(connections), 0);
}

/* ---- connection list with a real connection -------------------------------------- */

#define CONN_QUAL 4242
#define CONN_WAIT_US (10 * 1000 * 1000)

/* In a child: one IA of the test datd, a PSP, and an EP connected to it
 * from the same IA (both ends in this process); says 'R' on ready_fd, or
 * 'F' and why, then waits to be killed. */
static int hold_a_connection(const char *ia_name, int ready_fd)
{
        DAT_IA_HANDLE ia;
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL, evd;
        DAT_PZ_HANDLE pz;
        DAT_PSP_HANDLE psp;
        DAT_EP_HANDLE active, passive;
        DAT_IA_ATTR attr;
        DAT_EVENT ev;
        DAT_COUNT n;
        unsigned established = 0;

        if (dat_ia_open((DAT_NAME_PTR)ia_name, 16, &async, &ia) || dat_pz_create(ia, &pz) ||
            dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG, &evd) ||
            dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL) ||
            dat_psp_create(ia, CONN_QUAL, evd, DAT_PSP_CONSUMER_FLAG, &psp) ||
            dat_ep_create(ia, pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, evd, NULL, &active) ||
            dat_ep_create(ia, pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, evd, NULL, &passive) ||
            dat_ep_connect(active, attr.ia_address_ptr, CONN_QUAL, CONN_WAIT_US, 0, NULL,
                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG))
                return dprintf(ready_fd, "Fsetting up"), 1;
        while (established < 2) {
                if (dat_evd_wait(evd, CONN_WAIT_US, 1, &ev, &n))
                        return dprintf(ready_fd, "Fno event"), 1;
                if (ev.event_number == DAT_CONNECTION_REQUEST_EVENT) {
                        if (dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, passive, 0,
                                          NULL))
                                return dprintf(ready_fd, "Faccept"), 1;
                } else if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED) {
                        established++;
                } else {
                        return dprintf(ready_fd, "Fevent 0x%x", ev.event_number), 1;
                }
        }
        (void)!write(ready_fd, "R", 1);
        pause();
        return 0;
}

static void start_connection_holder(const char *ia_name)
{
        char answer[128] = "";
        struct pollfd p;
        int ready[2];
        ssize_t n;

        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        datd_export_env(&datd);
        probe_pid = fork();
        cr_assert_geq(probe_pid, 0);
        if (probe_pid == 0) {
                close(ready[0]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                _exit(hold_a_connection(ia_name, ready[1]));
        }
        close(ready[1]);
        p = (struct pollfd) { .fd = ready[0], .events = POLLIN };
        cr_assert_eq(poll(&p, 1, PROBE_READY_TIMEOUT_MS * 2), 1, "the connection was not made");
        n = read(ready[0], answer, sizeof(answer) - 1);
        close(ready[0]);
        cr_assert_gt(n, 0);
        answer[n] = '\0';
        cr_assert_eq(answer[0], 'R', "the connection failed: %s (datd log: %s)", answer + 1,
                     datd.log_path);
}

/* datctl(8), connection list: both ends of a same-host connection, with the
 * size of the shm data channel's region datd holds (DBUS-API.md,
 * ListConnections(): shm_bytes), in the table and in JSON. */
Test(datctl, connection_list_shows_both_ends_and_the_shm_region)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL, *header = NULL;
        _cleanup_(json_decrefp) json_t *conns = NULL;
        size_t i;
        json_t *c;

        start_connection_holder("datd-shm");
        out = datctl_run_ok(address, "connection", "list", NULL);
        header = line_with(out, "OWNER");
        cr_assert_not_null(strstr(header, " RECEIVED    SHM ID"), "%s", out);
        cr_assert_not_null(strstr(out, "\n\n2 connections listed.\n"), "%s", out);
        conns = datctl_run_json_exact(address, "connection", "list", NULL);
        cr_assert_eq(json_array_size(conns), 2);
        json_array_foreach(conns, i, c) {
                json_t *shm = json_object_get(c, "shm_bytes");

                assert_json_string(c, "state", "ESTABLISHED");
                assert_json_integer(c, "pid", probe_pid);
                cr_assert(json_is_integer(shm), "no shm_bytes");
                cr_assert_gt(json_integer_value(shm), 0, "an shm connection without a region");
        }
}

/* The same over the tcp IA: no shm region, a dash in the table and 0 in JSON. */
Test(datctl, connection_list_shows_no_shm_region_for_tcp)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL, *line = NULL;
        _cleanup_(json_decrefp) json_t *conns = NULL;

        start_connection_holder("datd-tcp");
        out = datctl_run_ok(address, "connection", "list", NULL);
        line = line_with(out, " active ");
        cr_assert_not_null(strstr(line, "0B   - "), "%s", out);
        conns = datctl_run_json_exact(address, "connection", "list", NULL);
        cr_assert_eq(json_array_size(conns), 2);
        assert_json_integer(json_array_get(conns, 0), "shm_bytes", 0);
}

/* ---- options ------------------------------------------------------------------- */

Test(datctl, no_legend_prints_rows_only)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = datctl_run_ok(address, "--no-legend", "ia", "list", NULL);
        size_t lines = 0;

        for (const char *p = out; *p; p++)
                lines += *p == '\n';
        cr_assert_eq(lines, 2, "%s", out);
        cr_assert_null(strstr(out, "NAME"), "%s", out);
        cr_assert_null(strstr(out, "listed"), "%s", out);
}

Test(datctl, runtime_dir_option_finds_bus_sock)
{
        _cleanup_free_ char *arg = NULL, *out = NULL;

        cr_assert_geq(asprintf(&arg, "--runtime-dir=%s", datd.runtime_dir), 0);
        out = datctl_run_ok(arg, "ia", "list", NULL);
        cr_assert_not_null(strstr(out, "2 IAs listed."), "%s", out);
}

Test(datctl, datd_bus_address_environment_is_used_without_options)
{
        _cleanup_free_ char *out = NULL;

        setenv("DATD_BUS_ADDRESS", datd.bus_address, 1);
        out = datctl_run_ok("ia", "list", NULL);
        cr_assert_not_null(strstr(out, "2 IAs listed."), "%s", out);
}

Test(datctl, address_option_wins_over_the_environment)
{
        _cleanup_free_ char *address = address_arg();
        _cleanup_free_ char *out = NULL;

        setenv("DATD_BUS_ADDRESS", "unix:path=/nonexistent/datctl-test/bus.sock", 1);
        out = datctl_run_ok(address, "ia", "list", NULL);
        cr_assert_not_null(strstr(out, "2 IAs listed."), "%s", out);
}

Test(datctl, stopped_datd_is_reported_with_exit_1)
{
        _cleanup_free_ char *address = address_arg(), *out = NULL, *expected = NULL;

        datd_stop(&datd);
        out = datctl_run_expect(1, address, "status", NULL);
        cr_assert_geq(asprintf(&expected, "datctl: cannot reach datd at %s: ", datd.bus_address), 0);
        cr_assert_eq(strncmp(out, expected, strlen(expected)), 0, "%s", out);
}

/* datctl(8), --timeout: a datd that takes the connection and never answers
 * (stopped, hung) is given up on when the time is over, not after sd-bus's
 * own timeouts (90 s to authenticate) one after another. */
Test(datctl, a_datd_that_never_answers_is_given_up_on_at_the_timeout)
{
        _cleanup_free_ char *address = address_arg(), *out = NULL, *expected = NULL;

        cr_assert_eq(kill(datd.pid, SIGSTOP), 0);
        out = datctl_run_expect(1, "--timeout=1", address, "status", NULL);
        kill(datd.pid, SIGCONT);
        cr_assert_geq(asprintf(&expected, "datctl: cannot reach datd at %s: Connection timed out\n",
                               datd.bus_address), 0);
        cr_expect_str_eq(out, expected);
}

Test(datctl_cli, a_timeout_that_is_no_number_of_seconds_is_a_usage_error)
{
        _cleanup_free_ char *out = datctl_run_expect(2, "--timeout=0", "status", NULL);

        cr_expect_not_null(strstr(out, "--timeout=0 is not a number of seconds"), "%s", out);
}

/* ---- without datd ---------------------------------------------------------------- */

/* A runtime directory whose bus.sock nobody listens on. */
static char *make_stale_runtime_dir(void)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char *dir = strdup("/tmp/datctl-test-XXXXXX");
        int fd;

        cr_assert_not_null(dir);
        cr_assert_not_null(mkdtemp(dir));
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/bus.sock", dir);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(fd, 0);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(fd);
        return dir;
}

static void remove_stale_runtime_dir(const char *dir)
{
        _cleanup_free_ char *sock = NULL;

        cr_assert_geq(asprintf(&sock, "%s/bus.sock", dir), 0);
        unlink(sock);
        rmdir(dir);
}

Test(datctl_cli, unreachable_datd_is_reported_with_the_address_and_exit_1)
{
        _cleanup_free_ char *dir = make_stale_runtime_dir();
        _cleanup_free_ char *arg = NULL, *out = NULL, *expected = NULL;

        cr_assert_geq(asprintf(&arg, "--runtime-dir=%s", dir), 0);
        out = datctl_run_expect(1, arg, "ia", "list", NULL);
        remove_stale_runtime_dir(dir);
        cr_assert_geq(asprintf(&expected,
                               "datctl: cannot reach datd at unix:path=%s/bus.sock: Connection refused\n",
                               dir), 0);
        cr_assert_str_eq(out, expected);
}

Test(datctl_cli, missing_socket_is_reported_with_exit_1)
{
        _cleanup_free_ char *out = NULL;

        out = datctl_run_expect(1, "--address=unix:path=/nonexistent/datctl-test/bus.sock", "status", NULL);
        cr_assert_str_eq(out, "datctl: cannot reach datd at unix:path=/nonexistent/datctl-test/"
                              "bus.sock: No such file or directory\n");
}

Test(datctl_cli, unknown_command_is_a_usage_error)
{
        _cleanup_free_ char *out = NULL;

        out = datctl_run_expect(2, "frobnicate", NULL);
        cr_assert_not_null(strstr(out, "datctl: unknown command 'frobnicate'\n"), "%s", out);
}

Test(datctl_cli, unknown_subcommand_is_a_usage_error)
{
        _cleanup_free_ char *out = NULL;

        out = datctl_run_expect(2, "ia", "frobnicate", NULL);
        cr_assert_not_null(strstr(out, "unknown command 'ia frobnicate'"), "%s", out);
}

Test(datctl_cli, missing_command_is_a_usage_error)
{
        free(datctl_run_expect(2, NULL));
}

Test(datctl_cli, unknown_option_is_a_usage_error)
{
        free(datctl_run_expect(2, "--frobnicate", "status", NULL));
}

Test(datctl_cli, conflicting_targets_are_a_usage_error)
{
        _cleanup_free_ char *out = NULL;

        out = datctl_run_expect(2, "--system", "--runtime-dir=/tmp", "status", NULL);
        cr_assert_not_null(strstr(out, "exclude each other"), "%s", out);
}

Test(datctl_cli, help_lists_every_command_and_exits_0)
{
        _cleanup_free_ char *out = NULL;

        out = datctl_run_ok("--help", NULL);
        cr_assert_not_null(strstr(out, "  status "), "%s", out);
        cr_assert_not_null(strstr(out, "  ia list "), "%s", out);
        cr_assert_not_null(strstr(out, "  client list "), "%s", out);
        cr_assert_not_null(strstr(out, "  ep list "), "%s", out);
        cr_assert_not_null(strstr(out, "  object list "), "%s", out);
}

Test(datctl_cli, version_prints_the_package_version)
{
        _cleanup_free_ char *out = NULL;

        out = datctl_run_ok("--version", NULL);
        cr_assert_str_eq(out, "datctl " PACKAGE_VERSION "\n");
}
