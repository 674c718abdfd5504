/* The frames two libdat processes exchange over a connection's data
 * channel (dto.h): a byte stream (shm ring or TCP), in the host byte order
 * of the initiating host for shm and little endian for tcp (libdat only
 * runs on little-endian hosts today: dto_conn.c refuses to build
 * otherwise).
 *
 * Every frame starts with a 40-byte header; then, for DTO_F_CMA, nseg
 * segment descriptors (the sender's own memory, for the receiver's
 * process_vm_readv/writev); then, unless DTO_F_CMA, len payload bytes.
 *
 *   HELLO     same host only, once, before the sender's first request of
 *             DTO_CMA_THRESHOLD bytes or more (none: no HELLO): len 8 (a
 *             probe value), addr (where the value lives in the sender's
 *             memory): the receiver tries to read it with process_vm_readv
 *             to learn whether it may use cross-memory attach on the
 *             sender.  That request and those after it wait for the answer.
 *   CMA_OK    answer to HELLO: status 1 when the probe read back right;
 *             one without a HELLO before it breaks the rules.
 *   SEND      a message (flags DTO_F_SOLICITED), answered by ACK.
 *   WRITE     RDMA Write of len bytes to (rmr_context, addr), by ACK.
 *   READ_REQ  RDMA Read of len bytes from (rmr_context, addr), answered by
 *             READ_RESP; with DTO_F_CMA the segments say where the target
 *             pushes the data, else the data comes inline in READ_RESP.
 *   ACK       with status DAT_DTO_SUCCESS (seq 0): carries only `ack`,
 *             when no other frame goes the peer's way to carry it; with an
 *             error status: seq of the SEND/WRITE refused.
 * Acknowledgements are cumulative and ride on every frame: `ack` says the
 * peer's SENDs and WRITEs up to that seq were placed (those before it that
 * were refused or are RDMA Reads were answered before, in order), so a
 * message answered by a message costs no frame of its own.
 * DTO_F_ACK_LATER (tcp): the sender had DTO_ACK_LATER_DEPTH or more requests
 * unacknowledged with this one, so an acknowledgement of it may wait until
 * DTO_ACK_LATER_BATCH are owed; a receiver that ignores the flag acks as
 * always.  A sender that waits for the rest (its stream written out, or
 * going to sleep) asks with a lone ACK, which the receiver answers at once
 * with what it owes (dto_engine.h).
 *   READ_RESP seq, status; inline data (len bytes) unless DTO_F_CMA.
 *   CMP_SWAP, FETCH_ADD
 *             64-bit atomics on (rmr_context, addr), 8-byte aligned: len 16
 *             inline (compare and swap, or the addend and 0), answered by a
 *             READ_RESP with the 8 bytes the target held before.
 *   WRITE with DTO_F_IMM: status is 32 bits of immediate data; the target
 *             consumes a receive for it, like a SEND.
 *   WRITE with DTO_F_MAP_OK (shm): the sender could write straight into
 *             the target memory if it were shared memory it may map: the
 *             receiver may answer with an EXPORT; one that ignores the flag
 *             answers nothing more.
 *   EXPORT    (shm, only to a sender of DTO_F_MAP_OK) the window rmr_context
 *             reaches is shared memory the sender may map (shm_direct.h):
 *             seq the slot of the receiver's export table, addr the slot's
 *             state, status the table's descriptor in the receiver's
 *             process; no payload.  Answers no request: it goes among the
 *             responses, which it does not count among.
 *   BYE       the sender ends its side in order (a disconnect): the end of
 *             the stream after it is no failure; without it, it is one
 *             (the peer process died).  On shm neither wakes the peer: it
 *             reads them when datd's event for the disconnect stops its
 *             data path.
 * Responses come in the order of the requests they answer; any frame that
 * breaks these rules ends the connection (BROKEN). */
#ifndef DATD_LIBDAT_DTO_WIRE_H
#define DATD_LIBDAT_DTO_WIRE_H

#include <stdint.h>

enum dto_op {
        DTO_OP_HELLO = 1,
        DTO_OP_CMA_OK = 2,
        DTO_OP_SEND = 3,
        DTO_OP_WRITE = 4,
        DTO_OP_READ_REQ = 5,
        DTO_OP_ACK = 6,
        DTO_OP_READ_RESP = 7,
        DTO_OP_BYE = 8,
        DTO_OP_CMP_SWAP = 9,
        DTO_OP_FETCH_ADD = 10,
        DTO_OP_EXPORT = 11,
};

enum dto_frame_flags {
        DTO_F_SOLICITED = 1,            /* SEND: the receiver's completion notifies */
        DTO_F_CMA = 2,                  /* payload by cross-memory attach, segments follow */
        DTO_F_IMM = 4,                  /* WRITE: status carries immediate data for a receive */
        DTO_F_ACK_LATER = 8,            /* SEND/WRITE: its acknowledgement may wait (below) */
        DTO_F_MAP_OK = 16,              /* WRITE: the sender takes an EXPORT (above) */
};

/* Segments one frame may describe: the transport's max_iov_segments. */
#define DTO_MAX_SEGS 16

struct dto_frame {
        uint8_t op;                     /* enum dto_op */
        uint8_t flags;                  /* enum dto_frame_flags */
        uint16_t nseg;                  /* DTO_F_CMA: descriptors following, else 0 */
        uint32_t seq;                   /* requests: numbered from 1 per direction; responses: echo */
        uint64_t len;                   /* payload bytes */
        uint64_t addr;                  /* WRITE/READ_REQ: target address; HELLO: probe address */
        uint32_t rmr_context;           /* WRITE/READ_REQ */
        uint32_t status;                /* ACK/READ_RESP: DAT_DTO_COMPLETION_STATUS; CMA_OK: 0/1 */
        uint32_t ack;                   /* every frame: the sender's cumulative acknowledgement */
        uint32_t reserved;              /* 0 */
};

struct dto_seg {
        uint64_t addr;
        uint64_t len;
};

_Static_assert(sizeof(struct dto_frame) == 40, "dto_frame is 40 bytes on the wire");
_Static_assert(sizeof(struct dto_seg) == 16, "dto_seg is 16 bytes on the wire");

#endif
