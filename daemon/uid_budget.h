/* What datd holds for each uid, over all its clients: the per-uid limits of
 * datd.conf.  The per-client limits times max_clients_per_uid are far more
 * than datd can give one user (the review's r3, r6, r8: descriptors, the
 * conn_qual_any_range, memory), so each uid has one budget per resource, and
 * datd's descriptors have besides one pool shared by all uids that leaves a
 * reserve for accepting clients, bus connections and CM links.
 *
 * Root (uid 0) is held to the pool but to no per-uid limit: it is the
 * administrator, and what it needs must not be refused because datd cannot
 * tell a busy root job from a hostile one.
 *
 * Ownership: the Manager owns the UidBudgets.  A Client takes a reference
 * to its uid's UidBudget when it is accepted and drops it in client_free();
 * whatever it is charged for (listeners, its object table, queued
 * descriptors) is given back before that.  What can outlive a client (a shm
 * region: its descriptor stays open until both ends are gone) carries a
 * UidCharge, which holds its own reference and gives back exactly once. */
#ifndef DATD_DAEMON_UID_BUDGET_H
#define DATD_DAEMON_UID_BUDGET_H

#include <stdint.h>
#include <sys/types.h>

#include "daemon/config.h"
#include "daemon/list.h"

typedef enum UidResource {
        UID_FDS,                        /* max_fds_per_uid, and the pool */
        UID_LISTENERS,                  /* max_listeners_per_uid */
        UID_OBJECT_BYTES,               /* max_object_bytes_per_uid */
        _UID_RESOURCE_MAX,
} UidResource;

typedef struct UidBudgets UidBudgets;
typedef struct UidBudget UidBudget;

struct UidBudget {
        UidBudgets *table;
        uid_t uid;
        unsigned refs;                  /* clients of the uid, and UidCharges */
        uint64_t used[_UID_RESOURCE_MAX];
        LIST_FIELDS(UidBudget, budgets);
};

struct UidBudgets {
        uint64_t limit[_UID_RESOURCE_MAX];      /* per uid, as in effect */
        uint64_t fd_reserve;            /* kept for clients, bus and CM links */
        uint64_t fd_pool;               /* what all uids together may be charged */
        uint64_t fds_used;
        UidBudget *budgets;             /* uids with a client or a charge */
        uint32_t n_budgets;
};

/* One charge held by an object that may outlive its client. */
typedef struct UidCharge {
        UidBudget *budget;              /* NULL: nothing held */
        UidResource resource;
        uint64_t n;
} UidCharge;

/* The limits from l, with RLIMIT_NOFILE nofile: the reserve is what
 * l's clients, bus connections and CM links can take; a budget that cannot
 * fit into what is left is lowered, with a warning. */
int uid_budgets_new(const Limits *l, uint64_t nofile, UidBudgets **ret);
/* Every budget must have been given back; one that was not is logged. */
UidBudgets *uid_budgets_free(UidBudgets *t);

/* The uid's budget, made on first use, with a reference; NULL: no memory. */
UidBudget *uid_budget_ref(UidBudgets *t, uid_t uid);
/* Drops a reference (NULL is fine); the last one frees the entry. */
UidBudget *uid_budget_unref(UidBudget *b);

/* Charges n of r: NULL, or (nothing charged) the limit that refuses it, by
 * its datd.conf name. */
const char *uid_budget_charge(UidBudget *b, UidResource r, uint64_t n);
void uid_budget_release(UidBudget *b, UidResource r, uint64_t n);
/* How much more of r b may be charged (UINT64_MAX: no per-uid limit). */
uint64_t uid_budget_room(const UidBudget *b, UidResource r);

/* uid_budget_charge() into a UidCharge that takes its own reference;
 * uid_charge_drop() gives it back, once (a second call does nothing). */
const char *uid_charge_take(UidCharge *ch, UidBudget *b, UidResource r, uint64_t n);
void uid_charge_drop(UidCharge *ch);

#endif
