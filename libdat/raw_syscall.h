/* The data path's system calls made by the syscall instruction in place,
 * without a call into libc.
 *
 * Why: a polling consumer makes one recv() per dat_evd_dequeue that finds
 * nothing, and one on the way to every message.  The kernel's own calls
 * during the system call (the network stack is deep) overwrite the CPU's
 * return-address predictor, so every function the system call returns
 * through afterwards mispredicts its return: about 16 cycles each on this
 * project's test machine (AMD Zen 4; a raw TCP ping-pong over veth whose
 * recv() sat 10 calls deep spent 160-180 cycles more per read than at
 * depth 0).  libc's syscall() is one such frame; this is none.  The
 * callers keep the frames around their reads few for the same reason
 * (dto_ia.c's poll, dto_rx.c's reads).
 *
 * Same contract as syscall(): the result, or -1 with errno set.  Not a
 * cancellation point.  Other architectures call syscall(). */
#ifndef DATD_LIBDAT_RAW_SYSCALL_H
#define DATD_LIBDAT_RAW_SYSCALL_H

#include <errno.h>
#include <unistd.h>

static inline long raw_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
#if defined(__x86_64__)
        register long r10 __asm__("r10") = a4;
        register long r8 __asm__("r8") = a5;
        register long r9 __asm__("r9") = a6;
        long ret;

        __asm__ __volatile__("syscall"
                             : "=a"(ret)
                             : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                             : "rcx", "r11", "memory");
        /* The kernel returns -errno, from -4095 to -1. */
        if (ret < 0 && ret >= -4095) {
                errno = (int)-ret;
                return -1;
        }
        return ret;
#else
        return syscall(nr, a1, a2, a3, a4, a5, a6);
#endif
}

#endif
