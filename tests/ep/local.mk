# tests/ep: Endpoints and Shared Receive Queues (dat_ep_*, dat_srq_*)
# against a real datd.  Linked with libdatcore to reach the test hooks of
# ep.h/srq.h (forcing EP states, moving SRQ buffers as the data path will).
EXTRA_DIST += tests/ep/ep_test.h

if HAVE_CRITERION
check_LTLIBRARIES += tests/ep/libeptest.la
tests_ep_libeptest_la_SOURCES = tests/ep/ep_test.c tests/ep/ep_test.h
tests_ep_libeptest_la_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS)
tests_ep_libeptest_la_LIBADD = tests/libharness.la $(CRITERION_LIBS)

ep_tests = \
	tests/ep/test_ep_create \
	tests/ep/test_ep_modify \
	tests/ep/test_ep_ops \
	tests/ep/test_ep_quota \
	tests/ep/test_srq \
	tests/ep/test_srq_resize
check_PROGRAMS += $(ep_tests)
TESTS += $(ep_tests)

ep_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
ep_test_ldadd = tests/ep/libeptest.la libdat/libdatcore.la proto/libdatp.la \
	tests/libharness.la $(CRITERION_LIBS) -lpthread

tests_ep_test_ep_create_SOURCES = tests/ep/test_ep_create.c
tests_ep_test_ep_create_CFLAGS = $(ep_test_cflags)
tests_ep_test_ep_create_LDADD = $(ep_test_ldadd)

tests_ep_test_ep_modify_SOURCES = tests/ep/test_ep_modify.c
tests_ep_test_ep_modify_CFLAGS = $(ep_test_cflags)
tests_ep_test_ep_modify_LDADD = $(ep_test_ldadd)

tests_ep_test_ep_ops_SOURCES = tests/ep/test_ep_ops.c
tests_ep_test_ep_ops_CFLAGS = $(ep_test_cflags)
tests_ep_test_ep_ops_LDADD = $(ep_test_ldadd)

tests_ep_test_ep_quota_SOURCES = tests/ep/test_ep_quota.c
tests_ep_test_ep_quota_CFLAGS = $(ep_test_cflags)
tests_ep_test_ep_quota_LDADD = $(ep_test_ldadd)

tests_ep_test_srq_SOURCES = tests/ep/test_srq.c
tests_ep_test_srq_CFLAGS = $(ep_test_cflags)
tests_ep_test_srq_LDADD = $(ep_test_ldadd)

tests_ep_test_srq_resize_SOURCES = tests/ep/test_srq_resize.c
tests_ep_test_srq_resize_CFLAGS = $(ep_test_cflags)
tests_ep_test_srq_resize_LDADD = $(ep_test_ldadd)
endif
