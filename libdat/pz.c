/* Protection Zones (see pz.h): dat_pz_create, dat_pz_query, dat_pz_free.
 *
 * A PZ has no state of its own besides its dependents: it is registered
 * with datd (DATP_OBJ_PZ, so datd.conf's max_pzs holds) and counts the
 * objects created on it in obj.users. */
#include "config.h"

#include "libdat/pz.h"

#include <stdlib.h>

#include "libdat/datd_object.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"
#include "libdat/mem_object.h"

static void pz_destroy(struct dat_object *obj);

static const struct dat_object_ops pz_ops = {
        .type = DAT_HANDLE_TYPE_PZ,
        .name = "PZ",
        .invalid_subtype = DAT_INVALID_HANDLE_PZ,
        .destroy = pz_destroy,
};

DAT_DEFINE_LOOKUP(pz, DAT_HANDLE_TYPE_PZ)

struct ia *pz_ia(const struct pz *pz)
{
        return dat_container_of(pz->obj.parent, struct ia, obj);
}

DAT_RETURN pz_get(DAT_PZ_HANDLE handle, const struct ia *ia, struct pz **out)
{
        struct dat_object *obj;
        DAT_RETURN ret = mem_object_use(handle, DAT_HANDLE_TYPE_PZ, ia ? &ia->obj : NULL, &obj);

        if (ret == DAT_SUCCESS)
                *out = dat_container_of(obj, struct pz, obj);
        return ret;
}

void pz_put(struct pz *pz)
{
        if (pz)
                mem_object_unuse(pz->obj.handle, DAT_HANDLE_TYPE_PZ);
}

/* Unregisters (if registered), unlinks and frees; accepts a half-built PZ. */
static void pz_free(struct pz *pz)
{
        if (!pz)
                return;
        if (pz->datd_id)
                datd_object_unregister(pz_ia(pz), pz->datd_id);
        dat_object_fini(&pz->obj);
        free(pz);
}

/* ops->destroy, for an abrupt dat_ia_close: its dependents, all newer,
 * are gone already. */
static void pz_destroy(struct dat_object *obj)
{
        struct pz *pz = dat_container_of(obj, struct pz, obj);

        pz->datd_id = 0; /* datd forgets a connection's objects with it */
        pz_free(pz);
}

/* dat_pz_create(3DAT) */
_public_ DAT_RETURN dat_pz_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE *pz_handle)
{
        FOREIGN_DISPATCH_IA(ia_handle, pz_create_func, pz_handle);
        struct ia *ia = ia_lookup(ia_handle);
        struct datp_obj_desc desc = { .kind = DATP_OBJ_PZ };
        struct pz *pz;
        DAT_RETURN ret;

        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (!pz_handle)
                return DAT_ERR_ARG(2);
        pz = calloc(1, sizeof(*pz));
        if (!pz)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        ret = dat_object_init(&pz->obj, &pz_ops, &ia->obj);
        if (ret != DAT_SUCCESS) {
                free(pz);
                return ret;
        }
        /* dat_pz_create(3DAT): over datd.conf's max_pzs -> DAT_INSUFFICIENT_RESOURCES */
        desc.handle = (uintptr_t)pz->obj.handle;
        ret = datd_object_register(ia, &desc, &pz->datd_id);
        if (ret != DAT_SUCCESS) {
                pz->datd_id = 0;
                pz_free(pz);
                return ret;
        }
        *pz_handle = pz->obj.handle;
        return DAT_SUCCESS;
}

/* dat_pz_query(3DAT): the one parameter is the IA.  A mask with bits
 * DAT_PZ_FIELD_ALL does not name is invalid; 0 asks for nothing. */
_public_ DAT_RETURN dat_pz_query(DAT_PZ_HANDLE pz_handle, DAT_PZ_PARAM_MASK pz_param_mask,
                                 DAT_PZ_PARAM *pz_param)
{
        FOREIGN_DISPATCH(pz_handle, pz_query_func, pz_handle, pz_param_mask, pz_param);
        struct pz *pz = pz_lookup(pz_handle);

        if (!pz)
                return dat_invalid_handle(DAT_HANDLE_TYPE_PZ);
        if ((unsigned)pz_param_mask & ~(unsigned)DAT_PZ_FIELD_ALL)
                return DAT_ERR_ARG(2);
        if (!pz_param)
                return DAT_ERR_ARG(3);
        pz_param->ia_handle = pz->obj.parent->handle;
        return DAT_SUCCESS;
}

/* dat_pz_free(3DAT): in use by an EP, LMR, RMR (or SRQ) -> DAT_INVALID_STATE */
_public_ DAT_RETURN dat_pz_free(DAT_PZ_HANDLE pz_handle)
{
        FOREIGN_DISPATCH(pz_handle, pz_free_func, pz_handle);
        struct dat_object *obj;
        DAT_RETURN ret = mem_object_claim(pz_handle, DAT_HANDLE_TYPE_PZ, DAT_INVALID_STATE_PZ_IN_USE,
                                          &obj);

        if (ret == DAT_SUCCESS)
                pz_free(dat_container_of(obj, struct pz, obj));
        return ret;
}
