/* A strict, bounded, allocation-free JSON scanner for one record line (the verifier's and the
 * collector's hot path; it replaces a json-c parse of every line).
 *
 * It accepts exactly RFC 8259 JSON text that is ONE object spanning the whole buffer, with these
 * further limits (each one makes it stricter than json-c in JSON_TOKENER_STRICT |
 * JSON_TOKENER_VALIDATE_UTF8 mode, never looser; tests/unit/test_record.c checks that against json-c
 * on mutated lines, fuzz/fuzz_json_scan.c does the same under libFuzzer):
 *   - no byte before the opening '{' or after the closing '}' (no surrounding whitespace);
 *   - strings are strict UTF-8 (no overlong forms, surrogates or code points above U+10FFFF), no raw
 *     byte below 0x20, only the escapes \" \\ \/ \b \f \n \r \t \uXXXX, and a \u escape of a
 *     surrogate must be a high one immediately followed by a \u escape of a low one;
 *   - no NaN, Infinity or other bare words but true, false, null;
 *   - nesting at most SL_JSCAN_MAX_DEPTH deep (the top object counts 1);
 *   - the top object's keys contain no backslash (record keys are plain identifiers; this makes a raw
 *     byte comparison of keys exact) and are pairwise different (json-c would keep the last of two
 *     equal keys, so a second "hash" could stand in for the hashed one), at most SL_JSCAN_MAX_MEMBERS.
 * Nested objects' keys are not compared (they are covered by the line's hash like every byte).
 *
 * What it reports: the top object's members in order, as views into the buffer. */
#ifndef SL_RECORD_JSON_SCAN_H
#define SL_RECORD_JSON_SCAN_H
#include <stddef.h>

#define SL_JSCAN_MAX_DEPTH   32
#define SL_JSCAN_MAX_MEMBERS 128

enum sl_jscan_type {
	SL_JSCAN_STRING = 1,
	SL_JSCAN_INT,	 /* a number without fraction or exponent */
	SL_JSCAN_NUMBER, /* a number with a fraction or an exponent */
	SL_JSCAN_OBJECT,
	SL_JSCAN_ARRAY,
	SL_JSCAN_TRUE,
	SL_JSCAN_FALSE,
	SL_JSCAN_NULL,
};

struct sl_jscan_member {
	const char *key; /* the key's bytes between its quotes (no escapes) */
	size_t key_len;
	const char *val; /* the value's text: a string's bytes between its quotes (raw, escapes and all),
			  * any other value's whole text */
	size_t val_len;
	enum sl_jscan_type type;
	unsigned char escaped; /* STRING: the raw bytes contain a backslash escape */
};

struct sl_jscan {
	size_t n;
	struct sl_jscan_member m[SL_JSCAN_MAX_MEMBERS];
};

/* Scan p[0..len). Returns 0 with out filled, or -EBADMSG with *why naming the first problem (a
 * static string). Never reads outside p[0..len), never allocates, runs in O(len + members^2). */
int sl_jscan_object(const char *p, size_t len, struct sl_jscan *out, const char **why);

/* The member named key (key_len bytes), or NULL. */
const struct sl_jscan_member *sl_jscan_get(const struct sl_jscan *s, const char *key, size_t key_len);
#endif
