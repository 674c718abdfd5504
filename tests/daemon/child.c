#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/daemon/child.h"
#include "tests/daemon/raw-client.h"
#include "tests/harness.h"

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

static void exec_datd(const char *const *args, const char *const *env, int listen_fd,
                      const char *log_path)
{
        const char *argv[32];
        char pid[16];
        size_t n = 0;
        int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        if (log_fd >= 0)
                dup2(log_fd, STDERR_FILENO);
        unsetenv("NOTIFY_SOCKET");
        unsetenv("LISTEN_FDNAMES");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_PID");
        if (listen_fd >= 0) {
                /* dup2() onto itself would keep close-on-exec. */
                if (listen_fd == 3)
                        fcntl(3, F_SETFD, 0);
                else
                        dup2(listen_fd, 3);
                snprintf(pid, sizeof(pid), "%d", (int) getpid());
                setenv("LISTEN_FDS", "1", 1);
                setenv("LISTEN_PID", pid, 1);
        }
        for (; env && *env; env++)
                putenv((char *) *env);
        argv[n++] = build_path("daemon/datd");
        for (; *args && n < 31; args++)
                argv[n++] = *args;
        argv[n] = NULL;
        execv(argv[0], (char *const *) argv);
        _exit(127);
}

pid_t child_exec_datd(const char *const *args, const char *const *env, int listen_fd,
                      const char *log_path)
{
        pid_t pid = fork();

        if (pid < 0)
                return -errno;
        if (pid == 0)
                exec_datd(args, env, listen_fd, log_path);
        return pid;
}

int child_wait_datd(const char *socket_path, int timeout_ms)
{
        int r = -ETIMEDOUT;

        for (int waited = 0; waited < timeout_ms; waited += 20) {
                int fd = raw_connect_hello(socket_path);

                if (fd >= 0) {
                        close(fd);
                        return 0;
                }
                r = fd;
                usleep(20000);
        }
        return r;
}
