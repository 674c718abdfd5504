/* Sleeping on a word (see evd_wait.h): Linux private futexes with an
 * absolute CLOCK_MONOTONIC deadline (FUTEX_WAIT_BITSET), so that a sleep
 * cut short by a spurious wake-up never stretches the consumer's timeout. */
#include "config.h"

#include "libdat/evd_wait.h"
#include "libdat/spin_lock.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Polls before sleeping: about 2 µs of PAUSEs on current x86 cores, enough
 * to catch an event already on its way without burning a core for nothing. */
#define SPIN_POLLS 64

void dat_deadline_start(struct dat_deadline *d, DAT_TIMEOUT timeout_us)
{
        d->infinite = timeout_us == DAT_TIMEOUT_INFINITE;
        if (d->infinite)
                return;
        clock_gettime(CLOCK_MONOTONIC, &d->at);
        d->at.tv_sec += timeout_us / 1000000;
        d->at.tv_nsec += (long)(timeout_us % 1000000) * 1000;
        if (d->at.tv_nsec >= 1000000000) {
                d->at.tv_sec++;
                d->at.tv_nsec -= 1000000000;
        }
}

bool dat_deadline_left(const struct dat_deadline *d, struct timespec *left)
{
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        left->tv_sec = d->at.tv_sec - now.tv_sec;
        left->tv_nsec = d->at.tv_nsec - now.tv_nsec;
        if (left->tv_nsec < 0) {
                left->tv_sec--;
                left->tv_nsec += 1000000000;
        }
        return left->tv_sec > 0 || (left->tv_sec == 0 && left->tv_nsec > 0);
}

bool dat_deadline_within(struct dat_deadline *d, DAT_TIMEOUT timeout_us,
                         const struct dat_deadline *limit)
{
        dat_deadline_start(d, timeout_us);
        if (limit->infinite || limit->at.tv_sec > d->at.tv_sec ||
            (limit->at.tv_sec == d->at.tv_sec && limit->at.tv_nsec > d->at.tv_nsec))
                return true;
        *d = *limit;
        return false;
}

bool dat_word_spin(const uint32_t *word, uint32_t seen)
{
        for (unsigned i = 0; i < SPIN_POLLS; i++) {
                if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != seen)
                        return true;
                cpu_relax();
        }
        return false;
}

/* The private flag keys the futex by address in this process; without it
 * the kernel keys it by the page's backing object, so that two processes
 * mapping the same shared memory meet on the same word. */
static int word_sleep(uint32_t *word, uint32_t seen, const struct dat_deadline *d, int private)
{
        long r = syscall(SYS_futex, word, FUTEX_WAIT_BITSET | private, seen,
                         d->infinite ? NULL : &d->at, NULL, FUTEX_BITSET_MATCH_ANY);

        if (r == 0)
                return 0;
        switch (errno) {
        case ETIMEDOUT:
                return ETIMEDOUT;
        case EINTR:
                return EINTR;
        default:        /* EAGAIN: the word changed before we slept */
                return 0;
        }
}

int dat_word_sleep(uint32_t *word, uint32_t seen, const struct dat_deadline *d)
{
        return word_sleep(word, seen, d, FUTEX_PRIVATE_FLAG);
}

int dat_word_sleep_shared(uint32_t *word, uint32_t seen, const struct dat_deadline *d)
{
        return word_sleep(word, seen, d, 0);
}

void dat_word_wake_all(uint32_t *word)
{
        syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT32_MAX, NULL, NULL, 0);
}

void dat_word_wake_all_shared(uint32_t *word)
{
        syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

void dat_nap(void)
{
        struct timespec ts = { .tv_nsec = 100 * 1000 };

        nanosleep(&ts, NULL);
}
