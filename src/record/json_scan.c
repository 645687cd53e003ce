/* The record line scanner: see json_scan.h. One pass, no recursion (an explicit stack of
 * SL_JSCAN_MAX_DEPTH container kinds), every read bounds-checked against the end. */
#include "record/json_scan.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

struct scan {
	const unsigned char *q, *end;
	const char *why;
};

static bool bad(struct scan *s, const char *why)
{
	if (!s->why)
		s->why = why;
	return false;
}

static void skip_ws(struct scan *s)
{
	while (s->q < s->end && (*s->q == ' ' || *s->q == '\t' || *s->q == '\n' || *s->q == '\r'))
		s->q++;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Four hex digits at q (q + 4 <= end checked by the caller). */
static int hex4(const unsigned char *q)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hexval(q[i]);
		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

/* One strict UTF-8 sequence of 2..4 bytes at s->q (its first byte >= 0x80). */
static bool utf8_seq(struct scan *s)
{
	unsigned char c = *s->q;
	size_t need;
	uint32_t cp, min;
	if (c >= 0xc2 && c <= 0xdf)
		need = 1, cp = c & 0x1f, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		need = 2, cp = c & 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		need = 3, cp = c & 0x07, min = 0x10000;
	else
		return bad(s, "invalid UTF-8 in a string");
	if ((size_t)(s->end - s->q - 1) < need)
		return bad(s, "invalid UTF-8 in a string");
	for (size_t k = 1; k <= need; k++) {
		unsigned char cc = s->q[k];
		if ((cc & 0xc0) != 0x80)
			return bad(s, "invalid UTF-8 in a string");
		cp = cp << 6 | (cc & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return bad(s, "invalid UTF-8 in a string");
	s->q += need + 1;
	return true;
}

/* Bytes that stand for themselves inside a string: printable ASCII but '"' and '\\'. */
static inline bool plain(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* A string at s->q (which is '"'). Sets *body and *body_len to the bytes between the quotes and
 * *escaped if there is a backslash among them. */
static bool scan_string(struct scan *s, const unsigned char **body, size_t *body_len, bool *escaped)
{
	s->q++;
	*body = s->q;
	*escaped = false;
	for (;;) {
#if defined(__SSE2__)
		/* x86_64: 16 bytes at a time. A signed compare with 0x20 catches both the control bytes
		 * (0x00-0x1f) and every byte >= 0x80 (negative as int8), so one mask covers all that
		 * plain() rejects; the first such byte is then handled by the byte loop below. */
		while (s->end - s->q >= 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)s->q);
			__m128i sp = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
							       _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
						  _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
			unsigned mask = (unsigned)_mm_movemask_epi8(sp);
			if (mask) {
				s->q += __builtin_ctz(mask);
				break;
			}
			s->q += 16;
		}
#endif
		/* 8 bytes at a time while none of them needs a look: no '"', '\\', byte < 0x20 or
		 * >= 0x80 (the usual SWAR zero-byte tests; memcpy keeps the load aligned-agnostic). */
		while (s->end - s->q >= 8) {
			uint64_t w;
			memcpy(&w, s->q, 8);
			const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
			uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
			uint64_t special = ((quote - ones) & ~quote) | ((bslash - ones) & ~bslash) | (w - ones * 0x20) | w;
			if (special & high)
				break;
			s->q += 8;
		}
		while (s->q < s->end && plain(*s->q))
			s->q++;
		if (s->q == s->end)
			return bad(s, "unterminated string");
		unsigned char c = *s->q;
		if (c == '"')
			break;
		if (c < 0x20)
			return bad(s, "control byte in a string");
		if (c >= 0x80) {
			if (!utf8_seq(s))
				return false;
			continue;
		}
		if (c != '\\') {
			s->q++;
			continue;
		}
		*escaped = true;
		if (s->end - s->q < 2)
			return bad(s, "unterminated string");
		c = s->q[1];
		if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
		    c == 't') {
			s->q += 2;
			continue;
		}
		if (c != 'u' || s->end - s->q < 6)
			return bad(s, "invalid escape in a string");
		int u = hex4(s->q + 2);
		if (u < 0)
			return bad(s, "invalid \\u escape in a string");
		s->q += 6;
		if (u >= 0xdc00 && u <= 0xdfff)
			return bad(s, "lone low surrogate escape in a string");
		if (u >= 0xd800 && u <= 0xdbff) {
			/* A high surrogate must be followed at once by a low one. */
			if (s->end - s->q < 6 || s->q[0] != '\\' || s->q[1] != 'u')
				return bad(s, "lone high surrogate escape in a string");
			int lo = hex4(s->q + 2);
			if (lo < 0xdc00 || lo > 0xdfff)
				return bad(s, "lone high surrogate escape in a string");
			s->q += 6;
		}
	}
	*body_len = (size_t)(s->q - *body);
	s->q++; /* the closing quote */
	return true;
}

static bool digit(const struct scan *s)
{
	return s->q < s->end && *s->q >= '0' && *s->q <= '9';
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool scan_number(struct scan *s, enum sl_jscan_type *type)
{
	*type = SL_JSCAN_INT;
	if (*s->q == '-')
		s->q++;
	if (!digit(s))
		return bad(s, "invalid number");
	if (*s->q == '0')
		s->q++;
	else
		while (digit(s))
			s->q++;
	if (s->q < s->end && *s->q == '.') {
		s->q++;
		if (!digit(s))
			return bad(s, "invalid number");
		while (digit(s))
			s->q++;
		*type = SL_JSCAN_NUMBER;
	}
	if (s->q < s->end && (*s->q == 'e' || *s->q == 'E')) {
		s->q++;
		if (s->q < s->end && (*s->q == '+' || *s->q == '-'))
			s->q++;
		if (!digit(s))
			return bad(s, "invalid number");
		while (digit(s))
			s->q++;
		*type = SL_JSCAN_NUMBER;
	}
	return true;
}

static bool scan_lit(struct scan *s, const char *w, size_t n)
{
	if ((size_t)(s->end - s->q) < n || memcmp(s->q, w, n) != 0)
		return bad(s, "invalid literal");
	s->q += n;
	return true;
}

const struct sl_jscan_member *sl_jscan_get(const struct sl_jscan *sc, const char *key, size_t key_len)
{
	for (size_t i = 0; i < sc->n; i++)
		if (sc->m[i].key_len == key_len && (!key_len || sc->m[i].key[0] == key[0]) &&
		    !memcmp(sc->m[i].key, key, key_len))
			return &sc->m[i];
	return NULL;
}

enum state { ST_VALUE, ST_KEY, ST_AFTER };

int sl_jscan_object(const char *p, size_t len, struct sl_jscan *out, const char **why)
{
	struct scan s = {.q = (const unsigned char *)p, .end = (const unsigned char *)p + len};
	char stack[SL_JSCAN_MAX_DEPTH]; /* 'o' or 'a' per open container */
	size_t depth = 0;
	struct sl_jscan_member *cur = NULL; /* the top object's member being read */
	enum state st = ST_VALUE;
	uint64_t seen = 0;
	out->n = 0;
	if (!p || len == 0 || *p != '{') {
		*why = "not a JSON object";
		return -EBADMSG;
	}
	for (;;) {
		if (st == ST_KEY) {
			skip_ws(&s);
			if (s.q == s.end || *s.q != '"') {
				bad(&s, "expected a member name");
				break;
			}
			const unsigned char *k;
			size_t kl;
			bool esc;
			if (!scan_string(&s, &k, &kl, &esc))
				break;
			if (depth == 1) {
				if (esc) {
					bad(&s, "a top-level member name is escaped");
					break;
				}
				/* A 64-bit filter of (length, first byte) seen so far: most keys skip the
				 * pairwise comparison. */
				uint64_t bit = 1ull << ((kl * 31u + (kl ? k[0] : 0u)) & 63u);
				if ((seen & bit) && sl_jscan_get(out, (const char *)k, kl)) {
					bad(&s, "a top-level member is given twice");
					break;
				}
				if (out->n == SL_JSCAN_MAX_MEMBERS) {
					bad(&s, "too many top-level members");
					break;
				}
				seen |= bit;
				cur = &out->m[out->n++];
				*cur = (struct sl_jscan_member){.key = (const char *)k, .key_len = kl};
			}
			skip_ws(&s);
			if (s.q == s.end || *s.q != ':') {
				bad(&s, "expected ':' after a member name");
				break;
			}
			s.q++;
			st = ST_VALUE;
			continue;
		}
		enum sl_jscan_type type;
		const unsigned char *vstart;
		bool esc = false;
		if (st == ST_VALUE) {
			if (depth)
				skip_ws(&s);
			if (s.q == s.end) {
				bad(&s, "expected a value");
				break;
			}
			vstart = s.q;
			unsigned char c = *s.q;
			if (c == '{' || c == '[') {
				if (depth == SL_JSCAN_MAX_DEPTH) {
					bad(&s, "nested too deep");
					break;
				}
				stack[depth++] = c == '{' ? 'o' : 'a';
				if (depth == 2)
					cur->val = (const char *)vstart;
				s.q++;
				skip_ws(&s);
				if (s.q < s.end && *s.q == (c == '{' ? '}' : ']')) {
					s.q++;
					depth--;
					type = c == '{' ? SL_JSCAN_OBJECT : SL_JSCAN_ARRAY;
					goto value_done;
				}
				st = c == '{' ? ST_KEY : ST_VALUE;
				continue;
			}
			bool ok;
			if (c == '"') {
				const unsigned char *b;
				size_t bl;
				ok = scan_string(&s, &b, &bl, &esc);
				vstart = b;
				type = SL_JSCAN_STRING;
			} else if (c == '-' || (c >= '0' && c <= '9')) {
				ok = scan_number(&s, &type);
			} else if (c == 't') {
				ok = scan_lit(&s, "true", 4), type = SL_JSCAN_TRUE;
			} else if (c == 'f') {
				ok = scan_lit(&s, "false", 5), type = SL_JSCAN_FALSE;
			} else if (c == 'n') {
				ok = scan_lit(&s, "null", 4), type = SL_JSCAN_NULL;
			} else {
				ok = bad(&s, "expected a value");
			}
			if (!ok)
				break;
			if (depth == 1) {
				cur->val = (const char *)vstart;
				/* a string's view excludes its closing quote */
				cur->val_len = (size_t)(s.q - vstart) - (type == SL_JSCAN_STRING);
				cur->type = type;
				cur->escaped = esc;
			}
			st = ST_AFTER;
			continue;
		}
		/* ST_AFTER: a value has ended inside the container at stack[depth - 1]. */
		skip_ws(&s);
		if (s.q == s.end) {
			bad(&s, "unterminated object or array");
			break;
		}
		if (*s.q == ',') {
			s.q++;
			st = stack[depth - 1] == 'o' ? ST_KEY : ST_VALUE;
			continue;
		}
		if (*s.q != (stack[depth - 1] == 'o' ? '}' : ']')) {
			bad(&s, "expected ',' or the end of an object or array");
			break;
		}
		type = stack[depth - 1] == 'o' ? SL_JSCAN_OBJECT : SL_JSCAN_ARRAY;
		s.q++;
		depth--;
	value_done:
		if (depth == 0) {
			if (s.q != s.end) {
				bad(&s, "bytes after the object");
				break;
			}
			*why = NULL;
			return 0;
		}
		if (depth == 1) { /* a container that was a top-level member's value has ended */
			cur->val_len = (size_t)((const char *)s.q - cur->val);
			cur->type = type;
		}
		st = ST_AFTER;
	}
	*why = s.why ? s.why : "invalid JSON";
	out->n = 0;
	return -EBADMSG;
}
