/* A connection's data channel as the DTO engine sees it (dto.h): a
 * non-blocking, ordered, reliable byte stream to the peer process, with a
 * descriptor the IA's progress thread can sleep on.  Two kinds:
 * channel_shm.c (the rings of shm_link.h in a memfd datd made) and
 * channel_tcp.c (a TCP socket datd connected).  Built from the
 * descriptors of an EV_DATA_CHANNEL (proto/datp.h), owned by one EP's
 * data path, destroyed with channel_destroy. */
#ifndef DATD_LIBDAT_CHANNEL_H
#define DATD_LIBDAT_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "proto/datp.h"

struct channel;

struct channel_ops {
        const char *name;
        /* Writes what fits of iov: bytes written (0 when full), or -errno
         * (-EPIPE: the channel is gone). */
        ssize_t (*writev)(struct channel *ch, const struct iovec *iov, int iovcnt);
        /* A small write in place: where len contiguous bytes would go,
         * or NULL (use writev, which also says why); commit sends them.
         * Nothing else is written in between.  NULL ops: never in place
         * (TCP). */
        void *(*reserve)(struct channel *ch, size_t len);
        void (*commit)(struct channel *ch, size_t len);
        /* Reads what is there into iov: bytes read (0 when nothing is),
         * or -errno (-EPIPE: the peer closed and everything was read). */
        ssize_t (*readv)(struct channel *ch, const struct iovec *iov, int iovcnt);
        /* The stream's next bytes where they lie, lent without a copy (at
         * most max of them, and only whole units of the channel's own:
         * never a part of one), or NULL: read them.  Lent until consume,
         * which the borrower calls before it reads again; the peer may
         * still write them.  With NULL, *len is 0 when a read would
         * return 0 now (nothing there, the stream not ended), else not 0.
         * NULL op: the channel never lends (TCP). */
        const void *(*peek)(struct channel *ch, size_t max, size_t *len);
        /* With look, returns whether more bytes are there already (false:
         * a read now would likely find nothing); without, false, at no cost
         * of its own. */
        bool (*consume)(struct channel *ch, bool look);
        /* At least `bytes` more bytes of the stream are certain to come (the
         * rest of a payload whose header came), the engine says before and
         * after each read of a payload.  A channel may then wait for a
         * good part of them before it says it is readable or a read takes
         * any: fewer, larger reads.  NULL: it need not know (shm). */
        void (*expect)(struct channel *ch, uint64_t bytes);
        /* A cheap hint: bytes may be waiting to be read. */
        bool (*readable)(struct channel *ch);
        /* The progress thread is about to sleep on poll_fd: ask to be woken
         * for data if want_data (not while the data path takes nothing in:
         * data waiting is then no work), and for room if want_room.  False:
         * do not sleep, work is there. */
        bool (*arm)(struct channel *ch, bool want_data, bool want_room);
        /* Stop asking to be woken (the progress thread woke up). */
        void (*disarm)(struct channel *ch);
        /* poll_fd polled readable: reset it. */
        void (*woken)(struct channel *ch);
        /* poll_fd polled hung up (EPOLLHUP, EPOLLERR), which epoll reports
         * whatever it is asked: the kind says what that means, and the
         * caller stops watching poll_fd.  NULL: a read tells (TCP). */
        void (*hangup)(struct channel *ch);
        /* Events poll_fd must be watched for: for data when want_data
         * (not while the data path takes nothing in: a level-triggered
         * readable socket it does not read would wake the progress thread
         * without end), for room when want_room and the kernel says when
         * there is room. */
        unsigned (*poll_events)(struct channel *ch, bool want_data, bool want_room);
        /* on: from now on our writes and the end of our stream do not
         * wake the peer (it learns of them some other way); NULL: they
         * never need to (TCP: the kernel wakes it). */
        void (*quiet)(struct channel *ch, bool on);
        /* This end writes no more (the peer reads -EPIPE after the rest).
         * With fin_last and graceful_end (the end of the stream tells the
         * peer nothing: after a BYE the connection ends through datd; the
         * end of a stream without one is the failure the peer must see at
         * once), a TCP end says so only once the peer did, or when it is
         * destroyed (and the destruction of such an end waits for the
         * peer's, channel_closer.h): the end that sends the first FIN keeps
         * the connection in TIME_WAIT for a minute, which on the host that
         * connected holds one of its local ports for each connection (a
         * thousand connections a second across hosts used half the
         * ephemeral ports, after which every connect() crawled through
         * them and the rate fell sixfold); on the host that accepted it
         * holds nothing another connection needs. */
        void (*shutdown)(struct channel *ch);
        /* Whether closing now would end the connection before the peer
         * ended its side (the FIN shutdown held back); the close should
         * then wait for the peer's end (channel_closer.h).  NULL: never. */
        bool (*ends_after_peer)(struct channel *ch);
        void (*destroy)(struct channel *ch);
        /* Bytes written that the peer's end has not taken in yet (0: all
         * of them are there).  Non-NULL: acknowledgements cost the peer
         * enough (TCP: a segment its sending kernel takes, under the lock
         * its writes need) that a stream's may be held back
         * (DTO_F_ACK_LATER).  NULL: never (shm). */
        size_t (*unsent)(struct channel *ch);
};

struct channel {
        const struct channel_ops *ops;
        int poll_fd;                    /* what the progress thread sleeps on */
        pid_t peer_pid;                 /* the peer process on this host, else 0 */
        int peer_pidfd;                 /* readable once the peer process exited; -1 if none */
        bool same_host;                 /* cross-memory attach may work */
        bool lingers;                   /* kept open (shut down) a while after the connection */
        bool fin_last;                  /* the end of the active EP: see channel_ops.shutdown */
        bool graceful_end;              /* a BYE went or came (dto_wire.h): see channel_ops.shutdown */
        bool poll_by_fd;                /* readable() cannot tell: poll_fd's readiness does */
        /* shm: RDMA Writes straight into the peer's shared memory, and
         * ours exported to it (shm_direct.h); NULL: none. */
        struct shm_direct *direct;
};

struct shm_keep;

/* Builds the channel an EV_DATA_CHANNEL describes; takes ownership of fds
 * (closed on failure).  keep: the IA's kept shm channels (shm_keep.h),
 * where a DATP_CHANNEL_REUSE channel comes from and a DATP_CHANNEL_KEEP
 * one goes when it is destroyed.  0 and *out, or -errno (-EPROTO: a
 * descriptor or field is not what the kind needs, or a reused channel
 * that is not kept). */
int channel_create(const struct datp_ev_data_channel *ev, int *fds, unsigned nfds,
                   struct shm_keep *keep, struct channel **out);

/* Kind constructors (channel_shm.c, channel_tcp.c), same contract. */
int channel_shm_create(const struct datp_ev_data_channel *ev, int *fds, unsigned nfds,
                       struct shm_keep *keep, struct channel **out);
int channel_tcp_create(const struct datp_ev_data_channel *ev, int *fds, unsigned nfds,
                       struct channel **out);

/* Accepts NULL. */
void channel_destroy(struct channel *ch);

/* Closes the nfds descriptors of fds that are >= 0. */
void channel_close_fds(int *fds, unsigned nfds);

#endif
