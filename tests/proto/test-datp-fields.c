/* datp_validate(): the field rules of every message (PROTOCOL.md, "Messages").
 * Each test starts from a valid sample, breaks one rule and expects the
 * refusal; where a rule has a boundary, the value just inside is accepted. */
#include "config.h"

#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/proto/datp_samples.h"

#define DAT_ERR(type) (0x80000000u | (type))
#define DAT_PROVIDER_NOT_FOUND_ERR DAT_ERR(0x000a0000u)

/* The message under test and the sample it was built from. */
static union datp_message m;
static const struct datp_sample *s;

static void start(uint16_t type)
{
        s = datp_sample_build_type(type, &m);
}

static void expect(int code)
{
        const char *reason = NULL;
        int r = datp_validate(&m, m.hdr.length, 0, s->dir, s->version, &reason);

        cr_expect_eq(r, code, "%s: got %d (%s), want %d", datp_type_name(s->type), r,
                     reason ? reason : "accepted", code);
        if (r < 0)
                cr_expect_not_null(reason);
}

static struct datp_ia_info *open_reply_info(void)
{
        return &m.ia_open_reply.info;
}

/* Sets the IA address of an IA_OPEN reply: a zeroed storage with family and length. */
static void set_address(sa_family_t family, uint32_t len)
{
        struct datp_ia_info *info = open_reply_info();

        memset(&info->address, 0, sizeof(info->address));
        info->address.ss_family = family;
        info->address_len = len;
}

Test(datp_fields, status_sys_errno_is_0_to_4095)
{
        start(DATP_IA_CLOSE | DATP_REPLY);
        m.ia_close_reply.status.dat_status = DAT_PROVIDER_NOT_FOUND_ERR;
        m.ia_close_reply.status.sys_errno = 4095;
        expect(DATP_OK);
        m.ia_close_reply.status.sys_errno = 4096;
        expect(-DATP_E_FIELD);
        m.ia_close_reply.status.sys_errno = -1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, status_success_carries_no_errno)
{
        start(DATP_IA_CLOSE | DATP_REPLY);
        m.ia_close_reply.status.sys_errno = 5;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, status_failure_has_error_class_and_a_type)
{
        start(DATP_IA_CLOSE | DATP_REPLY);
        m.ia_close_reply.status.dat_status = DAT_PROVIDER_NOT_FOUND_ERR | 0x12;
        expect(DATP_OK);
        m.ia_close_reply.status.dat_status = 0x000a0000u; /* type without DAT_CLASS_ERROR */
        expect(-DATP_E_FIELD);
        m.ia_close_reply.status.dat_status = 0x400a0000u; /* DAT_CLASS_WARNING */
        expect(-DATP_E_FIELD);
        m.ia_close_reply.status.dat_status = 0xc00a0000u; /* both class bits */
        expect(-DATP_E_FIELD);
        m.ia_close_reply.status.dat_status = DAT_ERR(0x7); /* class without a type */
        expect(-DATP_E_FIELD);
}

Test(datp_fields, hello_flags_are_zero)
{
        start(DATP_HELLO);
        m.hello.flags = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, hello_min_version_is_nonzero_and_at_most_max)
{
        start(DATP_HELLO);
        m.hello.min_version = 0;
        expect(-DATP_E_FIELD);
        m.hello.min_version = m.hello.max_version + 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, hello_header_version_is_max_version)
{
        start(DATP_HELLO);
        m.hello.max_version = DATP_VERSION_MAX + 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, hello_reply_version_matches_its_header)
{
        start(DATP_HELLO | DATP_REPLY);
        m.hello_reply.version = m.hdr.version + 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, hello_reply_reserved_is_zero)
{
        start(DATP_HELLO | DATP_REPLY);
        m.hello_reply.reserved = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, hello_reply_max_message_is_at_least_datp_max_message)
{
        start(DATP_HELLO | DATP_REPLY);
        m.hello_reply.max_message = DATP_MAX_MESSAGE - 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, hello_reply_daemon_version_is_terminated)
{
        start(DATP_HELLO | DATP_REPLY);
        memset(m.hello_reply.daemon_version, 'v', sizeof(m.hello_reply.daemon_version));
        expect(-DATP_E_FIELD);
}

Test(datp_fields, hello_reply_status_is_checked)
{
        start(DATP_HELLO | DATP_REPLY);
        m.hello_reply.status.sys_errno = -1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_open_name_is_terminated)
{
        start(DATP_IA_OPEN);
        memset(m.ia_open.ia_name, 'a', sizeof(m.ia_open.ia_name));
        expect(-DATP_E_FIELD);
        m.ia_open.ia_name[sizeof(m.ia_open.ia_name) - 1] = '\0';
        expect(DATP_OK);
}

Test(datp_fields, ia_open_name_is_not_empty)
{
        start(DATP_IA_OPEN);
        memset(m.ia_open.ia_name, 0, sizeof(m.ia_open.ia_name));
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_open_flags_are_zero)
{
        start(DATP_IA_OPEN);
        m.ia_open.flags = 0x80000000u;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_open_reserved_is_zero)
{
        start(DATP_IA_OPEN);
        m.ia_open.reserved = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_open_reply_reserved_is_zero)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        m.ia_open_reply.reserved = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, failed_ia_open_reply_carries_no_ia)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        m.ia_open_reply.status.dat_status = DAT_PROVIDER_NOT_FOUND_ERR;
        expect(-DATP_E_FIELD);
        memset(&m.ia_open_reply.info, 0, sizeof(m.ia_open_reply.info));
        expect(-DATP_E_FIELD); /* ia_id still set */
        m.ia_open_reply.ia_id = 0;
        expect(DATP_OK);
}

Test(datp_fields, failed_ia_query_reply_carries_no_ia)
{
        start(DATP_IA_QUERY | DATP_REPLY);
        m.ia_query_reply.status.dat_status = DAT_ERR(0x00050000u); /* DAT_INVALID_HANDLE */
        expect(-DATP_E_FIELD);
        memset(&m.ia_query_reply.info, 0, sizeof(m.ia_query_reply.info));
        expect(DATP_OK);
}

Test(datp_fields, ia_info_name_is_nonempty_and_terminated)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        open_reply_info()->name[0] = '\0';
        expect(-DATP_E_FIELD);
        memset(open_reply_info()->name, 'n', sizeof(open_reply_info()->name));
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_info_transport_is_shm_tcp_or_verbs)
{
        static const char *const good[] = { "shm", "tcp", "verbs" };
        static const char *const bad[] = { "", "rdma", "tcp6", "sh" };
        struct datp_ia_info *info;

        start(DATP_IA_OPEN | DATP_REPLY);
        info = open_reply_info();
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                datp_set_string(info->transport, sizeof(info->transport), good[i]);
                expect(DATP_OK);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                datp_set_string(info->transport, sizeof(info->transport), bad[i]);
                expect(-DATP_E_FIELD);
        }
        memset(info->transport, 't', sizeof(info->transport));
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_info_adapter_name_is_terminated)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        memset(open_reply_info()->adapter_name, 'a', DATP_NAME_MAX);
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_info_vendor_name_is_terminated)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        memset(open_reply_info()->vendor_name, 'v', DATP_NAME_MAX);
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_info_max_private_data_is_at_least_64)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        open_reply_info()->max_private_data = 64;
        expect(DATP_OK);
        open_reply_info()->max_private_data = 63;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_info_reserved_is_zero)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        open_reply_info()->reserved = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_info_rules_apply_to_query_replies)
{
        start(DATP_IA_QUERY | DATP_REPLY);
        datp_set_string(m.ia_query_reply.info.transport, DATP_TRANSPORT_MAX, "ib");
        expect(-DATP_E_FIELD);
}

Test(datp_fields, address_len_is_at_most_sockaddr_storage)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        set_address(AF_UNIX, sizeof(struct sockaddr_storage) + 1);
        expect(-DATP_E_FIELD);
        set_address(AF_INET, UINT32_MAX);
        expect(-DATP_E_FIELD);
}

Test(datp_fields, address_bytes_past_address_len_are_zero)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        ((unsigned char *) &open_reply_info()->address)[sizeof(struct sockaddr_in)] = 1;
        expect(-DATP_E_FIELD);
        set_address(AF_INET6, sizeof(struct sockaddr_in6));
        ((unsigned char *) &open_reply_info()->address)[sizeof(struct sockaddr_storage) - 1] = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, no_address_is_af_unspec_with_length_zero)
{
        start(DATP_IA_OPEN | DATP_REPLY);
        set_address(AF_UNSPEC, 0);
        expect(DATP_OK);
        set_address(AF_UNSPEC, sizeof(sa_family_t));
        expect(-DATP_E_FIELD);
        set_address(AF_INET, 0); /* a family but no length */
        expect(-DATP_E_FIELD);
}

Test(datp_fields, address_len_fits_its_family)
{
        static const struct {
                sa_family_t family;
                uint32_t len;
                int code;
        } cases[] = {
                { AF_INET, sizeof(struct sockaddr_in), DATP_OK },
                { AF_INET, sizeof(struct sockaddr_in) - 1, -DATP_E_FIELD },
                { AF_INET, sizeof(struct sockaddr_in) + 1, -DATP_E_FIELD },
                { AF_INET6, sizeof(struct sockaddr_in6), DATP_OK },
                { AF_INET6, sizeof(struct sockaddr_in6) - 1, -DATP_E_FIELD },
                { AF_INET6, sizeof(struct sockaddr_in), -DATP_E_FIELD },
                /* AF_UNIX: at least one byte of path, at most sockaddr_un */
                { AF_UNIX, offsetof(struct sockaddr_un, sun_path) + 1, DATP_OK },
                { AF_UNIX, sizeof(struct sockaddr_un), DATP_OK },
                { AF_UNIX, offsetof(struct sockaddr_un, sun_path), -DATP_E_FIELD },
                { AF_UNIX, sizeof(struct sockaddr_un) + 1, -DATP_E_FIELD },
                /* no other family */
                { AF_PACKET, 20, -DATP_E_FIELD },
                { AF_NETLINK, 12, -DATP_E_FIELD },
        };

        start(DATP_IA_OPEN | DATP_REPLY);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                set_address(cases[i].family, cases[i].len);
                cr_expect_eq(datp_sample_validate(s, &m), cases[i].code, "family %d, length %u",
                             cases[i].family, cases[i].len);
        }
}

Test(datp_fields, ia_close_flags_are_abrupt_or_graceful)
{
        start(DATP_IA_CLOSE);
        m.ia_close.flags = DATP_CLOSE_ABRUPT;
        expect(DATP_OK);
        m.ia_close.flags = DATP_CLOSE_GRACEFUL;
        expect(DATP_OK);
        m.ia_close.flags = 2;
        expect(-DATP_E_FIELD);
        m.ia_close.flags = UINT32_MAX;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_close_reply_status_is_checked)
{
        start(DATP_IA_CLOSE | DATP_REPLY);
        m.ia_close_reply.status.dat_status = 0x00050000u;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, ia_query_reserved_is_zero)
{
        start(DATP_IA_QUERY);
        m.ia_query.reserved = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, error_status_is_a_failure)
{
        start(DATP_ERROR);
        m.error.status.dat_status = 0;
        m.error.status.sys_errno = 0;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, error_fatal_is_0_or_1)
{
        start(DATP_ERROR);
        m.error.fatal = 1;
        expect(DATP_OK);
        m.error.fatal = 2;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, error_code_is_a_decode_error)
{
        start(DATP_ERROR);
        m.error.code = DATP_E_STATE;
        expect(DATP_OK);
        m.error.code = DATP_E_SHORT;
        expect(DATP_OK);
        m.error.code = DATP_OK;
        expect(-DATP_E_FIELD);
        m.error.code = DATP_E_STATE + 1;
        expect(-DATP_E_FIELD);
        m.error.code = -DATP_E_TYPE; /* the wire carries the positive code */
        expect(-DATP_E_FIELD);
}

Test(datp_fields, error_reason_is_terminated)
{
        start(DATP_ERROR);
        memset(m.error.reason, 'r', sizeof(m.error.reason));
        expect(-DATP_E_FIELD);
}
