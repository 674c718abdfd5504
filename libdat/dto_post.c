/* The DAT entry points that post DTOs (dto.h gives the semantics):
 * dat_ep_post_send, dat_ep_post_recv, dat_ep_post_rdma_write,
 * dat_ep_post_rdma_read, and the posting half of dat_rmr_bind.
 *
 * Error codes where the man pages leave room:
 * - a completion flag the operation does not take (SOLICITED_WAIT on an
 *   RDMA, anything but UNSIGNALLED on a receive, unknown bits), or
 *   UNSIGNALLED on an EP not configured for it: DAT_INVALID_PARAMETER
 *   naming the flags argument;
 * - num_segments below 0 or above the EP's max_*_iov: ARG2; local_iov NULL
 *   with segments: ARG3; remote_iov NULL: ARG5;
 * - a full request or receive queue: DAT_INSUFFICIENT_RESOURCES |
 *   DAT_RESOURCE_TEP;
 * - dat_ep_post_recv on an EP created with an SRQ: DAT_INVALID_STATE (its
 *   receives are the SRQ's: dat_srq_post_recv). */
#include "config.h"

#include "libdat/dto_engine.h"

#include <string.h>

#include "libdat/ep.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"
#include "libdat/lmr.h"
#include "libdat/mem_ctx.h"
#include "libdat/pz.h"
#include "libdat/rmr.h"
#include "libdat/shm_direct.h"

#define REQUEST_FLAGS                                                                    \
        (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |             \
         DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG)

static bool ep_connected(DAT_EP_STATE s)
{
        return s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_CONNECTED_SINGLE_PATH ||
               s == DAT_EP_STATE_CONNECTED_MULTI_PATH;
}

/* dto_ep_get without its call in the usual case: made and fitted. */
static inline struct dto_ep *data_path(struct ep *ep)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);

        return _likely_(d && dto_ep_fits(d, &ep->attr)) ? d : dto_ep_get(ep);
}

/* A post's segments into its queue entry: one, the usual case, by
 * assignment (a memcpy of a size known only at run time compiles to a rep
 * movs, slow to start, on every message's path). */
static inline void copy_triplets(DAT_LMR_TRIPLET *to, const DAT_LMR_TRIPLET *from, DAT_COUNT n)
{
        if (n == 1)
                to[0] = from[0];
        else if (n > 1)
                memcpy(to, from, (size_t)n * sizeof(*from));
}

/* check_segments when the segments must be looked up. */
static DAT_RETURN look_up_segments(struct ep *ep, struct lmr_seen *seen, DAT_COUNT n,
                                   const DAT_LMR_TRIPLET *iov, DAT_MEM_PRIV_FLAGS priv, uint64_t *total,
                                   bool *outside)
{
        struct ia *ia = ep_ia(ep);
        /* Before the lookups: a release after this read shows (lmr_seen.h). */
        uint64_t releases = mem_ctx_release_count();

        *total = 0;
        for (DAT_COUNT i = 0; i < n; i++) {
                struct lmr *lmr = NULL;
                DAT_RETURN r = lmr_find_by_context(ia, iov[i].lmr_context, iov[i].virtual_address,
                                                   iov[i].segment_length, priv, &lmr);

                switch (DAT_GET_TYPE(r)) {
                case DAT_SUCCESS:
                        break;
                case DAT_LENGTH_ERROR:
                        *outside = true;
                        continue;
                default:
                        return DAT_ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE);
                }
                if (!ep_pz_is(ep, &lmr->pz->obj))
                        return DAT_ERR(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE);
                if (n == 1)
                        lmr_seen_keep(seen, releases, ep->pz, iov->lmr_context, lmr->privileges,
                                      lmr->registered_address,
                                      lmr->registered_address + lmr->registered_length);
                *total += iov[i].segment_length;
        }
        return DAT_SUCCESS;
}

/* What the request's local segments may do (the man pages' return codes):
 * an lmr_context no LMR of the IA has, or one lacking the privilege:
 * DAT_PRIVILEGES_VIOLATION; an LMR of another PZ: DAT_PROTECTION_VIOLATION;
 * a segment outside its LMR sets *outside (the callers refuse it with
 * DAT_INVALID_PARAMETER).  *total gets the bytes.  A single segment in the
 * LMR the last such post found (seen) needs no lookup: inline, that case
 * costs no call. */
static inline DAT_RETURN check_segments(struct ep *ep, struct lmr_seen *seen, DAT_COUNT n,
                                        const DAT_LMR_TRIPLET *iov, DAT_MEM_PRIV_FLAGS priv,
                                        uint64_t *total, bool *outside)
{
        *outside = false;
        if (n == 1 && lmr_seen_covers(seen, ep->pz, iov, priv)) {
                *total = iov->segment_length;
                return DAT_SUCCESS;
        }
        return look_up_segments(ep, seen, n, iov, priv, total, outside);
}

struct post_args {
        uint8_t kind;
        uint8_t ext;                    /* enum dto_ext_kind, 0: none */
        uint32_t immed;
        uint64_t operand[2];
        DAT_COUNT n;
        const DAT_LMR_TRIPLET *iov;
        DAT_DTO_COOKIE cookie;
        const DAT_RMR_TRIPLET *remote;
        DAT_COMPLETION_FLAGS flags;
        int flags_arg;
};

/* The argument checks before the EP's lock. */
static DAT_RETURN check_request(struct ep *ep, const struct post_args *a)
{
        DAT_COMPLETION_FLAGS allowed = REQUEST_FLAGS;

        if (a->kind != DTO_REQ_SEND)
                allowed &= ~(DAT_COMPLETION_FLAGS)DAT_COMPLETION_SOLICITED_WAIT_FLAG;
        if (a->flags & ~allowed)
                return DAT_ERR_ARG(a->flags_arg);
        /* dat_ep_post_send(3DAT): UNSIGNALLED "is only valid if the Endpoint
         * Request Completion Flags" have it. */
        if ((a->flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
            !(ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG))
                return DAT_ERR_ARG(a->flags_arg);
        if (a->n < 0 || a->n > ep->attr.max_request_iov || a->n > DTO_MAX_SEGS)
                return DAT_ERR_ARG(2);
        if (a->n > 0 && !a->iov)
                return DAT_ERR_ARG(3);
        if (a->kind != DTO_REQ_SEND && !a->remote)
                return DAT_ERR_ARG(5);
        /* dat_ep_post_send(3DAT) and the RDMA posts: valid on a Connected
         * or Disconnected EP (where the request is flushed at once). */
        if (!ep_connected(ep_state(ep)) && ep_state(ep) != DAT_EP_STATE_DISCONNECTED)
                return ep_invalid_state(ep_state(ep));
        return DAT_SUCCESS;
}

/* The bytes an RDMA moves, and the man pages' DAT_LENGTH_ERROR:
 * dat_ep_post_rdma_read(3DAT), a local buffer too small for the remote
 * data; dat_ep_post_rdma_write(3DAT), a remote buffer too small for the
 * local data. */
static DAT_RETURN rdma_length(const struct post_args *a, uint64_t local_total, uint64_t *length)
{
        uint64_t remote = a->remote->segment_length;

        /* An atomic moves 8 bytes each way. */
        if (a->kind == DTO_REQ_ATOMIC) {
                if (local_total < sizeof(uint64_t))
                        return DAT_ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE);
                *length = sizeof(uint64_t);
                return DAT_SUCCESS;
        }

        if (a->kind == DTO_REQ_READ) {
                if (local_total < remote)
                        return DAT_ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE);
                *length = remote;
        } else {
                if (remote < local_total)
                        return DAT_ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE);
                *length = local_total;
        }
        return DAT_SUCCESS;
}

/* Queues a request that passed every check: done at once with
 * local_status when that is an error (a local error completion) or when
 * done_here (a direct Write: in place already), else to go out.  Under
 * lock. */
static _always_inline_ DAT_RETURN enqueue_request(struct dto_ep *d, const struct post_args *a,
                                                  uint64_t total, DAT_DTO_COMPLETION_STATUS local_status,
                                                  bool done_here)
{
        struct dto_req *r;
        uint32_t slot;

        if (d->tail - d->head >= d->req_cap || (uint32_t)a->n > d->req_iov_max)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        slot = dto_req_slot(d, d->tail);
        r = &d->req[slot];
        /* Field by field: a compound literal zeroes the whole entry first,
         * with a rep stos slow to start, on every message's path. */
        r->cookie = a->cookie;
        r->flags = a->flags;
        r->kind = a->kind;
        r->done = r->local = r->sent = r->cma = false;
        r->status = DAT_DTO_SUCCESS;
        r->seq = 0;
        r->nseg = (uint32_t)a->n;
        r->length = total;
        r->rmr_context = a->remote ? a->remote->rmr_context : 0;
        r->remote_addr = a->remote ? a->remote->virtual_address : 0;
        r->rmr = DAT_HANDLE_NULL;
        r->bind_context = 0;
        copy_triplets(&d->req_iov[(size_t)slot * d->req_iov_stride], a->iov, a->n);
        r->ext = a->ext;
        r->immed = a->immed;
        r->operand[0] = a->operand[0];
        r->operand[1] = a->operand[1];
        if (local_status != DAT_DTO_SUCCESS || done_here) {
                r->local = r->done = true;
                r->status = local_status;
        } else {
                r->seq = d->next_seq++;
        }
        d->tail++;
        __atomic_add_fetch(&d->ep->request_outstanding, 1, __ATOMIC_RELAXED);
        return DAT_SUCCESS;
}

/* An RDMA Write copied straight into the target's memory (shm_direct.h),
 * which then completes at once: the data is placed.  Only with nothing
 * of ours outstanding, every earlier request acknowledged, hence served by
 * the target: a Write through the channel still on its way could land
 * after this one and undo it, and completions go in posting order.  True
 * when done; false, nothing done, when it goes through the channel.
 * For a Write (the caller checked), under lock, running; completions of
 * what held acknowledgements cover go into b. */
static _always_inline_ bool write_direct(struct dto_ep *d, const struct post_args *a, uint64_t length,
                                         struct dto_batch *b)
{
        struct iovec iov[DTO_MAX_SEGS];
        int n = 0;

        if (!d->ch->direct || !shm_direct_imports_any(d->ch->direct) || a->ext)
                return false;
        /* What a poll held back (dto_engine.h) may be all that is
         * outstanding. */
        dto_take_held_acks(d, b);
        /* An empty queue has room for it (enqueue_request must not refuse
         * a Write already made). */
        if (d->head != d->tail || (uint32_t)a->n > d->req_iov_max || length > SHM_DIRECT_WRITE_MAX)
                return false;
        for (DAT_COUNT i = 0; i < a->n; i++)
                if (a->iov[i].segment_length > 0)
                        iov[n++] = (struct iovec){ (void *)(uintptr_t)a->iov[i].virtual_address,
                                                   (size_t)a->iov[i].segment_length };
        if (!shm_direct_write(d->ch->direct, a->remote->rmr_context, a->remote->virtual_address,
                              iov, n, length))
                return false;
        d->bytes_sent += length;
        return true;
}

/* The longest Send or RDMA a post may ask for: the transport's.  The EP's
 * max_message_size / max_rdma_size are what the consumer asked for, and,
 * as on DAPL's providers (which never check them on a post: programs set
 * max_rdma_size 64 KiB and move more, or leave 0), no limit of their own. */
static uint64_t ep_max_size(const struct ep *ep, bool message)
{
        const struct transport_caps *caps = ep_ia(ep)->caps;

        return message ? caps->max_message_size : caps->max_rdma_size;
}

/* A post whose EP is not libdat's: another provider's goes to it
 * (foreign.h), anything else is an invalid handle.  The extensions' posts
 * never come here with another provider's EP: dat_extension_op hands
 * those over whole. */
static DAT_RETURN __attribute__((noinline, cold)) post_foreign(DAT_EP_HANDLE ep_handle,
                                                                const struct post_args *a)
{
        const DAT_PROVIDER *p = foreign_provider(ep_handle);
        DAT_LMR_TRIPLET *iov = (DAT_LMR_TRIPLET *)a->iov;

        if (p && !a->ext) {
                switch (a->kind) {
                case DTO_REQ_SEND:
                        return FOREIGN_CALL(p, ep_post_send_func, ep_handle, a->n, iov, a->cookie,
                                            a->flags);
                case DTO_REQ_WRITE:
                        return FOREIGN_CALL(p, ep_post_rdma_write_func, ep_handle, a->n, iov,
                                            a->cookie, a->remote, a->flags);
                case DTO_REQ_READ:
                        return FOREIGN_CALL(p, ep_post_rdma_read_func, ep_handle, a->n, iov,
                                            a->cookie, a->remote, a->flags);
                default:
                        break;
                }
        }
        return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
}

static DAT_RETURN post_request(DAT_EP_HANDLE ep_handle, const struct post_args *a)
{
        struct ep *ep = ep_lookup(ep_handle);
        DAT_DTO_COMPLETION_STATUS local = DAT_DTO_SUCCESS;
        struct dto_batch b;
        struct dto_ep *d;
        uint64_t total, length;
        DAT_RETURN ret;
        bool outside, finish, kick;

        DTO_BATCH_EMPTY(b);
        if (!ep)
                return post_foreign(ep_handle, a);
        ret = check_request(ep, a);
        if (ret != DAT_SUCCESS)
                return ret;
        /* Local read is always granted, as on every RDMA NIC (verbs have
         * no local-read access flag): DAPL's own programs send from LMRs
         * registered DAT_MEM_PRIV_LOCAL_WRITE_FLAG only.  What lands in
         * local memory needs local write. */
        ret = check_segments(ep, &ep->seen_request, a->n, a->iov,
                             a->kind == DTO_REQ_READ || a->kind == DTO_REQ_ATOMIC
                                     ? DAT_MEM_PRIV_LOCAL_WRITE_FLAG
                                     : DAT_MEM_PRIV_NONE_FLAG,
                             &total, &outside);
        /* dat_ep_post_send(3DAT): DAT_INVALID_PARAMETER, "one of the IOV
         * segments pointed to a memory outside its LMR". */
        if (ret == DAT_SUCCESS && outside)
                ret = DAT_ERR_ARG(3);
        length = total;
        if (ret == DAT_SUCCESS && a->kind != DTO_REQ_SEND)
                ret = rdma_length(a, total, &length);
        if (ret != DAT_SUCCESS)
                return ret;
        /* The EP's limits (dat_ep_create(3DAT) attributes), within the
         * transport's. */
        if (length > ep_max_size(ep, a->kind == DTO_REQ_SEND))
                local = DAT_DTO_ERR_LOCAL_LENGTH;
        d = data_path(ep);
        if (!d)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        dat_lock(&d->lock);
        /* On a Disconnected EP (or one whose connection just ended) the
         * request is flushed at once, in order. */
        if (d->state != DTO_RUNNING)
                local = DAT_DTO_ERR_FLUSHED;
        /* Acknowledgements a poll held back (dto_engine.h) may free the
         * queue: taken now when it is full, else by the next poll. */
        else if (d->tail - d->head >= d->req_cap)
                dto_take_held_acks(d, &b);
        if (a->kind == DTO_REQ_WRITE && local == DAT_DTO_SUCCESS && write_direct(d, a, length, &b)) {
                /* In place already: done at once.  Nothing was queued
                 * before it: nothing is left to write or to answer. */
                ret = enqueue_request(d, a, length, DAT_DTO_SUCCESS, true);
                d->tx_next = d->resp_next = d->tail;
                dto_deliver_requests(d, &b);
        } else {
                ret = enqueue_request(d, a, length, local, false);
                if (ret == DAT_SUCCESS && local == DAT_DTO_SUCCESS)
                        dto_tx_post(d);
                else if (ret == DAT_SUCCESS && local == DAT_DTO_ERR_FLUSHED)
                        dto_deliver_requests(d, &b);
                else if (ret == DAT_SUCCESS)
                        /* Like a NIC's local length error: the connection ends. */
                        dto_fail(d, "a request longer than the transport allows");
        }
        finish = dto_needs_finish(d) || b.deferred.n_notice || b.deferred.n_overflowed;
        /* Frames wait for room: the progress thread must watch for it.  And
         * the flush may have sent the Read data a stalled frame waited for:
         * the stash behind it is work again, which a thread sleeping armed
         * would not see (its bytes left the socket long ago). */
        kick = d->state == DTO_RUNNING &&
               (dto_tx_pending(d) ||
                (__atomic_load_n(&d->ia->dto.armed_sleep, __ATOMIC_RELAXED) && dto_work_left(d)));
        dat_unlock(&d->lock);
        if (kick)
                dto_ia_kick(d->ia);
        if (finish)
                dto_finish(d, &b);
        return ret;
}

_public_ DAT_RETURN dat_ep_post_send(DAT_EP_HANDLE ep_handle, DAT_COUNT num_segments,
                                     DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie,
                                     DAT_COMPLETION_FLAGS completion_flags)
{
        struct post_args a = { .kind = DTO_REQ_SEND, .n = num_segments, .iov = local_iov,
                               .cookie = user_cookie, .flags = completion_flags,
                               .flags_arg = 5 };

        return post_request(ep_handle, &a);
}

static DAT_RETURN post_rdma(DAT_EP_HANDLE ep_handle, uint8_t kind, DAT_COUNT num_segments,
                            const DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie,
                            const DAT_RMR_TRIPLET *remote_iov,
                            DAT_COMPLETION_FLAGS completion_flags)
{
        struct post_args a = { .kind = kind, .n = num_segments, .iov = local_iov,
                               .cookie = user_cookie, .remote = remote_iov,
                               .flags = completion_flags, .flags_arg = 6 };

        return post_request(ep_handle, &a);
}

_public_ DAT_RETURN dat_ep_post_rdma_write(DAT_EP_HANDLE ep_handle, DAT_COUNT num_segments,
                                           DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie,
                                           const DAT_RMR_TRIPLET *remote_iov,
                                           DAT_COMPLETION_FLAGS completion_flags)
{
        return post_rdma(ep_handle, DTO_REQ_WRITE, num_segments, local_iov, user_cookie,
                         remote_iov, completion_flags);
}

_public_ DAT_RETURN dat_ep_post_rdma_read(DAT_EP_HANDLE ep_handle, DAT_COUNT num_segments,
                                          DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie,
                                          const DAT_RMR_TRIPLET *remote_iov,
                                          DAT_COMPLETION_FLAGS completion_flags)
{
        return post_rdma(ep_handle, DTO_REQ_READ, num_segments, local_iov, user_cookie,
                         remote_iov, completion_flags);
}

/* ---- receives -------------------------------------------------------------- */

static DAT_RETURN check_recv(struct ep *ep, DAT_COUNT n, const DAT_LMR_TRIPLET *iov,
                             DAT_COMPLETION_FLAGS flags)
{
        uint64_t total;
        bool outside;
        DAT_RETURN ret;

        if (ep->srq != DAT_HANDLE_NULL)
                return DAT_ERR(DAT_INVALID_STATE, DAT_NO_SUBTYPE);
        if (n < 0 || n > ep->attr.max_recv_iov || n > DTO_MAX_SEGS)
                return DAT_ERR_ARG(2);
        if (n > 0 && !iov)
                return DAT_ERR_ARG(3);
        /* dat_ep_post_recv(3DAT): only the notification flag, and only on
         * an EP whose Recv Completion Flags have it. */
        if ((flags & ~(DAT_COMPLETION_FLAGS)DAT_COMPLETION_UNSIGNALLED_FLAG) ||
            ((flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
             !(ep->attr.recv_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG)))
                return DAT_ERR_ARG(5);
        ret = check_segments(ep, &ep->seen_recv, n, iov, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, &total, &outside);
        if (ret == DAT_SUCCESS && outside)
                /* As dat_srq_post_recv does for a segment outside its LMR. */
                ret = DAT_ERR_ARG(3);
        return ret;
}

_public_ DAT_RETURN dat_ep_post_recv(DAT_EP_HANDLE ep_handle, DAT_COUNT num_segments,
                                     DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie,
                                     DAT_COMPLETION_FLAGS completion_flags)
{
        struct ep *ep = ep_lookup(ep_handle);
        struct dto_batch b;
        struct dto_recv *r;
        struct dto_ep *d;
        DAT_RETURN ret;
        uint64_t releases;
        bool finish, kick;

        DTO_BATCH_EMPTY(b);
        if (!ep)
                FOREIGN_ELSE_INVALID(ep_handle, dat_invalid_handle(DAT_HANDLE_TYPE_EP),
                                     ep_post_recv_func, ep_handle, num_segments, local_iov,
                                     user_cookie, completion_flags);
        /* Before the check: a release after this read shows at delivery. */
        releases = mem_ctx_release_count();
        ret = check_recv(ep, num_segments, local_iov, completion_flags);
        if (ret != DAT_SUCCESS)
                return ret;
        d = data_path(ep);
        if (!d)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        dat_lock(&d->lock);
        if (d->rq_count >= d->recv_cap || (uint32_t)num_segments > d->recv_iov_max) {
                dat_unlock(&d->lock);
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        }
        r = &d->rq[(d->rq_head + d->rq_count) & d->recv_mask];
        r->cookie = user_cookie;
        r->flags = completion_flags;
        r->nseg = (uint32_t)num_segments;
        r->checked_at = releases;
        r->iov = &d->rq_iov[(size_t)((d->rq_head + d->rq_count) & d->recv_mask) * d->recv_iov_stride];
        copy_triplets(r->iov, local_iov, num_segments);
        __atomic_add_fetch(&ep->recv_outstanding, 1, __ATOMIC_RELAXED);
        if (d->state == DTO_DEAD) {
                /* The connection is gone: like a QP in the error state, the
                 * receive completes flushed at once. */
                dto_complete_recv(d, r, false, DAT_DTO_ERR_FLUSHED, 0, true, &b);
        } else {
                d->rq_count++;
                /* A Send waiting for this receive goes on now. */
                if (d->state == DTO_RUNNING && d->rnr_deadline_ns)
                        dto_progress_locked(d, &b);
        }
        finish = dto_needs_finish(d) || b.deferred.n_notice || b.deferred.n_overflowed;
        kick = d->state == DTO_RUNNING &&
               __atomic_load_n(&d->ia->dto.armed_sleep, __ATOMIC_RELAXED) && dto_work_left(d);
        dat_unlock(&d->lock);
        if (kick)
                dto_ia_kick(d->ia);
        if (ep->soft_hw_armed || ep->hard_hw_armed)
                ep_check_watermarks(ep);
        if (finish)
                dto_finish(d, &b);
        return DAT_SUCCESS;
}

/* An SRQ got buffers: a Send of one of its EPs may be waiting. */
void dto_srq_posted(struct ia *ia)
{
        if (__atomic_load_n(&ia->dto.n_stalled, __ATOMIC_RELAXED) > 0)
                dto_ia_kick(ia);
}

/* ---- RMR binds ---------------------------------------------------------- */

DAT_RETURN dto_post_bind(struct ep *ep, struct rmr *rmr, DAT_LMR_HANDLE lmr_handle,
                         const DAT_LMR_TRIPLET *triplet, DAT_MEM_PRIV_FLAGS mem_priv,
                         DAT_VA_TYPE va_type, DAT_RMR_COOKIE cookie,
                         DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *context)
{
        struct dto_batch b;
        struct dto_ep *d = data_path(ep);
        DAT_RMR_CONTEXT ctx = 0;
        struct dto_req *r;
        DAT_RETURN ret;

        DTO_BATCH_EMPTY(b);
        if (!d)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        dat_lock(&d->lock);
        /* Acknowledgements a poll held back (dto_engine.h) free the queue,
         * and the bind completes after them. */
        dto_take_held_acks(d, &b);
        if (d->tail - d->head >= d->req_cap)
                ret = DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        else if (rmr->has_pending)
                /* One bind in flight per RMR (rmr.h). */
                ret = DAT_ERR(DAT_INVALID_STATE, DAT_NO_SUBTYPE);
        else
                ret = rmr_bind_prepare(rmr, lmr_handle, triplet, mem_priv, va_type, &ctx);
        if (ret != DAT_SUCCESS) {
                bool finish = dto_needs_finish(d) || b.deferred.n_notice || b.deferred.n_overflowed;

                dat_unlock(&d->lock);
                if (finish)
                        dto_finish(d, &b);
                return ret;
        }
        r = dto_req_at(d, d->tail);
        *r = (struct dto_req){
                .cookie = cookie,
                .flags = flags,
                .kind = DTO_REQ_BIND,
                .local = true,
                .done = true,
                /* dat_rmr_bind(3DAT): on a Disconnected EP the bind fails. */
                .status = d->state == DTO_RUNNING ? DAT_DTO_SUCCESS : DAT_RMR_BIND_FAILURE,
                .rmr = rmr->obj.handle,
                .bind_context = ctx,
        };
        d->tail++;
        __atomic_add_fetch(&ep->request_outstanding, 1, __ATOMIC_RELAXED);
        /* In order: it completes after what was posted before it. */
        dto_deliver_requests(d, &b);
        dat_unlock(&d->lock);
        dto_finish(d, &b);
        if (context)
                *context = ctx;
        return DAT_SUCCESS;
}

/* ---- the IB extensions ---------------------------------------------------- */

DAT_RETURN dto_post_ext(DAT_EP_HANDLE ep_handle, const struct dto_ext_post *p)
{
        struct post_args a = { .n = p->num_segments, .iov = p->local_iov, .cookie = p->cookie,
                               .remote = p->remote, .flags = p->flags,
                               .flags_arg = p->flags_arg, .ext = (uint8_t)p->kind };

        switch (p->kind) {
        case DTO_EXT_WRITE_IMM:
                a.kind = DTO_REQ_WRITE;
                a.immed = p->immed;
                break;
        case DTO_EXT_CMP_SWAP:
                a.kind = DTO_REQ_ATOMIC;
                a.operand[0] = p->compare;
                a.operand[1] = p->value;
                break;
        case DTO_EXT_FETCH_ADD:
                a.kind = DTO_REQ_ATOMIC;
                a.operand[0] = p->value;
                break;
        default:
                return DAT_ERR_ARG(2);
        }
        return post_request(ep_handle, &a);
}
