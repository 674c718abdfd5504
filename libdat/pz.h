/* Protection Zones.  A PZ groups the LMRs, RMRs, EPs and SRQs that may be
 * used together; objects created on a PZ hold one `users` reference on it
 * (taken and dropped under dat_object_lock()), and dat_pz_free() refuses
 * while any is left (dat_pz_free(3DAT): DAT_INVALID_STATE_PZ_IN_USE). */
#ifndef DATD_LIBDAT_PZ_H
#define DATD_LIBDAT_PZ_H

#include <stdint.h>

#include "libdat/handle.h"

struct ia;

struct pz {
        struct dat_object obj;          /* parent: the IA it was created on */
        uint32_t datd_id;               /* datd's id of the registration */
};

/* The PZ a handle names, or NULL. */
struct pz *pz_lookup(DAT_PZ_HANDLE handle);

/* The IA a PZ was created on. */
struct ia *pz_ia(const struct pz *pz);

/* Takes one `users` reference on the live PZ that handle names, for an
 * object being created on ia (an LMR, RMR, EP or SRQ).  The lookup and the
 * reference happen under dat_object_lock(), so a concurrent dat_pz_free()
 * either sees the new user or the handle is already dead.  Returns
 * DAT_SUCCESS and *out, or DAT_INVALID_HANDLE_PZ when handle is not a live
 * PZ of ia (of any IA when ia is NULL), or the PZ is being freed. */
DAT_RETURN pz_get(DAT_PZ_HANDLE handle, const struct ia *ia, struct pz **out);

/* Drops a reference pz_get() took.  A PZ is always older than the objects
 * created on it, so an abrupt dat_ia_close() (newest first) calls this
 * before the PZ itself goes. */
void pz_put(struct pz *pz);

#endif
