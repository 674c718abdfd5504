/* datd's life: start, READY, signals, sockets, the command line and
 * --check-config. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/daemon/bus-client.h"
#include "tests/daemon/child.h"
#include "tests/daemon/raw-client.h"
#include "tests/daemon/scratch.h"
#include "tests/harness.h"

static struct datd_instance d;
static pid_t spawned;
static sd_bus *bus;
static char made_dir[64];       /* a runtime dir datd itself creates */

static void teardown(void)
{
        bus = sd_bus_flush_close_unref(bus);
        child_kill(&spawned);
        datd_stop(&d);
        scratch_remove();
        if (made_dir[0])
                rmdir(made_dir);
}

TestSuite(datd_lifecycle, .timeout = 30, .fini = teardown);

static const char *write_config(const char *json)
{
        static char path[SCRATCH_PATH_MAX];

        cr_assert_not_null(scratch_write("datd.conf", json, path));
        return path;
}

/* Runs the build tree's datd with args; returns its exit status. */
static int run_datd(const char *const *args, char **output)
{
        char *argv[16];
        size_t n = 0;
        int r;

        argv[n++] = build_path("daemon/datd");
        for (; *args && n < 15; args++)
                argv[n++] = (char *) *args;
        argv[n] = NULL;
        r = run_capture(argv, output, 10000);
        free(argv[0]);
        return r;
}

static int check_config(const char *json, char **output)
{
        const char *path = write_config(json);

        return run_datd((const char *const[]){ "--check-config", "--config", path, NULL }, output);
}

static bool path_exists(const char *path)
{
        struct stat st;

        return lstat(path, &st) == 0;
}

static void expect_clean_exit_on(int sig)
{
        char bus_socket[PATH_MAX + 16];
        int status;

        snprintf(bus_socket, sizeof(bus_socket), "%s/bus.sock", d.runtime_dir);
        cr_assert(path_exists(d.socket_path));
        cr_assert(path_exists(bus_socket));
        cr_assert_eq(kill(d.pid, sig), 0);
        cr_assert_eq(child_wait(d.pid, 5000, &status), 0, "datd ignored signal %d", sig);
        d.pid = 0;
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "datd exit status 0x%x", status);
        cr_expect_not(path_exists(d.socket_path), "protocol socket left behind");
        cr_expect_not(path_exists(bus_socket), "bus socket left behind");
}

Test(datd_lifecycle, sigterm_exits_0_and_unlinks_the_sockets)
{
        struct stat st;

        cr_assert_eq(datd_start(&d, NULL), 0);
        cr_assert_eq(stat(d.socket_path, &st), 0);
        cr_expect(S_ISSOCK(st.st_mode));
        /* Anyone may connect; the policy decides per request. */
        cr_expect_eq(st.st_mode & 0777, 0666, "mode %o", st.st_mode & 0777);
        expect_clean_exit_on(SIGTERM);
}

Test(datd_lifecycle, sigint_exits_0_and_unlinks_the_sockets)
{
        cr_assert_eq(datd_start(&d, NULL), 0);
        expect_clean_exit_on(SIGINT);
}

Test(datd_lifecycle, sigterm_with_clients_connected_exits_0)
{
        struct datp_ia_open_reply open;
        int fd;

        cr_assert_eq(datd_start(&d, NULL), 0);
        fd = raw_connect_hello(d.socket_path);
        cr_assert_geq(fd, 0);
        cr_assert_eq(raw_ia_open(fd, "shm", &open), 0);
        cr_assert_eq(open.status.dat_status, 0);
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0);
        /* Everything the clients own is freed on the way out. */
        expect_clean_exit_on(SIGTERM);
        cr_expect_eq(raw_wait_eof(fd, RAW_TIMEOUT_MS), 0);
        close(fd);
}

Test(datd_lifecycle, sighup_does_not_stop_datd)
{
        int fd;

        cr_assert_eq(datd_start(&d, NULL), 0);
        cr_assert_eq(kill(d.pid, SIGHUP), 0);
        fd = raw_connect_hello(d.socket_path);
        cr_assert_geq(fd, 0, "HELLO after SIGHUP: %s", strerror(-fd));
        close(fd);
        cr_assert_eq(datd_stop(&d), 0);
}

Test(datd_lifecycle, creates_a_missing_runtime_dir_0755)
{
        char sock[PATH_MAX];
        struct stat st;
        int fd;

        /* The harness makes its own directory; a later --runtime-dir wins. */
        snprintf(made_dir, sizeof(made_dir), "/tmp/datd-made-%d", (int) getpid());
        cr_assert_eq(datd_start_args(&d, NULL, (const char *const[]){ "--runtime-dir", made_dir, NULL }), 0);
        cr_assert_eq(stat(made_dir, &st), 0);
        cr_expect(S_ISDIR(st.st_mode));
        cr_expect_eq(st.st_mode & 0777, 0755, "mode %o", st.st_mode & 0777);
        snprintf(sock, sizeof(sock), "%s/datd.sock", made_dir);
        fd = raw_connect_hello(sock);
        cr_assert_geq(fd, 0);
        close(fd);
        cr_assert_eq(datd_stop(&d), 0);
        /* Both sockets gone, so the directory is empty again. */
        cr_expect_eq(rmdir(made_dir), 0, "%s", strerror(errno));
}

Test(datd_lifecycle, bus_none_serves_no_bus_socket)
{
        char bus_socket[PATH_MAX + 16];
        int fd;

        cr_assert_eq(datd_start_args(&d, NULL, (const char *const[]){ "--bus", "none", NULL }), 0);
        snprintf(bus_socket, sizeof(bus_socket), "%s/bus.sock", d.runtime_dir);
        cr_expect_not(path_exists(bus_socket));
        fd = raw_connect_hello(d.socket_path);
        cr_assert_geq(fd, 0);
        close(fd);
        cr_assert_eq(datd_stop(&d), 0);
}

Test(datd_lifecycle, refuses_to_start_beside_a_running_datd)
{
        char *out = NULL;
        int fd, status;

        cr_assert_eq(datd_start(&d, NULL), 0);
        status = run_datd((const char *const[]){ "--runtime-dir", d.runtime_dir, "--config",
                                                 d.config_path, "--bus", "none", "--log-target",
                                                 "console", NULL }, &out);
        cr_expect_eq(status, 1, "%s", out);
        cr_expect_not_null(strstr(out, "Another datd"), "%s", out);
        free(out);
        /* The first one still owns its socket. */
        fd = raw_connect_hello(d.socket_path);
        cr_assert_geq(fd, 0);
        close(fd);
        cr_assert_eq(datd_stop(&d), 0);
}

/* As systemd does for datd.socket: the listening socket arrives as fd 3. */
Test(datd_lifecycle, serves_the_socket_systemd_passes)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *config = write_config(datd_test_default_config);
        char dir[SCRATCH_PATH_MAX], log[SCRATCH_PATH_MAX];
        int lfd, fd, status;

        cr_assert_not_null(scratch_path("datd.sock", dir));
        cr_assert_lt(strlen(dir), sizeof(sa.sun_path));
        memcpy(sa.sun_path, dir, strlen(dir) + 1);
        *strrchr(dir, '/') = '\0';
        lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        cr_assert_geq(lfd, 0);
        cr_assert_eq(bind(lfd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        cr_assert_eq(listen(lfd, 16), 0);
        spawned = child_exec_datd((const char *const[]){ "--runtime-dir", dir, "--config", config,
                                                         "--bus", "none", "--log-target", "console",
                                                         NULL },
                                  NULL, lfd, scratch_path("datd.log", log));
        cr_assert_gt(spawned, 0);
        close(lfd);

        /* The backlog holds the connection until datd is up and answers. */
        fd = raw_connect_hello(sa.sun_path);
        if (fd < 0)
                cr_assert_fail("HELLO on the passed socket: %s; datd's log:\n%s", strerror(-fd),
                               read_file_str(log));
        close(fd);
        cr_assert_eq(kill(spawned, SIGTERM), 0);
        cr_assert_eq(child_wait(spawned, 5000, &status), 0);
        spawned = 0;
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status 0x%x", status);
        /* The socket is systemd's: datd must leave it. */
        cr_expect(path_exists(sa.sun_path));
}

/* Whoever may write to the runtime directory could replace datd's sockets
 * or plant a link where datd creates one: datd refuses such a directory
 * (datd.conf(5), runtime_dir) and exits 1 naming why. */
static void expect_runtime_dir_refused(uid_t owner, mode_t mode, const char *needle)
{
        const char *config = write_config(datd_test_default_config);
        char *out = NULL;
        int status;

        snprintf(made_dir, sizeof(made_dir), "/tmp/datd-foreign-%d", (int) getpid());
        cr_assert_eq(mkdir(made_dir, 0755), 0, "%s", strerror(errno));
        cr_assert_eq(chown(made_dir, owner, (gid_t) -1), 0, "%s", strerror(errno));
        cr_assert_eq(chmod(made_dir, mode), 0, "%s", strerror(errno));
        status = run_datd((const char *const[]){ "--runtime-dir", made_dir, "--config", config,
                                                 "--bus", "private", "--log-target", "console",
                                                 NULL }, &out);
        cr_expect_eq(status, 1, "datd exited with %d: %s", status, out ? out : "");
        cr_expect(out && strstr(out, needle), "\"%s\" not in: %s", needle, out ? out : "");
        free(out);
}

Test(datd_lifecycle, refuses_a_runtime_dir_owned_by_another_user)
{
        expect_runtime_dir_refused(NOBODY_UID, 0755, "belongs to uid 65534, not to datd's uid 0");
}

Test(datd_lifecycle, refuses_a_runtime_dir_others_may_write_sticky_or_not)
{
        expect_runtime_dir_refused(0, 0777, "mode 0777 lets others than its owner write to it");
        rmdir(made_dir);
        expect_runtime_dir_refused(0, 01777, "mode 1777 lets others than its owner write to it");
}

/* --check-config says OK to no runtime directory the start refuses: one that
 * exists is checked as the start checks it, named in datd.conf or on the
 * command line; a missing one the start would make, and passes. */
Test(datd_lifecycle, check_config_refuses_a_runtime_dir_the_start_refuses)
{
        static const char needle[] = "mode 0775 lets others than its owner write to it";
        char json[256], *out = NULL;
        int r;

        snprintf(made_dir, sizeof(made_dir), "/tmp/datd-check-%d", (int) getpid());
        snprintf(json, sizeof(json), "{\"verbs\": false, \"runtime_dir\": \"%s\"}", made_dir);
        r = check_config(json, &out);
        cr_expect_eq(r, 0, "a missing runtime dir: exit %d: %s", r, out);
        free(out);
        out = NULL;
        cr_assert_eq(mkdir(made_dir, 0755), 0, "%s", strerror(errno));
        cr_assert_eq(chmod(made_dir, 0775), 0, "%s", strerror(errno));
        r = check_config(json, &out);
        cr_expect_eq(r, 1, "exit %d: %s", r, out);
        cr_expect(out && strstr(out, needle), "\"%s\" not in: %s", needle, out ? out : "");
        free(out);
        out = NULL;
        r = run_datd((const char *const[]){ "--check-config", "--config",
                                            write_config("{\"verbs\": false}"), "--runtime-dir",
                                            made_dir, NULL }, &out);
        cr_expect_eq(r, 1, "--runtime-dir: exit %d: %s", r, out);
        cr_expect(out && strstr(out, needle), "\"%s\" not in: %s", needle, out ? out : "");
        free(out);
        out = NULL;
        /* The start: the same words. */
        r = run_datd((const char *const[]){ "--config", write_config(json), "--bus", "none",
                                            "--log-target", "console", NULL }, &out);
        cr_expect_eq(r, 1, "the start: exit %d: %s", r, out);
        cr_expect(out && strstr(out, needle), "\"%s\" not in: %s", needle, out ? out : "");
        free(out);
}

/* ---- the command line ------------------------------------------------------ */

Test(datd_lifecycle, version_prints_the_package_version)
{
        char *out = NULL;

        cr_assert_eq(run_datd((const char *const[]){ "--version", NULL }, &out), 0);
        cr_expect_not_null(strstr(out, PACKAGE_VERSION), "%s", out);
        free(out);
}

Test(datd_lifecycle, bad_option_values_are_usage_errors)
{
        cr_expect_eq(run_datd((const char *const[]){ "--log-level", "loud", NULL }, NULL), 1);
        cr_expect_eq(run_datd((const char *const[]){ "--bus", "session", NULL }, NULL), 1);
        cr_expect_eq(run_datd((const char *const[]){ "--log-target", "syslog", NULL }, NULL), 1);
        cr_expect_eq(run_datd((const char *const[]){ "--runtime-dir", "relative/dir", NULL }, NULL), 1);
        cr_expect_eq(run_datd((const char *const[]){ "--no-such-option", NULL }, NULL), 1);
}

/* ---- --check-config -------------------------------------------------------- */

Test(datd_lifecycle, check_config_accepts_a_full_config)
{
        char *out = NULL;
        int r = check_config(
                "{\"runtime_dir\": \"/run/datd\", \"log_level\": \"notice\", \"bus\": \"auto\",\n"
                " \"cm_port\": 7471, \"verbs\": true,\n"
                " \"ias\": [{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"},\n"
                "         {\"name\": \"tcp\", \"transport\": \"tcp\", \"interface\": \"auto\",\n"
                "          \"allow_users\": [\"root\"], \"allow_groups\": [\"nogroup\"]},\n"
                "         {\"name\": \"tcp6\", \"transport\": \"tcp\", \"address\": \"::1\"},\n"
                "         {\"name\": \"ib\", \"transport\": \"verbs\", \"device\": \"mlx5_0\", \"port\": 1}],\n"
                " \"limits\": {\"max_clients\": 1024, \"max_clients_per_uid\": 256,\n"
                "   \"max_ias_per_client\": 16, \"max_pending_replies\": 64,\n"
                "   \"max_protocol_errors\": 8, \"max_bus_connections\": 64, \"max_eps\": 4096,\n"
                "   \"max_evds\": 4096, \"max_pzs\": 256, \"max_lmrs\": 65536, \"max_rmrs\": 65536,\n"
                "   \"max_srqs\": 1024, \"max_lmr_bytes\": 17179869184, \"max_private_data\": 256}}\n",
                &out);

        cr_expect_eq(r, 0, "%s", out);
        free(out);
}

/* Exit status 1, and the output names what is wrong. */
static void expect_config_error(const char *json, const char *needle)
{
        char *out = NULL, path[SCRATCH_PATH_MAX];
        int r = check_config(json, &out);

        cr_expect_eq(r, 1, "exit %d: %s", r, out);
        cr_expect_not_null(strstr(out, needle), "\"%s\" not in: %s", needle, out);
        cr_expect_not_null(strstr(out, scratch_path("datd.conf", path)), "file not named: %s", out);
        free(out);
}

/* --check-config says OK only to what datd would start with: an IA address
 * is looked for on this host's interfaces as at startup, with the same
 * message when it is on none (192.0.2.0/24 is TEST-NET-1). */
Test(datd_lifecycle, check_config_refuses_an_address_on_no_interface_as_startup_does)
{
        static const char json[] = "{\"verbs\": false, \"ias\": [{\"name\": \"tcp\", \"transport\":"
                                   " \"tcp\", \"address\": \"192.0.2.77\"}]}";
        static const char message[] = "IA tcp: address 192.0.2.77 is on no interface of this host.";
        char *out = NULL, dir[SCRATCH_PATH_MAX];
        int r = check_config(json, &out);

        cr_expect_eq(r, 1, "exit %d: %s", r, out);
        cr_expect_not_null(strstr(out, message), "%s", out);
        free(out);
        out = NULL;
        cr_assert_not_null(scratch_path("datd.sock", dir));
        *strrchr(dir, '/') = '\0';
        r = run_datd((const char *const[]){ "--config", write_config(json), "--runtime-dir", dir,
                                            "--bus", "none", "--log-target", "console", NULL }, &out);
        cr_expect_eq(r, 1, "exit %d: %s", r, out);
        cr_expect_not_null(strstr(out, message), "%s", out);
        free(out);
}

/* datd.conf(5): shm_ring_bytes is a power of two from 4096 to 64 MiB. */
Test(datd_lifecycle, check_config_checks_shm_ring_bytes)
{
        char *out = NULL;

        cr_expect_eq(check_config("{\"limits\": {\"shm_ring_bytes\": 4096, "
                                  "\"max_shm_bytes_per_client\": 1}}", &out), 0, "%s", out);
        free(out);
        out = NULL;
        cr_expect_eq(check_config("{\"limits\": {\"shm_ring_bytes\": 67108864}}", &out), 0, "%s", out);
        free(out);
        expect_config_error("{\"limits\": {\"shm_ring_bytes\": 12288}}",
                            "$.limits.shm_ring_bytes: 12288 is not a power of two");
        expect_config_error("{\"limits\": {\"shm_ring_bytes\": 2048}}", "$.limits.shm_ring_bytes");
        expect_config_error("{\"limits\": {\"shm_ring_bytes\": 134217728}}", "$.limits.shm_ring_bytes");
        expect_config_error("{\"limits\": {\"max_shm_bytes_per_client\": 0}}",
                            "$.limits.max_shm_bytes_per_client");
}

Test(datd_lifecycle, check_config_rejects_an_unknown_key)
{
        expect_config_error("{\"limits\": {\"max_client\": 5}}", "unknown key \"max_client\"");
        expect_config_error("{\"ias\": [{\"name\": \"x\", \"transport\": \"shm\", \"adress\": \"1.2.3.4\"}]}",
                            "$.ias[0]: unknown key \"adress\"");
}

Test(datd_lifecycle, check_config_rejects_a_wrong_type_with_its_path)
{
        expect_config_error("{\"limits\": {\"max_eps\": \"many\"}}", "$.limits.max_eps");
        expect_config_error("{\"verbs\": 1}", "$.verbs: expected a boolean");
        expect_config_error("{\"ias\": {}}", "$.ias: expected an array");
}

Test(datd_lifecycle, check_config_rejects_a_duplicate_ia_name)
{
        expect_config_error("{\"ias\": [{\"name\": \"a\", \"transport\": \"shm\"},"
                            " {\"name\": \"a\", \"transport\": \"tcp\"}]}",
                            "duplicate IA name \"a\"");
}

Test(datd_lifecycle, check_config_rejects_values_out_of_range)
{
        expect_config_error("{\"limits\": {\"max_private_data\": 32}}", "$.limits.max_private_data");
        expect_config_error("{\"limits\": {\"max_clients\": 0}}", "$.limits.max_clients");
        expect_config_error("{\"cm_port\": 65536}", "$.cm_port");
        expect_config_error("{\"log_level\": \"loud\"}", "$.log_level");
        expect_config_error("{\"runtime_dir\": \"run/datd\"}", "$.runtime_dir");
}

Test(datd_lifecycle, check_config_rejects_what_a_transport_cannot_use)
{
        expect_config_error("{\"ias\": [{\"name\": \"s\", \"transport\": \"shm\", \"interface\": \"lo\"}]}",
                            "\"interface\" does not apply to transport shm");
        expect_config_error("{\"ias\": [{\"name\": \"t\", \"transport\": \"tcp\", \"interface\": \"lo\","
                            " \"address\": \"127.0.0.1\"}]}", "either");
        expect_config_error("{\"ias\": [{\"name\": \"v\", \"transport\": \"verbs\"}]}",
                            "missing key \"device\"");
        expect_config_error("{\"ias\": [{\"name\": \"t\", \"transport\": \"tcp\", \"address\": \"host\"}]}",
                            "not a numeric");
        expect_config_error("{\"ias\": [{\"transport\": \"shm\"}]}", "missing key \"name\"");
}

Test(datd_lifecycle, check_config_rejects_unknown_users_and_groups)
{
        expect_config_error("{\"ias\": [{\"name\": \"s\", \"transport\": \"shm\","
                            " \"allow_users\": [\"no-such-user-datd\"]}]}", "unknown user");
        expect_config_error("{\"ias\": [{\"name\": \"s\", \"transport\": \"shm\","
                            " \"allow_groups\": [\"no-such-group-datd\"]}]}", "unknown group");
}

Test(datd_lifecycle, check_config_rejects_an_unknown_qos_class)
{
        expect_config_error("{\"ias\": [{\"name\": \"s\", \"transport\": \"shm\","
                            " \"qos\": [\"best_effort\", \"fastest\"]}]}",
                            "$.ias[0].qos[1]: unknown QoS \"fastest\"");
        expect_config_error("{\"ias\": [{\"name\": \"s\", \"transport\": \"shm\", \"qos\": \"premium\"}]}",
                            "$.ias[0].qos: expected an array");
}

Test(datd_lifecycle, check_config_rejects_broken_json)
{
        expect_config_error("{\"log_level\": \"info\",}", ":1:");
        expect_config_error("{\"bus\": \"none\", \"bus\": \"auto\"}", "duplicate");
}

Test(datd_lifecycle, a_missing_explicit_config_is_an_error)
{
        char *out = NULL;
        int r = run_datd((const char *const[]){ "--check-config", "--config",
                                                "/nonexistent/datd.conf", NULL }, &out);

        cr_expect_eq(r, 1, "%s", out);
        cr_expect_not_null(strstr(out, "/nonexistent/datd.conf"), "%s", out);
        free(out);
}
