/* Interface Adapter instances: one per successful dat_ia_openv(), each with
 * its own control connection to datd. */
#ifndef DATD_LIBDAT_IA_H
#define DATD_LIBDAT_IA_H

#include <sys/socket.h>

#include "libdat/datd_conn.h"
#include "libdat/dto.h"
#include "libdat/evd.h"
#include "libdat/handle.h"
#include "libdat/transport.h"

enum {
        IA_TRANSPORT_ATTR_TRANSPORT,
        IA_TRANSPORT_ATTR_DEVICE,
        IA_TRANSPORT_ATTR_MTU,
        IA_N_TRANSPORT_ATTR,
};

enum {
        IA_PROVIDER_ATTR_DATD_IA,
        IA_PROVIDER_ATTR_DATD_SOCKET,
        IA_PROVIDER_ATTR_DATD_VERSION,
        IA_PROVIDER_ATTR_PROTOCOL,
        IA_N_PROVIDER_ATTR,
};

struct ia {
        struct dat_object obj;
        struct datd_conn conn;
        uint32_t ia_id;                         /* datd's id of this open instance */
        char name[DAT_NAME_MAX_LENGTH];         /* the name the consumer opened */
        struct datp_ia_info info;               /* what datd said at IA_OPEN */
        /* EPs registered with datd on this instance, counted against
         * info.max_eps as datd counts them (ep.c, ep_register). */
        uint32_t eps_registered;
        const struct transport_caps *caps;
        struct progress *progress;              /* its progress thread (progress.h) */
        struct dto_ia dto;                      /* its running data paths (dto.h) */
        struct shm_keep *shm_keep;              /* shm channels kept between connections */

        /* The async EVD: the one dat_ia_openv created (own_async_evd, freed
         * with the IA), or one the consumer passed (borrowed_async_evd: its
         * users count holds this IA), or none (DAT_EVD_ASYNC_EXISTS). */
        struct evd *own_async_evd;
        DAT_EVD_HANDLE borrowed_async_evd;
        bool async_evd_exists_elsewhere;

        /* What dat_ia_query hands out, valid until dat_ia_close. */
        struct sockaddr_storage address;
        char mtu_text[16];
        char protocol_text[16];
        DAT_NAMED_ATTR transport_attr[IA_N_TRANSPORT_ATTR];
        DAT_NAMED_ATTR provider_attr[IA_N_PROVIDER_ATTR];
};

/* The IA a handle names, or NULL. */
struct ia *ia_lookup(DAT_IA_HANDLE handle);

/* Fills what dat_ia_query hands out by pointer (address, named attributes)
 * once, at open, so that those pointers stay valid until dat_ia_close. */
void ia_query_prepare(struct ia *ia);

/* Exported by Debian's libdat2.so.2 with version DAT_2.0 but declared in no
 * public header; this is its prototype there. */
DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *ia_handle_p);

#endif
