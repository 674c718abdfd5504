/* dat_ep_modify(3DAT), the seed: every DAT_EP_PARAM_MASK field in every
 * DAT_EP_STATE (forced with ep_test_force_state), the new values, and all
 * or nothing.
 *
 * The table below is the seed's, transcribed here on its own (not read from
 * libdat), with the decisions documented at libdat/ep_modify.c's table:
 * - "Passive Connection (Request) Pending" is DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
 * - quiescent (PZ) is Unconnected + Tentative Connection Pending, the
 *   seed's own definition; "Quiescent (unconnected)" (transport/provider
 *   attributes) is Unconnected only;
 * - DAT 2.0's UNCONFIGURED_* states allow what their configured twin allows;
 * - DAT 2.0 fields: COMM and SRQ_HANDLE never, RDMA read/write IOV before
 *   a connection, SRQ_SOFT_HW in any state (dat_ep_set_watermark(3DAT)). */
#include "config.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "libdat/ep.h"
#include "tests/ep/ep_test.h"

static struct ep_fixture f;

static void setup(void)
{
        ep_datd_start();
        ep_fixture_open(&f);
}

TestSuite(ep_modify, .init = setup, .fini = ep_datd_stop, .timeout = EP_TEST_TIMEOUT);

#define ST(s) (1u << DAT_EP_STATE_##s)

/* "Cannot be modified." */
#define NEVER 0u
/* "Unconnected, Reserved, Passive Connection Pending, and Tentative
 * Connection Pending states" (with the unconfigured twins). */
#define PRE (ST(UNCONNECTED) | ST(UNCONFIGURED_UNCONNECTED) | ST(RESERVED) | ST(UNCONFIGURED_RESERVED) | \
             ST(PASSIVE_CONNECTION_PENDING) | ST(UNCONFIGURED_PASSIVE) |                              \
             ST(TENTATIVE_CONNECTION_PENDING) | ST(UNCONFIGURED_TENTATIVE))
/* Protection Zone: "Quiescent, Unconnected, and Tentative Connection Pending". */
#define QUIESCENT (ST(UNCONNECTED) | ST(UNCONFIGURED_UNCONNECTED) | ST(TENTATIVE_CONNECTION_PENDING) | \
                   ST(UNCONFIGURED_TENTATIVE))
/* "Quiescent (unconnected) state ... DAT_EP_STATE_UNCONNECTED". */
#define UNCONN (ST(UNCONNECTED) | ST(UNCONFIGURED_UNCONNECTED))
#define ANY ((1u << N_EP_STATES) - 1)

struct field_case {
        const char *name;
        DAT_EP_PARAM_MASK field;
        unsigned states;
        size_t offset, size;    /* the member of DAT_EP_PARAM */
};

#define CASE(f, member, st) \
        { #f, DAT_EP_FIELD_##f, st, offsetof(DAT_EP_PARAM, member), sizeof(((DAT_EP_PARAM *)0)->member) }

static struct field_case cases[] = {
        CASE(IA_HANDLE, ia_handle, NEVER),
        CASE(EP_STATE, ep_state, NEVER),
        CASE(COMM, comm, NEVER),
        CASE(LOCAL_IA_ADDRESS_PTR, local_ia_address_ptr, NEVER),
        CASE(LOCAL_PORT_QUAL, local_port_qual, NEVER),
        CASE(REMOTE_IA_ADDRESS_PTR, remote_ia_address_ptr, NEVER),
        CASE(REMOTE_PORT_QUAL, remote_port_qual, NEVER),
        CASE(PZ_HANDLE, pz_handle, QUIESCENT),
        CASE(RECV_EVD_HANDLE, recv_evd_handle, PRE),
        CASE(REQUEST_EVD_HANDLE, request_evd_handle, PRE),
        CASE(CONNECT_EVD_HANDLE, connect_evd_handle, PRE),
        CASE(SRQ_HANDLE, srq_handle, NEVER),
        CASE(EP_ATTR_SERVICE_TYPE, ep_attr.service_type, PRE),
        CASE(EP_ATTR_MAX_MESSAGE_SIZE, ep_attr.max_message_size, PRE),
        CASE(EP_ATTR_MAX_RDMA_SIZE, ep_attr.max_rdma_size, PRE),
        CASE(EP_ATTR_QOS, ep_attr.qos, PRE),
        CASE(EP_ATTR_RECV_COMPLETION_FLAGS, ep_attr.recv_completion_flags, PRE),
        CASE(EP_ATTR_REQUEST_COMPLETION_FLAGS, ep_attr.request_completion_flags, PRE),
        CASE(EP_ATTR_MAX_RECV_DTOS, ep_attr.max_recv_dtos, PRE),
        CASE(EP_ATTR_MAX_REQUEST_DTOS, ep_attr.max_request_dtos, PRE),
        CASE(EP_ATTR_MAX_RECV_IOV, ep_attr.max_recv_iov, PRE),
        CASE(EP_ATTR_MAX_REQUEST_IOV, ep_attr.max_request_iov, PRE),
        CASE(EP_ATTR_MAX_RDMA_READ_IN, ep_attr.max_rdma_read_in, PRE),
        CASE(EP_ATTR_MAX_RDMA_READ_OUT, ep_attr.max_rdma_read_out, PRE),
        CASE(EP_ATTR_SRQ_SOFT_HW, ep_attr.srq_soft_hw, ANY),
        CASE(EP_ATTR_MAX_RDMA_READ_IOV, ep_attr.max_rdma_read_iov, PRE),
        CASE(EP_ATTR_MAX_RDMA_WRITE_IOV, ep_attr.max_rdma_write_iov, PRE),
        CASE(EP_ATTR_NUM_TRANSPORT_ATTR, ep_attr.ep_transport_specific_count, UNCONN),
        CASE(EP_ATTR_TRANSPORT_SPECIFIC_ATTR, ep_attr.ep_transport_specific, UNCONN),
        CASE(EP_ATTR_NUM_PROVIDER_ATTR, ep_attr.ep_provider_specific_count, UNCONN),
        CASE(EP_ATTR_PROVIDER_SPECIFIC_ATTR, ep_attr.ep_provider_specific, UNCONN),
};

static struct sockaddr_in some_address = { .sin_family = AF_INET, .sin_port = 7 };

/* A valid new value for every parameter, different from what ep_make()
 * gives wherever the parameter has another valid value. */
static DAT_EP_PARAM new_values(DAT_EVD_HANDLE request_evd2, DAT_SRQ_HANDLE srq)
{
        DAT_EP_PARAM p = {
                .ia_handle = GARBAGE,
                .ep_state = DAT_EP_STATE_CONNECTED,
                .comm = { AF_INET6, SOCK_DGRAM, 17 },
                .local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&some_address,
                .local_port_qual = 1234,
                .remote_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&some_address,
                .remote_port_qual = 4321,
                .pz_handle = f.pz2,
                .recv_evd_handle = f.recv_evd2,
                .request_evd_handle = request_evd2,
                .connect_evd_handle = f.conn_evd2,
                .srq_handle = srq,
                .ep_attr = {
                        .service_type = DAT_SERVICE_TYPE_RC,
                        .max_message_size = 4096,
                        .max_rdma_size = 8192,
                        .qos = DAT_QOS_BEST_EFFORT,
                        .recv_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG,
                        .request_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG,
                        .max_recv_dtos = 32,
                        .max_request_dtos = 16,
                        .max_recv_iov = 2,
                        .max_request_iov = 3,
                        .max_rdma_read_in = 8,
                        .max_rdma_read_out = 9,
                        .srq_soft_hw = 5,
                        .max_rdma_read_iov = 2,
                        .max_rdma_write_iov = 1,
                },
        };

        return p;
}

static bool member_equals(const DAT_EP_PARAM *a, const DAT_EP_PARAM *b, const struct field_case *c)
{
        return memcmp((const char *)a + c->offset, (const char *)b + c->offset, c->size) == 0;
}

static void force(DAT_EP_HANDLE ep, DAT_EP_STATE s)
{
        cr_assert_eq(ep_test_force_state(ep, s), DAT_SUCCESS, "forcing state %d", s);
}

Test(ep_modify, the_table_covers_every_field_of_dat_ep_param_mask)
{
        DAT_EP_PARAM_MASK all = 0;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                cr_expect_eq(all & cases[i].field, 0, "%s twice", cases[i].name);
                all |= cases[i].field;
        }
        cr_expect_eq(all, DAT_EP_FIELD_ALL);
}

ParameterizedTestParameters(ep_modify, each_field_changes_exactly_in_the_states_the_seed_allows)
{
        return cr_make_param_array(struct field_case, cases, sizeof(cases) / sizeof(cases[0]));
}

/* dat_ep_modify(3DAT): the whole state x parameter table.  "Cannot be
 * modified" -> DAT_INVALID_PARAMETER; modifiable in other states only ->
 * DAT_INVALID_STATE; else DAT_SUCCESS, and dat_ep_query shows the new
 * value exactly when the call succeeded. */
ParameterizedTest(struct field_case *c, ep_modify, each_field_changes_exactly_in_the_states_the_seed_allows)
{
        DAT_EVD_HANDLE request_evd2 = ep_make_evd(f.ia, DAT_EVD_DTO_FLAG);
        const DAT_EP_PARAM nv = new_values(request_evd2, srq_make(&f, 8, 2));

        for (DAT_EP_STATE s = 0; s < N_EP_STATES; s++) {
                DAT_EP_HANDLE ep = ep_make(&f, NULL);
                DAT_EP_PARAM before, after;
                DAT_RETURN expected, got;

                force(ep, s);
                before = ep_params(ep);
                if (c->states == NEVER)
                        expected = ARG(2);
                else if (c->states & (1u << s))
                        expected = DAT_SUCCESS;
                else
                        expected = ep_state_error(s);
                got = dat_ep_modify(ep, c->field, &nv);
                cr_expect_eq(got, expected, "%s in state %d: 0x%08x, expected 0x%08x", c->name, s, got,
                             expected);
                after = ep_params(ep);
                if (expected == DAT_SUCCESS)
                        cr_expect(member_equals(&after, &nv, c), "%s in state %d: not changed", c->name, s);
                else
                        cr_expect(member_equals(&after, &before, c), "%s in state %d: changed", c->name, s);
                /* Nothing else moved. */
                cr_expect_eq(after.ep_state, s);
                force(ep, DAT_EP_STATE_UNCONNECTED);
                cr_assert_eq(dat_ep_free(ep), DAT_SUCCESS);
        }
}

Test(ep_modify, one_bad_value_leaves_the_good_one_unchanged)
{
        /* All or nothing: "Providers modify values for ep_param_mask requested
         * parameters only", and a refused call modifies none. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        p.ep_attr.max_recv_dtos = 32;
        p.ep_attr.max_request_dtos = f.limits.max_dto_per_ep + 1;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS | DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS, &p),
                     ARG(3));
        cr_expect_eq(ep_params(ep).ep_attr.max_recv_dtos, 64);
        /* The good one alone passes. */
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), DAT_SUCCESS);
        cr_expect_eq(ep_params(ep).ep_attr.max_recv_dtos, 32);
}

Test(ep_modify, one_unmodifiable_field_leaves_the_good_one_unchanged)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        p.ep_attr.max_recv_dtos = 32;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS | DAT_EP_FIELD_IA_HANDLE, &p), ARG(2));
        cr_expect_eq(ep_params(ep).ep_attr.max_recv_dtos, 64);
}

Test(ep_modify, one_field_refused_in_this_state_leaves_the_good_one_unchanged)
{
        /* Reserved: the recv EVD may change, the PZ may not. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        force(ep, DAT_EP_STATE_RESERVED);
        p.recv_evd_handle = f.recv_evd2;
        p.pz_handle = f.pz2;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_PZ_HANDLE, &p),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED));
        cr_expect_eq(ep_params(ep).recv_evd_handle, f.recv_evd);
        cr_expect_eq(dat_evd_free(f.recv_evd2), DAT_SUCCESS, "a reference leaked");
}

Test(ep_modify, a_refused_call_takes_no_reference_on_the_new_objects)
{
        /* The new PZ is fine, the new connect EVD is not: neither is held. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        p.pz_handle = f.pz2;
        p.connect_evd_handle = f.recv_evd2;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p), ARG(3));
        cr_expect_eq(ep_params(ep).pz_handle, f.pz);
        cr_expect_eq(dat_pz_free(f.pz2), DAT_SUCCESS, "a reference leaked");
        cr_expect_eq(dat_evd_free(f.recv_evd2), DAT_SUCCESS, "a reference leaked");
}

Test(ep_modify, a_new_pz_or_evd_moves_the_references)
{
        /* dat_pz_free(3DAT)/dat_evd_free(3DAT): the EP now uses the new ones. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        p.pz_handle = f.pz2;
        p.recv_evd_handle = f.recv_evd2;
        p.connect_evd_handle = f.conn_evd2;
        cr_assert_eq(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
                                               DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p),
                     DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(f.pz), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.recv_evd), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.conn_evd), DAT_SUCCESS);
        cr_expect_eq(DAT_GET_TYPE(dat_pz_free(f.pz2)), DAT_INVALID_STATE);
        cr_expect_eq(DAT_GET_TYPE(dat_evd_free(f.recv_evd2)), DAT_INVALID_STATE);
        cr_expect_eq(DAT_GET_TYPE(dat_evd_free(f.conn_evd2)), DAT_INVALID_STATE);
        /* Setting NULL EVDs lets them go too. */
        p.recv_evd_handle = DAT_HANDLE_NULL;
        p.connect_evd_handle = DAT_HANDLE_NULL;
        cr_assert_eq(dat_ep_modify(ep, DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p),
                     DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.recv_evd2), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.conn_evd2), DAT_SUCCESS);
}

Test(ep_modify, attributes_beyond_the_ia_limits_are_invalid)
{
        /* DAT_INVALID_PARAMETER: "one of the requested Endpoint parameters or
         * attributes was invalid, not supported". */
        struct bad_attr bad[EP_BAD_ATTRS];
        size_t n = ep_bad_attrs(&f.limits, bad);
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        const DAT_EP_PARAM before = ep_params(ep);
        DAT_EP_PARAM after;

        for (size_t i = 0; i < n; i++) {
                DAT_EP_PARAM p = before;

                ep_bad_attr_set(&p.ep_attr, &bad[i]);
                cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_ALL, &p), ARG(3), "%s = %lld",
                             bad[i].name, bad[i].value);
        }
        after = ep_params(ep);
        cr_expect_eq(memcmp(&after.ep_attr, &before.ep_attr, sizeof(before.ep_attr)), 0);
}

Test(ep_modify, a_service_type_or_qos_not_offered_is_invalid)
{
        /* dat_ep_modify(3DAT) names no DAT_MODEL_NOT_SUPPORTED: "not supported"
         * is DAT_INVALID_PARAMETER. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        p.ep_attr.service_type = (DAT_SERVICE_TYPE)1;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE, &p), ARG(3));
        p.ep_attr.qos = DAT_QOS_LOW_LATENCY;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_QOS, &p), ARG(3));
}

Test(ep_modify, completion_flags_the_seed_does_not_list_are_invalid)
{
        /* "Recv posting does not support DAT_COMPLETION_SUPPRESS_FLAG or
         * DAT_COMPLETION_BARRIER_FENCE_FLAG"; Request Completion Flags "can
         * be: DAT_COMPLETION_UNSIGNALLED_FLAG or DAT_COMPLETION_EVD_THRESHOLD_FLAG". */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        p.ep_attr.recv_completion_flags = DAT_COMPLETION_SUPPRESS_FLAG;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, &p), ARG(3));
        p.ep_attr.recv_completion_flags = DAT_COMPLETION_BARRIER_FENCE_FLAG;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, &p), ARG(3));
        p.ep_attr.request_completion_flags = DAT_COMPLETION_SOLICITED_WAIT_FLAG;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS, &p), ARG(3));
        p.ep_attr.request_completion_flags = DAT_COMPLETION_EVD_THRESHOLD_FLAG;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS, &p), DAT_SUCCESS);
        p.ep_attr.recv_completion_flags = DAT_COMPLETION_SOLICITED_WAIT_FLAG;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, &p), DAT_SUCCESS);
        cr_expect_eq(ep_params(ep).ep_attr.recv_completion_flags, DAT_COMPLETION_SOLICITED_WAIT_FLAG);
}

Test(ep_modify, recv_completion_flags_cannot_change_with_recvs_posted)
{
        /* Recv Completion Flags: "... but before posting of any Recvs". */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        cr_assert_eq(ep_test_set_outstanding(ep, 1, 0), DAT_SUCCESS);
        p.ep_attr.recv_completion_flags = DAT_COMPLETION_EVD_THRESHOLD_FLAG;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, &p),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED));
        cr_assert_eq(ep_test_set_outstanding(ep, 0, 0), DAT_SUCCESS);
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, &p), DAT_SUCCESS);
}

/* ep_modify.c, "Outstanding DTOs and smaller queues": max_recv_dtos below
 * the Receives posted is an invalid parameter (the seed's
 * DAT_INVALID_PARAMETER), and changes nothing; as many as are posted is
 * fine. */
Test(ep_modify, max_recv_dtos_below_the_posted_recvs_is_invalid)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);
        const DAT_COUNT before = p.ep_attr.max_recv_dtos;
        DAT_COUNT nbufs = -1;

        cr_assert_geq(before, 4);
        for (int i = 0; i < 3; i++)
                cr_assert_eq(dat_ep_post_recv(ep, 0, NULL, (DAT_DTO_COOKIE){ .as_64 = (uint64_t)i },
                                              DAT_COMPLETION_DEFAULT_FLAG),
                             DAT_SUCCESS);
        p.ep_attr.max_recv_dtos = 2;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), ARG(3));
        cr_expect_eq(ep_params(ep).ep_attr.max_recv_dtos, before);
        cr_assert_eq(dat_ep_recv_query(ep, &nbufs, NULL), DAT_SUCCESS);
        cr_expect_eq(nbufs, 3);
        p.ep_attr.max_recv_dtos = 3;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), DAT_SUCCESS);
        cr_expect_eq(ep_params(ep).ep_attr.max_recv_dtos, 3);
}

/* The same for max_request_dtos and the requests outstanding (none can be
 * posted before a connection: the count is set as the data path keeps it). */
Test(ep_modify, max_request_dtos_below_the_outstanding_requests_is_invalid)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);
        const DAT_COUNT before = p.ep_attr.max_request_dtos;

        cr_assert_geq(before, 4);
        cr_assert_eq(ep_test_set_outstanding(ep, 0, 3), DAT_SUCCESS);
        p.ep_attr.max_request_dtos = 2;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS, &p), ARG(3));
        cr_expect_eq(ep_params(ep).ep_attr.max_request_dtos, before);
        p.ep_attr.max_request_dtos = 3;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS, &p), DAT_SUCCESS);
        cr_expect_eq(ep_params(ep).ep_attr.max_request_dtos, 3);
        cr_assert_eq(ep_test_set_outstanding(ep, 0, 0), DAT_SUCCESS);
}

/* A Receive of no segment, cookie i (asserting nothing). */
static DAT_RETURN post_empty(DAT_EP_HANDLE ep, uint64_t i)
{
        return dat_ep_post_recv(ep, 0, NULL, (DAT_DTO_COOKIE){ .as_64 = i }, DAT_COMPLETION_DEFAULT_FLAG);
}

/* Posts Receives until one is refused (at most limit + 1): how many went
 * in; the refusal in *refused. */
static DAT_COUNT post_until_refused(DAT_EP_HANDLE ep, DAT_COUNT limit, DAT_RETURN *refused)
{
        DAT_COUNT n = 0;

        *refused = DAT_SUCCESS;
        while (n <= limit && (*refused = post_empty(ep, 1000 + (uint64_t)n)) == DAT_SUCCESS)
                n++;
        return n;
}

/* ep_modify.c, "Outstanding DTOs and smaller queues": a lower
 * max_recv_dtos takes effect with Receives posted: the posts stop at it,
 * not at the old one. */
Test(ep_modify, a_lowered_max_recv_dtos_holds_the_next_posts)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);
        DAT_COUNT nbufs = -1, more;
        DAT_RETURN refused;

        cr_assert_geq(p.ep_attr.max_recv_dtos, 8);
        for (int i = 0; i < 3; i++)
                cr_assert_eq(post_empty(ep, (uint64_t)i), DAT_SUCCESS);
        p.ep_attr.max_recv_dtos = 5;
        cr_assert_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), DAT_SUCCESS);
        more = post_until_refused(ep, p.ep_attr.max_recv_dtos, &refused);
        cr_expect_eq(more, 2, "%d more posted with 3 at max_recv_dtos 5", more);
        cr_expect_eq(refused, ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP), "0x%08x", refused);
        cr_assert_eq(dat_ep_recv_query(ep, &nbufs, NULL), DAT_SUCCESS);
        cr_expect_eq(nbufs, 5);
}

/* ... and a higher one too: the posts go on past the old one. */
Test(ep_modify, a_raised_max_recv_dtos_takes_the_posts_beyond_the_old_one)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);
        const DAT_COUNT before = p.ep_attr.max_recv_dtos;
        DAT_COUNT nbufs = -1, more;
        DAT_RETURN refused;

        cr_assert_leq(before * 2, f.limits.max_dto_per_ep);
        cr_assert_eq(post_empty(ep, 0), DAT_SUCCESS);
        p.ep_attr.max_recv_dtos = before * 2;
        cr_assert_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), DAT_SUCCESS);
        more = post_until_refused(ep, p.ep_attr.max_recv_dtos, &refused);
        cr_expect_eq(more, before * 2 - 1, "max_recv_dtos %d -> %d with 1 posted: %d more (0x%08x)",
                     before, before * 2, more, refused);
        cr_expect_eq(refused, ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP), "0x%08x", refused);
        cr_assert_eq(dat_ep_recv_query(ep, &nbufs, NULL), DAT_SUCCESS);
        cr_expect_eq(nbufs, before * 2);
}

/* ep_modify.c: max_recv_iov below the segments of a Receive posted is an
 * invalid parameter and changes nothing; as many is fine, and a higher one
 * takes Receives of more segments at once. */
Test(ep_modify, max_recv_iov_below_a_posted_recvs_segments_is_invalid)
{
        static char buf[4096];
        DAT_EP_ATTR attr = ep_default_attr(&f);
        DAT_EP_HANDLE ep;
        DAT_EP_PARAM p;
        DAT_LMR_HANDLE lmr;
        DAT_LMR_CONTEXT ctx = ep_make_lmr(f.ia, f.pz, buf, sizeof(buf), DAT_MEM_PRIV_ALL_FLAG, &lmr);
        DAT_LMR_TRIPLET iov[4];

        cr_assert_geq(f.limits.max_iov_segments_per_dto, 4);
        attr.max_recv_iov = 3;
        ep = ep_make(&f, &attr);
        for (int i = 0; i < 4; i++)
                iov[i] = ep_segment(ctx, buf, (size_t)i * 1024, 1024);
        cr_assert_eq(dat_ep_post_recv(ep, 3, iov, (DAT_DTO_COOKIE){ .as_64 = 1 },
                                      DAT_COMPLETION_DEFAULT_FLAG),
                     DAT_SUCCESS);
        p = ep_params(ep);
        p.ep_attr.max_recv_iov = 2;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV, &p), ARG(3));
        cr_expect_eq(ep_params(ep).ep_attr.max_recv_iov, 3);
        p.ep_attr.max_recv_iov = 4;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV, &p), DAT_SUCCESS);
        cr_expect_eq(dat_ep_post_recv(ep, 4, iov, (DAT_DTO_COOKIE){ .as_64 = 2 },
                                      DAT_COMPLETION_DEFAULT_FLAG),
                     DAT_SUCCESS);
        p.ep_attr.max_recv_iov = 3;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV, &p), ARG(3));
}

Test(ep_modify, evds_of_the_wrong_kind_or_ia_are_invalid)
{
        DAT_EVD_HANDLE async2;
        DAT_IA_HANDLE ia2 = ep_open_ia(&async2);
        DAT_EVD_HANDLE foreign = ep_make_evd(ia2, DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG);
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep), q_after;
        const struct {
                DAT_EP_PARAM_MASK field;
                DAT_EVD_HANDLE *slot;
                DAT_EVD_HANDLE wrong_kind;
        } roles[] = {
                { DAT_EP_FIELD_RECV_EVD_HANDLE, &p.recv_evd_handle, f.conn_evd },
                { DAT_EP_FIELD_REQUEST_EVD_HANDLE, &p.request_evd_handle, f.conn_evd },
                { DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p.connect_evd_handle, f.recv_evd2 },
        };

        for (size_t i = 0; i < 3; i++) {
                const DAT_EVD_HANDLE bad[] = { roles[i].wrong_kind, foreign, GARBAGE, f.pz };

                for (size_t j = 0; j < 4; j++) {
                        DAT_EP_PARAM q = p;

                        *(DAT_EVD_HANDLE *)((char *)&q + ((char *)roles[i].slot - (char *)&p)) = bad[j];
                        cr_expect_eq(dat_ep_modify(ep, roles[i].field, &q), ARG(3), "role %zu, bad %zu", i, j);
                }
        }
        q_after = ep_params(ep);
        cr_expect_eq(memcmp(&q_after, &p, sizeof(p)), 0);
        cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(ep_modify, a_pz_of_another_ia_or_none_is_invalid)
{
        DAT_EVD_HANDLE async2;
        DAT_IA_HANDLE ia2 = ep_open_ia(&async2);
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        p.pz_handle = ep_make_pz(ia2);
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE, &p), ARG(3));
        p.pz_handle = DAT_HANDLE_NULL;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE, &p), ARG(3));
        cr_expect_eq(ep_params(ep).pz_handle, f.pz);
        cr_expect_eq(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

Test(ep_modify, an_srq_eps_pz_must_stay_the_srqs)
{
        /* dat_ia_query: srq_ep_pz_difference_supported is false. */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 2);
        DAT_EP_ATTR a = ep_default_attr(&f);
        DAT_EP_HANDLE ep;
        DAT_EP_PARAM p;

        cr_assert_eq(dat_ep_create_with_srq(f.ia, f.pz, f.recv_evd2, NULL, NULL, srq, &a, &ep), DAT_SUCCESS);
        p = ep_params(ep);
        p.pz_handle = f.pz2;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE, &p), ARG(3));
        /* Its max_recv_iov stays the SRQ's (ignored, dat_ep_create_with_srq(3DAT)). */
        p.ep_attr.max_recv_iov = 1;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV, &p), DAT_SUCCESS);
        cr_expect_eq(ep_params(ep).ep_attr.max_recv_iov, 2);
}

Test(ep_modify, streams_sharing_an_evd_must_keep_the_same_flags)
{
        /* dat_ep_create(3DAT), USAGE: the flags of streams that share an EVD match. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_HANDLE other = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        /* The other EP's recv stream on recv_evd has default flags. */
        p.ep_attr.recv_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, &p), ARG(3));
        /* Moving to an EVD of its own as well is fine. */
        p.recv_evd_handle = f.recv_evd2;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS | DAT_EP_FIELD_RECV_EVD_HANDLE,
                                   &p),
                     DAT_SUCCESS);
        /* Now the other cannot join recv_evd2 with its default flags. */
        p = ep_params(other);
        p.recv_evd_handle = f.recv_evd2;
        cr_expect_eq(dat_ep_modify(other, DAT_EP_FIELD_RECV_EVD_HANDLE, &p), ARG(3));
}

Test(ep_modify, an_ep_alone_on_its_evds_may_change_their_flags)
{
        /* Its own streams do not count against it. */
        DAT_EP_HANDLE ep;
        DAT_EP_PARAM p;

        cr_assert_eq(dat_ep_create(f.ia, f.pz, f.recv_evd2, f.recv_evd2, f.conn_evd, NULL, &ep),
                     DAT_SUCCESS);
        p = ep_params(ep);
        p.ep_attr.recv_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
        p.ep_attr.request_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS |
                                           DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS,
                                   &p),
                     DAT_SUCCESS);
        /* Half of them alone would disagree with the other half. */
        p.ep_attr.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, &p), ARG(3));
}

Test(ep_modify, a_mask_outside_dat_ep_field_all_is_invalid)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_ALL + 1, &p), ARG(2));
        cr_expect_eq(dat_ep_modify(ep, UINT64_C(1) << 40, &p), ARG(2));
}

Test(ep_modify, a_null_ep_param_is_invalid_and_an_empty_mask_changes_nothing)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM before = ep_params(ep), after;

        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, NULL), ARG(3));
        cr_expect_eq(dat_ep_modify(ep, 0, NULL), DAT_SUCCESS);
        after = ep_params(ep);
        cr_expect_eq(memcmp(&before, &after, sizeof(before)), 0);
}

Test(ep_modify, handle_abuse_is_an_invalid_ep_handle)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);
        const DAT_RETURN bad = ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);

        cr_assert_eq(dat_ep_free(ep), DAT_SUCCESS);
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), bad);
        cr_expect_eq(dat_ep_modify(DAT_HANDLE_NULL, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), bad);
        cr_expect_eq(dat_ep_modify(GARBAGE, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), bad);
        cr_expect_eq(dat_ep_modify(f.pz, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), bad);
        cr_expect_eq(dat_ep_modify((DAT_HANDLE)&p, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), bad);
}
