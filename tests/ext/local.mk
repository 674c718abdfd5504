# tests/ext: the DAT 2.0 InfiniBand extensions (issue 8: dat_extension_op's
# RDMA Write with immediate data, compare-and-swap, fetch-and-add, their
# DAT_IB_DTO_EVENTs, what dat_ia_query advertises) between two processes,
# on the DTO fixture (tests/dto/dto_fixture.h): one source, three programs,
# one per transport (shm, tcp on one host, tcp across network namespaces).
if HAVE_CRITERION
ext_tests = tests/ext/test_ext_shm tests/ext/test_ext_tcp tests/ext/test_ext_netns
tests_ext_test_ext_shm_SOURCES = tests/ext/test_ext.c
tests_ext_test_ext_shm_CFLAGS = $(dto_shm_cflags)
tests_ext_test_ext_shm_LDADD = $(dto_test_ldadd)
tests_ext_test_ext_tcp_SOURCES = tests/ext/test_ext.c
tests_ext_test_ext_tcp_CFLAGS = $(dto_tcp_cflags)
tests_ext_test_ext_tcp_LDADD = $(dto_test_ldadd)
tests_ext_test_ext_netns_SOURCES = tests/ext/test_ext.c
tests_ext_test_ext_netns_CFLAGS = $(dto_netns_cflags)
tests_ext_test_ext_netns_LDADD = $(dto_test_ldadd)
check_PROGRAMS += $(ext_tests)
TESTS += $(ext_tests)
endif
