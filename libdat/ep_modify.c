/* dat_ep_modify(3DAT): change parameters of an Endpoint.
 *
 * All or nothing: every requested parameter is checked first (modifiable
 * at all -> modifiable in the EP's state -> a valid new value), then datd
 * is told the new description, and only then does the EP change.  A
 * refusal at any point leaves the EP, its references and datd as they
 * were.
 *
 * Error codes (the man page's three, with the argument at fault):
 *   mask bits outside DAT_EP_FIELD_ALL   DAT_INVALID_PARAMETER | ARG2
 *   ep_param NULL with a non-zero mask   DAT_INVALID_PARAMETER | ARG3
 *   a parameter that "Cannot be modified" DAT_INVALID_PARAMETER | ARG2
 *   a parameter not modifiable in the EP's current state (or Recv
 *   completion flags with Recvs posted)  DAT_INVALID_STATE, the state's subtype
 *   a new value that is invalid or not supported (beyond the IA's limits,
 *   an EVD of another IA or without the stream of its role, a PZ of
 *   another IA or not the SRQ's, completion flags the seed's lists do not
 *   have, or that the EVDs' other streams forbid, a max_recv_dtos or
 *   max_request_dtos below the Receives or requests the EP has
 *   outstanding, a max_recv_iov below the segments of a Receive posted)
 *                                        DAT_INVALID_PARAMETER | ARG3
 *
 * Outstanding DTOs and smaller queues: the seed lets max_recv_dtos and
 * max_request_dtos change before a connection, when Receives may be
 * posted already, and says nothing of those beyond the new limit.  A limit
 * below what the EP holds now would be broken the moment it took effect
 * (dat_ep_recv_query would report more than max_recv_dtos), and the only
 * alternatives, dropping or flushing DTOs the consumer posted in good
 * faith, lose completions it waits for: the value is invalid for this EP
 * now, DAT_INVALID_PARAMETER naming ep_param, and equal to the count is
 * allowed.  The same holds for max_recv_iov below the segments of a
 * Receive posted (dat_ep_query would report a limit that a Receive the EP
 * holds exceeds): invalid, equal allowed.  max_request_iov needs no such
 * check: no request can be outstanding in a state that lets it change.
 * A limit that may change takes effect at once, with DTOs posted: the next
 * post is held to it, above the old one as below (libdat/dto_queues.c
 * grows the queues, keeping what they hold in order).
 *
 * Receives of the old PZ: "any Receive DTOs currently posted to the
 * Endpoint that do not match the new Protection Zone fail with a
 * DAT_PROTECTION_VIOLATION return."  The modify itself succeeds (the
 * return is not the modify's); each such Receive completes on the recv EVD
 * with DAT_DTO_ERR_LOCAL_PROTECTION when the modify commits, before it
 * returns, in posting order, and the others stay posted in theirs
 * (dto_ep_pz_changed; libdat/dto.h says why at the modify and not when a
 * message comes).  A Receive posted by another thread during the modify
 * is checked against whichever PZ its post read, as with any post racing
 * a change of what it uses.
 * A zero mask changes nothing and succeeds. */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "libdat/dto.h"
#include "libdat/ep.h"
#include "libdat/ep_attr.h"
#include "libdat/ep_events.h"
#include "libdat/evd.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"
#include "libdat/pz.h"
#include "libdat/srq.h"

#define STATE(s) (UINT32_C(1) << DAT_EP_STATE_##s)

/* "Cannot be modified." */
#define NEVER UINT32_C(0)

/* "Can be modified when in Unconnected, Reserved, Passive Connection
 * Pending, and Tentative Connection Pending states": before a connection is
 * requested (active side) or accepted (passive side).  The seed writes
 * "Passive Connection Request Pending" for some parameters and "Passive
 * Connection Pending" for others; DAT has one such state,
 * DAT_EP_STATE_PASSIVE_CONNECTION_PENDING.  DAT 2.0 adds an UNCONFIGURED_
 * twin of each of these four states (an EP that still lacks what it needs
 * to connect); configuring it is what dat_ep_modify is for, so every
 * parameter modifiable in a state is modifiable in its twin. */
#define BEFORE_CONNECTION                                                                  \
        (STATE(UNCONNECTED) | STATE(UNCONFIGURED_UNCONNECTED) | STATE(RESERVED) |         \
         STATE(UNCONFIGURED_RESERVED) | STATE(PASSIVE_CONNECTION_PENDING) |                \
         STATE(UNCONFIGURED_PASSIVE) | STATE(TENTATIVE_CONNECTION_PENDING) |               \
         STATE(UNCONFIGURED_TENTATIVE))

/* Protection Zone: "Can be modified when in Quiescent, Unconnected, and
 * Tentative Connection Pending states.  Protection Zone can be changed only
 * when the Endpoint is in quiescent state.  The only Endpoint states that
 * [are] quiescent [are] DAT_EP_STATE_UNCONNECTED and
 * DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING."  The two sentences agree once
 * "quiescent" is read with the seed's own definition: Unconnected and
 * Tentative Connection Pending (and their unconfigured twins). */
#define QUIESCENT                                                                          \
        (STATE(UNCONNECTED) | STATE(UNCONFIGURED_UNCONNECTED) |                            \
         STATE(TENTATIVE_CONNECTION_PENDING) | STATE(UNCONFIGURED_TENTATIVE))

/* Transport- and provider-specific attributes: "Can be modified when in
 * Quiescent (unconnected) state ... The only guaranteed safe state ... is
 * the quiescent state DAT_EP_STATE_UNCONNECTED."  Here "quiescent" is
 * glossed as Unconnected alone, contradicting the definition under
 * Protection Zone (which adds Tentative Connection Pending).  Decision: the
 * narrower, explicitly named one, "the only guaranteed safe state":
 * Unconnected (and its unconfigured twin). */
#define UNCONNECTED (STATE(UNCONNECTED) | STATE(UNCONFIGURED_UNCONNECTED))

/* srq_soft_hw (DAT 2.0, not in the 1.2 seed) is the soft high watermark
 * that dat_ep_set_watermark(3DAT) sets in "all states of Endpoint": the
 * same value is modifiable here in every state too. */
#define ANY_STATE ((UINT32_C(1) << (DAT_EP_STATE_CONNECTED_MULTI_PATH + 1)) - 1)

/* One row per DAT_EP_FIELD_* bit of DAT 2.0's DAT_EP_PARAM_MASK: the
 * states in which the parameter may change, and where it is in
 * DAT_EP_PARAM.  Rows not in the 1.2 seed:
 * - COMM (the socket triple of DAT 2.0): like the local address it names,
 *   it cannot be modified;
 * - SRQ_HANDLE: dat_ep_create_with_srq(3DAT), "SRQ can not be
 *   disassociated or replaced from created EP": never;
 * - MAX_RDMA_READ_IOV, MAX_RDMA_WRITE_IOV: sized like the other IOV
 *   limits, before a connection;
 * - SRQ_SOFT_HW: any state (above). */
struct ep_modify_rule {
        DAT_EP_PARAM_MASK field;
        uint32_t states;
        size_t offset, size;            /* the member of DAT_EP_PARAM */
};

#define RULE(f, member, st)                                                                \
        { DAT_EP_FIELD_##f, st, offsetof(DAT_EP_PARAM, member),                            \
          sizeof(((DAT_EP_PARAM *)NULL)->member) }

static const struct ep_modify_rule ep_modify_rules[] = {
        RULE(IA_HANDLE, ia_handle, NEVER),
        RULE(EP_STATE, ep_state, NEVER),
        RULE(COMM, comm, NEVER),
        RULE(LOCAL_IA_ADDRESS_PTR, local_ia_address_ptr, NEVER),
        RULE(LOCAL_PORT_QUAL, local_port_qual, NEVER),
        RULE(REMOTE_IA_ADDRESS_PTR, remote_ia_address_ptr, NEVER),
        RULE(REMOTE_PORT_QUAL, remote_port_qual, NEVER),
        RULE(PZ_HANDLE, pz_handle, QUIESCENT),
        RULE(RECV_EVD_HANDLE, recv_evd_handle, BEFORE_CONNECTION),
        RULE(REQUEST_EVD_HANDLE, request_evd_handle, BEFORE_CONNECTION),
        RULE(CONNECT_EVD_HANDLE, connect_evd_handle, BEFORE_CONNECTION),
        RULE(SRQ_HANDLE, srq_handle, NEVER),
        RULE(EP_ATTR_SERVICE_TYPE, ep_attr.service_type, BEFORE_CONNECTION),
        RULE(EP_ATTR_MAX_MESSAGE_SIZE, ep_attr.max_message_size, BEFORE_CONNECTION),
        RULE(EP_ATTR_MAX_RDMA_SIZE, ep_attr.max_rdma_size, BEFORE_CONNECTION),
        RULE(EP_ATTR_QOS, ep_attr.qos, BEFORE_CONNECTION),
        RULE(EP_ATTR_RECV_COMPLETION_FLAGS, ep_attr.recv_completion_flags, BEFORE_CONNECTION),
        RULE(EP_ATTR_REQUEST_COMPLETION_FLAGS, ep_attr.request_completion_flags, BEFORE_CONNECTION),
        RULE(EP_ATTR_MAX_RECV_DTOS, ep_attr.max_recv_dtos, BEFORE_CONNECTION),
        RULE(EP_ATTR_MAX_REQUEST_DTOS, ep_attr.max_request_dtos, BEFORE_CONNECTION),
        RULE(EP_ATTR_MAX_RECV_IOV, ep_attr.max_recv_iov, BEFORE_CONNECTION),
        RULE(EP_ATTR_MAX_REQUEST_IOV, ep_attr.max_request_iov, BEFORE_CONNECTION),
        RULE(EP_ATTR_MAX_RDMA_READ_IN, ep_attr.max_rdma_read_in, BEFORE_CONNECTION),
        RULE(EP_ATTR_MAX_RDMA_READ_OUT, ep_attr.max_rdma_read_out, BEFORE_CONNECTION),
        RULE(EP_ATTR_SRQ_SOFT_HW, ep_attr.srq_soft_hw, ANY_STATE),
        RULE(EP_ATTR_MAX_RDMA_READ_IOV, ep_attr.max_rdma_read_iov, BEFORE_CONNECTION),
        RULE(EP_ATTR_MAX_RDMA_WRITE_IOV, ep_attr.max_rdma_write_iov, BEFORE_CONNECTION),
        RULE(EP_ATTR_NUM_TRANSPORT_ATTR, ep_attr.ep_transport_specific_count, UNCONNECTED),
        RULE(EP_ATTR_TRANSPORT_SPECIFIC_ATTR, ep_attr.ep_transport_specific, UNCONNECTED),
        RULE(EP_ATTR_NUM_PROVIDER_ATTR, ep_attr.ep_provider_specific_count, UNCONNECTED),
        RULE(EP_ATTR_PROVIDER_SPECIFIC_ATTR, ep_attr.ep_provider_specific, UNCONNECTED),
};

_Static_assert(ARRAY_SIZE(ep_modify_rules) == 31, "one rule per bit of DAT_EP_FIELD_ALL");
_Static_assert(DAT_EP_FIELD_ALL == (UINT64_C(1) << 31) - 1, "DAT_EP_PARAM_MASK has 31 fields");

/* "Cannot be modified": the mask asks for the impossible. */
static bool asks_unmodifiable(DAT_EP_PARAM_MASK mask)
{
        for (size_t i = 0; i < ARRAY_SIZE(ep_modify_rules); i++)
                if ((mask & ep_modify_rules[i].field) && ep_modify_rules[i].states == NEVER)
                        return true;
        return false;
}

static bool state_allows(DAT_EP_PARAM_MASK mask, DAT_EP_STATE state)
{
        for (size_t i = 0; i < ARRAY_SIZE(ep_modify_rules); i++)
                if ((mask & ep_modify_rules[i].field) &&
                    !(ep_modify_rules[i].states & (UINT32_C(1) << state)))
                        return false;
        return true;
}

/* want = cur with the masked members taken from the consumer's. */
static void merge_requested(DAT_EP_PARAM *want, const DAT_EP_PARAM *req, DAT_EP_PARAM_MASK mask)
{
        for (size_t i = 0; i < ARRAY_SIZE(ep_modify_rules); i++) {
                const struct ep_modify_rule *r = &ep_modify_rules[i];

                if (mask & r->field)
                        memcpy((char *)want + r->offset, (const char *)req + r->offset, r->size);
        }
}

static bool pz_fits(struct ia *ia, const DAT_EP_PARAM *want)
{
        struct pz *pz = pz_lookup(want->pz_handle);
        struct srq *srq;

        if (!pz || pz->obj.parent != &ia->obj)
                return false;
        /* dat_ia_query: srq_ep_pz_difference_supported is false. */
        srq = srq_lookup(want->srq_handle);
        return !srq || srq->pz == want->pz_handle;
}

#define STREAM_FIELDS                                                                      \
        (DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_REQUEST_EVD_HANDLE |                  \
         DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS |                                      \
         DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS)

static struct ep_streams streams_of(const DAT_EP_PARAM *p)
{
        return (struct ep_streams){ p->recv_evd_handle, p->ep_attr.recv_completion_flags,
                                    p->request_evd_handle, p->ep_attr.request_completion_flags };
}

/* The EP's DTOs outstanding when the modify looked, and the most segments
 * of a Receive posted. */
struct ep_outstanding {
        DAT_COUNT recvs, requests, recv_segments;
};

/* The header's "Outstanding DTOs and smaller queues". */
static bool queues_hold(const DAT_EP_PARAM *want, DAT_EP_PARAM_MASK mask,
                        const struct ep_outstanding *out)
{
        if ((mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS) && want->ep_attr.max_recv_dtos < out->recvs)
                return false;
        if ((mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV) &&
            want->ep_attr.max_recv_iov < out->recv_segments)
                return false;
        return !(mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS) ||
               want->ep_attr.max_request_dtos >= out->requests;
}

/* Whether every requested new value is valid for this EP. */
static bool values_valid(struct ia *ia, const struct ep *ep, const DAT_EP_PARAM *want,
                         DAT_EP_PARAM_MASK mask, const struct ep_outstanding *out)
{
        DAT_IA_ATTR limits;
        DAT_EP_PARAM_MASK bad;
        const struct ep_streams streams = streams_of(want);

        ep_ia_limits(ia, &limits);
        if (ep_attr_check(&limits, &want->ep_attr, mask, ep->srq != DAT_HANDLE_NULL, &bad) != DAT_SUCCESS)
                return false;
        if (!queues_hold(want, mask, out))
                return false;
        if ((mask & DAT_EP_FIELD_PZ_HANDLE) && !pz_fits(ia, want))
                return false;
        if ((mask & DAT_EP_FIELD_RECV_EVD_HANDLE) &&
            !ep_evd_fits(ia, want->recv_evd_handle, DAT_EVD_DTO_FLAG))
                return false;
        if ((mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE) &&
            !ep_evd_fits(ia, want->request_evd_handle, DAT_EVD_DTO_FLAG))
                return false;
        if ((mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE) &&
            !ep_evd_fits(ia, want->connect_evd_handle, DAT_EVD_CONNECTION_FLAG))
                return false;
        return !(mask & STREAM_FIELDS) || ep_streams_compatible(ep, &streams);
}

/* The dependencies an EP holds, old and new. */
struct ep_deps {
        DAT_HANDLE handle[4];
};

static const DAT_HANDLE_TYPE dep_type[4] = {
        DAT_HANDLE_TYPE_PZ, DAT_HANDLE_TYPE_EVD, DAT_HANDLE_TYPE_EVD, DAT_HANDLE_TYPE_EVD,
};

static struct ep_deps deps_of(const DAT_EP_PARAM *p)
{
        return (struct ep_deps){ { p->pz_handle, p->recv_evd_handle, p->request_evd_handle,
                                   p->connect_evd_handle } };
}

/* Releases, of `from`, what `but` does not name in the same role. */
static void release_changed(const struct ep_deps *from, const struct ep_deps *but, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (from->handle[i] != but->handle[i])
                        ep_dep_release(from->handle[i], dep_type[i]);
}

/* Takes references on what changed, all or none. */
static bool hold_changed(const struct ep_deps *now, const struct ep_deps *want)
{
        for (size_t i = 0; i < ARRAY_SIZE(want->handle); i++) {
                if (now->handle[i] == want->handle[i] || ep_dep_hold(want->handle[i], dep_type[i]))
                        continue;
                release_changed(want, now, i);
                return false;
        }
        return true;
}

/* Applies want to an EP (the real one, or a copy to describe to datd). */
static void apply(struct ep *ep, const DAT_EP_PARAM *want, DAT_EP_PARAM_MASK mask)
{
        ep->pz = want->pz_handle;
        ep->recv_evd = want->recv_evd_handle;
        ep->request_evd = want->request_evd_handle;
        ep->connect_evd = want->connect_evd_handle;
        ep->attr = want->ep_attr;
        if (mask & DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW) {
                /* dat_ep_set_watermark(3DAT): a new setting arms it again. */
                ep->soft_hw_armed = want->ep_attr.srq_soft_hw != DAT_WATERMARK_INFINITE;
        }
        /* A provider-created EP leaves DAT 2.0's unconfigured twin of
         * Tentative Connection Pending once it has what a connection needs:
         * configuring it is what the unconfigured state waits for.  Changed
         * here, with the rest, so that datd is told the same state. */
        if (ep->provider_made && ep->state == DAT_EP_STATE_UNCONFIGURED_TENTATIVE &&
            ep_provider_configured(ep))
                ep->state = DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
}

/* datd first, then the EP; references move only on success. */
static DAT_RETURN commit(struct ep *ep, const DAT_EP_PARAM *cur, const DAT_EP_PARAM *want,
                         DAT_EP_PARAM_MASK mask)
{
        const struct ep_deps now = deps_of(cur), next_deps = deps_of(want);
        struct ep next;
        DAT_RETURN ret;

        if (!hold_changed(&now, &next_deps))
                return DAT_ERR_ARG(3);  /* a new PZ or EVD is being freed */
        dat_object_lock();
        next = *ep;
        dat_object_unlock();
        apply(&next, want, mask);
        ret = ep_update_datd(&next);
        if (ret != DAT_SUCCESS) {
                release_changed(&next_deps, &now, ARRAY_SIZE(now.handle));
                return ret;
        }
        dat_object_lock();
        apply(ep, want, mask);
        dat_object_unlock();
        if (mask & STREAM_FIELDS) {
                const struct ep_streams old_streams = streams_of(cur), new_streams = streams_of(want);

                ep_streams_detach(&old_streams);
                ep_streams_attach(&new_streams);
        }
        release_changed(&now, &next_deps, ARRAY_SIZE(now.handle));
        /* The header's "Receives of the old PZ". */
        if (cur->pz_handle != want->pz_handle)
                dto_ep_pz_changed(ep);
        if (mask & DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW)
                ep_check_watermarks(ep);
        return DAT_SUCCESS;
}

/* The handle a modify of another provider's EP hands it in the field of
 * mask bit `field` (foreign.h): none where the mask leaves it alone. */
static DAT_HANDLE modified_handle(const DAT_EP_PARAM *p, DAT_EP_PARAM_MASK mask,
                                  DAT_EP_PARAM_MASK field)
{
        if (!p || !(mask & field))
                return DAT_HANDLE_NULL;
        switch (field) {
        case DAT_EP_FIELD_PZ_HANDLE:
                return p->pz_handle;
        case DAT_EP_FIELD_RECV_EVD_HANDLE:
                return p->recv_evd_handle;
        case DAT_EP_FIELD_REQUEST_EVD_HANDLE:
                return p->request_evd_handle;
        case DAT_EP_FIELD_CONNECT_EVD_HANDLE:
                return p->connect_evd_handle;
        default:
                return p->srq_handle;
        }
}

_public_ DAT_RETURN dat_ep_modify(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK ep_param_mask,
                                  const DAT_EP_PARAM *ep_param)
{
        FOREIGN_DISPATCH_GUARDED(ep_handle,
                                 (5, modified_handle(ep_param, ep_param_mask,
                                                     DAT_EP_FIELD_PZ_HANDLE),
                                  DAT_INVALID_HANDLE_PZ,
                                  modified_handle(ep_param, ep_param_mask,
                                                  DAT_EP_FIELD_RECV_EVD_HANDLE),
                                  DAT_INVALID_HANDLE_EVD_RECV,
                                  modified_handle(ep_param, ep_param_mask,
                                                  DAT_EP_FIELD_REQUEST_EVD_HANDLE),
                                  DAT_INVALID_HANDLE_EVD_REQUEST,
                                  modified_handle(ep_param, ep_param_mask,
                                                  DAT_EP_FIELD_CONNECT_EVD_HANDLE),
                                  DAT_INVALID_HANDLE_EVD_CONN,
                                  modified_handle(ep_param, ep_param_mask,
                                                  DAT_EP_FIELD_SRQ_HANDLE),
                                  DAT_INVALID_HANDLE_SRQ),
                                 ep_modify_func, ep_handle, ep_param_mask, ep_param);
        DAT_EP_PARAM cur, want;
        struct ep_outstanding out;
        struct ep *ep;
        DAT_RETURN ret = ep_param_call(ep_handle, ep_param_mask, ep_param, &ep);

        if (ret != DAT_SUCCESS || !ep)
                return ret;
        if (asks_unmodifiable(ep_param_mask))
                return DAT_ERR_ARG(2);

        dat_object_lock();
        ep_fill_param(ep, &cur);
        out = (struct ep_outstanding){ ep->recv_outstanding, ep->request_outstanding, 0 };
        dat_object_unlock();
        /* An SRQ EP's max_recv_iov stays the SRQ's (below), and it has no
         * Receives of its own. */
        if ((ep_param_mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV) && !ep->srq)
                out.recv_segments = dto_ep_posted_recv_segments(ep);
        if (!state_allows(ep_param_mask, cur.ep_state))
                return ep_invalid_state(cur.ep_state);
        /* Recv Completion Flags: "... but before posting of any Recvs".
         * Read as: not while Recvs posted to the EP are outstanding (once
         * they completed there is nothing the flags could still apply to;
         * "ever posted" would forbid it for good, against the state list).
         * The state the EP is in forbids it: DAT_INVALID_STATE. */
        if ((ep_param_mask & DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS) && out.recvs > 0)
                return ep_invalid_state(cur.ep_state);

        want = cur;
        merge_requested(&want, ep_param, ep_param_mask);
        if (!values_valid(ep_ia(ep), ep, &want, ep_param_mask, &out))
                return DAT_ERR_ARG(3);
        /* Valid means no named attribute (ep_attr_check): keep no pointer of
         * the consumer's.  An SRQ EP's max_recv_iov stays the SRQ's
         * (dat_ep_create_with_srq(3DAT): it is ignored). */
        want.ep_attr.ep_transport_specific = NULL;
        want.ep_attr.ep_provider_specific = NULL;
        if (ep->srq)
                want.ep_attr.max_recv_iov = cur.ep_attr.max_recv_iov;
        return commit(ep, &cur, &want, ep_param_mask);
}
