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

#endif
