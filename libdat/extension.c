/* dat_extension_op: the DAT 2.0 InfiniBand extensions (dat_ib_extensions.h,
 * version DAT_IB_EXTENSION_VERSION), which dat_ia_query reports in
 * extension_supported / extension_version and in the provider attributes
 * DAT_IB_FETCH_AND_ADD, DAT_IB_CMP_AND_SWAP and DAT_IB_IMMED_DATA.
 *
 * The variable arguments are read back exactly as the dat_ib_* macros of
 * the header pass them (their casts are the ABI).  Implemented:
 * - DAT_IB_RDMA_WRITE_IMMED_OP (dat_ib_post_rdma_write_immed): an RDMA
 *   Write whose 32 bits of immediate data complete a receive on the peer;
 *   the macro's second argument is the number of segments of lbuf (what
 *   every provider reads there; dtestx passes 1).
 * - DAT_IB_CMP_AND_SWAP_OP, DAT_IB_FETCH_AND_ADD_OP: 64-bit atomics on the
 *   peer's memory, one local segment of at least 8 bytes for the old value.
 * - DAT_IB_OPEN_QUERY_OP / DAT_IB_CLOSE_QUERY_OP (dat_ib_open_query,
 *   dat_ib_close_query): an IA opened by name only to query it.
 * Their completions are DAT_IB_DTO_EVENTs (extension_event.c).
 *
 * Return codes, as the other posts (dto.h), but for the handle: one no
 * object has is DAT_INVALID_HANDLE | DAT_INVALID_HANDLE1 for every
 * operation (the generic entry point's first argument, as before the
 * extensions), a live object that is not an EP given to a post
 * DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP.  The other refusals name the
 * argument's position in the dat_ib_* macro call, the EP being the first (dat_ib_post_cmp_and_swap(ep, cmp, swap, lbuf, cookie,
 * rbuf, flags): a NULL or outside-LMR lbuf is DAT_INVALID_ARG4, a NULL
 * rbuf DAT_INVALID_ARG6, bad flags DAT_INVALID_ARG7); a local buffer
 * shorter than 8 bytes for an atomic: DAT_LENGTH_ERROR.  A target without
 * DAT_IB_MEM_PRIV_REMOTE_ATOMIC, or not 8-byte aligned, is refused by the
 * peer: DAT_DTO_ERR_REMOTE_ACCESS in the completion, as for RDMA.
 *
 * Not provided, DAT_NOT_IMPLEMENTED (after the handle check): unreliable
 * datagrams (DAT_IB_UD_*: DAT_IB_SERVICE_TYPE_UD endpoints, address handles and their connection
 * events need datd and the data channels to carry datagrams, which they do
 * not; DAT_IB_UD is not advertised), counters (DAT_COUNTERS is not
 * advertised, so dtestx -p disables them itself) and collectives.  An
 * operation the IB set does not define: DAT_INVALID_PARAMETER |
 * DAT_INVALID_ARG2. */
#include "config.h"

#include <stdarg.h>

#include <dat2/dat_ib_extensions.h>

#include "libdat/dto.h"
#include "libdat/foreign.h"
#include "libdat/handle.h"

/* The positions of the local and the remote buffer in an atomic's macro
 * call (the flags follow the remote buffer); the engine names the local
 * iov ARG3 and the remote one ARG5, dat_ep_post_rdma_write's positions. */
struct ext_args_pos {
        int local, remote;
};

static DAT_RETURN renumber(DAT_RETURN ret, struct ext_args_pos pos)
{
        if (ret == DAT_ERR_ARG(3))
                return DAT_ERR_ARG(pos.local);
        if (ret == DAT_ERR_ARG(5))
                return DAT_ERR_ARG(pos.remote);
        return ret;
}

/* dat_ib_post_rdma_write_immed(ep, segments, lbuf, cookie, rbuf, idata, flags) */
static DAT_RETURN post_write_immed(DAT_HANDLE ep, va_list ap)
{
        struct dto_ext_post p = { .kind = DTO_EXT_WRITE_IMM, .flags_arg = 7 };

        p.num_segments = va_arg(ap, DAT_COUNT);
        p.local_iov = va_arg(ap, DAT_LMR_TRIPLET *);
        p.cookie = va_arg(ap, DAT_DTO_COOKIE);
        p.remote = va_arg(ap, DAT_RMR_TRIPLET *);
        p.immed = va_arg(ap, DAT_UINT32);
        p.flags = va_arg(ap, DAT_COMPLETION_FLAGS);
        /* Same positions as dat_ep_post_rdma_write's. */
        return dto_post_ext(ep, &p);
}

/* The common tail of both atomics: lbuf, cookie, rbuf, flags. */
static DAT_RETURN post_atomic(DAT_HANDLE ep, struct dto_ext_post *p, va_list ap,
                              struct ext_args_pos pos)
{
        p->num_segments = 1;
        p->local_iov = va_arg(ap, DAT_LMR_TRIPLET *);
        p->cookie = va_arg(ap, DAT_DTO_COOKIE);
        p->remote = va_arg(ap, DAT_RMR_TRIPLET *);
        p->flags = va_arg(ap, DAT_COMPLETION_FLAGS);
        p->flags_arg = pos.remote + 1;
        return renumber(dto_post_ext(ep, p), pos);
}

/* dat_ib_post_cmp_and_swap(ep, cmp, swap, lbuf, cookie, rbuf, flags) */
static DAT_RETURN post_cmp_and_swap(DAT_HANDLE ep, va_list ap)
{
        struct dto_ext_post p = { .kind = DTO_EXT_CMP_SWAP };

        p.compare = va_arg(ap, DAT_UINT64);
        p.value = va_arg(ap, DAT_UINT64);
        return post_atomic(ep, &p, ap, (struct ext_args_pos){ .local = 4, .remote = 6 });
}

/* dat_ib_post_fetch_and_add(ep, add, lbuf, cookie, rbuf, flags) */
static DAT_RETURN post_fetch_and_add(DAT_HANDLE ep, va_list ap)
{
        struct dto_ext_post p = { .kind = DTO_EXT_FETCH_ADD };

        p.value = va_arg(ap, DAT_UINT64);
        return post_atomic(ep, &p, ap, (struct ext_args_pos){ .local = 3, .remote = 5 });
}

/* dat_ib_open_query(name, &ia, ia_mask, ia_attr, prov_mask, prov_attr): the
 * IA is opened (its own async EVD) and queried; dat_ib_close_query closes
 * it.  Any failure leaves nothing open and *ia NULL.  Argument numbers are
 * the macro's (name is the first). */
static DAT_RETURN open_query(va_list ap)
{
        const DAT_NAME_PTR name = va_arg(ap, DAT_NAME_PTR);
        DAT_HANDLE *ia_out = va_arg(ap, DAT_HANDLE *);
        DAT_IA_ATTR_MASK ia_mask = va_arg(ap, DAT_IA_ATTR_MASK);
        DAT_IA_ATTR *ia_attr = va_arg(ap, DAT_IA_ATTR *);
        DAT_PROVIDER_ATTR_MASK prov_mask = va_arg(ap, DAT_PROVIDER_ATTR_MASK);
        DAT_PROVIDER_ATTR *prov_attr = va_arg(ap, DAT_PROVIDER_ATTR *);
        DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia;
        DAT_RETURN ret;

        if (!name)
                return DAT_ERR_ARG(1);
        if (!ia_out)
                return DAT_ERR_ARG(2);
        *ia_out = DAT_HANDLE_NULL;
        if (!ia_attr && !prov_attr)
                return DAT_ERR_ARG(4);
        ret = dat_ia_open(name, 1, &async_evd, &ia);
        if (ret != DAT_SUCCESS)
                return ret;
        ret = dat_ia_query(ia, NULL, ia_attr ? ia_mask : 0, ia_attr, prov_attr ? prov_mask : 0,
                           prov_attr);
        if (ret != DAT_SUCCESS) {
                (void)dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
                return ret;
        }
        *ia_out = ia;
        return DAT_SUCCESS;
}

/* Operations the IB set defines that this provider does not offer. */
static bool ib_op_defined(int op)
{
        return (op >= DAT_IB_FETCH_AND_ADD_OP && op <= DAT_IB_UD_AH_FREE_OP) ||
               op == DAT_IB_OPEN_QUERY_OP || op == DAT_IB_CLOSE_QUERY_OP;
}

_public_ DAT_RETURN dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP operation, ...)
{
        const DAT_PROVIDER *foreign_p;
        DAT_HANDLE foreign_h;
        DAT_RETURN ret;
        va_list ap;

        /* Another provider's: the operation is its own, but for closing
         * an IA dat_ib_open_query opened, which is dat_ia_close's (libdat
         * holds that IA's record). */
        if (foreign_ia(handle, &foreign_p, &foreign_h)) {
                if (operation == DAT_IB_CLOSE_QUERY_OP)
                        return dat_ia_close(handle, DAT_CLOSE_ABRUPT_FLAG);
                va_start(ap, operation);
                ret = FOREIGN_CALL(foreign_p, handle_extendedop_func, foreign_h, operation, ap);
                va_end(ap);
                return ret;
        }
        /* The generic entry point's own rule first: a handle no object has
         * is DAT_INVALID_HANDLE1 whatever the operation (its arguments are
         * not read); only dat_ib_open_query takes none. */
        if (operation != DAT_IB_OPEN_QUERY_OP && !dat_object_lookup_any(handle))
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        va_start(ap, operation);
        switch (operation) {
        case DAT_IB_RDMA_WRITE_IMMED_OP:
                ret = post_write_immed(handle, ap);
                break;
        case DAT_IB_CMP_AND_SWAP_OP:
                ret = post_cmp_and_swap(handle, ap);
                break;
        case DAT_IB_FETCH_AND_ADD_OP:
                ret = post_fetch_and_add(handle, ap);
                break;
        case DAT_IB_OPEN_QUERY_OP:
                ret = open_query(ap);
                break;
        case DAT_IB_CLOSE_QUERY_OP:
                ret = dat_ia_close(handle, DAT_CLOSE_ABRUPT_FLAG);
                break;
        default:
                ret = ib_op_defined(operation) ? DAT_ERR_NOT_IMPLEMENTED : DAT_ERR_ARG(2);
                break;
        }
        va_end(ap);
        return ret;
}
