/* The shm transport's single-producer/single-consumer ring (see shm_ring.h).
 *
 * Ordering: the producer fills a slot, stamps it with the message's index
 * (release), then stores head (release); the consumer loads the stamp, or
 * head, with acquire before it reads the slot.  The consumer
 * stores tail with release after it is done with a slot; the producer loads
 * tail with acquire before it overwrites one.  The producer caches the
 * consumer's index and reads its cache line only when the cache says full.
 *
 * The consumer polls the next slot itself, not head: the producer stamps
 * each slot with its index (release) before it stores head, so a busy
 * consumer moves one cache line per small message, as the two-process
 * floor does, and reads head only when the slot says empty, to tell empty
 * from a producer that broke the ring.  shm_ring_init() stamps every slot
 * with an index of the lap before the first, so that none looks filled.
 *
 * Sleeping is Dekker's pattern on two words: the consumer stores in
 * sleeping the tail it sleeps at, fences, and rereads head before it sleeps
 * on head; the producer stores head, fences, and reads sleeping.  One of
 * the two sees the other's store, so a wake-up is never lost, and the
 * producer makes its one system call only when a sleep is announced.
 *
 * The producer takes the announcement down as it wakes, so that the
 * commits after it make no system call while the consumer gets going; it
 * must not take down one made at the head it just stored: that consumer
 * has seen this commit and sleeps until the next, which would then find
 * no announcement and never wake it. */
#include "config.h"

#include "libdat/shm_ring.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/macro.h"
#include "libdat/evd_wait.h"

/* Two lines apart: some cores prefetch cache lines in adjacent pairs, and
 * the producer's and consumer's words must never share one. */
#define RING_LINE 128

struct shm_ring_shared {
        /* Written once by shm_ring_init(), read by both sides. */
        uint32_t magic;
        uint16_t version;
        uint16_t flags;                 /* none defined: must be 0 */
        uint32_t slot_size;
        uint32_t slot_count;
        unsigned char pad0[RING_LINE - 16];
        uint32_t head;                  /* written by the producer only */
        unsigned char pad1[RING_LINE - 4];
        uint32_t tail;                  /* written by the consumer only */
        unsigned char pad2[RING_LINE - 4];
        uint64_t sleeping;              /* 0, or SLEEPING_AT(the consumer's tail) */
        unsigned char pad3[RING_LINE - 8];
};

_Static_assert(sizeof(struct shm_ring_shared) == 4 * RING_LINE, "ring header layout");
_Static_assert(sizeof(struct shm_ring_shared) % SHM_RING_SLOT_ALIGN == 0, "slots aligned");

struct shm_slot {
        uint32_t index;                 /* the message's index, stored last */
        uint32_t len;
        uint32_t kind;
        uint32_t reserved;
        unsigned char payload[];
};

_Static_assert(sizeof(struct shm_slot) == SHM_RING_SLOT_HEADER, "slot header");

#define SLEEPING_AT(tail) ((UINT64_C(1) << 32) | (tail))

static bool is_pow2(uint32_t x)
{
        return x != 0 && (x & (x - 1)) == 0;
}

size_t shm_ring_layout_size(uint32_t slots, uint32_t slot_size)
{
        if (!is_pow2(slots) || slots < SHM_RING_SLOTS_MIN || slots > SHM_RING_SLOTS_MAX)
                return 0;
        if (slot_size < SHM_RING_SLOT_ALIGN || slot_size > SHM_RING_SLOT_MAX ||
            slot_size % SHM_RING_SLOT_ALIGN != 0)
                return 0;
        if ((size_t)slots > (SIZE_MAX - sizeof(struct shm_ring_shared)) / slot_size)
                return 0;
        return sizeof(struct shm_ring_shared) + (size_t)slots * slot_size;
}

int shm_ring_init(void *mem, size_t size, uint32_t slots, uint32_t slot_size)
{
        struct shm_ring_shared *sh = mem;
        size_t need = shm_ring_layout_size(slots, slot_size);

        if (need == 0 || size < need || (uintptr_t)mem % SHM_RING_SLOT_ALIGN != 0)
                return -EINVAL;
        memset(sh, 0, sizeof(*sh));
        for (uint32_t i = 0; i < slots; i++) {
                struct shm_slot *slot = (struct shm_slot *)((unsigned char *)mem + sizeof(*sh) +
                                                            (size_t)i * slot_size);

                slot->index = i - slots;
        }
        sh->version = SHM_RING_VERSION;
        sh->slot_size = slot_size;
        sh->slot_count = slots;
        /* Last: a peer that attaches sees the magic only over a whole header. */
        __atomic_store_n(&sh->magic, SHM_RING_MAGIC, __ATOMIC_RELEASE);
        return 0;
}

/* Each field is read once into a local: the peer may change the region
 * while we check it, and we must use exactly what we checked. */
int shm_ring_attach(void *mem, size_t size, struct shm_ring *out)
{
        struct shm_ring_shared *sh = mem;
        uint32_t magic, slot_size, slots, head, tail;
        uint16_t version, flags;
        size_t need;

        if ((uintptr_t)mem % SHM_RING_SLOT_ALIGN != 0)
                return -EINVAL;
        if (size < sizeof(*sh))
                return -EPROTO;
        magic = __atomic_load_n(&sh->magic, __ATOMIC_ACQUIRE);
        version = __atomic_load_n(&sh->version, __ATOMIC_RELAXED);
        flags = __atomic_load_n(&sh->flags, __ATOMIC_RELAXED);
        slot_size = __atomic_load_n(&sh->slot_size, __ATOMIC_RELAXED);
        slots = __atomic_load_n(&sh->slot_count, __ATOMIC_RELAXED);
        head = __atomic_load_n(&sh->head, __ATOMIC_ACQUIRE);
        tail = __atomic_load_n(&sh->tail, __ATOMIC_ACQUIRE);
        if (magic != SHM_RING_MAGIC || version != SHM_RING_VERSION || flags != 0)
                return -EPROTO;
        need = shm_ring_layout_size(slots, slot_size);
        if (need == 0 || need > size)
                return -EPROTO;
        if ((uint32_t)(head - tail) > slots)
                return -EPROTO;
        *out = (struct shm_ring){
                .shared = sh,
                .slots = (unsigned char *)mem + sizeof(*sh),
                .slot_size = slot_size,
                .mask = slots - 1,
                .payload_max = slot_size - SHM_RING_SLOT_HEADER,
                .head = head,
                .tail = tail,
                /* Producer: the tail; consumer: not tail + 1, nothing peeked. */
                .peer = tail,
        };
        return 0;
}

static inline struct shm_slot *ring_slot(const struct shm_ring *r, uint32_t index)
{
        return (struct shm_slot *)(r->slots + (size_t)(index & r->mask) * r->slot_size);
}

int shm_ring_reserve(struct shm_ring *r, void **payload)
{
        uint32_t slots = r->mask + 1;

        if ((uint32_t)(r->head - r->peer) >= slots) {
                uint32_t t = __atomic_load_n(&r->shared->tail, __ATOMIC_ACQUIRE);

                if ((uint32_t)(r->head - t) > slots)
                        return -EPROTO;
                r->peer = t;
                if ((uint32_t)(r->head - t) == slots)
                        return -EAGAIN;
        }
        *payload = ring_slot(r, r->head)->payload;
        return 0;
}

/* Wakes the consumer unless it announced its sleep at the head just
 * stored (see the top).  Two tries: a consumer that keeps rewriting the
 * word must not hold the producer here. */
static void ring_wake(struct shm_ring *r, uint64_t sleeping)
{
        for (int tries = 0; tries < 2 && sleeping != 0; tries++) {
                if (sleeping == SLEEPING_AT(r->head))
                        return;
                if (__atomic_compare_exchange_n(&r->shared->sleeping, &sleeping, 0, false,
                                                __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                        r->wake_calls++;
                        dat_word_wake_all_shared(&r->shared->head);
                        return;
                }
        }
}

int shm_ring_commit(struct shm_ring *r, uint32_t len, uint32_t kind)
{
        struct shm_ring_shared *sh = r->shared;
        struct shm_slot *slot = ring_slot(r, r->head);
        uint64_t sleeping;

        /* Only after a successful reserve: the cached tail proves a free slot. */
        if (len > r->payload_max || (uint32_t)(r->head - r->peer) > r->mask)
                return -EINVAL;
        slot->len = len;
        slot->kind = kind;
        __atomic_store_n(&slot->index, r->head, __ATOMIC_RELEASE);
        r->head++;
        __atomic_store_n(&sh->head, r->head, __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        sleeping = __atomic_load_n(&sh->sleeping, __ATOMIC_RELAXED);
        if (_unlikely_(sleeping != 0))
                ring_wake(r, sleeping);
        return 0;
}

static inline bool slot_filled(const struct shm_ring *r)
{
        return __atomic_load_n(&ring_slot(r, r->tail)->index, __ATOMIC_ACQUIRE) == r->tail;
}

/* Whether the next message is there: 1, 0, or -EPROTO.  When the slot says
 * empty, head tells whether it is: the producer stamps the slot before it
 * stores head, so a head past the slot that is still not stamped is a
 * broken producer. */
static int ring_has_message(const struct shm_ring *r)
{
        uint32_t h;

        if (slot_filled(r))
                return 1;
        h = __atomic_load_n(&r->shared->head, __ATOMIC_ACQUIRE);
        /* One behind: we took the last message by its stamp before the
         * producer got to store head; it is empty. */
        if (h == r->tail || h == r->tail - 1)
                return 0;
        if ((uint32_t)(h - r->tail) > r->mask + 1)
                return -EPROTO;
        return slot_filled(r) ? 1 : -EPROTO;
}

int shm_ring_peek(struct shm_ring *r, struct shm_ring_msg *msg)
{
        struct shm_slot *slot;
        uint32_t len;
        int has = ring_has_message(r);

        if (has <= 0)
                return has < 0 ? has : -EAGAIN;
        slot = ring_slot(r, r->tail);
        len = __atomic_load_n(&slot->len, __ATOMIC_RELAXED);
        if (len > r->payload_max)
                return -EPROTO;
        *msg = (struct shm_ring_msg){
                .data = slot->payload,
                .len = len,
                .kind = __atomic_load_n(&slot->kind, __ATOMIC_RELAXED),
        };
        r->peer = r->tail + 1;  /* peeked */
        return 0;
}

void shm_ring_release(struct shm_ring *r)
{
        if (r->peer != r->tail + 1)
                return;         /* nothing peeked */
        r->tail++;
        __atomic_store_n(&r->shared->tail, r->tail, __ATOMIC_RELEASE);
}

/* Announces the sleep, then sleeps on head unless a message came in
 * between: 0 (look again), ETIMEDOUT or EINTR. */
static int ring_sleep(struct shm_ring *r, const struct dat_deadline *d)
{
        struct shm_ring_shared *sh = r->shared;
        int e = 0;

        __atomic_store_n(&sh->sleeping, SLEEPING_AT(r->tail), __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (__atomic_load_n(&sh->head, __ATOMIC_RELAXED) == r->tail)
                e = dat_word_sleep_shared(&sh->head, r->tail, d);
        __atomic_store_n(&sh->sleeping, 0, __ATOMIC_RELAXED);
        return e;
}

int shm_ring_wait(struct shm_ring *r, DAT_TIMEOUT timeout_us)
{
        struct dat_deadline d;
        bool started = false;

        for (;;) {
                uint32_t *stamp = &ring_slot(r, r->tail)->index;
                uint32_t seen = __atomic_load_n(stamp, __ATOMIC_RELAXED);
                int has = ring_has_message(r), e;

                if (has != 0)
                        return has < 0 ? has : 0;
                if (dat_word_spin(stamp, seen))
                        continue;
                if (!started) {
                        dat_deadline_start(&d, timeout_us);
                        started = true;
                }
                e = ring_sleep(r, &d);
                if (e != 0)
                        return ring_has_message(r) > 0 ? 0 : -e;
        }
}

uint32_t shm_ring_free_slots(const struct shm_ring *r)
{
        uint32_t t = __atomic_load_n(&r->shared->tail, __ATOMIC_ACQUIRE);
        uint32_t used = r->head - t;

        return used > r->mask + 1 ? 0 : r->mask + 1 - used;
}

uint32_t shm_ring_pending(const struct shm_ring *r)
{
        uint32_t h = __atomic_load_n(&r->shared->head, __ATOMIC_ACQUIRE);
        uint32_t n = h - r->tail;

        return n > r->mask + 1 ? 0 : n;
}
