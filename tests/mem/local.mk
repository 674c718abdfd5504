# tests/mem: PZs, LMRs and RMRs.  test_mem_units needs no datd (the context
# table, the address space checks, cookie-named shared memory); the others
# run the entry points against a real datd per test (tests/harness.h).  All
# link libdatcore to reach internals (lmr_find_by_context, rmr_bind_*).
EXTRA_DIST += tests/mem/mem_test.h

if HAVE_CRITERION
mem_tests = \
	tests/mem/test_mem_units \
	tests/mem/test_pz \
	tests/mem/test_lmr \
	tests/mem/test_rmr
check_PROGRAMS += $(mem_tests)
TESTS += $(mem_tests)

mem_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
mem_test_ldadd = libdat/libdatcore.la proto/libdatp.la tests/libharness.la $(CRITERION_LIBS) -lpthread

tests_mem_test_mem_units_SOURCES = tests/mem/test_mem_units.c tests/mem/mem_test.c
tests_mem_test_mem_units_CFLAGS = $(mem_test_cflags)
tests_mem_test_mem_units_LDADD = $(mem_test_ldadd)

tests_mem_test_pz_SOURCES = tests/mem/test_pz.c tests/mem/mem_test.c
tests_mem_test_pz_CFLAGS = $(mem_test_cflags)
tests_mem_test_pz_LDADD = $(mem_test_ldadd)

tests_mem_test_lmr_SOURCES = tests/mem/test_lmr.c tests/mem/mem_test.c
tests_mem_test_lmr_CFLAGS = $(mem_test_cflags)
tests_mem_test_lmr_LDADD = $(mem_test_ldadd)

tests_mem_test_rmr_SOURCES = tests/mem/test_rmr.c tests/mem/mem_test.c
tests_mem_test_rmr_CFLAGS = $(mem_test_cflags)
tests_mem_test_rmr_LDADD = $(mem_test_ldadd)
endif
