/* Two-process plumbing for the floor benchmarks: pinning to a CPU, a pinned
 * child that dies with its parent, and reaping it.  Pinning the two sides of
 * a ping-pong to different CPUs is what makes the numbers comparable with
 * the peers (run-peers pins those with taskset the same way). */
#ifndef DATD_BENCH_PROC_H
#define DATD_BENCH_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* Pins the calling thread to cpu; returns 0 or -errno. */
int bench_pin(int cpu);

/* Forks a child pinned to cpu that runs fn(arg) and exits with its return
 * value.  The child gets SIGKILL when the parent dies, so a benchmark killed
 * by `timeout` leaves nothing behind.  Returns the child's PID; dies on error. */
pid_t bench_spawn(int cpu, int (*fn)(void *arg), void *arg);

/* Waits for the child; returns its exit status, or 128+signal. */
int bench_reap(pid_t pid);

/* Warns on stderr when the two sides share a CPU: a spinning pair on one
 * CPU measures the scheduler's time slice, not the transport. */
void bench_warn_shared_cpu(int cpu_a, int cpu_b, bool spins);

#endif
