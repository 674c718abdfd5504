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
#include "datctl-json.h"
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

/* ListConnections() -> a(utussssststttut), DBUS-API.md; a datd from before
 * the shm data channel sends no shm_bytes (a(utussssststttu)). */
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
        { "shm_bytes", LIST_FIELD_U64 },
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
        { "SHM", "shm_bytes", LIST_CELL_BYTES, false, NULL, true },
        { "ID", "id", LIST_CELL_NUMBER, false },
};

const struct list_view list_view_connections = {
        .method = "ListConnections",
        .fields = connection_fields,
        .n_fields = ARRAY_SIZE(connection_fields),
        .n_fields_required = ARRAY_SIZE(connection_fields) - 1,
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

/* The struct's first n fields, "sssssu", or with brackets the whole reply. */
static char *list_struct_signature(const struct list_view *v, size_t n, bool whole)
{
        size_t len = 0;
        char *sig, *p;

        for (size_t i = 0; i < n; i++)
                len += strlen(list_field_signature(v->fields[i].type));
        sig = malloc(len + sizeof("a()"));
        if (!sig)
                return NULL;
        p = whole ? stpcpy(sig, "a(") : sig;
        for (size_t i = 0; i < n; i++)
                p = stpcpy(p, list_field_signature(v->fields[i].type));
        strcpy(p, whole ? ")" : "");
        return sig;
}

char *list_signature(const struct list_view *v)
{
        return list_struct_signature(v, v->n_fields, true);
}

char *list_signature_n(const struct list_view *v, size_t n_fields)
{
        return list_struct_signature(v, n_fields, true);
}

/* ---- reading a reply, one row at a time ------------------------------------ */

/* One field of one row.  Strings point into the message (or into the JSON
 * rows list_to_table() is given), which outlives the row. */
struct list_value {
        uint64_t u;                     /* U32, U64, TIMESTAMP (µs), HANDLE */
        const char *s;                  /* STRING; NULL: absent */
        const char **strv;              /* STRINGS */
        size_t n_strv, cap_strv;
};

struct list_row {
        const struct list_view *view;
        size_t n_fields;                /* the fields this reply has */
        struct list_value v[LIST_FIELDS_MAX];
};

static void list_row_init(struct list_row *row, const struct list_view *v, size_t n_fields)
{
        memset(row, 0, sizeof(*row));
        row->view = v;
        row->n_fields = n_fields;
}

static void list_row_done(struct list_row *row)
{
        for (size_t i = 0; i < LIST_FIELDS_MAX; i++)
                free(row->v[i].strv);
}

static int list_value_add_string(struct list_value *value, const char *s)
{
        if (value->n_strv == value->cap_strv) {
                size_t cap = value->cap_strv ? value->cap_strv * 2 : 4;
                const char **strv = reallocarray(value->strv, cap, sizeof(*strv));

                if (!strv)
                        return -ENOMEM;
                value->strv = strv;
                value->cap_strv = cap;
        }
        value->strv[value->n_strv++] = s;
        return 0;
}

static int read_strings(sd_bus_message *m, struct list_value *value)
{
        const char *s;
        int r;

        value->n_strv = 0;
        r = sd_bus_message_enter_container(m, 'a', "s");
        if (r <= 0)
                return r < 0 ? r : -EBADMSG;
        while ((r = sd_bus_message_read_basic(m, 's', &s)) > 0) {
                r = list_value_add_string(value, s);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static int read_field(sd_bus_message *m, enum list_field_type type, struct list_value *value)
{
        uint32_t u32;
        int r;

        switch (type) {
        case LIST_FIELD_STRING:
                r = sd_bus_message_read_basic(m, 's', &value->s);
                break;
        case LIST_FIELD_U32:
                r = sd_bus_message_read_basic(m, 'u', &u32);
                value->u = u32;
                break;
        case LIST_FIELD_U64:
        case LIST_FIELD_TIMESTAMP:
        case LIST_FIELD_HANDLE:
                r = sd_bus_message_read_basic(m, 't', &value->u);
                break;
        case LIST_FIELD_STRINGS:
                r = read_strings(m, value);
                return r < 0 ? r : 0;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return r;
        return r == 0 ? -EBADMSG : 0;
}

struct list_reader {
        struct list_row row;
        int (*emit)(struct list_reader *rd);
        size_t n_rows;
        /* what the rows go to */
        struct json_writer *json;
        struct table *table;
        const size_t *column_fields;    /* per column: the field it shows, SIZE_MAX: hidden */
        const size_t *column_fields2;   /* per column: key2's field */
        uint64_t now;
        json_t *rows;
};

static int read_row(sd_bus_message *m, void *userdata)
{
        struct list_reader *rd = userdata;
        int r;

        for (size_t i = 0; i < rd->row.n_fields; i++) {
                r = read_field(m, rd->row.view->fields[i].type, &rd->row.v[i]);
                if (r < 0)
                        return r;
        }
        r = rd->emit(rd);
        if (r < 0)
                return r;
        rd->n_rows++;
        return 0;
}

/* How many of the view's fields the reply has; reports a reply of another
 * type. */
static int list_reply_fields(sd_bus_message *reply, const struct list_view *v, size_t *ret)
{
        size_t min = v->n_fields_required ? v->n_fields_required : v->n_fields;
        _cleanup_free_ char *expected = NULL;
        char what[128];

        for (size_t n = v->n_fields; n >= min && n > 0; n--) {
                _cleanup_free_ char *sig = list_struct_signature(v, n, true);

                if (!sig) {
                        datctl_error("out of memory");
                        return -ENOMEM;
                }
                if (sd_bus_message_has_signature(reply, sig) > 0) {
                        *ret = n;
                        return 0;
                }
        }
        snprintf(what, sizeof(what), "%s()", v->method);
        expected = list_signature(v);
        return datd_bus_bad_reply(what, reply, expected ? expected : "?");
}

/* Reads every row of the reply into rd->row, calling rd->emit on each. */
static int list_read(sd_bus_message *reply, const struct list_view *v, size_t n_fields,
                     struct list_reader *rd)
{
        _cleanup_free_ char *contents = list_struct_signature(v, n_fields, false);
        int r;

        if (!contents) {
                datctl_error("out of memory");
                return -ENOMEM;
        }
        r = datd_bus_read_array(reply, 'r', contents, read_row, rd);
        if (r < 0)
                datctl_error("cannot read the reply to %s(): %s", v->method, strerror(-r));
        return r;
}

static uint64_t clamp_u64(uint64_t u)
{
        /* As jansson holds it: a signed 64-bit integer. */
        return u > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : u;
}

/* ---- JSON, streamed ------------------------------------------------------------ */

static void json_write_timestamp(struct json_writer *w, const char *key, uint64_t usec)
{
        char buf[FORMAT_TIMESTAMP_MAX];
        const char *iso = format_timestamp_iso8601(buf, usec);

        if (iso)
                json_write_string(w, iso);
        else
                json_write_raw(w, "null", 4);
        /* A timestamp goes out twice: readable, and exact for programs. */
        json_write_raw(w, ",", 1);
        json_write_newline(w, 2);
        json_write_raw(w, "\"", 1);
        json_write_raw(w, key, strlen(key));
        json_write_raw(w, "_usec\": ", 8);
        json_write_u64(w, usec);
}

static int emit_json(struct list_reader *rd)
{
        const struct list_row *row = &rd->row;
        struct json_writer *w = rd->json;
        char buf[32];

        json_write_raw(w, rd->n_rows ? "," : "[", 1);
        json_write_newline(w, 1);
        json_write_raw(w, "{", 1);
        for (size_t i = 0; i < row->n_fields; i++) {
                const struct list_field *f = &row->view->fields[i];
                const struct list_value *value = &row->v[i];

                if (i > 0)
                        json_write_raw(w, ",", 1);
                json_write_newline(w, 2);
                json_write_key(w, f->key);
                switch (f->type) {
                case LIST_FIELD_STRING:
                        json_write_string(w, value->s);
                        break;
                case LIST_FIELD_U32:
                case LIST_FIELD_U64:
                        json_write_u64(w, value->u);
                        break;
                case LIST_FIELD_TIMESTAMP:
                        json_write_timestamp(w, f->key, value->u);
                        break;
                case LIST_FIELD_STRINGS:
                        if (value->n_strv == 0) {
                                json_write_raw(w, "[]", 2);
                                break;
                        }
                        json_write_raw(w, "[", 1);
                        for (size_t k = 0; k < value->n_strv; k++) {
                                if (k > 0)
                                        json_write_raw(w, ",", 1);
                                json_write_newline(w, 3);
                                json_write_string(w, value->strv[k]);
                        }
                        json_write_newline(w, 2);
                        json_write_raw(w, "]", 1);
                        break;
                case LIST_FIELD_HANDLE:
                        if (value->u) {
                                snprintf(buf, sizeof(buf), "0x%" PRIx64, value->u);
                                json_write_string(w, buf);
                        } else {
                                json_write_raw(w, "null", 4);
                        }
                        break;
                }
        }
        json_write_newline(w, 1);
        json_write_raw(w, "}", 1);
        return w->failed ? -EIO : 0;
}

int list_write_json(sd_bus_message *reply, const struct list_view *v, FILE *f, size_t *n_rows)
{
        struct json_writer w;
        struct list_reader rd = { .emit = emit_json, .json = &w };
        size_t n_fields;
        int r, r2;

        r = list_reply_fields(reply, v, &n_fields);
        if (r < 0)
                return r;
        if (json_writer_init(&w, f) < 0) {
                datctl_error("out of memory");
                return -ENOMEM;
        }
        list_row_init(&rd.row, v, n_fields);
        r = list_read(reply, v, n_fields, &rd);
        list_row_done(&rd.row);
        if (r >= 0) {
                if (rd.n_rows > 0) {
                        json_write_newline(&w, 0);
                        json_write_raw(&w, "]\n", 2);
                } else {
                        json_write_raw(&w, "[]\n", 3);
                }
        }
        r2 = json_writer_finish(&w);
        if (r >= 0 && r2 < 0) {
                datctl_error("cannot write the output: %s", strerror(-r2));
                r = r2;
        }
        if (n_rows)
                *n_rows = rd.n_rows;
        return r < 0 ? r : 0;
}

/* ---- JSON, as a tree -------------------------------------------------------------- */

static int set_new(json_t *object, const char *key, json_t *value)
{
        /* json_object_set_new() owns value from here on, even when it fails. */
        return !value || json_object_set_new(object, key, value) < 0 ? -ENOMEM : 0;
}

static json_t *json_from_value(const struct list_field *f, const struct list_value *value)
{
        json_t *array;

        switch (f->type) {
        case LIST_FIELD_STRING:
                return json_string(value->s);
        case LIST_FIELD_U32:
        case LIST_FIELD_U64:
        case LIST_FIELD_TIMESTAMP:
                return json_from_u64(value->u);
        case LIST_FIELD_HANDLE:
                return value->u ? json_sprintf("0x%" PRIx64, value->u) : json_null();
        case LIST_FIELD_STRINGS:
                array = json_array();
                for (size_t k = 0; array && k < value->n_strv; k++)
                        if (json_array_append_new(array, json_string(value->strv[k])) < 0) {
                                json_decref(array);
                                return NULL;
                        }
                return array;
        }
        return NULL;
}

static int emit_tree(struct list_reader *rd)
{
        const struct list_row *row = &rd->row;
        json_t *object = json_object();

        if (!object || json_array_append_new(rd->rows, object) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < row->n_fields; i++) {
                const struct list_field *f = &row->view->fields[i];
                char buf[FORMAT_TIMESTAMP_MAX], usec_key[128];
                const char *iso;
                int r;

                if (f->type == LIST_FIELD_TIMESTAMP) {
                        iso = format_timestamp_iso8601(buf, row->v[i].u);
                        snprintf(usec_key, sizeof(usec_key), "%s_usec", f->key);
                        r = set_new(object, f->key, iso ? json_string(iso) : json_null());
                        if (r >= 0)
                                r = set_new(object, usec_key, json_from_u64(row->v[i].u));
                } else {
                        r = set_new(object, f->key, json_from_value(f, &row->v[i]));
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

int list_from_message(sd_bus_message *reply, const struct list_view *v, json_t **ret)
{
        _cleanup_(json_decrefp) json_t *rows = json_array();
        struct list_reader rd = { .emit = emit_tree, .rows = rows };
        size_t n_fields;
        int r;

        if (!rows) {
                datctl_error("out of memory");
                return -ENOMEM;
        }
        r = list_reply_fields(reply, v, &n_fields);
        if (r < 0)
                return r;
        list_row_init(&rd.row, v, n_fields);
        r = list_read(reply, v, n_fields, &rd);
        list_row_done(&rd.row);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(rows);
        return 0;
}

/* ---- the table ----------------------------------------------------------------------- */

static size_t field_index(const struct list_view *v, const char *key)
{
        for (size_t i = 0; key && i < v->n_fields; i++)
                if (strcmp(v->fields[i].key, key) == 0)
                        return i;
        return SIZE_MAX;
}

/* Which field each column shows (SIZE_MAX: a column this reply cannot
 * fill, left out), and the table with the columns that stay. */
static int table_for(const struct list_view *v, size_t n_fields, size_t *fields, size_t *fields2,
                     struct table **ret)
{
        _cleanup_free_ struct table_column *columns = calloc(v->n_columns, sizeof(*columns));
        size_t n = 0;

        if (!columns)
                return -ENOMEM;
        for (size_t c = 0; c < v->n_columns; c++) {
                size_t f = field_index(v, v->columns[c].key);
                size_t f2 = field_index(v, v->columns[c].key2);

                if (f >= n_fields || (v->columns[c].key2 && f2 >= n_fields)) {
                        fields[c] = SIZE_MAX;
                        continue;
                }
                fields[c] = f;
                fields2[c] = f2;
                columns[n++] = (struct table_column) {
                        .header = v->columns[c].header,
                        .align_right = v->columns[c].cell == LIST_CELL_NUMBER ||
                                       v->columns[c].cell == LIST_CELL_BYTES,
                        .may_shrink = v->columns[c].may_shrink,
                };
        }
        *ret = table_new(columns, n);
        return *ret ? 0 : -ENOMEM;
}

static int add_joined(struct table *t, const struct list_value *value)
{
        _cleanup_free_ char *joined = NULL;
        size_t len = 1;
        char *p;

        for (size_t i = 0; i < value->n_strv; i++)
                len += strlen(value->strv[i] ?: "") + 1;
        joined = malloc(len);
        if (!joined)
                return -ENOMEM;
        p = joined;
        *p = '\0';
        for (size_t i = 0; i < value->n_strv; i++) {
                if (i > 0)
                        p = stpcpy(p, ",");
                p = stpcpy(p, value->strv[i] ?: "");
        }
        return table_add(t, joined);
}

static int add_cell(struct table *t, const struct list_column *c, const struct list_row *row,
                    size_t f, size_t f2, uint64_t now)
{
        const struct list_value *value = &row->v[f];
        enum list_field_type type = row->view->fields[f].type;
        char buf[FORMAT_TIMESTAMP_MAX + FORMAT_USER_MAX];
        uint64_t u = clamp_u64(value->u);

        if (c->blank_zero && (type == LIST_FIELD_U32 || type == LIST_FIELD_U64) && u == 0)
                return table_add(t, NULL);
        switch (c->cell) {
        case LIST_CELL_TEXT:
                if (type == LIST_FIELD_HANDLE) {
                        if (!value->u)
                                return table_add(t, NULL);
                        snprintf(buf, sizeof(buf), "0x%" PRIx64, value->u);
                        return table_add(t, buf);
                }
                return table_add(t, value->s);
        case LIST_CELL_NUMBER:
                snprintf(buf, sizeof(buf), "%" PRIu64, u);
                return table_add(t, buf);
        case LIST_CELL_BYTES:
                return table_add(t, format_bytes(buf, u));
        case LIST_CELL_OWNER:
                return table_addf(t, "%" PRIu64 "/%s", u, row->v[f2].s ?: "");
        case LIST_CELL_USER:
                return table_add(t, format_user(buf, (uid_t)u));
        case LIST_CELL_JOINED:
                return add_joined(t, value);
        case LIST_CELL_TIMESTAMP:
                return table_add(t, format_timestamp(buf, u));
        case LIST_CELL_AGE:
                return table_add(t, format_age(buf, u, now));
        case LIST_CELL_TIMESPAN:
                return table_add(t, format_timespan(buf, u));
        }
        return -EINVAL;
}

static int emit_table(struct list_reader *rd)
{
        const struct list_view *v = rd->row.view;

        for (size_t c = 0; c < v->n_columns; c++) {
                int r;

                if (rd->column_fields[c] == SIZE_MAX)
                        continue;
                r = add_cell(rd->table, &v->columns[c], &rd->row, rd->column_fields[c],
                             rd->column_fields2[c], rd->now);
                if (r < 0)
                        return r;
        }
        return 0;
}

int list_table_from_message(sd_bus_message *reply, const struct list_view *v, uint64_t now,
                            struct table **ret)
{
        _cleanup_(table_freep) struct table *t = NULL;
        size_t fields[LIST_FIELDS_MAX * 2], fields2[LIST_FIELDS_MAX * 2], n_fields;
        struct list_reader rd = { .emit = emit_table, .column_fields = fields,
                                  .column_fields2 = fields2, .now = now };
        int r;

        if (v->n_columns > ARRAY_SIZE(fields))
                return -EINVAL;
        r = list_reply_fields(reply, v, &n_fields);
        if (r < 0)
                return r;
        r = table_for(v, n_fields, fields, fields2, &t);
        if (r < 0) {
                datctl_error("out of memory");
                return r;
        }
        rd.table = t;
        list_row_init(&rd.row, v, n_fields);
        r = list_read(reply, v, n_fields, &rd);
        list_row_done(&rd.row);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

/* A row of list_from_message()'s shape back into values. */
static int row_from_json(json_t *object, struct list_row *row)
{
        for (size_t i = 0; i < row->n_fields; i++) {
                const struct list_field *f = &row->view->fields[i];
                struct list_value *value = &row->v[i];
                char usec_key[128];
                json_t *j = json_object_get(object, f->key), *item;
                size_t k;
                int r;

                value->s = NULL;
                value->u = 0;
                value->n_strv = 0;
                switch (f->type) {
                case LIST_FIELD_STRING:
                        value->s = json_string_value(j);
                        break;
                case LIST_FIELD_U32:
                case LIST_FIELD_U64:
                        value->u = (uint64_t)json_integer_value(j);
                        break;
                case LIST_FIELD_TIMESTAMP:
                        snprintf(usec_key, sizeof(usec_key), "%s_usec", f->key);
                        value->u = (uint64_t)json_integer_value(json_object_get(object, usec_key));
                        break;
                case LIST_FIELD_HANDLE:
                        if (json_is_string(j))
                                value->u = strtoull(json_string_value(j), NULL, 16);
                        break;
                case LIST_FIELD_STRINGS:
                        json_array_foreach(j, k, item) {
                                r = list_value_add_string(value, json_string_value(item));
                                if (r < 0)
                                        return r;
                        }
                        break;
                }
        }
        return 0;
}

int list_to_table(json_t *rows, const struct list_view *v, uint64_t now, struct table **ret)
{
        _cleanup_(table_freep) struct table *t = NULL;
        size_t fields[LIST_FIELDS_MAX * 2], fields2[LIST_FIELDS_MAX * 2];
        size_t n_fields = v->n_fields, min = v->n_fields_required ?: v->n_fields, i;
        struct list_reader rd = { .emit = emit_table, .column_fields = fields,
                                  .column_fields2 = fields2, .now = now };
        json_t *first = json_array_get(rows, 0), *row;
        int r = 0;

        if (v->n_columns > ARRAY_SIZE(fields))
                return -EINVAL;
        /* The optional fields count as present when the first row has them. */
        while (first && n_fields > min && !json_object_get(first, v->fields[n_fields - 1].key))
                n_fields--;
        r = table_for(v, n_fields, fields, fields2, &t);
        if (r < 0)
                return r;
        rd.table = t;
        list_row_init(&rd.row, v, n_fields);
        json_array_foreach(rows, i, row) {
                r = row_from_json(row, &rd.row);
                if (r >= 0)
                        r = emit_table(&rd);
                if (r < 0)
                        break;
        }
        list_row_done(&rd.row);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

static int print_table(sd_bus_message *reply, const struct list_view *v,
                       const struct datctl_output *o)
{
        _cleanup_(table_freep) struct table *t = NULL;
        size_t n;
        int r;

        r = list_table_from_message(reply, v, now_realtime_usec(), &t);
        if (r < 0)
                return r;
        n = table_n_rows(t);
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
        int r;

        r = datd_bus_call(bus, v->method, &reply);
        if (r < 0)
                return r;
        if (o->json)
                return list_write_json(reply, v, stdout, NULL);
        return print_table(reply, v, o);
}
