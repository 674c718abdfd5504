/* A client's table of registered DAT objects.  See object.h. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include <dat2/udat.h>

#include "common/macro.h"
#include "daemon/client.h"
#include "daemon/object.h"

#define OBJECT_INDEX_MASK OBJECT_SLOTS_MAX
#define OBJECT_GENERATIONS (1u << (32 - OBJECT_INDEX_BITS))
#define OBJECT_TABLE_MIN 64

/* The small slot is the point of the table: keep it at 112 bytes. */
_Static_assert(sizeof(Object) == 112, "Object grew");
/* proto/ keeps its own copy of the state ranges. */
_Static_assert(DATP_EP_STATE_MAX == DAT_EP_STATE_CONNECTED_MULTI_PATH, "DAT_EP_STATE range");
_Static_assert(DATP_SRQ_STATE_MAX == DAT_SRQ_STATE_SHUTDOWN, "DAT_SRQ_STATE range");

/* Per kind: its name, the datd.conf limit on its count, and the DAT
 * subtypes datd answers with. */
static const struct {
        const char *name;
        const char *limit;
        size_t limit_offset;            /* a uint32_t in Limits */
        uint32_t resource;              /* DAT_INSUFFICIENT_RESOURCES subtype */
        uint32_t invalid_handle;        /* DAT_INVALID_HANDLE subtype */
} kinds[DATP_OBJ_KIND_MAX + 1] = {
#define KIND(k, n, l, res, bad) [k] = { n, #l, offsetof(Limits, l), res, bad }
        KIND(DATP_OBJ_PZ, "PZ", max_pzs, DAT_RESOURCE_PROTECTION_DOMAIN, DAT_INVALID_HANDLE_PZ),
        /* DAT has no invalid-handle subtype for an EVD as such, only per role. */
        KIND(DATP_OBJ_EVD, "EVD", max_evds, DAT_RESOURCE_TEVD, DAT_NO_SUBTYPE),
        KIND(DATP_OBJ_CNO, "CNO", max_evds, DAT_RESOURCE_TEVD, DAT_INVALID_HANDLE_CNO),
        KIND(DATP_OBJ_LMR, "LMR", max_lmrs, DAT_RESOURCE_MEMORY_REGION, DAT_INVALID_HANDLE_LMR),
        KIND(DATP_OBJ_RMR, "RMR", max_rmrs, DAT_RESOURCE_MEMORY_REGION, DAT_INVALID_HANDLE_RMR),
        KIND(DATP_OBJ_EP, "EP", max_eps, DAT_RESOURCE_TEP, DAT_INVALID_HANDLE_EP),
        KIND(DATP_OBJ_SRQ, "SRQ", max_srqs, DAT_RESOURCE_SRQ, DAT_INVALID_HANDLE_SRQ),
#undef KIND
};

static const char *const ep_state_names[DATP_EP_STATE_MAX + 1] = {
        [DAT_EP_STATE_UNCONNECTED] = "UNCONNECTED",
        [DAT_EP_STATE_UNCONFIGURED_UNCONNECTED] = "UNCONFIGURED_UNCONNECTED",
        [DAT_EP_STATE_RESERVED] = "RESERVED",
        [DAT_EP_STATE_UNCONFIGURED_RESERVED] = "UNCONFIGURED_RESERVED",
        [DAT_EP_STATE_PASSIVE_CONNECTION_PENDING] = "PASSIVE_CONNECTION_PENDING",
        [DAT_EP_STATE_UNCONFIGURED_PASSIVE] = "UNCONFIGURED_PASSIVE",
        [DAT_EP_STATE_ACTIVE_CONNECTION_PENDING] = "ACTIVE_CONNECTION_PENDING",
        [DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING] = "TENTATIVE_CONNECTION_PENDING",
        [DAT_EP_STATE_UNCONFIGURED_TENTATIVE] = "UNCONFIGURED_TENTATIVE",
        [DAT_EP_STATE_CONNECTED] = "CONNECTED",
        [DAT_EP_STATE_DISCONNECT_PENDING] = "DISCONNECT_PENDING",
        [DAT_EP_STATE_DISCONNECTED] = "DISCONNECTED",
        [DAT_EP_STATE_COMPLETION_PENDING] = "COMPLETION_PENDING",
        [DAT_EP_STATE_CONNECTED_SINGLE_PATH] = "CONNECTED_SINGLE_PATH",
        [DAT_EP_STATE_CONNECTED_MULTI_PATH] = "CONNECTED_MULTI_PATH",
};

static const char *const srq_state_names[DATP_SRQ_STATE_MAX + 1] = {
        [DAT_SRQ_STATE_ERROR] = "ERROR",
        [DAT_SRQ_STATE_OPERATIONAL] = "OPERATIONAL",
        [DAT_SRQ_STATE_SHUTDOWN] = "SHUTDOWN",
};

static bool kind_is_valid(uint32_t kind)
{
        return kind >= 1 && kind <= DATP_OBJ_KIND_MAX;
}

const char *object_kind_to_string(uint32_t kind)
{
        return kind_is_valid(kind) ? kinds[kind].name : "?";
}

uint32_t object_kind_invalid_handle(uint32_t kind)
{
        return kind_is_valid(kind) ? kinds[kind].invalid_handle : DAT_NO_SUBTYPE;
}

const char *object_state_to_string(const struct datp_obj_desc *d)
{
        /* datp_validate() kept the state in range for its kind. */
        if (d->kind == DATP_OBJ_EP && d->state <= DATP_EP_STATE_MAX)
                return ep_state_names[d->state];
        if (d->kind == DATP_OBJ_SRQ && d->state <= DATP_SRQ_STATE_MAX)
                return srq_state_names[d->state];
        return "";
}

static uint32_t limit_of(const Limits *l, uint32_t kind)
{
        return *(const uint32_t *) ((const char *) l + kinds[kind].limit_offset);
}

/* Objects counted against the same limit as kind (EVDs and CNOs together). */
static uint64_t count_against_limit(const ObjectCounts *held, uint32_t kind)
{
        uint64_t n = 0;

        for (uint32_t k = 1; k <= DATP_OBJ_KIND_MAX; k++)
                if (kinds[k].limit_offset == kinds[kind].limit_offset)
                        n += held->n[k];
        return n;
}

static uint64_t lmr_bytes_of(const struct datp_obj_desc *d)
{
        return d && d->kind == DATP_OBJ_LMR ? d->length : 0;
}

/* Client.quota_logged: bit 0 for max_lmr_bytes, and for a count the bit of
 * the first kind counted against the same limit (CNO: EVD's). */
static uint32_t limit_bit(uint32_t kind)
{
        for (uint32_t k = 1; k < kind; k++)
                if (kinds[k].limit_offset == kinds[kind].limit_offset)
                        return 1u << k;
        return 1u << kind;
}

#define LMR_BYTES_BIT 1u

bool object_quota_allows(const ObjectCounts *held, const Limits *l, const struct datp_obj_desc *d,
                         const struct datp_obj_desc *old, ObjectQuota *ret)
{
        uint64_t bytes = held->lmr_bytes - lmr_bytes_of(old);

        if (!old && count_against_limit(held, d->kind) >= limit_of(l, d->kind)) {
                *ret = (ObjectQuota) { kinds[d->kind].limit, limit_of(l, d->kind),
                                       kinds[d->kind].resource, limit_bit(d->kind) };
                return false;
        }
        /* Written so that no sum can wrap: a client picks the lengths. */
        if (lmr_bytes_of(d) > l->max_lmr_bytes || bytes > l->max_lmr_bytes - lmr_bytes_of(d)) {
                *ret = (ObjectQuota) { "max_lmr_bytes", l->max_lmr_bytes, DAT_RESOURCE_MEMORY,
                                       LMR_BYTES_BIT };
                return false;
        }
        return true;
}

void object_table_init(ObjectTable *t)
{
        *t = (ObjectTable) { .free_head = OBJECT_NONE, .free_tail = OBJECT_NONE };
}

void object_table_done(ObjectTable *t)
{
        free(t->slots);
        free(t->ep_index);
        uid_budget_release(t->budget, UID_OBJECT_BYTES, t->charged);
        object_table_init(t);
}

/* bytes more for the table, within its uid's budget: 0 or -EDQUOT. */
static int table_charge(ObjectTable *t, uint64_t bytes)
{
        if (t->budget && uid_budget_charge(t->budget, UID_OBJECT_BYTES, bytes))
                return -EDQUOT;
        t->charged += bytes;
        return 0;
}

static void table_uncharge(ObjectTable *t, uint64_t bytes)
{
        uid_budget_release(t->budget, UID_OBJECT_BYTES, bytes);
        t->charged -= bytes;
}

/* ---- the EPs by handle ----------------------------------------------------
 * Only EPs: connection events name an EP by the handle its process knows
 * it by, and a handle cannot change (OBJ_UPDATE refuses that). */
static uint32_t handle_hash(uint64_t h)
{
        /* A 64-bit finaliser: handles differ in few low bits. */
        h ^= h >> 33;
        h *= UINT64_C(0xff51afd7ed558ccd);
        h ^= h >> 33;
        return (uint32_t) h;
}

static void ep_index_put(uint32_t *index, uint32_t cap, const Object *slots, uint32_t slot)
{
        uint32_t pos = handle_hash(slots[slot].desc.handle) & (cap - 1);

        while (index[pos] != 0)
                pos = (pos + 1) & (cap - 1);
        index[pos] = slot + 1;
}

/* Room for one more EP: -ENOMEM when the index cannot grow. */
static int ep_index_reserve(ObjectTable *t)
{
        uint32_t cap = t->ep_index_cap ? t->ep_index_cap * 2 : 64;
        uint64_t more = (uint64_t) (cap - t->ep_index_cap) * sizeof(*t->ep_index);
        uint32_t *index;

        if ((uint64_t) (t->n_eps + 1) * 2 <= t->ep_index_cap)
                return 0;
        if (table_charge(t, more) < 0)
                return -EDQUOT;
        index = calloc(cap, sizeof(*index));
        if (!index) {
                table_uncharge(t, more);
                return -ENOMEM;
        }
        for (uint32_t i = 0; i < t->ep_index_cap; i++)
                if (t->ep_index[i] != 0)
                        ep_index_put(index, cap, t->slots, t->ep_index[i] - 1);
        free(t->ep_index);
        t->ep_index = index;
        t->ep_index_cap = cap;
        return 0;
}

/* Takes slot out, closing the gap behind it (backward shift): an entry
 * moves into the gap unless its home lies cyclically in (gap, its place]. */
static void ep_index_remove(ObjectTable *t, uint32_t slot)
{
        uint32_t mask = t->ep_index_cap - 1, gap, pos;

        if (t->ep_index_cap == 0)
                return;
        gap = handle_hash(t->slots[slot].desc.handle) & mask;
        while (t->ep_index[gap] != 0 && t->ep_index[gap] != slot + 1)
                gap = (gap + 1) & mask;
        if (t->ep_index[gap] == 0)
                return;
        t->n_eps--;
        for (pos = (gap + 1) & mask; t->ep_index[pos] != 0; pos = (pos + 1) & mask) {
                uint32_t home = handle_hash(t->slots[t->ep_index[pos] - 1].desc.handle) & mask;
                bool stays = gap < pos ? gap < home && home <= pos : gap < home || home <= pos;

                if (stays)
                        continue;
                t->ep_index[gap] = t->ep_index[pos];
                gap = pos;
        }
        t->ep_index[gap] = 0;
}

Object *object_find_ep(ObjectTable *t, uint64_t handle)
{
        uint32_t mask = t->ep_index_cap - 1;

        if (t->ep_index_cap == 0)
                return NULL;
        for (uint32_t pos = handle_hash(handle) & mask; t->ep_index[pos] != 0;
             pos = (pos + 1) & mask) {
                Object *o = &t->slots[t->ep_index[pos] - 1];

                if (o->desc.handle == handle)
                        return o;
        }
        return NULL;
}

Object *object_find(ObjectTable *t, uint32_t id)
{
        uint32_t low = id & OBJECT_INDEX_MASK;
        Object *o;

        if (low == 0 || low > t->n_touched)
                return NULL;
        o = &t->slots[low - 1];
        return o->instance && o->id == id ? o : NULL;
}

static int object_table_grow(ObjectTable *t)
{
        uint32_t n = t->n_allocated ? t->n_allocated : OBJECT_TABLE_MIN / 2;
        uint64_t room = t->budget ? uid_budget_room(t->budget, UID_OBJECT_BYTES) / sizeof(Object)
                                  : UINT64_MAX;
        Object *slots;

        if (t->n_allocated >= OBJECT_SLOTS_MAX)
                return -ENOSPC;
        n = n > OBJECT_SLOTS_MAX / 2 ? OBJECT_SLOTS_MAX : n * 2;
        /* Short of a doubling, what the budget has room for. */
        if (n - t->n_allocated > room)
                n = t->n_allocated + (uint32_t) room;
        if (n == t->n_allocated || table_charge(t, (uint64_t) (n - t->n_allocated) * sizeof(Object)) < 0)
                return -EDQUOT;
        slots = reallocarray(t->slots, n, sizeof(*slots));
        if (!slots) {
                table_uncharge(t, (uint64_t) (n - t->n_allocated) * sizeof(Object));
                return -ENOMEM;
        }
        t->slots = slots;
        t->n_allocated = n;
        return 0;
}

/* A slot for a new object: the free slot freed longest ago, else a fresh
 * one.  Returns its index, or -errno. */
static int64_t object_table_take_slot(ObjectTable *t)
{
        uint32_t index;
        int r;

        if (t->free_head != OBJECT_NONE) {
                index = t->free_head;
                t->free_head = t->slots[index].next;
                if (t->free_head == OBJECT_NONE)
                        t->free_tail = OBJECT_NONE;
                /* The next generation of the slot's id. */
                t->slots[index].id = (t->slots[index].id & ~OBJECT_INDEX_MASK) +
                                     (1u << OBJECT_INDEX_BITS);
                t->slots[index].id |= index + 1;
                return index;
        }
        if (t->n_touched == t->n_allocated) {
                r = object_table_grow(t);
                if (r < 0)
                        return r;
        }
        index = t->n_touched++;
        t->slots[index].id = index + 1;
        return index;
}

static void counts_change(ObjectCounts *c, const struct datp_obj_desc *d, int sign)
{
        c->n[d->kind] += sign;
        c->lmr_bytes += sign * (int64_t) lmr_bytes_of(d);
}

static void object_count(Client *c, const Object *o, int sign)
{
        counts_change(&c->objects.counts, &o->desc, sign);
        counts_change(&o->instance->counts, &o->desc, sign);
        c->manager->n_objects += sign;
}

int object_add(Client *c, IaInstance *i, const struct datp_obj_desc *d, uint32_t *ret_id)
{
        ObjectTable *t = &c->objects;
        int64_t index;
        Object *o;

        if (d->kind == DATP_OBJ_EP) {
                int r = ep_index_reserve(t);

                if (r < 0)
                        return r;
        }
        index = object_table_take_slot(t);
        if (index < 0)
                return (int) index;
        o = &t->slots[index];
        o->desc = *d;
        o->instance = i;
        o->conn_id = 0;
        /* At the head of the instance's list. */
        o->prev = OBJECT_NONE;
        o->next = i->objects;
        if (i->objects != OBJECT_NONE)
                t->slots[i->objects].prev = (uint32_t) index;
        i->objects = (uint32_t) index;
        object_count(c, o, +1);
        if (d->kind == DATP_OBJ_EP) {
                ep_index_put(t->ep_index, t->ep_index_cap, t->slots, (uint32_t) index);
                t->n_eps++;
        }
        *ret_id = o->id;
        return 0;
}

void object_update(Client *c, Object *o, const struct datp_obj_desc *d)
{
        object_count(c, o, -1);
        o->desc = *d;
        object_count(c, o, +1);
}

void object_free(Client *c, Object *o)
{
        ObjectTable *t = &c->objects;
        uint32_t index = (uint32_t) (o - t->slots);

        if (o->desc.kind == DATP_OBJ_EP)
                ep_index_remove(t, index);
        object_count(c, o, -1);
        c->quota_logged &= ~(limit_bit(o->desc.kind) | (lmr_bytes_of(&o->desc) ? LMR_BYTES_BIT : 0));
        if (o->prev != OBJECT_NONE)
                t->slots[o->prev].next = o->next;
        else
                o->instance->objects = o->next;
        if (o->next != OBJECT_NONE)
                t->slots[o->next].prev = o->prev;
        o->instance = NULL;
        o->desc.kind = 0;
        /* At the tail of the free list. */
        o->next = OBJECT_NONE;
        if (t->free_tail != OBJECT_NONE)
                t->slots[t->free_tail].next = index;
        else
                t->free_head = index;
        t->free_tail = index;
}

void object_drop_instance(Client *c, IaInstance *i)
{
        while (i->objects != OBJECT_NONE)
                object_free(c, &c->objects.slots[i->objects]);
}
