/* Decoder of the gVisor Sentry's runtime-monitoring stream (the "remote" sink wire format of
 * runsc release-20221219.0): the handshake, the 8-byte datagram header and the protobuf payloads
 * of the points sightline subscribes to.
 *
 * Threat model: the Sentry is untrusted (gVisor itself treats it so), and so is anything else
 * that manages to talk on the sink socket. Nothing here trusts a length: every varint is at most
 * 10 bytes and must not overflow, every length-delimited field must fit in what is left of its
 * enclosing message, strings have fixed upper bounds, scalar fields may appear once, nesting is
 * limited to the schema (at most 3 levels), protobuf groups are refused. A message that breaks a
 * rule is rejected whole, with a reason the caller counts. Decoded strings point into the
 * caller's buffer (no allocation): the message is valid as long as that buffer is. */
#ifndef SL_GVISOR_WIRE_H
#define SL_GVISOR_WIRE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Message types (enum MessageType, points/common.proto). Only the ones sightline subscribes to
 * are decoded; any other type is rejected as unexpected. */
enum sl_gv_type {
	SL_GV_CONTAINER_START = 1,
	SL_GV_SENTRY_CLONE = 2,
	SL_GV_SENTRY_EXEC = 3,
	SL_GV_SENTRY_EXIT_NOTIFY_PARENT = 4,
	SL_GV_SENTRY_TASK_EXIT = 5,
	SL_GV_SYSCALL_OPEN = 7,
	SL_GV_SYSCALL_CONNECT = 10,
	SL_GV_SYSCALL_EXECVE = 11,
	SL_GV_SYSCALL_SOCKET = 12,
	SL_GV_SYSCALL_BIND = 24,
};

/* Why a datagram was rejected. SL_GV_OK is 0; every other value is counted by the sink. */
enum sl_gv_reject {
	SL_GV_OK = 0,
	SL_GV_R_SHORT_HEADER,  /* fewer than 8 bytes */
	SL_GV_R_HEADER_SIZE,   /* header_size < 8, > 256, or beyond the datagram */
	SL_GV_R_UNKNOWN_TYPE,  /* a message type sightline did not subscribe to */
	SL_GV_R_BAD_VARINT,    /* more than 10 bytes, or a value above 2^64 */
	SL_GV_R_TRUNCATED,     /* a field runs past the end of its message */
	SL_GV_R_WIRE_TYPE,     /* a known field with the wrong wire type, or wire type 6/7 */
	SL_GV_R_GROUP,	       /* protobuf groups (wire types 3/4): never produced, may nest without end */
	SL_GV_R_BAD_FIELD,     /* field number 0 or above 2^29-1 */
	SL_GV_R_OVERSIZED,     /* a string longer than its bound */
	SL_GV_R_DUPLICATE,     /* a non-repeated field given twice */
	SL_GV_R_TOO_MANY,      /* a repeated field with more elements than SL_GV_MAX_REPEATED */
	SL_GV_R_NESTING,       /* deeper than the schema */
	SL_GV_R_BAD_HANDSHAKE, /* handshake is not a Handshake of version >= 1 */
	SL_GV_R_TOO_BIG,       /* datagram larger than the sink's buffer (cut by the kernel) */
	SL_GV_R_COUNT
};
/* Short fixed name of a reason ("bad-varint", ...). */
const char *sl_gv_reject_name(enum sl_gv_reject r);

#define SL_GV_HEADER_MIN   8
#define SL_GV_HEADER_MAX   256		/* a header may grow; more than this is not a header */
#define SL_GV_PATH_MAX	   4096		/* paths (pathname, fd_path, cwd, binary_path) */
#define SL_GV_ID_MAX	   256		/* container id */
#define SL_GV_NAME_MAX	   256		/* process name (16 in Linux; generous) */
#define SL_GV_ADDR_MAX	   128		/* sockaddr_storage */
#define SL_GV_ARG_MAX	   (128 * 1024) /* one argv element (MAX_ARG_STRLEN) */
#define SL_GV_ARGV_KEEP	   64		/* argv elements kept (the rest counted) */
#define SL_GV_MAX_REPEATED 65536	/* elements of one repeated field */
#define SL_GV_MAX_DEPTH	   3		/* message, ContextData, Credentials */

struct sl_gv_str {
	const char *p; /* into the datagram; NOT NUL-terminated; NULL when absent */
	size_t n;
};

struct sl_gv_strv {
	struct sl_gv_str v[SL_GV_ARGV_KEEP];
	uint32_t n; /* elements seen (may exceed SL_GV_ARGV_KEEP; only the first are kept) */
};

struct sl_gv_cred {
	bool present;
	uint32_t ruid, euid, suid, rgid, egid, sgid;
};

struct sl_gv_ctx {
	bool present;
	int64_t time_ns;
	int32_t tid, tgid;
	struct sl_gv_str container_id, cwd, process_name;
	struct sl_gv_cred cred;
};

/* One decoded datagram. Only the members of its type are meaningful; absent fields are zero
 * (proto3 default), absent strings have p == NULL. */
struct sl_gv_msg {
	uint16_t type;
	uint32_t dropped; /* the header's cumulative dropped_count (wraps at 2^32) */
	struct sl_gv_ctx ctx;
	/* syscall points: Exit present only on exit points */
	bool has_exit;
	int64_t result, errorno;
	int64_t sysno, fd, flags, mode;
	struct sl_gv_str fd_path, pathname, address;
	int64_t domain, sock_type, protocol;
	struct sl_gv_strv argv; /* execve argv; sentry exec argv; container start args */
	/* container start */
	struct sl_gv_str id, cwd;
	bool terminal;
	/* sentry clone */
	int64_t created_tid, created_tgid, clone_flags;
	/* sentry exec */
	struct sl_gv_str binary_path;
	uint32_t binary_mode, binary_uid, binary_gid;
	/* exit notify parent / task exit: a wait status */
	int32_t exit_status;
	uint32_t unknown_fields; /* fields of numbers this decoder does not know: skipped */
	uint32_t skipped_elems;	 /* env/envv elements received and dropped */
};

/* Decode one datagram (header + payload) into m. Returns SL_GV_OK or the reason it was
 * rejected (m is then unspecified). Never reads outside buf[0..len). */
enum sl_gv_reject sl_gv_decode(const uint8_t *buf, size_t len, struct sl_gv_msg *m);

/* Decode the Sentry's first datagram, a bare Handshake{uint32 version = 1}. Returns SL_GV_OK
 * with *version >= 1, or SL_GV_R_BAD_HANDSHAKE / another reason. */
enum sl_gv_reject sl_gv_handshake(const uint8_t *buf, size_t len, uint32_t *version);

/* The reply the sink sends: Handshake{version = 1}. */
#define SL_GV_HANDSHAKE_REPLY	  "\x08\x01"
#define SL_GV_HANDSHAKE_REPLY_LEN 2
#endif
