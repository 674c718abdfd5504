/* A spinlock for the few loads and the one event copy an EVD's ring lock
 * guards (evd.h), inline.
 *
 * Why not pthread_spinlock_t: the ring's lock is taken for every
 * completion and every event dequeued, two to four times per message, and
 * glibc's is a call through the PLT each way; inline, taking it is one
 * atomic exchange and a test.  Test-and-test-and-set, so that a waiter
 * spins on its cached copy, not on the bus.  Process-private, like the
 * pthread one it replaces was created. */
#ifndef DATD_LIBDAT_SPIN_LOCK_H
#define DATD_LIBDAT_SPIN_LOCK_H

#include <stdint.h>

struct spin_lock {
        uint32_t held;                  /* atomic: 0 free, 1 held */
};

/* A hint to the core that this thread spins. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#else
        __asm__ __volatile__("" ::: "memory");
#endif
}

static inline void spin_lock_init(struct spin_lock *l)
{
        l->held = 0;
}

static inline void spin_lock(struct spin_lock *l)
{
        while (__atomic_exchange_n(&l->held, 1, __ATOMIC_ACQUIRE))
                while (__atomic_load_n(&l->held, __ATOMIC_RELAXED))
                        cpu_relax();
}

static inline void spin_unlock(struct spin_lock *l)
{
        __atomic_store_n(&l->held, 0, __ATOMIC_RELEASE);
}

#endif
