/* The CM links: TCP between the datds of two hosts, on cm_port, carrying
 * the connection negotiation of every connection between them
 * (PROTOCOL.md, "datd to datd").  One link per pair of datds, made by the
 * first connect that needs it and reused by every later one; a link lost
 * (TCP error, or no traffic for two keepalive periods) breaks every
 * connection over it.
 *
 * Every field on the wire is in network byte order: the hosts may differ. */
#ifndef DATD_DAEMON_CM_H
#define DATD_DAEMON_CM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proto/datp.h"

typedef struct Manager Manager;
typedef struct CmLink CmLink;

#define CM_MAGIC 0x44415443u    /* "DATC" */
#define CM_VERSION 2            /* 2: data connections (ACCEPT's token, DATA) */

enum cm_type {
        CM_HELLO = 1,
        CM_CONNECT_REQ = 2,
        CM_ACCEPT = 3,
        CM_REJECT = 4,
        CM_READY = 5,
        CM_DISCONNECT = 6,
        CM_KEEPALIVE = 7,
        CM_DATA = 8,                    /* first message of a data connection (not a link) */
};

enum cm_reason {
        CM_REASON_NONE = 0,
        CM_REASON_PEER = 1,             /* REJECT: dat_cr_reject by the listener's process */
        CM_REASON_NON_PEER = 2,         /* REJECT: no listener, backlog full, listener gone, QoS */
        CM_REASON_WITHDRAWN = 3,        /* DISCONNECT: the active side gave up a request */
        CM_REASON_DISCONNECTED = 4,     /* DISCONNECT: dat_ep_disconnect */
        CM_REASON_BROKEN = 5,           /* DISCONNECT: the process went away */
};

#define CM_TOKEN_SIZE 16

/* The header of every message; the body follows, its size fixed by type. */
struct cm_header {
        uint32_t magic;
        uint16_t version;
        uint16_t type;
        uint32_t length;                /* header + body */
        uint32_t reserved;
};

struct cm_hello {
        struct cm_header hdr;
        uint8_t host_id[16];            /* random per datd run */
        char version[32];               /* datd's version, NUL terminated */
        uint32_t keepalive_ms;          /* the sender's period */
        uint32_t reserved;
};

/* An IP address: family (AF_INET 2 / AF_INET6 10, as on Linux; the only
 * families on the wire) and 16 bytes (IPv4 in the first 4). */
struct cm_addr {
        uint16_t family;
        uint16_t reserved;
        uint8_t addr[16];
};

/* CONNECT_REQ, ACCEPT, REJECT, READY and DISCONNECT share one body. */
struct cm_conn {
        struct cm_header hdr;
        uint32_t src_conn_id;           /* the sender's id of its end */
        uint32_t dst_conn_id;           /* the receiver's id of its end, 0 if not known yet */
        uint32_t reason;                /* enum cm_reason */
        uint32_t pid;                   /* the sender's process, for log lines */
        uint64_t conn_qual;             /* CONNECT_REQ: the listener's */
        uint32_t qos;                   /* CONNECT_REQ: DAT_QOS */
        uint32_t pd_len;
        struct cm_addr src;             /* CONNECT_REQ: the active IA's address */
        struct cm_addr dst;             /* CONNECT_REQ: the address it connected to */
        uint8_t private_data[DATP_PRIVATE_DATA_MAX];
        uint8_t token[CM_TOKEN_SIZE];   /* ACCEPT: names the data connection (random, single use) */
};

/* The only message of a data connection: the active datd connects a new TCP
 * socket to the passive datd's cm_port and sends this instead of HELLO; the
 * passive datd hands the socket, with nothing more read, to the passive
 * end's process if dst_conn_id and token match an end waiting for it, and
 * closes it otherwise. */
struct cm_data {
        struct cm_header hdr;
        uint32_t dst_conn_id;           /* the passive datd's id of its end */
        uint32_t src_conn_id;           /* the active datd's id of its end */
        uint8_t token[CM_TOKEN_SIZE];   /* as the passive datd sent it in ACCEPT */
        uint8_t reserved[8];            /* 0 */
};

#define CM_MAX_MESSAGE sizeof(struct cm_conn)

/* Listens on cm_port (a failure is logged: same-host connections need no
 * link).  Keepalives start with each link. */
int cm_start(Manager *m);
void cm_stop(Manager *m);

/* The link to the datd at this IP (any port), made if there is none:
 * NULL when max_cm_links is reached or the socket cannot be made. */
CmLink *cm_link_get(Manager *m, const struct sockaddr_storage *ip, socklen_t len);

/* Queues a message (host byte order in, converted here) for the link. */
void cm_send_conn(CmLink *l, uint16_t type, const struct cm_conn *body);

/* A data connection to the datd of the link's host (its cm_port): a
 * non-blocking TCP socket, connecting (connect() in progress or done), or
 * -errno.  Its first bytes must be the DATA message cm_data_message() makes. */
int cm_data_socket(const CmLink *l);

/* The DATA message in wire byte order. */
void cm_data_message(struct cm_data *out, uint32_t dst_conn_id, uint32_t src_conn_id,
                     const uint8_t token[CM_TOKEN_SIZE]);

/* Stops reading the link's messages (hold) or resumes (release; holds
 * count).  A passive end whose READY came before its data connection holds
 * its link until the data connection is there: what the peer sent after
 * READY (a DISCONNECT of another connection, made once the active process
 * saw this one ESTABLISHED) must reach the processes after this end's
 * ESTABLISHED, as it was sent.  Keepalives wait too. */
void cm_link_hold(CmLink *l, bool hold);

/* The remote IP of the link, for log lines and ListConnections. */
const struct sockaddr_storage *cm_link_address(const CmLink *l, socklen_t *len);
bool cm_link_is_up(const CmLink *l);
Manager *cm_link_manager(const CmLink *l);
uint32_t cm_n_links(Manager *m);

/* Called by cm.c: a message arrived (host byte order, sizes checked), or
 * the link is gone (every connection over it must go; was_up: the HELLO
 * exchange had completed). */
void conn_cm_receive(CmLink *l, uint16_t type, const struct cm_conn *msg);
void conn_cm_link_lost(CmLink *l, bool was_up);

/* Called by cm.c: an incoming connection's first message was DATA (host
 * byte order).  Returns true when conn.c took fd; false: cm.c closes it. */
bool conn_cm_data(Manager *m, int fd, const struct cm_data *msg);

#endif
