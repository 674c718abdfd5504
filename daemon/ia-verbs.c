#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/ia-verbs.h"
#include "daemon/log.h"
#include "daemon/netif.h"

/* The network interface that carries the port's IP traffic (RoCE: the GID's
 * netdev; InfiniBand: the IPoIB interface), whose address is the IA's. */
static bool verbs_port_netdev(const char *device, uint32_t port, char *ifname, size_t size)
{
        char path[256];
        FILE *f;
        DIR *d;
        bool found = false;

        snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/gid_attrs/ndevs/0",
                 device, port);
        f = fopen(path, "re");
        if (f) {
                found = fgets(ifname, (int) size, f) != NULL;
                fclose(f);
                ifname[strcspn(ifname, "\n")] = '\0';
                if (found && ifname[0])
                        return true;
        }
        snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/net", device);
        d = opendir(path);
        if (!d)
                return false;
        for (struct dirent *de; !found && (de = readdir(d));) {
                size_t len = strlen(de->d_name);

                if (de->d_name[0] != '.' && len < size) {
                        memcpy(ifname, de->d_name, len + 1);
                        found = true;
                }
        }
        closedir(d);
        return found;
}

static int verbs_fill(Ia *ia, struct ibv_context *ctx, const struct ibv_device_attr *attr,
                      uint32_t port)
{
        const char *device = ibv_get_device_name(ctx->device);
        struct ibv_port_attr pa;
        char ifname[IF_NAMESIZE + 1];
        NetifAddress a;
        unsigned fw_major = 0, fw_minor = 0;

        if (port == 0 || port > attr->phys_port_cnt)
                return -ENODEV;
        if (ibv_query_port(ctx, (uint8_t) port, &pa) != 0)
                return -errno;
        snprintf(ia->adapter_name, sizeof(ia->adapter_name), "%s", device);
        snprintf(ia->vendor_name, sizeof(ia->vendor_name), "0x%04x", attr->vendor_id);
        sscanf(attr->fw_ver, "%u.%u", &fw_major, &fw_minor);
        ia->hw_version_major = attr->hw_ver;
        ia->fw_version_major = fw_major;
        ia->fw_version_minor = fw_minor;
        ia->up = pa.state == IBV_PORT_ACTIVE;
        /* enum ibv_mtu: 1 = 256 bytes ... 5 = 4096 bytes */
        ia->mtu = pa.active_mtu >= IBV_MTU_256 ? 128u << pa.active_mtu : 0;
        if (verbs_port_netdev(device, port, ifname, sizeof(ifname)) &&
            netif_resolve_interface(ifname, &a) >= 0) {
                memcpy(&ia->address, &a.addr, a.addr_len);
                ia->address_len = a.addr_len;
        }
        return 0;
}

typedef int (*VerbsDeviceFn)(struct ibv_context *ctx, const struct ibv_device_attr *attr,
                             void *userdata);

/* Calls fn for every device (or the one named device) that opens. */
static int verbs_foreach_device(const char *device, VerbsDeviceFn fn, void *userdata)
{
        struct ibv_device **list;
        int n = 0, r = device ? -ENODEV : 0;

        list = ibv_get_device_list(&n);
        if (!list) {
                /* No verbs kernel support at all: no devices. */
                log_debug_errno(errno, "No RDMA devices: %m");
                return r;
        }
        for (int i = 0; i < n; i++) {
                struct ibv_device_attr attr;
                struct ibv_context *ctx;

                if (device && strcmp(ibv_get_device_name(list[i]), device) != 0)
                        continue;
                ctx = ibv_open_device(list[i]);
                if (!ctx) {
                        log_warning_errno(errno, "Failed to open RDMA device %s: %m",
                                          ibv_get_device_name(list[i]));
                        continue;
                }
                r = ibv_query_device(ctx, &attr) == 0 ? fn(ctx, &attr, userdata) : -errno;
                ibv_close_device(ctx);
                if (r < 0)
                        break;
        }
        ibv_free_device_list(list);
        return r;
}

struct verbs_setup {
        Ia *ia;
        uint32_t port;
};

static int verbs_setup_one(struct ibv_context *ctx, const struct ibv_device_attr *attr,
                           void *userdata)
{
        struct verbs_setup *s = userdata;

        return verbs_fill(s->ia, ctx, attr, s->port);
}

int verbs_ia_setup(Ia *ia, const char *device, uint32_t port)
{
        struct verbs_setup s = { .ia = ia, .port = port };
        int r = verbs_foreach_device(device, verbs_setup_one, &s);

        if (r < 0)
                log_warning_errno(r, "IA %s: no port %u on RDMA device %s, ignoring it.",
                                  ia->name, port, device);
        return r;
}

struct verbs_discovery {
        IaRegistry *registry;
        const Config *config;
};

static bool verbs_port_configured(const Config *c, const char *device, uint32_t port)
{
        for (size_t i = 0; i < c->n_ias; i++)
                if (c->ias[i].transport == TRANSPORT_VERBS && c->ias[i].port == port &&
                    strcmp(c->ias[i].device, device) == 0)
                        return true;
        return false;
}

static int verbs_discover_device(struct ibv_context *ctx, const struct ibv_device_attr *attr,
                                 void *userdata)
{
        struct verbs_discovery *d = userdata;
        const char *device = ibv_get_device_name(ctx->device);

        for (uint32_t port = 1; port <= attr->phys_port_cnt; port++) {
                char name[DATP_NAME_MAX];
                Ia *ia;

                if (verbs_port_configured(d->config, device, port))
                        continue;
                snprintf(name, sizeof(name), "%s-%u", device, port);
                ia = ia_registry_add(d->registry, name, TRANSPORT_VERBS, NULL);
                if (ia && verbs_fill(ia, ctx, attr, port) < 0)
                        d->registry->n--;
        }
        return 0;
}

int verbs_discover(IaRegistry *r, const Config *c)
{
        struct verbs_discovery d = { .registry = r, .config = c };

        return verbs_foreach_device(NULL, verbs_discover_device, &d);
}
