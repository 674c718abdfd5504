/* The shm link on its own (libdat/shm_link.h): the region layout datd
 * makes and libdat checks, the byte rings (partial, wrapping, closing),
 * the doorbells (rung only when the peer announced a sleep), a hostile
 * peer that rewrites the shared words, and real processes streaming
 * through the link while sleeping on their doorbells.
 *
 * The shared layout is a format between processes, so the offsets below
 * are part of it: header magic 0, version 4, ring_size 8, flags 12, ring
 * offsets 16 and 24; in a ring's control block want_room 0, closed 4,
 * consumed 128, sleeping 256; the data from 4096 on, in records that
 * start on 64-byte cells with a header word (0x52454344 in its high half,
 * the length in its low half), the bytes after it (up to 248) or from the
 * next cell on, each record at most a quarter of the ring. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "libdat/shm_link.h"
#include "libdat/shm_region.h"

TestSuite(shm_link, .timeout = 60);

#define OFF_MAGIC 0
#define OFF_VERSION 4
#define OFF_RING_SIZE 8
#define OFF_FLAGS 12
#define OFF_RING0 16
#define OFF_RING1 24
#define CTL_WANT_ROOM 0
#define CTL_CLOSED 4
#define CTL_CONSUMED 128
#define CTL_SLEEPING 256
#define CTL_SIZE 4096

#define RING 4096u
#define CELL 64u
#define REC_MARK 0x52454344ull
#define REC_MAX (RING / 4 - CELL)       /* the bytes of one record */
#define WRITE_MAX SHM_LINK_WRITE_MAX(RING)

/* A region with an initialised link and the two ends' doorbells. */
struct fixture {
        void *mem;
        size_t size;
        int fd;
        uint32_t ring_size;
        int doorbell[2];                /* [s]: the one end s waits on */
};

static struct fixture fixture_new(uint32_t ring_size)
{
        struct fixture f = { .size = shm_link_region_size(ring_size), .ring_size = ring_size };

        cr_assert_neq(f.size, 0);
        cr_assert_eq(shm_region_create(f.size, &f.fd, &f.mem), 0);
        cr_assert_eq(shm_link_init(f.mem, f.size, ring_size), 0);
        for (int s = 0; s < 2; s++) {
                f.doorbell[s] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
                cr_assert_geq(f.doorbell[s], 0);
        }
        return f;
}

static void fixture_free(struct fixture *f)
{
        shm_region_unmap(f->mem, f->size);
        close(f->fd);
        close(f->doorbell[0]);
        close(f->doorbell[1]);
}

static int end_attach(const struct fixture *f, void *mem, unsigned side, struct shm_link *l)
{
        return shm_link_attach(mem, f->size, f->ring_size, side, f->doorbell[side],
                               f->doorbell[1 - side], l);
}

static void ends(const struct fixture *f, struct shm_link *e0, struct shm_link *e1)
{
        cr_assert_eq(end_attach(f, f->mem, 0, e0), 0);
        cr_assert_eq(end_attach(f, f->mem, 1, e1), 0);
}

/* Most tests: a link of RING bytes and both ends in this process. */
static struct fixture f;
static struct shm_link e0, e1;

static void link_setup(void)
{
        f = fixture_new(RING);
        ends(&f, &e0, &e1);
}

static void link_teardown(void)
{
        fixture_free(&f);
}

static void put_u32(void *mem, size_t off, uint32_t v)
{
        __atomic_store_n((uint32_t *)((char *)mem + off), v, __ATOMIC_RELAXED);
}

static void put_u64(void *mem, size_t off, uint64_t v)
{
        __atomic_store_n((uint64_t *)((char *)mem + off), v, __ATOMIC_RELAXED);
}

static uint64_t get_u64(const void *mem, size_t off)
{
        return __atomic_load_n((const uint64_t *)((const char *)mem + off), __ATOMIC_RELAXED);
}

/* Where ring r's control block is in a fresh region. */
static size_t ring_ctl(const struct fixture *f, unsigned r)
{
        return (size_t)get_u64(f->mem, r == 0 ? OFF_RING0 : OFF_RING1);
}

/* Attach (end 0) to a fresh region after a hostile peer wrote v at off,
 * as a 32- or a 64-bit word (wide). */
static int attach_after(size_t off, uint64_t v, bool wide)
{
        struct fixture g = fixture_new(RING);
        struct shm_link l;
        int r;

        if (wide)
                put_u64(g.mem, off, v);
        else
                put_u32(g.mem, off, (uint32_t)v);
        r = end_attach(&g, g.mem, 0, &l);
        fixture_free(&g);
        return r;
}

static int attach_after_u32(size_t off, uint32_t v)
{
        return attach_after(off, v, false);
}

static int attach_after_u64(size_t off, uint64_t v)
{
        return attach_after(off, v, true);
}

static ssize_t write_bytes(struct shm_link *l, const void *p, size_t n)
{
        struct iovec iov = { .iov_base = (void *)p, .iov_len = n };

        return shm_link_writev(l, &iov, 1);
}

static ssize_t read_bytes(struct shm_link *l, void *p, size_t n)
{
        struct iovec iov = { .iov_base = p, .iov_len = n };

        return shm_link_readv(l, &iov, 1);
}

static bool doorbell_rang(int fd)
{
        struct pollfd p = { .fd = fd, .events = POLLIN };

        return poll(&p, 1, 0) == 1;
}

/* The stream's content: byte at position pos. */
static unsigned char stream_byte(uint64_t pos)
{
        uint64_t x = (pos >> 3) * 0x9e3779b97f4a7c15u;

        x ^= x >> 29;
        return (unsigned char)(x >> (8 * (pos & 7)));
}

static void fill_stream(unsigned char *p, uint64_t pos, size_t n)
{
        for (size_t i = 0; i < n; i++)
                p[i] = stream_byte(pos + i);
}

static bool check_stream(const unsigned char *p, uint64_t pos, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (p[i] != stream_byte(pos + i))
                        return false;
        return true;
}

static uint64_t rng_next(uint64_t *s)
{
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

/* Splits buf (n bytes) into up to max_iov pieces of random sizes, some
 * empty. */
static int random_iov(uint64_t *rng, unsigned char *buf, size_t n, struct iovec *iov, int max_iov)
{
        int cnt = 0;

        while (cnt < max_iov - 1 && n > 0) {
                size_t len = rng_next(rng) % (n + 1);

                iov[cnt++] = (struct iovec){ .iov_base = buf, .iov_len = len };
                buf += len;
                n -= len;
        }
        iov[cnt++] = (struct iovec){ .iov_base = buf, .iov_len = n };
        return cnt;
}

static pid_t fork_child(void)
{
        pid_t pid = fork();

        cr_assert_geq(pid, 0);
        if (pid == 0)
                prctl(PR_SET_PDEATHSIG, SIGKILL);
        return pid;
}

/* Reaps the child, killing it first if it is still there; its exit code
 * (or 128 + signal). */
static int reap(pid_t pid, bool kill_first)
{
        int status;

        if (kill_first)
                kill(pid, SIGKILL);
        if (waitpid(pid, &status, 0) != pid)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- layout: what datd lays out and libdat accepts ---------------------- */

Test(shm_link, region_size_is_zero_for_ring_sizes_not_allowed)
{
        cr_expect_eq(shm_link_region_size(0), 0);
        cr_expect_eq(shm_link_region_size(SHM_LINK_RING_MIN / 2), 0);
        cr_expect_eq(shm_link_region_size(SHM_LINK_RING_MIN + 64), 0);
        cr_expect_eq(shm_link_region_size(SHM_LINK_RING_MAX * 2), 0);
        cr_expect_geq(shm_link_region_size(SHM_LINK_RING_MIN),
                      SHM_LINK_HEADER + 2 * (size_t)SHM_LINK_RING_MIN);
        cr_expect_neq(shm_link_region_size(SHM_LINK_RING_MAX), 0);
}

Test(shm_link, init_refuses_a_region_too_small_or_not_page_aligned)
{
        size_t size = shm_link_region_size(RING);
        unsigned char *mem = aligned_alloc(4096, size + 4096);

        cr_assert_not_null(mem);
        cr_expect_eq(shm_link_init(mem, size - 1, RING), -EINVAL);
        cr_expect_eq(shm_link_init(mem + 64, size, RING), -EINVAL);
        cr_expect_eq(shm_link_init(mem, size, RING + 1), -EINVAL);
        cr_expect_eq(shm_link_init(mem, size, RING), 0);
        free(mem);
}

Test(shm_link, attach_accepts_a_fresh_region_for_either_side, .init = link_setup, .fini = link_teardown)
{
        cr_expect_eq(e0.side, 0);
        cr_expect_eq(e1.side, 1);
        cr_expect_eq(e0.tx.ctl, e1.rx.ctl);
        cr_expect_eq(e0.rx.ctl, e1.tx.ctl);
        cr_expect_neq(e0.tx.ctl, e0.rx.ctl);
        cr_expect_eq(shm_link_readable(&e0), 0);
        cr_expect_eq(shm_link_writable(&e0), WRITE_MAX);
}

Test(shm_link, attach_refuses_arguments_that_do_not_fit)
{
        struct fixture f = fixture_new(RING);
        struct shm_link l;

        cr_expect_eq(shm_link_attach(f.mem, f.size, RING, 2, -1, -1, &l), -EINVAL);
        cr_expect_eq(shm_link_attach(f.mem, f.size - 1, RING, 0, -1, -1, &l), -EINVAL);
        cr_expect_eq(shm_link_attach(f.mem, f.size, RING + 1, 0, -1, -1, &l), -EINVAL);
        cr_expect_eq(shm_link_attach((char *)f.mem + 64, f.size - 64, RING, 0, -1, -1, &l),
                     -EINVAL);
        fixture_free(&f);
}

Test(shm_link, attach_refuses_a_wrong_magic)
{
        cr_expect_eq(attach_after_u32(OFF_MAGIC, SHM_LINK_MAGIC ^ 1), -EPROTO);
}

Test(shm_link, attach_refuses_another_version)
{
        cr_expect_eq(attach_after_u32(OFF_VERSION, SHM_LINK_VERSION + 1), -EPROTO);
}

Test(shm_link, attach_refuses_a_ring_size_other_than_datd_said)
{
        cr_expect_eq(attach_after_u32(OFF_RING_SIZE, RING * 2), -EPROTO);
        cr_expect_eq(attach_after_u32(OFF_RING_SIZE, RING / 2), -EPROTO);
        cr_expect_eq(attach_after_u32(OFF_RING_SIZE, 0), -EPROTO);
}

Test(shm_link, attach_refuses_unknown_flags)
{
        cr_expect_eq(attach_after_u32(OFF_FLAGS, 1), -EPROTO);
}

Test(shm_link, attach_refuses_ring_offsets_outside_misaligned_or_overlapping)
{
        size_t size = shm_link_region_size(RING);

        cr_expect_eq(attach_after_u64(OFF_RING0, 0), -EPROTO);                  /* on the header */
        cr_expect_eq(attach_after_u64(OFF_RING1, SHM_LINK_HEADER + 64), -EPROTO);  /* misaligned */
        cr_expect_eq(attach_after_u64(OFF_RING1, size), -EPROTO);               /* past the end */
        cr_expect_eq(attach_after_u64(OFF_RING1, UINT64_MAX & ~4095ull), -EPROTO);
        cr_expect_eq(attach_after_u64(OFF_RING1, SHM_LINK_HEADER), -EPROTO);    /* = ring 0 */
        cr_expect_eq(attach_after_u64(OFF_RING1, SHM_LINK_HEADER + 4096), -EPROTO); /* overlaps */
}

Test(shm_link, attach_refuses_a_consumer_counter_off_a_cell)
{
        struct fixture f = fixture_new(RING);
        struct shm_link l;
        size_t c1 = ring_ctl(&f, 1);

        put_u64(f.mem, c1 + CTL_CONSUMED, 1);
        cr_expect_eq(end_attach(&f, f.mem, 0, &l), -EPROTO);
        put_u64(f.mem, c1 + CTL_CONSUMED, CELL);
        cr_expect_eq(end_attach(&f, f.mem, 0, &l), 0, "on a cell: both ends start there");
        fixture_free(&f);
}

/* ---- the byte stream ---------------------------------------------------- */

Test(shm_link, bytes_come_out_in_order_across_wrap_around_with_odd_sizes_and_iovecs, .init = link_setup, .fini = link_teardown)
{
        unsigned char in[3 * RING], out[3 * RING];
        uint64_t rng = 12345, wpos = 0, rpos = 0;

        for (int round = 0; round < 4000; round++) {
                struct iovec iov[6];
                size_t n = 1 + rng_next(&rng) % (RING + RING / 2);
                int cnt;
                ssize_t w, r;

                fill_stream(in, wpos, n);
                cnt = random_iov(&rng, in, n, iov, 6);
                w = shm_link_writev(&e0, iov, cnt);
                cr_assert_geq(w, 0);
                cr_assert_leq((size_t)w, n);
                wpos += (uint64_t)w;

                n = 1 + rng_next(&rng) % (RING + RING / 2);
                memset(out, 0, n);
                cnt = random_iov(&rng, out, n, iov, 6);
                r = shm_link_readv(&e1, iov, cnt);
                cr_assert_geq(r, 0);
                cr_assert(check_stream(out, rpos, (size_t)r), "round %d: bytes at %llu", round,
                          (unsigned long long)rpos);
                rpos += (uint64_t)r;
        }
        cr_expect_gt(rpos, 100 * (uint64_t)RING, "the stream went round the ring many times");
}

Test(shm_link, write_is_partial_when_the_ring_fills_then_zero_when_full, .init = link_setup, .fini = link_teardown)
{
        static unsigned char buf[2 * RING];

        cr_expect_eq(shm_link_writable(&e0), WRITE_MAX);
        cr_expect_eq(write_bytes(&e0, buf, 2 * REC_MAX), (ssize_t)(2 * REC_MAX));
        cr_expect_eq(shm_link_writable(&e0), WRITE_MAX - 2 * REC_MAX);
        cr_expect_eq(write_bytes(&e0, buf, RING), (ssize_t)(WRITE_MAX - 2 * REC_MAX));
        cr_expect_eq(shm_link_writable(&e0), 0);
        cr_expect_eq(write_bytes(&e0, buf, 1), 0);
        cr_expect_eq(read_bytes(&e1, buf, 10), 10);
        cr_expect_eq(write_bytes(&e0, buf, 1000), 0, "a record read in part frees nothing");
        cr_expect_eq(read_bytes(&e1, buf, REC_MAX - 10), (ssize_t)(REC_MAX - 10));
        cr_expect_eq(shm_link_writable(&e0), REC_MAX, "the record read whole freed its cells");
        cr_expect_eq(write_bytes(&e0, buf, 2 * RING), (ssize_t)REC_MAX);
}

Test(shm_link, small_writes_take_a_cell_each, .init = link_setup, .fini = link_teardown)
{
        unsigned n = 0;

        /* 56 bytes and the header fill a cell; one cell stays free. */
        while (write_bytes(&e0, "0123456789abcdef0123456789abcdef0123456789abcdef01234567", 56) == 56)
                n++;
        cr_expect_eq(n, RING / CELL - 1);
        cr_expect_eq(shm_link_readable(&e1), 56, "the next record's bytes");
}

/* shm_link_reserve/commit: a small record filled in place reads back as
 * the same bytes a write would have made, in order with written ones. */
Test(shm_link, a_record_filled_in_place_reads_back_in_order_with_written_ones, .init = link_setup, .fini = link_teardown)
{
        unsigned char in[600], out[600];
        size_t at = 0;

        fill_stream(in, 0, sizeof(in));
        for (size_t n = 1; at + n <= sizeof(in) && n <= 248; n += 37) {
                unsigned char *p = shm_link_reserve(&e0, n);

                cr_assert_not_null(p, "room for %zu bytes", n);
                memcpy(p, in + at, n);
                if (at == 0)
                        cr_expect_eq(shm_link_readable(&e1), 0, "nothing before the commit");
                shm_link_commit(&e0, n);
                at += n;
                cr_assert_eq(write_bytes(&e0, in + at, 3), 3);
                at += 3;
        }
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), (ssize_t)at);
        cr_expect(check_stream(out, 0, at));
}

/* In place only what fits a record's inline bytes, where there is room and
 * the bytes do not wrap: else NULL, and writev takes it (or says why). */
Test(shm_link, reserve_refuses_what_does_not_fit_in_place, .init = link_setup, .fini = link_teardown)
{
        unsigned char buf[RING] = { 0 };
        unsigned n = 0;

        cr_expect_null(shm_link_reserve(&e0, 0));
        cr_expect_null(shm_link_reserve(&e0, 249), "more than a record's inline bytes");
        cr_expect_not_null(shm_link_reserve(&e0, 248));
        /* Cells of 56 bytes fill the ring but the one kept free. */
        while (shm_link_reserve(&e0, 56)) {
                shm_link_commit(&e0, 56);
                n++;
        }
        cr_expect_eq(n, RING / CELL - 1);
        cr_expect_eq(write_bytes(&e0, buf, 1), 0, "full for writev too");
        cr_assert_eq(read_bytes(&e1, buf, 56), 56);
        cr_expect_not_null(shm_link_reserve(&e0, 56), "room again once a record is read");
        /* All read: the next record would start in the ring's last cell,
         * where 120 bytes would wrap. */
        cr_assert_eq(read_bytes(&e1, buf, sizeof(buf)), (ssize_t)(56 * (RING / CELL - 2)));
        cr_expect_null(shm_link_reserve(&e0, 120), "its bytes would wrap around the ring's end");
        cr_expect_eq(write_bytes(&e0, buf, 120), 120, "writev wraps them");
        cr_assert_eq(read_bytes(&e1, buf, sizeof(buf)), 120);
        cr_expect_not_null(shm_link_reserve(&e0, 248), "from the ring's start again");
}

Test(shm_link, reserve_refuses_after_close_and_commit_rings_an_armed_reader, .init = link_setup, .fini = link_teardown)
{
        unsigned char *p;

        cr_assert(shm_link_arm(&e1, true, false), "nothing to read: may sleep");
        p = shm_link_reserve(&e0, 8);
        cr_assert_not_null(p);
        memcpy(p, "12345678", 8);
        cr_expect_eq(e0.doorbell_writes, 0, "nothing published yet");
        shm_link_commit(&e0, 8);
        cr_expect_eq(e0.doorbell_writes, 1);
        cr_expect(doorbell_rang(f.doorbell[1]));
        shm_link_close_tx(&e0);
        cr_expect_null(shm_link_reserve(&e0, 8), "our side is closed");
        cr_expect_eq(shm_link_writev(&e0, &(struct iovec){ p, 8 }, 1), -EPIPE, "writev says why");
}

Test(shm_link, read_is_partial_when_the_iovec_is_smaller_then_zero_when_empty, .init = link_setup, .fini = link_teardown)
{
        unsigned char in[300], out[300];

        fill_stream(in, 0, sizeof(in));
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), 0);
        cr_expect_not(shm_link_rx_ready(&e1));
        cr_assert_eq(write_bytes(&e0, in, 300), 300);
        cr_expect_eq(shm_link_readable(&e1), 300);
        cr_expect(shm_link_rx_ready(&e1));
        cr_expect_eq(read_bytes(&e1, out, 120), 120);
        cr_expect_eq(shm_link_readable(&e1), 180);
        cr_expect(shm_link_rx_ready(&e1), "a record half read");
        cr_expect_eq(read_bytes(&e1, out + 120, 1000 - 120), 180);
        cr_expect(check_stream(out, 0, 300));
        cr_expect_not(shm_link_rx_ready(&e1));
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), 0);
}

/* shm_link_peek lends the next whole record where it lies: its bytes and
 * length, the record counted as readable and its room held until
 * shm_link_consume, which says whether another record follows when asked
 * to look (and says nothing, at no cost, when not). */
Test(shm_link, peek_lends_a_whole_record_in_place_until_it_is_consumed, .init = link_setup, .fini = link_teardown)
{
        const unsigned char *p;
        unsigned char in[100];
        size_t len = 99;

        cr_expect_null(shm_link_peek(&e1, 4096, &len));
        cr_expect_eq(len, 0, "nothing there: 0");
        fill_stream(in, 0, sizeof(in));
        cr_assert_eq(write_bytes(&e0, in, 40), 40);
        cr_assert_eq(write_bytes(&e0, in + 40, 60), 60);
        p = shm_link_peek(&e1, 4096, &len);
        cr_assert_not_null(p);
        cr_expect_eq(len, 40);
        cr_expect(check_stream(p, 0, 40));
        cr_expect_eq(shm_link_readable(&e1), 40, "the lent record still counts");
        cr_expect_null(shm_link_peek(&e1, 4096, &len), "one record lent at a time");
        cr_expect_neq(len, 0);
        cr_expect(shm_link_consume(&e1, true), "the second record follows");
        p = shm_link_peek(&e1, 4096, &len);
        cr_assert_not_null(p);
        cr_expect_eq(len, 60);
        cr_expect(check_stream(p, 40, 60));
        cr_expect_not(shm_link_consume(&e1, true), "nothing follows");
        cr_expect_eq(shm_link_readable(&e1), 0);
        cr_expect_not(shm_link_consume(&e1, true), "nothing lent: nothing to give back");
        cr_assert_eq(write_bytes(&e0, in, 30), 30);
        cr_assert_eq(write_bytes(&e0, in, 30), 30);
        cr_assert_not_null(shm_link_peek(&e1, 4096, &len));
        cr_expect_not(shm_link_consume(&e1, false), "not asked to look: no answer");
        cr_expect_eq(shm_link_readable(&e1), 30, "the record after it is there all the same");
}

/* What the ring holds can always be read: a record longer than the
 * borrower takes, or one whose bytes wrap around the ring's end, is not
 * lent (NULL, *len not 0) and comes out of shm_link_readv whole; a lent
 * record that is read instead comes out from its first byte. */
Test(shm_link, peek_leaves_records_too_long_or_wrapping_to_readv, .init = link_setup, .fini = link_teardown)
{
        unsigned char in[600], out[600];
        size_t len = 0;

        fill_stream(in, 0, sizeof(in));
        cr_assert_eq(write_bytes(&e0, in, 300), 300);
        cr_expect_null(shm_link_peek(&e1, 299, &len));
        cr_expect_neq(len, 0);
        cr_assert_not_null(shm_link_peek(&e1, 300, &len));
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), 300, "read instead of consumed");
        cr_expect(check_stream(out, 0, 300));
        /* Walk the producer to the last cells of the ring: a record of 3
         * cells written there wraps. */
        while (shm_link_writable(&e0) > 0 && e0.tx.count % RING != RING - 2 * CELL) {
                cr_assert_eq(write_bytes(&e0, in, 1), 1);
                cr_assert_eq(read_bytes(&e1, out, 1), 1);
        }
        cr_assert_eq(e0.tx.count % RING, RING - 2 * CELL);
        cr_assert_eq(write_bytes(&e0, in, 150), 150);
        cr_expect_null(shm_link_peek(&e1, 4096, &len), "its bytes wrap");
        cr_expect_neq(len, 0);
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), 150);
        cr_expect(check_stream(out, 0, 150));
}

/* The room a lent record holds comes back at shm_link_consume, and a
 * producer waiting for room is rung then, as after a read. */
Test(shm_link, consume_gives_the_room_back_and_rings_a_writer_that_waits, .init = link_setup, .fini = link_teardown)
{
        unsigned char in[REC_MAX];
        size_t len;
        uint64_t v;

        fill_stream(in, 0, sizeof(in));
        while (write_bytes(&e0, in, 56) == 56)
                ;
        cr_expect_eq(shm_link_writable(&e0), 0);
        cr_expect(shm_link_arm(&e0, true, true), "no room: the writer may sleep");
        cr_assert_not_null(shm_link_peek(&e1, 4096, &len));
        cr_expect_eq(shm_link_writable(&e0), 0, "a lent record's room is held");
        cr_expect(shm_link_consume(&e1, true));
        cr_expect_gt(shm_link_writable(&e0), 0);
        cr_expect_eq(read(f.doorbell[0], &v, sizeof(v)), (ssize_t)sizeof(v), "the writer was rung");
}

Test(shm_link, the_two_directions_are_independent, .init = link_setup, .fini = link_teardown)
{
        unsigned char b = 0;

        cr_assert_eq(write_bytes(&e0, "a", 1), 1);
        cr_expect_eq(shm_link_readable(&e0), 0, "end 0 does not read what it wrote");
        cr_assert_eq(write_bytes(&e1, "b", 1), 1);
        cr_expect_eq(read_bytes(&e0, &b, 1), 1);
        cr_expect_eq(b, 'b');
        cr_expect_eq(read_bytes(&e1, &b, 1), 1);
        cr_expect_eq(b, 'a');
}

Test(shm_link, reads_after_the_peer_closed_drain_then_say_epipe, .init = link_setup, .fini = link_teardown)
{
        unsigned char out[16];

        cr_assert_eq(write_bytes(&e0, "hello", 5), 5);
        shm_link_close_tx(&e0);
        cr_expect_eq(write_bytes(&e0, "x", 1), -EPIPE, "no writes after close");
        cr_expect_not(shm_link_peer_closed(&e1), "not before what was written is read");
        cr_expect_eq(read_bytes(&e1, out, 3), 3);
        cr_expect_eq(read_bytes(&e1, out + 3, sizeof(out) - 3), 2);
        cr_expect_eq(memcmp(out, "hello", 5), 0);
        cr_expect(shm_link_peer_closed(&e1));
        cr_expect(shm_link_rx_ready(&e1), "the end of the stream is there to read");
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), -EPIPE);
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), -EPIPE);
        cr_expect(doorbell_rang(f.doorbell[1]), "close wakes the peer");
        cr_expect_eq(write_bytes(&e1, "y", 1), 1, "the other direction stays open");
}

/* ---- doorbells ---------------------------------------------------------- */

/* From a datd of protocol version 2, libdat's doorbells are datagram
 * sockets (datd's socketpairs), one datagram per ring: a drain takes them
 * all, in batches, and leaves the socket empty (a ring left would wake the
 * sleeper again for nothing). */
Test(shm_link, a_drain_takes_every_ring_of_a_datagram_doorbell)
{
        struct shm_link l = { .doorbell_mine = -1, .doorbell_sock = true };
        uint64_t one = 1;
        int sv[2];

        cr_assert_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        for (int i = 0; i < 20; i++)
                cr_assert_eq(send(sv[1], &one, sizeof(one), 0), (ssize_t)sizeof(one));
        l.doorbell_mine = sv[0];
        shm_link_doorbell_drain(&l);
        errno = 0;
        cr_expect(recv(sv[0], &one, sizeof(one), MSG_DONTWAIT) < 0 && errno == EAGAIN,
                  "a ring was left");
        close(sv[0]);
        close(sv[1]);
}

/* Version 3's doorbells are pipes: the rings pile up as bytes, and a
 * drain reads them all (in reads of several rings) and leaves the pipe
 * empty. */
Test(shm_link, a_drain_takes_every_ring_of_a_pipe_doorbell)
{
        struct shm_link l = { .doorbell_mine = -1 };
        uint64_t one = 1;
        int p[2];

        cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
        for (int i = 0; i < 20; i++)
                cr_assert_eq(write(p[1], &one, sizeof(one)), (ssize_t)sizeof(one));
        l.doorbell_mine = p[0];
        shm_link_doorbell_drain(&l);
        errno = 0;
        cr_expect(read(p[0], &one, sizeof(one)) < 0 && errno == EAGAIN, "a ring was left");
        close(p[0]);
        close(p[1]);
}

/* Minor page faults this thread takes touching (a read, then a write of
 * what it read) the pages every connection touches: the header, and each
 * ring's control block and first data page.  Not instrumented: under
 * AddressSanitizer the check of each access would read shadow pages never
 * read before, faults that are not the region's. */
__attribute__((no_sanitize("address")))
static long faults_touching(unsigned char *mem, uint32_t ring_size)
{
        size_t span = CTL_SIZE + ring_size, at[] = {
                0, 4096, 4096 + CTL_SIZE, 4096 + span, 4096 + span + CTL_SIZE,
        };
        struct rusage before, after;

        getrusage(RUSAGE_THREAD, &before);
        for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
                volatile unsigned char *b = mem + at[i];

                *b = *b;
        }
        getrusage(RUSAGE_THREAD, &after);
        return after.ru_minflt - before.ru_minflt;
}

/* shm_link_prefault: an end's fresh mapping takes no page fault where
 * every connection goes (several without it). */
Test(shm_link, prefault_maps_in_the_pages_every_connection_touches)
{
        struct fixture g = fixture_new(65536);
        void *cold, *warm;
        size_t size;
        struct shm_link l;

        cr_assert_eq(shm_region_map(g.fd, g.size, &cold, &size), 0);
        long n = faults_touching(cold, g.ring_size);
        /* The kernel maps a few neighbours of a read fault that are in
         * memory already (the header and control blocks datd wrote), never
         * pages not touched before: each ring's first data page faults. */
        cr_expect_geq(n, 2, "without it, only %ld faults", n);
        cr_assert_eq(shm_region_map(g.fd, g.size, &warm, &size), 0);
        shm_link_prefault(warm, size, g.ring_size);
        cr_expect_eq(faults_touching(warm, g.ring_size), 0);
        cr_expect_eq(shm_link_attach(warm, size, g.ring_size, 0, -1, -1, &l), 0,
                     "the region is no longer a link");
        /* Only a hint: a size or ring size that does not fit does nothing. */
        shm_link_prefault(warm, 4096, g.ring_size);
        shm_link_prefault(warm, size, 1000);
        shm_region_unmap(cold, size);
        shm_region_unmap(warm, size);
        fixture_free(&g);
}

Test(shm_link, writer_rings_no_doorbell_while_the_reader_has_not_armed, .init = link_setup, .fini = link_teardown)
{
        unsigned char out[64];

        for (int i = 0; i < 1000; i++) {
                cr_assert_eq(write_bytes(&e0, "12345678", 8), 8);
                cr_assert_eq(read_bytes(&e1, out, sizeof(out)), 8);
        }
        cr_expect_eq(e0.doorbell_writes, 0);
        cr_expect_eq(e1.doorbell_writes, 0);
        cr_expect_not(doorbell_rang(f.doorbell[1]));
        cr_expect_not(doorbell_rang(f.doorbell[0]));
}

Test(shm_link, writer_rings_once_for_a_reader_that_armed, .init = link_setup, .fini = link_teardown)
{
        cr_assert(shm_link_arm(&e1, true, false), "nothing to read: may sleep");
        cr_assert_eq(write_bytes(&e0, "a", 1), 1);
        cr_expect_eq(e0.doorbell_writes, 1);
        cr_expect(doorbell_rang(f.doorbell[1]));
        cr_assert_eq(write_bytes(&e0, "b", 1), 1);
        cr_expect_eq(e0.doorbell_writes, 1, "the announcement was taken down with the ring");
        shm_link_doorbell_drain(&e1);
        cr_expect_not(doorbell_rang(f.doorbell[1]), "drained");
        cr_expect_not(doorbell_rang(f.doorbell[0]), "the writer's own doorbell stays quiet");
}

/* shm_link_quiet: the writes and the close after it ring nothing, even
 * for a reader that armed; the reader still finds both; a fresh attach of
 * the same region is not quiet. */
Test(shm_link, a_quiet_end_wakes_nobody_and_a_fresh_attach_is_not_quiet, .init = link_setup, .fini = link_teardown)
{
        unsigned char out[64];

        cr_assert(shm_link_arm(&e1, true, false), "nothing to read: may sleep");
        shm_link_quiet(&e0, true);
        cr_assert_eq(write_bytes(&e0, "bye", 3), 3);
        shm_link_close_tx(&e0);
        cr_expect_eq(e0.doorbell_writes, 0);
        cr_expect_not(doorbell_rang(f.doorbell[1]), "the armed reader was not rung");
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), 3, "what was written is there");
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), -EPIPE, "and the end after it");
        cr_assert_eq(shm_link_reset_fd(f.fd, f.size, f.ring_size), 0);
        ends(&f, &e0, &e1);
        cr_assert(shm_link_arm(&e1, true, false));
        cr_assert_eq(write_bytes(&e0, "a", 1), 1);
        cr_expect_eq(e0.doorbell_writes, 1, "re-attached: rings again");
        cr_expect(doorbell_rang(f.doorbell[1]));
}

Test(shm_link, arm_refuses_to_sleep_when_data_is_there, .init = link_setup, .fini = link_teardown)
{
        cr_assert_eq(write_bytes(&e0, "a", 1), 1);
        cr_expect_not(shm_link_arm(&e1, true, false));
        cr_assert_eq(write_bytes(&e0, "b", 1), 1);
        cr_expect_eq(e0.doorbell_writes, 0, "the announcement was withdrawn");
}

Test(shm_link, arm_refuses_to_sleep_when_the_peer_closed, .init = link_setup, .fini = link_teardown)
{
        shm_link_close_tx(&e0);
        cr_expect_not(shm_link_arm(&e1, true, false), "the end of the stream is work to do");
}

Test(shm_link, arm_for_room_refuses_to_sleep_while_there_is_room, .init = link_setup, .fini = link_teardown)
{
        static unsigned char buf[RING];

        cr_assert_eq(write_bytes(&e0, buf, 3 * REC_MAX), (ssize_t)(3 * REC_MAX));
        cr_expect_not(shm_link_arm(&e0, true, true), "room for a last record");
        cr_assert_eq(write_bytes(&e0, buf, RING), (ssize_t)(WRITE_MAX - 3 * REC_MAX));
        cr_expect(shm_link_arm(&e0, true, true), "full and nothing to read");
        shm_link_disarm(&e0);
}

/* shm_link_arm without want_data: for an end that takes nothing in (a
 * frame waits for a receive), data waiting is no reason to stay awake, and
 * the peer's writes ring nothing; room still is, and its freeing rings. */
Test(shm_link, arm_for_room_alone_ignores_data_waiting, .init = link_setup, .fini = link_teardown)
{
        static unsigned char buf[RING];

        cr_assert_eq(write_bytes(&e1, "x", 1), 1);
        cr_expect_not(shm_link_arm(&e0, false, true), "room: do not sleep");
        cr_assert_eq(write_bytes(&e0, buf, RING), (ssize_t)WRITE_MAX);
        cr_expect(shm_link_arm(&e0, false, true), "full: sleep, with data waiting");
        cr_assert_eq(write_bytes(&e1, "y", 1), 1);
        cr_expect_eq(e1.doorbell_writes, 0, "the reader side was not announced");
        cr_assert_eq(read_bytes(&e1, buf, REC_MAX), (ssize_t)REC_MAX);
        cr_expect_eq(e1.doorbell_writes, 1, "room freed: rung");
        cr_expect(doorbell_rang(f.doorbell[0]));
}

Test(shm_link, reader_rings_a_writer_that_waits_for_room_when_it_frees_some, .init = link_setup, .fini = link_teardown)
{
        static unsigned char buf[RING];

        cr_assert_eq(write_bytes(&e0, buf, RING), (ssize_t)WRITE_MAX);
        cr_assert_eq(read_bytes(&e1, buf, REC_MAX), (ssize_t)REC_MAX);
        cr_expect_eq(e1.doorbell_writes, 0, "the writer did not wait");
        cr_assert_eq(write_bytes(&e0, buf, RING), (ssize_t)REC_MAX);
        cr_assert(shm_link_arm(&e0, true, true));
        cr_assert_eq(read_bytes(&e1, buf, 1), 1);
        cr_expect_eq(e1.doorbell_writes, 0, "a record read in part frees nothing");
        cr_assert_eq(read_bytes(&e1, buf, REC_MAX - 1), (ssize_t)(REC_MAX - 1));
        cr_expect_eq(e1.doorbell_writes, 1);
        cr_expect(doorbell_rang(f.doorbell[0]));
        cr_assert_eq(read_bytes(&e1, buf, REC_MAX), (ssize_t)REC_MAX);
        cr_expect_eq(e1.doorbell_writes, 1, "one ring per announcement");
}

/* ---- a hostile peer ----------------------------------------------------- */

/* The data offset of the record header at stream position pos of ring r. */
static size_t rec_at(unsigned r, uint64_t pos)
{
        return ring_ctl(&f, r) + CTL_SIZE + (size_t)(pos % RING);
}

Test(shm_link, read_refuses_a_record_header_without_the_mark_or_too_long, .init = link_setup, .fini = link_teardown)
{
        unsigned char out[64];

        cr_assert_eq(write_bytes(&e0, "abcdefgh", 8), 8);
        put_u64(f.mem, rec_at(0, 0), 0x12345678ull << 32 | 8);
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), -EPROTO);
        cr_expect_eq(shm_link_readable(&e1), 1, "readable, so that the poller learns it");
        cr_expect(shm_link_rx_ready(&e1), "the error is there to read");
        cr_expect_not(shm_link_arm(&e1, true, false), "work to do: the error");
        put_u64(f.mem, rec_at(0, 0), REC_MARK << 32 | (REC_MAX + 1));
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), -EPROTO);
        put_u64(f.mem, rec_at(0, 0), REC_MARK << 32);
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), -EPROTO, "a record of no bytes");
        put_u64(f.mem, rec_at(0, 0), REC_MARK << 32 | 8);
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), 8, "a possible record reads again");
        cr_expect_eq(memcmp(out, "abcdefgh", 8), 0);
}

Test(shm_link, bytes_read_before_an_impossible_record_come_out_first, .init = link_setup, .fini = link_teardown)
{
        unsigned char out[64];

        cr_assert_eq(write_bytes(&e0, "abcd", 4), 4);
        cr_assert_eq(write_bytes(&e0, "efgh", 4), 4);
        put_u64(f.mem, rec_at(0, CELL), ~0ull);
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), 4);
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), -EPROTO);
}

Test(shm_link, a_stale_record_of_the_last_lap_is_never_read, .init = link_setup, .fini = link_teardown)
{
        unsigned char out[RING];

        /* Round the ring with full cells, so that every cell has held a
         * record header; then each new record must end where it says. */
        for (unsigned i = 0; i < 3 * RING / CELL; i++) {
                cr_assert_eq(write_bytes(&e0, out, 56), 56);
                cr_assert_eq(read_bytes(&e1, out, sizeof(out)), 56);
        }
        cr_assert_eq(write_bytes(&e0, "x", 1), 1);
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), 1);
        cr_expect_eq(read_bytes(&e1, out, sizeof(out)), 0, "the next cell held an old header");
        cr_expect_eq(shm_link_readable(&e1), 0);
        cr_expect(shm_link_arm(&e1, true, false), "nothing to read: may sleep");
        shm_link_disarm(&e1);
}

Test(shm_link, write_refuses_a_consumer_counter_backwards_or_past_what_was_written, .init = link_setup, .fini = link_teardown)
{
        static unsigned char buf[RING];

        cr_assert_eq(write_bytes(&e0, buf, RING), (ssize_t)WRITE_MAX);
        put_u64(f.mem, ring_ctl(&f, 0) + CTL_CONSUMED, RING + 1);
        cr_expect_eq(write_bytes(&e0, buf, 1), -EPROTO);
        cr_expect_eq(shm_link_writable(&e0), 0);
        put_u64(f.mem, ring_ctl(&f, 0) + CTL_CONSUMED, 2 * CELL);
        cr_expect_eq(write_bytes(&e0, buf, 1), 1);
        put_u64(f.mem, ring_ctl(&f, 0) + CTL_CONSUMED, CELL);
        cr_expect_eq(write_bytes(&e0, buf, 100), -EPROTO, "backwards");
}

/* A child rewrites every shared word of the link with random values while
 * the parent keeps reading, writing and arming: every answer stays in its
 * range and nothing lands outside the caller's buffers.  The parent goes
 * on until the child has scribbled a while (it may get no CPU at first,
 * when the other tests of the file run beside it), within 10 s. */
Test(shm_link, a_peer_scribbling_on_the_control_blocks_never_breaks_the_other_end)
{
        struct fixture f = fixture_new(RING);
        struct shm_link e0;
        enum { GUARD = 64, BUF = 3000 };
        static unsigned char buf[GUARD + BUF + GUARD];
        size_t words[] = { CTL_WANT_ROOM, CTL_CLOSED, CTL_CONSUMED, CTL_SLEEPING, CTL_SIZE,
                           CTL_SIZE + CELL, CTL_SIZE + RING - CELL };
        uint64_t rng = 99;
        unsigned refused = 0;
        int started[2];
        char c;
        pid_t pid;

        uint64_t *scribbles = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                                   -1, 0);
        time_t end = time(NULL) + 10;

        cr_assert_neq(scribbles, MAP_FAILED);
        cr_assert_eq(end_attach(&f, f.mem, 0, &e0), 0);
        cr_assert_eq(pipe(started), 0);
        pid = fork_child();
        if (pid == 0) {
                uint64_t s = 7;

                (void)!write(started[1], "", 1);
                for (;; __atomic_add_fetch(scribbles, 1, __ATOMIC_RELAXED)) {
                        size_t ctl = (size_t)get_u64(f.mem, rng_next(&s) & 1 ? OFF_RING1 : OFF_RING0);
                        size_t w = words[rng_next(&s) % ARRAY_SIZE(words)];
                        uint64_t v = rng_next(&s);

                        /* Near the counters' values as often as far off. */
                        if (v & 1)
                                v = (v >> 1) % (4 * RING);
                        if (w >= CTL_SIZE)       /* a record header */
                                put_u64(f.mem, ctl + w, v & 2 ? REC_MARK << 32 | v >> 2 : v);
                        else if (w == CTL_CONSUMED)
                                put_u64(f.mem, ctl + w, v);
                        else
                                put_u32(f.mem, ctl + w, (uint32_t)v);
                }
        }
        cr_assert_eq(read(started[0], &c, 1), 1);
        close(started[0]);
        close(started[1]);
        memset(buf, 0xee, sizeof(buf));
        for (int i = 0; i < 2000000 || (__atomic_load_n(scribbles, __ATOMIC_RELAXED) < 1000000 &&
                                        time(NULL) < end); i++) {
                size_t n = 1 + rng_next(&rng) % BUF;
                ssize_t r;

                switch (rng_next(&rng) % 4) {
                case 0:
                        r = read_bytes(&e0, buf + GUARD, n);
                        break;
                case 1:
                        r = write_bytes(&e0, buf + GUARD, n);
                        break;
                case 2:
                        shm_link_arm(&e0, true, true);
                        shm_link_disarm(&e0);
                        r = 0;
                        break;
                default:
                        r = (ssize_t)(shm_link_readable(&e0) + shm_link_writable(&e0));
                        cr_assert_leq(r, 2 * (ssize_t)RING);
                        r = 0;
                }
                cr_assert(r == -EPROTO || r == -EPIPE || (r >= 0 && (size_t)r <= n),
                          "answer %zd for %zu bytes", r, n);
                /* Nothing else closes the link or breaks its rules: a
                 * scribbled `closed` flag is noticed as -EPIPE (and may
                 * be all there is to notice for a while), the rest as
                 * -EPROTO. */
                refused += r == -EPROTO || r == -EPIPE;
        }
        cr_expect_eq(reap(pid, true), 128 + SIGKILL);
        for (size_t i = 0; i < GUARD; i++) {
                cr_assert_eq(buf[i], 0xee);
                cr_assert_eq(buf[GUARD + BUF + i], 0xee);
        }
        cr_expect_gt(refused, 0, "the scribbling was not noticed (%llu scribbles)",
                     (unsigned long long)__atomic_load_n(scribbles, __ATOMIC_RELAXED));
        munmap(scribbles, 4096);
        fixture_free(&f);
}

/* ---- two processes ------------------------------------------------------ */

/* Sleeps on the end's doorbell until work comes or ms pass; false when
 * the time ran out with work there (a lost wake-up). */
struct sleep_count {
        unsigned arms;                  /* announcements made */
        unsigned sleeps;                /* of which led to a poll */
};

static bool sleep_on_doorbell(struct shm_link *l, bool want_room, int ms, struct sleep_count *sc)
{
        struct pollfd p = { .fd = l->doorbell_mine, .events = POLLIN };
        int r;

        sc->arms++;
        if (!shm_link_arm(l, true, want_room))
                return true;
        sc->sleeps++;
        r = poll(&p, 1, ms);
        shm_link_disarm(l);
        shm_link_doorbell_drain(l);
        if (r == 0)
                return shm_link_readable(l) == 0 && !(want_room && shm_link_writable(l) > 0);
        return true;
}

struct stream_opts {
        uint64_t total;
        size_t chunk_max;
        bool sleep;                     /* the consumer sleeps when empty */
};

struct stream_result {
        uint64_t bytes;
        struct sleep_count sc;
        uint64_t doorbell_writes;
        int lost;                       /* wake-ups that never came */
};

/* The producer side: a child that maps the region by its fd as libdat
 * does, writes opts->total bytes of the stream in random chunks, waits
 * for room on its doorbell, and closes.  Reports in *res (shared). */
static int stream_producer(const struct fixture *f, const struct stream_opts *o,
                           struct stream_result *res)
{
        unsigned char *buf = malloc(o->chunk_max);
        struct shm_link l;
        uint64_t pos = 0, rng = 4242;
        void *mem;
        size_t size;

        if (!buf || shm_region_map(f->fd, f->size, &mem, &size) != 0 ||
            end_attach(f, mem, 0, &l) != 0)
                return 10;
        while (pos < o->total) {
                size_t n = 1 + rng_next(&rng) % o->chunk_max;
                ssize_t w;

                n = (size_t)(n < o->total - pos ? n : o->total - pos);
                fill_stream(buf, pos, n);
                for (size_t done = 0; done < n; done += (size_t)w) {
                        w = write_bytes(&l, buf + done, n - done);
                        if (w < 0)
                                return 11;
                        if (w == 0 && !sleep_on_doorbell(&l, true, 5000, &res->sc))
                                res->lost++;
                }
                pos += n;
                /* Now and then a pause: the consumer runs dry and sleeps. */
                if (o->sleep && rng_next(&rng) % 64 == 0)
                        usleep(100);
        }
        shm_link_close_tx(&l);
        res->bytes = pos;
        res->doorbell_writes = l.doorbell_writes;
        return 0;
}

static void stream_consume(const struct fixture *f, const struct stream_opts *o,
                           struct stream_result *res)
{
        unsigned char *buf = malloc(o->chunk_max);
        struct shm_link l;
        uint64_t rng = 777;

        cr_assert_not_null(buf);
        cr_assert_eq(end_attach(f, f->mem, 1, &l), 0);
        for (;;) {
                size_t n = 1 + rng_next(&rng) % o->chunk_max;
                ssize_t r = read_bytes(&l, buf, n);

                if (r == -EPIPE)
                        break;
                cr_assert_geq(r, 0, "read: %zd", r);
                cr_assert(check_stream(buf, res->bytes, (size_t)r), "bytes at %llu",
                          (unsigned long long)res->bytes);
                res->bytes += (uint64_t)r;
                if (r == 0 && o->sleep && !sleep_on_doorbell(&l, false, 5000, &res->sc))
                        res->lost++;
                /* Now and then a pause: the ring fills and the producer waits. */
                if (o->sleep && rng_next(&rng) % 64 == 0)
                        usleep(100);
        }
        res->doorbell_writes = l.doorbell_writes;
        free(buf);
}

static void run_stream(const struct stream_opts *o, uint32_t ring_size, struct stream_result *prod,
                       struct stream_result *cons)
{
        struct fixture f = fixture_new(ring_size);
        struct stream_result *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        pid_t pid;

        cr_assert_neq(shared, MAP_FAILED);
        memset(shared, 0, sizeof(*shared));
        pid = fork_child();
        if (pid == 0)
                _exit(stream_producer(&f, o, shared));
        memset(cons, 0, sizeof(*cons));
        stream_consume(&f, o, cons);
        cr_expect_eq(reap(pid, false), 0);
        *prod = *shared;
        munmap(shared, 4096);
        fixture_free(&f);
}

Test(shm_link, two_processes_stream_hundreds_of_megabytes_intact_sleeping_on_doorbells)
{
        struct stream_opts o = { .total = 256ull << 20, .chunk_max = 20000, .sleep = true };
        struct stream_result prod, cons;

        run_stream(&o, 64u << 10, &prod, &cons);
        cr_expect_eq(cons.bytes, o.total);
        cr_expect_eq(prod.bytes, o.total);
        cr_expect_eq(cons.lost, 0, "the consumer missed a wake-up");
        cr_expect_eq(prod.lost, 0, "the producer missed a wake-up");
        cr_expect_gt(cons.sc.sleeps, 0, "the consumer slept between bursts");
        cr_expect_gt(prod.sc.sleeps, 0, "the producer waited for room");
        /* Each ring took down one announcement (the producer's close rings
         * regardless). */
        cr_expect_leq(prod.doorbell_writes, (uint64_t)cons.sc.arms + 1);
        cr_expect_leq(cons.doorbell_writes, (uint64_t)prod.sc.arms);
}

Test(shm_link, a_consumer_that_never_sleeps_costs_the_producer_no_system_call)
{
        struct stream_opts o = { .total = 32ull << 20, .chunk_max = 3000, .sleep = false };
        struct stream_result prod, cons;

        run_stream(&o, 16u << 10, &prod, &cons);
        cr_expect_eq(cons.bytes, o.total);
        cr_expect_eq(prod.doorbell_writes, 1, "only the close rings");
}

/* Ping-pong where both sides sleep before every message: the classic
 * lost wake-up shows as a poll that times out with data waiting.  The
 * client sends 2i + 1, the server answers 2i + 2. */
static int echo_loop(struct shm_link *l, unsigned iters, bool client, struct sleep_count *sc)
{
        for (uint64_t i = 0; i < iters; i++) {
                uint64_t out = client ? 2 * i + 1 : 2 * i + 2, in;
                ssize_t r;

                if (client && write_bytes(l, &out, sizeof(out)) != sizeof(out))
                        return 22;
                while ((r = read_bytes(l, &in, sizeof(in))) == 0)
                        if (!sleep_on_doorbell(l, false, 5000, sc))
                                return 20;
                if (r != sizeof(in) || in != (client ? out + 1 : out - 1))
                        return 21;
                if (!client && write_bytes(l, &out, sizeof(out)) != sizeof(out))
                        return 22;
        }
        return 0;
}

Test(shm_link, no_wake_up_is_lost_when_both_ends_sleep_before_every_message)
{
        struct fixture f = fixture_new(RING);
        struct shm_link l;
        struct sleep_count sc = { 0 };
        unsigned iters = 20000;
        int rc;
        pid_t pid = fork_child();

        if (pid == 0) {
                struct sleep_count child = { 0 };

                if (end_attach(&f, f.mem, 1, &l) != 0)
                        _exit(10);
                _exit(echo_loop(&l, iters, false, &child));
        }
        cr_assert_eq(end_attach(&f, f.mem, 0, &l), 0);
        rc = echo_loop(&l, iters, true, &sc);
        cr_expect_eq(rc, 0);
        cr_expect_eq(reap(pid, rc != 0), rc == 0 ? 0 : 128 + SIGKILL);
        cr_expect_gt(sc.sleeps, iters / 2, "the client slept between messages");
        fixture_free(&f);
}

/* The race the sleep protocol exists for: the writer waits until the
 * reader has taken the last message, lets a short random time pass and
 * sends the next, so that it often publishes one just as the reader,
 * having found the ring empty, announces its sleep.  A message left
 * waiting while the reader sleeps is a lost wake-up; the reader's poll
 * times out after 200 ms to notice it. */
Test(shm_link, no_wake_up_is_lost_when_messages_arrive_as_the_reader_goes_to_sleep)
{
        struct fixture f = fixture_new(RING);
        struct shm_link l;
        struct sleep_count sc = { 0 };
        const uint64_t count = 200000;
        unsigned lost = 0;
        pid_t pid = fork_child();

        if (pid == 0) {
                uint64_t rng = 31337;

                if (end_attach(&f, f.mem, 0, &l) != 0)
                        _exit(10);
                for (uint64_t seq = 0; seq < count; seq++) {
                        while (shm_link_writable(&l) != WRITE_MAX)
                                ;
                        for (uint64_t spin = rng_next(&rng) % 64; spin > 0; spin--)
                                __asm__ __volatile__("" ::: "memory");
                        if (write_bytes(&l, &seq, sizeof(seq)) != sizeof(seq))
                                _exit(11);
                }
                _exit(0);
        }
        cr_assert_eq(end_attach(&f, f.mem, 1, &l), 0);
        for (uint64_t seq = 0; seq < count;) {
                uint64_t got;
                ssize_t r = read_bytes(&l, &got, sizeof(got));

                if (r == 0) {
                        lost += !sleep_on_doorbell(&l, false, 200, &sc);
                        continue;
                }
                cr_assert_eq(r, sizeof(got));
                cr_assert_eq(got, seq);
                seq++;
        }
        cr_expect_eq(reap(pid, false), 0);
        cr_expect_eq(lost, 0, "%u wake-ups lost in %u sleeps", lost, sc.sleeps);
        cr_expect_gt(sc.sleeps, 1000, "the reader slept often");
        fixture_free(&f);
}

/* Both ends attach to the region at mem (laid out as ref's) and carry a
 * message from side `from` to the other. */
static void ends_carry(struct fixture *ref, void *mem, unsigned from)
{
        struct shm_link end[2];
        char out[5] = "ping", in[5] = { 0 };

        cr_assert_eq(end_attach(ref, mem, 0, &end[0]), 0);
        cr_assert_eq(end_attach(ref, mem, 1, &end[1]), 0);
        cr_assert_eq(shm_link_writev(&end[from], &(struct iovec){ out, 4 }, 1), 4);
        cr_assert_eq(shm_link_readv(&end[1 - from], &(struct iovec){ in, 4 }, 1), 4);
        cr_assert_str_eq(in, "ping");
}

/* datd's reset of a kept channel (shm_link_reset_fd): over a region every
 * byte of which a connection (or a peer that meant harm) left dirty, the
 * header is again what shm_link_init makes, each ring's control block and
 * the first cell of its data are zero, and not a byte beyond them is
 * written (what the rings held is never read again); both ends then
 * attach and carry bytes. */
Test(shm_link, a_reset_lays_a_dirty_region_out_as_init_does_and_writes_no_more)
{
        size_t size = shm_link_region_size(RING), rounded, mapped;
        size_t span = (size - SHM_LINK_HEADER) / 2;
        struct fixture ref = fixture_new(RING);
        unsigned char *mem;
        void *m;
        int fd;

        cr_assert_eq(shm_region_create_unmapped(size, &fd, &rounded), 0);
        cr_assert_eq(shm_region_map(fd, rounded, &m, &mapped), 0);
        mem = m;
        memset(mem, 0xab, rounded);
        cr_assert_eq(shm_link_reset_fd(fd, rounded - 4096, RING), -EINVAL, "a region too small");
        cr_assert_eq(mem[0], 0xab, "refused: nothing written");
        cr_assert_eq(shm_link_reset_fd(fd, rounded, RING), 0);
        cr_assert_eq(memcmp(mem, ref.mem, SHM_LINK_HEADER), 0, "the header shm_link_init makes");
        for (unsigned r = 0; r < 2; r++) {
                const unsigned char *ring = mem + SHM_LINK_HEADER + r * span;

                for (size_t i = 0; i < CTL_SIZE + CELL; i++)
                        cr_assert_eq(ring[i], 0, "ring %u: byte %zu of its control block "
                                                 "or first cell", r, i);
                cr_assert_eq(ring[CTL_SIZE + CELL], 0xab, "ring %u: nothing past the first cell", r);
                cr_assert_eq(ring[span - 1], 0xab, "ring %u: its last byte untouched", r);
        }
        ends_carry(&ref, mem, 1);
        shm_region_unmap(mem, mapped);
        close(fd);
        fixture_free(&ref);
}

/* datd's way (shm_link_init_fd): a header written by pwrite into a fresh
 * unmapped region is the same layout shm_link_init makes in memory, and
 * both ends attach to it and carry bytes. */
Test(shm_link, header_written_without_a_mapping_matches_the_mapped_layout)
{
        size_t size = shm_link_region_size(RING), rounded;
        struct fixture ref = fixture_new(RING);
        void *mem;
        size_t mapped;
        int fd;

        cr_assert_eq(shm_region_create_unmapped(size, &fd, &rounded), 0);
        cr_assert_eq(rounded, ref.size);
        cr_assert_eq(shm_link_init_fd(fd, rounded - 4096, RING), -EINVAL, "a region too small");
        cr_assert_eq(shm_link_init_fd(fd, rounded, RING), 0);
        cr_assert_eq(shm_region_map(fd, rounded, &mem, &mapped), 0);
        cr_assert_eq(mapped, rounded);
        cr_assert_eq(memcmp(mem, ref.mem, rounded), 0, "the same bytes as shm_link_init's");
        ends_carry(&ref, mem, 0);
        shm_region_unmap(mem, mapped);
        close(fd);
        fixture_free(&ref);
}
