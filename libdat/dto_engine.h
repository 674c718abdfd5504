/* The DTO engine's internals, shared by its files (dto.h is the rest of
 * libdat's view):
 *   dto_ep.c      an EP's data path: lifetime, start/stop, completions,
 *                 flush, breaking the connection;
 *   dto_tx.c      what goes out: requests in post order, responses, the
 *                 frame being written when the channel was full;
 *   dto_rx.c      what comes in: the frame parser and the target side
 *                 (receives, RDMA served, responses matched);
 *   dto_post.c    the DAT entry points that post (dat_ep_post_*);
 *   dto_ia.c      the IA's set of running data paths: polling by
 *                 application threads and the progress thread's epoll. */
#ifndef DATD_LIBDAT_DTO_ENGINE_H
#define DATD_LIBDAT_DTO_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/macro.h"
#include "libdat/channel.h"
#include "libdat/dto.h"
#include "libdat/dto_wire.h"
#include "libdat/evd.h"

struct ep;
struct ia;

/* Bytes a read of the channel takes ahead (dto_rx.c). */
#define DTO_STASH 4160

/* Reads of at most this much (a frame header, a small payload) go into the
 * stash alone and are served from it (dto_rx.c). */
#define DTO_RX_SMALL 256

/* Completions collected under the EP's lock, delivered after. */
struct dto_batch {
        struct evd_deferred deferred;
};

/* An empty batch.  Only the counts: an application polling an empty EVD
 * makes one per poll, and zeroing the whole arrays cost a quarter of an
 * empty poll. */
#define DTO_BATCH_EMPTY(b) ((b).deferred.n_notice = (b).deferred.n_overflowed = 0)

/* A request of the EP's request queue (dat_ep_post_send, _rdma_write,
 * _rdma_read, dat_rmr_bind), from post to completion. */
enum dto_req_kind {
        DTO_REQ_SEND = DTO_OP_SEND,
        DTO_REQ_WRITE = DTO_OP_WRITE,
        DTO_REQ_READ = DTO_OP_READ_REQ,
        DTO_REQ_ATOMIC = DTO_OP_CMP_SWAP,       /* ext says which */
        DTO_REQ_BIND = 100,
};

struct dto_req {
        DAT_DTO_COOKIE cookie;          /* or the RMR cookie of a bind */
        DAT_COMPLETION_FLAGS flags;
        uint8_t kind;                   /* enum dto_req_kind */
        bool done;                      /* status is final */
        bool local;                     /* never goes out: a bind, or refused at post */
        bool sent;                      /* every byte of its frame is in the channel */
        bool cma;                       /* its payload goes by cross-memory attach */
        DAT_DTO_COMPLETION_STATUS status;
        uint32_t seq;                   /* its frame's, 0 for a bind */
        uint32_t nseg;                  /* local segments (iovecs in dto_ep.req_iov) */
        uint64_t length;                /* bytes */
        uint32_t rmr_context;           /* WRITE/READ: the target's */
        uint64_t remote_addr;
        DAT_RMR_HANDLE rmr;             /* BIND */
        DAT_RMR_CONTEXT bind_context;
        uint8_t ext;                    /* enum dto_ext_kind, 0: none */
        uint32_t immed;                 /* WRITE with immediate data */
        uint64_t operand[2];            /* atomics: compare and swap, or the addend */
};

/* A receive posted to the EP (not to its SRQ). */
struct dto_recv {
        DAT_DTO_COOKIE cookie;
        DAT_COMPLETION_FLAGS flags;
        uint32_t nseg;
        uint64_t checked_at;            /* mem_ctx_release_count() before its LMRs were checked */
        DAT_LMR_TRIPLET *iov;           /* its segments (in dto_ep.rq_iov, or rx_srq_iov) */
};

/* A response the target owes the initiator (ACK, READ_RESP). */
struct dto_resp {
        struct dto_frame frame;
        struct iovec data;              /* READ_RESP inline: the target memory read */
        /* ... reached through this context (rmr_context, address), checked
         * when mem_ctx_withdrawal_count() read checked_at: the data is read
         * when the channel has room, maybe long after (dto_tx.c). */
        uint32_t data_ctx;
        uint64_t data_addr;
        uint64_t checked_at;
        bool fatal;                     /* an error response: the connection ends after it */
        bool has_value;                 /* an atomic's answer: value, not data */
        uint64_t value;
};

/* The frame being written when the channel filled up. */
enum dto_tx_item {
        DTO_TX_NONE,
        DTO_TX_REQ,
        DTO_TX_RESP,
        DTO_TX_CTRL,                    /* HELLO, CMA_OK */
};

enum dto_rx_state {
        DTO_RX_HEADER,                  /* collecting the 32-byte header */
        DTO_RX_SEGS,                    /* collecting CMA segment descriptors */
        DTO_RX_ACTION,                  /* header complete: decide what it means */
        DTO_RX_PAYLOAD,                 /* moving len bytes into the sink */
};

enum dto_state {
        DTO_IDLE,                       /* no connection: receives queue up */
        DTO_RUNNING,                    /* connected, channel up */
        DTO_DEAD,                       /* the connection ended: everything flushes */
};

/* An EP's data path, created at its first DTO (or connection) and freed
 * with the EP.  Everything under lock. */
struct dto_ep {
        struct dat_lock lock;
        struct ep *ep;
        struct ia *ia;
        enum dto_state state;
        bool registered;                /* in the IA's table (dto_ia.c) */
        bool app_watched;               /* in its epoll of application polls (dto_ia.c) */
        uint32_t slot;                  /* ... at this slot */
        int peer_watch;                 /* its peer process's watch (peer_watch.h), or -1 */
        bool peer_exit_pending;         /* that process exited: to be told (dto_ia.c) */
        unsigned poll_events;           /* what epoll watches its channel for; 0: not in it */
        bool off_epoll;                 /* its channel left the epoll for good (dto_ia_quiet) */
        /* The progress thread armed the channel without data (its receive
         * side was blocked, dto_rx_blocked): whoever unblocks it must kick
         * the progress thread to watch for data again (dto_work_left). */
        bool rx_unwatched;
        bool fail_pending;              /* failed: dto_finish must tell the connection code */
        bool graceful_done;             /* a deferred graceful disconnect may proceed */
        bool fail_after_tx;             /* a fatal response is queued: fail once it is out */
        bool graceful_pending;          /* dat_ep_disconnect(GRACEFUL) waits for requests */
        bool broken;                    /* an error completion ended it */
        bool peer_gone;                 /* the channel failed */
        bool peer_bye;                  /* the peer ended its side in order (BYE) */
        uint32_t conn_id;
        unsigned users;                 /* threads working on it outside the IA set's lock */

        /* The channel offered for the next (or current) connection, and
         * the last one kept until the EP is reset (teardown_channel). */
        struct channel *ch;
        struct channel *lingering;
        uint32_t offered_conn_id;
        bool cma_to_peer;               /* we may read/write the peer's memory */
        bool cma_from_peer;             /* the peer may read/write ours (it said CMA_OK) */
        /* The cross-memory attach probe (dto_wire.h): our HELLO goes
         * before our first request that could use it, not at connection
         * time -- a connection that never moves a large payload makes no
         * probe, which costs both processes wake-ups and a system call. */
        bool hello_sent;                /* it went, or never goes (tcp) */
        bool hello_owed;                /* the frame in flight is our HELLO */
        bool cma_answered;              /* the peer's CMA_OK came: cma_from_peer is final */
        bool cma_ok_owed;               /* we owe the peer the answer to its HELLO */
        bool peer_probed;               /* its HELLO came (a second breaks the rules) */
        uint64_t probe_value;           /* what our HELLO's address holds */
        uint32_t cma_ok_value;
        /* Direct Writes (shm_direct.h): our Writes ask the peer to export
         * its shared memory (DTO_F_MAP_OK); the context of ours the peer
         * last wrote to through the channel, and whether we looked at
         * exporting it (at its second Write in a row, dto_rx.c). */
        bool direct_offer;
        uint32_t direct_last_ctx;
        bool direct_offered;

        /* Request queue: at most req_cap entries (the EP's
         * max_request_dtos) in a ring of req_mask + 1, a power of two, so
         * that the free-running counters map to slots by a mask: a
         * division on every use cost the data path more than the rest of
         * the arithmetic, and a ring size that does not divide 2^32 would
         * map the counters' wrap onto the wrong slots.  [head, tail)
         * posted and not delivered; tx_next the next to write; resp_next
         * the oldest waiting for its response.  req_iov holds
         * req_iov_stride local segments per entry (dto_req_slot), at least
         * req_iov_max, the most a post may give (dto_queues.c says when
         * they differ). */
        struct dto_req *req;
        DAT_LMR_TRIPLET *req_iov;
        uint32_t req_cap, req_mask, req_iov_max, req_iov_stride;
        uint32_t head, tail, tx_next, resp_next;
        uint32_t next_seq;              /* our requests' numbers */
        uint32_t reads_in_flight;       /* READs started, not done (BARRIER_FENCE) */

        /* Receive queue (no SRQ): at most recv_cap (max_recv_dtos) in a
         * ring of recv_mask + 1, a power of two; rq_iov holds
         * recv_iov_stride triplets per entry, at least recv_iov_max, the
         * most a post may give. */
        struct dto_recv *rq;
        DAT_LMR_TRIPLET *rq_iov;
        uint32_t recv_cap, recv_mask, recv_iov_max, recv_iov_stride;
        uint32_t rq_head, rq_count;

        /* Responses owed: ring of resp_cap, a power of two. */
        struct dto_resp *resp;
        uint32_t resp_cap, resp_head, resp_count;
        uint32_t peer_seq;              /* the last request of the peer's we took */
        uint32_t ack_owed;              /* the peer's last request placed (cumulative ack) */
        uint32_t ack_sent;              /* ... as the last frame we started carried it */
        uint32_t peer_ack;              /* the peer's cumulative ack of our requests */
        /* Acknowledgements held back in a stream (DTO_F_ACK_LATER, on
         * channels with `unsent`).  ack_due: the peer's last request
         * placed that wants its acknowledgement at once (not flagged);
         * later_seq: our last request sent flagged; ask_due: not asked
         * for since (a flag, not a second number: equal numbers 2^32
         * requests apart would say "asked"); ask_idle_ns: when a step
         * first found nothing to do since then (0: none yet). */
        uint32_t ack_due, later_seq;
        bool ask_due;
        bool acks_may_wait;             /* the channel has `unsent` */
        /* The peer's acknowledgements of our Sends and Writes, as its
         * requests carry them, may wait for the next step: an
         * application's poll that finds the peer's Send (or Write) hands
         * it over without first completing ours, on the way to its answer
         * (dto_rx_apply_acks, about a quarter of the step), and its next
         * poll completes them, while the answer is in flight.  hold_acks:
         * this step may (an application's poll of the receive EVD, with
         * our requests' and the peer's completions on different EVDs, so
         * that no EVD's order changes, and nobody asleep on the request
         * EVD or its CNO: dto_ia.c, may_hold_acks);
         * acks_held: some wait (work for the next step, dto_work_left;
         * taken before anything that needs them: a response, a full
         * queue, a direct Write, the end, a graceful disconnect or a
         * status query, dto_ep_take_acks). */
        bool hold_acks, acks_held;
        uint64_t ask_idle_ns;
        /* The last frame taken was a lone acknowledgement: the peer had no
         * request to carry it, so it waits rather than answers, and what
         * we owe it goes out now (dto_progress_locked). */
        bool peer_idle;

        /* The frame being written: its header and segments as encoded when
         * it started, its payload segments, how far it got. */
        enum dto_tx_item tx_item;
        uint32_t tx_index;              /* req or resp slot */
        uint64_t tx_off;                /* bytes of it written */
        uint64_t tx_total;
        struct dto_frame tx_hdr;
        struct dto_seg tx_segs[DTO_MAX_SEGS];
        uint32_t tx_nsegs;              /* descriptors after the header */
        struct iovec tx_payload[DTO_MAX_SEGS];
        uint32_t tx_npayload;
        uint64_t tx_value;              /* an atomic's answer being written */

        /* The frame being read. */
        enum dto_rx_state rx_state;
        unsigned char rx_hdr[sizeof(struct dto_frame)];
        uint32_t rx_have;               /* header or segment bytes collected */
        struct dto_frame rx;            /* the header, decoded */
        struct dto_seg rx_segs[DTO_MAX_SEGS];
        struct iovec rx_sink[DTO_MAX_SEGS + 1];
        int rx_nsink;
        uint64_t rx_left;               /* payload bytes still to move */
        uint64_t rx_sink_checked;       /* mem_ctx_withdrawal_count() before the sink was checked */
        uint64_t rx_scratch;            /* HELLO's probe value */
        uint64_t rx_operand[2];         /* an atomic's operands */
        /* What to do once the payload is in. */
        DAT_DTO_COMPLETION_STATUS rx_status;
        bool rx_recv_taken;             /* a receive buffer holds this SEND */
        struct dto_recv rx_recv;        /* ... and which */
        bool rx_recv_srq;
        DAT_LMR_TRIPLET rx_srq_iov[DTO_MAX_SEGS]; /* an SRQ buffer's segments */
        bool rx_fatal;                  /* the frame is refused: its response ends the connection */
        /* Bytes read ahead of the frame being parsed (dto_rx.c, rx_read):
         * in rx_stash, or lent by the channel (rx_lent, its peek) for the
         * length of one dto_rx_poll at most. */
        uint32_t rx_stash_len, rx_stash_off;
        const unsigned char *rx_lent;
        unsigned char rx_stash[DTO_STASH];
        bool rx_drained;                /* this poll's last read found the channel empty */
        /* This step ends after the first whole record lent: a
         * dat_evd_dequeue's (dto_evd_poll's first_record). */
        bool rx_one_record;
        bool rx_seq_taken;              /* the request's seq was checked and counted */
        uint32_t read_data_pending;     /* inline RDMA Read data queued, not out yet */
        uint64_t rnr_deadline_ns;       /* a SEND waits for a receive until then, 0: not */

        /* The EVDs completions go to, as last looked up (an EP's EVD
         * cannot be freed while the EP uses it; dat_ep_modify may change
         * the handle, which the cache then no longer matches). */
        struct dto_evd_cache {
                DAT_EVD_HANDLE handle;
                struct evd *evd;
        } request_evd, recv_evd;

        /* CNO notices of completions made where no batch was at hand
         * (dto_fail), run by dto_finish. */
        struct dto_batch fail_batch;

        /* Receive completions of SRQ buffers not dequeued yet (atomic):
         * dat_ep_free gives them back to the SRQ as reaped. */
        uint32_t srq_unreaped;

        /* Counters (datctl could show them later; tests read them):
         * work_frames counts DTO frames (not HELLO/CMA_OK/BYE) in and out. */
        uint64_t bytes_sent, bytes_received;
        uint64_t work_frames;
};

/* ---- dto_queues.c -------------------------------------------------------- */

/* Sizes d's queues and sets their limits for attributes a, keeping what is
 * posted, in order (dto_queues.c).  -ENOMEM leaves the queues usable, a
 * limit perhaps the old one.  Under lock. */
int dto_queues_fit(struct dto_ep *d, const DAT_EP_ATTR *a);

/* Frees the queues' memory (with the EP's data path). */
void dto_queues_free(struct dto_ep *d);

/* Moves the receive at ring slot `from` to slot `to`, with its segments
 * (each slot has its own in rq_iov).  Under lock. */
void dto_recv_move(struct dto_ep *d, uint32_t from, uint32_t to);

/* ---- dto_ep.c ------------------------------------------------------------ */

/* The EP's data path, made on first use and sized for the EP's
 * attributes; NULL on ENOMEM. */
struct dto_ep *dto_ep_get(struct ep *ep);

/* Whether d's queues are sized for attributes a, their limits the EP's
 * (else dto_ep_get refits them, with DTOs posted or not: dto_queues.c).
 * The posts' fast path: the limits they check are these cached copies. */
static inline bool dto_ep_fits(const struct dto_ep *d, const DAT_EP_ATTR *a)
{
        return d->req_cap == (uint32_t)a->max_request_dtos &&
               d->req_iov_max == (uint32_t)a->max_request_iov &&
               d->recv_cap == (uint32_t)a->max_recv_dtos &&
               d->recv_iov_max == (uint32_t)a->max_recv_iov;
}

/* Delivers the completions at the head of the request queue that are done,
 * in order.  Under lock. */
void dto_deliver_requests(struct dto_ep *d, struct dto_batch *b);

/* Completes a receive (immed: the immediate data of an RDMA Write that
 * consumed it, or NULL for a Send's).  Under lock. */
void dto_complete_recv(struct dto_ep *d, const struct dto_recv *r, bool srq,
                       DAT_DTO_COMPLETION_STATUS status, uint64_t length, bool notify,
                       struct dto_batch *b);
void dto_complete_recv_immed(struct dto_ep *d, const struct dto_recv *r, bool srq,
                             DAT_DTO_COMPLETION_STATUS status, uint64_t length, bool notify,
                             uint32_t immed, struct dto_batch *b);

/* The request queue's slot of a counter (head, tail, tx_next, ...), and
 * its entry. */
static inline uint32_t dto_req_slot(const struct dto_ep *d, uint32_t counter)
{
        return counter & d->req_mask;
}

static inline struct dto_req *dto_req_at(const struct dto_ep *d, uint32_t counter)
{
        return &d->req[counter & d->req_mask];
}

/* Whether a request is answered by a READ_RESP (RDMA Read, atomics). */
static inline bool dto_req_reads(const struct dto_req *r)
{
        return r->kind == DTO_REQ_READ || r->kind == DTO_REQ_ATOMIC;
}

/* An error completion or a broken channel ends the connection: marks it,
 * flushes, closes the channel.  The EP's state change and the connection
 * event happen in dto_finish (no lock held).  Under lock. */
void dto_fail(struct dto_ep *d, const char *why);

/* Whether dto_finish has something to do: the data path failed, or a
 * graceful disconnect may proceed.  Under lock. */
bool dto_needs_finish(const struct dto_ep *d);

/* Runs b's deferred CNO agents (b may be NULL), and what the lock's holder
 * left: for a data path that failed, its channel's teardown and the EP's
 * move to Disconnected with DAT_CONNECTION_EVENT_BROKEN; for a graceful
 * disconnect whose requests are done, the disconnect.  Each once, however
 * many threads call it.  No lock held. */
void dto_finish(struct dto_ep *d, struct dto_batch *b);

/* The whole step a thread takes on a running data path: writes what is
 * pending, reads and serves what came, delivers completions.  Under
 * lock; returns whether anything moved. */
bool dto_progress_locked(struct dto_ep *d, struct dto_batch *b);

/* The nanoseconds of CLOCK_MONOTONIC. */
uint64_t dto_now_ns(void);

/* The receiver-not-ready time in nanoseconds (dto.h). */
uint64_t dto_rnr_timeout_ns(void);

/* ---- dto_tx.c ------------------------------------------------------------ */

/* Writes pending frames until the channel is full or nothing is left.
 * Returns whether bytes moved; a dead channel fails the data path. */
bool dto_tx_flush_frames(struct dto_ep *d);

/* Nothing to write: no frame half out, no response or probe owed, every
 * request out.  (A request the flush skips, a bind, still counts.) */
static inline bool dto_tx_idle(const struct dto_ep *d)
{
        return d->tx_item == DTO_TX_NONE && d->tx_next == d->tail && d->resp_count == 0 &&
               !d->hello_owed && !d->cma_ok_owed && !d->fail_after_tx;
}

/* dto_tx_flush_frames, without a call where there is nothing to write (a
 * step flushes before and after it reads, and most find nothing). */
static inline bool dto_tx_flush(struct dto_ep *d)
{
        return dto_tx_idle(d) ? false : dto_tx_flush_frames(d);
}

/* The request just queued (at tail - 1) goes out: in one write when
 * nothing waits before it (the usual small message), else through
 * dto_tx_flush.  Under lock, running. */
void dto_tx_post(struct dto_ep *d);

/* Whether frames wait for room in the channel (dto_tx_pending_frames),
 * with the usual answer inline: every poll of an idle data path asks. */
bool dto_tx_pending_frames(const struct dto_ep *d);

static inline bool dto_tx_pending(const struct dto_ep *d)
{
        return !dto_tx_idle(d) && dto_tx_pending_frames(d);
}

/* Queues a response; false when the ring is full (a peer that never reads
 * its responses: the caller fails the connection). */
bool dto_tx_respond(struct dto_ep *d, const struct dto_frame *f, const struct iovec *data,
                    bool fatal);

/* Queues the answer to an atomic: the 8 bytes the target held. */
bool dto_tx_respond_value(struct dto_ep *d, uint32_t seq, uint64_t value);

/* Queues an RDMA Read's successful inline response: data, the target
 * memory rmr_context reaches at addr, found there when
 * mem_ctx_withdrawal_count() read checked_at.  Checked again before any of
 * it goes out if a context was withdrawn since. */
bool dto_tx_respond_read(struct dto_ep *d, uint32_t seq, const struct iovec *data, uint32_t ctx,
                         uint64_t addr, uint64_t checked_at);

/* A new connection: no probe of cross-memory attach made or answered
 * yet (dto_wire.h: HELLO, CMA_OK); on tcp, and where this process does
 * not allow it (DATD_SHM_NO_CMA), none will be. */
void dto_probe_reset(struct dto_ep *d);

/* The peer's placed requests not acknowledged yet: queues a frame that
 * carries the acknowledgement if force, or if too many wait; otherwise it
 * rides on the next frame that goes anyway. */
void dto_tx_ack(struct dto_ep *d, bool force);

/* Asks the peer for the acknowledgements it may be holding back
 * (dto_ack_wanted), with a lone ACK: polling (sleeping false) once it has
 * waited DTO_ASK_AFTER_NS or all we wrote reached the peer, before the
 * process sleeps (true) at once.
 * Returns whether a frame moved. */
bool dto_tx_ask_ack(struct dto_ep *d, bool sleeping);

/* Ends our side of the stream in order: BYE, then no more writes. */
void dto_tx_bye(struct dto_ep *d);

/* ---- dto_rx.c ------------------------------------------------------------ */

/* Whether [addr, addr + len) is memory of ours that rmr_context reaches
 * with privileges priv through the EP's PZ (an RDMA target or source). */
bool dto_rdma_target_ok(struct dto_ep *d, uint32_t rmr_context, uint64_t addr, uint64_t len,
                        DAT_MEM_PRIV_FLAGS priv);

/* Reads and serves frames until the channel is empty or a Send waits for a
 * receive.  Returns whether bytes moved. */
bool dto_rx_poll(struct dto_ep *d, struct dto_batch *b);

/* The receive side takes nothing in until something else happens: a Send
 * waits for a receive (dat_ep_post_recv or its deadline wakes it), or a
 * request waits for the Read data ahead of it to go out (room in the
 * channel wakes it). */
static inline bool dto_rx_blocked(const struct dto_ep *d)
{
        return d->rx_state == DTO_RX_ACTION && (d->rnr_deadline_ns || d->read_data_pending);
}

/* Bytes were read ahead and wait in the stash, and the receive side can
 * take them now (it is not stalled): work, whatever the channel says.  A
 * frame stalled in its action (a Send waiting for a receive, a request
 * waiting for Read data to go out) takes nothing more until what it waits
 * for happens, and that comes with its own wake-up: counting its stash as
 * work would make the progress thread spin. */
static inline bool dto_rx_stashed(const struct dto_ep *d)
{
        return d->rx_stash_off < d->rx_stash_len && !dto_rx_blocked(d);
}

/* A Send or Write posted with this many of our requests unacknowledged
 * (itself included) says its acknowledgement may wait (DTO_F_ACK_LATER),
 * and the receiver then acknowledges every DTO_ACK_LATER_BATCH.  Why: on
 * TCP each acknowledgement is a segment the sending kernel takes in under
 * the socket lock its writes need; for 64 KiB Sends over veth, 16
 * outstanding, that was about 5% of the sending CPU, which limits the
 * stream, and one acknowledgement in four gave the stream 2-3% more.  A
 * depth of 8 flagged almost nothing there: the receiver keeps up, so the
 * sender has only a few messages unacknowledged at a time. */
#define DTO_ACK_LATER_DEPTH 4u
#define DTO_ACK_LATER_BATCH 4u

/* What we owe the peer may wait: every request placed since our last
 * acknowledgement said so, fewer than a batch are owed, the peer is not
 * waiting for it (a lone ACK of its own asks for it), and we go on reading
 * what it sends (stalled on a Send without a receive, we would not read
 * its asking). */
static inline bool dto_ack_deferred(const struct dto_ep *d)
{
        uint32_t behind = d->ack_owed - d->ack_sent;

        return behind != 0 && behind < DTO_ACK_LATER_BATCH && (int32_t)(d->ack_due - d->ack_sent) <= 0 &&
               !d->peer_idle && !dto_rx_blocked(d);
}

/* The peer may be holding back our flagged requests' acknowledgement, and
 * nothing of ours will go its way to ask for it: our last flagged request
 * is unacknowledged and not asked for yet, and nothing waits to be
 * written (a frame that goes carries what it carries; a flagged one
 * after it is asked for in turn). */
static inline bool dto_ack_wanted(const struct dto_ep *d)
{
        return d->ask_due && (int32_t)(d->later_seq - d->peer_ack) > 0 && d->tx_item == DTO_TX_NONE &&
               !dto_tx_pending_frames(d);
}

/* A polling sender fewer than a batch ahead of the peer's acknowledgement
 * asks this long after it first found nothing to do, or sooner once the
 * peer's kernel has every byte (`unsent` says 0).  Not on that alone: the
 * peer's kernel may hold its TCP acknowledgement of a last small segment
 * for its delayed-ACK timer, 40 ms or more, and every burst's last
 * completions waited for it.  Not at once: a stream's sender that polls
 * between its posts would ask often (64 KiB Sends over veth: about 1300
 * asks a second with 3 us, 70 with 10 us).  Measured cost: bursts of 6
 * small Writes to a polling peer complete in 39-57 us against 34 before
 * (bursts under 4 requests are never flagged). */
#define DTO_ASK_AFTER_NS 10000u

/* Work on d that no channel event will announce: an acknowledgement owed
 * (unless it may wait: the peer asks for it when it waits), one to ask the
 * peer for, frames waiting for room, bytes in the stash.  A thread that
 * leaves it behind must kick a progress thread sleeping armed. */
static _always_inline_ bool dto_work_left(const struct dto_ep *d)
{
        return (d->ack_owed != d->ack_sent && !dto_ack_deferred(d)) || dto_ack_wanted(d) ||
               dto_tx_pending(d) || dto_rx_stashed(d) || (d->rx_unwatched && !dto_rx_blocked(d)) ||
               d->acks_held;
}

/* Completes our Sends and Writes the peer's cumulative acknowledgement
 * covers, in order (those held back too: acks_held is cleared). */
void dto_rx_apply_acks(struct dto_ep *d, struct dto_batch *b);

/* Takes what a poll held back (acks_held), on a running data path: for
 * whatever needs our requests completed up to the peer's acknowledgement.
 * Under lock. */
static inline void dto_take_held_acks(struct dto_ep *d, struct dto_batch *b)
{
        if (_unlikely_(d->acks_held) && d->state == DTO_RUNNING)
                dto_rx_apply_acks(d, b);
}

/* A Send waiting for a receive gets one now, or fails once its deadline
 * passed. */
bool dto_rx_retry_stalled(struct dto_ep *d, struct dto_batch *b);

/* ---- dto_ia.c ------------------------------------------------------------ */

/* Adds a running data path to its IA's set (the progress thread watches
 * its channel); removes it.  Remove waits until neither the progress
 * thread nor a polling thread still works on it. */
int dto_ia_add(struct dto_ep *d);
void dto_ia_remove(struct dto_ep *d);

/* Takes d out of the table without waiting for its users (a thread that is
 * one of them). */
void dto_ia_remove_nowait(struct dto_ep *d);

/* The peer said BYE: its channel is not watched any more (its end of
 * stream would wake the progress thread for nothing).  Under d's lock. */
void dto_ia_quiet(struct dto_ep *d);

/* Wakes the IA's progress thread to look at every data path again (a post
 * left frames waiting for room, a receive arrived for a stalled Send). */
void dto_ia_kick(struct ia *ia);

/* Destroys a channel whose connection is over, once the peer ended its
 * stream if closing first would cost this host a TIME_WAIT
 * (channel_closer.h).  Takes ownership; accepts NULL. */
void dto_ia_close_channel(struct ia *ia, struct channel *ch);

#endif
