# tests/proto: the codec (proto/libdatp.la) against PROTOCOL.md.
EXTRA_DIST += tests/proto/corpus

if HAVE_CRITERION
# Valid messages of every type: shared by the tests and the corpus generator.
check_LTLIBRARIES += tests/proto/libdatpsamples.la
tests_proto_libdatpsamples_la_SOURCES = tests/proto/datp_samples.c tests/proto/datp_samples.h
tests_proto_libdatpsamples_la_LIBADD = proto/libdatp.la

datp_tests = \
	tests/proto/test-datp-validate \
	tests/proto/test-datp-fields \
	tests/proto/test-datp-helpers \
	tests/proto/test-datp-socket \
	tests/proto/test-datp-random
check_PROGRAMS += $(datp_tests) tests/proto/datp-corpus-gen
TESTS += $(datp_tests)

datp_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS)
datp_test_ldadd = tests/proto/libdatpsamples.la $(CRITERION_LIBS)

tests_proto_test_datp_validate_SOURCES = tests/proto/test-datp-validate.c
tests_proto_test_datp_validate_CFLAGS = $(datp_test_cflags)
tests_proto_test_datp_validate_LDADD = $(datp_test_ldadd)
tests_proto_test_datp_fields_SOURCES = tests/proto/test-datp-fields.c
tests_proto_test_datp_fields_CFLAGS = $(datp_test_cflags)
tests_proto_test_datp_fields_LDADD = $(datp_test_ldadd)
tests_proto_test_datp_helpers_SOURCES = tests/proto/test-datp-helpers.c
tests_proto_test_datp_helpers_CFLAGS = $(datp_test_cflags)
tests_proto_test_datp_helpers_LDADD = $(datp_test_ldadd)
tests_proto_test_datp_socket_SOURCES = tests/proto/test-datp-socket.c
tests_proto_test_datp_socket_CFLAGS = $(datp_test_cflags) -pthread
tests_proto_test_datp_socket_LDADD = $(datp_test_ldadd) -lpthread
tests_proto_test_datp_random_SOURCES = tests/proto/test-datp-random.c
tests_proto_test_datp_random_CFLAGS = $(datp_test_cflags)
tests_proto_test_datp_random_LDADD = $(datp_test_ldadd)

tests_proto_datp_corpus_gen_SOURCES = tests/proto/datp-corpus-gen.c
tests_proto_datp_corpus_gen_LDADD = tests/proto/libdatpsamples.la
endif

if HAVE_CRITERION
check_PROGRAMS += tests/proto/test-datp-conn
TESTS += tests/proto/test-datp-conn
tests_proto_test_datp_conn_SOURCES = tests/proto/test-datp-conn.c
tests_proto_test_datp_conn_CFLAGS = $(datp_test_cflags)
tests_proto_test_datp_conn_LDADD = $(datp_test_ldadd)
endif
noinst_HEADERS += tests/proto/datp-expect.h

# EV_DATA_CHANNEL: the one message with descriptors (issue 5).
if HAVE_CRITERION
check_PROGRAMS += tests/proto/test-datp-channel
TESTS += tests/proto/test-datp-channel
tests_proto_test_datp_channel_SOURCES = tests/proto/test-datp-channel.c
tests_proto_test_datp_channel_CFLAGS = $(datp_test_cflags)
tests_proto_test_datp_channel_LDADD = $(datp_test_ldadd)
endif
