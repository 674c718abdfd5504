/* Protection Zones against a real datd: dat_pz_create(3DAT),
 * dat_pz_query(3DAT), dat_pz_free(3DAT) with each kind of dependent, the
 * max_pzs quota, and handle abuse on every entry point. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "tests/mem/mem_test.h"

static void start(void)
{
        mem_datd_start(NULL);
}

static void start_two_pzs(void)
{
        mem_datd_start(mem_config_with_limits("\"max_pzs\": 2"));
}

TestSuite(pz, .init = start, .fini = mem_datd_stop, .timeout = 30);
TestSuite(pz_quota, .init = start_two_pzs, .fini = mem_datd_stop, .timeout = 30);

#define PZ_IN_USE ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE)
#define BAD_PZ ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ)
#define BAD_IA ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA)

static DAT_HANDLE_TYPE type_of(DAT_HANDLE h)
{
        DAT_HANDLE_TYPE t = (DAT_HANDLE_TYPE)-1;

        cr_assert_eq(dat_get_handle_type(h, &t), DAT_SUCCESS);
        return t;
}

/* dat_pz_create(3DAT), dat_pz_query(3DAT): the PZ's parameter is its IA */
Test(pz, create_gives_a_pz_whose_query_names_its_ia)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);
        DAT_PZ_PARAM param = { 0 };

        cr_expect_eq(type_of(pz), DAT_HANDLE_TYPE_PZ);
        cr_expect_eq(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), DAT_SUCCESS);
        cr_expect_eq(param.ia_handle, ia);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

/* dat_pz_create(3DAT): DAT_INVALID_PARAMETER for a NULL pz_handle */
Test(pz, create_without_an_output_is_invalid_arg2)
{
        DAT_IA_HANDLE ia = mem_open_ia();

        cr_expect_eq(dat_pz_create(ia, NULL), ERR_ARG(2));
        /* Nothing was left on the IA. */
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

/* dat_pz_query(3DAT): an invalid mask -> DAT_INVALID_PARAMETER */
Test(pz, query_with_a_bad_mask_or_no_output_is_invalid_parameter)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);
        DAT_PZ_PARAM param;

        cr_expect_eq(dat_pz_query(pz, (DAT_PZ_PARAM_MASK)0x2, &param), ERR_ARG(2));
        cr_expect_eq(dat_pz_query(pz, DAT_PZ_FIELD_ALL, NULL), ERR_ARG(3));
        cr_expect_eq(dat_pz_query(pz, (DAT_PZ_PARAM_MASK)0, &param), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* dat_pz_free(3DAT): in use by an LMR -> DAT_INVALID_STATE */
Test(pz, free_while_an_lmr_uses_it_is_invalid_state)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr lmr = mem_lmr_ok(ia, pz, buf, 64, DAT_MEM_PRIV_LOCAL_READ_FLAG);

        cr_expect_eq(dat_pz_free(pz), PZ_IN_USE);
        cr_expect_eq(type_of(pz), DAT_HANDLE_TYPE_PZ);
        cr_expect_eq(dat_lmr_free(lmr.handle), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* dat_pz_free(3DAT): in use by an RMR -> DAT_INVALID_STATE */
Test(pz, free_while_an_rmr_uses_it_is_invalid_state)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;

        cr_assert_eq(dat_rmr_create(pz, &rmr), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz), PZ_IN_USE);
        cr_expect_eq(dat_rmr_free(rmr), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* dat_pz_free(3DAT): in use by an Endpoint -> DAT_INVALID_STATE */
Test(pz, free_while_an_ep_uses_it_is_invalid_state)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_ep_create(ia, pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
                                     NULL, &ep);

        cr_assert_eq(r, DAT_SUCCESS, "dat_ep_create: 0x%08x", r);
        cr_expect_eq(dat_pz_free(pz), PZ_IN_USE);
        cr_expect_eq(dat_ep_free(ep), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* dat_pz_free(3DAT): a PZ an SRQ was created on is in use as well */
Test(pz, free_while_an_srq_uses_it_is_invalid_state)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);
        DAT_SRQ_ATTR attr = { .max_recv_dtos = 4, .max_recv_iov = 1, .low_watermark = 0 };
        DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_srq_create(ia, pz, &attr, &srq);

        cr_assert_eq(r, DAT_SUCCESS, "dat_srq_create: 0x%08x", r);
        cr_expect_eq(dat_pz_free(pz), PZ_IN_USE);
        cr_expect_eq(dat_srq_free(srq), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(pz), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* dat_ia_close(3DAT): a PZ is a child of its IA (graceful refuses, abrupt frees) */
Test(pz, a_pz_keeps_a_graceful_close_away_and_goes_with_an_abrupt_one)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE pz = mem_pz(ia);
        DAT_HANDLE_TYPE t;

        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE));
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(dat_get_handle_type(pz, &t), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
}

/* Every entry point: NULL, freed, another kind's and garbage handles ->
 * DAT_INVALID_HANDLE of the kind named. */
Test(pz, bad_handles_are_invalid_handle_on_every_entry_point)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE freed = mem_stale_handle(ia);
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        int x;
        const DAT_HANDLE bad[] = { DAT_HANDLE_NULL, freed, GARBAGE_HANDLE, (DAT_HANDLE)&x, ia };
        DAT_PZ_HANDLE out;
        DAT_PZ_PARAM param;

        cr_assert_eq(dat_ia_query(ia, &evd, 0, NULL, 0, NULL), DAT_SUCCESS);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_expect_eq(dat_pz_query(bad[i], DAT_PZ_FIELD_ALL, &param), BAD_PZ, "%zu", i);
                cr_expect_eq(dat_pz_free(bad[i]), BAD_PZ, "%zu", i);
                if (bad[i] != ia)
                        cr_expect_eq(dat_pz_create(bad[i], &out), BAD_IA, "%zu", i);
        }
        /* An EVD is no IA. */
        cr_expect_eq(dat_pz_create(evd, &out), BAD_IA);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* dat_pz_create(3DAT): resource limitations (datd.conf max_pzs) ->
 * DAT_INSUFFICIENT_RESOURCES, and the refused PZ leaves nothing behind. */
Test(pz_quota, the_pz_over_max_pzs_is_refused_and_leaves_nothing)
{
        DAT_IA_HANDLE ia = mem_open_ia();
        DAT_PZ_HANDLE a = mem_pz(ia), b = mem_pz(ia), c = GARBAGE_HANDLE;

        cr_expect_eq(DAT_GET_TYPE(dat_pz_create(ia, &c)), DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(c, GARBAGE_HANDLE, "no handle is handed out on failure");
        cr_expect_eq(dat_pz_free(a), DAT_SUCCESS);
        /* datd counted no third PZ: freeing one makes room for exactly one. */
        c = mem_pz(ia);
        cr_expect_eq(DAT_GET_TYPE(dat_pz_create(ia, &a)), DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(dat_pz_free(b), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(c), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}
