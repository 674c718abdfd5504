/* The control connection to datd (datd_conn.h). */
#include "config.h"

#include "libdat/datd_conn.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "libdat/cno.h"

const char *datd_socket_path(void)
{
        const char *p = getenv("DATD_SOCKET");

        return p && *p ? p : DATD_DEFAULT_SOCKET;
}

static long long now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* How long a caller reading its own reply looks at the socket without
 * sleeping.  datd answers a round trip in tens of microseconds; sleeping
 * and being woken costs about as much again on a virtual machine whose
 * idle CPUs halt. */
static long long call_spin_ns(void)
{
        static long long spin = -1;
        long long s = __atomic_load_n(&spin, __ATOMIC_RELAXED);

        if (s < 0) {
                const char *e = getenv("DATD_CALL_SPIN_US");

                s = e && *e ? atoll(e) * 1000 : 50000;
                __atomic_store_n(&spin, s, __ATOMIC_RELAXED);
        }
        return s;
}

/* What a caller makes of a validated packet that answers its request. */
static DAT_RETURN check_reply(uint16_t want, const union datp_message *reply,
                              char why[DATD_REASON_MAX])
{
        if (reply->hdr.type == DATP_ERROR) {
                snprintf(why, DATD_REASON_MAX, "datd refused our %s: %s",
                         datp_type_name(want & ~DATP_REPLY), reply->error.reason);
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
        if (reply->hdr.type != want) {
                snprintf(why, DATD_REASON_MAX, "datd answered %s with %s",
                         datp_type_name(want & ~DATP_REPLY), datp_type_name(reply->hdr.type));
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
        return DAT_SUCCESS;
}

static DAT_RETURN no_reply(char why[DATD_REASON_MAX])
{
        snprintf(why, DATD_REASON_MAX, "no reply from datd within %d ms", DATD_REPLY_TIMEOUT_MS);
        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
}

static long long reply_deadline(void)
{
        return now_ns() + (long long)DATD_REPLY_TIMEOUT_MS * 1000000;
}

/* Until a packet waits on the socket: looking without sleeping until
 * spin_until, then sleeping in poll().  false once the deadline passed.
 * A failing poll returns true: the read that follows tells why. */
static bool wait_packet(struct datd_conn *conn, long long spin_until, long long deadline)
{
        for (;;) {
                struct pollfd p = { .fd = conn->fd, .events = POLLIN };
                long long now = now_ns();
                int r;

                if (now >= deadline)
                        return false;
                r = poll(&p, 1, now < spin_until ? 0 : (int)((deadline - now) / 1000000) + 1);
                if (r > 0 || (r < 0 && errno != EINTR))
                        return true;
        }
}

/* Reads the packet at the head of the socket into reply and checks it
 * (datp_validate).  DAT_SUCCESS, or DAT_INTERNAL_ERROR with why. */
static DAT_RETURN take_packet(struct datd_conn *conn, union datp_message *reply,
                              char why[DATD_REASON_MAX])
{
        const char *reason = NULL;
        unsigned nfds = 0;
        ssize_t n = datp_recv(conn->fd, reply, NULL, 0, &nfds);
        int r;

        if (n <= 0) {
                snprintf(why, DATD_REASON_MAX, "datd closed the connection%s%s",
                         n < 0 ? ": " : "", n < 0 ? strerror((int)-n) : "");
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
        r = datp_validate(reply, (size_t)n, nfds, DATP_TO_CLIENT, conn->version, &reason);
        if (r < 0) {
                snprintf(why, DATD_REASON_MAX, "malformed message from datd: %s",
                         reason ? reason : datp_decode_error_str(r));
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
        return DAT_SUCCESS;
}

/* Receives the reply to request_id (of type want) before the deadline,
 * reading the socket itself: before the progress thread runs nothing else
 * may be waiting for other packets, which are dropped. */
static DAT_RETURN receive_reply(struct datd_conn *conn, uint16_t want, uint32_t request_id,
                                union datp_message *reply, char why[DATD_REASON_MAX])
{
        long long deadline = reply_deadline();

        for (;;) {
                DAT_RETURN ret;

                if (!wait_packet(conn, 0, deadline))
                        return no_reply(why);
                ret = take_packet(conn, reply, why);
                if (ret != DAT_SUCCESS)
                        return ret;
                if (reply->hdr.request_id != request_id && reply->hdr.request_id != 0)
                        continue;
                return check_reply(want, reply, why);
        }
}

/* Forgets the caller's registered wait; under wait_lock. */
static void forget_wait_locked(struct datd_conn *conn)
{
        conn->wait_id = 0;
        conn->wait_reply = NULL;
        conn->wait_done = false;
}

/* Waits (under wait_lock) until the socket's reader delivered the reply to
 * the request registered in conn->wait_id, datd went away, or the bound
 * passed. */
static DAT_RETURN await_reply(struct datd_conn *conn, uint16_t want, union datp_message *reply,
                              char why[DATD_REASON_MAX])
{
        struct timespec deadline;
        DAT_RETURN ret = DAT_SUCCESS;

        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += DATD_REPLY_TIMEOUT_MS / 1000;
        deadline.tv_nsec += (long)(DATD_REPLY_TIMEOUT_MS % 1000) * 1000000;
        if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&conn->wait_lock);
        while (!conn->wait_done && !conn->dead) {
                if (pthread_cond_timedwait(&conn->wait_cond, &conn->wait_lock, &deadline) == ETIMEDOUT)
                        break;
        }
        if (conn->wait_done) {
                ret = check_reply(want, reply, why);
        } else if (conn->dead) {
                snprintf(why, DATD_REASON_MAX, "datd closed the connection");
                ret = DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        } else {
                ret = no_reply(why);
        }
        forget_wait_locked(conn);
        pthread_mutex_unlock(&conn->wait_lock);
        return ret;
}

/* Request ids start at 1: 0 marks an ERROR for an unreadable request and
 * datd's unsolicited events. */
static uint32_t next_request_id(struct datd_conn *conn)
{
        uint32_t id = __atomic_add_fetch(&conn->next_request_id, 1, __ATOMIC_RELAXED);

        if (id == 0)
                id = __atomic_add_fetch(&conn->next_request_id, 1, __ATOMIC_RELAXED);
        return id;
}

/* Sends what datd_conn_defer held back, then request if not NULL, in one
 * system call; under defer_lock.  Returns request's datp_send_many result
 * (what was held back is best effort: datd hears of it again, or not at
 * all, as it would of a lost message the connection's end makes moot). */
_Static_assert(DATD_DEFER_MAX + 1 <= DATP_SEND_MANY_MAX, "what is held back and a request go in one batch");

static int flush_deferred_locked(struct datd_conn *conn, const struct datp_header *request)
{
        const struct datp_header *batch[DATD_DEFER_MAX + 1];
        unsigned n = 0;
        int r, cancel;

        for (unsigned i = 0; i < conn->n_deferred; i++)
                batch[n++] = &conn->deferred[i].hdr;
        if (request)
                batch[n++] = request;
        /* sendmsg is a cancellation point: not with defer_lock held. */
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
        r = datp_send_many(conn->fd, batch, n, NULL);
        pthread_setcancelstate(cancel, NULL);
        __atomic_store_n(&conn->n_deferred, 0, __ATOMIC_RELAXED);
        return r;
}

static int send_request(struct datd_conn *conn, struct datp_header *request, uint32_t id)
{
        int r;

        datp_header_init(request, request->type, conn->version ? conn->version : DATP_VERSION_MAX,
                         request->length, id);
        if (__atomic_load_n(&conn->n_deferred, __ATOMIC_RELAXED) == 0)
                return datp_send(conn->fd, request, NULL, 0);
        /* What was held back goes first, with the request: datd takes both
         * from one wake-up, and this process makes one system call. */
        dat_lock(&conn->defer_lock);
        r = flush_deferred_locked(conn, request);
        dat_unlock(&conn->defer_lock);
        return r;
}

int datd_conn_defer(struct datd_conn *conn, const struct datp_header *request)
{
        if (request->length < sizeof(*request) || request->length > DATD_DEFER_BYTES)
                return -EINVAL;
        dat_lock(&conn->defer_lock);
        if (conn->n_deferred == DATD_DEFER_MAX)
                (void)flush_deferred_locked(conn, NULL);
        memcpy(conn->deferred[conn->n_deferred].bytes, request, request->length);
        datp_header_init(&conn->deferred[conn->n_deferred].hdr, request->type,
                         conn->version ? conn->version : DATP_VERSION_MAX, request->length, 0);
        __atomic_store_n(&conn->n_deferred, conn->n_deferred + 1, __ATOMIC_RELAXED);
        dat_unlock(&conn->defer_lock);
        return 0;
}

/* Turns the progress thread's watch of the socket on or off, under
 * watch_lock (which keeps the turnings in the order the threads held
 * read_lock: see stop_reading).  A failure (the thread stopped
 * watching in between) leaves nothing to undo. */
static void set_watched_locked(struct datd_conn *conn, bool on)
{
        struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.u64 = conn->watch_key };

        if (conn->watch_epfd >= 0)
                (void)epoll_ctl(conn->watch_epfd, EPOLL_CTL_MOD, conn->fd, &ev);
}

/* Takes the socket over from the progress thread, or says it cannot (the
 * thread is reading a packet, or does not watch the socket). */
static bool start_reading(struct datd_conn *conn)
{
        /* No backlog waits once read_lock is free: whoever read packets
         * past into it (a round trip inside a dispatch) holds the lock
         * until that dispatch took them (read_past). */
        if (pthread_mutex_trylock(&conn->read_lock) != 0)
                return false;
        if (conn->watch_epfd < 0) {
                pthread_mutex_unlock(&conn->read_lock);
                return false;
        }
        pthread_mutex_lock(&conn->watch_lock);
        set_watched_locked(conn, false);
        pthread_mutex_unlock(&conn->watch_lock);
        return true;
}

/* Gives it back.  read_lock goes first: woken by a packet that waits, the
 * progress thread must find it free (turned on before, a waiting packet
 * woke it to find the lock still held, and it spun on the level-triggered
 * watch, taking the CPU the holder needed to let go: connections went 8
 * times slower with 8 clients on 2 CPUs).  The watch goes on after, still
 * under watch_lock, taken before read_lock went: a thread that takes
 * read_lock meanwhile turns the watch off only after this has turned it on
 * (start_reading waits for watch_lock), never before (a late turning-on
 * undid it, and the progress thread woke for every packet that thread
 * read, to find the lock taken). */
static void stop_reading(struct datd_conn *conn)
{
        pthread_mutex_lock(&conn->watch_lock);
        pthread_mutex_unlock(&conn->read_lock);
        set_watched_locked(conn, true);
        pthread_mutex_unlock(&conn->watch_lock);
}

/* Whether spinning pays: each reply that came within the spin time (or
 * would have, while we did not spin) counts for, each that did not counts
 * against, twice as much.  A datd busy with other clients answers later
 * than the spin, and a spinning caller would take the CPU it needs. */
#define SPIN_SCORE_MAX 8
#define SPIN_SCORE_ON 4

static void score_spin(struct datd_conn *conn, bool in_time)
{
        if (in_time)
                conn->spin_score += conn->spin_score < SPIN_SCORE_MAX;
        else
                conn->spin_score = conn->spin_score > 2 ? conn->spin_score - 2 : 0;
}

enum own_read {
        OWN_DONE,       /* *ret is the call's result */
        OWN_HAND_OVER,  /* the socket's reader delivers the reply */
};

/* Reads the socket, between start_reading and stop_reading, while the
 * packet at its head is the reply to request_id.  Anything else is the
 * dispatching reader's (the progress thread, or a waiter that took the
 * socket over): an event, an ERROR of no request, the end of the
 * connection, and the replies to datd_conn_send_later (whose functions run
 * where events are dispatched, in order with them) or to a call that gave
 * up. */
static enum own_read read_own_reply(struct datd_conn *conn, uint16_t want, uint32_t request_id,
                                    union datp_message *reply, char why[DATD_REASON_MAX],
                                    DAT_RETURN *ret)
{
        long long start = now_ns(), deadline = reply_deadline(), spin = call_spin_ns();
        long long spin_until = start + (conn->spin_score >= SPIN_SCORE_ON ? spin : 0);

        for (;;) {
                struct datp_header head;
                ssize_t n;

                if (!wait_packet(conn, spin_until, deadline)) {
                        *ret = no_reply(why);
                        return OWN_DONE;
                }
                n = recv(conn->fd, &head, sizeof(head), MSG_PEEK | MSG_DONTWAIT);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n != (ssize_t)sizeof(head) || head.request_id != request_id ||
                    !(head.type & DATP_REPLY || head.type == DATP_ERROR))
                        return OWN_HAND_OVER;
                *ret = take_packet(conn, reply, why);
                if (*ret != DAT_SUCCESS) {
                        /* As the progress thread would: whoever sends
                         * garbage is not datd.  The shutdown lets the
                         * thread find the end of the connection. */
                        (void)shutdown(conn->fd, SHUT_RDWR);
                        return OWN_DONE;
                }
                score_spin(conn, now_ns() - start <= spin);
                *ret = check_reply(want, reply, why);
                return OWN_DONE;
        }
}

/* A thread's tag for progress_tag and dispatcher_tag: the address of a
 * thread-local (never 0; another thread's only once this one ended). */
static __thread char thread_tag;

static uintptr_t self_tag(void)
{
        return (uintptr_t)&thread_tag;
}

/* Whether this thread holds read_lock to dispatch (datd_conn_begin_read,
 * datd_conn_take_over). */
static bool dispatches_here(const struct datd_conn *conn)
{
        return __atomic_load_n(&conn->dispatcher_tag, __ATOMIC_RELAXED) == self_tag();
}

bool datd_conn_reads_here(const struct datd_conn *conn)
{
        return __atomic_load_n(&conn->progress_tag, __ATOMIC_RELAXED) == self_tag() ||
               dispatches_here(conn);
}

void datd_conn_set_progress_thread(struct datd_conn *conn, bool here)
{
        __atomic_store_n(&conn->progress_tag, here ? self_tag() : 0, __ATOMIC_RELAXED);
}

struct datd_packet *datd_conn_backlog_pop(struct datd_conn *conn)
{
        return datd_backlog_pop(&conn->backlog);
}

void datd_conn_set_dispatch(struct datd_conn *conn, datd_dispatch_fn *fn, void *ctx)
{
        conn->dispatch_fn = fn;
        conn->dispatch_ctx = ctx;
}

/* Copies msg to the caller waiting for its request_id, if one does, and
 * wakes it; under wait_lock. */
static bool deliver_wait_locked(struct datd_conn *conn, const union datp_message *msg, size_t len)
{
        if (conn->wait_id == 0 || msg->hdr.request_id != conn->wait_id || conn->wait_done ||
            len > sizeof(*conn->wait_reply))
                return false;
        memcpy(conn->wait_reply, msg, len);
        /* Release: a caller spinning on it reads the reply after. */
        __atomic_store_n(&conn->wait_done, true, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&conn->wait_cond);
        return true;
}

/* Reads the packet at the head of the socket into pkt, with its
 * descriptors; pkt->len: -EAGAIN, -EINTR, 0 for the end, -errno. */
static void recv_packet(struct datd_conn *conn, struct datd_packet *pkt)
{
        pkt->nfds = 0;
        pkt->len = datp_recv(conn->fd, &pkt->msg, pkt->fds, DATP_MAX_FDS, &pkt->nfds);
}

static int validate_packet(const struct datd_conn *conn, const struct datd_packet *pkt,
                           const char **reason)
{
        return datp_validate(&pkt->msg, (size_t)pkt->len,
                             pkt->nfds > DATP_MAX_FDS ? DATP_MAX_FDS : pkt->nfds, DATP_TO_CLIENT,
                             conn->version, reason);
}

/* Whether a validated packet answers request_id (0: none). */
static bool answers(const union datp_message *m, uint32_t request_id)
{
        return request_id != 0 && m->hdr.request_id == request_id &&
               (m->hdr.type & DATP_REPLY || m->hdr.type == DATP_ERROR);
}

/* Reads the packet at the head of the socket for a round trip inside a
 * dispatch (read_past), under read_lock: the reply to own_id (not 0) into
 * reply, setting *own; anything else into the backlog, which that dispatch
 * takes before anything still on the socket and before it lets the socket
 * go.  None of them may be dispatched here: packets that the dispatch read
 * before them may not be yet (the rest of its batch).  Nor may the reply
 * another caller waits for be delivered here: that caller would return
 * before events datd sent ahead of it were dispatched.  DAT_SUCCESS, or
 * DAT_INTERNAL_ERROR with why: the end of the connection (a later read
 * finds it again: the dispatch's), garbage (kept for the dispatch, which
 * ends the connection), no room to keep a packet (it stays unread). */
static DAT_RETURN read_one_past(struct datd_conn *conn, uint32_t own_id,
                                union datp_message *reply, bool *own, char why[DATD_REASON_MAX])
{
        const char *reason = NULL;
        struct datd_packet *pkt;
        int r = datd_backlog_make_room(&conn->backlog);

        if (r < 0 || !(pkt = malloc(sizeof(*pkt)))) {
                snprintf(why, DATD_REASON_MAX, "no room for datd's packets ahead of the reply (%d)",
                         DATD_BACKLOG_MAX);
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
        recv_packet(conn, pkt);
        if (pkt->len == -EAGAIN || pkt->len == -EINTR) {
                datd_packet_free(pkt);
                return DAT_SUCCESS;
        }
        if (pkt->len <= 0) {
                snprintf(why, DATD_REASON_MAX, "datd closed the connection%s%s",
                         pkt->len < 0 ? ": " : "", pkt->len < 0 ? strerror((int)-pkt->len) : "");
                datd_packet_free(pkt);
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
        r = validate_packet(conn, pkt, &reason);
        if (r < 0) {
                snprintf(why, DATD_REASON_MAX, "malformed message from datd: %s",
                         reason ? reason : datp_decode_error_str(r));
                datd_backlog_push(&conn->backlog, pkt);
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
        if (!answers(&pkt->msg, own_id)) {
                datd_backlog_push(&conn->backlog, pkt);
                return DAT_SUCCESS;
        }
        memcpy(reply, &pkt->msg, (size_t)pkt->len);
        *own = true;
        datd_packet_free(pkt);
        return DAT_SUCCESS;
}

/* The CNO agents that a round trip's dispatch in place (read_one_in_place)
 * triggered: they run on this thread once the round trip is over and
 * conn->lock free (call), as those of the progress thread's dispatch run
 * once it let the socket go (cno.h).  notices is this thread's hold once
 * holding. */
struct in_place {
        struct cno_held notices;
        bool holding;
};

/* Dispatches pkt as the progress thread would, and after it what a round
 * trip inside that dispatch (an agent run at once past CNO_HELD_MAX) read
 * past into the backlog; under read_lock.  False when the connection is
 * over. */
static bool dispatch_in_place(struct datd_conn *conn, struct datd_packet *pkt,
                              struct in_place *ip)
{
        struct datd_packet *past;
        bool ok;

        if (!ip->holding) {
                cno_notices_hold(&ip->notices);
                ip->holding = true;
        }
        __atomic_store_n(&conn->dispatcher_tag, self_tag(), __ATOMIC_RELAXED);
        ok = conn->dispatch_fn(conn->dispatch_ctx, pkt);
        while (ok && (past = datd_backlog_pop(&conn->backlog))) {
                ok = conn->dispatch_fn(conn->dispatch_ctx, past);
                free(past);
        }
        __atomic_store_n(&conn->dispatcher_tag, 0, __ATOMIC_RELAXED);
        return ok;
}

/* Reads the packet at the head of the socket for a round trip outside a
 * dispatch (read_past: a CNO's agent on the progress thread), under
 * read_lock: the reply to own_id (not 0) into reply, setting *own; anything
 * else it dispatches at once, in place (dispatch_in_place).  Every packet
 * datd sent before it is dispatched by then: nothing is left for later, so
 * the socket is everyone's again once this round trip lets it go (an
 * agent's dat_evd_wait takes it over, another caller reads its reply), and
 * another caller's reply is delivered after the events datd sent ahead of
 * it.  DAT_SUCCESS, or DAT_INTERNAL_ERROR with why once the connection is
 * over: the shutdown lets the progress thread find its end. */
static DAT_RETURN read_one_in_place(struct datd_conn *conn, uint32_t own_id,
                                    union datp_message *reply, bool *own, struct in_place *ip,
                                    char why[DATD_REASON_MAX])
{
        const char *reason = NULL;
        struct datd_packet pkt;

        recv_packet(conn, &pkt);
        if (pkt.len == -EAGAIN || pkt.len == -EINTR)
                return DAT_SUCCESS;
        if (pkt.len > 0 && validate_packet(conn, &pkt, &reason) >= 0 && answers(&pkt.msg, own_id)) {
                memcpy(reply, &pkt.msg, (size_t)pkt.len);
                datd_packet_close_fds(&pkt);
                *own = true;
                return DAT_SUCCESS;
        }
        if (dispatch_in_place(conn, &pkt, ip))
                return DAT_SUCCESS;
        (void)shutdown(conn->fd, SHUT_RDWR);
        snprintf(why, DATD_REASON_MAX, "datd closed the connection");
        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
}

void (*datd_conn_test_before_take)(struct datd_conn *conn);

/* How long read_past, waiting for conn->lock, reads the socket before it
 * looks at the lock again (its holder lets it go without a word). */
#define READ_PAST_SLICE_NS 1000000LL

/* Whether read_past is done: it read its reply, or a waiter that took the
 * socket over delivered it (a registered wait: outside a dispatch); with
 * own_id 0, it took conn->lock. */
static bool past_done(struct datd_conn *conn, uint32_t own_id, bool own, bool in_dispatch)
{
        if (own_id)
                return own || (!in_dispatch && __atomic_load_n(&conn->wait_done, __ATOMIC_ACQUIRE));
        return pthread_mutex_trylock(&conn->lock) == 0;
}

/* For the thread that dispatches what datd sends (datd_conn_reads_here),
 * which nobody else would hand a reply to, nor conn->lock: it would have
 * waited for itself, 10 s, with the IA's events held up (a CNO's agent
 * running on the progress thread whose round trip found an event ahead
 * of its reply, or that found conn->lock held by a caller that had handed
 * the socket over to it).  Until the reply to own_id came (own_id 0:
 * until it holds conn->lock) it reads the socket itself while it can (it
 * holds read_lock: held, or as the dispatcher; or it takes it), past other
 * packets: inside a dispatch into the backlog (read_one_past), outside
 * one dispatching them in place (read_one_in_place, ip); while another
 * thread reads (a waiter that took the socket over, which delivers the
 * reply; a caller reading its own) it naps.  The fast path never comes
 * here: a reply at the head is read by read_own_reply.  DAT_SUCCESS, or
 * DAT_INTERNAL_ERROR with why. */
static DAT_RETURN read_past(struct datd_conn *conn, uint32_t own_id, union datp_message *reply,
                            bool held, struct in_place *ip, char why[DATD_REASON_MAX])
{
        long long deadline = reply_deadline();
        bool in_dispatch = dispatches_here(conn), own = false;

        held = held || in_dispatch;
        for (;;) {
                const struct timespec nap = { .tv_nsec = 100 * 1000 };
                long long now = now_ns(), until = own_id ? deadline : now + READ_PAST_SLICE_NS;
                DAT_RETURN ret = DAT_SUCCESS;

                if (past_done(conn, own_id, own, in_dispatch))
                        return DAT_SUCCESS;
                if (__atomic_load_n(&conn->dead, __ATOMIC_ACQUIRE)) {
                        snprintf(why, DATD_REASON_MAX, "datd closed the connection");
                        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
                }
                if (now >= deadline)
                        return no_reply(why);
                if (!held) {
                        if (datd_conn_test_before_take)
                                datd_conn_test_before_take(conn);
                        if (pthread_mutex_trylock(&conn->read_lock) != 0) {
                                nanosleep(&nap, NULL);
                                continue;
                        }
                        /* The thread that read (a waiter that took the
                         * socket over) may have delivered the reply and
                         * let go since we looked: nothing more would come
                         * for us, and wait_packet would wait until the
                         * deadline with read_lock held. */
                        if (past_done(conn, own_id, own, in_dispatch)) {
                                pthread_mutex_unlock(&conn->read_lock);
                                return DAT_SUCCESS;
                        }
                }
                if (wait_packet(conn, 0, until < deadline ? until : deadline))
                        ret = in_dispatch ? read_one_past(conn, own_id, reply, &own, why)
                                          : read_one_in_place(conn, own_id, reply, &own, ip, why);
                if (!held)
                        pthread_mutex_unlock(&conn->read_lock);
                if (ret != DAT_SUCCESS)
                        return ret;
        }
}

/* read_past for the reply to request_id, registered; then the wait is
 * forgotten. */
static DAT_RETURN reader_reply(struct datd_conn *conn, uint16_t want, uint32_t request_id,
                               union datp_message *reply, bool held, struct in_place *ip,
                               char why[DATD_REASON_MAX])
{
        DAT_RETURN ret = read_past(conn, request_id, reply, held, ip, why);

        if (ret == DAT_SUCCESS)
                ret = check_reply(want, reply, why);
        pthread_mutex_lock(&conn->wait_lock);
        forget_wait_locked(conn);
        pthread_mutex_unlock(&conn->wait_lock);
        return ret;
}

/* The caller's half of a round trip once the progress thread runs, with
 * the wait for request_id registered: its own reading while it can, the
 * progress thread's delivery after. */
static DAT_RETURN threaded_reply(struct datd_conn *conn, uint16_t want, uint32_t request_id,
                                 union datp_message *reply, bool reading, struct in_place *ip,
                                 char why[DATD_REASON_MAX])
{
        DAT_RETURN ret;

        if (reading) {
                enum own_read r = read_own_reply(conn, want, request_id, reply, why, &ret);

                if (r == OWN_HAND_OVER && datd_conn_reads_here(conn)) {
                        ret = reader_reply(conn, want, request_id, reply, true, ip, why);
                        stop_reading(conn);
                        return ret;
                }
                stop_reading(conn);
                if (r == OWN_DONE) {
                        pthread_mutex_lock(&conn->wait_lock);
                        forget_wait_locked(conn);
                        pthread_mutex_unlock(&conn->wait_lock);
                        return ret;
                }
        } else if (datd_conn_reads_here(conn)) {
                return reader_reply(conn, want, request_id, reply, false, ip, why);
        }
        return await_reply(conn, want, reply, why);
}

static DAT_RETURN send_failed(uint16_t type, int r, char why[DATD_REASON_MAX])
{
        snprintf(why, DATD_REASON_MAX, "sending %s to datd: %s", datp_type_name(type),
                 strerror(-r));
        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
}

/* A round trip inside a dispatch of datd's packets (an agent run at once
 * past CNO_HELD_MAX, cno.h) while another caller holds conn->lock: that
 * caller may wait for a reply this one reads past into the backlog, which
 * its dispatch takes only after it, so it must not wait for the lock.  It
 * needs none: it holds read_lock, reads its reply itself and registers no
 * wait (what conn->lock keeps to one caller at a time). */
static DAT_RETURN dispatcher_call(struct datd_conn *conn, struct datp_header *request,
                                  union datp_message *reply, char why[DATD_REASON_MAX])
{
        uint16_t type = request->type;
        uint32_t id = next_request_id(conn);
        DAT_RETURN ret;
        int r;

        if (__atomic_load_n(&conn->dead, __ATOMIC_ACQUIRE)) {
                snprintf(why, DATD_REASON_MAX, "datd closed the connection");
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
        r = send_request(conn, request, id);
        if (r < 0)
                return send_failed(type, r, why);
        ret = read_past(conn, id, reply, true, NULL, why);
        return ret == DAT_SUCCESS ? check_reply(type | DATP_REPLY, reply, why) : ret;
}

static DAT_RETURN call_holding(struct datd_conn *conn, struct datp_header *request,
                               union datp_message *reply, struct in_place *ip,
                               char why[DATD_REASON_MAX])
{
        uint16_t type = request->type;
        bool threaded, dead, reading = false;
        uint32_t id;
        DAT_RETURN ret;
        int r;

        if (pthread_mutex_trylock(&conn->lock) != 0) {
                /* Its holder may wait for the dispatching reader to hand
                 * it its reply: that reader reads on while it waits, or
                 * needs no lock inside its dispatch. */
                if (!datd_conn_reads_here(conn))
                        pthread_mutex_lock(&conn->lock);
                else if (dispatches_here(conn))
                        return dispatcher_call(conn, request, reply, why);
                else if ((ret = read_past(conn, 0, NULL, false, ip, why)) != DAT_SUCCESS)
                        return ret;
        }
        id = next_request_id(conn);
        pthread_mutex_lock(&conn->wait_lock);
        threaded = conn->threaded;
        dead = conn->dead;
        if (threaded && !dead) {
                conn->wait_id = id;
                conn->wait_reply = reply;
                conn->wait_done = false;
        }
        pthread_mutex_unlock(&conn->wait_lock);
        if (dead) {
                snprintf(why, DATD_REASON_MAX, "datd closed the connection");
                pthread_mutex_unlock(&conn->lock);
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
        /* Before the send: the reply must not wake the progress thread. */
        if (threaded)
                reading = start_reading(conn);
        r = send_request(conn, request, id);
        if (r < 0) {
                ret = send_failed(type, r, why);
                if (reading)
                        stop_reading(conn);
                if (threaded) {
                        pthread_mutex_lock(&conn->wait_lock);
                        forget_wait_locked(conn);
                        pthread_mutex_unlock(&conn->wait_lock);
                }
        } else if (threaded) {
                ret = threaded_reply(conn, type | DATP_REPLY, id, reply, reading, ip, why);
        } else {
                ret = receive_reply(conn, type | DATP_REPLY, id, reply, why);
        }
        pthread_mutex_unlock(&conn->lock);
        return ret;
}

static DAT_RETURN call(struct datd_conn *conn, struct datp_header *request,
                       union datp_message *reply, char why[DATD_REASON_MAX])
{
        struct in_place ip;
        DAT_RETURN ret;

        ip.holding = false;
        ret = call_holding(conn, request, reply, &ip, why);
        /* The agents what it dispatched in place triggered, with
         * conn->lock free: they may make round trips of their own. */
        if (ip.holding)
                cno_notices_release(&ip.notices);
        return ret;
}

/* A round trip is no cancellation point: a thread cancelled in its poll,
 * recvmsg, sendmsg or condition wait left conn->lock held (and read_lock
 * with the progress thread's watch off, or wait_lock, or a registered
 * wait_reply on its dead stack), and every later call of the IA, its
 * close among them, waited for good.  A caller cancelled meanwhile is
 * cancelled at its next cancellation point after this returns. */
DAT_RETURN datd_conn_call(struct datd_conn *conn, struct datp_header *request,
                          union datp_message *reply, char why[DATD_REASON_MAX])
{
        DAT_RETURN ret;
        int cancel;

        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
        ret = call(conn, request, reply, why);
        pthread_setcancelstate(cancel, NULL);
        return ret;
}

DAT_RETURN datd_conn_send(struct datd_conn *conn, struct datp_header *request)
{
        if (__atomic_load_n(&conn->dead, __ATOMIC_ACQUIRE))
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        /* One SOCK_SEQPACKET packet per message: sends from several threads
         * never interleave.  request_id 0: datd sends no reply, which
         * would only wake the progress thread to be dropped. */
        if (send_request(conn, request, 0) < 0)
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        return DAT_SUCCESS;
}

/* Files fn for request_id; false without memory.  Under wait_lock. */
static bool later_add_locked(struct datd_conn *conn, const struct datd_later *l)
{
        if (conn->n_later == conn->later_cap) {
                size_t cap = conn->later_cap ? conn->later_cap * 2 : 8;
                struct datd_later *more = reallocarray(conn->later, cap, sizeof(*more));

                if (!more)
                        return false;
                conn->later = more;
                conn->later_cap = cap;
        }
        conn->later[conn->n_later++] = *l;
        return true;
}

/* Takes request_id's entry out into *out; false when there is none.  The
 * entries are few (the replies still due), and the oldest is nearly
 * always the one. Under wait_lock. */
static bool later_take_locked(struct datd_conn *conn, uint32_t request_id, struct datd_later *out)
{
        for (size_t i = 0; i < conn->n_later; i++) {
                if (conn->later[i].request_id != request_id)
                        continue;
                *out = conn->later[i];
                memmove(&conn->later[i], &conn->later[i + 1],
                        (conn->n_later - i - 1) * sizeof(conn->later[0]));
                conn->n_later--;
                return true;
        }
        return false;
}

/* Set on the progress threads (datd_conn_reader_thread). */
static __thread bool reader_thread;

void datd_conn_reader_thread(void)
{
        reader_thread = true;
}

bool datd_conn_take_over(struct datd_conn *conn, int *kick_fd, bool *was_reader)
{
        if (datd_conn_reader_evicted(conn) || !start_reading(conn))
                return false;
        if (conn->reader_kick_fd < 0) {
                int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

                if (fd < 0) {
                        stop_reading(conn);
                        return false;
                }
                __atomic_store_n(&conn->reader_kick_fd, fd, __ATOMIC_RELEASE);
        }
        *kick_fd = conn->reader_kick_fd;
        /* Against datd_conn_evict_reader's fence: the eviction stores
         * reader_evicted, then loads reader_kick_fd; this thread stored
         * the fd (or found it, under read_lock), then loads
         * reader_evicted in its loop.  With release and acquire alone
         * both loads may see the old values (a store-buffering race):
         * the evictor sends no kick and the reader, not evicted, sleeps
         * in ppoll for good, and the close with it.  With a seq_cst
         * fence between the store and the load on both sides, at least
         * one sees the other's store. */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        /* It delivers replies now: a datd_conn_send_later inside what it
         * dispatches must not wait for one (a CNO's agent runs only after
         * the give-back, cno.h).  The caller
         * keeps what it was (a take-over may nest, on another IA). */
        *was_reader = reader_thread;
        reader_thread = true;
        __atomic_store_n(&conn->dispatcher_tag, self_tag(), __ATOMIC_RELAXED);
        return true;
}

void datd_conn_give_back(struct datd_conn *conn, bool was_reader)
{
        reader_thread = was_reader;
        __atomic_store_n(&conn->dispatcher_tag, 0, __ATOMIC_RELAXED);
        stop_reading(conn);
}

bool datd_conn_reader_evicted(const struct datd_conn *conn)
{
        return __atomic_load_n(&conn->reader_evicted, __ATOMIC_ACQUIRE);
}

void datd_conn_evict_reader(struct datd_conn *conn)
{
        __atomic_store_n(&conn->reader_evicted, true, __ATOMIC_RELEASE);
        /* See datd_conn_take_over: the kick's load of reader_kick_fd must
         * not pass this store. */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        datd_conn_kick_reader(conn);
}

void datd_conn_kick_reader(struct datd_conn *conn)
{
        int fd = __atomic_load_n(&conn->reader_kick_fd, __ATOMIC_ACQUIRE);

        if (fd >= 0)
                (void)eventfd_write(fd, 1);
}

/* Until fewer than DATD_LATER_MAX replies are due, datd went away, or a
 * round trip's time passed; under wait_lock (datd_conn_deliver wakes). */
static void await_later_room_locked(struct datd_conn *conn)
{
        struct timespec deadline;
        long long end = reply_deadline();

        if (reader_thread)
                return;
        deadline.tv_sec = (time_t)(end / 1000000000LL);
        deadline.tv_nsec = (long)(end % 1000000000LL);
        while (conn->n_later >= DATD_LATER_MAX && !conn->dead && conn->threaded)
                if (pthread_cond_timedwait(&conn->wait_cond, &conn->wait_lock, &deadline) ==
                    ETIMEDOUT)
                        break;
}

static DAT_RETURN send_later(struct datd_conn *conn, struct datp_header *request,
                             datd_later_fn *fn, void *ctx)
{
        struct datd_later l = { .want = request->type | DATP_REPLY, .fn = fn, .ctx = ctx };
        struct datd_later gone;
        bool threaded, filed = false;

        pthread_mutex_lock(&conn->wait_lock);
        await_later_room_locked(conn);
        threaded = conn->threaded && !conn->dead;
        if (threaded) {
                l.request_id = next_request_id(conn);
                filed = later_add_locked(conn, &l);
        }
        pthread_mutex_unlock(&conn->wait_lock);
        if (!threaded) {
                union datp_message reply;
                char why[DATD_REASON_MAX];
                DAT_RETURN ret = datd_conn_call(conn, request, &reply, why);

                if (ret != DAT_SUCCESS) {
                        dat_trace("%s: %s", datp_type_name(request->type), why);
                        return ret;
                }
                fn(ctx, DAT_SUCCESS, &reply);
                return DAT_SUCCESS;
        }
        if (!filed)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        /* Filed before the send: the reply cannot come first. */
        if (send_request(conn, request, l.request_id) >= 0)
                return DAT_SUCCESS;
        pthread_mutex_lock(&conn->wait_lock);
        filed = later_take_locked(conn, l.request_id, &gone);
        pthread_mutex_unlock(&conn->wait_lock);
        /* Taken by a hang-up meanwhile: its function was called. */
        return filed ? DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE) : DAT_SUCCESS;
}

/* No cancellation point either (datd_conn_call): a thread cancelled in
 * the wait for room held wait_lock, one cancelled in the send left an
 * entry filed whose reply nobody expects. */
DAT_RETURN datd_conn_send_later(struct datd_conn *conn, struct datp_header *request,
                                datd_later_fn *fn, void *ctx)
{
        DAT_RETURN ret;
        int cancel;

        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
        ret = send_later(conn, request, fn, ctx);
        pthread_setcancelstate(cancel, NULL);
        return ret;
}

void datd_conn_set_threaded(struct datd_conn *conn, bool threaded)
{
        pthread_mutex_lock(&conn->wait_lock);
        conn->threaded = threaded;
        pthread_mutex_unlock(&conn->wait_lock);
}

void datd_conn_set_watch(struct datd_conn *conn, int epfd, uint64_t key)
{
        pthread_mutex_lock(&conn->read_lock);
        pthread_mutex_lock(&conn->watch_lock);
        conn->watch_epfd = epfd;
        conn->watch_key = key;
        pthread_mutex_unlock(&conn->watch_lock);
        pthread_mutex_unlock(&conn->read_lock);
}

bool datd_conn_begin_read(struct datd_conn *conn)
{
        if (pthread_mutex_trylock(&conn->read_lock) != 0)
                return false;
        __atomic_store_n(&conn->dispatcher_tag, self_tag(), __ATOMIC_RELAXED);
        return true;
}

void datd_conn_end_read(struct datd_conn *conn)
{
        __atomic_store_n(&conn->dispatcher_tag, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&conn->read_lock);
}

bool datd_conn_deliver(struct datd_conn *conn, const union datp_message *msg, size_t len)
{
        struct datd_later l;
        bool taken = false, later = false;

        pthread_mutex_lock(&conn->wait_lock);
        if (deliver_wait_locked(conn, msg, len)) {
                taken = true;
        } else if (msg->hdr.request_id != 0) {
                later = later_take_locked(conn, msg->hdr.request_id, &l);
                /* Room for a sender held back by DATD_LATER_MAX. */
                if (later)
                        pthread_cond_broadcast(&conn->wait_cond);
        }
        pthread_mutex_unlock(&conn->wait_lock);
        if (later) {
                char why[DATD_REASON_MAX];
                DAT_RETURN ret = check_reply(l.want, msg, why);

                if (ret != DAT_SUCCESS)
                        dat_trace("%s", why);
                l.fn(l.ctx, ret, ret == DAT_SUCCESS ? msg : NULL);
                taken = true;
        }
        return taken;
}

void datd_conn_hangup(struct datd_conn *conn)
{
        struct datd_later *due;
        size_t n;

        pthread_mutex_lock(&conn->wait_lock);
        __atomic_store_n(&conn->dead, true, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&conn->wait_cond);
        due = conn->later;
        n = conn->n_later;
        conn->later = NULL;
        conn->n_later = conn->later_cap = 0;
        pthread_mutex_unlock(&conn->wait_lock);
        for (size_t i = 0; i < n; i++)
                due[i].fn(due[i].ctx, DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE), NULL);
        free(due);
}

static DAT_RETURN say_hello(struct datd_conn *conn, char why[DATD_REASON_MAX])
{
        struct datp_hello hello = {
                .hdr = { .type = DATP_HELLO, .length = sizeof(hello) },
                .min_version = DATP_VERSION_MIN,
                .max_version = DATP_VERSION_MAX,
        };
        union datp_message reply;
        DAT_RETURN ret;

        ret = datd_conn_call(conn, &hello.hdr, &reply, why);
        if (ret != DAT_SUCCESS)
                return ret;
        if (reply.hello_reply.status.dat_status != DAT_SUCCESS) {
                snprintf(why, DATD_REASON_MAX, "datd refused HELLO (status 0x%x, %s)",
                         reply.hello_reply.status.dat_status,
                         strerror(reply.hello_reply.status.sys_errno));
                return dat_err_normalize(reply.hello_reply.status.dat_status);
        }
        conn->version = reply.hello_reply.version;
        snprintf(conn->daemon_version, sizeof(conn->daemon_version), "%s",
                 reply.hello_reply.daemon_version);
        return DAT_SUCCESS;
}

/* Failing to reach datd is DAT_PROVIDER_NOT_FOUND with no subtype: the IA
 * name is registered, but its provider is not there (see ia.c). */
DAT_RETURN datd_conn_open(struct datd_conn *conn, char why[DATD_REASON_MAX])
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = datd_socket_path();
        pthread_condattr_t ca;
        DAT_RETURN ret;

        memset(conn, 0, sizeof(*conn));
        conn->fd = -1;
        pthread_mutex_init(&conn->lock, NULL);
        pthread_mutex_init(&conn->wait_lock, NULL);
        pthread_mutex_init(&conn->read_lock, NULL);
        pthread_mutex_init(&conn->watch_lock, NULL);
        conn->watch_epfd = -1;
        conn->reader_kick_fd = -1;
        conn->spin_score = SPIN_SCORE_MAX;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&conn->wait_cond, &ca);
        pthread_condattr_destroy(&ca);
        conn->initialized = true;
        if (strlen(path) >= sizeof(sa.sun_path) || strlen(path) >= sizeof(conn->socket_path)) {
                snprintf(why, DATD_REASON_MAX, "datd socket path too long: %s", path);
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE);
        }
        strcpy(sa.sun_path, path);
        strcpy(conn->socket_path, path);
        conn->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (conn->fd < 0) {
                snprintf(why, DATD_REASON_MAX, "socket(AF_UNIX, SOCK_SEQPACKET): %s", strerror(errno));
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        if (connect(conn->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                snprintf(why, DATD_REASON_MAX, "cannot connect to datd at %s (%s): %s", path,
                         getenv("DATD_SOCKET") && *getenv("DATD_SOCKET") ? "DATD_SOCKET" : "default",
                         strerror(errno));
                datd_conn_close(conn);
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE);
        }
        ret = say_hello(conn, why);
        if (ret != DAT_SUCCESS) {
                datd_conn_close(conn);
                /* A datd we cannot talk to is as absent as no datd at all. */
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE);
        }
        return DAT_SUCCESS;
}

void datd_conn_close(struct datd_conn *conn)
{
        if (!conn->initialized)
                return;
        if (conn->fd >= 0)
                close(conn->fd);
        conn->fd = -1;
        if (conn->reader_kick_fd >= 0)
                close(conn->reader_kick_fd);
        conn->reader_kick_fd = -1;
        /* What the dispatch never took: the connection ended first. */
        datd_backlog_clear(&conn->backlog);
        /* Due replies of objects gone with the IA. */
        free(conn->later);
        conn->later = NULL;
        conn->n_later = conn->later_cap = 0;
        pthread_mutex_destroy(&conn->lock);
        pthread_mutex_destroy(&conn->wait_lock);
        pthread_mutex_destroy(&conn->read_lock);
        pthread_mutex_destroy(&conn->watch_lock);
        pthread_cond_destroy(&conn->wait_cond);
        conn->initialized = false;
}
