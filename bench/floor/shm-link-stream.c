/* Streaming bandwidth through the shm link (libdat/shm_link.h): a producer
 * process writes SIZE-byte chunks into a ring of --ring bytes, a consumer
 * process on the other CPU reads them out, both polling (busy) or both
 * sleeping on their doorbells when they cannot go on (block).  Against the
 * slot-ring floor shm-stream: the same two copies, through a byte stream.
 *
 * The producer times batches of --batch bytes from the first write until
 * the consumer has read all of it; each sample is the batch time divided
 * by its chunks. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/common/stats.h"
#include "libdat/shm_link.h"
#include "libdat/shm_region.h"

struct setup {
        void *mem;
        size_t size;
        uint32_t ring_size;
        int doorbell[2];
        size_t max_size;
        bool block;
};

static void attach(const struct setup *st, unsigned side, struct shm_link *l)
{
        if (shm_link_attach(st->mem, st->size, st->ring_size, side, st->doorbell[side],
                            st->doorbell[1 - side], l) != 0)
                bench_die("shm_link_attach failed");
}

static void wait_for(struct shm_link *l, bool block, bool want_room)
{
        struct pollfd p = { .fd = l->doorbell_mine, .events = POLLIN };

        if (!block) {
                bench_cpu_relax();
                return;
        }
        if (!shm_link_arm(l, true, want_room))
                return;
        poll(&p, 1, -1);
        shm_link_disarm(l);
        shm_link_doorbell_drain(l);
}

/* Reads until the producer closes. */
static int consumer(void *arg)
{
        struct setup *st = arg;
        unsigned char *dst = calloc(1, st->max_size);
        struct shm_link l;

        if (!dst)
                return 1;
        attach(st, 1, &l);
        for (;;) {
                struct iovec iov = { dst, st->max_size };
                ssize_t r = shm_link_readv(&l, &iov, 1);

                if (r == -EPIPE)
                        break;
                if (r < 0)
                        bench_die("shm_link_readv: %zd", r);
                if (r == 0)
                        wait_for(&l, st->block, false);
        }
        free(dst);
        return 0;
}

static void produce(struct shm_link *l, const unsigned char *src, size_t size, bool block)
{
        for (size_t off = 0; off < size;) {
                struct iovec iov = { (void *)(src + off), size - off };
                ssize_t w = shm_link_writev(l, &iov, 1);

                if (w < 0)
                        bench_die("shm_link_writev: %zd", w);
                if (w == 0)
                        wait_for(l, block, true);
                off += (size_t)w;
        }
}

/* Until the consumer has read everything written. */
static void drain(struct shm_link *l, bool block)
{
        while (shm_link_writable(l) != SHM_LINK_WRITE_MAX(l->ring_size))
                wait_for(l, block, true);
}

static void measure(struct shm_link *l, const unsigned char *src, const struct bench_opts *o,
                    size_t size, size_t batch_bytes, bool block, struct samples *s)
{
        uint64_t per_batch = batch_bytes / size ? batch_bytes / size : 1;
        uint64_t start = bench_now_ns(), done;

        for (done = 0; !bench_warm_done(o, done, start); done++)
                produce(l, src, size, block);
        drain(l, block);
        samples_reset(s);
        start = bench_now_ns();
        for (done = 0; !bench_done(o, done, start); done++) {
                uint64_t t0 = bench_now_ns();

                for (uint64_t m = 0; m < per_batch; m++)
                        produce(l, src, size, block);
                drain(l, block);
                samples_add(s, (bench_now_ns() - t0) / per_batch);
        }
        bench_report_bandwidth("shm_link_stream", block ? "block" : "busy", size, size, s);
}

struct stream_opts {
        size_t ring, batch;
        bool busy, block;
};

static int parse_opt(int opt, const char *arg, void *ud)
{
        struct stream_opts *so = ud;
        bool ok;

        switch (opt) {
        case 'R':
                ok = bench_parse_size(arg, &so->ring) && shm_link_region_size((uint32_t)so->ring) != 0;
                break;
        case 'b':
                ok = bench_parse_size(arg, &so->batch);
                break;
        case 'm':
                return bench_parse_modes(arg, &so->busy, &so->block);
        default:
                return 0;
        }
        if (!ok)
                fprintf(stderr, "bad -%c '%s'\n", opt, arg);
        return ok ? 1 : -1;
}

static void usage(const char *prog)
{
        printf("Usage: %s [OPTIONS]\n"
               "Streaming bandwidth of SIZE-byte writes through the shm link between two\n"
               "pinned processes.\n\n" BENCH_COMMON_HELP
               "  -R, --ring SIZE      ring size, a power of two (default 256K)\n"
               "  -b, --batch SIZE     bytes per timed batch (default 64M)\n"
               "  -m, --modes LIST     busy, block or busy,block (default busy)\n",
               prog);
}

/* One run per mode: the consumer's mode is fixed when it starts. */
static int run(struct setup *st, const struct bench_opts *o, const struct stream_opts *so,
               const unsigned char *src, struct samples *s)
{
        struct shm_link l;
        pid_t pid;

        if (shm_link_init(st->mem, st->size, st->ring_size) != 0)
                bench_die("shm_link_init failed");
        pid = bench_spawn(o->cpu[0], consumer, st);
        attach(st, 0, &l);
        for (unsigned i = 0; i < o->n_sizes; i++)
                measure(&l, src, o, o->sizes[i], so->batch, st->block, s);
        shm_link_close_tx(&l);
        return bench_reap(pid);
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                BENCH_COMMON_LONGOPTS,
                { "ring", required_argument, NULL, 'R' },
                { "batch", required_argument, NULL, 'b' },
                { "modes", required_argument, NULL, 'm' },
                {}
        };
        struct bench_opts o;
        struct stream_opts so = { .ring = 256 << 10, .batch = 64 << 20, .busy = true };
        struct setup st;
        unsigned char *src;
        struct samples s;
        int fd, rc = 0;

        bench_opts_init(&o, "64K", 10000, 4, 1.0);
        rc = bench_parse_args(argc, argv, &o, BENCH_COMMON_SHORTOPTS "R:b:m:", longopts, parse_opt,
                              &so, usage);
        if (rc != 0)
                return rc > 0 ? 0 : 2;
        st = (struct setup){
                .ring_size = (uint32_t)so.ring,
                .size = shm_link_region_size((uint32_t)so.ring),
                .max_size = bench_max_size(&o),
        };
        if (shm_region_create(st.size, &fd, &st.mem) != 0)
                bench_die("cannot make the region");
        memset(st.mem, 0, st.size);     /* fault every page in before anything is timed */
        for (int i = 0; i < 2; i++)
                if ((st.doorbell[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
                        bench_die("eventfd: %m");
        src = malloc(st.max_size);
        if (!src || samples_init(&s, o.iters) < 0)
                bench_die("out of memory");
        memset(src, 0xa5, st.max_size);

        bench_warn_shared_cpu(o.cpu[0], o.cpu[1], so.busy);
        if (bench_pin(o.cpu[1]) < 0)
                bench_die("cannot pin to CPU %d", o.cpu[1]);
        if (so.busy)
                rc |= run(&st, &o, &so, src, &s);
        if (so.block) {
                st.block = true;
                rc |= run(&st, &o, &so, src, &s);
        }
        bench_table_print();
        samples_free(&s);
        free(src);
        return rc == 0 ? 0 : 1;
}
