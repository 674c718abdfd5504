/* datp_validate(): the field rules of the connection messages (PROTOCOL.md,
 * "Connections").  Each test starts from a valid sample, breaks one rule and
 * expects the refusal; where a rule has a boundary, the value just inside is
 * accepted. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/proto/datp-expect.h"

#define DAT_CONNECTION_EVENT_ESTABLISHED 0x04001u
#define DAT_CONNECTION_EVENT_PEER_REJECTED 0x04002u
#define DAT_CONNECTION_EVENT_BROKEN 0x04006u
#define DAT_CONNECTION_EVENT_UNREACHABLE 0x04008u

/* The private data of every message that carries some. */
struct pd_field {
        uint16_t type;
        size_t len_offset;
        size_t data_offset;
};

static const struct pd_field pd_fields[] = {
        { DATP_CONNECT, offsetof(struct datp_connect, pd_len),
          offsetof(struct datp_connect, private_data) },
        { DATP_CR_ACCEPT, offsetof(struct datp_cr_accept, pd_len),
          offsetof(struct datp_cr_accept, private_data) },
        { DATP_CR_REJECT, offsetof(struct datp_cr_reject, pd_len),
          offsetof(struct datp_cr_reject, private_data) },
        { DATP_EV_CONN_REQUEST, offsetof(struct datp_ev_conn_request, pd_len),
          offsetof(struct datp_ev_conn_request, private_data) },
        { DATP_EV_CONN, offsetof(struct datp_ev_conn, pd_len),
          offsetof(struct datp_ev_conn, private_data) },
};

static uint32_t *pd_len_of(const struct pd_field *f)
{
        return (uint32_t *) ((unsigned char *) &m + f->len_offset);
}

static uint8_t *pd_of(const struct pd_field *f)
{
        return (uint8_t *) &m + f->data_offset;
}

/* dat_ep_connect(3DAT): private_data_size up to the provider's maximum. */
Test(datp_conn, private_data_up_to_the_maximum_is_accepted)
{
        for (size_t i = 0; i < sizeof(pd_fields) / sizeof(pd_fields[0]); i++) {
                start(pd_fields[i].type);
                *pd_len_of(&pd_fields[i]) = DATP_PRIVATE_DATA_MAX;
                memset(pd_of(&pd_fields[i]), 0xa5, DATP_PRIVATE_DATA_MAX);
                expect(DATP_OK);
                *pd_len_of(&pd_fields[i]) = 0;
                memset(pd_of(&pd_fields[i]), 0, DATP_PRIVATE_DATA_MAX);
                expect(DATP_OK);
        }
}

Test(datp_conn, pd_len_beyond_the_maximum_is_refused)
{
        for (size_t i = 0; i < sizeof(pd_fields) / sizeof(pd_fields[0]); i++) {
                start(pd_fields[i].type);
                *pd_len_of(&pd_fields[i]) = DATP_PRIVATE_DATA_MAX + 1;
                expect(-DATP_E_FIELD);
        }
}

Test(datp_conn, private_data_bytes_past_pd_len_are_zero)
{
        for (size_t i = 0; i < sizeof(pd_fields) / sizeof(pd_fields[0]); i++) {
                start(pd_fields[i].type);
                pd_of(&pd_fields[i])[DATP_PRIVATE_DATA_MAX - 1] = 1;
                expect(-DATP_E_FIELD);
        }
}

Test(datp_conn, listen_kind_is_psp_psp_any_or_rsp)
{
        start(DATP_LISTEN);
        m.listen.kind = 0;
        expect(-DATP_E_FIELD);
        m.listen.kind = DATP_LISTENER_RSP + 1;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, listen_psp_any_names_no_conn_qual)
{
        start(DATP_LISTEN);
        m.listen.kind = DATP_LISTENER_PSP_ANY;
        expect(-DATP_E_FIELD);
        m.listen.conn_qual = 0;
        expect(DATP_OK);
}

Test(datp_conn, listen_psp_flags_are_consumer_or_provider)
{
        start(DATP_LISTEN);
        m.listen.psp_flags = 0;
        expect(DATP_OK);
        m.listen.psp_flags = 2;
        expect(-DATP_E_FIELD);
}

/* dat_rsp_create(3DAT): an RSP is bound to one EP. */
Test(datp_conn, listen_rsp_needs_an_ep_and_no_psp_flags)
{
        start(DATP_LISTEN);
        m.listen.kind = DATP_LISTENER_RSP;
        expect(-DATP_E_FIELD); /* psp_flags set, no EP */
        m.listen.psp_flags = 0;
        expect(-DATP_E_FIELD); /* no EP */
        m.listen.ep_handle = 0x1000;
        expect(DATP_OK);
        m.listen.kind = DATP_LISTENER_PSP;
        expect(-DATP_E_FIELD); /* a PSP has no EP */
}

Test(datp_conn, listen_reserved_is_zero)
{
        start(DATP_LISTEN);
        m.listen.reserved = 1;
        expect(-DATP_E_FIELD);
}

static const uint16_t id_replies[] = {
        DATP_LISTEN | DATP_REPLY, DATP_CONNECT | DATP_REPLY, DATP_CR_ACCEPT | DATP_REPLY,
};

/* The id sits right after the status in every one of them. */
static uint32_t *reply_id(void)
{
        return &m.connect_reply.conn_id;
}

Test(datp_conn, id_replies_carry_an_id_exactly_on_success)
{
        for (size_t i = 0; i < sizeof(id_replies) / sizeof(id_replies[0]); i++) {
                start(id_replies[i]);
                *reply_id() = 0;
                expect(-DATP_E_FIELD);
                start(id_replies[i]);
                m.connect_reply.status.dat_status = 0x80020000u; /* DAT_CONN_QUAL_IN_USE */
                expect(-DATP_E_FIELD);
                *reply_id() = 0;
                if (id_replies[i] == (DATP_LISTEN | DATP_REPLY))
                        m.listen_reply.conn_qual = 0;
                expect(DATP_OK);
        }
}

Test(datp_conn, id_replies_reserved_is_zero)
{
        for (size_t i = 0; i < sizeof(id_replies) / sizeof(id_replies[0]); i++) {
                start(id_replies[i]);
                m.connect_reply.reserved = 1;
                expect(-DATP_E_FIELD);
        }
}

Test(datp_conn, status_replies_check_their_status)
{
        static const uint16_t types[] = {
                DATP_UNLISTEN | DATP_REPLY, DATP_CR_REJECT | DATP_REPLY,
                DATP_CR_HANDOFF | DATP_REPLY, DATP_DISCONNECT | DATP_REPLY,
                DATP_CHANNEL_RELEASE | DATP_REPLY,
        };

        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
                start(types[i]);
                m.disconnect_reply.status.sys_errno = 5;
                expect(-DATP_E_FIELD);
        }
}

Test(datp_conn, connect_flags_are_dup_only)
{
        start(DATP_CONNECT);
        m.connect.flags = 2;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, connect_needs_an_ep)
{
        start(DATP_CONNECT);
        m.connect.ep_handle = 0;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, connect_qos_and_connect_flags_are_known_bits)
{
        start(DATP_CONNECT);
        m.connect.qos = 0x0f;
        expect(DATP_OK);
        m.connect.qos = 0x10;
        expect(-DATP_E_FIELD);
        start(DATP_CONNECT);
        m.connect.connect_flags = 1; /* DAT_CONNECT_MULTIPATH_FLAG */
        expect(DATP_OK);
        m.connect.connect_flags = 2;
        expect(-DATP_E_FIELD);
}

/* dat_ep_connect(3DAT): remote_ia_address is an IP address. */
Test(datp_conn, connect_remote_address_is_ipv4_or_ipv6)
{
        struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };

        start(DATP_CONNECT);
        memset(&m.connect.remote_address, 0, sizeof(m.connect.remote_address));
        memcpy(&m.connect.remote_address, &sin6, sizeof(sin6));
        m.connect.remote_address_len = sizeof(sin6);
        expect(DATP_OK);
        m.connect.remote_address_len = sizeof(struct sockaddr_in);
        expect(-DATP_E_FIELD); /* length wrong for the family (and bytes past it) */
        memset(&m.connect.remote_address, 0, sizeof(m.connect.remote_address));
        m.connect.remote_address.ss_family = AF_UNIX;
        m.connect.remote_address.__ss_padding[0] = 'x';
        m.connect.remote_address_len = offsetof(struct sockaddr_un, sun_path) + 2;
        expect(-DATP_E_FIELD);
        memset(&m.connect.remote_address, 0, sizeof(m.connect.remote_address));
        m.connect.remote_address_len = 0;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, connect_remote_address_bytes_past_its_length_are_zero)
{
        start(DATP_CONNECT);
        ((unsigned char *) &m.connect.remote_address)[sizeof(m.connect.remote_address) - 1] = 1;
        expect(-DATP_E_FIELD);
}

/* dat_ep_dup_connect(3DAT): the remote end is the duplicated connection's. */
Test(datp_conn, dup_connect_names_the_connection_and_no_remote_end)
{
        start(DATP_CONNECT);
        m.connect.flags = DATP_CONNECT_DUP;
        m.connect.dup_of_conn_id = 11;
        expect(-DATP_E_FIELD); /* still names an address */
        memset(&m.connect.remote_address, 0, sizeof(m.connect.remote_address));
        m.connect.remote_address_len = 0;
        expect(-DATP_E_FIELD); /* still names a conn_qual */
        m.connect.remote_conn_qual = 0;
        expect(DATP_OK);
        m.connect.dup_of_conn_id = 0;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, connect_without_dup_has_no_dup_of_conn_id)
{
        start(DATP_CONNECT);
        m.connect.dup_of_conn_id = 11;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, cr_accept_and_reject_reserved_is_zero)
{
        start(DATP_CR_ACCEPT);
        m.cr_accept.reserved = 1;
        expect(-DATP_E_FIELD);
        start(DATP_CR_REJECT);
        m.cr_reject.flags = 2;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, non_peer_cr_reject_carries_no_private_data)
{
        start(DATP_CR_REJECT);
        m.cr_reject.flags = DATP_CR_REJECT_NON_PEER;
        m.cr_reject.pd_len = 0;
        memset(m.cr_reject.private_data, 0, sizeof(m.cr_reject.private_data));
        expect(DATP_OK);
        m.cr_reject.pd_len = 1;
        m.cr_reject.private_data[0] = 7;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, unlisten_and_handoff_take_any_ids)
{
        start(DATP_UNLISTEN);
        m.unlisten.listener_id = 0xffffffffu;
        expect(DATP_OK);
        start(DATP_CR_HANDOFF);
        m.cr_handoff.cr_id = 0;
        m.cr_handoff.conn_qual = UINT64_MAX;
        expect(DATP_OK);
}

/* dat_ep_disconnect(3DAT): DAT_CLOSE_ABRUPT_FLAG or DAT_CLOSE_GRACEFUL_FLAG. */
Test(datp_conn, disconnect_flags_are_abrupt_or_graceful)
{
        start(DATP_DISCONNECT);
        m.disconnect.flags = DATP_CLOSE_ABRUPT;
        expect(DATP_OK);
        m.disconnect.flags = 4;
        expect(-DATP_E_FIELD);
        m.disconnect.flags = DATP_CLOSE_GRACEFUL;
        m.disconnect.reserved = 1;
        expect(-DATP_E_FIELD);
}

/* DATP_DISCONNECT_NO_EVENT: version 2's, with either close flag. */
Test(datp_conn, disconnect_no_event_is_version_2s)
{
        start(DATP_DISCONNECT);
        m.disconnect.flags = DATP_CLOSE_ABRUPT | DATP_DISCONNECT_NO_EVENT;
        expect(-DATP_E_FIELD);
        expect_in_version(2, DATP_OK);
        m.disconnect.flags = DATP_CLOSE_GRACEFUL | DATP_DISCONNECT_NO_EVENT;
        expect_in_version(2, DATP_OK);
        m.disconnect.flags = 2 | 4;
        expect_in_version(2, -DATP_E_FIELD);
}

Test(datp_conn, events_have_request_id_zero)
{
        start(DATP_EV_CONN_REQUEST);
        m.hdr.request_id = 1;
        expect(-DATP_E_FIELD);
        start(DATP_EV_CONN);
        m.hdr.request_id = 1;
        expect(-DATP_E_FIELD);
        start(DATP_EV_CHANNEL_DROP);
        m.hdr.request_id = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, events_go_to_the_client_only)
{
        start(DATP_EV_CONN);
        cr_expect_eq(datp_validate(&m, m.hdr.length, 0, DATP_TO_DAEMON, 1, NULL), -DATP_E_DIRECTION);
        start(DATP_EV_CONN_REQUEST);
        cr_expect_eq(datp_validate(&m, m.hdr.length, 0, DATP_TO_DAEMON, 1, NULL), -DATP_E_DIRECTION);
}

Test(datp_conn, ev_conn_request_has_ids_and_an_address)
{
        start(DATP_EV_CONN_REQUEST);
        m.ev_conn_request.cr_id = 0;
        expect(-DATP_E_FIELD);
        start(DATP_EV_CONN_REQUEST);
        m.ev_conn_request.listener_id = 0;
        expect(-DATP_E_FIELD);
        start(DATP_EV_CONN_REQUEST);
        m.ev_conn_request.reserved = 1;
        expect(-DATP_E_FIELD);
        start(DATP_EV_CONN_REQUEST);
        memset(&m.ev_conn_request.remote_address, 0, sizeof(m.ev_conn_request.remote_address));
        m.ev_conn_request.remote_address_len = 0;
        expect(-DATP_E_FIELD);
}

Test(datp_conn, ev_conn_event_is_a_connection_event)
{
        start(DATP_EV_CONN);
        m.ev_conn.pd_len = 0;
        memset(m.ev_conn.private_data, 0, sizeof(m.ev_conn.private_data));
        m.ev_conn.event = DAT_CONNECTION_EVENT_UNREACHABLE;
        expect(DATP_OK);
        m.ev_conn.event = DAT_CONNECTION_EVENT_UNREACHABLE + 1;
        expect(-DATP_E_FIELD);
        m.ev_conn.event = DAT_CONNECTION_EVENT_ESTABLISHED - 1;
        expect(-DATP_E_FIELD);
        m.ev_conn.event = 0x02001; /* DAT_CONNECTION_REQUEST_EVENT: EV_CONN_REQUEST's */
        expect(-DATP_E_FIELD);
        m.ev_conn.event = DAT_CONNECTION_EVENT_ESTABLISHED;
        m.ev_conn.conn_id = 0;
        expect(-DATP_E_FIELD);
}

/* Only the peer's dat_cr_accept / dat_cr_reject carries private data. */
Test(datp_conn, ev_conn_private_data_only_with_established_or_peer_rejected)
{
        start(DATP_EV_CONN);
        m.ev_conn.event = DAT_CONNECTION_EVENT_PEER_REJECTED;
        expect(DATP_OK);
        m.ev_conn.event = DAT_CONNECTION_EVENT_BROKEN;
        expect(-DATP_E_FIELD);
}

/* Kept channels (version 4): CHANNEL_RELEASE names the channel it gives
 * up; datd answers an ia_id it does not know, so any passes here. */
Test(datp_conn, channel_release_names_a_channel)
{
        start(DATP_CHANNEL_RELEASE);
        m.channel_release.channel_id = 0;
        expect(-DATP_E_FIELD);
        m.channel_release.channel_id = UINT32_MAX;
        expect(DATP_OK);
        m.channel_release.ia_id = 0;
        expect(DATP_OK);
}

/* libdat sends it from the progress thread and waits for nothing. */
Test(datp_conn, channel_release_may_ask_for_no_reply)
{
        start(DATP_CHANNEL_RELEASE);
        m.hdr.request_id = 0;
        expect(DATP_OK);
}

/* Its reply is a status (checked as every status is, above): success, or
 * the ia_id not open. */
Test(datp_conn, channel_release_reply_is_a_status)
{
        start(DATP_CHANNEL_RELEASE | DATP_REPLY);
        m.channel_release_reply.status.dat_status = 0x8005000bu; /* DAT_INVALID_HANDLE_IA */
        m.channel_release_reply.status.sys_errno = EBADF;
        expect(DATP_OK);
}

Test(datp_conn, ev_channel_drop_names_a_channel)
{
        start(DATP_EV_CHANNEL_DROP);
        m.ev_channel_drop.channel_id = 0;
        expect(-DATP_E_FIELD);
        m.ev_channel_drop.channel_id = UINT32_MAX;
        expect(DATP_OK);
}
