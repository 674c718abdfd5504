/* Registration of an IA's DAT objects with datd: one OBJ_* round trip on the
 * IA's control connection per create and state change; a free, and an EP's
 * create, are sent without waiting. */
#include <stdio.h>
#include <string.h>

#include "libdat/datd_object.h"
#include "libdat/ia.h"

static const char *const kind_names[] = {
        [DATP_OBJ_PZ] = "PZ",   [DATP_OBJ_EVD] = "EVD", [DATP_OBJ_CNO] = "CNO",
        [DATP_OBJ_LMR] = "LMR", [DATP_OBJ_RMR] = "RMR", [DATP_OBJ_EP] = "EP",
        [DATP_OBJ_SRQ] = "SRQ",
};

static const char *kind_name(uint32_t kind)
{
        return kind <= DATP_OBJ_KIND_MAX && kind_names[kind] ? kind_names[kind] : "object";
}

/* One OBJ_* round trip.  Every reply starts with its header and a
 * struct datp_status, so the status sits at the same place in all of them.
 * The trace says what failed; the caller gets the DAT code. */
static DAT_RETURN object_call(struct ia *ia, struct datp_header *req, const char *what,
                              uint32_t kind, union datp_message *reply)
{
        const struct datp_status *status;
        char why[DATD_REASON_MAX];
        DAT_RETURN ret;

        ret = datd_conn_call(&ia->conn, req, reply, why);
        if (ret != DAT_SUCCESS) {
                dat_trace("%s %s on IA \"%s\": %s", what, kind_name(kind), ia->name, why);
                return ret;
        }
        status = (const struct datp_status *)(reply->bytes + sizeof(struct datp_header));
        ret = dat_err_normalize(status->dat_status);
        if (ret != DAT_SUCCESS)
                dat_trace("%s %s on IA \"%s\": datd answered 0x%08x%s%s", what, kind_name(kind),
                          ia->name, ret, status->sys_errno ? ", " : "",
                          status->sys_errno ? strerror(status->sys_errno) : "");
        return ret;
}

DAT_RETURN datd_object_register(struct ia *ia, const struct datp_obj_desc *desc, uint32_t *obj_id)
{
        struct datp_obj_create req = {
                .hdr = { .type = DATP_OBJ_CREATE, .length = sizeof(req) },
                .ia_id = ia->ia_id,
                .desc = *desc,
        };
        union datp_message reply;
        DAT_RETURN ret = object_call(ia, &req.hdr, "registering", desc->kind, &reply);

        if (ret == DAT_SUCCESS)
                *obj_id = reply.obj_create_reply.obj_id;
        return ret;
}

DAT_RETURN datd_object_register_ep_nowait(struct ia *ia, const struct datp_obj_desc *desc)
{
        struct datp_obj_create req = {
                .hdr = { .type = DATP_OBJ_CREATE, .length = sizeof(req) },
                .ia_id = ia->ia_id,
                .desc = *desc,
        };
        DAT_RETURN ret = datd_conn_send(&ia->conn, &req.hdr);

        if (ret != DAT_SUCCESS)
                dat_trace("registering EP on IA \"%s\": datd cannot be reached", ia->name);
        return ret;
}

DAT_RETURN datd_object_update(struct ia *ia, uint32_t obj_id, const struct datp_obj_desc *desc)
{
        struct datp_obj_update req = {
                .hdr = { .type = DATP_OBJ_UPDATE, .length = sizeof(req) },
                .ia_id = ia->ia_id,
                .obj_id = obj_id,
                .desc = *desc,
        };
        union datp_message reply;

        return object_call(ia, &req.hdr, "updating", desc->kind, &reply);
}

static void send_destroy(struct ia *ia, struct datp_obj_destroy *req)
{
        /* Without waiting for the reply: nothing here depends on it, and
         * datd handles this client's requests in order, so every later
         * request (a create against the same quota) finds it done.  A
         * failure leaves nothing behind: datd frees what a connection
         * owned when it closes, and it closes with the IA. */
        if (datd_conn_send(&ia->conn, &req->hdr) != DAT_SUCCESS)
                dat_trace("unregistering object %u (handle 0x%llx) on IA \"%s\": datd cannot be "
                          "reached", req->obj_id, (unsigned long long)req->ep_handle, ia->name);
}

void datd_object_unregister(struct ia *ia, uint32_t obj_id)
{
        struct datp_obj_destroy req = {
                .hdr = { .type = DATP_OBJ_DESTROY, .length = sizeof(req) },
                .ia_id = ia->ia_id,
                .obj_id = obj_id,
        };

        send_destroy(ia, &req);
}

void datd_object_unregister_ep(struct ia *ia, uint64_t ep_handle)
{
        struct datp_obj_destroy req = {
                .hdr = { .type = DATP_OBJ_DESTROY, .length = sizeof(req) },
                .ia_id = ia->ia_id,
                .ep_handle = ep_handle,
        };

        send_destroy(ia, &req);
}
