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

/* ListClients(): the object columns of the client with this pid. */
int bus_client_objects(sd_bus *bus, pid_t pid, uint32_t *n_objects, uint32_t *n_eps,
                       uint64_t *lmr_bytes);

/* One row of ListObjects() (DBUS-API.md).  Strings are cut to fit. */
struct bus_object {
        uint64_t client_id;
        uint32_t pid;
        char command[64];
        char ia[64];
        char kind[8];
        uint64_t handle;
        uint64_t pz_handle;
        char state[48];
        uint64_t length;
        uint32_t qlen;
        uint32_t id;
};

/* One row of ListEndpoints(). */
struct bus_endpoint {
        uint64_t client_id;
        uint32_t pid;
        char command[64];
        char ia[64];
        uint64_t handle;
        uint64_t pz_handle;
        char state[48];
        uint32_t max_recv_dtos;
        uint32_t max_request_dtos;
        uint32_t max_recv_iov;
        uint32_t max_request_iov;
        uint32_t max_message_size;
        uint32_t id;
};

/* One row of ListConnections(). */
struct bus_connection {
        uint32_t id;
        uint64_t client_id;
        uint32_t pid;
        char command[64];
        char ia[64];
        char role[16];
        char local_address[64];
        char remote_address[64];
        uint64_t remote_conn_qual;
        char state[16];
        uint64_t age_usec;
        uint64_t bytes_sent;
        uint64_t bytes_received;
        uint32_t peer_pid;
        uint64_t shm_bytes;
};

/* ListObjects() / ListEndpoints() / ListConnections(): the first max rows into rows (may be NULL
 * with max 0), and how many rows there were in *n. */
int bus_list_objects(sd_bus *bus, struct bus_object *rows, size_t max, size_t *n);
int bus_list_endpoints(sd_bus *bus, struct bus_endpoint *rows, size_t max, size_t *n);
int bus_list_connections(sd_bus *bus, struct bus_connection *rows, size_t max, size_t *n);

#endif
