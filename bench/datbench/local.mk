# bench/datbench: benchmarks of libdat + datd over the public DAT API.
# Built with everything else (-Werror), never run by `make check`.
# See the comment at the top of each program.

noinst_PROGRAMS += bench/datbench/conn_rate
bench_datbench_conn_rate_SOURCES = bench/datbench/conn_rate.c
bench_datbench_conn_rate_LDADD = bench/common/libbench.la libdat/libdat2.la
