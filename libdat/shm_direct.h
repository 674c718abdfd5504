/* Direct RDMA Writes on the shm transport: the target of a connection
 * exports the shared memory an rmr_context reaches, and the initiator maps
 * it and copies its RDMA Writes straight in, without the ring and without
 * the target process (dto_wire.h: DTO_F_MAP_OK, EXPORT).
 *
 * What may be exported: memory libdat itself provides to an LMR
 * (DAT_MEM_TYPE_SHARED_VIRTUAL without a consumer address, mem_shm.h), a
 * named shared memory object the initiator can map too.  Memory of the
 * consumer's own (DAT_MEM_TYPE_VIRTUAL) cannot be mapped by another
 * process: its Writes go through the ring as before.
 *
 * Each end of a shm channel has one struct shm_direct, for both roles:
 *
 * Exporting (the target): a table of SHM_DIRECT_SLOTS slots in a sealed
 * memfd of its own (shm_region.h), made at the first export.  A slot
 * describes one exported window (rmr_context, addresses, where they lie in
 * the object, the object's descriptor in the exporter) and carries two
 * words: `state`, the exporter's, odd while the window is exported and
 * incremented at every export and revocation (so a state is never seen
 * twice); `busy`, the importer's, 1 while it copies a Write in.  The
 * EXPORT frame names the slot, its state and the table's descriptor.
 *
 * Importing (the initiator): on an EXPORT it takes the table's and the
 * object's descriptors from the peer (pidfd_getfd(2): the same permission
 * as process_vm_readv, which the same host's cross-memory attach needs
 * already; the exporter opened the object anew for it, an open file
 * description without mem_shm's flock), maps the table once and the
 * window, and keeps the window under its rmr_context.  A Write then:
 *     busy = 1 (exchange); state (seq_cst load) still the one exported?
 *     copy; busy = 0 (release).
 * A revocation (the context stops resolving: RMR unbind or rebind, LMR
 * free; or the connection ends):
 *     state++ (not exported); full fence; wait until busy == 0.
 * Either the Write sees the new state and copies nothing, or the
 * revocation sees busy and waits for the copy to end: once a revocation
 * returns, no Write lands in the window.  The wait ends when the copy does,
 * or when the peer process is gone (its pidfd); a peer stopped in the
 * middle of a copy (a debugger) holds it.
 *
 * An importer forgets a revoked window (and unmaps it) when a Write finds
 * it revoked, at its next import, or when the channel goes: until then its
 * mapping keeps memory the exporter freed (at most SHM_DIRECT_SLOTS
 * windows a channel).  An export is made at a context's second Write in a
 * row through the channel (dto_rx.c) and, once made, only on that one;
 * a lost EXPORT (no memory for it) or a failed import leaves the context's
 * Writes going through the channel until the connection ends.
 *
 * Trust: a peer that may take our descriptors with pidfd_getfd may also
 * ptrace us; mapping what it exports gives it nothing it did not have.  A
 * hostile peer could shrink an exported object under our mapping (its
 * shared memory objects cannot be sealed) and our next Write would fault:
 * no more harm than its kill(2) or ptrace(2), which the same permission
 * allows.  So no seal is asked of an exported object, as shm_region_map
 * asks of a ring's memfd: libdat's own exports (shm_open objects, named so
 * that other processes attach them, mem_shm.h) never carry one, and
 * asking would turn every direct Write off.  Its length, which the
 * exporter states, is bounded (SHM_DIRECT_WINDOW_MAX). */
#ifndef DATD_LIBDAT_SHM_DIRECT_H
#define DATD_LIBDAT_SHM_DIRECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Windows one end may export on one channel at a time (and import). */
#define SHM_DIRECT_SLOTS 32

/* The longest Write copied straight in; longer ones go through the
 * channel (by cross-memory attach from 16 KiB).  The copy runs in the
 * posting call, under the EP's lock, and a revocation waits for it: 64 KiB
 * is a few microseconds of either, where a Write of max_rdma_size (1 GiB)
 * would hold both for a tenth of a second. */
#define SHM_DIRECT_WRITE_MAX (64u << 10)

/* The longest window one end exports, or maps of its peer's.  A window is
 * the whole of what an rmr_context reaches, its length the exporter's to
 * state, and each mapping holds that much of the importer's address space
 * until it is revoked (SHM_DIRECT_SLOTS windows a channel): unbounded, a
 * peer could take all of it.  1 GiB, the shm transport's max_rdma_size
 * (transport.c); the Writes to a longer window go through the channel.
 * DATD_SHM_DIRECT_WINDOW_MAX=n (bytes, in the environment) lowers it for
 * the process, for tests. */
#define SHM_DIRECT_WINDOW_MAX ((uint64_t)1 << 30)

struct shm_direct;

/* The first member of struct shm_direct: what the data path reads inline
 * before it makes a call (a post of a Write to memory nobody exported, the
 * usual case, costs no call into this file). */
struct shm_direct_head {
        unsigned n_imported;            /* windows of the peer's mapped here */
};

/* Whether any window of the peer's is mapped here (a Write may go
 * straight in). */
static inline bool shm_direct_imports_any(const struct shm_direct *x)
{
        return ((const struct shm_direct_head *)(const void *)x)->n_imported > 0;
}

/* For one end of a shm channel to peer_pid, whose pidfd the channel keeps
 * (not owned: destroy this first).  NULL when no direct Write can be made
 * on it: no pidfd, DATD_SHM_NO_DIRECT set in the environment, or no
 * memory. */
struct shm_direct *shm_direct_new(pid_t peer_pid, int peer_pidfd);

/* The connection is over: revokes every window this end exported (the
 * peer's Writes into them stop before it returns).  Accepts NULL. */
void shm_direct_end(struct shm_direct *x);

/* shm_direct_end, then unmaps what this end imported, and frees.  Accepts
 * NULL. */
void shm_direct_destroy(struct shm_direct *x);

/* ---- exporting (the target) ------------------------------------------------ */

/* A window to export: [va, va + len) of our memory, which is the object
 * fd at file_off on, under rmr_context ctx. */
struct shm_direct_window {
        uint32_t ctx;
        uint64_t va, len;
        int fd;
        uint64_t file_off;
};

/* What the EXPORT frame tells the peer. */
struct shm_direct_export {
        uint32_t slot;
        uint64_t state;
        int table_fd;                   /* in this process */
};

/* Exports w on this channel.  1 with *out: send EXPORT; 0: w's context is
 * exported here already, no slot is free, or w is longer than
 * SHM_DIRECT_WINDOW_MAX; -errno: no table.  The caller
 * checks afterwards that w's context still resolves to the same window,
 * and revokes it (shm_direct_revoke_context) if not: a revocation that ran
 * before the export was registered did not see it. */
int shm_direct_export(struct shm_direct *x, const struct shm_direct_window *w,
                      struct shm_direct_export *out);

/* ctx stopped resolving (mem_ctx.h): revokes its windows on every channel
 * of the process.  Cheap when nothing is exported. */
void shm_direct_revoke_context(uint32_t ctx);

/* ---- importing (the initiator) --------------------------------------------- */

/* The peer's EXPORT: maps its table (the first time) and the window.  0, or
 * -errno (the peer's Writes to ctx keep going through the ring; never a
 * failure of the connection: a window revoked meanwhile is not an error);
 * -EFBIG for a window longer than SHM_DIRECT_WINDOW_MAX. */
int shm_direct_import(struct shm_direct *x, uint32_t ctx, const struct shm_direct_export *e);

/* An RDMA Write of the n segments of iov (total bytes) to the peer's
 * [va, va + total) under ctx, by copying: true once the bytes are in the
 * peer's memory; false, nothing written, when no imported window of ctx
 * holds the range (or it was revoked: forgotten then). */
bool shm_direct_write(struct shm_direct *x, uint32_t ctx, uint64_t va, const struct iovec *iov,
                      int n, uint64_t total);

#endif
