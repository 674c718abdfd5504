/* A hash table of objects by their 32-bit id, for datd's tables of
 * listeners, requests, connection ends and kept channels.  An object joins
 * one by an IdLink member that is its first: the table never allocates an
 * entry, only its buckets. */
#ifndef DATD_DAEMON_ID_HASH_H
#define DATD_DAEMON_ID_HASH_H

#include <stdint.h>

typedef struct IdLink IdLink;
struct IdLink {
        IdLink *next;
        uint32_t id;
};

typedef struct IdHash {
        IdLink **buckets;
        uint32_t mask;                  /* buckets - 1 */
        uint32_t n;
} IdHash;

/* 0 or -ENOMEM.  The buckets are freed with free(h->buckets). */
int id_hash_init(IdHash *h);

/* The entry with that id (its IdLink, the object's start), or NULL. */
void *id_hash_find(const IdHash *h, uint32_t id);

/* Adds e under id (not in the table yet); never fails: a table that cannot
 * grow gets longer chains. */
void id_hash_add(IdHash *h, IdLink *e, uint32_t id);

/* Removes e, if it is in the table. */
void id_hash_remove(IdHash *h, IdLink *e);

/* Calls fn for every entry; fn may remove the entry it is given. */
#define ID_HASH_FOREACH(h, type, var, body)                                     \
        for (uint32_t _b = 0; _b <= (h)->mask; _b++)                            \
                for (IdLink *_e = (h)->buckets[_b], *_n; _e; _e = _n) {         \
                        type *var = (type *) _e;                                \
                        _n = _e->next;                                          \
                        body                                                    \
                }

#endif
