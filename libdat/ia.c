/* dat_ia_openv, dat_ia_close and dats_get_ia_handle: an IA instance is a
 * control connection to datd plus the objects created on it.  dat_ia_query
 * is in ia_query.c.
 *
 * Error codes where the man pages leave room (all with DAT_CLASS_ERROR):
 * - a name another provider registered (provider_registry.h), or one
 *   dat.conf gives to another provider library, which is loaded for it:
 *   opened through that provider (foreign.h), with its answer;
 * - name neither registered nor in dat.conf, or its library cannot be
 *   loaded, has no dat_provider_init, or registers no such name:
 *   DAT_PROVIDER_NOT_FOUND | DAT_NAME_NOT_REGISTERED;
 * - no entry with the major / a minor >= / the thread safety asked:
 *   DAT_PROVIDER_NOT_FOUND | DAT_MAJOR_NOT_FOUND / DAT_MINOR_NOT_FOUND /
 *   DAT_THREAD_SAFETY_NOT_FOUND, the subtypes dat_error.h has for this;
 * - the name is ours but datd cannot be reached (not running, socket
 *   refused, no common protocol version): DAT_PROVIDER_NOT_FOUND with no
 *   subtype.  The provider of a registered name is absent: the consumer can
 *   fall back to another IA or retry later, and tell this case from an
 *   unknown name (DAT_NAME_NOT_REGISTERED) by the subtype;
 * - datd does not know the IA: datd's own answer, DAT_PROVIDER_NOT_FOUND;
 * - datd answers nonsense or stops answering mid-call: DAT_INTERNAL_ERROR;
 * - dat_ia_close on the IA's own progress thread (a CNO's proxy agent):
 *   DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE.
 * The debug trace (DAT_DBG_TYPE / DATD_DEBUG) gives the full reason. */
#include "config.h"

#include "libdat/ia.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdat/foreign.h"
#include "libdat/progress.h"
#include "libdat/registry.h"
#include "libdat/shm_keep.h"

static void ia_destroy(struct dat_object *obj);

static const struct dat_object_ops ia_ops = {
        .type = DAT_HANDLE_TYPE_IA,
        .name = "IA",
        .invalid_subtype = DAT_INVALID_HANDLE_IA,
        .destroy = ia_destroy,
};

DAT_DEFINE_LOOKUP(ia, DAT_HANDLE_TYPE_IA)

/* Gives back the consumer's async EVD, if it still exists (an abrupt close
 * of the IA that owns it may have destroyed it already). */
static void ia_release_borrowed_evd(struct ia *ia)
{
        struct evd *evd;

        if (!ia->borrowed_async_evd)
                return;
        dat_object_lock();
        evd = evd_lookup(ia->borrowed_async_evd);
        if (evd && evd->obj.users > 0)
                evd->obj.users--;
        dat_object_unlock();
        ia->borrowed_async_evd = DAT_HANDLE_NULL;
}

/* Frees an IA whose children are gone; accepts a half-built one. */
static void ia_free(struct ia *ia)
{
        if (!ia)
                return;
        progress_stop(ia);
        ia_release_borrowed_evd(ia);
        dto_ia_fini(&ia->dto);
        shm_keep_close(ia->shm_keep);
        datd_conn_close(&ia->conn);
        dat_object_fini(&ia->obj);
        free(ia);
}

static void ia_destroy(struct dat_object *obj)
{
        struct ia *ia = dat_container_of(obj, struct ia, obj);

        /* No event may reach a child being destroyed. */
        progress_stop(ia);
        dat_object_destroy_children(&ia->obj);
        ia_free(ia);
}

/* The IA's async EVD as the consumer named it.  A consumer-passed EVD must
 * be an async EVD of an IA opened under the same name (dat_ia_open(3DAT):
 * "created for the same Provider"); otherwise DAT_INVALID_HANDLE. */
static DAT_RETURN check_consumer_async_evd(DAT_EVD_HANDLE handle, const char *name)
{
        struct evd *evd;
        bool ok;

        if (handle == DAT_HANDLE_NULL || handle == DAT_EVD_ASYNC_EXISTS)
                return DAT_SUCCESS;
        dat_object_lock();
        evd = evd_lookup(handle);
        ok = evd && (evd->flags & DAT_EVD_ASYNC_FLAG) && evd->obj.parent &&
             strcmp(dat_container_of(evd->obj.parent, struct ia, obj)->name, name) == 0;
        dat_object_unlock();
        return ok ? DAT_SUCCESS : DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
}

/* Takes a use of the consumer's async EVD for this IA, checking again under
 * the lock that it still exists. */
static DAT_RETURN ia_borrow_async_evd(struct ia *ia, DAT_EVD_HANDLE handle)
{
        struct evd *evd;

        dat_object_lock();
        evd = evd_lookup(handle);
        if (evd)
                evd->obj.users++;
        dat_object_unlock();
        if (!evd)
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
        ia->borrowed_async_evd = handle;
        return DAT_SUCCESS;
}

/* Finds the dat.conf entry for the name and writes datd's IA name. */
/* check_consumer_async_evd, with the reason in the trace. */
static DAT_RETURN check_our_async_evd(DAT_EVD_HANDLE evd_in, const char *name)
{
        DAT_RETURN ret = check_consumer_async_evd(evd_in, name);

        if (ret != DAT_SUCCESS)
                dat_trace("dat_ia_open(\"%s\"): the async EVD passed in is not an async EVD of "
                          "an open \"%s\" IA", name, name);
        return ret;
}

/* The dat.conf entry for the name (a copy: the file's table is freed). */
static DAT_RETURN lookup_registry(const char *name, DAT_UINT32 major, DAT_UINT32 minor,
                                  bool thread_safe, struct dat_conf_entry *found)
{
        const struct dat_conf_entry *entry;
        struct dat_conf conf;
        char why[DATD_REASON_MAX + 256];
        DAT_RETURN ret;

        if (dat_conf_load(&conf) < 0)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        ret = dat_conf_find(&conf, name, major, minor, thread_safe, &entry, why, sizeof(why));
        if (ret == DAT_SUCCESS)
                *found = *entry;
        else
                dat_trace("dat_ia_open(\"%s\"): %s", name, why);
        dat_conf_free(&conf);
        return ret;
}

/* IA_OPEN round trip; fills ia->ia_id, ia->info and ia->caps. */
static DAT_RETURN open_in_datd(struct ia *ia, const char *datd_name)
{
        struct datp_ia_open req = { .hdr = { .type = DATP_IA_OPEN, .length = sizeof(req) } };
        union datp_message reply;
        char why[DATD_REASON_MAX];
        DAT_RETURN ret;

        ret = datd_conn_open(&ia->conn, why);
        if (ret != DAT_SUCCESS)
                goto fail;
        if (datp_set_string(req.ia_name, sizeof(req.ia_name), datd_name) < 0) {
                snprintf(why, sizeof(why), "datd IA name \"%.100s...\" too long", datd_name);
                ret = DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
                goto fail;
        }
        ret = datd_conn_call(&ia->conn, &req.hdr, &reply, why);
        if (ret != DAT_SUCCESS)
                goto fail;
        if (reply.ia_open_reply.status.dat_status != DAT_SUCCESS) {
                ret = dat_err_normalize(reply.ia_open_reply.status.dat_status);
                snprintf(why, sizeof(why), "datd at %s refused IA \"%.100s\" (0x%08x%s%s)",
                         ia->conn.socket_path, datd_name, ret,
                         reply.ia_open_reply.status.sys_errno ? ", " : "",
                         reply.ia_open_reply.status.sys_errno
                                 ? strerror(reply.ia_open_reply.status.sys_errno) : "");
                goto fail;
        }
        ia->ia_id = reply.ia_open_reply.ia_id;
        ia->info = reply.ia_open_reply.info;
        ia->caps = transport_caps_find(ia->info.transport);
        if (!ia->caps) {
                snprintf(why, sizeof(why), "datd's IA \"%.100s\" uses transport \"%s\", which this "
                         "libdat does not have", datd_name, ia->info.transport);
                ret = DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE);
                goto fail;
        }
        return DAT_SUCCESS;
fail:
        dat_trace("dat_ia_open(\"%s\"): %s", ia->name, why);
        return ret;
}

/* Builds an IA for name, connected and opened in datd. */
static DAT_RETURN ia_new(const char *name, const char *datd_name, struct ia **out)
{
        struct ia *ia = calloc(1, sizeof(*ia));
        DAT_RETURN ret;

        if (!ia)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        ia->conn.fd = -1;
        snprintf(ia->name, sizeof(ia->name), "%s", name);
        ret = open_in_datd(ia, datd_name);
        if (ret == DAT_SUCCESS)
                ret = dat_object_init(&ia->obj, &ia_ops, NULL);
        if (ret == DAT_SUCCESS && (dto_ia_init(&ia->dto) < 0 ||
                                   shm_keep_new(&ia->conn, ia->ia_id, &ia->shm_keep) < 0))
                ret = DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        if (ret == DAT_SUCCESS)
                ret = progress_start(ia);
        if (ret != DAT_SUCCESS) {
                ia_free(ia);
                return ret;
        }
        ia_query_prepare(ia);
        *out = ia;
        return DAT_SUCCESS;
}

/* dat_ia_open(3DAT); dat_ia_open() is a macro for dat_ia_openv() with the
 * header's DAT_VERSION_MAJOR, DAT_VERSION_MINOR and DAT_THREADSAFE. */
_public_ DAT_RETURN dat_ia_openv(const DAT_NAME_PTR name, DAT_COUNT async_evd_qlen,
                                 DAT_EVD_HANDLE *async_evd_handle, DAT_IA_HANDLE *ia_handle,
                                 DAT_UINT32 dat_major, DAT_UINT32 dat_minor,
                                 DAT_BOOLEAN thread_safety)
{
        char datd_name[DATP_NAME_MAX];
        struct dat_conf_entry entry;
        DAT_EVD_HANDLE evd_in;
        bool ours_first, registered;
        struct ia *ia;
        DAT_RETURN ret;

        if (!name)
                return DAT_ERR_ARG(1);
        if (!async_evd_handle)
                return DAT_ERR_ARG(3);
        if (!ia_handle)
                return DAT_ERR_ARG(4);
        evd_in = *async_evd_handle;
        /* The queue length matters only when the provider creates the EVD. */
        if (evd_in == DAT_HANDLE_NULL && async_evd_qlen < 0)
                return DAT_ERR_ARG(2);
        /* A name another provider registered goes to it (foreign.h). */
        if (provider_registry_used()) {
                ret = foreign_ia_open(name, NULL, async_evd_qlen, async_evd_handle, ia_handle,
                                      dat_major, dat_minor, thread_safety != DAT_FALSE,
                                      &registered);
                if (registered || ret != DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED))
                        return ret;
        }
        /* An async EVD of libdat's (or none) is checked first, as before
         * there were other providers; another provider's decides nothing
         * until dat.conf says whose the name is. */
        ours_first = !foreign_address_plausible(evd_in);
        if (ours_first) {
                ret = check_our_async_evd(evd_in, name);
                if (ret != DAT_SUCCESS)
                        return ret;
        }
        ret = lookup_registry(name, dat_major, dat_minor, thread_safety != DAT_FALSE, &entry);
        if (ret != DAT_SUCCESS)
                return ret;
        if (!dat_conf_entry_is_ours(&entry))
                return foreign_ia_open(name, &entry, async_evd_qlen, async_evd_handle, ia_handle,
                                       dat_major, dat_minor, thread_safety != DAT_FALSE,
                                       &registered);
        if (!ours_first) {
                ret = check_our_async_evd(evd_in, name);
                if (ret != DAT_SUCCESS)
                        return ret;
        }
        dat_conf_entry_datd_name(&entry, datd_name, sizeof(datd_name));
        ret = ia_new(name, datd_name, &ia);
        if (ret != DAT_SUCCESS)
                return ret;

        if (evd_in == DAT_HANDLE_NULL) {
                if ((DAT_UINT32)async_evd_qlen > ia->caps->max_evd_qlen) {
                        dat_trace("dat_ia_open(\"%s\"): async EVD queue length %d above the "
                                  "transport's %u", name, async_evd_qlen, ia->caps->max_evd_qlen);
                        ret = DAT_ERR_ARG(2);
                } else {
                        ret = evd_create_async(&ia->obj, async_evd_qlen, &ia->own_async_evd);
                }
        } else if (evd_in == DAT_EVD_ASYNC_EXISTS) {
                ia->async_evd_exists_elsewhere = true;
        } else {
                ret = ia_borrow_async_evd(ia, evd_in);
        }
        if (ret != DAT_SUCCESS) {
                ia_destroy(&ia->obj);
                return ret;
        }
        if (ia->own_async_evd)
                *async_evd_handle = ia->own_async_evd->obj.handle;
        *ia_handle = ia->obj.handle;
        dat_trace("dat_ia_open(\"%s\"): opened datd's IA \"%s\" (%s) through %s", name,
                  ia->info.name, ia->info.transport, ia->conn.socket_path);
        return DAT_SUCCESS;
}

/* dat_ia_close(3DAT): graceful close with live consumer-created children ->
 * DAT_INVALID_STATE (the IA's own async EVD does not count, unless another
 * IA still uses it as its async EVD); abrupt close destroys everything.  A
 * consumer-passed async EVD is never destroyed here.  Once the checks pass
 * the close always completes: if datd does not acknowledge IA_CLOSE, closing
 * the socket still makes datd drop the instance. */
_public_ DAT_RETURN dat_ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS close_flags)
{
        struct datp_ia_close req = { .hdr = { .type = DATP_IA_CLOSE, .length = sizeof(req) } };
        union datp_message reply;
        char why[DATD_REASON_MAX];
        struct ia *ia = ia_lookup(ia_handle);
        unsigned consumer_children;
        const DAT_PROVIDER *p;
        DAT_IA_HANDLE provider_ia;

        if (!ia && foreign_ia(ia_handle, &p, &provider_ia))
                return foreign_ia_close(ia_handle, close_flags);
        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (close_flags != DAT_CLOSE_ABRUPT_FLAG && close_flags != DAT_CLOSE_GRACEFUL_FLAG)
                return DAT_ERR_ARG(2);
        /* A CNO's agent (cno.h) on the IA's progress thread, or on a thread
         * holding the IA's socket to dispatch (an agent run at once past
         * CNO_HELD_MAX): the close stops and joins that thread, which
         * would join itself (and free the state it runs on) or wait for
         * the socket it holds.  The IA is in use by the caller itself:
         * dat_ia_close(3DAT)'s DAT_INVALID_STATE, as for a graceful close
         * with children; another thread may close it. */
        if (datd_conn_reads_here(&ia->conn))
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);

        dat_object_lock();
        if (ia->obj.closing) {
                /* Another thread is closing it right now. */
                dat_object_unlock();
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        }
        consumer_children = ia->obj.n_children - (ia->own_async_evd ? 1 : 0);
        if (close_flags == DAT_CLOSE_GRACEFUL_FLAG) {
                if (consumer_children > 0) {
                        dat_object_unlock();
                        return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
                }
                if (ia->own_async_evd && ia->own_async_evd->obj.users > 0) {
                        dat_object_unlock();
                        return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
                }
        }
        ia->obj.closing = true;
        dat_object_unlock();

        req.ia_id = ia->ia_id;
        req.flags = close_flags == DAT_CLOSE_GRACEFUL_FLAG ? DATP_CLOSE_GRACEFUL : DATP_CLOSE_ABRUPT;
        if (datd_conn_call(&ia->conn, &req.hdr, &reply, why) != DAT_SUCCESS)
                dat_trace("dat_ia_close(\"%s\"): %s; closing anyway", ia->name, why);
        else if (reply.ia_close_reply.status.dat_status != DAT_SUCCESS)
                dat_trace("dat_ia_close(\"%s\"): datd answered 0x%08x; closing anyway", ia->name,
                          reply.ia_close_reply.status.dat_status);
        ia_destroy(&ia->obj);
        return DAT_SUCCESS;
}

/* dats_get_ia_handle: exported by Debian's libdat2 (no public header
 * declares it; its providers call it), where the registry hands consumers
 * IA handles of its own and this call maps one to the provider's handle.
 * For an IA of another provider (foreign.h) it gives that provider's
 * handle; libdat's own IA handles are their provider's, so for them the
 * mapping is the identity: DAT_SUCCESS with *ia_handle_p = handle,
 * DAT_INVALID_HANDLE_IA for anything else. */
_public_ DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *ia_handle_p)
{
        DAT_IA_HANDLE provider_ia;

        if (foreign_ia_map(handle, &provider_ia)) {
                if (!ia_handle_p)
                        return DAT_ERR_ARG(2);
                *ia_handle_p = provider_ia;
                return DAT_SUCCESS;
        }
        if (!ia_lookup(handle))
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (!ia_handle_p)
                return DAT_ERR_ARG(2);
        *ia_handle_p = handle;
        return DAT_SUCCESS;
}
