/* One message per SOCK_SEQPACKET packet, descriptors by SCM_RIGHTS.
 *
 * Neither direction allocates: the control buffer lives on the stack and is
 * sized for DATP_MAX_FDS.  datd calls these on non-blocking sockets from its
 * event loop, so nothing here waits except on EINTR. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "common/macro.h"
#include "proto/datp.h"

union datp_control {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * DATP_MAX_FDS)];
};

int datp_send_many(int sock, const struct datp_header *const *hdrs, unsigned n, unsigned *sent)
{
        struct mmsghdr mm[DATP_SEND_MANY_MAX];
        struct iovec iov[DATP_SEND_MANY_MAX];
        unsigned done = 0, ignored;

        if (!sent)
                sent = &ignored;
        *sent = 0;
        if (n > DATP_SEND_MANY_MAX)
                return -EINVAL;
        for (unsigned i = 0; i < n; i++) {
                if (hdrs[i]->length < sizeof(*hdrs[i]))
                        return -EINVAL;
                if (hdrs[i]->length > DATP_MAX_MESSAGE)
                        return -EMSGSIZE;
                iov[i] = (struct iovec){ .iov_base = (void *)hdrs[i], .iov_len = hdrs[i]->length };
                mm[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
        }
        /* sendmmsg may stop after some: the rest goes on, in order. */
        while (done < n) {
                int k = sendmmsg(sock, mm + done, n - done, MSG_NOSIGNAL);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                for (int i = 0; i < k; i++)
                        if (mm[done + (unsigned)i].msg_len != hdrs[done + (unsigned)i]->length)
                                return -EIO;
                done += (unsigned)k;
                *sent = done;
        }
        return 0;
}

int datp_send(int sock, const struct datp_header *hdr, const int *fds, unsigned nfds)
{
        union datp_control control;
        struct iovec iov = { .iov_base = (void *) hdr, .iov_len = hdr->length };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;

        if (hdr->length < sizeof(*hdr))
                return -EINVAL;
        if (hdr->length > DATP_MAX_MESSAGE)
                return -EMSGSIZE;
        if (nfds > DATP_MAX_FDS || (nfds > 0 && !fds))
                return -EINVAL;

        if (nfds > 0) {
                struct cmsghdr *cmsg;

                memset(&control, 0, sizeof(control));
                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
                cmsg = CMSG_FIRSTHDR(&mh);
                cmsg->cmsg_level = SOL_SOCKET;
                cmsg->cmsg_type = SCM_RIGHTS;
                cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
                memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nfds);
        }

        /* A client that went away must never kill datd with SIGPIPE.  Linux
         * raises none for SOCK_SEQPACKET today; MSG_NOSIGNAL makes it a rule. */
        do
                n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        /* SOCK_SEQPACKET sends whole packets or nothing; anything else is not ours. */
        if ((size_t) n != hdr->length)
                return -EIO;
        return 0;
}

/* Takes the descriptors out of the control data: the first max_fds are
 * handed to the caller, the rest closed.  After MSG_CTRUNC the set is
 * incomplete, so nothing is handed out and the count is at least 1. */
static unsigned take_fds(struct msghdr *mh, int *fds, unsigned max_fds)
{
        bool truncated = mh->msg_flags & MSG_CTRUNC;
        unsigned count = 0;

        for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(mh); cmsg; cmsg = CMSG_NXTHDR(mh, cmsg)) {
                size_t n;

                if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS ||
                    cmsg->cmsg_len < CMSG_LEN(0))
                        continue;
                n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < n; i++) {
                        int fd;

                        memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(fd));
                        if (!truncated && count < max_fds)
                                fds[count] = fd;
                        else
                                closep(&fd);
                        count++;
                }
        }
        if (truncated && count == 0)
                count = 1;
        return count;
}

ssize_t datp_recv(int sock, union datp_message *buf, int *fds, unsigned max_fds,
                  unsigned *nfds)
{
        union datp_control control;
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(*buf) };
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        unsigned ignored;
        ssize_t n;

        if (!fds)
                max_fds = 0;
        if (!nfds)
                nfds = &ignored;
        for (unsigned i = 0; i < max_fds; i++)
                fds[i] = -1;
        *nfds = 0;

        /* MSG_TRUNC: the return value is the packet's real length, so an
         * oversized packet is reported instead of silently cut. */
        do
                n = recvmsg(sock, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;

        *nfds = take_fds(&mh, fds, max_fds);
        return n;
}

int datp_try_recv_batch(int sock, union datp_message *bufs, unsigned n,
                        int (*fds)[DATP_MAX_FDS], ssize_t *lens, unsigned *nfds)
{
        union datp_control control[DATP_BATCH_MAX];
        struct iovec iov[DATP_BATCH_MAX];
        struct mmsghdr mm[DATP_BATCH_MAX];
        int got;

        if (n == 0 || n > DATP_BATCH_MAX)
                return -EINVAL;
        for (unsigned i = 0; i < n; i++) {
                iov[i] = (struct iovec){ .iov_base = &bufs[i], .iov_len = sizeof(bufs[i]) };
                mm[i] = (struct mmsghdr){ .msg_hdr = {
                        .msg_iov = &iov[i],
                        .msg_iovlen = 1,
                        .msg_control = control[i].buf,
                        .msg_controllen = sizeof(control[i].buf),
                } };
        }
        /* MSG_TRUNC: each length is its packet's real one, as in datp_recv. */
        do
                got = recvmmsg(sock, mm, n, MSG_TRUNC | MSG_CMSG_CLOEXEC | MSG_DONTWAIT, NULL);
        while (got < 0 && errno == EINTR);
        if (got < 0)
                return -errno;
        for (int i = 0; i < got; i++) {
                for (unsigned k = 0; k < DATP_MAX_FDS; k++)
                        fds[i][k] = -1;
                nfds[i] = take_fds(&mm[i].msg_hdr, fds[i], DATP_MAX_FDS);
                lens[i] = (ssize_t)mm[i].msg_len;
        }
        return got;
}
