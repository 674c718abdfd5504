/* A switch in the environment (DATD_SHM_NO_CMA=1, DATD_SHM_NO_DIRECT=1):
 * on when the variable is set to anything but "" or "0".  Read once per
 * switch and process, from the data path, where a getenv on every
 * connection would walk the environment each time. */
#ifndef DATD_LIBDAT_ENV_SWITCH_H
#define DATD_LIBDAT_ENV_SWITCH_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* cache: a static int of the caller's, -1 before the first read. */
static inline bool env_switch_on(const char *name, int *cache)
{
        int v = __atomic_load_n(cache, __ATOMIC_RELAXED);

        if (v < 0) {
                const char *e = getenv(name);

                v = e && *e && strcmp(e, "0") != 0;
                __atomic_store_n(cache, v, __ATOMIC_RELAXED);
        }
        return v;
}

#endif
