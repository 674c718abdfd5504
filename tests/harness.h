/* Test harness: real datd processes in private runtime directories, and
 * helpers to run real client programs with a time bound.  Every process
 * started here is remembered by PID and killed by datd_stop()/run_capture(). */
#ifndef DATD_TESTS_HARNESS_H
#define DATD_TESTS_HARNESS_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct datd_instance {
        pid_t pid;                      /* datd's PID, 0 when not running */
        char runtime_dir[PATH_MAX];     /* private, made by datd_start(), removed by datd_stop() */
        char socket_path[PATH_MAX];     /* <runtime_dir>/datd.sock */
        char bus_address[PATH_MAX + 16];/* "unix:path=<runtime_dir>/bus.sock" */
        char config_path[PATH_MAX];     /* <runtime_dir>/datd.conf, written from the JSON given */
        char dat_conf_path[PATH_MAX];   /* <runtime_dir>/dat.conf naming the IAs of this datd */
        char log_path[PATH_MAX];        /* <runtime_dir>/datd.log: datd's stderr */
        const char *netns;              /* network namespace to run in, NULL for the current one */
};

/* A datd.conf with the "shm" IA and a "tcp" IA on 127.0.0.1, private bus. */
extern const char *const datd_test_default_config;

/* Starts datd (the build tree's daemon/datd) with --runtime-dir, --config
 * and --bus=private, and waits (bounded, 10 s) until it has sent READY=1 over
 * NOTIFY_SOCKET.  config_json NULL means datd_test_default_config.  The
 * dat.conf written names "datd-shm" -> "shm" and "datd-tcp" -> "tcp".
 * Returns 0 or -errno; on failure datd's log is copied to stderr. */
int datd_start(struct datd_instance *d, const char *config_json);

/* Same, with extra datd command-line arguments (NULL-terminated). */
int datd_start_args(struct datd_instance *d, const char *config_json, const char *const *extra_args);

/* SIGTERM, waits up to 5 s, then SIGKILL; removes the runtime dir.
 * Returns datd's exit status (0 = clean exit after SIGTERM), or -1 if it had
 * to be killed or had crashed.  Safe on a never-started instance. */
int datd_stop(struct datd_instance *d);

/* Points libdat in this process (and its children) at this datd:
 * sets DATD_SOCKET and DAT_OVERRIDE. */
void datd_export_env(const struct datd_instance *d);

/* Runs argv (argv[0] a path) with a time bound, capturing stdout+stderr into
 * a malloc'd NUL-terminated *output (may be NULL if not wanted).  Returns the
 * exit status, 128+signal if it died of a signal, or -1 if it had to be killed
 * for running past timeout_ms (or could not start). */
int run_capture(char *const argv[], char **output, int timeout_ms);

/* Absolute path of a file in the build / source tree (static buffer per call
 * site is not used: the result is malloc'd and must be freed). */
char *build_path(const char *relative);
char *source_path(const char *relative);

/* Reads a whole file into a malloc'd string, or NULL. */
char *read_file_str(const char *path);

/* The state letter of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat
 * file ('S' asleep in the kernel, 'Z' a zombie, ...), or 0 with errno set
 * when it cannot be read (ENOENT: no such process or thread). */
char proc_stat_state(const char *stat_path);

#endif
