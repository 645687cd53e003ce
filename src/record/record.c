/* The record writer: one hash-chained JSON line per event, appended with one write(2), made durable
 * by a group-sync thread (docs/record.md).
 *
 * Locking: r->mu protects every field below it in struct sl_record except the ones set once in
 * sl_record_create. The sync thread calls fdatasync without the lock, so appends never wait for the
 * disk (unless sync_ms is 0). */
#include "record/record.h"

#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/util.h"
#include "record/record_internal.h"

struct sl_record {
	/* Set once at create. */
	int fd;
	int dfd; /* the directory, fsync'ed with the first group sync and at finish */
	bool dir_synced; /* written only by the sync thread after create */
	char *path;
	unsigned sync_ms;
	char *mid; /* ,"sandbox_id":"<id>","time":  */
	size_t mid_len;
	char *tail; /* "observer":"..","identity":{..}  */
	size_t tail_len;
	pthread_t syncer;
	bool syncer_started;
	bool mu_init, cond_init;

	pthread_mutex_t mu;
	pthread_cond_t cond; /* to the sync thread: dirty became true, or stop */
	uint64_t seq;	     /* last seq written */
	off_t good_len;	     /* file length after the last complete line */
	char head[SL_HASH_HEX];
	int sync_err;		/* sticky -errno: a sync failed, so accepted lines may not be on disk */
	bool dirty;		/* a line was written since the last fdatasync began */
	int64_t dirty_since_ns; /* CLOCK_MONOTONIC time of the first such line */
	bool stop;
	EVP_MD *md;
	EVP_MD_CTX *ctx; /* reused for every line */
	char *line;	 /* the line being built, reused (grows to the longest line seen) */
	size_t line_cap;
};

static bool valid_sandbox_id(const char *s)
{
	return s && strlen(s) == SL_RECORD_SID_LEN && sl_record_is_lower_hex(s, SL_RECORD_SID_LEN);
}

static bool valid_class(const char *c, size_t *len)
{
	if (!c)
		return false;
	size_t n = 0;
	while (c[n]) {
		if (n >= SL_RECORD_CLASS_MAX || !sl_record_class_char(c[n]))
			return false;
		n++;
	}
	*len = n;
	return n > 0;
}

/* Decimal without snprintf: this runs for every event. Returns the length (no NUL written). */
static size_t fmt_u64(char out[20], uint64_t v)
{
	char tmp[20];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

static size_t fmt_i64(char out[21], int64_t v)
{
	if (v >= 0)
		return fmt_u64(out, (uint64_t)v);
	out[0] = '-';
	return 1 + fmt_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

static struct timespec ns_to_timespec(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL};
	return ts;
}

/* The group-sync thread. It sleeps until a line is written, lets more lines gather until sync_ms
 * after the first one, then fdatasyncs them all at once. A failure is kept in r->sync_err, which
 * the next append (and finish) returns: a line that may not be on disk is never silently accepted
 * after the fact. On stop it exits without syncing: finish fsyncs. */
static void *syncer_main(void *arg)
{
	struct sl_record *r = arg;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->stop && !r->dirty)
			pthread_cond_wait(&r->cond, &r->mu);
		if (r->stop)
			break;
		struct timespec deadline =
		    ns_to_timespec(r->dirty_since_ns + (int64_t)r->sync_ms * 1000000LL);
		while (!r->stop) {
			/* Nothing signals while dirty except stop, so a return of 0 is spurious. */
			int w = pthread_cond_timedwait(&r->cond, &r->mu, &deadline);
			if (w != 0)
				break; /* ETIMEDOUT (or EINVAL: then sync now rather than spin) */
		}
		if (r->stop)
			break;
		r->dirty = false;
		pthread_mutex_unlock(&r->mu);
		int rc = fdatasync(r->fd) < 0 ? -errno : 0;
		/* The directory entry joins the first group sync (see sl_record_create). */
		if (rc == 0 && !r->dir_synced) {
			rc = fsync(r->dfd) < 0 && errno != EINVAL ? -errno : 0;
			r->dir_synced = rc == 0;
		}
		pthread_mutex_lock(&r->mu);
		if (rc < 0 && r->sync_err == 0)
			r->sync_err = rc;
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

static int line_reserve(struct sl_record *r, size_t need)
{
	if (need <= r->line_cap)
		return 0;
	size_t cap = r->line_cap ? r->line_cap : 1024;
	while (cap < need)
		cap *= 2;
	char *nb = realloc(r->line, cap);
	if (!nb)
		return -ENOMEM;
	r->line = nb;
	r->line_cap = cap;
	return 0;
}

static inline char *put(char *p, const void *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}
#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

/* Undo a write that did not complete: the file goes back to the last complete line. If even that
 * fails, the file may hold a partial line, and the record refuses every further append. */
static void roll_back(struct sl_record *r)
{
	int rc;
	do {
		rc = ftruncate(r->fd, r->good_len);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0 && r->sync_err == 0)
		r->sync_err = -errno;
}

/* Build, hash, write one line. Called with r->mu held. body: raw member text, may be empty. */
static int64_t append_locked(struct sl_record *r, const char *cls, size_t cls_len, int64_t time_ns,
			     const char *body, size_t body_len)
{
	if (r->sync_err)
		return r->sync_err;
	/* Line 1 is the launch manifest; record.end is written only by finish (after which r is gone). */
	bool is_begin =
	    cls_len == sizeof(SL_RECORD_CLASS_BEGIN) - 1 && !memcmp(cls, SL_RECORD_CLASS_BEGIN, cls_len);
	if ((r->seq == 0) != is_begin)
		return -EINVAL;

	char seqs[20], times[21];
	uint64_t seq = r->seq + 1;
	size_t seq_len = fmt_u64(seqs, seq);
	size_t time_len = fmt_i64(times, time_ns);
	size_t prefix_len = sizeof(SL_RECORD_K_SEQ) - 1 + seq_len + r->mid_len + time_len +
			    sizeof(SL_RECORD_K_CLASS) - 1 + cls_len + sizeof(SL_RECORD_K_CLASS_END) - 1 +
			    r->tail_len + (body_len ? 1 + body_len : 0) + SL_RECORD_PREV_MEMBER_LEN;
	size_t len = prefix_len + SL_RECORD_HASH_MEMBER_LEN + 1;
	if (len > SL_RECORD_LINE_MAX)
		return -E2BIG;
	int rc = line_reserve(r, len);
	if (rc < 0)
		return rc;

	char *p = r->line;
	p = PUT_LIT(p, SL_RECORD_K_SEQ);
	p = put(p, seqs, seq_len);
	p = put(p, r->mid, r->mid_len);
	p = put(p, times, time_len);
	p = PUT_LIT(p, SL_RECORD_K_CLASS);
	p = put(p, cls, cls_len);
	p = PUT_LIT(p, SL_RECORD_K_CLASS_END);
	p = put(p, r->tail, r->tail_len);
	if (body_len) {
		*p++ = ',';
		p = put(p, body, body_len);
	}
	p = PUT_LIT(p, SL_RECORD_K_PREV);
	p = put(p, r->head, SL_RECORD_HASH_LEN);
	*p++ = '"';

	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	if (EVP_DigestInit_ex2(r->ctx, r->md, NULL) != 1 ||
	    EVP_DigestUpdate(r->ctx, r->line, prefix_len) != 1 ||
	    EVP_DigestFinal_ex(r->ctx, md, &md_len) != 1 || md_len != SL_RECORD_HASH_LEN / 2)
		return -EIO;
	char hex[SL_HASH_HEX];
	sl_hex(md, md_len, hex);
	p = PUT_LIT(p, SL_RECORD_K_HASH);
	p = put(p, hex, SL_RECORD_HASH_LEN);
	p = PUT_LIT(p, SL_RECORD_K_HASH_END);
	*p++ = '\n';

	/* O_APPEND, and we are the only writer (O_EXCL, under the lock): one write(2) per line; a
	 * short one is continued, and a failed one is rolled back so no partial line stays. */
	rc = sl_write_all(r->fd, r->line, len);
	if (rc < 0) {
		roll_back(r);
		return rc;
	}
	if (r->sync_ms == 0) {
		if (fdatasync(r->fd) < 0) {
			rc = -errno;
			roll_back(r);
			/* The error state of the page cache is consumed by this call: whatever the
			 * kernel failed to write is gone, so the record stays failed. */
			r->sync_err = rc;
			return rc;
		}
	} else if (!r->dirty) {
		r->dirty = true;
		r->dirty_since_ns = sl_now_monotonic_ns();
		pthread_cond_signal(&r->cond);
	}
	r->seq = seq;
	r->good_len += (off_t)len;
	memcpy(r->head, hex, SL_HASH_HEX);
	return (int64_t)seq;
}

/* body must be member text on one line: a newline would end the record line early, a NUL byte is
 * never valid JSON. Both checks are memchr, so cheap enough for every event. */
static int body_text(const struct sl_json *body, const char **text, size_t *len)
{
	*text = NULL;
	*len = 0;
	if (!body)
		return 0;
	if (body->err)
		return body->err;
	if (!body->buf || body->len == 0)
		return 0;
	if (memchr(body->buf, '\n', body->len) || memchr(body->buf, '\0', body->len))
		return -EINVAL;
	*text = body->buf;
	*len = body->len;
	return 0;
}

int64_t sl_record_append(struct sl_record *r, const char *class_name, int64_t time_ns,
			 const struct sl_json *body)
{
	size_t cls_len;
	if (!r || !valid_class(class_name, &cls_len) || !strcmp(class_name, SL_RECORD_CLASS_END))
		return -EINVAL;
	const char *text;
	size_t text_len;
	int rc = body_text(body, &text, &text_len);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&r->mu);
	int64_t seq = append_locked(r, class_name, cls_len, time_ns, text, text_len);
	pthread_mutex_unlock(&r->mu);
	return seq;
}

int sl_record_failed(struct sl_record *r)
{
	pthread_mutex_lock(&r->mu);
	int e = r->sync_err;
	pthread_mutex_unlock(&r->mu);
	return e;
}

uint64_t sl_record_count(struct sl_record *r)
{
	pthread_mutex_lock(&r->mu);
	uint64_t n = r->seq;
	pthread_mutex_unlock(&r->mu);
	return n;
}

void sl_record_head(struct sl_record *r, char out[SL_HASH_HEX])
{
	pthread_mutex_lock(&r->mu);
	memcpy(out, r->head, SL_HASH_HEX);
	pthread_mutex_unlock(&r->mu);
}

const char *sl_record_path(const struct sl_record *r)
{
	return r->path;
}

/* Free everything create set up; the sync thread must already be stopped (or never started). */
static void record_free(struct sl_record *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	if (r->dfd >= 0)
		close(r->dfd);
	if (r->cond_init)
		pthread_cond_destroy(&r->cond);
	if (r->mu_init)
		pthread_mutex_destroy(&r->mu);
	EVP_MD_CTX_free(r->ctx);
	EVP_MD_free(r->md);
	free(r->line);
	free(r->mid);
	free(r->tail);
	free(r->path);
	free(r);
}

/* The per-record constant parts of every line, built (and escaped) once. */
static int build_fixed(struct sl_record *r, const char *sandbox_id, const struct sl_identity *id,
		       const char *observer)
{
	if (asprintf(&r->mid, SL_RECORD_K_SANDBOX "%s" SL_RECORD_K_TIME, sandbox_id) < 0) {
		r->mid = NULL;
		return -ENOMEM;
	}
	r->mid_len = strlen(r->mid);

	struct sl_json j;
	sl_json_init(&j);
	sl_json_str(&j, "observer", observer, 256);
	sl_json_obj_open(&j, "identity");
	sl_json_str(&j, "tenant", id->tenant, 1024);
	sl_json_str(&j, "agent", id->agent, 1024);
	sl_json_str(&j, "task", id->task, 1024);
	sl_json_str(&j, "version", id->version, 1024);
	sl_json_str(&j, "credential_ref", id->credential_ref, 1024);
	sl_json_obj_close(&j);
	int rc = sl_json_error(&j);
	if (rc < 0) {
		sl_json_free(&j);
		return rc;
	}
	r->tail = j.buf; /* ownership moves to r */
	r->tail_len = j.len;
	return 0;
}

static int start_syncer(struct sl_record *r)
{
	pthread_condattr_t ca;
	int rc = pthread_condattr_init(&ca);
	if (rc)
		return -rc;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (rc)
		return -rc;
	r->cond_init = true;
	if (r->sync_ms == 0)
		return 0;
	/* The thread takes no signals: the caller's signal handling stays on its own threads. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&r->syncer, NULL, syncer_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	r->syncer_started = true;
	return 0;
}

int sl_record_create(struct sl_record **out, const char *dir, const char *sandbox_id,
		     const struct sl_identity *id, const char *observer, unsigned sync_ms)
{
	if (!out || !dir || !*dir || !valid_sandbox_id(sandbox_id) || !id || !observer)
		return -EINVAL;
	char name[SL_RECORD_SID_LEN + sizeof(".jsonl")];
	snprintf(name, sizeof(name), "%s.jsonl", sandbox_id);

	int rc = sl_mkdir_p(dir, 0700);
	if (rc < 0)
		return rc;
	struct sl_record *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fd = -1;
	r->sync_ms = sync_ms;
	memcpy(r->head, SL_RECORD_ZERO_HASH, SL_HASH_HEX);
	bool created = false;

	r->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->dfd < 0) {
		rc = -errno;
		goto fail;
	}
	if (asprintf(&r->path, "%s/%s", dir, name) < 0) {
		r->path = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	r->fd = openat(r->dfd, name, O_CREAT | O_EXCL | O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (r->fd < 0) {
		rc = -errno;
		goto fail;
	}
	created = true;
	/* The file's directory entry must survive a crash too, or a durable line has no name. With
	 * group sync it is fsync'ed with the first group (within sync_ms, like every line), not here:
	 * that would add a disk flush to every sandbox's start-up. */
	if (sync_ms == 0 && fsync(r->dfd) < 0 && errno != EINVAL) {
		rc = -errno;
		goto fail;
	}
	r->dir_synced = sync_ms == 0;
	rc = build_fixed(r, sandbox_id, id, observer);
	if (rc < 0)
		goto fail;
	r->md = EVP_MD_fetch(NULL, "SHA256", NULL);
	r->ctx = EVP_MD_CTX_new();
	if (!r->md || !r->ctx) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = -pthread_mutex_init(&r->mu, NULL);
	if (rc < 0)
		goto fail;
	r->mu_init = true;
	rc = start_syncer(r);
	if (rc < 0)
		goto fail;
	*out = r;
	return 0;
fail:
	if (created)
		unlinkat(r->dfd, name, 0);
	record_free(r);
	return rc;
}

static int finish(struct sl_record *r, const struct sl_json *end_body, bool end_line)
{
	if (!r)
		return 0;
	const char *text;
	size_t text_len;
	int rc = body_text(end_body, &text, &text_len);

	pthread_mutex_lock(&r->mu);
	if (rc == 0 && end_line) {
		if (r->seq == 0)
			rc = -EINVAL; /* no record.begin: there is no record to end */
		else {
			int64_t s = append_locked(r, SL_RECORD_CLASS_END, sizeof(SL_RECORD_CLASS_END) - 1,
						  sl_now_realtime_ns(), text, text_len);
			rc = s < 0 ? (int)s : 0;
		}
	}
	r->stop = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->mu);
	if (r->syncer_started)
		pthread_join(r->syncer, NULL);

	/* The sync thread is gone: no lock needed from here on. */
	if (fsync(r->fd) < 0 && rc == 0)
		rc = -errno;
	if (fsync(r->dfd) < 0 && errno != EINVAL && rc == 0)
		rc = -errno;
	if (rc == 0 && r->sync_err)
		rc = r->sync_err; /* an earlier sync failed: lines before this one may be lost */
	record_free(r);
	return rc;
}

int sl_record_finish(struct sl_record *r, const struct sl_json *end_body)
{
	return finish(r, end_body, true);
}

int sl_record_abandon(struct sl_record *r)
{
	return finish(r, NULL, false);
}
