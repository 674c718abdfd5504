/* Protection Zones: the entry points are exported and check their first handle, and
 * return DAT_NOT_IMPLEMENTED until the PZ issue builds the object on the
 * common header of handle.h. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_pz_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE *pz_handle)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_pz_query(DAT_PZ_HANDLE pz_handle, DAT_PZ_PARAM_MASK pz_param_mask,
                                 DAT_PZ_PARAM *pz_param)
{
        return dat_not_implemented_on(pz_handle, DAT_HANDLE_TYPE_PZ);
}

_public_ DAT_RETURN dat_pz_free(DAT_PZ_HANDLE pz_handle)
{
        return dat_not_implemented_on(pz_handle, DAT_HANDLE_TYPE_PZ);
}
