/* Connection Requests (conn.h): made by the progress thread on datd's
 * EV_CONN_REQUEST and delivered as DAT_CONNECTION_REQUEST_EVENT on the
 * listener's EVD; dat_cr_query, dat_cr_accept, dat_cr_reject and
 * dat_cr_handoff.  Accept, reject and handoff destroy the CR once datd took
 * them (dat_cr_accept(3DAT) on failure: "without any effect on the local
 * Endpoint, Pending Connection Request, private data").
 *
 * Error codes where the man pages leave room: private data longer than the
 * provider's max (dat_ia_query max_private_data_size) or negative:
 * DAT_INVALID_PARAMETER on the size argument, a NULL pointer with a
 * positive size on the data argument; dat_cr_accept with no EP for a PSP's
 * request, or an EP of another IA: DAT_INVALID_HANDLE_EP; an EP that is not
 * Unconnected: DAT_INVALID_STATE with its state's subtype; an RSP's request
 * accepted on another EP than the RSP's: DAT_INVALID_PARAMETER (ARG2).
 *
 * Provider-created EPs (a PSP with DAT_PSP_PROVIDER_FLAG): the request's EP
 * is made before the consumer hears of the request, in
 * DAT_EP_STATE_UNCONFIGURED_TENTATIVE (no PZ, no EVDs: DAT 2.0's twin of
 * Tentative Connection Pending); dat_cr_query reports it in local_ep_handle.
 * The consumer configures it with dat_ep_modify (PZ and EVDs may change in
 * that state) and accepts with DAT_HANDLE_NULL (or the EP's own handle);
 * before it has a PZ and a connection EVD the accept is DAT_INVALID_STATE |
 * DAT_INVALID_STATE_EP_UNCONFTENTATIVE and the request stays.  Reject and
 * handoff free the EP.  No EP (datd's max_eps quota): the request is
 * rejected unseen. */
#include "config.h"

#include "libdat/conn.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "libdat/ep.h"
#include "libdat/evd.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"

static void cr_destroy(struct dat_object *obj);

static const struct dat_object_ops cr_ops = {
        .type = DAT_HANDLE_TYPE_CR,
        .name = "CR",
        .invalid_subtype = DAT_INVALID_HANDLE_CR,
        .destroy = cr_destroy,
};

DAT_DEFINE_LOOKUP(cr, DAT_HANDLE_TYPE_CR)

static struct ia *cr_ia(const struct cr *cr)
{
        return dat_container_of(cr->obj.parent, struct ia, obj);
}

static void cr_destroy(struct dat_object *obj)
{
        struct cr *cr = dat_container_of(obj, struct cr, obj);

        dat_object_fini(&cr->obj);
        free(cr);
}

/* The RSP's EP goes back from Passive Connection Pending to what it was
 * (dat_ep_free(3DAT): a rejected request "transitions the Endpoint into the
 * Unconnected state"). */
static void rsp_ep_back(DAT_EP_HANDLE handle, DAT_EP_STATE to)
{
        struct ep *ep = ep_lookup(handle);
        bool changed = false;

        if (!ep)
                return;
        dat_object_lock();
        if (ep->state == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING) {
                __atomic_store_n(&ep->state, to, __ATOMIC_RELEASE);
                changed = true;
        }
        dat_object_unlock();
        if (changed)
                ep_mirror_nowait(ep);
}

/* Asks datd to forget a request nobody will see (its listener is gone, we
 * could not build the CR, or no EP could be made for a provider PSP).  The
 * consumer never refused it, so the active side gets a non-peer reject. */
static void reject_unseen(struct ia *ia, uint32_t cr_id)
{
        struct datp_cr_reject req = { .hdr = { .type = DATP_CR_REJECT, .length = sizeof(req) } };

        req.ia_id = ia->ia_id;
        req.cr_id = cr_id;
        req.flags = DATP_CR_REJECT_NON_PEER;
        datd_conn_send(&ia->conn, &req.hdr);
}

/* Makes the CR object known and posts DAT_CONNECTION_REQUEST_EVENT on the
 * listener's EVD.  false: the IA is closing (the caller cleans up). */
static bool cr_publish(struct ia *ia, struct cr *cr, DAT_EVD_HANDLE evd_handle)
{
        DAT_EVENT event = { .event_number = DAT_CONNECTION_REQUEST_EVENT };
        struct evd *evd;

        if (dat_object_init(&cr->obj, &cr_ops, &ia->obj) != DAT_SUCCESS)
                return false;
        event.event_data.cr_arrival_event_data = (DAT_CR_ARRIVAL_EVENT_DATA){
                .sp_handle.psp_handle = cr->sp, /* a union of handles */
                .local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ia->address,
                .conn_qual = cr->conn_qual,
                .cr_handle = cr->obj.handle,
        };
        /* The listener holds its EVD: it cannot go while the listener is
         * there, and UNLISTEN's reply comes after this event. */
        evd = evd_lookup(evd_handle);
        if (evd)
                evd_post_event(evd, &event);
        return true;
}

/* A request on a PSP created with DAT_PSP_PROVIDER_FLAG: the EP is made
 * off the progress thread (it registers with datd, a round trip the
 * progress thread must not wait for), then the CR is published with it.
 * dat_psp_create(3DAT): the Provider creates "an implicit Endpoint for
 * each incoming Connection Request"; it is what dat_cr_query reports in
 * local_ep_handle.  No EP (datd's max_eps quota, memory): the request is
 * refused and the consumer never sees it. */
struct provider_cr {
        struct ia *ia;
        struct cr *cr;
        DAT_EVD_HANDLE evd;
};

static bool ia_closing(struct ia *ia)
{
        bool closing;

        dat_object_lock();
        closing = ia->obj.closing;
        dat_object_unlock();
        return closing;
}

static void *provider_cr_main(void *arg)
{
        struct provider_cr *w = arg;
        struct cr *cr = w->cr;
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        DAT_RETURN ret = ep_create_provider(w->ia, &ep);

        if (ret != DAT_SUCCESS) {
                dat_trace("connection request %u on conn_qual %llu: no provider EP (0x%08x): "
                          "refused", cr->cr_id, (unsigned long long)cr->conn_qual, ret);
                reject_unseen(w->ia, cr->cr_id);
                free(cr);
        } else {
                cr->ep = ep;
                /* Not published: the IA is closing (its teardown frees the
                 * EP) or there is no memory (the request is refused). */
                if (!cr_publish(w->ia, cr, w->evd)) {
                        if (!ia_closing(w->ia)) {
                                ep_free_provider(ep);
                                reject_unseen(w->ia, cr->cr_id);
                        }
                        free(cr);
                }
        }
        free(w);
        ep_provider_end();
        return NULL;
}

static void provider_cr_start(struct ia *ia, struct cr *cr, DAT_EVD_HANDLE evd)
{
        struct provider_cr *w = malloc(sizeof(*w));
        pthread_attr_t attr;
        pthread_t thread;
        int r = -1;

        ep_provider_begin();
        if (w) {
                *w = (struct provider_cr){ ia, cr, evd };
                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                r = pthread_create(&thread, &attr, provider_cr_main, w);
                pthread_attr_destroy(&attr);
        }
        if (r != 0) {
                dat_trace("connection request %u: no thread to make its EP: refused", cr->cr_id);
                reject_unseen(ia, cr->cr_id);
                free(w);
                free(cr);
                ep_provider_end();
        }
}

void cr_dispatch(struct ia *ia, const struct datp_ev_conn_request *ev)
{
        struct listener *l;
        DAT_EVD_HANDLE evd_handle = DAT_HANDLE_NULL;
        struct ep *ep = NULL;
        bool provider = false;
        struct cr *cr = calloc(1, sizeof(*cr));

        if (!cr) {
                reject_unseen(ia, ev->cr_id);
                return;
        }
        cr->cr_id = ev->cr_id;
        cr->conn_qual = ev->conn_qual;
        cr->remote_port = ev->remote_port;
        if (ev->remote_address_len <= sizeof(cr->remote_address))
                memcpy(&cr->remote_address, &ev->remote_address, ev->remote_address_len);
        cr->pd_len = (DAT_COUNT)(ev->pd_len <= DATP_PRIVATE_DATA_MAX ? ev->pd_len : 0);
        memcpy(cr->pd, ev->private_data, (size_t)cr->pd_len);

        dat_object_lock();
        l = listener_find_locked(ia, ev->listener_id);
        if (l) {
                cr->sp = l->obj.handle;
                cr->ep = l->ep;
                evd_handle = l->evd;
                provider = !l->ep && l->psp_flags == DAT_PSP_PROVIDER_FLAG;
                ep = ep_lookup(l->ep);
                if (ep && ep->state == DAT_EP_STATE_RESERVED)
                        __atomic_store_n(&ep->state, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING,
                                         __ATOMIC_RELEASE);
                else
                        ep = NULL;
        }
        dat_object_unlock();
        if (!l) {
                dat_trace("connection request %u for listener %u: no such listener here",
                          ev->cr_id, ev->listener_id);
                free(cr);
                reject_unseen(ia, ev->cr_id);
                return;
        }
        if (provider) {
                provider_cr_start(ia, cr, evd_handle);
                return;
        }
        /* dat_rsp_create(3DAT): a request moves the EP to Passive
         * Connection Pending (told to datd before the consumer can act). */
        if (ep)
                ep_mirror_nowait(ep);
        if (!cr_publish(ia, cr, evd_handle)) {
                if (ep)
                        rsp_ep_back(ep->obj.handle, DAT_EP_STATE_RESERVED);
                free(cr);
                reject_unseen(ia, ev->cr_id);
        }
}

/* dat_cr_query(3DAT): everything is filled whatever the mask; the private
 * data pointer is the CR's, valid until the CR goes. */
_public_ DAT_RETURN dat_cr_query(DAT_CR_HANDLE cr_handle, DAT_CR_PARAM_MASK cr_param_mask,
                                 DAT_CR_PARAM *cr_param)
{
        FOREIGN_DISPATCH(cr_handle, cr_query_func, cr_handle, cr_param_mask, cr_param);
        struct cr *cr = cr_lookup(cr_handle);

        if (!cr)
                return dat_invalid_handle(DAT_HANDLE_TYPE_CR);
        if ((unsigned)cr_param_mask & ~(unsigned)DAT_CR_FIELD_ALL)
                return DAT_ERR_ARG(2);
        if (!cr_param)
                return DAT_ERR_ARG(3);
        *cr_param = (DAT_CR_PARAM){
                .remote_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&cr->remote_address,
                .remote_port_qual = cr->remote_port,
                .private_data_size = cr->pd_len,
                .private_data = cr->pd_len ? cr->pd : NULL,
                .local_ep_handle = cr->ep,
        };
        return DAT_SUCCESS;
}

/* Claims the CR for accept/reject/handoff: no second caller gets it. */
static DAT_RETURN cr_claim(DAT_CR_HANDLE handle, struct cr **out)
{
        struct cr *cr = NULL;

        dat_object_lock();
        cr = cr_lookup(handle);
        if (!cr || cr->obj.closing) {
                dat_object_unlock();
                return dat_invalid_handle(DAT_HANDLE_TYPE_CR);
        }
        cr->obj.closing = true;
        dat_object_unlock();
        *out = cr;
        return DAT_SUCCESS;
}

/* The CR handle, then the private data (its size is argument size_arg),
 * then the claim. */
static DAT_RETURN cr_begin(DAT_CR_HANDLE handle, DAT_COUNT pd_size, const void *pd, int size_arg,
                           struct cr **out)
{
        struct cr *cr = cr_lookup(handle);
        DAT_RETURN ret;

        if (!cr)
                return dat_invalid_handle(DAT_HANDLE_TYPE_CR);
        ret = conn_check_private_data(cr_ia(cr), pd_size, pd, size_arg);
        if (ret != DAT_SUCCESS)
                return ret;
        return cr_claim(handle, out);
}

static void cr_unclaim(struct cr *cr)
{
        dat_object_lock();
        cr->obj.closing = false;
        dat_object_unlock();
}

/* One round trip; datd's status or the transport failure. */
static DAT_RETURN cr_call(struct cr *cr, struct datp_header *req, union datp_message *reply)
{
        char why[DATD_REASON_MAX];
        DAT_RETURN ret = datd_conn_call(&cr_ia(cr)->conn, req, reply, why);

        if (ret != DAT_SUCCESS) {
                dat_trace("%s of connection request %u: %s", datp_type_name(req->type), cr->cr_id,
                          why);
                return ret;
        }
        /* Every reply of this section starts with its status. */
        return dat_err_normalize(reply->listen_reply.status.dat_status);
}

/* The state the accepting EP must be in: a consumer's EP Unconnected, an
 * RSP's Passive Connection Pending, a provider-created one (Unconfigured)
 * Tentative Connection Pending. */
static DAT_EP_STATE want_state(const struct cr *cr, const struct ep *ep)
{
        if (!cr->ep)
                return DAT_EP_STATE_UNCONNECTED;
        /* A provider-created EP is accepted once dat_ep_modify configured
         * it (Unconfigured Tentative -> Tentative Connection Pending); before
         * that the state check refuses it with its unconfigured state. */
        if (ep->provider_made)
                return DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
        return DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
}

/* The EP that takes the request: the consumer's (an Unconnected EP of the
 * IA) or the RSP's.  Moves it to Completion Pending. */
static DAT_RETURN take_accepting_ep(struct cr *cr, DAT_EP_HANDLE handle, struct ep **out,
                                    DAT_EP_STATE *before)
{
        struct ep *ep;
        DAT_RETURN ret = DAT_SUCCESS;

        if (cr->ep) {
                /* dat_cr_accept(3DAT): "If the local Endpoint is specified by
                 * the Connection Request, the ep_handle shall be
                 * DAT_HANDLE_NULL." */
                if (handle != DAT_HANDLE_NULL && handle != cr->ep)
                        return DAT_ERR_ARG(2);
                handle = cr->ep;
        }
        dat_object_lock();
        ep = ep_lookup(handle);
        if (!ep || ep->obj.parent != cr->obj.parent || ep->obj.closing)
                ret = DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        else if (ep->state != want_state(cr, ep))
                ret = ep_invalid_state(ep->state);
        else if (!ep->connect_evd)
                ret = DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
        else {
                *before = ep->state;
                __atomic_store_n(&ep->state, DAT_EP_STATE_COMPLETION_PENDING, __ATOMIC_RELEASE);
                ep->active = false;
                ep->conn_id = 0;
                ep->answer_due = true;
                ep->accept_cr_id = cr->cr_id;
                ep->remote_address = cr->remote_address;
                ep->has_remote = true;
                ep->remote_port = cr->remote_port;
                ep->local_port = cr->conn_qual;
        }
        dat_object_unlock();
        if (ret == DAT_SUCCESS)
                *out = ep;
        return ret;
}

/* datd's answer to a CR_ACCEPT, by the socket's reader (ctx: the EP's
 * handle).  A refusal (a quota of datd's, the request withdrawn meanwhile,
 * a malformed request) ends the accept as the connection failing would:
 * the EP gets DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, and the
 * request, no longer here, is rejected at datd so that the active side
 * hears of it. */
static void accept_answered(void *ctx, DAT_RETURN ret, const union datp_message *reply)
{
        struct datp_cr_reject req = { .hdr = { .type = DATP_CR_REJECT, .length = sizeof(req) } };
        uint32_t cr_id;
        struct ia *ia;

        if (!conn_accept_answered((DAT_EP_HANDLE)ctx, ret, reply, &cr_id, &ia))
                return;
        req.ia_id = ia->ia_id;
        req.cr_id = cr_id;
        req.flags = DATP_CR_REJECT_NON_PEER;
        (void)datd_conn_send(&ia->conn, &req.hdr);
}

/* dat_cr_accept(3DAT): the EP moves to Completion Pending, then Connected
 * with DAT_CONNECTION_EVENT_ESTABLISHED (or Disconnected with
 * DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR) when datd says.  It returns
 * once the CR_ACCEPT is sent: datd answers the connection's id, or a
 * refusal, to the socket's reader (accept_answered), before any event of
 * the connection, so the accepting thread's chain per connection holds no
 * round trip. */
_public_ DAT_RETURN dat_cr_accept(DAT_CR_HANDLE cr_handle, DAT_EP_HANDLE ep_handle,
                                  DAT_COUNT private_data_size, const DAT_PVOID private_data)
{
        FOREIGN_DISPATCH_GUARDED(cr_handle,
                                 (1, ep_handle, DAT_INVALID_HANDLE_EP),
                                 cr_accept_func, cr_handle, ep_handle, private_data_size,
                                 private_data);
        struct datp_cr_accept req = { .hdr = { .type = DATP_CR_ACCEPT, .length = sizeof(req) } };
        struct cr *cr = NULL;
        struct ep *ep;
        DAT_EP_STATE before = DAT_EP_STATE_UNCONNECTED;
        DAT_RETURN ret;

        ret = cr_begin(cr_handle, private_data_size, private_data, 3, &cr);
        if (ret != DAT_SUCCESS)
                return ret;
        ret = take_accepting_ep(cr, ep_handle, &ep, &before);
        if (ret != DAT_SUCCESS) {
                cr_unclaim(cr);
                return ret;
        }
        /* datd's copy of the state moves with the CR_ACCEPT it takes. */
        req.ia_id = cr_ia(cr)->ia_id;
        req.cr_id = cr->cr_id;
        req.ep_handle = (uintptr_t)ep->obj.handle;
        req.pd_len = (uint32_t)private_data_size;
        if (private_data_size)
                memcpy(req.private_data, private_data, (size_t)private_data_size);
        ret = datd_conn_send_later(&cr_ia(cr)->conn, &req.hdr, accept_answered,
                                   (void *)ep->obj.handle);
        if (ret != DAT_SUCCESS) {
                bool back = false;

                dat_trace("CR_ACCEPT of connection request %u could not be sent", cr->cr_id);
                dat_object_lock();
                ep->answer_due = false;
                if (ep->state == DAT_EP_STATE_COMPLETION_PENDING) {
                        __atomic_store_n(&ep->state, before, __ATOMIC_RELEASE);
                        ep->has_remote = false;
                        back = true;
                }
                dat_object_unlock();
                if (back)
                        ep_mirror_nowait(ep);
                cr_unclaim(cr);
                return ret;
        }
        cr_destroy(&cr->obj);
        return DAT_SUCCESS;
}

/* Whether the CR's EP is one the provider made for it (not an RSP's). */
static bool cr_has_provider_ep(const struct cr *cr)
{
        const struct ep *ep = ep_lookup(cr->ep);

        return ep && ep->provider_made;
}

/* Sends a reject or handoff; once datd took it the request is no longer
 * here: an RSP's EP is free again (Unconnected), a provider-created EP is
 * freed (it was made for this request only; the consumer cannot free it,
 * dat_ep_free(3DAT) refuses Tentative Connection Pending), and the CR
 * goes. */
static DAT_RETURN cr_finish(struct cr *cr, struct datp_header *req)
{
        union datp_message reply;
        bool provider = cr_has_provider_ep(cr);
        DAT_RETURN ret = cr_call(cr, req, &reply);

        if (ret != DAT_SUCCESS) {
                cr_unclaim(cr);
                return ret;
        }
        if (provider)
                ep_free_provider(cr->ep);
        else if (cr->ep)
                rsp_ep_back(cr->ep, DAT_EP_STATE_UNCONNECTED);
        cr_destroy(&cr->obj);
        return DAT_SUCCESS;
}

/* dat_cr_reject(3DAT): the private data goes to the active side with its
 * DAT_CONNECTION_EVENT_PEER_REJECTED.  An RSP's EP goes to Unconnected
 * (dat_ep_free(3DAT): rejecting "transitions the Endpoint into the
 * Unconnected state"). */
_public_ DAT_RETURN dat_cr_reject(DAT_CR_HANDLE cr_handle, DAT_COUNT private_data_size,
                                  const DAT_PVOID private_data)
{
        FOREIGN_DISPATCH(cr_handle, cr_reject_func, cr_handle, private_data_size, private_data);
        struct datp_cr_reject req = { .hdr = { .type = DATP_CR_REJECT, .length = sizeof(req) } };
        struct cr *cr = NULL;
        DAT_RETURN ret;

        ret = cr_begin(cr_handle, private_data_size, private_data, 2, &cr);
        if (ret != DAT_SUCCESS)
                return ret;
        req.ia_id = cr_ia(cr)->ia_id;
        req.cr_id = cr->cr_id;
        req.pd_len = (uint32_t)private_data_size;
        if (private_data_size)
                memcpy(req.private_data, private_data, (size_t)private_data_size);
        return cr_finish(cr, &req.hdr);
}

/* dat_cr_handoff(3DAT): datd gives the request to the listener of handoff
 * on the same IA (its refusal passes through); the CR is gone here. */
_public_ DAT_RETURN dat_cr_handoff(DAT_CR_HANDLE cr_handle, DAT_CONN_QUAL handoff)
{
        FOREIGN_DISPATCH(cr_handle, cr_handoff_func, cr_handle, handoff);
        struct datp_cr_handoff req = { .hdr = { .type = DATP_CR_HANDOFF, .length = sizeof(req) } };
        struct cr *cr = NULL;
        DAT_RETURN ret = cr_claim(cr_handle, &cr);

        if (ret != DAT_SUCCESS)
                return ret;
        req.ia_id = cr_ia(cr)->ia_id;
        req.cr_id = cr->cr_id;
        req.conn_qual = handoff;
        return cr_finish(cr, &req.hdr);
}
