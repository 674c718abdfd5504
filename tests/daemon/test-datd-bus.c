/* datd's D-Bus API (daemon/DBUS-API.md) on the private socket, read with
 * sd-bus as a bus client and with the real busctl. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "tests/daemon/bus-client.h"
#include "tests/daemon/child.h"
#include "tests/daemon/raw-client.h"
#include "tests/daemon/scratch.h"
#include "tests/harness.h"

static struct datd_instance d;
static pid_t child, spawned, dbus_daemon;
static sd_bus *bus;

static void teardown(void)
{
        bus = sd_bus_flush_close_unref(bus);
        child_kill(&child);
        child_kill(&spawned);
        child_kill(&dbus_daemon);
        datd_stop(&d);
        scratch_remove();
}

TestSuite(datd_bus, .timeout = 30, .fini = teardown);

/* Every test ends here: whatever it did, datd exits 0 on SIGTERM (no crash,
 * no sanitizer report); the teardown only cleans up after failures. */
static void stop(void)
{
        int status = datd_stop(&d);

        cr_expect_eq(status, 0, "datd's exit status after SIGTERM: %d", status);
}

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

static uint64_t realtime_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static char *get_string(const char *property)
{
        char *s = NULL;

        cr_assert_geq(sd_bus_get_property_string(bus, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                                 property, NULL, &s), 0, "%s", property);
        return s;
}

static uint32_t n_clients(void)
{
        uint32_t n = 0;

        cr_assert_geq(sd_bus_get_property_trivial(bus, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                                  "NClients", NULL, 'u', &n), 0);
        return n;
}

Test(datd_bus, properties_describe_this_datd)
{
        uint64_t before = realtime_usec(), started = 0;
        char *s;
        int fd;

        start(NULL);
        s = get_string("Version");
        cr_expect_str_eq(s, PACKAGE_VERSION);
        free(s);
        s = get_string("RuntimeDirectory");
        cr_expect_str_eq(s, d.runtime_dir);
        free(s);
        s = get_string("SocketPath");
        cr_expect_str_eq(s, d.socket_path);
        free(s);
        cr_assert_geq(sd_bus_get_property_trivial(bus, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                                  "StartTimestamp", NULL, 't', &started), 0);
        cr_expect(started >= before && started <= realtime_usec(), "StartTimestamp %llu",
                  (unsigned long long) started);
        /* The bus connection is no protocol client. */
        cr_expect_eq(n_clients(), 0);
        fd = connect_hello();
        cr_expect_eq(n_clients(), 1);
        close(fd);
        stop();
}

struct ia_row {
        const char *name, *transport, *adapter, *address, *state;
        uint32_t open;
};

/* ListIAs() as rows; the strings live as long as *reply. */
static size_t list_ias(sd_bus_message **reply, struct ia_row *rows, size_t max)
{
        size_t n = 0;
        int r;

        cr_assert_geq(sd_bus_call_method(bus, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE, "ListIAs",
                                         NULL, reply, NULL), 0);
        cr_assert_eq(sd_bus_message_has_signature(*reply, "a(sssssu)"), 1);
        cr_assert_geq(sd_bus_message_enter_container(*reply, 'a', "(sssssu)"), 0);
        while (n < max && (r = sd_bus_message_read(*reply, "(sssssu)", &rows[n].name,
                                                   &rows[n].transport, &rows[n].adapter,
                                                   &rows[n].address, &rows[n].state,
                                                   &rows[n].open)) > 0)
                n++;
        return n;
}

Test(datd_bus, list_ias_shows_each_ia_and_its_open_instances)
{
        struct datp_ia_open_reply open;
        sd_bus_message *reply = NULL;
        struct ia_row rows[8];
        size_t n;
        int fd;

        start(NULL);
        n = list_ias(&reply, rows, 8);
        cr_assert_eq(n, 2);
        cr_expect_str_eq(rows[0].name, "shm");
        cr_expect_str_eq(rows[0].transport, "shm");
        cr_expect_str_eq(rows[0].adapter, "shm");
        cr_expect_str_eq(rows[0].address, "127.0.0.1");
        cr_expect_str_eq(rows[0].state, "up");
        cr_expect_eq(rows[0].open, 0);
        cr_expect_str_eq(rows[1].name, "tcp");
        cr_expect_str_eq(rows[1].transport, "tcp");
        cr_expect_str_eq(rows[1].adapter, "lo");
        cr_expect_str_eq(rows[1].address, "127.0.0.1");
        cr_expect_str_eq(rows[1].state, "up");
        sd_bus_message_unref(reply);

        fd = connect_hello();
        for (int i = 0; i < 2; i++) {
                cr_assert_eq(raw_ia_open(fd, "tcp", &open), 0);
                cr_assert_eq(open.status.dat_status, DAT_SUCCESS);
        }
        n = list_ias(&reply, rows, 8);
        cr_assert_eq(n, 2);
        cr_expect_eq(rows[0].open, 0);
        cr_expect_eq(rows[1].open, 2);
        sd_bus_message_unref(reply);
        close(fd);
        stop();
}

Test(datd_bus, list_clients_shows_a_raw_client)
{
        uint64_t before = realtime_usec(), id, since, lmr_bytes;
        uint32_t pid, uid, gid, n_objects, n_eps;
        struct datp_ia_open_reply open;
        const char *comm, *ia;
        sd_bus_message *reply = NULL;
        char *self_comm = read_file_str("/proc/self/comm");
        char ias[64] = "";
        int fd;

        cr_assert_not_null(self_comm);
        self_comm[strcspn(self_comm, "\n")] = '\0';
        start(NULL);
        fd = connect_hello();
        cr_assert_eq(raw_ia_open(fd, "shm", &open), 0);
        cr_assert_eq(raw_ia_open(fd, "tcp", &open), 0);

        cr_assert_geq(sd_bus_call_method(bus, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                         "ListClients", NULL, &reply, NULL), 0);
        cr_assert_eq(sd_bus_message_has_signature(reply, "a(tuuusastuut)"), 1);
        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "(tuuusastuut)"), 0);
        cr_assert_eq(sd_bus_message_enter_container(reply, 'r', "tuuusastuut"), 1, "no client listed");
        cr_assert_geq(sd_bus_message_read(reply, "tuuus", &id, &pid, &uid, &gid, &comm), 0);
        cr_expect_gt(id, 0);
        cr_expect_eq(pid, (uint32_t) getpid());
        cr_expect_eq(uid, getuid());
        cr_expect_eq(gid, getgid());
        cr_expect_str_eq(comm, self_comm);
        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "s"), 0);
        while (sd_bus_message_read(reply, "s", &ia) > 0) {
                strcat(ias, ia);
                strcat(ias, " ");
        }
        cr_expect(strstr(ias, "shm ") && strstr(ias, "tcp "), "IAs: %s", ias);
        cr_assert_geq(sd_bus_message_exit_container(reply), 0);
        cr_assert_geq(sd_bus_message_read(reply, "tuut", &since, &n_objects, &n_eps, &lmr_bytes), 0);
        cr_expect(since >= before && since <= realtime_usec());
        cr_expect_eq(n_objects, 0);
        cr_expect_eq(n_eps, 0);
        cr_expect_eq(lmr_bytes, 0);
        cr_assert_geq(sd_bus_message_exit_container(reply), 0);
        /* Only the one client. */
        cr_expect_eq(sd_bus_message_enter_container(reply, 'r', "tuuusastuut"), 0);
        sd_bus_message_unref(reply);
        free(self_comm);
        close(fd);
        stop();
}

/* A process may name itself with any bytes; D-Bus carries only UTF-8. */
static int connect_as_bad_utf8(void *arg)
{
        struct datp_ia_open_reply reply;
        int fd, r;

        prctl(PR_SET_NAME, "bad\xff\xfe");
        fd = raw_connect_hello(arg);
        if (fd < 0)
                return fd;
        r = raw_ia_open(fd, "shm", &reply);
        /* fd stays open: the child holds it until it is killed. */
        return r;
}

Test(datd_bus, a_client_named_in_invalid_utf8_is_listed_with_replacement_characters)
{
        sd_bus_message *reply = NULL;
        int result_fd, result = -1;
        const char *comm = NULL;
        uint32_t pid = 0, uid, gid;
        uint64_t id;

        start(NULL);
        child = child_run_as(getuid(), getgid(), connect_as_bad_utf8, d.socket_path, 1, &result_fd);
        cr_assert_gt(child, 0);
        cr_assert_eq(child_result(result_fd, 10000, &result), 0);
        close(result_fd);
        cr_assert_eq(result, 0, "the client failed: %s", strerror(-result));

        /* Every byte that is not UTF-8 became U+FFFD: the reply could be built. */
        cr_assert_geq(sd_bus_call_method(bus, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                         "ListClients", NULL, &reply, NULL), 0);
        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "(tuuusastuut)"), 0);
        cr_assert_eq(sd_bus_message_enter_container(reply, 'r', "tuuusastuut"), 1, "no client listed");
        cr_assert_geq(sd_bus_message_read(reply, "tuuus", &id, &pid, &uid, &gid, &comm), 0);
        cr_expect_eq(pid, (uint32_t) child);
        cr_expect_str_eq(comm, "bad\xef\xbf\xbd\xef\xbf\xbd");
        sd_bus_message_unref(reply);
        stop();
}

static uint64_t counter(const char *name)
{
        uint64_t v = 0;

        cr_assert_eq(bus_counter(bus, name, &v), 0, "GetCounters %s", name);
        return v;
}

Test(datd_bus, get_counters_count_what_happened)
{
        static const char *const names[] = { "clients_accepted", "clients_rejected",
                "clients_dropped", "requests", "protocol_errors", "ia_opens",
                "ia_open_failures", "ia_closes", "objects_registered", "objects_refused" };
        struct datp_ia_close_reply closed;
        struct datp_ia_open_reply open;
        struct datp_ia_query q;
        struct datp_error e;
        int fd;

        start(NULL);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                cr_expect_eq(counter(names[i]), 0, "%s", names[i]);

        fd = connect_hello();                                   /* request 1 */
        cr_assert_eq(raw_ia_open(fd, "shm", &open), 0);         /* 2 */
        cr_assert_eq(raw_ia_open(fd, "no-such-ia", &open), 0);  /* 3 */
        cr_assert_eq(raw_ia_open(fd, "tcp", &open), 0);         /* 4 */
        cr_assert_eq(raw_ia_close(fd, open.ia_id, DATP_CLOSE_ABRUPT, &closed), 0); /* 5 */
        raw_ia_query_init(&q, 1);
        q.hdr.type = 0x1234;
        cr_assert_eq(raw_send(fd, &q, sizeof(q)), 0);           /* 6 */
        cr_assert_eq(raw_expect_error(fd, &e), 0);

        cr_expect_eq(counter("clients_accepted"), 1);
        cr_expect_eq(counter("requests"), 6);
        cr_expect_eq(counter("ia_opens"), 2);
        cr_expect_eq(counter("ia_open_failures"), 1);
        cr_expect_eq(counter("ia_closes"), 1);
        cr_expect_eq(counter("protocol_errors"), 1);
        cr_expect_eq(counter("clients_dropped"), 0);
        close(fd);
        stop();
}

/* ---- busctl --------------------------------------------------------------- */

static char *busctl(const char *const *args)
{
        char address[PATH_MAX + 32], *argv[16], *out = NULL;
        size_t n = 0;
        int status;

        snprintf(address, sizeof(address), "--address=%s", d.bus_address);
        argv[n++] = "busctl";
        argv[n++] = address;
        for (; *args && n < 15; args++)
                argv[n++] = (char *) *args;
        argv[n] = NULL;
        status = run_capture(argv, &out, 10000);
        cr_assert_eq(status, 0, "busctl %s: exit %d: %s", args[-1], status, out ? out : "");
        return out;
}

Test(datd_bus, busctl_works_on_the_private_socket)
{
        char *out;

        if (access("/usr/bin/busctl", X_OK) != 0 && access("/bin/busctl", X_OK) != 0)
                cr_skip_test("busctl is not installed");
        start(NULL);
        out = busctl((const char *const[]){ "call", DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                            "GetCounters", NULL });
        cr_expect_eq(strncmp(out, "a{st} 24 ", 9), 0, "%s", out);
        cr_expect_not_null(strstr(out, "\"established\" 0"), "%s", out);
        cr_expect_not_null(strstr(out, "\"clients_accepted\" 0"), "%s", out);
        free(out);
        out = busctl((const char *const[]){ "call", DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                            "ListIAs", NULL });
        cr_expect_not_null(strstr(out, "\"shm\" \"shm\" \"shm\" \"127.0.0.1\" \"up\" 0"), "%s", out);
        free(out);
        out = busctl((const char *const[]){ "get-property", DATD_BUS_DEST, DATD_BUS_OBJECT,
                                            DATD_BUS_IFACE, "Version", NULL });
        cr_expect_not_null(strstr(out, "s \"" PACKAGE_VERSION "\""), "%s", out);
        free(out);
        out = busctl((const char *const[]){ "introspect", DATD_BUS_DEST, DATD_BUS_OBJECT, NULL });
        cr_expect_not_null(strstr(out, ".ListClients"), "%s", out);
        cr_expect_not_null(strstr(out, ".ListEndpoints"), "%s", out);
        cr_expect_not_null(strstr(out, ".ListObjects"), "%s", out);
        free(out);
        stop();
}

/* ---- who may connect ------------------------------------------------------- */

static const char *child_address;

static int open_bus_as_child(void *arg)
{
        sd_bus *b = NULL;
        int r = bus_client_open(child_address, &b);

        sd_bus_flush_close_unref(b);
        return r;
}

static int bus_as_nobody(void)
{
        int result_fd, result = 1;

        child_address = d.bus_address;
        child = child_run_as(NOBODY_UID, NOGROUP_GID, open_bus_as_child, NULL, 0, &result_fd);
        cr_assert_gt(child, 0);
        cr_assert_eq(child_result(result_fd, 20000, &result), 0);
        close(result_fd);
        return result;
}

Test(datd_bus, the_private_socket_refuses_users_the_policy_admits_nowhere)
{
        start("{\"verbs\": false, \"ias\": [{\"name\": \"shm\", \"transport\": \"shm\","
              " \"allow_users\": [\"daemon\"]}]}");
        cr_expect_lt(bus_as_nobody(), 0, "nobody reached the bus");
        stop();
}

Test(datd_bus, the_private_socket_serves_users_the_policy_admits)
{
        start("{\"verbs\": false, \"ias\": [{\"name\": \"shm\", \"transport\": \"shm\","
              " \"allow_users\": [\"daemon\"]}, {\"name\": \"open\", \"transport\": \"shm\"}]}");
        cr_expect_eq(bus_as_nobody(), 0);
        stop();
}

Test(datd_bus, garbage_on_the_bus_socket_is_harmless)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        static const char garbage[] = "\0AUTH NONSENSE\r\nBEGIN\r\n\x01\x02\x03 l\0\0\0";
        struct timeval tv = { .tv_sec = 1 };
        const char *path;
        char buf[256];
        uint64_t v;
        int fd;

        start(NULL);
        path = d.bus_address + strlen("unix:path=");
        cr_assert_lt(strlen(path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(fd, 0);
        cr_assert_eq(connect(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        cr_assert_eq(write(fd, garbage, sizeof(garbage)), (ssize_t) sizeof(garbage));
        /* Whatever datd answers (or not), the other connection works. */
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
        while (read(fd, buf, sizeof(buf)) > 0)
                ;
        close(fd);
        cr_expect_eq(bus_counter(bus, "requests", &v), 0);
        fd = connect_hello();
        close(fd);
        stop();
}

/* ---- the system bus --------------------------------------------------------- */

/* A private dbus-daemon stands in for the system bus, so that the host's is
 * never touched; returns its address. */
static const char *start_system_bus(char address[SCRATCH_PATH_MAX + 16])
{
        char path[SCRATCH_PATH_MAX], log[SCRATCH_PATH_MAX], arg[SCRATCH_PATH_MAX + 32];
        struct stat st;

        cr_assert_not_null(scratch_path("system_bus_socket", path));
        snprintf(address, SCRATCH_PATH_MAX + 16, "unix:path=%s", path);
        snprintf(arg, sizeof(arg), "--address=%s", address);
        cr_assert_not_null(scratch_path("dbus.log", log));
        dbus_daemon = fork();
        cr_assert_geq(dbus_daemon, 0);
        if (dbus_daemon == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

                dup2(fd, STDOUT_FILENO);
                dup2(fd, STDERR_FILENO);
                execl("/usr/bin/dbus-daemon", "dbus-daemon", "--session", "--nofork", "--nopidfile",
                      arg, (char *) NULL);
                _exit(127);
        }
        for (int i = 0; i < 500 && stat(path, &st) < 0; i++)
                usleep(10000);
        cr_assert_eq(stat(path, &st), 0, "dbus-daemon did not start: %s", read_file_str(log));
        return address;
}

Test(datd_bus, owns_its_name_on_the_system_bus)
{
        char address[SCRATCH_PATH_MAX + 16], env[SCRATCH_PATH_MAX + 48];
        char config[SCRATCH_PATH_MAX], sock[SCRATCH_PATH_MAX], log[SCRATCH_PATH_MAX], dir[SCRATCH_PATH_MAX];
        sd_bus *system_bus = NULL;
        uint64_t accepted = 0;
        int r, status;

        if (access("/usr/bin/dbus-daemon", X_OK) != 0)
                cr_skip_test("dbus-daemon is not installed");
        snprintf(env, sizeof(env), "DBUS_SYSTEM_BUS_ADDRESS=%s", start_system_bus(address));
        cr_assert_not_null(scratch_write("datd.conf", datd_test_default_config, config));
        cr_assert_not_null(scratch_path("datd.sock", sock));
        snprintf(dir, sizeof(dir), "%s", sock);
        *strrchr(dir, '/') = '\0';
        spawned = child_exec_datd((const char *const[]){ "--runtime-dir", dir, "--config", config,
                                                         "--bus", "system", "--log-target", "console",
                                                         NULL },
                                  (const char *const[]){ env, NULL }, -1, scratch_path("datd.log", log));
        cr_assert_gt(spawned, 0);
        /* The loop, and with it HELLO, only runs once the name is owned. */
        r = child_wait_datd(sock, 10000);
        cr_assert_eq(r, 0, "datd did not come up: %s\n%s", strerror(-r), read_file_str(log));

        /* Another client of that bus finds datd by its well-known name. */
        r = bus_client_open(address, &system_bus);
        cr_assert_eq(r, 0, "%s: %s", strerror(-r), read_file_str(log));
        cr_assert_eq(bus_counter(system_bus, "clients_accepted", &accepted), 0);
        cr_expect_eq(accepted, 1);
        system_bus = sd_bus_flush_close_unref(system_bus);

        cr_assert_eq(kill(spawned, SIGTERM), 0);
        cr_assert_eq(child_wait(spawned, 5000, &status), 0);
        spawned = 0;
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status 0x%x: %s", status,
                  read_file_str(log));
}
