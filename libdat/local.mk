# libdat: libdat2.so.2, a drop-in for Debian's libdat2.so.2 (DAT 2.0 / uDAPL).
#
# Everything is compiled into the convenience library libdatcore.la, which
# the unit tests link directly (they reach the internals: handle table,
# dat.conf parser); libdat2.la is that plus the protocol codec, linked with a
# version script that exports exactly Debian's 74 DAT_2.0 symbols.  Library
# dependencies stay at libc + pthread (dlopen, for other providers' libraries,
# is in libc since glibc 2.34; configure adds -ldl where it is not).
noinst_LTLIBRARIES += libdat/libdatcore.la
libdat_libdatcore_la_SOURCES = \
	libdat/libdat.h \
	libdat/trace.c \
	libdat/handle.c \
	libdat/handle.h \
	libdat/handle_table.h \
	libdat/strerror.c \
	libdat/registry.c \
	libdat/registry.h \
	libdat/transport.c \
	libdat/transport.h \
	libdat/datd_backlog.c \
	libdat/datd_backlog.h \
	libdat/datd_conn.c \
	libdat/datd_conn.h \
	libdat/datd_object.c \
	libdat/datd_object.h \
	libdat/ia.c \
	libdat/ia.h \
	libdat/ia_query.c \
	libdat/evd.c \
	libdat/evd.h \
	libdat/pz.c \
	libdat/lmr.c \
	libdat/rmr.c \
	libdat/ep.c \
	libdat/cr.c \
	libdat/psp.c \
	libdat/rsp.c \
	libdat/cno.c \
	libdat/srq.c \
	libdat/extension.c
libdat_libdatcore_la_CFLAGS = $(AM_CFLAGS) -pthread
libdat_libdatcore_la_LIBADD = proto/libdatp.la

lib_LTLIBRARIES += libdat/libdat2.la
libdat_libdat2_la_SOURCES =
libdat_libdat2_la_LIBADD = libdat/libdatcore.la -lpthread
libdat_libdat2_la_LDFLAGS = $(AM_LDFLAGS) -version-info 2:0:0 -no-undefined \
	-Wl,--version-script=$(srcdir)/libdat/libdat2.map -Wl,-z,defs
EXTRA_libdat_libdat2_la_DEPENDENCIES = libdat/libdat2.map
# No sources of its own: link with the C compiler.
nodist_EXTRA_libdat_libdat2_la_SOURCES = libdat/dummy.c

pkgconfig_DATA += libdat/libdat2.pc
EXTRA_DIST += libdat/libdat2.map libdat/STATUS
libdat_libdatcore_la_SOURCES += libdat/evd_ring.c libdat/evd_wait.c libdat/evd_wait.h libdat/cno.h
libdat_libdatcore_la_SOURCES += libdat/pz.h libdat/lmr.h libdat/lmr_seen.h libdat/rmr.h libdat/mem_ctx.c libdat/mem_ctx.h libdat/mem_range.c libdat/mem_range.h libdat/mem_shm.c libdat/mem_shm.h
libdat_libdatcore_la_SOURCES += libdat/ep.h libdat/ep_attr.c libdat/ep_attr.h libdat/ep_modify.c libdat/srq.h
libdat_libdatcore_la_SOURCES += libdat/ep_events.c libdat/ep_events.h
libdat_libdatcore_la_SOURCES += libdat/mem_object.c libdat/mem_object.h
libdat_libdatcore_la_SOURCES += libdat/conn.c libdat/conn.h libdat/listener.c libdat/progress.c libdat/progress.h
libdat_libdatcore_la_SOURCES += libdat/shm_link.c libdat/shm_link.h libdat/shm_region.c libdat/shm_region.h \
	libdat/shm_keep.c libdat/shm_keep.h libdat/shm_direct.c libdat/shm_direct.h libdat/env_switch.h
# The data path (issue 5/6): channels and the DTO engine.
libdat_libdatcore_la_SOURCES += libdat/channel.c libdat/channel.h libdat/channel_shm.c libdat/channel_tcp.c libdat/raw_syscall.h \
	libdat/channel_closer.c libdat/channel_closer.h libdat/peer_watch.c libdat/peer_watch.h \
	libdat/dto.h libdat/dto_engine.h libdat/dto_wire.h libdat/dto_ep.c libdat/dto_ia.c libdat/dto_post.c \
	libdat/dto_queues.c libdat/dto_rx.c libdat/dto_tx.c libdat/extension_event.c libdat/dat_lock.c libdat/dat_lock.h libdat/spin_lock.h
libdat_libdatcore_la_SOURCES += libdat/provider_registry.c libdat/provider_registry.h \
	libdat/foreign.c libdat/foreign.h
