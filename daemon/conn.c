/* Listeners and same-host connection negotiation (conn.h, PROTOCOL.md
 * "Connections").  Everything here runs on datd's one event loop; a request
 * is answered first and the events it causes follow, so that a client always
 * knows a conn_id before an event names it. */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "common/macro.h"
#include "daemon/channel.h"
#include "daemon/channel_keep.h"
#include "daemon/client.h"
#include "daemon/cm.h"
#include "daemon/conn.h"
#include "daemon/id_hash.h"
#include "daemon/log.h"
#include "daemon/netif.h"
#include "daemon/object.h"
#include "daemon/policy.h"
#include "libdat/shm_link.h"

#define DAT_ERR(type, subtype) ((uint32_t) (DAT_CLASS_ERROR | (type) | (subtype)))

/* Buckets of the conn_qual hash (listeners are few). */
#define CONN_BUCKETS 4096u

_Static_assert(DATP_PRIVATE_DATA_MAX >= 64, "dat_ep_connect(3DAT): at least 64 bytes");

typedef struct Listener Listener;
typedef struct Cr Cr;
typedef struct Conn Conn;
typedef struct DataListener DataListener;
typedef struct TcpPair TcpPair;
typedef struct DataOut DataOut;

enum conn_state {
        CONN_REQUESTED,         /* active: CONNECT sent, no answer yet */
        CONN_ESTABLISHED,
};

struct Listener {
        IdLink hlink;                   /* first: ConnTable.listeners */
        ConnTable *table;
        IaInstance *instance;
        uint32_t id;
        uint32_t kind;                  /* enum datp_listener_kind */
        uint64_t conn_qual;
        uint64_t handle;
        uint32_t n_pending;
        uint64_t n_accepted;
        uint64_t n_delivered;           /* requests sent to its process (an RSP: one at most) */
        Listener *qual_next;            /* ConnTable.listener_by_qual */
        LIST_FIELDS(Listener, listeners); /* the instance's */
        Cr *crs;                        /* pending requests, newest first */
};

/* A connection request waiting at a listener.  active is NULL once the
 * active side gave up (timeout, disconnect, death): the request stays until
 * the passive side answers it, and an accept then fails
 * (ACCEPT_COMPLETION_ERROR). */
struct Cr {
        IdLink hlink;                   /* first: ConnTable.crs */
        ConnTable *table;
        uint32_t id;
        Listener *listener;
        Conn *active;                   /* same host: the active end */
        CmLink *link;                   /* another host: the link it came over */
        uint32_t remote_conn_id;        /*   the active end's id at its datd */
        int32_t remote_pid;
        struct sockaddr_storage src;    /*   the active IA's address */
        socklen_t src_len;
        uint32_t pd_len;
        uint8_t pd[DATP_PRIVATE_DATA_MAX];
        LIST_FIELDS(Cr, crs);
};

/* One end of a connection. */
struct Conn {
        IdLink hlink;                   /* first: ConnTable.conns */
        ConnTable *table;
        IaInstance *instance;
        uint32_t id;
        uint64_t ep_handle;
        enum conn_state state;
        bool active;
        Conn *peer;                     /* the other end, same host */
        CmLink *link;                   /* the other end is another host's */
        uint32_t remote_id;             /*   its id at that host's datd, 0 until known */
        int32_t remote_pid;
        bool accepting;                 /*   passive, ACCEPT sent, READY not yet back */
        uint32_t pd_len;                /*   accepting: the connecter's private data */
        uint8_t *pd;
        Cr *cr;                         /* active, REQUESTED: its request */
        struct sockaddr_storage remote;
        socklen_t remote_len;
        uint64_t remote_conn_qual;
        uint64_t created_usec;          /* CLOCK_MONOTONIC */
        sd_event_source *timer;
        ShmRegion *shm;                 /* shm data channel, shared with peer; counted in
                                           the client's shm_bytes */
        /* tcp data channel being made (PROTOCOL.md, EV_DATA_CHANNEL): the
         * end is told ESTABLISHED once it is there.  Meanwhile an active end
         * stays REQUESTED and a passive one ACCEPTING. */
        TcpPair *pair;                  /* same host: both ends share it */
        DataOut *data_out;              /* active, another host: our data connection */
        int data_fd;                    /* passive, another host: the one that came, -1 */
        bool ready;                     /* passive, another host: READY came */
        bool holds_link;                /*   and its data connection not: the link is
                                           held (cm_link_hold) until it comes */
        uint8_t token[CM_TOKEN_SIZE];   /* passive, another host: what DATA must name */
        LIST_FIELDS(Conn, conns);       /* the instance's */
};

struct ConnTable {
        Manager *manager;
        uint32_t next_id;
        bool wrapped;                   /* next_id went round: check ids for reuse */
        uint64_t next_any;              /* PSP_ANY: where the search starts */
        uint32_t n_listeners;
        uint32_t n_conns;
        IdHash listeners, crs, conns;
        Listener *listener_by_qual[CONN_BUCKETS];
        ConnCounters counters;
        DataListener **data_listeners;  /* per IA (m->ias index), made on first use */
        size_t n_data_listeners;
        ChannelKeeper *keeper;          /* kept shm channels */
};

/* Same host, tcp: datd's own listener on an IA's address (ephemeral port)
 * that it connects to, one socket per end. */
struct DataListener {
        ConnTable *table;
        int fd;
        sd_event_source *io;
        TcpPair *pairs;                 /* connects in flight to it */
};

struct TcpPair {
        DataListener *dl;
        TcpPair *next;                  /* dl->pairs */
        Conn *a, *b;                    /* active, passive */
        int fd_a;                       /* connecting: a's socket */
        int fd_b;                       /* accepted: b's socket, -1 until then */
        struct sockaddr_storage local;  /* fd_a's address: how the accepted one is known */
        socklen_t local_len;
        bool connected;                 /* fd_a's connect completed */
        sd_event_source *io, *timer;
};

/* Another host, active side: the data connection to the passive datd's
 * cm_port, with the DATA message written first. */
struct DataOut {
        Conn *a;
        int fd;
        struct cm_data msg;             /* wire order */
        size_t sent;
        sd_event_source *io, *timer;
};

/* How long datd gives a data connection (connect, DATA) before the
 * connection fails. */
#define DATA_CONNECT_TIMEOUT_USEC (10u * 1000000u)

static uint64_t now_usec(clockid_t clock)
{
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static Listener *listener_find(ConnTable *t, uint32_t id)
{
        return id_hash_find(&t->listeners, id);
}

static Cr *cr_find(ConnTable *t, uint32_t id)
{
        return id_hash_find(&t->crs, id);
}

static Conn *conn_find(ConnTable *t, uint32_t id)
{
        return id_hash_find(&t->conns, id);
}

/* Unlinks item from the chain at *headp (field: its link). */
#define CHAIN_REMOVE(headp, item, field)                        \
        do {                                                    \
                __typeof__(*(headp)) *_p = (headp);             \
                while (*_p && *_p != (item))                    \
                        _p = &(*_p)->field;                     \
                if (*_p)                                        \
                        *_p = (item)->field;                    \
        } while (0)

static uint32_t qual_bucket(const Ia *ia, uint64_t qual)
{
        uint64_t h = qual * 0x9e3779b97f4a7c15ull ^ (uintptr_t) ia;

        return (uint32_t) (h >> 40) & (CONN_BUCKETS - 1);
}

static Listener *listener_find_qual(ConnTable *t, const Ia *ia, uint64_t qual)
{
        Listener *l = t->listener_by_qual[qual_bucket(ia, qual)];

        while (l && !(l->conn_qual == qual && l->instance->ia == ia))
                l = l->qual_next;
        return l;
}

/* A new id: never 0, never one in use (which can only happen once the
 * counter went round). */
static uint32_t new_id(ConnTable *t)
{
        uint32_t id;

        for (;;) {
                id = ++t->next_id;
                if (id == 0) {
                        t->wrapped = true;
                        continue;
                }
                if (!t->wrapped || !(listener_find(t, id) || cr_find(t, id) || conn_find(t, id)))
                        return id;
        }
}

int conn_table_new(Manager *m, ConnTable **ret)
{
        ConnTable *t = calloc(1, sizeof(*t));

        if (!t)
                return -ENOMEM;
        t->manager = m;
        t->next_any = m->config->conn_qual_any_min;
        if (id_hash_init(&t->listeners) < 0 || id_hash_init(&t->crs) < 0 ||
            id_hash_init(&t->conns) < 0 || channel_keeper_new(m, &t->counters, &t->keeper) < 0) {
                conn_table_free(t);
                return -ENOMEM;
        }
        *ret = t;
        return 0;
}

ConnTable *conn_table_free(ConnTable *t)
{
        /* Clients free their listeners and connections before this. */
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_data_listeners; i++) {
                DataListener *dl = t->data_listeners[i];

                if (!dl)
                        continue;
                sd_event_source_disable_unref(dl->io);
                closep(&dl->fd);
                free(dl);
        }
        free(t->data_listeners);
        channel_keeper_free(t->keeper);
        free(t->listeners.buckets);
        free(t->crs.buckets);
        free(t->conns.buckets);
        free(t);
        return NULL;
}

const ConnCounters *conn_counters(Manager *m)
{
        return &m->conns->counters;
}

uint32_t conn_n_listeners(Manager *m)
{
        return m->conns->n_listeners;
}

uint32_t conn_n_connections(Manager *m)
{
        return m->conns->n_conns;
}

uint32_t conn_n_kept_channels(Manager *m)
{
        return channel_keeper_count(m->conns->keeper);
}

uint32_t conn_n_spare_channels(Manager *m)
{
        return channel_keeper_spares(m->conns->keeper);
}

/* ---- addresses and log lines ---------------------------------------------- */

/* An IA's address as peers see it; 127.0.0.1 for an IA without one. */
static void ia_peer_address(const Ia *ia, struct sockaddr_storage *ss, uint32_t *len)
{
        memset(ss, 0, sizeof(*ss));
        if (ia->address_len > 0 && (ia->address.ss_family == AF_INET ||
                                    ia->address.ss_family == AF_INET6)) {
                memcpy(ss, &ia->address, ia->address_len);
                *len = ia->address_len;
        } else {
                struct sockaddr_in *sin = (struct sockaddr_in *) ss;

                sin->sin_family = AF_INET;
                sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                *len = sizeof(*sin);
        }
}

static void addr_string(const struct sockaddr_storage *ss, socklen_t len, char *buf, size_t size)
{
        sockaddr_to_string((const struct sockaddr *) ss, len, buf, size);
        if (!buf[0])
                snprintf(buf, size, "none");
}

static bool addr_is_loopback(const struct sockaddr_storage *ss)
{
        if (ss->ss_family == AF_INET)
                return (ntohl(((const struct sockaddr_in *) ss)->sin_addr.s_addr) >> 24) == 127;
        if (ss->ss_family == AF_INET6)
                return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *) ss)->sin6_addr);
        return false;
}

/* Same IP (the port is no part of an IA address's identity). */
static bool addr_same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
        return sockaddr_same_host((const struct sockaddr *) a, (const struct sockaddr *) b);
}

/* The IA of this host a connection from `from` to address ss reaches, or
 * NULL when the address is another host's.  Loopback, the connecting IA's own
 * address, or an address of this host no other IA claims all stay on the
 * connecting IA (a shm IA reaches its own listeners at 127.0.0.1 or at the
 * host's address); an address of another IA of this host reaches that IA.
 * The unspecified address (0.0.0.0, ::) is this host to connect(2), as
 * loopback is: it stays on the connecting IA too (PROTOCOL.md, CONNECT).
 * Whatever is not recognised here goes to the CM port of the host that has
 * it: one of this host that slipped through came back as another host's
 * request, out of reach of the IAs' policy (cm.c now refuses such a link,
 * and the request fails UNREACHABLE).  ss is in its IPv4 form already
 * (conn_handle_connect). */
static Ia *local_target(Manager *m, Ia *from, const struct sockaddr_storage *ss)
{
        if (addr_is_loopback(ss) || sockaddr_is_unspecified((const struct sockaddr *) ss))
                return from;
        if (from->address_len > 0 && addr_same_ip(&from->address, ss))
                return from;
        for (size_t i = 0; i < m->ias.n; i++) {
                Ia *ia = &m->ias.ias[i];

                if (ia->address_len > 0 && addr_same_ip(&ia->address, ss))
                        return ia;
        }
        if (host_addrs_holds(m->host_addrs, (const struct sockaddr *) ss))
                return from;
        return NULL;
}

/* "pid 12 10.0.0.1 -> 10.0.0.2 conn_qual 4242 (pid 13)": both ends of a
 * connection for a log line. */
static void conn_describe(const Conn *c, char *buf, size_t size)
{
        char local[SOCKADDR_STRING_MAX], remote[SOCKADDR_STRING_MAX];
        struct sockaddr_storage ss;
        uint32_t len;
        const Conn *p = c->peer;

        ia_peer_address(c->instance->ia, &ss, &len);
        addr_string(&ss, len, local, sizeof(local));
        addr_string(&c->remote, c->remote_len, remote, sizeof(remote));
        if (p)
                snprintf(buf, size, "connection %" PRIu32 " %s, pid %d %s -> %s conn_qual %" PRIu64
                         " pid %d", c->id, c->active ? "active" : "passive",
                         (int) c->instance->client->peer.pid, local, remote, c->remote_conn_qual,
                         (int) p->instance->client->peer.pid);
        else if (c->link)
                snprintf(buf, size, "connection %" PRIu32 " %s, pid %d %s -> %s conn_qual %" PRIu64
                         " pid %d on another host", c->id, c->active ? "active" : "passive",
                         (int) c->instance->client->peer.pid, local, remote, c->remote_conn_qual,
                         (int) c->remote_pid);
        else if (c->cr && c->cr->listener)
                snprintf(buf, size, "connection %" PRIu32 " %s, pid %d %s -> %s conn_qual %" PRIu64
                         " pid %d", c->id, c->active ? "active" : "passive",
                         (int) c->instance->client->peer.pid, local, remote, c->remote_conn_qual,
                         (int) c->cr->listener->instance->client->peer.pid);
        else
                snprintf(buf, size, "connection %" PRIu32 " %s, pid %d %s -> %s conn_qual %" PRIu64,
                         c->id, c->active ? "active" : "passive",
                         (int) c->instance->client->peer.pid, local, remote, c->remote_conn_qual);
}

#define conn_log(level, c, fmt, ...)                                            \
        do {                                                                    \
                if (log_get_max_level() >= (level)) {                           \
                        char _d[3 * SOCKADDR_STRING_MAX + 128];                 \
                        conn_describe((c), _d, sizeof(_d));                     \
                        log_full((level), "%s: " fmt, _d, ##__VA_ARGS__);       \
                }                                                               \
        } while (0)

static const char *event_name(uint32_t event)
{
        switch (event) {
        case DAT_CONNECTION_EVENT_ESTABLISHED: return "established";
        case DAT_CONNECTION_EVENT_PEER_REJECTED: return "rejected by the peer";
        case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: return "rejected (not by the peer)";
        case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "accept failed";
        case DAT_CONNECTION_EVENT_DISCONNECTED: return "disconnected";
        case DAT_CONNECTION_EVENT_BROKEN: return "broken";
        case DAT_CONNECTION_EVENT_TIMED_OUT: return "timed out";
        case DAT_CONNECTION_EVENT_UNREACHABLE: return "unreachable";
        default: return "?";
        }
}

/* ---- events ----------------------------------------------------------------- */

/* An event for a client that may not be the one whose request is being
 * handled: a full queue drops that client later, not now. */
static void send_event_fds(Client *c, const struct datp_header *msg, const int *fds, unsigned nfds)
{
        int r;

        if (c->dying)
                return;
        r = client_send_fds(c, msg, fds, nfds);
        if (r < 0)
                client_drop_later(c, r);
}

static void send_event(Client *c, const struct datp_header *msg)
{
        send_event_fds(c, msg, NULL, 0);
}

/* The same for the terminal EV_CONN of an end of c that is going: it may
 * wait for room without counting against max_pending_replies, holding the
 * end's place in max_connections_per_client meanwhile
 * (client_send_ending): a peer that exits with a thousand connections to
 * c must not get c dropped. */
static void send_ending_event(Client *c, const struct datp_header *msg)
{
        int r;

        if (c->dying)
                return;
        r = client_send_ending(c, msg, 1, 0);
        if (r < 0)
                client_drop_later(c, r);
}

/* datd's copy of an EP's state (what datctl shows) follows the
 * connection that datd itself drives: the request that starts it
 * (CONNECT, CR_ACCEPT) and every event datd sends for it.  libdat does not
 * send these transitions, only the ones it makes alone (dat_ep_reset, a
 * failed data path...).  The EP must be on this very connection: a late
 * event of one it left does not touch it. */
static void ep_follows(Conn *c, DAT_EP_STATE state, bool starts)
{
        Object *o = object_find_ep(&c->instance->client->objects, c->ep_handle);

        if (!o || o->instance != c->instance)
                return;
        if (starts)
                o->conn_id = c->id;
        else if (o->conn_id != c->id)
                return;
        o->desc.state = (uint32_t) state;
}

/* What every connection event of end c does at datd, sent or not: the
 * counters, the log line, the EP's state as datd keeps it. */
static void account_ev_conn(Conn *c, uint32_t event, const char *why)
{
        ConnTable *t = c->table;
        int level = event == DAT_CONNECTION_EVENT_ESTABLISHED ||
                    event == DAT_CONNECTION_EVENT_DISCONNECTED ? LOG_DEBUG : LOG_INFO;

        switch (event) {
        case DAT_CONNECTION_EVENT_ESTABLISHED: t->counters.established++; break;
        case DAT_CONNECTION_EVENT_PEER_REJECTED: t->counters.peer_rejected++; break;
        case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: t->counters.non_peer_rejected++; break;
        case DAT_CONNECTION_EVENT_TIMED_OUT: t->counters.timed_out++; break;
        case DAT_CONNECTION_EVENT_UNREACHABLE: t->counters.unreachable++; break;
        case DAT_CONNECTION_EVENT_DISCONNECTED: t->counters.disconnected++; break;
        case DAT_CONNECTION_EVENT_BROKEN: t->counters.broken++; break;
        default: break;
        }
        conn_log(level, c, "%s: %s.", event_name(event), why);
        ep_follows(c, event == DAT_CONNECTION_EVENT_ESTABLISHED ? DAT_EP_STATE_CONNECTED
                                                                : DAT_EP_STATE_DISCONNECTED, false);
}

static void send_ev_conn(Conn *c, uint32_t event, const uint8_t *pd, uint32_t pd_len, const char *why)
{
        struct datp_ev_conn ev = {};

        account_ev_conn(c, event, why);
        datp_header_init(&ev.hdr, DATP_EV_CONN, c->instance->client->version, sizeof(ev), 0);
        ev.ia_id = c->instance->id;
        ev.conn_id = c->id;
        ev.ep_handle = c->ep_handle;
        ev.event = event;
        if (pd && pd_len > 0 && (event == DAT_CONNECTION_EVENT_ESTABLISHED ||
                                 event == DAT_CONNECTION_EVENT_PEER_REJECTED)) {
                ev.pd_len = pd_len;
                memcpy(ev.private_data, pd, pd_len);
        }
        /* Every event but ESTABLISHED ends the end (PROTOCOL.md, 6a). */
        if (event == DAT_CONNECTION_EVENT_ESTABLISHED)
                send_event(c->instance->client, &ev.hdr);
        else
                send_ending_event(c->instance->client, &ev.hdr);
}

static void send_ev_conn_request(Cr *cr)
{
        Listener *l = cr->listener;
        Conn *a = cr->active;
        struct datp_ev_conn_request ev = {};

        l->n_delivered++;
        datp_header_init(&ev.hdr, DATP_EV_CONN_REQUEST, l->instance->client->version, sizeof(ev), 0);
        ev.ia_id = l->instance->id;
        ev.listener_id = l->id;
        ev.cr_id = cr->id;
        ev.conn_qual = l->conn_qual;
        /* dat_cr_query(3DAT): the active side's port qualifier; its datd's
         * id of the active end serves as one. */
        if (a) {
                ev.remote_port = a->id;
                ia_peer_address(a->instance->ia, &ev.remote_address, &ev.remote_address_len);
        } else {
                ev.remote_port = cr->remote_conn_id;
                memcpy(&ev.remote_address, &cr->src, cr->src_len);
                ev.remote_address_len = cr->src_len;
        }
        ev.pd_len = cr->pd_len;
        memcpy(ev.private_data, cr->pd, cr->pd_len);
        send_event(l->instance->client, &ev.hdr);
}

/* ---- data channels (PROTOCOL.md, EV_DATA_CHANNEL) ---------------------------- */

static bool conn_is_shm(const Conn *x)
{
        return x->instance->ia->transport == TRANSPORT_SHM;
}

/* Why client cl cannot hold `more` bytes of shm regions beyond its own, or
 * NULL (the reason in buf). */
static const char *shm_quota_refuses(const Client *cl, uint64_t more, const Limits *lim, char *buf,
                                     size_t size)
{
        if (cl->shm_bytes + more <= lim->max_shm_bytes_per_client)
                return NULL;
        snprintf(buf, size, "pid %d would hold %" PRIu64 " bytes of shm regions, above "
                 "max_shm_bytes_per_client (%" PRIu64 ")", (int) cl->peer.pid, cl->shm_bytes + more,
                 lim->max_shm_bytes_per_client);
        return buf;
}

/* shm_quota_refuses, after the kept channels cl released (spares, and
 * ones a peer still uses) gave way if they would make the room. */
static const char *shm_room_refuses(ChannelKeeper *keeper, Client *cl, uint64_t more,
                                    const Limits *lim, char *buf, size_t size)
{
        const char *why = shm_quota_refuses(cl, more, lim, buf, size);

        if (why && channel_keeper_drop_released_of(keeper, cl) > 0)
                why = shm_quota_refuses(cl, more, lim, buf, size);
        return why;
}

/* The region's memfd stays open in datd until both ends are gone: one
 * descriptor charged to each end's uid (once if both are the same), into
 * ch; NULL, or why not (in buf).  The uid's spare channels give way first,
 * as for max_shm_bytes_per_client. */
static const char *shm_fds_take(ChannelKeeper *keeper, Client *ca, Client *cb, UidCharge ch[2],
                                char *buf, size_t size)
{
        Client *who = ca;
        const char *limit = uid_charge_take(&ch[0], ca->budget, UID_FDS, 1);

        if (limit && channel_keeper_drop_released_of(keeper, ca) > 0)
                limit = uid_charge_take(&ch[0], ca->budget, UID_FDS, 1);
        if (!limit && cb->budget != ca->budget) {
                who = cb;
                limit = uid_charge_take(&ch[1], cb->budget, UID_FDS, 1);
                if (limit && channel_keeper_drop_released_of(keeper, cb) > 0)
                        limit = uid_charge_take(&ch[1], cb->budget, UID_FDS, 1);
        }
        if (!limit)
                return NULL;
        uid_charge_drop(&ch[0]);
        snprintf(buf, size, "pid %d (uid %u) would hold another descriptor in datd: %s reached",
                 (int) who->peer.pid, (unsigned) who->peer.uid, limit);
        return buf;
}

/* Makes the data channel of the same-host connection a (active) - b
 * (passive), and counts it; NULL, or why it could not (in buf).  Both ends
 * on shm IAs: a shm region. */
static const char *channel_setup_local(Conn *a, Conn *b, char *buf, size_t size)
{
        const Limits *lim = &a->table->manager->config->limits;
        ChannelKeeper *keeper = a->table->keeper;
        Client *ca = a->instance->client, *cb = b->instance->client;
        UidCharge fds[2] = {};
        uint64_t page = (uint64_t) sysconf(_SC_PAGESIZE);
        /* The file is whole pages (shm_region_create). */
        uint64_t bytes = (shm_link_region_size(lim->shm_ring_bytes) + page - 1) / page * page;
        bool keep = channel_keeper_wants(keeper, a->instance, b->instance);
        const char *why;
        ShmRegion *r;
        int k;

        if (!conn_is_shm(a) || !conn_is_shm(b))
                return NULL;
        /* A spare of these two instances: already charged to both. */
        r = keep ? channel_keeper_take(keeper, a->instance, b->instance) : NULL;
        if (r) {
                a->shm = b->shm = r;
                a->table->counters.shm_channels_reused++;
                return NULL;
        }
        /* One process holding both ends holds the region twice. */
        why = shm_room_refuses(keeper, ca, ca == cb ? 2 * bytes : bytes, lim, buf, size);
        if (!why && ca != cb)
                why = shm_room_refuses(keeper, cb, bytes, lim, buf, size);
        if (!why)
                why = shm_fds_take(keeper, ca, cb, fds, buf, size);
        if (why)
                return why;
        /* Pipes for doorbells when both ends know them (channel.h). */
        k = shm_channel_new(lim->shm_ring_bytes, ca->version >= 3 && cb->version >= 3, &r);
        if (k < 0) {
                uid_charge_drop(&fds[0]);
                uid_charge_drop(&fds[1]);
                snprintf(buf, size, "cannot make its shared memory region of %" PRIu64 " bytes: %s",
                         bytes, strerror(-k));
                return buf;
        }
        r->fd_charge[0] = fds[0];
        r->fd_charge[1] = fds[1];
        a->shm = b->shm = r;
        a->table->counters.shm_channels_made++;
        ca->shm_bytes += r->size;
        cb->shm_bytes += r->size;
        /* Without an id it is an ordinary region, freed with its ends. */
        if (keep)
                (void) channel_keeper_adopt(keeper, r, a->instance, b->instance);
        return NULL;
}

/* EV_DATA_CHANNEL to end c, right before its ESTABLISHED: its new shm
 * region (a reused one goes with ESTABLISHED in EV_CONN_KEPT), else tcp_fd
 * (its connected socket; datd's copy is the caller's to close).
 * A failure to send drops c's client, which breaks the connection
 * (send_event). */
static void send_data_channel(Conn *c, int tcp_fd)
{
        struct datp_ev_data_channel ev = {};
        int fds[DATP_CHANNEL_MAX_FDS];
        Client *peer_client = c->peer ? c->peer->instance->client : NULL;
        const Peer *peer = peer_client ? &peer_client->peer : NULL;
        unsigned n = 0;
        int pidfd;

        datp_header_init(&ev.hdr, DATP_EV_DATA_CHANNEL, c->instance->client->version, sizeof(ev), 0);
        ev.ia_id = c->instance->id;
        ev.conn_id = c->id;
        ev.ep_handle = c->ep_handle;
        /* The peer process, when it is on this host. */
        if (peer && peer->pid > 0) {
                ev.peer_pid = peer->pid;
                ev.peer_uid = peer->uid;
        }
        if (c->shm) {
                ev.kind = DATP_CHANNEL_SHM;
                ev.region_size = c->shm->size;
                ev.ring_size = c->shm->ring_size;
                /* The active end produces ring 0, the passive end ring 1
                 * (in a kept channel, for good: send_ev_conn_kept). */
                ev.side = c->active ? 0 : 1;
                if (shm_region_kept(c->shm)) {
                        ev.flags |= DATP_CHANNEL_KEEP;
                        ev.channel_id = c->shm->hlink.id;
                }
                fds[n++] = c->shm->memfd;
                /* Our doorbell's socket or read end, what rings the
                 * peer's, and (pipes) the read end of the peer's we hold
                 * so that ringing it is never SIGPIPE. */
                fds[n++] = c->shm->doorbell[ev.side][0];
                fds[n++] = c->shm->doorbell[1 - ev.side][1];
                if (c->shm->pipes) {
                        ev.flags |= DATP_CHANNEL_PIPES;
                        fds[n++] = c->shm->guard[1 - ev.side];
                }
                /* The peer client's own, kept: one pidfd_open per client, not
                 * two per connection. */
                pidfd = peer_client ? client_pidfd(peer_client) : -ESRCH;
                if (pidfd >= 0)
                        fds[n++] = pidfd;
                else
                        conn_log(LOG_DEBUG, c, "no pidfd of the peer: %s.", strerror(-pidfd));
        } else if (tcp_fd >= 0) {
                ev.kind = DATP_CHANNEL_TCP;
                fds[n++] = tcp_fd;
        } else
                return;
        ev.nfds = n;
        send_event_fds(c->instance->client, &ev.hdr, fds, n);
}

/* The tcp channel being made is given up (the ends stay). */
static void pair_free(TcpPair *p)
{
        if (!p)
                return;
        if (p->a)
                p->a->pair = NULL;
        if (p->b)
                p->b->pair = NULL;
        CHAIN_REMOVE(&p->dl->pairs, p, next);
        sd_event_source_disable_unref(p->io);
        sd_event_source_disable_unref(p->timer);
        closep(&p->fd_a);
        closep(&p->fd_b);
        free(p);
}

static void data_out_free(DataOut *o)
{
        if (!o)
                return;
        if (o->a)
                o->a->data_out = NULL;
        sd_event_source_disable_unref(o->io);
        sd_event_source_disable_unref(o->timer);
        closep(&o->fd);
        free(o);
}

/* ---- object lifetimes ----------------------------------------------------- */

static void cr_free(Cr *cr)
{
        ConnTable *t = cr->table;

        if (cr->active)
                cr->active->cr = NULL;
        if (cr->listener) {
                LIST_REMOVE(crs, cr->listener->crs, cr);
                cr->listener->n_pending--;
        }
        id_hash_remove(&t->crs, &cr->hlink);
        free(cr);
}

/* Why listener l (NULL: none) cannot take one more request, or NULL. */
static const char *listener_refuses(const Listener *l, const Limits *lim)
{
        if (!l)
                return "no listener on that conn_qual";
        if (l->n_pending >= lim->max_pending_requests)
                return "the listener's backlog (max_pending_requests) is full";
        /* dat_rsp_create(3DAT): an RSP generates at most one request. */
        if (l->kind == DATP_LISTENER_RSP && l->n_delivered > 0)
                return "the RSP has had its one connection request";
        return NULL;
}

/* Why the IA target refuses a request for QoS qos, or NULL.  A class the
 * passive side's IA does not offer is a non-peer reject
 * (dat_ep_connect(3DAT)); the active side's libdat has already refused
 * what its own IA lacks (DAT_MODEL_NOT_SUPPORTED). */
static const char *qos_refuses(const Ia *target, uint32_t qos)
{
        uint32_t offered = target->config ? target->config->qos : 0;

        if (qos & ~offered)
                return "the listener's IA does not offer the requested QoS";
        return NULL;
}

/* A request pending at l with the connecter's private data; NULL without memory. */
static Cr *cr_new(ConnTable *t, Listener *l, const uint8_t *pd, uint32_t pd_len)
{
        Cr *cr = calloc(1, sizeof(*cr));

        if (!cr)
                return NULL;
        cr->table = t;
        cr->id = new_id(t);
        cr->listener = l;
        cr->pd_len = pd_len;
        memcpy(cr->pd, pd, pd_len);
        id_hash_add(&t->crs, &cr->hlink, cr->id);
        LIST_PREPEND(crs, l->crs, cr);
        l->n_pending++;
        return cr;
}

static void cm_tell(CmLink *l, uint16_t type, uint32_t src, uint32_t dst, uint32_t reason,
                    int32_t pid, const uint8_t *pd, uint32_t pd_len)
{
        struct cm_conn m = {
                .src_conn_id = src,
                .dst_conn_id = dst,
                .reason = reason,
                .pid = (uint32_t) pid,
                .pd_len = pd_len,
        };

        if (pd_len)
                memcpy(m.private_data, pd, pd_len);
        cm_send_conn(l, type, &m);
}

static void conn_abandon(Conn *x);

/* The hold READY took on the end's link, if it still has it. */
static void conn_release_link(Conn *x)
{
        if (x->holds_link && x->link)
                cm_link_hold(x->link, false);
        x->holds_link = false;
}

/* The end's link is no more its business: released if it held it. */
static void conn_drop_link(Conn *x)
{
        conn_release_link(x);
        x->link = NULL;
}

/* Frees one end; the other end (if any) forgets it.  An end whose other end
 * is on another host tells that host's datd, unless the news came from there
 * (then link was cleared): a request is withdrawn, a connection broken. */
static void conn_free(Conn *c)
{
        ConnTable *t = c->table;
        Client *client = c->instance->client;

        conn_release_link(c);
        if (c->link)
                cm_tell(c->link, CM_DISCONNECT, c->id, c->remote_id,
                        c->state == CONN_REQUESTED && c->active ? CM_REASON_WITHDRAWN : CM_REASON_BROKEN,
                        client->peer.pid, NULL, 0);
        if (c->pair) {
                /* Same host, tcp channel not made yet: the other end cannot
                 * become ESTABLISHED any more. */
                Conn *p = c->peer;

                pair_free(c->pair);
                c->peer = NULL;
                if (p) {
                        p->peer = NULL;
                        conn_abandon(p);
                }
        }
        data_out_free(c->data_out);
        closep(&c->data_fd);
        free(c->pd);
        if (c->shm && shm_region_kept(c->shm)) {
                /* Kept: charged to the client while it holds it. */
                channel_keeper_end_gone(t->keeper, c->shm);
                c->shm = NULL;
        } else if (c->shm) {
                client->shm_bytes -= c->shm->size;
                c->shm = shm_channel_unref(c->shm);
        }
        if (c->cr)
                c->cr->active = NULL;   /* withdrawn: the passive side still owns it */
        if (c->peer)
                c->peer->peer = NULL;
        if (c->state == CONN_REQUESTED && c->active)
                client->n_connecting--;
        client->n_conns--;
        t->n_conns--;
        sd_event_source_disable_unref(c->timer);
        LIST_REMOVE(conns, c->instance->conns, c);
        id_hash_remove(&t->conns, &c->hlink);
        free(c);
}

static Conn *conn_new(ConnTable *t, IaInstance *i, uint64_t ep_handle, bool active)
{
        Conn *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->table = t;
        c->instance = i;
        c->id = new_id(t);
        c->ep_handle = ep_handle;
        c->active = active;
        c->created_usec = now_usec(CLOCK_MONOTONIC);
        c->data_fd = -1;
        id_hash_add(&t->conns, &c->hlink, c->id);
        LIST_PREPEND(conns, i->conns, c);
        i->client->n_conns++;
        t->n_conns++;
        return c;
}

/* The active side's request failed: it gets the event and its end goes. */
static void conn_fail(Conn *a, uint32_t event, const uint8_t *pd, uint32_t pd_len, const char *why)
{
        send_ev_conn(a, event, pd, pd_len, why);
        conn_free(a);
}

/* The other end of x went away while their tcp channel was being made:
 * x is told as if it had gone before the accept completed. */
static void conn_abandon(Conn *x)
{
        if (x->active)
                conn_fail(x, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                          "the accepting process went away before the connection was up");
        else {
                send_ev_conn(x, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL, 0,
                             "the active side went away before the connection was up");
                conn_free(x);
        }
}

static void listener_free(Listener *l, const char *why)
{
        ConnTable *t = l->table;

        /* dat_psp_free(3DAT): pending requests are refused; the active side
         * sees no peer's answer. */
        while (l->crs) {
                Cr *cr = l->crs;
                Conn *a = cr->active;

                if (cr->link) {
                        char src[SOCKADDR_STRING_MAX];

                        addr_string(&cr->src, cr->src_len, src, sizeof(src));
                        log_info("Request %" PRIu32 " from %s (pid %d on another host) to conn_qual %"
                                 PRIu64 " refused: %s.", cr->id, src, (int) cr->remote_pid,
                                 l->conn_qual, why);
                        cm_tell(cr->link, CM_REJECT, 0, cr->remote_conn_id, CM_REASON_NON_PEER,
                                l->instance->client->peer.pid, NULL, 0);
                }
                cr_free(cr);
                if (a)
                        conn_fail(a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0, why);
        }
        log_debug("Listener %" PRIu32 " (pid %d, IA %s, conn_qual %" PRIu64 ") freed: %s.", l->id,
                  (int) l->instance->client->peer.pid, l->instance->ia->name, l->conn_qual, why);
        l->instance->client->n_listeners--;
        t->n_listeners--;
        uid_budget_release(l->instance->client->budget, UID_LISTENERS, 1);
        LIST_REMOVE(listeners, l->instance->listeners, l);
        id_hash_remove(&t->listeners, &l->hlink);
        CHAIN_REMOVE(&t->listener_by_qual[qual_bucket(l->instance->ia, l->conn_qual)], l, qual_next);
        free(l);
}

void conn_drop_instance(IaInstance *i)
{
        while (i->listeners)
                listener_free(i->listeners, "its process closed the IA or went away");
        while (i->conns) {
                Conn *c = i->conns;
                Conn *p = c->peer;

                if (c->pair) {
                        conn_free(c);   /* tells the other end itself */
                        continue;
                }
                conn_free(c);
                if (p) {
                        /* A terminal event ends the peer's end too. */
                        send_ev_conn(p, p->state == CONN_ESTABLISHED ? DAT_CONNECTION_EVENT_BROKEN
                                     : DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                                     "the peer process closed the IA or went away");
                        conn_free(p);
                }
        }
        channel_keeper_drop_instance(i->client->manager->conns->keeper, i);
}

/* ---- tcp data channels ------------------------------------------------------- */

static bool sockaddr_equal(const struct sockaddr_storage *a, socklen_t alen,
                           const struct sockaddr_storage *b, socklen_t blen)
{
        if (a->ss_family != b->ss_family)
                return false;
        if (a->ss_family == AF_INET) {
                const struct sockaddr_in *x = (const void *) a, *y = (const void *) b;

                return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
        }
        if (a->ss_family == AF_INET6) {
                const struct sockaddr_in6 *x = (const void *) a, *y = (const void *) b;

                return x->sin6_port == y->sin6_port &&
                       memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
        }
        return alen == blen && memcmp(a, b, alen) == 0;
}

/* A connecting socket's outcome (SO_ERROR): 0 or an errno. */
static int socket_error(int fd)
{
        socklen_t len = sizeof(int);
        int err = 0;

        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        return err;
}

/* Both ends of a same-host connection are told: channel, then ESTABLISHED
 * with the peer's private data (a->pd: the accepter's, b->pd: the
 * connecter's).  fd_a / fd_b: their tcp sockets (-1 for shm), closed here. */
/* EV_CONN_KEPT to end c, whose kept channel is reused: its EV_DATA_CHANNEL
 * and ESTABLISHED in one packet (PROTOCOL.md). */
static void send_ev_conn_kept(Conn *c, const char *why)
{
        struct datp_ev_conn_kept ev = {};
        Client *peer_client = c->peer ? c->peer->instance->client : NULL;

        account_ev_conn(c, DAT_CONNECTION_EVENT_ESTABLISHED, why);
        datp_header_init(&ev.hdr, DATP_EV_CONN_KEPT, c->instance->client->version, sizeof(ev), 0);
        ev.ia_id = c->instance->id;
        ev.conn_id = c->id;
        ev.ep_handle = c->ep_handle;
        ev.channel_id = c->shm->hlink.id;
        ev.side = channel_keeper_side(c->shm, c->instance);
        ev.region_size = c->shm->size;
        ev.ring_size = c->shm->ring_size;
        if (peer_client && peer_client->peer.pid > 0) {
                ev.peer_pid = peer_client->peer.pid;
                ev.peer_uid = peer_client->peer.uid;
        }
        ev.pd_len = c->pd_len;
        if (c->pd_len > 0)
                memcpy(ev.private_data, c->pd, c->pd_len);
        send_event(c->instance->client, &ev.hdr);
}

/* End c is up: its data channel (fd: its tcp socket, else -1; taken),
 * then ESTABLISHED; or both in one EV_CONN_KEPT for a reused channel.
 * Our copy of the socket is closed before ESTABLISHED goes: from the
 * moment a process hears of the connection the socket is the two
 * processes' alone, and the exit of one of them ends it even if datd
 * stops or hangs right then (a datd stopped between the two once held
 * an end open, and the survivor never heard of the exit). */
static void send_established(Conn *c, int fd, const char *why)
{
        if (c->shm && shm_region_kept(c->shm) && c->shm->sent) {
                closep(&fd);
                send_ev_conn_kept(c, why);
                return;
        }
        send_data_channel(c, fd);
        closep(&fd);
        send_ev_conn(c, DAT_CONNECTION_EVENT_ESTABLISHED, c->pd, c->pd_len, why);
}

static void establish_local(Conn *a, Conn *b, int fd_a, int fd_b)
{
        a->state = CONN_ESTABLISHED;
        a->instance->client->n_connecting--;
        a->timer = sd_event_source_disable_unref(a->timer);
        b->accepting = false;
        send_established(a, fd_a, "accepted by the peer");
        send_established(b, fd_b, "accepted");
        a->pd = (free(a->pd), NULL);
        b->pd = (free(b->pd), NULL);
        a->pd_len = b->pd_len = 0;
}

/* No data channel, no connection: the active end is refused, the accept
 * fails, and both ends go. */
static void fail_local(Conn *a, Conn *b, const char *why)
{
        pair_free(a->pair);
        a->peer = b->peer = NULL;
        send_ev_conn(a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0, why);
        send_ev_conn(b, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL, 0, why);
        conn_free(a);
        conn_free(b);
}

static void pair_check(TcpPair *p)
{
        Conn *a = p->a, *b = p->b;
        int fd_a, fd_b;

        if (!p->connected || p->fd_b < 0)
                return;
        fd_a = TAKE_FD(p->fd_a);
        fd_b = TAKE_FD(p->fd_b);
        pair_free(p);
        conn_log(LOG_DEBUG, a, "tcp data connection made.");
        establish_local(a, b, fd_a, fd_b);
}

static int pair_on_connect(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        TcpPair *p = userdata;
        int err = socket_error(fd);

        if (err) {
                char why[128];

                snprintf(why, sizeof(why), "datd's tcp data connection failed: %s", strerror(err));
                fail_local(p->a, p->b, why);
                return 0;
        }
        p->connected = true;
        p->io = sd_event_source_disable_unref(p->io);
        pair_check(p);
        return 0;
}

static int pair_on_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
        TcpPair *p = userdata;

        fail_local(p->a, p->b, "datd's tcp data connection was not made in time");
        return 0;
}

static int data_listener_on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        DataListener *dl = userdata;

        for (;;) {
                struct sockaddr_storage peer;
                socklen_t len = sizeof(peer);
                int cfd = accept4(fd, (struct sockaddr *) &peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
                TcpPair *p;

                if (cfd < 0)
                        return 0;
                /* Only datd's own connects: the 4-tuple names the one it made. */
                for (p = dl->pairs; p; p = p->next)
                        if (p->fd_b < 0 && sockaddr_equal(&p->local, p->local_len, &peer, len))
                                break;
                if (!p) {
                        close(cfd);
                        continue;
                }
                p->fd_b = cfd;
                pair_check(p);
        }
}

/* The data listener on IA ia's address, made on first use; NULL (and errno
 * set) when it cannot be. */
static DataListener *data_listener_get(ConnTable *t, const Ia *ia)
{
        Manager *m = t->manager;
        size_t k = (size_t) (ia - m->ias.ias);
        struct sockaddr_storage ss;
        uint32_t len;
        DataListener *dl;
        int r;

        if (!t->data_listeners) {
                t->data_listeners = calloc(m->ias.n, sizeof(*t->data_listeners));
                if (!t->data_listeners) {
                        errno = ENOMEM;
                        return NULL;
                }
                t->n_data_listeners = m->ias.n;
        }
        if (k >= t->n_data_listeners) {
                errno = EINVAL;
                return NULL;
        }
        if (t->data_listeners[k])
                return t->data_listeners[k];
        dl = calloc(1, sizeof(*dl));
        if (!dl) {
                errno = ENOMEM;
                return NULL;
        }
        dl->table = t;
        ia_peer_address(ia, &ss, &len);
        /* The IA's address, an ephemeral port. */
        if (ss.ss_family == AF_INET)
                ((struct sockaddr_in *) &ss)->sin_port = 0;
        else
                ((struct sockaddr_in6 *) &ss)->sin6_port = 0;
        dl->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (dl->fd < 0 || bind(dl->fd, (struct sockaddr *) &ss, len) < 0 || listen(dl->fd, SOMAXCONN) < 0)
                goto fail;
        r = sd_event_add_io(m->event, &dl->io, dl->fd, EPOLLIN, data_listener_on_accept, dl);
        if (r < 0) {
                errno = -r;
                goto fail;
        }
        t->data_listeners[k] = dl;
        return dl;
fail:
        r = errno;
        closep(&dl->fd);
        free(dl);
        errno = r;
        return NULL;
}

/* Same host, not shm: datd connects to its own data listener on the
 * passive IA's address; ESTABLISHED follows once both sockets are there.
 * Returns NULL, or why it could not start (in buf). */
static const char *pair_start(Conn *a, Conn *b, char *buf, size_t size)
{
        ConnTable *t = a->table;
        DataListener *dl = data_listener_get(t, b->instance->ia);
        struct sockaddr_storage to;
        socklen_t to_len = sizeof(to);
        TcpPair *p;
        int r;

        if (!dl) {
                snprintf(buf, size, "datd has no tcp data listener on the IA's address: %s",
                         strerror(errno));
                return buf;
        }
        p = calloc(1, sizeof(*p));
        if (!p)
                return "out of memory";
        p->dl = dl;
        p->a = a;
        p->b = b;
        p->fd_b = -1;
        p->fd_a = -1;
        p->next = dl->pairs;
        dl->pairs = p;
        a->pair = b->pair = p;
        if (getsockname(dl->fd, (struct sockaddr *) &to, &to_len) < 0)
                goto fail;
        p->fd_a = socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (p->fd_a < 0)
                goto fail;
        if (connect(p->fd_a, (struct sockaddr *) &to, to_len) < 0 && errno != EINPROGRESS)
                goto fail;
        p->local_len = sizeof(p->local);
        if (getsockname(p->fd_a, (struct sockaddr *) &p->local, &p->local_len) < 0)
                goto fail;
        r = sd_event_add_io(t->manager->event, &p->io, p->fd_a, EPOLLOUT, pair_on_connect, p);
        if (r >= 0)
                r = sd_event_add_time_relative(t->manager->event, &p->timer, CLOCK_MONOTONIC,
                                               DATA_CONNECT_TIMEOUT_USEC, 1000, pair_on_timeout, p);
        if (r < 0) {
                errno = -r;
                goto fail;
        }
        return NULL;
fail:
        snprintf(buf, size, "datd's tcp data connection cannot be made: %s", strerror(errno));
        pair_free(p);
        return buf;
}

/* An established end whose other end, at another host, went: DISCONNECTED
 * for a dat_ep_disconnect there, BROKEN otherwise (enum cm_reason). */
static void tell_peer_gone(Conn *x, uint32_t reason)
{
        if (reason == CM_REASON_DISCONNECTED)
                send_ev_conn(x, DAT_CONNECTION_EVENT_DISCONNECTED, NULL, 0, "disconnected by the peer");
        else
                send_ev_conn(x, DAT_CONNECTION_EVENT_BROKEN, NULL, 0, "the peer process went away");
}

/* Another host, passive side: READY and the data connection both came.
 * Whatever the active side did after READY (a DISCONNECT of this end too)
 * waited on the held link, and comes after the ESTABLISHED. */
static void passive_remote_check(Conn *x)
{
        int fd;

        if (!x->ready || x->data_fd < 0)
                return;
        fd = TAKE_FD(x->data_fd);
        x->accepting = false;
        x->ready = false;
        x->timer = sd_event_source_disable_unref(x->timer);
        send_data_channel(x, fd);
        closep(&fd);    /* before ESTABLISHED: see send_established */
        send_ev_conn(x, DAT_CONNECTION_EVENT_ESTABLISHED, x->pd, x->pd_len, "accepted");
        x->pd = (free(x->pd), NULL);
        conn_release_link(x);
}

static int passive_remote_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
        Conn *x = userdata;

        send_ev_conn(x, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL, 0,
                     x->ready ? "the data connection from the active side's host did not come"
                              : "no READY from the active side's datd");
        conn_free(x);   /* tells the other datd: BROKEN */
        return 0;
}

/* Another host, passive side: the bound on the whole ACCEPT-to-ESTABLISHED
 * span, armed when ACCEPT goes.  The active datd has DATA_CONNECT_TIMEOUT
 * from the ACCEPT's arrival to write DATA and answer READY; two keepalive
 * periods cover each way over the link (a link slower than that is lost).
 * Armed from READY only, a peer that never sends it kept the end ACCEPTING
 * (and its data socket open) for ever. */
static int passive_remote_arm(Conn *x)
{
        Manager *m = x->table->manager;

        return sd_event_add_time_relative(m->event, &x->timer, CLOCK_MONOTONIC,
                                          DATA_CONNECT_TIMEOUT_USEC +
                                          2 * (uint64_t) m->config->cm_keepalive_ms * 1000u,
                                          1000, passive_remote_timeout, x);
}

bool conn_cm_data(Manager *m, int fd, const struct cm_data *msg)
{
        Conn *x = msg->dst_conn_id ? conn_find(m->conns, msg->dst_conn_id) : NULL;
        uint8_t diff = 0;

        if (!x || !x->link || !x->accepting || x->data_fd >= 0 || x->remote_id != msg->src_conn_id)
                return false;
        /* Compared in full whatever differs first. */
        for (size_t i = 0; i < CM_TOKEN_SIZE; i++)
                diff |= (uint8_t) (x->token[i] ^ msg->token[i]);
        if (diff)
                return false;
        /* Single use. */
        memset(x->token, 0, sizeof(x->token));
        x->data_fd = fd;
        conn_log(LOG_DEBUG, x, "data connection from the active side's host arrived.");
        passive_remote_check(x);
        return true;
}

/* Another host, active side: the DATA message is out; the connection is up. */
static void active_remote_done(Conn *a)
{
        int fd = TAKE_FD(a->data_out->fd);

        data_out_free(a->data_out);
        a->state = CONN_ESTABLISHED;
        a->instance->client->n_connecting--;
        a->timer = sd_event_source_disable_unref(a->timer);
        cm_tell(a->link, CM_READY, a->id, a->remote_id, CM_REASON_NONE, a->instance->client->peer.pid,
                NULL, 0);
        send_data_channel(a, fd);
        closep(&fd);    /* before ESTABLISHED: see send_established */
        send_ev_conn(a, DAT_CONNECTION_EVENT_ESTABLISHED, a->pd, a->pd_len, "accepted by the peer");
        a->pd = (free(a->pd), NULL);
        a->pd_len = 0;
}

static int data_out_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        DataOut *o = userdata;
        int err = socket_error(fd);

        while (!err && o->sent < sizeof(o->msg)) {
                ssize_t n = send(fd, (const uint8_t *) &o->msg + o->sent, sizeof(o->msg) - o->sent,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);

                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return 0;
                if (n < 0)
                        err = errno;
                else
                        o->sent += (size_t) n;
        }
        if (err) {
                char why[128];

                snprintf(why, sizeof(why), "the data connection to the peer's host failed: %s",
                         strerror(err));
                conn_fail(o->a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0, why);
                return 0;
        }
        active_remote_done(o->a);
        return 0;
}

static int data_out_on_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
        DataOut *o = userdata;

        conn_fail(o->a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                  "the data connection to the peer's host was not made in time");
        return 0;
}

/* Another host, active side, ACCEPT came: connect to that datd's cm_port
 * and send DATA naming the passive end; 0 or -errno. */
static int data_out_start(Conn *a, const uint8_t token[CM_TOKEN_SIZE])
{
        Manager *m = a->table->manager;
        DataOut *o = calloc(1, sizeof(*o));
        int r;

        if (!o)
                return -ENOMEM;
        o->a = a;
        a->data_out = o;
        cm_data_message(&o->msg, a->remote_id, a->id, token);
        o->fd = cm_data_socket(a->link);
        if (o->fd < 0) {
                r = o->fd;
                data_out_free(o);
                return r;
        }
        r = sd_event_add_io(m->event, &o->io, o->fd, EPOLLOUT, data_out_on_io, o);
        if (r >= 0)
                r = sd_event_add_time_relative(m->event, &o->timer, CLOCK_MONOTONIC,
                                               DATA_CONNECT_TIMEOUT_USEC, 1000, data_out_on_timeout, o);
        if (r < 0)
                data_out_free(o);
        return r;
}

/* ---- requests ----------------------------------------------------------------- */

static void set_status(struct datp_status *s, uint32_t dat_status, int sys_errno)
{
        s->dat_status = dat_status;
        s->sys_errno = sys_errno;
}

static bool qual_free(ConnTable *t, const Ia *ia, uint64_t qual)
{
        return !listener_find_qual(t, ia, qual);
}

/* PSP_ANY: the first free conn_qual of the range from where the last search
 * stopped.  At most n_listeners + 1 candidates are ever taken. */
static bool pick_any_qual(ConnTable *t, const Ia *ia, uint64_t *ret)
{
        const Config *cfg = t->manager->config;
        uint64_t span = cfg->conn_qual_any_max - cfg->conn_qual_any_min + 1;
        uint64_t tries = (uint64_t) t->n_listeners + 1;

        if (tries > span)
                tries = span;
        for (uint64_t k = 0; k < tries; k++) {
                uint64_t q = t->next_any;

                if (q < cfg->conn_qual_any_min || q > cfg->conn_qual_any_max)
                        q = cfg->conn_qual_any_min;
                t->next_any = q + 1;
                if (qual_free(t, ia, q)) {
                        *ret = q;
                        return true;
                }
        }
        return false;
}

int conn_handle_listen(Client *c, const struct datp_listen *req)
{
        ConnTable *t = c->manager->conns;
        const Limits *lim = &c->manager->config->limits;
        struct datp_listen_reply reply = {};
        IaInstance *i = client_find_ia(c, req->ia_id);
        uint64_t qual = req->conn_qual;
        Listener *l;

        datp_header_init(&reply.hdr, DATP_LISTEN | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!i)
                set_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
        else if (c->n_listeners >= lim->max_listeners_per_client) {
                set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_NO_SUBTYPE), EDQUOT);
                log_info("Client %" PRIu64 " (pid %d): listen on IA %s refused: "
                         "max_listeners_per_client (%" PRIu32 ") reached.", c->id,
                         (int) c->peer.pid, i->ia->name, lim->max_listeners_per_client);
        } else if (uid_budget_room(c->budget, UID_LISTENERS) == 0) {
                /* Else one user's clients could hold all of conn_qual_any_range. */
                set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_NO_SUBTYPE), EDQUOT);
                log_info("Client %" PRIu64 " (pid %d, uid %u): listen on IA %s refused: "
                         "max_listeners_per_uid (%" PRIu32 ") reached.", c->id, (int) c->peer.pid,
                         (unsigned) c->peer.uid, i->ia->name, lim->max_listeners_per_uid);
        } else if (req->kind == DATP_LISTENER_PSP_ANY && !pick_any_qual(t, i->ia, &qual)) {
                set_status(&reply.status, DAT_ERR(DAT_CONN_QUAL_UNAVAILABLE, DAT_NO_SUBTYPE), EADDRNOTAVAIL);
                log_info("Client %" PRIu64 " (pid %d): no free conn_qual in conn_qual_any_range on IA %s.",
                         c->id, (int) c->peer.pid, i->ia->name);
        } else if (req->kind != DATP_LISTENER_PSP_ANY && !qual_free(t, i->ia, qual)) {
                Listener *o = listener_find_qual(t, i->ia, qual);

                set_status(&reply.status, DAT_ERR(DAT_CONN_QUAL_IN_USE, DAT_NO_SUBTYPE), EADDRINUSE);
                log_info("Client %" PRIu64 " (pid %d): conn_qual %" PRIu64 " on IA %s is in use "
                         "(listener %" PRIu32 " of pid %d).", c->id, (int) c->peer.pid, qual,
                         i->ia->name, o->id, (int) o->instance->client->peer.pid);
        } else if (!(l = calloc(1, sizeof(*l))))
                set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY), ENOMEM);
        else {
                l->table = t;
                l->instance = i;
                l->id = new_id(t);
                l->kind = req->kind;
                l->conn_qual = qual;
                l->handle = req->handle;
                id_hash_add(&t->listeners, &l->hlink, l->id);
                l->qual_next = t->listener_by_qual[qual_bucket(i->ia, qual)];
                t->listener_by_qual[qual_bucket(i->ia, qual)] = l;
                LIST_PREPEND(listeners, i->listeners, l);
                c->n_listeners++;
                t->n_listeners++;
                (void) uid_budget_charge(c->budget, UID_LISTENERS, 1); /* room checked above */
                reply.listener_id = l->id;
                reply.conn_qual = qual;
                log_debug("Client %" PRIu64 " (pid %d) listens on IA %s conn_qual %" PRIu64
                          " (listener %" PRIu32 ").", c->id, (int) c->peer.pid, i->ia->name, qual, l->id);
        }
        if (reply.listener_id)
                t->counters.listens++;
        else
                t->counters.listens_refused++;
        return client_send(c, &reply.hdr);
}

/* The listener with this id of this client's IA instance, or NULL. */
static Listener *own_listener(Client *c, uint32_t ia_id, uint32_t id)
{
        Listener *l = listener_find(c->manager->conns, id);

        return l && l->instance->client == c && l->instance->id == ia_id ? l : NULL;
}

int conn_handle_unlisten(Client *c, const struct datp_unlisten *req)
{
        struct datp_unlisten_reply reply = {};
        Listener *l = own_listener(c, req->ia_id, req->listener_id);

        datp_header_init(&reply.hdr, DATP_UNLISTEN | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!client_find_ia(c, req->ia_id))
                set_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
        else if (!l)
                set_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP), EBADF);
        else {
                /* Reply first: the refusals it causes may go to this client. */
                int r = client_send(c, &reply.hdr);

                listener_free(l, "the listener was freed");
                return r;
        }
        return client_send(c, &reply.hdr);
}

static int conn_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
        Conn *a = userdata;

        conn_fail(a, DAT_CONNECTION_EVENT_TIMED_OUT, NULL, 0,
                  "no answer within the connect timeout; request withdrawn");
        return 0;
}

/* The connect timeout of end a.  A timeout that ends past what the
 * monotonic clock can name (sd-event: -EOVERFLOW) ends never: it is
 * DAT_TIMEOUT_INFINITE like UINT64_MAX itself (PROTOCOL.md, CONNECT), and
 * no client-chosen value fails the request. */
static int arm_timer(Conn *a, uint64_t timeout_us)
{
        int r;

        if (timeout_us == UINT64_MAX)
                return 0;
        r = sd_event_add_time_relative(a->table->manager->event, &a->timer, CLOCK_MONOTONIC,
                                       timeout_us, 1000, conn_timeout, a);
        return r == -EOVERFLOW ? 0 : r;
}

static void sockaddr_to_cm(const struct sockaddr_storage *ss, struct cm_addr *out)
{
        memset(out, 0, sizeof(*out));
        out->family = ss->ss_family;
        if (ss->ss_family == AF_INET)
                memcpy(out->addr, &((const struct sockaddr_in *) ss)->sin_addr, 4);
        else if (ss->ss_family == AF_INET6)
                memcpy(out->addr, &((const struct sockaddr_in6 *) ss)->sin6_addr, 16);
}

static socklen_t cm_to_sockaddr(const struct cm_addr *in, struct sockaddr_storage *ss)
{
        memset(ss, 0, sizeof(*ss));
        ss->ss_family = in->family;
        if (in->family == AF_INET) {
                memcpy(&((struct sockaddr_in *) ss)->sin_addr, in->addr, 4);
                return sizeof(struct sockaddr_in);
        }
        memcpy(&((struct sockaddr_in6 *) ss)->sin6_addr, in->addr, 16);
        return sizeof(struct sockaddr_in6);
}

/* After the CONNECT reply: find the listener and hand it the request. */
static void connect_negotiate(Conn *a, const struct datp_connect *req)
{
        ConnTable *t = a->table;
        Manager *m = t->manager;
        Ia *target = local_target(m, a->instance->ia, &a->remote);
        const char *why;
        Listener *l;
        Cr *cr;
        int r;

        if (!target) {
                /* Another host's IA: through the CM link to its datd. */
                CmLink *link = cm_link_get(m, &a->remote, a->remote_len);
                struct sockaddr_storage src;
                uint32_t src_len;
                struct cm_conn msg = {
                        .src_conn_id = a->id,
                        .pid = (uint32_t) a->instance->client->peer.pid,
                        .conn_qual = a->remote_conn_qual,
                        .qos = req->qos,
                        .pd_len = req->pd_len,
                };

                if (!link) {
                        conn_fail(a, DAT_CONNECTION_EVENT_UNREACHABLE, NULL, 0,
                                  "no CM link to that host's datd");
                        return;
                }
                ia_peer_address(a->instance->ia, &src, &src_len);
                sockaddr_to_cm(&src, &msg.src);
                sockaddr_to_cm(&a->remote, &msg.dst);
                memcpy(msg.private_data, req->private_data, req->pd_len);
                a->link = link;
                r = arm_timer(a, req->timeout_us);
                if (r < 0) {
                        conn_fail(a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                                  "cannot arm the connect timer");
                        return;
                }
                conn_log(LOG_DEBUG, a, "request sent over the CM link.");
                cm_send_conn(link, CM_CONNECT_REQ, &msg);
                return;
        }
        /* Another IA of this host is that IA's to open: datd.conf's
         * allow_users and allow_groups hold for reaching its listeners as
         * for IA_OPEN, or any user could reach a restricted IA through an
         * open one. */
        if (target != a->instance->ia && !policy_allows(target->config, &a->instance->client->peer)) {
                conn_fail(a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                          "its user may not use the listener's IA (allow_users, allow_groups)");
                return;
        }
        l = listener_find_qual(t, target, a->remote_conn_qual);
        why = listener_refuses(l, &m->config->limits);
        if (!why)
                why = qos_refuses(target, req->qos);
        if (why) {
                conn_fail(a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0, why);
                return;
        }
        /* Armed before the request exists: a request whose active end
         * failed here would stay in the listener's backlog, never
         * announced and never answered. */
        r = arm_timer(a, req->timeout_us);
        if (r < 0) {
                conn_fail(a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                          "cannot arm the connect timer");
                return;
        }
        cr = cr_new(t, l, req->private_data, req->pd_len);
        if (!cr) {
                conn_fail(a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0, "out of memory");
                return;
        }
        cr->active = a;
        a->cr = cr;
        conn_log(LOG_DEBUG, a, "request %" PRIu32 " to listener %" PRIu32 ".", cr->id, l->id);
        send_ev_conn_request(cr);
}

int conn_handle_connect(Client *c, const struct datp_connect *req)
{
        ConnTable *t = c->manager->conns;
        const Limits *lim = &c->manager->config->limits;
        struct datp_connect_reply reply = {};
        IaInstance *i = client_find_ia(c, req->ia_id);
        struct sockaddr_storage remote = req->remote_address;
        socklen_t remote_len = req->remote_address_len;
        uint64_t qual = req->remote_conn_qual;
        const char *limit = NULL;
        Conn *a = NULL;
        int r;

        datp_header_init(&reply.hdr, DATP_CONNECT | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!i) {
                set_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
                goto refused;
        }
        if (req->pd_len > lim->max_private_data) {
                set_status(&reply.status, DAT_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7), EMSGSIZE);
                goto refused;
        }
        if (req->flags & DATP_CONNECT_DUP) {
                /* dat_ep_dup_connect(3DAT): same remote IA and conn_qual as
                 * the duplicated connection, which must be connected. */
                Conn *o = conn_find(t, (uint32_t) req->dup_of_conn_id);

                if (!o || req->dup_of_conn_id > UINT32_MAX || o->instance->client != c) {
                        set_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP), EBADF);
                        goto refused;
                }
                if (o->state != CONN_ESTABLISHED) {
                        set_status(&reply.status, DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED),
                                   ENOTCONN);
                        goto refused;
                }
                remote = o->remote;
                remote_len = o->remote_len;
                qual = o->remote_conn_qual;
        }
        /* ::ffff:a.b.c.d is a.b.c.d, to find the IA or the host it names as
         * to show it. */
        sockaddr_unmap_v4(&remote, &remote_len);
        if (c->n_connecting >= lim->max_pending_connects_per_client)
                limit = "max_pending_connects_per_client";
        else if (c->n_conns >= lim->max_connections_per_client)
                limit = "max_connections_per_client";
        if (limit) {
                set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP), EDQUOT);
                log_info("Client %" PRIu64 " (pid %d): connect on IA %s to conn_qual %" PRIu64
                         " refused: %s reached.", c->id, (int) c->peer.pid, i->ia->name, qual, limit);
                goto refused;
        }
        a = conn_new(t, i, req->ep_handle, true);
        if (!a) {
                set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY), ENOMEM);
                goto refused;
        }
        a->state = CONN_REQUESTED;
        ep_follows(a, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING, true);
        c->n_connecting++;
        a->remote = remote;
        a->remote_len = remote_len;
        a->remote_conn_qual = qual;
        reply.conn_id = a->id;
        t->counters.connects++;
        r = client_send(c, &reply.hdr);
        if (r < 0)
                return r;       /* the client goes, and a with it */
        connect_negotiate(a, req);
        return 0;

refused:
        t->counters.connects_refused++;
        return client_send(c, &reply.hdr);
}

/* A request pending at one of this client's listeners of this IA instance. */
static Cr *own_cr(Client *c, uint32_t ia_id, uint32_t id)
{
        Cr *cr = cr_find(c->manager->conns, id);

        return cr && cr->listener && cr->listener->instance->client == c &&
               cr->listener->instance->id == ia_id ? cr : NULL;
}

/* The status for a request naming an unknown ia_id or cr_id. */
static bool check_cr(Client *c, uint32_t ia_id, Cr *cr, struct datp_status *s)
{
        if (!client_find_ia(c, ia_id))
                set_status(s, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
        else if (!cr)
                set_status(s, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR), EBADF);
        else
                return true;
        return false;
}

/* Another host: ACCEPT with a new token for the data connection the
 * active side's datd will make (PROTOCOL.md §14). */
static void send_accept(Conn *b, int32_t pid, const uint8_t *pd, uint32_t pd_len)
{
        struct cm_conn m = {
                .src_conn_id = b->id,
                .dst_conn_id = b->remote_id,
                .pid = (uint32_t) pid,
                .pd_len = pd_len,
        };
        sd_id128_t id;

        /* 128 random bits (getrandom); a failure leaves a token nobody can
         * guess either: the one of an all-zero DATA is refused below. */
        if (sd_id128_randomize(&id) < 0)
                id = SD_ID128_MAKE(ff, ff, ff, ff, ff, ff, ff, ff, ff, ff, ff, ff, ff, ff, ff, ff);
        memcpy(b->token, id.bytes, sizeof(b->token));
        memcpy(m.token, b->token, sizeof(m.token));
        if (pd_len)
                memcpy(m.private_data, pd, pd_len);
        cm_send_conn(b->link, CM_ACCEPT, &m);
}

/* Keeps the private data end x gets with its ESTABLISHED; 0 or -ENOMEM. */
static int store_pd(Conn *x, const uint8_t *pd, uint32_t pd_len)
{
        x->pd_len = 0;
        if (pd_len == 0)
                return 0;
        x->pd = malloc(pd_len);
        if (!x->pd)
                return -ENOMEM;
        memcpy(x->pd, pd, pd_len);
        x->pd_len = pd_len;
        return 0;
}

int conn_handle_cr_accept(Client *c, const struct datp_cr_accept *req)
{
        ConnTable *t = c->manager->conns;
        const Limits *lim = &c->manager->config->limits;
        struct datp_cr_accept_reply reply = {};
        Cr *cr = own_cr(c, req->ia_id, req->cr_id);
        char why_buf[256];
        const char *why;
        Conn *a, *b;
        int r;

        datp_header_init(&reply.hdr, DATP_CR_ACCEPT | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!check_cr(c, req->ia_id, cr, &reply.status))
                return client_send(c, &reply.hdr);
        if (req->pd_len > lim->max_private_data) {
                set_status(&reply.status, DAT_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4), EMSGSIZE);
                return client_send(c, &reply.hdr);
        }
        if (c->n_conns >= lim->max_connections_per_client) {
                set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP), EDQUOT);
                log_info("Client %" PRIu64 " (pid %d): accept of request %" PRIu32
                         " refused: max_connections_per_client reached.", c->id, (int) c->peer.pid,
                         cr->id);
                return client_send(c, &reply.hdr);
        }
        b = conn_new(t, cr->listener->instance, req->ep_handle, false);
        if (!b) {
                set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY), ENOMEM);
                return client_send(c, &reply.hdr);
        }
        b->state = CONN_ESTABLISHED;
        ep_follows(b, DAT_EP_STATE_COMPLETION_PENDING, true);
        b->remote_conn_qual = cr->listener->conn_qual;
        a = cr->active;
        reply.conn_id = b->id;
        if (cr->link) {
                /* Another host: ACCEPT goes back, ESTABLISHED follows READY. */
                b->pd = malloc(DATP_PRIVATE_DATA_MAX);
                if (!b->pd) {
                        conn_free(b);
                        set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES,
                                                          DAT_RESOURCE_MEMORY), ENOMEM);
                        return client_send(c, &reply.hdr);
                }
                b->pd_len = cr->pd_len;
                memcpy(b->pd, cr->pd, cr->pd_len);
                /* Before b is linked: freed, it tells the other datd nothing
                 * and the request stays for another answer. */
                if (passive_remote_arm(b) < 0) {
                        conn_free(b);
                        set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES,
                                                          DAT_RESOURCE_MEMORY), ENOMEM);
                        return client_send(c, &reply.hdr);
                }
                b->link = cr->link;
                b->remote_id = cr->remote_conn_id;
                b->remote_pid = cr->remote_pid;
                b->remote = cr->src;
                b->remote_len = cr->src_len;
                b->accepting = true;
                cr->listener->n_accepted++;
                send_accept(b, c->peer.pid, req->private_data, req->pd_len);
                conn_log(LOG_DEBUG, b, "accepted request %" PRIu32 ", waiting for READY.", cr->id);
                cr_free(cr);
                return client_send(c, &reply.hdr);
        }
        if (!a) {
                /* dat_cr_accept(3DAT): the active side is gone (timed out,
                 * disconnected, died): the accept cannot complete. */
                struct sockaddr_storage ss;
                uint32_t len;

                ia_peer_address(b->instance->ia, &ss, &len);
                b->remote = ss;
                b->remote_len = len;
                cr_free(cr);
                r = client_send(c, &reply.hdr);
                if (r < 0)
                        return r;
                send_ev_conn(b, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL, 0,
                             "the active side withdrew the request");
                conn_free(b);
                return 0;
        }
        {
                uint32_t len;

                ia_peer_address(a->instance->ia, &b->remote, &len);
                b->remote_len = len;
        }
        b->peer = a;
        a->peer = b;
        cr->listener->n_accepted++;
        /* The active side gets the accepter's private data, the passive
         * side the connecter's (dat_ep_connect(3DAT), dat_cr_accept(3DAT)). */
        r = store_pd(a, req->private_data, req->pd_len);
        if (r >= 0)
                r = store_pd(b, cr->pd, cr->pd_len);
        cr_free(cr);
        if (r < 0)
                why = "out of memory";
        else if (conn_is_shm(a) && conn_is_shm(b))
                why = channel_setup_local(a, b, why_buf, sizeof(why_buf));
        else {
                /* tcp: ESTABLISHED once datd's data connection is made. */
                b->accepting = true;
                why = pair_start(a, b, why_buf, sizeof(why_buf));
        }
        r = client_send(c, &reply.hdr);
        if (why) {
                fail_local(a, b, why);
                return r;
        }
        if (a->shm) {
                establish_local(a, b, -1, -1);
                if (!a->shm->sent)
                        shm_channel_sent(a->shm);
        }
        return r;
}

int conn_handle_channel_release(Client *c, const struct datp_channel_release *req)
{
        struct datp_channel_release_reply reply = {};
        IaInstance *i = client_find_ia(c, req->ia_id);

        datp_header_init(&reply.hdr, DATP_CHANNEL_RELEASE | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!i)
                set_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
        else
                channel_keeper_release(c->manager->conns->keeper, i, req->channel_id);
        return client_send(c, &reply.hdr);
}

int conn_handle_cr_reject(Client *c, const struct datp_cr_reject *req)
{
        struct datp_cr_reject_reply reply = {};
        Cr *cr = own_cr(c, req->ia_id, req->cr_id);
        bool non_peer;
        Conn *a;
        int r;

        datp_header_init(&reply.hdr, DATP_CR_REJECT | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!check_cr(c, req->ia_id, cr, &reply.status))
                return client_send(c, &reply.hdr);
        if (req->pd_len > c->manager->config->limits.max_private_data) {
                set_status(&reply.status, DAT_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3), EMSGSIZE);
                return client_send(c, &reply.hdr);
        }
        non_peer = req->flags & DATP_CR_REJECT_NON_PEER;
        a = cr->active;
        if (cr->link)
                cm_tell(cr->link, CM_REJECT, 0, cr->remote_conn_id,
                        non_peer ? CM_REASON_NON_PEER : CM_REASON_PEER, c->peer.pid,
                        req->private_data, req->pd_len);
        cr_free(cr);
        r = client_send(c, &reply.hdr);
        if (a && non_peer)
                conn_fail(a, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                          "refused by the listener's provider (no endpoint for it)");
        else if (a)
                conn_fail(a, DAT_CONNECTION_EVENT_PEER_REJECTED, req->private_data, req->pd_len,
                          "rejected by the listener's process");
        return r;
}

int conn_handle_cr_handoff(Client *c, const struct datp_cr_handoff *req)
{
        ConnTable *t = c->manager->conns;
        struct datp_cr_handoff_reply reply = {};
        Cr *cr = own_cr(c, req->ia_id, req->cr_id);
        Listener *to = NULL;
        int r;

        datp_header_init(&reply.hdr, DATP_CR_HANDOFF | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!check_cr(c, req->ia_id, cr, &reply.status))
                return client_send(c, &reply.hdr);
        to = listener_find_qual(t, cr->listener->instance->ia, req->conn_qual);
        /* dat_cr_handoff(3DAT): to another listener of the same IA. */
        if (!to || to == cr->listener) {
                set_status(&reply.status, DAT_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2), ENOENT);
                log_info("Client %" PRIu64 " (pid %d): handoff of request %" PRIu32 " on IA %s to "
                         "conn_qual %" PRIu64 " refused: %s.", c->id, (int) c->peer.pid, cr->id,
                         cr->listener->instance->ia->name, req->conn_qual,
                         to ? "that is the request's own listener" : "no listener there");
                return client_send(c, &reply.hdr);
        }
        if (listener_refuses(to, &c->manager->config->limits)) {
                /* Its backlog is full, or it is an RSP that had its request. */
                set_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_NO_SUBTYPE), EAGAIN);
                return client_send(c, &reply.hdr);
        }
        r = client_send(c, &reply.hdr);
        if (!cr->active && !cr->link) {
                cr_free(cr);    /* withdrawn: nothing left to hand over */
                return r;
        }
        LIST_REMOVE(crs, cr->listener->crs, cr);
        cr->listener->n_pending--;
        cr->listener = to;
        LIST_PREPEND(crs, to->crs, cr);
        to->n_pending++;
        if (cr->active)
                conn_log(LOG_DEBUG, cr->active, "request %" PRIu32 " handed off to listener %" PRIu32
                 " (conn_qual %" PRIu64 ").", cr->id, to->id, to->conn_qual);
        send_ev_conn_request(cr);
        return r;
}

int conn_handle_disconnect(Client *c, const struct datp_disconnect *req)
{
        struct datp_disconnect_reply reply = {};
        Conn *x = conn_find(c->manager->conns, req->conn_id);
        Conn *p;
        int r;

        datp_header_init(&reply.hdr, DATP_DISCONNECT | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!client_find_ia(c, req->ia_id)) {
                set_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
                return client_send(c, &reply.hdr);
        }
        if (!x || x->instance->client != c || x->instance->id != req->ia_id) {
                set_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP), EBADF);
                return client_send(c, &reply.hdr);
        }
        r = client_send(c, &reply.hdr);
        /* dat_ep_disconnect(3DAT): DISCONNECTED on both ends, graceful or
         * abrupt; a pending request is withdrawn. */
        p = x->peer;
        conn_log(LOG_DEBUG, x, "%s disconnect.",
                 (req->flags & ~DATP_DISCONNECT_NO_EVENT) == DATP_CLOSE_GRACEFUL ? "graceful" : "abrupt");
        /* The process ended its end itself: the event would only be dropped. */
        if (req->flags & DATP_DISCONNECT_NO_EVENT)
                account_ev_conn(x, DAT_CONNECTION_EVENT_DISCONNECTED, "disconnected by its process");
        else
                send_ev_conn(x, DAT_CONNECTION_EVENT_DISCONNECTED, NULL, 0, "disconnected by its process");
        if (x->pair) {
                /* Its tcp channel was being made: the other end was never
                 * ESTABLISHED, and hears of it from conn_free(). */
                conn_free(x);
                return r;
        }
        if (x->link && !(x->state == CONN_REQUESTED && x->active)) {
                cm_tell(x->link, CM_DISCONNECT, x->id, x->remote_id, CM_REASON_DISCONNECTED,
                        c->peer.pid, NULL, 0);
                conn_drop_link(x);
        }
        conn_free(x);
        if (p) {
                send_ev_conn(p, DAT_CONNECTION_EVENT_DISCONNECTED, NULL, 0, "disconnected by the peer");
                conn_free(p);
        }
        return r;
}

/* ---- D-Bus views ---------------------------------------------------------- */

static const char *listener_kind_name(uint32_t kind)
{
        switch (kind) {
        case DATP_LISTENER_PSP: return "PSP";
        case DATP_LISTENER_PSP_ANY: return "PSP_ANY";
        case DATP_LISTENER_RSP: return "RSP";
        default: return "?";
        }
}

void conn_foreach_listener(Manager *m, void (*fn)(const ListenerInfo *, void *), void *userdata)
{
        Client *c;
        IaInstance *i;
        Listener *l;

        LIST_FOREACH(clients, c, m->clients)
                LIST_FOREACH(instances, i, c->instances)
                        LIST_FOREACH(listeners, l, i->listeners) {
                                ListenerInfo info = {
                                        .id = l->id,
                                        .client_id = c->id,
                                        .pid = c->peer.pid,
                                        .command = c->peer.comm,
                                        .ia = i->ia->name,
                                        .kind = listener_kind_name(l->kind),
                                        .conn_qual = l->conn_qual,
                                        .pending = l->n_pending,
                                        .accepted = l->n_accepted,
                                };
                                fn(&info, userdata);
                        }
}

void conn_foreach_connection(Manager *m, void (*fn)(const ConnInfo *, void *), void *userdata)
{
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        Client *c;
        IaInstance *i;
        Conn *x;

        LIST_FOREACH(clients, c, m->clients)
                LIST_FOREACH(instances, i, c->instances)
                        LIST_FOREACH(conns, x, i->conns) {
                                char local[SOCKADDR_STRING_MAX], remote[SOCKADDR_STRING_MAX];
                                struct sockaddr_storage ss;
                                uint32_t len;
                                ConnInfo info = {
                                        .id = x->id,
                                        .client_id = c->id,
                                        .pid = c->peer.pid,
                                        .command = c->peer.comm,
                                        .ia = i->ia->name,
                                        .local_address = local,
                                        .remote_address = remote,
                                        .remote_conn_qual = x->remote_conn_qual,
                                        .role = x->active ? "active" : "passive",
                                        .state = x->accepting ? "ACCEPTING"
                                                 : x->state == CONN_ESTABLISHED ? "ESTABLISHED"
                                                 : "REQUESTED",
                                        .age_usec = now - x->created_usec,
                                        .peer_id = x->peer ? x->peer->id : 0,
                                        .shm_bytes = x->shm ? x->shm->size : 0,
                                        .peer_pid = x->peer ? x->peer->instance->client->peer.pid
                                                    : x->link ? x->remote_pid
                                                    : x->cr && x->cr->listener
                                                    ? x->cr->listener->instance->client->peer.pid : 0,
                                };

                                ia_peer_address(i->ia, &ss, &len);
                                addr_string(&ss, len, local, sizeof(local));
                                addr_string(&x->remote, x->remote_len, remote, sizeof(remote));
                                fn(&info, userdata);
                        }
}

/* ---- another host's datd (cm.h) --------------------------------------------- */

/* The IA a request from another host reaches: the tcp IA with the address
 * it connected to, else the first tcp IA open to every user (the address
 * is this host's: the other datd sent it here).  Only tcp IAs: the
 * connection's data goes over TCP, and an shm IA may well share the tcp
 * IA's address.  A restricted IA (allow_users, allow_groups) is reached
 * from another host only at its own address, never in its stead:
 * datd.conf(5), ACCESS POLICY. */
static Ia *remote_target(Manager *m, const struct sockaddr_storage *dst)
{
        struct sockaddr_storage ip = *dst;
        socklen_t len = ip.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                : sizeof(struct sockaddr_in6);

        /* An older datd sends the address as its client gave it. */
        sockaddr_unmap_v4(&ip, &len);
        for (size_t i = 0; i < m->ias.n; i++)
                if (m->ias.ias[i].transport == TRANSPORT_TCP && m->ias.ias[i].address_len > 0 &&
                    addr_same_ip(&m->ias.ias[i].address, &ip))
                        return &m->ias.ias[i];
        for (size_t i = 0; i < m->ias.n; i++)
                if (m->ias.ias[i].transport == TRANSPORT_TCP && policy_open_to_all(m->ias.ias[i].config))
                        return &m->ias.ias[i];
        return NULL;
}

static void cm_connect_req(CmLink *link, const struct cm_conn *msg)
{
        ConnTable *t;
        Manager *m;
        struct sockaddr_storage src, dst;
        socklen_t src_len;
        char s1[SOCKADDR_STRING_MAX], s2[SOCKADDR_STRING_MAX];
        const char *why = NULL;
        Listener *l = NULL;
        Ia *target;
        Cr *cr;

        m = cm_link_manager(link);
        t = m->conns;
        src_len = cm_to_sockaddr(&msg->src, &src);
        cm_to_sockaddr(&msg->dst, &dst);
        target = remote_target(m, &dst);
        /* dat_ia_query(3DAT): the listener's process counts on this host's
         * max_private_data, whatever the other host allows. */
        if (msg->pd_len > m->config->limits.max_private_data)
                why = "more private data than max_private_data";
        else if (!target)
                why = "no tcp IA of this host has that address, and none open to every user "
                      "stands in";
        else if ((why = listener_refuses(l = listener_find_qual(t, target, msg->conn_qual),
                                         &m->config->limits)))
                ;
        else if ((why = qos_refuses(target, msg->qos)))
                ;
        else if (!(cr = cr_new(t, l, msg->private_data, msg->pd_len)))
                why = "out of memory";
        if (why) {
                addr_string(&src, src_len, s1, sizeof(s1));
                addr_string(&dst, dst.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                            : sizeof(struct sockaddr_in6), s2, sizeof(s2));
                log_info("Request from %s (pid %d on another host) to %s conn_qual %" PRIu64
                         " refused: %s.", s1, (int) msg->pid, s2, msg->conn_qual, why);
                t->counters.non_peer_rejected++;
                cm_tell(link, CM_REJECT, 0, msg->src_conn_id, CM_REASON_NON_PEER, 0, NULL, 0);
                return;
        }
        cr->link = link;
        cr->remote_conn_id = msg->src_conn_id;
        cr->remote_pid = (int32_t) msg->pid;
        cr->src = src;
        cr->src_len = src_len;
        send_ev_conn_request(cr);
}

/* The end with this id over this link, or NULL. */
static Conn *linked_conn(ConnTable *t, CmLink *link, uint32_t id)
{
        Conn *c = id ? conn_find(t, id) : NULL;

        return c && c->link == link ? c : NULL;
}

void conn_cm_receive(CmLink *link, uint16_t type, const struct cm_conn *msg)
{
        Manager *m = cm_link_manager(link);
        ConnTable *t = m->conns;
        Conn *x;
        int r;

        switch (type) {
        case CM_CONNECT_REQ:
                cm_connect_req(link, msg);
                return;
        case CM_ACCEPT:
                x = linked_conn(t, link, msg->dst_conn_id);
                if (x && x->active && x->state == CONN_REQUESTED && !x->data_out &&
                    msg->pd_len > m->config->limits.max_private_data) {
                        /* Failed, not truncated: private data is the
                         * processes' own message, and a cut one is a
                         * different one.  The passive end learns it from
                         * the DISCONNECT (ACCEPT_COMPLETION_ERROR). */
                        cm_tell(link, CM_DISCONNECT, x->id, msg->src_conn_id, CM_REASON_WITHDRAWN,
                                x->instance->client->peer.pid, NULL, 0);
                        conn_drop_link(x);
                        conn_fail(x, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                                  "the accepting host sent more private data than max_private_data");
                        return;
                }
                if (!x || !x->active || x->state != CONN_REQUESTED) {
                        /* The request was withdrawn meanwhile: the accept fails. */
                        cm_tell(link, CM_DISCONNECT, msg->dst_conn_id, msg->src_conn_id,
                                CM_REASON_WITHDRAWN, 0, NULL, 0);
                        return;
                }
                if (x->data_out)
                        return;         /* a second ACCEPT: the first one counts */
                x->remote_id = msg->src_conn_id;
                x->remote_pid = (int32_t) msg->pid;
                /* ESTABLISHED (and READY) once the data connection is made. */
                r = store_pd(x, msg->private_data, msg->pd_len);
                if (r >= 0)
                        r = data_out_start(x, msg->token);
                if (r < 0) {
                        char why[128];

                        snprintf(why, sizeof(why), "cannot open the data connection to the peer's "
                                 "host: %s", strerror(-r));
                        conn_fail(x, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0, why);
                }
                return;
        case CM_REJECT:
                x = linked_conn(t, link, msg->dst_conn_id);
                if (!x || !x->active || x->state != CONN_REQUESTED)
                        return;
                x->remote_pid = (int32_t) msg->pid;
                conn_drop_link(x);
                /* As for ACCEPT: refused all the same, without a cut message. */
                if (msg->pd_len > m->config->limits.max_private_data)
                        conn_fail(x, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                                  "rejected with more private data than max_private_data");
                else if (msg->reason == CM_REASON_PEER)
                        conn_fail(x, DAT_CONNECTION_EVENT_PEER_REJECTED, msg->private_data, msg->pd_len,
                                  "rejected by the listener's process");
                else
                        conn_fail(x, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                                  "refused by the other host's datd");
                return;
        case CM_READY:
                x = linked_conn(t, link, msg->dst_conn_id);
                if (!x || !x->accepting || x->remote_id != msg->src_conn_id || x->ready)
                        return;
                /* The active datd sends READY once its data connection is
                 * out; it may still be on its way here, on its own socket.
                 * Meanwhile nothing more is read from the link: what the
                 * active side sent after READY (it may disconnect another
                 * connection as soon as its process saw this one
                 * ESTABLISHED) reaches our processes after this end's
                 * ESTABLISHED, as dtestcm's server expects. */
                x->ready = true;
                if (x->data_fd < 0) {
                        /* The bound armed with ACCEPT (passive_remote_arm) runs on. */
                        x->holds_link = true;
                        cm_link_hold(link, true);
                        return;
                }
                passive_remote_check(x);
                return;
        case CM_DISCONNECT:
                if (msg->dst_conn_id == 0) {
                        /* A request withdrawn before any answer: it stays at
                         * its listener, and an accept of it fails. */
                        ID_HASH_FOREACH(&t->crs, Cr, cr, {
                                if (cr->link == link && cr->remote_conn_id == msg->src_conn_id) {
                                        cr->link = NULL;
                                        return;
                                }
                        })
                        return;
                }
                x = linked_conn(t, link, msg->dst_conn_id);
                if (!x || (x->remote_id != 0 && x->remote_id != msg->src_conn_id))
                        return;
                conn_drop_link(x);
                if (x->accepting)
                        send_ev_conn(x, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL, 0,
                                     "the active side withdrew the request");
                else if (x->state == CONN_REQUESTED)
                        send_ev_conn(x, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL, 0,
                                     "the accepting process went away");
                else
                        tell_peer_gone(x, msg->reason);
                conn_free(x);
                return;
        default:
                return;
        }
}

void conn_cm_link_lost(CmLink *link, bool was_up)
{
        ConnTable *t = cm_link_manager(link)->conns;

        if (!t)
                return;
        ID_HASH_FOREACH(&t->crs, Cr, cr, {
                if (cr->link == link)
                        cr->link = NULL;        /* withdrawn */
        })
        ID_HASH_FOREACH(&t->conns, Conn, x, {
                if (x->link != link)
                        continue;
                conn_drop_link(x);
                if (x->accepting)
                        send_ev_conn(x, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL, 0,
                                     "the CM link to the active side's host is lost");
                else if (x->state == CONN_REQUESTED)
                        send_ev_conn(x, was_up ? DAT_CONNECTION_EVENT_NON_PEER_REJECTED
                                     : DAT_CONNECTION_EVENT_UNREACHABLE, NULL, 0,
                                     was_up ? "the CM link to the peer's host is lost"
                                     : "the peer's host does not answer on the CM port");
                else
                        send_ev_conn(x, DAT_CONNECTION_EVENT_BROKEN, NULL, 0,
                                     "the CM link to the peer's host is lost");
                conn_free(x);
        })
}
