/* Hash tables of objects by their 32-bit id (id_hash.h). */
#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include "daemon/id_hash.h"

/* The buckets start at ID_HASH_MIN and double whenever they hold two
 * entries per bucket.  Ids come from counters, so consecutive ids land in
 * consecutive buckets. */
#define ID_HASH_MIN 1024u
#define ID_HASH_MAX (1u << 24)

int id_hash_init(IdHash *h)
{
        h->buckets = calloc(ID_HASH_MIN, sizeof(*h->buckets));
        h->mask = ID_HASH_MIN - 1;
        return h->buckets ? 0 : -ENOMEM;
}

void *id_hash_find(const IdHash *h, uint32_t id)
{
        IdLink *e = h->buckets[id & h->mask];

        while (e && e->id != id)
                e = e->next;
        return e;
}

/* Doubles the buckets; on failure the chains just grow longer. */
static void id_hash_grow(IdHash *h)
{
        uint32_t size = (h->mask + 1) * 2;
        IdLink **b;

        if (size > ID_HASH_MAX || !(b = calloc(size, sizeof(*b))))
                return;
        for (uint32_t i = 0; i <= h->mask; i++)
                for (IdLink *e = h->buckets[i], *next; e; e = next) {
                        next = e->next;
                        e->next = b[e->id & (size - 1)];
                        b[e->id & (size - 1)] = e;
                }
        free(h->buckets);
        h->buckets = b;
        h->mask = size - 1;
}

void id_hash_add(IdHash *h, IdLink *e, uint32_t id)
{
        if (h->n >= 2 * (h->mask + 1))
                id_hash_grow(h);
        e->id = id;
        e->next = h->buckets[id & h->mask];
        h->buckets[id & h->mask] = e;
        h->n++;
}

void id_hash_remove(IdHash *h, IdLink *e)
{
        IdLink **p = &h->buckets[e->id & h->mask];

        while (*p && *p != e)
                p = &(*p)->next;
        if (*p) {
                *p = e->next;
                h->n--;
        }
}
