/* What every datctl unit shares: how it reports errors, what the command
 * line asked for, and JSON helpers.  (Cleanup of json_t uses jansson's own
 * json_decrefp.) */
#ifndef DATD_DAEMON_DATCTL_H
#define DATD_DAEMON_DATCTL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* Exit codes, as documented in datctl --help. */
#define DATCTL_EXIT_FAILURE 1
#define DATCTL_EXIT_USAGE 2

/* datctl is a command-line tool: an error is reported once, on stderr,
 * prefixed with the program name, by the function that knows what failed. */
__attribute__((format(printf, 1, 2)))
static inline void datctl_error(const char *fmt, ...)
{
        va_list ap;

        fputs("datctl: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* jansson integers are signed 64-bit: a counter past that shows as the
 * largest one rather than as a negative number. */
static inline json_t *json_from_u64(uint64_t value)
{
        return json_integer(value > (uint64_t)INT64_MAX ? (json_int_t)INT64_MAX
                                                        : (json_int_t)value);
}

/* How the command line asked for output. */
struct datctl_output {
        bool json;              /* --json */
        bool legend;            /* column headers and the closing count */
        size_t width;           /* terminal width to fit tables into, 0: never cut */
};

/* --json output: indented, keys in the order they were set, one value per
 * run.  Returns 0 or -EIO. */
static inline int datctl_print_json(const json_t *value)
{
        if (json_dumpf(value, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0 ||
            fputc('\n', stdout) == EOF)
                return -EIO;
        return 0;
}

#endif
