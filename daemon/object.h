/* The DAT objects a client described to datd (OBJ_CREATE): PZs, EVDs, CNOs,
 * LMRs, RMRs, EPs, SRQs.  The objects themselves live in the client; datd
 * keeps their descriptions to enforce the datd.conf quotas and to list them
 * on D-Bus.
 *
 * Each client keeps its objects in one table: an array of slots indexed by
 * the low bits of the obj_id, with a FIFO free list, so that finding, adding
 * and removing an object is O(1) and an object costs one slot (112 bytes) and
 * nothing else.  The high bits of an id count how often its slot was reused:
 * a stale id fails instead of reaching a newer object.  Each IA instance
 * links its own objects through the slots (by index, so that the array may
 * move), which lets IA_CLOSE drop exactly them.
 *
 * A table never shrinks (ids stay valid), so what it takes is charged to
 * the client's uid as it grows (max_object_bytes_per_uid), not per object:
 * a client that made many objects and freed them still holds the slots. */
#ifndef DATD_DAEMON_OBJECT_H
#define DATD_DAEMON_OBJECT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/config.h"
#include "proto/datp.h"

typedef struct Client Client;
typedef struct IaInstance IaInstance;

#define OBJECT_NONE UINT32_MAX
#define OBJECT_INDEX_BITS 26
/* Slot index + 1 is the low part of an id, so that no id is 0. */
#define OBJECT_SLOTS_MAX ((1u << OBJECT_INDEX_BITS) - 1)

typedef struct Object {
        struct datp_obj_desc desc;
        IaInstance *instance;           /* NULL: the slot is free */
        uint32_t id;                    /* its obj_id; a free slot keeps the last one */
        uint32_t next;                  /* the instance's list; in a free slot the free list */
        uint32_t prev;
        uint32_t conn_id;               /* an EP: its latest connection's id, 0 for none */
} Object;

/* What a client or one of its IA instances holds. */
typedef struct ObjectCounts {
        uint32_t n[DATP_OBJ_KIND_MAX + 1];      /* by enum datp_obj_kind */
        uint64_t lmr_bytes;                     /* sum of its LMRs' lengths */
} ObjectCounts;

typedef struct ObjectTable {
        Object *slots;
        uint32_t n_allocated;
        uint32_t n_touched;             /* slots [0, n_touched) have held an object */
        uint32_t free_head, free_tail;  /* FIFO: the slot freed longest ago is reused first */
        ObjectCounts counts;            /* over all the client's IA instances */
        /* The EPs by handle, for connection events (object_find_ep): open
         * addressing with linear probing, entries are slot index + 1 (0:
         * empty); ep_index_cap is a power of two, at least twice the EPs. */
        uint32_t *ep_index;
        uint32_t ep_index_cap;
        uint32_t n_eps;
        struct UidBudget *budget;       /* charged for slots and ep_index; NULL: none */
        uint64_t charged;               /* bytes, given back by object_table_done() */
} ObjectTable;

/* The quota a new or changed description would break. */
typedef struct ObjectQuota {
        const char *limit;              /* its datd.conf key, "max_eps" */
        uint64_t value;                 /* the limit */
        uint32_t dat_subtype;           /* DAT_RESOURCE_* for DAT_INSUFFICIENT_RESOURCES */
        uint32_t bit;                   /* its bit in Client.quota_logged */
} ObjectQuota;

void object_table_init(ObjectTable *t);
/* Frees the slots and gives back their charge; the objects must be gone
 * (object_drop_instance()). */
void object_table_done(ObjectTable *t);

/* The object with this id, or NULL. */
Object *object_find(ObjectTable *t, uint32_t id);

/* An EP of the client with this handle (the one libdat names in CONNECT,
 * CR_ACCEPT and the connection events), or NULL. */
Object *object_find_ep(ObjectTable *t, uint64_t handle);

/* Whether d (replacing old, NULL for a new object) keeps the instance
 * within limits: false with *ret naming the quota.  Kinds that share a limit
 * (EVD and CNO: max_evds) count together. */
bool object_quota_allows(const ObjectCounts *held, const Limits *l, const struct datp_obj_desc *d,
                         const struct datp_obj_desc *old, ObjectQuota *ret);

/* Adds an object of instance i (its quota checked).  -ENOMEM, -EDQUOT when
 * the table would grow past its uid's max_object_bytes_per_uid, or -ENOSPC
 * when it cannot grow. */
int object_add(Client *c, IaInstance *i, const struct datp_obj_desc *d, uint32_t *ret_id);

/* Replaces the description (kind and handle unchanged, quota checked). */
void object_update(Client *c, Object *o, const struct datp_obj_desc *d);

/* Frees the slot; the limits the object counted against may log a refusal
 * again (Client.quota_logged). */
void object_free(Client *c, Object *o);

/* Frees every object of instance i. */
void object_drop_instance(Client *c, IaInstance *i);

/* "EP", "LMR", ...; "?" for a kind out of range. */
const char *object_kind_to_string(uint32_t kind);

/* The DAT_INVALID_HANDLE subtype for a bad handle of this kind. */
uint32_t object_kind_invalid_handle(uint32_t kind);

/* EP: the DAT_EP_STATE name without its prefix ("CONNECTED"); SRQ: the
 * DAT_SRQ_STATE name ("OPERATIONAL"); "" for other kinds. */
const char *object_state_to_string(const struct datp_obj_desc *d);

#endif
