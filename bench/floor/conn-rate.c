/* Connection rate over raw stream sockets: the floor for datd's connection
 * setup.  One connection is: connect, 64 bytes from the client, 64 bytes
 * back, the server closes, the client reads the end of stream and closes;
 * the same round trips DAT's connect -> established (with private data on
 * both sides) -> disconnect needs at the least.
 *
 * The server is one thread with epoll, as datd is one event loop.  The
 * client side runs 1 client ("seq") and then --clients concurrent ones
 * ("conc"), threads of one process pinned to the other CPU.
 *
 * The server closes first, so TIME_WAIT lands on its side and the client
 * never runs out of ephemeral ports however many connections it makes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/common/sock.h"
#include "bench/common/stats.h"

#define MSG_LEN 64
#define QUIT_BYTE 'Q'

struct rate {
        struct bench_opts opts;
        struct sock_setup setup;
        unsigned clients;
        const struct sock_addr *addr;
        _Atomic bool stop;
        _Atomic uint64_t budget;        /* connections left before the cap (o->iters) */
};

/* Per-connection progress of the server, indexed by fd. */
struct server_state {
        unsigned char *got;
        size_t n_fds;
        int ep;
};

static int server_accept_all(struct server_state *st, int listen_fd)
{
        for (;;) {
                int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                struct epoll_event ev = { .events = EPOLLIN };

                if (fd < 0)
                        return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED ? 0 : -1;
                if ((size_t)fd >= st->n_fds) {
                        close(fd);
                        continue;
                }
                st->got[fd] = 0;
                ev.data.fd = fd;
                if (epoll_ctl(st->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
                        close(fd);
        }
}

/* Returns 1 when the client asked the server to quit. */
static int server_read(struct server_state *st, int fd)
{
        unsigned char buf[MSG_LEN];
        ssize_t n = read(fd, buf, sizeof(buf) - st->got[fd]);
        int quit;

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                close(fd);      /* also leaves the epoll set */
                return 0;
        }
        quit = st->got[fd] == 0 && buf[0] == QUIT_BYTE;
        st->got[fd] += (unsigned char)n;
        if (st->got[fd] < MSG_LEN)
                return 0;
        /* A fresh socket's send buffer always takes 64 bytes. */
        if (write(fd, buf, MSG_LEN) != MSG_LEN)
                fprintf(stderr, "server: short reply\n");
        close(fd);
        return quit;
}

static int serve(int listen_fd, void *arg)
{
        struct server_state st = {};
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = listen_fd }, evs[64];
        struct rlimit rl;
        int quit = 0;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 ||
            fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK) < 0)
                return 1;
        st.n_fds = rl.rlim_cur > 1u << 20 ? 1u << 20 : rl.rlim_cur;
        st.got = calloc(st.n_fds, 1);
        st.ep = epoll_create1(EPOLL_CLOEXEC);
        if (!st.got || st.ep < 0 || epoll_ctl(st.ep, EPOLL_CTL_ADD, listen_fd, &ev) < 0)
                return 1;
        while (!quit) {
                int n = epoll_wait(st.ep, evs, 64, -1);

                if (n < 0 && errno != EINTR)
                        break;
                for (int i = 0; i < n; i++) {
                        if (evs[i].data.fd == listen_fd) {
                                if (server_accept_all(&st, listen_fd) < 0)
                                        fprintf(stderr, "accept: %m\n");
                        } else {
                                quit |= server_read(&st, evs[i].data.fd);
                        }
                }
        }
        close(st.ep);
        free(st.got);
        return quit ? 0 : 1;
}

struct worker {
        struct rate *rate;
        struct samples samples;
        uint64_t count;
        uint64_t end_ns;
        int error;
        pthread_t thread;
};

static int one_connection(const struct sock_addr *a, bool quit)
{
        unsigned char buf[MSG_LEN];
        int fd = sock_connect(a, 0), r = 0;

        if (fd < 0)
                return fd;
        memset(buf, quit ? QUIT_BYTE : 'x', sizeof(buf));
        if (sock_write_full(fd, buf, sizeof(buf), false) < 0 ||
            sock_read_full(fd, buf, sizeof(buf), false) < 0)
                r = -EPROTO;
        /* The disconnect: wait for the server's end of stream. */
        else if (read(fd, buf, 1) != 0)
                r = -EPROTO;
        close(fd);
        return r;
}

static bool take_budget(struct rate *rate)
{
        uint64_t b = atomic_load(&rate->budget);

        while (b > 0)
                if (atomic_compare_exchange_weak(&rate->budget, &b, b - 1))
                        return true;
        return false;
}

static void *worker_main(void *p)
{
        struct worker *w = p;

        while (!atomic_load_explicit(&w->rate->stop, memory_order_relaxed) && take_budget(w->rate)) {
                uint64_t t0 = bench_now_ns();

                w->error = one_connection(w->rate->addr, false);
                if (w->error < 0)
                        break;
                samples_add(&w->samples, bench_now_ns() - t0);
                w->count++;
        }
        w->end_ns = bench_now_ns();
        return NULL;
}

static int run_phase(struct rate *rate, const char *mode, unsigned clients, struct samples *all)
{
        const struct bench_opts *o = &rate->opts;
        struct worker *w = calloc(clients, sizeof(*w));
        uint64_t start, end = 0, count = 0;
        char name[32];
        int r = 0;

        if (!w)
                return -ENOMEM;
        atomic_store(&rate->stop, false);
        atomic_store(&rate->budget, o->iters);
        start = bench_now_ns();
        for (unsigned i = 0; i < clients; i++) {
                w[i].rate = rate;
                if (samples_init(&w[i].samples, o->iters) < 0 ||
                    pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0)
                        bench_die("cannot start client %u", i);
        }
        while ((double)(bench_now_ns() - start) < o->duration * 1e9 && atomic_load(&rate->budget) > 0)
                usleep(1000);
        atomic_store(&rate->stop, true);
        samples_reset(all);
        for (unsigned i = 0; i < clients; i++) {
                pthread_join(w[i].thread, NULL);
                if (w[i].error < 0) {
                        fprintf(stderr, "client %u: %s\n", i, strerror(-w[i].error));
                        r = w[i].error;
                }
                for (size_t k = 0; k < w[i].samples.n; k++)
                        samples_add(all, w[i].samples.ns[k]);
                count += w[i].count;
                if (w[i].end_ns > end)
                        end = w[i].end_ns;
                samples_free(&w[i].samples);
        }
        free(w);
        snprintf(name, sizeof(name), "%s_connect", sock_family_name(rate->setup.family));
        bench_report_rate(name, mode, clients, MSG_LEN, count, end - start, all);
        return r;
}

static int client(const struct sock_addr *a, void *arg)
{
        struct rate *rate = arg;
        const struct bench_opts *o = &rate->opts;
        struct samples all;
        uint64_t start = bench_now_ns(), done;
        int r = 0;

        rate->addr = a;
        if (samples_init(&all, o->iters) < 0)
                return 1;
        /* The server may still be starting: the first connection retries. */
        r = sock_connect(a, 5.0);
        if (r >= 0) {
                close(r);
                r = 0;
        }
        for (done = 0; r == 0 && !bench_warm_done(o, done, start); done++)
                r = one_connection(a, false);
        if (r == 0)
                r = run_phase(rate, "seq", 1, &all);
        if (r == 0 && rate->clients > 1)
                r = run_phase(rate, "conc", rate->clients, &all);
        if (r < 0)
                fprintf(stderr, "client: %s\n", strerror(-r));
        (void)one_connection(a, true);
        samples_free(&all);
        bench_table_print();
        return r == 0 ? 0 : 1;
}

static int parse_opt(int opt, const char *arg, void *ud)
{
        struct rate *rate = ud;
        size_t clients;

        if (opt != 'k')
                return sock_setup_parse(&rate->setup, opt, arg);
        if (bench_parse_size(arg, &clients) && clients <= 256) {
                rate->clients = (unsigned)clients;
                return 1;
        }
        fprintf(stderr, "bad --clients '%s' (1 to 256)\n", arg);
        return -1;
}

static void usage(const char *prog)
{
        printf("Usage: %s [OPTIONS]\n"
               "Connections per second: connect, 64 B each way, disconnect; one client, then\n"
               "several concurrent ones.\n\n" BENCH_COMMON_HELP SOCK_HELP
               "  -k, --clients N      concurrent clients in the second phase (default 8)\n"
               "(-n caps the connections of a phase, -w is the warm-up, -s is ignored)\n",
               prog);
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                BENCH_COMMON_LONGOPTS,
                SOCK_LONGOPTS,
                { "clients", required_argument, NULL, 'k' },
                {}
        };
        struct rate rate = { .setup.family = AF_INET, .clients = 8 };
        int r;

        bench_opts_init(&rate.opts, "64", 50000, 200, 1.0);
        r = bench_parse_args(argc, argv, &rate.opts, BENCH_COMMON_SHORTOPTS SOCK_SHORTOPTS "k:", longopts,
                             parse_opt, &rate, usage);
        if (r != 0)
                return r > 0 ? 0 : 2;
        return sock_run(&rate.setup, &rate.opts, serve, client, &rate);
}
