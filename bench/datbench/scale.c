/* datbench scale: what endpoints and connections cost datd in memory.
 *
 * datd's resident set (VmRSS of /proc/PID/status, -P PID) is read before and
 * after this process creates -E endpoints (dat_ep_create on one IA), then
 * before and after -C connections between endpoints created beforehand on
 * both sides (a forked server accepts each on one of its own EPs), so the
 * second delta is the connection alone.  Deltas are per object, in bytes;
 * the allocator's and the kernel's page granularity make small counts
 * meaningless (use thousands).  With --hold the endpoints and connections
 * stay until stdin reaches its end, so that `datctl ep list` can be timed
 * against them (bench/run-peers does).  Needs datd's limits (max_eps,
 * max_connections_per_client) above the counts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/datbench/datbench.h"

/* A client may open 16 IAs (datd.conf max_ias_per_client, by default). */
#define SCALE_MAX_IAS 16
#define SCALE_EPS_PER_IA 6400

static long rss_kib(pid_t pid)
{
        char path[64], line[256];
        long kib = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "r");
        if (!f)
                bench_die("datbench: %s: %s\n", path, strerror(errno));
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
                        break;
        fclose(f);
        if (kib < 0)
                bench_die("datbench: no VmRSS in %s\n", path);
        return kib;
}

/* n EPs spread over the n_ia IAs: datd's bookkeeping per IA (its quota
 * counters, its list of the IA's endpoints) is part of what is measured. */
static DAT_EP_HANDLE *eps_create(struct db_ia *d, unsigned n_ia, unsigned n)
{
        DAT_EP_HANDLE *eps = calloc(n ? n : 1, sizeof(*eps));

        if (!eps)
                bench_die("datbench: out of memory\n");
        for (unsigned i = 0; i < n; i++) {
                struct db_ia *on = &d[i % n_ia];

                DB_CHECK(dat_ep_create(on->ia, on->pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
                                       on->cm_evd, NULL, &eps[i]));
        }
        return eps;
}

struct scale_server {
        const struct db_opts *o;
        int ready_fd;           /* the server writes its address when its EPs exist */
        int go_fd;              /* EOF: the client is done */
        int go_write_fd;        /* its other end, the client's: closed here at once */
};

/* Creates -C EPs, reports its address, accepts -C requests on them, then
 * waits for the client to finish and frees everything. */
static int scale_server_main(void *arg)
{
        const struct scale_server *s = arg;
        unsigned n = s->o->n_connections, accepted = 0, established = 0;
        DAT_EP_HANDLE *eps;
        DAT_PSP_HANDLE psp;
        struct db_ia d;
        char c;

        close(s->go_write_fd);
        db_ia_open(&d, s->o->ia_name, 4096);
        eps = eps_create(&d, 1, n);
        DB_CHECK(dat_psp_create(d.ia, s->o->qual, d.cm_evd, DAT_PSP_CONSUMER_FLAG, &psp));
        if (write(s->ready_fd, &d.address, sizeof(d.address)) != sizeof(d.address))
                bench_die("datbench: the scale server cannot report its address\n");
        while (established < n) {
                DAT_EVENT ev = db_wait_event(d.cm_evd);

                if (ev.event_number == DAT_CONNECTION_REQUEST_EVENT)
                        DB_CHECK(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle,
                                               eps[accepted++], 0, NULL));
                else if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
                        established++;
                else
                        bench_die("datbench: scale server: event 0x%x\n", ev.event_number);
        }
        while (read(s->go_fd, &c, 1) < 0 && errno == EINTR)
                ;
        db_ia_close(&d);
        free(eps);
        return 0;
}

static void connect_all(struct db_ia *d, DAT_EP_HANDLE *eps, unsigned n,
                        const struct sockaddr_storage *server, DAT_CONN_QUAL qual)
{
        for (unsigned i = 0; i < n; i++) {
                DAT_EVENT ev;

                DB_CHECK(dat_ep_connect(eps[i], (DAT_IA_ADDRESS_PTR)server, qual, DB_STUCK_US, 0,
                                        NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
                ev = db_wait_event(d->cm_evd);
                if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
                        bench_die("datbench: connection %u: event 0x%x\n", i, ev.event_number);
        }
}

int db_scale_main(const struct db_opts *o)
{
        struct scale_server ss = { .o = o };
        struct sockaddr_storage server;
        DAT_EP_HANDLE *eps, *ceps = NULL;
        long before, after;
        int ready[2], go[2];
        struct db_ia d[SCALE_MAX_IAS];
        unsigned n_ia = (o->n_eps + SCALE_EPS_PER_IA - 1) / SCALE_EPS_PER_IA;
        pid_t spid = 0;
        char c;

        if (o->server_only || o->server_addr)
                bench_die("datbench: scale runs on one host (no -s or -h)\n");
        if (o->datd_pid <= 0)
                bench_die("datbench: scale needs datd's PID (-P)\n");
        if (n_ia < 1)
                n_ia = 1;
        if (n_ia > SCALE_MAX_IAS)
                n_ia = SCALE_MAX_IAS;
        for (unsigned i = 0; i < n_ia; i++)
                db_ia_open(&d[i], o->ia_name, 4096);

        before = rss_kib(o->datd_pid);
        eps = eps_create(d, n_ia, o->n_eps);
        after = rss_kib(o->datd_pid);
        db_report_value("datd_rss_per_ep", "bytes per endpoint",
                        o->n_eps ? (double)(after - before) * 1024 / o->n_eps : 0, "B", o->n_eps);
        db_report_value("datd_rss_eps", "RSS delta, KiB", (double)(after - before), "KiB",
                        o->n_eps);

        if (o->n_connections > 0) {
                if (pipe(ready) < 0 || pipe(go) < 0)
                        bench_die("datbench: pipe: %s\n", strerror(errno));
                ss.ready_fd = ready[1];
                ss.go_fd = go[0];
                ss.go_write_fd = go[1];
                spid = db_spawn(o->cpu[0], scale_server_main, &ss);
                close(ready[1]);
                close(go[0]);
                if (read(ready[0], &server, sizeof(server)) != sizeof(server))
                        bench_die("datbench: the scale server did not start\n");
                close(ready[0]);
                ceps = eps_create(d, 1, o->n_connections);
                before = rss_kib(o->datd_pid);
                connect_all(d, ceps, o->n_connections, &server, o->qual);
                after = rss_kib(o->datd_pid);
                db_report_value("datd_rss_per_conn", "bytes per connection",
                                (double)(after - before) * 1024 / o->n_connections, "B",
                                o->n_connections);
                db_report_value("datd_rss_conns", "RSS delta, KiB", (double)(after - before),
                                "KiB", o->n_connections);
        }
        db_report_value("datd_rss", "RSS now, KiB", (double)rss_kib(o->datd_pid), "KiB", 0);
        if (o->hold) {
                /* The results first: whoever holds us reads them, then closes stdin. */
                db_results_print(o, stdout);
                fprintf(stderr, "# holding %u endpoints and %u connections until stdin closes\n",
                        o->n_eps, o->n_connections);
                for (;;) {
                        ssize_t n = read(STDIN_FILENO, &c, 1);

                        if (n == 0 || (n < 0 && errno != EINTR))
                                break;
                }
        }
        if (spid > 0) {
                close(go[1]);
                if (bench_reap(spid) != 0)
                        bench_die("datbench: the scale server failed\n");
        }
        for (unsigned i = 0; i < n_ia; i++)
                db_ia_close(&d[i]);
        free(eps);
        free(ceps);
        return 0;
}
