/* Event Dispatchers (see evd.h): the object and the control entry points.
 *
 * Error codes where the man pages leave room (all with DAT_CLASS_ERROR):
 * - dat_evd_create: evd_min_qlen <= 0 or above the transport's max_evd_qlen
 *   (what dat_ia_query reports) -> DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
 *   no stream flag, or a bit that is no DAT_EVD_FLAGS ->
 *   DAT_INVALID_PARAMETER | DAT_INVALID_ARG4; extension flags other than
 *   the IB extensions' DAT_IB_EVD_EXTENSION_FLAG (DAT_EVD_EXTENSION_BASE
 *   and up) -> DAT_MODEL_NOT_SUPPORTED; a CNO of another IA (dat_cno_wait(3DAT): a CNO
 *   gathers EVDs of one IA) -> DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CNO.
 *   Every combination of the six streams is accepted: the provider
 *   attribute evd_stream_merging_supported is true for every pair.
 * - dat_evd_free(3DAT)'s DAT_INVALID_STATE: DAT_INVALID_STATE_EVD_IN_USE
 *   while objects use it (EPs, another IA using it as its async EVD),
 *   DAT_INVALID_STATE_EVD_WAITER while a thread waits on it,
 *   DAT_INVALID_STATE_EVD_ASYNC for the async EVD dat_ia_open created (the
 *   IA's own event stream feeds it; dat_ia_close frees it).
 * - dat_evd_resize: evd_min_qlen out of range as for create; fewer slots
 *   than queued events -> DAT_INVALID_STATE; below the threshold of the
 *   thread waiting on it -> DAT_INVALID_STATE_EVD_WAITER. */
#include "config.h"

#include "libdat/evd.h"

#include <stdlib.h>

#include <dat2/dat_ib_extensions.h>

#include "libdat/cno.h"
#include "libdat/datd_object.h"
#include "libdat/evd_wait.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"

/* The async EVD dat_ia_open makes for a queue length of 0 still gets this. */
#define EVD_MIN_ASYNC_QLEN 8

/* Every stream flag dat_evd_create(3DAT) knows, and where the extension
 * flags start (DAT_EVD_EXTENSION_BASE, declared only with DAT_EXTENSIONS). */
#define EVD_STREAM_FLAGS (DAT_EVD_SOFTWARE_FLAG | DAT_EVD_DEFAULT_FLAG)
#define EVD_EXTENSION_BASE 0x200u

static const struct dat_object_ops evd_ops = {
        .type = DAT_HANDLE_TYPE_EVD,
        .name = "EVD",
        .invalid_subtype = DAT_INVALID_HANDLE1,
        .destroy = evd_destroy,
};

DAT_DEFINE_LOOKUP(evd, DAT_HANDLE_TYPE_EVD)

static struct ia *evd_ia(const struct evd *evd)
{
        return dat_container_of(evd->obj.parent, struct ia, obj);
}

DAT_RETURN evd_create_async(struct dat_object *ia, DAT_COUNT min_qlen, struct evd **out)
{
        struct evd *evd = evd_alloc(min_qlen > EVD_MIN_ASYNC_QLEN ? min_qlen : EVD_MIN_ASYNC_QLEN,
                                    DAT_EVD_ASYNC_FLAG);
        DAT_RETURN ret;

        if (!evd)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        ret = dat_object_init(&evd->obj, &evd_ops, ia);
        if (ret != DAT_SUCCESS) {
                evd_release(evd);
                return ret;
        }
        *out = evd;
        return DAT_SUCCESS;
}

void evd_set_cno_locked(struct evd *evd, struct cno *cno)
{
        struct cno *old = evd->cno;

        if (old == cno)
                return;
        spin_lock(&evd->lock);
        evd->cno = cno;
        spin_unlock(&evd->lock);
        if (cno)
                cno->obj.users++;
        if (old && --old->obj.users == 0)
                cno_release_waiters(old);
}

unsigned evd_kick_waiter_locked(struct evd *evd)
{
        __atomic_store_n(&evd->wake_seq, evd->wake_seq + 1, __ATOMIC_RELEASE);
        if (!evd->waiter_sleeps)
                return 0;
        return EVD_WAKE_SLEEPER | (evd->waiter_reads ? EVD_WAKE_READER : 0);
}

/* The EVD a thread waits on while it reads datd's socket itself: it sees
 * what it posts there without a kick. */
static __thread struct evd *reading_for;

void evd_wake(struct evd *evd, unsigned how)
{
        if (how & EVD_WAKE_READER) {
                if (evd != reading_for)
                        datd_conn_kick_reader(&dat_container_of(evd->obj.parent, struct ia, obj)->conn);
        } else if (how & EVD_WAKE_SLEEPER) {
                dat_word_wake_all(&evd->wake_seq);
        }
}

struct evd *evd_reading_for(struct evd *evd)
{
        struct evd *before = reading_for;

        reading_for = evd;
        return before;
}

/* Marks the EVD dying, sends its waiter away with DAT_ABORT and waits
 * until it has left, so that the memory can go. */
static void evd_send_waiter_away(struct evd *evd)
{
        unsigned wake;
        bool waiting;

        spin_lock(&evd->lock);
        evd->dying = true;
        wake = evd_kick_waiter_locked(evd);
        spin_unlock(&evd->lock);
        evd_wake(evd, wake);
        for (;;) {
                spin_lock(&evd->lock);
                waiting = evd->waiter;
                spin_unlock(&evd->lock);
                if (!waiting)
                        return;
                dat_nap();
        }
}

/* Unlinks an EVD that nothing uses any more and frees it. */
static void evd_teardown(struct evd *evd)
{
        dat_object_lock();
        evd_set_cno_locked(evd, NULL);
        dat_object_unlock();
        evd_send_waiter_away(evd);
        dat_object_fini(&evd->obj);
        evd_release(evd);
}

void evd_destroy(struct dat_object *obj)
{
        evd_teardown(dat_container_of(obj, struct evd, obj));
}

void evd_feed_config_get(struct evd *evd, DAT_EVD_STATE config)
{
        spin_lock(&evd->lock);
        if (config == DAT_EVD_STATE_CONFIG_SOLICITED)
                evd->solicited_feeds++;
        else if (config == DAT_EVD_STATE_CONFIG_NOTIFY)
                evd->unsignalled_feeds++;
        spin_unlock(&evd->lock);
}

void evd_feed_config_put(struct evd *evd, DAT_EVD_STATE config)
{
        spin_lock(&evd->lock);
        if (config == DAT_EVD_STATE_CONFIG_SOLICITED && evd->solicited_feeds > 0)
                evd->solicited_feeds--;
        else if (config == DAT_EVD_STATE_CONFIG_NOTIFY && evd->unsignalled_feeds > 0)
                evd->unsignalled_feeds--;
        spin_unlock(&evd->lock);
}

/* The CNO a consumer named for an EVD of ia: NULL for DAT_HANDLE_NULL.
 * Under dat_object_lock(), so that it cannot go before it is attached. */
static DAT_RETURN cno_of_ia_locked(struct ia *ia, DAT_CNO_HANDLE handle, struct cno **out)
{
        struct cno *cno;

        *out = NULL;
        if (handle == DAT_HANDLE_NULL)
                return DAT_SUCCESS;
        cno = cno_lookup(handle);
        if (!cno || cno->obj.closing || cno->obj.parent != &ia->obj)
                return dat_invalid_handle(DAT_HANDLE_TYPE_CNO);
        *out = cno;
        return DAT_SUCCESS;
}

static DAT_RETURN check_create_flags(DAT_EVD_FLAGS flags)
{
        /* dat_ib_extensions.h: DAT_IB_EVD_EXTENSION_FLAG marks an EVD for
         * extended events, with or without stream flags; the IB DTO events
         * reach any EVD of the DTO stream. */
        unsigned streams = (unsigned)flags & ~(unsigned)DAT_IB_EVD_EXTENSION_FLAG;

        if (streams >= EVD_EXTENSION_BASE)
                return DAT_ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE);
        if (flags == 0 || (streams & ~(unsigned)EVD_STREAM_FLAGS))
                return DAT_ERR_ARG(4);
        return DAT_SUCCESS;
}

static DAT_RETURN check_qlen(const struct ia *ia, DAT_COUNT qlen)
{
        if (qlen <= 0 || (uint32_t)qlen > ia->caps->max_evd_qlen)
                return DAT_ERR_ARG(2);
        return DAT_SUCCESS;
}

/* Tells datd about a new EVD (its quota) and attaches it to its CNO. */
static DAT_RETURN evd_publish(struct ia *ia, struct evd *evd, DAT_CNO_HANDLE cno_handle)
{
        struct datp_obj_desc desc = {
                .kind = DATP_OBJ_EVD,
                .handle = (uint64_t)(uintptr_t)evd->obj.handle,
                .qlen = (uint32_t)evd->qlen,
        };
        struct cno *cno;
        DAT_RETURN ret;

        ret = datd_object_register(ia, &desc, &evd->datd_id);
        if (ret != DAT_SUCCESS)
                return ret;
        dat_object_lock();
        ret = cno_of_ia_locked(ia, cno_handle, &cno);
        if (ret == DAT_SUCCESS)
                evd_set_cno_locked(evd, cno);
        dat_object_unlock();
        if (ret != DAT_SUCCESS)
                datd_object_unregister(ia, evd->datd_id);
        return ret;
}

/* dat_evd_create(3DAT) */
_public_ DAT_RETURN dat_evd_create(DAT_IA_HANDLE ia_handle, DAT_COUNT evd_min_qlen,
                                   DAT_CNO_HANDLE cno_handle, DAT_EVD_FLAGS evd_flags,
                                   DAT_EVD_HANDLE *evd_handle)
{
        FOREIGN_DISPATCH_IA_GUARDED(ia_handle,
                                    (1, cno_handle, DAT_INVALID_HANDLE_CNO),
                                    evd_create_func, evd_min_qlen, cno_handle, evd_flags,
                                    evd_handle);
        struct ia *ia = ia_lookup(ia_handle);
        struct evd *evd;
        struct cno *cno;
        DAT_RETURN ret;

        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        ret = check_qlen(ia, evd_min_qlen);
        if (ret == DAT_SUCCESS)
                ret = check_create_flags(evd_flags);
        if (ret == DAT_SUCCESS && !evd_handle)
                ret = DAT_ERR_ARG(5);
        if (ret == DAT_SUCCESS) {
                /* Checked again when attaching; this makes a bad handle
                 * fail before any round trip to datd. */
                dat_object_lock();
                ret = cno_of_ia_locked(ia, cno_handle, &cno);
                dat_object_unlock();
        }
        if (ret != DAT_SUCCESS)
                return ret;

        evd = evd_alloc(evd_min_qlen, evd_flags);
        if (!evd)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        ret = dat_object_init(&evd->obj, &evd_ops, &ia->obj);
        if (ret == DAT_SUCCESS)
                ret = evd_publish(ia, evd, cno_handle);
        if (ret != DAT_SUCCESS) {
                dat_object_fini(&evd->obj);
                evd_release(evd);
                return ret;
        }
        *evd_handle = evd->obj.handle;
        return DAT_SUCCESS;
}

/* Why dat_evd_free must refuse, or DAT_SUCCESS; marks the EVD closing
 * when it may go.  Under dat_object_lock(). */
static DAT_RETURN evd_claim_for_free_locked(struct evd *evd)
{
        bool waited;

        if (evd->obj.closing)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EVD);
        /* dat_evd_free(3DAT): an exception are the EVDs of an IA, which go
         * with the IA. */
        if (evd_ia(evd)->own_async_evd == evd)
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_ASYNC);
        /* dat_evd_free(3DAT): event streams still feed it -> DAT_INVALID_STATE */
        if (evd->obj.users > 0)
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
        spin_lock(&evd->lock);
        waited = evd->waiter;
        spin_unlock(&evd->lock);
        /* dat_evd_free(3DAT): no threads may be blocked on it */
        if (waited)
                return DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
        evd->obj.closing = true;
        return DAT_SUCCESS;
}

/* dat_evd_free(3DAT): the queued events are lost. */
_public_ DAT_RETURN dat_evd_free(DAT_EVD_HANDLE evd_handle)
{
        FOREIGN_DISPATCH(evd_handle, evd_free_func, evd_handle);
        struct evd *evd = evd_lookup(evd_handle);
        DAT_RETURN ret;

        if (!evd)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EVD);
        dat_object_lock();
        ret = evd_claim_for_free_locked(evd);
        dat_object_unlock();
        if (ret != DAT_SUCCESS)
                return ret;
        if (evd->datd_id)
                datd_object_unregister(evd_ia(evd), evd->datd_id);
        evd_teardown(evd);
        return DAT_SUCCESS;
}

/* The DAT_EVD_STATE of an EVD.  The configuration is a two-bit field as in
 * the reference ABI: CONFIG_THRESHOLD (both bits) unless endpoints feeding
 * it let the consumer control notification.  Under evd->lock. */
static DAT_EVD_STATE evd_state_locked(const struct evd *evd)
{
        DAT_EVD_STATE config = DAT_EVD_STATE_CONFIG_THRESHOLD;

        if (evd->solicited_feeds)
                config = DAT_EVD_STATE_CONFIG_SOLICITED;
        else if (evd->unsignalled_feeds)
                config = DAT_EVD_STATE_CONFIG_NOTIFY;
        return (evd->enabled ? DAT_EVD_STATE_ENABLED : DAT_EVD_STATE_DISABLED) |
               (evd->unwaitable ? DAT_EVD_STATE_UNWAITABLE : DAT_EVD_STATE_WAITABLE) | config;
}

/* dat_evd_query(3DAT): every field is filled whatever the mask asks. */
_public_ DAT_RETURN dat_evd_query(DAT_EVD_HANDLE evd_handle, DAT_EVD_PARAM_MASK evd_param_mask,
                                  DAT_EVD_PARAM *evd_param)
{
        FOREIGN_DISPATCH(evd_handle, evd_query_func, evd_handle, evd_param_mask, evd_param);
        struct evd *evd = evd_lookup(evd_handle);

        if (!evd)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EVD);
        if ((unsigned)evd_param_mask & ~(unsigned)DAT_EVD_FIELD_ALL)
                return DAT_ERR_ARG(2);
        if (!evd_param)
                return DAT_ERR_ARG(3);
        spin_lock(&evd->lock);
        evd_param->ia_handle = evd->obj.parent->handle;
        evd_param->evd_qlen = evd->qlen;
        evd_param->evd_state = evd_state_locked(evd);
        evd_param->cno_handle = evd->cno ? evd->cno->obj.handle : DAT_HANDLE_NULL;
        evd_param->evd_flags = evd->flags;
        spin_unlock(&evd->lock);
        return DAT_SUCCESS;
}

/* dat_evd_resize(3DAT): never loses a queued event; keeps their order. */
_public_ DAT_RETURN dat_evd_resize(DAT_EVD_HANDLE evd_handle, DAT_COUNT evd_min_qlen)
{
        FOREIGN_DISPATCH(evd_handle, evd_resize_func, evd_handle, evd_min_qlen);
        struct evd *evd = evd_lookup(evd_handle);
        struct datp_obj_desc desc = { .kind = DATP_OBJ_EVD };
        struct ia *ia;
        DAT_RETURN ret;

        if (!evd)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EVD);
        ia = evd_ia(evd);
        ret = check_qlen(ia, evd_min_qlen);
        if (ret == DAT_SUCCESS)
                ret = evd_ring_resize(evd, evd_min_qlen);
        if (ret != DAT_SUCCESS || !evd->datd_id)
                return ret;
        /* datd only shows the length (no quota depends on it): the resize
         * stands even if datd cannot be told. */
        desc.handle = (uint64_t)(uintptr_t)evd->obj.handle;
        desc.qlen = (uint32_t)evd_min_qlen;
        if (datd_object_update(ia, evd->datd_id, &desc) != DAT_SUCCESS)
                dat_trace("dat_evd_resize: datd still shows the old queue length");
        return DAT_SUCCESS;
}

/* dat_evd_modify_cno(3DAT): DAT_HANDLE_NULL detaches. */
_public_ DAT_RETURN dat_evd_modify_cno(DAT_EVD_HANDLE evd_handle, DAT_CNO_HANDLE cno_handle)
{
        FOREIGN_DISPATCH_GUARDED(evd_handle,
                                 (1, cno_handle, DAT_INVALID_HANDLE_CNO),
                                 evd_modify_cno_func, evd_handle, cno_handle);
        struct evd *evd = evd_lookup(evd_handle);
        struct cno *cno;
        DAT_RETURN ret;

        if (!evd)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EVD);
        dat_object_lock();
        ret = cno_of_ia_locked(evd_ia(evd), cno_handle, &cno);
        if (ret == DAT_SUCCESS)
                evd_set_cno_locked(evd, cno);
        dat_object_unlock();
        return ret;
}

/* The two switches of an EVD's state the consumer flips. */
enum evd_switch {
        EVD_SWITCH_ENABLED,
        EVD_SWITCH_UNWAITABLE,
};

/* Flips a switch under the EVD's lock; making the EVD unwaitable wakes its
 * waiter, which must leave. */
static DAT_RETURN evd_set_switch(DAT_EVD_HANDLE evd_handle, enum evd_switch which, bool on)
{
        struct evd *evd = evd_lookup(evd_handle);
        unsigned wake = 0;

        if (!evd)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EVD);
        spin_lock(&evd->lock);
        if (which == EVD_SWITCH_ENABLED) {
                evd->enabled = on;
        } else {
                evd->unwaitable = on;
                if (on && evd->waiter)
                        wake = evd_kick_waiter_locked(evd);
        }
        spin_unlock(&evd->lock);
        evd_wake(evd, wake);
        return DAT_SUCCESS;
}

/* dat_evd_enable(3DAT): arrivals may trigger the CNO again; no-op if enabled. */
_public_ DAT_RETURN dat_evd_enable(DAT_EVD_HANDLE evd_handle)
{
        FOREIGN_DISPATCH(evd_handle, evd_enable_func, evd_handle);
        return evd_set_switch(evd_handle, EVD_SWITCH_ENABLED, true);
}

/* dat_evd_disable(3DAT): arrivals no longer trigger the CNO; direct waiters
 * are not affected. */
_public_ DAT_RETURN dat_evd_disable(DAT_EVD_HANDLE evd_handle)
{
        FOREIGN_DISPATCH(evd_handle, evd_disable_func, evd_handle);
        return evd_set_switch(evd_handle, EVD_SWITCH_ENABLED, false);
}

/* dat_evd_set_unwaitable(3DAT): waits fail with DAT_INVALID_STATE, and a
 * thread already waiting is woken to return it. */
_public_ DAT_RETURN dat_evd_set_unwaitable(DAT_EVD_HANDLE evd_handle)
{
        FOREIGN_DISPATCH(evd_handle, evd_set_unwaitable_func, evd_handle);
        return evd_set_switch(evd_handle, EVD_SWITCH_UNWAITABLE, true);
}

/* dat_evd_clear_unwaitable(3DAT) */
_public_ DAT_RETURN dat_evd_clear_unwaitable(DAT_EVD_HANDLE evd_handle)
{
        FOREIGN_DISPATCH(evd_handle, evd_clear_unwaitable_func, evd_handle);
        return evd_set_switch(evd_handle, EVD_SWITCH_UNWAITABLE, false);
}
