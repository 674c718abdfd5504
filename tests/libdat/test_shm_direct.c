/* Direct Writes' export table (libdat/shm_direct.h) inside one process:
 * an end exports a window of a memory object, another end (the same
 * process standing for the peer: pidfd_getfd of itself) imports and writes
 * into it, and a revocation returns only once no Write copies any more.
 * The data path's tests (tests/dto/test_dto_direct.c, the shmshared RDMA
 * bodies) show the rest between two processes. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libdat/shm_direct.h"

/* Large enough that a copy takes a good fraction of a millisecond: a
 * revocation that did not wait for one would return in its middle. */
#define WINDOW (4u << 20)

struct pair {
        int pidfd;
        int obj;                        /* the memory object */
        unsigned char *target;          /* its mapping, the target's view */
        struct shm_direct *exporter, *importer;
};

static void pair_open(struct pair *p)
{
        p->pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
        cr_assert_geq(p->pidfd, 0, "pidfd_open: %m");
        p->obj = memfd_create("test-shm-direct", MFD_CLOEXEC);
        cr_assert_geq(p->obj, 0);
        cr_assert_eq(ftruncate(p->obj, WINDOW), 0);
        p->target = mmap(NULL, WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, p->obj, 0);
        cr_assert_neq(p->target, MAP_FAILED);
        p->exporter = shm_direct_new(getpid(), p->pidfd);
        p->importer = shm_direct_new(getpid(), p->pidfd);
        cr_assert(p->exporter && p->importer);
}

static void pair_close(struct pair *p)
{
        shm_direct_destroy(p->importer);
        shm_direct_destroy(p->exporter);
        munmap(p->target, WINDOW);
        close(p->obj);
        close(p->pidfd);
}

static void export_import(struct pair *p, uint32_t ctx)
{
        struct shm_direct_window w = { .ctx = ctx, .va = (uintptr_t)p->target, .len = WINDOW,
                                       .fd = p->obj, .file_off = 0 };
        struct shm_direct_export e;

        cr_assert_eq(shm_direct_export(p->exporter, &w, &e), 1);
        cr_assert_eq(shm_direct_export(p->exporter, &w, &e), 0, "exported once per context");
        cr_assert_eq(shm_direct_import(p->importer, ctx, &e), 0);
}

static bool write_byte(struct pair *p, uint32_t ctx, uint64_t off, unsigned char v)
{
        struct iovec iov = { &v, 1 };

        return shm_direct_write(p->importer, ctx, (uintptr_t)p->target + off, &iov, 1, 1);
}

Test(shm_direct, a_write_lands_in_the_window_and_nowhere_outside_it)
{
        struct pair p;

        pair_open(&p);
        export_import(&p, 0x51);
        cr_expect(write_byte(&p, 0x51, 0, 7));
        cr_expect(write_byte(&p, 0x51, WINDOW - 1, 8));
        cr_expect_eq(p.target[0], 7);
        cr_expect_eq(p.target[WINDOW - 1], 8);
        cr_expect_not(write_byte(&p, 0x51, WINDOW, 9), "one past the window");
        cr_expect_not(write_byte(&p, 0x52, 0, 9), "a context never exported");
        cr_expect_eq(p.target[0], 7);
        pair_close(&p);
}

Test(shm_direct, a_revoked_window_takes_no_write)
{
        struct pair p;

        pair_open(&p);
        export_import(&p, 0x61);
        cr_expect(write_byte(&p, 0x61, 10, 1));
        shm_direct_revoke_context(0x61);
        cr_expect_not(write_byte(&p, 0x61, 10, 2));
        cr_expect_eq(p.target[10], 1);
        /* The slot is free again, and a new export of the same context
         * (another state) works. */
        export_import(&p, 0x61);
        cr_expect(write_byte(&p, 0x61, 10, 3));
        cr_expect_eq(p.target[10], 3);
        /* The end of the connection revokes every window. */
        shm_direct_end(p.exporter);
        cr_expect_not(write_byte(&p, 0x61, 10, 4));
        cr_expect_eq(p.target[10], 3);
        pair_close(&p);
}

struct writer {
        struct pair *p;
        uint32_t ctx;
        unsigned char *src[2];
        unsigned long writes;           /* atomic */
};

/* Whole-window Writes of two patterns in turn, until one is refused. */
static void *write_until_refused(void *arg)
{
        struct writer *w = arg;

        for (;;) {
                unsigned long n = __atomic_load_n(&w->writes, __ATOMIC_RELAXED);
                struct iovec iov = { w->src[n & 1], WINDOW };

                if (!shm_direct_write(w->p->importer, w->ctx, (uintptr_t)w->p->target, &iov, 1,
                                      WINDOW))
                        return NULL;
                __atomic_store_n(&w->writes, n + 1, __ATOMIC_RELAXED);
        }
}

static uint64_t checksum(const unsigned char *b, size_t n)
{
        uint64_t h = 1469598103934665603ull;

        for (size_t i = 0; i < n; i += 64)
                h = (h ^ b[i] ^ ((uint64_t)b[n - 1 - i] << 8)) * 1099511628211ull;
        return h;
}

/* The handshake of shm_direct.h: once shm_direct_revoke_context returns,
 * nothing changes in the window any more, though a Write was copying into
 * it from another thread all along (without the wait, the rest of that
 * copy would land after the return). */
Test(shm_direct, a_revocation_returns_only_after_the_copy_in_progress)
{
        struct timespec later = { 0, 20 * 1000 * 1000 };
        struct pair p;
        struct writer w = { .p = &p };

        pair_open(&p);
        w.src[0] = malloc(WINDOW);
        w.src[1] = malloc(WINDOW);
        cr_assert(w.src[0] && w.src[1]);
        memset(w.src[0], 0xa5, WINDOW);
        memset(w.src[1], 0x5a, WINDOW);
        for (unsigned round = 0; round < 10; round++) {
                pthread_t t;
                uint64_t before, after;

                w.ctx = 0x100 + round;
                __atomic_store_n(&w.writes, 0, __ATOMIC_RELAXED);
                export_import(&p, w.ctx);
                cr_assert_eq(pthread_create(&t, NULL, write_until_refused, &w), 0);
                while (__atomic_load_n(&w.writes, __ATOMIC_RELAXED) < 2 + round % 3)
                        sched_yield();
                shm_direct_revoke_context(w.ctx);
                before = checksum(p.target, WINDOW);
                nanosleep(&later, NULL);
                after = checksum(p.target, WINDOW);
                cr_expect_eq(before, after, "round %u: the window changed after the revocation",
                             round);
                pthread_join(t, NULL);
        }
        free(w.src[0]);
        free(w.src[1]);
        pair_close(&p);
}

/* ---- an importer that dies copying ------------------------------------------ */

#define CHILD_MAY_NOT_TAKE 77

/* The child: imports what the parent exported (e, from the pipe) and
 * writes whole windows until it is killed. */
_Noreturn static void import_and_write(int rd, unsigned long *writes)
{
        int pidfd = (int)syscall(SYS_pidfd_open, getppid(), 0);
        struct shm_direct *x = pidfd >= 0 ? shm_direct_new(getppid(), pidfd) : NULL;
        struct shm_direct_export e;
        struct shm_direct_window w;
        unsigned char *src = malloc(WINDOW);
        int r;

        if (!x || !src || read(rd, &e, sizeof(e)) != sizeof(e) || read(rd, &w, sizeof(w)) != sizeof(w))
                _exit(1);
        r = shm_direct_import(x, w.ctx, &e);
        if (r == -EPERM || r == -EACCES || r == -ENOSYS)
                _exit(CHILD_MAY_NOT_TAKE);
        if (r < 0)
                _exit(2);
        for (unsigned long n = 0;; n++) {
                struct iovec iov = { src, WINDOW };

                memset(src, (int)(n & 0xff), 64);
                if (!shm_direct_write(x, w.ctx, w.va, &iov, 1, WINDOW))
                        _exit(3);
                __atomic_store_n(writes, n + 1, __ATOMIC_RELAXED);
        }
}

/* The revocation waits for a copy in progress, or for the importer to be
 * gone: one killed in the middle of a copy (its busy word left at 1, as
 * nearly always with back-to-back copies of a large window) does not
 * hold it for ever. */
Test(shm_direct, a_revocation_does_not_wait_for_an_importer_that_died_copying, .timeout = 30)
{
        unsigned long *writes = mmap(NULL, sizeof(*writes), PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        int obj = memfd_create("test-shm-direct", MFD_CLOEXEC);
        unsigned char *target;

        cr_assert_neq(writes, MAP_FAILED);
        cr_assert_geq(obj, 0);
        cr_assert_eq(ftruncate(obj, WINDOW), 0);
        target = mmap(NULL, WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, obj, 0);
        cr_assert_neq(target, MAP_FAILED);
        for (unsigned round = 0; round < 3; round++) {
                struct shm_direct_window w = { .ctx = 0x300 + round, .va = (uintptr_t)target,
                                               .len = WINDOW, .fd = obj, .file_off = 0 };
                struct shm_direct_export e;
                struct shm_direct *x;
                int pipefd[2], pidfd, status;
                pid_t child;

                cr_assert_eq(pipe(pipefd), 0);
                *writes = 0;
                child = fork();
                cr_assert_geq(child, 0);
                if (child == 0) {
                        close(pipefd[1]);
                        import_and_write(pipefd[0], writes);
                }
                close(pipefd[0]);
                pidfd = (int)syscall(SYS_pidfd_open, child, 0);
                cr_assert_geq(pidfd, 0);
                x = shm_direct_new(child, pidfd);
                cr_assert_not_null(x);
                cr_assert_eq(shm_direct_export(x, &w, &e), 1);
                cr_assert_eq(write(pipefd[1], &e, sizeof(e)), (ssize_t)sizeof(e));
                cr_assert_eq(write(pipefd[1], &w, sizeof(w)), (ssize_t)sizeof(w));
                close(pipefd[1]);
                while (__atomic_load_n(writes, __ATOMIC_RELAXED) < 2) {
                        if (waitpid(child, &status, WNOHANG) == child) {
                                if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_MAY_NOT_TAKE)
                                        cr_skip_test("a child may not take its parent's descriptors here");
                                cr_assert_fail("the importer ended: status 0x%x", status);
                        }
                        sched_yield();
                }
                kill(child, SIGKILL);
                shm_direct_revoke_context(w.ctx);
                shm_direct_destroy(x);
                waitpid(child, &status, 0);
                close(pidfd);
        }
        munmap(target, WINDOW);
        close(obj);
}
