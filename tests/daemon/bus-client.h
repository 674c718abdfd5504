/* datd's D-Bus API from a test: a bus client on the private socket, as
 * busctl is one (it says Hello first), and readers for what the tests check.
 * Failures are returned, never asserted. */
#ifndef DATD_TESTS_DAEMON_BUS_CLIENT_H
#define DATD_TESTS_DAEMON_BUS_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#define DATD_BUS_DEST "org.datd.Datd1"
#define DATD_BUS_OBJECT "/org/datd/Datd1"
#define DATD_BUS_IFACE "org.datd.Datd1.Manager"

/* Connected and past Hello, or -errno. */
int bus_client_open(const char *address, sd_bus **ret);

/* One counter of GetCounters(). */
int bus_counter(sd_bus *bus, const char *name, uint64_t *ret);

/* ListIAs(): the open-instances column of one IA. */
int bus_ia_open_count(sd_bus *bus, const char *ia, uint32_t *ret);

/* ListClients(): whether a client with this pid is listed, and the names of
 * its open IAs joined with ',' (at most size bytes). */
int bus_client_by_pid(sd_bus *bus, pid_t pid, bool *found, char *ias, size_t size);

#endif
