/* libFuzzer target for datp_validate(): every input is offered to both
 * directions in every version state (not negotiated, v1, the highest this
 * build speaks, one it does not), with and without descriptors, aligned
 * and not.  Besides "no crash, no out-of-bounds read", it aborts on an
 * accepted message that breaks the framing rules: exact size for its type,
 * header length equal to the bytes, no descriptors except on
 * EV_DATA_CHANNEL (exactly its nfds). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/datp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const uint8_t *data, size_t size, unsigned nfds)
{
        struct datp_header hdr;
        struct datp_ev_data_channel ch;

        memcpy(&hdr, data, sizeof(hdr));
        if (hdr.magic != DATP_MAGIC || hdr.length != size || datp_message_size(hdr.type) != size)
                abort();
        if (hdr.type != DATP_EV_DATA_CHANNEL) {
                if (nfds != 0)
                        abort();
                return;
        }
        memcpy(&ch, data, sizeof(ch));
        if (nfds == 0 || nfds > DATP_CHANNEL_MAX_FDS || ch.nfds != nfds)
                abort();
}

static void validate_all_states(const uint8_t *data, size_t size)
{
        /* The highest too: the rules of later versions (kept channels)
         * apply only there. */
        static const uint16_t versions[] = { 0, DATP_VERSION_MIN, DATP_VERSION_MAX,
                                             DATP_VERSION_MAX + 1 };
        static const enum datp_direction dirs[] = { DATP_TO_DAEMON, DATP_TO_CLIENT };

        for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++)
                for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++)
                        for (unsigned nfds = 0; nfds <= DATP_CHANNEL_MAX_FDS; nfds++) {
                                const char *reason = NULL;
                                int r = datp_validate(data, size, nfds, dirs[d], versions[v], &reason);

                                if (r > 0 || r < -DATP_E_STATE || (r < 0 && !reason))
                                        abort();
                                if (r == DATP_OK)
                                        check_accepted(data, size, nfds);
                        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* An exact-size heap copy at an odd address: ASan sees any read past
         * size, and the unaligned path of datp_validate() gets exercised. */
        uint8_t *odd = malloc(size + 1);

        if (!odd)
                return 0;
        validate_all_states(data, size);
        memcpy(odd + 1, data, size);
        validate_all_states(odd + 1, size);
        free(odd);
        return 0;
}
