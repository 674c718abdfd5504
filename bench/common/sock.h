/* Stream sockets for the floor benchmarks: TCP or AF_UNIX, the two roles,
 * and whole-buffer reads and writes that either poll (MSG_DONTWAIT in a
 * loop, the "busy" mode) or sleep in the kernel (the "block" mode).
 *
 * Every socket program runs in one of three roles:
 *   local (default): listens on 127.0.0.1:0 or a private AF_UNIX path, forks
 *                    the server pinned to --cpus A and runs the client on B;
 *   --server ADDR:   serves (run-peers starts it inside one network namespace);
 *   --client ADDR:   connects, retrying for a few seconds while the server
 *                    comes up (run-peers starts it in the other namespace). */
#ifndef DATD_BENCH_SOCK_H
#define DATD_BENCH_SOCK_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "bench/common/stats.h"

struct sock_addr {
        int family;                     /* AF_INET or AF_UNIX */
        struct sockaddr_storage ss;
        socklen_t len;
};

enum sock_role { ROLE_LOCAL, ROLE_SERVER, ROLE_CLIENT };

struct sock_setup {
        enum sock_role role;
        int family;                     /* AF_INET or AF_UNIX */
        const char *addr;               /* --server / --client argument */
        char tmpdir[PATH_MAX];          /* local AF_UNIX: private directory, removed at the end */
};

#define SOCK_SHORTOPTS "f:S:A:"
#define SOCK_LONGOPTS                                           \
        { "family", required_argument, NULL, 'f' },             \
        { "server", required_argument, NULL, 'S' },             \
        { "client", required_argument, NULL, 'A' }

#define SOCK_HELP                                                                       \
        "  -f, --family F       tcp or unix (default tcp)\n"                            \
        "  -S, --server ADDR    only serve, on HOST:PORT (tcp) or PATH (unix)\n"        \
        "  -A, --client ADDR    only run the client, against HOST:PORT or PATH\n"       \
        "                       (without -S/-A: both, forked, on 127.0.0.1 or a private path)\n"

/* Handles -f/-S/-A: 1 if it was one, 0 if not, -1 on a bad argument. */
int sock_setup_parse(struct sock_setup *s, int opt, const char *arg);

/* "tcp" or "unix", for the output lines. */
const char *sock_family_name(int family);

/* The message buffer a role needs: the largest of --sizes, but 64 MiB for a
 * lone server, which learns the sizes only from its client. */
size_t sock_buffer_size(const struct sock_setup *s, const struct bench_opts *o);

/* That buffer, zeroed, its size in *size, and room for o->iters samples;
 * exits on out of memory. */
unsigned char *sock_buffer_alloc(const struct sock_setup *s, const struct bench_opts *o, size_t *size,
                                 struct samples *samples);

/* Runs the roles: the server function gets the listening socket and runs
 * pinned to o->cpu[0]; the client function gets the address to connect to
 * and runs pinned to o->cpu[1].  Returns the exit status to use. */
int sock_run(struct sock_setup *s, const struct bench_opts *o,
             int (*server)(int listen_fd, void *arg), int (*client)(const struct sock_addr *a, void *arg),
             void *arg);

/* A new connection (TCP_NODELAY on TCP), retrying refused / not-yet-there
 * for up to `seconds`.  Returns the fd or -errno. */
int sock_connect(const struct sock_addr *a, double seconds);

/* Accepts one connection (TCP_NODELAY on TCP); returns the fd or -errno. */
int sock_accept(int listen_fd);

/* Reads / writes exactly len bytes.  busy: poll with MSG_DONTWAIT, never
 * sleep.  Returns 0, or -1 on error or end of stream. */
int sock_read_full(int fd, void *buf, size_t len, bool busy);
int sock_write_full(int fd, const void *buf, size_t len, bool busy);

#endif
