/* The physical floor of a same-host message: two processes pinned to
 * different CPUs pass a message through a shared mapping and back.
 *
 * Each direction has one 64-byte line holding the sequence number, the size
 * and up to 48 bytes of payload, so an 8-byte message moves exactly one
 * cache line each way.  Larger messages go through a data area beside it.
 * Every hop is one copy in by the sender and one copy out by the receiver,
 * the least a message-passing transport can do without remapping pages.
 *
 *   busy:  the receiver spins on the sequence number (polling).
 *   block: the receiver sleeps in futex(FUTEX_WAIT) and the sender wakes it
 *          on every hop: the floor of a blocking wait.
 *
 * The client (parent) times each round trip; half of it is reported. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <getopt.h>
#include <linux/futex.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/common/stats.h"

#define INLINE_MAX 48

enum cmd { CMD_ECHO_BUSY = 1, CMD_ECHO_BLOCK, CMD_QUIT };

struct line {
        alignas(64) _Atomic uint32_t seq;
        uint32_t cmd;
        uint64_t size;
        unsigned char inline_data[INLINE_MAX];
};

struct channel {
        struct line *line;
        unsigned char *area;
};

struct pair {
        struct channel ping;    /* client -> server */
        struct channel pong;    /* server -> client */
        size_t max_size;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t old)
{
        /* Shared mapping between processes: not FUTEX_PRIVATE. */
        syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, old, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
        syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static void chan_send(struct channel *c, uint32_t seq, enum cmd cmd, const void *src, size_t size,
                      bool wake)
{
        if (size > 0)
                memcpy(size <= INLINE_MAX ? c->line->inline_data : c->area, src, size);
        c->line->cmd = cmd;
        c->line->size = size;
        atomic_store_explicit(&c->line->seq, seq, memory_order_release);
        if (wake)
                futex_wake(&c->line->seq);
}

static void chan_wait(struct channel *c, uint32_t seq, bool block)
{
        uint32_t cur;

        while ((cur = atomic_load_explicit(&c->line->seq, memory_order_acquire)) != seq) {
                if (block)
                        futex_wait(&c->line->seq, cur);
                else
                        bench_cpu_relax();
        }
}

static void chan_recv(struct channel *c, void *dst, size_t size)
{
        memcpy(dst, size <= INLINE_MAX ? c->line->inline_data : c->area, size);
}

static int server(void *arg)
{
        struct pair *p = arg;
        unsigned char *buf = malloc(p->max_size);
        bool block = false;

        if (!buf)
                return 1;
        memset(buf, 0, p->max_size);
        for (uint32_t seq = 1;; seq++) {
                chan_wait(&p->ping, seq, block);
                enum cmd cmd = p->ping.line->cmd;
                size_t size = p->ping.line->size;

                if (cmd == CMD_QUIT) {
                        chan_send(&p->pong, seq, CMD_QUIT, NULL, 0, true);
                        break;
                }
                block = cmd == CMD_ECHO_BLOCK;
                chan_recv(&p->ping, buf, size);
                chan_send(&p->pong, seq, cmd, buf, size, block);
        }
        free(buf);
        return 0;
}

struct client {
        struct pair *pair;
        unsigned char *buf;
        uint32_t seq;
        enum cmd last_cmd;
};

/* One round trip.  The first message after a change of mode always wakes the
 * server: it may be asleep in FUTEX_WAIT from the previous blocking phase. */
static void round_trip(struct client *c, enum cmd cmd, size_t size)
{
        bool block = cmd == CMD_ECHO_BLOCK;

        c->seq++;
        chan_send(&c->pair->ping, c->seq, cmd, c->buf, size, block || cmd != c->last_cmd);
        c->last_cmd = cmd;
        chan_wait(&c->pair->pong, c->seq, block);
        chan_recv(&c->pair->pong, c->buf, size);
}

static void measure(struct client *c, const struct bench_opts *o, enum cmd cmd, size_t size,
                    struct samples *s)
{
        uint64_t start = bench_now_ns(), done;

        for (done = 0; !bench_warm_done(o, done, start); done++)
                round_trip(c, cmd, size);
        samples_reset(s);
        start = bench_now_ns();
        for (done = 0; !bench_done(o, done, start); done++) {
                uint64_t t0 = bench_now_ns();

                round_trip(c, cmd, size);
                samples_add(s, (bench_now_ns() - t0) / 2);
        }
        bench_report_latency("shm_pingpong", cmd == CMD_ECHO_BLOCK ? "block" : "busy", size, s);
}

static void *map_shared(size_t len)
{
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

        if (p == MAP_FAILED)
                bench_die("mmap %zu bytes: %m", len);
        memset(p, 0, len);      /* fault every page in before anything is timed */
        return p;
}

struct modes {
        bool busy, block;
};

static int parse_opt(int opt, const char *arg, void *ud)
{
        struct modes *m = ud;

        return opt == 'm' ? bench_parse_modes(arg, &m->busy, &m->block) : 0;
}

static void usage(const char *prog)
{
        printf("Usage: %s [OPTIONS]\n"
               "Half round trip of a message copied through shared memory between two pinned\n"
               "processes (the same-host floor).\n\n" BENCH_COMMON_HELP
               "  -m, --modes LIST     busy, block or busy,block (default busy,block)\n",
               prog);
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                BENCH_COMMON_LONGOPTS,
                { "modes", required_argument, NULL, 'm' },
                {}
        };
        struct bench_opts o;
        struct modes modes = { .busy = true, .block = true };
        struct pair pair;
        struct client client = { .pair = &pair };
        struct samples s;
        size_t area_len;
        unsigned char *base;
        pid_t pid;
        int r;

        bench_opts_init(&o, "8,64,1K,4K,64K,1M", 100000, 1000, 1.0);
        r = bench_parse_args(argc, argv, &o, BENCH_COMMON_SHORTOPTS "m:", longopts, parse_opt, &modes,
                             usage);
        if (r != 0)
                return r > 0 ? 0 : 2;

        pair.max_size = bench_max_size(&o);
        area_len = (pair.max_size + 4095) & ~(size_t)4095;
        base = map_shared(2 * sizeof(struct line) + 2 * area_len + 4096);
        pair.ping.line = (struct line *)base;
        pair.pong.line = (struct line *)(base + sizeof(struct line));
        pair.ping.area = base + 4096;
        pair.pong.area = base + 4096 + area_len;
        client.buf = malloc(pair.max_size);
        if (!client.buf || samples_init(&s, o.iters) < 0)
                bench_die("out of memory");
        memset(client.buf, 0xa5, pair.max_size);

        bench_warn_shared_cpu(o.cpu[0], o.cpu[1], modes.busy);
        pid = bench_spawn(o.cpu[0], server, &pair);
        if (bench_pin(o.cpu[1]) < 0)
                bench_die("cannot pin to CPU %d", o.cpu[1]);

        for (unsigned i = 0; i < o.n_sizes; i++) {
                if (modes.busy)
                        measure(&client, &o, CMD_ECHO_BUSY, o.sizes[i], &s);
                if (modes.block)
                        measure(&client, &o, CMD_ECHO_BLOCK, o.sizes[i], &s);
        }
        client.seq++;
        chan_send(&pair.ping, client.seq, CMD_QUIT, NULL, 0, true);
        r = bench_reap(pid);
        bench_table_print();
        samples_free(&s);
        free(client.buf);
        return r == 0 ? 0 : 1;
}
