/* The LMR an EP's posts last found good (libdat/lmr_seen.h): what it says
 * of a segment, and that posts on one EP from several threads never read
 * half of one entry and half of another.  The data path's own tests
 * (tests/dto: a_post_after_one_from_the_same_lmr_is_still_checked) show
 * what the posts refuse; here the entry alone, under two writers and two
 * readers at once. */
#include "config.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "libdat/lmr_seen.h"

/* Two LMRs' descriptions, far apart: a segment of one read with the
 * context of the other is good only for an entry made of both halves. */
#define PZ ((DAT_PZ_HANDLE)(uintptr_t)0x1234)
#define A_CTX 0x1001u
#define A_LO 0x100000ull
#define A_HI 0x200000ull
#define B_CTX 0x2002u
#define B_LO 0x7000000ull
#define B_HI 0x8000000ull

static void keep_a(struct lmr_seen *e)
{
        lmr_seen_keep(e, mem_ctx_release_count(), PZ, A_CTX, DAT_MEM_PRIV_ALL_FLAG, A_LO, A_HI);
}

static void keep_b(struct lmr_seen *e)
{
        lmr_seen_keep(e, mem_ctx_release_count(), PZ, B_CTX, DAT_MEM_PRIV_LOCAL_READ_FLAG, B_LO, B_HI);
}

static DAT_LMR_TRIPLET seg(DAT_LMR_CONTEXT ctx, DAT_VADDR addr, DAT_VLEN len)
{
        return (DAT_LMR_TRIPLET){ .lmr_context = ctx, .virtual_address = addr, .segment_length = len };
}

/* Whether e says the segment (ctx, addr, len) is good for want, PZ PZ. */
static bool good(const struct lmr_seen *e, DAT_LMR_CONTEXT ctx, DAT_VADDR addr, DAT_VLEN len,
                 DAT_MEM_PRIV_FLAGS want)
{
        DAT_LMR_TRIPLET t = seg(ctx, addr, len);

        return lmr_seen_covers(e, PZ, &t, want);
}

Test(lmr_seen, says_what_the_kept_lmr_covers_and_nothing_else)
{
        struct lmr_seen e = { 0 };
        DAT_LMR_TRIPLET zero = { 0 }, in = seg(A_CTX, A_LO + 16, 100);

        /* Nothing kept: nothing is good, not even a context of 0. */
        cr_assert_not(good(&e, A_CTX, A_LO + 16, 100, DAT_MEM_PRIV_NONE_FLAG));
        cr_assert_not(lmr_seen_covers(&e, (DAT_PZ_HANDLE)0, &zero, DAT_MEM_PRIV_NONE_FLAG));
        keep_a(&e);
        cr_assert(good(&e, A_CTX, A_LO + 16, 100, DAT_MEM_PRIV_LOCAL_WRITE_FLAG));
        cr_assert(good(&e, A_CTX, A_HI, 0, DAT_MEM_PRIV_NONE_FLAG),
                  "a zero-length segment at the end, as lmr_covers says");
        cr_assert_not(good(&e, A_CTX, A_HI - 50, 100, DAT_MEM_PRIV_NONE_FLAG), "past the end");
        cr_assert_not(good(&e, A_CTX, A_LO - 8, 100, DAT_MEM_PRIV_NONE_FLAG), "before the start");
        cr_assert_not(good(&e, A_CTX, UINT64_MAX - 10, 100, DAT_MEM_PRIV_NONE_FLAG), "an address that wraps");
        cr_assert_not(good(&e, B_CTX, A_LO + 16, 100, DAT_MEM_PRIV_NONE_FLAG), "another context");
        cr_assert_not(lmr_seen_covers(&e, (DAT_PZ_HANDLE)(uintptr_t)0x99, &in, DAT_MEM_PRIV_NONE_FLAG),
                      "another PZ");
        keep_b(&e);
        cr_assert_not(good(&e, B_CTX, B_LO, 100, DAT_MEM_PRIV_LOCAL_WRITE_FLAG), "a privilege the LMR lacks");
        cr_assert(good(&e, B_CTX, B_LO, 100, DAT_MEM_PRIV_NONE_FLAG));
        cr_assert_not(good(&e, A_CTX, A_LO + 16, 100, DAT_MEM_PRIV_NONE_FLAG), "the entry kept before");
}

/* ---- several threads on one entry -------------------------------------------- */

#define RUN_NS 400000000ull     /* 0.4 s each thread */

struct race {
        struct lmr_seen e;
        bool stop;
        unsigned long torn;     /* a read that mixed the two LMRs */
        unsigned long hits;     /* reads that found a whole entry good */
};

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Keeps A, then B, over and over. */
static void *writer(void *arg)
{
        struct race *r = arg;

        while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
                keep_a(&r->e);
                keep_b(&r->e);
        }
        return NULL;
}

static void *reader(void *arg)
{
        struct race *r = arg;
        unsigned long torn = 0, hits = 0;

        while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
                /* Each good only for a mix: A's context with B's range, B's
                 * with A's, B's context and range with A's privileges (B
                 * has no local write). */
                torn += good(&r->e, A_CTX, B_LO + 64, 100, DAT_MEM_PRIV_NONE_FLAG);
                torn += good(&r->e, B_CTX, A_LO + 64, 100, DAT_MEM_PRIV_NONE_FLAG);
                torn += good(&r->e, B_CTX, B_LO + 64, 100, DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
                hits += good(&r->e, A_CTX, A_LO + 64, 100, DAT_MEM_PRIV_NONE_FLAG) +
                        good(&r->e, B_CTX, B_LO + 64, 100, DAT_MEM_PRIV_NONE_FLAG);
        }
        __atomic_add_fetch(&r->torn, torn, __ATOMIC_RELAXED);
        __atomic_add_fetch(&r->hits, hits, __ATOMIC_RELAXED);
        return NULL;
}

/* A writer and a reader at once (one on each of two CPUs, when the
 * machine has them), then two of each: a post that writes the entry
 * while another reads it, or while another writes it too. */
static void race_with(unsigned writers, unsigned readers)
{
        static struct race r;
        pthread_t t[8];
        unsigned n = writers + readers;
        uint64_t end;

        cr_assert_leq(n, 8);
        r = (struct race){ 0 };
        keep_a(&r.e);
        for (unsigned i = 0; i < n; i++)
                cr_assert_eq(pthread_create(&t[i], NULL, i < writers ? writer : reader, &r), 0);
        end = now_ns() + RUN_NS;
        while (now_ns() < end) {
                struct timespec ms = { 0, 10000000 };

                nanosleep(&ms, NULL);
        }
        __atomic_store_n(&r.stop, true, __ATOMIC_RELAXED);
        for (unsigned i = 0; i < n; i++)
                cr_assert_eq(pthread_join(t[i], NULL), 0);
        cr_expect_eq(r.torn, 0, "%u writers, %u readers: %lu reads found an entry made of two LMRs good",
                     writers, readers, r.torn);
        /* The readers did read whole entries meanwhile (else the race proves nothing). */
        cr_expect_gt(r.hits, 0);
}

Test(lmr_seen, posts_on_one_ep_from_several_threads_never_mix_two_entries, .timeout = 30)
{
        race_with(1, 1);
        race_with(2, 2);
}
