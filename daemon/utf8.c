/* UTF-8 decoding and sanitizing.  See utf8.h. */
#include <config.h>

#include <string.h>

#include "daemon/utf8.h"

/* U+FFFD REPLACEMENT CHARACTER */
static const char replacement[] = "\xef\xbf\xbd";

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

bool utf8_is_valid(const char *s)
{
        uint32_t c;

        while (*s) {
                size_t len = utf8_decode(s, &c);

                if (len == 0)
                        return false;
                s += len;
        }
        return true;
}

char *utf8_sanitize(const char *s, char *out, size_t size)
{
        size_t o = 0;

        if (size == 0)
                return out;
        while (*s) {
                uint32_t c;
                size_t len = utf8_decode(s, &c);
                const char *from = len ? s : replacement;
                size_t n = len ? len : sizeof(replacement) - 1;

                if (o + n >= size)
                        break;
                memcpy(out + o, from, n);
                o += n;
                s += len ? len : 1;
        }
        out[o] = '\0';
        return out;
}
