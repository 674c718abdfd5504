/* Local Memory Regions.  An LMR names a range of memory of this process
 * (DAT_MEM_TYPE_VIRTUAL, DAT_MEM_TYPE_LMR) or shared memory named by a
 * cookie (DAT_MEM_TYPE_SHARED_VIRTUAL, mem_shm.h), with privileges, on a PZ
 * (it holds one `users` reference on it).  Its lmr_context (and its
 * rmr_context, when remote access was asked) are 32-bit values from the
 * memory context table (mem_ctx.h), looked up in O(1) by the data path.
 * RMRs bound to an LMR hold `users` references on it (dat_lmr_free(3DAT):
 * DAT_INVALID_STATE while an RMR uses it). */
#ifndef DATD_LIBDAT_LMR_H
#define DATD_LIBDAT_LMR_H

#include <stdint.h>

#include "libdat/handle.h"

struct ia;
struct mem_shm;
struct pz;

struct lmr {
        struct dat_object obj;          /* parent: the IA it was created on */
        uint32_t datd_id;               /* datd's id of the registration, 0 = none */
        uint32_t ctx_slot;              /* its slot in the context table (mem_ctx.h) */
        bool has_ctx_slot;
        struct pz *pz;                  /* holds a `users` reference */
        DAT_MEM_TYPE mem_type;          /* as created */
        DAT_MEM_PRIV_FLAGS privileges;
        DAT_VA_TYPE va_type;
        DAT_LMR_CONTEXT lmr_context;
        DAT_RMR_CONTEXT rmr_context;    /* 0 without remote privileges */

        /* What the consumer described (dat_lmr_query's region_desc and
         * length; a SHARED_VIRTUAL cookie pointer points at `cookie`) and
         * what was registered: [registered_address, + registered_length),
         * whole pages around the consumer's range. */
        DAT_REGION_DESCRIPTION region;
        DAT_VLEN length;
        DAT_VADDR registered_address;
        DAT_VLEN registered_length;
        char cookie[DAT_LMR_COOKIE_SIZE];

        /* The cookie-named shared memory libdat mapped for this LMR
         * (SHARED_VIRTUAL without a consumer address, or an LMR made from
         * such an LMR), one reference; NULL otherwise.  shm->fd is what the
         * data path hands a peer that must map the same memory. */
        struct mem_shm *shm;
};

/* The LMR a handle names, or NULL. */
struct lmr *lmr_lookup(DAT_LMR_HANDLE handle);

/* The IA an LMR was created on. */
struct ia *lmr_ia(const struct lmr *lmr);

/* Whether [address, address + length) lies inside what lmr registered
 * (false if it wraps).  A zero length at either end counts as inside. */
bool lmr_covers(const struct lmr *lmr, DAT_VADDR address, DAT_VLEN length);

/* For an RMR bound to an LMR: takes one `users` reference on the live LMR
 * of ia that handle names (under dat_object_lock), which makes
 * dat_lmr_free() refuse with DAT_INVALID_STATE_LMR_IN_USE.  Returns
 * DAT_SUCCESS and *out, or DAT_INVALID_HANDLE_LMR.  lmr_put() drops it by
 * handle, and does nothing if the LMR is gone already (an abrupt
 * dat_ia_close destroys newest first, which may be the LMR). */
DAT_RETURN lmr_get(DAT_LMR_HANDLE handle, const struct ia *ia, struct lmr **out);
void lmr_put(DAT_LMR_HANDLE handle);

/* The local-access check of the data path (every local IOV segment of a
 * DTO, dat_lmr_sync_rdma_read/write, dat_rmr_bind's triplet): finds the
 * live LMR of ia whose lmr_context is lmr_context and which covers all of
 * [address, address + length) with at least the privileges asked
 * (DAT_MEM_PRIV_* bits; DAT_MEM_PRIV_NONE_FLAG asks for none).  A zero
 * length segment is covered by any LMR whose range contains address.
 * Returns DAT_SUCCESS and *out (which stays valid until the consumer frees
 * the LMR), or:
 *   DAT_INVALID_PARAMETER  no live LMR of ia has that context;
 *   DAT_LENGTH_ERROR       the range is not inside the LMR (or overflows);
 *   DAT_PRIVILEGES_VIOLATION  the LMR lacks one of the privileges.
 * Callers turn these into the code their own man page names.  Lock-free:
 * safe against concurrent creates; like every DAT call it relies on the
 * consumer not freeing the LMR while a call uses it. */
DAT_RETURN lmr_find_by_context(struct ia *ia, DAT_LMR_CONTEXT lmr_context, DAT_VADDR address,
                               DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges, struct lmr **out);

/* Frees an LMR (ops->destroy, for an abrupt dat_ia_close). */
void lmr_destroy(struct dat_object *obj);

#endif
