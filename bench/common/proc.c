/* Two-process plumbing for the floor benchmarks (see proc.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "bench/common/proc.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/common/stats.h"

int bench_pin(int cpu)
{
        cpu_set_t set;

        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) < 0)
                return -errno;
        return 0;
}

pid_t bench_spawn(int cpu, int (*fn)(void *arg), void *arg)
{
        pid_t parent = getpid(), pid;
        int r;

        fflush(NULL);
        pid = fork();
        if (pid < 0)
                bench_die("fork: %m");
        if (pid > 0)
                return pid;

        /* The parent may have died between fork() and prctl(). */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(1);
        r = bench_pin(cpu);
        if (r < 0) {
                fprintf(stderr, "cannot pin to CPU %d: %s\n", cpu, strerror(-r));
                _exit(1);
        }
        r = fn(arg);
        fflush(NULL);
        _exit(r);
}

int bench_reap(pid_t pid)
{
        int status;

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + WTERMSIG(status);
}

void bench_warn_shared_cpu(int cpu_a, int cpu_b, bool spins)
{
        if (cpu_a != cpu_b)
                return;
        fprintf(stderr, "warning: both sides on CPU %d%s\n", cpu_a,
                spins ? ": a spinning pair then measures the scheduler, not the transport" : "");
}
