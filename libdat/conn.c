/* The EP side of connections (conn.h): dat_ep_connect, dat_ep_dup_connect,
 * dat_ep_disconnect, and the EP state machine driven by datd's EV_CONN.
 *
 * Transitions (dat_ep_connect(3DAT), dat_ep_dup_connect(3DAT),
 * dat_cr_accept(3DAT), dat_ep_disconnect(3DAT)):
 *   Unconnected -connect-> Active Connection Pending
 *     -ESTABLISHED-> Connected
 *     -PEER_REJECTED / NON_PEER_REJECTED / TIMED_OUT / UNREACHABLE-> Disconnected
 *   Unconnected (or an RSP's Passive Connection Pending) -accept-> Completion Pending
 *     -ESTABLISHED-> Connected, -ACCEPT_COMPLETION_ERROR-> Disconnected
 *   Connected -graceful disconnect-> Disconnect Pending -> Disconnected
 *   Connected / Disconnect Pending / a pending connection -abrupt-> Disconnected
 *   Connected -peer disconnects-> Disconnected (DISCONNECTED),
 *             -peer or datd dies, link lost-> Disconnected (BROKEN)
 * Each ends with its DAT_CONNECTION_EVENT_* on the EP's connect EVD.  The
 * data path (dto.h) starts at ESTABLISHED and is stopped (what the peer
 * sent is read, the rest flushes) before the EP leaves Connected; a data
 * path that fails (an error completion, the peer gone) ends the connection
 * BROKEN.  The disconnecting side finishes its own disconnect once its
 * requests are done and tells datd: a Connected EP without waiting, and
 * (protocol version 2) asking for no event back; an event that still comes
 * for that connection finds the EP Disconnected, reset or freed, and is
 * dropped.
 *
 * Error codes where the man pages leave room: a remote address that is
 * NULL: DAT_INVALID_PARAMETER (ARG2); of a family other than AF_INET /
 * AF_INET6: DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNSUPPORTED; a
 * timeout of 0 ("Values must be positive"): DAT_INVALID_PARAMETER; a QoS
 * other than DAT_QOS_BEST_EFFORT or DAT_CONNECT_MULTIPATH_REQUIRED_FLAG:
 * DAT_MODEL_NOT_SUPPORTED; unknown connect flags: DAT_INVALID_PARAMETER; an
 * EP without a connect EVD: DAT_INVALID_HANDLE_EVD_CONN; the duplicated EP
 * of another IA: DAT_INVALID_HANDLE_EP; dat_ep_disconnect on an EP with no
 * connection to end (Unconnected, Reserved, Passive/Tentative Connection
 * Pending): DAT_INVALID_STATE; on a Disconnected EP: DAT_SUCCESS, nothing
 * happens. */
#include "config.h"

#include "libdat/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "libdat/dto.h"
#include "libdat/ep.h"
#include "libdat/ep_events.h"
#include "libdat/evd.h"
#include "libdat/foreign.h"
#include "libdat/ia.h"

DAT_RETURN conn_check_private_data(const struct ia *ia, DAT_COUNT size, const void *data,
                                   int size_arg)
{
        DAT_COUNT max = (DAT_COUNT)ia->info.max_private_data;

        if (max > DATP_PRIVATE_DATA_MAX)
                max = DATP_PRIVATE_DATA_MAX;
        if (size < 0 || size > max)
                return DAT_ERR_ARG(size_arg);
        if (size > 0 && !data)
                return DAT_ERR_ARG(size_arg + 1);
        return DAT_SUCCESS;
}

/* "address:conn_qual" for the trace. */
static const char *endpoint_text(const struct sockaddr_storage *ss, DAT_CONN_QUAL qual,
                                 char buf[96])
{
        char addr[INET6_ADDRSTRLEN] = "?";

        if (ss->ss_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, addr, sizeof(addr));
        else if (ss->ss_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, addr,
                          sizeof(addr));
        snprintf(buf, 96, "%s conn_qual %llu", addr, (unsigned long long)qual);
        return buf;
}

/* One trace line per connection event, naming both ends. */
static void trace_event(const struct ia *ia, const struct ep *ep, uint32_t conn_id, uint32_t event)
{
        char local[96], remote[96];

        if (!dat_trace_enabled())
                return;
        dat_trace("EP %p, connection %u, %s (IA %s) %s %s: event 0x%x", ep->obj.handle, conn_id,
                  endpoint_text(&ia->address, ep->local_port, local), ia->name,
                  ep->active ? "->" : "<-",
                  endpoint_text(&ep->remote_address, ep->remote_port, remote), event);
}

/* Posts a connection event of ep; pinned: the caller's pin on ep ends
 * here, once the event is made and before the EVD may call a CNO's agent
 * (which may free the EP). */
static void post_conn_event(DAT_EVD_HANDLE evd_handle, DAT_EVENT_NUMBER number, struct ep *ep,
                            DAT_COUNT pd_len, bool pinned)
{
        DAT_EVENT event = { .event_number = number };
        struct evd *evd;

        event.event_data.connect_event_data = (DAT_CONNECTION_EVENT_DATA){
                .ep_handle = ep->obj.handle,
                .private_data_size = pd_len,
                .private_data = pd_len ? ep->event_pd : NULL,
        };
        if (pinned)
                ep_unpin(ep);
        evd = evd_lookup(evd_handle);
        if (evd)
                (void)evd_post_event(evd, &event);
}

/* Where an event of a connection stream takes an EP in state s, or -1 if
 * it does not apply (stale: the EP moved on). */
static int next_state(DAT_EP_STATE s, uint32_t event)
{
        bool pending = s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING ||
                       s == DAT_EP_STATE_COMPLETION_PENDING;

        switch (event) {
        case DAT_CONNECTION_EVENT_ESTABLISHED:
                return pending ? DAT_EP_STATE_CONNECTED : -1;
        case DAT_CONNECTION_EVENT_PEER_REJECTED:
        case DAT_CONNECTION_EVENT_NON_PEER_REJECTED:
        case DAT_CONNECTION_EVENT_TIMED_OUT:
        case DAT_CONNECTION_EVENT_UNREACHABLE:
                return s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING ? DAT_EP_STATE_DISCONNECTED : -1;
        case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR:
                return s == DAT_EP_STATE_COMPLETION_PENDING ? DAT_EP_STATE_DISCONNECTED : -1;
        case DAT_CONNECTION_EVENT_DISCONNECTED:
        case DAT_CONNECTION_EVENT_BROKEN:
                return pending || s == DAT_EP_STATE_CONNECTED ||
                                       s == DAT_EP_STATE_DISCONNECT_PENDING
                               ? DAT_EP_STATE_DISCONNECTED : -1;
        default:
                return -1;
        }
}

/* The EP ev names, if it is one of ia's that ev may concern, under
 * dat_object_lock.  An EP whose new connection has no id yet (the reply to
 * CONNECT or CR_ACCEPT is not in) takes any connection's events but the
 * one's it had before. */
static struct ep *event_ep_locked(struct ia *ia, const struct datp_ev_conn *ev)
{
        struct ep *ep = ep_lookup((DAT_EP_HANDLE)(uintptr_t)ev->ep_handle);

        if (!ep || ep->obj.parent != &ia->obj || ep->obj.closing)
                return NULL;
        if (ep->conn_id != 0 ? ep->conn_id != ev->conn_id
                             : ep->ended_conn_id != 0 && ev->conn_id == ep->ended_conn_id)
                return NULL;
        return ep;
}

void (*conn_test_stop_hook)(void);

/* The end of a connection: what the peer sent before still arrives, then
 * the data path flushes.  Returns the event to report: BROKEN when the
 * data path had failed (an error completion) whatever datd said. */
static uint32_t stop_data_path(struct ia *ia, const struct datp_ev_conn *ev)
{
        struct ep *ep;
        bool broken;

        if (ev->event != DAT_CONNECTION_EVENT_DISCONNECTED &&
            ev->event != DAT_CONNECTION_EVENT_BROKEN)
                return ev->event;
        dat_object_lock();
        ep = event_ep_locked(ia, ev);
        if (ep)
                ep_pin_locked(ep);
        dat_object_unlock();
        if (!ep)
                return ev->event;
        if (conn_test_stop_hook)
                conn_test_stop_hook();
        broken = dto_ep_stop(ep);
        ep_unpin(ep);
        return broken ? DAT_CONNECTION_EVENT_BROKEN : ev->event;
}

static void send_disconnect_nowait(struct ep *ep, uint32_t conn_id, bool graceful);

/* Threads waiting for datd's answer to a CONNECT or CR_ACCEPT
 * (ep->answer_due). */
static pthread_mutex_t answer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t answer_cond = PTHREAD_COND_INITIALIZER;

/* The replies to CONNECT and CR_ACCEPT are laid out alike: read as one. */
_Static_assert(offsetof(struct datp_connect_reply, status) ==
               offsetof(struct datp_cr_accept_reply, status), "reply layouts");
_Static_assert(offsetof(struct datp_connect_reply, conn_id) ==
               offsetof(struct datp_cr_accept_reply, conn_id), "reply layouts");

/* The connection's id in datd's answer (ret, reply: datd_later_fn's) to
 * the EP's CONNECT or CR_ACCEPT; 0 when it refused or none came. */
static uint32_t answered_conn_id(DAT_EP_HANDLE handle, DAT_RETURN ret,
                                 const union datp_message *reply)
{
        if (ret == DAT_SUCCESS)
                ret = dat_err_normalize(reply->connect_reply.status.dat_status);
        if (ret == DAT_SUCCESS)
                return reply->connect_reply.conn_id;
        dat_trace("%s of EP %p: datd answered 0x%08x",
                  reply ? datp_type_name(reply->hdr.type & ~DATP_REPLY) : "request", handle, ret);
        return 0;
}

/* datd answered (ret, reply) the request that took the EP of handle to
 * `pending`: with the connection's id, or a refusal (the EP goes
 * Disconnected with `refused_event`).  Returns whether it was refused, with
 * the EP's IA and accept_cr_id; false when the EP is gone, or datd is
 * (whose going ends the EP otherwise). */
static bool request_answered(DAT_EP_HANDLE handle, DAT_RETURN ret, const union datp_message *reply,
                             DAT_EP_STATE pending, DAT_EVENT_NUMBER refused_event,
                             uint32_t *cr_id, struct ia **ia)
{
        uint32_t conn_id = answered_conn_id(handle, ret, reply);
        DAT_EVD_HANDLE evd_handle = DAT_HANDLE_NULL;
        bool refused = false;
        struct ep *ep;

        dat_object_lock();
        ep = ep_lookup(handle);
        if (ep && ep->answer_due) {
                if (conn_id != 0) {
                        /* Its events follow this answer: none came yet. */
                        ep->conn_id = conn_id;
                } else if (ep->state == pending && !ep->obj.closing &&
                           /* datd gone: conn_ia_broken ends the EP (BROKEN). */
                           !__atomic_load_n(&ep_ia(ep)->conn.dead, __ATOMIC_ACQUIRE)) {
                        __atomic_store_n(&ep->state, DAT_EP_STATE_DISCONNECTED, __ATOMIC_RELEASE);
                        ep->event_pd_len = 0;
                        evd_handle = ep->connect_evd;
                        *cr_id = ep->accept_cr_id;
                        *ia = ep_ia(ep);
                        ep_pin_locked(ep);
                        refused = true;
                }
                __atomic_store_n(&ep->answer_due, false, __ATOMIC_RELEASE);
        }
        dat_object_unlock();
        pthread_mutex_lock(&answer_lock);
        pthread_cond_broadcast(&answer_cond);
        pthread_mutex_unlock(&answer_lock);
        if (refused) {
                /* datd did not take the EP to `pending`. */
                ep_mirror_nowait(ep);
                post_conn_event(evd_handle, refused_event, ep, 0, true);
        }
        return refused;
}

bool conn_accept_answered(DAT_EP_HANDLE handle, DAT_RETURN ret, const union datp_message *reply,
                          uint32_t *cr_id, struct ia **ia)
{
        return request_answered(handle, ret, reply, DAT_EP_STATE_COMPLETION_PENDING,
                                DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, cr_id, ia);
}

/* Until datd answered the EP's CONNECT or CR_ACCEPT: a disconnect or free
 * needs the connection's id.  The answer comes before any event of the
 * connection, by the socket's reader (datd_conn.h); bounded like a round
 * trip. */
static void await_answer(struct ep *ep)
{
        struct timespec deadline;
        int cancel;

        if (!__atomic_load_n(&ep->answer_due, __ATOMIC_ACQUIRE))
                return;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += DATD_REPLY_TIMEOUT_MS / 1000;
        /* pthread_cond_timedwait is a cancellation point, which leaves
         * answer_lock held (for every EP of the process) to a cancelled
         * thread. */
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
        pthread_mutex_lock(&answer_lock);
        while (__atomic_load_n(&ep->answer_due, __ATOMIC_ACQUIRE))
                if (pthread_cond_timedwait(&answer_cond, &answer_lock, &deadline) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&answer_lock);
        pthread_setcancelstate(cancel, NULL);
}

void conn_dispatch(struct ia *ia, const struct datp_ev_conn *ev_in)
{
        struct datp_ev_conn evc = *ev_in;
        const struct datp_ev_conn *ev = &evc;
        DAT_EVD_HANDLE evd_handle;
        DAT_COUNT pd_len;
        struct ep *ep;
        int next;

        evc.event = stop_data_path(ia, ev_in);
        dat_object_lock();
        ep = event_ep_locked(ia, ev);
        if (!ep) {
                dat_object_unlock();
                dat_trace("connection %u event 0x%x for no EP of ours: dropped", ev->conn_id,
                          ev->event);
                return;
        }
        next = next_state(ep->state, ev->event);
        if (next < 0) {
                dat_object_unlock();
                dat_trace("EP %p: connection %u event 0x%x in state %d: dropped", ep->obj.handle,
                          ev->conn_id, ev->event, ep->state);
                return;
        }
        /* dat_ep_free waits while we go on without the lock. */
        ep_pin_locked(ep);
        __atomic_store_n(&ep->state, (DAT_EP_STATE)next, __ATOMIC_RELEASE);
        ep->conn_id = ev->conn_id;
        pd_len = (DAT_COUNT)(ev->pd_len <= DATP_PRIVATE_DATA_MAX ? ev->pd_len : 0);
        memcpy(ep->event_pd, ev->private_data, (size_t)pd_len);
        ep->event_pd_len = pd_len;
        evd_handle = ep->connect_evd;
        trace_event(ia, ep, ev->conn_id, ev->event);
        dat_object_unlock();
        if (next == DAT_EP_STATE_CONNECTED && dto_ep_start(ep, ev->conn_id) != DAT_SUCCESS) {
                /* No data channel: the connection is of no use. */
                dat_trace("EP %p, connection %u: no data channel: broken", ep->obj.handle,
                          ev->conn_id);
                dat_object_lock();
                __atomic_store_n(&ep->state, DAT_EP_STATE_DISCONNECTED, __ATOMIC_RELEASE);
                ep->event_pd_len = 0;
                dat_object_unlock();
                /* A channel it holds goes now: datd sends no DISCONNECTED
                 * back (NO_EVENT) whose stop would close it. */
                dto_ep_stop(ep);
                send_disconnect_nowait(ep, ev->conn_id, false);
                evc.event = DAT_CONNECTION_EVENT_BROKEN;
                pd_len = 0;
                ep_mirror_nowait(ep);
        }
        /* Otherwise datd's copy of the state followed the event it sent
         * (daemon/conn.c, ep_follows). */
        post_conn_event(evd_handle, (DAT_EVENT_NUMBER)ev->event, ep, pd_len, true);
}

static bool has_connection(DAT_EP_STATE s)
{
        return s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || s == DAT_EP_STATE_COMPLETION_PENDING ||
               s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_DISCONNECT_PENDING;
}

/* One EP of ia that still has a connection, moved to Disconnected under
 * the lock; NULL when none is left. */
static struct ep *break_one_locked(struct ia *ia)
{
        dat_list_for_each(pos, &ia->obj.children) {
                struct dat_object *o = dat_container_of(pos, struct dat_object, sibling);
                struct ep *ep;

                if (o->ops->type != DAT_HANDLE_TYPE_EP)
                        continue;
                ep = dat_container_of(o, struct ep, obj);
                /* One being freed ends its connection itself. */
                if (!has_connection(ep->state) || ep->obj.closing)
                        continue;
                __atomic_store_n(&ep->state, DAT_EP_STATE_DISCONNECTED, __ATOMIC_RELEASE);
                ep->event_pd_len = 0;
                return ep;
        }
        return NULL;
}

void conn_ia_broken(struct ia *ia)
{
        for (;;) {
                DAT_EVD_HANDLE evd_handle;
                struct ep *ep;

                dat_object_lock();
                ep = break_one_locked(ia);
                evd_handle = ep ? ep->connect_evd : DAT_HANDLE_NULL;
                if (ep)
                        ep_pin_locked(ep);
                dat_object_unlock();
                if (!ep)
                        break;
                dto_ep_stop(ep);
                /* No lock held: the EVD may trigger a CNO's agent. */
                post_conn_event(evd_handle, DAT_CONNECTION_EVENT_BROKEN, ep, 0, true);
        }
        ep_post_async_event(ia, ia->obj.handle, DAT_IA_CATASTROPHIC_ERROR);
}

static DAT_RETURN send_disconnect(struct ep *ep, uint32_t conn_id, bool graceful)
{
        struct datp_disconnect req = { .hdr = { .type = DATP_DISCONNECT, .length = sizeof(req) } };
        struct ia *ia = ep_ia(ep);
        union datp_message reply;
        char why[DATD_REASON_MAX];
        DAT_RETURN ret;

        req.ia_id = ia->ia_id;
        req.conn_id = conn_id;
        req.flags = graceful ? DATP_CLOSE_GRACEFUL : DATP_CLOSE_ABRUPT;
        ret = datd_conn_call(&ia->conn, &req.hdr, &reply, why);
        if (ret != DAT_SUCCESS) {
                dat_trace("DISCONNECT of connection %u: %s", conn_id, why);
                return ret;
        }
        return dat_err_normalize(reply.disconnect_reply.status.dat_status);
}

/* Tells datd to end the connection, without waiting for its answer.  Every
 * caller ends the EP here (Disconnected, its event posted), so datd is
 * asked for no event back (protocol version 2): it would only be read,
 * dispatched and dropped. */
static void send_disconnect_nowait(struct ep *ep, uint32_t conn_id, bool graceful)
{
        struct datp_disconnect req = { .hdr = { .type = DATP_DISCONNECT, .length = sizeof(req) } };
        struct ia *ia = ep_ia(ep);

        if (!conn_id)
                return;
        req.ia_id = ia->ia_id;
        req.conn_id = conn_id;
        req.flags = graceful ? DATP_CLOSE_GRACEFUL : DATP_CLOSE_ABRUPT;
        if (ia->conn.version >= 2)
                req.flags |= DATP_DISCONNECT_NO_EVENT;
        if (datd_conn_send(&ia->conn, &req.hdr) != DAT_SUCCESS)
                dat_trace("DISCONNECT of connection %u could not be sent", conn_id);
}

/* Ends the EP's connection here: Disconnected, the event (if it still had
 * one to end), datd told without waiting.  From any thread. */
static void end_connection(struct ep *ep, DAT_EVENT_NUMBER event, bool graceful)
{
        DAT_EVD_HANDLE evd_handle = DAT_HANDLE_NULL;
        uint32_t conn_id = 0;
        bool done = false;

        dat_object_lock();
        if (has_connection(ep->state) && !ep->obj.closing) {
                __atomic_store_n(&ep->state, DAT_EP_STATE_DISCONNECTED, __ATOMIC_RELEASE);
                ep->event_pd_len = 0;
                evd_handle = ep->connect_evd;
                conn_id = ep->conn_id;
                done = true;
        }
        dat_object_unlock();
        if (!done)
                return;
        send_disconnect_nowait(ep, conn_id, graceful);
        ep_mirror_nowait(ep);
        post_conn_event(evd_handle, event, ep, 0, false);
}

void conn_ep_data_failed(struct ep *ep)
{
        end_connection(ep, DAT_CONNECTION_EVENT_BROKEN, false);
}

void conn_finish_disconnect(struct ep *ep)
{
        dto_ep_stop(ep);
        end_connection(ep, DAT_CONNECTION_EVENT_DISCONNECTED, true);
}

void conn_ep_abort(struct ep *ep)
{
        uint32_t conn_id;
        bool live;

        await_answer(ep);
        dat_object_lock();
        live = has_connection(ep->state);
        conn_id = ep->conn_id;
        dat_object_unlock();
        if (live && conn_id)
                (void)send_disconnect(ep, conn_id, false);
}

static socklen_t address_len(const struct sockaddr *sa)
{
        switch (sa->sa_family) {
        case AF_INET:
                return sizeof(struct sockaddr_in);
        case AF_INET6:
                return sizeof(struct sockaddr_in6);
        default:
                return 0;
        }
}

struct connect_args {
        struct sockaddr_storage address;
        socklen_t address_len;
        DAT_CONN_QUAL conn_qual;
        DAT_TIMEOUT timeout;
        DAT_COUNT pd_size;
        const void *pd;
        DAT_CONNECT_FLAGS flags;
        uint32_t dup_of;                /* dat_ep_dup_connect: the duplicated connection */
};

/* datd's answer to a CONNECT sent without waiting, by the socket's reader
 * (ctx: the EP's handle).  A refusal (a quota of datd's) ends the attempt
 * as a provider's rejection would: DAT_CONNECTION_EVENT_NON_PEER_REJECTED. */
static void connect_answered(void *ctx, DAT_RETURN ret, const union datp_message *reply)
{
        uint32_t cr_id;
        struct ia *ia;

        (void)request_answered((DAT_EP_HANDLE)ctx, ret, reply, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING,
                               DAT_CONNECTION_EVENT_NON_PEER_REJECTED, &cr_id, &ia);
}

/* Unconnected -> Active Connection Pending, CONNECT.  A first connect
 * returns once the CONNECT is sent (connect_answered); a dat_ep_dup_connect
 * waits, and goes back to Unconnected if datd refuses. */
static DAT_RETURN start_connect(struct ep *ep, const struct connect_args *a)
{
        struct datp_connect req = { .hdr = { .type = DATP_CONNECT, .length = sizeof(req) } };
        struct ia *ia = ep_ia(ep);
        union datp_message reply;
        char why[DATD_REASON_MAX];
        DAT_RETURN ret = DAT_SUCCESS;
        bool back = false;

        dat_object_lock();
        if (ep->obj.closing)
                ret = dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        /* dat_ep_connect(3DAT): the EP must be Unconnected. */
        else if (ep->state != DAT_EP_STATE_UNCONNECTED)
                ret = ep_invalid_state(ep->state);
        else if (!ep->connect_evd)
                ret = DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
        else {
                __atomic_store_n(&ep->state, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING,
                                 __ATOMIC_RELEASE);
                ep->active = true;
                ep->conn_id = 0;
                ep->remote_address = a->address;
                ep->has_remote = true;
                ep->remote_port = a->conn_qual;
                ep->remote_conn_qual = a->conn_qual;
                ep->connect_flags = a->flags;
                ep->answer_due = !a->dup_of;
        }
        dat_object_unlock();
        if (ret != DAT_SUCCESS)
                return ret;
        /* datd's copy of the state moves with the CONNECT it accepts. */

        req.ia_id = ia->ia_id;
        req.flags = a->dup_of ? DATP_CONNECT_DUP : 0;
        req.ep_handle = (uintptr_t)ep->obj.handle;
        req.dup_of_conn_id = a->dup_of;
        /* A DUP names no remote end: datd reuses the duplicated
         * connection's, redirections included (proto/datp.h). */
        if (!a->dup_of) {
                memcpy(&req.remote_address, &a->address, a->address_len);
                req.remote_address_len = (uint32_t)a->address_len;
                req.remote_conn_qual = a->conn_qual;
        }
        req.qos = DAT_QOS_BEST_EFFORT;
        req.timeout_us = a->timeout == DAT_TIMEOUT_INFINITE ? UINT64_MAX : a->timeout;
        req.connect_flags = (uint32_t)a->flags;
        req.pd_len = (uint32_t)a->pd_size;
        if (a->pd_size)
                memcpy(req.private_data, a->pd, (size_t)a->pd_size);
        if (!a->dup_of) {
                ret = datd_conn_send_later(&ia->conn, &req.hdr, connect_answered,
                                           (void *)ep->obj.handle);
                if (ret != DAT_SUCCESS)
                        snprintf(why, sizeof(why), "could not be sent");
        } else {
                ret = datd_conn_call(&ia->conn, &req.hdr, &reply, why);
                if (ret == DAT_SUCCESS)
                        ret = dat_err_normalize(reply.connect_reply.status.dat_status);
        }
        if (ret != DAT_SUCCESS)
                dat_trace("CONNECT to conn_qual %llu: %s", (unsigned long long)a->conn_qual, why);

        dat_object_lock();
        if (ret != DAT_SUCCESS)
                ep->answer_due = false;
        if (ret != DAT_SUCCESS && ep->state == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING &&
            ep->conn_id == 0) {
                __atomic_store_n(&ep->state, DAT_EP_STATE_UNCONNECTED, __ATOMIC_RELEASE);
                ep->has_remote = false;
                ep->active = false;
                back = true;
        } else if (ret == DAT_SUCCESS && a->dup_of && ep->conn_id == 0) {
                ep->conn_id = reply.connect_reply.conn_id;
        }
        dat_object_unlock();
        if (back) {
                char remote[96];

                dat_trace("IA %s: datd refused CONNECT to %s: 0x%08x", ia->name,
                          endpoint_text(&a->address, a->conn_qual, remote), ret);
                ep_mirror_nowait(ep);
        }
        return ret;
}

/* The checks dat_ep_connect and dat_ep_dup_connect share, from the timeout
 * on (timeout_arg is its position). */
static DAT_RETURN check_connect_args(const struct ia *ia, DAT_TIMEOUT timeout,
                                     DAT_COUNT pd_size, const void *pd, DAT_QOS qos,
                                     int timeout_arg)
{
        DAT_RETURN ret;

        /* "Values must be positive." */
        if (timeout == 0)
                return DAT_ERR_ARG(timeout_arg);
        ret = conn_check_private_data(ia, pd_size, pd, timeout_arg + 1);
        if (ret != DAT_SUCCESS)
                return ret;
        /* "If the local Provider or Transport does not support the
         * requested qos, the operation fails and DAT_MODEL_NOT_SUPPORTED is
         * returned synchronously." */
        if (qos != DAT_QOS_BEST_EFFORT)
                return DAT_ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE);
        return DAT_SUCCESS;
}

/* dat_ep_connect(3DAT) */
_public_ DAT_RETURN dat_ep_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR remote_ia_address,
                                   DAT_CONN_QUAL remote_conn_qual, DAT_TIMEOUT timeout,
                                   DAT_COUNT private_data_size, const DAT_PVOID private_data,
                                   DAT_QOS quality_of_service, DAT_CONNECT_FLAGS connect_flags)
{
        FOREIGN_DISPATCH(ep_handle, ep_connect_func, ep_handle, remote_ia_address, remote_conn_qual,
                         timeout, private_data_size, private_data, quality_of_service,
                         connect_flags);
        struct ep *ep = ep_lookup(ep_handle);
        struct connect_args a = { .conn_qual = remote_conn_qual, .timeout = timeout,
                                  .pd_size = private_data_size, .pd = private_data,
                                  .flags = connect_flags };
        DAT_RETURN ret;

        if (!ep)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        if (!remote_ia_address)
                return DAT_ERR_ARG(2);
        a.address_len = address_len(remote_ia_address);
        if (a.address_len == 0)
                return DAT_ERR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
        memcpy(&a.address, remote_ia_address, a.address_len);
        ret = check_connect_args(ep_ia(ep), timeout, private_data_size, private_data,
                                 quality_of_service, 4);
        if (ret != DAT_SUCCESS)
                return ret;
        if (connect_flags & ~(DAT_CONNECT_FLAGS)(DAT_CONNECT_MULTIPATH_FLAG |
                                                 DAT_CONNECT_MULTIPATH_REQUIRED_FLAG))
                return DAT_ERR_ARG(8);
        /* One path is all there is: requiring several is a model this
         * provider does not support; requesting them is a wish. */
        if (connect_flags & DAT_CONNECT_MULTIPATH_REQUIRED_FLAG)
                return DAT_ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE);
        return start_connect(ep, &a);
}

/* dat_ep_dup_connect(3DAT): "the same remote IA, Connection Qualifier, and
 * connect_flags as used for establishing the connection on duplicated
 * Endpoints and following the same redirections" -- datd follows them by
 * the duplicated connection's id. */
_public_ DAT_RETURN dat_ep_dup_connect(DAT_EP_HANDLE ep_handle, DAT_EP_HANDLE dup_ep_handle,
                                       DAT_TIMEOUT timeout, DAT_COUNT private_data_size,
                                       const DAT_PVOID private_data, DAT_QOS quality_of_service)
{
        FOREIGN_DISPATCH_GUARDED(ep_handle,
                                 (1, dup_ep_handle, DAT_INVALID_HANDLE_EP),
                                 ep_dup_connect_func, ep_handle, dup_ep_handle, timeout,
                                 private_data_size, private_data, quality_of_service);
        struct ep *ep = ep_lookup(ep_handle);
        struct ep *dup = ep_lookup(dup_ep_handle);
        struct connect_args a = { .timeout = timeout, .pd_size = private_data_size,
                                  .pd = private_data };
        DAT_RETURN ret;

        if (!ep || !dup)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        /* "Connected local Endpoint": an EP of the same IA. */
        if (dup->obj.parent != ep->obj.parent)
                return DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        ret = check_connect_args(ep_ia(ep), timeout, private_data_size, private_data,
                                 quality_of_service, 3);
        if (ret != DAT_SUCCESS)
                return ret;
        dat_object_lock();
        /* "A parameter is in an invalid state": the duplicated EP must be
         * Connected. */
        if (dup->state != DAT_EP_STATE_CONNECTED || !dup->has_remote || dup->conn_id == 0) {
                DAT_EP_STATE s = dup->state;

                dat_object_unlock();
                return ep_invalid_state(s);
        }
        a.address = dup->remote_address;
        a.conn_qual = dup->active ? dup->remote_conn_qual : dup->remote_port;
        a.flags = dup->active ? dup->connect_flags : DAT_CONNECT_DEFAULT_FLAG;
        a.dup_of = dup->conn_id;
        dat_object_unlock();
        a.address_len = address_len((const struct sockaddr *)&a.address);
        if (a.address_len == 0)
                return DAT_ERR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
        return start_connect(ep, &a);
}

/* dat_ep_disconnect(3DAT) */
_public_ DAT_RETURN dat_ep_disconnect(DAT_EP_HANDLE ep_handle, DAT_CLOSE_FLAGS close_flags)
{
        FOREIGN_DISPATCH(ep_handle, ep_disconnect_func, ep_handle, close_flags);
        struct ep *ep = ep_lookup(ep_handle);
        bool graceful = close_flags == DAT_CLOSE_GRACEFUL_FLAG;
        DAT_EVD_HANDLE evd_handle = DAT_HANDLE_NULL;
        bool pending = false, done = false, requests_outstanding;
        DAT_EP_STATE s;
        uint32_t conn_id;

        if (!ep)
                return dat_invalid_handle(DAT_HANDLE_TYPE_EP);
        if (close_flags != DAT_CLOSE_ABRUPT_FLAG && close_flags != DAT_CLOSE_GRACEFUL_FLAG)
                return DAT_ERR_ARG(2);
        await_answer(ep);
        /* Requests the peer acknowledged are not outstanding. */
        dto_ep_take_acks(ep);
        dat_object_lock();
        s = ep->state;
        conn_id = ep->conn_id;
        requests_outstanding = ep->request_outstanding > 0;
        if (s == DAT_EP_STATE_CONNECTED && graceful) {
                /* "During that time, the local Endpoint is in a
                 * DAT_EP_DISCONNECT_PENDING state." */
                __atomic_store_n(&ep->state, DAT_EP_STATE_DISCONNECT_PENDING, __ATOMIC_RELEASE);
                pending = true;
        }
        dat_object_unlock();
        /* "The graceful dat_ep_disconnect() call when the local Endpoint is
         * in the DAT_EP_DISCONNECT_PENDING state has no effect." */
        if (s == DAT_EP_STATE_DISCONNECTED || (s == DAT_EP_STATE_DISCONNECT_PENDING && graceful))
                return DAT_SUCCESS;
        if (!has_connection(s))
                return ep_invalid_state(s);
        /* Disconnect Pending is a state datd hears of only when requests
         * are outstanding: without, the EP leaves it at once.  Told before
         * the data path may finish it, so that the later Disconnected
         * cannot be overtaken. */
        if (pending && requests_outstanding)
                ep_mirror_nowait(ep);
        /* dat_ep_disconnect(3DAT): a graceful disconnect lets the requests
         * outstanding complete first; the data path finishes it then. */
        if (pending && !dto_ep_disconnect(ep, true))
                return DAT_SUCCESS;
        if (s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_DISCONNECT_PENDING) {
                /* Abrupt, or nothing outstanding: what is left flushes now.
                 * The data path ran, and its stop told the peer (BYE):
                 * datd's answer would add nothing but a round trip. */
                dto_ep_stop(ep);
                send_disconnect_nowait(ep, conn_id, graceful);
        } else {
                /* Still pending: datd may have sent ESTABLISHED and the data
                 * channel already.  Its answer comes after them, so they are
                 * dispatched first, and the data path they start ends in
                 * order: the peer sees a BYE, not its channel closed under
                 * it (BROKEN).  Stopped only then: a stop before would take
                 * away the channel offered, and the ESTABLISHED dispatched
                 * next would find none and break the connection. */
                if (conn_id)
                        (void)send_disconnect(ep, conn_id, graceful);
                dto_ep_stop(ep);
        }

        dat_object_lock();
        if (has_connection(ep->state)) {
                __atomic_store_n(&ep->state, DAT_EP_STATE_DISCONNECTED, __ATOMIC_RELEASE);
                ep->event_pd_len = 0;
                evd_handle = ep->connect_evd;
                done = true;
        }
        dat_object_unlock();
        if (done) {
                /* A DISCONNECT gives datd the state itself. */
                if (!conn_id)
                        ep_mirror_nowait(ep);
                post_conn_event(evd_handle, DAT_CONNECTION_EVENT_DISCONNECTED, ep, 0, false);
        }
        return DAT_SUCCESS;
}
