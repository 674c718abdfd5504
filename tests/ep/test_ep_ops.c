/* dat_ep_query, dat_ep_get_status, dat_ep_recv_query, dat_ep_set_watermark,
 * dat_ep_reset and dat_ep_free (3DAT) against a real datd; the states come
 * from ep_test_force_state (connections are a later issue). */
#include "config.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdat/ep.h"
#include "libdat/srq.h"
#include "tests/ep/ep_test.h"

static struct ep_fixture f;

static void setup(void)
{
        ep_datd_start();
        ep_fixture_open(&f);
}

TestSuite(ep_ops, .init = setup, .fini = ep_datd_stop, .timeout = EP_TEST_TIMEOUT);


static void force(DAT_EP_HANDLE ep, DAT_EP_STATE s)
{
        cr_assert_eq(ep_test_force_state(ep, s), DAT_SUCCESS, "forcing state %d", s);
}

/* ---- dat_ep_query ------------------------------------------------------- */

Test(ep_ops, query_fills_every_parameter)
{
        /* dat_ep_query(3DAT): local address = the IA's; remote address and
         * ports have no value until a connection (NULL, 0). */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p;
        DAT_IA_ATTR ia;

        memset(&p, 0xa5, sizeof(p));
        cr_assert_eq(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p), DAT_SUCCESS);
        cr_assert_eq(dat_ia_query(f.ia, NULL, DAT_IA_FIELD_ALL, &ia, 0, NULL), DAT_SUCCESS);
        cr_expect_eq(p.ia_handle, f.ia);
        cr_expect_eq(p.ep_state, DAT_EP_STATE_UNCONNECTED);
        cr_expect_eq(p.comm.domain, ia.ia_address_ptr->sa_family);
        cr_assert_not_null(p.local_ia_address_ptr);
        cr_expect_eq(memcmp(p.local_ia_address_ptr, ia.ia_address_ptr, sizeof(struct sockaddr)), 0);
        cr_expect_eq(p.local_port_qual, 0);
        cr_expect_null(p.remote_ia_address_ptr);
        cr_expect_eq(p.remote_port_qual, 0);
        cr_expect_eq(p.pz_handle, f.pz);
        cr_expect_eq(p.recv_evd_handle, f.recv_evd);
        cr_expect_eq(p.request_evd_handle, f.request_evd);
        cr_expect_eq(p.connect_evd_handle, f.conn_evd);
        cr_expect_eq(p.srq_handle, DAT_HANDLE_NULL);
        cr_expect_eq(p.ep_attr.max_recv_dtos, 64);
        cr_expect_null(p.ep_attr.ep_transport_specific);
        cr_expect_null(p.ep_attr.ep_provider_specific);
}

Test(ep_ops, query_reports_the_state)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);

        for (DAT_EP_STATE s = 0; s < N_EP_STATES; s++) {
                force(ep, s);
                cr_expect_eq(ep_params(ep).ep_state, s);
        }
}

Test(ep_ops, query_refuses_an_invalid_mask_or_a_null_param)
{
        /* dat_ep_query(3DAT): DAT_INVALID_PARAMETER "The ep_param_mask parameter is invalid". */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p;

        cr_expect_eq(dat_ep_query(ep, DAT_EP_FIELD_ALL + 1, &p), ARG(2));
        cr_expect_eq(dat_ep_query(ep, DAT_EP_FIELD_EP_STATE, NULL), ARG(3));
        cr_expect_eq(dat_ep_query(ep, 0, NULL), DAT_SUCCESS);
}

/* ---- dat_ep_get_status, dat_ep_recv_query ------------------------------ */

Test(ep_ops, get_status_reports_the_state_and_idle_directions)
{
        /* dat_ep_get_status(3DAT): recv_idle / request_idle are DAT_TRUE when
         * nothing is outstanding in that direction. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_STATE s;
        DAT_BOOLEAN recv, request;

        cr_assert_eq(dat_ep_get_status(ep, &s, &recv, &request), DAT_SUCCESS);
        cr_expect_eq(s, DAT_EP_STATE_UNCONNECTED);
        cr_expect_eq(recv, DAT_TRUE);
        cr_expect_eq(request, DAT_TRUE);
        force(ep, DAT_EP_STATE_CONNECTED);
        cr_assert_eq(ep_test_set_outstanding(ep, 2, 0), DAT_SUCCESS);
        cr_assert_eq(dat_ep_get_status(ep, &s, &recv, &request), DAT_SUCCESS);
        cr_expect_eq(s, DAT_EP_STATE_CONNECTED);
        cr_expect_eq(recv, DAT_FALSE);
        cr_expect_eq(request, DAT_TRUE);
        cr_assert_eq(ep_test_set_outstanding(ep, 0, 1), DAT_SUCCESS);
        cr_assert_eq(dat_ep_get_status(ep, NULL, &recv, &request), DAT_SUCCESS);
        cr_expect_eq(recv, DAT_TRUE);
        cr_expect_eq(request, DAT_FALSE);
}

Test(ep_ops, recv_query_counts_the_buffers_at_the_ep)
{
        /* dat_ep_recv_query(3DAT): nbufs_allocated, "buffers allocated to
         * ep_handle but not yet completed"; "never report n buffers in a span
         * that is less than n"; either pointer may be NULL. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_COUNT n = -1, span = -1;

        cr_assert_eq(dat_ep_recv_query(ep, &n, &span), DAT_SUCCESS);
        cr_expect_eq(n, 0);
        cr_expect_eq(span, 0);
        cr_assert_eq(ep_test_set_outstanding(ep, 3, 0), DAT_SUCCESS);
        cr_assert_eq(dat_ep_recv_query(ep, &n, NULL), DAT_SUCCESS);
        cr_expect_eq(n, 3);
        cr_assert_eq(dat_ep_recv_query(ep, NULL, &span), DAT_SUCCESS);
        cr_expect_geq(span, 3);
}

/* ---- dat_ep_set_watermark ---------------------------------------------- */

Test(ep_ops, set_watermark_refuses_negative_values_but_infinite)
{
        DAT_EP_HANDLE ep = ep_make(&f, NULL);

        cr_expect_eq(dat_ep_set_watermark(ep, -2, 4), ARG(2));
        cr_expect_eq(dat_ep_set_watermark(ep, 4, -2), ARG(3));
        cr_expect_eq(dat_ep_set_watermark(ep, DAT_WATERMARK_INFINITE, DAT_WATERMARK_INFINITE), DAT_SUCCESS);
        cr_expect_eq(dat_ep_set_watermark(ep, 3, 9), DAT_SUCCESS);
        cr_expect_eq(ep_params(ep).ep_attr.srq_soft_hw, 3);
}

Test(ep_ops, set_watermark_works_in_every_state)
{
        /* dat_ep_set_watermark(3DAT): "The operation is supported for all states of Endpoint." */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);

        for (DAT_EP_STATE s = 0; s < N_EP_STATES; s++) {
                force(ep, s);
                cr_expect_eq(dat_ep_set_watermark(ep, (DAT_COUNT)s, DAT_WATERMARK_INFINITE), DAT_SUCCESS);
        }
}

static unsigned soft_events(DAT_EP_HANDLE ep)
{
        unsigned soft, hard;

        ep_watermark_events(ep_lookup(ep), &soft, &hard);
        return soft;
}

static unsigned hard_events(DAT_EP_HANDLE ep)
{
        unsigned soft, hard;

        ep_watermark_events(ep_lookup(ep), &soft, &hard);
        return hard;
}

Test(ep_ops, the_soft_watermark_fires_once_per_setting_on_the_async_evd)
{
        /* dat_ep_set_watermark(3DAT): "An asynchronous event will be generated
         * for IA async_evd when the number of Recv buffers at EP exceeds the
         * soft high watermark for the first time ... generated only once per
         * setting." */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EVENT e;

        cr_assert_eq(dat_ep_set_watermark(ep, 2, DAT_WATERMARK_INFINITE), DAT_SUCCESS);
        cr_assert_eq(ep_test_set_outstanding(ep, 2, 0), DAT_SUCCESS);
        cr_expect_eq(soft_events(ep), 0);
        cr_assert_eq(ep_test_set_outstanding(ep, 3, 0), DAT_SUCCESS);
        cr_expect_eq(soft_events(ep), 1);
        cr_assert(evd_next(f.async_evd, &e), "no event on the async EVD");
        cr_expect_eq(e.event_number, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR);
        cr_expect_eq(e.event_data.asynch_error_event_data.dat_handle, ep);
        cr_expect_eq(e.event_data.asynch_error_event_data.reason, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT);
        cr_assert_eq(ep_test_set_outstanding(ep, 4, 0), DAT_SUCCESS);
        cr_expect_eq(soft_events(ep), 1);
        cr_expect_not(evd_next(f.async_evd, &e));
        /* Setting it again arms it again; already above: fires at once. */
        cr_assert_eq(dat_ep_set_watermark(ep, 2, DAT_WATERMARK_INFINITE), DAT_SUCCESS);
        cr_expect_eq(soft_events(ep), 2);
}

Test(ep_ops, the_hard_watermark_stays_armed_without_a_connection)
{
        /* libdat/ep.c: exceeding the hard high watermark breaks the
         * connection (tests/dto/test_dto_watermark.c); an EP without one
         * has nothing to break, and the watermark waits, armed, for the
         * first check on a connection. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EVENT e;

        cr_assert_eq(dat_ep_set_watermark(ep, DAT_WATERMARK_INFINITE, 1), DAT_SUCCESS);
        cr_assert_eq(ep_test_set_outstanding(ep, 2, 0), DAT_SUCCESS);
        cr_assert_eq(ep_test_set_outstanding(ep, 3, 0), DAT_SUCCESS);
        cr_expect_eq(hard_events(ep), 0);
        cr_expect_eq(soft_events(ep), 0);
        cr_expect(ep_lookup(ep)->hard_hw_armed);
        cr_expect_eq(ep_params(ep).ep_state, DAT_EP_STATE_UNCONNECTED);
        cr_expect_not(evd_next(f.conn_evd, &e));
}

/* ---- dat_ep_reset ------------------------------------------------------ */

Test(ep_ops, reset_takes_a_disconnected_ep_to_unconnected)
{
        /* dat_ep_reset(3DAT): "transitions the local Endpoint from a
         * Disconnected to an Unconnected state", losing what was outstanding. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_BOOLEAN recv, request;

        force(ep, DAT_EP_STATE_DISCONNECTED);
        cr_assert_eq(ep_test_set_outstanding(ep, 1, 1), DAT_SUCCESS);
        cr_assert_eq(dat_ep_reset(ep), DAT_SUCCESS);
        cr_expect_eq(ep_params(ep).ep_state, DAT_EP_STATE_UNCONNECTED);
        cr_assert_eq(dat_ep_get_status(ep, NULL, &recv, &request), DAT_SUCCESS);
        cr_expect_eq(recv, DAT_TRUE);
        cr_expect_eq(request, DAT_TRUE);
}

Test(ep_ops, reset_of_an_unconnected_ep_is_a_no_op)
{
        /* dat_ep_reset(3DAT): "For Unconnected state, the operation is no-op
         * ... the preposted Recvs are not affected by the call." */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_COUNT n;

        cr_assert_eq(ep_test_set_outstanding(ep, 2, 0), DAT_SUCCESS);
        cr_expect_eq(dat_ep_reset(ep), DAT_SUCCESS);
        cr_expect_eq(ep_params(ep).ep_state, DAT_EP_STATE_UNCONNECTED);
        cr_assert_eq(dat_ep_recv_query(ep, &n, NULL), DAT_SUCCESS);
        cr_expect_eq(n, 2);
}

Test(ep_ops, reset_in_any_other_state_is_invalid_state)
{
        /* dat_ep_reset(3DAT): DAT_INVALID_STATE "Endpoint is not in the valid state for reset". */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);

        for (DAT_EP_STATE s = 0; s < N_EP_STATES; s++) {
                if (s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED ||
                    s == DAT_EP_STATE_DISCONNECTED)
                        continue;
                force(ep, s);
                cr_expect_eq(dat_ep_reset(ep), ep_state_error(s), "state %d", s);
                cr_expect_eq(ep_params(ep).ep_state, s);
        }
}

Test(ep_ops, reset_keeps_the_srq)
{
        /* dat_ep_create_with_srq(3DAT): "The relationship between SRQ and EP
         * is not effected by dat_ep_reset". */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 2);
        DAT_EP_ATTR a = ep_default_attr(&f);
        DAT_EP_HANDLE ep;

        cr_assert_eq(dat_ep_create_with_srq(f.ia, f.pz, f.recv_evd2, NULL, NULL, srq, &a, &ep), DAT_SUCCESS);
        force(ep, DAT_EP_STATE_DISCONNECTED);
        cr_assert_eq(dat_ep_reset(ep), DAT_SUCCESS);
        cr_expect_eq(ep_params(ep).srq_handle, srq);
}

/* ---- dat_ep_free -------------------------------------------------------- */

static bool free_forbidden(DAT_EP_STATE s)
{
        return s == DAT_EP_STATE_RESERVED || s == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING ||
               s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING || s == DAT_EP_STATE_UNCONFIGURED_RESERVED ||
               s == DAT_EP_STATE_UNCONFIGURED_PASSIVE || s == DAT_EP_STATE_UNCONFIGURED_TENTATIVE;
}

Test(ep_ops, free_is_refused_while_reserved_or_a_connection_is_pending_passively)
{
        /* dat_ep_free(3DAT): DAT_INVALID_STATE "The Endpoint is in
         * DAT_EP_STATE_RESERVED, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING, or
         * DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING" (and their unconfigured twins). */
        for (DAT_EP_STATE s = 0; s < N_EP_STATES; s++) {
                DAT_EP_HANDLE ep;

                if (!free_forbidden(s))
                        continue;
                ep = ep_make(&f, NULL);
                force(ep, s);
                cr_expect_eq(dat_ep_free(ep), ep_state_error(s), "state %d", s);
                cr_expect_eq(ep_params(ep).ep_state, s);
        }
}

Test(ep_ops, free_works_in_every_other_state_and_releases_everything)
{
        /* dat_ep_free(3DAT): "The Endpoint can be destroyed in any Endpoint
         * state except ..."; "Use of the handle of the destroyed Endpoint in
         * any subsequent operation except for the dat_ep_free() fails." */
        for (DAT_EP_STATE s = 0; s < N_EP_STATES; s++) {
                DAT_EP_HANDLE ep;

                if (free_forbidden(s))
                        continue;
                ep = ep_make(&f, NULL);
                force(ep, s);
                cr_expect_eq(dat_ep_free(ep), DAT_SUCCESS, "state %d", s);
                cr_expect_eq(dat_ep_free(ep), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        }
        cr_expect_eq(dat_pz_free(f.pz), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.recv_evd), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.request_evd), DAT_SUCCESS);
        cr_expect_eq(dat_evd_free(f.conn_evd), DAT_SUCCESS);
}

Test(ep_ops, free_of_an_srq_ep_returns_the_buffers_it_held)
{
        /* dat_ep_free(3DAT): the DTOs of a destroyed EP are destroyed; the
         * SRQ no longer counts the buffers the EP had taken as outstanding. */
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 0);
        DAT_EP_ATTR a = ep_default_attr(&f);
        DAT_SRQ_PARAM sp;
        DAT_EP_HANDLE ep;

        cr_assert_eq(dat_ep_create_with_srq(f.ia, f.pz, f.recv_evd2, NULL, NULL, srq, &a, &ep), DAT_SUCCESS);
        cr_assert_eq(dat_srq_post_recv(srq, 0, NULL, (DAT_DTO_COOKIE){ .as_64 = 1 }), DAT_SUCCESS);
        {
                DAT_DTO_COOKIE c;
                DAT_COUNT n;

                cr_assert(srq_buffer_take(srq_lookup(srq), &c, &n, NULL));
        }
        cr_assert_eq(ep_test_set_outstanding(ep, 1, 0), DAT_SUCCESS);
        cr_assert_eq(dat_ep_free(ep), DAT_SUCCESS);
        cr_assert_eq(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &sp), DAT_SUCCESS);
        cr_expect_eq(sp.outstanding_dto_count, 0);
}

Test(ep_ops, an_abrupt_ia_close_destroys_eps_and_srqs)
{
        /* dat_ia_close(3DAT): abrupt close destroys every child, even an EP
         * whose PZ and EVDs were created after it (dat_ep_modify). */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);
        DAT_SRQ_HANDLE srq = srq_make(&f, 8, 2);
        DAT_EP_ATTR a = p.ep_attr;
        DAT_EP_HANDLE srq_ep;

        cr_assert_eq(dat_ep_create_with_srq(f.ia, f.pz, f.recv_evd2, NULL, NULL, srq, &a, &srq_ep), DAT_SUCCESS);
        p.pz_handle = ep_make_pz(f.ia);
        p.recv_evd_handle = ep_make_evd(f.ia, DAT_EVD_DTO_FLAG);
        cr_assert_eq(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE, &p), DAT_SUCCESS);
        force(ep, DAT_EP_STATE_RESERVED);
        cr_expect_eq(DAT_GET_TYPE(dat_ia_close(f.ia, DAT_CLOSE_GRACEFUL_FLAG)), DAT_INVALID_STATE);
        cr_expect_eq(dat_ia_close(f.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(dat_ep_free(ep), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        cr_expect_eq(dat_srq_free(srq), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ));
}

/* ---- handle abuse ------------------------------------------------------- */

Test(ep_ops, handle_abuse_is_an_invalid_ep_handle_everywhere)
{
        DAT_EP_HANDLE freed = ep_make(&f, NULL);
        const DAT_RETURN bad = ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        DAT_EP_PARAM p;
        DAT_EP_STATE s;
        DAT_BOOLEAN b1, b2;
        DAT_COUNT n1, n2;

        cr_assert_eq(dat_ep_free(freed), DAT_SUCCESS);
        const DAT_HANDLE handles[] = { DAT_HANDLE_NULL, GARBAGE, freed, f.pz, f.ia, (DAT_HANDLE)&p };

        for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++) {
                DAT_HANDLE h = handles[i];

                cr_expect_eq(dat_ep_query(h, DAT_EP_FIELD_ALL, &p), bad, "%zu", i);
                cr_expect_eq(dat_ep_get_status(h, &s, &b1, &b2), bad, "%zu", i);
                cr_expect_eq(dat_ep_recv_query(h, &n1, &n2), bad, "%zu", i);
                cr_expect_eq(dat_ep_set_watermark(h, 1, 1), bad, "%zu", i);
                cr_expect_eq(dat_ep_reset(h), bad, "%zu", i);
                cr_expect_eq(dat_ep_free(h), bad, "%zu", i);
                cr_expect_eq(dat_ep_post_recv(h, 0, NULL, (DAT_DTO_COOKIE){ .as_64 = 0 }, 0), bad, "%zu", i);
                cr_expect_eq(dat_ep_disconnect(h, DAT_CLOSE_ABRUPT_FLAG), bad, "%zu", i);
                cr_expect_eq(ep_test_force_state(h, DAT_EP_STATE_CONNECTED), bad, "%zu", i);
        }
}

/* ---- datd's view: datctl ep list ---------------------------------------- */

static char *datctl_ep_list(void)
{
        return ep_datctl_list("ep");
}

/* Whether the (one) EP in datctl's list shows key: value. */
static bool listed(const char *key, const char *value)
{
        char *out = datctl_ep_list(), want[256];
        bool found;

        snprintf(want, sizeof(want), "\"%s\": %s", key, value);
        found = strstr(out, want) != NULL;
        if (!found)
                cr_log_error("no %s in %s", want, out);
        free(out);
        return found;
}

static const char *handle_text(DAT_HANDLE h)
{
        static char text[4][40];
        static unsigned next;
        char *t = text[next++ % 4];

        snprintf(t, sizeof(text[0]), "\"0x%016llx\"", (unsigned long long)(uintptr_t)h);
        return t;
}

Test(ep_ops, datctl_ep_list_follows_every_change)
{
        /* Every EP is registered with datd (DATP_OBJ_EP) and every change of
         * state, PZ or limits is sent with datd_object_update. */
        DAT_EP_HANDLE ep = ep_make(&f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        cr_expect(listed("handle", handle_text(ep)));
        cr_expect(listed("state", "\"UNCONNECTED\""));
        cr_expect(listed("max_recv_dtos", "64"));
        cr_expect(listed("pz_handle", handle_text(f.pz)));
        p.ep_attr.max_recv_dtos = 33;
        p.ep_attr.max_request_iov = 3;
        p.pz_handle = f.pz2;
        cr_assert_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS | DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV |
                                               DAT_EP_FIELD_PZ_HANDLE, &p),
                     DAT_SUCCESS);
        cr_expect(listed("max_recv_dtos", "33"));
        cr_expect(listed("max_request_iov", "3"));
        cr_expect(listed("pz_handle", handle_text(f.pz2)));
        force(ep, DAT_EP_STATE_DISCONNECTED);
        cr_expect(listed("state", "\"DISCONNECTED\""));
        cr_assert_eq(dat_ep_reset(ep), DAT_SUCCESS);
        cr_expect(listed("state", "\"UNCONNECTED\""));
        /* A refused modify tells datd nothing new. */
        p.ep_attr.max_recv_dtos = -5;
        cr_expect_eq(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), ARG(3));
        cr_expect(listed("max_recv_dtos", "33"));
        cr_assert_eq(dat_ep_free(ep), DAT_SUCCESS);
        {
                char *out = datctl_ep_list();

                cr_expect_null(strstr(out, "\"handle\""), "still listed: %s", out);
                free(out);
        }
}
