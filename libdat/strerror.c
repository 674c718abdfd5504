/* dat_strerror(3DAT): the text of every DAT return type (major) and subtype
 * (minor) of dat_error.h.  Each text starts with the symbolic name, which
 * is what consumers used to DAPL's messages look for, followed by what it
 * means in this implementation. */
#include "config.h"

#include "libdat/libdat.h"

#define MAJOR(code, text) [(code) >> 16] = #code ": " text
#define MSG(code, text) [code] = #code ": " text

/* Majors, indexed by DAT_GET_TYPE(code) >> 16. */
static const char *const major_text[] = {
        MAJOR(DAT_SUCCESS, "the operation succeeded"),
        MAJOR(DAT_ABORT, "the operation was aborted because its IA was closed or its EVD freed"),
        MAJOR(DAT_CONN_QUAL_IN_USE, "the connection qualifier is already in use"),
        MAJOR(DAT_INSUFFICIENT_RESOURCES, "not enough resources to complete the operation"),
        MAJOR(DAT_INTERNAL_ERROR, "the provider failed internally (run with DAT_DBG_TYPE=1 for the reason)"),
        MAJOR(DAT_INVALID_HANDLE, "a handle argument does not name a live object of the expected kind"),
        MAJOR(DAT_INVALID_PARAMETER, "an argument is invalid"),
        MAJOR(DAT_INVALID_STATE, "an object is in a state that does not allow the operation"),
        MAJOR(DAT_LENGTH_ERROR, "a buffer is too small for the data"),
        MAJOR(DAT_MODEL_NOT_SUPPORTED, "the requested model is not supported by the provider"),
        MAJOR(DAT_PROVIDER_NOT_FOUND, "no usable provider for this IA name (dat.conf, datd)"),
        MAJOR(DAT_PRIVILEGES_VIOLATION, "memory access without the needed privileges"),
        MAJOR(DAT_PROTECTION_VIOLATION, "memory access across protection zones or with an invalid memory region"),
        MAJOR(DAT_QUEUE_EMPTY, "the queue holds no event"),
        MAJOR(DAT_QUEUE_FULL, "the queue is full"),
        MAJOR(DAT_TIMEOUT_EXPIRED, "the timeout expired before the operation completed"),
        MAJOR(DAT_PROVIDER_ALREADY_REGISTERED, "a provider is already registered under this name"),
        MAJOR(DAT_PROVIDER_IN_USE, "the provider is in use and cannot be removed now"),
        MAJOR(DAT_INVALID_ADDRESS, "the address is invalid or not reachable"),
        MAJOR(DAT_INTERRUPTED_CALL, "the wait was interrupted"),
        MAJOR(DAT_CONN_QUAL_UNAVAILABLE, "no connection qualifier is available"),
        MAJOR(DAT_RESERVED_LMR, "the reserved LMR cannot be used here (kernel DAT only)"),
        MAJOR(DAT_PORT_IN_USE, "the IP port is already in use"),
        MAJOR(DAT_COMM_NOT_SUPPORTED, "the communicator is not supported"),
};

static const char *const extension_text =
        "DAT_EXTENSION_BASE: an error defined by a DAT extension (this provider supports none)";
static const char *const not_implemented_text =
        "DAT_NOT_IMPLEMENTED: this provider does not implement the operation yet";

/* Minors, indexed by DAT_GET_SUBTYPE(code). */
static const char *const minor_text[] = {
        MSG(DAT_NO_SUBTYPE, "no further detail"),
        MSG(DAT_SUB_INTERRUPTED, "interrupted by a signal or another thread"),
        MSG(DAT_RESOURCE_MEMORY, "out of memory or out of handles"),
        MSG(DAT_RESOURCE_DEVICE, "the device (or datd) refused or ran out of resources"),
        MSG(DAT_RESOURCE_TEP, "no transport endpoint available"),
        MSG(DAT_RESOURCE_TEVD, "no transport event queue available"),
        MSG(DAT_RESOURCE_PROTECTION_DOMAIN, "no protection domain available"),
        MSG(DAT_RESOURCE_MEMORY_REGION, "no memory region available"),
        MSG(DAT_RESOURCE_ERROR_HANDLER, "no error handler available"),
        MSG(DAT_RESOURCE_CREDITS, "no credits left (e.g. RDMA Read as target)"),
        MSG(DAT_RESOURCE_SRQ, "no shared receive queue available"),
        MSG(DAT_INVALID_HANDLE_IA, "the IA handle is invalid"),
        MSG(DAT_INVALID_HANDLE_EP, "the EP handle is invalid"),
        MSG(DAT_INVALID_HANDLE_LMR, "the LMR handle is invalid"),
        MSG(DAT_INVALID_HANDLE_RMR, "the RMR handle is invalid"),
        MSG(DAT_INVALID_HANDLE_PZ, "the PZ handle is invalid"),
        MSG(DAT_INVALID_HANDLE_PSP, "the PSP handle is invalid"),
        MSG(DAT_INVALID_HANDLE_RSP, "the RSP handle is invalid"),
        MSG(DAT_INVALID_HANDLE_CR, "the CR handle is invalid"),
        MSG(DAT_INVALID_HANDLE_CNO, "the CNO handle is invalid"),
        MSG(DAT_INVALID_HANDLE_EVD_CR, "the connection request EVD handle is invalid"),
        MSG(DAT_INVALID_HANDLE_EVD_REQUEST, "the request completion EVD handle is invalid"),
        MSG(DAT_INVALID_HANDLE_EVD_RECV, "the receive completion EVD handle is invalid"),
        MSG(DAT_INVALID_HANDLE_EVD_CONN, "the connection event EVD handle is invalid"),
        MSG(DAT_INVALID_HANDLE_EVD_ASYNC, "the asynchronous event EVD handle is invalid"),
        MSG(DAT_INVALID_HANDLE_SRQ, "the SRQ handle is invalid"),
        MSG(DAT_INVALID_HANDLE_CSP, "the CSP handle is invalid"),
        MSG(DAT_INVALID_HANDLE1, "handle argument 1 is invalid"),
        MSG(DAT_INVALID_HANDLE2, "handle argument 2 is invalid"),
        MSG(DAT_INVALID_HANDLE3, "handle argument 3 is invalid"),
        MSG(DAT_INVALID_HANDLE4, "handle argument 4 is invalid"),
        MSG(DAT_INVALID_HANDLE5, "handle argument 5 is invalid"),
        MSG(DAT_INVALID_HANDLE6, "handle argument 6 is invalid"),
        MSG(DAT_INVALID_HANDLE7, "handle argument 7 is invalid"),
        MSG(DAT_INVALID_HANDLE8, "handle argument 8 is invalid"),
        MSG(DAT_INVALID_HANDLE9, "handle argument 9 is invalid"),
        MSG(DAT_INVALID_HANDLE10, "handle argument 10 is invalid"),
        MSG(DAT_INVALID_ARG1, "argument 1 is invalid"),
        MSG(DAT_INVALID_ARG2, "argument 2 is invalid"),
        MSG(DAT_INVALID_ARG3, "argument 3 is invalid"),
        MSG(DAT_INVALID_ARG4, "argument 4 is invalid"),
        MSG(DAT_INVALID_ARG5, "argument 5 is invalid"),
        MSG(DAT_INVALID_ARG6, "argument 6 is invalid"),
        MSG(DAT_INVALID_ARG7, "argument 7 is invalid"),
        MSG(DAT_INVALID_ARG8, "argument 8 is invalid"),
        MSG(DAT_INVALID_ARG9, "argument 9 is invalid"),
        MSG(DAT_INVALID_ARG10, "argument 10 is invalid"),
        MSG(DAT_INVALID_STATE_EP_UNCONNECTED, "the EP is unconnected"),
        MSG(DAT_INVALID_STATE_EP_ACTCONNPENDING, "the EP has an active connection pending"),
        MSG(DAT_INVALID_STATE_EP_PASSCONNPENDING, "the EP has a passive connection pending"),
        MSG(DAT_INVALID_STATE_EP_TENTCONNPENDING, "the EP has a tentative connection pending"),
        MSG(DAT_INVALID_STATE_EP_CONNECTED, "the EP is connected"),
        MSG(DAT_INVALID_STATE_EP_DISCONNECTED, "the EP is disconnected"),
        MSG(DAT_INVALID_STATE_EP_RESERVED, "the EP is reserved for a service point"),
        MSG(DAT_INVALID_STATE_EP_COMPLPENDING, "the EP has a completion pending"),
        MSG(DAT_INVALID_STATE_EP_DISCPENDING, "the EP has a disconnect pending"),
        MSG(DAT_INVALID_STATE_EP_PROVIDERCONTROL, "the EP is under the provider's control"),
        MSG(DAT_INVALID_STATE_EP_NOTREADY, "the EP is not ready"),
        MSG(DAT_INVALID_STATE_EP_RECV_WATERMARK, "the EP's receive watermark forbids it"),
        MSG(DAT_INVALID_STATE_EP_PZ, "the EP's protection zone forbids it"),
        MSG(DAT_INVALID_STATE_EP_EVD_REQUEST, "the EP has no usable request EVD"),
        MSG(DAT_INVALID_STATE_EP_EVD_RECV, "the EP has no usable receive EVD"),
        MSG(DAT_INVALID_STATE_EP_EVD_CONNECT, "the EP has no usable connection EVD"),
        MSG(DAT_INVALID_STATE_EP_UNCONFIGURED, "the EP is not fully configured"),
        MSG(DAT_INVALID_STATE_EP_UNCONFRESERVED, "the EP is unconfigured and reserved"),
        MSG(DAT_INVALID_STATE_EP_UNCONFPASSIVE, "the EP is unconfigured with a passive connection pending"),
        MSG(DAT_INVALID_STATE_EP_UNCONFTENTATIVE, "the EP is unconfigured with a tentative connection pending"),
        MSG(DAT_INVALID_STATE_CNO_IN_USE, "the CNO is still used by an EVD"),
        MSG(DAT_INVALID_STATE_CNO_DEAD, "the CNO is no longer usable"),
        MSG(DAT_INVALID_STATE_EVD_OPEN, "the EVD is open"),
        MSG(DAT_INVALID_STATE_EVD_ENABLED, "the EVD is enabled"),
        MSG(DAT_INVALID_STATE_EVD_DISABLED, "the EVD is disabled"),
        MSG(DAT_INVALID_STATE_EVD_WAITABLE, "the EVD is waitable"),
        MSG(DAT_INVALID_STATE_EVD_UNWAITABLE, "the EVD is unwaitable"),
        MSG(DAT_INVALID_STATE_EVD_IN_USE, "the EVD is still used by another object"),
        MSG(DAT_INVALID_STATE_EVD_CONFIG_NOTIFY, "the EVD is configured for notification"),
        MSG(DAT_INVALID_STATE_EVD_CONFIG_SOLICITED, "the EVD is configured for solicited events"),
        MSG(DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD, "the EVD is configured with a threshold"),
        MSG(DAT_INVALID_STATE_EVD_WAITER, "another thread already waits on the EVD"),
        MSG(DAT_INVALID_STATE_EVD_ASYNC, "an asynchronous event EVD is required"),
        MSG(DAT_INVALID_STATE_IA_IN_USE, "the IA still has objects the consumer created"),
        MSG(DAT_INVALID_STATE_LMR_IN_USE, "the LMR is still in use"),
        MSG(DAT_INVALID_STATE_LMR_FREE, "the LMR was freed"),
        MSG(DAT_INVALID_STATE_PZ_IN_USE, "the PZ is still used by other objects"),
        MSG(DAT_INVALID_STATE_PZ_FREE, "the PZ was freed"),
        MSG(DAT_INVALID_STATE_SRQ_OPERATIONAL, "the SRQ is operational"),
        MSG(DAT_INVALID_STATE_SRQ_ERROR, "the SRQ is in error"),
        MSG(DAT_INVALID_STATE_SRQ_IN_USE, "the SRQ is still used by EPs"),
        MSG(DAT_INVALID_STATE_SRQ_SHUTDOWN, "the SRQ is shut down"),
        MSG(DAT_PRIVILEGES_READ, "no local read privilege"),
        MSG(DAT_PRIVILEGES_WRITE, "no local write privilege"),
        MSG(DAT_PRIVILEGES_RDMA_READ, "no remote read privilege"),
        MSG(DAT_PRIVILEGES_RDMA_WRITE, "no remote write privilege"),
        MSG(DAT_PROTECTION_READ, "read across protection zones"),
        MSG(DAT_PROTECTION_WRITE, "write across protection zones"),
        MSG(DAT_PROTECTION_RDMA_READ, "RDMA Read across protection zones"),
        MSG(DAT_PROTECTION_RDMA_WRITE, "RDMA Write across protection zones"),
        MSG(DAT_INVALID_ADDRESS_UNSUPPORTED, "the address kind is not usable with DAT (multicast, broadcast)"),
        MSG(DAT_INVALID_ADDRESS_UNREACHABLE, "the address is not reachable from here"),
        MSG(DAT_INVALID_ADDRESS_MALFORMED, "the address is malformed"),
        MSG(DAT_NAME_NOT_REGISTERED, "no provider is registered under this IA name"),
        MSG(DAT_MAJOR_NOT_FOUND, "no provider for this IA name offers the requested major API version"),
        MSG(DAT_MINOR_NOT_FOUND, "no provider for this IA name offers the requested minor API version or newer"),
        MSG(DAT_THREAD_SAFETY_NOT_FOUND, "no provider for this IA name offers the requested thread safety"),
};

static const char *const unknown_major = "unknown DAT return type";
static const char *const unknown_minor = "unknown DAT return subtype";

static const char *major_message(DAT_RETURN type)
{
        DAT_RETURN index = type >> 16;

        if (type == DAT_NOT_IMPLEMENTED)
                return not_implemented_text;
#ifdef DAT_EXTENSIONS
        /* The range from DAT_EXTENSION_BASE up is reserved for extensions. */
        if (type >= DAT_EXTENSION_BASE)
                return extension_text;
#endif
        if (index < ARRAY_SIZE(major_text))
                return major_text[index];
        return NULL;
}

/* dat_strerror(3DAT): DAT_INVALID_PARAMETER when the code has a type or
 * subtype dat_error.h does not define; the texts then say "unknown".  NULL
 * output pointers are accepted and skipped. */
_public_ DAT_RETURN dat_strerror(DAT_RETURN value, const char **major_msg, const char **minor_msg)
{
        const char *major = major_message(DAT_GET_TYPE(value));
        DAT_RETURN subtype = DAT_GET_SUBTYPE(value);
        const char *minor = subtype < ARRAY_SIZE(minor_text) ? minor_text[subtype] : NULL;

        if (major_msg)
                *major_msg = major ? major : unknown_major;
        if (minor_msg)
                *minor_msg = minor ? minor : unknown_minor;
        return major && minor ? DAT_SUCCESS : DAT_ERR_ARG(1);
}
