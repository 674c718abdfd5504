#include "config.h"

#include <errno.h>
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

/* One (tuuusast) entry; *match tells whether its pid is pid. */
static int read_client(sd_bus_message *reply, pid_t pid, bool *match, char *ias, size_t size)
{
        uint64_t id, since;
        uint32_t cpid, uid, gid;
        const char *comm, *ia;
        int r;

        r = sd_bus_message_enter_container(reply, 'r', "tuuusast");
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
                if (*match && strlen(ias) + strlen(ia) + 2 <= size) {
                        if (ias[0])
                                strcat(ias, ",");
                        strcat(ias, ia);
                }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = sd_bus_message_read(reply, "t", &since);
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        return r < 0 ? r : 1;
}

int bus_client_by_pid(sd_bus *bus, pid_t pid, bool *found, char *ias, size_t size)
{
        sd_bus_message *reply = NULL;
        int r;

        *found = false;
        r = bus_call(bus, "ListClients", &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "(tuuusast)");
        while (r > 0 && !*found)
                r = read_client(reply, pid, found, ias, size);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}
