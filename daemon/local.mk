# daemon: datd (the broker) and datctl (the administrator's tool).

# datd ------------------------------------------------------------------------
sbin_PROGRAMS += daemon/datd
daemon_datd_SOURCES = \
	daemon/datd.c \
	daemon/manager.c \
	daemon/client.c \
	daemon/object.c \
	daemon/conn.c \
	daemon/id_hash.c \
	daemon/channel_keep.c \
	daemon/cm.c \
	daemon/request.c \
	daemon/bus.c \
	daemon/config.c \
	daemon/ia.c \
	daemon/host_addrs.c \
	daemon/netif.c \
	daemon/peer.c \
	daemon/policy.c \
	daemon/ratelimit.c \
	daemon/runtime_dir.c \
	daemon/utf8.c \
	daemon/uid_budget.c \
	daemon/write_progress.c \
	daemon/log.c
daemon_datd_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS) $(JANSSON_CFLAGS)
daemon_datd_LDADD = proto/libdatp.la $(SYSTEMD_LIBS) $(JANSSON_LIBS)
if HAVE_VERBS
daemon_datd_SOURCES += daemon/ia-verbs.c
daemon_datd_CFLAGS += $(IBVERBS_CFLAGS)
daemon_datd_LDADD += $(IBVERBS_LIBS)
endif

noinst_HEADERS += \
	daemon/bus.h \
	daemon/client.h \
	daemon/config.h \
	daemon/conn.h \
	daemon/cm.h \
	daemon/ia.h \
	daemon/ia-verbs.h \
	daemon/id_hash.h \
	daemon/list.h \
	daemon/log.h \
	daemon/manager.h \
	daemon/host_addrs.h \
	daemon/netif.h \
	daemon/object.h \
	daemon/peer.h \
	daemon/policy.h \
	daemon/ratelimit.h \
	daemon/runtime_dir.h \
	daemon/write_progress.h \
	daemon/uid_budget.h \
	daemon/utf8.h

EXTRA_DIST += daemon/DBUS-API.md

# datctl ----------------------------------------------------------------------
bin_PROGRAMS += daemon/datctl
daemon_datctl_SOURCES = \
	daemon/datctl.c daemon/datctl.h \
	daemon/datctl-bus.c daemon/datctl-bus.h \
	daemon/datctl-format.c daemon/datctl-format.h \
	daemon/datctl-list.c daemon/datctl-list.h \
	daemon/datctl-status.c daemon/datctl-status.h \
	daemon/datctl-table.c daemon/datctl-table.h \
	daemon/utf8.c daemon/utf8.h
daemon_datctl_CPPFLAGS = $(AM_CPPFLAGS) -DDATCTL_SEPARATE_UNITS
daemon_datctl_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS) $(JANSSON_CFLAGS)
daemon_datctl_LDADD = $(SYSTEMD_LIBS) $(JANSSON_LIBS)

# The data channels datd hands out (issue 5/6): the shm region is laid out by
# libdat's own code, compiled into datd.
daemon_datd_SOURCES += daemon/channel.c libdat/shm_link.c libdat/shm_region.c
noinst_HEADERS += daemon/channel.h daemon/channel_keep.h

# datctl: JSON streamed for long lists (issue 7).
daemon_datctl_SOURCES += daemon/datctl-json.c daemon/datctl-json.h
