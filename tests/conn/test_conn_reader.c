/* The reader of datd's socket against a real datd: what a round trip
 * leaves when its thread is cancelled, and where a CNO's proxy agent runs
 * when datd's events trigger it (the progress thread, or a waiter that
 * took the socket over).  Each test opens its IAs itself: a test that
 * fails leaves them open rather than hang in dat_ia_close. */
#include "config.h"

#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "libdat/evd.h"
#include "libdat/ia.h"
#include "libdat/progress.h"
#include "tests/conn/conn_test.h"
#include "tests/evd/evd_waiter_peek.h"

static void setup(void)
{
        conn_datd_start();
}

/* A test may fail with datd stopped: it runs on again before it is
 * stopped for good. */
static void teardown(void)
{
        if (conn_datd.pid > 0)
                kill(conn_datd.pid, SIGCONT);
        conn_datd_stop();
}

TestSuite(reader, .init = setup, .fini = teardown, .timeout = CONN_TEST_TIMEOUT);

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Joins thread within seconds; false when it is still running. */
static bool joined_within(pthread_t thread, int seconds)
{
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += seconds;
        return pthread_timedjoin_np(thread, NULL, &until) == 0;
}

/* Whether the process or thread whose /proc stat file is path is in state
 * within 5 s. */
static bool state_within_5_s(const char *path, char state)
{
        for (time_t end = time(NULL) + 5; time(NULL) < end; dat_nap())
                if (proc_stat_state(path) == state)
                        return true;
        return false;
}

/* A thread making a round trip to datd: dat_evd_create.  With check_evd,
 * it then counts the events queued there (found) at once, before anything
 * else could dispatch more: those datd sent ahead of its reply. */
struct creator {
        DAT_IA_HANDLE ia;
        pid_t tid;
        DAT_RETURN ret;
        DAT_EVD_HANDLE check_evd;
        int found;
        bool done;
};

static void *creator_main(void *arg)
{
        struct creator *c = arg;
        DAT_EVD_HANDLE evd;
        DAT_EVENT ev;

        __atomic_store_n(&c->tid, gettid(), __ATOMIC_RELEASE);
        c->ret = dat_evd_create(c->ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd);
        while (c->check_evd && dat_evd_dequeue(c->check_evd, &ev) == DAT_SUCCESS)
                c->found++;
        __atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
        return NULL;
}

static void *ia_close_main(void *arg)
{
        dat_ia_close(arg, DAT_CLOSE_ABRUPT_FLAG);
        return NULL;
}

/* A thread cancelled while it waits for datd's reply (datd stopped) used
 * to die holding the connection's locks: every later call of the IA, and
 * its close, waited for good.  Its round trip ends first now, and the IA
 * goes on. */
Test(reader, a_thread_cancelled_in_a_round_trip_leaves_the_ia_usable)
{
        struct creator first = { .ret = DAT_SUCCESS }, second = { .ret = DAT_SUCCESS };
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        pthread_t thread;
        char path[64];

        cr_assert_eq(dat_ia_open((DAT_NAME_PTR)"datd-shm", 8, &async, &first.ia), DAT_SUCCESS);
        second.ia = first.ia;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)conn_datd.pid);
        cr_assert_eq(kill(conn_datd.pid, SIGSTOP), 0);
        cr_assert(state_within_5_s(path, 'T'), "datd did not stop");
        cr_assert_eq(pthread_create(&thread, NULL, creator_main, &first), 0);
        while (!__atomic_load_n(&first.tid, __ATOMIC_ACQUIRE))
                dat_nap();
        /* Asleep in its round trip (past the spin for the reply), which
         * datd cannot answer. */
        snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)first.tid);
        cr_assert(state_within_5_s(path, 'S'), "the round trip never slept");
        cr_assert_eq(pthread_cancel(thread), 0);
        cr_assert_eq(kill(conn_datd.pid, SIGCONT), 0);
        cr_assert(joined_within(thread, 15), "the cancelled thread never ended");

        cr_assert_eq(pthread_create(&thread, NULL, creator_main, &second), 0);
        cr_assert(joined_within(thread, 5),
                  "another thread's dat_evd_create waited 5 s after the cancel");
        cr_expect_eq(second.ret, DAT_SUCCESS, "dat_evd_create: 0x%08x", second.ret);
        cr_assert_eq(pthread_create(&thread, NULL, ia_close_main, first.ia), 0);
        cr_expect(joined_within(thread, 5), "dat_ia_close waited 5 s after the cancel");
}

/* A CNO's proxy agent that makes a round trip to datd (dat_evd_create on
 * the IA whose event triggered it). */
struct agent_run {
        DAT_IA_HANDLE ia;
        DAT_RETURN ret;
        double took;
        bool done;
};

static void creating_agent(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
        struct agent_run *run = data;
        double start = now_s();
        DAT_EVD_HANDLE made;

        (void)evd;
        run->ret = dat_evd_create(run->ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &made);
        run->took = now_s() - start;
        __atomic_store_n(&run->done, true, __ATOMIC_RELEASE);
}

/* p listens on q with a CR EVD feeding a CNO whose agent is run's. */
static DAT_EVD_HANDLE listen_with_agent(struct side *p, DAT_CONN_QUAL q, struct agent_run *run)
{
        DAT_OS_WAIT_PROXY_AGENT agent = { .instance_data = run, .proxy_agent_func = creating_agent };
        DAT_EVD_HANDLE cr_evd;
        DAT_CNO_HANDLE cno;
        DAT_PSP_HANDLE psp;

        run->ia = p->ia;
        cr_assert_eq(dat_cno_create(p->ia, agent, &cno), DAT_SUCCESS);
        cr_assert_eq(dat_evd_create(p->ia, 8, cno, DAT_EVD_CR_FLAG, &cr_evd), DAT_SUCCESS);
        cr_assert_eq(dat_psp_create(p->ia, q, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
        return cr_evd;
}

static void connect_to(DAT_EP_HANDLE aep, const struct side *p, DAT_CONN_QUAL q)
{
        cr_assert_eq(dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&p->address, q,
                                    CONN_EVENT_WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
                                    DAT_CONNECT_DEFAULT_FLAG),
                     DAT_SUCCESS);
}

/* The agent's round trip succeeds at once: it used to run on the thread
 * reading datd's socket, with the socket's lock held, and wait for a
 * reply only that thread would read (DAT_INTERNAL_ERROR after 10 s, every
 * event of the IA held up meanwhile). */
static void expect_agent_done(struct agent_run *run)
{
        for (time_t end = time(NULL) + 8;
             !__atomic_load_n(&run->done, __ATOMIC_ACQUIRE) && time(NULL) < end;)
                dat_nap();
        cr_assert(__atomic_load_n(&run->done, __ATOMIC_ACQUIRE), "the agent never ended");
        cr_expect_eq(run->ret, DAT_SUCCESS, "the agent's dat_evd_create: 0x%08x after %.3f s",
                     run->ret, run->took);
        cr_expect_lt(run->took, 2.0, "the agent's dat_evd_create took %.3f s", run->took);
}

/* The request is there, and datd's later events arrive: the accept
 * connects both EPs. */
static void accept_the_request(DAT_EVD_HANDLE cr_evd, DAT_EP_HANDLE pep)
{
        DAT_EVENT ev = expect_event(cr_evd, DAT_CONNECTION_REQUEST_EVENT);

        cr_assert_eq(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, pep, 0, NULL),
                     DAT_SUCCESS);
}

/* The progress thread reads the request and triggers the CNO. */
Test(reader, a_cno_agent_triggered_by_the_progress_thread_may_call_datd)
{
        struct side a = { 0 }, p = { 0 };
        struct agent_run run = { .ret = DAT_SUCCESS };
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVD_HANDLE cr_evd;
        DAT_EP_HANDLE aep, pep;

        side_open(&a);
        side_open(&p);
        cr_evd = listen_with_agent(&p, q, &run);
        aep = side_ep(&a);
        pep = side_ep(&p);
        connect_to(aep, &p, q);
        expect_agent_done(&run);
        accept_the_request(cr_evd, pep);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        side_close(&a);
        side_close(&p);
}

/* A thread in dat_evd_wait for one event (timeout_us, 0 for 10 s). */
struct conn_waiter {
        DAT_EVD_HANDLE evd;
        DAT_TIMEOUT timeout_us;
        DAT_RETURN ret;
        DAT_EVENT event;
        bool done;
};

static void *conn_waiter_main(void *arg)
{
        struct conn_waiter *w = arg;
        DAT_COUNT n;

        w->ret = dat_evd_wait(w->evd, w->timeout_us ? w->timeout_us : CONN_EVENT_WAIT_US, 1,
                              &w->event, &n);
        __atomic_store_n(&w->done, true, __ATOMIC_RELEASE);
        return NULL;
}

/* A thread in dat_evd_wait on the listening IA's connection EVD reads
 * datd's socket itself (evd_ring.c, sleep_reading): it reads the request
 * and triggers the CNO, and its wait goes on after the agent ran. */
Test(reader, a_cno_agent_triggered_by_a_waiter_reading_datds_socket_may_call_datd)
{
        struct side a = { 0 }, p = { 0 };
        struct agent_run run = { .ret = DAT_SUCCESS };
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVD_HANDLE cr_evd;
        DAT_EP_HANDLE aep, pep;
        struct conn_waiter w = { .ret = DAT_SUCCESS };
        pthread_t thread;

        side_open(&a);
        side_open(&p);
        cr_evd = listen_with_agent(&p, q, &run);
        aep = side_ep(&a);
        pep = side_ep(&p);
        w.evd = p.conn_evd;
        cr_assert_eq(pthread_create(&thread, NULL, conn_waiter_main, &w), 0);
        cr_assert(evd_waiter_within_5_s(evd_lookup(p.conn_evd), EVD_WAITER_READS),
                  "the waiter never took datd's socket over");
        connect_to(aep, &p, q);
        expect_agent_done(&run);
        accept_the_request(cr_evd, pep);
        expect_event(a.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_assert(joined_within(thread, 12), "the waiter never ended");
        cr_expect_eq(w.ret, DAT_SUCCESS, "the waiter's dat_evd_wait: 0x%08x", w.ret);
        cr_expect_eq(w.event.event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
        side_close(&a);
        side_close(&p);
}

/* A CNO's proxy agent on the listening IA's progress thread that makes a
 * round trip when datd's socket holds another packet first (a second
 * request, which the test sends while the agent waits for go).  Its
 * thread is the socket's reader: the call used to hand the packet over to
 * it, and wait 10 s for itself (DAT_INTERNAL_ERROR, the IA's events held
 * up meanwhile). */
struct queued_agent {
        DAT_IA_HANDLE ia;
        int datd_fd;                    /* the IA's socket to datd */
        bool started, go, done;
        DAT_RETURN ret;
        double took;
        bool close;                     /* it calls dat_ia_close instead */
        bool on_progress;               /* it ran on the IA's progress thread */
};

static bool flag_within_8_s(const bool *flag)
{
        for (time_t end = time(NULL) + 8; !__atomic_load_n(flag, __ATOMIC_ACQUIRE);) {
                if (time(NULL) >= end)
                        return false;
                dat_nap();
        }
        return true;
}

/* Whether fd has a packet to read within 5 s. */
static bool readable_within_5_s(int fd)
{
        struct pollfd pfd = { .fd = fd, .events = POLLIN };

        return poll(&pfd, 1, 5000) == 1;
}

static void queued_agent_func(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
        struct queued_agent *run = data;
        DAT_EVD_HANDLE made;
        double start;

        (void)evd;
        __atomic_store_n(&run->started, true, __ATOMIC_RELEASE);
        start = now_s();
        if (run->close) {
                run->ret = dat_ia_close(run->ia, DAT_CLOSE_ABRUPT_FLAG);
        } else if (!flag_within_8_s(&run->go) || !readable_within_5_s(run->datd_fd)) {
                run->ret = DAT_ABORT;
        } else {
                start = now_s();
                run->ret = dat_evd_create(run->ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG,
                                          &made);
        }
        run->took = now_s() - start;
        __atomic_store_n(&run->done, true, __ATOMIC_RELEASE);
}

/* p listens on q with its CR EVD feeding a CNO whose agent is run's; the
 * agent starts when the first request arrives and waits for run->go. */
static DAT_EVD_HANDLE listen_with_queued_agent(struct side *p, DAT_CONN_QUAL q,
                                               struct queued_agent *run)
{
        DAT_OS_WAIT_PROXY_AGENT agent = { .instance_data = run,
                                          .proxy_agent_func = queued_agent_func };
        DAT_EVD_HANDLE cr_evd;
        DAT_CNO_HANDLE cno;
        DAT_PSP_HANDLE psp;

        run->ia = p->ia;
        run->datd_fd = ia_lookup(p->ia)->conn.fd;
        cr_assert_eq(dat_cno_create(p->ia, agent, &cno), DAT_SUCCESS);
        cr_assert_eq(dat_evd_create(p->ia, 8, cno, DAT_EVD_CR_FLAG, &cr_evd), DAT_SUCCESS);
        cr_assert_eq(dat_psp_create(p->ia, q, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
        return cr_evd;
}

/* aep connects to p on q with one byte of private data, seq. */
static void connect_numbered(DAT_EP_HANDLE aep, const struct side *p, DAT_CONN_QUAL q,
                             unsigned char seq)
{
        cr_assert_eq(dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&p->address, q,
                                    CONN_EVENT_WAIT_US, 1, &seq, DAT_QOS_BEST_EFFORT,
                                    DAT_CONNECT_DEFAULT_FLAG),
                     DAT_SUCCESS);
}

/* The next request on cr_evd carries seq. */
static void expect_request_numbered(DAT_EVD_HANDLE cr_evd, unsigned char seq)
{
        DAT_EVENT ev = expect_event(cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        DAT_CR_PARAM param;

        cr_assert_eq(dat_cr_query(ev.event_data.cr_arrival_event_data.cr_handle,
                                  DAT_CR_FIELD_ALL, &param), DAT_SUCCESS);
        cr_assert_eq(param.private_data_size, 1);
        cr_expect_eq(*(unsigned char *)param.private_data, seq,
                     "request %u came where %u was due", *(unsigned char *)param.private_data,
                     seq);
}

/* Two EPs of a connecting to p on q: the first request starts run's agent
 * on p's progress thread, the second waits on p's socket. */
static void start_agent_with_a_request_queued(struct side *a, struct side *p, DAT_CONN_QUAL q,
                                              struct queued_agent *run)
{
        DAT_EP_HANDLE aep1 = side_ep(a), aep2 = side_ep(a);

        connect_numbered(aep1, p, q, 1);
        cr_assert(flag_within_8_s(&run->started), "the agent never started");
        connect_numbered(aep2, p, q, 2);
        cr_assert(readable_within_5_s(run->datd_fd), "the second request never came");
}

/* Starts a thread's dat_evd_create on p (other, set up but for the IA)
 * that finds a packet at the head of p's socket: it hands over and sleeps
 * until its reply is delivered. */
static void start_handed_over_call(const struct side *p, struct creator *other, pthread_t *thread)
{
        struct datd_conn *conn = &ia_lookup(p->ia)->conn;
        char path[64];

        other->ia = p->ia;
        cr_assert_eq(pthread_create(thread, NULL, creator_main, other), 0);
        while (!__atomic_load_n(&other->tid, __ATOMIC_ACQUIRE))
                dat_nap();
        snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)other->tid);
        for (time_t end = time(NULL) + 5;
             !__atomic_load_n(&conn->wait_id, __ATOMIC_ACQUIRE) && time(NULL) < end;)
                dat_nap();
        cr_assert(state_within_5_s(path, 'S'), "the other round trip never slept");
}

/* The agent's round trip reads past the request to its reply; the request
 * is dispatched after the first, once the agent returned. */
Test(reader, a_round_trip_on_the_progress_thread_reads_past_an_event_to_its_reply)
{
        struct side a = { 0 }, p = { 0 };
        struct queued_agent run = { .ret = DAT_SUCCESS };
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVD_HANDLE cr_evd;

        side_open(&a);
        side_open(&p);
        cr_evd = listen_with_queued_agent(&p, q, &run);
        start_agent_with_a_request_queued(&a, &p, q, &run);
        __atomic_store_n(&run.go, true, __ATOMIC_RELEASE);
        cr_assert(flag_within_8_s(&run.done), "the agent never ended");
        cr_expect_eq(run.ret, DAT_SUCCESS, "the agent's dat_evd_create: 0x%08x after %.3f s",
                     run.ret, run.took);
        cr_expect_lt(run.took, 2.0, "the agent's dat_evd_create took %.3f s", run.took);
        expect_request_numbered(cr_evd, 1);
        expect_request_numbered(cr_evd, 2);
        side_close(&a);
        side_close(&p);
}

/* Another thread's round trip that handed the socket over to the progress
 * thread, which runs the agent: its reply is behind the queued request.
 * The agent's own call, waiting for its turn, delivers that reply (it used
 * to wait for the other call to time out, 10 s, and then for itself). */
Test(reader, a_round_trip_on_the_progress_thread_delivers_the_reply_of_the_call_before_it)
{
        struct side a = { 0 }, p = { 0 };
        struct queued_agent run = { .ret = DAT_SUCCESS };
        struct creator other = { .ret = DAT_SUCCESS };
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVD_HANDLE cr_evd;
        pthread_t thread;

        side_open(&a);
        side_open(&p);
        cr_evd = listen_with_queued_agent(&p, q, &run);
        start_agent_with_a_request_queued(&a, &p, q, &run);
        /* It finds the request at the head. */
        start_handed_over_call(&p, &other, &thread);
        __atomic_store_n(&run.go, true, __ATOMIC_RELEASE);
        cr_assert(flag_within_8_s(&run.done), "the agent never ended");
        cr_expect_eq(run.ret, DAT_SUCCESS, "the agent's dat_evd_create: 0x%08x after %.3f s",
                     run.ret, run.took);
        cr_expect_lt(run.took, 2.0, "the agent's dat_evd_create took %.3f s", run.took);
        cr_assert(joined_within(thread, 12), "the other round trip never ended");
        cr_expect_eq(other.ret, DAT_SUCCESS, "the other dat_evd_create: 0x%08x", other.ret);
        expect_request_numbered(cr_evd, 1);
        expect_request_numbered(cr_evd, 2);
        side_close(&a);
        side_close(&p);
}

/* dat_ia_close from an agent on the IA's own progress thread, which the
 * close would have to stop and join: refused (DAT_INVALID_STATE), and the
 * IA goes on (the thread joined itself, which failed, freed its own state
 * and the IA under it, and crashed). */
Test(reader, dat_ia_close_on_the_ias_progress_thread_is_refused)
{
        struct side a = { 0 }, p = { 0 };
        struct queued_agent run = { .ret = DAT_SUCCESS, .close = true };
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVD_HANDLE cr_evd, made;

        side_open(&a);
        side_open(&p);
        cr_evd = listen_with_queued_agent(&p, q, &run);
        connect_numbered(side_ep(&a), &p, q, 1);
        cr_assert(flag_within_8_s(&run.done), "the agent never ended");
        cr_expect_eq(DAT_GET_TYPE(run.ret), DAT_INVALID_STATE,
                     "dat_ia_close on its progress thread: 0x%08x", run.ret);
        expect_request_numbered(cr_evd, 1);
        cr_expect_eq(dat_evd_create(p.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &made),
                     DAT_SUCCESS);
        side_close(&a);
        cr_expect_eq(dat_ia_close(p.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

/* The agent of a CNO fed by p's receive EVD, triggered by a completion
 * the progress thread places (outside its reading of datd's socket). */
static void dto_agent_func(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
        struct queued_agent *run = data;

        run->on_progress = datd_conn_reads_here(&ia_lookup(run->ia)->conn);
        queued_agent_func(data, evd);
}

/* A Send from a to p's EP whose receive EVD feeds a CNO with run's
 * agent: the completion starts the agent on p's progress thread. */
static void start_dto_agent(struct side *a, struct side *p, struct queued_agent *run,
                            unsigned char buf[2][64])
{
        DAT_OS_WAIT_PROXY_AGENT agent = { .instance_data = run,
                                          .proxy_agent_func = dto_agent_func };
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVD_HANDLE recv_evd;
        DAT_EP_HANDLE aep, pep;
        DAT_CNO_HANDLE cno;
        DAT_LMR_CONTEXT actx, pctx;
        DAT_DTO_COOKIE cookie = { .as_64 = 1 };
        DAT_LMR_TRIPLET r, s;
        DAT_EVENT ev;

        run->ia = p->ia;
        run->datd_fd = ia_lookup(p->ia)->conn.fd;
        cr_assert_eq(dat_cno_create(p->ia, agent, &cno), DAT_SUCCESS);
        cr_assert_eq(dat_evd_create(p->ia, 8, cno, DAT_EVD_DTO_FLAG, &recv_evd), DAT_SUCCESS);
        cr_assert_eq(dat_ep_create(p->ia, p->pz, recv_evd, p->dto_evd, p->conn_evd, NULL, &pep),
                     DAT_SUCCESS);
        side_psp(p, q);
        aep = side_ep(a);
        connect_numbered(aep, p, q, 1);
        ev = expect_event(p->cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        cr_assert_eq(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, pep, 0, NULL),
                     DAT_SUCCESS);
        expect_event(a->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        side_lmr(a, buf[0], 64, &actx);
        side_lmr(p, buf[1], 64, &pctx);
        r = (DAT_LMR_TRIPLET){ .lmr_context = pctx,
                               .virtual_address = (DAT_VADDR)(uintptr_t)buf[1],
                               .segment_length = 64 };
        s = (DAT_LMR_TRIPLET){ .lmr_context = actx,
                               .virtual_address = (DAT_VADDR)(uintptr_t)buf[0],
                               .segment_length = 64 };
        cr_assert_eq(dat_ep_post_recv(pep, 1, &r, cookie, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        cr_assert_eq(dat_ep_post_send(aep, 1, &s, cookie, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        cr_assert(flag_within_8_s(&run->started), "the agent never started");
}

/* The agent's round trip reads past a request to its reply when the
 * progress thread is not reading datd's socket but placing a completion:
 * the request is dispatched at once all the same, though nothing more
 * comes on the socket to wake the thread for it. */
Test(reader, a_round_trip_of_an_agent_a_completion_triggered_leaves_no_event_behind)
{
        static unsigned char buf[2][64];
        struct side a = { 0 }, p = { 0 };
        struct queued_agent run = { .ret = DAT_SUCCESS };
        DAT_CONN_QUAL q = fresh_qual();

        side_open(&a);
        side_open(&p);
        start_dto_agent(&a, &p, &run, buf);
        side_psp(&p, q);
        connect_numbered(side_ep(&a), &p, q, 2);
        cr_assert(readable_within_5_s(run.datd_fd), "the second request never came");
        __atomic_store_n(&run.go, true, __ATOMIC_RELEASE);
        cr_assert(flag_within_8_s(&run.done), "the agent never ended");
        cr_expect(run.on_progress, "the agent ran elsewhere than on the progress thread");
        cr_expect_eq(run.ret, DAT_SUCCESS, "the agent's dat_evd_create: 0x%08x after %.3f s",
                     run.ret, run.took);
        cr_expect_lt(run.took, 2.0, "the agent's dat_evd_create took %.3f s", run.took);
        expect_request_numbered(p.cr_evd, 2);
        side_close(&a);
        side_close(&p);
}

/* An agent on p's progress thread that, once its round trip read past a
 * request (as in start_agent_with_a_request_queued), waits on a CR EVD for
 * that request, or goes on for a while (until release). */
struct going_on_agent {
        struct queued_agent run;
        DAT_EVD_HANDLE wait_evd;        /* NULL: it goes on until release */
        DAT_RETURN wait_ret;
        DAT_EVENT event;
        bool created, release;
};

static void going_on_agent_func(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
        struct going_on_agent *g = data;
        DAT_EVD_HANDLE made;
        DAT_COUNT nmore;

        (void)evd;
        __atomic_store_n(&g->run.started, true, __ATOMIC_RELEASE);
        if (!flag_within_8_s(&g->run.go) || !readable_within_5_s(g->run.datd_fd)) {
                g->run.ret = DAT_ABORT;
        } else {
                g->run.ret = dat_evd_create(g->run.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG,
                                            &made);
                __atomic_store_n(&g->created, true, __ATOMIC_RELEASE);
                if (g->wait_evd)
                        g->wait_ret = dat_evd_wait(g->wait_evd, 3 * 1000 * 1000, 1, &g->event,
                                                   &nmore);
                else
                        (void)flag_within_8_s(&g->release);
        }
        __atomic_store_n(&g->run.done, true, __ATOMIC_RELEASE);
}

/* p listens on q with a CR EVD feeding a CNO whose agent is g's. */
static DAT_EVD_HANDLE listen_with_going_on_agent(struct side *p, DAT_CONN_QUAL q,
                                                 struct going_on_agent *g)
{
        DAT_OS_WAIT_PROXY_AGENT agent = { .instance_data = g,
                                          .proxy_agent_func = going_on_agent_func };
        DAT_EVD_HANDLE cr_evd;
        DAT_CNO_HANDLE cno;
        DAT_PSP_HANDLE psp;

        g->run.ia = p->ia;
        g->run.datd_fd = ia_lookup(p->ia)->conn.fd;
        cr_assert_eq(dat_cno_create(p->ia, agent, &cno), DAT_SUCCESS);
        cr_assert_eq(dat_evd_create(p->ia, 8, cno, DAT_EVD_CR_FLAG, &cr_evd), DAT_SUCCESS);
        cr_assert_eq(dat_psp_create(p->ia, q, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
        return cr_evd;
}

/* a and p open, g's agent started on p's progress thread by a's first
 * request with the second on p's socket; returns the CR EVD. */
static DAT_EVD_HANDLE start_going_on_agent(struct side *a, struct side *p,
                                           struct going_on_agent *g)
{
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVD_HANDLE cr_evd;

        side_open(a);
        side_open(p);
        cr_evd = listen_with_going_on_agent(p, q, g);
        start_agent_with_a_request_queued(a, p, q, &g->run);
        return cr_evd;
}

/* The agent's round trip read the second request past: it was dispatched
 * there, so the agent's own dat_evd_wait finds it (the request waited in
 * a backlog for the agent to return, and the wait, refused the socket
 * meanwhile, ended DAT_TIMEOUT_EXPIRED; forever without a timeout). */
Test(reader, an_agent_waits_for_the_request_its_round_trip_read_past)
{
        struct side a = { 0 }, p = { 0 };
        struct going_on_agent g = { .run.ret = DAT_SUCCESS, .wait_ret = DAT_SUCCESS };
        DAT_CONN_QUAL q1 = fresh_qual(), q2 = fresh_qual();
        DAT_CR_PARAM param;

        side_open(&a);
        side_open(&p);
        listen_with_going_on_agent(&p, q1, &g);
        g.wait_evd = p.cr_evd;
        side_psp(&p, q2);
        connect_numbered(side_ep(&a), &p, q1, 1);
        cr_assert(flag_within_8_s(&g.run.started), "the agent never started");
        connect_numbered(side_ep(&a), &p, q2, 2);
        cr_assert(readable_within_5_s(g.run.datd_fd), "the second request never came");
        __atomic_store_n(&g.run.go, true, __ATOMIC_RELEASE);
        cr_assert(flag_within_8_s(&g.run.done), "the agent never ended");
        cr_expect_eq(g.run.ret, DAT_SUCCESS, "the agent's dat_evd_create: 0x%08x", g.run.ret);
        cr_assert_eq(g.wait_ret, DAT_SUCCESS, "the agent's dat_evd_wait: 0x%08x", g.wait_ret);
        cr_assert_eq(g.event.event_number, DAT_CONNECTION_REQUEST_EVENT);
        cr_assert_eq(dat_cr_query(g.event.event_data.cr_arrival_event_data.cr_handle,
                                  DAT_CR_FIELD_ALL, &param), DAT_SUCCESS);
        cr_expect_eq(*(unsigned char *)param.private_data, 2);
        side_close(&a);
        side_close(&p);
}

/* While the agent goes on after its round trip read a request past, the
 * socket is free: another thread's round trip reads its reply (it was
 * refused the socket while the request waited in a backlog for the agent
 * to return, handed over to the progress thread, running the agent, and
 * failed after 10 s). */
Test(reader, another_round_trip_while_an_agent_goes_on_after_reading_past_ends_at_once)
{
        struct side a = { 0 }, p = { 0 };
        struct going_on_agent g = { .run.ret = DAT_SUCCESS };
        struct creator other = { .ret = DAT_SUCCESS };
        DAT_EVD_HANDLE cr_evd = start_going_on_agent(&a, &p, &g);
        pthread_t thread;
        bool ended;

        __atomic_store_n(&g.run.go, true, __ATOMIC_RELEASE);
        cr_assert(flag_within_8_s(&g.created), "the agent's dat_evd_create never returned");
        cr_expect_eq(g.run.ret, DAT_SUCCESS, "the agent's dat_evd_create: 0x%08x", g.run.ret);
        other.ia = p.ia;
        cr_assert_eq(pthread_create(&thread, NULL, creator_main, &other), 0);
        ended = joined_within(thread, 5);
        __atomic_store_n(&g.release, true, __ATOMIC_RELEASE);
        cr_assert(ended, "the other dat_evd_create waited 5 s for the agent");
        cr_expect_eq(other.ret, DAT_SUCCESS, "the other dat_evd_create: 0x%08x", other.ret);
        cr_assert(flag_within_8_s(&g.run.done), "the agent never ended");
        expect_request_numbered(cr_evd, 1);
        expect_request_numbered(cr_evd, 2);
        side_close(&a);
        side_close(&p);
}

/* Another thread's round trip handed over behind the second request: the
 * agent's round trip reads both past, and that thread returns with the
 * request dispatched (its reply was delivered at once, the request left
 * in a backlog until the agent returned). */
Test(reader, a_reply_an_agent_reads_past_comes_after_the_events_ahead_of_it)
{
        struct side a = { 0 }, p = { 0 };
        struct going_on_agent g = { .run.ret = DAT_SUCCESS };
        struct creator other = { .ret = DAT_SUCCESS };
        DAT_EVD_HANDLE cr_evd = start_going_on_agent(&a, &p, &g);
        pthread_t thread;

        other.check_evd = cr_evd;
        start_handed_over_call(&p, &other, &thread);
        __atomic_store_n(&g.run.go, true, __ATOMIC_RELEASE);
        /* The agent goes on meanwhile. */
        cr_assert(flag_within_8_s(&other.done), "the other round trip never ended");
        __atomic_store_n(&g.release, true, __ATOMIC_RELEASE);
        cr_assert(joined_within(thread, 5), "the other thread never ended");
        cr_expect_eq(other.ret, DAT_SUCCESS, "the other dat_evd_create: 0x%08x", other.ret);
        cr_expect_eq(other.found, 2, "%d requests were there when the other call returned",
                     other.found);
        cr_assert(flag_within_8_s(&g.run.done), "the agent never ended");
        cr_expect_eq(g.run.ret, DAT_SUCCESS, "the agent's dat_evd_create: 0x%08x", g.run.ret);
        side_close(&a);
        side_close(&p);
}

/* This thread takes p's socket over, as a waiter in dat_evd_wait does. */
static void take_over_within_5_s(struct side *p, bool *was_reader)
{
        struct datd_conn *conn = &ia_lookup(p->ia)->conn;
        bool taken = false;
        int kick_fd;

        for (time_t end = time(NULL) + 5; !taken && time(NULL) < end;)
                if (!(taken = datd_conn_take_over(conn, &kick_fd, was_reader)))
                        dat_nap();
        cr_assert(taken, "the socket was never free to take over");
}

/* A round trip inside a dispatch (an agent run at once past CNO_HELD_MAX;
 * here this thread, holding p's socket to dispatch) reads past a request
 * and another thread's reply behind it: that thread returns only once
 * the dispatch took the request (its reply was delivered at once, the
 * request left in the backlog). */
Test(reader, a_reply_read_past_inside_a_dispatch_comes_after_the_events_ahead_of_it)
{
        struct side a = { 0 }, p = { 0 };
        struct creator other = { .ret = DAT_SUCCESS };
        DAT_CONN_QUAL q = fresh_qual();
        struct datd_conn *conn;
        DAT_EVD_HANDLE made;
        bool was_reader;
        pthread_t thread;

        side_open(&a);
        side_open(&p);
        conn = &ia_lookup(p.ia)->conn;
        side_psp(&p, q);
        take_over_within_5_s(&p, &was_reader);
        connect_numbered(side_ep(&a), &p, q, 1);
        cr_assert(readable_within_5_s(conn->fd), "the request never came");
        other.check_evd = p.cr_evd;
        start_handed_over_call(&p, &other, &thread);
        cr_expect_eq(dat_evd_create(p.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &made),
                     DAT_SUCCESS);
        /* A second for the other call to return, had it been let go
         * before the dispatch takes the backlog. */
        for (time_t end = time(NULL) + 1;
             !__atomic_load_n(&other.done, __ATOMIC_ACQUIRE) && time(NULL) <= end;)
                dat_nap();
        cr_assert(progress_read(ia_lookup(p.ia)), "the dispatch found the end of the connection");
        datd_conn_give_back(conn, was_reader);
        cr_assert(joined_within(thread, 5), "the other round trip never ended");
        cr_expect_eq(other.ret, DAT_SUCCESS, "the other dat_evd_create: 0x%08x", other.ret);
        cr_expect_eq(other.found, 1, "%d requests were there when the other call returned",
                     other.found);
        side_close(&a);
        side_close(&p);
}

/* An agent on p's progress thread whose round trip waits while a waiter
 * holds p's socket, with the waiter's delivery of its reply and the
 * waiter's give-back put between its look at the reply and its taking of
 * the socket (datd_conn_test_before_take). */
static struct taken_meanwhile {
        struct datd_conn *conn;
        pid_t datd;
        const bool *waiter_done;
        bool started, go, done, hooked;
        DAT_RETURN ret;
        double after_hook;              /* how long the call took after it */
} meanwhile;

static void deliver_and_give_back_meanwhile(struct datd_conn *conn)
{
        if (conn != meanwhile.conn || meanwhile.hooked)
                return;
        meanwhile.hooked = true;
        kill(meanwhile.datd, SIGCONT);
        for (time_t end = time(NULL) + 5;
             !__atomic_load_n(&conn->wait_done, __ATOMIC_ACQUIRE) && time(NULL) < end;)
                dat_nap();
        (void)flag_within_8_s(meanwhile.waiter_done);
        meanwhile.after_hook = now_s();
}

static void meanwhile_agent_func(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
        DAT_EVD_HANDLE made;

        (void)evd;
        __atomic_store_n(&meanwhile.started, true, __ATOMIC_RELEASE);
        if (flag_within_8_s(&meanwhile.go)) {
                meanwhile.ret = dat_evd_create(data, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG,
                                               &made);
                meanwhile.after_hook = now_s() - meanwhile.after_hook;
        }
        __atomic_store_n(&meanwhile.done, true, __ATOMIC_RELEASE);
}

/* The waiter delivered the agent's reply and gave the socket back while
 * the agent's round trip napped: the round trip ends at once when it
 * takes the socket (it waited for another packet, 10 s, holding the
 * socket). */
Test(reader, a_round_trip_whose_reply_came_while_it_napped_ends_when_it_takes_the_socket)
{
        struct side a = { 0 }, p = { 0 };
        DAT_OS_WAIT_PROXY_AGENT agent = { .proxy_agent_func = meanwhile_agent_func };
        struct conn_waiter w = { .timeout_us = 1000 * 1000, .ret = DAT_SUCCESS };
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EVD_HANDLE cr_evd;
        DAT_CNO_HANDLE cno;
        DAT_PSP_HANDLE psp;
        pthread_t thread;
        char path[64];

        side_open(&a);
        side_open(&p);
        agent.instance_data = p.ia;
        meanwhile = (struct taken_meanwhile){ .conn = &ia_lookup(p.ia)->conn,
                                              .datd = conn_datd.pid,
                                              .waiter_done = &w.done,
                                              .ret = DAT_SUCCESS };
        cr_assert_eq(dat_cno_create(p.ia, agent, &cno), DAT_SUCCESS);
        cr_assert_eq(dat_evd_create(p.ia, 8, cno, DAT_EVD_CR_FLAG, &cr_evd), DAT_SUCCESS);
        cr_assert_eq(dat_psp_create(p.ia, q, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
        connect_numbered(side_ep(&a), &p, q, 1);
        /* The agent waits for go on the progress thread, the socket free. */
        cr_assert(flag_within_8_s(&meanwhile.started), "the agent never started");
        w.evd = p.conn_evd;
        cr_assert_eq(pthread_create(&thread, NULL, conn_waiter_main, &w), 0);
        cr_assert(evd_waiter_within_5_s(evd_lookup(p.conn_evd), EVD_WAITER_READS),
                  "the waiter never took datd's socket over");
        /* datd answers once the round trip looked for its reply. */
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)conn_datd.pid);
        cr_assert_eq(kill(conn_datd.pid, SIGSTOP), 0);
        cr_assert(state_within_5_s(path, 'T'), "datd did not stop");
        datd_conn_test_before_take = deliver_and_give_back_meanwhile;
        __atomic_store_n(&meanwhile.go, true, __ATOMIC_RELEASE);
        for (time_t end = time(NULL) + 20;
             !__atomic_load_n(&meanwhile.done, __ATOMIC_ACQUIRE) && time(NULL) < end;)
                dat_nap();
        datd_conn_test_before_take = NULL;
        kill(conn_datd.pid, SIGCONT);
        cr_assert(joined_within(thread, 5), "the waiter never ended");
        cr_assert(meanwhile.done, "the agent never ended");
        cr_assert(meanwhile.hooked, "the round trip never waited for the socket");
        cr_expect_eq(w.ret, DAT_ERR(DAT_TIMEOUT_EXPIRED, DAT_NO_SUBTYPE));
        cr_expect_eq(meanwhile.ret, DAT_SUCCESS, "the agent's dat_evd_create: 0x%08x",
                     meanwhile.ret);
        cr_expect_lt(meanwhile.after_hook, 2.0,
                     "the agent's dat_evd_create took %.3f s after its reply came",
                     meanwhile.after_hook);
        side_close(&a);
        side_close(&p);
}

/* The agent of a CNO that notes the thread it runs on. */
static void tid_agent_func(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
        (void)evd;
        __atomic_store_n((pid_t *)data, gettid(), __ATOMIC_RELEASE);
}

/* Whether the thread tid is asleep (S) for 10 looks in a row, 10 ms
 * apart, within 5 s. */
static bool asleep_within_5_s(pid_t tid)
{
        char path[64];
        int in_a_row = 0;

        snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
        for (time_t end = time(NULL) + 5; in_a_row < 10 && time(NULL) < end;) {
                const struct timespec ten_ms = { .tv_nsec = 10 * 1000 * 1000 };

                in_a_row = proc_stat_state(path) == 'S' ? in_a_row + 1 : 0;
                nanosleep(&ten_ms, NULL);
        }
        return in_a_row == 10;
}

/* The progress thread woken for p's socket while a waiter that took it
 * over holds it to dispatch, with a backlog that a round trip inside that
 * dispatch read past (an agent run at once past CNO_HELD_MAX; here this
 * thread): the waiter takes the backlog before it lets the socket go, and
 * the progress thread goes back to sleep (it spun on sched_yield until
 * the waiter let go, as long as the agent ran). */
Test(reader, the_progress_thread_does_not_wait_for_a_backlog_another_thread_holds)
{
        struct side a = { 0 }, p = { 0 };
        pid_t progress_tid = 0;
        DAT_OS_WAIT_PROXY_AGENT agent = { .instance_data = &progress_tid,
                                          .proxy_agent_func = tid_agent_func };
        DAT_CONN_QUAL q = fresh_qual();
        struct datd_conn *conn;
        struct epoll_event ev;
        DAT_EVD_HANDLE cr_evd, made;
        DAT_CNO_HANDLE cno;
        DAT_PSP_HANDLE psp;
        uint64_t rounds;
        bool was_reader;

        side_open(&a);
        side_open(&p);
        conn = &ia_lookup(p.ia)->conn;
        cr_assert_eq(dat_cno_create(p.ia, agent, &cno), DAT_SUCCESS);
        cr_assert_eq(dat_evd_create(p.ia, 8, cno, DAT_EVD_CR_FLAG, &cr_evd), DAT_SUCCESS);
        cr_assert_eq(dat_psp_create(p.ia, q, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
        connect_numbered(side_ep(&a), &p, q, 1);
        for (time_t end = time(NULL) + 5;
             !__atomic_load_n(&progress_tid, __ATOMIC_ACQUIRE) && time(NULL) < end;)
                dat_nap();
        cr_assert(progress_tid, "the agent never ran");
        take_over_within_5_s(&p, &was_reader);
        connect_numbered(side_ep(&a), &p, q, 2);
        cr_assert(readable_within_5_s(conn->fd), "the second request never came");
        cr_assert_eq(dat_evd_create(p.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &made),
                     DAT_SUCCESS);
        cr_assert_eq(conn->backlog.n, 1, "the round trip read %zu packets past",
                     conn->backlog.n);
        connect_numbered(side_ep(&a), &p, q, 3);
        cr_assert(readable_within_5_s(conn->fd), "the third request never came");
        /* As if the progress thread had been woken by the third request
         * before this thread turned its watch off: once. */
        rounds = __atomic_load_n(&ia_lookup(p.ia)->dto.rounds, __ATOMIC_RELAXED);
        ev = (struct epoll_event){ .events = EPOLLIN | EPOLLET, .data.u64 = conn->watch_key };
        cr_assert_eq(epoll_ctl(conn->watch_epfd, EPOLL_CTL_MOD, conn->fd, &ev), 0);
        for (time_t end = time(NULL) + 5;
             __atomic_load_n(&ia_lookup(p.ia)->dto.rounds, __ATOMIC_RELAXED) == rounds &&
             time(NULL) < end;)
                dat_nap();
        cr_expect(asleep_within_5_s(progress_tid), "the progress thread never slept again");
        cr_assert(progress_read(ia_lookup(p.ia)), "the dispatch found the end of the connection");
        datd_conn_give_back(conn, was_reader);
        expect_request_numbered(cr_evd, 1);
        expect_request_numbered(cr_evd, 2);
        expect_request_numbered(cr_evd, 3);
        side_close(&a);
        side_close(&p);
}
