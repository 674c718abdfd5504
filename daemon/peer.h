/* Who is on the other end of a Unix socket, as the kernel saw it at connect
 * time: SO_PEERCRED and SO_PEERGROUPS cannot be faked by the peer and do not
 * change when it later drops privileges or passes the socket on. */
#ifndef DATD_DAEMON_PEER_H
#define DATD_DAEMON_PEER_H

#include <stddef.h>
#include <sys/types.h>

#include "daemon/utf8.h"

/* What the kernel keeps of a process name (TASK_COMM_LEN - 1). */
#define PEER_COMM_MAX 16

typedef struct Peer {
        pid_t pid;
        uid_t uid;
        gid_t gid;
        gid_t *groups;                  /* supplementary groups */
        size_t n_groups;
        /* /proc/PID/comm, "" if unreadable.  A process names itself with
         * any bytes: invalid UTF-8 is replaced by U+FFFD here, because
         * D-Bus carries nothing else. */
        char comm[UTF8_SANITIZED_SIZE(PEER_COMM_MAX)];
} Peer;

int peer_identify(int fd, Peer *ret);
void peer_done(Peer *p);

#endif
