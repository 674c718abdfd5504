/* The bandwidth floor of moving bytes on one host:
 *
 *   memcpy:    one process copies between two private buffers (the most a
 *              single copy can do; a transport that copies twice gets less);
 *   vm_writev: process_vm_writev() from the caller into a buffer of another
 *              process, the single-copy path the shm transport takes for
 *              large payloads and RDMA writes (cross-memory attach);
 *   vm_readv:  process_vm_readv() from that buffer, the RDMA-read path.
 *
 * The target process is a child pinned to the other CPU: the kernel demands
 * ptrace access to it (same user, and under Yama ptrace_scope=1 an ancestor),
 * which a parent has.  Each operation moves one whole buffer and is timed on
 * its own; the bandwidth of the median operation is reported. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/common/stats.h"

enum copy_kind { COPY_MEMCPY, COPY_VM_WRITEV, COPY_VM_READV };

static const char *const copy_names[] = {
        [COPY_MEMCPY] = "memcpy",
        [COPY_VM_WRITEV] = "vm_writev",
        [COPY_VM_READV] = "vm_readv",
};

struct target {
        int ready_fd;           /* the child writes its buffer's address here */
        int quit_fd;            /* and blocks reading this until the parent closes it */
        int parent_fds[2];      /* the parent's ends, closed in the child */
        size_t size;
};

static int target_main(void *arg)
{
        struct target *t = arg;
        unsigned char *buf = malloc(t->size);
        char c;

        close(t->parent_fds[0]);
        close(t->parent_fds[1]);
        if (!buf)
                return 1;
        memset(buf, 0x5a, t->size);     /* every page present before the first copy */
        if (write(t->ready_fd, &buf, sizeof(buf)) != (ssize_t)sizeof(buf))
                return 1;
        while (read(t->quit_fd, &c, 1) < 0 && errno == EINTR)
                ;
        free(buf);
        return 0;
}

struct copier {
        enum copy_kind kind;
        pid_t target;
        void *remote;           /* the target's buffer */
        unsigned char *src, *dst;
};

static void copy_once(const struct copier *c, size_t size)
{
        struct iovec local, remote = { .iov_base = c->remote, .iov_len = size };
        ssize_t n;

        switch (c->kind) {
        case COPY_MEMCPY:
                memcpy(c->dst, c->src, size);
                /* Keeps the copy from being proven dead. */
                __asm__ __volatile__("" : : "r"(c->dst) : "memory");
                return;
        case COPY_VM_WRITEV:
                local = (struct iovec){ .iov_base = c->src, .iov_len = size };
                n = process_vm_writev(c->target, &local, 1, &remote, 1, 0);
                break;
        case COPY_VM_READV:
        default:
                local = (struct iovec){ .iov_base = c->dst, .iov_len = size };
                n = process_vm_readv(c->target, &local, 1, &remote, 1, 0);
                break;
        }
        if (n != (ssize_t)size)
                bench_die("%s of %zu bytes: %zd (%m)", copy_names[c->kind], size, n);
}

static void measure(const struct copier *c, const struct bench_opts *o, size_t size,
                    struct samples *s)
{
        uint64_t start = bench_now_ns(), done;

        for (done = 0; !bench_warm_done(o, done, start); done++)
                copy_once(c, size);
        samples_reset(s);
        start = bench_now_ns();
        for (done = 0; !bench_done(o, done, start); done++) {
                uint64_t t0 = bench_now_ns();

                copy_once(c, size);
                samples_add(s, bench_now_ns() - t0);
        }
        bench_report_bandwidth(copy_names[c->kind], NULL, size, size, s);
}

static void usage(const char *prog)
{
        printf("Usage: %s [OPTIONS]\n"
               "Bandwidth of memcpy and of process_vm_writev/readv between two pinned processes.\n\n"
               BENCH_COMMON_HELP
               "  -k, --kinds LIST     any of memcpy,vm_writev,vm_readv (default all)\n",
               prog);
}

static int parse_opt(int opt, const char *arg, void *ud)
{
        if (opt != 'k')
                return 0;
        *(const char **)ud = arg;
        return 1;
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                BENCH_COMMON_LONGOPTS,
                { "kinds", required_argument, NULL, 'k' },
                {}
        };
        const char *kinds = "memcpy,vm_writev,vm_readv";
        struct bench_opts o;
        struct copier c = {};
        struct target t;
        struct samples s;
        int ready[2], quit[2], r;
        size_t size;

        bench_opts_init(&o, "64K,1M,16M", 100000, 20, 1.0);
        r = bench_parse_args(argc, argv, &o, BENCH_COMMON_SHORTOPTS "k:", longopts, parse_opt, &kinds,
                             usage);
        if (r != 0)
                return r > 0 ? 0 : 2;

        size = bench_max_size(&o);
        c.src = malloc(size);
        c.dst = malloc(size);
        if (!c.src || !c.dst || samples_init(&s, o.iters) < 0)
                bench_die("out of memory");
        memset(c.src, 0xa5, size);
        memset(c.dst, 0, size);

        if (pipe(ready) < 0 || pipe(quit) < 0)
                bench_die("pipe: %m");
        t = (struct target){
                .ready_fd = ready[1],
                .quit_fd = quit[0],
                .parent_fds = { ready[0], quit[1] },
                .size = size,
        };
        c.target = bench_spawn(o.cpu[0], target_main, &t);
        close(ready[1]);
        close(quit[0]);
        if (read(ready[0], &c.remote, sizeof(c.remote)) != (ssize_t)sizeof(c.remote))
                bench_die("the target process did not start");
        if (bench_pin(o.cpu[1]) < 0)
                bench_die("cannot pin to CPU %d", o.cpu[1]);

        for (enum copy_kind k = COPY_MEMCPY; k <= COPY_VM_READV; k++) {
                if (!strstr(kinds, copy_names[k]))
                        continue;
                c.kind = k;
                for (unsigned i = 0; i < o.n_sizes; i++)
                        measure(&c, &o, o.sizes[i], &s);
        }
        close(quit[1]);
        r = bench_reap(c.target);
        bench_table_print();
        samples_free(&s);
        free(c.src);
        free(c.dst);
        return r == 0 ? 0 : 1;
}
