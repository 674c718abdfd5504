/* UTF-8 for datd and datctl: D-Bus carries only valid UTF-8 (sd-bus refuses
 * to append anything else, failing the whole reply), and strings that come
 * from clients or the kernel (a process's comm, an interface name) are
 * arbitrary bytes. */
#ifndef DATD_DAEMON_UTF8_H
#define DATD_DAEMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room utf8_sanitize() needs for a string of n bytes: every byte may become
 * U+FFFD (3 bytes), plus the NUL. */
#define UTF8_SANITIZED_SIZE(n) ((n) * 3 + 1)

/* Decodes one UTF-8 sequence at s.  Returns its length in bytes (1-4) and
 * the code point in *cp, or 0 if s does not start a valid, shortest-form
 * sequence of a Unicode scalar value.  Stops at a NUL, which is never a
 * continuation byte. */
size_t utf8_decode(const char *s, uint32_t *cp);

/* Whether all of s is valid UTF-8. */
bool utf8_is_valid(const char *s);

/* Copies s into out (size bytes, always NUL-terminated), each byte that does
 * not start a valid sequence replaced by U+FFFD.  Output that does not fit
 * is cut at a character boundary; with size >= UTF8_SANITIZED_SIZE(strlen(s))
 * nothing is cut.  Returns out. */
char *utf8_sanitize(const char *s, char *out, size_t size);

#endif
