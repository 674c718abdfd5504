/* Helpers shared by the connection tests: a real datd (tests/harness.h),
 * "sides" (an IA with what a connection needs: PZ, a connect EVD, a CR
 * EVD), waiting for events with a bound, and short names for the codes. */
#ifndef DATD_TESTS_CONN_CONN_TEST_H
#define DATD_TESTS_CONN_CONN_TEST_H

#include <dat2/udat.h>
#include <stdbool.h>
#include <stddef.h>

#include "tests/harness.h"

#define ERR(type, sub) ((DAT_RETURN)(DAT_CLASS_ERROR | (type) | (sub)))
#define ARG(n) ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1 + (n) - 1)
#define GARBAGE ((DAT_HANDLE)0x1234567)

/* Every suite of a program uses this timeout (criterion 2.4 leaks with
 * different ones). */
#define CONN_TEST_TIMEOUT 60

/* How long a test waits for an event that must come (generous: no timing
 * is asserted, this only bounds a test that fails). */
#define CONN_EVENT_WAIT_US (10 * 1000 * 1000)

extern struct datd_instance conn_datd;

/* .init / .fini: a datd with the harness's default config, libdat
 * pointed at it. */
void conn_datd_start(void);
void conn_datd_stop(void);

/* An IA and what a connection needs on it. */
struct side {
        DAT_IA_HANDLE ia;
        DAT_EVD_HANDLE async_evd;
        DAT_PZ_HANDLE pz;
        DAT_EVD_HANDLE conn_evd;        /* DAT_EVD_CONNECTION_FLAG */
        DAT_EVD_HANDLE cr_evd;          /* DAT_EVD_CR_FLAG */
        DAT_EVD_HANDLE dto_evd;         /* DAT_EVD_DTO_FLAG */
        DAT_IA_ATTR attr;               /* dat_ia_query */
        DAT_PROVIDER_ATTR pattr;
        struct sockaddr_storage address;/* the IA's address (a copy) */
};

void side_open(struct side *s);

/* Same, on the IA of dat.conf named name ("datd-shm", "datd-tcp") of the
 * datd libdat is pointed at now (DATD_SOCKET). */
void side_open_ia(struct side *s, const char *name);
void side_close(struct side *s);

/* An EP with the side's PZ and EVDs (asserting success). */
DAT_EP_HANDLE side_ep(const struct side *s);

/* An LMR over len bytes at buf in the side's PZ, every privilege; its
 * context in *ctx (asserting success). */
DAT_LMR_HANDLE side_lmr(const struct side *s, void *buf, size_t len, DAT_LMR_CONTEXT *ctx);

DAT_EP_STATE ep_state_of(DAT_EP_HANDLE ep);

/* Waits for the next event on evd (bounded); asserts one came and returns
 * it. */
DAT_EVENT wait_event(DAT_EVD_HANDLE evd);

/* Waits for the next event and asserts its number. */
DAT_EVENT expect_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER number);

/* True if no event is queued on evd right now. */
bool evd_empty(DAT_EVD_HANDLE evd);

/* A PSP on conn_qual (asserting success). */
DAT_PSP_HANDLE side_psp(const struct side *s, DAT_CONN_QUAL qual);

/* active connects to passive's address on qual with pd (size n); passive
 * gets the request on its cr_evd; returns the CR (asserting). */
DAT_CR_HANDLE connect_and_get_cr(const struct side *active, DAT_EP_HANDLE aep,
                                 const struct side *passive, DAT_CONN_QUAL qual,
                                 const void *pd, DAT_COUNT n);

/* A full connection: returns both EPs Connected (events consumed). */
void connect_pair(const struct side *a, const struct side *p, DAT_CONN_QUAL qual,
                  DAT_EP_HANDLE *aep, DAT_EP_HANDLE *pep);

/* In a forked process (fork_child), a listening side on an IA of its own:
 * ia_name (on the datd libdat is pointed at), a PZ, a CR and a connection
 * EVD, a PSP on qual.  False when any of it fails (no assertions there). */
struct child_listener {
        DAT_IA_HANDLE ia;
        DAT_EVD_HANDLE async_evd, cr_evd, conn_evd;
        DAT_PZ_HANDLE pz;
        DAT_PSP_HANDLE psp;
};
bool child_listener_open(struct child_listener *l, const char *ia_name, DAT_CONN_QUAL qual);

/* Forks a process that runs child(arg, ready_fd, note_fd) and exits with
 * what it returns.  Returns once the child wrote a byte to ready_fd
 * (asserts it did), with the read end of note_fd's pipe in *note_fd, for
 * whatever else the child reports. */
pid_t fork_child(int (*child)(void *arg, int ready_fd, int note_fd), void *arg, int *note_fd);

/* Forks a process with an IA of its own (ia_name, on the datd libdat is
 * pointed at) listening on qual.  It accepts the first request on an EP
 * of its own if accept, else leaves it pending, and then writes one byte to
 * *done_fd and waits to be killed.  Returns once it listens; asserts. */
pid_t fork_listener(const char *ia_name, DAT_CONN_QUAL qual, bool accept, int *done_fd);

/* SIGKILLs and reaps a fork_listener() process. */
void kill_listener(pid_t pid);

/* The "listener dies mid-request": a process with an IA ia_name
 * (of passive's datd, which libdat must be pointed at) listens, active
 * connects to passive's address, the process dies with the request
 * pending; active's EP must end Disconnected with NON_PEER_REJECTED or
 * BROKEN. */
void check_listener_dies_mid_request(const struct side *active, const struct side *passive,
                                     const char *ia_name);

/* Rejecting with private data: PEER_REJECTED with that data, the active EP Disconnected, the CR gone. */
void check_reject(const struct side *a, const struct side *p);

/* Connecting to a conn_qual nobody listens on: NON_PEER_REJECTED, EP Disconnected. */
void check_no_listener(const struct side *a, const struct side *p);

/* A request nobody answers within its timeout: TIMED_OUT, EP Disconnected. */
void check_timeout(const struct side *a, const struct side *p);

/* A request handed off to another conn_qual of the passive IA arrives there as a new request (with its private data) and can be accepted; the handed-off CR is gone. */
void check_handoff(const struct side *a, const struct side *p);

/* dat_ep_dup_connect of a Connected EP: the request (with its private data) reaches the same listener; Active Connection Pending, then Connected. */
void check_dup_connect(const struct side *a, const struct side *p);

/* Fills buf with a pattern that differs with seed (private data). */
void fill_pattern(unsigned char *buf, size_t n, unsigned char seed);

/* A conn_qual no other test of this process uses. */
DAT_CONN_QUAL fresh_qual(void);

#endif
