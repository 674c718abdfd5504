# tests/libdat: libdat2.so.2.  test_exports reads the built .so; test_strerror
# runs through the .so itself; the others link libdatcore (the same objects)
# to reach internals: the handle table, the dat.conf parser, child objects.
# test_registry reads the shipped etc/dat.conf.
EXTRA_DIST += tests/libdat/libdat_test.h etc/dat.conf

if HAVE_CRITERION
check_LTLIBRARIES += tests/libdat/libdattest.la
tests_libdat_libdattest_la_SOURCES = tests/libdat/libdat_test.c tests/libdat/libdat_test.h
tests_libdat_libdattest_la_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS)
tests_libdat_libdattest_la_LIBADD = tests/libharness.la $(CRITERION_LIBS)

libdat_tests = \
	tests/libdat/test_exports \
	tests/libdat/test_strerror \
	tests/libdat/test_registry \
	tests/libdat/test_handles \
	tests/libdat/test_ia_open \
	tests/libdat/test_ia \
	tests/libdat/test_dat_lock \
	tests/libdat/test_raw_syscall \
	tests/libdat/test_peer_watch \
	tests/libdat/test_lmr_seen \
	tests/libdat/test_shm_direct
check_PROGRAMS += $(libdat_tests)
TESTS += $(libdat_tests)

libdat_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
libdat_test_core = tests/libdat/libdattest.la libdat/libdatcore.la $(CRITERION_LIBS) -lpthread

tests_libdat_test_exports_SOURCES = tests/libdat/test_exports.c
tests_libdat_test_exports_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_exports_LDADD = tests/libharness.la $(CRITERION_LIBS)
# It inspects the built library, so it must be built first.
EXTRA_tests_libdat_test_exports_DEPENDENCIES = libdat/libdat2.la

tests_libdat_test_strerror_SOURCES = tests/libdat/test_strerror.c
tests_libdat_test_strerror_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_strerror_LDADD = libdat/libdat2.la $(CRITERION_LIBS)

tests_libdat_test_registry_SOURCES = tests/libdat/test_registry.c
tests_libdat_test_registry_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_registry_LDADD = $(libdat_test_core)

tests_libdat_test_handles_SOURCES = tests/libdat/test_handles.c
tests_libdat_test_handles_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_handles_LDADD = $(libdat_test_core)

tests_libdat_test_ia_open_SOURCES = tests/libdat/test_ia_open.c
tests_libdat_test_ia_open_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_ia_open_LDADD = $(libdat_test_core)

tests_libdat_test_ia_SOURCES = tests/libdat/test_ia.c
tests_libdat_test_ia_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_ia_LDADD = $(libdat_test_core)

tests_libdat_test_dat_lock_SOURCES = tests/libdat/test_dat_lock.c
tests_libdat_test_dat_lock_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_dat_lock_LDADD = $(libdat_test_core)

tests_libdat_test_raw_syscall_SOURCES = tests/libdat/test_raw_syscall.c
tests_libdat_test_raw_syscall_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_raw_syscall_LDADD = $(libdat_test_core)

tests_libdat_test_peer_watch_SOURCES = tests/libdat/test_peer_watch.c
tests_libdat_test_peer_watch_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_peer_watch_LDADD = $(libdat_test_core)

tests_libdat_test_lmr_seen_SOURCES = tests/libdat/test_lmr_seen.c
tests_libdat_test_lmr_seen_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_lmr_seen_LDADD = $(libdat_test_core)

tests_libdat_test_shm_direct_SOURCES = tests/libdat/test_shm_direct.c
tests_libdat_test_shm_direct_CFLAGS = $(libdat_test_cflags)
tests_libdat_test_shm_direct_LDADD = $(libdat_test_core)

# A provider library of the suite's own, which libdat's registry loads the
# way it loads Debian's libdaplofa.so.2 (test_providers).  A module built
# for the tests only: -rpath makes libtool build it shared.
check_LTLIBRARIES += tests/libdat/fake_provider.la
tests_libdat_fake_provider_la_SOURCES = tests/libdat/fake_provider.c tests/libdat/fake_provider.h
tests_libdat_fake_provider_la_CFLAGS = $(AM_CFLAGS)
tests_libdat_fake_provider_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
# Its dat_registry_add_provider is the loading process's libdat2.so.2.
tests_libdat_fake_provider_la_LIBADD =

libdat_tests += tests/libdat/test_providers
tests_libdat_test_providers_SOURCES = tests/libdat/test_providers.c tests/libdat/fake_provider.h
tests_libdat_test_providers_CFLAGS = $(libdat_test_cflags) \
	-DFAKE_PROVIDER_PATH='"$(abs_builddir)/tests/libdat/.libs/fake_provider.so"'
# The shared libdat2.so.2, whose symbols the provider library binds to.
tests_libdat_test_providers_LDADD = tests/libdat/libdattest.la libdat/libdat2.la $(CRITERION_LIBS) \
	-lpthread
EXTRA_tests_libdat_test_providers_DEPENDENCIES = tests/libdat/fake_provider.la

# Every entry point taking a handle, on the provider's objects: the slot,
# the handle and each argument in its place (the provider's table of every
# slot, its instance data "all-slots").
libdat_tests += tests/libdat/test_provider_dispatch
tests_libdat_test_provider_dispatch_SOURCES = tests/libdat/test_provider_dispatch.c \
	tests/libdat/fake_provider.h
tests_libdat_test_provider_dispatch_CFLAGS = $(libdat_test_cflags) \
	-DFAKE_PROVIDER_PATH='"$(abs_builddir)/tests/libdat/.libs/fake_provider.so"'
tests_libdat_test_provider_dispatch_LDADD = tests/libdat/libdattest.la libdat/libdat2.la \
	$(CRITERION_LIBS) -lpthread
EXTRA_tests_libdat_test_provider_dispatch_DEPENDENCIES = tests/libdat/fake_provider.la
endif
