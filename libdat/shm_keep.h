/* The shm channels an IA keeps between connections (proto/PROTOCOL.md,
 * "Kept channels"): when a connection whose channel datd sent with
 * DATP_CHANNEL_KEEP ends, its end of the channel (the region's mapping,
 * the doorbells, the guard, the peer's pidfd) is kept here under datd's
 * channel_id instead of being unmapped and closed, and datd is told
 * (CHANNEL_RELEASE) that this process touches it no more.  A later
 * connection to the same peer instance gets it back (DATP_CHANNEL_REUSE)
 * laid out afresh by datd, with no descriptor passed and no page mapped or
 * faulted in; EV_CHANNEL_DROP frees one.
 *
 * Shared by the IA and every channel made with KEEP (a reference each), so
 * that a channel destroyed after the IA closed frees itself instead. */
#ifndef DATD_LIBDAT_SHM_KEEP_H
#define DATD_LIBDAT_SHM_KEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct datd_conn;
struct shm_keep;

/* One end of a kept channel, as the channel had it. */
struct shm_kept {
        struct shm_kept *next;
        uint32_t id;                    /* datd's channel_id */
        void *mem;                      /* the region, mapped */
        size_t size;
        uint32_t ring_size;
        unsigned side;
        int doorbell_mine, doorbell_peer, guard;
        int peer_pidfd;                 /* -1 if none */
        pid_t peer_pid;
};

/* Unmaps and closes what e holds (a channel's end that is not kept). */
void shm_kept_close(const struct shm_kept *e);

/* The same, and frees e.  Accepts NULL. */
void shm_kept_free(struct shm_kept *e);

/* For the IA with datd connection conn and datd's ia_id. */
int shm_keep_new(struct datd_conn *conn, uint32_t ia_id, struct shm_keep **out);

/* The IA closes: frees what is kept, sends nothing more, drops the IA's
 * reference.  Accepts NULL. */
void shm_keep_close(struct shm_keep *k);

struct shm_keep *shm_keep_ref(struct shm_keep *k);
void shm_keep_unref(struct shm_keep *k);

/* A channel's end is done with e: keeps it and sends CHANNEL_RELEASE (or,
 * after shm_keep_close, frees it): with the next request to datd when the
 * connection ended in order (its next connection with the same peer
 * needs one anyway), at once when it did not (the peer may be gone, and
 * datd frees the channel only when it hears). */
void shm_keep_put(struct shm_keep *k, struct shm_kept *e, bool in_order);

/* Takes the kept channel id out (the caller owns it), or NULL. */
struct shm_kept *shm_keep_take(struct shm_keep *k, uint32_t id);

/* EV_CHANNEL_DROP: frees the kept channel id, if there is one. */
void shm_keep_drop(struct shm_keep *k, uint32_t id);

/* How many are kept (for tests). */
size_t shm_keep_count(struct shm_keep *k);

#endif
