/* Asynchronous events of EPs and SRQs, and the EVD feeds of EP streams
 * (see ep_events.h). */
#include "config.h"

#include "libdat/ep_events.h"

#include "libdat/ep_attr.h"
#include "libdat/evd.h"
#include "libdat/ia.h"

void ep_post_async_event(struct ia *ia, DAT_HANDLE handle, DAT_COUNT reason)
{
        ia_post_async(ia, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, handle, reason);
}

void ia_post_async(struct ia *ia, DAT_EVENT_NUMBER number, DAT_HANDLE handle, DAT_COUNT reason)
{
        DAT_EVENT event = {
                .event_number = number,
                .event_data.asynch_error_event_data = { .dat_handle = handle, .reason = reason },
        };
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        struct evd *evd;

        dat_object_lock();
        if (ia->own_async_evd)
                async = ia->own_async_evd->obj.handle;
        else if (ia->borrowed_async_evd)
                async = ia->borrowed_async_evd;
        dat_object_unlock();
        evd = evd_lookup(async);
        if (evd)
                (void)evd_post_event(evd, &event);
}

/* dat_evd_query(3DAT): DAT_EVD_STATE_CONFIG_NOTIFY for a stream whose
 * notification each post controls (unsignalled), _SOLICITED for a Recv
 * stream that the sender's solicited flag controls; 0 for the others. */
static DAT_EVD_STATE feed_config(DAT_COMPLETION_FLAGS flags)
{
        if (flags == DAT_COMPLETION_UNSIGNALLED_FLAG)
                return DAT_EVD_STATE_CONFIG_NOTIFY;
        if (flags == DAT_COMPLETION_SOLICITED_WAIT_FLAG)
                return DAT_EVD_STATE_CONFIG_SOLICITED;
        return 0;
}

static void feed(DAT_EVD_HANDLE handle, DAT_COMPLETION_FLAGS flags, bool attach)
{
        DAT_EVD_STATE config = feed_config(flags);
        struct evd *evd;

        if (handle == DAT_HANDLE_NULL)
                return;
        /* Under the object lock: an abrupt close may be destroying the EVD. */
        dat_object_lock();
        evd = evd_lookup(handle);
        if (evd && attach) {
                if (evd->stream_users++ == 0)
                        evd->stream_flags = flags;
                if (config)
                        evd_feed_config_get(evd, config);
        } else if (evd) {
                if (evd->stream_users > 0)
                        evd->stream_users--;
                if (config)
                        evd_feed_config_put(evd, config);
        }
        dat_object_unlock();
}

void ep_streams_attach(const struct ep_streams *s)
{
        feed(s->recv_evd, s->recv_flags, true);
        feed(s->request_evd, s->request_flags, true);
}

void ep_streams_detach(const struct ep_streams *s)
{
        feed(s->recv_evd, s->recv_flags, false);
        feed(s->request_evd, s->request_flags, false);
}
