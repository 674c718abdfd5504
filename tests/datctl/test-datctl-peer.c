/* The real datctl against a D-Bus peer that behaves in ways a real datd
 * should not (or may, depending on how its private socket is served): no
 * Hello, D-Bus error replies, replies of the wrong type, a socket that hangs
 * up.  What datctl shows a person in those cases is the rule under test. */
#include <config.h>

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "common/macro.h"
#include "tests/datctl/datctl-run.h"

#define PEER_READY_TIMEOUT_MS 5000

enum peer_mode {
        PEER_PLAIN,             /* peer-to-peer, no Hello, correct answers */
        PEER_HELLO,             /* answers Hello like a bus, correct answers */
        PEER_ERROR_REPLY,       /* ListIAs() answers with a D-Bus error */
        PEER_WRONG_TYPE,        /* ListIAs() answers a(ss) */
        PEER_HANG_UP,           /* accepts and closes, never speaks D-Bus */
};

static enum peer_mode peer_mode;
static pid_t peer_pid;
static char peer_dir[] = "/tmp/datctl-peer-XXXXXX";
static char peer_address[sizeof("--address=unix:path=") + sizeof(peer_dir) + sizeof("/bus.sock")];

static int peer_hello(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        return sd_bus_reply_method_return(m, "s", ":1.1");
}

static int peer_list_ias(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
        switch (peer_mode) {
        case PEER_ERROR_REPLY:
                return sd_bus_error_set(error, "org.datd.Datd1.Error.Test", "Refused on purpose");
        case PEER_WRONG_TYPE:
                return sd_bus_reply_method_return(m, "a(ss)", 1, "peer-ia", "shm");
        default:
                return sd_bus_reply_method_return(m, "a(sssssu)", 1, "peer-ia", "shm", "shm", "",
                                                  "up", 0);
        }
}

static const sd_bus_vtable peer_bus_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Hello", "", "s", peer_hello, 0),
        SD_BUS_VTABLE_END
};

static const sd_bus_vtable peer_manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("ListIAs", "", "a(sssssu)", peer_list_ias, 0),
        SD_BUS_VTABLE_END
};

/* sd-bus checks replies against the declared type, so the wrong one is
 * declared too. */
static const sd_bus_vtable peer_wrong_manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("ListIAs", "", "a(ss)", peer_list_ias, 0),
        SD_BUS_VTABLE_END
};

/* One connection, until the client goes away. */
static void peer_serve(int fd)
{
        sd_bus *bus = NULL;
        sd_id128_t id;

        if (sd_id128_randomize(&id) < 0 || sd_bus_new(&bus) < 0 || sd_bus_set_fd(bus, fd, fd) < 0 ||
            sd_bus_set_server(bus, 1, id) < 0)
                _exit(1);
        if (peer_mode == PEER_HELLO &&
            sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                     peer_bus_vtable, NULL) < 0)
                _exit(1);
        if (sd_bus_add_object_vtable(bus, NULL, "/org/datd/Datd1", "org.datd.Datd1.Manager",
                                     peer_mode == PEER_WRONG_TYPE ? peer_wrong_manager_vtable
                                                                  : peer_manager_vtable,
                                     NULL) < 0 ||
            sd_bus_start(bus) < 0)
                _exit(1);
        for (;;) {
                int r = sd_bus_process(bus, NULL);

                if (r < 0)
                        break;
                if (r == 0 && sd_bus_wait(bus, UINT64_MAX) < 0)
                        break;
        }
        sd_bus_close_unref(bus);
}

static void peer_main(int listen_fd, int ready_fd)
{
        (void)!write(ready_fd, "R", 1);
        close(ready_fd);
        for (;;) {
                int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

                if (fd < 0)
                        continue;
                if (peer_mode == PEER_HANG_UP)
                        close(fd);
                else
                        peer_serve(fd);
        }
}

static void start_peer(enum peer_mode mode)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct pollfd p;
        int ready[2], fd;
        char c = 0;

        peer_mode = mode;
        cr_assert_not_null(mkdtemp(peer_dir));
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/bus.sock", peer_dir);
        snprintf(peer_address, sizeof(peer_address), "--address=unix:path=%s/bus.sock", peer_dir);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(fd, 0);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(fd, 8), 0);
        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        peer_pid = fork();
        cr_assert_geq(peer_pid, 0);
        if (peer_pid == 0) {
                close(ready[0]);
                peer_main(fd, ready[1]);
        }
        close(fd);
        close(ready[1]);
        p = (struct pollfd) { .fd = ready[0], .events = POLLIN };
        cr_assert_eq(poll(&p, 1, PEER_READY_TIMEOUT_MS), 1, "the peer did not start");
        cr_assert_eq(read(ready[0], &c, 1), 1);
        close(ready[0]);
}

static void stop_peer(void)
{
        char sock[sizeof(peer_dir) + 16];

        if (peer_pid > 0) {
                kill(peer_pid, SIGKILL);
                waitpid(peer_pid, NULL, 0);
                peer_pid = 0;
        }
        snprintf(sock, sizeof(sock), "%s/bus.sock", peer_dir);
        unlink(sock);
        rmdir(peer_dir);
}

TestSuite(datctl_peer, .fini = stop_peer, .timeout = 60);

/* "datctl NOUN list" against a peer in mode, which must fail with exit 1. */
static char *run_list_failing(enum peer_mode mode, const char *noun)
{
        start_peer(mode);
        return datctl_run_expect(1, peer_address, noun, "list", NULL);
}

Test(datctl_peer, a_peer_that_refuses_hello_is_still_reached)
{
        _cleanup_free_ char *out = NULL;

        start_peer(PEER_PLAIN);
        out = datctl_run_ok(peer_address, "ia", "list", NULL);
        cr_assert_not_null(strstr(out, "\npeer-ia "), "%s", out);
}

Test(datctl_peer, a_peer_that_answers_hello_is_reached)
{
        _cleanup_free_ char *out = NULL;

        start_peer(PEER_HELLO);
        out = datctl_run_ok(peer_address, "ia", "list", NULL);
        cr_assert_not_null(strstr(out, "\npeer-ia "), "%s", out);
}

Test(datctl_peer, a_dbus_error_reply_is_printed_with_name_and_message)
{
        _cleanup_free_ char *out = run_list_failing(PEER_ERROR_REPLY, "ia");

        cr_assert_str_eq(out, "datctl: ListIAs() failed: org.datd.Datd1.Error.Test: "
                              "Refused on purpose\n");
}

Test(datctl_peer, a_reply_of_the_wrong_type_is_reported_not_misread)
{
        _cleanup_free_ char *out = run_list_failing(PEER_WRONG_TYPE, "ia");

        cr_assert_not_null(strstr(out, "datctl: ListIAs(): datd answered with type 'a(ss)', "
                                       "expected 'a(sssssu)'"), "%s", out);
}

Test(datctl_peer, a_method_datd_lacks_is_reported_by_its_dbus_error)
{
        _cleanup_free_ char *out = run_list_failing(PEER_PLAIN, "client");

        cr_assert_not_null(strstr(out, "datctl: ListClients() failed: "
                                       "org.freedesktop.DBus.Error.UnknownMethod: "), "%s", out);
}

Test(datctl_peer, a_socket_that_hangs_up_is_reported_as_unreachable)
{
        _cleanup_free_ char *out = run_list_failing(PEER_HANG_UP, "ia");
        _cleanup_free_ char *expected = NULL;

        cr_assert_geq(asprintf(&expected, "datctl: cannot reach datd at %s: ",
                               peer_address + strlen("--address=")), 0);
        cr_assert_eq(strncmp(out, expected, strlen(expected)), 0, "%s", out);
}
