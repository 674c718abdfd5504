/* dat_ep_create(3DAT) and dat_ep_create_with_srq(3DAT) against a real datd:
 * defaults, every attribute against the IA's limits, the EVD roles, the
 * PZ, the SRQ, the references taken, and handle abuse. */
#include "config.h"

#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "libdat/ep.h"
#include "tests/ep/ep_test.h"

static struct ep_fixture f;

static void setup(void)
{
        ep_datd_start();
        ep_fixture_open(&f);
}

TestSuite(ep_create, .init = setup, .fini = ep_datd_stop, .timeout = EP_TEST_TIMEOUT);

static DAT_RETURN create(const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep)
{
        return dat_ep_create(f.ia, f.pz, f.recv_evd, f.request_evd, f.conn_evd, attr, ep);
}

/* Attributes that pass: the defaults the provider picks. */
static DAT_EP_ATTR good_attr(void)
{
        return ep_default_attr(&f);
}

Test(ep_create, is_created_unconnected_with_the_handles_it_was_given)
{
        /* dat_ep_create(3DAT): "The Endpoint is created in the Unconnected state." */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);
        DAT_HANDLE_TYPE type;

        cr_assert_eq(dat_get_handle_type(ep, &type), DAT_SUCCESS);
        cr_expect_eq(type, DAT_HANDLE_TYPE_EP);
        cr_expect_eq(p.ep_state, DAT_EP_STATE_UNCONNECTED);
        cr_expect_eq(p.ia_handle, f.ia);
        cr_expect_eq(p.pz_handle, f.pz);
        cr_expect_eq(p.recv_evd_handle, f.recv_evd);
        cr_expect_eq(p.request_evd_handle, f.request_evd);
        cr_expect_eq(p.connect_evd_handle, f.conn_evd);
        cr_expect_eq(p.srq_handle, DAT_HANDLE_NULL);
}

Test(ep_create, null_attributes_give_the_documented_provider_defaults)
{
        /* dat_ep_create(3DAT): "If the Consumer specifies NULL, the Provider
         * fills it with its default Endpoint attributes" (ep.c, ep_attr.c). */
        DAT_EP_ATTR a = ep_params(ep_make(&f, NULL)).ep_attr;

        cr_expect_eq(a.service_type, DAT_SERVICE_TYPE_RC);
        cr_expect_eq(a.max_message_size, f.limits.max_message_size);
        cr_expect_eq(a.max_rdma_size, f.limits.max_rdma_size);
        cr_expect_eq(a.qos, DAT_QOS_BEST_EFFORT);
        cr_expect_eq(a.recv_completion_flags, DAT_COMPLETION_DEFAULT_FLAG);
        cr_expect_eq(a.request_completion_flags, DAT_COMPLETION_DEFAULT_FLAG);
        cr_expect_eq(a.max_recv_dtos, 64);
        cr_expect_eq(a.max_request_dtos, 64);
        cr_expect_eq(a.max_recv_iov, 4);
        cr_expect_eq(a.max_request_iov, 4);
        cr_expect_eq(a.max_rdma_read_in, 0);
        cr_expect_eq(a.max_rdma_read_out, 0);
        cr_expect_eq(a.srq_soft_hw, DAT_HW_DEFAULT);
        cr_expect_eq(a.max_rdma_read_iov, 4);
        cr_expect_eq(a.max_rdma_write_iov, 4);
        cr_expect_eq(a.ep_transport_specific_count, 0);
        cr_expect_eq(a.ep_provider_specific_count, 0);
}

Test(ep_create, consumer_attributes_are_kept_exactly)
{
        DAT_EP_ATTR a = good_attr();
        DAT_EP_ATTR got;

        a.max_message_size = 1000;
        a.max_rdma_size = 2000;
        a.max_recv_dtos = 7;
        a.max_request_dtos = 9;
        a.max_recv_iov = 1;
        a.max_request_iov = 2;
        a.max_rdma_read_in = 3;
        a.max_rdma_read_out = 5;
        a.srq_soft_hw = 11;
        a.max_rdma_read_iov = 3;
        a.max_rdma_write_iov = 1;
        got = ep_params(ep_make(&f, &a)).ep_attr;
        cr_expect_eq(memcmp(&got, &a, sizeof(a)), 0);
}

Test(ep_create, every_attribute_beyond_the_ia_limits_is_an_invalid_arg6)
{
        /* dat_ep_create(3DAT): DAT_INVALID_PARAMETER "One of the requested EP
         * parameters or attributes was invalid"; the limits are dat_ia_query's. */
        const DAT_IA_ATTR *l = &f.limits;
        struct bad_attr bad[EP_BAD_ATTRS];
        size_t n = ep_bad_attrs(l, bad);
        const DAT_EP_ATTR good = good_attr();

        for (size_t i = 0; i < n; i++) {
                DAT_EP_ATTR a = good;
                DAT_EP_HANDLE ep = DAT_HANDLE_NULL;

                ep_bad_attr_set(&a, &bad[i]);
                cr_expect_eq(create(&a, &ep), ARG(6), "%s = %lld", bad[i].name, (long long)bad[i].value);
        }
        /* Exactly at the limits is fine. */
        {
                DAT_EP_ATTR a = good;
                DAT_EP_HANDLE ep;

                a.max_recv_dtos = a.max_request_dtos = l->max_dto_per_ep;
                a.max_recv_iov = a.max_request_iov = l->max_iov_segments_per_dto;
                a.max_rdma_read_in = l->max_rdma_read_per_ep_in;
                a.max_rdma_read_out = l->max_rdma_read_per_ep_out;
                cr_expect_eq(create(&a, &ep), DAT_SUCCESS);
        }
}

Test(ep_create, a_service_type_or_qos_not_offered_is_model_not_supported)
{
        /* dat_ep_create(3DAT): DAT_MODEL_NOT_SUPPORTED "The requested Provider
         * Model was not supported" (dat_ia_query: dat_qos_supported is best effort). */
        DAT_EP_ATTR a = good_attr();
        DAT_EP_HANDLE ep;

        a.service_type = (DAT_SERVICE_TYPE)1;
        cr_expect_eq(create(&a, &ep), ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE));
        a = good_attr();
        a.qos = DAT_QOS_HIGH_THROUGHPUT;
        cr_expect_eq(create(&a, &ep), ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE));
        /* A QoS with bits DAT does not define is no model at all. */
        a.qos = (DAT_QOS)0x100;
        cr_expect_eq(create(&a, &ep), ARG(6));
}

Test(ep_create, completion_flags_outside_the_seed_lists_are_invalid)
{
        /* dat_ep_modify(3DAT): "Recv posting does not support
         * DAT_COMPLETION_SUPPRESS_FLAG or DAT_COMPLETION_BARRIER_FENCE_FLAG";
         * Request Completion Flags "can be: DAT_COMPLETION_UNSIGNALLED_FLAG or
         * DAT_COMPLETION_EVD_THRESHOLD_FLAG". */
        const DAT_COMPLETION_FLAGS bad_recv[] = {
                DAT_COMPLETION_SUPPRESS_FLAG, DAT_COMPLETION_BARRIER_FENCE_FLAG,
                DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG, (DAT_COMPLETION_FLAGS)0x80,
        };
        const DAT_COMPLETION_FLAGS bad_request[] = {
                DAT_COMPLETION_SUPPRESS_FLAG, DAT_COMPLETION_SOLICITED_WAIT_FLAG,
                DAT_COMPLETION_BARRIER_FENCE_FLAG, (DAT_COMPLETION_FLAGS)0x80,
        };
        const DAT_COMPLETION_FLAGS good_recv[] = {
                DAT_COMPLETION_DEFAULT_FLAG, DAT_COMPLETION_UNSIGNALLED_FLAG,
                DAT_COMPLETION_SOLICITED_WAIT_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG,
        };
        DAT_EP_ATTR a;
        DAT_EP_HANDLE ep;

        for (size_t i = 0; i < 4; i++) {
                a = good_attr();
                a.recv_completion_flags = bad_recv[i];
                cr_expect_eq(create(&a, &ep), ARG(6), "recv flags 0x%x", bad_recv[i]);
                a = good_attr();
                a.request_completion_flags = bad_request[i];
                cr_expect_eq(create(&a, &ep), ARG(6), "request flags 0x%x", bad_request[i]);
                a = good_attr();
                a.recv_completion_flags = good_recv[i];
                cr_expect_eq(create(&a, &ep), DAT_SUCCESS, "recv flags 0x%x", good_recv[i]);
                cr_expect_eq(dat_ep_free(ep), DAT_SUCCESS);
        }
}

Test(ep_create, evds_must_be_evds_of_the_ia_with_the_stream_of_their_role)
{
        /* dat_ep_create(3DAT): recv and request EVDs take DTO completions,
         * the connect EVD connection events: DAT_INVALID_HANDLE with the
         * subtype of the role. */
        DAT_EVD_HANDLE other_async, cr_evd = ep_make_evd(f.ia, DAT_EVD_CR_FLAG);
        DAT_IA_HANDLE ia2 = ep_open_ia(&other_async);
        DAT_EVD_HANDLE foreign = ep_make_evd(ia2, DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG);
        const DAT_RETURN recv = ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
        const DAT_RETURN request = ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
        const DAT_RETURN conn = ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
        DAT_EP_HANDLE ep;

        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.conn_evd, f.request_evd, f.conn_evd, NULL, &ep), recv);
        cr_expect_eq(dat_ep_create(f.ia, f.pz, cr_evd, f.request_evd, f.conn_evd, NULL, &ep), recv);
        cr_expect_eq(dat_ep_create(f.ia, f.pz, foreign, f.request_evd, f.conn_evd, NULL, &ep), recv);
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd, f.conn_evd, f.conn_evd, NULL, &ep), request);
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd, foreign, f.conn_evd, NULL, &ep), request);
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd, f.request_evd, f.recv_evd, NULL, &ep), conn);
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd, f.request_evd, foreign, NULL, &ep), conn);
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd, f.request_evd, GARBAGE, NULL, &ep), conn);
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.pz, f.request_evd, f.conn_evd, NULL, &ep), recv);
        cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(ep_create, null_evds_are_accepted)
{
        /* dat_ep_create(3DAT): "DAT_HANDLE_NULL specifies that the Consumer is
         * not interested in events" for each of the three. */
        DAT_EP_HANDLE ep;
        DAT_EP_PARAM p;

        cr_assert_eq(dat_ep_create(f.ia, f.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, NULL, &ep),
                     DAT_SUCCESS);
        p = ep_params(ep);
        cr_expect_eq(p.recv_evd_handle, DAT_HANDLE_NULL);
        cr_expect_eq(p.request_evd_handle, DAT_HANDLE_NULL);
        cr_expect_eq(p.connect_evd_handle, DAT_HANDLE_NULL);
}

Test(ep_create, the_pz_must_be_a_pz_of_the_ia)
{
        /* dat_ep_create(3DAT): DAT_INVALID_HANDLE; the man page offers
         * DAT_HANDLE_NULL for the EVDs only. */
        DAT_EVD_HANDLE async2;
        DAT_IA_HANDLE ia2 = ep_open_ia(&async2);
        DAT_PZ_HANDLE foreign = ep_make_pz(ia2);
        const DAT_RETURN bad = ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        DAT_EP_HANDLE ep;

        cr_expect_eq(dat_ep_create(f.ia, DAT_HANDLE_NULL, f.recv_evd, f.request_evd, f.conn_evd, NULL, &ep), bad);
        cr_expect_eq(dat_ep_create(f.ia, foreign, f.recv_evd, f.request_evd, f.conn_evd, NULL, &ep), bad);
        cr_expect_eq(dat_ep_create(f.ia, f.recv_evd, f.recv_evd, f.request_evd, f.conn_evd, NULL, &ep), bad);
        cr_expect_eq(dat_ep_create(f.ia, GARBAGE, f.recv_evd, f.request_evd, f.conn_evd, NULL, &ep), bad);
        cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(ep_create, the_ep_holds_its_pz_and_evds_until_freed)
{
        /* dat_pz_free(3DAT), dat_evd_free(3DAT): in use by an EP -> DAT_INVALID_STATE. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);

        cr_expect_eq(DAT_GET_TYPE(dat_pz_free(f.pz)), DAT_INVALID_STATE);
        cr_expect_eq(DAT_GET_TYPE(dat_evd_free(f.recv_evd)), DAT_INVALID_STATE);
        cr_expect_eq(DAT_GET_TYPE(dat_evd_free(f.request_evd)), DAT_INVALID_STATE);
        cr_expect_eq(DAT_GET_TYPE(dat_evd_free(f.conn_evd)), DAT_INVALID_STATE);
        cr_assert_eq(dat_ep_free(ep), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(f.pz), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.recv_evd), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.request_evd), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.conn_evd), DAT_SUCCESS);
}

Test(ep_create, streams_sharing_an_evd_must_have_the_same_completion_flags)
{
        /* dat_ep_create(3DAT), USAGE: "The Consumer cannot specify a
         * request_evd_handle (recv_evd_handle) with Request Completion Flags
         * (Recv Completion Flags) that do not match the other Endpoint
         * Completion Flags for the DTO/RMR completion streams that use the
         * same EVD." */
        DAT_EP_ATTR a = good_attr();
        DAT_EP_HANDLE ep;

        a.recv_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
        /* Within one EP: recv and request on one EVD. */
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd, f.recv_evd, f.conn_evd, &a, &ep), ARG(6));
        a.request_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd, f.recv_evd, f.conn_evd, &a, &ep), DAT_SUCCESS);
        /* Across EPs: another EP's default-flag stream on the same EVD. */
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd, DAT_HANDLE_NULL, f.conn_evd, NULL, &ep), ARG(6));
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd2, DAT_HANDLE_NULL, f.conn_evd, NULL, &ep),
                     DAT_SUCCESS);
}

Test(ep_create, an_evd_takes_other_flags_once_its_streams_are_gone)
{
        /* The flags are those of the streams on the EVD now: freeing the
         * EP that set them frees the EVD for others. */
        DAT_EP_ATTR a = good_attr();
        DAT_EP_HANDLE first, second;

        cr_assert_eq(dat_ep_create(f.ia, f.pz, f.recv_evd2, f.recv_evd2, f.conn_evd, NULL, &first),
                     DAT_SUCCESS);
        a.recv_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd2, DAT_HANDLE_NULL, f.conn_evd, &a, &second),
                     ARG(6));
        cr_assert_eq(dat_ep_free(first), DAT_SUCCESS);
        cr_expect_eq(dat_ep_create(f.ia, f.pz, f.recv_evd2, DAT_HANDLE_NULL, f.conn_evd, &a, &second),
                     DAT_SUCCESS);
        /* And the new flags now hold against a default-flag stream. */
        cr_expect_eq(dat_ep_create(f.ia, f.pz, DAT_HANDLE_NULL, f.recv_evd2, f.conn_evd, NULL, &first),
                     ARG(6));
}

Test(ep_create, signalling_flags_need_an_evd_of_dto_streams_only)
{
        /* dat_ep_create(3DAT), USAGE: "If request_evd_handle (recv_evd_handle)
         * is used for an EVD that is fed by any event stream other than DTO
         * or RMR completion event streams, only DAT_COMPLETION_THRESHOLD is
         * valid". */
        DAT_EVD_HANDLE mixed = ep_make_evd(f.ia, DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG);
        DAT_EP_ATTR a = good_attr();
        DAT_EP_HANDLE ep;

        a.recv_completion_flags = DAT_COMPLETION_SOLICITED_WAIT_FLAG;
        cr_expect_eq(dat_ep_create(f.ia, f.pz, mixed, DAT_HANDLE_NULL, DAT_HANDLE_NULL, &a, &ep), ARG(6));
        a.recv_completion_flags = DAT_COMPLETION_EVD_THRESHOLD_FLAG;
        cr_expect_eq(dat_ep_create(f.ia, f.pz, mixed, DAT_HANDLE_NULL, DAT_HANDLE_NULL, &a, &ep), DAT_SUCCESS);
        a = good_attr();
        a.request_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
        cr_expect_eq(dat_ep_create(f.ia, f.pz, DAT_HANDLE_NULL, mixed, DAT_HANDLE_NULL, &a, &ep), ARG(6));
}

/* The configuration field of DAT_EVD_STATE (NOTIFY, SOLICITED, THRESHOLD). */
#define CONFIG_BITS DAT_EVD_STATE_CONFIG_THRESHOLD

Test(ep_create, unsignalled_streams_configure_their_evd)
{
        /* dat_evd_query(3DAT): an EVD fed by unsignalled completions reports
         * DAT_EVD_STATE_CONFIG_NOTIFY, until the EP is gone. */
        DAT_EP_ATTR a = good_attr();
        DAT_EVD_PARAM ep_evd;
        DAT_EP_HANDLE ep;

        a.request_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
        cr_assert_eq(dat_ep_create(f.ia, f.pz, f.recv_evd, f.request_evd, f.conn_evd, &a, &ep), DAT_SUCCESS);
        cr_assert_eq(dat_evd_query(f.request_evd, DAT_EVD_FIELD_ALL, &ep_evd), DAT_SUCCESS);
        cr_expect_eq(ep_evd.evd_state & CONFIG_BITS, DAT_EVD_STATE_CONFIG_NOTIFY);
        cr_assert_eq(dat_ep_free(ep), DAT_SUCCESS);
        cr_assert_eq(dat_evd_query(f.request_evd, DAT_EVD_FIELD_ALL, &ep_evd), DAT_SUCCESS);
        cr_expect_neq(ep_evd.evd_state & CONFIG_BITS, DAT_EVD_STATE_CONFIG_NOTIFY);
}

Test(ep_create, a_null_ep_handle_pointer_is_an_invalid_argument)
{
        /* The last argument: 7th of dat_ep_create, 8th of dat_ep_create_with_srq. */
        cr_expect_eq(create(NULL, NULL), ARG(7));
        cr_expect_eq(dat_ep_create_with_srq(f.ia, f.pz, f.recv_evd, f.request_evd, f.conn_evd,
                                            srq_make(&f, 8, 2), NULL, NULL), ARG(8));
}

Test(ep_create, handle_abuse_is_an_invalid_ia_handle)
{
        DAT_EP_HANDLE ep;
        const DAT_HANDLE bad[] = { DAT_HANDLE_NULL, GARBAGE, f.pz, (DAT_HANDLE)&ep };

        for (size_t i = 0; i < 4; i++) {
                cr_expect_eq(dat_ep_create(bad[i], f.pz, f.recv_evd, f.request_evd, f.conn_evd, NULL, &ep),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
                cr_expect_eq(dat_ep_create_with_srq(bad[i], f.pz, f.recv_evd, f.request_evd, f.conn_evd,
                                                    DAT_HANDLE_NULL, NULL, &ep),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        }
}

Test(ep_create, a_closed_ia_is_an_invalid_handle)
{
        DAT_EVD_HANDLE async2;
        DAT_IA_HANDLE ia2 = ep_open_ia(&async2);
        DAT_EP_HANDLE ep;

        cr_assert_eq(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(dat_ep_create(ia2, f.pz, NULL, NULL, NULL, NULL, &ep),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
}

/* ---- dat_ep_create_with_srq -------------------------------------------- */

static DAT_RETURN create_srq_ep(DAT_PZ_HANDLE pz, DAT_SRQ_HANDLE srq, const DAT_EP_ATTR *a,
                                DAT_EP_HANDLE *ep)
{
        return dat_ep_create_with_srq(f.ia, pz, f.recv_evd, f.request_evd, f.conn_evd, srq, a, ep);
}

Test(ep_create, with_srq_attributes_cannot_be_null)
{
        /* dat_ep_create_with_srq(3DAT): ep_attributes "Cannot be NULL". */
        DAT_EP_HANDLE ep;

        cr_expect_eq(create_srq_ep(f.pz, srq_make(&f, 8, 2), NULL, &ep), ARG(7));
}

Test(ep_create, with_srq_the_pz_must_be_the_srqs)
{
        /* dat_ep_create_with_srq(3DAT): DAT_INVALID_PARAMETER, "For example,
         * pz_handle specified does not match the one for SRQ" (dat_ia_query:
         * srq_ep_pz_difference_supported is false). */
        DAT_EP_ATTR a = good_attr();
        DAT_EP_HANDLE ep;

        cr_expect_eq(create_srq_ep(f.pz2, srq_make(&f, 8, 2), &a, &ep), ARG(2));
}

Test(ep_create, with_srq_the_srq_must_be_an_srq_of_the_ia)
{
        DAT_EVD_HANDLE async2;
        DAT_IA_HANDLE ia2 = ep_open_ia(&async2);
        DAT_PZ_HANDLE pz2 = ep_make_pz(ia2);
        DAT_SRQ_ATTR sa = { 8, 2, 0 };
        DAT_SRQ_HANDLE foreign;
        DAT_EP_ATTR a = good_attr();
        DAT_EP_HANDLE ep;
        const DAT_RETURN bad = ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);

        cr_assert_eq(dat_srq_create(ia2, pz2, &sa, &foreign), DAT_SUCCESS);
        cr_expect_eq(create_srq_ep(f.pz, foreign, &a, &ep), bad);
        cr_expect_eq(create_srq_ep(f.pz, DAT_HANDLE_NULL, &a, &ep), bad);
        cr_expect_eq(create_srq_ep(f.pz, GARBAGE, &a, &ep), bad);
        cr_expect_eq(create_srq_ep(f.pz, f.pz, &a, &ep), bad);
        cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(ep_create, with_srq_max_recv_iov_is_ignored)
{
        /* dat_ep_create_with_srq(3DAT): "For all other attributes, except
         * max_recv_iov that is ignored, the created Endpoint has the exact
         * values requested"; the Recv buffers are the SRQ's. */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 3);
        DAT_EP_ATTR a = good_attr();
        DAT_EP_HANDLE ep;
        DAT_EP_PARAM p;

        a.max_recv_iov = f.limits.max_iov_segments_per_dto + 100;
        a.max_recv_dtos = 5;
        cr_assert_eq(create_srq_ep(f.pz, srq, &a, &ep), DAT_SUCCESS);
        p = ep_params(ep);
        cr_expect_eq(p.srq_handle, srq);
        cr_expect_eq(p.ep_attr.max_recv_iov, 3);
        cr_expect_eq(p.ep_attr.max_recv_dtos, 5);
        cr_expect_eq(p.ep_state, DAT_EP_STATE_UNCONNECTED);
        /* The other limits still hold. */
        a.max_request_iov = f.limits.max_iov_segments_per_dto + 1;
        cr_expect_eq(create_srq_ep(f.pz, srq, &a, &ep), ARG(7));
}

Test(ep_create, with_srq_the_srq_cannot_be_freed_while_the_ep_uses_it)
{
        /* dat_srq_free(3DAT): "The SRQ cannot be destroyed if it is in use by an EP." */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 2);
        DAT_EP_ATTR a = good_attr();
        DAT_EP_HANDLE ep;

        cr_assert_eq(create_srq_ep(f.pz, srq, &a, &ep), DAT_SUCCESS);
        cr_expect_eq(dat_srq_free(srq), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE));
        cr_assert_eq(dat_ep_free(ep), DAT_SUCCESS);
        cr_expect_eq(dat_srq_free(srq), DAT_SUCCESS);
}
