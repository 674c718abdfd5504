#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/daemon/child.h"

int child_wait(pid_t pid, int timeout_ms, int *status)
{
        for (int waited = 0;; waited += 5) {
                pid_t r = waitpid(pid, status, WNOHANG);

                if (r == pid)
                        return 0;
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (waited >= timeout_ms)
                        return -ETIMEDOUT;
                usleep(5000);
        }
}

void child_kill(pid_t *pid)
{
        int status;

        if (*pid <= 0)
                return;
        kill(*pid, SIGKILL);
        waitpid(*pid, &status, 0);
        *pid = 0;
}

pid_t child_run_as(uid_t uid, gid_t gid, int (*fn)(void *), void *arg, int hold, int *result_fd)
{
        int p[2], result;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                close(p[0]);
                close(p[1]);
                return -errno;
        }
        if (pid == 0) {
                close(p[0]);
                if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
                        result = -errno;
                else
                        result = fn(arg);
                if (write(p[1], &result, sizeof(result)) != sizeof(result))
                        _exit(2);
                while (hold)
                        pause();
                _exit(0);
        }
        close(p[1]);
        *result_fd = p[0];
        return pid;
}

int child_result(int result_fd, int timeout_ms, int *result)
{
        struct pollfd pfd = { .fd = result_fd, .events = POLLIN };
        ssize_t n;

        if (poll(&pfd, 1, timeout_ms) <= 0)
                return -ETIMEDOUT;
        n = read(result_fd, result, sizeof(*result));
        return n == sizeof(*result) ? 0 : -EPIPE;
}
