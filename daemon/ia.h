/* The IAs this host offers, built once at start from datd.conf (and, with
 * verbs, from the devices present).  Clients open instances of them. */
#ifndef DATD_DAEMON_IA_H
#define DATD_DAEMON_IA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "daemon/config.h"
#include "proto/datp.h"

typedef struct Ia {
        char name[DATP_NAME_MAX];
        Transport transport;
        const IAConfig *config;         /* its datd.conf entry; NULL for a discovered verbs port */
        char adapter_name[DATP_NAME_MAX];
        char vendor_name[DATP_NAME_MAX];
        uint32_t hw_version_major, hw_version_minor;
        uint32_t fw_version_major, fw_version_minor;
        struct sockaddr_storage address;
        socklen_t address_len;
        uint32_t mtu;
        bool up;                        /* shm, verbs: at start; tcp: asked live */
        uint32_t n_open;                /* instances open now, over all clients */
} Ia;

typedef struct IaRegistry {
        Ia *ias;                        /* never moves once built: clients point into it */
        size_t n;
} IaRegistry;

int ia_registry_build(IaRegistry *r, const Config *c);
void ia_registry_done(IaRegistry *r);
Ia *ia_registry_find(const IaRegistry *r, const char *name);

/* A new zeroed entry named name; NULL (and a warning) if the name is taken. */
Ia *ia_registry_add(IaRegistry *r, const char *name, Transport t, const IAConfig *config);

bool ia_is_up(const Ia *ia);
void ia_fill_info(const Ia *ia, const Limits *limits, struct datp_ia_info *info);

#endif
