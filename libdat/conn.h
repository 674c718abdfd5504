/* Connections through datd: listeners (PSP, RSP), connection requests (CR),
 * dat_ep_connect / dat_ep_dup_connect / dat_ep_disconnect, and what the
 * IA's progress thread (progress.h) does with datd's events.
 *
 * datd owns every listener and negotiates every connection (proto/datp.h,
 * "Connections"); libdat keeps the DAT objects, the EP state machine and the
 * events.  State changes made while dispatching datd's events are mirrored
 * to datd with ep_mirror_nowait: the thread that dispatches them (the
 * progress thread, or a waiter that took the socket over: datd_conn.h)
 * never waits on datd, since it is the one that reads datd's replies.
 *
 * Files: listener.c (the PSP/RSP object; psp.c and rsp.c hold their entry
 * points), cr.c (CR object, its entry points, EV_CONN_REQUEST), conn.c (the
 * EP entry points, EV_CONN, datd going away). */
#ifndef DATD_LIBDAT_CONN_H
#define DATD_LIBDAT_CONN_H

#include <stdint.h>
#include <sys/socket.h>

#include "libdat/handle.h"
#include "proto/datp.h"

struct ia;
struct ep;

/* A PSP or RSP (obj.ops says which); parent: the IA. */
struct listener {
        struct dat_object obj;
        uint32_t listener_id;           /* datd's; 0 until LISTEN answered */
        DAT_CONN_QUAL conn_qual;
        DAT_EVD_HANDLE evd;             /* the CR EVD (users held) */
        DAT_PSP_FLAGS psp_flags;        /* PSP */
        DAT_EP_HANDLE ep;               /* RSP: its EP (users held), else NULL */
};

/* A pending Connection Request; parent: the IA.  Made by the progress
 * thread, destroyed by dat_cr_accept / dat_cr_reject / dat_cr_handoff. */
struct cr {
        struct dat_object obj;
        uint32_t cr_id;                 /* datd's */
        DAT_HANDLE sp;                  /* the PSP or RSP it arrived on */
        DAT_EP_HANDLE ep;               /* RSP: the listener's EP, else NULL */
        DAT_CONN_QUAL conn_qual;
        DAT_PORT_QUAL remote_port;
        struct sockaddr_storage remote_address;
        DAT_COUNT pd_len;
        unsigned char pd[DATP_PRIVATE_DATA_MAX];
};

/* listener.c */
struct listener *psp_lookup(DAT_PSP_HANDLE handle);
struct listener *rsp_lookup(DAT_RSP_HANDLE handle);

/* Creates a listener of kind (DATP_LISTENER_*) on ia: checks the EVD (a CR
 * EVD of the IA, else DAT_INVALID_HANDLE_EVD_CR), sends LISTEN, returns the
 * handle.  For an RSP, ep is the EP (held, moved to RESERVED). */
DAT_RETURN listener_create(DAT_IA_HANDLE ia_handle, uint32_t kind, DAT_CONN_QUAL conn_qual,
                           DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS psp_flags,
                           DAT_EP_HANDLE ep_handle, struct listener **out);

/* dat_psp_free / dat_rsp_free: UNLISTEN, then releases. */
DAT_RETURN listener_free(DAT_HANDLE handle, DAT_HANDLE_TYPE type);

/* The listener datd calls listener_id on ia, under dat_object_lock. */
struct listener *listener_find_locked(struct ia *ia, uint32_t listener_id);

/* cr.c: EV_CONN_REQUEST, by the socket's reader (datd_conn.h): the
 * progress thread, or a waiter that took the socket over. */
void cr_dispatch(struct ia *ia, const struct datp_ev_conn_request *ev);

/* conn.c: EV_CONN, by the socket's reader, as EV_CONN_REQUEST. */
void conn_dispatch(struct ia *ia, const struct datp_ev_conn *ev);

/* conn.c: datd went away (progress thread): every EP of ia with a
 * connection or one being set up goes DISCONNECTED with
 * DAT_CONNECTION_EVENT_BROKEN, and the IA's async EVD gets
 * DAT_ASYNC_ERROR_IA_CATASTROPHIC. */
void conn_ia_broken(struct ia *ia);

/* conn.c: for the data path (dto.h), from any thread: it failed (the EP
 * goes Disconnected with DAT_CONNECTION_EVENT_BROKEN, datd is told), or a
 * graceful dat_ep_disconnect that waited for the requests may finish. */
void conn_ep_data_failed(struct ep *ep);
void conn_finish_disconnect(struct ep *ep);

/* conn.c: datd's answer (a datd_later_fn's ret and reply) to the CR_ACCEPT
 * of the EP of handle (ep->answer_due): the connection's id, or a refusal
 * (the EP goes Disconnected with DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR).
 * Returns whether it was refused, with the request's id and IA for the
 * caller to reject the request there; false when the EP is gone. */
bool conn_accept_answered(DAT_EP_HANDLE handle, DAT_RETURN ret, const union datp_message *reply,
                          uint32_t *cr_id, struct ia **ia);

/* conn.c: for dat_ep_free: aborts the EP's connection (abrupt disconnect)
 * if it has one or one is being set up; no event. */
void conn_ep_abort(struct ep *ep);

/* Tests only (libdatcore; never set in the shipped library): called by the
 * socket's reader while it dispatches a disconnection, with the EP found
 * and pinned, before its data path stops. */
extern void (*conn_test_stop_hook)(void);

/* conn.c: the private data checks every call shares: size in
 * [0, the IA's max_private_data] (else arg size_arg), a pointer when size
 * > 0 (else arg size_arg + 1). */
DAT_RETURN conn_check_private_data(const struct ia *ia, DAT_COUNT size, const void *data,
                                   int size_arg);

#endif
