#include "config.h"

#include "tests/evd/evd_test.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "libdat/cno.h"
#include "tests/harness.h"

static struct datd_instance datd;
static char garbage_target[64];

DAT_HANDLE evd_test_garbage[3] = {
        DAT_HANDLE_NULL,
        (DAT_HANDLE)0x1234567,
        (DAT_HANDLE)garbage_target,     /* a real address, but no handle */
};

void evd_test_start_datd_with(const char *config_json)
{
        char *bin = build_path("daemon/datd");
        bool built = bin && access(bin, X_OK) == 0;

        free(bin);
        if (!built)
                cr_skip_test("daemon/datd is not built in this tree");
        cr_assert_eq(datd_start(&datd, config_json), 0, "datd did not start");
        datd_export_env(&datd);
}

void evd_test_start_datd_max_evds(unsigned max_evds)
{
        char config[256];

        snprintf(config, sizeof(config),
                 "{\"ias\": [{\"name\": \"shm\", \"transport\": \"shm\","
                 " \"address\": \"127.0.0.1\"}],"
                 " \"verbs\": false, \"limits\": {\"max_evds\": %u}}", max_evds);
        evd_test_start_datd_with(config);
}

void evd_test_start_datd(void)
{
        evd_test_start_datd_with(NULL);
}

void evd_test_stop_datd(void)
{
        datd_stop(&datd);
}

DAT_IA_HANDLE evd_test_open_ia(DAT_COUNT async_qlen, DAT_EVD_HANDLE *async_evd)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_ia_open((DAT_NAME_PTR)"datd-shm", async_qlen, &evd, &ia);

        cr_assert_eq(r, DAT_SUCCESS, "dat_ia_open: 0x%08x (datd log: %s)", r, datd.log_path);
        if (async_evd)
                *async_evd = evd;
        return ia;
}

DAT_EVD_HANDLE evd_test_create(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_CNO_HANDLE cno,
                               DAT_EVD_FLAGS flags)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_evd_create(ia, qlen, cno, flags, &evd);

        cr_assert_eq(r, DAT_SUCCESS, "dat_evd_create(qlen %d, flags 0x%x): 0x%08x (datd log: %s)",
                     qlen, flags, r, datd.log_path);
        return evd;
}

DAT_EVD_HANDLE evd_test_soft(DAT_IA_HANDLE ia, DAT_COUNT qlen)
{
        return evd_test_create(ia, qlen, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG);
}

DAT_CNO_HANDLE evd_test_cno(DAT_IA_HANDLE ia)
{
        DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno);

        cr_assert_eq(r, DAT_SUCCESS, "dat_cno_create: 0x%08x (datd log: %s)", r, datd.log_path);
        return cno;
}

DAT_EVENT evd_test_soft_event(void *pointer)
{
        DAT_EVENT e = { .event_number = DAT_SOFTWARE_EVENT };

        e.event_data.software_event_data.pointer = pointer;
        return e;
}

void evd_test_post(DAT_EVD_HANDLE evd, void *pointer)
{
        DAT_EVENT e = evd_test_soft_event(pointer);

        cr_assert_eq(dat_evd_post_se(evd, &e), DAT_SUCCESS);
}

void *evd_test_take(DAT_EVD_HANDLE evd)
{
        DAT_EVENT e;

        cr_assert_eq(dat_evd_dequeue(evd, &e), DAT_SUCCESS);
        cr_assert_eq(e.event_number, DAT_SOFTWARE_EVENT);
        return e.event_data.software_event_data.pointer;
}

static DAT_EVD_PARAM query(DAT_EVD_HANDLE evd)
{
        DAT_EVD_PARAM p;

        cr_assert_eq(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &p), DAT_SUCCESS);
        return p;
}

DAT_COUNT evd_test_qlen(DAT_EVD_HANDLE evd)
{
        return query(evd).evd_qlen;
}

DAT_EVD_STATE evd_test_state(DAT_EVD_HANDLE evd)
{
        return query(evd).evd_state;
}

static void nap_ms(unsigned ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

        nanosleep(&ts, NULL);
}

void evd_test_await_waiter(DAT_EVD_HANDLE evd)
{
        DAT_EVENT e;

        for (int i = 0; i < 10000; i++) {
                DAT_RETURN r = dat_evd_dequeue(evd, &e);

                if (r == ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER))
                        return;
                cr_assert_eq(r, (DAT_RETURN)DAT_QUEUE_EMPTY, "the EVD must be empty: 0x%08x", r);
                nap_ms(1);
        }
        cr_assert_fail("no thread started waiting on the EVD");
}

static void *evd_waiter_main(void *arg)
{
        struct evd_waiter *w = arg;

        w->ret = dat_evd_wait(w->evd, w->timeout, w->threshold, &w->event, &w->nmore);
        return NULL;
}

void evd_waiter_block(struct evd_waiter *w, DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout,
                      DAT_COUNT threshold)
{
        *w = (struct evd_waiter){ .evd = evd, .timeout = timeout, .threshold = threshold,
                                  .nmore = -1 };
        cr_assert_eq(pthread_create(&w->thread, NULL, evd_waiter_main, w), 0);
        evd_test_await_waiter(evd);
}

DAT_RETURN evd_waiter_join(struct evd_waiter *w)
{
        cr_assert_eq(pthread_join(w->thread, NULL), 0);
        return w->ret;
}

static void *cno_waiter_main(void *arg)
{
        struct cno_waiter *w = arg;

        w->ret = dat_cno_wait(w->cno, w->timeout, &w->evd);
        return NULL;
}

void cno_waiter_start(struct cno_waiter *w, DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout)
{
        *w = (struct cno_waiter){ .cno = cno, .timeout = timeout, .evd = (DAT_EVD_HANDLE)0x77 };
        cr_assert_eq(pthread_create(&w->thread, NULL, cno_waiter_main, w), 0);
}

DAT_RETURN cno_waiter_join(struct cno_waiter *w)
{
        cr_assert_eq(pthread_join(w->thread, NULL), 0);
        return w->ret;
}

void evd_test_await_cno_waiters(DAT_CNO_HANDLE cno, unsigned n)
{
        struct cno *c = cno_lookup(cno);

        cr_assert_not_null(c);
        for (int i = 0; i < 10000; i++) {
                unsigned waiters;

                pthread_mutex_lock(&c->lock);
                waiters = c->waiters;
                pthread_mutex_unlock(&c->lock);
                if (waiters >= n)
                        return;
                nap_ms(1);
        }
        cr_assert_fail("fewer than %u threads started waiting on the CNO", n);
}
