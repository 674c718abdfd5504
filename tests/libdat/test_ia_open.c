/* dat_ia_openv(3DAT) before any datd is involved: parameter checks, the
 * registry lookup with its version rules, and a datd that is not running.
 * Each failure also has its reason in the debug trace. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "tests/libdat/libdat_test.h"

#define ERR(type, sub) (DAT_CLASS_ERROR | (type) | (sub))

static const char *const conf =
        "datd-shm u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm\" \"\"\n"
        "datd-single u2.0 nonthreadsafe nondefault libdat2.so.2 datd.2.0 \"shm\" \"\"\n"
        "datd-v21 u2.1 threadsafe nondefault libdat2.so.2 datd.2.0 \"shm\" \"\"\n"
        "ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"ib0 0\" \"\"\n";

static void setup(void)
{
        use_dat_conf(conf);
        /* No datd listens here. */
        setenv("DATD_SOCKET", "/nonexistent/datd.sock", 1);
}

/* Opens with the given arguments, capturing the trace; returns the code. */
static DAT_RETURN open_traced(const char *name, DAT_UINT32 major, DAT_UINT32 minor,
                              DAT_BOOLEAN ts, char **trace)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_RETURN r;

        trace_capture_begin();
        r = dat_ia_openv((DAT_NAME_PTR)name, 8, &evd, &ia, major, minor, ts);
        *trace = trace_capture_end();
        cr_expect_eq(ia, DAT_HANDLE_NULL, "a failed open returned an IA handle");
        cr_expect_eq(evd, DAT_HANDLE_NULL, "a failed open returned an EVD handle");
        return r;
}

TestSuite(ia_open, .init = setup);

Test(ia_open, null_name_and_null_out_pointers_are_invalid_parameters)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;

        cr_expect_eq(dat_ia_open(NULL, 8, &evd, &ia), ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
        cr_expect_eq(dat_ia_open("datd-shm", 8, NULL, &ia), ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
        cr_expect_eq(dat_ia_open("datd-shm", 8, &evd, NULL), ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
}

Test(ia_open, negative_queue_length_for_a_new_async_evd_is_invalid)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;

        cr_expect_eq(dat_ia_open("datd-shm", -1, &evd, &ia), ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
}

Test(ia_open, an_async_evd_that_is_no_evd_is_an_invalid_handle_and_left_unchanged)
{
        int on_stack;
        DAT_EVD_HANDLE bad[] = { (DAT_EVD_HANDLE)0x1234567, &on_stack, (DAT_EVD_HANDLE)0xda7a000000100001 };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                DAT_EVD_HANDLE evd = bad[i];
                DAT_IA_HANDLE ia = DAT_HANDLE_NULL;

                cr_expect_eq(dat_ia_open("datd-shm", 8, &evd, &ia),
                             ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC));
                cr_expect_eq(evd, bad[i]);
                cr_expect_eq(ia, DAT_HANDLE_NULL);
        }
}

Test(ia_open, an_unknown_name_is_not_registered_and_the_trace_says_where_it_looked)
{
        char *trace, expect[512];
        DAT_RETURN r = open_traced("foo", 2, 0, DAT_FALSE, &trace);

        cr_expect_eq(r, ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED));
        snprintf(expect, sizeof(expect), "libdat: dat_ia_open(\"foo\"): no such IA in %s (set by DAT_OVERRIDE)",
                 getenv("DAT_OVERRIDE"));
        cr_expect_not_null(strstr(trace, expect), "trace: %s", trace);
        free(trace);
}

Test(ia_open, an_unknown_name_with_the_default_registry_names_the_default_file)
{
        char *trace;
        DAT_RETURN r;

        unsetenv("DAT_OVERRIDE");
        r = open_traced("surely-no-such-ia", 2, 0, DAT_FALSE, &trace);
        cr_expect_eq(r, ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED));
        cr_expect_not_null(strstr(trace, "dat_ia_open(\"surely-no-such-ia\"): no such IA"), "trace: %s", trace);
        cr_expect_not_null(strstr(trace, SYSCONFDIR "/dat.conf"), "trace: %s", trace);
        cr_expect_not_null(strstr(trace, "(DAT_OVERRIDE unset)"), "trace: %s", trace);
        free(trace);
}

Test(ia_open, a_bad_async_evd_is_found_before_the_registry_is_read)
{
        /* With libdat's tag, as its own handles have: refused whatever the
         * name, before dat.conf is looked at, as before other providers. */
        DAT_EVD_HANDLE evd = (DAT_EVD_HANDLE)(uintptr_t)0xda7a000000000001ull;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;

        cr_expect_eq(dat_ia_open("surely-no-such-ia", 8, &evd, &ia),
                     ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC));
        cr_expect_eq(ia, DAT_HANDLE_NULL);
}

Test(ia_open, another_major_version_is_not_found)
{
        char *trace;

        cr_expect_eq(open_traced("datd-shm", 3, 0, DAT_FALSE, &trace),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_MAJOR_NOT_FOUND));
        cr_expect_not_null(strstr(trace, "major version 3"), "trace: %s", trace);
        free(trace);
        cr_expect_eq(open_traced("datd-shm", 1, 2, DAT_FALSE, &trace),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_MAJOR_NOT_FOUND));
        free(trace);
}

Test(ia_open, a_newer_minor_than_offered_is_not_found)
{
        char *trace;

        cr_expect_eq(open_traced("datd-shm", 2, 1, DAT_FALSE, &trace),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_MINOR_NOT_FOUND));
        free(trace);
}

Test(ia_open, thread_safety_asked_of_a_nonthreadsafe_entry_is_not_found)
{
        char *trace;

        cr_expect_eq(open_traced("datd-single", 2, 0, DAT_TRUE, &trace),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_THREAD_SAFETY_NOT_FOUND));
        cr_expect_not_null(strstr(trace, "nonthreadsafe"), "trace: %s", trace);
        free(trace);
}

/* The lookups below pass the registry and fail only because no datd runs:
 * DAT_PROVIDER_NOT_FOUND without a subtype tells that apart from the
 * registry's own refusals above. */
Test(ia_open, datd_not_running_is_provider_not_found_without_subtype)
{
        char *trace;

        cr_expect_eq(open_traced("datd-shm", 2, 0, DAT_FALSE, &trace),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE));
        cr_expect_not_null(strstr(trace, "libdat: dat_ia_open(\"datd-shm\"): cannot connect to datd at "
                                         "/nonexistent/datd.sock (DATD_SOCKET)"),
                           "trace: %s", trace);
        free(trace);
}

Test(ia_open, without_datd_socket_the_default_socket_is_in_the_runtime_directory)
{
        char *trace;

        /* Never talk to a datd of the host. */
        if (access(RUNSTATEDIR "/datd/datd.sock", F_OK) == 0)
                cr_skip_test("a datd runs on this host at " RUNSTATEDIR "/datd/datd.sock");
        unsetenv("DATD_SOCKET");
        cr_expect_eq(open_traced("datd-shm", 2, 0, DAT_FALSE, &trace),
                     ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE));
        cr_expect_not_null(strstr(trace, "cannot connect to datd at " RUNSTATEDIR "/datd/datd.sock (default)"),
                           "trace: %s", trace);
        free(trace);
}

Test(ia_open, a_consumer_not_asking_for_thread_safety_may_use_any_entry)
{
        char *trace;

        cr_expect_eq(open_traced("datd-shm", 2, 0, DAT_FALSE, &trace), ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE));
        free(trace);
        cr_expect_eq(open_traced("datd-single", 2, 0, DAT_FALSE, &trace), ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE));
        free(trace);
        cr_expect_eq(open_traced("datd-shm", 2, 0, DAT_TRUE, &trace), ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE));
        free(trace);
}

Test(ia_open, an_older_minor_is_served_by_a_newer_one)
{
        char *trace;

        cr_expect_eq(open_traced("datd-v21", 2, 0, DAT_FALSE, &trace), ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE));
        cr_expect_not_null(strstr(trace, "cannot connect to datd"), "trace: %s", trace);
        free(trace);
}

Test(ia_open, a_socket_file_nobody_listens_on_is_datd_not_running)
{
        char *trace;
        DAT_RETURN r;

        /* A regular file where the socket should be: connect() is refused. */
        setenv("DATD_SOCKET", getenv("DAT_OVERRIDE"), 1);
        r = open_traced("datd-shm", 2, 0, DAT_FALSE, &trace);
        cr_expect_eq(r, ERR(DAT_PROVIDER_NOT_FOUND, DAT_NO_SUBTYPE));
        cr_expect_not_null(strstr(trace, "cannot connect to datd"), "trace: %s", trace);
        free(trace);
}

Test(ia_open, library_code_prints_nothing_without_the_debug_variables)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        char *trace;

        trace_capture_begin();
        unsetenv("DAT_DBG_TYPE");
        unsetenv("DATD_DEBUG");
        dat_ia_open("foo", 8, &evd, &ia);
        dat_ia_open("datd-shm", 8, &evd, &ia);
        trace = trace_capture_end();
        cr_expect_str_eq(trace, "");
        free(trace);
}

Test(ia_open, dat_dbg_type_zero_keeps_the_trace_off)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        char *trace;

        trace_capture_begin();
        setenv("DAT_DBG_TYPE", "0", 1);
        dat_ia_open("foo", 8, &evd, &ia);
        trace = trace_capture_end();
        cr_expect_str_eq(trace, "");
        free(trace);
}
