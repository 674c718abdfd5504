/* Connection Requests: the entry points are exported and check their first handle, and
 * return DAT_NOT_IMPLEMENTED until the CR issue builds the object on the
 * common header of handle.h. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_cr_query(DAT_CR_HANDLE cr_handle, DAT_CR_PARAM_MASK cr_param_mask,
                                 DAT_CR_PARAM *cr_param)
{
        return dat_not_implemented_on(cr_handle, DAT_HANDLE_TYPE_CR);
}

_public_ DAT_RETURN dat_cr_accept(DAT_CR_HANDLE cr_handle, DAT_EP_HANDLE ep_handle,
                                  DAT_COUNT private_data_size, const DAT_PVOID private_data)
{
        return dat_not_implemented_on(cr_handle, DAT_HANDLE_TYPE_CR);
}

_public_ DAT_RETURN dat_cr_reject(DAT_CR_HANDLE cr_handle, DAT_COUNT private_data_size,
                                  const DAT_PVOID private_data)
{
        return dat_not_implemented_on(cr_handle, DAT_HANDLE_TYPE_CR);
}

_public_ DAT_RETURN dat_cr_handoff(DAT_CR_HANDLE cr_handle, DAT_CONN_QUAL handoff)
{
        return dat_not_implemented_on(cr_handle, DAT_HANDLE_TYPE_CR);
}
