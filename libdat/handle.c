/* The handle table and the common object header (see handle.h), and the
 * three DAT entry points that work on a handle of any kind:
 * dat_get_handle_type, dat_set_consumer_context, dat_get_consumer_context.
 *
 * A handle value is (tag | generation | slot index + 1).  The tag makes the
 * value a non-canonical address on 64-bit machines (a consumer that
 * dereferences one faults at once) and lets garbage, stack addresses and
 * DAT_EVD_ASYNC_EXISTS/DAT_EVD_OUT_OF_SCOPE fail the first comparison.  The
 * table grows in fixed chunks that are never moved or freed, so a lookup may
 * read any slot at any time without a lock: it reads the slot's state word,
 * the object pointer, and the state word again, and accepts the pointer only
 * if the slot was live, of the right type and generation, and unchanged. */
#include "config.h"

#include "libdat/handle.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

_Static_assert(DAT_HANDLE_TABLE_MAX == (1u << HANDLE_INDEX_BITS), "index field size");

#define CHUNK_SHIFT 10
#define CHUNK_SLOTS (1u << CHUNK_SHIFT)
#define MAX_CHUNKS (DAT_HANDLE_TABLE_MAX / CHUNK_SLOTS)

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
        uint32_t next_free;       /* index + 1 of the next free slot, 0 = none; under table_lock */
};

static struct handle_slot *chunks[MAX_CHUNKS]; /* atomic pointers, written under table_lock */
static uint32_t n_slots;                       /* slots in allocated chunks */
static uint32_t free_head, free_tail;          /* FIFO of free slots, index + 1, 0 = empty */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t object_lock = PTHREAD_MUTEX_INITIALIZER;

void dat_object_lock(void)
{
        pthread_mutex_lock(&object_lock);
}

void dat_object_unlock(void)
{
        pthread_mutex_unlock(&object_lock);
}

static struct handle_slot *slot_at(uint32_t index)
{
        struct handle_slot *chunk = __atomic_load_n(&chunks[index >> CHUNK_SHIFT], __ATOMIC_ACQUIRE);

        return chunk ? &chunk[index & (CHUNK_SLOTS - 1)] : NULL;
}

/* Takes a free slot, growing the table by a chunk when none is left.  Freed
 * slots are reused oldest first, so a stale handle's slot is reused (and its
 * generation bumped) as rarely as possible.  Under table_lock. */
static int slot_alloc(uint32_t *index)
{
        if (!free_head) {
                uint32_t c = n_slots / CHUNK_SLOTS, first = n_slots, last;
                struct handle_slot *chunk;

                if (c >= MAX_CHUNKS)
                        return -1;
                chunk = calloc(CHUNK_SLOTS, sizeof(*chunk));
                if (!chunk)
                        return -1;
                /* A handle stores index + 1 in its index field, so the very
                 * last index of the table is never handed out. */
                last = first + CHUNK_SLOTS - 1;
                if (last + 1 >= DAT_HANDLE_TABLE_MAX)
                        last--;
                for (uint32_t idx = first; idx < last; idx++)
                        chunk[idx - first].next_free = idx + 2;
                __atomic_store_n(&chunks[c], chunk, __ATOMIC_RELEASE);
                n_slots += CHUNK_SLOTS;
                free_head = first + 1;
                free_tail = last + 1;
        }
        *index = free_head - 1;
        free_head = slot_at(*index)->next_free;
        if (!free_head)
                free_tail = 0;
        return 0;
}

/* Under table_lock. */
static void slot_release(uint32_t index)
{
        struct handle_slot *slot = slot_at(index);

        slot->next_free = 0;
        if (free_tail)
                slot_at(free_tail - 1)->next_free = index + 1;
        else
                free_head = index + 1;
        free_tail = index + 1;
}

static DAT_HANDLE handle_encode(uint32_t index, uintptr_t gen)
{
        return (DAT_HANDLE)((HANDLE_TAG << HANDLE_TAG_SHIFT) |
                            ((gen & HANDLE_GEN_MASK) << HANDLE_INDEX_BITS) |
                            ((uintptr_t)index + 1));
}

/* Splits a handle value; false if it cannot be one of ours. */
static bool handle_decode(DAT_HANDLE handle, uint32_t *index, uintptr_t *gen)
{
        uintptr_t v = (uintptr_t)handle;
        uintptr_t idx1 = v & HANDLE_INDEX_MASK;

        if ((v >> HANDLE_TAG_SHIFT) != HANDLE_TAG || idx1 == 0)
                return false;
        *index = (uint32_t)(idx1 - 1);
        *gen = (v >> HANDLE_INDEX_BITS) & HANDLE_GEN_MASK;
        return true;
}

static struct dat_object *lookup(DAT_HANDLE handle, int type)
{
        struct handle_slot *slot;
        struct dat_object *obj;
        uintptr_t gen, before, after;
        uint32_t index;

        if (!handle_decode(handle, &index, &gen))
                return NULL;
        slot = slot_at(index);
        if (!slot)
                return NULL;
        before = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
        if (!(before & STATE_LIVE) || STATE_GEN(before) != gen ||
            (type >= 0 && STATE_TYPE(before) != (uintptr_t)type))
                return NULL;
        obj = __atomic_load_n(&slot->obj, __ATOMIC_ACQUIRE);
        after = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
        return after == before ? obj : NULL;
}

struct dat_object *dat_object_lookup(DAT_HANDLE handle, DAT_HANDLE_TYPE type)
{
        return lookup(handle, (int)type);
}

struct dat_object *dat_object_lookup_any(DAT_HANDLE handle)
{
        return lookup(handle, -1);
}

DAT_RETURN dat_invalid_handle(DAT_HANDLE_TYPE type)
{
        static const DAT_RETURN_SUBTYPE subtype[] = {
                [DAT_HANDLE_TYPE_CR] = DAT_INVALID_HANDLE_CR,
                [DAT_HANDLE_TYPE_EP] = DAT_INVALID_HANDLE_EP,
                /* No EVD subtype without a role; role-specific callers
                 * (dat_ep_create, dat_ia_open) pick DAT_INVALID_HANDLE_EVD_*. */
                [DAT_HANDLE_TYPE_EVD] = DAT_INVALID_HANDLE1,
                [DAT_HANDLE_TYPE_IA] = DAT_INVALID_HANDLE_IA,
                [DAT_HANDLE_TYPE_LMR] = DAT_INVALID_HANDLE_LMR,
                [DAT_HANDLE_TYPE_PSP] = DAT_INVALID_HANDLE_PSP,
                [DAT_HANDLE_TYPE_PZ] = DAT_INVALID_HANDLE_PZ,
                [DAT_HANDLE_TYPE_RMR] = DAT_INVALID_HANDLE_RMR,
                [DAT_HANDLE_TYPE_RSP] = DAT_INVALID_HANDLE_RSP,
                [DAT_HANDLE_TYPE_CNO] = DAT_INVALID_HANDLE_CNO,
                [DAT_HANDLE_TYPE_SRQ] = DAT_INVALID_HANDLE_SRQ,
                [DAT_HANDLE_TYPE_CSP] = DAT_INVALID_HANDLE_CSP,
        };

        if ((unsigned)type >= ARRAY_SIZE(subtype))
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        return DAT_ERR(DAT_INVALID_HANDLE, subtype[type]);
}

DAT_RETURN dat_not_implemented_on(DAT_HANDLE handle, DAT_HANDLE_TYPE type)
{
        return dat_object_lookup(handle, type) ? DAT_ERR_NOT_IMPLEMENTED : dat_invalid_handle(type);
}

static void list_init(struct dat_list *l)
{
        l->prev = l->next = l;
}

static void list_add_tail(struct dat_list *head, struct dat_list *n)
{
        n->prev = head->prev;
        n->next = head;
        head->prev->next = n;
        head->prev = n;
}

static void list_del(struct dat_list *n)
{
        n->prev->next = n->next;
        n->next->prev = n->prev;
        list_init(n);
}

/* Takes obj's slot out of the table: every copy of its handle is stale
 * from here on because the slot's generation moves on. */
static void handle_unregister(struct dat_object *obj)
{
        uintptr_t gen;
        uint32_t index;

        pthread_mutex_lock(&table_lock);
        if (handle_decode(obj->handle, &index, &gen)) {
                struct handle_slot *slot = slot_at(index);

                __atomic_store_n(&slot->state, STATE_MAKE(gen + 1, 0, 0), __ATOMIC_RELEASE);
                __atomic_store_n(&slot->obj, NULL, __ATOMIC_RELEASE);
                slot_release(index);
        }
        pthread_mutex_unlock(&table_lock);
}

DAT_RETURN dat_object_init(struct dat_object *obj, const struct dat_object_ops *ops,
                           struct dat_object *parent)
{
        struct handle_slot *slot;
        uint32_t index;

        pthread_mutex_lock(&table_lock);
        if (slot_alloc(&index) < 0) {
                pthread_mutex_unlock(&table_lock);
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        slot = slot_at(index);
        obj->ops = ops;
        obj->handle = handle_encode(index, STATE_GEN(slot->state));
        obj->parent = parent;
        list_init(&obj->children);
        list_init(&obj->sibling);
        obj->n_children = 0;
        obj->users = 0;
        obj->closing = false;
        __atomic_store_n(&obj->context, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->obj, obj, __ATOMIC_RELEASE);
        __atomic_store_n(&slot->state, STATE_MAKE(STATE_GEN(slot->state), ops->type, STATE_LIVE),
                         __ATOMIC_RELEASE);
        pthread_mutex_unlock(&table_lock);

        if (parent) {
                bool parent_closing;

                dat_object_lock();
                parent_closing = parent->closing;
                if (!parent_closing) {
                        list_add_tail(&parent->children, &obj->sibling);
                        parent->n_children++;
                }
                dat_object_unlock();
                if (parent_closing) {
                        handle_unregister(obj);
                        obj->ops = NULL;
                        return dat_invalid_handle(parent->ops->type);
                }
        }
        return DAT_SUCCESS;
}

void dat_object_fini(struct dat_object *obj)
{
        if (!obj || !obj->ops)
                return;
        /* Invalidate first, unlink second: from here on no lookup finds the
         * object, so nothing new can start using it while it is unlinked. */
        handle_unregister(obj);
        if (obj->parent) {
                dat_object_lock();
                list_del(&obj->sibling);
                obj->parent->n_children--;
                dat_object_unlock();
        }
        obj->ops = NULL;
        obj->handle = DAT_HANDLE_NULL;
}

void dat_object_destroy_children(struct dat_object *parent)
{
        for (;;) {
                struct dat_object *child;

                dat_object_lock();
                if (parent->children.prev == &parent->children) {
                        dat_object_unlock();
                        return;
                }
                child = dat_container_of(parent->children.prev, struct dat_object, sibling);
                dat_object_unlock();
                /* destroy() unlinks the child through dat_object_fini(). */
                child->ops->destroy(child);
        }
}

/* dat_get_handle_type(3DAT) */
_public_ DAT_RETURN dat_get_handle_type(DAT_HANDLE dat_handle, DAT_HANDLE_TYPE *handle_type)
{
        struct dat_object *obj = dat_object_lookup_any(dat_handle);

        /* Any kind of handle is acceptable here, so the subtype names the
         * argument's position rather than a kind. */
        if (!obj)
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        if (!handle_type)
                return DAT_ERR_ARG(2);
        *handle_type = obj->ops->type;
        return DAT_SUCCESS;
}

/* dat_set_consumer_context(3DAT) */
_public_ DAT_RETURN dat_set_consumer_context(DAT_HANDLE dat_handle, DAT_CONTEXT context)
{
        struct dat_object *obj = dat_object_lookup_any(dat_handle);
        uint64_t v = 0;

        if (!obj)
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        _Static_assert(sizeof(context) <= sizeof(v), "DAT_CONTEXT is 64 bits");
        memcpy(&v, &context, sizeof(context));
        __atomic_store_n(&obj->context, v, __ATOMIC_RELAXED);
        return DAT_SUCCESS;
}

/* dat_get_consumer_context(3DAT) */
_public_ DAT_RETURN dat_get_consumer_context(DAT_HANDLE dat_handle, DAT_CONTEXT *context)
{
        struct dat_object *obj = dat_object_lookup_any(dat_handle);
        uint64_t v;

        if (!obj)
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        if (!context)
                return DAT_ERR_ARG(2);
        v = __atomic_load_n(&obj->context, __ATOMIC_RELAXED);
        memcpy(context, &v, sizeof(*context));
        return DAT_SUCCESS;
}
