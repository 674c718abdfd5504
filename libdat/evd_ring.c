/* The event ring of an EVD (see evd.h) and the data-path entry points:
 * dat_evd_post_se, dat_evd_dequeue, dat_evd_wait, and evd_post for the
 * transports.
 *
 * The ring is an array of qlen DAT_EVENTs, head the oldest, count queued,
 * guarded by the EVD's spinlock: a producer holds it for one event copy,
 * so producers on several threads only ever spin for a few hundred
 * nanoseconds and never enter the kernel.  A consumer waiting for events
 * registers as the EVD's waiter, polls the futex word briefly, then sleeps
 * on it; a producer bumps the word when the waiter's threshold is met and
 * makes the wake-up system call only if the waiter really sleeps.
 *
 * Error codes where the man pages leave room (all with DAT_CLASS_ERROR):
 * - dat_evd_post_se on an EVD created without DAT_EVD_SOFTWARE_FLAG ->
 *   DAT_INVALID_PARAMETER | DAT_INVALID_ARG1 (the EVD takes no software
 *   event stream); an event that is not DAT_SOFTWARE_EVENT ->
 *   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2.
 * - dat_evd_dequeue, dat_evd_wait while another thread waits:
 *   DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_WAITER; dat_evd_wait on an
 *   unwaitable EVD: DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_UNWAITABLE; a
 *   threshold above 1 while endpoints feeding it let the consumer control
 *   notification: DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_CONFIG_NOTIFY or
 *   _CONFIG_SOLICITED.
 * - dat_evd_wait's nmore may be NULL (the snapshot is then not returned);
 *   a NULL event is DAT_INVALID_PARAMETER | DAT_INVALID_ARG4. */
#include "config.h"

#include "libdat/evd.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include "libdat/cno.h"
#include "libdat/datd_conn.h"
#include "libdat/dto.h"
#include "libdat/evd_wait.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"
#include "libdat/progress.h"

struct evd *evd_alloc(DAT_COUNT qlen, DAT_EVD_FLAGS flags)
{
        struct evd *evd = calloc(1, sizeof(*evd));

        if (!evd)
                return NULL;
        evd->ring = calloc((size_t)qlen, sizeof(*evd->ring));
        if (!evd->ring) {
                free(evd);
                return NULL;
        }
        spin_lock_init(&evd->lock);
        evd->qlen = qlen;
        evd->flags = flags;
        evd->enabled = true;
        return evd;
}

void evd_release(struct evd *evd)
{
        if (!evd)
                return;
        free(evd->ring);
        free(evd);
}

/* Takes the oldest event.  Under evd->lock, count > 0. */
static void ring_pop_locked(struct evd *evd, DAT_EVENT *out)
{
        *out = evd->ring[evd->head];
        evd->head = evd->head + 1 == (uint32_t)evd->qlen ? 0 : evd->head + 1;
        evd->count--;
        /* Room again: the next loss is a new overflow worth reporting. */
        evd->overflowed = false;
}

DAT_RETURN evd_ring_resize(struct evd *evd, DAT_COUNT qlen)
{
        DAT_EVENT *ring = calloc((size_t)qlen, sizeof(*ring)), *old;
        DAT_RETURN ret = DAT_SUCCESS;

        if (!ring)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        spin_lock(&evd->lock);
        if (evd->count > (uint32_t)qlen)
                /* dat_evd_resize(3DAT): more events queued than the new length */
                ret = DAT_ERR(DAT_INVALID_STATE, DAT_NO_SUBTYPE);
        else if (evd->waiter && evd->wait_threshold > (uint32_t)qlen)
                ret = DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
        if (ret != DAT_SUCCESS) {
                spin_unlock(&evd->lock);
                free(ring);
                return ret;
        }
        for (uint32_t i = 0, slot = evd->head; i < evd->count; i++) {
                ring[i] = evd->ring[slot];
                slot = slot + 1 == (uint32_t)evd->qlen ? 0 : slot + 1;
        }
        old = evd->ring;
        evd->ring = ring;
        evd->head = 0;
        evd->qlen = qlen;
        spin_unlock(&evd->lock);
        free(old);
        return DAT_SUCCESS;
}

/* Queues one event; see evd_post.  With refuse_when_full (dat_evd_post_se)
 * a full ring is no overflow; otherwise *overflow_news tells whether this
 * loss starts an overflow that must be reported. */
static DAT_RETURN ring_push(struct evd *evd, const DAT_EVENT *event, bool notify,
                            bool refuse_when_full, bool *overflow_news, struct cno_notice *notice)
{
        DAT_EVENT *slot;
        uint32_t tail;
        unsigned wake = 0;

        spin_lock(&evd->lock);
        if (_unlikely_(evd->dying)) {
                spin_unlock(&evd->lock);
                return DAT_ERR(DAT_ABORT, DAT_NO_SUBTYPE);
        }
        if (_unlikely_(evd->count == (uint32_t)evd->qlen)) {
                if (!refuse_when_full) {
                        *overflow_news = !evd->overflowed;
                        evd->overflowed = true;
                }
                spin_unlock(&evd->lock);
                return DAT_ERR(DAT_QUEUE_FULL, DAT_NO_SUBTYPE);
        }
        tail = evd->head + evd->count;
        if (tail >= (uint32_t)evd->qlen)
                tail -= (uint32_t)evd->qlen;
        slot = &evd->ring[tail];
        *slot = *event;
        slot->evd_handle = evd->obj.handle;
        evd->count++;
        if (notify) {
                evd->notified++;
                /* dat_evd_wait(3DAT): a waiter owns the EVD; its CNO is not
                 * triggered.  dat_evd_enable(3DAT): only an enabled EVD
                 * triggers its CNO. */
                if (evd->waiter) {
                        if (evd->count >= evd->wait_threshold)
                                wake = evd_kick_waiter_locked(evd);
                } else if (evd->enabled && evd->cno) {
                        cno_trigger(evd->cno, evd->obj.handle, notice);
                }
        }
        spin_unlock(&evd->lock);
        if (wake)
                evd_wake(evd, wake);
        return DAT_SUCCESS;
}

/* The async EVD of the IA an EVD belongs to, or NULL (none, or
 * DAT_EVD_ASYNC_EXISTS).  Under dat_object_lock(), which keeps it alive. */
static struct evd *ia_async_evd_locked(const struct evd *evd)
{
        const struct ia *ia = dat_container_of(evd->obj.parent, struct ia, obj);

        if (ia->own_async_evd)
                return ia->own_async_evd;
        return ia->borrowed_async_evd ? evd_lookup(ia->borrowed_async_evd) : NULL;
}

/* Delivers DAT_ASYNC_ERROR_EVD_OVERFLOW about evd to its IA's async EVD.
 * An async EVD's own overflow cannot be reported (there is nowhere to):
 * the push into itself, still full, only leaves it marked. */
static void report_overflow(struct evd *evd)
{
        DAT_EVENT event = {
                .event_number = DAT_ASYNC_ERROR_EVD_OVERFLOW,
                .event_data.asynch_error_event_data = {
                        .dat_handle = evd->obj.handle,
                        .reason = DAT_EVD_OVERFLOW_ERROR,
                },
        };
        struct cno_notice notice = { .evd = DAT_HANDLE_NULL };
        struct evd *async;
        bool async_overflow;

        dat_object_lock();
        async = ia_async_evd_locked(evd);
        if (async)
                ring_push(async, &event, true, false, &async_overflow, &notice);
        dat_object_unlock();
        cno_notice_run(&notice);
}

DAT_RETURN evd_post(struct evd *evd, const DAT_EVENT *event, bool notify)
{
        struct cno_notice notice = { .evd = DAT_HANDLE_NULL };
        bool overflow_news = false;
        DAT_RETURN ret;

        ret = ring_push(evd, event, notify, false, &overflow_news, &notice);
        cno_notice_run(&notice);
        if (_unlikely_(overflow_news))
                report_overflow(evd);
        return ret;
}

/* The event a dat_evd_dequeue that found its EVD empty waits for, handed
 * to it straight from the data path its poll moves (dto_evd_poll), rather
 * than queued and taken back: a ping-pong's every message saves the
 * ring's push and pop and two takings of the EVD's lock, on the way from
 * its arrival to the answer.  Only the first event for that EVD in that
 * poll, only while nothing is queued there (an older event is returned
 * first: the data path's lock, held by the poll, orders every event of
 * its EP before it, and events of other EPs are as concurrent as the
 * polls that made them), nobody waits on the EVD (dat_evd_dequeue is
 * refused then) and, for a notification, it has no CNO (the event would
 * trigger it: the same dequeue then takes it from the ring).  Per thread:
 * only the poll's own thread posts here.  Never in a process that gave a
 * CNO a proxy agent (cno_agents_seen): the agent runs inside the poll, on
 * this thread, and a dequeue of its own would find the parked event
 * missing from its EVD, or take a newer one first.  initial-exec: no
 * __tls_get_addr call on every post. */
static __thread struct evd_handoff {
        const struct evd *evd;          /* the EVD being dequeued, NULL: none */
        DAT_EVENT *out;                 /* where its event goes */
        bool taken;
} handoff __attribute__((tls_model("initial-exec")));

static _always_inline_ bool handed_off(struct evd *evd, const DAT_EVENT *event, bool notify)
{
        if (_likely_(handoff.evd != evd) || handoff.taken ||
            __atomic_load_n(&evd->count, __ATOMIC_RELAXED) != 0 ||
            __atomic_load_n(&evd->waiter, __ATOMIC_RELAXED) ||
            (notify && __atomic_load_n(&evd->cno, __ATOMIC_RELAXED)))
                return false;
        *handoff.out = *event;
        handoff.out->evd_handle = evd->obj.handle;
        handoff.taken = true;
        return true;
}

DAT_RETURN evd_post_deferred(struct evd *evd, const DAT_EVENT *event, bool notify,
                             struct evd_deferred *d)
{
        struct cno_notice notice = { .evd = DAT_HANDLE_NULL };
        bool overflow_news = false;
        DAT_RETURN ret;

        if (handed_off(evd, event, notify))
                return DAT_SUCCESS;
        ret = ring_push(evd, event, notify, false, &overflow_news, &notice);
        if (notice.agent.proxy_agent_func) {
                if (d->n_notice < EVD_DEFERRED_MAX)
                        d->notice[d->n_notice++] = (struct cno_notice_slot){ notice.agent,
                                                                             notice.evd };
                else
                        cno_notice_run(&notice);
        }
        if (_unlikely_(overflow_news)) {
                if (d->n_overflowed < EVD_DEFERRED_MAX)
                        d->overflowed[d->n_overflowed++] = evd;
                else
                        report_overflow(evd);
        }
        return ret;
}

void evd_deferred_run_all(struct evd_deferred *d)
{
        for (unsigned i = 0; i < d->n_notice; i++) {
                struct cno_notice notice = { .agent = d->notice[i].agent,
                                             .evd = d->notice[i].evd };

                cno_notice_run(&notice);
        }
        for (unsigned i = 0; i < d->n_overflowed; i++)
                report_overflow(d->overflowed[i]);
        d->n_notice = d->n_overflowed = 0;
}

DAT_RETURN evd_post_event(struct evd *evd, const DAT_EVENT *event)
{
        return evd_post(evd, event, true);
}

/* dat_evd_post_se(3DAT): a full queue refuses the event (DAT_QUEUE_FULL)
 * and is no overflow: the async EVD hears nothing.  Only the event number
 * and the consumer's pointer are taken. */
_public_ DAT_RETURN dat_evd_post_se(DAT_EVD_HANDLE evd_handle, const DAT_EVENT *event)
{
        FOREIGN_DISPATCH(evd_handle, evd_post_se_func, evd_handle, event);
        struct evd *evd = evd_lookup(evd_handle);
        struct cno_notice notice = { .evd = DAT_HANDLE_NULL };
        DAT_EVENT copy = { .event_number = DAT_SOFTWARE_EVENT };
        DAT_RETURN ret;

        if (!evd)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EVD);
        if (!(evd->flags & DAT_EVD_SOFTWARE_FLAG))
                return DAT_ERR_ARG(1);
        if (!event || event->event_number != DAT_SOFTWARE_EVENT)
                return DAT_ERR_ARG(2);
        copy.event_data.software_event_data.pointer = event->event_data.software_event_data.pointer;
        ret = ring_push(evd, &copy, true, true, NULL, &notice);
        cno_notice_run(&notice);
        return ret;
}

/* Whether the IA's data paths fill the EVD: DTO and RMR bind completions.
 * Only the progress thread fills the others (connection requests and
 * events, async errors, after datd): polling the data paths for them moves
 * nothing they wait for. */
static inline bool fed_by_data_paths(const struct evd *evd)
{
        return evd->flags & (DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
}

/* dat_evd_dequeue(3DAT) on an empty EVD: DAT_QUEUE_EMPTY, bare, without
 * DAT_CLASS_ERROR: what Debian's libdat2 returns from the EVDs programs
 * poll (its providers pass the verbs CQ poll's bare code through), and
 * what DAPL's own programs compare the whole value with (dtest -p loops
 * "while (dat_evd_dequeue(...) == DAT_QUEUE_EMPTY)").  DAT_GET_TYPE()
 * reads it the same either way. */
#define DEQUEUE_EMPTY ((DAT_RETURN)DAT_QUEUE_EMPTY)

/* dat_evd_dequeue(3DAT) */
_public_ DAT_RETURN dat_evd_dequeue(DAT_EVD_HANDLE evd_handle, DAT_EVENT *event)
{
        struct evd *evd = evd_lookup(evd_handle);
        DAT_RETURN ret = DAT_SUCCESS;

        if (!evd)
                FOREIGN_ELSE_INVALID(evd_handle, dat_invalid_handle(DAT_HANDLE_TYPE_EVD),
                                     evd_dequeue_func, evd_handle, event);
        if (!event)
                return DAT_ERR_ARG(2);
        /* Nothing queued: an EVD of completions moves the IA's data
         * paths along first (what a polling consumer waits for comes from
         * here).  For any other EVD that would cost a consumer waiting for
         * a connection a read of every TCP channel of the IA each time (a
         * thousand system calls with a thousand connections), and keep the
         * progress thread from watching them (dto_evd_poll counts as the
         * application polling). */
        if (__atomic_load_n(&evd->count, __ATOMIC_RELAXED) == 0) {
                bool completions = fed_by_data_paths(evd);

                if (completions) {
                        bool agents = __atomic_load_n(&cno_agents_seen, __ATOMIC_RELAXED);

                        handoff = (struct evd_handoff){ .evd = agents ? NULL : evd, .out = event };
                        (void)dto_evd_poll(evd, true);
                        handoff.evd = NULL;
                        if (handoff.taken) {
                                dto_event_reaped(event);
                                return DAT_SUCCESS;
                        }
                }
                /* Still nothing: a polling consumer's common case costs no
                 * lock (an event queued meanwhile is taken next time). */
                if (__atomic_load_n(&evd->count, __ATOMIC_ACQUIRE) == 0 &&
                    !__atomic_load_n(&evd->waiter, __ATOMIC_RELAXED)) {
                        /* A consumer spinning on an EVD the progress thread
                         * fills would keep it off the CPU where there are
                         * fewer CPUs than spinners. */
                        if (!completions)
                                sched_yield();
                        return DEQUEUE_EMPTY;
                }
        }
        spin_lock(&evd->lock);
        if (evd->waiter)
                /* dat_evd_dequeue(3DAT): a thread blocked in dat_evd_wait owns it */
                ret = DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
        else if (evd->count == 0)
                ret = DEQUEUE_EMPTY;
        else
                ring_pop_locked(evd, event);
        spin_unlock(&evd->lock);
        if (ret == DAT_SUCCESS)
                dto_event_reaped(event);
        return ret;
}

/* Whether a dat_evd_wait for threshold events may proceed.  Under evd->lock. */
static DAT_RETURN wait_admit_locked(const struct evd *evd, DAT_COUNT threshold)
{
        /* dat_evd_wait(3DAT): threshold larger than the queue length */
        if (threshold > evd->qlen)
                return DAT_ERR_ARG(3);
        /* dat_evd_set_unwaitable(3DAT): waits fail synchronously */
        if (evd->unwaitable)
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
        /* dat_evd_wait(3DAT): one waiter at a time */
        if (evd->waiter)
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
        /* dat_evd_wait(3DAT): consumer-controlled notification needs threshold 1 */
        if (threshold > 1 && evd->solicited_feeds)
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_CONFIG_SOLICITED);
        if (threshold > 1 && evd->unsignalled_feeds)
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_CONFIG_NOTIFY);
        return DAT_SUCCESS;
}

/* How a blocked dat_evd_wait ends after waking up (sleep_result: what
 * dat_word_sleep returned), or DAT_SUCCESS with *done false to keep
 * waiting.  A timeout wins over what did not wake the waiter in time; the
 * events it waited for win over the timeout.  Under evd->lock. */
/* Whether a blocked waiter's wait is over.  With endpoints feeding the
 * EVD completions whose notification the consumer controls
 * (DAT_COMPLETION_UNSIGNALLED_FLAG, DAT_COMPLETION_SOLICITED_WAIT_FLAG), a
 * completion queued without notification does not end it: a notification
 * event must have come since it began (the threshold is 1 then).  Under
 * evd->lock. */
static bool wait_ready_locked(const struct evd *evd)
{
        if (evd->count < evd->wait_threshold || evd->unwaitable || evd->dying)
                return false;
        if (evd->unsignalled_feeds || evd->solicited_feeds)
                return evd->notified != evd->wait_notified;
        return true;
}

static DAT_RETURN wait_outcome_locked(struct evd *evd, int sleep_result, DAT_EVENT *event,
                                      bool *done)
{
        bool ready = wait_ready_locked(evd);

        *done = true;
        if (ready) {
                ring_pop_locked(evd, event);
                return DAT_SUCCESS;
        }
        if (sleep_result == ETIMEDOUT)
                return DAT_ERR(DAT_TIMEOUT_EXPIRED, DAT_NO_SUBTYPE);
        /* dat_evd_wait(3DAT): the EVD was destroyed -> DAT_ABORT */
        if (evd->dying)
                return DAT_ERR(DAT_ABORT, DAT_NO_SUBTYPE);
        /* dat_evd_set_unwaitable(3DAT): blocked threads return DAT_INVALID_STATE */
        if (evd->unwaitable)
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
        /* dat_evd_wait(3DAT): interrupted by a signal -> DAT_INTERRUPTED_CALL */
        if (sleep_result == EINTR)
                return DAT_ERR(DAT_INTERRUPTED_CALL, DAT_NO_SUBTYPE);
        *done = false;
        return DAT_SUCCESS;
}

/* Before sleeping, a waiter spins a while: on the futex word, and, while
 * the IA has data paths, moving them along itself, so that a completion
 * that is microseconds away costs no wake-up.  It spins WAIT_POLL_NS past
 * the last poll that moved something, WAIT_POLL_MAX_NS at most in all and
 * never past the caller's deadline: a stream that keeps moving (a peer
 * reading a long transfer) must not keep a dat_evd_wait with a timeout
 * from returning (it did, for seconds). */
#define WAIT_POLL_NS 50000
#define WAIT_POLL_MAX_NS 1000000

static uint64_t timespec_ns(const struct timespec *ts)
{
        return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

static void spin_polling(struct evd *evd, uint32_t seen, const struct dat_deadline *deadline)
{
        uint64_t until = 0, limit = 0;
        bool moved = false;

        if (dat_word_spin(&evd->wake_seq, seen))
                return;
        if (!fed_by_data_paths(evd))
                return;
        for (unsigned i = 0;; i++) {
                moved |= dto_evd_poll(evd, false);
                if (i > 0 && (i & 15) == 0) {
                        struct timespec ts;
                        uint64_t now;

                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        now = timespec_ns(&ts);
                        if (!limit) {
                                limit = now + WAIT_POLL_MAX_NS;
                                if (!deadline->infinite && timespec_ns(&deadline->at) < limit)
                                        limit = timespec_ns(&deadline->at);
                        }
                        /* Any poll of the last 16 that moved counts. */
                        if (moved || !until)
                                until = now + WAIT_POLL_NS;
                        moved = false;
                        if (now > until || now > limit)
                                return;
                }
                if (__atomic_load_n(&evd->wake_seq, __ATOMIC_ACQUIRE) != seen)
                        return;
                if (__atomic_load_n(&dat_container_of(evd->obj.parent, struct ia, obj)->dto.n_used,
                                    __ATOMIC_RELAXED) == 0)
                        return;
        }
}

/* Whether a waiter on evd may read datd's socket itself instead of being
 * woken by the progress thread: only datd's connection events feed it
 * (and software events, which wake it as any poster does). */
static bool fed_by_datd(const struct evd *evd)
{
        return !fed_by_data_paths(evd) && !(evd->flags & DAT_EVD_ASYNC_FLAG) &&
               (evd->flags & (DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG));
}

/* A waiter that could not take datd's socket over sleeps on the futex
 * for a while and tries again: the progress thread was reading a packet,
 * had not started watching the socket yet, or another thread reads it.
 * Each of these passes, and a waiter left on the futex for the whole wait
 * would pay the progress thread's hand-over for every event.  From 1 ms,
 * doubling to 128 ms: a thread that keeps the socket (another waiter)
 * costs this one a few wake-ups a second. */
#define TAKE_OVER_RETRY_FIRST_US 1000
#define TAKE_OVER_RETRY_MAX_US (128 * 1000)

static int sleep_before_retry(struct evd *evd, uint32_t seen, const struct dat_deadline *deadline,
                              DAT_TIMEOUT *retry_us)
{
        struct dat_deadline soon;
        bool soon_first = dat_deadline_within(&soon, *retry_us, deadline);
        int r;

        if (*retry_us < TAKE_OVER_RETRY_MAX_US)
                *retry_us *= 2;
        r = dat_word_sleep(&evd->wake_seq, seen, &soon);
        /* Only the caller's deadline times the wait out. */
        return r == ETIMEDOUT && soon_first ? 0 : r;
}

/* The signals a fault raises in the thread that faulted: never what
 * interrupts a thread asleep in ppoll, and the ones whose handlers
 * sanitizers, crash reporters and language runtimes install without
 * SA_RESTART (AddressSanitizer's SIGSEGV, SIGBUS and SIGFPE). */
static bool fault_signal(int sig)
{
        return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
               sig == SIGTRAP || sig == SIGSYS;
}

/* Whether a futex sleep for this deadline would have gone on after the
 * signal handler that just interrupted ppoll (which never restarts): with
 * no deadline the kernel restarts it after a handler installed with
 * SA_RESTART, with one never.  Which signal came is not known here; when
 * every handler installed has SA_RESTART (SIGCHLD's in a launcher, say),
 * it was one of those.  Called only after a signal: 64 sigaction calls
 * are nothing beside it. */
static bool sleep_restarts(const struct dat_deadline *deadline)
{
        if (!deadline->infinite)
                return false;
        for (int sig = 1; sig < NSIG; sig++) {
                struct sigaction sa;

                /* glibc's own signals (for threads) answer EINVAL. */
                if (sig == SIGKILL || sig == SIGSTOP || fault_signal(sig) ||
                    sigaction(sig, NULL, &sa) < 0)
                        continue;
                if (!(sa.sa_flags & SA_SIGINFO) &&
                    (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
                        continue;
                if (!(sa.sa_flags & SA_RESTART))
                        return false;
        }
        return true;
}

/* Sleeps like dat_word_sleep, but as the reader of datd's socket when it
 * can take it over (datd_conn_take_over): the events datd sends are read
 * and dispatched here, without the progress thread's wake-up and hand-over
 * (a connection costs a few of those on each side).  Any other poster to
 * the EVD kicks the reader's eventfd (evd_wake).  *retry_us paces the
 * tries when it cannot (sleep_before_retry).  Returns as dat_word_sleep
 * does. */
static int sleep_reading(struct evd *evd, uint32_t seen, const struct dat_deadline *deadline,
                         DAT_TIMEOUT *retry_us)
{
        struct ia *ia = dat_container_of(evd->obj.parent, struct ia, obj);
        int kick_fd, r = 0, cancel;
        bool over = false, was_reader;
        struct cno_held held;
        struct evd *outer;

        if (!fed_by_datd(evd))
                return dat_word_sleep(&evd->wake_seq, seen, deadline);
        /* ppoll is a cancellation point: a thread cancelled there would
         * keep the socket from the progress thread for good. */
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
        if (!datd_conn_take_over(&ia->conn, &kick_fd, &was_reader)) {
                pthread_setcancelstate(cancel, NULL);
                /* Evicted: the IA is closing, and DAT_ABORT comes. */
                if (datd_conn_reader_evicted(&ia->conn))
                        return dat_word_sleep(&evd->wake_seq, seen, deadline);
                return sleep_before_retry(evd, seen, deadline, retry_us);
        }
        spin_lock(&evd->lock);
        evd->waiter_reads = true;
        spin_unlock(&evd->lock);
        outer = evd_reading_for(evd);
        /* A CNO's agent runs once the socket is given back (cno.h): the
         * first packets that trigger one end this sleep early. */
        cno_notices_hold(&held);
        while (held.n == 0 && __atomic_load_n(&evd->wake_seq, __ATOMIC_ACQUIRE) == seen &&
               !datd_conn_reader_evicted(&ia->conn)) {
                struct pollfd fds[2] = { { .fd = ia->conn.fd, .events = POLLIN },
                                         { .fd = kick_fd, .events = POLLIN } };
                struct timespec left;
                int n;

                if (!deadline->infinite && !dat_deadline_left(deadline, &left)) {
                        r = ETIMEDOUT;
                        break;
                }
                n = ppoll(fds, 2, deadline->infinite ? NULL : &left, NULL);
                /* A signal handler ran: the wait ends as an interrupted
                 * futex sleep's would (dat_evd_wait(3DAT):
                 * DAT_INTERRUPTED_CALL), here, since a futex sleep for
                 * the rest of the wait never sees a signal already
                 * delivered.  Another failure: the rest of this sleep is
                 * the futex's. */
                if (n < 0 && errno == EINTR) {
                        if (sleep_restarts(deadline))
                                continue;
                        r = EINTR;
                        break;
                }
                if (n < 0) {
                        over = true;
                        break;
                }
                if (fds[1].revents & POLLIN) {
                        eventfd_t v;

                        (void)eventfd_read(kick_fd, &v);
                }
                if (fds[0].revents && !progress_read(ia)) {
                        /* The end of the connection, or garbage: the
                         * progress thread finds it once it watches again
                         * (the shutdown keeps it for it to read) and
                         * breaks the connections, whose events wake us
                         * (a CR EVD has none: the deadline does). */
                        (void)shutdown(ia->conn.fd, SHUT_RDWR);
                        over = true;
                        break;
                }
        }
        evd_reading_for(outer);
        spin_lock(&evd->lock);
        evd->waiter_reads = false;
        spin_unlock(&evd->lock);
        datd_conn_give_back(&ia->conn, was_reader);
        /* Sent away by progress_stop: the IA is closing, and its EVDs'
         * waiters are sent away next (DAT_ABORT). */
        if (datd_conn_reader_evicted(&ia->conn) && r != EINTR)
                over = true;
        /* Before a pending cancel can act: every agent filed runs (one
         * cancelled at its first cancellation point would leave the rest
         * filed for good, their CNOs triggered). */
        cno_notices_release(&held);
        pthread_setcancelstate(cancel, NULL);
        if (over)
                return dat_word_sleep(&evd->wake_seq, seen, deadline);
        return r;
}

/* The blocking part of dat_evd_wait: evd->waiter is set, seen is the
 * futex word read when it was. */
static DAT_RETURN wait_blocked(struct evd *evd, uint32_t seen, const struct dat_deadline *deadline,
                               DAT_EVENT *event, DAT_COUNT *nmore)
{
        DAT_TIMEOUT retry_us = TAKE_OVER_RETRY_FIRST_US;
        DAT_RETURN ret;
        bool done;
        int r = 0;

        spin_polling(evd, seen, deadline);
        spin_lock(&evd->lock);
        for (;;) {
                ret = wait_outcome_locked(evd, r, event, &done);
                if (done)
                        break;
                seen = evd->wake_seq;
                evd->waiter_sleeps = true;
                spin_unlock(&evd->lock);
                dto_evd_sleep_prepare(evd);
                r = sleep_reading(evd, seen, deadline, &retry_us);
                spin_lock(&evd->lock);
                evd->waiter_sleeps = false;
        }
        if (nmore)
                *nmore = (DAT_COUNT)evd->count;
        /* The last touch: evd_destroy may free the EVD once it sees this. */
        evd->waiter = false;
        spin_unlock(&evd->lock);
        return ret;
}

/* dat_evd_wait(3DAT) */
_public_ DAT_RETURN dat_evd_wait(DAT_EVD_HANDLE evd_handle, DAT_TIMEOUT timeout,
                                 DAT_COUNT threshold, DAT_EVENT *event, DAT_COUNT *n_more_events)
{
        struct evd *evd = evd_lookup(evd_handle);
        struct dat_deadline deadline;
        DAT_RETURN ret;
        uint32_t seen;

        if (!evd)
                FOREIGN_ELSE_INVALID(evd_handle, dat_invalid_handle(DAT_HANDLE_TYPE_EVD),
                                     evd_wait_func, evd_handle, timeout, threshold, event,
                                     n_more_events);
        /* dat_evd_wait(3DAT): a non-positive threshold is invalid */
        if (threshold <= 0)
                return DAT_ERR_ARG(3);
        if (!event)
                return DAT_ERR_ARG(4);
        dat_deadline_start(&deadline, timeout);
        spin_lock(&evd->lock);
        ret = wait_admit_locked(evd, threshold);
        if (ret == DAT_SUCCESS && evd->count < (uint32_t)threshold && timeout != 0) {
                /* dat_evd_wait(3DAT): a consumer blocked here owns the EVD */
                evd->waiter = true;
                evd->wait_threshold = (uint32_t)threshold;
                evd->wait_notified = evd->notified;
                seen = evd->wake_seq;
                spin_unlock(&evd->lock);
                ret = wait_blocked(evd, seen, &deadline, event, n_more_events);
                if (ret == DAT_SUCCESS)
                        dto_event_reaped(event);
                return ret;
        }
        if (ret == DAT_SUCCESS) {
                /* Nothing to wait for, or no time to: the EVD is never owned. */
                if (evd->count >= (uint32_t)threshold)
                        ring_pop_locked(evd, event);
                else
                        ret = DAT_ERR(DAT_TIMEOUT_EXPIRED, DAT_NO_SUBTYPE);
                if (n_more_events)
                        *n_more_events = (DAT_COUNT)evd->count;
        }
        spin_unlock(&evd->lock);
        if (ret == DAT_SUCCESS)
                dto_event_reaped(event);
        return ret;
}
