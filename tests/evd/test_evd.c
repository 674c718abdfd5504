/* The EVD object against a real datd: dat_evd_create, dat_evd_query,
 * dat_evd_resize, dat_evd_modify_cno, dat_evd_enable/disable and
 * dat_evd_free, one man-page rule per test, and every EVD entry point fed
 * bad handles. */
#include "config.h"

#include <criterion/criterion.h>

#include "libdat/evd.h"
#include "tests/evd/evd_test.h"

TestSuite(evd, .init = evd_test_start_datd, .fini = evd_test_stop_datd, .timeout = 30);

static DAT_COUNT max_evd_qlen(DAT_IA_HANDLE ia)
{
        DAT_IA_ATTR attr;

        cr_assert_eq(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_MAX_EVD_QLEN, &attr, 0, NULL),
                     DAT_SUCCESS);
        return attr.max_evd_qlen;
}

Test(evd, create_gives_an_enabled_waitable_evd_with_what_was_asked)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 100, DAT_HANDLE_NULL,
                                             DAT_EVD_DTO_FLAG | DAT_EVD_SOFTWARE_FLAG);
        DAT_HANDLE_TYPE type;
        DAT_EVD_PARAM p;

        cr_assert_eq(dat_get_handle_type(evd, &type), DAT_SUCCESS);
        cr_expect_eq(type, DAT_HANDLE_TYPE_EVD);
        cr_assert_eq(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &p), DAT_SUCCESS);
        cr_expect_eq(p.ia_handle, ia);
        /* dat_evd_create(3DAT): the queue holds at least evd_min_qlen events */
        cr_expect_geq(p.evd_qlen, 100);
        cr_expect_eq(p.evd_flags, DAT_EVD_DTO_FLAG | DAT_EVD_SOFTWARE_FLAG);
        cr_expect_eq(p.cno_handle, DAT_HANDLE_NULL);
        cr_expect_eq(p.evd_state & (DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_DISABLED),
                     DAT_EVD_STATE_ENABLED);
        cr_expect_eq(p.evd_state & (DAT_EVD_STATE_WAITABLE | DAT_EVD_STATE_UNWAITABLE),
                     DAT_EVD_STATE_WAITABLE);
        cr_expect_eq(dat_evd_free(evd), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

Test(evd, create_accepts_every_combination_of_stream_flags)
{
        /* dat_ia_query(3DAT): evd_stream_merging_supported says every pair of
         * streams may share an EVD, so every combination is valid. */
        static const DAT_EVD_FLAGS streams[] = {
                DAT_EVD_SOFTWARE_FLAG, DAT_EVD_CR_FLAG, DAT_EVD_DTO_FLAG,
                DAT_EVD_CONNECTION_FLAG, DAT_EVD_RMR_BIND_FLAG, DAT_EVD_ASYNC_FLAG,
        };
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);

        for (unsigned set = 1; set < 1u << 6; set++) {
                DAT_EVD_FLAGS flags = 0;
                DAT_EVD_HANDLE evd;

                for (unsigned i = 0; i < 6; i++)
                        if (set & (1u << i))
                                flags |= streams[i];
                evd = evd_test_create(ia, 4, DAT_HANDLE_NULL, flags);
                cr_expect_eq(dat_evd_free(evd), DAT_SUCCESS);
        }
        evd_test_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_DEFAULT_FLAG);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, create_refuses_flags_naming_no_stream)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = (DAT_EVD_HANDLE)0x55;

        /* dat_evd_create(3DAT): invalid evd_flags -> DAT_INVALID_PARAMETER */
        cr_expect_eq(dat_evd_create(ia, 4, DAT_HANDLE_NULL, 0, &evd), ERR_ARG(4));
        cr_expect_eq(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | 0x2, &evd),
                     ERR_ARG(4));
        cr_expect_eq(dat_evd_create(ia, 4, DAT_HANDLE_NULL, (DAT_EVD_FLAGS)0x8, &evd),
                     ERR_ARG(4));
        cr_expect_eq(evd, (DAT_EVD_HANDLE)0x55);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, create_refuses_extension_flags_as_an_unsupported_model)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd;

        /* dat_evd_create(3DAT): DAT_MODEL_NOT_SUPPORTED for what the
         * provider does not offer; of the extension flags it offers only
         * the IB extension's DAT_IB_EVD_EXTENSION_FLAG (0x200). */
        cr_expect_eq(dat_evd_create(ia, 4, DAT_HANDLE_NULL, (DAT_EVD_FLAGS)0x400, &evd),
                     ERR(DAT_MODEL_NOT_SUPPORTED, 0));
        cr_expect_eq(dat_evd_create(ia, 4, DAT_HANDLE_NULL,
                                    (DAT_EVD_FLAGS)(DAT_EVD_DTO_FLAG | 0x400), &evd),
                     ERR(DAT_MODEL_NOT_SUPPORTED, 0));
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, create_refuses_a_queue_length_that_is_not_positive)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd;

        cr_expect_eq(dat_evd_create(ia, 0, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd),
                     ERR_ARG(2));
        cr_expect_eq(dat_evd_create(ia, -5, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd),
                     ERR_ARG(2));
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, create_refuses_a_queue_longer_than_the_ia_max_evd_qlen)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_COUNT max = max_evd_qlen(ia);
        DAT_EVD_HANDLE evd;

        cr_assert_gt(max, 0);
        cr_expect_eq(dat_evd_create(ia, max + 1, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd),
                     ERR_ARG(2));
        /* The maximum itself is a valid length. */
        evd = evd_test_create(ia, max, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG);
        cr_expect_geq(evd_test_qlen(evd), max);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, create_needs_somewhere_to_return_the_handle)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);

        cr_expect_eq(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, NULL),
                     ERR_ARG(5));
        dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
}

Test(evd, create_refuses_a_cno_that_is_not_a_cno_of_the_same_ia)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL), other = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE foreign = evd_test_cno(other);
        DAT_EVD_HANDLE async, evd;

        cr_assert_eq(dat_ia_query(ia, &async, 0, NULL, 0, NULL), DAT_SUCCESS);
        /* dat_evd_create(3DAT): invalid cno_handle -> DAT_INVALID_HANDLE */
        cr_expect_eq(dat_evd_create(ia, 4, (DAT_CNO_HANDLE)0x1234567, DAT_EVD_SOFTWARE_FLAG, &evd),
                     CNO_BAD_HANDLE);
        cr_expect_eq(dat_evd_create(ia, 4, async, DAT_EVD_SOFTWARE_FLAG, &evd), CNO_BAD_HANDLE);
        /* dat_cno_wait(3DAT): a CNO gathers EVDs of one IA */
        cr_expect_eq(dat_evd_create(ia, 4, foreign, DAT_EVD_SOFTWARE_FLAG, &evd), CNO_BAD_HANDLE);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        dat_ia_close(other, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, create_attaches_the_cno_given)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);
        DAT_EVD_PARAM p;

        cr_assert_eq(dat_evd_query(evd, DAT_EVD_FIELD_CNO, &p), DAT_SUCCESS);
        cr_expect_eq(p.cno_handle, cno);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, query_refuses_an_invalid_mask_or_no_param)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_EVD_PARAM p;

        /* dat_evd_query(3DAT): invalid evd_param_mask -> DAT_INVALID_PARAMETER */
        cr_expect_eq(dat_evd_query(evd, (DAT_EVD_PARAM_MASK)0x20, &p), ERR_ARG(2));
        cr_expect_eq(dat_evd_query(evd, DAT_EVD_FIELD_ALL, NULL), ERR_ARG(3));
        cr_expect_eq(dat_evd_query(evd, 0, &p), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* Calls set twice then clear twice, checking after each call that the
 * state bits under mask are what set or clear leaves. */
static void expect_state_pair(DAT_RETURN (*set)(DAT_EVD_HANDLE), DAT_EVD_STATE set_state,
                              DAT_RETURN (*clear)(DAT_EVD_HANDLE), DAT_EVD_STATE clear_state)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        const DAT_EVD_STATE mask = set_state | clear_state;

        for (int i = 0; i < 4; i++) {
                cr_expect_eq((i < 2 ? set : clear)(evd), DAT_SUCCESS);
                cr_expect_eq(evd_test_state(evd) & mask, i < 2 ? set_state : clear_state,
                             "after call %d", i + 1);
        }
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, query_reports_enabled_and_disabled)
{
        /* dat_evd_query(3DAT): the state of the EVD (enabled/disabled);
         * dat_evd_disable(3DAT), dat_evd_enable(3DAT): no-ops when repeated */
        expect_state_pair(dat_evd_disable, DAT_EVD_STATE_DISABLED,
                          dat_evd_enable, DAT_EVD_STATE_ENABLED);
}

Test(evd, query_reports_waitable_and_unwaitable)
{
        /* dat_evd_set_unwaitable(3DAT): the state is DAT_EVD_UNWAITABLE after
         * it; dat_evd_clear_unwaitable(3DAT): DAT_EVD_WAITABLE after this */
        expect_state_pair(dat_evd_set_unwaitable, DAT_EVD_STATE_UNWAITABLE,
                          dat_evd_clear_unwaitable, DAT_EVD_STATE_WAITABLE);
}

Test(evd, query_reports_the_notification_configuration_of_its_feeds)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG);
        struct evd *e = evd_lookup(evd);
        const DAT_EVD_STATE config = DAT_EVD_STATE_CONFIG_THRESHOLD;

        cr_assert_not_null(e);
        cr_expect_eq(evd_test_state(evd) & config, DAT_EVD_STATE_CONFIG_THRESHOLD);
        evd_feed_config_get(e, DAT_EVD_STATE_CONFIG_NOTIFY);
        cr_expect_eq(evd_test_state(evd) & config, DAT_EVD_STATE_CONFIG_NOTIFY);
        evd_feed_config_get(e, DAT_EVD_STATE_CONFIG_SOLICITED);
        cr_expect_eq(evd_test_state(evd) & config, DAT_EVD_STATE_CONFIG_SOLICITED);
        evd_feed_config_put(e, DAT_EVD_STATE_CONFIG_SOLICITED);
        evd_feed_config_put(e, DAT_EVD_STATE_CONFIG_NOTIFY);
        cr_expect_eq(evd_test_state(evd) & config, DAT_EVD_STATE_CONFIG_THRESHOLD);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, resize_keeps_queued_events_in_order)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        uintptr_t next = 1;

        /* Make the ring wrap so that order is not just array order. */
        evd_test_post(evd, (void *)1);
        evd_test_post(evd, (void *)2);
        cr_expect_eq(evd_test_take(evd), (void *)1);
        cr_expect_eq(evd_test_take(evd), (void *)2);
        for (uintptr_t i = 1; i <= 4; i++)
                evd_test_post(evd, (void *)i);
        /* dat_evd_resize(3DAT): no current event is lost */
        cr_assert_eq(dat_evd_resize(evd, 64), DAT_SUCCESS);
        cr_expect_geq(evd_test_qlen(evd), 64);
        evd_test_post(evd, (void *)5);
        for (; next <= 5; next++)
                cr_expect_eq(evd_test_take(evd), (void *)next);
        /* Shrinking keeps them too. */
        for (uintptr_t i = 1; i <= 3; i++)
                evd_test_post(evd, (void *)i);
        cr_assert_eq(dat_evd_resize(evd, 3), DAT_SUCCESS);
        cr_expect_eq(evd_test_qlen(evd), 3);
        for (next = 1; next <= 3; next++)
                cr_expect_eq(evd_test_take(evd), (void *)next);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, resize_refuses_fewer_slots_than_queued_events)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 8);

        for (uintptr_t i = 1; i <= 5; i++)
                evd_test_post(evd, (void *)i);
        /* dat_evd_resize(3DAT): more entries queued than evd_min_qlen ->
         * DAT_INVALID_STATE, the EVD unchanged */
        cr_expect_eq(dat_evd_resize(evd, 4), ERR(DAT_INVALID_STATE, 0));
        cr_expect_eq(evd_test_qlen(evd), 8);
        for (uintptr_t i = 1; i <= 5; i++)
                cr_expect_eq(evd_test_take(evd), (void *)i);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, resize_refuses_a_length_out_of_range)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 8);

        /* dat_evd_resize(3DAT): invalid evd_min_qlen -> DAT_INVALID_PARAMETER */
        cr_expect_eq(dat_evd_resize(evd, 0), ERR_ARG(2));
        cr_expect_eq(dat_evd_resize(evd, -1), ERR_ARG(2));
        cr_expect_eq(dat_evd_resize(evd, max_evd_qlen(ia) + 1), ERR_ARG(2));
        cr_expect_eq(evd_test_qlen(evd), 8);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, the_async_evd_of_an_ia_can_be_resized)
{
        DAT_EVD_HANDLE async;
        DAT_IA_HANDLE ia = evd_test_open_ia(8, &async);

        /* dat_ia_open(3DAT): the consumer can resize the async EVD */
        cr_expect_eq(dat_evd_resize(async, 200), DAT_SUCCESS);
        cr_expect_geq(evd_test_qlen(async), 200);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

Test(evd, modify_cno_attaches_and_detaches)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE a = evd_test_cno(ia), b = evd_test_cno(ia);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_EVD_PARAM p;

        cr_expect_eq(dat_evd_modify_cno(evd, a), DAT_SUCCESS);
        cr_assert_eq(dat_evd_query(evd, DAT_EVD_FIELD_CNO, &p), DAT_SUCCESS);
        cr_expect_eq(p.cno_handle, a);
        cr_expect_eq(dat_evd_modify_cno(evd, b), DAT_SUCCESS);
        cr_assert_eq(dat_evd_query(evd, DAT_EVD_FIELD_CNO, &p), DAT_SUCCESS);
        cr_expect_eq(p.cno_handle, b);
        /* The old CNO is referenced by no EVD any more and can go. */
        cr_expect_eq(dat_cno_free(a), DAT_SUCCESS);
        /* dat_evd_modify_cno(3DAT): DAT_HANDLE_NULL associates no CNO */
        cr_expect_eq(dat_evd_modify_cno(evd, DAT_HANDLE_NULL), DAT_SUCCESS);
        cr_assert_eq(dat_evd_query(evd, DAT_EVD_FIELD_CNO, &p), DAT_SUCCESS);
        cr_expect_eq(p.cno_handle, DAT_HANDLE_NULL);
        cr_expect_eq(dat_cno_free(b), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, modify_cno_refuses_a_bad_cno_and_keeps_the_old_one)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL), other = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia), foreign = evd_test_cno(other);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG);
        DAT_EVD_PARAM p;

        /* dat_evd_modify_cno(3DAT): invalid DAT handle -> DAT_INVALID_HANDLE */
        cr_expect_eq(dat_evd_modify_cno(evd, (DAT_CNO_HANDLE)0x1234567), CNO_BAD_HANDLE);
        cr_expect_eq(dat_evd_modify_cno(evd, evd), CNO_BAD_HANDLE);
        cr_expect_eq(dat_evd_modify_cno(evd, foreign), CNO_BAD_HANDLE);
        cr_assert_eq(dat_evd_query(evd, DAT_EVD_FIELD_CNO, &p), DAT_SUCCESS);
        cr_expect_eq(p.cno_handle, cno);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        dat_ia_close(other, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, free_invalidates_the_handle_and_drops_queued_events)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_EVENT e;

        evd_test_post(evd, (void *)1);
        /* dat_evd_free(3DAT): all events on the queue are lost; the handle
         * fails in any later operation */
        cr_expect_eq(dat_evd_free(evd), DAT_SUCCESS);
        cr_expect_eq(dat_evd_dequeue(evd, &e), EVD_BAD_HANDLE);
        cr_expect_eq(dat_evd_free(evd), EVD_BAD_HANDLE);
        /* Nothing of it is left under the IA. */
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

Test(evd, free_refuses_while_another_ia_uses_it_as_its_async_evd)
{
        DAT_IA_HANDLE ia1 = evd_test_open_ia(8, NULL), ia2 = DAT_HANDLE_NULL;
        DAT_EVD_HANDLE evd = evd_test_create(ia1, 16, DAT_HANDLE_NULL, DAT_EVD_ASYNC_FLAG);
        DAT_EVD_HANDLE passed = evd;

        cr_assert_eq(dat_ia_open((DAT_NAME_PTR)"datd-shm", 0, &passed, &ia2), DAT_SUCCESS);
        /* dat_evd_free(3DAT): an event stream (ia2's) feeds it -> DAT_INVALID_STATE */
        cr_expect_eq(dat_evd_free(evd), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE));
        cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(evd), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia1, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

Test(evd, free_refuses_while_an_object_uses_it)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG);
        struct evd *e = evd_lookup(evd);

        /* What an EP does with its EVDs (ep.h): a users reference. */
        dat_object_lock();
        e->obj.users++;
        dat_object_unlock();
        cr_expect_eq(dat_evd_free(evd), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE));
        dat_object_lock();
        e->obj.users--;
        dat_object_unlock();
        cr_expect_eq(dat_evd_free(evd), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, free_refuses_the_async_evd_the_ia_made)
{
        DAT_EVD_HANDLE async;
        DAT_IA_HANDLE ia = evd_test_open_ia(8, &async);
        DAT_HANDLE_TYPE type;

        /* dat_evd_free(3DAT): the IA's own event stream feeds it; it goes
         * with the IA (dat_ia_close). */
        cr_expect_eq(dat_evd_free(async), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_ASYNC));
        cr_expect_eq(dat_get_handle_type(async, &type), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

Test(evd, free_refuses_while_a_thread_waits_on_it)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        struct evd_waiter w;

        evd_waiter_block(&w, evd, TEN_SECONDS, 1);
        /* dat_evd_free(3DAT): no threads may be blocked on the EVD */
        cr_expect_eq(dat_evd_free(evd), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER));
        evd_test_post(evd, (void *)1);
        cr_expect_eq(evd_waiter_join(&w), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(evd), DAT_SUCCESS);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

Test(evd, graceful_ia_close_refuses_while_an_evd_lives_and_abrupt_destroys_it)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE evd = evd_test_soft(ia, 4);
        DAT_HANDLE_TYPE type;

        evd_test_post(evd, (void *)1);
        /* dat_ia_close(3DAT): graceful close with live objects -> DAT_INVALID_STATE */
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE));
        /* dat_evd_free(3DAT): freeing an IA destroys its EVDs */
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(dat_get_handle_type(evd, &type), EVD_BAD_HANDLE);
}

/* Every EVD entry point, given handle h where the EVD goes; returns what it
 * returned, which must be DAT_INVALID_HANDLE for anything but a live EVD. */
static void expect_every_entry_point_refuses(DAT_EVD_HANDLE h, const char *what)
{
        DAT_EVENT e = evd_test_soft_event(NULL);
        DAT_EVD_PARAM p;
        DAT_COUNT n;

        cr_expect_eq(dat_evd_query(h, DAT_EVD_FIELD_ALL, &p), EVD_BAD_HANDLE, "query %s", what);
        cr_expect_eq(dat_evd_resize(h, 8), EVD_BAD_HANDLE, "resize %s", what);
        cr_expect_eq(dat_evd_post_se(h, &e), EVD_BAD_HANDLE, "post_se %s", what);
        cr_expect_eq(dat_evd_dequeue(h, &e), EVD_BAD_HANDLE, "dequeue %s", what);
        cr_expect_eq(dat_evd_wait(h, 0, 1, &e, &n), EVD_BAD_HANDLE, "wait %s", what);
        cr_expect_eq(dat_evd_enable(h), EVD_BAD_HANDLE, "enable %s", what);
        cr_expect_eq(dat_evd_disable(h), EVD_BAD_HANDLE, "disable %s", what);
        cr_expect_eq(dat_evd_set_unwaitable(h), EVD_BAD_HANDLE, "set_unwaitable %s", what);
        cr_expect_eq(dat_evd_clear_unwaitable(h), EVD_BAD_HANDLE, "clear_unwaitable %s", what);
        cr_expect_eq(dat_evd_modify_cno(h, DAT_HANDLE_NULL), EVD_BAD_HANDLE, "modify_cno %s", what);
        cr_expect_eq(dat_evd_free(h), EVD_BAD_HANDLE, "free %s", what);
        cr_expect_eq(dat_evd_create(h, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &h),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), "create on %s", what);
}

Test(evd, every_entry_point_refuses_a_bad_handle)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_CNO_HANDLE cno = evd_test_cno(ia);
        DAT_EVD_HANDLE freed = evd_test_soft(ia, 4);

        cr_assert_eq(dat_evd_free(freed), DAT_SUCCESS);
        expect_every_entry_point_refuses(freed, "a freed EVD");
        expect_every_entry_point_refuses(cno, "a CNO");
        expect_every_entry_point_refuses(DAT_EVD_ASYNC_EXISTS, "DAT_EVD_ASYNC_EXISTS");
        for (size_t i = 0; i < 3; i++)
                expect_every_entry_point_refuses(evd_test_garbage[i], "garbage");
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        /* A closed IA's handle is as bad as any. */
        cr_expect_eq(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &freed),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
}

/* ---- datd's quota ------------------------------------------------------ */

static void start_datd_two_evds(void)
{
        evd_test_start_datd_max_evds(2);
}

TestSuite(evd_quota, .init = start_datd_two_evds, .fini = evd_test_stop_datd, .timeout = 30);

Test(evd_quota, create_past_the_quota_of_datd_fails_and_free_gives_it_back)
{
        DAT_IA_HANDLE ia = evd_test_open_ia(8, NULL);
        DAT_EVD_HANDLE a = evd_test_soft(ia, 4), b = evd_test_soft(ia, 4), c;

        /* dat_evd_create(3DAT): resource limitations -> DAT_INSUFFICIENT_RESOURCES */
        cr_expect_eq(DAT_GET_TYPE(dat_evd_create(ia, 4, DAT_HANDLE_NULL,
                                                 DAT_EVD_SOFTWARE_FLAG, &c)),
                     DAT_INSUFFICIENT_RESOURCES);
        /* The freed EVD is unregistered: its place is free again. */
        cr_expect_eq(dat_evd_free(a), DAT_SUCCESS);
        c = evd_test_soft(ia, 4);
        cr_expect_eq(dat_evd_free(b), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(c), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}
