/* datp_validate(): framing, type, direction, size, descriptors, version and
 * state rules (PROTOCOL.md, "Decode errors").  The per-field rules of each
 * message are in test-datp-fields.c. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <string.h>

#include "tests/proto/datp_samples.h"

/* The "other" side: the direction a sample is never received on. */
static enum datp_direction other_side(enum datp_direction dir)
{
        return dir == DATP_TO_DAEMON ? DATP_TO_CLIENT : DATP_TO_DAEMON;
}

/* How every sample is received in the tests that go through all of them. */
struct reception {
        bool wrong_side;      /* by the side that only sends it */
        unsigned nfds;        /* with this many descriptors */
        bool foreign_version; /* negotiated and in the header: one this side does not speak */
};

static void expect_every_sample(struct reception how, int code)
{
        for (size_t i = 0; i < datp_n_samples; i++) {
                const struct datp_sample *s = &datp_samples[i];
                union datp_message m;
                const char *reason = NULL;
                size_t len = datp_sample_build(s, &m);
                enum datp_direction dir = how.wrong_side ? other_side(s->dir) : s->dir;
                uint16_t version = s->version;
                int r;

                if (how.foreign_version)
                        version = m.hdr.version = DATP_VERSION_MAX + 1;
                r = datp_validate(&m, len, how.nfds, dir, version, &reason);
                cr_expect_eq(r, code, "%s: got %d (%s)", datp_type_name(s->type), r,
                             reason ? reason : "accepted");
        }
}

Test(datp_validate, every_type_round_trips)
{
        expect_every_sample((struct reception) { 0 }, DATP_OK);
}

Test(datp_validate, error_is_accepted_before_hello_with_any_version)
{
        union datp_message m;
        const struct datp_sample *s = datp_sample_build_type(DATP_ERROR, &m);

        /* A newer daemon refusing us writes its own version in the header. */
        m.hdr.version = DATP_VERSION_MAX + 5;
        cr_expect_eq(datp_validate(&m, m.hdr.length, 0, s->dir, 0, NULL), DATP_OK);
}

Test(datp_validate, unaligned_buffer_validates_like_an_aligned_one)
{
        static unsigned char raw[DATP_MAX_MESSAGE + 1];

        for (size_t i = 0; i < datp_n_samples; i++) {
                const struct datp_sample *s = &datp_samples[i];
                union datp_message m;
                size_t len = datp_sample_build(s, &m);

                memcpy(raw + 1, &m, len);
                cr_expect_eq(datp_validate(raw + 1, len, 0, s->dir, s->version, NULL), DATP_OK,
                             "%s refused when unaligned", datp_type_name(s->type));
                raw[1 + 4] ^= 0xff; /* version: now refused there as well */
                cr_expect_lt(datp_validate(raw + 1, len, 0, s->dir, s->version, NULL), 0);
        }
}

Test(datp_validate, shorter_than_a_header_is_short)
{
        union datp_message m;
        const char *reason = NULL;

        datp_sample_build_type(DATP_IA_CLOSE, &m);
        for (size_t len = 0; len < sizeof(struct datp_header); len++)
                cr_expect_eq(datp_validate(&m, len, 0, DATP_TO_DAEMON, 1, &reason), -DATP_E_SHORT,
                             "len %zu", len);
        cr_expect_not_null(reason);
}

Test(datp_validate, longer_than_max_message_is_oversize)
{
        /* The length datp_recv() reports for a too-big packet; nothing past
         * the buffer may be read. */
        union datp_message m;

        datp_sample_build_type(DATP_IA_CLOSE, &m);
        m.hdr.length = DATP_MAX_MESSAGE + 1;
        cr_expect_eq(datp_validate(&m, DATP_MAX_MESSAGE + 1, 0, DATP_TO_DAEMON, 1, NULL),
                     -DATP_E_OVERSIZE);
        cr_expect_eq(datp_validate(&m, SIZE_MAX, 0, DATP_TO_DAEMON, 1, NULL), -DATP_E_OVERSIZE);
}

Test(datp_validate, wrong_magic_is_refused)
{
        union datp_message m;
        const struct datp_sample *s = datp_sample_build_type(DATP_IA_OPEN, &m);

        m.hdr.magic = __builtin_bswap32(DATP_MAGIC);
        cr_expect_eq(datp_sample_validate(s, &m), -DATP_E_MAGIC);
}

Test(datp_validate, header_length_must_equal_bytes_received)
{
        union datp_message m;
        const struct datp_sample *s = datp_sample_build_type(DATP_IA_OPEN, &m);
        size_t len = m.hdr.length;

        cr_expect_eq(datp_validate(&m, len - 1, 0, s->dir, s->version, NULL), -DATP_E_LENGTH);
        cr_expect_eq(datp_validate(&m, len + 1, 0, s->dir, s->version, NULL), -DATP_E_LENGTH);
}

Test(datp_validate, unknown_type_is_refused)
{
        static const uint16_t unknown[] = {
                0, DATP_CHANNEL_RELEASE + 1, DATP_EV_CHANNEL_DROP + 1, 0x7ffe, DATP_REPLY,
                DATP_REPLY | (DATP_CHANNEL_RELEASE + 1), DATP_REPLY | DATP_EV_CONN,
                DATP_REPLY | DATP_EV_DATA_CHANNEL, DATP_REPLY | DATP_EV_CHANNEL_DROP,
                DATP_ERROR | DATP_REPLY,
        };
        union datp_message m;

        datp_sample_build_type(DATP_IA_QUERY, &m);
        for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
                m.hdr.type = unknown[i];
                cr_expect_eq(datp_validate(&m, m.hdr.length, 0, DATP_TO_DAEMON, 1, NULL), -DATP_E_TYPE,
                             "type %#x", unknown[i]);
                cr_expect_eq(datp_validate(&m, m.hdr.length, 0, DATP_TO_CLIENT, 1, NULL), -DATP_E_TYPE,
                             "type %#x", unknown[i]);
        }
}

/* Section 12: a peer that negotiated an older version gets that version's
 * messages, and a type added later is no type of it. */
Test(datp_validate, a_type_is_unknown_in_the_versions_before_its_own)
{
        size_t later = 0;

        for (size_t i = 0; i < datp_n_samples; i++) {
                const struct datp_sample *s = &datp_samples[i];
                union datp_message m;

                if (s->version <= DATP_VERSION_MIN)
                        continue;
                later++;
                for (uint16_t version = DATP_VERSION_MIN; version < s->version; version++) {
                        datp_sample_build(s, &m);
                        m.hdr.version = version;
                        cr_expect_eq(datp_validate(&m, m.hdr.length, 0, s->dir, version, NULL),
                                     -DATP_E_TYPE, "%s in version %u", datp_type_name(s->type),
                                     version);
                }
        }
        /* CHANNEL_RELEASE, its reply and EV_CHANNEL_DROP (version 4). */
        cr_expect_geq(later, 3);
}

Test(datp_validate, every_type_is_refused_the_wrong_way)
{
        expect_every_sample((struct reception) { .wrong_side = true }, -DATP_E_DIRECTION);
}

Test(datp_validate, every_type_refuses_one_byte_short_and_one_byte_long)
{
        for (size_t i = 0; i < datp_n_samples; i++) {
                const struct datp_sample *s = &datp_samples[i];
                union datp_message m;
                size_t len = datp_sample_build(s, &m);

                m.hdr.length = len - 1;
                cr_expect_eq(datp_sample_validate(s, &m), -DATP_E_SIZE,
                             "%s one byte short", datp_type_name(s->type));
                m.hdr.length = len + 1;
                cr_expect_eq(datp_sample_validate(s, &m), -DATP_E_SIZE,
                             "%s one byte long", datp_type_name(s->type));
        }
}

Test(datp_validate, every_type_refuses_attached_fds)
{
        expect_every_sample((struct reception) { .nfds = 1 }, -DATP_E_FDS);
}

Test(datp_validate, requests_before_hello_are_refused_as_state)
{
        static const uint16_t requests[] = {
                DATP_IA_OPEN, DATP_IA_CLOSE, DATP_IA_QUERY,
                DATP_OBJ_CREATE, DATP_OBJ_UPDATE, DATP_OBJ_DESTROY,
        };

        for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
                union datp_message m;
                const struct datp_sample *s = datp_sample_build_type(requests[i], &m);

                cr_expect_eq(datp_validate(&m, m.hdr.length, 0, s->dir, 0, NULL), -DATP_E_STATE,
                             "%s before HELLO", datp_type_name(s->type));
        }
}

Test(datp_validate, replies_before_hello_are_refused_as_state)
{
        union datp_message m;
        const struct datp_sample *s = datp_sample_build_type(DATP_IA_OPEN | DATP_REPLY, &m);

        cr_expect_eq(datp_validate(&m, m.hdr.length, 0, s->dir, 0, NULL), -DATP_E_STATE);
}

Test(datp_validate, hello_after_negotiation_is_refused_as_state)
{
        union datp_message m;
        const struct datp_sample *s = datp_sample_build_type(DATP_HELLO, &m);

        /* In the version it carries: any other would be DATP_E_VERSION. */
        cr_expect_eq(datp_validate(&m, m.hdr.length, 0, s->dir, m.hdr.version, NULL),
                     -DATP_E_STATE);
}

Test(datp_validate, hello_reply_after_negotiation_is_refused_as_state)
{
        union datp_message m;
        const struct datp_sample *s = datp_sample_build_type(DATP_HELLO | DATP_REPLY, &m);

        /* In the version it carries: any other would be DATP_E_VERSION. */
        cr_expect_eq(datp_validate(&m, m.hdr.length, 0, s->dir, m.hdr.version, NULL),
                     -DATP_E_STATE);
}

Test(datp_validate, after_hello_header_version_must_be_the_negotiated_one)
{
        for (size_t i = 0; i < datp_n_samples; i++) {
                const struct datp_sample *s = &datp_samples[i];
                union datp_message m;

                if (s->version == 0)
                        continue;
                datp_sample_build(s, &m);
                m.hdr.version = s->version + 1;
                cr_expect_eq(datp_sample_validate(s, &m), -DATP_E_VERSION,
                             "%s", datp_type_name(s->type));
                m.hdr.version = 0;
                cr_expect_eq(datp_sample_validate(s, &m), -DATP_E_VERSION,
                             "%s", datp_type_name(s->type));
        }
}

Test(datp_validate, negotiated_version_unknown_to_this_side_refuses_everything)
{
        expect_every_sample((struct reception) { .foreign_version = true }, -DATP_E_VERSION);
}

Test(datp_validate, before_hello_header_version_zero_is_refused)
{
        static const uint16_t early[] = { DATP_HELLO, DATP_ERROR };

        for (size_t i = 0; i < sizeof(early) / sizeof(early[0]); i++) {
                union datp_message m;
                const struct datp_sample *s = datp_sample_build_type(early[i], &m);

                m.hdr.version = 0;
                cr_expect_eq(datp_validate(&m, m.hdr.length, 0, s->dir, 0, NULL), -DATP_E_VERSION,
                             "%s", datp_type_name(s->type));
        }
}

Test(datp_validate, hello_from_a_newer_client_is_accepted)
{
        union datp_message m;
        const struct datp_sample *s = datp_sample_build_type(DATP_HELLO, &m);

        /* It speaks 1..3 and says so in its header: v1 is still in common. */
        m.hello.max_version = DATP_VERSION_MAX + 2;
        m.hdr.version = m.hello.max_version;
        cr_expect_eq(datp_sample_validate(s, &m), DATP_OK);
}

Test(datp_validate, hello_without_a_common_version_is_refused_as_version)
{
        union datp_message m;
        const struct datp_sample *s = datp_sample_build_type(DATP_HELLO, &m);

        m.hello.min_version = DATP_VERSION_MAX + 1;
        m.hello.max_version = DATP_VERSION_MAX + 2;
        m.hdr.version = m.hello.max_version;
        cr_expect_eq(datp_sample_validate(s, &m), -DATP_E_VERSION);
}

Test(datp_validate, hello_reply_in_a_version_this_side_does_not_speak_is_refused)
{
        union datp_message m;
        const struct datp_sample *s = datp_sample_build_type(DATP_HELLO | DATP_REPLY, &m);

        m.hdr.version = DATP_VERSION_MAX + 1;
        m.hello_reply.version = m.hdr.version;
        cr_expect_eq(datp_sample_validate(s, &m), -DATP_E_VERSION);
}

Test(datp_validate, a_refusal_names_its_reason)
{
        union datp_message m;
        const char *reason = NULL;

        datp_sample_build_type(DATP_IA_OPEN, &m);
        m.ia_open.flags = 1;
        cr_expect_eq(datp_validate(&m, m.hdr.length, 0, DATP_TO_DAEMON, 1, &reason), -DATP_E_FIELD);
        cr_assert_not_null(reason);
        cr_expect_gt(strlen(reason), 0);
}
