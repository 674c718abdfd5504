/* Consumer Notification Objects against a real datd: dat_cno_create,
 * dat_cno_query, dat_cno_modify_agent, dat_cno_wait, dat_cno_free, and how
 * EVDs trigger a CNO, one man-page rule per test. */
#include "config.h"

#include <criterion/criterion.h>

#include "tests/evd/evd_test.h"

TestSuite(cno, .init = evd_test_start_datd, .fini = evd_test_stop_datd, .timeout = 30);

#define CNO_IN_USE ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE)
#define NO_NOTIFICATION ERR(DAT_QUEUE_EMPTY, 0)

struct agent_log {
        pthread_mutex_t lock;
        unsigned calls;
        DAT_EVD_HANDLE evd;
};

static void agent_func(DAT_PVOID instance_data, DAT_EVD_HANDLE evd)
{
        struct agent_log *log = instance_data;

        pthread_mutex_lock(&log->lock);
        log->calls++;
        log->evd = evd;
        pthread_mutex_unlock(&log->lock);
}

static DAT_OS_WAIT_PROXY_AGENT agent_for(struct agent_log *log)
{
        return (DAT_OS_WAIT_PROXY_AGENT){ .instance_data = log, .proxy_agent_func = agent_func };
}

static DAT_CNO_PARAM query(DAT_CNO_HANDLE cno)
{
        DAT_CNO_PARAM p;

        cr_assert_eq(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &p), DAT_SUCCESS);
        return p;
}

Test(cno, create_without_an_agent_gives_a_cno_with_no_proxy)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_HANDLE_TYPE type;
        DAT_CNO_PARAM p = query(cno);

        cr_assert_eq(dat_get_handle_type(cno, &type), DAT_SUCCESS);
        cr_expect_eq(type, DAT_HANDLE_TYPE_CNO);
        cr_expect_eq(p.ia_handle, ia);
        /* dat_cno_query(3DAT): DAT_OS_WAIT_PROXY_AGENT_NULL means no agent */
        cr_expect_eq(p.proxy_type, DAT_PROXY_TYPE_NONE);
        cr_expect_null(p.proxy.agent.proxy_agent_func);
        cr_expect_eq(dat_cno_free(cno), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

Test(cno, create_with_an_agent_reports_it)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        struct agent_log log = { .lock = PTHREAD_MUTEX_INITIALIZER };
        DAT_CNO_HANDLE cno;
        DAT_CNO_PARAM p;

        cr_assert_eq(dat_cno_create(ia, agent_for(&log), &cno), DAT_SUCCESS);
        p = query(cno);
        cr_expect_eq(p.proxy_type, DAT_PROXY_TYPE_AGENT);
        cr_expect_eq(p.proxy.agent.proxy_agent_func, agent_func);
        cr_expect_eq(p.proxy.agent.instance_data, &log);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, create_refuses_an_invalid_agent_or_no_handle_pointer)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_OS_WAIT_PROXY_AGENT bad = { .instance_data = &ia, .proxy_agent_func = NULL };
        DAT_CNO_HANDLE cno;

        /* dat_cno_create(3DAT): the agent parameter is invalid -> DAT_INVALID_PARAMETER */
        cr_expect_eq(dat_cno_create(ia, bad, &cno), ERR_ARG(2));
        cr_expect_eq(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, NULL), ERR_ARG(3));
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

Test(cno, query_refuses_an_invalid_mask_or_no_param)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_CNO_PARAM p;

        /* dat_cno_query(3DAT): invalid cno_param_mask -> DAT_INVALID_PARAMETER */
        cr_expect_eq(dat_cno_query(cno, (DAT_CNO_PARAM_MASK)0x8, &p), ERR_ARG(2));
        cr_expect_eq(dat_cno_query(cno, DAT_CNO_FIELD_IA_HANDLE, NULL), ERR_ARG(3));
        cr_expect_eq(dat_cno_query(cno, DAT_CNO_FIELD_PROXY, &p), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, modify_agent_sets_and_clears_the_agent)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        struct agent_log log = { .lock = PTHREAD_MUTEX_INITIALIZER };
        DAT_OS_WAIT_PROXY_AGENT bad = { .instance_data = &ia, .proxy_agent_func = NULL };

        cr_expect_eq(dat_cno_modify_agent(cno, agent_for(&log)), DAT_SUCCESS);
        cr_expect_eq(query(cno).proxy_type, DAT_PROXY_TYPE_AGENT);
        cr_expect_eq(query(cno).proxy.agent.instance_data, &log);
        /* dat_cno_modify_agent(3DAT): DAT_OS_WAIT_PROXY_AGENT_NULL disassociates */
        cr_expect_eq(dat_cno_modify_agent(cno, DAT_OS_WAIT_PROXY_AGENT_NULL), DAT_SUCCESS);
        cr_expect_eq(query(cno).proxy_type, DAT_PROXY_TYPE_NONE);
        /* dat_cno_modify_agent(3DAT): invalid agent -> DAT_INVALID_PARAMETER */
        cr_expect_eq(dat_cno_modify_agent(cno, bad), ERR_ARG(2));
        cr_expect_eq(query(cno).proxy_type, DAT_PROXY_TYPE_NONE);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, wait_times_out_without_a_notification)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE fired = (DAT_EVD_HANDLE)0x77;

        evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);
        /* dat_cno_wait(3DAT): timed out without a notification ->
         * DAT_QUEUE_EMPTY, evd_handle set to a null handle */
        cr_expect_eq(dat_cno_wait(cno, 20 * 1000, &fired), NO_NOTIFICATION);
        cr_expect_eq(fired, DAT_HANDLE_NULL);
        cr_expect_eq(dat_cno_wait(cno, 0, &fired), NO_NOTIFICATION);
        cr_expect_eq(dat_cno_wait(cno, 0, NULL), ERR_ARG(3));
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, an_event_on_either_of_two_evds_triggers_the_cno)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE a = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);
        DAT_EVD_HANDLE b = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);
        DAT_EVD_HANDLE fired;

        /* dat_cno_wait(3DAT): notification events from a set of EVDs; the
         * triggering EVD is returned */
        evd_test_post(a, (void *)1);
        cr_expect_eq(dat_cno_wait(cno, TEN_SECONDS, &fired), DAT_SUCCESS);
        cr_expect_eq(fired, a);
        evd_test_post(b, (void *)2);
        cr_expect_eq(dat_cno_wait(cno, TEN_SECONDS, &fired), DAT_SUCCESS);
        cr_expect_eq(fired, b);
        /* The events themselves stay on their EVDs. */
        cr_expect_eq(evd_test_take(a), (void *)1);
        cr_expect_eq(evd_test_take(b), (void *)2);
        /* One trigger, one notification. */
        cr_expect_eq(dat_cno_wait(cno, 0, &fired), NO_NOTIFICATION);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, a_waiter_is_woken_by_an_event_posted_from_another_thread)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);
        struct cno_waiter w;

        cno_waiter_start(&w, cno, DAT_TIMEOUT_INFINITE);
        evd_test_await_cno_waiters(cno, 1);
        evd_test_post(evd, (void *)1);
        cr_expect_eq(cno_waiter_join(&w), DAT_SUCCESS);
        cr_expect_eq(w.evd, evd);
        cr_expect_eq(dat_cno_wait(cno, 0, &w.evd), NO_NOTIFICATION);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, a_disabled_evd_does_not_trigger_its_cno)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG), fired;

        /* dat_evd_disable(3DAT): arrivals do not affect the CNO */
        cr_assert_eq(dat_evd_disable(evd), DAT_SUCCESS);
        evd_test_post(evd, (void *)1);
        cr_expect_eq(dat_cno_wait(cno, 10 * 1000, &fired), NO_NOTIFICATION);
        /* dat_evd_enable(3DAT): arrivals trigger it again */
        cr_assert_eq(dat_evd_enable(evd), DAT_SUCCESS);
        evd_test_post(evd, (void *)2);
        cr_expect_eq(dat_cno_wait(cno, TEN_SECONDS, &fired), DAT_SUCCESS);
        cr_expect_eq(fired, evd);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, a_waiter_on_the_evd_preempts_the_cno)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG), fired;
        struct evd_waiter w;

        evd_waiter_block(&w, evd, TEN_SECONDS, 1);
        evd_test_post(evd, (void *)1);
        cr_expect_eq(evd_waiter_join(&w), DAT_SUCCESS);
        /* dat_evd_wait(3DAT): the CNO is not triggered while a consumer is
         * blocked on the EVD; dat_evd_enable(3DAT): even if enabled */
        cr_expect_eq(dat_cno_wait(cno, 0, &fired), NO_NOTIFICATION);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, a_trigger_calls_the_agent_once)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        struct agent_log log = { .lock = PTHREAD_MUTEX_INITIALIZER };
        DAT_CNO_HANDLE cno;
        DAT_EVD_HANDLE evd, fired;

        cr_assert_eq(dat_cno_create(ia, agent_for(&log), &cno), DAT_SUCCESS);
        evd = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);
        evd_test_post(evd, (void *)1);
        /* dat_cno_modify_agent(3DAT): the trigger is passed to the agent in
         * addition to local delivery */
        cr_expect_eq(log.calls, 1);
        cr_expect_eq(log.evd, evd);
        cr_expect_eq(dat_cno_wait(cno, 0, &fired), DAT_SUCCESS);
        /* dat_cno_create(3DAT): after it is invoked, the agent is no longer
         * associated with the CNO */
        cr_expect_eq(query(cno).proxy_type, DAT_PROXY_TYPE_NONE);
        evd_test_post(evd, (void *)2);
        cr_expect_eq(log.calls, 1);
        /* dat_cno_modify_agent(3DAT) associates one again. */
        cr_assert_eq(dat_cno_modify_agent(cno, agent_for(&log)), DAT_SUCCESS);
        evd_test_post(evd, (void *)3);
        cr_expect_eq(log.calls, 2);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, free_refuses_while_an_evd_references_it)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);

        /* dat_cno_free(3DAT): CNO in use by an EVD -> DAT_INVALID_STATE */
        cr_expect_eq(dat_cno_free(cno), CNO_IN_USE);
        cr_expect_eq(dat_evd_free(evd), DAT_SUCCESS);
        cr_expect_eq(dat_cno_free(cno), DAT_SUCCESS);
        cr_expect_eq(dat_cno_free(cno), CNO_BAD_HANDLE);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

Test(cno, free_refuses_while_a_thread_waits_on_it)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        struct cno_waiter w;

        cno_waiter_start(&w, cno, 50 * 1000);
        evd_test_await_cno_waiters(cno, 1);
        /* dat_cno_free(3DAT): a thread is blocked on it -> DAT_INVALID_STATE */
        cr_expect_eq(dat_cno_free(cno), CNO_IN_USE);
        cr_expect_eq(cno_waiter_join(&w), NO_NOTIFICATION);
        cr_expect_eq(dat_cno_free(cno), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, waiters_leave_with_no_evd_when_the_last_evd_is_freed)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE a = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);
        DAT_EVD_HANDLE b = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);
        struct cno_waiter w;

        cno_waiter_start(&w, cno, TEN_SECONDS);
        evd_test_await_cno_waiters(cno, 1);
        cr_assert_eq(dat_evd_free(a), DAT_SUCCESS);
        cr_assert_eq(dat_evd_free(b), DAT_SUCCESS);
        /* dat_cno_wait(3DAT): waiters are unblocked with a NULL handle when
         * all EVDs the CNO is associated with are freed */
        cr_expect_eq(cno_waiter_join(&w), DAT_SUCCESS);
        cr_expect_eq(w.evd, DAT_HANDLE_NULL);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(cno, abrupt_ia_close_unblocks_waiters_with_no_evd)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        struct cno_waiter w1, w2;

        /* An EVD older than the CNO: the close meets the CNO first. */
        cr_assert_eq(dat_evd_modify_cno(evd, cno), DAT_SUCCESS);
        cno_waiter_start(&w1, cno, TEN_SECONDS);
        cno_waiter_start(&w2, cno, TEN_SECONDS);
        evd_test_await_cno_waiters(cno, 2);
        /* dat_cno_wait(3DAT): all waiters are unblocked with a NULL handle
         * when the IA instance is destroyed */
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(cno_waiter_join(&w1), DAT_SUCCESS);
        cr_expect_eq(w1.evd, DAT_HANDLE_NULL);
        cr_expect_eq(cno_waiter_join(&w2), DAT_SUCCESS);
        cr_expect_eq(w2.evd, DAT_HANDLE_NULL);
}

Test(cno, abrupt_ia_close_unblocks_a_waiter_on_a_cno_without_evds)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        struct cno_waiter w;

        cno_waiter_start(&w, cno, TEN_SECONDS);
        evd_test_await_cno_waiters(cno, 1);
        /* dat_cno_wait(3DAT): waiters are unblocked with a NULL handle when
         * the IA instance is destroyed, EVDs or not */
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(cno_waiter_join(&w), DAT_SUCCESS);
        cr_expect_eq(w.evd, DAT_HANDLE_NULL);
}

static void expect_every_entry_point_refuses(DAT_CNO_HANDLE h, const char *what)
{
        DAT_CNO_PARAM p;
        DAT_EVD_HANDLE evd;

        cr_expect_eq(dat_cno_query(h, DAT_CNO_FIELD_ALL, &p), CNO_BAD_HANDLE, "query %s", what);
        cr_expect_eq(dat_cno_modify_agent(h, DAT_OS_WAIT_PROXY_AGENT_NULL), CNO_BAD_HANDLE,
                     "modify_agent %s", what);
        cr_expect_eq(dat_cno_wait(h, 0, &evd), CNO_BAD_HANDLE, "wait %s", what);
        cr_expect_eq(dat_cno_free(h), CNO_BAD_HANDLE, "free %s", what);
        cr_expect_eq(dat_cno_create(h, DAT_OS_WAIT_PROXY_AGENT_NULL, &h),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), "create on %s", what);
}

Test(cno, every_entry_point_refuses_a_bad_handle)
{
        DAT_EVD_HANDLE async;
        DAT_IA_HANDLE ia = evd_test_open_ia(8, &async);
        DAT_CNO_HANDLE freed = evd_test_cno(ia);

        cr_assert_eq(dat_cno_free(freed), DAT_SUCCESS);
        expect_every_entry_point_refuses(freed, "a freed CNO");
        expect_every_entry_point_refuses(async, "an EVD");
        for (size_t i = 0; i < 3; i++)
                expect_every_entry_point_refuses(evd_test_garbage[i], "garbage");
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* ---- datd's quota: CNOs count against max_evds -------------------------- */

static void start_datd_one_evd(void)
{
        evd_test_start_datd_max_evds(1);
}

TestSuite(cno_quota, .init = start_datd_one_evd, .fini = evd_test_stop_datd, .timeout = 30);

Test(cno_quota, create_past_the_quota_of_datd_fails_and_free_gives_it_back)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE a = evd_test_cno(ia), b;

        /* dat_cno_create(3DAT): resource limitations -> DAT_INSUFFICIENT_RESOURCES */
        cr_expect_eq(DAT_GET_TYPE(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &b)),
                     DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(dat_cno_free(a), DAT_SUCCESS);
        b = evd_test_cno(ia);
        cr_expect_eq(dat_cno_free(b), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}
