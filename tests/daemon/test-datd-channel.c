/* Data channels (PROTOCOL.md, "EV_DATA_CHANNEL"): when datd establishes a
 * connection it hands both ends the means to move data without it.  Raw
 * protocol clients receive the event and its descriptors, and the shm
 * region is attached with libdat's own shm_link code to show that the two
 * ends really share their rings.
 *
 * The DAT rule behind all of it: dat_ep_connect(3DAT) / dat_cr_accept(3DAT)
 * -- once DAT_CONNECTION_EVENT_ESTABLISHED is delivered the endpoint can
 * post data transfer operations, so the channel must be there before it. */
#include "config.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "common/macro.h"
#include "libdat/shm_link.h"
#include "libdat/shm_region.h"
#include "tests/daemon/bus-client.h"
#include "tests/daemon/child.h"
#include "tests/daemon/conn-expect.h"
#include "tests/daemon/raw-client.h"
#include "tests/harness.h"
#include "tests/netns.h"

#define RING_DEFAULT 262144u
#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static struct datd_instance d;
static struct cc a = { .fd = -1 }, b = { .fd = -1 };
static struct sockaddr_storage lo;
static socklen_t lo_len;
static pid_t kid;
/* The channels of the last connection established_with_channels() made:
 * each end's event and descriptors (ca/fa: a's, cb/fb: b's). */
static union datp_message ca, cb;
_Static_assert(DATP_CHANNEL_MAX_FDS == 5, "fa and fb start with every descriptor -1");
static int fa[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 },
           fb[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 };
static uint32_t a_conn, b_conn;
/* Two hosts (tests/netns.h): a on host 1 (passive), b on host 0 (active). */
static struct test_net *net;
static struct datd_instance hd[2];

static void close_fds(int *fds);

static void teardown(void)
{
        close_fds(fa);
        close_fds(fb);
        child_kill(&kid);
        cc_close(&a);
        cc_close(&b);
        datd_stop(&d);
        for (unsigned i = 0; i < 2; i++)
                datd_stop(&hd[i]);
        test_net_destroy(&net);
}

/* One timeout for every suite of this program (criterion 2.4 leaks one
 * record per distinct value). */
#define TEST_TIMEOUT_S 60
TestSuite(datd_channel, .timeout = TEST_TIMEOUT_S, .fini = teardown);

static void hosts_setup(void)
{
        const char *why;

        if (!test_net_available(&why))
                cr_skip_test("%s", why);
}

TestSuite(datd_channel_hosts, .init = hosts_setup, .fini = teardown, .timeout = TEST_TIMEOUT_S);

/* datd with shm and tcp IAs on 127.0.0.1 and extra "limits" JSON (may be
 * ""); clients a and b on IA ia, keeping their channels. */
static void start(const char *ia, const char *limits)
{
        char config[1024];

        snprintf(config, sizeof(config),
                 "{\"log_level\": \"debug\", \"verbs\": false, \"ias\": ["
                 "{\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"},"
                 "{\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"127.0.0.1\"}]"
                 "%s%s%s}", limits[0] ? ", \"limits\": {" : "", limits, limits[0] ? "}" : "");
        close_fds(fa);
        close_fds(fb);
        cr_assert_eq(datd_start(&d, config), 0, "datd did not start");
        cr_assert_eq(cc_open(&a, d.socket_path, ia), 0);
        cr_assert_eq(cc_open(&b, d.socket_path, ia), 0);
        a.keep_channels = b.keep_channels = true;
        lo_len = cc_addr4(&lo, "127.0.0.1");
}

static void stop(void)
{
        child_kill(&kid);
        cc_close(&a);
        cc_close(&b);
        cr_expect_eq(datd_stop(&d), 0, "datd's exit status after SIGTERM");
}

static void close_fds(int *fds)
{
        for (unsigned i = 0; i < DATP_CHANNEL_MAX_FDS; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

/* The memfds datd holds: its descriptors that name "memfd:datd-shm". */
static int datd_regions(void)
{
        char dir[64], path[PATH_MAX], target[PATH_MAX];
        struct dirent *e;
        DIR *dp;
        int n = 0;

        snprintf(dir, sizeof(dir), "/proc/%d/fd", (int) d.pid);
        dp = opendir(dir);
        cr_assert_not_null(dp, "%s: %m", dir);
        while ((e = readdir(dp))) {
                ssize_t len;

                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                len = readlink(path, target, sizeof(target) - 1);
                if (len <= 0)
                        continue;
                target[len] = '\0';
                if (strstr(target, "memfd:datd-shm"))
                        n++;
        }
        closedir(dp);
        return n;
}

/* Waits (bounded) until datd holds n regions: it frees an end right after
 * sending its last event, so the test may look a moment too early. */
static int wait_regions(int n)
{
        int got = -1;

        for (int i = 0; i < 500 && (got = datd_regions()) != n; i++)
                usleep(10000);
        return got;
}

/* The pid a pidfd refers to (its fdinfo "Pid:" line), or -1. */
static long pidfd_pid(int fd)
{
        char path[64], line[256];
        long pid = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Pid: %ld", &pid) == 1)
                        break;
        fclose(f);
        return pid;
}

/* a listens on qual, b connects, a accepts; each end's EV_DATA_CHANNEL
 * (into *ca / *cb, its descriptors into fa / fb) must come before its
 * ESTABLISHED. */
static void establish_with_channels(uint64_t qual)
{
        uint64_t a_seq, b_seq;
        int r;

        close_fds(fa);
        close_fds(fb);
        expect_listen(&a, qual);
        b_conn = expect_connect(&b, &lo, lo_len, qual, UINT64_MAX, NULL, 0);
        cr_assert_eq(cc_accept(&a, expect_request(&a, NULL), NULL, 0, &a_conn), DAT_SUCCESS);
        r = cc_channel(&b, &cb, fb, EV_MS);
        cr_assert_eq(r, 0, "active end: no EV_DATA_CHANNEL: %s", strerror(-r));
        b_seq = b.last_seq;
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        cr_expect_lt(b_seq, b.last_seq, "active end: the channel came after ESTABLISHED");
        r = cc_channel(&a, &ca, fa, EV_MS);
        cr_assert_eq(r, 0, "passive end: no EV_DATA_CHANNEL: %s", strerror(-r));
        a_seq = a.last_seq;
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        cr_expect_lt(a_seq, a.last_seq, "passive end: the channel came after ESTABLISHED");
}

/* PROTOCOL.md, EV_DATA_CHANNEL: same conn_id and ep_handle as the EV_CONN
 * that follows, the right side, the ring size of datd.conf. */
Test(datd_channel, shm_channel_precedes_established_on_both_ends)
{

        start("shm", "");
        establish_with_channels(7001);
        /* The active end (b) is side 0, the passive end (a) side 1. */
        cr_expect_eq(cb.ev_data_channel.kind, DATP_CHANNEL_SHM);
        cr_expect_eq(cb.ev_data_channel.conn_id, b_conn);
        cr_expect_eq(cb.ev_data_channel.ep_handle, 0x7000);
        cr_expect_eq(cb.ev_data_channel.ia_id, b.ia_id);
        cr_expect_eq(cb.ev_data_channel.side, 0);
        cr_expect_eq(ca.ev_data_channel.kind, DATP_CHANNEL_SHM);
        cr_expect_eq(ca.ev_data_channel.conn_id, a_conn);
        cr_expect_eq(ca.ev_data_channel.ep_handle, 0x8000);
        cr_expect_eq(ca.ev_data_channel.side, 1);
        for (int i = 0; i < 2; i++) {
                const struct datp_ev_data_channel *e = i ? &cb.ev_data_channel : &ca.ev_data_channel;

                cr_expect_eq(e->flags, DATP_CHANNEL_PIPES, "both ends speak version 3");
                cr_expect_eq(e->nfds, 5, "with a pidfd of the peer");
                cr_expect_eq(e->ring_size, RING_DEFAULT);
                cr_expect_eq(e->region_size, shm_link_region_size(RING_DEFAULT));
                cr_expect_eq(e->peer_pid, getpid());
                cr_expect_eq(e->peer_uid, getuid());
        }
        close_fds(fa);
        close_fds(fb);
        stop();
}

/* The region is a memfd sealed against resizing (and further sealing), of
 * region_size bytes; both ends get the same one.  Each end gets the read
 * end of its doorbell pipe, the write end of the peer's, and a read end of
 * the peer's of its own: the peer's sleeper is not affected by what it
 * does with it, and while it holds it, ringing the peer is never SIGPIPE. */
Test(datd_channel, shm_region_is_a_sealed_memfd_shared_by_both_ends)
{
        struct stat sa, sb, x;
        uint64_t one = 1, got[4];

        start("shm", "");
        establish_with_channels(7002);
        cr_assert_eq(fstat(fa[0], &sa), 0);
        cr_assert_eq(fstat(fb[0], &sb), 0);
        cr_expect(S_ISREG(sa.st_mode));
        cr_expect_eq((uint64_t) sa.st_size, ca.ev_data_channel.region_size);
        cr_expect_eq(sa.st_ino, sb.st_ino, "not the same region");
        cr_expect_eq(fcntl(fa[0], F_GET_SEALS) & SEALS, SEALS);
        cr_expect_lt(ftruncate(fa[0], 0), 0, "the region could shrink");
        for (int i = 1; i <= 3; i++) {
                cr_assert_eq(fstat(fa[i], &x), 0);
                cr_expect(S_ISFIFO(x.st_mode), "[%d] is no pipe", i);
                cr_expect_eq(fcntl(fa[i], F_GETFL) & (O_ACCMODE | O_NONBLOCK),
                             (i == 2 ? O_WRONLY : O_RDONLY) | O_NONBLOCK, "[%d]", i);
        }
        /* One page of buffer (daemon/channel.c). */
        cr_expect_eq(fcntl(fa[1], F_GETPIPE_SZ), sysconf(_SC_PAGESIZE));
        cr_expect_eq(fcntl(fb[1], F_GETPIPE_SZ), sysconf(_SC_PAGESIZE));
        /* [1] mine, [2] the peer's: what b rings with [2] arrives at a's
         * [1], and the other way round. */
        cr_assert_eq(write(fb[2], &one, sizeof(one)), (ssize_t) sizeof(one));
        cr_expect_eq(read(fa[1], got, sizeof(got)), (ssize_t) sizeof(one));
        cr_assert_eq(write(fa[2], &one, sizeof(one)), (ssize_t) sizeof(one));
        cr_expect_eq(read(fb[1], got, sizeof(got)), (ssize_t) sizeof(one));
        cr_expect_lt(read(fa[1], got, sizeof(got)), 0, "rang twice");
        /* [3]: the pipe of the peer's [1], another open file: a blocking
         * [3] leaves the sleeper's [1] non-blocking. */
        cr_assert_eq(fstat(fb[1], &sb), 0);
        cr_assert_eq(fstat(fa[3], &x), 0);
        cr_expect_eq(x.st_ino, sb.st_ino, "a's [3] is not b's doorbell");
        cr_assert_eq(fcntl(fa[3], F_SETFL, 0), 0);
        cr_expect(fcntl(fb[1], F_GETFL) & O_NONBLOCK, "a changed b's doorbell");
        /* b's sleeper is gone: ringing it is no SIGPIPE (this process
         * would die of it). */
        close(fb[1]);
        fb[1] = -1;
        cr_expect_eq(write(fa[2], &one, sizeof(one)), (ssize_t) sizeof(one));
        cr_expect_neq(fa[1], fa[2]);
        cr_expect_eq(datd_regions(), 1, "datd keeps the region while the connection is up");
        close_fds(fa);
        close_fds(fb);
        stop();
}

/* A client of version 2 or less knows no pipes: when either end speaks
 * only version 2, both get version 2's doorbells, datagram sockets, the
 * one the peer rings and the one that rings it. */
Test(datd_channel, an_end_of_version_2_gets_socket_doorbells)
{
        for (int v3 = 0; v3 < 2; v3++) {
                datd_stop(&d);
                close_fds(fa);
                close_fds(fb);
                cr_assert_eq(datd_start(&d, "{\"log_level\": \"debug\", \"verbs\": false, \"ias\": ["
                                           "{\"name\": \"shm\", \"transport\": \"shm\","
                                           " \"address\": \"127.0.0.1\"}]}"), 0);
                /* b (active) of version 2; a of version 3, then 2. */
                raw_version = 2;
                cr_assert_eq(cc_open(&b, d.socket_path, "shm"), 0);
                raw_version = v3 ? 3 : 2;
                cr_assert_eq(cc_open(&a, d.socket_path, "shm"), 0);
                raw_version = DATP_VERSION_MAX;
                cr_expect_eq(a.version, v3 ? 3 : 2);
                a.keep_channels = b.keep_channels = true;
                lo_len = cc_addr4(&lo, "127.0.0.1");
                establish_with_channels(7010 + (uint64_t) v3);
                for (int i = 0; i < 2; i++) {
                        const struct datp_ev_data_channel *e = i ? &cb.ev_data_channel : &ca.ev_data_channel;
                        int *fds = i ? fb : fa;
                        int type = 0;
                        socklen_t len = sizeof(type);

                        cr_expect_eq(e->flags, 0);
                        cr_expect_eq(e->nfds, 4, "the region, two sockets and the pidfd");
                        for (int k = 1; k <= 2; k++) {
                                cr_assert_eq(getsockopt(fds[k], SOL_SOCKET, SO_TYPE, &type, &len), 0);
                                cr_expect_eq(type, SOCK_DGRAM);
                        }
                        cr_expect_eq(pidfd_pid(fds[3]), getpid());
                }
                {
                        uint64_t one = 1, got = 0;

                        cr_assert_eq(send(fb[2], &one, sizeof(one), MSG_DONTWAIT), (ssize_t) sizeof(one));
                        cr_expect_eq(recv(fa[1], &got, sizeof(got), MSG_DONTWAIT), (ssize_t) sizeof(got));
                }
                cc_close(&a);
                cc_close(&b);
        }
        close_fds(fa);
        close_fds(fb);
        cr_expect_eq(datd_stop(&d), 0, "datd's exit status after SIGTERM");
}

/* The two ends attach with shm_link and what one writes the other reads;
 * a sleeping reader's doorbell rings. */
Test(datd_channel, shm_link_carries_bytes_between_the_two_ends)
{
        struct shm_link la, lb;
        void *ma, *mb;
        size_t sa, sb;
        char out[] = "through the ring", in[sizeof(out)] = "";
        struct iovec wv = { out, sizeof(out) }, rv = { in, sizeof(in) };
        struct pollfd p;

        start("shm", "");
        establish_with_channels(7003);
        cr_assert_eq(shm_region_map(fa[0], ca.ev_data_channel.region_size, &ma, &sa), 0);
        cr_assert_eq(shm_region_map(fb[0], cb.ev_data_channel.region_size, &mb, &sb), 0);
        cr_assert_eq(shm_link_attach(ma, sa, ca.ev_data_channel.ring_size, ca.ev_data_channel.side,
                                     fa[1], fa[2], &la), 0);
        cr_assert_eq(shm_link_attach(mb, sb, cb.ev_data_channel.ring_size, cb.ev_data_channel.side,
                                     fb[1], fb[2], &lb), 0);
        /* a (passive) goes to sleep on its doorbell; b writes. */
        cr_expect(shm_link_arm(&la, true, false));
        cr_assert_eq(shm_link_writev(&lb, &wv, 1), (ssize_t) sizeof(out));
        p = (struct pollfd) { .fd = fa[1], .events = POLLIN };
        cr_expect_eq(poll(&p, 1, EV_MS), 1, "a's doorbell did not ring");
        shm_link_doorbell_drain(&la);
        shm_link_disarm(&la);
        cr_assert_eq(shm_link_readv(&la, &rv, 1), (ssize_t) sizeof(out));
        cr_expect_str_eq(in, out);
        /* And the other direction. */
        memset(in, 0, sizeof(in));
        cr_assert_eq(shm_link_writev(&la, &wv, 1), (ssize_t) sizeof(out));
        cr_assert_eq(shm_link_readv(&lb, &rv, 1), (ssize_t) sizeof(out));
        cr_expect_str_eq(in, out);
        shm_region_unmap(ma, sa);
        shm_region_unmap(mb, sb);
        close_fds(fa);
        close_fds(fb);
        stop();
}

/* A child process connects: each end's pidfd names the other process, and
 * the child's death is seen on it; the region goes once both ends are gone. */
Test(datd_channel, pidfd_names_the_peer_and_the_region_goes_with_the_connection)
{
        union datp_message ch, ev;
        int fds[DATP_CHANNEL_MAX_FDS], sync[2];
        uint32_t a_conn;
        struct pollfd p;
        char c;

        start("shm", "");
        expect_listen(&a, 7004);
        cr_assert_eq(pipe(sync), 0);
        kid = fork();
        cr_assert_geq(kid, 0);
        if (kid == 0) {
                struct cc k = { .fd = -1 };
                union datp_message m;
                int kfds[DATP_CHANNEL_MAX_FDS];
                uint32_t id;
                int ok;

                close(sync[0]);
                ok = cc_open(&k, d.socket_path, "shm") == 0 ? 0 : 1;
                k.keep_channels = true;
                if (!ok)
                        ok = cc_connect(&k, (struct sockaddr *) &lo, lo_len, 7004, UINT64_MAX, NULL, 0,
                                        &id) == 0 ? 0 : 2;
                if (!ok)
                        ok = cc_channel(&k, &m, kfds, EV_MS) == 0 ? 0 : 3;
                if (!ok)
                        ok = m.ev_data_channel.nfds == 5 ? 0 : 4;
                if (!ok)
                        ok = m.ev_data_channel.peer_pid == getppid() ? 0 : 5;
                if (!ok)
                        ok = pidfd_pid(kfds[4]) == getppid() ? 0 : 6;
                c = (char) ('0' + ok);
                if (write(sync[1], &c, 1) != 1)
                        _exit(1);
                pause();
                _exit(0);
        }
        close(sync[1]);
        cr_assert_eq(cc_accept(&a, expect_request(&a, NULL), NULL, 0, &a_conn), DAT_SUCCESS);
        cr_assert_eq(cc_channel(&a, &ch, fds, EV_MS), 0);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        cr_assert_eq(read(sync[0], &c, 1), 1);
        close(sync[0]);
        cr_expect_eq(c, '0', "the child's channel did not name this process (step %c)", c);
        cr_expect_eq(ch.ev_data_channel.peer_pid, kid);
        cr_assert_eq(ch.ev_data_channel.nfds, 5);
        cr_expect_eq(pidfd_pid(fds[4]), kid, "the pidfd does not name the peer");
        cr_expect_eq(datd_regions(), 1);
        /* The peer dies: its pidfd says so, the connection breaks, the region goes. */
        kill(kid, SIGKILL);
        p = (struct pollfd) { .fd = fds[4], .events = POLLIN };
        cr_expect_eq(poll(&p, 1, EV_MS), 1, "the pidfd did not report the peer's death");
        cr_assert_eq(cc_event(&a, DATP_EV_CONN, &ev, EV_MS), 0);
        cr_expect_eq(ev.ev_conn.event, DAT_CONNECTION_EVENT_BROKEN);
        child_kill(&kid);
        cr_expect_eq(wait_regions(0), 0, "datd still holds the region");
        close_fds(fds);
        stop();
}

/* The region also goes after an orderly disconnect, and a client that
 * closes its socket (dies) takes its connections' regions with it. */
Test(datd_channel, region_is_freed_after_disconnect_and_after_death)
{

        start("shm", "");
        establish_with_channels(7005);
        close_fds(fa);
        close_fds(fb);
        establish_with_channels(7006);
        close_fds(fa);
        close_fds(fb);
        cr_expect_eq(datd_regions(), 2);
        cr_assert_eq(cc_disconnect(&b, b_conn, DATP_CLOSE_GRACEFUL), DAT_SUCCESS);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        cr_expect_eq(wait_regions(1), 1, "the disconnected connection's region is still held");
        cc_close(&a);
        expect_ev_conn(&b, 0, DAT_CONNECTION_EVENT_BROKEN, NULL);
        cr_expect_eq(wait_regions(0), 0, "the dead client's region is still held");
        stop();
}

/* datd.conf max_shm_bytes_per_client: a connection that would take a client
 * past it fails on both ends (dat_cr_accept(3DAT): ACCEPT_COMPLETION_ERROR;
 * dat_ep_connect(3DAT): NON_PEER_REJECTED), and the log says why. */
Test(datd_channel, max_shm_bytes_per_client_refuses_the_connection)
{
        uint32_t id, cr;
        char limits[128];
        _cleanup_free_ char *log = NULL;

        /* Room for one region per client, not two. */
        snprintf(limits, sizeof(limits), "\"max_shm_bytes_per_client\": %zu",
                 shm_link_region_size(RING_DEFAULT) * 3 / 2);
        start("shm", limits);
        establish_with_channels(7007);
        close_fds(fa);
        close_fds(fb);
        id = expect_connect(&b, &lo, lo_len, 7007, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        cr_assert_eq(cc_accept(&a, cr, NULL, 0, &a_conn), DAT_SUCCESS);
        expect_ev_conn(&b, id, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL);
        cr_expect_eq(cc_no_event(&a, DATP_EV_DATA_CHANNEL, 100), 0, "a refused end got a channel");
        cr_expect_eq(cc_no_event(&b, DATP_EV_DATA_CHANNEL, 100), 0, "a refused end got a channel");
        cr_expect_eq(a.n_channels, 1);
        cr_expect_eq(datd_regions(), 1, "the refused connection left a region behind");
        /* The first connection is untouched. */
        cr_expect_eq(cc_no_event(&b, DATP_EV_CONN, 100), 0);
        log = read_file_str(d.log_path);
        cr_assert_not_null(log);
        cr_expect_not_null(strstr(log, "max_shm_bytes_per_client"), "the log does not say why");
        stop();
}

/* datd.conf shm_ring_bytes sets the ring size (the smallest allowed here). */
Test(datd_channel, shm_ring_bytes_sets_the_ring_size)
{
        struct stat st;

        start("shm", "\"shm_ring_bytes\": 4096");
        establish_with_channels(7008);
        cr_expect_eq(ca.ev_data_channel.ring_size, 4096);
        cr_expect_eq(cb.ev_data_channel.ring_size, 4096);
        cr_expect_eq(ca.ev_data_channel.region_size, shm_link_region_size(4096));
        cr_assert_eq(fstat(fa[0], &st), 0);
        cr_expect_eq((uint64_t) st.st_size, shm_link_region_size(4096));
        close_fds(fa);
        close_fds(fb);
        stop();
}

/* DBUS-API.md: ListConnections shows each end's shm_bytes (0 without a
 * region: the tcp IA). */
Test(datd_channel, list_connections_shows_shm_bytes)
{
        struct bus_connection rows[4];
        struct cc t = { .fd = -1 }, u = { .fd = -1 };
        uint32_t t_conn, u_conn;
        sd_bus *bus = NULL;
        size_t n;

        start("shm", "");
        establish_with_channels(7009);
        cr_assert_eq(cc_open(&t, d.socket_path, "tcp"), 0);
        cr_assert_eq(cc_open(&u, d.socket_path, "tcp"), 0);
        expect_established(&t, &u, &lo, lo_len, 7010, &t_conn, &u_conn);
        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0);
        cr_assert_eq(bus_list_connections(bus, rows, ARRAY_SIZE(rows), &n), 0);
        cr_expect_eq(n, 4);
        for (size_t i = 0; i < n && i < ARRAY_SIZE(rows); i++)
                cr_expect_eq(rows[i].shm_bytes, strcmp(rows[i].ia, "shm") == 0
                             ? ca.ev_data_channel.region_size : 0, "conn %u", rows[i].id);
        bus = sd_bus_flush_close_unref(bus);
        cc_close(&t);
        cc_close(&u);
        stop();
}

/* ---- tcp --------------------------------------------------------------------- */

/* The two sockets are the two ends of one TCP connection: what one writes
 * the other reads, both ways. */
static void expect_connected_pair(int x, int y)
{
        struct sockaddr_storage xl, xp, yl, yp;
        socklen_t n1 = sizeof(xl), n2 = sizeof(xp), n3 = sizeof(yl), n4 = sizeof(yp);
        struct timeval tv = { .tv_sec = 5 };
        char buf[32] = "";
        int type = 0;
        socklen_t tl = sizeof(type);

        cr_assert_eq(getsockopt(x, SOL_SOCKET, SO_TYPE, &type, &tl), 0, "not a socket");
        cr_expect_eq(type, SOCK_STREAM);
        cr_assert_eq(getsockname(x, (struct sockaddr *) &xl, &n1), 0);
        cr_assert_eq(getpeername(x, (struct sockaddr *) &xp, &n2), 0, "not connected");
        cr_assert_eq(getsockname(y, (struct sockaddr *) &yl, &n3), 0);
        cr_assert_eq(getpeername(y, (struct sockaddr *) &yp, &n4), 0, "not connected");
        cr_expect(xl.ss_family == AF_INET || xl.ss_family == AF_INET6);
        setsockopt(x, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(y, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        cr_assert_eq(write(x, "ping", 4), 4);
        cr_assert_eq(read(y, buf, sizeof(buf)), 4, "nothing arrived: %m");
        cr_expect_arr_eq(buf, "ping", 4);
        cr_assert_eq(write(y, "pong!", 5), 5);
        cr_assert_eq(read(x, buf, sizeof(buf)), 5, "nothing came back: %m");
        cr_expect_arr_eq(buf, "pong!", 5);
}

/* Same host, tcp IA: a connected TCP socket per end, before ESTABLISHED;
 * no region, nothing else attached. */
Test(datd_channel, tcp_same_host_ends_get_the_two_ends_of_one_socket)
{

        start("tcp", "");
        establish_with_channels(7101);
        for (int i = 0; i < 2; i++) {
                const struct datp_ev_data_channel *e = i ? &cb.ev_data_channel : &ca.ev_data_channel;

                cr_expect_eq(e->kind, DATP_CHANNEL_TCP);
                cr_expect_eq(e->nfds, 1);
                cr_expect_eq(e->region_size, 0);
                cr_expect_eq(e->peer_pid, getpid());
        }
        cr_expect_eq(ca.ev_data_channel.conn_id, a_conn);
        cr_expect_eq(cb.ev_data_channel.conn_id, b_conn);
        cr_expect_eq(fa[1], -1);
        expect_connected_pair(fa[0], fb[0]);
        cr_expect_eq(datd_regions(), 0, "a tcp connection has a shm region");
        close_fds(fa);
        close_fds(fb);
        /* Another one: the data listener is reused. */
        establish_with_channels(7102);
        expect_connected_pair(fb[0], fa[0]);
        close_fds(fa);
        close_fds(fb);
        stop();
}

/* A shm IA connecting to the tcp IA's listener (same host, PROTOCOL.md:
 * only two shm ends get a region): tcp. */
Test(datd_channel, shm_to_tcp_on_one_host_is_tcp)
{
        struct cc t = { .fd = -1 };
        uint32_t t_conn, cr;

        start("shm", "");
        cr_assert_eq(cc_open(&t, d.socket_path, "tcp"), 0);
        t.keep_channels = true;
        /* The tcp IA has 127.0.0.1 too: the shm IA's own listeners take
         * loopback, so listen on tcp and connect from tcp's address... */
        expect_listen(&t, 7103);
        b_conn = expect_connect(&a, &lo, lo_len, 7103, UINT64_MAX, NULL, 0);
        /* ...loopback stays on the connecting (shm) IA: nobody listens there. */
        expect_ev_conn(&a, b_conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        b_conn = expect_connect(&t, &lo, lo_len, 7103, UINT64_MAX, NULL, 0);
        cr = expect_request(&t, NULL);
        cr_assert_eq(cc_accept(&t, cr, NULL, 0, &t_conn), DAT_SUCCESS);
        cr_assert_eq(cc_channel(&t, &ca, fa, EV_MS), 0);
        cr_assert_eq(cc_channel(&t, &cb, fb, EV_MS), 0);
        cr_expect_eq(ca.ev_data_channel.kind, DATP_CHANNEL_TCP);
        expect_connected_pair(fa[0], fb[0]);
        close_fds(fa);
        close_fds(fb);
        cc_close(&t);
        stop();
}

/* Same host, tcp: the active process goes away between the accept and its
 * channel (at once, before datd's data connection can be made): the
 * accepting end is told ACCEPT_COMPLETION_ERROR or, if the channel was
 * quicker, BROKEN; never a channel without an end. */
Test(datd_channel, tcp_same_host_death_of_the_active_side_during_the_accept)
{
        union datp_message ev;
        uint32_t cr;

        start("tcp", "");
        expect_listen(&a, 7104);
        expect_connect(&b, &lo, lo_len, 7104, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        cr_assert_eq(cc_accept(&a, cr, NULL, 0, &a_conn), DAT_SUCCESS);
        cc_close(&b);
        cr_assert_eq(cc_event(&a, DATP_EV_CONN, &ev, EV_MS), 0);
        if (ev.ev_conn.event == DAT_CONNECTION_EVENT_ESTABLISHED) {
                cr_expect_eq(a.n_channels, 1, "ESTABLISHED without a channel");
                cr_assert_eq(cc_event(&a, DATP_EV_CONN, &ev, EV_MS), 0);
                cr_expect_eq(ev.ev_conn.event, DAT_CONNECTION_EVENT_BROKEN);
        } else
                cr_expect_eq(ev.ev_conn.event, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
        stop();
}

/* b on host 0 connects to a on host 1's tcp IA. */
static void hosts_start(void)
{
        close_fds(fa);
        close_fds(fb);
        cr_assert_eq(test_net_create(&net, 2), 0);
        for (unsigned i = 0; i < 2; i++)
                cr_assert_eq(test_net_datd_start(net, i, &hd[i]), 0, "datd on host %u", i);
        cr_assert_eq(cc_open(&a, hd[1].socket_path, "tcp"), 0);
        cr_assert_eq(cc_open(&b, hd[0].socket_path, "tcp"), 0);
        a.keep_channels = b.keep_channels = true;
        lo_len = cc_addr4(&lo, test_net_host_addr4(net, 1));
}

static void hosts_stop(void)
{
        cc_close(&a);
        cc_close(&b);
        for (unsigned i = 0; i < 2; i++)
                cr_expect_eq(datd_stop(&hd[i]), 0, "datd %u's exit status after SIGTERM", i);
}

/* PROTOCOL.md §14: across hosts each end gets its end of one TCP
 * connection between the hosts, before ESTABLISHED; no peer pid. */
Test(datd_channel_hosts, tcp_across_hosts_ends_get_one_connection)
{
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        char ip[INET_ADDRSTRLEN];

        hosts_start();
        establish_with_channels(7201);
        for (int i = 0; i < 2; i++) {
                const struct datp_ev_data_channel *e = i ? &cb.ev_data_channel : &ca.ev_data_channel;

                cr_expect_eq(e->kind, DATP_CHANNEL_TCP);
                cr_expect_eq(e->nfds, 1);
                cr_expect_eq(e->peer_pid, 0, "a peer on another host has no pid here");
        }
        expect_connected_pair(fb[0], fa[0]);
        /* a's socket comes from host 0 (the CM port is dual-stack: an IPv4
         * peer shows as ::ffff:a.b.c.d). */
        cr_assert_eq(getpeername(fa[0], (struct sockaddr *) &peer, &len), 0);
        if (peer.ss_family == AF_INET6)
                inet_ntop(AF_INET, &((struct sockaddr_in6 *) &peer)->sin6_addr.s6_addr[12], ip, sizeof(ip));
        else
                inet_ntop(AF_INET, &((struct sockaddr_in *) &peer)->sin_addr, ip, sizeof(ip));
        cr_expect_str_eq(ip, test_net_host_addr4(net, 0));
        close_fds(fa);
        close_fds(fb);
        hosts_stop();
}

/* The DATA message as the active datd would send it (daemon/cm.h, wire
 * order: CM version 2, type 8, 48 bytes). */
static void data_message(uint8_t out[48], uint32_t dst, uint32_t src, uint8_t token_byte)
{
        uint32_t w;

        memset(out, 0, 48);
        w = htonl(0x44415443u);
        memcpy(out, &w, 4);
        out[5] = 2;
        out[7] = 8;
        w = htonl(48);
        memcpy(out + 8, &w, 4);
        w = htonl(dst);
        memcpy(out + 16, &w, 4);
        w = htonl(src);
        memcpy(out + 20, &w, 4);
        memset(out + 24, token_byte, 16);
}

/* A DATA naming a connection with a token it was not given (a guess, or a
 * replay after the real one was used) is closed, unanswered, and the
 * connection is unharmed. */
Test(datd_channel_hosts, data_connection_with_a_wrong_token_is_closed)
{
        struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(7471) };
        struct timeval tv = { .tv_sec = 5 };
        uint8_t msg[48];
        char buf[64];
        ssize_t n;
        int fd;

        hosts_start();
        establish_with_channels(7202);
        inet_pton(AF_INET, test_net_host_addr4(net, 1), &to.sin_addr);
        for (unsigned k = 0; k < 2; k++) {
                fd = test_net_socket(net, 0, AF_INET, SOCK_STREAM, 0);
                cr_assert_geq(fd, 0);
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                cr_assert_eq(connect(fd, (struct sockaddr *) &to, sizeof(to)), 0, "%m");
                /* k 0: the established end, k 1: no such end. */
                data_message(msg, k == 0 ? a_conn : 999999, b_conn, 0x5a);
                cr_assert_eq(write(fd, msg, sizeof(msg)), (ssize_t) sizeof(msg));
                n = read(fd, buf, sizeof(buf));
                cr_expect(n == 0 || (n < 0 && errno == ECONNRESET), "DATA %u: not closed (%zd, %m)", k, n);
                close(fd);
        }
        expect_connected_pair(fa[0], fb[0]);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CONN, 100), 0);
        cr_expect_eq(cc_no_event(&b, DATP_EV_CONN, 100), 0);
        close_fds(fa);
        close_fds(fb);
        hosts_stop();
}

/* The token is what names the data connection: while the passive end waits
 * for it (the active datd held stopped right after the request, so that it
 * cannot send its DATA yet), a DATA with the right ids and a wrong token is
 * closed; the real one then still makes the connection. */
Test(datd_channel_hosts, wrong_token_for_a_waiting_end_is_closed)
{
        struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(7471) };
        struct timeval tv = { .tv_sec = 5 };
        uint32_t cr;
        uint8_t msg[48];
        char buf[64];
        ssize_t n;
        int fd;

        hosts_start();
        inet_pton(AF_INET, test_net_host_addr4(net, 1), &to.sin_addr);
        fd = test_net_socket(net, 0, AF_INET, SOCK_STREAM, 0);
        cr_assert_geq(fd, 0);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        cr_assert_eq(connect(fd, (struct sockaddr *) &to, sizeof(to)), 0, "%m");
        expect_listen(&a, 7203);
        b_conn = expect_connect(&b, &lo, lo_len, 7203, UINT64_MAX, NULL, 0);
        cr = expect_request(&a, NULL);
        /* Well inside the CM keepalive (two periods of cm_keepalive_ms). */
        cr_assert_eq(kill(hd[0].pid, SIGSTOP), 0);
        cr_assert_eq(cc_accept(&a, cr, NULL, 0, &a_conn), DAT_SUCCESS);
        data_message(msg, a_conn, b_conn, 0x5a);
        cr_assert_eq(write(fd, msg, sizeof(msg)), (ssize_t) sizeof(msg));
        n = read(fd, buf, sizeof(buf));
        kill(hd[0].pid, SIGCONT);
        cr_expect(n == 0 || (n < 0 && errno == ECONNRESET), "not closed (%zd, %m)", n);
        close(fd);
        cr_assert_eq(cc_channel(&b, &cb, fb, EV_MS), 0);
        expect_ev_conn(&b, b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        cr_assert_eq(cc_channel(&a, &ca, fa, EV_MS), 0);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_connected_pair(fa[0], fb[0]);
        close_fds(fa);
        close_fds(fb);
        hosts_stop();
}
