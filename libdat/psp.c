/* Public Service Points: the entry points are exported and check their first handle, and
 * return DAT_NOT_IMPLEMENTED until the PSP issue builds the object on the
 * common header of handle.h. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_psp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL conn_qual,
                                   DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS psp_flags,
                                   DAT_PSP_HANDLE *psp_handle)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_psp_create_any(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL *conn_qual,
                                       DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS psp_flags,
                                       DAT_PSP_HANDLE *psp_handle)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_psp_query(DAT_PSP_HANDLE psp_handle, DAT_PSP_PARAM_MASK psp_param_mask,
                                  DAT_PSP_PARAM *psp_param)
{
        return dat_not_implemented_on(psp_handle, DAT_HANDLE_TYPE_PSP);
}

_public_ DAT_RETURN dat_psp_free(DAT_PSP_HANDLE psp_handle)
{
        return dat_not_implemented_on(psp_handle, DAT_HANDLE_TYPE_PSP);
}
