/* The streaming floor of a shared-memory ring: a producer process copies
 * messages into a ring of fixed-size slots in a shared mapping, a consumer
 * process on the other CPU copies them out, both polling.  This is what a
 * send over the shm transport costs when it is chunked through the ring
 * (two copies, overlapped), as opposed to one process_vm_writev (copy-bw).
 *
 * The producer times batches of messages (about --batch bytes each, at least
 * one message) from the first copy in until the consumer has emptied the
 * ring; each sample is the batch time divided by its messages. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <getopt.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/common/stats.h"

struct ring_ctl {
        alignas(64) _Atomic uint64_t head;      /* slots published by the producer */
        alignas(64) _Atomic uint64_t tail;      /* slots consumed by the consumer */
        alignas(64) _Atomic uint32_t quit;
};

struct slot_hdr {
        uint64_t len, offset;   /* of this chunk inside its message */
};

struct ring {
        struct ring_ctl *ctl;
        struct slot_hdr *hdr;
        unsigned char *data;
        size_t slot_size;
        unsigned n_slots;
        size_t max_size;
};

static int consumer(void *arg)
{
        struct ring *r = arg;
        unsigned char *dst = malloc(r->max_size);
        uint64_t tail = 0;

        if (!dst)
                return 1;
        memset(dst, 0, r->max_size);
        for (;;) {
                while (atomic_load_explicit(&r->ctl->head, memory_order_acquire) == tail) {
                        if (atomic_load_explicit(&r->ctl->quit, memory_order_acquire)) {
                                free(dst);
                                return 0;
                        }
                        bench_cpu_relax();
                }
                unsigned slot = tail % r->n_slots;

                memcpy(dst + r->hdr[slot].offset, r->data + (size_t)slot * r->slot_size,
                       r->hdr[slot].len);
                atomic_store_explicit(&r->ctl->tail, ++tail, memory_order_release);
        }
}

static void produce(struct ring *r, uint64_t *head, const unsigned char *src, size_t size)
{
        for (size_t off = 0; off < size; off += r->slot_size) {
                size_t len = size - off < r->slot_size ? size - off : r->slot_size;
                unsigned slot = *head % r->n_slots;

                while (*head - atomic_load_explicit(&r->ctl->tail, memory_order_acquire) >= r->n_slots)
                        bench_cpu_relax();
                memcpy(r->data + (size_t)slot * r->slot_size, src + off, len);
                r->hdr[slot] = (struct slot_hdr){ .len = len, .offset = off };
                atomic_store_explicit(&r->ctl->head, ++*head, memory_order_release);
        }
}

static void drain(struct ring *r, uint64_t head)
{
        while (atomic_load_explicit(&r->ctl->tail, memory_order_acquire) != head)
                bench_cpu_relax();
}

static void measure(struct ring *r, uint64_t *head, const unsigned char *src,
                    const struct bench_opts *o, size_t size, size_t batch_bytes, struct samples *s)
{
        uint64_t per_batch = batch_bytes / size ? batch_bytes / size : 1;
        uint64_t start = bench_now_ns(), done;

        for (done = 0; !bench_warm_done(o, done, start); done++)
                produce(r, head, src, size);
        drain(r, *head);
        samples_reset(s);
        start = bench_now_ns();
        for (done = 0; !bench_done(o, done, start); done++) {
                uint64_t t0 = bench_now_ns();

                for (uint64_t m = 0; m < per_batch; m++)
                        produce(r, head, src, size);
                drain(r, *head);
                samples_add(s, (bench_now_ns() - t0) / per_batch);
        }
        bench_report_bandwidth("shm_stream", NULL, size, size, s);
}

struct ring_opts {
        size_t slot_size, n_slots, batch;
};

static int parse_opt(int opt, const char *arg, void *ud)
{
        struct ring_opts *ro = ud;
        bool ok;

        switch (opt) {
        case 'C':
                ok = bench_parse_size(arg, &ro->slot_size);
                break;
        case 'N':
                ok = bench_parse_size(arg, &ro->n_slots) && ro->n_slots <= 4096 / sizeof(struct slot_hdr);
                break;
        case 'b':
                ok = bench_parse_size(arg, &ro->batch);
                break;
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
               "Streaming bandwidth through a shared-memory ring between two pinned processes\n"
               "(copy in, copy out, both polling).\n\n" BENCH_COMMON_HELP
               "  -C, --slot SIZE      ring slot size (default 64K)\n"
               "  -N, --slots N        ring slots (default 16)\n"
               "  -b, --batch SIZE     bytes per timed batch (default 64M)\n",
               prog);
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                BENCH_COMMON_LONGOPTS,
                { "slot", required_argument, NULL, 'C' },
                { "slots", required_argument, NULL, 'N' },
                { "batch", required_argument, NULL, 'b' },
                {}
        };
        struct bench_opts o;
        struct ring_opts ro = { .slot_size = 64 << 10, .n_slots = 16, .batch = 64 << 20 };
        struct ring r;
        unsigned char *base, *src;
        struct samples s;
        uint64_t head = 0;
        size_t len;
        pid_t pid;
        int rc;

        bench_opts_init(&o, "64K,1M,16M", 10000, 4, 1.0);
        rc = bench_parse_args(argc, argv, &o, BENCH_COMMON_SHORTOPTS "C:N:b:", longopts, parse_opt, &ro,
                              usage);
        if (rc != 0)
                return rc > 0 ? 0 : 2;
        r = (struct ring){
                .slot_size = ro.slot_size,
                .n_slots = (unsigned)ro.n_slots,
                .max_size = bench_max_size(&o),
        };

        len = 4096 + 4096 + r.n_slots * r.slot_size;
        base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
                bench_die("mmap: %m");
        memset(base, 0, len);
        r.ctl = (struct ring_ctl *)base;
        r.hdr = (struct slot_hdr *)(base + 4096);
        r.data = base + 8192;
        src = malloc(r.max_size);
        if (!src || samples_init(&s, o.iters) < 0)
                bench_die("out of memory");
        memset(src, 0xa5, r.max_size);

        bench_warn_shared_cpu(o.cpu[0], o.cpu[1], true);
        pid = bench_spawn(o.cpu[0], consumer, &r);
        if (bench_pin(o.cpu[1]) < 0)
                bench_die("cannot pin to CPU %d", o.cpu[1]);
        for (unsigned i = 0; i < o.n_sizes; i++)
                measure(&r, &head, src, &o, o.sizes[i], ro.batch, &s);
        atomic_store_explicit(&r.ctl->quit, 1, memory_order_release);
        rc = bench_reap(pid);
        bench_table_print();
        samples_free(&s);
        free(src);
        return rc == 0 ? 0 : 1;
}
