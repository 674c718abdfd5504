/* Endpoint attributes and associations: the provider's defaults, and the
 * checks that dat_ep_create, dat_ep_create_with_srq and dat_ep_modify
 * share (limits of the IA, completion flags, EVD roles). */
#ifndef DATD_LIBDAT_EP_ATTR_H
#define DATD_LIBDAT_EP_ATTR_H

#include "libdat/handle.h"

struct ia;
struct ep;

/* The limits EP attributes are checked against: what dat_ia_query(3DAT)
 * reports for the IA (the transport's design limits and datd's quota). */
void ep_ia_limits(struct ia *ia, DAT_IA_ATTR *limits);

/* dat_ep_create(3DAT) with NULL attributes: the provider's defaults. */
void ep_attr_defaults(const DAT_IA_ATTR *limits, DAT_EP_ATTR *attr);

/* Checks the attribute fields named by mask (DAT_EP_FIELD_EP_ATTR_* bits).
 * Returns DAT_SUCCESS, or the bare type DAT_MODEL_NOT_SUPPORTED (a service
 * type or QoS this provider does not offer) or DAT_INVALID_PARAMETER, with
 * *bad set to the field at fault.  with_srq: max_recv_iov is ignored
 * (dat_ep_create_with_srq(3DAT)). */
DAT_RETURN ep_attr_check(const DAT_IA_ATTR *limits, const DAT_EP_ATTR *attr, DAT_EP_PARAM_MASK mask,
                         bool with_srq, DAT_EP_PARAM_MASK *bad);

/* Whether handle is DAT_HANDLE_NULL or an EVD of ia that takes the stream
 * need (DAT_EVD_DTO_FLAG, DAT_EVD_CONNECTION_FLAG). */
bool ep_evd_fits(struct ia *ia, DAT_EVD_HANDLE handle, DAT_EVD_FLAGS need);

/* Takes / drops one `users` reference, for an EP or SRQ that depends on
 * it, on the object of the given type a handle names; DAT_HANDLE_NULL is
 * nothing to hold.  ep_dep_hold() fails when there is no such object or it
 * is being freed; ep_dep_release() does nothing when the object is gone
 * already (an abrupt dat_ia_close() destroys children newest first, and a
 * dependency may be newer than the EP after dat_ep_modify). */
bool ep_dep_hold(DAT_HANDLE handle, DAT_HANDLE_TYPE type);
void ep_dep_release(DAT_HANDLE handle, DAT_HANDLE_TYPE type);

/* The DTO completion streams of an EP: where they go and with which flags. */
struct ep_streams {
        DAT_EVD_HANDLE recv_evd;
        DAT_COMPLETION_FLAGS recv_flags;
        DAT_EVD_HANDLE request_evd;
        DAT_COMPLETION_FLAGS request_flags;
};

/* dat_ep_create(3DAT), USAGE: the streams s would add are compatible with
 * each other and with the streams other EPs already have on the same EVDs
 * (self excluded: the EP being modified).  O(1): each EVD keeps the count
 * and the shared flags of its streams.  Takes dat_object_lock. */
bool ep_streams_compatible(const struct ep *self, const struct ep_streams *s);

#endif
