/* The shm transport's link: two byte rings in a shared region (see
 * shm_link.h).
 *
 * Ordering.  The producer copies bytes into the ring, then publishes its
 * counter; the consumer loads that counter with acquire before it copies
 * the bytes out, then publishes its own counter, which the producer loads
 * with acquire before it overwrites the bytes.  The producer keeps the
 * consumer's counter as last seen and reads the consumer's line only when
 * that says there is not enough room, so a busy stream of small writes
 * moves the data lines and the producer's line, nothing else.
 *
 * Sleeping is Dekker's pattern, once per direction of wake-up:
 *   sleeper: store "I sleep" flag; full barrier; re-check the counter;
 *   waker:   store the counter; full barrier; load the flag.
 * One of the two sees the other's store, so either the sleeper finds the
 * work or the waker finds the flag and rings the doorbell.  The barrier is
 * the store itself on the waker's side: the counter is published with a
 * sequentially consistent exchange (one locked instruction on x86, cheaper
 * than a store and a fence) and the flag loaded sequentially consistent;
 * the sleeper stores its flag the same way and re-checks with a
 * sequentially consistent load.  The waker takes the flag down with an
 * exchange as it rings, so that a burst of writes makes one system call;
 * the sleeper's flag store is also a release, so that it is ordered after
 * the sleeper's last drain of its doorbell and a ring meant for this sleep
 * cannot be drained by the previous wake-up.  A doorbell is an eventfd: a
 * ring that comes early stays readable, so a stale one only makes a
 * spurious wake-up, never a lost one.
 *
 * The peer's counters are checked every time they are read: the
 * producer's may only move forward and never more than ring_size past the
 * consumer's own, the consumer's only forward and never past the
 * producer's own.  Our own counters are private (struct shm_link_dir), so
 * the peer cannot make us read or write outside the ring. */
#include "config.h"

#include "libdat/shm_link.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/macro.h"

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

/* Grouped by writer.  The producer's line: its counter and the two flags
 * the producer writes, which the consumer reads right after the counter
 * anyway.  The consumer's line: its counter.  The consumer's sleep flag
 * on a line of its own: the producer reads it after every write, and it
 * stays shared in the producer's cache until the consumer arms. */
struct shm_link_ring {
        uint64_t produced;              /* producer: bytes written */
        uint32_t want_room;             /* producer: "wake me when room frees" */
        uint32_t closed;                /* producer: "I write no more" */
        unsigned char pad0[LINK_LINE - 16];
        uint64_t consumed;              /* consumer: bytes read */
        unsigned char pad1[LINK_LINE - 8];
        uint32_t sleeping;              /* consumer: "wake me when data comes" */
        unsigned char pad2[LINK_LINE - 4];
};

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

int shm_link_init(void *mem, size_t size, uint32_t ring_size)
{
        struct shm_link_header *h = mem;
        size_t need = shm_link_region_size(ring_size);

        if (mem == NULL || need == 0 || size < need || (uintptr_t)mem % LINK_CTL_SIZE != 0)
                return -EINVAL;
        /* Header and both control blocks; the data bytes need no value. */
        memset(mem, 0, SHM_LINK_HEADER);
        for (unsigned r = 0; r < 2; r++) {
                h->ring_offset[r] = SHM_LINK_HEADER + r * ring_span(ring_size);
                memset((unsigned char *)mem + h->ring_offset[r], 0, sizeof(struct shm_link_ring));
        }
        h->version = SHM_LINK_VERSION;
        h->ring_size = ring_size;
        /* Last: a peer that attaches sees the magic only over a whole header. */
        __atomic_store_n(&h->magic, SHM_LINK_MAGIC, __ATOMIC_RELEASE);
        return 0;
}

int shm_link_init_fd(int fd, size_t size, uint32_t ring_size)
{
        struct shm_link_header h;
        size_t need = shm_link_region_size(ring_size);
        ssize_t n;

        if (fd < 0 || need == 0 || size < need)
                return -EINVAL;
        memset(&h, 0, sizeof(h));
        for (unsigned r = 0; r < 2; r++)
                h.ring_offset[r] = SHM_LINK_HEADER + r * ring_span(ring_size);
        h.version = SHM_LINK_VERSION;
        h.ring_size = ring_size;
        /* Nobody has the file yet: the order of the fields does not matter. */
        h.magic = SHM_LINK_MAGIC;
        do
                n = pwrite(fd, &h, sizeof(h), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return n == (ssize_t)sizeof(h) ? 0 : -EIO;
}

/* A ring's place: page aligned, inside the region, after the header. */
static bool ring_offset_valid(uint64_t off, size_t size, uint32_t ring_size)
{
        return off % LINK_CTL_SIZE == 0 && off >= SHM_LINK_HEADER && off <= size &&
               size - off >= ring_span(ring_size);
}

static int attach_dir(struct shm_link_dir *d, unsigned char *ring, bool producer,
                      uint32_t ring_size)
{
        struct shm_link_ring *ctl = (struct shm_link_ring *)ring;
        uint64_t p = __atomic_load_n(&ctl->produced, __ATOMIC_ACQUIRE);
        uint64_t c = __atomic_load_n(&ctl->consumed, __ATOMIC_ACQUIRE);

        if (p - c > ring_size)
                return -EPROTO;
        *d = (struct shm_link_dir){
                .ctl = ctl,
                .data = ring + LINK_CTL_SIZE,
                .count = producer ? p : c,
                .peer = producer ? c : p,
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

        if (mem == NULL || out == NULL || side > 1 || !ring_size_allowed(ring_size) ||
            size < shm_link_region_size(ring_size) || (uintptr_t)mem % LINK_CTL_SIZE != 0)
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
        r = attach_dir(&out->tx, (unsigned char *)mem + off[side], true, ring_size);
        if (r == 0)
                r = attach_dir(&out->rx, (unsigned char *)mem + off[1 - side], false, ring_size);
        return r;
}

/* A doorbell is a datagram socket (never SIGPIPE, never blocking whatever
 * its flags) or, in tests, an eventfd. */
static void ring_doorbell(int fd, const uint64_t *one)
{
        if (send(fd, one, sizeof(*one), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == ENOTSOCK)
                (void)!write(fd, one, sizeof(*one));
}

/* Rings the peer's doorbell if the flag says it sleeps, taking the flag
 * down (see the top).  The caller published its counter with a
 * sequentially consistent exchange. */
static void wake_if_armed(struct shm_link *l, uint32_t *flag)
{
        static const uint64_t one = 1;

        if (_likely_(__atomic_load_n(flag, __ATOMIC_SEQ_CST) == 0))
                return;
        if (__atomic_exchange_n(flag, 0, __ATOMIC_ACQ_REL) == 0)
                return;
        l->doorbell_writes++;
        /* EAGAIN only when the counter is near 2^64: it is readable then. */
        ring_doorbell(l->doorbell_peer, &one);
}

/* The consumer's counter c is possible: forward from what we saw, never
 * past what we wrote. */
static inline bool consumed_valid(const struct shm_link_dir *d, uint64_t c)
{
        return c - d->peer <= d->count - d->peer;
}

/* The producer's counter p is possible: forward from what we saw, never
 * more than a ring past what we read. */
static inline bool produced_valid(const struct shm_link_dir *d, uint64_t p, uint32_t ring_size)
{
        return p - d->peer <= d->count + ring_size - d->peer;
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

/* Consumer: the producer's counter, checked; -EPROTO when impossible. */
static int load_produced(struct shm_link_dir *d, uint32_t ring_size)
{
        uint64_t p = __atomic_load_n(&d->ctl->produced, __ATOMIC_ACQUIRE);

        if (!produced_valid(d, p, ring_size))
                return -EPROTO;
        d->peer = p;
        return 0;
}

/* Copies n bytes between the ring (from byte counter pos on, wrapping) and
 * the iovec (from its start); to_ring says which way. */
static void ring_copy(unsigned char *data, uint32_t ring_size, uint64_t pos,
                      const struct iovec *iov, int iovcnt, size_t n, bool to_ring)
{
        uint32_t mask = ring_size - 1;

        for (int i = 0; i < iovcnt && n > 0; i++) {
                unsigned char *base = iov[i].iov_base;
                size_t len = size_min(iov[i].iov_len, n);

                n -= len;
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

/* Copies n bytes between the iovec and the ring, publishes our counter and
 * wakes the peer if it announced that it waits for what we just did. */
static inline ssize_t move_and_publish(struct shm_link *l, struct shm_link_dir *d,
                                       const struct iovec *iov, int iovcnt, size_t n, bool producer)
{
        if (n == 0)
                return 0;
        ring_copy(d->data, l->ring_size, d->count, iov, iovcnt, n, producer);
        d->count += n;
        /* Publish (release) and order before the flag load (see the top). */
        __atomic_exchange_n(producer ? &d->ctl->produced : &d->ctl->consumed, d->count,
                            __ATOMIC_SEQ_CST);
        wake_if_armed(l, producer ? &d->ctl->sleeping : &d->ctl->want_room);
        return (ssize_t)n;
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
        size_t want = iov_total(iov, iovcnt), room;

        if (_unlikely_(__atomic_load_n(&d->ctl->closed, __ATOMIC_RELAXED) != 0))
                return -EPIPE;
        room = l->ring_size - (size_t)(d->count - d->peer);
        if (room < want) {
                if (load_consumed(d) < 0)
                        return -EPROTO;
                room = l->ring_size - (size_t)(d->count - d->peer);
        }
        return move_and_publish(l, d, iov, iovcnt, size_min(want, room), true);
}

ssize_t shm_link_readv(struct shm_link *l, const struct iovec *iov, int iovcnt)
{
        struct shm_link_dir *d = &l->rx;
        size_t n;

        if (load_produced(d, l->ring_size) < 0)
                return -EPROTO;
        n = (size_t)(d->peer - d->count);
        if (n == 0) {
                /* The producer stores closed after its last count: load
                 * it first, then look at the count again. */
                if (__atomic_load_n(&d->ctl->closed, __ATOMIC_ACQUIRE) == 0)
                        return 0;
                if (load_produced(d, l->ring_size) < 0)
                        return -EPROTO;
                if (d->peer == d->count)
                        return -EPIPE;
                n = (size_t)(d->peer - d->count);
        }
        return move_and_publish(l, d, iov, iovcnt, size_min(n, iov_total(iov, iovcnt)), false);
}

size_t shm_link_readable(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->rx;
        uint64_t p = __atomic_load_n(&d->ctl->produced, __ATOMIC_ACQUIRE);

        if (!produced_valid(d, p, l->ring_size))
                return 0;
        return (size_t)(p - d->count);
}

size_t shm_link_writable(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->tx;
        uint64_t c = __atomic_load_n(&d->ctl->consumed, __ATOMIC_ACQUIRE);

        if (!consumed_valid(d, c))
                return 0;
        return l->ring_size - (size_t)(d->count - c);
}

/* Whether there is something to do that sleeping would miss: data, the
 * end of the peer's stream, or a broken peer (the next call says so). */
static bool rx_has_work(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->rx;
        uint64_t p = __atomic_load_n(&d->ctl->produced, __ATOMIC_SEQ_CST);

        return p != d->count || __atomic_load_n(&d->ctl->closed, __ATOMIC_ACQUIRE) != 0;
}

static bool tx_has_room(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->tx;
        uint64_t c = __atomic_load_n(&d->ctl->consumed, __ATOMIC_SEQ_CST);

        return c != d->count - l->ring_size;
}

bool shm_link_arm(struct shm_link *l, bool want_room)
{
        /* Release: after our last drain of the doorbell (see the top). */
        __atomic_exchange_n(&l->rx.ctl->sleeping, 1, __ATOMIC_SEQ_CST);
        if (want_room)
                __atomic_exchange_n(&l->tx.ctl->want_room, 1, __ATOMIC_SEQ_CST);
        if (rx_has_work(l) || (want_room && tx_has_room(l))) {
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

void shm_link_doorbell_drain(struct shm_link *l)
{
        uint64_t v;

        /* A datagram socket holds one ring per write: take them all
         * (bounded); an eventfd reads out in one go. */
        for (int i = 0; i < 64; i++) {
                ssize_t n = recv(l->doorbell_mine, &v, sizeof(v), MSG_DONTWAIT);

                if (n < 0 && errno == ENOTSOCK)
                        n = read(l->doorbell_mine, &v, sizeof(v)) > 0 ? 0 : -1;
                if (n < 0)
                        break;
        }
}

void shm_link_close_tx(struct shm_link *l)
{
        static const uint64_t one = 1;

        __atomic_store_n(&l->tx.ctl->closed, 1, __ATOMIC_SEQ_CST);
        /* Closing is rare: ring whether or not the peer announced a sleep. */
        l->doorbell_writes++;
        ring_doorbell(l->doorbell_peer, &one);
}

bool shm_link_peer_closed(const struct shm_link *l)
{
        const struct shm_link_dir *d = &l->rx;

        return __atomic_load_n(&d->ctl->closed, __ATOMIC_ACQUIRE) != 0 &&
               __atomic_load_n(&d->ctl->produced, __ATOMIC_ACQUIRE) == d->count;
}
