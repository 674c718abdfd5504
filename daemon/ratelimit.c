#include <config.h>

#include <time.h>

#include "daemon/ratelimit.h"

static uint64_t now_monotonic_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

bool ratelimit_pass(RateLimit *rl, unsigned *ret_held_back)
{
        uint64_t now = now_monotonic_usec();

        if (rl->begin_usec == 0 || now - rl->begin_usec >= rl->interval_usec) {
                rl->begin_usec = now;
                rl->n = 0;
        }
        if (rl->n >= rl->burst) {
                rl->held_back++;
                return false;
        }
        rl->n++;
        *ret_held_back = rl->held_back;
        rl->held_back = 0;
        return true;
}
