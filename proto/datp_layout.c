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

assert_size(struct datp_obj_desc, 88);
assert_offset(struct datp_obj_desc, kind, 0);
assert_offset(struct datp_obj_desc, state, 4);
assert_offset(struct datp_obj_desc, handle, 8);
assert_offset(struct datp_obj_desc, pz_handle, 16);
assert_offset(struct datp_obj_desc, length, 24);
assert_offset(struct datp_obj_desc, qlen, 32);
assert_offset(struct datp_obj_desc, max_recv_dtos, 36);
assert_offset(struct datp_obj_desc, max_request_dtos, 40);
assert_offset(struct datp_obj_desc, max_recv_iov, 44);
assert_offset(struct datp_obj_desc, max_request_iov, 48);
assert_offset(struct datp_obj_desc, max_message_size, 52);
assert_offset(struct datp_obj_desc, recv_evd_handle, 56);
assert_offset(struct datp_obj_desc, request_evd_handle, 64);
assert_offset(struct datp_obj_desc, connect_evd_handle, 72);
assert_offset(struct datp_obj_desc, srq_handle, 80);

assert_size(struct datp_obj_create, 112);
assert_offset(struct datp_obj_create, ia_id, 16);
assert_offset(struct datp_obj_create, reserved, 20);
assert_offset(struct datp_obj_create, desc, 24);

assert_size(struct datp_obj_create_reply, 32);
assert_offset(struct datp_obj_create_reply, status, 16);
assert_offset(struct datp_obj_create_reply, obj_id, 24);
assert_offset(struct datp_obj_create_reply, reserved, 28);

assert_size(struct datp_obj_update, 112);
assert_offset(struct datp_obj_update, ia_id, 16);
assert_offset(struct datp_obj_update, obj_id, 20);
assert_offset(struct datp_obj_update, desc, 24);

assert_size(struct datp_obj_update_reply, 24);
assert_offset(struct datp_obj_update_reply, status, 16);

assert_size(struct datp_obj_destroy, 32);
assert_offset(struct datp_obj_destroy, ia_id, 16);
assert_offset(struct datp_obj_destroy, obj_id, 20);
assert_offset(struct datp_obj_destroy, ep_handle, 24);

assert_size(struct datp_obj_destroy_reply, 24);
assert_offset(struct datp_obj_destroy_reply, status, 16);

/* Connections. */
assert_size(struct datp_listen, 56);
assert_offset(struct datp_listen, ia_id, 16);
assert_offset(struct datp_listen, kind, 20);
assert_offset(struct datp_listen, conn_qual, 24);
assert_offset(struct datp_listen, handle, 32);
assert_offset(struct datp_listen, ep_handle, 40);
assert_offset(struct datp_listen, psp_flags, 48);
assert_offset(struct datp_listen, reserved, 52);

assert_size(struct datp_listen_reply, 40);
assert_offset(struct datp_listen_reply, status, 16);
assert_offset(struct datp_listen_reply, listener_id, 24);
assert_offset(struct datp_listen_reply, conn_qual, 32);

assert_size(struct datp_unlisten, 24);
assert_offset(struct datp_unlisten, listener_id, 20);
assert_size(struct datp_unlisten_reply, 24);

assert_size(struct datp_connect, 456);
assert_offset(struct datp_connect, ia_id, 16);
assert_offset(struct datp_connect, flags, 20);
assert_offset(struct datp_connect, ep_handle, 24);
assert_offset(struct datp_connect, dup_of_conn_id, 32);
assert_offset(struct datp_connect, remote_address, 40);
assert_offset(struct datp_connect, remote_address_len, 168);
assert_offset(struct datp_connect, qos, 172);
assert_offset(struct datp_connect, remote_conn_qual, 176);
assert_offset(struct datp_connect, timeout_us, 184);
assert_offset(struct datp_connect, connect_flags, 192);
assert_offset(struct datp_connect, pd_len, 196);
assert_offset(struct datp_connect, private_data, 200);

assert_size(struct datp_connect_reply, 32);
assert_offset(struct datp_connect_reply, conn_id, 24);

assert_size(struct datp_cr_accept, 296);
assert_offset(struct datp_cr_accept, cr_id, 20);
assert_offset(struct datp_cr_accept, ep_handle, 24);
assert_offset(struct datp_cr_accept, pd_len, 32);
assert_offset(struct datp_cr_accept, private_data, 40);
assert_size(struct datp_cr_accept_reply, 32);
assert_offset(struct datp_cr_accept_reply, conn_id, 24);

assert_size(struct datp_cr_reject, 288);
assert_offset(struct datp_cr_reject, cr_id, 20);
assert_offset(struct datp_cr_reject, pd_len, 24);
assert_offset(struct datp_cr_reject, flags, 28);
assert_offset(struct datp_cr_reject, private_data, 32);
assert_size(struct datp_cr_reject_reply, 24);

assert_size(struct datp_cr_handoff, 32);
assert_offset(struct datp_cr_handoff, cr_id, 20);
assert_offset(struct datp_cr_handoff, conn_qual, 24);
assert_size(struct datp_cr_handoff_reply, 24);

assert_size(struct datp_disconnect, 32);
assert_offset(struct datp_disconnect, conn_id, 20);
assert_offset(struct datp_disconnect, flags, 24);
assert_size(struct datp_disconnect_reply, 24);

assert_size(struct datp_ev_conn_request, 440);
assert_offset(struct datp_ev_conn_request, ia_id, 16);
assert_offset(struct datp_ev_conn_request, listener_id, 20);
assert_offset(struct datp_ev_conn_request, cr_id, 24);
assert_offset(struct datp_ev_conn_request, pd_len, 28);
assert_offset(struct datp_ev_conn_request, conn_qual, 32);
assert_offset(struct datp_ev_conn_request, remote_port, 40);
assert_offset(struct datp_ev_conn_request, remote_address, 48);
assert_offset(struct datp_ev_conn_request, remote_address_len, 176);
assert_offset(struct datp_ev_conn_request, private_data, 184);

assert_size(struct datp_ev_conn, 296);
assert_offset(struct datp_ev_conn, conn_id, 20);
assert_offset(struct datp_ev_conn, ep_handle, 24);
assert_offset(struct datp_ev_conn, event, 32);
assert_offset(struct datp_ev_conn, pd_len, 36);
assert_offset(struct datp_ev_conn, private_data, 40);

assert_size(struct datp_ev_data_channel, 72);
assert_offset(struct datp_ev_data_channel, ia_id, 16);
assert_offset(struct datp_ev_data_channel, conn_id, 20);
assert_offset(struct datp_ev_data_channel, ep_handle, 24);
assert_offset(struct datp_ev_data_channel, kind, 32);
assert_offset(struct datp_ev_data_channel, nfds, 36);
assert_offset(struct datp_ev_data_channel, region_size, 40);
assert_offset(struct datp_ev_data_channel, ring_size, 48);
assert_offset(struct datp_ev_data_channel, side, 52);
assert_offset(struct datp_ev_data_channel, peer_pid, 56);
assert_offset(struct datp_ev_data_channel, peer_uid, 60);
assert_offset(struct datp_ev_data_channel, flags, 64);
assert_offset(struct datp_ev_data_channel, channel_id, 68);
assert_size(struct datp_channel_release, 24);
assert_offset(struct datp_channel_release, ia_id, 16);
assert_offset(struct datp_channel_release, channel_id, 20);
assert_size(struct datp_channel_release_reply, 24);
assert_size(struct datp_ev_channel_drop, 24);
assert_offset(struct datp_ev_channel_drop, ia_id, 16);
assert_offset(struct datp_ev_channel_drop, channel_id, 20);
assert_size(struct datp_ev_conn_kept, 320);
assert_offset(struct datp_ev_conn_kept, ia_id, 16);
assert_offset(struct datp_ev_conn_kept, conn_id, 20);
assert_offset(struct datp_ev_conn_kept, ep_handle, 24);
assert_offset(struct datp_ev_conn_kept, channel_id, 32);
assert_offset(struct datp_ev_conn_kept, side, 36);
assert_offset(struct datp_ev_conn_kept, region_size, 40);
assert_offset(struct datp_ev_conn_kept, ring_size, 48);
assert_offset(struct datp_ev_conn_kept, peer_pid, 52);
assert_offset(struct datp_ev_conn_kept, peer_uid, 56);
assert_offset(struct datp_ev_conn_kept, pd_len, 60);
assert_offset(struct datp_ev_conn_kept, private_data, 64);
_Static_assert(DATP_CHANNEL_MAX_FDS <= DATP_MAX_FDS, "a data channel fits datp_recv()'s buffer");

assert_size(struct datp_error, 192);
assert_offset(struct datp_error, status, 16);
assert_offset(struct datp_error, bad_type, 24);
assert_offset(struct datp_error, fatal, 26);
assert_offset(struct datp_error, code, 28);
assert_offset(struct datp_error, reason, 32);

/* Receive buffers are exactly one maximal packet. */
assert_size(union datp_message, DATP_MAX_MESSAGE);
