/* An EP's DTO queues (dto_engine.h): the request ring and the receive
 * ring, each with a slot of segments per entry, sized for the EP's
 * attributes.
 *
 * dat_ep_modify changes max_request_dtos, max_recv_dtos and the IOV limits
 * before a connection, and Receives may be posted then (ep_modify.c keeps
 * each limit at or above what the EP holds).  The limits a post checks are
 * the copies kept here (req_cap, req_iov_max, recv_cap, recv_iov_max,
 * which dto_ep_fits compares with the EP's attributes): the next post
 * after a modify finds them changed and refits the queues first, so that
 * it is held to the new limits at no cost to the posts that find nothing
 * changed.  A ring whose size or slots no longer fit is replaced by one
 * that does, holding the entries already posted in their order; nothing
 * else refers to a slot then, since the data path runs only on a
 * connection, and no attribute changes during one.
 *
 * A ring is never made smaller than what it holds, nor a slot narrower
 * than a posted entry's segments: a post racing the modify may have gone
 * in under the old limits.  The slot's width (the stride) may then stay
 * above the limit until the queue is refitted again. */
#include "config.h"

#include "libdat/dto_engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libdat/ep.h"

/* The ring that holds cap entries: the smallest power of two not below
 * it (cap is at most 2^30 here). */
static uint32_t ring_for(uint32_t cap)
{
        uint32_t n = 1;

        while (n < cap)
                n <<= 1;
        return n;
}

static uint32_t at_least_one(DAT_COUNT v)
{
        return v > 0 ? (uint32_t)v : 1;
}

static uint32_t max_u32(uint32_t a, uint32_t b)
{
        return a > b ? a : b;
}

/* A ring of n entries of entry_size bytes and its segments, stride per
 * entry; both or neither. */
static int ring_alloc(size_t entry_size, uint32_t n, uint32_t stride, void **ring,
                      DAT_LMR_TRIPLET **iov)
{
        *ring = calloc(n, entry_size);
        *iov = calloc((size_t)n * stride, sizeof(**iov));
        if (*ring && *iov)
                return 0;
        free(*ring);
        free(*iov);
        return -ENOMEM;
}

/* The request ring for cap entries and iov segments each, the requests in
 * [head, tail) kept in their slots of the new size (the counters run free:
 * slot = counter & mask). */
static int fit_requests(struct dto_ep *d, uint32_t cap, uint32_t iov)
{
        uint32_t n = ring_for(max_u32(cap, d->tail - d->head)), stride = iov;
        struct dto_req *ring;
        DAT_LMR_TRIPLET *segs;

        for (uint32_t i = d->head; i != d->tail; i++)
                stride = max_u32(stride, dto_req_at(d, i)->nseg);
        if (!d->req || n != d->req_mask + 1 || stride != d->req_iov_stride) {
                if (ring_alloc(sizeof(*ring), n, stride, (void **)&ring, &segs) < 0)
                        return -ENOMEM;
                for (uint32_t i = d->head; i != d->tail; i++) {
                        const uint32_t from = dto_req_slot(d, i), to = i & (n - 1);

                        ring[to] = d->req[from];
                        memcpy(&segs[(size_t)to * stride], &d->req_iov[(size_t)from * d->req_iov_stride],
                               (size_t)ring[to].nseg * sizeof(*segs));
                }
                free(d->req);
                free(d->req_iov);
                d->req = ring;
                d->req_iov = segs;
                d->req_mask = n - 1;
                d->req_iov_stride = stride;
        }
        d->req_cap = cap;
        d->req_iov_max = iov;
        return 0;
}

/* The receive ring for cap entries and iov segments each, the Receives
 * posted moved to its first slots, in order. */
static int fit_receives(struct dto_ep *d, uint32_t cap, uint32_t iov)
{
        uint32_t n = ring_for(max_u32(cap, d->rq_count)), stride = iov;
        struct dto_recv *ring;
        DAT_LMR_TRIPLET *segs;

        for (uint32_t k = 0; k < d->rq_count; k++)
                stride = max_u32(stride, d->rq[(d->rq_head + k) & d->recv_mask].nseg);
        if (!d->rq || n != d->recv_mask + 1 || stride != d->recv_iov_stride) {
                if (ring_alloc(sizeof(*ring), n, stride, (void **)&ring, &segs) < 0)
                        return -ENOMEM;
                for (uint32_t k = 0; k < d->rq_count; k++) {
                        const struct dto_recv *r = &d->rq[(d->rq_head + k) & d->recv_mask];

                        ring[k] = *r;
                        ring[k].iov = &segs[(size_t)k * stride];
                        memcpy(ring[k].iov, r->iov, (size_t)r->nseg * sizeof(*segs));
                }
                free(d->rq);
                free(d->rq_iov);
                d->rq = ring;
                d->rq_iov = segs;
                d->rq_head = 0;
                d->recv_mask = n - 1;
                d->recv_iov_stride = stride;
        }
        d->recv_cap = cap;
        d->recv_iov_max = iov;
        return 0;
}

int dto_queues_fit(struct dto_ep *d, const DAT_EP_ATTR *a)
{
        const uint32_t req_cap = at_least_one(a->max_request_dtos);
        const uint32_t recv_cap = at_least_one(a->max_recv_dtos);

        if (req_cap > (1u << 30) || recv_cap > (1u << 30))
                return -ENOMEM;
        if (fit_requests(d, req_cap, at_least_one(a->max_request_iov)) < 0)
                return -ENOMEM;
        return fit_receives(d, recv_cap, at_least_one(a->max_recv_iov));
}

void dto_queues_free(struct dto_ep *d)
{
        free(d->req);
        free(d->req_iov);
        free(d->rq);
        free(d->rq_iov);
        free(d->resp);
}

void dto_recv_move(struct dto_ep *d, uint32_t from, uint32_t to)
{
        struct dto_recv *dst = &d->rq[to];
        const struct dto_recv *src = &d->rq[from];

        *dst = *src;
        dst->iov = &d->rq_iov[(size_t)to * d->recv_iov_stride];
        memcpy(dst->iov, src->iov, (size_t)src->nseg * sizeof(*src->iov));
}

DAT_COUNT dto_ep_posted_recv_segments(struct ep *ep)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);
        uint32_t most = 0;

        /* No data path: no Receive was ever posted. */
        if (!d)
                return 0;
        dat_lock(&d->lock);
        for (uint32_t k = 0; k < d->rq_count; k++)
                most = max_u32(most, d->rq[(d->rq_head + k) & d->recv_mask].nseg);
        dat_unlock(&d->lock);
        return (DAT_COUNT)most;
}
