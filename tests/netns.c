/* Multi-host test nets: network namespaces joined by a bridge, made and
 * unmade with iproute2's `ip` (bounded through run_capture()), entered with
 * setns(2).  See tests/netns.h for the layout and the rules. */
#include "tests/netns.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/harness.h"

#define NETNS_DIR "/run/netns"
#define IP_TIMEOUT_MS 5000
/* Links come up asynchronously (the kernel's link watch sets carrier and
 * the bridge port state a moment after "ip link set up" returns). */
#define SETTLE_TIMEOUT_MS 5000
#define MAX_CHILDREN 64
#define NS_NAME_MAX 64

struct test_host {
        char ns[NS_NAME_MAX];           /* <prefix>-a */
        char port[16];                  /* port-a: the hub's end of the host's cable */
        char addr4[INET_ADDRSTRLEN];
        char addr6[INET6_ADDRSTRLEN];
        bool made;                      /* the namespace exists and is ours to delete */
        int ns_fd;                      /* /run/netns/<ns>, for setns() */
};

struct test_net {
        pid_t owner;                    /* the creating process: only it deletes */
        unsigned seq;
        unsigned run;                   /* the third octet / the IPv6 subnet id */
        unsigned n_hosts;
        char prefix[NS_NAME_MAX - 8];   /* datd-t<pid>-<seq> */
        char hub[NS_NAME_MAX];          /* <prefix>-hub */
        bool hub_made;
        struct test_host hosts[TEST_NET_MAX_HOSTS];
        pid_t children[MAX_CHILDREN];   /* test_net_spawn()ed, not yet reaped; 0 = free */
        struct test_net *next;          /* this process's live nets */
};

/* The nets this process owns now: a namespace named after this PID whose
 * seq is not here belongs to an earlier process that had the same PID. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct test_net *live_nets;
static unsigned next_seq;

static void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static bool is_executable(const char *path)
{
        return access(path, X_OK) == 0;
}

/* Finds `ip` in PATH; else in the sbin directories, which are then added to
 * PATH because datd_start() execs "ip netns exec" by name. */
static const char *ip_path(void)
{
        static char found[PATH_MAX];
        static const char *const fallback[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin" };
        const char *path = getenv("PATH");

        if (found[0])
                return found;
        if (path) {
                _cleanup_free_ char *copy = strdup(path);
                char *save = NULL;

                for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir;
                     dir = strtok_r(NULL, ":", &save)) {
                        snprintf(found, sizeof(found), "%s/ip", *dir ? dir : ".");
                        if (is_executable(found))
                                return found;
                }
        }
        for (size_t i = 0; i < ARRAY_SIZE(fallback); i++) {
                snprintf(found, sizeof(found), "%s/ip", fallback[i]);
                if (is_executable(found)) {
                        _cleanup_free_ char *new_path = NULL;

                        if (asprintf(&new_path, "%s%s%s", fallback[i], path && *path ? ":" : "",
                                     path ? path : "") >= 0)
                                setenv("PATH", new_path, 1);
                        return found;
                }
        }
        found[0] = '\0';
        return NULL;
}

/* Runs `ip ARGS...` (NULL-terminated).  quiet: a failure is expected by the
 * caller and not worth a message.  Returns 0, or -EIO with ip's words on
 * stderr. */
__attribute__((sentinel))
static int ip_quiet_or_not(bool quiet, char **output, ...)
{
        const char *argv[32];
        const char *ip_bin = ip_path();
        _cleanup_free_ char *out = NULL;
        size_t n = 0;
        va_list ap;
        int r;

        if (!ip_bin)
                return -ENOENT;
        argv[n++] = ip_bin;
        va_start(ap, output);
        for (const char *a; (a = va_arg(ap, const char *)) && n < ARRAY_SIZE(argv) - 1;)
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;

        r = run_capture((char *const *)argv, &out, IP_TIMEOUT_MS);
        if (r != 0 && !quiet) {
                fprintf(stderr, "test_net: \"ip");
                for (size_t i = 1; i < n; i++)
                        fprintf(stderr, " %s", argv[i]);
                fprintf(stderr, "\" failed (%d): %s", r, out ? out : "(no output)\n");
        }
        if (output)
                *output = TAKE_PTR(out);
        return r == 0 ? 0 : -EIO;
}

#define ip(...) ip_quiet_or_not(false, NULL, __VA_ARGS__, NULL)
#define ip_quiet(...) ip_quiet_or_not(true, NULL, __VA_ARGS__, NULL)
#define ip_output(out, ...) ip_quiet_or_not(false, out, __VA_ARGS__, NULL)

static bool ns_exists(const char *name)
{
        char path[sizeof(NETNS_DIR) + NS_NAME_MAX];

        snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
        return access(path, F_OK) == 0;
}

/* Deletes a namespace by name; gone already counts as done. */
static int ns_delete(const char *name)
{
        if (ip_quiet("netns", "delete", name) == 0 || !ns_exists(name))
                return 0;
        fprintf(stderr, "test_net: cannot delete namespace %s\n", name);
        return -EIO;
}

/* Dead, or a zombie nobody reaped yet: either way it will not clean up. */
static bool process_gone(pid_t pid)
{
        char path[64], state;

        if (kill(pid, 0) < 0 && errno == ESRCH)
                return true;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        state = proc_stat_state(path);
        if (!state)
                return errno == ENOENT;
        return state == 'Z' || state == 'X';
}

/* Parses "datd-t<pid>-<seq>-<rest>"; false for any other name, which is
 * never touched. */
static bool parse_ns_name(const char *name, pid_t *pid, unsigned *seq)
{
        const char *p = name + strlen(TEST_NET_PREFIX);
        char *end;
        unsigned long v;

        if (strncmp(name, TEST_NET_PREFIX, strlen(TEST_NET_PREFIX)) != 0 || !isdigit((unsigned char)*p))
                return false;
        errno = 0;
        v = strtoul(p, &end, 10);
        if (errno || *end != '-' || v == 0 || v > INT32_MAX)
                return false;
        *pid = (pid_t)v;
        p = end + 1;
        if (!isdigit((unsigned char)*p))
                return false;
        v = strtoul(p, &end, 10);
        if (errno || *end != '-' || v > UINT32_MAX)
                return false;
        *seq = (unsigned)v;
        return true;
}

static bool seq_is_live(unsigned seq)
{
        bool live = false;

        pthread_mutex_lock(&live_lock);
        for (struct test_net *n = live_nets; n; n = n->next)
                if (n->seq == seq && n->owner == getpid())
                        live = true;
        pthread_mutex_unlock(&live_lock);
        return live;
}

int test_net_cleanup_stale(void)
{
        _cleanup_(closedirp) DIR *dir = NULL;
        struct dirent *de;
        int removed = 0;

        dir = opendir(NETNS_DIR);
        if (!dir)
                return 0;
        while ((de = readdir(dir))) {
                pid_t pid;
                unsigned seq;
                bool stale;

                if (!parse_ns_name(de->d_name, &pid, &seq))
                        continue;
                if (pid == getpid())
                        stale = !seq_is_live(seq);
                else
                        stale = process_gone(pid);
                if (!stale)
                        continue;
                fprintf(stderr, "test_net: removing stale namespace %s (its creator %d is gone)\n",
                        de->d_name, (int)pid);
                if (ns_delete(de->d_name) == 0)
                        removed++;
        }
        return removed;
}

static void net_register(struct test_net *net)
{
        pthread_mutex_lock(&live_lock);
        net->seq = next_seq++;
        net->next = live_nets;
        live_nets = net;
        pthread_mutex_unlock(&live_lock);
}

static void net_unregister(struct test_net *net)
{
        pthread_mutex_lock(&live_lock);
        for (struct test_net **p = &live_nets; *p; p = &(*p)->next)
                if (*p == net) {
                        *p = net->next;
                        break;
                }
        pthread_mutex_unlock(&live_lock);
}

static struct test_net *net_new(unsigned n_hosts)
{
        struct test_net *net = calloc(1, sizeof(*net));

        if (!net)
                return NULL;
        net->owner = getpid();
        net->n_hosts = n_hosts;
        net_register(net);
        snprintf(net->prefix, sizeof(net->prefix), TEST_NET_PREFIX "%d-%u", (int)net->owner, net->seq);
        snprintf(net->hub, sizeof(net->hub), "%s-hub", net->prefix);
        /* Any value works (every net is its own world); varying it keeps
         * the logs of concurrent runs apart. */
        net->run = 1 + ((unsigned)net->owner * 7 + net->seq) % 254;
        for (unsigned i = 0; i < TEST_NET_MAX_HOSTS; i++) {
                struct test_host *h = &net->hosts[i];

                h->ns_fd = -1;
                snprintf(h->ns, sizeof(h->ns), "%s-%c", net->prefix, 'a' + i);
                snprintf(h->port, sizeof(h->port), "port-%c", 'a' + i);
                snprintf(h->addr4, sizeof(h->addr4), "10.213.%u.%u", net->run, i + 1);
                snprintf(h->addr6, sizeof(h->addr6), "fd00:da7d:%x::%x", net->run, i + 1);
        }
        return net;
}

/* Waits up to timeout_ms for a child to end, sleeping on its pidfd rather
 * than polling; 0 and *status, or -1. */
static int wait_bounded(pid_t pid, int timeout_ms, int *status)
{
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        long long deadline = now_ms() + timeout_ms;

        for (;;) {
                struct pollfd p = { .fd = pidfd, .events = POLLIN };
                long long left = deadline - now_ms();

                if (waitpid(pid, status, WNOHANG) == pid)
                        return 0;
                if (left <= 0)
                        return -1;
                /* Without pidfds (before Linux 5.3): look again in 5 ms. */
                if (pidfd < 0)
                        sleep_ms(left < 5 ? (int)left : 5);
                else if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
                        return -1;
        }
}

static void kill_child(pid_t pid)
{
        int status;

        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
}

/* Names the processes that still run in a namespace about to be deleted:
 * they keep it (and its links) alive after its name is gone. */
static void warn_lingering(const char *ns)
{
        char path[sizeof(NETNS_DIR) + NS_NAME_MAX];
        _cleanup_(closedirp) DIR *proc = NULL;
        struct stat ns_st;
        struct dirent *de;

        snprintf(path, sizeof(path), NETNS_DIR "/%s", ns);
        if (stat(path, &ns_st) < 0)
                return;
        proc = opendir("/proc");
        if (!proc)
                return;
        while ((de = readdir(proc))) {
                char p[300];
                _cleanup_free_ char *comm = NULL;
                struct stat st;

                if (!isdigit((unsigned char)de->d_name[0]))
                        continue;
                snprintf(p, sizeof(p), "/proc/%s/ns/net", de->d_name);
                if (stat(p, &st) < 0 || st.st_ino != ns_st.st_ino || st.st_dev != ns_st.st_dev)
                        continue;
                snprintf(p, sizeof(p), "/proc/%s/comm", de->d_name);
                comm = read_file_str(p);
                if (comm)
                        comm[strcspn(comm, "\n")] = '\0';
                fprintf(stderr, "test_net: PID %s (%s) still runs in %s: stop it before "
                        "test_net_destroy(), the namespace lives on until it exits\n",
                        de->d_name, comm ? comm : "?", ns);
        }
}

void test_net_destroy(struct test_net **netp)
{
        struct test_net *net = netp ? *netp : NULL;

        if (!net)
                return;
        *netp = NULL;
        net_unregister(net);
        for (unsigned i = 0; i < TEST_NET_MAX_HOSTS; i++)
                if (net->hosts[i].ns_fd >= 0)
                        close(net->hosts[i].ns_fd);
        /* A forked child holding a copy of the parent's net must not tear
         * down what the parent still uses. */
        if (net->owner == getpid()) {
                for (size_t i = 0; i < MAX_CHILDREN; i++)
                        if (net->children[i] > 0)
                                kill_child(net->children[i]);
                for (unsigned i = 0; i < net->n_hosts; i++) {
                        struct test_host *h = &net->hosts[i];

                        if (!h->made)
                                continue;
                        warn_lingering(h->ns);
                        ns_delete(h->ns);
                }
                if (net->hub_made) {
                        warn_lingering(net->hub);
                        ns_delete(net->hub);
                }
        }
        free(net);
}

static int ns_add(const char *name, bool *made)
{
        int r = ip("netns", "add", name);

        if (r == 0)
                *made = true;
        return r;
}

/* Counts the hub's ports that forward; ports NULL: all, else that one. */
static int ports_forwarding(struct test_net *net, const char *port)
{
        _cleanup_free_ char *out = NULL;
        int count = 0;

        if (ip_output(&out, "-n", net->hub, "-d", "-o", "link", "show", "master", "br0") < 0)
                return -EIO;
        for (char *line = out, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (!strstr(line, "bridge_slave state forwarding"))
                        continue;
                if (port) {
                        char name[24];

                        /* "<index>: <name>@<peer>: <...>" */
                        snprintf(name, sizeof(name), " %s@", port);
                        if (!strstr(line, name))
                                continue;
                }
                count++;
        }
        return count;
}

/* An IPv6 address can be bound once it is no longer tentative, which needs
 * the carrier the kernel's link watch reports a moment after link up. */
static bool addr6_usable(struct test_net *net, unsigned host)
{
        struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
        _cleanup_close_ int fd = test_net_socket(net, host, AF_INET6, SOCK_STREAM, 0);

        if (fd < 0 || inet_pton(AF_INET6, net->hosts[host].addr6, &sa.sin6_addr) != 1)
                return false;
        return bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

/* Waits until the port(s) forward and the IPv6 address(es) are usable. */
static int settle(struct test_net *net, int only_host)
{
        long long deadline = now_ms() + SETTLE_TIMEOUT_MS;

        for (;;) {
                bool ready;

                if (only_host >= 0)
                        ready = ports_forwarding(net, net->hosts[only_host].port) == 1 &&
                                addr6_usable(net, (unsigned)only_host);
                else {
                        ready = ports_forwarding(net, NULL) == (int)net->n_hosts;
                        for (unsigned i = 0; ready && i < net->n_hosts; i++)
                                ready = addr6_usable(net, i);
                }
                if (ready)
                        return 0;
                if (now_ms() >= deadline) {
                        fprintf(stderr, "test_net: %s: links did not come up within %d ms\n",
                                net->prefix, SETTLE_TIMEOUT_MS);
                        return -ETIMEDOUT;
                }
                sleep_ms(5);
        }
}

static int host_add(struct test_net *net, unsigned i)
{
        struct test_host *h = &net->hosts[i];
        char a4[INET_ADDRSTRLEN + 4], a6[INET6_ADDRSTRLEN + 4];
        char path[sizeof(NETNS_DIR) + NS_NAME_MAX];
        int r;

        snprintf(a4, sizeof(a4), "%s/24", h->addr4);
        snprintf(a6, sizeof(a6), "%s/64", h->addr6);
        r = ns_add(h->ns, &h->made);
        if (r < 0)
                return r;
        /* Both ends are made in place: nothing ever appears in the caller's
         * namespace, so nothing there can be left behind. */
        if ((r = ip("-n", net->hub, "link", "add", h->port, "type", "veth",
                    "peer", "name", TEST_NET_IFNAME, "netns", h->ns)) < 0 ||
            (r = ip("-n", net->hub, "link", "set", h->port, "master", "br0", "up")) < 0 ||
            (r = ip("-n", h->ns, "link", "set", "lo", "up")) < 0 ||
            (r = ip("-n", h->ns, "address", "add", a4, "dev", TEST_NET_IFNAME)) < 0 ||
            (r = ip("-n", h->ns, "address", "add", a6, "dev", TEST_NET_IFNAME, "nodad")) < 0 ||
            (r = ip("-n", h->ns, "link", "set", TEST_NET_IFNAME, "up")) < 0)
                return r;
        snprintf(path, sizeof(path), NETNS_DIR "/%s", h->ns);
        h->ns_fd = open(path, O_RDONLY | O_CLOEXEC);
        return h->ns_fd < 0 ? -errno : 0;
}

int test_net_create(struct test_net **ret, unsigned n_hosts)
{
        struct test_net *net;
        int r;

        *ret = NULL;
        if (n_hosts == 0 || n_hosts > TEST_NET_MAX_HOSTS)
                return -EINVAL;
        if (!ip_path()) {
                fprintf(stderr, "test_net: no \"ip\" program (iproute2)\n");
                return -ENOENT;
        }
        test_net_cleanup_stale();
        net = net_new(n_hosts);
        if (!net)
                return -ENOMEM;

        if ((r = ns_add(net->hub, &net->hub_made)) < 0 ||
            /* No STP and no multicast snooping: ports forward at once and
             * IPv6 neighbour discovery is flooded like on a dumb hub. */
            (r = ip("-n", net->hub, "link", "add", "br0", "type", "bridge",
                    "stp_state", "0", "mcast_snooping", "0")) < 0 ||
            (r = ip("-n", net->hub, "link", "set", "br0", "up")) < 0)
                goto fail;
        for (unsigned i = 0; i < n_hosts; i++)
                if ((r = host_add(net, i)) < 0)
                        goto fail;
        r = settle(net, -1);
        if (r < 0)
                goto fail;
        *ret = net;
        return 0;
fail:
        test_net_destroy(&net);
        return r;
}

bool test_net_available(const char **why)
{
        static int cached = -1;         /* -1 unknown, 0 no, 1 yes */
        static const char *reason;
        struct test_net *probe = NULL;

        if (cached >= 0)
                goto out;
        cached = 0;
        if (geteuid() != 0) {
                reason = "multi-host tests need root (network namespaces)";
                goto out;
        }
        if (!ip_path()) {
                reason = "multi-host tests need iproute2's \"ip\"";
                goto out;
        }
        if (access("/proc/net/if_inet6", F_OK) < 0) {
                reason = "multi-host tests need IPv6";
                goto out;
        }
        /* A namespace with a bridge and a veth pair in it: what create uses. */
        test_net_cleanup_stale();
        probe = net_new(0);
        if (!probe) {
                reason = "out of memory";
                goto out;
        }
        if (ns_add(probe->hub, &probe->hub_made) < 0) {
                reason = "cannot create a network namespace (ip netns add)";
        } else if (ip("-n", probe->hub, "link", "add", "br0", "type", "bridge") < 0) {
                reason = "cannot create a bridge in a network namespace";
        } else if (ip("-n", probe->hub, "link", "add", "port-a", "type", "veth",
                      "peer", "name", TEST_NET_IFNAME) < 0) {
                reason = "cannot create a veth pair in a network namespace";
        } else {
                cached = 1;
        }
        test_net_destroy(&probe);
out:
        if (why)
                *why = reason;
        return cached == 1;
}

static struct test_host *host_of(const struct test_net *net, unsigned host)
{
        if (!net || host >= net->n_hosts)
                return NULL;
        return (struct test_host *)&net->hosts[host];
}

unsigned test_net_n_hosts(const struct test_net *net)
{
        return net ? net->n_hosts : 0;
}

const char *test_net_host_ns(const struct test_net *net, unsigned host)
{
        struct test_host *h = host_of(net, host);

        return h ? h->ns : NULL;
}

const char *test_net_hub_ns(const struct test_net *net)
{
        return net ? net->hub : NULL;
}

const char *test_net_host_addr4(const struct test_net *net, unsigned host)
{
        struct test_host *h = host_of(net, host);

        return h ? h->addr4 : NULL;
}

const char *test_net_host_addr6(const struct test_net *net, unsigned host)
{
        struct test_host *h = host_of(net, host);

        return h ? h->addr6 : NULL;
}

int test_net_link_down(struct test_net *net, unsigned host)
{
        struct test_host *h = host_of(net, host);

        if (!h)
                return -EINVAL;
        /* Synchronous: once ip returns, the port is down and the host's
         * frames are dropped by the veth. */
        return ip("-n", net->hub, "link", "set", h->port, "down");
}

int test_net_link_up(struct test_net *net, unsigned host)
{
        struct test_host *h = host_of(net, host);
        int r;

        if (!h)
                return -EINVAL;
        r = ip("-n", net->hub, "link", "set", h->port, "up");
        return r < 0 ? r : settle(net, (int)host);
}

/* argv with "ip netns exec NS [env VAR=...]" in front; NULL on ENOMEM. */
static char **exec_argv(struct test_net *net, unsigned host, const struct datd_instance *d,
                        char *const argv[], char env[3][PATH_MAX + 64])
{
        size_t n = 0, argc = 0;
        char **v;

        while (argv[argc])
                argc++;
        v = calloc(argc + 9, sizeof(*v));
        if (!v)
                return NULL;
        v[n++] = (char *)ip_path();
        v[n++] = (char *)"netns";
        v[n++] = (char *)"exec";
        v[n++] = net->hosts[host].ns;
        if (d) {
                snprintf(env[0], PATH_MAX + 64, "DATD_SOCKET=%s", d->socket_path);
                snprintf(env[1], PATH_MAX + 64, "DAT_OVERRIDE=%s", d->dat_conf_path);
                snprintf(env[2], PATH_MAX + 64, "DATD_BUS_ADDRESS=%s", d->bus_address);
                v[n++] = (char *)"env";
                for (size_t i = 0; i < 3; i++)
                        v[n++] = env[i];
        }
        for (size_t i = 0; i < argc; i++)
                v[n++] = argv[i];
        v[n] = NULL;
        return v;
}

int test_net_run_client(struct test_net *net, unsigned host, const struct datd_instance *d,
                        char *const argv[], char **out, int timeout_ms)
{
        char env[3][PATH_MAX + 64];
        _cleanup_free_ char **v = NULL;

        if (out)
                *out = NULL;
        if (!host_of(net, host) || !argv || !argv[0] || !ip_path())
                return -1;
        v = exec_argv(net, host, d, argv, env);
        if (!v)
                return -1;
        return run_capture(v, out, timeout_ms);
}

int test_net_run_in(struct test_net *net, unsigned host, char *const argv[], char **out,
                    int timeout_ms)
{
        return test_net_run_client(net, host, NULL, argv, out, timeout_ms);
}

int test_net_enter(struct test_net *net, unsigned host)
{
        struct test_host *h = host_of(net, host);

        if (!h || h->ns_fd < 0)
                return -EINVAL;
        return setns(h->ns_fd, CLONE_NEWNET) < 0 ? -errno : 0;
}

int test_net_socket(struct test_net *net, unsigned host, int domain, int type, int protocol)
{
        _cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        int fd, r;

        if (self < 0)
                return -errno;
        r = test_net_enter(net, host);
        if (r < 0)
                return r;
        fd = socket(domain, type | SOCK_CLOEXEC, protocol);
        r = fd < 0 ? -errno : fd;
        if (setns(self, CLONE_NEWNET) < 0) {
                /* The thread would go on in the wrong host: every later
                 * result would be a lie. */
                fprintf(stderr, "test_net: cannot return to own namespace: %m\n");
                abort();
        }
        return r;
}

pid_t test_net_spawn(struct test_net *net, unsigned host, const struct datd_instance *d,
                     char *const argv[])
{
        struct test_host *h = host_of(net, host);
        pid_t parent = getpid(), pid;
        size_t slot;

        if (!h || h->ns_fd < 0 || !argv || !argv[0])
                return -EINVAL;
        for (slot = 0; slot < MAX_CHILDREN && net->children[slot] > 0; slot++)
                ;
        if (slot == MAX_CHILDREN)
                return -EMFILE;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDONLY);

                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(127);
                if (devnull >= 0)
                        dup2(devnull, STDIN_FILENO);
                if (setns(h->ns_fd, CLONE_NEWNET) < 0) {
                        fprintf(stderr, "test_net: cannot enter %s: %m\n", h->ns);
                        _exit(127);
                }
                if (d)
                        datd_export_env(d);
                execvp(argv[0], argv);
                fprintf(stderr, "test_net: cannot exec %s: %m\n", argv[0]);
                _exit(127);
        }
        /* Also from the parent: kill(-pid) must find the group at once. */
        setpgid(pid, pid);
        net->children[slot] = pid;
        return pid;
}

int test_net_wait(struct test_net *net, pid_t pid, int timeout_ms)
{
        size_t slot;
        int status;

        if (!net || pid <= 0)
                return -ECHILD;
        for (slot = 0; slot < MAX_CHILDREN && net->children[slot] != pid; slot++)
                ;
        if (slot == MAX_CHILDREN)
                return -ECHILD;
        net->children[slot] = 0;
        if (wait_bounded(pid, timeout_ms, &status) < 0) {
                fprintf(stderr, "test_net: PID %d ran past %d ms, killed\n", (int)pid, timeout_ms);
                kill_child(pid);
                return -1;
        }
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + WTERMSIG(status);
}

char *test_net_datd_config(const struct test_net *net, unsigned host, bool ipv6)
{
        struct test_host *h = host_of(net, host);
        char *json;

        if (!h)
                return NULL;
        if (asprintf(&json,
                     "{\n"
                     "  \"log_level\": \"debug\",\n"
                     "  \"ias\": [\n"
                     "    {\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"},\n"
                     "    {\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"%s\"}\n"
                     "  ],\n"
                     "  \"verbs\": false\n"
                     "}\n", ipv6 ? h->addr6 : h->addr4) < 0)
                return NULL;
        return json;
}

int test_net_datd_start(struct test_net *net, unsigned host, struct datd_instance *d)
{
        _cleanup_free_ char *config = test_net_datd_config(net, host, false);

        if (!config)
                return host_of(net, host) ? -ENOMEM : -EINVAL;
        d->netns = net->hosts[host].ns;
        return datd_start(d, config);
}
