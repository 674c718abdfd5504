/* The packets of datd that a thread read past while it waited for the
 * reply to a round trip of its own inside its dispatch of datd's packets
 * (datd_conn.c, read_past: an agent run at once past CNO_HELD_MAX, cno.h):
 * what that dispatch has not taken yet was sent before them, so they may
 * not be dispatched in place.  They wait here, in the order datd sent them,
 * for that dispatch (progress.c), which takes them before it reads the
 * socket again and before it lets the socket go.  Under the connection's
 * read_lock. */
#ifndef DATD_LIBDAT_DATD_BACKLOG_H
#define DATD_LIBDAT_DATD_BACKLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "proto/datp.h"

/* How many packets may wait.  A round trip whose reply is behind more
 * fails (the packets stay on the socket, in order): datd answers within
 * a few of its events, and a full backlog means the reader waits on
 * something that does not come. */
#define DATD_BACKLOG_MAX 256

struct datd_packet {
        ssize_t len;                    /* as datp_recv returned it, > 0 */
        unsigned nfds;                  /* as datp_recv set it */
        int fds[DATP_MAX_FDS];          /* the descriptors that came with it, -1 for none */
        union datp_message msg;
};

struct datd_backlog {
        struct datd_packet **ring;      /* cap slots, n from head on */
        size_t head, n, cap;
};

/* Makes room for one more packet, before it is read (a packet read is
 * never dropped): -ENOBUFS at DATD_BACKLOG_MAX, -ENOMEM. */
int datd_backlog_make_room(struct datd_backlog *b);

/* Appends p (the backlog owns it now), into the room made for it. */
void datd_backlog_push(struct datd_backlog *b, struct datd_packet *p);

/* The oldest packet, taken out (the caller frees it, and owns its
 * descriptors), or NULL. */
struct datd_packet *datd_backlog_pop(struct datd_backlog *b);

/* Closes the descriptors of p that nobody took. */
void datd_packet_close_fds(struct datd_packet *p);

/* Closes the descriptors of p that nobody took, and frees it; accepts
 * NULL. */
void datd_packet_free(struct datd_packet *p);

/* Frees every packet still waiting, and the ring. */
void datd_backlog_clear(struct datd_backlog *b);

#endif
