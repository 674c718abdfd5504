/* Kept shm channels in libdat (libdat/shm_keep.h, channel_shm.c): a
 * channel sent with DATP_CHANNEL_KEEP goes to the IA's keep when it is
 * destroyed, a DATP_CHANNEL_REUSE one comes from there, and what a reuse
 * names must be what was kept.  No datd: the keep's connection is never
 * used to send (releases wait for a request that never comes). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "libdat/channel.h"
#include "libdat/datd_conn.h"
#include "libdat/shm_keep.h"
#include "libdat/shm_link.h"
#include "libdat/shm_region.h"

#define RING 4096u
#define ID 77u

static struct datd_conn conn;
static struct shm_keep *keep;
static int doorbell_mine[2];    /* [0] read end, [1] write end (the peer's ringer) */

static void setup(void)
{
        memset(&conn, 0, sizeof(conn));
        conn.fd = -1;
        cr_assert_eq(shm_keep_new(&conn, 1, &keep), 0);
}

static void teardown(void)
{
        shm_keep_close(keep);
        if (doorbell_mine[1] > 0)
                close(doorbell_mine[1]);
}

TestSuite(shm_keep, .init = setup, .fini = teardown, .timeout = 30);

/* A kept end as a destroyed KEEP channel leaves it: a laid out region,
 * its own doorbell (whose write end the test keeps, as the peer would),
 * the peer's doorbell and a read end of it (the guard: ringing a peer that
 * is gone is never SIGPIPE), no pidfd. */
static void keep_one(uint32_t id, unsigned side)
{
        struct shm_kept *e = calloc(1, sizeof(*e));
        int peer[2];
        int fd;

        cr_assert_not_null(e);
        e->size = shm_link_region_size(RING);
        cr_assert_eq(shm_region_create(e->size, &fd, &e->mem), 0);
        close(fd);
        cr_assert_eq(shm_link_init(e->mem, e->size, RING), 0);
        cr_assert_eq(pipe2(doorbell_mine, O_CLOEXEC | O_NONBLOCK), 0);
        cr_assert_eq(pipe2(peer, O_CLOEXEC | O_NONBLOCK), 0);
        e->id = id;
        e->ring_size = RING;
        e->side = side;
        e->doorbell_mine = doorbell_mine[0];
        e->doorbell_peer = peer[1];
        e->guard = peer[0];
        e->peer_pidfd = -1;
        shm_keep_put(keep, e, true);
}

static struct datp_ev_data_channel reuse_event(uint32_t id, unsigned side)
{
        return (struct datp_ev_data_channel){
                .conn_id = 5,
                .ep_handle = 6,
                .kind = DATP_CHANNEL_SHM,
                .region_size = shm_link_region_size(RING),
                .ring_size = RING,
                .side = side,
                .flags = DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP | DATP_CHANNEL_REUSE,
                .channel_id = id,
        };
}

static int pending_bytes(int fd)
{
        int n = -1;

        cr_assert_eq(ioctl(fd, FIONREAD, &n), 0);
        return n;
}

/* A ring the last connection left on the doorbell (an orderly end rings
 * nothing; a failed one or a last acknowledgement may) stays there when
 * the channel is reused: draining it on every reuse cost each connection a
 * system call that nearly always found nothing.  The first wake-up it
 * makes takes it, as any. */
Test(shm_keep, a_reused_channel_leaves_a_stale_ring_to_its_first_wake_up)
{
        struct datp_ev_data_channel ev = reuse_event(ID, 1);
        struct channel *ch = NULL;

        keep_one(ID, 1);
        cr_assert_eq(write(doorbell_mine[1], "x", 1), 1);
        cr_assert_eq(pending_bytes(doorbell_mine[0]), 1);
        cr_assert_eq(channel_create(&ev, NULL, 0, keep, &ch), 0);
        cr_assert_eq(shm_keep_count(keep), 0, "taken out of the keep");
        cr_expect_eq(ch->poll_fd, doorbell_mine[0], "its own doorbell again");
        cr_expect_eq(pending_bytes(doorbell_mine[0]), 1, "no system call to drain it");
        ch->ops->woken(ch);
        cr_expect_eq(pending_bytes(doorbell_mine[0]), 0, "the wake-up took it");
        channel_destroy(ch);
        cr_expect_eq(shm_keep_count(keep), 1, "a KEEP channel goes back to the keep");
}

/* REUSE names a channel the keep has: anything else is -EPROTO. */
Test(shm_keep, reuse_of_a_channel_not_kept_is_refused)
{
        struct datp_ev_data_channel ev = reuse_event(ID + 1, 1);
        struct channel *ch = NULL;

        keep_one(ID, 1);
        cr_expect_eq(channel_create(&ev, NULL, 0, keep, &ch), -EPROTO);
        cr_expect_eq(shm_keep_count(keep), 1, "the kept one stays");
        cr_expect_eq(channel_create(&ev, NULL, 0, NULL, &ch), -EPROTO, "no keep at all");
}

/* A reuse whose side or sizes differ from what was kept is not that
 * channel: refused, and the kept end (which datd no longer agrees on) freed. */
Test(shm_keep, reuse_with_another_side_or_size_is_refused)
{
        struct datp_ev_data_channel ev = reuse_event(ID, 0);
        struct channel *ch = NULL;

        keep_one(ID, 1);
        cr_expect_eq(channel_create(&ev, NULL, 0, keep, &ch), -EPROTO);
        cr_expect_eq(shm_keep_count(keep), 0);
        close(doorbell_mine[1]);
        keep_one(ID, 1);
        ev = reuse_event(ID, 1);
        ev.ring_size = 2 * RING;
        ev.region_size = shm_link_region_size(2 * RING);
        cr_expect_eq(channel_create(&ev, NULL, 0, keep, &ch), -EPROTO);
        cr_expect_eq(shm_keep_count(keep), 0);
}

/* EV_CHANNEL_DROP frees the kept channel it names, and only that one. */
Test(shm_keep, drop_frees_the_channel_it_names)
{
        keep_one(ID, 0);
        shm_keep_drop(keep, ID + 1);
        cr_expect_eq(shm_keep_count(keep), 1);
        shm_keep_drop(keep, ID);
        cr_expect_eq(shm_keep_count(keep), 0);
}

/* Kept channels wait for the next request to datd: their releases are
 * deferred on the connection (one each), not sent on their own. */
Test(shm_keep, an_orderly_end_defers_its_release_to_the_next_request)
{
        keep_one(ID, 0);
        cr_expect_eq(conn.n_deferred, 1);
        cr_expect_eq(conn.deferred[0].hdr.type, DATP_CHANNEL_RELEASE);
        cr_expect_eq(((const struct datp_channel_release *)conn.deferred[0].bytes)->channel_id, ID);
}
