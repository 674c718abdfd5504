/* Public and Reserved Service Points (conn.h): one object, two handle
 * types.  datd holds the listener (LISTEN / UNLISTEN) and enforces that a
 * conn_qual of an IA belongs to one listener across the host
 * (DAT_CONN_QUAL_IN_USE passes through from datd).
 *
 * Error codes where the man pages leave room: an EVD that is not a CR EVD
 * of this IA: DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_CR; an RSP's EP of
 * another IA: DAT_INVALID_HANDLE_EP; an RSP's EP not Unconnected:
 * DAT_INVALID_STATE with the EP state's subtype. */
#include "config.h"

#include "libdat/conn.h"

#include <stdlib.h>

#include "libdat/ep.h"
#include "libdat/evd.h"
#include "libdat/ia.h"
#include "libdat/mem_object.h"

static void listener_destroy(struct dat_object *obj);

static const struct dat_object_ops psp_ops = {
        .type = DAT_HANDLE_TYPE_PSP,
        .name = "PSP",
        .invalid_subtype = DAT_INVALID_HANDLE_PSP,
        .destroy = listener_destroy,
};

static const struct dat_object_ops rsp_ops = {
        .type = DAT_HANDLE_TYPE_RSP,
        .name = "RSP",
        .invalid_subtype = DAT_INVALID_HANDLE_RSP,
        .destroy = listener_destroy,
};

struct listener *psp_lookup(DAT_PSP_HANDLE handle)
{
        struct dat_object *o = dat_object_lookup(handle, DAT_HANDLE_TYPE_PSP);

        return o ? dat_container_of(o, struct listener, obj) : NULL;
}

struct listener *rsp_lookup(DAT_RSP_HANDLE handle)
{
        struct dat_object *o = dat_object_lookup(handle, DAT_HANDLE_TYPE_RSP);

        return o ? dat_container_of(o, struct listener, obj) : NULL;
}

static struct ia *listener_ia(const struct listener *l)
{
        return dat_container_of(l->obj.parent, struct ia, obj);
}

struct listener *listener_find_locked(struct ia *ia, uint32_t listener_id)
{
        if (listener_id == 0)
                return NULL;
        dat_list_for_each(pos, &ia->obj.children) {
                struct dat_object *o = dat_container_of(pos, struct dat_object, sibling);
                struct listener *l;

                if (o->ops != &psp_ops && o->ops != &rsp_ops)
                        continue;
                l = dat_container_of(o, struct listener, obj);
                if (l->listener_id == listener_id && !o->closing)
                        return l;
        }
        return NULL;
}

/* Gives back the EVD and the EP; an RSP's EP still Reserved goes back to
 * Unconnected (dat_rsp_free(3DAT)).  mirror: tell datd (not on an abrupt
 * close, where datd drops everything). */
static void listener_release(struct listener *l, bool mirror)
{
        struct ep *ep = ep_lookup(l->ep);

        if (ep) {
                bool reserved;

                dat_object_lock();
                reserved = ep->state == DAT_EP_STATE_RESERVED;
                if (reserved)
                        __atomic_store_n(&ep->state, DAT_EP_STATE_UNCONNECTED, __ATOMIC_RELEASE);
                dat_object_unlock();
                if (reserved && mirror)
                        ep_mirror_nowait(ep);
                mem_object_unuse(l->ep, DAT_HANDLE_TYPE_EP);
        }
        if (l->evd)
                mem_object_unuse(l->evd, DAT_HANDLE_TYPE_EVD);
        dat_object_fini(&l->obj);
        free(l);
}

/* Abrupt dat_ia_close: a request of this listener whose EP is still being
 * made must be done with the IA and the CR EVD first. */
static void listener_destroy(struct dat_object *obj)
{
        ep_provider_drain();
        listener_release(dat_container_of(obj, struct listener, obj), false);
}

/* Takes a use of the CR EVD of ia that handle names. */
static DAT_RETURN hold_cr_evd(struct ia *ia, DAT_EVD_HANDLE handle)
{
        const DAT_RETURN bad = DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
        struct dat_object *obj;
        struct evd *evd = evd_lookup(handle);

        /* dat_psp_create(3DAT): "evd_handle: Event Dispatcher that provides
         * the Connection Requested Events" -- it must take that stream. */
        if (!evd || !(evd->flags & DAT_EVD_CR_FLAG))
                return bad;
        if (mem_object_use(handle, DAT_HANDLE_TYPE_EVD, &ia->obj, &obj) != DAT_SUCCESS)
                return bad;
        return DAT_SUCCESS;
}

/* Takes the RSP's EP: an Unconnected EP of ia, nobody else's. */
static DAT_RETURN hold_rsp_ep(struct ia *ia, DAT_EP_HANDLE handle)
{
        struct ep *ep;
        DAT_RETURN ret = DAT_SUCCESS;

        dat_object_lock();
        ep = ep_lookup(handle);
        if (!ep || ep->obj.parent != &ia->obj || ep->obj.closing)
                ret = DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        /* dat_rsp_create(3DAT): the EP must be Unconnected; it moves to
         * Reserved. */
        else if (ep->state != DAT_EP_STATE_UNCONNECTED)
                ret = ep_invalid_state(ep->state);
        else {
                ep->obj.users++;
                __atomic_store_n(&ep->state, DAT_EP_STATE_RESERVED, __ATOMIC_RELEASE);
        }
        dat_object_unlock();
        if (ret == DAT_SUCCESS)
                ep_mirror_nowait(ep);
        return ret;
}

static DAT_RETURN send_listen(struct ia *ia, struct listener *l, uint32_t kind)
{
        struct datp_listen req = {
                .hdr = { .type = DATP_LISTEN, .length = sizeof(req) },
                .ia_id = ia->ia_id,
                .kind = kind,
                .conn_qual = kind == DATP_LISTENER_PSP_ANY ? 0 : l->conn_qual,
                .handle = (uintptr_t)l->obj.handle,
                .ep_handle = (uintptr_t)l->ep,
                .psp_flags = kind == DATP_LISTENER_RSP ? 0 : (uint32_t)l->psp_flags,
        };
        union datp_message reply;
        char why[DATD_REASON_MAX];
        DAT_RETURN ret = datd_conn_call(&ia->conn, &req.hdr, &reply, why);

        if (ret != DAT_SUCCESS) {
                dat_trace("LISTEN on conn_qual %llu: %s", (unsigned long long)l->conn_qual, why);
                return ret;
        }
        ret = dat_err_normalize(reply.listen_reply.status.dat_status);
        if (ret != DAT_SUCCESS) {
                dat_trace("datd refused to listen on conn_qual %llu of IA %s: 0x%08x",
                          (unsigned long long)l->conn_qual, ia->name, ret);
                return ret;
        }
        dat_object_lock();
        l->listener_id = reply.listen_reply.listener_id;
        l->conn_qual = reply.listen_reply.conn_qual;
        dat_object_unlock();
        return DAT_SUCCESS;
}

DAT_RETURN listener_create(DAT_IA_HANDLE ia_handle, uint32_t kind, DAT_CONN_QUAL conn_qual,
                           DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS psp_flags,
                           DAT_EP_HANDLE ep_handle, struct listener **out)
{
        struct ia *ia = ia_lookup(ia_handle);
        struct listener *l;
        DAT_RETURN ret;

        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        l = calloc(1, sizeof(*l));
        if (!l)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        l->conn_qual = conn_qual;
        l->psp_flags = psp_flags;
        ret = hold_cr_evd(ia, evd_handle);
        if (ret != DAT_SUCCESS) {
                free(l);
                return ret;
        }
        l->evd = evd_handle;
        if (kind == DATP_LISTENER_RSP) {
                ret = hold_rsp_ep(ia, ep_handle);
                if (ret != DAT_SUCCESS)
                        goto err;
                l->ep = ep_handle;
        }
        ret = dat_object_init(&l->obj, kind == DATP_LISTENER_RSP ? &rsp_ops : &psp_ops, &ia->obj);
        if (ret != DAT_SUCCESS)
                goto err;
        ret = send_listen(ia, l, kind);
        if (ret != DAT_SUCCESS)
                goto err;
        *out = l;
        return DAT_SUCCESS;
err:
        listener_release(l, true);
        return ret;
}

DAT_RETURN listener_free(DAT_HANDLE handle, DAT_HANDLE_TYPE type)
{
        struct datp_unlisten req = { .hdr = { .type = DATP_UNLISTEN, .length = sizeof(req) } };
        union datp_message reply;
        char why[DATD_REASON_MAX];
        struct dat_object *obj;
        struct listener *l;
        struct ia *ia;
        DAT_RETURN ret = mem_object_claim(handle, type, DAT_NO_SUBTYPE, &obj);

        if (ret != DAT_SUCCESS)
                return ret;
        l = dat_container_of(obj, struct listener, obj);
        ia = listener_ia(l);
        req.ia_id = ia->ia_id;
        req.listener_id = l->listener_id;
        /* Once datd has answered no request for it can arrive any more;
         * if datd is gone the listener went with the connection. */
        if (datd_conn_call(&ia->conn, &req.hdr, &reply, why) != DAT_SUCCESS)
                dat_trace("UNLISTEN of conn_qual %llu: %s", (unsigned long long)l->conn_qual, why);
        /* A provider EP being made for one of its requests (cr.c) posts on
         * its EVD: let it finish before the EVD is let go. */
        ep_provider_drain();
        listener_release(l, true);
        return DAT_SUCCESS;
}
