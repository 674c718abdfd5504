/* The fault tests' shared checks (dto_fault.h). */
#include "config.h"

#include "tests/dto/dto_fault.h"

#include <string.h>

void dto_posted_add(struct dto_posted_list *l, uint64_t cookie, DAT_DTOS op)
{
        DTO_ASSERTF(l->n < DTO_POSTED_MAX, "more than %d DTOs tracked", DTO_POSTED_MAX);
        l->d[l->n++] = (struct dto_posted){ .cookie = cookie, .op = op };
}

void dto_expect_all(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, const struct dto_posted_list *l,
                    DAT_DTO_COMPLETION_STATUS status)
{
        for (unsigned i = 0; i < l->n; i++)
                dto_expect_dto(evd, ep, l->d[i].cookie, status, DTO_ANY_LENGTH, l->d[i].op);
}

DAT_EP_STATE dto_ep_state(DAT_EP_HANDLE ep)
{
        DAT_EP_STATE st = (DAT_EP_STATE)-1;

        DTO_ASSERT_EQ(dat_ep_get_status(ep, &st, NULL, NULL), DAT_SUCCESS);
        return st;
}

static void record(struct dto_posted_list *l, uint64_t cookie, DAT_DTOS op)
{
        if (l)
                dto_posted_add(l, cookie, op);
}

void dto_post_write(DAT_EP_HANDLE ep, DAT_LMR_TRIPLET iov, uint64_t cookie, DAT_RMR_TRIPLET remote,
                    struct dto_posted_list *l)
{
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(ep, 1, &iov, dto_cookie(cookie), &remote,
                                             DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        record(l, cookie, DAT_DTO_RDMA_WRITE);
}

void dto_post_read(DAT_EP_HANDLE ep, DAT_LMR_TRIPLET iov, uint64_t cookie, DAT_RMR_TRIPLET remote,
                   struct dto_posted_list *l)
{
        DTO_ASSERT_EQ(dat_ep_post_rdma_read(ep, 1, &iov, dto_cookie(cookie), &remote,
                                            DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        record(l, cookie, DAT_DTO_RDMA_READ);
}

void dto_post_send_one(DAT_EP_HANDLE ep, DAT_LMR_TRIPLET iov, uint64_t cookie,
                       struct dto_posted_list *l)
{
        DTO_ASSERT_EQ(dat_ep_post_send(ep, 1, &iov, dto_cookie(cookie),
                                       DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        record(l, cookie, DAT_DTO_SEND);
}

void dto_post_recv_one(DAT_EP_HANDLE ep, DAT_LMR_TRIPLET iov, uint64_t cookie,
                       struct dto_posted_list *l)
{
        DTO_ASSERT_EQ(dat_ep_post_recv(ep, 1, &iov, dto_cookie(cookie),
                                       DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        record(l, cookie, DAT_DTO_RECEIVE);
}

void dto_expect_broken(struct dto_side *s, DAT_EP_HANDLE ep)
{
        DAT_EVENT ev = dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);

        DTO_ASSERTF(ev.event_data.connect_event_data.ep_handle == ep,
                    "BROKEN names EP %p, expected %p", ev.event_data.connect_event_data.ep_handle,
                    ep);
        DTO_ASSERT_EQ(dto_ep_state(ep), DAT_EP_STATE_DISCONNECTED);
}

struct dto_remote dto_rmr_bind_range(struct dto_side *s, DAT_EP_HANDLE ep, DAT_PZ_HANDLE pz,
                                     const struct dto_mem *m, DAT_VLEN off, DAT_VLEN len,
                                     DAT_MEM_PRIV_FLAGS privileges)
{
        DAT_LMR_TRIPLET range = dto_iov(m, off, len);
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
        DAT_RMR_CONTEXT ctx = 0;
        DAT_RMR_COOKIE cookie;
        DAT_EVENT ev;
        DAT_RETURN r;

        DTO_ASSERT_EQ(dat_rmr_create(pz ? pz : s->pz, &rmr), DAT_SUCCESS);
        cookie.as_64 = 0xb1d0 + off;
        r = dat_rmr_bind(rmr, m->lmr, &range, privileges, DAT_VA_TYPE_VA, ep, cookie,
                         DAT_COMPLETION_DEFAULT_FLAG, &ctx);
        DTO_ASSERTF(r == DAT_SUCCESS, "dat_rmr_bind(priv 0x%x): 0x%08x", privileges, r);
        ev = dto_wait_event(s->request_evd);
        DTO_ASSERTF(ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT,
                    "event 0x%x, expected the RMR bind completion", ev.event_number);
        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.status, DAT_RMR_BIND_SUCCESS);
        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.user_cookie.as_64, cookie.as_64);
        DTO_ASSERT(ev.event_data.rmr_completion_event_data.rmr_handle == rmr);
        return (struct dto_remote){ .addr = range.virtual_address, .len = len, .rmr_context = ctx };
}
