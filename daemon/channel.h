/* The data channels datd hands to the two ends of a connection
 * (PROTOCOL.md, "EV_DATA_CHANNEL"): for shm, a sealed memfd laid out as
 * libdat/shm_link.h's two rings plus two doorbells; datd keeps the memfd
 * until both ends of the connection are gone.
 *
 * A doorbell is a pipe when both ends speak version 3, else a datagram
 * socketpair.  Either way each end's descriptor is its own open file, so
 * that neither end can change how the other's behaves (an eventfd would be
 * one file shared by both: the peer could clear O_NONBLOCK under the
 * sleeper).  Ringing a doorbell whose sleeper is gone must be no SIGPIPE:
 * a socket is rung with send(MSG_NOSIGNAL); a pipe's ringer also holds a
 * read end of it, its own open file (reopened through /proc/self/fd), so
 * the pipe never lacks a reader while it can be rung.  Pipes, because a
 * Unix socket in flight in a message makes every close of a Unix socket on
 * the host queue the kernel's collector of in-flight sockets: with four
 * such doorbells per connection that was a tenth of a connection's CPU
 * (in the kernel's worker and the wake-ups it costs). */
#ifndef DATD_DAEMON_CHANNEL_H
#define DATD_DAEMON_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/id_hash.h"
#include "daemon/list.h"
#include "daemon/uid_budget.h"

struct IaInstance;

/* What an IA instance does with a kept channel (channel_keep.h). */
enum {
        KEPT_IN_USE,                    /* its end may touch it */
        KEPT_RELEASED,                  /* it said CHANNEL_RELEASE: it keeps it, untouched */
        KEPT_GONE,                      /* the instance is gone, or was told to drop it */
};

/* One shm connection's region, shared by its two Conn ends. */
typedef struct ShmRegion ShmRegion;
struct ShmRegion {
        IdLink hlink;                   /* first: kept channels, ChannelKeeper's table
                                         * (hlink.id is the channel_id); else unused */
        unsigned refs;                  /* ends holding it, and the keeper while kept */
        int memfd;                      /* kept until the last end goes */
        int doorbell[2][2];             /* [side]: the socketpair or pipe end `side` sleeps on
                                         * ([0], its socket or the read end; [1] the peer's to
                                         * ring it with); closed once both ends have theirs */
        int guard[2];                   /* pipes: [side] a read end of side's pipe for the
                                         * peer to hold (never read); else -1 */
        bool pipes;                     /* the doorbells are pipes */
        bool sent;                      /* both ends have had their descriptors */
        size_t size;                    /* region_size */
        uint32_t ring_size;
        /* memfd, charged to each end's uid (once if the same): given back
         * when the region is freed, whichever client goes last. */
        UidCharge fd_charge[2];

        /* Kept channels (channel_keep.h); holder[] NULL otherwise. */
        struct IaInstance *holder[2];   /* [side]: the IA instance of that end */
        uint8_t hold[2];                /* [side]: KEPT_* */
        bool doomed;                    /* never again to be reused: dropped once released */
        bool spare;                     /* laid out afresh, waiting for a connection */
        LIST_FIELDS(ShmRegion, spare0); /* holder[0]->spare0 */
        LIST_FIELDS(ShmRegion, spare1); /* holder[1]->spare1 */
        /* While hold[side] is KEPT_RELEASED: holder[side]->released<side>. */
        LIST_FIELDS(ShmRegion, released0);
        LIST_FIELDS(ShmRegion, released1);
};

/* Whether r is a kept channel (channel_keep.h): one with a channel_id. */
static inline bool shm_region_kept(const ShmRegion *r)
{
        return r->hlink.id != 0;
}

/* Creates the memfd (sealed, shm_region_create_unmapped), lays out the two
 * rings (shm_link_init_fd, without mapping it), and makes the two doorbells:
 * pipes (and their guards) if pipes, else socketpairs.  refs is 2.  0, or
 * -errno (-EINVAL for a ring size shm_link does not allow). */
int shm_channel_new(uint32_t ring_size, bool pipes, ShmRegion **ret);

/* Closes the doorbells: both ends have been sent theirs (sent). */
void shm_channel_sent(ShmRegion *r);

/* One end is gone; the last one frees the region.  Returns NULL. */
ShmRegion *shm_channel_unref(ShmRegion *r);

/* A pidfd (close-on-exec) of the process on the other end of the Unix
 * socket sock, whose PID SO_PEERCRED said is pid: the kernel's own
 * (SO_PEERPIDFD, Linux 6.5: the process that connected, whatever became
 * of its PID since), else pidfd_open(pid); -errno when neither works
 * (ENOSYS before Linux 5.3). */
int channel_pidfd(int sock, pid_t pid);

#endif
