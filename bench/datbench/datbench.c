/* datbench: the command line, the IA plumbing every measure shares, and the
 * results (a table, or JSON).  See datbench.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/datbench/datbench.h"

_Noreturn void db_fail(const char *file, int line, const char *call, DAT_RETURN r)
{
        const char *major = "?", *minor = "?";

        dat_strerror(r, &major, &minor);
        bench_die("datbench: %s:%d: %s: 0x%08x (%s, %s)\n", file, line, call, (unsigned)r, major,
                  minor);
}

void db_ia_open(struct db_ia *d, const char *ia_name, DAT_COUNT cm_qlen)
{
        char name[DAT_NAME_MAX_LENGTH];

        memset(d, 0, sizeof(*d));
        snprintf(name, sizeof(name), "%s", ia_name);
        d->async_evd = DAT_HANDLE_NULL;
        DB_CHECK(dat_ia_open(name, 16, &d->async_evd, &d->ia));
        DB_CHECK(dat_pz_create(d->ia, &d->pz));
        DB_CHECK(dat_evd_create(d->ia, cm_qlen, DAT_HANDLE_NULL,
                                DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG, &d->cm_evd));
        DB_CHECK(dat_ia_query(d->ia, NULL, DAT_IA_FIELD_ALL, &d->attr, 0, NULL));
        memcpy(&d->address, d->attr.ia_address_ptr,
               d->attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                             : sizeof(struct sockaddr_in));
}

void db_ia_close(struct db_ia *d)
{
        DB_CHECK(dat_ia_close(d->ia, DAT_CLOSE_ABRUPT_FLAG));
}

DAT_EVENT db_wait_event(DAT_EVD_HANDLE evd)
{
        DAT_EVENT ev;
        DAT_COUNT n;

        DB_CHECK(dat_evd_wait(evd, DB_STUCK_US, 1, &ev, &n));
        return ev;
}

bool db_parse_address(const char *s, struct sockaddr_storage *ss)
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

void db_print_address(const char *what, const struct sockaddr_storage *ss, DAT_CONN_QUAL q)
{
        char buf[INET6_ADDRSTRLEN] = "?";
        const void *a = ss->ss_family == AF_INET6
                ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
                : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;

        inet_ntop(ss->ss_family, a, buf, sizeof(buf));
        fprintf(stderr, "# %s %s conn_qual %llu\n", what, buf, (unsigned long long)q);
}

pid_t db_spawn(int cpu, int (*fn)(void *arg), void *arg)
{
        pid_t parent = getpid(), pid;

        fflush(NULL);
        pid = fork();
        if (pid < 0)
                bench_die("datbench: fork: %s\n", strerror(errno));
        if (pid > 0)
                return pid;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(1);
        if (cpu >= 0 && bench_pin(cpu) < 0)
                fprintf(stderr, "datbench: cannot pin to CPU %d\n", cpu);
        _exit(fn(arg));
}

/* ---- results ------------------------------------------------------------- */

enum db_kind { DB_LATENCY, DB_BANDWIDTH, DB_RATE, DB_VALUE };

struct db_result {
        enum db_kind kind;
        char name[32];
        char mode[32];
        char unit[16];
        size_t size;
        unsigned width;         /* window (bandwidth) or clients (rate) */
        uint64_t count;         /* iterations, batches, connections, objects */
        uint64_t failed;        /* rate: operations that failed */
        uint64_t bytes;         /* per batch (bandwidth) */
        double v[4];            /* latency: median, p99, min (µs); bandwidth: median, p99 (GB/s),
                                 * µs per batch; rate: per second, median µs, p99 µs; value */
};

static struct db_result *results;
static size_t n_results;

static struct db_result *result_new(enum db_kind kind, const char *name, const char *mode)
{
        struct db_result *r;

        results = realloc(results, (n_results + 1) * sizeof(*results));
        if (!results)
                bench_die("datbench: out of memory\n");
        r = &results[n_results++];
        memset(r, 0, sizeof(*r));
        r->kind = kind;
        snprintf(r->name, sizeof(r->name), "%s", name);
        snprintf(r->mode, sizeof(r->mode), "%s", mode ? mode : "-");
        return r;
}

void db_report_latency(const char *name, const char *mode, size_t size, struct samples *s)
{
        struct db_result *r = result_new(DB_LATENCY, name, mode);
        struct summary sum;

        samples_summarize(s, &sum);
        r->size = size;
        r->count = sum.n;
        r->v[0] = sum.median / 1e3;
        r->v[1] = sum.p99 / 1e3;
        r->v[2] = sum.min / 1e3;
}

void db_report_bandwidth(const char *name, const char *mode, size_t size, unsigned window,
                         uint64_t bytes_per_batch, struct samples *s)
{
        struct db_result *r = result_new(DB_BANDWIDTH, name, mode);
        struct summary sum;

        samples_summarize(s, &sum);
        r->size = size;
        r->width = window;
        r->count = sum.n;
        r->bytes = bytes_per_batch;
        /* The p99 of the times is the slow tail: its bandwidth is the p99 one. */
        r->v[0] = sum.median > 0 ? (double)bytes_per_batch / sum.median : 0;
        r->v[1] = sum.p99 > 0 ? (double)bytes_per_batch / sum.p99 : 0;
        r->v[2] = sum.median / 1e3;
}

void db_report_rate(const char *name, const char *mode, unsigned clients, uint64_t count,
                    uint64_t failed, uint64_t elapsed_ns, struct samples *s)
{
        struct db_result *r = result_new(DB_RATE, name, mode);
        struct summary sum;

        samples_summarize(s, &sum);
        r->width = clients;
        r->count = count;
        r->failed = failed;
        r->v[0] = elapsed_ns ? (double)count * 1e9 / (double)elapsed_ns : 0;
        r->v[1] = sum.median / 1e3;
        r->v[2] = sum.p99 / 1e3;
}

void db_report_value(const char *name, const char *what, double value, const char *unit,
                     uint64_t count)
{
        struct db_result *r = result_new(DB_VALUE, name, what);

        snprintf(r->unit, sizeof(r->unit), "%s", unit);
        r->count = count;
        r->v[0] = value;
}

static void json_result(FILE *f, const struct db_result *r)
{
        fprintf(f, "{\"name\": \"%s\", \"mode\": \"%s\"", r->name, r->mode);
        switch (r->kind) {
        case DB_LATENCY:
                fprintf(f, ", \"size\": %zu, \"iters\": %llu, \"half_rtt_us_median\": %.4f, "
                           "\"half_rtt_us_p99\": %.4f, \"half_rtt_us_min\": %.4f",
                        r->size, (unsigned long long)r->count, r->v[0], r->v[1], r->v[2]);
                break;
        case DB_BANDWIDTH:
                fprintf(f, ", \"size\": %zu, \"window\": %u, \"batches\": %llu, "
                           "\"bytes_per_batch\": %llu, \"gbps_median\": %.4f, \"gbps_p99\": %.4f, "
                           "\"us_per_batch_median\": %.3f",
                        r->size, r->width, (unsigned long long)r->count,
                        (unsigned long long)r->bytes, r->v[0], r->v[1], r->v[2]);
                break;
        case DB_RATE:
                fprintf(f, ", \"clients\": %u, \"conns\": %llu, \"failed\": %llu, "
                           "\"conn_per_s\": %.1f, \"conn_us_median\": %.2f, \"conn_us_p99\": %.2f",
                        r->width, (unsigned long long)r->count, (unsigned long long)r->failed,
                        r->v[0], r->v[1], r->v[2]);
                break;
        case DB_VALUE:
                fprintf(f, ", \"count\": %llu, \"value\": %.6g, \"unit\": \"%s\"",
                        (unsigned long long)r->count, r->v[0], r->unit);
                break;
        }
        fputc('}', f);
}

static const char *size_text(char *buf, size_t len, size_t size)
{
        if (size >= (1u << 20) && size % (1u << 20) == 0)
                snprintf(buf, len, "%zu MiB", size >> 20);
        else if (size >= 1024 && size % 1024 == 0)
                snprintf(buf, len, "%zu KiB", size >> 10);
        else
                snprintf(buf, len, "%zu B", size);
        return buf;
}

static void table_print(FILE *f)
{
        char sz[32];
        enum db_kind last = (enum db_kind)-1;

        for (size_t i = 0; i < n_results; i++) {
                const struct db_result *r = &results[i];

                if (r->kind != last) {
                        static const char *const headers[] = {
                                [DB_LATENCY] = "test         wait   size       iters  "
                                               "half-RTT µs: median      p99      min",
                                [DB_BANDWIDTH] = "test         wait   size      window  batches  "
                                                 "GB/s: median      p99   µs/batch",
                                [DB_RATE] = "test         mode   clients   conns     conn/s  "
                                            "µs: median      p99  failed",
                                [DB_VALUE] = "measure                  what                            "
                                             "value  unit    count",
                        };

                        fprintf(f, "%s%s\n", i ? "\n" : "", headers[r->kind]);
                        last = r->kind;
                }
                switch (r->kind) {
                case DB_LATENCY:
                        fprintf(f, "%-12s %-6s %-8s %7llu  %19.3f %8.3f %8.3f\n", r->name, r->mode,
                                size_text(sz, sizeof(sz), r->size), (unsigned long long)r->count,
                                r->v[0], r->v[1], r->v[2]);
                        break;
                case DB_BANDWIDTH:
                        fprintf(f, "%-12s %-6s %-9s %6u %8llu  %12.2f %8.2f %10.1f\n", r->name,
                                r->mode, size_text(sz, sizeof(sz), r->size), r->width,
                                (unsigned long long)r->count, r->v[0], r->v[1], r->v[2]);
                        break;
                case DB_RATE:
                        fprintf(f, "%-12s %-6s %7u %7llu %10.0f  %10.1f %8.1f %7llu\n", r->name,
                                r->mode, r->width, (unsigned long long)r->count, r->v[0], r->v[1],
                                r->v[2], (unsigned long long)r->failed);
                        break;
                case DB_VALUE:
                        fprintf(f, "%-24s %-24s %12.1f  %-5s %7llu\n", r->name, r->mode, r->v[0],
                                r->unit, (unsigned long long)r->count);
                        break;
                }
        }
}

void db_results_print(const struct db_opts *o, FILE *f)
{
        static bool printed;

        if (printed)
                return;
        printed = true;
        if (!o->json) {
                table_print(f);
                fflush(f);
                return;
        }
        fprintf(f, "{\"tool\": \"datbench\", \"mode\": \"%s\", \"ia\": \"%s\", \"memory\": \"%s\", "
                   "\"results\": [",
                o->mode, o->ia_name, o->shared_mem ? "shared" : "virtual");
        for (size_t i = 0; i < n_results; i++) {
                fputs(i ? ",\n  " : "\n  ", f);
                json_result(f, &results[i]);
        }
        fputs(n_results ? "\n]}\n" : "]}\n", f);
        fflush(f);
}

/* ---- the command line -------------------------------------------------------- */

static void usage(FILE *f, const char *prog)
{
        fprintf(f,
                "usage: %s lat|bw|conn|scale [options]\n"
                "  without -s or -h the program forks its own server on this host\n"
                "  -s               server: wait for clients on -q (prints its address)\n"
                "  -h ADDR          client: the server's IA address (what its dat_ia_query reports)\n"
                "  -i NAME          the IA, as dat.conf names it (default datd-shm; datd-tcp across hosts)\n"
                "  -q QUAL          the server's conn_qual (default %d)\n"
                "  -S LIST          sizes, comma-separated, K/M suffixes (lat: 8,64,1K,4K;\n"
                "                   bw: 64K,1M,16M)\n"
                "  -n N             measured iterations (bw: batches) per test, at most\n"
                "  -w N             warm-up iterations (bw: batches) per test, at most\n"
                "  -t SEC           seconds of measuring per test, at most (default 1; the\n"
                "                   warm-up gets at most a fifth of it)\n"
                "  -c A,B           pin the server to CPU A and the client to CPU B\n"
                "  -m poll,block    lat, bw: reap completions by spinning on dat_evd_dequeue,\n"
                "                   by sleeping in dat_evd_wait, or both (default)\n"
                "  -T LIST          lat: send,write; bw: write,read,send (default all)\n"
                "  -W N             bw: DTOs outstanding at once (default 16)\n"
                "  -k N             conn: concurrent clients (default: 1, then 8)\n"
                "  -N N             conn: connections per run (default 2000)\n"
                "  -E N             scale: endpoints to create (default 10000)\n"
                "  -C N             scale: connections to make (default 1000)\n"
                "  -P PID           scale: datd's PID, whose RSS is measured\n"
                "  --hold           scale: keep the endpoints until stdin closes\n"
                "  --shared-mem     lat, bw: register memory libdat provides\n"
                "                   (DAT_MEM_TYPE_SHARED_VIRTUAL), as ucx_perftest maps memory\n"
                "                   UCX allocates: on shm, RDMA Writes into it go straight in\n"
                "  --json           one JSON document on stdout instead of the table\n",
                prog, DB_DEFAULT_QUAL);
}

static bool parse_sizes(struct db_opts *o, const char *arg)
{
        char *copy = strdup(arg), *save = NULL, *tok;
        bool ok = copy != NULL;

        o->n_sizes = 0;
        for (tok = copy ? strtok_r(copy, ",", &save) : NULL; ok && tok;
             tok = strtok_r(NULL, ",", &save)) {
                if (o->n_sizes == DB_MAX_SIZES || !bench_parse_size(tok, &o->sizes[o->n_sizes]) ||
                    o->sizes[o->n_sizes] == 0)
                        ok = false;
                else
                        o->n_sizes++;
        }
        free(copy);
        return ok && o->n_sizes > 0;
}

static bool parse_list(const char *arg, const char *const *names, bool *const *flags, size_t n)
{
        char *copy = strdup(arg), *save = NULL, *tok;
        bool ok = copy != NULL;

        for (size_t i = 0; i < n; i++)
                *flags[i] = false;
        for (tok = copy ? strtok_r(copy, ",", &save) : NULL; ok && tok;
             tok = strtok_r(NULL, ",", &save)) {
                size_t i;

                for (i = 0; i < n && strcmp(tok, names[i]) != 0; i++)
                        ;
                if (i == n)
                        ok = false;
                else
                        *flags[i] = true;
        }
        free(copy);
        return ok;
}

static bool parse_u64(const char *s, uint64_t *out)
{
        char *end;

        errno = 0;
        *out = strtoull(s, &end, 0);
        return errno == 0 && end != s && *end == '\0' && s[0] != '-';
}

static bool parse_uint(const char *s, unsigned *out, unsigned lo, unsigned hi)
{
        uint64_t v;

        if (!parse_u64(s, &v) || v < lo || v > hi)
                return false;
        *out = (unsigned)v;
        return true;
}

static bool parse_cpus(struct db_opts *o, const char *s)
{
        char *end;
        long a, b;

        errno = 0;
        a = strtol(s, &end, 10);
        if (end == s || *end != ',' || a < 0)
                return false;
        s = end + 1;
        b = strtol(s, &end, 10);
        if (errno || end == s || *end || b < 0)
                return false;
        o->cpu[0] = (int)a;
        o->cpu[1] = (int)b;
        return true;
}

enum { OPT_JSON = 0x100, OPT_HOLD, OPT_SHARED_MEM, OPT_HELP };

static int parse_args(int argc, char **argv, struct db_opts *o)
{
        static const struct option longopts[] = {
                { "json", no_argument, NULL, OPT_JSON },
                { "hold", no_argument, NULL, OPT_HOLD },
                { "shared-mem", no_argument, NULL, OPT_SHARED_MEM },
                { "help", no_argument, NULL, OPT_HELP },
                {},
        };
        static const char *const lat_tests[] = { "send", "write" };
        static const char *const bw_tests[] = { "write", "read", "send" };
        static const char *const waits[] = { "poll", "block" };
        bool *lat_flags[] = { &o->test_send, &o->test_write };
        bool *bw_flags[] = { &o->test_write, &o->test_read, &o->test_send };
        bool *wait_flags[] = { &o->poll, &o->block };
        const char *sizes = NULL, *tests = NULL;
        uint64_t pid;
        bool ok;
        int opt;

        if (argc < 2 || argv[1][0] == '-') {
                if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-?") == 0)) {
                        usage(stdout, o->prog);
                        return 1;
                }
                usage(stderr, o->prog);
                return -1;
        }
        o->mode = argv[1];
        if (strcmp(o->mode, "lat") && strcmp(o->mode, "bw") && strcmp(o->mode, "conn") &&
            strcmp(o->mode, "scale")) {
                fprintf(stderr, "%s: unknown measure '%s'\n", o->prog, o->mode);
                usage(stderr, o->prog);
                return -1;
        }
        optind = 2;
        while ((opt = getopt_long(argc, argv, "sh:i:q:S:n:w:t:c:m:T:W:k:N:E:C:P:", longopts,
                                  NULL)) != -1) {
                switch (opt) {
                case 's': o->server_only = true; ok = true; break;
                case 'h': o->server_addr = optarg; ok = true; break;
                case 'i': o->ia_name = optarg; ok = true; break;
                case 'q': ok = parse_u64(optarg, &o->qual); break;
                case 'S': sizes = optarg; ok = true; break;
                case 'n': ok = parse_u64(optarg, &o->iters) && o->iters > 0; break;
                case 'w': ok = parse_u64(optarg, &o->warmup); break;
                case 't': o->duration = strtod(optarg, NULL); ok = o->duration > 0; break;
                case 'c': ok = parse_cpus(o, optarg); break;
                case 'm': ok = parse_list(optarg, waits, wait_flags, 2); break;
                case 'T': tests = optarg; ok = true; break;
                case 'W': ok = parse_uint(optarg, &o->window, 1, 1024); break;
                case 'k': ok = parse_uint(optarg, &o->clients, 1, 256); break;
                case 'N': ok = parse_uint(optarg, &o->conns, 1, 10000000); break;
                case 'E': ok = parse_uint(optarg, &o->n_eps, 0, 1u << 20); break;
                case 'C': ok = parse_uint(optarg, &o->n_connections, 0, 1u << 20); break;
                case 'P': ok = parse_u64(optarg, &pid) && pid > 0; o->datd_pid = (pid_t)pid; break;
                case OPT_JSON: o->json = true; ok = true; break;
                case OPT_HOLD: o->hold = true; ok = true; break;
                case OPT_SHARED_MEM: o->shared_mem = true; ok = true; break;
                case OPT_HELP: usage(stdout, o->prog); return 1;
                default: usage(stderr, o->prog); return -1;
                }
                if (!ok) {
                        fprintf(stderr, "%s: bad argument to -%c: '%s'\n", o->prog, opt,
                                optarg ? optarg : "");
                        return -1;
                }
        }
        if (optind != argc || (o->server_only && o->server_addr)) {
                usage(stderr, o->prog);
                return -1;
        }
        if (!sizes)
                sizes = strcmp(o->mode, "bw") == 0 ? "64K,1M,16M" : "8,64,1K,4K";
        if (!parse_sizes(o, sizes)) {
                fprintf(stderr, "%s: bad size list '%s'\n", o->prog, sizes);
                return -1;
        }
        if (tests) {
                bool is_lat = strcmp(o->mode, "lat") == 0;

                if (!parse_list(tests, is_lat ? lat_tests : bw_tests, is_lat ? lat_flags : bw_flags,
                                is_lat ? 2 : 3)) {
                        fprintf(stderr, "%s: bad test list '%s'\n", o->prog, tests);
                        return -1;
                }
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct db_opts o = {
                .prog = "datbench",
                .ia_name = "datd-shm",
                .qual = DB_DEFAULT_QUAL,
                .iters = 1000000,
                .warmup = 10000,
                .duration = 1.0,
                .cpu = { -1, -1 },
                .poll = true,
                .block = true,
                .test_send = true,
                .test_write = true,
                .test_read = true,
                .window = 16,
                .conns = 2000,
                .n_eps = 10000,
                .n_connections = 1000,
        };
        int r;

        signal(SIGPIPE, SIG_IGN);
        r = parse_args(argc, argv, &o);
        if (r != 0)
                return r > 0 ? 0 : 2;
        if (o.cpu[0] >= 0)
                bench_warn_shared_cpu(o.cpu[0], o.cpu[1], o.poll);
        if (strcmp(o.mode, "conn") == 0)
                r = db_conn_main(&o);
        else if (strcmp(o.mode, "scale") == 0)
                r = db_scale_main(&o);
        else
                r = db_lat_bw_main(&o);
        if (r == 0)
                db_results_print(&o, stdout);
        return r;
}
