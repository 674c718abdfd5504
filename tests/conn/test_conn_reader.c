/* The reader of datd's socket against a real datd: what a round trip
 * leaves when its thread is cancelled.  Each test opens its IAs itself: a test that
 * fails leaves them open rather than hang in dat_ia_close. */
#include "config.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libdat/evd_wait.h"
#include "tests/conn/conn_test.h"

static void setup(void)
{
        conn_datd_start();
}

/* A test may fail with datd stopped: it runs on again before it is
 * stopped for good. */
static void teardown(void)
{
        if (conn_datd.pid > 0)
                kill(conn_datd.pid, SIGCONT);
        conn_datd_stop();
}

TestSuite(reader, .init = setup, .fini = teardown, .timeout = CONN_TEST_TIMEOUT);

/* Joins thread within seconds; false when it is still running. */
static bool joined_within(pthread_t thread, int seconds)
{
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += seconds;
        return pthread_timedjoin_np(thread, NULL, &until) == 0;
}

/* Whether the process or thread whose /proc stat file is path is in state
 * within 5 s. */
static bool state_within_5_s(const char *path, char state)
{
        for (time_t end = time(NULL) + 5; time(NULL) < end; dat_nap())
                if (proc_stat_state(path) == state)
                        return true;
        return false;
}

/* A thread making a round trip to datd: dat_evd_create. */
struct creator {
        DAT_IA_HANDLE ia;
        pid_t tid;
        DAT_RETURN ret;
};

static void *creator_main(void *arg)
{
        struct creator *c = arg;
        DAT_EVD_HANDLE evd;

        __atomic_store_n(&c->tid, gettid(), __ATOMIC_RELEASE);
        c->ret = dat_evd_create(c->ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd);
        return NULL;
}

static void *ia_close_main(void *arg)
{
        dat_ia_close(arg, DAT_CLOSE_ABRUPT_FLAG);
        return NULL;
}

/* A thread cancelled while it waits for datd's reply (datd stopped) used
 * to die holding the connection's locks: every later call of the IA, and
 * its close, waited for good.  Its round trip ends first now, and the IA
 * goes on. */
Test(reader, a_thread_cancelled_in_a_round_trip_leaves_the_ia_usable)
{
        struct creator first = { .ret = DAT_SUCCESS }, second = { .ret = DAT_SUCCESS };
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        pthread_t thread;
        char path[64];

        cr_assert_eq(dat_ia_open((DAT_NAME_PTR)"datd-shm", 8, &async, &first.ia), DAT_SUCCESS);
        second.ia = first.ia;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)conn_datd.pid);
        cr_assert_eq(kill(conn_datd.pid, SIGSTOP), 0);
        cr_assert(state_within_5_s(path, 'T'), "datd did not stop");
        cr_assert_eq(pthread_create(&thread, NULL, creator_main, &first), 0);
        while (!__atomic_load_n(&first.tid, __ATOMIC_ACQUIRE))
                dat_nap();
        /* Asleep in its round trip (past the spin for the reply), which
         * datd cannot answer. */
        snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)first.tid);
        cr_assert(state_within_5_s(path, 'S'), "the round trip never slept");
        cr_assert_eq(pthread_cancel(thread), 0);
        cr_assert_eq(kill(conn_datd.pid, SIGCONT), 0);
        cr_assert(joined_within(thread, 15), "the cancelled thread never ended");

        cr_assert_eq(pthread_create(&thread, NULL, creator_main, &second), 0);
        cr_assert(joined_within(thread, 5),
                  "another thread's dat_evd_create waited 5 s after the cancel");
        cr_expect_eq(second.ret, DAT_SUCCESS, "dat_evd_create: 0x%08x", second.ret);
        cr_assert_eq(pthread_create(&thread, NULL, ia_close_main, first.ia), 0);
        cr_expect(joined_within(thread, 5), "dat_ia_close waited 5 s after the cancel");
}
