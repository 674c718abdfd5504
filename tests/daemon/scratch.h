/* A scratch directory for one test, for files and sockets the harness does
 * not make: created on first use, removed (with the known names in it) by
 * scratch_remove(). */
#ifndef DATD_TESTS_DAEMON_SCRATCH_H
#define DATD_TESTS_DAEMON_SCRATCH_H

#define SCRATCH_PATH_MAX 128

/* Fills path with name inside the scratch directory and returns it; NULL if
 * the directory cannot be made. */
const char *scratch_path(const char *name, char path[SCRATCH_PATH_MAX]);

/* Writes content to name; returns its path in path, or NULL. */
const char *scratch_write(const char *name, const char *content, char path[SCRATCH_PATH_MAX]);

void scratch_remove(void);

#endif
