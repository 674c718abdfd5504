/* Network interfaces as the tcp (and verbs) IAs see them: which address an
 * interface offers, which interface holds an address, its MTU and state. */
#ifndef DATD_DAEMON_NETIF_H
#define DATD_DAEMON_NETIF_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct NetifAddress {
        char ifname[IF_NAMESIZE];       /* "" when no interface holds the address */
        struct sockaddr_storage addr;
        socklen_t addr_len;
        uint32_t mtu;                   /* 0 when unknown */
} NetifAddress;

/* The address of interface name: its first IPv4 address, else its first
 * global IPv6 address, else a link-local one.  name "auto" picks the up,
 * non-loopback interface with the lowest index that has an address, else the
 * loopback.  -ENXIO if there is no such interface or it has no address. */
int netif_resolve_interface(const char *name, NetifAddress *ret);

/* Which interface holds the address sa; ret->ifname stays "" (and the call
 * returns -ENXIO) when none does, with the address copied either way. */
int netif_find_address(const struct sockaddr *sa, socklen_t len, NetifAddress *ret);

/* Administratively up and with carrier, right now. */
bool netif_is_up(const char *ifname);

/* Same IPv4 or IPv6 address (ports and scopes aside); false for other families. */
bool sockaddr_same_host(const struct sockaddr *a, const struct sockaddr *b);

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) made the IPv4 address it
 * stands for, port kept; *len follows.  Any other address is left as is.
 * connect(2) on a dual-stack socket reaches the same host either way, and
 * an IA's or a host's address is kept in its IPv4 form. */
void sockaddr_unmap_v4(struct sockaddr_storage *ss, socklen_t *len);

/* 0.0.0.0 or ::, which connect(2) takes for this host. */
bool sockaddr_is_unspecified(const struct sockaddr *sa);

/* Room for sockaddr_to_string(): an IPv6 address with a scope. */
#define SOCKADDR_STRING_MAX (INET6_ADDRSTRLEN + IF_NAMESIZE + 2)

/* Numeric form of an address ("192.0.2.7", "fe80::1%eth0"), "" for none. */
void sockaddr_to_string(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);

#endif
