/* Endpoints (see ep.h): dat_ep_create, dat_ep_create_with_srq, dat_ep_query,
 * dat_ep_get_status, dat_ep_recv_query, dat_ep_set_watermark, dat_ep_reset,
 * dat_ep_free.  dat_ep_modify is in ep_modify.c, the attribute checks in
 * ep_attr.c, connections in conn.c, the data path in dto*.c.
 *
 * Error codes where the man pages leave room:
 * - dat_ep_create: a PZ is required (the man page offers DAT_HANDLE_NULL
 *   for the EVDs only): DAT_INVALID_HANDLE_PZ for NULL, a non-PZ, or a PZ
 *   of another IA; an EVD that is not an EVD of this IA taking the stream
 *   of its role (DTO for recv and request, connection for connect):
 *   DAT_INVALID_HANDLE_EVD_RECV / _REQUEST / _CONN; an attribute beyond
 *   the IA's limits (dat_ia_query) or completion flags that the EVDs' other
 *   streams forbid: DAT_INVALID_PARAMETER | DAT_INVALID_ARG6 (the
 *   attributes); a service type or QoS that is well-formed but not offered:
 *   DAT_MODEL_NOT_SUPPORTED; datd's max_eps quota:
 *   DAT_INSUFFICIENT_RESOURCES.
 * - dat_ep_create_with_srq: the same with the attributes as ARG7 (NULL is
 *   DAT_INVALID_ARG7: "Cannot be NULL"), DAT_INVALID_HANDLE_SRQ for an SRQ
 *   of another IA, DAT_INVALID_ARG2 when the PZ is not the SRQ's
 *   (srq_ep_pz_difference_supported is false).
 * - dat_ep_query: mask bits outside DAT_EP_FIELD_ALL: DAT_INVALID_ARG2; a
 *   NULL ep_param with a non-zero mask: DAT_INVALID_ARG3.
 * - dat_ep_get_status, dat_ep_recv_query: a NULL output is not wanted.
 * - dat_ep_set_watermark: below 0 and not DAT_WATERMARK_INFINITE: ARG2/ARG3.
 *   The soft high watermark event goes to the IA's async EVD as
 *   DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR with reason
 *   DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT (ep_events.h says why).  The hard
 *   high watermark, exceeded, ends the EP's connection as a failed data
 *   path does (dto_ep_break): DAT_CONNECTION_EVENT_BROKEN on its connect
 *   EVD, Disconnected, every DTO outstanding (the Receive that crossed
 *   it too) DAT_DTO_ERR_FLUSHED, the peer's end broken as well.  Only a
 *   connection can break: exceeded while the EP has none running (Receives
 *   posted before connecting), it stays armed and fires at the first check
 *   that finds it exceeded on a connection.  Both are checked where the
 *   consumer makes the count grow or changes them: dat_ep_post_recv,
 *   dat_ep_set_watermark, dat_ep_modify; not when the data path takes a
 *   buffer of the EP's SRQ.
 * - dat_ep_free: also refused while another object holds the EP (`users`).
 * - invalid states: DAT_INVALID_STATE with the subtype of the EP's state
 *   (DAT_INVALID_STATE_EP_UNCONNECTED, ...). */
#include "config.h"

#include "libdat/ep.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "libdat/conn.h"
#include "libdat/datd_object.h"
#include "libdat/dto.h"
#include "libdat/ep_attr.h"
#include "libdat/ep_events.h"
#include "libdat/evd.h"
#include "libdat/evd_wait.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"
#include "libdat/pz.h"
#include "libdat/srq.h"

static void ep_destroy(struct dat_object *obj);

static const struct dat_object_ops ep_ops = {
        .type = DAT_HANDLE_TYPE_EP,
        .name = "EP",
        .invalid_subtype = DAT_INVALID_HANDLE_EP,
        .destroy = ep_destroy,
};

DAT_DEFINE_LOOKUP(ep, DAT_HANDLE_TYPE_EP)

struct ia *ep_ia(const struct ep *ep)
{
        return dat_container_of(ep->obj.parent, struct ia, obj);
}

DAT_PZ_HANDLE ep_pz_handle(const struct ep *ep)
{
        return ep->pz;
}

bool ep_pz_is(const struct ep *ep, const struct dat_object *pz)
{
        /* A handle names one object for its life (its generation): equal
         * handles, same object. */
        return pz && pz->handle == ep->pz;
}

DAT_EP_STATE ep_state(const struct ep *ep)
{
        return __atomic_load_n(&ep->state, __ATOMIC_ACQUIRE);
}

DAT_RETURN ep_invalid_state(DAT_EP_STATE state)
{
        static const DAT_RETURN_SUBTYPE subtype[] = {
                [DAT_EP_STATE_UNCONNECTED] = DAT_INVALID_STATE_EP_UNCONNECTED,
                [DAT_EP_STATE_UNCONFIGURED_UNCONNECTED] = DAT_INVALID_STATE_EP_UNCONFIGURED,
                [DAT_EP_STATE_RESERVED] = DAT_INVALID_STATE_EP_RESERVED,
                [DAT_EP_STATE_UNCONFIGURED_RESERVED] = DAT_INVALID_STATE_EP_UNCONFRESERVED,
                [DAT_EP_STATE_PASSIVE_CONNECTION_PENDING] = DAT_INVALID_STATE_EP_PASSCONNPENDING,
                [DAT_EP_STATE_UNCONFIGURED_PASSIVE] = DAT_INVALID_STATE_EP_UNCONFPASSIVE,
                [DAT_EP_STATE_ACTIVE_CONNECTION_PENDING] = DAT_INVALID_STATE_EP_ACTCONNPENDING,
                [DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING] = DAT_INVALID_STATE_EP_TENTCONNPENDING,
                [DAT_EP_STATE_UNCONFIGURED_TENTATIVE] = DAT_INVALID_STATE_EP_UNCONFTENTATIVE,
                [DAT_EP_STATE_CONNECTED] = DAT_INVALID_STATE_EP_CONNECTED,
                [DAT_EP_STATE_DISCONNECT_PENDING] = DAT_INVALID_STATE_EP_DISCPENDING,
                [DAT_EP_STATE_DISCONNECTED] = DAT_INVALID_STATE_EP_DISCONNECTED,
                [DAT_EP_STATE_COMPLETION_PENDING] = DAT_INVALID_STATE_EP_COMPLPENDING,
                [DAT_EP_STATE_CONNECTED_SINGLE_PATH] = DAT_INVALID_STATE_EP_CONNECTED,
                [DAT_EP_STATE_CONNECTED_MULTI_PATH] = DAT_INVALID_STATE_EP_CONNECTED,
        };

        if ((unsigned)state >= ARRAY_SIZE(subtype))
                return DAT_ERR(DAT_INVALID_STATE, DAT_NO_SUBTYPE);
        return DAT_ERR(DAT_INVALID_STATE, subtype[state]);
}

static uint64_t handle_u64(DAT_HANDLE h)
{
        return (uint64_t)(uintptr_t)h;
}

/* What datd knows of an EP (proto/datp.h, DATP_OBJ_EP). */
static void ep_describe(const struct ep *ep, struct datp_obj_desc *d)
{
        *d = (struct datp_obj_desc){
                .kind = DATP_OBJ_EP,
                .state = (uint32_t)ep->state,
                .handle = handle_u64(ep->obj.handle),
                .pz_handle = handle_u64(ep->pz),
                .max_recv_dtos = (uint32_t)ep->attr.max_recv_dtos,
                .max_request_dtos = (uint32_t)ep->attr.max_request_dtos,
                .max_recv_iov = (uint32_t)ep->attr.max_recv_iov,
                .max_request_iov = (uint32_t)ep->attr.max_request_iov,
                .max_message_size = ep->attr.max_message_size,
                .recv_evd_handle = handle_u64(ep->recv_evd),
                .request_evd_handle = handle_u64(ep->request_evd),
                .connect_evd_handle = handle_u64(ep->connect_evd),
                .srq_handle = handle_u64(ep->srq),
        };
}

DAT_RETURN ep_update_datd(const struct ep *next)
{
        struct datp_obj_desc desc;

        ep_describe(next, &desc);
        return datd_object_update(ep_ia(next), next->datd_id, &desc);
}

DAT_RETURN ep_set_state(struct ep *ep, DAT_EP_STATE state)
{
        struct datp_obj_desc desc;

        dat_object_lock();
        __atomic_store_n(&ep->state, state, __ATOMIC_RELEASE);
        ep_describe(ep, &desc);
        dat_object_unlock();
        return datd_object_update(ep_ia(ep), ep->datd_id, &desc);
}

void ep_mirror_nowait(struct ep *ep)
{
        struct datp_obj_update req = { .hdr = { .type = DATP_OBJ_UPDATE, .length = sizeof(req) } };
        struct ia *ia = ep_ia(ep);

        dat_object_lock();
        ep_describe(ep, &req.desc);
        dat_object_unlock();
        req.ia_id = ia->ia_id;
        req.obj_id = ep->datd_id;
        datd_conn_send(&ia->conn, &req.hdr);
}

static struct ep_streams ep_streams_of(const struct ep *ep)
{
        return (struct ep_streams){ ep->recv_evd, ep->attr.recv_completion_flags, ep->request_evd,
                                    ep->attr.request_completion_flags };
}

/* The objects an EP holds `users` references on, by handle type, and the
 * feeds of its streams into its EVDs. */
static void ep_release_deps(const struct ep *ep)
{
        const struct ep_streams streams = ep_streams_of(ep);

        ep_streams_detach(&streams);
        ep_dep_release(ep->srq, DAT_HANDLE_TYPE_SRQ);
        ep_dep_release(ep->connect_evd, DAT_HANDLE_TYPE_EVD);
        ep_dep_release(ep->request_evd, DAT_HANDLE_TYPE_EVD);
        ep_dep_release(ep->recv_evd, DAT_HANDLE_TYPE_EVD);
        ep_dep_release(ep->pz, DAT_HANDLE_TYPE_PZ);
}

/* Takes them all, or none.  Fails with the DAT_INVALID_HANDLE of the one
 * that went away (or started being freed) since it was checked. */
static DAT_RETURN ep_hold_deps(const struct ep *ep)
{
        struct ep_streams streams;
        const struct {
                DAT_HANDLE handle;
                DAT_HANDLE_TYPE type;
                DAT_RETURN error;
        } deps[] = {
                { ep->pz, DAT_HANDLE_TYPE_PZ, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ) },
                { ep->recv_evd, DAT_HANDLE_TYPE_EVD, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV) },
                { ep->request_evd, DAT_HANDLE_TYPE_EVD, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST) },
                { ep->connect_evd, DAT_HANDLE_TYPE_EVD, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN) },
                { ep->srq, DAT_HANDLE_TYPE_SRQ, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ) },
        };

        for (size_t i = 0; i < ARRAY_SIZE(deps); i++) {
                DAT_RETURN error = deps[i].error;

                if (ep_dep_hold(deps[i].handle, deps[i].type))
                        continue;
                while (i-- > 0)
                        ep_dep_release(deps[i].handle, deps[i].type);
                return error;
        }
        streams = ep_streams_of(ep);
        ep_streams_attach(&streams);
        return DAT_SUCCESS;
}

/* Frees an EP whose datd registration is gone; accepts a half-built one
 * (deps_held false: no references taken yet). */
static void ep_free_object(struct ep *ep, bool deps_held)
{
        if (!ep)
                return;
        if (deps_held)
                ep_release_deps(ep);
        dat_object_fini(&ep->obj);
        free(ep);
}

/* Abrupt dat_ia_close(): datd forgets the IA's objects by itself. */
static void ep_destroy(struct dat_object *obj)
{
        struct ep *ep = dat_container_of(obj, struct ep, obj);

        dto_ep_destroy(ep);
        ep_free_object(ep, true);
}

/* The handles and attributes a create call names, checked in argument
 * order; attr_arg is the position of ep_attributes (6, or 7 with an SRQ). */
struct ep_create_args {
        DAT_IA_HANDLE ia;
        DAT_PZ_HANDLE pz;
        DAT_EVD_HANDLE recv_evd, request_evd, connect_evd;
        DAT_SRQ_HANDLE srq;             /* DAT_HANDLE_NULL: dat_ep_create */
        const DAT_EP_ATTR *attr;
        int attr_arg;
};

static DAT_RETURN check_handles(struct ia *ia, const struct ep_create_args *a)
{
        struct pz *pz = pz_lookup(a->pz);

        if (!pz || pz->obj.parent != &ia->obj)
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        if (!ep_evd_fits(ia, a->recv_evd, DAT_EVD_DTO_FLAG))
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
        if (!ep_evd_fits(ia, a->request_evd, DAT_EVD_DTO_FLAG))
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
        if (!ep_evd_fits(ia, a->connect_evd, DAT_EVD_CONNECTION_FLAG))
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
        if (a->attr_arg == 7) {
                struct srq *srq = srq_lookup(a->srq);

                if (!srq || srq->obj.parent != &ia->obj)
                        return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
                /* dat_ep_create_with_srq(3DAT): "pz_handle specified does not
                 * match the one for SRQ" -> DAT_INVALID_PARAMETER (dat_ia_query:
                 * srq_ep_pz_difference_supported is false). */
                if (srq->pz != a->pz)
                        return DAT_ERR_ARG(2);
        }
        return DAT_SUCCESS;
}

/* The EP's attributes: the consumer's, checked, or the defaults. */
static DAT_RETURN settle_attributes(struct ia *ia, const struct ep_create_args *a, struct ep *ep)
{
        DAT_IA_ATTR limits;
        DAT_EP_PARAM_MASK bad = 0;
        struct ep_streams streams;
        DAT_RETURN ret;

        ep_ia_limits(ia, &limits);
        if (!a->attr) {
                /* dat_ep_create_with_srq(3DAT): ep_attributes "Cannot be NULL". */
                if (a->srq)
                        return DAT_ERR_ARG(a->attr_arg);
                ep_attr_defaults(&limits, &ep->attr);
        } else {
                ret = ep_attr_check(&limits, a->attr, DAT_EP_FIELD_EP_ATTR_ALL, a->srq != NULL, &bad);
                if (ret == DAT_MODEL_NOT_SUPPORTED)
                        return DAT_ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE);
                if (ret != DAT_SUCCESS)
                        return DAT_ERR_ARG(a->attr_arg);
                ep->attr = *a->attr;
                /* No named attribute is supported (ep_attr_check): keep no pointer. */
                ep->attr.ep_transport_specific = NULL;
                ep->attr.ep_provider_specific = NULL;
        }
        ep->recv_evd = a->recv_evd;
        ep->request_evd = a->request_evd;
        streams = ep_streams_of(ep);
        if (!ep_streams_compatible(NULL, &streams))
                return DAT_ERR_ARG(a->attr_arg);
        if (a->srq) {
                struct srq *srq = srq_lookup(a->srq);

                if (!srq)
                        return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
                /* Its Recv buffers are the SRQ's: max_recv_iov is the SRQ's. */
                ep->attr.max_recv_iov = srq->max_recv_iov;
        }
        return DAT_SUCCESS;
}

/* Takes one of the instance's max_eps, unless they are all taken. */
static bool ia_reserve_ep(struct ia *ia)
{
        uint32_t n = __atomic_load_n(&ia->eps_registered, __ATOMIC_RELAXED);

        do {
                if (n >= ia->info.max_eps)
                        return false;
        } while (!__atomic_compare_exchange_n(&ia->eps_registered, &n, n + 1, true,
                                              __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
        return true;
}

static void ia_release_ep(struct ia *ia)
{
        __atomic_fetch_sub(&ia->eps_registered, 1, __ATOMIC_ACQ_REL);
}

/* Below max_eps the EP is registered without waiting: datd's only refusal
 * for an EP is that quota, datd counts this instance's EPs as we do, and it
 * takes this connection's requests in the order they were sent (an EP's
 * OBJ_DESTROY is sent before its count is given back).  It is named by its
 * handle from then on.  At the quota datd is asked, so that its refusal is
 * the answer (and is logged where the administrator looks).  A failure
 * datd meets later anyway (memory) shows as DAT_INVALID_HANDLE when a
 * request names the EP. */
static DAT_RETURN ep_register(struct ia *ia, struct ep *ep)
{
        struct datp_obj_desc desc;
        DAT_RETURN ret;

        ep_describe(ep, &desc);
        if (ia_reserve_ep(ia)) {
                ep->datd_id = 0;
                ret = datd_object_register_ep_nowait(ia, &desc);
                if (ret != DAT_SUCCESS)
                        ia_release_ep(ia);
                return ret;
        }
        ret = datd_object_register(ia, &desc, &ep->datd_id);
        if (ret == DAT_SUCCESS)
                __atomic_fetch_add(&ia->eps_registered, 1, __ATOMIC_ACQ_REL);
        return ret;
}

static void ep_unregister(struct ep *ep)
{
        struct ia *ia = ep_ia(ep);

        if (ep->datd_id)
                datd_object_unregister(ia, ep->datd_id);
        else
                datd_object_unregister_ep(ia, handle_u64(ep->obj.handle));
        ia_release_ep(ia);
}

static DAT_RETURN ep_create(const struct ep_create_args *a, DAT_EP_HANDLE *ep_handle)
{
        struct ia *ia = ia_lookup(a->ia);
        struct ep *ep;
        DAT_RETURN ret;

        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        ret = check_handles(ia, a);
        if (ret != DAT_SUCCESS)
                return ret;
        if (!ep_handle)
                return DAT_ERR_ARG(a->attr_arg + 1);
        ep = calloc(1, sizeof(*ep));
        if (!ep)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        ret = settle_attributes(ia, a, ep);
        if (ret != DAT_SUCCESS)
                goto err_free;

        /* dat_ep_create(3DAT): "The Endpoint is created in the Unconnected state." */
        ep->state = DAT_EP_STATE_UNCONNECTED;
        ep->pz = a->pz;
        ep->connect_evd = a->connect_evd;
        ep->srq = a->srq;
        ep->hard_high_watermark = DAT_WATERMARK_INFINITE;
        ep->soft_hw_armed = ep->attr.srq_soft_hw != DAT_WATERMARK_INFINITE;

        ret = ep_hold_deps(ep);
        if (ret != DAT_SUCCESS)
                goto err_free;
        ret = dat_object_init(&ep->obj, &ep_ops, &ia->obj);
        if (ret != DAT_SUCCESS)
                goto err_release;
        ret = ep_register(ia, ep);
        if (ret != DAT_SUCCESS)
                goto err_release;
        *ep_handle = ep->obj.handle;
        return DAT_SUCCESS;

err_release:
        ep_free_object(ep, true);
        return ret;
err_free:
        ep_free_object(ep, false);
        return ret;
}

/* dat_ep_create(3DAT) */
_public_ DAT_RETURN dat_ep_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle,
                                  DAT_EVD_HANDLE recv_evd_handle, DAT_EVD_HANDLE request_evd_handle,
                                  DAT_EVD_HANDLE connect_evd_handle,
                                  const DAT_EP_ATTR *ep_attributes, DAT_EP_HANDLE *ep_handle)
{
        FOREIGN_DISPATCH_IA_GUARDED(ia_handle,
                                    (4, pz_handle, DAT_INVALID_HANDLE_PZ,
                                     recv_evd_handle, DAT_INVALID_HANDLE_EVD_RECV,
                                     request_evd_handle, DAT_INVALID_HANDLE_EVD_REQUEST,
                                     connect_evd_handle, DAT_INVALID_HANDLE_EVD_CONN),
                                    ep_create_func, pz_handle, recv_evd_handle, request_evd_handle,
                                    connect_evd_handle, ep_attributes, ep_handle);
        const struct ep_create_args a = {
                ia_handle, pz_handle, recv_evd_handle, request_evd_handle, connect_evd_handle,
                DAT_HANDLE_NULL, ep_attributes, 6,
        };

        return ep_create(&a, ep_handle);
}

/* dat_ep_create_with_srq(3DAT) */
_public_ DAT_RETURN dat_ep_create_with_srq(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle,
                                           DAT_EVD_HANDLE recv_evd_handle,
                                           DAT_EVD_HANDLE request_evd_handle,
                                           DAT_EVD_HANDLE connect_evd_handle,
                                           DAT_SRQ_HANDLE srq_handle,
                                           const DAT_EP_ATTR *ep_attributes,
                                           DAT_EP_HANDLE *ep_handle)
{
        FOREIGN_DISPATCH_IA_GUARDED(ia_handle,
                                    (5, pz_handle, DAT_INVALID_HANDLE_PZ,
                                     recv_evd_handle, DAT_INVALID_HANDLE_EVD_RECV,
                                     request_evd_handle, DAT_INVALID_HANDLE_EVD_REQUEST,
                                     connect_evd_handle, DAT_INVALID_HANDLE_EVD_CONN,
                                     srq_handle, DAT_INVALID_HANDLE_SRQ),
                                    ep_create_with_srq_func, pz_handle, recv_evd_handle,
                                    request_evd_handle, connect_evd_handle, srq_handle,
                                    ep_attributes, ep_handle);
        const struct ep_create_args a = {
                ia_handle, pz_handle, recv_evd_handle, request_evd_handle, connect_evd_handle,
                srq_handle, ep_attributes, 7,
        };

        return ep_create(&a, ep_handle);
}

/* Provider EPs being made (ep.h, ep_provider_begin). */
static pthread_mutex_t provider_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t provider_cond = PTHREAD_COND_INITIALIZER;
static unsigned provider_in_flight;

void ep_provider_begin(void)
{
        pthread_mutex_lock(&provider_lock);
        provider_in_flight++;
        pthread_mutex_unlock(&provider_lock);
}

void ep_provider_end(void)
{
        pthread_mutex_lock(&provider_lock);
        if (--provider_in_flight == 0)
                pthread_cond_broadcast(&provider_cond);
        pthread_mutex_unlock(&provider_lock);
}

/* No cancellation point: a thread cancelled in the condition wait (in
 * dat_psp_free, dat_rsp_free or an abrupt dat_ia_close) took provider_lock
 * back and died holding it, and every later begin, end and drain waited
 * for good.  A thread cancelled meanwhile is cancelled at its next
 * cancellation point after the drain, as a round trip's caller is
 * (datd_conn_call). */
void ep_provider_drain(void)
{
        int cancel;

        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
        pthread_mutex_lock(&provider_lock);
        while (provider_in_flight > 0)
                pthread_cond_wait(&provider_cond, &provider_lock);
        pthread_mutex_unlock(&provider_lock);
        pthread_setcancelstate(cancel, NULL);
}

/* Links an EP made without a parent into ia's children, unless the IA is
 * closing (then its teardown must not find an object it did not expect). */
static bool ep_adopt(struct ia *ia, struct ep *ep)
{
        struct dat_list *head = &ia->obj.children;
        bool ok;

        dat_object_lock();
        ok = !ia->obj.closing;
        if (ok) {
                ep->obj.parent = &ia->obj;
                ep->obj.sibling.prev = head->prev;
                ep->obj.sibling.next = head;
                head->prev->next = &ep->obj.sibling;
                head->prev = &ep->obj.sibling;
                ia->obj.n_children++;
        }
        dat_object_unlock();
        return ok;
}

/* Like dat_ep_create, but the object has no parent while datd is asked
 * (datd is told its handle; a refusal, the max_eps quota, leaves nothing
 * behind), so that an abrupt dat_ia_close meanwhile never sees it; it
 * joins the IA once registered. */
DAT_RETURN ep_create_provider(struct ia *ia, DAT_EP_HANDLE *ep_handle)
{
        DAT_IA_ATTR limits;
        struct ep *ep = calloc(1, sizeof(*ep));
        DAT_RETURN ret;

        if (!ep)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        ep_ia_limits(ia, &limits);
        ep_attr_defaults(&limits, &ep->attr);
        ep->state = DAT_EP_STATE_UNCONFIGURED_TENTATIVE;
        ep->provider_made = true;
        ep->hard_high_watermark = DAT_WATERMARK_INFINITE;
        ep->soft_hw_armed = ep->attr.srq_soft_hw != DAT_WATERMARK_INFINITE;
        ret = dat_object_init(&ep->obj, &ep_ops, NULL);
        if (ret != DAT_SUCCESS) {
                free(ep);
                return ret;
        }
        ret = ep_register(ia, ep);
        if (ret == DAT_SUCCESS && !ep_adopt(ia, ep))
                ret = dat_invalid_handle(DAT_HANDLE_TYPE_IA); /* datd forgets it with the IA */
        if (ret != DAT_SUCCESS) {
                ep_free_object(ep, false);
                return ret;
        }
        *ep_handle = ep->obj.handle;
        return DAT_SUCCESS;
}

void ep_free_provider(DAT_EP_HANDLE ep_handle)
{
        struct ep *ep = ep_lookup(ep_handle);

        if (!ep)
                return;
        dat_object_lock();
        ep->obj.closing = true;
        dat_object_unlock();
        ep_unregister(ep);
        ep_free_object(ep, true);
}

DAT_RETURN ep_param_call(DAT_EP_HANDLE handle, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *param,
                         struct ep **out)
{
        *out = NULL;
        if (!ep_lookup(handle))
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        if (mask & ~DAT_EP_FIELD_ALL)
                return DAT_ERR_ARG(2);
        if (!mask)
                return DAT_SUCCESS;
        if (!param)
                return DAT_ERR_ARG(3);
        *out = ep_lookup(handle);
        return DAT_SUCCESS;
}

bool ep_provider_configured(const struct ep *ep)
{
        return ep->pz != DAT_HANDLE_NULL && ep->connect_evd != DAT_HANDLE_NULL;
}

void ep_fill_param(const struct ep *ep, DAT_EP_PARAM *param)
{
        struct ia *ia = ep_ia(ep);

        *param = (DAT_EP_PARAM){
                .ia_handle = ia->obj.handle,
                .ep_state = ep->state,
                /* The connection is a reliable byte stream over the IA's address family. */
                .comm = { .domain = ia->address.ss_family, .type = SOCK_STREAM, .protocol = 0 },
                .local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ia->address,
                .local_port_qual = ep->local_port,
                .remote_ia_address_ptr = ep->has_remote ? (DAT_IA_ADDRESS_PTR)&ep->remote_address : NULL,
                .remote_port_qual = ep->remote_port,
                .pz_handle = ep->pz,
                .recv_evd_handle = ep->recv_evd,
                .request_evd_handle = ep->request_evd,
                .connect_evd_handle = ep->connect_evd,
                .srq_handle = ep->srq,
                .ep_attr = ep->attr,
        };
}

/* dat_ep_query(3DAT): everything is filled whatever the mask ("The Provider
 * can return values for any other parameters").  The local address is the
 * IA's (valid until dat_ia_close); the ports are 0 and the remote address
 * NULL until the connection code sets them. */
_public_ DAT_RETURN dat_ep_query(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK ep_param_mask,
                                 DAT_EP_PARAM *ep_param)
{
        FOREIGN_DISPATCH(ep_handle, ep_query_func, ep_handle, ep_param_mask, ep_param);
        struct ep *ep;
        DAT_RETURN ret = ep_param_call(ep_handle, ep_param_mask, ep_param, &ep);

        if (ret != DAT_SUCCESS || !ep)
                return ret;
        dat_object_lock();
        ep_fill_param(ep, ep_param);
        dat_object_unlock();
        return DAT_SUCCESS;
}

/* dat_ep_get_status(3DAT): a snapshot, "no heroic synchronization". */
_public_ DAT_RETURN dat_ep_get_status(DAT_EP_HANDLE ep_handle, DAT_EP_STATE *ep_state,
                                      DAT_BOOLEAN *recv_idle, DAT_BOOLEAN *request_idle)
{
        FOREIGN_DISPATCH(ep_handle, ep_get_status_func, ep_handle, ep_state, recv_idle,
                         request_idle);
        struct ep *ep = ep_lookup(ep_handle);

        if (!ep)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        /* Requests the peer acknowledged are not outstanding. */
        dto_ep_take_acks(ep);
        dat_object_lock();
        if (ep_state)
                *ep_state = ep->state;
        if (recv_idle)
                *recv_idle = ep->recv_outstanding == 0 ? DAT_TRUE : DAT_FALSE;
        if (request_idle)
                *request_idle = ep->request_outstanding == 0 ? DAT_TRUE : DAT_FALSE;
        dat_object_unlock();
        return DAT_SUCCESS;
}

/* dat_ep_recv_query(3DAT): supported for every EP (dat_ia_query:
 * ep_recv_info_supported).  A buffer is allocated to the EP when posted
 * to it, or when the EP takes it from its SRQ; messages arrive in order
 * on one connection, so the span is the number allocated ("never ... n
 * buffers in a span that is less than n"). */
_public_ DAT_RETURN dat_ep_recv_query(DAT_EP_HANDLE ep_handle, DAT_COUNT *nbufs_allocated,
                                      DAT_COUNT *bufs_alloc_span)
{
        FOREIGN_DISPATCH(ep_handle, ep_recv_query_func, ep_handle, nbufs_allocated, bufs_alloc_span);
        struct ep *ep = ep_lookup(ep_handle);
        DAT_COUNT n;

        if (!ep)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        dat_object_lock();
        n = ep->recv_outstanding;
        dat_object_unlock();
        if (nbufs_allocated)
                *nbufs_allocated = n;
        if (bufs_alloc_span)
                *bufs_alloc_span = n;
        return DAT_SUCCESS;
}

static bool watermark_valid(DAT_COUNT w)
{
        return w == DAT_WATERMARK_INFINITE || w >= 0;
}

/* Under dat_object_lock: the soft watermark fires (once per setting);
 * *hard says the hard one is armed and exceeded, for the caller to break
 * the connection and then disarm it (hard_fired) if *setting is still
 * the one in force. */
static void fire_watermarks(struct ep *ep, bool *soft, bool *hard, unsigned *setting)
{
        DAT_COUNT n = ep->recv_outstanding;

        *setting = ep->hw_setting;

        *soft = ep->soft_hw_armed && ep->attr.srq_soft_hw != DAT_WATERMARK_INFINITE &&
                n > ep->attr.srq_soft_hw;
        *hard = ep->hard_hw_armed && ep->hard_high_watermark != DAT_WATERMARK_INFINITE &&
                n > ep->hard_high_watermark;
        if (*soft) {
                ep->soft_hw_armed = false;
                ep->soft_hw_events++;
        }
}

/* The hard watermark of setting broke the connection: it fired, once per
 * setting.  Another thread's dat_ep_set_watermark since fire_watermarks
 * looked armed a new setting, which this break did not spend: it stays
 * armed (the event still counts: the connection broke). */
static void hard_fired(struct ep *ep, unsigned setting)
{
        dat_object_lock();
        if (ep->hw_setting == setting)
                ep->hard_hw_armed = false;
        ep->hard_hw_events++;
        dat_object_unlock();
}

void (*ep_test_hard_break_hook)(struct ep *ep);

/* dat_ep_set_watermark(3DAT): "An asynchronous event will be generated for
 * IA async_evd when the number of Recv buffers at EP exceeds the soft high
 * watermark for the first time.  A connection broken event will be
 * generated for EP connect_evd when the number of Recv buffers at EP
 * exceeds the hard high watermark."  What that means without a
 * connection: the header's list. */
void ep_check_watermarks(struct ep *ep)
{
        DAT_COUNT n = __atomic_load_n(&ep->recv_outstanding, __ATOMIC_RELAXED);
        unsigned setting;
        bool soft, hard;

        dat_object_lock();
        fire_watermarks(ep, &soft, &hard, &setting);
        dat_object_unlock();
        if (soft) {
                dat_trace("EP %p: %d Recv buffers exceed the soft high watermark %d", ep->obj.handle,
                          n, ep->attr.srq_soft_hw);
                ep_post_async_event(ep_ia(ep), ep->obj.handle, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT);
        }
        /* Only the thread whose break ended the data path counts it. */
        if (hard && dto_ep_break(ep, "Recv buffers exceed the hard high watermark")) {
                if (ep_test_hard_break_hook)
                        ep_test_hard_break_hook(ep);
                hard_fired(ep, setting);
        }
}

void ep_watermark_events(const struct ep *ep, unsigned *soft, unsigned *hard)
{
        dat_object_lock();
        *soft = ep->soft_hw_events;
        *hard = ep->hard_hw_events;
        dat_object_unlock();
}

/* dat_ep_set_watermark(3DAT): "The operation is supported for all states of
 * Endpoint"; it arms both watermarks again, and an event fires at once when
 * the EP already holds more buffers than a new value. */
_public_ DAT_RETURN dat_ep_set_watermark(DAT_EP_HANDLE ep_handle, DAT_COUNT soft_high_watermark,
                                         DAT_COUNT hard_high_watermark)
{
        FOREIGN_DISPATCH(ep_handle, ep_set_watermark_func, ep_handle, soft_high_watermark,
                         hard_high_watermark);
        struct ep *ep = ep_lookup(ep_handle);

        if (!ep)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        if (!watermark_valid(soft_high_watermark))
                return DAT_ERR_ARG(2);
        if (!watermark_valid(hard_high_watermark))
                return DAT_ERR_ARG(3);
        dat_object_lock();
        ep->attr.srq_soft_hw = soft_high_watermark;
        ep->hard_high_watermark = hard_high_watermark;
        ep->soft_hw_armed = soft_high_watermark != DAT_WATERMARK_INFINITE;
        ep->hard_hw_armed = hard_high_watermark != DAT_WATERMARK_INFINITE;
        ep->hw_setting++;
        dat_object_unlock();
        ep_check_watermarks(ep);
        return DAT_SUCCESS;
}

static bool is_unconnected(DAT_EP_STATE s)
{
        return s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED;
}

/* dat_ep_reset(3DAT): Disconnected -> Unconnected, losing the completions
 * not dequeued yet (the DTOs were flushed when the EP disconnected); a
 * no-op in the Unconnected state ("the preposted Recvs are not affected");
 * DAT_INVALID_STATE in every other state.  The SRQ stays
 * (dat_ep_create_with_srq(3DAT)).  datd's copy of the state is for
 * datctl only: it is told without waiting, like every state change that
 * a connection event makes (ep_mirror_nowait), and before any request
 * this EP makes next. */
_public_ DAT_RETURN dat_ep_reset(DAT_EP_HANDLE ep_handle)
{
        FOREIGN_DISPATCH(ep_handle, ep_reset_func, ep_handle);
        struct ep *ep = ep_lookup(ep_handle);
        DAT_EP_STATE state;

        if (!ep)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        state = __atomic_load_n(&ep->state, __ATOMIC_ACQUIRE);
        if (is_unconnected(state))
                return DAT_SUCCESS;
        if (state != DAT_EP_STATE_DISCONNECTED)
                return ep_invalid_state(state);
        dto_ep_reset(ep);
        dat_object_lock();
        __atomic_store_n(&ep->state, DAT_EP_STATE_UNCONNECTED, __ATOMIC_RELEASE);
        ep->recv_outstanding = 0;
        ep->request_outstanding = 0;
        ep->local_port = 0;
        ep->remote_port = 0;
        ep->has_remote = false;
        memset(&ep->remote_address, 0, sizeof(ep->remote_address));
        ep->ended_conn_id = ep->conn_id;
        ep->conn_id = 0;
        ep->remote_conn_qual = 0;
        ep->active = false;
        ep->event_pd_len = 0;
        dat_object_unlock();
        ep_mirror_nowait(ep);
        return DAT_SUCCESS;
}

/* dat_ep_free(3DAT): "The Endpoint can be destroyed in any Endpoint state
 * except Reserved, Passive Connection Pending, and Tentative Connection
 * Pending" (and their DAT 2.0 unconfigured twins).  A connected EP is
 * disconnected abruptly and its DTOs destroyed. */
static bool ep_free_forbidden(DAT_EP_STATE s)
{
        switch (s) {
        case DAT_EP_STATE_RESERVED:
        case DAT_EP_STATE_UNCONFIGURED_RESERVED:
        case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING:
        case DAT_EP_STATE_UNCONFIGURED_PASSIVE:
        case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING:
        case DAT_EP_STATE_UNCONFIGURED_TENTATIVE:
                return true;
        default:
                return false;
        }
}

void ep_pin_locked(struct ep *ep)
{
        ep->pins++;
        ep->pin_thread = pthread_self();
}

void ep_unpin(struct ep *ep)
{
        __atomic_sub_fetch(&ep->pins, 1, __ATOMIC_RELEASE);
}

_public_ DAT_RETURN dat_ep_free(DAT_EP_HANDLE ep_handle)
{
        FOREIGN_DISPATCH(ep_handle, ep_free_func, ep_handle);
        struct ep *ep = ep_lookup(ep_handle);
        DAT_EP_STATE state;
        struct srq *srq;

        if (!ep)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        dat_object_lock();
        state = ep->state;
        if (ep->obj.closing) {
                dat_object_unlock();
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        }
        /* Another object (an RSP, a CR) still holds the EP: its state says
         * which.  Or we are inside a callback of a thread that pinned it. */
        if (ep_free_forbidden(state) || ep->obj.users > 0 ||
            (ep->pins > 0 && pthread_equal(ep->pin_thread, pthread_self()))) {
                dat_object_unlock();
                return ep_invalid_state(state);
        }
        ep->obj.closing = true;
        dat_object_unlock();
        /* The progress thread may be dispatching an event of this EP (a
         * disconnection that stops its data path): nothing is torn down
         * under it. */
        while (__atomic_load_n(&ep->pins, __ATOMIC_ACQUIRE) > 0)
                dat_nap();

        /* dat_ep_free(3DAT): "The destruction of the Endpoint during
         * connection setup aborts connection establishment"; a connected
         * EP is disconnected abruptly. */
        dto_ep_quiesce(ep);
        conn_ep_abort(ep);
        dto_ep_destroy(ep);
        srq = srq_lookup(ep->srq);
        if (srq && ep->recv_outstanding > 0)
                srq_buffers_dropped(srq, ep->recv_outstanding);
        ep_unregister(ep);
        ep_free_object(ep, true);
        return DAT_SUCCESS;
}

DAT_RETURN ep_test_force_state(DAT_EP_HANDLE handle, DAT_EP_STATE state)
{
        struct ep *ep = ep_lookup(handle);

        if (!ep)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        if ((unsigned)state > DAT_EP_STATE_CONNECTED_MULTI_PATH)
                return DAT_ERR_ARG(2);
        return ep_set_state(ep, state);
}

DAT_RETURN ep_test_set_outstanding(DAT_EP_HANDLE handle, DAT_COUNT recv, DAT_COUNT request)
{
        struct ep *ep = ep_lookup(handle);

        if (!ep)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        if (recv < 0)
                return DAT_ERR_ARG(2);
        if (request < 0)
                return DAT_ERR_ARG(3);
        dat_object_lock();
        ep->recv_outstanding = recv;
        ep->request_outstanding = request;
        dat_object_unlock();
        ep_check_watermarks(ep);
        return DAT_SUCCESS;
}

