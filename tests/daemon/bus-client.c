#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tests/daemon/bus-client.h"

int bus_client_open(const char *address, sd_bus **ret)
{
        sd_bus *bus = NULL;
        int r;

        r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_address(bus, address);
        if (r >= 0)
                r = sd_bus_set_bus_client(bus, 1);
        if (r >= 0)
                r = sd_bus_start(bus);
        /* sd_bus_start() only sends Hello; wait for the answer, so that a
         * refused connection fails here and not at the first call. */
        if (r >= 0)
                r = sd_bus_call_method(bus, DATD_BUS_DEST, DATD_BUS_OBJECT,
                                       "org.freedesktop.DBus.Peer", "Ping", NULL, NULL, NULL);
        if (r >= 0 && !sd_bus_is_open(bus))
                r = -ENOTCONN;
        if (r < 0) {
                sd_bus_flush_close_unref(bus);
                return r;
        }
        *ret = bus;
        return 0;
}

static int bus_call(sd_bus *bus, const char *method, sd_bus_message **reply)
{
        return sd_bus_call_method(bus, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE, method,
                                  NULL, reply, NULL);
}

int bus_counter(sd_bus *bus, const char *name, uint64_t *ret)
{
        sd_bus_message *reply = NULL;
        const char *key;
        uint64_t value;
        int r;

        r = bus_call(bus, "GetCounters", &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "{st}");
        while (r >= 0 && (r = sd_bus_message_read(reply, "{st}", &key, &value)) > 0)
                if (strcmp(key, name) == 0) {
                        *ret = value;
                        sd_bus_message_unref(reply);
                        return 0;
                }
        sd_bus_message_unref(reply);
        return r < 0 ? r : -ENOENT;
}

int bus_ia_open_count(sd_bus *bus, const char *ia, uint32_t *ret)
{
        sd_bus_message *reply = NULL;
        const char *name, *transport, *adapter, *address, *state;
        uint32_t n;
        int r;

        r = bus_call(bus, "ListIAs", &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "(sssssu)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(sssssu)", &name, &transport, &adapter,
                                                  &address, &state, &n)) > 0)
                if (strcmp(name, ia) == 0) {
                        *ret = n;
                        sd_bus_message_unref(reply);
                        return 0;
                }
        sd_bus_message_unref(reply);
        return r < 0 ? r : -ENOENT;
}

#define CLIENT_STRUCT "tuuusastuut"

/* What read_client() found of the client it looked for. */
struct client_row {
        uint32_t n_objects, n_eps;
        uint64_t lmr_bytes;
};

/* One ListClients() entry; *match tells whether its pid is pid. */
static int read_client(sd_bus_message *reply, pid_t pid, bool *match, char *ias, size_t size,
                       struct client_row *row)
{
        uint64_t id, since, lmr_bytes;
        uint32_t cpid, uid, gid, n_objects, n_eps;
        const char *comm, *ia;
        int r;

        r = sd_bus_message_enter_container(reply, 'r', CLIENT_STRUCT);
        if (r <= 0)
                return r;
        r = sd_bus_message_read(reply, "tuuus", &id, &cpid, &uid, &gid, &comm);
        if (r < 0)
                return r;
        *match = (pid_t) cpid == pid;
        if (*match && size > 0)
                ias[0] = '\0';
        r = sd_bus_message_enter_container(reply, 'a', "s");
        while (r >= 0 && (r = sd_bus_message_read(reply, "s", &ia)) > 0)
                if (*match && size > 0 && strlen(ias) + strlen(ia) + 2 <= size) {
                        if (ias[0])
                                strcat(ias, ",");
                        strcat(ias, ia);
                }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = sd_bus_message_read(reply, "tuut", &since, &n_objects, &n_eps, &lmr_bytes);
        if (r >= 0 && *match && row)
                *row = (struct client_row) { n_objects, n_eps, lmr_bytes };
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        return r < 0 ? r : 1;
}

static int find_client(sd_bus *bus, pid_t pid, bool *found, char *ias, size_t size,
                       struct client_row *row)
{
        sd_bus_message *reply = NULL;
        int r;

        *found = false;
        r = bus_call(bus, "ListClients", &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "(" CLIENT_STRUCT ")");
        while (r > 0 && !*found)
                r = read_client(reply, pid, found, ias, size, row);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

int bus_client_by_pid(sd_bus *bus, pid_t pid, bool *found, char *ias, size_t size)
{
        return find_client(bus, pid, found, ias, size, NULL);
}

int bus_client_objects(sd_bus *bus, pid_t pid, uint32_t *n_objects, uint32_t *n_eps,
                       uint64_t *lmr_bytes)
{
        struct client_row row;
        bool found;
        int r = find_client(bus, pid, &found, NULL, 0, &row);

        if (r < 0)
                return r;
        if (!found)
                return -ENOENT;
        *n_objects = row.n_objects;
        *n_eps = row.n_eps;
        *lmr_bytes = row.lmr_bytes;
        return 0;
}

static void copy_string(char *dst, size_t size, const char *src)
{
        snprintf(dst, size, "%s", src);
}

static int read_object(sd_bus_message *reply, void *row)
{
        struct bus_object *o = row;
        const char *command, *ia, *kind, *state;
        int r = sd_bus_message_read(reply, "(tusssttstuu)", &o->client_id, &o->pid, &command, &ia,
                                    &kind, &o->handle, &o->pz_handle, &state, &o->length, &o->qlen,
                                    &o->id);

        if (r > 0) {
                copy_string(o->command, sizeof(o->command), command);
                copy_string(o->ia, sizeof(o->ia), ia);
                copy_string(o->kind, sizeof(o->kind), kind);
                copy_string(o->state, sizeof(o->state), state);
        }
        return r;
}

static int read_endpoint(sd_bus_message *reply, void *row)
{
        struct bus_endpoint *e = row;
        const char *command, *ia, *state;
        int r = sd_bus_message_read(reply, "(tussttsuuuuuu)", &e->client_id, &e->pid, &command, &ia,
                                    &e->handle, &e->pz_handle, &state, &e->max_recv_dtos,
                                    &e->max_request_dtos, &e->max_recv_iov, &e->max_request_iov,
                                    &e->max_message_size, &e->id);

        if (r > 0) {
                copy_string(e->command, sizeof(e->command), command);
                copy_string(e->ia, sizeof(e->ia), ia);
                copy_string(e->state, sizeof(e->state), state);
        }
        return r;
}

static int read_connection(sd_bus_message *reply, void *row)
{
        struct bus_connection *c = row;
        const char *command, *ia, *role, *local, *remote, *state;
        int r = sd_bus_message_read(reply, "(utussssststttut)", &c->id, &c->client_id, &c->pid,
                                    &command, &ia, &role, &local, &remote, &c->remote_conn_qual,
                                    &state, &c->age_usec, &c->bytes_sent, &c->bytes_received,
                                    &c->peer_pid, &c->shm_bytes);

        if (r > 0) {
                copy_string(c->command, sizeof(c->command), command);
                copy_string(c->ia, sizeof(c->ia), ia);
                copy_string(c->role, sizeof(c->role), role);
                copy_string(c->local_address, sizeof(c->local_address), local);
                copy_string(c->remote_address, sizeof(c->remote_address), remote);
                copy_string(c->state, sizeof(c->state), state);
        }
        return r;
}

/* Reads rows of a List*() reply: each into rows[i] (of size bytes) while
 * there is room, else into a scratch row; counts them in *n. */
static int list_rows(sd_bus *bus, const char *method, const char *row_type, void *rows,
                     size_t size, size_t max, size_t *n,
                     int (*read)(sd_bus_message *reply, void *row))
{
        sd_bus_message *reply = NULL;
        union {
                struct bus_object o;
                struct bus_endpoint e;
                struct bus_connection c;
        } scratch;
        int r;

        *n = 0;
        r = bus_call(bus, method, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', row_type);
        while (r >= 0 && (r = read(reply, *n < max ? (char *) rows + *n * size : (void *) &scratch)) > 0)
                (*n)++;
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

int bus_list_objects(sd_bus *bus, struct bus_object *rows, size_t max, size_t *n)
{
        return list_rows(bus, "ListObjects", "(tusssttstuu)", rows, sizeof(*rows), max, n,
                         read_object);
}

int bus_list_endpoints(sd_bus *bus, struct bus_endpoint *rows, size_t max, size_t *n)
{
        return list_rows(bus, "ListEndpoints", "(tussttsuuuuuu)", rows, sizeof(*rows), max, n,
                         read_endpoint);
}

int bus_list_connections(sd_bus *bus, struct bus_connection *rows, size_t max, size_t *n)
{
        return list_rows(bus, "ListConnections", "(utussssststttut)", rows, sizeof(*rows), max, n,
                         read_connection);
}
