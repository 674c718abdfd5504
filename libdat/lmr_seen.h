/* The LMR an EP's posts last found good for a local segment, kept so that
 * a stream of posts from one registered buffer, the usual case, skips the
 * lookup (lmr_find_by_context and the PZ test: about 90 instructions on
 * every message's path).  One per EP and kind of post (requests,
 * receives: each has its own buffers).
 *
 * Why a kept entry is still true: what it holds of the LMR (its range, its
 * privileges, its PZ; the IA is the EP's) never changes while the LMR
 * lives, and the LMR's context stops resolving only when its memory-
 * context slot is released (mem_ctx.h).  The entry keeps the release count
 * read before the lookup that found the LMR: while the count is the same,
 * no slot was released since, and the LMR is the one found.  The EP's PZ
 * can change (dat_ep_modify): the entry keeps the PZ it was checked
 * against.
 *
 * Threads may post on one EP at once, and the posts read and write the
 * entry without the EP's lock: a sequence count, odd while a post writes,
 * makes a read that overlaps a write miss; a post writes only when it
 * takes the count, and leaves the entry alone when another one has it. */
#ifndef DATD_LIBDAT_LMR_SEEN_H
#define DATD_LIBDAT_LMR_SEEN_H

#include <stdbool.h>
#include <stdint.h>

#include <dat2/udat.h>

#include "libdat/mem_ctx.h"

struct lmr_seen {
        uint32_t seq;                   /* odd while a post writes the rest */
        uint64_t releases;              /* mem_ctx_release_count() before the lookup */
        DAT_LMR_CONTEXT ctx;            /* 0: nothing kept (no context is 0) */
        DAT_MEM_PRIV_FLAGS privileges;  /* the LMR's */
        DAT_PZ_HANDLE pz;               /* the EP's, which was the LMR's */
        DAT_VADDR lo, hi;               /* the LMR's registered range */
};

/* Whether e says that segment t is good, as lmr_find_by_context would with
 * privileges want, for an EP whose PZ is pz. */
static inline bool lmr_seen_covers(const struct lmr_seen *e, DAT_PZ_HANDLE pz, const DAT_LMR_TRIPLET *t,
                                   DAT_MEM_PRIV_FLAGS want)
{
        uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
        DAT_VADDR end = t->virtual_address + t->segment_length;
        bool good;

        if (seq & 1)
                return false;
        good = t->lmr_context != 0 && __atomic_load_n(&e->ctx, __ATOMIC_RELAXED) == t->lmr_context &&
               __atomic_load_n(&e->releases, __ATOMIC_RELAXED) == mem_ctx_release_count() &&
               __atomic_load_n(&e->pz, __ATOMIC_RELAXED) == pz && end >= t->virtual_address &&
               t->virtual_address >= __atomic_load_n(&e->lo, __ATOMIC_RELAXED) &&
               end <= __atomic_load_n(&e->hi, __ATOMIC_RELAXED) &&
               (__atomic_load_n(&e->privileges, __ATOMIC_RELAXED) & want) == want;
        /* The fields read before the count is read again. */
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        return good && __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == seq;
}

/* Keeps what a lookup found good: the LMR of context ctx, registered
 * [lo, hi) with privileges, of the EP's PZ pz, found after reading the
 * release count `releases`. */
static inline void lmr_seen_keep(struct lmr_seen *e, uint64_t releases, DAT_PZ_HANDLE pz,
                                 DAT_LMR_CONTEXT ctx, DAT_MEM_PRIV_FLAGS privileges, DAT_VADDR lo,
                                 DAT_VADDR hi)
{
        uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

        if ((seq & 1) ||
            !__atomic_compare_exchange_n(&e->seq, &seq, seq + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                return;
        /* The odd count before the fields. */
        __atomic_thread_fence(__ATOMIC_RELEASE);
        __atomic_store_n(&e->releases, releases, __ATOMIC_RELAXED);
        __atomic_store_n(&e->ctx, ctx, __ATOMIC_RELAXED);
        __atomic_store_n(&e->privileges, privileges, __ATOMIC_RELAXED);
        __atomic_store_n(&e->pz, pz, __ATOMIC_RELAXED);
        __atomic_store_n(&e->lo, lo, __ATOMIC_RELAXED);
        __atomic_store_n(&e->hi, hi, __ATOMIC_RELAXED);
        __atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

#endif
