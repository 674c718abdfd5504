/* datbench: what datd's data and connection paths cost, measured through
 * the public DAT 2.0 API only (<dat2/udat.h>), so the same binary runs over
 * any DAT provider dat.conf names.  In the style of perftest and
 * fi_pingpong: a server (-s) and a client (-h ADDR) on one IA (-i NAME);
 * without either, the program forks its own server on this host.
 *
 *   datbench lat    send/recv and RDMA-write ping-pong, polling and blocking
 *   datbench bw     streaming RDMA write, RDMA read and send (a window of
 *                   outstanding DTOs)
 *   datbench conn   connection rate (conn_rate.c)
 *   datbench scale  datd's memory per endpoint and per connection (scale.c)
 *
 * One connection carries a whole lat or bw run: the client drives, the
 * server follows.  Before each phase (a test at one size, its warm-up or
 * its measured part) the client sends a control message (struct db_ctl)
 * and waits for the server's "ready"; the server always has the receive for
 * the next control message posted before it sends the last message of a
 * phase, so no Send ever waits for a receive (DAT's receiver-not-ready).
 *
 * Results go to a table for people (default) or, with --json, one JSON
 * document on stdout that bench/run-peers reads.  Benchmarks assert
 * nothing; make check never runs this.  See bench/README.md. */
#ifndef DATD_BENCH_DATBENCH_H
#define DATD_BENCH_DATBENCH_H

#include <dat2/udat.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "bench/common/stats.h"

#define DB_DEFAULT_QUAL 4791
#define DB_MAX_SIZES BENCH_MAX_SIZES
/* How long any single wait may take before the run is declared stuck. */
#define DB_STUCK_US (10u * 1000 * 1000)

enum db_test {
        DB_T_END = 0,           /* the client is done: the server disconnects */
        DB_T_SEND_LAT,
        DB_T_WRITE_LAT,
        DB_T_WRITE_BW,
        DB_T_READ_BW,
        DB_T_SEND_BW,
};

struct db_opts {
        const char *prog;
        const char *mode;               /* "lat", "bw", "conn", "scale" */
        const char *ia_name;            /* -i */
        const char *server_addr;        /* -h */
        bool server_only;               /* -s */
        DAT_CONN_QUAL qual;             /* -q */
        size_t sizes[DB_MAX_SIZES];     /* -S */
        unsigned n_sizes;
        uint64_t iters;                 /* -n: measured iterations (batches for bw) per test, at most */
        uint64_t warmup;                /* -w */
        double duration;                /* -t: seconds of measuring per test, at most */
        int cpu[2];                     /* -c A,B: server, client; -1: not pinned */
        bool poll, block;               /* -m poll,block (lat, bw) */
        bool test_send, test_write, test_read;  /* -T */
        unsigned window;                /* -W (bw) */
        bool json;                      /* --json */
        bool shared_mem;                /* --shared-mem (lat, bw) */
        /* conn */
        unsigned clients;               /* -k */
        unsigned conns;                 /* -N */
        /* scale */
        unsigned n_eps;                 /* -E */
        unsigned n_connections;         /* -C */
        pid_t datd_pid;                 /* -P */
        bool hold;                      /* --hold */
};

/* Prints a message and exits 1 (bench_die), with the failing call. */
#define DB_CHECK(call)                                                                     \
        do {                                                                               \
                DAT_RETURN r_ = (call);                                                    \
                if (r_ != DAT_SUCCESS)                                                     \
                        db_fail(__FILE__, __LINE__, #call, r_);                            \
        } while (0)

_Noreturn void db_fail(const char *file, int line, const char *call, DAT_RETURN r);

/* An IA with what every measure needs: a PZ, one EVD for connection
 * requests and connection events. */
struct db_ia {
        DAT_IA_HANDLE ia;
        DAT_EVD_HANDLE async_evd;
        DAT_PZ_HANDLE pz;
        DAT_EVD_HANDLE cm_evd;
        DAT_IA_ATTR attr;
        struct sockaddr_storage address;
};

void db_ia_open(struct db_ia *d, const char *ia_name, DAT_COUNT cm_qlen);
void db_ia_close(struct db_ia *d);

/* A connection evd event, waited for (dies when none comes in DB_STUCK_US). */
DAT_EVENT db_wait_event(DAT_EVD_HANDLE evd);

/* "10.0.0.1" -> a sockaddr (port 0); false when it is not an address. */
bool db_parse_address(const char *s, struct sockaddr_storage *ss);
/* "# server listening on ADDR conn_qual Q" on stderr. */
void db_print_address(const char *what, const struct sockaddr_storage *ss, DAT_CONN_QUAL q);

/* A child that runs fn(arg) (pinned to cpu unless -1), exits with its
 * result and dies with its parent. */
pid_t db_spawn(int cpu, int (*fn)(void *arg), void *arg);

/* ---- results ------------------------------------------------------------- */

/* Latency: half round trips in ns.  Bandwidth: ns per batch of bytes.  Rate:
 * count operations in elapsed_ns, samples the ns each took.  A value: one
 * named number (scale).  A rate's failed operations are not in count. */
void db_report_latency(const char *name, const char *mode, size_t size, struct samples *s);
void db_report_bandwidth(const char *name, const char *mode, size_t size, unsigned window,
                         uint64_t bytes_per_batch, struct samples *s);
void db_report_rate(const char *name, const char *mode, unsigned clients, uint64_t count,
                    uint64_t failed, uint64_t elapsed_ns, struct samples *s);
void db_report_value(const char *name, const char *what, double value, const char *unit,
                     uint64_t count);

/* Writes every result: a JSON document, or a table for people. */
void db_results_print(const struct db_opts *o, FILE *f);

/* ---- the measures ---------------------------------------------------------- */

int db_lat_bw_main(const struct db_opts *o);    /* lat and bw: datbench-dto.c */
int db_conn_main(const struct db_opts *o);      /* conn_rate.c */
int db_scale_main(const struct db_opts *o);     /* scale.c */

#endif
