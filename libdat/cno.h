/* Consumer Notification Objects: one place to sleep for events on a set of
 * EVDs of one IA (dat_cno_wait(3DAT)).  An enabled EVD attached to a CNO,
 * with nobody waiting on the EVD itself, triggers the CNO when a
 * notification event arrives (evd_post): the trigger wakes the CNO's
 * waiters, one of which takes it and returns the EVD's handle; a trigger
 * nobody waits for stays pending and ends the next dat_cno_wait at once.
 * A trigger also calls the CNO's OS Wait Proxy Agent, once: the agent is
 * no longer associated with the CNO after it has been invoked
 * (dat_cno_create(3DAT)) until dat_cno_modify_agent sets one again.
 *
 * The CNO's `users` count the EVDs attached to it (under dat_object_lock).
 * Its own lock nests inside an EVD's lock (see evd.h); the agent is called
 * with no lock held, through cno_notice_run(), and never by a thread while
 * it reads datd's socket (cno_notices_hold). */
#ifndef DATD_LIBDAT_CNO_H
#define DATD_LIBDAT_CNO_H

#include <pthread.h>

#include "libdat/handle.h"

struct cno {
        struct dat_object obj;          /* parent: the IA it was created on */
        uint32_t datd_id;               /* datd's id of its DATP_OBJ_CNO */

        pthread_mutex_t lock;           /* everything below */
        DAT_OS_WAIT_PROXY_AGENT agent;  /* proxy_agent_func NULL: none */
        DAT_EVD_HANDLE pending;         /* an EVD whose trigger no waiter took yet */
        unsigned waiters;               /* threads inside dat_cno_wait */
        uint32_t wake_seq;              /* futex word: changes on every trigger or release */
        uint32_t release_gen;           /* bumped when waiters must leave with a NULL EVD */
        bool dying;                     /* abrupt IA close */
};

/* What a trigger leaves to do once every lock is dropped. */
struct cno_notice {
        DAT_OS_WAIT_PROXY_AGENT agent;  /* proxy_agent_func NULL: nothing */
        DAT_EVD_HANDLE evd;
};

/* The CNO a handle names, or NULL. */
struct cno *cno_lookup(DAT_CNO_HANDLE handle);

/* The EVD named by evd fired (the caller holds that EVD's lock): wakes
 * the CNO's waiters or leaves the trigger pending, and hands the proxy
 * agent, if any, to *notice. */
void cno_trigger(struct cno *cno, DAT_EVD_HANDLE evd, struct cno_notice *notice);

/* Calls the agent a trigger handed out, if any.  No lock may be held.
 * Between cno_notices_hold and cno_notices_release the calling thread
 * only files it. */
void cno_notice_run(const struct cno_notice *notice);

/* The agents a thread that reads datd's socket (the progress thread, a
 * waiter that took the socket over) triggers while it dispatches datd's
 * packets: they run once it gave the socket and its read_lock up.  An
 * agent is the consumer's code and may call anything: a round trip to
 * datd (dat_evd_create, dat_ep_free) waits for a reply only the socket's
 * reader would read (it failed after DATD_REPLY_TIMEOUT_MS, with every
 * event of the IA held up meanwhile), a dat_evd_wait of its own waits for
 * events only it would dispatch, and dat_ia_close for the lock it holds.
 * The packets read between a hold and its release trigger a few agents
 * at most (each runs once per dat_cno_modify_agent); past CNO_HELD_MAX
 * they run at once, as before.  On the progress thread, the socket's
 * reader even once it gave the socket up, an agent's round trip reads past
 * datd's other packets to its reply and dispatches them in place, in
 * order, under a hold of its own whose agents run once the round trip
 * returned (datd_conn.c, read_past); its dat_ia_close of that IA is
 * refused (ia.c). */
#define CNO_HELD_MAX 16

struct cno_held {
        struct cno_held *outer;         /* a hold of the thread still in force */
        unsigned n;
        struct cno_notice notice[CNO_HELD_MAX];
};

/* From now on this thread's cno_notice_run files into h. */
void cno_notices_hold(struct cno_held *h);

/* Ends the hold h (this thread's innermost) and runs what it filed, or
 * files it in the hold still in force around it. */
void cno_notices_release(struct cno_held *h);

/* Whether this process ever gave a CNO a proxy agent (dat_cno_create,
 * dat_cno_modify_agent).  An agent is the consumer's code run inside
 * libdat's calls, a dat_evd_dequeue's poll among them, where it may
 * dequeue itself: the dequeue that takes its event straight from its poll
 * (evd_ring.c, handoff) is not done then.  Set once, never cleared. */
extern bool cno_agents_seen;

/* The last EVD attached to the CNO left (freed or moved elsewhere): its
 * current waiters return with a NULL EVD handle (dat_cno_wait(3DAT)). */
void cno_release_waiters(struct cno *cno);

/* Frees a CNO (ops->destroy): detaches the EVDs still attached, wakes its
 * waiters and waits for them to leave. */
void cno_destroy(struct dat_object *obj);

#endif
