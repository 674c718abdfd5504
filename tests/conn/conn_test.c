#include "config.h"

#include "tests/conn/conn_test.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct datd_instance conn_datd;

void conn_datd_start(void)
{
        char *bin = build_path("daemon/datd");
        bool built = bin && access(bin, X_OK) == 0;

        free(bin);
        if (!built)
                cr_skip_test("daemon/datd is not built in this tree");
        cr_assert_eq(datd_start(&conn_datd, NULL), 0, "datd did not start");
        datd_export_env(&conn_datd);
}

void conn_datd_stop(void)
{
        datd_stop(&conn_datd);
}

static DAT_EVD_HANDLE make_evd(DAT_IA_HANDLE ia, DAT_EVD_FLAGS flags)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_evd_create(ia, 64, DAT_HANDLE_NULL, flags, &evd);

        cr_assert_eq(r, DAT_SUCCESS, "dat_evd_create(0x%x): 0x%08x", flags, r);
        return evd;
}

void side_open(struct side *s)
{
        side_open_ia(s, "datd-shm");
}

void side_open_ia(struct side *s, const char *name)
{
        DAT_RETURN r;

        memset(s, 0, sizeof(*s));
        r = dat_ia_open((DAT_NAME_PTR)name, 16, &s->async_evd, &s->ia);
        cr_assert_eq(r, DAT_SUCCESS, "dat_ia_open: 0x%08x (log: %s)", r, conn_datd.log_path);
        cr_assert_eq(dat_pz_create(s->ia, &s->pz), DAT_SUCCESS);
        s->conn_evd = make_evd(s->ia, DAT_EVD_CONNECTION_FLAG);
        s->cr_evd = make_evd(s->ia, DAT_EVD_CR_FLAG);
        s->dto_evd = make_evd(s->ia, DAT_EVD_DTO_FLAG);
        cr_assert_eq(dat_ia_query(s->ia, NULL, DAT_IA_FIELD_ALL, &s->attr, DAT_PROVIDER_FIELD_ALL,
                                  &s->pattr), DAT_SUCCESS);
        cr_assert_not_null(s->attr.ia_address_ptr);
        memcpy(&s->address, s->attr.ia_address_ptr,
               s->attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                              : sizeof(struct sockaddr_in));
}

void side_close(struct side *s)
{
        if (s->ia)
                dat_ia_close(s->ia, DAT_CLOSE_ABRUPT_FLAG);
        s->ia = DAT_HANDLE_NULL;
}

DAT_EP_HANDLE side_ep(const struct side *s)
{
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_ep_create(s->ia, s->pz, s->dto_evd, s->dto_evd, s->conn_evd, NULL, &ep);

        cr_assert_eq(r, DAT_SUCCESS, "dat_ep_create: 0x%08x", r);
        return ep;
}

DAT_LMR_HANDLE side_lmr(const struct side *s, void *buf, size_t len, DAT_LMR_CONTEXT *ctx)
{
        DAT_REGION_DESCRIPTION region = { .for_va = buf };
        DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
        DAT_RMR_CONTEXT rctx;
        DAT_VLEN rlen;
        DAT_VADDR raddr;
        DAT_RETURN r = dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, region, len, s->pz,
                                      DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, ctx, &rctx,
                                      &rlen, &raddr);

        cr_assert_eq(r, DAT_SUCCESS, "dat_lmr_create: 0x%08x", r);
        return lmr;
}

DAT_EP_STATE ep_state_of(DAT_EP_HANDLE ep)
{
        DAT_EP_STATE st = (DAT_EP_STATE)-1;

        cr_assert_eq(dat_ep_get_status(ep, &st, NULL, NULL), DAT_SUCCESS);
        return st;
}

DAT_EVENT wait_event(DAT_EVD_HANDLE evd)
{
        DAT_EVENT ev;
        DAT_COUNT nmore = 0;
        DAT_RETURN r;

        memset(&ev, 0, sizeof(ev));
        r = dat_evd_wait(evd, CONN_EVENT_WAIT_US, 1, &ev, &nmore);
        cr_assert_eq(r, DAT_SUCCESS, "no event within the bound: 0x%08x (datd log: %s)", r,
                     conn_datd.log_path);
        return ev;
}

DAT_EVENT expect_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER number)
{
        DAT_EVENT ev = wait_event(evd);

        cr_assert_eq(ev.event_number, number, "event 0x%x, expected 0x%x", ev.event_number, number);
        return ev;
}

bool evd_empty(DAT_EVD_HANDLE evd)
{
        DAT_EVENT ev;

        return dat_evd_dequeue(evd, &ev) != DAT_SUCCESS;
}

DAT_PSP_HANDLE side_psp(const struct side *s, DAT_CONN_QUAL qual)
{
        DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_psp_create(s->ia, qual, s->cr_evd, DAT_PSP_CONSUMER_FLAG, &psp);

        cr_assert_eq(r, DAT_SUCCESS, "dat_psp_create(%llu): 0x%08x", (unsigned long long)qual, r);
        return psp;
}

DAT_CR_HANDLE connect_and_get_cr(const struct side *active, DAT_EP_HANDLE aep,
                                 const struct side *passive, DAT_CONN_QUAL qual,
                                 const void *pd, DAT_COUNT n)
{
        DAT_RETURN r = dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&passive->address, qual,
                                      DAT_TIMEOUT_INFINITE, n, (DAT_PVOID)pd, DAT_QOS_BEST_EFFORT,
                                      DAT_CONNECT_DEFAULT_FLAG);
        DAT_EVENT ev;

        cr_assert_eq(r, DAT_SUCCESS, "dat_ep_connect: 0x%08x", r);
        (void)active;
        ev = expect_event(passive->cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        cr_assert_eq(ev.event_data.cr_arrival_event_data.conn_qual, qual);
        return ev.event_data.cr_arrival_event_data.cr_handle;
}

void connect_pair(const struct side *a, const struct side *p, DAT_CONN_QUAL qual,
                  DAT_EP_HANDLE *aep, DAT_EP_HANDLE *pep)
{
        DAT_CR_HANDLE cr;
        DAT_RETURN r;

        *aep = side_ep(a);
        *pep = side_ep(p);
        cr = connect_and_get_cr(a, *aep, p, qual, NULL, 0);
        r = dat_cr_accept(cr, *pep, 0, NULL);
        cr_assert_eq(r, DAT_SUCCESS, "dat_cr_accept: 0x%08x", r);
        expect_event(a->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_assert_eq(ep_state_of(*aep), DAT_EP_STATE_CONNECTED);
        cr_assert_eq(ep_state_of(*pep), DAT_EP_STATE_CONNECTED);
}

void fill_pattern(unsigned char *buf, size_t n, unsigned char seed)
{
        for (size_t i = 0; i < n; i++)
                buf[i] = (unsigned char)(seed + i * 7);
}

DAT_CONN_QUAL fresh_qual(void)
{
        static DAT_CONN_QUAL next;

        if (!next)
                next = 20000 + (DAT_CONN_QUAL)(getpid() % 10000) * 4;
        return next++;
}

/* The child of fork_listener: exit codes say where it failed. */
struct listener_args {
        const char *ia_name;
        DAT_CONN_QUAL qual;
        bool accept;
};

bool child_listener_open(struct child_listener *l, const char *ia_name, DAT_CONN_QUAL qual)
{
        l->ia = DAT_HANDLE_NULL;
        l->async_evd = DAT_HANDLE_NULL;
        return dat_ia_open((DAT_NAME_PTR)ia_name, 16, &l->async_evd, &l->ia) == DAT_SUCCESS &&
               dat_pz_create(l->ia, &l->pz) == DAT_SUCCESS &&
               dat_evd_create(l->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &l->cr_evd) == DAT_SUCCESS &&
               dat_evd_create(l->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &l->conn_evd) ==
                       DAT_SUCCESS &&
               dat_psp_create(l->ia, qual, l->cr_evd, DAT_PSP_CONSUMER_FLAG, &l->psp) == DAT_SUCCESS;
}

static int listener_child(void *arg, int ready_fd, int done_fd)
{
        const struct listener_args *a = arg;
        struct child_listener l;
        DAT_EP_HANDLE ep;
        DAT_COUNT more;
        DAT_EVENT ev;

        if (!child_listener_open(&l, a->ia_name, a->qual) ||
            dat_ep_create(l.ia, l.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, l.conn_evd, NULL, &ep))
                return 2;
        if (write(ready_fd, "r", 1) != 1)
                return 3;
        if (dat_evd_wait(l.cr_evd, CONN_EVENT_WAIT_US, 1, &ev, &more))
                return 4;
        if (a->accept && dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL))
                return 5;
        if (write(done_fd, "d", 1) != 1)
                return 6;
        for (;;)
                pause();
}

pid_t fork_child(int (*child)(void *arg, int ready_fd, int note_fd), void *arg, int *note_fd)
{
        int ready[2], note[2];
        char c = 0;
        pid_t pid;

        cr_assert_eq(pipe(ready), 0);
        cr_assert_eq(pipe(note), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
                _exit(child(arg, ready[1], note[1]));
        close(ready[1]);
        close(note[1]);
        cr_assert_eq(read(ready[0], &c, 1), 1, "the forked process failed");
        close(ready[0]);
        *note_fd = note[0];
        return pid;
}

pid_t fork_listener(const char *ia_name, DAT_CONN_QUAL qual, bool accept, int *done_fd)
{
        struct listener_args l = { ia_name, qual, accept };

        return fork_child(listener_child, &l, done_fd);
}

void kill_listener(pid_t pid)
{
        int status;

        kill(pid, SIGKILL);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
}

void check_listener_dies_mid_request(const struct side *active, const struct side *passive,
                                     const char *ia_name)
{
        DAT_CONN_QUAL q = fresh_qual();
        DAT_EP_HANDLE aep = side_ep(active);
        int got;
        char c;
        pid_t child = fork_listener(ia_name, q, false, &got);
        DAT_EVENT ev;

        cr_assert_eq(dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&passive->address, q,
                                    DAT_TIMEOUT_INFINITE, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
                     DAT_SUCCESS);
        cr_assert_eq(read(got, &c, 1), 1, "the request did not reach the listening process");
        kill_listener(child);
        ev = wait_event(active->conn_evd);
        cr_expect(ev.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED ||
                  ev.event_number == DAT_CONNECTION_EVENT_BROKEN, "0x%x", ev.event_number);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
}

void check_reject(const struct side *a, const struct side *p)
{
        unsigned char why[32];
        DAT_EP_HANDLE aep = side_ep(a);
        DAT_CONN_QUAL q = fresh_qual();
        DAT_CR_HANDLE cr;
        DAT_EVENT ev;

        side_psp(p, q);
        fill_pattern(why, sizeof(why), 5);
        cr = connect_and_get_cr(a, aep, p, q, NULL, 0);
        cr_assert_eq(dat_cr_reject(cr, sizeof(why), why), DAT_SUCCESS);
        ev = expect_event(a->conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED);
        cr_expect_eq(ev.event_data.connect_event_data.private_data_size, (DAT_COUNT)sizeof(why));
        if (ev.event_data.connect_event_data.private_data_size == (DAT_COUNT)sizeof(why))
                cr_expect_eq(memcmp(ev.event_data.connect_event_data.private_data, why,
                                    sizeof(why)), 0);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
        cr_expect_eq(dat_cr_reject(cr, 0, NULL), ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
}

void check_no_listener(const struct side *a, const struct side *p)
{
        DAT_EP_HANDLE aep = side_ep(a);
        DAT_RETURN r = dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&p->address, fresh_qual(), 5000000,
                                      0, NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);

        cr_assert_eq(r, DAT_SUCCESS, "0x%08x", r);
        expect_event(a->conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
}

void check_timeout(const struct side *a, const struct side *p)
{
        DAT_EP_HANDLE aep = side_ep(a);
        DAT_CONN_QUAL q = fresh_qual();
        DAT_RETURN r;

        side_psp(p, q);
        r = dat_ep_connect(aep, (DAT_IA_ADDRESS_PTR)&p->address, q, 200000, 0, NULL,
                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
        cr_assert_eq(r, DAT_SUCCESS, "0x%08x", r);
        expect_event(p->cr_evd, DAT_CONNECTION_REQUEST_EVENT); /* never answered */
        expect_event(a->conn_evd, DAT_CONNECTION_EVENT_TIMED_OUT);
        cr_expect_eq(ep_state_of(aep), DAT_EP_STATE_DISCONNECTED);
}

void check_handoff(const struct side *a, const struct side *p)
{
        DAT_EP_HANDLE aep = side_ep(a), pep = side_ep(p);
        DAT_CONN_QUAL q1 = fresh_qual(), q2 = fresh_qual();
        DAT_EVD_HANDLE evd2 = DAT_HANDLE_NULL;
        DAT_PSP_HANDLE psp2;
        DAT_CR_HANDLE cr;
        DAT_CR_PARAM cp;
        DAT_EVENT ev;
        unsigned char pd[16];

        side_psp(p, q1);
        cr_assert_eq(dat_evd_create(p->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &evd2), DAT_SUCCESS);
        cr_assert_eq(dat_psp_create(p->ia, q2, evd2, DAT_PSP_CONSUMER_FLAG, &psp2), DAT_SUCCESS);
        fill_pattern(pd, sizeof(pd), 3);
        cr = connect_and_get_cr(a, aep, p, q1, pd, sizeof(pd));
        cr_assert_eq(dat_cr_handoff(cr, q2), DAT_SUCCESS);
        cr_expect_eq(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
        ev = expect_event(evd2, DAT_CONNECTION_REQUEST_EVENT);
        cr_expect_eq(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp2);
        cr = ev.event_data.cr_arrival_event_data.cr_handle;
        cr_assert_eq(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS);
        cr_expect_eq(cp.private_data_size, (DAT_COUNT)sizeof(pd));
        cr_assert_eq(dat_cr_accept(cr, pep, 0, NULL), DAT_SUCCESS);
        expect_event(a->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
}

void check_dup_connect(const struct side *a, const struct side *p)
{
        DAT_EP_HANDLE aep, pep, aep2 = side_ep(a), pep2 = side_ep(p);
        DAT_CONN_QUAL q = fresh_qual();
        unsigned char pd[64];
        DAT_CR_PARAM cp;
        DAT_EVENT ev;

        side_psp(p, q);
        connect_pair(a, p, q, &aep, &pep);
        fill_pattern(pd, sizeof(pd), 11);
        cr_assert_eq(dat_ep_dup_connect(aep2, aep, DAT_TIMEOUT_INFINITE, sizeof(pd), pd,
                                        DAT_QOS_BEST_EFFORT), DAT_SUCCESS);
        cr_expect_eq(ep_state_of(aep2), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        ev = expect_event(p->cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        cr_expect_eq(ev.event_data.cr_arrival_event_data.conn_qual, q);
        cr_assert_eq(dat_cr_query(ev.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL,
                                  &cp), DAT_SUCCESS);
        cr_assert_eq(cp.private_data_size, (DAT_COUNT)sizeof(pd));
        cr_expect_eq(memcmp(cp.private_data, pd, sizeof(pd)), 0);
        cr_assert_eq(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, pep2, 0, NULL),
                     DAT_SUCCESS);
        expect_event(a->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        expect_event(p->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        cr_expect_eq(ep_state_of(aep2), DAT_EP_STATE_CONNECTED);
}
