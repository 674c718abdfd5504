/* Half round trip of a message over a raw stream socket (TCP or AF_UNIX),
 * the floor for the tcp transport across hosts and the kernel-path floor on
 * one host.  busy: both sides poll the socket with MSG_DONTWAIT; block: both
 * sleep in recv().  TCP_NODELAY on TCP.
 *
 * The client announces each phase with a header (mode, size, count) so the
 * server echoes exactly that many messages: a short probe to judge the time
 * per iteration, the warm-up, then the measured run, all on one connection. */
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

#define PP_MAGIC 0x64627070u    /* "dbpp" */
#define PROBE_ITERS 10

enum pp_mode { PP_QUIT = 0, PP_BUSY = 1, PP_BLOCK = 2 };

struct pp_hdr {
        uint32_t magic;
        uint32_t mode;
        uint64_t size;
        uint64_t count;
};

struct pp {
        struct bench_opts opts;
        struct sock_setup setup;
        bool want_busy, want_block;
        size_t max_size;
        unsigned char *buf;
        struct samples samples;
};

static int serve(int listen_fd, void *arg)
{
        struct pp *pp = arg;
        struct pp_hdr h;
        int fd = sock_accept(listen_fd), r = 1;

        if (fd < 0) {
                fprintf(stderr, "accept: %s\n", strerror(-fd));
                return 1;
        }
        while (sock_read_full(fd, &h, sizeof(h), false) == 0) {
                bool busy = h.mode == PP_BUSY;

                if (h.magic != PP_MAGIC || h.size > pp->max_size) {
                        fprintf(stderr, "server: bad header\n");
                        break;
                }
                if (h.mode == PP_QUIT) {
                        r = 0;
                        break;
                }
                for (uint64_t i = 0; i < h.count; i++)
                        if (sock_read_full(fd, pp->buf, h.size, busy) < 0 ||
                            sock_write_full(fd, pp->buf, h.size, busy) < 0)
                                goto out;
        }
out:
        close(fd);
        return r;
}

/* Runs `count` round trips; with samples, records each half round trip. */
static int phase(struct pp *pp, int fd, enum pp_mode mode, size_t size, uint64_t count,
                 struct samples *s)
{
        struct pp_hdr h = { .magic = PP_MAGIC, .mode = mode, .size = size, .count = count };
        bool busy = mode == PP_BUSY;

        if (sock_write_full(fd, &h, sizeof(h), false) < 0)
                return -1;
        for (uint64_t i = 0; i < count; i++) {
                uint64_t t0 = bench_now_ns();

                if (sock_write_full(fd, pp->buf, size, busy) < 0 ||
                    sock_read_full(fd, pp->buf, size, busy) < 0)
                        return -1;
                if (s)
                        samples_add(s, (bench_now_ns() - t0) / 2);
        }
        return 0;
}

static int measure(struct pp *pp, int fd, enum pp_mode mode, size_t size)
{
        const struct bench_opts *o = &pp->opts;
        uint64_t t0 = bench_now_ns(), probe_ns, warm, n;
        char name[32];

        if (phase(pp, fd, mode, size, PROBE_ITERS, NULL) < 0)
                return -1;
        probe_ns = bench_now_ns() - t0;
        /* The warm-up gets at most a fifth of the measuring time. */
        warm = probe_ns ? (uint64_t)(o->duration / 5 * 1e9 * PROBE_ITERS / (double)probe_ns) : o->warmup;
        if (warm > o->warmup)
                warm = o->warmup;
        if (warm < PROBE_ITERS)
                warm = PROBE_ITERS;
        t0 = bench_now_ns();
        if (phase(pp, fd, mode, size, warm, NULL) < 0)
                return -1;
        /* The warm-up, longer and warmer than the probe, sizes the measured run. */
        n = bench_iters_for(o, bench_now_ns() - t0, warm, 100);
        samples_reset(&pp->samples);
        if (phase(pp, fd, mode, size, n, &pp->samples) < 0)
                return -1;
        snprintf(name, sizeof(name), "%s_pingpong", sock_family_name(pp->setup.family));
        bench_report_latency(name, mode == PP_BUSY ? "busy" : "block", size, &pp->samples);
        return 0;
}

static int client(const struct sock_addr *a, void *arg)
{
        struct pp *pp = arg;
        struct pp_hdr quit = { .magic = PP_MAGIC, .mode = PP_QUIT };
        int fd = sock_connect(a, 5.0), r = 0;

        if (fd < 0) {
                fprintf(stderr, "connect: %s\n", strerror(-fd));
                return 1;
        }
        for (unsigned i = 0; i < pp->opts.n_sizes && r == 0; i++) {
                if (pp->want_busy)
                        r = measure(pp, fd, PP_BUSY, pp->opts.sizes[i]);
                if (r == 0 && pp->want_block)
                        r = measure(pp, fd, PP_BLOCK, pp->opts.sizes[i]);
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
        struct pp *pp = ud;

        if (opt == 'm')
                return bench_parse_modes(arg, &pp->want_busy, &pp->want_block);
        return sock_setup_parse(&pp->setup, opt, arg);
}

static void usage(const char *prog)
{
        printf("Usage: %s [OPTIONS]\n"
               "Half round trip over a TCP or AF_UNIX stream socket, polling and blocking.\n\n"
               BENCH_COMMON_HELP SOCK_HELP
               "  -m, --modes LIST     busy, block or busy,block (default busy,block)\n",
               prog);
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                BENCH_COMMON_LONGOPTS,
                SOCK_LONGOPTS,
                { "modes", required_argument, NULL, 'm' },
                {}
        };
        struct pp pp = { .setup.family = AF_INET, .want_busy = true, .want_block = true };
        int r;

        bench_opts_init(&pp.opts, "8,64,1K,4K,64K,1M", 100000, 1000, 1.0);
        r = bench_parse_args(argc, argv, &pp.opts, BENCH_COMMON_SHORTOPTS SOCK_SHORTOPTS "m:", longopts,
                             parse_opt, &pp, usage);
        if (r != 0)
                return r > 0 ? 0 : 2;

        pp.buf = sock_buffer_alloc(&pp.setup, &pp.opts, &pp.max_size, &pp.samples);
        bench_warn_shared_cpu(pp.opts.cpu[0], pp.opts.cpu[1], pp.want_busy);

        r = sock_run(&pp.setup, &pp.opts, serve, client, &pp);
        samples_free(&pp.samples);
        free(pp.buf);
        return r;
}
