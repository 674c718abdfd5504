/* dat_platform_specific.h: the few types and markers that depend on the OS.
 *
 * datd implements the Linux ABI only.  The system headers included here are
 * the ones consumers written against libdapl's headers get transitively
 * (NULL, FILE and printf, struct sockaddr), so they stay included. */
#ifndef _DAT_PLATFORM_SPECIFIC_H_
#define _DAT_PLATFORM_SPECIFIC_H_

#if !defined(__linux__)
#error "these DAT headers describe the Linux DAT 2.0 ABI only"
#endif

#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fixed-width integers, spelled with the glibc types libdapl uses, so C++
 * name mangling of every prototype stays the same. */
typedef u_int32_t DAT_UINT32;
typedef u_int64_t DAT_UINT64;
typedef unsigned long long DAT_UVERYLONG;       /* widest native unsigned */

typedef void *DAT_PVOID;
typedef int DAT_COUNT;                          /* signed: counts, sizes, watermarks */
typedef DAT_UINT64 DAT_PADDR;
typedef int DAT_FD;                             /* a file descriptor, for CNO proxies */

/* Socket addresses are the OS's own; DAT adds no wrapper. */
typedef struct sockaddr DAT_SOCK_ADDR;
typedef struct sockaddr_in6 DAT_SOCK_ADDR6;
#define DAT_AF_INET AF_INET
#define DAT_AF_INET6 AF_INET6

/* Socket triple for dat_csp_create() (DAT 2.0 common service points). */
typedef struct dat_comm {
        int domain;
        int type;
        int protocol;
} DAT_COMM;

/* Alignment a consumer should give registered buffers; a default only. */
#ifndef DAT_OPTIMAL_ALIGNMENT
#define DAT_OPTIMAL_ALIGNMENT 256
#endif

/* The 64-bit attribute masks are written with UINT64_C().  Like the
 * reference headers, supply it only when <stdint.h> has not. */
#ifndef UINT64_C
#define UINT64_C(c) c ## ULL
#endif

/* Round-trips an IA handle through an unsigned long (kernel-style cookies). */
#define DAT_IA_HANDLE_TO_UL(a) ((unsigned long)(a))
#define DAT_UL_TO_IA_HANDLE(a) ((DAT_IA_HANDLE)(a))

/* Calling convention and linkage markers: empty / plain extern on Linux. */
#define DAT_API
#define DAT_EXPORT extern

/* Parameter direction markers used in prototypes; documentation only. */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef INOUT
#define INOUT
#endif

#ifdef __cplusplus
}
#endif

#endif /* _DAT_PLATFORM_SPECIFIC_H_ */
