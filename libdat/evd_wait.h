/* Sleeping until a 32-bit word changes: the primitive under dat_evd_wait
 * and dat_cno_wait.  A sleeper reads the word under its object's lock,
 * drops the lock and sleeps while the word still holds what it read; a
 * waker changes the word under the lock and, only when someone sleeps,
 * wakes the word's sleepers.  On Linux this is a private futex: sleeping
 * costs no CPU, and nobody makes a system call while no one sleeps. */
#ifndef DATD_LIBDAT_EVD_WAIT_H
#define DATD_LIBDAT_EVD_WAIT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "libdat/libdat.h"

/* When a DAT timeout (microseconds, or DAT_TIMEOUT_INFINITE) runs out, on
 * CLOCK_MONOTONIC. */
struct dat_deadline {
        bool infinite;
        struct timespec at;
};

void dat_deadline_start(struct dat_deadline *d, DAT_TIMEOUT timeout_us);

/* The time left until a finite deadline, for a relative wait (ppoll);
 * false when it has passed. */
bool dat_deadline_left(const struct dat_deadline *d, struct timespec *left);

/* *d = timeout_us from now, or *limit when that comes first; true when the
 * nearer one is timeout_us (a sleep that ends there has not timed out). */
bool dat_deadline_within(struct dat_deadline *d, DAT_TIMEOUT timeout_us,
                         const struct dat_deadline *limit);

/* Polls *word for a short bounded time (a few microseconds) before a
 * caller commits to sleeping; true as soon as it differs from seen. */
bool dat_word_spin(const uint32_t *word, uint32_t seen);

/* Sleeps while *word == seen, until woken or the deadline.  Returns 0 when
 * woken or the word had already changed (or spuriously: callers recheck),
 * ETIMEDOUT when the deadline passed, EINTR when a signal handler ran. */
int dat_word_sleep(uint32_t *word, uint32_t seen, const struct dat_deadline *d);

/* Wakes every thread sleeping on word. */
void dat_word_wake_all(uint32_t *word);

/* The same for a word in memory shared between processes (MAP_SHARED), as
 * the shm transport's rings are: sleepers and wakers in any process that
 * maps it meet on it. */
int dat_word_sleep_shared(uint32_t *word, uint32_t seen, const struct dat_deadline *d);
void dat_word_wake_all_shared(uint32_t *word);

/* Sleeps a short while (100 µs): for a destroyer that has told the threads
 * still inside a wait call to leave and checks, under the object's lock,
 * until they have, so that it never frees the object under them. */
void dat_nap(void);

#endif
