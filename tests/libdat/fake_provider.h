/* The test suite's provider library (fake_provider.c): what it saw. */
#ifndef DATD_TESTS_LIBDAT_FAKE_PROVIDER_H
#define DATD_TESTS_LIBDAT_FAKE_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

#include <dat2/dat_registry.h>
#include <dat2/udat.h>

#define FAKE_LOG_ARGS 12

struct fake_provider_log {
        unsigned inits, finis;                  /* dat_provider_init / _fini calls */
        DAT_PROVIDER_INFO init_info;            /* the last init's */
        char instance_data[256];
        DAT_RETURN register_result;             /* its dat_registry_add_provider's */
        unsigned calls;                         /* calls that reached an object */
        unsigned opens, closes;                 /* ia_open / ia_close calls */
        int closes_held;                        /* an ia_close waits (hold_close) */
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
        /* The last call's arguments after its handle, in their order:
         * integers as themselves (converted to uint64_t, so a negative
         * DAT_COUNT sign-extends), pointers as their address, a struct or
         * union by its fields (DAT_OS_WAIT_PROXY_AGENT: instance_data,
         * proxy_agent_func; a cookie or context: as_64; a region
         * description: its first word). */
        uint64_t args[FAKE_LOG_ARGS];
        int nargs;
};

extern struct fake_provider_log fake_provider_log;

/* Its DAT_PROVIDER, for a test that registers it by hand; and a second
 * one, another provider (the same functions: an IA it opens and that IA's
 * objects name the second table). */
const DAT_PROVIDER *fake_provider_table(void);
const DAT_PROVIDER *fake_provider_table2(void);

/* The table with every slot libdat dispatches to: what dat_provider_init
 * registers when its instance data is FAKE_PROVIDER_ALL_SLOTS (the default
 * table leaves some NULL, for the test of what a provider leaves out). */
#define FAKE_PROVIDER_ALL_SLOTS "all-slots"

/* Instance data with which its ia_open answers DAT_PROVIDER_NOT_FOUND |
 * DAT_NAME_NOT_REGISTERED, as DAPL's does without its device. */
#define FAKE_PROVIDER_NO_DEVICE "no-device"

/* While on, its ia_close waits until it is turned off (closes_held says
 * one waits). */
void fake_provider_hold_close(bool on);
const DAT_PROVIDER *fake_provider_table_all(void);

/* A connection request of the IA of the provider's object h, since no
 * event of the fake ever carries one (DAT_HANDLE_NULL if h is none of
 * its objects); and the DAT_HANDLE_TYPE of the provider's object h, or
 * -1 if it is none (what libdat cannot tell the test: the fake's own
 * answer, without a call through libdat). */
DAT_CR_HANDLE fake_provider_new_cr(DAT_HANDLE h);
int fake_provider_object_type(DAT_HANDLE h);

#endif
