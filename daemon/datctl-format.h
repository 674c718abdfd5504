/* datctl: turning datd's numbers and strings into text for people and for
 * JSON: timestamps, ages, user names, and terminal-safe copies of strings
 * that came from clients. */
#ifndef DATD_DAEMON_DATCTL_FORMAT_H
#define DATD_DAEMON_DATCTL_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "utf8.h"

/* "2026-11-22 06:12:01 UTC" plus room to spare. */
#define FORMAT_TIMESTAMP_MAX 64
/* "213503982d 8h" is the longest a uint64_t of µs can give. */
#define FORMAT_TIMESPAN_MAX 32
/* Enough for any user name we print; longer names show as the UID. */
#define FORMAT_USER_MAX 256

/* "18446744073709551615B" is the longest format_bytes() gives. */
#define FORMAT_BYTES_MAX 32

/* CLOCK_REALTIME now, in µs: datd's timestamps are on that clock. */
uint64_t now_realtime_usec(void);

/* "2026-11-22 06:12:01 UTC" for people.  Returns buf, or NULL when usec is
 * 0 (datd's "never") or out of range. */
const char *format_timestamp(char buf[static FORMAT_TIMESTAMP_MAX], uint64_t usec);

/* "2026-11-22T06:12:01Z" (ISO 8601, UTC, whole seconds: what jq's
 * fromdateiso8601 accepts).  The exact value goes out as *_usec beside it.
 * Returns buf, or NULL when usec is 0 or out of range. */
const char *format_timestamp_iso8601(char buf[static FORMAT_TIMESTAMP_MAX], uint64_t usec);

/* A duration in the two largest units that matter: "45s", "3min 12s",
 * "2h 5min", "3d 4h".  Returns buf. */
const char *format_timespan(char buf[static FORMAT_TIMESPAN_MAX], uint64_t usec);

/* Age of a CLOCK_REALTIME timestamp as a timespan; a timestamp in the
 * future (clock stepped back) is "0s".  NULL when usec is 0. */
const char *format_age(char buf[static FORMAT_TIMESPAN_MAX], uint64_t usec, uint64_t now);

/* A size for people: "512B" below 1 KiB, else in the largest binary unit
 * that leaves at least 1, with one decimal: "1.5K", "16.0G".  Returns buf. */
const char *format_bytes(char buf[static FORMAT_BYTES_MAX], uint64_t bytes);

/* The user name of uid from the passwd database, or NULL if it has none. */
const char *format_user(char buf[static FORMAT_USER_MAX], uid_t uid);

/* A copy of s that is safe to write to a terminal: control characters
 * (C0, DEL, C1), bidirectional overrides and bytes that are not valid UTF-8
 * become "\xNN" escapes, and a backslash becomes "\\" so that the escaping
 * is unambiguous.  Client-controlled strings (a process's comm) go through
 * this before they reach a human.  Returns NULL only when out of memory. */
char *text_escape(const char *s);

#endif
