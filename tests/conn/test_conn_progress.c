/* The progress thread against a fake datd: a thread of this test that
 * answers libdat's requests on a private socket and sends crafted events
 * (DATP_EV_CONN_REQUEST, DATP_EV_CONN) whenever the test says, so the
 * dispatch can be checked without a real datd's timing: events for the
 * objects they name, stale and foreign events dropped, replies and events
 * interleaved, datd hanging up. */
#include "config.h"

#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "libdat/conn.h"
#include "libdat/ep.h"
#include "proto/datp.h"
#include "tests/conn/conn_test.h"

static struct fake {
        char dir[64];
        int listen_fd, fd;
        pthread_t thread;
        pthread_mutex_t lock;
        uint32_t next_id;
        uint32_t rejected_cr;           /* last CR_REJECT's cr_id */
        uint32_t disconnects;
        /* Sent before the reply to the next CONNECT, if set. */
        bool event_before_connect_reply;
        union datp_message early;
        uint32_t conn_id;               /* the next CONNECT's (9 when 0) */
} fk;

static void fake_send_raw(const void *msg)
{
        const struct datp_header *h = msg;

        cr_assert_eq(send(fk.fd, msg, h->length, MSG_NOSIGNAL), (ssize_t)h->length);
}

/* datd hands every connection a data channel right before ESTABLISHED
 * (proto/datp.h, EV_DATA_CHANNEL): the fake gives a stream socketpair,
 * whose other end it keeps until the test ends. */
static void fake_send(const void *msg)
{
        const union datp_message *m = msg;

        if (m->hdr.type == DATP_EV_CONN && m->ev_conn.event == DAT_CONNECTION_EVENT_ESTABLISHED) {
                union datp_message ch;
                int sv[2];

                memset(&ch, 0, sizeof(ch));
                datp_header_init(&ch.hdr, DATP_EV_DATA_CHANNEL, DATP_VERSION_MAX,
                                 sizeof(ch.ev_data_channel), 0);
                ch.ev_data_channel.ia_id = m->ev_conn.ia_id;
                ch.ev_data_channel.conn_id = m->ev_conn.conn_id;
                ch.ev_data_channel.ep_handle = m->ev_conn.ep_handle;
                ch.ev_data_channel.kind = DATP_CHANNEL_TCP;
                ch.ev_data_channel.nfds = 1;
                cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
                cr_assert_eq(datp_send(fk.fd, &ch.hdr, &sv[0], 1), 0);
                close(sv[0]);
                /* Kept open for the test's life: the EP's peer. */
                (void)sv[1];
        }
        fake_send_raw(msg);
}

/* From the fake's thread: the test may have hung up under it. */
static void fake_answer(const void *msg)
{
        const struct datp_header *h = msg;

        (void)send(fk.fd, msg, h->length, MSG_NOSIGNAL);
}

static void reply(union datp_message *out, const struct datp_header *req, size_t size)
{
        datp_header_init(&out->hdr, req->type | DATP_REPLY, DATP_VERSION_MAX, (uint32_t)size,
                         req->request_id);
}

static void answer(const union datp_message *m)
{
        union datp_message r;

        memset(&r, 0, sizeof(r));
        switch (m->hdr.type) {
        case DATP_HELLO:
                reply(&r, &m->hdr, sizeof(r.hello_reply));
                r.hello_reply.version = DATP_VERSION_MAX;
                r.hello_reply.max_message = DATP_MAX_MESSAGE;
                strcpy(r.hello_reply.daemon_version, "fake");
                break;
        case DATP_IA_OPEN: {
                struct sockaddr_in *sin = (struct sockaddr_in *)&r.ia_open_reply.info.address;

                reply(&r, &m->hdr, sizeof(r.ia_open_reply));
                r.ia_open_reply.ia_id = 1;
                strcpy(r.ia_open_reply.info.name, "shm");
                strcpy(r.ia_open_reply.info.transport, "shm");
                strcpy(r.ia_open_reply.info.adapter_name, "shm");
                strcpy(r.ia_open_reply.info.vendor_name, "fake");
                sin->sin_family = AF_INET;
                sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                r.ia_open_reply.info.address_len = sizeof(*sin);
                r.ia_open_reply.info.max_eps = r.ia_open_reply.info.max_evds = 64;
                r.ia_open_reply.info.max_pzs = r.ia_open_reply.info.max_lmrs = 64;
                r.ia_open_reply.info.max_rmrs = r.ia_open_reply.info.max_srqs = 64;
                r.ia_open_reply.info.max_private_data = 64;
                r.ia_open_reply.info.max_lmr_bytes = 1 << 20;
                break;
        }
        case DATP_OBJ_CREATE:
                reply(&r, &m->hdr, sizeof(r.obj_create_reply));
                r.obj_create_reply.obj_id = ++fk.next_id;
                break;
        case DATP_LISTEN:
                reply(&r, &m->hdr, sizeof(r.listen_reply));
                r.listen_reply.listener_id = 7;
                r.listen_reply.conn_qual = m->listen.conn_qual;
                break;
        case DATP_CONNECT:
                reply(&r, &m->hdr, sizeof(r.connect_reply));
                pthread_mutex_lock(&fk.lock);
                r.connect_reply.conn_id = fk.conn_id ? fk.conn_id : 9;
                if (fk.event_before_connect_reply) {
                        fk.event_before_connect_reply = false;
                        fake_answer(&fk.early);
                }
                pthread_mutex_unlock(&fk.lock);
                break;
        case DATP_CR_REJECT:
                pthread_mutex_lock(&fk.lock);
                fk.rejected_cr = m->cr_reject.cr_id;
                pthread_mutex_unlock(&fk.lock);
                reply(&r, &m->hdr, sizeof(r.cr_reject_reply));
                break;
        case DATP_DISCONNECT:
                pthread_mutex_lock(&fk.lock);
                fk.disconnects++;
                pthread_mutex_unlock(&fk.lock);
                /* fall through */
        default:
                /* Every other reply is a bare status. */
                reply(&r, &m->hdr, datp_message_size(m->hdr.type | DATP_REPLY));
                break;
        }
        fake_answer(&r);
}

static void *fake_main(void *arg)
{
        union datp_message m;

        (void)arg;
        for (;;) {
                ssize_t n = recv(fk.fd, &m, sizeof(m), 0);

                if (n <= 0)
                        return NULL;
                answer(&m);
        }
}

static void setup(void)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char conf[128];
        FILE *f;

        memset(&fk, 0, sizeof(fk));
        pthread_mutex_init(&fk.lock, NULL);
        strcpy(fk.dir, "/tmp/conn-fake-XXXXXX");
        cr_assert_not_null(mkdtemp(fk.dir));
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/datd.sock", fk.dir);
        snprintf(conf, sizeof(conf), "%s/dat.conf", fk.dir);
        f = fopen(conf, "w");
        cr_assert_not_null(f);
        fprintf(f, "datd-shm u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm\" \"\"\n");
        fclose(f);
        setenv("DAT_OVERRIDE", conf, 1);
        setenv("DATD_SOCKET", sa.sun_path, 1);
        fk.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        cr_assert_geq(fk.listen_fd, 0);
        cr_assert_eq(bind(fk.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(fk.listen_fd, 4), 0);
}

/* The side under test; the fake serves the one connection it opens. */
static struct side s;

static void *accept_and_serve(void *arg)
{
        (void)arg;
        fk.fd = accept(fk.listen_fd, NULL, NULL);
        if (fk.fd < 0)
                return NULL;
        return fake_main(NULL);
}

/* dat_ia_open waits for the fake's answers: the fake accepts in a thread
 * of its own. */
static void start(void)
{
        fk.fd = -1;
        cr_assert_eq(pthread_create(&fk.thread, NULL, accept_and_serve, NULL), 0);
        side_open(&s);
}

static void teardown(void)
{
        side_close(&s);
        if (fk.fd >= 0)
                shutdown(fk.fd, SHUT_RDWR);
        else
                shutdown(fk.listen_fd, SHUT_RDWR);
        pthread_join(fk.thread, NULL);
        if (fk.fd >= 0)
                close(fk.fd);
        close(fk.listen_fd);
        {
                char path[128];

                snprintf(path, sizeof(path), "%s/datd.sock", fk.dir);
                unlink(path);
                snprintf(path, sizeof(path), "%s/dat.conf", fk.dir);
                unlink(path);
                rmdir(fk.dir);
        }
}

static void full_setup(void)
{
        setup();
        start();
}

TestSuite(progress, .init = full_setup, .fini = teardown, .timeout = CONN_TEST_TIMEOUT);

static void ev_conn(union datp_message *m, DAT_EP_HANDLE ep, uint32_t conn_id, uint32_t event,
                    uint32_t pd_len)
{
        memset(m, 0, sizeof(*m));
        datp_header_init(&m->hdr, DATP_EV_CONN, DATP_VERSION_MAX, sizeof(m->ev_conn), 0);
        m->ev_conn.ia_id = 1;
        m->ev_conn.conn_id = conn_id;
        m->ev_conn.ep_handle = (uintptr_t)ep;
        m->ev_conn.event = event;
        m->ev_conn.pd_len = pd_len;
        for (uint32_t i = 0; i < pd_len; i++)
                m->ev_conn.private_data[i] = (uint8_t)(i + 1);
}

static void ev_request(union datp_message *m, uint32_t listener_id, uint32_t cr_id,
                       DAT_CONN_QUAL qual)
{
        struct sockaddr_in *sin = (struct sockaddr_in *)&m->ev_conn_request.remote_address;

        memset(m, 0, sizeof(*m));
        datp_header_init(&m->hdr, DATP_EV_CONN_REQUEST, DATP_VERSION_MAX,
                         sizeof(m->ev_conn_request), 0);
        m->ev_conn_request.ia_id = 1;
        m->ev_conn_request.listener_id = listener_id;
        m->ev_conn_request.cr_id = cr_id;
        m->ev_conn_request.conn_qual = qual;
        m->ev_conn_request.remote_port = 4242;
        sin->sin_family = AF_INET;
        sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        m->ev_conn_request.remote_address_len = sizeof(*sin);
        m->ev_conn_request.pd_len = 3;
        memcpy(m->ev_conn_request.private_data, "abc", 3);
}

static DAT_EP_HANDLE connecting_ep(void)
{
        DAT_EP_HANDLE ep = side_ep(&s);
        struct ep *e = ep_lookup(ep);
        struct timespec nap = { 0, 1000 * 1000 };
        int waited = 0;

        cr_assert_eq(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 5, DAT_TIMEOUT_INFINITE,
                                    0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_SUCCESS);
        cr_assert_eq(ep_state_of(ep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        /* dat_ep_connect does not wait for the CONNECT's reply; datd sends
         * a connection's events only after it.  The fake's events come from
         * this thread: first the reply must have come (the EP has its id). */
        while (__atomic_load_n(&e->conn_id, __ATOMIC_ACQUIRE) == 0 && waited++ < 10000)
                nanosleep(&nap, NULL);
        cr_assert_neq(__atomic_load_n(&e->conn_id, __ATOMIC_ACQUIRE), 0, "no CONNECT reply");
        return ep;
}

/* An EP connected through the fake, its ESTABLISHED taken. */
static DAT_EP_HANDLE connected_ep(void)
{
        union datp_message m;
        DAT_EP_HANDLE ep = connecting_ep();

        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        fake_send(&m);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        return ep;
}

/* DATP_EV_CONN ESTABLISHED goes to the EP it names: Connected, the event
 * on its connect EVD with the peer's private data. */
Test(progress, established_event_reaches_the_named_ep)
{
        union datp_message m;
        DAT_EP_HANDLE ep = connecting_ep();
        DAT_EVENT ev;

        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_ESTABLISHED, 5);
        fake_send(&m);
        ev = expect_event(s.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(ev.event_data.connect_event_data.ep_handle, ep);
        cr_assert_eq(ev.event_data.connect_event_data.private_data_size, 5);
        cr_expect_eq(memcmp(ev.event_data.connect_event_data.private_data, "\1\2\3\4\5", 5), 0);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_CONNECTED);
}

/* ESTABLISHED without a data channel (datd could not make one): the
 * connection is of no use, the EP ends Disconnected with BROKEN. */
Test(progress, established_without_a_data_channel_is_broken)
{
        union datp_message m;
        DAT_EP_HANDLE ep = connecting_ep();

        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        fake_send_raw(&m);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_DISCONNECTED);
}

/* An event that arrives before the reply to the request that caused it
 * is dispatched, and the caller still gets its reply. */
Test(progress, event_before_the_reply_is_not_lost)
{
        DAT_EP_HANDLE ep = side_ep(&s);

        pthread_mutex_lock(&fk.lock);
        ev_conn(&fk.early, ep, 9, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, 0);
        fk.event_before_connect_reply = true;
        pthread_mutex_unlock(&fk.lock);
        cr_assert_eq(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 5, DAT_TIMEOUT_INFINITE,
                                    0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_SUCCESS);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_DISCONNECTED);
}

/* Events that do not apply are dropped: a handle that is no EP, another
 * connection's id, an event the EP's state does not take (the passive
 * side's ACCEPT_COMPLETION_ERROR on a connecting EP). */
Test(progress, stale_and_foreign_events_are_dropped)
{
        union datp_message m;
        DAT_EP_HANDLE ep = connecting_ep();
        DAT_EP_HANDLE idle = side_ep(&s);

        ev_conn(&m, GARBAGE, 9, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        fake_send(&m);
        ev_conn(&m, s.pz, 9, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        fake_send(&m);
        ev_conn(&m, ep, 10, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        fake_send(&m);
        ev_conn(&m, idle, 9, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        fake_send(&m);
        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, 0);
        fake_send(&m);
        /* A last, valid event: everything before it was handled. */
        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_TIMED_OUT, 0);
        fake_send(&m);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_TIMED_OUT);
        cr_expect(evd_empty(s.conn_evd));
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_DISCONNECTED);
        cr_expect_eq(ep_state_of(idle), DAT_EP_STATE_UNCONNECTED);
}

/* DATP_EV_CONN_REQUEST for a listener of ours: a CR with what the request
 * carried, as DAT_CONNECTION_REQUEST_EVENT on the PSP's EVD. */
Test(progress, request_reaches_the_named_listener)
{
        union datp_message m;
        DAT_PSP_HANDLE psp = side_psp(&s, 77);
        DAT_CR_PARAM cp;
        DAT_EVENT ev;

        ev_request(&m, 7, 31, 77);
        fake_send(&m);
        ev = expect_event(s.cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        cr_expect_eq(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp);
        cr_expect_eq(ev.event_data.cr_arrival_event_data.conn_qual, 77);
        cr_expect_not_null(ev.event_data.cr_arrival_event_data.local_ia_address_ptr);
        cr_assert_eq(dat_cr_query(ev.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL,
                                  &cp), DAT_SUCCESS);
        cr_expect_eq(cp.remote_port_qual, 4242);
        cr_assert_eq(cp.private_data_size, 3);
        cr_expect_eq(memcmp(cp.private_data, "abc", 3), 0);
        cr_expect_eq(cp.remote_ia_address_ptr->sa_family, AF_INET);
}

/* A request for a listener that is not here is refused back to datd
 * (CR_REJECT) and delivers nothing. */
Test(progress, request_for_no_listener_is_rejected_to_datd)
{
        union datp_message m;
        uint32_t rejected = 0;

        side_psp(&s, 77);
        ev_request(&m, 8, 32, 77);
        fake_send(&m);
        for (int i = 0; i < 1000 && rejected != 32; i++) {
                usleep(10000);
                pthread_mutex_lock(&fk.lock);
                rejected = fk.rejected_cr;
                pthread_mutex_unlock(&fk.lock);
        }
        cr_expect_eq(rejected, 32);
        cr_expect(evd_empty(s.cr_evd));
}

/* datd hanging up: connections BROKEN, an asynchronous error on the IA's
 * async EVD, and calls fail instead of waiting. */
Test(progress, datd_hanging_up_breaks_connections)
{
        DAT_EP_HANDLE ep = connected_ep();
        DAT_PSP_HANDLE psp;
        DAT_EVENT ev;

        shutdown(fk.fd, SHUT_RDWR);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_DISCONNECTED);
        ev = wait_event(s.async_evd);
        cr_expect_eq(ev.event_number, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR);
        cr_expect_eq(ev.event_data.asynch_error_event_data.dat_handle, s.ia);
        cr_expect_eq(DAT_GET_TYPE(dat_psp_create(s.ia, 3, s.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp)),
                     DAT_INTERNAL_ERROR);
}

/* dat_ep_disconnect(3DAT) graceful: Disconnect Pending, then Disconnected
 * with DAT_CONNECTION_EVENT_DISCONNECTED once datd has taken it; datd's
 * own event for that connection afterwards is not a second one. */
Test(progress, disconnect_ends_with_one_disconnected_event)
{
        union datp_message m;
        DAT_EP_HANDLE ep = connecting_ep();

        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        fake_send(&m);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_assert_eq(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_DISCONNECTED);
        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_DISCONNECTED, 0);
        fake_send(&m);
        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_BROKEN, 0);
        fake_send(&m);
        cr_assert_eq(dat_ep_reset(ep), DAT_SUCCESS);
        /* A round trip after them (dat_ep_reset tells datd without
         * waiting): the fake answers in order, so by its answer it has
         * read the DISCONNECT, and libdat has read both events before it
         * and dropped them. */
        {
                DAT_PZ_HANDLE pz;

                cr_assert_eq(dat_pz_create(s.ia, &pz), DAT_SUCCESS);
                cr_assert_eq(dat_pz_free(pz), DAT_SUCCESS);
        }
        cr_expect(evd_empty(s.conn_evd));
        pthread_mutex_lock(&fk.lock);
        cr_expect_eq(fk.disconnects, 1, "DISCONNECTs: %u", fk.disconnects);
        pthread_mutex_unlock(&fk.lock);
}

/* conn_test_stop_hook: the progress thread, inside the dispatch of a
 * DISCONNECTED, tells the test and takes its time. */
static struct {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        DAT_EP_HANDLE ep;
        bool entered, dto_kept;
} stop_hook = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, DAT_HANDLE_NULL, false,
                false };

static void slow_stop_hook(void)
{
        struct ep *ep;

        pthread_mutex_lock(&stop_hook.lock);
        stop_hook.entered = true;
        pthread_cond_broadcast(&stop_hook.cond);
        pthread_mutex_unlock(&stop_hook.lock);
        /* Long enough for a dat_ep_free that does not wait to destroy the
         * data path.  The EP object itself outlives this: dat_ep_free's
         * last round trip to datd needs this thread. */
        usleep(300 * 1000);
        ep = ep_lookup(stop_hook.ep);
        pthread_mutex_lock(&stop_hook.lock);
        stop_hook.dto_kept = ep && __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE) != NULL;
        pthread_mutex_unlock(&stop_hook.lock);
}

/* dat_ep_free(3DAT) of an EP Disconnected here (no connection left to end:
 * no round trip to datd first) while the progress thread dispatches datd's
 * DISCONNECTED for it: the free waits for the dispatch, which would
 * otherwise stop a data path already freed.  (Debian's dapltest server
 * deadlocked on such a freed lock about once in 40 runs.) */
Test(progress, ep_free_waits_for_the_dispatch_of_its_disconnection)
{
        union datp_message m;
        DAT_EP_HANDLE ep = connecting_ep();
        bool entered, dto_kept;

        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        fake_send(&m);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_assert_eq(dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        stop_hook.ep = ep;
        conn_test_stop_hook = slow_stop_hook;
        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_DISCONNECTED, 0);
        fake_send(&m);
        pthread_mutex_lock(&stop_hook.lock);
        while (!stop_hook.entered)
                pthread_cond_wait(&stop_hook.cond, &stop_hook.lock);
        pthread_mutex_unlock(&stop_hook.lock);
        cr_assert_eq(dat_ep_free(ep), DAT_SUCCESS);
        pthread_mutex_lock(&stop_hook.lock);
        entered = stop_hook.entered;
        dto_kept = stop_hook.dto_kept;
        pthread_mutex_unlock(&stop_hook.lock);
        conn_test_stop_hook = NULL;
        cr_assert(entered);
        cr_expect(dto_kept, "dat_ep_free destroyed the EP's data path while the progress "
                            "thread was stopping it");
        cr_expect(evd_empty(s.conn_evd));
}

/* A message that fails datp_validate is not from a working datd: the
 * connection counts as gone (connections BROKEN), nothing of it is
 * dispatched. */
Test(progress, malformed_message_counts_as_datd_gone)
{
        union datp_message m;
        DAT_EP_HANDLE ep = connecting_ep();

        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        m.ev_conn.pd_len = DATP_PRIVATE_DATA_MAX + 1;
        fake_send(&m);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_BROKEN);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_DISCONNECTED);
}

/* dat_ep_reset tells datd without waiting, so an event of the connection
 * it ended may still come while the EP's next connection has no id yet
 * (its CONNECT not answered): it must not end the new one. */
Test(progress, an_event_of_the_connection_before_a_reset_does_not_end_the_next)
{
        union datp_message m;
        DAT_EP_HANDLE ep = connected_ep();
        DAT_EVENT ev;
        DAT_COUNT nmore;

        ev_conn(&m, ep, 9, DAT_CONNECTION_EVENT_DISCONNECTED, 0);
        fake_send(&m);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
        cr_assert_eq(dat_ep_reset(ep), DAT_SUCCESS);

        pthread_mutex_lock(&fk.lock);
        ev_conn(&fk.early, ep, 9, DAT_CONNECTION_EVENT_DISCONNECTED, 0);
        fk.event_before_connect_reply = true;
        fk.conn_id = 10;
        pthread_mutex_unlock(&fk.lock);
        cr_assert_eq(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&s.address, 5, DAT_TIMEOUT_INFINITE,
                                    0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        ev.event_number = 0;
        cr_expect_eq(DAT_GET_TYPE(dat_evd_wait(s.conn_evd, 200000, 1, &ev, &nmore)),
                     DAT_TIMEOUT_EXPIRED, "the stale event reached the EVD (event 0x%x)",
                     ev.event_number);

        /* The new connection's own events still arrive. */
        ev_conn(&m, ep, 10, DAT_CONNECTION_EVENT_ESTABLISHED, 0);
        fake_send(&m);
        expect_event(s.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(ep_state_of(ep), DAT_EP_STATE_CONNECTED);
}
