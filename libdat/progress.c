/* The per-IA progress thread (progress.h). */
#include "config.h"

#include "libdat/progress.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "libdat/channel.h"
#include "libdat/cno.h"
#include "libdat/conn.h"
#include "libdat/dto.h"
#include "libdat/ia.h"
#include "libdat/shm_keep.h"

#define READ_BATCH 4

struct progress {
        struct ia *ia;
        pthread_t thread;
        int stop_fd;                    /* eventfd: readable when the thread must leave */
        /* Receive buffers: the packets one wake-up finds are taken in
         * one system call (DATA_CHANNEL and ESTABLISHED come in a pair;
         * with many connections several events wait). */
        union datp_message buf[READ_BATCH];
        int fds[READ_BATCH][DATP_MAX_FDS];
        ssize_t len[READ_BATCH];
        unsigned nfds[READ_BATCH];
};

/* A validated packet (fds: the descriptors it carried, nfds of them). */
static void dispatch(struct ia *ia, const union datp_message *m, size_t len, int *fds,
                     unsigned nfds)
{
        switch (m->hdr.type) {
        case DATP_EV_DATA_CHANNEL:
                dto_channel_offer(ia, &m->ev_data_channel, fds, nfds);
                return;
        case DATP_EV_CONN_REQUEST:
                cr_dispatch(ia, &m->ev_conn_request);
                return;
        case DATP_EV_CONN:
                conn_dispatch(ia, &m->ev_conn);
                return;
        case DATP_EV_CONN_KEPT: {
                /* The two events it stands for, in their order. */
                struct datp_ev_data_channel ch;
                struct datp_ev_conn ev;

                datp_ev_conn_kept_split(&m->ev_conn_kept, &ch, &ev);
                dto_channel_offer(ia, &ch, NULL, 0);
                conn_dispatch(ia, &ev);
                return;
        }
        case DATP_EV_CHANNEL_DROP:
                if (m->ev_channel_drop.ia_id == ia->ia_id)
                        shm_keep_drop(ia->shm_keep, m->ev_channel_drop.channel_id);
                return;
        default:
                /* Replies, and ERRORs naming a request; the rest are
                 * answers to datd_conn_send, or to a call that gave up. */
                if (!datd_conn_deliver(&ia->conn, m, len) && m->hdr.type == DATP_ERROR)
                        dat_trace("IA %s: datd: %s", ia->name, m->error.reason);
                return;
        }
}

/* Validates and dispatches a packet (len as datp_recv returned it, with
 * the nfds descriptors that came with it in fds); false when the
 * connection is over (its descriptors are closed then).  Descriptors come
 * only with EV_DATA_CHANNEL; any others are closed. */
static bool take_one(struct ia *ia, const union datp_message *m, ssize_t len, int *fds,
                     unsigned nfds)
{
        const char *reason = NULL;
        int r;

        if (nfds > DATP_MAX_FDS)
                nfds = DATP_MAX_FDS;
        if (len <= 0) {
                dat_trace("IA %s: datd closed the connection", ia->name);
                return false;
        }
        r = datp_validate(m, (size_t)len, nfds, DATP_TO_CLIENT, ia->conn.version, &reason);
        if (r < 0) {
                /* datd does not send garbage: whoever does is not datd. */
                dat_trace("IA %s: malformed message from datd: %s", ia->name,
                          reason ? reason : datp_decode_error_str(r));
                channel_close_fds(fds, nfds);
                return false;
        }
        if (m->hdr.type != DATP_EV_DATA_CHANNEL)
                channel_close_fds(fds, nfds);
        dispatch(ia, m, (size_t)len, fds, nfds);
        return !(m->hdr.type == DATP_ERROR && m->error.fatal);
}

/* A packet a round trip of the progress thread read past outside its
 * dispatch (datd_conn.h, datd_dispatch_fn). */
static bool take_packet(void *ctx, struct datd_packet *pkt)
{
        return take_one(ctx, &pkt->msg, pkt->len, pkt->fds, pkt->nfds);
}

/* Dispatches, in order, the packets that a round trip inside the
 * dispatch read past to its reply (datd_conn.h, datd_conn_backlog_pop):
 * datd sent them before anything still on the socket.  False when the
 * connection is over. */
static bool take_backlog(struct ia *ia)
{
        struct datd_packet *pkt;

        while ((pkt = datd_conn_backlog_pop(&ia->conn))) {
                bool ok = take_packet(ia, pkt);

                /* Its descriptors are taken or closed. */
                free(pkt);
                if (!ok)
                        return false;
        }
        return true;
}

/* Reads the packets that are there (READ_BATCH at most: the rest wake us
 * again) and dispatches them in order, after the backlog and before what
 * a round trip inside their dispatch read past (an agent run at once,
 * cno.h); false when the connection is over. */
static bool read_one_locked(struct progress *p)
{
        struct ia *ia = p->ia;
        int n;

        if (!take_backlog(ia))
                return false;
        /* Without waiting: a caller may have read what woke us. */
        n = datp_try_recv_batch(ia->conn.fd, p->buf, READ_BATCH, p->fds, p->len, p->nfds);
        if (n == -EAGAIN || n == -EINTR)
                return true;
        if (n < 0) {
                dat_trace("IA %s: datd closed the connection (error)", ia->name);
                return false;
        }
        for (int i = 0; i < n; i++) {
                if (take_one(ia, &p->buf[i], p->len[i], p->fds[i], p->nfds[i]))
                        continue;
                /* What came after the end is not looked at. */
                for (int k = i + 1; k < n; k++)
                        channel_close_fds(p->fds[k], p->nfds[k] > DATP_MAX_FDS ? DATP_MAX_FDS
                                                                               : p->nfds[k]);
                return false;
        }
        return take_backlog(ia);
}

bool progress_read(struct ia *ia)
{
        return read_one_locked(ia->progress);
}

/* The packet is read and dispatched under the socket's reader lock, so
 * that a caller reading its own reply (datd_conn.h) never returns before
 * an event that datd sent ahead of that reply is dispatched.  A caller
 * holding the lock reads what is there itself; a waiter that took the
 * socket over dispatches it, and the backlog that a round trip inside its
 * dispatch read past it takes before it lets the socket go: nothing here
 * waits for it (this thread spun on sched_yield for as long as that
 * waiter's agent ran). */
static bool read_one(void *arg)
{
        struct progress *p = arg;
        struct cno_held held;
        bool ok;

        if (!datd_conn_begin_read(&p->ia->conn))
                return true;
        /* A CNO's agent runs once the socket is free (cno.h); its round
         * trips dispatch what they read past in place (datd_conn.c,
         * read_past). */
        cno_notices_hold(&held);
        ok = read_one_locked(p);
        datd_conn_end_read(&p->ia->conn);
        cno_notices_release(&held);
        return ok;
}

static void *progress_main(void *arg)
{
        struct progress *p = arg;
        bool ok;

        datd_conn_reader_thread();
        datd_conn_set_progress_thread(&p->ia->conn, true);
        ok = dto_ia_run(p->ia, p->ia->conn.fd, p->stop_fd, read_one, p);
        datd_conn_set_progress_thread(&p->ia->conn, false);
        if (ok)
                return NULL;
        /* datd is gone (or the socket failed): nothing will answer again. */
        datd_conn_hangup(&p->ia->conn);
        conn_ia_broken(p->ia);
        return NULL;
}

DAT_RETURN progress_start(struct ia *ia)
{
        struct progress *p = calloc(1, sizeof(*p));
        sigset_t all, old;
        int r;

        if (!p)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        p->ia = ia;
        p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (p->stop_fd < 0) {
                free(p);
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        __atomic_store_n(&ia->conn.reader_evicted, false, __ATOMIC_RELEASE);
        datd_conn_set_dispatch(&ia->conn, take_packet, ia);
        datd_conn_set_threaded(&ia->conn, true);
        /* The consumer's signals are for the consumer's threads. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = pthread_create(&p->thread, NULL, progress_main, p);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0) {
                datd_conn_set_threaded(&ia->conn, false);
                close(p->stop_fd);
                free(p);
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        ia->progress = p;
        return DAT_SUCCESS;
}

void progress_stop(struct ia *ia)
{
        struct progress *p = ia->progress;
        uint64_t one = 1;

        if (!p)
                return;
        /* A waiter reading the socket holds read_lock, which the thread
         * takes on its way out. */
        datd_conn_evict_reader(&ia->conn);
        while (write(p->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
                ;
        pthread_join(p->thread, NULL);
        close(p->stop_fd);
        free(p);
        ia->progress = NULL;
        datd_conn_set_threaded(&ia->conn, false);
}
