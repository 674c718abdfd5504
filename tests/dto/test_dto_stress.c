/* Stress: 8 EP pairs between two processes, on two IAs in each (the
 * fixture's and a second one the roles open), mixed Sends, RDMA Writes and
 * RDMA Reads with and without DAT_COMPLETION_SUPPRESS_FLAG, 1,000,000
 * requests in total (plus the receives their Sends need), on the transport
 * this program was built for.
 *
 * Every EP of a pair drives its own schedule (a pure function of the side,
 * the pair and the sequence number, so that each side can also compute the
 * other's) and serves the other's:
 * - cookies carry the pair and a sequence number; request completions must
 *   come exactly once, in posting order (libdat/dto.h: "Requests complete in
 *   the order they were posted"), one per request posted without SUPPRESS
 *   and none for a successful suppressed one (dat_ep_post_send(3DAT):
 *   "Suppress successful Completion"), which the next signalled completion
 *   retires;
 * - receives complete in message order, each with the length and the bytes
 *   of the peer's next Send (its schedule says which);
 * - a Read returns the bytes of the last Write to that slot posted before it
 *   (requests are served in order), and at the end each side's RDMA target
 *   region equals the result of replaying the peer's Writes.
 * Payloads are mostly small (1..2048 bytes) with one in 32 of 16..64 KiB,
 * beyond DTO_CMA_THRESHOLD.
 *
 * Scale: 1,000,000 requests must finish within a couple of minutes on two
 * cores in the normal build.  Only under AddressSanitizer and with CI=true
 * in the environment (a CI machine with a sanitizer build) the count is cut
 * to a tenth; nothing else changes. */
#include "config.h"

#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/dto/dto_fixture.h"

#define STRESS_TIMEOUT 240      /* criterion's bound on the one suite of this program */
#define STRESS_RUN_MS 200000    /* dto_run()'s */
#define STALL_MS 20000          /* no completion at all for this long: fail (a hang) */

TestSuite(DTO_SUITE(stress), .init = dto_suite_init, .fini = dto_teardown,
          .timeout = STRESS_TIMEOUT);

#define TOTAL_REQUESTS 1000000ULL
#define PAIRS 8
#define PAIRS_PER_IA 4
#define WINDOW 32               /* requests in flight per EP */
#define RECVS 32                /* receives posted per EP */
#define SLOT (64u * 1024)
#define TARGET_SLOTS 16
/* A lane's registered memory: local slots | receive slots | RDMA target. */
#define LOCAL_OFF 0
#define RECV_OFF (LOCAL_OFF + WINDOW * SLOT)
#define TARGET_OFF (RECV_OFF + RECVS * SLOT)
#define LANE_MEM (TARGET_OFF + TARGET_SLOTS * SLOT)

#define COOKIE_RECV (1ULL << 63)
#define COOKIE_LANE_SHIFT 56

enum op_type { OP_SEND, OP_WRITE, OP_READ };

struct op {
        enum op_type type;
        DAT_SEG_LENGTH len;
        bool suppressed;
        uint64_t seed;          /* of the bytes sent or written */
};

/* What a posted request must turn out to be. */
struct op_rec {
        struct op op;
        uint64_t expect_seed;   /* a Read: the bytes it must return */
        DAT_SEG_LENGTH expect_len;
        unsigned slot;
        uint64_t after_write;   /* a Read: the Write it must see (its seq + 1), 0: none */
};

/* The replay of one side's Writes (and what its Reads must find). */
struct target_state {
        uint64_t writes;
        bool written[TARGET_SLOTS];
        uint64_t seed[TARGET_SLOTS];
        DAT_SEG_LENGTH len[TARGET_SLOTS];
        unsigned last;          /* the slot of the last Write */
        uint64_t last_seq;      /* and its sequence number */
};

struct lane {
        unsigned idx;
        DAT_EP_HANDLE ep;
        DAT_EVD_HANDLE evd;
        struct dto_mem mem;
        struct dto_remote peer;
        uint64_t n_ops;         /* requests this side posts on this EP */
        uint64_t next_seq, done_seq;
        struct op_rec rec[WINDOW];
        struct target_state mine;       /* my Writes into the peer's target */
        uint64_t peer_sends, peer_seq;  /* the peer's Sends in all, its schedule's position */
        uint64_t recvs_posted, recvs_done;
};

static uint64_t mix(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

/* The schedule: request seq of side on pair (n requests in all). */
static struct op schedule(unsigned side, unsigned pair, uint64_t seq, uint64_t n)
{
        uint64_t h = mix(((uint64_t)side << 62) ^ ((uint64_t)pair << 48) ^ seq);
        unsigned kind = (unsigned)(h % 10);
        struct op o = {
                .type = kind < 4 ? OP_SEND : kind < 7 ? OP_WRITE : OP_READ,
                .seed = h | 1,
        };

        if ((h >> 8) % 32 == 0)
                o.len = 16 * 1024 + (DAT_SEG_LENGTH)((h >> 16) % (48 * 1024 + 1));
        else
                o.len = 1 + (DAT_SEG_LENGTH)((h >> 16) % 2048);
        /* Every 16th and the last are signalled, so that a window always
         * holds one that retires the suppressed ones before it. */
        o.suppressed = ((h >> 40) & 1) && seq % 16 != 15 && seq + 1 != n;
        return o;
}

static uint64_t target_seed(unsigned side, unsigned pair)
{
        return mix(0x7a7a0000ULL + side * 16 + pair) | 1;
}

static unsigned my_side(const struct dto_side *s)
{
        return s->role == DTO_SERVER ? 0 : 1;
}

static uint64_t requests_per_lane(void)
{
        uint64_t total = TOTAL_REQUESTS;

#ifdef __SANITIZE_ADDRESS__
        {
                const char *ci = getenv("CI");

                if (ci && strcmp(ci, "true") == 0)
                        total /= 10;
        }
#endif
        return total / (2 * PAIRS);
}

/* A Write of side's schedule updates the replay t; returns its slot. */
static unsigned replay_write(struct target_state *t, const struct op *o)
{
        unsigned slot = (unsigned)(t->writes++ % TARGET_SLOTS);

        t->written[slot] = true;
        t->seed[slot] = o->seed;
        t->len[slot] = o->len;
        t->last = slot;
        return slot;
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- one lane ------------------------------------------------------------- */

static DAT_LMR_TRIPLET recv_iov(struct lane *l, uint64_t n)
{
        return dto_iov(&l->mem, RECV_OFF + (n % RECVS) * SLOT, SLOT);
}

static void post_recv(struct lane *l)
{
        DAT_LMR_TRIPLET iov = recv_iov(l, l->recvs_posted);
        uint64_t cookie = COOKIE_RECV | ((uint64_t)l->idx << COOKIE_LANE_SHIFT) | l->recvs_posted;

        DTO_ASSERT_EQ(dat_ep_post_recv(l->ep, 1, &iov, dto_cookie(cookie),
                                       DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        l->recvs_posted++;
}

static void post_next(struct dto_side *s, struct lane *l)
{
        uint64_t seq = l->next_seq;
        struct op_rec *r = &l->rec[seq % WINDOW];
        unsigned char *local = l->mem.buf + LOCAL_OFF + (seq % WINDOW) * SLOT;
        DAT_COMPLETION_FLAGS flags;
        DAT_LMR_TRIPLET iov;
        DAT_RMR_TRIPLET remote;
        DAT_DTO_COOKIE c = dto_cookie(((uint64_t)l->idx << COOKIE_LANE_SHIFT) | seq);
        DAT_RETURN ret;

        r->op = schedule(my_side(s), l->idx, seq, l->n_ops);
        flags = r->op.suppressed ? DAT_COMPLETION_SUPPRESS_FLAG : DAT_COMPLETION_DEFAULT_FLAG;
        if (r->op.type == OP_READ) {
                struct target_state *t = &l->mine;

                /* The last Write posted before it; none yet: the peer's
                 * initial bytes of slot 0. */
                r->slot = t->writes ? t->last : 0;
                r->after_write = t->writes ? t->last_seq + 1 : 0;
                r->expect_seed = t->writes ? t->seed[r->slot] : target_seed(1 - my_side(s), l->idx);
                r->expect_len = t->writes ? t->len[r->slot] : r->op.len;
                r->op.len = r->expect_len;
                memset(local, 0, r->op.len);
                iov = dto_iov(&l->mem, LOCAL_OFF + (seq % WINDOW) * SLOT, r->op.len);
                remote = dto_riov(&l->peer, TARGET_OFF + r->slot * SLOT, r->op.len);
                ret = dat_ep_post_rdma_read(l->ep, 1, &iov, c, &remote, flags);
        } else {
                dto_fill(local, r->op.len, r->op.seed);
                iov = dto_iov(&l->mem, LOCAL_OFF + (seq % WINDOW) * SLOT, r->op.len);
                if (r->op.type == OP_SEND) {
                        ret = dat_ep_post_send(l->ep, 1, &iov, c, flags);
                } else {
                        r->slot = replay_write(&l->mine, &r->op);
                        l->mine.last_seq = seq;
                        remote = dto_riov(&l->peer, TARGET_OFF + r->slot * SLOT, r->op.len);
                        ret = dat_ep_post_rdma_write(l->ep, 1, &iov, c, &remote, flags);
                }
        }
        DTO_ASSERTF(ret == DAT_SUCCESS, "pair %u request %llu (type %d): post 0x%08x", l->idx,
                    (unsigned long long)seq, (int)r->op.type, ret);
        l->next_seq++;
}

static const DAT_DTOS op_dtos[] = {
        [OP_SEND] = DAT_DTO_SEND, [OP_WRITE] = DAT_DTO_RDMA_WRITE, [OP_READ] = DAT_DTO_RDMA_READ,
};

/* A signalled request completed: it and the suppressed ones before it are
 * done. */
static void request_done(struct lane *l, const DAT_DTO_COMPLETION_EVENT_DATA *d, uint64_t seq)
{
        const struct op_rec *r = &l->rec[seq % WINDOW];

        DTO_ASSERTF(seq >= l->done_seq && seq < l->next_seq,
                    "pair %u: completion of request %llu, done up to %llu, posted up to %llu "
                    "(a duplicate or an invented completion)", l->idx, (unsigned long long)seq,
                    (unsigned long long)l->done_seq, (unsigned long long)l->next_seq);
        DTO_ASSERTF(d->status == DAT_DTO_SUCCESS, "pair %u request %llu: status %d", l->idx,
                    (unsigned long long)seq, (int)d->status);
        DTO_ASSERTF(!r->op.suppressed, "pair %u request %llu: a successful suppressed request "
                    "completed with an event", l->idx, (unsigned long long)seq);
        DTO_ASSERTF(d->operation == op_dtos[r->op.type] && d->transfered_length == r->op.len,
                    "pair %u request %llu: operation %d length %u, expected %d length %u", l->idx,
                    (unsigned long long)seq, (int)d->operation, d->transfered_length,
                    (int)op_dtos[r->op.type], r->op.len);
        for (uint64_t q = l->done_seq; q <= seq; q++) {
                const struct op_rec *e = &l->rec[q % WINDOW];

                DTO_ASSERTF(q == seq || e->op.suppressed,
                            "pair %u: request %llu completed before the signalled request %llu "
                            "(lost, or out of order)", l->idx, (unsigned long long)seq,
                            (unsigned long long)q);
                if (e->op.type == OP_READ &&
                    !dto_matches(l->mem.buf + LOCAL_OFF + (q % WINDOW) * SLOT, e->expect_len,
                                 e->expect_seed))
                        DTO_FAIL("pair %u: Read %llu of slot %u (%u bytes) returned other bytes "
                                 "than %s%llu (was it overtaken by a later Write?)", l->idx,
                                 (unsigned long long)q, e->slot, e->expect_len,
                                 e->after_write ? "Write " : "the initial fill: no Write before ",
                                 (unsigned long long)(e->after_write ? e->after_write - 1 : q));
        }
        l->done_seq = seq + 1;
}

/* The peer's next Send: advances its schedule to it. */
static struct op peer_next_send(const struct dto_side *s, struct lane *l)
{
        for (;;) {
                struct op o = schedule(1 - my_side(s), l->idx, l->peer_seq, l->n_ops);

                l->peer_seq++;
                DTO_ASSERTF(l->peer_seq <= l->n_ops, "pair %u: more messages than the peer sends",
                            l->idx);
                if (o.type == OP_SEND)
                        return o;
        }
}

static void recv_done(struct dto_side *s, struct lane *l, const DAT_DTO_COMPLETION_EVENT_DATA *d,
                      uint64_t n)
{
        struct op o;

        DTO_ASSERTF(n == l->recvs_done, "pair %u: receive %llu completed, expected %llu "
                    "(receives complete in order, each once)", l->idx, (unsigned long long)n,
                    (unsigned long long)l->recvs_done);
        DTO_ASSERTF(d->status == DAT_DTO_SUCCESS && d->operation == DAT_DTO_RECEIVE,
                    "pair %u receive %llu: status %d operation %d", l->idx,
                    (unsigned long long)n, (int)d->status, (int)d->operation);
        o = peer_next_send(s, l);
        DTO_ASSERTF(d->transfered_length == o.len, "pair %u message %llu: %u bytes, the peer "
                    "sent %u", l->idx, (unsigned long long)n, d->transfered_length, o.len);
        if (!dto_matches(l->mem.buf + RECV_OFF + (n % RECVS) * SLOT, o.len, o.seed))
                DTO_FAIL("pair %u message %llu: other bytes than the peer sent", l->idx,
                         (unsigned long long)n);
        l->recvs_done++;
        if (l->recvs_done + RECVS <= l->peer_sends)
                post_recv(l);
}

static bool lane_finished(const struct lane *l)
{
        return l->done_seq == l->n_ops && l->recvs_done == l->peer_sends;
}

/* ---- the sides --------------------------------------------------------------- */

struct stress {
        struct dto_side second;         /* the second IA of this process */
        struct lane lanes[PAIRS];
};

/* The second IA: its own PZ, one DTO EVD, connection EVDs, four EPs with the
 * fixture's attributes, connected by the fixture's dto_connect (the
 * fixture's PSP is freed first, so that its conn_qual is free). */
static void open_second_ia(struct dto_side *s, struct dto_side *t)
{
        DAT_EVD_HANDLE *evds[3] = { &t->request_evd, &t->conn_evd, &t->cr_evd };
        const DAT_EVD_FLAGS flags[3] = { DAT_EVD_DTO_FLAG, DAT_EVD_CONNECTION_FLAG,
                                         DAT_EVD_CR_FLAG };
        const DAT_COUNT qlen[3] = { 1024, 16, 16 };

        *t = *s;
        DTO_ASSERT_EQ(dat_ia_open((DAT_NAME_PTR)dto_ia_name(), 16, &t->async_evd, &t->ia),
                      DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_pz_create(t->ia, &t->pz), DAT_SUCCESS);
        for (unsigned i = 0; i < 3; i++)
                DTO_ASSERT_EQ(dat_evd_create(t->ia, qlen[i], DAT_HANDLE_NULL, flags[i], evds[i]),
                              DAT_SUCCESS);
        t->recv_evd = t->request_evd;
        t->n_eps = PAIRS_PER_IA;
        for (unsigned i = 0; i < t->n_eps; i++)
                DTO_ASSERT_EQ(dat_ep_create(t->ia, t->pz, t->recv_evd, t->request_evd,
                                            t->conn_evd, &s->ep_attr, &t->ep[i]),
                              DAT_SUCCESS);
        t->mem = dto_mem_new(t, DAT_HANDLE_NULL, 4096, DAT_MEM_PRIV_ALL_FLAG);
        if (s->role == DTO_SERVER)
                DTO_ASSERT_EQ(dat_psp_free(s->psp), DAT_SUCCESS);
        dto_barrier(s);
        dto_connect(t);
}

static void lane_setup(struct dto_side *s, struct dto_side *owner, struct lane *l, unsigned idx,
                       unsigned ep)
{
        l->idx = idx;
        l->ep = owner->ep[ep];
        l->evd = owner->request_evd;
        l->n_ops = requests_per_lane();
        l->mem = dto_mem_new(owner, DAT_HANDLE_NULL, LANE_MEM, DAT_MEM_PRIV_ALL_FLAG);
        dto_fill(l->mem.buf + TARGET_OFF, TARGET_SLOTS * SLOT, target_seed(my_side(s), idx));
        for (uint64_t q = 0; q < l->n_ops; q++)
                l->peer_sends += schedule(1 - my_side(s), idx, q, l->n_ops).type == OP_SEND;
        l->peer = dto_exchange(s, &l->mem);
        while (l->recvs_posted < RECVS && l->recvs_posted < l->peer_sends)
                post_recv(l);
}

static void handle(struct dto_side *s, struct stress *st, const DAT_EVENT *ev)
{
        const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
        uint64_t c = d->user_cookie.as_64;
        unsigned idx = (unsigned)((c >> COOKIE_LANE_SHIFT) & 0x7f);
        struct lane *l;

        DTO_ASSERTF(ev->event_number == DAT_DTO_COMPLETION_EVENT, "event 0x%x",
                    ev->event_number);
        DTO_ASSERTF(idx < PAIRS, "cookie 0x%llx names no pair", (unsigned long long)c);
        l = &st->lanes[idx];
        DTO_ASSERTF(d->ep_handle == l->ep, "cookie 0x%llx: EP %p, expected pair %u's %p",
                    (unsigned long long)c, d->ep_handle, idx, l->ep);
        if (c & COOKIE_RECV)
                recv_done(s, l, d, c & ((1ULL << COOKIE_LANE_SHIFT) - 1));
        else
                request_done(l, d, c & ((1ULL << COOKIE_LANE_SHIFT) - 1));
}

/* At the end: my RDMA target region is what replaying the peer's Writes
 * gives. */
static void verify_target(const struct dto_side *s, const struct lane *l)
{
        unsigned char *want = malloc(TARGET_SLOTS * SLOT);
        struct target_state t = { 0 };

        DTO_ASSERT(want);
        dto_fill(want, TARGET_SLOTS * SLOT, target_seed(my_side(s), l->idx));
        for (uint64_t q = 0; q < l->n_ops; q++) {
                struct op o = schedule(1 - my_side(s), l->idx, q, l->n_ops);

                if (o.type == OP_WRITE)
                        dto_fill(want + replay_write(&t, &o) * SLOT, o.len, o.seed);
        }
        for (unsigned slot = 0; slot < TARGET_SLOTS; slot++)
                DTO_ASSERTF(dto_checksum(l->mem.buf + TARGET_OFF + slot * SLOT, SLOT) ==
                                    dto_checksum(want + slot * SLOT, SLOT),
                            "pair %u: target slot %u differs from the peer's last Writes", l->idx,
                            slot);
        free(want);
}

static void stress_role(struct dto_side *s, void *arg)
{
        struct stress *st = calloc(1, sizeof(*st));
        DAT_EVD_HANDLE evds[2];
        long long start, last_progress;
        uint64_t requests = 0, messages = 0;
        bool all_done = false;

        (void)arg;
        DTO_ASSERT(st);
        open_second_ia(s, &st->second);
        evds[0] = s->request_evd;
        evds[1] = st->second.request_evd;
        for (unsigned i = 0; i < PAIRS; i++)
                lane_setup(s, i < PAIRS_PER_IA ? s : &st->second, &st->lanes[i], i,
                           i % PAIRS_PER_IA);
        dto_barrier(s);
        start = last_progress = now_ms();
        while (!all_done) {
                bool progress = false;

                all_done = true;
                for (unsigned i = 0; i < PAIRS; i++) {
                        struct lane *l = &st->lanes[i];

                        while (l->next_seq < l->n_ops && l->next_seq < l->done_seq + WINDOW) {
                                post_next(s, l);
                                progress = true;
                        }
                        all_done = all_done && lane_finished(l);
                }
                for (unsigned e = 0; e < 2; e++) {
                        DAT_EVENT ev;

                        for (unsigned k = 0;
                             k < 256 && dat_evd_dequeue(evds[e], &ev) == DAT_SUCCESS; k++) {
                                handle(s, st, &ev);
                                progress = true;
                        }
                }
                if (progress) {
                        last_progress = now_ms();
                } else {
                        DTO_ASSERTF(now_ms() - last_progress < STALL_MS,
                                    "no completion for %d ms (pair 0: %llu/%llu requests done, "
                                    "%llu/%llu messages)", STALL_MS,
                                    (unsigned long long)st->lanes[0].done_seq,
                                    (unsigned long long)st->lanes[0].n_ops,
                                    (unsigned long long)st->lanes[0].recvs_done,
                                    (unsigned long long)st->lanes[0].peer_sends);
                        sched_yield();
                }
        }
        for (unsigned i = 0; i < PAIRS; i++) {
                requests += st->lanes[i].n_ops;
                messages += st->lanes[i].recvs_done;
        }
        fprintf(stderr, "stress %s (%s): %llu requests and %llu messages in %lld ms\n",
                dto_transport_name(), s->role == DTO_SERVER ? "server" : "client",
                (unsigned long long)requests, (unsigned long long)messages, now_ms() - start);
        /* Both sides are done with each other's memory. */
        dto_barrier(s);
        for (unsigned i = 0; i < PAIRS; i++)
                verify_target(s, &st->lanes[i]);
        for (unsigned e = 0; e < 2; e++)
                dto_expect_empty(evds[e]);
        dat_ia_close(st->second.ia, DAT_CLOSE_ABRUPT_FLAG);
        free(st);
}

/* dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT),
 * dat_ep_post_rdma_read(3DAT), dat_ep_post_recv(3DAT) under load: every
 * completion accounted for exactly once and in order per EP, SUPPRESS
 * honoured, every byte where it belongs. */
Test(DTO_SUITE(stress), a_million_mixed_requests_on_8_ep_pairs_complete_exactly_once_in_order)
{
        /* A Send waits for the peer's next receive however long that takes. */
        static const char *const env[] = { "DATD_RNR_TIMEOUT_MS=60000", NULL };
        struct dto_config cfg = {
                .env = env,
                .n_eps = PAIRS_PER_IA,
                .shared_dto_evd = true,
                .evd_qlen = 1024,
                .max_rdma_read = WINDOW,
                .buf_len = 4096,
                .timeout_ms = STRESS_RUN_MS,
        };

        dto_run(&cfg, stress_role, stress_role, NULL);
}
