/* Endpoint attributes: defaults, limits, completion flags and EVD roles
 * (see ep_attr.h). */
#include "config.h"

#include "libdat/ep_attr.h"

#include "libdat/ep.h"
#include "libdat/evd.h"
#include "libdat/ia.h"

/* The defaults of an EP created with NULL attributes.  dat_ep_create(3DAT)
 * asks for "reasonable defaults" the consumer can post with at once:
 * - messages and RDMA as large as the IA allows (a limit, not a reservation);
 * - 64 Recvs and 64 requests outstanding, with 4 segments each (RDMA too):
 *   enough for request/response consumers, and 64 + 64 completions fit the
 *   smallest EVD a consumer is likely to make;
 * - 0 outstanding RDMA Reads either way, as dat_ep_create_with_srq(3DAT)
 *   recommends, so that connection setup never fails for lack of them;
 * - no SRQ soft high watermark, default completion flags, best effort RC. */
#define EP_DEFAULT_DTOS 64
#define EP_DEFAULT_IOV 4

static DAT_COUNT min_count(DAT_COUNT a, DAT_COUNT b)
{
        return a < b ? a : b;
}

void ep_ia_limits(struct ia *ia, DAT_IA_ATTR *limits)
{
        /* Cannot fail: the handle is the live IA's own. */
        (void)dat_ia_query(ia->obj.handle, NULL, DAT_IA_FIELD_ALL, limits, 0, NULL);
}

void ep_attr_defaults(const DAT_IA_ATTR *limits, DAT_EP_ATTR *attr)
{
        *attr = (DAT_EP_ATTR){
                .service_type = DAT_SERVICE_TYPE_RC,
                .max_message_size = limits->max_message_size,
                .max_rdma_size = limits->max_rdma_size,
                .qos = DAT_QOS_BEST_EFFORT,
                .recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG,
                .request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG,
                .max_recv_dtos = min_count(EP_DEFAULT_DTOS, limits->max_dto_per_ep),
                .max_request_dtos = min_count(EP_DEFAULT_DTOS, limits->max_dto_per_ep),
                .max_recv_iov = min_count(EP_DEFAULT_IOV, limits->max_iov_segments_per_dto),
                .max_request_iov = min_count(EP_DEFAULT_IOV, limits->max_iov_segments_per_dto),
                .max_rdma_read_in = 0,
                .max_rdma_read_out = 0,
                .srq_soft_hw = DAT_HW_DEFAULT,
                .max_rdma_read_iov = min_count(EP_DEFAULT_IOV, limits->max_iov_segments_per_rdma_read),
                .max_rdma_write_iov = min_count(EP_DEFAULT_IOV, limits->max_iov_segments_per_rdma_write),
        };
}

/* dat_ep_modify(3DAT), Recv Completion Flags: one of
 * DAT_COMPLETION_NOTIFICATION_SUPPRESS_FLAG (DAT 1.1's name of
 * DAT_COMPLETION_UNSIGNALLED_FLAG), DAT_COMPLETION_SOLICITED_WAIT_FLAG or
 * DAT_COMPLETION_EVD_THRESHOLD_FLAG; "Recv posting does not support
 * DAT_COMPLETION_SUPPRESS_FLAG or DAT_COMPLETION_BARRIER_FENCE_FLAG".
 * DAT_COMPLETION_DEFAULT_FLAG (none of them) is the default. */
static bool recv_flags_valid(DAT_COMPLETION_FLAGS f)
{
        return f == DAT_COMPLETION_DEFAULT_FLAG || f == DAT_COMPLETION_UNSIGNALLED_FLAG ||
               f == DAT_COMPLETION_SOLICITED_WAIT_FLAG || f == DAT_COMPLETION_EVD_THRESHOLD_FLAG;
}

/* dat_ep_modify(3DAT), Request Completion Flags: DAT_COMPLETION_UNSIGNALLED_FLAG
 * or DAT_COMPLETION_EVD_THRESHOLD_FLAG; suppress, solicited wait and
 * barrier fence are per-post flags every request supports, not EP
 * attributes. */
static bool request_flags_valid(DAT_COMPLETION_FLAGS f)
{
        return f == DAT_COMPLETION_DEFAULT_FLAG || f == DAT_COMPLETION_UNSIGNALLED_FLAG ||
               f == DAT_COMPLETION_EVD_THRESHOLD_FLAG;
}

static bool in_range(DAT_COUNT v, DAT_COUNT max)
{
        return v >= 0 && v <= max;
}

#define ALL_QOS (DAT_QOS_BEST_EFFORT | DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY | \
                 DAT_QOS_ECONOMY | DAT_QOS_PREMIUM)

/* Whether the field is acceptable; *model set when it is well-formed but
 * not offered (dat_ep_create(3DAT): DAT_MODEL_NOT_SUPPORTED). */
static bool field_valid(const DAT_IA_ATTR *lim, const DAT_EP_ATTR *a, DAT_EP_PARAM_MASK field,
                        bool with_srq, bool *model)
{
        switch (field) {
        case DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE:
                /* Reliable connections are the only service type there is. */
                *model = true;
                return a->service_type == DAT_SERVICE_TYPE_RC;
        case DAT_EP_FIELD_EP_ATTR_QOS:
                /* dat_ia_query reports dat_qos_supported = DAT_QOS_BEST_EFFORT. */
                *model = (a->qos & ~ALL_QOS) == 0;
                return a->qos == DAT_QOS_BEST_EFFORT;
        case DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE:
                return a->max_message_size <= lim->max_message_size;
        case DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE:
                return a->max_rdma_size <= lim->max_rdma_size;
        case DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS:
                return recv_flags_valid(a->recv_completion_flags);
        case DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS:
                return request_flags_valid(a->request_completion_flags);
        case DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS:
                return in_range(a->max_recv_dtos, lim->max_dto_per_ep);
        case DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS:
                return in_range(a->max_request_dtos, lim->max_dto_per_ep);
        case DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV:
                /* dat_ep_create_with_srq(3DAT): "max_recv_iov that is ignored". */
                return with_srq || in_range(a->max_recv_iov, lim->max_iov_segments_per_dto);
        case DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV:
                return in_range(a->max_request_iov, lim->max_iov_segments_per_dto);
        case DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN:
                return in_range(a->max_rdma_read_in, lim->max_rdma_read_per_ep_in);
        case DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT:
                return in_range(a->max_rdma_read_out, lim->max_rdma_read_per_ep_out);
        case DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW:
                /* dat_ep_set_watermark(3DAT): a count, or DAT_WATERMARK_INFINITE. */
                return a->srq_soft_hw == DAT_WATERMARK_INFINITE || a->srq_soft_hw >= 0;
        case DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV:
                return in_range(a->max_rdma_read_iov, lim->max_iov_segments_per_rdma_read);
        case DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV:
                return in_range(a->max_rdma_write_iov, lim->max_iov_segments_per_rdma_write);
        case DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR:
        case DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR:
                /* No transport-specific EP attribute exists: none can be set. */
                return a->ep_transport_specific_count == 0;
        case DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR:
        case DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR:
                /* Nor a provider-specific one. */
                return a->ep_provider_specific_count == 0;
        default:
                return false;
        }
}

DAT_RETURN ep_attr_check(const DAT_IA_ATTR *limits, const DAT_EP_ATTR *attr, DAT_EP_PARAM_MASK mask,
                         bool with_srq, DAT_EP_PARAM_MASK *bad)
{
        mask &= DAT_EP_FIELD_EP_ATTR_ALL;
        for (DAT_EP_PARAM_MASK field = 1; field <= mask; field <<= 1) {
                bool model = false;

                if (!(mask & field) || field_valid(limits, attr, field, with_srq, &model))
                        continue;
                *bad = field;
                return model ? DAT_MODEL_NOT_SUPPORTED : DAT_INVALID_PARAMETER;
        }
        return DAT_SUCCESS;
}

bool ep_evd_fits(struct ia *ia, DAT_EVD_HANDLE handle, DAT_EVD_FLAGS need)
{
        struct evd *evd;

        if (handle == DAT_HANDLE_NULL)
                return true;
        evd = evd_lookup(handle);
        return evd && evd->obj.parent == &ia->obj && (evd->flags & need);
}

bool ep_dep_hold(DAT_HANDLE handle, DAT_HANDLE_TYPE type)
{
        struct dat_object *obj;
        bool ok;

        if (handle == DAT_HANDLE_NULL)
                return true;
        dat_object_lock();
        obj = dat_object_lookup(handle, type);
        ok = obj && !obj->closing;
        if (ok)
                obj->users++;
        dat_object_unlock();
        return ok;
}

void ep_dep_release(DAT_HANDLE handle, DAT_HANDLE_TYPE type)
{
        struct dat_object *obj;

        if (handle == DAT_HANDLE_NULL)
                return;
        dat_object_lock();
        obj = dat_object_lookup(handle, type);
        if (obj && obj->users > 0)
                obj->users--;
        dat_object_unlock();
}

/* The streams an EVD takes besides DTO and RMR bind completions. */
#define NON_DTO_STREAMS (DAT_EVD_SOFTWARE_FLAG | DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG | \
                         DAT_EVD_ASYNC_FLAG)

/* dat_ep_create(3DAT), USAGE: "If request_evd_handle (recv_evd_handle) is
 * used for an EVD that is fed by any event stream other than DTO or RMR
 * completion event streams, only DAT_COMPLETION_THRESHOLD is valid": the
 * flags that change how completions are signalled (unsignalled, solicited
 * wait) need an EVD of DTO/RMR streams only. */
static bool stream_fits_evd(DAT_EVD_HANDLE handle, DAT_COMPLETION_FLAGS flags)
{
        struct evd *evd;

        if (handle == DAT_HANDLE_NULL || flags == DAT_COMPLETION_DEFAULT_FLAG ||
            flags == DAT_COMPLETION_EVD_THRESHOLD_FLAG)
                return true;
        evd = evd_lookup(handle);
        return evd && !(evd->flags & NON_DTO_STREAMS);
}

/* Two streams conflict when they share an EVD with different flags
 * (dat_ep_create(3DAT), USAGE: "The Consumer cannot specify a
 * request_evd_handle (recv_evd_handle) with Request Completion Flags (Recv
 * Completion Flags) that do not match the other Endpoint Completion Flags
 * for the DTO/RMR completion streams that use the same EVD"). */
static bool streams_conflict(DAT_EVD_HANDLE a, DAT_COMPLETION_FLAGS fa, DAT_EVD_HANDLE b,
                             DAT_COMPLETION_FLAGS fb)
{
        return a != DAT_HANDLE_NULL && a == b && fa != fb;
}

/* Whether a stream with flags may join the EVD named by handle: the
 * streams already on it (self's own not counted) all carry the EVD's
 * stream_flags.  Under dat_object_lock(). */
static bool stream_agrees_locked(const struct ep *self, DAT_EVD_HANDLE handle,
                                 DAT_COMPLETION_FLAGS flags)
{
        struct evd *evd;
        unsigned others;

        if (handle == DAT_HANDLE_NULL)
                return true;
        evd = evd_lookup(handle);
        if (!evd)
                /* Its handle is checked elsewhere (DAT_INVALID_HANDLE). */
                return true;
        others = evd->stream_users;
        if (self && self->recv_evd == handle && others > 0)
                others--;
        if (self && self->request_evd == handle && others > 0)
                others--;
        return others == 0 || evd->stream_flags == flags;
}

bool ep_streams_compatible(const struct ep *self, const struct ep_streams *s)
{
        bool ok;

        if (!stream_fits_evd(s->recv_evd, s->recv_flags) ||
            !stream_fits_evd(s->request_evd, s->request_flags) ||
            streams_conflict(s->recv_evd, s->recv_flags, s->request_evd, s->request_flags))
                return false;
        dat_object_lock();
        ok = stream_agrees_locked(self, s->recv_evd, s->recv_flags) &&
             stream_agrees_locked(self, s->request_evd, s->request_flags);
        dat_object_unlock();
        return ok;
}
