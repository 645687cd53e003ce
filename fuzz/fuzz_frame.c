/* libFuzzer target for the export frame codec. The Makefile's fuzz build links only the pure parsers,
 * so the codec is compiled in here (its static helpers are then reachable too).
 *
 * The first input byte picks a mode, the rest is the body:
 *  0  stream: decode frames from the body with a collector's ctx, accepting as a collector would, until
 *     a reject or the end; every verdict must be consistent with the verdicts on prefixes.
 *  1  the same with a supervisor's ctx (which takes the unauthenticated CHALLENGE).
 *  2  the body as a HELLO payload: sl_frame_peek_hello + sl_frame_hello_parse; what parses must
 *     rebuild and reparse to the same.
 *  3  the body as a HEARTBEAT payload: the same.
 *  4  round trip: body[0] picks the type, the rest is the payload. What the encoder takes must decode
 *     to the same; what it refuses, sent anyway with a valid tag, the decoder must refuse too.
 *  5  EVENTS builder: the body split at '\n' into lines, batched, encoded, decoded, iterated: the same
 *     lines come out in the same order.
 *  6  crafted header with a valid tag: body[0..4] give type, flags, reserved, seq offset; the decoder's
 *     verdict must match a simple independent expectation. */
#include "../src/export/frame.c"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                             \
	do {                                                                                                 \
		if (!(c))                                                                                    \
			abort();                                                                             \
	} while (0)

static uint8_t fz_key[SL_FRAME_KEY_LEN];
static const uint8_t fz_challenge[SL_FRAME_CHALLENGE_LEN] = {0x5a, 1, 2,  3,  4,  5,  6,  7,
							     8,	   9, 10, 11, 12, 13, 14, 15};

static void fz_init(void)
{
	static bool done;
	if (done)
		return;
	uint8_t master[SL_FRAME_MASTER_LEN];
	for (unsigned i = 0; i < sizeof(master); i++)
		master[i] = (uint8_t)(0x40 + i);
	CHECK(sl_frame_derive_key(master, "00112233445566778899aabbccddeeff", fz_key) == 0);
	done = true;
}

/* A connected collector/supervisor pair with the fixed key and challenge. */
static void fz_ctx(struct sl_frame_ctx *col, struct sl_frame_ctx *sup)
{
	CHECK(sl_frame_ctx_init(col, SL_FRAME_ROLE_COLLECTOR, fz_key) == 0);
	CHECK(sl_frame_ctx_init(sup, SL_FRAME_ROLE_SUPERVISOR, fz_key) == 0);
	memcpy(col->challenge, fz_challenge, sizeof(fz_challenge));
	memcpy(sup->challenge, fz_challenge, sizeof(fz_challenge));
	col->have_challenge = sup->have_challenge = true;
}

/* The verdict on a prefix must be -EAGAIN or the verdict on the whole. */
static void check_prefix(const uint8_t *buf, size_t len, const struct sl_frame_ctx *ctx, int r_all,
			 const struct sl_frame *f_all, size_t used_all, size_t k)
{
	struct sl_frame f;
	size_t used;
	if (k > len)
		return;
	int r = sl_frame_decode(buf, k, ctx, &f, &used);
	if (r_all == 0) {
		if (k < used_all)
			CHECK(r == -EAGAIN && used == 0);
		else
			CHECK(r == 0 && used == used_all && f.seq == f_all->seq && f.type == f_all->type);
	} else {
		CHECK(r == -EAGAIN || (r == r_all && f.reject == f_all->reject));
	}
}

static void check_frame(const struct sl_frame *f, const uint8_t *buf, size_t used)
{
	CHECK(f->reject == SL_FRAME_REJECT_NONE);
	CHECK(f->frame_len == used && used == sl_frame_encoded_len(f->type, f->payload_len));
	CHECK(f->payload == buf + SL_FRAME_HDR_LEN && f->payload_len <= SL_FRAME_MAX_PAYLOAD);
	if (f->type == SL_FRAME_EVENTS) {
		struct sl_frame_events_iter it;
		const uint8_t *line;
		size_t ll, total = 4;
		uint32_t n = 0;
		sl_frame_events_begin(f, &it);
		while (sl_frame_events_next(&it, &line, &ll)) {
			CHECK(ll >= 1 && line >= f->payload && line + ll <= f->payload + f->payload_len);
			CHECK(!memchr(line, '\n', ll));
			total += 4 + ll;
			n++;
		}
		CHECK(n == f->event_count && n >= 1 && n <= SL_FRAME_EVENTS_MAX && total == f->payload_len);
	} else if (f->type == SL_FRAME_HELLO) {
		struct sl_frame_hello h;
		(void)sl_frame_hello_parse(f->payload, f->payload_len, &h);
	} else if (f->type == SL_FRAME_HEARTBEAT) {
		struct sl_frame_heartbeat hb;
		(void)sl_frame_heartbeat_parse(f->payload, f->payload_len, &hb);
	} else if (f->type == SL_FRAME_ERROR) {
		CHECK(f->error_msg_len == f->payload_len - 2u && f->error_msg_len <= SL_FRAME_ERROR_MSG_MAX);
	}
}

static void mode_stream(const uint8_t *buf, size_t len, bool supervisor)
{
	struct sl_frame_ctx col, sup;
	fz_ctx(&col, &sup);
	struct sl_frame_ctx *ctx = supervisor ? &sup : &col;
	if (supervisor)
		sup.have_challenge = false; /* it waits for the CHALLENGE */
	size_t off = 0;
	for (int frames = 0; frames < 1000; frames++) {
		struct sl_frame f;
		size_t used = 12345;
		const uint8_t *p = buf + off;
		size_t n = len - off;
		int r = sl_frame_decode(p, n, ctx, &f, &used);
		check_prefix(p, n, ctx, r, &f, used, n ? n - 1 : 0);
		check_prefix(p, n, ctx, r, &f, used, n / 2);
		check_prefix(p, n, ctx, r, &f, used, n < 16 ? n : 16);
		if (r == 0) {
			check_frame(&f, p, used);
			CHECK(used <= n);
			CHECK(sl_frame_ctx_accept(ctx, &f) == 0);
			off += used;
			continue;
		}
		CHECK(used == 0);
		if (r == -EAGAIN) {
			CHECK(f.reject == SL_FRAME_REJECT_NONE);
			r = sl_frame_decode_eof(p, n, ctx, &f, &used);
			CHECK(n ? (r == -EBADMSG && f.reject == SL_FRAME_REJECT_TRUNCATED_BODY)
				: r == -ENODATA);
		} else {
			CHECK(r == -EBADMSG);
			CHECK(f.reject > SL_FRAME_REJECT_NONE && f.reject < SL_FRAME_REJECT_COUNT_ &&
			      f.reject != SL_FRAME_REJECT_TRUNCATED_BODY);
			CHECK(strcmp(sl_frame_reject_name(f.reject), "unknown") != 0);
		}
		break;
	}
}

static void mode_hello(const uint8_t *buf, size_t len)
{
	struct sl_frame_hello h, h2;
	int r = sl_frame_hello_parse(buf, len, &h);
	CHECK(r == 0 || r == -EBADMSG);
	/* peek on the body wrapped as a HELLO frame (the tag is not checked by peek) */
	uint8_t *fr = malloc(sl_frame_encoded_len(SL_FRAME_HELLO, len));
	CHECK(fr);
	put_le32(fr, SL_FRAME_MAGIC);
	fr[4] = SL_FRAME_HELLO;
	fr[5] = fr[6] = fr[7] = 0;
	put_le32(fr + 8, (uint32_t)len);
	put_le32(fr + 12, 1);
	if (len)
		memcpy(fr + SL_FRAME_HDR_LEN, buf, len);
	memset(fr + SL_FRAME_HDR_LEN + len, 0, SL_FRAME_TAG_LEN);
	char id[SL_FRAME_SANDBOX_ID_LEN + 1], kid[SL_FRAME_KEY_ID_LEN + 1];
	enum sl_frame_reject rej;
	int pr = sl_frame_peek_hello(fr, sl_frame_encoded_len(SL_FRAME_HELLO, len), id, kid, &rej);
	free(fr);
	if (len > SL_FRAME_MAX_PAYLOAD)
		CHECK(pr == -EBADMSG && rej == SL_FRAME_REJECT_OVERSIZE);
	else if (r == 0)
		CHECK(pr == 0 && !strcmp(id, h.sandbox_id) && !strcmp(kid, h.key_id));
	else
		CHECK(pr == -EBADMSG && rej == SL_FRAME_REJECT_BAD_PAYLOAD);
	if (r != 0)
		return;
	CHECK(sl_frame_sandbox_id_valid(h.sandbox_id));
	/* the verdict on a failed tag is one of the two, whatever key id the HELLO claims */
	enum sl_frame_reject v = sl_frame_hello_tag_verdict(fz_key, h.key_id);
	CHECK(v == SL_FRAME_REJECT_BAD_TAG || v == SL_FRAME_REJECT_WRONG_KEY);
	char out[SL_FRAME_HELLO_MAX];
	int n = sl_frame_hello_build(&h, out, sizeof(out));
	CHECK(n > 0 && (size_t)n < sizeof(out));
	CHECK(sl_frame_hello_parse((const uint8_t *)out, (size_t)n, &h2) == 0);
	CHECK(!memcmp(&h, &h2, sizeof(h)));
}

static void mode_heartbeat(const uint8_t *buf, size_t len)
{
	struct sl_frame_heartbeat hb, hb2;
	int r = sl_frame_heartbeat_parse(buf, len, &hb);
	CHECK(r == 0 || r == -EBADMSG);
	if (r != 0)
		return;
	char out[SL_FRAME_HEARTBEAT_MAX];
	int n = sl_frame_heartbeat_build(&hb, out, sizeof(out));
	CHECK(n > 0);
	CHECK(sl_frame_heartbeat_parse((const uint8_t *)out, (size_t)n, &hb2) == 0);
	CHECK(!memcmp(&hb, &hb2, sizeof(hb)));
}

static void mode_roundtrip(const uint8_t *buf, size_t len)
{
	if (len < 1)
		return;
	uint8_t type = (uint8_t)(1 + buf[0] % 6);
	const uint8_t *pl = buf + 1;
	size_t plen = len - 1;
	struct sl_frame_ctx col, sup;
	fz_ctx(&col, &sup);
	bool from_col =
	    type == SL_FRAME_CHALLENGE || type == SL_FRAME_ACK || (type == SL_FRAME_ERROR && (buf[0] & 0x80));
	struct sl_frame_ctx *tx = from_col ? &col : &sup;
	struct sl_frame_ctx *rx = from_col ? &sup : &col;
	if (type == SL_FRAME_CHALLENGE) {
		rx->have_challenge = false;
		if (plen >= SL_FRAME_CHALLENGE_LEN)
			memcpy(col.challenge, pl, SL_FRAME_CHALLENGE_LEN); /* any challenge value */
	}
	if (type != SL_FRAME_HELLO && type != SL_FRAME_CHALLENGE && !from_col)
		rx->recv_seq = 1, tx->send_seq = 1; /* after the HELLO */

	size_t cap = sl_frame_encoded_len(type, plen);
	uint8_t *wire = malloc(cap ? cap : 1);
	CHECK(wire);
	size_t n = 0, used;
	struct sl_frame f;
	uint32_t seq_before = tx->send_seq;
	int r = sl_frame_encode(type, pl, plen, tx, wire, cap, &n);
	if (r == 0) {
		CHECK(n == cap);
		CHECK(type == SL_FRAME_CHALLENGE ? tx->send_seq == seq_before
						 : tx->send_seq == seq_before + 1);
		int d = sl_frame_decode(wire, n, rx, &f, &used);
		CHECK(d == 0 && used == n && f.type == type && f.payload_len == plen);
		CHECK(!plen || !memcmp(f.payload, pl, plen));
		check_frame(&f, wire, used);
		CHECK(f.seq == (type == SL_FRAME_CHALLENGE ? 0 : seq_before + 1));
		if (type == SL_FRAME_ACK)
			CHECK(f.ack_seq == get_le64(pl));
		if (type == SL_FRAME_ERROR)
			CHECK(f.error_code == get_le16(pl) && !memcmp(f.error_msg, pl + 2, plen - 2));
		if (type == SL_FRAME_CHALLENGE)
			CHECK(!memcmp(f.challenge, col.challenge, SL_FRAME_CHALLENGE_LEN));
		if (type == SL_FRAME_HELLO) {
			struct sl_frame_hello h;
			CHECK(sl_frame_hello_parse(f.payload, f.payload_len, &h) == 0);
		}
		if (type == SL_FRAME_HEARTBEAT) {
			struct sl_frame_heartbeat hb;
			CHECK(sl_frame_heartbeat_parse(f.payload, f.payload_len, &hb) == 0);
		}
		CHECK(sl_frame_ctx_accept(rx, &f) == 0);
		/* the same frame again is a replay (or, for CHALLENGE, a second challenge) */
		int again = sl_frame_decode(wire, n, rx, &f, &used);
		bool once =
		    type == SL_FRAME_CHALLENGE || type == SL_FRAME_HELLO; /* only one per connection */
		CHECK(again == -EBADMSG &&
		      f.reject == (once ? SL_FRAME_REJECT_BAD_TYPE : SL_FRAME_REJECT_REPLAY));
	} else {
		CHECK(r == -EINVAL || r == -EMSGSIZE);
		CHECK(tx->send_seq == seq_before);
		if (type != SL_FRAME_CHALLENGE && plen <= SL_FRAME_MAX_PAYLOAD) {
			/* send it anyway, correctly tagged: the peer must refuse the payload */
			put_le32(wire, SL_FRAME_MAGIC);
			wire[4] = type;
			wire[5] = wire[6] = wire[7] = 0;
			put_le32(wire + 8, (uint32_t)plen);
			put_le32(wire + 12, seq_before + 1);
			if (plen)
				memcpy(wire + SL_FRAME_HDR_LEN, pl, plen);
			CHECK(frame_tag(tx->key, tx->challenge, wire, wire + SL_FRAME_HDR_LEN, plen,
					wire + SL_FRAME_HDR_LEN + plen) == 0);
			int d = sl_frame_decode(wire, cap, rx, &f, &used);
			if (type == SL_FRAME_HELLO || type == SL_FRAME_HEARTBEAT) {
				/* carried as bytes; the parser is what refuses it */
				CHECK(d == 0);
				CHECK(!json_payload_valid(type, f.payload, f.payload_len));
			} else {
				CHECK(d == -EBADMSG && f.reject == SL_FRAME_REJECT_BAD_PAYLOAD);
			}
		}
	}
	free(wire);
}

struct ev_state {
	struct sl_frame_ctx col, sup;
	struct sl_frame_events_buf eb;
	const uint8_t *buf;
	size_t (*lines)[2];  /* offset, length of every line added, in order */
	size_t nlines, next; /* lines added; the next line the decoder must give */
};

/* Encode the batch, decode it, and check its lines are the next expected ones. */
static void ev_flush(struct ev_state *s)
{
	size_t pn;
	const uint8_t *p = sl_frame_events_payload(&s->eb, &pn);
	if (!p)
		return;
	size_t cap = sl_frame_encoded_len(SL_FRAME_EVENTS, pn), n, used;
	uint8_t *wire = malloc(cap);
	CHECK(wire);
	CHECK(sl_frame_encode(SL_FRAME_EVENTS, p, pn, &s->sup, wire, cap, &n) == 0 && n == cap);
	struct sl_frame f;
	CHECK(sl_frame_decode(wire, n, &s->col, &f, &used) == 0 && used == n);
	CHECK(sl_frame_ctx_accept(&s->col, &f) == 0);
	check_frame(&f, wire, used);
	CHECK(f.event_count == s->eb.count);
	struct sl_frame_events_iter it;
	const uint8_t *ln;
	size_t ll;
	sl_frame_events_begin(&f, &it);
	while (sl_frame_events_next(&it, &ln, &ll)) {
		CHECK(s->next < s->nlines);
		CHECK(ll == s->lines[s->next][1] && !memcmp(ln, s->buf + s->lines[s->next][0], ll));
		s->next++;
	}
	free(wire);
	sl_frame_events_reset(&s->eb);
}

static void mode_events(const uint8_t *buf, size_t len)
{
	struct ev_state s = {.buf = buf};
	fz_ctx(&s.col, &s.sup);
	s.col.recv_seq = s.sup.send_seq = 1; /* after the HELLO */
	sl_frame_events_init(&s.eb);
	s.lines = malloc((len + 1) * sizeof(*s.lines));
	CHECK(s.lines);
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && buf[i] != '\n')
			continue;
		size_t l = i - start;
		const uint8_t *line = buf + start;
		size_t off = start;
		start = i + 1;
		int r = sl_frame_events_add(&s.eb, line, l);
		if (l == 0) {
			CHECK(r == -EINVAL);
			continue;
		}
		if (l > SL_FRAME_EVENT_LINE_MAX) {
			CHECK(r == -E2BIG);
			continue;
		}
		if (r == -ENOSPC) {
			ev_flush(&s);
			r = sl_frame_events_add(&s.eb, line, l);
		}
		CHECK(r == 0);
		s.lines[s.nlines][0] = off;
		s.lines[s.nlines][1] = l;
		s.nlines++;
	}
	ev_flush(&s);
	CHECK(s.next == s.nlines);
	free(s.lines);
	sl_frame_events_free(&s.eb);
}

static void mode_crafted(const uint8_t *buf, size_t len)
{
	if (len < 5)
		return;
	uint8_t type = buf[0] & 7, flags = buf[1] & 1 ? buf[1] : 0;
	uint16_t reserved = buf[2] & 1 ? (uint16_t)(buf[2] | buf[3] << 8) : 0;
	int32_t delta = (int8_t)buf[4] % 3; /* -2..2 */
	const uint8_t *pl = buf + 5;
	size_t plen = len - 5;
	if (plen > SL_FRAME_MAX_PAYLOAD)
		return;
	struct sl_frame_ctx col, sup;
	fz_ctx(&col, &sup);
	col.recv_seq = 5; /* mid-connection */
	uint32_t seq = (uint32_t)(6 + delta);
	size_t cap = SL_FRAME_HDR_LEN + plen + SL_FRAME_TAG_LEN;
	uint8_t *wire = malloc(cap);
	CHECK(wire);
	put_le32(wire, SL_FRAME_MAGIC);
	wire[4] = type;
	wire[5] = flags;
	put_le16(wire + 6, reserved);
	put_le32(wire + 8, (uint32_t)plen);
	put_le32(wire + 12, seq);
	if (plen)
		memcpy(wire + SL_FRAME_HDR_LEN, pl, plen);
	CHECK(frame_tag(fz_key, fz_challenge, wire, wire + SL_FRAME_HDR_LEN, plen,
			wire + SL_FRAME_HDR_LEN + plen) == 0);
	struct sl_frame f;
	size_t used;
	int r = sl_frame_decode(wire, cap, &col, &f, &used);
	/* the collector mid-connection receives EVENTS, HEARTBEAT and ERROR */
	enum sl_frame_reject want = SL_FRAME_REJECT_NONE;
	if (type != SL_FRAME_EVENTS && type != SL_FRAME_HEARTBEAT && type != SL_FRAME_ERROR)
		want = SL_FRAME_REJECT_BAD_TYPE;
	else if (flags || reserved)
		want = SL_FRAME_REJECT_BAD_FLAGS;
	else if (delta != 0)
		want = SL_FRAME_REJECT_REPLAY;
	else if (!payload_valid(type, pl, plen, NULL))
		want = SL_FRAME_REJECT_BAD_PAYLOAD;
	if (want == SL_FRAME_REJECT_NONE) {
		CHECK(r == 0 && used == cap);
		check_frame(&f, wire, used);
	} else {
		CHECK(r == -EBADMSG && f.reject == want && used == 0);
	}
	free(wire);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_init();
	if (size < 1)
		return 0;
	const uint8_t *body = data + 1;
	size_t len = size - 1;
	switch (data[0] % 7) {
	case 0:
		mode_stream(body, len, false);
		break;
	case 1:
		mode_stream(body, len, true);
		break;
	case 2:
		mode_hello(body, len);
		break;
	case 3:
		mode_heartbeat(body, len);
		break;
	case 4:
		mode_roundtrip(body, len);
		break;
	case 5:
		mode_events(body, len);
		break;
	case 6:
		mode_crafted(body, len);
		break;
	}
	return 0;
}
