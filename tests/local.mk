# Tests: one directory per area, each with its own local.mk; the shared
# harness (real datd processes, bounded child programs) is built once here.
if HAVE_CRITERION
check_LTLIBRARIES += tests/libharness.la
tests_libharness_la_SOURCES = tests/harness.c tests/harness.h
tests_libharness_la_CFLAGS = $(AM_CFLAGS) -fvisibility=default
endif
EXTRA_DIST += tests/run-suite
include tests/proto/local.mk
include tests/libdat/local.mk
include tests/daemon/local.mk
include tests/datctl/local.mk
include tests/abi/local.mk
include tests/mem/local.mk
include tests/ep/local.mk
include tests/evd/local.mk
# The multi-host harness: hosts as network namespaces (tests/netns.h).
if HAVE_CRITERION
check_LTLIBRARIES += tests/libnetns.la
tests_libnetns_la_SOURCES = tests/netns.c tests/netns.h
tests_libnetns_la_CFLAGS = $(AM_CFLAGS) -fvisibility=default
tests_libnetns_la_LIBADD = tests/libharness.la
endif
include tests/netns/local.mk
include tests/conn/local.mk
include tests/shm/local.mk
include tests/dto/local.mk
include tests/dapl2/local.mk
include tests/ext/local.mk
