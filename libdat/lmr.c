/* Local Memory Regions: the entry points are exported and check their first handle, and
 * return DAT_NOT_IMPLEMENTED until the LMR issue builds the object on the
 * common header of handle.h. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_lmr_create(DAT_IA_HANDLE ia_handle, DAT_MEM_TYPE mem_type,
                                   DAT_REGION_DESCRIPTION region_description, DAT_VLEN length,
                                   DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS privileges,
                                   DAT_VA_TYPE va_type, DAT_LMR_HANDLE *lmr_handle,
                                   DAT_LMR_CONTEXT *lmr_context, DAT_RMR_CONTEXT *rmr_context,
                                   DAT_VLEN *registered_length, DAT_VADDR *registered_address)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_lmr_query(DAT_LMR_HANDLE lmr_handle, DAT_LMR_PARAM_MASK lmr_param_mask,
                                  DAT_LMR_PARAM *lmr_param)
{
        return dat_not_implemented_on(lmr_handle, DAT_HANDLE_TYPE_LMR);
}

_public_ DAT_RETURN dat_lmr_free(DAT_LMR_HANDLE lmr_handle)
{
        return dat_not_implemented_on(lmr_handle, DAT_HANDLE_TYPE_LMR);
}

_public_ DAT_RETURN dat_lmr_sync_rdma_read(DAT_IA_HANDLE ia_handle,
                                           const DAT_LMR_TRIPLET *local_segments,
                                           DAT_VLEN num_segments)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_lmr_sync_rdma_write(DAT_IA_HANDLE ia_handle,
                                            const DAT_LMR_TRIPLET *local_segments,
                                            DAT_VLEN num_segments)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}
