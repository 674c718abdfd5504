/* Target memory that goes while a payload to or from it is still moving
 * (dat_lmr_free, an RMR unbound): the rest of the payload must not land
 * there, nor be read from there, and the request answers with the error
 * a NIC gives.  A long payload is half in the channel when the memory
 * goes: the initiator's progress thread is frozen (dto_freeze_helpers), so
 * only what its post wrote is there until it is thawed.
 *
 * The target's memory is a memfd mapped twice: the LMR is registered over
 * one mapping, the test looks through the other.  Neither is unmapped, so
 * a byte that lands after the free shows in the second mapping instead of
 * crashing the target (or landing in memory the test cannot see). */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(freed_target);

/* Larger than the shm ring and than what the tcp socket buffers hold: the
 * post cannot write it whole. */
#define LEN ((DAT_VLEN)16 << 20)
#define SEED 77
#define SECRET 0xAB             /* what the target puts in the memory after the free */

/* Inline payloads only: with cross-memory attach a large payload moves in
 * one call, never in pieces.  Socket buffers of a fixed size (tcp; the shm
 * ring is 256 KiB): autotuned, they could take the whole payload. */
static const char *const no_cma_env[] = { "DATD_SHM_NO_CMA=1", "DATD_TCP_SOCKBUF=131072",
                                          NULL };

struct twin {
        struct dto_mem m;       /* the LMR, registered over one mapping (m.buf) */
        unsigned char *view;    /* the other mapping of the same memory */
};

static struct twin twin_new(struct dto_side *s, DAT_VLEN len)
{
        struct twin t = { .m = { .len = len, .privileges = DAT_MEM_PRIV_ALL_FLAG } };
        DAT_REGION_DESCRIPTION region;
        DAT_VLEN reg_len = 0;
        DAT_VADDR reg_addr = 0;
        int fd = memfd_create("dto-freed-target", MFD_CLOEXEC);
        void *a, *b;

        DTO_ASSERTF(fd >= 0, "memfd_create: %m");
        DTO_ASSERTF(ftruncate(fd, (off_t)len) == 0, "ftruncate: %m");
        a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        DTO_ASSERTF(a != MAP_FAILED && b != MAP_FAILED, "mmap: %m");
        close(fd);
        t.m.buf = a;
        t.view = b;
        region.for_va = a;
        DTO_ASSERT_EQ(dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, region, len, s->pz,
                                     DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &t.m.lmr,
                                     &t.m.lmr_context, &t.m.rmr_context, &reg_len, &reg_addr),
                      DAT_SUCCESS);
        return t;
}

static size_t count_nonzero(const unsigned char *p, size_t len)
{
        size_t n = 0;

        for (size_t i = 0; i < len; i++)
                n += p[i] != 0;
        return n;
}

static void sleep_ms(long ms)
{
        nanosleep(&(struct timespec){ ms / 1000, (ms % 1000) * 1000 * 1000 }, NULL);
}

/* Waits until some of the payload landed in view (the target's progress
 * thread took the frame's header and set the sink), then until nothing
 * more lands (it placed what the channel holds; the initiator's progress
 * thread, frozen, writes no more). */
static void wait_payload_started(const unsigned char *view)
{
        double deadline = dto_wall_seconds() + DTO_WAIT_US / 1e6;
        size_t before, now;

        while (count_nonzero(view, 64 * 1024) == 0) {
                DTO_ASSERTF(dto_wall_seconds() < deadline, "no payload ever landed");
                sleep_ms(1);
        }
        now = count_nonzero(view, LEN);
        do {
                DTO_ASSERTF(dto_wall_seconds() < deadline, "the payload never stopped landing");
                before = now;
                sleep_ms(20);
                now = count_nonzero(view, LEN);
        } while (now != before);
        /* The payload lands in order: its end is not there yet. */
        DTO_ASSERTF(count_nonzero(view + LEN - 65536, 65536) == 0,
                    "the whole payload landed before the free (%zu bytes)", now);
}

/* The target of a long request: freezes the initiator's helpers, then
 * has its own frozen by the initiator while it posts (so that the post
 * writes only what the channel holds: nobody reads meanwhile), and waits
 * until it posted and thawed them (initiator_posts). */
static void initiator_frozen(struct dto_side *s, struct dto_frozen *fr)
{
        dto_put_u64(s, (uint64_t)getpid());
        dto_freeze_helpers((pid_t)dto_get_u64(s), fr);
        dto_put_u64(s, 1);
        DTO_ASSERT_EQ(dto_get_u64(s), 4);
}

/* After the memory went: cleared, the initiator thawed and told so;
 * nothing may land there until its request completed (it says so). */
static void expect_nothing_lands(struct dto_side *s, struct twin *t, struct dto_frozen *fr)
{
        memset(t->view, 0, LEN);
        dto_thaw(fr);
        dto_put_u64(s, 2);
        DTO_ASSERT_EQ(dto_get_u64(s), 3);
        DTO_ASSERTF(count_nonzero(t->view, LEN) == 0,
                    "%zu bytes landed in memory after it was freed",
                    count_nonzero(t->view, LEN));
}

/* ---- RDMA Write, or Send, into an LMR freed mid-payload -------------------- */

static const DAT_DTOS send_op = DAT_DTO_SEND, write_op = DAT_DTO_RDMA_WRITE;

/* The target of long_request_initiator's request (arg: its op): the
 * twin, described to the initiator (a Send: posted as a receive), freed
 * once the payload started landing. */
static void free_target(struct dto_side *s, void *arg)
{
        const DAT_DTOS *op = arg;
        struct twin t = twin_new(s, LEN);
        DAT_LMR_TRIPLET iov = dto_iov(&t.m, 0, LEN);
        struct dto_frozen fr;

        if (*op == DAT_DTO_SEND)
                dto_post_recv(s, s->ep[0], &iov, 1, 3);
        (void)dto_exchange(s, &t.m);
        initiator_frozen(s, &fr);
        wait_payload_started(t.view);
        DTO_ASSERT_EQ(dat_lmr_free(t.m.lmr), DAT_SUCCESS);
        expect_nothing_lands(s, &t, &fr);
        if (*op == DAT_DTO_SEND)
                /* dto.h: a receive whose LMR went away. */
                dto_expect_dto(s->recv_evd, s->ep[0], 3, DAT_DTO_ERR_LOCAL_PROTECTION,
                               DTO_ANY_LENGTH, DAT_DTO_RECEIVE);
        dto_barrier(s);
}

/* The initiator of one request of LEN bytes (arg: DAT_DTO_SEND or
 * DAT_DTO_RDMA_WRITE, to the peer's memory as exchanged), its helpers
 * frozen by the target; completes with the error a target that lost the
 * memory answers (dto.h). */
static void long_request_initiator(struct dto_side *s, void *arg)
{
        const DAT_DTOS *op = arg;
        struct dto_mem none = { 0 };
        struct dto_remote r = dto_exchange(s, &none);
        DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, LEN);
        DAT_RMR_TRIPLET remote = dto_riov(&r, 0, LEN);
        pid_t target = (pid_t)dto_get_u64(s);
        struct dto_frozen fr;

        dto_fill(s->mem.buf, LEN, SEED);
        dto_put_u64(s, (uint64_t)getpid());
        DTO_ASSERT_EQ(dto_get_u64(s), 1); /* our helpers are frozen */
        dto_freeze_helpers(target, &fr);
        if (*op == DAT_DTO_SEND)
                DTO_ASSERT_EQ(dat_ep_post_send(s->ep[0], 1, &iov, dto_cookie(1),
                                               DAT_COMPLETION_DEFAULT_FLAG),
                              DAT_SUCCESS);
        else
                DTO_ASSERT_EQ(dat_ep_post_rdma_write(s->ep[0], 1, &iov, dto_cookie(1), &remote,
                                                     DAT_COMPLETION_DEFAULT_FLAG),
                              DAT_SUCCESS);
        dto_thaw(&fr);
        dto_put_u64(s, 4);
        /* No call of ours moves the rest until the target freed it (a
         * wait would: it runs our progress). */
        DTO_ASSERT_EQ(dto_get_u64(s), 2);
        dto_expect_dto(s->request_evd, s->ep[0], 1,
                       *op == DAT_DTO_SEND ? DAT_DTO_ERR_REMOTE_RESPONDER
                                           : DAT_DTO_ERR_REMOTE_ACCESS,
                       DTO_ANY_LENGTH, *op);
        dto_put_u64(s, 3);
        dto_barrier(s);
}

/* dat_lmr_free(3DAT): the memory is no longer accessible through the LMR;
 * a Write whose payload was still coming answers
 * DAT_DTO_ERR_REMOTE_ACCESS and places nothing more. */
Test(DTO_SUITE(freed_target), a_write_stops_at_the_free_of_its_lmr)
{
        struct dto_config cfg = { .buf_len = LEN, .env = no_cma_env };

        dto_run(&cfg, free_target, long_request_initiator, (void *)&write_op);
}

/* ---- RDMA Write into an RMR unbound mid-payload ----------------------------- */

/* dat_rmr_bind of rmr to t (length 0: unbinds) on ep[0], waited for;
 * returns the new context. */
static DAT_RMR_CONTEXT bind_wait(struct dto_side *s, DAT_RMR_HANDLE rmr, const struct twin *t,
                                 DAT_VLEN len)
{
        DAT_LMR_TRIPLET iov = len ? dto_iov(&t->m, 0, len) : (DAT_LMR_TRIPLET){ 0 };
        DAT_RMR_COOKIE c = { .as_64 = len };
        DAT_RMR_CONTEXT ctx = 0;
        DAT_EVENT ev;

        DTO_ASSERT_EQ(dat_rmr_bind(rmr, t->m.lmr, &iov, DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
                                   DAT_VA_TYPE_VA, s->ep[0], c, DAT_COMPLETION_DEFAULT_FLAG,
                                   &ctx),
                      DAT_SUCCESS);
        ev = dto_wait_event(s->request_evd);
        DTO_ASSERT_EQ(ev.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
        DTO_ASSERT_EQ(ev.event_data.rmr_completion_event_data.status, DAT_RMR_BIND_SUCCESS);
        return ctx;
}

static void unbind_target(struct dto_side *s, void *arg)
{
        struct twin t = twin_new(s, LEN);
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
        struct dto_mem window = t.m;
        struct dto_frozen fr;

        (void)arg;
        DTO_ASSERT_EQ(dat_rmr_create(s->pz, &rmr), DAT_SUCCESS);
        /* The initiator writes through the RMR's context, not the LMR's. */
        window.rmr_context = bind_wait(s, rmr, &t, LEN);
        (void)dto_exchange(s, &window);
        initiator_frozen(s, &fr);
        wait_payload_started(t.view);
        (void)bind_wait(s, rmr, &t, 0);
        expect_nothing_lands(s, &t, &fr);
        dto_barrier(s);
        /* The connection is broken: the RMR is ours to free, then the LMR. */
        (void)dat_rmr_free(rmr);
        (void)dat_lmr_free(t.m.lmr);
}

/* dat_rmr_bind(3DAT) with a zero-length triplet: the old rmr_context stops
 * reaching the memory; a Write through it whose payload was still coming
 * answers DAT_DTO_ERR_REMOTE_ACCESS and places nothing more (the LMR is
 * still there: the unbind alone must stop it). */
Test(DTO_SUITE(freed_target), a_write_stops_at_the_unbind_of_its_rmr)
{
        struct dto_config cfg = { .buf_len = LEN, .env = no_cma_env };

        dto_run(&cfg, unbind_target, long_request_initiator, (void *)&write_op);
}

/* dat_lmr_free(3DAT) under a posted receive whose Send is arriving: the
 * receive completes DAT_DTO_ERR_LOCAL_PROTECTION, the Send
 * DAT_DTO_ERR_REMOTE_RESPONDER, and nothing more of it lands. */
Test(DTO_SUITE(freed_target), a_send_stops_at_the_free_of_its_receive_lmr)
{
        struct dto_config cfg = { .buf_len = LEN, .env = no_cma_env };

        dto_run(&cfg, free_target, long_request_initiator, (void *)&send_op);
}

/* ---- RDMA Read responses from an LMR freed while they wait ------------------ */

#define SMALL_READ ((DAT_VLEN)4096)

/* The target of one or two Reads: the first of LEN bytes from mine (two
 * Reads: from the fixture's buffer, kept; one Read: from the twin), the
 * second of SMALL_READ from the twin.  The twin is freed once the first
 * response is partly out, then filled with SECRET. */
static void read_target(struct dto_side *s, void *arg)
{
        const bool *two = arg;
        struct twin t = twin_new(s, LEN);
        struct dto_frozen fr;
        pid_t init;

        memset(t.view, 0x11, LEN);
        memset(s->mem.buf, 0x11, LEN);
        (void)dto_exchange(s, *two ? &s->mem : &t.m);
        (void)dto_exchange(s, &t.m);
        init = (pid_t)dto_get_u64(s);
        dto_freeze_helpers(init, &fr);
        dto_put_u64(s, 1);
        /* The initiator saw the first bytes of the first response: it is
         * partly out (and the second queued behind it). */
        DTO_ASSERT_EQ(dto_get_u64(s), 2);
        /* The second request came right behind the first: give our
         * progress thread time to take it (no event says when it did; if
         * it did not, the free is found at the request, and the test
         * passes without showing anything). */
        sleep_ms(50);
        DTO_ASSERT_EQ(dat_lmr_free(t.m.lmr), DAT_SUCCESS);
        /* A write of the channel already past its check when the free
         * came copies what the memory held then: give it time to end
         * before the memory changes (no event says when it did; half a
         * second, for a loaded machine's preemptions). */
        sleep_ms(500);
        memset(t.view, SECRET, LEN);
        dto_thaw(&fr);
        dto_put_u64(s, 3);
        dto_barrier(s);
}

static size_t count_secret(const unsigned char *p, size_t len)
{
        size_t n = 0;

        for (size_t i = 0; i < len; i++)
                n += p[i] == SECRET;
        return n;
}

static void read_initiator(struct dto_side *s, void *arg)
{
        const bool *two = arg;
        struct dto_mem none = { 0 };
        struct dto_remote first = dto_exchange(s, &none), second = dto_exchange(s, &none);
        DAT_LMR_TRIPLET iov1 = dto_iov(&s->mem, 0, LEN), iov2;
        DAT_RMR_TRIPLET r1 = dto_riov(&first, 0, LEN), r2 = dto_riov(&second, 0, SMALL_READ);
        double deadline = dto_wall_seconds() + DTO_WAIT_US / 1e6;
        DAT_DTO_COMPLETION_EVENT_DATA d;
        DAT_EVENT ev;

        memset(s->mem.buf, 0, s->mem.len);
        dto_put_u64(s, (uint64_t)getpid());
        DTO_ASSERT_EQ(dto_get_u64(s), 1);
        DTO_ASSERT_EQ(dat_ep_post_rdma_read(s->ep[0], 1, &iov1, dto_cookie(1), &r1,
                                            DAT_COMPLETION_DEFAULT_FLAG),
                      DAT_SUCCESS);
        if (*two) {
                iov2 = dto_iov(&s->mem, LEN, SMALL_READ);
                DTO_ASSERT_EQ(dat_ep_post_rdma_read(s->ep[0], 1, &iov2, dto_cookie(2), &r2,
                                                    DAT_COMPLETION_DEFAULT_FLAG),
                              DAT_SUCCESS);
        }
        /* Our progress thread is frozen: these polls take the first part
         * of the first response, and no more once it is here. */
        while (s->mem.buf[0] != 0x11) {
                DTO_ASSERTF(dto_wall_seconds() < deadline, "no response came");
                if (dat_evd_dequeue(s->request_evd, &ev) == DAT_SUCCESS)
                        DTO_FAIL("a completion before the response came (event 0x%x)",
                                 ev.event_number);
        }
        dto_put_u64(s, 2);
        DTO_ASSERT_EQ(dto_get_u64(s), 3);
        if (*two) {
                /* The first Read's memory stayed: it completes; the
                 * second's went before any of its response did: the
                 * target answers it DAT_DTO_ERR_REMOTE_ACCESS. */
                dto_expect_dto(s->request_evd, s->ep[0], 1, DAT_DTO_SUCCESS, LEN,
                               DAT_DTO_RDMA_READ);
                dto_expect_dto(s->request_evd, s->ep[0], 2, DAT_DTO_ERR_REMOTE_ACCESS,
                               DTO_ANY_LENGTH, DAT_DTO_RDMA_READ);
        } else {
                /* Half of the response out: the connection breaks, the
                 * Read completes in error. */
                ev = dto_wait_event(s->request_evd);
                d = dto_check_dto(&ev, s->ep[0], 1, ev.event_data.dto_completion_event_data.status,
                                  DTO_ANY_LENGTH, DAT_DTO_RDMA_READ);
                DTO_ASSERTF(d.status != DAT_DTO_SUCCESS,
                            "the Read of freed memory completed successfully");
        }
        DTO_ASSERTF(count_secret(s->mem.buf, s->mem.len) == 0,
                    "%zu bytes read from the target's memory after it was freed",
                    count_secret(s->mem.buf, s->mem.len));
        dto_barrier(s);
}

/* dat_lmr_free(3DAT) while the response to an RDMA Read of it waits for
 * room in the channel, partly out: what follows is not read from the freed
 * memory; the connection breaks and the Read completes in error. */
Test(DTO_SUITE(freed_target), a_read_response_under_way_stops_at_the_free)
{
        static const bool two = false;
        struct dto_config cfg = { .buf_len = LEN, .env = no_cma_env };

        dto_run(&cfg, read_target, read_initiator, (void *)&two);
}

/* The same for a response none of which went yet: it becomes
 * DAT_DTO_ERR_REMOTE_ACCESS; the response before it completes. */
Test(DTO_SUITE(freed_target), a_read_response_not_started_answers_remote_access)
{
        static const bool two = true;
        struct dto_config cfg = { .buf_len = LEN + SMALL_READ, .env = no_cma_env };

        dto_run(&cfg, read_target, read_initiator, (void *)&two);
}
