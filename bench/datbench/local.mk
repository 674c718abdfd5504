# bench/datbench: datbench, the benchmark of libdat + datd over the public DAT
# API (see bench/README.md and datbench.h).  Installed, so that users can
# measure their own deployment; never run by `make check`.

bin_PROGRAMS += bench/datbench/datbench
bench_datbench_datbench_SOURCES = \
	bench/datbench/datbench.c bench/datbench/datbench.h \
	bench/datbench/datbench-dto.c \
	bench/datbench/conn_rate.c \
	bench/datbench/scale.c
bench_datbench_datbench_LDADD = bench/common/libbench.la libdat/libdat2.la
