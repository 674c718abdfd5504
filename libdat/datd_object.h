/* Telling datd about the DAT objects of an IA (proto OBJ_CREATE/UPDATE/
 * DESTROY), so that datd enforces the client's quotas and datctl can list
 * them.  Every object constructor registers after its local checks pass and
 * before it hands out a handle; a refusal from datd (quota) fails the create.
 * Destruction unregisters; an abrupt close or a dying process needs nothing:
 * datd drops everything the connection owned when it closes. */
#ifndef DATD_LIBDAT_DATD_OBJECT_H
#define DATD_LIBDAT_DATD_OBJECT_H

#include <stdint.h>

#include "libdat/libdat.h"
#include "proto/datp.h"

struct ia;

/* Registers desc on ia; on DAT_SUCCESS *obj_id is datd's id for it.
 * DAT_INSUFFICIENT_RESOURCES when datd's quota for this kind (or for LMR
 * bytes) is used up; DAT_INTERNAL_ERROR when datd cannot be reached. */
DAT_RETURN datd_object_register(struct ia *ia, const struct datp_obj_desc *desc,
                                uint32_t *obj_id);

/* Registers an EP without waiting for datd's answer: from then on the EP is
 * named by its handle (obj_id 0 in datd_object_update, and
 * datd_object_unregister_ep).  For a caller that knows datd will accept it
 * (ia_reserve_ep); DAT_INTERNAL_ERROR when datd cannot be reached. */
DAT_RETURN datd_object_register_ep_nowait(struct ia *ia, const struct datp_obj_desc *desc);

/* Replaces the description datd holds (EP state changes, dat_ep_modify). */
DAT_RETURN datd_object_update(struct ia *ia, uint32_t obj_id, const struct datp_obj_desc *desc);

/* Forgets the object.  Never fails from the caller's point of view: if datd
 * is gone the object is gone with the connection anyway. */
void datd_object_unregister(struct ia *ia, uint32_t obj_id);

/* The same for an EP registered without waiting, named by its handle. */
void datd_object_unregister_ep(struct ia *ia, uint64_t ep_handle);

#endif
