/* DAT objects and their handles.
 *
 * Every DAT object (IA, EVD, and later PZ, LMR, RMR, EP, CNO, SRQ, PSP, RSP,
 * CR, CSP) embeds struct dat_object as its first member.  The consumer never
 * sees a pointer: a DAT handle is an encoded (tag, generation, slot) value
 * naming a slot of a process-wide handle table.  Looking a handle up never
 * dereferences the handle itself, only the table, so NULL, freed handles,
 * handles of another type and arbitrary garbage all come back as "no such
 * object" (DAT_INVALID_HANDLE) instead of a crash; a freed handle stays invalid
 * because its slot's generation moved on.  (Once another provider registered,
 * a value that could be an address is read as that provider's object first:
 * foreign.h.)
 *
 * Ownership: an object has a parent (the IA it was created on; NULL for an
 * IA) and is on its parent's list of children, so that an abrupt
 * dat_ia_close() can destroy everything and a graceful one can refuse while
 * children live.  `users` counts other objects that depend on this one (EPs
 * on a PZ, IAs using an EVD as their async EVD): such an object cannot be
 * freed gracefully.
 *
 * Locking: lookups are lock-free.  Creating, freeing and (un)linking objects
 * take object_lock, a process-wide mutex held only for list and counter
 * updates, never across a round trip to datd.  Like every DAT implementation,
 * libdat leaves it to the consumer not to free an object while another
 * thread is still using it (dat_ia_close(3DAT), USAGE). */
#ifndef DATD_LIBDAT_HANDLE_H
#define DATD_LIBDAT_HANDLE_H

#include <stddef.h>
#include <stdint.h>

#include "libdat/handle_table.h"
#include "libdat/libdat.h"

struct dat_object;

/* What differs between object kinds, one static table per kind. */
struct dat_object_ops {
        DAT_HANDLE_TYPE type;
        const char *name;               /* "IA", "EVD", ... for traces */
        /* The DAT_INVALID_HANDLE subtype naming this kind when a handle of it
         * is the bad argument (DAT_INVALID_HANDLE_IA, ...). */
        DAT_RETURN_SUBTYPE invalid_subtype;
        /* Tears the object down for an abrupt close of its IA: releases what
         * it holds, calls dat_object_fini() and frees it.  Never fails. */
        void (*destroy)(struct dat_object *obj);
};

struct dat_list {
        struct dat_list *prev, *next;
};

struct dat_object {
        const struct dat_object_ops *ops;
        DAT_HANDLE handle;              /* the consumer's name for this object */
        struct dat_object *parent;      /* the owning IA, NULL for an IA */
        struct dat_list children;       /* objects created on this one, oldest first */
        struct dat_list sibling;        /* entry in parent->children */
        unsigned n_children;
        unsigned users;                 /* other objects depending on this one */
        bool closing;                   /* being freed: no new children (under object_lock) */
        uint64_t context;               /* DAT_CONTEXT, accessed atomically */
};

#define dat_container_of(ptr, type, member) \
        ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Defines struct name *name_lookup(DAT_HANDLE): the object of that kind a
 * handle names, or NULL.  struct name embeds struct dat_object as `obj`. */
#define DAT_DEFINE_LOOKUP(name, handle_type)                                          \
        struct name *name##_lookup(DAT_HANDLE handle)                                  \
        {                                                                              \
                struct dat_object *o = dat_object_lookup(handle, handle_type);         \
                                                                                       \
                return o ? dat_container_of(o, struct name, obj) : NULL;               \
        }

/* Gives obj a handle and links it under parent (NULL for an IA).  Returns
 * DAT_SUCCESS; DAT_INSUFFICIENT_RESOURCES when memory or the table's limit
 * is exhausted; DAT_INVALID_HANDLE (of the parent's kind) when the parent is
 * being freed.  On failure obj is not registered. */
DAT_RETURN dat_object_init(struct dat_object *obj, const struct dat_object_ops *ops,
                           struct dat_object *parent);

/* Invalidates obj's handle and unlinks it from its parent; the caller frees
 * the memory.  Accepts an object that dat_object_init() never registered
 * (ops == NULL).  Children must be gone already. */
void dat_object_fini(struct dat_object *obj);

/* Finds the live object a handle names, if it is of the given type; NULL
 * otherwise.  Safe on any value. */
static inline struct dat_object *dat_object_lookup(DAT_HANDLE handle, DAT_HANDLE_TYPE type)
{
        return handle_table_lookup(handle, (int)type);
}

/* The handle table's record of another provider's IA (foreign.h): no DAT
 * object of libdat's (no DAT_HANDLE_TYPE has this kind), so that no lookup
 * of libdat's objects, of a kind or of any, finds one. */
#define DAT_HANDLE_TYPE_FOREIGN_IA ((DAT_HANDLE_TYPE)0x7e)

/* Same, for any type of libdat's objects. */
static inline struct dat_object *dat_object_lookup_any(DAT_HANDLE handle)
{
        struct dat_object *o = handle_table_lookup(handle, -1);

        return o && o->ops->type != DAT_HANDLE_TYPE_FOREIGN_IA ? o : NULL;
}

/* The error for a bad handle of this type: DAT_INVALID_HANDLE with the
 * subtype naming the kind. */
DAT_RETURN dat_invalid_handle(DAT_HANDLE_TYPE type);

/* For entry points whose object kind is not built yet: DAT_INVALID_HANDLE
 * (of that kind) when handle is not a live object of type, else
 * DAT_NOT_IMPLEMENTED. */
DAT_RETURN dat_not_implemented_on(DAT_HANDLE handle, DAT_HANDLE_TYPE type);

/* Destroys every child of parent, newest first (an object is always newer
 * than what it depends on), through its ops->destroy. */
void dat_object_destroy_children(struct dat_object *parent);

/* The process-wide lock for object lists and counters (see above). */
void dat_object_lock(void);
void dat_object_unlock(void);

#define dat_list_for_each(pos, head) \
        for (struct dat_list *pos = (head)->next; pos != (head); pos = pos->next)

#endif
