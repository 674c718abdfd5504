/* datctl: the "X list" commands, described as data.  See datctl-list.h. */
#include <config.h>

#include "datctl-list.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "datctl-bus.h"
#include "datctl-format.h"
#include "datctl.h"

/* ListIAs() -> a(sssssu): name, transport, adapter, address, state ("up" or
 * "down") and open instances, as DBUS-API.md describes them. */
static const struct list_field ia_fields[] = {
        { "name", LIST_FIELD_STRING },
        { "transport", LIST_FIELD_STRING },
        { "adapter", LIST_FIELD_STRING },
        { "address", LIST_FIELD_STRING },
        { "state", LIST_FIELD_STRING },
        { "open", LIST_FIELD_U32 },
};

static const struct list_column ia_columns[] = {
        { "NAME", "name", LIST_CELL_TEXT, false },
        { "TRANSPORT", "transport", LIST_CELL_TEXT, false },
        { "ADAPTER", "adapter", LIST_CELL_TEXT, true },
        { "ADDRESS", "address", LIST_CELL_TEXT, true },
        { "STATE", "state", LIST_CELL_TEXT, false },
        { "OPEN", "open", LIST_CELL_NUMBER, false },
};

const struct list_view list_view_ias = {
        .method = "ListIAs",
        .fields = ia_fields,
        .n_fields = ARRAY_SIZE(ia_fields),
        .columns = ia_columns,
        .n_columns = ARRAY_SIZE(ia_columns),
        .noun = "IA",
        .nouns = "IAs",
};

/* ListClients() -> a(tuuusastuut), DBUS-API.md */
static const struct list_field client_fields[] = {
        { "id", LIST_FIELD_U64 },
        { "pid", LIST_FIELD_U32 },
        { "uid", LIST_FIELD_U32 },
        { "gid", LIST_FIELD_U32 },
        { "command", LIST_FIELD_STRING },
        { "ias", LIST_FIELD_STRINGS },
        { "connected_since", LIST_FIELD_TIMESTAMP },
        { "objects", LIST_FIELD_U32 },
        { "eps", LIST_FIELD_U32 },
        { "lmr_bytes", LIST_FIELD_U64 },
};

static const struct list_column client_columns[] = {
        { "ID", "id", LIST_CELL_NUMBER, false },
        { "PID", "pid", LIST_CELL_NUMBER, false },
        { "UID", "uid", LIST_CELL_NUMBER, false },
        { "USER", "uid", LIST_CELL_USER, true },
        { "GID", "gid", LIST_CELL_NUMBER, false },
        { "COMMAND", "command", LIST_CELL_TEXT, true },
        { "IAS", "ias", LIST_CELL_JOINED, true },
        { "EPS", "eps", LIST_CELL_NUMBER, false },
        { "LMR BYTES", "lmr_bytes", LIST_CELL_BYTES, false },
        { "SINCE", "connected_since", LIST_CELL_TIMESTAMP, false },
        { "AGE", "connected_since", LIST_CELL_AGE, false },
};

const struct list_view list_view_clients = {
        .method = "ListClients",
        .fields = client_fields,
        .n_fields = ARRAY_SIZE(client_fields),
        .columns = client_columns,
        .n_columns = ARRAY_SIZE(client_columns),
        .noun = "client",
        .nouns = "clients",
};

/* ListEndpoints() -> a(tussttsuuuuuu), DBUS-API.md */
static const struct list_field endpoint_fields[] = {
        { "client_id", LIST_FIELD_U64 },
        { "pid", LIST_FIELD_U32 },
        { "command", LIST_FIELD_STRING },
        { "ia", LIST_FIELD_STRING },
        { "handle", LIST_FIELD_HANDLE },
        { "pz_handle", LIST_FIELD_HANDLE },
        { "state", LIST_FIELD_STRING },
        { "max_recv_dtos", LIST_FIELD_U32 },
        { "max_request_dtos", LIST_FIELD_U32 },
        { "max_recv_iov", LIST_FIELD_U32 },
        { "max_request_iov", LIST_FIELD_U32 },
        { "max_message_size", LIST_FIELD_U32 },
        { "id", LIST_FIELD_U32 },
};

static const struct list_column endpoint_columns[] = {
        { "OWNER", "pid", LIST_CELL_OWNER, true, "command" },
        { "IA", "ia", LIST_CELL_TEXT, true },
        { "HANDLE", "handle", LIST_CELL_TEXT, false },
        { "STATE", "state", LIST_CELL_TEXT, false },
        { "PZ", "pz_handle", LIST_CELL_TEXT, false },
        { "RECV", "max_recv_dtos", LIST_CELL_NUMBER, false },
        { "REQUEST", "max_request_dtos", LIST_CELL_NUMBER, false },
        { "RECV-IOV", "max_recv_iov", LIST_CELL_NUMBER, false },
        { "REQ-IOV", "max_request_iov", LIST_CELL_NUMBER, false },
        { "MAX-MSG", "max_message_size", LIST_CELL_BYTES, false },
        { "ID", "id", LIST_CELL_NUMBER, false },
};

const struct list_view list_view_endpoints = {
        .method = "ListEndpoints",
        .fields = endpoint_fields,
        .n_fields = ARRAY_SIZE(endpoint_fields),
        .columns = endpoint_columns,
        .n_columns = ARRAY_SIZE(endpoint_columns),
        .noun = "endpoint",
        .nouns = "endpoints",
};

/* ListObjects() -> a(tusssttstuu), DBUS-API.md */
static const struct list_field object_fields[] = {
        { "client_id", LIST_FIELD_U64 },
        { "pid", LIST_FIELD_U32 },
        { "command", LIST_FIELD_STRING },
        { "ia", LIST_FIELD_STRING },
        { "kind", LIST_FIELD_STRING },
        { "handle", LIST_FIELD_HANDLE },
        { "pz_handle", LIST_FIELD_HANDLE },
        { "state", LIST_FIELD_STRING },
        { "length", LIST_FIELD_U64 },
        { "qlen", LIST_FIELD_U32 },
        { "id", LIST_FIELD_U32 },
};

static const struct list_column object_columns[] = {
        { "OWNER", "pid", LIST_CELL_OWNER, true, "command" },
        { "IA", "ia", LIST_CELL_TEXT, true },
        { "KIND", "kind", LIST_CELL_TEXT, false },
        { "HANDLE", "handle", LIST_CELL_TEXT, false },
        { "PZ", "pz_handle", LIST_CELL_TEXT, false },
        { "STATE", "state", LIST_CELL_TEXT, false },
        { "LENGTH", "length", LIST_CELL_BYTES, false, NULL, true },
        { "QLEN", "qlen", LIST_CELL_NUMBER, false, NULL, true },
        { "ID", "id", LIST_CELL_NUMBER, false },
};

const struct list_view list_view_objects = {
        .method = "ListObjects",
        .fields = object_fields,
        .n_fields = ARRAY_SIZE(object_fields),
        .columns = object_columns,
        .n_columns = ARRAY_SIZE(object_columns),
        .noun = "object",
        .nouns = "objects",
};

/* ListListeners() -> a(tussstutu), DBUS-API.md */
static const struct list_field listener_fields[] = {
        { "client_id", LIST_FIELD_U64 },
        { "pid", LIST_FIELD_U32 },
        { "command", LIST_FIELD_STRING },
        { "ia", LIST_FIELD_STRING },
        { "kind", LIST_FIELD_STRING },
        { "conn_qual", LIST_FIELD_U64 },
        { "pending", LIST_FIELD_U32 },
        { "accepted", LIST_FIELD_U64 },
        { "id", LIST_FIELD_U32 },
};

static const struct list_column listener_columns[] = {
        { "OWNER", "pid", LIST_CELL_OWNER, true, "command" },
        { "IA", "ia", LIST_CELL_TEXT, true },
        { "KIND", "kind", LIST_CELL_TEXT, false },
        { "CONN_QUAL", "conn_qual", LIST_CELL_NUMBER, false },
        { "PENDING", "pending", LIST_CELL_NUMBER, false },
        { "ACCEPTED", "accepted", LIST_CELL_NUMBER, false },
        { "ID", "id", LIST_CELL_NUMBER, false },
};

const struct list_view list_view_listeners = {
        .method = "ListListeners",
        .fields = listener_fields,
        .n_fields = ARRAY_SIZE(listener_fields),
        .columns = listener_columns,
        .n_columns = ARRAY_SIZE(listener_columns),
        .noun = "listener",
        .nouns = "listeners",
};

/* ListConnections() -> a(utussssststttu), DBUS-API.md */
static const struct list_field connection_fields[] = {
        { "id", LIST_FIELD_U32 },
        { "client_id", LIST_FIELD_U64 },
        { "pid", LIST_FIELD_U32 },
        { "command", LIST_FIELD_STRING },
        { "ia", LIST_FIELD_STRING },
        { "role", LIST_FIELD_STRING },
        { "local_address", LIST_FIELD_STRING },
        { "remote_address", LIST_FIELD_STRING },
        { "remote_conn_qual", LIST_FIELD_U64 },
        { "state", LIST_FIELD_STRING },
        { "age_usec", LIST_FIELD_U64 },
        { "bytes_sent", LIST_FIELD_U64 },
        { "bytes_received", LIST_FIELD_U64 },
        { "peer_pid", LIST_FIELD_U32 },
};

static const struct list_column connection_columns[] = {
        { "OWNER", "pid", LIST_CELL_OWNER, true, "command" },
        { "IA", "ia", LIST_CELL_TEXT, true },
        { "ROLE", "role", LIST_CELL_TEXT, false },
        { "LOCAL", "local_address", LIST_CELL_TEXT, true },
        { "REMOTE", "remote_address", LIST_CELL_TEXT, true },
        { "CONN_QUAL", "remote_conn_qual", LIST_CELL_NUMBER, false },
        { "PEER", "peer_pid", LIST_CELL_NUMBER, false, NULL, true },
        { "STATE", "state", LIST_CELL_TEXT, false },
        { "AGE", "age_usec", LIST_CELL_TIMESPAN, false },
        { "SENT", "bytes_sent", LIST_CELL_BYTES, false },
        { "RECEIVED", "bytes_received", LIST_CELL_BYTES, false },
        { "ID", "id", LIST_CELL_NUMBER, false },
};

const struct list_view list_view_connections = {
        .method = "ListConnections",
        .fields = connection_fields,
        .n_fields = ARRAY_SIZE(connection_fields),
        .columns = connection_columns,
        .n_columns = ARRAY_SIZE(connection_columns),
        .noun = "connection",
        .nouns = "connections",
};

static const char *list_field_signature(enum list_field_type type)
{
        switch (type) {
        case LIST_FIELD_STRING:
                return "s";
        case LIST_FIELD_U32:
                return "u";
        case LIST_FIELD_U64:
        case LIST_FIELD_TIMESTAMP:
        case LIST_FIELD_HANDLE:
                return "t";
        case LIST_FIELD_STRINGS:
                return "as";
        }
        return "";
}

/* The struct's contents, "sssssu", or with brackets the whole reply. */
static char *list_struct_signature(const struct list_view *v, bool whole)
{
        size_t len = 0;
        char *sig, *p;

        for (size_t i = 0; i < v->n_fields; i++)
                len += strlen(list_field_signature(v->fields[i].type));
        sig = malloc(len + sizeof("a()"));
        if (!sig)
                return NULL;
        p = whole ? stpcpy(sig, "a(") : sig;
        for (size_t i = 0; i < v->n_fields; i++)
                p = stpcpy(p, list_field_signature(v->fields[i].type));
        strcpy(p, whole ? ")" : "");
        return sig;
}

char *list_signature(const struct list_view *v)
{
        return list_struct_signature(v, true);
}

static int read_strings(sd_bus_message *m, json_t **ret)
{
        _cleanup_(json_decrefp) json_t *array = json_array();
        const char *s;
        int r;

        if (!array)
                return -ENOMEM;
        r = sd_bus_message_enter_container(m, 'a', "s");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(m, "s", &s)) > 0)
                if (json_array_append_new(array, json_string(s)) < 0)
                        return -ENOMEM;
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(array);
        return 0;
}

/* A timestamp goes out twice: readable, and exact for programs. */
static int set_timestamp(json_t *object, const char *key, uint64_t usec)
{
        char buf[FORMAT_TIMESTAMP_MAX], usec_key[128];
        const char *iso = format_timestamp_iso8601(buf, usec);

        snprintf(usec_key, sizeof(usec_key), "%s_usec", key);
        if (json_object_set_new(object, key, iso ? json_string(iso) : json_null()) < 0 ||
            json_object_set_new(object, usec_key, json_from_u64(usec)) < 0)
                return -ENOMEM;
        return 0;
}

static int read_field(sd_bus_message *m, const struct list_field *f, json_t *object)
{
        json_t *value = NULL;
        const char *s;
        uint32_t u;
        uint64_t t;
        int r;

        switch (f->type) {
        case LIST_FIELD_STRING:
                r = sd_bus_message_read(m, "s", &s);
                if (r > 0)
                        value = json_string(s);
                break;
        case LIST_FIELD_U32:
                r = sd_bus_message_read(m, "u", &u);
                if (r > 0)
                        value = json_integer(u);
                break;
        case LIST_FIELD_U64:
                r = sd_bus_message_read(m, "t", &t);
                if (r > 0)
                        value = json_from_u64(t);
                break;
        case LIST_FIELD_TIMESTAMP:
                r = sd_bus_message_read(m, "t", &t);
                if (r < 0)
                        return r;
                return set_timestamp(object, f->key, t);
        case LIST_FIELD_STRINGS:
                r = read_strings(m, &value);
                if (r == 0)
                        r = 1;
                break;
        case LIST_FIELD_HANDLE:
                r = sd_bus_message_read(m, "t", &t);
                if (r > 0)
                        value = t ? json_sprintf("0x%" PRIx64, t) : json_null();
                break;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return r;
        if (r == 0)
                return -EBADMSG;
        /* json_object_set_new() owns value from here on, even when it fails. */
        if (!value || json_object_set_new(object, f->key, value) < 0)
                return -ENOMEM;
        return 0;
}

struct read_rows_context {
        const struct list_view *view;
        json_t *rows;
};

static int read_row(sd_bus_message *m, void *userdata)
{
        struct read_rows_context *ctx = userdata;
        json_t *row = json_object();
        int r;

        if (!row || json_array_append_new(ctx->rows, row) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < ctx->view->n_fields; i++) {
                r = read_field(m, &ctx->view->fields[i], row);
                if (r < 0)
                        return r;
        }
        return 0;
}

int list_from_message(sd_bus_message *reply, const struct list_view *v, json_t **ret)
{
        _cleanup_free_ char *signature = list_struct_signature(v, true);
        _cleanup_free_ char *contents = list_struct_signature(v, false);
        _cleanup_(json_decrefp) json_t *rows = json_array();
        char what[128];
        int r;

        if (!signature || !contents || !rows) {
                datctl_error("out of memory");
                return -ENOMEM;
        }
        snprintf(what, sizeof(what), "%s()", v->method);
        if (sd_bus_message_has_signature(reply, signature) <= 0)
                return datd_bus_bad_reply(what, reply, signature);
        r = datd_bus_read_array(reply, 'r', contents, read_row,
                                &(struct read_rows_context) { .view = v, .rows = rows });
        if (r < 0) {
                datctl_error("cannot read the reply to %s: %s", what, strerror(-r));
                return r;
        }
        *ret = TAKE_PTR(rows);
        return 0;
}

static int add_joined(struct table *t, json_t *array)
{
        _cleanup_free_ char *joined = NULL;
        size_t len = 0, i;
        json_t *item;

        json_array_foreach(array, i, item)
                len += strlen(json_string_value(item) ?: "") + 1;
        joined = calloc(1, len + 1);
        if (!joined)
                return -ENOMEM;
        json_array_foreach(array, i, item) {
                if (i > 0)
                        strcat(joined, ",");
                strcat(joined, json_string_value(item) ?: "");
        }
        return table_add(t, joined);
}

static uint64_t timestamp_usec(json_t *row, const char *key)
{
        char usec_key[128];

        snprintf(usec_key, sizeof(usec_key), "%s_usec", key);
        return (uint64_t)json_integer_value(json_object_get(row, usec_key));
}

static int add_cell(struct table *t, const struct list_column *c, json_t *row, uint64_t now)
{
        json_t *value = json_object_get(row, c->key);
        char buf[FORMAT_TIMESTAMP_MAX + FORMAT_USER_MAX];

        if (c->blank_zero && json_is_integer(value) && json_integer_value(value) == 0)
                return table_add(t, NULL);
        switch (c->cell) {
        case LIST_CELL_TEXT:
                return table_add(t, json_string_value(value));
        case LIST_CELL_NUMBER:
                return table_addf(t, "%" JSON_INTEGER_FORMAT, json_integer_value(value));
        case LIST_CELL_BYTES:
                return table_add(t, format_bytes(buf, (uint64_t)json_integer_value(value)));
        case LIST_CELL_OWNER:
                return table_addf(t, "%" JSON_INTEGER_FORMAT "/%s", json_integer_value(value),
                                  json_string_value(json_object_get(row, c->key2)) ?: "");
        case LIST_CELL_USER:
                return table_add(t, format_user(buf, (uid_t)json_integer_value(value)));
        case LIST_CELL_JOINED:
                return add_joined(t, value);
        case LIST_CELL_TIMESTAMP:
                return table_add(t, format_timestamp(buf, timestamp_usec(row, c->key)));
        case LIST_CELL_AGE:
                return table_add(t, format_age(buf, timestamp_usec(row, c->key), now));
        case LIST_CELL_TIMESPAN:
                return table_add(t, format_timespan(buf, (uint64_t)json_integer_value(value)));
        }
        return -EINVAL;
}

int list_to_table(json_t *rows, const struct list_view *v, uint64_t now, struct table **ret)
{
        _cleanup_(table_freep) struct table *t = NULL;
        _cleanup_free_ struct table_column *columns = calloc(v->n_columns, sizeof(*columns));
        size_t i;
        json_t *row;

        if (!columns)
                return -ENOMEM;
        for (size_t c = 0; c < v->n_columns; c++)
                columns[c] = (struct table_column) {
                        .header = v->columns[c].header,
                        .align_right = v->columns[c].cell == LIST_CELL_NUMBER ||
                                       v->columns[c].cell == LIST_CELL_BYTES,
                        .may_shrink = v->columns[c].may_shrink,
                };
        t = table_new(columns, v->n_columns);
        if (!t)
                return -ENOMEM;
        json_array_foreach(rows, i, row)
                for (size_t c = 0; c < v->n_columns; c++) {
                        int r = add_cell(t, &v->columns[c], row, now);

                        if (r < 0)
                                return r;
                }
        *ret = TAKE_PTR(t);
        return 0;
}

static int print_table(json_t *rows, const struct list_view *v, const struct datctl_output *o)
{
        _cleanup_(table_freep) struct table *t = NULL;
        size_t n = json_array_size(rows);
        int r;

        r = list_to_table(rows, v, now_realtime_usec(), &t);
        if (r < 0) {
                datctl_error("out of memory");
                return r;
        }
        r = table_print(t, stdout, &(struct table_print_options) {
                .header = o->legend,
                .max_width = o->width,
        });
        if (r >= 0 && o->legend)
                r = printf("\n%zu %s listed.\n", n, n == 1 ? v->noun : v->nouns) < 0 ? -EIO : 0;
        return r;
}

int list_show(struct datd_bus *bus, const struct list_view *v, const struct datctl_output *o)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(json_decrefp) json_t *rows = NULL;
        int r;

        r = datd_bus_call(bus, v->method, &reply);
        if (r < 0)
                return r;
        r = list_from_message(reply, v, &rows);
        if (r < 0)
                return r;
        if (o->json)
                return datctl_print_json(rows);
        return print_table(rows, v, o);
}
