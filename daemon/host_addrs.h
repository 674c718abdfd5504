/* This host's addresses, as a connect needs them to tell an address of
 * this host (a same-host connection) from another host's: read once with
 * getifaddrs() and kept until the kernel announces that an address came
 * or went (an rtnetlink subscription).  getifaddrs() costs 25-35 us here,
 * and every connect to another host asked it.  Owned by the Manager. */
#ifndef DATD_DAEMON_HOST_ADDRS_H
#define DATD_DAEMON_HOST_ADDRS_H

#include <stdbool.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

typedef struct HostAddrs HostAddrs;

/* The addresses of this host's network namespace.  The subscription is
 * watched on e, so that a change is seen while datd waits; without one
 * (the kernel refused the socket) every question reads the addresses
 * afresh, as before there was a cache.  0 or -errno (-ENOMEM). */
int host_addrs_new(sd_event *e, HostAddrs **ret);

/* Accepts NULL; returns NULL. */
HostAddrs *host_addrs_free(HostAddrs *h);

/* Whether an interface of this host holds sa's IPv4 or IPv6 address
 * (ports and scopes aside), as of the last change the kernel announced:
 * announcements not yet dispatched by the event loop are read first.
 * False when the addresses cannot be read. */
bool host_addrs_holds(HostAddrs *h, const struct sockaddr *sa);

#endif
