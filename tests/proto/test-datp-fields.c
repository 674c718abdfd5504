/* datp_validate(): the field rules of every message (PROTOCOL.md, "Messages").
 * Each test starts from a valid sample, breaks one rule and expects the
 * refusal; where a rule has a boundary, the value just inside is accepted. */
#include "config.h"

#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/proto/datp-expect.h"

#define DAT_ERR(type) (0x80000000u | (type))
#define DAT_PROVIDER_NOT_FOUND_ERR DAT_ERR(0x000a0000u)

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

/* ---- objects (PROTOCOL.md, "Object description") ---------------------------- */

#define KIND_BIT(k) (1u << (k))

static struct datp_obj_desc *create_desc(void)
{
        return &m.obj_create.desc;
}

/* An OBJ_CREATE of a valid object of this kind. */
static void start_create(uint32_t kind)
{
        start(DATP_OBJ_CREATE);
        datp_sample_obj_desc(kind, create_desc());
}

/* The rule "a field is 0 for the kinds it does not apply to": for every
 * kind, a non-zero value (1, in every field's range) is accepted exactly
 * when the kind is in kinds. */
static void expect_field_applies_to(size_t offset, size_t size, uint32_t kinds)
{
        for (uint32_t kind = 1; kind <= DATP_OBJ_KIND_MAX; kind++) {
                int want = (kinds & KIND_BIT(kind)) ? DATP_OK : -DATP_E_FIELD;
                unsigned char *field;

                start_create(kind);
                field = (unsigned char *) create_desc() + offset;
                memset(field, 0, size);
                field[0] = 1;
                cr_expect_eq(datp_sample_validate(s, &m), want, "kind %u, field at offset %zu", kind,
                             offset);
        }
}

#define EXPECT_FIELD_APPLIES_TO(field, kinds) \
        expect_field_applies_to(offsetof(struct datp_obj_desc, field), \
                                sizeof(((struct datp_obj_desc *) NULL)->field), (kinds))

Test(datp_fields, obj_create_of_every_kind_is_accepted)
{
        for (uint32_t kind = 1; kind <= DATP_OBJ_KIND_MAX; kind++) {
                start_create(kind);
                expect(DATP_OK);
        }
}

Test(datp_fields, obj_kind_is_1_to_kind_max)
{
        start_create(DATP_OBJ_PZ);
        create_desc()->kind = 0;
        expect(-DATP_E_FIELD);
        create_desc()->kind = DATP_OBJ_KIND_MAX + 1;
        expect(-DATP_E_FIELD);
        create_desc()->kind = UINT32_MAX;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, obj_handle_is_not_zero)
{
        for (uint32_t kind = 1; kind <= DATP_OBJ_KIND_MAX; kind++) {
                start_create(kind);
                create_desc()->handle = 0;
                expect(-DATP_E_FIELD);
        }
}

Test(datp_fields, obj_create_reserved_is_zero)
{
        start(DATP_OBJ_CREATE);
        m.obj_create.reserved = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, obj_state_applies_to_ep_and_srq_only)
{
        EXPECT_FIELD_APPLIES_TO(state, KIND_BIT(DATP_OBJ_EP) | KIND_BIT(DATP_OBJ_SRQ));
}

Test(datp_fields, obj_ep_state_is_a_dat_ep_state)
{
        start_create(DATP_OBJ_EP);
        create_desc()->state = DATP_EP_STATE_MAX;
        expect(DATP_OK);
        create_desc()->state = DATP_EP_STATE_MAX + 1;
        expect(-DATP_E_FIELD);
        create_desc()->state = UINT32_MAX;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, obj_srq_state_is_a_dat_srq_state)
{
        start_create(DATP_OBJ_SRQ);
        create_desc()->state = DATP_SRQ_STATE_MAX;
        expect(DATP_OK);
        create_desc()->state = DATP_SRQ_STATE_MAX + 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, obj_pz_handle_applies_to_lmr_rmr_ep_and_srq_only)
{
        EXPECT_FIELD_APPLIES_TO(pz_handle, KIND_BIT(DATP_OBJ_LMR) | KIND_BIT(DATP_OBJ_RMR) |
                                           KIND_BIT(DATP_OBJ_EP) | KIND_BIT(DATP_OBJ_SRQ));
}

Test(datp_fields, obj_lmr_rmr_and_srq_need_a_pz)
{
        static const uint32_t kinds[] = { DATP_OBJ_LMR, DATP_OBJ_RMR, DATP_OBJ_SRQ };

        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                start_create(kinds[i]);
                create_desc()->pz_handle = 0;
                expect(-DATP_E_FIELD);
        }
}

Test(datp_fields, obj_ep_may_have_no_pz)
{
        start_create(DATP_OBJ_EP);
        create_desc()->pz_handle = 0;
        expect(DATP_OK);
}

Test(datp_fields, obj_length_applies_to_lmr_only)
{
        EXPECT_FIELD_APPLIES_TO(length, KIND_BIT(DATP_OBJ_LMR));
}

Test(datp_fields, obj_qlen_applies_to_evd_and_srq_only)
{
        EXPECT_FIELD_APPLIES_TO(qlen, KIND_BIT(DATP_OBJ_EVD) | KIND_BIT(DATP_OBJ_SRQ));
}

Test(datp_fields, obj_dto_limits_apply_to_ep_only)
{
        EXPECT_FIELD_APPLIES_TO(max_recv_dtos, KIND_BIT(DATP_OBJ_EP));
        EXPECT_FIELD_APPLIES_TO(max_request_dtos, KIND_BIT(DATP_OBJ_EP));
        EXPECT_FIELD_APPLIES_TO(max_request_iov, KIND_BIT(DATP_OBJ_EP));
        EXPECT_FIELD_APPLIES_TO(max_message_size, KIND_BIT(DATP_OBJ_EP));
}

Test(datp_fields, obj_max_recv_iov_applies_to_ep_and_srq_only)
{
        EXPECT_FIELD_APPLIES_TO(max_recv_iov, KIND_BIT(DATP_OBJ_EP) | KIND_BIT(DATP_OBJ_SRQ));
}

Test(datp_fields, obj_evd_and_srq_handles_apply_to_ep_only)
{
        EXPECT_FIELD_APPLIES_TO(recv_evd_handle, KIND_BIT(DATP_OBJ_EP));
        EXPECT_FIELD_APPLIES_TO(request_evd_handle, KIND_BIT(DATP_OBJ_EP));
        EXPECT_FIELD_APPLIES_TO(connect_evd_handle, KIND_BIT(DATP_OBJ_EP));
        EXPECT_FIELD_APPLIES_TO(srq_handle, KIND_BIT(DATP_OBJ_EP));
}

Test(datp_fields, obj_every_kind_may_leave_its_optional_fields_zero)
{
        /* Only kind, handle and (LMR, RMR, SRQ) pz_handle are required. */
        for (uint32_t kind = 1; kind <= DATP_OBJ_KIND_MAX; kind++) {
                struct datp_obj_desc *d;

                start_create(kind);
                d = create_desc();
                *d = (struct datp_obj_desc) { .kind = kind, .handle = d->handle,
                                              .pz_handle = d->pz_handle };
                expect(DATP_OK);
        }
}

Test(datp_fields, obj_update_desc_follows_the_same_rules)
{
        start(DATP_OBJ_UPDATE);
        m.obj_update.desc.length = 1; /* an EP has no length */
        expect(-DATP_E_FIELD);
        datp_sample_obj_desc(DATP_OBJ_LMR, &m.obj_update.desc);
        expect(DATP_OK);
        m.obj_update.desc.handle = 0;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, obj_destroy_takes_any_ids)
{
        start(DATP_OBJ_DESTROY);
        m.obj_destroy.ia_id = 0;
        m.obj_destroy.obj_id = 0;
        expect(DATP_OK);
        m.obj_destroy.ia_id = UINT32_MAX;
        m.obj_destroy.obj_id = UINT32_MAX;
        expect(DATP_OK);
}

Test(datp_fields, obj_destroy_names_an_object_by_id_or_an_ep_by_handle_not_both)
{
        start(DATP_OBJ_DESTROY);
        m.obj_destroy.obj_id = 0;
        m.obj_destroy.ep_handle = UINT64_MAX;
        expect(DATP_OK);
        m.obj_destroy.obj_id = 9;
        expect(-DATP_E_FIELD);
        m.obj_destroy.ep_handle = 0;
        expect(DATP_OK);
}

Test(datp_fields, obj_create_reply_has_an_obj_id_exactly_on_success)
{
        start(DATP_OBJ_CREATE | DATP_REPLY);
        m.obj_create_reply.obj_id = 0;
        expect(-DATP_E_FIELD);
        m.obj_create_reply.status.dat_status = DAT_ERR(0x00030000u); /* DAT_INSUFFICIENT_RESOURCES */
        expect(DATP_OK);
        m.obj_create_reply.obj_id = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, obj_create_reply_reserved_is_zero)
{
        start(DATP_OBJ_CREATE | DATP_REPLY);
        m.obj_create_reply.reserved = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_fields, obj_replies_check_their_status)
{
        static const uint16_t replies[] = {
                DATP_OBJ_CREATE | DATP_REPLY, DATP_OBJ_UPDATE | DATP_REPLY,
                DATP_OBJ_DESTROY | DATP_REPLY,
        };

        for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
                start(replies[i]);
                /* Every reply's status is at offset 16. */
                m.obj_update_reply.status.sys_errno = -1;
                expect(-DATP_E_FIELD);
        }
}
