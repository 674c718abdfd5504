/* What a data path writes to its channel (dto_engine.h): control frames
 * (HELLO, CMA_OK), responses to the peer's requests, then our requests in
 * post order.  One frame at a time: when the channel is full the frame
 * waits, half written, and the rest follows when there is room. */
#include "config.h"

#include "libdat/dto_engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "libdat/env_switch.h"
#include "libdat/ep.h"
#include "libdat/mem_ctx.h"

/* The peer may use cross-memory attach on us: whether this environment
 * lets it.  DATD_SHM_NO_CMA=1 turns it off (tests of the fallback). */
static bool cma_allowed(void)
{
        static int no_cma = -1;

        return !env_switch_on("DATD_SHM_NO_CMA", &no_cma);
}

void dto_probe_reset(struct dto_ep *d)
{
        /* tcp: no cross-memory attach to discover.  Not allowed here: the
         * answer is known (our HELLO would say "do not", and the peer
         * answer 0), and waiting for it would cost the first large
         * request a round trip. */
        bool none = !d->ch->same_host || !cma_allowed();

        d->hello_sent = none;
        d->hello_owed = false;
        d->cma_answered = none;
        d->cma_ok_owed = false;
        d->peer_probed = false;
        /* A value the peer can only read back with access to our memory. */
        d->probe_value = dto_now_ns() ^ (uint64_t)(uintptr_t)d ^ 0x9e3779b97f4a7c15ull;
}

bool dto_tx_respond(struct dto_ep *d, const struct dto_frame *f, const struct iovec *data,
                    bool fatal)
{
        struct dto_resp *r;

        if (d->resp_count == d->resp_cap) {
                uint32_t cap = d->resp_cap ? d->resp_cap * 2 : 64;
                struct dto_resp *ring;

                /* Bounded by what a well-behaved peer can have outstanding. */
                if (cap > 2 * 65536)
                        return false;
                ring = calloc(cap, sizeof(*ring));
                if (!ring)
                        return false;
                for (uint32_t i = 0; i < d->resp_count; i++)
                        ring[i] = d->resp[(d->resp_head + i) & (d->resp_cap - 1)];
                free(d->resp);
                d->resp = ring;
                d->resp_cap = cap;
                d->resp_head = 0;
        }
        r = &d->resp[(d->resp_head + d->resp_count) & (d->resp_cap - 1)];
        r->frame = *f;
        r->data = data ? *data : (struct iovec){ 0 };
        r->fatal = fatal;
        r->has_value = false;
        d->resp_count++;
        return true;
}

/* The response queued last. */
static struct dto_resp *resp_last(const struct dto_ep *d)
{
        return &d->resp[(d->resp_head + d->resp_count - 1) & (d->resp_cap - 1)];
}

bool dto_tx_respond_value(struct dto_ep *d, uint32_t seq, uint64_t value)
{
        struct dto_frame f = { .op = DTO_OP_READ_RESP, .seq = seq, .len = sizeof(value) };

        if (!dto_tx_respond(d, &f, NULL, false))
                return false;
        resp_last(d)->has_value = true;
        resp_last(d)->value = value;
        return true;
}

bool dto_tx_respond_read(struct dto_ep *d, uint32_t seq, const struct iovec *data, uint32_t ctx,
                         uint64_t addr, uint64_t checked_at)
{
        struct dto_frame f = { .op = DTO_OP_READ_RESP, .seq = seq, .len = data->iov_len };
        struct dto_resp *r;

        if (!dto_tx_respond(d, &f, data, false))
                return false;
        r = resp_last(d);
        r->data_ctx = ctx;
        r->data_addr = addr;
        r->checked_at = checked_at;
        return true;
}

/* Segments of a request as iovecs of this process, the first r->length
 * bytes of them (an RDMA Read may have room for more than it reads). */
static uint32_t req_iovecs(const struct dto_ep *d, uint32_t slot, const struct dto_req *r,
                           struct iovec *out)
{
        const DAT_LMR_TRIPLET *t = &d->req_iov[(size_t)slot * d->req_iov_stride];
        uint64_t left = r->length;
        uint32_t n = 0;

        for (uint32_t i = 0; i < r->nseg && left > 0; i++) {
                uint64_t len = t[i].segment_length < left ? t[i].segment_length : left;

                if (len == 0)
                        continue;
                out[n++] = (struct iovec){
                        .iov_base = (void *)(uintptr_t)t[i].virtual_address,
                        .iov_len = (size_t)len,
                };
                left -= len;
        }
        return n;
}

/* Whether a request's payload could go by cross-memory attach (see
 * start_request): atomics never do. */
static bool req_may_use_cma(const struct dto_req *r)
{
        return r->kind != DTO_REQ_ATOMIC && r->length >= DTO_CMA_THRESHOLD;
}

/* The request must wait for our probe: it could use cross-memory attach
 * and the peer has not answered whether it may (our HELLO goes first,
 * start_next).  Waiting one round trip once per connection keeps every
 * large payload on the one path it would take with the answer known. */
static bool req_waits_for_probe(const struct dto_ep *d, const struct dto_req *r)
{
        return d->ch->same_host && !d->cma_answered && req_may_use_cma(r);
}

/* BARRIER_FENCE: a request waits until every RDMA Read before it is done
 * (dat_ep_post_send(3DAT), "Barrier Fence"); and the probe above. */
static bool req_may_start(const struct dto_ep *d, const struct dto_req *r)
{
        if (req_waits_for_probe(d, r))
                return false;
        return !(r->flags & DAT_COMPLETION_BARRIER_FENCE_FLAG) || d->reads_in_flight == 0;
}

/* Our HELLO must go before this request (it waits for the answer). */
static bool probe_owed(const struct dto_ep *d, const struct dto_req *r)
{
        return !d->hello_sent && req_waits_for_probe(d, r);
}

/* Skips requests that never go out (binds, local errors). */
static void skip_unsent(struct dto_ep *d)
{
        while (d->tx_next != d->tail) {
                struct dto_req *r = dto_req_at(d, d->tx_next);

                if (!r->local)
                        break;
                d->tx_next++;
        }
}

/* The header of a Send's, Write's or Read's frame (not an atomic's, nor
 * cross-memory attach's part), its acknowledgement not set. */
static void request_frame(struct dto_ep *d, const struct dto_req *r, struct dto_frame *f)
{
        *f = (struct dto_frame){
                .op = r->kind,
                .seq = r->seq,
                .len = r->length,
                .addr = r->remote_addr,
                .rmr_context = r->rmr_context,
        };
        if (r->kind == DTO_REQ_SEND && (r->flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG))
                f->flags |= DTO_F_SOLICITED;
        if (r->ext == DTO_EXT_WRITE_IMM) {
                f->flags |= DTO_F_IMM;
                f->status = r->immed;
        }
        /* The next Writes may go straight into the target memory. */
        if (r->kind == DTO_REQ_WRITE && d->direct_offer)
                f->flags |= DTO_F_MAP_OK;
        /* Deep in a stream: its acknowledgement may wait (dto_wire.h). */
        if (d->acks_may_wait && r->seq - d->peer_ack >= DTO_ACK_LATER_DEPTH &&
            (r->kind == DTO_REQ_SEND || r->kind == DTO_REQ_WRITE)) {
                f->flags |= DTO_F_ACK_LATER;
                d->later_seq = r->seq;
                d->ask_due = true;
                d->ask_idle_ns = 0;
        }
}

/* Starts the request at tx_next: encodes its frame. */
static void start_request(struct dto_ep *d)
{
        uint32_t slot = dto_req_slot(d, d->tx_next);
        struct dto_req *r = &d->req[slot];
        /* Where the payload goes out from; CMA makes descriptors of it. */
        uint32_t n = req_iovecs(d, slot, r, d->tx_payload);

        request_frame(d, r, &d->tx_hdr);
        if (r->kind == DTO_REQ_ATOMIC) {
                /* The operands go inline; the old value comes back in a
                 * READ_RESP into the request's segments. */
                d->tx_hdr.op = r->ext == DTO_EXT_CMP_SWAP ? DTO_OP_CMP_SWAP : DTO_OP_FETCH_ADD;
                d->tx_hdr.len = sizeof(r->operand);
                r->cma = false;
                d->tx_nsegs = 0;
                d->tx_payload[0] = (struct iovec){ r->operand, sizeof(r->operand) };
                d->tx_npayload = 1;
                d->reads_in_flight++;
                d->tx_item = DTO_TX_REQ;
                d->tx_index = slot;
                return;
        }
        /* Large payloads go by cross-memory attach when the peer said it
         * can reach us: the target pulls a Send or Write, and pushes a
         * Read's data straight into these segments. */
        r->cma = d->cma_from_peer && r->length >= DTO_CMA_THRESHOLD;
        d->tx_nsegs = 0;
        d->tx_npayload = 0;
        if (r->cma) {
                d->tx_hdr.flags |= DTO_F_CMA;
                for (uint32_t i = 0; i < n; i++)
                        d->tx_segs[i] = (struct dto_seg){ (uintptr_t)d->tx_payload[i].iov_base,
                                                          d->tx_payload[i].iov_len };
                d->tx_nsegs = n;
                d->tx_hdr.nseg = (uint16_t)n;
        } else if (r->kind != DTO_REQ_READ) {
                d->tx_npayload = n;
        }
        if (r->kind == DTO_REQ_READ)
                d->reads_in_flight++;
        d->tx_item = DTO_TX_REQ;
        d->tx_index = slot;
}

static void start_response(struct dto_ep *d)
{
        struct dto_resp *r = &d->resp[d->resp_head];

        d->tx_hdr = r->frame;
        d->tx_nsegs = 0;
        d->tx_npayload = 0;
        if (r->has_value) {
                /* Copied out: the ring may move while the frame is half out. */
                d->tx_value = r->value;
                d->tx_payload[0] = (struct iovec){ &d->tx_value, sizeof(d->tx_value) };
                d->tx_npayload = 1;
        } else if (r->data.iov_len > 0) {
                d->tx_payload[0] = r->data;
                d->tx_npayload = 1;
        }
        d->tx_item = DTO_TX_RESP;
        d->tx_index = d->resp_head;
}

/* HELLO carries the probe (its address in the frame, the value inline);
 * CMA_OK answers the peer's. */
static void start_control(struct dto_ep *d)
{
        d->tx_nsegs = 0;
        d->tx_npayload = 0;
        if (d->hello_owed) {
                d->tx_hdr = (struct dto_frame){
                        .op = DTO_OP_HELLO,
                        .len = sizeof(d->probe_value),
                        .addr = cma_allowed() ? (uintptr_t)&d->probe_value : 0,
                };
                d->tx_payload[0] = (struct iovec){ &d->probe_value, sizeof(d->probe_value) };
                d->tx_npayload = 1;
        } else {
                d->tx_hdr = (struct dto_frame){ .op = DTO_OP_CMA_OK, .status = d->cma_ok_value };
        }
        d->tx_item = DTO_TX_CTRL;
}

/* Picks the next frame; false when there is none that may go now. */
static bool start_next(struct dto_ep *d)
{
        if (d->hello_owed || d->cma_ok_owed) {
                start_control(d);
        } else if (d->resp_count > 0) {
                start_response(d);
        } else {
                const struct dto_req *r;

                skip_unsent(d);
                if (d->tx_next == d->tail)
                        return false;
                r = dto_req_at(d, d->tx_next);
                if (probe_owed(d, r)) {
                        d->hello_owed = true;
                        start_control(d);
                } else if (req_may_start(d, r)) {
                        start_request(d);
                } else {
                        return false;
                }
        }
        /* Every frame carries our cumulative acknowledgement. */
        d->tx_hdr.ack = d->ack_owed;
        d->ack_sent = d->ack_owed;
        d->tx_off = 0;
        d->tx_total = sizeof(d->tx_hdr) + d->tx_nsegs * sizeof(struct dto_seg);
        for (uint32_t i = 0; i < d->tx_npayload; i++)
                d->tx_total += d->tx_payload[i].iov_len;
        return true;
}

bool dto_tx_pending_frames(const struct dto_ep *d)
{
        if (d->state != DTO_RUNNING)
                return false;
        if (d->tx_item != DTO_TX_NONE || d->hello_owed || d->cma_ok_owed || d->resp_count > 0)
                return true;
        for (uint32_t i = d->tx_next; i != d->tail; i++) {
                const struct dto_req *r = dto_req_at(d, i);

                if (!r->local)
                        return probe_owed(d, r) || req_may_start(d, r);
        }
        return false;
}

/* The part of the current frame not written yet, as iovecs. */
static int remaining_iov(const struct dto_ep *d, struct iovec *iov)
{
        struct iovec all[2 + DTO_MAX_SEGS];
        uint64_t skip = d->tx_off;
        int n = 0, out = 0;

        /* A frame that starts, inline (the usual one): as it is. */
        if (skip == 0 && d->tx_nsegs == 0) {
                iov[0] = (struct iovec){ (void *)&d->tx_hdr, sizeof(d->tx_hdr) };
                for (uint32_t i = 0; i < d->tx_npayload; i++)
                        iov[i + 1] = d->tx_payload[i];
                return (int)d->tx_npayload + 1;
        }
        all[n++] = (struct iovec){ (void *)&d->tx_hdr, sizeof(d->tx_hdr) };
        if (d->tx_nsegs)
                all[n++] = (struct iovec){ (void *)d->tx_segs,
                                           d->tx_nsegs * sizeof(struct dto_seg) };
        for (uint32_t i = 0; i < d->tx_npayload; i++)
                all[n++] = d->tx_payload[i];
        for (int i = 0; i < n; i++) {
                if (skip >= all[i].iov_len) {
                        skip -= all[i].iov_len;
                        continue;
                }
                iov[out].iov_base = (char *)all[i].iov_base + skip;
                iov[out].iov_len = all[i].iov_len - skip;
                skip = 0;
                out++;
        }
        return out;
}

/* A context was withdrawn since the RDMA Read response being written had
 * its source checked: is the memory still there?  True, checked at the
 * current count.  Gone, with none of the frame out yet: the response
 * becomes DAT_DTO_ERR_REMOTE_ACCESS (what the target answers a Read of
 * memory it does not have, on_read_req), which ends the connection once
 * out, like every error response.  Gone in the middle of the frame: what
 * went cannot be recalled, and the peer expects the rest; the connection
 * fails (its Read flushes).  False then.  Out of line: the write path
 * pays one load and compare per write. */
static _noinline_ bool read_source_still_there(struct dto_ep *d)
{
        /* Before the lookup, as at the first check. */
        uint64_t now = mem_ctx_withdrawal_count();
        /* The ring's head (frame_done): tx_index is not kept when the
         * ring grows under a frame half out (dto_tx_respond). */
        struct dto_resp *r = &d->resp[d->resp_head];

        if (dto_rdma_target_ok(d, r->data_ctx, r->data_addr, r->data.iov_len,
                               DAT_MEM_PRIV_REMOTE_READ_FLAG)) {
                r->checked_at = now;
                return true;
        }
        if (d->tx_off > 0) {
                dto_fail(d, "the memory an RDMA Read reads went while it was sent");
                return false;
        }
        r->frame.status = DAT_DTO_ERR_REMOTE_ACCESS;
        r->frame.len = 0;
        r->fatal = true;
        d->tx_hdr.status = DAT_DTO_ERR_REMOTE_ACCESS;
        d->tx_hdr.len = 0;
        d->tx_npayload = 0;
        d->tx_total = sizeof(d->tx_hdr);
        /* The frame is the error now; data.iov_len stays, for frame_done's
         * count of Read data pending. */
        return true;
}

/* The frame being written is an RDMA Read's inline data, read from our
 * memory now: still there? */
static inline bool tx_source_ok(struct dto_ep *d)
{
        const struct dto_resp *r;

        if (d->tx_item != DTO_TX_RESP)
                return true;
        r = &d->resp[d->resp_head];     /* as in read_source_still_there */
        return r->data.iov_len == 0 || r->frame.len == 0 ||
               r->checked_at == mem_ctx_withdrawal_count() || read_source_still_there(d);
}

/* The current frame is out. */
static void frame_done(struct dto_ep *d)
{
        if (d->tx_item == DTO_TX_REQ || d->tx_item == DTO_TX_RESP)
                d->work_frames++;
        switch (d->tx_item) {
        case DTO_TX_REQ:
                d->req[d->tx_index].sent = true;
                d->tx_next++;
                break;
        case DTO_TX_RESP: {
                bool fatal = d->resp[d->resp_head].fatal;

                if (d->resp[d->resp_head].data.iov_len && d->read_data_pending)
                        d->read_data_pending--;

                d->resp_head = (d->resp_head + 1) & (d->resp_cap - 1);
                d->resp_count--;
                if (fatal)
                        d->fail_after_tx = true;
                break;
        }
        case DTO_TX_CTRL:
                /* The same test as start_control's: what this frame was. */
                if (d->hello_owed) {
                        d->hello_owed = false;
                        d->hello_sent = true;
                } else {
                        d->cma_ok_owed = false;
                }
                break;
        case DTO_TX_NONE:
                break;
        }
        d->tx_item = DTO_TX_NONE;
}

bool dto_tx_flush_frames(struct dto_ep *d)
{
        bool moved = false;

        while (d->state == DTO_RUNNING && !d->fail_after_tx) {
                struct iovec iov[2 + DTO_MAX_SEGS];
                ssize_t n;

                if (d->tx_item == DTO_TX_NONE && !start_next(d))
                        break;
                if (!tx_source_ok(d))
                        break;
                n = d->ch->ops->writev(d->ch, iov, remaining_iov(d, iov));
                if (n < 0 && d->peer_bye)
                        /* The peer disconnected: what we had for it
                         * flushes when datd says so. */
                        break;
                if (n < 0) {
                        d->peer_gone = true;
                        dto_fail(d, "the channel to the peer is gone");
                        break;
                }
                if (n == 0)
                        break;
                moved = true;
                d->tx_off += (uint64_t)n;
                d->bytes_sent += (uint64_t)n;
                if (d->tx_off == d->tx_total)
                        frame_done(d);
        }
        /* An error response is out: like a reliable connection on an RDMA
         * NIC, the error ends the connection on both sides. */
        if (d->fail_after_tx && d->state == DTO_RUNNING)
                dto_fail(d, "a request of the peer failed");
        return moved;
}

/* Whether the request just queued goes out as it is, in one write: a Send
 * or Write with nothing before it to write, small enough to go inline
 * (no probe of cross-memory attach to wait for), not held by a fence. */
static bool postable_at_once(const struct dto_ep *d, const struct dto_req *r)
{
        return d->tx_item == DTO_TX_NONE && d->tx_next + 1 == d->tail && d->resp_count == 0 &&
               !d->hello_owed && !d->cma_ok_owed && !d->fail_after_tx && !r->local &&
               (r->kind == DTO_REQ_SEND || r->kind == DTO_REQ_WRITE) &&
               r->length < DTO_CMA_THRESHOLD && req_may_start(d, r);
}

void dto_tx_post(struct dto_ep *d)
{
        uint32_t slot = dto_req_slot(d, d->tail - 1);
        struct dto_req *r = &d->req[slot];
        struct iovec iov[1 + DTO_MAX_SEGS];
        struct dto_frame f;
        unsigned char *p;
        uint64_t total;
        uint32_t nseg;
        ssize_t n;

        if (!postable_at_once(d, r)) {
                dto_tx_flush(d);
                return;
        }
        /* What start_next and the flush would do for it, without their
         * choosing among frames and their bookkeeping of a frame that
         * goes in pieces: the latency of every small message. */
        request_frame(d, r, &f);
        f.ack = d->ack_owed;
        total = sizeof(f) + r->length;
        if (d->ch->ops->reserve && (p = d->ch->ops->reserve(d->ch, (size_t)total))) {
                /* Straight into the ring: no iovec to walk, and one
                 * segment (the usual post) copied as it is. */
                const DAT_LMR_TRIPLET *t = &d->req_iov[(size_t)slot * d->req_iov_stride];

                memcpy(p, &f, sizeof(f));
                if (r->nseg == 1) {
                        if (r->length)
                                memcpy(p + sizeof(f), (const void *)(uintptr_t)t->virtual_address,
                                       (size_t)r->length);
                } else {
                        nseg = req_iovecs(d, slot, r, iov + 1);
                        p += sizeof(f);
                        for (uint32_t i = 1; i <= nseg; i++) {
                                memcpy(p, iov[i].iov_base, iov[i].iov_len);
                                p += iov[i].iov_len;
                        }
                }
                d->ch->ops->commit(d->ch, (size_t)total);
                n = (ssize_t)total;
        } else {
                iov[0] = (struct iovec){ &f, sizeof(f) };
                nseg = req_iovecs(d, slot, r, iov + 1);
                n = d->ch->ops->writev(d->ch, iov, 1 + (int)nseg);
        }
        if (n != (ssize_t)total) {
                /* Full, in part or failed: the flush takes the frame over
                 * from where it is, as if it had started it (the same
                 * frame: nothing changed in between). */
                start_next(d);
                if (n > 0) {
                        d->tx_off = (uint64_t)n;
                        d->bytes_sent += (uint64_t)n;
                }
                dto_tx_flush_frames(d);
                return;
        }
        d->ack_sent = f.ack;
        d->bytes_sent += total;
        r->cma = false;
        d->tx_item = DTO_TX_REQ;
        d->tx_index = slot;
        frame_done(d);
}

void dto_tx_bye(struct dto_ep *d)
{
        struct dto_frame bye = { .op = DTO_OP_BYE, .ack = d->ack_owed };
        struct iovec iov = { &bye, sizeof(bye) };

        /* An orderly end wakes the peer for nothing: the DISCONNECT datd
         * gets next makes its event for the peer, whose stop reads the
         * BYE (and a peer that said BYE itself has stopped).  Woken by the
         * BYE and again by the end of the stream, each side's progress
         * thread cost a wake-up per connection. */
        if (d->ch->ops->quiet)
                d->ch->ops->quiet(d->ch, true);
        /* Best effort: behind a frame half written there is no room for it,
         * and the peer then takes the end of the stream for a failure. */
        if (d->tx_item == DTO_TX_NONE && !d->peer_bye && !d->peer_gone)
                d->ch->graceful_end = d->ch->ops->writev(d->ch, &iov, 1) == (ssize_t)sizeof(bye);
        else
                d->ch->graceful_end = d->peer_bye;
        /* A failure the peer must see at once. */
        if (!d->ch->graceful_end && d->ch->ops->quiet)
                d->ch->ops->quiet(d->ch, false);
        d->ch->ops->shutdown(d->ch);
}

/* Unacknowledged requests of the peer after which an acknowledgement goes
 * out on its own, whoever polls: the peer's window stays open. */
#define ACK_BACKLOG_MAX 16

void dto_tx_ack(struct dto_ep *d, bool force)
{
        struct dto_frame f = { .op = DTO_OP_ACK, .status = DAT_DTO_SUCCESS };
        uint32_t behind = d->ack_owed - d->ack_sent;

        if (behind == 0 || d->state != DTO_RUNNING)
                return;
        if (!force && behind < ACK_BACKLOG_MAX)
                return;
        /* Already on its way: a response not started yet (an RDMA Read's
         * data, another acknowledgement) carries the latest when it
         * starts, as every frame does (the one going out now carries what
         * was owed when it started). */
        if (d->resp_count > (d->tx_item == DTO_TX_RESP ? 1u : 0u))
                return;
        if (!dto_tx_respond(d, &f, NULL, false))
                dto_fail(d, "the peer does not read its responses");
}

bool dto_tx_ask_ack(struct dto_ep *d, bool sleeping)
{
        struct dto_frame f = { .op = DTO_OP_ACK, .status = DAT_DTO_SUCCESS };

        if (d->state != DTO_RUNNING || !d->ask_due)
                return false;
        /* Acknowledged meanwhile: nothing to ask for. */
        if ((int32_t)(d->later_seq - d->peer_ack) <= 0) {
                d->ask_due = false;
                return false;
        }
        if (!dto_ack_wanted(d))
                return false;
        if (!sleeping) {
                uint64_t now;

                /* A batch or more ahead of the peer's acknowledgement: it
                 * owes one on its own once it placed them (or one is on
                 * its way, and then we look again). */
                if (d->later_seq - d->peer_ack >= DTO_ACK_LATER_BATCH)
                        return false;
                now = dto_now_ns();

                if (d->ask_idle_ns == 0)
                        d->ask_idle_ns = now;
                if (now - d->ask_idle_ns < DTO_ASK_AFTER_NS && d->ch->ops->unsent(d->ch) != 0)
                        return false;
        }
        d->ask_due = false;
        /* A lone ACK (the receiver takes it for a peer that waits). */
        if (!dto_tx_respond(d, &f, NULL, false)) {
                dto_fail(d, "the peer does not read its responses");
                return false;
        }
        return dto_tx_flush(d);
}
