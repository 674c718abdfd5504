# Default configuration files.
#
# dat.conf is the DAT registry read by libdat (dat.conf(5)); datd.conf is datd's
# own configuration (datd.conf(5)), in a directory of its own.

sysconf_DATA = etc/dat.conf
datdconfdir = $(sysconfdir)/datd
datdconf_DATA = etc/datd.conf

EXTRA_DIST += etc/dat.conf etc/datd.conf
