/* The peer processes an IA watches for their exit (libdat/peer_watch.h):
 * one epoll registration per process however many data paths go to it,
 * kept while the process lives and has none (up to PEER_WATCH_IDLE_MAX),
 * ended with its descriptor when the process exits; keys of an ended
 * watch name nothing, even when its entry serves another process since.
 * Real child processes, a real epoll. */
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libdat/peer_watch.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define TAG 0x5f
/* A child's bound, should the test not end it. */
#define CHILD_S 30
#define CHILDREN_MAX (PEER_WATCH_IDLE_MAX + 2)

static pid_t children[CHILDREN_MAX];
static unsigned n_children;

static pid_t child_new(void)
{
        pid_t pid = fork();

        cr_assert_geq(pid, 0, "fork: %m");
        if (pid == 0) {
                alarm(CHILD_S);
                for (;;)
                        pause();
        }
        cr_assert_lt(n_children, CHILDREN_MAX);
        children[n_children++] = pid;
        return pid;
}

static void child_end(pid_t pid)
{
        for (unsigned i = 0; i < n_children; i++)
                if (children[i] == pid) {
                        (void)kill(pid, SIGKILL);
                        (void)waitpid(pid, NULL, 0);
                        children[i] = children[--n_children];
                        return;
                }
}

static void children_end(void)
{
        while (n_children > 0)
                child_end(children[0]);
}

TestSuite(peer_watch, .timeout = 60, .fini = children_end);

static int pidfd_of(pid_t pid)
{
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);

        cr_assert_geq(fd, 0, "pidfd_open: %m");
        return fd;
}

/* Descriptors the epoll watches (its fdinfo's "tfd:" lines). */
static unsigned epoll_entries(int epfd)
{
        char path[64], line[256];
        unsigned n = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
        f = fopen(path, "r");
        cr_assert_not_null(f, "%s: %m", path);
        while (fgets(line, sizeof(line), f))
                n += strncmp(line, "tfd:", 4) == 0;
        fclose(f);
        return n;
}

static unsigned open_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        unsigned n = 0;

        cr_assert_not_null(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

/* The next key epoll reports within a few seconds. */
static uint64_t next_key(int epfd)
{
        struct epoll_event ev;

        cr_assert_eq(epoll_wait(epfd, &ev, 1, 5000), 1, "no exit reported");
        return ev.data.u64;
}

/* pid (a child of ours) exits: its watch, index i, is told and ends;
 * `left` registrations remain. */
static void expect_exit_told(struct peer_watch *w, int epfd, pid_t pid, int i, unsigned left)
{
        child_end(pid);
        cr_assert_eq(peer_watch_on_exit(w, next_key(epfd)), i);
        cr_assert_eq(epoll_entries(epfd), left);
}

Test(peer_watch, one_registration_per_process_kept_while_it_lives)
{
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        struct peer_watch w;
        pid_t a = child_new(), b = child_new();
        int fa1 = pidfd_of(a), fa2 = pidfd_of(a), fb = pidfd_of(b);
        int ia, ib;

        peer_watch_init(&w, epfd, TAG);
        ia = peer_watch_hold(&w, a, fa1);
        cr_assert_geq(ia, 0);
        cr_assert_eq(peer_watch_hold(&w, a, fa2), ia, "a second data path to a: the same watch");
        ib = peer_watch_hold(&w, b, fb);
        cr_assert_geq(ib, 0);
        cr_assert_neq(ib, ia);
        cr_assert_eq(epoll_entries(epfd), 2, "one registration per process");
        /* The holders' pidfds are theirs: the watches do without them. */
        close(fa1);
        close(fa2);
        close(fb);
        peer_watch_release(&w, ia);
        peer_watch_release(&w, ia);
        peer_watch_release(&w, ib);
        cr_assert_eq(epoll_entries(epfd), 2, "kept without data paths while the processes live");
        cr_assert_eq(w.n_idle, 2);
        /* The next data path to a costs no registration. */
        fa1 = pidfd_of(a);
        cr_assert_eq(peer_watch_hold(&w, a, fa1), ia);
        cr_assert_eq(w.n_idle, 1);
        cr_assert_eq(epoll_entries(epfd), 2);
        close(fa1);
        peer_watch_fini(&w);
        cr_assert_eq(epoll_entries(epfd), 0);
        close(epfd);
        children_end();
}

Test(peer_watch, an_exit_ends_the_watch_and_its_descriptor)
{
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        unsigned fds_before = open_fds();
        struct peer_watch w;
        pid_t a = child_new();
        int fa = pidfd_of(a);
        uint64_t key;
        int ia;

        peer_watch_init(&w, epfd, TAG);
        ia = peer_watch_hold(&w, a, fa);
        cr_assert_geq(ia, 0);
        close(fa);
        child_end(a);
        key = next_key(epfd);
        cr_assert(peer_watch_key_is_ours(&w, key));
        cr_assert_eq(peer_watch_on_exit(&w, key), ia);
        cr_assert_eq(epoll_entries(epfd), 0, "out of the epoll: the exit stays readable");
        cr_assert_eq(open_fds(), fds_before, "its descriptor closed");
        cr_assert_eq(peer_watch_on_exit(&w, key), -1, "reported once");
        /* Released after the exit (its data path ends later): nothing. */
        peer_watch_release(&w, ia);
        cr_assert_eq(w.n_idle, 0);
        peer_watch_fini(&w);
        close(epfd);
}

Test(peer_watch, a_key_of_an_ended_watch_names_nothing_when_its_entry_serves_another)
{
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        struct peer_watch w;
        pid_t a = child_new(), b;
        int fa = pidfd_of(a), fb;
        uint64_t key_a;
        int ia;

        peer_watch_init(&w, epfd, TAG);
        ia = peer_watch_hold(&w, a, fa);
        close(fa);
        child_end(a);
        key_a = next_key(epfd);
        cr_assert_eq(peer_watch_on_exit(&w, key_a), ia);
        b = child_new();
        fb = pidfd_of(b);
        cr_assert_eq(peer_watch_hold(&w, b, fb), ia, "the free entry serves b");
        close(fb);
        cr_assert_eq(peer_watch_on_exit(&w, key_a), -1, "a's key is stale");
        cr_assert_eq(epoll_entries(epfd), 1, "b still watched");
        peer_watch_fini(&w);
        close(epfd);
        children_end();
}

Test(peer_watch, watches_without_data_paths_are_bounded)
{
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        struct peer_watch w;

        peer_watch_init(&w, epfd, TAG);
        for (unsigned k = 0; k < PEER_WATCH_IDLE_MAX + 2; k++) {
                pid_t p = child_new();
                int fd = pidfd_of(p);
                int i = peer_watch_hold(&w, p, fd);

                cr_assert_geq(i, 0);
                close(fd);
                peer_watch_release(&w, i);
        }
        cr_assert_eq(w.n_idle, PEER_WATCH_IDLE_MAX);
        cr_assert_eq(epoll_entries(epfd), PEER_WATCH_IDLE_MAX);
        peer_watch_fini(&w);
        close(epfd);
        children_end();
}

Test(peer_watch, at_the_descriptor_limit_idle_watches_give_theirs_up)
{
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        struct rlimit saved, none;
        struct peer_watch w;
        int fc, lowest_free, i;
        pid_t c;

        peer_watch_init(&w, epfd, TAG);
        for (unsigned k = 0; k < 2; k++) {
                pid_t p = child_new();
                int fd = pidfd_of(p);

                i = peer_watch_hold(&w, p, fd);
                cr_assert_geq(i, 0);
                close(fd);
                peer_watch_release(&w, i);
        }
        c = child_new();
        fc = pidfd_of(c);
        /* No descriptor left to the process: the limit at its lowest free one. */
        lowest_free = dup(0);
        cr_assert_geq(lowest_free, 0);
        close(lowest_free);
        cr_assert_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
        none = saved;
        none.rlim_cur = (rlim_t)lowest_free;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &none), 0);
        i = peer_watch_hold(&w, c, fc);
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
        cr_assert_geq(i, 0, "watched with the descriptor of an idle watch: %d", i);
        cr_assert_eq(w.n_idle, 0);
        cr_assert_eq(epoll_entries(epfd), 1);
        close(fc);
        /* A watch like any other: its exit is told and ends it. */
        expect_exit_told(&w, epfd, c, i, 0);
        peer_watch_fini(&w);
        close(epfd);
}

/* A peer datd could not name (pid 0: another PID namespace) shares no
 * watch, and its exit still ends its own. */
Test(peer_watch, a_peer_without_a_pid_is_watched_alone)
{
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        struct peer_watch w;
        pid_t a = child_new(), b = child_new();
        int fa = pidfd_of(a), fb = pidfd_of(b);
        int ia, ib;

        peer_watch_init(&w, epfd, TAG);
        ia = peer_watch_hold(&w, 0, fa);
        ib = peer_watch_hold(&w, 0, fb);
        cr_assert_geq(ia, 0);
        cr_assert_geq(ib, 0);
        cr_assert_neq(ia, ib, "two unnamed processes: two watches");
        cr_assert_eq(epoll_entries(epfd), 2);
        close(fa);
        close(fb);
        expect_exit_told(&w, epfd, b, ib, 1);
        peer_watch_fini(&w);
        close(epfd);
}

Test(peer_watch, no_process_no_watch)
{
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        struct peer_watch w;

        peer_watch_init(&w, epfd, TAG);
        cr_assert_eq(peer_watch_hold(&w, getpid(), -1), -EINVAL);
        cr_assert_eq(peer_watch_hold(&w, getpid(), 999999), -EBADF);
        cr_assert_eq(w.n, 0);
        cr_assert_eq(peer_watch_on_exit(&w, (uint64_t)7 << 32 | TAG), -1);
        peer_watch_release(&w, 3);
        peer_watch_fini(&w);
        close(epfd);
}
