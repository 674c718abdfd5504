/* Events endpoints and SRQs raise outside the data completions: the
 * watermark events of dat_ep_set_watermark(3DAT) and dat_srq_set_lw(3DAT),
 * and the EVD configuration an EP's completion streams impose
 * (dat_evd_wait(3DAT)'s threshold with unsignalled or solicited feeds). */
#ifndef DATD_LIBDAT_EP_EVENTS_H
#define DATD_LIBDAT_EP_EVENTS_H

#include "libdat/handle.h"

struct ia;
struct ep_streams;

/* Delivers an asynchronous event about the object handle names, with the
 * reason given (DAT_SRQ_LOW_WATERMARK_EVENT, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT),
 * to the async EVD of ia, if it has one here.  DAT 2.0 numbers no event
 * for watermarks: the event is DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, the
 * only asynchronous event number not tied to one kind of object, and the
 * reason says what happened.  Call with no lock held (a CNO's agent may
 * run). */
void ep_post_async_event(struct ia *ia, DAT_HANDLE handle, DAT_COUNT reason);

/* The same with the event number given (DAT_ASYNC_ERROR_EP_BROKEN, ...). */
void ia_post_async(struct ia *ia, DAT_EVENT_NUMBER number, DAT_HANDLE handle, DAT_COUNT reason);

/* An EP's DTO streams start / stop feeding their EVDs: each is counted on
 * its EVD with its completion flags (stream_users, stream_flags: the
 * dat_ep_create(3DAT) rule that streams on one EVD agree), unsignalled
 * and solicited-wait ones also by kind (evd_feed_config_get). */
void ep_streams_attach(const struct ep_streams *s);
void ep_streams_detach(const struct ep_streams *s);

#endif
