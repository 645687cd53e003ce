/* The frame codec of the export channel between a supervisor and the collector (docs/protocol.md).
 *
 * One frame: a 16-byte little-endian header
 *     u32 magic 0x32464c53 ("SLF2", protocol version 2) | u8 type | u8 flags (0) | u16 reserved (0) |
 *     u32 payload_len | u32 frame_seq
 * then payload_len bytes of payload, then (every type but CHALLENGE) a 32-byte tag
 *     tag = HMAC-SHA256(K, challenge(16) || header(16) || payload)
 * where K is the per-sandbox key (sl_frame_derive_key) and challenge the 16 random bytes the
 * collector sent first on this connection. frame_seq counts per connection and direction: 1, 2, 3 ...
 *
 * The codec is pure: it works on byte buffers, never does I/O, never prints, never allocates (except
 * the growable EVENTS builder) and bounds everything. Nothing in a payload is looked at before its tag
 * is checked, and a decoded frame's pointers are views into the caller's buffer. */
#ifndef SL_FRAME_H
#define SL_FRAME_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes 'S','L','F','2' on the wire: the magic is the protocol version (2: HELLO carries key_id). */
#define SL_FRAME_MAGIC	       0x32464c53u
#define SL_FRAME_HDR_LEN       16u
#define SL_FRAME_TAG_LEN       32u
#define SL_FRAME_KEY_LEN       32u
#define SL_FRAME_MASTER_LEN    32u
#define SL_FRAME_CHALLENGE_LEN 16u
#define SL_FRAME_MAX_PAYLOAD   (1u << 20)
/* Largest frame on the wire: header + payload + tag. A receive buffer of this size always suffices. */
#define SL_FRAME_MAX_FRAME	(SL_FRAME_HDR_LEN + SL_FRAME_MAX_PAYLOAD + SL_FRAME_TAG_LEN)
#define SL_FRAME_SANDBOX_ID_LEN 32u /* lowercase hex chars */
#define SL_FRAME_KEY_ID_LEN	16u /* lowercase hex chars: 8 bytes of HMAC(K, "sightline key id v1") */
/* EVENTS: u32 count (1..SL_FRAME_EVENTS_MAX), then count x (u32 len (1..SL_FRAME_MAX_PAYLOAD), bytes). */
#define SL_FRAME_EVENTS_MAX 65536u
/* The longest event line one EVENTS frame can carry (payload minus the count and one length). */
#define SL_FRAME_EVENT_LINE_MAX (SL_FRAME_MAX_PAYLOAD - 8u)
#define SL_FRAME_ACK_LEN	8u
#define SL_FRAME_ERROR_MSG_MAX	256u
/* HELLO: every string member at most this many bytes (after JSON unescaping). */
#define SL_FRAME_HELLO_STR_MAX 256u
/* JSON payloads larger than this are refused by the parsers before json-c sees them. */
#define SL_FRAME_HELLO_MAX     16384u
#define SL_FRAME_HEARTBEAT_MAX 1024u

enum sl_frame_type {
	SL_FRAME_CHALLENGE = 1, /* collector -> supervisor, first frame, 16 random bytes, seq 0, no tag */
	SL_FRAME_HELLO = 2,	/* supervisor -> collector, JSON (sl_frame_hello_parse) */
	SL_FRAME_EVENTS = 3,	/* supervisor -> collector, batch of record lines */
	SL_FRAME_HEARTBEAT = 4, /* supervisor -> collector, JSON counters (sl_frame_heartbeat_parse) */
	SL_FRAME_ACK = 5,	/* collector -> supervisor, u64 last durable seq */
	SL_FRAME_ERROR = 6,	/* either way, u16 reason code + UTF-8 message */
};

/* Why a frame was rejected. Values and names are stable (metrics labels, stored alerts). */
enum sl_frame_reject {
	SL_FRAME_REJECT_NONE = 0,
	SL_FRAME_REJECT_BAD_MAGIC,	/* the first 4 bytes are not "SLF2" (another protocol version too) */
	SL_FRAME_REJECT_BAD_TYPE,	/* unknown type, wrong direction, or not allowed in this state */
	SL_FRAME_REJECT_BAD_FLAGS,	/* flags or reserved not 0 */
	SL_FRAME_REJECT_OVERSIZE,	/* payload_len > SL_FRAME_MAX_PAYLOAD */
	SL_FRAME_REJECT_TRUNCATED_BODY, /* the stream ended inside a frame (sl_frame_decode_eof) */
	SL_FRAME_REJECT_BAD_TAG,     /* HMAC mismatch: tampered, other connection (a HELLO: see below) */
	SL_FRAME_REJECT_REPLAY,	     /* authentic, but frame_seq is not exactly previous + 1 */
	SL_FRAME_REJECT_BAD_PAYLOAD, /* authentic, but the type-specific payload structure is wrong */
	/* Only for a HELLO whose tag does not match (never from sl_frame_decode itself, see
	 * sl_frame_hello_tag_verdict): its key_id is not the claimed sandbox's key's, so it was
	 * signed with another key: one the collector knows for another sandbox, or an unknown one. */
	SL_FRAME_REJECT_WRONG_KEY,
	SL_FRAME_REJECT_OTHER_SANDBOX_KEY,
	SL_FRAME_REJECT_COUNT_,
};
/* "none", "bad_magic", "bad_type", "bad_flags", "oversize", "truncated_body", "bad_tag", "replay",
 * "bad_payload", "wrong_key", "other_sandbox_key"; "unknown" for anything else. */
const char *sl_frame_reject_name(enum sl_frame_reject r);
/* "challenge", "hello", ... ; "unknown" for anything else. */
const char *sl_frame_type_name(unsigned type);

/* Suggested ERROR reason codes (the codec carries any u16). */
enum sl_frame_error_code {
	SL_FRAME_ERR_PROTOCOL = 1,     /* a frame was rejected; the message names the reason */
	SL_FRAME_ERR_UNAUTHORIZED = 2, /* unknown sandbox or key */
	SL_FRAME_ERR_REVOKED = 3,      /* the task's credential was revoked */
	SL_FRAME_ERR_INTERNAL = 4,     /* the collector cannot store (disk, database) */
	SL_FRAME_ERR_SHUTDOWN = 5,     /* the collector is going away; reconnect later */
};

/* Which end of the connection this context belongs to. It decides which types may be sent and
 * received: the collector sends CHALLENGE, ACK, ERROR and receives HELLO, EVENTS, HEARTBEAT, ERROR;
 * the supervisor the other way round. */
enum sl_frame_role {
	SL_FRAME_ROLE_COLLECTOR = 1,
	SL_FRAME_ROLE_SUPERVISOR = 2,
};

/* Per-connection state of one end. Plain data: copy it, but wipe it (sl_frame_ctx_wipe) when done,
 * it holds the key. The decoder only reads it; sl_frame_ctx_accept and sl_frame_encode advance it. */
struct sl_frame_ctx {
	enum sl_frame_role role;
	bool have_key;
	bool have_challenge;
	uint8_t key[SL_FRAME_KEY_LEN];
	uint8_t challenge[SL_FRAME_CHALLENGE_LEN];
	uint32_t recv_seq; /* frame_seq of the last accepted frame from the peer (0: none yet) */
	uint32_t send_seq; /* frame_seq of the last frame encoded (0: none yet) */
};

/* A decoded frame. Pointers are views into the decoded buffer, valid while it is. */
struct sl_frame {
	enum sl_frame_reject reject; /* NONE unless the decoder returned -EBADMSG */
	uint8_t type;
	uint32_t seq;
	size_t frame_len; /* bytes on the wire, == *consumed */
	const uint8_t *payload;
	uint32_t payload_len;
	/* Type-specific views, filled on success: */
	const uint8_t *challenge; /* CHALLENGE: SL_FRAME_CHALLENGE_LEN bytes */
	uint32_t event_count;	  /* EVENTS: iterate with sl_frame_events_begin/next */
	uint64_t ack_seq;	  /* ACK */
	uint16_t error_code;	  /* ERROR */
	const char *error_msg;	  /* ERROR: error_msg_len bytes of valid UTF-8 without NUL, NOT terminated */
	size_t error_msg_len;
};

/* K = HMAC-SHA256(master, "sightline/v1/sandbox-key/" || sandbox_id). sandbox_id must be exactly 32
 * lowercase hex characters. Returns 0, -EINVAL (malformed id) or -ENOMEM/-EIO (OpenSSL failure). */
int sl_frame_derive_key(const uint8_t master[SL_FRAME_MASTER_LEN], const char *sandbox_id,
			uint8_t key[SL_FRAME_KEY_LEN]);
/* The key's public fingerprint, carried in every HELLO: the first 8 bytes of
 * HMAC-SHA256(K, "sightline key id v1") as 16 lowercase hex characters. A MAC output: it tells keys
 * apart without revealing anything about K. Returns 0 or -EINVAL/-ENOMEM/-EIO. */
int sl_frame_key_id(const uint8_t key[SL_FRAME_KEY_LEN], char out[SL_FRAME_KEY_ID_LEN + 1]);
/* A HELLO that sl_frame_decode refused with BAD_TAG, checked against the key of the sandbox it
 * claims: BAD_TAG if its key_id is that key's (the right key, so the frame was changed or belongs
 * to another connection), WRONG_KEY if not (the caller may refine that to OTHER_SANDBOX_KEY when
 * the key_id is one of another sandbox it knows). */
enum sl_frame_reject sl_frame_hello_tag_verdict(const uint8_t key[SL_FRAME_KEY_LEN], const char *claimed_key_id);
/* true if s is exactly 32 lowercase hex characters followed by NUL. */
bool sl_frame_sandbox_id_valid(const char *s);

/* Start a connection's context. key may be NULL (the collector learns it from the HELLO, see
 * sl_frame_peek_hello). Returns 0 or -EINVAL. */
int sl_frame_ctx_init(struct sl_frame_ctx *ctx, enum sl_frame_role role, const uint8_t key[SL_FRAME_KEY_LEN]);
void sl_frame_ctx_set_key(struct sl_frame_ctx *ctx, const uint8_t key[SL_FRAME_KEY_LEN]);
/* Collector: draw the connection's 16 random challenge bytes (getrandom). Returns 0 or -errno. */
int sl_frame_ctx_new_challenge(struct sl_frame_ctx *ctx);
/* Erase the key and challenge. */
void sl_frame_ctx_wipe(struct sl_frame_ctx *ctx);
/* Advance ctx past a frame sl_frame_decode accepted against it: a CHALLENGE sets the challenge, any
 * other frame sets recv_seq. Returns 0, or -EINVAL if f is not the frame ctx expects next. */
int sl_frame_ctx_accept(struct sl_frame_ctx *ctx, const struct sl_frame *f);

/* Decode the frame at the start of buf[0..len).
 *  0        a whole valid frame: *out filled, *consumed = out->frame_len (buf may hold more after it).
 *  -EAGAIN  more bytes are needed; nothing consumed. Every strict prefix of a valid frame gives this.
 *  -EBADMSG a bad frame: out->reject says why. The connection should be dropped (framing is lost).
 *  -ENOKEY  an authenticated type but ctx has no key (a caller error; out->reject is NONE).
 *  -EINVAL  a NULL argument or a ctx without a valid role.
 * Checks, in order, each as soon as its bytes are there: magic, type (known, direction, state), flags
 * and reserved, payload_len; then, with the whole frame: tag, frame_seq, payload structure. So a
 * result on a prefix is either -EAGAIN or the same as on the whole buffer. HELLO and HEARTBEAT
 * payloads are carried as bytes; run sl_frame_hello_parse / sl_frame_heartbeat_parse on them.
 * ctx is not modified: call sl_frame_ctx_accept(ctx, out) after a successful decode. */
int sl_frame_decode(const uint8_t *buf, size_t len, const struct sl_frame_ctx *ctx, struct sl_frame *out,
		    size_t *consumed);
/* The same, for the bytes left when the stream has ended: where sl_frame_decode would say -EAGAIN,
 * this says -EBADMSG with TRUNCATED_BODY, and with len == 0 it says -ENODATA (a clean end). */
int sl_frame_decode_eof(const uint8_t *buf, size_t len, const struct sl_frame_ctx *ctx, struct sl_frame *out,
			size_t *consumed);

/* Collector, before the key is known: check the header of the HELLO at the start of buf (it must be
 * one) and pull its sandbox_id and key_id (key_id may be NULL) out of the (not yet
 * authenticated!) payload, so the caller can derive
 * the key, sl_frame_ctx_set_key, and then sl_frame_decode the same bytes, which checks the tag.
 * Returns 0, -EAGAIN (need the whole frame), or -EBADMSG with *reject set (BAD_MAGIC, BAD_TYPE,
 * BAD_FLAGS, OVERSIZE, BAD_PAYLOAD when the JSON is not a valid HELLO). */
int sl_frame_peek_hello(const uint8_t *buf, size_t len, char sandbox_id[SL_FRAME_SANDBOX_ID_LEN + 1],
			char key_id[SL_FRAME_KEY_ID_LEN + 1], enum sl_frame_reject *reject);

/* Bytes sl_frame_encode writes for this type and payload length. */
size_t sl_frame_encoded_len(unsigned type, size_t payload_len);
/* Encode one frame into out[0..outcap): header, payload, tag. The payload is checked as the decoder
 * would (a frame this returns 0 for is never rejected by the peer's decoder for its structure).
 * CHALLENGE: payload must be ctx->challenge (sl_frame_ctx_new_challenge), frame_seq 0, ctx unchanged.
 * Other types: frame_seq = ++ctx->send_seq (only on success). Returns 0, -EINVAL (bad type for this
 * role, bad payload, no key/challenge), -EMSGSIZE (payload too long), -ENOBUFS (outcap too small),
 * -EOVERFLOW (2^32-1 frames sent: reconnect), -ENOMEM/-EIO (OpenSSL). */
int sl_frame_encode(uint8_t type, const uint8_t *payload, size_t len, struct sl_frame_ctx *ctx, uint8_t *out,
		    size_t outcap, size_t *outlen);

/* ---- EVENTS ---- */

struct sl_frame_events_iter {
	const uint8_t *p, *end;
	uint32_t left;
};
/* Iterate a decoded EVENTS frame's lines (views into the decoded buffer, each 1.. bytes, no '\n'). */
void sl_frame_events_begin(const struct sl_frame *f, struct sl_frame_events_iter *it);
bool sl_frame_events_next(struct sl_frame_events_iter *it, const uint8_t **line, size_t *len);

/* A growable EVENTS payload. Zero-initialised or sl_frame_events_init'ed; free with _free. */
struct sl_frame_events_buf {
	uint8_t *buf; /* u32 count (written by _payload) then the entries */
	size_t len, cap;
	uint32_t count;
};
void sl_frame_events_init(struct sl_frame_events_buf *b);
void sl_frame_events_free(struct sl_frame_events_buf *b);
/* Empty it (keeps the memory) for the next batch. */
void sl_frame_events_reset(struct sl_frame_events_buf *b);
/* Append one record line (without its newline). Returns 0; -EINVAL (len 0, or a '\n' in it); -E2BIG
 * (longer than SL_FRAME_EVENT_LINE_MAX: no frame can carry it); -ENOSPC (this batch is full: send it,
 * reset, add again); -ENOMEM. On error the batch is unchanged. */
int sl_frame_events_add(struct sl_frame_events_buf *b, const void *line, size_t len);
/* The payload to pass to sl_frame_encode (NULL with *len 0 for an empty batch, which is not valid). */
const uint8_t *sl_frame_events_payload(struct sl_frame_events_buf *b, size_t *len);

/* ---- ACK, ERROR ---- */

void sl_frame_ack_payload(uint64_t durable_seq, uint8_t out[SL_FRAME_ACK_LEN]);
/* code + msg (valid UTF-8, no NUL, <= 256 bytes) into out (cap >= 2 + msg_len). Returns bytes or -EINVAL. */
int sl_frame_error_payload(uint16_t code, const char *msg, size_t msg_len, uint8_t *out, size_t cap);

/* ---- HELLO ---- */

struct sl_frame_hello {
	char sandbox_id[SL_FRAME_SANDBOX_ID_LEN + 1];
	char key_id[SL_FRAME_KEY_ID_LEN + 1]; /* sl_frame_key_id of the key the HELLO is tagged with */
	/* Identity binding: each a string of 0..256 bytes of valid UTF-8 without NUL. */
	char tenant[SL_FRAME_HELLO_STR_MAX + 1];
	char agent[SL_FRAME_HELLO_STR_MAX + 1];
	char task[SL_FRAME_HELLO_STR_MAX + 1];
	char version[SL_FRAME_HELLO_STR_MAX + 1];
	char credential_ref[SL_FRAME_HELLO_STR_MAX + 1];
	char risk_class[8];			  /* "high", "medium" or "low" */
	char control[SL_FRAME_HELLO_STR_MAX + 1]; /* 1..256 bytes */
	bool resume;
};
/* Validate a HELLO payload strictly: one JSON object with exactly the members sandbox_id, key_id, identity
 * (exactly tenant, agent, task, version, credential_ref), risk_class, control, resume, each once,
 * of the right type and length; no other member anywhere. Returns 0 or -EBADMSG. */
int sl_frame_hello_parse(const uint8_t *p, size_t len, struct sl_frame_hello *out);
/* Build a HELLO payload (compact JSON, NUL-terminated) into out[0..cap). Returns its length without
 * the NUL, -EINVAL (a field sl_frame_hello_parse would refuse) or -ENOBUFS. SL_FRAME_HELLO_MAX bytes
 * always suffice. */
int sl_frame_hello_build(const struct sl_frame_hello *h, char *out, size_t cap);

/* ---- HEARTBEAT ---- */

struct sl_frame_heartbeat {
	uint64_t emitted, recorded, exported, acked, dropped, backlog;
};
/* Validate a HEARTBEAT payload strictly: one JSON object with exactly the six members, each once, each
 * a JSON integer 0..2^63-1. Returns 0 or -EBADMSG. */
int sl_frame_heartbeat_parse(const uint8_t *p, size_t len, struct sl_frame_heartbeat *out);
/* Build a HEARTBEAT payload (compact JSON, NUL-terminated). Returns its length without the NUL,
 * -EINVAL (a counter > 2^63-1) or -ENOBUFS. SL_FRAME_HEARTBEAT_MAX bytes always suffice. */
int sl_frame_heartbeat_build(const struct sl_frame_heartbeat *hb, char *out, size_t cap);
#endif
