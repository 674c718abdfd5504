/* Listeners and connections: datd owns every PSP/RSP of the host and
 * negotiates every connection between two endpoints on this host
 * (PROTOCOL.md, "Connections").  A connection has one Conn per end; both
 * ends of a same-host connection live here and point at each other.
 *
 * Ids (listener_id, cr_id, conn_id) come from one counter per datd, never 0,
 * and are found through small fixed hash tables, so that a connect, an accept
 * and their events cost O(1) however many connections are up. */
#ifndef DATD_DAEMON_CONN_H
#define DATD_DAEMON_CONN_H

#include <stdint.h>

#include "proto/datp.h"

typedef struct Client Client;
typedef struct IaInstance IaInstance;
typedef struct Manager Manager;
typedef struct ConnTable ConnTable;

/* What ListListeners() and ListConnections() show; the counters GetCounters()
 * adds. */
typedef struct ConnCounters {
        uint64_t listens;
        uint64_t listens_refused;
        uint64_t connects;
        uint64_t connects_refused;      /* synchronous refusals */
        uint64_t established;
        uint64_t peer_rejected;
        uint64_t non_peer_rejected;
        uint64_t timed_out;
        uint64_t unreachable;
        uint64_t disconnected;
        uint64_t broken;
        /* shm data channels (channel_keep.h): regions made, kept ones handed
         * out again, kept ones dropped. */
        uint64_t shm_channels_made;
        uint64_t shm_channels_reused;
        uint64_t shm_channels_dropped;
} ConnCounters;

int conn_table_new(Manager *m, ConnTable **ret);
ConnTable *conn_table_free(ConnTable *t);

/* The requests of the "Connections" section; each sends its reply (and then
 * any event) and returns client_send()'s result. */
int conn_handle_listen(Client *c, const struct datp_listen *req);
int conn_handle_unlisten(Client *c, const struct datp_unlisten *req);
int conn_handle_connect(Client *c, const struct datp_connect *req);
int conn_handle_cr_accept(Client *c, const struct datp_cr_accept *req);
int conn_handle_cr_reject(Client *c, const struct datp_cr_reject *req);
int conn_handle_cr_handoff(Client *c, const struct datp_cr_handoff *req);
int conn_handle_disconnect(Client *c, const struct datp_disconnect *req);
/* Version 4: the client kept a channel and touches it no more
 * (channel_keep.h).  Usually sent with request_id 0: no reply. */
int conn_handle_channel_release(Client *c, const struct datp_channel_release *req);

/* The client (or one IA instance of it) is going away: its listeners die
 * (their pending requests are refused NON_PEER to the active side), its
 * connections break (BROKEN to every peer), its requests are withdrawn. */
void conn_drop_instance(IaInstance *i);

/* For D-Bus: calls fn for every listener / connection end. */
typedef struct ListenerInfo {
        uint32_t id;
        uint64_t client_id;
        int32_t pid;
        const char *command;
        const char *ia;
        const char *kind;               /* "PSP", "PSP_ANY", "RSP" */
        uint64_t conn_qual;
        uint32_t pending;
        uint64_t accepted;
} ListenerInfo;

typedef struct ConnInfo {
        uint32_t id;
        uint64_t client_id;
        int32_t pid;
        const char *command;
        const char *ia;
        const char *local_address;
        const char *remote_address;
        uint64_t remote_conn_qual;
        const char *role;               /* "active", "passive" */
        const char *state;              /* "REQUESTED", "ESTABLISHED" */
        uint64_t age_usec;
        uint64_t bytes_sent, bytes_received;
        uint32_t peer_id;               /* the other end's conn_id here, 0 if remote/none */
        int32_t peer_pid;               /* 0 if unknown */
        uint64_t shm_bytes;             /* its shm data channel's region, 0 for none */
} ConnInfo;

void conn_foreach_listener(Manager *m, void (*fn)(const ListenerInfo *, void *), void *userdata);
void conn_foreach_connection(Manager *m, void (*fn)(const ConnInfo *, void *), void *userdata);
const ConnCounters *conn_counters(Manager *m);
uint32_t conn_n_listeners(Manager *m);
uint32_t conn_n_connections(Manager *m);
/* Kept shm channels now, and the spares among them (channel_keep.h). */
uint32_t conn_n_kept_channels(Manager *m);
uint32_t conn_n_spare_channels(Manager *m);

#endif
