/* Memory contexts: the 32-bit lmr_context and rmr_context values that name
 * an LMR or RMR in DTO segments, in dat_rmr_bind's triplet and, for
 * rmr_contexts, in a remote peer's RDMA requests.
 *
 * A context is (key << MEM_CTX_INDEX_BITS | index): index names a slot of
 * one process-wide table (O(1) lookup, lock-free, like the handle table),
 * key is a random non-zero number drawn each time the slot publishes a
 * context, so contexts are never 0, differ between all live LMRs and RMRs
 * of the process (hence of any IA) and cannot be guessed from another
 * one.  Each slot belongs to one object (an LMR or an RMR) and holds two
 * contexts: a local one (an LMR's lmr_context) and a remote one (an LMR's
 * rmr_context, or the current rmr_context of a bound RMR), each 0 when
 * not published.  A remote context is replaced (dat_rmr_bind) or revoked
 * by publishing anew; the old value stops resolving at once, and a peer
 * process that mapped the memory it reached writes no more into it once
 * the call returns (shm_direct.h).
 *
 * Lookups return the owning object; callers check its type and its IA
 * (obj.parent).  Like every DAT call, they rely on the consumer not to free
 * the object while a call that uses it runs. */
#ifndef DATD_LIBDAT_MEM_CTX_H
#define DATD_LIBDAT_MEM_CTX_H

#include <stdint.h>

#include "libdat/handle.h"

/* 2^18 = 262144 LMRs + RMRs live in one process (four times datd.conf's
 * default max_lmrs per client), and 14 bits of key. */
#define MEM_CTX_INDEX_BITS 18
#define MEM_CTX_MAX_SLOTS (1u << MEM_CTX_INDEX_BITS)

enum mem_ctx_role {
        MEM_CTX_LOCAL,
        MEM_CTX_REMOTE,
};

/* Takes a slot for owner, with no context published.  Returns DAT_SUCCESS
 * and *slot, or DAT_INSUFFICIENT_RESOURCES (DAT_RESOURCE_MEMORY) when the
 * table is full or memory is short. */
DAT_RETURN mem_ctx_alloc(struct dat_object *owner, uint32_t *slot);

/* Draws a new context for the slot's role: a fresh key, different from
 * the ones the slot published last, not resolving yet (dat_rmr_bind hands
 * it out when the bind is posted, and it resolves once the bind
 * completes). */
uint32_t mem_ctx_draw(uint32_t slot, enum mem_ctx_role role);

/* Makes ctx (from mem_ctx_draw on this slot and role) the slot's context
 * of that role, replacing the one there, which stops resolving. */
void mem_ctx_set(uint32_t slot, enum mem_ctx_role role, uint32_t ctx);

/* Both at once: a new context, resolving from now on; returns it. */
uint32_t mem_ctx_publish(uint32_t slot, enum mem_ctx_role role);

/* ctx (a remote context) was exported to a peer that may map what it
 * reaches (shm_direct.h): when it stops resolving (mem_ctx_set,
 * mem_ctx_revoke, mem_ctx_release), the exports are revoked before the
 * call returns.  The exporter calls it after registering the export, and
 * then checks that ctx still resolves (if not, it revokes itself: the
 * withdrawal may have come first). */
void mem_ctx_note_export(uint32_t ctx);

/* Withdraws the slot's context of that role (0 from then on). */
void mem_ctx_revoke(uint32_t slot, enum mem_ctx_role role);

/* Withdraws both contexts and gives the slot back. */
void mem_ctx_release(uint32_t slot);

/* How many slots have been released (mem_ctx_release), each after its
 * contexts stopped resolving (64 bits: it never comes round again).  A caller that reads it, then finds a
 * context, knows while it reads the same count again that the context
 * still names the same object: no context was withdrawn in between, and
 * a slot's local context changes only by its release.  The receive path
 * checks a posted receive's LMR that way instead of finding it again (a
 * lookup on every message). */
extern uint64_t mem_ctx_releases;

static inline uint64_t mem_ctx_release_count(void)
{
        return __atomic_load_n(&mem_ctx_releases, __ATOMIC_ACQUIRE);
}

/* How many times a context stopped resolving: a slot released (both its
 * contexts) or a remote context replaced or revoked (dat_rmr_bind, an
 * unbind), each counted after the context stopped resolving.  A payload
 * that arrives in pieces reads it when its target was checked and again
 * before each piece is placed (dto_rx.c, dto_tx.c): while it reads the
 * same, the target is still what the check found.  Apart from
 * mem_ctx_releases, whose readers need not look again after an RMR bind. */
extern uint64_t mem_ctx_withdrawals;

static inline uint64_t mem_ctx_withdrawal_count(void)
{
        return __atomic_load_n(&mem_ctx_withdrawals, __ATOMIC_ACQUIRE);
}

/* The object whose published context of that role is ctx, or NULL. */
struct dat_object *mem_ctx_find(uint32_t ctx, enum mem_ctx_role role);

#endif
