/* datctl: JSON written straight to a stream, for lists too long to build
 * as a jansson tree first (100 000 endpoints are 35 MB of JSON).
 *
 * The text is byte for byte what jansson's json_dumpf() prints with
 * JSON_INDENT(2) | JSON_PRESERVE_ORDER for the same values (datctl's other
 * output), so programs see one format: strings escape '"', '\\' and the
 * control characters below U+0020 (\b \f \n \r \t, else \u00XX), and
 * nothing else; the text must be valid UTF-8 (D-Bus strings are). */
#ifndef DATD_DAEMON_DATCTL_JSON_H
#define DATD_DAEMON_DATCTL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct json_writer {
        FILE *f;
        char *buf;
        size_t len, cap;
        bool failed;            /* a write failed or memory ran out: the rest is dropped */
};

/* A writer that buffers on its own and writes to f in large blocks. */
int json_writer_init(struct json_writer *w, FILE *f);
/* Writes what is buffered; returns 0, or -EIO if anything failed. */
int json_writer_finish(struct json_writer *w);

void json_write_raw(struct json_writer *w, const char *s, size_t n);
/* A newline and depth × 2 spaces. */
void json_write_newline(struct json_writer *w, unsigned depth);
/* A JSON string. */
void json_write_string(struct json_writer *w, const char *s);
void json_write_int(struct json_writer *w, int64_t v);
/* An integer as jansson holds it: a uint64_t above INT64_MAX shows as INT64_MAX. */
void json_write_u64(struct json_writer *w, uint64_t v);
/* "\"key\": " */
void json_write_key(struct json_writer *w, const char *key);

#endif
