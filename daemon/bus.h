/* datd's D-Bus administration API (daemon/DBUS-API.md): one object,
 * /org/datd/Datd1, on the system bus as org.datd.Datd1 and on every
 * connection of the private socket <runtime_dir>/bus.sock. */
#ifndef DATD_DAEMON_BUS_H
#define DATD_DAEMON_BUS_H

#include <systemd/sd-bus.h>

#include "daemon/list.h"
#include "daemon/manager.h"

#define DATD_BUS_NAME "org.datd.Datd1"
#define DATD_BUS_PATH "/org/datd/Datd1"
#define DATD_BUS_INTERFACE "org.datd.Datd1.Manager"

/* One peer on the private socket: an sd-bus server connection. */
struct BusConnection {
        Manager *manager;
        uint64_t id;                    /* its unique name is ":1.<id>" */
        sd_bus *bus;
        LIST_FIELDS(BusConnection, connections);
};

/* Per config->bus: the system bus and/or the private socket. */
int manager_bus_setup(Manager *m);
void manager_bus_done(Manager *m);

#endif
