#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/bus.h"
#include "daemon/client.h"
#include "daemon/cm.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/manager.h"
#include "daemon/policy.h"
#include "daemon/runtime_dir.h"
#include "daemon/uid_budget.h"

/* Connections taken per wakeup of the listening socket. */
#define ACCEPT_BATCH 16
/* Out of descriptors: how long the listening socket rests. */
#define ACCEPT_RETRY_USEC (100 * 1000)
/* STATUS= is for people: sent at most this often, so that a burst of
 * connections never becomes a burst of messages to PID 1. */
#define STATUS_INTERVAL_USEC (250 * 1000)

static char *path_join(const char *dir, const char *name)
{
        char *p;

        if (asprintf(&p, "%s/%s", dir, name) < 0)
                return NULL;
        return p;
}

int manager_new(Config *config, Manager **ret)
{
        Manager *m = calloc(1, sizeof(*m));

        if (!m) {
                config_free(config);
                return -ENOMEM;
        }
        m->config = config;
        m->listen_fd = -1;
        m->bus_listen_fd = -1;
        m->cm_listen_fd = -1;
        m->version = PACKAGE_VERSION;
        m->runtime_dir = strdup(config->runtime_dir);
        m->socket_path = path_join(config->runtime_dir, DATD_SOCKET_NAME);
        m->bus_socket_path = path_join(config->runtime_dir, DATD_BUS_SOCKET_NAME);
        if (!m->runtime_dir || !m->socket_path || !m->bus_socket_path ||
            conn_table_new(m, &m->conns) < 0) {
                manager_free(m);
                return -ENOMEM;
        }
        *ret = m;
        return 0;
}

Manager *manager_free(Manager *m)
{
        if (!m)
                return NULL;
        m->stopping = true;
        while (m->clients)
                client_free(m->clients);
        cm_stop(m);
        m->conns = conn_table_free(m->conns);
        /* After the clients and the connections: they hold references. */
        m->budgets = uid_budgets_free(m->budgets);
        manager_bus_done(m);
        sd_event_source_disable_unref(m->listen_source);
        sd_event_source_disable_unref(m->accept_retry);
        sd_event_source_disable_unref(m->status_timer);
        if (m->listen_fd >= 0) {
                close(m->listen_fd);
                if (m->listen_fd_ours)
                        unlink(m->socket_path);
        }
        m->host_addrs = host_addrs_free(m->host_addrs);
        sd_event_unref(m->event);
        ia_registry_done(&m->ias);
        config_free(m->config);
        free(m->runtime_dir);
        free(m->socket_path);
        free(m->bus_socket_path);
        free(m->status);
        free(m);
        return NULL;
}

uint32_t manager_clients_of_uid(Manager *m, uid_t uid)
{
        uint32_t n = 0;
        Client *c;

        LIST_FOREACH(clients, c, m->clients)
                if (c->peer.uid == uid)
                        n++;
        return n;
}

bool manager_peer_may_administer(Manager *m, const Peer *peer)
{
        if (peer->uid == 0)
                return true;
        for (size_t i = 0; i < m->ias.n; i++)
                if (policy_allows(m->ias.ias[i].config, peer))
                        return true;
        return false;
}

static void manager_send_status(Manager *m)
{
        char *status;

        if (asprintf(&status, "STATUS=%u clients, %u IAs open", m->n_clients, m->n_ias_open) < 0)
                return;
        if (m->status && strcmp(status, m->status) == 0) {
                free(status);
                return;
        }
        (void) sd_notify(false, status);
        free(m->status);
        m->status = status;
}

static int manager_on_status_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        manager_send_status(userdata);
        return 0;
}

void manager_update_status(Manager *m)
{
        int r;

        /* Before READY=1 (no timer yet) and while stopping there is nothing to tell. */
        if (m->stopping || !m->status_timer)
                return;
        if (sd_event_source_get_enabled(m->status_timer, NULL) > 0)
                return;
        r = sd_event_source_set_time_relative(m->status_timer, STATUS_INTERVAL_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->status_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_debug_errno(r, "Failed to schedule a status update: %m");
}

/* ---- signals ------------------------------------------------------------- */

static int manager_on_exit_signal(sd_event_source *s, const struct signalfd_siginfo *si,
                                  void *userdata)
{
        Manager *m = userdata;

        log_info("Received SIG%s, shutting down.", sigabbrev_np((int) si->ssi_signo));
        return sd_event_exit(m->event, 0);
}

static int manager_on_sighup(sd_event_source *s, const struct signalfd_siginfo *si,
                             void *userdata)
{
        log_notice("Received SIGHUP: reloading the configuration is not supported yet, "
                   "restart datd to apply a changed datd.conf.");
        return 0;
}

static int manager_setup_signals(Manager *m)
{
        int r;

        r = sd_event_add_signal(m->event, NULL, SIGTERM, manager_on_exit_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGINT, manager_on_exit_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGHUP, manager_on_sighup, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch signals: %m");
        return 0;
}

/* ---- the protocol socket ----------------------------------------------- */

/* Something still answering on path means another datd runs there; a
 * refused connection means a leftover socket file that may be replaced. */
static int unix_path_check_stale(const char *path, int type)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;
        struct stat st;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        strcpy(sa.sun_path, path);
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) >= 0 || errno == EAGAIN)
                return -EADDRINUSE;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

int manager_listen_unix(const char *path, int type, int *ret_fd)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;
        mode_t old_umask;
        int r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return log_error_errno(-ENAMETOOLONG, "Socket path %s is too long.", path);
        strcpy(sa.sun_path, path);
        r = unix_path_check_stale(path, type);
        if (r == -EADDRINUSE)
                return log_error_errno(r, "Another datd is listening on %s.", path);
        if (r < 0)
                return log_error_errno(r, "Cannot replace %s: %m", path);
        fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(-errno, "Failed to create a socket: %m");
        /* Anyone may connect: access is decided per request, by the peer's
         * credentials and the policy.  bind() makes the file with that mode
         * under the umask; a chmod() of the path afterwards would follow
         * whatever was put there meanwhile. */
        old_umask = umask(0111);
        r = bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ? -errno : 0;
        umask(old_umask);
        if (r < 0)
                return log_error_errno(r, "Failed to bind %s: %m", path);
        if (listen(fd, SOMAXCONN) < 0) {
                r = log_error_errno(-errno, "Failed to listen on %s: %m", path);
                unlink(path);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int manager_on_accept_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
        sd_event_source *listen_source = userdata;

        return sd_event_source_set_enabled(listen_source, SD_EVENT_ON);
}

void manager_pause_accepting(Manager *m, sd_event_source *listen_source, sd_event_source **retry)
{
        int r;

        r = sd_event_source_set_enabled(listen_source, SD_EVENT_OFF);
        if (r >= 0 && *retry)
                r = sd_event_source_set_time_relative(*retry, ACCEPT_RETRY_USEC);
        if (r >= 0 && *retry)
                r = sd_event_source_set_enabled(*retry, SD_EVENT_ONESHOT);
        else if (r >= 0)
                r = sd_event_add_time_relative(m->event, retry, CLOCK_MONOTONIC, ACCEPT_RETRY_USEC,
                                               0, manager_on_accept_retry, listen_source);
        if (r < 0)
                log_warning_errno(r, "Failed to schedule accepting again: %m");
}

static int manager_on_listen(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        Manager *m = userdata;

        for (unsigned i = 0; i < ACCEPT_BATCH; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (cfd >= 0) {
                        client_accept(m, cfd);
                        continue;
                }
                if (errno == EAGAIN || errno == EINTR)
                        return 0;
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                        log_warning_errno(errno, "Failed to accept a client: %m");
                        manager_pause_accepting(m, m->listen_source, &m->accept_retry);
                        return 0;
                }
                /* ECONNABORTED and friends: that one connection is gone. */
                log_debug_errno(errno, "Failed to accept a client: %m");
        }
        return 0;
}

/* The socket systemd passed (datd.socket), or -1.  Anything else passed is
 * not ours to keep. */
static int manager_take_listen_fd(void)
{
        int n = sd_listen_fds(true), fd = -1;

        if (n < 0)
                return log_error_errno(n, "Failed to read sockets passed by systemd: %m");
        for (int i = SD_LISTEN_FDS_START; i < SD_LISTEN_FDS_START + n; i++) {
                if (fd < 0 && sd_is_socket_unix(i, SOCK_SEQPACKET, 1, NULL, 0) > 0) {
                        fd = i;
                        continue;
                }
                log_warning("Ignoring socket %d passed by systemd: not a listening "
                            "AF_UNIX SOCK_SEQPACKET socket.", i);
                close(i);
        }
        return fd;
}

static int manager_setup_listen(Manager *m)
{
        int r, fd;

        fd = manager_take_listen_fd();
        if (fd < -1)
                return fd;
        if (fd >= 0) {
                r = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                if (r < 0)
                        return log_error_errno(-errno, "Failed to make the passed socket non-blocking: %m");
                m->listen_fd = fd;
                log_info("Using the protocol socket passed by systemd.");
        } else {
                r = manager_listen_unix(m->socket_path, SOCK_SEQPACKET, &m->listen_fd);
                if (r < 0)
                        return r;
                m->listen_fd_ours = true;
                log_info("Listening on %s.", m->socket_path);
        }
        r = sd_event_add_io(m->event, &m->listen_source, m->listen_fd, EPOLLIN, manager_on_listen, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the protocol socket: %m");
        return 0;
}

/* Up to 65536 clients plus their fds: the soft limit of 1024 that services
 * start with is too low, and datd never uses select(). */
static void bump_nofile_limit(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max < 524288 ? rl.rlim_max : 524288;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
}

/* The per-uid budgets, the descriptors' fitted to the limit just set. */
static int manager_setup_budgets(Manager *m)
{
        struct rlimit rl;
        int r;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return log_error_errno(-errno, "Failed to read RLIMIT_NOFILE: %m");
        r = uid_budgets_new(&m->config->limits, rl.rlim_cur == RLIM_INFINITY ? UINT32_MAX : rl.rlim_cur,
                            &m->budgets);
        if (r < 0)
                return log_oom();
        return 0;
}

static uint64_t now_realtime_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

int manager_startup(Manager *m)
{
        int r;

        bump_nofile_limit();
        r = manager_setup_budgets(m);
        if (r < 0)
                return r;
        r = ia_registry_build(&m->ias, m->config);
        if (r < 0)
                return r;
        r = sd_event_new(&m->event);
        if (r < 0)
                return log_error_errno(r, "Failed to create the event loop: %m");
        (void) sd_event_set_watchdog(m->event, true);
        r = manager_setup_signals(m);
        if (r < 0)
                return r;
        r = runtime_dir_make(m->runtime_dir);
        if (r < 0)
                return r;
        r = host_addrs_new(m->event, &m->host_addrs);
        if (r < 0)
                return log_error_errno(r, "Failed to keep this host's addresses: %m");
        r = cm_start(m);
        if (r < 0)
                return r;
        r = manager_setup_listen(m);
        if (r < 0)
                return r;
        r = manager_bus_setup(m);
        if (r < 0)
                return r;

        r = sd_event_add_time_relative(m->event, &m->status_timer, CLOCK_MONOTONIC,
                                       STATUS_INTERVAL_USEC, 0, manager_on_status_timer, m);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->status_timer, SD_EVENT_OFF);
        if (r < 0)
                return log_error_errno(r, "Failed to create the status timer: %m");

        m->start_timestamp = now_realtime_usec();
        (void) sd_notify(false, "READY=1");
        manager_send_status(m);
        log_info("datd %s ready: %zu IAs.", PACKAGE_VERSION, m->ias.n);
        return 0;
}

int manager_run(Manager *m)
{
        int r = sd_event_loop(m->event);

        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down.");
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return 0;
}
