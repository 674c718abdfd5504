/* A lock-free single-producer/single-consumer ring of fixed-size slots in
 * memory shared by two processes: the shm transport's data path.
 *
 * The region holds a versioned header (magic, slot size, slot count), the
 * producer's index, the consumer's index and the consumer's "I sleep" flag,
 * each on a cache line of its own, then the slots.  A slot is a small
 * header (payload length and a 32-bit kind the transport defines) and the
 * payload inline.  Indices run freely modulo 2^32; a slot is index & mask,
 * stamped with the index of the message it holds.
 *
 * The peer is not trusted: shm_ring_attach() checks every header field,
 * and each side keeps its own index privately and checks the peer's every
 * time it reads it, so that a corrupt or hostile peer gets -EPROTO, never
 * a crash, a read or write outside the region, or our index rewound.
 *
 * Producer and consumer make no system call and take no lock while there
 * is work: the only system call on the producer's side is the wake-up of a
 * consumer that announced, in the shared flag, that it sleeps.
 *
 * Not wired into endpoints yet (issue 5).  What remains: datd creates the
 * region (shm_region_create, two rings: one per direction) at ESTABLISHED
 * and passes its fd to both sides with SCM_RIGHTS, the ring geometry in the
 * connection messages and a size limit in datd.conf; the message kinds
 * (send, RDMA request, ack, disconnect) and payloads larger than a slot
 * (process_vm_readv/writev, or chunks through the ring where the kernel
 * refuses it); dat_ep_post_send/recv and completions into the EVDs, with
 * dat_evd_wait sleeping on both the EVD and the ring; a producer that
 * waits for room on a full ring (the same announce-then-sleep on tail). */
#ifndef DATD_LIBDAT_SHM_RING_H
#define DATD_LIBDAT_SHM_RING_H

#include <stddef.h>
#include <stdint.h>

#include "libdat/libdat.h"

#define SHM_RING_MAGIC 0x52534444u      /* "DDSR" */
#define SHM_RING_VERSION 1
/* Slots are whole cache lines, up to 64 KiB; 2 to 2^20 of them. */
#define SHM_RING_SLOT_ALIGN 64
#define SHM_RING_SLOT_MAX 65536
#define SHM_RING_SLOTS_MIN 2
#define SHM_RING_SLOTS_MAX (1u << 20)
/* A slot's header before its payload. */
#define SHM_RING_SLOT_HEADER 16

/* One side's view of a ring: private, never in the shared region, so the
 * peer cannot change what we believe our own index or the geometry is. */
struct shm_ring {
        struct shm_ring_shared *shared;
        unsigned char *slots;
        uint32_t slot_size;
        uint32_t mask;                  /* slot count - 1 */
        uint32_t payload_max;           /* slot_size - SHM_RING_SLOT_HEADER */
        uint32_t head;                  /* producer: the next slot to fill */
        uint32_t tail;                  /* consumer: the next slot to read */
        uint32_t peer;                  /* producer: tail as last read;
                                           consumer: tail + 1 once peeked */
        uint64_t wake_calls;            /* producer: futex wake-ups made */
};

/* A message the consumer peeked: data points into the shared slot, len was
 * checked against the slot once and is not read again from shared memory.
 * The peer can still rewrite the bytes: copy them before trusting them. */
struct shm_ring_msg {
        const void *data;
        uint32_t len;
        uint32_t kind;
};

/* Bytes a ring of slots slots of slot_size bytes takes; 0 when the
 * geometry is not allowed (see the limits above). */
size_t shm_ring_layout_size(uint32_t slots, uint32_t slot_size);

/* Lays out an empty ring in mem (size bytes, 64-byte aligned).  0, or
 * -EINVAL for a geometry not allowed or a region too small. */
int shm_ring_init(void *mem, size_t size, uint32_t slots, uint32_t slot_size);

/* Checks the ring in mem (size bytes, possibly written by another process)
 * and fills *out, for either side.  0, or -EPROTO when anything in the
 * header is wrong or does not fit in size, -EINVAL for a misaligned mem. */
int shm_ring_attach(void *mem, size_t size, struct shm_ring *out);

/* Producer: *payload gets the next free slot's payload area
 * (r->payload_max bytes).  0, -EAGAIN when full, -EPROTO when the
 * consumer's index is impossible.  Reserving again before committing
 * returns the same slot. */
int shm_ring_reserve(struct shm_ring *r, void **payload);

/* Producer: publishes the reserved slot with len payload bytes, and wakes
 * the consumer if it announced it sleeps.  -EINVAL when len does not fit. */
int shm_ring_commit(struct shm_ring *r, uint32_t len, uint32_t kind);

/* Consumer: the oldest message, left in the ring.  0, -EAGAIN when empty,
 * -EPROTO when the producer's index or the slot's length is impossible. */
int shm_ring_peek(struct shm_ring *r, struct shm_ring_msg *msg);

/* Consumer: gives the peeked slot back to the producer. */
void shm_ring_release(struct shm_ring *r);

/* Consumer: waits until the ring holds a message, polling briefly and then
 * sleeping on a shared futex.  0, -ETIMEDOUT, -EINTR, or -EPROTO. */
int shm_ring_wait(struct shm_ring *r, DAT_TIMEOUT timeout_us);

/* Producer: slots it can fill now.  Consumer: messages it can read now.
 * Both 0 when the peer's index is impossible (the next call says -EPROTO). */
uint32_t shm_ring_free_slots(const struct shm_ring *r);
uint32_t shm_ring_pending(const struct shm_ring *r);

static inline uint32_t shm_ring_capacity(const struct shm_ring *r)
{
        return r->mask + 1;
}

#endif
