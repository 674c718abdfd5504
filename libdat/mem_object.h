/* The dependency rules PZs, LMRs and RMRs share, on the common object
 * header (handle.h): taking and dropping a `users` reference on an object
 * another one depends on, and claiming an object for freeing, which is
 * refused while it has users.  Everything happens under dat_object_lock(),
 * lookup included, so a free and a new dependency cannot cross. */
#ifndef DATD_LIBDAT_MEM_OBJECT_H
#define DATD_LIBDAT_MEM_OBJECT_H

#include "libdat/handle.h"

/* Takes one `users` reference on the live object of type that handle
 * names, created on parent (on any parent when parent is NULL).  Returns
 * DAT_SUCCESS and *out, or the DAT_INVALID_HANDLE of type when there is no
 * such object or it is being freed. */
DAT_RETURN mem_object_use(DAT_HANDLE handle, DAT_HANDLE_TYPE type, const struct dat_object *parent,
                          struct dat_object **out);

/* Drops a reference mem_object_use() took; nothing if the object is gone
 * already (an abrupt dat_ia_close destroys newest first). */
void mem_object_unuse(DAT_HANDLE handle, DAT_HANDLE_TYPE type);

/* Claims the live object of type that handle names for freeing: marks it
 * closing, so no new user or second free gets it.  Returns DAT_SUCCESS and
 * *out; the DAT_INVALID_HANDLE of type when there is no such object or it
 * is being freed; DAT_INVALID_STATE with in_use_subtype while other
 * objects use it (it stays as it was). */
DAT_RETURN mem_object_claim(DAT_HANDLE handle, DAT_HANDLE_TYPE type,
                            DAT_RETURN_SUBTYPE in_use_subtype, struct dat_object **out);

#endif
