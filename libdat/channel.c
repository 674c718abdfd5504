/* Data channels: the kind-independent part (channel.h). */
#include "config.h"

#include "libdat/channel.h"

#include <errno.h>
#include <unistd.h>

void channel_close_fds(int *fds, unsigned nfds)
{
        for (unsigned i = 0; i < nfds; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

int channel_create(const struct datp_ev_data_channel *ev, int *fds, unsigned nfds,
                   struct shm_keep *keep, struct channel **out)
{
        switch (ev->kind) {
        case DATP_CHANNEL_SHM:
                return channel_shm_create(ev, fds, nfds, keep, out);
        case DATP_CHANNEL_TCP:
                return channel_tcp_create(ev, fds, nfds, out);
        default:
                channel_close_fds(fds, nfds);
                return -EPROTO;
        }
}

void channel_destroy(struct channel *ch)
{
        if (ch)
                ch->ops->destroy(ch);
}
