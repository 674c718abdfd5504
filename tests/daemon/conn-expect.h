/* Criterion expectations over conn-client.h, shared by the connection tests:
 * each asserts that the step succeeded and returns what it got. */
#ifndef DATD_TESTS_DAEMON_CONN_EXPECT_H
#define DATD_TESTS_DAEMON_CONN_EXPECT_H

#include <stdint.h>
#include <sys/socket.h>

#include "tests/daemon/conn-client.h"

#define EV_MS 5000      /* generous bound for an event that must come */

/* A PSP on qual: its listener_id. */
uint32_t expect_listen(struct cc *c, uint64_t qual);

/* CONNECT to (to, qual): its conn_id. */
uint32_t expect_connect(struct cc *c, const struct sockaddr_storage *to, socklen_t len, uint64_t qual,
                        uint64_t timeout_us, const void *pd, uint32_t pd_len);

/* The next EV_CONN is this event (for this conn_id unless 0); into ev if not NULL. */
void expect_ev_conn(struct cc *c, uint32_t conn_id, uint32_t event, union datp_message *ev);

/* The next EV_CONN_REQUEST (into ev if not NULL): its cr_id. */
uint32_t expect_request(struct cc *c, union datp_message *ev);

/* a listens on qual, b connects to (to, qual), a accepts: both ESTABLISHED. */
void expect_established(struct cc *a, struct cc *b, const struct sockaddr_storage *to, socklen_t len,
                        uint64_t qual, uint32_t *a_conn, uint32_t *b_conn);

/* n bytes of a pattern starting at seed. */
void fill_pattern(uint8_t *pd, size_t n, uint8_t seed);

#endif
