/* Local Memory Regions (see lmr.h): dat_lmr_create, dat_lmr_query,
 * dat_lmr_free, dat_lmr_sync_rdma_read, dat_lmr_sync_rdma_write.
 *
 * Choices where the man pages leave room (all with DAT_CLASS_ERROR):
 * - Registration is by whole pages: registered_address is the consumer's
 *   address rounded down to a page, registered_size runs to the end of the
 *   page holding the last byte; that range is what the LMR covers (DTO
 *   segments, RMR binds, syncs) and what datd counts against max_lmr_bytes.
 * - A range that is not mapped from end to end (or a NULL address):
 *   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3; a zero or wrapping length:
 *   DAT_INVALID_ARG4.  Privileges the memory does not allow (read
 *   privileges on unreadable pages, write privileges on read-only ones):
 *   DAT_INVALID_ARG6, as are bits outside DAT_MEM_PRIV_ALL_FLAG and the IB
 *   extensions' DAT_IB_MEM_PRIV_REMOTE_ATOMIC (remote atomics read and
 *   write the memory: it needs both).
 * - DAT_VA_TYPE_ZB: DAT_MODEL_NOT_SUPPORTED (dat_ia_query says
 *   zb_supported false); another va_type: DAT_INVALID_ARG7.  A mem_type
 *   other than VIRTUAL, LMR, SHARED_VIRTUAL: DAT_MODEL_NOT_SUPPORTED.
 * - Only lmr_handle is a mandatory output (DAT_INVALID_ARG8); the others
 *   may be NULL.  rmr_context is 0 ("NULL") without a remote privilege
 *   (remote read, write or atomic).
 * - DAT_MEM_TYPE_LMR: the new LMR covers what the given LMR (of the same
 *   IA, else DAT_INVALID_HANDLE_LMR) registered; length is ignored; it may
 *   sit on another PZ with other privileges.  The two LMRs are independent
 *   (either may be freed first).
 * - DAT_MEM_TYPE_SHARED_VIRTUAL with a NULL virtual_address: libdat maps
 *   the shared memory the cookie names (mem_shm.h), the same memory for
 *   every LMR with that cookie in any process of the user, and
 *   registered_address tells where.  With a consumer address, the range
 *   must be a shared mapping (MAP_SHARED: shm_open, memfd, shmat, ...),
 *   else DAT_INVALID_STATE (the man page's example); the cookie is kept
 *   for dat_lmr_query.  A NULL cookie pointer: DAT_INVALID_ARG3.
 * - dat_lmr_sync_rdma_read/write: every segment must lie in a live LMR of
 *   the IA with a read (resp. write) privilege, local or remote (an RMR
 *   bound to it may carry the remote one), or remote atomics (which read
 *   and write), else DAT_INVALID_PARAMETER |
 *   DAT_INVALID_ARG2.  Memory is cache coherent on every platform libdat
 *   runs on (dat_ia_query: lmr_sync_req false), so there is nothing to
 *   flush or invalidate once the segments check out. */
#include "config.h"

#include "libdat/lmr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libdat/datd_object.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"
#include "libdat/mem_ctx.h"
#include "libdat/mem_object.h"
#include "libdat/mem_range.h"
#include "libdat/mem_shm.h"
#include "libdat/pz.h"

static const struct dat_object_ops lmr_ops = {
        .type = DAT_HANDLE_TYPE_LMR,
        .name = "LMR",
        .invalid_subtype = DAT_INVALID_HANDLE_LMR,
        .destroy = lmr_destroy,
};

DAT_DEFINE_LOOKUP(lmr, DAT_HANDLE_TYPE_LMR)

struct ia *lmr_ia(const struct lmr *lmr)
{
        return dat_container_of(lmr->obj.parent, struct ia, obj);
}

bool lmr_covers(const struct lmr *lmr, DAT_VADDR address, DAT_VLEN length)
{
        DAT_VADDR end = address + length;

        return end >= address && address >= lmr->registered_address &&
               end <= lmr->registered_address + lmr->registered_length;
}

DAT_RETURN lmr_find_by_context(struct ia *ia, DAT_LMR_CONTEXT lmr_context, DAT_VADDR address,
                               DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges, struct lmr **out)
{
        struct dat_object *o = mem_ctx_find(lmr_context, MEM_CTX_LOCAL);
        struct lmr *lmr;

        if (!o || o->ops != &lmr_ops || o->parent != &ia->obj)
                return DAT_ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE);
        lmr = dat_container_of(o, struct lmr, obj);
        if (!lmr_covers(lmr, address, length))
                return DAT_ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE);
        if ((privileges & lmr->privileges) != privileges)
                return DAT_ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE);
        *out = lmr;
        return DAT_SUCCESS;
}

DAT_RETURN lmr_get(DAT_LMR_HANDLE handle, const struct ia *ia, struct lmr **out)
{
        struct dat_object *obj;
        DAT_RETURN ret = mem_object_use(handle, DAT_HANDLE_TYPE_LMR, &ia->obj, &obj);

        if (ret == DAT_SUCCESS)
                *out = dat_container_of(obj, struct lmr, obj);
        return ret;
}

void lmr_put(DAT_LMR_HANDLE handle)
{
        mem_object_unuse(handle, DAT_HANDLE_TYPE_LMR);
}

/* Withdraws the contexts, unregisters, unlinks and frees; accepts a
 * half-built LMR. */
static void lmr_free(struct lmr *lmr)
{
        if (!lmr)
                return;
        /* First, so that no DTO or RDMA resolves the LMR from here on
         * (dat_lmr_free(3DAT): later uses fail with a protection violation). */
        if (lmr->has_ctx_slot)
                mem_ctx_release(lmr->ctx_slot);
        if (lmr->datd_id)
                datd_object_unregister(lmr_ia(lmr), lmr->datd_id);
        dat_object_fini(&lmr->obj);
        pz_put(lmr->pz);
        mem_shm_unref(lmr->shm);
        free(lmr);
}

/* ops->destroy, for an abrupt dat_ia_close: RMRs still bound to it find it
 * gone by its handle. */
void lmr_destroy(struct dat_object *obj)
{
        struct lmr *lmr = dat_container_of(obj, struct lmr, obj);

        lmr->datd_id = 0; /* datd forgets a connection's objects with it */
        lmr_free(lmr);
}

/* What mem_range_check must find for these privileges. */
static unsigned range_need(DAT_MEM_PRIV_FLAGS privileges)
{
        unsigned need = 0;

        if (privileges & (DAT_MEM_PRIV_READ_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC))
                need |= MEM_RANGE_READ;
        if (privileges & (DAT_MEM_PRIV_WRITE_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC))
                need |= MEM_RANGE_WRITE;
        return need;
}

/* Checks that the consumer's [address, address + length) can be registered
 * with lmr's privileges and sets the registered (page) range. */
static DAT_RETURN use_consumer_range(struct lmr *lmr, const void *address, DAT_VLEN length,
                                     unsigned extra_need)
{
        uintptr_t start = (uintptr_t)address, end = start + length;
        int r;

        if (!address)
                return DAT_ERR_ARG(3);
        if (length == 0 || length > (DAT_VLEN)(UINTPTR_MAX - start) || mem_page_ceil(end) < end)
                return DAT_ERR_ARG(4);
        lmr->registered_address = mem_page_floor(start);
        lmr->registered_length = mem_page_ceil(end) - lmr->registered_address;
        r = mem_range_check(lmr->registered_address, lmr->registered_length,
                            range_need(lmr->privileges) | extra_need);
        switch (r) {
        case 0:
                return DAT_SUCCESS;
        case -EFAULT:
                return DAT_ERR_ARG(3);
        case -EACCES:
                return DAT_ERR_ARG(6);
        case -EPERM:
                /* dat_lmr_create(3DAT): shared virtual buffer not created shared */
                return DAT_ERR(DAT_INVALID_STATE, DAT_NO_SUBTYPE);
        default:
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        }
}

static DAT_RETURN describe_shared(struct lmr *lmr, const DAT_SHARED_MEMORY *sm, DAT_VLEN length)
{
        DAT_RETURN ret;

        if (!sm->shared_memory_id)
                return DAT_ERR_ARG(3);
        /* dat_lmr_create(3DAT): all 40 bytes, never a string */
        memcpy(lmr->cookie, *sm->shared_memory_id, DAT_LMR_COOKIE_SIZE);
        lmr->region.for_shared_memory.virtual_address = sm->virtual_address;
        lmr->region.for_shared_memory.shared_memory_id = &lmr->cookie;
        lmr->length = length;
        if (sm->virtual_address)
                return use_consumer_range(lmr, sm->virtual_address, length, MEM_RANGE_SHARED);
        if (length == 0 || length > SIZE_MAX / 2)
                return DAT_ERR_ARG(4);
        ret = mem_shm_attach(lmr->cookie, length, &lmr->shm);
        if (ret != DAT_SUCCESS)
                return ret;
        lmr->registered_address = (uintptr_t)lmr->shm->addr;
        lmr->registered_length = lmr->shm->length;
        return DAT_SUCCESS;
}

/* DAT_MEM_TYPE_LMR: the range (and shared mapping) of another LMR of ia,
 * read under the lock so that a concurrent dat_lmr_free cannot pull it
 * away halfway. */
static DAT_RETURN describe_from_lmr(struct lmr *lmr, const struct ia *ia, DAT_LMR_HANDLE handle)
{
        struct lmr *base;

        dat_object_lock();
        base = lmr_lookup(handle);
        if (!base || base->obj.closing || base->obj.parent != &ia->obj) {
                dat_object_unlock();
                return dat_invalid_handle(DAT_HANDLE_TYPE_LMR);
        }
        lmr->registered_address = base->registered_address;
        lmr->registered_length = base->registered_length;
        if (base->shm)
                lmr->shm = mem_shm_ref(base->shm);
        dat_object_unlock();
        lmr->region.for_lmr_handle = handle;
        lmr->length = lmr->registered_length;
        /* The memory may since have been unmapped or protected. */
        if (lmr->shm)
                return DAT_SUCCESS;
        switch (mem_range_check(lmr->registered_address, lmr->registered_length,
                                range_need(lmr->privileges))) {
        case 0:
                return DAT_SUCCESS;
        case -EACCES:
                return DAT_ERR_ARG(6);
        default:
                return DAT_ERR_ARG(3);
        }
}

static DAT_RETURN describe_region(struct lmr *lmr, const struct ia *ia,
                                  DAT_REGION_DESCRIPTION region, DAT_VLEN length)
{
        switch (lmr->mem_type) {
        case DAT_MEM_TYPE_VIRTUAL:
                lmr->region.for_va = region.for_va;
                lmr->length = length;
                return use_consumer_range(lmr, region.for_va, length, 0);
        case DAT_MEM_TYPE_LMR:
                return describe_from_lmr(lmr, ia, region.for_lmr_handle);
        case DAT_MEM_TYPE_SHARED_VIRTUAL:
                return describe_shared(lmr, &region.for_shared_memory, length);
        default:
                /* dat_lmr_create(3DAT): memory type not supported by the Provider */
                return DAT_ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE);
        }
}

/* Registers with datd (max_lmrs, max_lmr_bytes) and publishes the
 * contexts: the last steps, so nothing resolves an LMR datd refused. */
static DAT_RETURN lmr_register(struct lmr *lmr, struct ia *ia)
{
        struct datp_obj_desc desc = {
                .kind = DATP_OBJ_LMR,
                .handle = (uintptr_t)lmr->obj.handle,
                .pz_handle = (uintptr_t)lmr->pz->obj.handle,
                .length = lmr->registered_length,
        };
        DAT_RETURN ret;

        ret = mem_ctx_alloc(&lmr->obj, &lmr->ctx_slot);
        if (ret != DAT_SUCCESS)
                return ret;
        lmr->has_ctx_slot = true;
        ret = datd_object_register(ia, &desc, &lmr->datd_id);
        if (ret != DAT_SUCCESS) {
                lmr->datd_id = 0;
                return ret;
        }
        lmr->lmr_context = mem_ctx_publish(lmr->ctx_slot, MEM_CTX_LOCAL);
        /* dat_lmr_create(3DAT): no rmr_context without remote privileges */
        if ((unsigned)lmr->privileges & MEM_PRIV_REMOTE)
                lmr->rmr_context = mem_ctx_publish(lmr->ctx_slot, MEM_CTX_REMOTE);
        return DAT_SUCCESS;
}

/* dat_lmr_create(3DAT) */
_public_ DAT_RETURN dat_lmr_create(DAT_IA_HANDLE ia_handle, DAT_MEM_TYPE mem_type,
                                   DAT_REGION_DESCRIPTION region_description, DAT_VLEN length,
                                   DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS privileges,
                                   DAT_VA_TYPE va_type, DAT_LMR_HANDLE *lmr_handle,
                                   DAT_LMR_CONTEXT *lmr_context, DAT_RMR_CONTEXT *rmr_context,
                                   DAT_VLEN *registered_length, DAT_VADDR *registered_address)
{
        FOREIGN_DISPATCH_IA_GUARDED(ia_handle,
                                    (2, pz_handle, DAT_INVALID_HANDLE_PZ,
                                     mem_type == DAT_MEM_TYPE_LMR
                                             ? region_description.for_lmr_handle
                                             : DAT_HANDLE_NULL,
                                     DAT_INVALID_HANDLE_LMR),
                                    lmr_create_func, mem_type, region_description, length,
                                    pz_handle, privileges, va_type, lmr_handle, lmr_context,
                                    rmr_context, registered_length, registered_address);
        struct ia *ia = ia_lookup(ia_handle);
        struct lmr *lmr;
        DAT_RETURN ret;

        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (!lmr_handle)
                return DAT_ERR_ARG(8);
        if ((unsigned)privileges & ~MEM_PRIV_VALID)
                return DAT_ERR_ARG(6);
        if (va_type == DAT_VA_TYPE_ZB)
                return DAT_ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE);
        if (va_type != DAT_VA_TYPE_VA)
                return DAT_ERR_ARG(7);

        lmr = calloc(1, sizeof(*lmr));
        if (!lmr)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        lmr->mem_type = mem_type;
        lmr->privileges = privileges;
        lmr->va_type = va_type;
        ret = pz_get(pz_handle, ia, &lmr->pz);
        if (ret != DAT_SUCCESS)
                goto err;
        ret = describe_region(lmr, ia, region_description, length);
        if (ret != DAT_SUCCESS)
                goto err;
        ret = dat_object_init(&lmr->obj, &lmr_ops, &ia->obj);
        if (ret != DAT_SUCCESS)
                goto err;
        ret = lmr_register(lmr, ia);
        if (ret != DAT_SUCCESS)
                goto err;

        *lmr_handle = lmr->obj.handle;
        if (lmr_context)
                *lmr_context = lmr->lmr_context;
        if (rmr_context)
                *rmr_context = lmr->rmr_context;
        if (registered_length)
                *registered_length = lmr->registered_length;
        if (registered_address)
                *registered_address = lmr->registered_address;
        return DAT_SUCCESS;
err:
        lmr_free(lmr);
        return ret;
}

/* dat_lmr_query(3DAT): every field is filled whatever the mask; a mask
 * with bits DAT_LMR_FIELD_ALL does not name is invalid. */
_public_ DAT_RETURN dat_lmr_query(DAT_LMR_HANDLE lmr_handle, DAT_LMR_PARAM_MASK lmr_param_mask,
                                  DAT_LMR_PARAM *lmr_param)
{
        FOREIGN_DISPATCH(lmr_handle, lmr_query_func, lmr_handle, lmr_param_mask, lmr_param);
        struct lmr *lmr = lmr_lookup(lmr_handle);

        if (!lmr)
                return dat_invalid_handle(DAT_HANDLE_TYPE_LMR);
        if ((unsigned)lmr_param_mask & ~(unsigned)DAT_LMR_FIELD_ALL)
                return DAT_ERR_ARG(2);
        if (!lmr_param)
                return DAT_ERR_ARG(3);
        *lmr_param = (DAT_LMR_PARAM){
                .ia_handle = lmr->obj.parent->handle,
                .mem_type = lmr->mem_type,
                .region_desc = lmr->region,
                .length = lmr->length,
                .pz_handle = lmr->pz->obj.handle,
                .mem_priv = lmr->privileges,
                .va_type = lmr->va_type,
                .lmr_context = lmr->lmr_context,
                .rmr_context = lmr->rmr_context,
                .registered_size = lmr->registered_length,
                .registered_address = lmr->registered_address,
        };
        return DAT_SUCCESS;
}

/* dat_lmr_free(3DAT): in use by an RMR -> DAT_INVALID_STATE */
_public_ DAT_RETURN dat_lmr_free(DAT_LMR_HANDLE lmr_handle)
{
        FOREIGN_DISPATCH(lmr_handle, lmr_free_func, lmr_handle);
        struct dat_object *obj;
        DAT_RETURN ret = mem_object_claim(lmr_handle, DAT_HANDLE_TYPE_LMR, DAT_INVALID_STATE_LMR_IN_USE,
                                          &obj);

        if (ret == DAT_SUCCESS)
                lmr_free(dat_container_of(obj, struct lmr, obj));
        return ret;
}

/* dat_lmr_sync_rdma_read(3DAT), dat_lmr_sync_rdma_write(3DAT): a segment
 * outside an LMR of the IA, or an invalid LMR -> DAT_INVALID_PARAMETER.
 * The segments may belong to different LMRs and PZs. */
static DAT_RETURN sync_segments(DAT_IA_HANDLE ia_handle, const DAT_LMR_TRIPLET *segments,
                                DAT_VLEN n_segments, DAT_MEM_PRIV_FLAGS any_of)
{
        struct ia *ia = ia_lookup(ia_handle);

        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (n_segments > 0 && !segments)
                return DAT_ERR_ARG(2);
        for (DAT_VLEN i = 0; i < n_segments; i++) {
                const DAT_LMR_TRIPLET *s = &segments[i];
                struct lmr *lmr;

                if (lmr_find_by_context(ia, s->lmr_context, s->virtual_address, s->segment_length,
                                        DAT_MEM_PRIV_NONE_FLAG, &lmr) != DAT_SUCCESS ||
                    !(lmr->privileges & any_of))
                        return DAT_ERR_ARG(2);
        }
        /* Cache-coherent memory: nothing to flush or invalidate. */
        return DAT_SUCCESS;
}

_public_ DAT_RETURN dat_lmr_sync_rdma_read(DAT_IA_HANDLE ia_handle,
                                           const DAT_LMR_TRIPLET *local_segments,
                                           DAT_VLEN num_segments)
{
        FOREIGN_DISPATCH_IA(ia_handle, lmr_sync_rdma_read_func, local_segments, num_segments);
        return sync_segments(ia_handle, local_segments, num_segments,
                             (DAT_MEM_PRIV_FLAGS)(DAT_MEM_PRIV_READ_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC));
}

_public_ DAT_RETURN dat_lmr_sync_rdma_write(DAT_IA_HANDLE ia_handle,
                                            const DAT_LMR_TRIPLET *local_segments,
                                            DAT_VLEN num_segments)
{
        FOREIGN_DISPATCH_IA(ia_handle, lmr_sync_rdma_write_func, local_segments, num_segments);
        return sync_segments(ia_handle, local_segments, num_segments,
                             (DAT_MEM_PRIV_FLAGS)(DAT_MEM_PRIV_WRITE_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC));
}
