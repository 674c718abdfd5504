# tests/daemon: real datd processes against raw protocol clients, hostile
# ones included, and its D-Bus API over the private socket.
if HAVE_CRITERION
check_LTLIBRARIES += tests/daemon/libdatdtest.la
tests_daemon_libdatdtest_la_SOURCES = \
	tests/daemon/raw-client.c tests/daemon/raw-client.h \
	tests/daemon/bus-client.c tests/daemon/bus-client.h \
	tests/daemon/child.c tests/daemon/child.h \
	tests/daemon/scratch.c tests/daemon/scratch.h
tests_daemon_libdatdtest_la_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)

datd_tests = \
	tests/daemon/test-datd-lifecycle \
	tests/daemon/test-datd-protocol \
	tests/daemon/test-datd-hostile \
	tests/daemon/test-datd-bus \
	tests/daemon/test-datd-bus-limits \
	tests/daemon/test-datd-objects \
	tests/daemon/test-datd-utf8 \
	tests/daemon/test-datd-host-addrs
check_PROGRAMS += $(datd_tests)
TESTS += $(datd_tests)

datd_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) $(SYSTEMD_CFLAGS)
datd_test_ldadd = tests/daemon/libdatdtest.la tests/libharness.la proto/libdatp.la \
	$(CRITERION_LIBS) $(SYSTEMD_LIBS)

tests_daemon_test_datd_lifecycle_SOURCES = tests/daemon/test-datd-lifecycle.c
tests_daemon_test_datd_lifecycle_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_lifecycle_LDADD = $(datd_test_ldadd)

tests_daemon_test_datd_protocol_SOURCES = tests/daemon/test-datd-protocol.c
tests_daemon_test_datd_protocol_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_protocol_LDADD = $(datd_test_ldadd)

tests_daemon_test_datd_hostile_SOURCES = tests/daemon/test-datd-hostile.c
tests_daemon_test_datd_hostile_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_hostile_LDADD = $(datd_test_ldadd)

tests_daemon_test_datd_bus_SOURCES = tests/daemon/test-datd-bus.c
tests_daemon_test_datd_bus_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_bus_LDADD = $(datd_test_ldadd)

tests_daemon_test_datd_bus_limits_SOURCES = tests/daemon/test-datd-bus-limits.c
tests_daemon_test_datd_bus_limits_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_bus_limits_LDADD = $(datd_test_ldadd)

tests_daemon_test_datd_objects_SOURCES = tests/daemon/test-datd-objects.c
tests_daemon_test_datd_objects_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_objects_LDADD = $(datd_test_ldadd)

# Unit test: compiles the one datd file it tests.
tests_daemon_test_datd_utf8_SOURCES = tests/daemon/test-datd-utf8.c daemon/utf8.c
tests_daemon_test_datd_utf8_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS)
tests_daemon_test_datd_utf8_LDADD = $(CRITERION_LIBS)

tests_daemon_test_datd_host_addrs_SOURCES = tests/daemon/test-datd-host-addrs.c daemon/host_addrs.c \
	daemon/netif.c
tests_daemon_test_datd_host_addrs_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS) $(SYSTEMD_CFLAGS)
tests_daemon_test_datd_host_addrs_LDADD = $(CRITERION_LIBS) $(SYSTEMD_LIBS)
endif

# Connections (daemon/conn.c) through raw protocol clients.
if HAVE_CRITERION
tests_daemon_libdatdtest_la_SOURCES += tests/daemon/conn-client.c tests/daemon/conn-client.h
check_PROGRAMS += tests/daemon/test-datd-conn
TESTS += tests/daemon/test-datd-conn
tests_daemon_test_datd_conn_SOURCES = tests/daemon/test-datd-conn.c \
	tests/daemon/conn-expect.c tests/daemon/conn-expect.h
tests_daemon_test_datd_conn_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_conn_LDADD = $(datd_test_ldadd)
endif

# Connections between hosts: network namespaces (tests/netns.h), a datd in each.
if HAVE_CRITERION
check_PROGRAMS += tests/daemon/test-datd-conn-hosts
TESTS += tests/daemon/test-datd-conn-hosts
tests_daemon_test_datd_conn_hosts_SOURCES = tests/daemon/test-datd-conn-hosts.c \
	tests/daemon/conn-expect.c tests/daemon/conn-expect.h
tests_daemon_test_datd_conn_hosts_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_conn_hosts_LDADD = tests/libnetns.la $(datd_test_ldadd)
endif

# The connection-rate measurement: built by make check, never run by it.
if HAVE_CRITERION
check_PROGRAMS += tests/daemon/conn-rate
tests_daemon_conn_rate_SOURCES = tests/daemon/conn-rate.c
tests_daemon_conn_rate_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)
tests_daemon_conn_rate_LDADD = tests/daemon/libdatdtest.la tests/libnetns.la tests/libharness.la \
	proto/libdatp.la $(SYSTEMD_LIBS)
endif

# Data channels (issue 5/6): EV_DATA_CHANNEL to both ends of a connection; the
# shm region is attached with libdat's own shm_link code, compiled in.
if HAVE_CRITERION
check_PROGRAMS += tests/daemon/test-datd-channel
TESTS += tests/daemon/test-datd-channel
tests_daemon_test_datd_channel_SOURCES = tests/daemon/test-datd-channel.c \
	tests/daemon/conn-expect.c tests/daemon/conn-expect.h \
	libdat/shm_link.c libdat/shm_region.c
tests_daemon_test_datd_channel_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_channel_LDADD = tests/libnetns.la $(datd_test_ldadd)
endif

# The per-uid limits (daemon/uid_budget.h): users as forked children.
if HAVE_CRITERION
check_PROGRAMS += tests/daemon/test-datd-uid-budget
TESTS += tests/daemon/test-datd-uid-budget
tests_daemon_test_datd_uid_budget_SOURCES = tests/daemon/test-datd-uid-budget.c
tests_daemon_test_datd_uid_budget_CFLAGS = $(datd_test_cflags)
tests_daemon_test_datd_uid_budget_LDADD = $(datd_test_ldadd)
endif
