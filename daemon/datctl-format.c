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

const char *format_bytes(char buf[static FORMAT_BYTES_MAX], uint64_t bytes)
{
        static const char units[] = "KMGTPE";
        unsigned u = 0;

        if (bytes < 1024) {
                snprintf(buf, FORMAT_BYTES_MAX, "%lluB", (unsigned long long)bytes);
                return buf;
        }
        /* Tenths of the unit, rounded down: a quota is never shown as reached
         * before it is. */
        while (u + 1 < sizeof(units) - 1 && bytes >= (UINT64_C(1024) << (10 * (u + 1))))
                u++;
        snprintf(buf, FORMAT_BYTES_MAX, "%llu.%u%c",
                 (unsigned long long)(bytes >> (10 * (u + 1))),
                 (unsigned)(((bytes & ((UINT64_C(1024) << (10 * u)) - 1)) * 10) >> (10 * (u + 1))),
                 units[u]);
        return buf;
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
