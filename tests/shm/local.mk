# tests/shm: the shm transport's data path on its own (issue 5): the ring
# in shared memory (layout, hostile headers, streaming between threads and
# processes, sleeping and waking) and the sealed memfd it lives in.  No datd.
if HAVE_CRITERION
shm_tests = \
	tests/shm/test_shm_ring \
	tests/shm/test_shm_region \
	tests/shm/test_shm_stream
check_PROGRAMS += $(shm_tests)
TESTS += $(shm_tests)

shm_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
shm_test_ldadd = libdat/libdatcore.la proto/libdatp.la $(CRITERION_LIBS) -lpthread

tests_shm_test_shm_ring_SOURCES = tests/shm/test_shm_ring.c
tests_shm_test_shm_ring_CFLAGS = $(shm_test_cflags)
tests_shm_test_shm_ring_LDADD = $(shm_test_ldadd)

tests_shm_test_shm_region_SOURCES = tests/shm/test_shm_region.c
tests_shm_test_shm_region_CFLAGS = $(shm_test_cflags)
tests_shm_test_shm_region_LDADD = $(shm_test_ldadd)

tests_shm_test_shm_stream_SOURCES = tests/shm/test_shm_stream.c
tests_shm_test_shm_stream_CFLAGS = $(shm_test_cflags)
tests_shm_test_shm_stream_LDADD = $(shm_test_ldadd)
endif
