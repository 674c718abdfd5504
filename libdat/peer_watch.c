/* Peer processes watched for their exit (peer_watch.h). */
#include "config.h"

#include "libdat/peer_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

struct peer_watch_entry {
        bool in_use;
        pid_t pid;                      /* 0: not known (datd's namespace) */
        int pidfd;                      /* ours (a duplicate), in the epoll */
        uint32_t users;                 /* data paths to the process */
        uint32_t gen;                   /* counts the entry's uses: stale keys */
};

#define GEN_MASK 0xffffffu

/* The entry's index in the high half, its generation in bits 8..31 and
 * the tag in bits 0..7 of the low half. */
static uint64_t entry_key(const struct peer_watch *w, uint32_t i)
{
        return (uint64_t)i << 32 | (uint64_t)(w->v[i].gen & GEN_MASK) << 8 | w->key_tag;
}

void peer_watch_init(struct peer_watch *w, int epfd, uint8_t key_tag)
{
        *w = (struct peer_watch){ .epfd = epfd, .key_tag = key_tag };
}

static void entry_end(struct peer_watch *w, uint32_t i)
{
        struct peer_watch_entry *e = &w->v[i];

        (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, e->pidfd, NULL);
        close(e->pidfd);
        e->in_use = false;
        e->pid = 0;
        e->pidfd = -1;
        e->users = 0;
        while (w->n > 0 && !w->v[w->n - 1].in_use)
                w->n--;
}

/* Ends every watch without data paths. */
static void end_idle(struct peer_watch *w)
{
        for (uint32_t i = w->n; i-- > 0;)
                if (w->v[i].in_use && w->v[i].users == 0)
                        entry_end(w, i);
        w->n_idle = 0;
}

void peer_watch_fini(struct peer_watch *w)
{
        for (uint32_t i = w->n; i-- > 0;)
                if (w->v[i].in_use)
                        entry_end(w, i);
        free(w->v);
        w->v = NULL;
        w->n = w->cap = w->n_idle = 0;
}

int peer_watch_hold(struct peer_watch *w, pid_t pid, int pidfd)
{
        uint32_t i, slot = UINT32_MAX;
        struct peer_watch_entry *e;
        struct epoll_event ev = { .events = EPOLLIN };
        int fd;

        if (pidfd < 0)
                return -EINVAL;
        /* A process datd could not name (another PID namespace) is
         * watched alone. */
        for (i = 0; i < w->n; i++) {
                if (w->v[i].in_use && pid > 0 && w->v[i].pid == pid) {
                        if (w->v[i].users++ == 0)
                                w->n_idle--;
                        return (int)i;
                }
                if (!w->v[i].in_use && slot == UINT32_MAX)
                        slot = i;
        }
        if (slot == UINT32_MAX) {
                if (w->n == w->cap) {
                        uint32_t cap = w->cap ? w->cap * 2 : 8;
                        struct peer_watch_entry *v = realloc(w->v, cap * sizeof(*v));

                        if (!v)
                                return -ENOMEM;
                        for (uint32_t k = w->cap; k < cap; k++)
                                v[k] = (struct peer_watch_entry){ .pidfd = -1 };
                        w->v = v;
                        w->cap = cap;
                }
                slot = w->n;
        }
        /* Our own descriptor: the channel's goes with the channel.  At the
         * process's limit of descriptors, those of idle watches go first. */
        fd = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && w->n_idle > 0) {
                end_idle(w);
                fd = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
        }
        if (fd < 0)
                return -errno;
        e = &w->v[slot];
        e->gen++;
        ev.data.u64 = entry_key(w, slot);
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        e->in_use = true;
        e->pid = pid > 0 ? pid : 0;
        e->pidfd = fd;
        e->users = 1;
        /* Past the end, also when end_idle shortened it meanwhile. */
        if (slot >= w->n)
                w->n = slot + 1;
        return (int)slot;
}

void peer_watch_release(struct peer_watch *w, int i)
{
        struct peer_watch_entry *e;

        if (i < 0 || (uint32_t)i >= w->n || !w->v[i].in_use || w->v[i].users == 0)
                return;
        e = &w->v[i];
        if (--e->users > 0)
                return;
        if (w->n_idle >= PEER_WATCH_IDLE_MAX)
                entry_end(w, (uint32_t)i);
        else
                w->n_idle++;
}

int peer_watch_on_exit(struct peer_watch *w, uint64_t key)
{
        uint32_t i = (uint32_t)(key >> 32);
        struct peer_watch_entry *e;

        if (i >= w->n)
                return -1;
        e = &w->v[i];
        if (!e->in_use || (e->gen & GEN_MASK) != (((uint32_t)key >> 8) & GEN_MASK))
                return -1;
        if (e->users == 0)
                w->n_idle--;
        /* A pidfd stays readable once its process exited: out of the
         * epoll now, or the progress thread would spin. */
        entry_end(w, i);
        return (int)i;
}
