/* Shared dependency rules of PZs, LMRs and RMRs (see mem_object.h). */
#include "config.h"

#include "libdat/mem_object.h"

DAT_RETURN mem_object_use(DAT_HANDLE handle, DAT_HANDLE_TYPE type, const struct dat_object *parent,
                          struct dat_object **out)
{
        struct dat_object *obj;

        dat_object_lock();
        obj = dat_object_lookup(handle, type);
        if (!obj || obj->closing || (parent && obj->parent != parent)) {
                dat_object_unlock();
                return dat_invalid_handle(type);
        }
        obj->users++;
        dat_object_unlock();
        *out = obj;
        return DAT_SUCCESS;
}

void mem_object_unuse(DAT_HANDLE handle, DAT_HANDLE_TYPE type)
{
        struct dat_object *obj;

        dat_object_lock();
        obj = dat_object_lookup(handle, type);
        if (obj && obj->users > 0)
                obj->users--;
        dat_object_unlock();
}

DAT_RETURN mem_object_claim(DAT_HANDLE handle, DAT_HANDLE_TYPE type,
                            DAT_RETURN_SUBTYPE in_use_subtype, struct dat_object **out)
{
        struct dat_object *obj;

        dat_object_lock();
        obj = dat_object_lookup(handle, type);
        if (!obj || obj->closing) {
                dat_object_unlock();
                return dat_invalid_handle(type);
        }
        if (obj->users > 0) {
                dat_object_unlock();
                return DAT_ERR(DAT_INVALID_STATE, in_use_subtype);
        }
        obj->closing = true;
        dat_object_unlock();
        *out = obj;
        return DAT_SUCCESS;
}
