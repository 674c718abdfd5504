/* The test suite's provider library (fake_provider.c): what it saw. */
#ifndef DATD_TESTS_LIBDAT_FAKE_PROVIDER_H
#define DATD_TESTS_LIBDAT_FAKE_PROVIDER_H

#include <stdint.h>

#include <dat2/dat_registry.h>
#include <dat2/udat.h>

struct fake_provider_log {
        unsigned inits, finis;                  /* dat_provider_init / _fini calls */
        DAT_PROVIDER_INFO init_info;            /* the last init's */
        char instance_data[256];
        DAT_RETURN register_result;             /* its dat_registry_add_provider's */
        unsigned calls;                         /* calls that reached an object */
        char last_call[64];                     /* "pz_create", ... */
        DAT_HANDLE last_handle;                 /* the handle that call got */
        char opened_name[DAT_NAME_MAX_LENGTH];  /* ia_open's */
        DAT_COUNT async_qlen;
        DAT_CLOSE_FLAGS close_flags;            /* ia_close's */
        int live_objects;
        DAT_COUNT segments;                     /* the last post's */
        DAT_LMR_TRIPLET *iov;
        uint64_t cookie;
        DAT_COMPLETION_FLAGS completion_flags;
        const DAT_RMR_TRIPLET *remote;          /* the last RDMA post's */
        DAT_TIMEOUT wait_timeout;               /* evd_wait's */
        int ext_op, ext_arg;                    /* handle_extendedop's */
};

extern struct fake_provider_log fake_provider_log;

/* Its DAT_PROVIDER, for a test that registers it by hand; and a second
 * one, another provider (the same functions: an IA it opens and that IA's
 * objects name the second table). */
const DAT_PROVIDER *fake_provider_table(void);
const DAT_PROVIDER *fake_provider_table2(void);

#endif
