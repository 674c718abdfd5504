/* Event Dispatchers: a ring of DAT_EVENTs in process memory.
 *
 * Producers are the transports, the thread that reads datd's socket and
 * dat_evd_post_se; they call evd_post_event() from any thread.  The
 * consumer takes events with dat_evd_dequeue() or dat_evd_wait(), which
 * polls briefly and then sleeps on a futex (evd_wait.h) that producers wake
 * only when a waiter actually sleeps.  An EVD may feed a CNO (cno.h).
 *
 * Files: evd.c holds the object and the control entry points (create,
 * free, query, resize, CNO binding, enable/disable, (un)waitable);
 * evd_ring.c the ring itself and the data-path entry points (post_se,
 * dequeue, wait) with the producer API.
 *
 * Locking: `lock`, a spinlock (spin_lock.h) held for a few loads and one
 * event copy, guards the ring and the waiter/CNO state below.  Lock order:
 * dat_object_lock() -> evd lock -> cno lock; a CNO's proxy agent (consumer
 * code) is only ever called with no lock held. */
#ifndef DATD_LIBDAT_EVD_H
#define DATD_LIBDAT_EVD_H

#include <pthread.h>

#include "libdat/handle.h"
#include "libdat/spin_lock.h"

struct cno;
struct cno_notice;

struct evd {
        struct dat_object obj;          /* parent: the IA it was created on */
        uint32_t datd_id;               /* datd's DATP_OBJ_EVD id; 0: an IA's own async EVD */
        DAT_COUNT qlen;                 /* events the ring holds (>= asked); under lock */
        DAT_EVD_FLAGS flags;            /* the event streams it takes; fixed at creation */

        struct spin_lock lock;
        /* The ring, under lock. */
        DAT_EVENT *ring;
        uint32_t head;                  /* slot of the oldest event */
        uint32_t count;                 /* events queued */
        bool overflowed;                /* lost an event; cleared when the consumer makes room */

        bool enabled;                   /* dat_evd_enable: may trigger its CNO */
        bool unwaitable;                /* dat_evd_set_unwaitable */
        bool dying;                     /* being destroyed: a waiter leaves with DAT_ABORT */
        struct cno *cno;                /* the CNO it feeds, or NULL (also under dat_object_lock) */

        /* The one thread inside dat_evd_wait past its fast path owns the
         * EVD (dat_evd_wait(3DAT)): other dequeues get DAT_INVALID_STATE
         * and its CNO is not triggered. */
        bool waiter;
        uint32_t wait_threshold;        /* events that satisfy it */
        bool waiter_sleeps;             /* it may be in the futex: producers must wake it */
        bool waiter_reads;              /* it reads datd's socket instead: its kick wakes it */
        uint32_t wake_seq;              /* the futex word; changes on anything a waiter watches */
        uint32_t notified;              /* notification events queued so far (wraps) */
        uint32_t wait_notified;         /* ... when the waiter started waiting */

        /* Endpoints feeding this EVD with consumer-controlled notification
         * (DAT_COMPLETION_UNSIGNALLED_FLAG, DAT_COMPLETION_SOLICITED_WAIT_FLAG):
         * while any exists, dat_evd_wait's threshold must be 1.  Under lock. */
        unsigned unsignalled_feeds;
        unsigned solicited_feeds;

        /* The DTO/RMR completion streams of endpoints that use this EVD,
         * and the completion flags they all share (dat_ep_create(3DAT):
         * streams on one EVD must agree, which ep_streams_compatible()
         * checks here instead of against every EP of the IA).  Under
         * dat_object_lock(). */
        unsigned stream_users;
        DAT_COMPLETION_FLAGS stream_flags;
};

/* The EVD a handle names, or NULL. */
struct evd *evd_lookup(DAT_EVD_HANDLE handle);

/* Creates the async EVD of an IA being opened, holding at least min_qlen
 * events (min_qlen in [0, the transport's max_evd_qlen], checked by the
 * caller).  It is part of the IA instance: not registered with datd, freed
 * with the IA, refused by dat_evd_free. */
DAT_RETURN evd_create_async(struct dat_object *ia, DAT_COUNT min_qlen, struct evd **out);

/* Frees an EVD (ops->destroy): wakes a waiter with DAT_ABORT and waits for
 * it to leave, detaches it from its CNO.  Does not talk to datd (the IA's
 * connection is going away). */
void evd_destroy(struct dat_object *obj);

/* ---- producer API (evd_ring.c) ------------------------------------------ */

/* Queues a copy of *event (its evd_handle is set to this EVD's) and, if
 * notify, makes it a notification event: it wakes a dat_evd_wait()er whose
 * threshold is met, or else triggers the EVD's CNO if the EVD is enabled.
 * Without notify (a completion with notification suppressed, or not
 * solicited) the event is only queued.  Callable from any thread; no
 * allocation, no system call unless a thread sleeps on the EVD or its CNO.
 *
 * A full ring loses the event (dat_evd_post_se(3DAT) aside, which refuses
 * instead): DAT_QUEUE_FULL is returned, the EVD is marked overflowed and,
 * once per overflow, a DAT_ASYNC_ERROR_EVD_OVERFLOW event naming it goes to
 * its IA's async EVD.  A dying EVD drops events: DAT_ABORT. */
DAT_RETURN evd_post(struct evd *evd, const DAT_EVENT *event, bool notify);

/* For producers that hold a lock of their own (the DTO engine): the same
 * as evd_post, but a CNO's proxy agent and an overflow report are left in
 * *d for evd_deferred_run once that lock is dropped.  Beyond
 * EVD_DEFERRED_MAX notices in one batch they run at once. */
#define EVD_DEFERRED_MAX 8

struct evd_deferred {
        struct cno_notice_slot {
                DAT_OS_WAIT_PROXY_AGENT agent;
                DAT_EVD_HANDLE evd;
        } notice[EVD_DEFERRED_MAX];
        struct evd *overflowed[EVD_DEFERRED_MAX];
        unsigned n_notice, n_overflowed;
};

DAT_RETURN evd_post_deferred(struct evd *evd, const DAT_EVENT *event, bool notify,
                             struct evd_deferred *d);
void evd_deferred_run_all(struct evd_deferred *d);

/* Runs what d collected; the common case, nothing, costs no call. */
static inline void evd_deferred_run(struct evd_deferred *d)
{
        if (d->n_notice | d->n_overflowed)
                evd_deferred_run_all(d);
}

/* evd_post(evd, event, true). */
DAT_RETURN evd_post_event(struct evd *evd, const DAT_EVENT *event);

/* For the endpoint code: an EP starts / stops feeding this EVD completions
 * whose notification the consumer controls (DAT_EVD_STATE_CONFIG_NOTIFY for
 * DAT_COMPLETION_UNSIGNALLED_FLAG, DAT_EVD_STATE_CONFIG_SOLICITED for
 * DAT_COMPLETION_SOLICITED_WAIT_FLAG); dat_evd_wait then refuses a threshold
 * above 1 with DAT_INVALID_STATE and dat_evd_query reports the state. */
void evd_feed_config_get(struct evd *evd, DAT_EVD_STATE config);
void evd_feed_config_put(struct evd *evd, DAT_EVD_STATE config);

/* ---- internals shared by evd.c and evd_ring.c ---------------------------- */

/* Builds an EVD's ring and lock (not its handle); NULL on ENOMEM. */
struct evd *evd_alloc(DAT_COUNT qlen, DAT_EVD_FLAGS flags);

/* Frees what evd_alloc built; accepts NULL. */
void evd_release(struct evd *evd);

/* Replaces the ring by one of qlen slots keeping the queued events in
 * order; DAT_INVALID_STATE when more than qlen are queued (or a waiter's
 * threshold would no longer fit), DAT_INSUFFICIENT_RESOURCES on ENOMEM. */
DAT_RETURN evd_ring_resize(struct evd *evd, DAT_COUNT qlen);

/* Detaches the EVD from its CNO and attaches it to cno (NULL for none),
 * under dat_object_lock(); the CNO's users count the EVDs feeding it. */
void evd_set_cno_locked(struct evd *evd, struct cno *cno);

/* Bumps the futex word: for anything a waiter must see (its events, the
 * EVD unwaitable or dying).  Under evd->lock; returns how the waiter must
 * be woken after unlocking (evd_wake): 0 when it does not sleep. */
#define EVD_WAKE_SLEEPER 1u             /* it may sleep on the futex word */
#define EVD_WAKE_READER 2u              /* it reads datd's socket (datd_conn_take_over) */
unsigned evd_kick_waiter_locked(struct evd *evd);

/* Wakes the waiter as evd_kick_waiter_locked said, after unlocking. */
void evd_wake(struct evd *evd, unsigned how);

/* The EVD the calling thread waits on while it reads datd's socket, or
 * NULL: what it posts there itself needs no kick.  Returns the one before
 * (a take-over may nest, on another IA), for the caller to put back. */
struct evd *evd_reading_for(struct evd *evd);

#endif
