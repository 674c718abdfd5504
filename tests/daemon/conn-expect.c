#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

#include <dat2/udat.h>

#include "tests/daemon/conn-expect.h"

uint32_t expect_listen(struct cc *c, uint64_t qual)
{
        uint32_t id = 0;
        long s = cc_listen(c, DATP_LISTENER_PSP, qual, &id, NULL);

        cr_assert_eq(s, DAT_SUCCESS, "LISTEN %lu: 0x%08lx", (unsigned long) qual, s);
        cr_assert_neq(id, 0);
        return id;
}

uint32_t expect_connect(struct cc *c, const struct sockaddr_storage *to, socklen_t len, uint64_t qual,
                        uint64_t timeout_us, const void *pd, uint32_t pd_len)
{
        uint32_t id = 0;
        long s = cc_connect(c, (const struct sockaddr *) to, len, qual, timeout_us, pd, pd_len, &id);

        cr_assert_eq(s, DAT_SUCCESS, "CONNECT: 0x%08lx", s);
        cr_assert_neq(id, 0);
        return id;
}

void expect_ev_conn(struct cc *c, uint32_t conn_id, uint32_t event, union datp_message *ev)
{
        union datp_message m;
        int r;

        if (!ev)
                ev = &m;
        r = cc_event(c, DATP_EV_CONN, ev, EV_MS);
        cr_assert_eq(r, 0, "no EV_CONN (want 0x%x): %s", event, strerror(-r));
        cr_expect_eq(ev->ev_conn.event, event, "EV_CONN 0x%x, want 0x%x", ev->ev_conn.event, event);
        if (conn_id)
                cr_expect_eq(ev->ev_conn.conn_id, conn_id);
}

uint32_t expect_request(struct cc *c, union datp_message *ev)
{
        union datp_message m;
        int r;

        if (!ev)
                ev = &m;
        r = cc_event(c, DATP_EV_CONN_REQUEST, ev, EV_MS);
        cr_assert_eq(r, 0, "no EV_CONN_REQUEST: %s", strerror(-r));
        return ev->ev_conn_request.cr_id;
}

void expect_established(struct cc *a, struct cc *b, const struct sockaddr_storage *to, socklen_t len,
                        uint64_t qual, uint32_t *a_conn, uint32_t *b_conn)
{
        uint32_t cr;

        expect_listen(a, qual);
        *b_conn = expect_connect(b, to, len, qual, UINT64_MAX, NULL, 0);
        cr = expect_request(a, NULL);
        cr_assert_eq(cc_accept(a, cr, NULL, 0, a_conn), DAT_SUCCESS);
        expect_ev_conn(b, *b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
        expect_ev_conn(a, *a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, NULL);
}

void fill_pattern(uint8_t *pd, size_t n, uint8_t seed)
{
        for (size_t i = 0; i < n; i++)
                pd[i] = (uint8_t) (seed + i * 7);
}
