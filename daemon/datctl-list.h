/* datctl: the "X list" commands, described as data.
 *
 * Every List*() method of datd returns an array of structs.  A list_view
 * names the method, the struct's fields (their D-Bus types and JSON keys,
 * which are the field names of DBUS-API.md in lower_snake_case) and the
 * columns people see.  Each struct of the reply is read once into a row of
 * values, which goes straight out as JSON (--json: written as it is read,
 * never built as a tree, so 100 000 endpoints take a fraction of a second)
 * or into the table; both are drawn from the same row, so they always show
 * the same data.  A new list command is a new list_view.
 *
 * Fields may be added to a method at the end of its struct: a view's fields
 * past n_fields_required are optional, a reply without them is accepted,
 * and then their JSON keys and the columns that show them are left out. */
#ifndef DATD_DAEMON_DATCTL_LIST_H
#define DATD_DAEMON_DATCTL_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <systemd/sd-bus.h>

#include "datctl-table.h"

enum list_field_type {
        LIST_FIELD_STRING,      /* s */
        LIST_FIELD_U32,         /* u */
        LIST_FIELD_U64,         /* t */
        LIST_FIELD_TIMESTAMP,   /* t, CLOCK_REALTIME µs, 0 = never; JSON: KEY as an
                                 * ISO 8601 UTC string (null for 0) and KEY_usec */
        LIST_FIELD_STRINGS,     /* as */
        LIST_FIELD_HANDLE,      /* t, a DAT handle; JSON: "0x7f..." (exact, unlike
                                 * a JSON number), null for 0 (DAT_HANDLE_NULL) */
};

struct list_field {
        const char *key;
        enum list_field_type type;
};

enum list_cell {
        LIST_CELL_TEXT,         /* a string field */
        LIST_CELL_NUMBER,       /* an integer field, right-aligned */
        LIST_CELL_USER,         /* the user name of a UID field, "-" if it has none */
        LIST_CELL_JOINED,       /* a string array, comma-separated */
        LIST_CELL_TIMESTAMP,    /* a timestamp field: "2026-11-22 06:12:01 UTC" */
        LIST_CELL_AGE,          /* a timestamp field, as its age: "3min 12s" */
        LIST_CELL_BYTES,        /* an integer field of bytes: "512B", "1.5M", right-aligned */
        LIST_CELL_OWNER,        /* a process: PID field key, command field key2: "4242/mpirun" */
        LIST_CELL_TIMESPAN,     /* an integer field of µs, as a span: "3min 12s" */
};

struct list_column {
        const char *header;
        const char *key;        /* the field shown */
        enum list_cell cell;
        bool may_shrink;        /* long free text that may be cut on a terminal */
        const char *key2;       /* LIST_CELL_OWNER: the command */
        bool blank_zero;        /* numbers: 0 shows as "-" (a field its kind has not) */
};

#define LIST_FIELDS_MAX 32

struct list_view {
        const char *method;     /* on org.datd.Datd1.Manager, no arguments */
        const struct list_field *fields;
        size_t n_fields;        /* at most LIST_FIELDS_MAX */
        size_t n_fields_required;       /* 0: all of them */
        const struct list_column *columns;
        size_t n_columns;
        const char *noun;       /* legend: "1 IA listed." */
        const char *nouns;      /* legend: "2 IAs listed." */
};

/* The list commands datctl has: "ia list", "client list", "ep list",
 * "object list". */
extern const struct list_view list_view_ias;
extern const struct list_view list_view_clients;
extern const struct list_view list_view_endpoints;
extern const struct list_view list_view_objects;
extern const struct list_view list_view_listeners;
extern const struct list_view list_view_connections;

/* The D-Bus type of the method's reply with every field, "a(ssssuu)";
 * malloc'd. */
char *list_signature(const struct list_view *v);

/* The same with only the first n_fields fields. */
char *list_signature_n(const struct list_view *v, size_t n_fields);

/* Converts a List*() reply into a JSON array of objects (for short lists
 * that other output is built from, like the IAs of `datctl status`).
 * Reports a reply of the wrong type itself.  Returns 0 or -errno. */
int list_from_message(sd_bus_message *reply, const struct list_view *v, json_t **ret);

/* Writes a List*() reply as --json prints it (what json_dumpf() would print
 * for list_from_message()'s array, JSON_INDENT(2) | JSON_PRESERVE_ORDER,
 * and a newline), row by row as it is read.  *n_rows: how many.  Reports
 * a reply of the wrong type itself.  Returns 0 or -errno. */
int list_write_json(sd_bus_message *reply, const struct list_view *v, FILE *f, size_t *n_rows);

/* Reads a List*() reply into a table; now (CLOCK_REALTIME µs) is what ages
 * are measured against.  Reports failures itself.  Returns 0 or -errno. */
int list_table_from_message(sd_bus_message *reply, const struct list_view *v, uint64_t now,
                            struct table **ret);

/* Draws rows shaped like list_from_message()'s as a table (an optional
 * field counts as present when the first row has it).  Returns 0 or
 * -ENOMEM. */
int list_to_table(json_t *rows, const struct list_view *v, uint64_t now, struct table **ret);

struct datd_bus;
struct datctl_output;

/* The whole command: calls the method, prints JSON or the table and its
 * legend ("2 IAs listed.").  Returns 0 or -errno, reported. */
int list_show(struct datd_bus *bus, const struct list_view *v, const struct datctl_output *o);

#endif
