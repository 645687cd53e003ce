#include "common/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_json_init(struct sl_json *j)
{
	memset(j, 0, sizeof(*j));
}

void sl_json_free(struct sl_json *j)
{
	free(j->buf);
	memset(j, 0, sizeof(*j));
}

void sl_json_reset(struct sl_json *j)
{
	j->len = 0;
	j->err = 0;
	j->need_comma = false;
	if (j->buf)
		j->buf[0] = '\0';
}

int sl_json_error(const struct sl_json *j)
{
	return j->err;
}

static void put(struct sl_json *j, const char *s, size_t n)
{
	if (j->err)
		return;
	if (j->len + n + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 512;
		while (cap < j->len + n + 1)
			cap *= 2;
		if (cap > (64u << 20)) {
			j->err = -E2BIG;
			return;
		}
		char *nb = realloc(j->buf, cap);
		if (!nb) {
			j->err = -ENOMEM;
			return;
		}
		j->buf = nb;
		j->cap = cap;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = '\0';
}

void sl_json_raw(struct sl_json *j, const char *s, size_t n)
{
	put(j, s, n);
}

/* Length of a valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t need;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0) {
		need = 2;
		cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		need = 3;
		cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		need = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < need)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Reject overlong forms, surrogates and out-of-range code points. */
	if ((need == 2 && cp < 0x80) || (need == 3 && cp < 0x800) || (need == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return need;
}

static void put_escaped(struct sl_json *j, const char *s, size_t n, size_t max)
{
	if (max == 0)
		max = SL_JSON_STR_MAX;
	size_t lim = n > max ? max : n;
	const unsigned char *u = (const unsigned char *)s;
	put(j, "\"", 1);
	size_t i = 0;
	while (i < lim) {
		unsigned char c = u[i];
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			put(j, esc, 2);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			put(j, esc, 6);
			i++;
		} else if (c < 0x80) {
			put(j, (const char *)&u[i], 1);
			i++;
		} else {
			size_t l = utf8_len(u + i, lim - i);
			if (l == 0) {
				put(j, "\\ufffd", 6);
				i++;
			} else {
				put(j, (const char *)&u[i], l);
				i += l;
			}
		}
	}
	if (n > lim) {
		char tail[40];
		int t = snprintf(tail, sizeof(tail), "...[+%zu]", n - lim);
		put(j, tail, (size_t)t);
	}
	put(j, "\"", 1);
}

static void key(struct sl_json *j, const char *k)
{
	if (j->need_comma)
		put(j, ",", 1);
	j->need_comma = true;
	if (k) {
		put_escaped(j, k, strlen(k), 256);
		put(j, ":", 1);
	}
}

void sl_json_obj_open(struct sl_json *j, const char *k)
{
	key(j, k);
	put(j, "{", 1);
	j->need_comma = false;
}

void sl_json_obj_close(struct sl_json *j)
{
	put(j, "}", 1);
	j->need_comma = true;
}

void sl_json_arr_open(struct sl_json *j, const char *k)
{
	key(j, k);
	put(j, "[", 1);
	j->need_comma = false;
}

void sl_json_arr_close(struct sl_json *j)
{
	put(j, "]", 1);
	j->need_comma = true;
}

void sl_json_strn(struct sl_json *j, const char *k, const char *s, size_t n, size_t max)
{
	key(j, k);
	put_escaped(j, s, n, max);
}

void sl_json_str(struct sl_json *j, const char *k, const char *s, size_t max)
{
	if (!s) {
		sl_json_null(j, k);
		return;
	}
	sl_json_strn(j, k, s, strlen(s), max);
}

void sl_json_int(struct sl_json *j, const char *k, int64_t v)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "%" PRId64, v);
	key(j, k);
	put(j, b, (size_t)n);
}

void sl_json_uint(struct sl_json *j, const char *k, uint64_t v)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "%" PRIu64, v);
	key(j, k);
	put(j, b, (size_t)n);
}

void sl_json_bool(struct sl_json *j, const char *k, bool v)
{
	key(j, k);
	put(j, v ? "true" : "false", v ? 4 : 5);
}

void sl_json_null(struct sl_json *j, const char *k)
{
	key(j, k);
	put(j, "null", 4);
}
