# tests/dto: the DTO engine (issues 5 and 6) through the public DAT 2.0 API,
# between two processes.  Every test source is compiled three times, once per
# transport (tests/dto/dto_fixture.h): DTO_SHM, DTO_TCP_LOCAL and
# DTO_TCP_NETNS ("one test body, two transports"); the programs link the
# installed library's exports only (libdat2.la).
EXTRA_DIST += tests/dto/dto_fixture.h

if HAVE_CRITERION
check_LTLIBRARIES += tests/dto/libdtotest.la
tests_dto_libdtotest_la_SOURCES = tests/dto/dto_fixture.c tests/dto/dto_fixture.h
tests_dto_libdtotest_la_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
tests_dto_libdtotest_la_LIBADD = tests/libnetns.la tests/libharness.la $(CRITERION_LIBS) -lpthread

dto_test_ldadd = tests/dto/libdtotest.la libdat/libdat2.la tests/libnetns.la \
	tests/libharness.la $(CRITERION_LIBS) -lpthread
dto_shm_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread -DDTO_TRANSPORT=DTO_SHM
dto_tcp_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread -DDTO_TRANSPORT=DTO_TCP_LOCAL
dto_netns_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread -DDTO_TRANSPORT=DTO_TCP_NETNS

dto_tests =
# test_dto_send: send / receive, waiting and polling
dto_tests += tests/dto/test_dto_send_shm tests/dto/test_dto_send_tcp tests/dto/test_dto_send_netns
tests_dto_test_dto_send_shm_SOURCES = tests/dto/test_dto_send.c
tests_dto_test_dto_send_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_send_shm_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_send_tcp_SOURCES = tests/dto/test_dto_send.c
tests_dto_test_dto_send_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_send_tcp_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_send_netns_SOURCES = tests/dto/test_dto_send.c
tests_dto_test_dto_send_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_send_netns_LDADD = $(dto_test_ldadd)

# test_dto_rdma: RDMA Write / Read, RMR bind, request order
dto_tests += tests/dto/test_dto_rdma_shm tests/dto/test_dto_rdma_tcp tests/dto/test_dto_rdma_netns
tests_dto_test_dto_rdma_shm_SOURCES = tests/dto/test_dto_rdma.c
tests_dto_test_dto_rdma_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_rdma_shm_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_rdma_tcp_SOURCES = tests/dto/test_dto_rdma.c
tests_dto_test_dto_rdma_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_rdma_tcp_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_rdma_netns_SOURCES = tests/dto/test_dto_rdma.c
tests_dto_test_dto_rdma_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_rdma_netns_LDADD = $(dto_test_ldadd)

# test_dto_flags: completion flags, synchronous refusals
dto_tests += tests/dto/test_dto_flags_shm tests/dto/test_dto_flags_tcp tests/dto/test_dto_flags_netns
tests_dto_test_dto_flags_shm_SOURCES = tests/dto/test_dto_flags.c
tests_dto_test_dto_flags_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_flags_shm_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_flags_tcp_SOURCES = tests/dto/test_dto_flags.c
tests_dto_test_dto_flags_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_flags_tcp_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_flags_netns_SOURCES = tests/dto/test_dto_flags.c
tests_dto_test_dto_flags_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_flags_netns_LDADD = $(dto_test_ldadd)

# test_dto_srq: shared receive queues
dto_tests += tests/dto/test_dto_srq_shm tests/dto/test_dto_srq_tcp tests/dto/test_dto_srq_netns
tests_dto_test_dto_srq_shm_SOURCES = tests/dto/test_dto_srq.c
tests_dto_test_dto_srq_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_srq_shm_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_srq_tcp_SOURCES = tests/dto/test_dto_srq.c
tests_dto_test_dto_srq_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_srq_tcp_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_srq_netns_SOURCES = tests/dto/test_dto_srq.c
tests_dto_test_dto_srq_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_srq_netns_LDADD = $(dto_test_ldadd)

# ---- test_dto_errors / _teardown / _stress / _users (error completions,
# teardown, stress, different users): one engineer's block, keep it ----
EXTRA_DIST += tests/dto/dto_fault.h
check_LTLIBRARIES += tests/dto/libdtofault.la
tests_dto_libdtofault_la_SOURCES = tests/dto/dto_fault.c tests/dto/dto_fault.h
tests_dto_libdtofault_la_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS) -pthread
tests_dto_libdtofault_la_LIBADD = tests/dto/libdtotest.la

dto_fault_ldadd = tests/dto/libdtofault.la $(dto_test_ldadd)

# test_dto_errors: every error completion of libdat/dto.h, then broken + flushed
dto_tests += tests/dto/test_dto_errors_shm tests/dto/test_dto_errors_tcp \
	tests/dto/test_dto_errors_netns
tests_dto_test_dto_errors_shm_SOURCES = tests/dto/test_dto_errors.c
tests_dto_test_dto_errors_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_errors_shm_LDADD = $(dto_fault_ldadd)
tests_dto_test_dto_errors_tcp_SOURCES = tests/dto/test_dto_errors.c
tests_dto_test_dto_errors_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_errors_tcp_LDADD = $(dto_fault_ldadd)
tests_dto_test_dto_errors_netns_SOURCES = tests/dto/test_dto_errors.c
tests_dto_test_dto_errors_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_errors_netns_LDADD = $(dto_fault_ldadd)

# test_dto_teardown: disconnect, reset, free, peer death with DTOs outstanding
dto_tests += tests/dto/test_dto_teardown_shm tests/dto/test_dto_teardown_tcp \
	tests/dto/test_dto_teardown_netns
dto_teardown_ldadd = $(dto_fault_ldadd) $(JANSSON_LIBS)
tests_dto_test_dto_teardown_shm_SOURCES = tests/dto/test_dto_teardown.c
tests_dto_test_dto_teardown_shm_CFLAGS = $(dto_shm_cflags) $(JANSSON_CFLAGS)
tests_dto_test_dto_teardown_shm_LDADD = $(dto_teardown_ldadd)
tests_dto_test_dto_teardown_tcp_SOURCES = tests/dto/test_dto_teardown.c
tests_dto_test_dto_teardown_tcp_CFLAGS = $(dto_tcp_cflags) $(JANSSON_CFLAGS)
tests_dto_test_dto_teardown_tcp_LDADD = $(dto_teardown_ldadd)
tests_dto_test_dto_teardown_netns_SOURCES = tests/dto/test_dto_teardown.c
tests_dto_test_dto_teardown_netns_CFLAGS = $(dto_netns_cflags) $(JANSSON_CFLAGS)
tests_dto_test_dto_teardown_netns_LDADD = $(dto_teardown_ldadd)
# test_dto_stress: 8 EP pairs, 1,000,000 mixed requests, every completion once
dto_tests += tests/dto/test_dto_stress_shm tests/dto/test_dto_stress_tcp \
	tests/dto/test_dto_stress_netns
tests_dto_test_dto_stress_shm_SOURCES = tests/dto/test_dto_stress.c
tests_dto_test_dto_stress_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_stress_shm_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_stress_tcp_SOURCES = tests/dto/test_dto_stress.c
tests_dto_test_dto_stress_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_stress_tcp_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_stress_netns_SOURCES = tests/dto/test_dto_stress.c
tests_dto_test_dto_stress_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_stress_netns_LDADD = $(dto_test_ldadd)
# test_dto_users: two users (no cross-memory attach), and DATD_SHM_NO_CMA=1
dto_tests += tests/dto/test_dto_users_shm tests/dto/test_dto_users_tcp \
	tests/dto/test_dto_users_netns
tests_dto_test_dto_users_shm_SOURCES = tests/dto/test_dto_users.c
tests_dto_test_dto_users_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_users_shm_LDADD = $(dto_fault_ldadd)
tests_dto_test_dto_users_tcp_SOURCES = tests/dto/test_dto_users.c
tests_dto_test_dto_users_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_users_tcp_LDADD = $(dto_fault_ldadd)
tests_dto_test_dto_users_netns_SOURCES = tests/dto/test_dto_users.c
tests_dto_test_dto_users_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_users_netns_LDADD = $(dto_fault_ldadd)
# ---- end of the errors/teardown/stress/users block ----

# test_dto_freed_target: target memory freed or unbound while a payload
# to or from it moves (the rest neither lands nor is read there)
dto_tests += tests/dto/test_dto_freed_target_shm tests/dto/test_dto_freed_target_tcp \
	tests/dto/test_dto_freed_target_netns
tests_dto_test_dto_freed_target_shm_SOURCES = tests/dto/test_dto_freed_target.c
tests_dto_test_dto_freed_target_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_freed_target_shm_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_freed_target_tcp_SOURCES = tests/dto/test_dto_freed_target.c
tests_dto_test_dto_freed_target_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_freed_target_tcp_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_freed_target_netns_SOURCES = tests/dto/test_dto_freed_target.c
tests_dto_test_dto_freed_target_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_freed_target_netns_LDADD = $(dto_test_ldadd)

# test_dto_modify: dat_ep_modify on an EP with Receives posted (a new PZ)
dto_tests += tests/dto/test_dto_modify_shm tests/dto/test_dto_modify_tcp \
	tests/dto/test_dto_modify_netns
tests_dto_test_dto_modify_shm_SOURCES = tests/dto/test_dto_modify.c
tests_dto_test_dto_modify_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_modify_shm_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_modify_tcp_SOURCES = tests/dto/test_dto_modify.c
tests_dto_test_dto_modify_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_modify_tcp_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_modify_netns_SOURCES = tests/dto/test_dto_modify.c
tests_dto_test_dto_modify_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_modify_netns_LDADD = $(dto_test_ldadd)

# test_dto_watermark: the hard high watermark breaks the connection
dto_tests += tests/dto/test_dto_watermark_shm tests/dto/test_dto_watermark_tcp \
	tests/dto/test_dto_watermark_netns
tests_dto_test_dto_watermark_shm_SOURCES = tests/dto/test_dto_watermark.c
tests_dto_test_dto_watermark_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_watermark_shm_LDADD = $(dto_fault_ldadd)
tests_dto_test_dto_watermark_tcp_SOURCES = tests/dto/test_dto_watermark.c
tests_dto_test_dto_watermark_tcp_CFLAGS = $(dto_tcp_cflags)
tests_dto_test_dto_watermark_tcp_LDADD = $(dto_fault_ldadd)
tests_dto_test_dto_watermark_netns_SOURCES = tests/dto/test_dto_watermark.c
tests_dto_test_dto_watermark_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_watermark_netns_LDADD = $(dto_fault_ldadd)

# ---- other engineers' test programs: above this line ----
# Issue 6: the send and RDMA bodies again over tcp sockets with 16 KiB buffers
# (every frame in pieces: partial reads and writes, back-pressure).
dto_tcpsmall_cflags = $(dto_tcp_cflags) -DDTO_TCP_SOCKBUF=16384
dto_tests += tests/dto/test_dto_send_tcpsmall tests/dto/test_dto_rdma_tcpsmall
tests_dto_test_dto_send_tcpsmall_SOURCES = tests/dto/test_dto_send.c
tests_dto_test_dto_send_tcpsmall_CFLAGS = $(dto_tcpsmall_cflags)
tests_dto_test_dto_send_tcpsmall_LDADD = $(dto_test_ldadd)
tests_dto_test_dto_rdma_tcpsmall_SOURCES = tests/dto/test_dto_rdma.c
tests_dto_test_dto_rdma_tcpsmall_CFLAGS = $(dto_tcpsmall_cflags)
tests_dto_test_dto_rdma_tcpsmall_LDADD = $(dto_test_ldadd)

# The RDMA bodies again on shm with every buffer in shared memory libdat
# provides: RDMA Writes then go straight into the peer's memory
# (libdat/shm_direct.h).
dto_tests += tests/dto/test_dto_rdma_shmshared
tests_dto_test_dto_rdma_shmshared_SOURCES = tests/dto/test_dto_rdma.c
tests_dto_test_dto_rdma_shmshared_CFLAGS = $(dto_shm_cflags) -DDTO_SHARED_MEM
tests_dto_test_dto_rdma_shmshared_LDADD = $(dto_test_ldadd)
# test_dto_users_shmshared: the same between two users, who may not
# map each other's memory: every Write goes through the ring.
dto_tests += tests/dto/test_dto_users_shmshared
tests_dto_test_dto_users_shmshared_SOURCES = tests/dto/test_dto_users.c
tests_dto_test_dto_users_shmshared_CFLAGS = $(dto_shm_cflags) -DDTO_SHARED_MEM
tests_dto_test_dto_users_shmshared_LDADD = $(dto_fault_ldadd)
# test_dto_direct: what only direct Writes do (shm only)
dto_tests += tests/dto/test_dto_direct_shm
tests_dto_test_dto_direct_shm_SOURCES = tests/dto/test_dto_direct.c
tests_dto_test_dto_direct_shm_CFLAGS = $(dto_shm_cflags)
tests_dto_test_dto_direct_shm_LDADD = $(dto_test_ldadd)

# Issue 6: a link cut with DTOs outstanding (network namespaces only).
dto_tests += tests/dto/test_dto_link_netns
tests_dto_test_dto_link_netns_SOURCES = tests/dto/test_dto_link.c
tests_dto_test_dto_link_netns_CFLAGS = $(dto_netns_cflags)
tests_dto_test_dto_link_netns_LDADD = $(dto_fault_ldadd)

check_PROGRAMS += $(dto_tests)
TESTS += $(dto_tests)
endif

