/* A raw protocol client for the connection messages (PROTOCOL.md,
 * "Connections"): requests wait for their reply while the events that arrive
 * meanwhile are queued, and events are taken by type.  Failures are returned
 * (-errno, -ETIMEDOUT), never asserted, so that forked children and the
 * conn-rate program can use it too. */
#ifndef DATD_TESTS_DAEMON_CONN_CLIENT_H
#define DATD_TESTS_DAEMON_CONN_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proto/datp.h"

#define CC_QUEUE 64

/* A queued event, with the descriptors it carried (EV_DATA_CHANNEL). */
struct cc_event {
        union datp_message msg;
        unsigned nfds;
        int fds[DATP_CHANNEL_MAX_FDS];
        uint64_t seq;                   /* order of arrival on the socket */
};

struct cc {
        int fd;
        uint32_t ia_id;
        uint32_t next_request_id;
        uint16_t version;               /* negotiated: raw_version at cc_open */
        /* false (the default): every EV_DATA_CHANNEL is checked, its
         * descriptors closed and the event dropped, so that tests about
         * other things see the events they always saw; true: queued for
         * cc_channel(). */
        bool keep_channels;
        unsigned n_queued;
        struct cc_event *queue;         /* CC_QUEUE events */
        uint64_t seq;                   /* packets received so far */
        uint64_t last_seq;              /* seq of the event cc_event()/cc_channel() returned */
        unsigned n_channels;            /* EV_DATA_CHANNELs received (kept or dropped) */
        /* An EV_CONN_KEPT (version 4) is taken apart into the EV_DATA_CHANNEL
         * and EV_CONN it stands for, so that tests see one flow of events:
         * the second waits here for the next receive. */
        unsigned n_kept;                /* EV_CONN_KEPTs received */
        bool has_split;
        struct cc_event split;
};

/* Connects, says HELLO and opens the IA: 0 or -errno. */
int cc_open(struct cc *c, const char *socket_path, const char *ia_name);
void cc_close(struct cc *c);

/* Any request whose header is set but for request_id (set here): waits for
 * its reply into reply (the reply's size).  0, or -errno. */
int cc_call(struct cc *c, struct datp_header *req, void *reply, size_t size);

/* The next event of this type (DATP_EV_CONN_REQUEST, DATP_EV_CONN or
 * DATP_EV_CHANNEL_DROP), first from the queue: 0, -ETIMEDOUT. */
int cc_event(struct cc *c, uint16_t type, union datp_message *ev, int timeout_ms);

/* With keep_channels: the next EV_DATA_CHANNEL, its descriptors moved to
 * fds (DATP_CHANNEL_MAX_FDS slots, the caller closes them; unused slots
 * -1).  0, -ETIMEDOUT. */
int cc_channel(struct cc *c, union datp_message *ev, int *fds, int timeout_ms);

/* Whether an event of this type arrives within timeout_ms (0: none). */
int cc_no_event(struct cc *c, uint16_t type, int timeout_ms);

/* Round trips; the DAT status of the reply (0: DAT_SUCCESS), -errno on a
 * transport failure. */
long cc_listen(struct cc *c, uint32_t kind, uint64_t qual, uint32_t *listener_id, uint64_t *got_qual);
long cc_unlisten(struct cc *c, uint32_t listener_id);
long cc_connect(struct cc *c, const struct sockaddr *addr, socklen_t len, uint64_t qual,
                uint64_t timeout_us, const void *pd, uint32_t pd_len, uint32_t *conn_id);
/* A CONNECT asking for QoS qos (a DAT_QOS), no private data, no timeout. */
long cc_connect_qos(struct cc *c, const struct sockaddr *addr, socklen_t len, uint64_t qual,
                    uint32_t qos, uint32_t *conn_id);
long cc_dup_connect(struct cc *c, uint32_t dup_of, uint64_t timeout_us, const void *pd,
                    uint32_t pd_len, uint32_t *conn_id);
long cc_accept(struct cc *c, uint32_t cr_id, const void *pd, uint32_t pd_len, uint32_t *conn_id);
long cc_reject(struct cc *c, uint32_t cr_id, const void *pd, uint32_t pd_len);
long cc_handoff(struct cc *c, uint32_t cr_id, uint64_t qual);
long cc_disconnect(struct cc *c, uint32_t conn_id, uint32_t flags);

/* An IPv4 sockaddr for a numeric address. */
socklen_t cc_addr4(struct sockaddr_storage *ss, const char *addr);
/* An IPv6 sockaddr for a numeric address ("::", "::ffff:192.0.2.1"). */
socklen_t cc_addr6(struct sockaddr_storage *ss, const char *addr);

#endif
