/* Unit test of the export frame codec (src/export/frame.c, docs/protocol.md): key derivation against
 * an independent computation, a wire vector, round trips of every type, and every reject reason
 * produced on purpose. Frames for the reject cases are crafted here with OpenSSL's HMAC() directly,
 * not with the codec's encoder, so the wire format is checked from both sides. */
#include <inttypes.h>
#include <openssl/hmac.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "export/frame.h"
#include "check.h"

/* decode must fail with -EBADMSG and this reason */
#define CHECK_REJECT(rc, frame, want)                                                                        \
	do {                                                                                                 \
		int rc_ = (rc);                                                                              \
		if (rc_ != -EBADMSG || (frame).reject != (want))                                             \
			die("%s:%d: rc %d reject %s, want -EBADMSG %s", __FILE__, __LINE__, rc_,             \
			    sl_frame_reject_name((frame).reject), sl_frame_reject_name(want));               \
	} while (0)

static void unhex(const char *hex, uint8_t *out, size_t n)
{
	CHECK(strlen(hex) == 2 * n);
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		CHECK(sscanf(hex + 2 * i, "%2x", &v) == 1);
		out[i] = (uint8_t)v;
	}
}

/* ---- fixtures ---- */

#define SB_A "0123456789abcdef0123456789abcdef"
#define SB_B "fedcba9876543210fedcba9876543210"
#define KID_A "2fe0ffa1bfbc13c4" /* sl_frame_key_id of key_a, see test_wire_vector */
#define KID_B "74cf68db66e9daa7"

static uint8_t master[32]; /* 00 01 02 .. 1f */
static uint8_t key_a[32], key_b[32];

/* A connected pair: the collector drew a challenge, the supervisor accepted it. */
struct pair {
	struct sl_frame_ctx col, sup;
};

static void pair_init(struct pair *p, const uint8_t *col_key, const uint8_t *sup_key)
{
	uint8_t buf[64];
	size_t n, used;
	struct sl_frame f;
	CHECK_EQ(sl_frame_ctx_init(&p->col, SL_FRAME_ROLE_COLLECTOR, col_key), 0);
	CHECK_EQ(sl_frame_ctx_init(&p->sup, SL_FRAME_ROLE_SUPERVISOR, sup_key), 0);
	CHECK_EQ(sl_frame_ctx_new_challenge(&p->col), 0);
	CHECK_EQ(sl_frame_encode(SL_FRAME_CHALLENGE, p->col.challenge, 16, &p->col, buf, sizeof(buf), &n), 0);
	CHECK_EQ(n, 32);
	CHECK_EQ(sl_frame_decode(buf, n, &p->sup, &f, &used), 0);
	CHECK_EQ(used, n);
	CHECK_EQ(f.type, SL_FRAME_CHALLENGE);
	CHECK_EQ(sl_frame_ctx_accept(&p->sup, &f), 0);
	CHECK(!memcmp(p->sup.challenge, p->col.challenge, 16));
	CHECK_EQ(p->col.send_seq, 0);
}

static const struct sl_frame_hello hello_a = {
    .sandbox_id = SB_A,
    .key_id = KID_A,
    .tenant = "tenant-1",
    .agent = "agent \"quoted\"\n\\ é",
    .task = "task-9",
    .version = "v1.2.3",
    .credential_ref = "",
    .risk_class = "high",
    .control = "/run/sightline/" SB_A ".ctl",
    .resume = true,
};

static size_t hello_payload(const struct sl_frame_hello *h, uint8_t *out, size_t cap)
{
	int n = sl_frame_hello_build(h, (char *)out, cap);
	CHECK(n > 0);
	return (size_t)n;
}

/* Encode on the supervisor side and decode + accept on the collector side. Returns the frame. */
static void sup_to_col(struct pair *p, uint8_t type, const void *payload, size_t len, uint8_t *wire,
		       size_t cap, struct sl_frame *f)
{
	size_t n, used;
	uint32_t seq = p->sup.send_seq + 1;
	CHECK_EQ(sl_frame_encode(type, payload, len, &p->sup, wire, cap, &n), 0);
	CHECK_EQ(n, 16 + len + 32);
	CHECK_EQ(p->sup.send_seq, seq);
	CHECK_EQ(sl_frame_decode(wire, n, &p->col, f, &used), 0);
	CHECK_EQ(used, n);
	CHECK_EQ(f->frame_len, n);
	CHECK_EQ(f->type, type);
	CHECK_EQ(f->seq, seq);
	CHECK_EQ(f->payload_len, len);
	CHECK(!memcmp(f->payload, payload, len));
	CHECK_EQ(f->reject, SL_FRAME_REJECT_NONE);
	CHECK_EQ(sl_frame_ctx_accept(&p->col, f), 0);
	CHECK_EQ(p->col.recv_seq, seq);
}

static void connect_hello(struct pair *p)
{
	uint8_t pl[SL_FRAME_HELLO_MAX], wire[SL_FRAME_HELLO_MAX + 64];
	struct sl_frame f;
	size_t n = hello_payload(&hello_a, pl, sizeof(pl));
	sup_to_col(p, SL_FRAME_HELLO, pl, n, wire, sizeof(wire), &f);
}

/* Craft a frame byte by byte, independently of the codec: tag = HMAC(key, challenge||hdr||payload)
 * computed with OpenSSL's HMAC(). plen_field is written as given (it may lie). key NULL: no tag. */
static size_t craft(uint8_t *out, size_t cap, uint32_t magic, uint8_t type, uint8_t flags, uint16_t reserved,
		    uint32_t plen_field, uint32_t seq, const void *payload, size_t len, const uint8_t *key,
		    const uint8_t *challenge)
{
	CHECK(cap >= 16 + len + 32);
	uint8_t *h = out;
	for (int i = 0; i < 4; i++)
		h[i] = (uint8_t)(magic >> (8 * i));
	h[4] = type;
	h[5] = flags;
	h[6] = (uint8_t)reserved;
	h[7] = (uint8_t)(reserved >> 8);
	for (int i = 0; i < 4; i++) {
		h[8 + i] = (uint8_t)(plen_field >> (8 * i));
		h[12 + i] = (uint8_t)(seq >> (8 * i));
	}
	if (len)
		memcpy(out + 16, payload, len);
	if (!key)
		return 16 + len;
	uint8_t *msg = malloc(16 + 16 + len);
	CHECK(msg);
	memcpy(msg, challenge, 16);
	memcpy(msg + 16, out, 16 + len);
	unsigned tl = 0;
	CHECK(HMAC(EVP_sha256(), key, 32, msg, 32 + len, out + 16 + len, &tl));
	CHECK_EQ(tl, 32);
	free(msg);
	return 16 + len + 32;
}

/* A well-formed authenticated frame from the supervisor to p's collector, with seq. */
static size_t craft_sup(struct pair *p, uint8_t *out, size_t cap, uint8_t type, uint32_t seq,
			const void *payload, size_t len)
{
	return craft(out, cap, SL_FRAME_MAGIC, type, 0, 0, (uint32_t)len, seq, payload, len, p->sup.key,
		     p->sup.challenge);
}

/* ---- tests ---- */

static void test_names(void)
{
	static const char *const want[] = {"none",	"bad_magic", "bad_type",
					   "bad_flags", "oversize",  "truncated_body",
					   "bad_tag",	"replay",    "bad_payload",
					   "wrong_key", "other_sandbox_key"};
	CHECK_EQ(SL_ARRAY_LEN(want), SL_FRAME_REJECT_COUNT_);
	for (unsigned i = 0; i < SL_ARRAY_LEN(want); i++)
		CHECK(!strcmp(sl_frame_reject_name((enum sl_frame_reject)i), want[i]));
	CHECK(!strcmp(sl_frame_reject_name(SL_FRAME_REJECT_COUNT_), "unknown"));
	CHECK(!strcmp(sl_frame_type_name(SL_FRAME_EVENTS), "events"));
	CHECK(!strcmp(sl_frame_type_name(0), "unknown"));
	CHECK(!strcmp(sl_frame_type_name(7), "unknown"));
}

/* Test vectors computed independently when this test was written (OpenSSL 3.0.19 command line):
 *   printf 'sightline/v1/sandbox-key/0123456789abcdef0123456789abcdef' |
 *     openssl dgst -sha256 -mac HMAC -macopt
 * hexkey:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
 *   => 955133b38ec89c54e4630eb6f2a2702a8ba19e900d7a912d1f7ba92cec75b23c
 *   (same with ...-key/fedcba9876543210fedcba9876543210)
 *   => 179857e01363b7da6d01258485c25ee09427526d3b76c70812215a0a170b46a6 */
static void test_derive_key(void)
{
	uint8_t want[32], key[32];
	unhex("955133b38ec89c54e4630eb6f2a2702a8ba19e900d7a912d1f7ba92cec75b23c", want, 32);
	CHECK_EQ(sl_frame_derive_key(master, SB_A, key), 0);
	CHECK(!memcmp(key, want, 32));
	unhex("179857e01363b7da6d01258485c25ee09427526d3b76c70812215a0a170b46a6", want, 32);
	CHECK_EQ(sl_frame_derive_key(master, SB_B, key), 0);
	CHECK(!memcmp(key, want, 32));

	static const char *const bad[] = {
	    "",
	    "0123456789abcdef0123456789abcde",	 /* 31 */
	    "0123456789abcdef0123456789abcdef0", /* 33 */
	    "0123456789ABCDEF0123456789abcdef",	 /* upper case */
	    "0123456789abcdef0123456789abcdeg",	 /* not hex */
	    "../../etc/passwd0123456789abcdef",
	    ("0123456789abcdef\0"
	     "123456789abcdef"),
	};
	for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++)
		CHECK_EQ(sl_frame_derive_key(master, bad[i], key), -EINVAL);
	CHECK_EQ(sl_frame_derive_key(master, NULL, key), -EINVAL);
	CHECK(sl_frame_sandbox_id_valid(SB_A));
	CHECK(!sl_frame_sandbox_id_valid("0123456789ABCDEF0123456789abcdef"));
}

/* The ACK frame below was computed independently when this test was written:
 *   python3: challenge a0..af, header struct.pack('<IBBHII', 0x32464c53, 5, 0, 0, 8, 1), payload
 *   struct.pack('<Q', 42), written as challenge||header||payload to ackmsg.bin, then
 *   openssl dgst -sha256 -mac HMAC -macopt hexkey:955133b3...b23c (key_a) ackmsg.bin
 *   => e6fd119c5b66f19dfce8db896ee7c378169bf6f5450ba905fe496c126720074a
 * and key_a's key id: printf 'sightline key id v1' | openssl dgst -sha256 -mac HMAC -macopt
 *   hexkey:955133b3...b23c => 2fe0ffa1bfbc13c4... (the first 8 bytes); key_b's 74cf68db66e9daa7. */
static void test_wire_vector(void)
{
	static const char want_hex[] = "534c46320500000008000000010000002a00000000000000"
				       "e6fd119c5b66f19dfce8db896ee7c378169bf6f5450ba905fe496c126720074a";
	uint8_t want[56], wire[64], pl[8];
	unhex(want_hex, want, sizeof(want));
	struct sl_frame_ctx col, sup;
	CHECK_EQ(sl_frame_ctx_init(&col, SL_FRAME_ROLE_COLLECTOR, key_a), 0);
	for (int i = 0; i < 16; i++)
		col.challenge[i] = (uint8_t)(0xa0 + i);
	col.have_challenge = true;
	size_t n, used;
	CHECK_EQ(sl_frame_encode(SL_FRAME_CHALLENGE, col.challenge, 16, &col, wire, sizeof(wire), &n), 0);
	CHECK_EQ(n, 32);
	CHECK(!memcmp(wire, "SLF2\x01\0\0\0\x10\0\0\0\0\0\0\0", 16));
	char kid[SL_FRAME_KEY_ID_LEN + 1];
	CHECK_EQ(sl_frame_key_id(key_a, kid), 0);
	CHECK(!strcmp(kid, KID_A));
	CHECK_EQ(sl_frame_key_id(key_b, kid), 0);
	CHECK(!strcmp(kid, KID_B));
	/* the verdict on a HELLO whose tag failed: its key id is the claimed key's, or not */
	CHECK_EQ(sl_frame_hello_tag_verdict(key_a, KID_A), SL_FRAME_REJECT_BAD_TAG);
	CHECK_EQ(sl_frame_hello_tag_verdict(key_a, KID_B), SL_FRAME_REJECT_WRONG_KEY);
	CHECK_EQ(sl_frame_hello_tag_verdict(key_a, "2fe0ffa1bfbc13c5"), SL_FRAME_REJECT_WRONG_KEY);
	CHECK(!memcmp(wire + 16, col.challenge, 16));

	struct sl_frame f;
	CHECK_EQ(sl_frame_ctx_init(&sup, SL_FRAME_ROLE_SUPERVISOR, key_a), 0);
	CHECK_EQ(sl_frame_decode(wire, n, &sup, &f, &used), 0);
	CHECK_EQ(sl_frame_ctx_accept(&sup, &f), 0);

	sl_frame_ack_payload(42, pl);
	CHECK_EQ(sl_frame_encode(SL_FRAME_ACK, pl, 8, &col, wire, sizeof(wire), &n), 0);
	CHECK_EQ(n, sizeof(want));
	CHECK(!memcmp(wire, want, sizeof(want)));
	CHECK_EQ(sl_frame_decode(want, sizeof(want), &sup, &f, &used), 0);
	CHECK_EQ(f.type, SL_FRAME_ACK);
	CHECK_EQ(f.ack_seq, 42);
	CHECK_EQ(f.seq, 1);
	sl_frame_ctx_wipe(&col);
	CHECK(!col.have_key && !col.key[0] && !col.key[31]);
}

static void test_round_trips(void)
{
	struct pair p;
	pair_init(&p, key_a, key_a);
	static uint8_t wire[SL_FRAME_MAX_FRAME];
	uint8_t pl[SL_FRAME_HELLO_MAX];
	struct sl_frame f;
	size_t n, used;

	/* HELLO */
	n = hello_payload(&hello_a, pl, sizeof(pl));
	sup_to_col(&p, SL_FRAME_HELLO, pl, n, wire, sizeof(wire), &f);
	struct sl_frame_hello h;
	CHECK_EQ(sl_frame_hello_parse(f.payload, f.payload_len, &h), 0);
	CHECK(!memcmp(&h, &hello_a, sizeof(h)));

	/* EVENTS */
	struct sl_frame_events_buf eb;
	sl_frame_events_init(&eb);
	const char *lines[] = {"{\"seq\":1}", "x", "{\"seq\":3,\"a\":\"\\n\"}"};
	for (size_t i = 0; i < SL_ARRAY_LEN(lines); i++)
		CHECK_EQ(sl_frame_events_add(&eb, lines[i], strlen(lines[i])), 0);
	const uint8_t *ep = sl_frame_events_payload(&eb, &n);
	CHECK(ep && n == 4 + 3 * 4 + strlen(lines[0]) + 1 + strlen(lines[2]));
	sup_to_col(&p, SL_FRAME_EVENTS, ep, n, wire, sizeof(wire), &f);
	CHECK_EQ(f.event_count, 3);
	struct sl_frame_events_iter it;
	sl_frame_events_begin(&f, &it);
	const uint8_t *line;
	size_t ll, k = 0;
	while (sl_frame_events_next(&it, &line, &ll)) {
		CHECK(k < 3 && ll == strlen(lines[k]) && !memcmp(line, lines[k], ll));
		CHECK(line >= wire && line + ll <= wire + f.frame_len); /* a view into the buffer */
		k++;
	}
	CHECK_EQ(k, 3);

	/* HEARTBEAT */
	struct sl_frame_heartbeat hb = {1, 2, 3, 4, 0, (uint64_t)INT64_MAX}, hb2;
	int hn = sl_frame_heartbeat_build(&hb, (char *)pl, sizeof(pl));
	CHECK(hn > 0);
	sup_to_col(&p, SL_FRAME_HEARTBEAT, pl, (size_t)hn, wire, sizeof(wire), &f);
	CHECK_EQ(sl_frame_heartbeat_parse(f.payload, f.payload_len, &hb2), 0);
	CHECK(!memcmp(&hb, &hb2, sizeof(hb)));

	/* ERROR, supervisor -> collector (empty message) and collector -> supervisor */
	int en = sl_frame_error_payload(SL_FRAME_ERR_INTERNAL, "", 0, pl, sizeof(pl));
	CHECK_EQ(en, 2);
	sup_to_col(&p, SL_FRAME_ERROR, pl, (size_t)en, wire, sizeof(wire), &f);
	CHECK_EQ(f.error_code, SL_FRAME_ERR_INTERNAL);
	CHECK_EQ(f.error_msg_len, 0);

	const char *msg = "rejected: bad_tag — ünïcode ok";
	en = sl_frame_error_payload(SL_FRAME_ERR_PROTOCOL, msg, strlen(msg), pl, sizeof(pl));
	CHECK_EQ(en, 2 + (int)strlen(msg));
	CHECK_EQ(sl_frame_encode(SL_FRAME_ERROR, pl, (size_t)en, &p.col, wire, sizeof(wire), &n), 0);
	CHECK_EQ(sl_frame_decode(wire, n, &p.sup, &f, &used), 0);
	CHECK_EQ(f.type, SL_FRAME_ERROR);
	CHECK_EQ(f.error_code, SL_FRAME_ERR_PROTOCOL);
	CHECK(f.error_msg_len == strlen(msg) && !memcmp(f.error_msg, msg, f.error_msg_len));
	CHECK_EQ(f.seq, 1);
	CHECK_EQ(sl_frame_ctx_accept(&p.sup, &f), 0);

	/* ACK, with the largest seq */
	sl_frame_ack_payload(UINT64_MAX, pl);
	CHECK_EQ(sl_frame_encode(SL_FRAME_ACK, pl, 8, &p.col, wire, sizeof(wire), &n), 0);
	CHECK_EQ(sl_frame_decode(wire, n, &p.sup, &f, &used), 0);
	CHECK_EQ(f.seq, 2);
	CHECK(f.ack_seq == UINT64_MAX);
	CHECK_EQ(sl_frame_ctx_accept(&p.sup, &f), 0);

	/* The largest payload: one line of SL_FRAME_EVENT_LINE_MAX bytes makes a 1 MiB payload. */
	sl_frame_events_reset(&eb);
	char *big = malloc(SL_FRAME_EVENT_LINE_MAX + 1);
	CHECK(big);
	memset(big, 'x', SL_FRAME_EVENT_LINE_MAX + 1);
	CHECK_EQ(sl_frame_events_add(&eb, big, SL_FRAME_EVENT_LINE_MAX + 1), -E2BIG);
	CHECK_EQ(sl_frame_events_add(&eb, big, SL_FRAME_EVENT_LINE_MAX), 0);
	CHECK_EQ(sl_frame_events_add(&eb, "y", 1), -ENOSPC);
	ep = sl_frame_events_payload(&eb, &n);
	CHECK_EQ(n, SL_FRAME_MAX_PAYLOAD);
	sup_to_col(&p, SL_FRAME_EVENTS, ep, n, wire, sizeof(wire), &f);
	CHECK_EQ(f.frame_len, SL_FRAME_MAX_FRAME);
	CHECK_EQ(f.event_count, 1);
	free(big);
	sl_frame_events_free(&eb);
}

/* Many frames back to back, fed in chunks of every size 1..N: the same frames come out. */
static void test_stream(void)
{
	struct pair p;
	pair_init(&p, key_a, key_a);
	uint8_t *stream = malloc(1 << 16);
	CHECK(stream);
	size_t slen = 0, n;
	uint8_t pl[SL_FRAME_HELLO_MAX];
	n = hello_payload(&hello_a, pl, sizeof(pl));
	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, pl, n, &p.sup, stream, 1 << 16, &n), 0);
	slen += n;
	struct sl_frame_events_buf eb = {0};
	for (int i = 0; i < 40; i++) {
		char line[64];
		sl_frame_events_reset(&eb);
		for (int j = 0; j <= i % 5; j++) {
			int ln = snprintf(line, sizeof(line), "{\"seq\":%d,\"j\":%d}", i, j);
			CHECK_EQ(sl_frame_events_add(&eb, line, (size_t)ln), 0);
		}
		const uint8_t *ep = sl_frame_events_payload(&eb, &n);
		CHECK_EQ(sl_frame_encode(SL_FRAME_EVENTS, ep, n, &p.sup, stream + slen, (1 << 16) - slen, &n),
			 0);
		slen += n;
	}
	sl_frame_events_free(&eb);
	const uint32_t total = 41;

	for (size_t chunk = 1; chunk <= 97; chunk += (chunk < 20 ? 1 : 11)) {
		struct sl_frame_ctx c = p.col; /* fresh copy of the collector's state */
		size_t have = 0, off = 0;
		uint32_t got = 0;
		while (off < slen) {
			if (have < slen)
				have = have + chunk > slen ? slen : have + chunk;
			struct sl_frame f;
			size_t used;
			int r;
			while ((r = sl_frame_decode(stream + off, have - off, &c, &f, &used)) == 0) {
				CHECK_EQ(sl_frame_ctx_accept(&c, &f), 0);
				off += used;
				got++;
			}
			CHECK_EQ(r, -EAGAIN);
			CHECK_EQ(used, 0);
			if (have == slen)
				CHECK_EQ(off, slen);
		}
		CHECK_EQ(got, total);
		CHECK_EQ(c.recv_seq, total);
		struct sl_frame f;
		size_t used;
		CHECK_EQ(sl_frame_decode_eof(stream + off, 0, &c, &f, &used), -ENODATA);
	}
	free(stream);
}

/* Every strict prefix of a valid frame of each type gives -EAGAIN and consumes nothing; at EOF, it is
 * TRUNCATED_BODY. */
static void test_truncation(void)
{
	struct pair p;
	pair_init(&p, key_a, key_a);
	uint8_t frames[6][SL_FRAME_HELLO_MAX + 64];
	size_t lens[6];
	const struct sl_frame_ctx *rx[6];
	uint8_t pl[SL_FRAME_HELLO_MAX];
	size_t n;

	struct sl_frame_ctx sup0;
	CHECK_EQ(sl_frame_ctx_init(&sup0, SL_FRAME_ROLE_SUPERVISOR, key_a), 0); /* awaits the challenge */
	CHECK_EQ(sl_frame_encode(SL_FRAME_CHALLENGE, p.col.challenge, 16, &p.col, frames[0],
				 sizeof(frames[0]), &lens[0]),
		 0);
	rx[0] = &sup0;

	struct sl_frame_ctx col_fresh = p.col; /* awaits the HELLO */
	n = hello_payload(&hello_a, pl, sizeof(pl));
	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, pl, n, &p.sup, frames[1], sizeof(frames[1]), &lens[1]), 0);
	rx[1] = &col_fresh;

	struct sl_frame_ctx col1 = p.col;
	col1.recv_seq = 1; /* after the HELLO */
	struct sl_frame_events_buf eb = {0};
	CHECK_EQ(sl_frame_events_add(&eb, "{\"seq\":1}", 9), 0);
	CHECK_EQ(sl_frame_events_add(&eb, "{\"seq\":2}", 9), 0);
	const uint8_t *ep = sl_frame_events_payload(&eb, &n);
	CHECK_EQ(sl_frame_encode(SL_FRAME_EVENTS, ep, n, &p.sup, frames[2], sizeof(frames[2]), &lens[2]), 0);
	sl_frame_events_free(&eb);
	struct sl_frame_ctx col2 = p.col;
	col2.recv_seq = 2;
	rx[2] = &col1;

	struct sl_frame_heartbeat hb = {5, 5, 4, 3, 0, 2};
	int hn = sl_frame_heartbeat_build(&hb, (char *)pl, sizeof(pl));
	CHECK_EQ(sl_frame_encode(SL_FRAME_HEARTBEAT, pl, (size_t)hn, &p.sup, frames[3], sizeof(frames[3]),
				 &lens[3]),
		 0);
	rx[3] = &col2;

	sl_frame_ack_payload(7, pl);
	CHECK_EQ(sl_frame_encode(SL_FRAME_ACK, pl, 8, &p.col, frames[4], sizeof(frames[4]), &lens[4]), 0);
	rx[4] = &p.sup;

	int en = sl_frame_error_payload(SL_FRAME_ERR_SHUTDOWN, "bye", 3, pl, sizeof(pl));
	CHECK_EQ(
	    sl_frame_encode(SL_FRAME_ERROR, pl, (size_t)en, &p.col, frames[5], sizeof(frames[5]), &lens[5]),
	    0);
	struct sl_frame_ctx sup1 = p.sup;
	sup1.recv_seq = 1;
	rx[5] = &sup1;

	for (int t = 0; t < 6; t++) {
		struct sl_frame f;
		size_t used;
		CHECK_EQ(sl_frame_decode(frames[t], lens[t], rx[t], &f, &used), 0);
		CHECK_EQ(f.type, t + 1);
		CHECK_EQ(used, lens[t]);
		for (size_t k = 0; k < lens[t]; k++) {
			used = 99;
			CHECK_EQ(sl_frame_decode(frames[t], k, rx[t], &f, &used), -EAGAIN);
			CHECK_EQ(used, 0);
			CHECK_EQ(f.reject, SL_FRAME_REJECT_NONE);
			int r = sl_frame_decode_eof(frames[t], k, rx[t], &f, &used);
			if (k == 0)
				CHECK_EQ(r, -ENODATA);
			else
				CHECK_REJECT(r, f, SL_FRAME_REJECT_TRUNCATED_BODY);
			CHECK_EQ(used, 0);
		}
		/* Extra bytes after a frame are left for the next decode. */
		uint8_t two[2 * (SL_FRAME_HELLO_MAX + 64)];
		memcpy(two, frames[t], lens[t]);
		memcpy(two + lens[t], "SLF2", 4);
		CHECK_EQ(sl_frame_decode(two, lens[t] + 4, rx[t], &f, &used), 0);
		CHECK_EQ(used, lens[t]);
	}
}

static void test_reject_auth(void)
{
	struct pair good, wrong_master, other_sb;
	uint8_t key_x[32], m2[32];
	memcpy(m2, master, 32);
	m2[0] ^= 1;
	CHECK_EQ(sl_frame_derive_key(m2, SB_A, key_x), 0);
	pair_init(&good, key_a, key_a);
	pair_init(&wrong_master, key_a, key_x); /* the supervisor holds a key from another master secret */
	pair_init(&other_sb, key_a, key_b);	/* the supervisor holds sandbox B's key, claims A */
	uint8_t pl[SL_FRAME_HELLO_MAX], wire[SL_FRAME_HELLO_MAX + 64];
	struct sl_frame f;
	size_t n, used, pn = hello_payload(&hello_a, pl, sizeof(pl));

	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, pl, pn, &wrong_master.sup, wire, sizeof(wire), &n), 0);
	CHECK_REJECT(sl_frame_decode(wire, n, &wrong_master.col, &f, &used), f, SL_FRAME_REJECT_BAD_TAG);
	CHECK_EQ(used, 0);
	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, pl, pn, &other_sb.sup, wire, sizeof(wire), &n), 0);
	CHECK_REJECT(sl_frame_decode(wire, n, &other_sb.col, &f, &used), f, SL_FRAME_REJECT_BAD_TAG);

	/* A frame from another connection (other challenge), same key: replay across connections. */
	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, pl, pn, &good.sup, wire, sizeof(wire), &n), 0);
	struct pair other_conn;
	pair_init(&other_conn, key_a, key_a);
	CHECK(memcmp(other_conn.col.challenge, good.col.challenge, 16));
	CHECK_REJECT(sl_frame_decode(wire, n, &other_conn.col, &f, &used), f, SL_FRAME_REJECT_BAD_TAG);
	CHECK_EQ(sl_frame_decode(wire, n, &good.col, &f, &used), 0);

	/* Flip each bit of each byte of a valid frame: never accepted. */
	struct sl_frame_events_buf eb = {0};
	CHECK_EQ(sl_frame_events_add(&eb, "{\"seq\":1}", 9), 0);
	const uint8_t *ep = sl_frame_events_payload(&eb, &pn);
	struct sl_frame_ctx col1 = good.col;
	col1.recv_seq = 1;
	CHECK_EQ(sl_frame_encode(SL_FRAME_EVENTS, ep, pn, &good.sup, wire, sizeof(wire), &n), 0);
	sl_frame_events_free(&eb);
	CHECK_EQ(sl_frame_decode(wire, n, &col1, &f, &used), 0);
	for (size_t i = 0; i < n; i++) {
		for (int b = 0; b < 8; b++) {
			wire[i] ^= (uint8_t)(1 << b);
			int r = sl_frame_decode(wire, n, &col1, &f, &used);
			enum sl_frame_reject want;
			if (i < 4)
				want = SL_FRAME_REJECT_BAD_MAGIC;
			else if (i == 4)
				want = SL_FRAME_REJECT_BAD_TYPE; /* 3 -> 2,1,7,11,..: none allowed here */
			else if (i < 8)
				want = SL_FRAME_REJECT_BAD_FLAGS;
			else if (i == 10 && b >= 4)
				want = SL_FRAME_REJECT_OVERSIZE; /* payload_len > 1 MiB */
			else if (i == 11)
				want = SL_FRAME_REJECT_OVERSIZE;
			else
				want = SL_FRAME_REJECT_BAD_TAG;
			if (i >= 8 && i < 12 && r == -EAGAIN) {
				/* a longer payload_len: waits for bytes that never come */
				CHECK_REJECT(sl_frame_decode_eof(wire, n, &col1, &f, &used), f,
					     SL_FRAME_REJECT_TRUNCATED_BODY);
			} else {
				if (r != -EBADMSG || f.reject != want)
					die("flip byte %zu bit %d: rc %d %s, want %s", i, b, r,
					    sl_frame_reject_name(f.reject), sl_frame_reject_name(want));
			}
			CHECK_EQ(used, 0);
			wire[i] ^= (uint8_t)(1 << b);
		}
	}
	CHECK_EQ(sl_frame_decode(wire, n, &col1, &f, &used), 0);
}

static void test_reject_header(void)
{
	struct pair p;
	pair_init(&p, key_a, key_a);
	connect_hello(&p);
	uint8_t wire[256];
	uint8_t ev[] = {1, 0, 0, 0, 1, 0, 0, 0, 'x'};
	struct sl_frame f;
	size_t n, used;
	uint32_t s = p.col.recv_seq + 1;

	/* bad magic (here: version 1's "SLF1"): already at 4 bytes */
	n = craft(wire, sizeof(wire), 0x31464c53, SL_FRAME_EVENTS, 0, 0, 9, s, ev, 9, p.sup.key,
		  p.sup.challenge);
	CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_MAGIC);
	CHECK_REJECT(sl_frame_decode(wire, 4, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_MAGIC);
	CHECK_EQ(sl_frame_decode(wire, 3, &p.col, &f, &used), -EAGAIN);
	CHECK_REJECT(sl_frame_decode((const uint8_t *)"GET / HTTP/1.1\r\n", 16, &p.col, &f, &used), f,
		     SL_FRAME_REJECT_BAD_MAGIC);

	/* bad type: unknown values, and known ones in the wrong direction or state */
	const uint8_t bad_types[] = {
	    0, 7, 255, SL_FRAME_CHALLENGE, SL_FRAME_ACK, SL_FRAME_HELLO /* second */};
	for (size_t i = 0; i < sizeof(bad_types); i++) {
		n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, bad_types[i], 0, 0, 9, s, ev, 9, p.sup.key,
			  p.sup.challenge);
		CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_TYPE);
		CHECK_REJECT(sl_frame_decode(wire, 5, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_TYPE);
	}
	/* EVENTS before the HELLO */
	struct sl_frame_ctx fresh = p.col;
	fresh.recv_seq = 0;
	n = craft_sup(&p, wire, sizeof(wire), SL_FRAME_EVENTS, 1, ev, 9);
	CHECK_REJECT(sl_frame_decode(wire, n, &fresh, &f, &used), f, SL_FRAME_REJECT_BAD_TYPE);
	/* the supervisor: anything before the CHALLENGE, and a second CHALLENGE */
	struct sl_frame_ctx sup0;
	CHECK_EQ(sl_frame_ctx_init(&sup0, SL_FRAME_ROLE_SUPERVISOR, key_a), 0);
	uint8_t ack[8] = {0};
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_ACK, 0, 0, 8, 1, ack, 8, key_a,
		  p.col.challenge);
	CHECK_REJECT(sl_frame_decode(wire, n, &sup0, &f, &used), f, SL_FRAME_REJECT_BAD_TYPE);
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_CHALLENGE, 0, 0, 16, 0, p.col.challenge, 16,
		  NULL, NULL);
	CHECK_EQ(sl_frame_decode(wire, n, &sup0, &f, &used), 0);
	CHECK_REJECT(sl_frame_decode(wire, n, &p.sup, &f, &used), f, SL_FRAME_REJECT_BAD_TYPE);
	/* the collector never receives a CHALLENGE or an ACK (a reflected frame of its own) */
	CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_TYPE);

	/* flags and reserved */
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_EVENTS, 1, 0, 9, s, ev, 9, p.sup.key,
		  p.sup.challenge);
	CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_FLAGS);
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_EVENTS, 0x80, 0, 9, s, ev, 9, p.sup.key,
		  p.sup.challenge);
	CHECK_REJECT(sl_frame_decode(wire, 6, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_FLAGS);
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_EVENTS, 0, 0x0100, 9, s, ev, 9, p.sup.key,
		  p.sup.challenge);
	CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_FLAGS);
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_EVENTS, 0, 1, 9, s, ev, 9, p.sup.key,
		  p.sup.challenge);
	CHECK_REJECT(sl_frame_decode(wire, 7, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_FLAGS);

	/* oversize: known from the length field alone, without waiting for the body */
	const uint32_t big[] = {SL_FRAME_MAX_PAYLOAD + 1, 0x7fffffff, 0xffffffff};
	for (size_t i = 0; i < SL_ARRAY_LEN(big); i++) {
		n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_EVENTS, 0, 0, big[i], s, ev, 9,
			  p.sup.key, p.sup.challenge);
		CHECK_REJECT(sl_frame_decode(wire, 12, &p.col, &f, &used), f, SL_FRAME_REJECT_OVERSIZE);
		CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_OVERSIZE);
		CHECK_REJECT(sl_frame_decode_eof(wire, 12, &p.col, &f, &used), f, SL_FRAME_REJECT_OVERSIZE);
	}
	/* exactly the limit only waits */
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_EVENTS, 0, 0, SL_FRAME_MAX_PAYLOAD, s, ev, 9,
		  p.sup.key, p.sup.challenge);
	CHECK_EQ(sl_frame_decode(wire, n, &p.col, &f, &used), -EAGAIN);

	/* the header checks in order: magic before type before flags before length */
	n = craft(wire, sizeof(wire), 0, 99, 1, 1, 0xffffffff, s, ev, 9, NULL, NULL);
	CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_MAGIC);
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, 99, 1, 1, 0xffffffff, s, ev, 9, NULL, NULL);
	CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_TYPE);
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_EVENTS, 1, 1, 0xffffffff, s, ev, 9, NULL,
		  NULL);
	CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_FLAGS);

	/* the tag before the sequence: a forged frame with a wrong seq is BAD_TAG, not REPLAY */
	uint8_t zero_key[32] = {0};
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_EVENTS, 0, 0, 9, s + 5, ev, 9, zero_key,
		  p.sup.challenge);
	CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_TAG);
	/* a tag cut short / missing */
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_EVENTS, 0, 0, 9, s, ev, 9, NULL, NULL);
	memset(wire + n, 0, 32);
	CHECK_REJECT(sl_frame_decode(wire, n + 32, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_TAG);
	CHECK_REJECT(sl_frame_decode_eof(wire, n + 31, &p.col, &f, &used), f, SL_FRAME_REJECT_TRUNCATED_BODY);
}

static void test_reject_replay(void)
{
	struct pair p;
	pair_init(&p, key_a, key_a);
	connect_hello(&p);
	uint8_t f2[256], f3[256], pl[256];
	size_t n2, n3, used;
	struct sl_frame f;
	struct sl_frame_heartbeat hb = {0};
	int hn = sl_frame_heartbeat_build(&hb, (char *)pl, sizeof(pl));
	CHECK_EQ(sl_frame_encode(SL_FRAME_HEARTBEAT, pl, (size_t)hn, &p.sup, f2, sizeof(f2), &n2), 0);
	CHECK_EQ(sl_frame_encode(SL_FRAME_HEARTBEAT, pl, (size_t)hn, &p.sup, f3, sizeof(f3), &n3), 0);

	/* skipped: frame 3 before frame 2 */
	CHECK_REJECT(sl_frame_decode(f3, n3, &p.col, &f, &used), f, SL_FRAME_REJECT_REPLAY);
	CHECK_EQ(sl_frame_decode(f2, n2, &p.col, &f, &used), 0);
	CHECK_EQ(sl_frame_ctx_accept(&p.col, &f), 0);
	/* replayed: frame 2 again */
	CHECK_REJECT(sl_frame_decode(f2, n2, &p.col, &f, &used), f, SL_FRAME_REJECT_REPLAY);
	CHECK_EQ(sl_frame_decode(f3, n3, &p.col, &f, &used), 0);
	CHECK_EQ(sl_frame_ctx_accept(&p.col, &f), 0);
	struct sl_frame ok3 = f;
	CHECK_REJECT(sl_frame_decode(f3, n3, &p.col, &f, &used), f, SL_FRAME_REJECT_REPLAY);
	CHECK_REJECT(sl_frame_decode(f2, n2, &p.col, &f, &used), f, SL_FRAME_REJECT_REPLAY);

	/* accept refuses a frame the ctx does not expect */
	CHECK_EQ(sl_frame_ctx_accept(&p.col, &ok3), -EINVAL);
	CHECK_EQ(sl_frame_ctx_accept(&p.col, &f), -EINVAL); /* a rejected one */

	/* a CHALLENGE with a non-zero frame_seq */
	struct sl_frame_ctx sup0;
	CHECK_EQ(sl_frame_ctx_init(&sup0, SL_FRAME_ROLE_SUPERVISOR, key_a), 0);
	uint8_t w[64];
	size_t n = craft(w, sizeof(w), SL_FRAME_MAGIC, SL_FRAME_CHALLENGE, 0, 0, 16, 1, p.col.challenge, 16,
			 NULL, NULL);
	CHECK_REJECT(sl_frame_decode(w, n, &sup0, &f, &used), f, SL_FRAME_REJECT_REPLAY);

	/* the end of the sequence space */
	struct sl_frame_ctx c = p.col;
	c.recv_seq = UINT32_MAX - 1;
	n = craft_sup(&p, f2, sizeof(f2), SL_FRAME_HEARTBEAT, UINT32_MAX, pl, (size_t)hn);
	CHECK_EQ(sl_frame_decode(f2, n, &c, &f, &used), 0);
	CHECK_EQ(sl_frame_ctx_accept(&c, &f), 0);
	n = craft_sup(&p, f2, sizeof(f2), SL_FRAME_HEARTBEAT, 0, pl, (size_t)hn);
	CHECK_REJECT(sl_frame_decode(f2, n, &c, &f, &used), f, SL_FRAME_REJECT_REPLAY);
	struct sl_frame_ctx s = p.sup;
	s.send_seq = UINT32_MAX;
	CHECK_EQ(sl_frame_encode(SL_FRAME_HEARTBEAT, pl, (size_t)hn, &s, f2, sizeof(f2), &n), -EOVERFLOW);
}

/* EVENTS payload p[0..len) crafted with a valid tag: want BAD_PAYLOAD. */
static void expect_bad_events(struct pair *p, const uint8_t *pl, size_t len, int line)
{
	static uint8_t wire[SL_FRAME_MAX_FRAME];
	struct sl_frame f;
	size_t used;
	size_t n = craft_sup(p, wire, sizeof(wire), SL_FRAME_EVENTS, p->col.recv_seq + 1, pl, len);
	int r = sl_frame_decode(wire, n, &p->col, &f, &used);
	if (r != -EBADMSG || f.reject != SL_FRAME_REJECT_BAD_PAYLOAD)
		die("line %d: rc %d %s, want bad_payload", line, r, sl_frame_reject_name(f.reject));
	CHECK_EQ(used, 0);
	CHECK(f.payload == NULL && f.event_count == 0);
	/* the encoder refuses to produce it */
	struct sl_frame_ctx s = p->sup;
	CHECK_EQ(sl_frame_encode(SL_FRAME_EVENTS, pl, len, &s, wire, sizeof(wire), &n), -EINVAL);
	CHECK_EQ(s.send_seq, p->sup.send_seq);
}

static size_t put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return 4;
}

static void test_reject_payload(void)
{
	struct pair p;
	pair_init(&p, key_a, key_a);
	connect_hello(&p);
	uint8_t *pl = calloc(1, SL_FRAME_MAX_PAYLOAD);
	CHECK(pl);
	size_t o;

	/* fewer than 4 bytes, count 0 */
	expect_bad_events(&p, pl, 0, __LINE__);
	expect_bad_events(&p, pl, 3, __LINE__);
	o = put32(pl, 0);
	expect_bad_events(&p, pl, o, __LINE__);
	/* count 2, one entry */
	o = put32(pl, 2);
	o += put32(pl + o, 3);
	memcpy(pl + o, "abc", 3), o += 3;
	expect_bad_events(&p, pl, o, __LINE__);
	/* count 1, trailing bytes after the entry */
	put32(pl, 1);
	pl[o++] = 'z';
	expect_bad_events(&p, pl, o, __LINE__);
	/* len larger than what is left */
	o = put32(pl, 1);
	o += put32(pl + o, 4);
	memcpy(pl + o, "abc", 3), o += 3;
	expect_bad_events(&p, pl, o, __LINE__);
	/* len 0 */
	o = put32(pl, 1);
	o += put32(pl + o, 0);
	expect_bad_events(&p, pl, o, __LINE__);
	/* a length field cut short */
	o = put32(pl, 1);
	pl[o++] = 1;
	pl[o++] = 0;
	expect_bad_events(&p, pl, o, __LINE__);
	/* a len of 2^32-1 (wraps if added carelessly) */
	o = put32(pl, 1);
	o += put32(pl + o, UINT32_MAX);
	memcpy(pl + o, "abc", 3), o += 3;
	expect_bad_events(&p, pl, o, __LINE__);
	/* a newline inside a line */
	o = put32(pl, 1);
	o += put32(pl + o, 3);
	memcpy(pl + o, "a\nb", 3), o += 3;
	expect_bad_events(&p, pl, o, __LINE__);
	/* count 65537 of 1-byte lines: structurally complete, but over the count limit */
	o = put32(pl, SL_FRAME_EVENTS_MAX + 1);
	for (uint32_t i = 0; i < SL_FRAME_EVENTS_MAX + 1; i++) {
		o += put32(pl + o, 1);
		pl[o++] = 'e';
	}
	expect_bad_events(&p, pl, o, __LINE__);
	/* ... and 65536 is fine */
	o = put32(pl, SL_FRAME_EVENTS_MAX);
	for (uint32_t i = 0; i < SL_FRAME_EVENTS_MAX; i++) {
		o += put32(pl + o, 1);
		pl[o++] = 'e';
	}
	static uint8_t wire[SL_FRAME_MAX_FRAME];
	struct sl_frame f;
	size_t n, used;
	n = craft_sup(&p, wire, sizeof(wire), SL_FRAME_EVENTS, p.col.recv_seq + 1, pl, o);
	CHECK_EQ(sl_frame_decode(wire, n, &p.col, &f, &used), 0);
	CHECK_EQ(f.event_count, SL_FRAME_EVENTS_MAX);
	CHECK_EQ(sl_frame_ctx_accept(&p.col, &f), 0);

	/* ACK of 7 and 9 bytes; CHALLENGE of 15 and 17; ERROR too short, too long, not UTF-8 */
	const size_t ack_bad[] = {0, 7, 9};
	for (size_t i = 0; i < SL_ARRAY_LEN(ack_bad); i++) {
		n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_ACK, 0, 0, (uint32_t)ack_bad[i], 1, pl,
			  ack_bad[i], key_a, p.sup.challenge);
		CHECK_REJECT(sl_frame_decode(wire, n, &p.sup, &f, &used), f, SL_FRAME_REJECT_BAD_PAYLOAD);
		struct sl_frame_ctx c = p.col;
		CHECK_EQ(sl_frame_encode(SL_FRAME_ACK, pl, ack_bad[i], &c, wire, sizeof(wire), &n), -EINVAL);
	}
	struct sl_frame_ctx sup0;
	CHECK_EQ(sl_frame_ctx_init(&sup0, SL_FRAME_ROLE_SUPERVISOR, key_a), 0);
	for (uint32_t l = 15; l <= 17; l += 2) {
		n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_CHALLENGE, 0, 0, l, 0, pl, l, NULL,
			  NULL);
		CHECK_REJECT(sl_frame_decode(wire, n, &sup0, &f, &used), f, SL_FRAME_REJECT_BAD_PAYLOAD);
	}
	struct {
		const char *p;
		size_t n;
	} err_bad[] = {
	    {"", 0},
	    {"\x01", 1},
	    {"\x01\x00\xc0\x80", 4},	     /* overlong NUL */
	    {"\x01\x00\xe0\x80\xaf", 5},     /* overlong '/' */
	    {"\x01\x00\xf0\x80\x80\xaf", 6}, /* overlong '/' */
	    {"\x01\x00\xed\xa0\x80", 5},     /* surrogate */
	    {"\x01\x00\xff", 3},	     /* not UTF-8 */
	    {"\x01\x00"
	     "a\0b",
	     5},			     /* NUL */
	    {"\x01\x00\xe2\x82", 4},	     /* cut multibyte */
	    {"\x01\x00\xf4\x90\x80\x80", 6}, /* above U+10FFFF */
	};
	for (size_t i = 0; i < SL_ARRAY_LEN(err_bad); i++) {
		n = craft_sup(&p, wire, sizeof(wire), SL_FRAME_ERROR, p.col.recv_seq + 1, err_bad[i].p,
			      err_bad[i].n);
		CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_PAYLOAD);
	}
	memset(pl, 'm', 2 + 257);
	n = craft_sup(&p, wire, sizeof(wire), SL_FRAME_ERROR, p.col.recv_seq + 1, pl, 2 + 257);
	CHECK_REJECT(sl_frame_decode(wire, n, &p.col, &f, &used), f, SL_FRAME_REJECT_BAD_PAYLOAD);
	n = craft_sup(&p, wire, sizeof(wire), SL_FRAME_ERROR, p.col.recv_seq + 1, pl, 2 + 256);
	CHECK_EQ(sl_frame_decode(wire, n, &p.col, &f, &used), 0);
	CHECK_EQ(f.error_msg_len, 256);
	CHECK_EQ(sl_frame_error_payload(1, (const char *)pl, 257, wire, sizeof(wire)), -EINVAL);
	CHECK_EQ(sl_frame_error_payload(1, "\xff", 1, wire, sizeof(wire)), -EINVAL);
	CHECK_EQ(sl_frame_error_payload(1, "abc", 3, wire, 4), -EINVAL);
	free(pl);
}

/* ---- HELLO JSON ---- */

static int hello_str(const char *json)
{
	struct sl_frame_hello h;
	return sl_frame_hello_parse((const uint8_t *)json, strlen(json), &h);
}

#define KID_J "\"key_id\":\"" KID_A "\""
#define HELLO_ID                                                                                             \
	KID_J ",\"identity\":{\"tenant\":\"t\",\"agent\":\"a\",\"task\":\"k\",\"version\":\"v\",\"credential_"      \
	"ref\":\"c\"}"
#define HELLO_REST "\"risk_class\":\"low\",\"control\":\"/run/x.ctl\",\"resume\":false"
#define HELLO_OK   "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID "," HELLO_REST "}"

static void test_hello_json(void)
{
	struct sl_frame_hello h;
	CHECK_EQ(hello_str(HELLO_OK), 0);
	CHECK_EQ(sl_frame_hello_parse((const uint8_t *)HELLO_OK, strlen(HELLO_OK), &h), 0);
	CHECK(!strcmp(h.sandbox_id, SB_A) && !strcmp(h.tenant, "t") && !strcmp(h.credential_ref, "c"));
	CHECK(!strcmp(h.risk_class, "low") && !strcmp(h.control, "/run/x.ctl") && !h.resume);
	/* whitespace and member order do not matter */
	CHECK_EQ(hello_str(" {\n\t\"resume\" : true ,\"control\":\"c\",\"risk_class\":\"medium\"," HELLO_ID
			   ",\"sandbox_id\":\"" SB_A "\"}\r\n"),
		 0);

	static const char *const bad[] = {
	    "", "{}", "[]", "null", HELLO_OK "x", HELLO_OK HELLO_OK,
	    /* unknown key, top level and in identity */
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID "," HELLO_REST ",\"extra\":1}",
	    "{\"sandbox_id\":\"" SB_A "\"," KID_J
	    ",\"identity\":{\"tenant\":\"t\",\"agent\":\"a\",\"task\":\"k\",\"version\":"
	    "\"v\",\"credential_ref\":\"c\",\"uid\":\"0\"}," HELLO_REST "}",
	    /* missing key */
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":\"/run/x.ctl\"}",
	    "{\"sandbox_id\":\"" SB_A "\"," KID_J
	    ",\"identity\":{\"tenant\":\"t\",\"agent\":\"a\",\"task\":\"k\",\"version\":"
	    "\"v\"}," HELLO_REST "}",
	    /* a duplicate key replacing a missing one (json-c would keep the last) */
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":\"/run/x.ctl\","
	    "\"sandbox_id\":\"" SB_B "\"}",
	    "{\"sandbox_id\":\"" SB_B "\",\"sandbox_id\":\"" SB_A "\"," HELLO_ID "," HELLO_REST "}",
	    /* wrong types */
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":\"/run/x.ctl\","
	    "\"resume\":\"true\"}",
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":\"/run/x.ctl\","
	    "\"resume\":1}",
	    "{\"sandbox_id\":\"" SB_A "\"," KID_J ",\"identity\":\"t\"," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\"," KID_J ",\"identity\":[\"t\",\"a\",\"k\",\"v\",\"c\"]," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\"," KID_J
	    ",\"identity\":{\"tenant\":1,\"agent\":\"a\",\"task\":\"k\",\"version\":"
	    "\"v\",\"credential_ref\":\"c\"}," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\"," KID_J ",\"identity\":{\"tenant\":null,\"agent\":\"a\",\"task\":\"k\","
	    "\"version\":\"v\",\"credential_ref\":\"c\"}," HELLO_REST "}",
	    "{\"sandbox_id\":null," HELLO_ID "," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":[\"/run/x.ctl\"],"
	    "\"resume\":false}",
	    /* bad sandbox ids */
	    "{\"sandbox_id\":\"0123456789ABCDEF0123456789abcdef\"," HELLO_ID "," HELLO_REST "}",
	    "{\"sandbox_id\":\"0123456789abcdef\"," HELLO_ID "," HELLO_REST "}",
	    "{\"sandbox_id\":\"0123456789abcdef0123456789abcdeg\"," HELLO_ID "," HELLO_REST "}",
	    "{\"sandbox_id\":\"0123456789abcdef0123456789abcdef0\"," HELLO_ID "," HELLO_REST "}",
	    "{\"sandbox_id\":\"0123456789abcdef0123456789abcde\\u0000\"," HELLO_ID "," HELLO_REST "}",
	    /* bad values */
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"critical\",\"control\":\"c\","
	    "\"resume\":false}",
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID
	    ",\"risk_class\":\"HIGH\",\"control\":\"c\",\"resume\":false}",
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID
	    ",\"risk_class\":\"low\",\"control\":\"\",\"resume\":false}",
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":\"a\\u0000b\","
	    "\"resume\":false}",
	    /* not JSON as json-c would loosely take it */
	    "{'sandbox_id':'" SB_A "'," HELLO_ID "," HELLO_REST "}",
	    "{'sandbox_id':\"" SB_A "\"," HELLO_ID "," HELLO_REST "}", /* json-c takes a 'key' */
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID "," HELLO_REST ",}",
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID "," HELLO_REST "/*c*/}",
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":\"a\tb\","
	    "\"resume\":false}", /* raw control byte in a string */
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":\"a\xc0\x80\","
	    "\"resume\":false}", /* overlong UTF-8 */
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":\"a\xed\xa0\x80\","
	    "\"resume\":false}", /* surrogate */
	    "{\"sandbox_id\":\"" SB_A "\"," HELLO_ID ",\"risk_class\":\"low\",\"control\":\"x\","
	    "\"resume\":false,\"z\":{\"a\":{\"b\":1}}}", /* too deep */
	    /* key_id: missing, duplicated, not 16 lowercase hex, not a string */
	    "{\"sandbox_id\":\"" SB_A "\",\"identity\":{\"tenant\":\"t\",\"agent\":\"a\",\"task\":\"k\","
	    "\"version\":\"v\",\"credential_ref\":\"c\"}," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\"," KID_J "," HELLO_ID "," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\",\"key_id\":\"2FE0FFA1BFBC13C4\",\"identity\":{\"tenant\":\"t\","
	    "\"agent\":\"a\",\"task\":\"k\",\"version\":\"v\",\"credential_ref\":\"c\"}," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\",\"key_id\":\"2fe0ffa1bfbc13c\",\"identity\":{\"tenant\":\"t\","
	    "\"agent\":\"a\",\"task\":\"k\",\"version\":\"v\",\"credential_ref\":\"c\"}," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\",\"key_id\":\"2fe0ffa1bfbc13c40\",\"identity\":{\"tenant\":\"t\","
	    "\"agent\":\"a\",\"task\":\"k\",\"version\":\"v\",\"credential_ref\":\"c\"}," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\",\"key_id\":\"2fe0ffa1bfbc13cg\",\"identity\":{\"tenant\":\"t\","
	    "\"agent\":\"a\",\"task\":\"k\",\"version\":\"v\",\"credential_ref\":\"c\"}," HELLO_REST "}",
	    "{\"sandbox_id\":\"" SB_A "\",\"key_id\":1234567812345678,\"identity\":{\"tenant\":\"t\","
	    "\"agent\":\"a\",\"task\":\"k\",\"version\":\"v\",\"credential_ref\":\"c\"}," HELLO_REST "}",
	};
	for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++)
		if (hello_str(bad[i]) != -EBADMSG)
			die("hello bad[%zu] accepted: %s", i, bad[i]);
	/* the output is cleared on failure */
	CHECK_EQ(sl_frame_hello_parse((const uint8_t *)bad[6], strlen(bad[6]), &h), -EBADMSG);
	CHECK_EQ(h.sandbox_id[0], 0);
	CHECK_EQ(sl_frame_hello_parse(NULL, 0, &h), -EBADMSG);

	/* string lengths: 256 bytes fine, 257 not (counted after unescaping) */
	struct sl_frame_hello hh = hello_a;
	char json[SL_FRAME_HELLO_MAX];
	memset(hh.task, 'k', 256);
	hh.task[256] = 0;
	int n = sl_frame_hello_build(&hh, json, sizeof(json));
	CHECK(n > 0);
	CHECK_EQ(sl_frame_hello_parse((const uint8_t *)json, (size_t)n, &h), 0);
	CHECK_EQ(strlen(h.task), 256);
	/* all 256 bytes as escapes still fit */
	memset(hh.tenant, '\x01', 256);
	hh.tenant[256] = 0;
	memset(hh.agent, '"', 256);
	hh.agent[256] = 0;
	n = sl_frame_hello_build(&hh, json, sizeof(json));
	CHECK(n > 0);
	CHECK_EQ(sl_frame_hello_parse((const uint8_t *)json, (size_t)n, &h), 0);
	CHECK(!memcmp(&h, &hh, sizeof(h)));
	char *p = strstr(json, "kkkk\"");
	CHECK(p);
	CHECK_EQ(json[n], 0);
	memmove(p + 1, p, strlen(p) + 1); /* one more 'k' */
	CHECK_EQ(sl_frame_hello_parse((const uint8_t *)json, (size_t)n + 1, &h), -EBADMSG);
	char big[SL_FRAME_HELLO_MAX + 2];
	memset(big, ' ', sizeof(big));
	memcpy(big, HELLO_OK, strlen(HELLO_OK));
	CHECK_EQ(sl_frame_hello_parse((const uint8_t *)big, SL_FRAME_HELLO_MAX, &h), 0);
	CHECK_EQ(sl_frame_hello_parse((const uint8_t *)big, SL_FRAME_HELLO_MAX + 1, &h), -EBADMSG);

	/* the builder refuses what the parser would */
	hh = hello_a;
	strcpy(hh.risk_class, "none");
	CHECK_EQ(sl_frame_hello_build(&hh, json, sizeof(json)), -EINVAL);
	hh = hello_a;
	hh.sandbox_id[0] = 'X';
	CHECK_EQ(sl_frame_hello_build(&hh, json, sizeof(json)), -EINVAL);
	hh = hello_a;
	hh.control[0] = 0;
	CHECK_EQ(sl_frame_hello_build(&hh, json, sizeof(json)), -EINVAL);
	hh = hello_a;
	strcpy(hh.version, "\xff");
	CHECK_EQ(sl_frame_hello_build(&hh, json, sizeof(json)), -EINVAL);
	CHECK_EQ(sl_frame_hello_build(&hello_a, json, 20), -ENOBUFS);
	/* and the encoder refuses a HELLO the parser would */
	struct pair pp;
	pair_init(&pp, key_a, key_a);
	uint8_t wire[512];
	size_t wn;
	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, (const uint8_t *)bad[6], strlen(bad[6]), &pp.sup, wire,
				 sizeof(wire), &wn),
		 -EINVAL);
	CHECK_EQ(pp.sup.send_seq, 0);
}

/* ---- HEARTBEAT JSON ---- */

static int hb_str(const char *json, struct sl_frame_heartbeat *hb)
{
	return sl_frame_heartbeat_parse((const uint8_t *)json, strlen(json), hb);
}

static void test_heartbeat_json(void)
{
	struct sl_frame_heartbeat hb;
	CHECK_EQ(
	    hb_str("{\"emitted\":10,\"recorded\":9,\"exported\":8,\"acked\":7,\"dropped\":0,\"backlog\":2}",
		   &hb),
	    0);
	CHECK(hb.emitted == 10 && hb.recorded == 9 && hb.exported == 8 && hb.acked == 7 && hb.dropped == 0 &&
	      hb.backlog == 2);
	CHECK_EQ(
	    hb_str("{\"backlog\":9223372036854775807,\"dropped\":0,\"acked\":0,\"exported\":0,\"recorded\":0,"
		   "\"emitted\":0}",
		   &hb),
	    0);
	CHECK(hb.backlog == (uint64_t)INT64_MAX);
	CHECK_EQ(
	    hb_str(" {\"emitted\": 0 ,\"recorded\":10,\"exported\":100,\"acked\":0,\"dropped\":0,\"backlog\":"
		   "1000000}\n",
		   &hb),
	    0);
	CHECK(hb.emitted == 0 && hb.recorded == 10 && hb.exported == 100 && hb.backlog == 1000000);
#define HB5 "\"recorded\":0,\"exported\":0,\"acked\":0,\"dropped\":0,\"backlog\":0"
	static const char *const bad[] = {
	    "{}",
	    "{" HB5 "}",				  /* missing */
	    "{\"emitted\":0," HB5 ",\"extra\":0}",	  /* unknown */
	    "{\"emitted\":0," HB5 ",\"emitted\":0}",	  /* duplicate */
	    "{\"recorded\":0," HB5 "}",			  /* duplicate instead of missing */
	    "{\"emitted\":-1," HB5 "}",			  /* negative */
	    "{\"emitted\":1.0," HB5 "}",		  /* not an integer */
	    "{\"emitted\":1e3," HB5 "}",		  /* not an integer */
	    "{\"emitted\":\"1\"," HB5 "}",		  /* string */
	    "{\"emitted\":true," HB5 "}",		  /* bool */
	    "{\"emitted\":null," HB5 "}",		  /* null */
	    "{\"emitted\":NaN," HB5 "}",		  /* json-c takes NaN */
	    "{\"emitted\":9223372036854775808," HB5 "}",  /* > 2^63-1 */
	    "{\"emitted\":18446744073709551615," HB5 "}", /* 2^64-1 */
	    "{\"emitted\":18446744073709551616," HB5 "}", /* json-c clamps this */
	    "{\"emitted\":-9223372036854775809," HB5 "}", /* clamps too */
	    "{\"emitted\":{\"a\":1}," HB5 "}",		  /* nested */
	    "{\"emitted\":[0]," HB5 "}",		  /* array */
	    "{\"emitted\":01," HB5 "}",			  /* leading zero */
	    "{\"emitted\":00," HB5 "}",			  /* json-c takes this */
	    "{\"emitted\":-0," HB5 "}",			  /* json-c takes this */
	    "{\"emitted\":+1," HB5 "}",			  /* sign */
	    "{\"emitted\":0x10," HB5 "}",		  /* hex */
	    "{\"emitted\":1E3," HB5 "}",		  /* exponent */
	    "{\"emitted\":0," HB5 "} {}",		  /* trailing */
	    "[{\"emitted\":0," HB5 "}]",		  /* not an object */
	};
	for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++)
		if (hb_str(bad[i], &hb) != -EBADMSG)
			die("heartbeat bad[%zu] accepted: %s", i, bad[i]);
	struct sl_frame_heartbeat big = {.backlog = (uint64_t)INT64_MAX + 1};
	char out[SL_FRAME_HEARTBEAT_MAX];
	CHECK_EQ(sl_frame_heartbeat_build(&big, out, sizeof(out)), -EINVAL);
	struct sl_frame_heartbeat maxed = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
	int n = sl_frame_heartbeat_build(&maxed, out, sizeof(out));
	CHECK(n > 0 && (size_t)n < SL_FRAME_HEARTBEAT_MAX);
	CHECK_EQ(sl_frame_heartbeat_parse((const uint8_t *)out, (size_t)n, &hb), 0);
	CHECK(!memcmp(&hb, &maxed, sizeof(hb)));
	CHECK_EQ(sl_frame_heartbeat_build(&maxed, out, 10), -ENOBUFS);
}

/* ---- the collector's HELLO-first flow ---- */

static void test_peek_hello(void)
{
	struct sl_frame_ctx sup, col;
	uint8_t wire[SL_FRAME_HELLO_MAX + 64], pl[SL_FRAME_HELLO_MAX], cf[64];
	size_t n, used, cn;
	struct sl_frame f;
	CHECK_EQ(sl_frame_ctx_init(&col, SL_FRAME_ROLE_COLLECTOR, NULL), 0); /* no key yet */
	CHECK_EQ(sl_frame_ctx_new_challenge(&col), 0);
	CHECK_EQ(sl_frame_encode(SL_FRAME_CHALLENGE, col.challenge, 16, &col, cf, sizeof(cf), &cn), 0);
	CHECK_EQ(sl_frame_ctx_init(&sup, SL_FRAME_ROLE_SUPERVISOR, key_a), 0);
	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, pl, 0, &sup, wire, sizeof(wire), &n),
		 -EINVAL); /* no challenge */
	CHECK_EQ(sl_frame_decode(cf, cn, &sup, &f, &used), 0);
	CHECK_EQ(sl_frame_ctx_accept(&sup, &f), 0);
	size_t pn = hello_payload(&hello_a, pl, sizeof(pl));
	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, pl, pn, &sup, wire, sizeof(wire), &n), 0);

	CHECK_EQ(sl_frame_decode(wire, n, &col, &f, &used), -ENOKEY);
	char id[33], kid[SL_FRAME_KEY_ID_LEN + 1];
	enum sl_frame_reject rej;
	for (size_t k = 0; k < n; k++)
		CHECK_EQ(sl_frame_peek_hello(wire, k, id, kid, &rej), -EAGAIN);
	CHECK_EQ(sl_frame_peek_hello(wire, n, id, kid, &rej), 0);
	CHECK(!strcmp(id, SB_A));
	CHECK(!strcmp(kid, KID_A));
	uint8_t k[32];
	CHECK_EQ(sl_frame_derive_key(master, id, k), 0);
	sl_frame_ctx_set_key(&col, k);
	CHECK_EQ(sl_frame_decode(wire, n, &col, &f, &used), 0);
	CHECK_EQ(sl_frame_ctx_accept(&col, &f), 0);

	/* A supervisor holding B's key claiming to be A: the peek says A, the key derived for A fails. */
	struct sl_frame_ctx supb = sup, colb;
	sl_frame_ctx_set_key(&supb, key_b);
	supb.send_seq = 0;
	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, pl, pn, &supb, wire, sizeof(wire), &n), 0);
	CHECK_EQ(sl_frame_peek_hello(wire, n, id, NULL, &rej), 0);
	CHECK(!strcmp(id, SB_A));
	CHECK_EQ(sl_frame_ctx_init(&colb, SL_FRAME_ROLE_COLLECTOR, NULL), 0);
	colb.have_challenge = true;
	memcpy(colb.challenge, col.challenge, 16);
	CHECK_EQ(sl_frame_derive_key(master, id, k), 0);
	sl_frame_ctx_set_key(&colb, k);
	CHECK_REJECT(sl_frame_decode(wire, n, &colb, &f, &used), f, SL_FRAME_REJECT_BAD_TAG);
	/* It claims A's key id (a lie the tag exposes): the verdict stays bad_tag. */
	CHECK_EQ(sl_frame_hello_tag_verdict(k, kid), SL_FRAME_REJECT_BAD_TAG);
	/* With its own (B's) key id, honestly: the verdict says another key signed it. */
	struct sl_frame_hello hb = hello_a;
	memcpy(hb.key_id, KID_B, sizeof(KID_B));
	uint8_t plb[SL_FRAME_HELLO_MAX];
	size_t pbn = hello_payload(&hb, plb, sizeof(plb));
	supb.send_seq = 0;
	CHECK_EQ(sl_frame_encode(SL_FRAME_HELLO, plb, pbn, &supb, wire, sizeof(wire), &n), 0);
	CHECK_EQ(sl_frame_peek_hello(wire, n, id, kid, &rej), 0);
	CHECK(!strcmp(id, SB_A) && !strcmp(kid, KID_B));
	CHECK_REJECT(sl_frame_decode(wire, n, &colb, &f, &used), f, SL_FRAME_REJECT_BAD_TAG);
	CHECK_EQ(sl_frame_hello_tag_verdict(k, kid), SL_FRAME_REJECT_WRONG_KEY);

	/* peek refuses what is not a HELLO */
	struct sl_frame_events_buf eb = {0};
	CHECK_EQ(sl_frame_events_add(&eb, "e", 1), 0);
	const uint8_t *ep = sl_frame_events_payload(&eb, &pn);
	CHECK_EQ(sl_frame_encode(SL_FRAME_EVENTS, ep, pn, &sup, wire, sizeof(wire), &n), 0);
	sl_frame_events_free(&eb);
	CHECK_EQ(sl_frame_peek_hello(wire, n, id, NULL, &rej), -EBADMSG);
	CHECK_EQ(rej, SL_FRAME_REJECT_BAD_TYPE);
	CHECK_EQ(sl_frame_peek_hello((const uint8_t *)"XLF1", 4, id, NULL, &rej), -EBADMSG);
	CHECK_EQ(rej, SL_FRAME_REJECT_BAD_MAGIC);
	const char *notjson = "{\"sandbox_id\":\"" SB_A "\"}";
	n = craft(wire, sizeof(wire), SL_FRAME_MAGIC, SL_FRAME_HELLO, 0, 0, (uint32_t)strlen(notjson), 1,
		  notjson, strlen(notjson), key_a, col.challenge);
	CHECK_EQ(sl_frame_peek_hello(wire, n, id, NULL, &rej), -EBADMSG);
	CHECK_EQ(rej, SL_FRAME_REJECT_BAD_PAYLOAD);
}

/* ---- encoder and builder edges ---- */

static void test_encoder(void)
{
	struct pair p;
	pair_init(&p, key_a, key_a);
	uint8_t wire[256], pl[64];
	size_t n = 12345;
	sl_frame_ack_payload(1, pl);
	/* wrong direction */
	CHECK_EQ(sl_frame_encode(SL_FRAME_ACK, pl, 8, &p.sup, wire, sizeof(wire), &n), -EINVAL);
	CHECK_EQ(sl_frame_encode(SL_FRAME_CHALLENGE, p.sup.challenge, 16, &p.sup, wire, sizeof(wire), &n),
		 -EINVAL);
	CHECK_EQ(sl_frame_encode(SL_FRAME_HEARTBEAT, pl, 8, &p.col, wire, sizeof(wire), &n), -EINVAL);
	CHECK_EQ(sl_frame_encode(0, pl, 8, &p.col, wire, sizeof(wire), &n), -EINVAL);
	CHECK_EQ(sl_frame_encode(7, pl, 8, &p.col, wire, sizeof(wire), &n), -EINVAL);
	/* a challenge other than the ctx's */
	uint8_t other[16] = {0};
	CHECK_EQ(sl_frame_encode(SL_FRAME_CHALLENGE, other, 16, &p.col, wire, sizeof(wire), &n), -EINVAL);
	/* too small a buffer: nothing advances */
	CHECK_EQ(sl_frame_encode(SL_FRAME_ACK, pl, 8, &p.col, wire, 16 + 8 + 31, &n), -ENOBUFS);
	CHECK_EQ(p.col.send_seq, 0);
	CHECK_EQ(sl_frame_encode(SL_FRAME_ACK, pl, 8, &p.col, wire, 16 + 8 + 32, &n), 0);
	CHECK_EQ(p.col.send_seq, 1);
	struct sl_frame f;
	size_t used;
	CHECK_EQ(sl_frame_decode(wire, n, &p.sup, &f, &used), 0);
	CHECK_EQ(sl_frame_ctx_accept(&p.sup, &f), 0);
	CHECK_EQ(sl_frame_encoded_len(SL_FRAME_ACK, 8), 56);
	CHECK_EQ(sl_frame_encoded_len(SL_FRAME_CHALLENGE, 16), 32);
	/* too long */
	CHECK_EQ(
	    sl_frame_encode(SL_FRAME_EVENTS, pl, SL_FRAME_MAX_PAYLOAD + 1, &p.sup, wire, sizeof(wire), &n),
	    -EMSGSIZE);
	/* in place: the payload already sits after the header's room */
	uint8_t *inplace = wire + 16;
	sl_frame_ack_payload(77, inplace);
	CHECK_EQ(sl_frame_encode(SL_FRAME_ACK, inplace, 8, &p.col, wire, sizeof(wire), &n), 0);
	CHECK_EQ(sl_frame_decode(wire, n, &p.sup, &f, &used), 0);
	CHECK_EQ(f.ack_seq, 77);
	CHECK_EQ(f.seq, 2);
	/* a collector without a key */
	struct sl_frame_ctx nokey;
	CHECK_EQ(sl_frame_ctx_init(&nokey, SL_FRAME_ROLE_COLLECTOR, NULL), 0);
	CHECK_EQ(sl_frame_ctx_new_challenge(&nokey), 0);
	CHECK_EQ(sl_frame_encode(SL_FRAME_ACK, pl, 8, &nokey, wire, sizeof(wire), &n), -EINVAL);
	CHECK_EQ(sl_frame_ctx_init(&nokey, 0, NULL), -EINVAL);
	CHECK_EQ(sl_frame_ctx_new_challenge(&p.sup), -EINVAL);

	/* events builder */
	struct sl_frame_events_buf eb;
	sl_frame_events_init(&eb);
	CHECK(sl_frame_events_payload(&eb, &n) == NULL && n == 0);
	CHECK_EQ(sl_frame_events_add(&eb, "", 0), -EINVAL);
	CHECK_EQ(sl_frame_events_add(&eb, "a\n", 2), -EINVAL);
	CHECK_EQ(eb.count, 0);
	for (uint32_t i = 0; i < SL_FRAME_EVENTS_MAX; i++)
		CHECK_EQ(sl_frame_events_add(&eb, "e", 1), 0);
	CHECK_EQ(sl_frame_events_add(&eb, "e", 1), -ENOSPC);
	const uint8_t *ep = sl_frame_events_payload(&eb, &n);
	CHECK_EQ(n, 4 + 5 * SL_FRAME_EVENTS_MAX);
	static uint8_t big[SL_FRAME_MAX_FRAME];
	size_t bn;
	CHECK_EQ(sl_frame_encode(SL_FRAME_EVENTS, ep, n, &p.sup, big, sizeof(big), &bn), 0);
	sl_frame_events_reset(&eb);
	CHECK_EQ(sl_frame_events_add(&eb, "e", 1), 0);
	ep = sl_frame_events_payload(&eb, &n);
	CHECK_EQ(n, 9);
	/* fill by bytes: exactly to 1 MiB, then ENOSPC */
	sl_frame_events_reset(&eb);
	static char chunk[4096];
	memset(chunk, 'c', sizeof(chunk));
	size_t total = 4;
	for (;;) {
		size_t left = SL_FRAME_MAX_PAYLOAD - total;
		if (left <= 4)
			break;
		size_t want = left - 4 > sizeof(chunk) ? sizeof(chunk) : left - 4;
		CHECK_EQ(sl_frame_events_add(&eb, chunk, want), 0);
		total += 4 + want;
	}
	CHECK_EQ(total, SL_FRAME_MAX_PAYLOAD);
	CHECK_EQ(sl_frame_events_add(&eb, "e", 1), -ENOSPC);
	ep = sl_frame_events_payload(&eb, &n);
	CHECK_EQ(n, SL_FRAME_MAX_PAYLOAD);
	CHECK_EQ(sl_frame_encode(SL_FRAME_EVENTS, ep, n, &p.sup, big, sizeof(big), &bn), 0);
	sl_frame_events_free(&eb);
	sl_frame_events_free(&eb); /* twice is fine */

	/* an iterator on a non-EVENTS frame yields nothing */
	struct sl_frame_events_iter it;
	const uint8_t *line;
	size_t ll;
	sl_frame_events_begin(&f, &it);
	CHECK(!sl_frame_events_next(&it, &line, &ll));
}

int main(void)
{
	for (int i = 0; i < 32; i++)
		master[i] = (uint8_t)i;
	CHECK_EQ(sl_frame_derive_key(master, SB_A, key_a), 0);
	CHECK_EQ(sl_frame_derive_key(master, SB_B, key_b), 0);
	test_names();
	test_derive_key();
	test_wire_vector();
	test_round_trips();
	test_stream();
	test_truncation();
	test_reject_auth();
	test_reject_header();
	test_reject_replay();
	test_reject_payload();
	test_hello_json();
	test_heartbeat_json();
	test_peek_hello();
	test_encoder();
	printf("test_frame: ok\n");
	return 0;
}
