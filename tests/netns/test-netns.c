/* The multi-host harness (tests/netns.h): hosts reach each other over IPv4
 * and IPv6 and nothing else, a cut link cuts and a restored link restores,
 * a real datd runs in each host, and no namespace outlives its test, even a
 * killed one.  Traffic is a tiny TCP echo made with test_net_socket(). */
#include "config.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/harness.h"
#include "tests/netns.h"

#define TEST_TIMEOUT_S 30
#define IO_TIMEOUT_MS 5000
/* How long a connect over a cut link is given: on a working link it takes
 * well under a millisecond, so this bound says "cut", not "slow". */
#define CUT_WAIT_MS 500

static struct test_net *net;
static struct datd_instance datds[3];
static pid_t creator;                   /* a forked child that makes a net of its own */

static void setup(void)
{
        const char *why;

        if (!test_net_available(&why))
                cr_skip_test("%s", why);
}

static void teardown(void)
{
        for (size_t i = 0; i < ARRAY_SIZE(datds); i++)
                datd_stop(&datds[i]);
        if (creator > 0) {
                int status;

                kill(creator, SIGKILL);
                waitpid(creator, &status, 0);
                creator = 0;
        }
        test_net_destroy(&net);
        test_net_cleanup_stale();
}

TestSuite(test_net, .init = setup, .fini = teardown, .timeout = TEST_TIMEOUT_S);
TestSuite(test_net_cleanup, .init = setup, .fini = teardown, .timeout = TEST_TIMEOUT_S);
TestSuite(test_net_datd, .init = setup, .fini = teardown, .timeout = TEST_TIMEOUT_S);

/* ---- a tiny TCP echo ------------------------------------------------------ */

static socklen_t make_sockaddr(const char *addr, uint16_t port, struct sockaddr_storage *ss)
{
        struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

        memset(ss, 0, sizeof(*ss));
        if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons(port);
                return sizeof(*in4);
        }
        cr_assert_eq(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1, "not an address: %s", addr);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        return sizeof(*in6);
}

static const char *host_addr(unsigned host, int family)
{
        return family == AF_INET ? test_net_host_addr4(net, host) : test_net_host_addr6(net, host);
}

/* A listening socket on the host's address; its port in *port. */
static int listen_on(unsigned host, int family, uint16_t *port)
{
        struct sockaddr_storage ss;
        socklen_t len = make_sockaddr(host_addr(host, family), 0, &ss);
        int fd = test_net_socket(net, host, family, SOCK_STREAM | SOCK_NONBLOCK, 0);

        cr_assert_geq(fd, 0, "socket in host %u: %s", host, strerror(-fd));
        cr_assert_eq(bind(fd, (struct sockaddr *)&ss, len), 0, "bind %s: %m",
                     host_addr(host, family));
        cr_assert_eq(listen(fd, 8), 0, "listen: %m");
        cr_assert_eq(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
        *port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                              : ((struct sockaddr_in6 *)&ss)->sin6_port);
        return fd;
}

/* A non-blocking connect from host `from` to addr:port, in progress. */
static int connect_start(unsigned from, const char *addr, uint16_t port)
{
        struct sockaddr_storage ss;
        socklen_t len = make_sockaddr(addr, port, &ss);
        int fd = test_net_socket(net, from, ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);

        cr_assert_geq(fd, 0, "socket in host %u: %s", from, strerror(-fd));
        if (connect(fd, (struct sockaddr *)&ss, len) < 0)
                cr_assert_eq(errno, EINPROGRESS, "connect to %s: %m", addr);
        return fd;
}

/* 0 once connected, -ETIMEDOUT if still trying after timeout_ms, else -errno. */
static int connect_wait(int fd, int timeout_ms)
{
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        int err = 0;
        socklen_t len = sizeof(err);
        int r = poll(&p, 1, timeout_ms);

        if (r == 0)
                return -ETIMEDOUT;
        if (r < 0)
                return -errno;
        cr_assert_eq(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
        return -err;
}

static void io_wait(int fd, short events)
{
        struct pollfd p = { .fd = fd, .events = events };

        cr_assert_eq(poll(&p, 1, IO_TIMEOUT_MS), 1, "no %s within %d ms",
                     events == POLLIN ? "input" : "room", IO_TIMEOUT_MS);
}

/* The listener's side: accepts one connection, echoes one message. */
static void serve_one(int listen_fd)
{
        char buf[128];
        ssize_t n;
        _cleanup_close_ int fd = -1;

        io_wait(listen_fd, POLLIN);
        fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        cr_assert_geq(fd, 0, "accept: %m");
        io_wait(fd, POLLIN);
        n = read(fd, buf, sizeof(buf));
        cr_assert_gt(n, 0, "echo server read: %m");
        cr_assert_eq(write(fd, buf, (size_t)n), n, "echo server write: %m");
}

/* Sends a message over a connected socket and expects it back. */
static void expect_echo(int fd, int listen_fd, const char *msg)
{
        char buf[128] = "";
        ssize_t n;

        cr_assert_eq(write(fd, msg, strlen(msg)), (ssize_t)strlen(msg), "write: %m");
        serve_one(listen_fd);
        io_wait(fd, POLLIN);
        n = read(fd, buf, sizeof(buf) - 1);
        cr_assert_eq(n, (ssize_t)strlen(msg), "echo read: %zd (%m)", n);
        cr_assert_str_eq(buf, msg);
}

/* Host `from` talks TCP to host `to`'s address of the family and gets its
 * words back. */
static void expect_reach(unsigned from, unsigned to, int family)
{
        char msg[96];
        uint16_t port;
        _cleanup_close_ int listen_fd = listen_on(to, family, &port);
        _cleanup_close_ int fd = connect_start(from, host_addr(to, family), port);
        int r = connect_wait(fd, IO_TIMEOUT_MS);

        cr_assert_eq(r, 0, "host %u -> %s port %u: %s", from, host_addr(to, family), port,
                     strerror(-r));
        snprintf(msg, sizeof(msg), "from %s to %s", host_addr(from, family), host_addr(to, family));
        expect_echo(fd, listen_fd, msg);
}

static void expect_full_mesh(unsigned n)
{
        for (unsigned from = 0; from < n; from++)
                for (unsigned to = 0; to < n; to++)
                        if (from != to) {
                                expect_reach(from, to, AF_INET);
                                expect_reach(from, to, AF_INET6);
                        }
}

/* Host `from` cannot get a connection to `to` while the link is cut: the
 * SYN is lost, so the connect neither succeeds nor is refused. */
static void expect_cut(unsigned from, unsigned to, int family)
{
        uint16_t port;
        _cleanup_close_ int listen_fd = listen_on(to, family, &port);
        _cleanup_close_ int fd = connect_start(from, host_addr(to, family), port);
        int r = connect_wait(fd, CUT_WAIT_MS);

        cr_assert_neq(r, 0, "host %u reached %s over a cut link", from, host_addr(to, family));
        cr_assert_neq(r, -ECONNREFUSED, "host %u got a refusal over a cut link", from);
}

/* ---- hosts and addresses ------------------------------------------------- */

Test(test_net, two_hosts_reach_each_other_over_ipv4_and_ipv6)
{
        cr_assert_eq(test_net_create(&net, 2), 0);
        cr_assert_eq(test_net_n_hosts(net), 2);
        expect_full_mesh(2);
}

Test(test_net, three_hosts_reach_each_other_over_ipv4_and_ipv6)
{
        cr_assert_eq(test_net_create(&net, 3), 0);
        expect_full_mesh(3);
}

Test(test_net, hosts_get_distinct_addresses_in_the_test_ranges)
{
        cr_assert_eq(test_net_create(&net, 3), 0);
        for (unsigned i = 0; i < 3; i++) {
                cr_assert_eq(strncmp(test_net_host_addr4(net, i), "10.213.", 7), 0);
                cr_assert_eq(strncmp(test_net_host_addr6(net, i), "fd00:da7d:", 10), 0);
                for (unsigned j = 0; j < i; j++) {
                        cr_assert_str_neq(test_net_host_addr4(net, i), test_net_host_addr4(net, j));
                        cr_assert_str_neq(test_net_host_addr6(net, i), test_net_host_addr6(net, j));
                        cr_assert_str_neq(test_net_host_ns(net, i), test_net_host_ns(net, j));
                }
        }
        cr_assert_null(test_net_host_addr4(net, 3));
        cr_assert_null(test_net_host_ns(net, 3));
}

/* Each address exists in its own host only: not in the others, not in the
 * namespace the test runs in. */
Test(test_net, a_host_has_only_its_own_addresses)
{
        cr_assert_eq(test_net_create(&net, 2), 0);
        for (int k = 0; k < 2; k++) {
                int family = k ? AF_INET6 : AF_INET;
                struct sockaddr_storage ss;
                socklen_t len = make_sockaddr(host_addr(1, family), 0, &ss);
                _cleanup_close_ int own = test_net_socket(net, 1, family, SOCK_STREAM, 0);
                _cleanup_close_ int other = test_net_socket(net, 0, family, SOCK_STREAM, 0);
                _cleanup_close_ int here = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

                cr_assert_eq(bind(own, (struct sockaddr *)&ss, len), 0, "bind in own host: %m");
                cr_assert_eq(bind(other, (struct sockaddr *)&ss, len), -1);
                cr_assert_eq(errno, EADDRNOTAVAIL, "bind in another host: %m");
                cr_assert_eq(bind(here, (struct sockaddr *)&ss, len), -1);
                cr_assert_eq(errno, EADDRNOTAVAIL, "bind in the test's namespace: %m");
        }
}

Test(test_net, each_host_has_its_loopback_up)
{
        cr_assert_eq(test_net_create(&net, 2), 0);
        for (unsigned h = 0; h < 2; h++) {
                struct sockaddr_in sa = { .sin_family = AF_INET,
                                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                socklen_t len = sizeof(sa);
                _cleanup_close_ int l = test_net_socket(net, h, AF_INET, SOCK_STREAM, 0);
                _cleanup_close_ int c = test_net_socket(net, h, AF_INET, SOCK_STREAM, 0);

                cr_assert_eq(bind(l, (struct sockaddr *)&sa, len), 0, "bind 127.0.0.1: %m");
                cr_assert_eq(listen(l, 1), 0);
                cr_assert_eq(getsockname(l, (struct sockaddr *)&sa, &len), 0);
                cr_assert_eq(connect(c, (struct sockaddr *)&sa, len), 0,
                             "connect to 127.0.0.1 in host %u: %m", h);
        }
}

/* ---- links --------------------------------------------------------------- */

Test(test_net, link_down_cuts_the_host_off_both_ways)
{
        cr_assert_eq(test_net_create(&net, 3), 0);
        cr_assert_eq(test_net_link_down(net, 0), 0);
        expect_cut(1, 0, AF_INET);
        expect_cut(1, 0, AF_INET6);
        expect_cut(0, 2, AF_INET);
        expect_cut(0, 2, AF_INET6);
}

Test(test_net, link_down_leaves_the_other_hosts_talking)
{
        cr_assert_eq(test_net_create(&net, 3), 0);
        cr_assert_eq(test_net_link_down(net, 0), 0);
        expect_reach(1, 2, AF_INET);
        expect_reach(2, 1, AF_INET6);
}

/* A connect started while the cable is out completes once it is back (TCP
 * retransmits its SYN), and new connections work again. */
Test(test_net, link_up_restores_traffic)
{
        uint16_t port;
        _cleanup_close_ int listen_fd = -1, pending = -1;
        int r;

        cr_assert_eq(test_net_create(&net, 2), 0);
        cr_assert_eq(test_net_link_down(net, 1), 0);
        listen_fd = listen_on(1, AF_INET, &port);
        pending = connect_start(0, test_net_host_addr4(net, 1), port);
        cr_assert_eq(connect_wait(pending, CUT_WAIT_MS), -ETIMEDOUT);

        cr_assert_eq(test_net_link_up(net, 1), 0);
        r = connect_wait(pending, IO_TIMEOUT_MS);
        cr_assert_eq(r, 0, "the pending connect: %s", strerror(-r));
        expect_echo(pending, listen_fd, "after the outage");
        expect_reach(0, 1, AF_INET);
        expect_reach(1, 0, AF_INET6);
}

/* ---- running things inside a host ------------------------------------------ */

Test(test_net, run_in_runs_inside_the_host)
{
        char *argv[] = { "ip", "-o", "address", "show", "dev", TEST_NET_IFNAME, NULL };
        _cleanup_free_ char *out = NULL, *here = NULL;

        cr_assert_eq(test_net_create(&net, 2), 0);
        cr_assert_eq(test_net_run_in(net, 1, argv, &out, IO_TIMEOUT_MS), 0, "%s", out);
        cr_assert_not_null(strstr(out, test_net_host_addr4(net, 1)), "%s", out);
        cr_assert_not_null(strstr(out, test_net_host_addr6(net, 1)), "%s", out);
        cr_assert_null(strstr(out, test_net_host_addr4(net, 0)), "%s", out);
        /* The control: the same command in the test's own namespace finds no
         * such interface. */
        cr_assert_neq(run_capture(argv, &here, IO_TIMEOUT_MS), 0, "%s", here);
}

Test(test_net, run_in_is_bounded)
{
        char *argv[] = { "sleep", "20", NULL };

        cr_assert_eq(test_net_create(&net, 1), 0);
        cr_assert_eq(test_net_run_in(net, 0, argv, NULL, 300), -1);
}

Test(test_net, spawn_runs_in_the_host_and_wait_reaps_it)
{
        /* Exits 0 if the host has the address given as $0. */
        char *argv[] = { "sh", "-c", "ip -o -4 address show | grep -qF \" $0/\"", NULL, NULL };
        pid_t pid;

        cr_assert_eq(test_net_create(&net, 2), 0);
        argv[3] = (char *)test_net_host_addr4(net, 0);
        pid = test_net_spawn(net, 0, NULL, argv);
        cr_assert_gt(pid, 0);
        cr_assert_eq(test_net_wait(net, pid, IO_TIMEOUT_MS), 0, "host 0 lacks its address");
        pid = test_net_spawn(net, 1, NULL, argv);
        cr_assert_gt(pid, 0);
        cr_assert_eq(test_net_wait(net, pid, IO_TIMEOUT_MS), 1, "host 1 has host 0's address");
        cr_assert_eq(test_net_wait(net, pid, IO_TIMEOUT_MS), -ECHILD);
}

/* A one-host net with "sleep 20" spawned in it. */
static pid_t spawn_sleeper(void)
{
        char *argv[] = { "sleep", "20", NULL };
        pid_t pid;

        cr_assert_eq(test_net_create(&net, 1), 0);
        pid = test_net_spawn(net, 0, NULL, argv);
        cr_assert_gt(pid, 0, "spawn: %s", strerror(-pid));
        return pid;
}

Test(test_net, wait_kills_a_spawned_process_past_its_bound)
{
        pid_t pid = spawn_sleeper();

        cr_assert_eq(test_net_wait(net, pid, 200), -1);
        cr_assert_eq(kill(pid, 0), -1, "PID %d lives on", (int)pid);
}

Test(test_net, destroy_kills_what_spawn_started)
{
        pid_t pid = spawn_sleeper();

        test_net_destroy(&net);
        /* Killed and reaped by destroy: the PID is no child of ours any more. */
        cr_assert_eq(waitpid(pid, NULL, WNOHANG), -1);
        cr_assert_eq(errno, ECHILD);
}

/* A forked child enters a host and is there for good. */
Test(test_net, enter_moves_a_forked_child_into_the_host)
{
        pid_t pid;
        int status;

        cr_assert_eq(test_net_create(&net, 2), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                struct sockaddr_storage ss;
                socklen_t len = make_sockaddr(test_net_host_addr4(net, 1), 0, &ss);
                int fd;

                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (test_net_enter(net, 1) < 0)
                        _exit(2);
                fd = socket(AF_INET, SOCK_STREAM, 0);
                _exit(fd >= 0 && bind(fd, (struct sockaddr *)&ss, len) == 0 ? 0 : 1);
        }
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child could not bind host 1's address (status %#x)", status);
}

/* ---- no leftovers ------------------------------------------------------------ */

static bool ns_listed(const char *name)
{
        char *argv[] = { "ip", "netns", "list", NULL };
        _cleanup_free_ char *out = NULL;
        size_t len = strlen(name);

        cr_assert_eq(run_capture(argv, &out, IO_TIMEOUT_MS), 0, "ip netns list: %s", out);
        for (char *p = out; (p = strstr(p, name)); p += len)
                if ((p == out || p[-1] == '\n') && (p[len] == '\n' || p[len] == ' ' || !p[len]))
                        return true;
        return false;
}

/* Whether the test's own namespace has a link of this name. */
static bool link_here(const char *name)
{
        char *argv[] = { "ip", "-o", "link", "show", NULL };
        _cleanup_free_ char *out = NULL;
        char needle[32];

        cr_assert_eq(run_capture(argv, &out, IO_TIMEOUT_MS), 0, "ip link: %s", out);
        snprintf(needle, sizeof(needle), ": %s", name);
        for (char *p = out; (p = strstr(p, needle)); p++)
                if (p[strlen(needle)] == ':' || p[strlen(needle)] == '@')
                        return true;
        return false;
}

Test(test_net_cleanup, destroy_leaves_no_namespace_and_no_link)
{
        char names[4][64];
        const char *links[] = { TEST_NET_IFNAME, "br0", "port-a", "port-b", "port-c" };
        bool had[ARRAY_SIZE(links)];

        /* A name the machine itself uses proves nothing either way. */
        for (size_t i = 0; i < ARRAY_SIZE(links); i++)
                had[i] = link_here(links[i]);
        cr_assert_eq(test_net_create(&net, 3), 0);
        for (unsigned i = 0; i < 3; i++)
                snprintf(names[i], sizeof(names[i]), "%s", test_net_host_ns(net, i));
        snprintf(names[3], sizeof(names[3]), "%s", test_net_hub_ns(net));
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                cr_assert(ns_listed(names[i]), "%s is not listed while the net lives", names[i]);
        for (size_t i = 0; i < ARRAY_SIZE(links); i++)
                cr_assert(had[i] || !link_here(links[i]), "%s appeared in the test's namespace",
                          links[i]);

        test_net_destroy(&net);
        cr_assert_null(net);
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                cr_assert_not(ns_listed(names[i]), "%s outlived test_net_destroy()", names[i]);
        for (size_t i = 0; i < ARRAY_SIZE(links); i++)
                cr_assert(had[i] || !link_here(links[i]), "%s is left in the test's namespace",
                          links[i]);
        test_net_destroy(&net);         /* twice: nothing happens */
        test_net_destroy(NULL);
}

static void expect_listed(char names[3][64], bool listed, const char *what)
{
        for (int i = 0; i < 3; i++)
                cr_assert_eq(ns_listed(names[i]), listed, "%s %s", names[i], what);
}

/* Forks a child that creates a 2-host net, tells its namespace names and
 * then waits to be killed. */
static void fork_creator(char names[3][64])
{
        int p[2];
        char buf[256] = "";
        size_t len = 0;

        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        creator = fork();
        cr_assert_geq(creator, 0);
        if (creator == 0) {
                struct test_net *own = NULL;

                prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(p[0]);
                if (test_net_create(&own, 2) < 0)
                        _exit(1);
                dprintf(p[1], "%s %s %s\n", test_net_host_ns(own, 0), test_net_host_ns(own, 1),
                        test_net_hub_ns(own));
                for (;;)
                        pause();
        }
        close(p[1]);
        for (;;) {
                struct pollfd pfd = { .fd = p[0], .events = POLLIN };
                ssize_t n;

                cr_assert_eq(poll(&pfd, 1, 10000), 1, "the creator said nothing");
                n = read(p[0], buf + len, sizeof(buf) - 1 - len);
                cr_assert_gt(n, 0, "the creator failed");
                len += (size_t)n;
                buf[len] = '\0';
                if (strchr(buf, '\n'))
                        break;
        }
        close(p[0]);
        cr_assert_eq(sscanf(buf, "%63s %63s %63s", names[0], names[1], names[2]), 3);
        expect_listed(names, true, "is missing while its creator lives");
}

static void kill_creator(bool reap)
{
        int status;

        cr_assert_eq(kill(creator, SIGKILL), 0);
        if (reap) {
                cr_assert_eq(waitpid(creator, &status, 0), creator);
                creator = 0;
        }
}

Test(test_net_cleanup, next_create_removes_what_a_killed_test_left)
{
        char names[3][64];

        fork_creator(names);
        kill_creator(true);
        cr_assert_eq(test_net_create(&net, 1), 0);
        expect_listed(names, false, "of a killed creator survived");
}

/* Killed but not yet reaped: a zombie cleans nothing up either. */
Test(test_net_cleanup, next_create_removes_what_an_unreaped_killed_test_left)
{
        char names[3][64];
        siginfo_t info = { 0 };

        fork_creator(names);
        kill_creator(false);
        /* Dead but not reaped: WNOWAIT leaves the zombie in place. */
        cr_assert_eq(waitid(P_PID, (id_t)creator, &info, WEXITED | WNOWAIT), 0);
        cr_assert_eq(info.si_code, CLD_KILLED);

        cr_assert_eq(test_net_create(&net, 1), 0);
        expect_listed(names, false, "of a zombie creator survived");
}

Test(test_net_cleanup, cleanup_leaves_the_nets_of_live_creators_alone)
{
        char names[3][64];

        fork_creator(names);
        cr_assert_eq(test_net_create(&net, 1), 0);
        test_net_cleanup_stale();
        expect_listed(names, true, "was removed while its creator lives");
        kill_creator(true);
        cr_assert_geq(test_net_cleanup_stale(), 0);
        expect_listed(names, false, "is left after its creator died");
}

/* ---- a real datd in each host ------------------------------------------------ */

/* `datctl ia list --json` of a datd, through its private bus socket (a
 * filesystem path, so reachable from the test's namespace). */
static json_t *ia_list(const struct datd_instance *d)
{
        _cleanup_free_ char *datctl = build_path("daemon/datctl");
        char address[PATH_MAX + 32];
        char *argv[] = { datctl, address, "--json", "ia", "list", NULL };
        _cleanup_free_ char *out = NULL;
        json_error_t error;
        json_t *list;

        snprintf(address, sizeof(address), "--address=%s", d->bus_address);
        cr_assert_eq(run_capture(argv, &out, IO_TIMEOUT_MS), 0, "datctl: %s", out);
        list = json_loads(out, 0, &error);
        cr_assert(json_is_array(list), "not a JSON array: %s (%s)", out, error.text);
        return list;
}

static const char *ia_address(json_t *list, const char *name)
{
        size_t i;
        json_t *ia;

        json_array_foreach(list, i, ia)
                if (strcmp(json_string_value(json_object_get(ia, "name")) ?: "", name) == 0)
                        return json_string_value(json_object_get(ia, "address"));
        return NULL;
}

Test(test_net_datd, a_datd_in_each_host_serves_that_hosts_address)
{
        cr_assert_eq(test_net_create(&net, 2), 0);
        for (unsigned h = 0; h < 2; h++)
                cr_assert_eq(test_net_datd_start(net, h, &datds[h]), 0, "datd in host %u", h);
        for (unsigned h = 0; h < 2; h++) {
                json_t *list = ia_list(&datds[h]);
                const char *addr = ia_address(list, "tcp");

                cr_assert_not_null(addr, "no tcp IA in host %u", h);
                cr_assert_str_eq(addr, test_net_host_addr4(net, h));
                json_decref(list);
        }
}

Test(test_net_datd, a_datd_serves_its_hosts_ipv6_address)
{
        _cleanup_free_ char *config = NULL;
        json_t *list;

        cr_assert_eq(test_net_create(&net, 2), 0);
        config = test_net_datd_config(net, 1, true);
        datds[0].netns = test_net_host_ns(net, 1);
        cr_assert_eq(datd_start(&datds[0], config), 0);
        list = ia_list(&datds[0]);
        cr_assert_str_eq(ia_address(list, "tcp") ?: "(none)", test_net_host_addr6(net, 1));
        json_decref(list);
}

/* datd checks that a tcp IA's address is on one of its host's interfaces:
 * another host's address does not do, so datd really runs in its host. */
Test(test_net_datd, a_datd_refuses_another_hosts_address)
{
        _cleanup_free_ char *config = NULL;

        cr_assert_eq(test_net_create(&net, 2), 0);
        config = test_net_datd_config(net, 1, false);
        datds[0].netns = test_net_host_ns(net, 0);
        fprintf(stderr, "test: the datd failure below is expected\n");
        cr_assert_neq(datd_start(&datds[0], config), 0, "datd in host 0 took host 1's address");
}

/* A libdat client in a host opens the tcp IA of that host's datd and sees
 * the host's address. */
Test(test_net_datd, a_libdat_client_in_a_host_reaches_its_datd)
{
        _cleanup_free_ char *datinfo = build_path("tools/datinfo");
        char *argv[] = { datinfo, "-d", "datd-tcp", NULL };
        _cleanup_free_ char *out = NULL;

        cr_assert_eq(test_net_create(&net, 2), 0);
        cr_assert_eq(test_net_datd_start(net, 1, &datds[1]), 0);
        cr_assert_eq(test_net_run_client(net, 1, &datds[1], argv, &out, IO_TIMEOUT_MS), 0, "%s",
                     out);
        cr_assert_not_null(strstr(out, test_net_host_addr4(net, 1)), "%s", out);
}
