/* datd's quotas (datd.conf(5) limits max_eps, max_srqs) refuse EP and SRQ
 * creation with DAT_INSUFFICIENT_RESOURCES, and a refused create leaves
 * nothing behind: no handle, no reference on its PZ, EVDs or SRQ, no
 * registration in datd. */
#include "config.h"

#include <criterion/criterion.h>

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
