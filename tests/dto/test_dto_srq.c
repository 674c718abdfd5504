/* Shared receive queues (dat_srq_post_recv(3DAT)): several connected EPs
 * taking their receives from one SRQ, on the transport this program was
 * built for (tests/dto/dto_fixture.h). */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(srq);

#define N_EPS 3
#define PER_EP 2
#define SLOT 8192

static DAT_VLEN msg_len(unsigned e, unsigned j)
{
        return 1000 + 100 * e + j;
}

static uint64_t msg_seed(unsigned e, unsigned j)
{
        return 10 * e + j + 1;
}

static void srq_post(struct dto_side *s, DAT_VLEN off, DAT_VLEN len, uint64_t cookie)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, off, len);

        DTO_ASSERT_EQ(dat_srq_post_recv(s->srq, 1, &iov, dto_cookie(cookie)), DAT_SUCCESS);
}

/* Takes N_EPS * PER_EP receive completions: each from the EP its message
 * came on, in that EP's send order, its data in the buffer its cookie
 * names (every buffer used once). */
static void take_srq_completions(struct dto_side *s)
{
        unsigned next[N_EPS] = { 0 };
        bool used[N_EPS * PER_EP] = { false };

        for (unsigned n = 0; n < N_EPS * PER_EP; n++) {
                DAT_EVENT ev = dto_wait_event(s->recv_evd);
                const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
                unsigned e = N_EPS, slot;

                DTO_ASSERT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT);
                DTO_ASSERT_EQ(d->status, DAT_DTO_SUCCESS);
                DTO_ASSERT_EQ(d->operation, DAT_DTO_RECEIVE);
                for (unsigned i = 0; i < N_EPS; i++)
                        if (d->ep_handle == s->ep[i])
                                e = i;
                DTO_ASSERTF(e < N_EPS, "a completion of EP %p, none of ours", d->ep_handle);
                slot = (unsigned)(d->user_cookie.as_64 - 100);
                DTO_ASSERTF(slot < N_EPS * PER_EP && !used[slot], "cookie %llu",
                            (unsigned long long)d->user_cookie.as_64);
                used[slot] = true;
                DTO_ASSERTF(next[e] < PER_EP, "EP %u: more messages than sent", e);
                /* dat_srq_post_recv(3DAT): in the order of the Sends of
                 * each connection */
                DTO_ASSERT_EQ(d->transfered_length, msg_len(e, next[e]));
                dto_verify(s->mem.buf + slot * SLOT, msg_len(e, next[e]), msg_seed(e, next[e]));
                next[e]++;
        }
}

static void srq_server(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned k = 0; k < N_EPS * PER_EP; k++)
                srq_post(s, k * SLOT, SLOT, 100 + k);
        dto_barrier(s);
        take_srq_completions(s);
}

static void srq_client(struct dto_side *s, void *arg)
{
        (void)arg;
        if (!s->cfg->no_connect)
                dto_barrier(s);
        for (unsigned j = 0; j < PER_EP; j++) {
                for (unsigned e = 0; e < N_EPS; e++) {
                        DAT_VLEN off = (j * N_EPS + e) * SLOT;
                        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, off, msg_len(e, j));

                        dto_fill(s->mem.buf + off, msg_len(e, j), msg_seed(e, j));
                        DTO_ASSERT_EQ(dat_ep_post_send(s->ep[e], 1, &iov,
                                                       dto_cookie(10 * e + j), 0), DAT_SUCCESS);
                }
        }
        for (unsigned n = 0; n < N_EPS * PER_EP; n++) {
                DAT_EVENT ev = dto_wait_event(s->request_evd);

                DTO_ASSERT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT);
                DTO_ASSERT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        }
}

/* dat_srq_post_recv(3DAT): a buffer posted to the SRQ "can be used for the
 * incoming message ... by any connected EP that uses SRQ"; its completion
 * is that EP's (ep_handle), and "the posted Recv DTOs will complete in the
 * order of Send postings to the other endpoint of each connection" (no
 * order among connections).  Three EPs, two messages each, interleaved. */
Test(DTO_SUITE(srq), srq_buffers_serve_every_ep_in_per_connection_order)
{
        struct dto_config cfg = { .n_eps = N_EPS, .srq = true };

        dto_run(&cfg, srq_server, srq_client, NULL);
}

static void early_srq_server(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned k = 0; k < N_EPS * PER_EP; k++)
                srq_post(s, k * SLOT, SLOT, 100 + k);
        dto_expect_empty(s->recv_evd);
        dto_connect(s);
        take_srq_completions(s);
}

static void early_srq_client(struct dto_side *s, void *arg)
{
        dto_connect(s);
        srq_client(s, arg);
}

/* dat_srq_post_recv(3DAT): "The operation is valid for all states of the
 * Shared Receive Queue": buffers posted before any EP is connected are
 * taken by the messages that come after. */
Test(DTO_SUITE(srq), srq_buffers_posted_before_connecting_are_used)
{
        struct dto_config cfg = { .n_eps = N_EPS, .srq = true, .no_connect = true };

        dto_run(&cfg, early_srq_server, early_srq_client, NULL);
}

/* ---- segments -------------------------------------------------------------------- */

#define BIG 200003

static void srq_segments_server(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov[64];
        unsigned n = (unsigned)s->ep_attr.max_recv_iov;
        DAT_VLEN seg = BIG / n + 1, at = 0;

        (void)arg;
        DTO_ASSERT(n >= 1 && n <= 64);
        for (unsigned k = 0; k < n; k++)
                iov[k] = dto_iov(&s->mem, k * (seg + 64) + 1, seg);
        DTO_ASSERT_EQ(dat_srq_post_recv(s->srq, (DAT_COUNT)n, iov, dto_cookie(5)), DAT_SUCCESS);
        dto_barrier(s);
        dto_expect_recv(s, s->ep[1], 5, BIG);
        for (unsigned k = 0; k < n; k++) {
                DAT_VLEN filled = BIG - at < seg ? BIG - at : seg;

                dto_verify_at((void *)(uintptr_t)iov[k].virtual_address, filled, 6, at);
                at += filled;
        }
}

static void srq_segments_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 3, BIG);

        (void)arg;
        dto_fill(s->mem.buf + 3, BIG, 6);
        dto_barrier(s);
        dto_send_wait(s, s->ep[1], &iov, 1, 7);
}

/* dat_srq_post_recv(3DAT): "The local_iov segments are filled in the I/O
 * Vector order until the whole message is received": an SRQ buffer of
 * max_recv_iov segments takes a message over 16 KiB on the second EP. */
Test(DTO_SUITE(srq), srq_buffer_segments_fill_in_order)
{
        struct dto_config cfg = { .n_eps = 2, .srq = true, .buf_len = 1 << 20 };

        dto_run(&cfg, srq_segments_server, srq_segments_client, NULL);
}

/* ---- refusals ------------------------------------------------------------------------ */

static void expect_srq_refusal(struct dto_side *s, DAT_SRQ_HANDLE srq, DAT_LMR_TRIPLET *iov,
                               DAT_COUNT n, DAT_RETURN type, const char *why)
{
        DAT_RETURN r = dat_srq_post_recv(srq, n, iov, dto_cookie(1));

        (void)s;
        DTO_ASSERTF(DAT_GET_TYPE(r) == type, "dat_srq_post_recv with %s: 0x%08x, expected type "
                    "0x%08x", why, r, type);
}

static void srq_refusals_server(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov[80];
        DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
        struct dto_mem ro = dto_mem_new(s, DAT_HANDLE_NULL, 4096, DAT_MEM_PRIV_LOCAL_READ_FLAG);
        struct dto_mem other;
        DAT_LMR_TRIPLET t;

        (void)arg;
        for (unsigned k = 0; k < 80; k++)
                iov[k] = dto_iov(&s->mem, k * 10, 10);
        expect_srq_refusal(s, DAT_HANDLE_NULL, iov, 1, DAT_INVALID_HANDLE, "a NULL SRQ");
        expect_srq_refusal(s, s->ep[0], iov, 1, DAT_INVALID_HANDLE, "an EP handle");
        expect_srq_refusal(s, s->srq, iov, -1, DAT_INVALID_PARAMETER, "-1 segments");
        expect_srq_refusal(s, s->srq, iov, s->ep_attr.max_recv_iov + 1, DAT_INVALID_PARAMETER,
                           "max_recv_iov + 1 segments");
        t = iov[0];
        t.lmr_context += 0x10001;
        expect_srq_refusal(s, s->srq, &t, 1, DAT_PRIVILEGES_VIOLATION, "an unknown lmr_context");
        t = dto_iov(&ro, 0, 100);
        expect_srq_refusal(s, s->srq, &t, 1, DAT_PRIVILEGES_VIOLATION, "a read-only LMR");
        DTO_ASSERT_EQ(dat_pz_create(s->ia, &pz2), DAT_SUCCESS);
        other = dto_mem_new(s, pz2, 4096, DAT_MEM_PRIV_ALL_FLAG);
        t = dto_iov(&other, 0, 100);
        expect_srq_refusal(s, s->srq, &t, 1, DAT_PROTECTION_VIOLATION, "another PZ's LMR");
        t = dto_iov(&s->mem, s->mem.len - 50, 50);
        t.segment_length = 100;
        expect_srq_refusal(s, s->srq, &t, 1, DAT_INVALID_PARAMETER, "a segment past its LMR");
        /* full: srq_max_recv_dtos (4) buffers */
        for (unsigned k = 0; k < 4; k++)
                srq_post(s, k * SLOT, SLOT, 200 + k);
        expect_srq_refusal(s, s->srq, iov, 1, DAT_INSUFFICIENT_RESOURCES, "a full SRQ");
        /* none of the refused ones was posted: the first message takes the
         * first good buffer */
        dto_barrier(s);
        dto_expect_recv(s, s->ep[0], 200, 100);
        dto_verify(s->mem.buf, 100, 9);
}

static void one_send_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 100);

        (void)arg;
        dto_fill(s->mem.buf, 100, 9);
        dto_barrier(s);
        dto_send_wait(s, s->ep[0], &iov, 1, 1);
}

/* dat_srq_post_recv(3DAT) RETURN VALUES: DAT_INVALID_HANDLE (not an SRQ),
 * DAT_INVALID_PARAMETER (segments out of range, a segment outside its LMR),
 * DAT_PRIVILEGES_VIOLATION (an invalid LMR or one without local write),
 * DAT_PROTECTION_VIOLATION (an LMR of another PZ than the SRQ's),
 * DAT_INSUFFICIENT_RESOURCES (max_recv_dtos buffers posted); none of them
 * posts anything. */
Test(DTO_SUITE(srq), srq_post_refusals)
{
        struct dto_config cfg = { .srq = true, .srq_max_recv_dtos = 4 };

        dto_run(&cfg, srq_refusals_server, one_send_client, NULL);
}

/* ---- low watermark ---------------------------------------------------------------- */

#define LW_BUFFERS 6
#define LW_MARK 3

static void lw_server(struct dto_side *s, void *arg)
{
        DAT_EVENT ev;

        (void)arg;
        for (unsigned k = 0; k < LW_BUFFERS; k++)
                srq_post(s, k * SLOT, SLOT, 100 + k);
        DTO_ASSERT_EQ(dat_srq_set_lw(s->srq, LW_MARK), DAT_SUCCESS);
        dto_barrier(s);
        /* Messages taking buffers leave 5, 4, 3 (not below the mark), then
         * 2 (below): one event, not one per message. */
        for (unsigned n = 0; n < LW_BUFFERS - LW_MARK + 1; n++) {
                ev = dto_wait_event(s->recv_evd);
                DTO_ASSERT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        }
        ev = dto_wait_event(s->async_evd);
        DTO_ASSERT_EQ(ev.event_number, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR);
        DTO_ASSERT_EQ(ev.event_data.asynch_error_event_data.dat_handle, s->srq);
        DTO_ASSERT_EQ(ev.event_data.asynch_error_event_data.reason, DAT_SRQ_LOW_WATERMARK_EVENT);
        dto_expect_empty(s->async_evd);
        dto_barrier(s);
}

static void lw_client(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);
        for (unsigned n = 0; n < LW_BUFFERS - LW_MARK + 1; n++)
                dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, 64) }, 1,
                              n + 1);
        dto_barrier(s);
}

/* dat_srq_set_lw(3DAT): once fewer buffers than the low watermark are left
 * on the SRQ the Consumer gets one asynchronous event (here
 * DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR naming the SRQ with reason
 * DAT_SRQ_LOW_WATERMARK_EVENT: DAT 2.0 has no event number of its own),
 * fired by the arrivals that take the buffers. */
Test(DTO_SUITE(srq), arrivals_below_the_low_watermark_fire_one_event)
{
        struct dto_config cfg = { .srq = true };

        dto_run(&cfg, lw_server, lw_client, NULL);
}
