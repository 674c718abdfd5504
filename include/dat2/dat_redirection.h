/* dat_redirection.h: how a DAT call reaches its provider.
 *
 * Every handle a provider hands out points at memory whose first word is
 * the provider's DAT_PROVIDER table; the registry library (libdat2.so.2)
 * implements each entry point by looking the table up through the handle
 * and calling the matching slot.  This file gives the slot types and the
 * DAT_XXX() dispatch macros for the transport-independent calls;
 * udat_redirection.h adds the user-space ones and the table itself.
 *
 * Providers use this file; consumers normally do not. */
#ifndef _DAT_REDIRECTION_H_
#define _DAT_REDIRECTION_H_

#include <dat2/udat.h>
#ifdef DAT_EXTENSIONS
#include <stdarg.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dat_provider DAT_PROVIDER;

/* A provider may keep its table elsewhere and say so by defining this
 * before including the DAT headers. */
#ifndef DAT_HANDLE_TO_PROVIDER
#define DAT_HANDLE_TO_PROVIDER(handle) (*(DAT_PROVIDER **)(handle))
#endif

/* ---- Dispatch macros: DAT_XXX(handle, ...) calls the handle's provider -- */

#define DAT_IA_QUERY(ia, evd, ia_msk, ia_ptr, p_msk, p_ptr) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->ia_query_func)((ia), (evd), (ia_msk), (ia_ptr), \
                                                     (p_msk), (p_ptr))

#define DAT_SET_CONSUMER_CONTEXT(handle, context) \
        (*DAT_HANDLE_TO_PROVIDER(handle)->set_consumer_context_func)((handle), (context))
#define DAT_GET_CONSUMER_CONTEXT(handle, context) \
        (*DAT_HANDLE_TO_PROVIDER(handle)->get_consumer_context_func)((handle), (context))
#define DAT_GET_HANDLE_TYPE(handle, handle_type) \
        (*DAT_HANDLE_TO_PROVIDER(handle)->get_handle_type_func)((handle), (handle_type))

#define DAT_CR_QUERY(cr, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(cr)->cr_query_func)((cr), (mask), (param))
#define DAT_CR_ACCEPT(cr, ep, size, pdata) \
        (*DAT_HANDLE_TO_PROVIDER(cr)->cr_accept_func)((cr), (ep), (size), (pdata))
#define DAT_CR_REJECT(cr, size, pdata) \
        (*DAT_HANDLE_TO_PROVIDER(cr)->cr_reject_func)((cr), (size), (pdata))
#define DAT_CR_HANDOFF(cr, qual) \
        (*DAT_HANDLE_TO_PROVIDER(cr)->cr_handoff_func)((cr), (qual))

#define DAT_EVD_QUERY(evd, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(evd)->evd_query_func)((evd), (mask), (param))
#define DAT_EVD_RESIZE(evd, qsize) \
        (*DAT_HANDLE_TO_PROVIDER(evd)->evd_resize_func)((evd), (qsize))
#define DAT_EVD_POST_SE(evd, event) \
        (*DAT_HANDLE_TO_PROVIDER(evd)->evd_post_se_func)((evd), (event))
#define DAT_EVD_DEQUEUE(evd, event) \
        (*DAT_HANDLE_TO_PROVIDER(evd)->evd_dequeue_func)((evd), (event))
#define DAT_EVD_FREE(evd) \
        (*DAT_HANDLE_TO_PROVIDER(evd)->evd_free_func)((evd))

#define DAT_EP_CREATE(ia, pz, in_evd, out_evd, connect_evd, attr, ep) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->ep_create_func)((ia), (pz), (in_evd), (out_evd), \
                                                      (connect_evd), (attr), (ep))
#define DAT_EP_CREATE_WITH_SRQ(ia, pz, in_evd, out_evd, connect_evd, srq, attr, ep) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->ep_create_with_srq_func)((ia), (pz), (in_evd), (out_evd), \
                                                               (connect_evd), (srq), (attr), (ep))
#define DAT_EP_QUERY(ep, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_query_func)((ep), (mask), (param))
#define DAT_EP_MODIFY(ep, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_modify_func)((ep), (mask), (param))
#define DAT_EP_CONNECT(ep, ia_addr, conn_qual, timeout, psize, pdata, qos, flags) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_connect_func)((ep), (ia_addr), (conn_qual), (timeout), \
                                                       (psize), (pdata), (qos), (flags))
#define DAT_EP_COMMON_CONNECT(ep, addr, timeout, psize, pdata) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_common_connect_func)((ep), (addr), (timeout), \
                                                              (psize), (pdata))
#define DAT_EP_DUP_CONNECT(ep, dup, timeout, psize, pdata, qos) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_dup_connect_func)((ep), (dup), (timeout), \
                                                           (psize), (pdata), (qos))
#define DAT_EP_DISCONNECT(ep, flags) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_disconnect_func)((ep), (flags))
#define DAT_EP_POST_SEND(ep, size, lbuf, cookie, flags) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_send_func)((ep), (size), (lbuf), (cookie), (flags))
#define DAT_EP_POST_SEND_WITH_INVALIDATE(ep, size, lbuf, cookie, flags, inv_flag, rmr_context) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_send_with_invalidate_func)( \
                (ep), (size), (lbuf), (cookie), (flags), (inv_flag), (rmr_context))
#define DAT_EP_POST_RECV(ep, size, lbuf, cookie, flags) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_recv_func)((ep), (size), (lbuf), (cookie), (flags))
#define DAT_EP_POST_RDMA_READ(ep, size, lbuf, cookie, rbuf, flags) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_rdma_read_func)((ep), (size), (lbuf), (cookie), \
                                                              (rbuf), (flags))
#define DAT_EP_POST_RDMA_READ_TO_RMR(ep, lbuf, cookie, rbuf, flags) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_rdma_read_to_rmr_func)((ep), (lbuf), (cookie), \
                                                                     (rbuf), (flags))
#define DAT_EP_POST_RDMA_WRITE(ep, size, lbuf, cookie, rbuf, flags) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_rdma_write_func)((ep), (size), (lbuf), (cookie), \
                                                               (rbuf), (flags))
#define DAT_EP_GET_STATUS(ep, ep_state, recv_idle, request_idle) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_get_status_func)((ep), (ep_state), (recv_idle), \
                                                          (request_idle))
#define DAT_EP_FREE(ep) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_free_func)((ep))
#define DAT_EP_RESET(ep) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_reset_func)((ep))
#define DAT_EP_RECV_QUERY(ep, nbuf_alloc, buf_span) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_recv_query_func)((ep), (nbuf_alloc), (buf_span))
#define DAT_EP_SET_WATERMARK(ep, soft_wm, hard_wm) \
        (*DAT_HANDLE_TO_PROVIDER(ep)->ep_set_watermark_func)((ep), (soft_wm), (hard_wm))

#define DAT_LMR_QUERY(lmr, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(lmr)->lmr_query_func)((lmr), (mask), (param))
#define DAT_LMR_FREE(lmr) \
        (*DAT_HANDLE_TO_PROVIDER(lmr)->lmr_free_func)((lmr))
#define DAT_LMR_SYNC_RDMA_READ(ia, lbuf, size) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->lmr_sync_rdma_read_func)((ia), (lbuf), (size))
#define DAT_LMR_SYNC_RDMA_WRITE(ia, lbuf, size) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->lmr_sync_rdma_write_func)((ia), (lbuf), (size))

#define DAT_RMR_CREATE(pz, rmr) \
        (*DAT_HANDLE_TO_PROVIDER(pz)->rmr_create_func)((pz), (rmr))
#define DAT_RMR_CREATE_FOR_EP(pz, rmr) \
        (*DAT_HANDLE_TO_PROVIDER(pz)->rmr_create_for_ep_func)((pz), (rmr))
#define DAT_RMR_QUERY(rmr, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(rmr)->rmr_query_func)((rmr), (mask), (param))
#define DAT_RMR_BIND(rmr, lmr, lmr_triplet, mem_priv, va_type, ep, cookie, flags, context) \
        (*DAT_HANDLE_TO_PROVIDER(rmr)->rmr_bind_func)((rmr), (lmr), (lmr_triplet), (mem_priv), \
                                                      (va_type), (ep), (cookie), (flags), (context))
#define DAT_RMR_FREE(rmr) \
        (*DAT_HANDLE_TO_PROVIDER(rmr)->rmr_free_func)((rmr))

#define DAT_PSP_CREATE(ia, conn_qual, evd, flags, handle) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->psp_create_func)((ia), (conn_qual), (evd), (flags), (handle))
#define DAT_PSP_CREATE_ANY(ia, conn_qual, evd, flags, handle) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->psp_create_any_func)((ia), (conn_qual), (evd), (flags), \
                                                           (handle))
#define DAT_PSP_QUERY(psp, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(psp)->psp_query_func)((psp), (mask), (param))
#define DAT_PSP_FREE(psp) \
        (*DAT_HANDLE_TO_PROVIDER(psp)->psp_free_func)((psp))

#define DAT_RSP_CREATE(ia, conn_qual, ep, evd, handle) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->rsp_create_func)((ia), (conn_qual), (ep), (evd), (handle))
#define DAT_RSP_QUERY(rsp, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(rsp)->rsp_query_func)((rsp), (mask), (param))
#define DAT_RSP_FREE(rsp) \
        (*DAT_HANDLE_TO_PROVIDER(rsp)->rsp_free_func)((rsp))

#define DAT_CSP_CREATE(ia, comm, addr, evd, handle) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->csp_create_func)((ia), (comm), (addr), (evd), (handle))
#define DAT_CSP_QUERY(csp, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(csp)->csp_query_func)((csp), (mask), (param))
#define DAT_CSP_FREE(csp) \
        (*DAT_HANDLE_TO_PROVIDER(csp)->csp_free_func)((csp))

#define DAT_PZ_CREATE(ia, pz) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->pz_create_func)((ia), (pz))
#define DAT_PZ_QUERY(pz, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(pz)->pz_query_func)((pz), (mask), (param))
#define DAT_PZ_FREE(pz) \
        (*DAT_HANDLE_TO_PROVIDER(pz)->pz_free_func)((pz))

#define DAT_SRQ_CREATE(ia, pz, attr, srq) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->srq_create_func)((ia), (pz), (attr), (srq))
#define DAT_SRQ_SET_LW(srq, lw) \
        (*DAT_HANDLE_TO_PROVIDER(srq)->srq_set_lw_func)((srq), (lw))
#define DAT_SRQ_FREE(srq) \
        (*DAT_HANDLE_TO_PROVIDER(srq)->srq_free_func)((srq))
#define DAT_SRQ_QUERY(srq, mask, param) \
        (*DAT_HANDLE_TO_PROVIDER(srq)->srq_query_func)((srq), (mask), (param))
#define DAT_SRQ_RESIZE(srq, qsize) \
        (*DAT_HANDLE_TO_PROVIDER(srq)->srq_resize_func)((srq), (qsize))
#define DAT_SRQ_POST_RECV(srq, size, lbuf, cookie) \
        (*DAT_HANDLE_TO_PROVIDER(srq)->srq_post_recv_func)((srq), (size), (lbuf), (cookie))

/* In the reference ABI this one is object-like (a space precedes its
 * "parameter list") and names no existing slot, so it cannot be used; it is
 * reproduced token for token because consumers see it.  The working
 * dispatch is DAT_HANDLE_TO_PROVIDER(ia)->ia_ha_related_func. */
#define DAT_IA_HA_RELATED (ia, name, answer) \
        (*DAT_HANDLE_TO_PROVIDER(ia)->ia_ha_related)((ia), (name), (answer))

#ifdef DAT_EXTENSIONS
#define DAT_HANDLE_EXTENDEDOP(handle, op, args) \
        (*DAT_HANDLE_TO_PROVIDER(handle)->handle_extendedop_func)((handle), (op), (args))
#endif

/* ---- Slot types -----------------------------------------------------------
 * Each slot has exactly the type of the entry point it implements, so the
 * table and the prototypes in dat.h cannot drift apart. */

/* dat_ia_open() as a provider sees it: no version arguments. */
typedef DAT_RETURN (DAT_API *DAT_IA_OPEN_FUNC)(
        IN const DAT_NAME_PTR ia_name,
        IN DAT_COUNT async_evd_min_qlen,
        INOUT DAT_EVD_HANDLE *async_evd_handle,
        OUT DAT_IA_HANDLE *ia_handle);

typedef __typeof__(dat_ia_openv) *DAT_IA_OPENV_FUNC;
typedef __typeof__(dat_ia_close) *DAT_IA_CLOSE_FUNC;
typedef __typeof__(dat_ia_query) *DAT_IA_QUERY_FUNC;

typedef __typeof__(dat_set_consumer_context) *DAT_SET_CONSUMER_CONTEXT_FUNC;
typedef __typeof__(dat_get_consumer_context) *DAT_GET_CONSUMER_CONTEXT_FUNC;
typedef __typeof__(dat_get_handle_type) *DAT_GET_HANDLE_TYPE_FUNC;

typedef __typeof__(dat_cr_query) *DAT_CR_QUERY_FUNC;
typedef __typeof__(dat_cr_accept) *DAT_CR_ACCEPT_FUNC;
typedef __typeof__(dat_cr_reject) *DAT_CR_REJECT_FUNC;
typedef __typeof__(dat_cr_handoff) *DAT_CR_HANDOFF_FUNC;

typedef __typeof__(dat_evd_resize) *DAT_EVD_RESIZE_FUNC;
typedef __typeof__(dat_evd_post_se) *DAT_EVD_POST_SE_FUNC;
typedef __typeof__(dat_evd_dequeue) *DAT_EVD_DEQUEUE_FUNC;
typedef __typeof__(dat_evd_free) *DAT_EVD_FREE_FUNC;
typedef __typeof__(dat_evd_query) *DAT_EVD_QUERY_FUNC;

typedef __typeof__(dat_ep_create) *DAT_EP_CREATE_FUNC;
typedef __typeof__(dat_ep_create_with_srq) *DAT_EP_CREATE_WITH_SRQ_FUNC;
typedef __typeof__(dat_ep_query) *DAT_EP_QUERY_FUNC;
typedef __typeof__(dat_ep_modify) *DAT_EP_MODIFY_FUNC;
typedef __typeof__(dat_ep_connect) *DAT_EP_CONNECT_FUNC;
typedef __typeof__(dat_ep_common_connect) *DAT_EP_COMMON_CONNECT_FUNC;
typedef __typeof__(dat_ep_dup_connect) *DAT_EP_DUP_CONNECT_FUNC;
typedef __typeof__(dat_ep_disconnect) *DAT_EP_DISCONNECT_FUNC;
typedef __typeof__(dat_ep_post_send) *DAT_EP_POST_SEND_FUNC;
typedef __typeof__(dat_ep_post_send_with_invalidate) *DAT_EP_POST_SEND_WITH_INVALIDATE_FUNC;
typedef __typeof__(dat_ep_post_recv) *DAT_EP_POST_RECV_FUNC;
typedef __typeof__(dat_ep_post_rdma_read) *DAT_EP_POST_RDMA_READ_FUNC;
typedef __typeof__(dat_ep_post_rdma_read_to_rmr) *DAT_EP_POST_RDMA_READ_TO_RMR_FUNC;
typedef __typeof__(dat_ep_post_rdma_write) *DAT_EP_POST_RDMA_WRITE_FUNC;
typedef __typeof__(dat_ep_get_status) *DAT_EP_GET_STATUS_FUNC;
typedef __typeof__(dat_ep_free) *DAT_EP_FREE_FUNC;
typedef __typeof__(dat_ep_reset) *DAT_EP_RESET_FUNC;
typedef __typeof__(dat_ep_recv_query) *DAT_EP_RECV_QUERY_FUNC;
typedef __typeof__(dat_ep_set_watermark) *DAT_EP_SET_WATERMARK_FUNC;

typedef __typeof__(dat_lmr_free) *DAT_LMR_FREE_FUNC;
typedef __typeof__(dat_lmr_sync_rdma_read) *DAT_LMR_SYNC_RDMA_READ_FUNC;
typedef __typeof__(dat_lmr_sync_rdma_write) *DAT_LMR_SYNC_RDMA_WRITE_FUNC;

typedef __typeof__(dat_rmr_create) *DAT_RMR_CREATE_FUNC;
typedef __typeof__(dat_rmr_create_for_ep) *DAT_RMR_CREATE_FOR_EP_FUNC;
typedef __typeof__(dat_rmr_query) *DAT_RMR_QUERY_FUNC;
typedef __typeof__(dat_rmr_bind) *DAT_RMR_BIND_FUNC;
typedef __typeof__(dat_rmr_free) *DAT_RMR_FREE_FUNC;

typedef __typeof__(dat_psp_create) *DAT_PSP_CREATE_FUNC;
typedef __typeof__(dat_psp_create_any) *DAT_PSP_CREATE_ANY_FUNC;
typedef __typeof__(dat_psp_query) *DAT_PSP_QUERY_FUNC;
typedef __typeof__(dat_psp_free) *DAT_PSP_FREE_FUNC;

typedef __typeof__(dat_rsp_create) *DAT_RSP_CREATE_FUNC;
typedef __typeof__(dat_rsp_query) *DAT_RSP_QUERY_FUNC;
typedef __typeof__(dat_rsp_free) *DAT_RSP_FREE_FUNC;

typedef __typeof__(dat_csp_create) *DAT_CSP_CREATE_FUNC;
typedef __typeof__(dat_csp_query) *DAT_CSP_QUERY_FUNC;
typedef __typeof__(dat_csp_free) *DAT_CSP_FREE_FUNC;

typedef __typeof__(dat_pz_create) *DAT_PZ_CREATE_FUNC;
typedef __typeof__(dat_pz_query) *DAT_PZ_QUERY_FUNC;
typedef __typeof__(dat_pz_free) *DAT_PZ_FREE_FUNC;

typedef __typeof__(dat_srq_create) *DAT_SRQ_CREATE_FUNC;
typedef __typeof__(dat_srq_set_lw) *DAT_SRQ_SET_LW_FUNC;
typedef __typeof__(dat_srq_free) *DAT_SRQ_FREE_FUNC;
typedef __typeof__(dat_srq_query) *DAT_SRQ_QUERY_FUNC;
typedef __typeof__(dat_srq_resize) *DAT_SRQ_RESIZE_FUNC;
typedef __typeof__(dat_srq_post_recv) *DAT_SRQ_POST_RECV_FUNC;

/* High availability: is the named provider a failover partner of this IA. */
typedef DAT_RETURN (DAT_API *DAT_IA_HA_RELATED_FUNC)(
        IN DAT_IA_HANDLE ia_handle,
        IN const DAT_NAME_PTR provider,
        OUT DAT_BOOLEAN *answer);

#ifdef DAT_EXTENSIONS
/* dat_extension_op() after the registry has collected its arguments. */
typedef DAT_RETURN (DAT_API *DAT_HANDLE_EXTENDEDOP_FUNC)(
        IN DAT_HANDLE handle,
        IN DAT_EXTENDED_OP ext_op,
        IN va_list args);
#endif

#ifdef __cplusplus
}
#endif

#endif /* _DAT_REDIRECTION_H_ */
