/* The dependency rules PZs, LMRs and RMRs share, on the common object
 * header (handle.h): taking and dropping a `users` reference on an object
 * another one depends on, and claiming an object for freeing, which is
 * refused while it has users.  Everything happens under dat_object_lock(),
 * lookup included, so a free and a new dependency cannot cross. */
#ifndef DATD_LIBDAT_MEM_OBJECT_H
#define DATD_LIBDAT_MEM_OBJECT_H

#include <dat2/dat_ib_extensions.h>

#include "libdat/handle.h"

/* The privileges LMRs and RMR binds take: dat_lmr_create(3DAT)'s
 * DAT_MEM_PRIV_ALL_FLAG bits and the IB extensions' remote atomics
 * (dat_ib_extensions.h), a remote privilege like remote read and write. */
#define MEM_PRIV_VALID ((unsigned)DAT_MEM_PRIV_ALL_FLAG | (unsigned)DAT_IB_MEM_PRIV_REMOTE_ATOMIC)
#define MEM_PRIV_REMOTE                                                                  \
        ((unsigned)DAT_MEM_PRIV_REMOTE_READ_FLAG | (unsigned)DAT_MEM_PRIV_REMOTE_WRITE_FLAG | \
         (unsigned)DAT_IB_MEM_PRIV_REMOTE_ATOMIC)

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
