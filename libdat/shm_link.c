/* The shm transport's link: two rings of records in a shared region (see
 * shm_link.h).
 *
 * Ordering.  The producer zeroes the header word of the cell after its
 * record, copies the bytes in, then stores the record's header word; the
 * consumer loads that word with acquire before it copies the bytes out,
 * then publishes its own counter, which the producer loads with acquire
 * before it overwrites the bytes.  The producer keeps the consumer's
 * counter as last seen and reads the consumer's line only when that says
 * there is not enough room, so a busy stream of small records moves the
 * data lines, nothing else: one line per record of up to 56 bytes.
 *
 * Sleeping is Dekker's pattern, once per direction of wake-up:
 *   sleeper: store "I sleep" flag; full barrier; re-check for work;
 *   waker:   publish the work; full barrier; load the flag.
 * One of the two sees the other's store, so either the sleeper finds the
 * work or the waker finds the flag and rings the doorbell.  The barrier is
 * the store itself on the waker's side: the record's header word (or the
 * consumer's counter) is published with a sequentially consistent
 * exchange (one locked instruction on x86, cheaper than a store and a
 * fence) and the flag loaded sequentially consistent; the sleeper stores
 * its flag the same way and re-checks with a sequentially consistent
 * load.  The waker takes the flag down with an exchange as it rings, so
 * that a burst of writes makes one system call; the sleeper's flag store
 * is also a release, so that it is ordered after the sleeper's last drain
 * of its doorbell and a ring meant for this sleep cannot be drained by the
 * previous wake-up.  A doorbell (a pipe, a datagram socket, or in tests an
 * eventfd) keeps a ring that comes early readable, so a stale one only
 * makes a spurious wake-up, never a lost one.
 *
 * What the peer wrote is checked every time it is read: a record's header
 * word must carry the mark and a length that fits a record of this ring,
 * the consumer's counter may only move forward and never past what was
 * written.  Our own positions are private (struct shm_link_dir), so the
 * peer cannot make us read or write outside the ring. */
#include "config.h"

#include "libdat/shm_link.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/macro.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23          /* Linux 5.14, glibc 2.35 */
#endif

/* Two lines apart: some cores prefetch cache lines in adjacent pairs, and
 * words the two ends write must never share one. */
#define LINK_LINE 128
/* Each ring's data starts on a page of its own after its control block. */
#define LINK_CTL_SIZE 4096

struct shm_link_header {
        uint32_t magic;
        uint32_t version;
        uint32_t ring_size;
        uint32_t flags;                 /* none defined: must be 0 */
        uint64_t ring_offset[2];        /* from the start of the region */
};

/* Grouped by writer.  The producer's line: the two flags it writes.
 * The consumer's line: its counter.  The consumer's sleep flag on a line
 * of its own: the producer reads it after every write, and it stays
 * shared in the producer's cache until the consumer arms. */
struct shm_link_ring {
        uint32_t want_room;             /* producer: "wake me when room frees" */
        uint32_t closed;                /* producer: "I write no more" */
        unsigned char pad0[LINK_LINE - 8];
        uint64_t consumed;              /* consumer: bytes of whole records read */
        unsigned char pad1[LINK_LINE - 8];
        uint32_t sleeping;              /* consumer: "wake me when data comes" */
        unsigned char pad2[LINK_LINE - 4];
};

/* Records start on cells; a header word is the mark in its high half and
 * the length in its low half.  Zero: no record (yet). */
#define LINK_CELL 64u
#define REC_HEADER 8u
/* Records up to this long carry their bytes right after the header word;
 * longer ones from the next cell on, so that their copies move whole
 * aligned lines. */
#define REC_INLINE_MAX 248u
#define REC_MARK 0x52454344ull          /* "DCER" */

_Static_assert(sizeof(struct shm_link_header) <= SHM_LINK_HEADER, "region header fits");
_Static_assert(sizeof(struct shm_link_ring) <= LINK_CTL_SIZE, "control block fits");

static inline size_t size_min(size_t a, size_t b)
{
        return a < b ? a : b;
}

static bool ring_size_allowed(uint32_t ring_size)
{
        return ring_size >= SHM_LINK_RING_MIN && ring_size <= SHM_LINK_RING_MAX &&
               (ring_size & (ring_size - 1)) == 0;
}

static size_t ring_span(uint32_t ring_size)
{
        return LINK_CTL_SIZE + (size_t)ring_size;
}

size_t shm_link_region_size(uint32_t ring_size)
{
        if (!ring_size_allowed(ring_size))
                return 0;
        return SHM_LINK_HEADER + 2 * ring_span(ring_size);
}

/* The region header every way of laying a region out writes. */
static void header_fill(struct shm_link_header *h, uint32_t ring_size)
{
        memset(h, 0, sizeof(*h));
        for (unsigned r = 0; r < 2; r++)
                h->ring_offset[r] = SHM_LINK_HEADER + r * ring_span(ring_size);
        h->version = SHM_LINK_VERSION;
        h->ring_size = ring_size;
        h->magic = SHM_LINK_MAGIC;
}

/* A region of size bytes holds the link of ring_size. */
static bool region_fits(size_t size, uint32_t ring_size)
{
        size_t need = shm_link_region_size(ring_size);

        return need != 0 && size >= need;
}

int shm_link_init(void *mem, size_t size, uint32_t ring_size)
{
        struct shm_link_header *h = mem, fresh;

        if (mem == NULL || !region_fits(size, ring_size) || (uintptr_t)mem % LINK_CTL_SIZE != 0)
                return -EINVAL;
        header_fill(&fresh, ring_size);
        fresh.magic = 0;
        /* Header and both control blocks; the data bytes need no value. */
        memset(mem, 0, SHM_LINK_HEADER);
        memcpy(h, &fresh, sizeof(fresh));
        for (unsigned r = 0; r < 2; r++)
                memset((unsigned char *)mem + h->ring_offset[r], 0, sizeof(struct shm_link_ring));
        /* Last: a peer that attaches sees the magic only over a whole header. */
        __atomic_store_n(&h->magic, SHM_LINK_MAGIC, __ATOMIC_RELEASE);
        return 0;
}

/* pwritev of all of iov at off: 0, -errno, or -EIO when it fell short. */
static int write_all_at(int fd, const struct iovec *iov, int n, off_t off)
{
        size_t want = 0;
        ssize_t done;

        for (int i = 0; i < n; i++)
                want += iov[i].iov_len;
        do
                done = pwritev(fd, iov, n, off);
        while (done < 0 && errno == EINTR);
        if (done < 0)
                return -errno;
        return (size_t)done == want ? 0 : -EIO;
}

int shm_link_init_fd(int fd, size_t size, uint32_t ring_size)
{
        struct shm_link_header h;

        /* Nobody has the file yet: the order of the fields does not matter. */
        if (fd < 0 || !region_fits(size, ring_size))
                return -EINVAL;
        header_fill(&h, ring_size);
        return write_all_at(fd, &(struct iovec){ &h, sizeof(h) }, 1, 0);
}

int shm_link_reset_fd(int fd, size_t size, uint32_t ring_size)
{
        /* A control block and the first cell of a ring's data: the header
         * word a consumer polls first must say "no record" again. */
        static const unsigned char zero[LINK_CTL_SIZE + LINK_CELL];
        struct shm_link_header h;
        int r;

        if (fd < 0 || !region_fits(size, ring_size))
                return -EINVAL;
        header_fill(&h, ring_size);
        /* Ring 0 follows the header: both in one call (the header's rest
         * zeroed, as shm_link_init does), one system call less for each
         * connection datd lays a kept channel out for. */
        r = write_all_at(fd,
                         (struct iovec[]){ { &h, sizeof(h) },
                                           { (void *)zero, SHM_LINK_HEADER - sizeof(h) },
                                           { (void *)zero, sizeof(zero) } },
                         3, 0);
        if (r == 0)
                r = write_all_at(fd, &(struct iovec){ (void *)zero, sizeof(zero) }, 1,
                                 (off_t)(SHM_LINK_HEADER + ring_span(ring_size)));
        return r;
}

void shm_link_prefault(void *mem, size_t size, uint32_t ring_size)
{
        /* Ring 0 follows the header: one range for both. */
        size_t end[2] = { SHM_LINK_HEADER, SHM_LINK_HEADER + ring_span(ring_size) };
        size_t start[2] = { 0, end[1] };

        if (!region_fits(size, ring_size))
                return;
        for (unsigned r = 0; r < 2; r++) {
                end[r] += LINK_CTL_SIZE + SHM_LINK_RING_MIN;
                /* EINVAL before Linux 5.14: the pages fault in as they did. */
                (void)madvise((unsigned char *)mem + start[r], end[r] - start[r],
                              MADV_POPULATE_WRITE);
        }
}

/* A ring's place: page aligned, inside the region, after the header. */
static bool ring_offset_valid(uint64_t off, size_t size, uint32_t ring_size)
{
        return off % LINK_CTL_SIZE == 0 && off >= SHM_LINK_HEADER && off <= size &&
               size - off >= ring_span(ring_size);
}

/* Both ends start where the consumer's counter says (a fresh region: 0),
 * on a cell. */
static int attach_dir(struct shm_link_dir *d, unsigned char *ring)
{
        struct shm_link_ring *ctl = (struct shm_link_ring *)ring;
        uint64_t c = __atomic_load_n(&ctl->consumed, __ATOMIC_ACQUIRE);

        if (c % LINK_CELL != 0)
                return -EPROTO;
        *d = (struct shm_link_dir){
                .ctl = ctl,
                .data = ring + LINK_CTL_SIZE,
                .count = c,
                .peer = c,
        };
        return 0;
}

/* Each header field is read once into a local: the peer may change the
 * region while we check it, and we must use exactly what we checked. */
int shm_link_attach(void *mem, size_t size, uint32_t ring_size, unsigned side, int doorbell_mine,
                    int doorbell_peer, struct shm_link *out)
{
        struct shm_link_header *h = mem;
        uint64_t off[2];
        int r;

        if (mem == NULL || out == NULL || side > 1 || !region_fits(size, ring_size) ||
            (uintptr_t)mem % LINK_CTL_SIZE != 0)
                return -EINVAL;
        if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SHM_LINK_MAGIC ||
            __atomic_load_n(&h->version, __ATOMIC_RELAXED) != SHM_LINK_VERSION ||
            __atomic_load_n(&h->ring_size, __ATOMIC_RELAXED) != ring_size ||
            __atomic_load_n(&h->flags, __ATOMIC_RELAXED) != 0)
                return -EPROTO;
        for (unsigned i = 0; i < 2; i++) {
                off[i] = __atomic_load_n(&h->ring_offset[i], __ATOMIC_RELAXED);
                if (!ring_offset_valid(off[i], size, ring_size))
                        return -EPROTO;
        }
        /* The two rings must not overlap. */
        if ((off[0] < off[1] ? off[1] - off[0] : off[0] - off[1]) < ring_span(ring_size))
                return -EPROTO;

        *out = (struct shm_link){
                .mem = mem,
                .size = size,
                .ring_size = ring_size,
                .side = side,
                .doorbell_mine = doorbell_mine,
                .doorbell_peer = doorbell_peer,
        };
        r = attach_dir(&out->tx, (unsigned char *)mem + off[side]);
        if (r == 0)
                r = attach_dir(&out->rx, (unsigned char *)mem + off[1 - side]);
        return r;
}

/* A datagram socket is rung so that it never raises SIGPIPE nor blocks
 * whatever its flags; a pipe is non-blocking, and its ringer holds a read
 * end of it (daemon/channel.h), so it raises no SIGPIPE either; an eventfd
 * (tests) is one file of ours. */
static void ring_doorbell(const struct shm_link *l, const uint64_t *one)
{
        if (l->doorbell_sock)
                (void)send(l->doorbell_peer, one, sizeof(*one), MSG_DONTWAIT | MSG_NOSIGNAL);
        else
                (void)!write(l->doorbell_peer, one, sizeof(*one));
}

/* Rings the peer's doorbell if the flag says it sleeps, taking the flag
 * down (see the top).  The caller published its counter with a
 * sequentially consistent exchange. */
static void wake_if_armed(struct shm_link *l, uint32_t *flag)
{
        static const uint64_t one = 1;

        if (_likely_(__atomic_load_n(flag, __ATOMIC_SEQ_CST) == 0) || l->quiet)
                return;
        if (__atomic_exchange_n(flag, 0, __ATOMIC_ACQ_REL) == 0)
                return;
        l->doorbell_writes++;
        /* EAGAIN only when the counter is near 2^64: it is readable then. */
        ring_doorbell(l, &one);
}

/* The consumer's counter c is possible: forward from what we saw, never
 * past what we wrote. */
static inline bool consumed_valid(const struct shm_link_dir *d, uint64_t c)
{
        return c - d->peer <= d->count - d->peer;
}

/* Producer: the consumer's counter, checked; -EPROTO when impossible. */
static int load_consumed(struct shm_link_dir *d)
{
        uint64_t c = __atomic_load_n(&d->ctl->consumed, __ATOMIC_ACQUIRE);

        if (!consumed_valid(d, c))
                return -EPROTO;
        d->peer = c;
        return 0;
}

/* Where a record's bytes start, from its header word. */
static inline size_t data_offset(size_t len)
{
        return len <= REC_INLINE_MAX ? REC_HEADER : LINK_CELL;
}

static inline size_t cells_of(size_t len)
{
        return (data_offset(len) + len + LINK_CELL - 1) / LINK_CELL;
}

/* The longest record that fits in span bytes (whole cells). */
static size_t record_fitting(size_t span)
{
        if (span > LINK_CELL + REC_INLINE_MAX)
                return span - LINK_CELL;
        if (span < LINK_CELL)
                return 0;
        return size_min(span - REC_HEADER, REC_INLINE_MAX);
}

/* The longest record the ring takes at the producer's position, with the
 * consumer at c: it must leave the cell after it free, whose header word
 * it zeroes. */
static size_t record_room(const struct shm_link *l, uint64_t pos, uint64_t c)
{
        size_t free_cells = (l->ring_size - (size_t)(pos - c)) / LINK_CELL;

        return free_cells >= 2 ? record_fitting((free_cells - 1) * LINK_CELL) : 0;
}

/* One record: no more than a quarter of the ring, so that the consumer
 * starts on a long write's first record while the producer copies the
 * next. */
static size_t record_max(const struct shm_link *l)
{
        return record_fitting(l->ring_size / 4);
}

static inline uint64_t *header_at(const struct shm_link *l, const struct shm_link_dir *d, uint64_t pos)
{
        return (uint64_t *)(void *)(d->data + (pos & (l->ring_size - 1)));
}

/* A header word's length, or 0 when it is no possible record. */
static inline uint32_t record_len(const struct shm_link *l, uint64_t w)
{
        uint32_t len = (uint32_t)w;

        if (w >> 32 != REC_MARK || len == 0 || len > record_max(l))
                return 0;
        return len;
}

/* A cursor over an iovec. */
struct iov_cursor {
        const struct iovec *iov;
        int iovcnt;
        int i;
        size_t off;
};

/* ring_copy where the n bytes do not wrap: one copy per iovec piece. */
static void flat_copy(unsigned char *p, struct iov_cursor *c, size_t n, bool to_ring)
{
        while (n > 0 && c->i < c->iovcnt) {
                const struct iovec *v = &c->iov[c->i];
                unsigned char *base = (unsigned char *)v->iov_base + c->off;
                size_t len = v->iov_len - c->off;

                if (len > n) {
                        len = n;
                        c->off += len;
                } else {
                        c->i++;
                        c->off = 0;
                }
                if (to_ring)
                        memcpy(p, base, len);
                else
                        memcpy(base, p, len);
                p += len;
                n -= len;
        }
}

/* Copies n bytes between the ring (from byte counter pos on, wrapping) and
 * the cursor's iovec, moving the cursor; to_ring says which way. */
static void ring_copy(unsigned char *data, uint32_t ring_size, uint64_t pos, struct iov_cursor *c,
                      size_t n, bool to_ring)
{
        uint32_t mask = ring_size - 1;

        /* Most records' bytes lie in one piece. */
        if ((size_t)(pos & mask) + n <= ring_size) {
                flat_copy(data + (pos & mask), c, n, to_ring);
                return;
        }

        while (n > 0 && c->i < c->iovcnt) {
                unsigned char *base = (unsigned char *)c->iov[c->i].iov_base + c->off;
                size_t len = size_min(c->iov[c->i].iov_len - c->off, n);

                n -= len;
                c->off += len;
                if (c->off == c->iov[c->i].iov_len) {
                        c->i++;
                        c->off = 0;
                }
                while (len > 0) {
                        size_t at = (size_t)(pos & mask);
                        size_t chunk = size_min(len, ring_size - at);

                        if (to_ring)
                                memcpy(data + at, base, chunk);
                        else
                                memcpy(base, data + at, chunk);
                        base += chunk;
                        pos += chunk;
                        len -= chunk;
                }
        }
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
        size_t total = 0;

        for (int i = 0; i < iovcnt; i++)
                total += iov[i].iov_len;
        return total;
}

ssize_t shm_link_writev(struct shm_link *l, const struct iovec *iov, int iovcnt)
{
        struct shm_link_dir *d = &l->tx;
        struct iov_cursor cur = { .iov = iov, .iovcnt = iovcnt };
        size_t want = iov_total(iov, iovcnt), done = 0;

        if (_unlikely_(__atomic_load_n(&d->ctl->closed, __ATOMIC_RELAXED) != 0))
                return -EPIPE;
        while (done < want) {
                size_t n = size_min(want - done, record_max(l)), room;
                uint64_t pos = d->count, next;

                room = record_room(l, pos, d->peer);
                if (room < n) {
                        if (load_consumed(d) < 0)
                                return done > 0 ? (ssize_t)done : -EPROTO;
                        room = record_room(l, pos, d->peer);
                        n = size_min(n, room);
                        if (n == 0)
                                break;
                }
                next = pos + cells_of(n) * LINK_CELL;
                /* The consumer reads the next header only after this
                 * record's (acquire): it finds no record there. */
                __atomic_store_n(header_at(l, d, next), 0, __ATOMIC_RELAXED);
                ring_copy(d->data, l->ring_size, pos + data_offset(n), &cur, n, true);
                d->count = next;
                done += n;
                /* Publish (release) and order before the flag load (see the
                 * top). */
                __atomic_exchange_n(header_at(l, d, pos), REC_MARK << 32 | n, __ATOMIC_SEQ_CST);
                wake_if_armed(l, &d->ctl->sleeping);
        }
        return (ssize_t)done;
}

void *shm_link_reserve(struct shm_link *l, size_t n)
{
        struct shm_link_dir *d = &l->tx;
        uint64_t pos = d->count;
        size_t at;

        if (_unlikely_(n == 0 || n > REC_INLINE_MAX ||
                       __atomic_load_n(&d->ctl->closed, __ATOMIC_RELAXED) != 0))
                return NULL;
        if (record_room(l, pos, d->peer) < n &&
            (load_consumed(d) < 0 || record_room(l, pos, d->peer) < n))
                return NULL;
        at = (size_t)((pos + REC_HEADER) & (l->ring_size - 1));
        /* An inline record starts on a cell and ends within it or the
         * next ones: its bytes wrap only where the ring does. */
        if (at + n > l->ring_size)
                return NULL;
        /* The next record's header word now, before the caller copies,
         * as shm_link_writev zeroes it before it copies: zeroed at the
         * commit instead, after the copy, the in-place write made the
         * 8-byte ping-pong no faster than the iovec path (0.265 us, against
         * 0.235 us this way).  The consumer may hold that line too (cores
         * fetch lines in pairs), and its invalidation then overlaps the
         * record's own. */
        __atomic_store_n(header_at(l, d, pos + cells_of(n) * LINK_CELL), 0, __ATOMIC_RELAXED);
        return d->data + at;
}

void shm_link_commit(struct shm_link *l, size_t n)
{
        struct shm_link_dir *d = &l->tx;
        uint64_t pos = d->count, next = pos + cells_of(n) * LINK_CELL;

        d->count = next;
        __atomic_exchange_n(header_at(l, d, pos), REC_MARK << 32 | n, __ATOMIC_SEQ_CST);
        wake_if_armed(l, &d->ctl->sleeping);
}

/* Consumer: the length of the record starting at our position; 0 when
 * none is there, -EPROTO when the word there is no possible record. */
static int64_t record_peek(const struct shm_link *l, const struct shm_link_dir *d)
{
        uint64_t w = __atomic_load_n(header_at(l, d, d->count), __ATOMIC_ACQUIRE);
        uint32_t len;

        if (w == 0)
                return 0;
        len = record_len(l, w);
        return len != 0 ? (int64_t)len : -EPROTO;
}

/* Consumer: the length of the record being read, opening the one at our
 * position if none is; as record_peek otherwise. */
static int64_t record_open(struct shm_link *l, struct shm_link_dir *d)
{
        int64_t len;

        if (d->rec_len != 0)
                return d->rec_len;
        len = record_peek(l, d);
        if (len > 0) {
                d->rec_len = (uint32_t)len;
                d->rec_off = 0;
        }
        return len;
}

/* Consumer: publishes our counter after the records read whole, waking a
 * producer that waits for room. */
static void give_room_back(struct shm_link *l, struct shm_link_dir *d)
{
        /* Publish (release) and order before the flag load (see the top). */
        __atomic_exchange_n(&d->ctl->consumed, d->count, __ATOMIC_SEQ_CST);
        wake_if_armed(l, &d->ctl->want_room);
}

ssize_t shm_link_readv(struct shm_link *l, const struct iovec *iov, int iovcnt)
{
        struct shm_link_dir *d = &l->rx;
        struct iov_cursor cur = { .iov = iov, .iovcnt = iovcnt };
        size_t want = iov_total(iov, iovcnt), done = 0;
        bool freed = false;
        int64_t len = 0;

        while (done < want) {
                size_t n;

                len = record_open(l, d);
                if (len <= 0)
                        break;
                n = size_min((size_t)len - d->rec_off, want - done);
                ring_copy(d->data, l->ring_size, d->count + data_offset(d->rec_len) + d->rec_off, &cur,
                          n, false);
                done += n;
                d->rec_off += (uint32_t)n;
                if (d->rec_off == d->rec_len) {
                        d->count += cells_of(d->rec_len) * LINK_CELL;
                        d->rec_len = 0;
                        freed = true;
                }
        }
        if (freed)
                give_room_back(l, d);
        if (done > 0 || want == 0)
                return (ssize_t)done;
        if (len < 0)
                return -EPROTO;
        /* The producer stores closed after its last record: load it first,
         * then look at our position again. */
        if (__atomic_load_n(&d->ctl->closed, __ATOMIC_ACQUIRE) == 0)
                return 0;
        len = record_open(l, d);
        if (len < 0)
                return -EPROTO;
        if (len == 0)
                return -EPIPE;
        return shm_link_readv(l, iov, iovcnt);
}

const void *shm_link_peek(struct shm_link *l, size_t max, size_t *len)
{
        struct shm_link_dir *d = &l->rx;
        size_t at;
        int64_t n;

        *len = 1;
        if (d->rec_len != 0)
                return NULL;
        n = record_peek(l, d);
        if (n == 0)
                *len = 0;
        if (n <= 0 || (size_t)n > max)
                return NULL;
        at = (size_t)((d->count + data_offset((size_t)n)) & (l->ring_size - 1));
        if (at + (size_t)n > l->ring_size)
                return NULL;
        /* Opened as shm_link_readv opens it: readable() counts its bytes,
         * and a read would start at its first. */
        d->rec_len = (uint32_t)n;
        d->rec_off = 0;
        *len = (size_t)n;
        return d->data + at;
}

bool shm_link_consume(struct shm_link *l, bool look)
{
        struct shm_link_dir *d = &l->rx;

        if (d->rec_len == 0)
                return false;
        d->count += cells_of(d->rec_len) * LINK_CELL;
        d->rec_len = 0;
        give_room_back(l, d);
        return look && record_peek(l, d) != 0;
}

size_t shm_link_readable(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->rx;
        int64_t len;

        if (d->rec_len != 0)
                return d->rec_len - d->rec_off;
        len = record_peek(l, d);
        return len < 0 ? 1 : (size_t)len;
}

bool shm_link_rx_ready(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->rx;

        if (d->rec_len != 0)
                return d->rec_len != d->rec_off;
        /* Any word there is a record or an impossible one (-EPROTO); no
         * word and the peer closed: -EPIPE. */
        return __atomic_load_n(header_at(l, d, d->count), __ATOMIC_ACQUIRE) != 0 ||
               __atomic_load_n(&d->ctl->closed, __ATOMIC_ACQUIRE) != 0;
}

/* What shm_link_writev would take: records of record_max, then one in
 * what is left, each with its header, the cell after the last kept free. */
size_t shm_link_writable(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->tx;
        uint64_t c = __atomic_load_n(&d->ctl->consumed, __ATOMIC_ACQUIRE);
        size_t usable, whole = l->ring_size / 4;

        if (!consumed_valid(d, c))
                return 0;
        usable = (l->ring_size - (size_t)(d->count - c)) / LINK_CELL * LINK_CELL;
        if (usable < 2 * LINK_CELL)
                return 0;
        usable -= LINK_CELL;
        return usable / whole * record_max(l) +
               record_fitting(usable % whole);
}

/* Whether there is something to do that sleeping would miss: data, the
 * end of the peer's stream, or a broken peer (the next call says so). */
static bool rx_has_work(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->rx;

        return d->rec_len != 0 ||
               __atomic_load_n(header_at(l, d, d->count), __ATOMIC_SEQ_CST) != 0 ||
               __atomic_load_n(&d->ctl->closed, __ATOMIC_ACQUIRE) != 0;
}

/* Room for a record of at least one byte. */
static bool tx_has_room(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->tx;
        uint64_t c = __atomic_load_n(&d->ctl->consumed, __ATOMIC_SEQ_CST);

        return !consumed_valid(d, c) || record_room(l, d->count, c) > 0;
}

bool shm_link_arm(struct shm_link *l, bool want_data, bool want_room)
{
        /* Release: after our last drain of the doorbell (see the top). */
        if (want_data)
                __atomic_exchange_n(&l->rx.ctl->sleeping, 1, __ATOMIC_SEQ_CST);
        if (want_room)
                __atomic_exchange_n(&l->tx.ctl->want_room, 1, __ATOMIC_SEQ_CST);
        if ((want_data && rx_has_work(l)) || (want_room && tx_has_room(l))) {
                shm_link_disarm(l);
                return false;
        }
        return true;
}

/* Stores only what is set: the peer reads both lines, and a store would
 * take them from its cache for nothing. */
static inline void flag_clear(uint32_t *flag)
{
        if (__atomic_load_n(flag, __ATOMIC_RELAXED) != 0)
                __atomic_store_n(flag, 0, __ATOMIC_RELAXED);
}

void shm_link_disarm(struct shm_link *l)
{
        flag_clear(&l->rx.ctl->sleeping);
        flag_clear(&l->tx.ctl->want_room);
}

/* Rings a drain takes in one system call (more are rare: the flag
 * exchange makes one ring per announced sleep), and at most that many
 * calls: 64 rings. */
#define DRAIN_BATCH 8
#define DRAIN_CALLS 8

void shm_link_doorbell_drain(struct shm_link *l)
{
        uint64_t v[DRAIN_BATCH];
        struct iovec iov[DRAIN_BATCH];
        struct mmsghdr msg[DRAIN_BATCH];

        /* A pipe gives all its rings to one read (an eventfd its counter):
         * a short read says nothing more is there. */
        if (!l->doorbell_sock) {
                for (int call = 0; call < DRAIN_CALLS; call++)
                        if (read(l->doorbell_mine, v, sizeof(v)) < (ssize_t)sizeof(v))
                                break;
                return;
        }
        /* A datagram socket holds one ring per write: take what is there
         * without a last call to learn that nothing more is (bounded). */
        for (unsigned i = 0; i < DRAIN_BATCH; i++) {
                iov[i] = (struct iovec){ &v[i], sizeof(v[i]) };
                msg[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
        }
        for (int call = 0; call < DRAIN_CALLS; call++)
                if (recvmmsg(l->doorbell_mine, msg, DRAIN_BATCH, MSG_DONTWAIT, NULL) < DRAIN_BATCH)
                        break;
}

void shm_link_close_tx(struct shm_link *l)
{
        static const uint64_t one = 1;

        __atomic_store_n(&l->tx.ctl->closed, 1, __ATOMIC_SEQ_CST);
        if (l->quiet)
                return;
        /* Closing is rare: ring whether or not the peer announced a sleep. */
        l->doorbell_writes++;
        ring_doorbell(l, &one);
}

void shm_link_quiet(struct shm_link *l, bool on)
{
        l->quiet = on;
}

bool shm_link_peer_closed(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->rx;

        return __atomic_load_n(&d->ctl->closed, __ATOMIC_ACQUIRE) != 0 && d->rec_len == 0 &&
               __atomic_load_n(header_at(l, d, d->count), __ATOMIC_ACQUIRE) == 0;
}
