/* conn-rate: how many connections per second datd negotiates.  Not a test
 * (nothing is asserted, make check does not run it): a measurement for the
 * issue's record.
 *
 * Each "pair" is one process holding two raw protocol clients: a listener
 * on its own conn_qual, and a connecter.  One connection is CONNECT ->
 * EV_CONN_REQUEST -> CR_ACCEPT -> EV_CONN ESTABLISHED on the active end ->
 * EV_CONN ESTABLISHED on the passive end, with 64 bytes of private data each
 * way.  Sequential is one pair; concurrent is 8 pairs in 8 processes.
 *
 * Same host: one datd, both clients on its shm IA, connecting to 127.0.0.1.
 * Cross host (when network namespaces are available, see tests/netns.h): a
 * datd on each of two hosts; the listener is a client of host 1's datd, the
 * connecter of host 0's, connecting to host 1's tcp IA address.
 *
 *   conn-rate [--disconnect] [CONNECTIONS-PER-PAIR]      (default 5000)
 *
 * Without --disconnect every connection stays up until the pair exits
 * (datd.conf here allows 2^20 per client); with it, each is disconnected
 * (DISCONNECTED on both ends) before the next, and the rate counts both.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/daemon/conn-client.h"
#include "tests/harness.h"
#include "tests/netns.h"

#define DAT_CONNECTION_EVENT_ESTABLISHED 0x04001u
#define PAIRS 8
#define EV_MS 5000

/* --disconnect: tear each connection down before the next (not timed apart). */
static bool disconnect;

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* One pair: n connections; 0 or -errno. */
static int run_pair(const char *passive_socket, const char *active_socket, const char *ia,
                    const char *addr, uint64_t qual, unsigned n)
{
        struct cc a, b;
        struct sockaddr_storage to;
        socklen_t len = cc_addr4(&to, addr);
        uint8_t pd[64];
        union datp_message ev;
        int r;

        memset(pd, 0x5a, sizeof(pd));
        r = cc_open(&a, passive_socket, ia);
        if (r < 0)
                return r;
        r = cc_open(&b, active_socket, ia);
        if (r < 0)
                return r;
        if (cc_listen(&a, DATP_LISTENER_PSP, qual, NULL, NULL) != 0)
                return -EADDRINUSE;
        for (unsigned i = 0; i < n; i++) {
                uint32_t conn, cr;

                if (cc_connect(&b, (struct sockaddr *) &to, len, qual, 10000000, pd, sizeof(pd), &conn) != 0)
                        return -ECONNREFUSED;
                r = cc_event(&a, DATP_EV_CONN_REQUEST, &ev, EV_MS);
                if (r < 0)
                        return r;
                cr = ev.ev_conn_request.cr_id;
                if (cc_accept(&a, cr, pd, sizeof(pd), NULL) != 0)
                        return -EPROTO;
                r = cc_event(&b, DATP_EV_CONN, &ev, EV_MS);
                if (r < 0 || ev.ev_conn.event != DAT_CONNECTION_EVENT_ESTABLISHED)
                        return r < 0 ? r : -ECONNRESET;
                r = cc_event(&a, DATP_EV_CONN, &ev, EV_MS);
                if (r < 0 || ev.ev_conn.event != DAT_CONNECTION_EVENT_ESTABLISHED)
                        return r < 0 ? r : -ECONNRESET;
                /* The connections stay up, as an application's would. */
                if (!disconnect)
                        continue;
                if (cc_disconnect(&b, conn, DATP_CLOSE_ABRUPT) != 0)
                        return -EPROTO;
                r = cc_event(&b, DATP_EV_CONN, &ev, EV_MS);
                if (r >= 0)
                        r = cc_event(&a, DATP_EV_CONN, &ev, EV_MS);
                if (r < 0)
                        return r;
        }
        cc_close(&a);
        cc_close(&b);
        return 0;
}

/* pairs processes, n connections each: connections per second, or < 0. */
static double measure(const char *passive_socket, const char *active_socket, const char *ia,
                      const char *addr, unsigned pairs, unsigned n)
{
        pid_t pids[PAIRS];
        double t0 = now_s(), t;
        int failed = 0;

        for (unsigned p = 0; p < pairs; p++) {
                pids[p] = fork();
                if (pids[p] == 0) {
                        int r = run_pair(passive_socket, active_socket, ia, addr, 10000 + p, n);

                        if (r < 0)
                                fprintf(stderr, "pair %u: %s\n", p, strerror(-r));
                        _exit(r < 0 ? 1 : 0);
                }
        }
        for (unsigned p = 0; p < pairs; p++) {
                int status;

                waitpid(pids[p], &status, 0);
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        failed = 1;
        }
        t = now_s() - t0;
        return failed ? -1 : (double) pairs * n / t;
}

static void report(const char *where, const char *passive_socket, const char *active_socket,
                   const char *ia, const char *addr, unsigned n)
{
        double seq = measure(passive_socket, active_socket, ia, addr, 1, n);
        double con = measure(passive_socket, active_socket, ia, addr, PAIRS, n);

        printf("%-11s sequential: %9.0f connections/s   %u concurrent: %9.0f connections/s\n",
               where, seq, PAIRS, con);
}

static const char *const config =
        "{\"log_level\": \"info\", \"verbs\": false, \"ias\": ["
        "{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"},"
        "{\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"127.0.0.1\"}],"
        " \"limits\": {\"max_pending_replies\": 4096, \"max_connections_per_client\": 1048576}}";

int main(int argc, char **argv)
{
        unsigned n;

        if (argc > 1 && strcmp(argv[1], "--disconnect") == 0) {
                disconnect = true;
                argc--;
                argv++;
        }
        n = argc > 1 ? (unsigned) strtoul(argv[1], NULL, 10) : 5000;
        struct datd_instance d = {}, h[2] = {};
        struct test_net *net = NULL;
        const char *why;

        if (datd_start(&d, config) < 0) {
                fprintf(stderr, "datd did not start\n");
                return 1;
        }
        report("same host", d.socket_path, d.socket_path, "shm", "127.0.0.1", n);
        datd_stop(&d);

        if (!test_net_available(&why)) {
                printf("cross host: skipped (%s)\n", why);
                return 0;
        }
        if (test_net_create(&net, 2) < 0) {
                fprintf(stderr, "cannot set up two hosts\n");
                return 1;
        }
        for (unsigned i = 0; i < 2; i++) {
                char *base = test_net_datd_config(net, i, false), *cfg;
                size_t len = base ? strlen(base) : 0;

                /* The host's config with room for every connection kept up. */
                if (!base || len < 2 || asprintf(&cfg, "%.*s, \"limits\": {\"max_pending_replies\": 4096,"
                                                 " \"max_connections_per_client\": 1048576}}",
                                                 (int) (strrchr(base, '}') - base), base) < 0) {
                        fprintf(stderr, "no config for host %u\n", i);
                        return 1;
                }
                h[i].netns = test_net_host_ns(net, i);
                if (datd_start(&h[i], cfg) < 0) {
                        fprintf(stderr, "datd did not start on host %u\n", i);
                        return 1;
                }
                free(base);
                free(cfg);
        }
        report("cross host", h[1].socket_path, h[0].socket_path, "tcp",
               test_net_host_addr4(net, 1), n);
        datd_stop(&h[0]);
        datd_stop(&h[1]);
        test_net_destroy(&net);
        return 0;
}
