/* datctl status: datd's properties, IAs and counters in one view.
 *
 * The JSON object (--json) is built first and the human view is drawn from
 * it.  Keys are datd's property names in lower_snake_case:
 *   version, start_timestamp (ISO 8601 UTC), start_timestamp_usec,
 *   uptime_usec, runtime_directory, socket_path, n_clients,
 *   n_ias, n_ias_up, counters (an object of GetCounters()).
 * A property this datd does not have is null. */
#ifndef DATD_DAEMON_DATCTL_STATUS_H
#define DATD_DAEMON_DATCTL_STATUS_H

#include <stdint.h>

#include <jansson.h>

struct datd_bus;
struct datctl_output;

/* Asks datd (GetAll, ListIAs(), GetCounters()) and builds the object;
 * now is CLOCK_REALTIME µs, for the uptime.  Returns 0 or -errno, reported. */
int status_query(struct datd_bus *bus, uint64_t now, json_t **ret);

/* The human view of a status_query() object.  Returns 0 or -EIO. */
int status_print(json_t *status);

/* The whole command. */
int status_show(struct datd_bus *bus, const struct datctl_output *o);

#endif
