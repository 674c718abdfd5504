/* IAs on RDMA devices: one per device port.  Without HAVE_VERBS there are
 * none, and the calls below are no-ops. */
#ifndef DATD_DAEMON_IA_VERBS_H
#define DATD_DAEMON_IA_VERBS_H

#include <errno.h>
#include <stdint.h>

#include "daemon/config.h"
#include "daemon/ia.h"

#if HAVE_VERBS
#define VERBS_AVAILABLE 1

/* Fills ia from port of device; -ENODEV (logged) if there is no such port. */
int verbs_ia_setup(Ia *ia, const char *device, uint32_t port);

/* Adds "<device>-<port>" for every port that no datd.conf entry names. */
int verbs_discover(IaRegistry *r, const Config *c);

#else
#define VERBS_AVAILABLE 0

static inline int verbs_ia_setup(Ia *ia, const char *device, uint32_t port)
{
        return -EOPNOTSUPP;
}

static inline int verbs_discover(IaRegistry *r, const Config *c)
{
        return 0;
}
#endif

#endif
