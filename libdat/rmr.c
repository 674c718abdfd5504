/* Remote Memory Regions: the entry points are exported and check their first handle, and
 * return DAT_NOT_IMPLEMENTED until the RMR issue builds the object on the
 * common header of handle.h. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_rmr_create(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE *rmr_handle)
{
        return dat_not_implemented_on(pz_handle, DAT_HANDLE_TYPE_PZ);
}

_public_ DAT_RETURN dat_rmr_query(DAT_RMR_HANDLE rmr_handle, DAT_RMR_PARAM_MASK rmr_param_mask,
                                  DAT_RMR_PARAM *rmr_param)
{
        return dat_not_implemented_on(rmr_handle, DAT_HANDLE_TYPE_RMR);
}

_public_ DAT_RETURN dat_rmr_bind(DAT_RMR_HANDLE rmr_handle, DAT_LMR_HANDLE lmr_handle,
                                 const DAT_LMR_TRIPLET *lmr_triplet, DAT_MEM_PRIV_FLAGS mem_priv,
                                 DAT_VA_TYPE va_type, DAT_EP_HANDLE ep_handle,
                                 DAT_RMR_COOKIE user_cookie, DAT_COMPLETION_FLAGS completion_flags,
                                 DAT_RMR_CONTEXT *context)
{
        return dat_not_implemented_on(rmr_handle, DAT_HANDLE_TYPE_RMR);
}

_public_ DAT_RETURN dat_rmr_free(DAT_RMR_HANDLE rmr_handle)
{
        return dat_not_implemented_on(rmr_handle, DAT_HANDLE_TYPE_RMR);
}
