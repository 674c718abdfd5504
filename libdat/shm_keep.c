/* Kept shm channels (shm_keep.h). */
#include "config.h"

#include "libdat/shm_keep.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "libdat/dat_lock.h"
#include "libdat/datd_conn.h"
#include "libdat/shm_region.h"

struct shm_keep {
        struct dat_lock lock;
        unsigned refs;                  /* atomic */
        struct datd_conn *conn;         /* NULL once the IA closed; under lock */
        uint32_t ia_id;
        struct shm_kept *kept;          /* under lock */
};

void shm_kept_close(const struct shm_kept *e)
{
        shm_region_unmap(e->mem, e->size);
        close(e->doorbell_mine);
        close(e->doorbell_peer);
        if (e->guard >= 0)
                close(e->guard);
        if (e->peer_pidfd >= 0)
                close(e->peer_pidfd);
}

void shm_kept_free(struct shm_kept *e)
{
        if (!e)
                return;
        shm_kept_close(e);
        free(e);
}

int shm_keep_new(struct datd_conn *conn, uint32_t ia_id, struct shm_keep **out)
{
        struct shm_keep *k = calloc(1, sizeof(*k));

        if (!k)
                return -ENOMEM;
        dat_lock_init(&k->lock);
        k->refs = 1;
        k->conn = conn;
        k->ia_id = ia_id;
        *out = k;
        return 0;
}

struct shm_keep *shm_keep_ref(struct shm_keep *k)
{
        __atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED);
        return k;
}

void shm_keep_unref(struct shm_keep *k)
{
        if (k && __atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) == 0)
                free(k);
}

static void free_list(struct shm_kept *e)
{
        while (e) {
                struct shm_kept *next = e->next;

                shm_kept_free(e);
                e = next;
        }
}

void shm_keep_close(struct shm_keep *k)
{
        struct shm_kept *list;

        if (!k)
                return;
        dat_lock(&k->lock);
        k->conn = NULL;
        list = k->kept;
        k->kept = NULL;
        dat_unlock(&k->lock);
        free_list(list);
        shm_keep_unref(k);
}

void shm_keep_put(struct shm_keep *k, struct shm_kept *e, bool in_order)
{
        struct datp_channel_release rel = {};

        dat_lock(&k->lock);
        if (!k->conn) {
                dat_unlock(&k->lock);
                shm_kept_free(e);
                return;
        }
        /* In the list before datd hears of it: datd may hand it out again,
         * or drop it, as soon as it has. */
        e->next = k->kept;
        k->kept = e;
        rel.hdr.type = DATP_CHANNEL_RELEASE;
        rel.hdr.length = sizeof(rel);
        rel.ia_id = k->ia_id;
        rel.channel_id = e->id;
        /* In order, datd needs it by the next CONNECT or CR_ACCEPT of this
         * process (or of its peer, which comes after this process's next
         * request in every exchange that makes them meet again): it goes
         * with whatever request comes next, and costs datd no wake-up.
         * Under the lock, so that the IA's close cannot take the
         * connection away meanwhile.  Unsent, it stays kept but is never
         * reused: datd drops it with the IA. */
        if (in_order)
                (void)datd_conn_defer(k->conn, &rel.hdr);
        else
                (void)datd_conn_send(k->conn, &rel.hdr);
        dat_unlock(&k->lock);
}

/* Takes id out of the list; under lock. */
static struct shm_kept *unlink_locked(struct shm_keep *k, uint32_t id)
{
        for (struct shm_kept **p = &k->kept; *p; p = &(*p)->next) {
                struct shm_kept *e = *p;

                if (e->id == id) {
                        *p = e->next;
                        e->next = NULL;
                        return e;
                }
        }
        return NULL;
}

struct shm_kept *shm_keep_take(struct shm_keep *k, uint32_t id)
{
        struct shm_kept *e;

        dat_lock(&k->lock);
        e = unlink_locked(k, id);
        dat_unlock(&k->lock);
        return e;
}

void shm_keep_drop(struct shm_keep *k, uint32_t id)
{
        shm_kept_free(shm_keep_take(k, id));
}

size_t shm_keep_count(struct shm_keep *k)
{
        size_t n = 0;

        dat_lock(&k->lock);
        for (struct shm_kept *e = k->kept; e; e = e->next)
                n++;
        dat_unlock(&k->lock);
        return n;
}
