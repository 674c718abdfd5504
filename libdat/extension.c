/* dat_extension_op: the entry point of the DAT extensions (IB, iWARP).  No
 * extension is implemented (dat_ia_query reports DAT_EXTENSION_NONE), so a
 * valid handle gets DAT_NOT_IMPLEMENTED. */
#include "config.h"

#include "libdat/handle.h"

_public_ DAT_RETURN dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP operation, ...)
{
        if (!dat_object_lookup_any(handle))
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        return DAT_ERR_NOT_IMPLEMENTED;
}
