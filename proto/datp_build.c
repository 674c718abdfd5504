/* Building outgoing messages: the header and the fixed string fields. */
#include "config.h"

#include <string.h>

#include "proto/datp.h"

void datp_header_init(struct datp_header *hdr, uint16_t type, uint16_t version,
                      uint32_t length, uint32_t request_id)
{
        *hdr = (struct datp_header) {
                .magic = DATP_MAGIC,
                .version = version,
                .type = type,
                .length = length,
                .request_id = request_id,
        };
}

int datp_set_string(char *dst, size_t n, const char *src)
{
        /* strnlen: src may be far longer than the field, never read past need. */
        size_t len = strnlen(src, n);

        if (len >= n)
                return -1;
        memcpy(dst, src, len);
        /* The whole tail is zeroed so no stale bytes travel after the NUL. */
        memset(dst + len, 0, n - len);
        return 0;
}
