/* A control connection to datd: one AF_UNIX SOCK_SEQPACKET socket per IA
 * handle, opened with HELLO, then synchronous request/reply round trips.
 * (The per-IA progress thread that will also read datd's unsolicited
 * messages takes over the receiving side when it exists.) */
#ifndef DATD_LIBDAT_DATD_CONN_H
#define DATD_LIBDAT_DATD_CONN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libdat/libdat.h"
#include "proto/datp.h"

/* datd's socket when $DATD_SOCKET is unset: <runtime dir>/datd.sock, where
 * datd's runtime directory is RUNSTATEDIR "/datd" as datd and datctl use it.
 * The build passes RUNSTATEDIR from configure's --with-rundir, which is /run
 * whatever the prefix (a prefix-derived $(runstatedir) would be
 * /usr/local/var/run by default, where no system's datd listens).  A build
 * may also pass -DDATD_DEFAULT_SOCKET=... outright. */
#ifndef DATD_DEFAULT_SOCKET
#ifdef RUNSTATEDIR
#define DATD_DEFAULT_SOCKET RUNSTATEDIR "/datd/datd.sock"
#else
#define DATD_DEFAULT_SOCKET "/run/datd/datd.sock"
#endif
#endif

/* How long a round trip to datd may take before the call fails. */
#define DATD_REPLY_TIMEOUT_MS 10000

/* Room for a human-readable reason, for the debug trace. */
#define DATD_REASON_MAX 256

struct datd_conn {
        int fd;
        uint16_t version;               /* negotiated by HELLO */
        uint32_t next_request_id;
        char socket_path[108];
        char daemon_version[DATP_VERSION_STR_MAX];
        pthread_mutex_t lock;           /* one round trip at a time */
        bool initialized;               /* lock is initialised */
};

/* $DATD_SOCKET if set and non-empty, else DATD_DEFAULT_SOCKET. */
const char *datd_socket_path(void);

/* Connects to datd and says HELLO.  On failure returns the DAT code (see
 * dat_ia_openv in ia.c for the choice) with the reason in why. */
DAT_RETURN datd_conn_open(struct datd_conn *conn, char why[DATD_REASON_MAX]);

/* Sends request (whose header's type and length are set, the rest is filled
 * here) and waits for the matching reply into *reply.  A reply is checked by
 * datp_validate() and must be of type request|DATP_REPLY.  Returns
 * DAT_SUCCESS or DAT_INTERNAL_ERROR with the reason in why; the reply's own
 * datp_status is left to the caller. */
DAT_RETURN datd_conn_call(struct datd_conn *conn, struct datp_header *request,
                          union datp_message *reply, char why[DATD_REASON_MAX]);

/* Closes the socket (datd then drops whatever this connection still owned).
 * Accepts a connection that never opened (fd < 0). */
void datd_conn_close(struct datd_conn *conn);

#endif
