/* datdemo: two processes talk through one DAT connection, with the public
 * DAT 2.0 API only (<dat2/udat.h>).  It is meant to be read: every step a
 * DAT program takes is here once, in the order it has to happen.
 *
 *   datdemo -s [-i IA] [-p PORT]              the server: waits for one client
 *   datdemo -h ADDRESS [-i IA] [-p PORT]      the client: connects to the server
 *
 * What the two do, in lock step (both sides run the same code, the roles
 * only differ in who listens and who speaks first):
 *   1. open the IA, make a protection zone, event dispatchers, an endpoint,
 *      register memory, and post receives *before* connecting (a message
 *      that arrives with no receive posted is an error on a reliable
 *      connection, so receives always go first);
 *   2. connect (client) / accept (server);
 *   3. exchange a "hello" message describing the memory each side lets the
 *      peer read and write (RMR triplets: address, length, rmr_context);
 *   4. the client sends messages of a few sizes, the server checks and echoes
 *      each one back, the client checks the echo;
 *   5. each side RDMA-writes a pattern into the peer's memory, says so with a
 *      message carrying the checksum, and checks what the peer wrote into its
 *      own memory;
 *   6. each side RDMA-reads the peer's pattern and checks it;
 *   7. the client disconnects (after --hold, so an administrator can look at
 *      the connection with `datctl ep list` / `datctl connection list`), the
 *      server sees the disconnect, both free everything and exit 0.
 * Any failure prints what failed and exits 1.  Times are printed for
 * information only. */
#include <arpa/inet.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <dat2/udat.h>

#define DEFAULT_IA "datd-shm"
#define DEFAULT_PORT 45250              /* the server's connection qualifier */
#define DEFAULT_RDMA_SIZE (8u << 20)
#define MSG_SLOT_SIZE (1u << 20)        /* the largest message we send or receive */
#define RECV_SLOTS 2                    /* receives kept posted at all times */
#define EVENT_WAIT_US (10 * 1000 * 1000)/* no step may take longer than this */
#define HELLO_MAGIC 0x64617464656d6f31ull /* "datdemo1" */

static const uint32_t message_sizes[] = { 64, 4096, 65536, 1u << 20 };

/* What the peer learns about us in the hello message (and what we learn
 * about it): where it may read our pattern and where it may write its own. */
struct hello {
        uint64_t magic;
        uint64_t seed;                  /* our pattern: what read_from holds */
        DAT_RMR_TRIPLET read_from;
        DAT_RMR_TRIPLET write_to;
};

/* The "done" note of steps 5 and 6. */
struct note {
        uint64_t magic;
        uint64_t length;
        uint64_t checksum;
};

struct demo {
        bool server;
        char *ia_name;                  /* dat_ia_open() takes a char * */
        const char *peer_host, *who;
        DAT_CONN_QUAL port;
        unsigned hold_seconds;

        DAT_IA_HANDLE ia;
        DAT_EVD_HANDLE async_evd;
        DAT_PZ_HANDLE pz;
        DAT_EVD_HANDLE request_evd;     /* completions of sends and RDMA */
        DAT_EVD_HANDLE recv_evd;        /* completions of receives */
        DAT_EVD_HANDLE conn_evd;        /* connection events of the EP */
        DAT_EVD_HANDLE cr_evd;          /* the server's connection requests */
        DAT_PSP_HANDLE psp;
        DAT_EP_HANDLE ep;
        DAT_EP_ATTR ep_attr;            /* what the EP really got */
        uint32_t msg_max;               /* the largest message we exchange */

        /* Local memory: receive slots, a send slot and where RDMA reads land.
         * Registered for local access only: the peer can never touch it. */
        char *local;
        size_t local_len;
        DAT_LMR_HANDLE local_lmr;
        DAT_LMR_CONTEXT local_ctx;

        /* The window the peer may access: [read_from | write_to], each
         * rdma_len bytes.  Registered with remote read and write rights,
         * which is what gives it an rmr_context to hand out. */
        char *window;
        uint32_t rdma_len;
        size_t window_len;
        DAT_LMR_HANDLE window_lmr;
        DAT_LMR_CONTEXT window_ctx;
        DAT_RMR_CONTEXT window_rmr;

        uint64_t seed, peer_seed;
        struct hello peer;
        bool connected;
};

static volatile sig_atomic_t stop_holding;

static void on_signal(int sig)
{
        (void)sig;
        stop_holding = 1;
}

static bool ok(const struct demo *d, const char *what, DAT_RETURN r)
{
        const char *major = "?", *minor = "?";

        if (r == DAT_SUCCESS)
                return true;
        dat_strerror(r, &major, &minor);
        fprintf(stderr, "[%s] %s failed: %s (%s)\n", d->who, what, major, minor);
        return false;
}

static bool fail(const struct demo *d, const char *fmt, const char *what)
{
        fprintf(stderr, "[%s] ", d->who);
        fprintf(stderr, fmt, what);
        fputc('\n', stderr);
        return false;
}

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- patterns and checksums ---------------------------------------------- */

/* A pattern no buffer holds by accident: a xorshift stream per seed. */
static void pattern_fill(char *buf, size_t len, uint64_t seed)
{
        uint64_t x = seed | 1;

        for (size_t i = 0; i < len; i += 8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                memcpy(buf + i, &x, len - i < 8 ? len - i : 8);
        }
}

/* FNV-1a, 64 bits: printed so two outputs can be compared by eye. */
static uint64_t checksum(const char *buf, size_t len)
{
        uint64_t h = 0xcbf29ce484222325ull;

        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ull;
        return h;
}

/* Whether buf holds the pattern of seed; reports the first wrong byte. */
static bool pattern_check(const struct demo *d, const char *what, const char *buf, size_t len,
                          uint64_t seed)
{
        char *expected = malloc(len);
        size_t i = 0;

        if (!expected)
                return fail(d, "%s: out of memory", what);
        pattern_fill(expected, len, seed);
        while (i < len && buf[i] == expected[i])
                i++;
        free(expected);
        if (i == len)
                return true;
        fprintf(stderr, "[%s] %s: data differs at byte %zu of %zu\n", d->who, what, i, len);
        return false;
}

static const char *size_str(uint64_t n, char *buf, size_t len)
{
        if (n >= (1u << 20) && n % (1u << 20) == 0)
                snprintf(buf, len, "%llu MiB", (unsigned long long)(n >> 20));
        else if (n >= 1024 && n % 1024 == 0)
                snprintf(buf, len, "%llu KiB", (unsigned long long)(n >> 10));
        else
                snprintf(buf, len, "%llu B", (unsigned long long)n);
        return buf;
}

/* ---- events --------------------------------------------------------------- */

static const char *event_name(DAT_EVENT_NUMBER n)
{
        switch (n) {
        case DAT_DTO_COMPLETION_EVENT: return "DTO completion";
        case DAT_CONNECTION_REQUEST_EVENT: return "connection request";
        case DAT_CONNECTION_EVENT_ESTABLISHED: return "connection established";
        case DAT_CONNECTION_EVENT_PEER_REJECTED: return "rejected by the peer";
        case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: return "rejected (no such listener?)";
        case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "accept failed";
        case DAT_CONNECTION_EVENT_DISCONNECTED: return "disconnected";
        case DAT_CONNECTION_EVENT_BROKEN: return "connection broken";
        case DAT_CONNECTION_EVENT_TIMED_OUT: return "connection timed out";
        case DAT_CONNECTION_EVENT_UNREACHABLE: return "peer unreachable";
        default: return "another event";
        }
}

/* Waits (bounded) for the next event on evd and checks its number. */
static bool wait_event(const struct demo *d, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER expected,
                       DAT_TIMEOUT timeout_us, DAT_EVENT *ev, const char *what)
{
        DAT_COUNT nmore;

        if (!ok(d, what, dat_evd_wait(evd, timeout_us, 1, ev, &nmore)))
                return false;
        if (ev->event_number != expected) {
                fprintf(stderr, "[%s] %s: got \"%s\" (0x%x) instead of \"%s\"\n", d->who, what,
                        event_name(ev->event_number), (unsigned)ev->event_number,
                        event_name(expected));
                return false;
        }
        return true;
}

/* Waits for one DTO completion and checks that it succeeded.  Requests
 * complete in the order they were posted, so in lock step the next
 * completion is the one we wait for; the cookie says which it is anyway. */
static bool wait_dto(const struct demo *d, DAT_EVD_HANDLE evd, const char *what,
                     DAT_DTO_COMPLETION_EVENT_DATA *done)
{
        DAT_EVENT ev;

        if (!wait_event(d, evd, DAT_DTO_COMPLETION_EVENT, EVENT_WAIT_US, &ev, what))
                return false;
        *done = ev.event_data.dto_completion_event_data;
        if (done->status != DAT_DTO_SUCCESS) {
                /* DAT_DTO_ERR_FLUSHED, _LOCAL_LENGTH, _REMOTE_ACCESS, ...:
                 * any of them also breaks the connection. */
                fprintf(stderr, "[%s] %s: completion status %d (not DAT_DTO_SUCCESS)\n",
                        d->who, what, (int)done->status);
                return false;
        }
        return true;
}

/* ---- messages ------------------------------------------------------------- */

static char *recv_slot(const struct demo *d, unsigned slot)
{
        return d->local + (size_t)slot * MSG_SLOT_SIZE;
}

static char *send_slot(const struct demo *d)
{
        return d->local + (size_t)RECV_SLOTS * MSG_SLOT_SIZE;
}

static char *read_landing(const struct demo *d)
{
        return send_slot(d) + MSG_SLOT_SIZE;
}

/* Local segments name memory by its address and the lmr_context of the LMR
 * that registered it. */
static DAT_LMR_TRIPLET local_segment(const void *p, uint32_t len, DAT_LMR_CONTEXT ctx)
{
        return (DAT_LMR_TRIPLET){ .virtual_address = (DAT_VADDR)(uintptr_t)p,
                                  .segment_length = len, .lmr_context = ctx };
}

static bool post_recv(const struct demo *d, unsigned slot)
{
        DAT_LMR_TRIPLET seg = local_segment(recv_slot(d, slot), d->msg_max, d->local_ctx);
        DAT_DTO_COOKIE cookie = { .as_64 = slot };

        return ok(d, "dat_ep_post_recv",
                  dat_ep_post_recv(d->ep, 1, &seg, cookie, DAT_COMPLETION_DEFAULT_FLAG));
}

/* Sends len bytes at p (inside the local LMR) and waits until the peer has
 * them. */
static bool send_msg(const struct demo *d, const void *p, uint32_t len)
{
        DAT_LMR_TRIPLET seg = local_segment(p, len, d->local_ctx);
        DAT_DTO_COOKIE cookie = { .as_64 = 0 };
        DAT_DTO_COMPLETION_EVENT_DATA done;

        if (!ok(d, "dat_ep_post_send",
                dat_ep_post_send(d->ep, 1, &seg, cookie, DAT_COMPLETION_DEFAULT_FLAG)))
                return false;
        return wait_dto(d, d->request_evd, "send completion", &done);
}

/* Waits for the next message; returns its slot (to be reposted with
 * post_recv once read) and length, or -1. */
static int recv_msg(const struct demo *d, uint32_t *len)
{
        DAT_DTO_COMPLETION_EVENT_DATA done;

        if (!wait_dto(d, d->recv_evd, "receive completion", &done))
                return -1;
        *len = done.transfered_length;
        return (int)done.user_cookie.as_64;
}

/* Sends a small fixed-size structure through the send slot. */
static bool send_struct(const struct demo *d, const void *s, uint32_t len)
{
        memcpy(send_slot(d), s, len);
        return send_msg(d, send_slot(d), len);
}

/* Receives a message that must be a structure of exactly len bytes. */
static bool recv_struct(const struct demo *d, void *s, uint32_t len, const char *what)
{
        uint32_t got;
        int slot = recv_msg(d, &got);

        if (slot < 0)
                return false;
        memcpy(s, recv_slot(d, (unsigned)slot), got < len ? got : len);
        if (got != len || *(const uint64_t *)s != HELLO_MAGIC)
                return fail(d, "%s: not the message expected", what);
        return post_recv(d, (unsigned)slot);
}

/* ---- setting up ------------------------------------------------------------ */

static bool create_evds(struct demo *d)
{
        /* One EVD per event stream keeps every wait simple: whatever arrives
         * on request_evd is a send or RDMA completion, and so on. */
        return ok(d, "dat_evd_create (requests)",
                  dat_evd_create(d->ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &d->request_evd)) &&
               ok(d, "dat_evd_create (receives)",
                  dat_evd_create(d->ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &d->recv_evd)) &&
               ok(d, "dat_evd_create (connection)",
                  dat_evd_create(d->ia, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG,
                                 &d->conn_evd)) &&
               (!d->server ||
                ok(d, "dat_evd_create (connection requests)",
                   dat_evd_create(d->ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &d->cr_evd)));
}

static void *map_buffer(size_t len)
{
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        return p == MAP_FAILED ? NULL : p;
}

/* Registers the two buffers.  Only the window gets remote rights: an LMR
 * registered for local access has no rmr_context, so no peer can name it. */
static bool register_memory(struct demo *d)
{
        DAT_REGION_DESCRIPTION region;
        DAT_RMR_CONTEXT unused_rmr;
        DAT_VLEN reg_len;
        DAT_VADDR reg_addr;

        d->local_len = (size_t)(RECV_SLOTS + 1) * MSG_SLOT_SIZE + d->rdma_len;
        d->local = map_buffer(d->local_len);
        d->window_len = 2 * (size_t)d->rdma_len;
        d->window = map_buffer(d->window_len);
        if (!d->local || !d->window)
                return fail(d, "%s: out of memory", "mmap");
        region.for_va = d->local;
        if (!ok(d, "dat_lmr_create (local buffers)",
                dat_lmr_create(d->ia, DAT_MEM_TYPE_VIRTUAL, region, d->local_len, d->pz,
                               DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                               DAT_VA_TYPE_VA, &d->local_lmr, &d->local_ctx, &unused_rmr,
                               &reg_len, &reg_addr)))
                return false;
        region.for_va = d->window;
        return ok(d, "dat_lmr_create (RDMA window)",
                  dat_lmr_create(d->ia, DAT_MEM_TYPE_VIRTUAL, region, d->window_len,
                                 d->pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &d->window_lmr,
                                 &d->window_ctx, &d->window_rmr, &reg_len, &reg_addr));
}

/* The EP takes the IA's defaults (NULL attributes); we then ask what they
 * are, since message and RDMA sizes are limited by the transport. */
static bool create_ep(struct demo *d)
{
        DAT_EP_PARAM param;

        if (!ok(d, "dat_ep_create",
                dat_ep_create(d->ia, d->pz, d->recv_evd, d->request_evd, d->conn_evd, NULL,
                              &d->ep)) ||
            !ok(d, "dat_ep_query", dat_ep_query(d->ep, DAT_EP_FIELD_ALL, &param)))
                return false;
        d->ep_attr = param.ep_attr;
        d->msg_max = d->ep_attr.max_message_size < MSG_SLOT_SIZE ? d->ep_attr.max_message_size
                                                                 : MSG_SLOT_SIZE;
        if (d->ep_attr.max_rdma_size < d->rdma_len)
                d->rdma_len = d->ep_attr.max_rdma_size;
        return true;
}

static bool set_up(struct demo *d)
{
        char addr[INET6_ADDRSTRLEN] = "?";
        DAT_IA_ATTR ia_attr;
        DAT_EVD_HANDLE unused_evd;

        d->async_evd = DAT_HANDLE_NULL;         /* let the IA make its own */
        if (!ok(d, "dat_ia_open", dat_ia_open(d->ia_name, 8, &d->async_evd, &d->ia)) ||
            !ok(d, "dat_ia_query",
                dat_ia_query(d->ia, &unused_evd, DAT_IA_FIELD_IA_ADDRESS_PTR, &ia_attr,
                             DAT_PROVIDER_FIELD_NONE, NULL)) ||
            !ok(d, "dat_pz_create", dat_pz_create(d->ia, &d->pz)) || !create_evds(d) ||
            !create_ep(d) || !register_memory(d))
                return false;
        if (ia_attr.ia_address_ptr) {
                const struct sockaddr *sa = ia_attr.ia_address_ptr;
                const void *in = sa->sa_family == AF_INET6
                                         ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                                         : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;

                inet_ntop(sa->sa_family, in, addr, sizeof(addr));
        }
        printf("[%s] IA %s (address %s): max message %u B, max RDMA %u B\n", d->who, d->ia_name,
               addr, (unsigned)d->ep_attr.max_message_size, (unsigned)d->ep_attr.max_rdma_size);
        /* Receives first: a message arriving before one is posted fails. */
        for (unsigned i = 0; i < RECV_SLOTS; i++)
                if (!post_recv(d, i))
                        return false;
        return true;
}

/* ---- connecting ------------------------------------------------------------ */

static bool accept_one(struct demo *d)
{
        DAT_EVENT ev;

        if (!ok(d, "dat_psp_create",
                dat_psp_create(d->ia, d->port, d->cr_evd, DAT_PSP_CONSUMER_FLAG, &d->psp)))
                return false;
        printf("[%s] listening on port %llu\n", d->who, (unsigned long long)d->port);
        fflush(stdout);
        /* No time bound here: a server waits for its client. */
        if (!wait_event(d, d->cr_evd, DAT_CONNECTION_REQUEST_EVENT, DAT_TIMEOUT_INFINITE, &ev,
                        "waiting for a connection request"))
                return false;
        if (!ok(d, "dat_cr_accept",
                dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, d->ep, 0, NULL)))
                return false;
        /* One client only: stop listening (a PSP's pending requests go with
         * it, so only once ours is accepted). */
        if (!ok(d, "dat_psp_free", dat_psp_free(d->psp)))
                return false;
        d->psp = DAT_HANDLE_NULL;
        return true;
}

static bool connect_to(struct demo *d)
{
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
        int r = getaddrinfo(d->peer_host, NULL, &hints, &ai);
        DAT_RETURN dr;

        if (r != 0) {
                fprintf(stderr, "[%s] %s: %s\n", d->who, d->peer_host, gai_strerror(r));
                return false;
        }
        printf("[%s] connecting to %s port %llu\n", d->who, d->peer_host,
               (unsigned long long)d->port);
        /* The address names the peer's IA; the port (connection qualifier)
         * names the server's PSP on it. */
        dr = dat_ep_connect(d->ep, (DAT_IA_ADDRESS_PTR)ai->ai_addr, d->port, EVENT_WAIT_US, 0,
                            NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
        freeaddrinfo(ai);
        return ok(d, "dat_ep_connect", dr);
}

static bool establish(struct demo *d)
{
        DAT_EVENT ev;

        if (!(d->server ? accept_one(d) : connect_to(d)) ||
            !wait_event(d, d->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, EVENT_WAIT_US, &ev,
                        "waiting for the connection"))
                return false;
        d->connected = true;
        printf("[%s] connected\n", d->who);
        return true;
}

/* ---- the exchange ---------------------------------------------------------- */

/* Step 3: each side tells the other where it may read and write. */
static bool exchange_hello(struct demo *d)
{
        struct hello mine = {
                .magic = HELLO_MAGIC,
                .seed = d->seed,
                .read_from = { .virtual_address = (DAT_VADDR)(uintptr_t)d->window,
                               .segment_length = d->rdma_len, .rmr_context = d->window_rmr },
                .write_to = { .virtual_address = (DAT_VADDR)(uintptr_t)(d->window + d->rdma_len),
                              .segment_length = d->rdma_len, .rmr_context = d->window_rmr },
        };

        /* Our half the peer reads holds our pattern from now on. */
        pattern_fill(d->window, d->rdma_len, d->seed);
        if (!send_struct(d, &mine, sizeof(mine)) ||
            !recv_struct(d, &d->peer, sizeof(d->peer), "hello"))
                return false;
        d->peer_seed = d->peer.seed;
        if (d->peer.read_from.segment_length < d->rdma_len ||
            d->peer.write_to.segment_length < d->rdma_len)
                d->rdma_len = d->peer.read_from.segment_length < d->peer.write_to.segment_length
                                      ? d->peer.read_from.segment_length
                                      : d->peer.write_to.segment_length;
        return true;
}

/* Step 4, the client: send, wait for the echo, compare. */
static bool ping(struct demo *d, uint32_t size)
{
        char sz[32];
        uint32_t got;
        uint64_t sum;
        double t0;
        int slot;

        pattern_fill(send_slot(d), size, d->seed + size);
        sum = checksum(send_slot(d), size);
        t0 = now_s();
        if (!send_msg(d, send_slot(d), size) || (slot = recv_msg(d, &got)) < 0)
                return false;
        t0 = now_s() - t0;
        if (got != size)
                return fail(d, "%s: echo has the wrong length", "send/recv");
        if (checksum(recv_slot(d, (unsigned)slot), size) != sum ||
            !pattern_check(d, "echo", recv_slot(d, (unsigned)slot), size, d->seed + size))
                return false;
        printf("[%s] send/recv %-8s echoed and verified, checksum %016llx, %.1f us round trip\n",
               d->who, size_str(size, sz, sizeof(sz)), (unsigned long long)sum, t0 * 1e6);
        return post_recv(d, (unsigned)slot);
}

/* Step 4, the server: receive, check, send the same bytes back straight
 * from the receive slot (it is registered memory too). */
static bool pong(struct demo *d, uint32_t size)
{
        char sz[32];
        uint32_t got;
        int slot = recv_msg(d, &got);

        if (slot < 0)
                return false;
        if (got != size || !pattern_check(d, "message", recv_slot(d, (unsigned)slot), size,
                                          d->peer_seed + size))
                return fail(d, "%s: message is not what the client sent", "send/recv");
        printf("[%s] send/recv %-8s received and verified, checksum %016llx, echoing\n", d->who,
               size_str(size, sz, sizeof(sz)),
               (unsigned long long)checksum(recv_slot(d, (unsigned)slot), size));
        return send_msg(d, recv_slot(d, (unsigned)slot), size) && post_recv(d, (unsigned)slot);
}

static bool exchange_messages(struct demo *d)
{
        for (size_t i = 0; i < sizeof(message_sizes) / sizeof(message_sizes[0]); i++) {
                uint32_t size = message_sizes[i];

                if (size > d->msg_max) {
                        printf("[%s] send/recv %u B skipped: above the EP's max message size\n",
                               d->who, size);
                        continue;
                }
                if (!(d->server ? pong(d, size) : ping(d, size)))
                        return false;
        }
        return true;
}

/* Tells the peer a step is done (with the checksum of what we wrote) and
 * waits for the peer's note of the same step. */
static bool trade_notes(struct demo *d, uint64_t sum, struct note *peer)
{
        struct note mine = { .magic = HELLO_MAGIC, .length = d->rdma_len, .checksum = sum };

        return send_struct(d, &mine, sizeof(mine)) &&
               recv_struct(d, peer, sizeof(*peer), "done note");
}

/* secs 0: nothing was timed. */
static void print_rdma(const struct demo *d, const char *what, uint64_t sum, double secs)
{
        char sz[32], rate[32] = "";

        if (secs > 0)
                snprintf(rate, sizeof(rate), ", %.2f GB/s", d->rdma_len / secs / 1e9);
        printf("[%s] %-28s %s, checksum %016llx%s\n", d->who, what,
               size_str(d->rdma_len, sz, sizeof(sz)), (unsigned long long)sum, rate);
}

/* Step 5: our pattern into the peer's write_to; then check what the peer
 * put into ours. */
static bool rdma_write_step(struct demo *d)
{
        DAT_LMR_TRIPLET src = local_segment(d->window, d->rdma_len, d->window_ctx);
        DAT_RMR_TRIPLET dst = d->peer.write_to;
        DAT_DTO_COOKIE cookie = { .as_64 = 0 };
        DAT_DTO_COMPLETION_EVENT_DATA done;
        uint64_t sum = checksum(d->window, d->rdma_len);
        struct note peer;
        double t0 = now_s();

        dst.segment_length = d->rdma_len;
        if (!ok(d, "dat_ep_post_rdma_write",
                dat_ep_post_rdma_write(d->ep, 1, &src, cookie, &dst, DAT_COMPLETION_DEFAULT_FLAG)) ||
            !wait_dto(d, d->request_evd, "RDMA write completion", &done))
                return false;
        print_rdma(d, "RDMA write -> peer", sum, now_s() - t0);
        /* The write completed, so the data is in the peer's memory; the note
         * tells the peer it may look. */
        if (!trade_notes(d, sum, &peer))
                return false;
        if (peer.length != d->rdma_len ||
            checksum(d->window + d->rdma_len, d->rdma_len) != peer.checksum ||
            !pattern_check(d, "what the peer wrote", d->window + d->rdma_len, d->rdma_len,
                           d->peer_seed))
                return fail(d, "%s: the peer's RDMA write did not land intact", "RDMA write");
        print_rdma(d, "RDMA write <- peer, verified", peer.checksum, 0);
        return true;
}

/* Step 6: the peer's pattern into our landing area. */
static bool rdma_read_step(struct demo *d)
{
        DAT_LMR_TRIPLET dst = local_segment(read_landing(d), d->rdma_len, d->local_ctx);
        DAT_RMR_TRIPLET src = d->peer.read_from;
        DAT_DTO_COOKIE cookie = { .as_64 = 0 };
        DAT_DTO_COMPLETION_EVENT_DATA done;
        struct note peer;
        uint64_t sum;
        double t0 = now_s();

        src.segment_length = d->rdma_len;
        if (!ok(d, "dat_ep_post_rdma_read",
                dat_ep_post_rdma_read(d->ep, 1, &dst, cookie, &src, DAT_COMPLETION_DEFAULT_FLAG)) ||
            !wait_dto(d, d->request_evd, "RDMA read completion", &done))
                return false;
        t0 = now_s() - t0;
        if (!pattern_check(d, "what we read", read_landing(d), d->rdma_len, d->peer_seed))
                return false;
        sum = checksum(read_landing(d), d->rdma_len);
        print_rdma(d, "RDMA read <- peer, verified", sum, t0);
        /* Neither side may leave while the other still reads its memory. */
        return trade_notes(d, sum, &peer);
}

/* ---- ending ------------------------------------------------------------------ */

static void hold(const struct demo *d)
{
        if (!d->hold_seconds)
                return;
        printf("[%s] holding the connection for %u s (pid %d; SIGUSR1 ends it)\n", d->who,
               d->hold_seconds, (int)getpid());
        fflush(stdout);
        for (unsigned i = 0; i < d->hold_seconds * 10 && !stop_holding; i++)
                usleep(100000);
}

/* The client disconnects; the server waits until it does.  Both get the
 * DISCONNECTED event on the connection EVD. */
static bool disconnect(struct demo *d)
{
        DAT_EVENT ev;
        DAT_TIMEOUT bound = EVENT_WAIT_US + (DAT_TIMEOUT)d->hold_seconds * 1000000;

        if (!d->server &&
            !ok(d, "dat_ep_disconnect", dat_ep_disconnect(d->ep, DAT_CLOSE_GRACEFUL_FLAG)))
                return false;
        if (!wait_event(d, d->conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, bound, &ev,
                        "waiting for the disconnect"))
                return false;
        d->connected = false;
        printf("[%s] disconnected\n", d->who);
        return true;
}

/* Frees in the reverse order of creation (a parent with live children
 * refuses to go).  Returns false if anything refused. */
static bool tear_down(struct demo *d)
{
        bool good = true;

        if (d->connected)
                dat_ep_disconnect(d->ep, DAT_CLOSE_ABRUPT_FLAG);
        if (d->psp)
                good &= ok(d, "dat_psp_free", dat_psp_free(d->psp));
        if (d->ep)
                good &= ok(d, "dat_ep_free", dat_ep_free(d->ep));
        if (d->window_lmr)
                good &= ok(d, "dat_lmr_free", dat_lmr_free(d->window_lmr));
        if (d->local_lmr)
                good &= ok(d, "dat_lmr_free", dat_lmr_free(d->local_lmr));
        DAT_EVD_HANDLE evds[] = { d->cr_evd, d->conn_evd, d->recv_evd, d->request_evd };
        for (size_t i = 0; i < sizeof(evds) / sizeof(evds[0]); i++)
                if (evds[i])
                        good &= ok(d, "dat_evd_free", dat_evd_free(evds[i]));
        if (d->pz)
                good &= ok(d, "dat_pz_free", dat_pz_free(d->pz));
        if (d->ia)
                good &= ok(d, "dat_ia_close", dat_ia_close(d->ia, DAT_CLOSE_GRACEFUL_FLAG));
        if (d->local)
                munmap(d->local, d->local_len);
        if (d->window)
                munmap(d->window, d->window_len);
        return good;
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: datdemo -s [options]            run the server\n"
                "       datdemo -h ADDRESS [options]    run the client, connect to ADDRESS\n"
                "  -i, --ia NAME       the IA of dat.conf to use (default %s)\n"
                "  -p, --port N        the server's connection qualifier (default %d)\n"
                "  -b, --rdma-size N   bytes per RDMA write and read (default %u)\n"
                "      --hold SECONDS  once all is verified, stay connected this long\n"
                "                      (SIGUSR1 ends it early)\n"
                "      --help          this text\n",
                DEFAULT_IA, DEFAULT_PORT, DEFAULT_RDMA_SIZE);
}

static bool parse_args(struct demo *d, int argc, char **argv)
{
        static const struct option options[] = {
                { "server", no_argument, NULL, 's' },
                { "host", required_argument, NULL, 'h' },
                { "ia", required_argument, NULL, 'i' },
                { "port", required_argument, NULL, 'p' },
                { "rdma-size", required_argument, NULL, 'b' },
                { "hold", required_argument, NULL, 'H' },
                { "help", no_argument, NULL, 'U' },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "sh:i:p:b:", options, NULL)) != -1) {
                switch (c) {
                case 's': d->server = true; break;
                case 'h': d->peer_host = optarg; break;
                case 'i': d->ia_name = optarg; break;
                case 'p': d->port = strtoull(optarg, NULL, 0); break;
                case 'b': d->rdma_len = (uint32_t)strtoul(optarg, NULL, 0); break;
                case 'H': d->hold_seconds = (unsigned)strtoul(optarg, NULL, 0); break;
                case 'U': usage(stdout); exit(0);
                default: usage(stderr); return false;
                }
        }
        if (d->server == !!d->peer_host || optind != argc || d->rdma_len == 0) {
                usage(stderr);
                return false;
        }
        return true;
}

int main(int argc, char **argv)
{
        static char default_ia[] = DEFAULT_IA;
        struct demo d = { .ia_name = default_ia, .port = DEFAULT_PORT,
                          .rdma_len = DEFAULT_RDMA_SIZE };
        bool good;

        if (!parse_args(&d, argc, argv))
                return 2;
        d.who = d.server ? "server" : "client";
        d.seed = d.server ? 0x5e5e5e5e12345678ull : 0xc1c1c1c187654321ull;
        /* SIGUSR1 ends --hold; SIGINT and SIGTERM keep their default (the
         * process dies, and datd cleans up after it). */
        signal(SIGUSR1, on_signal);
        setvbuf(stdout, NULL, _IOLBF, 0);

        good = set_up(&d) && establish(&d) && exchange_hello(&d) && exchange_messages(&d) &&
               rdma_write_step(&d) && rdma_read_step(&d);
        if (good) {
                hold(&d);
                good = disconnect(&d);
        }
        good &= tear_down(&d);
        printf("[%s] %s\n", d.who, good ? "all checks passed" : "FAILED");
        return good ? 0 : 1;
}
