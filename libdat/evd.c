/* Event Dispatchers (see evd.h): the async EVD object, and the EVD entry
 * points, which check their handles and are not implemented yet. */
#include "config.h"

#include "libdat/evd.h"

#include <stdlib.h>

/* A queue shorter than this is never worth allocating. */
#define EVD_MIN_QLEN 8

static const struct dat_object_ops evd_ops = {
        .type = DAT_HANDLE_TYPE_EVD,
        .name = "EVD",
        .invalid_subtype = DAT_INVALID_HANDLE1,
        .destroy = evd_destroy,
};

DAT_DEFINE_LOOKUP(evd, DAT_HANDLE_TYPE_EVD)

DAT_RETURN evd_create_async(struct dat_object *ia, DAT_COUNT min_qlen, struct evd **out)
{
        struct evd *evd = calloc(1, sizeof(*evd));
        DAT_RETURN ret;

        if (!evd)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        evd->qlen = min_qlen > EVD_MIN_QLEN ? min_qlen : EVD_MIN_QLEN;
        evd->flags = DAT_EVD_ASYNC_FLAG;
        ret = dat_object_init(&evd->obj, &evd_ops, ia);
        if (ret != DAT_SUCCESS) {
                free(evd);
                return ret;
        }
        *out = evd;
        return DAT_SUCCESS;
}

void evd_destroy(struct dat_object *obj)
{
        struct evd *evd = dat_container_of(obj, struct evd, obj);

        dat_object_fini(&evd->obj);
        free(evd);
}

/* The EVD entry points below check their first handle and return
 * DAT_NOT_IMPLEMENTED until the EVD issue. */

_public_ DAT_RETURN dat_evd_create(DAT_IA_HANDLE ia_handle, DAT_COUNT evd_min_qlen,
                                   DAT_CNO_HANDLE cno_handle, DAT_EVD_FLAGS evd_flags,
                                   DAT_EVD_HANDLE *evd_handle)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_evd_modify_cno(DAT_EVD_HANDLE evd_handle, DAT_CNO_HANDLE cno_handle)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_enable(DAT_EVD_HANDLE evd_handle)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_disable(DAT_EVD_HANDLE evd_handle)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_wait(DAT_EVD_HANDLE evd_handle, DAT_TIMEOUT timeout,
                                 DAT_COUNT threshold, DAT_EVENT *event, DAT_COUNT *n_more_events)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_set_unwaitable(DAT_EVD_HANDLE evd_handle)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_clear_unwaitable(DAT_EVD_HANDLE evd_handle)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_resize(DAT_EVD_HANDLE evd_handle, DAT_COUNT evd_min_qlen)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_post_se(DAT_EVD_HANDLE evd_handle, const DAT_EVENT *event)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_dequeue(DAT_EVD_HANDLE evd_handle, DAT_EVENT *event)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_query(DAT_EVD_HANDLE evd_handle, DAT_EVD_PARAM_MASK evd_param_mask,
                                  DAT_EVD_PARAM *evd_param)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}

_public_ DAT_RETURN dat_evd_free(DAT_EVD_HANDLE evd_handle)
{
        return dat_not_implemented_on(evd_handle, DAT_HANDLE_TYPE_EVD);
}
