/* The progress thread of an IA (DESIGN.md: "One progress thread per IA for
 * what must move without the application"): it reads every packet datd
 * sends on the IA's control socket, hands replies to the caller waiting in
 * datd_conn_call, and dispatches datd's events (EV_CONN_REQUEST to the
 * listener it names, EV_CONN to the EP).  When datd goes away it fails the
 * waiting call, breaks the IA's connections and posts an asynchronous error.
 * It never allocates per packet but for a new CR, and never blocks but in
 * poll(): an EVD that is full loses the event (the EVD reports the
 * overflow). */
#ifndef DATD_LIBDAT_PROGRESS_H
#define DATD_LIBDAT_PROGRESS_H

#include "libdat/libdat.h"

struct ia;

/* Starts ia's thread; from now on datd_conn_call waits for it.
 * DAT_INSUFFICIENT_RESOURCES if the thread or its eventfd cannot be made. */
DAT_RETURN progress_start(struct ia *ia);

/* Reads the packets datd sent that are there and dispatches them, as the
 * thread does, and those a round trip inside that dispatch read past
 * (datd_conn_backlog_pop); for a thread that took the socket over
 * (datd_conn_take_over), whose read_lock also guards the buffers used.
 * False when the connection is over (datd went, or broke the protocol). */
bool progress_read(struct ia *ia);

/* Stops and joins ia's thread, if it runs; afterwards datd_conn_call reads
 * its replies itself again.  Must not be called from the thread. */
void progress_stop(struct ia *ia);

#endif
