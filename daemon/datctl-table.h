/* datctl: aligned tables for people, like `systemctl list-units`.
 *
 * A table has a fixed set of columns and is filled cell by cell, row after
 * row.  Column widths come from the content.  Every cell is made
 * terminal-safe (text_escape()) when it is added, so callers may pass
 * strings that came from clients.  An empty or NULL cell shows as "-" so
 * that every line splits into the same number of fields. */
#ifndef DATD_DAEMON_DATCTL_TABLE_H
#define DATD_DAEMON_DATCTL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct table_column {
        const char *header;
        bool align_right;       /* numbers */
        bool may_shrink;        /* may be cut with an ellipsis to fit a terminal */
};

struct table_print_options {
        bool header;            /* print the header line */
        size_t max_width;       /* terminal width to fit into; 0: never cut */
};

struct table;

/* The columns are copied; their header strings must outlive the table. */
struct table *table_new(const struct table_column *columns, size_t n_columns);
/* Accepts NULL; returns NULL. */
struct table *table_free(struct table *t);

static inline void table_freep(struct table **t)
{
        table_free(*t);
}

/* Appends the next cell.  Returns 0 or -ENOMEM. */
int table_add(struct table *t, const char *text);
__attribute__((format(printf, 2, 3)))
int table_addf(struct table *t, const char *fmt, ...);

/* Rows started so far. */
size_t table_n_rows(const struct table *t);

/* Display width of a UTF-8 string in terminal columns. */
size_t text_width(const char *s);

/* Prints the table; cells missing from an unfinished last row show as "-".
 * Columns are separated by one space, the last one is not padded.  When
 * max_width is set and the table is wider, the may_shrink columns are cut
 * down, widest first, but never below their header or 6 columns.
 * Returns 0, or -EIO when writing failed. */
int table_print(const struct table *t, FILE *f, const struct table_print_options *o);

#endif
