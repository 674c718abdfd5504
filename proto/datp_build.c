/* Building messages: the header, the fixed string fields, and the two
 * events an EV_CONN_KEPT stands for. */
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

void datp_ev_conn_kept_split(const struct datp_ev_conn_kept *k, struct datp_ev_data_channel *ch,
                             struct datp_ev_conn *conn)
{
        *ch = (struct datp_ev_data_channel){
                .ia_id = k->ia_id,
                .conn_id = k->conn_id,
                .ep_handle = k->ep_handle,
                .kind = DATP_CHANNEL_SHM,
                .region_size = k->region_size,
                .ring_size = k->ring_size,
                .side = k->side,
                .peer_pid = k->peer_pid,
                .peer_uid = k->peer_uid,
                .flags = DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP | DATP_CHANNEL_REUSE,
                .channel_id = k->channel_id,
        };
        datp_header_init(&ch->hdr, DATP_EV_DATA_CHANNEL, k->hdr.version, sizeof(*ch), 0);
        *conn = (struct datp_ev_conn){
                .ia_id = k->ia_id,
                .conn_id = k->conn_id,
                .ep_handle = k->ep_handle,
                .event = DATP_EV_CONN_ESTABLISHED,
                .pd_len = k->pd_len,
        };
        datp_header_init(&conn->hdr, DATP_EV_CONN, k->hdr.version, sizeof(*conn), 0);
        memcpy(conn->private_data, k->private_data, sizeof(conn->private_data));
}
