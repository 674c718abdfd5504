/* dat_srq_create, dat_srq_post_recv, dat_srq_query, dat_srq_set_lw and
 * dat_srq_free (3DAT) against a real datd.  The data path is a later
 * issue: srq_buffer_take/completed/reaped move buffers as it will. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "libdat/srq.h"
#include "tests/ep/ep_test.h"

static struct ep_fixture f;

static void setup(void)
{
        ep_datd_start();
        ep_fixture_open(&f);
}

TestSuite(srq, .init = setup, .fini = ep_datd_stop, .timeout = EP_TEST_TIMEOUT);

static char buffer[4096] __attribute__((aligned(4096)));

struct lmr {
        DAT_LMR_HANDLE handle;
        DAT_LMR_CONTEXT context;
};

static struct lmr make_lmr(DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS privileges)
{
        struct lmr l;

        l.context = ep_make_lmr(f.ia, pz, buffer, sizeof(buffer), privileges, &l.handle);
        return l;
}

static DAT_LMR_TRIPLET segment(const struct lmr *l, size_t offset, size_t length)
{
        return ep_segment(l->context, buffer, offset, length);
}

static DAT_DTO_COOKIE cookie(uint64_t v)
{
        return (DAT_DTO_COOKIE){ .as_64 = v };
}

static DAT_SRQ_PARAM srq_params(DAT_SRQ_HANDLE srq)
{
        DAT_SRQ_PARAM p;

        cr_assert_eq(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &p), DAT_SUCCESS);
        return p;
}

/* ---- dat_srq_create ------------------------------------------------------ */

Test(srq, create_gives_an_operational_srq_with_the_attributes_asked)
{
        /* dat_srq_create(3DAT): "The created SRQ is unattached to any Endpoints". */
        DAT_SRQ_HANDLE srq = srq_make(&f, 10, 3);
        DAT_SRQ_PARAM p = srq_params(srq);
        DAT_HANDLE_TYPE type;

        cr_assert_eq(dat_get_handle_type(srq, &type), DAT_SUCCESS);
        cr_expect_eq(type, DAT_HANDLE_TYPE_SRQ);
        cr_expect_eq(p.ia_handle, f.ia);
        cr_expect_eq(p.srq_state, DAT_SRQ_STATE_OPERATIONAL);
        cr_expect_eq(p.pz_handle, f.pz);
        cr_expect_eq(p.max_recv_dtos, 10);
        cr_expect_eq(p.max_recv_iov, 3);
        cr_expect_eq(p.low_watermark, DAT_SRQ_LW_DEFAULT);
        cr_expect_eq(p.available_dto_count, 0);
        cr_expect_eq(p.outstanding_dto_count, 0);
}

Test(srq, create_checks_the_attributes_against_the_ia)
{
        /* dat_srq_create(3DAT): DAT_INVALID_PARAMETER "one of the requested SRQ
         * attributes was invalid"; the limits are dat_ia_query's
         * max_recv_per_srq and max_iov_segments_per_dto. */
        const DAT_SRQ_ATTR bad[] = {
                { f.limits.max_recv_per_srq + 1, 1, 0 },
                { -1, 1, 0 },
                { 8, f.limits.max_iov_segments_per_dto + 1, 0 },
                { 8, -1, 0 },
                { 8, 1, 9 },
                { 8, 1, -1 },
        };
        DAT_SRQ_HANDLE srq;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                DAT_SRQ_ATTR a = bad[i];

                cr_expect_eq(dat_srq_create(f.ia, f.pz, &a, &srq), ARG(3), "case %zu", i);
        }
        cr_expect_eq(dat_srq_create(f.ia, f.pz, NULL, &srq), ARG(3));
        {
                DAT_SRQ_ATTR a = { f.limits.max_recv_per_srq, f.limits.max_iov_segments_per_dto, 0 };

                cr_expect_eq(dat_srq_create(f.ia, f.pz, &a, NULL), ARG(4));
                cr_expect_eq(dat_srq_create(f.ia, f.pz, &a, &srq), DAT_SUCCESS);
        }
}

Test(srq, create_needs_a_pz_of_the_ia)
{
        /* dat_srq_create(3DAT): "Either ia_handle or pz_handle is an invalid DAT handle." */
        DAT_EVD_HANDLE async2;
        DAT_IA_HANDLE ia2 = ep_open_ia(&async2);
        DAT_SRQ_ATTR a = { 8, 1, 0 };
        DAT_SRQ_HANDLE srq;
        const DAT_HANDLE bad[] = { DAT_HANDLE_NULL, GARBAGE, f.recv_evd, ep_make_pz(ia2) };

        for (size_t i = 0; i < 4; i++)
                cr_expect_eq(dat_srq_create(f.ia, bad[i], &a, &srq), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        for (size_t i = 0; i < 3; i++)
                cr_expect_eq(dat_srq_create(bad[i], f.pz, &a, &srq), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(srq, the_srq_holds_its_pz)
{
        /* dat_pz_free(3DAT): a PZ in use -> DAT_INVALID_STATE. */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 1);

        cr_expect_eq(dat_pz_free(f.pz), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE));
        cr_assert_eq(dat_srq_free(srq), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(f.pz), DAT_SUCCESS);
}

Test(srq, a_low_watermark_at_create_fires_at_once)
{
        /* dat_srq_create(3DAT): "The Consumer must set low_watermark to
         * DAT_SRQ_LW_DEFAULT to ensure that an asynchronous event will not be
         * generated immediately, since there are no buffers in the created SRQ." */
        DAT_SRQ_ATTR a = { 8, 1, 2 };
        DAT_SRQ_HANDLE srq;
        DAT_EVENT e;

        cr_assert_eq(dat_srq_create(f.ia, f.pz, &a, &srq), DAT_SUCCESS);
        cr_expect_eq(srq_low_watermark_events(srq_lookup(srq)), 1);
        cr_assert(evd_next(f.async_evd, &e));
        cr_expect_eq(e.event_data.asynch_error_event_data.dat_handle, srq);
        cr_expect_eq(e.event_data.asynch_error_event_data.reason, DAT_SRQ_LOW_WATERMARK_EVENT);
        srq = srq_make(&f, 8, 1);
        cr_expect_eq(srq_low_watermark_events(srq_lookup(srq)), 0);
        cr_expect_not(evd_next(f.async_evd, &e));
}

/* ---- dat_srq_post_recv --------------------------------------------------- */

Test(srq, posted_buffers_queue_in_order_with_their_segments)
{
        /* dat_srq_post_recv(3DAT): the buffer is queued for the EPs; the IOV
         * is copied (dat_ia_query: iov_ownership_on_return is DAT_IOV_CONSUMER). */
        DAT_SRQ_HANDLE srq = srq_make(&f, 4, 2);
        struct lmr l = make_lmr(f.pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
        DAT_LMR_TRIPLET iov[2] = { segment(&l, 0, 100), segment(&l, 200, 50) }, got[2];
        DAT_DTO_COOKIE c;
        DAT_COUNT n;

        cr_assert_eq(dat_srq_post_recv(srq, 2, iov, cookie(1)), DAT_SUCCESS);
        memset(iov, 0, sizeof(iov));
        cr_assert_eq(dat_srq_post_recv(srq, 0, NULL, cookie(2)), DAT_SUCCESS);
        cr_expect_eq(srq_params(srq).available_dto_count, 2);
        cr_assert(srq_buffer_take(srq_lookup(srq), &c, &n, got));
        cr_expect_eq(c.as_64, 1);
        cr_expect_eq(n, 2);
        cr_expect_eq(got[0].virtual_address, (DAT_VADDR)(uintptr_t)buffer);
        cr_expect_eq(got[1].segment_length, 50);
        cr_assert(srq_buffer_take(srq_lookup(srq), &c, &n, got));
        cr_expect_eq(c.as_64, 2);
        cr_expect_eq(n, 0);
        cr_expect_not(srq_buffer_take(srq_lookup(srq), &c, &n, got));
}

Test(srq, post_checks_the_segment_count)
{
        DAT_SRQ_HANDLE srq = srq_make(&f, 4, 2);
        struct lmr l = make_lmr(f.pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
        DAT_LMR_TRIPLET iov[3] = { segment(&l, 0, 1), segment(&l, 1, 1), segment(&l, 2, 1) };

        cr_expect_eq(dat_srq_post_recv(srq, 3, iov, cookie(0)), ARG(2));
        cr_expect_eq(dat_srq_post_recv(srq, -1, iov, cookie(0)), ARG(2));
        cr_expect_eq(dat_srq_post_recv(srq, 1, NULL, cookie(0)), ARG(3));
        cr_expect_eq(srq_params(srq).available_dto_count, 0);
}

Test(srq, a_segment_outside_its_lmr_is_invalid)
{
        /* dat_srq_post_recv(3DAT): DAT_INVALID_PARAMETER "one of the IOV
         * segments pointed to a memory outside its LMR". */
        DAT_SRQ_HANDLE srq = srq_make(&f, 4, 2);
        struct lmr l = make_lmr(f.pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
        DAT_LMR_TRIPLET iov[2] = { segment(&l, 0, 10), segment(&l, 4000, 200) };

        cr_expect_eq(dat_srq_post_recv(srq, 2, iov, cookie(0)), ARG(3));
        cr_expect_eq(srq_params(srq).available_dto_count, 0);
}

Test(srq, an_unknown_lmr_or_one_without_local_write_is_a_privileges_violation)
{
        /* dat_srq_post_recv(3DAT): DAT_PRIVILEGES_VIOLATION "One of the LMRs
         * used in local_iov was either invalid or did not have the local
         * write privileges." */
        DAT_SRQ_HANDLE srq = srq_make(&f, 4, 1);
        struct lmr ro = make_lmr(f.pz, DAT_MEM_PRIV_LOCAL_READ_FLAG);
        struct lmr gone = make_lmr(f.pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
        DAT_LMR_TRIPLET iov = segment(&ro, 0, 10);
        const DAT_RETURN violation = ERR(DAT_PRIVILEGES_VIOLATION, DAT_PRIVILEGES_WRITE);

        cr_expect_eq(dat_srq_post_recv(srq, 1, &iov, cookie(0)), violation);
        iov = segment(&gone, 0, 10);
        cr_assert_eq(dat_lmr_free(gone.handle), DAT_SUCCESS);
        cr_expect_eq(dat_srq_post_recv(srq, 1, &iov, cookie(0)), violation);
        cr_expect_eq(srq_params(srq).available_dto_count, 0);
}

Test(srq, an_lmr_of_another_pz_is_a_protection_violation)
{
        /* dat_srq_post_recv(3DAT): DAT_PROTECTION_VIOLATION "Protection Zone
         * mismatch between an LMR of one of the local_iov segments and the SRQ." */
        DAT_SRQ_HANDLE srq = srq_make(&f, 4, 1);
        struct lmr other = make_lmr(f.pz2, DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
        DAT_LMR_TRIPLET iov = segment(&other, 0, 10);

        cr_expect_eq(dat_srq_post_recv(srq, 1, &iov, cookie(0)),
                     ERR(DAT_PROTECTION_VIOLATION, DAT_PROTECTION_WRITE));
}

Test(srq, a_full_srq_refuses_with_insufficient_resources)
{
        /* dat_srq_post_recv(3DAT): DAT_INSUFFICIENT_RESOURCES; every buffer
         * not yet reaped occupies an entry (dat_srq_query(3DAT)). */
        DAT_SRQ_HANDLE srq = srq_make(&f, 2, 0);
        struct srq *s = srq_lookup(srq);

        cr_assert_eq(dat_srq_post_recv(srq, 0, NULL, cookie(1)), DAT_SUCCESS);
        cr_assert_eq(dat_srq_post_recv(srq, 0, NULL, cookie(2)), DAT_SUCCESS);
        cr_expect_eq(dat_srq_post_recv(srq, 0, NULL, cookie(3)),
                     ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ));
        srq_take(srq, 1);
        cr_expect_eq(DAT_GET_TYPE(dat_srq_post_recv(srq, 0, NULL, cookie(3))), DAT_INSUFFICIENT_RESOURCES);
        srq_buffer_completed(s);
        cr_expect_eq(DAT_GET_TYPE(dat_srq_post_recv(srq, 0, NULL, cookie(3))), DAT_INSUFFICIENT_RESOURCES);
        srq_buffer_reaped(s);
        cr_expect_eq(dat_srq_post_recv(srq, 0, NULL, cookie(3)), DAT_SUCCESS);
}

/* ---- dat_srq_query ------------------------------------------------------- */

Test(srq, query_counts_as_in_the_man_page_example)
{
        /* dat_srq_query(3DAT), USAGE: 10 entries, 3 posted: available 3,
         * outstanding 3; after a Send arrives: 2 and 3; after the consumer
         * dequeues the completion: 2 and 2. */
        DAT_SRQ_HANDLE srq = srq_make(&f, 10, 0);
        struct srq *s = srq_lookup(srq);
        DAT_SRQ_PARAM p;

        srq_post_empty(srq, 3);
        p = srq_params(srq);
        cr_expect_eq(p.max_recv_dtos, 10);
        cr_expect_eq(p.available_dto_count, 3);
        cr_expect_eq(p.outstanding_dto_count, 3);
        srq_take(srq, 1);
        srq_buffer_completed(s);
        p = srq_params(srq);
        cr_expect_eq(p.available_dto_count, 2);
        cr_expect_eq(p.outstanding_dto_count, 3);
        srq_buffer_reaped(s);
        p = srq_params(srq);
        cr_expect_eq(p.available_dto_count, 2);
        cr_expect_eq(p.outstanding_dto_count, 2);
}

Test(srq, query_refuses_an_invalid_mask_or_a_null_param)
{
        /* dat_srq_query(3DAT): DAT_INVALID_PARAMETER "The srq_param_mask argument is invalid." */
        DAT_SRQ_HANDLE srq = srq_make(&f, 4, 1);
        DAT_SRQ_PARAM p;

        cr_expect_eq(dat_srq_query(srq, (DAT_SRQ_PARAM_MASK)0x100, &p), ARG(2));
        cr_expect_eq(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, NULL), ARG(3));
        cr_expect_eq(dat_srq_query(srq, 0, NULL), DAT_SUCCESS);
}

/* ---- dat_srq_set_lw ------------------------------------------------------ */

Test(srq, set_lw_above_max_recv_dtos_is_invalid)
{
        /* dat_srq_set_lw(3DAT): DAT_INVALID_PARAMETER "the value of
         * low_watermark ... exceeds the value of max_recv_dtos". */
        DAT_SRQ_HANDLE srq = srq_make(&f, 4, 1);

        cr_expect_eq(dat_srq_set_lw(srq, 5), ARG(2));
        cr_expect_eq(dat_srq_set_lw(srq, -1), ARG(2));
        cr_expect_eq(dat_srq_set_lw(srq, 4), DAT_SUCCESS);
        cr_expect_eq(srq_params(srq).low_watermark, 4);
}

Test(srq, the_low_watermark_fires_once_per_setting_when_an_ep_takes_a_buffer)
{
        /* dat_srq_set_lw(3DAT): "An asynchronous event will be generated when
         * the number of buffers on the SRQ is below the low watermark for the
         * first time ... when an associated EP takes a buffer ... only once
         * per setting of the low watermark." */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 0);
        struct srq *s = srq_lookup(srq);
        DAT_EVENT e;

        srq_post_empty(srq, 4);
        cr_assert_eq(dat_srq_set_lw(srq, 3), DAT_SUCCESS);
        cr_expect_eq(srq_low_watermark_events(s), 0);
        srq_take(srq, 1);    /* 3 left: not below */
        cr_expect_eq(srq_low_watermark_events(s), 0);
        srq_take(srq, 1);    /* 2 left: below */
        cr_expect_eq(srq_low_watermark_events(s), 1);
        cr_assert(evd_next(f.async_evd, &e), "no event on the async EVD");
        cr_expect_eq(e.event_data.asynch_error_event_data.dat_handle, srq);
        cr_expect_eq(e.event_data.asynch_error_event_data.reason, DAT_SRQ_LOW_WATERMARK_EVENT);
        srq_take(srq, 1);
        cr_expect_eq(srq_low_watermark_events(s), 1);
        cr_expect_not(evd_next(f.async_evd, &e));
        /* Setting it again, already below: "This can occur during the current call". */
        cr_assert_eq(dat_srq_set_lw(srq, 3), DAT_SUCCESS);
        cr_expect_eq(srq_low_watermark_events(s), 2);
}

/* ---- dat_srq_free -------------------------------------------------------- */

Test(srq, free_invalidates_the_handle_even_with_buffers_posted)
{
        DAT_SRQ_HANDLE srq = srq_make(&f, 4, 0);

        cr_assert_eq(dat_srq_post_recv(srq, 0, NULL, cookie(1)), DAT_SUCCESS);
        cr_expect_eq(dat_srq_free(srq), DAT_SUCCESS);
        cr_expect_eq(dat_srq_free(srq), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ));
}

/* ---- handle abuse -------------------------------------------------------- */

Test(srq, handle_abuse_is_an_invalid_srq_handle_everywhere)
{
        DAT_SRQ_HANDLE freed = srq_make(&f, 4, 1);
        const DAT_RETURN bad = ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
        DAT_SRQ_PARAM p;

        cr_assert_eq(dat_srq_free(freed), DAT_SUCCESS);
        const DAT_HANDLE handles[] = { DAT_HANDLE_NULL, GARBAGE, freed, f.pz, f.ia, (DAT_HANDLE)&p };

        for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++) {
                DAT_HANDLE h = handles[i];

                cr_expect_eq(dat_srq_post_recv(h, 0, NULL, cookie(0)), bad, "%zu", i);
                cr_expect_eq(dat_srq_query(h, DAT_SRQ_FIELD_ALL, &p), bad, "%zu", i);
                cr_expect_eq(dat_srq_set_lw(h, 0), bad, "%zu", i);
                cr_expect_eq(dat_srq_resize(h, 8), bad, "%zu", i);
                cr_expect_eq(dat_srq_free(h), bad, "%zu", i);
        }
}
