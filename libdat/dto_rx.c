/* What a data path reads from its channel (dto_engine.h): a parser that
 * survives partial reads (header, segment descriptors, payload straight
 * into its destination), and the target side of the peer's requests:
 * receives matched to Sends, RDMA Writes and Reads served against our own
 * memory tables (rmr_context, bounds, privileges, PZ), responses matched
 * to our requests in order.
 *
 * The peer is not trusted: every field is checked before it is used, and
 * a frame that breaks dto_wire.h's rules fails the connection. */
#include "config.h"

#include "libdat/dto_engine.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "libdat/ep.h"
#include "libdat/ia.h"
#include "libdat/lmr.h"
#include "libdat/mem_ctx.h"
#include "libdat/mem_shm.h"
#include "libdat/pz.h"
#include "libdat/rmr.h"
#include "libdat/shm_direct.h"
#include "libdat/srq.h"

#include <dat2/dat_ib_extensions.h>

enum action {
        ACT_NEXT,                       /* the frame is handled, or its payload follows */
        ACT_STALL,                      /* a Send waits for a receive */
        ACT_FAIL,                       /* the connection failed */
};

static enum action protocol_error(struct dto_ep *d, const char *why)
{
        dto_fail(d, why);
        return ACT_FAIL;
}

/* Requests from the peer arrive numbered 1, 2, ... */
static bool next_peer_seq(struct dto_ep *d, uint32_t seq)
{
        if (seq != d->peer_seq + 1)
                return false;
        d->peer_seq = seq;
        return true;
}

/* Sets the sink for the payload: n iovecs, len bytes in all. */
static void sink_set(struct dto_ep *d, const struct iovec *iov, int n, uint64_t len)
{
        memcpy(d->rx_sink, iov, (size_t)n * sizeof(*iov));
        d->rx_nsink = n;
        d->rx_left = len;
        d->rx_state = DTO_RX_PAYLOAD;
}

static bool respond(struct dto_ep *d, uint8_t op, uint32_t seq, uint32_t status, uint64_t len,
                    uint8_t flags, const struct iovec *data)
{
        struct dto_frame f = { .op = op, .flags = flags, .seq = seq, .len = len,
                               .status = status };
        bool fatal = status != DAT_DTO_SUCCESS;

        if (!dto_tx_respond(d, &f, data, fatal)) {
                dto_fail(d, "the peer does not read its responses");
                return false;
        }
        if (fatal)
                d->rx_fatal = true;
        return true;
}

/* ---- cross-memory attach ------------------------------------------------- */

static struct iovec seg_iov(const struct dto_seg *s)
{
        return (struct iovec){ (void *)(uintptr_t)s->addr, (size_t)s->len };
}

/* Moves len bytes between local and the peer's segments (pull: from the
 * peer).  True when all of them moved. */
static bool cma_move(struct dto_ep *d, const struct iovec *local, int nlocal, uint64_t len,
                     bool pull)
{
        struct iovec remote[DTO_MAX_SEGS];
        uint64_t total = 0;
        ssize_t n;

        for (unsigned i = 0; i < d->rx.nseg; i++) {
                remote[i] = seg_iov(&d->rx_segs[i]);
                total += d->rx_segs[i].len;
        }
        if (total != len)
                return false;
        if (len == 0)
                return true;
        if (pull)
                n = process_vm_readv(d->ch->peer_pid, local, (unsigned long)nlocal, remote,
                                     d->rx.nseg, 0);
        else
                n = process_vm_writev(d->ch->peer_pid, local, (unsigned long)nlocal, remote,
                                      d->rx.nseg, 0);
        return n >= 0 && (uint64_t)n == len;
}

/* ---- receives ------------------------------------------------------------ */

/* Takes the receive for an arriving Send: the EP's oldest, or its SRQ's. */
static bool take_recv(struct dto_ep *d)
{
        struct srq *srq;
        DAT_COUNT n = 0;

        if (d->ep->srq == DAT_HANDLE_NULL) {
                if (d->rq_count == 0)
                        return false;
                d->rx_recv = d->rq[d->rq_head];
                d->rq_head = (d->rq_head + 1) & d->recv_mask;
                d->rq_count--;
                d->rx_recv_srq = false;
        } else {
                srq = srq_lookup(d->ep->srq);
                if (!srq || !srq_buffer_take(srq, &d->rx_recv.cookie, &n, d->rx_srq_iov))
                        return false;
                d->rx_recv.flags = DAT_COMPLETION_DEFAULT_FLAG;
                d->rx_recv.nseg = (uint32_t)n;
                d->rx_recv.iov = d->rx_srq_iov;
                d->rx_recv_srq = true;
                /* dat_ep_recv_query(3DAT): taken buffers count at the EP. */
                __atomic_add_fetch(&d->ep->recv_outstanding, 1, __ATOMIC_RELAXED);
        }
        d->rx_recv_taken = true;
        return true;
}

/* The receive's segments as iovecs, checked again now (the LMR may have
 * gone since the post): DAT_DTO_SUCCESS with the capacity, or
 * DAT_DTO_ERR_LOCAL_PROTECTION. */
static DAT_DTO_COMPLETION_STATUS recv_iovecs(struct dto_ep *d, struct iovec *iov, int *n,
                                             uint64_t *capacity)
{
        const DAT_LMR_TRIPLET *t = d->rx_recv.iov;

        *n = 0;
        *capacity = 0;
        for (uint32_t i = 0; i < d->rx_recv.nseg; i++) {
                struct lmr *lmr;

                if (t[i].segment_length == 0)
                        continue;
                if (lmr_find_by_context(d->ia, t[i].lmr_context, t[i].virtual_address,
                                        t[i].segment_length, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                                        &lmr) != DAT_SUCCESS)
                        return DAT_DTO_ERR_LOCAL_PROTECTION;
                iov[(*n)++] = (struct iovec){ (void *)(uintptr_t)t[i].virtual_address,
                                              (size_t)t[i].segment_length };
                *capacity += t[i].segment_length;
        }
        return DAT_DTO_SUCCESS;
}

/* Cuts iov down to len bytes (dat_ep_post_recv(3DAT): the front segments
 * fill first, one partially, the rest not at all). */
static int iov_trim(struct iovec *iov, int n, uint64_t len)
{
        for (int i = 0; i < n; i++) {
                if (len <= iov[i].iov_len) {
                        iov[i].iov_len = (size_t)len;
                        return len ? i + 1 : i;
                }
                len -= iov[i].iov_len;
        }
        return n;
}

/* dat_ep_post_recv(3DAT): notification as the connection's Solicited Wait
 * configuration and the matching Send's flags say. */
static bool recv_notifies(const struct dto_ep *d)
{
        if (d->rx_recv.flags & DAT_COMPLETION_UNSIGNALLED_FLAG)
                return false;
        if (d->ep->attr.recv_completion_flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
                return d->rx.flags & DTO_F_SOLICITED;
        return true;
}

static void recv_done(struct dto_ep *d, DAT_DTO_COMPLETION_STATUS status, struct dto_batch *b)
{
        dto_complete_recv(d, &d->rx_recv, d->rx_recv_srq, status, d->rx.len,
                          status == DAT_DTO_SUCCESS ? recv_notifies(d) : true, b);
        d->rx_recv_taken = false;
}

static void stall_clear(struct dto_ep *d)
{
        if (d->rnr_deadline_ns) {
                d->rnr_deadline_ns = 0;
                __atomic_sub_fetch(&d->ia->dto.n_stalled, 1, __ATOMIC_RELAXED);
        }
}

/* The frame being read needs a receive: true once it holds one.  Receiver
 * not ready: the frame waits, and the stream with it, until a receive is
 * posted or the receiver-not-ready time runs out. */
static bool hold_recv(struct dto_ep *d)
{
        if (!d->rx_recv_taken && !take_recv(d)) {
                if (!d->rnr_deadline_ns) {
                        d->rnr_deadline_ns = dto_now_ns() + dto_rnr_timeout_ns();
                        __atomic_add_fetch(&d->ia->dto.n_stalled, 1, __ATOMIC_RELAXED);
                }
                return false;
        }
        stall_clear(d);
        return true;
}

/* The peer's request in the frame taken (a Send or a Write) is placed: we
 * owe its acknowledgement, at once unless the frame said it may wait. */
static inline void request_placed(struct dto_ep *d)
{
        d->bytes_received += d->rx.len;
        d->ack_owed = d->rx.seq;
        if (!(d->rx.flags & DTO_F_ACK_LATER))
                d->ack_due = d->rx.seq;
        d->peer_idle = false;
}

/* A Send's payload is in place: its receive completes, and the peer is
 * owed the acknowledgement. */
static void send_placed(struct dto_ep *d, struct dto_batch *b)
{
        recv_done(d, DAT_DTO_SUCCESS, b);
        request_placed(d);
}

static size_t stash_take(struct dto_ep *d, void *dst, size_t max);

/* The frame's whole inline payload was read ahead with its header (or
 * lent with it): a small message, placed at once rather than through the
 * payload state. */
static bool payload_read_ahead(const struct dto_ep *d)
{
        return d->rx_stash_len - d->rx_stash_off >= d->rx.len;
}

static enum action on_send(struct dto_ep *d, struct dto_batch *b)
{
        struct iovec iov[DTO_MAX_SEGS];
        DAT_DTO_COMPLETION_STATUS st;
        uint64_t capacity;
        int n;

        if (!hold_recv(d))
                return ACT_STALL;
        /* Before the check: a free after it shows at the payload's next
         * piece (poll_frames). */
        d->rx_sink_checked = mem_ctx_withdrawal_count();
        st = recv_iovecs(d, iov, &n, &capacity);
        if (st == DAT_DTO_SUCCESS && d->rx.len > capacity)
                /* dat_ep_post_recv(3DAT): a message larger than the buffer */
                st = DAT_DTO_ERR_LOCAL_LENGTH;
        if (st != DAT_DTO_SUCCESS) {
                recv_done(d, st, b);
                respond(d, DTO_OP_ACK, d->rx.seq, DAT_DTO_ERR_REMOTE_RESPONDER, 0, 0, NULL);
                return ACT_NEXT;
        }
        n = iov_trim(iov, n, d->rx.len);
        if (d->rx.flags & DTO_F_CMA) {
                if (!cma_move(d, iov, n, d->rx.len, true))
                        return protocol_error(d, "cannot read a Send from the peer's memory");
        } else if (n <= 1 && payload_read_ahead(d)) {
                if (n == 1)
                        stash_take(d, iov[0].iov_base, iov[0].iov_len);
        } else {
                sink_set(d, iov, n, d->rx.len);
                return ACT_NEXT;
        }
        send_placed(d, b);
        return ACT_NEXT;
}

/* ---- RDMA served --------------------------------------------------------- */

/* The target memory of an RDMA request, checked against our tables: the
 * rmr_context must be one of this IA's, the range inside what it exposes
 * with the privilege asked, and its PZ the EP's. */
static inline bool target_ok(struct dto_ep *d, uint32_t rmr_context, uint64_t addr, uint64_t len,
                             DAT_MEM_PRIV_FLAGS priv)
{
        struct lmr *lmr;
        struct pz *pz;

        if (rmr_context_find(d->ia, rmr_context, addr, len, priv, &lmr, &pz) != DAT_SUCCESS)
                return false;
        return pz && ep_pz_is(d->ep, &pz->obj);
}

bool dto_rdma_target_ok(struct dto_ep *d, uint32_t rmr_context, uint64_t addr, uint64_t len,
                        DAT_MEM_PRIV_FLAGS priv)
{
        return target_ok(d, rmr_context, addr, len, priv);
}

static bool rdma_target_len(struct dto_ep *d, DAT_MEM_PRIV_FLAGS priv, uint64_t len,
                            struct iovec *target)
{
        if (!target_ok(d, d->rx.rmr_context, d->rx.addr, len, priv))
                return false;
        *target = (struct iovec){ (void *)(uintptr_t)d->rx.addr, (size_t)len };
        return true;
}

static bool rdma_target(struct dto_ep *d, DAT_MEM_PRIV_FLAGS priv, struct iovec *target)
{
        return rdma_target_len(d, priv, d->rx.len, target);
}

/* DAT IB extensions: a 64-bit atomic on the target, once its operands are
 * in (dat_ib_extensions.h: the region must grant remote atomics). */
static void on_atomic_operands(struct dto_ep *d)
{
        struct iovec target;
        uint64_t *word, old;

        if (!rdma_target_len(d, (DAT_MEM_PRIV_FLAGS)DAT_IB_MEM_PRIV_REMOTE_ATOMIC,
                             sizeof(uint64_t), &target) ||
            d->rx.addr % sizeof(uint64_t) != 0) {
                respond(d, DTO_OP_READ_RESP, d->rx.seq, DAT_DTO_ERR_REMOTE_ACCESS, 0, 0, NULL);
                return;
        }
        word = target.iov_base;
        if (d->rx.op == DTO_OP_CMP_SWAP) {
                old = d->rx_operand[0];
                __atomic_compare_exchange_n(word, &old, d->rx_operand[1], false,
                                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        } else {
                old = __atomic_fetch_add(word, d->rx_operand[0], __ATOMIC_SEQ_CST);
        }
        if (!dto_tx_respond_value(d, d->rx.seq, old))
                dto_fail(d, "the peer does not read its responses");
}

/* A Write whose sender takes an EXPORT (DTO_F_MAP_OK), into memory this
 * process may share with it (libdat's shared memory of an LMR, reached
 * with remote write through the EP's PZ): exports the whole window of its
 * context (offer_window says when).  Out of line: rarely called. */
static _noinline_ void export_window(struct dto_ep *d)
{
        uint32_t ctx = d->rx.rmr_context;
        struct rmr_window w, again;
        struct shm_direct_export e;
        uintptr_t base;
        bool same;

        if (!rmr_context_window(d->ia, ctx, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &w))
                return;
        /* w.shm is ours until the end (its descriptor stays open). */
        base = w.shm ? (uintptr_t)w.shm->addr : 0;
        if (!w.shm || !w.pz || !ep_pz_is(d->ep, &w.pz->obj) || w.length == 0 || w.start < base ||
            w.length > w.shm->length || w.start - base > w.shm->length - w.length ||
            shm_direct_export(d->ch->direct,
                              &(struct shm_direct_window){ .ctx = ctx, .va = w.start,
                                                           .len = w.length, .fd = w.shm->fd,
                                                           .file_off = w.start - base },
                              &e) != 1) {
                mem_shm_unref(w.shm);
                return;
        }
        /* A revocation that ran before the export was noted did not see
         * it (mem_ctx_note_export): is the window still what ctx reaches? */
        mem_ctx_note_export(ctx);
        same = rmr_context_window(d->ia, ctx, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &again) &&
               again.lmr == w.lmr && again.start == w.start && again.length == w.length;
        mem_shm_unref(again.shm);
        mem_shm_unref(w.shm);
        if (!same) {
                shm_direct_revoke_context(ctx);
                return;
        }
        /* Not sent (no memory for the response): the peer's Writes keep
         * going through the channel. */
        (void)dto_tx_respond(d,
                             &(struct dto_frame){ .op = DTO_OP_EXPORT, .seq = e.slot,
                                                  .addr = e.state, .rmr_context = ctx,
                                                  .status = (uint32_t)e.table_fd },
                             NULL, false);
}

/* A Write whose sender takes an EXPORT (DTO_F_MAP_OK): its context is
 * exported at the second Write in a row to it, and looked at once while
 * it stays the one written to.  An export costs a descriptor here and four
 * system calls in the peer, which a context written once (an RMR bound
 * for each transfer) would never pay back; the usual Write, to the
 * context looked at already, costs this test. */
static inline void offer_window(struct dto_ep *d)
{
        uint32_t ctx = d->rx.rmr_context;

        if (!(d->rx.flags & DTO_F_MAP_OK) || !d->ch->direct ||
            (ctx == d->direct_last_ctx && d->direct_offered))
                return;
        if (ctx != d->direct_last_ctx) {
                d->direct_last_ctx = ctx;
                d->direct_offered = false;
                return;
        }
        d->direct_offered = true;
        export_window(d);
}

/* An RDMA Write is placed: acknowledged, and with immediate data its
 * receive completes carrying it. */
static void write_done(struct dto_ep *d, struct dto_batch *b)
{
        if (d->rx.flags & DTO_F_IMM) {
                dto_complete_recv_immed(d, &d->rx_recv, d->rx_recv_srq, DAT_DTO_SUCCESS,
                                        d->rx.len, recv_notifies(d), d->rx.status,
                                        b);
                d->rx_recv_taken = false;
        }
        request_placed(d);
}

static enum action on_write(struct dto_ep *d, struct dto_batch *b)
{
        struct iovec target;

        /* With immediate data the Write consumes a receive, like a Send:
         * receiver not ready the same way. */
        if ((d->rx.flags & DTO_F_IMM) && !hold_recv(d))
                return ACT_STALL;
        /* Before the check: a free or unbind after it shows at the
         * payload's next piece (poll_frames). */
        d->rx_sink_checked = mem_ctx_withdrawal_count();
        if (!rdma_target(d, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &target)) {
                respond(d, DTO_OP_ACK, d->rx.seq, DAT_DTO_ERR_REMOTE_ACCESS, 0, 0, NULL);
                return ACT_NEXT;
        }
        offer_window(d);
        if (d->rx.flags & DTO_F_CMA) {
                if (!cma_move(d, &target, 1, d->rx.len, true))
                        return protocol_error(d, "cannot read an RDMA Write from the peer");
        } else if (payload_read_ahead(d)) {
                if (d->rx.len)
                        stash_take(d, target.iov_base, target.iov_len);
        } else {
                sink_set(d, &target, d->rx.len ? 1 : 0, d->rx.len);
                return ACT_NEXT;
        }
        write_done(d, b);
        return ACT_NEXT;
}

static enum action on_read_req(struct dto_ep *d)
{
        /* Before the check: the response's data goes out later, and is
         * checked again if a context was withdrawn since (dto_tx.c). */
        uint64_t checked_at = mem_ctx_withdrawal_count();
        struct iovec source;

        if (!rdma_target(d, DAT_MEM_PRIV_REMOTE_READ_FLAG, &source)) {
                respond(d, DTO_OP_READ_RESP, d->rx.seq, DAT_DTO_ERR_REMOTE_ACCESS, 0, 0, NULL);
                return ACT_NEXT;
        }
        if (d->rx.flags & DTO_F_CMA) {
                if (!cma_move(d, &source, 1, d->rx.len, false))
                        return protocol_error(d, "cannot write an RDMA Read to the peer");
                d->bytes_sent += d->rx.len;
                respond(d, DTO_OP_READ_RESP, d->rx.seq, DAT_DTO_SUCCESS, 0, DTO_F_CMA, NULL);
                return ACT_NEXT;
        }
        if (d->rx.len == 0)
                respond(d, DTO_OP_READ_RESP, d->rx.seq, DAT_DTO_SUCCESS, 0, 0, NULL);
        else if (dto_tx_respond_read(d, d->rx.seq, &source, d->rx.rmr_context, d->rx.addr,
                                     checked_at))
                d->read_data_pending++;
        else
                dto_fail(d, "the peer does not read its responses");
        d->rx_state = DTO_RX_HEADER;
        return ACT_NEXT;
}

/* ---- responses to our requests -------------------------------------------- */

/* The request the next response must answer. */
static struct dto_req *awaited(struct dto_ep *d, uint32_t *slot)
{
        while (d->resp_next != d->tx_next) {
                struct dto_req *r = dto_req_at(d, d->resp_next);

                if (!r->local && !r->done) {
                        *slot = dto_req_slot(d, d->resp_next);
                        return r;
                }
                d->resp_next++;
        }
        return NULL;
}

static void request_done(struct dto_ep *d, struct dto_req *r, uint32_t status,
                         struct dto_batch *b)
{
        r->status = (DAT_DTO_COMPLETION_STATUS)status;
        r->done = true;
        if (dto_req_reads(r) && d->reads_in_flight > 0)
                d->reads_in_flight--;
        if (status == DAT_DTO_SUCCESS)
                d->bytes_sent += dto_req_reads(r) ? 0 : r->length;
        d->resp_next++;
        if (status != DAT_DTO_SUCCESS) {
                dto_deliver_requests(d, b);
                /* The target refused: the connection is over on both sides. */
                dto_fail(d, "the peer refused a request");
                return;
        }
        /* The acknowledgement may cover requests behind an RDMA Read. */
        if (dto_req_reads(r))
                dto_rx_apply_acks(d, b);
        dto_deliver_requests(d, b);
}

void dto_rx_apply_acks(struct dto_ep *d, struct dto_batch *b)
{
        uint32_t slot;
        struct dto_req *r;

        d->acks_held = false;
        while (d->state == DTO_RUNNING && (r = awaited(d, &slot)) && !dto_req_reads(r) &&
               (int32_t)(r->seq - d->peer_ack) <= 0)
                request_done(d, r, DAT_DTO_SUCCESS, b);
}

static enum action on_response(struct dto_ep *d, struct dto_batch *b)
{
        uint32_t slot = 0, status = d->rx.status;
        struct dto_req *r;
        bool read = d->rx.op == DTO_OP_READ_RESP;

        /* A success ACK only carries the cumulative acknowledgement, which
         * every frame's header brought already. */
        if (!read && status == DAT_DTO_SUCCESS) {
                d->peer_idle = true;
                return d->rx.seq == 0 && d->rx.len == 0
                               ? ACT_NEXT
                               : protocol_error(d, "an acknowledgement with a payload");
        }
        r = awaited(d, &slot);

        if (!r || r->seq != d->rx.seq || dto_req_reads(r) != read ||
            status > DAT_DTO_ERR_LOCAL_MM_ERROR || ((d->rx.flags & DTO_F_CMA) && !r->cma))
                return protocol_error(d, "a response to no request of ours");
        if (!read || status != DAT_DTO_SUCCESS || (d->rx.flags & DTO_F_CMA)) {
                if (d->rx.len != 0)
                        return protocol_error(d, "a response with a payload it cannot have");
                request_done(d, r, status, b);
                return d->state == DTO_RUNNING ? ACT_NEXT : ACT_FAIL;
        }
        /* An RDMA Read's data, inline: into our segments. */
        if (d->rx.len != r->length)
                return protocol_error(d, "an RDMA Read answered with the wrong length");
        {
                struct iovec iov[DTO_MAX_SEGS];
                const DAT_LMR_TRIPLET *t = &d->req_iov[(size_t)slot * d->req_iov_stride];
                int n = 0;

                for (uint32_t i = 0; i < r->nseg; i++)
                        if (t[i].segment_length > 0)
                                iov[n++] = (struct iovec){
                                        (void *)(uintptr_t)t[i].virtual_address,
                                        (size_t)t[i].segment_length };
                n = iov_trim(iov, n, d->rx.len);
                sink_set(d, iov, n, d->rx.len);
                /* Checked when the Read was posted, at a count we did not
                 * keep: checked again before the first piece lands. */
                d->rx_sink_checked = mem_ctx_withdrawal_count() - 1;
        }
        return ACT_NEXT;
}

/* ---- the parser ----------------------------------------------------------- */

/* The peer's HELLO: can we reach its memory? */
static void on_hello_payload(struct dto_ep *d)
{
        uint64_t seen = 0;
        struct iovec local = { &seen, sizeof(seen) };
        struct iovec remote = { (void *)(uintptr_t)d->rx.addr, sizeof(seen) };
        bool ok = false;

        if (d->rx.addr && d->ch->same_host && d->ch->peer_pid > 0)
                ok = process_vm_readv(d->ch->peer_pid, &local, 1, &remote, 1, 0) ==
                             (ssize_t)sizeof(seen) &&
                     seen == d->rx_scratch;
        d->cma_to_peer = ok;
        d->cma_ok_value = ok;
        d->cma_ok_owed = true;
}

/* A frame's cumulative acknowledgement: never backwards, never beyond
 * what we posted. */
static bool take_ack(struct dto_ep *d, uint32_t ack)
{
        if ((int32_t)(ack - d->peer_ack) < 0 || (int32_t)(d->next_seq - 1 - ack) < 0)
                return false;
        d->peer_ack = ack;
        return true;
}

/* Limits a frame's fields before anything else looks at them. */
static bool frame_sane(const struct dto_ep *d, const struct dto_frame *f)
{
        const struct transport_caps *caps = d->ia->caps;

        if (f->nseg > DTO_MAX_SEGS || (f->nseg && !(f->flags & DTO_F_CMA)))
                return false;
        switch (f->op) {
        case DTO_OP_HELLO:
                return f->len == sizeof(uint64_t) && !f->nseg;
        case DTO_OP_CMA_OK:
                return f->len == 0 && f->status <= 1;
        case DTO_OP_SEND:
                return f->len <= caps->max_message_size;
        case DTO_OP_WRITE:
        case DTO_OP_READ_REQ:
                return f->len <= caps->max_rdma_size;
        case DTO_OP_ACK:
        case DTO_OP_READ_RESP:
                return !f->nseg && f->reserved == 0;
        case DTO_OP_BYE:
                return f->len == 0 && !f->nseg;
        case DTO_OP_CMP_SWAP:
        case DTO_OP_FETCH_ADD:
                return f->len == 2 * sizeof(uint64_t) && !f->nseg;
        case DTO_OP_EXPORT:
                return f->len == 0 && !f->nseg && f->seq < SHM_DIRECT_SLOTS;
        default:
                return false;
        }
}

static enum action on_header(struct dto_ep *d, struct dto_batch *b)
{
        int r;

        if (d->rx.op != DTO_OP_HELLO && d->rx.op != DTO_OP_CMA_OK && d->rx.op != DTO_OP_BYE &&
            d->rx.op != DTO_OP_EXPORT)
                d->work_frames++;
        switch (d->rx.op) {
        case DTO_OP_HELLO:
                /* Once per connection (dto_wire.h). */
                if (d->peer_probed)
                        return protocol_error(d, "a second HELLO");
                d->peer_probed = true;
                sink_set(d, &(struct iovec){ &d->rx_scratch, sizeof(d->rx_scratch) }, 1,
                         sizeof(d->rx_scratch));
                return ACT_NEXT;
        case DTO_OP_CMA_OK:
                /* An answer to the HELLO we sent (never on tcp), once. */
                if (!d->ch->same_host || !d->hello_sent || d->hello_owed || d->cma_answered)
                        return protocol_error(d, "CMA_OK without our HELLO");
                d->cma_from_peer = d->rx.status == 1 && d->ch->same_host;
                d->cma_answered = true;
                d->rx_state = DTO_RX_HEADER;
                return ACT_NEXT;
        case DTO_OP_ACK:
        case DTO_OP_READ_RESP:
                d->rx_state = DTO_RX_HEADER;
                return on_response(d, b);
        case DTO_OP_EXPORT:
                /* Only to a sender of DTO_F_MAP_OK: an end with a direct
                 * path, whose Writes carry the flag until it stops asking
                 * (below); EXPORTs answering Writes flagged before that
                 * may still come, and are let go.  A window we cannot map
                 * is no failure: the Writes to it go through the channel
                 * as before. */
                d->rx_state = DTO_RX_HEADER;
                if (!d->ch->direct)
                        return protocol_error(d, "an EXPORT we did not ask for");
                if (!d->direct_offer)
                        return ACT_NEXT;
                r = shm_direct_import(d->ch->direct, d->rx.rmr_context,
                                      &(struct shm_direct_export){ .slot = d->rx.seq,
                                                                   .state = d->rx.addr,
                                                                   .table_fd = (int)d->rx.status });
                /* Not allowed to take the peer's descriptors (another
                 * user, a sandbox, no pidfd_getfd): ask no more. */
                if (r == -EPERM || r == -EACCES || r == -ENOSYS)
                        d->direct_offer = false;
                return ACT_NEXT;
        case DTO_OP_BYE:
                /* The peer disconnects: nothing follows; datd's event
                 * ends the connection here. */
                d->rx_state = DTO_RX_HEADER;
                d->peer_bye = true;
                dto_ia_quiet(d);
                return ACT_STALL;
        default:
                break;
        }
        /* A request of the peer's; a CMA one with segments describes its
         * payload, which is then not inline. */
        if (!d->rx_seq_taken) {
                if (!next_peer_seq(d, d->rx.seq))
                        return protocol_error(d, "a request out of sequence");
                d->rx_seq_taken = true;
        }
        /* The data of an RDMA Read answered inline is read when its
         * response goes out: a request that changes memory waits until
         * then, so that the Read sees memory as it was when it came (as a
         * NIC reads it when it serves the Read). */
        if (d->read_data_pending && d->rx.op != DTO_OP_READ_REQ)
                return ACT_STALL;
        if ((d->rx.flags & DTO_F_CMA) && !d->cma_to_peer)
                return protocol_error(d, "cross-memory attach we never offered");
        d->rx_state = DTO_RX_HEADER;
        switch (d->rx.op) {
        case DTO_OP_SEND:
                return on_send(d, b);
        case DTO_OP_WRITE:
                return on_write(d, b);
        case DTO_OP_CMP_SWAP:
        case DTO_OP_FETCH_ADD:
                sink_set(d, &(struct iovec){ d->rx_operand, sizeof(d->rx_operand) }, 1,
                         sizeof(d->rx_operand));
                return ACT_NEXT;
        default:
                return on_read_req(d);
        }
}

/* The payload is in. */
static void on_payload_done(struct dto_ep *d, struct dto_batch *b)
{
        uint32_t slot;
        struct dto_req *r;

        d->rx_state = DTO_RX_HEADER;
        switch (d->rx.op) {
        case DTO_OP_HELLO:
                on_hello_payload(d);
                break;
        case DTO_OP_SEND:
                send_placed(d, b);
                break;
        case DTO_OP_WRITE:
                write_done(d, b);
                break;
        case DTO_OP_CMP_SWAP:
        case DTO_OP_FETCH_ADD:
                on_atomic_operands(d);
                break;
        case DTO_OP_READ_RESP:
                r = awaited(d, &slot);
                if (r)
                        request_done(d, r, DAT_DTO_SUCCESS, b);
                break;
        default:
                break;
        }
}

/* The stash is empty: borrows the channel's next unit of bytes (a whole
 * shm record that fits the stash) as the stash, instead of copying it in.
 * LEND_READ: the channel lends none, read it; LEND_EMPTY: nothing is
 * there.  On shm a small frame then costs no copy into the stash: its
 * header is copied out once (and checked in our copy), its payload
 * straight into place. */
enum lend_result { LEND_READ, LEND_EMPTY, LEND_LENT };

static enum lend_result lend(struct dto_ep *d)
{
        const void *p;
        size_t len = 1;

        if (!d->ch->ops->peek)
                return LEND_READ;
        p = d->ch->ops->peek(d->ch, sizeof(d->rx_stash), &len);
        if (!p)
                return len == 0 ? LEND_EMPTY : LEND_READ;
        d->rx_lent = p;
        d->rx_stash_len = (uint32_t)len;
        d->rx_stash_off = 0;
        return LEND_LENT;
}

/* Where the stash's next byte is: in the lent bytes or in our own. */
static inline const unsigned char *stash_at(const struct dto_ep *d)
{
        return (d->rx_lent ? d->rx_lent : d->rx_stash) + d->rx_stash_off;
}

/* Past k bytes of the stash, taken.  The lent bytes go back to the channel
 * once all are taken. */
static inline void stash_advance(struct dto_ep *d, size_t k)
{
        d->rx_stash_off += (uint32_t)k;
        /* Nothing behind the lent bytes: no more reads this poll, as after
         * a short read. */
        if (d->rx_lent && d->rx_stash_off == d->rx_stash_len) {
                d->rx_drained = !d->ch->ops->consume(d->ch, !d->rx_one_record);
                d->rx_lent = NULL;
        }
}

/* Moves up to max bytes of the stash into dst; returns how many. */
static size_t stash_take(struct dto_ep *d, void *dst, size_t max)
{
        size_t k = d->rx_stash_len - d->rx_stash_off;

        if (k > max)
                k = max;
        memcpy(dst, stash_at(d), k);
        stash_advance(d, k);
        return k;
}

/* Ends a loan before dto_rx_poll returns: what is left of the lent bytes
 * (a frame that waits, stalled) moves into the stash, and the channel gets
 * its unit back.  So nothing stays lent between polls: the ring's room is
 * never held by a stalled frame, and a channel that looks empty to the
 * progress thread's arming is empty. */
static void lend_end(struct dto_ep *d)
{
        size_t left;

        if (!d->rx_lent)
                return;
        left = d->rx_stash_len - d->rx_stash_off;
        memmove(d->rx_stash, d->rx_lent + d->rx_stash_off, left);
        d->rx_stash_len = (uint32_t)left;
        d->rx_stash_off = 0;
        d->rx_lent = NULL;
        (void)d->ch->ops->consume(d->ch, false);
}

/* The stash is empty: borrows the channel's bytes, or reads into the
 * stash alone (one buffer is the channel's cheapest read).  Returns the
 * bytes now in the stash, 0 (nothing there), or -EPIPE.  Inline, as
 * poll_frames is in dto_rx_poll: one frame fewer live across the read
 * (raw_syscall.h). */
static _always_inline_ ssize_t stash_fill(struct dto_ep *d)
{
        struct iovec s = { d->rx_stash, sizeof(d->rx_stash) };
        ssize_t r;

        if (d->rx_drained)
                return 0;
        switch (lend(d)) {
        case LEND_EMPTY:
                d->rx_drained = true;
                return 0;
        case LEND_LENT:
                return (ssize_t)d->rx_stash_len;
        case LEND_READ:
                break;
        }
        r = d->ch->ops->readv(d->ch, &s, 1);
        d->rx_drained = r >= 0 && (size_t)r < sizeof(d->rx_stash);
        if (r <= 0)
                return r;
        d->rx_stash_len = (uint32_t)r;
        d->rx_stash_off = 0;
        return r;
}

/* Reads from the channel into iov (n entries, n <= DTO_MAX_SEGS + 1),
 * through the stash: what an earlier read took beyond what it needed
 * comes first, and a read asks the channel for up to DTO_STASH more bytes
 * than wanted, so that a small frame's header and payload (and often the
 * next frame) come in one system call on TCP and one ring access on shm.
 * Returns bytes placed in iov, 0, or -EPIPE. */
static ssize_t rx_read(struct dto_ep *d, const struct iovec *iov, int n)
{
        struct iovec v[DTO_MAX_SEGS + 2];
        size_t want = 0, got = 0;
        ssize_t r;

        /* After a read of this poll that came back short (the channel was
         * empty), asking again costs a system call (TCP) that mostly finds
         * nothing -- a third of all reads while TCP streams -- on the way
         * to the completion just made: whatever came since is for the next
         * poll.  What the stash holds is served. */
        if (d->rx_drained && d->rx_stash_off >= d->rx_stash_len)
                return 0;
        for (int i = 0; i < n; i++)
                want += iov[i].iov_len;
        if (d->rx_stash_off >= d->rx_stash_len && want <= DTO_RX_SMALL) {
                /* A header or a small payload: fill the stash, then serve
                 * from it below. */
                r = stash_fill(d);
                if (r <= 0)
                        return r;
        }
        if (d->rx_stash_off < d->rx_stash_len) {
                for (int i = 0; i < n && d->rx_stash_off < d->rx_stash_len; i++) {
                        size_t k = stash_take(d, iov[i].iov_base, iov[i].iov_len);

                        got += k;
                        if (k < iov[i].iov_len)
                                break;
                }
                return (ssize_t)got;
        }
        memcpy(v, iov, (size_t)n * sizeof(*v));
        v[n] = (struct iovec){ d->rx_stash, sizeof(d->rx_stash) };
        r = d->ch->ops->readv(d->ch, v, n + 1);
        /* Less than asked for: the channel had no more just now. */
        d->rx_drained = r >= 0 && (size_t)r < want + sizeof(d->rx_stash);
        if (r <= 0)
                return r;
        if ((size_t)r > want) {
                d->rx_stash_len = (uint32_t)((size_t)r - want);
                d->rx_stash_off = 0;
                r = (ssize_t)want;
        }
        return r;
}

/* A frame's header straight from the stash into d->rx (filling an empty
 * stash first), when it holds the whole header: the usual case, a read
 * takes a small frame whole.  False: collect it in rx_hdr (read_fixed);
 * a channel that failed fails there too. */
static bool header_from_stash(struct dto_ep *d, bool *moved)
{
        if (d->rx_have != 0)
                return false;
        if (d->rx_stash_off >= d->rx_stash_len && stash_fill(d) <= 0)
                return false;
        if (d->rx_stash_len - d->rx_stash_off < sizeof(d->rx))
                return false;
        /* Of constant size, the copy is a few moves (stash_take's is a
         * call into the C library, on every frame). */
        memcpy(&d->rx, stash_at(d), sizeof(d->rx));
        stash_advance(d, sizeof(d->rx));
        *moved = true;
        return true;
}

/* What a read of the channel brought: true for bytes; false for none, or
 * for the end of the stream, which fails the connection. */
static inline bool read_brought(struct dto_ep *d, ssize_t n)
{
        if (n < 0) {
                d->peer_gone = true;
                dto_fail(d, "the peer closed the channel");
                return false;
        }
        return n > 0;
}

/* Reads into the header or segment buffer; false when nothing more came. */
static bool read_fixed(struct dto_ep *d, void *buf, uint32_t want, bool *moved)
{
        struct iovec iov = { (char *)buf + d->rx_have, want - d->rx_have };
        ssize_t n = rx_read(d, &iov, 1);

        if (n < 0) {
                d->peer_gone = true;
                dto_fail(d, "the peer closed the channel");
                return false;
        }
        if (n == 0)
                return false;
        *moved = true;
        d->rx_have += (uint32_t)n;
        return true;
}

/* Our request's local segments (an RDMA Read's, answered inline) still
 * registered, writable, for the response's length. */
static bool read_segments_there(struct dto_ep *d, const struct dto_req *r, uint32_t slot)
{
        const DAT_LMR_TRIPLET *t = &d->req_iov[(size_t)slot * d->req_iov_stride];
        uint64_t left = d->rx.len;
        struct lmr *lmr;

        for (uint32_t i = 0; i < r->nseg && left > 0; i++) {
                uint64_t len = t[i].segment_length < left ? t[i].segment_length : left;

                if (len > 0 && lmr_find_by_context(d->ia, t[i].lmr_context, t[i].virtual_address,
                                                   len, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                                                   &lmr) != DAT_SUCCESS)
                        return false;
                left -= len;
        }
        return true;
}

/* A context was withdrawn (an LMR freed, an RMR freed or unbound) since
 * the payload's sink was checked: is the memory still there?  True, and
 * the sink checked at the current count; false when it is gone, or went
 * before: the rest of the payload must not land (its pieces would go to
 * memory unmapped, or reused).
 *
 * The answer is the one a NIC gives to a target that went away in the
 * middle of a message, and that on_write and on_send give to one found
 * missing at the header: the Write's initiator gets
 * DAT_DTO_ERR_REMOTE_ACCESS, a Send's receive DAT_DTO_ERR_LOCAL_PROTECTION
 * (at once) and its initiator DAT_DTO_ERR_REMOTE_RESPONDER.  The response
 * waits until the rest of the payload is read and dropped
 * (drop_payload, rx_status): the initiator matches a response only to
 * a request whose frame it finished writing, and an error response ends
 * the connection once out (respond), so the frame must be whole first.
 * An RDMA Read's data for our own segments that went: the Read completes
 * DAT_DTO_ERR_LOCAL_PROTECTION, which ends the connection at once. */
static _noinline_ bool sink_still_there(struct dto_ep *d, struct dto_batch *b)
{
        /* Before the lookups, as at the first check. */
        uint64_t now = mem_ctx_withdrawal_count();
        struct iovec iov[DTO_MAX_SEGS];
        struct dto_req *r;
        uint64_t capacity;
        uint32_t slot = 0;
        int n;

        if (d->rx_status != DAT_DTO_SUCCESS)
                return false;   /* gone before: being dropped */
        switch (d->rx.op) {
        case DTO_OP_WRITE:
                if (target_ok(d, d->rx.rmr_context, d->rx.addr, d->rx.len,
                              DAT_MEM_PRIV_REMOTE_WRITE_FLAG))
                        break;
                d->rx_status = DAT_DTO_ERR_REMOTE_ACCESS;
                return false;
        case DTO_OP_SEND:
                if (recv_iovecs(d, iov, &n, &capacity) == DAT_DTO_SUCCESS)
                        break;
                recv_done(d, DAT_DTO_ERR_LOCAL_PROTECTION, b);
                d->rx_status = DAT_DTO_ERR_REMOTE_RESPONDER;
                return false;
        case DTO_OP_READ_RESP:
                r = awaited(d, &slot);
                if (r && read_segments_there(d, r, slot))
                        break;
                if (r)
                        request_done(d, r, DAT_DTO_ERR_LOCAL_PROTECTION, b);
                else
                        dto_fail(d, "an RDMA Read's segments went");
                return false;
        default:
                /* HELLO, an atomic's operands: our own memory. */
                break;
        }
        d->rx_sink_checked = now;
        return true;
}

/* The payload's sink went (sink_still_there): drops what the channel has
 * of the rest, and once all of it is read answers as rx_status says.
 * Every piece from now on comes here (rx_sink_checked never matches the
 * count again).  False when nothing more came.  Out of line: the payload
 * path pays one load and compare per piece. */
static _noinline_ bool drop_payload(struct dto_ep *d, bool *moved)
{
        size_t k;

        if (d->state != DTO_RUNNING) {
                *moved = true;  /* the connection failed */
                return true;
        }
        if (d->rx_sink_checked != UINT64_MAX) {
                d->rx_sink_checked = UINT64_MAX;
                d->rx_nsink = 0;
                if (d->ch->ops->expect)
                        d->ch->ops->expect(d->ch, 0);
        }
        if (d->rx_stash_off >= d->rx_stash_len && !read_brought(d, stash_fill(d)))
                return false;
        k = d->rx_stash_len - d->rx_stash_off;
        if (k > d->rx_left)
                k = (size_t)d->rx_left;
        stash_advance(d, k);
        d->rx_left -= k;
        *moved = true;
        if (d->rx_left == 0) {
                d->rx_state = DTO_RX_HEADER;
                respond(d, DTO_OP_ACK, d->rx.seq, d->rx_status, 0, 0, NULL);
                d->rx_status = DAT_DTO_SUCCESS;
        }
        return true;
}

static bool read_payload(struct dto_ep *d, bool *moved)
{
        struct iovec iov[DTO_MAX_SEGS + 1];
        int n = 0;
        ssize_t got;

        /* Most small payloads: one place to go, all of it read ahead with
         * the header (or lent with it): one copy. */
        if (d->rx_nsink == 1 && d->rx_left <= d->rx_sink[0].iov_len &&
            d->rx_stash_len - d->rx_stash_off >= d->rx_left) {
                size_t k = stash_take(d, d->rx_sink[0].iov_base, (size_t)d->rx_left);

                d->rx_sink[0].iov_base = (char *)d->rx_sink[0].iov_base + k;
                d->rx_sink[0].iov_len -= k;
                if (d->rx_sink[0].iov_len == 0)
                        d->rx_nsink = 0;
                d->rx_left = 0;
                *moved = true;
                return true;
        }
        {
                uint64_t left = d->rx_left;

                for (int i = 0; i < d->rx_nsink && left; i++) {
                        iov[n] = d->rx_sink[i];
                        if (iov[n].iov_len > left)
                                iov[n].iov_len = (size_t)left;
                        left -= iov[n].iov_len;
                        n++;
                }
        }
        if (d->ch->ops->expect)
                d->ch->ops->expect(d->ch, d->rx_left);
        got = rx_read(d, iov, n);
        if (d->ch->ops->expect && got > 0)
                d->ch->ops->expect(d->ch, d->rx_left - (uint64_t)got);
        if (!read_brought(d, got))
                return false;
        *moved = true;
        d->rx_left -= (uint64_t)got;
        {
                /* Advance the sink past what arrived. */
                size_t skip = (size_t)got;
                int i = 0;

                while (i < d->rx_nsink && skip >= d->rx_sink[i].iov_len)
                        skip -= d->rx_sink[i++].iov_len;
                memmove(d->rx_sink, d->rx_sink + i, (size_t)(d->rx_nsink - i) * sizeof(*iov));
                d->rx_nsink -= i;
                if (d->rx_nsink > 0) {
                        d->rx_sink[0].iov_base = (char *)d->rx_sink[0].iov_base + skip;
                        d->rx_sink[0].iov_len -= skip;
                }
        }
        return true;
}

/* Where a Send goes when the EP's next receive has one segment that holds
 * it (its LMR checked again, as recv_iovecs does): *to, else false. */
static bool next_recv_holds(struct dto_ep *d, struct iovec *to)
{
        const DAT_LMR_TRIPLET *t;
        struct lmr *lmr;

        if (d->ep->srq != DAT_HANDLE_NULL || d->rq_count == 0 || d->rx_recv_taken ||
            d->rnr_deadline_ns || d->rq[d->rq_head].nseg != 1)
                return false;
        t = d->rq[d->rq_head].iov;
        /* dat_ep_post_recv checked the LMR; no LMR (no memory context)
         * released since, it is still there. */
        if (t->segment_length < d->rx.len ||
            (t->segment_length > 0 && d->rq[d->rq_head].checked_at != mem_ctx_release_count() &&
             lmr_find_by_context(d->ia, t->lmr_context, t->virtual_address, t->segment_length,
                                 DAT_MEM_PRIV_LOCAL_WRITE_FLAG, &lmr) != DAT_SUCCESS))
                return false;
        *to = (struct iovec){ (void *)(uintptr_t)t->virtual_address, (size_t)d->rx.len };
        return true;
}

/* The frames most messages are, the header just taken and checked (with
 * its acknowledgement): a Send of the peer's for the EP's next receive,
 * of one segment that holds it, or an RDMA Write without immediate data,
 * the payload of either come whole with the header (one shm record, or
 * one read of the socket).  Placed here in one go, as on_header and
 * on_send / on_write would place them, without the parser's states and
 * its piecewise takes of the stash: every small message's latency.  False,
 * with nothing changed, for anything else or anything the checks refuse:
 * the parser then takes the frame (and stalls, or answers an error) as
 * ever. */
static bool small_request(struct dto_ep *d, struct dto_batch *b)
{
        struct iovec to;

        if (d->rx.seq != d->peer_seq + 1 || !payload_read_ahead(d) || d->read_data_pending)
                return false;
        switch (d->rx.op) {
        case DTO_OP_SEND:
                if ((d->rx.flags & ~(DTO_F_SOLICITED | DTO_F_ACK_LATER)) || !next_recv_holds(d, &to))
                        return false;
                (void)take_recv(d);
                break;
        case DTO_OP_WRITE:
                if ((d->rx.flags & ~(DTO_F_ACK_LATER | DTO_F_MAP_OK)) ||
                    !rdma_target(d, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &to))
                        return false;
                offer_window(d);
                break;
        default:
                return false;
        }
        d->work_frames++;
        d->peer_seq = d->rx.seq;
        if (d->rx.len > 0)
                (void)stash_take(d, to.iov_base, to.iov_len);
        if (d->rx.op == DTO_OP_SEND)
                send_placed(d, b);
        else
                write_done(d, b);
        return true;
}

static _always_inline_ bool poll_frames(struct dto_ep *d, struct dto_batch *b)
{
        bool moved = false;

        d->rx_drained = false;
        while (d->state == DTO_RUNNING && !d->rx_fatal && !d->peer_bye) {
                switch (d->rx_state) {
                case DTO_RX_HEADER:
                        /* What rx_read would find: nothing this poll. */
                        if (d->rx_drained && d->rx_stash_off >= d->rx_stash_len)
                                return moved;
                        if (!header_from_stash(d, &moved)) {
                                if (!read_fixed(d, d->rx_hdr, sizeof(d->rx_hdr), &moved))
                                        return moved;
                                if (d->rx_have < sizeof(d->rx_hdr))
                                        break;
                                memcpy(&d->rx, d->rx_hdr, sizeof(d->rx));
                                d->rx_have = 0;
                        }
                        d->rx_seq_taken = false;
                        {
                                uint32_t acked = d->peer_ack;

                                if (!frame_sane(d, &d->rx) || !take_ack(d, d->rx.ack)) {
                                        protocol_error(d, "a malformed frame");
                                        return true;
                                }
                                /* A response needs ours completed up to
                                 * it (awaited); the peer's request waits
                                 * for nothing of ours. */
                                if (d->hold_acks &&
                                    (d->rx.op == DTO_OP_SEND || d->rx.op == DTO_OP_WRITE))
                                        d->acks_held |= d->peer_ack != acked;
                                else
                                        dto_rx_apply_acks(d, b);
                        }
                        if (d->state == DTO_RUNNING && small_request(d, b))
                                break;
                        d->rx_state = d->rx.nseg ? DTO_RX_SEGS : DTO_RX_ACTION;
                        break;
                case DTO_RX_SEGS:
                        if (!read_fixed(d, d->rx_segs, d->rx.nseg * sizeof(struct dto_seg),
                                        &moved))
                                return moved;
                        if (d->rx_have < d->rx.nseg * sizeof(struct dto_seg))
                                break;
                        d->rx_have = 0;
                        d->rx_state = DTO_RX_ACTION;
                        break;
                case DTO_RX_ACTION:
                        switch (on_header(d, b)) {
                        case ACT_STALL:
                                if (d->peer_bye)
                                        return true;
                                d->rx_state = DTO_RX_ACTION;
                                return moved;
                        case ACT_FAIL:
                                return true;
                        case ACT_NEXT:
                                moved = true;
                                break;
                        }
                        /* A CMA request has no inline payload. */
                        if (d->rx_state == DTO_RX_PAYLOAD && (d->rx.flags & DTO_F_CMA))
                                d->rx_state = DTO_RX_HEADER;
                        break;
                case DTO_RX_PAYLOAD:
                        if (d->rx_left == 0) {
                                on_payload_done(d, b);
                                break;
                        }
                        /* The target memory may have gone since the
                         * last piece. */
                        if (_unlikely_(d->rx_sink_checked != mem_ctx_withdrawal_count()) &&
                            !sink_still_there(d, b)) {
                                if (!drop_payload(d, &moved))
                                        return moved;
                                break;
                        }
                        if (!read_payload(d, &moved))
                                return moved;
                        break;
                }
        }
        return moved;
}

bool dto_rx_poll(struct dto_ep *d, struct dto_batch *b)
{
        bool moved = poll_frames(d, b);

        lend_end(d);
        return moved;
}

bool dto_rx_retry_stalled(struct dto_ep *d, struct dto_batch *b)
{
        bool moved;

        if (!d->rnr_deadline_ns || d->rx_state != DTO_RX_ACTION)
                return false;
        moved = dto_rx_poll(d, b);
        if (d->state != DTO_RUNNING || !d->rnr_deadline_ns || d->rx_state != DTO_RX_ACTION ||
            dto_now_ns() < d->rnr_deadline_ns)
                return moved;
        /* DAT_DTO_ERR_RECEIVER_NOT_READY: no receive came in time. */
        stall_clear(d);
        respond(d, DTO_OP_ACK, d->rx.seq, DAT_DTO_ERR_RECEIVER_NOT_READY, 0, 0, NULL);
        d->rx_state = DTO_RX_HEADER;
        return true;
}
