# datinfo: a libdat client that lists and queries IAs through the DAT API only.
bin_PROGRAMS += tools/datinfo
tools_datinfo_SOURCES = tools/datinfo.c
tools_datinfo_LDADD = libdat/libdat2.la
