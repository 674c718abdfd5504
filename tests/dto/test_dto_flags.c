/* Completion flags (dat_ep_post_send(3DAT) and siblings: suppress,
 * unsignalled, solicited wait, barrier fence; dat_evd_wait(3DAT)'s
 * threshold) and the synchronous refusals of the post calls (libdat/dto.h
 * lists them; the man pages' RETURN VALUES), on the transport this program
 * was built for (tests/dto/dto_fixture.h). */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(flags);
DTO_TEST_SUITE(refuse);

#define GARBAGE ((DAT_EP_HANDLE)0x1234567)

static void post_recvs(struct dto_side *s, unsigned n, DAT_VLEN len, uint64_t cookie0)
{
        for (unsigned k = 0; k < n; k++) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, s->mem.len / 2 + k * len, len);

                dto_post_recv(s, s->ep[0], &iov, 1, cookie0 + k);
        }
}

static DAT_RETURN post_send_flags(struct dto_side *s, DAT_VLEN off, DAT_VLEN len, uint64_t cookie,
                                  DAT_COMPLETION_FLAGS flags)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, off, len);

        return dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(cookie), flags);
}

/* ---- suppress ---------------------------------------------------------------- */

static void suppress_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 3000);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, 3000);

        (void)arg;
        dto_fill(s->mem.buf, 3000, 1);
        dto_barrier(s);
        DTO_ASSERT_EQ(post_send_flags(s, 0, 3000, 1, DAT_COMPLETION_SUPPRESS_FLAG), DAT_SUCCESS);
        DTO_ASSERT_EQ(post_send_flags(s, 0, 3000, 2, 0), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(3), &remote,
                                             DAT_COMPLETION_SUPPRESS_FLAG), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(4), &remote, 0),
                      DAT_SUCCESS);
        /* in post order, the suppressed ones would come first */
        dto_expect_dto(s->request_evd, s->ep[0], 2, DAT_DTO_SUCCESS, 3000, DAT_DTO_SEND);
        dto_expect_dto(s->request_evd, s->ep[0], 4, DAT_DTO_SUCCESS, 3000, DAT_DTO_RDMA_WRITE);
        dto_barrier(s); /* the receiver has both messages */
        dto_expect_empty(s->request_evd);
}

static void suppress_server(struct dto_side *s, void *arg)
{
        (void)arg;
        post_recvs(s, 2, 4096, 10);
        dto_barrier(s);
        /* suppression is the sender's: both receives complete */
        dto_expect_recv(s, s->ep[0], 10, 3000);
        dto_expect_recv(s, s->ep[0], 11, 3000);
        dto_verify(s->mem.buf + s->mem.len / 2, 3000, 1);
        dto_verify(s->mem.buf + s->mem.len / 2 + 4096, 3000, 1);
        dto_barrier(s);
}

/* dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT):
 * DAT_COMPLETION_SUPPRESS_FLAG "Suppress successful Completion": a
 * successful suppressed request leaves no event (the next request's
 * completion is the first, and nothing follows). */
Test(DTO_SUITE(flags), suppress_leaves_no_event_on_success)
{
        dto_run(NULL, suppress_server, suppress_client, NULL);
}

static void suppress_error_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, 100);

        (void)arg;
        remote.rmr_context ^= 0x5a5a0000u; /* no such context on the target */
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(7), &remote,
                                             DAT_COMPLETION_SUPPRESS_FLAG), DAT_SUCCESS);
        dto_expect_dto(s->request_evd, s->ep[0], 7, DAT_DTO_ERR_REMOTE_ACCESS, DTO_ANY_LENGTH,
                       DAT_DTO_RDMA_WRITE);
}

static void idle_server(struct dto_side *s, void *arg)
{
        (void)s;
        (void)arg;
}

/* dat_ep_post_rdma_write(3DAT): the suppress flag suppresses *successful*
 * completions only: a suppressed Write the target refuses (an rmr_context
 * it never gave) still completes, with DAT_DTO_ERR_REMOTE_ACCESS. */
Test(DTO_SUITE(flags), suppress_still_reports_an_error)
{
        dto_run(NULL, idle_server, suppress_error_client, NULL);
}

/* ---- unsignalled ------------------------------------------------------------- */

static void unsignalled_refused_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, 100);
        const DAT_COMPLETION_FLAGS u = DAT_COMPLETION_UNSIGNALLED_FLAG;

        (void)arg;
        DTO_ASSERT_TYPE(dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(1), u),
                        DAT_INVALID_PARAMETER);
        DTO_ASSERT_TYPE(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(2), &remote, u),
                        DAT_INVALID_PARAMETER);
        DTO_ASSERT_TYPE(dat_ep_post_rdma_read(s->ep[0], 1, &iov, dto_cookie(3), &remote, u),
                        DAT_INVALID_PARAMETER);
        DTO_ASSERT_TYPE(dat_ep_post_recv(s->ep[0], 1, &iov, dto_cookie(4), u),
                        DAT_INVALID_PARAMETER);
        /* nothing was posted */
        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 5, &remote);
        dto_expect_empty(s->recv_evd);
}

/* dat_ep_post_send / _rdma_write / _rdma_read / _recv(3DAT): "The value of
 * DAT_COMPLETION_UNSIGNALLED_FLAG is only valid if the Endpoint ...
 * Completion Flags DAT_COMPLETION_UNSIGNALLED_FLAG. Otherwise,
 * DAT_INVALID_PARAMETER is returned" (the EP here has the default flags). */
Test(DTO_SUITE(flags), unsignalled_without_ep_configuration_is_refused)
{
        dto_run(NULL, idle_server, unsignalled_refused_client, NULL);
}

static void unsignalled_client(struct dto_side *s, void *arg)
{
        struct dto_waiter w;

        (void)arg;
        dto_fill(s->mem.buf, 2000, 5);
        dto_waiter_start(&w, s->request_evd, 1, DTO_WAIT_US);
        DTO_ASSERT_EQ(post_send_flags(s, 0, 2000, 1, DAT_COMPLETION_UNSIGNALLED_FLAG),
                      DAT_SUCCESS);
        DTO_ASSERT_EQ(dto_get_u64(s), 1); /* the receiver has the message */
        dto_waiter_expect_blocked(&w, 200);
        DTO_ASSERT_EQ(post_send_flags(s, 0, 2000, 2, 0), DAT_SUCCESS);
        dto_waiter_join(&w);
        DTO_ASSERT_EQ(w.ret, DAT_SUCCESS);
        /* the unsignalled completion was queued (first), the signalled one woke */
        dto_check_dto(&w.event, s->ep[0], 1, DAT_DTO_SUCCESS, 2000, DAT_DTO_SEND);
        dto_expect_dto(s->request_evd, s->ep[0], 2, DAT_DTO_SUCCESS, 2000, DAT_DTO_SEND);
}

static void unsignalled_server(struct dto_side *s, void *arg)
{
        (void)arg;
        post_recvs(s, 2, 2048, 20);
        dto_expect_recv(s, s->ep[0], 20, 2000);
        dto_verify(s->mem.buf + s->mem.len / 2, 2000, 5);
        dto_put_u64(s, 1);
        dto_expect_recv(s, s->ep[0], 21, 2000);
}

static void unsignalled_ep(const struct dto_side *s, DAT_EP_ATTR *attr)
{
        if (s->role == DTO_CLIENT)
                attr->request_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
}

/* dat_ep_post_send(3DAT): DAT_COMPLETION_UNSIGNALLED_FLAG, on an EP
 * configured for it, is a "non-notification completion": accepted, the
 * completion is queued but does not wake a consumer blocked in
 * dat_evd_wait; the next signalled completion does, and the queue holds
 * both in post order. */
Test(DTO_SUITE(flags), unsignalled_completion_is_queued_without_waking)
{
        struct dto_config cfg = { .ep_attr = unsignalled_ep };

        dto_run(&cfg, unsignalled_server, unsignalled_client, NULL);
}

/* ---- solicited wait ---------------------------------------------------------- */

static void solicited_server(struct dto_side *s, void *arg)
{
        struct dto_waiter w;

        (void)arg;
        post_recvs(s, 2, 1024, 30);
        dto_waiter_start(&w, s->recv_evd, 1, DTO_WAIT_US);
        dto_barrier(s); /* the waiter sleeps: send the unsolicited one */
        DTO_ASSERT_EQ(dto_get_u64(s), 1); /* it was placed here */
        dto_waiter_expect_blocked(&w, 200);
        dto_barrier(s); /* now the solicited one */
        dto_waiter_join(&w);
        DTO_ASSERT_EQ(w.ret, DAT_SUCCESS);
        dto_check_dto(&w.event, s->ep[0], 30, DAT_DTO_SUCCESS, 1000, DAT_DTO_RECEIVE);
        dto_expect_recv(s, s->ep[0], 31, 1000);
        dto_verify(s->mem.buf + s->mem.len / 2, 1000, 8);
        dto_verify(s->mem.buf + s->mem.len / 2 + 1024, 1000, 8);
}

static void solicited_client(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_fill(s->mem.buf, 1000, 8);
        dto_barrier(s);
        DTO_ASSERT_EQ(post_send_flags(s, 0, 1000, 1, 0), DAT_SUCCESS);
        /* dto.h: a Send completes when the target has placed the data */
        dto_expect_dto(s->request_evd, s->ep[0], 1, DAT_DTO_SUCCESS, 1000, DAT_DTO_SEND);
        dto_put_u64(s, 1);
        dto_barrier(s);
        DTO_ASSERT_EQ(post_send_flags(s, 0, 1000, 2, DAT_COMPLETION_SOLICITED_WAIT_FLAG),
                      DAT_SUCCESS);
        dto_expect_dto(s->request_evd, s->ep[0], 2, DAT_DTO_SUCCESS, 1000, DAT_DTO_SEND);
}

/* dat_ep_post_send(3DAT): DAT_COMPLETION_SOLICITED_WAIT_FLAG requests a
 * notification completion for the matching receive; dat_ep_post_recv(3DAT):
 * on an EP configured for Solicited Wait, the receive's completion notifies
 * by the matching Send's flag.  A receiver blocked in dat_evd_wait
 * (threshold 1) sleeps through an unsolicited message and wakes for the
 * solicited one; both completions are queued in arrival order. */
Test(DTO_SUITE(flags), solicited_wait_wakes_only_for_a_solicited_send)
{
        struct dto_config cfg = { .recv_flags = DAT_COMPLETION_SOLICITED_WAIT_FLAG };

        dto_run(&cfg, solicited_server, solicited_client, NULL);
}

/* ---- barrier fence ----------------------------------------------------------- */

struct fence_case {
        DAT_VLEN len;
};

static void fence_client(struct dto_side *s, void *arg)
{
        const struct fence_case *fc = arg;
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, fc->len);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, fc->len);

        dto_fill(s->mem.buf, fc->len, 50); /* stale: must not be what is sent */
        dto_barrier(s); /* the server's data (pattern 51) and receive are in place */
        DTO_ASSERT_EQ(dat_ep_post_rdma_read(s->ep[0], 1, &iov, dto_cookie(1), &remote, 0),
                      DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(2),
                                       DAT_COMPLETION_BARRIER_FENCE_FLAG), DAT_SUCCESS);
        dto_expect_dto(s->request_evd, s->ep[0], 1, DAT_DTO_SUCCESS, fc->len, DAT_DTO_RDMA_READ);
        dto_expect_dto(s->request_evd, s->ep[0], 2, DAT_DTO_SUCCESS, fc->len, DAT_DTO_SEND);
}

static void fence_server(struct dto_side *s, void *arg)
{
        const struct fence_case *fc = arg;
        DAT_VLEN half = s->mem.len / 2;
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, half, fc->len);

        dto_fill(s->mem.buf, fc->len, 51);
        dto_post_recv(s, s->ep[0], &iov, 1, 3);
        dto_barrier(s);
        dto_expect_recv(s, s->ep[0], 3, fc->len);
        /* the Send carried what the Read had fetched */
        dto_verify(s->mem.buf + half, fc->len, 51);
}

/* dat_ep_post_send(3DAT): DAT_COMPLETION_BARRIER_FENCE_FLAG: the Send does
 * not start before the RDMA Read posted earlier has completed (dto.h), so
 * a fenced Send of the buffer a Read fills carries the Read's data, and
 * completes after it.  A small buffer (inline). */
Test(DTO_SUITE(flags), fenced_send_after_a_read_carries_the_read_data_small)
{
        struct fence_case fc = { .len = 3000 };

        dto_run(NULL, fence_server, fence_client, &fc);
}

/* The same with 200 KB (cross-memory attach where allowed). */
Test(DTO_SUITE(flags), fenced_send_after_a_read_carries_the_read_data_large)
{
        struct fence_case fc = { .len = 200000 };
        struct dto_config cfg = { .buf_len = 1 << 20 };

        dto_run(&cfg, fence_server, fence_client, &fc);
}

/* ---- EVD threshold ------------------------------------------------------------ */

static void threshold_server(struct dto_side *s, void *arg)
{
        DAT_EVENT ev;
        DAT_COUNT nmore = -1;
        DAT_RETURN r;

        (void)arg;
        post_recvs(s, 4, 256, 40);
        dto_barrier(s);
        DTO_ASSERT_EQ(dto_get_u64(s), 3); /* three messages were placed */
        r = dat_evd_wait(s->recv_evd, 300000, 4, &ev, &nmore);
        DTO_ASSERT_TYPE(r, DAT_TIMEOUT_EXPIRED);
        DTO_ASSERT_EQ(nmore, 3);
        dto_barrier(s); /* the fourth */
        r = dat_evd_wait(s->recv_evd, DTO_WAIT_US, 4, &ev, &nmore);
        DTO_ASSERT_EQ(r, DAT_SUCCESS);
        DTO_ASSERTF(nmore >= 3, "nmore %d after a threshold-4 wait", nmore);
        dto_check_dto(&ev, s->ep[0], 40, DAT_DTO_SUCCESS, 100, DAT_DTO_RECEIVE);
        for (unsigned k = 1; k < 4; k++)
                dto_expect_recv(s, s->ep[0], 40 + k, 100);
}

static void threshold_client(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);
        for (unsigned k = 0; k < 3; k++)
                dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, 100) }, 1, k);
        dto_put_u64(s, 3);
        dto_barrier(s);
        dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, 100) }, 1, 3);
}

/* dat_evd_wait(3DAT): "The threshold allows the Consumer to wait for a
 * requested number of event arrivals prior to waking": with 3 of 4
 * completions queued the wait times out (DAT_TIMEOUT_EXPIRED, nmore 3);
 * with the fourth it returns the first, nmore >= threshold - 1.  The
 * receiving EP's recv completion flags are DAT_COMPLETION_EVD_THRESHOLD_FLAG
 * (dat_srq_post_recv(3DAT): "dat_evd_wait threshold value controls if the
 * waiter will be unblocked"). */
Test(DTO_SUITE(flags), evd_threshold_wait_returns_with_n_completions)
{
        struct dto_config cfg = { .recv_flags = DAT_COMPLETION_EVD_THRESHOLD_FLAG };

        dto_run(&cfg, threshold_server, threshold_client, NULL);
}

/* ---- refusals: what a refused post must leave ---------------------------------- */

/* After refusals on the client: nothing was posted (the EP is idle both
 * ways), and a Send round trip still works, its completion the first. */
static void refusals_then_round_trip(struct dto_side *s)
{
        DAT_BOOLEAN recv_idle = DAT_FALSE, request_idle = DAT_FALSE;
        DAT_EP_STATE st;

        DTO_ASSERT_EQ(dat_ep_get_status(s->ep[0], &st, &recv_idle, &request_idle), DAT_SUCCESS);
        DTO_ASSERT_EQ(recv_idle, DAT_TRUE);
        DTO_ASSERT_EQ(request_idle, DAT_TRUE);
        dto_barrier(s);
        dto_fill(s->mem.buf, 100, 99);
        dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, 100) }, 1, 99);
        dto_expect_empty(s->recv_evd);
}

static void round_trip_server(struct dto_side *s, void *arg)
{
        (void)arg;
        post_recvs(s, 1, 4096, 98);
        dto_barrier(s);
        dto_expect_recv(s, s->ep[0], 98, 100);
        dto_verify(s->mem.buf + s->mem.len / 2, 100, 99);
}

typedef DAT_RETURN (*post_fn)(struct dto_side *s, DAT_LMR_TRIPLET *iov, DAT_COUNT n);

static DAT_RETURN do_send(struct dto_side *s, DAT_LMR_TRIPLET *iov, DAT_COUNT n)
{
        return dat_ep_post_send(s->ep[0], n, iov, dto_cookie(1), 0);
}

static DAT_RETURN do_recv(struct dto_side *s, DAT_LMR_TRIPLET *iov, DAT_COUNT n)
{
        return dat_ep_post_recv(s->ep[0], n, iov, dto_cookie(2), 0);
}

/* The start of the peer's buffer (unknown before dto_connect: zeros), as
 * long as the local segments (so that no length rule applies). */
static DAT_RMR_TRIPLET remote_for(const struct dto_side *s, const DAT_LMR_TRIPLET *iov,
                                  DAT_COUNT n)
{
        return (DAT_RMR_TRIPLET){
                .virtual_address = s->peer.addr,
                .segment_length = iov && n > 0 ? dto_iov_len(iov, (unsigned)n) : 0,
                .rmr_context = s->peer.rmr_context,
        };
}

static DAT_RETURN do_write(struct dto_side *s, DAT_LMR_TRIPLET *iov, DAT_COUNT n)
{
        DAT_RMR_TRIPLET remote = remote_for(s, iov, n);

        return dat_ep_post_rdma_write(s->ep[0], n, iov, dto_cookie(3), &remote, 0);
}

static DAT_RETURN do_read(struct dto_side *s, DAT_LMR_TRIPLET *iov, DAT_COUNT n)
{
        DAT_RMR_TRIPLET remote = remote_for(s, iov, n);

        return dat_ep_post_rdma_read(s->ep[0], n, iov, dto_cookie(4), &remote, 0);
}

static const struct {
        const char *name;
        post_fn post;
} posts[] = {
        { "send", do_send }, { "recv", do_recv }, { "rdma_write", do_write },
        { "rdma_read", do_read },
};
#define N_POSTS (sizeof(posts) / sizeof(posts[0]))

static void expect_type(DAT_RETURN r, DAT_RETURN type, const char *what)
{
        DTO_ASSERTF(DAT_GET_TYPE(r) == type, "%s: 0x%08x, expected type 0x%08x", what, r, type);
}

/* ---- refusals: handles and states ---------------------------------------------- */

static void bad_handle_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, 100);
        DAT_EP_HANDLE freed = DAT_HANDLE_NULL;
        DAT_EP_HANDLE bad[] = { DAT_HANDLE_NULL, GARBAGE, DAT_HANDLE_NULL };
        const DAT_RETURN ep_invalid = DTO_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);

        (void)arg;
        DTO_ASSERT_EQ(dat_ep_create(s->ia, s->pz, s->recv_evd, s->request_evd, s->conn_evd,
                                    &s->ep_attr, &freed), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_free(freed), DAT_SUCCESS);
        bad[2] = freed;
        for (unsigned i = 0; i < 3; i++) {
                DTO_ASSERT_EQ(dat_ep_post_send(bad[i], 1, &iov, dto_cookie(1), 0), ep_invalid);
                DTO_ASSERT_EQ(dat_ep_post_recv(bad[i], 1, &iov, dto_cookie(1), 0), ep_invalid);
                DTO_ASSERT_EQ(dat_ep_post_rdma_write(bad[i], 1, &iov, dto_cookie(1), &remote, 0),
                              ep_invalid);
                DTO_ASSERT_EQ(dat_ep_post_rdma_read(bad[i], 1, &iov, dto_cookie(1), &remote, 0),
                              ep_invalid);
        }
        refusals_then_round_trip(s);
}

/* dat_ep_post_send / _recv / _rdma_write / _rdma_read(3DAT):
 * DAT_INVALID_HANDLE when "the ep_handle parameter is invalid": NULL, a
 * garbage value, a freed EP. */
Test(DTO_SUITE(refuse), invalid_ep_handle_is_refused)
{
        dto_run(NULL, round_trip_server, bad_handle_client, NULL);
}

static void unconnected_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);

        (void)arg;
        for (unsigned p = 0; p < N_POSTS; p++) {
                if (posts[p].post == do_recv)
                        continue; /* valid in every state */
                expect_type(posts[p].post(s, &iov, 1), DAT_INVALID_STATE, posts[p].name);
        }
        dto_connect(s);
        refusals_then_round_trip(s);
}

static void later_server(struct dto_side *s, void *arg)
{
        dto_connect(s);
        round_trip_server(s, arg);
}

/* dat_ep_post_send / _rdma_write / _rdma_read(3DAT): DAT_INVALID_STATE when
 * the "Endpoint was not in the DAT_EP_STATE_CONNECTED or
 * DAT_EP_STATE_DISCONNECTED state": an Unconnected EP.  The peer's buffer
 * description is not known yet: the remote triplet is empty. */
Test(DTO_SUITE(refuse), requests_on_an_unconnected_ep_are_refused)
{
        struct dto_config cfg = { .no_connect = true };

        dto_run(&cfg, later_server, unconnected_client, NULL);
}

static void disconnected_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);
        DAT_EP_STATE st;

        (void)arg;
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        DTO_ASSERT_EQ(dat_ep_get_status(s->ep[0], &st, NULL, NULL), DAT_SUCCESS);
        DTO_ASSERT_EQ(st, DAT_EP_STATE_DISCONNECTED);
        for (unsigned p = 0; p < N_POSTS; p++) {
                DAT_RETURN r = posts[p].post(s, &iov, 1);

                DTO_ASSERTF(r == DAT_SUCCESS, "%s on a Disconnected EP: 0x%08x", posts[p].name, r);
                dto_expect_dto(posts[p].post == do_recv ? s->recv_evd : s->request_evd, s->ep[0],
                               p + 1, DAT_DTO_ERR_FLUSHED, DTO_ANY_LENGTH,
                               posts[p].post == do_send    ? DAT_DTO_SEND
                               : posts[p].post == do_recv  ? DAT_DTO_RECEIVE
                               : posts[p].post == do_write ? DAT_DTO_RDMA_WRITE
                                                           : DAT_DTO_RDMA_READ);
        }
}

/* dat_ep_post_send / _rdma_write / _rdma_read / _recv(3DAT): "The operation
 * is valid for the Endpoint in the DAT_EP_STATE_CONNECTED and
 * DAT_EP_STATE_DISCONNECTED states. If the operation returns successfully
 * for the Endpoint in the DAT_EP_STATE_DISCONNECTED state, the posted [DTO]
 * is immediately flushed" (DAT_DTO_ERR_FLUSHED; dto.h says
 * DAT_INVALID_STATE for the requests: /tmp/notes/dto-rule-conflicts.md 1). */
Test(DTO_SUITE(refuse), posts_on_a_disconnected_ep_are_flushed)
{
        dto_run(NULL, idle_server, disconnected_client, NULL);
}

static void pending_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);
        DAT_EP_STATE st;

        (void)arg;
        dto_fill(s->mem.buf, 100, 61);
        /* no receive on the server yet: the Send stays outstanding */
        DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(1), 0), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_get_status(s->ep[0], &st, NULL, NULL), DAT_SUCCESS);
        DTO_ASSERT_EQ(st, DAT_EP_STATE_DISCONNECT_PENDING);
        for (unsigned p = 0; p < N_POSTS; p++) {
                if (posts[p].post == do_recv)
                        continue;
                expect_type(posts[p].post(s, &iov, 1), DAT_INVALID_STATE, posts[p].name);
        }
        dto_put_u64(s, 1); /* post the receive */
        /* dat_ep_disconnect(3DAT): graceful: outstanding requests complete
         * successfully first, then DISCONNECTED */
        dto_expect_dto(s->request_evd, s->ep[0], 1, DAT_DTO_SUCCESS, 100, DAT_DTO_SEND);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
}

static void pending_server(struct dto_side *s, void *arg)
{
        (void)arg;
        DTO_ASSERT_EQ(dto_get_u64(s), 1);
        post_recvs(s, 1, 4096, 62);
        dto_expect_recv(s, s->ep[0], 62, 100);
        dto_verify(s->mem.buf + s->mem.len / 2, 100, 61);
}

/* dat_ep_disconnect(3DAT): "No new Send, RDMA Read, and RDMA Write DTOs ...
 * can be posted to the Endpoint when the local Endpoint is in the
 * DAT_EP_DISCONNECT_PENDING state" (a graceful disconnect waiting for a
 * Send the peer has no receive for yet): DAT_INVALID_STATE. */
Test(DTO_SUITE(refuse), requests_while_disconnect_pending_are_refused)
{
        dto_run(NULL, pending_server, pending_client, NULL);
}

/* ---- refusals: arguments --------------------------------------------------------- */

static DAT_COUNT max_iov_of(const struct dto_side *s, post_fn post)
{
        if (post == do_send)
                return s->ep_attr.max_request_iov;
        if (post == do_recv)
                return s->ep_attr.max_recv_iov;
        if (post == do_write)
                return s->ep_attr.max_rdma_write_iov;
        return s->ep_attr.max_rdma_read_iov;
}

static void bad_segments_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov[80];

        (void)arg;
        for (unsigned k = 0; k < 80; k++)
                iov[k] = dto_iov(&s->mem, k * 10, 10);
        for (unsigned p = 0; p < N_POSTS; p++) {
                DAT_COUNT max = max_iov_of(s, posts[p].post);

                DTO_ASSERT(max + 1 <= 80);
                expect_type(posts[p].post(s, iov, -1), DAT_INVALID_PARAMETER, posts[p].name);
                expect_type(posts[p].post(s, iov, max + 1), DAT_INVALID_PARAMETER,
                            posts[p].name);
                expect_type(posts[p].post(s, NULL, 1), DAT_INVALID_PARAMETER, posts[p].name);
        }
        refusals_then_round_trip(s);
}

/* dat_ep_post_send / _recv / _rdma_write / _rdma_read(3DAT):
 * DAT_INVALID_PARAMETER for num_segments below 0 or above the EP's
 * max_*_iov attribute, and for a NULL local_iov with segments (dto.h);
 * nothing is posted. */
Test(DTO_SUITE(refuse), segment_counts_out_of_range_are_refused)
{
        dto_run(NULL, round_trip_server, bad_segments_client, NULL);
}

static void bad_flags_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);
        DAT_RMR_TRIPLET remote = dto_riov(&s->peer, 0, 100);
        const DAT_COMPLETION_FLAGS bad = (DAT_COMPLETION_FLAGS)0x80;

        (void)arg;
        DTO_ASSERT_TYPE(dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(1), bad),
                        DAT_INVALID_PARAMETER);
        DTO_ASSERT_TYPE(dat_ep_post_recv(s->ep[0], 1, &iov, dto_cookie(1), bad),
                        DAT_INVALID_PARAMETER);
        DTO_ASSERT_TYPE(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(1), &remote, bad),
                        DAT_INVALID_PARAMETER);
        DTO_ASSERT_TYPE(dat_ep_post_rdma_read(s->ep[0], 1, &iov, dto_cookie(1), &remote, bad),
                        DAT_INVALID_PARAMETER);
        refusals_then_round_trip(s);
}

/* dat_ep_post_send(3DAT) and siblings list the completion flags a post
 * takes; dto.h: "completion flags unknown ... (DAT_INVALID_PARAMETER)". */
Test(DTO_SUITE(refuse), unknown_completion_flags_are_refused)
{
        dto_run(NULL, round_trip_server, bad_flags_client, NULL);
}

/* ---- refusals: queues -------------------------------------------------------------- */

static void full_requests_client(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_fill(s->mem.buf, 100, 71);
        /* no receive on the server: the Sends stay outstanding */
        for (unsigned k = 0; k < 4; k++)
                DTO_ASSERT_EQ(post_send_flags(s, 0, 100, k, 0), DAT_SUCCESS);
        DTO_ASSERT_TYPE(post_send_flags(s, 0, 100, 4, 0), DAT_INSUFFICIENT_RESOURCES);
        dto_put_u64(s, 1); /* the server posts its receives */
        for (unsigned k = 0; k < 4; k++)
                dto_expect_dto(s->request_evd, s->ep[0], k, DAT_DTO_SUCCESS, 100, DAT_DTO_SEND);
        /* room again; and the refused one was never sent */
        DTO_ASSERT_EQ(post_send_flags(s, 0, 100, 5, 0), DAT_SUCCESS);
        dto_expect_dto(s->request_evd, s->ep[0], 5, DAT_DTO_SUCCESS, 100, DAT_DTO_SEND);
}

static void full_requests_server(struct dto_side *s, void *arg)
{
        (void)arg;
        DTO_ASSERT_EQ(dto_get_u64(s), 1);
        post_recvs(s, 6, 128, 80);
        for (unsigned k = 0; k < 5; k++)
                dto_expect_recv(s, s->ep[0], 80 + k, 100);
        dto_expect_empty(s->recv_evd);
}

/* dat_ep_post_send(3DAT): DAT_INSUFFICIENT_RESOURCES "due to resource
 * limitations": with max_request_dtos (4) requests outstanding, the next
 * post is refused (dto.h: queue full); once they completed there is room. */
Test(DTO_SUITE(refuse), full_request_queue_refuses_the_next_post)
{
        struct dto_config cfg = { .max_request_dtos = 4 };

        dto_run(&cfg, full_requests_server, full_requests_client, NULL);
}

static void full_recvs_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);

        (void)arg;
        for (unsigned k = 0; k < 4; k++)
                DTO_ASSERT_EQ(dat_ep_post_recv(s->ep[0], 1, &iov, dto_cookie(k), 0), DAT_SUCCESS);
        DTO_ASSERT_TYPE(dat_ep_post_recv(s->ep[0], 1, &iov, dto_cookie(4), 0),
                        DAT_INSUFFICIENT_RESOURCES);
}

/* dat_ep_post_recv(3DAT): DAT_INSUFFICIENT_RESOURCES with max_recv_dtos (4)
 * receives outstanding. */
Test(DTO_SUITE(refuse), full_receive_queue_refuses_the_next_post)
{
        struct dto_config cfg = { .max_recv_dtos = 4 };

        dto_run(&cfg, idle_server, full_recvs_client, NULL);
}

/* Queue limits that are no power of two (the queues are rings of one,
 * and must still refuse at the limit the EP asked for): three requests and
 * five receives, each refused one past its limit, then both queues wrapped
 * round their rings many times, every message in order and intact. */
#define ODD_MSGS 300u
#define ODD_LEN 64u

static void odd_queues_server(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET extra = dto_iov(&s->mem, s->mem.len / 2 + 5 * ODD_LEN, ODD_LEN);

        (void)arg;
        /* The client's first three Sends wait for receives. */
        DTO_ASSERT_EQ(dto_get_u64(s), 1);
        post_recvs(s, 5, ODD_LEN, 0);
        for (unsigned k = 0; k < ODD_MSGS; k++) {
                DAT_VLEN off = s->mem.len / 2 + (k % 5) * ODD_LEN;
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, off, ODD_LEN);

                dto_expect_recv(s, s->ep[0], k, ODD_LEN);
                dto_verify(s->mem.buf + off, ODD_LEN, k);
                if (k + 5 < ODD_MSGS)
                        DTO_ASSERT_EQ(dat_ep_post_recv(s->ep[0], 1, &iov, dto_cookie(k + 5), 0),
                                      DAT_SUCCESS);
                /* Those three placed, five receives wait, and nothing
                 * comes until the client hears from us: full. */
                if (k == 2) {
                        DTO_ASSERT_TYPE(dat_ep_post_recv(s->ep[0], 1, &extra, dto_cookie(1000), 0),
                                        DAT_INSUFFICIENT_RESOURCES);
                        dto_put_u64(s, 2);
                }
        }
        dto_expect_empty(s->recv_evd);
}

static void odd_queues_client(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned k = 0; k < ODD_MSGS; k += 3) {
                for (unsigned j = k; j < k + 3; j++) {
                        dto_fill(s->mem.buf + (j % 3) * ODD_LEN, ODD_LEN, j);
                        DTO_ASSERT_EQ(post_send_flags(s, (j % 3) * ODD_LEN, ODD_LEN, j, 0),
                                      DAT_SUCCESS);
                }
                /* The first three wait for the server's receives: none
                 * can have completed, and the queue is full. */
                if (k == 0) {
                        DTO_ASSERT_TYPE(post_send_flags(s, 3 * ODD_LEN, ODD_LEN, 1000, 0),
                                        DAT_INSUFFICIENT_RESOURCES);
                        dto_put_u64(s, 1);
                }
                for (unsigned j = k; j < k + 3; j++)
                        dto_expect_dto(s->request_evd, s->ep[0], j, DAT_DTO_SUCCESS, ODD_LEN,
                                       DAT_DTO_SEND);
                if (k == 0)
                        DTO_ASSERT_EQ(dto_get_u64(s), 2);
        }
        dto_expect_empty(s->request_evd);
}

Test(DTO_SUITE(refuse), queues_of_odd_limits_refuse_at_them_and_wrap_in_order)
{
        struct dto_config cfg = { .max_request_dtos = 3, .max_recv_dtos = 5 };

        dto_run(&cfg, odd_queues_server, odd_queues_client, NULL);
}

/* ---- refusals: memory ----------------------------------------------------------------- */

static void check_all_posts(struct dto_side *s, DAT_LMR_TRIPLET iov, DAT_RETURN type,
                            const char *why)
{
        char what[128];

        for (unsigned p = 0; p < N_POSTS; p++) {
                snprintf(what, sizeof(what), "%s with %s", posts[p].name, why);
                expect_type(posts[p].post(s, &iov, 1), type, what);
        }
}

static void bad_lmr_context_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);

        (void)arg;
        iov.lmr_context += 0x10001; /* no LMR of this IA has it */
        check_all_posts(s, iov, DAT_PRIVILEGES_VIOLATION, "an unknown lmr_context");
        refusals_then_round_trip(s);
}

/* dat_ep_post_send / _recv / _rdma_write / _rdma_read(3DAT):
 * DAT_PRIVILEGES_VIOLATION when "one of the LMRs used in local_iov was
 * ... invalid": an lmr_context no LMR of the IA has. */
Test(DTO_SUITE(refuse), unknown_lmr_context_is_refused)
{
        dto_run(NULL, round_trip_server, bad_lmr_context_client, NULL);
}

static void privileges_client(struct dto_side *s, void *arg)
{
        struct dto_mem ro = dto_mem_new(s, DAT_HANDLE_NULL, 4096, DAT_MEM_PRIV_LOCAL_READ_FLAG);
        struct dto_mem wo = dto_mem_new(s, DAT_HANDLE_NULL, 4096, DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
        DAT_LMR_TRIPLET r = dto_iov(&ro, 0, 100), w = dto_iov(&wo, 0, 100);

        (void)arg;
        (void)w;
        /* A Send or RDMA Write from a write-only LMR is no refusal: local
         * read is always granted, as on an RDMA NIC, and DAPL's programs
         * rely on it (libdat/dto.h; dtest in tests/dapl2 sends from such
         * LMRs).  A receive and an RDMA Read write local memory: */
        expect_type(do_recv(s, &r, 1), DAT_PRIVILEGES_VIOLATION, "recv into a read-only LMR");
        expect_type(do_read(s, &r, 1), DAT_PRIVILEGES_VIOLATION, "read into a read-only LMR");
        refusals_then_round_trip(s);
}

/* dat_ep_post_rdma_read(3DAT), dat_srq_post_recv(3DAT) (and so
 * dat_ep_post_recv): DAT_PRIVILEGES_VIOLATION for an LMR without local
 * write. */
Test(DTO_SUITE(refuse), lmr_without_the_local_privilege_is_refused)
{
        dto_run(NULL, round_trip_server, privileges_client, NULL);
}

static void other_pz_client(struct dto_side *s, void *arg)
{
        DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
        struct dto_mem m;

        (void)arg;
        DTO_ASSERT_EQ(dat_pz_create(s->ia, &pz2), DAT_SUCCESS);
        m = dto_mem_new(s, pz2, 4096, DAT_MEM_PRIV_ALL_FLAG);
        check_all_posts(s, dto_iov(&m, 0, 100), DAT_PROTECTION_VIOLATION, "another PZ's LMR");
        refusals_then_round_trip(s);
}

/* dat_ep_post_send / _recv / _rdma_write / _rdma_read(3DAT):
 * DAT_PROTECTION_VIOLATION for a "Protection Zone mismatch between an LMR
 * of one of the local_iov segments and the local Endpoint". */
Test(DTO_SUITE(refuse), lmr_of_another_pz_is_refused)
{
        dto_run(NULL, round_trip_server, other_pz_client, NULL);
}

static void outside_lmr_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, s->mem.len - 50, 50);

        (void)arg;
        iov.segment_length = 100; /* 50 bytes past the LMR's end */
        check_all_posts(s, iov, DAT_INVALID_PARAMETER, "a segment past its LMR's end");
        iov = dto_iov(&s->mem, 0, 100);
        iov.virtual_address -= 8; /* 8 bytes before its start */
        check_all_posts(s, iov, DAT_INVALID_PARAMETER, "a segment before its LMR's start");
        refusals_then_round_trip(s);
}

/* dat_ep_post_send / _recv / _rdma_write / _rdma_read(3DAT):
 * DAT_INVALID_PARAMETER: "For example, one of the IOV segments pointed to a
 * memory outside its LMR" (dto.h makes it a LOCAL_PROTECTION completion:
 * /tmp/notes/dto-rule-conflicts.md 2). */
Test(DTO_SUITE(refuse), segment_outside_its_lmr_is_refused)
{
        dto_run(NULL, round_trip_server, outside_lmr_client, NULL);
}

/* A post from the LMR the previous post used skips the lookup
 * (libdat/lmr_seen.h): what it skips must still be refused.  Requests: a
 * segment past the LMR's end, a privilege the LMR lacks (an RDMA Read
 * into a read-only LMR a Write was just sent from), the LMR once freed.
 * Receives: the same, after a receive into the LMR completed.  Each
 * refusal follows an accepted post of the same lmr_context. */
static void seen_lmr_client(struct dto_side *s, void *arg)
{
        struct dto_mem m = dto_mem_new(s, DAT_HANDLE_NULL, 4096, DAT_MEM_PRIV_ALL_FLAG);
        struct dto_mem ro = dto_mem_new(s, DAT_HANDLE_NULL, 4096, DAT_MEM_PRIV_LOCAL_READ_FLAG);
        DAT_LMR_TRIPLET in = dto_iov(&m, 0, 100), past = dto_iov(&m, m.len - 50, 50);
        DAT_LMR_TRIPLET r = dto_iov(&ro, 0, 100);
        DAT_RMR_TRIPLET remote = remote_for(s, &in, 1);

        (void)arg;
        past.segment_length = 100; /* 50 bytes past the LMR's end */
        dto_rdma_write_wait(s, s->ep[0], &in, 1, 1, &remote);
        expect_type(do_write(s, &past, 1), DAT_INVALID_PARAMETER, "rdma_write past the LMR just used");
        expect_type(do_send(s, &past, 1), DAT_INVALID_PARAMETER, "send past the LMR just used");
        dto_rdma_write_wait(s, s->ep[0], &r, 1, 2, &remote);
        expect_type(do_read(s, &r, 1), DAT_PRIVILEGES_VIOLATION,
                    "rdma_read into the read-only LMR a write just used");
        dto_post_recv(s, s->ep[0], &in, 1, 3);
        expect_type(do_recv(s, &past, 1), DAT_INVALID_PARAMETER, "recv past the LMR just used");
        dto_barrier(s);                 /* the server sends into it (its last write landed) */
        dto_expect_recv(s, s->ep[0], 3, 100);
        dto_verify(m.buf, 100, 77);
        DTO_ASSERT_EQ(dat_lmr_free(m.lmr), DAT_SUCCESS);
        m.lmr = DAT_HANDLE_NULL;
        expect_type(do_write(s, &in, 1), DAT_PRIVILEGES_VIOLATION, "rdma_write from a freed LMR");
        expect_type(do_recv(s, &in, 1), DAT_PRIVILEGES_VIOLATION, "recv into a freed LMR");
        refusals_then_round_trip(s);
        dto_mem_free(&m);
        dto_mem_free(&ro);
}

static void seen_lmr_server(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);                 /* after the client's writes into our buffer */
        dto_fill(s->mem.buf, 100, 77);
        dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, 100) }, 1, 9);
        round_trip_server(s, NULL);
}

Test(DTO_SUITE(refuse), a_post_after_one_from_the_same_lmr_is_still_checked)
{
        dto_run(NULL, seen_lmr_server, seen_lmr_client, NULL);
}

/* The same after the EP's PZ changed (dat_ep_modify, on an unconnected EP,
 * where receives may be posted ahead): the LMR the last receive used is of
 * the old PZ, DAT_PROTECTION_VIOLATION. */
static void seen_lmr_pz_client(struct dto_side *s, void *arg)
{
        struct dto_mem m = dto_mem_new(s, DAT_HANDLE_NULL, 4096, DAT_MEM_PRIV_ALL_FLAG);
        DAT_LMR_TRIPLET in = dto_iov(&m, 0, 100);
        DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        DAT_EP_PARAM p = { 0 };

        (void)arg;
        DTO_ASSERT_EQ(dat_pz_create(s->ia, &pz2), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_evd_create(s->ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_create(s->ia, s->pz, evd, evd, s->conn_evd, NULL, &ep), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ep_post_recv(ep, 1, &in, dto_cookie(1), 0), DAT_SUCCESS);
        p.pz_handle = pz2;
        DTO_ASSERT_EQ(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE, &p), DAT_SUCCESS);
        expect_type(dat_ep_post_recv(ep, 1, &in, dto_cookie(2), 0), DAT_PROTECTION_VIOLATION,
                    "recv from the LMR just used, the EP's PZ changed since");
        DTO_ASSERT_EQ(dat_ep_free(ep), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_evd_free(evd), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_pz_free(pz2), DAT_SUCCESS);
        dto_mem_free(&m);
        refusals_then_round_trip(s);
}

Test(DTO_SUITE(refuse), a_receive_after_one_from_the_same_lmr_is_checked_against_a_new_pz)
{
        dto_run(NULL, round_trip_server, seen_lmr_pz_client, NULL);
}
