/* Internal header shared by every file of libdat2.so.2: the public DAT
 * headers, the error-code helpers and the opt-in debug trace.
 *
 * Return codes: every error libdat returns carries DAT_CLASS_ERROR, like the
 * codes Debian's libdat2 returns (0x800a0064 for "no such IA"), so consumers
 * that compare whole values against either library see the same numbers, and
 * DAT_GET_TYPE()/DAT_GET_SUBTYPE() work as documented. */
#ifndef DATD_LIBDAT_LIBDAT_H
#define DATD_LIBDAT_LIBDAT_H

#include <stdarg.h>
#include <stdbool.h>

#include <dat2/udat.h>

#include "common/macro.h"

/* A DAT error code: class, type (major) and subtype (minor). */
#define DAT_ERR(type, subtype) \
        ((DAT_RETURN)(DAT_CLASS_ERROR | (DAT_RETURN)(type) | (DAT_RETURN)(subtype)))

/* The n-th argument (1-based) of the call is invalid. */
#define DAT_ERR_ARG(n) DAT_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1 + (n) - 1)

/* What every entry point of an object kind that is not built yet returns. */
#define DAT_ERR_NOT_IMPLEMENTED DAT_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE)

/* Gives an error code the error class if it lacks one (datd sends the bare
 * type | subtype on the wire). */
static inline DAT_RETURN dat_err_normalize(DAT_RETURN r)
{
        if (r == DAT_SUCCESS || (r & (DAT_CLASS_ERROR | DAT_CLASS_WARNING)))
                return r;
        return r | DAT_CLASS_ERROR;
}

/* The opt-in debug trace: on when DAT_DBG_TYPE (the variable DAPL users know)
 * is a non-zero number or DATD_DEBUG is set to anything but "0" or "".  It is
 * the only thing libdat ever prints, always to stderr, one line per event,
 * prefixed "libdat: ".  Errors are otherwise only returned, never logged. */
bool dat_trace_enabled(void);
void dat_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
