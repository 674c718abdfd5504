/* datctl status.  See datctl-status.h. */
#include <config.h>

#include "datctl-status.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <systemd/sd-bus.h>

#include "common/macro.h"
#include "datctl-bus.h"
#include "datctl-format.h"
#include "datctl-list.h"
#include "datctl.h"

/* Width of the label column of the human view. */
#define STATUS_LABEL_WIDTH 12

struct status_property {
        const char *name;       /* on org.datd.Datd1.Manager */
        const char *key;        /* in the JSON object */
        char type;              /* its D-Bus type */
        bool timestamp;         /* 't' in CLOCK_REALTIME µs: set_start_timestamp() */
};

/* In the order the JSON object shows them. */
static const struct status_property status_properties[] = {
        { "Version", "version", 's' },
        { "StartTimestamp", "start_timestamp", 't', true },
        { "RuntimeDirectory", "runtime_directory", 's' },
        { "SocketPath", "socket_path", 's' },
        { "NClients", "n_clients", 'u' },
        { "NObjects", "n_objects", 't' },
        { "NKeptChannels", "n_kept_channels", 'u' },
        { "NSpareChannels", "n_spare_channels", 'u' },
};

static const struct status_property *status_property_find(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(status_properties); i++)
                if (strcmp(status_properties[i].name, name) == 0)
                        return &status_properties[i];
        return NULL;
}

static int set_or_oom(json_t *object, const char *key, json_t *value)
{
        return value && json_object_set_new(object, key, value) == 0 ? 0 : -ENOMEM;
}

/* Every key is there from the start, null until datd fills it, so that the
 * object has the same keys in the same order whatever this datd knows. */
static int status_new(json_t **ret)
{
        _cleanup_(json_decrefp) json_t *status = json_object();
        static const char *const keys[] = {
                "version", "start_timestamp", "start_timestamp_usec", "uptime_usec",
                "runtime_directory", "socket_path", "n_clients", "n_objects", "n_kept_channels",
                "n_spare_channels", "n_ias", "n_ias_up",
        };

        if (!status)
                return -ENOMEM;
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                if (set_or_oom(status, keys[i], json_null()) < 0)
                        return -ENOMEM;
        if (set_or_oom(status, "counters", json_object()) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(status);
        return 0;
}

static int set_start_timestamp(json_t *status, uint64_t usec, uint64_t now)
{
        char buf[FORMAT_TIMESTAMP_MAX];
        const char *iso = format_timestamp_iso8601(buf, usec);

        if (!iso)
                return 0;       /* not started yet: leave null */
        if (set_or_oom(status, "start_timestamp", json_string(iso)) < 0 ||
            set_or_oom(status, "start_timestamp_usec", json_from_u64(usec)) < 0 ||
            set_or_oom(status, "uptime_usec", json_integer(now > usec ? (json_int_t)(now - usec) : 0)) < 0)
                return -ENOMEM;
        return 0;
}

struct read_properties_context {
        json_t *status;
        uint64_t now;
};

/* One a{sv} entry; a property this datctl does not know, or with another
 * type than it knows, is skipped. */
static int read_property(sd_bus_message *m, void *userdata)
{
        const struct read_properties_context *ctx = userdata;
        const struct status_property *p;
        const char *name, *contents;
        union {
                const char *s;
                uint32_t u;
                uint64_t t;
        } v;
        json_t *value;
        int r;

        r = sd_bus_message_read(m, "s", &name);
        if (r < 0)
                return r;
        r = sd_bus_message_peek_type(m, NULL, &contents);
        if (r < 0)
                return r;
        p = status_property_find(name);
        if (!p || contents[0] != p->type || contents[1] != '\0')
                return sd_bus_message_skip(m, "v");

        r = sd_bus_message_enter_container(m, 'v', contents);
        if (r >= 0)
                r = sd_bus_message_read_basic(m, p->type, &v);
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        if (p->timestamp)
                return set_start_timestamp(ctx->status, v.t, ctx->now);
        value = p->type == 's'   ? json_string(v.s)
                : p->type == 't' ? json_from_u64(v.t)
                                 : json_integer(v.u);
        return set_or_oom(ctx->status, p->key, value);
}

static int read_counters(sd_bus_message *m, json_t *counters)
{
        const char *name;
        uint64_t value;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{st}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(m, "{st}", &name, &value)) > 0)
                if (set_or_oom(counters, name, json_from_u64(value)) < 0)
                        return -ENOMEM;
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static int query_properties(struct datd_bus *bus, json_t *status, uint64_t now)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = datd_bus_get_all_properties(bus, &reply);
        if (r < 0)
                return r;
        if (sd_bus_message_has_signature(reply, "a{sv}") <= 0)
                return datd_bus_bad_reply("reading datd's properties", reply, "a{sv}");
        r = datd_bus_read_array(reply, 'e', "sv", read_property,
                                &(struct read_properties_context) { .status = status, .now = now });
        if (r < 0)
                datctl_error("cannot read datd's properties: %s", strerror(-r));
        return r;
}

static int query_ias(struct datd_bus *bus, json_t *status)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(json_decrefp) json_t *ias = NULL;
        size_t i, up = 0;
        json_t *ia;
        int r;

        r = datd_bus_call(bus, list_view_ias.method, &reply);
        if (r < 0)
                return r;
        r = list_from_message(reply, &list_view_ias, &ias);
        if (r < 0)
                return r;
        json_array_foreach(ias, i, ia)
                if (strcmp(json_string_value(json_object_get(ia, "state")) ?: "", "up") == 0)
                        up++;
        if (set_or_oom(status, "n_ias", json_integer((json_int_t)json_array_size(ias))) < 0 ||
            set_or_oom(status, "n_ias_up", json_integer((json_int_t)up)) < 0)
                return -ENOMEM;
        return 0;
}

static int query_counters(struct datd_bus *bus, json_t *status)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = datd_bus_call(bus, "GetCounters", &reply);
        if (r < 0)
                return r;
        if (sd_bus_message_has_signature(reply, "a{st}") <= 0)
                return datd_bus_bad_reply("GetCounters()", reply, "a{st}");
        r = read_counters(reply, json_object_get(status, "counters"));
        if (r < 0)
                datctl_error("cannot read the reply to GetCounters(): %s", strerror(-r));
        return r;
}

int status_query(struct datd_bus *bus, uint64_t now, json_t **ret)
{
        _cleanup_(json_decrefp) json_t *status = NULL;
        int r;

        r = status_new(&status);
        if (r < 0) {
                datctl_error("out of memory");
                return r;
        }
        r = query_properties(bus, status, now);
        if (r < 0)
                return r;
        r = query_ias(bus, status);
        if (r < 0)
                return r;
        r = query_counters(bus, status);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(status);
        return 0;
}

static void print_line(const char *label, const char *value)
{
        _cleanup_free_ char *safe = text_escape(value ? value : "-");

        printf("%*s: %s\n", STATUS_LABEL_WIDTH, label, safe ? safe : "-");
}

static void print_integer(const char *label, json_t *value)
{
        char buf[32] = "-";

        if (json_is_integer(value))
                snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(value));
        print_line(label, buf);
}

/* Kept shm channels: "3 kept (1 spare)", "-" from a datd without them. */
static void print_channels(json_t *status)
{
        json_t *kept = json_object_get(status, "n_kept_channels");
        json_t *spare = json_object_get(status, "n_spare_channels");
        char buf[64] = "-";

        if (json_is_integer(kept) && json_is_integer(spare))
                snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT " kept (%" JSON_INTEGER_FORMAT
                         " spare)", json_integer_value(kept), json_integer_value(spare));
        print_line("Shm channels", buf);
}

static void print_started(json_t *status)
{
        char ts[FORMAT_TIMESTAMP_MAX], span[FORMAT_TIMESPAN_MAX], line[128];
        json_t *start = json_object_get(status, "start_timestamp_usec");

        if (!json_is_integer(start) || !format_timestamp(ts, (uint64_t)json_integer_value(start))) {
                print_line("Started", NULL);
                return;
        }
        format_timespan(span, (uint64_t)json_integer_value(json_object_get(status, "uptime_usec")));
        snprintf(line, sizeof(line), "%s (up %s)", ts, span);
        print_line("Started", line);
}

static void print_ias(json_t *status)
{
        json_t *n = json_object_get(status, "n_ias"), *up = json_object_get(status, "n_ias_up");
        char line[64];

        snprintf(line, sizeof(line), "%" JSON_INTEGER_FORMAT " (%" JSON_INTEGER_FORMAT " up)",
                 json_integer_value(n), json_integer_value(up));
        print_line("IAs", line);
}

/* Counter names in one column, values right-aligned in the next. */
static void print_counters(json_t *counters)
{
        int name_width = 0, value_width = 0;
        const char *name;
        json_t *value;
        bool first = true;

        json_object_foreach(counters, name, value) {
                char digits[32];
                int n = snprintf(digits, sizeof(digits), "%" JSON_INTEGER_FORMAT,
                                 json_integer_value(value));

                if ((int)strlen(name) > name_width)
                        name_width = (int)strlen(name);
                if (n > value_width)
                        value_width = n;
        }
        json_object_foreach(counters, name, value) {
                _cleanup_free_ char *safe = text_escape(name);

                printf("%*s %-*s %*" JSON_INTEGER_FORMAT "\n", STATUS_LABEL_WIDTH + 1,
                       first ? "Counters:" : "", name_width, safe ? safe : "?", value_width,
                       json_integer_value(value));
                first = false;
        }
}

int status_print(json_t *status)
{
        print_line("Version", json_string_value(json_object_get(status, "version")));
        print_started(status);
        print_line("Runtime dir", json_string_value(json_object_get(status, "runtime_directory")));
        print_line("Socket", json_string_value(json_object_get(status, "socket_path")));
        print_integer("Clients", json_object_get(status, "n_clients"));
        print_integer("Objects", json_object_get(status, "n_objects"));
        print_channels(status);
        print_ias(status);
        print_counters(json_object_get(status, "counters"));
        return ferror(stdout) ? -EIO : 0;
}

int status_show(struct datd_bus *bus, const struct datctl_output *o)
{
        _cleanup_(json_decrefp) json_t *status = NULL;
        int r;

        r = status_query(bus, now_realtime_usec(), &status);
        if (r < 0)
                return r;
        return o->json ? datctl_print_json(status) : status_print(status);
}
