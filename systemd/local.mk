# systemd units and the D-Bus system policy for datd.
#
# datd.service needs the configured sbindir.  configure.ac only generates
# Makefile and libdat2.pc, so the unit is made here with sed; it depends on
# Makefile so that a re-configure with another prefix regenerates it.

systemdsystemunit_DATA = systemd/datd.service
dist_systemdsystemunit_DATA = systemd/datd.socket
dist_dbuspolicy_DATA = systemd/org.datd.Datd1.conf

EXTRA_DIST += systemd/datd.service.in
CLEANFILES += systemd/datd.service

systemd_edit = sed \
	-e 's|@sbindir[@]|$(sbindir)|g' \
	-e 's|@bindir[@]|$(bindir)|g' \
	-e 's|@sysconfdir[@]|$(sysconfdir)|g'

systemd/datd.service: $(srcdir)/systemd/datd.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && rm -f $@ $@.tmp && \
	$(systemd_edit) $(srcdir)/systemd/datd.service.in >$@.tmp && \
	if grep -n '@[a-z_]*@' $@.tmp; then \
		echo "$@: unsubstituted variable" >&2; rm -f $@.tmp; exit 1; \
	fi && \
	mv $@.tmp $@
