/* dat_ep_set_watermark(3DAT), the hard high watermark, on a connection of
 * the transport this program was built for: "A connection broken event
 * will be generated for EP connect_evd when the number of Recv buffers at
 * EP exceeds the hard high watermark."  libdat/ep.c: the connection ends
 * as a failed data path's does (BROKEN on both ends, everything
 * outstanding flushed), and an EP without a connection keeps the
 * watermark armed for the first check on one.
 *
 * The server is the EP whose Receives cross the watermark; the client its
 * peer. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdint.h>

#include "tests/dto/dto_fault.h"
#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(watermark);

#define MSG_LEN 64u

/* Receive i of the server: 4 KiB at i * 4 KiB of s->mem. */
static void post_receive(struct dto_side *s, unsigned i, struct dto_posted_list *l)
{
        dto_post_recv_one(s->ep[0], dto_iov(&s->mem, i * 4096, 4096), 100 + i, l);
}

/* The server's Receives are all flushed, after BROKEN; nothing else comes. */
static void server_broken(struct dto_side *s, const struct dto_posted_list *recvs)
{
        dto_expect_broken(s, s->ep[0]);
        dto_expect_all(s->recv_evd, s->ep[0], recvs, DAT_DTO_ERR_FLUSHED);
        dto_expect_empty(s->recv_evd);
        dto_expect_no_event(s->conn_evd, 100000);
}

static void crossing_server(struct dto_side *s, void *arg)
{
        struct dto_posted_list recvs = { 0 };

        (void)arg;
        post_receive(s, 0, &recvs);
        DTO_ASSERT_EQ(dat_ep_set_watermark(s->ep[0], DAT_WATERMARK_INFINITE, 2), DAT_SUCCESS);
        /* At the watermark is not beyond it. */
        post_receive(s, 1, &recvs);
        dto_expect_empty(s->conn_evd);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_CONNECTED);
        post_receive(s, 2, &recvs);
        server_broken(s, &recvs);
        dto_barrier(s);
}

static void peer_client(struct dto_side *s, void *arg)
{
        (void)arg;
        /* The peer's end of a broken connection. */
        dto_expect_broken(s, s->ep[0]);
        dto_barrier(s);
}

/* The Receive that takes the count beyond the hard high watermark breaks
 * the connection: BROKEN on the EP's connect EVD, every Receive flushed,
 * and the peer's end broken too. */
Test(DTO_SUITE(watermark), exceeding_the_hard_high_watermark_breaks_the_connection)
{
        dto_run(NULL, crossing_server, peer_client, NULL);
}

static void armed_server(struct dto_side *s, void *arg)
{
        struct dto_posted_list recvs = { 0 };

        (void)arg;
        DTO_ASSERT_EQ(dat_ep_set_watermark(s->ep[0], DAT_WATERMARK_INFINITE, 1), DAT_SUCCESS);
        post_receive(s, 0, NULL);
        post_receive(s, 1, &recvs);
        /* Beyond it with no connection: nothing to break. */
        dto_expect_empty(s->conn_evd);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_UNCONNECTED);
        dto_connect(s);
        dto_expect_recv(s, s->ep[0], 100, MSG_LEN);
        dto_barrier(s);
        /* One left, at the watermark: the next is beyond it, connected. */
        post_receive(s, 2, &recvs);
        server_broken(s, &recvs);
        dto_barrier(s);
}

static void armed_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET msg = dto_iov(&s->mem, 0, MSG_LEN);

        (void)arg;
        dto_connect(s);
        dto_send_wait(s, s->ep[0], &msg, 1, 1);
        dto_barrier(s);
        dto_expect_broken(s, s->ep[0]);
        dto_barrier(s);
}

/* Receives posted beyond the hard high watermark before the EP connects
 * break nothing (there is no connection); the watermark stays armed, and
 * the first Receive posted beyond it on the connection breaks it. */
Test(DTO_SUITE(watermark), the_hard_high_watermark_waits_armed_for_a_connection)
{
        struct dto_config cfg = { .no_connect = true };

        dto_run(&cfg, armed_server, armed_client, NULL);
}
