# bench: the floors the datd transports are measured against, and the script
# that runs them beside the peers (libfabric, UCX) and writes bench/RESULTS.md.
# The programs are built with everything else so that -Werror keeps them
# honest, but nothing runs them in `make check`: benchmarks assert nothing.
# See bench/README.md.

noinst_LTLIBRARIES += bench/common/libbench.la
bench_common_libbench_la_SOURCES = \
	bench/common/clock.c bench/common/clock.h \
	bench/common/stats.c bench/common/stats.h \
	bench/common/proc.c bench/common/proc.h \
	bench/common/sock.c bench/common/sock.h

BENCH_FLOORS = \
	bench/floor/shm-pingpong \
	bench/floor/shm-stream \
	bench/floor/copy-bw \
	bench/floor/sock-pingpong \
	bench/floor/sock-stream \
	bench/floor/conn-rate
noinst_PROGRAMS += $(BENCH_FLOORS)

bench_floor_shm_pingpong_SOURCES = bench/floor/shm-pingpong.c
bench_floor_shm_pingpong_LDADD = bench/common/libbench.la
bench_floor_shm_stream_SOURCES = bench/floor/shm-stream.c
bench_floor_shm_stream_LDADD = bench/common/libbench.la
bench_floor_copy_bw_SOURCES = bench/floor/copy-bw.c
bench_floor_copy_bw_LDADD = bench/common/libbench.la
bench_floor_sock_pingpong_SOURCES = bench/floor/sock-pingpong.c
bench_floor_sock_pingpong_LDADD = bench/common/libbench.la
bench_floor_sock_stream_SOURCES = bench/floor/sock-stream.c
bench_floor_sock_stream_LDADD = bench/common/libbench.la
bench_floor_conn_rate_SOURCES = bench/floor/conn-rate.c
bench_floor_conn_rate_CFLAGS = $(AM_CFLAGS) -pthread
bench_floor_conn_rate_LDADD = bench/common/libbench.la -lpthread

# `make bench-floors` builds only these (run-peers compiles them itself, so
# that it works while the rest of the tree is mid-change).
bench-floors: $(BENCH_FLOORS)
.PHONY: bench-floors

EXTRA_DIST += bench/README.md bench/run-peers bench/results.py bench/count-instructions
include bench/datbench/local.mk

# The shm link (libdat/shm_link.h) measured like the floors above (issue 5).
noinst_PROGRAMS += bench/floor/shm-link-pingpong bench/floor/shm-link-stream
bench_floor_shm_link_pingpong_SOURCES = bench/floor/shm-link-pingpong.c
bench_floor_shm_link_pingpong_LDADD = bench/common/libbench.la libdat/libdatcore.la proto/libdatp.la -lpthread
bench_floor_shm_link_stream_SOURCES = bench/floor/shm-link-stream.c
bench_floor_shm_link_stream_LDADD = bench/common/libbench.la libdat/libdatcore.la proto/libdatp.la -lpthread
