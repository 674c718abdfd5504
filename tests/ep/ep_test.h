/* Helpers shared by the EP and SRQ tests: a real datd (tests/harness.h), an
 * open IA with the objects an EP needs (PZs, EVDs of each role), and short
 * names for the codes the man pages name. */
#ifndef DATD_TESTS_EP_EP_TEST_H
#define DATD_TESTS_EP_EP_TEST_H

#include <dat2/udat.h>

#include "tests/harness.h"

#define ERR(type, sub) ((DAT_RETURN)(DAT_CLASS_ERROR | (type) | (sub)))
#define ARG(n) ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1 + (n) - 1)

/* Garbage that is no handle of anything. */
#define GARBAGE ((DAT_HANDLE)0x1234567)

/* Every suite of a program uses this timeout (criterion 2.4 leaks with
 * different ones). */
#define EP_TEST_TIMEOUT 30

/* The datd of the running test. */
extern struct datd_instance ep_datd;

/* Starts datd (skips the test if it is not built) with config_json (NULL:
 * the harness's default) and points libdat at it. */
void ep_datd_start_config(const char *config_json);

/* .init / .fini of the suites: default config. */
void ep_datd_start(void);
void ep_datd_stop(void);

/* What most tests need on one IA. */
struct ep_fixture {
        DAT_IA_HANDLE ia;
        DAT_EVD_HANDLE async_evd;
        DAT_PZ_HANDLE pz, pz2;
        DAT_EVD_HANDLE recv_evd, recv_evd2;     /* DAT_EVD_DTO_FLAG only */
        DAT_EVD_HANDLE request_evd;             /* DAT_EVD_DTO_FLAG only */
        DAT_EVD_HANDLE conn_evd, conn_evd2;     /* DAT_EVD_CONNECTION_FLAG only */
        DAT_IA_ATTR limits;                     /* dat_ia_query */
};

/* Opens the "datd-shm" IA and creates the fixture's objects. */
void ep_fixture_open(struct ep_fixture *f);

/* Opens an IA (asserting success). */
DAT_IA_HANDLE ep_open_ia(DAT_EVD_HANDLE *async_evd);

DAT_EVD_HANDLE ep_make_evd(DAT_IA_HANDLE ia, DAT_EVD_FLAGS flags);
DAT_PZ_HANDLE ep_make_pz(DAT_IA_HANDLE ia);

/* An EP on the fixture: pz, recv_evd, request_evd, conn_evd, attr (NULL
 * for the defaults); asserts success. */
DAT_EP_HANDLE ep_make(const struct ep_fixture *f, const DAT_EP_ATTR *attr);

/* The EP's parameters (asserting dat_ep_query succeeds). */
DAT_EP_PARAM ep_params(DAT_EP_HANDLE ep);

/* The attributes of an EP created with NULL ones (the provider's defaults). */
DAT_EP_ATTR ep_default_attr(const struct ep_fixture *f);

/* The DAT_INVALID_STATE error naming an EP state, as the tests expect it. */
DAT_RETURN ep_state_error(DAT_EP_STATE state);

#define N_EP_STATES (DAT_EP_STATE_CONNECTED_MULTI_PATH + 1)

/* An SRQ on the fixture's pz; asserts success. */
DAT_SRQ_HANDLE srq_make(const struct ep_fixture *f, DAT_COUNT max_recv_dtos, DAT_COUNT max_recv_iov);

/* One EP attribute pushed past a limit of dat_ia_query (or out of range). */
struct bad_attr {
        const char *name;
        size_t offset;          /* in DAT_EP_ATTR */
        bool seg_length;        /* DAT_SEG_LENGTH, else DAT_COUNT */
        long long value;
};

#define EP_BAD_ATTRS 32

/* Fills out (EP_BAD_ATTRS entries at most) with every attribute beyond the
 * limits; returns how many. */
size_t ep_bad_attrs(const DAT_IA_ATTR *limits, struct bad_attr *out);

/* Writes the bad value into a. */
void ep_bad_attr_set(DAT_EP_ATTR *a, const struct bad_attr *b);

/* An LMR over buf[0, len) on pz (asserting success); its context. */
DAT_LMR_CONTEXT ep_make_lmr(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *buf, size_t len,
                            DAT_MEM_PRIV_FLAGS privileges, DAT_LMR_HANDLE *lmr);

/* A segment [buf + offset, + length) of the LMR whose context is given. */
DAT_LMR_TRIPLET ep_segment(DAT_LMR_CONTEXT context, const void *buf, size_t offset, size_t length);

/* `datctl --json <noun> list` against the test's datd (malloc'd); asserts
 * that datctl succeeds. */
char *ep_datctl_list(const char *noun);

/* Posts n zero-segment buffers (cookies 100, 101, ...) / takes n buffers
 * as an EP of the SRQ would (srq_buffer_take), asserting success. */
void srq_post_empty(DAT_SRQ_HANDLE srq, int n);
void srq_take(DAT_SRQ_HANDLE srq, int n);

/* Takes the next event from an EVD: true if there was one. */
bool evd_next(DAT_EVD_HANDLE evd, DAT_EVENT *event);

#endif
