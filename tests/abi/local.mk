# ABI tests: include/dat2 against Debian's libdapl-dev headers (see
# tests/abi/test_abi.c).  The probes are compiled with configure's $(CC),
# never with the sanitizer flags: they only print sizes and values.
if HAVE_CRITERION
check_PROGRAMS += tests/abi/test_abi
TESTS += tests/abi/test_abi
tests_abi_test_abi_SOURCES = tests/abi/test_abi.c
tests_abi_test_abi_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS)
tests_abi_test_abi_LDADD = tests/libharness.la $(CRITERION_LIBS)
endif
EXTRA_DIST += tests/abi/abi_probe.py tests/abi/consumer.c
AM_TESTS_ENVIRONMENT += DATD_TEST_CC='$(CC)'; export DATD_TEST_CC;
