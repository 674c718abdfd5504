#include "config.h"

#include "tests/mem/mem_test.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libdat/mem_shm.h"
#include "tests/harness.h"

static struct datd_instance datd;

void mem_datd_start(const char *config_json)
{
        char *bin = build_path("daemon/datd");
        bool built = bin && access(bin, X_OK) == 0;

        free(bin);
        if (!built)
                cr_skip_test("daemon/datd is not built in this tree");
        cr_assert_eq(datd_start(&datd, config_json), 0, "datd did not start");
        datd_export_env(&datd);
}

void mem_datd_stop(void)
{
        datd_stop(&datd);
}

const char *mem_config_with_limits(const char *limits_json)
{
        static char buf[2048];

        snprintf(buf, sizeof(buf),
                 "{\n"
                 "  \"log_level\": \"debug\",\n"
                 "  \"ias\": [\n"
                 "    {\"name\": \"shm\", \"transport\": \"shm\", \"address\": \"127.0.0.1\"},\n"
                 "    {\"name\": \"tcp\", \"transport\": \"tcp\", \"address\": \"127.0.0.1\"}\n"
                 "  ],\n"
                 "  \"verbs\": false,\n"
                 "  \"limits\": {%s}\n"
                 "}\n",
                 limits_json);
        return buf;
}

DAT_IA_HANDLE mem_open_ia(void)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_ia_open((DAT_NAME_PTR) "datd-shm", 16, &evd, &ia);

        cr_assert_eq(r, DAT_SUCCESS, "dat_ia_open: 0x%08x (log: %s)", r, datd.log_path);
        return ia;
}

DAT_PZ_HANDLE mem_pz(DAT_IA_HANDLE ia)
{
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_pz_create(ia, &pz);

        cr_assert_eq(r, DAT_SUCCESS, "dat_pz_create: 0x%08x (log: %s)", r, datd.log_path);
        return pz;
}

size_t mem_page(void)
{
        return (size_t)sysconf(_SC_PAGESIZE);
}

void *mem_pages(size_t pages, int prot)
{
        void *p = mmap(NULL, pages * mem_page(), prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        cr_assert_neq(p, MAP_FAILED);
        return p;
}

void *mem_shared_pages(size_t pages)
{
        void *p = mmap(NULL, pages * mem_page(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);

        cr_assert_neq(p, MAP_FAILED);
        return p;
}

static DAT_RETURN lmr_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_MEM_TYPE type,
                             DAT_REGION_DESCRIPTION region, DAT_VLEN length,
                             DAT_MEM_PRIV_FLAGS privileges, struct mem_lmr *out)
{
        memset(out, 0, sizeof(*out));
        return dat_lmr_create(ia, type, region, length, pz, privileges, DAT_VA_TYPE_VA,
                              &out->handle, &out->lmr_context, &out->rmr_context,
                              &out->registered_length, &out->registered_address);
}

DAT_RETURN mem_lmr_virtual(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *address, DAT_VLEN length,
                           DAT_MEM_PRIV_FLAGS privileges, struct mem_lmr *out)
{
        DAT_REGION_DESCRIPTION region = { .for_va = address };

        return lmr_create(ia, pz, DAT_MEM_TYPE_VIRTUAL, region, length, privileges, out);
}

struct mem_lmr mem_lmr_ok(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *address, DAT_VLEN length,
                          DAT_MEM_PRIV_FLAGS privileges)
{
        struct mem_lmr l;
        DAT_RETURN r = mem_lmr_virtual(ia, pz, address, length, privileges, &l);

        cr_assert_eq(r, DAT_SUCCESS, "dat_lmr_create: 0x%08x (log: %s)", r, datd.log_path);
        return l;
}

DAT_RETURN mem_lmr_shared(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, char (*cookie)[DAT_LMR_COOKIE_SIZE],
                          void *address, DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges,
                          struct mem_lmr *out)
{
        DAT_REGION_DESCRIPTION region = {
                .for_shared_memory = { .virtual_address = address, .shared_memory_id = cookie },
        };

        return lmr_create(ia, pz, DAT_MEM_TYPE_SHARED_VIRTUAL, region, length, privileges, out);
}

void mem_cookie(char cookie[DAT_LMR_COOKIE_SIZE], unsigned tag)
{
        static unsigned counter;

        memset(cookie, 0, DAT_LMR_COOKIE_SIZE);
        snprintf(cookie, 20, "mem%u", tag);
        /* After a NUL: only a provider that reads all 40 bytes tells two
         * test processes apart. */
        snprintf(cookie + 21, 19, "%d.%u", (int)getpid(), ++counter);
}

bool mem_shm_exists(const char cookie[DAT_LMR_COOKIE_SIZE])
{
        char name[MEM_SHM_NAME_MAX];
        int fd;

        mem_shm_name(cookie, name);
        fd = shm_open(name, O_RDONLY, 0);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

DAT_HANDLE mem_stale_handle(DAT_IA_HANDLE ia)
{
        DAT_PZ_HANDLE pz = mem_pz(ia);

        cr_assert_eq(dat_pz_free(pz), DAT_SUCCESS);
        return pz;
}
