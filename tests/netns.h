/* Multi-host tests on one machine: a "host" is a network namespace, and the
 * hosts of one test_net share one Ethernet segment.
 *
 *   hub namespace <prefix>-hub:   bridge br0 with ports port-a, port-b, ...
 *   host namespace <prefix>-a:    lo (up) and net0, the veth peer of port-a,
 *                                 10.213.<run>.1/24 and fd00:da7d:<run>::1/64
 *   host namespace <prefix>-b:    net0, 10.213.<run>.2/24, fd00:da7d:<run>::2/64
 *
 * <prefix> is "datd-t<pid>-<seq>": the creating process's PID and a counter
 * of that process, so that concurrent test programs never collide and a
 * namespace left behind by a killed test names its (dead) creator.  Each
 * test_net is a world of its own (its own hub, its own routing tables), so
 * the addresses of two nets never meet even when their <run> is the same.
 * Nothing is created in the caller's namespace: both ends of every veth pair
 * are made directly inside the hub and host namespaces, so deleting the
 * namespaces deletes every link.
 *
 * Reaching a datd: a datd started in a host (datd_instance.netns =
 * test_net_host_ns(), or test_net_datd_start()) listens for TCP in that host
 * only, but its client socket (DATD_SOCKET) and its private D-Bus socket are
 * filesystem paths under its runtime directory, and a filesystem-path
 * AF_UNIX socket is reachable from every network namespace.  So datctl
 * --address=<bus> works from anywhere, and a libdat client can talk to any
 * datd's control socket; a client meant to act "on host X" must still run in
 * X's namespace (test_net_run_client(), test_net_spawn(), test_net_enter()),
 * because the TCP connections libdat and datd make are bound to the
 * namespace they were made in.  (Abstract AF_UNIX names, "@...", are scoped
 * per network namespace: the harness does not use them.)
 *
 * Every helper needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2's
 * `ip`; tests call test_net_available() first and skip otherwise.  Errors
 * are negative errno values, with the reason printed to stderr.
 *
 * Leftovers: a test killed by criterion's timeout cannot clean up, so every
 * test_net_create() first deletes the namespaces whose creator PID is gone
 * (test_net_cleanup_stale()).  Processes are never left: what the harness
 * starts dies with the test process (PR_SET_PDEATHSIG).  One limit: if a
 * dead creator's PID is reused by an unrelated live process, its namespaces
 * wait for the next cleanup after that process ends.
 *
 * Typical use, in a criterion test with .fini stopping the datds and then
 * calling test_net_destroy(&net):
 *
 *      if (!test_net_available(&why))
 *              cr_skip_test("%s", why);
 *      cr_assert_eq(test_net_create(&net, 2), 0);
 *      cr_assert_eq(test_net_datd_start(net, 0, &datd_a), 0);
 *      cr_assert_eq(test_net_datd_start(net, 1, &datd_b), 0);
 *      // a client on host a that connects to host b's tcp IA:
 *      char *argv[] = { client, (char *)test_net_host_addr4(net, 1), NULL };
 *      pid = test_net_spawn(net, 0, &datd_a, argv);
 *      test_net_link_down(net, 1);     // b's cable out: a must see a timeout
 *      cr_assert_eq(test_net_wait(net, pid, 10000), 0);
 */
#ifndef DATD_TESTS_NETNS_H
#define DATD_TESTS_NETNS_H

#include <stdbool.h>
#include <sys/types.h>

#include "tests/harness.h"

#define TEST_NET_MAX_HOSTS 16
#define TEST_NET_PREFIX "datd-t"        /* every namespace name starts so */
#define TEST_NET_IFNAME "net0"          /* a host's interface on the segment */

struct test_net;

/* Whether this process can create test nets: root, `ip` with netns and veth
 * and bridge support, IPv6.  Probes once per process by creating and deleting
 * a throw-away namespace.  On false, *why (if why is not NULL) is a static
 * reason for cr_skip_test().  If `ip` is only found in /usr/sbin or /sbin,
 * that directory is added to PATH (datd_start() runs "ip netns exec"). */
bool test_net_available(const char **why);

/* Creates n_hosts (1..TEST_NET_MAX_HOSTS) hosts on one segment, every link
 * up, and returns when they can reach each other: IPv4 at once, IPv6 without
 * duplicate address detection (nodad).  First removes what crashed or killed
 * earlier runs left behind (test_net_cleanup_stale()).  On failure nothing
 * it made is left and *ret is NULL. */
int test_net_create(struct test_net **ret, unsigned n_hosts);

/* Kills (SIGKILL, by PID and process group) and reaps what test_net_spawn()
 * started and is not yet reaped, deletes the namespaces (which deletes the
 * links) and frees the net; sets *net to NULL.  Safe on NULL and *net NULL,
 * so safe to call twice, and on a half-built net.  It kills nothing else: a
 * process the caller started in a host (a datd) must be stopped before, or
 * the namespace lives on, nameless, until that process exits (a warning on
 * stderr names it). */
void test_net_destroy(struct test_net **net);

/* Deletes the namespaces named TEST_NET_PREFIX<pid>-... whose creator is gone
 * (no such process, or a zombie), and those of this very PID that no live
 * test_net of this process owns (the PID was reused).  Namespaces of live
 * creators are left alone.  Returns how many were deleted. */
int test_net_cleanup_stale(void);

unsigned test_net_n_hosts(const struct test_net *net);
/* The name under /run/netns: for datd_instance.netns and "ip netns exec". */
const char *test_net_host_ns(const struct test_net *net, unsigned host);
const char *test_net_hub_ns(const struct test_net *net);
/* Numeric addresses without prefix length, e.g. "10.213.7.2", "fd00:da7d:7::2". */
const char *test_net_host_addr4(const struct test_net *net, unsigned host);
const char *test_net_host_addr6(const struct test_net *net, unsigned host);

/* Cuts / restores the host's cable: sets the hub's end of its veth pair down
 * or up.  The host keeps its interface, addresses and routes (it sees
 * NO-CARRIER), so nothing fails at once: packets are dropped and peers see
 * timeouts, as with a real cable pulled; after link up, TCP's retransmissions
 * get through again.  The other hosts keep talking to each other. */
int test_net_link_down(struct test_net *net, unsigned host);
int test_net_link_up(struct test_net *net, unsigned host);

/* Runs argv (argv[0] a name looked up in PATH, or a path) inside the host
 * through "ip netns exec", with run_capture()'s time bound and capture.
 * Returns what run_capture() returns. */
int test_net_run_in(struct test_net *net, unsigned host, char *const argv[], char **out,
                    int timeout_ms);

/* Same, for a libdat client of datd d (NULL: none): the child gets
 * DATD_SOCKET, DAT_OVERRIDE and DATD_BUS_ADDRESS of d (datd_export_env()). */
int test_net_run_client(struct test_net *net, unsigned host, const struct datd_instance *d,
                        char *const argv[], char **out, int timeout_ms);

/* Starts argv in the host without waiting: fork, setns, own process group,
 * SIGKILL when this process dies, stdin /dev/null, stdout and stderr
 * inherited; with d's environment if d is not NULL.  Returns the PID or
 * -errno.  The net remembers it: test_net_wait() reaps it, test_net_destroy()
 * kills it if nobody did. */
pid_t test_net_spawn(struct test_net *net, unsigned host, const struct datd_instance *d,
                     char *const argv[]);

/* Waits up to timeout_ms for a test_net_spawn() child.  Returns its exit
 * status, 128+signal, or -1 if it had to be killed (with its process group)
 * for running past the bound; -ECHILD if pid is not one of the net's. */
int test_net_wait(struct test_net *net, pid_t pid, int timeout_ms);

/* Moves the calling thread into the host's network namespace (setns).  For
 * a forked child that is about to act as a client on that host; the caller's
 * other threads stay where they are. */
int test_net_enter(struct test_net *net, unsigned host);

/* socket(2) made inside the host, without moving the caller: the calling
 * thread enters the host's namespace, makes the socket and returns to its
 * own namespace.  A socket belongs for good to the namespace it was made in,
 * so one test thread can play a client or server on any host.  Returns the
 * fd (with SOCK_CLOEXEC added) or -errno. */
int test_net_socket(struct test_net *net, unsigned host, int domain, int type, int protocol);

/* A datd.conf for the host: log_level debug, the "shm" IA on 127.0.0.1 and
 * the "tcp" IA on the host's IPv4 address (its IPv6 address if ipv6), no
 * verbs, private bus.  malloc'd. */
char *test_net_datd_config(const struct test_net *net, unsigned host, bool ipv6);

/* datd_start() of d in the host with test_net_datd_config(net, host, false). */
int test_net_datd_start(struct test_net *net, unsigned host, struct datd_instance *d);

#endif
