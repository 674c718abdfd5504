/* Shared Receive Queues (dat_srq_create(3DAT) and friends).
 *
 * An SRQ is a FIFO of posted Recv buffers (cookie + IOV, copied at post
 * time into storage allocated at create/resize, so posting allocates
 * nothing) on a PZ, shared by the EPs created on it with
 * dat_ep_create_with_srq (each holds a `users` reference, ep_dep_hold()).
 *
 * Every buffer posted to it is in one of three places until the consumer
 * has reaped its completion, and all three count against max_recv_dtos
 * (dat_srq_resize(3DAT), dat_srq_query(3DAT)'s outstanding_dto_count):
 *   available  on the SRQ, in posting order;
 *   taken      taken by one of its EPs for an arriving message, not completed;
 *   completed  completion generated on the EP's recv_evd, not yet reaped.
 * The data path moves buffers along with srq_buffer_take(),
 * srq_buffer_completed() and srq_buffer_reaped() (also the tests' hooks). */
#ifndef DATD_LIBDAT_SRQ_H
#define DATD_LIBDAT_SRQ_H

#include <pthread.h>
#include <stdint.h>

#include "libdat/handle.h"

struct ia;

/* One posted buffer: its segments are srq->iovs[slot * max_recv_iov ...]. */
struct srq_slot {
        DAT_DTO_COOKIE cookie;
        DAT_COUNT num_segments;
};

struct srq {
        struct dat_object obj;          /* parent: the IA it was created on */
        uint32_t datd_id;               /* datd's id of its DATP_OBJ_SRQ description */
        DAT_SRQ_STATE state;
        DAT_PZ_HANDLE pz;               /* users held */
        DAT_COUNT max_recv_iov;
        bool counted;                   /* in srq_exist()'s count */

        /* Everything below under lock: the data path runs on other threads. */
        pthread_mutex_t lock;
        DAT_COUNT max_recv_dtos;        /* slots in the ring */
        DAT_COUNT low_watermark;
        bool lw_armed;                  /* dat_srq_set_lw(3DAT): once per setting */
        unsigned lw_events;             /* low watermark events fired */
        struct srq_slot *slots;         /* ring of max_recv_dtos slots */
        DAT_LMR_TRIPLET *iovs;          /* max_recv_dtos * max_recv_iov segments */
        DAT_COUNT head;                 /* oldest available buffer */
        DAT_COUNT available;
        DAT_COUNT taken;
        DAT_COUNT completed;
};

/* The SRQ a handle names, or NULL. */
struct srq *srq_lookup(DAT_SRQ_HANDLE handle);

/* Whether any SRQ lives in this process: without one no EP has one, and
 * a receive completion needs no look at its EP's (dto_event_reaped, on
 * every dequeue). */
bool srq_exist(void);

/* The IA an SRQ was created on. */
struct ia *srq_ia(const struct srq *srq);

/* The data path: an EP takes the oldest available buffer for an arriving
 * message, copying out its cookie and segments (iov holds max_recv_iov).
 * Returns false when the SRQ is empty.  May fire the low watermark event. */
bool srq_buffer_take(struct srq *srq, DAT_DTO_COOKIE *cookie, DAT_COUNT *num_segments,
                     DAT_LMR_TRIPLET *iov);

/* A taken buffer's completion was generated on the EP's recv_evd (also a
 * flushed one). */
void srq_buffer_completed(struct srq *srq);

/* The consumer dequeued a completion of one of the SRQ's buffers. */
void srq_buffer_reaped(struct srq *srq);

/* A taken buffer no message was placed in goes back to the front of the
 * SRQ (its EP went away before the message arrived in full). */
void srq_buffer_return(struct srq *srq, DAT_DTO_COOKIE cookie, DAT_COUNT num_segments,
                       const DAT_LMR_TRIPLET *iov);

/* n taken buffers vanished with their EP (dat_ep_free(3DAT): its DTOs are
 * destroyed, no completion will come). */
void srq_buffers_dropped(struct srq *srq, DAT_COUNT n);

/* The low watermark events fired so far (tests; the trace says each). */
unsigned srq_low_watermark_events(struct srq *srq);

#endif
