/* The slow halves of struct dat_lock (dat_lock.h). */
#include "config.h"

#include "libdat/dat_lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void dat_lock_wait(struct dat_lock *l)
{
        /* Whoever takes it through here leaves it marked waited for (2):
         * one more wake-up call at its unlock than strictly needed when
         * nobody else waits, never one too few.  EINTR and EAGAIN (it
         * changed before we slept) only mean: try again. */
        while (__atomic_exchange_n(&l->state, 2, __ATOMIC_ACQUIRE) != 0)
                (void)syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void dat_lock_wake(struct dat_lock *l)
{
        (void)syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
