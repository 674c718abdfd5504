/* The memory context table (see mem_ctx.h).  Laid out like the handle
 * table: fixed chunks that are never moved or freed, so a lookup reads a
 * slot without a lock (context word, owner, context word again); slots are
 * handed out and published under table_lock, freed slots are reused oldest
 * first. */
#include "config.h"

#include "libdat/mem_ctx.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "libdat/shm_direct.h"

#define INDEX_MASK ((1u << MEM_CTX_INDEX_BITS) - 1)
#define KEY_BITS (32 - MEM_CTX_INDEX_BITS)
#define KEY_MASK ((1u << KEY_BITS) - 1)
#define CHUNK_SHIFT 10
#define CHUNK_SLOTS (1u << CHUNK_SHIFT)
#define MAX_CHUNKS (MEM_CTX_MAX_SLOTS / CHUNK_SLOTS)

struct ctx_slot {
        uint32_t ctx[2];                /* atomic, by enum mem_ctx_role; 0 = none */
        struct dat_object *owner;       /* atomic */
        uint32_t last_key[2];           /* keys last published here, never drawn again next */
        uint32_t next_free;             /* index + 1 of the next free slot; under table_lock */
        bool exported;                  /* atomic: a remote context of it was exported
                                         * (shm_direct.h), since the slot was taken */
};

static struct ctx_slot *chunks[MAX_CHUNKS];     /* atomic pointers, written under table_lock */
static uint32_t n_slots;
static uint32_t free_head, free_tail;           /* FIFO of free slots, index + 1, 0 = empty */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
uint64_t mem_ctx_releases;
uint64_t mem_ctx_withdrawals;

static struct ctx_slot *slot_at(uint32_t index)
{
        struct ctx_slot *chunk;

        if (index >= MAX_CHUNKS * CHUNK_SLOTS)
                return NULL;
        chunk = __atomic_load_n(&chunks[index >> CHUNK_SHIFT], __ATOMIC_ACQUIRE);
        return chunk ? &chunk[index & (CHUNK_SLOTS - 1)] : NULL;
}

/* Under table_lock. */
static int slot_take(uint32_t *index)
{
        if (!free_head) {
                uint32_t c = n_slots / CHUNK_SLOTS, first = n_slots, last = n_slots + CHUNK_SLOTS;
                struct ctx_slot *chunk;

                if (c >= MAX_CHUNKS)
                        return -1;
                chunk = calloc(CHUNK_SLOTS, sizeof(*chunk));
                if (!chunk)
                        return -1;
                for (uint32_t i = first; i + 1 < last; i++)
                        chunk[i - first].next_free = i + 2;
                __atomic_store_n(&chunks[c], chunk, __ATOMIC_RELEASE);
                n_slots += CHUNK_SLOTS;
                free_head = first + 1;
                free_tail = last;
        }
        *index = free_head - 1;
        free_head = slot_at(*index)->next_free;
        if (!free_head)
                free_tail = 0;
        return 0;
}

/* Under table_lock. */
static void slot_give_back(uint32_t index)
{
        slot_at(index)->next_free = 0;
        if (free_tail)
                slot_at(free_tail - 1)->next_free = index + 1;
        else
                free_head = index + 1;
        free_tail = index + 1;
}

/* A random key: getrandom(2), or, where it is unavailable, a mix of the
 * clock, the PID and a counter (still never repeating a slot's last keys). */
static uint32_t random_key(void)
{
        static uint64_t counter;
        uint32_t v;

        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
                struct timespec ts;
                uint64_t x;

                clock_gettime(CLOCK_MONOTONIC, &ts);
                x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                    ((uint64_t)getpid() << 17) ^ (++counter * 0x9e3779b97f4a7c15ull);
                x ^= x >> 31;
                x *= 0xbf58476d1ce4e5b9ull;
                x ^= x >> 29;
                v = (uint32_t)x;
        }
        return v;
}

/* Under table_lock: a non-zero key different from both keys the slot
 * published last, so that neither a replaced nor a revoked context, nor
 * the slot's other context, comes back at once. */
static uint32_t fresh_key(const struct ctx_slot *s)
{
        for (;;) {
                uint32_t key = random_key() & KEY_MASK;

                if (key && key != s->last_key[0] && key != s->last_key[1])
                        return key;
        }
}

DAT_RETURN mem_ctx_alloc(struct dat_object *owner, uint32_t *slot)
{
        uint32_t index;

        pthread_mutex_lock(&table_lock);
        if (slot_take(&index) < 0) {
                pthread_mutex_unlock(&table_lock);
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        __atomic_store_n(&slot_at(index)->owner, owner, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&table_lock);
        *slot = index;
        return DAT_SUCCESS;
}

uint32_t mem_ctx_draw(uint32_t slot, enum mem_ctx_role role)
{
        struct ctx_slot *s = slot_at(slot);
        uint32_t key;

        if (!s)
                return 0; /* not a slot mem_ctx_alloc gave out */
        pthread_mutex_lock(&table_lock);
        key = fresh_key(s);
        s->last_key[role] = key;
        pthread_mutex_unlock(&table_lock);
        return key << MEM_CTX_INDEX_BITS | slot;
}

/* A remote context that stopped resolving (its new value stored, with a
 * full barrier) may still reach memory a peer of this host mapped
 * (shm_direct.h): the peer stops too.  Only a slot that exported a context
 * costs a look at the exports.  The mark is read, not cleared: a context
 * published next on the slot may be exported between our store and this
 * read, and its mark must stay for its own withdrawal.  It goes with the
 * slot (mem_ctx_release). */
static void remote_ctx_withdrawn(const struct ctx_slot *s, uint32_t old, uint32_t now)
{
        if (old != 0 && old != now && __atomic_load_n(&s->exported, __ATOMIC_SEQ_CST))
                shm_direct_revoke_context(old);
}

void mem_ctx_set(uint32_t slot, enum mem_ctx_role role, uint32_t ctx)
{
        struct ctx_slot *s = slot_at(slot);
        uint32_t old;

        if (!s)
                return;
        old = __atomic_exchange_n(&s->ctx[role], ctx, __ATOMIC_SEQ_CST);
        if (role != MEM_CTX_REMOTE)
                return;
        /* After the old context stopped resolving (mem_ctx_withdrawal_count). */
        if (old != 0 && old != ctx)
                __atomic_add_fetch(&mem_ctx_withdrawals, 1, __ATOMIC_RELEASE);
        remote_ctx_withdrawn(s, old, ctx);
}

void mem_ctx_note_export(uint32_t ctx)
{
        struct ctx_slot *s = slot_at(ctx & INDEX_MASK);

        if (!s)
                return;
        __atomic_store_n(&s->exported, true, __ATOMIC_SEQ_CST);
        /* Before the exporter looks at the context again. */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

uint32_t mem_ctx_publish(uint32_t slot, enum mem_ctx_role role)
{
        uint32_t ctx = mem_ctx_draw(slot, role);

        mem_ctx_set(slot, role, ctx);
        return ctx;
}

void mem_ctx_revoke(uint32_t slot, enum mem_ctx_role role)
{
        mem_ctx_set(slot, role, 0);
}

void mem_ctx_release(uint32_t slot)
{
        struct ctx_slot *s = slot_at(slot);
        uint32_t remote;
        bool exported;

        if (!s)
                return;
        pthread_mutex_lock(&table_lock);
        __atomic_store_n(&s->ctx[MEM_CTX_LOCAL], 0, __ATOMIC_RELEASE);
        remote = __atomic_exchange_n(&s->ctx[MEM_CTX_REMOTE], 0, __ATOMIC_SEQ_CST);
        /* Taken before the slot goes back: a next owner's export marks
         * it afresh, and must not be taken for ours. */
        exported = __atomic_exchange_n(&s->exported, false, __ATOMIC_SEQ_CST);
        __atomic_store_n(&s->owner, NULL, __ATOMIC_RELEASE);
        /* After the contexts stop resolving: a count read later finds them
         * gone (mem_ctx_release_count). */
        __atomic_add_fetch(&mem_ctx_releases, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&mem_ctx_withdrawals, 1, __ATOMIC_RELEASE);
        slot_give_back(slot);
        pthread_mutex_unlock(&table_lock);
        /* Outside the table's lock: it may wait for a peer's copy. */
        if (remote != 0 && exported)
                shm_direct_revoke_context(remote);
}

struct dat_object *mem_ctx_find(uint32_t ctx, enum mem_ctx_role role)
{
        struct ctx_slot *s;
        struct dat_object *owner;

        if (ctx == 0)
                return NULL;
        s = slot_at(ctx & INDEX_MASK);
        if (!s || __atomic_load_n(&s->ctx[role], __ATOMIC_ACQUIRE) != ctx)
                return NULL;
        owner = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
        /* The slot may have been released and taken again in between. */
        if (__atomic_load_n(&s->ctx[role], __ATOMIC_ACQUIRE) != ctx)
                return NULL;
        return owner;
}
