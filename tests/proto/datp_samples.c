/* Valid messages of every v1 type. */
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
