/* Consumer Notification Objects (see cno.h) and their entry points.
 * (dat_cno_fd_create and dat_cno_trigger are declared by udat.h but are not
 * among the DAT_2.0 symbols Debian's libdat2 exports; there are none here.)
 *
 * Error codes where the man pages leave room (all with DAT_CLASS_ERROR):
 * - an agent with instance data but no function is invalid:
 *   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2 (dat_cno_create,
 *   dat_cno_modify_agent); both NULL is DAT_OS_WAIT_PROXY_AGENT_NULL.
 * - dat_cno_query: DAT_CNO_PARAM_MASK values are not bit masks (IA_HANDLE
 *   1, PROXY_TYPE 2, PROXY 3, ALL 4); any value up to 7 is accepted and
 *   every field filled, anything else is DAT_INVALID_PARAMETER |
 *   DAT_INVALID_ARG2.
 * - dat_cno_wait: on timeout the man page's DAT_QUEUE_EMPTY ("timed out
 *   without a notification") with *evd_handle set to DAT_HANDLE_NULL;
 *   woken because the IA is closing or the last attached EVD left:
 *   DAT_SUCCESS with a NULL EVD handle, as dat_cno_wait(3DAT) says.
 * - dat_cno_free(3DAT): DAT_INVALID_STATE | DAT_INVALID_STATE_CNO_IN_USE
 *   while an EVD feeds it or a thread waits on it. */
#include "config.h"

#include "libdat/cno.h"

#include <stdlib.h>

#include "libdat/datd_object.h"
#include "libdat/dto.h"
#include "libdat/evd.h"
#include "libdat/evd_wait.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"

/* The largest DAT_CNO_PARAM_MASK: every value the enum can or together. */
#define CNO_PARAM_MASK_MAX 0x7u

static const struct dat_object_ops cno_ops = {
        .type = DAT_HANDLE_TYPE_CNO,
        .name = "CNO",
        .invalid_subtype = DAT_INVALID_HANDLE_CNO,
        .destroy = cno_destroy,
};

DAT_DEFINE_LOOKUP(cno, DAT_HANDLE_TYPE_CNO)

static bool agent_is_null(const DAT_OS_WAIT_PROXY_AGENT *agent)
{
        return !agent->proxy_agent_func;
}

static bool agent_is_valid(const DAT_OS_WAIT_PROXY_AGENT *agent)
{
        return agent->proxy_agent_func || !agent->instance_data;
}

void cno_trigger(struct cno *cno, DAT_EVD_HANDLE evd, struct cno_notice *notice)
{
        bool wake;

        pthread_mutex_lock(&cno->lock);
        cno->pending = evd;
        wake = cno->waiters > 0;
        if (wake)
                __atomic_store_n(&cno->wake_seq, cno->wake_seq + 1, __ATOMIC_RELEASE);
        if (!agent_is_null(&cno->agent)) {
                /* dat_cno_create(3DAT): once invoked, the agent is no longer
                 * associated with the CNO. */
                notice->agent = cno->agent;
                notice->evd = evd;
                cno->agent = DAT_OS_WAIT_PROXY_AGENT_NULL;
        }
        pthread_mutex_unlock(&cno->lock);
        /* The caller holds the EVD's lock, so the CNO cannot be freed yet. */
        if (wake)
                dat_word_wake_all(&cno->wake_seq);
}

/* The thread's innermost cno_notices_hold, or NULL. */
static __thread struct cno_held *holding;

void cno_notice_run(const struct cno_notice *notice)
{
        struct cno_held *h;

        if (agent_is_null(&notice->agent))
                return;
        h = holding;
        if (h && h->n < CNO_HELD_MAX) {
                h->notice[h->n++] = *notice;
                return;
        }
        if (h)
                dat_trace("more than %d CNO agents due while reading datd: one runs now",
                          CNO_HELD_MAX);
        notice->agent.proxy_agent_func(notice->agent.instance_data, notice->evd);
}

void cno_notices_hold(struct cno_held *h)
{
        h->outer = holding;
        h->n = 0;
        holding = h;
}

void cno_notices_release(struct cno_held *h)
{
        holding = h->outer;
        for (unsigned i = 0; i < h->n; i++)
                cno_notice_run(&h->notice[i]);
        h->n = 0;
}

/* Sends every current waiter away with a NULL EVD handle. */
static void cno_release_waiters_as(struct cno *cno, bool dying)
{
        bool wake;

        pthread_mutex_lock(&cno->lock);
        if (dying)
                cno->dying = true;
        cno->release_gen++;
        wake = cno->waiters > 0;
        __atomic_store_n(&cno->wake_seq, cno->wake_seq + 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&cno->lock);
        if (wake)
                dat_word_wake_all(&cno->wake_seq);
}

void cno_release_waiters(struct cno *cno)
{
        cno_release_waiters_as(cno, false);
}

/* Detaches every EVD of the CNO's IA that still feeds it (dat_evd_modify_cno
 * can attach an older EVD, which an abrupt close destroys after the CNO). */
static void cno_detach_evds(struct cno *cno)
{
        dat_object_lock();
        dat_list_for_each(pos, &cno->obj.parent->children) {
                struct dat_object *o = dat_container_of(pos, struct dat_object, sibling);

                if (o->ops && o->ops->type == DAT_HANDLE_TYPE_EVD) {
                        struct evd *evd = dat_container_of(o, struct evd, obj);

                        if (evd->cno == cno)
                                evd_set_cno_locked(evd, NULL);
                }
        }
        dat_object_unlock();
}

static void cno_free(struct cno *cno)
{
        if (!cno)
                return;
        dat_object_fini(&cno->obj);
        pthread_mutex_destroy(&cno->lock);
        free(cno);
}

void cno_destroy(struct dat_object *obj)
{
        struct cno *cno = dat_container_of(obj, struct cno, obj);
        unsigned waiters;

        cno_detach_evds(cno);
        cno_release_waiters_as(cno, true);
        for (;;) {
                pthread_mutex_lock(&cno->lock);
                waiters = cno->waiters;
                pthread_mutex_unlock(&cno->lock);
                if (!waiters)
                        break;
                dat_nap();
        }
        cno_free(cno);
}

static DAT_RETURN cno_publish(struct ia *ia, struct cno *cno)
{
        struct datp_obj_desc desc = {
                .kind = DATP_OBJ_CNO,
                .handle = (uint64_t)(uintptr_t)cno->obj.handle,
        };

        return datd_object_register(ia, &desc, &cno->datd_id);
}

bool cno_agents_seen;

static void note_agent(const DAT_OS_WAIT_PROXY_AGENT *agent)
{
        if (!agent_is_null(agent))
                __atomic_store_n(&cno_agents_seen, true, __ATOMIC_RELAXED);
}

/* dat_cno_create(3DAT): no EVDs, no waiters, at most one agent. */
_public_ DAT_RETURN dat_cno_create(DAT_IA_HANDLE ia_handle, DAT_OS_WAIT_PROXY_AGENT agent,
                                   DAT_CNO_HANDLE *cno_handle)
{
        FOREIGN_DISPATCH_IA(ia_handle, cno_create_func, agent, cno_handle);
        struct ia *ia = ia_lookup(ia_handle);
        struct cno *cno;
        DAT_RETURN ret;

        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (!agent_is_valid(&agent))
                return DAT_ERR_ARG(2);
        if (!cno_handle)
                return DAT_ERR_ARG(3);
        cno = calloc(1, sizeof(*cno));
        if (!cno)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        pthread_mutex_init(&cno->lock, NULL);
        note_agent(&agent);
        cno->agent = agent;
        ret = dat_object_init(&cno->obj, &cno_ops, &ia->obj);
        if (ret == DAT_SUCCESS)
                ret = cno_publish(ia, cno);
        if (ret != DAT_SUCCESS) {
                cno_free(cno);
                return ret;
        }
        *cno_handle = cno->obj.handle;
        return DAT_SUCCESS;
}

/* dat_cno_modify_agent(3DAT): DAT_OS_WAIT_PROXY_AGENT_NULL disassociates. */
_public_ DAT_RETURN dat_cno_modify_agent(DAT_CNO_HANDLE cno_handle, DAT_OS_WAIT_PROXY_AGENT agent)
{
        FOREIGN_DISPATCH(cno_handle, cno_modify_agent_func, cno_handle, agent);
        struct cno *cno = cno_lookup(cno_handle);

        if (!cno)
                return dat_invalid_handle(DAT_HANDLE_TYPE_CNO);
        if (!agent_is_valid(&agent))
                return DAT_ERR_ARG(2);
        note_agent(&agent);
        pthread_mutex_lock(&cno->lock);
        cno->agent = agent_is_null(&agent) ? DAT_OS_WAIT_PROXY_AGENT_NULL : agent;
        pthread_mutex_unlock(&cno->lock);
        return DAT_SUCCESS;
}

/* dat_cno_query(3DAT): every field is filled whatever the mask asks. */
_public_ DAT_RETURN dat_cno_query(DAT_CNO_HANDLE cno_handle, DAT_CNO_PARAM_MASK cno_param_mask,
                                  DAT_CNO_PARAM *cno_param)
{
        FOREIGN_DISPATCH(cno_handle, cno_query_func, cno_handle, cno_param_mask, cno_param);
        struct cno *cno = cno_lookup(cno_handle);

        if (!cno)
                return dat_invalid_handle(DAT_HANDLE_TYPE_CNO);
        if ((unsigned)cno_param_mask > CNO_PARAM_MASK_MAX)
                return DAT_ERR_ARG(2);
        if (!cno_param)
                return DAT_ERR_ARG(3);
        cno_param->ia_handle = cno->obj.parent->handle;
        pthread_mutex_lock(&cno->lock);
        if (agent_is_null(&cno->agent)) {
                cno_param->proxy_type = DAT_PROXY_TYPE_NONE;
                cno_param->proxy.agent = DAT_OS_WAIT_PROXY_AGENT_NULL;
        } else {
                cno_param->proxy_type = DAT_PROXY_TYPE_AGENT;
                cno_param->proxy.agent = cno->agent;
        }
        pthread_mutex_unlock(&cno->lock);
        return DAT_SUCCESS;
}

/* dat_cno_free(3DAT): not while an EVD references it or a thread waits. */
_public_ DAT_RETURN dat_cno_free(DAT_CNO_HANDLE cno_handle)
{
        FOREIGN_DISPATCH(cno_handle, cno_free_func, cno_handle);
        struct cno *cno = cno_lookup(cno_handle);
        DAT_RETURN ret = DAT_SUCCESS;

        if (!cno)
                return dat_invalid_handle(DAT_HANDLE_TYPE_CNO);
        dat_object_lock();
        pthread_mutex_lock(&cno->lock);
        if (cno->obj.closing)
                ret = dat_invalid_handle(DAT_HANDLE_TYPE_CNO);
        else if (cno->obj.users > 0 || cno->waiters > 0)
                ret = DAT_ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
        else
                cno->obj.closing = true;
        pthread_mutex_unlock(&cno->lock);
        dat_object_unlock();
        if (ret != DAT_SUCCESS)
                return ret;
        datd_object_unregister(dat_container_of(cno->obj.parent, struct ia, obj), cno->datd_id);
        cno_free(cno);
        return DAT_SUCCESS;
}

/* Waits under cno->lock until a trigger, a release, the deadline or a
 * signal; returns the EVD (NULL when released) through *evd. */
static DAT_RETURN cno_wait_locked(struct cno *cno, const struct dat_deadline *deadline,
                                  bool poll_only, DAT_EVD_HANDLE *evd)
{
        uint32_t gen = cno->release_gen, seen;
        int r = 0;

        *evd = DAT_HANDLE_NULL;
        for (;;) {
                if (cno->pending) {
                        *evd = cno->pending;
                        cno->pending = DAT_HANDLE_NULL;
                        return DAT_SUCCESS;
                }
                /* A timeout wins over what did not wake the waiter in time. */
                if (poll_only || r == ETIMEDOUT)
                        return DAT_ERR(DAT_QUEUE_EMPTY, DAT_NO_SUBTYPE);
                /* dat_cno_wait(3DAT): the IA is going, or the last EVD left */
                if (cno->dying || cno->release_gen != gen)
                        return DAT_SUCCESS;
                if (r == EINTR)
                        return DAT_ERR(DAT_INTERRUPTED_CALL, DAT_NO_SUBTYPE);
                seen = cno->wake_seq;
                pthread_mutex_unlock(&cno->lock);
                /* Nobody may be watching the channels whose completions
                 * would trigger us (an application polled a moment ago). */
                dto_ia_sleep_prepare(dat_container_of(cno->obj.parent, struct ia, obj));
                r = dat_word_sleep(&cno->wake_seq, seen, deadline);
                pthread_mutex_lock(&cno->lock);
        }
}

/* dat_cno_wait(3DAT): the returned EVD is a hint; on timeout it is NULL. */
_public_ DAT_RETURN dat_cno_wait(DAT_CNO_HANDLE cno_handle, DAT_TIMEOUT timeout,
                                 DAT_EVD_HANDLE *evd_handle)
{
        FOREIGN_DISPATCH(cno_handle, cno_wait_func, cno_handle, timeout, evd_handle);
        struct cno *cno = cno_lookup(cno_handle);
        struct dat_deadline deadline;
        DAT_EVD_HANDLE evd;
        DAT_RETURN ret;

        if (!cno)
                return dat_invalid_handle(DAT_HANDLE_TYPE_CNO);
        if (!evd_handle)
                return DAT_ERR_ARG(3);
        dat_deadline_start(&deadline, timeout);
        pthread_mutex_lock(&cno->lock);
        cno->waiters++;
        ret = cno_wait_locked(cno, &deadline, timeout == 0, &evd);
        /* The last touch: cno_destroy may free the CNO once it sees this. */
        cno->waiters--;
        pthread_mutex_unlock(&cno->lock);
        *evd_handle = evd;
        return ret;
}
