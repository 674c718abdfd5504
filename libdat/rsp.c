/* Reserved Service Points: dat_rsp_create, dat_rsp_query, dat_rsp_free (the
 * object is in listener.c).  dat_rsp_create(3DAT): the EP, Unconnected,
 * moves to Reserved; a request moves it to Passive Connection Pending;
 * dat_rsp_free gives a still Reserved EP back as Unconnected. */
#include "config.h"

#include "libdat/conn.h"

#include "libdat/foreign.h"

/* dat_rsp_create(3DAT) */
_public_ DAT_RETURN dat_rsp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL conn_qual,
                                   DAT_EP_HANDLE ep_handle, DAT_EVD_HANDLE evd_handle,
                                   DAT_RSP_HANDLE *rsp_handle)
{
        FOREIGN_DISPATCH_IA_GUARDED(ia_handle,
                                    (2, ep_handle, DAT_INVALID_HANDLE_EP,
                                     evd_handle, DAT_INVALID_HANDLE_EVD_CR),
                                    rsp_create_func, conn_qual, ep_handle, evd_handle, rsp_handle);
        struct listener *l;
        DAT_RETURN ret;

        if (!dat_object_lookup(ia_handle, DAT_HANDLE_TYPE_IA))
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (!dat_object_lookup(ep_handle, DAT_HANDLE_TYPE_EP))
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        if (!rsp_handle)
                return DAT_ERR_ARG(5);
        ret = listener_create(ia_handle, DATP_LISTENER_RSP, conn_qual, evd_handle, 0, ep_handle, &l);
        if (ret == DAT_SUCCESS)
                *rsp_handle = l->obj.handle;
        return ret;
}

/* dat_rsp_query(3DAT): mask bits outside DAT_RSP_FIELD_ALL: ARG2; NULL
 * rsp_param: ARG3. */
_public_ DAT_RETURN dat_rsp_query(DAT_RSP_HANDLE rsp_handle, DAT_RSP_PARAM_MASK rsp_param_mask,
                                  DAT_RSP_PARAM *rsp_param)
{
        FOREIGN_DISPATCH(rsp_handle, rsp_query_func, rsp_handle, rsp_param_mask, rsp_param);
        struct listener *l = rsp_lookup(rsp_handle);

        if (!l)
                return dat_invalid_handle(DAT_HANDLE_TYPE_RSP);
        if ((unsigned)rsp_param_mask & ~(unsigned)DAT_RSP_FIELD_ALL)
                return DAT_ERR_ARG(2);
        if (!rsp_param)
                return DAT_ERR_ARG(3);
        dat_object_lock();
        *rsp_param = (DAT_RSP_PARAM){
                .ia_handle = l->obj.parent->handle,
                .conn_qual = l->conn_qual,
                .evd_handle = l->evd,
                .ep_handle = l->ep,
        };
        dat_object_unlock();
        return DAT_SUCCESS;
}

/* dat_rsp_free(3DAT) */
_public_ DAT_RETURN dat_rsp_free(DAT_RSP_HANDLE rsp_handle)
{
        FOREIGN_DISPATCH(rsp_handle, rsp_free_func, rsp_handle);
        return listener_free(rsp_handle, DAT_HANDLE_TYPE_RSP);
}
