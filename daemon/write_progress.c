#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "daemon/write_progress.h"

struct WriteProgress {
        int fd;                         /* our duplicate of the watched socket */
        sd_event_source *room;          /* EPOLLOUT, one shot per question */
        bool room_made;
        int unread;                     /* SIOCOUTQ at the last question; -1: unknown */
};

static int unread_bytes(int fd)
{
        int n = 0;

        return ioctl(fd, SIOCOUTQ, &n) < 0 ? -1 : n;
}

static int on_room(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        WriteProgress *w = userdata;

        (void) s;
        (void) fd;
        /* A hang-up is the owner's to see (sd-bus: Disconnected), not room. */
        if ((revents & EPOLLOUT) && !(revents & (EPOLLERR | EPOLLHUP)))
                w->room_made = true;
        return 0;
}

int write_progress_new(sd_event *e, int fd, WriteProgress **ret)
{
        WriteProgress *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return -ENOMEM;
        w->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (w->fd < 0) {
                r = -errno;
                free(w);
                return r;
        }
        w->unread = unread_bytes(w->fd);
        r = sd_event_add_io(e, &w->room, w->fd, EPOLLOUT, on_room, w);
        if (r >= 0)
                r = sd_event_source_set_enabled(w->room, SD_EVENT_ONESHOT);
        if (r < 0) {
                write_progress_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

WriteProgress *write_progress_free(WriteProgress *w)
{
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->room);
        if (w->fd >= 0)
                close(w->fd);
        free(w);
        return NULL;
}

bool write_progress_made(WriteProgress *w)
{
        int unread = unread_bytes(w->fd);
        bool made = w->room_made || (unread >= 0 && unread != w->unread);

        w->unread = unread;
        w->room_made = false;
        if (sd_event_source_set_enabled(w->room, SD_EVENT_ONESHOT) < 0)
                made = false;   /* nothing would tell the next time */
        return made;
}
