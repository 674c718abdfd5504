/* Stream sockets for the floor benchmarks (see sock.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "bench/common/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench/common/proc.h"

int sock_setup_parse(struct sock_setup *s, int opt, const char *arg)
{
        switch (opt) {
        case 'f':
                if (strcmp(arg, "tcp") == 0) {
                        s->family = AF_INET;
                } else if (strcmp(arg, "unix") == 0) {
                        s->family = AF_UNIX;
                } else {
                        fprintf(stderr, "bad --family '%s' (tcp or unix)\n", arg);
                        return -1;
                }
                return 1;
        case 'S':
        case 'A':
                s->role = opt == 'S' ? ROLE_SERVER : ROLE_CLIENT;
                s->addr = arg;
                return 1;
        }
        return 0;
}

const char *sock_family_name(int family)
{
        return family == AF_UNIX ? "unix" : "tcp";
}

/* HOST:PORT (HOST numeric IPv4) or a path. */
static int parse_addr(int family, const char *spec, struct sock_addr *a)
{
        memset(a, 0, sizeof(*a));
        a->family = family;
        if (family == AF_UNIX) {
                struct sockaddr_un *un = (struct sockaddr_un *)&a->ss;

                if (strlen(spec) >= sizeof(un->sun_path))
                        return -ENAMETOOLONG;
                un->sun_family = AF_UNIX;
                strcpy(un->sun_path, spec);
                a->len = sizeof(*un);
                return 0;
        }

        struct sockaddr_in *in = (struct sockaddr_in *)&a->ss;
        char host[64];
        const char *colon = strrchr(spec, ':');
        char *end;
        long port;

        if (!colon || (size_t)(colon - spec) >= sizeof(host))
                return -EINVAL;
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = '\0';
        port = strtol(colon + 1, &end, 10);
        if (*end != '\0' || port < 0 || port > 65535)
                return -EINVAL;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
                return -EINVAL;
        a->len = sizeof(*in);
        return 0;
}

static void tune(int fd, int family)
{
        int one = 1;

        if (family == AF_INET)
                (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int sock_listen(struct sock_addr *a)
{
        int fd, one = 1;

        fd = socket(a->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (a->family == AF_INET)
                (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        else
                (void)unlink(((struct sockaddr_un *)&a->ss)->sun_path);
        if (bind(fd, (struct sockaddr *)&a->ss, a->len) < 0 || listen(fd, 4096) < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        /* Port 0 asked the kernel for one: tell the client which. */
        a->len = sizeof(a->ss);
        if (getsockname(fd, (struct sockaddr *)&a->ss, &a->len) < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

int sock_connect(const struct sock_addr *a, double seconds)
{
        uint64_t start = bench_now_ns();

        for (;;) {
                int fd = socket(a->family, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

                if (fd < 0)
                        return -errno;
                if (connect(fd, (const struct sockaddr *)&a->ss, a->len) == 0) {
                        tune(fd, a->family);
                        return fd;
                }
                r = -errno;
                close(fd);
                if ((r != -ECONNREFUSED && r != -ENOENT) ||
                    (double)(bench_now_ns() - start) > seconds * 1e9)
                        return r;
                usleep(10000);
        }
}

int sock_accept(int listen_fd)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd;

        do
                fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        if (fd < 0)
                return -errno;
        if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
                tune(fd, ss.ss_family);
        return fd;
}

int sock_read_full(int fd, void *buf, size_t len, bool busy)
{
        size_t got = 0;

        while (got < len) {
                ssize_t n = recv(fd, (char *)buf + got, len - got, busy ? MSG_DONTWAIT : 0);

                if (n > 0) {
                        got += (size_t)n;
                } else if (n == 0) {
                        return -1;
                } else if (errno == EAGAIN || errno == EINTR) {
                        if (busy)
                                bench_cpu_relax();
                } else {
                        return -1;
                }
        }
        return 0;
}

int sock_write_full(int fd, const void *buf, size_t len, bool busy)
{
        size_t put = 0;

        while (put < len) {
                ssize_t n = send(fd, (const char *)buf + put, len - put,
                                 MSG_NOSIGNAL | (busy ? MSG_DONTWAIT : 0));

                if (n >= 0) {
                        put += (size_t)n;
                } else if (errno == EAGAIN || errno == EINTR) {
                        if (busy)
                                bench_cpu_relax();
                } else {
                        return -1;
                }
        }
        return 0;
}

size_t sock_buffer_size(const struct sock_setup *s, const struct bench_opts *o)
{
        size_t m = bench_max_size(o);

        return s->role == ROLE_SERVER && m < (64u << 20) ? 64u << 20 : m;
}

unsigned char *sock_buffer_alloc(const struct sock_setup *s, const struct bench_opts *o, size_t *size,
                                 struct samples *samples)
{
        unsigned char *buf;

        *size = sock_buffer_size(s, o);
        /* calloc: the pages are touched by the warm-up, not here. */
        buf = calloc(1, *size);
        if (!buf || samples_init(samples, o->iters) < 0)
                bench_die("out of memory");
        return buf;
}

struct server_child {
        int listen_fd;
        int (*server)(int listen_fd, void *arg);
        void *arg;
};

static int server_child_main(void *p)
{
        struct server_child *c = p;

        return c->server(c->listen_fd, c->arg);
}

static int run_local(struct sock_setup *s, const struct bench_opts *o,
                     int (*server)(int, void *), int (*client)(const struct sock_addr *, void *),
                     void *arg)
{
        struct server_child child = { .server = server, .arg = arg };
        struct sock_addr a;
        char path[PATH_MAX + 8];
        pid_t pid;
        int r, rs;

        if (s->family == AF_UNIX) {
                snprintf(s->tmpdir, sizeof(s->tmpdir), "/tmp/datbench.XXXXXX");
                if (!mkdtemp(s->tmpdir))
                        bench_die("mkdtemp: %m");
                snprintf(path, sizeof(path), "%s/sock", s->tmpdir);
                r = parse_addr(AF_UNIX, path, &a);
        } else {
                r = parse_addr(AF_INET, "127.0.0.1:0", &a);
        }
        if (r < 0)
                bench_die("address: %s", strerror(-r));
        child.listen_fd = sock_listen(&a);
        if (child.listen_fd < 0)
                bench_die("listen: %s", strerror(-child.listen_fd));

        pid = bench_spawn(o->cpu[0], server_child_main, &child);
        close(child.listen_fd);
        if (bench_pin(o->cpu[1]) < 0)
                bench_die("cannot pin to CPU %d", o->cpu[1]);
        r = client(&a, arg);
        /* A client that gave up may have left the server waiting in accept(). */
        if (r != 0)
                kill(pid, SIGTERM);
        rs = bench_reap(pid);
        if (s->family == AF_UNIX) {
                unlink(path);
                rmdir(s->tmpdir);
        }
        return r == 0 && rs == 0 ? 0 : 1;
}

int sock_run(struct sock_setup *s, const struct bench_opts *o,
             int (*server)(int listen_fd, void *arg), int (*client)(const struct sock_addr *a, void *arg),
             void *arg)
{
        struct sock_addr a;
        int r, fd;

        if (s->role == ROLE_LOCAL)
                return run_local(s, o, server, client, arg);

        r = parse_addr(s->family, s->addr, &a);
        if (r < 0)
                bench_die("bad address '%s': %s", s->addr, strerror(-r));
        if (s->role == ROLE_CLIENT) {
                if (bench_pin(o->cpu[1]) < 0)
                        bench_die("cannot pin to CPU %d", o->cpu[1]);
                return client(&a, arg) == 0 ? 0 : 1;
        }
        if (bench_pin(o->cpu[0]) < 0)
                bench_die("cannot pin to CPU %d", o->cpu[0]);
        fd = sock_listen(&a);
        if (fd < 0)
                bench_die("listen on %s: %s", s->addr, strerror(-fd));
        r = server(fd, arg);
        close(fd);
        if (s->family == AF_UNIX)
                unlink(s->addr);
        return r == 0 ? 0 : 1;
}
