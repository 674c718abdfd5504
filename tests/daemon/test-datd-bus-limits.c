/* The limits of datd's private D-Bus socket (datd.conf(5), DBUS-API.md
 * "Limits"): who gets a connection, how long one may idle, how many replies
 * it may leave unread, how often refusals are logged, and what datd does
 * when it has no descriptor left for a new one. */
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "tests/daemon/bus-client.h"
#include "tests/daemon/child.h"
#include "tests/daemon/raw-client.h"
#include "tests/harness.h"

static struct datd_instance d;
static pid_t holders[3];
static sd_bus *bus;

static void teardown(void)
{
        bus = sd_bus_flush_close_unref(bus);
        for (size_t i = 0; i < sizeof(holders) / sizeof(holders[0]); i++)
                child_kill(&holders[i]);
        datd_stop(&d);
}

TestSuite(datd_bus_limits, .timeout = 30, .fini = teardown);

/* The default test config (every IA open to everyone) with these limits. */
static void start(const char *limits)
{
        char config[1024];

        snprintf(config, sizeof(config),
                 "{\"log_level\": \"debug\", \"verbs\": false,"
                 " \"ias\": [{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"}],"
                 " \"limits\": {%s}}", limits);
        cr_assert_eq(datd_start(&d, config), 0, "datd did not start");
}

static void stop(void)
{
        int status = datd_stop(&d);

        cr_expect_eq(status, 0, "datd's exit status after SIGTERM: %d", status);
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Lines of datd's log that contain needle. */
static unsigned log_lines_with(const char *needle)
{
        char *log = read_file_str(d.log_path);
        unsigned n = 0;

        cr_assert_not_null(log);
        for (const char *line = log; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                const char *end = strchr(line, '\n'), *hit = strstr(line, needle);

                if (hit && (!end || hit < end))
                        n++;
        }
        free(log);
        return n;
}

/* A plain socket connection to bus.sock that says nothing. */
static int connect_bus_socket(void)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = d.bus_address + strlen("unix:path=");
        int fd;

        cr_assert_lt(strlen(path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(fd, 0);
        cr_assert_eq(connect(fd, (struct sockaddr *) &sa, sizeof(sa)), 0, "%s", strerror(errno));
        return fd;
}

/* ---- who gets a connection -------------------------------------------------- */

static int hold_bus_connection(void *address)
{
        sd_bus *b = NULL;

        /* b stays open: the child holds it until it is killed. */
        return bus_client_open(address, &b);
}

/* Runs hold_bus_connection() as nobody; the child is kept in *pid; returns
 * its result. */
static int nobody_connects(pid_t *pid)
{
        int result_fd, result = 1;

        *pid = child_run_as(NOBODY_UID, NOGROUP_GID, hold_bus_connection, d.bus_address, 1, &result_fd);
        cr_assert_gt(*pid, 0);
        cr_assert_eq(child_result(result_fd, 20000, &result), 0);
        close(result_fd);
        return result;
}

Test(datd_bus_limits, max_bus_connections_is_enforced_and_root_is_served_beyond_it)
{
        start("\"max_bus_connections\": 2");
        cr_assert_eq(nobody_connects(&holders[0]), 0);
        cr_assert_eq(nobody_connects(&holders[1]), 0);
        cr_expect_lt(nobody_connects(&holders[2]), 0, "a third connection was served");
        child_kill(&holders[2]);
        /* Whoever fills the socket does not lock the administrator out. */
        cr_expect_eq(bus_client_open(d.bus_address, &bus), 0, "root was refused");
        bus = sd_bus_flush_close_unref(bus);
        /* A closed connection frees its place. */
        child_kill(&holders[1]);
        for (int i = 0; i < 100; i++) {
                if (nobody_connects(&holders[2]) == 0)
                        break;
                child_kill(&holders[2]);
                usleep(20000);
        }
        cr_expect_gt(holders[2], 0, "no place freed");
        stop();
}

Test(datd_bus_limits, max_bus_connections_per_uid_is_enforced_but_not_on_root)
{
        sd_bus *second = NULL;

        start("\"max_bus_connections_per_uid\": 1");
        cr_assert_eq(nobody_connects(&holders[0]), 0);
        cr_expect_lt(nobody_connects(&holders[1]), 0, "a second connection of the same user was served");
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0, "root was refused");
        cr_expect_eq(bus_client_open(d.bus_address, &second), 0, "root's second connection was refused");
        sd_bus_flush_close_unref(second);
        stop();
}

/* ---- idle connections ---------------------------------------------------------- */

Test(datd_bus_limits, a_connection_that_says_nothing_is_closed_after_bus_idle_timeout_ms)
{
        struct timeval tv = { .tv_sec = 10 };
        char buf[64];
        ssize_t n;
        int fd;

        start("\"bus_idle_timeout_ms\": 300");
        fd = connect_bus_socket();
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
        n = read(fd, buf, sizeof(buf));
        cr_expect_eq(n, 0, "read %zd (%s): the idle connection was not closed", n,
                     n < 0 ? strerror(errno) : "data");
        close(fd);
        stop();
}

Test(datd_bus_limits, an_idle_authenticated_connection_is_closed_too)
{
        long long deadline;

        start("\"bus_idle_timeout_ms\": 300");
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0);
        deadline = now_ms() + 10000;
        while (sd_bus_is_open(bus) > 0 && now_ms() < deadline)
                if (sd_bus_process(bus, NULL) == 0)
                        (void) sd_bus_wait(bus, 100000);
        cr_expect_leq(sd_bus_is_open(bus), 0, "the idle connection was not closed");
        stop();
}

/* A raw client of datd with n EPs on IA ia: its socket. */
static int make_endpoints(const char *ia, unsigned n)
{
        struct datp_ia_open_reply open;
        int sock = raw_connect_hello(d.socket_path);

        cr_assert_geq(sock, 0, "connect + HELLO: %s", strerror(-sock));
        cr_assert_eq(raw_ia_open(sock, ia, &open), 0);
        cr_assert_eq(open.status.dat_status, DAT_SUCCESS);
        for (unsigned i = 0; i < n; i++) {
                struct datp_obj_create_reply reply;
                struct datp_obj_desc desc;

                raw_obj_desc(&desc, DATP_OBJ_EP, 0x1000 + i, 0);
                cr_assert_eq(raw_obj_create(sock, open.ia_id, &desc, &reply), 0);
                cr_assert_eq(reply.status.dat_status, DAT_SUCCESS, "EP %u: 0x%08x", i,
                             reply.status.dat_status);
        }
        return sock;
}

/* Reads fd, at most chunk bytes every 20 ms, until the first method
 * return or error has come whole (D-Bus messages, little-endian as sd-bus
 * writes here: type at byte 1, body length at 4, header fields' length at
 * 12), within ms milliseconds.  The bytes of that reply, or -1 if the
 * connection ended first (EOF, a reset) or the time ran out. */
static long long read_reply_slowly(int fd, size_t chunk, long long ms)
{
        static uint8_t buf[1 << 17];
        uint8_t head[16];
        long long end = now_ms() + ms, left = -1;
        size_t got = 0;         /* of the current message's 16 first bytes */
        uint32_t body = 0, fields = 0;

        cr_assert_leq(chunk, sizeof(buf));
        while (now_ms() < end) {
                ssize_t n = recv(fd, buf, chunk, MSG_DONTWAIT);

                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                        return -1;
                for (ssize_t i = 0; i < n;) {
                        long long take;

                        if (got < sizeof(head)) {
                                head[got++] = buf[i++];
                                if (got < sizeof(head))
                                        continue;
                                memcpy(&body, head + 4, 4);
                                memcpy(&fields, head + 12, 4);
                                left = (long long) ((fields + 7) & ~7u) + body;
                        }
                        take = n - i < left ? n - i : left;
                        i += take;
                        left -= take;
                        if (left == 0) {
                                if (head[1] == 2 || head[1] == 3)
                                        return 16 + (long long) ((fields + 7) & ~7u) + body;
                                got = 0;        /* a signal: the next message */
                        }
                }
                usleep(20000);
        }
        return -1;
}

/* An IA name of 250 bytes, for rows of 330 bytes in ListEndpoints. */
#define LONG_IA_NAME \
        "an-ia-with-a-long-name-an-ia-with-a-long-name-an-ia-with-a-long-name-an-ia-with-a-" \
        "long-name-an-ia-with-a-long-name-an-ia-with-a-long-name-an-ia-with-a-long-name-an-" \
        "ia-with-a-long-name-an-ia-with-a-long-name-an-ia-with-a-long-name-an-ia-with-a-long"

/* A datd whose ListEndpoints reply is 24 MB (72 000 EPs of a raw client,
 * *sock), more than a bus socket holds (sd-bus asks for 8 MiB, which the
 * kernel doubles), and bus_idle_timeout_ms 100; ListEndpoints called on
 * bus, not read: the socket to read it from. */
static int call_for_a_large_reply(int *sock)
{
        sd_bus_message *call = NULL;
        uint64_t cookie;
        int fd, r;

        cr_assert_eq(datd_start(&d, "{\"log_level\": \"debug\", \"verbs\": false, \"ias\": [{\"name\": \""
                                    LONG_IA_NAME "\", \"transport\": \"shm\"}], \"limits\": "
                                    "{\"bus_idle_timeout_ms\": 100, \"max_eps\": 131072}}"), 0);
        *sock = make_endpoints(LONG_IA_NAME, 72000);
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0);
        r = sd_bus_message_new_method_call(bus, &call, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                           "ListEndpoints");
        if (r >= 0)
                r = sd_bus_send(bus, call, &cookie);
        sd_bus_message_unref(call);
        if (r >= 0)
                r = sd_bus_flush(bus);
        cr_assert_geq(r, 0, "calling: %s", strerror(-r));
        /* From here the test reads the socket itself, sd-bus no more. */
        fd = sd_bus_get_fd(bus);
        cr_assert_geq(fd, 0);
        return fd;
}

/* bus_idle_timeout_ms (datd.conf(5), DBUS-API.md): a connection that sends
 * nothing stays while a reply is still being written to it and it keeps
 * reading.  The large reply read 128 KiB every 20 ms, over many periods,
 * comes whole.  Progress was measured in replies waiting, and one reply is
 * one until its last byte: datd closed the connection after two periods,
 * and the reader got what the socket held and an EOF. */
Test(datd_bus_limits, a_peer_reading_one_large_reply_slowly_gets_all_of_it)
{
        int sock, fd = call_for_a_large_reply(&sock);
        long long size = read_reply_slowly(fd, 1 << 17, 15000);

        cr_expect_gt(size, 20 << 20, "the reply did not come whole (%lld)", size);
        close(sock);
        stop();
}

/* ... and one that stops reading it is closed all the same: here it reads
 * nothing for a second (ten periods), then finds the end of what the
 * socket held, and an EOF. */
Test(datd_bus_limits, a_peer_that_stops_reading_a_large_reply_is_closed)
{
        int sock, fd = call_for_a_large_reply(&sock);
        long long size;

        usleep(1000 * 1000);
        size = read_reply_slowly(fd, 1 << 17, 15000);
        cr_expect_eq(size, -1, "datd kept a peer that read nothing (%lld)", size);
        cr_expect_geq(log_lines_with("idle for"), 1, "the close was not logged");
        close(sock);
        stop();
}

/* ---- replies nobody reads -------------------------------------------------------- */

Test(datd_bus_limits, a_peer_that_never_reads_its_replies_is_dropped)
{
        struct pollfd pfd = { .events = POLLRDHUP };
        sd_bus *flood = NULL;
        uint64_t v;
        int r = 0;

        start("\"max_bus_queued_replies\": 4");
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0);
        cr_assert_eq(bus_client_open(d.bus_address, &flood), 0);
        /* Far more replies than the socket's buffer holds: what does not fit
         * waits in datd. */
        for (int i = 0; i < 20000 && r >= 0; i++) {
                sd_bus_message *call = NULL;
                uint64_t cookie;

                r = sd_bus_message_new_method_call(flood, &call, DATD_BUS_DEST, DATD_BUS_OBJECT,
                                                   DATD_BUS_IFACE, "GetCounters");
                /* With a cookie: without one, sd-bus marks the call as one
                 * that wants no reply. */
                if (r >= 0)
                        r = sd_bus_send(flood, call, &cookie);
                sd_bus_message_unref(call);
        }
        if (r >= 0)
                r = sd_bus_flush(flood);
        cr_assert_geq(r, 0, "sending: %s", strerror(-r));
        /* Reading nothing at all: datd hangs up, or holds on to its replies. */
        pfd.fd = sd_bus_get_fd(flood);
        cr_assert_geq(pfd.fd, 0);
        cr_expect_eq(poll(&pfd, 1, 10000), 1, "datd kept serving a peer that reads nothing");
        cr_expect(pfd.revents & (POLLHUP | POLLRDHUP), "revents 0x%x", pfd.revents);
        sd_bus_close_unref(flood);
        cr_expect_geq(log_lines_with("max_bus_queued_replies"), 1, "the drop was not logged");
        /* Everyone else is served as before. */
        cr_expect_eq(bus_counter(bus, "requests", &v), 0);
        stop();
}

/* ---- log lines others cause ------------------------------------------------------ */

static int connect_often(void *address)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = (const char *) address + strlen("unix:path=");

        memcpy(sa.sun_path, path, strlen(path) + 1);
        for (int i = 0; i < 50; i++) {
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

                if (fd < 0)
                        return -errno;
                if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                        close(fd);
                        return -errno;
                }
                close(fd);
        }
        return 0;
}

Test(datd_bus_limits, refusals_are_logged_at_a_bounded_rate)
{
        int result_fd, result = 1;
        unsigned n;

        cr_assert_eq(datd_start(&d, "{\"log_level\": \"debug\", \"verbs\": false, \"ias\": [{\"name\":"
                                    " \"shm\", \"transport\": \"shm\", \"allow_users\": [\"daemon\"]}]}"), 0);
        holders[0] = child_run_as(NOBODY_UID, NOGROUP_GID, connect_often, d.bus_address, 0, &result_fd);
        cr_assert_gt(holders[0], 0);
        cr_assert_eq(child_result(result_fd, 20000, &result), 0);
        close(result_fd);
        cr_assert_eq(result, 0, "connecting: %s", strerror(-result));
        /* Accepted in order: once root is served, the 50 were refused. */
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0);
        n = log_lines_with("Refusing a private bus connection");
        cr_expect(n >= 1 && n <= 20, "%u lines for 50 refusals", n);
        stop();
}

/* ---- out of descriptors ---------------------------------------------------------- */

/* The lowest descriptor number pid has free: with RLIMIT_NOFILE there, it
 * can open nothing more. */
static rlim_t lowest_free_fd(pid_t pid)
{
        char dir[64];
        bool used[4096] = {};
        struct dirent *e;
        DIR *dp;
        rlim_t n = 0;

        snprintf(dir, sizeof(dir), "/proc/%d/fd", (int) pid);
        dp = opendir(dir);
        cr_assert_not_null(dp);
        while ((e = readdir(dp)))
                if (e->d_name[0] != '.' && atoi(e->d_name) < 4096)
                        used[atoi(e->d_name)] = true;
        closedir(dp);
        while (n < 4096 && used[n])
                n++;
        return n;
}

/* Whether datd's log has a line with needle within ms. */
static bool log_shows_within(const char *needle, int ms)
{
        for (int t = 0; t < ms; t += 10) {
                if (log_lines_with(needle) > 0)
                        return true;
                usleep(10000);
        }
        return log_lines_with(needle) > 0;
}

/* datd's CPU time so far (user and system), in ms. */
static long long cpu_ms(pid_t pid)
{
        char path[64], *stat, *p;
        unsigned long long utime = 0, stime = 0;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        stat = read_file_str(path);
        cr_assert_not_null(stat);
        /* After the command's closing parenthesis: state is field 3, utime
         * and stime fields 14 and 15. */
        p = strrchr(stat, ')');
        cr_assert_not_null(p);
        cr_assert_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                            &stime), 2);
        free(stat);
        return (long long) (utime + stime) * 1000 / sysconf(_SC_CLK_TCK);
}

#define FAILED_ACCEPT "Failed to accept a bus connection"
#define MAX_FILLERS 16

Test(datd_bus_limits, out_of_descriptors_the_bus_socket_rests_instead_of_spinning)
{
        struct rlimit old, tight;
        int fds[MAX_FILLERS];
        unsigned n, k = 0;
        long long cpu;

        start("\"max_bus_connections\": 64");
        cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, NULL, &old), 0, "%s", strerror(errno));
        /* The soft limit at datd's lowest free descriptor, then a
         * connection.  A descriptor datd closed after /proc was read (the
         * socket of the harness's readiness check, say) was free again
         * below the limit, and accept4() took it: nothing failed (6 runs
         * in 10).  Such a connection stays and fills the gap, and the
         * limit goes down to the next free one, until an accept fails. */
        do {
                cr_assert_lt(k, MAX_FILLERS, "no accept failed after %u connections", k);
                /* The soft limit only: raising the hard one back may need
                 * a capability the test does not have. */
                tight.rlim_cur = lowest_free_fd(d.pid);
                tight.rlim_max = old.rlim_max;
                cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, &tight, NULL), 0, "%s", strerror(errno));
                fds[k++] = connect_bus_socket();
        } while (!log_shows_within(FAILED_ACCEPT, 300));
        /* A spinning datd fails accept() thousands of times a second, at
         * full CPU (its log lines are rate-limited either way); a resting
         * one tries again every 100 ms, and logs at most ten lines in ten
         * seconds. */
        cpu = cpu_ms(d.pid);
        usleep(1000 * 1000);
        cpu = cpu_ms(d.pid) - cpu;
        n = log_lines_with(FAILED_ACCEPT);
        cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, &old, NULL), 0, "%s", strerror(errno));
        cr_expect(n >= 1 && n <= 20, "%u failed accepts logged in a second", n);
        cr_expect_lt(cpu, 250, "datd used %lld ms of CPU in a second without descriptors", cpu);
        /* With descriptors back, the socket is served again. */
        cr_expect_eq(bus_client_open(d.bus_address, &bus), 0, "not served after the pause");
        while (k > 0)
                close(fds[--k]);
        stop();
}
