/* datctl: finding datd's D-Bus API and calling it.  See datctl-bus.h. */
#include <config.h>

#include "datctl-bus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/macro.h"
#include "datctl.h"

static uint64_t now_monotonic_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* What is left of the run's time; 0 once it is over. */
static uint64_t usec_left(uint64_t deadline)
{
        uint64_t now = now_monotonic_usec();

        return now < deadline ? deadline - now : 0;
}

/* D-Bus address values: these bytes may stand as they are, every other
 * byte is written %XX (D-Bus specification, "Server Addresses"). */
static bool address_byte_is_plain(unsigned char c)
{
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c != '\0' && strchr("-_/.", c) != NULL);
}

char *datd_bus_address_for_dir(const char *runtime_dir)
{
        static const char prefix[] = "unix:path=";
        static const char suffix[] = "/" DATD_BUS_SOCKET_NAME;
        char *out = malloc(sizeof(prefix) + strlen(runtime_dir) * 3 + sizeof(suffix)), *o;

        if (!out)
                return NULL;
        o = stpcpy(out, prefix);
        for (const unsigned char *s = (const unsigned char *)runtime_dir; *s; s++) {
                if (address_byte_is_plain(*s))
                        *o++ = (char)*s;
                else
                        o += sprintf(o, "%%%02x", *s);
        }
        strcpy(o, suffix);
        return out;
}

/* Drives the connection until it can carry calls (authenticated, and Hello
 * answered when we sent one), so that every reason for not reaching datd
 * surfaces here rather than as a failed method call. */
static int bus_wait_ready(sd_bus *bus, uint64_t deadline)
{
        for (;;) {
                uint64_t left;
                int r;

                r = sd_bus_is_ready(bus);
                if (r != 0)
                        return r < 0 ? r : 0;
                r = sd_bus_process(bus, NULL);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                left = usec_left(deadline);
                if (left == 0)
                        return -ETIMEDOUT;
                r = sd_bus_wait(bus, left);
                if (r < 0)
                        return r;
        }
}

/* *connected tells the caller whether the socket connection itself worked,
 * i.e. whether trying again without Hello can make a difference.  A failed
 * connection is closed without flushing: sd_bus_flush() would wait for the
 * authentication a stopped datd never answers (sd-bus allows it 90 s). */
static int bus_open_address(const char *address, bool bus_client, uint64_t deadline, sd_bus **ret,
                            bool *connected)
{
        _cleanup_(sd_bus_close_unrefp) sd_bus *bus = NULL;
        int r;

        *connected = false;
        r = sd_bus_new(&bus);
        if (r < 0)
                return r;
        r = sd_bus_set_address(bus, address);
        if (r < 0)
                return r;
        r = sd_bus_set_bus_client(bus, bus_client);
        if (r < 0)
                return r;
        r = sd_bus_set_description(bus, "datd");
        if (r < 0)
                return r;
        r = sd_bus_start(bus);
        if (r < 0)
                return r;
        *connected = true;
        r = bus_wait_ready(bus, deadline);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(bus);
        return 0;
}

static int bus_connect_address(struct datd_bus *b, const char *address)
{
        bool connected;
        int r;

        if (asprintf(&b->where, "at %s", address) < 0) {
                b->where = NULL;
                datctl_error("out of memory");
                return -ENOMEM;
        }
        r = bus_open_address(address, true, b->deadline_usec, &b->bus, &connected);
        /* A peer that does not answer Hello (a datd whose private socket is
         * plain peer-to-peer) refuses it with an error reply or hangs up:
         * talk to it without Hello.  A peer that said nothing in time is not
         * asked again.  The error worth reporting is then the one from that
         * second attempt. */
        if (r < 0 && r != -ETIMEDOUT && connected)
                r = bus_open_address(address, false, b->deadline_usec, &b->bus, &connected);
        if (r < 0)
                datctl_error("cannot reach datd %s: %s", b->where, strerror(-r));
        return r;
}

static int bus_connect_runtime_dir(struct datd_bus *b, const char *runtime_dir)
{
        _cleanup_free_ char *address = datd_bus_address_for_dir(runtime_dir);

        if (!address) {
                datctl_error("out of memory");
                return -ENOMEM;
        }
        return bus_connect_address(b, address);
}

static int bus_name_has_owner(sd_bus *bus, uint64_t deadline)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r, has_owner;

        r = sd_bus_set_method_call_timeout(bus, usec_left(deadline) ?: 1);
        if (r >= 0)
                r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "NameHasOwner", NULL, &reply,
                                       "s", DATD_BUS_NAME);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "b", &has_owner);
        if (r < 0)
                return r;
        return has_owner;
}

/* Returns 1 when connected; with only_if_owned, 0 when there is no system
 * bus or datd is not on it (not an error: datctl looks further). */
static int bus_connect_system(struct datd_bus *b, bool only_if_owned)
{
        _cleanup_(sd_bus_close_unrefp) sd_bus *bus = NULL;
        int r;

        r = sd_bus_open_system(&bus);
        if (r >= 0 && only_if_owned)
                r = bus_name_has_owner(bus, b->deadline_usec);
        if (only_if_owned && r <= 0)
                return 0;
        if (r < 0) {
                datctl_error("cannot reach datd on the system bus: %s", strerror(-r));
                return r;
        }
        b->where = strdup("on the system bus");
        if (!b->where) {
                datctl_error("out of memory");
                return -ENOMEM;
        }
        b->bus = TAKE_PTR(bus);
        return 1;
}

int datd_bus_connect(const struct datd_bus_target *target, struct datd_bus **ret)
{
        _cleanup_(datd_bus_freep) struct datd_bus *b = calloc(1, sizeof(*b));
        const char *env = getenv(DATD_BUS_ADDRESS_ENV);
        int r;

        if (!b) {
                datctl_error("out of memory");
                return -ENOMEM;
        }
        b->deadline_usec = now_monotonic_usec() +
                           (target->timeout_usec ? target->timeout_usec : DATD_BUS_TIMEOUT_USEC);
        if (target->system)
                r = bus_connect_system(b, false);
        else if (target->address)
                r = bus_connect_address(b, target->address);
        else if (target->runtime_dir)
                r = bus_connect_runtime_dir(b, target->runtime_dir);
        else if (env && *env)
                r = bus_connect_address(b, env);
        else {
                r = bus_connect_system(b, true);
                if (r == 0)
                        r = bus_connect_runtime_dir(b, RUNSTATEDIR "/datd");
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b);
        return 0;
}

struct datd_bus *datd_bus_free(struct datd_bus *b)
{
        if (!b)
                return NULL;
        /* Every call waited for its reply: nothing is left to flush. */
        sd_bus_close_unref(b->bus);
        free(b->where);
        free(b);
        return NULL;
}

/* sd-bus turns local failures (the connection dropped, a timeout) into
 * errors named System.Error.*; only the errno means something there. */
static void report_call_error(struct datd_bus *b, const char *what, const sd_bus_error *error,
                              int r)
{
        /* The bus daemon answers for a datd that is not on the bus. */
        if (sd_bus_error_has_names(error, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                datctl_error("cannot reach datd %s: %s", b->where,
                             error->message ? error->message : error->name);
        else if (sd_bus_error_is_set(error) && strncmp(error->name, "System.Error.", 13) != 0)
                datctl_error("%s failed: %s: %s", what, error->name,
                             error->message ? error->message : "(no message)");
        else if (r == -ECONNRESET || r == -ENOTCONN)
                datctl_error("%s failed: lost the connection to datd %s", what, b->where);
        else
                datctl_error("%s failed: %s", what, strerror(-r));
}

static int bus_call(struct datd_bus *b, const char *interface, const char *method,
                    const char *argument, const char *what, sd_bus_message **reply)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_message_new_method_call(b->bus, &m, DATD_BUS_NAME, DATD_BUS_PATH,
                                           interface, method);
        if (r >= 0 && argument)
                r = sd_bus_message_append(m, "s", argument);
        if (r < 0) {
                datctl_error("cannot build the %s call: %s", what, strerror(-r));
                return r;
        }
        /* 0 would mean sd-bus's own 25 s: the run's time is up. */
        r = usec_left(b->deadline_usec) > 0
                    ? sd_bus_call(b->bus, m, usec_left(b->deadline_usec), &error, reply)
                    : -ETIMEDOUT;
        if (r < 0) {
                report_call_error(b, what, &error, r);
                return r;
        }
        return 0;
}

int datd_bus_call(struct datd_bus *b, const char *method, sd_bus_message **reply)
{
        char what[128];

        snprintf(what, sizeof(what), "%s()", method);
        return bus_call(b, DATD_BUS_INTERFACE, method, NULL, what, reply);
}

int datd_bus_get_all_properties(struct datd_bus *b, sd_bus_message **reply)
{
        return bus_call(b, "org.freedesktop.DBus.Properties", "GetAll", DATD_BUS_INTERFACE,
                        "reading datd's properties", reply);
}

int datd_bus_read_array(sd_bus_message *m, char element_type, const char *contents,
                        int (*item)(sd_bus_message *m, void *userdata), void *userdata)
{
        /* A D-Bus signature has at most 255 characters. */
        char element[256 + 2];
        int r;

        if (element_type != 'r' && element_type != 'e')
                return -EINVAL;
        if (snprintf(element, sizeof(element), element_type == 'r' ? "(%s)" : "{%s}", contents) >=
            (int)sizeof(element))
                return -E2BIG;
        r = sd_bus_message_enter_container(m, 'a', element);
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, element_type, contents)) > 0) {
                r = item(m, userdata);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

int datd_bus_bad_reply(const char *what, sd_bus_message *reply, const char *expected)
{
        const char *got = sd_bus_message_get_signature(reply, true);

        datctl_error("%s: datd answered with type '%s', expected '%s' (datd and datctl from "
                     "different versions?)", what, got ? got : "", expected);
        return -EBADMSG;
}
