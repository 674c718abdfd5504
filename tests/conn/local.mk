# tests/conn: connections (dat_psp_*, dat_rsp_*, dat_cr_*, dat_ep_connect,
# dat_ep_dup_connect, dat_ep_disconnect) against real datd processes.
# Linked with libdatcore for the EP test hooks (ep_test_force_state).
EXTRA_DIST += tests/conn/conn_test.h

if HAVE_CRITERION
check_LTLIBRARIES += tests/conn/libconntest.la
tests_conn_libconntest_la_SOURCES = tests/conn/conn_test.c tests/conn/conn_test.h
tests_conn_libconntest_la_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS)
tests_conn_libconntest_la_LIBADD = tests/libharness.la $(CRITERION_LIBS)

conn_tests = \
	tests/conn/test_conn_accept \
	tests/conn/test_conn_args \
	tests/conn/test_conn_progress \
	tests/conn/test_conn_reader \
	tests/conn/test_conn_cross_host \
	tests/conn/test_conn_same_host
check_PROGRAMS += $(conn_tests)
TESTS += $(conn_tests)

conn_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
conn_test_ldadd = tests/conn/libconntest.la libdat/libdatcore.la proto/libdatp.la \
	tests/libharness.la $(CRITERION_LIBS) -lpthread

tests_conn_test_conn_accept_SOURCES = tests/conn/test_conn_accept.c
tests_conn_test_conn_accept_CFLAGS = $(conn_test_cflags)
tests_conn_test_conn_accept_LDADD = $(conn_test_ldadd)

tests_conn_test_conn_args_SOURCES = tests/conn/test_conn_args.c
tests_conn_test_conn_args_CFLAGS = $(conn_test_cflags)
tests_conn_test_conn_args_LDADD = $(conn_test_ldadd)

tests_conn_test_conn_progress_SOURCES = tests/conn/test_conn_progress.c
tests_conn_test_conn_progress_CFLAGS = $(conn_test_cflags)
tests_conn_test_conn_progress_LDADD = $(conn_test_ldadd)

tests_conn_test_conn_reader_SOURCES = tests/conn/test_conn_reader.c
tests_conn_test_conn_reader_CFLAGS = $(conn_test_cflags)
tests_conn_test_conn_reader_LDADD = $(conn_test_ldadd)

tests_conn_test_conn_cross_host_SOURCES = tests/conn/test_conn_cross_host.c
tests_conn_test_conn_cross_host_CFLAGS = $(conn_test_cflags)
tests_conn_test_conn_cross_host_LDADD = tests/libnetns.la $(conn_test_ldadd)

tests_conn_test_conn_same_host_SOURCES = tests/conn/test_conn_same_host.c
tests_conn_test_conn_same_host_CFLAGS = $(conn_test_cflags)
tests_conn_test_conn_same_host_LDADD = $(conn_test_ldadd)
endif

if HAVE_CRITERION
conn_tests_provider_ep = tests/conn/test_conn_provider_ep
check_PROGRAMS += $(conn_tests_provider_ep)
TESTS += $(conn_tests_provider_ep)
tests_conn_test_conn_provider_ep_SOURCES = tests/conn/test_conn_provider_ep.c
tests_conn_test_conn_provider_ep_CFLAGS = $(conn_test_cflags)
tests_conn_test_conn_provider_ep_LDADD = $(conn_test_ldadd)
endif
