/* Taking events out of an EVD against a real datd: dat_evd_post_se,
 * dat_evd_dequeue and dat_evd_wait (threshold, timeout, ownership by the
 * waiter, waking from other threads, signals, (un)waitable, sleeping
 * without burning a core), one man-page rule per test. */
#include "config.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "libdat/datd_conn.h"
#include "libdat/evd.h"
#include "libdat/evd_wait.h"
#include "libdat/ia.h"
#include "tests/evd/evd_test.h"
#include "tests/evd/evd_waiter_peek.h"

TestSuite(evd_wait, .init = evd_test_start_datd, .fini = evd_test_stop_datd, .timeout = 30);

#define WAITER_EXCLUSIVE ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER)
#define UNWAITABLE ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE)
#define TIMED_OUT ERR(DAT_TIMEOUT_EXPIRED, 0)

Test(evd_wait, post_se_queues_the_consumer_pointer_as_a_software_event)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_EVENT in = evd_test_soft_event(&ia), out;

        /* dat_evd_post_se(3DAT): the event's parameters are opaque to the
         * provider; the memory the pointer references stays the consumer's. */
        cr_assert_eq(dat_evd_post_se(evd, &in), DAT_SUCCESS);
        cr_assert_eq(dat_evd_dequeue(evd, &out), DAT_SUCCESS);
        cr_expect_eq(out.event_number, DAT_SOFTWARE_EVENT);
        cr_expect_eq(out.event_data.software_event_data.pointer, (void *)&ia);
        /* dat_evd_dequeue(3DAT): the event names the EVD it came from */
        cr_expect_eq(out.evd_handle, evd);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, post_se_needs_an_evd_taking_software_events)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_DEFAULT_FLAG);
        DAT_EVENT e = evd_test_soft_event(NULL);

        /* dat_evd_post_se(3DAT): an event on the EVD's software event stream;
         * this EVD has none. */
        cr_expect_eq(dat_evd_post_se(evd, &e), ERR_ARG(1));
        cr_expect_eq(dat_evd_dequeue(evd, &e), (DAT_RETURN)DAT_QUEUE_EMPTY);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, post_se_refuses_an_event_that_is_not_a_software_event)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 4, DAT_HANDLE_NULL, ALL_EVD_FLAGS);
        DAT_EVENT e = evd_test_soft_event(NULL);

        /* dat_evd_post_se(3DAT): the event parameter is invalid -> DAT_INVALID_PARAMETER */
        e.event_number = DAT_DTO_COMPLETION_EVENT;
        cr_expect_eq(dat_evd_post_se(evd, &e), ERR_ARG(2));
        e.event_number = DAT_ASYNC_ERROR_EVD_OVERFLOW;
        cr_expect_eq(dat_evd_post_se(evd, &e), ERR_ARG(2));
        cr_expect_eq(dat_evd_post_se(evd, NULL), ERR_ARG(2));
        cr_expect_eq(dat_evd_dequeue(evd, &e), (DAT_RETURN)DAT_QUEUE_EMPTY);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, post_se_on_a_full_queue_fails_without_overflowing)
{
        DAT_EVD_HANDLE async;
        DAT_IA_HANDLE ia = evd_test_open_ia(8, &async);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 3);
        DAT_EVENT e = evd_test_soft_event((void *)4);

        for (uintptr_t i = 1; i <= 3; i++)
                evd_test_post(evd, (void *)i);
        /* dat_evd_post_se(3DAT): full queue -> DAT_QUEUE_FULL, the event is
         * not queued, and the asynchronous EVD is not affected */
        cr_expect_eq(dat_evd_post_se(evd, &e), ERR(DAT_QUEUE_FULL, 0));
        cr_expect_eq(dat_evd_dequeue(async, &e), (DAT_RETURN)DAT_QUEUE_EMPTY);
        for (uintptr_t i = 1; i <= 3; i++)
                cr_expect_eq(evd_test_take(evd), (void *)i);
        cr_expect_eq(dat_evd_dequeue(evd, &e), (DAT_RETURN)DAT_QUEUE_EMPTY);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, dequeue_of_an_empty_evd_says_queue_empty)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_EVENT e;

        /* dat_evd_dequeue(3DAT): no entries -> DAT_QUEUE_EMPTY */
        cr_expect_eq(dat_evd_dequeue(evd, &e), (DAT_RETURN)DAT_QUEUE_EMPTY);
        evd_test_post(evd, (void *)1);
        cr_expect_eq(evd_test_take(evd), (void *)1);
        cr_expect_eq(dat_evd_dequeue(evd, &e), (DAT_RETURN)DAT_QUEUE_EMPTY);
        cr_expect_eq(dat_evd_dequeue(evd, NULL), ERR_ARG(2));
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, dequeue_returns_events_in_the_order_they_were_posted)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 5);

        /* dat_evd_dequeue(3DAT): events of one stream come out in order;
         * three rounds make the ring wrap. */
        for (uintptr_t round = 0; round < 3; round++) {
                for (uintptr_t i = 1; i <= 4; i++)
                        evd_test_post(evd, (void *)(round * 10 + i));
                for (uintptr_t i = 1; i <= 4; i++)
                        cr_expect_eq(evd_test_take(evd), (void *)(round * 10 + i));
        }
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, dequeue_is_refused_while_a_thread_waits)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        struct evd_waiter w;
        DAT_EVENT e;

        evd_waiter_block(&w, evd, TEN_SECONDS, 2);
        evd_test_post(evd, (void *)1);
        /* dat_evd_wait(3DAT): the waiter owns the EVD; any other dequeue is
         * rejected with DAT_INVALID_STATE */
        cr_expect_eq(dat_evd_dequeue(evd, &e), WAITER_EXCLUSIVE);
        evd_test_post(evd, (void *)2);
        cr_expect_eq(evd_waiter_join(&w), DAT_SUCCESS);
        cr_expect_eq(w.event.event_data.software_event_data.pointer, (void *)1);
        cr_expect_eq(evd_test_take(evd), (void *)2);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, a_second_waiter_is_refused)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        struct evd_waiter w;
        DAT_EVENT e;
        DAT_COUNT n;

        evd_waiter_block(&w, evd, TEN_SECONDS, 1);
        /* dat_evd_wait(3DAT): there is already a waiter -> DAT_INVALID_STATE */
        cr_expect_eq(dat_evd_wait(evd, 1000, 1, &e, &n), WAITER_EXCLUSIVE);
        evd_test_post(evd, (void *)1);
        cr_expect_eq(evd_waiter_join(&w), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, wait_returns_at_once_when_enough_events_are_queued)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 8);
        DAT_EVENT e;
        DAT_COUNT n = -1;

        for (uintptr_t i = 1; i <= 3; i++)
                evd_test_post(evd, (void *)i);
        /* dat_evd_wait(3DAT): removes the first event; nmore is the events
         * left, at least threshold - 1 */
        cr_assert_eq(dat_evd_wait(evd, DAT_TIMEOUT_INFINITE, 3, &e, &n), DAT_SUCCESS);
        cr_expect_eq(e.event_data.software_event_data.pointer, (void *)1);
        cr_expect_eq(e.evd_handle, evd);
        cr_expect_eq(n, 2);
        cr_assert_eq(dat_evd_wait(evd, 0, 1, &e, &n), DAT_SUCCESS);
        cr_expect_eq(e.event_data.software_event_data.pointer, (void *)2);
        cr_expect_eq(n, 1);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, wait_refuses_a_threshold_that_is_not_positive_or_beyond_the_queue)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_EVENT e;
        DAT_COUNT n;

        /* dat_evd_wait(3DAT): a non-positive threshold, or one larger than
         * the queue length -> DAT_INVALID_PARAMETER */
        cr_expect_eq(dat_evd_wait(evd, 0, 0, &e, &n), ERR_ARG(3));
        cr_expect_eq(dat_evd_wait(evd, 0, -1, &e, &n), ERR_ARG(3));
        cr_expect_eq(dat_evd_wait(evd, 0, evd_test_qlen(evd) + 1, &e, &n), ERR_ARG(3));
        cr_expect_eq(dat_evd_wait(evd, 0, 1, NULL, &n), ERR_ARG(4));
        /* The queue length itself is a valid threshold. */
        cr_expect_eq(dat_evd_wait(evd, 0, evd_test_qlen(evd), &e, &n), TIMED_OUT);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, wait_times_out_on_an_empty_evd)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_EVENT e;
        DAT_COUNT n = -1;

        /* dat_evd_wait(3DAT): timeout reached below the threshold ->
         * DAT_TIMEOUT_EXPIRED, nmore is defined */
        cr_expect_eq(dat_evd_wait(evd, 20 * 1000, 1, &e, &n), TIMED_OUT);
        cr_expect_eq(n, 0);
        /* The waiter gave the EVD back. */
        cr_expect_eq(dat_evd_dequeue(evd, &e), (DAT_RETURN)DAT_QUEUE_EMPTY);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, wait_times_out_below_the_threshold_without_dequeuing)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 8);
        DAT_EVENT e;
        DAT_COUNT n = -1;

        evd_test_post(evd, (void *)1);
        evd_test_post(evd, (void *)2);
        /* dat_evd_wait(3DAT): on DAT_TIMEOUT_EXPIRED no event is dequeued and
         * nmore is the snapshot of the queue */
        cr_expect_eq(dat_evd_wait(evd, 30 * 1000, 3, &e, &n), TIMED_OUT);
        cr_expect_eq(n, 2);
        cr_expect_eq(dat_evd_wait(evd, 0, 3, &e, &n), TIMED_OUT);
        cr_expect_eq(n, 2);
        cr_expect_eq(evd_test_take(evd), (void *)1);
        cr_expect_eq(evd_test_take(evd), (void *)2);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, wait_is_woken_by_an_event_from_another_thread)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        struct evd_waiter w;

        evd_waiter_block(&w, evd, DAT_TIMEOUT_INFINITE, 1);
        evd_test_post(evd, (void *)7);
        cr_expect_eq(evd_waiter_join(&w), DAT_SUCCESS);
        cr_expect_eq(w.event.event_number, DAT_SOFTWARE_EVENT);
        cr_expect_eq(w.event.event_data.software_event_data.pointer, (void *)7);
        cr_expect_eq(w.nmore, 0);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, wait_sleeps_until_the_threshold_is_reached)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 8);
        struct timespec pause = { .tv_nsec = 20 * 1000 * 1000 };
        struct evd_waiter w;
        DAT_EVENT e;

        evd_waiter_block(&w, evd, TEN_SECONDS, 3);
        evd_test_post(evd, (void *)1);
        evd_test_post(evd, (void *)2);
        /* Time for a waiter woken too early to return (no timing assertion). */
        nanosleep(&pause, NULL);
        /* dat_evd_wait(3DAT): the consumer is woken after threshold events;
         * still the owner with two queued */
        cr_expect_eq(dat_evd_dequeue(evd, &e), WAITER_EXCLUSIVE);
        evd_test_post(evd, (void *)3);
        cr_expect_eq(evd_waiter_join(&w), DAT_SUCCESS);
        cr_expect_eq(w.event.event_data.software_event_data.pointer, (void *)1);
        cr_expect_eq(w.nmore, 2);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, set_unwaitable_wakes_the_waiter_with_invalid_state)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        struct evd_waiter w;

        evd_waiter_block(&w, evd, TEN_SECONDS, 1);
        /* dat_evd_set_unwaitable(3DAT): threads blocked in dat_evd_wait are
         * awakened and return DAT_INVALID_STATE */
        cr_expect_eq(dat_evd_set_unwaitable(evd), DAT_SUCCESS);
        cr_expect_eq(evd_waiter_join(&w), UNWAITABLE);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, an_unwaitable_evd_refuses_waits_but_still_dequeues)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_EVENT e;
        DAT_COUNT n;

        cr_assert_eq(dat_evd_set_unwaitable(evd), DAT_SUCCESS);
        evd_test_post(evd, (void *)1);
        /* dat_evd_set_unwaitable(3DAT): dat_evd_wait returns synchronously
         * with DAT_INVALID_STATE; events arrive and can be dequeued */
        cr_expect_eq(dat_evd_wait(evd, TEN_SECONDS, 1, &e, &n), UNWAITABLE);
        cr_expect_eq(evd_test_take(evd), (void *)1);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, clear_unwaitable_permits_waits_again)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_EVENT e;
        DAT_COUNT n;

        cr_assert_eq(dat_evd_set_unwaitable(evd), DAT_SUCCESS);
        cr_assert_eq(dat_evd_clear_unwaitable(evd), DAT_SUCCESS);
        evd_test_post(evd, (void *)1);
        /* dat_evd_clear_unwaitable(3DAT): calls to dat_evd_wait are permitted */
        cr_expect_eq(dat_evd_wait(evd, TEN_SECONDS, 1, &e, &n), DAT_SUCCESS);
        cr_expect_eq(dat_evd_wait(evd, 10 * 1000, 1, &e, &n), TIMED_OUT);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, a_threshold_above_one_is_refused_while_feeds_control_notification)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 8, DAT_HANDLE_NULL,
                                             DAT_EVD_DTO_FLAG | DAT_EVD_SOFTWARE_FLAG);
        struct evd *internal = evd_lookup(evd);
        DAT_EVENT e;
        DAT_COUNT n;

        /* dat_evd_wait(3DAT): an EVD fed by an EP with
         * DAT_COMPLETION_UNSIGNALLED_FLAG or DAT_COMPLETION_SOLICITED_WAIT_FLAG
         * needs threshold 1, else DAT_INVALID_STATE */
        evd_feed_config_get(internal, DAT_EVD_STATE_CONFIG_NOTIFY);
        cr_expect_eq(dat_evd_wait(evd, 0, 2, &e, &n),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_CONFIG_NOTIFY));
        evd_feed_config_get(internal, DAT_EVD_STATE_CONFIG_SOLICITED);
        cr_expect_eq(dat_evd_wait(evd, 0, 2, &e, &n),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_CONFIG_SOLICITED));
        cr_expect_eq(dat_evd_wait(evd, 0, 1, &e, &n), TIMED_OUT);
        evd_feed_config_put(internal, DAT_EVD_STATE_CONFIG_SOLICITED);
        evd_feed_config_put(internal, DAT_EVD_STATE_CONFIG_NOTIFY);
        cr_expect_eq(dat_evd_wait(evd, 0, 2, &e, &n), TIMED_OUT);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

static unsigned handled_sigusr1;

static void on_sigusr1(int sig)
{
        (void)sig;
        __atomic_add_fetch(&handled_sigusr1, 1, __ATOMIC_RELEASE);
}

Test(evd_wait, a_signal_interrupts_the_wait)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        struct sigaction sa = { .sa_handler = on_sigusr1 };     /* no SA_RESTART */
        struct timespec pause = { .tv_nsec = 10 * 1000 * 1000 };
        struct evd_waiter w;
        DAT_EVENT e;
        int sent = 0;

        cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
        evd_waiter_block(&w, evd, TEN_SECONDS, 1);
        /* A signal may land before the waiter is in the kernel; send until
         * one interrupts it (bounded: the waiter gives up after 10 s). */
        do {
                pthread_kill(w.thread, SIGUSR1);
                nanosleep(&pause, NULL);
        } while (++sent < 500 && dat_evd_dequeue(evd, &e) == WAITER_EXCLUSIVE);
        /* dat_evd_wait(3DAT): interrupted by a signal -> DAT_INTERRUPTED_CALL,
         * nmore defined */
        cr_expect_eq(evd_waiter_join(&w), ERR(DAT_INTERRUPTED_CALL, 0));
        cr_expect_eq(w.nmore, 0);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_wait, abrupt_ia_close_aborts_a_waiter)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        struct evd_waiter w;

        evd_waiter_block(&w, evd, TEN_SECONDS, 1);
        /* dat_evd_wait(3DAT): aborted because the IA was closed -> DAT_ABORT */
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(evd_waiter_join(&w), ERR(DAT_ABORT, 0));
}

/* An EVD of connection requests on ia (what datd's events feed, so that
 * its waiter may read datd's socket), and its internals. */
static struct evd *cr_evd_create(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *evd)
{
        struct evd *e;

        cr_assert_eq(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, evd), DAT_SUCCESS);
        e = evd_lookup(*evd);
        cr_assert_not_null(e);
        return e;
}

/* A waiter that finds datd's socket being read (here by the test; in life
 * by the progress thread, or before that thread watches it) tries again
 * later: it used to sleep on the futex for the whole wait. */
Test(evd_wait, a_waiter_that_finds_datds_socket_busy_takes_it_over_later)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd;
        struct evd *e = cr_evd_create(ia, &evd);
        struct ia *internal = dat_container_of(e->obj.parent, struct ia, obj);
        struct evd_waiter w;

        /* The lock the progress thread holds while it reads a packet. */
        for (time_t end = time(NULL) + 5; !datd_conn_begin_read(&internal->conn);) {
                cr_assert(time(NULL) < end, "the socket's reader lock never came free");
                dat_nap();
        }
        evd_waiter_block(&w, evd, TEN_SECONDS, 1);
        cr_assert(evd_waiter_within_5_s(e, EVD_WAITER_SLEEPS), "the waiter never went to sleep");
        datd_conn_end_read(&internal->conn);
        cr_expect(evd_waiter_within_5_s(e, EVD_WAITER_READS),
                  "the waiter stayed on the futex after the socket came free");
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(evd_waiter_join(&w), ERR(DAT_ABORT, 0));
}

/* A waiter on an EVD of connection requests reads datd's socket itself
 * (evd_ring.c, sleep_reading), holding the lock the progress thread needs
 * to stop: an abrupt close sends it away all the same, and the close
 * completes (it used to wait for the waiter's timeout). */
Test(evd_wait, abrupt_ia_close_aborts_a_waiter_reading_datds_socket)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd;
        struct evd *e = cr_evd_create(ia, &evd);
        struct evd_waiter w;

        evd_waiter_block(&w, evd, TEN_SECONDS, 1);
        cr_assert(evd_waiter_within_5_s(e, EVD_WAITER_READS),
                  "the waiter never took datd's socket over");
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(evd_waiter_join(&w), ERR(DAT_ABORT, 0));
}

static double seconds(clockid_t clock)
{
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A waiter reading datd's socket, with its thread id for /proc. */
struct reading_waiter {
        DAT_EVD_HANDLE evd;
        pid_t tid;
        DAT_RETURN ret;
        double took;
};

static void *reading_waiter_main(void *arg)
{
        struct reading_waiter *w = arg;
        double start;
        DAT_EVENT e;
        DAT_COUNT n;

        __atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
        start = seconds(CLOCK_MONOTONIC);
        w->ret = dat_evd_wait(w->evd, 5u * 1000 * 1000, 1, &e, &n);
        w->took = seconds(CLOCK_MONOTONIC) - start;
        return NULL;
}

/* Whether thread tid of this process sleeps in ppoll within 5 s (its
 * system call number in /proc: the signal must come once it is there, or
 * it would only run the handler on the way in). */
static bool in_ppoll_within_5_s(pid_t tid)
{
        char path[64];

        snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
        for (time_t end = time(NULL) + 5; time(NULL) < end; dat_nap()) {
                FILE *f = fopen(path, "r");
                long nr = -1;

                if (!f)
                        continue;
                if (fscanf(f, "%ld", &nr) != 1)
                        nr = -1;
                fclose(f);
                if (nr == SYS_ppoll)
                        return true;
        }
        return false;
}

/* A waiter on an EVD that datd's events feed reads datd's socket in
 * ppoll (evd_ring.c, sleep_reading).  One signal to a handler without
 * SA_RESTART ends its wait with DAT_INTERRUPTED_CALL at once: the wait
 * used to go on in a futex sleep that never saw the signal, until its
 * timeout (or for ever). */
static void a_signal_interrupts_a_waiter_reading_datds_socket(DAT_EVD_FLAGS flags)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        struct sigaction sa = { .sa_handler = on_sigusr1 };     /* no SA_RESTART */
        struct reading_waiter w = { .ret = DAT_SUCCESS };
        struct evd *e;
        pthread_t thread;
        bool reading;

        cr_assert_eq(dat_evd_create(ia, 4, DAT_HANDLE_NULL, flags, &w.evd), DAT_SUCCESS);
        e = evd_lookup(w.evd);
        cr_assert_not_null(e);
        cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
        cr_assert_eq(pthread_create(&thread, NULL, reading_waiter_main, &w), 0);
        reading = evd_waiter_within_5_s(e, EVD_WAITER_READS);
        while (reading && !__atomic_load_n(&w.tid, __ATOMIC_ACQUIRE))
                dat_nap();
        reading = reading && in_ppoll_within_5_s(w.tid);
        /* Once, never again: a second signal would hide a swallowed one. */
        if (reading)
                pthread_kill(thread, SIGUSR1);
        /* Bounded: the wait times out after 5 s at most. */
        cr_assert_eq(pthread_join(thread, NULL), 0);
        cr_assert(reading, "the waiter never read datd's socket in ppoll");
        cr_expect_eq(w.ret, ERR(DAT_INTERRUPTED_CALL, 0), "the wait returned 0x%x after %.3f s",
                     w.ret, w.took);
        cr_expect_lt(w.took, 2.0, "the interrupted wait took %.3f s", w.took);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(evd_wait, a_signal_interrupts_a_waiter_reading_datds_socket_for_a_cr_evd)
{
        a_signal_interrupts_a_waiter_reading_datds_socket(DAT_EVD_CR_FLAG);
}

Test(evd_wait, a_signal_interrupts_a_waiter_reading_datds_socket_for_a_connection_evd)
{
        a_signal_interrupts_a_waiter_reading_datds_socket(DAT_EVD_CONNECTION_FLAG);
}

/* The same waiter with no deadline, and every handler installed with
 * SA_RESTART (the signal came to one of those): a futex sleep would go on
 * after it, and so does this one, until something else ends it (here the
 * IA's close: DAT_ABORT). */
static void *reading_waiter_forever_main(void *arg)
{
        struct reading_waiter *w = arg;
        DAT_EVENT e;
        DAT_COUNT n;

        __atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
        w->ret = dat_evd_wait(w->evd, DAT_TIMEOUT_INFINITE, 1, &e, &n);
        return NULL;
}

Test(evd_wait, a_restarting_signal_does_not_end_a_waiter_reading_datds_socket)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        struct sigaction sa = { .sa_handler = on_sigusr1, .sa_flags = SA_RESTART };
        struct sigaction old;
        struct reading_waiter w = { .ret = DAT_SUCCESS };
        bool reading, after = false;
        struct evd *e;
        pthread_t thread;

        cr_assert_eq(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &w.evd), DAT_SUCCESS);
        e = evd_lookup(w.evd);
        cr_assert_not_null(e);
        cr_assert_eq(sigaction(SIGUSR1, &sa, &old), 0);
        cr_assert_eq(pthread_create(&thread, NULL, reading_waiter_forever_main, &w), 0);
        reading = evd_waiter_within_5_s(e, EVD_WAITER_READS);
        while (reading && !__atomic_load_n(&w.tid, __ATOMIC_ACQUIRE))
                dat_nap();
        reading = reading && in_ppoll_within_5_s(w.tid);
        if (reading) {
                pthread_kill(thread, SIGUSR1);
                for (int i = 0; i < 50000 && !__atomic_load_n(&handled_sigusr1, __ATOMIC_ACQUIRE); i++)
                        dat_nap();
                /* Still waiting, back in ppoll after the handler. */
                after = __atomic_load_n(&handled_sigusr1, __ATOMIC_ACQUIRE) &&
                        in_ppoll_within_5_s(w.tid) && evd_waiter_within_5_s(e, EVD_WAITER_READS);
        }
        /* What ends the wait in every case (evicting the reader). */
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_assert_eq(pthread_join(thread, NULL), 0);
        cr_expect_eq(sigaction(SIGUSR1, &old, NULL), 0);
        cr_assert(reading, "the waiter never read datd's socket in ppoll");
        cr_expect(after, "the waiter did not go on reading datd's socket after the signal");
        cr_expect_eq(DAT_GET_TYPE(w.ret), DAT_ABORT, "the wait returned 0x%x, not DAT_ABORT", w.ret);
}

struct idle_waiter {
        DAT_EVD_HANDLE evd;
        DAT_RETURN ret;
        double cpu, wall;
};

static void *idle_waiter_main(void *arg)
{
        struct idle_waiter *w = arg;
        double cpu0 = seconds(CLOCK_THREAD_CPUTIME_ID), wall0 = seconds(CLOCK_MONOTONIC);
        DAT_EVENT e;
        DAT_COUNT n;

        w->ret = dat_evd_wait(w->evd, TEN_SECONDS, 1, &e, &n);
        w->cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        w->wall = seconds(CLOCK_MONOTONIC) - wall0;
        return NULL;
}

Test(evd_wait, an_idle_waiter_sleeps_instead_of_spinning)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        struct idle_waiter w = { .evd = evd_test_soft(ia, 4) };
        struct timespec second = { .tv_sec = 1 };
        pthread_t thread;

        cr_assert_eq(pthread_create(&thread, NULL, idle_waiter_main, &w), 0);
        evd_test_await_waiter(w.evd);
        nanosleep(&second, NULL);
        evd_test_post(w.evd, (void *)1);
        cr_assert_eq(pthread_join(thread, NULL), 0);
        cr_expect_eq(w.ret, DAT_SUCCESS);
        /* DESIGN.md: dat_evd_wait never burns a core while idle.  A ratio of
         * the waiting thread's CPU time to the time it waited, not a latency. */
        cr_expect_lt(w.cpu, 0.05 * w.wall, "the waiter used %.3f s of CPU in %.3f s", w.cpu,
                     w.wall);
}
