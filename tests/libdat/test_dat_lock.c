/* The data path's mutex (libdat/dat_lock.h): mutual exclusion between
 * threads that fight for it, trylock's answer, and a waiter that sleeps
 * in the kernel instead of spinning. */
#include "config.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "libdat/dat_lock.h"

TestSuite(dat_lock, .timeout = 60);

#define THREADS 4
#define ROUNDS 200000

struct shared {
        struct dat_lock lock;
        uint64_t counter;               /* only under the lock, non-atomically */
        uint64_t inside;                /* threads inside: must never be 2 */
        uint64_t overlaps;
};

static void *incrementer(void *arg)
{
        struct shared *s = arg;

        for (int i = 0; i < ROUNDS; i++) {
                dat_lock(&s->lock);
                if (++s->inside != 1)
                        s->overlaps++;
                /* A read-modify-write that loses counts unless excluded. */
                s->counter = s->counter + 1;
                if ((i & 1023) == 0)
                        sched_yield();  /* sometimes hold it across a switch: sleepers */
                s->inside--;
                dat_unlock(&s->lock);
        }
        return NULL;
}

Test(dat_lock, threads_fighting_for_it_never_hold_it_together)
{
        static struct shared s;
        pthread_t t[THREADS];

        dat_lock_init(&s.lock);
        for (int i = 0; i < THREADS; i++)
                cr_assert_eq(pthread_create(&t[i], NULL, incrementer, &s), 0);
        for (int i = 0; i < THREADS; i++)
                cr_assert_eq(pthread_join(t[i], NULL), 0);
        cr_expect_eq(s.counter, (uint64_t)THREADS * ROUNDS);
        cr_expect_eq(s.overlaps, 0);
        cr_expect_eq(s.lock.state, 0, "free at the end");
}

Test(dat_lock, trylock_takes_a_free_lock_only)
{
        struct dat_lock l;

        dat_lock_init(&l);
        cr_expect(dat_trylock(&l));
        cr_expect_not(dat_trylock(&l), "held (by us: not recursive)");
        dat_unlock(&l);
        cr_expect(dat_trylock(&l));
        dat_unlock(&l);
        cr_expect_eq(l.state, 0);
}

static double thread_cpu_seconds(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct waiter {
        struct dat_lock *lock;
        double cpu;
};

static void *waiter(void *arg)
{
        struct waiter *w = arg;
        double cpu0 = thread_cpu_seconds();

        dat_lock(w->lock);
        w->cpu = thread_cpu_seconds() - cpu0;
        dat_unlock(w->lock);
        return NULL;
}

/* A thread that waits for the lock 300 ms sleeps (a few ms of CPU at most)
 * and gets it once it is released. */
Test(dat_lock, a_waiter_sleeps_until_the_holder_releases_it)
{
        struct dat_lock l;
        struct waiter w = { .lock = &l, .cpu = -1 };
        pthread_t t;

        dat_lock_init(&l);
        dat_lock(&l);
        cr_assert_eq(pthread_create(&t, NULL, waiter, &w), 0);
        usleep(300 * 1000);
        cr_expect_eq(__atomic_load_n(&l.state, __ATOMIC_RELAXED), 2, "marked waited for");
        dat_unlock(&l);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_expect_geq(w.cpu, 0);
        cr_expect_lt(w.cpu, 0.05, "%.3f s of CPU waiting 300 ms", w.cpu);
        cr_expect_eq(l.state, 0);
}
