/* datctl: finding datd's D-Bus API and calling it.
 *
 * Where datctl looks, in order (datctl --help says the same):
 *   --system                 the system bus, name org.datd.Datd1
 *   --address=ADDR           that D-Bus address
 *   --runtime-dir=DIR        unix:path=DIR/bus.sock
 *   $DATD_BUS_ADDRESS        that D-Bus address
 *   the system bus           if org.datd.Datd1 has an owner there
 *   RUNSTATEDIR/datd/bus.sock
 *
 * datd's private socket is peer-to-peer.  datctl connects to an address as a
 * bus client (it sends Hello), which works against a bus daemon and against
 * a datd that answers Hello; when Hello is refused it connects again without
 * it.  The destination org.datd.Datd1 is always set; a peer ignores it.
 *
 * The functions here report their own failures on stderr (datctl_error()) and
 * return -errno; callers only propagate. */
#ifndef DATD_DAEMON_DATCTL_BUS_H
#define DATD_DAEMON_DATCTL_BUS_H

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-bus.h>

#define DATD_BUS_NAME "org.datd.Datd1"
#define DATD_BUS_PATH "/org/datd/Datd1"
#define DATD_BUS_INTERFACE "org.datd.Datd1.Manager"
#define DATD_BUS_SOCKET_NAME "bus.sock"
#define DATD_BUS_ADDRESS_ENV "DATD_BUS_ADDRESS"

/* What the command line asked for; all unset means "look as above". */
struct datd_bus_target {
        const char *address;
        const char *runtime_dir;
        bool system;
        uint64_t timeout_usec;  /* for everything datctl does; 0: DATD_BUS_TIMEOUT_USEC */
};

/* The same bound sd-bus puts on a method call, here on the whole run: a
 * datd that accepted the connection but never answers is reported, not
 * waited for forever. */
#define DATD_BUS_TIMEOUT_USEC (UINT64_C(25) * 1000000)

struct datd_bus {
        sd_bus *bus;
        char *where;            /* "at ADDRESS" or "on the system bus", for messages */
        uint64_t deadline_usec; /* CLOCK_MONOTONIC: connecting and every call end by then */
};

/* The D-Bus address of DIR/bus.sock, with DIR escaped as D-Bus addresses
 * require.  NULL when out of memory. */
char *datd_bus_address_for_dir(const char *runtime_dir);

/* Connects to datd as described above and waits until the connection is
 * usable, so that "datd is not there" is reported here, once:
 * "cannot reach datd at ADDRESS: REASON".  The target's timeout starts
 * here and bounds the calls that follow too. */
int datd_bus_connect(const struct datd_bus_target *target, struct datd_bus **ret);

/* Accepts NULL; returns NULL. */
struct datd_bus *datd_bus_free(struct datd_bus *b);

static inline void datd_bus_freep(struct datd_bus **b)
{
        datd_bus_free(*b);
}

/* Calls METHOD() on datd's manager object, with no arguments.  A D-Bus error
 * reply is printed with its name and message. */
int datd_bus_call(struct datd_bus *b, const char *method, sd_bus_message **reply);

/* org.freedesktop.DBus.Properties.GetAll on the manager interface; the
 * reply is an a{sv}. */
int datd_bus_get_all_properties(struct datd_bus *b, sd_bus_message **reply);

/* Reads an array whose elements are element_type ('r' structs, 'e' dict
 * entries) of the given contents ("ssu", "sv"): enters each element, calls
 * item() on it, leaves it.  Returns 0, or the first negative value of
 * sd-bus or item(); reports nothing. */
int datd_bus_read_array(sd_bus_message *m, char element_type, const char *contents,
                        int (*item)(sd_bus_message *m, void *userdata), void *userdata);

/* Reports a reply that does not have the expected D-Bus type; returns
 * -EBADMSG for the caller to hand back. */
int datd_bus_bad_reply(const char *what, sd_bus_message *reply, const char *expected);

#endif
