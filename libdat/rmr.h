/* Remote Memory Regions.  An RMR is created on a PZ (holding a `users`
 * reference on it) and bound, by dat_rmr_bind through an EP of that PZ, to
 * a window of an LMR of the same PZ; each bind gives it a new rmr_context
 * (mem_ctx.h) and the old one stops resolving when the bind completes.  A
 * bound RMR holds a `users` reference on its LMR (dat_lmr_free(3DAT):
 * DAT_INVALID_STATE while an RMR uses it). */
#ifndef DATD_LIBDAT_RMR_H
#define DATD_LIBDAT_RMR_H

#include <stdint.h>

#include "libdat/handle.h"

struct mem_shm;

struct ia;
struct lmr;
struct pz;

/* What an RMR is bound to; lmr DAT_HANDLE_NULL when nothing is. */
struct rmr_binding {
        DAT_LMR_HANDLE lmr;             /* holds a `users` reference on it */
        DAT_LMR_TRIPLET triplet;        /* the window, inside the LMR */
        DAT_MEM_PRIV_FLAGS mem_priv;
        DAT_VA_TYPE va_type;
        DAT_RMR_CONTEXT rmr_context;
};

struct rmr {
        struct dat_object obj;          /* parent: the IA of its PZ */
        uint32_t datd_id;               /* datd's id of the registration, 0 = none */
        uint32_t ctx_slot;              /* its slot in the context table */
        bool has_ctx_slot;
        struct pz *pz;                  /* holds a `users` reference */
        struct rmr_binding bound;       /* what remote peers reach now */
        struct rmr_binding pending;     /* posted by dat_rmr_bind, not completed */
        bool has_pending;
};

/* The RMR a handle names, or NULL. */
struct rmr *rmr_lookup(DAT_RMR_HANDLE handle);

/* The IA an RMR was created on. */
struct ia *rmr_ia(const struct rmr *rmr);

/* For the data path, when dat_rmr_bind posts a bind (after every check):
 * records it as pending, taking a `users` reference on the LMR (none for
 * an unbind, triplet->segment_length 0, where lmr_handle is ignored), and
 * returns the new rmr_context (0 for an unbind), which does not resolve
 * until rmr_bind_complete(rmr, true).  One bind in flight per RMR.
 * Returns DAT_SUCCESS, or DAT_INVALID_HANDLE_LMR if the LMR went away. */
DAT_RETURN rmr_bind_prepare(struct rmr *rmr, DAT_LMR_HANDLE lmr_handle,
                            const DAT_LMR_TRIPLET *triplet, DAT_MEM_PRIV_FLAGS mem_priv,
                            DAT_VA_TYPE va_type, DAT_RMR_CONTEXT *rmr_context);

/* For the data path, when the posted bind completes (in order with the
 * EP's other requests): on success the new binding takes effect (the new
 * context resolves, the old one no longer does, the old LMR's reference is
 * dropped); on failure (flushed) nothing changes and the pending LMR
 * reference is dropped.  Does nothing without a pending bind. */
void rmr_bind_complete(struct rmr *rmr, bool success);

/* The remote-access check of the data path (an incoming RDMA Read or
 * Write naming rmr_context): finds the live LMR of ia whose rmr_context it
 * is, or the RMR of ia bound with it, and checks that [address, address +
 * length) lies inside that LMR's registered range or that RMR's window,
 * and that the context grants every privilege asked
 * (DAT_MEM_PRIV_REMOTE_READ_FLAG / _WRITE_FLAG).  Returns DAT_SUCCESS with
 * *lmr (the memory accessed) and *pz (the context's PZ: an RDMA arriving
 * through an EP of another PZ is a protection violation, the caller's to
 * check), or DAT_INVALID_PARAMETER (no such context), DAT_LENGTH_ERROR
 * (outside), DAT_PRIVILEGES_VIOLATION. */
DAT_RETURN rmr_context_find(struct ia *ia, DAT_RMR_CONTEXT rmr_context, DAT_VADDR address,
                            DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges, struct lmr **lmr,
                            struct pz **pz);

/* The whole of what rmr_context reaches on ia (an LMR's registered range
 * or an RMR's window), for the shm transport's direct Writes
 * (shm_direct.h): true with *w when the context resolves to a live LMR
 * and grants every privilege asked.  Found under dat_object_lock, so that
 * the LMR cannot be freed meanwhile: w->lmr and w->pz only name what was
 * found (to compare), and w->shm, the LMR's shared memory if it has any,
 * holds a reference the caller drops (mem_shm_unref). */
struct rmr_window {
        const struct lmr *lmr;
        const struct pz *pz;
        DAT_VADDR start;
        DAT_VLEN length;
        struct mem_shm *shm;
};
bool rmr_context_window(struct ia *ia, DAT_RMR_CONTEXT rmr_context, DAT_MEM_PRIV_FLAGS privileges,
                        struct rmr_window *w);

/* Frees an RMR (ops->destroy, for an abrupt dat_ia_close). */
void rmr_destroy(struct dat_object *obj);

#endif
