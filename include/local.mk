# The public DAT 2.0 headers, installed as <dat2/...> like libdapl-dev's.
datheadersdir = $(includedir)/dat2
datheaders_HEADERS = \
	include/dat2/dat.h \
	include/dat2/dat_error.h \
	include/dat2/dat_ib_extensions.h \
	include/dat2/dat_platform_specific.h \
	include/dat2/dat_redirection.h \
	include/dat2/dat_registry.h \
	include/dat2/dat_vendor_specific.h \
	include/dat2/udat.h \
	include/dat2/udat_config.h \
	include/dat2/udat_redirection.h \
	include/dat2/udat_vendor_specific.h
