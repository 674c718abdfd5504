/* Public Service Points: dat_psp_create, dat_psp_create_any, dat_psp_query,
 * dat_psp_free (the object is in listener.c).
 *
 * DAT_PSP_PROVIDER_FLAG: libdat creates an EP for every request on the PSP
 * (cr.c, ep_create_provider in ep.h); DAT_PSP_CONSUMER_FLAG: the consumer
 * passes its own EP to dat_cr_accept. */
#include "config.h"

#include "libdat/conn.h"

#include "libdat/foreign.h"

static DAT_RETURN check_psp_flags(DAT_PSP_FLAGS flags)
{
        if (flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG)
                return DAT_ERR_ARG(4);
        return DAT_SUCCESS;
}

/* dat_psp_create(3DAT) */
_public_ DAT_RETURN dat_psp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL conn_qual,
                                   DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS psp_flags,
                                   DAT_PSP_HANDLE *psp_handle)
{
        FOREIGN_DISPATCH_IA_GUARDED(ia_handle,
                                    (1, evd_handle, DAT_INVALID_HANDLE_EVD_CR),
                                    psp_create_func, conn_qual, evd_handle, psp_flags, psp_handle);
        struct listener *l;
        DAT_RETURN ret;

        if (!dat_object_lookup(ia_handle, DAT_HANDLE_TYPE_IA))
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (!psp_handle)
                return DAT_ERR_ARG(5);
        ret = check_psp_flags(psp_flags);
        if (ret != DAT_SUCCESS)
                return ret;
        ret = listener_create(ia_handle, DATP_LISTENER_PSP, conn_qual, evd_handle, psp_flags,
                              DAT_HANDLE_NULL, &l);
        if (ret == DAT_SUCCESS)
                *psp_handle = l->obj.handle;
        return ret;
}

/* dat_psp_create_any(3DAT): datd picks a free conn_qual of the IA. */
_public_ DAT_RETURN dat_psp_create_any(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL *conn_qual,
                                       DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS psp_flags,
                                       DAT_PSP_HANDLE *psp_handle)
{
        FOREIGN_DISPATCH_IA_GUARDED(ia_handle,
                                    (1, evd_handle, DAT_INVALID_HANDLE_EVD_CR),
                                    psp_create_any_func, conn_qual, evd_handle, psp_flags,
                                    psp_handle);
        struct listener *l;
        DAT_RETURN ret;

        if (!dat_object_lookup(ia_handle, DAT_HANDLE_TYPE_IA))
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (!conn_qual)
                return DAT_ERR_ARG(2);
        if (!psp_handle)
                return DAT_ERR_ARG(5);
        ret = check_psp_flags(psp_flags);
        if (ret != DAT_SUCCESS)
                return ret;
        ret = listener_create(ia_handle, DATP_LISTENER_PSP_ANY, 0, evd_handle, psp_flags,
                              DAT_HANDLE_NULL, &l);
        if (ret != DAT_SUCCESS)
                return ret;
        *conn_qual = l->conn_qual;
        *psp_handle = l->obj.handle;
        return DAT_SUCCESS;
}

/* dat_psp_query(3DAT): mask bits outside DAT_PSP_FIELD_ALL: ARG2; NULL
 * psp_param: ARG3.  Everything is filled whatever the mask. */
_public_ DAT_RETURN dat_psp_query(DAT_PSP_HANDLE psp_handle, DAT_PSP_PARAM_MASK psp_param_mask,
                                  DAT_PSP_PARAM *psp_param)
{
        FOREIGN_DISPATCH(psp_handle, psp_query_func, psp_handle, psp_param_mask, psp_param);
        struct listener *l = psp_lookup(psp_handle);

        if (!l)
                return dat_invalid_handle(DAT_HANDLE_TYPE_PSP);
        if ((unsigned)psp_param_mask & ~(unsigned)DAT_PSP_FIELD_ALL)
                return DAT_ERR_ARG(2);
        if (!psp_param)
                return DAT_ERR_ARG(3);
        dat_object_lock();
        *psp_param = (DAT_PSP_PARAM){
                .ia_handle = l->obj.parent->handle,
                .conn_qual = l->conn_qual,
                .evd_handle = l->evd,
                .psp_flags = l->psp_flags,
        };
        dat_object_unlock();
        return DAT_SUCCESS;
}

/* dat_psp_free(3DAT): pending CRs stay valid (they are the IA's). */
_public_ DAT_RETURN dat_psp_free(DAT_PSP_HANDLE psp_handle)
{
        FOREIGN_DISPATCH(psp_handle, psp_free_func, psp_handle);
        return listener_free(psp_handle, DAT_HANDLE_TYPE_PSP);
}
