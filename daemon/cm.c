/* CM links (cm.h): framing, HELLO, keepalive and loss of the TCP links
 * between datds.  What the messages mean is conn.c's. */
#include <config.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/cm.h"
#include "daemon/host_addrs.h"
#include "daemon/list.h"
#include "daemon/log.h"
#include "daemon/manager.h"
#include "daemon/netif.h"

_Static_assert(sizeof(struct cm_header) == 16, "CM header layout");
_Static_assert(sizeof(struct cm_hello) == 16 + 56, "CM HELLO layout");
_Static_assert(sizeof(struct cm_addr) == 20, "CM address layout");
_Static_assert(sizeof(struct cm_conn) == 16 + 32 + 40 + DATP_PRIVATE_DATA_MAX + CM_TOKEN_SIZE,
               "CM conn layout");
_Static_assert(sizeof(struct cm_data) == 16 + 32, "CM DATA layout");
_Static_assert(sizeof(struct cm_data) <= CM_MAX_MESSAGE, "DATA fits the read buffer");

/* Messages handled per link per wakeup: a peer that floods its link waits
 * its turn behind the clients, the other links and the keepalive timer
 * (the source is level-triggered: the rest is read on the next turn). */
#define CM_BATCH 64

struct CmLink {
        Manager *manager;
        int fd;
        sd_event_source *io;
        struct sockaddr_storage addr;   /* the peer's IP, port 0 */
        socklen_t addr_len;
        bool outgoing;
        bool connecting;                /* outgoing, TCP handshake not done */
        bool up;                        /* the peer's HELLO arrived */
        bool hello_sent;                /* incoming: only once the peer's first message said
                                           it is a link (HELLO), not a data connection */
        bool dead;                      /* its peer stopped reading: freed by free_later */
        sd_event_source *free_later;
        unsigned holds;                 /* cm_link_hold: nothing more is read while > 0 */
        uint8_t host_id[16];
        uint8_t rbuf[CM_MAX_MESSAGE] __attribute__((aligned(8))); /* read as the structs */
        size_t rlen;
        uint8_t *wbuf;
        size_t wlen, wcap;
        uint64_t last_rx_usec;
        uint64_t identify_by_usec;      /* incoming: its first whole message is due by then */
        LIST_FIELDS(CmLink, links);
};

static uint64_t now_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

const struct sockaddr_storage *cm_link_address(const CmLink *l, socklen_t *len)
{
        *len = l->addr_len;
        return &l->addr;
}

Manager *cm_link_manager(const CmLink *l)
{
        return l->manager;
}

/* Incoming sockets on the CM port not identified yet, per max_cm_links. */
#define CM_UNIDENTIFIED_PER_LINK 16u

bool cm_link_is_up(const CmLink *l)
{
        return l->up;
}

uint32_t cm_n_links(Manager *m)
{
        return m->n_cm_links;
}

static void link_describe(const CmLink *l, char *buf, size_t size)
{
        sockaddr_to_string((const struct sockaddr *) &l->addr, l->addr_len, buf, size);
}

/* Unlinks and frees l; with lost, conn.c first drops every connection over
 * it (a data connection never had any). */
static void link_release(CmLink *l, bool lost)
{
        Manager *m = l->manager;
        bool was_up = l->up;

        LIST_REMOVE(links, m->cm_links, l);
        if (l->outgoing || l->up)
                m->n_cm_links--;
        else
                m->n_cm_unidentified--;
        sd_event_source_disable_unref(l->io);
        l->io = NULL;
        sd_event_source_disable_unref(l->free_later);
        /* conn.c drops every connection over the link; it may not send on it. */
        if (lost)
                conn_cm_link_lost(l, was_up);
        if (l->fd >= 0)
                close(l->fd);
        free(l->wbuf);
        free(l);
}

static void link_free(CmLink *l, const char *why)
{
        char a[SOCKADDR_STRING_MAX];

        link_describe(l, a, sizeof(a));
        log_full(l->up ? LOG_WARNING : LOG_INFO, "CM link to %s (%s): %s.", a,
                 l->outgoing ? "outgoing" : "incoming", why);
        link_release(l, true);
}

/* What the link waits for: the peer's messages unless held, and room to
 * send while bytes wait. */
static uint32_t link_events(const CmLink *l)
{
        return (l->holds ? 0 : EPOLLIN) | (l->wlen > 0 ? EPOLLOUT : 0);
}

static int link_flush(CmLink *l)
{
        while (l->wlen > 0) {
                ssize_t n = send(l->fd, l->wbuf, l->wlen, MSG_NOSIGNAL | MSG_DONTWAIT);

                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        return -errno;
                }
                memmove(l->wbuf, l->wbuf + n, l->wlen - (size_t) n);
                l->wlen -= (size_t) n;
        }
        return sd_event_source_set_io_events(l->io, link_events(l));
}

void cm_link_hold(CmLink *l, bool hold)
{
        if (hold)
                l->holds++;
        else if (l->holds > 0 && --l->holds > 0)
                return;
        /* Connecting: link_flush sets its events once the handshake is done. */
        if (l->io && !l->connecting && sd_event_source_set_io_events(l->io, link_events(l)) < 0)
                shutdown(l->fd, SHUT_RDWR);     /* the next read reports it */
}

static int link_on_dead(sd_event_source *s, void *userdata)
{
        link_free(userdata, "its peer reads nothing: max_cm_send_bytes unsent");
        return 0;
}

/* A link whose peer stopped reading is lost, and freed from a deferred
 * source: whoever sends (conn.c, the keepalive timer) may go on using it
 * until it returns.  Only switched off, it was never freed when that
 * happened outside link_on_io: nothing read its socket to the end any
 * more, and the bytes left there counted as heard (cm_on_tick). */
static void link_kill(CmLink *l)
{
        l->dead = true;
        sd_event_source_set_enabled(l->io, SD_EVENT_OFF);
        shutdown(l->fd, SHUT_RDWR);
        if (sd_event_add_defer(l->manager->event, &l->free_later, link_on_dead, l) < 0)
                log_oom();      /* cm_on_tick frees it */
}

/* Appends a wire-order message; sends now unless the link is connecting. */
static void link_queue(CmLink *l, const void *msg, size_t len)
{
        if (l->dead)
                return;
        if (l->wlen + len > l->manager->config->limits.max_cm_send_bytes) {
                log_warning("CM link: %zu bytes unsent, dropping it.", l->wlen);
                link_kill(l);
                return;
        }
        if (l->wlen + len > l->wcap) {
                size_t cap = l->wcap ? l->wcap * 2 : 4096;
                uint8_t *b;

                while (cap < l->wlen + len)
                        cap *= 2;
                b = realloc(l->wbuf, cap);
                if (!b) {
                        log_oom();
                        return;
                }
                l->wbuf = b;
                l->wcap = cap;
        }
        memcpy(l->wbuf + l->wlen, msg, len);
        l->wlen += len;
        if (!l->connecting && link_flush(l) < 0)
                shutdown(l->fd, SHUT_RDWR);     /* the next read reports it */
}

static void header_init(struct cm_header *h, uint16_t type, size_t len)
{
        h->magic = htonl(CM_MAGIC);
        h->version = htons(CM_VERSION);
        h->type = htons(type);
        h->length = htonl((uint32_t) len);
        h->reserved = 0;
}

static void send_hello(CmLink *l)
{
        Manager *m = l->manager;
        struct cm_hello h = {};

        header_init(&h.hdr, CM_HELLO, sizeof(h));
        memcpy(h.host_id, m->host_id.bytes, sizeof(h.host_id));
        snprintf(h.version, sizeof(h.version), "%s", PACKAGE_VERSION);
        h.keepalive_ms = htonl(m->config->cm_keepalive_ms);
        l->hello_sent = true;
        link_queue(l, &h, sizeof(h));
}

static void addr_to_wire(const struct cm_addr *in, struct cm_addr *out)
{
        *out = *in;
        out->family = htons(in->family);
}

void cm_send_conn(CmLink *l, uint16_t type, const struct cm_conn *b)
{
        struct cm_conn w = {};

        header_init(&w.hdr, type, sizeof(w));
        w.src_conn_id = htonl(b->src_conn_id);
        w.dst_conn_id = htonl(b->dst_conn_id);
        w.reason = htonl(b->reason);
        w.pid = htonl(b->pid);
        w.conn_qual = htobe64(b->conn_qual);
        w.qos = htonl(b->qos);
        w.pd_len = htonl(b->pd_len);
        addr_to_wire(&b->src, &w.src);
        addr_to_wire(&b->dst, &w.dst);
        memcpy(w.private_data, b->private_data, b->pd_len <= DATP_PRIVATE_DATA_MAX ? b->pd_len : 0);
        memcpy(w.token, b->token, sizeof(w.token));
        link_queue(l, &w, sizeof(w));
}

void cm_data_message(struct cm_data *out, uint32_t dst_conn_id, uint32_t src_conn_id,
                     const uint8_t token[CM_TOKEN_SIZE])
{
        memset(out, 0, sizeof(*out));
        header_init(&out->hdr, CM_DATA, sizeof(*out));
        out->dst_conn_id = htonl(dst_conn_id);
        out->src_conn_id = htonl(src_conn_id);
        memcpy(out->token, token, CM_TOKEN_SIZE);
}

int cm_data_socket(const CmLink *l)
{
        struct sockaddr_storage to = l->addr;
        int fd;

        if (to.ss_family == AF_INET)
                ((struct sockaddr_in *) &to)->sin_port = htons(l->manager->config->cm_port);
        else
                ((struct sockaddr_in6 *) &to)->sin6_port = htons(l->manager->config->cm_port);
        fd = socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &to, l->addr_len) < 0 && errno != EINPROGRESS) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

/* An incoming connection whose first message is DATA: conn.c takes the
 * socket (and nothing past the message has been read), or it is closed. */
static void link_hand_over(CmLink *l)
{
        struct cm_data d;
        char a[SOCKADDR_STRING_MAX];

        memcpy(&d, l->rbuf, sizeof(d));
        d.dst_conn_id = ntohl(d.dst_conn_id);
        d.src_conn_id = ntohl(d.src_conn_id);
        link_describe(l, a, sizeof(a));
        /* Out of the event loop before conn.c may pass the socket on and
         * close it: epoll would keep watching the file in flight. */
        l->io = sd_event_source_disable_unref(l->io);
        if (conn_cm_data(l->manager, l->fd, &d)) {
                log_debug("Data connection from %s for connection %" PRIu32 " handed over.", a,
                          d.dst_conn_id);
                l->fd = -1;
        } else
                log_info("Data connection from %s for connection %" PRIu32 " closed: no end "
                         "waits for it with that token.", a, d.dst_conn_id);
        link_release(l, false);
}

static bool addr_from_wire(const struct cm_addr *in, struct cm_addr *out)
{
        *out = *in;
        out->family = ntohs(in->family);
        return out->family == AF_INET || out->family == AF_INET6;
}

/* The incoming link that is up from l's host, other than l, or NULL. */
static CmLink *link_incoming_from_same_host(const CmLink *l)
{
        CmLink *o;

        LIST_FOREACH(links, o, l->manager->cm_links)
                if (o != l && !o->outgoing && o->up &&
                    sockaddr_same_host((const struct sockaddr *) &o->addr,
                                       (const struct sockaddr *) &l->addr))
                        return o;
        return NULL;
}

/* Why a HELLO makes no link, or NULL.  A link is to another host's datd,
 * and what comes over it is served as another host's (conn.c's
 * remote_target), out of reach of datd.conf's allow_users and allow_groups,
 * which name this host's users: a link to datd itself (an address of this
 * host conn.c did not recognise) let any local user reach a restricted IA's
 * listeners, and so did a process of this host speaking CM to the port.
 * Only one datd serves a host (its cm_port is the one every datd connects
 * to), so neither is ever another datd. */
static const char *hello_refuses(const CmLink *l, const struct cm_hello *hello)
{
        Manager *m = l->manager;

        if (memcmp(hello->host_id, m->host_id.bytes, sizeof(hello->host_id)) == 0)
                return "its HELLO carries this datd's own host_id: a link to itself";
        if (!l->outgoing && host_addrs_holds(m->host_addrs, (const struct sockaddr *) &l->addr))
                return "it comes from an address of this host, where no other datd runs";
        return NULL;
}

/* One whole message in l->rbuf: false if it breaks the protocol. */
static bool link_dispatch(CmLink *l, const char **why)
{
        Manager *m = l->manager;
        const struct cm_header *h = (const struct cm_header *) l->rbuf;
        uint16_t type = ntohs(h->type);
        struct cm_conn c;

        if (type == CM_DATA && !l->outgoing && !l->up && !l->hello_sent) {
                if (ntohl(h->length) != sizeof(struct cm_data)) {
                        *why = "malformed DATA";
                        return false;
                }
                /* The caller sees l gone: *why NULL and false. */
                link_hand_over(l);
                *why = NULL;
                return false;
        }
        if (type == CM_HELLO) {
                const struct cm_hello *hello = (const struct cm_hello *) l->rbuf;
                char a[SOCKADDR_STRING_MAX], v[sizeof(hello->version) + 1] = "";

                if (l->up || ntohl(h->length) != sizeof(*hello)) {
                        *why = "unexpected or malformed HELLO";
                        return false;
                }
                memcpy(v, hello->version, sizeof(hello->version));
                for (char *p = v; *p; p++)
                        if (*p < 0x20 || *p > 0x7e)
                                *p = '?';
                *why = hello_refuses(l, hello);
                if (*why)
                        return false;
                memcpy(l->host_id, hello->host_id, sizeof(l->host_id));
                if (!l->outgoing) {
                        /* One link per pair of datds (PROTOCOL.md §14),
                         * else one host could take every link.  The same
                         * datd (its host_id, random per run) makes a new
                         * one only once it lost the one it had, which is
                         * then stale here: replaced.  Another host_id from
                         * that host while its link is up is refused: any
                         * process there could otherwise break every
                         * connection over it.  A datd that restarted gets
                         * its link once the old one is gone (its socket's
                         * end, or two keepalive periods). */
                        CmLink *old = link_incoming_from_same_host(l);

                        if (old && memcmp(old->host_id, l->host_id, sizeof(l->host_id)) != 0) {
                                *why = "another datd's link from that host is up";
                                return false;
                        }
                        if (old)
                                link_free(old, "replaced by a new link from the same datd");
                        if (m->n_cm_links >= m->config->limits.max_cm_links) {
                                log_warning("Refusing a CM link: max_cm_links (%" PRIu32
                                            ") reached.", m->config->limits.max_cm_links);
                                *why = "max_cm_links reached";
                                return false;
                        }
                        m->n_cm_unidentified--;
                        m->n_cm_links++;
                }
                l->up = true;
                if (!l->hello_sent)
                        send_hello(l);
                link_describe(l, a, sizeof(a));
                log_info("CM link to %s (%s) up: datd %s.", a, l->outgoing ? "outgoing" : "incoming", v);
                return true;
        }
        if (!l->up) {
                *why = "message before HELLO";
                return false;
        }
        if (type == CM_KEEPALIVE) {
                if (ntohl(h->length) != sizeof(*h)) {
                        *why = "malformed KEEPALIVE";
                        return false;
                }
                return true;
        }
        if (type < CM_CONNECT_REQ || type > CM_DISCONNECT || ntohl(h->length) != sizeof(c)) {
                *why = "unknown message type or wrong size";
                return false;
        }
        memcpy(&c, l->rbuf, sizeof(c));
        c.src_conn_id = ntohl(c.src_conn_id);
        c.dst_conn_id = ntohl(c.dst_conn_id);
        c.reason = ntohl(c.reason);
        c.pid = ntohl(c.pid);
        c.conn_qual = be64toh(c.conn_qual);
        c.qos = ntohl(c.qos);
        c.pd_len = ntohl(c.pd_len);
        if (c.pd_len > DATP_PRIVATE_DATA_MAX) {
                *why = "pd_len beyond the maximum";
                return false;
        }
        if (type == CM_CONNECT_REQ && (!addr_from_wire(&c.src, &c.src) ||
                                       !addr_from_wire(&c.dst, &c.dst))) {
                *why = "CONNECT_REQ address neither IPv4 nor IPv6";
                return false;
        }
        conn_cm_receive(l, type, &c);
        return true;
}

static int link_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        CmLink *l = userdata;
        /* A link that is going (HUP, ERR: epoll reports them whatever it
         * was asked) is read to its end, held or not: nothing it says
         * could be kept in order any more. */
        bool going = revents & (EPOLLHUP | EPOLLERR);
        const char *why = NULL;
        unsigned done = 0;
        int r;

        if (l->connecting && (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
                int err = 0;
                socklen_t len = sizeof(err);

                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                        err = errno;
                if (err) {
                        link_free(l, strerror(err));
                        return 0;
                }
                l->connecting = false;
        }
        if (revents & EPOLLOUT) {
                r = link_flush(l);
                if (r < 0) {
                        link_free(l, strerror(-r));
                        return 0;
                }
        }
        if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                return 0;
        for (;;) {
                const struct cm_header *h = (const struct cm_header *) l->rbuf;
                size_t want = sizeof(*h);
                ssize_t n;

                /* Held (before this call, or by the message just
                 * dispatched): read again once released. */
                if (l->holds && !going)
                        return 0;
                if (l->rlen >= sizeof(*h)) {
                        if (ntohl(h->magic) != CM_MAGIC || ntohs(h->version) != CM_VERSION) {
                                link_free(l, "bad magic or CM version");
                                return 0;
                        }
                        want = ntohl(h->length);
                        if (want < sizeof(*h) || want > CM_MAX_MESSAGE) {
                                link_free(l, "bad message length");
                                return 0;
                        }
                }
                if (l->rlen == want && want > sizeof(*h) - 1 && l->rlen >= sizeof(*h)) {
                        if (!link_dispatch(l, &why)) {
                                if (why)        /* else handed over and freed already */
                                        link_free(l, why);
                                return 0;
                        }
                        /* conn_cm_receive() may not free the link: it only
                         * sends, or holds it (what follows waits). */
                        l->rlen = 0;
                        /* Killed by what it sent (link_kill): what is
                         * still queued would make requests and
                         * connections on a link about to go. */
                        if (l->dead || ++done == CM_BATCH)
                                return 0;
                        continue;
                }
                n = recv(fd, l->rbuf + l->rlen, want - l->rlen, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        link_free(l, strerror(errno));
                        return 0;
                }
                if (n == 0) {
                        link_free(l, "closed by the peer");
                        return 0;
                }
                l->rlen += (size_t) n;
                l->last_rx_usec = now_usec();
        }
}

static CmLink *link_new(Manager *m, int fd, bool outgoing, const struct sockaddr_storage *ip,
                        socklen_t len)
{
        CmLink *l = calloc(1, sizeof(*l));
        int one = 1;

        if (!l) {
                close(fd);
                return NULL;
        }
        l->manager = m;
        l->fd = fd;
        l->outgoing = outgoing;
        l->connecting = outgoing;
        memcpy(&l->addr, ip, len);
        l->addr_len = len;
        if (l->addr.ss_family == AF_INET)
                ((struct sockaddr_in *) &l->addr)->sin_port = 0;
        else if (l->addr.ss_family == AF_INET6)
                ((struct sockaddr_in6 *) &l->addr)->sin6_port = 0;
        l->last_rx_usec = now_usec();
        l->identify_by_usec = l->last_rx_usec + 2 * (uint64_t) m->config->cm_keepalive_ms * 1000u;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (sd_event_add_io(m->event, &l->io, fd, outgoing ? EPOLLIN | EPOLLOUT : EPOLLIN,
                            link_on_io, l) < 0) {
                close(fd);
                free(l);
                return NULL;
        }
        LIST_PREPEND(links, m->cm_links, l);
        /* An incoming socket is a link only once its HELLO came; until then
         * (a data connection being handed over, most of the time) it counts
         * against its own bound. */
        if (outgoing)
                m->n_cm_links++;
        else
                m->n_cm_unidentified++;
        /* An incoming connection may be a data connection (DATA first), whose
         * bytes after DATA belong to the processes: it hears nothing from us.
         * A link answers the peer's HELLO. */
        if (outgoing)
                send_hello(l);
        return l;
}

CmLink *cm_link_get(Manager *m, const struct sockaddr_storage *ip, socklen_t len)
{
        struct sockaddr_storage to;
        char a[SOCKADDR_STRING_MAX];
        CmLink *l;
        int fd;

        /* Not an incoming connection that has not said HELLO yet: it may be a
         * data connection, where nothing of ours may be written. */
        LIST_FOREACH(links, l, m->cm_links)
                if ((l->outgoing || l->up) && !l->dead &&
                    sockaddr_same_host((const struct sockaddr *) &l->addr, (const struct sockaddr *) ip))
                        return l;
        sockaddr_to_string((const struct sockaddr *) ip, len, a, sizeof(a));
        if (m->n_cm_links >= m->config->limits.max_cm_links) {
                log_warning("No CM link to %s: max_cm_links (%" PRIu32 ") reached.", a,
                            m->config->limits.max_cm_links);
                return NULL;
        }
        memcpy(&to, ip, len);
        if (to.ss_family == AF_INET)
                ((struct sockaddr_in *) &to)->sin_port = htons(m->config->cm_port);
        else
                ((struct sockaddr_in6 *) &to)->sin6_port = htons(m->config->cm_port);
        fd = socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                log_warning_errno(-errno, "No CM link to %s: socket: %m", a);
                return NULL;
        }
        if (connect(fd, (struct sockaddr *) &to, len) < 0 && errno != EINPROGRESS) {
                log_info_errno(-errno, "No CM link to %s port %u: %m", a, m->config->cm_port);
                close(fd);
                return NULL;
        }
        log_debug("CM link to %s port %u: connecting.", a, m->config->cm_port);
        return link_new(m, fd, true, ip, len);
}

static int cm_on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        Manager *m = userdata;
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        int cfd = accept4(fd, (struct sockaddr *) &peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (cfd < 0)
                return 0;
        /* Sockets not identified yet: data connections of the connections
         * being set up (bounded by a timeout too), or links before HELLO. */
        if (m->n_cm_unidentified >= CM_UNIDENTIFIED_PER_LINK * m->config->limits.max_cm_links) {
                log_warning("Refusing a connection on the CM port: %" PRIu32
                            " not identified yet (16 x max_cm_links).", m->n_cm_unidentified);
                close(cfd);
                return 0;
        }
        /* An IPv4 peer on the dual-stack socket is ::ffff:a.b.c.d: keep it IPv4. */
        sockaddr_unmap_v4(&peer, &len);
        link_new(m, cfd, false, &peer, len);
        return 0;
}

/* Whether bytes of the peer wait unread in the link's socket: a datd that
 * did not run for a while may find its timer due before it reads them. */
static bool link_has_unread(const CmLink *l)
{
        int n = 0;

        return ioctl(l->fd, FIONREAD, &n) == 0 && n > 0;
}

static int cm_on_tick(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;
        uint64_t period = (uint64_t) m->config->cm_keepalive_ms * 1000u;
        uint64_t now = now_usec();
        /* Due a period ago or more: this datd did not run meanwhile (a
         * stopped VM, a starved or stopped process), and the peers' silence
         * over that time is its own, or the whole machine's.  Each link
         * gets two periods from now, as if just heard. */
        bool late = now > usec + period;
        CmLink *l, *n;

        LIST_FOREACH_SAFE(links, l, n, m->cm_links) {
                if (l->dead) {
                        link_free(l, "its peer reads nothing: max_cm_send_bytes unsent");
                        continue;
                }
                /* Held: its keepalives wait unread; the hold is bounded by
                 * the timer of the connection that holds it.  Unread bytes
                 * are the peer's too. */
                if (l->holds || late ||
                    (now - l->last_rx_usec > 2 * period && link_has_unread(l)))
                        l->last_rx_usec = now;
                if (late && l->identify_by_usec < now + 2 * period)
                        l->identify_by_usec = now + 2 * period;
                /* Not identified yet (HELLO, DATA): a deadline from the
                 * accept, not from the last byte, or a peer sending one
                 * byte a period would hold its slot (and all of them,
                 * max_cm_links x 16) for as long as it likes. */
                if (!l->outgoing && !l->up && now > l->identify_by_usec) {
                        link_free(l, "no HELLO or DATA within two periods");
                        continue;
                }
                if (now - l->last_rx_usec > 2 * period) {
                        link_free(l, l->up ? "no keepalive for two periods" : "no answer");
                        continue;
                }
                if (l->up) {
                        struct cm_header h;

                        header_init(&h, CM_KEEPALIVE, sizeof(h));
                        link_queue(l, &h, sizeof(h));
                }
        }
        sd_event_source_set_time_relative(s, period / 2);
        return 0;
}

int cm_start(Manager *m)
{
        struct sockaddr_in6 any = {
                .sin6_family = AF_INET6,
                .sin6_addr = IN6ADDR_ANY_INIT,
                .sin6_port = htons(m->config->cm_port),
        };
        int one = 1, zero = 0, fd, r;

        sd_id128_randomize(&m->host_id);
        r = sd_event_add_time_relative(m->event, &m->cm_tick, CLOCK_MONOTONIC,
                                       (uint64_t) m->config->cm_keepalive_ms * 500u, 1000,
                                       cm_on_tick, m);
        if (r < 0)
                return log_error_errno(r, "Failed to create the CM keepalive timer: %m");
        sd_event_source_set_enabled(m->cm_tick, SD_EVENT_ON);
        fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                goto fail;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        if (bind(fd, (struct sockaddr *) &any, sizeof(any)) < 0 || listen(fd, SOMAXCONN) < 0)
                goto fail;
        r = sd_event_add_io(m->event, &m->cm_listen_source, fd, EPOLLIN, cm_on_accept, m);
        if (r < 0) {
                errno = -r;
                goto fail;
        }
        m->cm_listen_fd = fd;
        log_info("CM port %u: listening for other hosts' datds.", m->config->cm_port);
        return 0;
fail:
        r = -errno;
        if (fd >= 0)
                close(fd);
        /* Same-host connections need no CM port; another host cannot reach
         * this one, and says so (UNREACHABLE). */
        log_warning_errno(r, "CM port %u: cannot listen, no other host can connect here: %m",
                          m->config->cm_port);
        return 0;
}

void cm_stop(Manager *m)
{
        while (m->cm_links)
                link_free(m->cm_links, "datd is stopping");
        m->cm_tick = sd_event_source_disable_unref(m->cm_tick);
        m->cm_listen_source = sd_event_source_disable_unref(m->cm_listen_source);
        if (m->cm_listen_fd >= 0)
                close(m->cm_listen_fd);
        m->cm_listen_fd = -1;
}
