#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/bus.h"
#include "daemon/client.h"
#include "daemon/log.h"
#include "daemon/netif.h"

/* ---- the object ------------------------------------------------------------ */

static int method_list_ias(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(sssssu)");
        for (size_t i = 0; r >= 0 && i < m->ias.n; i++) {
                const Ia *ia = &m->ias.ias[i];
                char address[SOCKADDR_STRING_MAX];

                sockaddr_to_string((const struct sockaddr *) &ia->address, ia->address_len,
                                   address, sizeof(address));
                r = sd_bus_message_append(reply, "(sssssu)", ia->name,
                                          transport_to_string(ia->transport), ia->adapter_name,
                                          address, ia_is_up(ia) ? "up" : "down", ia->n_open);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int append_client(sd_bus_message *reply, const Client *c)
{
        const IaInstance *i;
        int r;

        r = sd_bus_message_open_container(reply, 'r', "tuuusast");
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
                r = sd_bus_message_append(reply, "t", c->connected_usec);
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

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(tuuusast)");
        LIST_FOREACH(clients, c, m->clients)
                if (r >= 0)
                        r = append_client(reply, c);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

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
#undef COUNTER
};

static int method_get_counters(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "{st}");
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(counter_fields); i++)
                r = sd_bus_message_append(reply, "{st}", counter_fields[i].name,
                                          *(const uint64_t *) ((const char *) &m->counters +
                                                               counter_fields[i].offset));
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* Everything here only reads: anyone who reached the object may call it (the
 * private socket checked the peer at accept, the system bus by its policy).
 * Without SD_BUS_VTABLE_UNPRIVILEGED sd-bus would answer AccessDenied to
 * every caller that is not root. */
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
        SD_BUS_METHOD_WITH_NAMES("ListIAs", NULL, /* no arguments */,
                                 "a(sssssu)", SD_BUS_PARAM(ias),
                                 method_list_ias, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("ListClients", NULL, /* no arguments */,
                                 "a(tuuusast)", SD_BUS_PARAM(clients),
                                 method_list_clients, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetCounters", NULL, /* no arguments */,
                                 "a{st}", SD_BUS_PARAM(counters),
                                 method_get_counters, SD_BUS_VTABLE_UNPRIVILEGED),
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

static BusConnection *bus_connection_free(BusConnection *c)
{
        if (!c)
                return NULL;
        if (c->manager) {
                LIST_REMOVE(connections, c->manager->bus_connections, c);
                c->manager->n_bus_connections--;
        }
        sd_bus_close_unref(c->bus);
        free(c);
        return NULL;
}

static int bus_connection_on_message(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        BusConnection *c = userdata;

        if (sd_bus_message_is_signal(msg, "org.freedesktop.DBus.Local", "Disconnected")) {
                log_debug("Private bus connection closed.");
                bus_connection_free(c);
                return 1;
        }
        return 0;
}

static int bus_connection_new(Manager *m, int fd)
{
        BusConnection *c = calloc(1, sizeof(*c));
        int r;

        if (!c) {
                close(fd);
                return log_oom();
        }
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

static int manager_on_bus_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        Manager *m = userdata;
        _cleanup_close_ int cfd = -1;
        Peer peer;
        int r;

        cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        log_debug_errno(errno, "Failed to accept a bus connection: %m");
                return 0;
        }
        if (m->n_bus_connections >= m->config->limits.max_bus_connections) {
                log_warning("Refusing a private bus connection: max_bus_connections (%u) reached.",
                            m->config->limits.max_bus_connections);
                return 0;
        }
        r = peer_identify(cfd, &peer);
        if (r < 0) {
                log_warning_errno(r, "Failed to identify a bus peer: %m");
                return 0;
        }
        if (!manager_peer_may_administer(m, &peer)) {
                log_notice("Refusing a private bus connection from pid %d uid %u: not allowed by the policy.",
                           (int) peer.pid, (unsigned) peer.uid);
                peer_done(&peer);
                return 0;
        }
        peer_done(&peer);
        (void) bus_connection_new(m, TAKE_FD(cfd));
        return 0;
}

static int manager_listen_private_bus(Manager *m)
{
        int r;

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
        if (m->bus_listen_fd >= 0) {
                close(m->bus_listen_fd);
                unlink(m->bus_socket_path);
                m->bus_listen_fd = -1;
        }
}
