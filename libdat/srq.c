/* Shared Receive Queues (see srq.h): dat_srq_create, dat_srq_post_recv,
 * dat_srq_query, dat_srq_set_lw, dat_srq_resize, dat_srq_free.
 *
 * Error codes where the man pages leave room:
 * - dat_srq_create: a PZ of another IA is DAT_INVALID_HANDLE_PZ; srq_attr
 *   NULL, max_recv_dtos beyond the IA's max_recv_per_srq, max_recv_iov
 *   beyond max_iov_segments_per_dto, a negative value, or a low watermark
 *   above max_recv_dtos: DAT_INVALID_PARAMETER | DAT_INVALID_ARG3; datd's
 *   max_srqs quota: DAT_INSUFFICIENT_RESOURCES.
 * - dat_srq_post_recv: num_segments below 0 or above the SRQ's
 *   max_recv_iov: ARG2; local_iov NULL with segments: ARG3; a segment whose
 *   lmr_context names no LMR of the IA, or an LMR without local write:
 *   DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_WRITE ("One of the LMRs used
 *   in local_iov was either invalid or did not have the local write
 *   privileges"); outside its LMR: ARG3; an LMR of another PZ:
 *   DAT_PROTECTION_VIOLATION | DAT_PROTECTION_WRITE; a full SRQ (every
 *   entry outstanding): DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_SRQ.
 * - dat_srq_query: mask bits outside DAT_SRQ_FIELD_ALL: ARG2; srq_param
 *   NULL with a non-zero mask: ARG3.
 * - dat_srq_resize: DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE below
 *   the outstanding buffers, DAT_INVALID_STATE |
 *   DAT_INVALID_STATE_SRQ_OPERATIONAL below the low watermark.
 * - dat_srq_free: DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE while an
 *   EP uses it (the man page's "DAT_SRQ_IN_USE"). */
#include "config.h"

#include "libdat/srq.h"

#include <stdlib.h>
#include <string.h>

#include "libdat/datd_object.h"
#include "libdat/dto.h"
#include "libdat/ep_attr.h"
#include "libdat/ep_events.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"
#include "libdat/lmr.h"
#include "libdat/pz.h"

static void srq_destroy(struct dat_object *obj);

static const struct dat_object_ops srq_ops = {
        .type = DAT_HANDLE_TYPE_SRQ,
        .name = "SRQ",
        .invalid_subtype = DAT_INVALID_HANDLE_SRQ,
        .destroy = srq_destroy,
};

DAT_DEFINE_LOOKUP(srq, DAT_HANDLE_TYPE_SRQ)

struct ia *srq_ia(const struct srq *srq)
{
        return dat_container_of(srq->obj.parent, struct ia, obj);
}

/* What datd knows of an SRQ (proto/datp.h, DATP_OBJ_SRQ). */
static void srq_describe(const struct srq *srq, DAT_COUNT max_recv_dtos, struct datp_obj_desc *d)
{
        *d = (struct datp_obj_desc){
                .kind = DATP_OBJ_SRQ,
                .state = (uint32_t)srq->state,
                .handle = (uint64_t)(uintptr_t)srq->obj.handle,
                .pz_handle = (uint64_t)(uintptr_t)srq->pz,
                .qlen = (uint32_t)max_recv_dtos,
                .max_recv_iov = (uint32_t)srq->max_recv_iov,
        };
}

/* The ring's storage for n buffers of max_recv_iov segments each. */
static int ring_alloc(DAT_COUNT n, DAT_COUNT max_recv_iov, struct srq_slot **slots,
                      DAT_LMR_TRIPLET **iovs)
{
        size_t nseg = (size_t)n * (size_t)max_recv_iov;

        *slots = calloc(n > 0 ? (size_t)n : 1, sizeof(**slots));
        *iovs = calloc(nseg > 0 ? nseg : 1, sizeof(**iovs));
        if (*slots && *iovs)
                return 0;
        free(*slots);
        free(*iovs);
        return -1;
}

static DAT_LMR_TRIPLET *slot_iov(const struct srq *srq, DAT_LMR_TRIPLET *iovs, DAT_COUNT slot)
{
        return iovs + (size_t)slot * (size_t)srq->max_recv_iov;
}

/* Under srq->lock. */
static DAT_COUNT outstanding(const struct srq *srq)
{
        return srq->available + srq->taken + srq->completed;
}

/* dat_srq_set_lw(3DAT): "An asynchronous event will be generated when the
 * number of buffers on the SRQ is below the low watermark for the first
 * time.  This can occur during the current call or when an associated EP
 * takes a buffer from the SRQ ... only once per setting."  (Its USAGE says
 * the opposite, "If the new low watermark value is below the current number
 * of free Receive DTOs ... generated immediately"; the DESCRIPTION is the
 * rule, the USAGE sentence reads as a slip.)  Under srq->lock; returns
 * whether it fired: then the caller, unlocked, calls low_watermark_fired. */
static bool check_low_watermark(struct srq *srq)
{
        if (!srq->lw_armed || srq->available >= srq->low_watermark)
                return false;
        srq->lw_armed = false;
        srq->lw_events++;
        return true;
}

static void low_watermark_fired(struct srq *srq, bool fired, DAT_COUNT available, DAT_COUNT lw)
{
        if (!fired)
                return;
        dat_trace("SRQ %p: %d buffers, below the low watermark %d", srq->obj.handle, available, lw);
        ep_post_async_event(srq_ia(srq), srq->obj.handle, DAT_SRQ_LOW_WATERMARK_EVENT);
}

/* SRQs with a handle in this process (atomic). */
static unsigned srqs_live;

bool srq_exist(void)
{
        return __atomic_load_n(&srqs_live, __ATOMIC_ACQUIRE) != 0;
}

/* Frees an SRQ whose datd registration is gone; accepts a half-built one. */
static void srq_free_object(struct srq *srq, bool pz_held)
{
        if (!srq)
                return;
        if (srq->counted)
                __atomic_sub_fetch(&srqs_live, 1, __ATOMIC_RELEASE);
        if (pz_held)
                ep_dep_release(srq->pz, DAT_HANDLE_TYPE_PZ);
        dat_object_fini(&srq->obj);
        pthread_mutex_destroy(&srq->lock);
        free(srq->slots);
        free(srq->iovs);
        free(srq);
}

static void srq_destroy(struct dat_object *obj)
{
        srq_free_object(dat_container_of(obj, struct srq, obj), true);
}

static DAT_RETURN check_srq_attr(struct ia *ia, const DAT_SRQ_ATTR *a)
{
        DAT_IA_ATTR limits;

        if (!a)
                return DAT_ERR_ARG(3);
        ep_ia_limits(ia, &limits);
        if (a->max_recv_dtos < 0 || a->max_recv_dtos > limits.max_recv_per_srq ||
            a->max_recv_iov < 0 || a->max_recv_iov > limits.max_iov_segments_per_dto ||
            a->low_watermark < 0 || a->low_watermark > a->max_recv_dtos)
                return DAT_ERR_ARG(3);
        return DAT_SUCCESS;
}

/* dat_srq_create(3DAT).  The SRQ gets exactly the size and IOV asked.  A
 * low watermark other than DAT_SRQ_LW_DEFAULT is armed like
 * dat_srq_set_lw's, so it fires at once ("The Consumer must set
 * low_watermark to DAT_SRQ_LW_DEFAULT to ensure that an asynchronous event
 * will not be generated immediately, since there are no buffers"). */
_public_ DAT_RETURN dat_srq_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle,
                                   DAT_SRQ_ATTR *srq_attr, DAT_SRQ_HANDLE *srq_handle)
{
        FOREIGN_DISPATCH_IA_GUARDED(ia_handle,
                                    (1, pz_handle, DAT_INVALID_HANDLE_PZ),
                                    srq_create_func, pz_handle, srq_attr, srq_handle);
        struct ia *ia = ia_lookup(ia_handle);
        struct pz *pz = pz_lookup(pz_handle);
        struct datp_obj_desc desc;
        struct srq *srq;
        DAT_RETURN ret;
        bool fired;

        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (!pz || pz->obj.parent != &ia->obj)
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        ret = check_srq_attr(ia, srq_attr);
        if (ret != DAT_SUCCESS)
                return ret;
        if (!srq_handle)
                return DAT_ERR_ARG(4);

        srq = calloc(1, sizeof(*srq));
        if (!srq)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        pthread_mutex_init(&srq->lock, NULL);
        srq->state = DAT_SRQ_STATE_OPERATIONAL;
        srq->pz = pz_handle;
        srq->max_recv_dtos = srq_attr->max_recv_dtos;
        srq->max_recv_iov = srq_attr->max_recv_iov;
        srq->low_watermark = srq_attr->low_watermark;
        srq->lw_armed = srq_attr->low_watermark != DAT_SRQ_LW_DEFAULT;
        if (ring_alloc(srq->max_recv_dtos, srq->max_recv_iov, &srq->slots, &srq->iovs) < 0) {
                srq_free_object(srq, false);
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        if (!ep_dep_hold(pz_handle, DAT_HANDLE_TYPE_PZ)) {
                srq_free_object(srq, false);
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        }
        ret = dat_object_init(&srq->obj, &srq_ops, &ia->obj);
        if (ret == DAT_SUCCESS) {
                /* Counted from the moment its handle is valid: an EP can
                 * take it from then on. */
                srq->counted = true;
                __atomic_add_fetch(&srqs_live, 1, __ATOMIC_ACQ_REL);
                srq_describe(srq, srq->max_recv_dtos, &desc);
                ret = datd_object_register(ia, &desc, &srq->datd_id);
        }
        if (ret != DAT_SUCCESS) {
                srq_free_object(srq, true);
                return ret;
        }
        pthread_mutex_lock(&srq->lock);
        fired = check_low_watermark(srq);
        pthread_mutex_unlock(&srq->lock);
        low_watermark_fired(srq, fired, 0, srq->low_watermark);
        *srq_handle = srq->obj.handle;
        return DAT_SUCCESS;
}

/* dat_srq_free(3DAT): "The SRQ cannot be destroyed if it is in use by an
 * EP."  Buffers still posted go with it. */
_public_ DAT_RETURN dat_srq_free(DAT_SRQ_HANDLE srq_handle)
{
        FOREIGN_DISPATCH(srq_handle, srq_free_func, srq_handle);
        struct srq *srq = srq_lookup(srq_handle);

        if (!srq)
                return dat_invalid_handle(DAT_HANDLE_TYPE_SRQ);
        dat_object_lock();
        if (srq->obj.closing) {
                dat_object_unlock();
                return dat_invalid_handle(DAT_HANDLE_TYPE_SRQ);
        }
        if (srq->obj.users > 0) {
                dat_object_unlock();
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
        }
        srq->obj.closing = true;
        dat_object_unlock();
        datd_object_unregister(srq_ia(srq), srq->datd_id);
        srq_free_object(srq, true);
        return DAT_SUCCESS;
}

/* The local-access check of one Recv segment (dat_srq_post_recv(3DAT)). */
static DAT_RETURN check_segment(struct srq *srq, const DAT_LMR_TRIPLET *seg)
{
        struct lmr *lmr;
        DAT_RETURN ret;

        ret = lmr_find_by_context(srq_ia(srq), seg->lmr_context, seg->virtual_address,
                                  seg->segment_length, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, &lmr);
        switch (DAT_GET_TYPE(ret)) {
        case DAT_SUCCESS:
                break;
        case DAT_LENGTH_ERROR:
                return DAT_ERR_ARG(3);
        default:
                return DAT_ERR(DAT_PRIVILEGES_VIOLATION, DAT_PRIVILEGES_WRITE);
        }
        if (!lmr->pz || lmr->pz->obj.handle != srq->pz)
                return DAT_ERR(DAT_PROTECTION_VIOLATION, DAT_PROTECTION_WRITE);
        return DAT_SUCCESS;
}

/* dat_srq_post_recv(3DAT): the buffer goes to the tail of the SRQ, copied
 * (the consumer may reuse local_iov at once: iov_ownership_on_return is
 * DAT_IOV_CONSUMER).  "Providers shall avoid resource allocation as part
 * of dat_srq_post_recv()": the ring was allocated at create/resize.  "The
 * operation is valid for all states of the Shared Receive Queue." */
_public_ DAT_RETURN dat_srq_post_recv(DAT_SRQ_HANDLE srq_handle, DAT_COUNT num_segments,
                                      DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie)
{
        FOREIGN_DISPATCH(srq_handle, srq_post_recv_func, srq_handle, num_segments, local_iov,
                         user_cookie);
        struct srq *srq = srq_lookup(srq_handle);
        DAT_COUNT slot;

        if (!srq)
                return dat_invalid_handle(DAT_HANDLE_TYPE_SRQ);
        if (num_segments < 0 || num_segments > srq->max_recv_iov)
                return DAT_ERR_ARG(2);
        if (num_segments > 0 && !local_iov)
                return DAT_ERR_ARG(3);
        for (DAT_COUNT i = 0; i < num_segments; i++) {
                DAT_RETURN ret = check_segment(srq, &local_iov[i]);

                if (ret != DAT_SUCCESS)
                        return ret;
        }

        pthread_mutex_lock(&srq->lock);
        if (outstanding(srq) >= srq->max_recv_dtos) {
                pthread_mutex_unlock(&srq->lock);
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
        }
        slot = (srq->head + srq->available) % srq->max_recv_dtos;
        srq->slots[slot] = (struct srq_slot){ .cookie = user_cookie, .num_segments = num_segments };
        if (num_segments > 0)
                memcpy(slot_iov(srq, srq->iovs, slot), local_iov,
                       (size_t)num_segments * sizeof(*local_iov));
        srq->available++;
        pthread_mutex_unlock(&srq->lock);
        /* A Send of one of its EPs may be waiting for a buffer. */
        dto_srq_posted(srq_ia(srq));
        return DAT_SUCCESS;
}

/* dat_srq_query(3DAT): everything is filled whatever the mask. */
_public_ DAT_RETURN dat_srq_query(DAT_SRQ_HANDLE srq_handle, DAT_SRQ_PARAM_MASK srq_param_mask,
                                  DAT_SRQ_PARAM *srq_param)
{
        FOREIGN_DISPATCH(srq_handle, srq_query_func, srq_handle, srq_param_mask, srq_param);
        struct srq *srq = srq_lookup(srq_handle);

        if (!srq)
                return dat_invalid_handle(DAT_HANDLE_TYPE_SRQ);
        if ((unsigned)srq_param_mask & ~(unsigned)DAT_SRQ_FIELD_ALL)
                return DAT_ERR_ARG(2);
        if (!srq_param_mask)
                return DAT_SUCCESS;
        if (!srq_param)
                return DAT_ERR_ARG(3);
        pthread_mutex_lock(&srq->lock);
        *srq_param = (DAT_SRQ_PARAM){
                .ia_handle = srq_ia(srq)->obj.handle,
                .srq_state = srq->state,
                .pz_handle = srq->pz,
                .max_recv_dtos = srq->max_recv_dtos,
                .max_recv_iov = srq->max_recv_iov,
                .low_watermark = srq->low_watermark,
                .available_dto_count = srq->available,
                .outstanding_dto_count = outstanding(srq),
        };
        pthread_mutex_unlock(&srq->lock);
        return DAT_SUCCESS;
}

/* dat_srq_set_lw(3DAT): "DAT_INVALID_PARAMETER ... the value of
 * low_watermark exceeds the value of max_recv_dtos"; every call arms the
 * event again. */
_public_ DAT_RETURN dat_srq_set_lw(DAT_SRQ_HANDLE srq_handle, DAT_COUNT low_watermark)
{
        FOREIGN_DISPATCH(srq_handle, srq_set_lw_func, srq_handle, low_watermark);
        struct srq *srq = srq_lookup(srq_handle);
        DAT_COUNT available;
        bool fired;

        if (!srq)
                return dat_invalid_handle(DAT_HANDLE_TYPE_SRQ);
        pthread_mutex_lock(&srq->lock);
        if (low_watermark < 0 || low_watermark > srq->max_recv_dtos) {
                pthread_mutex_unlock(&srq->lock);
                return DAT_ERR_ARG(2);
        }
        srq->low_watermark = low_watermark;
        srq->lw_armed = true;
        fired = check_low_watermark(srq);
        available = srq->available;
        pthread_mutex_unlock(&srq->lock);
        low_watermark_fired(srq, fired, available, low_watermark);
        return DAT_SUCCESS;
}

/* Moves the available buffers, oldest first, into a new ring of n slots
 * (n >= available).  Under srq->lock. */
static void ring_move(struct srq *srq, DAT_COUNT n, struct srq_slot *slots, DAT_LMR_TRIPLET *iovs)
{
        for (DAT_COUNT i = 0; i < srq->available; i++) {
                DAT_COUNT from = (srq->head + i) % srq->max_recv_dtos;

                slots[i] = srq->slots[from];
                memcpy(slot_iov(srq, iovs, i), slot_iov(srq, srq->iovs, from),
                       (size_t)srq->max_recv_iov * sizeof(*iovs));
        }
        free(srq->slots);
        free(srq->iovs);
        srq->slots = slots;
        srq->iovs = iovs;
        srq->head = 0;
        srq->max_recv_dtos = n;
}

/* dat_srq_resize(3DAT): exactly to the size asked, or not at all.
 * - "If the number of outstanding Recv buffers on the SRQ is larger then
 *   the requested srq_max_recv_dto, the operation returns
 *   DAT_INVALID_STATE and do not change SRQ": outstanding counts the
 *   buffers on the SRQ, those its EPs took and have not completed, and
 *   those completed but not reaped from the EPs' recv_evds;
 * - "If the requested srq_max_recv_dto is below the SRQ low watermark, the
 *   operation returns DAT_INVALID_STATE and does not change SRQ";
 * - "required not to lose any buffers": the posted buffers keep their
 *   order and contents.
 * datd hears of the new size before the SRQ changes, so a refusal (or a
 * failed allocation) changes nothing. */
_public_ DAT_RETURN dat_srq_resize(DAT_SRQ_HANDLE srq_handle, DAT_COUNT srq_max_recv_dto)
{
        FOREIGN_DISPATCH(srq_handle, srq_resize_func, srq_handle, srq_max_recv_dto);
        struct srq *srq = srq_lookup(srq_handle);
        struct datp_obj_desc desc;
        DAT_LMR_TRIPLET *iovs;
        struct srq_slot *slots;
        DAT_IA_ATTR limits;
        DAT_RETURN ret;

        if (!srq)
                return dat_invalid_handle(DAT_HANDLE_TYPE_SRQ);
        ep_ia_limits(srq_ia(srq), &limits);
        if (srq_max_recv_dto < 0 || srq_max_recv_dto > limits.max_recv_per_srq)
                return DAT_ERR_ARG(2);
        if (ring_alloc(srq_max_recv_dto, srq->max_recv_iov, &slots, &iovs) < 0)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);

        /* The consumer's calls on one SRQ are not concurrent (MT-Level
         * Unsafe); the data path only lowers `outstanding`, so checking
         * before datd's round trip and moving after it stays correct. */
        pthread_mutex_lock(&srq->lock);
        if (outstanding(srq) > srq_max_recv_dto)
                ret = DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
        else if (srq->low_watermark > srq_max_recv_dto)
                ret = DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_OPERATIONAL);
        else
                ret = DAT_SUCCESS;
        pthread_mutex_unlock(&srq->lock);
        if (ret == DAT_SUCCESS) {
                srq_describe(srq, srq_max_recv_dto, &desc);
                ret = datd_object_update(srq_ia(srq), srq->datd_id, &desc);
        }
        if (ret != DAT_SUCCESS) {
                free(slots);
                free(iovs);
                return ret;
        }
        pthread_mutex_lock(&srq->lock);
        ring_move(srq, srq_max_recv_dto, slots, iovs);
        pthread_mutex_unlock(&srq->lock);
        return DAT_SUCCESS;
}

bool srq_buffer_take(struct srq *srq, DAT_DTO_COOKIE *cookie, DAT_COUNT *num_segments,
                     DAT_LMR_TRIPLET *iov)
{
        const struct srq_slot *slot;
        DAT_COUNT available, lw;
        bool fired;

        pthread_mutex_lock(&srq->lock);
        if (srq->available == 0) {
                pthread_mutex_unlock(&srq->lock);
                return false;
        }
        slot = &srq->slots[srq->head];
        *cookie = slot->cookie;
        *num_segments = slot->num_segments;
        if (slot->num_segments > 0)
                memcpy(iov, slot_iov(srq, srq->iovs, srq->head), (size_t)slot->num_segments * sizeof(*iov));
        srq->head = (srq->head + 1) % srq->max_recv_dtos;
        srq->available--;
        srq->taken++;
        fired = check_low_watermark(srq);
        available = srq->available;
        lw = srq->low_watermark;
        pthread_mutex_unlock(&srq->lock);
        low_watermark_fired(srq, fired, available, lw);
        return true;
}

void srq_buffer_completed(struct srq *srq)
{
        pthread_mutex_lock(&srq->lock);
        if (srq->taken > 0) {
                srq->taken--;
                srq->completed++;
        }
        pthread_mutex_unlock(&srq->lock);
}

void srq_buffer_reaped(struct srq *srq)
{
        pthread_mutex_lock(&srq->lock);
        if (srq->completed > 0)
                srq->completed--;
        pthread_mutex_unlock(&srq->lock);
}

void srq_buffer_return(struct srq *srq, DAT_DTO_COOKIE cookie, DAT_COUNT num_segments,
                       const DAT_LMR_TRIPLET *iov)
{
        DAT_COUNT slot;

        pthread_mutex_lock(&srq->lock);
        if (srq->taken > 0) {
                /* Back at the front: it was the oldest when it was taken. */
                slot = (srq->head + srq->max_recv_dtos - 1) % srq->max_recv_dtos;
                srq->slots[slot] = (struct srq_slot){ .cookie = cookie,
                                                      .num_segments = num_segments };
                if (num_segments > 0)
                        memcpy(slot_iov(srq, srq->iovs, slot), iov,
                               (size_t)num_segments * sizeof(*iov));
                srq->head = slot;
                srq->taken--;
                srq->available++;
        }
        pthread_mutex_unlock(&srq->lock);
}

void srq_buffers_dropped(struct srq *srq, DAT_COUNT n)
{
        pthread_mutex_lock(&srq->lock);
        srq->taken = n < srq->taken ? srq->taken - n : 0;
        pthread_mutex_unlock(&srq->lock);
}

unsigned srq_low_watermark_events(struct srq *srq)
{
        unsigned n;

        pthread_mutex_lock(&srq->lock);
        n = srq->lw_events;
        pthread_mutex_unlock(&srq->lock);
        return n;
}
