/* Data transfer without cross-memory attach, on the transport this program
 * was built for: the two processes run as two different unprivileged users
 * (the kernel then refuses process_vm_readv/writev between them), or as one
 * user with $DATD_SHM_NO_CMA=1 (libdat must then never call them: a seccomp
 * filter turns any call into a failure of the test).  Either way every DTO
 * kind -- 16 MiB, 20000-byte, 100-byte and three-segment Sends, RDMA Writes
 * through the LMR's context and through a bound RMR, RDMA Reads -- moves the
 * data byte for byte (the shm transport streams it through its rings).
 *
 * The roles drop root in the fixture's pre_open hook, before they open an
 * IA: datd's default policy (no allow_users / allow_groups for the IA,
 * datd.conf(5) "ACCESS POLICY") lets every user open it, its socket is
 * 0666 in a 0755 runtime directory, dat.conf is world-readable.  User IDs
 * 65534 (nobody) and 65533 need no passwd entry: datd knows a client by
 * SO_PEERCRED. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tests/dto/dto_fault.h"
#include "tests/dto/dto_fixture.h"

DTO_TEST_SUITE(users);

#define MIB (1024u * 1024)
#define BIG (16 * MIB)
/* Each side's s->mem: [0, BIG) messages, [BIG, 2 BIG) RDMA Write target
 * (server) / source (client), [2 BIG, 3 BIG) RDMA Read source (server) /
 * target (client), then room for the small transfers. */
#define WRITE_OFF BIG
#define READ_OFF (2 * BIG)
#define SMALL_OFF (3 * BIG)
#define MEM_LEN (3 * BIG + MIB)

#define SEED_MSG 100
#define SEED_WRITE 200
#define SEED_READ 300

static const DAT_SEG_LENGTH msg_len[] = { BIG, 20000, 100 };
#define SEG 4096                /* the three-segment message: 3 x SEG */

#define USER_SERVER 65534
#define USER_CLIENT 65533

/* Set by the test before dto_run (the role processes inherit it). */
static struct {
        uid_t uid[2];           /* per role: DTO_SERVER, DTO_CLIENT */
        bool forbid_cma;        /* seccomp: any process_vm_* call fails the test */
} users;

/* ---- in the role, before its IA is opened ------------------------------------ */

static void become(uid_t uid)
{
        DTO_ASSERTF(setgroups(0, NULL) == 0, "setgroups: %m");
        DTO_ASSERTF(setresgid(uid, uid, uid) == 0, "setresgid(%u): %m", (unsigned)uid);
        DTO_ASSERTF(setresuid(uid, uid, uid) == 0, "setresuid(%u): %m", (unsigned)uid);
        /* A credential change clears both: restore them as an ordinary
         * user's process has them (dumpable: its own user may attach). */
        DTO_ASSERTF(prctl(PR_SET_DUMPABLE, 1) == 0, "PR_SET_DUMPABLE: %m");
        DTO_ASSERTF(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0, "PR_SET_PDEATHSIG: %m");
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
        (void)sig;
        (void)ctx;
        DTO_FAIL("system call %d (process_vm_readv/writev) where none may be made",
                 si->si_syscall);
}

#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* Any process_vm_readv/writev of this process (every thread libdat starts
 * later inherits the filter) raises SIGSYS, which fails the role. */
static void forbid_cross_memory_attach(void)
{
#ifdef NATIVE_AUDIT_ARCH
        struct sock_filter code[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_AUDIT_ARCH, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        };
        struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };
        struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };

        DTO_ASSERTF(sigaction(SIGSYS, &sa, NULL) == 0, "sigaction: %m");
        DTO_ASSERTF(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS: %m");
        DTO_ASSERTF(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0, "seccomp: %m");
#else
        DTO_FAIL("no seccomp filter for this architecture: add its AUDIT_ARCH");
#endif
}

static void pre_open(const struct dto_side *s)
{
        if (users.forbid_cma)
                forbid_cross_memory_attach();
        become(users.uid[s->role == DTO_SERVER ? 0 : 1]);
}

/* ---- the workload ------------------------------------------------------------- */

/* Whether this process may read the peer's memory (process_vm_readv of
 * the peer's buffer): the kernel's answer between the two users. */
static void expect_no_cross_memory_attach(struct dto_side *s)
{
        pid_t peer;
        char byte;
        struct iovec local = { .iov_base = &byte, .iov_len = 1 };
        struct iovec remote = { .iov_base = (void *)(uintptr_t)s->peer.addr, .iov_len = 1 };
        ssize_t r;

        dto_put_u64(s, (uint64_t)getpid());
        peer = (pid_t)dto_get_u64(s);
        DTO_ASSERT_EQ(getuid(), users.uid[s->role == DTO_SERVER ? 0 : 1]);
        r = process_vm_readv(peer, &local, 1, &remote, 1, 0);
        DTO_ASSERTF(r < 0 && errno == EPERM,
                    "process_vm_readv of the peer (another user): %zd (%m), expected EPERM: the "
                    "test would not exercise the fallback", r);
}

static void users_server(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET segs[3];
        struct dto_remote rmr;

        (void)arg;
        if (users.uid[0] != users.uid[1])
                expect_no_cross_memory_attach(s);
        memset(s->mem.buf, 0, MEM_LEN);
        dto_fill(s->mem.buf + READ_OFF, BIG, SEED_READ);
        dto_fill(s->mem.buf + SMALL_OFF + 4 * SEG, 100, SEED_READ + 1);
        /* The messages: the 16 MiB one at 0, the others in the small area. */
        dto_post_recv(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, BIG) }, 1, 1);
        dto_post_recv(s, s->ep[0],
                      (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, SMALL_OFF + 8 * SEG, msg_len[1]) }, 1,
                      2);
        dto_post_recv(s, s->ep[0],
                      (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, SMALL_OFF + 16 * SEG, msg_len[2]) },
                      1, 3);
        for (unsigned i = 0; i < 3; i++)
                segs[i] = dto_iov(&s->mem, SMALL_OFF + (20 + 2 * i) * SEG, SEG);
        dto_post_recv(s, s->ep[0], segs, 3, 4);
        rmr = dto_rmr_bind_range(s, s->ep[0], DAT_HANDLE_NULL, &s->mem, WRITE_OFF, BIG,
                                 DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
        dto_put(s, &rmr, sizeof(rmr));
        dto_barrier(s);
        dto_expect_recv(s, s->ep[0], 1, BIG);
        dto_verify(s->mem.buf, BIG, SEED_MSG);
        dto_expect_recv(s, s->ep[0], 2, msg_len[1]);
        dto_verify(s->mem.buf + SMALL_OFF + 8 * SEG, msg_len[1], SEED_MSG + 1);
        dto_expect_recv(s, s->ep[0], 3, msg_len[2]);
        dto_verify(s->mem.buf + SMALL_OFF + 16 * SEG, msg_len[2], SEED_MSG + 2);
        dto_expect_recv(s, s->ep[0], 4, 3 * SEG);
        dto_verify_iov(segs, 3, SEED_MSG + 10);
        dto_barrier(s); /* the client's Writes completed */
        dto_verify(s->mem.buf + WRITE_OFF, BIG, SEED_WRITE);
        dto_verify(s->mem.buf + SMALL_OFF + 2 * SEG, 100, SEED_WRITE + 1);
}

static void users_client(struct dto_side *s, void *arg)
{
        DAT_LMR_TRIPLET segs[3];
        DAT_LMR_TRIPLET iov;
        struct dto_remote rmr;

        (void)arg;
        if (users.uid[0] != users.uid[1])
                expect_no_cross_memory_attach(s);
        dto_fill(s->mem.buf, BIG, SEED_MSG);
        dto_fill(s->mem.buf + SMALL_OFF, msg_len[1], SEED_MSG + 1);
        dto_fill(s->mem.buf + SMALL_OFF + 8 * SEG, msg_len[2], SEED_MSG + 2);
        for (unsigned i = 0; i < 3; i++)
                segs[i] = dto_iov(&s->mem, SMALL_OFF + (12 + 2 * i) * SEG, SEG);
        dto_fill_iov(segs, 3, SEED_MSG + 10);
        dto_fill(s->mem.buf + WRITE_OFF, BIG, SEED_WRITE);
        dto_fill(s->mem.buf + SMALL_OFF + 20 * SEG, 100, SEED_WRITE + 1);
        memset(s->mem.buf + READ_OFF, 0, BIG);
        dto_get(s, &rmr, sizeof(rmr));
        dto_barrier(s);
        dto_send_wait(s, s->ep[0], (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, 0, BIG) }, 1, 11);
        dto_send_wait(s, s->ep[0],
                      (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, SMALL_OFF, msg_len[1]) }, 1, 12);
        dto_send_wait(s, s->ep[0],
                      (DAT_LMR_TRIPLET[]){ dto_iov(&s->mem, SMALL_OFF + 8 * SEG, msg_len[2]) },
                      1, 13);
        dto_send_wait(s, s->ep[0], segs, 3, 14);
        /* 16 MiB through the bound RMR, 100 bytes through the LMR's context. */
        iov = dto_iov(&s->mem, WRITE_OFF, BIG);
        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 21,
                            (DAT_RMR_TRIPLET[]){ dto_riov(&rmr, 0, BIG) });
        iov = dto_iov(&s->mem, SMALL_OFF + 20 * SEG, 100);
        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 22,
                            (DAT_RMR_TRIPLET[]){ dto_riov(&s->peer, SMALL_OFF + 2 * SEG, 100) });
        iov = dto_iov(&s->mem, READ_OFF, BIG);
        dto_rdma_read_wait(s, s->ep[0], &iov, 1, 31,
                           (DAT_RMR_TRIPLET[]){ dto_riov(&s->peer, READ_OFF, BIG) });
        dto_verify(s->mem.buf + READ_OFF, BIG, SEED_READ);
        iov = dto_iov(&s->mem, SMALL_OFF + 30 * SEG, 100);
        dto_rdma_read_wait(s, s->ep[0], &iov, 1, 32,
                           (DAT_RMR_TRIPLET[]){ dto_riov(&s->peer, SMALL_OFF + 4 * SEG, 100) });
        dto_verify(s->mem.buf + SMALL_OFF + 30 * SEG, 100, SEED_READ + 1);
        dto_barrier(s);
}

static void run_users(uid_t server, uid_t client, bool no_cma)
{
        static const char *const no_cma_env[] = { "DATD_SHM_NO_CMA=1", NULL };
        struct dto_config cfg = { .buf_len = MEM_LEN, .pre_open = pre_open, .timeout_ms = 60000,
                                  .env = no_cma ? no_cma_env : NULL };

        if (getuid() != 0)
                cr_skip_test("needs root to run the roles as other users");
        users.uid[0] = server;
        users.uid[1] = client;
        users.forbid_cma = no_cma;
        dto_run(&cfg, users_server, users_client, NULL);
}

/* The different-user fallback (libdat/dto.h: cross-memory attach
 * only "between processes of one host that may access each other's
 * memory"): two users, process_vm_readv refused by the kernel, and still
 * dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT),
 * dat_ep_post_rdma_read(3DAT) and dat_rmr_bind(3DAT) move every byte. */
Test(DTO_SUITE(users), two_users_move_every_dto_kind_byte_for_byte)
{
        run_users(USER_SERVER, USER_CLIENT, false);
}

/* $DATD_SHM_NO_CMA=1 (one user, who could attach): libdat never calls
 * process_vm_readv/writev, and every DTO kind still moves every byte. */
Test(DTO_SUITE(users), no_cma_moves_every_dto_kind_byte_for_byte_without_process_vm_calls)
{
        run_users(USER_SERVER, USER_SERVER, true);
}

/* ---- no probe without a large payload ----------------------------------------- */

#define SMALL_DTO 8000          /* under DTO_CMA_THRESHOLD */

static void forbid_only(const struct dto_side *s)
{
        (void)s;
        forbid_cross_memory_attach();
}

/* Each side in turn: a Send, an RDMA Write and an RDMA Read of SMALL_DTO
 * bytes to the other (regions 2 * SEG apart). */
static void small_dtos_side(struct dto_side *s, void *arg)
{
        (void)arg;
        for (unsigned turn = 0; turn < 2; turn++) {
                bool active = (turn == 0) == (s->role == DTO_CLIENT);
                uint64_t seed = SEED_MSG + 10 * turn;
                DAT_LMR_TRIPLET iov = dto_iov(&s->mem, 0, SMALL_DTO);

                if (active) {
                        dto_fill(s->mem.buf, SMALL_DTO, seed);
                        dto_barrier(s); /* the receive is posted */
                        dto_send_wait(s, s->ep[0], &iov, 1, 1);
                        iov = dto_iov(&s->mem, 2 * SEG, SMALL_DTO);
                        dto_fill(s->mem.buf + 2 * SEG, SMALL_DTO, seed + 1);
                        dto_rdma_write_wait(s, s->ep[0], &iov, 1, 2,
                                            (DAT_RMR_TRIPLET[]){ dto_riov(&s->peer, 4 * SEG,
                                                                          SMALL_DTO) });
                        iov = dto_iov(&s->mem, 6 * SEG, SMALL_DTO);
                        dto_rdma_read_wait(s, s->ep[0], &iov, 1, 3,
                                           (DAT_RMR_TRIPLET[]){ dto_riov(&s->peer, 8 * SEG,
                                                                         SMALL_DTO) });
                        dto_verify(s->mem.buf + 6 * SEG, SMALL_DTO, seed + 2);
                        dto_barrier(s);
                } else {
                        dto_fill(s->mem.buf + 8 * SEG, SMALL_DTO, seed + 2);
                        dto_post_recv(s, s->ep[0], &iov, 1, 4);
                        dto_barrier(s);
                        dto_expect_recv(s, s->ep[0], 4, SMALL_DTO);
                        dto_verify(s->mem.buf, SMALL_DTO, seed);
                        dto_barrier(s); /* the peer's Write and Read completed */
                        dto_verify(s->mem.buf + 4 * SEG, SMALL_DTO, seed + 1);
                }
        }
}

/* libdat/dto_wire.h: a connection probes cross-memory attach (HELLO: the
 * peer's process_vm_readv of a value of ours) only before a payload that
 * could use it.  One that moves only payloads under the threshold makes no
 * process_vm_readv/writev at all: the probe at every connection cost both
 * processes a system call and two wake-ups each (datbench conn: a fifth of
 * the time from dat_ep_connect to ESTABLISHED). */
Test(DTO_SUITE(users), small_dtos_make_no_process_vm_calls)
{
        struct dto_config cfg = { .buf_len = 1 << 20, .pre_open = forbid_only };

        dto_run(&cfg, small_dtos_side, small_dtos_side, NULL);
}
