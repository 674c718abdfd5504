/* What the thread blocked in dat_evd_wait on an EVD is doing, read from the
 * EVD's internals (for tests linked with libdatcore): for a test that must
 * act once that thread sleeps, or once it reads datd's socket itself
 * (evd_ring.c, sleep_reading). */
#ifndef DATD_TESTS_EVD_EVD_WAITER_PEEK_H
#define DATD_TESTS_EVD_EVD_WAITER_PEEK_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "libdat/evd.h"
#include "libdat/evd_wait.h"

enum evd_waiter_doing {
        EVD_WAITER_SLEEPS,      /* in the futex, or reading datd's socket */
        EVD_WAITER_READS,       /* reading datd's socket */
};

/* Whether the waiter on e is doing that within 5 s. */
static inline bool evd_waiter_within_5_s(struct evd *e, enum evd_waiter_doing doing)
{
        bool yes = false;

        for (time_t end = time(NULL) + 5; !yes && time(NULL) < end;) {
                spin_lock(&e->lock);
                yes = doing == EVD_WAITER_READS ? e->waiter_reads : e->waiter_sleeps;
                spin_unlock(&e->lock);
                if (!yes)
                        dat_nap();
        }
        return yes;
}

#endif
