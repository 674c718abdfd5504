/* Timing and statistics shared by the floor benchmarks: a monotonic clock
 * (clock.h), a sample buffer reduced to median / p99, the common
 * command-line flags (sizes, iterations, warm-up, duration, CPUs), and the
 * two output forms: one machine-readable "key=value" line per result on
 * stdout, and a human table (lines starting with '#') printed at the end.
 *
 * Benchmarks only: nothing here is used by datd or libdat, and no test
 * asserts on what it measures. */
#ifndef DATD_BENCH_STATS_H
#define DATD_BENCH_STATS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "bench/common/clock.h"

#define BENCH_MAX_SIZES 16

struct bench_opts {
        size_t sizes[BENCH_MAX_SIZES];
        unsigned n_sizes;
        uint64_t iters;         /* measured iterations per size, at most */
        uint64_t warmup;        /* unmeasured iterations before them */
        double duration;        /* seconds of measuring per size, at most */
        int cpu[2];             /* [0] server/target side, [1] client/caller side */
};

/* getopt_long pieces every floor program accepts; a program appends its own. */
#define BENCH_COMMON_SHORTOPTS "s:n:w:t:c:h"
#define BENCH_COMMON_LONGOPTS                                   \
        { "sizes", required_argument, NULL, 's' },              \
        { "iters", required_argument, NULL, 'n' },              \
        { "warmup", required_argument, NULL, 'w' },             \
        { "duration", required_argument, NULL, 't' },           \
        { "cpus", required_argument, NULL, 'c' },               \
        { "help", no_argument, NULL, 'h' }

#define BENCH_COMMON_HELP                                                               \
        "  -s, --sizes LIST     message sizes, comma-separated, K/M suffixes (e.g. 8,64K,1M)\n" \
        "  -n, --iters N        measured iterations per size, at most\n"                 \
        "  -w, --warmup N       unmeasured iterations first\n"                           \
        "  -t, --duration SEC   seconds of measuring per size, at most\n"                \
        "  -c, --cpus A,B       CPU of the server/target side and of the client side\n"

/* Fills defaults; sizes_default is a LIST as for --sizes. */
void bench_opts_init(struct bench_opts *o, const char *sizes_default, uint64_t iters,
                     uint64_t warmup, double duration);

/* Handles one of the common options.  Returns 1 if it was one, 0 if not,
 * -1 (after printing why) if its argument is wrong. */
int bench_opts_parse_common(struct bench_opts *o, int opt, const char *arg);

/* The whole command line: the common options, then the program's own through
 * extra(opt, arg, ud) (1: taken, 0: unknown, -1: bad argument, already said);
 * usage(prog) for --help and for anything unknown.  Returns 0 to go on, 1
 * after --help (exit 0), -1 on a wrong command line (exit 2). */
int bench_parse_args(int argc, char **argv, struct bench_opts *o, const char *shortopts,
                     const struct option *longopts, int (*extra)(int opt, const char *arg, void *ud),
                     void *ud, void (*usage)(const char *prog));

/* -m/--modes: "busy", "block" or both, comma-separated.  Returns 1, or -1
 * after saying what is wrong. */
int bench_parse_modes(const char *arg, bool *busy, bool *block);

/* The largest of o->sizes. */
size_t bench_max_size(const struct bench_opts *o);

/* "64K" -> 65536; returns false on garbage. */
bool bench_parse_size(const char *s, size_t *out);

/* Lets the sibling hyperthread / the hypervisor breathe in spin loops. */
static inline void bench_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
}

/* True once `done` reached max_iters or max_seconds have passed since
 * start_ns. */
bool bench_until(uint64_t done, uint64_t max_iters, double max_seconds, uint64_t start_ns);

/* The measured loop: o->iters or o->duration.  The warm-up loop: o->warmup
 * or a fifth of o->duration, so that large sizes do not warm up for long. */
static inline bool bench_done(const struct bench_opts *o, uint64_t done, uint64_t start_ns)
{
        return bench_until(done, o->iters, o->duration, start_ns);
}

static inline bool bench_warm_done(const struct bench_opts *o, uint64_t done, uint64_t start_ns)
{
        return bench_until(done, o->warmup, o->duration / 5, start_ns);
}

/* How many measured iterations fit in o->duration, judged from a warm-up
 * that took warm_ns for warm_iters iterations; never more than o->iters,
 * never fewer than min_iters. */
uint64_t bench_iters_for(const struct bench_opts *o, uint64_t warm_ns, uint64_t warm_iters,
                         uint64_t min_iters);

struct samples {
        uint64_t *ns;
        size_t n, cap;
};

int samples_init(struct samples *s, size_t cap);
void samples_reset(struct samples *s);
void samples_free(struct samples *s);

static inline void samples_add(struct samples *s, uint64_t ns)
{
        if (s->n < s->cap)
                s->ns[s->n++] = ns;
}

struct summary {
        size_t n;
        double min, median, p99, max, mean;     /* nanoseconds */
};

/* Sorts the samples in place; nearest-rank percentiles. */
void samples_summarize(struct samples *s, struct summary *out);

/* One result each.  `name` is the benchmark ("tcp_pingpong"), `mode` what
 * varies inside it ("busy", "block", "seq", ...), may be NULL.
 *
 * latency: the samples are half round trips in ns.
 *   name=… mode=… size=… iters=… half_rtt_us_median=… half_rtt_us_p99=… half_rtt_us_min=…
 * bandwidth: the samples are the ns one operation of bytes_per_op took;
 *   gbps_p99 is the bandwidth of the p99 (slow-tail) operation.
 *   name=… mode=… size=… iters=… gbps_median=… gbps_p99=… us_per_op_median=…
 * rate: count operations in elapsed_ns by `clients` concurrent clients; the
 *   samples are the ns each operation took.
 *   name=… mode=… clients=… size=… conns=… conn_per_s=… conn_us_median=… conn_us_p99=… */
void bench_report_latency(const char *name, const char *mode, size_t size, struct samples *half_rtt);
void bench_report_bandwidth(const char *name, const char *mode, size_t size, uint64_t bytes_per_op,
                            struct samples *op_ns);
void bench_report_rate(const char *name, const char *mode, unsigned clients, size_t size,
                       uint64_t count, uint64_t elapsed_ns, struct samples *op_ns);

/* Prints the human table of everything reported so far (lines start with '#'). */
void bench_table_print(void);

/* Prints a message and exits 1.  For the benchmark programs only. */
_Noreturn void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
