/* Shared by the EVD and CNO tests: a real datd (tests/harness.h) for every
 * test, IAs opened on it, EVDs made through the public API, and helper
 * threads.  The tests link libdatcore (the same code as libdat2.so.2) so
 * that they can also drive the internal producer API (evd_post) and peek
 * at waiter counts. */
#ifndef DATD_TESTS_EVD_EVD_TEST_H
#define DATD_TESTS_EVD_EVD_TEST_H

#include <pthread.h>

#include <dat2/udat.h>

#define ERR(type, sub) ((DAT_RETURN)(DAT_CLASS_ERROR | (type) | (sub)))
#define ERR_ARG(n) ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1 + (n) - 1)
#define EVD_BAD_HANDLE ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1)
#define CNO_BAD_HANDLE ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO)

/* A bound for waits that should end long before it. */
#define TEN_SECONDS (10u * 1000 * 1000)

/* Every stream flag (dat_evd_create(3DAT)). */
#define ALL_EVD_FLAGS (DAT_EVD_SOFTWARE_FLAG | DAT_EVD_DEFAULT_FLAG)

/* Suite .init/.fini: a datd with the default test config (skips the test
 * when datd is not built), or with a config of the caller's. */
void evd_test_start_datd(void);
void evd_test_start_datd_with(const char *config_json);
/* A datd whose quota lets a client hold max_evds EVDs and CNOs. */
void evd_test_start_datd_max_evds(unsigned max_evds);
void evd_test_stop_datd(void);

/* Opens "datd-shm" with a new async EVD of async_qlen (NULL: not wanted). */
DAT_IA_HANDLE evd_test_open_ia(DAT_COUNT async_qlen, DAT_EVD_HANDLE *async_evd);

/* dat_evd_create that must succeed. */
DAT_EVD_HANDLE evd_test_create(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_CNO_HANDLE cno,
                               DAT_EVD_FLAGS flags);

/* A software EVD of qlen on ia. */
DAT_EVD_HANDLE evd_test_soft(DAT_IA_HANDLE ia, DAT_COUNT qlen);

/* dat_cno_create with no agent that must succeed. */
DAT_CNO_HANDLE evd_test_cno(DAT_IA_HANDLE ia);

/* A DAT_SOFTWARE_EVENT carrying pointer. */
DAT_EVENT evd_test_soft_event(void *pointer);

/* dat_evd_post_se of a software event carrying pointer, must succeed. */
void evd_test_post(DAT_EVD_HANDLE evd, void *pointer);

/* Dequeues one event that must be a software event; returns its pointer. */
void *evd_test_take(DAT_EVD_HANDLE evd);

/* The EVD's queue length and state from dat_evd_query. */
DAT_COUNT evd_test_qlen(DAT_EVD_HANDLE evd);
DAT_EVD_STATE evd_test_state(DAT_EVD_HANDLE evd);

/* Blocks (bounded: fails the test after 10 s) until a thread waits on the
 * EVD, told by dat_evd_dequeue's DAT_INVALID_STATE; the EVD must be empty. */
void evd_test_await_waiter(DAT_EVD_HANDLE evd);

/* A thread in dat_evd_wait: spawn it, then join to get what it returned. */
struct evd_waiter {
        pthread_t thread;
        DAT_EVD_HANDLE evd;
        DAT_TIMEOUT timeout;
        DAT_COUNT threshold;
        DAT_RETURN ret;
        DAT_EVENT event;
        DAT_COUNT nmore;
};

/* Starts the thread and returns once it waits (evd_test_await_waiter). */
void evd_waiter_block(struct evd_waiter *w, DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout,
                      DAT_COUNT threshold);
DAT_RETURN evd_waiter_join(struct evd_waiter *w);

/* A thread in dat_cno_wait. */
struct cno_waiter {
        pthread_t thread;
        DAT_CNO_HANDLE cno;
        DAT_TIMEOUT timeout;
        DAT_RETURN ret;
        DAT_EVD_HANDLE evd;
};

void cno_waiter_start(struct cno_waiter *w, DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout);
DAT_RETURN cno_waiter_join(struct cno_waiter *w);

/* Blocks (bounded, 10 s) until n threads wait on the CNO (internal peek). */
void evd_test_await_cno_waiters(DAT_CNO_HANDLE cno, unsigned n);

/* Values that are no live handle of any kind, for handle abuse tests; the
 * freed one is filled in by the caller. */
extern DAT_HANDLE evd_test_garbage[3];

#endif
