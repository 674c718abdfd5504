/* datd.conf: datd's configuration, a strict JSON file read with jansson.
 * Every key is known, every value is type and range checked, and errors name
 * the file and the JSON path.  Users and groups are resolved at load time.
 *
 * Beside this header, a quoted "config.h" finds it instead of autoconf's:
 * files in daemon/ include autoconf's as <config.h>. */
#ifndef DATD_DAEMON_CONFIG_H
#define DATD_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define DATD_DEFAULT_CONFIG SYSCONFDIR "/datd/datd.conf"

typedef enum BusMode {
        BUS_MODE_AUTO,    /* the system bus if reachable, plus the private socket */
        BUS_MODE_SYSTEM,  /* the system bus (failing if unreachable), plus the private socket */
        BUS_MODE_PRIVATE, /* only the private socket */
        BUS_MODE_NONE,
        _BUS_MODE_MAX,
} BusMode;

typedef enum Transport {
        TRANSPORT_SHM,
        TRANSPORT_TCP,
        TRANSPORT_VERBS,
        _TRANSPORT_MAX,
} Transport;

/* Every count, size and queue a client can grow. */
typedef struct Limits {
        uint32_t max_clients;
        uint32_t max_clients_per_uid;
        uint32_t max_ias_per_client;
        uint32_t max_pending_replies;
        uint32_t max_protocol_errors;
        /* The private D-Bus socket (daemon/bus.c): connections in all, per
         * user (root is never refused), replies a connection may leave
         * unread before it is dropped, and how long one may stay idle. */
        uint32_t max_bus_connections;
        uint32_t max_bus_connections_per_uid;
        uint32_t max_bus_queued_replies;
        uint32_t bus_idle_timeout_ms;
        uint32_t max_eps;
        uint32_t max_evds;
        uint32_t max_pzs;
        uint32_t max_lmrs;
        uint32_t max_rmrs;
        uint32_t max_srqs;
        uint32_t max_private_data;
        uint64_t max_lmr_bytes;
        /* Connections (daemon/conn.c). */
        uint32_t max_listeners_per_client;
        uint32_t max_connections_per_client;      /* established or being set up */
        uint32_t max_pending_connects_per_client; /* CONNECTs not yet answered */
        uint32_t max_pending_requests;            /* a listener's backlog */
        uint32_t max_cm_links;                    /* TCP links to other datds */
        uint32_t max_cm_send_bytes;               /* a link's messages its peer did not read */
        /* The shm data path (daemon/channel.c). */
        uint32_t shm_ring_bytes;                  /* each direction's ring */
        uint64_t max_shm_bytes_per_client;        /* regions of its connection ends */
        uint32_t max_spare_channels_per_client;   /* kept shm channels waiting for reuse */
        /* Per uid, over all its clients (daemon/uid_budget.h). */
        uint32_t max_fds_per_uid;                 /* 0: a quarter of what RLIMIT_NOFILE
                                                   * leaves beside the reserve */
        uint32_t max_listeners_per_uid;
        uint64_t max_object_bytes_per_uid;        /* of its clients' object tables */
} Limits;

typedef struct IAConfig {
        char *name;
        Transport transport;
        char *address;                   /* literal address as written, or NULL */
        struct sockaddr_storage sockaddr;/* parsed address when address != NULL */
        socklen_t sockaddr_len;
        char *interface;                 /* tcp: interface name or "auto", or NULL */
        char *device;                    /* verbs: device name */
        uint32_t port;                   /* verbs: port number, 0 until set */
        /* The DAT_QOS classes beyond best effort (which is 0 and always
         * accepted) that a connection to this IA may ask for; default 0. */
        uint32_t qos;
        /* Who may open the IA: root always; everyone when neither list is given. */
        bool restricted;
        uid_t *allow_uids;
        size_t n_allow_uids;
        gid_t *allow_gids;
        size_t n_allow_gids;
} IAConfig;

typedef struct Config {
        char *path;        /* the file read, NULL for built-in defaults */
        char *runtime_dir;
        int log_level;     /* LOG_ERR .. LOG_DEBUG */
        BusMode bus;
        uint16_t cm_port;
        uint32_t cm_keepalive_ms;       /* CM link keepalive period; 2 misses = link lost */
        uint64_t conn_qual_any_min;     /* "conn_qual_any_range": PSP_ANY picks from here */
        uint64_t conn_qual_any_max;
        bool verbs;
        IAConfig *ias;
        size_t n_ias;
        Limits limits;
} Config;

/* Loads path (NULL: the default file).  A missing default file means the
 * built-in defaults; a missing explicit file is an error.  Every problem is
 * logged; returns -EINVAL if there was any. */
int config_load(const char *path, Config **ret);
Config *config_free(Config *c);

/* 0 if dir can be the runtime directory (normalized, absolute, short enough
 * for the sockets inside), else -EINVAL or -ENAMETOOLONG. */
int config_check_runtime_dir(const char *dir);

const char *bus_mode_to_string(BusMode m);
int bus_mode_from_string(const char *s);
const char *transport_to_string(Transport t);

/* Protocol socket and D-Bus socket inside the runtime directory. */
#define DATD_SOCKET_NAME "datd.sock"
#define DATD_BUS_SOCKET_NAME "bus.sock"

#endif
