/* The transports libdat runs over (shm, tcp; verbs later), as far as the
 * IA layer needs to know them today: their names and their design limits.
 * These limits are what dat_ia_query() reports, combined with datd's quota
 * for the client (the smaller wins).  The transport issues that build the
 * data paths must keep every number here true, or change it here; this
 * table is the one place they live.  The operations table of each transport
 * (rdma-core style: one file per object kind) joins this struct then. */
#ifndef DATD_LIBDAT_TRANSPORT_H
#define DATD_LIBDAT_TRANSPORT_H

#include <stdint.h>

#include "libdat/libdat.h"

struct transport_caps {
        const char *name;                 /* datd's transport name: "shm", "tcp" */
        uint32_t max_dto_per_ep;          /* work queue entries per direction */
        uint32_t max_rdma_read_per_ep;    /* outstanding RDMA Reads, each direction */
        uint32_t max_evd_qlen;            /* events one EVD ring holds */
        uint32_t max_iov_segments;        /* per send/recv/RDMA descriptor */
        uint32_t max_message_size;        /* one send/receive */
        uint32_t max_rdma_size;           /* one RDMA Read or Write */
        uint32_t max_eps;                 /* connections one process can drive */
        uint32_t optimal_alignment;       /* divides DAT_OPTIMAL_ALIGNMENT */
};

/* The transport called name, or NULL if this libdat has none by that name. */
const struct transport_caps *transport_caps_find(const char *name);

/* The highest virtual address a Linux process is given on this platform
 * (without opting into 5-level page tables on x86-64). */
uint64_t transport_max_user_address(void);

#endif
