/* The data channels datd hands to the two ends of a connection
 * (PROTOCOL.md, "EV_DATA_CHANNEL"): for shm, a sealed memfd laid out as
 * libdat/shm_link.h's two rings plus two doorbells; datd keeps the memfd
 * until both ends of the connection are gone.  A doorbell is a datagram
 * socketpair: one socket goes only to the end that sleeps on it, the other
 * only to the peer, so that neither end can change how the other's
 * descriptor behaves (an eventfd would be one file shared by both: the
 * peer could clear O_NONBLOCK under the sleeper), and ringing a doorbell
 * whose sleeper is gone is no SIGPIPE (send with MSG_NOSIGNAL). */
#ifndef DATD_DAEMON_CHANNEL_H
#define DATD_DAEMON_CHANNEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One shm connection's region, shared by its two Conn ends. */
typedef struct ShmRegion {
        unsigned refs;                  /* ends holding it */
        int memfd;                      /* kept until the last end goes */
        int doorbell[2][2];             /* [side]: the socketpair end `side` sleeps on ([0],
                                         * its socket; [1] the peer's to ring it with);
                                         * closed once both ends have theirs */
        size_t size;                    /* region_size */
        uint32_t ring_size;
} ShmRegion;

/* Creates the memfd (sealed, shm_region_create_unmapped), lays out the two
 * rings (shm_link_init_fd, without mapping it), and makes the two doorbells.  refs is 2.
 * 0, or -errno (-EINVAL for a ring size shm_link does not allow). */
int shm_channel_new(uint32_t ring_size, ShmRegion **ret);

/* Closes the doorbells: both ends have been sent theirs. */
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
