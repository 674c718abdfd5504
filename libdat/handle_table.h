/* The process-wide handle table's layout and its lock-free lookup (the
 * rest, allocation and release, is handle.c's).  Inline because every DAT
 * call looks a handle up, most of them several: a data path message makes
 * five (the EP of each post, the EVD of each dequeue and completion), and
 * the call into handle.c and its type dispatch were half of each.
 *
 * A handle value is (tag | generation | slot index + 1).  The tag makes the
 * value a non-canonical address on 64-bit machines (a consumer that
 * dereferences one faults at once) and lets garbage, stack addresses and
 * DAT_EVD_ASYNC_EXISTS/DAT_EVD_OUT_OF_SCOPE fail the first comparison.  The
 * table grows in fixed chunks that are never moved or freed, so a lookup may
 * read any slot at any time without a lock: it reads the slot's state word,
 * the object pointer, and the state word again, and accepts the pointer only
 * if the slot was live, of the right type and generation, and unchanged. */
#ifndef DATD_LIBDAT_HANDLE_TABLE_H
#define DATD_LIBDAT_HANDLE_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "libdat/libdat.h"

struct dat_object;

#if UINTPTR_MAX > 0xffffffffu
#define HANDLE_TAG_BITS 16
#define HANDLE_TAG ((uintptr_t)0xda7a)
#else
#define HANDLE_TAG_BITS 4
#define HANDLE_TAG ((uintptr_t)0xd)
#endif
#define HANDLE_WORD_BITS (sizeof(uintptr_t) * 8)
#define HANDLE_INDEX_BITS 20 /* index + 1, so up to DAT_HANDLE_TABLE_MAX - 1 slots */
#define HANDLE_GEN_BITS (HANDLE_WORD_BITS - HANDLE_TAG_BITS - HANDLE_INDEX_BITS)
#define HANDLE_TAG_SHIFT (HANDLE_WORD_BITS - HANDLE_TAG_BITS)
#define HANDLE_INDEX_MASK (((uintptr_t)1 << HANDLE_INDEX_BITS) - 1)
#define HANDLE_GEN_MASK (((uintptr_t)1 << HANDLE_GEN_BITS) - 1)

/* The most live handles a process can hold: the table stops growing here. */
#define DAT_HANDLE_TABLE_MAX (1u << HANDLE_INDEX_BITS)

#define HANDLE_CHUNK_SHIFT 10
#define HANDLE_CHUNK_SLOTS (1u << HANDLE_CHUNK_SHIFT)
#define HANDLE_MAX_CHUNKS (DAT_HANDLE_TABLE_MAX / HANDLE_CHUNK_SLOTS)

/* Slot state word: generation << 8 | type << 1 | live. */
#define STATE_LIVE ((uintptr_t)1)
#define STATE_TYPE(s) (((s) >> 1) & 0x7f)
#define STATE_GEN(s) (((s) >> 8) & HANDLE_GEN_MASK)
#define STATE_MAKE(gen, type, live) \
        ((((uintptr_t)(gen) & HANDLE_GEN_MASK) << 8) | ((uintptr_t)(type) << 1) | (live))

_Static_assert(HANDLE_GEN_BITS + 8 <= HANDLE_WORD_BITS, "state word too small");

struct handle_slot {
        uintptr_t state;          /* atomic */
        struct dat_object *obj;   /* atomic */
        uint32_t next_free;       /* index + 1 of the next free slot, 0 = none; handle.c's */
};

/* The chunks (atomic pointers; NULL: not allocated yet).  Written by
 * handle.c under its table lock, read by anyone. */
extern struct handle_slot *dat_handle_chunks[HANDLE_MAX_CHUNKS];

static inline struct handle_slot *handle_slot_at(uint32_t index)
{
        struct handle_slot *chunk =
                __atomic_load_n(&dat_handle_chunks[index >> HANDLE_CHUNK_SHIFT], __ATOMIC_ACQUIRE);

        return chunk ? &chunk[index & (HANDLE_CHUNK_SLOTS - 1)] : NULL;
}

/* Splits a handle value; false if it cannot be one of ours. */
static inline bool handle_decode(DAT_HANDLE handle, uint32_t *index, uintptr_t *gen)
{
        uintptr_t v = (uintptr_t)handle;
        uintptr_t idx1 = v & HANDLE_INDEX_MASK;

        if ((v >> HANDLE_TAG_SHIFT) != HANDLE_TAG || idx1 == 0)
                return false;
        *index = (uint32_t)(idx1 - 1);
        *gen = (v >> HANDLE_INDEX_BITS) & HANDLE_GEN_MASK;
        return true;
}

/* The live object a handle names if it is of type (any type: -1), else
 * NULL.  Safe on any value. */
static inline struct dat_object *handle_table_lookup(DAT_HANDLE handle, int type)
{
        struct handle_slot *slot;
        struct dat_object *obj;
        uintptr_t gen, before;
        uint32_t index;

        if (!handle_decode(handle, &index, &gen))
                return NULL;
        slot = handle_slot_at(index);
        if (!slot)
                return NULL;
        before = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
        /* Of a given type (a constant at nearly every call), the whole
         * state word is known: one comparison. */
        if (type >= 0 ? before != STATE_MAKE(gen, type, 1)
                      : !(before & STATE_LIVE) || STATE_GEN(before) != gen)
                return NULL;
        obj = __atomic_load_n(&slot->obj, __ATOMIC_ACQUIRE);
        return __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) == before ? obj : NULL;
}

#endif
