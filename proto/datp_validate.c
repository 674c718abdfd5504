/* datp_validate(): the only way a received packet becomes a typed message.
 *
 * Input is hostile.  The checks run in a fixed order (PROTOCOL.md, "Decode
 * errors") and the first failure is reported: framing (short, oversize,
 * magic, length), version, type, direction, state, exact size, descriptors,
 * then the fields of the type.  Nothing here allocates, and every read stays
 * inside the len bytes received. */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>

#include "common/macro.h"
#include "proto/datp.h"

/* DAT_RETURN layout (dat_error.h): class bits 31-30, type 29-16, subtype 15-0. */
#define DAT_RETURN_CLASS_MASK 0xc0000000u
#define DAT_RETURN_CLASS_ERROR 0x80000000u
#define DAT_RETURN_TYPE_MASK 0x3fff0000u
/* Largest errno a kernel ever reports (include/linux/err.h: MAX_ERRNO). */
#define DATP_ERRNO_MAX 4095
/* dat_ep_connect(3DAT) and friends guarantee at least 64 bytes of private data. */
#define DATP_PRIVATE_DATA_MIN 64

typedef int (*datp_check_fn)(const union datp_message *m, const char **reason);

struct datp_type_rule {
        uint16_t type;
        enum datp_direction dir;  /* the side that receives it */
        bool before_hello;        /* may arrive while no version is negotiated */
        bool fds;                 /* carries descriptors (EV_DATA_CHANNEL only) */
        size_t size;
        const char *name;
        datp_check_fn check;
};

static int refuse(const char **reason, enum datp_decode_error code, const char *why)
{
        if (reason)
                *reason = why;
        return -(int) code;
}

static bool string_terminated(const char *s, size_t n)
{
        return memchr(s, '\0', n) != NULL;
}

static bool string_nonempty(const char *s, size_t n)
{
        return s[0] != '\0' && string_terminated(s, n);
}

static bool all_zero(const void *p, size_t n)
{
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                if (b[i] != 0)
                        return false;
        return true;
}

static bool status_is_success(const struct datp_status *s)
{
        return s->dat_status == 0;
}

static int check_status(const struct datp_status *s, const char **reason)
{
        if (s->sys_errno < 0 || s->sys_errno > DATP_ERRNO_MAX)
                return refuse(reason, DATP_E_FIELD, "status: sys_errno out of range");
        if (status_is_success(s)) {
                if (s->sys_errno != 0)
                        return refuse(reason, DATP_E_FIELD, "status: DAT_SUCCESS with an errno");
                return DATP_OK;
        }
        if ((s->dat_status & DAT_RETURN_CLASS_MASK) != DAT_RETURN_CLASS_ERROR ||
            (s->dat_status & DAT_RETURN_TYPE_MASK) == 0)
                return refuse(reason, DATP_E_FIELD,
                              "status: dat_status is neither DAT_SUCCESS nor an error");
        return DATP_OK;
}

/* Which lengths an address family may have in an IA address. */
static bool address_len_fits_family(sa_family_t family, uint32_t len)
{
        switch (family) {
        case AF_INET:
                return len == sizeof(struct sockaddr_in);
        case AF_INET6:
                return len == sizeof(struct sockaddr_in6);
        case AF_UNIX:
                /* An unnamed socket (no path at all) is no address to connect to. */
                return len > offsetof(struct sockaddr_un, sun_path) &&
                       len <= sizeof(struct sockaddr_un);
        default:
                return false;
        }
}

static int check_address(const struct sockaddr_storage *a, uint32_t len, const char **reason)
{
        if (len > sizeof(*a))
                return refuse(reason, DATP_E_FIELD, "IA info: address_len beyond sockaddr_storage");
        /* Bytes past address_len are 0: with len == 0 that makes the family
         * AF_UNSPEC, and no stale memory ever travels in the padding. */
        if (!all_zero((const unsigned char *) a + len, sizeof(*a) - len))
                return refuse(reason, DATP_E_FIELD, "IA info: address bytes past address_len not zero");
        if (len == 0)
                return DATP_OK;
        if (!address_len_fits_family(a->ss_family, len))
                return refuse(reason, DATP_E_FIELD,
                              "IA info: address family unknown or address_len wrong for it");
        return DATP_OK;
}

static bool transport_known(const char *t)
{
        static const char *const known[] = { "shm", "tcp", "verbs" };

        for (size_t i = 0; i < ARRAY_SIZE(known); i++)
                if (strncmp(t, known[i], DATP_TRANSPORT_MAX) == 0)
                        return true;
        return false;
}

static int check_ia_info(const struct datp_ia_info *info, const char **reason)
{
        if (!string_nonempty(info->name, sizeof(info->name)))
                return refuse(reason, DATP_E_FIELD, "IA info: name empty or not NUL terminated");
        if (!string_terminated(info->transport, sizeof(info->transport)) ||
            !transport_known(info->transport))
                return refuse(reason, DATP_E_FIELD, "IA info: transport not shm, tcp or verbs");
        if (!string_terminated(info->adapter_name, sizeof(info->adapter_name)))
                return refuse(reason, DATP_E_FIELD, "IA info: adapter_name not NUL terminated");
        if (!string_terminated(info->vendor_name, sizeof(info->vendor_name)))
                return refuse(reason, DATP_E_FIELD, "IA info: vendor_name not NUL terminated");
        if (info->max_private_data < DATP_PRIVATE_DATA_MIN)
                return refuse(reason, DATP_E_FIELD, "IA info: max_private_data below 64");
        if (info->reserved != 0)
                return refuse(reason, DATP_E_FIELD, "IA info: reserved not zero");
        return check_address(&info->address, info->address_len, reason);
}

/* A reply that failed carries no IA; one that succeeded carries a valid one. */
static int check_ia_reply(const struct datp_status *status, uint32_t ia_id,
                          const struct datp_ia_info *info, const char **reason)
{
        int r = check_status(status, reason);

        if (r < 0)
                return r;
        if (status_is_success(status))
                return check_ia_info(info, reason);
        if (ia_id != 0 || !all_zero(info, sizeof(*info)))
                return refuse(reason, DATP_E_FIELD, "failed reply carries an IA");
        return DATP_OK;
}

static int check_hello(const union datp_message *m, const char **reason)
{
        const struct datp_hello *h = &m->hello;

        if (h->flags != 0)
                return refuse(reason, DATP_E_FIELD, "HELLO: flags not zero");
        if (h->min_version == 0 || h->min_version > h->max_version)
                return refuse(reason, DATP_E_FIELD, "HELLO: min_version 0 or above max_version");
        if (h->hdr.version != h->max_version)
                return refuse(reason, DATP_E_FIELD, "HELLO: header version is not max_version");
        if (h->max_version < DATP_VERSION_MIN || h->min_version > DATP_VERSION_MAX)
                return refuse(reason, DATP_E_VERSION, "HELLO: no protocol version in common");
        return DATP_OK;
}

static int check_hello_reply(const union datp_message *m, const char **reason)
{
        const struct datp_hello_reply *h = &m->hello_reply;
        int r;

        /* The reply is written in the version it negotiated: one we speak. */
        if (h->hdr.version < DATP_VERSION_MIN || h->hdr.version > DATP_VERSION_MAX)
                return refuse(reason, DATP_E_VERSION, "HELLO reply: version this side does not speak");
        r = check_status(&h->status, reason);
        if (r < 0)
                return r;
        if (h->version != h->hdr.version)
                return refuse(reason, DATP_E_FIELD, "HELLO reply: version differs from its header");
        if (h->reserved != 0)
                return refuse(reason, DATP_E_FIELD, "HELLO reply: reserved not zero");
        if (h->max_message < DATP_MAX_MESSAGE)
                return refuse(reason, DATP_E_FIELD, "HELLO reply: max_message below DATP_MAX_MESSAGE");
        if (!string_terminated(h->daemon_version, sizeof(h->daemon_version)))
                return refuse(reason, DATP_E_FIELD, "HELLO reply: daemon_version not NUL terminated");
        return DATP_OK;
}

static int check_ia_open(const union datp_message *m, const char **reason)
{
        const struct datp_ia_open *o = &m->ia_open;

        if (!string_nonempty(o->ia_name, sizeof(o->ia_name)))
                return refuse(reason, DATP_E_FIELD, "IA_OPEN: ia_name empty or not NUL terminated");
        if (o->flags != 0)
                return refuse(reason, DATP_E_FIELD, "IA_OPEN: flags not zero");
        if (o->reserved != 0)
                return refuse(reason, DATP_E_FIELD, "IA_OPEN: reserved not zero");
        return DATP_OK;
}

static int check_ia_open_reply(const union datp_message *m, const char **reason)
{
        const struct datp_ia_open_reply *o = &m->ia_open_reply;

        if (o->reserved != 0)
                return refuse(reason, DATP_E_FIELD, "IA_OPEN reply: reserved not zero");
        return check_ia_reply(&o->status, o->ia_id, &o->info, reason);
}

static int check_ia_close(const union datp_message *m, const char **reason)
{
        /* dat_ia_close(3DAT): the flag is DAT_CLOSE_ABRUPT_FLAG or DAT_CLOSE_GRACEFUL_FLAG. */
        if (m->ia_close.flags != DATP_CLOSE_ABRUPT && m->ia_close.flags != DATP_CLOSE_GRACEFUL)
                return refuse(reason, DATP_E_FIELD, "IA_CLOSE: flags neither abrupt nor graceful");
        return DATP_OK;
}

/* A reply that is nothing but its status (IA_CLOSE, OBJ_UPDATE, OBJ_DESTROY):
 * the status sits at the same offset in every reply. */
static int check_reply_status(const union datp_message *m, const char **reason)
{
        return check_status(&m->ia_close_reply.status, reason);
}

static int check_ia_query(const union datp_message *m, const char **reason)
{
        if (m->ia_query.reserved != 0)
                return refuse(reason, DATP_E_FIELD, "IA_QUERY: reserved not zero");
        return DATP_OK;
}

static int check_ia_query_reply(const union datp_message *m, const char **reason)
{
        const struct datp_ia_query_reply *q = &m->ia_query_reply;

        return check_ia_reply(&q->status, 0, &q->info, reason);
}

/* ---- objects ------------------------------------------------------------- */

/* The fields of struct datp_obj_desc besides kind and handle, as bits: which
 * of them a kind may set (PROTOCOL.md, "Object description"). */
enum {
        OBJ_STATE = 1u << 0,
        OBJ_PZ = 1u << 1,
        OBJ_LENGTH = 1u << 2,
        OBJ_QLEN = 1u << 3,
        OBJ_EP_LIMITS = 1u << 4,        /* max_recv_dtos, max_request_dtos, max_request_iov,
                                           max_message_size */
        OBJ_RECV_IOV = 1u << 5,
        OBJ_EP_LINKS = 1u << 6,         /* the three EVD handles and srq_handle */
};

struct obj_kind_rule {
        uint32_t fields;                /* OBJ_* a description of this kind may set */
        bool pz_required;               /* pz_handle must be non-zero */
        uint32_t state_max;             /* with OBJ_STATE */
};

static const struct obj_kind_rule obj_kind_rules[DATP_OBJ_KIND_MAX + 1] = {
        [DATP_OBJ_PZ] = { 0 },
        [DATP_OBJ_EVD] = { OBJ_QLEN },
        [DATP_OBJ_CNO] = { 0 },
        /* dat_lmr_create(3DAT), dat_rmr_create(3DAT), dat_srq_create(3DAT)
         * take a PZ; an EP may be described before it has one. */
        [DATP_OBJ_LMR] = { OBJ_PZ | OBJ_LENGTH, true },
        [DATP_OBJ_RMR] = { OBJ_PZ, true },
        [DATP_OBJ_EP] = { OBJ_STATE | OBJ_PZ | OBJ_EP_LIMITS | OBJ_RECV_IOV | OBJ_EP_LINKS, false,
                          DATP_EP_STATE_MAX },
        [DATP_OBJ_SRQ] = { OBJ_STATE | OBJ_PZ | OBJ_QLEN | OBJ_RECV_IOV, true, DATP_SRQ_STATE_MAX },
};

/* Where each field lives, and what a refusal says. */
static const struct {
        uint32_t bit;
        size_t offset, size;
        const char *reason;
} obj_fields[] = {
#define OBJ_FIELD(bit, f) \
        { bit, offsetof(struct datp_obj_desc, f), sizeof(((struct datp_obj_desc *) NULL)->f), \
          "object: " #f " not zero for a kind it does not apply to" }
        OBJ_FIELD(OBJ_STATE, state),
        OBJ_FIELD(OBJ_PZ, pz_handle),
        OBJ_FIELD(OBJ_LENGTH, length),
        OBJ_FIELD(OBJ_QLEN, qlen),
        OBJ_FIELD(OBJ_EP_LIMITS, max_recv_dtos),
        OBJ_FIELD(OBJ_EP_LIMITS, max_request_dtos),
        OBJ_FIELD(OBJ_RECV_IOV, max_recv_iov),
        OBJ_FIELD(OBJ_EP_LIMITS, max_request_iov),
        OBJ_FIELD(OBJ_EP_LIMITS, max_message_size),
        OBJ_FIELD(OBJ_EP_LINKS, recv_evd_handle),
        OBJ_FIELD(OBJ_EP_LINKS, request_evd_handle),
        OBJ_FIELD(OBJ_EP_LINKS, connect_evd_handle),
        OBJ_FIELD(OBJ_EP_LINKS, srq_handle),
#undef OBJ_FIELD
};

static int check_obj_desc(const struct datp_obj_desc *d, const char **reason)
{
        const struct obj_kind_rule *rule;

        if (d->kind == 0 || d->kind > DATP_OBJ_KIND_MAX)
                return refuse(reason, DATP_E_FIELD, "object: kind unknown");
        rule = &obj_kind_rules[d->kind];
        if (d->handle == 0)
                return refuse(reason, DATP_E_FIELD, "object: handle is 0");
        for (size_t i = 0; i < ARRAY_SIZE(obj_fields); i++)
                if (!(rule->fields & obj_fields[i].bit) &&
                    !all_zero((const char *) d + obj_fields[i].offset, obj_fields[i].size))
                        return refuse(reason, DATP_E_FIELD, obj_fields[i].reason);
        if ((rule->fields & OBJ_STATE) && d->state > rule->state_max)
                return refuse(reason, DATP_E_FIELD, "object: state out of range for its kind");
        if (rule->pz_required && d->pz_handle == 0)
                return refuse(reason, DATP_E_FIELD, "object: pz_handle is 0 for a kind that needs a PZ");
        return DATP_OK;
}

static int check_obj_create(const union datp_message *m, const char **reason)
{
        if (m->obj_create.reserved != 0)
                return refuse(reason, DATP_E_FIELD, "OBJ_CREATE: reserved not zero");
        return check_obj_desc(&m->obj_create.desc, reason);
}

static int check_obj_create_reply(const union datp_message *m, const char **reason)
{
        const struct datp_obj_create_reply *o = &m->obj_create_reply;
        int r = check_status(&o->status, reason);

        if (r < 0)
                return r;
        if (o->reserved != 0)
                return refuse(reason, DATP_E_FIELD, "OBJ_CREATE reply: reserved not zero");
        if (status_is_success(&o->status) != (o->obj_id != 0))
                return refuse(reason, DATP_E_FIELD,
                              "OBJ_CREATE reply: obj_id 0 on success or set on failure");
        return DATP_OK;
}

static int check_obj_update(const union datp_message *m, const char **reason)
{
        return check_obj_desc(&m->obj_update.desc, reason);
}

/* Any ia_id and obj_id: an unknown one is answered (DAT_INVALID_HANDLE).
 * An object is named one way: by obj_id, or (obj_id 0) by ep_handle. */
static int check_obj_destroy(const union datp_message *m, const char **reason)
{
        if (m->obj_destroy.obj_id != 0 && m->obj_destroy.ep_handle != 0)
                return refuse(reason, DATP_E_FIELD, "OBJ_DESTROY: both obj_id and ep_handle set");
        return DATP_OK;
}

static int check_error(const union datp_message *m, const char **reason)
{
        const struct datp_error *e = &m->error;
        int r = check_status(&e->status, reason);

        if (r < 0)
                return r;
        if (status_is_success(&e->status))
                return refuse(reason, DATP_E_FIELD, "ERROR: status is DAT_SUCCESS");
        if (e->fatal > 1)
                return refuse(reason, DATP_E_FIELD, "ERROR: fatal neither 0 nor 1");
        if (e->code <= DATP_OK || e->code > DATP_E_STATE)
                return refuse(reason, DATP_E_FIELD, "ERROR: code not a decode error");
        if (!string_terminated(e->reason, sizeof(e->reason)))
                return refuse(reason, DATP_E_FIELD, "ERROR: reason not NUL terminated");
        return DATP_OK;
}

/* ---- connections --------------------------------------------------------- */

/* DAT_PSP_CONSUMER_FLAG (0) and DAT_PSP_PROVIDER_FLAG (1), dat.h. */
#define DATP_PSP_FLAGS_MAX 1u
/* DAT_QOS bits (dat.h): BEST_EFFORT 0 | HIGH_THROUGHPUT | LOW_LATENCY | ECONOMY | PREMIUM. */
#define DATP_QOS_MASK 0x0fu
/* DAT_CONNECT_DEFAULT_FLAG (0) and DAT_CONNECT_MULTIPATH_FLAG (1), dat.h. */
#define DATP_CONNECT_FLAGS_MASK 0x01u

/* pd_len within DATP_PRIVATE_DATA_MAX and nothing past it. */
static int check_private_data(uint32_t pd_len, const uint8_t *pd, const char **reason)
{
        if (pd_len > DATP_PRIVATE_DATA_MAX)
                return refuse(reason, DATP_E_FIELD, "private data: pd_len beyond DATP_PRIVATE_DATA_MAX");
        if (!all_zero(pd + pd_len, DATP_PRIVATE_DATA_MAX - pd_len))
                return refuse(reason, DATP_E_FIELD, "private data: bytes past pd_len not zero");
        return DATP_OK;
}

/* A remote IA address a connection can go to: IPv4 or IPv6 only. */
static int check_remote_address(const struct sockaddr_storage *a, uint32_t len, const char **reason)
{
        int r = check_address(a, len, reason);

        if (r < 0)
                return r;
        if (len == 0 || (a->ss_family != AF_INET && a->ss_family != AF_INET6))
                return refuse(reason, DATP_E_FIELD, "remote address neither IPv4 nor IPv6");
        return DATP_OK;
}

static int check_event_header(const struct datp_header *hdr, const char **reason)
{
        if (hdr->request_id != 0)
                return refuse(reason, DATP_E_FIELD, "event: request_id not 0");
        return DATP_OK;
}

/* An id reply: success carries the id, a failure none. */
static int check_id_reply(const struct datp_status *s, uint32_t id, uint32_t reserved,
                          const char **reason)
{
        int r = check_status(s, reason);

        if (r < 0)
                return r;
        if (reserved != 0)
                return refuse(reason, DATP_E_FIELD, "reply: reserved not zero");
        if (status_is_success(s) != (id != 0))
                return refuse(reason, DATP_E_FIELD, "reply: id 0 on success or set on failure");
        return DATP_OK;
}

static int check_listen(const union datp_message *m, const char **reason)
{
        const struct datp_listen *l = &m->listen;

        if (l->reserved != 0)
                return refuse(reason, DATP_E_FIELD, "LISTEN: reserved not zero");
        switch (l->kind) {
        case DATP_LISTENER_PSP_ANY:
                if (l->conn_qual != 0)
                        return refuse(reason, DATP_E_FIELD, "LISTEN: PSP_ANY with a conn_qual");
                __attribute__((fallthrough));
        case DATP_LISTENER_PSP:
                if (l->ep_handle != 0)
                        return refuse(reason, DATP_E_FIELD, "LISTEN: PSP with an ep_handle");
                if (l->psp_flags > DATP_PSP_FLAGS_MAX)
                        return refuse(reason, DATP_E_FIELD, "LISTEN: psp_flags unknown");
                return DATP_OK;
        case DATP_LISTENER_RSP:
                if (l->ep_handle == 0)
                        return refuse(reason, DATP_E_FIELD, "LISTEN: RSP without an ep_handle");
                if (l->psp_flags != 0)
                        return refuse(reason, DATP_E_FIELD, "LISTEN: RSP with psp_flags");
                return DATP_OK;
        default:
                return refuse(reason, DATP_E_FIELD, "LISTEN: kind not PSP, PSP_ANY or RSP");
        }
}

static int check_listen_reply(const union datp_message *m, const char **reason)
{
        const struct datp_listen_reply *l = &m->listen_reply;
        int r = check_id_reply(&l->status, l->listener_id, l->reserved, reason);

        if (r < 0)
                return r;
        if (!status_is_success(&l->status) && l->conn_qual != 0)
                return refuse(reason, DATP_E_FIELD, "LISTEN reply: conn_qual set on failure");
        return DATP_OK;
}

/* Any ia_id and id: an unknown one is answered (DAT_INVALID_HANDLE). */
static int check_nothing(const union datp_message *m, const char **reason)
{
        (void) m;
        (void) reason;
        return DATP_OK;
}

static int check_connect(const union datp_message *m, const char **reason)
{
        const struct datp_connect *c = &m->connect;
        int r;

        if (c->flags & ~(uint32_t) DATP_CONNECT_DUP)
                return refuse(reason, DATP_E_FIELD, "CONNECT: unknown flags");
        if (c->ep_handle == 0)
                return refuse(reason, DATP_E_FIELD, "CONNECT: ep_handle 0");
        if (c->qos & ~DATP_QOS_MASK)
                return refuse(reason, DATP_E_FIELD, "CONNECT: qos has unknown bits");
        if (c->connect_flags & ~DATP_CONNECT_FLAGS_MASK)
                return refuse(reason, DATP_E_FIELD, "CONNECT: connect_flags unknown");
        if (c->flags & DATP_CONNECT_DUP) {
                /* dat_ep_dup_connect(3DAT): the remote end is the duplicated
                 * connection's; the request names none. */
                if (c->dup_of_conn_id == 0)
                        return refuse(reason, DATP_E_FIELD, "CONNECT: DUP without dup_of_conn_id");
                if (c->remote_address_len != 0 || c->remote_conn_qual != 0)
                        return refuse(reason, DATP_E_FIELD, "CONNECT: DUP names a remote end");
                r = check_address(&c->remote_address, 0, reason);
        } else {
                if (c->dup_of_conn_id != 0)
                        return refuse(reason, DATP_E_FIELD, "CONNECT: dup_of_conn_id without DUP");
                r = check_remote_address(&c->remote_address, c->remote_address_len, reason);
        }
        if (r < 0)
                return r;
        return check_private_data(c->pd_len, c->private_data, reason);
}

static int check_connect_reply(const union datp_message *m, const char **reason)
{
        const struct datp_connect_reply *c = &m->connect_reply;

        return check_id_reply(&c->status, c->conn_id, c->reserved, reason);
}

static int check_cr_accept(const union datp_message *m, const char **reason)
{
        const struct datp_cr_accept *a = &m->cr_accept;

        if (a->reserved != 0)
                return refuse(reason, DATP_E_FIELD, "CR_ACCEPT: reserved not zero");
        return check_private_data(a->pd_len, a->private_data, reason);
}

static int check_cr_accept_reply(const union datp_message *m, const char **reason)
{
        const struct datp_cr_accept_reply *a = &m->cr_accept_reply;

        return check_id_reply(&a->status, a->conn_id, a->reserved, reason);
}

static int check_cr_reject(const union datp_message *m, const char **reason)
{
        const struct datp_cr_reject *r = &m->cr_reject;

        if (r->flags & ~(uint32_t)DATP_CR_REJECT_NON_PEER)
                return refuse(reason, DATP_E_FIELD, "CR_REJECT: unknown flags");
        if ((r->flags & DATP_CR_REJECT_NON_PEER) && r->pd_len != 0)
                return refuse(reason, DATP_E_FIELD, "CR_REJECT: a non-peer reject carries no private data");
        return check_private_data(r->pd_len, r->private_data, reason);
}

static int check_disconnect(const union datp_message *m, const char **reason)
{
        const struct datp_disconnect *d = &m->disconnect;
        uint32_t close = d->flags & ~DATP_DISCONNECT_NO_EVENT;

        if (close != DATP_CLOSE_ABRUPT && close != DATP_CLOSE_GRACEFUL)
                return refuse(reason, DATP_E_FIELD, "DISCONNECT: flags neither abrupt nor graceful");
        if ((d->flags & DATP_DISCONNECT_NO_EVENT) && d->hdr.version < 2)
                return refuse(reason, DATP_E_FIELD, "DISCONNECT: NO_EVENT is version 2's");
        if (d->reserved != 0)
                return refuse(reason, DATP_E_FIELD, "DISCONNECT: reserved not zero");
        return DATP_OK;
}

static int check_ev_conn_request(const union datp_message *m, const char **reason)
{
        const struct datp_ev_conn_request *e = &m->ev_conn_request;
        int r = check_event_header(&e->hdr, reason);

        if (r < 0)
                return r;
        if (e->listener_id == 0 || e->cr_id == 0)
                return refuse(reason, DATP_E_FIELD, "EV_CONN_REQUEST: listener_id or cr_id 0");
        if (e->reserved != 0)
                return refuse(reason, DATP_E_FIELD, "EV_CONN_REQUEST: reserved not zero");
        r = check_remote_address(&e->remote_address, e->remote_address_len, reason);
        if (r < 0)
                return r;
        return check_private_data(e->pd_len, e->private_data, reason);
}

static int check_ev_conn(const union datp_message *m, const char **reason)
{
        const struct datp_ev_conn *e = &m->ev_conn;
        int r = check_event_header(&e->hdr, reason);

        if (r < 0)
                return r;
        if (e->conn_id == 0)
                return refuse(reason, DATP_E_FIELD, "EV_CONN: conn_id 0");
        if (e->event < DATP_EV_CONN_FIRST || e->event > DATP_EV_CONN_LAST)
                return refuse(reason, DATP_E_FIELD, "EV_CONN: event not a DAT_CONNECTION_EVENT");
        /* Only the peer's accept or reject carries private data. */
        if (e->pd_len != 0 && e->event != DATP_EV_CONN_ESTABLISHED &&
            e->event != DATP_EV_CONN_PEER_REJECTED)
                return refuse(reason, DATP_E_FIELD, "EV_CONN: private data on an event without any");
        return check_private_data(e->pd_len, e->private_data, reason);
}

/* Ring sizes of a shm data channel: powers of two in [4 KiB, 64 MiB]
 * (libdat/shm_link.h, SHM_LINK_RING_MIN/MAX; proto/ does not include it).
 * How region_size follows from ring_size is libdat's to check when it
 * attaches (shm_link_attach): here only that it can hold two such rings. */
#define DATP_CHANNEL_RING_MIN 4096u
#define DATP_CHANNEL_RING_MAX (64u << 20)

/* An EV_DATA_CHANNEL's fields; in_kept: the one an EV_CONN_KEPT stands
 * for, the only place a reused channel (REUSE, no descriptors) is. */
static int check_data_channel(const struct datp_ev_data_channel *e, bool in_kept,
                              const char **reason)
{
        int r = check_event_header(&e->hdr, reason);

        if (r < 0)
                return r;
        if (e->conn_id == 0 || e->ep_handle == 0)
                return refuse(reason, DATP_E_FIELD, "EV_DATA_CHANNEL: conn_id or ep_handle 0");
        if ((e->flags & ~(DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP | DATP_CHANNEL_REUSE)) != 0)
                return refuse(reason, DATP_E_FIELD, "EV_DATA_CHANNEL: a flag not defined");
        if ((e->flags & DATP_CHANNEL_PIPES) && (e->kind != DATP_CHANNEL_SHM || e->hdr.version < 3))
                return refuse(reason, DATP_E_FIELD,
                              "EV_DATA_CHANNEL: PIPES is version 3's, and only for shm");
        /* KEEP and REUSE: version 4, shm with pipes, a channel_id. */
        if ((e->flags & (DATP_CHANNEL_KEEP | DATP_CHANNEL_REUSE)) &&
            (e->hdr.version < 4 || !(e->flags & DATP_CHANNEL_PIPES)))
                return refuse(reason, DATP_E_FIELD,
                              "EV_DATA_CHANNEL: KEEP and REUSE are version 4's, and only with PIPES");
        if (!(e->flags & DATP_CHANNEL_REUSE) != !in_kept)
                return refuse(reason, DATP_E_FIELD,
                              "EV_DATA_CHANNEL: REUSE outside EV_CONN_KEPT, or missing in it");
        if (!(e->flags & DATP_CHANNEL_KEEP) != (e->channel_id == 0))
                return refuse(reason, DATP_E_FIELD,
                              "EV_DATA_CHANNEL: channel_id without KEEP, or KEEP without one");
        if (e->peer_pid < 0 || (e->peer_pid == 0 && e->peer_uid != 0))
                return refuse(reason, DATP_E_FIELD,
                              "EV_DATA_CHANNEL: peer_pid negative, or a peer_uid without it");
        switch (e->kind) {
        case DATP_CHANNEL_SHM:
                /* A reused channel's descriptors are the client's already. */
                if (!in_kept && (e->nfds < datp_channel_shm_fds(e->flags) ||
                                 e->nfds > datp_channel_shm_fds(e->flags) + 1))
                        return refuse(reason, DATP_E_FIELD,
                                      e->flags & DATP_CHANNEL_PIPES
                                              ? "EV_DATA_CHANNEL: shm with pipes, with neither 4 nor 5 descriptors"
                                              : "EV_DATA_CHANNEL: shm with neither 3 nor 4 descriptors");
                if (e->side > 1)
                        return refuse(reason, DATP_E_FIELD, "EV_DATA_CHANNEL: side neither 0 nor 1");
                if (e->ring_size < DATP_CHANNEL_RING_MIN || e->ring_size > DATP_CHANNEL_RING_MAX ||
                    (e->ring_size & (e->ring_size - 1)) != 0)
                        return refuse(reason, DATP_E_FIELD,
                                      "EV_DATA_CHANNEL: ring_size not a power of two in [4 KiB, 64 MiB]");
                if (e->region_size <= 2 * (uint64_t) e->ring_size ||
                    e->region_size > 4 * (uint64_t) DATP_CHANNEL_RING_MAX)
                        return refuse(reason, DATP_E_FIELD,
                                      "EV_DATA_CHANNEL: region_size cannot hold the two rings");
                return DATP_OK;
        case DATP_CHANNEL_TCP:
                if (e->nfds != 1)
                        return refuse(reason, DATP_E_FIELD,
                                      "EV_DATA_CHANNEL: tcp with other than 1 descriptor");
                if (e->region_size != 0 || e->ring_size != 0 || e->side != 0)
                        return refuse(reason, DATP_E_FIELD,
                                      "EV_DATA_CHANNEL: tcp with shm fields set");
                return DATP_OK;
        default:
                return refuse(reason, DATP_E_FIELD, "EV_DATA_CHANNEL: kind neither shm nor tcp");
        }
}

static int check_ev_data_channel(const union datp_message *m, const char **reason)
{
        return check_data_channel(&m->ev_data_channel, false, reason);
}

static int check_channel_release(const union datp_message *m, const char **reason)
{
        if (m->channel_release.channel_id == 0)
                return refuse(reason, DATP_E_FIELD, "CHANNEL_RELEASE: channel_id 0");
        return DATP_OK;
}

static int check_ev_channel_drop(const union datp_message *m, const char **reason)
{
        int r = check_event_header(&m->hdr, reason);

        if (r < 0)
                return r;
        if (m->ev_channel_drop.channel_id == 0)
                return refuse(reason, DATP_E_FIELD, "EV_CHANNEL_DROP: channel_id 0");
        return DATP_OK;
}

/* What the EV_DATA_CHANNEL and EV_CONN it stands for must be. */
static int check_ev_conn_kept(const union datp_message *m, const char **reason)
{
        struct datp_ev_data_channel ch;
        union datp_message conn;
        int r = check_event_header(&m->hdr, reason);

        if (r < 0)
                return r;
        datp_ev_conn_kept_split(&m->ev_conn_kept, &ch, &conn.ev_conn);
        r = check_data_channel(&ch, true, reason);
        if (r < 0)
                return r;
        return check_ev_conn(&conn, reason);
}

/* The descriptors attached: none, except on a type that carries them, and
 * then exactly as many as the message says (read before its other fields). */
static int check_fds(const struct datp_type_rule *rule, const union datp_message *m, unsigned nfds,
                     const char **reason)
{
        if (!rule->fds)
                return nfds == 0 ? DATP_OK
                                 : refuse(reason, DATP_E_FDS, "file descriptors attached");
        if (nfds == 0 || nfds > DATP_CHANNEL_MAX_FDS || m->ev_data_channel.nfds != nfds)
                return refuse(reason, DATP_E_FDS,
                              "EV_DATA_CHANNEL: descriptors attached differ from its nfds");
        return DATP_OK;
}

#define REPLY(t) ((uint16_t) ((t) | DATP_REPLY))

static const struct datp_type_rule rules[] = {
        { DATP_HELLO, DATP_TO_DAEMON, true, false, sizeof(struct datp_hello),
          "HELLO", check_hello },
        { REPLY(DATP_HELLO), DATP_TO_CLIENT, true, false, sizeof(struct datp_hello_reply),
          "HELLO reply", check_hello_reply },
        { DATP_IA_OPEN, DATP_TO_DAEMON, false, false, sizeof(struct datp_ia_open),
          "IA_OPEN", check_ia_open },
        { REPLY(DATP_IA_OPEN), DATP_TO_CLIENT, false, false, sizeof(struct datp_ia_open_reply),
          "IA_OPEN reply", check_ia_open_reply },
        { DATP_IA_CLOSE, DATP_TO_DAEMON, false, false, sizeof(struct datp_ia_close),
          "IA_CLOSE", check_ia_close },
        { REPLY(DATP_IA_CLOSE), DATP_TO_CLIENT, false, false, sizeof(struct datp_ia_close_reply),
          "IA_CLOSE reply", check_reply_status },
        { DATP_IA_QUERY, DATP_TO_DAEMON, false, false, sizeof(struct datp_ia_query),
          "IA_QUERY", check_ia_query },
        { REPLY(DATP_IA_QUERY), DATP_TO_CLIENT, false, false, sizeof(struct datp_ia_query_reply),
          "IA_QUERY reply", check_ia_query_reply },
        { DATP_OBJ_CREATE, DATP_TO_DAEMON, false, false, sizeof(struct datp_obj_create),
          "OBJ_CREATE", check_obj_create },
        { REPLY(DATP_OBJ_CREATE), DATP_TO_CLIENT, false, false, sizeof(struct datp_obj_create_reply),
          "OBJ_CREATE reply", check_obj_create_reply },
        { DATP_OBJ_UPDATE, DATP_TO_DAEMON, false, false, sizeof(struct datp_obj_update),
          "OBJ_UPDATE", check_obj_update },
        { REPLY(DATP_OBJ_UPDATE), DATP_TO_CLIENT, false, false, sizeof(struct datp_obj_update_reply),
          "OBJ_UPDATE reply", check_reply_status },
        { DATP_OBJ_DESTROY, DATP_TO_DAEMON, false, false, sizeof(struct datp_obj_destroy),
          "OBJ_DESTROY", check_obj_destroy },
        { REPLY(DATP_OBJ_DESTROY), DATP_TO_CLIENT, false, false, sizeof(struct datp_obj_destroy_reply),
          "OBJ_DESTROY reply", check_reply_status },
        { DATP_LISTEN, DATP_TO_DAEMON, false, false, sizeof(struct datp_listen),
          "LISTEN", check_listen },
        { REPLY(DATP_LISTEN), DATP_TO_CLIENT, false, false, sizeof(struct datp_listen_reply),
          "LISTEN reply", check_listen_reply },
        { DATP_UNLISTEN, DATP_TO_DAEMON, false, false, sizeof(struct datp_unlisten),
          "UNLISTEN", check_nothing },
        { REPLY(DATP_UNLISTEN), DATP_TO_CLIENT, false, false, sizeof(struct datp_unlisten_reply),
          "UNLISTEN reply", check_reply_status },
        { DATP_CONNECT, DATP_TO_DAEMON, false, false, sizeof(struct datp_connect),
          "CONNECT", check_connect },
        { REPLY(DATP_CONNECT), DATP_TO_CLIENT, false, false, sizeof(struct datp_connect_reply),
          "CONNECT reply", check_connect_reply },
        { DATP_CR_ACCEPT, DATP_TO_DAEMON, false, false, sizeof(struct datp_cr_accept),
          "CR_ACCEPT", check_cr_accept },
        { REPLY(DATP_CR_ACCEPT), DATP_TO_CLIENT, false, false, sizeof(struct datp_cr_accept_reply),
          "CR_ACCEPT reply", check_cr_accept_reply },
        { DATP_CR_REJECT, DATP_TO_DAEMON, false, false, sizeof(struct datp_cr_reject),
          "CR_REJECT", check_cr_reject },
        { REPLY(DATP_CR_REJECT), DATP_TO_CLIENT, false, false, sizeof(struct datp_cr_reject_reply),
          "CR_REJECT reply", check_reply_status },
        { DATP_CR_HANDOFF, DATP_TO_DAEMON, false, false, sizeof(struct datp_cr_handoff),
          "CR_HANDOFF", check_nothing },
        { REPLY(DATP_CR_HANDOFF), DATP_TO_CLIENT, false, false, sizeof(struct datp_cr_handoff_reply),
          "CR_HANDOFF reply", check_reply_status },
        { DATP_DISCONNECT, DATP_TO_DAEMON, false, false, sizeof(struct datp_disconnect),
          "DISCONNECT", check_disconnect },
        { REPLY(DATP_DISCONNECT), DATP_TO_CLIENT, false, false, sizeof(struct datp_disconnect_reply),
          "DISCONNECT reply", check_reply_status },
        { DATP_CHANNEL_RELEASE, DATP_TO_DAEMON, false, false, sizeof(struct datp_channel_release),
          "CHANNEL_RELEASE", check_channel_release },
        { REPLY(DATP_CHANNEL_RELEASE), DATP_TO_CLIENT, false, false,
          sizeof(struct datp_channel_release_reply), "CHANNEL_RELEASE reply",
          check_reply_status },
        { DATP_EV_CONN_REQUEST, DATP_TO_CLIENT, false, false, sizeof(struct datp_ev_conn_request),
          "EV_CONN_REQUEST", check_ev_conn_request },
        { DATP_EV_CONN, DATP_TO_CLIENT, false, false, sizeof(struct datp_ev_conn),
          "EV_CONN", check_ev_conn },
        { DATP_EV_DATA_CHANNEL, DATP_TO_CLIENT, false, true, sizeof(struct datp_ev_data_channel),
          "EV_DATA_CHANNEL", check_ev_data_channel },
        { DATP_EV_CHANNEL_DROP, DATP_TO_CLIENT, false, false, sizeof(struct datp_ev_channel_drop),
          "EV_CHANNEL_DROP", check_ev_channel_drop },
        { DATP_EV_CONN_KEPT, DATP_TO_CLIENT, false, false, sizeof(struct datp_ev_conn_kept),
          "EV_CONN_KEPT", check_ev_conn_kept },
        { DATP_ERROR, DATP_TO_CLIENT, true, false, sizeof(struct datp_error),
          "ERROR", check_error },
};

static const struct datp_type_rule *rule_of(uint16_t type)
{
        for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
                if (rules[i].type == type)
                        return &rules[i];
        return NULL;
}

size_t datp_message_size(uint16_t type)
{
        const struct datp_type_rule *rule = rule_of(type);

        return rule ? rule->size : 0;
}

const char *datp_type_name(uint16_t type)
{
        const struct datp_type_rule *rule = rule_of(type);

        return rule ? rule->name : "unknown";
}

static bool version_known(uint16_t version)
{
        return version >= DATP_VERSION_MIN && version <= DATP_VERSION_MAX;
}

/* Magic and length: the parts of the header every version shares. */
static int check_framing(const struct datp_header *hdr, size_t len, const char **reason)
{
        if (hdr->magic != DATP_MAGIC)
                return refuse(reason, DATP_E_MAGIC, "bad magic");
        if (hdr->length != len)
                return refuse(reason, DATP_E_LENGTH, "header length differs from the packet's");
        return DATP_OK;
}

/* Whether this type may arrive now, and with this header version. */
static int check_state(const struct datp_type_rule *rule, const struct datp_header *hdr,
                       uint16_t version, const char **reason)
{
        if (version == 0) {
                if (!rule->before_hello)
                        return refuse(reason, DATP_E_STATE, "message before HELLO");
                /* HELLO and ERROR keep their layout in every version; the
                 * HELLO reply's version is checked with its fields. */
                if (hdr->version == 0)
                        return refuse(reason, DATP_E_VERSION, "version 0");
                return DATP_OK;
        }
        if (rule->before_hello && rule->type != DATP_ERROR)
                return refuse(reason, DATP_E_STATE, "HELLO after the version was negotiated");
        return DATP_OK;
}

/* The first version that has the type: in an older one it is unknown
 * (section 7: the type is checked before its direction and size). */
static uint16_t type_since(uint16_t type)
{
        switch (type & ~DATP_REPLY) {
        case DATP_CHANNEL_RELEASE:
        case DATP_EV_CHANNEL_DROP:
        case DATP_EV_CONN_KEPT:
                return 4;
        default:
                return 1;
        }
}

static int validate_aligned(const union datp_message *m, size_t len, unsigned nfds,
                            enum datp_direction dir, uint16_t version, const char **reason)
{
        const struct datp_type_rule *rule;
        int r;

        r = check_framing(&m->hdr, len, reason);
        if (r < 0)
                return r;
        if (version != 0 && m->hdr.version != version)
                return refuse(reason, DATP_E_VERSION, "version differs from the negotiated one");
        rule = rule_of(m->hdr.type);
        if (!rule)
                return refuse(reason, DATP_E_TYPE, "unknown message type");
        if (m->hdr.version != 0 && m->hdr.version < type_since(m->hdr.type))
                return refuse(reason, DATP_E_TYPE, "message type unknown in this version");
        if (rule->dir != dir)
                return refuse(reason, DATP_E_DIRECTION, "message type sent the wrong way");
        r = check_state(rule, &m->hdr, version, reason);
        if (r < 0)
                return r;
        if (len != rule->size)
                return refuse(reason, DATP_E_SIZE, "wrong size for the message type");
        r = check_fds(rule, m, nfds, reason);
        if (r < 0)
                return r;
        return rule->check(m, reason);
}

int datp_validate(const void *buf, size_t len, unsigned nfds,
                  enum datp_direction dir, uint16_t version, const char **reason)
{
        union datp_message aligned;

        if (len < sizeof(struct datp_header))
                return refuse(reason, DATP_E_SHORT, "shorter than a header");
        if (len > DATP_MAX_MESSAGE)
                return refuse(reason, DATP_E_OVERSIZE, "longer than DATP_MAX_MESSAGE");
        /* A negotiated version this build does not speak has no layouts here. */
        if (version != 0 && !version_known(version))
                return refuse(reason, DATP_E_VERSION, "negotiated version unknown to this side");
        if ((uintptr_t) buf % _Alignof(union datp_message) != 0) {
                memcpy(&aligned, buf, len);
                buf = &aligned;
        }
        return validate_aligned(buf, len, nfds, dir, version, reason);
}

static const char *const decode_error_text[] = {
        [DATP_OK] = "valid",
        [DATP_E_SHORT] = "shorter than a header",
        [DATP_E_OVERSIZE] = "longer than the largest message",
        [DATP_E_MAGIC] = "bad magic",
        [DATP_E_VERSION] = "unsupported or unexpected protocol version",
        [DATP_E_LENGTH] = "header length differs from the packet",
        [DATP_E_TYPE] = "unknown message type",
        [DATP_E_DIRECTION] = "message type sent the wrong way",
        [DATP_E_SIZE] = "wrong size for the message type",
        [DATP_E_FIELD] = "field out of range or string not terminated",
        [DATP_E_FDS] = "file descriptors where none belong",
        [DATP_E_STATE] = "valid message at the wrong time",
};

const char *datp_decode_error_str(int code)
{
        /* Negated in unsigned arithmetic: -INT_MIN would overflow. */
        unsigned u = code < 0 ? 0u - (unsigned) code : (unsigned) code;

        if (u >= ARRAY_SIZE(decode_error_text))
                return "unknown decode error";
        return decode_error_text[u];
}
