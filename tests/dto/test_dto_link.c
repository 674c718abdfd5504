/* Issue 6: a link cut between two hosts with DTOs outstanding.  Only the
 * network-namespace transport has a link to cut (tests/netns.h); the
 * server runs on host 1, the client on host 0 (dto_fixture.h). */
#include "config.h"

#include <criterion/criterion.h>

#include "tests/dto/dto_fault.h"
#include "tests/dto/dto_fixture.h"
#include "tests/netns.h"

DTO_TEST_SUITE(link);

#define BEFORE 2                        /* messages that arrive before the cut */
#define AFTER 4                         /* sends posted after it */
#define MSG ((DAT_VLEN)16 << 10)

static void cut_server(struct dto_side *s, void *arg)
{
        struct dto_posted_list later = { 0 };

        (void)arg;
        for (unsigned i = 0; i < BEFORE; i++)
                dto_post_recv(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, i * MSG, MSG) },
                              1, 100 + i);
        for (unsigned i = 0; i < AFTER; i++)
                dto_post_recv_one(s->ep[0], dto_iov(&s->mem, (BEFORE + i) * MSG, MSG), 200 + i,
                                  &later);
        dto_barrier(s);
        for (unsigned i = 0; i < BEFORE; i++) {
                DAT_EVENT ev = dto_wait_event(s->recv_evd);

                DTO_ASSERT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        }
        dto_barrier(s);
        /* The cut: this side's datd loses its CM link within two keepalive
         * periods and breaks the connection; what was posted flushes. */
        dto_expect_broken(s, s->ep[0]);
        dto_expect_all(s->recv_evd, s->ep[0], &later, DAT_DTO_ERR_FLUSHED);
        dto_barrier(s);
}

static void cut_client(struct dto_side *s, void *arg)
{
        struct dto_posted_list after = { 0 };

        (void)arg;
        dto_barrier(s);
        for (unsigned i = 0; i < BEFORE; i++)
                dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, MSG) }, 1,
                              10 + i);
        dto_barrier(s);
        /* The server's cable out (synchronous), then requests that cannot
         * reach it. */
        DTO_ASSERT_EQ(test_net_link_down(dto_net(), 1), 0);
        for (unsigned i = 0; i < AFTER; i++)
                dto_post_send_one(s->ep[0], dto_iov(&s->mem, 0, MSG), 20 + i, &after);
        /* dat_ep_connect(3DAT)'s BROKEN on the survivor, within the
         * configured keepalive (two periods of cm_keepalive_ms), and every
         * request flushed in order, none completed twice. */
        dto_expect_broken(s, s->ep[0]);
        dto_expect_all(s->request_evd, s->ep[0], &after, DAT_DTO_ERR_FLUSHED);
        dto_expect_empty(s->request_evd);
        dto_barrier(s);
}

Test(DTO_SUITE(link), a_cut_link_breaks_both_ends_and_flushes_what_was_outstanding)
{
        dto_run(NULL, cut_server, cut_client, NULL);
}
