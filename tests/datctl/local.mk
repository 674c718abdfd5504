# tests/datctl: datctl's output helpers (unit), and the real datctl binary
# against a real datd and against a D-Bus peer that misbehaves on purpose.
if HAVE_CRITERION
datctl_unit_tests = \
	tests/datctl/test-datctl-table \
	tests/datctl/test-datctl-format \
	tests/datctl/test-datctl-list
datctl_functional_tests = \
	tests/datctl/test-datctl \
	tests/datctl/test-datctl-peer
check_PROGRAMS += $(datctl_unit_tests) $(datctl_functional_tests)
TESTS += $(datctl_unit_tests) $(datctl_functional_tests)

datctl_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) $(SYSTEMD_CFLAGS) $(JANSSON_CFLAGS)

# The unit tests compile datctl's helper files directly.
tests_datctl_test_datctl_table_SOURCES = tests/datctl/test-datctl-table.c \
	daemon/datctl-table.c daemon/datctl-format.c daemon/utf8.c
tests_datctl_test_datctl_table_CFLAGS = $(datctl_test_cflags)
tests_datctl_test_datctl_table_LDADD = $(CRITERION_LIBS)

tests_datctl_test_datctl_format_SOURCES = tests/datctl/test-datctl-format.c \
	daemon/datctl-format.c daemon/utf8.c
tests_datctl_test_datctl_format_CFLAGS = $(datctl_test_cflags)
tests_datctl_test_datctl_format_LDADD = $(CRITERION_LIBS)

tests_datctl_test_datctl_list_SOURCES = tests/datctl/test-datctl-list.c \
	daemon/datctl-list.c daemon/datctl-table.c daemon/datctl-format.c daemon/datctl-bus.c \
	daemon/datctl-json.c daemon/utf8.c
tests_datctl_test_datctl_list_CFLAGS = $(datctl_test_cflags)
tests_datctl_test_datctl_list_LDADD = $(CRITERION_LIBS) $(SYSTEMD_LIBS) $(JANSSON_LIBS)

# The functional tests run the build tree's daemon/datctl and daemon/datd.
tests_datctl_test_datctl_SOURCES = tests/datctl/test-datctl.c \
	tests/datctl/datctl-run.c tests/datctl/datctl-run.h
tests_datctl_test_datctl_CFLAGS = $(datctl_test_cflags)
tests_datctl_test_datctl_LDADD = tests/libharness.la proto/libdatp.la libdat/libdat2.la \
	$(CRITERION_LIBS) $(JANSSON_LIBS)

tests_datctl_test_datctl_peer_SOURCES = tests/datctl/test-datctl-peer.c \
	tests/datctl/datctl-run.c tests/datctl/datctl-run.h
tests_datctl_test_datctl_peer_CFLAGS = $(datctl_test_cflags)
tests_datctl_test_datctl_peer_LDADD = tests/libharness.la \
	$(CRITERION_LIBS) $(SYSTEMD_LIBS) $(JANSSON_LIBS)
endif
