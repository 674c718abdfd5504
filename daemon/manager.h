/* The Manager: datd's whole state, owned by one sd-event loop.  Clients,
 * IAs and bus connections are its children; each has its own xyz_free()
 * that unlinks it from the Manager. */
#ifndef DATD_DAEMON_MANAGER_H
#define DATD_DAEMON_MANAGER_H

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>

#include "daemon/config.h"
#include "daemon/host_addrs.h"
#include "daemon/ia.h"
#include "daemon/peer.h"
#include "daemon/ratelimit.h"

typedef struct Client Client;
typedef struct BusConnection BusConnection;
typedef struct ConnTable ConnTable;
typedef struct UidBudgets UidBudgets;

/* Monotonic since start; GetCounters() lists them by these names. */
typedef struct Counters {
        uint64_t clients_accepted;
        uint64_t clients_rejected;   /* refused at accept: max_clients, max_clients_per_uid */
        uint64_t clients_dropped;    /* closed by datd: protocol errors, reply queue overflow */
        uint64_t requests;           /* packets received from clients */
        uint64_t protocol_errors;
        uint64_t ia_opens;
        uint64_t ia_open_failures;
        uint64_t ia_closes;          /* explicit IA_CLOSE and instances of departed clients */
        uint64_t objects_registered; /* OBJ_CREATE accepted */
        uint64_t objects_refused;    /* OBJ_CREATE refused: quota, unknown IA, out of memory */
} Counters;

typedef struct Manager {
        Config *config;
        sd_event *event;
        IaRegistry ias;
        ConnTable *conns;            /* listeners and connections (daemon/conn.c) */
        UidBudgets *budgets;         /* per-uid limits, made at startup (daemon/uid_budget.h) */
        /* CM links to other hosts' datds (daemon/cm.c). */
        int cm_listen_fd;
        sd_event_source *cm_listen_source;
        sd_event_source *cm_tick;
        struct CmLink *cm_links;
        uint32_t n_cm_links;
        uint32_t n_cm_unidentified;     /* incoming sockets before HELLO or DATA (cm.c) */
        sd_id128_t host_id;          /* random per run, sent in the CM HELLO */
        HostAddrs *host_addrs;       /* which addresses are this host's (conn.c) */

        /* The protocol socket libdat connects to. */
        int listen_fd;
        bool listen_fd_ours;         /* false when systemd passed it: then never unlinked */
        sd_event_source *listen_source;
        sd_event_source *accept_retry;

        Client *clients;
        uint32_t n_clients;          /* uint32_t: the NClients property reads it directly */
        uint32_t n_ias_open;
        /* Objects registered by all clients (the NObjects property): each
         * client's are bounded by its quotas (datd.conf limits per open IA),
         * so this is bounded by max_clients x max_ias_per_client x those. */
        uint64_t n_objects;
        uint64_t next_client_id;

        /* D-Bus: the system bus (if any) and the private socket's connections. */
        sd_bus *system_bus;
        int bus_listen_fd;
        sd_event_source *bus_listen_source;
        sd_event_source *bus_accept_retry;
        RateLimit bus_log_limit;     /* lines about refused and dropped bus connections */
        BusConnection *bus_connections;
        uint32_t n_bus_connections;
        uint64_t next_bus_connection_id;
        sd_id128_t bus_server_id;

        /* Read by the D-Bus vtable through offsetof(). */
        const char *version;
        char *runtime_dir;
        char *socket_path;
        char *bus_socket_path;
        uint64_t start_timestamp;    /* CLOCK_REALTIME µs at READY=1 */

        Counters counters;
        bool stopping;
        sd_event_source *status_timer;
        char *status;                /* last STATUS= sent to systemd */
} Manager;

/* Takes ownership of config. */
int manager_new(Config *config, Manager **ret);
Manager *manager_free(Manager *m);

/* Builds the IAs, listens, connects the buses, and tells systemd READY=1. */
int manager_startup(Manager *m);
int manager_run(Manager *m);

/* The numbers changed: STATUS= follows, coalesced with other changes. */
void manager_update_status(Manager *m);

uint32_t manager_clients_of_uid(Manager *m, uid_t uid);

/* May this peer use the private D-Bus socket: root, or a user the policy
 * admits to at least one IA. */
bool manager_peer_may_administer(Manager *m, const Peer *peer);

/* Out of descriptors (or memory), a listening socket stays readable: its
 * source rests a little, re-enabled by the one-shot timer *retry (made on
 * first use), instead of spinning on accept(). */
void manager_pause_accepting(Manager *m, sd_event_source *listen_source, sd_event_source **retry);

/* Binds a listening AF_UNIX socket of the given type at path (replacing a
 * stale socket, refusing if something still answers there), mode 0666. */
int manager_listen_unix(const char *path, int type, int *ret_fd);

#endif
