/* The clock the benchmarks read, once per iteration of a latency loop.
 *
 * Where the kernel keeps time with the TSC (its clocksource is "tsc": the
 * counter runs at one rate on every CPU, in every power state), it is the
 * TSC itself, scaled to nanoseconds against CLOCK_MONOTONIC at start-up:
 * about 10 ns a read on the VMs this runs on, where clock_gettime() takes
 * 24.  A ping-pong that stamps every round trip carries half a read in
 * each half round trip it reports -- 12 ns of a 0.2 us message with
 * clock_gettime -- and UCX's perftest reads the TSC too.  Elsewhere, or
 * with BENCH_CLOCK=monotonic in the environment, clock_gettime().
 *
 * Benchmarks only: nothing here is used by datd or libdat. */
#ifndef DATD_BENCH_CLOCK_H
#define DATD_BENCH_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

struct bench_clock {
        bool tsc;                       /* read the TSC, else clock_gettime */
        uint64_t tsc0;                  /* the TSC ... */
        uint64_t ns0;                   /* ... when CLOCK_MONOTONIC said this */
        uint64_t mult;                  /* ns = (ticks * mult) >> 32 */
};

/* Set once, before main (clock.c). */
extern struct bench_clock bench_clock;

/* Which clock bench_now_ns reads: "tsc" or "monotonic". */
const char *bench_clock_name(void);

static inline uint64_t bench_monotonic_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Nanoseconds on a monotonic clock (CLOCK_MONOTONIC's origin). */
static inline uint64_t bench_now_ns(void)
{
#if defined(__x86_64__)
        if (bench_clock.tsc)
                return bench_clock.ns0 +
                       (uint64_t)(((unsigned __int128)(__rdtsc() - bench_clock.tsc0) *
                                   bench_clock.mult) >> 32);
#endif
        return bench_monotonic_ns();
}

#endif
