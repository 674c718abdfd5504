/* An IA's running data paths (dto.h, struct dto_ia): the table the
 * progress thread's epoll names them by, the progress thread's loop, and
 * the polling that application threads do from dat_evd_dequeue and
 * dat_evd_wait.
 *
 * Who touches a data path: its EP's posting calls (the consumer's thread,
 * under the data path's lock), and under the table's lock the progress
 * thread and polling application threads.  A data path leaves the table
 * under the table's lock; from then on only its EP's calls reach it, and
 * dto_ia_remove waits for `users` (threads finishing work they began under
 * the table's lock) to drop to zero. */
#include "config.h"

#include "libdat/dto_engine.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "libdat/ep.h"
#include "libdat/evd_wait.h"
#include "libdat/ia.h"

/* epoll data: the slot in the high half, its generation in bits 2..31, the
 * kind of descriptor in bits 0..1. */
enum {
        EV_CHANNEL = 0,
        EV_DATD = 2,
        EV_CONTROL = 3,
};
#define EVENTS_MAX 64
#define EV_STOP_KEY ((uint64_t)EV_CONTROL)
#define EV_KICK_KEY ((uint64_t)EV_CONTROL | 4u)
/* The low half of channel_closer.h's keys. */
#define EV_CLOSER_TAG ((uint32_t)EV_CONTROL | 8u)
/* The low byte of peer_watch.h's keys. */
#define EV_PEER_TAG ((uint8_t)(EV_CONTROL | 12u))

static uint64_t slot_key(uint32_t slot, uint32_t gen, unsigned kind)
{
        return (uint64_t)slot << 32 | (uint64_t)(gen & 0x3fffffffu) << 2 | kind;
}

int dto_ia_init(struct dto_ia *t)
{
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EV_KICK_KEY };

        memset(t, 0, sizeof(*t));
        t->app_epfd = -1;
        t->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (t->epfd < 0)
                return -errno;
        t->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (t->kick_fd < 0 || epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->kick_fd, &ev) < 0) {
                int r = -errno;

                if (t->kick_fd >= 0)
                        close(t->kick_fd);
                close(t->epfd);
                return r;
        }
        dat_lock_init(&t->lock);
        channel_closer_init(&t->closer, t->epfd, EV_CLOSER_TAG);
        peer_watch_init(&t->peers, t->epfd, EV_PEER_TAG);
        t->initialized = true;
        return 0;
}

void dto_ia_fini(struct dto_ia *t)
{
        if (!t->initialized)
                return;
        channel_closer_fini(&t->closer);
        peer_watch_fini(&t->peers);
        close(t->kick_fd);
        close(t->epfd);
        if (t->app_epfd >= 0)
                close(t->app_epfd);
        free(t->slots);
        t->initialized = false;
}

static struct dto_ia *table_of(const struct dto_ep *d)
{
        return &d->ia->dto;
}

void dto_ia_close_channel(struct ia *ia, struct channel *ch)
{
        if (ia->dto.initialized)
                channel_closer_close(&ia->dto.closer, ch);
        else
                channel_destroy(ch);
}

void dto_ia_kick(struct ia *ia)
{
        uint64_t one = 1;

        if (ia->dto.initialized)
                (void)!write(ia->dto.kick_fd, &one, sizeof(one));
}

static int watch(struct dto_ia *t, int fd, uint32_t events, uint64_t key)
{
        struct epoll_event ev = { .events = events, .data.u64 = key };

        return epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* With at least this many channels of poll_by_fd, an application's poll
 * asks app_epfd which are readable; below, reading each costs less. */
#define APP_EPOLL_MIN 4

/* d's channel joins the application polls' epoll.  Without it (no memory
 * for the epoll) polls read it, as below APP_EPOLL_MIN. */
static void app_epoll_add(struct dto_ia *t, struct dto_ep *d, uint64_t key)
{
        struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = key };

        if (d->app_watched)
                return;
        if (t->app_epfd < 0)
                t->app_epfd = epoll_create1(EPOLL_CLOEXEC);
        if (t->app_epfd >= 0 && epoll_ctl(t->app_epfd, EPOLL_CTL_ADD, d->ch->poll_fd, &ev) == 0) {
                d->app_watched = true;
                t->n_fd_polled++;
        }
}

static void app_epoll_del(struct dto_ia *t, struct dto_ep *d)
{
        if (!d->app_watched)
                return;
        (void)epoll_ctl(t->app_epfd, EPOLL_CTL_DEL, d->ch->poll_fd, NULL);
        d->app_watched = false;
        t->n_fd_polled--;
}

/* A poll_by_fd channel joins the table: it is in the application polls'
 * epoll only while there are APP_EPOLL_MIN such channels or more, the
 * only time ask_readiness asks that epoll -- a socket in an epoll costs
 * every packet that arrives a callback under the epoll's lock, asked or
 * not (0.15 us of a 4 us TCP ping-pong over veth).  Under the table's
 * lock. */
static void app_watch(struct dto_ia *t, struct dto_ep *d, uint64_t key)
{
        if (!d->ch->poll_by_fd)
                return;
        if (++t->n_fd_channels < APP_EPOLL_MIN)
                return;
        if (t->n_fd_channels == APP_EPOLL_MIN)
                for (uint32_t i = 0; i < t->slots_end; i++) {
                        struct dto_ep *e = t->slots[i].d;

                        if (e && e != d && e->ch->poll_by_fd)
                                app_epoll_add(t, e, slot_key(i, t->slots[i].gen, EV_CHANNEL));
                }
        app_epoll_add(t, d, key);
}

/* d leaves the table (its slot cleared already).  Under the table's lock. */
static void app_unwatch(struct dto_ia *t, struct dto_ep *d)
{
        if (!d->ch->poll_by_fd)
                return;
        app_epoll_del(t, d);
        if (t->n_fd_channels-- == APP_EPOLL_MIN)
                for (uint32_t i = 0; i < t->slots_end; i++)
                        if (t->slots[i].d)
                                app_epoll_del(t, t->slots[i].d);
}

/* The table whose progress thread this is (dto_ia_run), NULL elsewhere.
 * initial-exec: 8 bytes of the static TLS a dlopen()ed library may use. */
static __thread struct dto_ia *progress_of __attribute__((tls_model("initial-exec")));

/* A data path another thread added: arms its channel as the progress
 * thread's arm_all would, if that thread sleeps armed (it armed the
 * channels it knew, not this one).  A progress thread not asleep armed
 * arms it itself before it next sleeps: it announces armed_sleep before
 * arm_all looks at the table, and the data path was in the table before
 * armed_sleep was read here.  Returns false when the progress thread must
 * be kicked: data is there already.  Without this, every connection's
 * start cost the progress thread a wake-up, a round over every data path
 * and the locks the application thread was taking. */
static bool arm_new(struct dto_ia *t, struct dto_ep *d)
{
        bool armed;

        if (!__atomic_load_n(&t->armed_sleep, __ATOMIC_SEQ_CST))
                return true;
        dat_lock(&d->lock);
        armed = d->state != DTO_RUNNING || d->ch->ops->arm(d->ch, true, false);
        dat_unlock(&d->lock);
        return armed;
}

int dto_ia_add(struct dto_ep *d)
{
        struct dto_ia *t = table_of(d);
        uint32_t slot;
        int r;

        dat_lock(&t->lock);
        for (slot = 0; slot < t->n_slots && t->slots[slot].d; slot++)
                ;
        if (slot == t->n_slots) {
                uint32_t n = t->n_slots ? t->n_slots * 2 : 16;
                struct dto_ia_slot *s = realloc(t->slots, n * sizeof(*s));

                if (!s) {
                        dat_unlock(&t->lock);
                        return -ENOMEM;
                }
                memset(s + t->n_slots, 0, (n - t->n_slots) * sizeof(*s));
                t->slots = s;
                t->n_slots = n;
        }
        t->slots[slot].gen++;
        d->poll_events = d->ch->ops->poll_events(d->ch, true, false);
        d->rx_unwatched = false;
        d->peer_watch = -1;
        d->peer_exit_pending = false;
        __atomic_store_n(&d->off_epoll, false, __ATOMIC_RELAXED);
        r = watch(t, d->ch->poll_fd, d->poll_events,
                  slot_key(slot, t->slots[slot].gen, EV_CHANNEL));
        if (r == 0 && d->ch->peer_pidfd >= 0) {
                r = peer_watch_hold(&t->peers, d->ch->peer_pid, d->ch->peer_pidfd);
                d->peer_watch = r >= 0 ? r : -1;
        }
        if (r < 0) {
                (void)epoll_ctl(t->epfd, EPOLL_CTL_DEL, d->ch->poll_fd, NULL);
                d->poll_events = 0;
                dat_unlock(&t->lock);
                return r;
        }
        t->slots[slot].d = d;
        t->n_used++;
        if (slot >= t->slots_end)
                t->slots_end = slot + 1;
        d->slot = slot;
        d->registered = true;
        app_watch(t, d, slot_key(slot, t->slots[slot].gen, EV_CHANNEL));
        t->watching = true;
        dat_unlock(&t->lock);
        /* The progress thread arms the new channel before it sleeps again:
         * itself (a connection established by datd's event) when this
         * round ends, and a kick would only cost it a write, a read and a
         * round; for another thread, see arm_new. */
        if (progress_of != t && !arm_new(t, d))
                dto_ia_kick(d->ia);
        return 0;
}

/* Watches d's channel for events (0: not at all) under key.  A channel
 * watched for nothing leaves the epoll instead of staying in it with no
 * events (the cost of a socket in an epoll: app_watch), so that it is in
 * the epoll exactly while d->poll_events is not 0.  Under d's lock.  0 or
 * -errno. */
static int channel_watch(struct dto_ia *t, struct dto_ep *d, uint64_t key, unsigned events)
{
        struct epoll_event ev = { .events = events, .data.u64 = key };
        int op = events == 0 ? EPOLL_CTL_DEL : d->poll_events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;

        if (epoll_ctl(t->epfd, op, d->ch->poll_fd, events ? &ev : NULL) < 0)
                return -errno;
        d->poll_events = events;
        return 0;
}

void dto_ia_quiet(struct dto_ep *d)
{
        /* epoll needs no lock of ours; the table entry stays until the
         * data path stops, which then makes no second DEL (should the two
         * race, a DEL too many fails harmlessly, and one too few is made
         * by the close of the descriptor).  Nothing left on: quiet_all has
         * nothing to take off. */
        if (d->poll_events)
                (void)epoll_ctl(table_of(d)->epfd, EPOLL_CTL_DEL, d->ch->poll_fd, NULL);
        d->poll_events = 0;
        __atomic_store_n(&d->off_epoll, true, __ATOMIC_RELAXED);
}

void dto_ia_remove_nowait(struct dto_ep *d)
{
        struct dto_ia *t = table_of(d);

        dat_lock(&t->lock);
        if (d->registered) {
                t->slots[d->slot].d = NULL;
                t->n_used--;
                while (t->slots_end > 0 && !t->slots[t->slots_end - 1].d)
                        t->slots_end--;
                app_unwatch(t, d);
                if (d->poll_events)
                        (void)epoll_ctl(t->epfd, EPOLL_CTL_DEL, d->ch->poll_fd, NULL);
                d->poll_events = 0;
                peer_watch_release(&t->peers, d->peer_watch);
                d->peer_watch = -1;
                d->peer_exit_pending = false;
                d->registered = false;
        }
        dat_unlock(&t->lock);
}

void dto_ia_remove(struct dto_ep *d)
{
        dto_ia_remove_nowait(d);
        while (__atomic_load_n(&d->users, __ATOMIC_ACQUIRE) > 0)
                dat_nap();
}

/* The data path a key names, or NULL.  Under the table's lock. */
static struct dto_ep *slot_lookup(struct dto_ia *t, uint64_t key)
{
        uint32_t slot = (uint32_t)(key >> 32);

        if (slot >= t->n_slots || !t->slots[slot].d ||
            (t->slots[slot].gen & 0x3fffffffu) != ((uint32_t)key >> 2))
                return NULL;
        return t->slots[slot].d;
}

/* May an application's poll of `polled` hold back what the peer's
 * requests acknowledge of ours (dto_engine.h, acks_held)?  Only a poll of
 * the EP's receive EVD, which takes the answer (one of its request EVD
 * looks for those very completions); not while its request EVD has a
 * waiter or a CNO (a thread asleep there or in dat_cno_wait polls nothing,
 * and would wait for the progress thread's grace), nor while a graceful
 * disconnect waits for the requests (its application may wait for the
 * connection's end without a poll of the data paths).  Both EVDs were
 * looked up when the data path started (they cannot change while it
 * runs). */
static _always_inline_ bool may_hold_acks(const struct dto_ep *d, const struct evd *polled)
{
        const struct evd *req = d->request_evd.evd;

        return polled->obj.handle == d->recv_evd.handle &&
               d->request_evd.handle != d->recv_evd.handle && req &&
               !d->graceful_pending && !__atomic_load_n(&req->waiter, __ATOMIC_RELAXED) &&
               !__atomic_load_n(&req->cno, __ATOMIC_RELAXED);
}

/* One step on d for a thread holding the table's lock.  When d needs
 * finishing (dto_finish) *finish is set and d->users keeps d alive while
 * the caller does that after dropping the table's lock.  Inline, as
 * poll_all is in dto_evd_poll: each frame live across a polling
 * consumer's read of a TCP socket is a mispredicted return after it
 * (raw_syscall.h), on every empty poll and on the way to every message. */
static _always_inline_ bool step_locked(struct dto_ep *d, bool wait_for_lock,
                                        bool peer_exited, bool first_record,
                                        const struct evd *polled, struct dto_batch *b,
                                        bool *finish)
{
        bool moved = false;

        *finish = false;
        if (wait_for_lock)
                dat_lock(&d->lock);
        else if (!dat_trylock(&d->lock))
                return false;
        if (d->state == DTO_RUNNING) {
                if (peer_exited) {
                        /* What the peer wrote before it exited still
                         * counts: its last messages, and the BYE of an
                         * orderly end, which wakes nobody -- its exit can
                         * be heard of first (its doorbell's hang-up and
                         * its pidfd come in either order). */
                        if (!d->peer_bye)
                                dto_progress_locked(d, b);
                        if (d->state == DTO_RUNNING && !d->peer_bye) {
                                d->peer_gone = true;
                                dto_fail(d, "the peer process exited");
                                moved = true;
                        }
                } else {
                        /* Only DTO work counts (the spin heuristic of the
                         * progress thread): the probe's frames (HELLO,
                         * CMA_OK) do not. */
                        uint64_t before = d->work_frames;

                        d->rx_one_record = first_record;
                        d->hold_acks = polled && may_hold_acks(d, polled);
                        dto_progress_locked(d, b);
                        d->rx_one_record = false;
                        /* A thread that began to wait meanwhile may have
                         * found the table's lock taken by this step.  (Only
                         * an application's poll holds: polled is set.) */
                        if (_unlikely_(d->acks_held) && (!polled || !may_hold_acks(d, polled)))
                                dto_rx_apply_acks(d, b);
                        d->hold_acks = false;
                        moved = d->work_frames != before;
                }
        }
        *finish = dto_needs_finish(d);
        if (*finish)
                __atomic_add_fetch(&d->users, 1, __ATOMIC_ACQ_REL);
        /* An acknowledgement left owed, or a frame left half written (a
         * request a completed Read let through its fence, on a full
         * socket), must not wait for a thread that sleeps without a
         * timeout and without watching for room. */
        if (!wait_for_lock && __atomic_load_n(&d->ia->dto.armed_sleep, __ATOMIC_RELAXED) &&
            d->state == DTO_RUNNING && dto_work_left(d))
                dto_ia_kick(d->ia);
        dat_unlock(&d->lock);
        return moved;
}

/* After dropping the table's lock. */
static void step_finish(struct dto_ep *d)
{
        dto_finish(d, NULL);
        __atomic_sub_fetch(&d->users, 1, __ATOMIC_ACQ_REL);
}

/* Ends a round of steps under the table's lock: drops it, delivers what
 * the steps batched, and finishes the n data paths that need it.  Inline
 * in poll_all, as poll_all is. */
static _always_inline_ void round_end(struct dto_ia *t, struct dto_batch *b,
                                      struct dto_ep *const *ended, unsigned n)
{
        dat_unlock(&t->lock);
        evd_deferred_run(&b->deferred);
        for (unsigned i = 0; i < n; i++)
                step_finish(ended[i]);
}

/* Polls every data path of the table (application threads: trylock, skip
 * what is busy).  Those that need finishing are finished after the table's
 * lock drops; at most a few per call, the rest next time. */
#define POLL_FAILED_MAX 8

/* An application's poll with APP_EPOLL_MIN channels of poll_by_fd or
 * more: marks those readable with a new poll_seq and returns it (one
 * epoll_wait for all; what did not fit is readable next time, the epoll is
 * level-triggered); 0 when the channels are to be read each.  Under the
 * table's lock. */
static uint32_t ask_readiness(struct dto_ia *t)
{
        struct epoll_event evs[EVENTS_MAX];
        uint32_t seq;
        int n;

        if (t->n_fd_polled < APP_EPOLL_MIN)
                return 0;
        n = epoll_wait(t->app_epfd, evs, EVENTS_MAX, 0);
        if (n < 0)
                return 0;
        seq = ++t->poll_seq != 0 ? t->poll_seq : ++t->poll_seq;
        for (int i = 0; i < n; i++) {
                uint32_t slot = (uint32_t)(evs[i].data.u64 >> 32);

                if (slot_lookup(t, evs[i].data.u64))
                        t->slots[slot].ready_seq = seq;
        }
        return seq;
}

static _always_inline_ bool poll_all(struct dto_ia *t, bool wait, bool first_record,
                                     const struct evd *polled)
{
        struct dto_ep *failed[POLL_FAILED_MAX];
        struct dto_batch b;
        unsigned n_failed = 0;
        uint32_t seq = 0;
        bool moved = false;

        DTO_BATCH_EMPTY(b);
        if (wait)
                dat_lock(&t->lock);
        else if (!dat_trylock(&t->lock))
                return false;
        if (!wait)
                seq = ask_readiness(t);
        for (uint32_t i = 0; i < t->slots_end && n_failed < POLL_FAILED_MAX; i++) {
                struct dto_ep *d = t->slots[i].d;
                bool f = false;

                /* Work no channel announces counts too (dto_work_left), an
                 * acknowledgement owed above all: two ends that each wait
                 * for the other's acknowledgement (their requests'
                 * completions) while their applications poll would wait
                 * for ever -- the progress thread leaves polled channels
                 * alone, and the step sends it (dto_tx_ack). */
                if (!d || (!wait && !(seq && d->app_watched ? t->slots[i].ready_seq == seq
                                                              : d->ch->ops->readable(d->ch)) &&
                           !dto_work_left(d) && d->rnr_deadline_ns == 0))
                        continue;
                /* app_busy changes only here, under the table's lock: a
                 * plain store is enough (the progress thread only reads). */
                if (!wait)
                        __atomic_store_n(&t->app_busy, t->app_busy + 1, __ATOMIC_RELAXED);
                moved |= step_locked(d, wait, false, first_record, polled, &b, &f);
                if (!wait)
                        __atomic_store_n(&t->app_busy, t->app_busy - 1, __ATOMIC_RELAXED);
                if (f)
                        failed[n_failed++] = d;
        }
        round_end(t, &b, failed, n_failed);
        return moved;
}

/* initial-exec: no __tls_get_addr call on every poll. */
static __thread unsigned app_polls __attribute__((tls_model("initial-exec")));

bool dto_evd_poll(struct evd *evd, bool first_record)
{
        struct ia *ia = dat_container_of(evd->obj.parent, struct ia, obj);
        bool moved;

        if (!ia->dto.initialized || __atomic_load_n(&ia->dto.n_used, __ATOMIC_RELAXED) == 0)
                return false;
        moved = poll_all(&ia->dto, false, first_record, evd);
        /* The progress thread only needs to know that someone polled
         * lately (APP_POLL_GRACE_NS): the count moves after every poll
         * that found work and every 64th empty one.  Empty polls alone
         * are not enough: a streaming application polls only when its EVD
         * runs dry, maybe a few thousand times a second, and one count in
         * 64 of those polls would look stale to the progress thread, which
         * would then take every socket event itself, on the application's
         * CPU.  (While a poll is inside a step, app_busy says so.)  One
         * count for every application thread: a count two threads
         * increment at once moves all the same. */
        if (moved || (app_polls++ & 63) == 0) {
                struct dto_ia *t = &ia->dto;

                if (__atomic_load_n(&t->app_asleep, __ATOMIC_RELAXED))
                        __atomic_store_n(&t->app_asleep, false, __ATOMIC_RELAXED);
                __atomic_store_n(&t->app_polls, __atomic_load_n(&t->app_polls, __ATOMIC_RELAXED) + 1,
                                 __ATOMIC_RELAXED);
        }
        return moved;
}

void dto_evd_sleep_prepare(struct evd *evd)
{
        dto_ia_sleep_prepare(dat_container_of(evd->obj.parent, struct ia, obj));
}

void dto_ia_sleep_prepare(struct ia *ia)
{
        if (!ia->dto.initialized || __atomic_load_n(&ia->dto.n_used, __ATOMIC_RELAXED) == 0)
                return;
        __atomic_store_n(&ia->dto.app_asleep, true, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&ia->dto.unarmed, __ATOMIC_SEQ_CST))
                dto_ia_kick(ia);
}

/* How long after an application thread's last poll the progress thread
 * leaves the channels to it.  Each grace that ends while the application
 * still polls costs it a context switch when the progress thread shares
 * its CPU (the usual case with a pinned application): 1 ms makes that a
 * thousandth of its time, and bounds how long one-sided requests wait
 * when the application stops polling without sleeping in dat_evd_wait. */
#define APP_POLL_GRACE_NS 1000000u

/* While the application keeps polling, the progress thread's waits double
 * up to 2^APP_POLL_BACKOFF_SHIFT graces (8 ms): the longest a one-sided
 * request waits when the application stops polling without sleeping. */
#define APP_POLL_BACKOFF_SHIFT 3u

/* The progress thread, before sleeping: asks every channel to wake it, and
 * watches TCP sockets for room where frames wait.  Returns the epoll
 * timeout: 0 when work is there, else until the nearest receiver-not-ready
 * deadline, else -1. */
static int arm_all(struct dto_ia *t)
{
        uint64_t now = dto_now_ns(), next = 0;
        bool work = false;

        dat_lock(&t->lock);
        for (uint32_t i = 0; i < t->slots_end; i++) {
                struct dto_ep *d = t->slots[i].d;
                bool want_room, want_data;
                unsigned events;

                if (!d)
                        continue;
                dat_lock(&d->lock);
                /* After the peer's BYE nothing more comes (its channel left
                 * the epoll, dto_ia_quiet) and nothing we owe it matters:
                 * datd's event ends the connection.  Arming it would find
                 * the end of the peer's stream and call that work, and
                 * this thread would spin until the event came -- on the
                 * CPU datd needs to send it. */
                if (d->state == DTO_RUNNING && !d->peer_bye) {
                        /* Asleep, we would wait for ever for what the peer
                         * holds back of our stream's acknowledgements. */
                        if (d->ask_due)
                                (void)dto_tx_ask_ack(d, true);
                        want_room = dto_tx_pending(d);
                        want_data = !dto_rx_blocked(d);
                        events = d->ch->ops->poll_events(d->ch, want_data, want_room);
                        /* Off the epoll for good (a hung-up channel): nothing to change. */
                        if (events != d->poll_events && !d->off_epoll)
                                (void)channel_watch(t, d, slot_key(i, t->slots[i].gen, EV_CHANNEL),
                                                    events);
                        d->rx_unwatched = !want_data;
                        if (d->poll_events)
                                t->watching = true;
                        /* An acknowledgement owed is work unless the
                         * channel is full (room wakes us, and it goes out
                         * with the rest): counted then, it made this
                         * thread spin on a peer that reads nothing.  Nor
                         * is one that may wait: the peer asks for it. */
                        if (!d->ch->ops->arm(d->ch, want_data, want_room) ||
                            (d->ack_owed != d->ack_sent && !want_room && !dto_ack_deferred(d)) ||
                            dto_rx_stashed(d) || d->acks_held)
                                work = true;
                        if (d->rnr_deadline_ns && (!next || d->rnr_deadline_ns < next))
                                next = d->rnr_deadline_ns;
                }
                dat_unlock(&d->lock);
        }
        dat_unlock(&t->lock);
        if (work)
                return 0;
        if (!next)
                return -1;
        return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

/* A channel's event (the only slot keys: peer processes have their own,
 * peer_watch.h).  Returns whether DTO work was done. */
static bool on_slot_event(struct dto_ia *t, uint64_t key, uint32_t events)
{
        struct dto_batch b;
        struct dto_ep *d;
        bool finish = false, moved = false;

        DTO_BATCH_EMPTY(b);
        dat_lock(&t->lock);
        d = slot_lookup(t, key);
        if (d) {
                dat_lock(&d->lock);
                if (d->state == DTO_RUNNING) {
                        /* A hang-up stays reported as long as the
                         * descriptor is watched: this thread would spin. */
                        if ((events & (EPOLLHUP | EPOLLERR)) && d->ch->ops->hangup) {
                                d->ch->ops->hangup(d->ch);
                                dto_ia_quiet(d);
                        }
                        d->ch->ops->woken(d->ch);
                        d->ch->ops->disarm(d->ch);
                }
                dat_unlock(&d->lock);
                moved = step_locked(d, true, false, false, NULL, &b, &finish);
        }
        dat_unlock(&t->lock);
        evd_deferred_run(&b.deferred);
        if (d && finish)
                step_finish(d);
        return moved;
}

/* Whether the process of pidfd exited (or the pidfd is no good). */
static bool pidfd_exited(int pidfd)
{
        struct pollfd p = { .fd = pidfd, .events = POLLIN };

        return poll(&p, 1, 0) != 0;
}

/* A peer process exited (peer_watch.h): its data paths take it as their
 * peer's end (step_locked), a few at a time as poll_all finishes them.  A
 * data path whose own pidfd says its peer lives went to another process
 * that got the pid before the exit was heard of: it is watched anew. */
static bool on_peer_exit(struct dto_ia *t, uint64_t key)
{
        bool moved = false, more;
        int w;

        dat_lock(&t->lock);
        w = peer_watch_on_exit(&t->peers, key);
        for (uint32_t i = 0; w >= 0 && i < t->slots_end; i++) {
                struct dto_ep *d = t->slots[i].d;
                int r;

                if (!d || d->peer_watch != w)
                        continue;
                d->peer_watch = -1;
                if (pidfd_exited(d->ch->peer_pidfd)) {
                        d->peer_exit_pending = true;
                        continue;
                }
                r = peer_watch_hold(&t->peers, d->ch->peer_pid, d->ch->peer_pidfd);
                d->peer_watch = r >= 0 ? r : -1;
        }
        dat_unlock(&t->lock);
        if (w < 0)
                return false;
        do {
                struct dto_ep *ended[POLL_FAILED_MAX];
                unsigned n = 0;
                struct dto_batch b;

                DTO_BATCH_EMPTY(b);
                more = false;
                dat_lock(&t->lock);
                for (uint32_t i = 0; i < t->slots_end; i++) {
                        struct dto_ep *d = t->slots[i].d;
                        bool finish;

                        if (!d || !d->peer_exit_pending)
                                continue;
                        if (n == POLL_FAILED_MAX) {
                                more = true;
                                break;
                        }
                        d->peer_exit_pending = false;
                        moved |= step_locked(d, true, true, false, NULL, &b, &finish);
                        if (finish)
                                ended[n++] = d;
                }
                round_end(t, &b, ended, n);
        } while (more);
        return moved;
}

static void drain_eventfd(int fd)
{
        uint64_t v;

        (void)!read(fd, &v, sizeof(v));
}

/* When work comes in a stream (twice within this long), the progress
 * thread keeps polling this long after it before it arms the channels and
 * sleeps: a stream of requests served without the application's help (RDMA
 * to a target that computes) then costs no wake-up per request, while a
 * lone event (a connection's first frames) costs no spinning. */
#define PROGRESS_SPIN_NS 60000u

/* An application thread polls: the progress thread stops watching the
 * channels (a TCP socket would otherwise wake it for every frame the
 * application reads anyway, and steal its CPU); arm_all() watches them
 * again before an armed sleep. */
static void quiet_all(struct dto_ia *t)
{
        bool left = false;

        /* Called every grace round while the application polls: once all
         * is quiet it costs nothing, and it never waits for a lock an
         * application thread holds (what it could not quiet now, it
         * quiets next round). */
        if (!dat_trylock(&t->lock))
                return;
        if (!t->watching) {
                dat_unlock(&t->lock);
                return;
        }
        for (uint32_t i = 0; i < t->slots_end; i++) {
                struct dto_ep *d = t->slots[i].d;

                if (!d)
                        continue;
                if (!dat_trylock(&d->lock)) {
                        left = true;
                        continue;
                }
                if (d->state == DTO_RUNNING && d->poll_events != 0 &&
                    channel_watch(t, d, slot_key(i, t->slots[i].gen, EV_CHANNEL), 0) < 0)
                        left = true;
                dat_unlock(&d->lock);
        }
        t->watching = left;
        dat_unlock(&t->lock);
}

/* Whether an application thread polled within the grace (the count moved
 * since the progress thread last looked, or it moved less than a grace
 * ago), or is polling right now.  The progress thread's own. */
static bool app_polled_lately(struct dto_ia *t, uint64_t now)
{
        uint64_t polls = __atomic_load_n(&t->app_polls, __ATOMIC_SEQ_CST);

        if (__atomic_load_n(&t->app_busy, __ATOMIC_RELAXED) > 0)
                return true;
        if (__atomic_load_n(&t->app_asleep, __ATOMIC_SEQ_CST))
                return false;
        if (polls != t->polls_seen) {
                t->polls_seen = polls;
                t->polls_seen_ns = now;
                return true;
        }
        return now - t->polls_seen_ns < APP_POLL_GRACE_NS;
}

/* How the progress thread waits this round: *tsp NULL for no bound.
 * Spinning (polled: work a moment ago, nobody else polls): a zero wait;
 * an application thread polls: unarmed, until its grace ends; otherwise
 * armed, until the nearest receiver-not-ready deadline.  Returns whether
 * every data path must be looked at after the wait. */
static bool plan_wait(struct dto_ia *t, uint64_t last_work, unsigned *quiet_rounds,
                      struct timespec *ts, struct timespec **tsp)
{
        uint64_t now = dto_now_ns();
        int timeout;

        if (app_polled_lately(t, now)) {
                /* A consumer going to sleep kicks us out of this. */
                __atomic_store_n(&t->unarmed, true, __ATOMIC_SEQ_CST);
                if (app_polled_lately(t, now)) {
                        uint64_t since = now - t->polls_seen_ns;
                        uint64_t left = since >= APP_POLL_GRACE_NS ? APP_POLL_GRACE_NS
                                                                   : APP_POLL_GRACE_NS - since;

                        /* Each wake-up steals the polling thread's CPU for
                         * a few µs (the tail of a ping-pong): while it goes
                         * on polling round after round, wake up less often,
                         * up to 2^APP_POLL_BACKOFF_SHIFT graces. */
                        left += APP_POLL_GRACE_NS * ((1u << *quiet_rounds) - 1);
                        if (*quiet_rounds < APP_POLL_BACKOFF_SHIFT)
                                (*quiet_rounds)++;
                        quiet_all(t);
                        *ts = (struct timespec){ (time_t)(left / 1000000000u),
                                                 (long)(left % 1000000000u) };
                        *tsp = ts;
                        /* Nothing to look at when the grace ends: the next
                         * round waits again if the application still polls,
                         * or arms (which finds what waits) if not.  Taking
                         * the data paths' locks here would make the polling
                         * thread, on the same CPU as often as not, wait for
                         * us in the kernel. */
                        return false;
                }
                __atomic_store_n(&t->unarmed, false, __ATOMIC_SEQ_CST);
        }
        *quiet_rounds = 0;
        if (last_work && now - last_work < PROGRESS_SPIN_NS) {
                *ts = (struct timespec){ 0, 0 };
                *tsp = ts;
                return true;
        }
        /* Announced before the channels are looked at: a thread that
         * leaves an acknowledgement owed after arm_all() saw its data path
         * sees this and kicks us; one before, arm_all() sees. */
        __atomic_store_n(&t->armed_sleep, true, __ATOMIC_SEQ_CST);
        timeout = arm_all(t);
        if (timeout < 0) {
                *tsp = NULL;
                return false;
        }
        *ts = (struct timespec){ timeout / 1000, (long)(timeout % 1000) * 1000000 };
        *tsp = ts;
        return true;
}

/* epoll_pwait2 (Linux 5.11) waits to the nanosecond; where it is missing
 * (older kernels, seccomp filters, valgrind) epoll_wait waits the same
 * bound rounded up to the millisecond. */
static int wait_events(int epfd, struct epoll_event *evs, const struct timespec *tsp)
{
        static bool no_pwait2;
        int n;

        if (!__atomic_load_n(&no_pwait2, __ATOMIC_RELAXED)) {
                n = epoll_pwait2(epfd, evs, EVENTS_MAX, tsp, NULL);
                if (n >= 0 || errno != ENOSYS)
                        return n;
                __atomic_store_n(&no_pwait2, true, __ATOMIC_RELAXED);
        }
        if (!tsp)
                return epoll_wait(epfd, evs, EVENTS_MAX, -1);
        return epoll_wait(epfd, evs, EVENTS_MAX,
                          (int)(tsp->tv_sec * 1000 + (tsp->tv_nsec + 999999) / 1000000));
}

bool dto_ia_run(struct ia *ia, int datd_fd, int stop_fd, bool (*on_datd)(void *), void *arg)
{
        struct dto_ia *t = &ia->dto;
        struct epoll_event evs[EVENTS_MAX];
        uint64_t last_work = 0, prev_work = 0;
        unsigned quiet_rounds = 0;
        bool ok = true;

        if (watch(t, datd_fd, EPOLLIN, EV_DATD) < 0 || watch(t, stop_fd, EPOLLIN, EV_STOP_KEY) < 0)
                return false;
        progress_of = t;
        datd_conn_set_watch(&ia->conn, t->epfd, EV_DATD);
        for (;;) {
                struct timespec ts, *tsp;
                bool streaming = last_work && last_work - prev_work < PROGRESS_SPIN_NS;
                bool all = plan_wait(t, streaming ? last_work : 0, &quiet_rounds, &ts, &tsp), moved = false;
                int n = wait_events(t->epfd, evs, tsp);

                __atomic_store_n(&t->rounds, t->rounds + 1, __ATOMIC_RELAXED);
                __atomic_store_n(&t->unarmed, false, __ATOMIC_RELAXED);
                __atomic_store_n(&t->armed_sleep, false, __ATOMIC_RELAXED);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        ok = false;
                        break;
                }
                for (int i = 0; i < n; i++) {
                        uint64_t key = evs[i].data.u64;

                        if (key == EV_STOP_KEY)
                                goto out;
                        if (key == EV_KICK_KEY) {
                                drain_eventfd(t->kick_fd);
                                all = true;
                        } else if (key == EV_DATD) {
                                if (!on_datd(arg)) {
                                        ok = false;
                                        goto out;
                                }
                        } else if (channel_closer_key_is_ours(&t->closer, key)) {
                                channel_closer_on_event(&t->closer, key);
                        } else if (peer_watch_key_is_ours(&t->peers, key)) {
                                moved |= on_peer_exit(t, key);
                        } else {
                                moved |= on_slot_event(t, key, evs[i].events);
                        }
                }
                /* A kick, a deadline, spinning, or work found while arming:
                 * everyone. */
                if (all)
                        moved |= poll_all(t, true, false, NULL);
                if (moved) {
                        prev_work = last_work;
                        last_work = dto_now_ns();
                }
        }
out:
        progress_of = NULL;
        datd_conn_set_watch(&ia->conn, -1, 0);
        (void)epoll_ctl(t->epfd, EPOLL_CTL_DEL, datd_fd, NULL);
        (void)epoll_ctl(t->epfd, EPOLL_CTL_DEL, stop_fd, NULL);
        return ok;
}
