/* A DAT provider library of the test suite's own, for libdat's dynamic
 * registry (libdat/provider_registry.h, libdat/foreign.h): what Debian's
 * libdaplofa.so.2 is to Debian's libdat2, with objects that only say which
 * calls reached them.  dat_provider_init registers the IA name it is given
 * unless the instance data says "no-register".  Every call that reaches an
 * object writes the call's name and its arguments' first bytes into
 * fake_provider_log (read by the test through dlsym); functions it leaves
 * out are NULL in its table.  Built with hidden visibility like the rest,
 * it exports what a provider library must (_public_) and its log. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/udat.h>

#include "common/macro.h"
#include "tests/libdat/fake_provider.h"

_public_ struct fake_provider_log fake_provider_log;

static DAT_PROVIDER provider, provider2;

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

static void note(const char *call, DAT_HANDLE handle)
{
        snprintf(fake_provider_log.last_call, sizeof(fake_provider_log.last_call), "%s", call);
        fake_provider_log.last_handle = handle;
        fake_provider_log.calls++;
}

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

static DAT_RETURN free_object(DAT_HANDLE h, DAT_HANDLE_TYPE type, const char *call)
{
        struct fake_object *o = object_of(h, (int)type);

        note(call, h);
        if (!o)
                return DAT_INVALID_HANDLE;
        if (o->ia != o)
                o->ia->children--;  /* ia_close frees the IA's async EVD first */
        o->magic = 0;
        free(o);
        fake_provider_log.live_objects--;
        return DAT_SUCCESS;
}

static DAT_RETURN open_ia(const DAT_PROVIDER *p, const DAT_NAME_PTR name, DAT_COUNT qlen,
                          DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle)
{
        struct fake_object *ia = new_object(DAT_HANDLE_TYPE_IA, NULL, p);

        note("ia_open", DAT_HANDLE_NULL);
        snprintf(fake_provider_log.opened_name, sizeof(fake_provider_log.opened_name), "%s", name);
        fake_provider_log.async_qlen = qlen;
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

static DAT_RETURN fake_ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags)
{
        struct fake_object *o = object_of(ia, DAT_HANDLE_TYPE_IA);

        fake_provider_log.close_flags = flags;
        /* dat_ia_close(3DAT): a graceful close with objects left (its
         * async EVD aside) fails. */
        if (o && o->children > (o->async_evd ? 1 : 0) && flags == DAT_CLOSE_GRACEFUL_FLAG) {
                note("ia_close", ia);
                return DAT_INVALID_STATE;
        }
        if (o && o->async_evd)
                (void)free_object(o->async_evd, DAT_HANDLE_TYPE_EVD, "ia_close");
        return free_object(ia, DAT_HANDLE_TYPE_IA, "ia_close");
}

static DAT_RETURN fake_ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *async_evd, DAT_IA_ATTR_MASK mask,
                                DAT_IA_ATTR *attr, DAT_PROVIDER_ATTR_MASK pmask,
                                DAT_PROVIDER_ATTR *pattr)
{
        note("ia_query", ia);
        if (!object_of(ia, DAT_HANDLE_TYPE_IA))
                return DAT_INVALID_HANDLE;
        if (attr)
                snprintf(attr->adapter_name, sizeof(attr->adapter_name), "fake adapter");
        return DAT_SUCCESS;
}

static DAT_RETURN fake_get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE *type)
{
        struct fake_object *o = object_of(h, 0);

        note("get_handle_type", h);
        if (!o)
                return DAT_INVALID_HANDLE;
        *type = o->type;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_set_context(DAT_HANDLE h, DAT_CONTEXT context)
{
        struct fake_object *o = object_of(h, 0);

        note("set_consumer_context", h);
        if (!o)
                return DAT_INVALID_HANDLE;
        o->context = context;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_get_context(DAT_HANDLE h, DAT_CONTEXT *context)
{
        struct fake_object *o = object_of(h, 0);

        note("get_consumer_context", h);
        if (!o)
                return DAT_INVALID_HANDLE;
        *context = o->context;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE *pz)
{
        struct fake_object *o = object_of(ia, DAT_HANDLE_TYPE_IA);

        note("pz_create", ia);
        if (!o)
                return DAT_INVALID_HANDLE;
        *pz = new_object(DAT_HANDLE_TYPE_PZ, o, NULL);
        return DAT_SUCCESS;
}

static DAT_RETURN fake_pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *param)
{
        struct fake_object *o = object_of(pz, DAT_HANDLE_TYPE_PZ);

        note("pz_query", pz);
        if (!o)
                return DAT_INVALID_HANDLE;
        /* The provider's own IA handle, as DAPL's providers answer. */
        param->ia_handle = o->ia;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_pz_free(DAT_PZ_HANDLE pz)
{
        return free_object(pz, DAT_HANDLE_TYPE_PZ, "pz_free");
}

static DAT_RETURN fake_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv,
                                 DAT_EVD_HANDLE request, DAT_EVD_HANDLE connect,
                                 const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep)
{
        struct fake_object *o = object_of(ia, DAT_HANDLE_TYPE_IA);

        note("ep_create", ia);
        if (!o)
                return DAT_INVALID_HANDLE;
        *ep = new_object(DAT_HANDLE_TYPE_EP, o, NULL);
        return DAT_SUCCESS;
}

static DAT_RETURN fake_ep_free(DAT_EP_HANDLE ep)
{
        return free_object(ep, DAT_HANDLE_TYPE_EP, "ep_free");
}

static DAT_RETURN fake_ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                    DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{
        note("ep_post_send", ep);
        if (!object_of(ep, DAT_HANDLE_TYPE_EP))
                return DAT_INVALID_HANDLE;
        fake_provider_log.segments = n;
        fake_provider_log.iov = iov;
        fake_provider_log.cookie = cookie.as_64;
        fake_provider_log.completion_flags = flags;
        return DAT_SUCCESS;
}

static DAT_RETURN fake_ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                    DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{
        DAT_RETURN ret = fake_ep_post_send(ep, n, iov, cookie, flags);

        note("ep_post_recv", ep);
        return ret;
}

static DAT_RETURN fake_ep_post_rdma(const char *call, DAT_EP_HANDLE ep, DAT_COUNT n,
                                    DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                    const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags)
{
        DAT_RETURN ret = fake_ep_post_send(ep, n, iov, cookie, flags);

        note(call, ep);
        fake_provider_log.remote = remote;
        return ret;
}

static DAT_RETURN fake_ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                          DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                          DAT_COMPLETION_FLAGS flags)
{
        return fake_ep_post_rdma("ep_post_rdma_write", ep, n, iov, cookie, remote, flags);
}

static DAT_RETURN fake_ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                         DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                         DAT_COMPLETION_FLAGS flags)
{
        return fake_ep_post_rdma("ep_post_rdma_read", ep, n, iov, cookie, remote, flags);
}

/* Never an event: a wait times out at once. */
static DAT_RETURN fake_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold,
                                DAT_EVENT *event, DAT_COUNT *nmore)
{
        note("evd_wait", evd);
        if (!object_of(evd, DAT_HANDLE_TYPE_EVD))
                return DAT_INVALID_HANDLE;
        fake_provider_log.wait_timeout = timeout;
        return DAT_TIMEOUT_EXPIRED;
}

static DAT_RETURN fake_extendedop(DAT_HANDLE h, DAT_EXTENDED_OP op, va_list args)
{
        note("handle_extendedop", h);
        fake_provider_log.ext_op = (int)op;
        fake_provider_log.ext_arg = va_arg(args, int);
        return DAT_SUCCESS;
}

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

_public_ void dat_provider_init(const DAT_PROVIDER_INFO *info, const char *instance_data)
{
        fake_provider_log.inits++;
        fake_provider_log.init_info = *info;
        snprintf(fake_provider_log.instance_data, sizeof(fake_provider_log.instance_data), "%s",
                 instance_data ? instance_data : "(null)");
        if (instance_data && strcmp(instance_data, "no-register") == 0)
                return;
        provider.device_name = fake_provider_log.init_info.ia_name;
        fake_provider_log.register_result = dat_registry_add_provider(&provider, info);
}

_public_ void dat_provider_fini(const DAT_PROVIDER_INFO *info)
{
        fake_provider_log.finis++;
        (void)dat_registry_remove_provider(&provider, info);
}
