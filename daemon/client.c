#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/channel.h"
#include "daemon/client.h"
#include "daemon/conn.h"
#include "daemon/log.h"

/* Packets handled per client per wakeup: a client that floods the socket
 * waits its turn behind the others instead of starving them. */
#define CLIENT_BATCH 16

static uint64_t now_usec(clockid_t clock)
{
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

IaInstance *ia_instance_free(IaInstance *i)
{
        Client *c;

        if (!i)
                return NULL;
        c = i->client;
        conn_drop_instance(i);
        object_drop_instance(c, i);
        LIST_REMOVE(instances, c->instances, i);
        c->n_instances--;
        i->ia->n_open--;
        c->manager->n_ias_open--;
        c->manager->counters.ia_closes++;
        manager_update_status(c->manager);
        free(i);
        return NULL;
}

IaInstance *client_find_ia(Client *c, uint32_t id)
{
        IaInstance *i;

        LIST_FOREACH(instances, i, c->instances)
                if (i->id == id)
                        return i;
        return NULL;
}

int client_open_ia(Client *c, Ia *ia, IaInstance **ret)
{
        IaInstance *i = calloc(1, sizeof(*i));

        if (!i)
                return -ENOMEM;
        /* Ids are not reused soon, so that a stale id from a closed instance
         * fails instead of reaching a new one; 0 is never an id. */
        do
                i->id = ++c->next_ia_id;
        while (i->id == 0 || client_find_ia(c, i->id));
        i->client = c;
        i->ia = ia;
        i->objects = OBJECT_NONE;
        LIST_PREPEND(instances, c->instances, i);
        c->n_instances++;
        ia->n_open++;
        c->manager->n_ias_open++;
        manager_update_status(c->manager);
        *ret = i;
        return 0;
}

/* What an ending event keeps charged to its client while it waits
 * (client_send_ending); all 0 for any other message. */
typedef struct Owed {
        uint32_t conns;
        uint64_t shm_bytes;
} Owed;

static bool owes(const Owed *o)
{
        return o->conns > 0 || o->shm_bytes > 0;
}

/* A message the socket had no room for, with its own duplicates of the
 * descriptors it carries (the caller keeps its own). */
struct PendingMsg {
        PendingMsg *next;
        Owed owed;                      /* nothing: counted in n_pending */
        UidBudget *budget;              /* charged its nfds (the client's reference) */
        unsigned nfds;
        int fds[DATP_CHANNEL_MAX_FDS];
        union datp_message msg;         /* msg.hdr.length bytes in use */
};

/* ---- held messages -------------------------------------------------------
 *
 * While one client's packets are handled (client_on_io), the messages they
 * cause for any client are held here and sent at the end, one sendmmsg per
 * client: what one request makes for a client (a CR_ACCEPT's reply and the
 * EV_CONN_KEPT after it; a DISCONNECTED and the next EV_CONN_REQUEST) then
 * costs one system call and wakes it once, not once each.  Each client's
 * own messages keep their order; nothing waits past the batch that made
 * it.  A message with descriptors, or one for a client with replies queued
 * for room, sends what is held first and goes as before. */
/* What one client is held, all of it, goes in one datp_send_many. */
#define HELD_MAX DATP_SEND_MANY_MAX

static struct {
        bool on;                        /* inside client_on_io */
        Client *requester;              /* whose packet is handled (NULL once freed) */
        unsigned n;
        Client *to[HELD_MAX];           /* NULL: its client was freed */
        Owed owed[HELD_MAX];
        union datp_message msg[HELD_MAX];
} held;

static void held_send_to(Client *c, unsigned first, bool final);

/* A client being freed: what is held for it goes now (a fatal ERROR
 * before its socket closes), and nothing after. */
static void held_forget(Client *c)
{
        held_send_to(c, 0, true);
        if (held.requester == c)
                held.requester = NULL;
}

static void pending_free(PendingMsg *p)
{
        if (!p)
                return;
        for (unsigned i = 0; i < p->nfds; i++)
                closep(&p->fds[i]);
        uid_budget_release(p->budget, UID_FDS, p->nfds);
        free(p);
}

Client *client_free(Client *c)
{
        if (!c)
                return NULL;
        held_forget(c);
        c->dying = true;
        while (c->instances)
                ia_instance_free(c->instances);
        object_table_done(&c->objects);
        if (c->manager) {
                LIST_REMOVE(clients, c->manager->clients, c);
                c->manager->n_clients--;
                manager_update_status(c->manager);
        }
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->drop_source);
        if (c->fd >= 0)
                close(c->fd);
        while (c->pending) {
                PendingMsg *p = c->pending;

                c->pending = p->next;
                pending_free(p);
        }
        peer_done(&c->peer);
        if (c->pidfd >= 0)
                close(c->pidfd);
        /* Last: everything above gave back what it was charged. */
        uid_budget_unref(c->budget);
        free(c);
        return NULL;
}

int client_pidfd(Client *c)
{
        if (c->pidfd < 0)
                c->pidfd = channel_pidfd(c->fd, c->peer.pid);
        return c->pidfd;
}

/* Closes the client.  error says why: 0, -EPIPE or -ECONNRESET is the client
 * going away; anything else is datd dropping it. */
static void client_disconnect(Client *c, int error)
{
        Manager *m = c->manager;

        if (error == 0 || error == -EPIPE || error == -ECONNRESET)
                log_debug("Client %" PRIu64 " (pid %d) disconnected.", c->id, (int) c->peer.pid);
        else {
                m->counters.clients_dropped++;
                log_warning("Dropping client %" PRIu64 " (pid %d, uid %u, %s): %s.", c->id,
                            (int) c->peer.pid, (unsigned) c->peer.uid, c->peer.comm,
                            error == -EPROTO ? "fatal protocol error"
                            : error == -ENOBUFS ? "too many replies pending"
                            : strerror(-error));
        }
        client_free(c);
}

static int client_on_drop(sd_event_source *s, void *userdata)
{
        Client *c = userdata;

        client_disconnect(c, c->drop_error);
        return 0;
}

void client_drop_later(Client *c, int error)
{
        if (c->drop_source || c->dying || !c->manager)
                return;
        if (sd_event_add_defer(c->manager->event, &c->drop_source, client_on_drop, c) < 0) {
                /* No way to defer: stop reading it; its hangup frees it. */
                log_warning_errno(error, "Client %" PRIu64 " (pid %d): cannot deliver an event: %m",
                                  c->id, (int) c->peer.pid);
                return;
        }
        c->drop_error = error;
}

static int client_queue(Client *c, const struct datp_header *msg, const int *fds, unsigned nfds,
                        const Owed *owed)
{
        PendingMsg *copy;
        int r;

        if (!owes(owed) && c->n_pending >= c->manager->config->limits.max_pending_replies)
                return -ENOBUFS;
        if (nfds > DATP_CHANNEL_MAX_FDS)
                return -EINVAL;
        copy = malloc(offsetof(PendingMsg, msg) + msg->length);
        if (!copy)
                return -ENOMEM;
        copy->next = NULL;
        copy->owed = *owed;
        copy->budget = c->budget;
        copy->nfds = 0;
        /* The duplicates stay open in datd until the client reads: a client
         * that never does must not take the descriptors others need. */
        if (nfds > 0 && uid_budget_charge(c->budget, UID_FDS, nfds)) {
                free(copy);
                return -EDQUOT;
        }
        for (unsigned i = 0; i < nfds; i++) {
                copy->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                if (copy->fds[i] < 0) {
                        r = -errno;
                        uid_budget_release(c->budget, UID_FDS, nfds - copy->nfds);
                        pending_free(copy);
                        return r;
                }
                copy->nfds++;
        }
        memcpy(&copy->msg, msg, msg->length);
        c->n_conns += owed->conns;
        c->shm_bytes += owed->shm_bytes;
        if (!owes(owed))
                c->n_pending++;
        if (!c->pending) {
                c->pending = copy;
                c->pending_tail = &copy->next;
                return sd_event_source_set_io_events(c->io, EPOLLIN | EPOLLOUT);
        }
        *c->pending_tail = copy;
        c->pending_tail = &copy->next;
        return 0;
}

/* What is left of c's messages when the socket took only part: into its
 * queue, which EPOLLOUT empties.  A client that cannot take them is
 * dropped later, as for any event it cannot take. */
static void held_queue_rest(Client *c, const struct datp_header *const *msgs, const Owed *owed,
                            unsigned n, int error)
{
        for (unsigned i = 0; i < n && error == -EAGAIN; i++) {
                int r = client_queue(c, msgs[i], NULL, 0, &owed[i]);

                if (r < 0)
                        error = r;
        }
        if (error != -EAGAIN)
                client_drop_later(c, error);
}

/* Sends c's held messages (from index first on), in order; final: c is
 * being freed, what its socket does not take is lost with it. */
static void held_send_to(Client *c, unsigned first, bool final)
{
        const struct datp_header *msgs[HELD_MAX];
        Owed owed[HELD_MAX];
        unsigned n = 0, sent;
        int r;

        for (unsigned i = first; i < held.n; i++) {
                if (held.to[i] != c)
                        continue;
                held.to[i] = NULL;
                owed[n] = held.owed[i];
                msgs[n++] = &held.msg[i].hdr;
        }
        if (c->dying || n == 0)
                return;
        /* The socket is non-blocking: a full one says -EAGAIN. */
        r = datp_send_many(c->fd, msgs, n, &sent);
        if (r < 0 && !final)
                held_queue_rest(c, msgs + sent, owed + sent, n - sent, r);
}

/* The other clients' first, each in the order of its first message, then
 * the requester's own: what a request makes for others (an EV_CONN_REQUEST,
 * an ESTABLISHED) is what they wait for, and the requester's replies are
 * usually taken by its progress thread on the side. */
static void held_flush(void)
{
        for (unsigned i = 0; i < held.n; i++)
                if (held.to[i] && held.to[i] != held.requester)
                        held_send_to(held.to[i], i, false);
        if (held.requester)
                held_send_to(held.requester, 0, false);
        held.n = 0;
}

static int client_send_owing(Client *c, const struct datp_header *msg, const int *fds, unsigned nfds,
                             const Owed *owed)
{
        /* A reply to request_id 0 is one nobody waits for
         * (proto/PROTOCOL.md): it is not sent. */
        if ((msg->type & DATP_REPLY) && msg->request_id == 0)
                return 0;
        if (held.on) {
                if (nfds == 0 && !c->pending && msg->length <= sizeof(held.msg[0])) {
                        if (held.n == HELD_MAX)
                                held_flush();
                        /* An ending event held here is not charged
                         * (client_send_ending) until the batch's end finds
                         * no room and queues it: making room under
                         * max_shm_bytes_per_client drops channels and takes
                         * their bytes for a new one in the same request
                         * (conn.c), and a DISCONNECT then CONNECT at the
                         * limit in one batch would depend on how the
                         * packets were read.  So a client may hold up to
                         * HELD_MAX ended things more than its quotas for as
                         * long as the socket cannot take their events:
                         * datd.conf(5), max_pending_replies. */
                        held.to[held.n] = c;
                        held.owed[held.n] = *owed;
                        memcpy(&held.msg[held.n], msg, msg->length);
                        held.n++;
                        return 0;
                }
                /* Order: what is held for it goes first. */
                held_flush();
        }
        /* Behind queued replies a new one must wait, or order would break. */
        if (!c->pending) {
                int r = datp_send(c->fd, msg, fds, nfds);

                if (r != -EAGAIN)
                        return r;
        }
        return client_queue(c, msg, fds, nfds, owed);
}

int client_send_fds(Client *c, const struct datp_header *msg, const int *fds, unsigned nfds)
{
        return client_send_owing(c, msg, fds, nfds, &(Owed) {});
}

int client_send(Client *c, const struct datp_header *msg)
{
        return client_send_fds(c, msg, NULL, 0);
}

int client_send_ending(Client *c, const struct datp_header *msg, uint32_t conns, uint64_t shm_bytes)
{
        return client_send_owing(c, msg, NULL, 0, &(Owed) { .conns = conns, .shm_bytes = shm_bytes });
}

static int client_flush(Client *c)
{
        while (c->pending) {
                PendingMsg *p = c->pending;
                int r = datp_send(c->fd, &p->msg.hdr, p->fds, p->nfds);

                if (r == -EAGAIN)
                        return 0;
                if (r < 0)
                        return r;
                /* Written: what it ended is the client's to use again. */
                c->n_conns -= p->owed.conns;
                c->shm_bytes -= p->owed.shm_bytes;
                if (!owes(&p->owed))
                        c->n_pending--;
                c->pending = p->next;
                pending_free(p);
        }
        return sd_event_source_set_io_events(c->io, EPOLLIN);
}

/* One batch of packets as datp_try_recv_batch fills it: datd's one event
 * loop reads one client's at a time. */
static struct {
        union datp_message msg[DATP_BATCH_MAX];
        int fds[DATP_BATCH_MAX][DATP_MAX_FDS];
        ssize_t len[DATP_BATCH_MAX];
        unsigned nfds[DATP_BATCH_MAX];
} rx;

/* No request carries descriptors: any that came along are closed here,
 * and the packet (nfds > 0) is refused. */
static void close_batch_fds(unsigned i)
{
        for (unsigned k = 0; k < DATP_MAX_FDS; k++)
                if (rx.fds[i][k] >= 0)
                        close(rx.fds[i][k]);
}

static int client_on_io_batch(Client *c, int fd, uint32_t revents)
{
        int r;

        if (revents & EPOLLOUT) {
                r = client_flush(c);
                if (r < 0) {
                        client_disconnect(c, r);
                        return 0;
                }
        }
        if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                return 0;

        /* The packets there, a batch per system call (none to learn that
         * nothing more is), CLIENT_BATCH at most. */
        for (unsigned done = 0; done < CLIENT_BATCH;) {
                int n = datp_try_recv_batch(fd, rx.msg, DATP_BATCH_MAX, rx.fds, rx.len, rx.nfds);

                if (n == -EAGAIN || n == -EINTR)
                        return 0;
                if (n < 0) {
                        client_disconnect(c, n);
                        return 0;
                }
                for (int i = 0; i < n; i++)
                        close_batch_fds((unsigned) i);
                for (int i = 0; i < n; i++) {
                        if (rx.len[i] <= 0) {
                                client_disconnect(c, (int) rx.len[i]);
                                return 0;
                        }
                        r = client_handle_packet(c, &rx.msg[i], (size_t) rx.len[i], rx.nfds[i]);
                        if (r < 0) {
                                client_disconnect(c, r);
                                return 0;
                        }
                }
                if (n < DATP_BATCH_MAX)
                        return 0;
                done += (unsigned) n;
        }
        return 0;
}

static int client_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        int r;

        held.on = true;
        held.requester = userdata;
        r = client_on_io_batch(userdata, fd, revents);
        held_flush();
        held.on = false;
        held.requester = NULL;
        return r;
}

/* Why a new connection must be refused, or NULL. */
static const char *client_over_limit(Manager *m, const Peer *peer)
{
        const Limits *l = &m->config->limits;

        if (m->n_clients >= l->max_clients)
                return "max_clients";
        /* Counting walks every client: only when the limit can be reached. */
        if (m->n_clients >= l->max_clients_per_uid &&
            manager_clients_of_uid(m, peer->uid) >= l->max_clients_per_uid)
                return "max_clients_per_uid";
        return NULL;
}

void client_accept(Manager *m, int fd)
{
        const char *limit;
        Client *c;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                log_oom();
                return;
        }
        c->fd = fd;
        c->pidfd = -1;
        object_table_init(&c->objects);
        r = peer_identify(fd, &c->peer);
        if (r < 0) {
                log_warning_errno(r, "Failed to identify a new client, closing it: %m");
                client_free(c);
                return;
        }
        limit = client_over_limit(m, &c->peer);
        if (limit) {
                m->counters.clients_rejected++;
                log_warning("Refusing client pid %d uid %u (%s): %s reached.", (int) c->peer.pid,
                            (unsigned) c->peer.uid, c->peer.comm, limit);
                client_free(c);
                return;
        }
        c->budget = uid_budget_ref(m->budgets, c->peer.uid);
        if (!c->budget) {
                log_oom();
                client_free(c);
                return;
        }
        c->objects.budget = c->budget;
        r = sd_event_add_io(m->event, &c->io, fd, EPOLLIN, client_on_io, c);
        if (r < 0) {
                log_warning_errno(r, "Failed to watch a new client: %m");
                client_free(c);
                return;
        }
        c->id = ++m->next_client_id;
        c->connected_usec = now_usec(CLOCK_REALTIME);
        c->manager = m;
        LIST_PREPEND(clients, m->clients, c);
        m->n_clients++;
        m->counters.clients_accepted++;
        manager_update_status(m);
        log_debug("Client %" PRIu64 " connected: pid %d uid %u gid %u (%s).", c->id,
                  (int) c->peer.pid, (unsigned) c->peer.uid, (unsigned) c->peer.gid, c->peer.comm);
}
