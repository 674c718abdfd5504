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
#define DATP_VERSION_MAX 1

/* Largest packet either side sends or accepts.  datp_recv() reads with
 * MSG_TRUNC, so a bigger packet is reported with its real length. */
#define DATP_MAX_MESSAGE 4096

/* Most descriptors one packet can carry (no v1 message carries any); also
 * the size of datp_recv()'s control buffer. */
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

#endif
