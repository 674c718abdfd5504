/* Running the build tree's datctl from a test, bounded in time. */
#ifndef DATD_TESTS_DATCTL_RUN_H
#define DATD_TESTS_DATCTL_RUN_H

#include <jansson.h>

/* Longest a datctl run may take before it is killed and the test fails. */
#define DATCTL_RUN_TIMEOUT_MS 20000

/* Runs daemon/datctl with the arguments that follow (strings, then NULL),
 * asserts that it exits with status, and returns what it printed on stdout
 * and stderr (malloc'd). */
char *datctl_run_expect(int status, ...) __attribute__((sentinel));

#define datctl_run_ok(...) datctl_run_expect(0, __VA_ARGS__)

/* Runs datctl with --json and the arguments, asserts that it exits with 0
 * and prints nothing but one JSON value, and returns that value. */
json_t *datctl_run_json(const char *arg, ...) __attribute__((sentinel));

/* The same, and asserts that the text is exactly what jansson prints for
 * the value it parses to (json_dumpf with JSON_INDENT(2) |
 * JSON_PRESERVE_ORDER, then a newline): datctl's --json has one format,
 * whether a list was streamed or dumped from a tree. */
json_t *datctl_run_json_exact(const char *arg, ...) __attribute__((sentinel));

#endif
