/* A bound on log lines that other people can cause (every refused or dropped
 * bus connection, every failed accept): a flood of them would fill the log
 * and cost datd more than the refusals themselves.  At most burst lines pass
 * per interval; the ones held back are counted, and the next line that
 * passes says how many there were. */
#ifndef DATD_DAEMON_RATELIMIT_H
#define DATD_DAEMON_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct RateLimit {
        uint64_t interval_usec;
        unsigned burst;
        uint64_t begin_usec;            /* CLOCK_MONOTONIC start of this interval, 0: none yet */
        unsigned n;                     /* passed in this interval */
        unsigned held_back;             /* since the last one that passed */
} RateLimit;

#define RATELIMIT_INIT(interval, n_burst) ((RateLimit) { .interval_usec = (interval), .burst = (n_burst) })

/* true if one more line may pass now; then *ret_held_back is how many were
 * held back since the last one that passed. */
bool ratelimit_pass(RateLimit *rl, unsigned *ret_held_back);

#endif
