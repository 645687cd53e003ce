/* The export channel's frame codec: see frame.h and docs/protocol.md. */
#include "export/frame.h"

#include "common/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define KEY_LABEL "sightline/v1/sandbox-key/"
#define KEY_ID_LABEL "sightline key id v1"

/* ---- little-endian helpers ---- */

static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}
static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}
static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}
static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

/* ---- names ---- */

static const char *const reject_names[SL_FRAME_REJECT_COUNT_] = {
    [SL_FRAME_REJECT_NONE] = "none",
    [SL_FRAME_REJECT_BAD_MAGIC] = "bad_magic",
    [SL_FRAME_REJECT_BAD_TYPE] = "bad_type",
    [SL_FRAME_REJECT_BAD_FLAGS] = "bad_flags",
    [SL_FRAME_REJECT_OVERSIZE] = "oversize",
    [SL_FRAME_REJECT_TRUNCATED_BODY] = "truncated_body",
    [SL_FRAME_REJECT_BAD_TAG] = "bad_tag",
    [SL_FRAME_REJECT_REPLAY] = "replay",
    [SL_FRAME_REJECT_BAD_PAYLOAD] = "bad_payload",
    [SL_FRAME_REJECT_WRONG_KEY] = "wrong_key",
    [SL_FRAME_REJECT_OTHER_SANDBOX_KEY] = "other_sandbox_key",
};

const char *sl_frame_reject_name(enum sl_frame_reject r)
{
	if ((unsigned)r >= SL_FRAME_REJECT_COUNT_)
		return "unknown";
	return reject_names[r];
}

const char *sl_frame_type_name(unsigned type)
{
	switch (type) {
	case SL_FRAME_CHALLENGE:
		return "challenge";
	case SL_FRAME_HELLO:
		return "hello";
	case SL_FRAME_EVENTS:
		return "events";
	case SL_FRAME_HEARTBEAT:
		return "heartbeat";
	case SL_FRAME_ACK:
		return "ack";
	case SL_FRAME_ERROR:
		return "error";
	}
	return "unknown";
}

/* ---- HMAC-SHA256 over up to three pieces ---- */

static EVP_MAC *hmac_alg;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;
static void hmac_fetch(void)
{
	hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

struct piece {
	const void *p;
	size_t n;
};

static int hmac_sha256(const uint8_t *key, size_t key_len, const struct piece *pieces, size_t npieces,
		       uint8_t out[32])
{
	pthread_once(&hmac_once, hmac_fetch);
	if (!hmac_alg)
		return -EIO;
	EVP_MAC_CTX *c = EVP_MAC_CTX_new(hmac_alg);
	if (!c)
		return -ENOMEM;
	char digest[] = "SHA256";
	OSSL_PARAM params[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
	    OSSL_PARAM_construct_end(),
	};
	int r = -EIO;
	size_t outl = 0;
	if (EVP_MAC_init(c, key, key_len, params) != 1)
		goto out;
	for (size_t i = 0; i < npieces; i++)
		if (pieces[i].n && EVP_MAC_update(c, pieces[i].p, pieces[i].n) != 1)
			goto out;
	if (EVP_MAC_final(c, out, &outl, 32) != 1 || outl != 32)
		goto out;
	r = 0;
out:
	EVP_MAC_CTX_free(c);
	return r;
}

static int frame_tag(const uint8_t key[SL_FRAME_KEY_LEN], const uint8_t challenge[SL_FRAME_CHALLENGE_LEN],
		     const uint8_t *hdr, const uint8_t *payload, size_t len, uint8_t tag[SL_FRAME_TAG_LEN])
{
	const struct piece pieces[] = {
	    {challenge, SL_FRAME_CHALLENGE_LEN},
	    {hdr, SL_FRAME_HDR_LEN},
	    {payload, len},
	};
	return hmac_sha256(key, SL_FRAME_KEY_LEN, pieces, SL_ARRAY_LEN(pieces), tag);
}

/* ---- keys and contexts ---- */

bool sl_frame_sandbox_id_valid(const char *s)
{
	if (!s)
		return false;
	for (size_t i = 0; i < SL_FRAME_SANDBOX_ID_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[SL_FRAME_SANDBOX_ID_LEN] == '\0';
}

int sl_frame_derive_key(const uint8_t master[SL_FRAME_MASTER_LEN], const char *sandbox_id,
			uint8_t key[SL_FRAME_KEY_LEN])
{
	if (!master || !key || !sl_frame_sandbox_id_valid(sandbox_id))
		return -EINVAL;
	const struct piece pieces[] = {
	    {KEY_LABEL, sizeof(KEY_LABEL) - 1},
	    {sandbox_id, SL_FRAME_SANDBOX_ID_LEN},
	};
	return hmac_sha256(master, SL_FRAME_MASTER_LEN, pieces, SL_ARRAY_LEN(pieces), key);
}

static bool key_id_valid(const char *s)
{
	for (size_t i = 0; i < SL_FRAME_KEY_ID_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[SL_FRAME_KEY_ID_LEN] == '\0';
}

int sl_frame_key_id(const uint8_t key[SL_FRAME_KEY_LEN], char out[SL_FRAME_KEY_ID_LEN + 1])
{
	if (!key || !out)
		return -EINVAL;
	/* A MAC of a fixed label under K: equal for equal keys, and says nothing about K. */
	const struct piece pieces[] = {{KEY_ID_LABEL, sizeof(KEY_ID_LABEL) - 1}};
	uint8_t mac[32];
	int r = hmac_sha256(key, SL_FRAME_KEY_LEN, pieces, SL_ARRAY_LEN(pieces), mac);
	if (r < 0)
		return r;
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < SL_FRAME_KEY_ID_LEN / 2; i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[SL_FRAME_KEY_ID_LEN] = '\0';
	return 0;
}

enum sl_frame_reject sl_frame_hello_tag_verdict(const uint8_t key[SL_FRAME_KEY_LEN], const char *claimed_key_id)
{
	char want[SL_FRAME_KEY_ID_LEN + 1];
	if (!key || !claimed_key_id || sl_frame_key_id(key, want) < 0)
		return SL_FRAME_REJECT_BAD_TAG;
	/* Public values (a fingerprint sent in the clear): no constant-time compare needed. */
	return strcmp(want, claimed_key_id) == 0 ? SL_FRAME_REJECT_BAD_TAG : SL_FRAME_REJECT_WRONG_KEY;
}

int sl_frame_ctx_init(struct sl_frame_ctx *ctx, enum sl_frame_role role, const uint8_t key[SL_FRAME_KEY_LEN])
{
	if (!ctx || (role != SL_FRAME_ROLE_COLLECTOR && role != SL_FRAME_ROLE_SUPERVISOR))
		return -EINVAL;
	memset(ctx, 0, sizeof(*ctx));
	ctx->role = role;
	if (key)
		sl_frame_ctx_set_key(ctx, key);
	return 0;
}

void sl_frame_ctx_set_key(struct sl_frame_ctx *ctx, const uint8_t key[SL_FRAME_KEY_LEN])
{
	memcpy(ctx->key, key, SL_FRAME_KEY_LEN);
	ctx->have_key = true;
}

int sl_frame_ctx_new_challenge(struct sl_frame_ctx *ctx)
{
	if (!ctx || ctx->role != SL_FRAME_ROLE_COLLECTOR)
		return -EINVAL;
	size_t got = 0;
	while (got < SL_FRAME_CHALLENGE_LEN) {
		ssize_t n = getrandom(ctx->challenge + got, SL_FRAME_CHALLENGE_LEN - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	ctx->have_challenge = true;
	return 0;
}

void sl_frame_ctx_wipe(struct sl_frame_ctx *ctx)
{
	if (ctx)
		OPENSSL_cleanse(ctx, sizeof(*ctx));
}

int sl_frame_ctx_accept(struct sl_frame_ctx *ctx, const struct sl_frame *f)
{
	if (!ctx || !f || f->reject != SL_FRAME_REJECT_NONE)
		return -EINVAL;
	if (f->type == SL_FRAME_CHALLENGE) {
		if (ctx->role != SL_FRAME_ROLE_SUPERVISOR || ctx->have_challenge || !f->challenge)
			return -EINVAL;
		memcpy(ctx->challenge, f->challenge, SL_FRAME_CHALLENGE_LEN);
		ctx->have_challenge = true;
		return 0;
	}
	if (ctx->recv_seq == UINT32_MAX || f->seq != ctx->recv_seq + 1)
		return -EINVAL;
	ctx->recv_seq = f->seq;
	return 0;
}

/* ---- UTF-8 ---- */

/* Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF). If no_nul, NUL is refused. */
static bool utf8_valid(const uint8_t *s, size_t n, bool no_nul)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		if (c < 0x80) {
			if (c == 0 && no_nul)
				return false;
			i++;
			continue;
		}
		size_t need;
		uint32_t cp, min;
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1, cp = c & 0x1f, min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2, cp = c & 0x0f, min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (n - i - 1 < need)
			return false;
		for (size_t k = 1; k <= need; k++) {
			uint8_t cc = s[i + k];
			if ((cc & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (cc & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

/* ---- payload structure (shared by the decoder and the encoder) ---- */

static bool role_may_send(enum sl_frame_role role, unsigned type)
{
	switch (type) {
	case SL_FRAME_CHALLENGE:
	case SL_FRAME_ACK:
		return role == SL_FRAME_ROLE_COLLECTOR;
	case SL_FRAME_HELLO:
	case SL_FRAME_EVENTS:
	case SL_FRAME_HEARTBEAT:
		return role == SL_FRAME_ROLE_SUPERVISOR;
	case SL_FRAME_ERROR:
		return role == SL_FRAME_ROLE_COLLECTOR || role == SL_FRAME_ROLE_SUPERVISOR;
	}
	return false;
}

static enum sl_frame_role peer_of(enum sl_frame_role role)
{
	return role == SL_FRAME_ROLE_COLLECTOR ? SL_FRAME_ROLE_SUPERVISOR : SL_FRAME_ROLE_COLLECTOR;
}

/* Is a frame of this type, received by ctx's end, allowed now? The supervisor's first frame is the
 * collector's CHALLENGE and there is only one; the collector's first authenticated frame is the HELLO
 * and there is only one. */
static bool recv_type_ok(const struct sl_frame_ctx *ctx, unsigned type)
{
	if (!role_may_send(peer_of(ctx->role), type))
		return false;
	if (ctx->role == SL_FRAME_ROLE_SUPERVISOR)
		return (type == SL_FRAME_CHALLENGE) == !ctx->have_challenge;
	return (type == SL_FRAME_HELLO) == (ctx->recv_seq == 0);
}

/* Check a payload's type-specific structure; on success fill f's type-specific views. f may be NULL. */
static bool payload_valid(unsigned type, const uint8_t *p, size_t len, struct sl_frame *f)
{
	switch (type) {
	case SL_FRAME_CHALLENGE:
		if (len != SL_FRAME_CHALLENGE_LEN)
			return false;
		if (f)
			f->challenge = p;
		return true;
	case SL_FRAME_HELLO:
	case SL_FRAME_HEARTBEAT:
		return true; /* JSON: sl_frame_hello_parse / sl_frame_heartbeat_parse */
	case SL_FRAME_EVENTS: {
		if (len < 4)
			return false;
		uint32_t count = get_le32(p);
		if (count < 1 || count > SL_FRAME_EVENTS_MAX)
			return false;
		size_t off = 4;
		for (uint32_t i = 0; i < count; i++) {
			if (len - off < 4)
				return false;
			uint32_t l = get_le32(p + off);
			off += 4;
			if (l < 1 || l > SL_FRAME_MAX_PAYLOAD || l > len - off)
				return false;
			if (memchr(p + off, '\n', l))
				return false;
			off += l;
		}
		if (off != len)
			return false;
		if (f)
			f->event_count = count;
		return true;
	}
	case SL_FRAME_ACK:
		if (len != SL_FRAME_ACK_LEN)
			return false;
		if (f)
			f->ack_seq = get_le64(p);
		return true;
	case SL_FRAME_ERROR:
		if (len < 2 || len - 2 > SL_FRAME_ERROR_MSG_MAX || !utf8_valid(p + 2, len - 2, true))
			return false;
		if (f) {
			f->error_code = get_le16(p);
			f->error_msg = (const char *)p + 2;
			f->error_msg_len = len - 2;
		}
		return true;
	}
	return false;
}

/* ---- decoder ---- */

static int reject(struct sl_frame *out, enum sl_frame_reject r)
{
	out->reject = r;
	return -EBADMSG;
}

/* Header checks on as many header bytes as there are (a prefix gives the same verdict as the whole).
 * ctx may be NULL (peek: the type must be HELLO). Returns 0 (no fault so far) or -EBADMSG. */
static int check_header(const uint8_t *buf, size_t len, const struct sl_frame_ctx *ctx, struct sl_frame *out)
{
	if (len >= 4 && get_le32(buf) != SL_FRAME_MAGIC)
		return reject(out, SL_FRAME_REJECT_BAD_MAGIC);
	if (len >= 5 && (ctx ? !recv_type_ok(ctx, buf[4]) : buf[4] != SL_FRAME_HELLO))
		return reject(out, SL_FRAME_REJECT_BAD_TYPE);
	if (len >= 6 && buf[5] != 0)
		return reject(out, SL_FRAME_REJECT_BAD_FLAGS);
	if ((len >= 7 && buf[6] != 0) || (len >= 8 && buf[7] != 0))
		return reject(out, SL_FRAME_REJECT_BAD_FLAGS);
	if (len >= 12 && get_le32(buf + 8) > SL_FRAME_MAX_PAYLOAD)
		return reject(out, SL_FRAME_REJECT_OVERSIZE);
	return 0;
}

size_t sl_frame_encoded_len(unsigned type, size_t payload_len)
{
	return SL_FRAME_HDR_LEN + payload_len + (type == SL_FRAME_CHALLENGE ? 0 : SL_FRAME_TAG_LEN);
}

int sl_frame_decode(const uint8_t *buf, size_t len, const struct sl_frame_ctx *ctx, struct sl_frame *out,
		    size_t *consumed)
{
	if (!out || !consumed || !ctx || (!buf && len) ||
	    (ctx->role != SL_FRAME_ROLE_COLLECTOR && ctx->role != SL_FRAME_ROLE_SUPERVISOR))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	*consumed = 0;
	int r = check_header(buf, len, ctx, out);
	if (r < 0)
		return r;
	if (len < SL_FRAME_HDR_LEN)
		return -EAGAIN;
	uint8_t type = buf[4];
	uint32_t plen = get_le32(buf + 8);
	uint32_t seq = get_le32(buf + 12);
	size_t flen = sl_frame_encoded_len(type, plen);
	if (len < flen)
		return -EAGAIN;
	const uint8_t *payload = buf + SL_FRAME_HDR_LEN;

	if (type == SL_FRAME_CHALLENGE) {
		if (seq != 0)
			return reject(out, SL_FRAME_REJECT_REPLAY);
	} else {
		if (!ctx->have_key)
			return -ENOKEY;
		if (!ctx->have_challenge) /* a collector that never drew one */
			return -EINVAL;
		uint8_t tag[SL_FRAME_TAG_LEN];
		r = frame_tag(ctx->key, ctx->challenge, buf, payload, plen, tag);
		if (r < 0)
			return r;
		bool ok = CRYPTO_memcmp(tag, payload + plen, SL_FRAME_TAG_LEN) == 0;
		OPENSSL_cleanse(tag, sizeof(tag));
		if (!ok)
			return reject(out, SL_FRAME_REJECT_BAD_TAG);
		if (ctx->recv_seq == UINT32_MAX || seq != ctx->recv_seq + 1)
			return reject(out, SL_FRAME_REJECT_REPLAY);
	}
	if (!payload_valid(type, payload, plen, out)) {
		/* keep the views of a rejected frame empty */
		memset(out, 0, sizeof(*out));
		return reject(out, SL_FRAME_REJECT_BAD_PAYLOAD);
	}
	out->type = type;
	out->seq = seq;
	out->frame_len = flen;
	out->payload = payload;
	out->payload_len = plen;
	*consumed = flen;
	return 0;
}

int sl_frame_decode_eof(const uint8_t *buf, size_t len, const struct sl_frame_ctx *ctx, struct sl_frame *out,
			size_t *consumed)
{
	int r = sl_frame_decode(buf, len, ctx, out, consumed);
	if (r != -EAGAIN)
		return r;
	if (len == 0)
		return -ENODATA;
	return reject(out, SL_FRAME_REJECT_TRUNCATED_BODY);
}

int sl_frame_peek_hello(const uint8_t *buf, size_t len, char sandbox_id[SL_FRAME_SANDBOX_ID_LEN + 1],
			char key_id[SL_FRAME_KEY_ID_LEN + 1], enum sl_frame_reject *rej)
{
	if (!sandbox_id || !rej || (!buf && len))
		return -EINVAL;
	struct sl_frame f;
	memset(&f, 0, sizeof(f));
	*rej = SL_FRAME_REJECT_NONE;
	int r = check_header(buf, len, NULL, &f);
	if (r < 0) {
		*rej = f.reject;
		return r;
	}
	if (len < SL_FRAME_HDR_LEN)
		return -EAGAIN;
	uint32_t plen = get_le32(buf + 8);
	if (len < sl_frame_encoded_len(SL_FRAME_HELLO, plen))
		return -EAGAIN;
	struct sl_frame_hello *h = malloc(sizeof(*h));
	if (!h)
		return -ENOMEM;
	r = sl_frame_hello_parse(buf + SL_FRAME_HDR_LEN, plen, h);
	if (r == 0) {
		memcpy(sandbox_id, h->sandbox_id, sizeof(h->sandbox_id));
		if (key_id)
			memcpy(key_id, h->key_id, sizeof(h->key_id));
	}
	free(h);
	if (r < 0) {
		*rej = SL_FRAME_REJECT_BAD_PAYLOAD;
		return -EBADMSG;
	}
	return 0;
}

/* ---- encoder ---- */

static bool json_payload_valid(unsigned type, const uint8_t *p, size_t len);

int sl_frame_encode(uint8_t type, const uint8_t *payload, size_t len, struct sl_frame_ctx *ctx, uint8_t *out,
		    size_t outcap, size_t *outlen)
{
	if (!ctx || !out || !outlen || (!payload && len) || !role_may_send(ctx->role, type))
		return -EINVAL;
	if (len > SL_FRAME_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (!ctx->have_challenge)
		return -EINVAL;
	if (type == SL_FRAME_CHALLENGE) {
		if (len != SL_FRAME_CHALLENGE_LEN || memcmp(payload, ctx->challenge, SL_FRAME_CHALLENGE_LEN))
			return -EINVAL;
	} else {
		if (!ctx->have_key)
			return -EINVAL;
		if (ctx->send_seq == UINT32_MAX)
			return -EOVERFLOW;
		if (!payload_valid(type, payload, len, NULL) || !json_payload_valid(type, payload, len))
			return -EINVAL;
	}
	size_t flen = sl_frame_encoded_len(type, len);
	if (outcap < flen)
		return -ENOBUFS;
	uint32_t seq = type == SL_FRAME_CHALLENGE ? 0 : ctx->send_seq + 1;
	if (len)
		memmove(out + SL_FRAME_HDR_LEN, payload, len); /* the payload may sit in out already */
	put_le32(out, SL_FRAME_MAGIC);
	out[4] = type;
	out[5] = 0;
	put_le16(out + 6, 0);
	put_le32(out + 8, (uint32_t)len);
	put_le32(out + 12, seq);
	if (type != SL_FRAME_CHALLENGE) {
		int r = frame_tag(ctx->key, ctx->challenge, out, out + SL_FRAME_HDR_LEN, len,
				  out + SL_FRAME_HDR_LEN + len);
		if (r < 0)
			return r;
		ctx->send_seq = seq;
	}
	*outlen = flen;
	return 0;
}

/* ---- EVENTS ---- */

void sl_frame_events_begin(const struct sl_frame *f, struct sl_frame_events_iter *it)
{
	if (!f || f->type != SL_FRAME_EVENTS || f->reject != SL_FRAME_REJECT_NONE || !f->payload) {
		it->p = it->end = NULL;
		it->left = 0;
		return;
	}
	it->p = f->payload + 4;
	it->end = f->payload + f->payload_len;
	it->left = f->event_count;
}

bool sl_frame_events_next(struct sl_frame_events_iter *it, const uint8_t **line, size_t *len)
{
	/* The decoder checked the structure; still never step past the end. */
	if (!it->left || it->end - it->p < 4)
		return false;
	uint32_t l = get_le32(it->p);
	if ((size_t)(it->end - it->p - 4) < l)
		return false;
	*line = it->p + 4;
	*len = l;
	it->p += 4 + (size_t)l;
	it->left--;
	return true;
}

void sl_frame_events_init(struct sl_frame_events_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void sl_frame_events_free(struct sl_frame_events_buf *b)
{
	if (!b)
		return;
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

void sl_frame_events_reset(struct sl_frame_events_buf *b)
{
	b->len = 0;
	b->count = 0;
}

int sl_frame_events_add(struct sl_frame_events_buf *b, const void *line, size_t len)
{
	if (!b || !line || len == 0 || memchr(line, '\n', len))
		return -EINVAL;
	if (len > SL_FRAME_EVENT_LINE_MAX)
		return -E2BIG;
	size_t cur = b->len ? b->len : 4;
	if (b->count >= SL_FRAME_EVENTS_MAX || len + 4 > SL_FRAME_MAX_PAYLOAD - cur)
		return -ENOSPC;
	size_t need = cur + 4 + len;
	if (need > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < need)
			cap *= 2;
		if (cap > SL_FRAME_MAX_PAYLOAD)
			cap = SL_FRAME_MAX_PAYLOAD;
		uint8_t *nb = realloc(b->buf, cap);
		if (!nb)
			return -ENOMEM;
		b->buf = nb;
		b->cap = cap;
	}
	put_le32(b->buf + cur, (uint32_t)len);
	memcpy(b->buf + cur + 4, line, len);
	b->len = need;
	b->count++;
	return 0;
}

const uint8_t *sl_frame_events_payload(struct sl_frame_events_buf *b, size_t *len)
{
	if (!b->count) {
		*len = 0;
		return NULL;
	}
	put_le32(b->buf, b->count);
	*len = b->len;
	return b->buf;
}

/* ---- ACK, ERROR ---- */

void sl_frame_ack_payload(uint64_t durable_seq, uint8_t out[SL_FRAME_ACK_LEN])
{
	put_le64(out, durable_seq);
}

int sl_frame_error_payload(uint16_t code, const char *msg, size_t msg_len, uint8_t *out, size_t cap)
{
	if ((!msg && msg_len) || !out || msg_len > SL_FRAME_ERROR_MSG_MAX || cap < 2 + msg_len ||
	    !utf8_valid((const uint8_t *)msg, msg_len, true))
		return -EINVAL;
	put_le16(out, code);
	if (msg_len)
		memcpy(out + 2, msg, msg_len);
	return (int)(2 + msg_len);
}

/* ---- strict JSON objects (HELLO, HEARTBEAT) ---- */

/* json-c, even with JSON_TOKENER_STRICT, keeps the last of duplicate keys, takes 'single quoted'
 * keys, raw control bytes in strings, overlong UTF-8, "-0", "00" and NaN. So before json-c parses a
 * payload, scan it: valid UTF-8 without NUL, no control byte inside a string, nothing quoted with ',
 * numbers as plain digits, and count the members (one ':' each, outside strings) at nesting depth 1
 * and 2. After the parse, the parsed objects must have as many members as the text has: no
 * duplicates. */
static bool ascii_alnum(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int json_prescan(const uint8_t *p, size_t len, size_t members[2])
{
	if (!utf8_valid(p, len, true))
		return -EBADMSG;
	members[0] = members[1] = 0;
	size_t depth = 0;
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		uint8_t c = p[i];
		if (in_str) {
			if (c < 0x20)
				return -EBADMSG;
			if (c == '\\')
				i++; /* the escaped byte cannot end the string; json-c checks the escape */
			else if (c == '"')
				in_str = false;
			continue;
		}
		switch (c) {
		case '"':
			in_str = true;
			break;
		case '{':
		case '[':
			if (++depth > 2)
				return -EBADMSG;
			break;
		case '}':
		case ']':
			if (depth == 0)
				return -EBADMSG;
			depth--;
			break;
		case ':':
			if (depth == 0)
				return -EBADMSG;
			members[depth - 1]++;
			break;
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			break;
		case ',':
			break;
		default:
			/* literals and numbers: ASCII letters and digits only. No sign, fraction or exponent
			 * sign (these payloads hold non-negative integers at most; json-c takes "-0"), and no
			 * leading zero (json-c takes "00"). */
			if (c >= '0' && c <= '9') {
				bool token_start = i == 0 || !ascii_alnum(p[i - 1]);
				if (c == '0' && token_start && i + 1 < len && ascii_alnum(p[i + 1]))
					return -EBADMSG;
			} else if (!ascii_alnum(c)) {
				return -EBADMSG;
			}
		}
	}
	return in_str || depth ? -EBADMSG : 0;
}

/* Parse p[0..len) (prescanned) as one JSON object. Returns the object or NULL. */
static struct json_object *json_parse_object(const uint8_t *p, size_t len, size_t max, size_t members[2])
{
	if (!p || len == 0 || len > max || json_prescan(p, len, members) < 0)
		return NULL;
	struct json_tokener *tok = json_tokener_new_ex(3); /* json-c counts the top object as 2 */
	if (!tok)
		return NULL;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	struct json_object *o = json_tokener_parse_ex(tok, (const char *)p, (int)len);
	if (o && (json_tokener_get_error(tok) != json_tokener_success ||
		  json_tokener_get_parse_end(tok) != len || !json_object_is_type(o, json_type_object))) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

/* Copy string member key of o into out (cap bytes with the NUL): a JSON string of min..max bytes,
 * valid UTF-8, no NUL. */
static bool get_str(struct json_object *o, const char *key, size_t min, size_t max, char *out, size_t cap)
{
	struct json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return false;
	int n = json_object_get_string_len(v);
	const char *s = json_object_get_string(v);
	if (n < 0 || (size_t)n < min || (size_t)n > max || (size_t)n >= cap ||
	    !utf8_valid((const uint8_t *)s, (size_t)n, true))
		return false;
	memcpy(out, s, (size_t)n);
	out[n] = '\0';
	return true;
}

static const char *const hello_keys[] = {"sandbox_id", "key_id", "identity", "risk_class", "control", "resume"};
static const char *const identity_keys[] = {"tenant", "agent", "task", "version", "credential_ref"};

static bool risk_class_valid(const char *s)
{
	return !strcmp(s, "high") || !strcmp(s, "medium") || !strcmp(s, "low");
}

int sl_frame_hello_parse(const uint8_t *p, size_t len, struct sl_frame_hello *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	size_t members[2];
	struct json_object *o = json_parse_object(p, len, SL_FRAME_HELLO_MAX, members);
	if (!o)
		return -EBADMSG;
	int r = -EBADMSG;
	struct json_object *id, *resume;
	/* Exact key set: each known key present, and as many members as known keys, in the object
	 * and in the text (so neither an unknown nor a duplicate key gets through). */
	if (members[0] != SL_ARRAY_LEN(hello_keys) || members[1] != SL_ARRAY_LEN(identity_keys) ||
	    json_object_object_length(o) != (int)SL_ARRAY_LEN(hello_keys))
		goto out;
	for (size_t i = 0; i < SL_ARRAY_LEN(hello_keys); i++)
		if (!json_object_object_get_ex(o, hello_keys[i], NULL))
			goto out;
	if (!get_str(o, "sandbox_id", SL_FRAME_SANDBOX_ID_LEN, SL_FRAME_SANDBOX_ID_LEN, out->sandbox_id,
		     sizeof(out->sandbox_id)) ||
	    !sl_frame_sandbox_id_valid(out->sandbox_id))
		goto out;
	if (!get_str(o, "key_id", SL_FRAME_KEY_ID_LEN, SL_FRAME_KEY_ID_LEN, out->key_id, sizeof(out->key_id)) ||
	    !key_id_valid(out->key_id))
		goto out;
	if (!json_object_object_get_ex(o, "identity", &id) || !json_object_is_type(id, json_type_object) ||
	    json_object_object_length(id) != (int)SL_ARRAY_LEN(identity_keys))
		goto out;
	char *const idf[] = {out->tenant, out->agent, out->task, out->version, out->credential_ref};
	for (size_t i = 0; i < SL_ARRAY_LEN(identity_keys); i++)
		if (!get_str(id, identity_keys[i], 0, SL_FRAME_HELLO_STR_MAX, idf[i],
			     SL_FRAME_HELLO_STR_MAX + 1))
			goto out;
	if (!get_str(o, "risk_class", 1, sizeof(out->risk_class) - 1, out->risk_class,
		     sizeof(out->risk_class)) ||
	    !risk_class_valid(out->risk_class))
		goto out;
	if (!get_str(o, "control", 1, SL_FRAME_HELLO_STR_MAX, out->control, sizeof(out->control)))
		goto out;
	if (!json_object_object_get_ex(o, "resume", &resume) ||
	    !json_object_is_type(resume, json_type_boolean))
		goto out;
	out->resume = json_object_get_boolean(resume);
	r = 0;
out:
	json_object_put(o);
	if (r < 0)
		memset(out, 0, sizeof(*out));
	return r;
}

static const char *const heartbeat_keys[] = {"emitted", "recorded", "exported",
					     "acked",	"dropped",  "backlog"};

int sl_frame_heartbeat_parse(const uint8_t *p, size_t len, struct sl_frame_heartbeat *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	size_t members[2];
	struct json_object *o = json_parse_object(p, len, SL_FRAME_HEARTBEAT_MAX, members);
	if (!o)
		return -EBADMSG;
	int r = -EBADMSG;
	uint64_t *const f[] = {&out->emitted, &out->recorded, &out->exported,
			       &out->acked,   &out->dropped,  &out->backlog};
	if (members[0] != SL_ARRAY_LEN(heartbeat_keys) || members[1] != 0 ||
	    json_object_object_length(o) != (int)SL_ARRAY_LEN(heartbeat_keys))
		goto out;
	for (size_t i = 0; i < SL_ARRAY_LEN(heartbeat_keys); i++) {
		struct json_object *v;
		if (!json_object_object_get_ex(o, heartbeat_keys[i], &v) ||
		    !json_object_is_type(v, json_type_int))
			goto out;
		/* json-c clamps out-of-range integers; refuse anything at or near the clamps. */
		int64_t s = json_object_get_int64(v);
		uint64_t u = json_object_get_uint64(v);
		if (s < 0 || u > (uint64_t)INT64_MAX || (uint64_t)s != u)
			goto out;
		*f[i] = u;
	}
	r = 0;
out:
	json_object_put(o);
	if (r < 0)
		memset(out, 0, sizeof(*out));
	return r;
}

static bool json_payload_valid(unsigned type, const uint8_t *p, size_t len)
{
	if (type == SL_FRAME_HELLO) {
		struct sl_frame_hello *h = malloc(sizeof(*h));
		if (!h)
			return false;
		bool ok = sl_frame_hello_parse(p, len, h) == 0;
		free(h);
		return ok;
	}
	if (type == SL_FRAME_HEARTBEAT) {
		struct sl_frame_heartbeat hb;
		return sl_frame_heartbeat_parse(p, len, &hb) == 0;
	}
	return true;
}

/* Append s as a JSON string (quoted, escaped) to out at *pos. s must be valid UTF-8 without NUL. */
static bool put_json_str(char *out, size_t cap, size_t *pos, const char *s)
{
	size_t i = *pos;
	if (i >= cap)
		return false;
	out[i++] = '"';
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		char esc[7];
		size_t n;
		if (*c == '"' || *c == '\\') {
			esc[0] = '\\', esc[1] = (char)*c, n = 2;
		} else if (*c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", *c);
			n = 6;
		} else {
			esc[0] = (char)*c, n = 1;
		}
		if (cap - i < n)
			return false;
		memcpy(out + i, esc, n);
		i += n;
	}
	if (i >= cap)
		return false;
	out[i++] = '"';
	*pos = i;
	return true;
}

static bool put_raw(char *out, size_t cap, size_t *pos, const char *s)
{
	size_t n = strlen(s);
	if (cap - *pos < n)
		return false;
	memcpy(out + *pos, s, n);
	*pos += n;
	return true;
}

static bool hello_str_ok(const char *s, size_t min, size_t max)
{
	size_t n = strnlen(s, max + 1);
	return n >= min && n <= max && utf8_valid((const uint8_t *)s, n, true);
}

int sl_frame_hello_build(const struct sl_frame_hello *h, char *out, size_t cap)
{
	if (!h || !out || !sl_frame_sandbox_id_valid(h->sandbox_id) || !key_id_valid(h->key_id) ||
	    !hello_str_ok(h->risk_class, 1, sizeof(h->risk_class) - 1) || !risk_class_valid(h->risk_class) ||
	    !hello_str_ok(h->control, 1, SL_FRAME_HELLO_STR_MAX))
		return -EINVAL;
	const char *const idf[] = {h->tenant, h->agent, h->task, h->version, h->credential_ref};
	for (size_t i = 0; i < SL_ARRAY_LEN(idf); i++)
		if (!hello_str_ok(idf[i], 0, SL_FRAME_HELLO_STR_MAX))
			return -EINVAL;
	size_t pos = 0;
	bool ok = put_raw(out, cap, &pos, "{\"sandbox_id\":") &&
		  put_json_str(out, cap, &pos, h->sandbox_id) && put_raw(out, cap, &pos, ",\"key_id\":") &&
		  put_json_str(out, cap, &pos, h->key_id) && put_raw(out, cap, &pos, ",\"identity\":{");
	for (size_t i = 0; ok && i < SL_ARRAY_LEN(idf); i++)
		ok = put_raw(out, cap, &pos, i ? ",\"" : "\"") && put_raw(out, cap, &pos, identity_keys[i]) &&
		     put_raw(out, cap, &pos, "\":") && put_json_str(out, cap, &pos, idf[i]);
	ok = ok && put_raw(out, cap, &pos, "},\"risk_class\":") &&
	     put_json_str(out, cap, &pos, h->risk_class) && put_raw(out, cap, &pos, ",\"control\":") &&
	     put_json_str(out, cap, &pos, h->control) &&
	     put_raw(out, cap, &pos, h->resume ? ",\"resume\":true}" : ",\"resume\":false}");
	if (!ok || pos >= cap || pos > INT32_MAX)
		return -ENOBUFS;
	out[pos] = '\0';
	return (int)pos;
}

int sl_frame_heartbeat_build(const struct sl_frame_heartbeat *hb, char *out, size_t cap)
{
	if (!hb || !out)
		return -EINVAL;
	const uint64_t v[] = {hb->emitted, hb->recorded, hb->exported, hb->acked, hb->dropped, hb->backlog};
	for (size_t i = 0; i < SL_ARRAY_LEN(v); i++)
		if (v[i] > (uint64_t)INT64_MAX)
			return -EINVAL;
	int n =
	    snprintf(out, cap,
		     "{\"emitted\":%llu,\"recorded\":%llu,\"exported\":%llu,\"acked\":%llu,\"dropped\":%llu,"
		     "\"backlog\":%llu}",
		     (unsigned long long)v[0], (unsigned long long)v[1], (unsigned long long)v[2],
		     (unsigned long long)v[3], (unsigned long long)v[4], (unsigned long long)v[5]);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= cap)
		return -ENOBUFS;
	return n;
}
