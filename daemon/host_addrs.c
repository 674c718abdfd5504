#include <config.h>

#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "daemon/host_addrs.h"
#include "daemon/netif.h"

struct HostAddrs {
        int fd;                         /* the rtnetlink subscription; -1: none */
        sd_event_source *source;        /* fd's, on the event loop */
        struct sockaddr_storage *addrs;
        size_t n;
        bool known;                     /* addrs is as the kernel last announced */
};

/* Reads every announcement waiting; any at all (or a lost one: ENOBUFS)
 * makes the addresses unknown.  Their content does not matter: the next
 * question reads all addresses again. */
static void drain(HostAddrs *h)
{
        char buf[4096];

        for (;;) {
                ssize_t n = recv(h->fd, buf, sizeof(buf), MSG_DONTWAIT);

                if (n > 0 || (n < 0 && errno == ENOBUFS))
                        h->known = false;
                else if (n >= 0 || errno != EINTR)
                        return;
        }
}

static int on_announcement(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        (void) s;
        (void) fd;
        (void) revents;
        drain(userdata);
        return 0;
}

/* Subscribes to the kernel's announcements of addresses; -errno when it
 * cannot, and the caller does without. */
static int subscribe(HostAddrs *h, sd_event *e)
{
        struct sockaddr_nl nl = {
                .nl_family = AF_NETLINK,
                .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR,
        };
        int r;

        h->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
        if (h->fd < 0)
                return -errno;
        if (bind(h->fd, (struct sockaddr *) &nl, sizeof(nl)) < 0)
                return -errno;
        r = sd_event_add_io(e, &h->source, h->fd, EPOLLIN, on_announcement, h);
        return r < 0 ? r : 0;
}

int host_addrs_new(sd_event *e, HostAddrs **ret)
{
        HostAddrs *h = calloc(1, sizeof(*h));

        if (!h)
                return -ENOMEM;
        h->fd = -1;
        if (subscribe(h, e) < 0) {
                h->source = sd_event_source_disable_unref(h->source);
                if (h->fd >= 0)
                        close(h->fd);
                h->fd = -1;
        }
        *ret = h;
        return 0;
}

HostAddrs *host_addrs_free(HostAddrs *h)
{
        if (!h)
                return NULL;
        sd_event_source_disable_unref(h->source);
        if (h->fd >= 0)
                close(h->fd);
        free(h->addrs);
        free(h);
        return NULL;
}

/* Reads the IPv4 and IPv6 addresses of every interface.  0 or -errno. */
static int reload(HostAddrs *h)
{
        struct ifaddrs *list;
        size_t n = 0, k = 0;
        struct sockaddr_storage *a;

        if (getifaddrs(&list) < 0)
                return -errno;
        for (struct ifaddrs *i = list; i; i = i->ifa_next)
                if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
                        n++;
        a = calloc(n ? n : 1, sizeof(*a));
        if (!a) {
                freeifaddrs(list);
                return -ENOMEM;
        }
        for (struct ifaddrs *i = list; i && k < n; i = i->ifa_next) {
                if (!i->ifa_addr)
                        continue;
                if (i->ifa_addr->sa_family == AF_INET)
                        memcpy(&a[k++], i->ifa_addr, sizeof(struct sockaddr_in));
                else if (i->ifa_addr->sa_family == AF_INET6)
                        memcpy(&a[k++], i->ifa_addr, sizeof(struct sockaddr_in6));
        }
        freeifaddrs(list);
        free(h->addrs);
        h->addrs = a;
        h->n = k;
        return 0;
}

bool host_addrs_holds(HostAddrs *h, const struct sockaddr *sa)
{
        if (h->fd >= 0)
                drain(h);
        if (!h->known) {
                if (reload(h) < 0)
                        return false;
                /* Without announcements nothing says when they change. */
                h->known = h->fd >= 0;
        }
        for (size_t i = 0; i < h->n; i++)
                if (sockaddr_same_host((const struct sockaddr *) &h->addrs[i], sa))
                        return true;
        return false;
}
