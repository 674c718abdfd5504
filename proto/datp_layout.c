/* The v1 wire layout, frozen at compile time.
 *
 * Every size and every offset a peer relies on is asserted here, and the
 * tables in proto/PROTOCOL.md carry the same numbers.  A layout change (or an
 * ABI where the structs lay out differently, e.g. a 32-bit client talking to
 * a 64-bit datd on one host) fails the build instead of corrupting the wire.
 * No implicit padding anywhere: every byte of a message is a named field, so
 * a message built from a zeroed struct never carries uninitialised bytes. */
#include "config.h"

#include <stddef.h>

#include "proto/datp.h"

#define assert_size(type, n) \
        _Static_assert(sizeof(type) == (n), "wire size of " #type " changed")
#define assert_offset(type, field, n) \
        _Static_assert(offsetof(type, field) == (n), "wire offset of " #type "." #field " changed")

/* The header is frozen in every version: a receiver must be able to read
 * magic, version, type and length of any packet. */
assert_size(struct datp_header, 16);
assert_offset(struct datp_header, magic, 0);
assert_offset(struct datp_header, version, 4);
assert_offset(struct datp_header, type, 6);
assert_offset(struct datp_header, length, 8);
assert_offset(struct datp_header, request_id, 12);

assert_size(struct datp_status, 8);
assert_offset(struct datp_status, dat_status, 0);
assert_offset(struct datp_status, sys_errno, 4);

assert_size(struct datp_hello, 24);
assert_offset(struct datp_hello, min_version, 16);
assert_offset(struct datp_hello, max_version, 18);
assert_offset(struct datp_hello, flags, 20);

assert_size(struct datp_hello_reply, 64);
assert_offset(struct datp_hello_reply, status, 16);
assert_offset(struct datp_hello_reply, version, 24);
assert_offset(struct datp_hello_reply, reserved, 26);
assert_offset(struct datp_hello_reply, max_message, 28);
assert_offset(struct datp_hello_reply, daemon_version, 32);

assert_size(struct sockaddr_storage, 128);
assert_size(struct datp_ia_info, 976);
assert_offset(struct datp_ia_info, name, 0);
assert_offset(struct datp_ia_info, transport, 256);
assert_offset(struct datp_ia_info, adapter_name, 272);
assert_offset(struct datp_ia_info, vendor_name, 528);
assert_offset(struct datp_ia_info, hw_version_major, 784);
assert_offset(struct datp_ia_info, hw_version_minor, 788);
assert_offset(struct datp_ia_info, fw_version_major, 792);
assert_offset(struct datp_ia_info, fw_version_minor, 796);
assert_offset(struct datp_ia_info, address, 800);
assert_offset(struct datp_ia_info, address_len, 928);
assert_offset(struct datp_ia_info, mtu, 932);
assert_offset(struct datp_ia_info, max_eps, 936);
assert_offset(struct datp_ia_info, max_evds, 940);
assert_offset(struct datp_ia_info, max_pzs, 944);
assert_offset(struct datp_ia_info, max_lmrs, 948);
assert_offset(struct datp_ia_info, max_rmrs, 952);
assert_offset(struct datp_ia_info, max_srqs, 956);
assert_offset(struct datp_ia_info, max_private_data, 960);
assert_offset(struct datp_ia_info, reserved, 964);
assert_offset(struct datp_ia_info, max_lmr_bytes, 968);

assert_size(struct datp_ia_open, 280);
assert_offset(struct datp_ia_open, ia_name, 16);
assert_offset(struct datp_ia_open, flags, 272);
assert_offset(struct datp_ia_open, reserved, 276);

assert_size(struct datp_ia_open_reply, 1008);
assert_offset(struct datp_ia_open_reply, status, 16);
assert_offset(struct datp_ia_open_reply, ia_id, 24);
assert_offset(struct datp_ia_open_reply, reserved, 28);
assert_offset(struct datp_ia_open_reply, info, 32);

assert_size(struct datp_ia_close, 24);
assert_offset(struct datp_ia_close, ia_id, 16);
assert_offset(struct datp_ia_close, flags, 20);

assert_size(struct datp_ia_close_reply, 24);
assert_offset(struct datp_ia_close_reply, status, 16);

assert_size(struct datp_ia_query, 24);
assert_offset(struct datp_ia_query, ia_id, 16);
assert_offset(struct datp_ia_query, reserved, 20);

assert_size(struct datp_ia_query_reply, 1000);
assert_offset(struct datp_ia_query_reply, status, 16);
assert_offset(struct datp_ia_query_reply, info, 24);

assert_size(struct datp_error, 192);
assert_offset(struct datp_error, status, 16);
assert_offset(struct datp_error, bad_type, 24);
assert_offset(struct datp_error, fatal, 26);
assert_offset(struct datp_error, code, 28);
assert_offset(struct datp_error, reason, 32);

/* Receive buffers are exactly one maximal packet. */
assert_size(union datp_message, DATP_MAX_MESSAGE);
