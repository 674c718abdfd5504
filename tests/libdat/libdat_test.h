/* Helpers shared by the libdat tests: private dat.conf files, capture of
 * the debug trace (stderr), a private datd. */
#ifndef DATD_TESTS_LIBDAT_TEST_H
#define DATD_TESTS_LIBDAT_TEST_H

/* Writes content to a new private file and points DAT_OVERRIDE at it.
 * Returns the file's path (static storage, one per process). */
const char *use_dat_conf(const char *content);

/* Starts capturing what this process writes to stderr (fd 2) and turns the
 * debug trace on (DAT_DBG_TYPE=1). */
void trace_capture_begin(void);

/* Stops capturing; returns what was written (malloc'd, never NULL) and
 * turns the trace off again. */
char *trace_capture_end(void);

struct datd_instance;

/* Starts a private datd (tests/harness.h) and points libdat at it, for a
 * suite's .init; skips the test where daemon/datd is not built. */
void start_private_datd(struct datd_instance *d);

#endif
