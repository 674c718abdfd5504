# tests/netns: the multi-host harness (tests/netns.[ch]) itself: hosts as
# network namespaces on one bridge, links cut and restored, a real datd in
# each host, and no namespace left behind by a finished or a killed test.
if HAVE_CRITERION
netns_tests = tests/netns/test-netns
check_PROGRAMS += $(netns_tests)
TESTS += $(netns_tests)

tests_netns_test_netns_SOURCES = tests/netns/test-netns.c
tests_netns_test_netns_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS) $(JANSSON_CFLAGS)
tests_netns_test_netns_LDADD = tests/libnetns.la tests/libharness.la \
	$(CRITERION_LIBS) $(JANSSON_LIBS)
endif
