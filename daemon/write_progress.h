/* Whether the peer of a stream socket reads what is written to it, in
 * bytes rather than in messages: a peer reading one large reply empties no
 * message for as long as the reply lasts, yet keeps reading.  The writer
 * (sd-bus, for a bus connection) is not asked: what the kernel holds for
 * the peer is.  Progress since the last question is either of
 *   - room made: the socket became writable (EPOLLOUT, on a duplicate of
 *     the descriptor so that the writer's own watch is left alone), which
 *     happens only as the peer reads, and is what lets the writer go on;
 *   - the bytes unread by the peer (SIOCOUTQ) changed: a slow reader that
 *     has not made enough room for EPOLLOUT yet.
 * A peer that reads nothing changes neither. */
#ifndef DATD_DAEMON_WRITE_PROGRESS_H
#define DATD_DAEMON_WRITE_PROGRESS_H

#include <stdbool.h>
#include <systemd/sd-event.h>

typedef struct WriteProgress WriteProgress;

/* Starts watching fd (duplicated: the caller keeps and closes its own).
 * 0 or -errno. */
int write_progress_new(sd_event *e, int fd, WriteProgress **ret);

/* Accepts NULL; returns NULL. */
WriteProgress *write_progress_free(WriteProgress *w);

/* Whether the peer read since write_progress_new() or the last call; the
 * next call asks about the time from now. */
bool write_progress_made(WriteProgress *w);

#endif
