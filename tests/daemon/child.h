/* Forked children of a test: run a function as another user, wait with a
 * bound, kill by PID. */
#ifndef DATD_TESTS_DAEMON_CHILD_H
#define DATD_TESTS_DAEMON_CHILD_H

#include <sys/types.h>

#define NOBODY_UID 65534
#define NOGROUP_GID 65534

/* 0 once pid exited (status filled), -ETIMEDOUT after timeout_ms. */
int child_wait(pid_t pid, int timeout_ms, int *status);

/* SIGKILL and reap; *pid becomes 0.  Safe with *pid == 0. */
void child_kill(pid_t *pid);

/* Forks a child that drops to uid/gid (no supplementary groups), runs fn and
 * reports its int result.  With hold, the child then waits (until killed)
 * instead of exiting, keeping everything it opened.  Returns the pid; the
 * result is read with child_result(). */
pid_t child_run_as(uid_t uid, gid_t gid, int (*fn)(void *), void *arg, int hold, int *result_fd);

/* The child's result, or -ETIMEDOUT / -EPIPE. */
int child_result(int result_fd, int timeout_ms, int *result);

/* Starts the build tree's datd outside the harness, for what the harness does
 * not set up: listen_fd >= 0 is passed the way systemd passes datd.socket
 * (fd 3, LISTEN_FDS=1), env adds "NAME=value" entries (NULL-terminated, may
 * be NULL).  stderr goes to log_path.  Returns the pid, or -errno. */
pid_t child_exec_datd(const char *const *args, const char *const *env, int listen_fd,
                      const char *log_path);

/* Until datd on socket_path answers HELLO: 0, or the last error once
 * timeout_ms passed. */
int child_wait_datd(const char *socket_path, int timeout_ms);

#endif
