/* The record verifier. It reads the record as hostile input: one line at a time, never more than
 * SL_RECORD_LINE_MAX of it buffered, every line checked twice (its raw bytes against the exact shape
 * the writer produces, and as one strict JSON object with the bounded scanner of json_scan.h, which
 * is stricter than json-c and about 20x faster), its hash recomputed, its link to
 * the line before checked. It reports the first problem only (docs/record.md).
 *
 * How a tamper shows, and why it is classified so (the unit test pins each case):
 *  - A line whose bytes do not hash to its own "hash", or that is not a well-formed event (bad JSON,
 *    a member missing or of the wrong type, members out of the writer's order, a duplicated key
 *    that makes the parsed value differ from the raw one, a NUL byte, longer than the limit):
 *    EDITED at that line's position (the seq expected there).
 *  - A line that hashes correctly, has the expected seq, but whose prev_hash is not the hash of the
 *    line before it: the link between line k-1 and line k is broken while both lines are internally
 *    consistent. The single edit that produces exactly this is "line k-1 was changed and its hash
 *    recomputed" (the common forgery: change an event, fix up its hash); we report EDITED at k-1 and
 *    count only the lines before it as good. The other single edit that breaks this link, "line k's
 *    prev_hash was changed and line k rehashed", would also break the k -> k+1 link; it is a forgery
 *    with nothing to gain and we do not look ahead to tell the two apart. At seq 1 the link is to the
 *    chain start (64 '0'), so a mismatch there is EDITED at 1.
 *  - A line whose seq is higher than expected: if the expected seq appears later in the file, the
 *    lines were moved (REORDERED); if it appears nowhere, it was removed (REMOVED). bad_seq is the
 *    expected seq in both cases. A swap of lines k and m > k is therefore REORDERED at k, not
 *    REMOVED at k.
 *  - A line whose seq is lower than expected (a moved-back or duplicated line): REORDERED at the
 *    expected seq.
 *  - A last line without its '\n', or no record.end line at all: TRUNCATED at the seq after the last
 *    good one.
 *  - record.begin anywhere but line 1, line 1 not record.begin, a sandbox_id that differs from line
 *    1's, and any byte after the record.end line: EDITED at that line's position.
 * Checks run in this order per line, so a line that is both moved and edited is EDITED. */
#include "record/record.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "record/json_scan.h"
#include "record/record_internal.h"

/* ---- line source: a buffer, or a file read with pread in chunks ---- */

#define READ_CHUNK (64u << 10)

struct line_src {
	int fd; /* >= 0: file mode */
	const char *mem;
	size_t mem_len;
	uint64_t off; /* source offset of the next line */
	/* file mode: buf[start, end) holds source bytes from off on */
	char *buf;
	size_t start, end;
	uint64_t read_off; /* source offset of buf[end] */
	bool eof;
};

struct line {
	const char *p;
	size_t len; /* without the '\n' */
	bool nl;
};

static int src_init_file(struct line_src *s, int fd, uint64_t off)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->off = s->read_off = off;
	s->buf = malloc(SL_RECORD_LINE_MAX + READ_CHUNK);
	return s->buf ? 0 : -ENOMEM;
}

static void src_init_mem(struct line_src *s, const char *buf, size_t len, uint64_t off)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->mem = buf;
	s->mem_len = len;
	s->off = off;
}

static void src_free(struct line_src *s)
{
	free(s->buf);
	s->buf = NULL;
}

/* The next line. Returns 1 (line in *l, valid until the next call), 0 at the end, -E2BIG if the line
 * is longer than SL_RECORD_LINE_MAX with its '\n' (the source is then left at an unknown position:
 * the caller stops), or -errno. */
static int src_next(struct line_src *s, struct line *l)
{
	if (s->fd < 0) {
		size_t left = s->mem_len - (size_t)s->off;
		if (left == 0)
			return 0;
		const char *p = s->mem + s->off;
		size_t win = left < SL_RECORD_LINE_MAX ? left : SL_RECORD_LINE_MAX;
		const char *nl = memchr(p, '\n', win);
		if (!nl && left >= SL_RECORD_LINE_MAX)
			return -E2BIG;
		l->p = p;
		l->len = nl ? (size_t)(nl - p) : left;
		l->nl = nl != NULL;
		s->off += l->len + (nl ? 1 : 0);
		return 1;
	}
	size_t scanned = 0; /* bytes of buf[start, end) known to hold no '\n' */
	for (;;) {
		size_t have = s->end - s->start;
		size_t win = have < SL_RECORD_LINE_MAX ? have : SL_RECORD_LINE_MAX;
		const char *p = s->buf + s->start;
		const char *nl = win > scanned ? memchr(p + scanned, '\n', win - scanned) : NULL;
		if (nl) {
			l->p = p;
			l->len = (size_t)(nl - p);
			l->nl = true;
			s->start += l->len + 1;
			s->off += l->len + 1;
			return 1;
		}
		scanned = win;
		if (have >= SL_RECORD_LINE_MAX)
			return -E2BIG;
		if (s->eof) {
			if (have == 0)
				return 0;
			l->p = p;
			l->len = have;
			l->nl = false;
			s->start = s->end;
			s->off += have;
			return 1;
		}
		if (s->start > 0) {
			memmove(s->buf, p, have);
			s->start = 0;
			s->end = have;
		}
		ssize_t n;
		do {
			n = pread(s->fd, s->buf + s->end, READ_CHUNK, (off_t)s->read_off);
		} while (n < 0 && errno == EINTR);
		if (n < 0)
			return -errno;
		if (n == 0)
			s->eof = true;
		s->end += (size_t)n;
		s->read_off += (uint64_t)n;
	}
}

/* ---- one line ---- */

struct event {
	uint64_t seq;
	const char *sid; /* SL_RECORD_SID_LEN bytes */
	const char *cls; /* cls_len bytes */
	size_t cls_len;
	const char *prev;  /* SL_RECORD_HASH_LEN bytes */
	const char *hash;  /* SL_RECORD_HASH_LEN bytes */
	size_t prefix_len; /* the hashed bytes */
	int64_t time_ns;   /* "time", as the raw parse read it */
};

struct verifier {
	EVP_MD *md;
	EVP_MD_CTX *ctx;
	struct sl_jscan scan; /* the current line's top-level members */
};

static bool lit(const char **p, const char *end, const char *s, size_t n)
{
	if ((size_t)(end - *p) < n || memcmp(*p, s, n))
		return false;
	*p += n;
	return true;
}
#define LIT(p, end, s) lit((p), (end), (s), sizeof(s) - 1)

/* A decimal as the writer prints it: no sign, no leading zero, at most max. */
static bool digits(const char **p, const char *end, uint64_t max, uint64_t *out)
{
	const char *q = *p;
	uint64_t v = 0;
	if (q == end || *q < '0' || *q > '9' || (*q == '0' && q + 1 < end && q[1] >= '0' && q[1] <= '9'))
		return false;
	while (q < end && *q >= '0' && *q <= '9') {
		unsigned d = (unsigned)(*q - '0');
		if (v > (max - d) / 10)
			return false;
		v = v * 10 + d;
		q++;
	}
	*p = q;
	*out = v;
	return true;
}

/* The raw seq of a line, for the look-ahead: only the first member. */
static bool raw_seq(const struct line *l, uint64_t *seq)
{
	const char *p = l->p, *end = l->p + l->len;
	return LIT(&p, end, SL_RECORD_K_SEQ) && digits(&p, end, INT64_MAX, seq) && p < end && *p == ',';
}

/* The raw shape: {"seq":N,"sandbox_id":"<32 hex>","time":T,"class":"C",  ...
 * ...,"prev_hash":"<64 hex>","hash":"<64 hex>"}. Fills ev or says what is wrong. */
static const char *parse_raw(const struct line *l, struct event *ev)
{
	const char *p = l->p, *end = l->p + l->len;
	if (!LIT(&p, end, SL_RECORD_K_SEQ) || !digits(&p, end, INT64_MAX, &ev->seq) || ev->seq == 0)
		return "does not start with {\"seq\":N";
	if (!LIT(&p, end, SL_RECORD_K_SANDBOX) || end - p < SL_RECORD_SID_LEN ||
	    !sl_record_is_lower_hex(p, SL_RECORD_SID_LEN))
		return "sandbox_id missing or not 32 lowercase hex";
	ev->sid = p;
	p += SL_RECORD_SID_LEN;
	uint64_t t;
	if (!LIT(&p, end, SL_RECORD_K_TIME))
		return "time missing";
	bool neg = p < end && *p == '-';
	p += neg;
	if (!digits(&p, end, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &t) || (neg && t == 0))
		return "time is not an integer";
	ev->time_ns = neg ? (int64_t)(0 - t) : (int64_t)t;
	if (!LIT(&p, end, SL_RECORD_K_CLASS))
		return "class missing";
	ev->cls = p;
	while (p < end && p - ev->cls <= SL_RECORD_CLASS_MAX && sl_record_class_char(*p))
		p++;
	ev->cls_len = (size_t)(p - ev->cls);
	if (ev->cls_len == 0 || ev->cls_len > SL_RECORD_CLASS_MAX || !LIT(&p, end, SL_RECORD_K_CLASS_END))
		return "class is not a valid class name";

	/* The end of the line, from the back. */
	if ((size_t)(end - p) < SL_RECORD_PREV_MEMBER_LEN + SL_RECORD_HASH_MEMBER_LEN)
		return "prev_hash/hash missing";
	const char *h = end - SL_RECORD_HASH_MEMBER_LEN;
	ev->prefix_len = (size_t)(h - l->p);
	if (!LIT(&h, end, SL_RECORD_K_HASH) || !sl_record_is_lower_hex(h, SL_RECORD_HASH_LEN))
		return "does not end with ,\"hash\":\"<64 lowercase hex>\"}";
	ev->hash = h;
	h += SL_RECORD_HASH_LEN;
	if (!LIT(&h, end, SL_RECORD_K_HASH_END))
		return "does not end with ,\"hash\":\"<64 lowercase hex>\"}";
	const char *q = l->p + ev->prefix_len - SL_RECORD_PREV_MEMBER_LEN;
	if (!LIT(&q, end, SL_RECORD_K_PREV) || !sl_record_is_lower_hex(q, SL_RECORD_HASH_LEN) ||
	    q[SL_RECORD_HASH_LEN] != '"')
		return "prev_hash is not the last member before hash, or not 64 lowercase hex";
	ev->prev = q;
	return NULL;
}

/* Is the top member m a string whose raw bytes are exactly want (no escapes: the stamped members are
 * hex and class-alphabet text, written raw)? */
static bool member_str_is(const struct sl_jscan_member *m, const char *want, size_t want_len)
{
	return m && m->type == SL_JSCAN_STRING && !m->escaped && m->val_len == want_len &&
	       !memcmp(m->val, want, want_len);
}

/* Is the line one strict JSON object whose members agree with the raw parse? The raw parse alone
 * would accept broken JSON in the middle; a JSON parse alone would accept a duplicated key whose
 * later value silently replaces the one that was hashed first. The scanner (record/json_scan.h)
 * refuses duplicate top-level keys outright, and is stricter than json-c everywhere else. */
static const char *parse_json(struct verifier *v, const struct line *l, const struct event *ev)
{
	const char *why;
	struct sl_jscan *sc = &v->scan;
	if (sl_jscan_object(l->p, l->len, sc, &why) < 0)
		return "not one valid JSON object";
	const struct sl_jscan_member *seq = sl_jscan_get(sc, "seq", 3);
	uint64_t n;
	const char *q = seq ? seq->val : NULL;
	if (!seq || seq->type != SL_JSCAN_INT || !digits(&q, seq->val + seq->val_len, INT64_MAX, &n) ||
	    q != seq->val + seq->val_len || n != ev->seq)
		return "seq is not the integer it appears to be";
	if (!member_str_is(sl_jscan_get(sc, "sandbox_id", 10), ev->sid, SL_RECORD_SID_LEN) ||
	    !member_str_is(sl_jscan_get(sc, "class", 5), ev->cls, ev->cls_len) ||
	    !member_str_is(sl_jscan_get(sc, "prev_hash", 9), ev->prev, SL_RECORD_HASH_LEN) ||
	    !member_str_is(sl_jscan_get(sc, "hash", 4), ev->hash, SL_RECORD_HASH_LEN))
		return "a stamped member is missing, not a string, or given twice";
	const struct sl_jscan_member *t = sl_jscan_get(sc, "time", 4), *o = sl_jscan_get(sc, "observer", 8),
				     *id = sl_jscan_get(sc, "identity", 8);
	if (!t || t->type != SL_JSCAN_INT || !o || o->type != SL_JSCAN_STRING || !id ||
	    id->type != SL_JSCAN_OBJECT)
		return "time, observer or identity missing or of the wrong type";
	return NULL;
}

static const char *check_hash(struct verifier *v, const struct line *l, const struct event *ev)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	if (EVP_DigestInit_ex2(v->ctx, v->md, NULL) != 1 ||
	    EVP_DigestUpdate(v->ctx, l->p, ev->prefix_len) != 1 ||
	    EVP_DigestFinal_ex(v->ctx, md, &md_len) != 1 || md_len != SL_RECORD_HASH_LEN / 2)
		return "cannot compute SHA-256";
	char hex[SL_HASH_HEX];
	sl_hex(md, md_len, hex);
	return memcmp(hex, ev->hash, SL_RECORD_HASH_LEN) ? "content does not match its hash" : NULL;
}

static const char *check_line(struct verifier *v, const struct line *l, struct event *ev)
{
	if (memchr(l->p, '\0', l->len))
		return "contains a NUL byte";
	const char *why = parse_raw(l, ev);
	if (!why)
		why = parse_json(v, l, ev);
	if (!why)
		why = check_hash(v, l, ev);
	return why;
}

/* Does a line with seq want appear after the current position? */
static int seq_appears_later(const struct line_src *cur, uint64_t want, bool *found)
{
	struct line_src s;
	int rc = 0;
	*found = false;
	if (cur->fd >= 0) {
		rc = src_init_file(&s, cur->fd, cur->off);
		if (rc < 0)
			goto out;
	} else {
		src_init_mem(&s, cur->mem, cur->mem_len, cur->off);
	}
	struct line l;
	uint64_t seq;
	while ((rc = src_next(&s, &l)) == 1) {
		if (raw_seq(&l, &seq) && seq == want) {
			*found = true;
			break;
		}
	}
	if (rc == -E2BIG || rc == 1)
		rc = 0; /* an overlong line ends the search: it is not an event */
out:
	src_free(&s);
	return rc;
}

/* ---- the walk ---- */

static int fail(struct sl_verify_result *res, enum sl_verify_reason why, uint64_t bad_seq, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));
static int fail(struct sl_verify_result *res, enum sl_verify_reason why, uint64_t bad_seq, const char *fmt,
		...)
{
	va_list ap;
	res->reason = why;
	res->bad_seq = bad_seq;
	va_start(ap, fmt);
	vsnprintf(res->detail, sizeof(res->detail), fmt, ap);
	va_end(ap);
	return 1;
}

static int walk(struct verifier *v, struct line_src *s, struct sl_verify_result *res)
{
	uint64_t expect = 1;
	char prev_head[SL_HASH_HEX]; /* hash of line expect-2, for EDITED at expect-1 */
	char sid[SL_RECORD_SID_LEN + 1] = "";
	bool ended = false;
	memcpy(res->head, SL_RECORD_ZERO_HASH, SL_HASH_HEX);
	memcpy(prev_head, SL_RECORD_ZERO_HASH, SL_HASH_HEX);

	for (;;) {
		struct line l;
		struct event ev;
		int rc = src_next(s, &l);
		if (rc == 0)
			break;
		if (rc < 0 && rc != -E2BIG)
			return rc;
		if (ended)
			return fail(res, SL_VERIFY_EDITED, expect,
				    "data after the record.end line (seq %" PRIu64 ")", expect - 1);
		if (rc == -E2BIG)
			return fail(res, SL_VERIFY_EDITED, expect, "line longer than %u bytes",
				    SL_RECORD_LINE_MAX);
		if (!l.nl)
			return fail(res, SL_VERIFY_TRUNCATED, expect,
				    "the file ends mid-line (%zu bytes, no newline)", l.len);
		const char *why = check_line(v, &l, &ev);
		if (why)
			return fail(res, SL_VERIFY_EDITED, expect, "%s", why);
		if (ev.seq > expect) {
			bool later;
			rc = seq_appears_later(s, expect, &later);
			if (rc < 0)
				return rc;
			if (later)
				return fail(res, SL_VERIFY_REORDERED, expect,
					    "seq %" PRIu64 " appears before seq %" PRIu64, ev.seq, expect);
			return fail(res, SL_VERIFY_REMOVED, expect,
				    "seq %" PRIu64 " is missing: the next line is seq %" PRIu64, expect,
				    ev.seq);
		}
		if (ev.seq < expect)
			return fail(res, SL_VERIFY_REORDERED, expect,
				    "seq %" PRIu64 " appears where seq %" PRIu64 " belongs", ev.seq, expect);
		if (memcmp(ev.prev, res->head, SL_RECORD_HASH_LEN)) {
			if (expect == 1)
				return fail(res, SL_VERIFY_EDITED, 1,
					    "seq 1's prev_hash is not the chain start");
			/* Line expect-1 was good on its own but its successor does not link to it: it was
			 * changed and rehashed (see the top of this file). It is no longer counted. */
			res->events = expect - 2;
			memcpy(res->head, prev_head, SL_HASH_HEX);
			return fail(res, SL_VERIFY_EDITED, expect - 1,
				    "seq %" PRIu64 "'s prev_hash does not match seq %" PRIu64
				    "'s hash: seq %" PRIu64 " was changed and rehashed",
				    expect, expect - 1, expect - 1);
		}
		if (expect == 1)
			memcpy(sid, ev.sid, SL_RECORD_SID_LEN);
		else if (memcmp(sid, ev.sid, SL_RECORD_SID_LEN))
			return fail(res, SL_VERIFY_EDITED, expect, "sandbox_id differs from line 1's");
		bool is_begin = ev.cls_len == sizeof(SL_RECORD_CLASS_BEGIN) - 1 &&
				!memcmp(ev.cls, SL_RECORD_CLASS_BEGIN, ev.cls_len);
		if (expect == 1 && !is_begin)
			return fail(res, SL_VERIFY_EDITED, 1, "line 1 is not record.begin");
		if (expect > 1 && is_begin)
			return fail(res, SL_VERIFY_EDITED, expect, "record.begin after line 1");
		ended = ev.cls_len == sizeof(SL_RECORD_CLASS_END) - 1 &&
			!memcmp(ev.cls, SL_RECORD_CLASS_END, ev.cls_len);

		memcpy(prev_head, res->head, SL_HASH_HEX);
		memcpy(res->head, ev.hash, SL_RECORD_HASH_LEN);
		res->head[SL_RECORD_HASH_LEN] = '\0';
		res->events = expect;
		expect++;
	}
	if (!ended)
		return fail(res, SL_VERIFY_TRUNCATED, expect, "no record.end line after seq %" PRIu64,
			    expect - 1);
	return 0;
}

static void verifier_free(struct verifier *v)
{
	EVP_MD_CTX_free(v->ctx);
	EVP_MD_free(v->md);
}

static int verifier_init(struct verifier *v)
{
	memset(v, 0, sizeof(*v));
	v->md = EVP_MD_fetch(NULL, "SHA256", NULL);
	v->ctx = EVP_MD_CTX_new();
	if (!v->md || !v->ctx) {
		verifier_free(v);
		return -ENOMEM;
	}
	return 0;
}

static void result_init(struct sl_verify_result *res)
{
	memset(res, 0, sizeof(*res));
	res->reason = SL_VERIFY_OK;
	memcpy(res->head, SL_RECORD_ZERO_HASH, SL_HASH_HEX);
}

static int io_error(struct sl_verify_result *res, int rc)
{
	res->reason = SL_VERIFY_IO;
	snprintf(res->detail, sizeof(res->detail), "%s", strerror(-rc));
	return rc;
}

static int verify_src(struct line_src *s, struct sl_verify_result *res)
{
	struct verifier v;
	int rc = verifier_init(&v);
	if (rc < 0)
		return io_error(res, rc);
	rc = walk(&v, s, res);
	verifier_free(&v);
	return rc < 0 ? io_error(res, rc) : rc;
}

int sl_record_verify_buf(const char *buf, size_t len, struct sl_verify_result *res)
{
	result_init(res);
	if (!buf && len)
		return io_error(res, -EINVAL);
	struct line_src s;
	src_init_mem(&s, buf ? buf : "", len, 0);
	return verify_src(&s, res);
}

int sl_record_verify(const char *path, struct sl_verify_result *res)
{
	result_init(res);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return io_error(res, -errno);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return io_error(res, -errno);
	if (!S_ISREG(st.st_mode))
		return io_error(res, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL);
	struct line_src s;
	int rc = src_init_file(&s, fd, 0);
	if (rc < 0) {
		src_free(&s);
		return io_error(res, rc);
	}
	rc = verify_src(&s, res);
	src_free(&s);
	return rc;
}

const char *sl_verify_reason_name(enum sl_verify_reason r)
{
	switch (r) {
	case SL_VERIFY_OK:
		return "ok";
	case SL_VERIFY_EDITED:
		return "edited";
	case SL_VERIFY_REMOVED:
		return "removed";
	case SL_VERIFY_REORDERED:
		return "reordered";
	case SL_VERIFY_TRUNCATED:
		return "truncated";
	case SL_VERIFY_IO:
		return "io";
	}
	return "unknown";
}

/* ---- one line at a time, for a receiver (the collector) ---- */

struct sl_line_checker {
	struct verifier v;
};

int sl_line_checker_new(struct sl_line_checker **out)
{
	struct sl_line_checker *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	int r = verifier_init(&c->v);
	if (r < 0) {
		free(c);
		return r;
	}
	*out = c;
	return 0;
}

void sl_line_checker_free(struct sl_line_checker *c)
{
	if (!c)
		return;
	verifier_free(&c->v);
	free(c);
}

int sl_line_check(struct sl_line_checker *c, const char *line, size_t len, struct sl_line_info *info, const char **why)
{
	if (len == 0 || len >= SL_RECORD_LINE_MAX) {
		*why = "empty or longer than a record line may be";
		return -EBADMSG;
	}
	struct line l = {.p = line, .len = len, .nl = true};
	struct event ev;
	memset(&ev, 0, sizeof(ev));
	const char *w = check_line(&c->v, &l, &ev);
	if (w) {
		*why = w;
		return -EBADMSG;
	}
	memset(info, 0, sizeof(*info));
	info->seq = ev.seq;
	memcpy(info->sandbox_id, ev.sid, SL_RECORD_SID_LEN);
	memcpy(info->cls, ev.cls, ev.cls_len);
	memcpy(info->prev_hash, ev.prev, SL_RECORD_HASH_LEN);
	memcpy(info->hash, ev.hash, SL_RECORD_HASH_LEN);
	/* "time": the raw parse read it, bounded to int64; the scanner saw the same bytes as an integer
	 * (top-level keys are unique). */
	info->time_ns = ev.time_ns;
	*why = NULL;
	return 0;
}

const struct sl_jscan_member *sl_line_checker_member(const struct sl_line_checker *c, const char *key, size_t key_len)
{
	return sl_jscan_get(&c->v.scan, key, key_len);
}

/* ---- a record's chain as it is read, for a sender (sightline export) ---- */

struct sl_chain_walk {
	struct verifier v;
	uint64_t expect;	/* the seq the next line must have */
	char head[SL_HASH_HEX]; /* hash of the last good line */
	char sid[SL_RECORD_SID_LEN];
	bool ended; /* the last good line was record.end */
};

int sl_chain_walk_new(struct sl_chain_walk **out)
{
	struct sl_chain_walk *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	int r = verifier_init(&w->v);
	if (r < 0) {
		free(w);
		return r;
	}
	w->expect = 1;
	memcpy(w->head, SL_RECORD_ZERO_HASH, SL_HASH_HEX);
	*out = w;
	return 0;
}

void sl_chain_walk_free(struct sl_chain_walk *w)
{
	if (!w)
		return;
	verifier_free(&w->v);
	free(w);
}

bool sl_chain_walk_ended(const struct sl_chain_walk *w)
{
	return w->ended;
}

int sl_chain_walk_line(struct sl_chain_walk *w, const char *line, size_t len, bool *prev_bad)
{
	*prev_bad = false;
	/* The same per-line checks and order as walk() above, less the strict JSON parse: the
	 * collector parses every line itself and refuses one that is not an event. */
	if (w->ended || len >= SL_RECORD_LINE_MAX || memchr(line, '\0', len))
		return 1;
	struct line l = {.p = line, .len = len, .nl = true};
	struct event ev;
	memset(&ev, 0, sizeof(ev));
	if (parse_raw(&l, &ev) || check_hash(&w->v, &l, &ev) || ev.seq != w->expect)
		return 1;
	if (memcmp(ev.prev, w->head, SL_RECORD_HASH_LEN)) {
		/* Line expect-1 was changed and rehashed (see the top of this file): it is bad too. */
		*prev_bad = w->expect > 1;
		return 1;
	}
	if (w->expect > 1 && memcmp(w->sid, ev.sid, SL_RECORD_SID_LEN))
		return 1;
	bool is_begin = ev.cls_len == sizeof(SL_RECORD_CLASS_BEGIN) - 1 &&
			!memcmp(ev.cls, SL_RECORD_CLASS_BEGIN, ev.cls_len);
	if (is_begin != (w->expect == 1))
		return 1;
	if (w->expect == 1)
		memcpy(w->sid, ev.sid, SL_RECORD_SID_LEN);
	w->ended = ev.cls_len == sizeof(SL_RECORD_CLASS_END) - 1 && !memcmp(ev.cls, SL_RECORD_CLASS_END, ev.cls_len);
	memcpy(w->head, ev.hash, SL_RECORD_HASH_LEN);
	w->expect++;
	return 0;
}
