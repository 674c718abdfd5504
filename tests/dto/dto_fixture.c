/* The DTO test fixture (dto_fixture.h): datd(s) per test, two role
 * processes, their sides, and the helpers the roles use. */
#include "config.h"

#include "tests/dto/dto_fixture.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "common/macro.h"
#include "tests/harness.h"
#include "tests/netns.h"

/* How long dto_get()/dto_barrier() wait for the peer process. */
#define DTO_SOCK_WAIT_MS 15000
#define DTO_MSG_MAX 4096

const char *dto_datd_config;

static int transport;
static struct datd_instance datd[2];    /* [1] only with DTO_TCP_NETNS */
static struct test_net *net;
static pid_t children[2];               /* server, client */
static int report_fd = -1;              /* inside a role: where dto_fail writes */

int dto_transport(void)
{
        return transport;
}

const char *dto_transport_name(void)
{
        switch (transport) {
        case DTO_SHM:
                return "shm";
        case DTO_TCP_LOCAL:
                return "tcp";
        case DTO_TCP_NETNS:
                return "tcp across network namespaces";
        default:
                return "?";
        }
}

const char *dto_ia_name(void)
{
        return transport == DTO_SHM ? "datd-shm" : "datd-tcp";
}

/* What a role writes to its report pipe before dto_die(). */
#define DTO_DIED_ON_PURPOSE "\001died on purpose"

struct datd_instance *dto_datd(unsigned host)
{
        return transport == DTO_TCP_NETNS && host == 1 ? &datd[1] : &datd[0];
}

struct test_net *dto_net(void)
{
        return net;
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- .init / .fini -------------------------------------------------------- */

void dto_setup(int which)
{
        char *bin = build_path("daemon/datd");
        bool built = bin && access(bin, X_OK) == 0;
        const char *why = NULL;

        free(bin);
        transport = which;
        if (!built)
                cr_skip_test("daemon/datd is not built in this tree");
        if (transport != DTO_TCP_NETNS) {
                cr_assert_eq(datd_start(&datd[0], dto_datd_config), 0, "datd did not start");
                return;
        }
        if (!test_net_available(&why))
                cr_skip_test("%s", why);
        cr_assert_eq(test_net_create(&net, 2), 0, "two hosts");
        for (unsigned h = 0; h < 2; h++) {
                _cleanup_free_ char *conf = dto_datd_config ? NULL
                                                            : test_net_datd_config(net, h, false);

                datd[h].netns = test_net_host_ns(net, h);
                cr_assert_eq(datd_start(&datd[h], dto_datd_config ? dto_datd_config : conf), 0,
                             "datd on host %u", h);
        }
}

static void kill_children(void)
{
        for (unsigned i = 0; i < 2; i++) {
                if (children[i] > 0) {
                        kill(children[i], SIGKILL);
                        waitpid(children[i], NULL, 0);
                }
                children[i] = 0;
        }
}

void dto_teardown(void)
{
        kill_children();
        datd_stop(&datd[0]);
        datd_stop(&datd[1]);
        test_net_destroy(&net);
}

/* ---- failures inside a role ----------------------------------------------- */

void dto_fail(const char *file, int line, const char *fmt, ...)
{
        char msg[1024];
        int n;
        va_list ap;

        n = snprintf(msg, sizeof(msg), "%s: %s:%d: ", dto_transport_name(), file, line);
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < sizeof(msg))
                vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
        va_end(ap);
        fprintf(stderr, "dto role %d: %s\n", (int)getpid(), msg);
        if (report_fd >= 0 && write(report_fd, msg, strlen(msg)) < 0) {
                /* stderr has it */
        }
        _exit(1);
}

void dto_die(struct dto_side *s)
{
        (void)s;
        if (report_fd >= 0 && write(report_fd, DTO_DIED_ON_PURPOSE,
                                    strlen(DTO_DIED_ON_PURPOSE)) < 0) {
                /* the supervisor will count it as a crash */
        }
        kill(getpid(), SIGKILL);
        _exit(1);
}

/* ---- the socketpair between the roles ------------------------------------- */

static void sock_wait(struct dto_side *s, short events, const char *what)
{
        struct pollfd p = { .fd = s->sock, .events = events };
        int r;

        do
                r = poll(&p, 1, DTO_SOCK_WAIT_MS);
        while (r < 0 && errno == EINTR);
        DTO_ASSERTF(r == 1, "%s: the peer process did not answer within %d ms", what,
                    DTO_SOCK_WAIT_MS);
}

void dto_put(struct dto_side *s, const void *p, size_t n)
{
        ssize_t w;

        DTO_ASSERT(n > 0 && n <= DTO_MSG_MAX);
        sock_wait(s, POLLOUT, "dto_put");
        w = send(s->sock, p, n, MSG_NOSIGNAL);
        DTO_ASSERTF(w == (ssize_t)n, "dto_put: %zd (%m): the peer process is gone", w);
}

void dto_get(struct dto_side *s, void *p, size_t n)
{
        char buf[DTO_MSG_MAX];
        ssize_t r;

        DTO_ASSERT(n > 0 && n <= DTO_MSG_MAX);
        sock_wait(s, POLLIN, "dto_get");
        r = recv(s->sock, buf, sizeof(buf), 0);
        DTO_ASSERTF(r != 0 && !(r < 0 && errno == ECONNRESET),
                    "dto_get: the peer process is gone (it failed: see its message)");
        DTO_ASSERTF(r == (ssize_t)n, "dto_get: %zd bytes (%m), expected %zu: the roles disagree",
                    r, n);
        memcpy(p, buf, n);
}

void dto_put_u64(struct dto_side *s, uint64_t v)
{
        dto_put(s, &v, sizeof(v));
}

uint64_t dto_get_u64(struct dto_side *s)
{
        uint64_t v;

        dto_get(s, &v, sizeof(v));
        return v;
}

void dto_barrier(struct dto_side *s)
{
        const uint64_t magic = 0xba221e2ULL;

        dto_put_u64(s, magic);
        DTO_ASSERTF(dto_get_u64(s) == magic, "dto_barrier: the peer sent something else");
}

/* ---- memory --------------------------------------------------------------- */

struct dto_mem dto_mem_new(struct dto_side *s, DAT_PZ_HANDLE pz, DAT_VLEN len,
                           DAT_MEM_PRIV_FLAGS privileges)
{
        struct dto_mem m = { .len = len, .privileges = privileges };
        DAT_REGION_DESCRIPTION region;
        DAT_VLEN reg_len = 0;
        DAT_VADDR reg_addr = 0;
        DAT_RETURN r;
        void *p;

        if (getenv("DTO_SHARED_MEM"))
                return dto_shared_mem_new(s, pz, len, privileges);
        p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        DTO_ASSERTF(p != MAP_FAILED, "mmap(%llu): %m", (unsigned long long)len);
        m.buf = p;
        region.for_va = p;
        r = dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, region, len ? len : 1, pz ? pz : s->pz,
                           privileges, DAT_VA_TYPE_VA, &m.lmr, &m.lmr_context, &m.rmr_context,
                           &reg_len, &reg_addr);
        DTO_ASSERTF(r == DAT_SUCCESS, "dat_lmr_create(%llu bytes, priv 0x%x): 0x%08x",
                    (unsigned long long)len, privileges, r);
        return m;
}

struct dto_mem dto_shared_mem_new(struct dto_side *s, DAT_PZ_HANDLE pz, DAT_VLEN len,
                                  DAT_MEM_PRIV_FLAGS privileges)
{
        static unsigned made;
        struct dto_mem m = { .len = len, .privileges = privileges, .shared = true };
        char cookie[DAT_LMR_COOKIE_SIZE] = { 0 };
        DAT_REGION_DESCRIPTION region;
        DAT_VLEN reg_len = 0;
        DAT_VADDR reg_addr = 0;
        DAT_RETURN r;

        /* A name of this process's own. */
        snprintf(cookie, sizeof(cookie), "dto-%d-%u", (int)getpid(), made++);
        region.for_shared_memory = (DAT_SHARED_MEMORY){ .virtual_address = NULL,
                                                         .shared_memory_id = &cookie };
        r = dat_lmr_create(s->ia, DAT_MEM_TYPE_SHARED_VIRTUAL, region, len ? len : 1,
                           pz ? pz : s->pz, privileges, DAT_VA_TYPE_VA, &m.lmr, &m.lmr_context,
                           &m.rmr_context, &reg_len, &reg_addr);
        DTO_ASSERTF(r == DAT_SUCCESS, "dat_lmr_create(shared, %llu bytes, priv 0x%x): 0x%08x",
                    (unsigned long long)len, privileges, r);
        m.buf = (unsigned char *)(uintptr_t)reg_addr;
        return m;
}

void dto_mem_free(struct dto_mem *m)
{
        if (m->lmr)
                dat_lmr_free(m->lmr);
        /* Shared memory goes with its LMR. */
        if (m->buf && !m->shared)
                munmap(m->buf, m->len ? m->len : 1);
        *m = (struct dto_mem){ 0 };
}

DAT_LMR_TRIPLET dto_iov(const struct dto_mem *m, DAT_VLEN off, DAT_VLEN len)
{
        DTO_ASSERTF(off + len <= m->len, "dto_iov: [%llu, +%llu) is outside the buffer",
                    (unsigned long long)off, (unsigned long long)len);
        return (DAT_LMR_TRIPLET){
                .virtual_address = (DAT_VADDR)(uintptr_t)(m->buf + off),
                .segment_length = len,
                .lmr_context = m->lmr_context,
        };
}

DAT_RMR_TRIPLET dto_riov(const struct dto_remote *r, DAT_VLEN off, DAT_VLEN len)
{
        DTO_ASSERTF(off + len <= r->len, "dto_riov: [%llu, +%llu) is outside the peer's buffer",
                    (unsigned long long)off, (unsigned long long)len);
        return (DAT_RMR_TRIPLET){
                .virtual_address = r->addr + off,
                .segment_length = len,
                .rmr_context = r->rmr_context,
        };
}

const DAT_VLEN dto_small_sizes[] = {
        0, 1, 7, 8, 63, 64, 4095, 4096, 16 * 1024 - 1, 16 * 1024, 64 * 1024 + 3,
};
const unsigned dto_n_small_sizes = sizeof(dto_small_sizes) / sizeof(dto_small_sizes[0]);
const DAT_VLEN dto_large_sizes[] = { 1 << 20, DTO_LARGEST_SIZE };
const unsigned dto_n_large_sizes = sizeof(dto_large_sizes) / sizeof(dto_large_sizes[0]);

/* ---- patterns ------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

static unsigned char pattern_byte(uint64_t seed, size_t i)
{
        return (unsigned char)(mix64(seed * 0x100000001b3ULL + i / 8) >> (8 * (i % 8)));
}

void dto_fill_at(void *p, size_t len, uint64_t seed, size_t start)
{
        unsigned char *b = p;
        size_t i = 0;

        /* byte by byte up to a word boundary of the stream, then by words */
        for (; i < len && (start + i) % 8; i++)
                b[i] = pattern_byte(seed, start + i);
        for (; i + 8 <= len; i += 8) {
                uint64_t w = mix64(seed * 0x100000001b3ULL + (start + i) / 8);

                for (unsigned k = 0; k < 8; k++)
                        b[i + k] = (unsigned char)(w >> (8 * k));
        }
        for (; i < len; i++)
                b[i] = pattern_byte(seed, start + i);
}

void dto_fill(void *p, size_t len, uint64_t seed)
{
        dto_fill_at(p, len, seed, 0);
}

static size_t first_mismatch(const void *p, size_t len, uint64_t seed, size_t start)
{
        const unsigned char *b = p;
        size_t i = 0;

        for (; i < len && (start + i) % 8; i++)
                if (b[i] != pattern_byte(seed, start + i))
                        return i;
        for (; i + 8 <= len; i += 8) {
                uint64_t w = mix64(seed * 0x100000001b3ULL + (start + i) / 8);

                for (unsigned k = 0; k < 8; k++)
                        if (b[i + k] != (unsigned char)(w >> (8 * k)))
                                return i + k;
        }
        for (; i < len; i++)
                if (b[i] != pattern_byte(seed, start + i))
                        return i;
        return len;
}

bool dto_matches(const void *p, size_t len, uint64_t seed)
{
        return first_mismatch(p, len, seed, 0) == len;
}

void dto_verify_at(const void *p, size_t len, uint64_t seed, size_t start)
{
        size_t i = first_mismatch(p, len, seed, start);

        DTO_ASSERTF(i == len, "pattern %llu of %zu bytes (from stream offset %zu) differs at "
                    "offset %zu: 0x%02x, expected 0x%02x", (unsigned long long)seed, len, start,
                    i, ((const unsigned char *)p)[i], pattern_byte(seed, start + i));
}

void dto_verify(const void *p, size_t len, uint64_t seed)
{
        dto_verify_at(p, len, seed, 0);
}

uint64_t dto_checksum(const void *p, size_t len)
{
        const unsigned char *b = p;
        uint64_t h = 0xcbf29ce484222325ULL;

        for (size_t i = 0; i < len; i++)
                h = (h ^ b[i]) * 0x100000001b3ULL;
        return h;
}

void dto_fill_iov(const DAT_LMR_TRIPLET *iov, unsigned n, uint64_t seed)
{
        for (unsigned i = 0; i < n; i++)
                dto_fill((void *)(uintptr_t)iov[i].virtual_address, iov[i].segment_length,
                         seed + i);
}

void dto_verify_iov(const DAT_LMR_TRIPLET *iov, unsigned n, uint64_t seed)
{
        for (unsigned i = 0; i < n; i++)
                dto_verify((const void *)(uintptr_t)iov[i].virtual_address,
                           iov[i].segment_length, seed + i);
}

DAT_SEG_LENGTH dto_iov_len(const DAT_LMR_TRIPLET *iov, unsigned n)
{
        DAT_SEG_LENGTH sum = 0;

        for (unsigned i = 0; i < n; i++)
                sum += iov[i].segment_length;
        return sum;
}

/* ---- events --------------------------------------------------------------- */

DAT_EVENT dto_wait_event(DAT_EVD_HANDLE evd)
{
        DAT_EVENT ev;
        DAT_COUNT nmore = 0;
        DAT_RETURN r;

        memset(&ev, 0, sizeof(ev));
        r = dat_evd_wait(evd, DTO_WAIT_US, 1, &ev, &nmore);
        DTO_ASSERTF(r == DAT_SUCCESS, "no event within %d us: dat_evd_wait 0x%08x", DTO_WAIT_US,
                    r);
        return ev;
}

void dto_expect_no_event(DAT_EVD_HANDLE evd, DAT_TIMEOUT usec)
{
        DAT_EVENT ev;
        DAT_COUNT nmore = 0;
        DAT_RETURN r;

        memset(&ev, 0, sizeof(ev));
        r = dat_evd_wait(evd, usec, 1, &ev, &nmore);
        DTO_ASSERTF(DAT_GET_TYPE(r) == DAT_TIMEOUT_EXPIRED,
                    "expected no event, dat_evd_wait 0x%08x, event 0x%x (status %d)", r,
                    ev.event_number, (int)ev.event_data.dto_completion_event_data.status);
}

double dto_cpu_seconds(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double dto_wall_seconds(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The threads of pid but pid itself; asserts there is at least one. */
static unsigned helper_threads(pid_t pid, pid_t *tids, unsigned max)
{
        char path[64];
        struct dirent *e;
        unsigned n = 0;
        DIR *dir;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        dir = opendir(path);
        DTO_ASSERTF(dir, "%s: %s", path, strerror(errno));
        while ((e = readdir(dir)) && n < max) {
                pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);

                if (tid > 0 && tid != pid)
                        tids[n++] = tid;
        }
        closedir(dir);
        DTO_ASSERTF(n > 0, "process %d has no thread but its main one", (int)pid);
        return n;
}

void dto_freeze_helpers(pid_t pid, struct dto_frozen *f)
{
        long long deadline = now_ms() + DTO_WAIT_US / 1000;
        bool asleep;

        /* A thread stopped between two instructions could hold a lock the
         * main thread needs: wait until all sleep in the kernel (no one
         * wakes them meanwhile: the process is idle). */
        do {
                DTO_ASSERTF(now_ms() < deadline, "the threads of %d never all slept", (int)pid);
                f->n = helper_threads(pid, f->tids, DTO_FROZEN_MAX);
                asleep = true;
                for (unsigned i = 0; i < f->n && asleep; i++) {
                        char path[64];

                        snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid,
                                 (int)f->tids[i]);
                        asleep = proc_stat_state(path) == 'S';
                }
                if (!asleep)
                        nanosleep(&(struct timespec){ 0, 1000 * 1000 }, NULL);
        } while (!asleep);
        for (unsigned i = 0; i < f->n; i++) {
                int st;

                DTO_ASSERTF(ptrace(PTRACE_SEIZE, f->tids[i], NULL, NULL) == 0,
                            "PTRACE_SEIZE %d: %s", (int)f->tids[i], strerror(errno));
                DTO_ASSERTF(ptrace(PTRACE_INTERRUPT, f->tids[i], NULL, NULL) == 0,
                            "PTRACE_INTERRUPT %d: %s", (int)f->tids[i], strerror(errno));
                DTO_ASSERTF(waitpid(f->tids[i], &st, __WALL) == f->tids[i] && WIFSTOPPED(st),
                            "thread %d did not stop", (int)f->tids[i]);
        }
}

void dto_thaw(struct dto_frozen *f)
{
        /* An interrupted system call restarts (epoll_wait, read). */
        for (unsigned i = 0; i < f->n; i++)
                (void)ptrace(PTRACE_DETACH, f->tids[i], NULL, NULL);
        f->n = 0;
}

void dto_expect_empty(DAT_EVD_HANDLE evd)
{
        DAT_EVENT ev;
        DAT_RETURN r;

        memset(&ev, 0, sizeof(ev));
        r = dat_evd_dequeue(evd, &ev);
        DTO_ASSERTF(DAT_GET_TYPE(r) == DAT_QUEUE_EMPTY,
                    "expected an empty EVD, dat_evd_dequeue 0x%08x, event 0x%x (status %d)", r,
                    ev.event_number, (int)ev.event_data.dto_completion_event_data.status);
}

DAT_EVENT dto_poll_event(DAT_EVD_HANDLE evd)
{
        long long deadline = now_ms() + DTO_WAIT_US / 1000;
        DAT_EVENT ev;
        DAT_RETURN r;

        for (;;) {
                memset(&ev, 0, sizeof(ev));
                r = dat_evd_dequeue(evd, &ev);
                if (r == DAT_SUCCESS)
                        return ev;
                DTO_ASSERTF(DAT_GET_TYPE(r) == DAT_QUEUE_EMPTY, "dat_evd_dequeue: 0x%08x", r);
                DTO_ASSERTF(now_ms() < deadline, "no event within %d us of polling", DTO_WAIT_US);
                sched_yield();
        }
}

static void *waiter_main(void *arg)
{
        struct dto_waiter *w = arg;

        w->ret = dat_evd_wait(w->evd, w->timeout, w->threshold, &w->event, &w->nmore);
        atomic_store(&w->done, true);
        return NULL;
}

void dto_waiter_start(struct dto_waiter *w, DAT_EVD_HANDLE evd, DAT_COUNT threshold,
                      DAT_TIMEOUT timeout)
{
        long long deadline = now_ms() + DTO_WAIT_US / 1000;

        memset(w, 0, sizeof(*w));
        w->evd = evd;
        w->threshold = threshold;
        w->timeout = timeout;
        DTO_ASSERT_EQ(pthread_create(&w->thread, NULL, waiter_main, w), 0);
        for (;;) {
                DAT_EVENT ev;
                DAT_RETURN r = dat_evd_dequeue(evd, &ev);

                /* dat_evd_wait(3DAT): a blocked waiter owns the EVD */
                if (DAT_GET_TYPE(r) == DAT_INVALID_STATE)
                        return;
                DTO_ASSERTF(r != DAT_SUCCESS, "an event (0x%x) was queued before the waiter slept",
                            ev.event_number);
                DTO_ASSERTF(!atomic_load(&w->done), "the waiter returned at once: 0x%08x", w->ret);
                DTO_ASSERTF(now_ms() < deadline, "the waiter did not block in dat_evd_wait");
                sched_yield();
        }
}

void dto_waiter_expect_blocked(struct dto_waiter *w, unsigned ms)
{
        long long deadline = now_ms() + ms;

        while (now_ms() < deadline) {
                DTO_ASSERTF(!atomic_load(&w->done), "the waiter woke: 0x%08x, event 0x%x, cookie "
                            "%llu", w->ret, w->event.event_number,
                            (unsigned long long)w->event.event_data.dto_completion_event_data
                                    .user_cookie.as_64);
                usleep(5000);
        }
}

void dto_waiter_join(struct dto_waiter *w)
{
        long long deadline = now_ms() + (long long)(w->timeout / 1000) + DTO_WAIT_US / 1000;

        while (!atomic_load(&w->done)) {
                DTO_ASSERTF(now_ms() < deadline, "dat_evd_wait did not return within its timeout");
                usleep(1000);
        }
        DTO_ASSERT_EQ(pthread_join(w->thread, NULL), 0);
}

DAT_DTO_COMPLETION_EVENT_DATA dto_check_dto(const DAT_EVENT *ev, DAT_EP_HANDLE ep,
                                            uint64_t cookie, DAT_DTO_COMPLETION_STATUS status,
                                            DAT_SEG_LENGTH length, DAT_DTOS operation)
{
        const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;

        DTO_ASSERTF(ev->event_number == DAT_DTO_COMPLETION_EVENT,
                    "event 0x%x, expected a DTO completion (cookie %llu)", ev->event_number,
                    (unsigned long long)cookie);
        DTO_ASSERTF(d->user_cookie.as_64 == cookie, "cookie %llu, expected %llu (status %d)",
                    (unsigned long long)d->user_cookie.as_64, (unsigned long long)cookie,
                    (int)d->status);
        DTO_ASSERTF(d->status == status, "cookie %llu: status %d, expected %d",
                    (unsigned long long)cookie, (int)d->status, (int)status);
        DTO_ASSERTF(ep == DAT_HANDLE_NULL || d->ep_handle == ep, "cookie %llu: EP %p, expected %p",
                    (unsigned long long)cookie, d->ep_handle, ep);
        DTO_ASSERTF(length == DTO_ANY_LENGTH || d->transfered_length == length,
                    "cookie %llu: transfered_length %llu, expected %llu",
                    (unsigned long long)cookie, (unsigned long long)d->transfered_length,
                    (unsigned long long)length);
        DTO_ASSERTF(d->operation == operation, "cookie %llu: operation %d, expected %d",
                    (unsigned long long)cookie, (int)d->operation, (int)operation);
        return *d;
}

DAT_DTO_COMPLETION_EVENT_DATA dto_expect_dto(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep,
                                             uint64_t cookie, DAT_DTO_COMPLETION_STATUS status,
                                             DAT_SEG_LENGTH length, DAT_DTOS operation)
{
        DAT_EVENT ev = dto_wait_event(evd);

        return dto_check_dto(&ev, ep, cookie, status, length, operation);
}

static const char *conn_event_name(DAT_EVENT_NUMBER n)
{
        switch (n) {
        case DAT_CONNECTION_EVENT_ESTABLISHED:
                return "ESTABLISHED";
        case DAT_CONNECTION_EVENT_PEER_REJECTED:
                return "PEER_REJECTED";
        case DAT_CONNECTION_EVENT_NON_PEER_REJECTED:
                return "NON_PEER_REJECTED";
        case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR:
                return "ACCEPT_COMPLETION_ERROR";
        case DAT_CONNECTION_EVENT_DISCONNECTED:
                return "DISCONNECTED";
        case DAT_CONNECTION_EVENT_BROKEN:
                return "BROKEN";
        case DAT_CONNECTION_EVENT_TIMED_OUT:
                return "TIMED_OUT";
        default:
                return "?";
        }
}

DAT_EVENT dto_expect_conn_event(struct dto_side *s, DAT_EVENT_NUMBER number)
{
        DAT_EVENT ev = dto_wait_event(s->conn_evd);

        DTO_ASSERTF(ev.event_number == number, "connection event 0x%x (%s), expected 0x%x (%s)",
                    ev.event_number, conn_event_name(ev.event_number), number,
                    conn_event_name(number));
        return ev;
}

/* ---- post and wait -------------------------------------------------------- */

void dto_send_wait(struct dto_side *s, DAT_EP_HANDLE ep, DAT_LMR_TRIPLET *iov, unsigned n,
                   uint64_t cookie)
{
        DTO_ASSERT_EQ(dat_ep_post_send(ep, (DAT_COUNT)n, iov, dto_cookie(cookie),
                                       DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        dto_expect_dto(s->request_evd, ep, cookie, DAT_DTO_SUCCESS, dto_iov_len(iov, n),
                       DAT_DTO_SEND);
}

void dto_rdma_write_wait(struct dto_side *s, DAT_EP_HANDLE ep, DAT_LMR_TRIPLET *iov, unsigned n,
                         uint64_t cookie, const DAT_RMR_TRIPLET *remote)
{
        DTO_ASSERT_EQ(dat_ep_post_rdma_write(ep, (DAT_COUNT)n, iov, dto_cookie(cookie), remote,
                                             DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        dto_expect_dto(s->request_evd, ep, cookie, DAT_DTO_SUCCESS, dto_iov_len(iov, n),
                       DAT_DTO_RDMA_WRITE);
}

void dto_rdma_read_wait(struct dto_side *s, DAT_EP_HANDLE ep, DAT_LMR_TRIPLET *iov, unsigned n,
                        uint64_t cookie, const DAT_RMR_TRIPLET *remote)
{
        DTO_ASSERT_EQ(dat_ep_post_rdma_read(ep, (DAT_COUNT)n, iov, dto_cookie(cookie), remote,
                                            DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        dto_expect_dto(s->request_evd, ep, cookie, DAT_DTO_SUCCESS, dto_iov_len(iov, n),
                       DAT_DTO_RDMA_READ);
}

void dto_post_recv(struct dto_side *s, DAT_EP_HANDLE ep, DAT_LMR_TRIPLET *iov, unsigned n,
                   uint64_t cookie)
{
        (void)s;
        DTO_ASSERT_EQ(dat_ep_post_recv(ep, (DAT_COUNT)n, iov, dto_cookie(cookie),
                                       DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
}

DAT_DTO_COMPLETION_EVENT_DATA dto_expect_recv(struct dto_side *s, DAT_EP_HANDLE ep,
                                              uint64_t cookie, DAT_SEG_LENGTH length)
{
        return dto_expect_dto(s->recv_evd, ep, cookie, DAT_DTO_SUCCESS, length, DAT_DTO_RECEIVE);
}

/* ---- a side --------------------------------------------------------------- */

static DAT_EVD_HANDLE make_evd(struct dto_side *s, DAT_COUNT qlen, DAT_EVD_FLAGS flags)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_evd_create(s->ia, qlen, DAT_HANDLE_NULL, flags, &evd);

        DTO_ASSERTF(r == DAT_SUCCESS, "dat_evd_create(%d, 0x%x): 0x%08x", qlen, flags, r);
        return evd;
}

static DAT_COUNT min_count(DAT_COUNT a, DAT_COUNT b)
{
        return a < b ? a : b;
}

static void side_ep_attr(struct dto_side *s)
{
        const struct dto_config *c = s->cfg;
        const DAT_IA_ATTR *ia = &s->ia_attr;
        DAT_EP_ATTR *a = &s->ep_attr;

        *a = (DAT_EP_ATTR){
                .service_type = DAT_SERVICE_TYPE_RC,
                .max_message_size = ia->max_message_size,
                .max_rdma_size = ia->max_rdma_size,
                .qos = DAT_QOS_BEST_EFFORT,
                .recv_completion_flags = c->recv_flags,
                .request_completion_flags = c->request_flags,
                .max_recv_dtos = c->max_recv_dtos,
                .max_request_dtos = c->max_request_dtos,
                .max_recv_iov = c->max_recv_iov ? c->max_recv_iov : ia->max_iov_segments_per_dto,
                .max_request_iov = c->max_request_iov ? c->max_request_iov
                                                      : ia->max_iov_segments_per_dto,
                .max_rdma_read_in = c->max_rdma_read ? c->max_rdma_read
                                                     : min_count(8, ia->max_rdma_read_per_ep_in),
                .max_rdma_read_out = c->max_rdma_read ? c->max_rdma_read
                                                      : min_count(8, ia->max_rdma_read_per_ep_out),
                .srq_soft_hw = DAT_HW_DEFAULT,
                .max_rdma_read_iov = ia->max_iov_segments_per_rdma_read,
                .max_rdma_write_iov = ia->max_iov_segments_per_rdma_write,
        };
        if (c->ep_attr)
                c->ep_attr(s, a);
}

static void side_open(struct dto_side *s)
{
        const struct dto_config *c = s->cfg;
        DAT_PROVIDER_ATTR pattr;
        DAT_RETURN r;

        r = dat_ia_open((DAT_NAME_PTR)dto_ia_name(), 16, &s->async_evd, &s->ia);
        DTO_ASSERTF(r == DAT_SUCCESS, "dat_ia_open(%s): 0x%08x", dto_ia_name(), r);
        DTO_ASSERT_EQ(dat_ia_query(s->ia, NULL, DAT_IA_FIELD_ALL, &s->ia_attr,
                                   DAT_PROVIDER_FIELD_ALL, &pattr), DAT_SUCCESS);
        DTO_ASSERT_EQ(dat_pz_create(s->ia, &s->pz), DAT_SUCCESS);
        s->request_evd = make_evd(s, c->evd_qlen, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
        s->recv_evd = c->shared_dto_evd ? s->request_evd
                                        : make_evd(s, c->evd_qlen, DAT_EVD_DTO_FLAG);
        s->conn_evd = make_evd(s, 16, DAT_EVD_CONNECTION_FLAG);
        if (s->role == DTO_SERVER)
                s->cr_evd = make_evd(s, 16, DAT_EVD_CR_FLAG);
        side_ep_attr(s);
        if (c->srq) {
                DAT_SRQ_ATTR sa = {
                        .max_recv_dtos = c->srq_max_recv_dtos,
                        .max_recv_iov = s->ep_attr.max_recv_iov,
                        .low_watermark = DAT_SRQ_LW_DEFAULT,
                };

                r = dat_srq_create(s->ia, s->pz, &sa, &s->srq);
                DTO_ASSERTF(r == DAT_SUCCESS, "dat_srq_create: 0x%08x", r);
        }
        s->n_eps = c->n_eps;
        for (unsigned i = 0; i < s->n_eps; i++) {
                if (c->srq)
                        r = dat_ep_create_with_srq(s->ia, s->pz, s->recv_evd, s->request_evd,
                                                   s->conn_evd, s->srq, &s->ep_attr, &s->ep[i]);
                else
                        r = dat_ep_create(s->ia, s->pz, s->recv_evd, s->request_evd, s->conn_evd,
                                          &s->ep_attr, &s->ep[i]);
                DTO_ASSERTF(r == DAT_SUCCESS, "dat_ep_create%s(ep %u): 0x%08x",
                            c->srq ? "_with_srq" : "", i, r);
        }
        s->mem = dto_mem_new(s, DAT_HANDLE_NULL, c->buf_len, c->buf_privileges);
}

struct dto_remote dto_exchange(struct dto_side *s, const struct dto_mem *mine)
{
        struct dto_remote out = {
                .addr = (DAT_VADDR)(uintptr_t)mine->buf,
                .len = mine->len,
                .rmr_context = mine->rmr_context,
        }, in;

        dto_put(s, &out, sizeof(out));
        dto_get(s, &in, sizeof(in));
        return in;
}

static void server_accept(struct dto_side *s)
{
        DAT_RETURN r = dat_psp_create(s->ia, DTO_CONN_QUAL, s->cr_evd, DAT_PSP_CONSUMER_FLAG,
                                      &s->psp);
        struct sockaddr_storage addr;

        DTO_ASSERTF(r == DAT_SUCCESS, "dat_psp_create: 0x%08x", r);
        memset(&addr, 0, sizeof(addr));
        memcpy(&addr, s->ia_attr.ia_address_ptr,
               s->ia_attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                 : sizeof(struct sockaddr_in));
        dto_put(s, &addr, sizeof(addr));
        for (unsigned i = 0; i < s->n_eps; i++) {
                DAT_EVENT ev = dto_wait_event(s->cr_evd);

                DTO_ASSERTF(ev.event_number == DAT_CONNECTION_REQUEST_EVENT,
                            "event 0x%x, expected a connection request", ev.event_number);
                r = dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, s->ep[i], 0,
                                  NULL);
                DTO_ASSERTF(r == DAT_SUCCESS, "dat_cr_accept(ep %u): 0x%08x", i, r);
                dto_expect_conn_event(s, DAT_CONNECTION_EVENT_ESTABLISHED);
        }
}

static void client_connect(struct dto_side *s)
{
        struct sockaddr_storage addr;

        dto_get(s, &addr, sizeof(addr));
        for (unsigned i = 0; i < s->n_eps; i++) {
                DAT_RETURN r = dat_ep_connect(s->ep[i], (DAT_IA_ADDRESS_PTR)&addr, DTO_CONN_QUAL,
                                              DTO_WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
                                              DAT_CONNECT_DEFAULT_FLAG);

                DTO_ASSERTF(r == DAT_SUCCESS, "dat_ep_connect(ep %u): 0x%08x", i, r);
                dto_expect_conn_event(s, DAT_CONNECTION_EVENT_ESTABLISHED);
        }
}

void dto_connect(struct dto_side *s)
{
        if (s->role == DTO_SERVER)
                server_accept(s);
        else
                client_connect(s);
        s->peer = dto_exchange(s, &s->mem);
}

/* ---- the two processes ---------------------------------------------------- */

static struct dto_config with_defaults(const struct dto_config *cfg)
{
        struct dto_config c = cfg ? *cfg : (struct dto_config){ 0 };

        if (!c.n_eps)
                c.n_eps = 1;
        if (!c.max_request_dtos)
                c.max_request_dtos = DTO_DEFAULT_DTOS;
        if (!c.max_recv_dtos)
                c.max_recv_dtos = DTO_DEFAULT_DTOS;
        if (!c.srq_max_recv_dtos)
                c.srq_max_recv_dtos = DTO_DEFAULT_DTOS;
        if (!c.evd_qlen)
                c.evd_qlen = DTO_DEFAULT_EVD_QLEN;
        if (!c.buf_len)
                c.buf_len = DTO_DEFAULT_BUF_LEN;
        if (!c.buf_privileges)
                c.buf_privileges = DAT_MEM_PRIV_ALL_FLAG;
        if (!c.timeout_ms)
                c.timeout_ms = DTO_RUN_TIMEOUT_MS;
        return c;
}

/* A role process ends with _exit (criterion's exit handlers belong to the
 * test process), which skips LeakSanitizer's check at exit: run it here,
 * after the IA is closed, so that what libdat leaks in a role fails the
 * test as it would in any other. */
static void check_leaks(void)
{
#ifdef __SANITIZE_ADDRESS__
        DTO_ASSERTF(__lsan_do_recoverable_leak_check() == 0,
                    "LeakSanitizer found leaks in this role process (see stderr)");
#endif
}

/* After the role: keeps the IA open until the peer's role is done too.  A
 * peer that is gone already (dto_die(), or it failed: the supervisor has its
 * status) is not waited for. */
static void final_barrier(struct dto_side *s)
{
        struct pollfd p = { .fd = s->sock, .events = POLLIN };
        uint64_t v = 0;

        if (send(s->sock, &v, sizeof(v), MSG_NOSIGNAL) != sizeof(v))
                return;
        DTO_ASSERTF(poll(&p, 1, DTO_SOCK_WAIT_MS) == 1, "the peer's role did not end within %d ms",
                    DTO_SOCK_WAIT_MS);
        (void)!recv(s->sock, &v, sizeof(v), 0);
}

static _Noreturn void role_main(enum dto_role role, const struct dto_config *cfg, int sock,
                                int report, dto_role_fn fn, void *arg)
{
        struct dto_side s = { .role = role, .cfg = cfg, .sock = sock, .arg = arg };
        unsigned host = role == DTO_SERVER ? 1 : 0;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        report_fd = report;
        if (transport == DTO_TCP_NETNS) {
                int r = test_net_enter(net, host);

                DTO_ASSERTF(r == 0, "test_net_enter(host %u): %d", host, r);
                datd_export_env(&datd[host]);
        } else {
                datd_export_env(&datd[0]);
        }
        for (const char *const *e = cfg->env; e && *e; e++)
                DTO_ASSERTF(putenv((char *)*e) == 0, "putenv(%s): %m", *e);
        if (cfg->pre_open)
                cfg->pre_open(&s);
        side_open(&s);
        if (!cfg->no_connect)
                dto_connect(&s);
        fn(&s, arg);
        final_barrier(&s);
        dat_ia_close(s.ia, DAT_CLOSE_ABRUPT_FLAG);
        check_leaks();
        _exit(0);
}

static int pidfd_of(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void read_report(int fd, char *buf, size_t size)
{
        ssize_t n = read(fd, buf, size - 1);

        buf[n > 0 ? n : 0] = '\0';
}

/* Waits for both children; a failure or the bound kills the other.
 * status[i]: exit status, 128+signal, or -1 when killed for the bound;
 * msg[i]: what the child reported. */
static void supervise(int timeout_ms, const int report[2], int status[2], char msg[2][1100])
{
        long long deadline = now_ms() + timeout_ms;
        struct pollfd p[2];
        unsigned left = 2;
        bool failed = false;

        for (unsigned i = 0; i < 2; i++) {
                p[i] = (struct pollfd){ .fd = pidfd_of(children[i]), .events = POLLIN };
                cr_assert_geq(p[i].fd, 0, "pidfd_open: %m");
                status[i] = -1;
                msg[i][0] = '\0';
        }
        while (left > 0 && !failed) {
                long long wait = deadline - now_ms();
                int r;

                if (wait <= 0)
                        break;
                r = poll(p, 2, (int)wait);
                if (r < 0 && errno == EINTR)
                        continue;
                cr_assert_geq(r, 0, "poll: %m");
                for (unsigned i = 0; i < 2; i++) {
                        int ws;

                        if (p[i].fd < 0 || !(p[i].revents & POLLIN))
                                continue;
                        cr_assert_eq(waitpid(children[i], &ws, 0), children[i]);
                        children[i] = 0;
                        close(p[i].fd);
                        p[i].fd = -1;
                        left--;
                        read_report(report[i], msg[i], sizeof(msg[i]));
                        status[i] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
                        if (status[i] == 128 + SIGKILL && strcmp(msg[i], DTO_DIED_ON_PURPOSE) == 0)
                                status[i] = 0; /* dto_die() */
                        if (status[i] != 0)
                                failed = true; /* the other cannot finish alone: killed below */
                }
        }
        for (unsigned i = 0; i < 2; i++) {
                if (p[i].fd >= 0) {
                        close(p[i].fd);
                        read_report(report[i], msg[i], sizeof(msg[i]));
                }
        }
        kill_children();
}

void dto_run(const struct dto_config *cfg, dto_role_fn server, dto_role_fn client, void *arg)
{
        static const char *const names[2] = { "server", "client" };
        struct dto_config c = with_defaults(cfg);
        dto_role_fn fns[2] = { server, client };
        int sp[2], report[2][2], status[2];
        char msg[2][1100];
        bool told[2];

        cr_assert_leq(c.n_eps, DTO_MAX_EPS);
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        for (unsigned i = 0; i < 2; i++) {
                cr_assert_eq(pipe2(report[i], O_CLOEXEC | O_NONBLOCK), 0);
        }
        fflush(NULL);
        for (unsigned i = 0; i < 2; i++) {
                children[i] = fork();
                cr_assert_geq(children[i], 0, "fork: %m");
                if (children[i] == 0) {
                        close(sp[1 - i]);
                        close(report[i][0]);
                        role_main(i == 0 ? DTO_SERVER : DTO_CLIENT, &c, sp[i], report[i][1],
                                  fns[i], arg);
                }
        }
        close(sp[0]);
        close(sp[1]);
        close(report[0][1]);
        close(report[1][1]);
        supervise(c.timeout_ms, (int[2]){ report[0][0], report[1][0] }, status, msg);
        close(report[0][0]);
        close(report[1][0]);
        /* The side that failed first names the cause (the other usually only
         * saw it go, or was killed for it before its status was taken). */
        for (unsigned i = 0; i < 2; i++)
                told[i] = status[i] != 0 && msg[i][0] && strcmp(msg[i], DTO_DIED_ON_PURPOSE) != 0 &&
                          !strstr(msg[i], "peer process is gone");
        if (told[0] && told[1]) /* which came first is not known here: both */
                cr_assert_fail("server failed: %s\n  client failed: %s", msg[0], msg[1]);
        for (unsigned i = 0; i < 2; i++)
                if (told[i])
                        cr_assert_fail("%s failed: %s", names[i], msg[i]);
        for (unsigned i = 0; i < 2; i++)
                if (status[i] != 0 && status[i] != -1)
                        cr_assert_fail("%s failed (status %d): %s", names[i], status[i],
                                       msg[i][0] ? msg[i] : "no message (crashed? see stderr)");
        for (unsigned i = 0; i < 2; i++)
                cr_assert_eq(status[i], 0, "%s did not finish within %d ms", names[i],
                             c.timeout_ms);
}
