/* The DAT 2.0 InfiniBand extensions (dat_ib_extensions.h, issue 8) between
 * two processes, on the transport this program was built for
 * (tests/dto/dto_fixture.h): RDMA Write with immediate data, 64-bit
 * compare-and-swap and fetch-and-add through dat_extension_op, their
 * DAT_IB_DTO_EVENT completions, what dat_ia_query advertises, the
 * DAT_IB_MEM_PRIV_REMOTE_ATOMIC privilege and DAT_IB_EVD_EXTENSION_FLAG.
 *
 * The rules come from dat_ib_extensions.h (the DAT 2.0 IB extension
 * definitions, version 209), the DAT 1.2 man pages of the posts they extend
 * and libdat/extension.c (return codes where the header leaves room). */
#include "config.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <dat2/dat_ib_extensions.h>

#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(ext);
DTO_TEST_SUITE(ext_errors);

#define PRIV_ATOMIC ((DAT_MEM_PRIV_FLAGS)(DAT_MEM_PRIV_ALL_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC))

/* Where things are in each side's buffer (page aligned, cfg.buf_len). */
#define WORD_OFF 4096u                  /* the atomics' target words, 8 bytes each */
#define SLOT_OFF 8192u                  /* the old values' landing slots, 8 bytes each */
#define N_SLOTS 4096u
#define RECV_OFF (64u * 1024)           /* receive buffers */
#define RECV_LEN (16u * 1024)
#define DATA_OFF (128u * 1024)          /* RDMA Write with immediate data lands here */
#define BUF_LEN ((DAT_VLEN)4 << 20)

static volatile uint64_t *word_at(struct dto_side *s, unsigned i)
{
        return (volatile uint64_t *)(void *)(s->mem.buf + WORD_OFF + 8 * i);
}

static volatile uint64_t *slot_at(struct dto_side *s, unsigned i)
{
        return (volatile uint64_t *)(void *)(s->mem.buf + SLOT_OFF + 8 * (i % N_SLOTS));
}

static DAT_LMR_TRIPLET slot_iov(struct dto_side *s, unsigned i)
{
        return dto_iov(&s->mem, SLOT_OFF + 8 * (i % N_SLOTS), 8);
}

static DAT_RMR_TRIPLET peer_word(struct dto_side *s, unsigned i)
{
        return dto_riov(&s->peer, WORD_OFF + 8 * i, 8);
}

/* ---- extended completions ------------------------------------------------ */

static DAT_IB_EXTENSION_EVENT_DATA ext_data_of(const DAT_EVENT *ev)
{
        DAT_IB_EXTENSION_EVENT_DATA d;

        memcpy(&d, ev->event_extension_data, sizeof(d));
        return d;
}

/* Asserts ev is a DAT_IB_DTO_EVENT of ep with the DTO fields given and an
 * extension record of type; its status is DAT_OP_SUCCESS exactly when the
 * DTO succeeded.  Returns the record. */
static DAT_IB_EXTENSION_EVENT_DATA check_ext(const DAT_EVENT *ev, DAT_EP_HANDLE ep,
                                             uint64_t cookie, DAT_DTO_COMPLETION_STATUS status,
                                             DAT_SEG_LENGTH length, DAT_IB_DTOS op,
                                             DAT_IB_EXT_TYPE type)
{
        DAT_IB_EXTENSION_EVENT_DATA d = ext_data_of(ev);
        DAT_EVENT plain = *ev;

        DTO_ASSERTF(ev->event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT,
                    "event 0x%x, expected DAT_IB_DTO_EVENT 0x%x (cookie %llu)", ev->event_number,
                    DAT_IB_DTO_EVENT, (unsigned long long)cookie);
        plain.event_number = DAT_DTO_COMPLETION_EVENT;
        (void)dto_check_dto(&plain, ep, cookie, status, length, (DAT_DTOS)op);
        DTO_ASSERTF(d.type == type, "cookie %llu: extension type %d, expected %d",
                    (unsigned long long)cookie, (int)d.type, (int)type);
        DTO_ASSERT_EQ(d.status, status == DAT_DTO_SUCCESS ? DAT_OP_SUCCESS : DAT_IB_OP_ERR);
        return d;
}

static DAT_IB_EXTENSION_EVENT_DATA expect_ext(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep,
                                              uint64_t cookie, DAT_DTO_COMPLETION_STATUS status,
                                              DAT_SEG_LENGTH length, DAT_IB_DTOS op,
                                              DAT_IB_EXT_TYPE type)
{
        DAT_EVENT ev = dto_wait_event(evd);

        return check_ext(&ev, ep, cookie, status, length, op, type);
}

/* ---- posting -------------------------------------------------------------- */

static DAT_RETURN cmp_and_swap(DAT_EP_HANDLE ep, uint64_t cmp, uint64_t swap, DAT_LMR_TRIPLET *l,
                               uint64_t cookie, DAT_RMR_TRIPLET *r)
{
        return dat_ib_post_cmp_and_swap(ep, cmp, swap, l, dto_cookie(cookie), r,
                                        DAT_COMPLETION_DEFAULT_FLAG);
}

static DAT_RETURN fetch_and_add(DAT_EP_HANDLE ep, uint64_t add, DAT_LMR_TRIPLET *l,
                                uint64_t cookie, DAT_RMR_TRIPLET *r)
{
        return dat_ib_post_fetch_and_add(ep, add, l, dto_cookie(cookie), r,
                                         DAT_COMPLETION_DEFAULT_FLAG);
}

/* One atomic on the peer's word i (compare-and-swap when cas, else
 * fetch-and-add of val), waited for; returns the old value. */
static uint64_t atomic_wait(struct dto_side *s, unsigned i, bool cas, uint64_t cmp, uint64_t val,
                            uint64_t cookie)
{
        DAT_LMR_TRIPLET l = slot_iov(s, 0);
        DAT_RMR_TRIPLET r = peer_word(s, i);

        *slot_at(s, 0) = 0xdddddddddddddddd;
        DTO_ASSERT_EQ(cas ? cmp_and_swap(s->ep[0], cmp, val, &l, cookie, &r)
                          : fetch_and_add(s->ep[0], val, &l, cookie, &r),
                      DAT_SUCCESS);
        expect_ext(s->request_evd, s->ep[0], cookie, DAT_DTO_SUCCESS, 8,
                   cas ? DAT_IB_DTO_CMP_SWAP : DAT_IB_DTO_FETCH_ADD,
                   cas ? DAT_IB_CMP_AND_SWAP : DAT_IB_FETCH_AND_ADD);
        return *slot_at(s, 0);
}

static uint64_t cas_wait(struct dto_side *s, unsigned i, uint64_t cmp, uint64_t swap,
                         uint64_t cookie)
{
        return atomic_wait(s, i, true, cmp, swap, cookie);
}

static uint64_t faa_wait(struct dto_side *s, unsigned i, uint64_t add, uint64_t cookie)
{
        return atomic_wait(s, i, false, 0, add, cookie);
}

static void idle(struct dto_side *s, void *arg)
{
        (void)s;
        (void)arg;
}

/* ---- what dat_ia_query advertises -------------------------------------------- */

static const char *named(const DAT_PROVIDER_ATTR *p, const char *name)
{
        for (DAT_COUNT i = 0; i < p->num_provider_specific_attr; i++)
                if (strcmp(p->provider_specific_attr[i].name, name) == 0)
                        return p->provider_specific_attr[i].value;
        return NULL;
}

static void check_advertised(const DAT_IA_ATTR *a, const DAT_PROVIDER_ATTR *p)
{
        DTO_ASSERT_EQ(a->extension_supported, DAT_EXTENSION_IB);
        DTO_ASSERT_EQ(a->extension_version, DAT_IB_EXTENSION_VERSION);
        DTO_ASSERTF(named(p, DAT_IB_ATTR_FETCH_AND_ADD) &&
                            strcmp(named(p, DAT_IB_ATTR_FETCH_AND_ADD), "TRUE") == 0,
                    "%s", DAT_IB_ATTR_FETCH_AND_ADD);
        DTO_ASSERTF(named(p, DAT_IB_ATTR_CMP_AND_SWAP) &&
                            strcmp(named(p, DAT_IB_ATTR_CMP_AND_SWAP), "TRUE") == 0,
                    "%s", DAT_IB_ATTR_CMP_AND_SWAP);
        DTO_ASSERTF(named(p, DAT_IB_ATTR_IMMED_DATA) &&
                            strcmp(named(p, DAT_IB_ATTR_IMMED_DATA), "TRUE") == 0,
                    "%s", DAT_IB_ATTR_IMMED_DATA);
        /* What is not provided is not advertised. */
        DTO_ASSERT(named(p, DAT_IB_ATTR_UD) == NULL);
        DTO_ASSERT(named(p, DAT_IB_ATTR_COUNTERS) == NULL);
}

static void query_role(struct dto_side *s, void *arg)
{
        DAT_IA_ATTR a;
        DAT_PROVIDER_ATTR p;
        DAT_IA_HANDLE q = DAT_HANDLE_NULL;

        (void)arg;
        DTO_ASSERT_EQ(dat_ia_query(s->ia, NULL, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &p),
                      DAT_SUCCESS);
        check_advertised(&a, &p);
        /* dat_ib_open_query: the same by the IA's name, without an open IA
         * of the caller's; dat_ib_close_query closes what it opened. */
        memset(&a, 0, sizeof(a));
        memset(&p, 0, sizeof(p));
        DTO_ASSERT_EQ(dat_ib_open_query((char *)dto_ia_name(), &q, DAT_IA_FIELD_ALL, &a,
                                        DAT_PROVIDER_FIELD_ALL, &p),
                      DAT_SUCCESS);
        DTO_ASSERT(q != DAT_HANDLE_NULL);
        check_advertised(&a, &p);
        DTO_ASSERT_EQ(dat_ib_close_query(q), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_ib_close_query(q), DTO_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
        DTO_ASSERT_NEQ(dat_ib_open_query((char *)"no-such-ia", &q, DAT_IA_FIELD_ALL, &a,
                                         DAT_PROVIDER_FIELD_ALL, &p),
                       DAT_SUCCESS);
        DTO_ASSERT(q == DAT_HANDLE_NULL);
}

/* dat_ib_extensions.h: a provider of the IB set reports extension_supported
 * DAT_EXTENSION_IB with extension_version DAT_IB_EXTENSION_VERSION, and each
 * capability as a provider attribute (DAT_IB_ATTR_*) whose value is "TRUE";
 * dat_ib_open_query reports the same by name. */
Test(DTO_SUITE(ext), ia_query_advertises_the_ib_extensions)
{
        dto_run(NULL, query_role, query_role, NULL);
}

/* ---- RDMA Write with immediate data ---------------------------------------- */

static const DAT_VLEN immed_sizes[] = { 0, 1, 1000, 64 * 1024 + 3, 1 << 20 };
#define N_IMMED_SIZES (sizeof(immed_sizes) / sizeof(immed_sizes[0]))

static uint32_t immed_of(unsigned i)
{
        return 0xfeed0000u + i;
}

static void immed_writer(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned i = 0; i < N_IMMED_SIZES; i++) {
                DAT_VLEN len = immed_sizes[i];
                DAT_LMR_TRIPLET l = dto_iov(&s->mem, DATA_OFF, len);
                DAT_RMR_TRIPLET r = dto_riov(&s->peer, DATA_OFF + i, len);

                dto_fill(s->mem.buf + DATA_OFF, len, 100 + i);
                dto_barrier(s); /* the receive is posted */
                DTO_ASSERT_EQ(dat_ib_post_rdma_write_immed(s->ep[0], len ? 1 : 0, &l,
                                                           dto_cookie(10 + i), &r, immed_of(i),
                                                           DAT_COMPLETION_DEFAULT_FLAG),
                              DAT_SUCCESS);
                expect_ext(s->request_evd, s->ep[0], 10 + i, DAT_DTO_SUCCESS, len,
                           DAT_IB_DTO_RDMA_WRITE_IMMED, DAT_IB_RDMA_WRITE_IMMED);
                dto_barrier(s);
        }
}

static void immed_target(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned i = 0; i < N_IMMED_SIZES; i++) {
                DAT_VLEN len = immed_sizes[i];
                DAT_LMR_TRIPLET rx = dto_iov(&s->mem, RECV_OFF, RECV_LEN);
                DAT_IB_EXTENSION_EVENT_DATA d;

                dto_fill(s->mem.buf + RECV_OFF, RECV_LEN, 200 + i);
                dto_post_recv(s, s->ep[0], &rx, 1, 20 + i);
                dto_barrier(s);
                d = expect_ext(s->recv_evd, s->ep[0], 20 + i, DAT_DTO_SUCCESS, len,
                               DAT_IB_DTO_RECV_IMMED, DAT_IB_RDMA_WRITE_IMMED_DATA);
                DTO_ASSERT_EQ(d.val.immed.data, immed_of(i));
                /* The data went where the Write aimed; the receive buffer
                 * only completed. */
                dto_verify(s->mem.buf + DATA_OFF + i, len, 100 + i);
                dto_verify(s->mem.buf + RECV_OFF, RECV_LEN, 200 + i);
                dto_barrier(s);
        }
}

/* dat_ib_extensions.h, dat_ib_post_rdma_write_immed: an RDMA Write "that
 * also delivers 32 bits of immediate data to the peer": the data lands in
 * the remote buffer, the initiator's completion is DAT_IB_DTO_EVENT /
 * DAT_IB_DTO_RDMA_WRITE_IMMED / DAT_IB_RDMA_WRITE_IMMED with the length
 * written, and a receive of the target completes DAT_IB_DTO_RECV_IMMED /
 * DAT_IB_RDMA_WRITE_IMMED_DATA with that length and the immediate data
 * (sizes from 0 bytes to 1 MiB: inline and cross-memory paths). */
Test(DTO_SUITE(ext), write_immed_places_the_data_and_completes_a_receive_with_the_immediate)
{
        struct dto_config cfg = { .buf_len = BUF_LEN, .buf_privileges = PRIV_ATOMIC };

        dto_run(&cfg, immed_target, immed_writer, NULL);
}

static void immed_early_writer(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET l = dto_iov(&s->mem, DATA_OFF, 64);
        DAT_RMR_TRIPLET r = dto_riov(&s->peer, DATA_OFF, 64);

        (void)arg;
        dto_fill(s->mem.buf + DATA_OFF, 64, 7);
        DTO_ASSERT_EQ(dat_ib_post_rdma_write_immed(s->ep[0], 1, &l, dto_cookie(1), &r, 0x1234,
                                                   DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_barrier(s); /* posted before the target has a receive */
        expect_ext(s->request_evd, s->ep[0], 1, DAT_DTO_SUCCESS, 64, DAT_IB_DTO_RDMA_WRITE_IMMED,
                   DAT_IB_RDMA_WRITE_IMMED);
}

static void immed_late_target(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET rx = dto_iov(&s->mem, RECV_OFF, RECV_LEN);
        DAT_IB_EXTENSION_EVENT_DATA d;

        (void)arg;
        dto_barrier(s);
        dto_post_recv(s, s->ep[0], &rx, 1, 2);
        d = expect_ext(s->recv_evd, s->ep[0], 2, DAT_DTO_SUCCESS, 64, DAT_IB_DTO_RECV_IMMED,
                       DAT_IB_RDMA_WRITE_IMMED_DATA);
        DTO_ASSERT_EQ(d.val.immed.data, 0x1234);
        dto_verify(s->mem.buf + DATA_OFF, 64, 7);
}

/* dat_ib_extensions.h: the immediate data is delivered "to the peer" through
 * a receive, as a Send's message is: a Write with immediate data that
 * arrives before the receive waits for it (within the receiver-not-ready
 * time, dto.h) instead of being lost. */
Test(DTO_SUITE(ext), write_immed_waits_for_a_receive_like_a_send)
{
        struct dto_config cfg = { .buf_privileges = PRIV_ATOMIC };

        dto_run(&cfg, immed_late_target, immed_early_writer, NULL);
}

/* ---- compare-and-swap, fetch-and-add -------------------------------------- */

static void cas_initiator(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s); /* the words are set */
        /* equal: swapped, the old value returned */
        DTO_ASSERT_EQ(cas_wait(s, 0, 0x1111222233334444, 0xaaaabbbbccccdddd, 1),
                      0x1111222233334444);
        /* different: not swapped, the current value returned */
        DTO_ASSERT_EQ(cas_wait(s, 1, 0x5, 0x6, 2), 0x7777);
        /* all 64 bits are compared: a difference in the high half fails */
        DTO_ASSERT_EQ(cas_wait(s, 2, 0x0000000100000009, 0x42, 3), 0x0000000200000009);
        dto_barrier(s);
}

static void cas_target(struct dto_side *s, void *arg)
{
        (void)arg;
        *word_at(s, 0) = 0x1111222233334444;
        *word_at(s, 1) = 0x7777;
        *word_at(s, 2) = 0x0000000200000009;
        dto_barrier(s);
        dto_barrier(s); /* the initiator's atomics completed */
        DTO_ASSERT_EQ(*word_at(s, 0), 0xaaaabbbbccccdddd);
        DTO_ASSERT_EQ(*word_at(s, 1), 0x7777);
        DTO_ASSERT_EQ(*word_at(s, 2), 0x0000000200000009);
}

/* dat_ib_extensions.h, dat_ib_post_cmp_and_swap: a 64-bit compare-and-swap
 * on remote memory, "the old value lands in lbuf": the target's word takes
 * swap_val only when it equals cmp_val; the completion is DAT_IB_DTO_EVENT /
 * DAT_IB_DTO_CMP_SWAP / DAT_IB_CMP_AND_SWAP with 8 bytes either way. */
Test(DTO_SUITE(ext), cmp_and_swap_swaps_only_an_equal_word_and_returns_the_old_value)
{
        struct dto_config cfg = { .buf_privileges = PRIV_ATOMIC };

        dto_run(&cfg, cas_target, cas_initiator, NULL);
}

static void faa_initiator(struct dto_side *s, void *arg)
{
        (void)arg;
        dto_barrier(s);
        DTO_ASSERT_EQ(faa_wait(s, 0, 5, 1), 100);
        DTO_ASSERT_EQ(faa_wait(s, 0, 0x100000000, 2), 105);
        /* modulo 2^64 */
        DTO_ASSERT_EQ(faa_wait(s, 1, 2, 3), UINT64_MAX);
        dto_barrier(s);
}

static void faa_target(struct dto_side *s, void *arg)
{
        (void)arg;
        *word_at(s, 0) = 100;
        *word_at(s, 1) = UINT64_MAX;
        *word_at(s, 2) = 0x5a5a5a5a5a5a5a5a;
        dto_barrier(s);
        dto_barrier(s);
        DTO_ASSERT_EQ(*word_at(s, 0), 0x100000000 + 105);
        DTO_ASSERT_EQ(*word_at(s, 1), 1);
        DTO_ASSERT_EQ(*word_at(s, 2), 0x5a5a5a5a5a5a5a5a); /* its neighbour untouched */
}

/* dat_ib_extensions.h, dat_ib_post_fetch_and_add: a 64-bit fetch-and-add on
 * remote memory (modulo 2^64), the old value in lbuf; the completion is
 * DAT_IB_DTO_EVENT / DAT_IB_DTO_FETCH_ADD / DAT_IB_FETCH_AND_ADD, 8 bytes. */
Test(DTO_SUITE(ext), fetch_and_add_adds_and_returns_the_old_value)
{
        struct dto_config cfg = { .buf_privileges = PRIV_ATOMIC };

        dto_run(&cfg, faa_target, faa_initiator, NULL);
}

/* ---- atomics from several threads of both processes ----------------------- */

#define N_THREADS 4
#define FAA_PER_THREAD 400
#define CAS_PER_THREAD 150

/* Threads post on their own EP; the side's main thread reaps every
 * completion of the shared request EVD and tells each thread its atomic
 * is done (the old value is then in the thread's slot). */
struct worker {
        struct dto_side *s;
        unsigned t;
        bool cas;                       /* a CAS-loop counter, else fetch-and-adds */
        atomic_uint done;               /* completions reaped for this thread */
        uint64_t old[FAA_PER_THREAD];   /* what each atomic returned */
        unsigned n_old;
        char error[160];
};

static uint64_t cookie_of(unsigned t, unsigned n)
{
        return ((uint64_t)t << 32) | n;
}

/* Posts one atomic of thread w (its n-th) and waits until it was reaped. */
static uint64_t worker_atomic(struct worker *w, unsigned n, uint64_t cmp, uint64_t val)
{
        struct dto_side *s = w->s;
        unsigned slot = w->t;
        DAT_LMR_TRIPLET l = slot_iov(s, slot);
        DAT_RMR_TRIPLET r = peer_word(s, 0);
        DAT_RETURN ret;

        ret = w->cas ? cmp_and_swap(s->ep[w->t], cmp, val, &l, cookie_of(w->t, n), &r)
                     : fetch_and_add(s->ep[w->t], val, &l, cookie_of(w->t, n), &r);
        if (ret != DAT_SUCCESS) {
                snprintf(w->error, sizeof(w->error), "thread %u post %u: 0x%08x", w->t, n, ret);
                return 0;
        }
        while (atomic_load(&w->done) <= n)
                sched_yield();
        return *slot_at(s, slot);
}

static void *worker_main(void *arg)
{
        struct worker *w = arg;

        if (!w->cas) {
                for (unsigned n = 0; n < FAA_PER_THREAD && !w->error[0]; n++)
                        w->old[w->n_old++] = worker_atomic(w, n, 0, w->t + 1);
                return NULL;
        }
        /* Increment by compare-and-swap: retry with what the word held. */
        uint64_t expected = 0;
        unsigned n = 0;

        for (unsigned ok = 0; ok < CAS_PER_THREAD && !w->error[0]; n++) {
                uint64_t old = worker_atomic(w, n, expected, expected + 1);

                if (old == expected)
                        ok++;
                expected = old == expected ? expected + 1 : old;
        }
        return NULL;
}

/* Reaps completions until every worker finished (each thread's atomics
 * complete in order on its EP). */
static void reap(struct dto_side *s, struct worker *w, pthread_t *th)
{
        unsigned finished = 0;
        bool running[N_THREADS];

        for (unsigned t = 0; t < N_THREADS; t++)
                running[t] = true;
        while (finished < N_THREADS) {
                DAT_EVENT ev;
                DAT_COUNT nmore;
                DAT_RETURN r = dat_evd_wait(s->request_evd, 200 * 1000, 1, &ev, &nmore);

                if (r == DAT_SUCCESS) {
                        const DAT_DTO_COMPLETION_EVENT_DATA *d =
                                &ev.event_data.dto_completion_event_data;
                        unsigned t = (unsigned)(d->user_cookie.as_64 >> 32);

                        DTO_ASSERT(t < N_THREADS);
                        check_ext(&ev, s->ep[t], d->user_cookie.as_64, DAT_DTO_SUCCESS, 8,
                                  w[t].cas ? DAT_IB_DTO_CMP_SWAP : DAT_IB_DTO_FETCH_ADD,
                                  w[t].cas ? DAT_IB_CMP_AND_SWAP : DAT_IB_FETCH_AND_ADD);
                        DTO_ASSERT_EQ(d->user_cookie.as_64 & 0xffffffff, atomic_load(&w[t].done));
                        atomic_fetch_add(&w[t].done, 1);
                } else {
                        DTO_ASSERT_EQ(DAT_GET_TYPE(r), DAT_TIMEOUT_EXPIRED);
                }
                for (unsigned t = 0; t < N_THREADS; t++) {
                        if (running[t] && pthread_tryjoin_np(th[t], NULL) == 0) {
                                running[t] = false;
                                finished++;
                                DTO_ASSERTF(!w[t].error[0], "%s", w[t].error);
                        }
                }
        }
}

static void run_workers(struct dto_side *s, struct worker *w, bool cas)
{
        pthread_t th[N_THREADS];

        *word_at(s, 0) = 0;
        dto_barrier(s); /* both words are 0 */
        for (unsigned t = 0; t < N_THREADS; t++) {
                w[t].s = s;
                w[t].t = t;
                w[t].cas = cas;
                DTO_ASSERT_EQ(pthread_create(&th[t], NULL, worker_main, &w[t]), 0);
        }
        reap(s, w, th);
        dto_barrier(s); /* both sides' atomics are done */
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

static void faa_threads_role(struct dto_side *s, void *arg)
{
        static struct worker w[N_THREADS];
        static uint64_t all[N_THREADS * FAA_PER_THREAD];
        unsigned n = 0;

        (void)arg;
        run_workers(s, w, false);
        /* Each of the peer's threads added (t + 1) FAA_PER_THREAD times. */
        DTO_ASSERT_EQ(*word_at(s, 0), (uint64_t)FAA_PER_THREAD * (1 + 2 + 3 + 4));
        /* Every fetch-and-add saw a different value: none was lost or torn. */
        for (unsigned t = 0; t < N_THREADS; t++)
                for (unsigned i = 0; i < w[t].n_old; i++)
                        all[n++] = w[t].old[i];
        DTO_ASSERT_EQ(n, N_THREADS * FAA_PER_THREAD);
        qsort(all, n, sizeof(all[0]), cmp_u64);
        for (unsigned i = 1; i < n; i++)
                DTO_ASSERTF(all[i] != all[i - 1], "two fetch-and-adds returned %llu",
                            (unsigned long long)all[i]);
        DTO_ASSERT_EQ(all[0], 0);
}

/* dat_ib_extensions.h: fetch-and-add is atomic: N_THREADS threads of each
 * process, each on its own EP, add to the other process's word
 * concurrently (the target serves the EPs in whichever of its threads
 * polls); the total is exact and every returned old value is distinct. */
Test(DTO_SUITE(ext), fetch_and_add_from_threads_of_both_processes_totals_exactly)
{
        struct dto_config cfg = { .n_eps = N_THREADS, .buf_privileges = PRIV_ATOMIC };

        dto_run(&cfg, faa_threads_role, faa_threads_role, NULL);
}

static void cas_threads_role(struct dto_side *s, void *arg)
{
        static struct worker w[N_THREADS];

        (void)arg;
        run_workers(s, w, true);
        DTO_ASSERT_EQ(*word_at(s, 0), (uint64_t)N_THREADS * CAS_PER_THREAD);
}

/* dat_ib_extensions.h: compare-and-swap is atomic: a counter that
 * N_THREADS threads of the other process increment by compare-and-swap
 * loops (a failed compare returns the current value to retry with) ends
 * at exactly the number of successful swaps. */
Test(DTO_SUITE(ext), cmp_and_swap_counter_from_threads_of_both_processes_is_exact)
{
        struct dto_config cfg = { .n_eps = N_THREADS, .buf_privileges = PRIV_ATOMIC };

        dto_run(&cfg, cas_threads_role, cas_threads_role, NULL);
}

/* ---- privileges, EVD flag ----------------------------------------------------- */

static void atomic_only_lmr_target(struct dto_side *s, void *arg)
{
        DAT_MEM_PRIV_FLAGS priv = (DAT_MEM_PRIV_FLAGS)(DAT_MEM_PRIV_LOCAL_READ_FLAG |
                                                       DAT_MEM_PRIV_LOCAL_WRITE_FLAG |
                                                       DAT_IB_MEM_PRIV_REMOTE_ATOMIC);
        struct dto_mem m = dto_mem_new(s, NULL, 4096, priv);
        struct dto_remote mine;
        DAT_LMR_PARAM p;

        (void)arg;
        /* dat_lmr_create(3DAT): the rmr_context of an LMR with a remote
         * privilege, remote atomics being one */
        DTO_ASSERT_NEQ(m.rmr_context, 0);
        DTO_ASSERT_EQ(dat_lmr_query(m.lmr, DAT_LMR_FIELD_ALL, &p), DAT_SUCCESS);
        DTO_ASSERT_EQ(p.mem_priv, priv);
        *(volatile uint64_t *)(void *)m.buf = 40;
        mine = dto_exchange(s, &m);
        (void)mine;
        dto_barrier(s);
        DTO_ASSERT_EQ(*(volatile uint64_t *)(void *)m.buf, 42);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
        /* the refused Write did not touch it either */
        DTO_ASSERT_EQ(*(volatile uint64_t *)(void *)(m.buf + 8), 0);
}

static void atomic_only_lmr_initiator(struct dto_side *s, void *arg)
{
        struct dto_mem m = dto_mem_new(s, NULL, 4096, PRIV_ATOMIC);
        struct dto_remote peer = dto_exchange(s, &m);
        DAT_LMR_TRIPLET l = slot_iov(s, 0);
        DAT_RMR_TRIPLET r = dto_riov(&peer, 0, 8);
        DAT_LMR_TRIPLET wl = dto_iov(&s->mem, DATA_OFF, 8);
        DAT_RMR_TRIPLET wr = dto_riov(&peer, 8, 8);

        (void)arg;
        DTO_ASSERT_EQ(fetch_and_add(s->ep[0], 2, &l, 1, &r), DAT_SUCCESS);
        expect_ext(s->request_evd, s->ep[0], 1, DAT_DTO_SUCCESS, 8, DAT_IB_DTO_FETCH_ADD,
                   DAT_IB_FETCH_AND_ADD);
        DTO_ASSERT_EQ(*slot_at(s, 0), 40);
        dto_fill(s->mem.buf + DATA_OFF, 8, 3);
        /* ... but no remote write privilege: an RDMA Write is refused */
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &wl, dto_cookie(2), &wr,
                                             DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        dto_expect_dto(s->request_evd, s->ep[0], 2, DAT_DTO_ERR_REMOTE_ACCESS, DTO_ANY_LENGTH,
                       DAT_DTO_RDMA_WRITE);
        dto_barrier(s);
}

/* dat_lmr_create(3DAT) with dat_ib_extensions.h's privilege: an LMR whose
 * only remote privilege is DAT_IB_MEM_PRIV_REMOTE_ATOMIC publishes an
 * rmr_context that atomics may target, and that grants nothing else (an
 * RDMA Write through it is DAT_DTO_ERR_REMOTE_ACCESS). */
Test(DTO_SUITE(ext), lmr_with_only_the_remote_atomic_privilege_is_an_atomic_target)
{
        dto_run(NULL, atomic_only_lmr_target, atomic_only_lmr_initiator, NULL);
}

struct rmr_pair {
        DAT_RMR_CONTEXT atomic, plain;
};

static DAT_RMR_CONTEXT bind_rmr(struct dto_side *s, DAT_RMR_HANDLE rmr, DAT_VLEN off,
                                DAT_MEM_PRIV_FLAGS priv, uint64_t cookie)
{
        DAT_LMR_TRIPLET t = dto_iov(&s->mem, off, 64);
        DAT_RMR_CONTEXT ctx = 0;
        DAT_RMR_COOKIE c = { .as_64 = cookie };
        DAT_EVENT ev;

        DTO_ASSERT_EQ(dat_rmr_bind(rmr, s->mem.lmr, &t, priv, DAT_VA_TYPE_VA, s->ep[0], c,
                                   DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                      DAT_SUCCESS);
        ev = dto_wait_event(s->request_evd);
        DTO_ASSERT_EQ(ev.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.status, DAT_RMR_BIND_SUCCESS);
        return ctx;
}

static void rmr_target(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET window = dto_iov(&s->mem, WORD_OFF, 64);
        DAT_RMR_HANDLE a, b;
        struct rmr_pair ctx;

        (void)arg;
        DTO_ASSERT_EQ(dat_rmr_create(s->pz, &a), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_rmr_create(s->pz, &b), DAT_SUCCESS);
        /* dat_rmr_bind(3DAT): an unknown privilege bit is still refused */
        DTO_ASSERT_EQ(dat_rmr_bind(a, s->mem.lmr, &window, (DAT_MEM_PRIV_FLAGS)0x80, DAT_VA_TYPE_VA, s->ep[0],
                                   (DAT_RMR_COOKIE){ .as_64 = 0 }, DAT_COMPLETION_DEFAULT_FLAG,
                                   &ctx.atomic),
                      DTO_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
        ctx.atomic = bind_rmr(s, a, WORD_OFF, (DAT_MEM_PRIV_FLAGS)DAT_IB_MEM_PRIV_REMOTE_ATOMIC, 1);
        ctx.plain = bind_rmr(s, b, WORD_OFF + 64,
                             DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 2);
        *word_at(s, 0) = 7;
        *word_at(s, 8) = 9;
        dto_put(s, &ctx, sizeof(ctx));
        dto_barrier(s);
        DTO_ASSERT_EQ(*word_at(s, 0), 8);
        DTO_ASSERT_EQ(*word_at(s, 8), 9);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
        DTO_ASSERT_EQ(dat_rmr_free(a), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_rmr_free(b), DAT_SUCCESS);
}

static void rmr_initiator(struct dto_side *s, void *arg)
{
        struct rmr_pair ctx;
        DAT_LMR_TRIPLET l = slot_iov(s, 0);
        DAT_RMR_TRIPLET r;

        (void)arg;
        dto_get(s, &ctx, sizeof(ctx));
        r = (DAT_RMR_TRIPLET){ .rmr_context = ctx.atomic, .virtual_address = s->peer.addr + WORD_OFF,
                               .segment_length = 8 };
        DTO_ASSERT_EQ(fetch_and_add(s->ep[0], 1, &l, 1, &r), DAT_SUCCESS);
        expect_ext(s->request_evd, s->ep[0], 1, DAT_DTO_SUCCESS, 8, DAT_IB_DTO_FETCH_ADD,
                   DAT_IB_FETCH_AND_ADD);
        DTO_ASSERT_EQ(*slot_at(s, 0), 7);
        r.rmr_context = ctx.plain;
        r.virtual_address = s->peer.addr + WORD_OFF + 64;
        DTO_ASSERT_EQ(fetch_and_add(s->ep[0], 1, &l, 2, &r), DAT_SUCCESS);
        expect_ext(s->request_evd, s->ep[0], 2, DAT_DTO_ERR_REMOTE_ACCESS, DTO_ANY_LENGTH,
                   DAT_IB_DTO_FETCH_ADD, DAT_IB_FETCH_AND_ADD);
        dto_barrier(s);
}

/* dat_rmr_bind(3DAT) with dat_ib_extensions.h's privilege: an RMR bound
 * with DAT_IB_MEM_PRIV_REMOTE_ATOMIC takes atomics; one bound with remote
 * read and write only refuses them (DAT_DTO_ERR_REMOTE_ACCESS, the word
 * untouched). */
Test(DTO_SUITE(ext), rmr_bound_with_remote_atomic_takes_atomics_and_others_refuse_them)
{
        struct dto_config cfg = { .buf_privileges = PRIV_ATOMIC };

        dto_run(&cfg, rmr_target, rmr_initiator, NULL);
}

static void evd_flag_role(struct dto_side *s, void *arg)
{
        DAT_EVD_HANDLE evd;
        DAT_EVD_PARAM p;

        (void)arg;
        DTO_ASSERT_EQ(dat_evd_create(s->ia, 8, DAT_HANDLE_NULL,
                                     (DAT_EVD_FLAGS)(DAT_EVD_DTO_FLAG | DAT_IB_EVD_EXTENSION_FLAG),
                                     &evd),
                      DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &p), DAT_SUCCESS);
        DTO_ASSERT_EQ(p.evd_flags, DAT_EVD_DTO_FLAG | DAT_IB_EVD_EXTENSION_FLAG);
        DTO_ASSERT_EQ(dat_evd_free(evd), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_evd_create(s->ia, 8, DAT_HANDLE_NULL,
                                     (DAT_EVD_FLAGS)DAT_IB_EVD_EXTENSION_FLAG, &evd),
                      DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_evd_free(evd), DAT_SUCCESS);
        /* other extension bits: still an unsupported model */
        DTO_ASSERT_EQ(dat_evd_create(s->ia, 8, DAT_HANDLE_NULL,
                                     (DAT_EVD_FLAGS)(DAT_EVD_DTO_FLAG | 0x400), &evd),
                      DTO_ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE));
}

/* dat_ib_extensions.h: DAT_IB_EVD_EXTENSION_FLAG is a dat_evd_create()
 * flag ("the EVD takes extended events"), with or without stream flags;
 * extension bits beyond it stay DAT_MODEL_NOT_SUPPORTED (dat_evd_create
 * (3DAT)). */
Test(DTO_SUITE(ext), evd_create_takes_the_ib_extension_flag)
{
        dto_run(NULL, evd_flag_role, idle, NULL);
}

/* ---- errors ------------------------------------------------------------------ */

enum fault { NO_PRIVILEGE, MISALIGNED };

struct fault_case {
        enum fault fault;
        bool cas;
};

static void fault_target(struct dto_side *s, void *arg)
{
        (void)arg;
        *word_at(s, 0) = 0x0102030405060708;
        *word_at(s, 1) = 0x1112131415161718;
        dto_barrier(s);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
        DTO_ASSERT_EQ(*word_at(s, 0), 0x0102030405060708);
        DTO_ASSERT_EQ(*word_at(s, 1), 0x1112131415161718);
}

static void fault_initiator(struct dto_side *s, void *arg)
{
        const struct fault_case *f = arg;
        DAT_LMR_TRIPLET l = slot_iov(s, 0);
        DAT_RMR_TRIPLET r = dto_riov(&s->peer, WORD_OFF + (f->fault == MISALIGNED ? 4 : 0), 8);

        dto_barrier(s);
        *slot_at(s, 0) = 0xdddddddddddddddd;
        DTO_ASSERT_EQ(f->cas ? cmp_and_swap(s->ep[0], 0x0102030405060708, 0, &l, 1, &r)
                             : fetch_and_add(s->ep[0], 1, &l, 1, &r),
                      DAT_SUCCESS);
        expect_ext(s->request_evd, s->ep[0], 1, DAT_DTO_ERR_REMOTE_ACCESS, DTO_ANY_LENGTH,
                   f->cas ? DAT_IB_DTO_CMP_SWAP : DAT_IB_DTO_FETCH_ADD,
                   f->cas ? DAT_IB_CMP_AND_SWAP : DAT_IB_FETCH_AND_ADD);
        /* no old value came back */
        DTO_ASSERT_EQ(*slot_at(s, 0), 0xdddddddddddddddd);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_BROKEN);
}

static void run_fault(enum fault fault, bool cas)
{
        struct fault_case f = { .fault = fault, .cas = cas };
        struct dto_config cfg = {
                .buf_privileges = fault == NO_PRIVILEGE ? DAT_MEM_PRIV_ALL_FLAG : PRIV_ATOMIC,
        };

        dto_run(&cfg, fault_target, fault_initiator, &f);
}

/* dat_ib_extensions.h: DAT_IB_MEM_PRIV_REMOTE_ATOMIC, "remote atomics may
 * target the region": an rmr_context without it is refused by the target,
 * DAT_DTO_ERR_REMOTE_ACCESS (DAT_IB_OP_ERR in the extension record), the
 * word untouched and, as every error completion (dto.h), the connection
 * broken. */
Test(DTO_SUITE(ext_errors), fetch_and_add_without_the_remote_atomic_privilege_is_remote_access)
{
        run_fault(NO_PRIVILEGE, false);
}

/* The same for compare-and-swap. */
Test(DTO_SUITE(ext_errors), cmp_and_swap_without_the_remote_atomic_privilege_is_remote_access)
{
        run_fault(NO_PRIVILEGE, true);
}

/* The IB atomics work on naturally aligned 64-bit words: a target address
 * that is not 8-byte aligned is refused by the target,
 * DAT_DTO_ERR_REMOTE_ACCESS, nothing changed. */
Test(DTO_SUITE(ext_errors), fetch_and_add_on_a_misaligned_word_is_remote_access)
{
        run_fault(MISALIGNED, false);
}

/* The same for compare-and-swap. */
Test(DTO_SUITE(ext_errors), cmp_and_swap_on_a_misaligned_word_is_remote_access)
{
        run_fault(MISALIGNED, true);
}

#define ARG(n) DTO_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1 + (n) - 1)

static void refusals_role(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET l = slot_iov(s, 0), short_l = dto_iov(&s->mem, SLOT_OFF, 4);
        DAT_LMR_TRIPLET outside = { .lmr_context = s->mem.lmr_context,
                                    .virtual_address = (uintptr_t)s->mem.buf + s->mem.len - 4,
                                    .segment_length = 8 };
        DAT_LMR_TRIPLET unknown = { .lmr_context = 0x7fff1234, .virtual_address = l.virtual_address,
                                    .segment_length = 8 };
        DAT_RMR_TRIPLET r = peer_word(s, 0);
        DAT_DTO_COOKIE c = dto_cookie(1);
        DAT_COMPLETION_FLAGS solicited = DAT_COMPLETION_SOLICITED_WAIT_FLAG;
        struct dto_mem ro = dto_mem_new(s, NULL, 4096, DAT_MEM_PRIV_LOCAL_READ_FLAG);
        DAT_LMR_TRIPLET ro_l = dto_iov(&ro, 0, 8);

        (void)arg;
        /* a local buffer shorter than the 8 bytes the old value needs */
        DTO_ASSERT_EQ(dat_ib_post_fetch_and_add(s->ep[0], 1, &short_l, c, &r, 0),
                      DTO_ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE));
        DTO_ASSERT_EQ(dat_ib_post_cmp_and_swap(s->ep[0], 1, 2, &short_l, c, &r, 0),
                      DTO_ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE));
        /* arguments, by their position in the dat_ib_* macro (the EP first) */
        DTO_ASSERT_EQ(dat_ib_post_fetch_and_add(s->ep[0], 1, NULL, c, &r, 0), ARG(3));
        DTO_ASSERT_EQ(dat_ib_post_fetch_and_add(s->ep[0], 1, &outside, c, &r, 0), ARG(3));
        DTO_ASSERT_EQ(dat_ib_post_fetch_and_add(s->ep[0], 1, &l, c, NULL, 0), ARG(5));
        DTO_ASSERT_EQ(dat_ib_post_fetch_and_add(s->ep[0], 1, &l, c, &r, solicited), ARG(6));
        DTO_ASSERT_EQ(dat_ib_post_cmp_and_swap(s->ep[0], 1, 2, NULL, c, &r, 0), ARG(4));
        DTO_ASSERT_EQ(dat_ib_post_cmp_and_swap(s->ep[0], 1, 2, &outside, c, &r, 0), ARG(4));
        DTO_ASSERT_EQ(dat_ib_post_cmp_and_swap(s->ep[0], 1, 2, &l, c, NULL, 0), ARG(6));
        DTO_ASSERT_EQ(dat_ib_post_cmp_and_swap(s->ep[0], 1, 2, &l, c, &r, solicited), ARG(7));
        DTO_ASSERT_EQ(dat_ib_post_rdma_write_immed(s->ep[0], -1, &l, c, &r, 1, 0), ARG(2));
        DTO_ASSERT_EQ(dat_ib_post_rdma_write_immed(s->ep[0], 1, NULL, c, &r, 1, 0), ARG(3));
        DTO_ASSERT_EQ(dat_ib_post_rdma_write_immed(s->ep[0], 1, &l, c, NULL, 1, 0), ARG(5));
        DTO_ASSERT_EQ(dat_ib_post_rdma_write_immed(s->ep[0], 1, &l, c, &r, 1, solicited), ARG(7));
        /* dat_ep_post_rdma_read(3DAT)'s rules for the buffer the old value
         * lands in: an unknown lmr_context, or an LMR without local write */
        DTO_ASSERT_EQ(dat_ib_post_fetch_and_add(s->ep[0], 1, &unknown, c, &r, 0),
                      DTO_ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE));
        DTO_ASSERT_EQ(dat_ib_post_cmp_and_swap(s->ep[0], 1, 2, &ro_l, c, &r, 0),
                      DTO_ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE));
        /* handles: none at all, or not an EP */
        DTO_ASSERT_EQ(dat_ib_post_fetch_and_add(DAT_HANDLE_NULL, 1, &l, c, &r, 0),
                      DTO_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
        DTO_ASSERT_EQ(dat_ib_post_fetch_and_add(s->pz, 1, &l, c, &r, 0),
                      DTO_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        DTO_ASSERT_EQ(dat_ib_post_rdma_write_immed(s->ia, 1, &l, c, &r, 1, 0),
                      DTO_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        /* operations: unknown, or of the set but not provided */
        DTO_ASSERT_EQ(dat_extension_op(s->ep[0], 999), ARG(2));
        DTO_ASSERT_EQ(dat_ib_post_send_ud(s->ep[0], 1, &l, NULL, c, 0),
                      DTO_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE));
        DTO_ASSERT_EQ(dat_ib_query_counters(s->ia, DCNT_IA_ALL_COUNTERS, NULL, 0),
                      DTO_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE));
        /* nothing was posted */
        dto_expect_no_event(s->request_evd, 100 * 1000);
        dto_mem_free(&ro);
}

static void read_only_role(struct dto_side *s, void *arg)
{
        void *page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        DAT_REGION_DESCRIPTION region = { .for_va = page };
        DAT_LMR_HANDLE lmr;
        DAT_LMR_CONTEXT lctx;
        DAT_RMR_CONTEXT rctx;

        (void)arg;
        DTO_ASSERT(page != MAP_FAILED);
        DTO_ASSERT_EQ(dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, s->pz,
                                     (DAT_MEM_PRIV_FLAGS)(DAT_MEM_PRIV_LOCAL_READ_FLAG |
                                                          DAT_IB_MEM_PRIV_REMOTE_ATOMIC),
                                     DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, NULL, NULL),
                      ARG(6));
        /* read-only memory may still be remotely readable */
        DTO_ASSERT_EQ(dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, s->pz,
                                     DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG,
                                     DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, NULL, NULL),
                      DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_lmr_free(lmr), DAT_SUCCESS);
        /* a privilege bit beyond the IB set is still invalid */
        DTO_ASSERT_EQ(dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, s->pz,
                                     (DAT_MEM_PRIV_FLAGS)(DAT_MEM_PRIV_LOCAL_READ_FLAG | 0x80),
                                     DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, NULL, NULL),
                      ARG(6));
        munmap(page, 4096);
}

/* dat_lmr_create(3DAT): privileges the memory does not allow are
 * DAT_INVALID_ARG6 (libdat/lmr.c); remote atomics write the memory, so
 * DAT_IB_MEM_PRIV_REMOTE_ATOMIC on read-only pages is refused, as are bits
 * outside DAT_MEM_PRIV_ALL_FLAG and the IB set. */
Test(DTO_SUITE(ext_errors), remote_atomic_privilege_on_read_only_memory_is_invalid_arg6)
{
        dto_run(NULL, read_only_role, idle, NULL);
}

/* dat_ep_post_rdma_read(3DAT) / dat_ep_post_rdma_write(3DAT) rules applied
 * to the extended posts (libdat/extension.c): synchronous refusals post
 * nothing; a local buffer too small for the 8-byte old value is
 * DAT_LENGTH_ERROR; bad arguments are DAT_INVALID_PARAMETER naming their
 * position; an object that is not an EP is DAT_INVALID_HANDLE_EP, no object
 * DAT_INVALID_HANDLE1; an operation outside the IB set DAT_INVALID_ARG2,
 * one of the set this provider lacks DAT_NOT_IMPLEMENTED. */
Test(DTO_SUITE(ext_errors), bad_posts_are_refused_synchronously)
{
        struct dto_config cfg = { .buf_privileges = PRIV_ATOMIC };

        dto_run(&cfg, refusals_role, idle, NULL);
}

static void disconnected_role(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET l = slot_iov(s, 0);
        DAT_RMR_TRIPLET r = peer_word(s, 0);

        (void)arg;
        DTO_ASSERT_EQ(dat_ep_disconnect(s->ep[0], DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        dto_expect_conn_event(s, DAT_CONNECTION_EVENT_DISCONNECTED);
        DTO_ASSERT_EQ(fetch_and_add(s->ep[0], 1, &l, 1, &r), DAT_SUCCESS);
        expect_ext(s->request_evd, s->ep[0], 1, DAT_DTO_ERR_FLUSHED, DTO_ANY_LENGTH,
                   DAT_IB_DTO_FETCH_ADD, DAT_IB_FETCH_AND_ADD);
        DTO_ASSERT_EQ(cmp_and_swap(s->ep[0], 1, 2, &l, 2, &r), DAT_SUCCESS);
        expect_ext(s->request_evd, s->ep[0], 2, DAT_DTO_ERR_FLUSHED, DTO_ANY_LENGTH,
                   DAT_IB_DTO_CMP_SWAP, DAT_IB_CMP_AND_SWAP);
        DTO_ASSERT_EQ(dat_ib_post_rdma_write_immed(s->ep[0], 1, &l, dto_cookie(3), &r, 5,
                                                   DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        expect_ext(s->request_evd, s->ep[0], 3, DAT_DTO_ERR_FLUSHED, DTO_ANY_LENGTH,
                   DAT_IB_DTO_RDMA_WRITE_IMMED, DAT_IB_RDMA_WRITE_IMMED);
}

/* dat_ep_post_rdma_write(3DAT): a request posted to a Disconnected EP "is
 * immediately flushed"; for the extended posts the flush is their own
 * DAT_IB_DTO_EVENT, DAT_DTO_ERR_FLUSHED, DAT_IB_OP_ERR. */
Test(DTO_SUITE(ext_errors), extended_posts_on_a_disconnected_ep_are_flushed)
{
        struct dto_config cfg = { .buf_privileges = PRIV_ATOMIC };

        dto_run(&cfg, idle, disconnected_role, NULL);
}
