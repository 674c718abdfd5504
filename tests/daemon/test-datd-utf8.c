/* daemon/utf8.c: what datd does to strings before they go on D-Bus, which
 * carries valid UTF-8 only (utf8.h). */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

#include "daemon/utf8.h"

#define FFFD "\xef\xbf\xbd"

static const char *sanitize(const char *s)
{
        static char out[UTF8_SANITIZED_SIZE(64)];

        cr_assert_lt(strlen(s), 64);
        return utf8_sanitize(s, out, sizeof(out));
}

Test(datd_utf8, valid_utf8_is_kept_as_it_is)
{
        cr_expect_str_eq(sanitize("datd-client"), "datd-client");
        cr_expect_str_eq(sanitize("caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x98\x80"),
                         "caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x98\x80");
        cr_expect_str_eq(sanitize(""), "");
}

Test(datd_utf8, each_invalid_byte_becomes_u_fffd)
{
        cr_expect_str_eq(sanitize("bad\xff\xfe"), "bad" FFFD FFFD);
        cr_expect_str_eq(sanitize("\x80x"), FFFD "x");
}

Test(datd_utf8, overlong_surrogate_and_truncated_sequences_are_replaced)
{
        cr_expect_str_eq(sanitize("\xc0\x80"), FFFD FFFD, "overlong NUL");
        cr_expect_str_eq(sanitize("\xed\xa0\x80"), FFFD FFFD FFFD, "surrogate");
        cr_expect_str_eq(sanitize("a\xe2\x80"), "a" FFFD FFFD, "truncated at the end");
}

Test(datd_utf8, the_worst_case_fits_utf8_sanitized_size)
{
        char in[17], out[UTF8_SANITIZED_SIZE(16)];

        memset(in, 0xff, 16);
        in[16] = '\0';
        utf8_sanitize(in, out, sizeof(out));
        cr_expect_eq(strlen(out), 48);
        cr_expect(utf8_is_valid(out));
}

Test(datd_utf8, output_too_small_is_cut_at_a_character_boundary)
{
        char out[6];

        utf8_sanitize("ab\xff\xff", out, sizeof(out));
        cr_expect_str_eq(out, "ab" FFFD);
        utf8_sanitize("abcdefgh", out, sizeof(out));
        cr_expect_str_eq(out, "abcde");
}

Test(datd_utf8, is_valid_tells_utf8_from_other_bytes)
{
        cr_expect(utf8_is_valid("/run/datd"));
        cr_expect(utf8_is_valid("/tmp/\xc3\xa9"));
        cr_expect_not(utf8_is_valid("/tmp/\xe9"));
        cr_expect_not(utf8_is_valid("\xf4\x90\x80\x80"));
}
