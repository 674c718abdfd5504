/* Who is on the other end of a Unix socket, as the kernel saw it at connect
 * time: SO_PEERCRED and SO_PEERGROUPS cannot be faked by the peer and do not
 * change when it later drops privileges or passes the socket on. */
#ifndef DATD_DAEMON_PEER_H
#define DATD_DAEMON_PEER_H

#include <stddef.h>
#include <sys/types.h>

#define PEER_COMM_MAX 16

typedef struct Peer {
        pid_t pid;
        uid_t uid;
        gid_t gid;
        gid_t *groups;                  /* supplementary groups */
        size_t n_groups;
        char comm[PEER_COMM_MAX + 1];   /* /proc/PID/comm, "" if unreadable */
} Peer;

int peer_identify(int fd, Peer *ret);
void peer_done(Peer *p);

#endif
