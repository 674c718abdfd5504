/* Consumer Notification Objects: the entry points are exported and check their first handle, and
 * return DAT_NOT_IMPLEMENTED until the CNO issue builds the object on the
 * common header of handle.h. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_cno_create(DAT_IA_HANDLE ia_handle, DAT_OS_WAIT_PROXY_AGENT agent,
                                   DAT_CNO_HANDLE *cno_handle)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_cno_modify_agent(DAT_CNO_HANDLE cno_handle, DAT_OS_WAIT_PROXY_AGENT agent)
{
        return dat_not_implemented_on(cno_handle, DAT_HANDLE_TYPE_CNO);
}

_public_ DAT_RETURN dat_cno_query(DAT_CNO_HANDLE cno_handle, DAT_CNO_PARAM_MASK cno_param_mask,
                                  DAT_CNO_PARAM *cno_param)
{
        return dat_not_implemented_on(cno_handle, DAT_HANDLE_TYPE_CNO);
}

_public_ DAT_RETURN dat_cno_free(DAT_CNO_HANDLE cno_handle)
{
        return dat_not_implemented_on(cno_handle, DAT_HANDLE_TYPE_CNO);
}

_public_ DAT_RETURN dat_cno_wait(DAT_CNO_HANDLE cno_handle, DAT_TIMEOUT timeout,
                                 DAT_EVD_HANDLE *evd_handle)
{
        return dat_not_implemented_on(cno_handle, DAT_HANDLE_TYPE_CNO);
}
