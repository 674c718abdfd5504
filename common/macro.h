/* Small helpers shared by datd, datctl and libdat: cleanup attributes and
 * array sizes.  Kept tiny on purpose: anything bigger gets its own file. */
#ifndef DATD_COMMON_MACRO_H
#define DATD_COMMON_MACRO_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define _unused_ __attribute__((unused))
#define _public_ __attribute__((visibility("default")))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define _always_inline_ inline __attribute__((always_inline))
#define _noinline_ __attribute__((noinline))

static inline void freep(void *p)
{
        free(*(void **)p);
}

/* Closes the fd and keeps errno: cleanup paths must not clobber the error
 * the caller is about to report. */
static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Hands ownership out of a _cleanup_ variable. */
#define TAKE_PTR(p) ({ __typeof__(p) _p = (p); (p) = NULL; _p; })
#define TAKE_FD(fd) ({ int _fd = (fd); (fd) = -1; _fd; })

#endif
