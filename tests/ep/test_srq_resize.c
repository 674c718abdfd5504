/* dat_srq_resize(3DAT), the seed: never below the outstanding buffers (on
 * the SRQ, taken by its EPs, completed but not reaped), never below the low
 * watermark, never above the IA's limit, and nothing lost. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdio.h>
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

TestSuite(srq_resize, .init = setup, .fini = ep_datd_stop, .timeout = EP_TEST_TIMEOUT);

static const DAT_RETURN in_use = ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);

static DAT_SRQ_PARAM srq_params(DAT_SRQ_HANDLE srq)
{
        DAT_SRQ_PARAM p;

        cr_assert_eq(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &p), DAT_SUCCESS);
        return p;
}

/* Walks every size from 0 to 8 against `outstanding` outstanding buffers:
 * below -> DAT_INVALID_STATE and no change, else DAT_SUCCESS and the size. */
static void walk_sizes(DAT_SRQ_HANDLE srq, DAT_COUNT outstanding)
{
        for (DAT_COUNT size = 0; size <= 8; size++) {
                DAT_COUNT before = srq_params(srq).max_recv_dtos;
                DAT_RETURN r = dat_srq_resize(srq, size);

                if (size < outstanding) {
                        cr_expect_eq(r, in_use, "size %d with %d outstanding", size, outstanding);
                        cr_expect_eq(srq_params(srq).max_recv_dtos, before);
                } else {
                        cr_expect_eq(r, DAT_SUCCESS, "size %d with %d outstanding", size, outstanding);
                        cr_expect_eq(srq_params(srq).max_recv_dtos, size);
                }
                cr_expect_eq(srq_params(srq).outstanding_dto_count, outstanding);
        }
}

Test(srq_resize, never_below_the_buffers_on_the_srq)
{
        /* "If the number of outstanding Recv buffers on the SRQ is larger then
         * the requested srq_max_recv_dto, the operation returns
         * DAT_INVALID_STATE and do not change SRQ." */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 0);

        srq_post_empty(srq, 3);
        walk_sizes(srq, 3);
}

Test(srq_resize, never_below_the_buffers_taken_by_its_eps)
{
        /* "... the buffers posted to SRQ at are at SRQ associated EPs". */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 0);

        srq_post_empty(srq, 3);
        srq_take(srq, 3);
        cr_assert_eq(srq_params(srq).available_dto_count, 0);
        walk_sizes(srq, 3);
}

Test(srq_resize, never_below_the_completions_not_yet_reaped)
{
        /* "... and the buffers posted to SRQ for which completions have been
         * generated but not yet reaped by Consumer from recv_evds of the EPs
         * that use the SRQ." */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 0);
        struct srq *s = srq_lookup(srq);

        srq_post_empty(srq, 3);
        srq_take(srq, 3);
        for (int i = 0; i < 3; i++)
                srq_buffer_completed(s);
        walk_sizes(srq, 3);
        /* Reaped: they no longer count. */
        for (int i = 0; i < 3; i++)
                srq_buffer_reaped(s);
        walk_sizes(srq, 0);
}

Test(srq_resize, the_three_kinds_add_up)
{
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 0);

        srq_post_empty(srq, 6);
        srq_take(srq, 4);
        srq_buffer_completed(srq_lookup(srq));
        srq_buffer_completed(srq_lookup(srq));
        /* 2 on the SRQ, 2 taken, 2 completed. */
        walk_sizes(srq, 6);
}

Test(srq_resize, never_below_the_low_watermark)
{
        /* "If the requested srq_max_recv_dto is below the SRQ low watermark,
         * the operation returns DAT_INVALID_STATE and does not change SRQ." */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 0);

        cr_assert_eq(dat_srq_set_lw(srq, 5), DAT_SUCCESS);
        cr_expect_eq(DAT_GET_TYPE(dat_srq_resize(srq, 4)), DAT_INVALID_STATE);
        cr_expect_eq(srq_params(srq).max_recv_dtos, 8);
        cr_expect_eq(dat_srq_resize(srq, 5), DAT_SUCCESS);
        cr_expect_eq(srq_params(srq).max_recv_dtos, 5);
        cr_expect_eq(DAT_GET_TYPE(dat_srq_resize(srq, 0)), DAT_INVALID_STATE);
}

Test(srq_resize, above_the_ia_limit_or_negative_is_an_invalid_parameter)
{
        /* DAT_INVALID_PARAMETER "The srq_max_recv_dto argument is invalid":
         * dat_ia_query's max_recv_per_srq bounds it. */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 0);

        cr_expect_eq(dat_srq_resize(srq, f.limits.max_recv_per_srq + 1), ARG(2));
        cr_expect_eq(dat_srq_resize(srq, -1), ARG(2));
        cr_expect_eq(srq_params(srq).max_recv_dtos, 8);
        cr_expect_eq(dat_srq_resize(srq, f.limits.max_recv_per_srq), DAT_SUCCESS);
}

static char buffer[4096] __attribute__((aligned(4096)));

Test(srq_resize, nothing_is_lost_growing_or_shrinking)
{
        /* "Resizing of Shared Receive Queue should not cause any incoming
         * messages on any of the EPs that use the SRQ to be lost";
         * "required not to lose any buffers": order and contents stay. */
        DAT_SRQ_HANDLE srq = srq_make(&f, 6, 2);
        struct srq *s = srq_lookup(srq);
        DAT_LMR_HANDLE lmr;
        DAT_LMR_CONTEXT ctx = ep_make_lmr(f.ia, f.pz, buffer, sizeof(buffer), DAT_MEM_PRIV_LOCAL_WRITE_FLAG, &lmr);
        DAT_LMR_TRIPLET got[2];
        DAT_DTO_COOKIE c;
        DAT_COUNT n;
        int next = 0;

        /* Move the ring's head so that the queue wraps around its end. */
        srq_post_empty(srq, 4);
        srq_take(srq, 4);
        for (int i = 0; i < 4; i++) {
                srq_buffer_completed(s);
                srq_buffer_reaped(s);
        }
        for (int i = 0; i < 5; i++) {
                DAT_LMR_TRIPLET iov[2] = { ep_segment(ctx, buffer, 100 * i, 10 + i),
                                           ep_segment(ctx, buffer, 2000 + i, 1) };

                cr_assert_eq(dat_srq_post_recv(srq, 1 + i % 2, iov, (DAT_DTO_COOKIE){ .as_64 = (uint64_t)i }),
                             DAT_SUCCESS);
        }
        cr_assert_eq(dat_srq_resize(srq, 12), DAT_SUCCESS);
        cr_assert_eq(dat_srq_resize(srq, 5), DAT_SUCCESS);
        cr_assert_eq(dat_srq_resize(srq, 9), DAT_SUCCESS);
        cr_expect_eq(srq_params(srq).available_dto_count, 5);
        while (srq_buffer_take(s, &c, &n, got)) {
                cr_expect_eq(c.as_64, (uint64_t)next, "buffer %d came out as %llu", next,
                             (unsigned long long)c.as_64);
                cr_expect_eq(n, 1 + next % 2);
                cr_expect_eq(got[0].virtual_address, (DAT_VADDR)(uintptr_t)(buffer + 100 * next));
                cr_expect_eq(got[0].segment_length, (DAT_SEG_LENGTH)(10 + next));
                if (n == 2)
                        cr_expect_eq(got[1].virtual_address, (DAT_VADDR)(uintptr_t)(buffer + 2000 + next));
                next++;
        }
        cr_expect_eq(next, 5);
}

Test(srq_resize, datd_hears_the_new_size)
{
        /* The SRQ's registration (DATP_OBJ_SRQ) follows the resize; a refused
         * one tells datd nothing. */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 0);
        char *out;

        cr_assert_eq(dat_srq_resize(srq, 12), DAT_SUCCESS);
        srq_post_empty(srq, 3);
        cr_assert_eq(DAT_GET_TYPE(dat_srq_resize(srq, 2)), DAT_INVALID_STATE);
        out = ep_datctl_list("object");
        cr_expect_not_null(strstr(out, "\"kind\": \"SRQ\""), "%s", out);
        cr_expect_not_null(strstr(out, "\"qlen\": 12"), "%s", out);
        free(out);
}
