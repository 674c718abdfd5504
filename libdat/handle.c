/* The handle table's allocation and release (its layout and lookup:
 * handle_table.h), the common object header (see handle.h), and the three
 * DAT entry points that work on a handle of any kind:
 * dat_get_handle_type, dat_set_consumer_context, dat_get_consumer_context. */
#include "config.h"

#include "libdat/handle.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "libdat/foreign.h"

/* handle_table.h: atomic pointers, written under table_lock. */
struct handle_slot *dat_handle_chunks[HANDLE_MAX_CHUNKS];
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

/* Takes a free slot, growing the table by a chunk when none is left.  Freed
 * slots are reused oldest first, so a stale handle's slot is reused (and its
 * generation bumped) as rarely as possible.  Under table_lock. */
static int slot_alloc(uint32_t *index)
{
        if (!free_head) {
                uint32_t c = n_slots / HANDLE_CHUNK_SLOTS, first = n_slots, last;
                struct handle_slot *chunk;

                if (c >= HANDLE_MAX_CHUNKS)
                        return -1;
                chunk = calloc(HANDLE_CHUNK_SLOTS, sizeof(*chunk));
                if (!chunk)
                        return -1;
                /* A handle stores index + 1 in its index field, so the very
                 * last index of the table is never handed out. */
                last = first + HANDLE_CHUNK_SLOTS - 1;
                if (last + 1 >= DAT_HANDLE_TABLE_MAX)
                        last--;
                for (uint32_t idx = first; idx < last; idx++)
                        chunk[idx - first].next_free = idx + 2;
                __atomic_store_n(&dat_handle_chunks[c], chunk, __ATOMIC_RELEASE);
                n_slots += HANDLE_CHUNK_SLOTS;
                free_head = first + 1;
                free_tail = last + 1;
        }
        *index = free_head - 1;
        free_head = handle_slot_at(*index)->next_free;
        if (!free_head)
                free_tail = 0;
        return 0;
}

/* Under table_lock. */
static void slot_release(uint32_t index)
{
        struct handle_slot *slot = handle_slot_at(index);

        slot->next_free = 0;
        if (free_tail)
                handle_slot_at(free_tail - 1)->next_free = index + 1;
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
                struct handle_slot *slot = handle_slot_at(index);

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
        slot = handle_slot_at(index);
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
        FOREIGN_DISPATCH_IA(dat_handle, get_handle_type_func, handle_type);
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
        FOREIGN_DISPATCH_IA(dat_handle, set_consumer_context_func, context);
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
        FOREIGN_DISPATCH_IA(dat_handle, get_consumer_context_func, context);
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
