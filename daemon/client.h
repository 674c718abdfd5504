/* A client: one libdat connection on the protocol socket, identified by the
 * kernel's credentials, owning everything it opened. */
#ifndef DATD_DAEMON_CLIENT_H
#define DATD_DAEMON_CLIENT_H

#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "daemon/ia.h"
#include "daemon/list.h"
#include "daemon/manager.h"
#include "daemon/object.h"
#include "daemon/peer.h"
#include "daemon/uid_budget.h"
#include "proto/datp.h"

typedef struct IaInstance IaInstance;
typedef struct PendingMsg PendingMsg;
struct Listener;
struct Conn;

/* An IA as one client opened it: dies with the client. */
struct IaInstance {
        Client *client;
        Ia *ia;
        uint32_t id;                    /* the ia_id the client uses; never 0 */
        LIST_FIELDS(IaInstance, instances);
        uint32_t objects;               /* first slot of its objects in client->objects */
        ObjectCounts counts;            /* what the datd.conf quotas are held against */
        struct Listener *listeners;     /* daemon/conn.c */
        struct Conn *conns;             /* its connection ends */
        /* Spare kept channels (channel_keep.h) where it is side 0 / side 1. */
        struct ShmRegion *spare0, *spare1;
        /* Kept channels it released (spare or not), as side 0 / side 1. */
        struct ShmRegion *released0, *released1;
};

struct Client {
        Manager *manager;               /* NULL until linked into the Manager */
        LIST_FIELDS(Client, clients);
        uint64_t id;
        int fd;
        sd_event_source *io;
        Peer peer;
        uint64_t connected_usec;        /* CLOCK_REALTIME */

        uint16_t version;               /* negotiated by HELLO, 0 before */
        uint32_t protocol_errors;

        IaInstance *instances;
        uint32_t n_instances;
        uint32_t next_ia_id;

        ObjectTable objects;            /* of all its IA instances; ids per connection */
        UidBudget *budget;              /* its uid's (a reference), what it holds charged */
        uint32_t quota_logged;          /* bit per kind (0: max_lmr_bytes; 31:
                                         * max_object_bytes_per_uid): refusal logged */

        /* Messages the socket had no room for, oldest first.  n_pending
         * counts those held against limits.max_pending_replies: all but
         * the ending events (client_send_ending), which are bounded by
         * what they keep charged instead. */
        PendingMsg *pending;
        PendingMsg **pending_tail;
        uint32_t n_pending;

        /* Connections (daemon/conn.c), over all its IA instances. */
        uint32_t n_listeners;
        uint32_t n_conns;               /* ends, in any state, and ended ones whose
                                         * terminal event waits in the queue */
        uint32_t n_connecting;          /* active ends not yet answered */
        uint64_t shm_bytes;             /* shm regions of its connection ends and kept
                                         * channels, and of dropped ones whose
                                         * EV_CHANNEL_DROP waits in the queue
                                         * (max_shm_bytes_per_client) */
        uint32_t n_spare_channels;      /* kept channels of it that are spare
                                         * (max_spare_channels_per_client) */
        /* A pidfd of its process for its peers' shm channels (they watch
         * it for its exit): opened at the first one and kept, -1 before;
         * the descriptor is sent, not given away. */
        int pidfd;
        bool dying;                     /* being freed: no more events to it */
        sd_event_source *drop_source;   /* client_drop_later() pending */
        int drop_error;
};

#define UID_BUDGET_LOGGED_BIT (1u << 31)

/* A new connection on the protocol socket: takes fd, and either makes it a
 * client or (over a limit) closes it. */
void client_accept(Manager *m, int fd);
Client *client_free(Client *c);

/* The client's pidfd (Client.pidfd), opened on first use; -errno when
 * there is none to be had (tried again next time). */
int client_pidfd(Client *c);

/* Sends a reply, or queues it while the socket is full.  -ENOBUFS when the
 * queue is at its limit: the caller drops the client. */
int client_send(Client *c, const struct datp_header *msg);

/* The same with descriptors (SCM_RIGHTS): the caller keeps its own; a queued
 * message holds duplicates until it is sent. */
int client_send_fds(Client *c, const struct datp_header *msg, const int *fds, unsigned nfds);

/* An event that ends something the client held: a terminal EV_CONN (one
 * of its connection ends: conns 1) or an EV_CHANNEL_DROP (a kept channel of
 * shm_bytes).  The caller has already let go of it.  If the message must
 * wait for room it does not count against max_pending_replies: it keeps
 * what it ended charged to the client (max_connections_per_client,
 * max_shm_bytes_per_client) until it is written instead (one held to the
 * end of a batch is charged only if it is then queued: client.c says why,
 * and what it costs).  A peer's exit or
 * a lost CM link makes one for every end a client has at once, and must
 * not get a client that reads its socket dropped; each end and channel
 * ends once, so the client's own quotas bound the queue.  -errno as
 * client_send. */
int client_send_ending(Client *c, const struct datp_header *msg, uint32_t conns, uint64_t shm_bytes);

/* Drops the client from the event loop's next iteration: for failures met
 * while handling another client's request. */
void client_drop_later(Client *c, int error);

int client_open_ia(Client *c, Ia *ia, IaInstance **ret);
IaInstance *client_find_ia(Client *c, uint32_t id);
IaInstance *ia_instance_free(IaInstance *i);

/* request.c: one received packet of len bytes (len may exceed the buffer:
 * the packet was oversized).  Negative: close the client. */
int client_handle_packet(Client *c, const union datp_message *msg, size_t len, unsigned nfds);

#endif
