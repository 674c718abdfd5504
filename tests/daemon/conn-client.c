#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/daemon/conn-client.h"
#include "tests/daemon/raw-client.h"

static long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int cc_open(struct cc *c, const char *socket_path, const char *ia_name)
{
        struct datp_ia_open_reply reply;
        int r;

        memset(c, 0, sizeof(*c));
        c->next_request_id = 1000;
        c->version = raw_version;
        c->queue = calloc(CC_QUEUE, sizeof(*c->queue));
        if (!c->queue)
                return -ENOMEM;
        c->fd = raw_connect_hello(socket_path);
        if (c->fd < 0) {
                r = c->fd;
                free(c->queue);
                return r;
        }
        r = raw_ia_open(c->fd, ia_name, &reply);
        if (r < 0)
                return r;
        if (reply.status.dat_status != 0)
                return -ENOENT;
        c->ia_id = reply.ia_id;
        return 0;
}

static void close_event_fds(struct cc_event *e)
{
        for (unsigned i = 0; i < e->nfds; i++)
                if (e->fds[i] >= 0)
                        close(e->fds[i]);
        e->nfds = 0;
}

void cc_close(struct cc *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        for (unsigned i = 0; c->queue && i < c->n_queued; i++)
                close_event_fds(&c->queue[i]);
        c->n_queued = 0;
        free(c->queue);
        c->queue = NULL;
        c->has_split = false;
}

/* One valid packet from datd within the time left, with its descriptors
 * (EV_DATA_CHANNEL: the codec libdat uses checks their count). */
static int receive(struct cc *c, struct cc_event *e, long deadline)
{
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        long left = deadline - now_ms();
        ssize_t n;
        int r;

        if (c->has_split) {
                *e = c->split;
                c->has_split = false;
                return 0;
        }
        if (left < 0)
                left = 0;
        do
                r = poll(&p, 1, (int) left);
        while (r < 0 && errno == EINTR);
        if (r < 0)
                return -errno;
        if (r == 0)
                return -ETIMEDOUT;
        n = datp_recv(c->fd, &e->msg, e->fds, DATP_CHANNEL_MAX_FDS, &e->nfds);
        if (n == -ECONNRESET || n == 0)
                return -ECONNRESET;
        if (n < 0)
                return (int) n;
        e->seq = ++c->seq;
        if (e->nfds > DATP_CHANNEL_MAX_FDS)
                e->nfds = DATP_CHANNEL_MAX_FDS;     /* the rest were closed by datp_recv() */
        if (datp_validate(&e->msg, (size_t) n, e->nfds, DATP_TO_CLIENT, c->version, NULL) < 0) {
                close_event_fds(e);
                return -EBADMSG;
        }
        if (e->msg.hdr.type == DATP_EV_CONN_KEPT) {
                struct datp_ev_conn_kept k = e->msg.ev_conn_kept;

                c->n_kept++;
                c->split = (struct cc_event){ .nfds = 0, .seq = ++c->seq };
                for (unsigned i = 0; i < DATP_CHANNEL_MAX_FDS; i++)
                        c->split.fds[i] = e->fds[i] = -1;
                datp_ev_conn_kept_split(&k, &e->msg.ev_data_channel, &c->split.msg.ev_conn);
                c->has_split = true;
        }
        return 0;
}

/* EV_CHANNEL_DROP (version 4) comes whenever a peer goes, also in the
 * middle of a request: it waits in the queue like the others. */
static bool is_event(uint16_t type)
{
        return type == DATP_EV_CONN || type == DATP_EV_CONN_REQUEST || type == DATP_EV_DATA_CHANNEL ||
               type == DATP_EV_CHANNEL_DROP;
}

/* Queues an event; a data channel nobody keeps is counted and closed. */
static int enqueue(struct cc *c, struct cc_event *e)
{
        if (e->msg.hdr.type == DATP_EV_DATA_CHANNEL) {
                c->n_channels++;
                if (!c->keep_channels) {
                        close_event_fds(e);
                        return 0;
                }
        }
        if (c->n_queued >= CC_QUEUE) {
                close_event_fds(e);
                return -ENOBUFS;
        }
        c->queue[c->n_queued++] = *e;
        return 0;
}

int cc_call(struct cc *c, struct datp_header *req, void *reply, size_t size)
{
        long deadline = now_ms() + RAW_TIMEOUT_MS;
        struct cc_event e;
        int r;

        req->request_id = c->next_request_id++;
        req->version = c->version;
        r = raw_send(c->fd, req, req->length);
        if (r < 0)
                return r;
        for (;;) {
                r = receive(c, &e, deadline);
                if (r < 0)
                        return r;
                if (is_event(e.msg.hdr.type)) {
                        r = enqueue(c, &e);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (e.msg.hdr.type == DATP_ERROR)
                        return -EPROTO;
                if (e.msg.hdr.type != (req->type | DATP_REPLY) ||
                    e.msg.hdr.request_id != req->request_id || e.msg.hdr.length != size)
                        return -EBADMSG;
                memcpy(reply, &e.msg, size);
                return 0;
        }
}

/* The first queued event of this type, else the next that arrives (queuing
 * the others); its descriptors stay in *out. */
static int take_event(struct cc *c, uint16_t type, struct cc_event *out, int timeout_ms)
{
        long deadline = now_ms() + timeout_ms;
        int r;

        for (unsigned i = 0; i < c->n_queued; i++)
                if (c->queue[i].msg.hdr.type == type) {
                        *out = c->queue[i];
                        memmove(&c->queue[i], &c->queue[i + 1],
                                (c->n_queued - i - 1) * sizeof(*c->queue));
                        c->n_queued--;
                        c->last_seq = out->seq;
                        return 0;
                }
        for (;;) {
                r = receive(c, out, deadline);
                if (r < 0)
                        return r;
                if (out->msg.hdr.type == type &&
                    (type != DATP_EV_DATA_CHANNEL || c->keep_channels)) {
                        if (type == DATP_EV_DATA_CHANNEL)
                                c->n_channels++;
                        c->last_seq = out->seq;
                        return 0;
                }
                if (!is_event(out->msg.hdr.type)) {
                        close_event_fds(out);
                        return -EBADMSG;
                }
                r = enqueue(c, out);
                if (r < 0)
                        return r;
        }
}

int cc_event(struct cc *c, uint16_t type, union datp_message *ev, int timeout_ms)
{
        struct cc_event e;
        int r = take_event(c, type, &e, timeout_ms);

        if (r < 0)
                return r;
        close_event_fds(&e);
        memcpy(ev, &e.msg, e.msg.hdr.length);
        return 0;
}

int cc_channel(struct cc *c, union datp_message *ev, int *fds, int timeout_ms)
{
        struct cc_event e;
        int r = take_event(c, DATP_EV_DATA_CHANNEL, &e, timeout_ms);

        for (unsigned i = 0; i < DATP_CHANNEL_MAX_FDS; i++)
                fds[i] = -1;
        if (r < 0)
                return r;
        memcpy(ev, &e.msg, e.msg.hdr.length);
        for (unsigned i = 0; i < e.nfds; i++)
                fds[i] = e.fds[i];
        return 0;
}

int cc_no_event(struct cc *c, uint16_t type, int timeout_ms)
{
        union datp_message ev;
        int r = cc_event(c, type, &ev, timeout_ms);

        return r == -ETIMEDOUT ? 0 : r < 0 ? r : -EEXIST;
}

/* A request whose reply begins with the status (every connection reply):
 * the DAT status, or -errno; the reply in *reply. */
static long call_status(struct cc *c, struct datp_header *req, uint16_t type, size_t req_size,
                        size_t reply_size, union datp_message *reply)
{
        int r;

        datp_header_init(req, type, RAW_VERSION, req_size, 0);
        r = cc_call(c, req, reply, reply_size);
        return r < 0 ? r : (long) reply->connect_reply.status.dat_status;
}

long cc_listen(struct cc *c, uint32_t kind, uint64_t qual, uint32_t *listener_id, uint64_t *got_qual)
{
        struct datp_listen l = { .ia_id = c->ia_id, .kind = kind, .handle = 0x5000 + qual };
        union datp_message reply;
        long s;

        l.conn_qual = kind == DATP_LISTENER_PSP_ANY ? 0 : qual;
        if (kind == DATP_LISTENER_RSP)
                l.ep_handle = 0x6000 + qual;
        s = call_status(c, &l.hdr, DATP_LISTEN, sizeof(l), sizeof(reply.listen_reply), &reply);
        if (s >= 0 && listener_id)
                *listener_id = reply.listen_reply.listener_id;
        if (s >= 0 && got_qual)
                *got_qual = reply.listen_reply.conn_qual;
        return s;
}

long cc_unlisten(struct cc *c, uint32_t listener_id)
{
        struct datp_unlisten u = { .ia_id = c->ia_id, .listener_id = listener_id };
        union datp_message reply;

        return call_status(c, &u.hdr, DATP_UNLISTEN, sizeof(u), sizeof(reply.unlisten_reply), &reply);
}

static long do_connect(struct cc *c, struct datp_connect *req, uint64_t timeout_us, const void *pd,
                       uint32_t pd_len, uint32_t *conn_id)
{
        union datp_message reply;
        long s;

        req->ia_id = c->ia_id;
        req->ep_handle = 0x7000;
        req->timeout_us = timeout_us;
        req->pd_len = pd_len;
        if (pd_len)
                memcpy(req->private_data, pd, pd_len);
        s = call_status(c, &req->hdr, DATP_CONNECT, sizeof(*req), sizeof(reply.connect_reply), &reply);
        if (s >= 0 && conn_id)
                *conn_id = reply.connect_reply.conn_id;
        return s;
}

long cc_connect_qos(struct cc *c, const struct sockaddr *addr, socklen_t len, uint64_t qual,
                    uint32_t qos, uint32_t *conn_id)
{
        struct datp_connect req = {};

        memcpy(&req.remote_address, addr, len);
        req.remote_address_len = len;
        req.remote_conn_qual = qual;
        req.qos = qos;
        return do_connect(c, &req, UINT64_MAX, NULL, 0, conn_id);
}

long cc_connect(struct cc *c, const struct sockaddr *addr, socklen_t len, uint64_t qual,
                uint64_t timeout_us, const void *pd, uint32_t pd_len, uint32_t *conn_id)
{
        struct datp_connect req = {};

        memcpy(&req.remote_address, addr, len);
        req.remote_address_len = len;
        req.remote_conn_qual = qual;
        return do_connect(c, &req, timeout_us, pd, pd_len, conn_id);
}

long cc_dup_connect(struct cc *c, uint32_t dup_of, uint64_t timeout_us, const void *pd,
                    uint32_t pd_len, uint32_t *conn_id)
{
        struct datp_connect req = {};

        req.flags = DATP_CONNECT_DUP;
        req.dup_of_conn_id = dup_of;
        return do_connect(c, &req, timeout_us, pd, pd_len, conn_id);
}

long cc_accept(struct cc *c, uint32_t cr_id, const void *pd, uint32_t pd_len, uint32_t *conn_id)
{
        struct datp_cr_accept a = { .ia_id = c->ia_id, .cr_id = cr_id, .ep_handle = 0x8000,
                                    .pd_len = pd_len };
        union datp_message reply;
        long s;

        if (pd_len)
                memcpy(a.private_data, pd, pd_len);
        s = call_status(c, &a.hdr, DATP_CR_ACCEPT, sizeof(a), sizeof(reply.cr_accept_reply), &reply);
        if (s >= 0 && conn_id)
                *conn_id = reply.cr_accept_reply.conn_id;
        return s;
}

long cc_reject(struct cc *c, uint32_t cr_id, const void *pd, uint32_t pd_len)
{
        struct datp_cr_reject j = { .ia_id = c->ia_id, .cr_id = cr_id, .pd_len = pd_len };
        union datp_message reply;

        if (pd_len)
                memcpy(j.private_data, pd, pd_len);
        return call_status(c, &j.hdr, DATP_CR_REJECT, sizeof(j), sizeof(reply.cr_reject_reply), &reply);
}

long cc_handoff(struct cc *c, uint32_t cr_id, uint64_t qual)
{
        struct datp_cr_handoff h = { .ia_id = c->ia_id, .cr_id = cr_id, .conn_qual = qual };
        union datp_message reply;

        return call_status(c, &h.hdr, DATP_CR_HANDOFF, sizeof(h), sizeof(reply.cr_handoff_reply), &reply);
}

long cc_disconnect(struct cc *c, uint32_t conn_id, uint32_t flags)
{
        struct datp_disconnect d = { .ia_id = c->ia_id, .conn_id = conn_id, .flags = flags };
        union datp_message reply;

        return call_status(c, &d.hdr, DATP_DISCONNECT, sizeof(d), sizeof(reply.disconnect_reply), &reply);
}

socklen_t cc_addr4(struct sockaddr_storage *ss, const char *addr)
{
        struct sockaddr_in *sin = (struct sockaddr_in *) ss;

        memset(ss, 0, sizeof(*ss));
        sin->sin_family = AF_INET;
        inet_pton(AF_INET, addr, &sin->sin_addr);
        return sizeof(*sin);
}

socklen_t cc_addr6(struct sockaddr_storage *ss, const char *addr)
{
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) ss;

        memset(ss, 0, sizeof(*ss));
        sin6->sin6_family = AF_INET6;
        inet_pton(AF_INET6, addr, &sin6->sin6_addr);
        return sizeof(*sin6);
}
