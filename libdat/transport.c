/* Design limits of the transports (see transport.h). */
#include "config.h"

#include "libdat/transport.h"

#include <string.h>

/* Why these numbers:
 * - max_dto_per_ep 4096: ring slots per direction of one connection; a
 *   descriptor is one cache line, so a connection's rings stay within 512 KiB.
 * - max_rdma_read_per_ep 64: outstanding RDMA Read requests tracked per
 *   connection and direction (shm: served by process_vm_readv in the
 *   initiator; tcp: the target's progress thread serves them in order).
 * - max_evd_qlen 65536: events in one EVD ring (a DAT_EVENT is 120 bytes: 7.5 MiB).
 * - max_iov_segments 16: the segments a ring descriptor carries.
 * - max_message_size 16 MiB, max_rdma_size 1 GiB: larger payloads than a ring
 *   slot go by cross-memory attach (shm) or are streamed in frames (tcp).
 * - max_eps 65536: connections one process drives per IA before datd's quota.
 * - optimal_alignment 64: a cache line; copies are fastest from there. */
#define SOFTWARE_TRANSPORT_CAPS               \
        .max_dto_per_ep = 4096,                 \
        .max_rdma_read_per_ep = 64,             \
        .max_evd_qlen = 65536,                  \
        .max_iov_segments = 16,                 \
        .max_message_size = 16u << 20,          \
        .max_rdma_size = 1u << 30,              \
        .max_eps = 65536,                       \
        .optimal_alignment = 64

/* shm and tcp share one software design, so they share its limits. */
static const struct transport_caps transports[] = {
        { .name = "shm", SOFTWARE_TRANSPORT_CAPS },
        { .name = "tcp", SOFTWARE_TRANSPORT_CAPS },
};

_Static_assert(DAT_OPTIMAL_ALIGNMENT % 64 == 0, "optimal alignment must divide DAT_OPTIMAL_ALIGNMENT");

const struct transport_caps *transport_caps_find(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(transports); i++)
                if (strcmp(transports[i].name, name) == 0)
                        return &transports[i];
        return NULL;
}

uint64_t transport_max_user_address(void)
{
#if defined(__x86_64__)
        return (UINT64_C(1) << 47) - 4096 - 1;  /* TASK_SIZE: 128 TiB less the guard page */
#elif defined(__aarch64__)
        return (UINT64_C(1) << 48) - 1;         /* 48-bit VA, the common kernel config */
#elif UINTPTR_MAX == 0xffffffffu
        return UINT32_MAX;
#else
        return UINTPTR_MAX;
#endif
}
