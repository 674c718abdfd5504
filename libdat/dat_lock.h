/* The data path's mutex (an EP's data path, the IA's table of them): the
 * three-state futex lock, 0 free, 1 held, 2 held and waited for.
 *
 * Why not pthread_mutex_t: these two locks are taken on every message and
 * on every poll of a spinning consumer, and glibc's mutex first dispatches
 * on its type -- about 30 instructions for each lock, trylock and unlock,
 * a tenth of an empty dat_evd_dequeue -- where these take one atomic
 * instruction and a test.  Nothing here needs what the type buys: no
 * recursion, no owner checks, no robustness, no condition variable waits
 * on them.  Like a default pthread mutex it does not spin before it
 * sleeps, and it is process-private (a fork's child starts with its own
 * copy and never shares it). */
#ifndef DATD_LIBDAT_DAT_LOCK_H
#define DATD_LIBDAT_DAT_LOCK_H

#include <stdbool.h>
#include <stdint.h>

struct dat_lock {
        uint32_t state;
};

static inline void dat_lock_init(struct dat_lock *l)
{
        l->state = 0;
}

/* The slow halves: sleep until it is free (marking it waited for), and
 * wake one sleeper. */
void dat_lock_wait(struct dat_lock *l);
void dat_lock_wake(struct dat_lock *l);

static inline bool dat_trylock(struct dat_lock *l)
{
        uint32_t free_state = 0;

        return __atomic_compare_exchange_n(&l->state, &free_state, 1, false, __ATOMIC_ACQUIRE,
                                           __ATOMIC_RELAXED);
}

static inline void dat_lock(struct dat_lock *l)
{
        if (!dat_trylock(l))
                dat_lock_wait(l);
}

static inline void dat_unlock(struct dat_lock *l)
{
        if (__atomic_exchange_n(&l->state, 0, __ATOMIC_RELEASE) == 2)
                dat_lock_wake(l);
}

#endif
