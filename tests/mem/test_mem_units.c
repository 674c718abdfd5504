/* The pieces under the LMR and RMR entry points, without datd: the memory
 * context table (mem_ctx.h), the address space checks (mem_range.h) and
 * the cookie-named shared memory (mem_shm.h). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libdat/handle.h"
#include "libdat/mem_ctx.h"
#include "libdat/mem_range.h"
#include "libdat/mem_shm.h"
#include "tests/mem/mem_test.h"

TestSuite(mem_ctx, .timeout = 30);
TestSuite(mem_range, .timeout = 30);
TestSuite(mem_shm, .timeout = 30);

/* Stand-ins for the LMRs and RMRs that own slots. */
static struct dat_object owners[4];

static uint32_t slot_for(struct dat_object *owner)
{
        uint32_t slot;

        cr_assert_eq(mem_ctx_alloc(owner, &slot), DAT_SUCCESS);
        return slot;
}

/* dat_lmr_create(3DAT): lmr_context names the LMR for DTO local buffers */
Test(mem_ctx, published_contexts_resolve_to_their_owner_in_their_role_only)
{
        uint32_t slot = slot_for(&owners[0]);
        uint32_t local = mem_ctx_publish(slot, MEM_CTX_LOCAL);
        uint32_t remote = mem_ctx_publish(slot, MEM_CTX_REMOTE);

        cr_expect_eq(mem_ctx_find(local, MEM_CTX_LOCAL), &owners[0]);
        cr_expect_eq(mem_ctx_find(remote, MEM_CTX_REMOTE), &owners[0]);
        /* A local context is no remote key, and the other way round. */
        cr_expect_null(mem_ctx_find(local, MEM_CTX_REMOTE));
        cr_expect_null(mem_ctx_find(remote, MEM_CTX_LOCAL));
        cr_expect_neq(local, remote);
        cr_expect_neq(local, 0u);
        cr_expect_neq(remote, 0u);
}

/* Contexts are unique among the live LMRs and RMRs (and never 0). */
Test(mem_ctx, contexts_of_many_live_slots_are_all_distinct)
{
        enum { N = 4000 };
        uint32_t *ctx = calloc(2 * N, sizeof(*ctx));

        cr_assert_not_null(ctx);
        for (int i = 0; i < N; i++) {
                uint32_t slot = slot_for(&owners[i % 4]);

                ctx[2 * i] = mem_ctx_publish(slot, MEM_CTX_LOCAL);
                ctx[2 * i + 1] = mem_ctx_publish(slot, MEM_CTX_REMOTE);
        }
        for (int i = 0; i < 2 * N; i++) {
                cr_assert_neq(ctx[i], 0u);
                for (int j = i + 1; j < 2 * N; j++)
                        cr_assert_neq(ctx[i], ctx[j], "contexts %d and %d are both 0x%08x", i, j, ctx[i]);
                cr_assert_eq(mem_ctx_find(ctx[i], i % 2 ? MEM_CTX_REMOTE : MEM_CTX_LOCAL),
                             &owners[(i / 2) % 4]);
        }
        free(ctx);
}

/* The key part of a context is random: two tables filled the same way do
 * not hand out the same contexts (hard to guess). */
Test(mem_ctx, contexts_are_not_predictable_from_the_slot)
{
        uint32_t a = slot_for(&owners[0]), b = slot_for(&owners[1]);
        uint32_t ca = mem_ctx_publish(a, MEM_CTX_LOCAL), cb = mem_ctx_publish(b, MEM_CTX_LOCAL);
        int same_key = 0;

        /* Adjacent slots: if keys were a counter or constant, the key bits
         * would match far more often than 1 in 2^14. */
        for (int i = 0; i < 64; i++) {
                ca = mem_ctx_publish(a, MEM_CTX_LOCAL);
                cb = mem_ctx_publish(b, MEM_CTX_LOCAL);
                same_key += (ca >> MEM_CTX_INDEX_BITS) == (cb >> MEM_CTX_INDEX_BITS);
        }
        cr_expect_lt(same_key, 4);
}

/* dat_rmr_bind(3DAT): the previous rmr_context fails once a new bind completes */
Test(mem_ctx, publishing_again_replaces_the_old_context)
{
        uint32_t slot = slot_for(&owners[1]);
        uint32_t first = mem_ctx_publish(slot, MEM_CTX_REMOTE);
        uint32_t second = mem_ctx_publish(slot, MEM_CTX_REMOTE);

        cr_expect_neq(first, second);
        cr_expect_null(mem_ctx_find(first, MEM_CTX_REMOTE));
        cr_expect_eq(mem_ctx_find(second, MEM_CTX_REMOTE), &owners[1]);
}

/* A slot's next context never repeats the one it replaces, nor its other
 * role's: a peer holding a retired rmr_context cannot get lucky. */
Test(mem_ctx, a_slot_never_publishes_the_same_context_twice_in_a_row)
{
        uint32_t slot = slot_for(&owners[1]);
        uint32_t local = mem_ctx_publish(slot, MEM_CTX_LOCAL);
        uint32_t prev = mem_ctx_publish(slot, MEM_CTX_REMOTE);

        /* With 14 random bits, 100000 draws would repeat ~6 times by chance. */
        for (int i = 0; i < 100000; i++) {
                uint32_t next = mem_ctx_publish(slot, MEM_CTX_REMOTE);

                cr_assert_neq(next, prev, "draw %d", i);
                cr_assert_neq(next, local, "draw %d", i);
                prev = next;
        }
}

/* dat_rmr_bind(3DAT): the new rmr_context is not usable before the bind completes */
Test(mem_ctx, a_drawn_context_resolves_only_once_set)
{
        uint32_t slot = slot_for(&owners[2]);
        uint32_t old = mem_ctx_publish(slot, MEM_CTX_REMOTE);
        uint32_t drawn = mem_ctx_draw(slot, MEM_CTX_REMOTE);

        cr_expect_neq(drawn, old);
        cr_expect_null(mem_ctx_find(drawn, MEM_CTX_REMOTE));
        cr_expect_eq(mem_ctx_find(old, MEM_CTX_REMOTE), &owners[2]);
        mem_ctx_set(slot, MEM_CTX_REMOTE, drawn);
        cr_expect_eq(mem_ctx_find(drawn, MEM_CTX_REMOTE), &owners[2]);
        cr_expect_null(mem_ctx_find(old, MEM_CTX_REMOTE));
}

/* dat_lmr_free(3DAT): DTOs using a freed LMR's context fail */
Test(mem_ctx, revoked_and_released_contexts_stop_resolving)
{
        uint32_t slot = slot_for(&owners[0]);
        uint32_t local = mem_ctx_publish(slot, MEM_CTX_LOCAL);
        uint32_t remote = mem_ctx_publish(slot, MEM_CTX_REMOTE);

        mem_ctx_revoke(slot, MEM_CTX_REMOTE);
        cr_expect_null(mem_ctx_find(remote, MEM_CTX_REMOTE));
        cr_expect_eq(mem_ctx_find(local, MEM_CTX_LOCAL), &owners[0]);
        mem_ctx_release(slot);
        cr_expect_null(mem_ctx_find(local, MEM_CTX_LOCAL));
        /* Even once the slot is reused, the old value names nothing. */
        for (int i = 0; i < 3000; i++) {
                uint32_t s = slot_for(&owners[1]);

                mem_ctx_publish(s, MEM_CTX_LOCAL);
                mem_ctx_publish(s, MEM_CTX_REMOTE);
        }
        cr_expect_null(mem_ctx_find(local, MEM_CTX_LOCAL));
        cr_expect_null(mem_ctx_find(remote, MEM_CTX_REMOTE));
}

/* A peer may present any 32-bit value: garbage resolves to nothing. */
Test(mem_ctx, garbage_contexts_resolve_to_nothing)
{
        uint32_t slot = slot_for(&owners[3]);
        uint32_t ctx = mem_ctx_publish(slot, MEM_CTX_LOCAL);
        const uint32_t garbage[] = { 0, 1, 0xffffffffu, ctx ^ 0x80000000u, ctx + 1,
                                     (1u << MEM_CTX_INDEX_BITS) - 1, ctx & ((1u << MEM_CTX_INDEX_BITS) - 1) };

        for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
                cr_expect_null(mem_ctx_find(garbage[i], MEM_CTX_LOCAL), "0x%08x", garbage[i]);
                cr_expect_null(mem_ctx_find(garbage[i], MEM_CTX_REMOTE), "0x%08x", garbage[i]);
        }
}

/* dat_lmr_create(3DAT): resource limitations -> DAT_INSUFFICIENT_RESOURCES */
Test(mem_ctx, a_full_table_refuses_and_a_released_slot_is_taken_again)
{
        uint32_t slot, last = 0;

        for (uint32_t i = 0; i < MEM_CTX_MAX_SLOTS; i++)
                cr_assert_eq(mem_ctx_alloc(&owners[0], &last), DAT_SUCCESS, "slot %u", i);
        cr_expect_eq(mem_ctx_alloc(&owners[0], &slot),
                     ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY));
        mem_ctx_release(last);
        cr_expect_eq(mem_ctx_alloc(&owners[1], &slot), DAT_SUCCESS);
        cr_expect_eq(slot, last);
}

/* ---- address space checks ---------------------------------------------- */

static uintptr_t addr(void *p)
{
        return (uintptr_t)p;
}

/* dat_lmr_create(3DAT): the region must be memory of the consumer */
Test(mem_range, mapped_memory_passes_and_an_unmapped_range_is_efault)
{
        char *p = mem_pages(2, PROT_READ | PROT_WRITE);

        cr_expect_eq(mem_range_check(addr(p), 2 * mem_page(), MEM_RANGE_READ | MEM_RANGE_WRITE), 0);
        munmap(p, 2 * mem_page());
        cr_expect_eq(mem_range_check(addr(p), 2 * mem_page(), 0), -EFAULT);
}

Test(mem_range, a_hole_in_the_middle_is_efault)
{
        char *p = mem_pages(3, PROT_READ | PROT_WRITE);

        munmap(p + mem_page(), mem_page());
        cr_expect_eq(mem_range_check(addr(p), mem_page(), MEM_RANGE_READ), 0);
        cr_expect_eq(mem_range_check(addr(p), 3 * mem_page(), MEM_RANGE_READ), -EFAULT);
        cr_expect_eq(mem_range_check(addr(p) + 2 * mem_page(), mem_page(), MEM_RANGE_READ), 0);
}

Test(mem_range, a_range_across_two_mappings_passes)
{
        char *p = mem_pages(2, PROT_READ | PROT_WRITE);

        /* Two VMAs now: the second page read-only. */
        cr_assert_eq(mprotect(p + mem_page(), mem_page(), PROT_READ), 0);
        cr_expect_eq(mem_range_check(addr(p), 2 * mem_page(), MEM_RANGE_READ), 0);
}

/* Write privileges need writable pages, read privileges readable ones. */
Test(mem_range, missing_access_is_eacces)
{
        char *ro = mem_pages(1, PROT_READ);
        char *none = mem_pages(1, PROT_NONE);

        cr_expect_eq(mem_range_check(addr(ro), mem_page(), MEM_RANGE_READ), 0);
        cr_expect_eq(mem_range_check(addr(ro), mem_page(), MEM_RANGE_WRITE), -EACCES);
        cr_expect_eq(mem_range_check(addr(none), mem_page(), 0), 0);
        cr_expect_eq(mem_range_check(addr(none), mem_page(), MEM_RANGE_READ), -EACCES);
}

/* dat_lmr_create(3DAT): shared virtual memory must be created shared */
Test(mem_range, private_memory_is_not_shared)
{
        char *priv = mem_pages(1, PROT_READ | PROT_WRITE);
        char *shared = mem_shared_pages(1);

        cr_expect_eq(mem_range_check(addr(priv), mem_page(), MEM_RANGE_SHARED), -EPERM);
        cr_expect_eq(mem_range_check(addr(shared), mem_page(), MEM_RANGE_SHARED), 0);
}

/* ---- cookie-named shared memory ---------------------------------------- */

static struct mem_shm *attach(const char cookie[DAT_LMR_COOKIE_SIZE], size_t length)
{
        struct mem_shm *shm = NULL;

        cr_assert_eq(mem_shm_attach(cookie, length, &shm), DAT_SUCCESS);
        return shm;
}

/* dat_lmr_create(3DAT): LMRs with the same cookie share the memory */
Test(mem_shm, the_same_cookie_maps_the_same_memory)
{
        char cookie[DAT_LMR_COOKIE_SIZE];
        struct mem_shm *a, *b;

        mem_cookie(cookie, 1);
        a = attach(cookie, 100);
        b = attach(cookie, 100);
        cr_expect_neq(a->addr, b->addr);
        cr_expect_eq(a->length, mem_page());
        strcpy(a->addr, "written through a");
        cr_expect_str_eq(b->addr, "written through a");
        mem_shm_unref(a);
        mem_shm_unref(b);
}

/* dat_lmr_create(3DAT): the Provider checks all 40 bytes, never a string */
Test(mem_shm, cookies_differing_after_a_nul_byte_name_different_memory)
{
        char c1[DAT_LMR_COOKIE_SIZE], c2[DAT_LMR_COOKIE_SIZE];
        char n1[MEM_SHM_NAME_MAX], n2[MEM_SHM_NAME_MAX];
        struct mem_shm *a, *b;

        mem_cookie(c1, 2);
        memcpy(c2, c1, sizeof(c2));
        c2[DAT_LMR_COOKIE_SIZE - 1] ^= 1;
        mem_shm_name(c1, n1);
        mem_shm_name(c2, n2);
        cr_expect_str_neq(n1, n2);
        a = attach(c1, 1);
        b = attach(c2, 1);
        strcpy(a->addr, "a");
        cr_expect_str_eq(b->addr, "");
        mem_shm_unref(a);
        mem_shm_unref(b);
}

Test(mem_shm, the_name_goes_with_the_last_mapping)
{
        char cookie[DAT_LMR_COOKIE_SIZE];
        struct mem_shm *a, *b;

        mem_cookie(cookie, 3);
        a = attach(cookie, 1);
        b = attach(cookie, 1);
        mem_shm_unref(a);
        cr_expect(mem_shm_exists(cookie));
        mem_shm_unref(mem_shm_ref(b)); /* a reference of the same mapping */
        cr_expect(mem_shm_exists(cookie));
        mem_shm_unref(b);
        cr_expect_not(mem_shm_exists(cookie));
}

/* A failure to size the memory leaves no name behind (here: the file size
 * limit, which tmpfs honours, refuses the growth). */
Test(mem_shm, an_attach_that_fails_removes_the_name_it_created)
{
        char cookie[DAT_LMR_COOKIE_SIZE];
        struct rlimit small = { 0, 0 };
        struct mem_shm *shm = NULL;

        mem_cookie(cookie, 6);
        signal(SIGXFSZ, SIG_IGN);
        small.rlim_cur = small.rlim_max = mem_page();
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
        cr_expect_eq(mem_shm_attach(cookie, 2 * mem_page(), &shm),
                     ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY));
        cr_expect_not(mem_shm_exists(cookie));
}

/* Another user (or a careless one) must not plant the memory we share. */
Test(mem_shm, an_object_open_to_others_is_refused_and_left_alone)
{
        char cookie[DAT_LMR_COOKIE_SIZE], name[MEM_SHM_NAME_MAX];
        struct mem_shm *shm = NULL;
        int fd;

        mem_cookie(cookie, 4);
        mem_shm_name(cookie, name);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0644);
        cr_assert_geq(fd, 0);
        cr_assert_eq(fchmod(fd, 0644), 0);
        cr_expect_eq(mem_shm_attach(cookie, 1, &shm), ERR(DAT_INVALID_STATE, DAT_NO_SUBTYPE));
        cr_expect(mem_shm_exists(cookie));
        close(fd);
        shm_unlink(name);
}

Test(mem_shm, a_longer_attach_grows_the_memory_and_never_shrinks_it)
{
        char cookie[DAT_LMR_COOKIE_SIZE];
        struct mem_shm *small, *big, *again;

        mem_cookie(cookie, 5);
        small = attach(cookie, 1);
        big = attach(cookie, 3 * mem_page());
        cr_expect_eq(big->length, 3 * mem_page());
        ((char *)big->addr)[3 * mem_page() - 1] = 'z';
        again = attach(cookie, 1);
        mem_shm_unref(big);
        cr_expect_eq(again->length, mem_page());
        /* The first page is the same memory for all three. */
        ((char *)small->addr)[0] = 'a';
        cr_expect_eq(((char *)again->addr)[0], 'a');
        mem_shm_unref(small);
        mem_shm_unref(again);
}
