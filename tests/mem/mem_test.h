/* Helpers shared by the memory tests (tests/mem): a real datd per test,
 * IAs, PZs and LMRs over memory mapped for the purpose, cookies unique to
 * the test process. */
#ifndef DATD_TESTS_MEM_MEM_TEST_H
#define DATD_TESTS_MEM_MEM_TEST_H

#include <stdbool.h>
#include <stddef.h>

#include <dat2/udat.h>

#define ERR(type, sub) ((DAT_RETURN)(DAT_CLASS_ERROR | (type) | (sub)))
#define ERR_ARG(n) ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1 + (n) - 1)

/* Values that are not live handles of any kind: NULL, a stale one is made
 * per test, garbage, a pointer into the stack. */
#define GARBAGE_HANDLE ((DAT_HANDLE)0x1234567)

/* Starts a datd for this test with config_json (NULL: the harness's
 * default) and points libdat at it; skips the test if datd is not built. */
void mem_datd_start(const char *config_json);
void mem_datd_stop(void);

/* The datd config of the harness's default with a "limits" object added:
 * limits_json is its inside, e.g. "\"max_lmrs\": 2".  Static storage. */
const char *mem_config_with_limits(const char *limits_json);

DAT_IA_HANDLE mem_open_ia(void);
DAT_PZ_HANDLE mem_pz(DAT_IA_HANDLE ia);

/* Anonymous memory, pages pages with prot (MAP_PRIVATE), or shared. */
void *mem_pages(size_t pages, int prot);
void *mem_shared_pages(size_t pages);
size_t mem_page(void);

struct mem_lmr {
        DAT_LMR_HANDLE handle;
        DAT_LMR_CONTEXT lmr_context;
        DAT_RMR_CONTEXT rmr_context;
        DAT_VLEN registered_length;
        DAT_VADDR registered_address;
};

/* dat_lmr_create of DAT_MEM_TYPE_VIRTUAL, DAT_VA_TYPE_VA. */
DAT_RETURN mem_lmr_virtual(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *address, DAT_VLEN length,
                           DAT_MEM_PRIV_FLAGS privileges, struct mem_lmr *out);

/* Same, asserting success. */
struct mem_lmr mem_lmr_ok(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *address, DAT_VLEN length,
                          DAT_MEM_PRIV_FLAGS privileges);

/* dat_lmr_create of DAT_MEM_TYPE_SHARED_VIRTUAL. */
DAT_RETURN mem_lmr_shared(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, char (*cookie)[DAT_LMR_COOKIE_SIZE],
                          void *address, DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges,
                          struct mem_lmr *out);

/* A cookie no other test process uses: tag, the PID, and a counter, with
 * a NUL byte in the middle (the provider must read all 40 bytes). */
void mem_cookie(char cookie[DAT_LMR_COOKIE_SIZE], unsigned tag);

/* Whether the shared memory object libdat uses for a cookie exists. */
bool mem_shm_exists(const char cookie[DAT_LMR_COOKIE_SIZE]);

/* A handle that was live once and is freed: a PZ created and freed on ia. */
DAT_HANDLE mem_stale_handle(DAT_IA_HANDLE ia);

#endif
