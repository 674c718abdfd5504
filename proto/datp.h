/* datp: the datd control protocol between libdat and datd.
 *
 * One message per AF_UNIX SOCK_SEQPACKET packet.  Every message is a fixed
 * layout struct that starts with struct datp_header; its size is exact per
 * type, so a decoder needs no parsing beyond "is the length right and is every
 * field in range".  Both ends run on one host, so fields are in host byte
 * order.  proto/PROTOCOL.md is the specification; this header is its C form.
 *
 * Decoders treat input as hostile: datp_validate() is the only way a received
 * buffer becomes a typed message. */
#ifndef DATD_PROTO_DATP_H
#define DATD_PROTO_DATP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define DATP_MAGIC 0x50544144u /* "DATP" in memory on little endian */

/* Protocol versions this build speaks.  HELLO negotiates one of them. */
#define DATP_VERSION_MIN 1
#define DATP_VERSION_MAX 4

/* Largest packet either side sends or accepts.  datp_recv() reads with
 * MSG_TRUNC, so a bigger packet is reported with its real length. */
#define DATP_MAX_MESSAGE 4096

/* Most descriptors one packet can carry (only EV_DATA_CHANNEL carries any,
 * at most DATP_CHANNEL_MAX_FDS); also the size of datp_recv()'s control
 * buffer. */
#define DATP_MAX_FDS 16

#define DATP_NAME_MAX 256      /* == DAT_NAME_MAX_LENGTH */
#define DATP_TRANSPORT_MAX 16  /* "shm", "tcp", "verbs" */
#define DATP_VERSION_STR_MAX 32
#define DATP_REASON_MAX 160

/* Message types.  A reply has the request's type with DATP_REPLY set and the
 * request's request_id. */
enum datp_type {
        DATP_HELLO = 1,
        DATP_IA_OPEN = 2,
        DATP_IA_CLOSE = 3,
        DATP_IA_QUERY = 4,
        DATP_OBJ_CREATE = 5,
        DATP_OBJ_UPDATE = 6,
        DATP_OBJ_DESTROY = 7,
        /* Connections (client -> datd requests). */
        DATP_LISTEN = 8,
        DATP_UNLISTEN = 9,
        DATP_CONNECT = 10,
        DATP_CR_ACCEPT = 11,
        DATP_CR_REJECT = 12,
        DATP_CR_HANDOFF = 13,
        DATP_DISCONNECT = 14,
        DATP_CHANNEL_RELEASE = 15,     /* version 4 */
        /* Connections (datd -> client events, request_id 0, no reply). */
        DATP_EV_CONN_REQUEST = 0x100,
        DATP_EV_CONN = 0x101,
        DATP_EV_DATA_CHANNEL = 0x102,
        DATP_EV_CHANNEL_DROP = 0x103,  /* version 4 */
        DATP_EV_CONN_KEPT = 0x104,     /* version 4 */

        /* datd -> client, in answer to a request it could not decode (bad
         * size, unknown type, wrong version, fds attached, ...).  Carries the
         * offending request_id when the header was readable, else 0. */
        DATP_ERROR = 0x7fff,

        DATP_REPLY = 0x8000,
};

/* Who may send a message type; the validator rejects the other direction. */
enum datp_direction {
        DATP_TO_DAEMON = 1,
        DATP_TO_CLIENT = 2,
};

struct datp_header {
        uint32_t magic;      /* DATP_MAGIC */
        uint16_t version;    /* negotiated version; HELLO carries the sender's max */
        uint16_t type;       /* enum datp_type, | DATP_REPLY for replies */
        uint32_t length;     /* whole message including this header */
        uint32_t request_id; /* chosen by the client, echoed in the reply */
};

/* Every reply body starts with this. */
struct datp_status {
        uint32_t dat_status; /* a DAT_RETURN: DAT_SUCCESS (0), or
                                DAT_CLASS_ERROR | type | subtype */
        int32_t sys_errno;   /* the errno behind a failure, 0 if none; 0..4095 */
};

/* ---- HELLO: the first message on every connection ---------------------- */
struct datp_hello {
        struct datp_header hdr;
        uint16_t min_version;
        uint16_t max_version;
        uint32_t flags;      /* none defined; must be 0 */
};

struct datp_hello_reply {
        struct datp_header hdr;
        struct datp_status status;
        uint16_t version;    /* the version both sides use from now on */
        uint16_t reserved;   /* 0 */
        uint32_t max_message;/* DATP_MAX_MESSAGE of the daemon */
        char daemon_version[DATP_VERSION_STR_MAX]; /* NUL terminated */
};

/* ---- IA description shared by IA_OPEN and IA_QUERY replies ------------- */

/* What datd knows about an IA and what the client is allowed on it.  Every
 * string is NUL terminated inside its array.  A reply whose status is not
 * DAT_SUCCESS carries no IA: its ia_id and info are all zero. */
struct datp_ia_info {
        char name[DATP_NAME_MAX];          /* datd's name of the IA, e.g. "shm" */
        char transport[DATP_TRANSPORT_MAX];/* "shm", "tcp" or "verbs" */
        char adapter_name[DATP_NAME_MAX];  /* device: "shm", "lo", "eth0", "mlx5_0" */
        char vendor_name[DATP_NAME_MAX];
        uint32_t hw_version_major;
        uint32_t hw_version_minor;
        uint32_t fw_version_major;
        uint32_t fw_version_minor;
        struct sockaddr_storage address;   /* the IA address peers connect to;
                                              bytes past address_len are 0 */
        uint32_t address_len;              /* bytes of address in use, 0 = none */
        uint32_t mtu;                      /* link MTU, 0 when not meaningful */
        /* The client's quota on this IA, from datd's policy. */
        uint32_t max_eps;
        uint32_t max_evds;
        uint32_t max_pzs;
        uint32_t max_lmrs;
        uint32_t max_rmrs;
        uint32_t max_srqs;
        uint32_t max_private_data;         /* bytes; >= 64 */
        uint32_t reserved;                 /* 0 */
        uint64_t max_lmr_bytes;            /* registered bytes allowed */
};

/* ---- IA_OPEN ----------------------------------------------------------- */
struct datp_ia_open {
        struct datp_header hdr;
        char ia_name[DATP_NAME_MAX];       /* datd's IA name, NUL terminated */
        uint32_t flags;                    /* none defined; must be 0 */
        uint32_t reserved;                 /* 0 */
};

struct datp_ia_open_reply {
        struct datp_header hdr;
        struct datp_status status;
        uint32_t ia_id;                    /* datd's id of this open instance */
        uint32_t reserved;
        struct datp_ia_info info;
};

/* ---- IA_CLOSE ---------------------------------------------------------- */
enum datp_close_flags {
        DATP_CLOSE_ABRUPT = 0,             /* DAT_CLOSE_ABRUPT_FLAG */
        DATP_CLOSE_GRACEFUL = 1,           /* DAT_CLOSE_GRACEFUL_FLAG */
};

struct datp_ia_close {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t flags;                    /* enum datp_close_flags */
};

struct datp_ia_close_reply {
        struct datp_header hdr;
        struct datp_status status;
};

/* ---- IA_QUERY ---------------------------------------------------------- */
struct datp_ia_query {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t reserved;                 /* 0 */
};

struct datp_ia_query_reply {
        struct datp_header hdr;
        struct datp_status status;
        struct datp_ia_info info;
};

/* ---- OBJ_CREATE / OBJ_UPDATE / OBJ_DESTROY --------------------------------
 * libdat tells datd about every DAT object it creates on an IA, so that datd
 * can enforce the client's quotas (datd.conf limits: max_pzs, max_evds,
 * max_eps, max_lmrs + max_lmr_bytes, max_rmrs, max_srqs; CNOs count against
 * max_evds) and datctl can show them.  The object itself lives in the
 * client; datd keeps this description, owned by the client's connection and
 * gone with it.  datd answers DAT_INSUFFICIENT_RESOURCES when a quota would
 * be exceeded, DAT_INVALID_HANDLE for an unknown ia_id/obj_id. */
enum datp_obj_kind {
        DATP_OBJ_PZ = 1,
        DATP_OBJ_EVD = 2,
        DATP_OBJ_CNO = 3,
        DATP_OBJ_LMR = 4,
        DATP_OBJ_RMR = 5,
        DATP_OBJ_EP = 6,
        DATP_OBJ_SRQ = 7,
        DATP_OBJ_KIND_MAX = DATP_OBJ_SRQ,
};

/* The state field's range: DAT_EP_STATE (dat.h, DAT_EP_STATE_UNCONNECTED ..
 * DAT_EP_STATE_CONNECTED_MULTI_PATH) for an EP, DAT_SRQ_STATE
 * (DAT_SRQ_STATE_ERROR .. DAT_SRQ_STATE_SHUTDOWN) for an SRQ.  proto/ does
 * not include the DAT headers; datd asserts that the numbers agree. */
#define DATP_EP_STATE_MAX 14
#define DATP_SRQ_STATE_MAX 2

/* What datd knows of one object.  Fields that do not apply to a kind are 0
 * (PROTOCOL.md, "Object description", has the table per kind). */
struct datp_obj_desc {
        uint32_t kind;             /* enum datp_obj_kind */
        uint32_t state;            /* EP: its DAT_EP_STATE; SRQ: DAT_SRQ_STATE; else 0 */
        uint64_t handle;           /* the client's DAT handle value (for cross reference) */
        uint64_t pz_handle;        /* EP, LMR, RMR, SRQ: the PZ's handle; else 0 */
        uint64_t length;           /* LMR: registered bytes (counts against max_lmr_bytes) */
        uint32_t qlen;             /* EVD: queue length; SRQ: max_recv_dtos */
        uint32_t max_recv_dtos;    /* EP */
        uint32_t max_request_dtos; /* EP */
        uint32_t max_recv_iov;     /* EP, SRQ */
        uint32_t max_request_iov;  /* EP */
        uint32_t max_message_size; /* EP */
        uint64_t recv_evd_handle;  /* EP: its EVDs' handles, 0 for none */
        uint64_t request_evd_handle;
        uint64_t connect_evd_handle;
        uint64_t srq_handle;       /* EP created with an SRQ */
};

struct datp_obj_create {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t reserved;         /* 0 */
        struct datp_obj_desc desc;
};

struct datp_obj_create_reply {
        struct datp_header hdr;
        struct datp_status status;
        uint32_t obj_id;           /* datd's id of the object, 0 on failure */
        uint32_t reserved;
};

/* Replaces the description (kind and handle must not change: a change is
 * DAT_INVALID_PARAMETER).  Used for EP state changes and dat_ep_modify. */
struct datp_obj_update {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t obj_id;           /* 0: the EP of desc.handle */
        struct datp_obj_desc desc;
};

struct datp_obj_update_reply {
        struct datp_header hdr;
        struct datp_status status;
};

struct datp_obj_destroy {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t obj_id;           /* 0: the EP of ep_handle */
        uint64_t ep_handle;        /* with obj_id 0; else 0 */
};

struct datp_obj_destroy_reply {
        struct datp_header hdr;
        struct datp_status status;
};

/* ---- Connections ----------------------------------------------------------
 * datd owns every listener and negotiates every connection; libdat asks and
 * receives events.  A connection qualifier on an IA belongs to one listener
 * at a time across every process of the host (DAT_CONN_QUAL_IN_USE).
 * Remote ends are named by the remote IA's address and conn_qual exactly as
 * the consumer passed them to dat_ep_connect; datd decides whether that IA is
 * its own (same host) or another host's (negotiated with that host's datd
 * over TCP on the CM port, see PROTOCOL.md).
 *
 * Lifecycle, active side: CONNECT (reply: conn_id) ... EV_CONN with
 * ESTABLISHED, PEER_REJECTED, NON_PEER_REJECTED, TIMED_OUT or UNREACHABLE;
 * then DISCONNECT or EV_CONN DISCONNECTED/BROKEN.  Passive side: LISTEN
 * (reply: listener_id, conn_qual) ... EV_CONN_REQUEST (cr_id) ... CR_ACCEPT
 * (EV_CONN ESTABLISHED follows, or ACCEPT_COMPLETION_ERROR) / CR_REJECT /
 * CR_HANDOFF.  Every id is datd's, unique per datd, never reused while live. */

#define DATP_PRIVATE_DATA_MAX 256  /* bytes; >= limits.max_private_data */

enum datp_listener_kind {
        DATP_LISTENER_PSP = 1,         /* dat_psp_create */
        DATP_LISTENER_PSP_ANY = 2,     /* dat_psp_create_any: datd picks conn_qual */
        DATP_LISTENER_RSP = 3,         /* dat_rsp_create: bound to one EP */
};

struct datp_listen {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t kind;                 /* enum datp_listener_kind */
        uint64_t conn_qual;            /* ignored (0) for PSP_ANY */
        uint64_t handle;               /* the client's PSP/RSP handle */
        uint64_t ep_handle;            /* RSP: its EP; else 0 */
        uint32_t psp_flags;            /* DAT_PSP_FLAGS (PSP kinds), else 0 */
        uint32_t reserved;             /* 0 */
};

struct datp_listen_reply {
        struct datp_header hdr;
        struct datp_status status;     /* DAT_CONN_QUAL_IN_USE, DAT_CONN_QUAL_UNAVAILABLE, ... */
        uint32_t listener_id;
        uint32_t reserved;
        uint64_t conn_qual;            /* the one in use (chosen by datd for PSP_ANY) */
};

struct datp_unlisten {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t listener_id;
};

struct datp_unlisten_reply {
        struct datp_header hdr;
        struct datp_status status;
};

/* Private data travels in fixed arrays; pd_len says how much is in use and
 * the rest is 0. */
struct datp_connect {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t flags;                /* DATP_CONNECT_DUP: dat_ep_dup_connect */
        uint64_t ep_handle;            /* the connecting EP */
        uint64_t dup_of_conn_id;       /* DUP: the connection whose remote end to reuse, else 0 */
        struct sockaddr_storage remote_address;
        uint32_t remote_address_len;
        uint32_t qos;                  /* DAT_QOS */
        uint64_t remote_conn_qual;
        uint64_t timeout_us;           /* DAT_TIMEOUT: UINT64_MAX for DAT_TIMEOUT_INFINITE */
        uint32_t connect_flags;        /* DAT_CONNECT_FLAGS */
        uint32_t pd_len;
        uint8_t private_data[DATP_PRIVATE_DATA_MAX];
};

enum datp_connect_flags {
        DATP_CONNECT_DUP = 1,
};

struct datp_connect_reply {
        struct datp_header hdr;
        struct datp_status status;     /* synchronous refusals only; the rest come as EV_CONN */
        uint32_t conn_id;
        uint32_t reserved;
};

struct datp_cr_accept {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t cr_id;
        uint64_t ep_handle;            /* the EP taking the connection */
        uint32_t pd_len;
        uint32_t reserved;
        uint8_t private_data[DATP_PRIVATE_DATA_MAX];
};

struct datp_cr_accept_reply {
        struct datp_header hdr;
        struct datp_status status;
        uint32_t conn_id;              /* the passive side's id of the connection */
        uint32_t reserved;
};

/* DATP_CR_REJECT_NON_PEER: the provider (libdat), not the consumer, turns
 * the request down -- no listener object any more, no EP could be made for
 * a DAT_PSP_PROVIDER_FLAG listener (quota) -- so the active side gets
 * DAT_CONNECTION_EVENT_NON_PEER_REJECTED and no private data (pd_len 0). */
enum datp_cr_reject_flags {
        DATP_CR_REJECT_NON_PEER = 1,
};

struct datp_cr_reject {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t cr_id;
        uint32_t pd_len;
        uint32_t flags;                /* enum datp_cr_reject_flags */
        uint8_t private_data[DATP_PRIVATE_DATA_MAX];
};

struct datp_cr_reject_reply {
        struct datp_header hdr;
        struct datp_status status;
};

struct datp_cr_handoff {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t cr_id;
        uint64_t conn_qual;            /* the listener of this IA to hand the request to */
};

struct datp_cr_handoff_reply {
        struct datp_header hdr;
        struct datp_status status;
};

/* DISCONNECT's flags beside the close flag, from version 2: the client has
 * ended its end itself (its EP is Disconnected and has its event), so datd
 * sends that end no EV_CONN DISCONNECTED.  The other end hears as always. */
#define DATP_DISCONNECT_NO_EVENT 0x2u

struct datp_disconnect {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t conn_id;
        uint32_t flags;                /* DATP_CLOSE_ABRUPT / DATP_CLOSE_GRACEFUL,
                                          | DATP_DISCONNECT_NO_EVENT (version 2) */
        uint32_t reserved;
};

struct datp_disconnect_reply {
        struct datp_header hdr;
        struct datp_status status;
};

/* datd -> the listener's client: a connection request arrived. */
struct datp_ev_conn_request {
        struct datp_header hdr;        /* request_id 0 */
        uint32_t ia_id;
        uint32_t listener_id;
        uint32_t cr_id;
        uint32_t pd_len;
        uint64_t conn_qual;            /* the listener's */
        uint64_t remote_port;          /* the active side's port qualifier, for dat_cr_query */
        struct sockaddr_storage remote_address;
        uint32_t remote_address_len;
        uint32_t reserved;
        uint8_t private_data[DATP_PRIVATE_DATA_MAX];
};

/* datd -> an EP's client: what happened to a connection.  event is a
 * DAT_EVENT_NUMBER of the connection stream (DAT_CONNECTION_EVENT_*). */
struct datp_ev_conn {
        struct datp_header hdr;        /* request_id 0 */
        uint32_t ia_id;
        uint32_t conn_id;
        uint64_t ep_handle;
        uint32_t event;
        uint32_t pd_len;               /* private data of the peer's accept/reject */
        uint8_t private_data[DATP_PRIVATE_DATA_MAX];
};

/* The data channel of a connection (issue 5 and 6): how the two processes
 * move data once datd has connected their EPs. */
enum datp_channel_kind {
        DATP_CHANNEL_SHM = 1,          /* same host: rings in a shared memfd */
        DATP_CHANNEL_TCP = 2,          /* a connected TCP socket */
};

/* Descriptors an EV_DATA_CHANNEL carries, in this order:
 *   shm: [0] the region (a sealed memfd, libdat/shm_link.h's layout, laid
 *        out by datd), [1] this end's doorbell (a datagram socket the
 *        peer rings, this end waits on), [2] the socket that rings the
 *        peer's doorbell, [3] a pidfd of the peer process (optional: nfds 3
 *        without it);
 *   shm with DATP_CHANNEL_PIPES (version 3): [0] the region, [1] the read
 *        end of this end's doorbell pipe, [2] the write end of the peer's,
 *        [3] a read end of the peer's pipe that this end holds and never
 *        reads (while it is open, ringing the peer is never SIGPIPE), [4]
 *        the pidfd (optional: nfds 4 without it);
 *   tcp: [0] the connected socket. */
#define DATP_CHANNEL_SHM_FDS_MIN 3
#define DATP_CHANNEL_SHM_PIPES_FDS_MIN 4
#define DATP_CHANNEL_MAX_FDS 5

/* EV_DATA_CHANNEL flags.  Version 3: the shm doorbells are pipes.  datd
 * makes pipes when both ends speak version 3: a socket passed in a message
 * makes every close of a Unix socket on the host, while one is in flight,
 * queue the kernel's garbage collector of in-flight sockets, which cost
 * more than a tenth of the CPU of a connection. */
#define DATP_CHANNEL_PIPES 0x1u
/* Version 4, shm with pipes, channel_id not 0: the client keeps the
 * channel when its connection ends (mapping and descriptors, under
 * channel_id) and tells datd so with CHANNEL_RELEASE; datd may then hand
 * it to a later connection between the same two IA instances instead of
 * making a new one.  A region, two pipes and their mappings per connection
 * were a quarter of a connection's CPU. */
#define DATP_CHANNEL_KEEP 0x2u
/* Version 4, with PIPES | KEEP and no descriptors: the channel channel_id
 * this client kept, laid out afresh by datd for this connection;
 * region_size, ring_size and side are as when it was first sent.  Only in
 * the EV_DATA_CHANNEL an EV_CONN_KEPT stands for: one that travels on its
 * own always carries descriptors. */
#define DATP_CHANNEL_REUSE 0x4u

/* The descriptors a shm EV_DATA_CHANNEL with these flags carries without
 * the optional pidfd, which is the one after them (the index of the
 * pidfd). */
static inline unsigned datp_channel_shm_fds(uint32_t flags)
{
        return flags & DATP_CHANNEL_PIPES ? DATP_CHANNEL_SHM_PIPES_FDS_MIN : DATP_CHANNEL_SHM_FDS_MIN;
}

/* datd -> an EP's client, just before the EV_CONN ESTABLISHED of the same
 * connection (same conn_id and ep_handle) on the same socket: the data
 * channel, its descriptors attached (SCM_RIGHTS, nfds of them).  The
 * client keeps it for the EP and starts using it at ESTABLISHED; one that
 * arrives for no pending EP is closed. */
struct datp_ev_data_channel {
        struct datp_header hdr;        /* request_id 0 */
        uint32_t ia_id;
        uint32_t conn_id;
        uint64_t ep_handle;
        uint32_t kind;                 /* enum datp_channel_kind */
        uint32_t nfds;                 /* == descriptors attached: shm 3 or 4 (with
                                        * DATP_CHANNEL_PIPES 4 or 5), tcp 1 */
        uint64_t region_size;          /* shm: bytes of the memfd; tcp: 0 */
        uint32_t ring_size;            /* shm: data bytes of each direction's ring; tcp: 0 */
        uint32_t side;                 /* shm: 0 or 1, this end produces ring `side`; tcp: 0 */
        int32_t peer_pid;              /* the peer process when on this host, else 0 */
        uint32_t peer_uid;             /* its user, when peer_pid != 0 */
        uint32_t flags;                /* DATP_CHANNEL_PIPES (version 3, shm), KEEP, REUSE
                                        * (version 4, shm), else 0 */
        uint32_t channel_id;           /* KEEP: datd's id of the channel; else 0 (version 3
                                        * and before: reserved, 0) */
};

/* Version 4, client -> datd, sent with request_id 0 (no reply): this
 * client kept the channel channel_id (EV_DATA_CHANNEL with KEEP) and will
 * touch it no more; datd may lay it out afresh for another connection
 * between the same two IA instances.  An id that is no such channel of
 * this client is ignored (datd may have dropped it meanwhile). */
struct datp_channel_release {
        struct datp_header hdr;
        uint32_t ia_id;
        uint32_t channel_id;
};

struct datp_channel_release_reply {
        struct datp_header hdr;
        struct datp_status status;
};

/* Version 4, datd -> client, request_id 0: forget the channel channel_id
 * that this client released (unmap its region, close its descriptors):
 * the peer's IA instance is gone, or datd keeps no more spare channels. */
struct datp_ev_channel_drop {
        struct datp_header hdr;        /* request_id 0 */
        uint32_t ia_id;
        uint32_t channel_id;
};

/* EV_CONN's events: DAT_CONNECTION_EVENT_ESTABLISHED ..
 * DAT_CONNECTION_EVENT_UNREACHABLE (dat.h; proto/ does not include it). */
#define DATP_EV_CONN_FIRST 0x04001u
#define DATP_EV_CONN_LAST 0x04008u
#define DATP_EV_CONN_ESTABLISHED 0x04001u
#define DATP_EV_CONN_PEER_REJECTED 0x04002u

/* Version 4, datd -> client, request_id 0: a connection that is up on a
 * reused kept channel, in one packet instead of two: exactly what an
 * EV_DATA_CHANNEL with DATP_CHANNEL_PIPES | KEEP | REUSE and these fields
 * followed by the EV_CONN ESTABLISHED of the same connection would say.
 * datd sends it instead of that pair; no descriptor goes with either.
 * Two packets of datd's eight per connection were ~10% of its rate. */
struct datp_ev_conn_kept {
        struct datp_header hdr;        /* request_id 0 */
        uint32_t ia_id;
        uint32_t conn_id;
        uint64_t ep_handle;
        uint32_t channel_id;           /* the kept channel, not 0 */
        uint32_t side;                 /* 0 or 1 */
        uint64_t region_size;
        uint32_t ring_size;
        int32_t peer_pid;
        uint32_t peer_uid;
        uint32_t pd_len;               /* the peer's private data (ESTABLISHED's) */
        uint8_t private_data[DATP_PRIVATE_DATA_MAX];
};

/* The EV_DATA_CHANNEL and EV_CONN ESTABLISHED that k stands for. */
void datp_ev_conn_kept_split(const struct datp_ev_conn_kept *k, struct datp_ev_data_channel *ch,
                             struct datp_ev_conn *conn);

/* ---- ERROR ------------------------------------------------------------- */
struct datp_error {
        struct datp_header hdr;
        struct datp_status status;
        uint16_t bad_type;                 /* type of the rejected message, 0 if unreadable */
        uint16_t fatal;                    /* 1: datd closes the connection after this */
        int32_t code;                      /* enum datp_decode_error */
        char reason[DATP_REASON_MAX];      /* human-readable, NUL terminated */
};

/* A union big enough for any message, for receive buffers. */
union datp_message {
        struct datp_header hdr;
        struct datp_hello hello;
        struct datp_hello_reply hello_reply;
        struct datp_ia_open ia_open;
        struct datp_ia_open_reply ia_open_reply;
        struct datp_ia_close ia_close;
        struct datp_ia_close_reply ia_close_reply;
        struct datp_ia_query ia_query;
        struct datp_ia_query_reply ia_query_reply;
        struct datp_obj_create obj_create;
        struct datp_obj_create_reply obj_create_reply;
        struct datp_obj_update obj_update;
        struct datp_obj_update_reply obj_update_reply;
        struct datp_obj_destroy obj_destroy;
        struct datp_obj_destroy_reply obj_destroy_reply;
        struct datp_listen listen;
        struct datp_listen_reply listen_reply;
        struct datp_unlisten unlisten;
        struct datp_unlisten_reply unlisten_reply;
        struct datp_connect connect;
        struct datp_connect_reply connect_reply;
        struct datp_cr_accept cr_accept;
        struct datp_cr_accept_reply cr_accept_reply;
        struct datp_cr_reject cr_reject;
        struct datp_cr_reject_reply cr_reject_reply;
        struct datp_cr_handoff cr_handoff;
        struct datp_cr_handoff_reply cr_handoff_reply;
        struct datp_disconnect disconnect;
        struct datp_disconnect_reply disconnect_reply;
        struct datp_ev_conn_request ev_conn_request;
        struct datp_ev_conn ev_conn;
        struct datp_ev_data_channel ev_data_channel;
        struct datp_channel_release channel_release;
        struct datp_channel_release_reply channel_release_reply;
        struct datp_ev_channel_drop ev_channel_drop;
        struct datp_ev_conn_kept ev_conn_kept;
        struct datp_error error;
        unsigned char bytes[DATP_MAX_MESSAGE];
};

/* ---- codec --------------------------------------------------------------
 * Why a message was refused.  Negative values returned by datp_validate(). */
enum datp_decode_error {
        DATP_OK = 0,
        DATP_E_SHORT = 1,        /* shorter than a header */
        DATP_E_OVERSIZE = 2,     /* longer than DATP_MAX_MESSAGE */
        DATP_E_MAGIC = 3,        /* wrong magic */
        DATP_E_VERSION = 4,      /* version not the negotiated one */
        DATP_E_LENGTH = 5,       /* header length != bytes received */
        DATP_E_TYPE = 6,         /* unknown type */
        DATP_E_DIRECTION = 7,    /* a type this side never receives */
        DATP_E_SIZE = 8,         /* wrong size for the type */
        DATP_E_FIELD = 9,        /* a field out of range or unterminated string */
        DATP_E_FDS = 10,         /* file descriptors where none belong */
        DATP_E_STATE = 11,       /* valid message at the wrong time (e.g. before HELLO) */
};

/* Fills a header for a message of the given type and total size. */
void datp_header_init(struct datp_header *hdr, uint16_t type, uint16_t version,
                      uint32_t length, uint32_t request_id);

/* Checks a received packet of len bytes (with nfds descriptors attached)
 * that this side (dir) is meant to receive.  version is the negotiated
 * version, or 0 before HELLO.  Before HELLO only HELLO (to the daemon), HELLO
 * reply and ERROR (to the client) are accepted: HELLO and ERROR keep their
 * v1 layout in every version, so their header may carry any version >= 1
 * (HELLO: the sender's max_version; a HELLO with no version in common with
 * [DATP_VERSION_MIN, DATP_VERSION_MAX] is DATP_E_VERSION); a HELLO reply
 * must carry a version in that range.  After HELLO every message must carry
 * exactly the negotiated version.  buf need not be aligned.
 * Returns DATP_OK or a negative enum datp_decode_error; on failure *reason
 * (if not NULL) points to a static human-readable explanation. */
int datp_validate(const void *buf, size_t len, unsigned nfds,
                  enum datp_direction dir, uint16_t version, const char **reason);

/* Size of the fixed layout of a type (with or without DATP_REPLY), or 0 for
 * unknown types. */
size_t datp_message_size(uint16_t type);

/* Name of a type for logs ("IA_OPEN", "IA_OPEN reply"), never NULL. */
const char *datp_type_name(uint16_t type);

/* Text of an enum datp_decode_error (positive or negative), never NULL. */
const char *datp_decode_error_str(int code);

/* Copies src into a fixed array of size n, always NUL terminated; returns
 * -1 (and copies nothing) if src does not fit. */
int datp_set_string(char *dst, size_t n, const char *src);

/* ---- socket helpers ------------------------------------------------------
 * Sends one message (hdr->length bytes) as one packet, MSG_NOSIGNAL, optionally
 * with fds (SCM_RIGHTS).  Returns 0 or -errno; -EAGAIN on a full non-blocking
 * socket. */
int datp_send(int sock, const struct datp_header *hdr, const int *fds, unsigned nfds);

/* n messages (at most DATP_SEND_MANY_MAX, else -EINVAL), no descriptors,
 * in order, one packet each, with as few system calls as the kernel takes
 * (sendmmsg).  0, or as datp_send: a length datp_send refuses sends none of
 * them; after a socket error (-EAGAIN on a full non-blocking socket) the
 * messages before it went.  *sent (NULL: not wanted): how many went. */
#define DATP_SEND_MANY_MAX 32
int datp_send_many(int sock, const struct datp_header *const *hdrs, unsigned n, unsigned *sent);

/* Receives one packet into buf.  Returns the packet's real length (which may
 * exceed sizeof(*buf): the caller then rejects it as DATP_E_OVERSIZE), 0 on
 * orderly shutdown, or -errno.  Descriptors that came with the packet are
 * stored in fds (up to max_fds, *nfds set to how many arrived); any beyond
 * max_fds are closed here.  With max_fds == 0 every received fd is closed and
 * *nfds still tells how many there were.  fds[0..max_fds) slots that hold no
 * received descriptor are set to -1.  If the descriptors did not all fit
 * (more than DATP_MAX_FDS, MSG_CTRUNC) every one that arrived is closed, none
 * is stored and *nfds is at least 1, so the packet is refused either way.
 * Received descriptors are close-on-exec. */
ssize_t datp_recv(int sock, union datp_message *buf, int *fds, unsigned max_fds,
                  unsigned *nfds);

/* datp_recv() of up to n packets in one system call (recvmmsg): the
 * packets that are there, never waiting (for a reader that shares the
 * socket with others).  Packet i goes to bufs[i], its length (as
 * datp_recv returns it; 0: the end of the connection) to
 * lens[i], its descriptors to fds[i] (DATP_MAX_FDS each, the rest -1) and
 * their count to nfds[i].  Returns how many packets (at least 1), or
 * -errno (-EAGAIN: none).  n at most DATP_BATCH_MAX. */
#define DATP_BATCH_MAX 8
int datp_try_recv_batch(int sock, union datp_message *bufs, unsigned n,
                        int (*fds)[DATP_MAX_FDS], ssize_t *lens, unsigned *nfds);

#endif
