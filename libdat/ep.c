/* Endpoints: the entry points are exported and check their first handle, and
 * return DAT_NOT_IMPLEMENTED until the EP issue builds the object on the
 * common header of handle.h. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_ep_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle,
                                  DAT_EVD_HANDLE recv_evd_handle, DAT_EVD_HANDLE request_evd_handle,
                                  DAT_EVD_HANDLE connect_evd_handle,
                                  const DAT_EP_ATTR *ep_attributes, DAT_EP_HANDLE *ep_handle)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_ep_create_with_srq(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle,
                                           DAT_EVD_HANDLE recv_evd_handle,
                                           DAT_EVD_HANDLE request_evd_handle,
                                           DAT_EVD_HANDLE connect_evd_handle,
                                           DAT_SRQ_HANDLE srq_handle,
                                           const DAT_EP_ATTR *ep_attributes,
                                           DAT_EP_HANDLE *ep_handle)
{
        return dat_not_implemented_on(ia_handle, DAT_HANDLE_TYPE_IA);
}

_public_ DAT_RETURN dat_ep_query(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK ep_param_mask,
                                 DAT_EP_PARAM *ep_param)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_modify(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK ep_param_mask,
                                  const DAT_EP_PARAM *ep_param)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR remote_ia_address,
                                   DAT_CONN_QUAL remote_conn_qual, DAT_TIMEOUT timeout,
                                   DAT_COUNT private_data_size, const DAT_PVOID private_data,
                                   DAT_QOS quality_of_service, DAT_CONNECT_FLAGS connect_flags)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_dup_connect(DAT_EP_HANDLE ep_handle, DAT_EP_HANDLE ep_dup_handle,
                                       DAT_TIMEOUT timeout, DAT_COUNT private_data_size,
                                       const DAT_PVOID private_data, DAT_QOS quality_of_service)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_disconnect(DAT_EP_HANDLE ep_handle, DAT_CLOSE_FLAGS close_flags)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_post_send(DAT_EP_HANDLE ep_handle, DAT_COUNT num_segments,
                                     DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie,
                                     DAT_COMPLETION_FLAGS completion_flags)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_post_recv(DAT_EP_HANDLE ep_handle, DAT_COUNT num_segments,
                                     DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie,
                                     DAT_COMPLETION_FLAGS completion_flags)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_post_rdma_read(DAT_EP_HANDLE ep_handle, DAT_COUNT num_segments,
                                          DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie,
                                          const DAT_RMR_TRIPLET *remote_iov,
                                          DAT_COMPLETION_FLAGS completion_flags)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_post_rdma_write(DAT_EP_HANDLE ep_handle, DAT_COUNT num_segments,
                                           DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE user_cookie,
                                           const DAT_RMR_TRIPLET *remote_iov,
                                           DAT_COMPLETION_FLAGS completion_flags)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_get_status(DAT_EP_HANDLE ep_handle, DAT_EP_STATE *ep_state,
                                      DAT_BOOLEAN *recv_idle, DAT_BOOLEAN *request_idle)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_free(DAT_EP_HANDLE ep_handle)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_reset(DAT_EP_HANDLE ep_handle)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_recv_query(DAT_EP_HANDLE ep_handle, DAT_COUNT *nbufs_allocated,
                                      DAT_COUNT *bufs_alloc_span)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}

_public_ DAT_RETURN dat_ep_set_watermark(DAT_EP_HANDLE ep_handle, DAT_COUNT soft_high_watermark,
                                         DAT_COUNT hard_high_watermark)
{
        return dat_not_implemented_on(ep_handle, DAT_HANDLE_TYPE_EP);
}
