/* What the record writer (record.c) and the verifier (verify.c) must agree on: the fixed parts of
 * a line, the limits and the class-name alphabet. Not part of the public API. */
#ifndef SL_RECORD_INTERNAL_H
#define SL_RECORD_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>

/* The longest line, '\n' included. The writer refuses to produce a longer one (-E2BIG); the verifier
 * calls a longer one edited and never buffers more than this (plus its read chunk). */
#define SL_RECORD_LINE_MAX (1u << 20)
/* Longest class name. Class names are program constants such as "process.exec". */
#define SL_RECORD_CLASS_MAX 64

#define SL_RECORD_CLASS_BEGIN "record.begin"
#define SL_RECORD_CLASS_END   "record.end"

/* The fixed member keys, in line order. */
#define SL_RECORD_K_SEQ	      "{\"seq\":"
#define SL_RECORD_K_SANDBOX   ",\"sandbox_id\":\""
#define SL_RECORD_K_TIME      "\",\"time\":"
#define SL_RECORD_K_CLASS     ",\"class\":\""
#define SL_RECORD_K_CLASS_END "\","
#define SL_RECORD_K_PREV      ",\"prev_hash\":\""
#define SL_RECORD_K_HASH      ",\"hash\":\""
#define SL_RECORD_K_HASH_END  "\"}"

#define SL_RECORD_SID_LEN  32
#define SL_RECORD_HASH_LEN 64
/* ,"prev_hash":"<64>"  -- the last member inside the hashed prefix */
#define SL_RECORD_PREV_MEMBER_LEN (sizeof(SL_RECORD_K_PREV) - 1 + SL_RECORD_HASH_LEN + 1)
/* ,"hash":"<64>"}  -- what follows the hashed prefix (the '\n' not counted) */
#define SL_RECORD_HASH_MEMBER_LEN                                                                            \
	(sizeof(SL_RECORD_K_HASH) - 1 + SL_RECORD_HASH_LEN + sizeof(SL_RECORD_K_HASH_END) - 1)

#define SL_RECORD_ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

static inline bool sl_record_is_lower_hex(const char *s, size_t n)
{
	/* No early exit: a fixed-length check the compiler can vectorise (hot in the verifier). */
	unsigned bad = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bad |= (unsigned)((unsigned char)(c - '0') > 9 && (unsigned char)(c - 'a') > 5);
	}
	return !bad;
}

/* Class names are written raw (no escaping), so the alphabet is closed: [A-Za-z0-9._-]. */
static inline bool sl_record_class_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '_' || c == '-';
}
#endif
