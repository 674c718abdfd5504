/* The benchmarks' clock (see clock.h): chooses it and scales the TSC.
 * Compiled on its own too (run-peers builds the floors without configure):
 * no config.h. */
#include "bench/common/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bench_clock bench_clock;

/* How long the TSC is measured against CLOCK_MONOTONIC: a read of either
 * is off by tens of nanoseconds at most, a few parts in a million of this. */
#define CALIBRATE_NS 20000000u

/* Whether the kernel keeps time with the TSC: then it found it invariant
 * and the same on every CPU. */
static bool kernel_uses_tsc(void)
{
        FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
        char name[32] = "";
        bool yes;

        if (!f)
                return false;
        yes = fgets(name, sizeof(name), f) && strncmp(name, "tsc\n", 4) == 0;
        fclose(f);
        return yes;
}

static void __attribute__((constructor)) bench_clock_init(void)
{
#if defined(__x86_64__)
        const char *want = getenv("BENCH_CLOCK");
        uint64_t t0, t1, c0, c1;

        if ((want && strcmp(want, "monotonic") == 0) || !kernel_uses_tsc())
                return;
        t0 = bench_monotonic_ns();
        c0 = __rdtsc();
        do
                t1 = bench_monotonic_ns();
        while (t1 - t0 < CALIBRATE_NS);
        c1 = __rdtsc();
        if (c1 <= c0)
                return;
        bench_clock.mult = (uint64_t)((((unsigned __int128)(t1 - t0)) << 32) / (c1 - c0));
        bench_clock.tsc0 = c1;
        bench_clock.ns0 = t1;
        bench_clock.tsc = bench_clock.mult != 0;
#endif
}

const char *bench_clock_name(void)
{
        return bench_clock.tsc ? "tsc" : "monotonic";
}
