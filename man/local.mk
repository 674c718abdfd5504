# Man pages (man(7) macros), installed and distributed as written.
dist_man_MANS += \
	man/datd.8 \
	man/datctl.8 \
	man/datd.conf.5 \
	man/dat.conf.5 \
	man/libdat2.3
# datdemo(1): the example program tools/datdemo.
dist_man_MANS += man/datdemo.1
