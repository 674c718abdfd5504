/* Event Dispatchers.  For now only the asynchronous EVD that dat_ia_openv()
 * creates when the consumer passes DAT_HANDLE_NULL: a real object with its
 * own DAT_HANDLE_TYPE_EVD handle, freed with its IA.
 *
 * TODO(EVD issue): the event ring (DAT_EVENT slots in process memory),
 * dat_evd_create/wait/dequeue/post_se/query/resize/free, CNO binding, and
 * delivery of asynchronous errors from datd's messages into this EVD. */
#ifndef DATD_LIBDAT_EVD_H
#define DATD_LIBDAT_EVD_H

#include "libdat/handle.h"

struct evd {
        struct dat_object obj;          /* parent: the IA it was created on */
        DAT_COUNT qlen;                 /* events the queue holds (>= the minimum asked) */
        DAT_EVD_FLAGS flags;
};

/* The EVD a handle names, or NULL. */
struct evd *evd_lookup(DAT_EVD_HANDLE handle);

/* Creates the async EVD of an IA being opened, holding at least min_qlen
 * events (min_qlen in [0, the transport's max_evd_qlen], checked by the
 * caller). */
DAT_RETURN evd_create_async(struct dat_object *ia, DAT_COUNT min_qlen, struct evd **out);

/* Frees an EVD (ops->destroy). */
void evd_destroy(struct dat_object *obj);

#endif
