#include <config.h>

#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/netif.h"

static socklen_t sockaddr_size(const struct sockaddr *sa)
{
        switch (sa->sa_family) {
        case AF_INET: return sizeof(struct sockaddr_in);
        case AF_INET6: return sizeof(struct sockaddr_in6);
        default: return 0;
        }
}

/* How good an address is for peers to reach: IPv4, then global IPv6, then
 * link-local IPv6; 0 for anything else. */
static int address_rank(const struct sockaddr *sa)
{
        if (!sa)
                return 0;
        if (sa->sa_family == AF_INET)
                return 3;
        if (sa->sa_family == AF_INET6)
                return IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *) sa)->sin6_addr) ? 1 : 2;
        return 0;
}

static int ioctl_ifreq(const char *ifname, unsigned long request, struct ifreq *ifr)
{
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        memset(ifr, 0, sizeof(*ifr));
        strncpy(ifr->ifr_name, ifname, IF_NAMESIZE - 1);
        if (ioctl(fd, request, ifr) < 0)
                return -errno;
        return 0;
}

static uint32_t netif_mtu(const char *ifname)
{
        struct ifreq ifr;

        if (ioctl_ifreq(ifname, SIOCGIFMTU, &ifr) < 0 || ifr.ifr_mtu < 0)
                return 0;
        return (uint32_t) ifr.ifr_mtu;
}

bool netif_is_up(const char *ifname)
{
        struct ifreq ifr;

        if (!ifname || !ifname[0] || ioctl_ifreq(ifname, SIOCGIFFLAGS, &ifr) < 0)
                return false;
        return (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
}

static void netif_address_set(NetifAddress *ret, const char *ifname, const struct sockaddr *sa)
{
        memset(ret, 0, sizeof(*ret));
        strncpy(ret->ifname, ifname, IF_NAMESIZE - 1);
        ret->addr_len = sockaddr_size(sa);
        memcpy(&ret->addr, sa, ret->addr_len);
        ret->mtu = netif_mtu(ifname);
}

/* The interface "auto" stands for: lowest index first, so that the choice
 * does not depend on the order getifaddrs() lists families in. */
static const char *pick_auto(struct ifaddrs *list)
{
        const char *best = NULL, *loopback = NULL;
        unsigned best_index = 0;

        for (struct ifaddrs *i = list; i; i = i->ifa_next) {
                unsigned index;

                if (!(i->ifa_flags & IFF_UP) || address_rank(i->ifa_addr) == 0)
                        continue;
                if (i->ifa_flags & IFF_LOOPBACK) {
                        if (!loopback)
                                loopback = i->ifa_name;
                        continue;
                }
                index = if_nametoindex(i->ifa_name);
                if (!best || index < best_index) {
                        best = i->ifa_name;
                        best_index = index;
                }
        }
        return best ? best : loopback;
}

int netif_resolve_interface(const char *name, NetifAddress *ret)
{
        struct ifaddrs *list, *best = NULL;
        int r = -ENXIO;

        if (getifaddrs(&list) < 0)
                return -errno;
        if (strcmp(name, "auto") == 0)
                name = pick_auto(list);
        for (struct ifaddrs *i = list; name && i; i = i->ifa_next)
                if (strcmp(i->ifa_name, name) == 0 &&
                    address_rank(i->ifa_addr) > address_rank(best ? best->ifa_addr : NULL))
                        best = i;
        if (best) {
                netif_address_set(ret, best->ifa_name, best->ifa_addr);
                r = 0;
        }
        freeifaddrs(list);
        return r;
}

bool sockaddr_same_host(const struct sockaddr *a, const struct sockaddr *b)
{
        if (a->sa_family != b->sa_family)
                return false;
        if (a->sa_family == AF_INET)
                return ((const struct sockaddr_in *) a)->sin_addr.s_addr ==
                       ((const struct sockaddr_in *) b)->sin_addr.s_addr;
        if (a->sa_family == AF_INET6)
                return memcmp(&((const struct sockaddr_in6 *) a)->sin6_addr,
                              &((const struct sockaddr_in6 *) b)->sin6_addr,
                              sizeof(struct in6_addr)) == 0;
        return false;
}

void sockaddr_unmap_v4(struct sockaddr_storage *ss, socklen_t *len)
{
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) ss;
        struct sockaddr_in sin = { .sin_family = AF_INET };

        if (ss->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
                return;
        sin.sin_port = in6->sin6_port;
        memcpy(&sin.sin_addr, &in6->sin6_addr.s6_addr[12], sizeof(sin.sin_addr));
        memset(ss, 0, sizeof(*ss));
        memcpy(ss, &sin, sizeof(sin));
        *len = sizeof(sin);
}

bool sockaddr_is_unspecified(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET)
                return ((const struct sockaddr_in *) sa)->sin_addr.s_addr == htonl(INADDR_ANY);
        if (sa->sa_family == AF_INET6)
                return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *) sa)->sin6_addr);
        return false;
}

int netif_find_address(const struct sockaddr *sa, socklen_t len, NetifAddress *ret)
{
        struct ifaddrs *list;
        int r = -ENXIO;

        memset(ret, 0, sizeof(*ret));
        if (len > sizeof(ret->addr))
                return -EINVAL;
        memcpy(&ret->addr, sa, len);
        ret->addr_len = len;
        if (getifaddrs(&list) < 0)
                return -errno;
        for (struct ifaddrs *i = list; i; i = i->ifa_next)
                if (i->ifa_addr && sockaddr_same_host(i->ifa_addr, sa)) {
                        strncpy(ret->ifname, i->ifa_name, IF_NAMESIZE - 1);
                        ret->mtu = netif_mtu(i->ifa_name);
                        r = 0;
                        break;
                }
        freeifaddrs(list);
        return r;
}

void sockaddr_to_string(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
        buf[0] = '\0';
        if (len == 0 || getnameinfo(sa, len, buf, size, NULL, 0, NI_NUMERICHOST) != 0)
                buf[0] = '\0';
}
