/* datbench lat and bw: the data path, over one connection.
 *
 * Memory: each side registers one LMR (all privileges) of the length the
 * client asks for in its connection private data, and tells the other the
 * address, length and rmr_context of it (struct db_pd, both ways).  Its
 * first half is where the peer's data lands (dst), the second half what is
 * sent from (src), so that a write-lat side never sees its own byte; a
 * small control area follows.
 *
 * lat (half round trip = one iteration's time / 2; an iteration is
 * everything from one post to the next, reposting and reaping included):
 *   send   the client posts a Send of SIZE; the server's receive completes,
 *          it reposts and Sends SIZE back; the client's receive completes.
 *   write  poll: like ib_write_lat, each side RDMA-writes SIZE into the
 *          other's dst, the last byte carrying a new value; the receiver
 *          spins on that byte (and on dat_evd_dequeue of its request EVD,
 *          which reaps its own write and gives a software provider the
 *          CPU, as a CQ poll would).  block: each write is followed by a
 *          zero-byte Send (on a reliable connection it arrives after the
 *          write's data) whose receive completion ends dat_evd_wait.
 *   Completions: poll = spin on dat_evd_dequeue; block = dat_evd_wait with
 *   a threshold of 1.  Request completions are reaped by dat_evd_dequeue
 *   every iteration in both, by each side right after its posts, while its
 *   message is in flight (as ping-pong programs over RDMA do): none is
 *   looked for between an answer's arrival and the next post.
 * bw (a batch of about 64 MiB, at least one op, is timed from its first
 *   post until the server's zero-byte answer to the client's zero-byte
 *   "done" Send arrives, so that delivery, not local completion, ends it):
 *   write / read  up to -W RDMA writes / reads of SIZE outstanding, each
 *                 refilled as one completes; the server does nothing but
 *                 answer "done".
 *   send          the same with Sends; the server keeps up to 2 × -W
 *                 receives posted (all into its dst: the data is not
 *                 looked at) and answers once it has received the batch.
 *   Completions: poll = both sides spin on dat_evd_dequeue; block = when
 *   nothing is there, they sleep in dat_evd_wait (threshold 1) as a
 *   program streaming over blocking sockets sleeps in send/recv, and the
 *   IA's progress thread moves the bytes.
 *
 * Warm-up: a calibration phase of a few iterations, then at most -w
 * iterations or a fifth of -t, unmeasured; the measured phase gets at most
 * -n iterations or -t seconds, judged from the warm-up's pace. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench/common/proc.h"
#include "bench/datbench/datbench.h"

#define DB_MAGIC 0x64617462u    /* "datb" */
#define DB_CTL_AREA 4096
#define DB_BATCH_BYTES (64u << 20)
#define DB_CALIBRATE_ITERS 64
#define DB_MIN_ITERS 100
#define DB_MIN_BATCHES 5

/* Connection private data, both ways. */
struct db_pd {
        uint32_t magic;
        uint32_t rmr_context;
        uint64_t addr;          /* the LMR's first byte, as the peer addresses it */
        uint64_t len;           /* client -> server: what to register; back: what was */
        uint32_t shared;        /* client -> server: register shared memory (--shared-mem) */
        uint32_t reserved;
};

struct db_ctl {
        uint32_t magic;
        uint32_t test;          /* enum db_test */
        uint32_t block;         /* blocking waits */
        uint32_t window;        /* bw */
        uint64_t size;
        uint64_t count;         /* lat: iterations; bw: batches */
        uint64_t ops;           /* bw: DTOs per batch */
};

struct db_conn {
        struct db_ia d;
        DAT_EVD_HANDLE req_evd, rcv_evd;
        DAT_EP_HANDLE ep;
        unsigned char *mem;     /* dst | src | control area */
        bool shared;            /* mem is libdat's shared memory (--shared-mem) */
        size_t half;            /* dst and src length */
        size_t mem_len;
        DAT_LMR_HANDLE lmr;
        DAT_LMR_CONTEXT lmr_context;
        DAT_RMR_CONTEXT rmr_context;
        struct db_ctl *ctl_tx, *ctl_rx;
        unsigned char *note;    /* zero-byte Sends land here (8 bytes posted) */
        uint64_t remote_addr, remote_len;
        DAT_RMR_CONTEXT remote_rmr;
        bool remote_shared;     /* the server: the client asked for shared memory */
        unsigned req_out;       /* request DTOs not reaped yet */
        DAT_COUNT max_req, max_rcv;
};

static inline unsigned char *dst(struct db_conn *c)
{
        return c->mem;
}

static inline unsigned char *src(struct db_conn *c)
{
        return c->mem + c->half;
}

/* ---- setting up ------------------------------------------------------------ */

static void mem_setup(struct db_conn *c, size_t half)
{
        DAT_REGION_DESCRIPTION region;
        DAT_VLEN reg_len;
        DAT_VADDR reg_addr;

        c->half = half;
        c->mem_len = 2 * half + DB_CTL_AREA;
        if (c->shared) {
                /* Memory libdat maps from a shared memory object this
                 * process names: a name of its own. */
                char cookie[DAT_LMR_COOKIE_SIZE] = { 0 };

                snprintf(cookie, sizeof(cookie), "datbench-%d-%lx", (int)getpid(),
                         (unsigned long)bench_now_ns());
                region.for_shared_memory = (DAT_SHARED_MEMORY){ .virtual_address = NULL,
                                                                 .shared_memory_id = &cookie };
                DB_CHECK(dat_lmr_create(c->d.ia, DAT_MEM_TYPE_SHARED_VIRTUAL, region, c->mem_len,
                                        c->d.pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &c->lmr,
                                        &c->lmr_context, &c->rmr_context, &reg_len, &reg_addr));
                c->mem = (unsigned char *)(uintptr_t)reg_addr;
        } else {
                c->mem = mmap(NULL, c->mem_len, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (c->mem == MAP_FAILED)
                        bench_die("datbench: cannot map %zu bytes: %s\n", c->mem_len,
                                  strerror(errno));
                region.for_va = c->mem;
                DB_CHECK(dat_lmr_create(c->d.ia, DAT_MEM_TYPE_VIRTUAL, region, c->mem_len,
                                        c->d.pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &c->lmr,
                                        &c->lmr_context, &c->rmr_context, &reg_len, &reg_addr));
        }
        /* Touch every page now, not during the measurement. */
        memset(c->mem, 0, c->mem_len);
        c->ctl_tx = (struct db_ctl *)(c->mem + 2 * half);
        c->ctl_rx = (struct db_ctl *)(c->mem + 2 * half + 256);
        c->note = c->mem + 2 * half + 512;
}

/* The EP and its two DTO EVDs, with queues deep enough for the window. */
static void ep_setup(struct db_conn *c, unsigned window)
{
        DAT_COUNT want = (DAT_COUNT)(2 * window + 8), max = c->d.attr.max_dto_per_ep;
        DAT_COUNT qmax = c->d.attr.max_evd_qlen;
        DAT_EP_HANDLE probe;
        DAT_EP_PARAM param;

        if (max > 0 && want > max)
                want = max;
        if (qmax > 8 && want + 8 > qmax)
                want = qmax - 8;
        c->max_req = want;
        c->max_rcv = want;
        DB_CHECK(dat_evd_create(c->d.ia, want + 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &c->req_evd));
        DB_CHECK(dat_evd_create(c->d.ia, want + 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &c->rcv_evd));
        /* The provider's defaults, with the queue depths changed. */
        DB_CHECK(dat_ep_create(c->d.ia, c->d.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
                               NULL, &probe));
        DB_CHECK(dat_ep_query(probe, DAT_EP_FIELD_ALL, &param));
        DB_CHECK(dat_ep_free(probe));
        param.ep_attr.max_recv_dtos = want;
        param.ep_attr.max_request_dtos = want;
        DB_CHECK(dat_ep_create(c->d.ia, c->d.pz, c->rcv_evd, c->req_evd, c->d.cm_evd,
                               &param.ep_attr, &c->ep));
}

static void pd_fill(const struct db_conn *c, struct db_pd *pd, uint64_t len)
{
        *pd = (struct db_pd){ .magic = DB_MAGIC, .rmr_context = c->rmr_context,
                              .addr = (uint64_t)(uintptr_t)c->mem, .len = len,
                              .shared = c->shared };
}

static void pd_take(struct db_conn *c, const void *data, DAT_COUNT size)
{
        struct db_pd pd;

        if (size < (DAT_COUNT)sizeof(pd))
                bench_die("datbench: the peer sent %d bytes of private data\n", size);
        memcpy(&pd, data, sizeof(pd));
        if (pd.magic != DB_MAGIC)
                bench_die("datbench: the peer is not datbench\n");
        c->remote_addr = pd.addr;
        c->remote_len = pd.len;
        c->remote_rmr = pd.rmr_context;
        c->remote_shared = pd.shared != 0;
}

static void conn_close(struct db_conn *c)
{
        DB_CHECK(dat_ep_free(c->ep));
        DB_CHECK(dat_lmr_free(c->lmr));
        DB_CHECK(dat_evd_free(c->req_evd));
        DB_CHECK(dat_evd_free(c->rcv_evd));
        /* Shared memory went with its LMR. */
        if (!c->shared)
                munmap(c->mem, c->mem_len);
}

/* ---- posting and reaping --------------------------------------------------- */

static inline DAT_LMR_TRIPLET local(const struct db_conn *c, const void *p, size_t len)
{
        return (DAT_LMR_TRIPLET){ .virtual_address = (DAT_VADDR)(uintptr_t)p,
                                  .segment_length = len, .lmr_context = c->lmr_context };
}

static inline void post_recv(struct db_conn *c, void *p, size_t len)
{
        DAT_LMR_TRIPLET iov = local(c, p, len);
        DAT_DTO_COOKIE cookie = { .as_64 = 0 };

        DB_CHECK(dat_ep_post_recv(c->ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG));
}

static inline void post_send(struct db_conn *c, const void *p, size_t len)
{
        DAT_LMR_TRIPLET iov = local(c, p, len);
        DAT_DTO_COOKIE cookie = { .as_64 = 0 };

        /* A zero-byte Send has no segment. */
        DB_CHECK(dat_ep_post_send(c->ep, len ? 1 : 0, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG));
        c->req_out++;
}

static inline void post_rdma(struct db_conn *c, bool write, size_t len)
{
        DAT_LMR_TRIPLET iov = local(c, write ? src(c) : dst(c), len);
        DAT_RMR_TRIPLET remote = { .virtual_address = c->remote_addr, .segment_length = len,
                                   .rmr_context = c->remote_rmr };
        DAT_DTO_COOKIE cookie = { .as_64 = 0 };

        if (write)
                DB_CHECK(dat_ep_post_rdma_write(c->ep, 1, &iov, cookie, &remote,
                                                DAT_COMPLETION_DEFAULT_FLAG));
        else
                DB_CHECK(dat_ep_post_rdma_read(c->ep, 1, &iov, cookie, &remote,
                                               DAT_COMPLETION_DEFAULT_FLAG));
        c->req_out++;
}

static void dto_check(const DAT_EVENT *ev)
{
        if (ev->event_number != DAT_DTO_COMPLETION_EVENT)
                bench_die("datbench: event 0x%x instead of a DTO completion\n", ev->event_number);
        if (ev->event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
                bench_die("datbench: DTO completed with status %d\n",
                          (int)ev->event_data.dto_completion_event_data.status);
}

/* Reaps the request completions there are; returns how many. */
static inline unsigned reap_requests(struct db_conn *c)
{
        unsigned n = 0;
        DAT_EVENT ev;

        while (c->req_out > 0 && dat_evd_dequeue(c->req_evd, &ev) == DAT_SUCCESS) {
                dto_check(&ev);
                c->req_out--;
                n++;
        }
        return n;
}

struct spin {
        uint64_t deadline;              /* 0: not read yet */
        unsigned n;
};

/* The clock is read at the first check, not here: a spin starts on every
 * receive of a latency test, and a clock read there (~25 ns on a VM) would
 * be datbench's time counted as libdat's. */
static inline void spin_start(struct spin *s)
{
        s->deadline = 0;
        s->n = 0;
}

static inline void spin_check(struct spin *s, const char *what)
{
        if ((++s->n & 4095) != 0)
                return;
        if (s->deadline == 0)
                s->deadline = bench_now_ns() + (uint64_t)DB_STUCK_US * 1000;
        else if (bench_now_ns() > s->deadline)
                bench_die("datbench: nothing happened for %u s while waiting for %s\n",
                          DB_STUCK_US / 1000000, what);
}

/* Reaps request completions until at most `left` are outstanding. */
static void requests_down_to(struct db_conn *c, unsigned left)
{
        struct spin s;

        spin_start(&s);
        while (c->req_out > left)
                if (reap_requests(c) == 0)
                        spin_check(&s, "request completions");
}

/* The next receive completion: spinning on dat_evd_dequeue, or in
 * dat_evd_wait. */
static inline void wait_recv(struct db_conn *c, bool block)
{
        DAT_EVENT ev;

        if (block) {
                DAT_COUNT nmore;

                DB_CHECK(dat_evd_wait(c->rcv_evd, DB_STUCK_US, 1, &ev, &nmore));
        } else {
                struct spin s;

                spin_start(&s);
                while (dat_evd_dequeue(c->rcv_evd, &ev) != DAT_SUCCESS)
                        spin_check(&s, "a receive");
        }
        dto_check(&ev);
}

/* No request completion was there: spinning, poll again (after checking
 * for a stall); blocking, take the next one in dat_evd_wait. */
static inline void wait_request(struct db_conn *c, bool block, struct spin *s)
{
        DAT_COUNT nmore;
        DAT_EVENT ev;

        if (!block) {
                spin_check(s, "completions");
                return;
        }
        DB_CHECK(dat_evd_wait(c->req_evd, DB_STUCK_US, 1, &ev, &nmore));
        dto_check(&ev);
        c->req_out--;
}

/* Spins until the last byte of dst is v, reaping request completions.
 * On its own memory the loop calls dat_evd_dequeue on every turn: a
 * software provider places the peer's Write there (as a CQ poll would give
 * it the CPU).  On shared memory (--shared-mem) the peer's Writes land by
 * themselves (libdat/shm_direct.h): the loop spins on memory, as
 * ib_write_lat's does, and calls dat_evd_dequeue every 64th turn only, for
 * the Writes that go through the channel (the first ones, before the
 * target offers its memory) and for its own completions (also reaped after
 * each post). */
#define SHARED_SPINS_PER_DEQUEUE 64

static inline void wait_byte(struct db_conn *c, size_t size, unsigned char v)
{
        volatile unsigned char *last = dst(c) + size - 1;
        unsigned turn = 0;
        struct spin s;

        spin_start(&s);
        while (*last != v) {
                DAT_EVENT ev;

                if (c->shared && ++turn % SHARED_SPINS_PER_DEQUEUE != 0) {
                        bench_cpu_relax();
                        continue;
                }
                if (dat_evd_dequeue(c->req_evd, &ev) == DAT_SUCCESS) {
                        dto_check(&ev);
                        c->req_out--;
                }
                spin_check(&s, "an RDMA write to land");
        }
}

static inline unsigned char seq_byte(uint64_t i)
{
        return (unsigned char)(i % 251 + 1);
}

/* ---- the server ------------------------------------------------------------ */

static inline void post_ctl_recv(struct db_conn *c)
{
        post_recv(c, c->ctl_rx, sizeof(*c->ctl_rx));
}

/* Latency phases keep receives posted ahead (LAT_RECV_AHEAD), as
 * ping-pong programs over RDMA do (and fi_pingpong and ucx_perftest):
 * each side posts the receive after next while its message is in flight,
 * so that the round trip is post → arrival → completion → post, with no
 * dat_ep_post_recv between a completion and the answer. */
#define LAT_RECV_AHEAD 2

/* The receives one side of a latency phase takes, in order: n messages
 * into buf (len bytes each), then, for the server, the next control
 * message. */
struct lat_recvs {
        uint64_t posted, n;
        void *buf;
        size_t len;
        bool then_ctl;
};

/* Posts the next receive of the sequence; false when none is left. */
static inline bool lat_recv_next(struct db_conn *c, struct lat_recvs *r)
{
        if (r->posted < r->n)
                post_recv(c, r->buf, r->len);
        else if (r->posted == r->n && r->then_ctl)
                post_ctl_recv(c);
        else
                return false;
        r->posted++;
        return true;
}

static void lat_recv_ahead(struct db_conn *c, struct lat_recvs *r)
{
        while (r->posted < LAT_RECV_AHEAD && lat_recv_next(c, r))
                ;
}

/* The server's side of each phase, as its control message says.  Each
 * posts the next control receive before the last message of the phase. */
static void serve_send_lat(struct db_conn *c, size_t size, bool block, uint64_t n)
{
        struct lat_recvs r = { .n = n, .buf = dst(c), .len = size, .then_ctl = true };

        lat_recv_ahead(c, &r);
        post_send(c, NULL, 0);          /* ready */
        for (uint64_t i = 0; i < n; i++) {
                wait_recv(c, block);
                post_send(c, src(c), size);
                lat_recv_next(c, &r);
                reap_requests(c);
        }
}

static void serve_write_lat(struct db_conn *c, size_t size, bool block, uint64_t n)
{
        struct lat_recvs r = { .n = block ? n : 0, .buf = c->note, .len = 8, .then_ctl = true };

        dst(c)[size - 1] = 0;
        lat_recv_ahead(c, &r);
        post_send(c, NULL, 0);          /* ready */
        for (uint64_t i = 0; i < n; i++) {
                if (block) {
                        wait_recv(c, true);
                        post_rdma(c, true, size);
                        post_send(c, NULL, 0);
                        lat_recv_next(c, &r);
                } else {
                        wait_byte(c, size, seq_byte(i));
                        src(c)[size - 1] = seq_byte(i);
                        post_rdma(c, true, size);
                }
                reap_requests(c);
                if (c->req_out + 2 >= (unsigned)c->max_req)
                        requests_down_to(c, 0);
        }
}

/* Receives for one batch of Sends: as many as the window allows. */
static uint64_t post_batch_recvs(struct db_conn *c, size_t size, uint64_t ops, uint64_t rwin)
{
        uint64_t n = ops < rwin ? ops : rwin;

        for (uint64_t k = 0; k < n; k++)
                post_recv(c, dst(c), size);
        return n;
}

/* bw: for Sends (ops per batch) the receives, for RDMA only the client's
 * "done"; after each batch the answer that it arrived. */
static void serve_bw(struct db_conn *c, const struct db_ctl *ctl)
{
        uint64_t ops = ctl->test == DB_T_SEND_BW ? ctl->ops : 0, n = ctl->count;
        uint64_t rwin = 2 * (uint64_t)ctl->window, posted = 0;
        size_t size = ctl->size;

        if (rwin + 2 > (uint64_t)c->max_rcv)
                rwin = (uint64_t)c->max_rcv - 2;
        if (n == 0)
                post_ctl_recv(c);
        else if (ops > 0)
                posted = post_batch_recvs(c, size, ops, rwin);
        else
                post_recv(c, c->note, 8);
        post_send(c, NULL, 0);          /* ready */
        for (uint64_t b = 0; b < n; b++) {
                for (uint64_t got = 0; got < ops; got++) {
                        wait_recv(c, ctl->block);
                        if (posted < ops) {
                                post_recv(c, dst(c), size);
                                posted++;
                        }
                }
                if (ops == 0)
                        wait_recv(c, ctl->block);
                if (b + 1 == n)
                        post_ctl_recv(c);
                else if (ops > 0)
                        posted = post_batch_recvs(c, size, ops, rwin);
                else
                        post_recv(c, c->note, 8);
                post_send(c, NULL, 0);  /* the batch arrived */
                reap_requests(c);
        }
}

static void serve_phase(struct db_conn *c, const struct db_ctl *ctl)
{
        if (ctl->size == 0 || ctl->size > c->half)
                bench_die("datbench: the client asked for %llu bytes, registered %zu\n",
                          (unsigned long long)ctl->size, c->half);
        switch (ctl->test) {
        case DB_T_SEND_LAT:
                serve_send_lat(c, ctl->size, ctl->block, ctl->count);
                break;
        case DB_T_WRITE_LAT:
                serve_write_lat(c, ctl->size, ctl->block, ctl->count);
                break;
        case DB_T_WRITE_BW:
        case DB_T_READ_BW:
        case DB_T_SEND_BW:
                serve_bw(c, ctl);
                break;
        default:
                bench_die("datbench: unknown test %u from the client\n", ctl->test);
        }
        requests_down_to(c, 0);
}

/* Accepts one client and serves it until it says END. */
static void serve_one(const struct db_opts *o, struct db_ia *d, int ready_fd)
{
        struct db_conn c = { .d = *d };
        DAT_CR_PARAM param;
        DAT_CR_HANDLE cr;
        struct db_pd pd;
        DAT_COUNT nmore;
        DAT_EVENT ev;

        if (ready_fd >= 0) {
                if (write(ready_fd, &d->address, sizeof(d->address)) != sizeof(d->address))
                        bench_die("datbench: the server cannot report its address\n");
                close(ready_fd);
        }
        /* A server waits for its client as long as it takes. */
        DB_CHECK(dat_evd_wait(d->cm_evd, DAT_TIMEOUT_INFINITE, 1, &ev, &nmore));
        if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
                bench_die("datbench: server: event 0x%x instead of a request\n", ev.event_number);
        cr = ev.event_data.cr_arrival_event_data.cr_handle;
        DB_CHECK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param));
        pd_take(&c, param.private_data, param.private_data_size);
        if (c.remote_len < 2 || c.remote_len > (2ull << 30))
                bench_die("datbench: the client asks for %llu bytes\n",
                          (unsigned long long)c.remote_len);
        /* The memory the client chose, on both sides. */
        c.shared = c.remote_shared;
        mem_setup(&c, c.remote_len / 2);
        ep_setup(&c, 1024);
        post_ctl_recv(&c);
        pd_fill(&c, &pd, c.mem_len);
        DB_CHECK(dat_cr_accept(cr, c.ep, sizeof(pd), &pd));
        ev = db_wait_event(d->cm_evd);
        if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
                bench_die("datbench: server: event 0x%x instead of ESTABLISHED\n", ev.event_number);
        if (o->cpu[0] >= 0)
                fprintf(stderr, "# server on CPU %d\n", o->cpu[0]);
        for (;;) {
                struct db_ctl ctl;

                wait_recv(&c, true);
                ctl = *c.ctl_rx;
                if (ctl.magic != DB_MAGIC)
                        bench_die("datbench: a control message without magic\n");
                if (ctl.test == DB_T_END)
                        break;
                serve_phase(&c, &ctl);
        }
        ev = db_wait_event(d->cm_evd);
        if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED &&
            ev.event_number != DAT_CONNECTION_EVENT_BROKEN)
                bench_die("datbench: server: event 0x%x instead of DISCONNECTED\n", ev.event_number);
        conn_close(&c);
}

struct server_job {
        const struct db_opts *o;
        int ready_fd;
};

static int server_main(void *arg)
{
        const struct server_job *j = arg;
        DAT_PSP_HANDLE psp;
        struct db_ia d;

        db_ia_open(&d, j->o->ia_name, 16);
        DB_CHECK(dat_psp_create(d.ia, j->o->qual, d.cm_evd, DAT_PSP_CONSUMER_FLAG, &psp));
        db_print_address("server listening on", &d.address, j->o->qual);
        do
                serve_one(j->o, &d, j->ready_fd);
        while (j->ready_fd < 0);        /* -s: one client after another, until killed */
        DB_CHECK(dat_psp_free(psp));
        db_ia_close(&d);
        return 0;
}

/* ---- the client ------------------------------------------------------------ */

/* Tells the server what comes next and waits until it is ready.  The
 * receive for "ready" goes first, then those of the phase (extra). */
static void phase_start(struct db_conn *c, const struct db_ctl *ctl, void *extra, size_t extra_len)
{
        post_recv(c, c->note, 8);
        if (extra)
                post_recv(c, extra, extra_len);
        *c->ctl_tx = *ctl;
        c->ctl_tx->magic = DB_MAGIC;
        post_send(c, c->ctl_tx, sizeof(*c->ctl_tx));
        wait_recv(c, true);
        requests_down_to(c, 0);
}

/* One lat phase of n iterations; the half round trips go to s if given.
 * Returns the time the iterations took (not the control exchange). */
static uint64_t lat_phase(struct db_conn *c, enum db_test test, bool block, size_t size,
                          uint64_t n, struct samples *s)
{
        struct db_ctl ctl = { .test = test, .block = block, .size = size, .count = n };
        /* phase_start posts the first receive of the replies. */
        struct lat_recvs r = { .posted = 1, .n = n };
        uint64_t t0, t1, start;

        if (test == DB_T_WRITE_LAT) {
                dst(c)[size - 1] = 0;
                phase_start(c, &ctl, block && n ? c->note + 8 : NULL, 8);
                r.buf = c->note + 8;
                r.len = 8;
                if (!block)
                        r.n = 0;
        } else {
                phase_start(c, &ctl, n ? dst(c) : NULL, size);
                r.buf = dst(c);
                r.len = size;
        }
        lat_recv_ahead(c, &r);
        t0 = start = bench_now_ns();
        for (uint64_t i = 0; i < n; i++) {
                /* The completions the answer just acknowledged are
                 * reaped after the next post, while it is in flight. */
                if (test == DB_T_SEND_LAT) {
                        post_send(c, src(c), size);
                        lat_recv_next(c, &r);
                        reap_requests(c);
                        wait_recv(c, block);
                } else if (block) {
                        post_rdma(c, true, size);
                        post_send(c, NULL, 0);
                        lat_recv_next(c, &r);
                        reap_requests(c);
                        wait_recv(c, true);
                } else {
                        src(c)[size - 1] = seq_byte(i);
                        post_rdma(c, true, size);
                        reap_requests(c);
                        wait_byte(c, size, seq_byte(i));
                }
                if (c->req_out + 2 >= (unsigned)c->max_req)
                        requests_down_to(c, 0);
                t1 = bench_now_ns();
                if (s)
                        samples_add(s, (t1 - t0) / 2);
                t0 = t1;
        }
        requests_down_to(c, 0);
        return t0 - start;
}

/* One bw phase of n batches of ops DTOs; each batch's time goes to s.
 * Returns the time the batches took. */
static uint64_t bw_phase(struct db_conn *c, enum db_test test, bool block, size_t size,
                         unsigned window, uint64_t ops, uint64_t n, struct samples *s)
{
        struct db_ctl ctl = { .test = test, .block = block, .window = window, .size = size,
                              .count = n, .ops = ops };
        uint64_t total = 0;
        struct spin sp;

        if (window + 2 > (unsigned)c->max_req)
                window = (unsigned)c->max_req - 2;
        phase_start(c, &ctl, NULL, 0);
        for (uint64_t b = 0; b < n; b++) {
                uint64_t posted = 0, t0;

                post_recv(c, c->note, 8);       /* the server's "arrived" */
                t0 = bench_now_ns();
                spin_start(&sp);
                while (posted < ops) {
                        while (posted < ops && c->req_out < window) {
                                if (test == DB_T_SEND_BW)
                                        post_send(c, src(c), size);
                                else
                                        post_rdma(c, test == DB_T_WRITE_BW, size);
                                posted++;
                        }
                        if (reap_requests(c) == 0)
                                wait_request(c, block, &sp);
                }
                if (test != DB_T_SEND_BW)
                        post_send(c, NULL, 0);  /* done */
                wait_recv(c, block);
                requests_down_to(c, 0);
                t0 = bench_now_ns() - t0;
                total += t0;
                if (s)
                        samples_add(s, t0);
        }
        return total;
}

static struct bench_opts pace_opts(const struct db_opts *o)
{
        struct bench_opts b = { .iters = o->iters, .warmup = o->warmup, .duration = o->duration };

        return b;
}

/* Calibrate, warm up, measure, report: one test at one size. */
static void run_lat(const struct db_opts *o, struct db_conn *c, enum db_test test, bool block,
                    size_t size)
{
        struct bench_opts b = pace_opts(o);
        uint64_t ns, warm, n;
        struct samples s;

        ns = lat_phase(c, test, block, size, DB_CALIBRATE_ITERS, NULL);
        warm = (uint64_t)(o->duration / 5 * 1e9 / ((double)ns / DB_CALIBRATE_ITERS + 1));
        if (warm > o->warmup)
                warm = o->warmup;
        ns += lat_phase(c, test, block, size, warm, NULL);
        n = bench_iters_for(&b, ns, warm + DB_CALIBRATE_ITERS, DB_MIN_ITERS);
        if (samples_init(&s, n) < 0)
                bench_die("datbench: no memory for %llu samples\n", (unsigned long long)n);
        lat_phase(c, test, block, size, n, &s);
        db_report_latency(test == DB_T_SEND_LAT ? "send_lat" : "write_lat", block ? "block" : "poll",
                          size, &s);
        samples_free(&s);
}

static void run_bw(const struct db_opts *o, struct db_conn *c, enum db_test test, bool block,
                   size_t size)
{
        static const char *const names[] = { [DB_T_WRITE_BW] = "write_bw", [DB_T_READ_BW] = "read_bw",
                                             [DB_T_SEND_BW] = "send_bw" };
        struct bench_opts b = pace_opts(o);
        uint64_t ops = DB_BATCH_BYTES / size ? DB_BATCH_BYTES / size : 1, ns, warm, n;
        struct samples s;

        ns = bw_phase(c, test, block, size, o->window, ops, 1, NULL);
        warm = (uint64_t)(o->duration / 5 * 1e9 / ((double)ns + 1));
        if (warm > o->warmup)
                warm = o->warmup;
        ns += bw_phase(c, test, block, size, o->window, ops, warm, NULL);
        n = bench_iters_for(&b, ns, warm + 1, DB_MIN_BATCHES);
        if (samples_init(&s, n) < 0)
                bench_die("datbench: no memory for %llu samples\n", (unsigned long long)n);
        bw_phase(c, test, block, size, o->window, ops, n, &s);
        db_report_bandwidth(names[test], block ? "block" : "poll", size, o->window, ops * size, &s);
        samples_free(&s);
}

static void client(const struct db_opts *o, const struct sockaddr_storage *server)
{
        bool lat = strcmp(o->mode, "lat") == 0;
        size_t max = 0;
        struct db_conn c;
        struct db_pd pd;
        DAT_EVENT ev;

        for (unsigned i = 0; i < o->n_sizes; i++)
                if (o->sizes[i] > max)
                        max = o->sizes[i];
        if (o->cpu[1] >= 0 && bench_pin(o->cpu[1]) < 0)
                fprintf(stderr, "datbench: cannot pin to CPU %d\n", o->cpu[1]);
        memset(&c, 0, sizeof(c));
        db_ia_open(&c.d, o->ia_name, 16);
        for (unsigned i = 0; i < o->n_sizes; i++) {
                if (o->sizes[i] > c.d.attr.max_message_size && (lat || o->test_send))
                        bench_die("datbench: %zu bytes is above the IA's max_message_size %llu\n",
                                  o->sizes[i], (unsigned long long)c.d.attr.max_message_size);
        }
        c.shared = o->shared_mem;
        mem_setup(&c, max);
        ep_setup(&c, o->window);
        pd_fill(&c, &pd, 2 * (uint64_t)max);
        DB_CHECK(dat_ep_connect(c.ep, (DAT_IA_ADDRESS_PTR)server, o->qual, DB_STUCK_US, sizeof(pd),
                                &pd, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
        ev = db_wait_event(c.d.cm_evd);
        if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
                bench_die("datbench: event 0x%x instead of ESTABLISHED (no server?)\n",
                          ev.event_number);
        pd_take(&c, ev.event_data.connect_event_data.private_data,
                ev.event_data.connect_event_data.private_data_size);
        if (lat) {
                static const enum db_test tests[] = { DB_T_SEND_LAT, DB_T_WRITE_LAT };

                for (unsigned t = 0; t < 2; t++) {
                        if (!(t == 0 ? o->test_send : o->test_write))
                                continue;
                        for (int block = 0; block < 2; block++) {
                                if (!(block ? o->block : o->poll))
                                        continue;
                                for (unsigned i = 0; i < o->n_sizes; i++)
                                        run_lat(o, &c, tests[t], block, o->sizes[i]);
                        }
                }
        } else {
                static const enum db_test tests[] = { DB_T_WRITE_BW, DB_T_READ_BW, DB_T_SEND_BW };
                bool want[] = { o->test_write, o->test_read, o->test_send };

                for (unsigned t = 0; t < 3; t++) {
                        for (int block = 0; want[t] && block < 2; block++) {
                                if (!(block ? o->block : o->poll))
                                        continue;
                                for (unsigned i = 0; i < o->n_sizes; i++)
                                        run_bw(o, &c, tests[t], block, o->sizes[i]);
                        }
                }
        }
        *c.ctl_tx = (struct db_ctl){ .magic = DB_MAGIC, .test = DB_T_END };
        post_send(&c, c.ctl_tx, sizeof(*c.ctl_tx));
        requests_down_to(&c, 0);
        DB_CHECK(dat_ep_disconnect(c.ep, DAT_CLOSE_GRACEFUL_FLAG));
        ev = db_wait_event(c.d.cm_evd);
        if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
                bench_die("datbench: event 0x%x instead of DISCONNECTED\n", ev.event_number);
        conn_close(&c);
        db_ia_close(&c.d);
}

int db_lat_bw_main(const struct db_opts *o)
{
        struct server_job sj = { o, -1 };
        struct sockaddr_storage server;
        int ready[2], status;
        pid_t spid;

        if (o->server_only) {
                if (o->cpu[0] >= 0 && bench_pin(o->cpu[0]) < 0)
                        fprintf(stderr, "datbench: cannot pin to CPU %d\n", o->cpu[0]);
                return server_main(&sj);
        }
        if (o->server_addr) {
                if (!db_parse_address(o->server_addr, &server))
                        bench_die("datbench: %s: not an IPv4 or IPv6 address\n", o->server_addr);
                client(o, &server);
                return 0;
        }
        if (pipe(ready) < 0)
                bench_die("datbench: pipe: %s\n", strerror(errno));
        sj.ready_fd = ready[1];
        spid = db_spawn(o->cpu[0], server_main, &sj);
        close(ready[1]);
        if (read(ready[0], &server, sizeof(server)) != sizeof(server))
                bench_die("datbench: the server did not start\n");
        close(ready[0]);
        client(o, &server);
        status = bench_reap(spid);
        if (status != 0)
                bench_die("datbench: the server exited with %d\n", status);
        return 0;
}
