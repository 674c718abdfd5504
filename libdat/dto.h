/* The DTO engine: the data path of a connected EP, the same for every
 * software transport (shm rings, TCP sockets).
 *
 * datd hands both ends of a connection a data channel (proto/datp.h,
 * EV_DATA_CHANNEL); from ESTABLISHED on the two processes exchange frames
 * (dto_wire.h) over it without datd: requests (Send, RDMA Write, RDMA Read
 * request) one way, responses (an acknowledgement per Send and Write, the
 * data of a Read) the other.  The target serves every request in order,
 * in whichever of its threads polls the channel: the application's
 * (dat_evd_dequeue / dat_evd_wait spin) or the IA's progress thread when
 * nobody else does, so RDMA lands without the target application's help.
 * Payloads travel inline in the stream, or, between processes of one host
 * that may access each other's memory, by cross-memory attach: the target
 * pulls a Send or Write with process_vm_readv and pushes a Read's data
 * with process_vm_writev (one copy; the initiator's buffers are described
 * by address, never trusted beyond being the initiator's own).  An RDMA
 * Write into shared memory libdat provides to the target's LMR
 * (DAT_MEM_TYPE_SHARED_VIRTUAL) goes further on shm: once the target
 * exported it, the initiator maps it and copies the Write straight in,
 * without the target process (shm_direct.h).
 *
 * Semantics (where the DAT 1.2 man pages leave room, as a reliable
 * connection on an RDMA NIC behaves; each is cited at the code):
 * - Requests complete in the order they were posted, on the request EVD;
 *   a Send or Write completes when the target has placed the data, a Read
 *   when its data arrived, an RMR bind in order after what was posted
 *   before it.  Receives complete in the order messages arrive.  A
 *   request the peer's answer acknowledged completes at the latest at the
 *   next poll of the data paths (a dequeue or wait that finds its EVD
 *   empty, a post that needs it, a graceful disconnect, a status query)
 *   after the poll of the receive EVD that took the answer, or when the
 *   progress thread takes the channels back; at once when a thread sleeps
 *   on the request EVD or its CNO, or a graceful disconnect waits; and
 *   before the answer on an EVD that takes both (dto_engine.h,
 *   acks_held).  dat_ep_disconnect and dat_ep_get_status may so complete
 *   requests, and run a CNO's proxy agent, in the caller's thread, as a
 *   post may.
 * - Synchronous refusals (nothing posted): bad handle; EP neither
 *   Connected nor Disconnected (DAT_INVALID_STATE; dat_ep_post_recv is
 *   valid in every state); num_segments outside [0, max_*_iov] or a NULL
 *   local_iov with segments (DAT_INVALID_PARAMETER); completion flags
 *   unknown or UNSIGNALLED without the EP's configuration
 *   (DAT_INVALID_PARAMETER); queue full (DAT_INSUFFICIENT_RESOURCES); an
 *   lmr_context no LMR of this IA has, or, for a receive or an RDMA Read's
 *   destination, whose LMR lacks local write (DAT_PRIVILEGES_VIOLATION;
 *   local read is always granted, as on every RDMA NIC, so that DAPL's own
 *   programs, which send from LOCAL_WRITE-only LMRs, run); an LMR of another PZ than the
 *   EP's (DAT_PROTECTION_VIOLATION); a segment outside its LMR
 *   (DAT_INVALID_PARAMETER, ARG3); an RDMA Read whose local buffer is
 *   smaller than the remote segment, an RDMA Write whose remote segment is
 *   smaller than the local data (DAT_LENGTH_ERROR).
 * - On a Disconnected EP a Send, RDMA or RMR bind is accepted and
 *   completes DAT_DTO_ERR_FLUSHED at once, as a receive does.
 * - Error completions: a Send longer than the transport's
 *   max_message_size (16 MiB), or an RDMA beyond its max_rdma_size
 *   (1 GiB): DAT_DTO_ERR_LOCAL_LENGTH (the EP's attributes of those names
 *   are the consumer's wish and, as on DAPL's providers, not checked on
 *   posts: its programs set 64 KiB and move more, or leave 0); a message longer than the receive buffer:
 *   the Receive DAT_DTO_ERR_LOCAL_LENGTH, the Send
 *   DAT_DTO_ERR_REMOTE_RESPONDER; a receive whose LMR went away before the
 *   message came: DAT_DTO_ERR_LOCAL_PROTECTION (the Send
 *   DAT_DTO_ERR_REMOTE_RESPONDER); a receive posted before dat_ep_modify
 *   gave the EP another PZ, with a segment in an LMR not of the new one:
 *   DAT_DTO_ERR_LOCAL_PROTECTION at the modify (dat_ep_modify(3DAT): they
 *   "fail with a DAT_PROTECTION_VIOLATION", the post's code for an LMR of
 *   another PZ; the post returned long ago, so the completion says it,
 *   with the status for a local protection fault).  At the modify rather
 *   than when a message comes: the PZ changes only without a connection,
 *   so nothing breaks and the consumer learns at once, the other receives
 *   keep their order, and arrival stays as cheap as it is (a receive's
 *   LMRs are not looked up again there while no memory context was
 *   released, next_recv_holds; a PZ test would have to be added on every
 *   message); an RDMA whose rmr_context, bounds,
 *   privileges or PZ the target refuses: DAT_DTO_ERR_REMOTE_ACCESS; a Send
 *   with no receive posted on the target within the receiver-not-ready
 *   time (DTO_RNR_TIMEOUT_MS, $DATD_RNR_TIMEOUT_MS): the Send
 *   DAT_DTO_ERR_RECEIVER_NOT_READY.  Like a reliable connection on an RDMA
 *   NIC, any error completion other than FLUSHED breaks the connection:
 *   both EPs go Disconnected with DAT_CONNECTION_EVENT_BROKEN, and every
 *   DTO still outstanding on either completes DAT_DTO_ERR_FLUSHED.
 * - Disconnect (either side), dat_ep_reset, peer death: outstanding
 *   requests and receives complete DAT_DTO_ERR_FLUSHED, in order, after
 *   what the peer wrote before it ended (a peer that disconnected in order
 *   and exited is DISCONNECTED, however the survivor hears of it first).  A
 *   graceful dat_ep_disconnect waits for the outstanding requests first.
 *   dat_ep_free destroys them without completions.  A receive posted to a
 *   Disconnected EP completes DAT_DTO_ERR_FLUSHED at once.
 * - Completion flags: SUPPRESS (no event on success), UNSIGNALLED (queued
 *   without notification), SOLICITED_WAIT (the peer's receive completion is
 *   a notification only when the Send asked for it, on an EP configured
 *   for solicited wait), BARRIER_FENCE (the request is not started before
 *   every RDMA Read posted earlier has completed).
 *
 * Locking: each EP's data path state (struct dto_ep) is under its own
 * mutex; a thread that finds it busy leaves the work to its holder.  Lock
 * order: ia->dto.lock -> dto_ep.lock -> evd lock.  Completions that may
 * run a CNO's proxy agent are run after the EP's lock is dropped. */
#ifndef DATD_LIBDAT_DTO_H
#define DATD_LIBDAT_DTO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "libdat/channel_closer.h"
#include "libdat/dat_lock.h"
#include "libdat/libdat.h"
#include "libdat/peer_watch.h"
#include "proto/datp.h"

struct ep;
struct ia;
struct evd;

/* The receiver-not-ready time: how long an arriving Send waits for a
 * receive to be posted before it fails (overridable by the environment
 * variable DATD_RNR_TIMEOUT_MS, for tests). */
#define DTO_RNR_TIMEOUT_MS 2000

/* Payloads from this size on go by cross-memory attach when the peers
 * allow it (smaller ones are copied through the channel: cheaper than a
 * system call). */
#define DTO_CMA_THRESHOLD 16384

/* An IA's running data paths (dto_ia.c), embedded in struct ia.  A slot
 * table, so that the progress thread's epoll events name a data path by
 * (slot, generation) and one that went away meanwhile is simply not found. */
struct dto_ia_slot {
        struct dto_ep *d;               /* NULL: free */
        uint32_t gen;
        uint32_t ready_seq;             /* the application poll that found it readable */
};

struct dto_ia {
        struct dat_lock lock;           /* the table; lock order: before any dto_ep lock */
        bool initialized;
        struct dto_ia_slot *slots;
        uint32_t n_slots, n_used;
        uint32_t slots_end;             /* one past the last slot in use: loops stop there */
        int epfd;                       /* the progress thread's epoll, -1 before it runs */
        int kick_fd;                    /* eventfd: look at every data path again */
        uint32_t n_stalled;             /* data paths whose Send waits for a receive */
        /* While an application thread polls (dat_evd_dequeue, the spin of
         * dat_evd_wait), the progress thread does not ask the channels to
         * wake it: no doorbell system call per message, no thread woken to
         * compete for the CPU.  app_polls: a count of the polls (those
         * that found work, and every few empty ones), no clock: reading
         * the clock costs ~30 ns, a tenth of a same-host round trip;
         * app_asleep: one went to sleep since (dat_evd_wait); unarmed:
         * the progress thread sleeps without having armed the channels (a
         * consumer going to sleep kicks it).  polls_seen, polls_seen_ns:
         * the progress thread's own, the count it saw last and when it
         * saw it change. */
        uint64_t app_polls;
        bool app_asleep;
        uint64_t polls_seen, polls_seen_ns;
        /* Application threads inside a step of a data path: one sending a
         * large frame spends a millisecond in sendmsg, long enough for its
         * last poll to look stale; it still polls. */
        unsigned app_busy;
        bool unarmed;
        /* The progress thread sleeps armed, with no timeout: an application
         * thread that leaves an acknowledgement owed must kick it (on TCP
         * the thread may never wake: the data it was woken for is gone). */
        bool armed_sleep;
        /* Some channel may have epoll events on (quiet_all has work);
         * under the table's lock. */
        bool watching;
        /* Application polls and channels whose readiness only the kernel
         * knows (TCP: channel.poll_by_fd): with a few of them, a poll asks
         * this epoll once which are readable instead of reading each one
         * (a thousand connections made a thousand system calls per
         * dat_evd_dequeue).  -1 until such a channel comes; under the
         * table's lock, as poll_seq (numbers the polls that asked). */
        int app_epfd;
        uint32_t n_fd_polled, poll_seq;
        uint32_t n_fd_channels;         /* poll_by_fd channels in the table */
        /* The progress thread's waits so far: its own, read by tests (a
         * thread that sleeps makes a few a second, one that spins
         * hundreds of thousands). */
        uint64_t rounds;
        /* Channels whose close waits for the peer's end of stream. */
        struct channel_closer closer;
        /* The peer processes of the channels, watched for their exit. */
        struct peer_watch peers;
};

/* Sets up / tears down an IA's table (ia.c: open and close). */
int dto_ia_init(struct dto_ia *t);
void dto_ia_fini(struct dto_ia *t);

/* ---- the progress thread's side (progress.c) ----------------------------- */

/* The progress thread's loop over datd's socket (datd_fd: on_datd is
 * called when readable and returns false when the connection is over),
 * the stop eventfd and every data path: returns when stop_fd is readable
 * (true) or datd went away (false). */
bool dto_ia_run(struct ia *ia, int datd_fd, int stop_fd, bool (*on_datd)(void *), void *arg);


/* EV_DATA_CHANNEL: keeps the channel for the EP it names until its
 * ESTABLISHED; takes ownership of fds (closes them on any failure). */
void dto_channel_offer(struct ia *ia, const struct datp_ev_data_channel *ev, int *fds,
                       unsigned nfds);

/* ---- the connection code's side (conn.c) --------------------------------- */

/* ESTABLISHED: starts the data path on the channel offered for this
 * connection.  DAT_SUCCESS, or an error (no channel, it could not be
 * mapped): the connection must then be torn down as BROKEN. */
DAT_RETURN dto_ep_start(struct ep *ep, uint32_t conn_id);

/* The connection ended (peer disconnected, broke, or this side did): reads
 * what the peer sent before, then completes every outstanding DTO with
 * DAT_DTO_ERR_FLUSHED and closes the channel.  Idempotent.  Returns true
 * when the data path had failed (an error completion): the connection
 * then ends BROKEN rather than DISCONNECTED. */
bool dto_ep_stop(struct ep *ep);

/* dat_ep_reset: the Disconnected EP's data path is ready for the next
 * connection. */
void dto_ep_reset(struct ep *ep);

/* dat_ep_disconnect on a Connected EP.  Graceful: returns true when the
 * disconnect may proceed now, false when it was deferred until the
 * outstanding requests complete (the engine then calls
 * conn_finish_disconnect).  Abrupt: always true. */
bool dto_ep_disconnect(struct ep *ep, bool graceful);

/* Completes now the requests a poll's held-back acknowledgements cover
 * (dto_engine.h, acks_held), for a caller that reads what is outstanding:
 * dat_ep_disconnect (a graceful one waits for them), dat_ep_get_status. */
void dto_ep_take_acks(struct ep *ep);

/* dat_ep_free, first: from now on the data path makes no completion and
 * serves nothing (its connection is being aborted). */
void dto_ep_quiesce(struct ep *ep);

/* dat_ep_free: drops every DTO without completion, releases SRQ buffers
 * the EP took, and waits until no thread still works on the EP. */
void dto_ep_destroy(struct ep *ep);

/* ---- the EP's side (ep.c) ------------------------------------------------ */

/* Ends the EP's connection as a failed data path does (dto_fail, then
 * dto_finish): every DTO outstanding completes DAT_DTO_ERR_FLUSHED, the EP
 * goes Disconnected with DAT_CONNECTION_EVENT_BROKEN on its connect EVD,
 * the channel closes (the peer's end breaks too); why goes to the trace.
 * Returns whether it did: false when the data path is not running (no
 * connection, or one ending already).  No lock held. */
bool dto_ep_break(struct ep *ep, const char *why);

/* ---- dat_ep_modify's side (ep_modify.c) ---------------------------------- */

/* dat_ep_modify gave the EP another PZ (in a quiescent state: no
 * connection).  Every posted receive with a segment in an LMR not of the
 * new PZ completes DAT_DTO_ERR_LOCAL_PROTECTION now, in posting order; the
 * others stay posted, in theirs. */
void dto_ep_pz_changed(struct ep *ep);

/* The most segments a Receive posted to the EP (and not completed) has: 0
 * with none.  dat_ep_modify keeps max_recv_iov at or above it. */
DAT_COUNT dto_ep_posted_recv_segments(struct ep *ep);

/* ---- the EVD's side (evd_ring.c) ----------------------------------------- */

/* The consumer took an event: a receive completion of an SRQ's buffer
 * makes that buffer reaped (srq.h). */
void dto_event_reaped(const DAT_EVENT *event);

/* dat_srq_post_recv added buffers to an SRQ of ia. */
void dto_srq_posted(struct ia *ia);

/* dat_rmr_bind, after its checks, on an EP Connected or Disconnected. */
struct rmr;
DAT_RETURN dto_post_bind(struct ep *ep, struct rmr *rmr, DAT_LMR_HANDLE lmr_handle,
                         const DAT_LMR_TRIPLET *triplet, DAT_MEM_PRIV_FLAGS mem_priv,
                         DAT_VA_TYPE va_type, DAT_RMR_COOKIE cookie,
                         DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *context);

/* ---- the IB extensions' side (extension.c) ------------------------------- *
 * The DAT 2.0 InfiniBand extensions dat_extension_op(3) offers
 * (dat_ib_extensions.h): RDMA Write with immediate data, 64-bit atomic
 * compare-and-swap and fetch-and-add.  extension.c parses the call and
 * posts through dto_post_ext; the engine moves them like the other
 * requests (the target applies an atomic under its own rules: an 8-byte
 * aligned target the rmr_context grants DAT_IB_MEM_PRIV_REMOTE_ATOMIC), and
 * extension.c dresses their completion events. */
enum dto_ext_kind {
        DTO_EXT_WRITE_IMM = 1,
        DTO_EXT_CMP_SWAP,
        DTO_EXT_FETCH_ADD,
};

struct dto_ext_post {
        enum dto_ext_kind kind;
        DAT_COUNT num_segments;
        const DAT_LMR_TRIPLET *local_iov;       /* atomics: the 8 bytes the old value lands in */
        DAT_DTO_COOKIE cookie;
        const DAT_RMR_TRIPLET *remote;
        uint32_t immed;                         /* WRITE_IMM */
        uint64_t compare;                       /* CMP_SWAP */
        uint64_t value;                         /* CMP_SWAP: the swap; FETCH_ADD: the addend */
        DAT_COMPLETION_FLAGS flags;
        int flags_arg;                          /* the flags' position, for DAT_INVALID_ARGn */
};

/* Posts an extended request with the checks of the other posts (and, for
 * atomics, a local buffer of at least 8 bytes: DAT_LENGTH_ERROR). */
DAT_RETURN dto_post_ext(DAT_EP_HANDLE ep_handle, const struct dto_ext_post *p);

/* extension.c: makes *event, a DTO completion the engine filled (ep,
 * cookie, status, length), the extended event of kind: on the initiator
 * (receive false) the request's own; on the target of a Write with
 * immediate data (receive true) the receive it consumed, carrying immed. */
void dto_ext_event(DAT_EVENT *event, enum dto_ext_kind kind, bool receive, uint32_t immed);

/* An application thread that polled the EVD's data paths is about to
 * sleep in dat_evd_wait: the progress thread must watch the channels (and
 * take what a poll held back, dto_engine.h acks_held). */
void dto_evd_sleep_prepare(struct evd *evd);
/* The same for a thread about to sleep in dat_cno_wait, whose EVDs are the
 * IA's: it polled nothing, and the progress thread may be leaving the
 * channels to an application that polled a moment ago. */
void dto_ia_sleep_prepare(struct ia *ia);

/* An application thread about to find an EVD empty: moves the data paths
 * of the EVD's IA along (non-blocking).  Returns whether it did any work.
 * first_record (dat_evd_dequeue): each data path's step ends with the first
 * whole record it takes, without looking for the next one -- whose line
 * the producer wrote last (it zeroed its header word), so that reading it
 * would wait for a cache miss before the poll returns: 0.02 us of a 0.23
 * us ping-pong.  What follows is the next poll's.  dat_evd_wait's polls,
 * the progress thread and a disconnect take all there is: each of their
 * rounds costs more than a look. */
bool dto_evd_poll(struct evd *evd, bool first_record);

#endif
