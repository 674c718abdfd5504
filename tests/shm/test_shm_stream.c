/* The shm ring with a real producer and consumer: two threads, and two
 * processes sharing an inherited memfd, stream sequenced, checksummed
 * messages (none lost, duplicated or reordered); a sleeping consumer is
 * woken; a producer whose consumer never sleeps makes no system call.
 * The ring's wake_calls counts the producer's only system call site. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libdat/shm_region.h"
#include "libdat/shm_ring.h"

TestSuite(shm_stream, .timeout = 15);

#define STREAM_MESSAGES 2000000u
#define SLOTS 256
#define SLOT_SIZE 64
#define OFF_SLEEPING 384        /* the consumer's flag in the shared layout */

struct ring_region {
        void *mem;
        size_t size;
        int fd;
};

static struct ring_region region_with_ring(void)
{
        struct ring_region rr = { .size = shm_ring_layout_size(SLOTS, SLOT_SIZE) };

        cr_assert_eq(shm_region_create(rr.size, &rr.fd, &rr.mem), 0);
        cr_assert_eq(shm_ring_init(rr.mem, rr.size, SLOTS, SLOT_SIZE), 0);
        return rr;
}

/* Message seq: its sequence number, then bytes that depend on it, of a
 * length that varies with it; the kind is its low half. */
static uint32_t message_len(uint64_t seq, uint32_t max)
{
        return (uint32_t)(sizeof(seq) + seq % (max - sizeof(seq) + 1));
}

static unsigned char message_byte(uint64_t seq, uint32_t i)
{
        return (unsigned char)(seq * 31 + i * 7);
}

/* Produces count messages; spins on a full ring, yielding now and then so
 * that a consumer on the same CPU gets to run. */
static void produce(struct shm_ring *r, uint64_t count)
{
        for (uint64_t seq = 0; seq < count; seq++) {
                uint32_t len = message_len(seq, r->payload_max);
                unsigned char *p;
                void *slot;
                unsigned spins = 0;
                int e;

                while ((e = shm_ring_reserve(r, &slot)) == -EAGAIN)
                        if (++spins % 64 == 0)
                                sched_yield();
                if (e != 0)
                        abort();
                p = slot;
                memcpy(p, &seq, sizeof(seq));
                for (uint32_t i = sizeof(seq); i < len; i++)
                        p[i] = message_byte(seq, i);
                if (shm_ring_commit(r, len, (uint32_t)seq) != 0)
                        abort();
        }
}

/* Consumes count messages, sleeping when the ring is empty if sleep,
 * else polling and yielding now and then (never announcing a sleep);
 * returns how many arrived as expected (count when all did). */
static uint64_t consume(struct shm_ring *r, uint64_t count, bool sleep)
{
        for (uint64_t seq = 0; seq < count; seq++) {
                struct shm_ring_msg m;
                unsigned char buf[SLOT_SIZE];
                uint64_t got;
                int e;

                unsigned spins = 0;

                while ((e = shm_ring_peek(r, &m)) == -EAGAIN) {
                        if (sleep && shm_ring_wait(r, DAT_TIMEOUT_INFINITE) != 0)
                                return seq;
                        if (!sleep && ++spins % 64 == 0)
                                sched_yield();
                }
                if (e != 0 || m.len != message_len(seq, r->payload_max) ||
                    m.kind != (uint32_t)seq)
                        return seq;
                memcpy(buf, m.data, m.len);
                shm_ring_release(r);
                memcpy(&got, buf, sizeof(got));
                if (got != seq)
                        return seq;
                for (uint32_t i = sizeof(seq); i < m.len; i++)
                        if (buf[i] != message_byte(seq, i))
                                return seq;
        }
        return count;
}

struct producer_thread {
        pthread_t thread;
        struct shm_ring ring;
        uint64_t count;
};

static void *producer_main(void *arg)
{
        struct producer_thread *t = arg;

        produce(&t->ring, t->count);
        return NULL;
}

static void producer_start(struct producer_thread *t, struct ring_region *rr, uint64_t count)
{
        t->count = count;
        cr_assert_eq(shm_ring_attach(rr->mem, rr->size, &t->ring), 0);
        cr_assert_eq(pthread_create(&t->thread, NULL, producer_main, t), 0);
}

Test(shm_stream, two_threads_stream_every_message_once_in_order)
{
        struct ring_region rr = region_with_ring();
        struct producer_thread prod;
        struct shm_ring cons;

        cr_assert_eq(shm_ring_attach(rr.mem, rr.size, &cons), 0);
        producer_start(&prod, &rr, STREAM_MESSAGES);
        cr_expect_eq(consume(&cons, STREAM_MESSAGES, true), STREAM_MESSAGES);
        pthread_join(prod.thread, NULL);
        cr_expect_eq(shm_ring_pending(&cons), 0);
        shm_region_unmap(rr.mem, rr.size);
        close(rr.fd);
}

Test(shm_stream, two_processes_stream_every_message_once_in_order)
{
        struct ring_region rr = region_with_ring();
        struct shm_ring cons;
        uint64_t got;
        pid_t pid;
        int status;

        cr_assert_eq(shm_ring_attach(rr.mem, rr.size, &cons), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                /* The child maps the inherited memfd itself, as a peer that
                 * received it would, and produces into it. */
                struct shm_ring prod;
                void *mem;
                size_t size;

                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (shm_region_map(rr.fd, 1u << 20, &mem, &size) != 0 ||
                    shm_ring_attach(mem, size, &prod) != 0)
                        _exit(2);
                produce(&prod, STREAM_MESSAGES);
                _exit(0);
        }
        got = consume(&cons, STREAM_MESSAGES, true);
        if (got != STREAM_MESSAGES)
                kill(pid, SIGKILL);     /* it may be spinning on a full ring */
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_expect_eq(got, STREAM_MESSAGES);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        shm_region_unmap(rr.mem, rr.size);
        close(rr.fd);
}

struct waiter_thread {
        pthread_t thread;
        struct shm_ring ring;
        DAT_TIMEOUT timeout;
        int ret;
};

static void *waiter_main(void *arg)
{
        struct waiter_thread *w = arg;

        w->ret = shm_ring_wait(&w->ring, w->timeout);
        return NULL;
}

Test(shm_stream, sleeping_consumer_is_woken_by_the_next_commit)
{
        struct ring_region rr = region_with_ring();
        struct waiter_thread w = { .timeout = DAT_TIMEOUT_INFINITE, .ret = 1 };
        struct shm_ring prod;
        uint64_t *sleeping = (uint64_t *)((char *)rr.mem + OFF_SLEEPING);
        void *slot;

        cr_assert_eq(shm_ring_attach(rr.mem, rr.size, &prod), 0);
        cr_assert_eq(shm_ring_attach(rr.mem, rr.size, &w.ring), 0);
        cr_assert_eq(pthread_create(&w.thread, NULL, waiter_main, &w), 0);
        /* Commit only once the consumer announced its sleep; a lost wake-up
         * leaves it asleep and the suite's timeout fails the test. */
        while (__atomic_load_n(sleeping, __ATOMIC_ACQUIRE) == 0)
                sched_yield();
        cr_assert_eq(shm_ring_reserve(&prod, &slot), 0);
        cr_assert_eq(shm_ring_commit(&prod, 0, 1), 0);
        pthread_join(w.thread, NULL);
        cr_expect_eq(w.ret, 0);
        cr_expect_eq(prod.wake_calls, 1);
        cr_expect_eq(__atomic_load_n(sleeping, __ATOMIC_ACQUIRE), 0);
        shm_region_unmap(rr.mem, rr.size);
        close(rr.fd);
}

Test(shm_stream, wait_on_an_empty_ring_times_out)
{
        struct ring_region rr = region_with_ring();
        struct shm_ring cons;

        cr_assert_eq(shm_ring_attach(rr.mem, rr.size, &cons), 0);
        cr_expect_eq(shm_ring_wait(&cons, 2000), -ETIMEDOUT);
        cr_expect_eq(*(uint64_t *)((char *)rr.mem + OFF_SLEEPING), 0);
        shm_region_unmap(rr.mem, rr.size);
        close(rr.fd);
}

Test(shm_stream, producer_makes_no_system_call_while_the_consumer_never_sleeps)
{
        struct ring_region rr = region_with_ring();
        struct producer_thread prod;
        struct shm_ring cons;
        uint64_t count = STREAM_MESSAGES / 4;

        cr_assert_eq(shm_ring_attach(rr.mem, rr.size, &cons), 0);
        /* The consumer only polls (yielding the CPU on an empty ring, in
         * case both threads share one), so it never announces a sleep. */
        producer_start(&prod, &rr, count);
        cr_expect_eq(consume(&cons, count, false), count);
        pthread_join(prod.thread, NULL);
        cr_expect_eq(prod.ring.wake_calls, 0);
        shm_region_unmap(rr.mem, rr.size);
        close(rr.fd);
}
