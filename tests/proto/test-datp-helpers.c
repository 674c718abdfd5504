/* The codec's small helpers, and the fuzz seed corpus kept in the tree. */
#include "config.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/proto/datp_samples.h"

Test(datp_helpers, header_init_fills_every_field)
{
        struct datp_header h;

        memset(&h, 0xa5, sizeof(h));
        datp_header_init(&h, DATP_IA_QUERY, 1, 24, 0xdeadbeef);
        cr_expect_eq(h.magic, DATP_MAGIC);
        cr_expect_eq(h.version, 1);
        cr_expect_eq(h.type, DATP_IA_QUERY);
        cr_expect_eq(h.length, 24);
        cr_expect_eq(h.request_id, 0xdeadbeef);
}

Test(datp_helpers, magic_reads_datp_in_memory_on_little_endian)
{
        uint32_t magic = DATP_MAGIC;

        if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
                cr_skip_test("big-endian host");
        cr_expect_arr_eq(&magic, "DATP", 4);
}

/* The sizes PROTOCOL.md lists, one per type. */
Test(datp_helpers, message_size_is_the_documented_size_of_each_type)
{
        static const struct { uint16_t type; size_t size; } documented[] = {
                { DATP_HELLO, 24 },
                { DATP_HELLO | DATP_REPLY, 64 },
                { DATP_IA_OPEN, 280 },
                { DATP_IA_OPEN | DATP_REPLY, 1008 },
                { DATP_IA_CLOSE, 24 },
                { DATP_IA_CLOSE | DATP_REPLY, 24 },
                { DATP_IA_QUERY, 24 },
                { DATP_IA_QUERY | DATP_REPLY, 1000 },
                { DATP_CHANNEL_RELEASE, 24 },
                { DATP_CHANNEL_RELEASE | DATP_REPLY, 24 },
                { DATP_EV_DATA_CHANNEL, 72 },
                { DATP_EV_CHANNEL_DROP, 24 },
                { DATP_EV_CONN_KEPT, 320 },
                { DATP_ERROR, 192 },
        };

        for (size_t i = 0; i < sizeof(documented) / sizeof(documented[0]); i++)
                cr_expect_eq(datp_message_size(documented[i].type), documented[i].size,
                             "%s", datp_type_name(documented[i].type));
}

Test(datp_helpers, message_size_of_an_unknown_type_is_zero)
{
        cr_expect_eq(datp_message_size(0), 0);
        cr_expect_eq(datp_message_size(DATP_REPLY), 0);
        cr_expect_eq(datp_message_size(DATP_ERROR | DATP_REPLY), 0);
        cr_expect_eq(datp_message_size(UINT16_MAX - 1), 0);
}

Test(datp_helpers, type_name_tells_requests_replies_and_unknown_apart)
{
        cr_expect_str_eq(datp_type_name(DATP_IA_OPEN), "IA_OPEN");
        cr_expect_str_eq(datp_type_name(DATP_IA_OPEN | DATP_REPLY), "IA_OPEN reply");
        cr_expect_str_eq(datp_type_name(DATP_ERROR), "ERROR");
        cr_expect_str_eq(datp_type_name(0), "unknown");
        cr_expect_str_eq(datp_type_name(0x1234), "unknown");
}

/* The names PROTOCOL.md gives the types of version 4. */
Test(datp_helpers, type_name_names_the_kept_channel_messages)
{
        cr_expect_str_eq(datp_type_name(DATP_CHANNEL_RELEASE), "CHANNEL_RELEASE");
        cr_expect_str_eq(datp_type_name(DATP_CHANNEL_RELEASE | DATP_REPLY), "CHANNEL_RELEASE reply");
        cr_expect_str_eq(datp_type_name(DATP_EV_CHANNEL_DROP), "EV_CHANNEL_DROP");
        cr_expect_str_eq(datp_type_name(DATP_EV_CONN_KEPT), "EV_CONN_KEPT");
}

Test(datp_helpers, every_decode_error_has_its_own_text_in_either_sign)
{
        for (int code = DATP_OK; code <= DATP_E_STATE; code++) {
                const char *text = datp_decode_error_str(code);

                cr_expect_str_eq(datp_decode_error_str(-code), text);
                cr_expect_str_neq(text, datp_decode_error_str(DATP_E_STATE + 1), "code %d", code);
                for (int other = DATP_OK; other < code; other++)
                        cr_expect_str_neq(text, datp_decode_error_str(other), "%d and %d", code, other);
        }
}

Test(datp_helpers, unknown_decode_error_still_has_text)
{
        static const int unknown[] = { DATP_E_STATE + 1, -(DATP_E_STATE + 1), INT_MAX, INT_MIN };

        for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
                cr_expect_str_eq(datp_decode_error_str(unknown[i]), "unknown decode error");
}

Test(datp_helpers, set_string_copies_and_zeroes_the_rest)
{
        char field[8];

        memset(field, 'x', sizeof(field));
        cr_expect_eq(datp_set_string(field, sizeof(field), "abc"), 0);
        cr_expect_arr_eq(field, "abc\0\0\0\0\0", sizeof(field));
        cr_expect_eq(datp_set_string(field, sizeof(field), "1234567"), 0);
        cr_expect_str_eq(field, "1234567");
}

Test(datp_helpers, set_string_refuses_what_does_not_fit_and_copies_nothing)
{
        char field[8];

        memset(field, 'x', sizeof(field));
        cr_expect_eq(datp_set_string(field, sizeof(field), "12345678"), -1);
        cr_expect_eq(datp_set_string(field, 0, ""), -1);
        cr_expect_arr_eq(field, "xxxxxxxx", sizeof(field));
}

static size_t read_corpus_file(const char *name, union datp_message *m)
{
        const char *srcdir = getenv("DATD_TEST_SRCDIR");
        char path[PATH_MAX];
        FILE *f;
        size_t len;

        cr_assert_not_null(srcdir, "DATD_TEST_SRCDIR is not set (run through make check)");
        snprintf(path, sizeof(path), "%s/tests/proto/corpus/%s", srcdir, name);
        f = fopen(path, "rb");
        cr_assert_not_null(f, "cannot open %s", path);
        len = fread(m, 1, sizeof(*m), f);
        fclose(f);
        return len;
}

/* The fuzzer's seeds must stay valid messages, or they seed nothing. */
Test(datp_helpers, corpus_holds_a_valid_message_of_every_type)
{
        for (size_t i = 0; i < datp_n_samples; i++) {
                const struct datp_sample *s = &datp_samples[i];
                union datp_message m;
                size_t len = read_corpus_file(s->file, &m);
                const char *reason = NULL;

                cr_expect_eq(datp_validate(&m, len, 0, s->dir, s->version, &reason), DATP_OK,
                             "corpus/%s: %s", s->file, reason);
        }
}
