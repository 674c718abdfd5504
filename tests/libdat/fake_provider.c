/* A DAT provider library of the test suite's own, for libdat's dynamic
 * registry (libdat/provider_registry.h, libdat/foreign.h): what Debian's
 * libdaplofa.so.2 is to Debian's libdat2, with objects that only say which
 * calls reached them.  dat_provider_init registers the IA name it is given
 * unless the instance data says "no-register": with its table that leaves
 * some functions out (NULL), or, for the instance data "all-slots"
 * (FAKE_PROVIDER_ALL_SLOTS), the one with every function libdat hands a
 * call to.  Every call that reaches the provider writes the slot's name,
 * the handle it got and its other arguments into fake_provider_log (read
 * by the test through dlsym).  Built with hidden visibility like the rest,
 * it exports what a provider library must (_public_) and its log. */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/udat.h>

#include "common/macro.h"
#include "tests/libdat/fake_provider.h"

_public_ struct fake_provider_log fake_provider_log;

static DAT_PROVIDER provider, provider2, provider_all;

/* Every object: the redirection convention's provider pointer first. */
struct fake_object {
        const DAT_PROVIDER *provider;
        uint32_t magic;
        DAT_HANDLE_TYPE type;
        struct fake_object *ia;
        struct fake_object *async_evd;  /* an IA's, made by its open */
        int children;                   /* an IA's objects but that EVD */
        DAT_CONTEXT context;
};

#define FAKE_MAGIC 0xfa4e0b1eu

#define P(x) ((uint64_t)(uintptr_t)(x))   /* a pointer argument */
#define V(x) ((uint64_t)(x))              /* an integer argument */

/* A call that reached the provider: its slot's name, the handle it got and
 * its other arguments (n of them). */
static void record(const char *call, DAT_HANDLE handle, const uint64_t *args, int n)
{
        snprintf(fake_provider_log.last_call, sizeof(fake_provider_log.last_call), "%s", call);
        fake_provider_log.last_handle = handle;
        memset(fake_provider_log.args, 0, sizeof(fake_provider_log.args));
        for (int i = 0; i < n && i < FAKE_LOG_ARGS; i++)
                fake_provider_log.args[i] = args[i];
        fake_provider_log.nargs = n;
        fake_provider_log.calls++;
}

#define ARGS_(...) ((const uint64_t[]){ __VA_ARGS__ })
#define NOTE(call, h, ...) \
        record(call, h, ARGS_(__VA_ARGS__), (int)(sizeof(ARGS_(__VA_ARGS__)) / sizeof(uint64_t)))

/* An IA (ia NULL) of table p, or an object of IA ia (p NULL). */
static struct fake_object *new_object(DAT_HANDLE_TYPE type, struct fake_object *ia,
                                      const DAT_PROVIDER *p)
{
        struct fake_object *o = calloc(1, sizeof(*o));

        if (o) {
                o->provider = ia ? ia->provider : p;
                o->magic = FAKE_MAGIC;
                o->type = type;
                o->ia = ia ? ia : o;
                if (ia)
                        ia->children++;
                fake_provider_log.live_objects++;
        }
        return o;
}

/* The object h is, if it is one of ours of that type (0: any). */
static struct fake_object *object_of(DAT_HANDLE h, int type)
{
        struct fake_object *o = h;

        if (!o || o->magic != FAKE_MAGIC || (type && (int)o->type != type))
                return NULL;
        return o;
}

/* The object leaves its IA (no call of its own). */
static void release_object(struct fake_object *o)
{
        if (o->ia != o)
                o->ia->children--;  /* ia_close frees the IA's async EVD first */
        o->magic = 0;
        free(o);
        fake_provider_log.live_objects--;
}

/* The end of a free_func call the caller recorded. */
static DAT_RETURN free_object(DAT_HANDLE h, DAT_HANDLE_TYPE type)
{
        struct fake_object *o = object_of(h, (int)type);

        if (!o)
                return DAT_INVALID_HANDLE;
        if (o->ia->async_evd == o)
                o->ia->async_evd = NULL;
        release_object(o);
        return DAT_SUCCESS;
}

/* A new object of the IA of parent (which must be of parent_type; 0: any
 * of the provider's), in *out. */
static DAT_RETURN make(DAT_HANDLE parent, int parent_type, DAT_HANDLE_TYPE type, DAT_HANDLE *out)
{
        struct fake_object *p = object_of(parent, parent_type), *o;

        if (!p)
                return DAT_INVALID_HANDLE;
        if (!out)
                return DAT_INVALID_PARAMETER;
        o = new_object(type, p->ia, NULL);
        if (!o)
                return DAT_INSUFFICIENT_RESOURCES;
        *out = o;
        return DAT_SUCCESS;
}

/* DAT_SUCCESS if h is the provider's object of that type. */
static DAT_RETURN check(DAT_HANDLE h, DAT_HANDLE_TYPE type)
{
        return object_of(h, (int)type) ? DAT_SUCCESS : DAT_INVALID_HANDLE;
}

/* ---- IA and the generic calls --------------------------------------------- */

static DAT_RETURN open_ia(const DAT_PROVIDER *p, const DAT_NAME_PTR name, DAT_COUNT qlen,
                          DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle)
{
        struct fake_object *ia;

        NOTE("ia_open", DAT_HANDLE_NULL, P(name), V(qlen), P(async_evd), P(ia_handle));
        snprintf(fake_provider_log.opened_name, sizeof(fake_provider_log.opened_name), "%s", name);
        fake_provider_log.async_qlen = qlen;
        fake_provider_log.opens++;
        /* As DAPL's ia_open answers when its device is not there. */
        if (strcmp(fake_provider_log.instance_data, FAKE_PROVIDER_NO_DEVICE) == 0)
                return DAT_CLASS_ERROR | DAT_PROVIDER_NOT_FOUND | DAT_NAME_NOT_REGISTERED;
        ia = new_object(DAT_HANDLE_TYPE_IA, NULL, p);
        if (!ia)
                return DAT_INSUFFICIENT_RESOURCES;
        if (*async_evd == DAT_HANDLE_NULL)
                *async_evd = ia->async_evd = new_object(DAT_HANDLE_TYPE_EVD, ia, NULL);
        *ia_handle = ia;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_ia_open(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *async_evd,
                               DAT_IA_HANDLE *ia_handle)
{
        return open_ia(&provider, name, qlen, async_evd, ia_handle);
}

static DAT_RETURN fake_ia_open2(const DAT_NAME_PTR name, DAT_COUNT qlen,
                                DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle)
{
        return open_ia(&provider2, name, qlen, async_evd, ia_handle);
}

static DAT_RETURN fake_ia_open_all(const DAT_NAME_PTR name, DAT_COUNT qlen,
                                   DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle)
{
        return open_ia(&provider_all, name, qlen, async_evd, ia_handle);
}

/* fake_provider_hold_close: an ia_close waits for the test's release. */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static bool holding;

_public_ void fake_provider_hold_close(bool on)
{
        pthread_mutex_lock(&hold_lock);
        holding = on;
        pthread_cond_broadcast(&hold_cond);
        pthread_mutex_unlock(&hold_lock);
}

static void wait_while_held(void)
{
        pthread_mutex_lock(&hold_lock);
        if (holding)
                __atomic_store_n(&fake_provider_log.closes_held, 1, __ATOMIC_RELEASE);
        while (holding)
                pthread_cond_wait(&hold_cond, &hold_lock);
        pthread_mutex_unlock(&hold_lock);
}

static DAT_RETURN fake_ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags)
{
        struct fake_object *o = object_of(ia, DAT_HANDLE_TYPE_IA);

        NOTE("ia_close", ia, V(flags));
        __atomic_add_fetch(&fake_provider_log.closes, 1, __ATOMIC_RELAXED);
        wait_while_held();
        fake_provider_log.close_flags = flags;
        if (!o)
                return DAT_INVALID_HANDLE;
        /* dat_ia_close(3DAT): a graceful close with objects left (its
         * async EVD aside) fails. */
        if (o->children > (o->async_evd ? 1 : 0) && flags == DAT_CLOSE_GRACEFUL_FLAG)
                return DAT_INVALID_STATE;
        if (o->async_evd)
                release_object(o->async_evd);
        return free_object(ia, DAT_HANDLE_TYPE_IA);
}

static DAT_RETURN fake_ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *async_evd, DAT_IA_ATTR_MASK mask,
                                DAT_IA_ATTR *attr, DAT_PROVIDER_ATTR_MASK pmask,
                                DAT_PROVIDER_ATTR *pattr)
{
        NOTE("ia_query", ia, P(async_evd), V(mask), P(attr), V(pmask), P(pattr));
        if (!object_of(ia, DAT_HANDLE_TYPE_IA))
                return DAT_INVALID_HANDLE;
        if (attr)
                snprintf(attr->adapter_name, sizeof(attr->adapter_name), "fake adapter");
        return DAT_SUCCESS;
}

static DAT_RETURN fake_get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE *type)
{
        struct fake_object *o = object_of(h, 0);

        NOTE("get_handle_type", h, P(type));
        if (!o)
                return DAT_INVALID_HANDLE;
        *type = o->type;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_set_context(DAT_HANDLE h, DAT_CONTEXT context)
{
        struct fake_object *o = object_of(h, 0);

        NOTE("set_consumer_context", h, V(context.as_64));
        if (!o)
                return DAT_INVALID_HANDLE;
        o->context = context;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_get_context(DAT_HANDLE h, DAT_CONTEXT *context)
{
        struct fake_object *o = object_of(h, 0);

        NOTE("get_consumer_context", h, P(context));
        if (!o)
                return DAT_INVALID_HANDLE;
        *context = o->context;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_extendedop(DAT_HANDLE h, DAT_EXTENDED_OP op, va_list args)
{
        int arg = va_arg(args, int);

        NOTE("handle_extendedop", h, V(op), V(arg));
        fake_provider_log.ext_op = (int)op;
        fake_provider_log.ext_arg = arg;
        return DAT_SUCCESS;
}

/* ---- CNO -------------------------------------------------------------------- */

static DAT_RETURN fake_cno_create(DAT_IA_HANDLE ia, DAT_OS_WAIT_PROXY_AGENT agent,
                                  DAT_CNO_HANDLE *cno)
{
        NOTE("cno_create", ia, P(agent.instance_data), P(agent.proxy_agent_func), P(cno));
        return make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_CNO, cno);
}

static DAT_RETURN fake_cno_modify_agent(DAT_CNO_HANDLE cno, DAT_OS_WAIT_PROXY_AGENT agent)
{
        NOTE("cno_modify_agent", cno, P(agent.instance_data), P(agent.proxy_agent_func));
        return check(cno, DAT_HANDLE_TYPE_CNO);
}

static DAT_RETURN fake_cno_query(DAT_CNO_HANDLE cno, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM *param)
{
        NOTE("cno_query", cno, V(mask), P(param));
        return check(cno, DAT_HANDLE_TYPE_CNO);
}

static DAT_RETURN fake_cno_free(DAT_CNO_HANDLE cno)
{
        NOTE("cno_free", cno);
        return free_object(cno, DAT_HANDLE_TYPE_CNO);
}

/* Never an event: a wait times out at once. */
static DAT_RETURN fake_cno_wait(DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd)
{
        NOTE("cno_wait", cno, V(timeout), P(evd));
        if (!object_of(cno, DAT_HANDLE_TYPE_CNO))
                return DAT_INVALID_HANDLE;
        if (evd)
                *evd = DAT_HANDLE_NULL;
        return DAT_TIMEOUT_EXPIRED;
}

/* ---- CR ----------------------------------------------------------------------- */

static DAT_RETURN fake_cr_query(DAT_CR_HANDLE cr, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM *param)
{
        NOTE("cr_query", cr, V(mask), P(param));
        return check(cr, DAT_HANDLE_TYPE_CR);
}

static DAT_RETURN fake_cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT pd_size,
                                 const DAT_PVOID pd)
{
        NOTE("cr_accept", cr, P(ep), V(pd_size), P(pd));
        return check(cr, DAT_HANDLE_TYPE_CR);
}

static DAT_RETURN fake_cr_reject(DAT_CR_HANDLE cr, DAT_COUNT pd_size, const DAT_PVOID pd)
{
        NOTE("cr_reject", cr, V(pd_size), P(pd));
        return check(cr, DAT_HANDLE_TYPE_CR);
}

static DAT_RETURN fake_cr_handoff(DAT_CR_HANDLE cr, DAT_CONN_QUAL handoff)
{
        NOTE("cr_handoff", cr, V(handoff));
        return check(cr, DAT_HANDLE_TYPE_CR);
}

/* ---- EVD ------------------------------------------------------------------------- */

static DAT_RETURN fake_evd_create(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_CNO_HANDLE cno,
                                  DAT_EVD_FLAGS flags, DAT_EVD_HANDLE *evd)
{
        NOTE("evd_create", ia, V(qlen), P(cno), V(flags), P(evd));
        return make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_EVD, evd);
}

static DAT_RETURN fake_evd_query(DAT_EVD_HANDLE evd, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *param)
{
        NOTE("evd_query", evd, V(mask), P(param));
        return check(evd, DAT_HANDLE_TYPE_EVD);
}

static DAT_RETURN fake_evd_modify_cno(DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno)
{
        NOTE("evd_modify_cno", evd, P(cno));
        return check(evd, DAT_HANDLE_TYPE_EVD);
}

static DAT_RETURN fake_evd_enable(DAT_EVD_HANDLE evd)
{
        NOTE("evd_enable", evd);
        return check(evd, DAT_HANDLE_TYPE_EVD);
}

static DAT_RETURN fake_evd_disable(DAT_EVD_HANDLE evd)
{
        NOTE("evd_disable", evd);
        return check(evd, DAT_HANDLE_TYPE_EVD);
}

/* Never an event: a wait times out at once. */
static DAT_RETURN fake_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold,
                                DAT_EVENT *event, DAT_COUNT *nmore)
{
        NOTE("evd_wait", evd, V(timeout), V(threshold), P(event), P(nmore));
        if (!object_of(evd, DAT_HANDLE_TYPE_EVD))
                return DAT_INVALID_HANDLE;
        fake_provider_log.wait_timeout = timeout;
        return DAT_TIMEOUT_EXPIRED;
}

static DAT_RETURN fake_evd_resize(DAT_EVD_HANDLE evd, DAT_COUNT qlen)
{
        NOTE("evd_resize", evd, V(qlen));
        return check(evd, DAT_HANDLE_TYPE_EVD);
}

static DAT_RETURN fake_evd_post_se(DAT_EVD_HANDLE evd, const DAT_EVENT *event)
{
        NOTE("evd_post_se", evd, P(event));
        return check(evd, DAT_HANDLE_TYPE_EVD);
}

/* Never an event: the queue is empty. */
static DAT_RETURN fake_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *event)
{
        NOTE("evd_dequeue", evd, P(event));
        if (!object_of(evd, DAT_HANDLE_TYPE_EVD))
                return DAT_INVALID_HANDLE;
        return DAT_QUEUE_EMPTY;
}

static DAT_RETURN fake_evd_free(DAT_EVD_HANDLE evd)
{
        NOTE("evd_free", evd);
        return free_object(evd, DAT_HANDLE_TYPE_EVD);
}

static DAT_RETURN fake_evd_set_unwaitable(DAT_EVD_HANDLE evd)
{
        NOTE("evd_set_unwaitable", evd);
        return check(evd, DAT_HANDLE_TYPE_EVD);
}

static DAT_RETURN fake_evd_clear_unwaitable(DAT_EVD_HANDLE evd)
{
        NOTE("evd_clear_unwaitable", evd);
        return check(evd, DAT_HANDLE_TYPE_EVD);
}

/* ---- PZ ------------------------------------------------------------------------- */

static DAT_RETURN fake_pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE *pz)
{
        NOTE("pz_create", ia, P(pz));
        return make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_PZ, pz);
}

static DAT_RETURN fake_pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *param)
{
        struct fake_object *o = object_of(pz, DAT_HANDLE_TYPE_PZ);

        NOTE("pz_query", pz, V(mask), P(param));
        if (!o)
                return DAT_INVALID_HANDLE;
        /* The provider's own IA handle, as DAPL's providers answer. */
        param->ia_handle = o->ia;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_pz_free(DAT_PZ_HANDLE pz)
{
        NOTE("pz_free", pz);
        return free_object(pz, DAT_HANDLE_TYPE_PZ);
}

/* ---- EP ----------------------------------------------------------------------------- */

static DAT_RETURN fake_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv,
                                 DAT_EVD_HANDLE request, DAT_EVD_HANDLE connect,
                                 const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep)
{
        NOTE("ep_create", ia, P(pz), P(recv), P(request), P(connect), P(attr), P(ep));
        return make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_EP, ep);
}

static DAT_RETURN fake_ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv,
                                          DAT_EVD_HANDLE request, DAT_EVD_HANDLE connect,
                                          DAT_SRQ_HANDLE srq, const DAT_EP_ATTR *attr,
                                          DAT_EP_HANDLE *ep)
{
        NOTE("ep_create_with_srq", ia, P(pz), P(recv), P(request), P(connect), P(srq), P(attr),
             P(ep));
        return make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_EP, ep);
}

static DAT_RETURN fake_ep_query(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM *param)
{
        NOTE("ep_query", ep, V(mask), P(param));
        return check(ep, DAT_HANDLE_TYPE_EP);
}

static DAT_RETURN fake_ep_modify(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask,
                                 const DAT_EP_PARAM *param)
{
        NOTE("ep_modify", ep, V(mask), P(param));
        return check(ep, DAT_HANDLE_TYPE_EP);
}

static DAT_RETURN fake_ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual,
                                  DAT_TIMEOUT timeout, DAT_COUNT pd_size, const DAT_PVOID pd,
                                  DAT_QOS qos, DAT_CONNECT_FLAGS flags)
{
        NOTE("ep_connect", ep, P(addr), V(qual), V(timeout), V(pd_size), P(pd), V(qos), V(flags));
        return check(ep, DAT_HANDLE_TYPE_EP);
}

static DAT_RETURN fake_ep_dup_connect(DAT_EP_HANDLE ep, DAT_EP_HANDLE dup, DAT_TIMEOUT timeout,
                                      DAT_COUNT pd_size, const DAT_PVOID pd, DAT_QOS qos)
{
        NOTE("ep_dup_connect", ep, P(dup), V(timeout), V(pd_size), P(pd), V(qos));
        return check(ep, DAT_HANDLE_TYPE_EP);
}

static DAT_RETURN fake_ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS flags)
{
        NOTE("ep_disconnect", ep, V(flags));
        return check(ep, DAT_HANDLE_TYPE_EP);
}

/* What every post keeps besides the arguments (test_providers reads it). */
static DAT_RETURN posted(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                         DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                         DAT_COMPLETION_FLAGS flags)
{
        if (!object_of(ep, DAT_HANDLE_TYPE_EP))
                return DAT_INVALID_HANDLE;
        fake_provider_log.segments = n;
        fake_provider_log.iov = iov;
        fake_provider_log.cookie = cookie.as_64;
        fake_provider_log.completion_flags = flags;
        if (remote)
                fake_provider_log.remote = remote;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                    DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{
        NOTE("ep_post_send", ep, V(n), P(iov), V(cookie.as_64), V(flags));
        return posted(ep, n, iov, cookie, NULL, flags);
}

static DAT_RETURN fake_ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                    DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{
        NOTE("ep_post_recv", ep, V(n), P(iov), V(cookie.as_64), V(flags));
        return posted(ep, n, iov, cookie, NULL, flags);
}

static DAT_RETURN fake_ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                          DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                          DAT_COMPLETION_FLAGS flags)
{
        NOTE("ep_post_rdma_write", ep, V(n), P(iov), V(cookie.as_64), P(remote), V(flags));
        fake_provider_log.remote = remote;
        return posted(ep, n, iov, cookie, remote, flags);
}

static DAT_RETURN fake_ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                         DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                         DAT_COMPLETION_FLAGS flags)
{
        NOTE("ep_post_rdma_read", ep, V(n), P(iov), V(cookie.as_64), P(remote), V(flags));
        fake_provider_log.remote = remote;
        return posted(ep, n, iov, cookie, remote, flags);
}

/* An EP that never connected: unconnected, receives idle, requests not. */
static DAT_RETURN fake_ep_get_status(DAT_EP_HANDLE ep, DAT_EP_STATE *state, DAT_BOOLEAN *recv_idle,
                                     DAT_BOOLEAN *request_idle)
{
        NOTE("ep_get_status", ep, P(state), P(recv_idle), P(request_idle));
        if (!object_of(ep, DAT_HANDLE_TYPE_EP))
                return DAT_INVALID_HANDLE;
        if (state)
                *state = DAT_EP_STATE_UNCONNECTED;
        if (recv_idle)
                *recv_idle = DAT_TRUE;
        if (request_idle)
                *request_idle = DAT_FALSE;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_ep_free(DAT_EP_HANDLE ep)
{
        NOTE("ep_free", ep);
        return free_object(ep, DAT_HANDLE_TYPE_EP);
}

static DAT_RETURN fake_ep_reset(DAT_EP_HANDLE ep)
{
        NOTE("ep_reset", ep);
        return check(ep, DAT_HANDLE_TYPE_EP);
}

static DAT_RETURN fake_ep_recv_query(DAT_EP_HANDLE ep, DAT_COUNT *nbufs, DAT_COUNT *span)
{
        NOTE("ep_recv_query", ep, P(nbufs), P(span));
        if (!object_of(ep, DAT_HANDLE_TYPE_EP))
                return DAT_INVALID_HANDLE;
        if (nbufs)
                *nbufs = 3;
        if (span)
                *span = 4;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_ep_set_watermark(DAT_EP_HANDLE ep, DAT_COUNT soft, DAT_COUNT hard)
{
        NOTE("ep_set_watermark", ep, V(soft), V(hard));
        return check(ep, DAT_HANDLE_TYPE_EP);
}

/* ---- LMR and RMR ---------------------------------------------------------------------- */

static DAT_RETURN fake_lmr_create(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region,
                                  DAT_VLEN length, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv,
                                  DAT_VA_TYPE va_type, DAT_LMR_HANDLE *lmr,
                                  DAT_LMR_CONTEXT *lmr_context, DAT_RMR_CONTEXT *rmr_context,
                                  DAT_VLEN *reg_len, DAT_VADDR *reg_addr)
{
        DAT_RETURN ret;

        NOTE("lmr_create", ia, V(type), P(region.for_va), V(length), P(pz), V(priv), V(va_type),
             P(lmr), P(lmr_context), P(rmr_context), P(reg_len), P(reg_addr));
        ret = make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_LMR, lmr);
        if (ret != DAT_SUCCESS)
                return ret;
        if (lmr_context)
                *lmr_context = 0x1c;
        if (rmr_context)
                *rmr_context = 0x2c;
        if (reg_len)
                *reg_len = length;
        if (reg_addr)
                *reg_addr = (DAT_VADDR)(uintptr_t)region.for_va;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_lmr_query(DAT_LMR_HANDLE lmr, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *param)
{
        NOTE("lmr_query", lmr, V(mask), P(param));
        return check(lmr, DAT_HANDLE_TYPE_LMR);
}

static DAT_RETURN fake_lmr_free(DAT_LMR_HANDLE lmr)
{
        NOTE("lmr_free", lmr);
        return free_object(lmr, DAT_HANDLE_TYPE_LMR);
}

static DAT_RETURN fake_lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *segments,
                                          DAT_VLEN n)
{
        NOTE("lmr_sync_rdma_read", ia, P(segments), V(n));
        return check(ia, DAT_HANDLE_TYPE_IA);
}

static DAT_RETURN fake_lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *segments,
                                           DAT_VLEN n)
{
        NOTE("lmr_sync_rdma_write", ia, P(segments), V(n));
        return check(ia, DAT_HANDLE_TYPE_IA);
}

static DAT_RETURN fake_rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr)
{
        NOTE("rmr_create", pz, P(rmr));
        return make(pz, DAT_HANDLE_TYPE_PZ, DAT_HANDLE_TYPE_RMR, rmr);
}

static DAT_RETURN fake_rmr_query(DAT_RMR_HANDLE rmr, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM *param)
{
        NOTE("rmr_query", rmr, V(mask), P(param));
        return check(rmr, DAT_HANDLE_TYPE_RMR);
}

static DAT_RETURN fake_rmr_bind(DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr,
                                const DAT_LMR_TRIPLET *triplet, DAT_MEM_PRIV_FLAGS priv,
                                DAT_VA_TYPE va_type, DAT_EP_HANDLE ep, DAT_RMR_COOKIE cookie,
                                DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *context)
{
        NOTE("rmr_bind", rmr, P(lmr), P(triplet), V(priv), V(va_type), P(ep), V(cookie.as_64),
             V(flags), P(context));
        if (!object_of(rmr, DAT_HANDLE_TYPE_RMR))
                return DAT_INVALID_HANDLE;
        if (context)
                *context = 0x3c;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_rmr_free(DAT_RMR_HANDLE rmr)
{
        NOTE("rmr_free", rmr);
        return free_object(rmr, DAT_HANDLE_TYPE_RMR);
}

/* ---- PSP and RSP ---------------------------------------------------------------------- */

static DAT_RETURN fake_psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd,
                                  DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp)
{
        NOTE("psp_create", ia, V(qual), P(evd), V(flags), P(psp));
        return make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_PSP, psp);
}

/* The "any" qualifier it picks. */
#define FAKE_ANY_CONN_QUAL 0x5150u

static DAT_RETURN fake_psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd,
                                      DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp)
{
        DAT_RETURN ret;

        NOTE("psp_create_any", ia, P(qual), P(evd), V(flags), P(psp));
        ret = make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_PSP, psp);
        if (ret == DAT_SUCCESS && qual)
                *qual = FAKE_ANY_CONN_QUAL;
        return ret;
}

static DAT_RETURN fake_psp_query(DAT_PSP_HANDLE psp, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *param)
{
        NOTE("psp_query", psp, V(mask), P(param));
        return check(psp, DAT_HANDLE_TYPE_PSP);
}

static DAT_RETURN fake_psp_free(DAT_PSP_HANDLE psp)
{
        NOTE("psp_free", psp);
        return free_object(psp, DAT_HANDLE_TYPE_PSP);
}

static DAT_RETURN fake_rsp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep,
                                  DAT_EVD_HANDLE evd, DAT_RSP_HANDLE *rsp)
{
        NOTE("rsp_create", ia, V(qual), P(ep), P(evd), P(rsp));
        return make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_RSP, rsp);
}

static DAT_RETURN fake_rsp_query(DAT_RSP_HANDLE rsp, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM *param)
{
        NOTE("rsp_query", rsp, V(mask), P(param));
        return check(rsp, DAT_HANDLE_TYPE_RSP);
}

static DAT_RETURN fake_rsp_free(DAT_RSP_HANDLE rsp)
{
        NOTE("rsp_free", rsp);
        return free_object(rsp, DAT_HANDLE_TYPE_RSP);
}

/* ---- SRQ ----------------------------------------------------------------------------- */

static DAT_RETURN fake_srq_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR *attr,
                                  DAT_SRQ_HANDLE *srq)
{
        NOTE("srq_create", ia, P(pz), P(attr), P(srq));
        return make(ia, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_SRQ, srq);
}

static DAT_RETURN fake_srq_free(DAT_SRQ_HANDLE srq)
{
        NOTE("srq_free", srq);
        return free_object(srq, DAT_HANDLE_TYPE_SRQ);
}

static DAT_RETURN fake_srq_post_recv(DAT_SRQ_HANDLE srq, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                     DAT_DTO_COOKIE cookie)
{
        NOTE("srq_post_recv", srq, V(n), P(iov), V(cookie.as_64));
        return check(srq, DAT_HANDLE_TYPE_SRQ);
}

static DAT_RETURN fake_srq_query(DAT_SRQ_HANDLE srq, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM *param)
{
        NOTE("srq_query", srq, V(mask), P(param));
        return check(srq, DAT_HANDLE_TYPE_SRQ);
}

static DAT_RETURN fake_srq_resize(DAT_SRQ_HANDLE srq, DAT_COUNT max_recv_dto)
{
        NOTE("srq_resize", srq, V(max_recv_dto));
        return check(srq, DAT_HANDLE_TYPE_SRQ);
}

static DAT_RETURN fake_srq_set_lw(DAT_SRQ_HANDLE srq, DAT_COUNT low_watermark)
{
        NOTE("srq_set_lw", srq, V(low_watermark));
        return check(srq, DAT_HANDLE_TYPE_SRQ);
}

/* ---- The tables ------------------------------------------------------------------------ */

/* The default one: what test_providers' tests of a provider that leaves
 * functions out (srq_create, evd_dequeue, lmr_free, ...) rely on. */
static DAT_PROVIDER provider = {
        .ia_open_func = fake_ia_open,
        .ia_query_func = fake_ia_query,
        .ia_close_func = fake_ia_close,
        .set_consumer_context_func = fake_set_context,
        .get_consumer_context_func = fake_get_context,
        .get_handle_type_func = fake_get_handle_type,
        .pz_create_func = fake_pz_create,
        .pz_query_func = fake_pz_query,
        .pz_free_func = fake_pz_free,
        .ep_create_func = fake_ep_create,
        .ep_free_func = fake_ep_free,
        .ep_post_send_func = fake_ep_post_send,
        .ep_post_recv_func = fake_ep_post_recv,
        .ep_post_rdma_write_func = fake_ep_post_rdma_write,
        .ep_post_rdma_read_func = fake_ep_post_rdma_read,
        .evd_wait_func = fake_evd_wait,
        .handle_extendedop_func = fake_extendedop,
};

/* Every slot an entry point of libdat hands a call to: all but the DAT 2.0
 * ones no entry point has (csp_*, ep_common_connect, rmr_create_for_ep,
 * ep_post_send_with_invalidate, ep_post_rdma_read_to_rmr, cno_fd_create,
 * cno_trigger, ia_ha_related). */
static DAT_PROVIDER provider_all = {
        .ia_open_func = fake_ia_open_all,
        .ia_query_func = fake_ia_query,
        .ia_close_func = fake_ia_close,

        .set_consumer_context_func = fake_set_context,
        .get_consumer_context_func = fake_get_context,
        .get_handle_type_func = fake_get_handle_type,

        .cno_create_func = fake_cno_create,
        .cno_modify_agent_func = fake_cno_modify_agent,
        .cno_query_func = fake_cno_query,
        .cno_free_func = fake_cno_free,
        .cno_wait_func = fake_cno_wait,

        .cr_query_func = fake_cr_query,
        .cr_accept_func = fake_cr_accept,
        .cr_reject_func = fake_cr_reject,
        .cr_handoff_func = fake_cr_handoff,

        .evd_create_func = fake_evd_create,
        .evd_query_func = fake_evd_query,
        .evd_modify_cno_func = fake_evd_modify_cno,
        .evd_enable_func = fake_evd_enable,
        .evd_disable_func = fake_evd_disable,
        .evd_wait_func = fake_evd_wait,
        .evd_resize_func = fake_evd_resize,
        .evd_post_se_func = fake_evd_post_se,
        .evd_dequeue_func = fake_evd_dequeue,
        .evd_free_func = fake_evd_free,

        .ep_create_func = fake_ep_create,
        .ep_query_func = fake_ep_query,
        .ep_modify_func = fake_ep_modify,
        .ep_connect_func = fake_ep_connect,
        .ep_dup_connect_func = fake_ep_dup_connect,
        .ep_disconnect_func = fake_ep_disconnect,
        .ep_post_send_func = fake_ep_post_send,
        .ep_post_recv_func = fake_ep_post_recv,
        .ep_post_rdma_read_func = fake_ep_post_rdma_read,
        .ep_post_rdma_write_func = fake_ep_post_rdma_write,
        .ep_get_status_func = fake_ep_get_status,
        .ep_free_func = fake_ep_free,

        .lmr_create_func = fake_lmr_create,
        .lmr_query_func = fake_lmr_query,
        .lmr_free_func = fake_lmr_free,

        .rmr_create_func = fake_rmr_create,
        .rmr_query_func = fake_rmr_query,
        .rmr_bind_func = fake_rmr_bind,
        .rmr_free_func = fake_rmr_free,

        .psp_create_func = fake_psp_create,
        .psp_query_func = fake_psp_query,
        .psp_free_func = fake_psp_free,

        .rsp_create_func = fake_rsp_create,
        .rsp_query_func = fake_rsp_query,
        .rsp_free_func = fake_rsp_free,

        .pz_create_func = fake_pz_create,
        .pz_query_func = fake_pz_query,
        .pz_free_func = fake_pz_free,

        .psp_create_any_func = fake_psp_create_any,
        .ep_reset_func = fake_ep_reset,

        .evd_set_unwaitable_func = fake_evd_set_unwaitable,
        .evd_clear_unwaitable_func = fake_evd_clear_unwaitable,
        .lmr_sync_rdma_read_func = fake_lmr_sync_rdma_read,
        .lmr_sync_rdma_write_func = fake_lmr_sync_rdma_write,
        .ep_create_with_srq_func = fake_ep_create_with_srq,
        .ep_recv_query_func = fake_ep_recv_query,
        .ep_set_watermark_func = fake_ep_set_watermark,
        .srq_create_func = fake_srq_create,
        .srq_free_func = fake_srq_free,
        .srq_post_recv_func = fake_srq_post_recv,
        .srq_query_func = fake_srq_query,
        .srq_resize_func = fake_srq_resize,
        .srq_set_lw_func = fake_srq_set_lw,

        .handle_extendedop_func = fake_extendedop,
};

_public_ const DAT_PROVIDER *fake_provider_table(void)
{
        return &provider;
}

_public_ const DAT_PROVIDER *fake_provider_table2(void)
{
        provider2 = provider;
        provider2.ia_open_func = fake_ia_open2;
        return &provider2;
}

_public_ const DAT_PROVIDER *fake_provider_table_all(void)
{
        return &provider_all;
}

_public_ DAT_CR_HANDLE fake_provider_new_cr(DAT_HANDLE h)
{
        DAT_CR_HANDLE cr = DAT_HANDLE_NULL;

        return make(h, 0, DAT_HANDLE_TYPE_CR, &cr) == DAT_SUCCESS ? cr : DAT_HANDLE_NULL;
}

_public_ int fake_provider_object_type(DAT_HANDLE h)
{
        struct fake_object *o = object_of(h, 0);

        return o ? (int)o->type : -1;
}

/* The name the all-slots table was registered as (fini removes that one). */
static char all_slots_name[DAT_NAME_MAX_LENGTH];

_public_ void dat_provider_init(const DAT_PROVIDER_INFO *info, const char *instance_data)
{
        DAT_PROVIDER *p = &provider;

        fake_provider_log.inits++;
        fake_provider_log.init_info = *info;
        snprintf(fake_provider_log.instance_data, sizeof(fake_provider_log.instance_data), "%s",
                 instance_data ? instance_data : "(null)");
        if (instance_data && strcmp(instance_data, "no-register") == 0)
                return;
        if (instance_data && strcmp(instance_data, FAKE_PROVIDER_ALL_SLOTS) == 0) {
                p = &provider_all;
                snprintf(all_slots_name, sizeof(all_slots_name), "%s", info->ia_name);
        }
        p->device_name = fake_provider_log.init_info.ia_name;
        fake_provider_log.register_result = dat_registry_add_provider(p, info);
}

_public_ void dat_provider_fini(const DAT_PROVIDER_INFO *info)
{
        bool all = all_slots_name[0] && strcmp(info->ia_name, all_slots_name) == 0;

        fake_provider_log.finis++;
        (void)dat_registry_remove_provider(all ? &provider_all : &provider, info);
}
