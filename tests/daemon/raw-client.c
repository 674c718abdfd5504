#include "config.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/daemon/raw-client.h"

static uint32_t next_request_id = 1;

int raw_connect(const char *socket_path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

int raw_send_with_fd(int fd, const void *buf, size_t len, int passfd)
{
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } control;
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;

        if (passfd >= 0) {
                struct cmsghdr *cmsg;

                memset(&control, 0, sizeof(control));
                mh.msg_control = control.buf;
                mh.msg_controllen = sizeof(control.buf);
                cmsg = CMSG_FIRSTHDR(&mh);
                cmsg->cmsg_level = SOL_SOCKET;
                cmsg->cmsg_type = SCM_RIGHTS;
                cmsg->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cmsg), &passfd, sizeof(int));
        }
        n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (n < 0)
                return -errno;
        return (size_t) n == len ? 0 : -EIO;
}

int raw_send(int fd, const void *buf, size_t len)
{
        return raw_send_with_fd(fd, buf, len, -1);
}

ssize_t raw_recv(int fd, union datp_message *msg, int timeout_ms)
{
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t n;
        int r;

        do
                r = poll(&p, 1, timeout_ms);
        while (r < 0 && errno == EINTR);
        if (r < 0)
                return -errno;
        if (r == 0)
                return -ETIMEDOUT;
        n = recv(fd, msg, sizeof(*msg), MSG_DONTWAIT);
        if (n < 0)
                return errno == ECONNRESET ? 0 : -errno;
        return n;
}

int raw_wait_eof(int fd, int timeout_ms)
{
        union datp_message msg;

        for (;;) {
                ssize_t n = raw_recv(fd, &msg, timeout_ms);

                if (n == 0)
                        return 0;
                if (n < 0)
                        return (int) n;
        }
}

/* version: what the client negotiated, 0 while it waits for the HELLO reply. */
static int receive_valid(int fd, union datp_message *msg, uint16_t version)
{
        ssize_t n = raw_recv(fd, msg, RAW_TIMEOUT_MS);

        if (n < 0)
                return (int) n;
        if (n == 0)
                return -ECONNRESET;
        /* Every reply datd sends must pass the codec libdat uses. */
        if (datp_validate(msg, (size_t) n, 0, DATP_TO_CLIENT, version, NULL) < 0)
                return -EBADMSG;
        return 0;
}

int raw_expect_error(int fd, struct datp_error *e)
{
        union datp_message msg;
        /* ERROR is valid before and after HELLO alike. */
        int r = receive_valid(fd, &msg, 0);

        if (r < 0)
                return r;
        if (msg.hdr.type != DATP_ERROR)
                return -EBADMSG;
        *e = msg.error;
        return 0;
}

void raw_hello_init(struct datp_hello *h, uint16_t min_version, uint16_t max_version)
{
        memset(h, 0, sizeof(*h));
        datp_header_init(&h->hdr, DATP_HELLO, max_version, sizeof(*h), next_request_id++);
        h->min_version = min_version;
        h->max_version = max_version;
}

void raw_ia_open_init(struct datp_ia_open *o, const char *name)
{
        memset(o, 0, sizeof(*o));
        datp_header_init(&o->hdr, DATP_IA_OPEN, RAW_VERSION, sizeof(*o), next_request_id++);
        datp_set_string(o->ia_name, sizeof(o->ia_name), name);
}

void raw_ia_query_init(struct datp_ia_query *q, uint32_t ia_id)
{
        memset(q, 0, sizeof(*q));
        datp_header_init(&q->hdr, DATP_IA_QUERY, RAW_VERSION, sizeof(*q), next_request_id++);
        q->ia_id = ia_id;
}

void raw_ia_close_init(struct datp_ia_close *c, uint32_t ia_id, uint32_t flags)
{
        memset(c, 0, sizeof(*c));
        datp_header_init(&c->hdr, DATP_IA_CLOSE, RAW_VERSION, sizeof(*c), next_request_id++);
        c->ia_id = ia_id;
        c->flags = flags;
}

/* Sends req and takes its reply into reply (size bytes). */
static int raw_call(int fd, const struct datp_header *req, void *reply, size_t size)
{
        union datp_message msg;
        int r;

        r = raw_send(fd, req, req->length);
        if (r < 0)
                return r;
        r = receive_valid(fd, &msg, req->type == DATP_HELLO ? 0 : RAW_VERSION);
        if (r < 0)
                return r;
        if (msg.hdr.type == DATP_ERROR)
                return -EPROTO;
        if (msg.hdr.type != (req->type | DATP_REPLY) || msg.hdr.request_id != req->request_id ||
            msg.hdr.length != size)
                return -EBADMSG;
        memcpy(reply, &msg, size);
        return 0;
}

uint16_t raw_version = DATP_VERSION_MAX;

int raw_hello(int fd)
{
        struct datp_hello_reply reply;
        struct datp_hello h;

        raw_hello_init(&h, DATP_VERSION_MIN, raw_version);
        return raw_call(fd, &h.hdr, &reply, sizeof(reply));
}

int raw_ia_open(int fd, const char *name, struct datp_ia_open_reply *reply)
{
        struct datp_ia_open o;

        raw_ia_open_init(&o, name);
        return raw_call(fd, &o.hdr, reply, sizeof(*reply));
}

int raw_ia_query(int fd, uint32_t ia_id, struct datp_ia_query_reply *reply)
{
        struct datp_ia_query q;

        raw_ia_query_init(&q, ia_id);
        return raw_call(fd, &q.hdr, reply, sizeof(*reply));
}

int raw_ia_close(int fd, uint32_t ia_id, uint32_t flags, struct datp_ia_close_reply *reply)
{
        struct datp_ia_close c;

        raw_ia_close_init(&c, ia_id, flags);
        return raw_call(fd, &c.hdr, reply, sizeof(*reply));
}

int raw_obj_create(int fd, uint32_t ia_id, const struct datp_obj_desc *desc,
                   struct datp_obj_create_reply *reply)
{
        struct datp_obj_create o = { .ia_id = ia_id, .desc = *desc };

        datp_header_init(&o.hdr, DATP_OBJ_CREATE, RAW_VERSION, sizeof(o), next_request_id++);
        return raw_call(fd, &o.hdr, reply, sizeof(*reply));
}

int raw_obj_update(int fd, uint32_t ia_id, uint32_t obj_id, const struct datp_obj_desc *desc,
                   struct datp_obj_update_reply *reply)
{
        struct datp_obj_update u = { .ia_id = ia_id, .obj_id = obj_id, .desc = *desc };

        datp_header_init(&u.hdr, DATP_OBJ_UPDATE, RAW_VERSION, sizeof(u), next_request_id++);
        return raw_call(fd, &u.hdr, reply, sizeof(*reply));
}

int raw_obj_destroy(int fd, uint32_t ia_id, uint32_t obj_id, struct datp_obj_destroy_reply *reply)
{
        return raw_obj_destroy_named(fd, ia_id, obj_id, 0, reply);
}

int raw_obj_destroy_named(int fd, uint32_t ia_id, uint32_t obj_id, uint64_t ep_handle,
                          struct datp_obj_destroy_reply *reply)
{
        struct datp_obj_destroy d = { .ia_id = ia_id, .obj_id = obj_id, .ep_handle = ep_handle };

        datp_header_init(&d.hdr, DATP_OBJ_DESTROY, RAW_VERSION, sizeof(d), next_request_id++);
        return raw_call(fd, &d.hdr, reply, sizeof(*reply));
}

void raw_obj_desc(struct datp_obj_desc *d, uint32_t kind, uint64_t handle, uint64_t length)
{
        memset(d, 0, sizeof(*d));
        d->kind = kind;
        d->handle = handle;
        switch (kind) {
        case DATP_OBJ_EVD:
                d->qlen = 64;
                break;
        case DATP_OBJ_LMR:
                d->length = length;
                d->pz_handle = 0x5000;
                break;
        case DATP_OBJ_RMR:
                d->pz_handle = 0x5000;
                break;
        case DATP_OBJ_EP:
                d->pz_handle = 0x5000;
                d->max_recv_dtos = 16;
                d->max_request_dtos = 32;
                d->max_recv_iov = 2;
                d->max_request_iov = 3;
                d->max_message_size = 4096;
                break;
        case DATP_OBJ_SRQ:
                d->pz_handle = 0x5000;
                d->qlen = 128;
                d->max_recv_iov = 1;
                d->state = 1; /* DAT_SRQ_STATE_OPERATIONAL */
                break;
        default:
                break;
        }
}

int raw_connect_hello(const char *socket_path)
{
        int fd = raw_connect(socket_path), r;

        if (fd < 0)
                return fd;
        r = raw_hello(fd);
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}
