/* A control connection to datd: one AF_UNIX SOCK_SEQPACKET socket per IA
 * handle, opened with HELLO, then request/reply round trips.  Until the
 * IA's progress thread (progress.h) starts, the caller of datd_conn_call
 * reads its reply itself.  Afterwards the progress thread reads datd's
 * unsolicited events, so that none is ever lost, and a caller still reads
 * its own reply when it can: it takes the socket over (the reader lock,
 * with the progress thread's watch of the socket turned off), and when
 * the packet at the head is its reply it reads it itself, which saves the
 * wake-up of the progress thread and the hand-over of every round trip (a
 * wake-up costs more than the round trip on a busy-idle machine).  At any
 * other packet (an event, another request's reply), or when the socket is
 * taken, it hands over: the progress thread reads every packet in
 * order and gives the reply to the caller waiting for its request_id
 * (datd_conn_deliver).  Events are dispatched by whoever holds the socket
 * and reads them in order: the progress thread, or an application thread
 * that sleeps until datd sends an event (datd_conn_take_over); never by a
 * caller waiting for its reply, and never after a reply that datd sent
 * later.  That reader's own round trips (a CNO's agent on the progress
 * thread) have nobody to hand over to: they read on past other packets
 * and dispatch them in place, in order, as the progress thread would, so
 * that nothing is left for later and another caller's reply is delivered
 * after the events datd sent before it; only a round trip inside a
 * dispatch, whose packets not yet dispatched come first, leaves them in a
 * backlog for that dispatch (datd_backlog.h). */
#ifndef DATD_LIBDAT_DATD_CONN_H
#define DATD_LIBDAT_DATD_CONN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libdat/dat_lock.h"
#include "libdat/datd_backlog.h"
#include "libdat/libdat.h"
#include "proto/datp.h"

/* datd's socket when $DATD_SOCKET is unset: <runtime dir>/datd.sock, where
 * datd's runtime directory is RUNSTATEDIR "/datd" as datd and datctl use it.
 * The build passes RUNSTATEDIR from configure's --with-rundir, which is /run
 * whatever the prefix (a prefix-derived $(runstatedir) would be
 * /usr/local/var/run by default, where no system's datd listens).  A build
 * may also pass -DDATD_DEFAULT_SOCKET=... outright. */
#ifndef DATD_DEFAULT_SOCKET
#ifdef RUNSTATEDIR
#define DATD_DEFAULT_SOCKET RUNSTATEDIR "/datd/datd.sock"
#else
#define DATD_DEFAULT_SOCKET "/run/datd/datd.sock"
#endif
#endif

/* How long a round trip to datd may take before the call fails. */
#define DATD_REPLY_TIMEOUT_MS 10000

/* Room for a human-readable reason, for the debug trace. */
#define DATD_REASON_MAX 256

/* What becomes of the reply to a request sent with datd_conn_send_later:
 * called once, by the socket's reader (the progress thread, or a waiter
 * that took the socket over: never two at once), with DAT_SUCCESS and the reply
 * (its type checked, its own status left to fn), or with the failure and
 * NULL (datd refused the request as malformed, or went away). */
typedef void datd_later_fn(void *ctx, DAT_RETURN ret, const union datp_message *reply);

/* Validates and dispatches a packet of datd (len as datp_recv returned
 * it) as the progress thread would, under read_lock; its descriptors are
 * taken or closed, its memory stays the caller's.  False when the
 * connection is over (the end, garbage, a fatal ERROR). */
typedef bool datd_dispatch_fn(void *ctx, struct datd_packet *pkt);

struct datd_later {
        uint32_t request_id;
        uint16_t want;                  /* the reply's type */
        datd_later_fn *fn;
        void *ctx;
};

/* One-way messages held back until the next request (datd_conn_defer). */
#define DATD_DEFER_MAX 16
#define DATD_DEFER_BYTES 32

struct datd_conn {
        int fd;
        uint16_t version;               /* negotiated by HELLO */
        uint32_t next_request_id;
        char socket_path[108];
        char daemon_version[DATP_VERSION_STR_MAX];
        pthread_mutex_t lock;           /* one round trip at a time */
        bool initialized;               /* the locks are initialised */

        /* Handing replies over from the progress thread, under wait_lock
         * (held for a copy at most, never across I/O but the send). */
        pthread_mutex_t wait_lock;
        pthread_cond_t wait_cond;       /* CLOCK_MONOTONIC */
        bool threaded;                  /* the progress thread reads the socket */
        bool dead;                      /* datd went away: every call fails */
        uint32_t wait_id;               /* the request a caller waits for, 0 for none */
        union datp_message *wait_reply; /* where its reply goes */
        bool wait_done;                 /* wait_reply holds it */

        /* Whoever reads the socket holds read_lock: the progress thread
         * for each packet it reads and dispatches, a caller while it reads
         * its own reply.  watch_epfd/watch_key: the progress thread's
         * epoll set and key for the socket (watch_epfd -1: not watched),
         * turned off while a caller reads; under read_lock. */
        pthread_mutex_t read_lock;
        int watch_epfd;
        uint64_t watch_key;
        /* The watch's turning on and off (datd_conn.c, stop_reading);
         * nests inside read_lock. */
        pthread_mutex_t watch_lock;
        /* An eventfd that wakes an application thread reading the socket
         * while it waits for events (datd_conn_take_over); made by the
         * first one, -1 until then, closed with the connection. */
        int reader_kick_fd;
        /* Set by progress_stop: a thread that took the socket over gives
         * it back at once, and no other takes it (the progress thread needs
         * read_lock to stop). */
        bool reader_evicted;
        /* The thread that dispatches what datd sends: the progress thread
         * (progress_tag, while it runs), and the one holding read_lock to
         * dispatch now (dispatcher_tag: the progress thread between
         * datd_conn_begin_read and end_read, a thread that took the socket
         * over, a round trip dispatching in place); 0 for none.  Such a
         * thread that makes a round trip of its own reads past other
         * packets to its reply: nobody else would read that reply for it
         * (datd_conn.c, read_past).  Outside a dispatch it dispatches
         * them in place (dispatch_fn, set by the progress thread's
         * owner); inside one they go to backlog (under read_lock), which
         * that dispatch takes before it lets the socket go. */
        uintptr_t progress_tag, dispatcher_tag;
        datd_dispatch_fn *dispatch_fn;
        void *dispatch_ctx;
        struct datd_backlog backlog;
        /* Whether a caller spins for its reply before it sleeps
         * (datd_conn.c, score_spin); under lock. */
        unsigned spin_score;

        /* datd_conn_defer's messages, under defer_lock (n_deferred is
         * read without it first: most requests find none). */
        struct dat_lock defer_lock;
        unsigned n_deferred;
        union {
                struct datp_header hdr;
                unsigned char bytes[DATD_DEFER_BYTES];
        } deferred[DATD_DEFER_MAX];

        /* Requests whose replies nobody waits for but datd_later_fn's;
         * under wait_lock. */
        struct datd_later *later;
        size_t n_later, later_cap;
};

/* $DATD_SOCKET if set and non-empty, else DATD_DEFAULT_SOCKET. */
const char *datd_socket_path(void);

/* Connects to datd and says HELLO.  On failure returns the DAT code (see
 * dat_ia_openv in ia.c for the choice) with the reason in why. */
DAT_RETURN datd_conn_open(struct datd_conn *conn, char why[DATD_REASON_MAX]);

/* Sends request (whose header's type and length are set, the rest is filled
 * here) and waits for the matching reply into *reply.  A reply is checked by
 * datp_validate() and must be of type request|DATP_REPLY.  Returns
 * DAT_SUCCESS or DAT_INTERNAL_ERROR with the reason in why; the reply's own
 * datp_status is left to the caller. */
DAT_RETURN datd_conn_call(struct datd_conn *conn, struct datp_header *request,
                          union datp_message *reply, char why[DATD_REASON_MAX]);

/* Sends request with request_id 0, for which datd sends no reply (nor
 * word of a failure): for what nothing waits on, and for the progress
 * thread itself, which must never wait on datd.  Returns DAT_SUCCESS or
 * DAT_INTERNAL_ERROR. */
DAT_RETURN datd_conn_send(struct datd_conn *conn, struct datp_header *request);

/* Sends request (at most DATD_DEFER_BYTES, request_id 0, no reply) right
 * before the next request this connection sends, in whichever thread
 * sends it, so that it costs datd no wake-up of its own; at once when
 * DATD_DEFER_MAX wait already (all of them).  For news datd needs only
 * by the time it serves a later request: a released channel is reused
 * for a connection that a CONNECT or CR_ACCEPT asks for.  -EINVAL for a
 * message too long. */
int datd_conn_defer(struct datd_conn *conn, const struct datp_header *request);

/* How many requests of datd_conn_send_later may await their replies.
 * Each answer brings more of datd's packets (an accept: a data channel,
 * ESTABLISHED); without a bound a burst of them would let datd's queue of
 * packets for this connection outgrow its max_pending_replies while the
 * progress thread works through them, and datd drops such a client. */
#define DATD_LATER_MAX 32

/* Sends request without waiting: fn gets its reply when the socket's
 * dispatching reader (the progress thread, or a waiter that took the socket
 * over) reads it, so after every earlier packet of datd and before every
 * later one; or the failure that there will be none.  With
 * DATD_LATER_MAX replies due, it first waits (bounded like a round trip)
 * until one came; never on a progress thread.  Before the progress thread
 * runs this is a round trip and fn is called here.  Returns DAT_SUCCESS
 * (fn will be called) or DAT_INTERNAL_ERROR (it will not). */
DAT_RETURN datd_conn_send_later(struct datd_conn *conn, struct datp_header *request,
                                datd_later_fn *fn, void *ctx);

/* For the progress thread: from now on replies come through
 * datd_conn_deliver.  Called before the thread starts reading. */
void datd_conn_set_threaded(struct datd_conn *conn, bool threaded);

/* For a progress thread, at its start: it delivers replies, so it never
 * waits for one in datd_conn_send_later. */
void datd_conn_reader_thread(void);

/* For conn's progress thread, at its start (true) and its end (false). */
void datd_conn_set_progress_thread(struct datd_conn *conn, bool here);

/* For the progress thread's owner, before the thread starts: how a round
 * trip of that thread outside its dispatch (a CNO's agent) dispatches the
 * packets it reads past (datd_conn.c, read_past). */
void datd_conn_set_dispatch(struct datd_conn *conn, datd_dispatch_fn *fn, void *ctx);

/* Whether the calling thread is the one that dispatches what datd sends
 * on conn: its progress thread, or a thread holding the socket to
 * dispatch (datd_conn_begin_read, datd_conn_take_over).  Nothing it
 * waits for would come meanwhile: its round trips read past other
 * packets to their replies, and it must not stop the progress thread. */
bool datd_conn_reads_here(const struct datd_conn *conn);

/* For the socket's dispatching reader, under read_lock (between
 * datd_conn_begin_read and end_read, or while the socket is taken over):
 * the oldest packet a round trip inside its dispatch read past
 * (datd_backlog.h), to dispatch before any read from the socket and before
 * the socket is let go, or NULL. */
struct datd_packet *datd_conn_backlog_pop(struct datd_conn *conn);

/* For tests: called by a round trip of the thread that dispatches what
 * datd sends each time before it tries to take the socket another thread
 * read (datd_conn.c, read_past); NULL elsewhere. */
extern void (*datd_conn_test_before_take)(struct datd_conn *conn);

/* For an application thread about to sleep until datd sends an event (a
 * dat_evd_wait on an EVD of connection events): it reads the socket and
 * dispatches what comes itself, as the progress thread would (in order,
 * under read_lock), which saves the progress thread's wake-up and the
 * hand-over of every event.  True when it holds the socket: the progress
 * thread no longer watches it until datd_conn_give_back, and *kick_fd is
 * the eventfd that datd_conn_kick_reader makes readable, *was_reader what
 * the caller gives datd_conn_give_back.  False when another thread reads
 * (the progress thread, a caller reading its own reply), the progress
 * thread does not run or is being stopped, or no eventfd can be made. */
bool datd_conn_take_over(struct datd_conn *conn, int *kick_fd, bool *was_reader);
void datd_conn_give_back(struct datd_conn *conn, bool was_reader);

/* Whether the thread holding the socket must give it back now (the
 * progress thread is being stopped). */
bool datd_conn_reader_evicted(const struct datd_conn *conn);

/* Wakes the thread that took the socket over (a thread posted to the EVD
 * it waits on); a stale kick costs the next one a look. */
void datd_conn_kick_reader(struct datd_conn *conn);

/* For progress_stop, before it stops the thread: sends the thread that
 * holds the socket away and keeps others from taking it. */
void datd_conn_evict_reader(struct datd_conn *conn);

/* For the progress thread: it watches the socket in epfd under key (-1:
 * it stopped watching).  Callers turn the watch off while they read their
 * own replies. */
void datd_conn_set_watch(struct datd_conn *conn, int epfd, uint64_t key);

/* For the progress thread, around the reading and dispatch of a packet:
 * false when another thread reads the socket now (a caller, whose reply
 * the packet at the head then is, or which hands it back by turning the
 * watch on again; or a waiter that took the socket over and dispatches it
 * itself).  After true, datd_conn_end_read. */
bool datd_conn_begin_read(struct datd_conn *conn);
void datd_conn_end_read(struct datd_conn *conn);

/* For the progress thread: a validated reply (or ERROR) from datd.  Copies
 * it to the caller waiting for its request_id and wakes it, or hands it to
 * its datd_later_fn; returns false when nobody waits for it (the reply to
 * a call that gave up: dropped). */
bool datd_conn_deliver(struct datd_conn *conn, const union datp_message *msg, size_t len);

/* For the progress thread: datd closed the connection or sent garbage;
 * the waiting call and every later one fail, and every datd_later_fn
 * still due is called with the failure. */
void datd_conn_hangup(struct datd_conn *conn);

/* Closes the socket (datd then drops whatever this connection still owned).
 * Accepts a connection that never opened (fd < 0). */
void datd_conn_close(struct datd_conn *conn);

#endif
