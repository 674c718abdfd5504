/* The DTO test fixture: one test body, three transports.
 *
 * A test program is compiled once per transport from the same source, with
 * -DDTO_TRANSPORT=DTO_SHM, DTO_TCP_LOCAL or DTO_TCP_NETNS (tests/dto/local.mk);
 * its suites are named after the transport (DTO_SUITE(send) is send_shm,
 * send_tcp or send_netns).  The issue: "the shm transport's test suite runs
 * unchanged against the tcp transport across network namespaces".
 *
 *   DTO_SHM        the "datd-shm" IA, one datd, both processes on this host
 *   DTO_TCP_LOCAL  the "datd-tcp" IA, one datd, both processes on this host
 *   DTO_TCP_NETNS  the "datd-tcp" IA on two hosts (network namespaces,
 *                  tests/netns.h), a datd in each: the server on host 1,
 *                  the client on host 0 (skipped without root and `ip`)
 *
 * A test:
 *
 *      DTO_TEST_SUITE(send);
 *
 *      static void server(struct dto_side *s, void *arg) { ... }
 *      static void client(struct dto_side *s, void *arg) { ... }
 *
 *      // dat_ep_post_send(3DAT): <the rule>
 *      Test(DTO_SUITE(send), the_rule)
 *      {
 *              struct dto_config cfg = { .buf_len = 1 << 20 };
 *
 *              dto_run(&cfg, server, client, NULL);
 *      }
 *
 * dto_run() forks two processes before either opens an IA (libdat starts
 * threads): the server and the client.  Each sets up a side (struct
 * dto_side: IA, PZ, EVDs, EPs with the configured attributes, an optional
 * SRQ, a registered buffer), the two connect (unless cfg.no_connect), swap
 * their buffers' descriptions (s->peer), and run their role function.
 * After both roles returned, a last barrier, then each closes its IA and
 * exits.  The test process only supervises: it waits for both with a bound
 * (cfg.timeout_ms), SIGKILLs both (by PID) as soon as one fails or the
 * bound passes, and fails the test with the failed side's message.
 *
 * Inside a role, never use cr_assert (criterion's assertions do not work in
 * a forked process): use DTO_ASSERT*, which print the reason and end the
 * process with a failure that the supervisor reports.
 *
 * The two roles talk through a socketpair the fixture keeps (s->sock):
 * dto_barrier(), dto_put()/dto_get(), every wait bounded.  Use it to order
 * the two sides ("the receive is posted", "now send"), never sleeps. */
#ifndef DATD_TESTS_DTO_DTO_FIXTURE_H
#define DATD_TESTS_DTO_DTO_FIXTURE_H

#include <dat2/udat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DTO_SHM 1
#define DTO_TCP_LOCAL 2
#define DTO_TCP_NETNS 3

/* The criterion timeout of every suite (one value for every suite of a
 * program: criterion 2.4 leaks otherwise).  It bounds setup (datds, network
 * namespaces) + dto_run() + teardown; dto_run() has its own, smaller bound. */
#define DTO_TEST_TIMEOUT 60

/* dto_run()'s default bound on both roles together. */
#define DTO_RUN_TIMEOUT_MS 20000

/* How long a role waits for an event that must come (no timing is
 * asserted: this only bounds a test that fails). */
#define DTO_WAIT_US (5 * 1000 * 1000)

/* EP pairs one dto_run() can connect. */
#define DTO_MAX_EPS 8

/* The conn_qual the server listens on (a private datd per test). */
#define DTO_CONN_QUAL 7000

/* Default sizes. */
#define DTO_DEFAULT_DTOS 64
#define DTO_DEFAULT_EVD_QLEN 256
#define DTO_DEFAULT_BUF_LEN (256 * 1024)

#define DTO_ANY_LENGTH ((DAT_SEG_LENGTH)-1)     /* dto_expect_dto: length not checked */

enum dto_role { DTO_SERVER, DTO_CLIENT };

struct dto_side;

/* What both sides set up.  Zero fields take the default in the comment. */
struct dto_config {
        unsigned n_eps;                         /* EP pairs (1..DTO_MAX_EPS); 0: 1 */
        DAT_COUNT max_request_dtos;             /* 0: DTO_DEFAULT_DTOS */
        DAT_COUNT max_recv_dtos;                /* 0: DTO_DEFAULT_DTOS */
        DAT_COUNT max_request_iov;              /* 0: the IA's max_iov_segments_per_dto */
        DAT_COUNT max_recv_iov;                 /* 0: the IA's max_iov_segments_per_dto */
        DAT_COUNT max_rdma_read;                /* max_rdma_read_in and _out; 0: min(8, IA's) */
        DAT_COMPLETION_FLAGS request_flags;     /* EP attr request_completion_flags */
        DAT_COMPLETION_FLAGS recv_flags;        /* EP attr recv_completion_flags */
        bool srq;                               /* the EPs of a side share one SRQ */
        DAT_COUNT srq_max_recv_dtos;            /* 0: DTO_DEFAULT_DTOS */
        bool shared_dto_evd;                    /* one EVD for requests and receives */
        DAT_COUNT evd_qlen;                     /* each DTO EVD; 0: DTO_DEFAULT_EVD_QLEN */
        DAT_VLEN buf_len;                       /* each side's buffer; 0: DTO_DEFAULT_BUF_LEN */
        DAT_MEM_PRIV_FLAGS buf_privileges;      /* its LMR's; 0: DAT_MEM_PRIV_ALL_FLAG */
        bool no_connect;                        /* EPs left Unconnected: roles call dto_connect() */
        int timeout_ms;                         /* bound on dto_run(); 0: DTO_RUN_TIMEOUT_MS */
        /* Last word on a side's EP attributes (after the fields above), NULL: none. */
        void (*ep_attr)(const struct dto_side *s, DAT_EP_ATTR *attr);
        /* Environment set in both sides before they open their IA (e.g.
         * "DATD_RNR_TIMEOUT_MS=300"), NULL-terminated, NULL: none.  For a
         * datd setting, see dto_datd_config. */
        const char *const *env;
        /* Runs in each role process just before it opens its IA (after the
         * host's namespace and env are set): e.g. setresuid for a
         * different-user test.  NULL: none. */
        void (*pre_open)(const struct dto_side *s);
};

/* A registered buffer of this side. */
struct dto_mem {
        unsigned char *buf;                     /* page-aligned (mmap) */
        DAT_VLEN len;
        DAT_LMR_HANDLE lmr;
        DAT_LMR_CONTEXT lmr_context;
        DAT_RMR_CONTEXT rmr_context;            /* the LMR's (dat_lmr_create) */
        DAT_MEM_PRIV_FLAGS privileges;
        bool shared;                            /* libdat's shared memory (DTO_SHARED_MEM) */
};

/* The peer's description of one of its buffers. */
struct dto_remote {
        DAT_VADDR addr;
        DAT_VLEN len;
        DAT_RMR_CONTEXT rmr_context;
};

struct dto_side {
        enum dto_role role;
        const struct dto_config *cfg;           /* with the defaults filled in */
        int sock;                               /* to the peer process (SOCK_SEQPACKET) */
        DAT_IA_HANDLE ia;
        DAT_EVD_HANDLE async_evd;
        DAT_IA_ATTR ia_attr;
        DAT_PZ_HANDLE pz;
        DAT_EVD_HANDLE request_evd;             /* DTO + RMR bind */
        DAT_EVD_HANDLE recv_evd;                /* == request_evd with cfg.shared_dto_evd */
        DAT_EVD_HANDLE conn_evd;
        DAT_EVD_HANDLE cr_evd;                  /* the server's */
        DAT_PSP_HANDLE psp;                     /* the server's */
        DAT_SRQ_HANDLE srq;                     /* cfg.srq, else DAT_HANDLE_NULL */
        unsigned n_eps;
        DAT_EP_HANDLE ep[DTO_MAX_EPS];          /* ep[i] is connected to the peer's ep[i] */
        DAT_EP_ATTR ep_attr;                    /* what the EPs were created with */
        struct dto_mem mem;                     /* the registered buffer */
        struct dto_remote peer;                 /* the peer's mem (set by dto_connect) */
        void *arg;                              /* dto_run()'s arg */
};

typedef void (*dto_role_fn)(struct dto_side *s, void *arg);

/* A datd.conf for dto_setup_config() (NULL: the harness's default; with
 * DTO_TCP_NETNS, the netns host config).  Set before the suite's .init. */
extern const char *dto_datd_config;

/* The transport this program was built for. */
int dto_transport(void);
const char *dto_transport_name(void);
/* "datd-shm" or "datd-tcp". */
const char *dto_ia_name(void);

/* The datd of a host (0: the client's, 1: the server's; with one datd both
 * are the same) and the net (NULL unless DTO_TCP_NETNS), for tests that
 * stop a datd or look at it (datctl --address=bus_address). */
struct datd_instance *dto_datd(unsigned host);
struct test_net *dto_net(void);

/* .init / .fini: the datd(s) (and hosts) of the transport.  .fini SIGKILLs
 * what dto_run() left running. */
void dto_setup(int transport);
void dto_teardown(void);

/* Runs server in one process and client in another (see above); returns
 * when both succeeded, fails the test (cr_assert) otherwise. */
void dto_run(const struct dto_config *cfg, dto_role_fn server, dto_role_fn client, void *arg);

/* ---- inside a role: assertions -------------------------------------------- */

_Noreturn void dto_fail(const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#define DTO_FAIL(...) dto_fail(__FILE__, __LINE__, __VA_ARGS__)
#define DTO_ASSERT(cond)                                                                \
        do {                                                                            \
                if (!(cond))                                                            \
                        dto_fail(__FILE__, __LINE__, "%s", #cond);                      \
        } while (0)
#define DTO_ASSERTF(cond, ...)                                                          \
        do {                                                                            \
                if (!(cond))                                                            \
                        dto_fail(__FILE__, __LINE__, __VA_ARGS__);                      \
        } while (0)
/* Scalars (DAT_RETURN, counts, statuses): both printed in hex. */
#define DTO_ASSERT_EQ(a, b)                                                             \
        do {                                                                            \
                unsigned long long a_ = (unsigned long long)(a);                        \
                unsigned long long b_ = (unsigned long long)(b);                        \
                if (a_ != b_)                                                           \
                        dto_fail(__FILE__, __LINE__, "%s == %s: 0x%llx != 0x%llx", #a,  \
                                 #b, a_, b_);                                           \
        } while (0)
#define DTO_ASSERT_NEQ(a, b)                                                            \
        do {                                                                            \
                unsigned long long a_ = (unsigned long long)(a);                        \
                unsigned long long b_ = (unsigned long long)(b);                        \
                if (a_ == b_)                                                           \
                        dto_fail(__FILE__, __LINE__, "%s != %s: both 0x%llx", #a, #b,   \
                                 a_);                                                   \
        } while (0)

/* The DAT_RETURN a refusal must have (type | subtype). */
#define DTO_ERR(type, sub) ((DAT_RETURN)(DAT_CLASS_ERROR | (type) | (sub)))
/* Only the error type (DAT_GET_TYPE) of r. */
#define DTO_ASSERT_TYPE(r, type) DTO_ASSERT_EQ(DAT_GET_TYPE(r), (type))

/* Ends this role process on purpose (SIGKILL to itself: no cleanup, as a
 * crash); the supervisor counts it as this side's success.  For "peer
 * dies" tests: the other role goes on and checks what it sees. */
_Noreturn void dto_die(struct dto_side *s);

/* ---- inside a role: the two processes ------------------------------------- */

/* Both sides call it; returns when both did. */
void dto_barrier(struct dto_side *s);
/* One message of n bytes (<= 4096) to / from the peer process (bounded). */
void dto_put(struct dto_side *s, const void *p, size_t n);
void dto_get(struct dto_side *s, void *p, size_t n);
void dto_put_u64(struct dto_side *s, uint64_t v);
uint64_t dto_get_u64(struct dto_side *s);

/* cfg.no_connect: connects ep[0..n_eps) (both sides call it; the client
 * connects, the server accepts) and swaps mem descriptions into s->peer.
 * ESTABLISHED consumed on both. */
void dto_connect(struct dto_side *s);

/* Sends mine to the peer and returns the peer's (both sides call it). */
struct dto_remote dto_exchange(struct dto_side *s, const struct dto_mem *mine);

/* ---- inside a role: memory ------------------------------------------------ */

/* Another registered buffer (mmap, dat_lmr_create in pz; pz NULL: s->pz). */
struct dto_mem dto_mem_new(struct dto_side *s, DAT_PZ_HANDLE pz, DAT_VLEN len,
                           DAT_MEM_PRIV_FLAGS privileges);
void dto_mem_free(struct dto_mem *m);
/* The same in shared memory libdat provides (DAT_MEM_TYPE_SHARED_VIRTUAL,
 * a name of its own): what dto_mem_new makes when the environment has
 * DTO_SHARED_MEM (the shmshared programs). */
struct dto_mem dto_shared_mem_new(struct dto_side *s, DAT_PZ_HANDLE pz, DAT_VLEN len,
                                  DAT_MEM_PRIV_FLAGS privileges);

/* A local segment of m: [off, off+len). */
DAT_LMR_TRIPLET dto_iov(const struct dto_mem *m, DAT_VLEN off, DAT_VLEN len);
/* A remote segment of r: [off, off+len). */
DAT_RMR_TRIPLET dto_riov(const struct dto_remote *r, DAT_VLEN off, DAT_VLEN len);

/* Checksummed patterns: byte i of a pattern depends on seed and i, so a
 * lost, doubled, shifted or foreign byte is found.  dto_verify asserts
 * (naming the first differing offset). */
void dto_fill(void *p, size_t len, uint64_t seed);
void dto_verify(const void *p, size_t len, uint64_t seed);
bool dto_matches(const void *p, size_t len, uint64_t seed);
uint64_t dto_checksum(const void *p, size_t len);
/* The same pattern from stream offset start on: a message gathered from or
 * scattered to several segments is filled / verified segment by segment
 * (dto_fill(p, n, seed) == dto_fill_at(p, n, seed, 0)). */
void dto_fill_at(void *p, size_t len, uint64_t seed, size_t start);
void dto_verify_at(const void *p, size_t len, uint64_t seed, size_t start);
/* Fills each of n segments with seed + i, verifies likewise. */
void dto_fill_iov(const DAT_LMR_TRIPLET *iov, unsigned n, uint64_t seed);
void dto_verify_iov(const DAT_LMR_TRIPLET *iov, unsigned n, uint64_t seed);

/* The transfer sizes every DTO kind is tried with: small ones (inline in the
 * channel; up to 64 KiB + 3, across DTO_CMA_THRESHOLD = 16 KiB) and large
 * ones (1 MiB, 16 MiB = the transports' max_message_size). */
extern const DAT_VLEN dto_small_sizes[];
extern const unsigned dto_n_small_sizes;
extern const DAT_VLEN dto_large_sizes[];
extern const unsigned dto_n_large_sizes;
#define DTO_LARGEST_SIZE ((DAT_VLEN)16 << 20)

/* ---- inside a role: events ------------------------------------------------ */

static inline DAT_DTO_COOKIE dto_cookie(uint64_t v)
{
        DAT_DTO_COOKIE c;

        c.as_64 = v;
        return c;
}

/* The next event on evd, waited for up to DTO_WAIT_US (asserts). */
DAT_EVENT dto_wait_event(DAT_EVD_HANDLE evd);
/* Asserts no event comes within usec (dat_evd_wait -> DAT_TIMEOUT_EXPIRED). */
void dto_expect_no_event(DAT_EVD_HANDLE evd, DAT_TIMEOUT usec);

/* This process's CPU time (all its threads: the IA's progress thread too)
 * and the monotonic clock, in seconds: a role that must sleep checks that
 * the first moved little while the second moved. */
double dto_cpu_seconds(void);
double dto_wall_seconds(void);
/* Every thread of another process but its main thread (its libdat's
 * progress thread above all), stopped under ptrace: that process's data
 * paths then move only when its application calls libdat.  Frozen only
 * while each of them sleeps in a system call (holding none of libdat's
 * locks), which an idle process's threads do within DTO_WAIT_US. */
#define DTO_FROZEN_MAX 16
struct dto_frozen {
        pid_t tids[DTO_FROZEN_MAX];
        unsigned n;
};
void dto_freeze_helpers(pid_t pid, struct dto_frozen *f);
void dto_thaw(struct dto_frozen *f);

/* Asserts nothing is queued now (dat_evd_dequeue -> DAT_QUEUE_EMPTY). */
void dto_expect_empty(DAT_EVD_HANDLE evd);

/* Waits for the next event on evd and asserts it is a DTO completion of ep
 * (DAT_HANDLE_NULL: any EP) with that cookie, status, length (DTO_ANY_LENGTH:
 * not checked) and operation.  Returns its data. */
DAT_DTO_COMPLETION_EVENT_DATA dto_expect_dto(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep,
                                             uint64_t cookie, DAT_DTO_COMPLETION_STATUS status,
                                             DAT_SEG_LENGTH length, DAT_DTOS operation);
/* Same, on an event already taken. */
DAT_DTO_COMPLETION_EVENT_DATA dto_check_dto(const DAT_EVENT *ev, DAT_EP_HANDLE ep,
                                            uint64_t cookie, DAT_DTO_COMPLETION_STATUS status,
                                            DAT_SEG_LENGTH length, DAT_DTOS operation);

/* Waits for a connection event on s->conn_evd and asserts its number. */
DAT_EVENT dto_expect_conn_event(struct dto_side *s, DAT_EVENT_NUMBER number);

/* Polls evd with dat_evd_dequeue (no dat_evd_wait) until an event comes,
 * for up to DTO_WAIT_US (asserts). */
DAT_EVENT dto_poll_event(DAT_EVD_HANDLE evd);

/* A thread blocked in dat_evd_wait(evd, timeout, threshold): for "wakes
 * only when ..." tests.  dto_waiter_start returns once the thread owns the
 * EVD (dat_evd_wait(3DAT): then every other dequeue is DAT_INVALID_STATE),
 * so anything that arrives afterwards arrives while it sleeps. */
struct dto_waiter {
        DAT_EVD_HANDLE evd;
        DAT_COUNT threshold;
        DAT_TIMEOUT timeout;
        pthread_t thread;
        DAT_RETURN ret;
        DAT_EVENT event;
        DAT_COUNT nmore;
        atomic_bool done;
};
void dto_waiter_start(struct dto_waiter *w, DAT_EVD_HANDLE evd, DAT_COUNT threshold,
                      DAT_TIMEOUT timeout);
/* Asserts the waiter has not returned within ms milliseconds. */
void dto_waiter_expect_blocked(struct dto_waiter *w, unsigned ms);
/* Joins it (bounded by its timeout and a margin; asserts). */
void dto_waiter_join(struct dto_waiter *w);

/* Sum of the segments' lengths. */
DAT_SEG_LENGTH dto_iov_len(const DAT_LMR_TRIPLET *iov, unsigned n);

/* Post and wait for its successful completion on the EP's EVD (asserts the
 * post succeeded and the completion: cookie, DAT_DTO_SUCCESS, length, op). */
void dto_send_wait(struct dto_side *s, DAT_EP_HANDLE ep, DAT_LMR_TRIPLET *iov, unsigned n,
                   uint64_t cookie);
void dto_rdma_write_wait(struct dto_side *s, DAT_EP_HANDLE ep, DAT_LMR_TRIPLET *iov, unsigned n,
                         uint64_t cookie, const DAT_RMR_TRIPLET *remote);
void dto_rdma_read_wait(struct dto_side *s, DAT_EP_HANDLE ep, DAT_LMR_TRIPLET *iov, unsigned n,
                        uint64_t cookie, const DAT_RMR_TRIPLET *remote);
/* dat_ep_post_recv (asserting DAT_SUCCESS), and waiting for one. */
void dto_post_recv(struct dto_side *s, DAT_EP_HANDLE ep, DAT_LMR_TRIPLET *iov, unsigned n,
                   uint64_t cookie);
DAT_DTO_COMPLETION_EVENT_DATA dto_expect_recv(struct dto_side *s, DAT_EP_HANDLE ep,
                                              uint64_t cookie, DAT_SEG_LENGTH length);

/* ---- per-transport suites ------------------------------------------------- */

#define DTO_STR_(x) #x
#define DTO_STR(x) DTO_STR_(x)
#define DTO_CAT_(a, b) a##_##b
#define DTO_CAT(a, b) DTO_CAT_(a, b)

#ifdef DTO_TRANSPORT
#if DTO_TRANSPORT == DTO_SHM && defined(DTO_SHARED_MEM)
#define DTO_TRANSPORT_SUFFIX shmshared
#elif DTO_TRANSPORT == DTO_SHM
#define DTO_TRANSPORT_SUFFIX shm
#elif DTO_TRANSPORT == DTO_TCP_LOCAL && defined(DTO_TCP_SOCKBUF)
#define DTO_TRANSPORT_SUFFIX tcpsmall
#elif DTO_TRANSPORT == DTO_TCP_LOCAL
#define DTO_TRANSPORT_SUFFIX tcp
#elif DTO_TRANSPORT == DTO_TCP_NETNS
#define DTO_TRANSPORT_SUFFIX netns
#else
#error "DTO_TRANSPORT must be DTO_SHM, DTO_TCP_LOCAL or DTO_TCP_NETNS"
#endif

/* The suite name for this program's transport: DTO_SUITE(send) -> send_shm. */
#define DTO_SUITE(name) DTO_CAT(name, DTO_TRANSPORT_SUFFIX)

static inline void dto_suite_init(void)
{
#ifdef DTO_TCP_SOCKBUF
        /* Issue 6: the same bodies over sockets whose buffers hold a few
         * KiB, so that every frame goes in pieces (partial reads and
         * writes, back-pressure); libdat's tcp channel honours this. */
        setenv("DATD_TCP_SOCKBUF", DTO_STR(DTO_TCP_SOCKBUF), 1);
#endif
#ifdef DTO_SHARED_MEM
        /* The same bodies with every buffer in shared memory libdat
         * provides (DAT_MEM_TYPE_SHARED_VIRTUAL): on shm the peer maps it
         * and its RDMA Writes go straight in (libdat/shm_direct.h). */
        setenv("DTO_SHARED_MEM", "1", 1);
#endif
        dto_setup(DTO_TRANSPORT);
}

/* A suite with the fixture's .init/.fini and the common timeout. */
#define DTO_TEST_SUITE(name)                                                            \
        TestSuite(DTO_SUITE(name), .init = dto_suite_init, .fini = dto_teardown,        \
                  .timeout = DTO_TEST_TIMEOUT)
#endif

#endif
