/* Timing and statistics for the floor benchmarks (see stats.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "bench/common/stats.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_opts_init(struct bench_opts *o, const char *sizes_default, uint64_t iters,
                     uint64_t warmup, double duration)
{
        memset(o, 0, sizeof(*o));
        o->iters = iters;
        o->warmup = warmup;
        o->duration = duration;
        o->cpu[0] = 0;
        o->cpu[1] = 1;
        if (bench_opts_parse_common(o, 's', sizes_default) != 1)
                bench_die("bad default sizes '%s'", sizes_default);
}

bool bench_parse_size(const char *s, size_t *out)
{
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || end == s)
                return false;
        switch (*end) {
        case 'k': case 'K':
                v <<= 10;
                end++;
                break;
        case 'm': case 'M':
                v <<= 20;
                end++;
                break;
        case 'g': case 'G':
                v <<= 30;
                end++;
                break;
        }
        if (*end != '\0' || v == 0)
                return false;
        *out = (size_t)v;
        return true;
}

static int parse_sizes(struct bench_opts *o, const char *arg)
{
        char buf[256], *save = NULL, *tok;

        if (strlen(arg) >= sizeof(buf))
                return -1;
        strcpy(buf, arg);
        o->n_sizes = 0;
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (o->n_sizes == BENCH_MAX_SIZES || !bench_parse_size(tok, &o->sizes[o->n_sizes]))
                        return -1;
                o->n_sizes++;
        }
        return o->n_sizes > 0 ? 0 : -1;
}

static bool parse_u64(const char *arg, uint64_t *out)
{
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(arg, &end, 10);
        if (errno != 0 || end == arg || *end != '\0')
                return false;
        *out = v;
        return true;
}

int bench_opts_parse_common(struct bench_opts *o, int opt, const char *arg)
{
        char *end;

        switch (opt) {
        case 's':
                if (parse_sizes(o, arg) < 0) {
                        fprintf(stderr, "bad --sizes '%s' (at most %d, e.g. 8,64K,1M)\n", arg,
                                BENCH_MAX_SIZES);
                        return -1;
                }
                return 1;
        case 'n':
                if (!parse_u64(arg, &o->iters) || o->iters == 0) {
                        fprintf(stderr, "bad --iters '%s'\n", arg);
                        return -1;
                }
                return 1;
        case 'w':
                if (!parse_u64(arg, &o->warmup)) {
                        fprintf(stderr, "bad --warmup '%s'\n", arg);
                        return -1;
                }
                return 1;
        case 't':
                errno = 0;
                o->duration = strtod(arg, &end);
                if (errno != 0 || end == arg || *end != '\0' || o->duration <= 0) {
                        fprintf(stderr, "bad --duration '%s'\n", arg);
                        return -1;
                }
                return 1;
        case 'c':
                if (sscanf(arg, "%d,%d", &o->cpu[0], &o->cpu[1]) != 2 || o->cpu[0] < 0 ||
                    o->cpu[1] < 0) {
                        fprintf(stderr, "bad --cpus '%s' (want A,B)\n", arg);
                        return -1;
                }
                return 1;
        }
        return 0;
}

int bench_parse_args(int argc, char **argv, struct bench_opts *o, const char *shortopts,
                     const struct option *longopts, int (*extra)(int opt, const char *arg, void *ud),
                     void *ud, void (*usage)(const char *prog))
{
        int opt, r;

        while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
                r = bench_opts_parse_common(o, opt, optarg);
                if (r == 0 && opt != 'h' && opt != '?' && extra)
                        r = extra(opt, optarg, ud);
                if (r < 0)
                        return -1;
                if (r > 0)
                        continue;
                usage(argv[0]);
                return opt == 'h' ? 1 : -1;
        }
        if (optind < argc) {
                fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
                return -1;
        }
        return 0;
}

int bench_parse_modes(const char *arg, bool *busy, bool *block)
{
        char buf[64], *save = NULL, *tok;

        *busy = *block = false;
        if (strlen(arg) >= sizeof(buf))
                goto bad;
        strcpy(buf, arg);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (strcmp(tok, "busy") == 0)
                        *busy = true;
                else if (strcmp(tok, "block") == 0)
                        *block = true;
                else
                        goto bad;
        }
        if (*busy || *block)
                return 1;
bad:
        fprintf(stderr, "bad --modes '%s' (busy, block or busy,block)\n", arg);
        return -1;
}

size_t bench_max_size(const struct bench_opts *o)
{
        size_t m = 0;

        for (unsigned i = 0; i < o->n_sizes; i++)
                if (o->sizes[i] > m)
                        m = o->sizes[i];
        return m;
}

bool bench_until(uint64_t done, uint64_t max_iters, double max_seconds, uint64_t start_ns)
{
        if (done >= max_iters)
                return true;
        /* Outside the timed region: a vDSO clock read costs nothing measured. */
        return (double)(bench_now_ns() - start_ns) >= max_seconds * 1e9;
}

uint64_t bench_iters_for(const struct bench_opts *o, uint64_t warm_ns, uint64_t warm_iters,
                         uint64_t min_iters)
{
        double per_iter, fit;
        uint64_t n;

        if (warm_iters == 0 || warm_ns == 0)
                return o->iters;
        per_iter = (double)warm_ns / (double)warm_iters;
        fit = o->duration * 1e9 / per_iter;
        n = fit >= (double)o->iters ? o->iters : (uint64_t)fit;
        return n < min_iters ? min_iters : n;
}

int samples_init(struct samples *s, size_t cap)
{
        s->n = 0;
        s->cap = cap;
        s->ns = calloc(cap ? cap : 1, sizeof(*s->ns));
        return s->ns ? 0 : -ENOMEM;
}

void samples_reset(struct samples *s)
{
        s->n = 0;
}

void samples_free(struct samples *s)
{
        free(s->ns);
        s->ns = NULL;
        s->n = s->cap = 0;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return (x > y) - (x < y);
}

/* Nearest rank: the smallest sample with at least p% of the samples at or below it. */
static double percentile(const struct samples *s, double p)
{
        size_t rank = (size_t)((p / 100.0) * (double)s->n + 0.999999);

        if (rank == 0)
                rank = 1;
        if (rank > s->n)
                rank = s->n;
        return (double)s->ns[rank - 1];
}

void samples_summarize(struct samples *s, struct summary *out)
{
        double sum = 0;

        memset(out, 0, sizeof(*out));
        if (s->n == 0)
                return;
        qsort(s->ns, s->n, sizeof(*s->ns), cmp_u64);
        for (size_t i = 0; i < s->n; i++)
                sum += (double)s->ns[i];
        out->n = s->n;
        out->min = (double)s->ns[0];
        out->max = (double)s->ns[s->n - 1];
        out->median = percentile(s, 50);
        out->p99 = percentile(s, 99);
        out->mean = sum / (double)s->n;
}

/* The human table: rows kept until bench_table_print(). */
#define TABLE_MAX_ROWS 256
static char *table_rows[TABLE_MAX_ROWS];
static unsigned table_n;

static void table_add(const char *name, const char *mode, const char *size, uint64_t count,
                      const char *median, const char *p99, const char *unit)
{
        char *row;

        if (table_n == TABLE_MAX_ROWS)
                return;
        if (asprintf(&row, "# %-16s %-6s %9s %9llu %12s %12s  %s", name, mode ? mode : "-", size,
                     (unsigned long long)count, median, p99, unit) < 0)
                return;
        table_rows[table_n++] = row;
}

static void size_str(size_t size, char *buf, size_t len)
{
        if (size >= (1u << 20) && size % (1u << 20) == 0)
                snprintf(buf, len, "%zu MiB", size >> 20);
        else if (size >= 1024 && size % 1024 == 0)
                snprintf(buf, len, "%zu KiB", size >> 10);
        else
                snprintf(buf, len, "%zu B", size);
}

void bench_report_latency(const char *name, const char *mode, size_t size, struct samples *half_rtt)
{
        struct summary sm;
        char sz[32], med[32], p99[32];

        samples_summarize(half_rtt, &sm);
        printf("name=%s mode=%s size=%zu iters=%zu half_rtt_us_median=%.3f half_rtt_us_p99=%.3f "
               "half_rtt_us_min=%.3f\n",
               name, mode ? mode : "-", size, sm.n, sm.median / 1e3, sm.p99 / 1e3, sm.min / 1e3);
        fflush(stdout);
        size_str(size, sz, sizeof(sz));
        snprintf(med, sizeof(med), "%.3f", sm.median / 1e3);
        snprintf(p99, sizeof(p99), "%.3f", sm.p99 / 1e3);
        table_add(name, mode, sz, sm.n, med, p99, "us half round trip");
}

static double gbps(uint64_t bytes, double ns)
{
        return ns > 0 ? (double)bytes / ns : 0;  /* bytes per ns == GB/s */
}

void bench_report_bandwidth(const char *name, const char *mode, size_t size, uint64_t bytes_per_op,
                            struct samples *op_ns)
{
        struct summary sm;
        char sz[32], med[32], p99[32];

        samples_summarize(op_ns, &sm);
        printf("name=%s mode=%s size=%zu iters=%zu gbps_median=%.3f gbps_p99=%.3f "
               "us_per_op_median=%.3f\n",
               name, mode ? mode : "-", size, sm.n, gbps(bytes_per_op, sm.median),
               gbps(bytes_per_op, sm.p99), sm.median / 1e3);
        fflush(stdout);
        size_str(size, sz, sizeof(sz));
        snprintf(med, sizeof(med), "%.2f", gbps(bytes_per_op, sm.median));
        snprintf(p99, sizeof(p99), "%.2f", gbps(bytes_per_op, sm.p99));
        table_add(name, mode, sz, sm.n, med, p99, "GB/s (p99 = slow tail)");
}

void bench_report_rate(const char *name, const char *mode, unsigned clients, size_t size,
                       uint64_t count, uint64_t elapsed_ns, struct samples *op_ns)
{
        struct summary sm;
        char sz[32], rate[32], p99[32];
        double per_s = elapsed_ns ? (double)count * 1e9 / (double)elapsed_ns : 0;

        samples_summarize(op_ns, &sm);
        printf("name=%s mode=%s clients=%u size=%zu conns=%llu conn_per_s=%.0f conn_us_median=%.2f "
               "conn_us_p99=%.2f\n",
               name, mode ? mode : "-", clients, size, (unsigned long long)count, per_s,
               sm.median / 1e3, sm.p99 / 1e3);
        fflush(stdout);
        snprintf(sz, sizeof(sz), "%u cl", clients);
        snprintf(rate, sizeof(rate), "%.0f/s", per_s);
        snprintf(p99, sizeof(p99), "%.2f", sm.p99 / 1e3);
        table_add(name, mode, sz, count, rate, p99, "conn/s; p99: us per connection");
}

void bench_table_print(void)
{
        printf("# %-16s %-6s %9s %9s %12s %12s  %s\n", "benchmark", "mode", "size", "count",
               "median", "p99", "unit");
        for (unsigned i = 0; i < table_n; i++) {
                puts(table_rows[i]);
                free(table_rows[i]);
        }
        table_n = 0;
        fflush(stdout);
}

void bench_die(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        exit(1);
}
