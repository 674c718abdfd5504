# proto: the datd control protocol.  libdatp.la is linked into datd, datctl
# and libdat; its symbols stay hidden (AM_CFLAGS has -fvisibility=hidden), so
# libdat2.so.2 never exports them.
noinst_LTLIBRARIES += proto/libdatp.la
proto_libdatp_la_SOURCES = \
	proto/datp.h \
	proto/datp_build.c \
	proto/datp_layout.c \
	proto/datp_socket.c \
	proto/datp_validate.c

EXTRA_DIST += proto/PROTOCOL.md proto/fuzz_datp_validate.c

# libFuzzer target: the codec is compiled into it (not linked from
# libdatp.la) so that the fuzzer's coverage instrumentation sees it.
if ENABLE_FUZZING
noinst_PROGRAMS += proto/fuzz_datp_validate
proto_fuzz_datp_validate_SOURCES = proto/fuzz_datp_validate.c $(proto_libdatp_la_SOURCES)
proto_fuzz_datp_validate_CFLAGS = $(WARN_CFLAGS) -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
proto_fuzz_datp_validate_LDFLAGS = -fsanitize=fuzzer,address,undefined
endif
