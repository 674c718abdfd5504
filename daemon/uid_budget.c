#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "daemon/log.h"
#include "daemon/uid_budget.h"

/* Descriptors datd holds whatever its clients do: the sockets it listens on,
 * the event loop's, the journal's, the bus's, a CM link being made. */
#define DATD_OWN_FDS 64u
/* A client: its socket and its pidfd (client_pidfd()). */
#define FDS_PER_CLIENT 2u
/* A bus.sock connection: its socket, and while a reply waits for it the
 * duplicate that watches its reading (write_progress.h). */
#define FDS_PER_BUS_CONNECTION 2u
/* A CM link, and the incoming sockets not identified yet that cm.c allows
 * per max_cm_links (CM_UNIDENTIFIED_PER_LINK). */
#define FDS_PER_CM_LINK 17u

static const char *const limit_names[_UID_RESOURCE_MAX] = {
        [UID_FDS] = "max_fds_per_uid",
        [UID_LISTENERS] = "max_listeners_per_uid",
        [UID_OBJECT_BYTES] = "max_object_bytes_per_uid",
};

/* The descriptors left beside the reserve, and the per-uid share of them. */
static void fd_budget_fit(UidBudgets *t, const Limits *l, uint64_t nofile)
{
        t->fd_reserve = DATD_OWN_FDS + (uint64_t) FDS_PER_CLIENT * l->max_clients +
                        (uint64_t) FDS_PER_BUS_CONNECTION * l->max_bus_connections +
                        (uint64_t) FDS_PER_CM_LINK * l->max_cm_links;
        if (nofile > t->fd_reserve)
                t->fd_pool = nofile - t->fd_reserve;
        else {
                /* The reserve cannot be kept whole: connections get half, so
                 * that accepting clients keeps the other. */
                t->fd_pool = nofile / 2;
                log_warning("RLIMIT_NOFILE (%" PRIu64 ") cannot hold the %" PRIu64 " descriptors "
                            "max_clients, max_bus_connections and max_cm_links may take: "
                            "connections may take %" PRIu64 ".", nofile, t->fd_reserve, t->fd_pool);
        }
        t->limit[UID_FDS] = l->max_fds_per_uid ? l->max_fds_per_uid : t->fd_pool / 4;
        if (t->limit[UID_FDS] > t->fd_pool) {
                log_warning("max_fds_per_uid (%" PRIu32 ") is more than the %" PRIu64 " descriptors "
                            "RLIMIT_NOFILE (%" PRIu64 ") leaves beside the reserve: lowered to that.",
                            l->max_fds_per_uid, t->fd_pool, nofile);
                t->limit[UID_FDS] = t->fd_pool;
        }
        log_debug("Descriptors: RLIMIT_NOFILE %" PRIu64 ", reserve %" PRIu64 ", pool %" PRIu64
                  ", per uid %" PRIu64 ".", nofile, t->fd_reserve, t->fd_pool, t->limit[UID_FDS]);
}

int uid_budgets_new(const Limits *l, uint64_t nofile, UidBudgets **ret)
{
        UidBudgets *t = calloc(1, sizeof(*t));

        if (!t)
                return -ENOMEM;
        fd_budget_fit(t, l, nofile);
        t->limit[UID_LISTENERS] = l->max_listeners_per_uid;
        t->limit[UID_OBJECT_BYTES] = l->max_object_bytes_per_uid;
        *ret = t;
        return 0;
}

UidBudgets *uid_budgets_free(UidBudgets *t)
{
        if (!t)
                return NULL;
        /* Not freed: a reference holder still points at it; a leak found
         * by the sanitizers beats a use after free. */
        if (t->budgets) {
                log_error("%" PRIu32 " uid budgets still referenced at exit (uid %u first).",
                          t->n_budgets, (unsigned) t->budgets->uid);
                return NULL;
        }
        free(t);
        return NULL;
}

UidBudget *uid_budget_ref(UidBudgets *t, uid_t uid)
{
        UidBudget *b;

        /* Walked only when a client is accepted: at most one entry per
         * client, like manager_clients_of_uid(). */
        LIST_FOREACH(budgets, b, t->budgets)
                if (b->uid == uid) {
                        b->refs++;
                        return b;
                }
        b = calloc(1, sizeof(*b));
        if (!b)
                return NULL;
        b->table = t;
        b->uid = uid;
        b->refs = 1;
        LIST_PREPEND(budgets, t->budgets, b);
        t->n_budgets++;
        return b;
}

UidBudget *uid_budget_unref(UidBudget *b)
{
        if (!b || --b->refs > 0)
                return NULL;
        for (unsigned r = 0; r < _UID_RESOURCE_MAX; r++)
                if (b->used[r])
                        log_error("uid %u gone with %" PRIu64 " of %s still charged.",
                                  (unsigned) b->uid, b->used[r], limit_names[r]);
        b->table->fds_used -= b->used[UID_FDS];
        LIST_REMOVE(budgets, b->table->budgets, b);
        b->table->n_budgets--;
        free(b);
        return NULL;
}

static uint64_t pool_room(const UidBudgets *t)
{
        return t->fds_used < t->fd_pool ? t->fd_pool - t->fds_used : 0;
}

static uint64_t own_room(const UidBudget *b, UidResource r)
{
        const UidBudgets *t = b->table;

        if (b->uid == 0)
                return UINT64_MAX;
        return b->used[r] < t->limit[r] ? t->limit[r] - b->used[r] : 0;
}

uint64_t uid_budget_room(const UidBudget *b, UidResource r)
{
        uint64_t room = own_room(b, r);

        if (r == UID_FDS && pool_room(b->table) < room)
                room = pool_room(b->table);
        return room;
}

const char *uid_budget_charge(UidBudget *b, UidResource r, uint64_t n)
{
        if (own_room(b, r) < n)
                return limit_names[r];
        if (r == UID_FDS && pool_room(b->table) < n)
                return "datd's descriptor pool (RLIMIT_NOFILE less the reserve)";
        b->used[r] += n;
        if (r == UID_FDS)
                b->table->fds_used += n;
        return NULL;
}

void uid_budget_release(UidBudget *b, UidResource r, uint64_t n)
{
        if (!b || n == 0)
                return;
        if (n > b->used[r]) {
                log_error("uid %u gives back %" PRIu64 " of %s but holds %" PRIu64 ".",
                          (unsigned) b->uid, n, limit_names[r], b->used[r]);
                n = b->used[r];
        }
        b->used[r] -= n;
        if (r == UID_FDS)
                b->table->fds_used -= n;
}

const char *uid_charge_take(UidCharge *ch, UidBudget *b, UidResource r, uint64_t n)
{
        const char *why = uid_budget_charge(b, r, n);

        if (why)
                return why;
        b->refs++;
        *ch = (UidCharge) { .budget = b, .resource = r, .n = n };
        return NULL;
}

void uid_charge_drop(UidCharge *ch)
{
        UidBudget *b = ch->budget;

        if (!b)
                return;
        ch->budget = NULL;
        uid_budget_release(b, ch->resource, ch->n);
        uid_budget_unref(b);
}
