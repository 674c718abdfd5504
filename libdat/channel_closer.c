/* Channels whose close waits for the peer's end of stream
 * (channel_closer.h). */
#include "config.h"

#include "libdat/channel_closer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "libdat/channel.h"
#include "libdat/dto_engine.h"

struct channel_closing {
        struct channel *ch;
        uint64_t deadline_ns;
};

/* A channel's key: its descriptor + 1 in the high half (0 there is the
 * timer's). */
static uint64_t channel_key(const struct channel_closer *c, const struct channel *ch)
{
        return (uint64_t)((uint32_t)ch->poll_fd + 1u) << 32 | c->key_tag;
}

void channel_closer_init(struct channel_closer *c, int epfd, uint32_t key_tag)
{
        memset(c, 0, sizeof(*c));
        dat_lock_init(&c->lock);
        c->epfd = epfd;
        c->key_tag = key_tag;
        c->timer_fd = -1;
}

void channel_closer_fini(struct channel_closer *c)
{
        for (uint32_t i = 0; i < c->n; i++)
                channel_destroy(c->v[i].ch);
        free(c->v);
        c->v = NULL;
        c->n = c->cap = 0;
        if (c->timer_fd >= 0)
                close(c->timer_fd);
        c->timer_fd = -1;
}

/* Whether the peer has ended its stream (or the channel failed): reads
 * and drops what came before the end.  False: nothing more yet. */
static bool peer_ended(struct channel *ch)
{
        char sink[512];
        struct iovec iov = { sink, sizeof(sink) };

        for (int i = 0; i < 16; i++) {
                ssize_t n = ch->ops->readv(ch, &iov, 1);

                if (n < 0)
                        return true;
                if (n == 0)
                        return false;
        }
        return false;
}

/* Sets the timer to fire at `at`.  Under the lock.  False when there is
 * no timer: the caller destroys its channel at once instead. */
static bool timer_set(struct channel_closer *c, uint64_t at)
{
        struct itimerspec its = { .it_value = { (time_t)(at / 1000000000u), (long)(at % 1000000000u) } };

        if (c->timer_fd < 0) {
                struct epoll_event ev = { .events = EPOLLIN, .data.u64 = c->key_tag };
                int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);

                if (fd < 0)
                        return false;
                if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                        close(fd);
                        return false;
                }
                c->timer_fd = fd;
        }
        if (timerfd_settime(c->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
                return false;
        c->timer_at = at;
        return true;
}

void channel_closer_close(struct channel_closer *c, struct channel *ch)
{
        struct epoll_event ev;
        uint64_t deadline;
        bool kept = false;

        if (!ch)
                return;
        if (!ch->ops->ends_after_peer || !ch->ops->ends_after_peer(ch) || peer_ended(ch)) {
                channel_destroy(ch);
                return;
        }
        deadline = dto_now_ns() + (uint64_t)CHANNEL_CLOSER_WAIT_MS * 1000000u;
        ev = (struct epoll_event){ .events = EPOLLIN | EPOLLRDHUP, .data.u64 = channel_key(c, ch) };
        dat_lock(&c->lock);
        if (c->epfd >= 0 && c->n < CHANNEL_CLOSER_MAX) {
                if (c->n == c->cap) {
                        uint32_t cap = c->cap ? 2 * c->cap : 16;
                        struct channel_closing *v = realloc(c->v, cap * sizeof(*v));

                        if (v) {
                                c->v = v;
                                c->cap = cap;
                        }
                }
                /* Entries wait in deadline order: the timer is set for the
                 * oldest only, so for a new one only when none waits. */
                if (c->n < c->cap && (c->timer_at != 0 || timer_set(c, deadline)) &&
                    epoll_ctl(c->epfd, EPOLL_CTL_ADD, ch->poll_fd, &ev) == 0) {
                        c->v[c->n++] = (struct channel_closing){ ch, deadline };
                        kept = true;
                }
        }
        dat_unlock(&c->lock);
        if (!kept)
                channel_destroy(ch);
}

/* Takes entry i out (under the lock); its channel is the caller's. */
static struct channel *take(struct channel_closer *c, uint32_t i)
{
        struct channel *ch = c->v[i].ch;

        (void)epoll_ctl(c->epfd, EPOLL_CTL_DEL, ch->poll_fd, NULL);
        memmove(c->v + i, c->v + i + 1, (c->n - i - 1) * sizeof(*c->v));
        c->n--;
        return ch;
}

/* Channels one timer event destroys at most; more past their deadline
 * make the timer fire again at once. */
#define TIMER_BATCH 64u

/* The timer fired: destroys the channels past their deadline, and sets it
 * for the oldest left. */
static void on_timer(struct channel_closer *c)
{
        struct channel *done[TIMER_BATCH];
        uint64_t expirations, now = dto_now_ns();
        unsigned n_done = 0;

        (void)!read(c->timer_fd, &expirations, sizeof(expirations));
        dat_lock(&c->lock);
        while (c->n > 0 && c->v[0].deadline_ns <= now && n_done < TIMER_BATCH)
                done[n_done++] = take(c, 0);
        c->timer_at = 0;
        /* A timer that cannot be set leaves the rest to the next close, or
         * to the IA's close. */
        if (c->n > 0)
                (void)timer_set(c, n_done == TIMER_BATCH ? now : c->v[0].deadline_ns);
        dat_unlock(&c->lock);
        for (unsigned i = 0; i < n_done; i++)
                channel_destroy(done[i]);
}

void channel_closer_on_event(struct channel_closer *c, uint64_t key)
{
        struct channel *ch = NULL;

        if ((key >> 32) == 0) {
                on_timer(c);
                return;
        }
        dat_lock(&c->lock);
        for (uint32_t i = 0; i < c->n; i++)
                if (channel_key(c, c->v[i].ch) == key) {
                        if (peer_ended(c->v[i].ch))
                                ch = take(c, i);
                        break;
                }
        dat_unlock(&c->lock);
        channel_destroy(ch);
}
