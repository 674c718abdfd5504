/* Streaming bandwidth over a raw stream socket (TCP or AF_UNIX): the client
 * writes batches of messages back to back, the server reads them and
 * answers each batch with one byte.  A sample is the time from the first
 * write of a batch to that byte, divided by the messages in it, so the
 * reported bandwidth includes getting the last byte across.
 *
 * Two ways to wait, as datbench bw has: block (sleep in send and recv)
 * and busy (non-blocking calls retried without sleeping, as a consumer
 * spinning on dat_evd_dequeue keeps its CPU busy).  On a virtual machine
 * a CPU that never sleeps can cost the other CPU's streaming a fifth of
 * its rate: busy is the like-for-like bar for datbench's polling. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/common/sock.h"
#include "bench/common/stats.h"

#define ST_MAGIC 0x64627374u    /* "dbst" */

enum st_mode { ST_BUSY = 1, ST_BLOCK = 2 };

struct st_hdr {
        uint32_t magic;
        uint32_t quit;
        uint64_t size;
        uint64_t count;
        uint32_t mode;                  /* enum st_mode */
        uint32_t pad;
};

struct st {
        struct bench_opts opts;
        struct sock_setup setup;
        size_t batch_bytes;
        size_t max_size;
        unsigned char *buf;
        struct samples samples;
        bool want_busy, want_block;
};

static int serve(int listen_fd, void *arg)
{
        struct st *st = arg;
        struct st_hdr h;
        char ack = 1;
        int fd = sock_accept(listen_fd), r = 1;

        if (fd < 0) {
                fprintf(stderr, "accept: %s\n", strerror(-fd));
                return 1;
        }
        while (sock_read_full(fd, &h, sizeof(h), false) == 0) {
                bool busy = h.mode == ST_BUSY;

                if (h.magic != ST_MAGIC || h.size > st->max_size) {
                        fprintf(stderr, "server: bad header\n");
                        break;
                }
                if (h.quit) {
                        r = 0;
                        break;
                }
                for (uint64_t i = 0; i < h.count; i++)
                        if (sock_read_full(fd, st->buf, h.size, busy) < 0)
                                goto out;
                if (sock_write_full(fd, &ack, 1, busy) < 0)
                        break;
        }
out:
        close(fd);
        return r;
}

/* One batch; returns its duration in ns, or 0 if the connection broke. */
static uint64_t batch(struct st *st, int fd, enum st_mode mode, size_t size, uint64_t count)
{
        struct st_hdr h = { .magic = ST_MAGIC, .size = size, .count = count, .mode = mode };
        bool busy = mode == ST_BUSY;
        uint64_t t0;
        char ack;

        if (sock_write_full(fd, &h, sizeof(h), false) < 0)
                return 0;
        t0 = bench_now_ns();
        for (uint64_t i = 0; i < count; i++)
                if (sock_write_full(fd, st->buf, size, busy) < 0)
                        return 0;
        if (sock_read_full(fd, &ack, 1, busy) < 0)
                return 0;
        return bench_now_ns() - t0;
}

static int measure(struct st *st, int fd, enum st_mode mode, size_t size)
{
        const struct bench_opts *o = &st->opts;
        uint64_t per_batch = st->batch_bytes / size ? st->batch_bytes / size : 1;
        uint64_t start = bench_now_ns(), done, ns;
        char name[32];

        for (done = 0; !bench_warm_done(o, done, start); done++)
                if (batch(st, fd, mode, size, per_batch) == 0)
                        return -1;
        samples_reset(&st->samples);
        start = bench_now_ns();
        for (done = 0; !bench_done(o, done, start); done++) {
                ns = batch(st, fd, mode, size, per_batch);
                if (ns == 0)
                        return -1;
                samples_add(&st->samples, ns / per_batch);
        }
        snprintf(name, sizeof(name), "%s_stream", sock_family_name(st->setup.family));
        bench_report_bandwidth(name, mode == ST_BUSY ? "busy" : "block", size, size, &st->samples);
        return 0;
}

static int client(const struct sock_addr *a, void *arg)
{
        struct st *st = arg;
        struct st_hdr quit = { .magic = ST_MAGIC, .quit = 1 };
        int fd = sock_connect(a, 5.0), r = 0;

        if (fd < 0) {
                fprintf(stderr, "connect: %s\n", strerror(-fd));
                return 1;
        }
        for (unsigned i = 0; i < st->opts.n_sizes && r == 0; i++) {
                if (st->want_busy)
                        r = measure(st, fd, ST_BUSY, st->opts.sizes[i]);
                if (r == 0 && st->want_block)
                        r = measure(st, fd, ST_BLOCK, st->opts.sizes[i]);
        }
        if (r < 0)
                fprintf(stderr, "client: connection lost\n");
        (void)sock_write_full(fd, &quit, sizeof(quit), false);
        close(fd);
        bench_table_print();
        return r == 0 ? 0 : 1;
}

static int parse_opt(int opt, const char *arg, void *ud)
{
        struct st *st = ud;

        if (opt == 'm')
                return bench_parse_modes(arg, &st->want_busy, &st->want_block);
        if (opt != 'b')
                return sock_setup_parse(&st->setup, opt, arg);
        if (bench_parse_size(arg, &st->batch_bytes))
                return 1;
        fprintf(stderr, "bad --batch '%s'\n", arg);
        return -1;
}

static void usage(const char *prog)
{
        printf("Usage: %s [OPTIONS]\n"
               "Streaming bandwidth over a TCP or AF_UNIX stream socket.\n\n"
               BENCH_COMMON_HELP SOCK_HELP
               "  -b, --batch SIZE     bytes per timed batch (default 64M)\n"
               "  -m, --modes LIST     busy, block or busy,block (default busy,block)\n",
               prog);
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                BENCH_COMMON_LONGOPTS,
                SOCK_LONGOPTS,
                { "batch", required_argument, NULL, 'b' },
                { "modes", required_argument, NULL, 'm' },
                {}
        };
        struct st st = { .setup.family = AF_INET, .batch_bytes = 64 << 20, .want_busy = true,
                         .want_block = true };
        int r;

        bench_opts_init(&st.opts, "64K,1M,16M", 10000, 2, 1.0);
        r = bench_parse_args(argc, argv, &st.opts, BENCH_COMMON_SHORTOPTS SOCK_SHORTOPTS "b:m:", longopts,
                             parse_opt, &st, usage);
        if (r != 0)
                return r > 0 ? 0 : 2;

        st.buf = sock_buffer_alloc(&st.setup, &st.opts, &st.max_size, &st.samples);
        bench_warn_shared_cpu(st.opts.cpu[0], st.opts.cpu[1], st.want_busy);

        r = sock_run(&st.setup, &st.opts, serve, client, &st);
        samples_free(&st.samples);
        free(st.buf);
        return r;
}
