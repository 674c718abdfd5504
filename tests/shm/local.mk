# tests/shm: the shm transport's data path on its own (issue 5): the link's
# two byte rings in shared memory (layout, hostile peers, streaming between
# processes, sleeping and waking on eventfd doorbells) and the sealed memfd
# they live in, and the channels an IA keeps between connections.  No datd.
if HAVE_CRITERION
shm_tests = \
	tests/shm/test_shm_keep \
	tests/shm/test_shm_link \
	tests/shm/test_shm_region
check_PROGRAMS += $(shm_tests)
TESTS += $(shm_tests)

shm_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
shm_test_ldadd = libdat/libdatcore.la proto/libdatp.la $(CRITERION_LIBS) -lpthread

tests_shm_test_shm_link_SOURCES = tests/shm/test_shm_link.c
tests_shm_test_shm_link_CFLAGS = $(shm_test_cflags)
tests_shm_test_shm_link_LDADD = $(shm_test_ldadd)

tests_shm_test_shm_keep_SOURCES = tests/shm/test_shm_keep.c
tests_shm_test_shm_keep_CFLAGS = $(shm_test_cflags)
tests_shm_test_shm_keep_LDADD = $(shm_test_ldadd)

tests_shm_test_shm_region_SOURCES = tests/shm/test_shm_region.c
tests_shm_test_shm_region_CFLAGS = $(shm_test_cflags)
tests_shm_test_shm_region_LDADD = $(shm_test_ldadd)
endif
