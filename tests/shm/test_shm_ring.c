/* The shm ring on its own, in one thread: geometry, what attach refuses in
 * a header another process wrote, full and empty, indices wrapping, and
 * what producer and consumer refuse when the peer breaks the indices.
 *
 * The shared layout is a format between processes, so the offsets below
 * are part of it: magic 0, version 4, flags 6, slot size 8, slot count 12,
 * head 128, tail 256, slots from 512; in a slot, its index 0, length 4. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libdat/shm_ring.h"

TestSuite(shm_ring, .timeout = 15);

#define OFF_MAGIC 0
#define OFF_VERSION 4
#define OFF_FLAGS 6
#define OFF_SLOT_SIZE 8
#define OFF_SLOT_COUNT 12
#define OFF_HEAD 128
#define OFF_TAIL 256

#define SLOTS 4
#define SLOT_SIZE 64

static void *ring_mem(size_t *size)
{
        void *mem;

        *size = shm_ring_layout_size(SLOTS, SLOT_SIZE);
        cr_assert_neq(*size, 0);
        cr_assert_eq(posix_memalign(&mem, 4096, *size), 0);
        cr_assert_eq(shm_ring_init(mem, *size, SLOTS, SLOT_SIZE), 0);
        return mem;
}

static void put_u32(void *mem, size_t off, uint32_t v)
{
        memcpy((char *)mem + off, &v, sizeof(v));
}

static int attach_fresh(void *mem, size_t size)
{
        struct shm_ring r;

        return shm_ring_attach(mem, size, &r);
}

/* Attaches to a fresh ring after writing n bytes at offset off, as a
 * hostile or broken peer would. */
static int attach_with_bytes(size_t off, const void *bytes, size_t n)
{
        size_t size;
        void *mem = ring_mem(&size);
        int r;

        memcpy((char *)mem + off, bytes, n);
        r = attach_fresh(mem, size);
        free(mem);
        return r;
}

static int attach_with_u32(size_t off, uint32_t value)
{
        return attach_with_bytes(off, &value, sizeof(value));
}

static int attach_with_u16(size_t off, uint16_t value)
{
        return attach_with_bytes(off, &value, sizeof(value));
}

static void push(struct shm_ring *r, uint32_t value)
{
        void *p;

        cr_assert_eq(shm_ring_reserve(r, &p), 0);
        memcpy(p, &value, sizeof(value));
        cr_assert_eq(shm_ring_commit(r, sizeof(value), value ^ 0x5a5a5a5a), 0);
}

static uint32_t pop(struct shm_ring *r)
{
        struct shm_ring_msg m;
        uint32_t value;

        cr_assert_eq(shm_ring_peek(r, &m), 0);
        cr_assert_eq(m.len, sizeof(value));
        memcpy(&value, m.data, sizeof(value));
        cr_assert_eq(m.kind, value ^ 0x5a5a5a5a);
        shm_ring_release(r);
        return value;
}

Test(shm_ring, layout_size_refuses_geometry_outside_the_limits)
{
        cr_expect_eq(shm_ring_layout_size(3, 64), 0);           /* not a power of two */
        cr_expect_eq(shm_ring_layout_size(1, 64), 0);
        cr_expect_eq(shm_ring_layout_size(0, 64), 0);
        cr_expect_eq(shm_ring_layout_size(SHM_RING_SLOTS_MAX * 2, 64), 0);
        cr_expect_eq(shm_ring_layout_size(4, 96), 0);           /* not whole lines */
        cr_expect_eq(shm_ring_layout_size(4, 32), 0);
        cr_expect_eq(shm_ring_layout_size(4, SHM_RING_SLOT_MAX + 64), 0);
        cr_expect_gt(shm_ring_layout_size(4, 64), 4 * 64);
}

Test(shm_ring, init_refuses_a_region_smaller_than_the_layout)
{
        size_t size;
        void *mem = ring_mem(&size);

        cr_expect_eq(shm_ring_init(mem, size - 1, SLOTS, SLOT_SIZE), -EINVAL);
        cr_expect_eq(shm_ring_init(mem, size, 3, SLOT_SIZE), -EINVAL);
        free(mem);
}

Test(shm_ring, attached_ring_starts_empty_with_its_geometry)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring r;
        struct shm_ring_msg m;

        cr_assert_eq(shm_ring_attach(mem, size, &r), 0);
        cr_expect_eq(shm_ring_capacity(&r), SLOTS);
        cr_expect_eq(r.payload_max, SLOT_SIZE - SHM_RING_SLOT_HEADER);
        cr_expect_eq(shm_ring_pending(&r), 0);
        cr_expect_eq(shm_ring_free_slots(&r), SLOTS);
        cr_expect_eq(shm_ring_peek(&r, &m), -EAGAIN);
        free(mem);
}

Test(shm_ring, attach_refuses_a_wrong_magic)
{
        cr_expect_eq(attach_with_u32(OFF_MAGIC, SHM_RING_MAGIC ^ 1), -EPROTO);
}

Test(shm_ring, attach_refuses_another_version)
{
        cr_expect_eq(attach_with_u16(OFF_VERSION, SHM_RING_VERSION + 1), -EPROTO);
}

Test(shm_ring, attach_refuses_unknown_flags)
{
        cr_expect_eq(attach_with_u16(OFF_FLAGS, 1), -EPROTO);
}

Test(shm_ring, attach_refuses_a_slot_size_not_in_whole_lines)
{
        cr_expect_eq(attach_with_u32(OFF_SLOT_SIZE, 40), -EPROTO);
        cr_expect_eq(attach_with_u32(OFF_SLOT_SIZE, 0), -EPROTO);
}

Test(shm_ring, attach_refuses_a_slot_size_beyond_the_region)
{
        cr_expect_eq(attach_with_u32(OFF_SLOT_SIZE, SLOT_SIZE * 2), -EPROTO);
        cr_expect_eq(attach_with_u32(OFF_SLOT_SIZE, 0xffffffc0), -EPROTO);
}

Test(shm_ring, attach_refuses_a_slot_count_not_a_power_of_two)
{
        cr_expect_eq(attach_with_u32(OFF_SLOT_COUNT, 3), -EPROTO);
        cr_expect_eq(attach_with_u32(OFF_SLOT_COUNT, 0), -EPROTO);
}

Test(shm_ring, attach_refuses_a_slot_count_beyond_the_region)
{
        cr_expect_eq(attach_with_u32(OFF_SLOT_COUNT, SLOTS * 2), -EPROTO);
        cr_expect_eq(attach_with_u32(OFF_SLOT_COUNT, 0x80000000u), -EPROTO);
}

Test(shm_ring, attach_refuses_a_region_smaller_than_the_header)
{
        size_t size;
        void *mem = ring_mem(&size);

        cr_expect_eq(attach_fresh(mem, 64), -EPROTO);
        cr_expect_eq(attach_fresh(mem, size - 1), -EPROTO);
        free(mem);
}

Test(shm_ring, attach_refuses_more_messages_than_slots)
{
        cr_expect_eq(attach_with_u32(OFF_HEAD, SLOTS + 1), -EPROTO);
        /* head behind tail: a huge count modulo 2^32 */
        cr_expect_eq(attach_with_u32(OFF_TAIL, 1), -EPROTO);
}

Test(shm_ring, full_ring_refuses_a_reservation_until_a_release)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring prod, cons;
        void *p;

        cr_assert_eq(shm_ring_attach(mem, size, &prod), 0);
        cr_assert_eq(shm_ring_attach(mem, size, &cons), 0);
        for (uint32_t i = 0; i < SLOTS; i++)
                push(&prod, i);
        cr_expect_eq(shm_ring_reserve(&prod, &p), -EAGAIN);
        cr_expect_eq(shm_ring_free_slots(&prod), 0);
        cr_expect_eq(shm_ring_pending(&cons), SLOTS);
        cr_expect_eq(pop(&cons), 0);
        cr_expect_eq(shm_ring_free_slots(&prod), 1);
        cr_expect_eq(shm_ring_reserve(&prod, &p), 0);
        free(mem);
}

Test(shm_ring, empty_ring_has_nothing_to_peek_and_release_does_nothing)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring prod, cons;
        struct shm_ring_msg m;

        cr_assert_eq(shm_ring_attach(mem, size, &prod), 0);
        cr_assert_eq(shm_ring_attach(mem, size, &cons), 0);
        push(&prod, 7);
        cr_expect_eq(pop(&cons), 7);
        shm_ring_release(&cons);        /* nothing peeked: no effect */
        cr_expect_eq(shm_ring_peek(&cons, &m), -EAGAIN);
        cr_expect_eq(shm_ring_free_slots(&prod), SLOTS);
        push(&prod, 8);
        cr_expect_eq(pop(&cons), 8);
        free(mem);
}

Test(shm_ring, messages_keep_their_order_across_index_wraparound)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring prod, cons;
        uint32_t sent = 0, got = 0;

        /* Start just below 2^32 so that the free-running indices wrap. */
        put_u32(mem, OFF_HEAD, 0xfffffff0u);
        put_u32(mem, OFF_TAIL, 0xfffffff0u);
        cr_assert_eq(shm_ring_attach(mem, size, &prod), 0);
        cr_assert_eq(shm_ring_attach(mem, size, &cons), 0);
        for (int round = 0; round < 1000; round++) {
                uint32_t burst = 1 + (uint32_t)round % SLOTS;

                for (uint32_t i = 0; i < burst; i++)
                        push(&prod, sent++);
                for (uint32_t i = 0; i < burst; i++)
                        cr_assert_eq(pop(&cons), got++);
        }
        cr_expect_eq(shm_ring_pending(&cons), 0);
        free(mem);
}

Test(shm_ring, commit_refuses_a_length_beyond_the_slot)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring prod;
        void *p;

        cr_assert_eq(shm_ring_attach(mem, size, &prod), 0);
        cr_assert_eq(shm_ring_reserve(&prod, &p), 0);
        cr_expect_eq(shm_ring_commit(&prod, prod.payload_max + 1, 0), -EINVAL);
        cr_expect_eq(shm_ring_commit(&prod, prod.payload_max, 0), 0);
        free(mem);
}

Test(shm_ring, commit_refuses_without_a_free_slot)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring prod;

        cr_assert_eq(shm_ring_attach(mem, size, &prod), 0);
        for (uint32_t i = 0; i < SLOTS; i++)
                push(&prod, i);
        cr_expect_eq(shm_ring_commit(&prod, 4, 0), -EINVAL);
        free(mem);
}

Test(shm_ring, peek_refuses_a_slot_length_beyond_the_slot)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring prod, cons;
        struct shm_ring_msg m;
        void *p;

        cr_assert_eq(shm_ring_attach(mem, size, &prod), 0);
        cr_assert_eq(shm_ring_attach(mem, size, &cons), 0);
        cr_assert_eq(shm_ring_reserve(&prod, &p), 0);
        cr_assert_eq(shm_ring_commit(&prod, 4, 0), 0);
        /* the producer rewrites the length after publishing the slot */
        put_u32((char *)p - SHM_RING_SLOT_HEADER, 4, SLOT_SIZE);
        cr_expect_eq(shm_ring_peek(&cons, &m), -EPROTO);
        free(mem);
}

Test(shm_ring, peek_refuses_a_producer_index_beyond_the_slots)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring cons;
        struct shm_ring_msg m;

        cr_assert_eq(shm_ring_attach(mem, size, &cons), 0);
        put_u32(mem, OFF_HEAD, SLOTS + 1);
        cr_expect_eq(shm_ring_peek(&cons, &m), -EPROTO);
        cr_expect_eq(shm_ring_pending(&cons), 0);
        cr_expect_eq(shm_ring_wait(&cons, 0), -EPROTO);
        free(mem);
}

Test(shm_ring, peek_refuses_a_producer_index_past_a_slot_it_did_not_fill)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring cons;
        struct shm_ring_msg m;

        cr_assert_eq(shm_ring_attach(mem, size, &cons), 0);
        put_u32(mem, OFF_HEAD, 1);
        cr_expect_eq(shm_ring_peek(&cons, &m), -EPROTO);
        free(mem);
}

Test(shm_ring, reserve_refuses_a_consumer_index_ahead_of_the_producer)
{
        size_t size;
        void *mem = ring_mem(&size);
        struct shm_ring prod;
        void *p;

        cr_assert_eq(shm_ring_attach(mem, size, &prod), 0);
        for (uint32_t i = 0; i < SLOTS; i++)
                push(&prod, i);
        put_u32(mem, OFF_TAIL, SLOTS + 1);
        cr_expect_eq(shm_ring_reserve(&prod, &p), -EPROTO);
        cr_expect_eq(shm_ring_free_slots(&prod), 0);
        free(mem);
}
