/* The shm transport's link: two byte streams, one per direction, in the
 * sealed memfd region datd makes for a same-host connection (shm_region.h)
 * and hands to both processes (proto/datp.h, EV_DATA_CHANNEL).
 *
 * Layout (SHM_LINK_HEADER bytes of region header, then two rings):
 *   region header: magic, version, ring_size, the offset of each ring;
 *   ring r (r = 0, 1): a control block of one page followed by ring_size
 *   data bytes (a power of two).  The control block groups words by
 *   writer, each group on lines of its own (128 bytes apart, as some cores
 *   fetch lines in pairs): the producer's "I wait for room" and "closed"
 *   flags, the consumer's byte count, and the consumer's "I sleep" flag
 *   (read by the producer after every write, written only when the
 *   consumer arms, so it stays in the producer's cache).
 * The end told `side` produces ring `side` and consumes ring 1 - side.
 *
 * The data bytes are records, each starting on a 64-byte cell: an 8-byte
 * header word (a mark and the record's length), then the bytes (from the
 * next cell on when there are more than 248, so that long copies move
 * aligned lines), up to the next cell boundary.  The producer fills a record, then stores its
 * header word last: the consumer polls the header word where the next
 * record starts, so a small record (up to 56 bytes) crosses between the
 * two processes as one cache line, with no counter of the producer's to
 * fetch beside it.  Before it publishes a record the producer zeroes the
 * header word of the cell after it, so what the consumer finds there is
 * never a stale record of the previous lap.
 *
 * The consumer's count runs freely as a 64-bit byte counter of whole
 * records read; the producer reads it only when its own copy says the
 * ring is too full.  The peer is not trusted: each end keeps its own
 * position privately and checks what it reads of the peer every time (a
 * record header's mark and length, the consumer's count never backwards
 * and never past what was written), so that a corrupt or hostile peer gets
 * -EPROTO, never a crash or an access outside the region.
 *
 * Reads and writes are non-blocking and partial, like a non-blocking
 * stream socket: the bytes of successive records form one byte stream, on
 * which the DTO engine above frames messages and keeps its own backlog.
 * No lock, no system call while there is data or room;
 * the only system call is a write to the peer's doorbell (an eventfd)
 * when the peer announced that it sleeps (consumer waiting for data, or
 * producer waiting for room).  An end sleeps by arming, re-checking, and
 * then waiting for its own doorbell to become readable (poll/epoll): the
 * doorbell fd is what the IA's progress thread watches.  Doorbells are
 * non-blocking eventfds (EFD_NONBLOCK): draining one that did not ring
 * must not block.
 *
 * A peer can also set the "closed" flag of our own direction: our writes
 * then say -EPIPE, which is all the harm it can do with it. */
#ifndef DATD_LIBDAT_SHM_LINK_H
#define DATD_LIBDAT_SHM_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define SHM_LINK_MAGIC 0x4b4c5344u      /* "DSLK" */
#define SHM_LINK_VERSION 2
#define SHM_LINK_HEADER 4096
/* Ring sizes: powers of two in [SHM_LINK_RING_MIN, SHM_LINK_RING_MAX]. */
#define SHM_LINK_RING_MIN 4096u
#define SHM_LINK_RING_MAX (64u << 20)
/* The most one write takes into an empty ring of ring_size bytes: the
 * ring less the cell kept free for the next record's header and the
 * header cells of the four records (each at most a quarter of the ring)
 * the bytes then take. */
#define SHM_LINK_WRITE_MAX(ring_size) ((size_t)(ring_size) - 5 * 64)

struct shm_link_ring;                   /* the shared control block */

/* One end's private view of one direction. */
struct shm_link_dir {
        struct shm_link_ring *ctl;      /* in the region */
        unsigned char *data;            /* ring_size bytes, in the region */
        uint64_t count;                 /* where our next record starts (producer: written,
                                         * consumer: read whole), a byte counter */
        uint64_t peer;                  /* producer: the consumer's counter as last read and checked */
        uint32_t rec_len;               /* consumer: length of the record being read, 0: none */
        uint32_t rec_off;               /* consumer: its bytes read so far */
};

/* One end's private view of the link. */
struct shm_link {
        void *mem;                      /* the mapped region (not owned) */
        size_t size;
        uint32_t ring_size;
        unsigned side;
        struct shm_link_dir tx;         /* ring `side`: we produce */
        struct shm_link_dir rx;         /* ring 1 - side: we consume */
        int doorbell_mine;              /* what we wait on (not owned) */
        int doorbell_peer;              /* what we write to wake the peer (not owned) */
        bool doorbell_sock;             /* datagram sockets (send, recvmmsg); else pipes or
                                         * eventfds (write, read); false after attach */
        uint64_t doorbell_writes;       /* wake-ups we made (for benchmarks/tests) */
        bool quiet;                     /* shm_link_quiet: the peer is not woken */
};

/* Bytes a region with two rings of ring_size bytes takes; 0 when
 * ring_size is not allowed. */
size_t shm_link_region_size(uint32_t ring_size);

/* datd: lays out the header and two empty rings in mem (size bytes, as
 * shm_link_region_size(ring_size) said, page aligned).  0 or -EINVAL. */
int shm_link_init(void *mem, size_t size, uint32_t ring_size);

/* datd: the same layout written into a fresh (all-zero) region file of
 * size bytes by pwrite, without mapping it: only the header needs values,
 * the empty rings' counters are the file's zeros.  0, -EINVAL, or -errno. */
int shm_link_init_fd(int fd, size_t size, uint32_t ring_size);

/* datd: lays a used region file out afresh for another connection, in
 * two writes without mapping it: the header (all of it, as shm_link_init
 * lays it out), each ring's control block and the first cell of its data,
 * where the header word of its first record goes; nothing else.  What the
 * rings held before is never read again (a consumer reads only records
 * the producer published after zeroing the header word that follows
 * them).  Only when neither end touches the region any more.  0, -EINVAL,
 * or -errno. */
int shm_link_reset_fd(int fd, size_t size, uint32_t ring_size);

/* libdat: checks the region header against what datd said (size,
 * ring_size) and fills *out for end `side` (0 or 1) with the two
 * doorbells.  0, -EPROTO (header wrong: magic, version, ring_size, flags,
 * ring offsets, or counters more than a ring apart), -EINVAL (arguments:
 * side, a ring_size not allowed, size below shm_link_region_size(ring_size),
 * mem not page aligned). */
int shm_link_attach(void *mem, size_t size, uint32_t ring_size, unsigned side, int doorbell_mine,
                    int doorbell_peer, struct shm_link *out);

/* Before attaching: maps in, writable, the pages every connection touches
 * (the header, each ring's control block and first data page, where
 * shm_link_init lays them out): two system calls instead of a page fault
 * for each.  Only a hint: nothing fails if it does. */
void shm_link_prefault(void *mem, size_t size, uint32_t ring_size);

/* Producer: copies up to the free room of the iovec into the tx ring, as
 * one record or (beyond a quarter of the ring, so that the consumer can
 * start on the first while the rest is copied) several, and publishes
 * each (waking the peer if it sleeps).  Returns the bytes written (0 when
 * the ring is full), -EPIPE after shm_link_close_tx, -EPROTO when the
 * peer's counter is impossible. */
ssize_t shm_link_writev(struct shm_link *l, const struct iovec *iov, int iovcnt);

/* Producer: where a record of n bytes (1 to 248: one whose bytes share
 * its header's cell and those after it) would go, to be filled in place
 * and published with shm_link_commit(l, n) (it zeroes the header word
 * after it, which the consumer reads only after n's); NULL when the ring has no
 * room for it, its bytes would wrap around the ring's end, or our side is
 * closed (shm_link_writev then says which).  Nothing else may be written
 * in between. */
void *shm_link_reserve(struct shm_link *l, size_t n);
void shm_link_commit(struct shm_link *l, size_t n);

/* Consumer: copies up to the available bytes into the iovec and gives the
 * room of the records read whole back (waking the producer if it waits
 * for room).  Returns the bytes read; 0 when empty; -EPIPE when empty and
 * the peer closed its side; -EPROTO when the next record is impossible
 * (after the bytes before it were read). */
ssize_t shm_link_readv(struct shm_link *l, const struct iovec *iov, int iovcnt);

/* Consumer: the next record's bytes where they lie in the ring, without a
 * copy, when a whole record is there, none is being read, its bytes do not
 * wrap around the ring's end and they are at most max; NULL otherwise (read
 * it with shm_link_readv).  *len: their number; with NULL, 0 when no record
 * is there at all, else not 0.  They stay the ring's until
 * shm_link_consume, and the peer can still write them: copy what must be
 * checked before checking it. */
const void *shm_link_peek(struct shm_link *l, size_t max, size_t *len);

/* Consumer: gives the peeked record's room back (waking the producer if it
 * waits for room).  Only after a shm_link_peek that returned bytes.  With
 * look, returns whether another record (or an impossible one) is there
 * already; without, false, and the next record's line is not touched: the
 * producer wrote its header word last (zeroing it), and reading it now
 * would wait for that line to come over from the producer's core. */
bool shm_link_consume(struct shm_link *l, bool look);

/* Consumer: bytes readable now without looking past the next record (a
 * hint: more records may follow); an impossible record counts as 1 byte,
 * so that whoever polls reads and learns -EPROTO. */
size_t shm_link_readable(const struct shm_link *l);

/* Consumer: whether a read now would return something: bytes, -EPROTO or
 * -EPIPE (shm_link_readable() > 0 || shm_link_peer_closed(), in one look:
 * the test of every poll of an idle link). */
bool shm_link_rx_ready(const struct shm_link *l);

/* Producer: the most a write would take now (SHM_LINK_WRITE_MAX when the
 * consumer read everything; 0 also when its counter is impossible). */
size_t shm_link_writable(const struct shm_link *l);

/* Going to sleep on doorbell_mine: announce it (if want_data, consumer
 * side: "wake me when data comes"; if want_room, producer side: "wake me
 * when room frees"), then re-check.  Returns true when the caller may
 * sleep (nothing to read if want_data, still no room if want_room), false
 * when it must not (work is there: the announcements are withdrawn
 * again).  An end that takes nothing in (a frame waits for a receive)
 * arms without want_data: data waiting is no work for it, and the peer's
 * writes ring nothing. */
bool shm_link_arm(struct shm_link *l, bool want_data, bool want_room);

/* Withdraws the announcements (after waking, or when an application thread
 * takes over polling). */
void shm_link_disarm(struct shm_link *l);

/* Reads (resets) doorbell_mine; call after it polled readable. */
void shm_link_doorbell_drain(struct shm_link *l);

/* This end will write no more: the peer's reads return -EPIPE once they
 * have drained what was written.  Wakes the peer. */
void shm_link_close_tx(struct shm_link *l);

/* on: our writes and shm_link_close_tx wake the peer no more (it learns
 * of what follows some other way: the end of an orderly connection from
 * datd's event); off: as before.  A fresh attach is not quiet. */
void shm_link_quiet(struct shm_link *l, bool on);

/* Whether the peer closed its direction (and everything it wrote was read). */
bool shm_link_peer_closed(const struct shm_link *l);

#endif
