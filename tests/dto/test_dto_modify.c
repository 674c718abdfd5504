/* dat_ep_modify(3DAT) on an EP with Receives posted, then connected, on
 * the transport this program was built for: what the modify did to the
 * Receives shows in their completions and in where the messages land.
 *
 * The server is the receiver: its EP stays Unconnected (cfg.no_connect)
 * while it posts and modifies, then both sides connect and the client
 * sends. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdint.h>

#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(modify);

#define SEED_OLD 5000
#define SEED_MSG 6000
#define MSG_LEN 64u

/* Server: Receives 1 and 3 in s->mem (the EP's first PZ), 2 and 4 of no
 * segment (of every PZ); the PZ changes; then Receive 5 in memory of the
 * new PZ. */
static void pz_change_server(struct dto_side *s, void *arg)
{
        DAT_EP_HANDLE ep = s->ep[0];
        DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
        DAT_LMR_TRIPLET old1 = dto_iov(&s->mem, 0, MSG_LEN), old3 = dto_iov(&s->mem, 4096, MSG_LEN);
        DAT_LMR_TRIPLET fresh;
        struct dto_mem mem2;
        DAT_EP_PARAM p;
        DAT_COUNT nbufs = -1;

        (void)arg;
        DTO_ASSERT_EQ(dat_pz_create(s->ia, &pz2), DAT_SUCCESS);
        mem2 = dto_mem_new(s, pz2, 4096, DAT_MEM_PRIV_ALL_FLAG);
        dto_fill(s->mem.buf, s->mem.len, SEED_OLD);
        dto_post_recv(s, ep, &old1, 1, 1);
        dto_post_recv(s, ep, NULL, 0, 2);
        dto_post_recv(s, ep, &old3, 1, 3);
        dto_post_recv(s, ep, NULL, 0, 4);

        p.pz_handle = pz2;
        DTO_ASSERT_EQ(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE, &p), DAT_SUCCESS);
        /* Failed by the modify, before it returned, in posting order. */
        dto_expect_dto(s->recv_evd, ep, 1, DAT_DTO_ERR_LOCAL_PROTECTION, DTO_ANY_LENGTH,
                       DAT_DTO_RECEIVE);
        dto_expect_dto(s->recv_evd, ep, 3, DAT_DTO_ERR_LOCAL_PROTECTION, DTO_ANY_LENGTH,
                       DAT_DTO_RECEIVE);
        dto_expect_empty(s->recv_evd);
        DTO_ASSERT_EQ(dat_ep_recv_query(ep, &nbufs, NULL), DAT_SUCCESS);
        DTO_ASSERT_EQ(nbufs, 2);

        fresh = dto_iov(&mem2, 0, MSG_LEN);
        dto_post_recv(s, ep, &fresh, 1, 5);
        dto_connect(s);
        /* The two kept Receives take the first two messages, in order. */
        dto_expect_recv(s, ep, 2, 0);
        dto_expect_recv(s, ep, 4, 0);
        dto_expect_recv(s, ep, 5, MSG_LEN);
        dto_verify(mem2.buf, MSG_LEN, SEED_MSG);
        /* Nothing reached the old PZ's memory. */
        dto_verify(s->mem.buf, s->mem.len, SEED_OLD);
        dto_expect_empty(s->recv_evd);
        dto_barrier(s);
        dto_mem_free(&mem2);
}

static void pz_change_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET msg = dto_iov(&s->mem, 0, MSG_LEN);

        (void)arg;
        dto_fill(s->mem.buf, MSG_LEN, SEED_MSG);
        dto_connect(s);
        dto_send_wait(s, s->ep[0], NULL, 0, 10);
        dto_send_wait(s, s->ep[0], NULL, 0, 11);
        dto_send_wait(s, s->ep[0], &msg, 1, 12);
        dto_barrier(s);
}

/* dat_ep_modify(3DAT): "any Receive DTOs currently posted to the Endpoint
 * that do not match the new Protection Zone fail" -- each with
 * DAT_DTO_ERR_LOCAL_PROTECTION on the recv EVD at the modify (libdat/dto.h);
 * the Receives that match (here: of no segment) stay posted, in order, and
 * take the messages that come after the EP connects; the old PZ's memory
 * receives nothing. */
Test(DTO_SUITE(modify), receives_not_of_the_new_pz_fail_with_local_protection)
{
        struct dto_config cfg = { .no_connect = true };

        dto_run(&cfg, pz_change_server, pz_change_client, NULL);
}

/* Receives for queues_grow_*: i of nseg_of(i) segments of GROW_SEG bytes,
 * at i * 4096 + j * 1024 of the side's memory (apart, so that each segment
 * lands where its own triplet says); message i carries seed SEED_GROW + 10 i
 * (+ j in segment j, dto_fill_iov). */
#define SEED_GROW 7000
#define GROW_SEG 32u
#define GROW_BEFORE 3u  /* posted at max_recv_dtos 4, max_recv_iov 2 */
#define GROW_TOTAL 7u   /* then at 8 and 3 */

static unsigned nseg_of(unsigned i)
{
        return i < GROW_BEFORE ? 2 : 3;
}

static void grow_iov(const struct dto_side *s, unsigned i, DAT_LMR_TRIPLET *iov)
{
        for (unsigned j = 0; j < nseg_of(i); j++)
                iov[j] = dto_iov(&s->mem, i * 4096 + j * 1024, GROW_SEG);
}

static void queues_grow_server(struct dto_side *s, void *arg)
{
        DAT_EP_HANDLE ep = s->ep[0];
        DAT_LMR_TRIPLET iov[3];
        DAT_EP_PARAM p;

        (void)arg;
        for (unsigned i = 0; i < GROW_BEFORE; i++) {
                grow_iov(s, i, iov);
                dto_post_recv(s, ep, iov, nseg_of(i), 100 + i);
        }
        p.ep_attr = s->ep_attr;
        p.ep_attr.max_recv_dtos = 8;
        p.ep_attr.max_recv_iov = 3;
        DTO_ASSERT_EQ(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS |
                                            DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV,
                                    &p),
                      DAT_SUCCESS);
        /* Beyond both old limits. */
        for (unsigned i = GROW_BEFORE; i < GROW_TOTAL; i++) {
                grow_iov(s, i, iov);
                dto_post_recv(s, ep, iov, nseg_of(i), 100 + i);
        }
        dto_connect(s);
        for (unsigned i = 0; i < GROW_TOTAL; i++) {
                dto_expect_recv(s, ep, 100 + i, nseg_of(i) * GROW_SEG);
                grow_iov(s, i, iov);
                dto_verify_iov(iov, nseg_of(i), SEED_GROW + 10 * i);
        }
        dto_expect_empty(s->recv_evd);
        dto_barrier(s);
}

static void queues_grow_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov[3];

        (void)arg;
        dto_connect(s);
        for (unsigned i = 0; i < GROW_TOTAL; i++) {
                grow_iov(s, i, iov);
                dto_fill_iov(iov, nseg_of(i), SEED_GROW + 10 * i);
                dto_send_wait(s, s->ep[0], iov, nseg_of(i), 200 + i);
        }
        dto_barrier(s);
}

/* libdat/dto_queues.c: dat_ep_modify raising max_recv_dtos and max_recv_iov
 * with Receives posted takes effect at once: Receives beyond the old
 * limits go in, and the queue, grown for them, keeps the ones posted
 * before, in order, each with its own segments: the messages land in the
 * Receives in posting order, segment by segment. */
Test(DTO_SUITE(modify), raised_queue_limits_take_more_receives_and_keep_the_posted_in_order)
{
        struct dto_config cfg = { .no_connect = true, .max_recv_dtos = 4, .max_recv_iov = 2 };

        dto_run(&cfg, queues_grow_server, queues_grow_client, NULL);
}
