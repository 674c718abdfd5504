#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include <dat2/udat.h>

#include "common/macro.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "daemon/utf8.h"
#include "proto/datp.h"

/* The parse state of one file: errors are counted, not fatal, so that one
 * run of --check-config reports all of them. */
typedef struct ConfigParser {
        const char *file;
        unsigned errors;
} ConfigParser;

typedef struct ConfigKey ConfigKey;
typedef void (*ConfigParseFn)(ConfigParser *p, const char *jpath, json_t *v, void *field,
                              const ConfigKey *k);

struct ConfigKey {
        const char *name;
        ConfigParseFn parse;
        size_t offset;
        uint64_t min, max; /* integers only */
        uint64_t def;      /* limits only: the built-in default */
};

static const char *const bus_mode_names[_BUS_MODE_MAX] = {
        [BUS_MODE_AUTO] = "auto",
        [BUS_MODE_SYSTEM] = "system",
        [BUS_MODE_PRIVATE] = "private",
        [BUS_MODE_NONE] = "none",
};

static const char *const transport_names[_TRANSPORT_MAX] = {
        [TRANSPORT_SHM] = "shm",
        [TRANSPORT_TCP] = "tcp",
        [TRANSPORT_VERBS] = "verbs",
};

const char *bus_mode_to_string(BusMode m)
{
        return m < _BUS_MODE_MAX ? bus_mode_names[m] : NULL;
}

int bus_mode_from_string(const char *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(bus_mode_names); i++)
                if (strcmp(bus_mode_names[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

const char *transport_to_string(Transport t)
{
        return t < _TRANSPORT_MAX ? transport_names[t] : NULL;
}

static int transport_from_string(const char *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(transport_names); i++)
                if (strcmp(transport_names[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

static void config_error(ConfigParser *p, const char *jpath, const char *format, ...)
        __attribute__((format(printf, 3, 4)));

static void config_error(ConfigParser *p, const char *jpath, const char *format, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, format);
        vsnprintf(msg, sizeof(msg), format, ap);
        va_end(ap);
        log_error("%s: %s: %s", p->file, jpath, msg);
        p->errors++;
}

static const char *json_type_name(const json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_OBJECT: return "an object";
        case JSON_ARRAY: return "an array";
        case JSON_STRING: return "a string";
        case JSON_INTEGER: return "an integer";
        case JSON_REAL: return "a real number";
        case JSON_TRUE:
        case JSON_FALSE: return "a boolean";
        case JSON_NULL: return "null";
        }
        return "unknown";
}

static bool expect_type(ConfigParser *p, const char *jpath, json_t *v, json_type type,
                        const char *what)
{
        bool ok = json_typeof(v) == type ||
                  (type == JSON_TRUE && json_typeof(v) == JSON_FALSE);

        if (!ok)
                config_error(p, jpath, "expected %s, got %s", what, json_type_name(v));
        return ok;
}

/* ---- scalar values --------------------------------------------------------- */

static void parse_string(ConfigParser *p, const char *jpath, json_t *v, void *field,
                         const ConfigKey *k)
{
        char **s = field, *copy;

        if (!expect_type(p, jpath, v, JSON_STRING, "a string"))
                return;
        if (json_string_length(v) != strlen(json_string_value(v))) {
                config_error(p, jpath, "string contains a NUL byte");
                return;
        }
        copy = strdup(json_string_value(v));
        if (!copy) {
                config_error(p, jpath, "out of memory");
                return;
        }
        free(*s);
        *s = copy;
}

static bool parse_integer(ConfigParser *p, const char *jpath, json_t *v, const ConfigKey *k,
                          uint64_t *ret)
{
        json_int_t i;

        if (!expect_type(p, jpath, v, JSON_INTEGER, "an integer"))
                return false;
        i = json_integer_value(v);
        if (i < 0 || (uint64_t) i < k->min || (uint64_t) i > k->max) {
                config_error(p, jpath, "%lld is out of range %llu..%llu", (long long) i,
                             (unsigned long long) k->min, (unsigned long long) k->max);
                return false;
        }
        *ret = (uint64_t) i;
        return true;
}

static void parse_u16(ConfigParser *p, const char *jpath, json_t *v, void *field,
                      const ConfigKey *k)
{
        uint64_t i;

        if (parse_integer(p, jpath, v, k, &i))
                *(uint16_t *) field = (uint16_t) i;
}

static void parse_u32(ConfigParser *p, const char *jpath, json_t *v, void *field,
                      const ConfigKey *k)
{
        uint64_t i;

        if (parse_integer(p, jpath, v, k, &i))
                *(uint32_t *) field = (uint32_t) i;
}

static void parse_u64(ConfigParser *p, const char *jpath, json_t *v, void *field,
                      const ConfigKey *k)
{
        uint64_t i;

        if (parse_integer(p, jpath, v, k, &i))
                *(uint64_t *) field = i;
}

/* A power of two within the key's range (shm_ring_bytes). */
static void parse_u32_pow2(ConfigParser *p, const char *jpath, json_t *v, void *field,
                           const ConfigKey *k)
{
        uint64_t i;

        if (!parse_integer(p, jpath, v, k, &i))
                return;
        if (i & (i - 1))
                config_error(p, jpath, "%" PRIu64 " is not a power of two", i);
        else
                *(uint32_t *) field = (uint32_t) i;
}

static void parse_bool(ConfigParser *p, const char *jpath, json_t *v, void *field,
                       const ConfigKey *k)
{
        if (expect_type(p, jpath, v, JSON_TRUE, "a boolean"))
                *(bool *) field = json_is_true(v);
}

static void parse_log_level(ConfigParser *p, const char *jpath, json_t *v, void *field,
                            const ConfigKey *k)
{
        int level;

        if (!expect_type(p, jpath, v, JSON_STRING, "a string"))
                return;
        level = log_level_from_string(json_string_value(v));
        if (level < 0)
                config_error(p, jpath, "unknown log level \"%s\" (err, warning, notice, info, debug)",
                             json_string_value(v));
        else
                *(int *) field = level;
}

static void parse_bus_mode(ConfigParser *p, const char *jpath, json_t *v, void *field,
                           const ConfigKey *k)
{
        int m;

        if (!expect_type(p, jpath, v, JSON_STRING, "a string"))
                return;
        m = bus_mode_from_string(json_string_value(v));
        if (m < 0)
                config_error(p, jpath, "unknown bus mode \"%s\" (auto, system, private, none)",
                             json_string_value(v));
        else
                *(BusMode *) field = (BusMode) m;
}

static void parse_transport(ConfigParser *p, const char *jpath, json_t *v, void *field,
                            const ConfigKey *k)
{
        int t;

        if (!expect_type(p, jpath, v, JSON_STRING, "a string"))
                return;
        t = transport_from_string(json_string_value(v));
        if (t < 0)
                config_error(p, jpath, "unknown transport \"%s\" (shm, tcp, verbs)",
                             json_string_value(v));
        else
                *(Transport *) field = (Transport) t;
}

/* "qos": ["best_effort", "low_latency", ...]: the DAT_QOS values a
 * connection request to this IA may carry; others are refused as a
 * non-peer reject (dat_ep_connect(3DAT)).  DAT_QOS_BEST_EFFORT is 0, so
 * it is always accepted and the mask holds the other classes. */
static void parse_qos(ConfigParser *p, const char *jpath, json_t *v, void *field,
                      const ConfigKey *k)
{
        static const struct {
                const char *name;
                uint32_t bit;
        } names[] = {
                { "best_effort", DAT_QOS_BEST_EFFORT },
                { "high_throughput", DAT_QOS_HIGH_THROUGHPUT },
                { "low_latency", DAT_QOS_LOW_LATENCY },
                { "economy", DAT_QOS_ECONOMY },
                { "premium", DAT_QOS_PREMIUM },
        };
        uint32_t mask = 0;
        json_t *e;
        size_t i;

        if (!expect_type(p, jpath, v, JSON_ARRAY, "an array of QoS names"))
                return;
        json_array_foreach(v, i, e) {
                char epath[300];
                size_t j;

                snprintf(epath, sizeof(epath), "%s[%zu]", jpath, i);
                if (!expect_type(p, epath, e, JSON_STRING, "a string"))
                        continue;
                for (j = 0; j < ARRAY_SIZE(names); j++)
                        if (strcmp(json_string_value(e), names[j].name) == 0)
                                break;
                if (j == ARRAY_SIZE(names))
                        config_error(p, epath, "unknown QoS \"%s\" (best_effort, high_throughput, "
                                     "low_latency, economy, premium)", json_string_value(e));
                else
                        mask |= names[j].bit;
        }
        *(uint32_t *) field = mask;
}

static bool path_is_normalized_absolute(const char *s)
{
        return s[0] == '/' && !strstr(s, "//") && !strstr(s, "/./") && !strstr(s, "/../");
}

int config_check_runtime_dir(const char *dir)
{
        /* Both sockets must fit into sun_path. */
        size_t max = sizeof(((struct sockaddr_un *) NULL)->sun_path) - 1 -
                     strlen("/" DATD_SOCKET_NAME);

        /* It is on D-Bus (RuntimeDirectory, SocketPath), which carries UTF-8 only. */
        if (!path_is_normalized_absolute(dir) || !utf8_is_valid(dir))
                return -EINVAL;
        if (strlen(dir) > max)
                return -ENAMETOOLONG;
        return 0;
}

static void parse_runtime_dir(ConfigParser *p, const char *jpath, json_t *v, void *field,
                              const ConfigKey *k)
{
        int r;

        parse_string(p, jpath, v, field, k);
        if (!*(char **) field || !json_is_string(v))
                return;
        r = config_check_runtime_dir(*(char **) field);
        if (r == -ENAMETOOLONG)
                config_error(p, jpath, "too long for a socket path");
        else if (r < 0)
                config_error(p, jpath, "must be a normalized absolute path in UTF-8");
}

/* ---- objects --------------------------------------------------------------- */

static void parse_object(ConfigParser *p, const char *jpath, json_t *obj, const ConfigKey *keys,
                         size_t n_keys, void *base)
{
        const char *key;
        json_t *v;

        if (!expect_type(p, jpath, obj, JSON_OBJECT, "an object"))
                return;
        json_object_foreach(obj, key, v) {
                const ConfigKey *k = NULL;
                char child[256];

                for (size_t i = 0; i < n_keys && !k; i++)
                        if (strcmp(keys[i].name, key) == 0)
                                k = &keys[i];
                if (!k) {
                        config_error(p, jpath, "unknown key \"%s\"", key);
                        continue;
                }
                snprintf(child, sizeof(child), "%s.%s", jpath, key);
                k->parse(p, child, v, (char *) base + k->offset, k);
        }
}

#define LIMIT(field, lo, hi, dflt) \
        { #field, sizeof(((Limits *) NULL)->field) == 8 ? parse_u64 : parse_u32, \
          offsetof(Limits, field), (lo), (hi), (dflt) }

static const ConfigKey limit_keys[] = {
        LIMIT(max_clients, 1, 65536, 1024),
        LIMIT(max_clients_per_uid, 1, 65536, 256),
        LIMIT(max_ias_per_client, 1, 1024, 16),
        LIMIT(max_pending_replies, 1, 65536, 1024),
        LIMIT(max_protocol_errors, 1, 1000, 8),
        /* The private D-Bus socket (daemon/bus.c). */
        LIMIT(max_bus_connections, 1, 1024, 64),
        LIMIT(max_bus_connections_per_uid, 1, 1024, 8),
        LIMIT(max_bus_queued_replies, 1, 1024, 4),
        LIMIT(bus_idle_timeout_ms, 100, 3600000, 60000),
        LIMIT(max_eps, 1, 1u << 20, 4096),
        LIMIT(max_evds, 1, 1u << 20, 4096),
        LIMIT(max_pzs, 1, 1u << 16, 256),
        LIMIT(max_lmrs, 1, 1u << 24, 16384),
        LIMIT(max_rmrs, 1, 1u << 24, 16384),
        LIMIT(max_srqs, 1, 1u << 20, 1024),
        LIMIT(max_lmr_bytes, 1, 1ull << 50, 16ull << 30),
        /* Private data travels inside one datp message, next to its header. */
        LIMIT(max_private_data, 64, DATP_PRIVATE_DATA_MAX, 256),
        LIMIT(max_listeners_per_client, 1, 65536, 256),
        LIMIT(max_connections_per_client, 1, 1u << 20, 4096),
        LIMIT(max_pending_connects_per_client, 1, 65536, 1024),
        LIMIT(max_pending_requests, 1, 65536, 128),
        LIMIT(max_cm_links, 1, 4096, 64),
        LIMIT(max_cm_send_bytes, 65536, 1u << 30, 16u << 20),
        /* The shm data path: each direction's ring of a connection (a power
         * of two, libdat/shm_link.h's bounds), and the regions a client may
         * hold over its connection ends. */
        { "shm_ring_bytes", parse_u32_pow2, offsetof(Limits, shm_ring_bytes), 4096, 64u << 20, 262144 },
        LIMIT(max_shm_bytes_per_client, 1, 1ull << 50, 1ull << 30),
        /* Kept channels waiting for another connection between the same two
         * IA instances (daemon/channel_keep.h); 0: none is kept. */
        LIMIT(max_spare_channels_per_client, 0, 65536, 16),
        /* Per uid, over all its clients: what max_clients_per_uid times a
         * per-client limit would let one user take from everyone
         * (daemon/uid_budget.h).  max_fds_per_uid 0: a quarter of the
         * descriptors RLIMIT_NOFILE leaves beside datd's reserve. */
        LIMIT(max_fds_per_uid, 0, 1u << 24, 0),
        LIMIT(max_listeners_per_uid, 1, 1u << 24, 1024),
        /* An object slot is 112 bytes: 64 MiB is about 600000 objects. */
        LIMIT(max_object_bytes_per_uid, 65536, 1ull << 40, 64ull << 20),
};

static void parse_limits(ConfigParser *p, const char *jpath, json_t *v, void *field,
                         const ConfigKey *k)
{
        parse_object(p, jpath, v, limit_keys, ARRAY_SIZE(limit_keys), field);
}

static void limits_set_defaults(Limits *l)
{
        for (size_t i = 0; i < ARRAY_SIZE(limit_keys); i++) {
                void *f = (char *) l + limit_keys[i].offset;

                if (limit_keys[i].parse == parse_u64)
                        *(uint64_t *) f = limit_keys[i].def;
                else
                        *(uint32_t *) f = (uint32_t) limit_keys[i].def;
        }
}

/* ---- IAs ------------------------------------------------------------------- */

static void parse_address(ConfigParser *p, const char *jpath, json_t *v, void *field,
                          const ConfigKey *k)
{
        IAConfig *ia = (IAConfig *) ((char *) field - offsetof(IAConfig, address));
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM };
        struct addrinfo *ai = NULL;

        parse_string(p, jpath, v, field, k);
        if (!ia->address || !json_is_string(v))
                return;
        if (getaddrinfo(ia->address, NULL, &hints, &ai) != 0 || !ai) {
                config_error(p, jpath, "\"%s\" is not a numeric IPv4 or IPv6 address", ia->address);
                return;
        }
        memcpy(&ia->sockaddr, ai->ai_addr, ai->ai_addrlen);
        ia->sockaddr_len = ai->ai_addrlen;
        freeaddrinfo(ai);
}

static void parse_interface(ConfigParser *p, const char *jpath, json_t *v, void *field,
                            const ConfigKey *k)
{
        const char *s;

        parse_string(p, jpath, v, field, k);
        s = *(char **) field;
        if (s && json_is_string(v) && (!s[0] || strlen(s) >= IF_NAMESIZE || strpbrk(s, "/ \t\n:")))
                config_error(p, jpath, "\"%s\" is not a valid interface name", s);
}

/* allow_users / allow_groups: names resolved now, so that a typo fails the
 * start (and --check-config) instead of silently denying. */
static void parse_id_list(ConfigParser *p, const char *jpath, json_t *v, void *field, bool users)
{
        IAConfig *ia = (IAConfig *) ((char *) field -
                                     (users ? offsetof(IAConfig, allow_uids)
                                            : offsetof(IAConfig, allow_gids)));
        size_t n = 0, i;
        json_t *e;
        unsigned *ids;

        if (!expect_type(p, jpath, v, JSON_ARRAY, "an array of names"))
                return;
        ia->restricted = true;
        ids = calloc(json_array_size(v) + 1, sizeof(*ids));
        if (!ids) {
                config_error(p, jpath, "out of memory");
                return;
        }
        json_array_foreach(v, i, e) {
                char epath[300];
                const char *name;

                snprintf(epath, sizeof(epath), "%s[%zu]", jpath, i);
                if (!expect_type(p, epath, e, JSON_STRING, "a string"))
                        continue;
                name = json_string_value(e);
                if (users) {
                        struct passwd *pw = getpwnam(name);

                        if (!pw)
                                config_error(p, epath, "unknown user \"%s\"", name);
                        else
                                ids[n++] = pw->pw_uid;
                } else {
                        struct group *gr = getgrnam(name);

                        if (!gr)
                                config_error(p, epath, "unknown group \"%s\"", name);
                        else
                                ids[n++] = gr->gr_gid;
                }
        }
        if (users) {
                free(ia->allow_uids);
                ia->allow_uids = ids;
                ia->n_allow_uids = n;
        } else {
                free(ia->allow_gids);
                ia->allow_gids = ids;
                ia->n_allow_gids = n;
        }
}

static void parse_allow_users(ConfigParser *p, const char *jpath, json_t *v, void *field,
                              const ConfigKey *k)
{
        parse_id_list(p, jpath, v, field, true);
}

static void parse_allow_groups(ConfigParser *p, const char *jpath, json_t *v, void *field,
                               const ConfigKey *k)
{
        parse_id_list(p, jpath, v, field, false);
}

static const ConfigKey ia_keys[] = {
        { "name", parse_string, offsetof(IAConfig, name) },
        { "transport", parse_transport, offsetof(IAConfig, transport) },
        { "address", parse_address, offsetof(IAConfig, address) },
        { "interface", parse_interface, offsetof(IAConfig, interface) },
        { "device", parse_string, offsetof(IAConfig, device) },
        { "port", parse_u32, offsetof(IAConfig, port), 1, 255 },
        { "allow_users", parse_allow_users, offsetof(IAConfig, allow_uids) },
        { "allow_groups", parse_allow_groups, offsetof(IAConfig, allow_gids) },
        { "qos", parse_qos, offsetof(IAConfig, qos) },
};

static void ia_config_done(IAConfig *ia)
{
        free(ia->name);
        free(ia->address);
        free(ia->interface);
        free(ia->device);
        free(ia->allow_uids);
        free(ia->allow_gids);
}

static void ias_free(IAConfig *ias, size_t n)
{
        for (size_t i = 0; i < n; i++)
                ia_config_done(&ias[i]);
        free(ias);
}

/* Names end up in dat.conf's ia_params and in datp's name fields. */
static bool ia_name_is_valid(const char *s)
{
        size_t n = strlen(s);

        return n > 0 && n < DATP_NAME_MAX &&
               strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") == n;
}

static void ia_reject_key(ConfigParser *p, const char *jpath, const IAConfig *ia, bool present,
                          const char *key)
{
        if (present)
                config_error(p, jpath, "key \"%s\" does not apply to transport %s", key,
                             transport_to_string(ia->transport));
}

/* Rules that tie keys of one IA together, checked once all of them are read. */
static void ia_check(ConfigParser *p, const char *jpath, IAConfig *ia, json_t *obj)
{
        if (!ia->name)
                config_error(p, jpath, "missing key \"name\"");
        else if (!ia_name_is_valid(ia->name))
                config_error(p, jpath, "invalid IA name \"%s\" (1..%d of A-Z a-z 0-9 . _ : -)",
                             ia->name, DATP_NAME_MAX - 1);
        if (ia->transport == _TRANSPORT_MAX) {
                /* A transport that failed to parse was reported already. */
                if (!json_object_get(obj, "transport"))
                        config_error(p, jpath, "missing key \"transport\"");
                return;
        }

        switch (ia->transport) {
        case TRANSPORT_SHM:
                ia_reject_key(p, jpath, ia, ia->interface, "interface");
                ia_reject_key(p, jpath, ia, ia->device, "device");
                ia_reject_key(p, jpath, ia, ia->port, "port");
                break;
        case TRANSPORT_TCP:
                ia_reject_key(p, jpath, ia, ia->device, "device");
                ia_reject_key(p, jpath, ia, ia->port, "port");
                if (ia->address && ia->interface)
                        config_error(p, jpath, "give either \"address\" or \"interface\", not both");
                break;
        case TRANSPORT_VERBS:
                ia_reject_key(p, jpath, ia, ia->address, "address");
                ia_reject_key(p, jpath, ia, ia->interface, "interface");
                if (!ia->device)
                        config_error(p, jpath, "missing key \"device\"");
                break;
        default:
                break;
        }
}

/* Fills what a key left out means for this transport. */
static int ia_set_defaults(IAConfig *ia)
{
        static const char *const loopback = "127.0.0.1";

        if (ia->transport == TRANSPORT_SHM && !ia->address) {
                struct sockaddr_in *sin = (struct sockaddr_in *) &ia->sockaddr;

                ia->address = strdup(loopback);
                if (!ia->address)
                        return -ENOMEM;
                sin->sin_family = AF_INET;
                sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                ia->sockaddr_len = sizeof(*sin);
        }
        if (ia->transport == TRANSPORT_TCP && !ia->address && !ia->interface) {
                ia->interface = strdup("auto");
                if (!ia->interface)
                        return -ENOMEM;
        }
        if (ia->transport == TRANSPORT_VERBS && ia->port == 0)
                ia->port = 1;
        return 0;
}

static void parse_ias(ConfigParser *p, const char *jpath, json_t *v, void *field,
                      const ConfigKey *k)
{
        Config *c = (Config *) ((char *) field - offsetof(Config, ias));
        IAConfig *ias;
        size_t i, n;
        json_t *e;

        if (!expect_type(p, jpath, v, JSON_ARRAY, "an array"))
                return;
        n = json_array_size(v);
        ias = calloc(n + 1, sizeof(*ias));
        if (!ias) {
                config_error(p, jpath, "out of memory");
                return;
        }
        json_array_foreach(v, i, e) {
                char epath[64];

                snprintf(epath, sizeof(epath), "%s[%zu]", jpath, i);
                ias[i].transport = _TRANSPORT_MAX;
                parse_object(p, epath, e, ia_keys, ARRAY_SIZE(ia_keys), &ias[i]);
                if (!json_is_object(e))
                        continue;
                ia_check(p, epath, &ias[i], e);
                if (ia_set_defaults(&ias[i]) < 0)
                        config_error(p, epath, "out of memory");
                for (size_t j = 0; j < i && ias[i].name; j++)
                        if (ias[j].name && strcmp(ias[i].name, ias[j].name) == 0)
                                config_error(p, epath, "duplicate IA name \"%s\" (also %s[%zu])",
                                             ias[i].name, jpath, j);
        }
        ias_free(c->ias, c->n_ias);
        c->ias = ias;
        c->n_ias = n;
}

/* "conn_qual_any_range": [first, last], both included, first <= last. */
static void parse_conn_qual_range(ConfigParser *p, const char *jpath, json_t *v, void *field,
                                  const ConfigKey *k)
{
        Config *c = (Config *) ((char *) field - offsetof(Config, conn_qual_any_min));
        static const ConfigKey bound = { "conn_qual_any_range", NULL, 0, 1, UINT64_MAX >> 1 };
        uint64_t lo, hi;
        char epath[64];

        if (!expect_type(p, jpath, v, JSON_ARRAY, "an array of two integers"))
                return;
        if (json_array_size(v) != 2) {
                config_error(p, jpath, "must be [first, last]");
                return;
        }
        snprintf(epath, sizeof(epath), "%s[0]", jpath);
        if (!parse_integer(p, epath, json_array_get(v, 0), &bound, &lo))
                return;
        snprintf(epath, sizeof(epath), "%s[1]", jpath);
        if (!parse_integer(p, epath, json_array_get(v, 1), &bound, &hi))
                return;
        if (lo > hi) {
                config_error(p, jpath, "first %" PRIu64 " is above last %" PRIu64, lo, hi);
                return;
        }
        c->conn_qual_any_min = lo;
        c->conn_qual_any_max = hi;
}

/* ---- the file -------------------------------------------------------------- */

static const ConfigKey top_keys[] = {
        { "runtime_dir", parse_runtime_dir, offsetof(Config, runtime_dir) },
        { "log_level", parse_log_level, offsetof(Config, log_level) },
        { "bus", parse_bus_mode, offsetof(Config, bus) },
        { "cm_port", parse_u16, offsetof(Config, cm_port), 1, 65535 },
        { "cm_keepalive_ms", parse_u32, offsetof(Config, cm_keepalive_ms), 10, 60000 },
        { "conn_qual_any_range", parse_conn_qual_range, offsetof(Config, conn_qual_any_min) },
        { "ias", parse_ias, offsetof(Config, ias) },
        { "verbs", parse_bool, offsetof(Config, verbs) },
        { "limits", parse_limits, offsetof(Config, limits) },
};

Config *config_free(Config *c)
{
        if (!c)
                return NULL;
        free(c->path);
        free(c->runtime_dir);
        ias_free(c->ias, c->n_ias);
        free(c);
        return NULL;
}

static int config_new_defaults(Config **ret)
{
        /* The built-in IAs: same-host shared memory, and TCP on the first
         * usable interface. */
        static const struct { const char *name; Transport transport; } default_ias[] = {
                { "shm", TRANSPORT_SHM },
                { "tcp", TRANSPORT_TCP },
        };
        Config *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->runtime_dir = strdup(RUNSTATEDIR "/datd");
        c->ias = calloc(ARRAY_SIZE(default_ias), sizeof(*c->ias));
        if (!c->runtime_dir || !c->ias)
                goto oom;
        c->log_level = LOG_INFO;
        c->bus = BUS_MODE_AUTO;
        c->cm_port = 7471;
        c->cm_keepalive_ms = 1000;
        c->conn_qual_any_min = 49152;
        c->conn_qual_any_max = 65535;
        c->verbs = true;
        limits_set_defaults(&c->limits);
        for (size_t i = 0; i < ARRAY_SIZE(default_ias); i++) {
                IAConfig *ia = &c->ias[c->n_ias++];

                ia->transport = default_ias[i].transport;
                ia->name = strdup(default_ias[i].name);
                if (!ia->name || ia_set_defaults(ia) < 0)
                        goto oom;
        }
        *ret = c;
        return 0;
oom:
        config_free(c);
        return -ENOMEM;
}

/* Not an error (a small range is what tests and quiet hosts use), but worth
 * saying: one uid may then take every conn_qual PSP_ANY can pick. */
static void config_warn_listeners(const Config *c, const char *path)
{
        uint64_t span = c->conn_qual_any_max - c->conn_qual_any_min + 1;

        if (c->limits.max_listeners_per_uid >= span)
                log_warning("%s: limits.max_listeners_per_uid (%" PRIu32 ") is not below the %" PRIu64
                            " values of conn_qual_any_range: one user can take all of them.",
                            path, c->limits.max_listeners_per_uid, span);
}

static int config_parse_file(Config *c, FILE *f, const char *path)
{
        ConfigParser p = { .file = path };
        json_error_t error;
        json_t *root;

        root = json_loadf(f, JSON_REJECT_DUPLICATES, &error);
        if (!root)
                return log_error_errno(-EINVAL, "%s:%d:%d: %s", path, error.line, error.column,
                                       error.text);
        parse_object(&p, "$", root, top_keys, ARRAY_SIZE(top_keys), c);
        json_decref(root);
        config_warn_listeners(c, path);
        if (p.errors > 0)
                return log_error_errno(-EINVAL, "%s: %u error(s)", path, p.errors);
        return 0;
}

int config_load(const char *path, Config **ret)
{
        const char *file = path ? path : DATD_DEFAULT_CONFIG;
        Config *c = NULL;
        FILE *f;
        int r;

        r = config_new_defaults(&c);
        if (r < 0)
                return log_oom();

        f = fopen(file, "re");
        if (!f) {
                r = -errno;
                if (r == -ENOENT && !path) {
                        log_debug("No %s, using built-in defaults.", file);
                        *ret = c;
                        return 0;
                }
                config_free(c);
                return log_error_errno(r, "Failed to open %s: %m", file);
        }
        c->path = strdup(file);
        r = c->path ? config_parse_file(c, f, file) : log_oom();
        fclose(f);
        if (r < 0) {
                config_free(c);
                return r;
        }
        *ret = c;
        return 0;
}
