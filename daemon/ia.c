#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ia-verbs.h"
#include "daemon/ia.h"
#include "daemon/log.h"
#include "daemon/netif.h"
#include "daemon/utf8.h"

Ia *ia_registry_find(const IaRegistry *r, const char *name)
{
        for (size_t i = 0; i < r->n; i++)
                if (strcmp(r->ias[i].name, name) == 0)
                        return &r->ias[i];
        return NULL;
}

Ia *ia_registry_add(IaRegistry *r, const char *name, Transport t, const IAConfig *config)
{
        Ia *ias, *ia;

        /* IA names are on D-Bus, which carries UTF-8 only (datd.conf's
         * are checked when read; a device's name is the kernel's). */
        if (!utf8_is_valid(name)) {
                log_warning("IA name of a %s device is not UTF-8, not adding it.",
                            transport_to_string(t));
                return NULL;
        }
        if (ia_registry_find(r, name)) {
                log_warning("IA name \"%s\" is taken, not adding the %s IA.", name,
                            transport_to_string(t));
                return NULL;
        }
        ias = realloc(r->ias, (r->n + 1) * sizeof(*ias));
        if (!ias)
                return NULL;
        r->ias = ias;
        ia = &r->ias[r->n++];
        memset(ia, 0, sizeof(*ia));
        snprintf(ia->name, sizeof(ia->name), "%s", name);
        ia->transport = t;
        ia->config = config;
        return ia;
}

void ia_registry_done(IaRegistry *r)
{
        free(r->ias);
        r->ias = NULL;
        r->n = 0;
}

/* shm and tcp are datd itself: they report datd's version as hardware and
 * firmware version. */
static void ia_set_datd_identity(Ia *ia)
{
        unsigned major = 0, minor = 0;

        sscanf(PACKAGE_VERSION, "%u.%u", &major, &minor);
        snprintf(ia->vendor_name, sizeof(ia->vendor_name), "datd");
        ia->hw_version_major = ia->fw_version_major = major;
        ia->hw_version_minor = ia->fw_version_minor = minor;
}

static int ia_setup_shm(Ia *ia, const IAConfig *c)
{
        ia_set_datd_identity(ia);
        snprintf(ia->adapter_name, sizeof(ia->adapter_name), "shm");
        memcpy(&ia->address, &c->sockaddr, c->sockaddr_len);
        ia->address_len = c->sockaddr_len;
        ia->up = true;
        return 0;
}

static int ia_setup_tcp(Ia *ia, const IAConfig *c)
{
        NetifAddress a;
        int r;

        ia_set_datd_identity(ia);
        if (c->address) {
                r = netif_find_address((const struct sockaddr *) &c->sockaddr, c->sockaddr_len, &a);
                if (r < 0)
                        return log_error_errno(r, "IA %s: address %s is on no interface of this host.",
                                               c->name, c->address);
        } else {
                r = netif_resolve_interface(c->interface, &a);
                if (r < 0)
                        return log_error_errno(r, "IA %s: no address on interface \"%s\": %m",
                                               c->name, c->interface);
        }
        snprintf(ia->adapter_name, sizeof(ia->adapter_name), "%s", a.ifname);
        memcpy(&ia->address, &a.addr, a.addr_len);
        ia->address_len = a.addr_len;
        ia->mtu = a.mtu;
        return 0;
}

static int ia_registry_add_configured(IaRegistry *r, const IAConfig *c)
{
        Ia *ia;

        if (c->transport == TRANSPORT_VERBS && !VERBS_AVAILABLE) {
                log_warning("IA %s: datd was built without verbs, ignoring it.", c->name);
                return 0;
        }
        ia = ia_registry_add(r, c->name, c->transport, c);
        if (!ia)
                return log_oom();
        switch (c->transport) {
        case TRANSPORT_SHM:
                return ia_setup_shm(ia, c);
        case TRANSPORT_TCP:
                return ia_setup_tcp(ia, c);
        case TRANSPORT_VERBS:
                /* A device that is not there is not an IA, but no reason not
                 * to serve the others. */
                if (verbs_ia_setup(ia, c->device, c->port) < 0)
                        r->n--;
                return 0;
        default:
                return -EINVAL;
        }
}

int ia_registry_build(IaRegistry *r, const Config *c)
{
        int ret;

        for (size_t i = 0; i < c->n_ias; i++) {
                ret = ia_registry_add_configured(r, &c->ias[i]);
                if (ret < 0)
                        return ret;
        }
        if (c->verbs) {
                ret = verbs_discover(r, c);
                if (ret < 0)
                        return ret;
        }
        for (size_t i = 0; i < r->n; i++) {
                char address[SOCKADDR_STRING_MAX];
                const Ia *ia = &r->ias[i];

                sockaddr_to_string((const struct sockaddr *) &ia->address, ia->address_len,
                                   address, sizeof(address));
                log_info("IA %s: %s on %s, address %s, mtu %u.", ia->name,
                         transport_to_string(ia->transport), ia->adapter_name,
                         address[0] ? address : "none", ia->mtu);
        }
        return 0;
}

bool ia_is_up(const Ia *ia)
{
        if (ia->transport == TRANSPORT_TCP)
                return netif_is_up(ia->adapter_name);
        return ia->up;
}

void ia_fill_info(const Ia *ia, const Limits *limits, struct datp_ia_info *info)
{
        memset(info, 0, sizeof(*info));
        datp_set_string(info->name, sizeof(info->name), ia->name);
        datp_set_string(info->transport, sizeof(info->transport), transport_to_string(ia->transport));
        datp_set_string(info->adapter_name, sizeof(info->adapter_name), ia->adapter_name);
        datp_set_string(info->vendor_name, sizeof(info->vendor_name), ia->vendor_name);
        info->hw_version_major = ia->hw_version_major;
        info->hw_version_minor = ia->hw_version_minor;
        info->fw_version_major = ia->fw_version_major;
        info->fw_version_minor = ia->fw_version_minor;
        memcpy(&info->address, &ia->address, ia->address_len);
        info->address_len = ia->address_len;
        info->mtu = ia->mtu;
        info->max_eps = limits->max_eps;
        info->max_evds = limits->max_evds;
        info->max_pzs = limits->max_pzs;
        info->max_lmrs = limits->max_lmrs;
        info->max_rmrs = limits->max_rmrs;
        info->max_srqs = limits->max_srqs;
        info->max_private_data = limits->max_private_data;
        info->max_lmr_bytes = limits->max_lmr_bytes;
}
