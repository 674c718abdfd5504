/* The control connection to datd (datd_conn.h). */
#include "config.h"

#include "libdat/datd_conn.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

const char *datd_socket_path(void)
{
        const char *p = getenv("DATD_SOCKET");

        return p && *p ? p : DATD_DEFAULT_SOCKET;
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Receives the reply to request_id (of type want) before the deadline.
 * Packets for other requests are dropped: until the progress thread
 * exists, nothing else may be waiting for them. */
static DAT_RETURN receive_reply(struct datd_conn *conn, uint16_t want, uint32_t request_id,
                                union datp_message *reply, char why[DATD_REASON_MAX])
{
        long long deadline = now_ms() + DATD_REPLY_TIMEOUT_MS;

        for (;;) {
                struct pollfd p = { .fd = conn->fd, .events = POLLIN };
                long long left = deadline - now_ms();
                const char *reason = NULL;
                unsigned nfds = 0;
                ssize_t n;
                int r;

                if (left <= 0) {
                        snprintf(why, DATD_REASON_MAX, "no reply from datd within %d ms",
                                 DATD_REPLY_TIMEOUT_MS);
                        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
                }
                r = poll(&p, 1, (int)left);
                if (r < 0 && errno != EINTR) {
                        snprintf(why, DATD_REASON_MAX, "poll on datd's socket: %s", strerror(errno));
                        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
                }
                if (r <= 0)
                        continue;
                n = datp_recv(conn->fd, reply, NULL, 0, &nfds);
                if (n <= 0) {
                        snprintf(why, DATD_REASON_MAX, "datd closed the connection%s%s",
                                 n < 0 ? ": " : "", n < 0 ? strerror((int)-n) : "");
                        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
                }
                r = datp_validate(reply, (size_t)n, nfds, DATP_TO_CLIENT, conn->version, &reason);
                if (r < 0) {
                        snprintf(why, DATD_REASON_MAX, "malformed message from datd: %s",
                                 reason ? reason : datp_decode_error_str(r));
                        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
                }
                if (reply->hdr.request_id != request_id && reply->hdr.request_id != 0)
                        continue;
                if (reply->hdr.type == DATP_ERROR) {
                        snprintf(why, DATD_REASON_MAX, "datd refused our %s: %s",
                                 datp_type_name(want & ~DATP_REPLY), reply->error.reason);
                        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
                }
                if (reply->hdr.type != want) {
                        snprintf(why, DATD_REASON_MAX, "datd answered %s with %s",
                                 datp_type_name(want & ~DATP_REPLY), datp_type_name(reply->hdr.type));
                        return DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
                }
                return DAT_SUCCESS;
        }
}

DAT_RETURN datd_conn_call(struct datd_conn *conn, struct datp_header *request,
                          union datp_message *reply, char why[DATD_REASON_MAX])
{
        uint16_t type = request->type;
        uint32_t id;
        DAT_RETURN ret;
        int r;

        pthread_mutex_lock(&conn->lock);
        /* Request ids start at 1: 0 marks an ERROR for an unreadable request. */
        id = ++conn->next_request_id;
        if (id == 0)
                id = ++conn->next_request_id;
        datp_header_init(request, type, conn->version ? conn->version : DATP_VERSION_MAX,
                         request->length, id);
        r = datp_send(conn->fd, request, NULL, 0);
        if (r < 0) {
                snprintf(why, DATD_REASON_MAX, "sending %s to datd: %s", datp_type_name(type),
                         strerror(-r));
                ret = DAT_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        } else {
                ret = receive_reply(conn, type | DATP_REPLY, id, reply, why);
        }
        pthread_mutex_unlock(&conn->lock);
        return ret;
}

static DAT_RETURN say_hello(struct datd_conn *conn, char why[DATD_REASON_MAX])
{
        struct datp_hello hello = {
                .hdr = { .type = DATP_HELLO, .length = sizeof(hello) },
                .min_version = DATP_VERSION_MIN,
                .max_version = DATP_VERSION_MAX,
        };
        union datp_message reply;
        DAT_RETURN ret;

        ret = datd_conn_call(conn, &hello.hdr, &reply, why);
        if (ret != DAT_SUCCESS)
                return ret;
        if (reply.hello_reply.status.dat_status != DAT_SUCCESS) {
                snprintf(why, DATD_REASON_MAX, "datd refused HELLO (status 0x%x, %s)",
                         reply.hello_reply.status.dat_status,
                         strerror(reply.hello_reply.status.sys_errno));
                return dat_err_normalize(reply.hello_reply.status.dat_status);
        }
        conn->version = reply.hello_reply.version;
        snprintf(conn->daemon_version, sizeof(conn->daemon_version), "%s",
                 reply.hello_reply.daemon_version);
        return DAT_SUCCESS;
}

/* Failing to reach datd is DAT_PROVIDER_NOT_FOUND with no subtype: the IA
 * name is registered, but its provider is not there (see ia.c). */
DAT_RETURN datd_conn_open(struct datd_conn *conn, char why[DATD_REASON_MAX])
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = datd_socket_path();
        DAT_RETURN ret;

        memset(conn, 0, sizeof(*conn));
        conn->fd = -1;
        pthread_mutex_init(&conn->lock, NULL);
        conn->initialized = true;
        if (strlen(path) >= sizeof(sa.sun_path) || strlen(path) >= sizeof(conn->socket_path)) {
                snprintf(why, DATD_REASON_MAX, "datd socket path too long: %s", path);
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE);
        }
        strcpy(sa.sun_path, path);
        strcpy(conn->socket_path, path);
        conn->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (conn->fd < 0) {
                snprintf(why, DATD_REASON_MAX, "socket(AF_UNIX, SOCK_SEQPACKET): %s", strerror(errno));
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        if (connect(conn->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                snprintf(why, DATD_REASON_MAX, "cannot connect to datd at %s (%s): %s", path,
                         getenv("DATD_SOCKET") && *getenv("DATD_SOCKET") ? "DATD_SOCKET" : "default",
                         strerror(errno));
                datd_conn_close(conn);
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE);
        }
        ret = say_hello(conn, why);
        if (ret != DAT_SUCCESS) {
                datd_conn_close(conn);
                /* A datd we cannot talk to is as absent as no datd at all. */
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE);
        }
        return DAT_SUCCESS;
}

void datd_conn_close(struct datd_conn *conn)
{
        if (!conn->initialized)
                return;
        if (conn->fd >= 0)
                close(conn->fd);
        conn->fd = -1;
        pthread_mutex_destroy(&conn->lock);
        conn->initialized = false;
}
