/* What the fault tests (test_dto_errors, test_dto_teardown) share, on top
 * of the fixture (dto_fixture.h): RMRs bound with chosen privileges, and
 * the checks that follow a fault -- the connection broke, and every DTO
 * that was still outstanding completed exactly once, DAT_DTO_ERR_FLUSHED,
 * in the order it was posted.  Used inside a role (DTO_ASSERT*). */
#ifndef DATD_TESTS_DTO_DTO_FAULT_H
#define DATD_TESTS_DTO_DTO_FAULT_H

#include <dat2/udat.h>
#include <stdint.h>

#include "tests/dto/dto_fixture.h"

/* A DTO as posted: what its completion must name. */
struct dto_posted {
        uint64_t cookie;
        DAT_DTOS op;
};

/* A list of posted DTOs of one completion stream, in posting order. */
#define DTO_POSTED_MAX 64
struct dto_posted_list {
        unsigned n;
        struct dto_posted d[DTO_POSTED_MAX];
};

void dto_posted_add(struct dto_posted_list *l, uint64_t cookie, DAT_DTOS op);

/* Waits for one completion per entry of l on evd, of ep, each with status
 * (DAT_DTO_ERR_FLUSHED for a flush), in the order of l. */
void dto_expect_all(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, const struct dto_posted_list *l,
                    DAT_DTO_COMPLETION_STATUS status);

/* The EP's state (dat_ep_get_status, asserted to succeed). */
DAT_EP_STATE dto_ep_state(DAT_EP_HANDLE ep);

/* dat_ep_post_rdma_write / _read / _send / _recv asserting DAT_SUCCESS and
 * recording the DTO in l (NULL: not recorded). */
void dto_post_write(DAT_EP_HANDLE ep, DAT_LMR_TRIPLET iov, uint64_t cookie, DAT_RMR_TRIPLET remote,
                    struct dto_posted_list *l);
void dto_post_read(DAT_EP_HANDLE ep, DAT_LMR_TRIPLET iov, uint64_t cookie, DAT_RMR_TRIPLET remote,
                   struct dto_posted_list *l);
void dto_post_send_one(DAT_EP_HANDLE ep, DAT_LMR_TRIPLET iov, uint64_t cookie,
                       struct dto_posted_list *l);
void dto_post_recv_one(DAT_EP_HANDLE ep, DAT_LMR_TRIPLET iov, uint64_t cookie,
                       struct dto_posted_list *l);

/* The connection of ep broke: DAT_CONNECTION_EVENT_BROKEN on s->conn_evd
 * (naming ep), and ep is Disconnected. */
void dto_expect_broken(struct dto_side *s, DAT_EP_HANDLE ep);

/* A new RMR of pz (NULL: s->pz) bound on ep to [off, off+len) of m with
 * privileges; waits for the bind's successful completion on
 * s->request_evd.  Returns its description for the peer (dto_put it). */
struct dto_remote dto_rmr_bind_range(struct dto_side *s, DAT_EP_HANDLE ep, DAT_PZ_HANDLE pz,
                                     const struct dto_mem *m, DAT_VLEN off, DAT_VLEN len,
                                     DAT_MEM_PRIV_FLAGS privileges);

#endif
