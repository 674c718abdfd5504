# tests/evd: Event Dispatchers and Consumer Notification Objects against a
# real datd: the public entry points, and the internal producer API
# (evd_post) the transports use.  Linked with libdatcore to reach it.
EXTRA_DIST += tests/evd/evd_waiter_peek.h

if HAVE_CRITERION
check_LTLIBRARIES += tests/evd/libevdtest.la
tests_evd_libevdtest_la_SOURCES = tests/evd/evd_test.c tests/evd/evd_test.h
tests_evd_libevdtest_la_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
tests_evd_libevdtest_la_LIBADD = tests/libharness.la $(CRITERION_LIBS)

evd_tests = \
	tests/evd/test_evd \
	tests/evd/test_evd_wait \
	tests/evd/test_evd_producer \
	tests/evd/test_cno
check_PROGRAMS += $(evd_tests)
TESTS += $(evd_tests)

evd_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
evd_test_ldadd = tests/evd/libevdtest.la libdat/libdatcore.la proto/libdatp.la \
	tests/libharness.la $(CRITERION_LIBS) -lpthread

tests_evd_test_evd_SOURCES = tests/evd/test_evd.c
tests_evd_test_evd_CFLAGS = $(evd_test_cflags)
tests_evd_test_evd_LDADD = $(evd_test_ldadd)

tests_evd_test_evd_wait_SOURCES = tests/evd/test_evd_wait.c
tests_evd_test_evd_wait_CFLAGS = $(evd_test_cflags)
tests_evd_test_evd_wait_LDADD = $(evd_test_ldadd)

tests_evd_test_evd_producer_SOURCES = tests/evd/test_evd_producer.c
tests_evd_test_evd_producer_CFLAGS = $(evd_test_cflags)
tests_evd_test_evd_producer_LDADD = $(evd_test_ldadd)

tests_evd_test_cno_SOURCES = tests/evd/test_cno.c
tests_evd_test_cno_CFLAGS = $(evd_test_cflags)
tests_evd_test_cno_LDADD = $(evd_test_ldadd)
endif
