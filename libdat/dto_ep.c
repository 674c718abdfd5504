/* An EP's data path (dto_engine.h): made on first use, started at
 * ESTABLISHED on the channel datd offered, stopped when the connection
 * ends (everything outstanding flushes), freed with the EP. */
#include "config.h"

#include "libdat/dto_engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libdat/conn.h"
#include "libdat/ep.h"
#include "libdat/ep_events.h"
#include "libdat/ia.h"
#include "libdat/lmr.h"
#include "libdat/pz.h"
#include "libdat/rmr.h"
#include "libdat/shm_direct.h"
#include "libdat/srq.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dto_wire.h frames are little endian on the wire; this host is not"
#endif

uint64_t dto_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct dto_ep *dto_ep_get(struct ep *ep)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);
        DAT_EP_ATTR attr;
        bool fitted;

        if (!d) {
                struct dto_ep *fresh = calloc(1, sizeof(*fresh));

                if (!fresh)
                        return NULL;
                dat_lock_init(&fresh->lock);
                fresh->ep = ep;
                fresh->ia = ep_ia(ep);
                fresh->state = DTO_IDLE;
                fresh->next_seq = 1;
                dat_object_lock();
                if (!ep->dto) {
                        __atomic_store_n(&ep->dto, fresh, __ATOMIC_RELEASE);
                        fresh = NULL;
                }
                d = ep->dto;
                dat_object_unlock();
                /* Another thread made it first. */
                free(fresh);
        }
        /* Made, or dat_ep_modify changed the attributes (dto_queues.c). */
        if (_likely_(dto_ep_fits(d, &ep->attr)))
                return d;
        dat_object_lock();
        attr = ep->attr;
        dat_object_unlock();
        dat_lock(&d->lock);
        fitted = dto_queues_fit(d, &attr) == 0;
        dat_unlock(&d->lock);
        return fitted ? d : NULL;
}

/* An event of zeroes.  Not an initializer: zeroing the whole 120 bytes at
 * once compiles to a rep stos, slow to start, and two completions are on
 * every message's path. */
static inline void event_clear(DAT_EVENT *e)
{
        e->event_number = 0;
        e->evd_handle = DAT_HANDLE_NULL;
        memset(&e->event_data, 0, sizeof(e->event_data));
        memset(e->event_extension_data, 0, sizeof(e->event_extension_data));
}

static void post_event(struct dto_evd_cache *c, DAT_EVD_HANDLE evd_handle, const DAT_EVENT *event,
                       bool notify, struct dto_batch *b)
{
        struct evd *evd = c->evd;

        if (_unlikely_(!evd || c->handle != evd_handle)) {
                evd = c->evd = evd_lookup(evd_handle);
                c->handle = evd_handle;
        }
        if (evd)
                (void)evd_post_deferred(evd, event, notify, &b->deferred);
}

static void complete_recv(struct dto_ep *d, const struct dto_recv *r, bool srq_buffer,
                          DAT_DTO_COMPLETION_STATUS status, uint64_t length, bool notify,
                          bool has_immed, uint32_t immed, struct dto_batch *b);

static DAT_DTOS dtos_of(uint8_t kind)
{
        switch (kind) {
        case DTO_REQ_WRITE:
                return DAT_DTO_RDMA_WRITE;
        case DTO_REQ_READ:
        case DTO_REQ_ATOMIC:
                return DAT_DTO_RDMA_READ;
        case DTO_REQ_BIND:
                return DAT_DTO_BIND_MW;
        default:
                return DAT_DTO_SEND;
        }
}

/* One request's completion event (dat_ep_post_send(3DAT) and friends:
 * DAT_COMPLETION_SUPPRESS_FLAG drops a successful one,
 * DAT_COMPLETION_UNSIGNALLED_FLAG queues it without notification). */
static void complete_request(struct dto_ep *d, struct dto_req *r, struct dto_batch *b)
{
        DAT_EVENT event;
        bool ok = r->status == DAT_DTO_SUCCESS;

        event_clear(&event);
        if (r->kind == DTO_REQ_BIND) {
                struct rmr *rmr = rmr_lookup(r->rmr);

                if (rmr)
                        rmr_bind_complete(rmr, ok);
                event.event_number = DAT_RMR_BIND_COMPLETION_EVENT;
                event.event_data.rmr_completion_event_data = (DAT_RMR_BIND_COMPLETION_EVENT_DATA){
                        .rmr_handle = r->rmr,
                        .user_cookie = r->cookie,
                        .status = r->status,
                };
        } else {
                event.event_number = DAT_DTO_COMPLETION_EVENT;
                event.event_data.dto_completion_event_data = (DAT_DTO_COMPLETION_EVENT_DATA){
                        .ep_handle = d->ep->obj.handle,
                        .user_cookie = r->cookie,
                        .status = r->status,
                        .transfered_length = ok ? (DAT_SEG_LENGTH)r->length : 0,
                        .operation = dtos_of(r->kind),
                };
                if (r->ext)
                        dto_ext_event(&event, (enum dto_ext_kind)r->ext, false, 0);
        }
        __atomic_sub_fetch(&d->ep->request_outstanding, 1, __ATOMIC_RELAXED);
        if (ok && (r->flags & DAT_COMPLETION_SUPPRESS_FLAG))
                return;
        post_event(&d->request_evd, d->ep->request_evd, &event, !(r->flags & DAT_COMPLETION_UNSIGNALLED_FLAG), b);
}

void dto_deliver_requests(struct dto_ep *d, struct dto_batch *b)
{
        while (d->head != d->tail && dto_req_at(d, d->head)->done) {
                complete_request(d, dto_req_at(d, d->head), b);
                d->head++;
        }
        /* dat_ep_disconnect(3DAT): a graceful disconnect proceeds once the
         * requests outstanding have completed. */
        if (d->graceful_pending && d->head == d->tail) {
                d->graceful_pending = false;
                d->graceful_done = true;
        }
}

void dto_complete_recv(struct dto_ep *d, const struct dto_recv *r, bool srq_buffer,
                       DAT_DTO_COMPLETION_STATUS status, uint64_t length, bool notify,
                       struct dto_batch *b)
{
        complete_recv(d, r, srq_buffer, status, length, notify, false, 0, b);
}

void dto_complete_recv_immed(struct dto_ep *d, const struct dto_recv *r, bool srq_buffer,
                             DAT_DTO_COMPLETION_STATUS status, uint64_t length, bool notify,
                             uint32_t immed, struct dto_batch *b)
{
        complete_recv(d, r, srq_buffer, status, length, notify, true, immed, b);
}

static void complete_recv(struct dto_ep *d, const struct dto_recv *r, bool srq_buffer,
                          DAT_DTO_COMPLETION_STATUS status, uint64_t length, bool notify,
                          bool has_immed, uint32_t immed, struct dto_batch *b)
{
        DAT_EVENT event;

        event_clear(&event);
        event.event_number = DAT_DTO_COMPLETION_EVENT;
        event.event_data.dto_completion_event_data = (DAT_DTO_COMPLETION_EVENT_DATA){
                .ep_handle = d->ep->obj.handle,
                .user_cookie = r->cookie,
                .status = status,
                .transfered_length = status == DAT_DTO_SUCCESS ? (DAT_SEG_LENGTH)length : 0,
                .operation = DAT_DTO_RECEIVE,
        };
        if (has_immed)
                dto_ext_event(&event, DTO_EXT_WRITE_IMM, true, immed);
        __atomic_sub_fetch(&d->ep->recv_outstanding, 1, __ATOMIC_RELAXED);
        if (srq_buffer) {
                struct srq *srq = srq_lookup(d->ep->srq);

                if (srq) {
                        srq_buffer_completed(srq);
                        __atomic_add_fetch(&d->srq_unreaped, 1, __ATOMIC_RELAXED);
                }
        }
        post_event(&d->recv_evd, d->ep->recv_evd, &event, notify || status != DAT_DTO_SUCCESS, b);
}

/* Every DTO outstanding completes DAT_DTO_ERR_FLUSHED (requests already
 * done keep their status), in order: requests, the receive a stalled or
 * half-read Send holds, the posted receives. */
static void flush_all(struct dto_ep *d, struct dto_batch *b)
{
        for (uint32_t i = d->head; i != d->tail; i++) {
                struct dto_req *r = dto_req_at(d, i);

                if (!r->done) {
                        r->done = true;
                        r->status = DAT_DTO_ERR_FLUSHED;
                }
        }
        d->tx_next = d->resp_next = d->tail;
        d->reads_in_flight = 0;
        d->acks_held = false;
        dto_deliver_requests(d, b);
        if (d->rx_recv_taken) {
                dto_complete_recv(d, &d->rx_recv, d->rx_recv_srq, DAT_DTO_ERR_FLUSHED, 0, true, b);
                d->rx_recv_taken = false;
        }
        while (d->rq_count > 0) {
                dto_complete_recv(d, &d->rq[d->rq_head], false, DAT_DTO_ERR_FLUSHED, 0, true, b);
                d->rq_head = (d->rq_head + 1) & d->recv_mask;
                d->rq_count--;
        }
        d->resp_count = 0;
        d->read_data_pending = 0;
        d->tx_item = DTO_TX_NONE;
        d->rx_state = DTO_RX_HEADER;
        d->rx_status = DAT_DTO_SUCCESS; /* no payload being dropped */
        d->rx_have = 0;
        d->rx_stash_len = d->rx_stash_off = 0;
        if (d->rnr_deadline_ns) {
                d->rnr_deadline_ns = 0;
                __atomic_sub_fetch(&d->ia->dto.n_stalled, 1, __ATOMIC_RELAXED);
        }
        d->fail_after_tx = false;
        d->graceful_pending = false;
}

/* The connection is over: the peer's direct Writes into what we exported
 * stop before the first completion of its end (a flushed receive) can
 * reach an EVD and tell the consumer it may reuse its buffers
 * (shm_direct.h).  Under lock. */
static void end_direct_writes(struct dto_ep *d)
{
        if (d->ch)
                shm_direct_end(d->ch->direct);
}

void dto_fail(struct dto_ep *d, const char *why)
{
        if (d->state != DTO_RUNNING)
                return;
        end_direct_writes(d);
        dat_trace("EP %p, connection %u: data path failed: %s", d->ep->obj.handle, d->conn_id,
                  why);
        /* The batch cannot be returned from here: completions go into a
         * local one whose CNO notices run when the caller's does.  What
         * the peer acknowledged succeeded, held back or not. */
        dto_take_held_acks(d, &d->fail_batch);
        flush_all(d, &d->fail_batch);
        d->state = DTO_DEAD;
        d->broken = true;
        d->fail_pending = true;
}

/* Destroys the channel of a data path that no longer runs.  No lock held. */
static void teardown_channel(struct dto_ep *d)
{
        struct channel *ch, *old = NULL;

        dto_ia_remove_nowait(d);
        dat_lock(&d->lock);
        ch = d->state == DTO_RUNNING ? NULL : d->ch;
        if (ch) {
                d->ch = NULL;
                /* A socket closed with the peer's bytes unread is reset,
                 * and the reset can destroy what the peer has not read of
                 * ours yet (an error response): it only stops writing now
                 * and is closed when the EP is reset, freed or connects
                 * again. */
                if (ch->lingers) {
                        ch->ops->shutdown(ch);
                        old = d->lingering;
                        d->lingering = ch;
                        ch = NULL;
                }
        }
        dat_unlock(&d->lock);
        channel_destroy(ch);
        dto_ia_close_channel(d->ia, old);
}

/* Closes a channel kept after the connection ended (teardown_channel),
 * after the peer's end of stream if it has not come yet
 * (dto_ia_close_channel). */
static void drop_lingering(struct dto_ep *d)
{
        struct channel *ch;

        dat_lock(&d->lock);
        ch = d->lingering;
        d->lingering = NULL;
        dat_unlock(&d->lock);
        dto_ia_close_channel(d->ia, ch);
}

/* An EP on an SRQ whose connection ended takes no more of its buffers: as
 * a QP on an SRQ reports its last WQE reached, the IA's async EVD gets
 * DAT_ASYNC_ERROR_EP_BROKEN naming the EP (DAPL's programs, dtestsrq, wait
 * for it before freeing the EP).  No lock held. */
static void last_receive_done(struct dto_ep *d)
{
        if (d->ep->srq != DAT_HANDLE_NULL)
                ia_post_async(d->ia, DAT_ASYNC_ERROR_EP_BROKEN, d->ep->obj.handle, 0);
}

bool dto_needs_finish(const struct dto_ep *d)
{
        return d->fail_pending || d->graceful_done || d->fail_batch.deferred.n_notice ||
               d->fail_batch.deferred.n_overflowed;
}

void dto_finish(struct dto_ep *d, struct dto_batch *b)
{
        struct dto_batch fb;
        bool failed, graceful;

        if (b)
                evd_deferred_run(&b->deferred);
        dat_lock(&d->lock);
        fb = d->fail_batch;
        memset(&d->fail_batch, 0, sizeof(d->fail_batch));
        failed = d->fail_pending;
        graceful = d->graceful_done;
        d->fail_pending = d->graceful_done = false;
        dat_unlock(&d->lock);
        evd_deferred_run(&fb.deferred);
        if (failed) {
                teardown_channel(d);
                last_receive_done(d);
                conn_ep_data_failed(d->ep);
        } else if (graceful) {
                conn_finish_disconnect(d->ep);
        }
}

bool dto_progress_locked(struct dto_ep *d, struct dto_batch *b)
{
        bool moved = false;

        if (d->state != DTO_RUNNING)
                return false;
        bool rx_moved = false;
        uint32_t owed_before = d->ack_owed;

        /* What the last step held back, now. */
        dto_take_held_acks(d, b);
        moved |= dto_tx_flush(d);
        if (d->state == DTO_RUNNING)
                rx_moved = dto_rx_poll(d, b);
        if (d->state == DTO_RUNNING && d->rnr_deadline_ns)
                rx_moved |= dto_rx_retry_stalled(d, b);
        /* Acknowledge on our own only when nothing else will carry it soon:
         * a step that placed the peer's requests is usually followed by
         * the application's answer, which carries it for free.  Not so
         * after a step that placed none (it took responses only: an
         * application whose own request completed there may go away, and
         * what it owed from an earlier step would wait for its progress
         * thread, a millisecond or more), nor after the peer's lone
         * acknowledgement (it has nothing to send: it waits).  What the
         * peer said may wait (dto_ack_deferred) waits in a step that
         * found nothing at all: the peer asks for it when it waits. */
        if (d->state == DTO_RUNNING)
                dto_tx_ack(d, d->peer_idle ||
                                      (d->ack_owed == owed_before && (rx_moved || !dto_ack_deferred(d))));
        if (d->state == DTO_RUNNING)
                moved |= dto_tx_flush(d);
        /* Our side of it: a step that found nothing, with our last
         * flagged requests unacknowledged. */
        if (_unlikely_(d->ask_due) && !moved && !rx_moved)
                moved |= dto_tx_ask_ack(d, false);
        /* A request that waited for Read data to go out may go on now
         * (nothing else would wake us for it: its bytes were read), and
         * may stall again behind the next Read's data, which the flush may
         * send at once: go on until it waits for something else. */
        for (unsigned i = 0; i < 64 && d->state == DTO_RUNNING && d->rx_state == DTO_RX_ACTION &&
                             !d->rnr_deadline_ns && !d->read_data_pending; i++) {
                rx_moved |= dto_rx_poll(d, b);
                if (d->state == DTO_RUNNING)
                        moved |= dto_tx_flush(d);
        }
        return moved || rx_moved;
}

/* ---- the connection code's side ----------------------------------------- */

void dto_channel_offer(struct ia *ia, const struct datp_ev_data_channel *ev, int *fds,
                       unsigned nfds)
{
        struct channel *ch = NULL, *old = NULL;
        struct dto_ep *d;
        struct ep *ep;
        int r;

        dat_object_lock();
        ep = ep_lookup((DAT_EP_HANDLE)(uintptr_t)ev->ep_handle);
        if (ep && (ep->obj.parent != &ia->obj || ep->obj.closing))
                ep = NULL;
        if (ep)
                ep_pin_locked(ep);
        dat_object_unlock();
        if (!ep) {
                dat_trace("data channel of connection %u for no EP of ours: closed", ev->conn_id);
                /* A kept one goes (back) to the keep, which tells datd. */
                if ((ev->flags & DATP_CHANNEL_KEEP) &&
                    channel_create(ev, fds, nfds, ia->shm_keep, &ch) == 0)
                        channel_destroy(ch);
                else
                        channel_close_fds(fds, nfds);
                return;
        }
        r = channel_create(ev, fds, nfds, ia->shm_keep, &ch);
        if (r < 0) {
                dat_trace("EP %p: data channel of connection %u unusable: %s", ep->obj.handle,
                          ev->conn_id, strerror(-r));
                ep_unpin(ep);
                return;
        }
        /* The active EP's host connected the socket (channel.h). */
        ch->fin_last = ep->active;
        d = dto_ep_get(ep);
        if (!d) {
                ep_unpin(ep);
                channel_destroy(ch);
                return;
        }
        dat_lock(&d->lock);
        if (d->state == DTO_RUNNING) {
                old = ch;
        } else {
                old = d->ch;
                d->ch = ch;
                d->offered_conn_id = ev->conn_id;
        }
        dat_unlock(&d->lock);
        ep_unpin(ep);
        channel_destroy(old);
}

static uint32_t rnr_timeout_ms(void)
{
        static uint32_t cached;
        uint32_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);

        if (!v) {
                const char *e = getenv("DATD_RNR_TIMEOUT_MS");
                long ms = e ? strtol(e, NULL, 10) : 0;

                v = ms > 0 && ms < 3600000 ? (uint32_t)ms : DTO_RNR_TIMEOUT_MS;
                __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
        }
        return v;
}

uint64_t dto_rnr_timeout_ns(void)
{
        return (uint64_t)rnr_timeout_ms() * 1000000u;
}

DAT_RETURN dto_ep_start(struct ep *ep, uint32_t conn_id)
{
        struct dto_ep *d = dto_ep_get(ep);
        bool ok;

        if (!d)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        drop_lingering(d);
        dat_lock(&d->lock);
        ok = d->ch && d->offered_conn_id == conn_id && d->state != DTO_RUNNING;
        if (ok) {
                d->state = DTO_RUNNING;
                d->conn_id = conn_id;
                d->broken = d->peer_gone = d->peer_bye = false;
                d->next_seq = 1;
                d->peer_seq = 0;
                d->ack_owed = d->ack_sent = d->peer_ack = 0;
                d->ack_due = d->later_seq = 0;
                d->ask_due = false;
                d->ask_idle_ns = 0;
                d->acks_may_wait = d->ch->ops->unsent != NULL;
                /* Looked up now: holding acknowledgements back looks at
                 * the request EVD's waiter and CNO (dto_ia.c). */
                d->request_evd.handle = d->ep->request_evd;
                d->request_evd.evd = evd_lookup(d->ep->request_evd);
                d->recv_evd.handle = d->ep->recv_evd;
                d->recv_evd.evd = evd_lookup(d->ep->recv_evd);
                d->hold_acks = d->acks_held = false;
                d->peer_idle = false;
                d->tx_next = d->resp_next = d->tail;
                d->tx_item = DTO_TX_NONE;
                d->rx_state = DTO_RX_HEADER;
                d->rx_status = DAT_DTO_SUCCESS; /* no payload being dropped */
                d->rx_have = 0;
                d->rx_stash_len = d->rx_stash_off = 0;
                d->cma_to_peer = d->cma_from_peer = false;
                d->direct_offer = d->ch->direct != NULL;
                d->direct_last_ctx = 0;
                d->direct_offered = false;
                dto_probe_reset(d);
        }
        dat_unlock(&d->lock);
        if (!ok)
                return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        if (dto_ia_add(d) < 0) {
                struct dto_batch b;

                DTO_BATCH_EMPTY(b);
                dat_lock(&d->lock);
                end_direct_writes(d);
                flush_all(d, &b);
                d->state = DTO_DEAD;
                dat_unlock(&d->lock);
                dto_finish(d, &b);
                teardown_channel(d);
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        return DAT_SUCCESS;
}

bool dto_ep_stop(struct ep *ep)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);
        struct dto_batch b;
        bool broken, ended;

        DTO_BATCH_EMPTY(b);
        if (!d)
                return false;
        dat_lock(&d->lock);
        if (d->state == DTO_RUNNING) {
                /* What the peer sent before it disconnected still counts:
                 * responses to our requests, its last Sends. */
                dto_progress_locked(d, &b);
        }
        ended = d->state == DTO_RUNNING;
        if (ended) {
                /* What we placed is acknowledged before we go. */
                dto_tx_ack(d, true);
                dto_tx_flush(d);
                dto_tx_bye(d);
                end_direct_writes(d);
                flush_all(d, &b);
                d->state = DTO_DEAD;
        }
        broken = d->broken;
        /* The connection code reports this end itself. */
        d->fail_pending = false;
        d->graceful_done = false;
        dat_unlock(&d->lock);
        dto_finish(d, &b);
        teardown_channel(d);
        if (ended)
                last_receive_done(d);
        return broken;
}

bool dto_ep_disconnect(struct ep *ep, bool graceful)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);
        struct dto_batch b;
        bool now = true, finish;

        if (!d || !graceful)
                return true;
        DTO_BATCH_EMPTY(b);
        dat_lock(&d->lock);
        /* What another thread's poll held back since dto_ep_take_acks is
         * not outstanding either. */
        dto_take_held_acks(d, &b);
        if (d->state == DTO_RUNNING && d->head != d->tail) {
                d->graceful_pending = true;
                now = false;
        }
        /* Only the notices of those completions: whatever else is left
         * to finish is the connection code's, which called us. */
        finish = b.deferred.n_notice || b.deferred.n_overflowed;
        dat_unlock(&d->lock);
        if (finish)
                evd_deferred_run(&b.deferred);
        return now;
}

void dto_ep_take_acks(struct ep *ep)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);
        struct dto_batch b;
        bool finish;

        /* Only this thread's own poll matters here (another thread's may
         * hold at any moment): a look without the lock is enough. */
        if (!d || !__atomic_load_n(&d->acks_held, __ATOMIC_RELAXED))
                return;
        DTO_BATCH_EMPTY(b);
        dat_lock(&d->lock);
        dto_take_held_acks(d, &b);
        finish = dto_needs_finish(d) || b.deferred.n_notice || b.deferred.n_overflowed;
        dat_unlock(&d->lock);
        if (finish)
                dto_finish(d, &b);
}

bool dto_ep_break(struct ep *ep, const char *why)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);
        bool broke;

        if (!d)
                return false;
        dat_lock(&d->lock);
        broke = d->state == DTO_RUNNING;
        dto_fail(d, why);
        dat_unlock(&d->lock);
        if (broke)
                dto_finish(d, NULL);
        return broke;
}

/* Whether each segment of r is in a live LMR of the EP's PZ (a segment of
 * no bytes needs none, as at arrival: recv_iovecs).  An LMR freed since
 * the post is of no PZ. */
static bool recv_in_eps_pz(const struct dto_ep *d, const struct dto_recv *r)
{
        for (uint32_t i = 0; i < r->nseg; i++) {
                const DAT_LMR_TRIPLET *t = &r->iov[i];
                struct lmr *lmr;

                if (t->segment_length == 0)
                        continue;
                if (lmr_find_by_context(d->ia, t->lmr_context, t->virtual_address,
                                        t->segment_length, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                                        &lmr) != DAT_SUCCESS ||
                    !ep_pz_is(d->ep, &lmr->pz->obj))
                        return false;
        }
        return true;
}

void dto_ep_pz_changed(struct ep *ep)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);
        struct dto_batch b;
        uint32_t kept = 0;

        /* No data path: no receive was ever posted. */
        if (!d)
                return;
        DTO_BATCH_EMPTY(b);
        dat_lock(&d->lock);
        for (uint32_t i = 0; i < d->rq_count; i++) {
                uint32_t from = (d->rq_head + i) & d->recv_mask;

                if (!recv_in_eps_pz(d, &d->rq[from])) {
                        dto_complete_recv(d, &d->rq[from], false, DAT_DTO_ERR_LOCAL_PROTECTION, 0,
                                          true, &b);
                        continue;
                }
                if (kept != i)
                        dto_recv_move(d, from, (d->rq_head + kept) & d->recv_mask);
                kept++;
        }
        d->rq_count = kept;
        dat_unlock(&d->lock);
        dto_finish(d, &b);
}

void dto_ep_reset(struct ep *ep)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);
        struct channel *old = NULL;

        if (!d)
                return;
        dat_lock(&d->lock);
        if (d->state != DTO_RUNNING) {
                d->state = DTO_IDLE;
                d->broken = false;
                old = d->ch;
                d->ch = NULL;
        }
        dat_unlock(&d->lock);
        if (old) {
                dto_ia_remove_nowait(d);
                channel_destroy(old);
        }
        drop_lingering(d);
}

void dto_ep_quiesce(struct ep *ep)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);

        if (!d)
                return;
        dat_lock(&d->lock);
        /* dat_ep_free(3DAT): its DTOs are destroyed, not completed: from
         * now on nothing of this data path reaches an EVD. */
        if (d->state == DTO_RUNNING) {
                end_direct_writes(d);
                d->state = DTO_DEAD;
        }
        d->fail_pending = d->graceful_done = false;
        dat_unlock(&d->lock);
}

void dto_ep_destroy(struct ep *ep)
{
        struct dto_ep *d = __atomic_load_n(&ep->dto, __ATOMIC_ACQUIRE);

        if (!d)
                return;
        dto_ia_remove(d);
        dat_lock(&d->lock);
        /* dat_ep_free(3DAT): the DTOs are destroyed, no completion; a bind
         * in flight leaves its RMR as it was. */
        for (uint32_t i = d->head; i != d->tail; i++) {
                struct dto_req *r = dto_req_at(d, i);
                struct rmr *rmr = r->kind == DTO_REQ_BIND ? rmr_lookup(r->rmr) : NULL;

                if (rmr)
                        rmr_bind_complete(rmr, false);
        }
        dat_unlock(&d->lock);
        /* Completions of its SRQ buffers still queued can no longer be
         * told apart once the EP is gone: the buffers count as reaped.  A
         * buffer taken for a message that never arrived in full goes back
         * to the SRQ (dat_ep_free(3DAT): the DTOs are destroyed, the SRQ's
         * buffers are not the EP's to lose). */
        if (ep->srq != DAT_HANDLE_NULL) {
                struct srq *srq = srq_lookup(ep->srq);

                for (uint32_t n = d->srq_unreaped; srq && n > 0; n--)
                        srq_buffer_reaped(srq);
                if (srq && d->rx_recv_taken && d->rx_recv_srq) {
                        srq_buffer_return(srq, d->rx_recv.cookie, (DAT_COUNT)d->rx_recv.nseg,
                                          d->rx_recv.iov);
                        d->rx_recv_taken = false;
                        __atomic_sub_fetch(&ep->recv_outstanding, 1, __ATOMIC_RELAXED);
                }
        }
        channel_destroy(d->ch);
        dto_ia_close_channel(d->ia, d->lingering);
        dto_queues_free(d);
        ep->dto = NULL;
        free(d);
}

void dto_event_reaped(const DAT_EVENT *event)
{
        const DAT_DTO_COMPLETION_EVENT_DATA *e = &event->event_data.dto_completion_event_data;
        struct srq *srq;
        struct ep *ep;

        if (!srq_exist() || event->event_number != DAT_DTO_COMPLETION_EVENT ||
            e->operation != DAT_DTO_RECEIVE)
                return;
        ep = ep_lookup(e->ep_handle);
        if (!ep || ep->srq == DAT_HANDLE_NULL || !ep->dto)
                return;
        srq = srq_lookup(ep->srq);
        if (srq && __atomic_load_n(&ep->dto->srq_unreaped, __ATOMIC_RELAXED) > 0) {
                __atomic_sub_fetch(&ep->dto->srq_unreaped, 1, __ATOMIC_RELAXED);
                srq_buffer_reaped(srq);
        }
}
