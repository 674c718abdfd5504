/* Connection rate through datd, over the public DAT API only.  One
 * connection is: dat_ep_connect with 64 bytes of private data ->
 * DAT_CONNECTION_EVENT_ESTABLISHED on both sides (the accept carries 64
 * bytes back) -> graceful dat_ep_disconnect -> DISCONNECTED on both sides.
 * The time of one connection is the client's, from dat_ep_connect to its
 * ESTABLISHED; the rate is connections per second of wall time with all
 * clients running.
 *
 * Modes:
 *   conn_rate [-i IA] [-c N] [-n CONNS]   same host: forks a server and N
 *                                         client processes on the IA of the
 *                                         datd libdat is pointed at
 *   conn_rate -s [-i IA] [-q QUAL]        server only (another host's
 *                                         clients), until killed
 *   conn_rate -h ADDR [-i IA] [-q QUAL] [-c N] [-n CONNS]
 *                                         clients only, to a server at ADDR
 *                                         (the IPv4/IPv6 address its
 *                                         dat_ia_query reports, printed by -s)
 * mode=seq with one client, mode=conc with more.  One line on stdout:
 *   name=conn_rate mode=… transport=… clients=N conns=… per_sec=… mean_us=… p99_us=…
 *
 * Clients are processes (each its own IA, its own control connection to
 * datd), started together behind a pipe; their samples go to a shared
 * mapping.  Benchmarks assert nothing; make check never runs this. */
#include <arpa/inet.h>
#include <dat2/udat.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/common/stats.h"

#define PD_LEN 64
#define EVENT_WAIT_US (10 * 1000 * 1000)
#define MAX_CLIENTS 256
#define DEFAULT_QUAL 4791

struct options {
        const char *ia_name;
        const char *server_addr;        /* -h */
        bool server_only;               /* -s */
        DAT_CONN_QUAL qual;
        unsigned clients;
        unsigned conns;
};

/* One IA and the two EVDs a side needs: one EVD takes both the
 * connection requests and the connection events, so one wait serves all. */
struct side {
        DAT_IA_HANDLE ia;
        DAT_EVD_HANDLE async_evd;
        DAT_PZ_HANDLE pz;
        DAT_EVD_HANDLE evd;
        struct sockaddr_storage address;
};

#define CHECK(call)                                                                        \
        do {                                                                               \
                DAT_RETURN r_ = (call);                                                    \
                if (r_ != DAT_SUCCESS)                                                     \
                        bench_die("%s:%d: %s: 0x%08x\n", __FILE__, __LINE__, #call, r_);   \
        } while (0)

static void side_open(struct side *s, const char *ia_name, DAT_COUNT qlen)
{
        DAT_IA_ATTR attr;
        char name[DAT_NAME_MAX_LENGTH];

        snprintf(name, sizeof(name), "%s", ia_name);
        s->async_evd = DAT_HANDLE_NULL;
        CHECK(dat_ia_open(name, 16, &s->async_evd, &s->ia));
        CHECK(dat_pz_create(s->ia, &s->pz));
        CHECK(dat_evd_create(s->ia, qlen, DAT_HANDLE_NULL,
                             DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG, &s->evd));
        CHECK(dat_ia_query(s->ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL));
        memcpy(&s->address, attr.ia_address_ptr,
               attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                          : sizeof(struct sockaddr_in));
}

static DAT_EVENT wait_event(DAT_EVD_HANDLE evd)
{
        DAT_EVENT ev;
        DAT_COUNT n;

        CHECK(dat_evd_wait(evd, EVENT_WAIT_US, 1, &ev, &n));
        return ev;
}

static void print_address(const char *what, const struct sockaddr_storage *ss, DAT_CONN_QUAL q)
{
        char buf[INET6_ADDRSTRLEN] = "?";
        const void *a = ss->ss_family == AF_INET6
                ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
                : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;

        inet_ntop(ss->ss_family, a, buf, sizeof(buf));
        fprintf(stderr, "# %s %s conn_qual %llu\n", what, buf, (unsigned long long)q);
}

/* A child that runs fn(arg), exits with its result and dies with its
 * parent (bench_spawn pins to one CPU; the clients here must not share
 * one). */
static pid_t spawn(int (*fn)(void *arg), void *arg)
{
        pid_t parent = getpid(), pid;

        fflush(NULL);
        pid = fork();
        if (pid < 0)
                bench_die("fork: %s\n", strerror(errno));
        if (pid > 0)
                return pid;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(1);
        _exit(fn(arg));
}

/* ---- server ------------------------------------------------------------
 * Accepts every request on a fresh EP with 64 bytes back, frees the EP once
 * it is disconnected.  Counts passive ESTABLISHED events; stops after
 * `expect` of them have been disconnected (0: never). */
static int serve(const struct options *o, unsigned expect, int ready_fd)
{
        unsigned char back[PD_LEN];
        unsigned established = 0, gone = 0;
        DAT_PSP_HANDLE psp;
        struct side s;

        memset(back, 0xb5, sizeof(back));
        side_open(&s, o->ia_name, 4 * MAX_CLIENTS);
        CHECK(dat_psp_create(s.ia, o->qual, s.evd, DAT_PSP_CONSUMER_FLAG, &psp));
        print_address("server listening on", &s.address, o->qual);
        if (ready_fd >= 0) {
                if (write(ready_fd, &s.address, sizeof(s.address)) != sizeof(s.address))
                        bench_die("server: cannot report its address: %s\n", strerror(errno));
                close(ready_fd);
        }
        while (expect == 0 || gone < expect) {
                DAT_EVENT ev = wait_event(s.evd);
                DAT_CR_HANDLE cr;
                DAT_CR_PARAM param;
                DAT_EP_HANDLE ep;

                switch (ev.event_number) {
                case DAT_CONNECTION_REQUEST_EVENT:
                        cr = ev.event_data.cr_arrival_event_data.cr_handle;
                        CHECK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param));
                        if (param.private_data_size != PD_LEN)
                                bench_die("server: request with %d bytes of private data\n",
                                          param.private_data_size);
                        CHECK(dat_ep_create(s.ia, s.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, s.evd,
                                            NULL, &ep));
                        CHECK(dat_cr_accept(cr, ep, PD_LEN, back));
                        break;
                case DAT_CONNECTION_EVENT_ESTABLISHED:
                        established++;
                        break;
                case DAT_CONNECTION_EVENT_DISCONNECTED:
                case DAT_CONNECTION_EVENT_BROKEN:
                        CHECK(dat_ep_free(ev.event_data.connect_event_data.ep_handle));
                        gone++;
                        break;
                default:
                        bench_die("server: unexpected event 0x%x\n", ev.event_number);
                }
        }
        if (established != gone)
                bench_die("server: %u established, %u disconnected\n", established, gone);
        CHECK(dat_psp_free(psp));
        CHECK(dat_ia_close(s.ia, DAT_CLOSE_ABRUPT_FLAG));
        return 0;
}

/* ---- clients ----------------------------------------------------------- */
struct client_job {
        const struct options *o;
        struct sockaddr_storage server;
        unsigned conns;
        uint64_t *ns;                   /* conns samples, in the shared mapping */
        int go_fd;                      /* readable (EOF) when all may start */
        int go_write_fd;                /* the other end: closed at once */
};

static uint64_t connect_once(const struct side *s, DAT_EP_HANDLE ep, const struct client_job *j)
{
        unsigned char out[PD_LEN];
        uint64_t t0, t1;
        DAT_EVENT ev;

        memset(out, 0x5a, sizeof(out));
        t0 = bench_now_ns();
        CHECK(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&j->server, j->o->qual, EVENT_WAIT_US, PD_LEN,
                             out, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
        ev = wait_event(s->evd);
        t1 = bench_now_ns();
        if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
                bench_die("client: event 0x%x instead of ESTABLISHED\n", ev.event_number);
        if (ev.event_data.connect_event_data.private_data_size != PD_LEN)
                bench_die("client: ESTABLISHED with %d bytes of private data\n",
                          ev.event_data.connect_event_data.private_data_size);
        CHECK(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG));
        ev = wait_event(s->evd);
        if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
                bench_die("client: event 0x%x instead of DISCONNECTED\n", ev.event_number);
        CHECK(dat_ep_reset(ep));
        return t1 - t0;
}

static int client_main(void *arg)
{
        const struct client_job *j = arg;
        DAT_EP_HANDLE ep;
        struct side s;
        char c;

        close(j->go_write_fd);
        side_open(&s, j->o->ia_name, 8);
        CHECK(dat_ep_create(s.ia, s.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, s.evd, NULL, &ep));
        while (read(j->go_fd, &c, 1) < 0 && errno == EINTR)
                ;
        for (unsigned i = 0; i < j->conns; i++)
                j->ns[i] = connect_once(&s, ep, j);
        CHECK(dat_ep_free(ep));
        CHECK(dat_ia_close(s.ia, DAT_CLOSE_ABRUPT_FLAG));
        return 0;
}

/* Runs o->clients client processes, o->conns connections in all, and
 * prints the result. */
static int run_clients(const struct options *o, const struct sockaddr_storage *server,
                       const char *transport)
{
        pid_t pid[MAX_CLIENTS];
        struct client_job job[MAX_CLIENTS];
        struct samples all;
        struct summary sum;
        uint64_t *shared, t0, elapsed;
        unsigned done = 0;
        int go[2], failed = 0;

        shared = mmap(NULL, sizeof(uint64_t) * o->conns, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (shared == MAP_FAILED || pipe(go) < 0)
                bench_die("no memory or pipe for the clients: %s\n", strerror(errno));
        for (unsigned i = 0; i < o->clients; i++) {
                unsigned n = o->conns / o->clients + (i < o->conns % o->clients ? 1 : 0);

                job[i] = (struct client_job){ o, *server, n, shared + done, go[0], go[1] };
                done += n;
                pid[i] = spawn(client_main, &job[i]);
        }
        close(go[0]);
        /* Let them open their IAs before the clock starts. */
        usleep(200 * 1000);
        t0 = bench_now_ns();
        close(go[1]);
        for (unsigned i = 0; i < o->clients; i++)
                failed |= bench_reap(pid[i]);
        elapsed = bench_now_ns() - t0;
        if (failed)
                bench_die("a client failed\n");
        if (samples_init(&all, o->conns) < 0)
                bench_die("no memory for the samples\n");
        for (unsigned i = 0; i < o->conns; i++)
                samples_add(&all, shared[i]);
        samples_summarize(&all, &sum);
        printf("name=conn_rate mode=%s transport=%s ia=%s clients=%u conns=%u per_sec=%.0f "
               "mean_us=%.1f p99_us=%.1f\n",
               o->clients == 1 ? "seq" : "conc", transport, o->ia_name, o->clients, o->conns,
               (double)o->conns * 1e9 / (double)elapsed, sum.mean / 1e3, sum.p99 / 1e3);
        fflush(stdout);
        samples_free(&all);
        munmap(shared, sizeof(uint64_t) * o->conns);
        return 0;
}

struct server_job {
        const struct options *o;
        int ready_fd;
};

static int server_main(void *arg)
{
        const struct server_job *j = arg;

        return serve(j->o, j->o->conns, j->ready_fd);
}

/* Same host: a server process, then the clients, on one datd. */
static int run_same_host(const struct options *o)
{
        struct sockaddr_storage server;
        struct server_job sj = { o, -1 };
        int ready[2], status;
        pid_t spid;

        if (pipe(ready) < 0)
                bench_die("pipe: %s\n", strerror(errno));
        sj.ready_fd = ready[1];
        spid = spawn(server_main, &sj);
        close(ready[1]);
        if (read(ready[0], &server, sizeof(server)) != sizeof(server))
                bench_die("the server did not start\n");
        close(ready[0]);
        run_clients(o, &server, "same-host");
        status = bench_reap(spid);
        if (status != 0)
                bench_die("the server exited with %d\n", status);
        return 0;
}

static bool parse_address(const char *s, struct sockaddr_storage *ss)
{
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

        memset(ss, 0, sizeof(*ss));
        if (inet_pton(AF_INET, s, &in->sin_addr) == 1) {
                in->sin_family = AF_INET;
                return true;
        }
        if (inet_pton(AF_INET6, s, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                return true;
        }
        return false;
}

static void usage(const char *prog)
{
        fprintf(stderr,
                "usage: %s [-i IA] [-c CLIENTS] [-n CONNS] [-q CONN_QUAL]     same host\n"
                "       %s -s [-i IA] [-q CONN_QUAL]                          server\n"
                "       %s -h ADDR [-i IA] [-c CLIENTS] [-n CONNS] [-q CONN_QUAL]  client\n"
                "  -i IA        dat.conf name of the IA (default datd-shm; datd-tcp across hosts)\n"
                "  -c CLIENTS   concurrent client processes (default 1: mode=seq)\n"
                "  -n CONNS     connections in all (default 2000)\n"
                "  -q CONN_QUAL the server's conn_qual (default %d)\n",
                prog, prog, prog, DEFAULT_QUAL);
}

int main(int argc, char **argv)
{
        struct options o = { .ia_name = "datd-shm", .qual = DEFAULT_QUAL, .clients = 1,
                             .conns = 2000 };
        struct sockaddr_storage server;
        int opt;

        while ((opt = getopt(argc, argv, "i:c:n:q:sh:")) != -1) {
                switch (opt) {
                case 'i': o.ia_name = optarg; break;
                case 'c': o.clients = (unsigned)strtoul(optarg, NULL, 0); break;
                case 'n': o.conns = (unsigned)strtoul(optarg, NULL, 0); break;
                case 'q': o.qual = strtoull(optarg, NULL, 0); break;
                case 's': o.server_only = true; break;
                case 'h': o.server_addr = optarg; break;
                default: usage(argv[0]); return 2;
                }
        }
        if (optind != argc || o.clients < 1 || o.clients > MAX_CLIENTS || o.conns < o.clients ||
            (o.server_only && o.server_addr)) {
                usage(argv[0]);
                return 2;
        }
        if (o.server_only)
                return serve(&o, 0, -1);
        if (o.server_addr) {
                if (!parse_address(o.server_addr, &server))
                        bench_die("%s: not an IPv4 or IPv6 address\n", o.server_addr);
                return run_clients(&o, &server, "cross-host");
        }
        return run_same_host(&o);
}
