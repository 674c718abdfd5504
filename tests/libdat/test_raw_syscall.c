/* The data path's system calls made in place (libdat/raw_syscall.h): the
 * contract of syscall() -- the result, or -1 with errno set -- for the
 * answers the TCP channel acts on: data, nothing there (EAGAIN), the end
 * of the stream, a bad descriptor, and an interrupted call (EINTR), which
 * the channel retries. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "libdat/raw_syscall.h"

TestSuite(raw_syscall, .timeout = 30);

static long recv_now(int fd, void *buf, size_t len)
{
        return raw_syscall6(SYS_recvfrom, fd, (long)buf, (long)len, MSG_DONTWAIT, 0, 0);
}

Test(raw_syscall, results_and_errors_as_syscall_gives_them)
{
        int sv[2];
        char buf[16];

        cr_assert_eq(raw_syscall6(SYS_getpid, 0, 0, 0, 0, 0, 0), (long)getpid());
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);

        errno = 0;
        cr_assert_eq(recv_now(sv[0], buf, sizeof(buf)), -1, "an empty socket is no data");
        cr_assert_eq(errno, EAGAIN);

        cr_assert_eq(raw_syscall6(SYS_sendto, sv[1], (long)"hello", 5, MSG_DONTWAIT, 0, 0), 5);
        cr_assert_eq(recv_now(sv[0], buf, sizeof(buf)), 5);
        cr_assert_eq(memcmp(buf, "hello", 5), 0);

        close(sv[1]);
        errno = 0;
        cr_assert_eq(recv_now(sv[0], buf, sizeof(buf)), 0, "the end of the stream is 0");
        cr_assert_eq(errno, 0, "a result is no error");
        close(sv[0]);

        errno = 0;
        cr_assert_eq(recv_now(sv[0], buf, sizeof(buf)), -1);
        cr_assert_eq(errno, EBADF);
}

static void on_alarm(int sig)
{
        (void)sig;
}

Test(raw_syscall, an_interrupted_call_says_eintr)
{
        struct sigaction sa = { .sa_handler = on_alarm };   /* no SA_RESTART */
        struct timespec ten_s = { 10, 0 };
        struct pollfd p;
        int sv[2];
        long r;

        cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        p = (struct pollfd){ .fd = sv[0], .events = POLLIN };
        alarm(1);
        errno = 0;
        r = raw_syscall6(SYS_ppoll, (long)&p, 1, (long)&ten_s, 0, 0, 0);
        cr_assert_eq(r, -1);
        cr_assert_eq(errno, EINTR);
        close(sv[0]);
        close(sv[1]);
}
