/* The durable, hash-chained record of one sandbox: DIR/<sandbox_id>.jsonl.
 *
 * Every line is one JSON object. The record writer, not the caller, stamps the fields that make
 * the record trustworthy: seq (1, 2, 3 ... no holes), sandbox_id, observer, the identity binding
 * (from the launcher, never from the workload), prev_hash and hash. Line format:
 *   {"seq":N,"sandbox_id":"..","time":T,"class":"C","observer":"O","identity":{...},<body>,
 *    "prev_hash":"<64 hex>","hash":"<64 hex>"}\n
 * hash = SHA-256 over the line's bytes from '{' up to, not including, ',"hash":"'. prev_hash of
 * seq 1 is 64 '0'. Line 1 has class "record.begin" (the launch manifest), the last line class
 * "record.end" (counts). */
#ifndef SL_RECORD_H
#define SL_RECORD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/json.h"

#define SL_HASH_HEX 65 /* 64 hex + NUL */

/* Server-controlled identity: comes from the launcher's command line only. */
struct sl_identity {
	const char *tenant;
	const char *agent;
	const char *task;
	const char *version;
	const char *credential_ref;
};

struct sl_record;

/* Create DIR/<sandbox_id>.jsonl exclusively (O_EXCL, 0600, never following a symlink) and start
 * the group-sync thread: the file is fdatasync'ed at most sync_ms after any append (0 = sync every
 * append). The identity strings are copied. Returns 0 or -errno. */
int sl_record_create(struct sl_record **out, const char *dir, const char *sandbox_id,
		     const struct sl_identity *id, const char *observer, unsigned sync_ms);

/* Append one event. body holds the class-specific members as JSON text without braces
 * ("k":v,...), or is NULL/empty. Thread-safe. The line is in the file (page cache) when this
 * returns; it is on disk within sync_ms. On failure (for example -ENOSPC) nothing partial stays in
 * the file and the sequence does not advance. Returns the event's seq (>= 1) or -errno. */
int64_t sl_record_append(struct sl_record *r, const char *class_name, int64_t time_ns, const struct sl_json *body);

/* The record's sticky failure (a background fdatasync or a roll-back failed: no append can succeed
 * any more), or 0 when a failed append may be retried (e.g. a write that hit -ENOSPC and was rolled
 * back). */
int sl_record_failed(struct sl_record *r);

/* Number of events appended so far (== last seq). */
uint64_t sl_record_count(struct sl_record *r);
/* Current head hash (hex). */
void sl_record_head(struct sl_record *r, char out[SL_HASH_HEX]);
/* Path of the record file (owned by r). */
const char *sl_record_path(const struct sl_record *r);

/* Append the "record.end" line (body: counts, given by the caller), fsync, stop the sync thread,
 * close and free. body may be NULL. If r is NULL does nothing. Returns 0 or -errno (r is freed
 * either way). */
int sl_record_finish(struct sl_record *r, const struct sl_json *end_body);

/* Close a record that cannot be completed (the story could not be written to its end): sync
 * what is there, write no record.end, free r. verify then reports it truncated, as it should.
 * Returns 0 or -errno. */
int sl_record_abandon(struct sl_record *r);

/* Verification of a record file. */
enum sl_verify_reason {
	SL_VERIFY_OK = 0,
	SL_VERIFY_EDITED,    /* a line's content does not match its hash, or is not a valid event */
	SL_VERIFY_REMOVED,   /* a seq is missing: the line after it links to a hash we never saw */
	SL_VERIFY_REORDERED, /* a seq appears out of order (lower than expected) */
	SL_VERIFY_TRUNCATED, /* the record ends without its record.end line, or mid-line */
	SL_VERIFY_IO,	     /* the file could not be read */
};
struct sl_verify_result {
	enum sl_verify_reason reason;
	uint64_t events;	 /* lines verified good */
	uint64_t bad_seq;	 /* first bad seq (the seq that should have been there) */
	char head[SL_HASH_HEX];	 /* hash of the last good line */
	char detail[256];	 /* human-readable why */
};
/* Verify path. Returns 0 if the record is intact, 1 if not (res says why), -errno on I/O error. */
int sl_record_verify(const char *path, struct sl_verify_result *res);
/* Same, over a buffer (used by the fuzzer). */
int sl_record_verify_buf(const char *buf, size_t len, struct sl_verify_result *res);
const char *sl_verify_reason_name(enum sl_verify_reason r);

/* Checking single lines as they arrive (the collector): the exact shape, strict JSON whose stamped
 * members agree with the raw text, and the line's own hash. Continuity (seq, prev_hash) is the
 * caller's: it knows the previous line. */
struct sl_line_info {
	uint64_t seq;
	int64_t time_ns;
	char sandbox_id[33];
	char cls[65];
	char prev_hash[SL_HASH_HEX];
	char hash[SL_HASH_HEX];
};
struct sl_line_checker;
int sl_line_checker_new(struct sl_line_checker **out);
void sl_line_checker_free(struct sl_line_checker *c);
/* line without its '\n'. Returns 0 (info filled) or -EBADMSG with *why saying what is wrong. */
int sl_line_check(struct sl_line_checker *c, const char *line, size_t len, struct sl_line_info *info,
		  const char **why);
/* A top-level member of the line the last successful sl_line_check checked (a view into that
 * line, valid while it is), or NULL. */
struct sl_jscan_member;
const struct sl_jscan_member *sl_line_checker_member(const struct sl_line_checker *c, const char *key,
						     size_t key_len);
/* Walking a record's chain line by line as it is read (sightline export checks what it ships
 * without a separate pass): each line's raw shape, own hash, seq (the next one), link to the line
 * before, sandbox id, record.begin first and nothing after record.end, in verify's order. Not the
 * strict JSON parse: the receiver (the collector) does that. A line that fails is never good, nor
 * is any after it; verify (sl_record_verify) says exactly why. */
struct sl_chain_walk;
int sl_chain_walk_new(struct sl_chain_walk **out);
void sl_chain_walk_free(struct sl_chain_walk *w);
/* line without its '\n'. Returns 0 (good, linked to the previous good line) or 1 (bad: stop here).
 * *prev_bad is set when the break is the link to the previous line, which verify then counts as
 * the edited one (changed and rehashed): it must not be shipped either. */
int sl_chain_walk_line(struct sl_chain_walk *w, const char *line, size_t len, bool *prev_bad);
/* Was the last good line record.end (nothing may follow)? */
bool sl_chain_walk_ended(const struct sl_chain_walk *w);
#endif
