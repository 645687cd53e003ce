/* Unit test of the record writer and verifier: a concurrent record verifies; every tamper kind is
 * reported with its exact reason and bad_seq; a failed write leaves nothing behind. */
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common/json.h"
#include "common/util.h"
#include "record/record.h"
#include "check.h"

#define THREADS		  4
#define EVENTS_PER_THREAD 2500
#define EVENTS		  (THREADS * EVENTS_PER_THREAD)
#define TOTAL		  (EVENTS + 2) /* record.begin + events + record.end */

static char tmpdir[] = "/tmp/sl-test-record-XXXXXX";

static const struct sl_identity ident = {
    .tenant = "tenant-1",
    .agent = "agent \"quoted\"\n",
    .task = "task-9",
    .version = "v1.2.3",
    .credential_ref = "cred/abc",
};

/* ---- lines of a record in memory ---- */

struct lines {
	char **v;
	size_t n;
};

static void lines_load(const char *path, struct lines *ls)
{
	char *buf;
	size_t len;
	CHECK(sl_read_file(path, 64u << 20, &buf, &len) == 0);
	ls->n = 0;
	for (size_t i = 0; i < len; i++)
		ls->n += buf[i] == '\n';
	ls->v = calloc(ls->n, sizeof(char *));
	CHECK(ls->v);
	char *p = buf;
	for (size_t i = 0; i < ls->n; i++) {
		char *nl = strchr(p, '\n');
		ls->v[i] = strndup(p, (size_t)(nl - p + 1)); /* with its '\n' */
		CHECK(ls->v[i]);
		p = nl + 1;
	}
	CHECK(p == buf + len);
	free(buf);
}

static void lines_free(struct lines *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->v[i]);
	free(ls->v);
}

/* Join lines [0, n) into one buffer, skipping index skip (SIZE_MAX: none). */
static char *join(char *const *v, size_t n, size_t skip, size_t *len)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += i == skip ? 0 : strlen(v[i]);
	char *buf = malloc(total + 1);
	CHECK(buf);
	char *p = buf;
	for (size_t i = 0; i < n; i++) {
		if (i == skip)
			continue;
		size_t l = strlen(v[i]);
		memcpy(p, v[i], l);
		p += l;
	}
	*p = '\0';
	*len = total;
	return buf;
}

static char **copy_v(const struct lines *ls)
{
	char **v = malloc(ls->n * sizeof(char *));
	CHECK(v);
	memcpy(v, ls->v, ls->n * sizeof(char *));
	return v;
}

/* The hash member of a line (the 64 hex before "}\n"). */
static void line_hash(const char *line, char out[SL_HASH_HEX])
{
	size_t l = strlen(line);
	CHECK(l > 67);
	memcpy(out, line + l - 67, 64);
	out[64] = '\0';
}

/* Recompute a line's hash over its prefix, as a forger would. Returns a new string. */
static char *rehash(const char *line)
{
	char *s = strdup(line);
	CHECK(s);
	char *h = strstr(s, ",\"hash\":\"");
	CHECK(h);
	unsigned char md[32];
	unsigned n = 0;
	CHECK(EVP_Digest(s, (size_t)(h - s), md, &n, EVP_sha256(), NULL) == 1 && n == 32);
	char hex[65];
	sl_hex(md, 32, hex);
	memcpy(h + strlen(",\"hash\":\""), hex, 64);
	return s;
}

/* How many leading complete lines sightline export's chain walk would ship (record.h,
 * sl_chain_walk): it must be exactly the count verify calls good, whatever the tamper. */
static uint64_t chain_walk_good(const char *buf, size_t len)
{
	struct sl_chain_walk *w;
	CHECK_EQ(sl_chain_walk_new(&w), 0);
	uint64_t k = 0;
	const char *p = buf, *end = buf + len, *nl;
	bool prev_bad = false;
	int bad = 0;
	while (p < end && (nl = memchr(p, '\n', (size_t)(end - p)))) {
		if ((bad = sl_chain_walk_line(w, p, (size_t)(nl - p), &prev_bad)))
			break;
		k++;
		p = nl + 1;
	}
	sl_chain_walk_free(w);
	return bad && prev_bad ? k - 1 : k;
}

static void expect_verdict(const char *what, const char *buf, size_t len, enum sl_verify_reason reason,
			   uint64_t bad_seq, uint64_t events)
{
	struct sl_verify_result res;
	int rc = sl_record_verify_buf(buf, len, &res);
	uint64_t walked = chain_walk_good(buf, len);
	if (walked != events)
		die("%s: the chain walk would ship %" PRIu64 " lines, verify counts %" PRIu64 " good", what,
		    walked, events);
	if (rc != (reason == SL_VERIFY_OK ? 0 : 1) || res.reason != reason ||
	    (reason != SL_VERIFY_OK && res.bad_seq != bad_seq) || res.events != events)
		die("%s: got rc %d reason %s bad_seq %" PRIu64 " events %" PRIu64
		    " (%s); want %s bad_seq %" PRIu64 " events %" PRIu64,
		    what, rc, sl_verify_reason_name(res.reason), res.bad_seq, res.events, res.detail,
		    sl_verify_reason_name(reason), bad_seq, events);
	printf("ok: %-34s -> %s", what, sl_verify_reason_name(res.reason));
	if (reason != SL_VERIFY_OK)
		printf(" at %" PRIu64 " (%s)", res.bad_seq, res.detail);
	printf("\n");
}

/* ---- the concurrent record ---- */

struct worker {
	struct sl_record *r;
	int id;
	int64_t seqs[EVENTS_PER_THREAD];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct sl_json j;
	sl_json_init(&j);
	for (int i = 0; i < EVENTS_PER_THREAD; i++) {
		sl_json_reset(&j);
		sl_json_int(&j, "thread", w->id);
		sl_json_int(&j, "i", i);
		sl_json_str(&j, "path", "/workspace/\"odd\"\tname\xff", 0);
		w->seqs[i] = sl_record_append(w->r, "test.event", sl_now_realtime_ns(), &j);
	}
	sl_json_free(&j);
	return NULL;
}

static void random_id(char id[33])
{
	CHECK(sl_random_id(id) == 0);
}

static char *write_concurrent_record(void)
{
	char id[33];
	random_id(id);
	struct sl_record *r;
	CHECK_EQ(sl_record_create(&r, tmpdir, id, &ident, "supervisor", 5), 0);

	struct sl_json j;
	sl_json_init(&j);
	/* Only record.begin may come first; record.end only through finish. */
	CHECK_EQ(sl_record_append(r, "test.event", 1, NULL), -EINVAL);
	CHECK_EQ(sl_record_append(r, "record.end", 1, NULL), -EINVAL);
	sl_json_str(&j, "command", "/bin/true", 0);
	CHECK_EQ(sl_record_append(r, "record.begin", 123, &j), 1);
	CHECK_EQ(sl_record_append(r, "record.begin", 124, &j), -EINVAL);
	CHECK_EQ(sl_record_count(r), 1);

	struct worker *ws = calloc(THREADS, sizeof(*ws));
	pthread_t th[THREADS];
	CHECK(ws);
	for (int t = 0; t < THREADS; t++) {
		ws[t].r = r;
		ws[t].id = t;
		CHECK(pthread_create(&th[t], NULL, worker_main, &ws[t]) == 0);
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);

	/* Every append got its own seq, and together they are exactly 2 .. EVENTS+1. */
	unsigned char *seen = calloc(EVENTS + 2, 1);
	CHECK(seen);
	for (int t = 0; t < THREADS; t++) {
		int64_t last = 0;
		for (int i = 0; i < EVENTS_PER_THREAD; i++) {
			int64_t s = ws[t].seqs[i];
			CHECK(s >= 2 && s <= EVENTS + 1);
			CHECK(!seen[s]);
			CHECK(s > last); /* one thread's events keep their order */
			seen[s] = 1;
			last = s;
		}
	}
	free(seen);
	free(ws);
	CHECK_EQ(sl_record_count(r), EVENTS + 1);

	char *path = strdup(sl_record_path(r));
	CHECK(path);
	struct stat st;
	CHECK(stat(path, &st) == 0);
	CHECK_EQ(st.st_mode & 07777, 0600);

	/* The exact shape of line 1. */
	char *buf;
	size_t len;
	CHECK(sl_read_file(path, 64u << 20, &buf, &len) == 0);
	char want[1024];
	snprintf(
	    want, sizeof(want),
	    "{\"seq\":1,\"sandbox_id\":\"%s\",\"time\":123,\"class\":\"record.begin\",\"observer\":"
	    "\"supervisor\","
	    "\"identity\":{\"tenant\":\"tenant-1\",\"agent\":\"agent "
	    "\\\"quoted\\\"\\u000a\",\"task\":\"task-9\","
	    "\"version\":\"v1.2.3\",\"credential_ref\":\"cred/abc\"},\"command\":\"/bin/true\","
	    "\"prev_hash\":\"0000000000000000000000000000000000000000000000000000000000000000\",\"hash\":\"",
	    id);
	if (strncmp(buf, want, strlen(want)))
		die("line 1 is\n%.*s\nwant prefix\n%s", (int)(strchr(buf, '\n') - buf), buf, want);
	free(buf);

	/* The head is the hash of the last line. */
	char head[SL_HASH_HEX];
	sl_record_head(r, head);
	struct lines ls;
	lines_load(path, &ls);
	CHECK_EQ(ls.n, EVENTS + 1);
	char last[SL_HASH_HEX];
	line_hash(ls.v[ls.n - 1], last);
	CHECK(!strcmp(head, last));
	lines_free(&ls);

	sl_json_reset(&j);
	sl_json_uint(&j, "events", EVENTS + 2);
	CHECK_EQ(sl_record_finish(r, &j), 0);
	sl_json_free(&j);

	/* O_EXCL: the same sandbox id cannot be recorded twice. */
	CHECK_EQ(sl_record_create(&r, tmpdir, id, &ident, "supervisor", 5), -EEXIST);
	return path;
}

/* ---- tampering ---- */

static void test_tampering(const char *path)
{
	struct sl_verify_result res;
	CHECK_EQ(sl_record_verify(path, &res), 0);
	CHECK_EQ(res.reason, SL_VERIFY_OK);
	CHECK_EQ(res.events, TOTAL);
	printf("ok: verify %s: %" PRIu64 " events, head %s\n", path, res.events, res.head);

	struct lines ls;
	lines_load(path, &ls);
	CHECK_EQ(ls.n, TOTAL);
	const size_t n = ls.n;
	const size_t k = 5000; /* a middle line, index: its seq is k + 1 */
	char *buf, **v;
	size_t len;

	buf = join(ls.v, n, SIZE_MAX, &len);
	expect_verdict("untouched", buf, len, SL_VERIFY_OK, 0, TOTAL);
	char head_ok[SL_HASH_HEX];
	CHECK_EQ(sl_record_verify_buf(buf, len, &res), 0);
	line_hash(ls.v[n - 1], head_ok);
	CHECK(!strcmp(res.head, head_ok));

	/* 1. one byte of a middle line's body changed */
	char *p = strstr(buf + (strstr(buf, ls.v[k]) - buf), "\"thread\":");
	CHECK(p);
	p[9] = p[9] == '1' ? '2' : '1';
	expect_verdict("byte edited in line k", buf, len, SL_VERIFY_EDITED, k + 1, k);
	free(buf);

	/* 1b. a byte of the stored hash itself */
	v = copy_v(&ls);
	v[k] = strdup(ls.v[k]);
	v[k][strlen(v[k]) - 5] ^= 1;
	buf = join(v, n, SIZE_MAX, &len);
	expect_verdict("hash byte edited in line k", buf, len, SL_VERIFY_EDITED, k + 1, k);
	free(buf);
	free(v[k]);
	free(v);

	/* 2. a middle line edited and its hash recomputed: caught by the next line's link */
	v = copy_v(&ls);
	v[k] = strdup(ls.v[k]);
	p = strstr(v[k], "\"thread\":");
	p[9] = p[9] == '1' ? '2' : '1';
	char *forged = rehash(v[k]);
	free(v[k]);
	v[k] = forged;
	buf = join(v, n, SIZE_MAX, &len);
	expect_verdict("line k edited + rehashed", buf, len, SL_VERIFY_EDITED, k + 1, k);
	CHECK_EQ(sl_record_verify_buf(buf, len, &res), 1);
	char h[SL_HASH_HEX];
	line_hash(ls.v[k - 1], h);
	CHECK(!strcmp(res.head, h)); /* the head is the last line before the edit */
	free(buf);
	free(v[k]);
	free(v);

	/* 2b. the same at line 1 (the manifest) */
	v = copy_v(&ls);
	v[0] = strdup(ls.v[0]);
	p = strstr(v[0], "/bin/true");
	CHECK(p);
	p[7] = 'v'; /* /bin/trve */
	forged = rehash(v[0]);
	free(v[0]);
	v[0] = forged;
	buf = join(v, n, SIZE_MAX, &len);
	expect_verdict("line 1 edited + rehashed", buf, len, SL_VERIFY_EDITED, 1, 0);
	free(buf);
	free(v[0]);
	free(v);

	/* 3. a middle line deleted */
	buf = join(ls.v, n, k, &len);
	expect_verdict("line k deleted", buf, len, SL_VERIFY_REMOVED, k + 1, k);
	free(buf);
	buf = join(ls.v, n, 0, &len);
	expect_verdict("line 1 deleted", buf, len, SL_VERIFY_REMOVED, 1, 0);
	free(buf);

	/* 4. two lines swapped: adjacent, and far apart */
	v = copy_v(&ls);
	v[k] = ls.v[k + 1];
	v[k + 1] = ls.v[k];
	buf = join(v, n, SIZE_MAX, &len);
	expect_verdict("lines k, k+1 swapped", buf, len, SL_VERIFY_REORDERED, k + 1, k);
	free(buf);
	v[k] = ls.v[k + 100];
	v[k + 1] = ls.v[k + 1];
	v[k + 100] = ls.v[k];
	buf = join(v, n, SIZE_MAX, &len);
	expect_verdict("lines k, k+100 swapped", buf, len, SL_VERIFY_REORDERED, k + 1, k);
	free(buf);
	free(v);

	/* 4b. a line duplicated (replayed) right after itself */
	v = malloc((n + 1) * sizeof(char *));
	CHECK(v);
	memcpy(v, ls.v, (k + 1) * sizeof(char *));
	v[k + 1] = ls.v[k];
	memcpy(v + k + 2, ls.v + k + 1, (n - k - 1) * sizeof(char *));
	buf = join(v, n + 1, SIZE_MAX, &len);
	expect_verdict("line k duplicated", buf, len, SL_VERIFY_REORDERED, k + 2, k + 1);
	free(buf);
	free(v);

	/* 5. the last line (record.end) removed */
	buf = join(ls.v, n - 1, SIZE_MAX, &len);
	expect_verdict("record.end removed", buf, len, SL_VERIFY_TRUNCATED, n, n - 1);
	free(buf);

	/* 6. the file cut mid-line: in a middle line, and just the final newline */
	buf = join(ls.v, n, SIZE_MAX, &len);
	size_t cut = (size_t)(strstr(buf, ls.v[k]) - buf) + 40;
	expect_verdict("cut mid-line k", buf, cut, SL_VERIFY_TRUNCATED, k + 1, k);
	expect_verdict("final newline cut", buf, len - 1, SL_VERIFY_TRUNCATED, n, n - 1);
	expect_verdict("empty record", buf, 0, SL_VERIFY_TRUNCATED, 1, 0);
	free(buf);

	/* 7. a well-formed, correctly chained line forged after record.end */
	char sid[33];
	p = strstr(ls.v[0], "\"sandbox_id\":\"");
	memcpy(sid, p + 14, 32);
	sid[32] = '\0';
	line_hash(ls.v[n - 1], h);
	char line[512];
	snprintf(line, sizeof(line),
		 "{\"seq\":%zu,\"sandbox_id\":\"%s\",\"time\":1,\"class\":\"test.event\",\"observer\":"
		 "\"supervisor\","
		 "\"identity\":{},\"prev_hash\":\"%s\",\"hash\":\"%064d\"}\n",
		 n + 1, sid, h, 0);
	forged = rehash(line);
	v = malloc((n + 1) * sizeof(char *));
	CHECK(v);
	memcpy(v, ls.v, n * sizeof(char *));
	v[n] = forged;
	buf = join(v, n + 1, SIZE_MAX, &len);
	expect_verdict("forged line after record.end", buf, len, SL_VERIFY_EDITED, n + 1, n);
	free(buf);

	/* 7b. the same forged line in place of record.end: seq n is missing. */
	v[n - 1] = forged;
	buf = join(v, n, SIZE_MAX, &len);
	expect_verdict("forged line in place of end", buf, len, SL_VERIFY_REMOVED, n, n - 1);
	free(buf);
	free(v);
	free(forged);

	/* 8. not an event at all; overlong; a duplicate key that changes the parsed class */
	expect_verdict("garbage", "hello\n", 6, SL_VERIFY_EDITED, 1, 0);
	size_t big = (1u << 20) + 10;
	buf = malloc(big);
	CHECK(buf);
	memset(buf, 'x', big);
	buf[big - 1] = '\n';
	expect_verdict("overlong line", buf, big, SL_VERIFY_EDITED, 1, 0);
	free(buf);
	v = copy_v(&ls);
	{
		/* Insert a second "class" member: json-c would let it replace the hashed one. */
		const char *orig = ls.v[k];
		const char *at = strstr(orig, ",\"prev_hash\"");
		char *dup = malloc(strlen(orig) + 64);
		CHECK(dup);
		sprintf(dup, "%.*s,\"class\":\"record.begin\"%s", (int)(at - orig), orig, at);
		v[k] = rehash(dup);
		free(dup);
	}
	buf = join(v, n, SIZE_MAX, &len);
	expect_verdict("duplicate class key", buf, len, SL_VERIFY_EDITED, k + 1, k);
	free(buf);
	free(v[k]);
	free(v);

	/* The file reader agrees with the buffer reader. */
	char tpath[4096];
	snprintf(tpath, sizeof(tpath), "%s/tampered.jsonl", tmpdir);
	buf = join(ls.v, n, k, &len);
	CHECK(sl_write_file_durable(tpath, buf, len, 0600) == 0);
	CHECK_EQ(sl_record_verify(tpath, &res), 1);
	CHECK_EQ(res.reason, SL_VERIFY_REMOVED);
	CHECK_EQ(res.bad_seq, k + 1);
	free(buf);
	v = copy_v(&ls);
	v[k] = ls.v[k + 1];
	v[k + 1] = ls.v[k];
	buf = join(v, n, SIZE_MAX, &len);
	CHECK(sl_write_file_durable(tpath, buf, len, 0600) == 0);
	CHECK_EQ(sl_record_verify(tpath, &res), 1);
	CHECK_EQ(res.reason, SL_VERIFY_REORDERED);
	CHECK_EQ(res.bad_seq, k + 1);
	free(buf);
	free(v);
	CHECK_EQ(sl_record_verify("/nonexistent/x.jsonl", &res), -ENOENT);
	CHECK_EQ(res.reason, SL_VERIFY_IO);
	CHECK_EQ(sl_record_verify(tmpdir, &res), -EISDIR);
	lines_free(&ls);
}

/* ---- argument checks, sync_ms 0, a failed write ---- */

static void test_args(void)
{
	struct sl_record *r;
	char id[33];
	random_id(id);
	CHECK_EQ(sl_record_create(&r, tmpdir, "ABCDEF0123456789abcdef0123456789", &ident, "s", 0), -EINVAL);
	CHECK_EQ(sl_record_create(&r, tmpdir, "abc", &ident, "s", 0), -EINVAL);
	CHECK_EQ(sl_record_create(&r, tmpdir, "../../../../../../etc/passwd0123", &ident, "s", 0), -EINVAL);
	CHECK_EQ(sl_record_create(&r, tmpdir, id, NULL, "s", 0), -EINVAL);

	/* A symlink planted where the record goes is never followed. */
	char link[4096], target[4096];
	snprintf(link, sizeof(link), "%s/%s.jsonl", tmpdir, id);
	snprintf(target, sizeof(target), "%s/target", tmpdir);
	CHECK(symlink(target, link) == 0);
	CHECK_EQ(sl_record_create(&r, tmpdir, id, &ident, "s", 0), -EEXIST);
	CHECK(access(target, F_OK) < 0);

	/* A missing directory is created 0700; sync_ms 0 syncs inside append. */
	char sub[4096];
	snprintf(sub, sizeof(sub), "%s/a/b", tmpdir);
	random_id(id);
	CHECK_EQ(sl_record_create(&r, sub, id, &ident, "s", 0), 0);
	struct stat st;
	CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700);
	struct sl_json j;
	sl_json_init(&j);
	CHECK_EQ(sl_record_append(r, "record.begin", 1, NULL), 1);
	CHECK_EQ(sl_record_append(r, "bad class", 1, NULL), -EINVAL);
	CHECK_EQ(sl_record_append(r, "", 1, NULL), -EINVAL);
	CHECK_EQ(sl_record_append(r, NULL, 1, NULL), -EINVAL);
	sl_json_raw(&j, "\"a\":\"x\ny\"", 9);
	CHECK_EQ(sl_record_append(r, "test.event", 1, &j), -EINVAL); /* a raw newline would split the line */
	sl_json_reset(&j);
	char *huge = malloc(1u << 20);
	CHECK(huge);
	memset(huge, 'a', 1u << 20);
	sl_json_strn(&j, "blob", huge, 1u << 20, 1u << 21);
	CHECK_EQ(sl_record_append(r, "test.event", 1, &j), -E2BIG);
	free(huge);
	sl_json_reset(&j);
	sl_json_int(&j, "n", -5);
	sl_json_uint(&j, "big", UINT64_MAX);
	sl_json_str(&j, "utf8", "h\xc3\xa9llo \xe2\x82\xac \x7f \xc3", 0);
	sl_json_obj_open(&j, "nested");
	sl_json_arr_open(&j, "a");
	sl_json_bool(&j, NULL, true);
	sl_json_null(&j, NULL);
	sl_json_arr_close(&j);
	sl_json_obj_close(&j);
	CHECK_EQ(sl_record_append(r, "test.event", -42, &j), 2);
	CHECK_EQ(sl_record_append(r, "test.event", INT64_MIN, &j), 3);
	char path[4096];
	snprintf(path, sizeof(path), "%s", sl_record_path(r));
	CHECK_EQ(sl_record_finish(r, NULL), 0);
	sl_json_free(&j);
	struct sl_verify_result res;
	CHECK_EQ(sl_record_verify(path, &res), 0);
	CHECK_EQ(res.events, 4);
	CHECK_EQ(sl_record_finish(NULL, NULL), 0);
	printf("ok: argument checks, symlink refused, sync_ms 0\n");
}

/* A write that fails part-way (here: RLIMIT_FSIZE, which gives a short write then EFBIG, the same
 * path as ENOSPC) leaves no partial line and does not advance seq; the record goes on afterwards. */
static void test_failed_write(void)
{
	struct sl_record *r;
	char id[33];
	random_id(id);
	CHECK_EQ(sl_record_create(&r, tmpdir, id, &ident, "supervisor", 2), 0);
	CHECK_EQ(sl_record_append(r, "record.begin", 1, NULL), 1);
	struct stat st;
	CHECK(stat(sl_record_path(r), &st) == 0);
	off_t good = st.st_size;

	struct rlimit old, lim;
	CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
	lim = old;
	lim.rlim_cur = (rlim_t)good + 100; /* room for part of the next line */
	signal(SIGXFSZ, SIG_IGN);
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	struct sl_json j;
	sl_json_init(&j);
	sl_json_str(&j, "pad", "0123456789012345678901234567890123456789", 0);
	int64_t s = sl_record_append(r, "test.event", 2, &j);
	CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
	CHECK_EQ(s, -EFBIG);
	CHECK(stat(sl_record_path(r), &st) == 0);
	CHECK_EQ(st.st_size, good);
	CHECK_EQ(sl_record_count(r), 1);

	CHECK_EQ(sl_record_append(r, "test.event", 3, &j), 2);
	char path[4096];
	snprintf(path, sizeof(path), "%s", sl_record_path(r));
	CHECK_EQ(sl_record_finish(r, &j), 0);
	sl_json_free(&j);
	struct sl_verify_result res;
	CHECK_EQ(sl_record_verify(path, &res), 0);
	CHECK_EQ(res.events, 3);
	printf("ok: failed write rolled back, seq kept, record continues\n");
}

/* fdatasync is interposed (this executable's definition wins over libc's for the library linked
 * into it), so a test can make the disk fail without root or a faulty device. */
static atomic_int fail_sync;
static atomic_int sync_calls;

int fdatasync(int fd)
{
	atomic_fetch_add(&sync_calls, 1);
	if (atomic_load(&fail_sync)) {
		errno = EIO;
		return -1;
	}
	return (int)syscall(SYS_fdatasync, fd);
}

/* A failed fdatasync is sticky: the next append and finish report it, nothing is silently accepted. */
static void test_sync_failure(void)
{
	struct sl_record *r;
	char id[33];
	struct stat st;

	/* Group sync: the line is accepted, the sync thread fails, the next append says so. */
	random_id(id);
	CHECK_EQ(sl_record_create(&r, tmpdir, id, &ident, "supervisor", 1), 0);
	atomic_store(&sync_calls, 0);
	atomic_store(&fail_sync, 1);
	CHECK_EQ(sl_record_append(r, "record.begin", 1, NULL), 1);
	for (int i = 0; i < 2000 && atomic_load(&sync_calls) == 0; i++)
		usleep(1000);
	CHECK(atomic_load(&sync_calls) > 0);
	atomic_store(&fail_sync, 0);
	CHECK_EQ(sl_record_append(r, "test.event", 2, NULL), -EIO);
	CHECK_EQ(sl_record_append(r, "test.event", 3, NULL), -EIO);
	CHECK_EQ(sl_record_count(r), 1);
	CHECK_EQ(sl_record_finish(r, NULL), -EIO);

	/* sync_ms 0: the append itself fails and its line is taken back out of the file. */
	random_id(id);
	CHECK_EQ(sl_record_create(&r, tmpdir, id, &ident, "supervisor", 0), 0);
	CHECK_EQ(sl_record_append(r, "record.begin", 1, NULL), 1);
	CHECK(stat(sl_record_path(r), &st) == 0);
	off_t good = st.st_size;
	atomic_store(&fail_sync, 1);
	CHECK_EQ(sl_record_append(r, "test.event", 2, NULL), -EIO);
	atomic_store(&fail_sync, 0);
	CHECK(stat(sl_record_path(r), &st) == 0);
	CHECK_EQ(st.st_size, good);
	CHECK_EQ(sl_record_append(r, "test.event", 3, NULL), -EIO);
	CHECK_EQ(sl_record_count(r), 1);
	CHECK_EQ(sl_record_finish(r, NULL), -EIO);
	printf("ok: a failed fdatasync is sticky (group sync and sync_ms 0)\n");
}

static void cleanup(void)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmpdir);
}

int main(void)
{
	CHECK(mkdtemp(tmpdir));
	atexit(cleanup);
	char *path = write_concurrent_record();
	test_tampering(path);
	free(path);
	test_args();
	test_failed_write();
	test_sync_failure();
	printf("test_record: all passed\n");
	return 0;
}
