/* datd's D-Bus administration API (daemon/DBUS-API.md): one object,
 * /org/datd/Datd1, on the system bus as org.datd.Datd1 and on every
 * connection of the private socket <runtime_dir>/bus.sock. */
#ifndef DATD_DAEMON_BUS_H
#define DATD_DAEMON_BUS_H

#include <systemd/sd-bus.h>

#include "daemon/list.h"
#include "daemon/manager.h"
#include "daemon/write_progress.h"

#define DATD_BUS_NAME "org.datd.Datd1"
#define DATD_BUS_PATH "/org/datd/Datd1"
#define DATD_BUS_INTERFACE "org.datd.Datd1.Manager"

/* One peer on the private socket: an sd-bus server connection. */
struct BusConnection {
        Manager *manager;
        uint64_t id;                    /* its unique name is ":1.<id>" */
        uid_t uid;                      /* the peer's, for max_bus_connections_per_uid */
        sd_bus *bus;
        /* limits.bus_idle_timeout_ms after the last message it sent. */
        sd_event_source *idle_timer;
        /* Whether the peer reads the replies still waiting, from the first
         * time the timer found some; NULL after it sent something. */
        WriteProgress *reading;
        LIST_FIELDS(BusConnection, connections);
};

/* Per config->bus: the system bus and/or the private socket. */
int manager_bus_setup(Manager *m);
void manager_bus_done(Manager *m);

#endif
