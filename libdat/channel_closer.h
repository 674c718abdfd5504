/* An IA's channels whose close waits for the peer to end its stream first
 * (channel_ops.ends_after_peer: a TCP channel whose connection ended with
 * BYEs both ways).  The end of a TCP connection that sends the first FIN
 * keeps it in TIME_WAIT for a minute, which on the host that connected
 * holds one of its ephemeral ports: an application that frees or reuses
 * its EP as soon as its DISCONNECTED comes, before the peer's FIN, left
 * every connection in TIME_WAIT there, and after some 28 000 connections
 * in a minute every connect() crawled.  Such a channel waits here, on the
 * progress thread's epoll, until the peer's end of stream (or an error)
 * comes or CHANNEL_CLOSER_WAIT_MS passed, and is destroyed then.  Part of
 * struct dto_ia; thread-safe. */
#ifndef DATD_LIBDAT_CHANNEL_CLOSER_H
#define DATD_LIBDAT_CHANNEL_CLOSER_H

#include <stdbool.h>
#include <stdint.h>

#include "libdat/dat_lock.h"

struct channel;

/* How long a channel waits for the peer's end of stream at most. */
#define CHANNEL_CLOSER_WAIT_MS 2000u
/* Channels waiting at most; beyond, a channel is destroyed at once.  A
 * peer's end normally comes within a millisecond; this bounds the
 * descriptors held (a process may have only 1024) when peers' ends do
 * not come (their host is gone). */
#define CHANNEL_CLOSER_MAX 256u

struct channel_closing;

struct channel_closer {
        struct dat_lock lock;
        struct channel_closing *v;      /* oldest first */
        uint32_t n, cap;
        int epfd;                       /* the progress thread's epoll; not ours */
        uint32_t key_tag;               /* the low half of every epoll key of ours */
        int timer_fd;                   /* the oldest's deadline; -1 until needed */
        uint64_t timer_at;              /* when timer_fd fires (CLOCK_MONOTONIC ns); 0: never */
};

/* epfd: the progress thread's epoll; key_tag: a low 32-bit half of epoll
 * keys no other watcher of epfd uses (channel_closer_key_is_ours). */
void channel_closer_init(struct channel_closer *c, int epfd, uint32_t key_tag);

/* Destroys every channel still waiting (the IA closes: no progress thread
 * runs any more). */
void channel_closer_fini(struct channel_closer *c);

/* Takes ownership of ch: destroys it now, unless its close must wait for
 * the peer (and it can wait here); then when the peer's end comes. */
void channel_closer_close(struct channel_closer *c, struct channel *ch);

static inline bool channel_closer_key_is_ours(const struct channel_closer *c, uint64_t key)
{
        return (uint32_t)key == c->key_tag;
}

/* The progress thread: epoll reported one of our keys. */
void channel_closer_on_event(struct channel_closer *c, uint64_t key);

#endif
