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
/* Kept channels (version 4): an earlier connection's channels as a and b
 * keep them while the next is made, and its conn_ids (keep_first_channel()). */
static union datp_message ca0, cb0;
static uint32_t a_conn0, b_conn0;
static int ka[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 },
           kb[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 };
/* A third and a fourth client, each with an IA instance of its own. */
static struct cc c3 = { .fd = -1 }, c4 = { .fd = -1 };
/* Two hosts (tests/netns.h): a on host 1 (passive), b on host 0 (active). */
static struct test_net *net;
static struct datd_instance hd[2];

static void close_fds(int *fds);

static void teardown(void)
{
        close_fds(fa);
        close_fds(fb);
        close_fds(ka);
        close_fds(kb);
        child_kill(&kid);
        cc_close(&a);
        cc_close(&b);
        cc_close(&c3);
        cc_close(&c4);
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
        cc_close(&c3);
        cc_close(&c4);
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

/* p listens on qual, x connects, p accepts; each end's EV_DATA_CHANNEL
 * (into *chp / *chx, its descriptors into fp / fx, closed first) must come
 * before its ESTABLISHED. */
static void establish_between(struct cc *p, struct cc *x, uint64_t qual, union datp_message *chp,
                              int *fp, uint32_t *p_conn, union datp_message *chx, int *fx,
                              uint32_t *x_conn)
{
        uint64_t p_seq, x_seq;
        int r;

        close_fds(fp);
        close_fds(fx);
        expect_listen(p, qual);
        *x_conn = expect_connect(x, &lo, lo_len, qual, UINT64_MAX, NULL, 0);
        cr_assert_eq(cc_accept(p, expect_request(p, NULL), NULL, 0, p_conn), DAT_SUCCESS);
        r = cc_channel(x, chx, fx, EV_MS);
        cr_assert_eq(r, 0, "active end: no EV_DATA_CHANNEL: %s", strerror(-r));
        x_seq = x->last_seq;
        expect_ev_conn(x, *x_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        cr_expect_lt(x_seq, x->last_seq, "active end: the channel came after ESTABLISHED");
        r = cc_channel(p, chp, fp, EV_MS);
        cr_assert_eq(r, 0, "passive end: no EV_DATA_CHANNEL: %s", strerror(-r));
        p_seq = p->last_seq;
        expect_ev_conn(p, *p_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        cr_expect_lt(p_seq, p->last_seq, "passive end: the channel came after ESTABLISHED");
}

/* a listens on qual, b connects, a accepts: the channels into ca / fa and
 * cb / fb. */
static void establish_with_channels(uint64_t qual)
{
        establish_between(&a, &b, qual, &ca, fa, &a_conn, &cb, fb, &b_conn);
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

                /* Two IA instances of version 4: a kept channel (the
                 * kept-channel tests below). */
                cr_expect_eq(e->flags, DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP,
                             "both ends speak version 4");
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

/* a's link goes to sleep on its doorbell a_bell and b's writes: the
 * doorbell rings and a reads the bytes; then the other way round. */
static void expect_bytes_both_ways(struct shm_link *la, int a_bell, struct shm_link *lb)
{
        char out[] = "through the ring", in[sizeof(out)] = "";
        struct iovec wv = { out, sizeof(out) }, rv = { in, sizeof(in) };
        struct pollfd p = { .fd = a_bell, .events = POLLIN };

        cr_expect(shm_link_arm(la, true, false));
        cr_assert_eq(shm_link_writev(lb, &wv, 1), (ssize_t) sizeof(out));
        cr_expect_eq(poll(&p, 1, EV_MS), 1, "a's doorbell did not ring");
        shm_link_doorbell_drain(la);
        shm_link_disarm(la);
        cr_assert_eq(shm_link_readv(la, &rv, 1), (ssize_t) sizeof(out));
        cr_expect_str_eq(in, out);
        memset(in, 0, sizeof(in));
        cr_assert_eq(shm_link_writev(la, &wv, 1), (ssize_t) sizeof(out));
        cr_assert_eq(shm_link_readv(lb, &rv, 1), (ssize_t) sizeof(out));
        cr_expect_str_eq(in, out);
}

/* The two ends attach with shm_link and what one writes the other reads;
 * a sleeping reader's doorbell rings. */
Test(datd_channel, shm_link_carries_bytes_between_the_two_ends)
{
        struct shm_link la, lb;
        void *ma, *mb;
        size_t sa, sb;

        start("shm", "");
        establish_with_channels(7003);
        cr_assert_eq(shm_region_map(fa[0], ca.ev_data_channel.region_size, &ma, &sa), 0);
        cr_assert_eq(shm_region_map(fb[0], cb.ev_data_channel.region_size, &mb, &sb), 0);
        cr_assert_eq(shm_link_attach(ma, sa, ca.ev_data_channel.ring_size, ca.ev_data_channel.side,
                                     fa[1], fa[2], &la), 0);
        cr_assert_eq(shm_link_attach(mb, sb, cb.ev_data_channel.ring_size, cb.ev_data_channel.side,
                                     fb[1], fb[2], &lb), 0);
        /* a is the passive end. */
        expect_bytes_both_ways(&la, fa[1], &lb);
        shm_region_unmap(ma, sa);
        shm_region_unmap(mb, sb);
        close_fds(fa);
        close_fds(fb);
        stop();
}

/* A child process connects: each end's pidfd names the other process, and
 * the child's death is seen on it; the region goes once both ends are gone.
 * a speaks version 3: a region that is not kept. */
Test(datd_channel, pidfd_names_the_peer_and_the_region_goes_with_the_connection)
{
        union datp_message ch, ev;
        int fds[DATP_CHANNEL_MAX_FDS], sync[2];
        uint32_t a_conn;
        struct pollfd p;
        char c;

        raw_version = 3;
        start("shm", "");
        raw_version = DATP_VERSION_MAX;
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
 * closes its socket (dies) takes its connections' regions with it.  Both
 * speak version 3: regions that are not kept (a kept one stays until each
 * end has released it or gone, the kept-channel tests below). */
Test(datd_channel, region_is_freed_after_disconnect_and_after_death)
{
        raw_version = 3;
        start("shm", "");
        raw_version = DATP_VERSION_MAX;
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

/* ---- kept channels (version 4) ------------------------------------------------ */

/* A client of this build on its own IA instance of the shm IA, keeping
 * its channels. */
static void open_client(struct cc *c)
{
        cr_assert_eq(cc_open(c, d.socket_path, "shm"), 0);
        c->keep_channels = true;
}

/* A new kept channel on both ends (*chp the passive end's, *chx the
 * active end's): PIPES | KEEP, one channel_id, the usual descriptors.
 * Returns the id. */
static uint32_t expect_new_kept_between(const union datp_message *chp, const union datp_message *chx)
{
        const struct datp_ev_data_channel *p = &chp->ev_data_channel, *x = &chx->ev_data_channel;

        cr_assert_eq(p->flags, DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP, "passive end: flags 0x%x", p->flags);
        cr_assert_eq(x->flags, DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP, "active end: flags 0x%x", x->flags);
        cr_assert_neq(x->channel_id, 0, "a kept channel without an id");
        cr_assert_eq(p->channel_id, x->channel_id, "the two ends name their channel differently");
        cr_expect_eq(p->nfds, 5);
        cr_expect_eq(x->nfds, 5);
        return x->channel_id;
}

/* The same for a's and b's last connection. */
static uint32_t expect_new_kept(void)
{
        return expect_new_kept_between(&ca, &cb);
}

/* a and b keep the channel of their last connection, its events in ca0 /
 * cb0 and its descriptors in ka / kb, while they make the next one (its
 * conn_ids in a_conn0 / b_conn0). */
static void keep_first_channel(void)
{
        ca0 = ca;
        cb0 = cb;
        a_conn0 = a_conn;
        b_conn0 = b_conn;
        close_fds(ka);
        close_fds(kb);
        memcpy(ka, fa, sizeof(ka));
        memcpy(kb, fb, sizeof(kb));
        for (unsigned i = 0; i < DATP_CHANNEL_MAX_FDS; i++)
                fa[i] = fb[i] = -1;
}

/* a's and b's last connection reuses the kept channel id of the one
 * keep_first_channel() kept: REUSE, no descriptors, the sizes of then, and
 * each end the side it had then. */
static void expect_reused(uint32_t id)
{
        for (int i = 0; i < 2; i++) {
                const struct datp_ev_data_channel *e = i ? &cb.ev_data_channel : &ca.ev_data_channel;
                const struct datp_ev_data_channel *first = i ? &cb0.ev_data_channel : &ca0.ev_data_channel;
                const int *fds = i ? fb : fa;
                const char *end = i ? "b" : "a";

                cr_expect_eq(e->kind, DATP_CHANNEL_SHM, "%s", end);
                cr_expect_eq(e->flags, DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP | DATP_CHANNEL_REUSE,
                             "%s: flags 0x%x", end, e->flags);
                cr_expect_eq(e->channel_id, id, "%s: channel %" PRIu32 ", want %" PRIu32, end,
                             e->channel_id, id);
                cr_expect_eq(e->nfds, 0, "%s: nfds %u", end, e->nfds);
                cr_expect_eq(fds[0], -1, "%s: descriptors came with a reused channel", end);
                cr_expect_eq(e->region_size, first->region_size, "%s", end);
                cr_expect_eq(e->ring_size, first->ring_size, "%s", end);
                cr_expect_eq(e->side, first->side, "%s: side %u, it had %u", end, e->side, first->side);
                cr_expect_eq(e->peer_pid, getpid(), "%s", end);
                cr_expect_eq(e->peer_uid, getuid(), "%s", end);
        }
        cr_expect_eq(ca.ev_data_channel.conn_id, a_conn);
        cr_expect_eq(cb.ev_data_channel.conn_id, b_conn);
}

/* CHANNEL_RELEASE as libdat sends it, with request_id 0: no reply.  A
 * round trip after it (IA_QUERY) shows that datd has taken it, and that
 * it was not answered (cc_call takes no reply but its own). */
static void release(struct cc *c, uint32_t channel_id)
{
        struct datp_channel_release rel = { .ia_id = c->ia_id, .channel_id = channel_id };
        struct datp_ia_query q = { .ia_id = c->ia_id };
        struct datp_ia_query_reply reply;
        int r;

        datp_header_init(&rel.hdr, DATP_CHANNEL_RELEASE, c->version, sizeof(rel), 0);
        cr_assert_eq(raw_send(c->fd, &rel, sizeof(rel)), 0);
        datp_header_init(&q.hdr, DATP_IA_QUERY, c->version, sizeof(q), 0);
        r = cc_call(c, &q.hdr, &reply, sizeof(reply));
        cr_assert_eq(r, 0, "IA_QUERY after CHANNEL_RELEASE: %s", strerror(-r));
        cr_assert_eq(reply.status.dat_status, DAT_SUCCESS);
}

/* CHANNEL_RELEASE with a request_id: its reply's status. */
static struct datp_status release_answered(struct cc *c, uint32_t ia_id, uint32_t channel_id)
{
        struct datp_channel_release rel = { .ia_id = ia_id, .channel_id = channel_id };
        struct datp_channel_release_reply reply;
        int r;

        datp_header_init(&rel.hdr, DATP_CHANNEL_RELEASE, c->version, sizeof(rel), 0);
        r = cc_call(c, &rel.hdr, &reply, sizeof(reply));
        cr_assert_eq(r, 0, "CHANNEL_RELEASE: %s", strerror(-r));
        return reply.status;
}

/* x disconnects its end x_conn: DISCONNECTED on it and on p's p_conn. */
static void disconnect_between(struct cc *x, uint32_t x_conn, struct cc *p, uint32_t p_conn)
{
        cr_assert_eq(cc_disconnect(x, x_conn, DATP_CLOSE_GRACEFUL), DAT_SUCCESS);
        expect_ev_conn(x, x_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
        expect_ev_conn(p, p_conn, DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
}

/* Both a and b release their last connection's channel id, and it ends:
 * a spare of theirs. */
static void release_both_and_disconnect(uint32_t id)
{
        release(&a, id);
        release(&b, id);
        disconnect_between(&b, b_conn, &a, a_conn);
}

/* The next EV_CHANNEL_DROP of c names its IA instance and channel id. */
static void expect_drop(struct cc *c, uint32_t id)
{
        union datp_message ev;
        int r = cc_event(c, DATP_EV_CHANNEL_DROP, &ev, EV_MS);

        cr_assert_eq(r, 0, "no EV_CHANNEL_DROP of channel %" PRIu32 ": %s", id, strerror(-r));
        cr_expect_eq(ev.ev_channel_drop.ia_id, c->ia_id);
        cr_expect_eq(ev.ev_channel_drop.channel_id, id, "dropped channel %" PRIu32 ", want %" PRIu32,
                     ev.ev_channel_drop.channel_id, id);
}

/* IA_CLOSE of c's instance, abrupt (dat_ia_close(3DAT)). */
static void ia_close(struct cc *c)
{
        struct datp_ia_close q = { .ia_id = c->ia_id, .flags = DATP_CLOSE_ABRUPT };
        struct datp_ia_close_reply reply;

        datp_header_init(&q.hdr, DATP_IA_CLOSE, c->version, sizeof(q), 0);
        cr_assert_eq(cc_call(c, &q.hdr, &reply, sizeof(reply)), 0);
        cr_assert_eq(reply.status.dat_status, DAT_SUCCESS);
}

/* PROTOCOL.md, kept channels: two ends of version 4 on two IA instances
 * keep their channel, and name it alike. */
Test(datd_channel, kept_channel_has_one_id_on_both_ends)
{
        uint32_t first;

        start("shm", "");
        establish_with_channels(7301);
        first = expect_new_kept();
        /* Another connection while the first is up: another channel. */
        establish_with_channels(7302);
        cr_expect_neq(expect_new_kept(), first, "two live channels with one id");
        stop();
}

/* A client of version 3 does not know CHANNEL_RELEASE: a channel with it
 * is an ordinary one, on both ends (whichever end it is). */
Test(datd_channel, a_version_3_client_gets_no_kept_channel)
{
        for (int active = 0; active < 2; active++) {
                struct cc *v3 = active ? &b : &a;

                start("shm", "");
                cc_close(v3);
                raw_version = 3;
                cr_assert_eq(cc_open(v3, d.socket_path, "shm"), 0);
                raw_version = DATP_VERSION_MAX;
                v3->keep_channels = true;
                establish_with_channels(7310 + (uint64_t) active);
                for (int i = 0; i < 2; i++) {
                        const struct datp_ev_data_channel *e = i ? &cb.ev_data_channel : &ca.ev_data_channel;

                        cr_expect_eq(e->flags, DATP_CHANNEL_PIPES, "version 3 %s end, %s: flags 0x%x",
                                     active ? "active" : "passive", i ? "b" : "a", e->flags);
                        cr_expect_eq(e->channel_id, 0);
                        cr_expect_eq(e->nfds, 5);
                }
                stop();
        }
}

/* A connection within one IA instance would keep its channel under one
 * id for both of its ends: it is an ordinary one. */
Test(datd_channel, a_connection_within_one_ia_instance_is_not_kept)
{
        start("shm", "");
        establish_between(&a, &a, 7315, &ca, fa, &a_conn, &cb, fb, &b_conn);
        for (int i = 0; i < 2; i++) {
                const struct datp_ev_data_channel *e = i ? &cb.ev_data_channel : &ca.ev_data_channel;

                cr_expect_eq(e->flags, DATP_CHANNEL_PIPES, "%s end: flags 0x%x", i ? "active" : "passive",
                             e->flags);
                cr_expect_eq(e->channel_id, 0);
        }
        cr_expect_eq(ca.ev_data_channel.side, 1);
        cr_expect_eq(cb.ev_data_channel.side, 0);
        stop();
}

/* Both released the channel and the connection ended: the same two IA
 * instances' next connection takes it again, with nothing attached (the
 * ends have it all), and datd makes no region. */
/* A counter of datd's GetCounters() (DBUS-API.md). */
static uint64_t channel_counter(const char *name)
{
        sd_bus *bus = NULL;
        uint64_t v = UINT64_MAX;

        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0, "datd's private bus");
        cr_expect_eq(bus_counter(bus, name, &v), 0, "GetCounters %s", name);
        sd_bus_flush_close_unref(bus);
        return v;
}

/* NKeptChannels or NSpareChannels (DBUS-API.md). */
static uint32_t channel_property(const char *name)
{
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus *bus = NULL;
        uint32_t v = UINT32_MAX;

        cr_assert_eq(bus_client_open(d.bus_address, &bus), 0, "datd's private bus");
        cr_expect_geq(sd_bus_get_property_trivial(bus, DATD_BUS_DEST, DATD_BUS_OBJECT, DATD_BUS_IFACE,
                                                  name, &error, 'u', &v), 0, "%s: %s", name,
                      error.message ? error.message : "");
        sd_bus_error_free(&error);
        sd_bus_flush_close_unref(bus);
        return v;
}

Test(datd_channel, released_channel_is_reused_by_the_same_pair_without_descriptors)
{
        uint32_t id;

        start("shm", "");
        establish_with_channels(7320);
        id = expect_new_kept();
        keep_first_channel();
        cr_expect_eq(channel_property("NKeptChannels"), 1);
        cr_expect_eq(channel_property("NSpareChannels"), 0, "a spare while in use");
        release_both_and_disconnect(id);
        cr_expect_eq(channel_property("NSpareChannels"), 1, "no spare once both released it");
        cr_expect_eq(a.n_kept + b.n_kept, 0, "a new channel came as EV_CONN_KEPT");
        establish_with_channels(7321);
        expect_reused(id);
        /* PROTOCOL.md, EV_CONN_KEPT: channel and ESTABLISHED in one packet. */
        cr_expect_eq(a.n_kept, 1, "passive end: the reused channel came in %u EV_CONN_KEPT",
                     a.n_kept);
        cr_expect_eq(b.n_kept, 1, "active end: the reused channel came in %u EV_CONN_KEPT",
                     b.n_kept);
        cr_expect_eq(datd_regions(), 1, "datd made another region");
        cr_expect_eq(channel_property("NKeptChannels"), 1);
        cr_expect_eq(channel_property("NSpareChannels"), 0, "still a spare in use");
        cr_expect_eq(channel_counter("shm_channels_made"), 1);
        cr_expect_eq(channel_counter("shm_channels_reused"), 1);
        cr_expect_eq(channel_counter("shm_channels_dropped"), 0);
        stop();
}

/* shm_link's region header (libdat/shm_link.c) and its control blocks of
 * one page, as a client sees them in the mapping. */
struct region_header {
        uint32_t magic, version, ring_size, flags;
        uint64_t ring_offset[2];
};
#define RING_CTL_BYTES 4096u
#define RING_CELL_BYTES 64u

static size_t ring_at(unsigned r, uint32_t ring_size)
{
        return SHM_LINK_HEADER + r * (RING_CTL_BYTES + (size_t) ring_size);
}

/* Whatever the ends left in the region, datd lays it out afresh before
 * the pair's next connection: the header, each ring's control block and
 * the header word of its first record (the one a consumer polls first). */
Test(datd_channel, reused_region_is_laid_out_afresh)
{
        struct region_header h;
        struct shm_link l;
        unsigned char *m;
        void *mem;
        size_t size;
        uint32_t id, ring;

        start("shm", "");
        establish_with_channels(7330);
        id = expect_new_kept();
        keep_first_channel();
        ring = ca0.ev_data_channel.ring_size;
        cr_assert_eq(shm_region_map(ka[0], ca0.ev_data_channel.region_size, &mem, &size), 0);
        m = mem;
        memset(m, 0xa5, sizeof(h));
        for (unsigned r = 0; r < 2; r++)
                memset(m + ring_at(r, ring), 0xa5, RING_CTL_BYTES + RING_CELL_BYTES);
        release_both_and_disconnect(id);
        establish_with_channels(7331);
        expect_reused(id);
        memcpy(&h, m, sizeof(h));
        cr_expect_eq(h.magic, SHM_LINK_MAGIC, "magic 0x%08x", h.magic);
        cr_expect_eq(h.version, SHM_LINK_VERSION);
        cr_expect_eq(h.ring_size, ring);
        cr_expect_eq(h.flags, 0);
        for (unsigned r = 0; r < 2; r++) {
                size_t at = ring_at(r, ring), n = RING_CTL_BYTES + RING_CELL_BYTES, i = 0;

                cr_expect_eq(h.ring_offset[r], at, "ring %u at %" PRIu64, r, h.ring_offset[r]);
                while (i < n && m[at + i] == 0)
                        i++;
                cr_expect_eq(i, n, "ring %u: byte %zu of its control block and first cell not zero", r, i);
        }
        cr_expect_eq(shm_link_attach(mem, size, ring, ca.ev_data_channel.side, ka[1], ka[2], &l), 0,
                     "libdat refuses the region");
        shm_region_unmap(mem, size);
        stop();
}

/* What the last connection left unread is gone, and the two ends carry
 * bytes on the descriptors they kept, both ways, doorbell included. */
Test(datd_channel, reused_channel_starts_empty_and_carries_bytes)
{
        struct shm_link la, lb;
        void *ma, *mb;
        size_t sa, sb;
        char old[] = "left unread";
        struct iovec ov = { old, sizeof(old) };
        const struct datp_ev_data_channel *ea = &ca0.ev_data_channel, *eb = &cb0.ev_data_channel;
        uint32_t id;

        start("shm", "");
        establish_with_channels(7335);
        id = expect_new_kept();
        keep_first_channel();
        cr_assert_eq(shm_region_map(ka[0], ea->region_size, &ma, &sa), 0);
        cr_assert_eq(shm_region_map(kb[0], eb->region_size, &mb, &sb), 0);
        cr_assert_eq(shm_link_attach(ma, sa, ea->ring_size, ea->side, ka[1], ka[2], &la), 0);
        cr_assert_eq(shm_link_attach(mb, sb, eb->ring_size, eb->side, kb[1], kb[2], &lb), 0);
        cr_assert_eq(shm_link_writev(&la, &ov, 1), (ssize_t) sizeof(old));
        cr_assert_eq(shm_link_writev(&lb, &ov, 1), (ssize_t) sizeof(old));
        release_both_and_disconnect(id);
        establish_with_channels(7336);
        expect_reused(id);
        /* Each end attaches afresh, as libdat does for a new connection. */
        cr_assert_eq(shm_link_attach(ma, sa, ea->ring_size, ca.ev_data_channel.side, ka[1], ka[2], &la), 0);
        cr_assert_eq(shm_link_attach(mb, sb, eb->ring_size, cb.ev_data_channel.side, kb[1], kb[2], &lb), 0);
        cr_expect_eq(shm_link_readable(&la), 0, "a reads what b left unread before");
        cr_expect_eq(shm_link_readable(&lb), 0, "b reads what a left unread before");
        expect_bytes_both_ways(&la, ka[1], &lb);
        shm_region_unmap(ma, sa);
        shm_region_unmap(mb, sb);
        stop();
}

/* The pair's next connection in the other direction takes the channel
 * too, and each instance keeps the side it had: the new active end (a)
 * produces ring 1. */
Test(datd_channel, reuse_works_with_roles_swapped)
{
        uint32_t id;

        start("shm", "");
        establish_with_channels(7340);
        id = expect_new_kept();
        keep_first_channel();
        release_both_and_disconnect(id);
        establish_between(&b, &a, 7341, &cb, fb, &b_conn, &ca, fa, &a_conn);
        expect_reused(id);
        cr_expect_eq(ca.ev_data_channel.side, 1, "the new active end changed sides");
        cr_expect_eq(cb.ev_data_channel.side, 0, "the new passive end changed sides");
        stop();
}

/* An end that has not released the channel may still touch it: until
 * both have, the pair's next connection gets a channel of its own; once
 * the second releases (after the connection ended) it is a spare. */
Test(datd_channel, no_reuse_until_both_released)
{
        uint32_t id, second;

        start("shm", "");
        establish_with_channels(7350);
        id = expect_new_kept();
        keep_first_channel();
        release(&a, id);
        disconnect_between(&b, b_conn, &a, a_conn);
        establish_with_channels(7351);
        second = expect_new_kept();
        cr_expect_neq(second, id, "b's channel was reused before b released it");
        release(&b, id);
        establish_with_channels(7352);
        expect_reused(id);
        stop();
}

/* Both ends released the channel but its connection is still up: a
 * connection made meanwhile gets a channel of its own; once the first
 * ends, its channel is a spare. */
Test(datd_channel, no_reuse_while_the_connection_is_up)
{
        uint32_t id;

        start("shm", "");
        establish_with_channels(7355);
        id = expect_new_kept();
        keep_first_channel();
        release(&a, id);
        release(&b, id);
        establish_with_channels(7356);
        cr_expect_neq(expect_new_kept(), id, "the channel of a live connection was reused");
        disconnect_between(&b, b_conn0, &a, a_conn0);
        establish_with_channels(7357);
        expect_reused(id);
        stop();
}

/* A spare belongs to its two IA instances: a connection of one of them
 * with a third gets a new channel, and the spare waits for its pair. */
Test(datd_channel, another_pair_never_gets_the_channel)
{
        union datp_message ch3;
        int f3[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 };
        uint32_t id, c3_conn;

        start("shm", "");
        open_client(&c3);
        establish_with_channels(7360);
        id = expect_new_kept();
        keep_first_channel();
        release_both_and_disconnect(id);
        establish_between(&a, &c3, 7361, &ca, fa, &a_conn, &ch3, f3, &c3_conn);
        cr_expect_neq(expect_new_kept_between(&ca, &ch3), id, "a and c3 got a and b's channel");
        close_fds(f3);
        establish_with_channels(7362);
        expect_reused(id);
        stop();
}

/* The peer's IA instance goes (IA_CLOSE, then, the second time, its
 * process): the end that released the channel is told to drop it, the
 * one that went is not, and datd holds it no more. */
Test(datd_channel, peer_going_drops_the_released_channel)
{
        for (int how = 0; how < 2; how++) {
                uint32_t id;

                start("shm", "");
                establish_with_channels(7370);
                id = expect_new_kept();
                release_both_and_disconnect(id);
                cr_expect_eq(cc_no_event(&a, DATP_EV_CHANNEL_DROP, 100), 0, "a spare was dropped");
                if (how == 0) {
                        ia_close(&b);
                        cr_expect_eq(cc_no_event(&b, DATP_EV_CHANNEL_DROP, 100), 0,
                                     "the instance that closed was told to drop its channel");
                } else
                        cc_close(&b);
                expect_drop(&a, id);
                cr_expect_eq(wait_regions(0), 0, "datd still holds the dropped channel");
                cr_expect_eq(channel_counter("shm_channels_dropped"), 1);
                cr_expect_eq(channel_property("NKeptChannels"), 0);
                stop();
        }
}

/* An end that had not released the channel when its peer went may still
 * touch it: it is told to drop it only when it releases it, at once. */
Test(datd_channel, release_after_the_peer_left_is_answered_with_a_drop)
{
        uint32_t id;

        start("shm", "");
        establish_with_channels(7380);
        id = expect_new_kept();
        cc_close(&b);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_BROKEN, NULL);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CHANNEL_DROP, 100), 0,
                     "told to drop a channel it had not released");
        release(&a, id);
        expect_drop(&a, id);
        cr_expect_eq(wait_regions(0), 0, "datd still holds the dropped channel");
        stop();
}

/* CHANNEL_RELEASE of an id that is no kept channel of this IA instance
 * (none at all, or one between two other clients) is answered with
 * success and does nothing: it counts as neither holder's release, and
 * that pair still reuses its channel once both of them released it. */
Test(datd_channel, release_of_an_unknown_or_foreign_channel_is_ignored)
{
        union datp_message ch3, ch4;
        int f3[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 }, f4[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 };
        struct cc *all[] = { &a, &c3, &c4 };
        uint32_t id, c3_conn, c4_conn;
        struct datp_status s;

        start("shm", "");
        open_client(&c3);
        open_client(&c4);
        establish_between(&c3, &c4, 7390, &ch3, f3, &c3_conn, &ch4, f4, &c4_conn);
        id = expect_new_kept_between(&ch3, &ch4);
        s = release_answered(&a, a.ia_id, id ^ 0x40000000u);
        cr_expect_eq(s.dat_status, DAT_SUCCESS, "an unknown channel: 0x%08x", s.dat_status);
        s = release_answered(&a, a.ia_id, id);
        cr_expect_eq(s.dat_status, DAT_SUCCESS, "another pair's channel: 0x%08x", s.dat_status);
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                cr_expect_eq(cc_no_event(all[i], DATP_EV_CHANNEL_DROP, 100), 0,
                             "client %zu told to drop a channel", i);
        /* Only c3 released it: no reuse (a's release was not c4's). */
        release(&c3, id);
        disconnect_between(&c4, c4_conn, &c3, c3_conn);
        establish_between(&c3, &c4, 7391, &ch3, f3, &c3_conn, &ch4, f4, &c4_conn);
        cr_expect_neq(expect_new_kept_between(&ch3, &ch4), id, "reused before both holders released it");
        /* c4 releases it too: a spare, untouched by a. */
        release(&c4, id);
        establish_between(&c3, &c4, 7392, &ch3, f3, &c3_conn, &ch4, f4, &c4_conn);
        cr_expect_eq(ch3.ev_data_channel.flags, DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP | DATP_CHANNEL_REUSE);
        cr_expect_eq(ch3.ev_data_channel.channel_id, id);
        cr_expect_eq(ch4.ev_data_channel.flags, DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP | DATP_CHANNEL_REUSE);
        cr_expect_eq(ch4.ev_data_channel.channel_id, id);
        close_fds(f3);
        close_fds(f4);
        stop();
}

/* CHANNEL_RELEASE names an IA instance of the client's: one never opened,
 * or one it closed, is DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA. */
Test(datd_channel, channel_release_of_an_unopened_ia_is_invalid_handle)
{
        const uint32_t invalid = DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
        struct datp_status s;

        start("shm", "");
        s = release_answered(&a, a.ia_id + 1000, 1);
        cr_expect_eq(s.dat_status, invalid, "never opened: 0x%08x", s.dat_status);
        cr_expect_eq(s.sys_errno, EBADF);
        ia_close(&a);
        s = release_answered(&a, a.ia_id, 1);
        cr_expect_eq(s.dat_status, invalid, "closed: 0x%08x", s.dat_status);
        cr_expect_eq(s.sys_errno, EBADF);
        stop();
}

/* datd.conf max_spare_channels_per_client: a spare that would take either
 * client past it is dropped instead (both ends told), the ones before it
 * are kept. */
Test(datd_channel, spares_over_max_spare_channels_per_client_are_dropped)
{
        uint32_t id, second;

        start("shm", "\"max_spare_channels_per_client\": 1");
        establish_with_channels(7400);
        id = expect_new_kept();
        keep_first_channel();
        establish_with_channels(7401);
        second = expect_new_kept();
        release(&a, id);
        release(&b, id);
        release(&a, second);
        release(&b, second);
        disconnect_between(&b, b_conn0, &a, a_conn0);
        cr_expect_eq(cc_no_event(&a, DATP_EV_CHANNEL_DROP, 100), 0, "the first spare was dropped");
        disconnect_between(&b, b_conn, &a, a_conn);
        expect_drop(&a, second);
        expect_drop(&b, second);
        cr_expect_eq(wait_regions(1), 1, "datd holds the dropped spare, or not the kept one");
        establish_with_channels(7402);
        expect_reused(id);
        stop();
}

/* max_spare_channels_per_client 0: nothing is kept, so no channel is
 * offered to be kept. */
Test(datd_channel, max_spare_channels_per_client_0_keeps_no_channel)
{
        start("shm", "\"max_spare_channels_per_client\": 0");
        establish_with_channels(7410);
        for (int i = 0; i < 2; i++) {
                const struct datp_ev_data_channel *e = i ? &cb.ev_data_channel : &ca.ev_data_channel;

                cr_expect_eq(e->flags, DATP_CHANNEL_PIPES, "%s: flags 0x%x", i ? "b" : "a", e->flags);
                cr_expect_eq(e->channel_id, 0);
        }
        stop();
}

/* max_shm_bytes_per_client with room for one region: the spare of a and b
 * gives way to a new connection of either of them (the passive end of
 * its connection, then the active one) with a third client, both its
 * holders told to drop it, instead of the connection being refused. */
Test(datd_channel, spares_make_room_under_max_shm_bytes_per_client)
{
        union datp_message ch3, ch;
        int f3[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 }, f[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 };
        uint32_t id, c3_conn, conn;
        char limits[128];

        snprintf(limits, sizeof(limits), "\"max_shm_bytes_per_client\": %zu",
                 shm_link_region_size(RING_DEFAULT) * 3 / 2);
        for (int active = 0; active < 2; active++) {
                struct cc *full = active ? &b : &a;

                start("shm", limits);
                open_client(&c3);
                establish_with_channels(7420);
                id = expect_new_kept();
                release_both_and_disconnect(id);
                establish_between(full, &c3, 7421, &ch, f, &conn, &ch3, f3, &c3_conn);
                cr_expect_neq(expect_new_kept_between(&ch, &ch3), id);
                expect_drop(&a, id);
                expect_drop(&b, id);
                cr_expect_eq(wait_regions(1), 1, "datd still holds the dropped spare");
                close_fds(f);
                close_fds(f3);
                stop();
        }
}

/* A kept channel stays charged to max_shm_bytes_per_client of an end that
 * holds it, after its peer went, until it released it and was told to
 * drop it: a's connection with a third client is refused until then. */
Test(datd_channel, kept_channel_counts_against_max_shm_bytes_until_dropped)
{
        union datp_message ch3;
        int f3[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 };
        uint32_t id, c3_conn, refused;
        char limits[128];

        snprintf(limits, sizeof(limits), "\"max_shm_bytes_per_client\": %zu",
                 shm_link_region_size(RING_DEFAULT) * 3 / 2);
        start("shm", limits);
        open_client(&c3);
        establish_with_channels(7430);
        id = expect_new_kept();
        cc_close(&b);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_BROKEN, NULL);
        expect_listen(&a, 7431);
        refused = expect_connect(&c3, &lo, lo_len, 7431, UINT64_MAX, NULL, 0);
        cr_assert_eq(cc_accept(&a, expect_request(&a, NULL), NULL, 0, &a_conn), DAT_SUCCESS);
        expect_ev_conn(&c3, refused, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        expect_ev_conn(&a, a_conn, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL);
        release(&a, id);
        expect_drop(&a, id);
        establish_between(&a, &c3, 7432, &ca, fa, &a_conn, &ch3, f3, &c3_conn);
        expect_new_kept_between(&ca, &ch3);
        close_fds(f3);
        stop();
}

/* PROTOCOL.md, kept channels: a channel a released is dropped for it when
 * it needs the room, though its peer b never released its end; b, which
 * keeps it, stays charged for it.  The channel once stayed charged to a
 * for as long as b kept it, and b alone could thus use up a's
 * max_shm_bytes_per_client. */
Test(datd_channel, a_released_channel_gives_way_though_its_peer_keeps_it)
{
        union datp_message ch3, ch4;
        int f3[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 }, f4[DATP_CHANNEL_MAX_FDS] = { -1, -1, -1, -1, -1 };
        uint32_t id, c3_conn, c4_conn, refused;
        char limits[128];

        snprintf(limits, sizeof(limits), "\"max_shm_bytes_per_client\": %zu",
                 shm_link_region_size(RING_DEFAULT) * 3 / 2);
        start("shm", limits);
        open_client(&c3);
        open_client(&c4);
        establish_with_channels(7440);
        id = expect_new_kept();
        disconnect_between(&b, b_conn, &a, a_conn);
        release(&a, id);        /* b never releases its end */
        establish_between(&a, &c3, 7441, &ca, fa, &a_conn, &ch3, f3, &c3_conn);
        cr_expect_neq(expect_new_kept_between(&ca, &ch3), id);
        expect_drop(&a, id);
        cr_expect_eq(cc_no_event(&b, DATP_EV_CHANNEL_DROP, 100), 0, "b was told to drop what it uses");
        /* b's region is still b's: no room for another. */
        expect_listen(&c4, 7442);
        refused = expect_connect(&b, &lo, lo_len, 7442, UINT64_MAX, NULL, 0);
        cr_assert_eq(cc_accept(&c4, expect_request(&c4, NULL), NULL, 0, &c4_conn), DAT_SUCCESS);
        expect_ev_conn(&b, refused, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, NULL);
        expect_ev_conn(&c4, c4_conn, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, NULL);
        /* Once b releases it, b is told too, and has the room again. */
        release(&b, id);
        expect_drop(&b, id);
        establish_between(&c4, &b, 7443, &ch4, f4, &c4_conn, &cb, fb, &b_conn);
        close_fds(f3);
        close_fds(f4);
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
