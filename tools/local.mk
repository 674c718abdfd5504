# datinfo: a libdat client that lists and queries IAs through the DAT API only.
bin_PROGRAMS += tools/datinfo
tools_datinfo_SOURCES = tools/datinfo.c
tools_datinfo_LDADD = libdat/libdat2.la
# datdemo: two processes exchange messages and RDMA through one connection,
# with the public DAT API only (scripts/demo runs it; man/datdemo.1).
bin_PROGRAMS += tools/datdemo
tools_datdemo_SOURCES = tools/datdemo.c
tools_datdemo_LDADD = libdat/libdat2.la
