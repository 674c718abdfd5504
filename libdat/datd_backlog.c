/* The packets the socket's reader read past (datd_backlog.h). */
#include "config.h"

#include "libdat/datd_backlog.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

int datd_backlog_make_room(struct datd_backlog *b)
{
        if (b->n >= DATD_BACKLOG_MAX)
                return -ENOBUFS;
        if (b->n == b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 8;
                struct datd_packet **ring = calloc(cap, sizeof(*ring));

                if (!ring)
                        return -ENOMEM;
                for (size_t i = 0; i < b->n; i++)
                        ring[i] = b->ring[(b->head + i) % b->cap];
                free(b->ring);
                b->ring = ring;
                b->head = 0;
                b->cap = cap;
        }
        return 0;
}

void datd_backlog_push(struct datd_backlog *b, struct datd_packet *p)
{
        b->ring[(b->head + b->n) % b->cap] = p;
        b->n++;
}

struct datd_packet *datd_backlog_pop(struct datd_backlog *b)
{
        struct datd_packet *p;

        if (b->n == 0)
                return NULL;
        p = b->ring[b->head];
        b->head = (b->head + 1) % b->cap;
        b->n--;
        return p;
}

void datd_packet_close_fds(struct datd_packet *p)
{
        for (unsigned i = 0; i < p->nfds && i < DATP_MAX_FDS; i++)
                if (p->fds[i] >= 0)
                        close(p->fds[i]);
        p->nfds = 0;
}

void datd_packet_free(struct datd_packet *p)
{
        if (!p)
                return;
        datd_packet_close_fds(p);
        free(p);
}

void datd_backlog_clear(struct datd_backlog *b)
{
        struct datd_packet *p;

        while ((p = datd_backlog_pop(b)))
                datd_packet_free(p);
        free(b->ring);
        b->ring = NULL;
        b->head = b->cap = 0;
}
