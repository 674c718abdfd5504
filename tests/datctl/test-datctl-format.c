/* datctl's text helpers (daemon/datctl-format.c): timestamps, durations,
 * user names, UTF-8 decoding and terminal-safe escaping. */
#include <config.h>

#include <criterion/criterion.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/datctl-format.h"

/* 2001-09-09 01:46:40 UTC, plus some µs that must not show. */
#define BILLENNIUM_USEC (UINT64_C(1000000000) * 1000000 + 123456)
#define SEC UINT64_C(1000000)

Test(datctl_format, timestamp_for_people_is_utc_with_seconds)
{
        char buf[FORMAT_TIMESTAMP_MAX];

        cr_assert_str_eq(format_timestamp(buf, BILLENNIUM_USEC), "2001-09-09 01:46:40 UTC");
}

Test(datctl_format, timestamp_for_json_is_iso8601_utc)
{
        char buf[FORMAT_TIMESTAMP_MAX];

        cr_assert_str_eq(format_timestamp_iso8601(buf, BILLENNIUM_USEC), "2001-09-09T01:46:40Z");
}

Test(datctl_format, timestamp_zero_means_never)
{
        char buf[FORMAT_TIMESTAMP_MAX];

        cr_assert_null(format_timestamp(buf, 0));
        cr_assert_null(format_timestamp_iso8601(buf, 0));
}

Test(datctl_format, timespan_uses_the_two_largest_units)
{
        char buf[FORMAT_TIMESPAN_MAX];

        cr_assert_str_eq(format_timespan(buf, 0), "0s");
        cr_assert_str_eq(format_timespan(buf, 59 * SEC + 999999), "59s");
        cr_assert_str_eq(format_timespan(buf, 60 * SEC), "1min 0s");
        cr_assert_str_eq(format_timespan(buf, 3723 * SEC), "1h 2min");
        cr_assert_str_eq(format_timespan(buf, 90000 * SEC), "1d 1h");
}

Test(datctl_format, timespan_of_the_largest_value_fits)
{
        char buf[FORMAT_TIMESPAN_MAX];

        cr_assert_str_eq(format_timespan(buf, UINT64_MAX), "213503982d 8h");
}

Test(datctl_format, age_of_a_future_timestamp_is_zero)
{
        char buf[FORMAT_TIMESPAN_MAX];

        cr_assert_str_eq(format_age(buf, 100 * SEC, 40 * SEC), "0s");
        cr_assert_str_eq(format_age(buf, 40 * SEC, 100 * SEC), "1min 0s");
        cr_assert_null(format_age(buf, 0, 100 * SEC));
}

Test(datctl_format, user_name_comes_from_the_passwd_database)
{
        char buf[FORMAT_USER_MAX];

        cr_assert_str_eq(format_user(buf, 0), "root");
}

Test(datctl_format, user_without_a_name_is_null)
{
        char buf[FORMAT_USER_MAX];

        cr_assert_null(format_user(buf, 3999999999u));
}

Test(datctl_format, utf8_decode_accepts_valid_sequences)
{
        uint32_t c;

        cr_assert_eq(utf8_decode("A", &c), 1);
        cr_assert_eq(c, 'A');
        cr_assert_eq(utf8_decode("\xc3\xa9", &c), 2);
        cr_assert_eq(c, 0xe9);
        cr_assert_eq(utf8_decode("\xe2\x80\xa6", &c), 3);
        cr_assert_eq(c, 0x2026);
        cr_assert_eq(utf8_decode("\xf0\x9f\x98\x80", &c), 4);
        cr_assert_eq(c, 0x1f600);
}

Test(datctl_format, utf8_decode_rejects_malformed_sequences)
{
        uint32_t c;

        cr_assert_eq(utf8_decode("\xc0\x80", &c), 0, "overlong NUL");
        cr_assert_eq(utf8_decode("\xe0\x80\xaf", &c), 0, "overlong slash");
        cr_assert_eq(utf8_decode("\xed\xa0\x80", &c), 0, "surrogate");
        cr_assert_eq(utf8_decode("\xf4\x90\x80\x80", &c), 0, "beyond U+10FFFF");
        cr_assert_eq(utf8_decode("\xe2\x80", &c), 0, "truncated");
        cr_assert_eq(utf8_decode("\x80", &c), 0, "lone continuation");
        cr_assert_eq(utf8_decode("\xff", &c), 0, "never valid");
}

static void assert_escaped(const char *in, const char *expected)
{
        _cleanup_free_ char *out = text_escape(in);

        cr_assert_not_null(out);
        cr_assert_str_eq(out, expected);
}

Test(datctl_format, escape_keeps_printable_text)
{
        assert_escaped("mpirun -np 4", "mpirun -np 4");
        assert_escaped("caf\xc3\xa9", "caf\xc3\xa9");
}

Test(datctl_format, escape_hides_c0_and_del)
{
        assert_escaped("a\033]0;title\007b\177", "a\\x1b]0;title\\x07b\\x7f");
        assert_escaped("tab\tnl\n", "tab\\x09nl\\x0a");
}

Test(datctl_format, escape_hides_c1_controls)
{
        /* U+009B is CSI on terminals that honour C1. */
        assert_escaped("x\xc2\x9b" "2J", "x\\xc2\\x9b2J");
}

Test(datctl_format, escape_hides_bidi_overrides)
{
        assert_escaped("ab\xe2\x80\xae" "cd", "ab\\xe2\\x80\\xaecd");
        assert_escaped("\xe2\x81\xa6x", "\\xe2\\x81\\xa6x");
}

Test(datctl_format, escape_hides_invalid_utf8_bytes)
{
        assert_escaped("a\xff\xc3" "b", "a\\xff\\xc3b");
}

Test(datctl_format, escape_doubles_backslashes)
{
        assert_escaped("a\\x1b", "a\\\\x1b");
}

Test(datctl_format, bytes_below_a_kibibyte_are_bytes)
{
        char buf[FORMAT_BYTES_MAX];

        cr_expect_str_eq(format_bytes(buf, 0), "0B");
        cr_expect_str_eq(format_bytes(buf, 1023), "1023B");
}

Test(datctl_format, bytes_take_the_largest_binary_unit_with_one_decimal_rounded_down)
{
        char buf[FORMAT_BYTES_MAX];

        cr_expect_str_eq(format_bytes(buf, 1024), "1.0K");
        cr_expect_str_eq(format_bytes(buf, 1536), "1.5K");
        cr_expect_str_eq(format_bytes(buf, (UINT64_C(1) << 20) - 1), "1023.9K");
        cr_expect_str_eq(format_bytes(buf, UINT64_C(16) << 30), "16.0G");
        cr_expect_str_eq(format_bytes(buf, UINT64_MAX), "15.9E");
}
