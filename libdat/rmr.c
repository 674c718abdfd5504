/* Remote Memory Regions (see rmr.h): dat_rmr_create, dat_rmr_query,
 * dat_rmr_bind, dat_rmr_free, and the remote-context lookup of the data
 * path.
 *
 * dat_rmr_bind checks everything it can before posting, in this order,
 * with these codes (all with DAT_CLASS_ERROR):
 * - rmr_handle: DAT_INVALID_HANDLE_RMR.  lmr_triplet NULL: DAT_INVALID_ARG3.
 * - For a bind (segment_length > 0; 0 unbinds and ignores lmr_handle and
 *   mem_privileges' relation to an LMR): lmr_handle not a live LMR of the
 *   RMR's IA: DAT_INVALID_HANDLE_LMR; the triplet's lmr_context not that
 *   LMR's, or the window not inside what it registered ("exceeded the
 *   limits of the existing LMR"): DAT_INVALID_PARAMETER | DAT_INVALID_ARG3.
 * - mem_privileges with bits outside DAT_MEM_PRIV_ALL_FLAG and the IB
 *   extensions' DAT_IB_MEM_PRIV_REMOTE_ATOMIC: DAT_INVALID_ARG4; a
 *   privilege the LMR cannot back (remote read needs the LMR's local read,
 *   remote write and remote atomic its local write, as IB memory windows
 *   do, a local privilege itself): DAT_PRIVILEGES_VIOLATION with
 *   DAT_PRIVILEGES_{READ,WRITE,RDMA_READ,RDMA_WRITE} (an atomic writes:
 *   RDMA_WRITE).  The LMR on another PZ than the RMR:
 *   DAT_PROTECTION_VIOLATION.
 * - va_type DAT_VA_TYPE_ZB: DAT_MODEL_NOT_SUPPORTED (zb_supported is
 *   false); another value: DAT_INVALID_ARG5.
 * - ep_handle not a live EP of the IA: DAT_INVALID_HANDLE_EP; the EP on
 *   another PZ (or none): DAT_PROTECTION_VIOLATION.
 * - completion_flags other than SUPPRESS, UNSIGNALLED, BARRIER_FENCE:
 *   DAT_INVALID_ARG8, as is UNSIGNALLED when the EP's request completion
 *   flags do not allow it (the man page's rule).  rmr_context NULL for a
 *   bind: DAT_INVALID_ARG9.
 * - Last, the EP's state: anything but CONNECTED or DISCONNECTED is
 *   DAT_INVALID_STATE with the DAT_INVALID_STATE_EP_* of the state. */
#include "config.h"

#include "libdat/rmr.h"

#include <stdlib.h>

#include "libdat/datd_object.h"
#include "libdat/dto.h"
#include "libdat/ep.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"
#include "libdat/lmr.h"
#include "libdat/mem_shm.h"
#include "libdat/mem_ctx.h"
#include "libdat/mem_object.h"
#include "libdat/pz.h"

#define BIND_COMPLETION_FLAGS \
        (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG | \
         DAT_COMPLETION_BARRIER_FENCE_FLAG)

static const struct dat_object_ops rmr_ops = {
        .type = DAT_HANDLE_TYPE_RMR,
        .name = "RMR",
        .invalid_subtype = DAT_INVALID_HANDLE_RMR,
        .destroy = rmr_destroy,
};

DAT_DEFINE_LOOKUP(rmr, DAT_HANDLE_TYPE_RMR)

struct ia *rmr_ia(const struct rmr *rmr)
{
        return dat_container_of(rmr->obj.parent, struct ia, obj);
}

/* Withdraws the context, lets go of the LMR(s), unregisters, unlinks and
 * frees; accepts a half-built RMR.  dat_rmr_free(3DAT): a bound RMR is
 * unbound first. */
static void rmr_free(struct rmr *rmr)
{
        if (!rmr)
                return;
        if (rmr->has_ctx_slot)
                mem_ctx_release(rmr->ctx_slot);
        if (rmr->bound.lmr)
                lmr_put(rmr->bound.lmr);
        if (rmr->has_pending && rmr->pending.lmr)
                lmr_put(rmr->pending.lmr);
        if (rmr->datd_id)
                datd_object_unregister(rmr_ia(rmr), rmr->datd_id);
        dat_object_fini(&rmr->obj);
        pz_put(rmr->pz);
        free(rmr);
}

void rmr_destroy(struct dat_object *obj)
{
        struct rmr *rmr = dat_container_of(obj, struct rmr, obj);

        rmr->datd_id = 0; /* datd forgets a connection's objects with it */
        rmr_free(rmr);
}

/* dat_rmr_create(3DAT) */
_public_ DAT_RETURN dat_rmr_create(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE *rmr_handle)
{
        FOREIGN_DISPATCH(pz_handle, rmr_create_func, pz_handle, rmr_handle);
        struct datp_obj_desc desc = { .kind = DATP_OBJ_RMR, .pz_handle = (uintptr_t)pz_handle };
        struct rmr *rmr;
        DAT_RETURN ret;

        if (!pz_lookup(pz_handle))
                return dat_invalid_handle(DAT_HANDLE_TYPE_PZ);
        if (!rmr_handle)
                return DAT_ERR_ARG(2);
        rmr = calloc(1, sizeof(*rmr));
        if (!rmr)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        ret = pz_get(pz_handle, NULL, &rmr->pz);
        if (ret != DAT_SUCCESS)
                goto err;
        ret = dat_object_init(&rmr->obj, &rmr_ops, rmr->pz->obj.parent);
        if (ret != DAT_SUCCESS)
                goto err;
        ret = mem_ctx_alloc(&rmr->obj, &rmr->ctx_slot);
        if (ret != DAT_SUCCESS)
                goto err;
        rmr->has_ctx_slot = true;
        /* dat_rmr_create(3DAT): over datd.conf's max_rmrs -> DAT_INSUFFICIENT_RESOURCES */
        desc.handle = (uintptr_t)rmr->obj.handle;
        ret = datd_object_register(rmr_ia(rmr), &desc, &rmr->datd_id);
        if (ret != DAT_SUCCESS) {
                rmr->datd_id = 0;
                goto err;
        }
        *rmr_handle = rmr->obj.handle;
        return DAT_SUCCESS;
err:
        rmr_free(rmr);
        return ret;
}

/* dat_rmr_query(3DAT): the binding's fields are 0 for an unbound RMR
 * ("not defined"); the scope is always the PZ's. */
_public_ DAT_RETURN dat_rmr_query(DAT_RMR_HANDLE rmr_handle, DAT_RMR_PARAM_MASK rmr_param_mask,
                                  DAT_RMR_PARAM *rmr_param)
{
        FOREIGN_DISPATCH(rmr_handle, rmr_query_func, rmr_handle, rmr_param_mask, rmr_param);
        struct rmr *rmr = rmr_lookup(rmr_handle);

        if (!rmr)
                return dat_invalid_handle(DAT_HANDLE_TYPE_RMR);
        if ((unsigned)rmr_param_mask & ~(unsigned)DAT_RMR_FIELD_ALL)
                return DAT_ERR_ARG(2);
        if (!rmr_param)
                return DAT_ERR_ARG(3);
        *rmr_param = (DAT_RMR_PARAM){
                .ia_handle = rmr->obj.parent->handle,
                .pz_handle = rmr->pz->obj.handle,
                .lmr_triplet = rmr->bound.triplet,
                .mem_priv = rmr->bound.mem_priv,
                .rmr_context = rmr->bound.rmr_context,
                .rmr_scope = DAT_RMR_SCOPE_PZ,
                .va_type = rmr->bound.va_type,
        };
        return DAT_SUCCESS;
}

/* dat_rmr_free(3DAT): allowed bound or unbound */
_public_ DAT_RETURN dat_rmr_free(DAT_RMR_HANDLE rmr_handle)
{
        FOREIGN_DISPATCH(rmr_handle, rmr_free_func, rmr_handle);
        struct dat_object *obj;
        /* Nothing takes users on an RMR: the claim only fails on the handle. */
        DAT_RETURN ret = mem_object_claim(rmr_handle, DAT_HANDLE_TYPE_RMR, DAT_NO_SUBTYPE, &obj);

        if (ret == DAT_SUCCESS)
                rmr_free(dat_container_of(obj, struct rmr, obj));
        return ret;
}

/* dat_rmr_bind(3DAT): which LMR privilege each RMR privilege needs. */
static DAT_RETURN check_bind_privileges(DAT_MEM_PRIV_FLAGS asked, DAT_MEM_PRIV_FLAGS lmr_priv)
{
        static const struct {
                DAT_MEM_PRIV_FLAGS asked, needs;
                DAT_RETURN_SUBTYPE subtype;
        } rules[] = {
                { DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_PRIVILEGES_READ },
                { DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_PRIVILEGES_WRITE },
                { DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_PRIVILEGES_RDMA_READ },
                { DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                  DAT_PRIVILEGES_RDMA_WRITE },
                { (DAT_MEM_PRIV_FLAGS)DAT_IB_MEM_PRIV_REMOTE_ATOMIC, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                  DAT_PRIVILEGES_RDMA_WRITE },
        };

        for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
                if ((asked & rules[i].asked) && !(lmr_priv & rules[i].needs))
                        return DAT_ERR(DAT_PRIVILEGES_VIOLATION, rules[i].subtype);
        return DAT_SUCCESS;
}

/* The checks on the LMR and the window of a bind (not an unbind). */
static DAT_RETURN check_bind_target(const struct rmr *rmr, DAT_LMR_HANDLE lmr_handle,
                                    const DAT_LMR_TRIPLET *triplet, DAT_MEM_PRIV_FLAGS mem_priv)
{
        struct lmr *lmr = lmr_lookup(lmr_handle);
        DAT_RETURN ret;

        if (!lmr || lmr->obj.parent != rmr->obj.parent)
                return dat_invalid_handle(DAT_HANDLE_TYPE_LMR);
        /* dat_rmr_bind(3DAT): the window must lie within the LMR */
        if (triplet->lmr_context != lmr->lmr_context ||
            !lmr_covers(lmr, triplet->virtual_address, triplet->segment_length))
                return DAT_ERR_ARG(3);
        ret = check_bind_privileges(mem_priv, lmr->privileges);
        if (ret != DAT_SUCCESS)
                return ret;
        if (lmr->pz != rmr->pz)
                return DAT_ERR(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE);
        return DAT_SUCCESS;
}

/* The checks on the EP a bind is posted to, but its state. */
static DAT_RETURN check_bind_ep(const struct rmr *rmr, const struct ep *ep,
                                DAT_COMPLETION_FLAGS completion_flags)
{
        if (!ep || ep->obj.parent != rmr->obj.parent)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        if (!ep_pz_is(ep, &rmr->pz->obj))
                return DAT_ERR(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE);
        if ((unsigned)completion_flags & ~(unsigned)BIND_COMPLETION_FLAGS)
                return DAT_ERR_ARG(8);
        /* dat_rmr_bind(3DAT): UNSIGNALLED only if the EP's request
         * completion flags allow it, else DAT_INVALID_PARAMETER */
        if ((completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
            !(ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG))
                return DAT_ERR_ARG(8);
        return DAT_SUCCESS;
}

static bool ep_state_allows_bind(DAT_EP_STATE state)
{
        return state == DAT_EP_STATE_CONNECTED || state == DAT_EP_STATE_CONNECTED_SINGLE_PATH ||
               state == DAT_EP_STATE_CONNECTED_MULTI_PATH || state == DAT_EP_STATE_DISCONNECTED;
}

/* dat_rmr_bind(3DAT) */
_public_ DAT_RETURN dat_rmr_bind(DAT_RMR_HANDLE rmr_handle, DAT_LMR_HANDLE lmr_handle,
                                 const DAT_LMR_TRIPLET *lmr_triplet, DAT_MEM_PRIV_FLAGS mem_priv,
                                 DAT_VA_TYPE va_type, DAT_EP_HANDLE ep_handle,
                                 DAT_RMR_COOKIE user_cookie, DAT_COMPLETION_FLAGS completion_flags,
                                 DAT_RMR_CONTEXT *context)
{
        FOREIGN_DISPATCH_GUARDED(rmr_handle,
                                 (2, lmr_handle, DAT_INVALID_HANDLE_LMR,
                                  ep_handle, DAT_INVALID_HANDLE_EP),
                                 rmr_bind_func, rmr_handle, lmr_handle, lmr_triplet, mem_priv,
                                 va_type, ep_handle, user_cookie, completion_flags, context);
        struct rmr *rmr = rmr_lookup(rmr_handle);
        struct ep *ep;
        bool unbind;
        DAT_RETURN ret;

        if (!rmr)
                return dat_invalid_handle(DAT_HANDLE_TYPE_RMR);
        if (!lmr_triplet)
                return DAT_ERR_ARG(3);
        if ((unsigned)mem_priv & ~MEM_PRIV_VALID)
                return DAT_ERR_ARG(4);
        /* dat_rmr_bind(3DAT): a length of zero binds to no memory */
        unbind = lmr_triplet->segment_length == 0;
        if (!unbind) {
                ret = check_bind_target(rmr, lmr_handle, lmr_triplet, mem_priv);
                if (ret != DAT_SUCCESS)
                        return ret;
        }
        if (va_type == DAT_VA_TYPE_ZB)
                return DAT_ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE);
        if (va_type != DAT_VA_TYPE_VA)
                return DAT_ERR_ARG(5);
        ep = ep_lookup(ep_handle);
        ret = check_bind_ep(rmr, ep, completion_flags);
        if (ret != DAT_SUCCESS)
                return ret;
        if (!unbind && !context)
                return DAT_ERR_ARG(9);
        /* dat_rmr_bind(3DAT): valid on a CONNECTED or DISCONNECTED EP only */
        if (!ep_state_allows_bind(ep_state(ep)))
                return ep_invalid_state(ep_state(ep));
        /* The bind goes on the EP's request queue: it completes in order
         * with what was posted before it (DAT_RMR_BIND_COMPLETION_EVENT,
         * flushed on a Disconnected EP); the new context is returned now
         * and resolves once it completes. */
        return dto_post_bind(ep, rmr, lmr_handle, lmr_triplet, mem_priv, va_type, user_cookie,
                             completion_flags, context);
}

DAT_RETURN rmr_bind_prepare(struct rmr *rmr, DAT_LMR_HANDLE lmr_handle,
                            const DAT_LMR_TRIPLET *triplet, DAT_MEM_PRIV_FLAGS mem_priv,
                            DAT_VA_TYPE va_type, DAT_RMR_CONTEXT *rmr_context)
{
        struct rmr_binding b = { .triplet = *triplet, .mem_priv = mem_priv, .va_type = va_type };
        struct lmr *lmr;

        if (triplet->segment_length > 0) {
                DAT_RETURN ret = lmr_get(lmr_handle, rmr_ia(rmr), &lmr);

                if (ret != DAT_SUCCESS)
                        return ret;
                b.lmr = lmr_handle;
                b.rmr_context = mem_ctx_draw(rmr->ctx_slot, MEM_CTX_REMOTE);
        } else {
                b = (struct rmr_binding){ 0 };
        }
        rmr->pending = b;
        rmr->has_pending = true;
        *rmr_context = b.rmr_context;
        return DAT_SUCCESS;
}

void rmr_bind_complete(struct rmr *rmr, bool success)
{
        DAT_LMR_HANDLE release;

        if (!rmr->has_pending)
                return;
        if (success) {
                release = rmr->bound.lmr;
                /* Old context out, window changed, new context in: no
                 * lookup pairs a context with the other binding's window. */
                mem_ctx_revoke(rmr->ctx_slot, MEM_CTX_REMOTE);
                rmr->bound = rmr->pending;
                if (rmr->bound.lmr)
                        mem_ctx_set(rmr->ctx_slot, MEM_CTX_REMOTE, rmr->bound.rmr_context);
        } else {
                release = rmr->pending.lmr;
        }
        rmr->pending = (struct rmr_binding){ 0 };
        rmr->has_pending = false;
        if (release)
                lmr_put(release);
}

/* What an LMR's own rmr_context reaches. */
static DAT_RETURN lmr_remote_access(struct lmr *lmr, DAT_VADDR address, DAT_VLEN length,
                                    DAT_MEM_PRIV_FLAGS privileges)
{
        if (!lmr_covers(lmr, address, length))
                return DAT_ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE);
        if ((privileges & lmr->privileges) != privileges)
                return DAT_ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE);
        return DAT_SUCCESS;
}

/* What a bound RMR's window reaches; b is a copy taken while ctx still
 * resolved to the RMR. */
static DAT_RETURN rmr_remote_access(const struct rmr_binding *b, DAT_VADDR address,
                                    DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges)
{
        DAT_VADDR end = address + length, w = b->triplet.virtual_address;

        if (end < address || address < w || end > w + b->triplet.segment_length)
                return DAT_ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE);
        if ((privileges & b->mem_priv) != privileges)
                return DAT_ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE);
        return DAT_SUCCESS;
}

/* The object rmr_context names on ia (an LMR, or an RMR bound with it,
 * whose binding *b then is, copied while the context still named it), or
 * NULL. */
static struct dat_object *context_owner(struct ia *ia, DAT_RMR_CONTEXT rmr_context,
                                        struct rmr_binding *b)
{
        struct dat_object *o = mem_ctx_find(rmr_context, MEM_CTX_REMOTE);
        struct rmr *rmr;

        if (!o || o->parent != &ia->obj)
                return NULL;
        if (o->ops->type == DAT_HANDLE_TYPE_LMR)
                return o;
        rmr = dat_container_of(o, struct rmr, obj);
        *b = rmr->bound;
        /* A bind completing meanwhile may have changed the window. */
        if (mem_ctx_find(rmr_context, MEM_CTX_REMOTE) != o || b->rmr_context != rmr_context)
                return NULL;
        return o;
}

DAT_RETURN rmr_context_find(struct ia *ia, DAT_RMR_CONTEXT rmr_context, DAT_VADDR address,
                            DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges, struct lmr **lmr,
                            struct pz **pz)
{
        struct rmr_binding b;
        struct dat_object *o = context_owner(ia, rmr_context, &b);
        DAT_RETURN ret;

        if (!o)
                return DAT_ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE);
        if (o->ops->type == DAT_HANDLE_TYPE_LMR) {
                *lmr = dat_container_of(o, struct lmr, obj);
                *pz = (*lmr)->pz;
                return lmr_remote_access(*lmr, address, length, privileges);
        }
        ret = rmr_remote_access(&b, address, length, privileges);
        if (ret != DAT_SUCCESS)
                return ret;
        *lmr = lmr_lookup(b.lmr);
        if (!*lmr)
                return DAT_ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE);
        *pz = dat_container_of(o, struct rmr, obj)->pz;
        return DAT_SUCCESS;
}

bool rmr_context_window(struct ia *ia, DAT_RMR_CONTEXT rmr_context, DAT_MEM_PRIV_FLAGS privileges,
                        struct rmr_window *w)
{
        struct rmr_binding b;
        struct dat_object *o;
        struct lmr *lmr = NULL;
        bool ok = false;

        *w = (struct rmr_window){ 0 };
        /* lmr_free unlinks the LMR under this lock before it frees it (and
         * its shared memory): it waits for us. */
        dat_object_lock();
        o = context_owner(ia, rmr_context, &b);
        if (o && o->ops->type == DAT_HANDLE_TYPE_LMR) {
                lmr = dat_container_of(o, struct lmr, obj);
                w->pz = lmr->pz;
                w->start = lmr->registered_address;
                w->length = lmr->registered_length;
                ok = (privileges & lmr->privileges) == privileges;
        } else if (o) {
                lmr = lmr_lookup(b.lmr);
                w->pz = dat_container_of(o, struct rmr, obj)->pz;
                w->start = b.triplet.virtual_address;
                w->length = b.triplet.segment_length;
                ok = (privileges & b.mem_priv) == privileges;
        }
        ok = ok && lmr && !lmr->obj.closing;
        if (ok) {
                w->lmr = lmr;
                w->shm = lmr->shm ? mem_shm_ref(lmr->shm) : NULL;
        }
        dat_object_unlock();
        return ok;
}
