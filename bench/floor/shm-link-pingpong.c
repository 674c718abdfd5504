/* The shm link (libdat/shm_link.h) against the same-host floor
 * (shm-pingpong): two pinned processes pass a message of a 32-byte header
 * and `size` payload bytes through the link and back, as the DTO engine
 * will frame a send.
 *
 *   busy:  the receiver spins on shm_link_readv (the link rings no doorbell).
 *   block: the receiver arms, polls its eventfd doorbell and drains it; the
 *          sender rings it on every message.
 *
 * The client (parent) times each round trip; half of it is reported. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

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

#define HEADER 32
#define RING_SIZE (256u << 10)

enum cmd { CMD_ECHO_BUSY = 1, CMD_ECHO_BLOCK, CMD_QUIT };

struct msg_header {
        uint32_t cmd;
        uint32_t size;
        unsigned char rest[HEADER - 8];
};

struct setup {
        void *mem;
        size_t size;
        int doorbell[2];
        size_t max_size;
};

static void attach(const struct setup *st, unsigned side, struct shm_link *l)
{
        if (shm_link_attach(st->mem, st->size, RING_SIZE, side, st->doorbell[side],
                            st->doorbell[1 - side], l) != 0)
                bench_die("shm_link_attach failed");
}

static void wait_readable(struct shm_link *l, bool block)
{
        struct pollfd p = { .fd = l->doorbell_mine, .events = POLLIN };

        if (!block) {
                bench_cpu_relax();
                return;
        }
        if (!shm_link_arm(l, true, false))
                return;
        poll(&p, 1, -1);
        shm_link_disarm(l);
        shm_link_doorbell_drain(l);
}

/* Reads into buf (room bytes) until it holds at least n bytes; returns how
 * many it holds.  One read per message when it is all there, as the DTO
 * engine does: the link's cost per read (a locked store) is paid once. */
static size_t read_at_least(struct shm_link *l, void *buf, size_t got, size_t n, size_t room,
                            bool block)
{
        while (got < n) {
                struct iovec iov = { (char *)buf + got, room - got };
                ssize_t r = shm_link_readv(l, &iov, 1);

                if (r < 0)
                        bench_die("shm_link_readv: %zd", r);
                if (r == 0)
                        wait_readable(l, block);
                got += (size_t)r;
        }
        return got;
}

/* One message: header and payload in one write (the ring is far larger
 * than any message here). */
static void send_msg(struct shm_link *l, const struct msg_header *h, const void *payload)
{
        struct iovec iov[2] = { { (void *)h, HEADER }, { (void *)payload, h->size } };

        if (shm_link_writev(l, iov, 2) != (ssize_t)(HEADER + h->size))
                bench_die("shm_link_writev: short write");
}

static int server(void *arg)
{
        struct setup *st = arg;
        size_t room = HEADER + st->max_size;
        unsigned char *buf = calloc(1, room);
        struct shm_link l;
        bool block = false;

        if (!buf)
                return 1;
        attach(st, 1, &l);
        for (;;) {
                struct msg_header h;
                /* One message in flight: what comes is this message only. */
                size_t got = read_at_least(&l, buf, 0, HEADER, room, block);

                memcpy(&h, buf, HEADER);
                if (h.cmd == CMD_QUIT)
                        break;
                block = h.cmd == CMD_ECHO_BLOCK;
                read_at_least(&l, buf, got, HEADER + h.size, room, block);
                send_msg(&l, &h, buf + HEADER);
        }
        free(buf);
        return 0;
}

struct client {
        struct shm_link link;
        unsigned char *buf;
};

static void round_trip(struct client *c, enum cmd cmd, size_t size)
{
        struct msg_header h = { .cmd = cmd, .size = (uint32_t)size };
        bool block = cmd == CMD_ECHO_BLOCK;

        send_msg(&c->link, &h, c->buf + HEADER);
        read_at_least(&c->link, c->buf, 0, HEADER + size, HEADER + size, block);
}

static void measure(struct client *c, const struct bench_opts *o, enum cmd cmd, size_t size,
                    struct samples *s)
{
        uint64_t start = bench_now_ns(), done, rings = c->link.doorbell_writes;

        for (done = 0; !bench_warm_done(o, done, start); done++)
                round_trip(c, cmd, size);
        samples_reset(s);
        start = bench_now_ns();
        for (done = 0; !bench_done(o, done, start); done++) {
                uint64_t t0 = bench_now_ns();

                round_trip(c, cmd, size);
                samples_add(s, (bench_now_ns() - t0) / 2);
        }
        bench_report_latency("shm_link_pingpong", cmd == CMD_ECHO_BLOCK ? "block" : "busy",
                             HEADER + size, s);
        printf("# %s %zu: client rang the doorbell %llu times\n",
               cmd == CMD_ECHO_BLOCK ? "block" : "busy", HEADER + size,
               (unsigned long long)(c->link.doorbell_writes - rings));
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
               "Half round trip of a 32-byte header and SIZE payload bytes through the shm\n"
               "link (libdat/shm_link.h) between two pinned processes.\n\n" BENCH_COMMON_HELP
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
        struct setup st = { .size = shm_link_region_size(RING_SIZE) };
        struct client client = { 0 };
        struct msg_header quit = { .cmd = CMD_QUIT };
        struct samples s;
        int fd, r;
        pid_t pid;

        bench_opts_init(&o, "8,64,1K,4K,64K", 100000, 1000, 1.0);
        r = bench_parse_args(argc, argv, &o, BENCH_COMMON_SHORTOPTS "m:", longopts, parse_opt, &modes,
                             usage);
        if (r != 0)
                return r > 0 ? 0 : 2;
        st.max_size = bench_max_size(&o);
        if (st.max_size + HEADER > RING_SIZE)
                bench_die("sizes up to %u bytes", RING_SIZE - HEADER);
        if (shm_region_create(st.size, &fd, &st.mem) != 0)
                bench_die("cannot make the region");
        memset(st.mem, 0, st.size);     /* fault every page in before anything is timed */
        if (shm_link_init(st.mem, st.size, RING_SIZE) != 0)
                bench_die("shm_link_init failed");
        for (int i = 0; i < 2; i++)
                if ((st.doorbell[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
                        bench_die("eventfd: %m");
        client.buf = calloc(1, HEADER + st.max_size);
        if (!client.buf || samples_init(&s, o.iters) < 0)
                bench_die("out of memory");

        bench_warn_shared_cpu(o.cpu[0], o.cpu[1], modes.busy);
        pid = bench_spawn(o.cpu[0], server, &st);
        if (bench_pin(o.cpu[1]) < 0)
                bench_die("cannot pin to CPU %d", o.cpu[1]);
        attach(&st, 0, &client.link);
        for (unsigned i = 0; i < o.n_sizes; i++) {
                if (modes.busy)
                        measure(&client, &o, CMD_ECHO_BUSY, o.sizes[i], &s);
                if (modes.block)
                        measure(&client, &o, CMD_ECHO_BLOCK, o.sizes[i], &s);
        }
        send_msg(&client.link, &quit, NULL);
        r = bench_reap(pid);
        bench_table_print();
        samples_free(&s);
        free(client.buf);
        return r == 0 ? 0 : 1;
}
