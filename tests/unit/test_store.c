/* Unit test of the collector's store (src/collector/store.c): persistence across reopen, binding
 * idempotence and conflict, dedup and continuity of appends (resend, hole, chain break, conflicting
 * resend), health/alerts/rejects/revocations/acceptances, every query filter, a full database
 * (max_page_count) losing nothing committed, schema version checks, kill -9 of a writer losing
 * nothing acknowledged, and the insert rate (printed, not asserted). */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "collector/store.h"
#include "common/util.h"
#include "check.h"

static char tmpdir[] = "/tmp/sl-test-store-XXXXXX";

/* A store call that must return want; on mismatch, say what the store said. */
#define CHECK_RC(s, call, want)                                                                              \
	do {                                                                                                 \
		long long r_ = (long long)(call), w_ = (long long)(want);                                    \
		if (r_ != w_)                                                                                \
			die("%s:%d: %s == %lld (%s), want %lld", __FILE__, __LINE__, #call, r_,              \
			    sl_store_errmsg(s), w_);                                                         \
	} while (0)

static char *path_in(const char *name)
{
	char *p;
	CHECK(asprintf(&p, "%s/%s", tmpdir, name) > 0);
	return p;
}

static double now_s(void)
{
	return (double)sl_now_monotonic_ns() / 1e9;
}

/* ---- events as the collector would hand them over: pointers into the received line ---- */

/* A fake but distinct hash per (tag, seq); 64 '0' for seq 0 (the chain start). */
static void fake_hash(char out[65], unsigned tag, uint64_t seq)
{
	if (seq == 0)
		snprintf(out, 65, "%064d", 0);
	else
		snprintf(out, 65, "%08x%056" PRIx64, tag, seq);
}

/* Write one record-like line of about `size` bytes (with '\n') at buf and point e into it. prev may
 * be NULL (the real previous hash). Returns the line length. */
static size_t make_line(char *buf, size_t cap, const char *sid, unsigned tag, uint64_t seq, int64_t t,
			const char *cls, size_t size, const char *prev, struct sl_store_event *e)
{
	char ph[65], h[65];
	if (prev)
		snprintf(ph, sizeof(ph), "%s", prev);
	else
		fake_hash(ph, tag, seq - 1);
	fake_hash(h, tag, seq);
	int n = snprintf(
	    buf, cap,
	    "{\"seq\":%" PRIu64 ",\"sandbox_id\":\"%s\",\"time\":%" PRId64 ",\"class\":\"%s\","
	    "\"observer\":\"supervisor\",\"identity\":{\"tenant\":\"tenant-1\",\"agent\":\"agent-7\","
	    "\"task\":\"task-42\",\"version\":\"v1.2.3\",\"credential_ref\":\"cred/abc\"},"
	    "\"pid\":12,\"tid\":12,\"host_pid\":4242,\"host_tid\":4242,\"path\":\"/workspace/",
	    seq, sid, t, cls);
	CHECK(n > 0 && (size_t)n < cap);
	size_t len = (size_t)n;
	size_t tail = strlen("\",\"prev_hash\":\"\",\"hash\":\"\"}\n") + 128;
	while (len + tail < size && len < cap - tail - 1) {
		buf[len] = (char)('a' + len % 26);
		len++;
	}
	n = snprintf(buf + len, cap - len, "\",\"prev_hash\":\"%s\",\"hash\":\"%s\"}\n", ph, h);
	CHECK(n > 0 && (size_t)n < cap - len);
	char *cl = strstr(buf, "\"class\":\"") + 9;
	*e = (struct sl_store_event){
	    .seq = seq,
	    .time_ns = t,
	    .class_name = cl,
	    .class_len = strlen(cls),
	    .prev_hash = buf + len + strlen("\",\"prev_hash\":\""),
	    .hash = buf + len + strlen("\",\"prev_hash\":\"") + 64 + strlen("\",\"hash\":\""),
	    .line = buf,
	    .line_len = len + (size_t)n,
	};
	return e->line_len;
}

/* A batch of events with their lines. */
struct batch {
	char *buf;
	size_t cap, used, n;
	struct sl_store_event *ev;
	size_t max;
};

static void batch_init(struct batch *b, size_t max, size_t line_size)
{
	b->max = max;
	b->cap = max * (line_size + 512);
	b->buf = malloc(b->cap);
	b->ev = calloc(max, sizeof(*b->ev));
	CHECK(b->buf && b->ev);
	b->used = b->n = 0;
}

static void batch_reset(struct batch *b)
{
	b->used = b->n = 0;
}

static void batch_add(struct batch *b, const char *sid, unsigned tag, uint64_t seq, int64_t t,
		      const char *cls, size_t size, const char *prev)
{
	CHECK(b->n < b->max);
	b->used +=
	    make_line(b->buf + b->used, b->cap - b->used, sid, tag, seq, t, cls, size, prev, &b->ev[b->n]);
	b->n++;
}

static void batch_free(struct batch *b)
{
	free(b->buf);
	free(b->ev);
}

/* Append seqs [from, to] of sandbox sid (tag) with time t0 + seq, all of class cls. */
static int append_range(struct sl_store *s, const char *sid, unsigned tag, uint64_t from, uint64_t to,
			int64_t t0, const char *cls, uint64_t *last, size_t *dups)
{
	struct batch b;
	batch_init(&b, (size_t)(to - from + 1), 300);
	for (uint64_t q = from; q <= to; q++)
		batch_add(&b, sid, tag, q, t0 + (int64_t)q, cls, 300, NULL);
	int r = sl_store_append_events(s, sid, b.ev, b.n, 999, last, dups);
	batch_free(&b);
	return r;
}

/* ---- collecting query results ---- */

struct lines {
	char *v[256];
	size_t n;
};

static int collect_line(void *arg, const char *line, size_t len)
{
	struct lines *ls = arg;
	CHECK(ls->n < SL_ARRAY_LEN(ls->v));
	CHECK(strlen(line) == len && len > 0 && line[len - 1] == '}'); /* stored without '\n' */
	ls->v[ls->n++] = strdup(line);
	return 0;
}

static void lines_free(struct lines *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->v[i]);
	ls->n = 0;
}

/* Count, min and max of the seqs the reader hands out, and whether they come 1, 2, 3, ... */
struct seq_count {
	uint64_t n, min, max;
	bool in_order;
};

static int count_seqs(void *arg, const struct sl_store_event_row *e)
{
	struct seq_count *c = arg;
	if (c->n == 0) {
		c->min = e->seq;
		c->in_order = true;
	}
	c->in_order = c->in_order && e->seq == c->min + c->n && strlen(e->line) == e->len;
	c->max = e->seq > c->max ? e->seq : c->max;
	c->n++;
	return 0;
}

static size_t count_events(struct sl_store *s, const struct sl_store_filter *f)
{
	struct lines ls = {0};
	CHECK_RC(s, sl_store_each_event(s, f, collect_line, &ls), 0);
	size_t n = ls.n;
	lines_free(&ls);
	return n;
}

/* "seq":N of a line. */
static uint64_t line_seq(const char *line)
{
	return strtoull(line + strlen("{\"seq\":"), NULL, 10);
}

/* The sandbox_id of a line (first 8 chars are enough to tell our test sandboxes apart). */
static bool line_sid_is(const char *line, const char *sid)
{
	const char *p = strstr(line, "\"sandbox_id\":\"");
	return p && strncmp(p + 14, sid, strlen(sid)) == 0;
}

static int64_t line_time(const char *line)
{
	const char *p = strstr(line, "\"time\":");
	return p ? strtoll(p + 7, NULL, 10) : -1;
}

/* ---- fixtures ---- */

#define SID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define SID_C "cccccccccccccccccccccccccccccccc"

static struct sl_store_binding binding(const char *sid, const char *tenant, const char *task, int64_t started)
{
	return (struct sl_store_binding){
	    .sandbox_id = sid,
	    .tenant = tenant,
	    .agent = "agent-7",
	    .task = task,
	    .version = "v1.2.3",
	    .credential_ref = "cred/abc",
	    .risk_class = "high",
	    .runtime = "native",
	    .runtime_version = "1",
	    .sensor_version = "2",
	    .control = "unix:/run/sightline/ctl.sock",
	    .key_fingerprint = "sha256:0123",
	    .started_ns = started,
	};
}

static struct sl_store *open_ok(const char *path)
{
	struct sl_store *s;
	int r = sl_store_open(path, &s);
	if (r != 0)
		die("open %s: %d (%s)", path, r, sl_store_errmsg(NULL));
	return s;
}

/* ---- tests ---- */

static void test_open_persist(void)
{
	char *p = path_in("persist.db");
	struct sl_store *s = open_ok(p);
	struct stat st;
	CHECK(stat(p, &st) == 0);
	CHECK_EQ(st.st_mode & 0777, 0600);

	uint64_t last = 99;
	char hash[65];
	CHECK_RC(s, sl_store_last(s, SID_A, &last, hash), 0);
	CHECK_EQ(last, 0);
	CHECK(strcmp(hash, "0000000000000000000000000000000000000000000000000000000000000000") == 0);

	struct sl_store_binding b = binding(SID_A, "t1", "task1", 1000);
	CHECK_RC(s, sl_store_bind(s, &b), 0);
	CHECK_RC(s, append_range(s, SID_A, 1, 1, 3, 5000, "process.exec", &last, NULL), 0);
	CHECK_EQ(last, 3);
	sl_store_close(s);

	s = open_ok(p);
	CHECK_RC(s, sl_store_last(s, SID_A, &last, hash), 0);
	CHECK_EQ(last, 3);
	char want[65];
	fake_hash(want, 1, 3);
	CHECK(strcmp(hash, want) == 0);
	CHECK_EQ(count_events(s, NULL), 3);
	/* The chain continues across the reopen. */
	CHECK_RC(s, append_range(s, SID_A, 1, 4, 5, 5000, "process.exec", &last, NULL), 0);
	CHECK_EQ(last, 5);
	char *wal;
	CHECK(asprintf(&wal, "%s-wal", p) > 0);
	CHECK(stat(wal, &st) == 0); /* WAL mode, and the WAL takes the database's mode */
	CHECK_EQ(st.st_mode & 0777, 0600);
	free(wal);
	sl_store_close(s);
	sl_store_close(NULL);
	CHECK_EQ(sl_store_open(":memory:", &s), -EINVAL);
	CHECK_EQ(sl_store_open("", &s), -EINVAL);
	free(p);
	printf("ok: open, close, reopen keeps bindings, events and the head\n");
}

static void test_bind(void)
{
	char *p = path_in("bind.db");
	struct sl_store *s = open_ok(p);
	struct sl_store_binding b = binding(SID_A, "t1", "task1", 1000);
	CHECK_RC(s, sl_store_bind(s, &b), 0);
	CHECK_RC(s, sl_store_bind(s, &b), 0); /* identical: idempotent */
	struct sl_store_binding c = b;
	c.tenant = "t2";
	CHECK_RC(s, sl_store_bind(s, &c), -EEXIST);
	CHECK(strstr(sl_store_errmsg(s), "different identity"));
	c = b;
	c.key_fingerprint = NULL; /* NULL differs from a value */
	CHECK_RC(s, sl_store_bind(s, &c), -EEXIST);
	c = b;
	c.started_ns = 1001;
	CHECK_RC(s, sl_store_bind(s, &c), -EEXIST);
	c = b;
	c.ended_ns = 77; /* ignored */
	CHECK_RC(s, sl_store_bind(s, &c), 0);
	c = b;
	c.sandbox_id = NULL;
	CHECK_RC(s, sl_store_bind(s, &c), -EINVAL);
	/* A binding with NULL members is stored as such, and rebinding it identically is fine. */
	struct sl_store_binding n = {.sandbox_id = SID_B, .tenant = "t1", .started_ns = 5};
	CHECK_RC(s, sl_store_bind(s, &n), 0);
	CHECK_RC(s, sl_store_bind(s, &n), 0);
	sl_store_close(s);
	free(p);
	printf("ok: binding is insert-or-verify-identical (-EEXIST on any difference)\n");
}

static void test_append(void)
{
	char *p = path_in("append.db");
	struct sl_store *s = open_ok(p);
	struct sl_store_binding b = binding(SID_A, "t1", "task1", 1000);
	CHECK_RC(s, sl_store_bind(s, &b), 0);
	uint64_t last = 0;
	size_t dups = 99;

	/* Contiguous. */
	CHECK_RC(s, append_range(s, SID_A, 1, 1, 10, 0, "file.open", &last, &dups), 0);
	CHECK_EQ(last, 10);
	CHECK_EQ(dups, 0);

	/* An empty batch is fine and reports the head. */
	CHECK_RC(s, sl_store_append_events(s, SID_A, NULL, 0, 1, &last, &dups), 0);
	CHECK_EQ(last, 10);

	/* Resend of 5..10 plus new 11..15: the resends are counted, not stored twice. */
	CHECK_RC(s, append_range(s, SID_A, 1, 5, 15, 0, "file.open", &last, &dups), 0);
	CHECK_EQ(last, 15);
	CHECK_EQ(dups, 6);
	CHECK_EQ(count_events(s, NULL), 15);
	/* A pure resend. */
	CHECK_RC(s, append_range(s, SID_A, 1, 1, 15, 0, "file.open", &last, &dups), 0);
	CHECK_EQ(last, 15);
	CHECK_EQ(dups, 15);
	CHECK_EQ(count_events(s, NULL), 15);

	/* A hole: 16, 17, then 19. 16 and 17 are committed, -EPROTO, the head is 17. */
	struct batch bt;
	batch_init(&bt, 16, 300);
	batch_add(&bt, SID_A, 1, 16, 16, "file.open", 300, NULL);
	batch_add(&bt, SID_A, 1, 17, 17, "file.open", 300, NULL);
	batch_add(&bt, SID_A, 1, 19, 19, "file.open", 300, NULL);
	batch_add(&bt, SID_A, 1, 20, 20, "file.open", 300, NULL);
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), -EPROTO);
	CHECK(strstr(sl_store_errmsg(s), "hole"));
	CHECK_EQ(last, 17);
	CHECK_EQ(count_events(s, NULL), 17);
	sl_store_close(s);
	s = open_ok(p); /* the prefix is durable, not just visible */
	CHECK_RC(s, sl_store_last(s, SID_A, &last, NULL), 0);
	CHECK_EQ(last, 17);

	/* A chain break: 18 whose prev_hash is not 17's hash. Nothing stored, head unchanged. */
	batch_reset(&bt);
	char bad[65];
	fake_hash(bad, 2, 17);
	batch_add(&bt, SID_A, 1, 18, 18, "file.open", 300, bad);
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), -EPROTO);
	CHECK(strstr(sl_store_errmsg(s), "prev_hash"));
	CHECK_EQ(last, 17);
	/* A chain break after good events: the good ones are committed. */
	batch_reset(&bt);
	batch_add(&bt, SID_A, 1, 18, 18, "file.open", 300, NULL);
	fake_hash(bad, 3, 18);
	batch_add(&bt, SID_A, 1, 19, 19, "file.open", 300, bad);
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), -EPROTO);
	CHECK_EQ(last, 18);
	CHECK_EQ(count_events(s, NULL), 18);

	/* A conflicting resend: seq 5 again with other bytes (a rewritten record). */
	batch_reset(&bt);
	batch_add(&bt, SID_A, 1, 5, 555, "file.open", 300, NULL); /* other time */
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), -EPROTO);
	CHECK(strstr(sl_store_errmsg(s), "different content"));
	CHECK_EQ(last, 18);

	/* The resend of a line without its '\n' is the same line. */
	batch_reset(&bt);
	batch_add(&bt, SID_A, 1, 18, 18, "file.open", 300, NULL);
	bt.ev[0].line_len--;
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), 0);
	CHECK_EQ(dups, 1);

	/* Unbound sandbox; malformed events. */
	batch_reset(&bt);
	batch_add(&bt, SID_C, 1, 1, 1, "file.open", 300, NULL);
	CHECK_RC(s, sl_store_append_events(s, SID_C, bt.ev, bt.n, 1, &last, &dups), -ENOENT);
	CHECK_EQ(last, 0);
	bt.ev[0].seq = 0;
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), -EINVAL);
	CHECK_EQ(last, 18);
	bt.ev[0].seq = 19;
	bt.ev[0].hash = NULL;
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), -EINVAL);
	/* A '\n' inside a line would split the stored batch row: refused, nothing stored. */
	batch_reset(&bt);
	batch_add(&bt, SID_A, 1, 19, 19, "file.open", 300, NULL);
	((char *)bt.ev[0].line)[40] = '\n';
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), -EINVAL);
	CHECK_EQ(last, 18);

	/* A line repeated inside one batch (19, 20, 19, 21): the repeat is a dup, one row 19..21. */
	batch_reset(&bt);
	batch_add(&bt, SID_A, 1, 19, 19, "file.open", 300, NULL);
	batch_add(&bt, SID_A, 1, 20, 20, "file.open", 300, NULL);
	batch_add(&bt, SID_A, 1, 19, 19, "file.open", 300, NULL);
	batch_add(&bt, SID_A, 1, 21, 21, "file.open", 300, NULL);
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), 0);
	CHECK_EQ(last, 21);
	CHECK_EQ(dups, 1);
	/* ... and with other bytes: -EPROTO, what came before it (22) committed. */
	batch_reset(&bt);
	batch_add(&bt, SID_A, 1, 22, 22, "file.open", 300, NULL);
	batch_add(&bt, SID_A, 1, 22, 2222, "file.open", 300, NULL);
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), -EPROTO);
	CHECK(strstr(sl_store_errmsg(s), "different content"));
	CHECK_EQ(last, 22);
	/* A resend that spans three stored rows (11..15, 16..17, 18) compares with each. */
	batch_reset(&bt);
	for (uint64_t q = 13; q <= 18; q++)
		batch_add(&bt, SID_A, 1, q, (int64_t)q, "file.open", 300, NULL);
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), 0);
	CHECK_EQ(dups, 6);
	batch_reset(&bt);
	batch_add(&bt, SID_A, 1, 16, 16, "file.open", 300, NULL);
	batch_add(&bt, SID_A, 1, 17, 1717, "file.open", 300, NULL); /* other bytes in row 16..17 */
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups), -EPROTO);
	CHECK_EQ(last, 22);
	/* Every line once, in seq order. */
	struct seq_count sc = {0};
	CHECK_RC(s, sl_store_each_event_row(s, NULL, count_seqs, &sc), 0);
	CHECK(sc.n == 22 && sc.min == 1 && sc.max == 22 && sc.in_order);
	batch_free(&bt);

	/* The head is what health says, and received_ns / last_frame_ns were recorded. */
	char hash[65], want[65];
	CHECK_RC(s, sl_store_last(s, SID_A, &last, hash), 0);
	fake_hash(want, 1, 22);
	CHECK(strcmp(hash, want) == 0);
	sl_store_close(s);
	free(p);
	printf("ok: append: contiguous, resend deduplicated, hole/chain break/conflicting resend -> -EPROTO "
	       "with "
	       "the prefix committed\n");
}

struct health_seen {
	size_t n;
	struct sl_store_health h;
	char state[16];
	char sid[33];
	char tenant[16], task[16], control[64], risk[16];
};

static int collect_health(void *arg, const struct sl_store_health *h)
{
	struct health_seen *hs = arg;
	hs->n++;
	hs->h = *h;
	snprintf(hs->state, sizeof(hs->state), "%s", h->state);
	snprintf(hs->sid, sizeof(hs->sid), "%s", h->binding.sandbox_id);
	snprintf(hs->tenant, sizeof(hs->tenant), "%s", h->binding.tenant ? h->binding.tenant : "(null)");
	snprintf(hs->task, sizeof(hs->task), "%s", h->binding.task ? h->binding.task : "(null)");
	snprintf(hs->control, sizeof(hs->control), "%s", h->binding.control ? h->binding.control : "(null)");
	snprintf(hs->risk, sizeof(hs->risk), "%s", h->binding.risk_class ? h->binding.risk_class : "(null)");
	hs->h.state = NULL; /* the row's strings live only during the callback */
	memset(&hs->h.binding, 0, sizeof(hs->h.binding));
	hs->h.binding.started_ns = h->binding.started_ns;
	hs->h.binding.ended_ns = h->binding.ended_ns;
	return 0;
}

struct alerts_seen {
	size_t n;
	int64_t ids[16];
	int64_t ended[16];
	char kinds[16][32];
};

static int collect_alert(void *arg, const struct sl_store_alert *a)
{
	struct alerts_seen *as = arg;
	CHECK(as->n < 16);
	as->ids[as->n] = a->id;
	as->ended[as->n] = a->ended_ns;
	snprintf(as->kinds[as->n], sizeof(as->kinds[0]), "%s", a->kind);
	as->n++;
	return 0;
}

static int collect_reject(void *arg, const char *reason, uint64_t count)
{
	char *out = arg;
	char one[64];
	snprintf(one, sizeof(one), "%s=%" PRIu64 ";", reason, count);
	strcat(out, one);
	return 0;
}

static int collect_acceptance(void *arg, const struct sl_store_acceptance *a)
{
	char *out = arg;
	char one[128];
	snprintf(one, sizeof(one), "%s/%s/%d/%" PRId64 ";", a->contract, a->sensor_version, a->passed,
		 a->at_ns);
	strcat(out, one);
	return 0;
}

static void test_health_alerts(void)
{
	char *p = path_in("health.db");
	struct sl_store *s = open_ok(p);
	struct sl_store_binding b = binding(SID_A, "t1", "task1", 1000);
	CHECK_RC(s, sl_store_bind(s, &b), 0);

	/* Heartbeat counters. */
	struct sl_store_counters c = {
	    .emitted = 10, .recorded = 9, .exported = 8, .acked = 7, .dropped = 1, .backlog = 2};
	CHECK_RC(s, sl_store_heartbeat(s, SID_A, &c, 2000), 0);
	CHECK_RC(s, sl_store_heartbeat(s, SID_C, &c, 2000), -ENOENT);
	struct health_seen hs = {0};
	struct sl_store_filter f = {.sandbox_id = SID_A};
	CHECK_RC(s, sl_store_each_health(s, &f, collect_health, &hs), 0);
	CHECK_EQ(hs.n, 1);
	CHECK_EQ(hs.h.last_heartbeat_ns, 2000);
	CHECK_EQ(hs.h.counters.emitted, 10);
	CHECK_EQ(hs.h.counters.recorded, 9);
	CHECK_EQ(hs.h.counters.exported, 8);
	CHECK_EQ(hs.h.counters.acked, 7);
	CHECK_EQ(hs.h.counters.dropped, 1);
	CHECK_EQ(hs.h.counters.backlog, 2);
	CHECK(strcmp(hs.state, "healthy") == 0);
	CHECK_EQ(hs.h.state_since_ns, 1000);
	CHECK_EQ(hs.h.last_frame_ns, 0);
	CHECK_EQ(hs.h.binding.ended_ns, 0);
	CHECK(strcmp(hs.risk, "high") == 0);

	/* State transitions. */
	CHECK_RC(s, sl_store_set_state(s, SID_A, "lagging", 3000), 1);
	CHECK_RC(s, sl_store_set_state(s, SID_A, "lagging", 3500), 0);
	CHECK_RC(s, sl_store_set_state(s, SID_A, "blind", 4000), 1);
	CHECK_RC(s, sl_store_set_state(s, SID_A, "sleepy", 4000), -EINVAL);
	CHECK_RC(s, sl_store_set_state(s, SID_A, NULL, 4000), -EINVAL);
	CHECK_RC(s, sl_store_set_state(s, SID_C, "blind", 4000), -ENOENT);
	hs.n = 0;
	CHECK_RC(s, sl_store_each_health(s, &f, collect_health, &hs), 0);
	CHECK(strcmp(hs.state, "blind") == 0);
	CHECK_EQ(hs.h.state_since_ns, 4000);

	/* Alerts: open, dedupe, close, reopen. */
	int64_t a1 = sl_store_alert_open(s, SID_A, "blind", "critical", 4000, "{\"for_ms\":2000}");
	CHECK(a1 > 0);
	CHECK_RC(s, sl_store_alert_open(s, SID_A, "blind", "critical", 4100, NULL), a1);
	int64_t a2 = sl_store_alert_open(s, SID_A, "gap", "warning", 4200, NULL);
	CHECK(a2 > 0 && a2 != a1);
	int64_t g1 = sl_store_alert_open(s, NULL, "disk", "critical", 4300, NULL); /* collector-wide */
	CHECK(g1 > 0);
	CHECK_RC(s, sl_store_alert_open(s, NULL, "disk", "critical", 4400, NULL), g1);
	CHECK_RC(s, sl_store_alert_open(s, SID_C, "blind", "critical", 4000, NULL), -ENOENT);
	CHECK_RC(s, sl_store_alert_open(s, SID_A, NULL, "critical", 4000, NULL), -EINVAL);
	CHECK_RC(s, sl_store_alert_close(s, a1, 5000), 0);
	CHECK_RC(s, sl_store_alert_close(s, a1, 6000), 0); /* already closed: first end kept */
	CHECK_RC(s, sl_store_alert_close(s, 999999, 6000), -ENOENT);
	int64_t a3 = sl_store_alert_open(s, SID_A, "blind", "critical", 7000, NULL);
	CHECK(a3 > 0 && a3 != a1);

	struct alerts_seen as = {0};
	CHECK_RC(s, sl_store_each_alert(s, NULL, collect_alert, &as), 0);
	CHECK_EQ(as.n, 4); /* a1 (closed), a2, g1, a3: ordered by start */
	CHECK_EQ(as.ids[0], a1);
	CHECK_EQ(as.ended[0], 5000);
	CHECK_EQ(as.ids[1], a2);
	CHECK_EQ(as.ended[1], 0);
	CHECK_EQ(as.ids[2], g1);
	CHECK_EQ(as.ids[3], a3);
	struct sl_store_filter af = {.open_only = true};
	memset(&as, 0, sizeof(as));
	CHECK_RC(s, sl_store_each_alert(s, &af, collect_alert, &as), 0);
	CHECK_EQ(as.n, 3);
	af = (struct sl_store_filter){.kind = "blind"};
	memset(&as, 0, sizeof(as));
	CHECK_RC(s, sl_store_each_alert(s, &af, collect_alert, &as), 0);
	CHECK_EQ(as.n, 2);
	af = (struct sl_store_filter){.since_ns = 5500}; /* a1 ended before: left out */
	memset(&as, 0, sizeof(as));
	CHECK_RC(s, sl_store_each_alert(s, &af, collect_alert, &as), 0);
	CHECK_EQ(as.n, 3);
	af = (struct sl_store_filter){.tenant = "t1"}; /* joins bindings: the collector-wide one is out */
	memset(&as, 0, sizeof(as));
	CHECK_RC(s, sl_store_each_alert(s, &af, collect_alert, &as), 0);
	CHECK_EQ(as.n, 3);
	af = (struct sl_store_filter){.sandbox_id = SID_A, .limit = 1};
	memset(&as, 0, sizeof(as));
	CHECK_RC(s, sl_store_each_alert(s, &af, collect_alert, &as), 0);
	CHECK_EQ(as.n, 1);
	CHECK_EQ(as.ids[0], a1);

	/* End: binding ended_ns and state "ended". */
	CHECK_RC(s, sl_store_end(s, SID_A, 8000), 0);
	CHECK_RC(s, sl_store_end(s, SID_A, 9000), 0); /* the first end is kept */
	CHECK_RC(s, sl_store_end(s, SID_C, 9000), -ENOENT);
	hs.n = 0;
	CHECK_RC(s, sl_store_each_health(s, &f, collect_health, &hs), 0);
	CHECK(strcmp(hs.state, "ended") == 0);
	CHECK_EQ(hs.h.state_since_ns, 8000);
	CHECK_EQ(hs.h.binding.ended_ns, 8000);

	/* Rejects. */
	CHECK_RC(s, sl_store_reject(s, "bad-mac"), 0);
	CHECK_RC(s, sl_store_reject(s, "bad-mac"), 0);
	CHECK_RC(s, sl_store_reject(s, "oversized"), 0);
	char rej[256] = "";
	CHECK_RC(s, sl_store_each_reject(s, collect_reject, rej), 0);
	CHECK(strcmp(rej, "bad-mac=2;oversized=1;") == 0);

	/* Revocations. */
	CHECK_RC(s, sl_store_is_revoked(s, "cred/abc"), 0);
	CHECK_RC(s, sl_store_revoke(s, "cred/abc", 10000, "blind past limit"), 0);
	CHECK_RC(s, sl_store_is_revoked(s, "cred/abc"), 1);
	CHECK_RC(s, sl_store_revoke(s, "cred/abc", 11000, NULL), 1);
	CHECK_RC(s, sl_store_is_revoked(s, "cred/other"), 0);

	/* Acceptances: newest first. */
	struct sl_store_acceptance acc = {.contract = "c1",
					  .runtime = "native",
					  .runtime_version = "1",
					  .sensor_version = "1",
					  .passed = true,
					  .at_ns = 100,
					  .report = "{}"};
	CHECK(sl_store_acceptance_add(s, &acc) > 0);
	acc.sensor_version = "2";
	acc.passed = false;
	acc.at_ns = 200;
	CHECK(sl_store_acceptance_add(s, &acc) > 0);
	acc.contract = "c2";
	CHECK(sl_store_acceptance_add(s, &acc) > 0);
	char accs[512] = "";
	CHECK_RC(s, sl_store_each_acceptance(s, "c1", collect_acceptance, accs), 0);
	CHECK(strcmp(accs, "c1/2/0/200;c1/1/1/100;") == 0);
	sl_store_close(s);

	/* All of it survives a reopen. */
	s = open_ok(p);
	CHECK_RC(s, sl_store_is_revoked(s, "cred/abc"), 1);
	rej[0] = '\0';
	CHECK_RC(s, sl_store_each_reject(s, collect_reject, rej), 0);
	CHECK(strcmp(rej, "bad-mac=2;oversized=1;") == 0);
	sl_store_close(s);
	free(p);
	printf("ok: heartbeat, state, alert open/close/dedupe, end, rejects, revocations, acceptances\n");
}

static int stop_after_two(void *arg, const char *line, size_t len)
{
	(void)line;
	(void)len;
	int *n = arg;
	return ++*n == 2 ? 42 : 0;
}

static void test_queries(void)
{
	char *p = path_in("query.db");
	struct sl_store *s = open_ok(p);
	struct sl_store_binding b;
	b = binding(SID_A, "t1", "task1", 1000);
	CHECK_RC(s, sl_store_bind(s, &b), 0);
	b = binding(SID_B, "t1", "task2", 1100);
	CHECK_RC(s, sl_store_bind(s, &b), 0);
	b = binding(SID_C, "t2", "task1", 1200);
	CHECK_RC(s, sl_store_bind(s, &b), 0);

	/* A: seqs 1-4 at times 10,20,30,40 (exec, open, open, exec). B: 1-3 at 20,25,50 (open).
	 * C: 1-2 at 5, 20 (connect). */
	struct batch bt;
	batch_init(&bt, 8, 300);
	const int64_t ta[] = {10, 20, 30, 40};
	const char *ca[] = {"process.exec", "file.open", "file.open", "process.exec"};
	for (int i = 0; i < 4; i++)
		batch_add(&bt, SID_A, 1, (uint64_t)i + 1, ta[i], ca[i], 300, NULL);
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, NULL, NULL), 0);
	batch_reset(&bt);
	const int64_t tb[] = {20, 25, 50};
	for (int i = 0; i < 3; i++)
		batch_add(&bt, SID_B, 2, (uint64_t)i + 1, tb[i], "file.open", 300, NULL);
	CHECK_RC(s, sl_store_append_events(s, SID_B, bt.ev, bt.n, 1, NULL, NULL), 0);
	batch_reset(&bt);
	const int64_t tc[] = {5, 20};
	for (int i = 0; i < 2; i++)
		batch_add(&bt, SID_C, 3, (uint64_t)i + 1, tc[i], "network.connect", 300, NULL);
	CHECK_RC(s, sl_store_append_events(s, SID_C, bt.ev, bt.n, 1, NULL, NULL), 0);
	batch_free(&bt);

	/* Everything, ordered by time, then sandbox_id, then seq. */
	struct lines ls = {0};
	CHECK_RC(s, sl_store_each_event(s, NULL, collect_line, &ls), 0);
	CHECK_EQ(ls.n, 9);
	const struct {
		const char *sid;
		uint64_t seq;
		int64_t t;
	} want[] = {{SID_C, 1, 5},  {SID_A, 1, 10}, {SID_A, 2, 20}, {SID_B, 1, 20}, {SID_C, 2, 20},
		    {SID_B, 2, 25}, {SID_A, 3, 30}, {SID_A, 4, 40}, {SID_B, 3, 50}};
	for (size_t i = 0; i < ls.n; i++) {
		CHECK(line_sid_is(ls.v[i], want[i].sid));
		CHECK_EQ(line_seq(ls.v[i]), want[i].seq);
		CHECK_EQ(line_time(ls.v[i]), want[i].t);
	}
	lines_free(&ls);

	struct sl_store_filter f;
	f = (struct sl_store_filter){.tenant = "t1"};
	CHECK_EQ(count_events(s, &f), 7);
	f = (struct sl_store_filter){.tenant = "t2"};
	CHECK_EQ(count_events(s, &f), 2);
	f = (struct sl_store_filter){.task = "task1"};
	CHECK_EQ(count_events(s, &f), 6);
	f = (struct sl_store_filter){.tenant = "t1", .task = "task1"};
	CHECK_EQ(count_events(s, &f), 4);
	f = (struct sl_store_filter){.sandbox_id = SID_B};
	CHECK_EQ(count_events(s, &f), 3);
	f = (struct sl_store_filter){.class_name = "file.open"};
	CHECK_EQ(count_events(s, &f), 5);
	f = (struct sl_store_filter){.class_name = "process.exec", .sandbox_id = SID_A};
	CHECK_EQ(count_events(s, &f), 2);
	f = (struct sl_store_filter){.since_ns = 25};
	CHECK_EQ(count_events(s, &f), 4);
	f = (struct sl_store_filter){.since_ns = 20, .class_name = "file.open", .tenant = "t1"};
	CHECK_EQ(count_events(s, &f), 5);
	f = (struct sl_store_filter){.tenant = "nobody"};
	CHECK_EQ(count_events(s, &f), 0);
	f = (struct sl_store_filter){.limit = 3, .since_ns = 20};
	CHECK_RC(s, sl_store_each_event(s, &f, collect_line, &ls), 0);
	CHECK_EQ(ls.n, 3);
	CHECK(line_sid_is(ls.v[0], SID_A) && line_seq(ls.v[0]) == 2);
	CHECK(line_sid_is(ls.v[2], SID_C) && line_seq(ls.v[2]) == 2);
	lines_free(&ls);
	/* A callback's non-zero return stops the walk and is returned. */
	int seen = 0;
	CHECK_RC(s, sl_store_each_event(s, NULL, stop_after_two, &seen), 42);
	CHECK_EQ(seen, 2);

	/* Health with binding fields, each filter. */
	struct health_seen hs = {0};
	CHECK_RC(s, sl_store_each_health(s, NULL, collect_health, &hs), 0);
	CHECK_EQ(hs.n, 3);
	CHECK(strcmp(hs.sid, SID_C) == 0); /* ordered by started_ns: C last */
	CHECK_EQ(hs.h.last_seq, 2);
	CHECK_EQ(hs.h.last_frame_ns, 1);
	char h2[65];
	fake_hash(h2, 3, 2);
	CHECK(strcmp(hs.h.last_hash, h2) == 0);
	hs.n = 0;
	f = (struct sl_store_filter){.tenant = "t1"};
	CHECK_RC(s, sl_store_each_health(s, &f, collect_health, &hs), 0);
	CHECK_EQ(hs.n, 2);
	CHECK(strcmp(hs.sid, SID_B) == 0);
	CHECK(strcmp(hs.task, "task2") == 0);
	CHECK(strcmp(hs.tenant, "t1") == 0);
	CHECK(strcmp(hs.control, "unix:/run/sightline/ctl.sock") == 0);
	hs.n = 0;
	f = (struct sl_store_filter){.task = "task1"};
	CHECK_RC(s, sl_store_each_health(s, &f, collect_health, &hs), 0);
	CHECK_EQ(hs.n, 2);
	CHECK_RC(s, sl_store_set_state(s, SID_B, "blind", 3000), 1);
	hs.n = 0;
	f = (struct sl_store_filter){.state = "blind"};
	CHECK_RC(s, sl_store_each_health(s, &f, collect_health, &hs), 0);
	CHECK_EQ(hs.n, 1);
	CHECK(strcmp(hs.sid, SID_B) == 0);
	CHECK_RC(s, sl_store_end(s, SID_A, 2000), 0);
	hs.n = 0;
	f = (struct sl_store_filter){.since_ns = 2500}; /* A ended before: left out */
	CHECK_RC(s, sl_store_each_health(s, &f, collect_health, &hs), 0);
	CHECK_EQ(hs.n, 2);
	hs.n = 0;
	f = (struct sl_store_filter){.sandbox_id = SID_A, .since_ns = 1500};
	CHECK_RC(s, sl_store_each_health(s, &f, collect_health, &hs), 0);
	CHECK_EQ(hs.n, 1);
	CHECK(strcmp(hs.state, "ended") == 0);
	hs.n = 0;
	f = (struct sl_store_filter){.limit = 1};
	CHECK_RC(s, sl_store_each_health(s, &f, collect_health, &hs), 0);
	CHECK_EQ(hs.n, 1);
	CHECK(strcmp(hs.sid, SID_A) == 0);
	sl_store_close(s);
	free(p);
	printf("ok: queries by tenant, task, sandbox, class, since, limit; health with binding fields\n");
}

/* A full database: writes fail with -ENOSPC, nothing committed before is lost, and appends resume
 * once there is room. */
static void test_full(void)
{
	char *p = path_in("full.db");
	struct sl_store *s = open_ok(p);
	struct sl_store_binding b = binding(SID_A, "t1", "task1", 1000);
	CHECK_RC(s, sl_store_bind(s, &b), 0);
	uint64_t last = 0;
	CHECK_RC(s, append_range(s, SID_A, 1, 1, 100, 0, "file.open", &last, NULL), 0);
	CHECK_RC(s, sl_store_set_max_size(s, 1 << 20), 0); /* about 1 MiB */

	struct batch bt;
	batch_init(&bt, 64, 1000);
	uint64_t seq = last;
	int r = 0;
	for (int round = 0; round < 1000 && r == 0; round++) {
		batch_reset(&bt);
		for (int i = 0; i < 64; i++)
			batch_add(&bt, SID_A, 1, seq + 1 + (uint64_t)i, (int64_t)(seq + 1 + (uint64_t)i),
				  "file.open", 1000, NULL);
		size_t dups;
		r = sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, &dups);
		if (r == 0) {
			CHECK_EQ(last, seq + 64);
			seq = last;
		}
	}
	CHECK_RC(s, r, -ENOSPC);
	printf("     full after seq %" PRIu64 ": %s\n", seq, sl_store_errmsg(s));
	CHECK_EQ(last, seq); /* the failed batch is rolled back as a whole */
	uint64_t head;
	CHECK_RC(s, sl_store_last(s, SID_A, &head, NULL), 0);
	CHECK_EQ(head, seq);
	/* Other writes either fit or fail whole: a binding never exists without its health row. */
	int rr = sl_store_reject(s, "x-full");
	CHECK(rr == 0 || rr == -ENOSPC);
	struct sl_store_binding b2 = binding(SID_B, "t1", "a-long-task-name-to-need-some-room", 1000);
	rr = sl_store_bind(s, &b2);
	CHECK(rr == 0 || rr == -ENOSPC);
	struct health_seen hs = {0};
	struct sl_store_filter hf = {.sandbox_id = SID_B};
	CHECK_RC(s, sl_store_each_health(s, &hf, collect_health, &hs), 0);
	CHECK_EQ(hs.n, rr == 0 ? 1 : 0);
	CHECK_RC(s, sl_store_bind(s, &b2), rr); /* the same outcome again */

	/* Room again: the failed batch goes in as it is. */
	CHECK_RC(s, sl_store_set_max_size(s, 0), 0);
	CHECK_RC(s, sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, NULL), 0);
	CHECK_EQ(last, seq + 64);
	sl_store_close(s);

	s = open_ok(p);
	CHECK_RC(s, sl_store_last(s, SID_A, &head, NULL), 0);
	CHECK_EQ(head, seq + 64);
	sl_store_close(s);
	/* Count through the reader API: every line once, seqs 1..head in order. */
	s = open_ok(p);
	struct seq_count sc = {0};
	CHECK_RC(s, sl_store_each_event_row(s, NULL, count_seqs, &sc), 0);
	CHECK_EQ(sc.n, seq + 64);
	CHECK_EQ(sc.min, 1);
	CHECK_EQ(sc.max, seq + 64);
	CHECK(sc.in_order);
	sl_store_close(s);
	batch_free(&bt);
	free(p);
	printf("ok: full database -> -ENOSPC, the batch rolled back, nothing committed lost, resumes with "
	       "room\n");
}

static int count_cb(void *arg, const char *line, size_t len)
{
	(void)line;
	(void)len;
	(*(size_t *)arg)++;
	return 0;
}

static void raw_exec(const char *path, const char *sql)
{
	sqlite3 *db;
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	char *err = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
		die("%s: %s", sql, err);
	sqlite3_close(db);
}

static void test_schema_version(void)
{
	struct sl_store *s;
	char *p = path_in("version.db");
	s = open_ok(p);
	sl_store_close(s);
	raw_exec(p, "PRAGMA user_version=4");
	CHECK_EQ(sl_store_open(p, &s), -EPROTO);
	CHECK(s == NULL);
	CHECK(strstr(sl_store_errmsg(NULL), "newer"));
	free(p);

	/* Version 2 (one events row per line) and version 1 (the same with two indexes) stores are
	 * migrated to 3 at open: rows of one received batch become one event_batches row. */
	for (int v = 2; v >= 1; v--) {
		p = path_in(v == 2 ? "v2.db" : "v1.db");
		s = open_ok(p);
		struct sl_store_binding ba = binding(SID_A, "t1", "task1", 1000),
					bb = binding(SID_B, "t2", "task2", 1000);
		CHECK_RC(s, sl_store_bind(s, &ba), 0);
		CHECK_RC(s, sl_store_bind(s, &bb), 0);
		sl_store_close(s);
		char sql[2048];
		snprintf(sql, sizeof(sql),
			 "DROP TABLE event_batches; CREATE TABLE events(sandbox_id TEXT NOT NULL, seq INTEGER NOT NULL,"
			 " time_ns INTEGER NOT NULL, class TEXT NOT NULL, received_ns INTEGER NOT NULL, line TEXT NOT NULL,"
			 " PRIMARY KEY(sandbox_id, seq)) WITHOUT ROWID;"
			 "INSERT INTO events VALUES('%s',1,101,'a',5,'{\"seq\":1,\"time\":101,\"class\":\"a\"}'),"
			 "('%s',2,102,'b',5,'{\"seq\":2,\"time\":102,\"class\":\"b\"}'),"
			 "('%s',3,104,'a',6,'{\"seq\":3,\"time\":104,\"class\":\"a\"}'),"
			 "('%s',1,103,'a',7,'{\"seq\":1,\"time\":103,\"class\":\"a\"}');"
			 "%s PRAGMA user_version=%d;",
			 SID_A, SID_A, SID_A, SID_B,
			 v == 1 ? "CREATE INDEX events_time ON events(time_ns); CREATE INDEX events_class_time ON"
				  " events(class, time_ns);"
				: "",
			 v);
		raw_exec(p, sql);
		/* A reader does not migrate: it says what to do. */
		CHECK_EQ(sl_store_open_readonly(p, &s), -EPROTO);
		CHECK(strstr(sl_store_errmsg(NULL), "migrate"));
		s = open_ok(p);
		sl_store_close(s);
		sqlite3 *db;
		CHECK(sqlite3_open(p, &db) == SQLITE_OK);
		sqlite3_stmt *q;
		CHECK(sqlite3_prepare_v2(db, "SELECT (SELECT user_version FROM pragma_user_version),"
					     " (SELECT count(*) FROM sqlite_schema WHERE name LIKE 'events%'),"
					     " (SELECT group_concat(first_seq || '-' || last_seq || '@' || received_ns, ' ')"
					     " FROM (SELECT * FROM event_batches ORDER BY sandbox_id, first_seq))",
					 -1, &q, NULL) == SQLITE_OK);
		CHECK(sqlite3_step(q) == SQLITE_ROW);
		CHECK_EQ(sqlite3_column_int(q, 0), 3);
		CHECK_EQ(sqlite3_column_int(q, 1), 0);
		CHECK(strcmp((const char *)sqlite3_column_text(q, 2), "1-2@5 3-3@6 1-1@7") == 0);
		sqlite3_finalize(q);
		sqlite3_close(db);
		/* The lines read back as before, in time order, with their class and times. */
		CHECK_RC(s, sl_store_open_readonly(p, &s), 0);
		struct lines ls = {0};
		CHECK_RC(s, sl_store_each_event(s, NULL, collect_line, &ls), 0);
		CHECK_EQ(ls.n, 4);
		CHECK(strcmp(ls.v[2], "{\"seq\":1,\"time\":103,\"class\":\"a\"}") == 0);
		CHECK(strcmp(ls.v[3], "{\"seq\":3,\"time\":104,\"class\":\"a\"}") == 0);
		lines_free(&ls);
		struct sl_store_filter cf = {.class_name = "a", .sandbox_id = SID_A};
		CHECK_EQ(count_events(s, &cf), 2);
		sl_store_close(s);
		free(p);
	}

	/* Someone else's database. */
	p = path_in("foreign.db");
	raw_exec(p, "CREATE TABLE t(x)");
	CHECK_EQ(sl_store_open(p, &s), -EPROTO);
	CHECK(strstr(sl_store_errmsg(NULL), "not a sightline"));
	raw_exec(p, "PRAGMA user_version=1");
	CHECK_EQ(sl_store_open(p, &s), -EPROTO);
	free(p);

	/* Not a database at all. */
	p = path_in("garbage.db");
	char junk[8192];
	memset(junk, 'x', sizeof(junk));
	CHECK(sl_write_file_durable(p, junk, sizeof(junk), 0600) == 0);
	CHECK_EQ(sl_store_open(p, &s), -EBADMSG);
	CHECK(s == NULL);
	free(p);

	/* A directory that does not exist. */
	p = path_in("no/such/dir.db");
	CHECK_EQ(sl_store_open(p, &s), -ENOENT);
	free(p);

	/* Two stores on one file: both see the same data. */
	p = path_in("shared.db");
	struct sl_store *s1 = open_ok(p), *s2 = open_ok(p);
	struct sl_store_binding b = binding(SID_A, "t1", "task1", 1000);
	CHECK_RC(s1, sl_store_bind(s1, &b), 0);
	CHECK_RC(s2, sl_store_bind(s2, &b), 0);
	uint64_t last;
	CHECK_RC(s1, append_range(s1, SID_A, 1, 1, 5, 0, "x", &last, NULL), 0);
	size_t dups;
	CHECK_RC(s2, append_range(s2, SID_A, 1, 1, 7, 0, "x", &last, &dups), 0);
	CHECK_EQ(dups, 5);
	size_t n = 0;
	CHECK_RC(s1, sl_store_each_event(s1, NULL, count_cb, &n), 0);
	CHECK_EQ(n, 7);
	sl_store_close(s1);
	sl_store_close(s2);
	free(p);
	printf("ok: schema version 1 created; newer -> -EPROTO; foreign -> -EPROTO; garbage -> -EBADMSG\n");
}

/* kill -9 of a writer: every acknowledged event is there after reopen. */
static void test_crash(void)
{
	char *p = path_in("crash.db");
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		struct sl_store *s;
		if (sl_store_open(p, &s) != 0)
			_exit(2);
		struct sl_store_binding b = binding(SID_A, "t1", "task1", 1000);
		if (sl_store_bind(s, &b) != 0)
			_exit(3);
		struct batch bt;
		batch_init(&bt, 500, 500);
		for (uint64_t seq = 1;; seq += 500) {
			batch_reset(&bt);
			for (uint64_t q = seq; q < seq + 500; q++)
				batch_add(&bt, SID_A, 1, q, (int64_t)q, "file.open", 500, NULL);
			uint64_t last;
			if (sl_store_append_events(s, SID_A, bt.ev, bt.n, 1, &last, NULL) != 0)
				_exit(4);
			if (sl_write_all(fds[1], &last, sizeof(last)) != 0) /* the acknowledgement */
				_exit(5);
		}
	}
	close(fds[1]);
	uint64_t acked = 0, v;
	while (acked < 100000 && sl_read_full(fds[0], &v, sizeof(v)) == (ssize_t)sizeof(v))
		acked = v;
	CHECK(acked >= 100000);
	CHECK(kill(pid, SIGKILL) == 0);
	while (sl_read_full(fds[0], &v, sizeof(v)) == (ssize_t)sizeof(v))
		acked = v;
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	close(fds[0]);

	struct sl_store *s = open_ok(p);
	uint64_t head;
	CHECK_RC(s, sl_store_last(s, SID_A, &head, NULL), 0);
	CHECK(head >= acked);
	size_t n = 0;
	struct sl_store_filter f = {.sandbox_id = SID_A};
	CHECK_RC(s, sl_store_each_event(s, &f, count_cb, &n), 0);
	CHECK_EQ(n, head);
	/* The chain continues where it stopped. */
	uint64_t last;
	CHECK_RC(s, append_range(s, SID_A, 1, head + 1, head + 3, 0, "file.open", &last, NULL), 0);
	CHECK_EQ(last, head + 3);
	sl_store_close(s);
	free(p);
	printf("ok: kill -9 of the writer after ack %" PRIu64 ": head %" PRIu64
	       ", nothing acknowledged lost\n",
	       acked, head);
}

/* The insert rate: informational. */
static void bench(size_t total, size_t batch, size_t line_size, int sandboxes)
{
	char *p = path_in("bench.db");
	unlink(p);
	struct sl_store *s = open_ok(p);
	char sids[4][33];
	for (int i = 0; i < sandboxes; i++) {
		CHECK(sl_random_id(sids[i]) == 0);
		struct sl_store_binding b = binding(sids[i], "t1", "task1", 1000 + i);
		CHECK_RC(s, sl_store_bind(s, &b), 0);
	}
	static const char *classes[] = {"file.open", "process.exec", "network.connect", "file.open"};
	struct batch bt;
	batch_init(&bt, batch, line_size);
	uint64_t seq[4] = {0};
	double spent = 0;
	size_t done_n = 0, bytes = 0;
	int64_t t = sl_now_realtime_ns();
	for (int k = 0; done_n < total; k = (k + 1) % sandboxes) {
		batch_reset(&bt);
		size_t m = total - done_n < batch ? total - done_n : batch;
		for (size_t i = 0; i < m; i++) {
			seq[k]++;
			batch_add(&bt, sids[k], (unsigned)k, seq[k], t++, classes[seq[k] % 4], line_size,
				  NULL);
		}
		bytes += bt.used;
		double t0 = now_s();
		uint64_t last;
		CHECK_RC(s, sl_store_append_events(s, sids[k], bt.ev, bt.n, t, &last, NULL), 0);
		spent += now_s() - t0;
		CHECK_EQ(last, seq[k]);
		done_n += m;
	}
	/* The checkpointer kept the WAL bounded (without checkpoints it would hold every page). */
	char *wal;
	CHECK(asprintf(&wal, "%s-wal", p) > 0);
	struct stat st;
	CHECK(stat(wal, &st) == 0);
	double wal_mb = (double)st.st_size / 1e6;
	CHECK(st.st_size < (300 << 20));
	free(wal);
	double t0 = now_s();
	sl_store_close(s);
	double close_s = now_s() - t0;
	CHECK(stat(p, &st) == 0);
	printf("bench: %zu events of ~%zu B (%.0f B avg) in batches of %zu from %d sandboxes: %.2f s, "
	       "%.0f events/s, %.1f MB/s; wal %.0f MB; close (final checkpoint) %.2f s; db %.0f MB\n",
	       total, line_size, (double)bytes / (double)total, batch, sandboxes, spent,
	       (double)total / spent, (double)bytes / spent / 1e6, wal_mb, close_s, (double)st.st_size / 1e6);
	batch_free(&bt);
	unlink(p);
	free(p);
}

static int alert_start_cb(void *arg, const struct sl_store_alert *a)
{
	int64_t *out = arg;
	out[0] = a->started_ns;
	out[1] = a->detail && !strcmp(a->detail, "moved") ? 1 : 0;
	return 0;
}

/* Readers open read-only: nothing is created, nothing can be written; an alert's start can be moved. */
static void test_readonly_and_restart(void)
{
	char *missing = path_in("no-such.db");
	struct sl_store *ro = NULL;
	CHECK_EQ(sl_store_open_readonly(missing, &ro), -ENOENT);
	CHECK(ro == NULL);
	CHECK(strstr(sl_store_errmsg(NULL), "no collector store at ") && strstr(sl_store_errmsg(NULL), missing));
	CHECK(access(missing, F_OK) < 0 && errno == ENOENT);
	CHECK_EQ(sl_store_open_readonly(tmpdir, &ro), -EINVAL); /* a directory */
	char *notdb = path_in("notes.txt");
	FILE *f = fopen(notdb, "w");
	CHECK(f && fputs("not a database, but long enough to look like a header of something else\n", f) >= 0);
	fclose(f);
	int r = sl_store_open_readonly(notdb, &ro);
	CHECK(r == -EBADMSG || r == -EPROTO);

	char *p = path_in("ro.db");
	struct sl_store *s = open_ok(p);
	struct sl_store_binding b = binding(SID_A, "t1", "task1", 1000);
	CHECK_RC(s, sl_store_bind(s, &b), 0);
	int64_t id = sl_store_alert_open(s, SID_A, "blind", "warning", 5000, "own");
	CHECK(id > 0);
	CHECK_RC(s, sl_store_alert_restart(s, id, 7000, "moved"), 0);
	CHECK_RC(s, sl_store_alert_restart(s, id + 100, 7000, NULL), -ENOENT);
	CHECK_RC(s, sl_store_alert_restart(s, id, 0, NULL), -EINVAL);
	CHECK_EQ(sl_store_open_readonly(p, &ro), 0);
	int64_t seen[2] = {0, 0};
	struct sl_store_filter af = {.kind = "blind"};
	CHECK_RC(ro, sl_store_each_alert(ro, &af, alert_start_cb, seen), 0);
	CHECK_EQ(seen[0], 7000);
	CHECK_EQ(seen[1], 1);
	CHECK_RC(ro, sl_store_reject(ro, "x"), -EROFS);
	sl_store_close(ro);
	sl_store_close(s);
	free(missing);
	free(notdb);
	free(p);
}

int main(int argc, char **argv)
{
	CHECK(mkdtemp(tmpdir));
	test_open_persist();
	test_bind();
	test_append();
	test_health_alerts();
	test_queries();
	test_full();
	test_schema_version();
	test_crash();
	test_readonly_and_restart();
	size_t total = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
	bench(total, 4096, 500, 4);
	bench(total / 10, 64, 500, 4);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmpdir);
	printf("all store tests passed\n");
	return 0;
}
