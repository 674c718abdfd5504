/* Teardown with DTOs outstanding, between two processes, on the transport
 * this program was built for (libdat/dto.h, "Disconnect (either side),
 * dat_ep_reset, peer death"; dat_ep_disconnect(3DAT), dat_ep_reset(3DAT),
 * dat_ep_free(3DAT), dat_ep_post_recv(3DAT)): graceful disconnects complete
 * what is outstanding first, abrupt ones and peer death flush it in order,
 * each DTO exactly once; freed EPs complete nothing and give their SRQ
 * buffers back; a peer SIGKILLed in the middle of 16 MiB transfers leaves
 * the survivor's memory outside its buffers intact and datd with nothing of
 * the connection.
 *
 * Sends that must stay outstanding are Sends to a peer with no receive
 * posted: the receiver-not-ready time is set far beyond any test
 * ($DATD_RNR_TIMEOUT_MS=60000), so they wait until the teardown ends them. */
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/dto/dto_fault.h"
#include "tests/dto/dto_fixture.h"
#include "tests/harness.h"

DTO_TEST_SUITE(teardown);

static const char *const rnr_never[] = { "DATD_RNR_TIMEOUT_MS=60000", NULL };

#define MIB (1024u * 1024)
#define SEED_MEM 1000
#define SEED_MSG 2000

/* Sends that stay outstanding (the peer posts no receive). */
static void post_stuck_sends(struct dto_side *s, unsigned n, uint64_t first_cookie,
                             struct dto_posted_list *l)
{
        for (unsigned i = 0; i < n; i++)
                dto_post_send_one(s->ep[0], dto_iov(&s->mem, i * 4096, 4096), first_cookie + i, l);
}

static void post_receives(struct dto_side *s, unsigned n, uint64_t first_cookie,
                          struct dto_posted_list *l)
{
        for (unsigned i = 0; i < n; i++)
                dto_post_recv_one(s->ep[0], dto_iov(&s->mem, 64 * 1024 + i * 4096, 4096),
                                  first_cookie + i, l);
}

/* A connection event that ends the connection: DISCONNECTED or BROKEN. */
static void expect_connection_ended(struct dto_side *s, DAT_EP_HANDLE ep)
{
        DAT_EVENT ev = dto_wait_event(s->conn_evd);

        DTO_ASSERTF(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED ||
                    ev.event_number == DAT_CONNECTION_EVENT_BROKEN,
                    "connection event 0x%x, expected DISCONNECTED or BROKEN", ev.event_number);
        DTO_ASSERT_EQ(dto_ep_state(ep), DAT_EP_STATE_DISCONNECTED);
}

/* ---- graceful disconnect ---------------------------------------------------- */

#define GRACEFUL_SENDS 4
#define GRACEFUL_LEN (2 * MIB)

/* The client moves its EP's three event streams to one EVD before it
 * connects (dat_ep_disconnect(3DAT) orders them only on a shared EVD). */
static void use_one_evd(struct dto_side *s)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_EP_PARAM p = { 0 };

        DTO_ASSERT_EQ(dat_evd_create(s->ia, 256, DAT_HANDLE_NULL,
                                     DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG |
                                             DAT_EVD_RMR_BIND_FLAG,
                                     &evd),
                      DAT_SUCCESS);
        p.recv_evd_handle = p.request_evd_handle = p.connect_evd_handle = evd;
        DTO_ASSERT_EQ(dat_ep_modify(s->ep[0], DAT_EP_FIELD_RECV_EVD_HANDLE |
                                                      DAT_EP_FIELD_REQUEST_EVD_HANDLE |
                                                      DAT_EP_FIELD_CONNECT_EVD_HANDLE,
                                    &p),
                      DAT_SUCCESS);
        s->recv_evd = s->request_evd = s->conn_evd = evd;
}

static void graceful_server(struct dto_side *s, void *arg)
{
        struct dto_posted_list extra = { 0 };

        (void)arg;
        dto_connect(s);
        dto_fill(s->mem.buf, s->mem.len, SEED_MEM);
        for (unsigned i = 0; i < GRACEFUL_SENDS; i++)
                dto_post_recv(s, s->ep[0],
                              (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, i * GRACEFUL_LEN,
                                                           GRACEFUL_LEN) },
                              1, 100 + i);
        /* Two more that no Send takes: flushed by the disconnect. */
        dto_post_recv_one(s->ep[0], dto_iov(&s->mem, 12 * MIB, 4096), 110, &extra);
        dto_post_recv_one(s->ep[0], dto_iov(&s->mem, 12 * MIB + 4096, 4096), 111, &extra);
        dto_barrier(s);
        for (unsigned i = 0; i < GRACEFUL_SENDS; i++) {
                dto_expect_recv(s, s->ep[0], 100 + i, GRACEFUL_LEN);
                dto_verify(s->mem.buf + i * GRACEFUL_LEN, GRACEFUL_LEN, SEED_MSG + i);
        }
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        dto_expect_all(s->recv_evd, s->ep[0], &extra, DAT_DTO_ERR_FLUSHED);
        /* The two Writes landed before the disconnect. */
        dto_verify(s->mem.buf + 8 * MIB, GRACEFUL_LEN, SEED_MSG + 10);
        dto_verify(s->mem.buf + 10 * MIB, GRACEFUL_LEN, SEED_MSG + 11);
        dto_expect_no_event(s->recv_evd, 100000);
}

static void graceful_client(struct dto_side *s, void *arg)
{
        struct dto_posted_list reqs = { 0 };
        DAT_EVENT ev;

        (void)arg;
        use_one_evd(s);
        dto_connect(s);
        for (unsigned i = 0; i < GRACEFUL_SENDS; i++)
                dto_fill(s->mem.buf + i * GRACEFUL_LEN, GRACEFUL_LEN, SEED_MSG + i);
        dto_fill(s->mem.buf + 8 * MIB, GRACEFUL_LEN, SEED_MSG + 10);
        dto_fill(s->mem.buf + 10 * MIB, GRACEFUL_LEN, SEED_MSG + 11);
        dto_barrier(s);
        for (unsigned i = 0; i < GRACEFUL_SENDS; i++)
                dto_post_send_one(s->ep[0], dto_iov(&s->mem, i * GRACEFUL_LEN, GRACEFUL_LEN),
                                  10 + i, &reqs);
        dto_post_write(s->ep[0], dto_iov(&s->mem, 8 * MIB, GRACEFUL_LEN), 20,
                       dto_riov(&s->peer, 8 * MIB, GRACEFUL_LEN), &reqs);
        dto_post_write(s->ep[0], dto_iov(&s->mem, 10 * MIB, GRACEFUL_LEN), 21,
                       dto_riov(&s->peer, 10 * MIB, GRACEFUL_LEN), &reqs);
        /* Served in order after the Sends: it reads what the first placed. */
        dto_post_read(s->ep[0], dto_iov(&s->mem, 12 * MIB, GRACEFUL_LEN), 22,
                      dto_riov(&s->peer, 0, GRACEFUL_LEN), &reqs);
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        /* On the one EVD: every request completes successfully, in order,
         * and only then DISCONNECTED. */
        dto_expect_all(s->request_evd, s->ep[0], &reqs, DAT_DTO_SUCCESS);
        ev = dto_wait_event(s->conn_evd);
        DTO_ASSERTF(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
                    "event 0x%x after the requests, expected DISCONNECTED", ev.event_number);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_DISCONNECTED);
        dto_verify(s->mem.buf + 12 * MIB, GRACEFUL_LEN, SEED_MSG);
        dto_expect_no_event(s->request_evd, 100000);
}

/* dat_ep_disconnect(3DAT): graceful -- "all outstanding and in-progress
 * request DTOs ... must try to be completed successfully first, before
 * disconnect proceeds", and on an EVD shared by the streams "all successful
 * Completion events of in-progress DTOs precede the Disconnect Completion
 * event"; the peer's unused receives flush. */
Test(DTO_SUITE(teardown), graceful_disconnect_completes_outstanding_requests_first)
{
        struct dto_config cfg = { .buf_len = 16 * MIB, .no_connect = true };

        dto_run(&cfg, graceful_server, graceful_client, NULL);
}

/* A peer that disconnects in order and exits at once: its BYE (which
 * wakes nobody, dto_wire.h) is in the channel before its process is gone,
 * so the survivor's connection ends DISCONNECTED even when it hears of the
 * exit first (the pidfd on shm, the end of the stream on tcp).  datd is
 * stopped meanwhile, so that it does: its event comes only after. */
static void datds_signal(int sig)
{
        for (unsigned h = 0; h < 2; h++) {
                struct datd_instance *d = dto_datd(h);

                if (d && d->pid > 0)
                        (void)kill(d->pid, sig);
        }
}

static void leaving_at_once(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        dto_die(s);
}

static void staying(struct dto_side *s, void *arg)
{
        struct timespec exit_seen = { 0, 300 * 1000 * 1000 };

        (void)arg;
        datds_signal(SIGSTOP);
        dto_barrier(s);
        nanosleep(&exit_seen, NULL);
        datds_signal(SIGCONT);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
}

Test(DTO_SUITE(teardown), a_peer_that_disconnects_in_order_and_exits_at_once_is_disconnected)
{
        dto_run(NULL, staying, leaving_at_once, NULL);
}

/* dto.h: the death of a peer process breaks each connection to it, told
 * by the data path alone (datd is stopped meanwhile).  On shm by the one
 * watch libdat keeps on that process (peer_watch.h), which outlives the
 * process's connections -- these are its second ones, made after the
 * first all ended -- and serves every connection to it: a child of the
 * dying peer holds its descriptors, so that no doorbell hangs up (the
 * other way a shm channel hears of the end); on tcp by the end of the
 * stream. */
#define PEER_EPS 3
/* The child's bound, should the survivor not end it (it failed): longer
 * than the survivor waits for an event, so that its exit, which hangs the
 * doorbells up, tells nothing in time. */
#define HOLDER_S (2 * DTO_WAIT_US / 1000000)

static void reset_all(struct dto_side *s)
{
        for (unsigned i = 0; i < PEER_EPS; i++) {
                DTO_ASSERT_EQ(dat_ep_reset(s->ep[i]), DAT_SUCCESS);
                DTO_ASSERT_EQ(dto_ep_state(s->ep[i]), DAT_EP_STATE_UNCONNECTED);
        }
        if (s->role == DTO_SERVER) {
                DTO_ASSERT_EQ(dat_psp_free(s->psp), DAT_SUCCESS);
                s->psp = DAT_HANDLE_NULL;
        }
}

/* Connects, disconnects every EP in order, and connects them again. */
static void connect_twice(struct dto_side *s)
{
        dto_connect(s);
        dto_barrier(s);
        if (s->role == DTO_CLIENT)
                for (unsigned i = 0; i < PEER_EPS; i++)
                        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[i], DAT_CLOSE_GRACEFUL_FLAG),
                                      DAT_SUCCESS);
        for (unsigned i = 0; i < PEER_EPS; i++)
                dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        reset_all(s);
        dto_barrier(s);
        dto_connect(s);
}

static void dying_peer(struct dto_side *s, void *arg)
{
        pid_t holder = 0;

        (void)arg;
        connect_twice(s);
        if (dto_transport() == DTO_SHM) {
                holder = fork();
                DTO_ASSERT(holder >= 0);
                if (holder == 0) {
                        alarm(HOLDER_S);
                        for (;;)
                                pause();
                }
        }
        dto_put_u64(s, (uint64_t)holder);
        dto_barrier(s);
        dto_die(s);
}

static void outliving_peer(struct dto_side *s, void *arg)
{
        bool broken[PEER_EPS] = { false };

        pid_t holder;

        (void)arg;
        connect_twice(s);
        holder = (pid_t)dto_get_u64(s);
        datds_signal(SIGSTOP);
        dto_barrier(s);
        for (unsigned n = 0; n < PEER_EPS; n++) {
                DAT_EVENT ev = dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
                unsigned i = 0;

                while (i < PEER_EPS && s->ep[i] != ev.event_data.connect_event_data.ep_handle)
                        i++;
                DTO_ASSERTF(i < PEER_EPS && !broken[i], "BROKEN for EP %p: none of ours, or twice",
                            ev.event_data.connect_event_data.ep_handle);
                broken[i] = true;
                DTO_ASSERT_EQ(dto_ep_state(s->ep[i]), DAT_EP_STATE_DISCONNECTED);
        }
        if (holder > 0)
                (void)kill(holder, SIGKILL);
        datds_signal(SIGCONT);
}

Test(DTO_SUITE(teardown), a_dead_peer_breaks_each_connection_to_it_made_after_earlier_ones)
{
        struct dto_config cfg = { .n_eps = PEER_EPS, .no_connect = true };

        dto_run(&cfg, outliving_peer, dying_peer, NULL);
}

/* ---- abrupt disconnect -------------------------------------------------------- */

static void abrupt_requests_server(struct dto_side *s, void *arg)
{
        struct dto_posted_list reqs = { 0 };

        (void)arg;
        dto_fill(s->mem.buf, s->mem.len, SEED_MEM);
        post_stuck_sends(s, 3, 100, &reqs);
        dto_barrier(s);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_DISCONNECTED);
        dto_expect_all(s->request_evd, s->ep[0], &reqs, DAT_DTO_ERR_FLUSHED);
        dto_expect_no_event(s->request_evd, 100000);
        dto_expect_empty(s->recv_evd);
        /* The Write queued behind the client's stuck Sends never landed. */
        dto_verify(s->mem.buf, s->mem.len, SEED_MEM);
}

static void abrupt_requests_client(struct dto_side *s, void *arg)
{
        struct dto_posted_list reqs = { 0 };

        (void)arg;
        dto_fill(s->mem.buf, s->mem.len, SEED_MSG);
        post_stuck_sends(s, 3, 10, &reqs);
        dto_post_write(s->ep[0], dto_iov(&s->mem, 0, 4096), 13, dto_riov(&s->peer, 0, 4096),
                       &reqs);
        dto_post_read(s->ep[0], dto_iov(&s->mem, 8192, 4096), 14, dto_riov(&s->peer, 0, 4096),
                      &reqs);
        dto_barrier(s);
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_DISCONNECTED);
        dto_expect_all(s->request_evd, s->ep[0], &reqs, DAT_DTO_ERR_FLUSHED);
        dto_expect_no_event(s->request_evd, 100000);
        dto_expect_empty(s->recv_evd);
}

/* dat_ep_disconnect(3DAT): abrupt -- outstanding DTOs complete
 * unsuccessfully, in order; dto.h: DAT_DTO_ERR_FLUSHED, on both sides,
 * each once (Sends waiting for receives, a Write and a Read behind them;
 * the peer's own waiting Sends). */
Test(DTO_SUITE(teardown), abrupt_disconnect_flushes_outstanding_requests_in_order)
{
        struct dto_config cfg = { .env = rnr_never };

        dto_run(&cfg, abrupt_requests_server, abrupt_requests_client, NULL);
}

static void abrupt_receives_server(struct dto_side *s, void *arg)
{
        struct dto_posted_list recvs = { 0 };

        (void)arg;
        post_receives(s, 4, 100, &recvs);
        dto_barrier(s);
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        dto_expect_all(s->recv_evd, s->ep[0], &recvs, DAT_DTO_ERR_FLUSHED);
        dto_expect_no_event(s->recv_evd, 100000);
        dto_expect_empty(s->request_evd);
}

static void abrupt_receives_client(struct dto_side *s, void *arg)
{
        struct dto_posted_list recvs = { 0 };

        (void)arg;
        post_receives(s, 3, 10, &recvs);
        dto_barrier(s);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_DISCONNECTED);
        dto_expect_all(s->recv_evd, s->ep[0], &recvs, DAT_DTO_ERR_FLUSHED);
        dto_expect_no_event(s->recv_evd, 100000);
        dto_expect_empty(s->request_evd);
}

/* dat_ep_disconnect(3DAT): abrupt, by the passive side this time --
 * outstanding receives on both sides complete FLUSHED, in order, once. */
Test(DTO_SUITE(teardown), abrupt_disconnect_flushes_outstanding_receives_in_order)
{
        dto_run(NULL, abrupt_receives_server, abrupt_receives_client, NULL);
}

/* ---- posting to a Disconnected EP ----------------------------------------- */

static void disconnected_server(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_connect(s);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        dto_barrier(s);
}

static void disconnected_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, 4096);
        DAT_RMR_TRIPLET remote = { .virtual_address = 0, .segment_length = 4096 };
        DAT_EP_HANDLE ep = s->ep[0];
        DAT_DTO_COOKIE c = dto_cookie(1);
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
        DAT_RMR_CONTEXT ctx;
        DAT_EVENT ev;
        const bool *requests = arg;

        /* Unconnected: requests are refused (the states they are valid in
         * are Connected and Disconnected only). */
        if (*requests) {
                DTO_ASSERT_TYPE(dat_ep_post_send(ep, 1, &iov, c, 0), DAT_INVALID_STATE);
                DTO_ASSERT_TYPE(dat_ep_post_rdma_write(ep, 1, &iov, c, &remote, 0),
                                DAT_INVALID_STATE);
                DTO_ASSERT_TYPE(dat_ep_post_rdma_read(ep, 1, &iov, c, &remote, 0),
                                DAT_INVALID_STATE);
        }
        dto_connect(s);
        remote = dto_riov(&s->peer, 0, 4096);
        DTO_ASSERT_EQ(dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        DTO_ASSERT_EQ(dto_ep_state(ep), DAT_EP_STATE_DISCONNECTED);
        dto_expect_empty(s->request_evd);
        dto_expect_empty(s->recv_evd);
        if (!*requests) {
                dto_post_recv_one(ep, iov, 20, NULL);
                dto_expect_dto(s->recv_evd, ep, 20, DAT_DTO_ERR_FLUSHED, DTO_ANY_LENGTH,
                               DAT_DTO_RECEIVE);
                dto_post_recv_one(ep, iov, 21, NULL);
                dto_expect_dto(s->recv_evd, ep, 21, DAT_DTO_ERR_FLUSHED, DTO_ANY_LENGTH,
                               DAT_DTO_RECEIVE);
                dto_expect_empty(s->request_evd);
                dto_barrier(s);
                return;
        }
        dto_post_send_one(ep, iov, 30, NULL);
        dto_post_write(ep, iov, 31, remote, NULL);
        dto_post_read(ep, iov, 32, remote, NULL);
        dto_expect_dto(s->request_evd, ep, 30, DAT_DTO_ERR_FLUSHED, DTO_ANY_LENGTH, DAT_DTO_SEND);
        dto_expect_dto(s->request_evd, ep, 31, DAT_DTO_ERR_FLUSHED, DTO_ANY_LENGTH,
                       DAT_DTO_RDMA_WRITE);
        dto_expect_dto(s->request_evd, ep, 32, DAT_DTO_ERR_FLUSHED, DTO_ANY_LENGTH,
                       DAT_DTO_RDMA_READ);
        DTO_ASSERT_EQ(dat_rmr_create(s->pz, &rmr), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_rmr_bind(rmr, s->mem.lmr, &iov, DAT_MEM_PRIV_REMOTE_READ_FLAG,
                                   DAT_VA_TYPE_VA, ep, dto_cookie(33), 0, &ctx),
                      DAT_SUCCESS);
        ev = dto_wait_event(s->request_evd);
        DTO_ASSERTF(ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT,
                    "event 0x%x, expected the flushed RMR bind", ev.event_number);
        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.status, DAT_RMR_BIND_FAILURE);
        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.user_cookie.as_64, 33);
        dto_expect_empty(s->recv_evd);
        dto_barrier(s);
}

/* dat_ep_post_recv(3DAT): "The operation on the Endpoint in
 * DAT_EP_STATE_DISCONNECTED is allowed. If the operation returns
 * successfully, the posted Recv is immediately flushed to recv_evd_handle". */
Test(DTO_SUITE(teardown), receives_posted_to_a_disconnected_ep_flush_at_once)
{
        static const bool requests = false;
        struct dto_config cfg = { .no_connect = true };

        dto_run(&cfg, disconnected_server, disconnected_client, (void *)&requests);
}

/* dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT),
 * dat_ep_post_rdma_read(3DAT), dat_rmr_bind(3DAT): valid in Connected and
 * Disconnected only (DAT_INVALID_STATE when Unconnected); on a Disconnected
 * EP "the posted <request> is immediately flushed to request_evd_handle"
 * (dto.h says the same). */
Test(DTO_SUITE(teardown), requests_posted_to_a_disconnected_ep_flush_at_once)
{
        static const bool requests = true;
        struct dto_config cfg = { .no_connect = true };

        dto_run(&cfg, disconnected_server, disconnected_client, (void *)&requests);
}

/* ---- dat_ep_reset ------------------------------------------------------------ */

static void reset_keeps_server(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned i = 0; i < 2; i++)
                dto_post_recv(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, i * 4096, 4096) },
                              1, 100 + i);
        DTO_ASSERT_EQ(dat_ep_reset(s->ep[0]), DAT_SUCCESS);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_UNCONNECTED);
        dto_expect_no_event(s->recv_evd, 100000);
        dto_connect(s);
        dto_barrier(s);
        for (unsigned i = 0; i < 2; i++) {
                dto_expect_recv(s, s->ep[0], 100 + i, 1000);
                dto_verify(s->mem.buf + i * 4096, 1000, SEED_MSG + i);
        }
}

static void reset_keeps_client(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_connect(s);
        dto_barrier(s);
        for (unsigned i = 0; i < 2; i++) {
                dto_fill(s->mem.buf + i * 4096, 1000, SEED_MSG + i);
                dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, i * 4096, 1000) },
                              1, 10 + i);
        }
}

/* dat_ep_reset(3DAT): "For an Unconnected state, the preposted Recvs are
 * not affected by the call": they take the first messages of the
 * connection made afterwards. */
Test(DTO_SUITE(teardown), reset_of_an_unconnected_ep_keeps_its_preposted_receives)
{
        struct dto_config cfg = { .no_connect = true };

        dto_run(&cfg, reset_keeps_server, reset_keeps_client, NULL);
}

/* After a reset both sides connect again on the same EPs (the server's
 * PSP is made anew by dto_connect). */
static void reconnect(struct dto_side *s)
{
        DTO_ASSERT_EQ(dat_ep_reset(s->ep[0]), DAT_SUCCESS);
        DTO_ASSERT_EQ(dto_ep_state(s->ep[0]), DAT_EP_STATE_UNCONNECTED);
        if (s->role == DTO_SERVER) {
                DTO_ASSERT_EQ(dat_psp_free(s->psp), DAT_SUCCESS);
                s->psp = DAT_HANDLE_NULL;
        }
        dto_barrier(s);
        dto_connect(s);
}

static void reset_disconnected_server(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        reconnect(s);
        dto_post_recv(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, 4096) }, 1, 100);
        dto_barrier(s);
        dto_expect_recv(s, s->ep[0], 100, 512);
        dto_verify(s->mem.buf, 512, SEED_MSG);
}

static void reset_disconnected_client(struct dto_side *s, void *arg)
{
        struct dto_posted_list reqs = { 0 }, recvs = { 0 };

        (void)arg;
        post_receives(s, 2, 20, &recvs);
        post_stuck_sends(s, 3, 10, &reqs);
        dto_barrier(s);
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        /* Reset before dequeuing a single flush. */
        reconnect(s);
        dto_expect_all(s->request_evd, s->ep[0], &reqs, DAT_DTO_ERR_FLUSHED);
        dto_expect_all(s->recv_evd, s->ep[0], &recvs, DAT_DTO_ERR_FLUSHED);
        dto_expect_no_event(s->request_evd, 100000);
        dto_expect_empty(s->recv_evd);
        /* The new connection starts clean. */
        dto_barrier(s);
        dto_fill(s->mem.buf, 512, SEED_MSG);
        dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, 512) }, 1, 30);
        dto_expect_empty(s->recv_evd);
}

/* dto.h: dat_ep_reset -- every DTO outstanding at the disconnect completes
 * DAT_DTO_ERR_FLUSHED exactly once even when the EP is reset before they
 * were dequeued, and the reset EP (Unconnected, dat_ep_reset(3DAT))
 * connects again and carries data with nothing left of the old connection. */
Test(DTO_SUITE(teardown), reset_of_a_disconnected_ep_flushes_each_dto_once_and_reconnects)
{
        struct dto_config cfg = { .env = rnr_never };

        dto_run(&cfg, reset_disconnected_server, reset_disconnected_client, NULL);
}

/* ---- one channel, connection after connection ------------------------------- */

#define REUSE_ROUNDS 10
#define REUSE_MSGS 48
#define REUSE_SLOT 8192u

/* Round r's message i: sizes that put record boundaries somewhere else
 * each round, below the size that goes by cross-memory attach, and more
 * of them than a ring holds (256 KiB). */
static DAT_SEG_LENGTH reuse_len(unsigned round, unsigned i)
{
        return (round * 131 + i * 1777) % (REUSE_SLOT - 1) + 1;
}

/* The inode of the one shm region this process maps, 0 if it maps none;
 * asserts there is at most one. */
static unsigned long shm_region_inode(void)
{
        FILE *f = fopen("/proc/self/maps", "r");
        unsigned long inode = 0, ino;
        char line[512];
        unsigned n = 0;

        DTO_ASSERT(f != NULL);
        while (fgets(line, sizeof(line), f))
                if (strstr(line, "/memfd:datd-shm") &&
                    sscanf(line, "%*s %*s %*s %*s %lu", &ino) == 1) {
                        inode = ino;
                        n++;
                }
        fclose(f);
        DTO_ASSERTF(n <= 1, "%u shm regions mapped: one connection at a time needs one", n);
        return inode;
}

/* One direction of a round: the receiver posts every receive, the sender
 * sends each message once they are (a barrier), the receiver checks them. */
static void reuse_direction(struct dto_side *s, bool sending, unsigned round, uint64_t seed)
{
        if (!sending)
                for (unsigned i = 0; i < REUSE_MSGS; i++)
                        dto_post_recv(s, s->ep[0],
                                      (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, i * REUSE_SLOT, REUSE_SLOT) },
                                      1, 100 + i);
        dto_barrier(s);
        for (unsigned i = 0; i < REUSE_MSGS; i++) {
                DAT_SEG_LENGTH len = reuse_len(round, i);

                if (sending) {
                        dto_fill(s->mem.buf + i * REUSE_SLOT, len, seed + i);
                        dto_send_wait(s, s->ep[0],
                                      (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, i * REUSE_SLOT, len) }, 1,
                                      200 + i);
                } else {
                        dto_expect_recv(s, s->ep[0], 100 + i, len);
                        dto_verify(s->mem.buf + i * REUSE_SLOT, len, seed + i);
                }
        }
        dto_barrier(s);
}

static void reuse_role(struct dto_side *s, void *arg)
{
        unsigned long first = 0;

        (void)arg;
        for (unsigned round = 0; round < REUSE_ROUNDS; round++) {
                if (round == 0)
                        dto_connect(s);
                else
                        reconnect(s);
                if (dto_transport() == DTO_SHM) {
                        unsigned long inode = shm_region_inode();

                        DTO_ASSERT(inode != 0);
                        if (round == 0)
                                first = inode;
                        /* proto/PROTOCOL.md, kept channels: the same
                         * region, connection after connection. */
                        DTO_ASSERTF(inode == first, "round %u: region %lu, first %lu", round,
                                    inode, first);
                }
                reuse_direction(s, s->role == DTO_CLIENT, round, SEED_MSG + round * 1000);
                reuse_direction(s, s->role == DTO_SERVER, round, SEED_MSG + round * 1000 + 500);
                if (s->role == DTO_CLIENT)
                        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_GRACEFUL_FLAG),
                                      DAT_SUCCESS);
                dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        }
}

/* The same two processes connect again and again on the same EPs: each
 * connection carries its messages of both directions intact, in order,
 * whatever the one before left in the channel; on shm it is the same
 * region each time (kept channels, proto/PROTOCOL.md), laid out afresh. */
Test(DTO_SUITE(teardown), connection_after_connection_carries_intact_data_on_a_fresh_channel)
{
        struct dto_config cfg = { .no_connect = true, .buf_len = REUSE_MSGS * REUSE_SLOT,
                                  .max_recv_dtos = REUSE_MSGS,
                                  .timeout_ms = 50000 };

        dto_run(&cfg, reuse_role, reuse_role, NULL);
}

/* ---- dat_ep_free --------------------------------------------------------------- */

static void free_outstanding_server(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);
        expect_connection_ended(s, s->ep[0]);
        dto_barrier(s);
}

static void free_outstanding_client(struct dto_side *s, void *arg)
{
        (void)arg;
        post_receives(s, 3, 20, NULL);
        post_stuck_sends(s, 2, 10, NULL);
        dto_barrier(s);
        DTO_ASSERT_EQ(dat_ep_free(s->ep[0]), DAT_SUCCESS);
        s->ep[0] = DAT_HANDLE_NULL;
        /* dto.h: destroyed without completions. */
        dto_expect_no_event(s->request_evd, 300000);
        dto_expect_empty(s->recv_evd);
        dto_barrier(s);
}

/* dat_ep_free(3DAT): a Connected EP with receives and requests outstanding
 * can be freed; dto.h: they are destroyed without completions; the peer's
 * connection ends. */
Test(DTO_SUITE(teardown), ep_free_with_dtos_outstanding_completes_nothing)
{
        struct dto_config cfg = { .env = rnr_never };

        dto_run(&cfg, free_outstanding_server, free_outstanding_client, NULL);
}

/* ---- dat_ep_free right after a disconnect, round after round ------------------- */

#define CHURN_ROUNDS 300

static void new_ep(struct dto_side *s)
{
        DTO_ASSERT_EQ(dat_ep_create(s->ia, s->pz, s->recv_evd, s->request_evd, s->conn_evd,
                                    &s->ep_attr, &s->ep[0]),
                      DAT_SUCCESS);
}

/* Spins for about us microseconds (a sleep would round up to the
 * scheduler's granularity; the window is a few microseconds wide). */
static void spin_us(unsigned us)
{
        struct timespec t0, t;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        do
                clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 < (long)us);
}

/* The server frees its EP as soon as it hears that the client
 * disconnected (first from the data path: the client's goodbye comes
 * through the channel before datd's DISCONNECTED). */
static void churn_server(struct dto_side *s, void *arg)
{
        DAT_EVENT ev;

        (void)arg;
        for (unsigned round = 0; round < CHURN_ROUNDS; round++) {
                if (round > 0) {
                        new_ep(s);
                        /* dto_connect makes the listener anew. */
                        DTO_ASSERT_EQ(dat_psp_free(s->psp), DAT_SUCCESS);
                }
                dto_connect(s);
                dto_barrier(s);
                expect_connection_ended(s, s->ep[0]);
                DTO_ASSERT_EQ(dat_ep_free(s->ep[0]), DAT_SUCCESS);
                s->ep[0] = DAT_HANDLE_NULL;
                /* Nothing more of the freed EP. */
                DTO_ASSERT(dat_evd_dequeue(s->conn_evd, &ev) != DAT_SUCCESS);
                dto_barrier(s);
        }
}

/* The client disconnects and frees its EP at a different moment of each
 * round: datd's own DISCONNECTED for its disconnect follows the reply, and
 * is now and then dispatched while dat_ep_free runs. */
static void churn_client(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned round = 0; round < CHURN_ROUNDS; round++) {
                if (round > 0)
                        new_ep(s);
                dto_connect(s);
                dto_barrier(s);
                DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
                expect_connection_ended(s, s->ep[0]);
                spin_us(round % 100);
                DTO_ASSERT_EQ(dat_ep_free(s->ep[0]), DAT_SUCCESS);
                s->ep[0] = DAT_HANDLE_NULL;
                dto_barrier(s);
        }
}

/* dat_ep_free(3DAT) "in any Endpoint state", right after the connection
 * ended, round after round, while datd's own DISCONNECTED for each side is
 * still on its way: each free succeeds, nothing of a freed EP comes after
 * it, and (LeakSanitizer, in the sanitizer build) nothing leaks.  The
 * exact interleaving that once made the progress thread stop a freed data
 * path is forced in test_conn_progress
 * (ep_free_waits_for_the_dispatch_of_its_disconnection); this is the
 * churn around it. */
Test(DTO_SUITE(teardown), ep_free_right_after_disconnect_round_after_round)
{
        struct dto_config cfg = { .no_connect = true, .timeout_ms = 50000 };

        dto_run(&cfg, churn_server, churn_client, NULL);
}

#define SRQ_BUFFERS 8
#define SRQ_MSG (1 * MIB)

static DAT_SRQ_PARAM srq_counts(DAT_SRQ_HANDLE srq)
{
        DAT_SRQ_PARAM p;

        memset(&p, 0, sizeof(p));
        DTO_ASSERT_EQ(dat_srq_query(srq, DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT |
                                                 DAT_SRQ_FIELD_OUTSTANDING_DTO_COUNT,
                                    &p),
                      DAT_SUCCESS);
        return p;
}

/* A successful receive of 4096 bytes into one of the SRQ's buffers (which
 * one is the SRQ's choice). */
static void expect_srq_recv(struct dto_side *s)
{
        DAT_EVENT ev = dto_wait_event(s->recv_evd);
        uint64_t c = ev.event_data.dto_completion_event_data.user_cookie.as_64;

        DTO_ASSERT(c >= 100 && c < 100 + SRQ_BUFFERS);
        dto_check_dto(&ev, s->ep[0], c, DAT_DTO_SUCCESS, 4096, DAT_DTO_RECEIVE);
}

static void free_srq_server(struct dto_side *s, void *arg)
{
        DAT_SRQ_PARAM p;
        DAT_EVENT ev;
        DAT_COUNT left, completed = 3;

        (void)arg;
        for (unsigned i = 0; i < SRQ_BUFFERS; i++) {
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, i * SRQ_MSG, SRQ_MSG);

                DTO_ASSERT_EQ(dat_srq_post_recv(s->srq, 1, &iov, dto_cookie(100 + i)),
                              DAT_SUCCESS);
        }
        dto_barrier(s);
        for (unsigned i = 0; i < 3; i++)
                expect_srq_recv(s);
        /* dat_srq_query(3DAT)'s own example: arrivals lower the available
         * count, dequeued completions the outstanding one. */
        p = srq_counts(s->srq);
        DTO_ASSERT_EQ(p.available_dto_count, SRQ_BUFFERS - 3);
        DTO_ASSERT_EQ(p.outstanding_dto_count, SRQ_BUFFERS - 3);
        dto_put_u64(s, 1);
        dto_get_u64(s); /* two more messages are on their way */
        DTO_ASSERT_EQ(dat_ep_free(s->ep[0]), DAT_SUCCESS);
        s->ep[0] = DAT_HANDLE_NULL;
        /* Completions made before the free may still be queued (dat_ep_free
         * (3DAT)); none may come after it. */
        while (dat_evd_dequeue(s->recv_evd, &ev) == DAT_SUCCESS) {
                DTO_ASSERT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT);
                DTO_ASSERT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
                completed++;
        }
        dto_expect_no_event(s->recv_evd, 300000);
        left = SRQ_BUFFERS - completed;
        p = srq_counts(s->srq);
        DTO_ASSERTF(p.available_dto_count == left && p.outstanding_dto_count == left,
                    "after dat_ep_free: available %d, outstanding %d; expected %d each (%d "
                    "buffers posted, %d completed)",
                    p.available_dto_count, p.outstanding_dto_count, left, SRQ_BUFFERS,
                    completed);
        dto_barrier(s);
}

static void free_srq_client(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);
        for (unsigned i = 0; i < 3; i++)
                dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, 4096) }, 1,
                              10 + i);
        dto_get_u64(s); /* the server counted */
        for (unsigned i = 0; i < 2; i++)
                dto_post_send_one(s->ep[0], dto_iov(&s->mem, 0, SRQ_MSG), 20 + i, NULL);
        dto_put_u64(s, 1);
        expect_connection_ended(s, s->ep[0]);
        dto_barrier(s);
}

/* dat_ep_free(3DAT) of an EP on an SRQ while messages are arriving: no
 * completion after the free, and (dto.h) the SRQ buffers the EP took come
 * back -- dat_srq_query(3DAT) counts every posted buffer that did not
 * complete as available and outstanding again. */
Test(DTO_SUITE(teardown), ep_free_returns_the_srq_buffers_it_took)
{
        struct dto_config cfg = { .srq = true, .srq_max_recv_dtos = 16,
                                  .buf_len = SRQ_BUFFERS * SRQ_MSG };

        dto_run(&cfg, free_srq_server, free_srq_client, NULL);
}

/* ---- the peer SIGKILLed in the middle of 16 MiB transfers ------------------- */

#define BIG (16 * MIB)
#define KEEP_WRITES 4
#define CANARY 0xc5
#define SEED_VICTIM 5000
#define SEED_RX 6000
#define SEED_WT 7000
#define SEED_OWN 8000
/* How long datd may take to forget a dead connection (bounds a failing
 * test only). */
#define RECLAIM_WAIT_MS 10000

/* Memory between a PROT_NONE guard page and a canary page on each side:
 * | guard | canary | buf (the LMR) | canary | guard |. */
struct guarded {
        unsigned char *map;
        size_t map_len, page;
        struct dto_mem mem;
};

static struct guarded guarded_new(struct dto_side *s, DAT_VLEN len)
{
        struct guarded g = { .page = (size_t)sysconf(_SC_PAGESIZE) };
        DAT_REGION_DESCRIPTION region;
        DAT_VLEN reg_len = 0;
        DAT_VADDR reg_addr = 0;

        g.map_len = len + 4 * g.page;
        g.map = mmap(NULL, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        DTO_ASSERTF(g.map != MAP_FAILED, "mmap: %m");
        DTO_ASSERT_EQ(mprotect(g.map, g.page, PROT_NONE), 0);
        DTO_ASSERT_EQ(mprotect(g.map + g.map_len - g.page, g.page, PROT_NONE), 0);
        memset(g.map + g.page, CANARY, g.page);
        memset(g.map + 2 * g.page + len, CANARY, g.page);
        g.mem = (struct dto_mem){ .buf = g.map + 2 * g.page, .len = len,
                                  .privileges = DAT_MEM_PRIV_ALL_FLAG };
        region.for_va = g.mem.buf;
        DTO_ASSERT_EQ(dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, region, len, s->pz,
                                     DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &g.mem.lmr,
                                     &g.mem.lmr_context, &g.mem.rmr_context, &reg_len, &reg_addr),
                      DAT_SUCCESS);
        return g;
}

static void guarded_check(const struct guarded *g, const char *what)
{
        const unsigned char *canaries[2] = { g->map + g->page, g->mem.buf + g->mem.len };

        for (unsigned c = 0; c < 2; c++)
                for (size_t i = 0; i < g->page; i++)
                        DTO_ASSERTF(canaries[c][i] == CANARY,
                                    "%s: the canary page %s the buffer changed at byte %zu "
                                    "(0x%02x)", what, c ? "after" : "before", i, canaries[c][i]);
}

/* Every byte of p is that of pattern a or of pattern b (a Write cut short
 * leaves a mix of both, never anything else). */
static void verify_either(const unsigned char *p, size_t len, uint64_t a, uint64_t b)
{
        unsigned char *ra = malloc(len), *rb = malloc(len);

        DTO_ASSERT(ra && rb);
        dto_fill(ra, len, a);
        dto_fill(rb, len, b);
        for (size_t i = 0; i < len; i++)
                DTO_ASSERTF(p[i] == ra[i] || p[i] == rb[i],
                            "byte %zu of the Write target is 0x%02x: neither the old 0x%02x nor "
                            "the written 0x%02x", i, p[i], ra[i], rb[i]);
        free(ra);
        free(rb);
}

/* datd's descriptors that are shm data channel regions. */
static unsigned datd_memfds(const struct datd_instance *d)
{
        char dir[64], path[PATH_MAX], target[PATH_MAX];
        unsigned n = 0;
        struct dirent *e;
        DIR *f;

        snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)d->pid);
        f = opendir(dir);
        DTO_ASSERTF(f, "opendir(%s): %m", dir);
        while ((e = readdir(f))) {
                ssize_t k;

                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                k = readlink(path, target, sizeof(target) - 1);
                if (k <= 0)
                        continue;
                target[k] = '\0';
                if (strncmp(target, "/memfd:datd-shm", strlen("/memfd:datd-shm")) == 0)
                        n++;
        }
        closedir(f);
        return n;
}

/* Rows of `datctl --json connection list` of datd d. */
static size_t datd_connection_rows(const struct datd_instance *d)
{
        _cleanup_free_ char *datctl = build_path("daemon/datctl"), *out = NULL;
        char address[PATH_MAX + 32];
        char *argv[] = { datctl, (char *)"--json", address, (char *)"connection", (char *)"list",
                         NULL };
        json_error_t error;
        json_t *rows;
        size_t n;
        int r;

        snprintf(address, sizeof(address), "--address=%s", d->bus_address);
        r = run_capture(argv, &out, 20000);
        DTO_ASSERTF(r == 0, "datctl connection list: exit %d: %s", r, out ? out : "");
        rows = json_loads(out, 0, &error);
        DTO_ASSERTF(rows && json_is_array(rows), "datctl --json connection list: not an array: "
                    "%s", out);
        n = json_array_size(rows);
        json_decref(rows);
        return n;
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* datd keeps nothing of the dead connection: no row in any datd's
 * connection list, and (shm) no region descriptor beyond those it had
 * before the connection. */
static void expect_datd_reclaimed(unsigned memfds_before)
{
        unsigned hosts = dto_transport() == DTO_TCP_NETNS ? 2 : 1;
        long long deadline = now_ms() + RECLAIM_WAIT_MS;
        size_t rows = 0;
        unsigned memfds = 0;

        for (;;) {
                rows = 0;
                for (unsigned h = 0; h < hosts; h++)
                        rows += datd_connection_rows(dto_datd(h));
                memfds = dto_transport() == DTO_SHM ? datd_memfds(dto_datd(0)) : memfds_before;
                if ((rows == 0 && memfds == memfds_before) || now_ms() > deadline)
                        break;
                poll(NULL, 0, 100);
        }
        DTO_ASSERTF(rows == 0, "datd still lists %zu connection ends %d ms after the peer died",
                    rows, RECLAIM_WAIT_MS);
        DTO_ASSERTF(memfds == memfds_before,
                    "datd holds %u shm regions %d ms after the peer died, %u before the "
                    "connection", memfds, RECLAIM_WAIT_MS, memfds_before);
}

/* Completions of l on evd: each once, in order, a run of DAT_DTO_SUCCESS
 * (whose data is then checked by check) followed by a run of
 * DAT_DTO_ERR_FLUSHED. */
static void expect_success_then_flushed(struct dto_side *s, DAT_EVD_HANDLE evd,
                                        const struct dto_posted_list *l,
                                        void (*check)(struct dto_side *s, uint64_t cookie))
{
        bool flushing = false;

        for (unsigned i = 0; i < l->n; i++) {
                DAT_EVENT ev = dto_wait_event(evd);
                DAT_DTO_COMPLETION_STATUS st = ev.event_data.dto_completion_event_data.status;

                DTO_ASSERTF(st == DAT_DTO_ERR_FLUSHED || (st == DAT_DTO_SUCCESS && !flushing),
                            "cookie %llu: status %d after %s", (unsigned long long)l->d[i].cookie,
                            (int)st, flushing ? "a flush" : "successes");
                dto_check_dto(&ev, s->ep[0], l->d[i].cookie, st, DTO_ANY_LENGTH, l->d[i].op);
                flushing = st == DAT_DTO_ERR_FLUSHED;
                if (!flushing)
                        check(s, l->d[i].cookie);
        }
}

struct survivor_mem {
        struct guarded rx, wt, own;
};

static struct survivor_mem *survivor_mem;

static void check_survivor_data(struct dto_side *s, uint64_t cookie)
{
        (void)s;
        if (cookie == 101)      /* the victim's second 16 MiB Send */
                dto_verify(survivor_mem->rx.mem.buf + BIG, BIG, SEED_VICTIM);
        else if (cookie == 200) /* the Read of the victim's buffer */
                dto_verify(survivor_mem->own.mem.buf + BIG, BIG, SEED_VICTIM);
}

static void survivor(struct dto_side *s, void *arg)
{
        struct survivor_mem m;
        struct dto_posted_list reqs = { 0 }, recvs = { 0 };
        unsigned memfds = dto_transport() == DTO_SHM ? datd_memfds(dto_datd(0)) : 0;
        struct dto_remote wt;

        (void)arg;
        survivor_mem = &m;
        dto_connect(s);
        /* What the reclaim check looks for is there while the connection is. */
        DTO_ASSERTF(datd_connection_rows(dto_datd(1)) > 0,
                    "datd lists no end of the connection: the reclaim check could not fail");
        if (dto_transport() == DTO_SHM)
                DTO_ASSERTF(datd_memfds(dto_datd(0)) > memfds,
                            "datd holds no shm region for the connection: the reclaim check "
                            "could not fail");
        m.rx = guarded_new(s, 2 * BIG);
        m.wt = guarded_new(s, BIG);
        m.own = guarded_new(s, 2 * BIG);
        dto_fill(m.rx.mem.buf, 2 * BIG, SEED_RX);
        dto_fill(m.wt.mem.buf, BIG, SEED_WT);
        dto_fill(m.own.mem.buf, 2 * BIG, SEED_OWN);
        dto_post_recv_one(s->ep[0], dto_iov(&m.rx.mem, 0, BIG), 100, NULL);
        dto_post_recv_one(s->ep[0], dto_iov(&m.rx.mem, BIG, BIG), 101, &recvs);
        wt = (struct dto_remote){ .addr = (DAT_VADDR)(uintptr_t)m.wt.mem.buf, .len = BIG,
                                  .rmr_context = m.wt.mem.rmr_context };
        dto_put(s, &wt, sizeof(wt));
        dto_get_u64(s); /* the victim's transfers are posted */
        dto_post_read(s->ep[0], dto_iov(&m.own.mem, BIG, BIG), 200, dto_riov(&s->peer, 0, BIG),
                      &reqs);
        /* The victim posts no receive: these wait until the end. */
        dto_post_send_one(s->ep[0], dto_iov(&m.own.mem, 0, BIG), 201, &reqs);
        dto_post_send_one(s->ep[0], dto_iov(&m.own.mem, 0, BIG), 202, &reqs);
        /* Data is flowing: the first 16 MiB message arrived. */
        dto_expect_recv(s, s->ep[0], 100, BIG);
        dto_verify(m.rx.mem.buf, BIG, SEED_VICTIM);
        dto_put_u64(s, 1); /* die now */
        dto_expect_broken(s, s->ep[0]);
        expect_success_then_flushed(s, s->request_evd, &reqs, check_survivor_data);
        expect_success_then_flushed(s, s->recv_evd, &recvs, check_survivor_data);
        dto_expect_no_event(s->request_evd, 200000);
        dto_expect_empty(s->recv_evd);
        guarded_check(&m.rx, "receive buffers");
        guarded_check(&m.wt, "RDMA Write target");
        guarded_check(&m.own, "own Send source and Read target");
        verify_either(m.wt.mem.buf, BIG, SEED_WT, SEED_VICTIM);
        dto_verify(m.own.mem.buf, BIG, SEED_OWN);
        expect_datd_reclaimed(memfds);
}

static void victim(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET src = dto_iov(&s->mem, 0, BIG);
        struct dto_remote wt;
        uint64_t next = 20;

        (void)arg;
        dto_connect(s);
        dto_fill(s->mem.buf, BIG, SEED_VICTIM);
        dto_get(s, &wt, sizeof(wt));
        dto_post_send_one(s->ep[0], src, 10, NULL);
        dto_post_send_one(s->ep[0], src, 11, NULL);
        for (; next < 20 + KEEP_WRITES; next++)
                dto_post_write(s->ep[0], src, next, dto_riov(&wt, 0, BIG), NULL);
        dto_put_u64(s, 1);
        /* Keep KEEP_WRITES 16 MiB Writes in flight until told to die. */
        for (;;) {
                struct pollfd p = { .fd = s->sock, .events = POLLIN };
                DAT_COUNT more;
                DAT_EVENT ev;

                if (poll(&p, 1, 0) == 1)
                        dto_die(s);
                if (dat_evd_wait(s->request_evd, 1000, 1, &ev, &more) == DAT_SUCCESS &&
                    ev.event_data.dto_completion_event_data.operation == DAT_DTO_RDMA_WRITE &&
                    ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS)
                        dto_post_write(s->ep[0], src, next++, dto_riov(&wt, 0, BIG), NULL);
        }
}

/* dto.h: peer death -- the survivor's connection breaks
 * (DAT_CONNECTION_EVENT_BROKEN, dat_ep_disconnect(3DAT)'s ordering: what
 * completed successfully did so in order, everything after it flushed,
 * each DTO once), no byte of the survivor outside its registered buffers
 * changes (canary pages, guard pages), a Write cut short leaves only old or
 * written bytes, and datd reclaims the connection: no row in datctl
 * connection list, no shm region left among datd's descriptors. */
Test(DTO_SUITE(teardown), peer_killed_mid_transfer_breaks_flushes_and_is_reclaimed)
{
        struct dto_config cfg = { .buf_len = BIG, .no_connect = true, .env = rnr_never,
                                  .timeout_ms = 50000 };

        dto_run(&cfg, survivor, victim, NULL);
}
