/* A client of datd's protocol over a raw SOCK_SEQPACKET socket, for tests.
 * Every wait is bounded, and failures are returned (-errno, -ETIMEDOUT),
 * never asserted, so that forked children can use it too.  Every reply is
 * checked with datp_validate() as libdat would. */
#ifndef DATD_TESTS_DAEMON_RAW_CLIENT_H
#define DATD_TESTS_DAEMON_RAW_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/datp.h"

#define RAW_TIMEOUT_MS 5000

/* The version raw_connect_hello offers as its highest, and so negotiates
 * with a datd of this build: what every later message must carry.
 * DATP_VERSION_MAX unless a test sets it (around cc_open, which keeps the
 * version for its client). */
extern uint16_t raw_version;
#define RAW_VERSION raw_version

int raw_connect(const char *socket_path);

/* Sends len bytes of buf as one packet, optionally with one descriptor. */
int raw_send(int fd, const void *buf, size_t len);
int raw_send_with_fd(int fd, const void *buf, size_t len, int passfd);

/* One packet: its length, 0 at end of stream, -ETIMEDOUT. */
ssize_t raw_recv(int fd, union datp_message *msg, int timeout_ms);

/* Reads (and discards) until end of stream: 0, or -ETIMEDOUT. */
int raw_wait_eof(int fd, int timeout_ms);

/* Receives one packet that must be a valid DATP_ERROR. */
int raw_expect_error(int fd, struct datp_error *e);

/* Requests built with version 1 and a fresh request_id. */
void raw_hello_init(struct datp_hello *h, uint16_t min_version, uint16_t max_version);
void raw_ia_open_init(struct datp_ia_open *o, const char *name);
void raw_ia_query_init(struct datp_ia_query *q, uint32_t ia_id);
void raw_ia_close_init(struct datp_ia_close *c, uint32_t ia_id, uint32_t flags);

/* Round trips: 0 with the reply of the request's type (and its request_id),
 * -EPROTO if datd answered with DATP_ERROR, other -errno on failure. */
int raw_hello(int fd);
int raw_ia_open(int fd, const char *name, struct datp_ia_open_reply *reply);
int raw_ia_query(int fd, uint32_t ia_id, struct datp_ia_query_reply *reply);
int raw_ia_close(int fd, uint32_t ia_id, uint32_t flags, struct datp_ia_close_reply *reply);

/* OBJ_CREATE / OBJ_UPDATE / OBJ_DESTROY round trips, same rules. */
int raw_obj_create(int fd, uint32_t ia_id, const struct datp_obj_desc *desc,
                   struct datp_obj_create_reply *reply);
int raw_obj_update(int fd, uint32_t ia_id, uint32_t obj_id, const struct datp_obj_desc *desc,
                   struct datp_obj_update_reply *reply);
int raw_obj_destroy(int fd, uint32_t ia_id, uint32_t obj_id, struct datp_obj_destroy_reply *reply);
/* OBJ_DESTROY naming the object by obj_id, or (obj_id 0) the EP by handle. */
int raw_obj_destroy_named(int fd, uint32_t ia_id, uint32_t obj_id, uint64_t ep_handle,
                          struct datp_obj_destroy_reply *reply);

/* A valid description of an object of kind with this handle: EPs
 * UNCONNECTED with small limits, LMRs of length bytes (ignored for other
 * kinds), and a PZ handle where the kind takes one. */
void raw_obj_desc(struct datp_obj_desc *d, uint32_t kind, uint64_t handle, uint64_t length);

/* raw_connect() + raw_hello(): the fd, or -errno. */
int raw_connect_hello(const char *socket_path);

#endif
