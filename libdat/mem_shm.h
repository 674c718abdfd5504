/* Shared memory named by a DAT_LMR_COOKIE, for DAT_MEM_TYPE_SHARED_VIRTUAL
 * LMRs whose consumer lets libdat provide the memory (region description
 * virtual_address NULL).
 *
 * The 40 cookie bytes name one POSIX shared memory object per user:
 * "/datd-lmr-<euid>-<80 hex digits>" (all 40 bytes, never read as a
 * string), created 0600 by the first LMR that names it and grown (never
 * shrunk) to the largest length asked.  Every LMR, in any process, that
 * names the same cookie maps the same object: the same memory, at its own
 * address.  An object of another owner or with group/other access is
 * refused, so another user cannot plant one under a name we would use.
 *
 * Lifetime across processes: each mapping holds a shared flock(2) on its
 * own open file description; the last one to go (an exclusive lock
 * succeeds) unlinks the name, and a process that dies releases its lock
 * with its descriptors, so the name goes when the last user does.  The
 * data path can pass mem_shm.fd to a peer (SCM_RIGHTS) to map it too. */
#ifndef DATD_LIBDAT_MEM_SHM_H
#define DATD_LIBDAT_MEM_SHM_H

#include <stddef.h>

#include "libdat/libdat.h"

struct mem_shm {
        unsigned refs;                  /* atomic: LMRs of this process using the mapping */
        int fd;                         /* O_CLOEXEC, holds the shared flock */
        void *addr;                     /* the mapping, PROT_READ | PROT_WRITE, MAP_SHARED */
        size_t length;                  /* page-rounded */
        char cookie[DAT_LMR_COOKIE_SIZE];
};

/* Maps the object cookie names, creating it or growing it to at least
 * length bytes (rounded up to pages).  Returns DAT_SUCCESS and *out (one
 * reference), or DAT_INSUFFICIENT_RESOURCES (no memory, no space in
 * /dev/shm, too many files), DAT_INVALID_STATE (an object by that name is
 * not ours to share: another owner, or open to others). */
DAT_RETURN mem_shm_attach(const char cookie[DAT_LMR_COOKIE_SIZE], size_t length,
                          struct mem_shm **out);

/* Another reference (an LMR made from an LMR over this memory). */
struct mem_shm *mem_shm_ref(struct mem_shm *shm);

/* Drops a reference; the last one unmaps, and unlinks the name when no
 * process maps it any more.  Accepts NULL. */
void mem_shm_unref(struct mem_shm *shm);

/* The object's name for a cookie, in buf (MEM_SHM_NAME_MAX bytes). */
#define MEM_SHM_NAME_MAX 128
void mem_shm_name(const char cookie[DAT_LMR_COOKIE_SIZE], char buf[MEM_SHM_NAME_MAX]);

#endif
