/* The local checks of the connection entry points: every refusal that
 * libdat decides before asking datd (arguments, EP states, handles). */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

#include "libdat/ep.h"
#include "tests/conn/conn_test.h"

static struct side s;

static void setup(void)
{
        conn_datd_start();
        side_open(&s);
}

static void teardown(void)
{
        side_close(&s);
        conn_datd_stop();
}

TestSuite(conn_args, .init = setup, .fini = teardown, .timeout = CONN_TEST_TIMEOUT);

/* Handle abuse on every entry point: garbage, NULL, a handle of another
 * type -> DAT_INVALID_HANDLE with the subtype of the argument's kind. */
Test(conn_args, bad_handles_are_invalid_handle)
{
        const DAT_HANDLE bad[] = { GARBAGE, DAT_HANDLE_NULL, s.pz };
        DAT_CONN_QUAL qual;
        DAT_PSP_PARAM pp;
        DAT_RSP_PARAM rp;
        DAT_CR_PARAM cp;
        DAT_HANDLE out;
        DAT_EP_HANDLE ep = side_ep(&s);

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                DAT_HANDLE h = bad[i];

                cr_expect_eq(dat_ep_connect(h, (DAT_IA_ADDRESS_PTR)&s.address, 1, 1000, 0, NULL,
                                            DAT_QOS_BEST_EFFORT, 0),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
                cr_expect_eq(dat_ep_dup_connect(h, ep, 1000, 0, NULL, DAT_QOS_BEST_EFFORT),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
                cr_expect_eq(dat_ep_dup_connect(ep, h, 1000, 0, NULL, DAT_QOS_BEST_EFFORT),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
                cr_expect_eq(dat_ep_disconnect(h, DAT_CLOSE_ABRUPT_FLAG),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
                cr_expect_eq(dat_psp_create(h, 1, s.cr_evd, DAT_PSP_CONSUMER_FLAG, &out),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
                cr_expect_eq(dat_psp_create_any(h, &qual, s.cr_evd, DAT_PSP_CONSUMER_FLAG, &out),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
                cr_expect_eq(dat_psp_query(h, DAT_PSP_FIELD_ALL, &pp),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP));
                cr_expect_eq(dat_psp_free(h), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP));
                cr_expect_eq(dat_rsp_create(h, 1, ep, s.cr_evd, &out),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
                cr_expect_eq(dat_rsp_create(s.ia, 1, h, s.cr_evd, &out),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
                cr_expect_eq(dat_rsp_query(h, DAT_RSP_FIELD_ALL, &rp),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP));
                cr_expect_eq(dat_rsp_free(h), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP));
                cr_expect_eq(dat_cr_query(h, DAT_CR_FIELD_ALL, &cp),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
                cr_expect_eq(dat_cr_accept(h, ep, 0, NULL), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
                cr_expect_eq(dat_cr_reject(h, 0, NULL), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
                cr_expect_eq(dat_cr_handoff(h, 1), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
        }
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_UNCONNECTED);
}

/* dat_psp_create(3DAT): the EVD must be one that takes connection requests
 * (DAT_EVD_CR_FLAG) -> else DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_CR. */
Test(conn_args, psp_evd_without_cr_flag_is_invalid_handle_evd_cr)
{
        DAT_PSP_HANDLE psp;
        DAT_RSP_HANDLE rsp;
        DAT_EP_HANDLE ep = side_ep(&s);

        cr_expect_eq(dat_psp_create(s.ia, 1, s.conn_evd, DAT_PSP_CONSUMER_FLAG, &psp),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR));
        cr_expect_eq(dat_psp_create(s.ia, 1, s.dto_evd, DAT_PSP_CONSUMER_FLAG, &psp),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR));
        cr_expect_eq(dat_rsp_create(s.ia, 1, ep, s.conn_evd, &rsp),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR));
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_UNCONNECTED);
}

/* dat_psp_create(3DAT): psp_flags is DAT_PSP_CONSUMER_FLAG or
 * DAT_PSP_PROVIDER_FLAG; anything else is DAT_INVALID_PARAMETER; a NULL
 * output is invalid. */
Test(conn_args, psp_bad_flags_and_outputs_are_invalid_parameter)
{
        DAT_PSP_HANDLE psp;

        cr_expect_eq(dat_psp_create(s.ia, 1, s.cr_evd, (DAT_PSP_FLAGS)7, &psp), ARG(4));
        cr_expect_eq(dat_psp_create(s.ia, 1, s.cr_evd, DAT_PSP_CONSUMER_FLAG, NULL), ARG(5));
        cr_expect_eq(dat_psp_create_any(s.ia, NULL, s.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), ARG(2));
}

/* dat_ep_connect(3DAT): private_data_size above the provider's maximum
 * (dat_ia_query: max_private_data_size) or negative -> DAT_INVALID_PARAMETER;
 * a NULL remote address -> DAT_INVALID_PARAMETER; a timeout of 0 ("Values
 * must be positive") -> DAT_INVALID_PARAMETER.  The EP stays Unconnected. */
Test(conn_args, connect_bad_arguments_are_invalid_parameter)
{
        static char pd[1024];
        DAT_EP_HANDLE ep = side_ep(&s);
        DAT_COUNT max = s.pattr.max_private_data_size;

        cr_assert_geq(max, 64, "max_private_data_size %d is below the 64 bytes asked", max);
        cr_expect_eq(dat_ep_connect(ep, NULL, 1, 1000, 0, NULL, DAT_QOS_BEST_EFFORT, 0), ARG(2));
        cr_expect_eq(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 1, 0, 0, NULL,
                                    DAT_QOS_BEST_EFFORT, 0), ARG(4));
        cr_expect_eq(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 1, 1000, max + 1, pd,
                                    DAT_QOS_BEST_EFFORT, 0), ARG(5));
        cr_expect_eq(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 1, 1000, -1, pd,
                                    DAT_QOS_BEST_EFFORT, 0), ARG(5));
        cr_expect_eq(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 1, 1000, 8, NULL,
                                    DAT_QOS_BEST_EFFORT, 0), ARG(6));
        cr_expect_eq(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 1, 1000, 0, NULL,
                                    DAT_QOS_BEST_EFFORT, (DAT_CONNECT_FLAGS)0x40), ARG(8));
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_UNCONNECTED);
}

/* dat_ep_connect(3DAT) / dat_ep_dup_connect(3DAT): "If the local Provider
 * or Transport does not support the requested qos, the operation fails and
 * DAT_MODEL_NOT_SUPPORTED is returned synchronously." */
Test(conn_args, unsupported_qos_is_model_not_supported)
{
        DAT_EP_HANDLE ep = side_ep(&s);
        DAT_EP_HANDLE ep2 = side_ep(&s);

        cr_expect_eq(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 1, 1000, 0, NULL,
                                    DAT_QOS_HIGH_THROUGHPUT, 0),
                     ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE));
        cr_expect_eq(dat_ep_dup_connect(ep, ep2, 1000, 0, NULL, DAT_QOS_LOW_LATENCY),
                     ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE));
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_UNCONNECTED);
}

/* dat_ep_connect(3DAT): only an Unconnected EP connects; any other state is
 * DAT_INVALID_STATE (with the subtype of the state). */
Test(conn_args, connect_from_another_state_is_invalid_state)
{
        static const DAT_EP_STATE states[] = {
                DAT_EP_STATE_RESERVED, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING,
                DAT_EP_STATE_CONNECTED, DAT_EP_STATE_DISCONNECT_PENDING,
                DAT_EP_STATE_DISCONNECTED, DAT_EP_STATE_COMPLETION_PENDING,
        };
        DAT_EP_HANDLE ep = side_ep(&s);

        for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
                DAT_RETURN r;

                cr_assert_eq(ep_test_force_state(ep, states[i]), DAT_SUCCESS);
                r = dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 1, 1000, 0, NULL,
                                   DAT_QOS_BEST_EFFORT, 0);
                cr_expect_eq(DAT_GET_TYPE(r), DAT_INVALID_STATE, "state %d: 0x%08x", states[i], r);
                cr_expect_eq(ep_state_of(ep), states[i]);
        }
        cr_assert_eq(ep_test_force_state(ep, DAT_EP_STATE_UNCONNECTED), DAT_SUCCESS);
}

/* dat_ep_dup_connect(3DAT): "dup_ep_handle: Connected local Endpoint" --
 * a duplicated EP that is not Connected is DAT_INVALID_STATE, and the EP
 * stays Unconnected. */
Test(conn_args, dup_connect_of_unconnected_ep_is_invalid_state)
{
        DAT_EP_HANDLE ep = side_ep(&s);
        DAT_EP_HANDLE dup = side_ep(&s);
        DAT_RETURN r = dat_ep_dup_connect(ep, dup, 1000, 0, NULL, DAT_QOS_BEST_EFFORT);

        cr_expect_eq(DAT_GET_TYPE(r), DAT_INVALID_STATE, "0x%08x", r);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_UNCONNECTED);
}

/* dat_ep_dup_connect(3DAT): timeout "Values must be positive";
 * private_data_size "Must be nonnegative" (and at most the provider's
 * maximum) -> DAT_INVALID_PARAMETER. */
Test(conn_args, dup_connect_bad_arguments_are_invalid_parameter)
{
        static char pd[1024];
        DAT_EP_HANDLE ep = side_ep(&s);
        DAT_EP_HANDLE dup = side_ep(&s);

        cr_expect_eq(dat_ep_dup_connect(ep, dup, 0, 0, NULL, DAT_QOS_BEST_EFFORT), ARG(3));
        cr_expect_eq(dat_ep_dup_connect(ep, dup, 1000, -1, pd, DAT_QOS_BEST_EFFORT), ARG(4));
        cr_expect_eq(dat_ep_dup_connect(ep, dup, 1000, s.pattr.max_private_data_size + 1, pd,
                                        DAT_QOS_BEST_EFFORT), ARG(4));
        cr_expect_eq(dat_ep_dup_connect(ep, dup, 1000, 4, NULL, DAT_QOS_BEST_EFFORT), ARG(5));
}

/* dat_ep_disconnect(3DAT): flags are DAT_CLOSE_ABRUPT_FLAG or
 * DAT_CLOSE_GRACEFUL_FLAG; an EP with no connection to end (Unconnected)
 * is DAT_INVALID_STATE; a Disconnected one has nothing to do. */
Test(conn_args, disconnect_without_connection)
{
        DAT_EP_HANDLE ep = side_ep(&s);

        cr_expect_eq(dat_ep_disconnect(ep, (DAT_CLOSE_FLAGS)5), ARG(2));
        cr_expect_eq(dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED));
        cr_assert_eq(ep_test_force_state(ep, DAT_EP_STATE_DISCONNECTED), DAT_SUCCESS);
        cr_expect_eq(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_DISCONNECTED);
        cr_expect(evd_empty(s.conn_evd));
}

/* dat_rsp_create(3DAT): the EP must be Unconnected -> else
 * DAT_INVALID_STATE, the EP unchanged. */
Test(conn_args, rsp_on_ep_not_unconnected_is_invalid_state)
{
        DAT_EP_HANDLE ep = side_ep(&s);
        DAT_RSP_HANDLE rsp;
        DAT_RETURN r;

        cr_assert_eq(ep_test_force_state(ep, DAT_EP_STATE_DISCONNECTED), DAT_SUCCESS);
        r = dat_rsp_create(s.ia, 1, ep, s.cr_evd, &rsp);
        cr_expect_eq(r, ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED), "0x%08x", r);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_DISCONNECTED);
}

/* dat_psp_create(3DAT), dat_psp_create_any(3DAT): DAT_PSP_PROVIDER_FLAG is
 * accepted (the behaviour is in test_conn_provider_ep) and reported back by
 * dat_psp_query. */
Test(conn_args, provider_flag_is_accepted)
{
        DAT_PSP_HANDLE psp;
        DAT_PSP_PARAM param;
        DAT_CONN_QUAL q;

        cr_assert_eq(dat_psp_create(s.ia, 1, s.cr_evd, DAT_PSP_PROVIDER_FLAG, &psp), DAT_SUCCESS);
        cr_assert_eq(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &param), DAT_SUCCESS);
        cr_expect_eq(param.psp_flags, DAT_PSP_PROVIDER_FLAG);
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
        cr_assert_eq(dat_psp_create_any(s.ia, &q, s.cr_evd, DAT_PSP_PROVIDER_FLAG, &psp), DAT_SUCCESS);
        cr_expect_eq(dat_psp_free(psp), DAT_SUCCESS);
}
