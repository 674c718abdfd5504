/* Local Memory Regions against a real datd: dat_lmr_create(3DAT) for each
 * memory type and each rule on its arguments, dat_lmr_query(3DAT),
 * dat_lmr_free(3DAT), the contexts and their lookup by the data path
 * (lmr_find_by_context), dat_lmr_sync_rdma_read/write(3DAT), the
 * max_lmrs and max_lmr_bytes quotas, and handle abuse. */
#include "config.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libdat/ia.h"
#include "libdat/lmr.h"
#include "libdat/mem_ctx.h"
#include "tests/mem/mem_test.h"

static void start(void)
{
        mem_datd_start(NULL);
}

static void start_two_lmrs(void)
{
        mem_datd_start(mem_config_with_limits("\"max_lmrs\": 2"));
}

/* 16 pages of 4 KiB. */
static void start_64k(void)
{
        mem_datd_start(mem_config_with_limits("\"max_lmr_bytes\": 65536"));
}

TestSuite(lmr, .init = start, .fini = mem_datd_stop, .timeout = 30);
TestSuite(lmr_sync, .init = start, .fini = mem_datd_stop, .timeout = 30);
TestSuite(lmr_quota, .init = start_two_lmrs, .fini = mem_datd_stop, .timeout = 30);
TestSuite(lmr_bytes, .init = start_64k, .fini = mem_datd_stop, .timeout = 30);

#define RW (DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
#define BAD_LMR ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR)

/* An IA with one PZ, what most tests start from. */
struct fixture {
        DAT_IA_HANDLE ia;
        DAT_PZ_HANDLE pz;
};

static struct fixture setup(void)
{
        struct fixture f;

        f.ia = mem_open_ia();
        f.pz = mem_pz(f.ia);
        return f;
}

static void teardown(struct fixture f)
{
        cr_expect_eq(dat_ia_close(f.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

static uintptr_t up(const void *p)
{
        return (uintptr_t)p;
}

/* dat_lmr_create(3DAT): registered_size/registered_address say what was
 * registered: here the whole pages around the consumer's range. */
Test(lmr, virtual_memory_registers_the_pages_around_it)
{
        struct fixture f = setup();
        char *buf = mem_pages(3, PROT_READ | PROT_WRITE);
        struct mem_lmr l = mem_lmr_ok(f.ia, f.pz, buf + 100, mem_page(), RW);
        DAT_HANDLE_TYPE t;

        cr_expect_eq(dat_get_handle_type(l.handle, &t), DAT_SUCCESS);
        cr_expect_eq(t, DAT_HANDLE_TYPE_LMR);
        cr_expect_eq(l.registered_address, up(buf));
        cr_expect_eq(l.registered_length, 2 * mem_page());
        cr_expect_neq(l.lmr_context, 0u);
        teardown(f);
}

/* dat_lmr_create(3DAT): no remote privileges -> no rmr_context (NULL) */
Test(lmr, rmr_context_only_with_a_remote_privilege)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr local = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        struct mem_lmr rr = mem_lmr_ok(f.ia, f.pz, buf, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG);
        struct mem_lmr rw = mem_lmr_ok(f.ia, f.pz, buf, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG);

        cr_expect_eq(local.rmr_context, 0u);
        cr_expect_neq(rr.rmr_context, 0u);
        cr_expect_neq(rw.rmr_context, 0u);
        cr_expect_neq(rr.rmr_context, rr.lmr_context);
        teardown(f);
}

/* dat_lmr_create(3DAT): the buffer must be allocated memory of the consumer */
Test(lmr, unmapped_memory_is_invalid_arg3)
{
        struct fixture f = setup();
        char *buf = mem_pages(2, PROT_READ | PROT_WRITE);
        struct mem_lmr l;

        munmap(buf, 2 * mem_page());
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, 2 * mem_page(), RW, &l), ERR_ARG(3));
        teardown(f);
}

Test(lmr, a_range_with_an_unmapped_page_is_invalid_arg3)
{
        struct fixture f = setup();
        char *buf = mem_pages(3, PROT_READ | PROT_WRITE);
        struct mem_lmr l;

        munmap(buf + 2 * mem_page(), mem_page());
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, 3 * mem_page(), RW, &l), ERR_ARG(3));
        /* One byte past the mapped part is enough. */
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, 2 * mem_page() + 1, RW, &l), ERR_ARG(3));
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, 2 * mem_page(), RW, &l), DAT_SUCCESS);
        teardown(f);
}

Test(lmr, a_null_address_is_invalid_arg3)
{
        struct fixture f = setup();
        struct mem_lmr l;

        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, NULL, 64, RW, &l), ERR_ARG(3));
        teardown(f);
}

/* A memory region of no bytes registers nothing: DAT_INVALID_PARAMETER. */
Test(lmr, zero_length_is_invalid_arg4)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr l;

        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, 0, RW, &l), ERR_ARG(4));
        teardown(f);
}

Test(lmr, a_length_that_wraps_the_address_space_is_invalid_arg4)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr l;

        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, UINT64_MAX - 10, RW, &l), ERR_ARG(4));
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, (DAT_VLEN)(UINTPTR_MAX - up(buf)) + 1, RW, &l),
                     ERR_ARG(4));
        teardown(f);
}

/* Privileges the memory cannot give: write on read-only pages, read on
 * inaccessible ones -> DAT_INVALID_PARAMETER (mem_privileges). */
Test(lmr, write_privileges_on_read_only_memory_are_invalid_arg6)
{
        struct fixture f = setup();
        char *ro = mem_pages(1, PROT_READ);
        struct mem_lmr l;

        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, ro, 64, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, &l), ERR_ARG(6));
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, ro, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &l), ERR_ARG(6));
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, ro, 64, DAT_MEM_PRIV_READ_FLAG, &l), DAT_SUCCESS);
        teardown(f);
}

Test(lmr, read_privileges_on_inaccessible_memory_are_invalid_arg6)
{
        struct fixture f = setup();
        char *none = mem_pages(1, PROT_NONE);
        struct mem_lmr l;

        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, none, 64, DAT_MEM_PRIV_LOCAL_READ_FLAG, &l), ERR_ARG(6));
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, none, 64, DAT_MEM_PRIV_NONE_FLAG, &l), DAT_SUCCESS);
        teardown(f);
}

/* dat_lmr_create(3DAT): privileges are DAT_MEM_PRIV_* bits (ALL = 0x33) */
Test(lmr, privilege_bits_outside_all_flag_are_invalid_arg6)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr l;

        /* 0x40 is DAT_IB_MEM_PRIV_REMOTE_ATOMIC (the IB extension); 0x80 is no privilege. */
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, 64, (DAT_MEM_PRIV_FLAGS)0x80, &l), ERR_ARG(6));
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, 64, (DAT_MEM_PRIV_FLAGS)0x04, &l), ERR_ARG(6));
        cr_expect_eq(mem_lmr_virtual(f.ia, f.pz, buf, 64, DAT_MEM_PRIV_ALL_FLAG, &l), DAT_SUCCESS);
        teardown(f);
}

/* dat_ia_query: zb_supported is false, so zero-based addressing is a
 * model the provider does not support; other values are invalid. */
Test(lmr, zero_based_va_is_model_not_supported_and_others_invalid_arg7)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        DAT_REGION_DESCRIPTION region = { .for_va = buf };
        DAT_LMR_HANDLE h;

        cr_expect_eq(dat_lmr_create(f.ia, DAT_MEM_TYPE_VIRTUAL, region, 64, f.pz, RW, DAT_VA_TYPE_ZB,
                                    &h, NULL, NULL, NULL, NULL),
                     ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE));
        cr_expect_eq(dat_lmr_create(f.ia, DAT_MEM_TYPE_VIRTUAL, region, 64, f.pz, RW, (DAT_VA_TYPE)7,
                                    &h, NULL, NULL, NULL, NULL),
                     ERR_ARG(7));
        teardown(f);
}

/* dat_lmr_create(3DAT): a memory type the provider does not support ->
 * DAT_MODEL_NOT_SUPPORTED */
Test(lmr, unsupported_memory_types_are_model_not_supported)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        DAT_REGION_DESCRIPTION region = { .for_va = buf };
        /* kDAPL's physical, platform and IA memory, and junk. */
        const unsigned types[] = { 0x04, 0x08, 0x10, 0x20, 0x7fffffff };
        DAT_LMR_HANDLE h;

        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                cr_expect_eq(dat_lmr_create(f.ia, (DAT_MEM_TYPE)types[i], region, 64, f.pz, RW,
                                            DAT_VA_TYPE_VA, &h, NULL, NULL, NULL, NULL),
                             ERR(DAT_MODEL_NOT_SUPPORTED, DAT_NO_SUBTYPE), "type 0x%x", types[i]);
        cr_expect_eq(dat_ia_close(f.ia, DAT_CLOSE_GRACEFUL_FLAG),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE)); /* only the PZ */
        cr_expect_eq(dat_pz_free(f.pz), DAT_SUCCESS);
        cr_expect_eq(dat_ia_close(f.ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

/* lmr_handle is the one mandatory output; the others may be NULL. */
Test(lmr, a_null_lmr_handle_is_invalid_arg8_and_other_outputs_are_optional)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        DAT_REGION_DESCRIPTION region = { .for_va = buf };
        DAT_LMR_HANDLE h = DAT_HANDLE_NULL;

        cr_expect_eq(dat_lmr_create(f.ia, DAT_MEM_TYPE_VIRTUAL, region, 64, f.pz, RW, DAT_VA_TYPE_VA,
                                    NULL, NULL, NULL, NULL, NULL),
                     ERR_ARG(8));
        cr_expect_eq(dat_lmr_create(f.ia, DAT_MEM_TYPE_VIRTUAL, region, 64, f.pz, RW, DAT_VA_TYPE_VA,
                                    &h, NULL, NULL, NULL, NULL),
                     DAT_SUCCESS);
        cr_expect_eq(dat_lmr_free(h), DAT_SUCCESS);
        teardown(f);
}

/* dat_lmr_create(3DAT): pz_handle must be a PZ of this IA */
Test(lmr, a_pz_that_is_not_this_ias_is_invalid_handle_pz)
{
        struct fixture f = setup(), g = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        DAT_HANDLE freed = mem_stale_handle(f.ia);
        const DAT_HANDLE bad[] = { g.pz, DAT_HANDLE_NULL, freed, GARBAGE_HANDLE, f.ia };
        struct mem_lmr l;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_expect_eq(mem_lmr_virtual(f.ia, bad[i], buf, 64, RW, &l),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ), "%zu", i);
        teardown(g);
        teardown(f);
}

/* dat_lmr_create(3DAT), DAT_MEM_TYPE_LMR: an LMR over the memory of an
 * existing one, with another PZ and other privileges; length is ignored. */
Test(lmr, an_lmr_made_from_an_lmr_covers_its_memory)
{
        struct fixture f = setup();
        DAT_PZ_HANDLE pz2 = mem_pz(f.ia);
        char *buf = mem_pages(2, PROT_READ | PROT_WRITE);
        struct mem_lmr base = mem_lmr_ok(f.ia, f.pz, buf, 2 * mem_page(), DAT_MEM_PRIV_LOCAL_READ_FLAG);
        DAT_REGION_DESCRIPTION region = { .for_lmr_handle = base.handle };
        DAT_LMR_HANDLE h;
        DAT_LMR_PARAM p;

        cr_assert_eq(dat_lmr_create(f.ia, DAT_MEM_TYPE_LMR, region, 1, pz2, DAT_MEM_PRIV_ALL_FLAG,
                                    DAT_VA_TYPE_VA, &h, NULL, NULL, NULL, NULL),
                     DAT_SUCCESS);
        cr_assert_eq(dat_lmr_query(h, DAT_LMR_FIELD_ALL, &p), DAT_SUCCESS);
        cr_expect_eq(p.mem_type, DAT_MEM_TYPE_LMR);
        cr_expect_eq(p.region_desc.for_lmr_handle, base.handle);
        cr_expect_eq(p.registered_address, base.registered_address);
        cr_expect_eq(p.registered_size, base.registered_length);
        cr_expect_eq(p.pz_handle, pz2);
        cr_expect_eq(p.mem_priv, DAT_MEM_PRIV_ALL_FLAG);
        cr_expect_neq(p.lmr_context, base.lmr_context);
        /* Independent of the LMR it was made from. */
        cr_expect_eq(dat_lmr_free(base.handle), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_query(h, DAT_LMR_FIELD_ALL, &p), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_free(h), DAT_SUCCESS);
        teardown(f);
}

Test(lmr, an_lmr_made_from_a_bad_lmr_handle_is_invalid_handle_lmr)
{
        struct fixture f = setup(), g = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr other = mem_lmr_ok(g.ia, g.pz, buf, 64, RW);
        struct mem_lmr freed = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        DAT_LMR_HANDLE h;

        cr_assert_eq(dat_lmr_free(freed.handle), DAT_SUCCESS);
        const DAT_HANDLE bad[] = { other.handle, freed.handle, DAT_HANDLE_NULL, GARBAGE_HANDLE, f.pz };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                DAT_REGION_DESCRIPTION region = { .for_lmr_handle = bad[i] };

                cr_expect_eq(dat_lmr_create(f.ia, DAT_MEM_TYPE_LMR, region, 0, f.pz, RW, DAT_VA_TYPE_VA,
                                            &h, NULL, NULL, NULL, NULL),
                             BAD_LMR, "%zu", i);
        }
        teardown(g);
        teardown(f);
}

/* Waits (bounded) for a child; its exit status, or -1 if it had to be killed. */
static int wait_child(pid_t pid)
{
        int status;

        for (int i = 0; i < 1000; i++) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
}

static const char pattern[] = "written by the other process through its own LMR";

/* The child of the two-process test: its own IA, PZ and LMR with the
 * cookie; writes the pattern through its LMR.  Exit codes say what failed. */
static void shared_writer(char (*cookie)[DAT_LMR_COOKIE_SIZE])
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia;
        DAT_PZ_HANDLE pz;
        struct mem_lmr l;

        alarm(10);
        if (dat_ia_open((DAT_NAME_PTR) "datd-shm", 16, &evd, &ia) != DAT_SUCCESS)
                _exit(2);
        if (dat_pz_create(ia, &pz) != DAT_SUCCESS)
                _exit(3);
        if (mem_lmr_shared(ia, pz, cookie, NULL, mem_page(), RW, &l) != DAT_SUCCESS)
                _exit(4);
        memcpy((void *)(uintptr_t)l.registered_address, pattern, sizeof(pattern));
        if (dat_lmr_free(l.handle) != DAT_SUCCESS || dat_pz_free(pz) != DAT_SUCCESS ||
            dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG) != DAT_SUCCESS)
                _exit(5);
        _exit(0);
}

/* dat_lmr_create(3DAT), DAT_MEM_TYPE_SHARED_VIRTUAL: consumers that give
 * the same cookie share the memory (peer-to-peer model). */
Test(lmr, shared_virtual_lmrs_with_one_cookie_share_memory_across_processes)
{
        struct fixture f = setup();
        char cookie[DAT_LMR_COOKIE_SIZE];
        struct mem_lmr mine;
        pid_t pid;

        mem_cookie(cookie, 10);
        cr_assert_eq(mem_lmr_shared(f.ia, f.pz, &cookie, NULL, mem_page(), RW, &mine), DAT_SUCCESS);
        cr_expect_eq(mine.registered_length, mem_page());
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
                shared_writer(&cookie);
        cr_expect_eq(wait_child(pid), 0, "the writer failed");
        cr_expect_str_eq((const char *)(uintptr_t)mine.registered_address, pattern);
        /* The writer's LMR is gone; ours keeps the memory alive. */
        cr_expect(mem_shm_exists(cookie));
        cr_expect_eq(dat_lmr_free(mine.handle), DAT_SUCCESS);
        cr_expect_not(mem_shm_exists(cookie), "the last LMR takes the name with it");
        teardown(f);
}

Test(lmr, shared_virtual_lmrs_with_one_cookie_share_memory_in_one_process)
{
        struct fixture f = setup();
        char cookie[DAT_LMR_COOKIE_SIZE], other[DAT_LMR_COOKIE_SIZE];
        struct mem_lmr a, b, c;

        mem_cookie(cookie, 11);
        mem_cookie(other, 12);
        cr_assert_eq(mem_lmr_shared(f.ia, f.pz, &cookie, NULL, 64, RW, &a), DAT_SUCCESS);
        cr_assert_eq(mem_lmr_shared(f.ia, f.pz, &cookie, NULL, 64, RW, &b), DAT_SUCCESS);
        cr_assert_eq(mem_lmr_shared(f.ia, f.pz, &other, NULL, 64, RW, &c), DAT_SUCCESS);
        strcpy((char *)(uintptr_t)a.registered_address, "same memory");
        cr_expect_str_eq((char *)(uintptr_t)b.registered_address, "same memory");
        cr_expect_str_eq((char *)(uintptr_t)c.registered_address, "");
        teardown(f);
        cr_expect_not(mem_shm_exists(cookie), "an abrupt close frees the shared memory too");
}

/* An LMR made from a shared LMR keeps the shared memory mapped when the
 * first one goes. */
Test(lmr, an_lmr_made_from_a_shared_lmr_keeps_its_memory)
{
        struct fixture f = setup();
        char cookie[DAT_LMR_COOKIE_SIZE];
        struct mem_lmr base;
        DAT_REGION_DESCRIPTION region;
        DAT_LMR_HANDLE h;
        DAT_VADDR at;

        mem_cookie(cookie, 14);
        cr_assert_eq(mem_lmr_shared(f.ia, f.pz, &cookie, NULL, 64, RW, &base), DAT_SUCCESS);
        region.for_lmr_handle = base.handle;
        cr_assert_eq(dat_lmr_create(f.ia, DAT_MEM_TYPE_LMR, region, 0, f.pz, RW, DAT_VA_TYPE_VA, &h, NULL,
                                    NULL, NULL, &at),
                     DAT_SUCCESS);
        cr_expect_eq(at, base.registered_address);
        cr_expect_eq(dat_lmr_free(base.handle), DAT_SUCCESS);
        strcpy((char *)(uintptr_t)at, "still mapped");
        cr_expect(mem_shm_exists(cookie));
        cr_expect_eq(dat_lmr_free(h), DAT_SUCCESS);
        cr_expect_not(mem_shm_exists(cookie));
        teardown(f);
}

/* dat_lmr_create(3DAT): shared virtual buffer not created shared by the
 * platform -> DAT_INVALID_STATE */
Test(lmr, shared_virtual_over_private_memory_is_invalid_state)
{
        struct fixture f = setup();
        char cookie[DAT_LMR_COOKIE_SIZE];
        char *priv = mem_pages(1, PROT_READ | PROT_WRITE);
        char *shared = mem_shared_pages(1);
        struct mem_lmr l;
        DAT_LMR_PARAM p;

        mem_cookie(cookie, 13);
        cr_expect_eq(mem_lmr_shared(f.ia, f.pz, &cookie, priv, 64, RW, &l),
                     ERR(DAT_INVALID_STATE, DAT_NO_SUBTYPE));
        cr_assert_eq(mem_lmr_shared(f.ia, f.pz, &cookie, shared, 64, RW, &l), DAT_SUCCESS);
        cr_expect_eq(l.registered_address, up(shared));
        /* dat_lmr_query gives the cookie back, all 40 bytes. */
        cr_assert_eq(dat_lmr_query(l.handle, DAT_LMR_FIELD_REGION_DESC, &p), DAT_SUCCESS);
        cr_expect_eq(p.region_desc.for_shared_memory.virtual_address, shared);
        cr_expect_eq(memcmp(*p.region_desc.for_shared_memory.shared_memory_id, cookie, sizeof(cookie)), 0);
        teardown(f);
}

Test(lmr, shared_virtual_without_a_cookie_is_invalid_arg3)
{
        struct fixture f = setup();
        struct mem_lmr l;

        cr_expect_eq(mem_lmr_shared(f.ia, f.pz, NULL, NULL, 64, RW, &l), ERR_ARG(3));
        teardown(f);
}

/* dat_lmr_query(3DAT): every parameter of the LMR */
Test(lmr, query_reports_what_create_did)
{
        struct fixture f = setup();
        char *buf = mem_pages(2, PROT_READ | PROT_WRITE);
        struct mem_lmr l = mem_lmr_ok(f.ia, f.pz, buf + 8, 100, DAT_MEM_PRIV_ALL_FLAG);
        DAT_LMR_PARAM p;

        memset(&p, 0xa5, sizeof(p));
        cr_assert_eq(dat_lmr_query(l.handle, DAT_LMR_FIELD_ALL, &p), DAT_SUCCESS);
        cr_expect_eq(p.ia_handle, f.ia);
        cr_expect_eq(p.mem_type, DAT_MEM_TYPE_VIRTUAL);
        cr_expect_eq(p.region_desc.for_va, buf + 8);
        cr_expect_eq(p.length, 100);
        cr_expect_eq(p.pz_handle, f.pz);
        cr_expect_eq(p.mem_priv, DAT_MEM_PRIV_ALL_FLAG);
        cr_expect_eq(p.va_type, DAT_VA_TYPE_VA);
        cr_expect_eq(p.lmr_context, l.lmr_context);
        cr_expect_eq(p.rmr_context, l.rmr_context);
        cr_expect_eq(p.registered_size, mem_page());
        cr_expect_eq(p.registered_address, up(buf));
        teardown(f);
}

/* dat_lmr_query(3DAT): an invalid mask -> DAT_INVALID_PARAMETER */
Test(lmr, query_with_a_bad_mask_or_no_output_is_invalid_parameter)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr l = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        DAT_LMR_PARAM p;

        cr_expect_eq(dat_lmr_query(l.handle, (DAT_LMR_PARAM_MASK)0x800, &p), ERR_ARG(2));
        cr_expect_eq(dat_lmr_query(l.handle, DAT_LMR_FIELD_ALL, NULL), ERR_ARG(3));
        teardown(f);
}

/* lmr_context: unique among the IA's live LMRs, and what the data path
 * looks up (O(1)) to validate each local segment. */
Test(lmr, contexts_are_unique_and_name_their_lmr)
{
        enum { N = 64 };
        struct fixture f = setup();
        char *buf = mem_pages(N, PROT_READ | PROT_WRITE);
        struct mem_lmr l[N];
        struct ia *ia = ia_lookup(f.ia);

        for (int i = 0; i < N; i++)
                l[i] = mem_lmr_ok(f.ia, f.pz, buf + i * mem_page(), mem_page(), DAT_MEM_PRIV_ALL_FLAG);
        for (int i = 0; i < N; i++) {
                struct lmr *found = NULL;

                for (int j = 0; j < N; j++) {
                        cr_assert_neq(l[i].lmr_context, l[j].rmr_context);
                        if (j != i)
                                cr_assert_neq(l[i].lmr_context, l[j].lmr_context);
                }
                cr_assert_eq(lmr_find_by_context(ia, l[i].lmr_context, up(buf) + i * mem_page(),
                                                 mem_page(), RW, &found),
                             DAT_SUCCESS);
                cr_assert_eq(found->obj.handle, l[i].handle);
        }
        teardown(f);
}

/* The data path's local check: out of the LMR, missing privileges, a
 * context of another IA or of nothing. */
Test(lmr, lookup_refuses_ranges_privileges_and_contexts_that_do_not_fit)
{
        struct fixture f = setup(), g = setup();
        char *buf = mem_pages(2, PROT_READ | PROT_WRITE);
        struct mem_lmr l = mem_lmr_ok(f.ia, f.pz, buf, mem_page(), DAT_MEM_PRIV_LOCAL_READ_FLAG);
        struct ia *ia = ia_lookup(f.ia);
        struct lmr *found;

        cr_expect_eq(lmr_find_by_context(ia, l.lmr_context, up(buf) + 10, 20, DAT_MEM_PRIV_LOCAL_READ_FLAG,
                                         &found),
                     DAT_SUCCESS);
        cr_expect_eq(lmr_find_by_context(ia, l.lmr_context, up(buf) + mem_page(), 0, 0, &found),
                     DAT_SUCCESS, "an empty segment at the end is inside");
        cr_expect_eq(lmr_find_by_context(ia, l.lmr_context, up(buf) + 1, mem_page(), 0, &found),
                     ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE));
        cr_expect_eq(lmr_find_by_context(ia, l.lmr_context, up(buf) - 1, 2, 0, &found),
                     ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE));
        cr_expect_eq(lmr_find_by_context(ia, l.lmr_context, UINT64_MAX, 2, 0, &found),
                     ERR(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE));
        cr_expect_eq(lmr_find_by_context(ia, l.lmr_context, up(buf), 8, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                                         &found),
                     ERR(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE));
        cr_expect_eq(lmr_find_by_context(ia_lookup(g.ia), l.lmr_context, up(buf), 8, 0, &found),
                     ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        cr_expect_eq(lmr_find_by_context(ia, l.lmr_context ^ 0x80000000u, up(buf), 8, 0, &found),
                     ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        teardown(g);
        teardown(f);
}

/* dat_lmr_free(3DAT): DTOs that use the freed LMR fail */
Test(lmr, a_freed_lmrs_contexts_name_nothing)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr l = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        struct lmr *found;

        cr_assert_eq(dat_lmr_free(l.handle), DAT_SUCCESS);
        cr_expect_eq(lmr_find_by_context(ia_lookup(f.ia), l.lmr_context, up(buf), 8, 0, &found),
                     ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE));
        cr_expect_null(mem_ctx_find(l.lmr_context, MEM_CTX_LOCAL), "the table forgot it");
        teardown(f);
}

/* Handle abuse on every LMR entry point. */
Test(lmr, bad_handles_are_invalid_handle_on_every_entry_point)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr freed = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        DAT_LMR_TRIPLET seg = { up(buf), 8, 0 };
        int x;
        DAT_LMR_PARAM p;
        struct mem_lmr l;

        cr_assert_eq(dat_lmr_free(freed.handle), DAT_SUCCESS);
        const DAT_HANDLE bad[] = { DAT_HANDLE_NULL, freed.handle, GARBAGE_HANDLE, (DAT_HANDLE)&x, f.pz };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_expect_eq(dat_lmr_query(bad[i], DAT_LMR_FIELD_ALL, &p), BAD_LMR, "%zu", i);
                cr_expect_eq(dat_lmr_free(bad[i]), BAD_LMR, "%zu", i);
                cr_expect_eq(mem_lmr_virtual(bad[i], f.pz, buf, 64, RW, &l),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), "%zu", i);
                cr_expect_eq(dat_lmr_sync_rdma_read(bad[i], &seg, 1),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), "%zu", i);
                cr_expect_eq(dat_lmr_sync_rdma_write(bad[i], &seg, 1),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA), "%zu", i);
        }
        teardown(f);
}

/* dat_ia_close(3DAT): an LMR is a child of its IA */
Test(lmr, an_lmr_keeps_a_graceful_close_away_and_goes_with_an_abrupt_one)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr l = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        DAT_LMR_PARAM p;

        cr_expect_eq(dat_pz_free(f.pz), ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE));
        cr_expect_eq(dat_ia_close(f.ia, DAT_CLOSE_GRACEFUL_FLAG),
                     ERR(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE));
        cr_expect_eq(dat_ia_close(f.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_query(l.handle, DAT_LMR_FIELD_ALL, &p), BAD_LMR);
}

/* ---- dat_lmr_sync_rdma_read / dat_lmr_sync_rdma_write ----------------- */

/* dat_lmr_sync_rdma_read(3DAT): segments of several LMRs and PZs at once */
Test(lmr_sync, segments_inside_lmrs_of_the_ia_are_synced)
{
        struct fixture f = setup();
        DAT_PZ_HANDLE pz2 = mem_pz(f.ia);
        char *buf = mem_pages(2, PROT_READ | PROT_WRITE);
        struct mem_lmr a = mem_lmr_ok(f.ia, f.pz, buf, mem_page(), RW);
        struct mem_lmr b = mem_lmr_ok(f.ia, pz2, buf + mem_page(), mem_page(),
                                      DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
        const DAT_LMR_TRIPLET segs[] = {
                { up(buf), (DAT_SEG_LENGTH)mem_page(), a.lmr_context },
                { up(buf) + mem_page() + 16, 16, b.lmr_context },
                { up(buf) + 5, 0, a.lmr_context },
        };

        cr_expect_eq(dat_lmr_sync_rdma_read(f.ia, segs, 3), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_sync_rdma_write(f.ia, segs, 3), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_sync_rdma_read(f.ia, NULL, 0), DAT_SUCCESS, "nothing to sync");
        teardown(f);
}

/* dat_lmr_sync_rdma_read(3DAT): a segment outside the boundaries of its
 * LMR -> DAT_INVALID_PARAMETER */
Test(lmr_sync, a_segment_outside_its_lmr_is_invalid_parameter)
{
        struct fixture f = setup();
        char *buf = mem_pages(2, PROT_READ | PROT_WRITE);
        struct mem_lmr a = mem_lmr_ok(f.ia, f.pz, buf, mem_page(), RW);
        const DAT_LMR_TRIPLET segs[] = {
                { up(buf), 8, a.lmr_context },
                { up(buf) + mem_page() - 4, 8, a.lmr_context },
        };

        cr_expect_eq(dat_lmr_sync_rdma_read(f.ia, segs, 2), ERR_ARG(2));
        cr_expect_eq(dat_lmr_sync_rdma_write(f.ia, segs, 2), ERR_ARG(2));
        cr_expect_eq(dat_lmr_sync_rdma_read(f.ia, segs, 1), DAT_SUCCESS);
        teardown(f);
}

/* dat_lmr_sync_rdma_read(3DAT): the LMR handle (context) was invalid */
Test(lmr_sync, a_segment_of_no_live_lmr_of_the_ia_is_invalid_parameter)
{
        struct fixture f = setup(), g = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr freed = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        struct mem_lmr other = mem_lmr_ok(g.ia, g.pz, buf, 64, RW);
        DAT_LMR_TRIPLET seg = { up(buf), 8, freed.lmr_context };

        cr_assert_eq(dat_lmr_free(freed.handle), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_sync_rdma_read(f.ia, &seg, 1), ERR_ARG(2));
        seg.lmr_context = other.lmr_context;
        cr_expect_eq(dat_lmr_sync_rdma_write(f.ia, &seg, 1), ERR_ARG(2));
        seg.lmr_context = 0;
        cr_expect_eq(dat_lmr_sync_rdma_write(f.ia, &seg, 1), ERR_ARG(2));
        cr_expect_eq(dat_lmr_sync_rdma_write(g.ia, (DAT_LMR_TRIPLET[]){ { up(buf), 8, other.lmr_context } }, 1),
                     DAT_SUCCESS);
        teardown(g);
        teardown(f);
}

/* A sync before an incoming RDMA Read needs memory that may be read, one
 * after an incoming RDMA Write memory that may be written. */
Test(lmr_sync, a_segment_without_the_privilege_is_invalid_parameter)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr ro = mem_lmr_ok(f.ia, f.pz, buf, 64, DAT_MEM_PRIV_LOCAL_READ_FLAG);
        struct mem_lmr wo = mem_lmr_ok(f.ia, f.pz, buf, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
        DAT_LMR_TRIPLET r = { up(buf), 8, ro.lmr_context }, w = { up(buf), 8, wo.lmr_context };

        cr_expect_eq(dat_lmr_sync_rdma_read(f.ia, &r, 1), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_sync_rdma_write(f.ia, &r, 1), ERR_ARG(2));
        cr_expect_eq(dat_lmr_sync_rdma_write(f.ia, &w, 1), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_sync_rdma_read(f.ia, &w, 1), ERR_ARG(2));
        teardown(f);
}

Test(lmr_sync, segments_missing_is_invalid_arg2)
{
        struct fixture f = setup();

        cr_expect_eq(dat_lmr_sync_rdma_read(f.ia, NULL, 1), ERR_ARG(2));
        cr_expect_eq(dat_lmr_sync_rdma_write(f.ia, NULL, 3), ERR_ARG(2));
        teardown(f);
}

/* ---- quotas ------------------------------------------------------------- */

/* dat_lmr_create(3DAT): resource limitations (datd.conf max_lmrs) ->
 * DAT_INSUFFICIENT_RESOURCES, and the refused LMR leaves nothing behind:
 * no handle, no PZ reference, no count in datd. */
Test(lmr_quota, the_lmr_over_max_lmrs_is_refused_and_leaves_nothing)
{
        struct fixture f = setup();
        char *buf = mem_pages(1, PROT_READ | PROT_WRITE);
        struct mem_lmr a = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        struct mem_lmr b = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        struct mem_lmr c;

        cr_expect_eq(DAT_GET_TYPE(mem_lmr_virtual(f.ia, f.pz, buf, 64, RW, &c)), DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(c.handle, DAT_HANDLE_NULL);
        cr_expect_eq(dat_lmr_free(a.handle), DAT_SUCCESS);
        c = mem_lmr_ok(f.ia, f.pz, buf, 64, RW);
        cr_expect_eq(DAT_GET_TYPE(mem_lmr_virtual(f.ia, f.pz, buf, 64, RW, &a)), DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(dat_lmr_free(b.handle), DAT_SUCCESS);
        cr_expect_eq(dat_lmr_free(c.handle), DAT_SUCCESS);
        cr_expect_eq(dat_pz_free(f.pz), DAT_SUCCESS, "no refused LMR holds the PZ");
        cr_expect_eq(dat_ia_close(f.ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

/* datd.conf max_lmr_bytes: registered bytes (whole pages) count; the
 * refused LMR's bytes are not counted. */
Test(lmr_bytes, the_lmr_over_max_lmr_bytes_is_refused_and_its_bytes_not_counted)
{
        struct fixture f = setup();
        size_t pg = 4096;
        char *buf;
        struct mem_lmr big, more, rest, l;

        if (mem_page() != pg)
                cr_skip_test("the limit is written for 4 KiB pages");
        buf = mem_pages(16, PROT_READ | PROT_WRITE);
        big = mem_lmr_ok(f.ia, f.pz, buf, 12 * pg, RW);
        cr_expect_eq(DAT_GET_TYPE(mem_lmr_virtual(f.ia, f.pz, buf, 8 * pg, RW, &more)),
                     DAT_INSUFFICIENT_RESOURCES);
        /* 12 + 4 = 16 pages: exactly the limit, so nothing of the 8 stuck. */
        rest = mem_lmr_ok(f.ia, f.pz, buf + 1, 4 * pg - 2, RW);
        cr_expect_eq(rest.registered_length, 4 * pg);
        cr_expect_eq(DAT_GET_TYPE(mem_lmr_virtual(f.ia, f.pz, buf, 1, RW, &l)), DAT_INSUFFICIENT_RESOURCES);
        cr_expect_eq(dat_lmr_free(big.handle), DAT_SUCCESS);
        more = mem_lmr_ok(f.ia, f.pz, buf, 12 * pg, RW);
        teardown(f);
}

Test(lmr_bytes, a_refused_shared_lmr_leaves_no_shared_memory_behind)
{
        struct fixture f = setup();
        char cookie[DAT_LMR_COOKIE_SIZE];
        struct mem_lmr l;

        mem_cookie(cookie, 20);
        cr_expect_eq(DAT_GET_TYPE(mem_lmr_shared(f.ia, f.pz, &cookie, NULL, 65536 + 1, RW, &l)),
                     DAT_INSUFFICIENT_RESOURCES);
        cr_expect_not(mem_shm_exists(cookie));
        teardown(f);
}
