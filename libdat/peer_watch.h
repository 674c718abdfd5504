/* The peer processes an IA's data paths go to, each watched for its exit
 * on the progress thread's epoll through one pidfd of its own, however
 * many data paths go to it.  A data path's channel brings a pidfd of the
 * peer (same host); watching that one cost an epoll_ctl ADD at the data
 * path's start and a DEL at its end, two per connection and side, and
 * made the same-host connection rate (8 clients) about 8% lower than
 * without them.  A watch stays when its last data path ends: the next
 * connection to the same peer, the usual case (one client, one server,
 * many connections), costs no system call; it goes when its process
 * exits, or at once when more than PEER_WATCH_IDLE_MAX have no data path.
 * Each watch holds a descriptor (a duplicate of the first channel's
 * pidfd): those of idle ones are given up when the process runs out.
 * Part of struct dto_ia, under its lock. */
#ifndef DATD_LIBDAT_PEER_WATCH_H
#define DATD_LIBDAT_PEER_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Watches kept without a data path, at most. */
#define PEER_WATCH_IDLE_MAX 64u

struct peer_watch_entry;

struct peer_watch {
        struct peer_watch_entry *v;
        uint32_t n, cap;                /* v[0..n) are in use or free */
        uint32_t n_idle;                /* in use without a data path */
        int epfd;                       /* the progress thread's epoll; not ours */
        uint8_t key_tag;                /* the low byte of every epoll key of ours */
};

/* epfd: the progress thread's epoll; key_tag: a low byte of epoll keys no
 * other watcher of epfd uses (peer_watch_key_is_ours). */
void peer_watch_init(struct peer_watch *w, int epfd, uint8_t key_tag);

/* Ends every watch (the IA closes). */
void peer_watch_fini(struct peer_watch *w);

/* One more data path to process pid, of which pidfd (the caller's, not
 * taken) is a pidfd: the index of its watch, or -errno (nothing held).
 * pid 0 (datd could not name the process): a watch of its own. */
int peer_watch_hold(struct peer_watch *w, pid_t pid, int pidfd);

/* One data path fewer on watch i. */
void peer_watch_release(struct peer_watch *w, int i);

static inline bool peer_watch_key_is_ours(const struct peer_watch *w, uint64_t key)
{
        return (uint8_t)key == w->key_tag;
}

/* The progress thread: epoll reported one of our keys, whose process
 * exited.  Ends its watch and returns its index, whose data paths are the
 * caller's to tell (and, should their own pidfd say their peer lives --
 * another process that got the pid since -- to hold again); -1 for a
 * watch that ended already. */
int peer_watch_on_exit(struct peer_watch *w, uint64_t key);

#endif
