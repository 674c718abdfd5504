/* The producer side of an EVD, as the transports and the progress thread
 * use it (evd_post, evd_post_event): many producers and one consumer
 * without loss, duplication or reordering; overflow reported on the IA's
 * async EVD; events without notification. */
#include "config.h"

#include <criterion/criterion.h>

#include "libdat/evd.h"
#include "tests/evd/evd_test.h"

TestSuite(evd_producer, .init = evd_test_start_datd, .fini = evd_test_stop_datd, .timeout = 30);

static DAT_EVENT dto_event(uint64_t producer, uint64_t seq)
{
        DAT_EVENT e = { .event_number = DAT_DTO_COMPLETION_EVENT };

        e.event_extension_data[0] = producer;
        e.event_extension_data[1] = seq;
        return e;
}

#define N_PRODUCERS 4
#define EVENTS_PER_PRODUCER 250000

struct producer {
        pthread_t thread;
        struct evd *evd;
        uint64_t id;
};

static void *producer_main(void *arg)
{
        struct producer *p = arg;

        for (uint64_t seq = 0; seq < EVENTS_PER_PRODUCER; seq++) {
                DAT_EVENT e = dto_event(p->id, seq);
                DAT_RETURN r;

                /* A full ring loses the event: the producer posts it again. */
                while ((r = evd_post_event(p->evd, &e)) == ERR(DAT_QUEUE_FULL, 0))
                        sched_yield();
                if (r != DAT_SUCCESS)
                        return (void *)(uintptr_t)r;
        }
        return NULL;
}

Test(evd_producer, many_producers_one_consumer_lose_duplicate_and_reorder_nothing)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 1024, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG);
        struct producer producers[N_PRODUCERS];
        uint64_t next[N_PRODUCERS] = { 0 };
        uint64_t total = 0;

        for (unsigned i = 0; i < N_PRODUCERS; i++) {
                producers[i] = (struct producer){ .evd = evd_lookup(evd), .id = i };
                cr_assert_eq(pthread_create(&producers[i].thread, NULL, producer_main,
                                            &producers[i]), 0);
        }
        /* dat_evd_dequeue(3DAT): the events of one stream come out in the
         * order they went in, each exactly once.  Waits and dequeues mixed. */
        while (total < (uint64_t)N_PRODUCERS * EVENTS_PER_PRODUCER) {
                DAT_EVENT e;
                DAT_COUNT n;
                DAT_RETURN r = total % 2 ? dat_evd_wait(evd, 5 * 1000 * 1000, 1, &e, &n)
                                         : dat_evd_dequeue(evd, &e);
                uint64_t id, seq;

                if (r == (DAT_RETURN)DAT_QUEUE_EMPTY)
                        continue;
                cr_assert_eq(r, DAT_SUCCESS, "after %llu events: 0x%08x",
                             (unsigned long long)total, r);
                cr_assert_eq(e.event_number, DAT_DTO_COMPLETION_EVENT);
                cr_assert_eq(e.evd_handle, evd);
                id = e.event_extension_data[0];
                seq = e.event_extension_data[1];
                cr_assert_lt(id, N_PRODUCERS);
                cr_assert_eq(seq, next[id], "producer %llu: got %llu, expected %llu",
                             (unsigned long long)id, (unsigned long long)seq,
                             (unsigned long long)next[id]);
                next[id]++;
                total++;
        }
        for (unsigned i = 0; i < N_PRODUCERS; i++) {
                void *r;

                cr_assert_eq(pthread_join(producers[i].thread, &r), 0);
                cr_expect_null(r);
                cr_expect_eq(next[i], EVENTS_PER_PRODUCER);
        }
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

static void expect_overflow_report(DAT_EVD_HANDLE async, DAT_EVD_HANDLE overflowed)
{
        DAT_EVENT e;

        cr_assert_eq(dat_evd_dequeue(async, &e), DAT_SUCCESS, "no overflow reported");
        cr_expect_eq(e.event_number, DAT_ASYNC_ERROR_EVD_OVERFLOW);
        cr_expect_eq(e.evd_handle, async);
        cr_expect_eq(e.event_data.asynch_error_event_data.dat_handle, overflowed);
        cr_expect_eq(e.event_data.asynch_error_event_data.reason, DAT_EVD_OVERFLOW_ERROR);
}

Test(evd_producer, an_overflow_loses_the_event_and_is_reported_once_on_the_async_evd)
{
        DAT_EVD_HANDLE async;
        DAT_IA_HANDLE ia = evd_test_open_ia(8, &async);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 2, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG);
        struct evd *internal = evd_lookup(evd);
        DAT_EVENT e = dto_event(0, 0);

        for (uint64_t seq = 1; seq <= 4; seq++) {
                e = dto_event(0, seq);
                cr_expect_eq(evd_post_event(internal, &e),
                             seq <= 2 ? DAT_SUCCESS : ERR(DAT_QUEUE_FULL, 0));
        }
        /* One report for the whole overflow, not one per lost event. */
        expect_overflow_report(async, evd);
        cr_expect_eq(dat_evd_dequeue(async, &e), (DAT_RETURN)DAT_QUEUE_EMPTY);
        /* The queued events are intact; the lost ones are gone. */
        cr_assert_eq(dat_evd_dequeue(evd, &e), DAT_SUCCESS);
        cr_expect_eq(e.event_extension_data[1], 1);
        /* Room was made: the next loss is a new overflow, reported again. */
        e = dto_event(0, 5);
        cr_expect_eq(evd_post_event(internal, &e), DAT_SUCCESS);
        cr_expect_eq(evd_post_event(internal, &e), ERR(DAT_QUEUE_FULL, 0));
        expect_overflow_report(async, evd);
        cr_assert_eq(dat_evd_dequeue(evd, &e), DAT_SUCCESS);
        cr_expect_eq(e.event_extension_data[1], 2);
        cr_assert_eq(dat_evd_dequeue(evd, &e), DAT_SUCCESS);
        cr_expect_eq(e.event_extension_data[1], 5);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_producer, an_overflow_is_reported_on_the_async_evd_the_consumer_passed)
{
        DAT_IA_HANDLE ia1 = evd_test_open_ia(8, NULL), ia2 = DAT_HANDLE_NULL;
        DAT_EVD_HANDLE shared = evd_test_create(ia1, 16, DAT_HANDLE_NULL, DAT_EVD_ASYNC_FLAG);
        DAT_EVD_HANDLE passed = shared, evd;
        DAT_EVENT e = dto_event(0, 0);

        cr_assert_eq(dat_ia_open((DAT_NAME_PTR)"datd-shm", 0, &passed, &ia2), DAT_SUCCESS);
        evd = evd_test_create(ia2, 1, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG);
        cr_expect_eq(evd_post_event(evd_lookup(evd), &e), DAT_SUCCESS);
        cr_expect_eq(evd_post_event(evd_lookup(evd), &e), ERR(DAT_QUEUE_FULL, 0));
        /* dat_ia_open(3DAT): the IA's asynchronous notifications go to the
         * async EVD the consumer passed in */
        expect_overflow_report(shared, evd);
        dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG);
        dat_ia_close(ia1, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_producer, the_async_evd_overflowing_is_only_marked)
{
        DAT_EVD_HANDLE async;
        DAT_IA_HANDLE ia = evd_test_open_ia(1, &async);
        struct evd *internal = evd_lookup(async);
        DAT_EVENT e = { .event_number = DAT_ASYNC_ERROR_IA_CATASTROPHIC };
        DAT_COUNT qlen = evd_test_qlen(async);

        for (DAT_COUNT i = 0; i < qlen; i++)
                cr_assert_eq(evd_post_event(internal, &e), DAT_SUCCESS);
        cr_expect_eq(evd_post_event(internal, &e), ERR(DAT_QUEUE_FULL, 0));
        cr_expect(internal->overflowed);
        /* Nothing was added to report it to itself. */
        for (DAT_COUNT i = 0; i < qlen; i++) {
                cr_assert_eq(dat_evd_dequeue(async, &e), DAT_SUCCESS);
                cr_expect_eq(e.event_number, DAT_ASYNC_ERROR_IA_CATASTROPHIC);
        }
        cr_expect_eq(dat_evd_dequeue(async, &e), (DAT_RETURN)DAT_QUEUE_EMPTY);
        cr_expect_not(internal->overflowed);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_producer, an_event_without_notification_does_not_wake_the_waiter)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG);
        DAT_EVENT quiet = dto_event(0, 1), loud = dto_event(0, 2), e;
        struct timespec pause = { .tv_nsec = 20 * 1000 * 1000 };
        struct evd_waiter w;

        evd_waiter_block(&w, evd, TEN_SECONDS, 1);
        /* dat_evd_wait(3DAT): with notification suppressed or not solicited
         * a completion is no notification event and does not unblock. */
        cr_expect_eq(evd_post(evd_lookup(evd), &quiet, false), DAT_SUCCESS);
        nanosleep(&pause, NULL);
        cr_expect_eq(dat_evd_dequeue(evd, &e),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER));
        cr_expect_eq(evd_post(evd_lookup(evd), &loud, true), DAT_SUCCESS);
        cr_expect_eq(evd_waiter_join(&w), DAT_SUCCESS);
        cr_expect_eq(w.event.event_extension_data[1], 1);
        cr_expect_eq(w.nmore, 1);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd_producer, an_event_without_notification_does_not_trigger_the_cno)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 8, cno, DAT_EVD_DTO_FLAG), fired;
        DAT_EVENT e = dto_event(0, 1);

        cr_expect_eq(evd_post(evd_lookup(evd), &e, false), DAT_SUCCESS);
        cr_expect_eq(dat_cno_wait(cno, 0, &fired), ERR(DAT_QUEUE_EMPTY, 0));
        cr_expect_eq(evd_post(evd_lookup(evd), &e, true), DAT_SUCCESS);
        cr_expect_eq(dat_cno_wait(cno, 0, &fired), DAT_SUCCESS);
        cr_expect_eq(fired, evd);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}
