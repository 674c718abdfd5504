/* datd's quotas (datd.conf(5) limits max_eps, max_srqs) refuse EP and SRQ
 * creation with DAT_INSUFFICIENT_RESOURCES, and a refused create leaves
 * nothing behind: no handle, no reference on its PZ, EVDs or SRQ, no
 * registration in datd. */
#include "config.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/ep/ep_test.h"

static struct ep_fixture f;

static const char config[] =
        "{\n"
        "  \"ias\": [ {\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"} ],\n"
        "  \"verbs\": false,\n"
        "  \"limits\": { \"max_eps\": 2, \"max_srqs\": 1 }\n"
        "}\n";

static void setup(void)
{
        ep_datd_start_config(config);
        ep_fixture_open(&f);
}

TestSuite(ep_quota, .init = setup, .fini = ep_datd_stop, .timeout = EP_TEST_TIMEOUT);

Test(ep_quota, max_eps_refuses_the_next_ep_and_leaves_nothing_behind)
{
        /* dat_ep_create(3DAT): DAT_INSUFFICIENT_RESOURCES "The operation
         * failed due to resource limitations". */
        DAT_EP_HANDLE a = ep_make(&f, NULL), b = ep_make(&f, NULL), c = GARBAGE;

        cr_expect_eq(DAT_GET_TYPE(dat_ep_create(f.ia, f.pz, f.recv_evd, f.request_evd, f.conn_evd, NULL, &c)),
                     DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(c, GARBAGE, "a handle was handed out");
        cr_assert_eq(dat_ep_free(a), DAT_SUCCESS);
        /* datd's count went back down: one more fits again. */
        a = ep_make(&f, NULL);
        cr_assert_eq(dat_ep_free(a), DAT_SUCCESS);
        cr_assert_eq(dat_ep_free(b), DAT_SUCCESS);
        /* No reference left on anything the refused EP named. */
        cr_expect_eq(dat_pz_free(f.pz), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.recv_evd), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.request_evd), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.conn_evd), DAT_SUCCESS);
}

Test(ep_quota, a_refused_srq_ep_leaves_the_srq_free)
{
        DAT_EP_ATTR attr = ep_default_attr(&f);
        DAT_SRQ_HANDLE srq = srq_make(&f, 4, 1);
        DAT_EP_HANDLE a = ep_make(&f, NULL), b = ep_make(&f, NULL), c;

        cr_expect_eq(DAT_GET_TYPE(dat_ep_create_with_srq(f.ia, f.pz, f.recv_evd2, NULL, NULL, srq, &attr, &c)),
                     DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(dat_srq_free(srq), DAT_SUCCESS, "the refused EP still holds the SRQ");
        cr_assert_eq(dat_ep_free(a), DAT_SUCCESS);
        cr_assert_eq(dat_ep_free(b), DAT_SUCCESS);
}

Test(ep_quota, max_srqs_refuses_the_next_srq_and_leaves_nothing_behind)
{
        /* dat_srq_create(3DAT): DAT_INSUFFICIENT_RESOURCES. */
        DAT_SRQ_HANDLE a = srq_make(&f, 4, 1), b = GARBAGE;
        DAT_SRQ_ATTR attr = { 4, 1, 0 };

        cr_expect_eq(DAT_GET_TYPE(dat_srq_create(f.ia, f.pz2, &attr, &b)), DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(b, GARBAGE, "a handle was handed out");
        cr_expect_eq(dat_pz_free(f.pz2), DAT_SUCCESS, "the refused SRQ holds its PZ");
        cr_assert_eq(dat_srq_free(a), DAT_SUCCESS);
        a = srq_make(&f, 4, 1);
        cr_expect_eq(dat_srq_free(a), DAT_SUCCESS);
}

struct create_free {
        struct ep_fixture *f;
        int rounds;
        int created, refused, other;    /* dat_ep_create's answers */
        bool done;
};

static void *create_and_free(void *arg)
{
        struct create_free *cf = arg;

        for (int i = 0; i < cf->rounds; i++) {
                DAT_EP_HANDLE ep;
                DAT_RETURN r = dat_ep_create(cf->f->ia, cf->f->pz, NULL, NULL, cf->f->conn_evd, NULL,
                                             &ep);

                if (r == DAT_SUCCESS) {
                        cf->created++;
                        if (dat_ep_free(ep) != DAT_SUCCESS)
                                cf->other++;
                } else if (DAT_GET_TYPE(r) == DAT_INSUFFICIENT_RESOURCES) {
                        cf->refused++;
                } else {
                        cf->other++;
                }
        }
        __atomic_store_n(&cf->done, true, __ATOMIC_RELEASE);
        return NULL;
}

/* Below the quota an EP is registered without waiting for datd: creating
 * and freeing one completes while datd is stopped. */
Test(ep_quota, below_the_quota_an_ep_is_made_without_waiting_for_datd)
{
        struct create_free cf = { .f = &f, .rounds = 1 };
        struct timespec nap = { 0, 10 * 1000 * 1000 };
        pthread_t t;
        bool done = false;

        cr_assert_eq(kill(ep_datd.pid, SIGSTOP), 0);
        cr_assert_eq(pthread_create(&t, NULL, create_and_free, &cf), 0);
        /* A round trip would wait for SIGCONT: give it 5 s to show. */
        for (int i = 0; i < 500 && !done; i++) {
                nanosleep(&nap, NULL);
                done = __atomic_load_n(&cf.done, __ATOMIC_ACQUIRE);
        }
        cr_assert_eq(kill(ep_datd.pid, SIGCONT), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_expect(done, "dat_ep_create or dat_ep_free waited for the stopped datd");
        cr_expect_eq(cf.created, 1);
        cr_expect_eq(cf.other, 0);
}

/* libdat's count of the instance's EPs stays datd's: threads creating and
 * freeing EPs at the quota are refused only at it, and afterwards the
 * quota is whole again and datd lists no EP. */
Test(ep_quota, creates_and_frees_from_threads_keep_the_count_of_datd)
{
        enum { THREADS = 4 };
        struct create_free cf[THREADS];
        pthread_t t[THREADS];
        DAT_EP_HANDLE a, b;
        int created = 0;
        char *list;

        for (int i = 0; i < THREADS; i++) {
                cf[i] = (struct create_free){ .f = &f, .rounds = 300 };
                cr_assert_eq(pthread_create(&t[i], NULL, create_and_free, &cf[i]), 0);
        }
        for (int i = 0; i < THREADS; i++) {
                cr_assert_eq(pthread_join(t[i], NULL), 0);
                cr_expect_eq(cf[i].other, 0, "thread %d: an answer other than success or the quota", i);
                created += cf[i].created;
        }
        cr_expect_geq(created, 2);
        list = ep_datctl_list("ep");
        cr_expect_null(strstr(list, "\"handle\""), "datd still lists an EP: %s", list);
        free(list);
        a = ep_make(&f, NULL);
        b = ep_make(&f, NULL);
        cr_expect_eq(dat_ep_free(a), DAT_SUCCESS);
        cr_expect_eq(dat_ep_free(b), DAT_SUCCESS);
}
