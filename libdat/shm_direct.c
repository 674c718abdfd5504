/* Direct RDMA Writes on the shm transport (see shm_direct.h). */
#include "config.h"

#include "libdat/shm_direct.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "libdat/env_switch.h"
#include "libdat/shm_region.h"

/* One slot of the table the exporter shares: a line each writer owns, so
 * that the importer's busy word stays in its cache while it writes. */
struct shm_direct_slot {
        /* Written by the exporter. */
        uint64_t state;                 /* odd: exported; +1 at every export and revocation */
        uint64_t va, len;               /* the window, in the exporter's addresses */
        uint64_t file_off;              /* where va lies in the object */
        int32_t obj_fd;                 /* the object: a descriptor in the exporter */
        uint32_t ctx;
        unsigned char exporter_pad[24];
        /* Written by the importer. */
        uint64_t busy;                  /* 1 while a Write copies into the window */
        unsigned char importer_pad[56];
};

struct shm_direct_table {
        struct shm_direct_slot slot[SHM_DIRECT_SLOTS];
};

_Static_assert(sizeof(struct shm_direct_slot) == 128, "two lines per slot");
_Static_assert(sizeof(struct shm_direct_table) == 4096, "one page");

/* A window the peer exported, mapped here. */
struct shm_direct_import {
        uint32_t ctx;
        uint32_t slot;
        uint64_t state;                 /* as exported: any other means revoked */
        uint64_t va, len;               /* the window, in the peer's addresses */
        unsigned char *at;              /* where va is mapped here */
        void *map;
        size_t map_len;
};

struct shm_direct {
        struct shm_direct_head head;    /* first: shm_direct_imports_any */
        int peer_pidfd;                 /* not owned */

        /* Exporting: under registry_lock. */
        int table_fd;                   /* -1 until the first export */
        struct shm_direct_table *table;
        uint32_t exported_ctx[SHM_DIRECT_SLOTS]; /* 0: the slot is free */
        int exported_fd[SHM_DIRECT_SLOTS];      /* the object, opened for the peer */
        unsigned n_exported;
        struct shm_direct *reg_prev, *reg_next; /* in the registry while n_exported > 0 */

        /* Importing: under the owning data path's lock. */
        struct shm_direct_table *peer_table;
        struct shm_direct_import imp[SHM_DIRECT_SLOTS]; /* head.n_imported of them */
        unsigned last_imp;              /* where the last Write found its window */
};

/* Every end with windows exported, for revocations by context (only of
 * contexts that were exported: mem_ctx_note_export). */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shm_direct *registry;

static bool direct_allowed(void)
{
        static int no_direct = -1;

        return !env_switch_on("DATD_SHM_NO_DIRECT", &no_direct);
}

/* SHM_DIRECT_WINDOW_MAX, or less as the environment says (read once). */
static uint64_t window_max(void)
{
        static uint64_t cached;
        uint64_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);

        if (!v) {
                const char *e = getenv("DATD_SHM_DIRECT_WINDOW_MAX");
                unsigned long long n = e ? strtoull(e, NULL, 10) : 0;

                v = n > 0 && n < SHM_DIRECT_WINDOW_MAX ? n : SHM_DIRECT_WINDOW_MAX;
                __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
        }
        return v;
}

struct shm_direct *shm_direct_new(pid_t peer_pid, int peer_pidfd)
{
        struct shm_direct *x;

        if (peer_pid <= 0 || peer_pidfd < 0 || !direct_allowed())
                return NULL;
        x = calloc(1, sizeof(*x));
        if (!x)
                return NULL;
        x->peer_pidfd = peer_pidfd;
        x->table_fd = -1;
        for (unsigned i = 0; i < SHM_DIRECT_SLOTS; i++)
                x->exported_fd[i] = -1;
        return x;
}

/* The peer process exited (its pidfd polls readable).  An error of
 * poll's (EINTR, ENOMEM) says nothing: not gone. */
static bool peer_gone(const struct shm_direct *x)
{
        struct pollfd p = { .fd = x->peer_pidfd, .events = POLLIN };

        return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL));
}

/* Under registry_lock: slot i stops being exported; returns once the
 * importer copies nothing into it (or is gone). */
static void revoke_slot(struct shm_direct *x, uint32_t i)
{
        struct shm_direct_slot *s = &x->table->slot[i];
        struct timespec pause = { 0, 50 * 1000 };
        unsigned spins = 0;

        __atomic_store_n(&s->state, s->state + 1, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        /* A copy in progress takes a moment; the peer may also be
         * descheduled in it: spin a little, then sleep between looks. */
        while (__atomic_load_n(&s->busy, __ATOMIC_ACQUIRE) != 0) {
                if (++spins < 1000) {
                        sched_yield();
                        continue;
                }
                if (peer_gone(x))
                        break;
                nanosleep(&pause, NULL);
        }
        x->exported_ctx[i] = 0;
        close(x->exported_fd[i]);
        x->exported_fd[i] = -1;
        if (--x->n_exported == 0) {
                if (x->reg_prev)
                        x->reg_prev->reg_next = x->reg_next;
                else
                        registry = x->reg_next;
                if (x->reg_next)
                        x->reg_next->reg_prev = x->reg_prev;
                x->reg_prev = x->reg_next = NULL;
        }
}

void shm_direct_end(struct shm_direct *x)
{
        if (!x)
                return;
        pthread_mutex_lock(&registry_lock);
        for (uint32_t i = 0; i < SHM_DIRECT_SLOTS && x->n_exported > 0; i++)
                if (x->exported_ctx[i])
                        revoke_slot(x, i);
        pthread_mutex_unlock(&registry_lock);
}

static void forget_import(struct shm_direct *x, unsigned k)
{
        munmap(x->imp[k].map, x->imp[k].map_len);
        x->imp[k] = x->imp[--x->head.n_imported];
        x->last_imp = 0;
}

void shm_direct_destroy(struct shm_direct *x)
{
        if (!x)
                return;
        shm_direct_end(x);
        while (x->head.n_imported > 0)
                forget_import(x, x->head.n_imported - 1);
        if (x->peer_table)
                shm_region_unmap(x->peer_table, sizeof(*x->peer_table));
        if (x->table)
                shm_region_unmap(x->table, sizeof(*x->table));
        if (x->table_fd >= 0)
                close(x->table_fd);
        free(x);
}

/* ---- exporting ------------------------------------------------------------- */

/* Under registry_lock: the table, made at the first export. */
static int table_ready(struct shm_direct *x)
{
        void *mem;
        int r;

        if (x->table)
                return 0;
        r = shm_region_create(sizeof(*x->table), &x->table_fd, &mem);
        if (r < 0)
                return r;
        x->table = mem;
        return 0;
}

/* Our own open file description of the object fd is: what the peer takes
 * (pidfd_getfd shares it) and maps, which its mapping keeps alive.  Not
 * fd's own: a mem_shm descriptor holds the shared flock that tells who
 * still maps the object (mem_shm.h), and the peer's mapping must not hold
 * it after we let it go. */
static int open_for_peer(int fd)
{
        char path[64];
        int again;

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        again = open(path, O_RDWR | O_CLOEXEC);
        return again < 0 ? -errno : again;
}

int shm_direct_export(struct shm_direct *x, const struct shm_direct_window *w,
                      struct shm_direct_export *out)
{
        struct shm_direct_slot *s;
        uint32_t i, free_slot = SHM_DIRECT_SLOTS;
        int r, fd;

        if (w->len > window_max())
                return 0;
        pthread_mutex_lock(&registry_lock);
        r = table_ready(x);
        if (r < 0)
                goto out;
        for (i = 0; i < SHM_DIRECT_SLOTS; i++) {
                if (x->exported_ctx[i] == w->ctx)
                        goto out;       /* r == 0 */
                if (!x->exported_ctx[i] && free_slot == SHM_DIRECT_SLOTS)
                        free_slot = i;
        }
        if (free_slot == SHM_DIRECT_SLOTS)
                goto out;
        fd = open_for_peer(w->fd);
        if (fd < 0) {
                r = fd;
                goto out;
        }
        s = &x->table->slot[free_slot];
        s->va = w->va;
        s->len = w->len;
        s->file_off = w->file_off;
        s->obj_fd = fd;
        s->ctx = w->ctx;
        /* The fields before the state that makes them valid. */
        __atomic_store_n(&s->state, s->state + 1, __ATOMIC_RELEASE);
        x->exported_ctx[free_slot] = w->ctx;
        x->exported_fd[free_slot] = fd;
        if (x->n_exported++ == 0) {
                x->reg_next = registry;
                if (registry)
                        registry->reg_prev = x;
                registry = x;
        }
        *out = (struct shm_direct_export){ .slot = free_slot, .state = s->state,
                                           .table_fd = x->table_fd };
        r = 1;
out:
        pthread_mutex_unlock(&registry_lock);
        return r;
}

void shm_direct_revoke_context(uint32_t ctx)
{
        if (ctx == 0)
                return;
        pthread_mutex_lock(&registry_lock);
        for (struct shm_direct *x = registry, *next; x; x = next) {
                /* revoke_slot may take x out of the registry. */
                next = x->reg_next;
                for (uint32_t i = 0; i < SHM_DIRECT_SLOTS; i++)
                        if (x->exported_ctx[i] == ctx)
                                revoke_slot(x, i);
        }
        pthread_mutex_unlock(&registry_lock);
}

/* ---- importing ------------------------------------------------------------- */

/* The peer's descriptor fd as one of ours, or -errno. */
static int take_peer_fd(const struct shm_direct *x, int fd)
{
        int ours = pidfd_getfd(x->peer_pidfd, fd, 0);

        return ours < 0 ? -errno : ours;
}

static int peer_table_ready(struct shm_direct *x, int table_fd)
{
        _cleanup_close_ int fd = -1;
        void *mem;
        size_t size;
        int r;

        if (x->peer_table)
                return 0;
        fd = take_peer_fd(x, table_fd);
        if (fd < 0)
                return fd;
        r = shm_region_map(fd, sizeof(*x->peer_table), &mem, &size);
        if (r < 0)
                return r;
        if (size != sizeof(*x->peer_table)) {
                shm_region_unmap(mem, size);
                return -EPROTO;
        }
        x->peer_table = mem;
        return 0;
}

/* Forgets the windows the peer revoked since (their mappings hold memory
 * it freed). */
static void sweep_imports(struct shm_direct *x)
{
        for (unsigned k = x->head.n_imported; k-- > 0;)
                if (__atomic_load_n(&x->peer_table->slot[x->imp[k].slot].state, __ATOMIC_ACQUIRE) !=
                    x->imp[k].state)
                        forget_import(x, k);
}

/* Maps [off, off + len) of the peer's object obj_fd into *imp. */
static int map_window(struct shm_direct *x, int obj_fd, uint64_t off, uint64_t len,
                      struct shm_direct_import *imp)
{
        _cleanup_close_ int fd = -1;
        uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start = off / page * page;
        struct stat st;
        void *map;

        if (len == 0 || off + len < off || off + len - start > SIZE_MAX - page)
                return -EPROTO;
        /* The peer states the length; the mapping is ours to pay for. */
        if (len > window_max())
                return -EFBIG;
        fd = take_peer_fd(x, obj_fd);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < off + len)
                return -EPROTO;
        imp->map_len = (size_t)((off + len - start + page - 1) / page * page);
        map = mmap(NULL, imp->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
        if (map == MAP_FAILED)
                return -errno;
        imp->map = map;
        imp->at = (unsigned char *)map + (off - start);
        return 0;
}

int shm_direct_import(struct shm_direct *x, uint32_t ctx, const struct shm_direct_export *e)
{
        struct shm_direct_import imp = { .ctx = ctx, .slot = e->slot, .state = e->state };
        const struct shm_direct_slot *s;
        uint64_t off;
        int32_t obj_fd;
        int r;

        if (e->slot >= SHM_DIRECT_SLOTS || !(e->state & 1) || ctx == 0)
                return -EPROTO;
        r = peer_table_ready(x, e->table_fd);
        if (r < 0)
                return r;
        sweep_imports(x);
        s = &x->peer_table->slot[e->slot];
        /* Read between two looks at the state: the same state both times
         * means the fields are the export's. */
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != e->state)
                return -ESTALE;
        imp.va = __atomic_load_n(&s->va, __ATOMIC_RELAXED);
        imp.len = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
        off = __atomic_load_n(&s->file_off, __ATOMIC_RELAXED);
        obj_fd = __atomic_load_n(&s->obj_fd, __ATOMIC_RELAXED);
        if (__atomic_load_n(&s->ctx, __ATOMIC_RELAXED) != ctx || imp.va + imp.len < imp.va)
                return -EPROTO;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) != e->state)
                return -ESTALE;
        r = map_window(x, obj_fd, off, imp.len, &imp);
        if (r < 0)
                return r;
        /* Still exported now, so the descriptor taken was the window's
         * object: the exporter revokes before it closes it. */
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != e->state) {
                munmap(imp.map, imp.map_len);
                return -ESTALE;
        }
        for (unsigned k = 0; k < x->head.n_imported; k++)
                if (x->imp[k].ctx == ctx || x->imp[k].slot == e->slot) {
                        forget_import(x, k);
                        break;
                }
        if (x->head.n_imported == SHM_DIRECT_SLOTS) {
                munmap(imp.map, imp.map_len);
                return -ENOSPC;
        }
        x->imp[x->head.n_imported++] = imp;
        return 0;
}

static struct shm_direct_import *find_import(struct shm_direct *x, uint32_t ctx)
{
        if (x->head.n_imported == 0)
                return NULL;
        if (x->imp[x->last_imp].ctx == ctx)
                return &x->imp[x->last_imp];
        for (unsigned k = 0; k < x->head.n_imported; k++)
                if (x->imp[k].ctx == ctx) {
                        x->last_imp = k;
                        return &x->imp[k];
                }
        return NULL;
}

bool shm_direct_write(struct shm_direct *x, uint32_t ctx, uint64_t va, const struct iovec *iov,
                      int n, uint64_t total)
{
        struct shm_direct_import *imp = find_import(x, ctx);
        struct shm_direct_slot *s;
        unsigned char *to;

        if (!imp || va < imp->va || va - imp->va > imp->len || total > imp->len - (va - imp->va))
                return false;
        s = &x->peer_table->slot[imp->slot];
        /* The handshake with revoke_slot (shm_direct.h); an exchange is
         * the store and the full fence in one locked instruction, cheaper
         * than a store and an mfence. */
        (void)__atomic_exchange_n(&s->busy, 1, __ATOMIC_SEQ_CST);
        /* seq_cst: after the exchange's store on every architecture (a
         * relaxed load may pass it on arm64). */
        if (__atomic_load_n(&s->state, __ATOMIC_SEQ_CST) != imp->state) {
                __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
                forget_import(x, (unsigned)(imp - x->imp));
                return false;
        }
        to = imp->at + (va - imp->va);
        for (int i = 0; i < n; i++) {
                memcpy(to, iov[i].iov_base, iov[i].iov_len);
                to += iov[i].iov_len;
        }
        /* The bytes before the word that lets a revocation return. */
        __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
        return true;
}
