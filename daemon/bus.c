#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/bus.h"
#include "daemon/client.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/netif.h"
#include "daemon/utf8.h"

/* ---- the object ------------------------------------------------------------ */

/* Every method here replies with one array: the reply to msg with the array
 * of contents opened, in *ret. */
static int reply_open_array(sd_bus_message *msg, const char *contents, sd_bus_message **ret)
{
        int r = sd_bus_message_new_method_return(msg, ret);

        if (r >= 0)
                r = sd_bus_message_open_container(*ret, 'a', contents);
        return r;
}

/* Closes the array and sends the reply, unless r says filling it failed. */
static int reply_close_send(sd_bus_message *reply, int r)
{
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_list_ias(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        int r;

        r = reply_open_array(msg, "(sssssu)", &reply);
        for (size_t i = 0; r >= 0 && i < m->ias.n; i++) {
                const Ia *ia = &m->ias.ias[i];
                char address[SOCKADDR_STRING_MAX];
                /* Interface names (also in an IPv6 scope) are the kernel's
                 * bytes, not necessarily UTF-8. */
                char adapter[UTF8_SANITIZED_SIZE(sizeof(ia->adapter_name))];
                char address_utf8[UTF8_SANITIZED_SIZE(sizeof(address))];

                sockaddr_to_string((const struct sockaddr *) &ia->address, ia->address_len,
                                   address, sizeof(address));
                r = sd_bus_message_append(reply, "(sssssu)", ia->name,
                                          transport_to_string(ia->transport),
                                          utf8_sanitize(ia->adapter_name, adapter, sizeof(adapter)),
                                          utf8_sanitize(address, address_utf8, sizeof(address_utf8)),
                                          ia_is_up(ia) ? "up" : "down", ia->n_open);
        }
        return reply_close_send(reply, r);
}

/* ListClients(): id, pid, uid, gid, command, IAs, connected since, objects,
 * EPs, LMR bytes. */
#define CLIENT_STRUCT "tuuusastuut"

static int append_client(sd_bus_message *reply, const Client *c)
{
        const ObjectCounts *counts = &c->objects.counts;
        uint32_t n_objects = 0;
        const IaInstance *i;
        int r;

        for (uint32_t k = 1; k <= DATP_OBJ_KIND_MAX; k++)
                n_objects += counts->n[k];
        r = sd_bus_message_open_container(reply, 'r', CLIENT_STRUCT);
        if (r >= 0)
                r = sd_bus_message_append(reply, "tuuus", c->id, (uint32_t) c->peer.pid,
                                          (uint32_t) c->peer.uid, (uint32_t) c->peer.gid,
                                          c->peer.comm);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "s");
        LIST_FOREACH(instances, i, c->instances)
                if (r >= 0)
                        r = sd_bus_message_append(reply, "s", i->ia->name);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "tuut", c->connected_usec, n_objects,
                                          counts->n[DATP_OBJ_EP], counts->lmr_bytes);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static int method_list_clients(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        const Client *c;
        int r;

        r = reply_open_array(msg, "(" CLIENT_STRUCT ")", &reply);
        LIST_FOREACH(clients, c, m->clients)
                if (r >= 0)
                        r = append_client(reply, c);
        return reply_close_send(reply, r);
}

/* ---- objects --------------------------------------------------------------- */

/* ListEndpoints(): per EP, client id, pid, command, IA, handle, PZ, state,
 * max_recv_dtos, max_request_dtos, max_recv_iov, max_request_iov,
 * max_message_size, datd's id. */
#define ENDPOINT_STRUCT "tussttsuuuuuu"
/* ListObjects(): per object, client id, pid, command, IA, kind, handle, PZ,
 * state, length, qlen, datd's id. */
#define OBJECT_STRUCT "tusssttstuu"

/* D-Bus readers (sd-bus among them) refuse an array of more than 64 MiB, the
 * D-Bus specification's limit, while sd-bus writes one without complaint:
 * datd counts the bytes of a list itself rather than send what nobody can
 * read. */
#define BUS_ARRAY_MAX ((size_t) 64 << 20)

static size_t align_to(size_t offset, size_t alignment)
{
        return (offset + alignment - 1) & ~(alignment - 1);
}

/* Where a struct of 't', 'u' and 's' ends in a D-Bus array when it starts
 * at offset: the struct at 8, each value at its own alignment, a string as
 * its length, its bytes and a NUL.  strings are the struct's in order. */
static size_t marshalled_struct_end(size_t offset, const char *signature, const char *const *strings)
{
        offset = align_to(offset, 8);
        for (const char *t = signature; *t; t++) {
                size_t size = *t == 't' ? 8 : 4;

                offset = align_to(offset, size) + size;
                if (*t == 's')
                        offset += strlen(*strings++) + 1;
        }
        return offset;
}

/* Counts the row into *bytes; -E2BIG once the array would be too big. */
static int count_row(size_t *bytes, const char *signature, const char *const *strings)
{
        *bytes = marshalled_struct_end(*bytes, signature, strings);
        return *bytes > BUS_ARRAY_MAX ? -E2BIG : 0;
}

static int append_endpoint(sd_bus_message *reply, const Client *c, const Object *o, size_t *bytes)
{
        const struct datp_obj_desc *d = &o->desc;
        const char *state = object_state_to_string(d);
        int r = count_row(bytes, ENDPOINT_STRUCT,
                          (const char *const[]) { c->peer.comm, o->instance->ia->name, state });

        if (r < 0)
                return r;
        return sd_bus_message_append(reply, "(" ENDPOINT_STRUCT ")", c->id, (uint32_t) c->peer.pid,
                                     c->peer.comm, o->instance->ia->name, d->handle, d->pz_handle,
                                     state, d->max_recv_dtos, d->max_request_dtos, d->max_recv_iov,
                                     d->max_request_iov, d->max_message_size, o->id);
}

static int append_object(sd_bus_message *reply, const Client *c, const Object *o, size_t *bytes)
{
        const struct datp_obj_desc *d = &o->desc;
        const char *kind = object_kind_to_string(d->kind), *state = object_state_to_string(d);
        int r = count_row(bytes, OBJECT_STRUCT,
                          (const char *const[]) { c->peer.comm, o->instance->ia->name, kind, state });

        if (r < 0)
                return r;
        return sd_bus_message_append(reply, "(" OBJECT_STRUCT ")", c->id, (uint32_t) c->peer.pid,
                                     c->peer.comm, o->instance->ia->name, kind, d->handle,
                                     d->pz_handle, state, d->length, d->qlen, o->id);
}

/* One reply with a row per object of every client (of one kind, or all for
 * 0), appended straight from the tables: nothing is allocated per object, so
 * that 100 000 EPs list in well under a second. */
static int reply_objects(sd_bus_message *msg, Manager *m, uint32_t kind, const char *row,
                         int (*append)(sd_bus_message *reply, const Client *c, const Object *o,
                                       size_t *bytes),
                         sd_bus_error *error)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const Client *c;
        size_t bytes = 0, n = 0;
        int r;

        r = reply_open_array(msg, row, &reply);
        LIST_FOREACH(clients, c, m->clients)
                for (uint32_t i = 0; r >= 0 && i < c->objects.n_touched; i++) {
                        const Object *o = &c->objects.slots[i];

                        if (o->instance && (kind == 0 || o->desc.kind == kind)) {
                                r = append(reply, c, o, &bytes);
                                n++;
                        }
                }
        if (r == -E2BIG)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "More objects than one D-Bus reply can carry "
                                         "(the first %zu fit in 64 MiB).", n - 1);
        return reply_close_send(reply, r);
}

static int method_list_endpoints(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        return reply_objects(msg, userdata, DATP_OBJ_EP, "(" ENDPOINT_STRUCT ")", append_endpoint,
                             error);
}

static int method_list_objects(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        return reply_objects(msg, userdata, 0, "(" OBJECT_STRUCT ")", append_object, error);
}

/* ListListeners(): client id, pid, command, IA, kind (PSP, PSP_ANY, RSP),
 * conn_qual, pending requests, accepted requests, datd's listener id. */
#define LISTENER_STRUCT "tussstutu"
/* ListConnections(): datd's id of the end, client id, pid, command, IA,
 * role (active, passive), local address, remote address, remote conn_qual,
 * state (REQUESTED, ACCEPTING, ESTABLISHED), age in µs, bytes sent and
 * received, the peer's pid (0 unknown), the bytes of its shm region (0: none). */
#define CONNECTION_STRUCT "utussssststttut"

struct list_ctx {
        sd_bus_message *reply;
        size_t bytes, n;
        int r;
};

static void append_listener(const ListenerInfo *l, void *userdata)
{
        struct list_ctx *ctx = userdata;

        if (ctx->r < 0)
                return;
        ctx->r = count_row(&ctx->bytes, LISTENER_STRUCT,
                           (const char *const[]) { l->command, l->ia, l->kind });
        if (ctx->r >= 0)
                ctx->r = sd_bus_message_append(ctx->reply, "(" LISTENER_STRUCT ")", l->client_id,
                                               (uint32_t) l->pid, l->command, l->ia, l->kind,
                                               l->conn_qual, l->pending, l->accepted, l->id);
        ctx->n++;
}

static void append_connection(const ConnInfo *c, void *userdata)
{
        struct list_ctx *ctx = userdata;
        /* An IPv6 link-local address carries its interface's name, the
         * kernel's bytes, as in ListIAs. */
        char local[UTF8_SANITIZED_SIZE(SOCKADDR_STRING_MAX)];
        char remote[UTF8_SANITIZED_SIZE(SOCKADDR_STRING_MAX)];

        if (ctx->r < 0)
                return;
        utf8_sanitize(c->local_address, local, sizeof(local));
        utf8_sanitize(c->remote_address, remote, sizeof(remote));
        ctx->r = count_row(&ctx->bytes, CONNECTION_STRUCT,
                           (const char *const[]) { c->command, c->ia, c->role, local, remote,
                                                   c->state });
        if (ctx->r >= 0)
                ctx->r = sd_bus_message_append(ctx->reply, "(" CONNECTION_STRUCT ")", c->id,
                                               c->client_id, (uint32_t) c->pid, c->command, c->ia,
                                               c->role, local, remote,
                                               c->remote_conn_qual, c->state, c->age_usec,
                                               c->bytes_sent, c->bytes_received,
                                               (uint32_t) c->peer_pid, c->shm_bytes);
        ctx->n++;
}

static int reply_list(sd_bus_message *msg, Manager *m, bool listeners, sd_bus_error *error)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct list_ctx ctx = {};
        int r;

        r = reply_open_array(msg, listeners ? "(" LISTENER_STRUCT ")" : "(" CONNECTION_STRUCT ")",
                             &reply);
        if (r < 0)
                return r;
        ctx.reply = reply;
        if (listeners)
                conn_foreach_listener(m, append_listener, &ctx);
        else
                conn_foreach_connection(m, append_connection, &ctx);
        if (ctx.r == -E2BIG)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "More rows than one D-Bus reply can carry "
                                         "(the first %zu fit in 64 MiB).", ctx.n - 1);
        return reply_close_send(reply, ctx.r);
}

static int method_list_listeners(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        return reply_list(msg, userdata, true, error);
}

static int method_list_connections(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        return reply_list(msg, userdata, false, error);
}

static const struct {
        const char *name;
        size_t offset;
} conn_counter_fields[] = {
#define COUNTER(f) { #f, offsetof(ConnCounters, f) }
        COUNTER(listens),
        COUNTER(listens_refused),
        COUNTER(connects),
        COUNTER(connects_refused),
        COUNTER(established),
        COUNTER(peer_rejected),
        COUNTER(non_peer_rejected),
        COUNTER(timed_out),
        COUNTER(unreachable),
        COUNTER(disconnected),
        COUNTER(broken),
        COUNTER(shm_channels_made),
        COUNTER(shm_channels_reused),
        COUNTER(shm_channels_dropped),
#undef COUNTER
};

static const struct {
        const char *name;
        size_t offset;
} counter_fields[] = {
#define COUNTER(f) { #f, offsetof(Counters, f) }
        COUNTER(clients_accepted),
        COUNTER(clients_rejected),
        COUNTER(clients_dropped),
        COUNTER(requests),
        COUNTER(protocol_errors),
        COUNTER(ia_opens),
        COUNTER(ia_open_failures),
        COUNTER(ia_closes),
        COUNTER(objects_registered),
        COUNTER(objects_refused),
#undef COUNTER
};

static int method_get_counters(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        int r;

        r = reply_open_array(msg, "{st}", &reply);
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(counter_fields); i++)
                r = sd_bus_message_append(reply, "{st}", counter_fields[i].name,
                                          *(const uint64_t *) ((const char *) &m->counters +
                                                               counter_fields[i].offset));
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(conn_counter_fields); i++)
                r = sd_bus_message_append(reply, "{st}", conn_counter_fields[i].name,
                                          *(const uint64_t *) ((const char *) conn_counters(m) +
                                                               conn_counter_fields[i].offset));
        return reply_close_send(reply, r);
}

/* Everything here only reads: anyone who reached the object may call it (the
 * private socket checked the peer at accept, the system bus by its policy).
 * Without SD_BUS_VTABLE_UNPRIVILEGED sd-bus would answer AccessDenied to
 * every caller that is not root. Every method takes no arguments and returns
 * one result. */
#define LIST_METHOD(name, signature, result, handler)                                   \
        SD_BUS_METHOD_WITH_NAMES(name, NULL, /* no arguments */, signature,             \
                                 SD_BUS_PARAM(result), handler, SD_BUS_VTABLE_UNPRIVILEGED)

/* NKeptChannels, NSpareChannels: counts of the keeper, read when asked. */
static int property_get_channels(sd_bus *bus, const char *path, const char *interface,
                                 const char *property, sd_bus_message *reply, void *userdata,
                                 sd_bus_error *error)
{
        Manager *m = userdata;

        (void) bus;
        (void) path;
        (void) interface;
        (void) error;
        return sd_bus_message_append(reply, "u", strcmp(property, "NSpareChannels") == 0
                                                         ? conn_n_spare_channels(m)
                                                         : conn_n_kept_channels(m));
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", NULL, offsetof(Manager, version), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("StartTimestamp", "t", NULL, offsetof(Manager, start_timestamp),
                        SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("RuntimeDirectory", "s", NULL, offsetof(Manager, runtime_dir),
                        SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("SocketPath", "s", NULL, offsetof(Manager, socket_path),
                        SD_BUS_VTABLE_PROPERTY_CONST),
        /* Changes all the time and no signal says so: read it when needed. */
        SD_BUS_PROPERTY("NClients", "u", NULL, offsetof(Manager, n_clients), 0),
        SD_BUS_PROPERTY("NObjects", "t", NULL, offsetof(Manager, n_objects), 0),
        SD_BUS_PROPERTY("NKeptChannels", "u", property_get_channels, 0, 0),
        SD_BUS_PROPERTY("NSpareChannels", "u", property_get_channels, 0, 0),
        LIST_METHOD("ListIAs", "a(sssssu)", ias, method_list_ias),
        LIST_METHOD("ListClients", "a(" CLIENT_STRUCT ")", clients, method_list_clients),
        LIST_METHOD("ListEndpoints", "a(" ENDPOINT_STRUCT ")", endpoints, method_list_endpoints),
        LIST_METHOD("ListObjects", "a(" OBJECT_STRUCT ")", objects, method_list_objects),
        LIST_METHOD("ListListeners", "a(" LISTENER_STRUCT ")", listeners, method_list_listeners),
        LIST_METHOD("ListConnections", "a(" CONNECTION_STRUCT ")", connections, method_list_connections),
        LIST_METHOD("GetCounters", "a{st}", counters, method_get_counters),
        SD_BUS_VTABLE_END,
};

/* The Manager object on a connection, served from the event loop. */
static int bus_publish(Manager *m, sd_bus *bus)
{
        int r = sd_bus_add_object_vtable(bus, NULL, DATD_BUS_PATH, DATD_BUS_INTERFACE,
                                         manager_vtable, m);

        if (r < 0)
                return r;
        return sd_bus_attach_event(bus, m->event, SD_EVENT_PRIORITY_NORMAL);
}

/* ---- the system bus -------------------------------------------------------- */

static int manager_connect_system_bus(Manager *m)
{
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        r = sd_bus_open_system_with_description(&bus, "system");
        if (r < 0)
                return log_full_errno(m->config->bus == BUS_MODE_SYSTEM ? LOG_ERR : LOG_NOTICE, r,
                                      "Cannot connect to the system bus: %m");
        r = bus_publish(m, bus);
        if (r < 0)
                return log_error_errno(r, "Failed to publish datd on the system bus: %m");
        /* Synchronous on purpose: READY=1 must mean the name is ours. */
        r = sd_bus_request_name(bus, DATD_BUS_NAME, 0);
        if (r < 0)
                return log_full_errno(m->config->bus == BUS_MODE_SYSTEM ? LOG_ERR : LOG_NOTICE, r,
                                      "Cannot own %s on the system bus (is the bus policy installed?): %m",
                                      DATD_BUS_NAME);
        m->system_bus = TAKE_PTR(bus);
        log_info("Serving %s on the system bus.", DATD_BUS_NAME);
        return 0;
}

/* ---- the private socket ---------------------------------------------------- */

/* A bus client (busctl, sd_bus_set_bus_client()) starts with the bus
 * driver's Hello and waits for its unique name before anything else.  There
 * is no bus driver on a peer-to-peer connection and sd-bus in server mode
 * does not answer Hello itself, so datd plays that one part of the driver. */
static int method_hello(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        const BusConnection *c = userdata;
        char name[32];

        snprintf(name, sizeof(name), ":1.%" PRIu64, c->id);
        return sd_bus_reply_method_return(msg, "s", name);
}

static const sd_bus_vtable bus_driver_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_NAMES("Hello", NULL, /* no arguments */, "s", SD_BUS_PARAM(unique_name),
                                 method_hello, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

/* Lines about connections refused or dropped: whoever connects causes them,
 * so at most BUS_LOG_BURST per BUS_LOG_INTERVAL_USEC. */
#define BUS_LOG_INTERVAL_USEC (UINT64_C(10) * 1000000)
#define BUS_LOG_BURST 10

static void log_bus_limited(Manager *m, int level, const char *format, ...)
        __attribute__((format(printf, 3, 4)));

static void log_bus_limited(Manager *m, int level, const char *format, ...)
{
        char line[256], more[64] = "";
        unsigned held_back;
        va_list ap;

        if (log_get_max_level() < level || !ratelimit_pass(&m->bus_log_limit, &held_back))
                return;
        va_start(ap, format);
        vsnprintf(line, sizeof(line), format, ap);
        va_end(ap);
        if (held_back > 0)
                snprintf(more, sizeof(more), " (%u similar lines held back)", held_back);
        log_full(level, "%s%s", line, more);
}

static BusConnection *bus_connection_free(BusConnection *c)
{
        if (!c)
                return NULL;
        if (c->manager) {
                LIST_REMOVE(connections, c->manager->bus_connections, c);
                c->manager->n_bus_connections--;
        }
        sd_event_source_disable_unref(c->idle_timer);
        write_progress_free(c->reading);
        sd_bus_close_unref(c->bus);
        free(c);
        return NULL;
}

static uint64_t bus_connection_queued_replies(BusConnection *c)
{
        uint64_t n = 0;

        (void) sd_bus_get_n_queued_write(c->bus, &n);
        return n;
}

static int bus_connection_on_message(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        BusConnection *c = userdata;
        Manager *m = c->manager;
        uint64_t queued;

        if (sd_bus_message_is_signal(msg, "org.freedesktop.DBus.Local", "Disconnected")) {
                log_debug("Private bus connection closed.");
                bus_connection_free(c);
                return 1;
        }
        /* sd-bus keeps every reply the peer does not read (up to hundreds
         * of thousands): a peer that calls and never reads would have datd
         * hold gigabytes for it.  One that reads waits for each reply. */
        queued = bus_connection_queued_replies(c);
        if (queued >= m->config->limits.max_bus_queued_replies) {
                log_bus_limited(m, LOG_WARNING, "Dropping private bus connection %" PRIu64 " of uid %u: "
                                "%" PRIu64 " replies unread (max_bus_queued_replies).", c->id,
                                (unsigned) c->uid, queued);
                bus_connection_free(c);
                return 1;
        }
        c->reading = write_progress_free(c->reading);
        if (sd_event_source_set_time_relative(c->idle_timer,
                                              (uint64_t) m->config->limits.bus_idle_timeout_ms * 1000) < 0)
                log_debug("Failed to push back a bus connection's idle timeout.");
        return 0;
}

/* Whether c, sent nothing for a period, is still reading what waits for
 * it: at the first such period, replies waiting is enough (they may have
 * just been made); after that, it must have read some bytes in the period
 * (write_progress.h).  Counting the replies that wait was no measure: one
 * large reply is one until its last byte, and a peer reading it went after
 * two periods. */
static bool bus_connection_reads(BusConnection *c)
{
        if (bus_connection_queued_replies(c) == 0)
                return false;
        if (c->reading)
                return write_progress_made(c->reading);
        return write_progress_new(c->manager->event, sd_bus_get_fd(c->bus), &c->reading) >= 0;
}

/* No message for bus_idle_timeout_ms: datctl and busctl make a call or two
 * and close, so a quiet connection only holds a place others may need.
 * One that is still being sent a reply stays while it reads. */
static int bus_connection_on_idle(sd_event_source *s, uint64_t usec, void *userdata)
{
        BusConnection *c = userdata;
        Manager *m = c->manager;
        int r;

        if (bus_connection_reads(c)) {
                r = sd_event_source_set_time_relative(s, (uint64_t) m->config->limits.bus_idle_timeout_ms * 1000);
                if (r >= 0)
                        r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                if (r >= 0)
                        return 0;
        }
        log_bus_limited(m, LOG_INFO, "Closing private bus connection %" PRIu64 " of uid %u: idle for "
                        "%" PRIu32 " ms (bus_idle_timeout_ms).", c->id, (unsigned) c->uid,
                        m->config->limits.bus_idle_timeout_ms);
        bus_connection_free(c);
        return 0;
}

static int bus_connection_new(Manager *m, int fd, uid_t uid)
{
        BusConnection *c = calloc(1, sizeof(*c));
        int r;

        if (!c) {
                close(fd);
                return log_oom();
        }
        c->uid = uid;
        r = sd_bus_new(&c->bus);
        if (r < 0) {
                close(fd);
                goto fail;
        }
        r = sd_bus_set_fd(c->bus, fd, fd);
        if (r < 0) {
                close(fd);
                goto fail;
        }
        r = sd_bus_set_server(c->bus, 1, m->bus_server_id);
        if (r >= 0)
                r = sd_bus_negotiate_fds(c->bus, false);
        if (r >= 0)
                r = sd_bus_add_filter(c->bus, NULL, bus_connection_on_message, c);
        if (r >= 0)
                r = sd_bus_add_object_vtable(c->bus, NULL, "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", bus_driver_vtable, c);
        if (r >= 0)
                r = bus_publish(m, c->bus);
        if (r >= 0)
                r = sd_event_add_time_relative(m->event, &c->idle_timer, CLOCK_MONOTONIC,
                                               (uint64_t) m->config->limits.bus_idle_timeout_ms * 1000,
                                               0, bus_connection_on_idle, c);
        if (r >= 0)
                r = sd_bus_start(c->bus);
        if (r < 0)
                goto fail;
        c->manager = m;
        c->id = ++m->next_bus_connection_id;
        LIST_PREPEND(connections, m->bus_connections, c);
        m->n_bus_connections++;
        return 0;
fail:
        bus_connection_free(c);
        return log_warning_errno(r, "Failed to set up a private bus connection: %m");
}

static uint32_t bus_connections_of_uid(Manager *m, uid_t uid)
{
        const BusConnection *c;
        uint32_t n = 0;

        LIST_FOREACH(connections, c, m->bus_connections)
                if (c->uid == uid)
                        n++;
        return n;
}

/* NULL if peer may have one more connection, else why not.  Root is never
 * refused: whoever fills the socket must not lock out the administrator. */
static const char *bus_refusal(Manager *m, const Peer *peer)
{
        const Limits *l = &m->config->limits;

        if (peer->uid == 0)
                return NULL;
        if (!manager_peer_may_administer(m, peer))
                return "not allowed by the policy";
        if (m->n_bus_connections >= l->max_bus_connections)
                return "max_bus_connections reached";
        if (bus_connections_of_uid(m, peer->uid) >= l->max_bus_connections_per_uid)
                return "max_bus_connections_per_uid reached";
        return NULL;
}

static int manager_on_bus_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        Manager *m = userdata;
        _cleanup_close_ int cfd = -1;
        const char *refusal;
        Peer peer;
        int r;

        cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                        log_bus_limited(m, LOG_WARNING, "Failed to accept a bus connection: %s",
                                        strerror(errno));
                        manager_pause_accepting(m, m->bus_listen_source, &m->bus_accept_retry);
                } else if (errno != EAGAIN && errno != EINTR)
                        log_debug_errno(errno, "Failed to accept a bus connection: %m");
                return 0;
        }
        r = peer_identify(cfd, &peer);
        if (r < 0) {
                log_bus_limited(m, LOG_WARNING, "Failed to identify a bus peer: %s", strerror(-r));
                return 0;
        }
        refusal = bus_refusal(m, &peer);
        if (refusal)
                log_bus_limited(m, LOG_NOTICE, "Refusing a private bus connection from pid %d uid %u: %s.",
                                (int) peer.pid, (unsigned) peer.uid, refusal);
        else
                (void) bus_connection_new(m, TAKE_FD(cfd), peer.uid);
        peer_done(&peer);
        return 0;
}

static int manager_listen_private_bus(Manager *m)
{
        int r;

        m->bus_log_limit = RATELIMIT_INIT(BUS_LOG_INTERVAL_USEC, BUS_LOG_BURST);
        r = sd_id128_randomize(&m->bus_server_id);
        if (r < 0)
                return log_error_errno(r, "Failed to make a D-Bus server id: %m");
        r = manager_listen_unix(m->bus_socket_path, SOCK_STREAM, &m->bus_listen_fd);
        if (r < 0)
                return r;
        r = sd_event_add_io(m->event, &m->bus_listen_source, m->bus_listen_fd, EPOLLIN,
                            manager_on_bus_accept, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the private bus socket: %m");
        log_info("Private D-Bus socket on %s.", m->bus_socket_path);
        return 0;
}

int manager_bus_setup(Manager *m)
{
        int r;

        switch (m->config->bus) {
        case BUS_MODE_NONE:
                return 0;
        case BUS_MODE_SYSTEM:
                r = manager_connect_system_bus(m);
                if (r < 0)
                        return r;
                break;
        case BUS_MODE_AUTO:
                /* Without a system bus (or its policy) datd still serves the
                 * private socket. */
                (void) manager_connect_system_bus(m);
                break;
        default:
                break;
        }
        return manager_listen_private_bus(m);
}

void manager_bus_done(Manager *m)
{
        while (m->bus_connections)
                bus_connection_free(m->bus_connections);
        m->system_bus = sd_bus_flush_close_unref(m->system_bus);
        m->bus_listen_source = sd_event_source_disable_unref(m->bus_listen_source);
        m->bus_accept_retry = sd_event_source_disable_unref(m->bus_accept_retry);
        if (m->bus_listen_fd >= 0) {
                close(m->bus_listen_fd);
                unlink(m->bus_socket_path);
                m->bus_listen_fd = -1;
        }
}
