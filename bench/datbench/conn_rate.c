/* datbench conn: connection rate through datd, over the public DAT API
 * only.  One connection is: dat_ep_connect with 64 bytes of private data ->
 * DAT_CONNECTION_EVENT_ESTABLISHED on both sides (the accept carries 64
 * bytes back) -> graceful dat_ep_disconnect -> DISCONNECTED on both sides.
 * The time of one connection is the client's, from dat_ep_connect to its
 * ESTABLISHED; the rate is connections per second of wall time with all
 * clients running.
 *
 *   datbench conn [-i IA] [-k N] [-N CONNS]   same host: forks a server and
 *                                            N client processes (default:
 *                                            1, then 8)
 *   datbench conn -s [-i IA] [-q QUAL]       server only, until killed
 *   datbench conn -h ADDR [-k N] [-N CONNS]  clients only, to a server at
 *                                            ADDR (printed by -s)
 * mode=seq with one client, mode=conc with more.
 *
 * A connection that fails (the client sees REJECTED, UNREACHABLE,
 * TIMED_OUT or BROKEN instead of ESTABLISHED; the server ACCEPT_COMPLETION
 * _ERROR or BROKEN) is counted as failed, not as a connection, and the run
 * goes on with the EP reset; the result says how many failed.
 *
 * Clients are processes (each its own IA, its own control connection to
 * datd), started together behind a pipe; their samples go to a shared
 * mapping.  The server runs on -c's first CPU; the clients are not pinned
 * (eight of them would share one CPU). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/datbench/datbench.h"

#define PD_LEN 64
#define MAX_CLIENTS 256

#define CONN_FAILED UINT64_MAX

/* ---- server ------------------------------------------------------------
 * Accepts every request on a fresh EP with 64 bytes back, frees the EP once
 * it is disconnected or its connection failed.  Serves until it is ended
 * (the same-host run ends it once its clients are done). */
static int serve(const struct db_opts *o, int ready_fd)
{
        unsigned char back[PD_LEN];
        unsigned long established = 0, failed = 0;
        DAT_PSP_HANDLE psp;
        struct db_ia s;

        memset(back, 0xb5, sizeof(back));
        db_ia_open(&s, o->ia_name, 4 * MAX_CLIENTS);
        DB_CHECK(dat_psp_create(s.ia, o->qual, s.cm_evd, DAT_PSP_CONSUMER_FLAG, &psp));
        db_print_address("server listening on", &s.address, o->qual);
        if (ready_fd >= 0) {
                if (write(ready_fd, &s.address, sizeof(s.address)) != sizeof(s.address))
                        bench_die("server: cannot report its address: %s\n", strerror(errno));
                close(ready_fd);
        }
        for (;;) {
                DAT_EVENT ev;
                DAT_CR_HANDLE cr;
                DAT_CR_PARAM param;
                DAT_EP_HANDLE ep;
                DAT_COUNT nmore;

                /* A server waits for clients as long as it takes. */
                DB_CHECK(dat_evd_wait(s.cm_evd, DAT_TIMEOUT_INFINITE, 1, &ev, &nmore));
                switch (ev.event_number) {
                case DAT_CONNECTION_REQUEST_EVENT:
                        cr = ev.event_data.cr_arrival_event_data.cr_handle;
                        DB_CHECK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param));
                        if (param.private_data_size != PD_LEN)
                                bench_die("server: request with %d bytes of private data\n",
                                          param.private_data_size);
                        DB_CHECK(dat_ep_create(s.ia, s.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
                                               s.cm_evd, NULL, &ep));
                        DB_CHECK(dat_cr_accept(cr, ep, PD_LEN, back));
                        break;
                case DAT_CONNECTION_EVENT_ESTABLISHED:
                        established++;
                        break;
                case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR:
                case DAT_CONNECTION_EVENT_BROKEN:
                        failed++;
                        fprintf(stderr, "# server: connection failed (event 0x%x); %lu established, "
                                        "%lu failed so far\n", ev.event_number, established, failed);
                        /* fall through */
                case DAT_CONNECTION_EVENT_DISCONNECTED:
                        DB_CHECK(dat_ep_free(ev.event_data.connect_event_data.ep_handle));
                        break;
                default:
                        bench_die("server: unexpected event 0x%x\n", ev.event_number);
                }
        }
}

/* ---- clients ----------------------------------------------------------- */
struct client_job {
        const struct db_opts *o;
        struct sockaddr_storage server;
        unsigned conns;
        uint64_t *ns;                   /* conns samples, in the shared mapping */
        int go_fd;                      /* readable (EOF) when all may start */
        int go_write_fd;                /* the other end: closed at once */
};

/* The ns from connect to ESTABLISHED, or CONN_FAILED. */
static uint64_t connect_once(const struct db_ia *s, DAT_EP_HANDLE ep, const struct client_job *j)
{
        unsigned char out[PD_LEN];
        uint64_t t0, t1;
        DAT_EVENT ev;

        memset(out, 0x5a, sizeof(out));
        t0 = bench_now_ns();
        DB_CHECK(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&j->server, j->o->qual, DB_STUCK_US,
                                PD_LEN, out, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
        ev = db_wait_event(s->cm_evd);
        t1 = bench_now_ns();
        switch (ev.event_number) {
        case DAT_CONNECTION_EVENT_ESTABLISHED:
                break;
        case DAT_CONNECTION_EVENT_PEER_REJECTED:
        case DAT_CONNECTION_EVENT_NON_PEER_REJECTED:
        case DAT_CONNECTION_EVENT_UNREACHABLE:
        case DAT_CONNECTION_EVENT_TIMED_OUT:
        case DAT_CONNECTION_EVENT_BROKEN:
                fprintf(stderr, "# client: connection failed (event 0x%x)\n", ev.event_number);
                DB_CHECK(dat_ep_reset(ep));
                return CONN_FAILED;
        default:
                bench_die("client: event 0x%x instead of ESTABLISHED\n", ev.event_number);
        }
        if (ev.event_data.connect_event_data.private_data_size != PD_LEN)
                bench_die("client: ESTABLISHED with %d bytes of private data\n",
                          ev.event_data.connect_event_data.private_data_size);
        DB_CHECK(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG));
        ev = db_wait_event(s->cm_evd);
        if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
                bench_die("client: event 0x%x instead of DISCONNECTED\n", ev.event_number);
        DB_CHECK(dat_ep_reset(ep));
        return t1 - t0;
}

static int client_main(void *arg)
{
        const struct client_job *j = arg;
        DAT_EP_HANDLE ep;
        struct db_ia s;
        char c;

        close(j->go_write_fd);
        db_ia_open(&s, j->o->ia_name, 8);
        DB_CHECK(dat_ep_create(s.ia, s.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, s.cm_evd, NULL, &ep));
        while (read(j->go_fd, &c, 1) < 0 && errno == EINTR)
                ;
        for (unsigned i = 0; i < j->conns; i++)
                j->ns[i] = connect_once(&s, ep, j);
        DB_CHECK(dat_ep_free(ep));
        db_ia_close(&s);
        return 0;
}

/* Runs `clients` client processes, `conns` connections in all, and
 * reports the result. */
static void run_clients(const struct db_opts *o, unsigned clients, unsigned conns,
                        const struct sockaddr_storage *server)
{
        pid_t pid[MAX_CLIENTS];
        struct client_job job[MAX_CLIENTS];
        struct samples all;
        uint64_t *shared, t0, elapsed, ok = 0;
        unsigned done = 0;
        int go[2], failed = 0;

        if (conns < clients)
                conns = clients;
        shared = mmap(NULL, sizeof(uint64_t) * conns, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (shared == MAP_FAILED || pipe(go) < 0)
                bench_die("no memory or pipe for the clients: %s\n", strerror(errno));
        for (unsigned i = 0; i < clients; i++) {
                unsigned n = conns / clients + (i < conns % clients ? 1 : 0);

                job[i] = (struct client_job){ o, *server, n, shared + done, go[0], go[1] };
                done += n;
                pid[i] = db_spawn(clients == 1 ? o->cpu[1] : -1, client_main, &job[i]);
        }
        close(go[0]);
        /* Let them open their IAs before the clock starts. */
        usleep(200 * 1000);
        t0 = bench_now_ns();
        close(go[1]);
        for (unsigned i = 0; i < clients; i++)
                failed |= bench_reap(pid[i]);
        elapsed = bench_now_ns() - t0;
        if (failed)
                bench_die("a client failed\n");
        if (samples_init(&all, conns) < 0)
                bench_die("no memory for the samples\n");
        for (unsigned i = 0; i < conns; i++)
                if (shared[i] != CONN_FAILED) {
                        samples_add(&all, shared[i]);
                        ok++;
                }
        db_report_rate("connect", clients == 1 ? "seq" : "conc", clients, ok, conns - ok, elapsed,
                       &all);
        samples_free(&all);
        munmap(shared, sizeof(uint64_t) * conns);
}

struct server_job {
        const struct db_opts *o;
        int ready_fd;
};

static int server_main(void *arg)
{
        const struct server_job *j = arg;

        return serve(j->o, j->ready_fd);
}

/* Same host: a server process, then the clients, on one datd. */
static void run_same_host(const struct db_opts *o, unsigned clients)
{
        struct sockaddr_storage server;
        unsigned conns = o->conns < clients ? clients : o->conns;
        struct server_job sj = { o, -1 };
        int ready[2], status;
        pid_t spid;

        if (pipe(ready) < 0)
                bench_die("pipe: %s\n", strerror(errno));
        sj.ready_fd = ready[1];
        spid = db_spawn(o->cpu[0], server_main, &sj);
        close(ready[1]);
        if (read(ready[0], &server, sizeof(server)) != sizeof(server))
                bench_die("the server did not start\n");
        close(ready[0]);
        run_clients(o, clients, conns, &server);
        /* The server serves until it is ended. */
        kill(spid, SIGTERM);
        status = bench_reap(spid);
        if (status != 128 + SIGTERM)
                bench_die("the server exited with %d\n", status);
}

int db_conn_main(const struct db_opts *o)
{
        static const unsigned default_clients[] = { 1, 8 };
        const unsigned *clients = o->clients ? &o->clients : default_clients;
        unsigned n_clients = o->clients ? 1 : 2;
        struct sockaddr_storage server;

        if (o->server_only)
                return serve(o, -1);
        if (o->server_addr && !db_parse_address(o->server_addr, &server))
                bench_die("%s: not an IPv4 or IPv6 address\n", o->server_addr);
        for (unsigned i = 0; i < n_clients; i++) {
                if (o->server_addr)
                        run_clients(o, clients[i], o->conns, &server);
                else
                        run_same_host(o, clients[i]);
        }
        return 0;
}
