/* Shared Receive Queues: the entry points are exported and check their first handle, and
 * return DAT_NOT_IMPLEMENTED until the SRQ issue builds the object on the
 * common header of handle.h. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_srq_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle,
                                   DAT_SRQ_ATTR *srq_attr, DAT_SRQ_HANDLE *srq_handle)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_srq_free(DAT_SRQ_HANDLE srq_handle)
{
        return dat_not_implemented_on(srq_handle, DAT_HANDLE_TYPE_SRQ);
}

_public_ DAT_RETURN dat_srq_post_recv(DAT_SRQ_HANDLE srq_handle, DAT_COUNT num_segments,
                                      DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie)
{
        return dat_not_implemented_on(srq_handle, DAT_HANDLE_TYPE_SRQ);
}

_public_ DAT_RETURN dat_srq_query(DAT_SRQ_HANDLE srq_handle, DAT_SRQ_PARAM_MASK srq_param_mask,
                                  DAT_SRQ_PARAM *srq_param)
{
        return dat_not_implemented_on(srq_handle, DAT_HANDLE_TYPE_SRQ);
}

_public_ DAT_RETURN dat_srq_resize(DAT_SRQ_HANDLE srq_handle, DAT_COUNT srq_max_recv_dto)
{
        return dat_not_implemented_on(srq_handle, DAT_HANDLE_TYPE_SRQ);
}

_public_ DAT_RETURN dat_srq_set_lw(DAT_SRQ_HANDLE srq_handle, DAT_COUNT low_watermark)
{
        return dat_not_implemented_on(srq_handle, DAT_HANDLE_TYPE_SRQ);
}
