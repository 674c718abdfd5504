/* Kept shm channels (channel_keep.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/channel_keep.h"
#include "daemon/client.h"
#include "daemon/config.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/manager.h"
#include "libdat/shm_link.h"
#include "proto/datp.h"

struct ChannelKeeper {
        Manager *manager;
        ConnCounters *counters;
        IdHash kept;                    /* ShmRegion by channel_id */
        uint32_t next_id;
        bool wrapped;                   /* next_id went round: skip ids in use */
        uint32_t n_spares;
};

int channel_keeper_new(Manager *m, ConnCounters *counters, ChannelKeeper **ret)
{
        ChannelKeeper *k = calloc(1, sizeof(*k));

        if (!k)
                return -ENOMEM;
        k->manager = m;
        k->counters = counters;
        if (id_hash_init(&k->kept) < 0) {
                free(k);
                return -ENOMEM;
        }
        *ret = k;
        return 0;
}

static const Limits *limits(const ChannelKeeper *k)
{
        return &k->manager->config->limits;
}

bool channel_keeper_wants(const ChannelKeeper *k, const IaInstance *a, const IaInstance *b)
{
        return a != b && a->client->version >= 4 && b->client->version >= 4 &&
               limits(k)->max_spare_channels_per_client > 0;
}

static uint32_t new_id(ChannelKeeper *k)
{
        for (;;) {
                uint32_t id = ++k->next_id;

                if (id == 0) {
                        k->wrapped = true;
                        continue;
                }
                if (!k->wrapped || !id_hash_find(&k->kept, id))
                        return id;
        }
}

int channel_keeper_adopt(ChannelKeeper *k, ShmRegion *r, IaInstance *a, IaInstance *b)
{
        if (!r->pipes)
                return -EINVAL;
        r->holder[0] = a;
        r->holder[1] = b;
        r->hold[0] = r->hold[1] = KEPT_IN_USE;
        r->refs++;
        id_hash_add(&k->kept, &r->hlink, new_id(k));
        return 0;
}

unsigned channel_keeper_side(const ShmRegion *r, const IaInstance *i)
{
        return r->holder[1] == i;
}

static void spare_link(ChannelKeeper *k, ShmRegion *r)
{
        LIST_PREPEND(spare0, r->holder[0]->spare0, r);
        LIST_PREPEND(spare1, r->holder[1]->spare1, r);
        r->holder[0]->client->n_spare_channels++;
        r->holder[1]->client->n_spare_channels++;
        r->spare = true;
        k->n_spares++;
}

static void spare_unlink(ChannelKeeper *k, ShmRegion *r)
{
        if (!r->spare)
                return;
        LIST_REMOVE(spare0, r->holder[0]->spare0, r);
        LIST_REMOVE(spare1, r->holder[1]->spare1, r);
        r->holder[0]->client->n_spare_channels--;
        r->holder[1]->client->n_spare_channels--;
        r->spare = false;
        k->n_spares--;
}

/* Holder `side` of r goes to state hold (KEPT_*), on its instance's list
 * of released channels exactly while that is KEPT_RELEASED. */
static void hold_set(ShmRegion *r, unsigned side, uint8_t hold)
{
        IaInstance *i = r->holder[side];

        if (r->hold[side] == KEPT_RELEASED && hold != KEPT_RELEASED) {
                if (side == 0)
                        LIST_REMOVE(released0, i->released0, r);
                else
                        LIST_REMOVE(released1, i->released1, r);
        } else if (r->hold[side] != KEPT_RELEASED && hold == KEPT_RELEASED) {
                if (side == 0)
                        LIST_PREPEND(released0, i->released0, r);
                else
                        LIST_PREPEND(released1, i->released1, r);
        }
        r->hold[side] = hold;
}

/* Holder `side` holds r no more: its client is no longer charged for it,
 * and the instance (which may be on its way out) is forgotten. */
static void holder_gone(ShmRegion *r, unsigned side)
{
        hold_set(r, side, KEPT_GONE);
        r->holder[side]->client->shm_bytes -= r->size;
        r->holder[side] = NULL;
}

/* Tells holder `side`, which released r, to drop it. */
static void tell_drop(ShmRegion *r, unsigned side)
{
        Client *c = r->holder[side]->client;
        struct datp_ev_channel_drop ev = {};
        int k;

        datp_header_init(&ev.hdr, DATP_EV_CHANNEL_DROP, c->version, sizeof(ev), 0);
        ev.ia_id = r->holder[side]->id;
        ev.channel_id = r->hlink.id;
        holder_gone(r, side);
        if (c->dying)
                return;
        /* Ending: a burst of them (the peer gone, room made) waits for
         * room in the client's queue, charged as the channel was. */
        k = client_send_ending(c, &ev.hdr, 0, r->size);
        if (k < 0)
                client_drop_later(c, k);
}

/* Frees r once both holders are gone and no end holds it; true if it did. */
static bool maybe_free(ChannelKeeper *k, ShmRegion *r)
{
        if (r->hold[0] != KEPT_GONE || r->hold[1] != KEPT_GONE || r->refs != 1)
                return false;
        id_hash_remove(&k->kept, &r->hlink);
        shm_channel_unref(r);
        return true;
}

/* r is to be reused no more: whoever released it is told, whoever still
 * uses it will be when it releases. */
static void doom(ChannelKeeper *k, ShmRegion *r)
{
        spare_unlink(k, r);
        if (!r->doomed)
                k->counters->shm_channels_dropped++;
        r->doomed = true;
        /* Never laid out again: datd needs the file no more (a holder
         * still in use keeps its mapping). */
        closep(&r->memfd);
        r->memfd = -1;
        for (unsigned side = 0; side < 2; side++)
                if (r->hold[side] == KEPT_RELEASED)
                        tell_drop(r, side);
        (void)maybe_free(k, r);
}

static bool spare_room(const ChannelKeeper *k, const Client *c)
{
        return c->n_spare_channels < limits(k)->max_spare_channels_per_client;
}

/* Both holders released r and no end holds it: a spare, laid out afresh
 * now (neither end touches it any more), or dropped. */
static void maybe_spare(ChannelKeeper *k, ShmRegion *r)
{
        int e;

        if (r->doomed || r->spare || r->refs != 1 || r->hold[0] != KEPT_RELEASED ||
            r->hold[1] != KEPT_RELEASED)
                return;
        if (!spare_room(k, r->holder[0]->client) || !spare_room(k, r->holder[1]->client)) {
                doom(k, r);
                return;
        }
        e = shm_link_reset_fd(r->memfd, r->size, r->ring_size);
        if (e < 0) {
                log_warning_errno(e, "Kept channel %" PRIu32 ": cannot lay it out again: %m",
                                  r->hlink.id);
                doom(k, r);
                return;
        }
        spare_link(k, r);
}

ShmRegion *channel_keeper_take(ChannelKeeper *k, IaInstance *a, IaInstance *b)
{
        ShmRegion *r = NULL;

        /* The spares a holds as side 0 with b as side 1, or the other way. */
        LIST_FOREACH(spare0, r, a->spare0)
                if (r->holder[1] == b)
                        break;
        if (!r)
                LIST_FOREACH(spare1, r, a->spare1)
                        if (r->holder[0] == b)
                                break;
        if (!r)
                return NULL;
        spare_unlink(k, r);
        hold_set(r, 0, KEPT_IN_USE);
        hold_set(r, 1, KEPT_IN_USE);
        r->refs += 2;
        return r;
}

void channel_keeper_end_gone(ChannelKeeper *k, ShmRegion *r)
{
        r->refs--;
        if (!maybe_free(k, r))
                maybe_spare(k, r);
}

void channel_keeper_release(ChannelKeeper *k, IaInstance *i, uint32_t channel_id)
{
        ShmRegion *r = id_hash_find(&k->kept, channel_id);
        unsigned side;

        if (!r || !i || (r->holder[0] != i && r->holder[1] != i))
                return;
        side = channel_keeper_side(r, i);
        if (r->hold[side] != KEPT_IN_USE)
                return;
        hold_set(r, side, KEPT_RELEASED);
        if (r->doomed) {
                tell_drop(r, side);
                (void)maybe_free(k, r);
                return;
        }
        maybe_spare(k, r);
}

void channel_keeper_drop_instance(ChannelKeeper *k, IaInstance *i)
{
        ID_HASH_FOREACH(&k->kept, ShmRegion, r, {
                if (r->holder[0] == i || r->holder[1] == i) {
                        spare_unlink(k, r);
                        holder_gone(r, channel_keeper_side(r, i));
                        doom(k, r);
                }
        });
}

/* Every channel c released, spare or not: one the other holder still
 * uses stays charged to that holder alone, which is told when it releases
 * it; c is told now (doom tells every side that released), which takes
 * the channel off c's lists. */
unsigned channel_keeper_drop_released_of(ChannelKeeper *k, Client *c)
{
        unsigned n = 0;
        IaInstance *i;

        LIST_FOREACH(instances, i, c->instances) {
                while (i->released0) {
                        doom(k, i->released0);
                        n++;
                }
                while (i->released1) {
                        doom(k, i->released1);
                        n++;
                }
        }
        return n;
}

uint32_t channel_keeper_count(const ChannelKeeper *k)
{
        return k->kept.n;
}

uint32_t channel_keeper_spares(const ChannelKeeper *k)
{
        return k->n_spares;
}

ChannelKeeper *channel_keeper_free(ChannelKeeper *k)
{
        if (!k)
                return NULL;
        ID_HASH_FOREACH(&k->kept, ShmRegion, r, {
                id_hash_remove(&k->kept, &r->hlink);
                /* Its ends (if any are left) hold their own references. */
                r->spare = false;
                r->holder[0] = r->holder[1] = NULL;
                shm_channel_unref(r);
        });
        free(k->kept.buckets);
        free(k);
        return NULL;
}
