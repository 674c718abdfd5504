/* datctl: text for people and JSON from datd's values.  See datctl-format.h. */
#include <config.h>

#include "datctl-format.h"

#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define USEC_PER_SEC UINT64_C(1000000)
#define SEC_PER_MINUTE 60u
#define SEC_PER_HOUR (60u * SEC_PER_MINUTE)
#define SEC_PER_DAY (24u * SEC_PER_HOUR)

uint64_t now_realtime_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

static const char *format_utc(char buf[static FORMAT_TIMESTAMP_MAX], uint64_t usec,
                              const char *fmt)
{
        time_t sec;
        struct tm tm;

        if (usec == 0)
                return NULL;
        sec = (time_t)(usec / USEC_PER_SEC);
        if (!gmtime_r(&sec, &tm))
                return NULL;
        if (strftime(buf, FORMAT_TIMESTAMP_MAX, fmt, &tm) == 0)
                return NULL;
        return buf;
}

const char *format_timestamp(char buf[static FORMAT_TIMESTAMP_MAX], uint64_t usec)
{
        return format_utc(buf, usec, "%Y-%m-%d %H:%M:%S UTC");
}

const char *format_timestamp_iso8601(char buf[static FORMAT_TIMESTAMP_MAX], uint64_t usec)
{
        return format_utc(buf, usec, "%Y-%m-%dT%H:%M:%SZ");
}

const char *format_timespan(char buf[static FORMAT_TIMESPAN_MAX], uint64_t usec)
{
        uint64_t s = usec / USEC_PER_SEC;

        if (s < SEC_PER_MINUTE)
                snprintf(buf, FORMAT_TIMESPAN_MAX, "%us", (unsigned)s);
        else if (s < SEC_PER_HOUR)
                snprintf(buf, FORMAT_TIMESPAN_MAX, "%umin %us",
                         (unsigned)(s / SEC_PER_MINUTE), (unsigned)(s % SEC_PER_MINUTE));
        else if (s < SEC_PER_DAY)
                snprintf(buf, FORMAT_TIMESPAN_MAX, "%uh %umin",
                         (unsigned)(s / SEC_PER_HOUR), (unsigned)(s % SEC_PER_HOUR / SEC_PER_MINUTE));
        else
                snprintf(buf, FORMAT_TIMESPAN_MAX, "%llud %uh",
                         (unsigned long long)(s / SEC_PER_DAY),
                         (unsigned)(s % SEC_PER_DAY / SEC_PER_HOUR));
        return buf;
}

const char *format_age(char buf[static FORMAT_TIMESPAN_MAX], uint64_t usec, uint64_t now)
{
        if (usec == 0)
                return NULL;
        return format_timespan(buf, now > usec ? now - usec : 0);
}

const char *format_user(char buf[static FORMAT_USER_MAX], uid_t uid)
{
        struct passwd pw, *found = NULL;
        char scratch[4096];

        if (getpwuid_r(uid, &pw, scratch, sizeof(scratch), &found) != 0 || !found)
                return NULL;
        if (strlen(found->pw_name) >= FORMAT_USER_MAX)
                return NULL;
        return strcpy(buf, found->pw_name);
}

static bool is_continuation(unsigned char c)
{
        return (c & 0xc0) == 0x80;
}

size_t utf8_decode(const char *s, uint32_t *cp)
{
        const unsigned char *u = (const unsigned char *)s;
        uint32_t c, min;
        size_t len;

        if (u[0] < 0x80) {
                *cp = u[0];
                return 1;
        }
        if ((u[0] & 0xe0) == 0xc0) {
                len = 2, c = u[0] & 0x1f, min = 0x80;
        } else if ((u[0] & 0xf0) == 0xe0) {
                len = 3, c = u[0] & 0x0f, min = 0x800;
        } else if ((u[0] & 0xf8) == 0xf0) {
                len = 4, c = u[0] & 0x07, min = 0x10000;
        } else {
                return 0;
        }
        /* The NUL terminator is not a continuation byte, so this stops there. */
        for (size_t i = 1; i < len; i++) {
                if (!is_continuation(u[i]))
                        return 0;
                c = (c << 6) | (u[i] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
                return 0;
        *cp = c;
        return len;
}

/* Characters that change how a terminal shows what follows them. */
static bool is_unsafe_code_point(uint32_t c)
{
        return c < 0x20 || c == 0x7f ||
               (c >= 0x80 && c <= 0x9f) ||              /* C1 controls */
               c == 0x061c || c == 0x200e || c == 0x200f || /* bidi marks */
               (c >= 0x202a && c <= 0x202e) ||          /* bidi embeddings, overrides */
               (c >= 0x2066 && c <= 0x2069);            /* bidi isolates */
}

char *text_escape(const char *s)
{
        /* Worst case every byte becomes "\xNN". */
        char *out = malloc(strlen(s) * 4 + 1), *o = out;

        if (!out)
                return NULL;
        while (*s) {
                uint32_t c;
                size_t len = utf8_decode(s, &c);

                if (len == 0) {
                        o += sprintf(o, "\\x%02x", (unsigned char)*s);
                        s++;
                } else if (is_unsafe_code_point(c)) {
                        for (size_t i = 0; i < len; i++)
                                o += sprintf(o, "\\x%02x", (unsigned char)s[i]);
                        s += len;
                } else if (c == '\\') {
                        *o++ = '\\';
                        *o++ = '\\';
                        s++;
                } else {
                        memcpy(o, s, len);
                        o += len;
                        s += len;
                }
        }
        *o = '\0';
        return out;
}
