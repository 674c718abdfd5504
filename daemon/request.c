/* What datd does with each packet a client sends: validate, then HELLO,
 * IA_OPEN, IA_CLOSE, IA_QUERY, OBJ_CREATE, OBJ_UPDATE, OBJ_DESTROY.  Nothing
 * here trusts the packet beyond what datp_validate() checked. */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <dat2/udat.h>

#include "daemon/client.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/policy.h"

/* A DAT_RETURN as the DAT API returns it: class bit, type, subtype. */
#define DAT_ERR(type, subtype) ((uint32_t) (DAT_CLASS_ERROR | (type) | (subtype)))

/* A client's string, safe to put in a log line. */
static const char *printable(const char *in, char *out, size_t size)
{
        size_t i;

        for (i = 0; in[i] && i + 1 < size; i++)
                out[i] = in[i] >= 0x20 && in[i] < 0x7f ? in[i] : '?';
        out[i] = '\0';
        return out;
}

static int error_errno(int code)
{
        switch (code) {
        case DATP_E_VERSION: return EPROTONOSUPPORT;
        case DATP_E_OVERSIZE: return EMSGSIZE;
        default: return EPROTO;
        }
}

/* Answers a packet that could not be taken with DATP_ERROR.  Errors before
 * HELLO, a wrong magic or version are fatal: nothing later on the connection
 * can be trusted to line up.  The others count, and the one that reaches
 * limits.max_protocol_errors is fatal too.  Returns -EPROTO when fatal. */
static int client_reject(Client *c, const void *buf, size_t len, int code, const char *reason)
{
        Manager *m = c->manager;
        const struct datp_header *hdr = buf;
        /* len may be the real length of an oversized packet: only the
         * header is read, and only if it arrived. */
        bool header_ok = len >= sizeof(*hdr) && hdr->magic == DATP_MAGIC;
        struct datp_error e = {};
        bool fatal;
        int r;

        m->counters.protocol_errors++;
        c->protocol_errors++;
        fatal = c->version == 0 || code == DATP_E_MAGIC || code == DATP_E_VERSION ||
                c->protocol_errors >= m->config->limits.max_protocol_errors;

        log_warning("Client %" PRIu64 " (pid %d, uid %u): refused %s: %s (%s)%s", c->id,
                    (int) c->peer.pid, (unsigned) c->peer.uid,
                    header_ok ? datp_type_name(hdr->type) : "packet",
                    datp_decode_error_str(code), reason, fatal ? ", closing" : "");

        datp_header_init(&e.hdr, DATP_ERROR, c->version ? c->version : DATP_VERSION_MAX,
                         sizeof(e), header_ok ? hdr->request_id : 0);
        e.status.dat_status = DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        e.status.sys_errno = error_errno(code);
        e.bad_type = header_ok ? hdr->type : 0;
        e.fatal = fatal;
        e.code = code;
        snprintf(e.reason, sizeof(e.reason), "%s", reason);
        r = client_send(c, &e.hdr);
        return fatal ? -EPROTO : r;
}

static void reply_status(struct datp_status *s, uint32_t dat_status, int sys_errno)
{
        s->dat_status = dat_status;
        s->sys_errno = sys_errno;
}

/* datp_validate() took HELLO only as the first message and only with a
 * version range that meets ours: the highest common version is the client's
 * max or ours. */
static int handle_hello(Client *c, const struct datp_hello *req)
{
        struct datp_hello_reply reply = {};
        uint16_t version = req->max_version < DATP_VERSION_MAX ? req->max_version : DATP_VERSION_MAX;

        c->version = version;
        datp_header_init(&reply.hdr, DATP_HELLO | DATP_REPLY, version, sizeof(reply),
                         req->hdr.request_id);
        reply_status(&reply.status, DAT_SUCCESS, 0);
        reply.version = version;
        reply.max_message = DATP_MAX_MESSAGE;
        datp_set_string(reply.daemon_version, sizeof(reply.daemon_version), PACKAGE_VERSION);
        log_debug("Client %" PRIu64 " speaks protocol version %u.", c->id, version);
        return client_send(c, &reply.hdr);
}

static int handle_ia_open(Client *c, const struct datp_ia_open *req)
{
        Manager *m = c->manager;
        struct datp_ia_open_reply reply = {};
        IaInstance *instance = NULL;
        char name[64];
        Ia *ia;

        datp_header_init(&reply.hdr, DATP_IA_OPEN | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        ia = ia_registry_find(&m->ias, req->ia_name);
        if (!ia)
                reply_status(&reply.status, DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED),
                             ENOENT);
        else if (!policy_allows(ia->config, &c->peer)) {
                reply_status(&reply.status, DAT_ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE), EACCES);
                log_notice("Client %" PRIu64 " (pid %d, uid %u) may not open IA %s.", c->id,
                           (int) c->peer.pid, (unsigned) c->peer.uid, ia->name);
        } else if (c->n_instances >= m->config->limits.max_ias_per_client)
                reply_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_NO_SUBTYPE),
                             EMFILE);
        else if (client_open_ia(c, ia, &instance) < 0)
                reply_status(&reply.status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY),
                             ENOMEM);

        if (instance) {
                m->counters.ia_opens++;
                reply_status(&reply.status, DAT_SUCCESS, 0);
                reply.ia_id = instance->id;
                ia_fill_info(ia, &m->config->limits, &reply.info);
                log_debug("Client %" PRIu64 " opened IA %s as %" PRIu32 ".", c->id, ia->name,
                          instance->id);
        } else {
                m->counters.ia_open_failures++;
                log_debug("Client %" PRIu64 " failed to open IA \"%s\": 0x%08" PRIx32 ".", c->id,
                          printable(req->ia_name, name, sizeof(name)), reply.status.dat_status);
        }
        return client_send(c, &reply.hdr);
}

static int handle_ia_close(Client *c, const struct datp_ia_close *req)
{
        struct datp_ia_close_reply reply = {};
        IaInstance *instance = client_find_ia(c, req->ia_id);

        datp_header_init(&reply.hdr, DATP_IA_CLOSE | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!instance)
                reply_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
        /* dat_ia_close(3DAT): graceful close with live children ->
         * DAT_INVALID_STATE.  An abrupt close destroys them, as libdat does
         * locally without unregistering each: they go with the instance. */
        else if (req->flags == DATP_CLOSE_GRACEFUL && instance->objects != OBJECT_NONE)
                reply_status(&reply.status, DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE),
                             EBUSY);
        else {
                log_debug("Client %" PRIu64 " closed IA %s (%" PRIu32 ").", c->id,
                          instance->ia->name, instance->id);
                ia_instance_free(instance);
                reply_status(&reply.status, DAT_SUCCESS, 0);
        }
        return client_send(c, &reply.hdr);
}

static int handle_ia_query(Client *c, const struct datp_ia_query *req)
{
        struct datp_ia_query_reply reply = {};
        IaInstance *instance = client_find_ia(c, req->ia_id);

        datp_header_init(&reply.hdr, DATP_IA_QUERY | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!instance)
                reply_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
        else {
                reply_status(&reply.status, DAT_SUCCESS, 0);
                ia_fill_info(instance->ia, &c->manager->config->limits, &reply.info);
        }
        return client_send(c, &reply.hdr);
}

/* ---- objects ------------------------------------------------------------- */

/* The reply to a create or update over a quota.  Logged once per limit until
 * an object it counts goes away (object_free()), so that a client hammering
 * at its quota cannot flood the journal. */
static void refuse_over_quota(Client *c, const struct datp_obj_desc *d, const ObjectQuota *q,
                              struct datp_status *status)
{
        reply_status(status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, q->dat_subtype), EDQUOT);
        if (c->quota_logged & q->bit)
                return;
        c->quota_logged |= q->bit;
        log_info("Client %" PRIu64 " (pid %d, uid %u, %s): %s refused: %s (%" PRIu64 ") reached.",
                 c->id, (int) c->peer.pid, (unsigned) c->peer.uid, c->peer.comm,
                 object_kind_to_string(d->kind), q->limit, q->value);
}

/* A request's object on the request's IA instance: by obj_id, or with
 * obj_id 0 the EP of ep_handle (libdat registers EPs without waiting for
 * their id).  On failure the reply's status says which id was unknown (the
 * object's kind, when the request names it). */
static Object *find_object(Client *c, uint32_t ia_id, uint32_t obj_id, uint64_t ep_handle,
                           uint32_t kind, struct datp_status *status)
{
        IaInstance *instance = client_find_ia(c, ia_id);
        Object *o = obj_id != 0  ? object_find(&c->objects, obj_id)
                    : ep_handle ? object_find_ep(&c->objects, ep_handle)
                                : NULL;

        if (!instance)
                reply_status(status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
        else if (!o || o->instance != instance)
                reply_status(status, DAT_ERR(DAT_INVALID_HANDLE, object_kind_invalid_handle(kind)),
                             EBADF);
        else
                return o;
        return NULL;
}

/* object_add() failed with r: its uid's budget (logged once per client:
 * the budget frees up when another client of the uid goes, not with this
 * one's objects), or memory. */
static void refuse_object_add(Client *c, int r, struct datp_status *status)
{
        if (r != -EDQUOT) {
                reply_status(status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY), ENOMEM);
                return;
        }
        reply_status(status, DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY), EDQUOT);
        if (c->quota_logged & UID_BUDGET_LOGGED_BIT)
                return;
        c->quota_logged |= UID_BUDGET_LOGGED_BIT;
        log_info("Client %" PRIu64 " (pid %d, uid %u, %s): object refused: max_object_bytes_per_uid "
                 "(%" PRIu64 ") reached.", c->id, (int) c->peer.pid, (unsigned) c->peer.uid,
                 c->peer.comm, c->manager->config->limits.max_object_bytes_per_uid);
}

static int handle_obj_create(Client *c, const struct datp_obj_create *req)
{
        Manager *m = c->manager;
        struct datp_obj_create_reply reply = {};
        IaInstance *instance = client_find_ia(c, req->ia_id);
        ObjectQuota quota;
        int r;

        datp_header_init(&reply.hdr, DATP_OBJ_CREATE | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!instance)
                reply_status(&reply.status, DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), EBADF);
        else if (!object_quota_allows(&instance->counts, &m->config->limits, &req->desc, NULL, &quota))
                refuse_over_quota(c, &req->desc, &quota, &reply.status);
        /* An EP's handle names it in later requests: one EP per handle. */
        else if (req->desc.kind == DATP_OBJ_EP && object_find_ep(&c->objects, req->desc.handle))
                reply_status(&reply.status, DAT_ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE), EEXIST);
        else if ((r = object_add(c, instance, &req->desc, &reply.obj_id)) < 0)
                refuse_object_add(c, r, &reply.status);

        if (reply.obj_id != 0)
                m->counters.objects_registered++;
        else
                m->counters.objects_refused++;
        return client_send(c, &reply.hdr);
}

static int handle_obj_update(Client *c, const struct datp_obj_update *req)
{
        struct datp_obj_update_reply reply = {};
        Object *o = find_object(c, req->ia_id, req->obj_id,
                                req->desc.kind == DATP_OBJ_EP ? req->desc.handle : 0,
                                req->desc.kind, &reply.status);
        ObjectQuota quota;

        datp_header_init(&reply.hdr, DATP_OBJ_UPDATE | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (!o)
                return client_send(c, &reply.hdr);
        /* An update describes the same object: what it is and which handle
         * the client knows it by stay. */
        if (o->desc.kind != req->desc.kind || o->desc.handle != req->desc.handle)
                reply_status(&reply.status, DAT_ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE), EINVAL);
        else if (!object_quota_allows(&o->instance->counts, &c->manager->config->limits, &req->desc,
                                      &o->desc, &quota))
                refuse_over_quota(c, &req->desc, &quota, &reply.status);
        else
                object_update(c, o, &req->desc);
        return client_send(c, &reply.hdr);
}

static int handle_obj_destroy(Client *c, const struct datp_obj_destroy *req)
{
        struct datp_obj_destroy_reply reply = {};
        /* The kind is not in the request, unless it names an EP by handle. */
        Object *o = find_object(c, req->ia_id, req->obj_id, req->ep_handle,
                                req->ep_handle ? DATP_OBJ_EP : 0, &reply.status);

        datp_header_init(&reply.hdr, DATP_OBJ_DESTROY | DATP_REPLY, c->version, sizeof(reply),
                         req->hdr.request_id);
        if (o)
                object_free(c, o);
        return client_send(c, &reply.hdr);
}

int client_handle_packet(Client *c, const union datp_message *msg, size_t len, unsigned nfds)
{
        const char *reason = "invalid message";
        int r;

        c->manager->counters.requests++;
        /* Also the state rules: before HELLO only HELLO passes, after it
         * HELLO no longer does. */
        r = datp_validate(msg, len, nfds, DATP_TO_DAEMON, c->version, &reason);
        if (r < 0)
                return client_reject(c, msg, len, -r, reason ? reason : "invalid message");

        switch (msg->hdr.type) {
        case DATP_HELLO:
                return handle_hello(c, &msg->hello);
        case DATP_IA_OPEN:
                return handle_ia_open(c, &msg->ia_open);
        case DATP_IA_CLOSE:
                return handle_ia_close(c, &msg->ia_close);
        case DATP_IA_QUERY:
                return handle_ia_query(c, &msg->ia_query);
        case DATP_OBJ_CREATE:
                return handle_obj_create(c, &msg->obj_create);
        case DATP_OBJ_UPDATE:
                return handle_obj_update(c, &msg->obj_update);
        case DATP_OBJ_DESTROY:
                return handle_obj_destroy(c, &msg->obj_destroy);
        case DATP_LISTEN:
                return conn_handle_listen(c, &msg->listen);
        case DATP_UNLISTEN:
                return conn_handle_unlisten(c, &msg->unlisten);
        case DATP_CONNECT:
                return conn_handle_connect(c, &msg->connect);
        case DATP_CR_ACCEPT:
                return conn_handle_cr_accept(c, &msg->cr_accept);
        case DATP_CR_REJECT:
                return conn_handle_cr_reject(c, &msg->cr_reject);
        case DATP_CR_HANDOFF:
                return conn_handle_cr_handoff(c, &msg->cr_handoff);
        case DATP_DISCONNECT:
                return conn_handle_disconnect(c, &msg->disconnect);
        case DATP_CHANNEL_RELEASE:
                return conn_handle_channel_release(c, &msg->channel_release);
        default:
                /* datp_validate() knows a type this datd does not serve. */
                return client_reject(c, msg, len, DATP_E_TYPE, "message type not served by this datd");
        }
}
