/* dat_error.h: DAT_RETURN, the status every DAT call returns.
 *
 * A DAT_RETURN packs three things into 32 bits:
 *   bits 31..30  class   (error, warning, or success when both are clear)
 *   bits 29..16  type    (DAT_RETURN_TYPE: what went wrong)
 *   bits 15..0   subtype (DAT_RETURN_SUBTYPE: which argument/handle/state)
 * Callers usually test DAT_GET_TYPE(ret) against a DAT_RETURN_TYPE value;
 * the man pages (e.g. dat_ep_modify(3DAT)) name only types. */
#ifndef _DAT_ERROR_H_
#define _DAT_ERROR_H_

#include <dat2/udat_config.h>
#include <dat2/dat_platform_specific.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DAT_CLASS_ERROR 0x80000000
#define DAT_CLASS_WARNING 0x40000000
#define DAT_CLASS_SUCCESS 0x00000000

#define DAT_TYPE_MASK 0x3fff0000
#define DAT_SUBTYPE_MASK 0x0000FFFF

#define DAT_IS_WARNING(status) ((DAT_UINT32)(status) & DAT_CLASS_WARNING)
#define DAT_GET_TYPE(status) ((DAT_UINT32)(status) & DAT_TYPE_MASK)
#define DAT_GET_SUBTYPE(status) ((DAT_UINT32)(status) & DAT_SUBTYPE_MASK)

/* The type field, already shifted into place. */
typedef enum dat_return_type {
        DAT_SUCCESS                     = 0x00000000,
        DAT_ABORT                       = 0x00010000,
        DAT_CONN_QUAL_IN_USE            = 0x00020000,
        DAT_INSUFFICIENT_RESOURCES      = 0x00030000,
        DAT_INTERNAL_ERROR              = 0x00040000,
        DAT_INVALID_HANDLE              = 0x00050000,
        DAT_INVALID_PARAMETER           = 0x00060000,
        DAT_INVALID_STATE               = 0x00070000,
        DAT_LENGTH_ERROR                = 0x00080000,
        DAT_MODEL_NOT_SUPPORTED         = 0x00090000,
        DAT_PROVIDER_NOT_FOUND          = 0x000A0000,
        DAT_PRIVILEGES_VIOLATION        = 0x000B0000,
        DAT_PROTECTION_VIOLATION        = 0x000C0000,
        DAT_QUEUE_EMPTY                 = 0x000D0000,
        DAT_QUEUE_FULL                  = 0x000E0000,
        DAT_TIMEOUT_EXPIRED             = 0x000F0000,
        DAT_PROVIDER_ALREADY_REGISTERED = 0x00100000,
        DAT_PROVIDER_IN_USE             = 0x00110000,
        DAT_INVALID_ADDRESS             = 0x00120000,
        DAT_INTERRUPTED_CALL            = 0x00130000,
        DAT_CONN_QUAL_UNAVAILABLE       = 0x00140000,
        /* DAT 2.0 additions */
        DAT_RESERVED_LMR                = 0x00150000,
        DAT_PORT_IN_USE                 = 0x00160000,
        DAT_COMM_NOT_SUPPORTED          = 0x00170000,
#ifdef DAT_EXTENSIONS
        /* first type an extension (e.g. DAT_IB_ERR) may define */
        DAT_EXTENSION_BASE              = 0x10000000,
#endif
        DAT_NOT_IMPLEMENTED             = 0x3FFF0000
} DAT_RETURN_TYPE;

/* Plain 32 bits rather than the enum: class and subtype bits are or'ed in. */
typedef DAT_UINT32 DAT_RETURN;

/* DAT 1.1 spelling, kept for old consumers. */
#define DAT_NAME_NOT_FOUND DAT_PROVIDER_NOT_FOUND

/* The subtype field: consecutive values from 0, in this exact order. */
typedef enum dat_return_subtype {
        DAT_NO_SUBTYPE,
        DAT_SUB_INTERRUPTED,

        /* DAT_INSUFFICIENT_RESOURCES: which resource ran out */
        DAT_RESOURCE_MEMORY,
        DAT_RESOURCE_DEVICE,
        DAT_RESOURCE_TEP,
        DAT_RESOURCE_TEVD,
        DAT_RESOURCE_PROTECTION_DOMAIN,
        DAT_RESOURCE_MEMORY_REGION,
        DAT_RESOURCE_ERROR_HANDLER,
        DAT_RESOURCE_CREDITS,
        DAT_RESOURCE_SRQ,

        /* DAT_INVALID_HANDLE: which kind of handle was bad */
        DAT_INVALID_HANDLE_IA,
        DAT_INVALID_HANDLE_EP,
        DAT_INVALID_HANDLE_LMR,
        DAT_INVALID_HANDLE_RMR,
        DAT_INVALID_HANDLE_PZ,
        DAT_INVALID_HANDLE_PSP,
        DAT_INVALID_HANDLE_RSP,
        DAT_INVALID_HANDLE_CR,
        DAT_INVALID_HANDLE_CNO,
        DAT_INVALID_HANDLE_EVD_CR,
        DAT_INVALID_HANDLE_EVD_REQUEST,
        DAT_INVALID_HANDLE_EVD_RECV,
        DAT_INVALID_HANDLE_EVD_CONN,
        DAT_INVALID_HANDLE_EVD_ASYNC,
        DAT_INVALID_HANDLE_SRQ,
        DAT_INVALID_HANDLE_CSP,
        /* ... or by argument position */
        DAT_INVALID_HANDLE1,
        DAT_INVALID_HANDLE2,
        DAT_INVALID_HANDLE3,
        DAT_INVALID_HANDLE4,
        DAT_INVALID_HANDLE5,
        DAT_INVALID_HANDLE6,
        DAT_INVALID_HANDLE7,
        DAT_INVALID_HANDLE8,
        DAT_INVALID_HANDLE9,
        DAT_INVALID_HANDLE10,

        /* DAT_INVALID_PARAMETER: argument position */
        DAT_INVALID_ARG1,
        DAT_INVALID_ARG2,
        DAT_INVALID_ARG3,
        DAT_INVALID_ARG4,
        DAT_INVALID_ARG5,
        DAT_INVALID_ARG6,
        DAT_INVALID_ARG7,
        DAT_INVALID_ARG8,
        DAT_INVALID_ARG9,
        DAT_INVALID_ARG10,

        /* DAT_INVALID_STATE: the state that forbade the call */
        DAT_INVALID_STATE_EP_UNCONNECTED,
        DAT_INVALID_STATE_EP_ACTCONNPENDING,
        DAT_INVALID_STATE_EP_PASSCONNPENDING,
        DAT_INVALID_STATE_EP_TENTCONNPENDING,
        DAT_INVALID_STATE_EP_CONNECTED,
        DAT_INVALID_STATE_EP_DISCONNECTED,
        DAT_INVALID_STATE_EP_RESERVED,
        DAT_INVALID_STATE_EP_COMPLPENDING,
        DAT_INVALID_STATE_EP_DISCPENDING,
        DAT_INVALID_STATE_EP_PROVIDERCONTROL,
        DAT_INVALID_STATE_EP_NOTREADY,
        DAT_INVALID_STATE_EP_RECV_WATERMARK,
        DAT_INVALID_STATE_EP_PZ,
        DAT_INVALID_STATE_EP_EVD_REQUEST,
        DAT_INVALID_STATE_EP_EVD_RECV,
        DAT_INVALID_STATE_EP_EVD_CONNECT,
        DAT_INVALID_STATE_EP_UNCONFIGURED,
        DAT_INVALID_STATE_EP_UNCONFRESERVED,
        DAT_INVALID_STATE_EP_UNCONFPASSIVE,
        DAT_INVALID_STATE_EP_UNCONFTENTATIVE,
        DAT_INVALID_STATE_CNO_IN_USE,
        DAT_INVALID_STATE_CNO_DEAD,
        DAT_INVALID_STATE_EVD_OPEN,
        DAT_INVALID_STATE_EVD_ENABLED,
        DAT_INVALID_STATE_EVD_DISABLED,
        DAT_INVALID_STATE_EVD_WAITABLE,
        DAT_INVALID_STATE_EVD_UNWAITABLE,
        DAT_INVALID_STATE_EVD_IN_USE,
        DAT_INVALID_STATE_EVD_CONFIG_NOTIFY,
        DAT_INVALID_STATE_EVD_CONFIG_SOLICITED,
        DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD,
        DAT_INVALID_STATE_EVD_WAITER,
        DAT_INVALID_STATE_EVD_ASYNC,
        DAT_INVALID_STATE_IA_IN_USE,
        DAT_INVALID_STATE_LMR_IN_USE,
        DAT_INVALID_STATE_LMR_FREE,
        DAT_INVALID_STATE_PZ_IN_USE,
        DAT_INVALID_STATE_PZ_FREE,
        DAT_INVALID_STATE_SRQ_OPERATIONAL,
        DAT_INVALID_STATE_SRQ_ERROR,
        DAT_INVALID_STATE_SRQ_IN_USE,
        DAT_INVALID_STATE_SRQ_SHUTDOWN,

        /* DAT_PRIVILEGES_VIOLATION / DAT_PROTECTION_VIOLATION */
        DAT_PRIVILEGES_READ,
        DAT_PRIVILEGES_WRITE,
        DAT_PRIVILEGES_RDMA_READ,
        DAT_PRIVILEGES_RDMA_WRITE,
        DAT_PROTECTION_READ,
        DAT_PROTECTION_WRITE,
        DAT_PROTECTION_RDMA_READ,
        DAT_PROTECTION_RDMA_WRITE,

        /* DAT_INVALID_ADDRESS */
        DAT_INVALID_ADDRESS_UNSUPPORTED,
        DAT_INVALID_ADDRESS_UNREACHABLE,
        DAT_INVALID_ADDRESS_MALFORMED,

        /* DAT_PROVIDER_NOT_FOUND: what did not match in dat_ia_open() */
        DAT_NAME_NOT_REGISTERED,
        DAT_MAJOR_NOT_FOUND,
        DAT_MINOR_NOT_FOUND,
        DAT_THREAD_SAFETY_NOT_FOUND
} DAT_RETURN_SUBTYPE;

#ifdef __cplusplus
}
#endif

#endif /* _DAT_ERROR_H_ */
