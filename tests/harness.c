/* Test harness: starts real datd processes in private runtime directories and
 * runs real programs with a time bound.  Nothing here is mocked: readiness is
 * datd's own sd_notify READY=1, received on a NOTIFY_SOCKET we own. */
#include "tests/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"

const char *const datd_test_default_config =
        "{\n"
        "  \"log_level\": \"debug\",\n"
        "  \"ias\": [\n"
        "    {\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"},\n"
        "    {\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"127.0.0.1\"}\n"
        "  ],\n"
        "  \"verbs\": false\n"
        "}\n";

static const char *const test_dat_conf =
        "# written by the test harness\n"
        "datd-shm u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm\" \"\"\n"
        "datd-tcp u2.0 threadsafe nondefault libdat2.so.2 datd.2.0 \"tcp\" \"\"\n";

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *tree_path(const char *env, const char *relative)
{
        const char *base = getenv(env);
        char *p;

        if (!base || !*base)
                base = ".";
        if (asprintf(&p, "%s/%s", base, relative) < 0)
                return NULL;
        return p;
}

char *build_path(const char *relative)
{
        return tree_path("DATD_TEST_BUILDDIR", relative);
}

char *source_path(const char *relative)
{
        return tree_path("DATD_TEST_SRCDIR", relative);
}

char proc_stat_state(const char *stat_path)
{
        _cleanup_close_ int fd = open(stat_path, O_RDONLY | O_CLOEXEC);
        char buf[512];
        const char *paren;
        ssize_t n;

        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0) {
                if (n == 0)
                        errno = EIO;
                return 0;
        }
        buf[n] = '\0';
        /* The command name, in parentheses, may hold anything: the state
         * follows the last ')'. */
        paren = strrchr(buf, ')');
        if (!paren || paren[1] != ' ' || paren[2] == '\0') {
                errno = EPROTO;
                return 0;
        }
        return paren[2];
}

char *read_file_str(const char *path)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t len = 0, cap = 4096;
        char *buf;

        if (fd < 0)
                return NULL;
        buf = malloc(cap);
        if (!buf)
                return NULL;
        for (;;) {
                ssize_t n;

                if (len + 1 >= cap) {
                        char *bigger = realloc(buf, cap * 2);

                        if (!bigger) {
                                free(buf);
                                return NULL;
                        }
                        buf = bigger;
                        cap *= 2;
                }
                n = read(fd, buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        free(buf);
                        return NULL;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        return buf;
}

static int write_file_str(const char *path, const char *content)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        size_t len = strlen(content), done = 0;

        if (fd < 0)
                return -errno;
        while (done < len) {
                ssize_t n = write(fd, content + done, len - done);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                done += (size_t)n;
        }
        return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        remove(path);
        return 0;
}

static void remove_tree(const char *dir)
{
        if (dir[0])
                nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Waits for a child with a deadline; returns the wait status or -1 on timeout. */
static int wait_deadline(pid_t pid, long long deadline_ms, int *status)
{
        for (;;) {
                pid_t r = waitpid(pid, status, WNOHANG);

                if (r == pid)
                        return 0;
                if (r < 0 && errno != EINTR)
                        return -1;
                if (now_ms() >= deadline_ms)
                        return -1;
                usleep(2000);
        }
}

static void dump_log(const struct datd_instance *d)
{
        _cleanup_free_ char *log = read_file_str(d->log_path);

        fprintf(stderr, "---- datd log (%s) ----\n%s\n---- end of datd log ----\n",
                d->log_path, log ? log : "(unreadable)");
}

/* Receives on the notify socket until READY=1 arrives, datd dies, or time runs out. */
static int wait_ready(struct datd_instance *d, int notify_fd, long long deadline_ms)
{
        char buf[4096];

        for (;;) {
                struct pollfd p = { .fd = notify_fd, .events = POLLIN };
                int status, r;
                long long left = deadline_ms - now_ms();

                if (left <= 0)
                        return -ETIMEDOUT;
                r = poll(&p, 1, left > 100 ? 100 : (int)left);
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (r > 0) {
                        ssize_t n = recv(notify_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

                        if (n > 0) {
                                buf[n] = '\0';
                                if (strstr(buf, "READY=1"))
                                        return 0;
                        }
                }
                if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
                        d->pid = 0;
                        return -ECHILD;
                }
        }
}

static int open_notify_socket(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

static void exec_datd(const struct datd_instance *d, const char *notify_path,
                      const char *const *extra_args)
{
        const char *argv[64];
        _cleanup_free_ char *datd = build_path("daemon/datd");
        size_t n = 0;
        int log_fd;

        if (d->netns) {
                argv[n++] = "ip";
                argv[n++] = "netns";
                argv[n++] = "exec";
                argv[n++] = d->netns;
        }
        argv[n++] = datd;
        argv[n++] = "--runtime-dir";
        argv[n++] = d->runtime_dir;
        argv[n++] = "--config";
        argv[n++] = d->config_path;
        argv[n++] = "--bus";
        argv[n++] = "private";
        argv[n++] = "--log-target";
        argv[n++] = "console";
        for (; extra_args && *extra_args && n < ARRAY_SIZE(argv) - 1; extra_args++)
                argv[n++] = *extra_args;
        argv[n] = NULL;

        /* If the test process dies (criterion kills a test that runs past its
         * timeout), datd must not outlive it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        log_fd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (log_fd >= 0) {
                dup2(log_fd, STDOUT_FILENO);
                dup2(log_fd, STDERR_FILENO);
        }
        setenv("NOTIFY_SOCKET", notify_path, 1);
        /* A test's datd must never reach the host's system bus or datd. */
        unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_PID");
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "harness: cannot exec %s: %m\n", argv[0]);
        _exit(127);
}

int datd_start_args(struct datd_instance *d, const char *config_json,
                    const char *const *extra_args)
{
        char notify_path[PATH_MAX];
        const char *netns = d->netns;
        int notify_fd, r;

        memset(d, 0, sizeof(*d));
        d->netns = netns;
        strcpy(d->runtime_dir, "/tmp/datd-test-XXXXXX");
        if (!mkdtemp(d->runtime_dir)) {
                d->runtime_dir[0] = '\0';
                return -errno;
        }
        chmod(d->runtime_dir, 0755);
        snprintf(d->socket_path, sizeof(d->socket_path), "%s/datd.sock", d->runtime_dir);
        snprintf(d->bus_address, sizeof(d->bus_address), "unix:path=%s/bus.sock", d->runtime_dir);
        snprintf(d->config_path, sizeof(d->config_path), "%s/datd.conf", d->runtime_dir);
        snprintf(d->dat_conf_path, sizeof(d->dat_conf_path), "%s/dat.conf", d->runtime_dir);
        snprintf(d->log_path, sizeof(d->log_path), "%s/datd.log", d->runtime_dir);
        snprintf(notify_path, sizeof(notify_path), "%s/notify.sock", d->runtime_dir);

        r = write_file_str(d->config_path, config_json ? config_json : datd_test_default_config);
        if (r >= 0)
                r = write_file_str(d->dat_conf_path, test_dat_conf);
        if (r < 0)
                goto fail;

        notify_fd = open_notify_socket(notify_path);
        if (notify_fd < 0) {
                r = notify_fd;
                goto fail;
        }

        d->pid = fork();
        if (d->pid < 0) {
                r = -errno;
                d->pid = 0;
                close(notify_fd);
                goto fail;
        }
        if (d->pid == 0)
                exec_datd(d, notify_path, extra_args);

        r = wait_ready(d, notify_fd, now_ms() + 10000);
        close(notify_fd);
        if (r < 0) {
                fprintf(stderr, "harness: datd did not become ready: %s\n", strerror(-r));
                dump_log(d);
                datd_stop(d);
                return r;
        }
        return 0;
fail:
        remove_tree(d->runtime_dir);
        d->runtime_dir[0] = '\0';
        return r;
}

int datd_start(struct datd_instance *d, const char *config_json)
{
        return datd_start_args(d, config_json, NULL);
}

int datd_stop(struct datd_instance *d)
{
        int status = 0, result = -1;

        if (d->pid > 0) {
                kill(d->pid, SIGTERM);
                if (wait_deadline(d->pid, now_ms() + 5000, &status) < 0) {
                        fprintf(stderr, "harness: datd %d ignored SIGTERM, killing it\n", (int)d->pid);
                        kill(d->pid, SIGKILL);
                        waitpid(d->pid, &status, 0);
                        dump_log(d);
                } else if (WIFEXITED(status)) {
                        result = WEXITSTATUS(status);
                        if (result != 0)
                                dump_log(d);
                } else {
                        dump_log(d);
                }
                d->pid = 0;
        }
        remove_tree(d->runtime_dir);
        d->runtime_dir[0] = '\0';
        return result;
}

void datd_export_env(const struct datd_instance *d)
{
        setenv("DATD_SOCKET", d->socket_path, 1);
        setenv("DAT_OVERRIDE", d->dat_conf_path, 1);
        setenv("DATD_BUS_ADDRESS", d->bus_address, 1);
}

/* Reads whatever the child wrote, until EOF or the deadline. */
static int collect_output(int fd, pid_t pid, long long deadline_ms, char **output)
{
        size_t len = 0, cap = 4096;
        _cleanup_free_ char *buf = malloc(cap);
        int status;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                long long left = deadline_ms - now_ms();
                ssize_t n;

                if (left <= 0)
                        return -ETIMEDOUT;
                if (poll(&p, 1, (int)left) <= 0)
                        continue;
                if (len + 1 >= cap) {
                        char *bigger = realloc(buf, cap * 2);

                        if (!bigger)
                                return -ENOMEM;
                        buf = bigger;
                        cap *= 2;
                }
                n = read(fd, buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        if (wait_deadline(pid, deadline_ms, &status) < 0)
                return -ETIMEDOUT;
        if (output)
                *output = TAKE_PTR(buf);
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + WTERMSIG(status);
}

int run_capture(char *const argv[], char **output, int timeout_ms)
{
        int pipe_fd[2], r;
        pid_t pid;

        if (output)
                *output = NULL;
        if (pipe2(pipe_fd, O_CLOEXEC) < 0)
                return -1;
        pid = fork();
        if (pid < 0) {
                close(pipe_fd[0]);
                close(pipe_fd[1]);
                return -1;
        }
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDONLY);

                if (devnull >= 0)
                        dup2(devnull, STDIN_FILENO);
                dup2(pipe_fd[1], STDOUT_FILENO);
                dup2(pipe_fd[1], STDERR_FILENO);
                /* Own process group, so a timeout kills its children too;
                 * and gone with the test process if that is killed. */
                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                execvp(argv[0], argv);
                fprintf(stderr, "harness: cannot exec %s: %m\n", argv[0]);
                _exit(127);
        }
        close(pipe_fd[1]);
        r = collect_output(pipe_fd[0], pid, now_ms() + timeout_ms, output);
        close(pipe_fd[0]);
        if (r == -ETIMEDOUT) {
                int status;

                fprintf(stderr, "harness: %s ran past %d ms, killed\n", argv[0], timeout_ms);
                kill(-pid, SIGKILL);
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                return -1;
        }
        return r < 0 ? -1 : r;
}
