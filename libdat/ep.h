/* Endpoints (dat_ep_create(3DAT) and friends).
 *
 * An EP lives in the client: its attributes, its state and the objects it
 * depends on (PZ, recv/request/connect EVDs, SRQ), each holding a `users`
 * reference.  They are kept as handles, not pointers: an abrupt
 * dat_ia_close() destroys children newest first, and dat_ep_modify() can
 * point an EP at a PZ or EVD created after it, so the EP finds them again
 * by lookup when it lets go.  datd holds a description of the EP
 * (DATP_OBJ_EP, kept true with datd_object_update on every state or
 * parameter change) for quotas and `datctl ep list`.
 *
 * The accessors below are the stable interface for the rest of libdat
 * (dat_rmr_bind needs the EP's PZ and state; the connection and data-path
 * issues drive the state and the DTO counters).  Fields that can change
 * after creation (state, PZ, EVDs, attributes) change under
 * dat_object_lock(); like every DAT implementation, libdat leaves it to the
 * consumer not to free an EP while another thread still uses it. */
#ifndef DATD_LIBDAT_EP_H
#define DATD_LIBDAT_EP_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "libdat/handle.h"
#include "libdat/lmr_seen.h"
#include "proto/datp.h"

struct ia;
struct dto_ep;

struct ep {
        struct dat_object obj;          /* parent: the IA it was created on */
        uint32_t datd_id;               /* datd's id of its DATP_OBJ_EP description; 0:
                                         * registered without waiting, named by handle */
        DAT_EP_STATE state;

        DAT_PZ_HANDLE pz;               /* DAT_HANDLE_NULL only for a provider-created
                                         * EP not configured yet (users held) */
        DAT_EVD_HANDLE recv_evd;        /* DAT_HANDLE_NULL for none (users held) */
        DAT_EVD_HANDLE request_evd;
        DAT_EVD_HANDLE connect_evd;
        DAT_SRQ_HANDLE srq;             /* dat_ep_create_with_srq, else DAT_HANDLE_NULL */
        DAT_EP_ATTR attr;               /* attr.srq_soft_hw is the soft high watermark */

        /* dat_ep_set_watermark(3DAT): the hard high watermark
         * (DAT_WATERMARK_INFINITE when unset), and whether each watermark
         * is armed (an event fires once per setting). */
        DAT_COUNT hard_high_watermark;
        bool soft_hw_armed;
        bool hard_hw_armed;
        /* dat_ep_set_watermark's calls so far: the thread that broke the
         * connection for a setting disarms it only if it is still the
         * one in force (ep_check_watermarks). */
        unsigned hw_setting;
        unsigned soft_hw_events;        /* events fired so far (ep_watermark_events) */
        unsigned hard_hw_events;

        /* Receive buffers at the EP not yet completed (posted to it, or
         * taken from its SRQ), and outstanding requests (sends, RDMA, RMR
         * binds).  Maintained by the data path; dat_ep_get_status reports
         * idle at 0, dat_ep_recv_query reports recv_outstanding. */
        DAT_COUNT recv_outstanding;
        DAT_COUNT request_outstanding;

        /* Set by the connection code: ports, and the peer's address
         * (dat_ep_query reports remote_ia_address_ptr NULL while
         * has_remote is false). */
        DAT_PORT_QUAL local_port;
        DAT_PORT_QUAL remote_port;
        struct sockaddr_storage remote_address;
        bool has_remote;

        /* The connection (conn.c), under dat_object_lock: datd's id of it
         * (0 before CONNECT / CR_ACCEPT answered), what dat_ep_dup_connect
         * reuses, and the peer's private data of the last connection event
         * (DAT_CONNECTION_EVENT_DATA points here: valid until the next). */
        uint32_t conn_id;
        /* The connection dat_ep_reset ended: its events may still be on
         * their way (datd is told of the reset without waiting) and must
         * not be taken for the next connection's before it has its id. */
        uint32_t ended_conn_id;
        /* dat_ep_connect or dat_cr_accept returned before datd answered
         * its CONNECT or CR_ACCEPT (conn.c, request_answered): until then
         * conn_id is unknown, and what needs it waits.  accept_cr_id: the
         * request accepted. */
        bool answer_due;
        uint32_t accept_cr_id;
        DAT_CONN_QUAL remote_conn_qual;
        DAT_CONNECT_FLAGS connect_flags;
        bool active;                    /* this side called dat_ep_connect */
        bool provider_made;             /* made by libdat for a DAT_PSP_PROVIDER_FLAG request */
        DAT_COUNT event_pd_len;
        unsigned char event_pd[DATP_PRIVATE_DATA_MAX];

        /* The data path (dto.h), made at the first DTO or connection. */
        struct dto_ep *dto;
        /* The LMRs the last posts found good (lmr_seen.h): requests', receives'. */
        struct lmr_seen seen_request;
        struct lmr_seen seen_recv;

        /* Pins (ep_pin_locked): threads that found the EP under
         * dat_object_lock and go on using it without the lock (the
         * progress thread dispatching datd's events); dat_ep_free waits
         * for them.  pin_thread: the last thread that pinned it. */
        unsigned pins;
        pthread_t pin_thread;
};

/* The EP a handle names, or NULL. */
struct ep *ep_lookup(DAT_EP_HANDLE handle);

/* Keeps an EP found under dat_object_lock (and not closing) alive after
 * the lock drops: dat_ep_free waits until ep_unpin.  Pins are held across
 * no consumer callback but the CNO notices of the data path's completions;
 * a dat_ep_free called from such a callback, on the pinning thread, is
 * refused (DAT_INVALID_STATE) instead of waiting for itself. */
void ep_pin_locked(struct ep *ep);
void ep_unpin(struct ep *ep);

/* The IA an EP was created on. */
struct ia *ep_ia(const struct ep *ep);

/* The EP's PZ handle. */
DAT_PZ_HANDLE ep_pz_handle(const struct ep *ep);

/* Whether pz, a live PZ (one an LMR or RMR holds), is the EP's: its
 * handle is the EP's PZ handle.  No handle lookup: this is on every post
 * and every RDMA served. */
bool ep_pz_is(const struct ep *ep, const struct dat_object *pz);

/* The EP's current state. */
DAT_EP_STATE ep_state(const struct ep *ep);

/* Moves the EP to a new state and tells datd (for the connection and
 * data-path code).  The local state changes regardless; returns what
 * datd_object_update returned. */
DAT_RETURN ep_set_state(struct ep *ep, DAT_EP_STATE state);

/* Tells datd the EP's current description without waiting for the reply:
 * for the progress thread and the connection calls, whose state changes
 * must not wait on datd (its reply is dropped). */
void ep_mirror_nowait(struct ep *ep);

/* The argument checks dat_ep_query and dat_ep_modify share: the EP handle
 * (DAT_INVALID_HANDLE_EP), mask bits outside DAT_EP_FIELD_ALL (ARG2), a
 * NULL ep_param with a non-zero mask (ARG3).  On DAT_SUCCESS *ep is the EP,
 * or NULL for an empty mask: nothing to do. */
DAT_RETURN ep_param_call(DAT_EP_HANDLE handle, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *param,
                         struct ep **ep);

/* Everything dat_ep_query(3DAT) reports.  Under dat_object_lock. */
void ep_fill_param(const struct ep *ep, DAT_EP_PARAM *param);

/* Sends datd the description of next: a copy of an EP with the changes
 * about to be made to it (dat_ep_modify, dat_ep_reset tell datd first, so
 * that a refusal changes nothing). */
DAT_RETURN ep_update_datd(const struct ep *next);

/* The DAT_INVALID_STATE error naming an EP state (DAT_INVALID_STATE_EP_*). */
DAT_RETURN ep_invalid_state(DAT_EP_STATE state);

/* After recv_outstanding grew or a watermark changed: fires the soft high
 * watermark's asynchronous event (once per dat_ep_set_watermark) and
 * breaks the EP's connection for the hard one (once per setting, on a
 * connection: ep.c's header) when they are exceeded.  No lock held. */
void ep_check_watermarks(struct ep *ep);

/* How many high watermark events an EP fired (soft, hard): for tests. */
void ep_watermark_events(const struct ep *ep, unsigned *soft, unsigned *hard);

/* Provider-created EPs (dat_psp_create(3DAT), DAT_PSP_PROVIDER_FLAG).
 * ep_create_provider makes one on ia for a connection request: the
 * provider's default attributes, no PZ, no EVDs, in
 * DAT_EP_STATE_UNCONFIGURED_TENTATIVE, registered with datd (its max_eps
 * quota applies: DAT_INSUFFICIENT_RESOURCES).  It makes a round trip to
 * datd, so it must not run on the progress thread.  dat_ep_modify moves
 * it to DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING once it has a PZ and a
 * connection EVD (ep_provider_configured). */
DAT_RETURN ep_create_provider(struct ia *ia, DAT_EP_HANDLE *ep_handle);

/* Provider EPs being made off the progress thread: begin before the
 * thread that makes one starts, end as its last act; a listener going away
 * drains them (waits until none is in flight), so that none outlives the
 * listener's IA or its CR EVD.  The drain is no cancellation point. */
void ep_provider_begin(void);
void ep_provider_end(void);
void ep_provider_drain(void);

/* Whether a provider-created EP has what a connection needs (a PZ and a
 * connection EVD).  Under dat_object_lock or on a private copy. */
bool ep_provider_configured(const struct ep *ep);

/* Frees a provider-created EP whose request was rejected (or never seen):
 * unregisters it from datd and releases what dat_ep_modify gave it. */
void ep_free_provider(DAT_EP_HANDLE ep_handle);

/* TEST HOOK, not exported from libdat2.so.2: puts the EP named by handle in
 * any state (connections come later; the unit tests link libdatcore and
 * need every state to walk dat_ep_modify's table).  DAT_INVALID_HANDLE for a
 * bad handle, DAT_INVALID_PARAMETER for a value that is no DAT_EP_STATE,
 * else what ep_set_state returned. */
DAT_RETURN ep_test_force_state(DAT_EP_HANDLE handle, DAT_EP_STATE state);

/* Tests only (libdatcore; never set in the shipped library): called by
 * ep_check_watermarks after its break of the EP's connection for the hard
 * high watermark, before it disarms the setting, with no lock held: what
 * another thread's dat_ep_set_watermark may do in that window. */
extern void (*ep_test_hard_break_hook)(struct ep *ep);

/* TEST HOOK: sets the EP's outstanding DTO counters (then checks the
 * watermarks, as the data path would). */
DAT_RETURN ep_test_set_outstanding(DAT_EP_HANDLE handle, DAT_COUNT recv, DAT_COUNT request);

#endif
