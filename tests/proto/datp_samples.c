/* Valid messages of every type, each in the first version that has it. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "tests/proto/datp_samples.h"

#define REPLY(t) ((uint16_t) ((t) | DATP_REPLY))

const struct datp_sample datp_samples[] = {
        { DATP_HELLO, DATP_TO_DAEMON, 0, "hello" },
        { REPLY(DATP_HELLO), DATP_TO_CLIENT, 0, "hello-reply" },
        { DATP_IA_OPEN, DATP_TO_DAEMON, 1, "ia-open" },
        { REPLY(DATP_IA_OPEN), DATP_TO_CLIENT, 1, "ia-open-reply" },
        { DATP_IA_CLOSE, DATP_TO_DAEMON, 1, "ia-close" },
        { REPLY(DATP_IA_CLOSE), DATP_TO_CLIENT, 1, "ia-close-reply" },
        { DATP_IA_QUERY, DATP_TO_DAEMON, 1, "ia-query" },
        { REPLY(DATP_IA_QUERY), DATP_TO_CLIENT, 1, "ia-query-reply" },
        { DATP_OBJ_CREATE, DATP_TO_DAEMON, 1, "obj-create" },
        { REPLY(DATP_OBJ_CREATE), DATP_TO_CLIENT, 1, "obj-create-reply" },
        { DATP_OBJ_UPDATE, DATP_TO_DAEMON, 1, "obj-update" },
        { REPLY(DATP_OBJ_UPDATE), DATP_TO_CLIENT, 1, "obj-update-reply" },
        { DATP_OBJ_DESTROY, DATP_TO_DAEMON, 1, "obj-destroy" },
        { REPLY(DATP_OBJ_DESTROY), DATP_TO_CLIENT, 1, "obj-destroy-reply" },
        { DATP_LISTEN, DATP_TO_DAEMON, 1, "listen" },
        { REPLY(DATP_LISTEN), DATP_TO_CLIENT, 1, "listen-reply" },
        { DATP_UNLISTEN, DATP_TO_DAEMON, 1, "unlisten" },
        { REPLY(DATP_UNLISTEN), DATP_TO_CLIENT, 1, "unlisten-reply" },
        { DATP_CONNECT, DATP_TO_DAEMON, 1, "connect" },
        { REPLY(DATP_CONNECT), DATP_TO_CLIENT, 1, "connect-reply" },
        { DATP_CR_ACCEPT, DATP_TO_DAEMON, 1, "cr-accept" },
        { REPLY(DATP_CR_ACCEPT), DATP_TO_CLIENT, 1, "cr-accept-reply" },
        { DATP_CR_REJECT, DATP_TO_DAEMON, 1, "cr-reject" },
        { REPLY(DATP_CR_REJECT), DATP_TO_CLIENT, 1, "cr-reject-reply" },
        { DATP_CR_HANDOFF, DATP_TO_DAEMON, 1, "cr-handoff" },
        { REPLY(DATP_CR_HANDOFF), DATP_TO_CLIENT, 1, "cr-handoff-reply" },
        { DATP_DISCONNECT, DATP_TO_DAEMON, 1, "disconnect" },
        { REPLY(DATP_DISCONNECT), DATP_TO_CLIENT, 1, "disconnect-reply" },
        { DATP_CHANNEL_RELEASE, DATP_TO_DAEMON, 4, "channel-release" },
        { REPLY(DATP_CHANNEL_RELEASE), DATP_TO_CLIENT, 4, "channel-release-reply" },
        { DATP_EV_CONN_REQUEST, DATP_TO_CLIENT, 1, "ev-conn-request" },
        { DATP_EV_CONN, DATP_TO_CLIENT, 1, "ev-conn" },
        { DATP_EV_CHANNEL_DROP, DATP_TO_CLIENT, 4, "ev-channel-drop" },
        { DATP_EV_CONN_KEPT, DATP_TO_CLIENT, 4, "ev-conn-kept" },
        { DATP_ERROR, DATP_TO_CLIENT, 1, "error" },
};
const size_t datp_n_samples = ARRAY_SIZE(datp_samples);

const struct datp_sample *datp_sample_of(uint16_t type)
{
        for (size_t i = 0; i < datp_n_samples; i++)
                if (datp_samples[i].type == type)
                        return &datp_samples[i];
        return NULL;
}

/* A tcp IA on 127.0.0.1:7000, with a quota. */
static void sample_ia_info(struct datp_ia_info *info)
{
        struct sockaddr_in sin = {
                .sin_family = AF_INET,
                .sin_port = htons(7000),
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };

        datp_set_string(info->name, sizeof(info->name), "tcp");
        datp_set_string(info->transport, sizeof(info->transport), "tcp");
        datp_set_string(info->adapter_name, sizeof(info->adapter_name), "lo");
        datp_set_string(info->vendor_name, sizeof(info->vendor_name), "datd");
        info->hw_version_major = 1;
        info->fw_version_major = 1;
        memcpy(&info->address, &sin, sizeof(sin));
        info->address_len = sizeof(sin);
        info->mtu = 65536;
        info->max_eps = 64;
        info->max_evds = 64;
        info->max_pzs = 16;
        info->max_lmrs = 256;
        info->max_rmrs = 256;
        info->max_srqs = 16;
        info->max_private_data = 256;
        info->max_lmr_bytes = 1ull << 30;
}

/* The remote IA 192.0.2.1 (TEST-NET-1). */
static void sample_remote(struct sockaddr_storage *ss, uint32_t *len)
{
        struct sockaddr_in sin = {
                .sin_family = AF_INET,
                .sin_addr.s_addr = htonl(0xc0000201u),
        };

        memcpy(ss, &sin, sizeof(sin));
        *len = sizeof(sin);
}

/* 64 bytes of private data, the least every provider offers. */
static void sample_private_data(uint8_t *pd, uint32_t *len)
{
        for (unsigned i = 0; i < 64; i++)
                pd[i] = (uint8_t) (i + 1);
        *len = 64;
}

void datp_sample_obj_desc(uint32_t kind, struct datp_obj_desc *d)
{
        memset(d, 0, sizeof(*d));
        d->kind = kind;
        d->handle = 0x7f0000001000ull + kind;
        switch (kind) {
        case DATP_OBJ_EVD:
                d->qlen = 1024;
                break;
        case DATP_OBJ_LMR:
                d->pz_handle = 0x7f0000000100ull;
                d->length = 1ull << 20;
                break;
        case DATP_OBJ_RMR:
                d->pz_handle = 0x7f0000000100ull;
                break;
        case DATP_OBJ_EP:
                d->state = DATP_EP_STATE_MAX;
                d->pz_handle = 0x7f0000000100ull;
                d->max_recv_dtos = 256;
                d->max_request_dtos = 128;
                d->max_recv_iov = 4;
                d->max_request_iov = 8;
                d->max_message_size = 1u << 16;
                d->recv_evd_handle = 0x7f0000000200ull;
                d->request_evd_handle = 0x7f0000000300ull;
                d->connect_evd_handle = 0x7f0000000400ull;
                d->srq_handle = 0x7f0000000500ull;
                break;
        case DATP_OBJ_SRQ:
                d->state = DATP_SRQ_STATE_MAX;
                d->pz_handle = 0x7f0000000100ull;
                d->qlen = 512;
                d->max_recv_iov = 2;
                break;
        default:
                break;
        }
}

size_t datp_sample_build(const struct datp_sample *s, union datp_message *m)
{
        size_t len = datp_message_size(s->type);
        /* Before HELLO the header carries the highest version this side speaks. */
        uint16_t version = s->version ? s->version : DATP_VERSION_MAX;

        memset(m, 0, sizeof(*m));
        datp_header_init(&m->hdr, s->type, version, len, DATP_SAMPLE_REQUEST_ID);
        switch (s->type) {
        case DATP_HELLO:
                m->hello.min_version = DATP_VERSION_MIN;
                m->hello.max_version = DATP_VERSION_MAX;
                break;
        case REPLY(DATP_HELLO):
                m->hello_reply.version = version;
                m->hello_reply.max_message = DATP_MAX_MESSAGE;
                datp_set_string(m->hello_reply.daemon_version,
                                sizeof(m->hello_reply.daemon_version), "0.1.0");
                break;
        case DATP_IA_OPEN:
                datp_set_string(m->ia_open.ia_name, sizeof(m->ia_open.ia_name), "tcp");
                break;
        case REPLY(DATP_IA_OPEN):
                m->ia_open_reply.ia_id = 7;
                sample_ia_info(&m->ia_open_reply.info);
                break;
        case DATP_IA_CLOSE:
                m->ia_close.ia_id = 7;
                m->ia_close.flags = DATP_CLOSE_GRACEFUL;
                break;
        case REPLY(DATP_IA_CLOSE):
                break;
        case DATP_IA_QUERY:
                m->ia_query.ia_id = 7;
                break;
        case REPLY(DATP_IA_QUERY):
                sample_ia_info(&m->ia_query_reply.info);
                break;
        case DATP_OBJ_CREATE:
                m->obj_create.ia_id = 7;
                datp_sample_obj_desc(DATP_OBJ_EP, &m->obj_create.desc);
                break;
        case REPLY(DATP_OBJ_CREATE):
                m->obj_create_reply.obj_id = 9;
                break;
        case DATP_OBJ_UPDATE:
                m->obj_update.ia_id = 7;
                m->obj_update.obj_id = 9;
                datp_sample_obj_desc(DATP_OBJ_EP, &m->obj_update.desc);
                break;
        case REPLY(DATP_OBJ_UPDATE):
                break;
        case DATP_OBJ_DESTROY:
                m->obj_destroy.ia_id = 7;
                m->obj_destroy.obj_id = 9;
                break;
        case REPLY(DATP_OBJ_DESTROY):
                break;
        case DATP_LISTEN:
                m->listen.ia_id = 7;
                m->listen.kind = DATP_LISTENER_PSP;
                m->listen.conn_qual = 4242;
                m->listen.handle = 0x7f0000000600ull;
                m->listen.psp_flags = 1; /* DAT_PSP_PROVIDER_FLAG */
                break;
        case REPLY(DATP_LISTEN):
                m->listen_reply.listener_id = 3;
                m->listen_reply.conn_qual = 4242;
                break;
        case DATP_UNLISTEN:
                m->unlisten.ia_id = 7;
                m->unlisten.listener_id = 3;
                break;
        case DATP_CONNECT:
                m->connect.ia_id = 7;
                m->connect.ep_handle = 0x7f0000000700ull;
                sample_remote(&m->connect.remote_address, &m->connect.remote_address_len);
                m->connect.qos = 0x01; /* DAT_QOS_HIGH_THROUGHPUT */
                m->connect.remote_conn_qual = 4242;
                m->connect.timeout_us = 1000000;
                sample_private_data(m->connect.private_data, &m->connect.pd_len);
                break;
        case REPLY(DATP_CONNECT):
                m->connect_reply.conn_id = 11;
                break;
        case DATP_CR_ACCEPT:
                m->cr_accept.ia_id = 7;
                m->cr_accept.cr_id = 5;
                m->cr_accept.ep_handle = 0x7f0000000800ull;
                sample_private_data(m->cr_accept.private_data, &m->cr_accept.pd_len);
                break;
        case REPLY(DATP_CR_ACCEPT):
                m->cr_accept_reply.conn_id = 12;
                break;
        case DATP_CR_REJECT:
                m->cr_reject.ia_id = 7;
                m->cr_reject.cr_id = 5;
                sample_private_data(m->cr_reject.private_data, &m->cr_reject.pd_len);
                break;
        case DATP_CR_HANDOFF:
                m->cr_handoff.ia_id = 7;
                m->cr_handoff.cr_id = 5;
                m->cr_handoff.conn_qual = 4343;
                break;
        case DATP_DISCONNECT:
                m->disconnect.ia_id = 7;
                m->disconnect.conn_id = 11;
                m->disconnect.flags = DATP_CLOSE_GRACEFUL;
                break;
        case DATP_CHANNEL_RELEASE:
                m->channel_release.ia_id = 7;
                m->channel_release.channel_id = 9;
                break;
        case REPLY(DATP_UNLISTEN):
        case REPLY(DATP_CR_REJECT):
        case REPLY(DATP_CR_HANDOFF):
        case REPLY(DATP_DISCONNECT):
        case REPLY(DATP_CHANNEL_RELEASE):
                break;
        case DATP_EV_CONN_REQUEST:
                m->hdr.request_id = 0;
                m->ev_conn_request.ia_id = 7;
                m->ev_conn_request.listener_id = 3;
                m->ev_conn_request.cr_id = 5;
                m->ev_conn_request.conn_qual = 4242;
                m->ev_conn_request.remote_port = 11;
                sample_remote(&m->ev_conn_request.remote_address,
                              &m->ev_conn_request.remote_address_len);
                sample_private_data(m->ev_conn_request.private_data, &m->ev_conn_request.pd_len);
                break;
        case DATP_EV_CONN:
                m->hdr.request_id = 0;
                m->ev_conn.ia_id = 7;
                m->ev_conn.conn_id = 11;
                m->ev_conn.ep_handle = 0x7f0000000700ull;
                m->ev_conn.event = 0x04001; /* DAT_CONNECTION_EVENT_ESTABLISHED */
                sample_private_data(m->ev_conn.private_data, &m->ev_conn.pd_len);
                break;
        case DATP_EV_CHANNEL_DROP:
                m->hdr.request_id = 0;
                m->ev_channel_drop.ia_id = 7;
                m->ev_channel_drop.channel_id = 9;
                break;
        case DATP_EV_CONN_KEPT:
                m->hdr.request_id = 0;
                m->ev_conn_kept.ia_id = 7;
                m->ev_conn_kept.conn_id = 11;
                m->ev_conn_kept.ep_handle = 0x7f0000000700ull;
                m->ev_conn_kept.channel_id = 9;
                m->ev_conn_kept.side = 1;
                m->ev_conn_kept.ring_size = 262144;
                m->ev_conn_kept.region_size = 4096 + 2 * (4096 + 262144);
                m->ev_conn_kept.peer_pid = 4242;
                m->ev_conn_kept.peer_uid = 1000;
                sample_private_data(m->ev_conn_kept.private_data, &m->ev_conn_kept.pd_len);
                break;
        case DATP_ERROR:
                m->error.status.dat_status = 0x80040000u; /* DAT_INTERNAL_ERROR */
                m->error.status.sys_errno = EPROTO;
                m->error.bad_type = 0x4242;
                m->error.code = DATP_E_TYPE;
                datp_set_string(m->error.reason, sizeof(m->error.reason),
                                datp_decode_error_str(DATP_E_TYPE));
                break;
        }
        return len;
}

const struct datp_sample *datp_sample_build_type(uint16_t type, union datp_message *m)
{
        const struct datp_sample *s = datp_sample_of(type);

        if (!s)
                abort(); /* a test asked for a type the samples do not cover */
        datp_sample_build(s, m);
        return s;
}

int datp_sample_validate(const struct datp_sample *s, const union datp_message *m)
{
        return datp_validate(m, m->hdr.length, 0, s->dir, s->version, NULL);
}
