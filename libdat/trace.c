/* The opt-in debug trace (see libdat.h).  The environment is read on every
 * call, not cached: traces only happen on control paths and failures, and a
 * process (or a test) may switch the trace on after the library loaded. */
#include "config.h"

#include "libdat/libdat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool dat_trace_enabled(void)
{
        const char *v = getenv("DAT_DBG_TYPE");

        if (v && *v && strtoul(v, NULL, 0) != 0)
                return true;
        v = getenv("DATD_DEBUG");
        return v && *v && strcmp(v, "0") != 0;
}

void dat_trace(const char *fmt, ...)
{
        char line[1024];
        va_list ap;

        if (!dat_trace_enabled())
                return;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        /* One write per line so that traces of concurrent threads do not interleave. */
        fprintf(stderr, "libdat: %s\n", line);
}
