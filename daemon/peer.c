#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/macro.h"
#include "daemon/peer.h"

/* Kernels before 4.13 have no SO_PEERGROUPS: then the Groups: line of
 * /proc/PID/status, which is only as good as the PID is current. */
static int proc_groups(pid_t pid, gid_t **ret, size_t *n_ret)
{
        char path[64], *line = NULL;
        size_t line_size = 0;
        FILE *f;
        int r = -ENODATA;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (getline(&line, &line_size, f) > 0) {
                gid_t *groups = NULL;
                size_t n = 0;
                char *p, *end;

                if (strncmp(line, "Groups:", 7) != 0)
                        continue;
                groups = calloc(strlen(line) / 2 + 1, sizeof(*groups));
                r = groups ? 0 : -ENOMEM;
                for (p = line + 7; groups; p = end) {
                        unsigned long g = strtoul(p, &end, 10);

                        if (end == p)
                                break;
                        groups[n++] = (gid_t) g;
                }
                *ret = groups;
                *n_ret = n;
                break;
        }
        free(line);
        fclose(f);
        return r;
}

static int peer_groups(int fd, pid_t pid, gid_t **ret, size_t *n_ret)
{
        socklen_t len = 64 * sizeof(gid_t);

        /* Retried only if the peer's group list grew in between: bounded. */
        for (unsigned attempt = 0; attempt < 4; attempt++) {
                gid_t *groups = malloc(len ? len : sizeof(gid_t));

                if (!groups)
                        return -ENOMEM;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) >= 0) {
                        *ret = groups;
                        *n_ret = len / sizeof(gid_t);
                        return 0;
                }
                free(groups);
                if (errno == ENOPROTOOPT)
                        return proc_groups(pid, ret, n_ret);
                /* The kernel told us the size it needs. */
                if (errno != ERANGE)
                        return -errno;
        }
        return -ERANGE;
}

static void peer_comm(pid_t pid, char comm[UTF8_SANITIZED_SIZE(PEER_COMM_MAX)])
{
        char path[64], raw[PEER_COMM_MAX + 1];
        _cleanup_close_ int fd = -1;
        ssize_t n;

        comm[0] = '\0';
        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        n = read(fd, raw, PEER_COMM_MAX);
        if (n <= 0)
                return;
        raw[n] = '\0';
        raw[strcspn(raw, "\n")] = '\0';
        utf8_sanitize(raw, comm, UTF8_SANITIZED_SIZE(PEER_COMM_MAX));
}

int peer_identify(int fd, Peer *ret)
{
        struct ucred cred;
        socklen_t len = sizeof(cred);
        int r;

        memset(ret, 0, sizeof(*ret));
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        if (len != sizeof(cred))
                return -EIO;
        ret->pid = cred.pid;
        ret->uid = cred.uid;
        ret->gid = cred.gid;
        r = peer_groups(fd, cred.pid, &ret->groups, &ret->n_groups);
        if (r < 0)
                return r;
        peer_comm(cred.pid, ret->comm);
        return 0;
}

void peer_done(Peer *p)
{
        free(p->groups);
        p->groups = NULL;
        p->n_groups = 0;
}
