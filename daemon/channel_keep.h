/* Kept shm channels (PROTOCOL.md, "Kept channels"): a connection between
 * two IA instances of this host that both speak version 4 gets a channel
 * whose two ends keep it when the connection ends (the region mapped, the
 * doorbells open) and say so with CHANNEL_RELEASE.  Once both have, datd
 * lays the region out afresh and holds it as a spare of that pair, which
 * the pair's next connection takes instead of a new one: no memfd, pipes,
 * mappings or page faults per connection, which were a quarter of a
 * connection's CPU.
 *
 * The keeper owns every kept region (one reference of it; each Conn end on
 * it holds another) until both holders are gone: an instance that closes
 * or dies is gone at once, and one that datd tells to drop the channel
 * (EV_CHANNEL_DROP, only ever after its release) is gone then.  A kept
 * region is charged to both holders' max_shm_bytes_per_client until that
 * holder is gone; spares also count against max_spare_channels_per_client
 * of both, and a spare over it is dropped instead.  A holder that needs
 * room has every channel it released dropped, spare or not: a peer that
 * never releases its end must not keep it charged to the one that did. */
#ifndef DATD_DAEMON_CHANNEL_KEEP_H
#define DATD_DAEMON_CHANNEL_KEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/channel.h"

typedef struct Client Client;
typedef struct IaInstance IaInstance;
typedef struct Manager Manager;
typedef struct ChannelKeeper ChannelKeeper;
typedef struct ConnCounters ConnCounters;

/* counters: where drops are counted (shm_channels_dropped). */
int channel_keeper_new(Manager *m, ConnCounters *counters, ChannelKeeper **ret);
/* Frees every kept region (datd stops: nobody is told). */
ChannelKeeper *channel_keeper_free(ChannelKeeper *k);

/* Whether a channel between these two instances may be kept: both speak
 * version 4, they are not one instance (whose two ends would keep it
 * under one id), and spares are allowed at all. */
bool channel_keeper_wants(const ChannelKeeper *k, const IaInstance *a, const IaInstance *b);

/* Keeps r (a new region with its two ends' references, already charged to
 * both clients), a's end side 0 and b's side 1: gives it its channel_id
 * (r->hlink.id).  0, or -ENOMEM (r stays an ordinary region). */
int channel_keeper_adopt(ChannelKeeper *k, ShmRegion *r, IaInstance *a, IaInstance *b);

/* A spare channel of instances a and b, laid out afresh, both holders in
 * use again, with a reference for each of the two ends; or NULL. */
ShmRegion *channel_keeper_take(ChannelKeeper *k, IaInstance *a, IaInstance *b);

/* The end of side of r for instance i (0 or 1).  r is kept and i holds it. */
unsigned channel_keeper_side(const ShmRegion *r, const IaInstance *i);

/* A Conn end on the kept r is gone: drops its reference. */
void channel_keeper_end_gone(ChannelKeeper *k, ShmRegion *r);

/* CHANNEL_RELEASE of instance i; an id that is no kept channel i uses is
 * ignored (it may have been dropped meanwhile). */
void channel_keeper_release(ChannelKeeper *k, IaInstance *i, uint32_t channel_id);

/* Instance i closes or its client goes: it holds none of its kept
 * channels any more, and its peers are told to drop theirs.  After its
 * connection ends are gone (conn_drop_instance). */
void channel_keeper_drop_instance(ChannelKeeper *k, IaInstance *i);

/* Drops every kept channel client c released, spares and ones whose other
 * holder still uses them (to make room for a new region under
 * max_shm_bytes_per_client: a peer that never releases must not keep
 * them charged to c).  Returns how many. */
unsigned channel_keeper_drop_released_of(ChannelKeeper *k, Client *c);

/* What datd keeps now (datctl status): kept channels in any state, and
 * the spares among them. */
uint32_t channel_keeper_count(const ChannelKeeper *k);
uint32_t channel_keeper_spares(const ChannelKeeper *k);

#endif
