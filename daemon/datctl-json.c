/* datctl: JSON written straight to a stream.  See datctl-json.h. */
#include <config.h>

#include "datctl-json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define JSON_WRITER_BUFFER (256u * 1024)

int json_writer_init(struct json_writer *w, FILE *f)
{
        *w = (struct json_writer){ .f = f, .cap = JSON_WRITER_BUFFER };
        w->buf = malloc(w->cap);
        if (!w->buf) {
                w->failed = true;
                return -ENOMEM;
        }
        return 0;
}

static void json_writer_flush(struct json_writer *w)
{
        if (w->len > 0 && !w->failed && fwrite(w->buf, 1, w->len, w->f) != w->len)
                w->failed = true;
        w->len = 0;
}

int json_writer_finish(struct json_writer *w)
{
        json_writer_flush(w);
        free(w->buf);
        w->buf = NULL;
        w->cap = 0;
        if (!w->failed && fflush(w->f) == EOF)
                w->failed = true;
        return w->failed ? -EIO : 0;
}

/* Room for n more bytes; false when the writer has failed. */
static inline bool json_writer_room(struct json_writer *w, size_t n)
{
        if (w->failed)
                return false;
        if (w->cap - w->len >= n)
                return true;
        json_writer_flush(w);
        return !w->failed && w->cap >= n;
}

void json_write_raw(struct json_writer *w, const char *s, size_t n)
{
        while (n > 0 && !w->failed) {
                size_t chunk;

                if (w->len == w->cap)
                        json_writer_flush(w);
                chunk = w->cap - w->len < n ? w->cap - w->len : n;
                memcpy(w->buf + w->len, s, chunk);
                w->len += chunk;
                s += chunk;
                n -= chunk;
        }
}

void json_write_newline(struct json_writer *w, unsigned depth)
{
        size_t n = 1 + 2 * (size_t)depth;

        if (!json_writer_room(w, n))
                return;
        w->buf[w->len] = '\n';
        memset(w->buf + w->len + 1, ' ', n - 1);
        w->len += n;
}

/* Bytes that jansson escapes: '"', '\\' and below 0x20. */
static inline bool json_plain_byte(unsigned char c)
{
        return c >= 0x20 && c != '"' && c != '\\';
}

void json_write_string(struct json_writer *w, const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        const unsigned char *p = (const unsigned char *)s;

        json_write_raw(w, "\"", 1);
        for (;;) {
                const unsigned char *run = p;
                char esc[6];
                size_t n;

                while (json_plain_byte(*p))
                        p++;
                json_write_raw(w, (const char *)run, (size_t)(p - run));
                if (*p == '\0')
                        break;
                esc[0] = '\\';
                n = 2;
                switch (*p) {
                case '"': esc[1] = '"'; break;
                case '\\': esc[1] = '\\'; break;
                case '\b': esc[1] = 'b'; break;
                case '\f': esc[1] = 'f'; break;
                case '\n': esc[1] = 'n'; break;
                case '\r': esc[1] = 'r'; break;
                case '\t': esc[1] = 't'; break;
                default:
                        memcpy(esc + 1, "u00", 3);
                        esc[4] = hex[*p >> 4];
                        esc[5] = hex[*p & 0xf];
                        n = 6;
                }
                json_write_raw(w, esc, n);
                p++;
        }
        json_write_raw(w, "\"", 1);
}

void json_write_int(struct json_writer *w, int64_t v)
{
        char digits[24], *end = digits + sizeof(digits), *p = end;
        uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;

        do {
                *--p = (char)('0' + u % 10);
                u /= 10;
        } while (u > 0);
        if (v < 0)
                *--p = '-';
        json_write_raw(w, p, (size_t)(end - p));
}

void json_write_u64(struct json_writer *w, uint64_t v)
{
        json_write_int(w, v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v);
}

void json_write_key(struct json_writer *w, const char *key)
{
        json_write_string(w, key);
        json_write_raw(w, ": ", 2);
}
