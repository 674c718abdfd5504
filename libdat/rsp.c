/* Reserved Service Points: the entry points are exported and check their first handle, and
 * return DAT_NOT_IMPLEMENTED until the RSP issue builds the object on the
 * common header of handle.h. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_rsp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL conn_qual,
                                   DAT_EP_HANDLE ep_handle, DAT_EVD_HANDLE evd_handle,
                                   DAT_RSP_HANDLE *rsp_handle)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_rsp_query(DAT_RSP_HANDLE rsp_handle, DAT_RSP_PARAM_MASK rsp_param_mask,
                                  DAT_RSP_PARAM *rsp_param)
{
        return dat_not_implemented_on(rsp_handle, DAT_HANDLE_TYPE_RSP);
}

_public_ DAT_RETURN dat_rsp_free(DAT_RSP_HANDLE rsp_handle)
{
        return dat_not_implemented_on(rsp_handle, DAT_HANDLE_TYPE_RSP);
}
