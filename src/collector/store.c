/* The collector's durable store on SQLite. See store.h and docs/collector-schema.md. */
#include "collector/store.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"
/* PRAGMA application_id: "SLCS" (sightline collector store). */
#define APPLICATION_ID 0x534c4353
/* Tuning (measured in tests/unit/test_store.c; see docs/collector-schema.md). */
#define BUSY_TIMEOUT_MS	 5000
#define CACHE_KIB	 32768 /* page cache of the connection */
#define CHECKPOINT_PAGES 1000  /* wake the checkpointer when the WAL holds this many 4 KiB pages */
#define CHECKPOINT_HELP	 16384 /* the writer completes the checkpoint itself past this (64 MiB) */
#define CHECKPOINT_FORCE 65536 /* the writer checkpoints itself (RESTART) past this (256 MiB) */
/* Page size of a new store: 8 KiB pages cost ~8 % less CPU per ~650-byte event than SQLite's
 * default 4 KiB (fewer page splits and WAL frames; 16 KiB was slower). An existing file keeps its
 * page size. The checkpoint thresholds above count 4 KiB pages: the WAL hook scales them. */
#define NEW_PAGE_SIZE 8192
#define WAL_SIZE_LIMIT	 (64 << 20)

static const char schema_sql[] =
    "CREATE TABLE bindings("
    " sandbox_id TEXT PRIMARY KEY NOT NULL,"
    " tenant TEXT, agent TEXT, task TEXT, version TEXT, credential_ref TEXT,"
    " risk_class TEXT, runtime TEXT, runtime_version TEXT, sensor_version TEXT,"
    " control TEXT,"
    " started_ns INTEGER NOT NULL,"
    " ended_ns INTEGER,"
    " key_fingerprint TEXT);"
    "CREATE INDEX bindings_tenant ON bindings(tenant, task);"
    "CREATE INDEX bindings_task ON bindings(task);"
    /* One row per checked EVENTS batch (schema 3): the batch's lines, newline-separated exactly as
     * received, seqs first_seq..last_seq contiguous. Rows of a sandbox never overlap (the append
     * path cuts resends at the stored head). */
    "CREATE TABLE event_batches("
    " sandbox_id TEXT NOT NULL," /* bound: checked by the append path (see the doc) */
    " first_seq INTEGER NOT NULL,"
    " last_seq INTEGER NOT NULL,"
    " first_time_ns INTEGER NOT NULL,"
    " last_time_ns INTEGER NOT NULL,"
    " received_ns INTEGER NOT NULL,"
    " lines BLOB NOT NULL,"
    " PRIMARY KEY(sandbox_id, first_seq));"
    "CREATE TABLE health("
    " sandbox_id TEXT PRIMARY KEY NOT NULL REFERENCES bindings(sandbox_id),"
    " state TEXT NOT NULL CHECK(state IN ('healthy','lagging','blind','ended')),"
    " state_since_ns INTEGER NOT NULL,"
    " last_frame_ns INTEGER,"
    " last_heartbeat_ns INTEGER,"
    " last_seq INTEGER NOT NULL,"
    " last_hash TEXT NOT NULL,"
    " emitted INTEGER NOT NULL DEFAULT 0, recorded INTEGER NOT NULL DEFAULT 0,"
    " exported INTEGER NOT NULL DEFAULT 0, acked INTEGER NOT NULL DEFAULT 0,"
    " dropped INTEGER NOT NULL DEFAULT 0, backlog INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX health_state ON health(state);"
    "CREATE TABLE alerts("
    " id INTEGER PRIMARY KEY,"
    " sandbox_id TEXT REFERENCES bindings(sandbox_id),"
    " kind TEXT NOT NULL,"
    " severity TEXT NOT NULL,"
    " started_ns INTEGER NOT NULL,"
    " ended_ns INTEGER,"
    " detail TEXT);"
    "CREATE INDEX alerts_sandbox ON alerts(sandbox_id, started_ns);"
    "CREATE INDEX alerts_started ON alerts(started_ns);"
    "CREATE UNIQUE INDEX alerts_open ON alerts(sandbox_id, kind) WHERE ended_ns IS NULL;"
    "CREATE TABLE rejects(reason TEXT PRIMARY KEY NOT NULL, count INTEGER NOT NULL);"
    "CREATE TABLE revoked(credential_ref TEXT PRIMARY KEY NOT NULL, revoked_ns INTEGER NOT NULL, reason "
    "TEXT);"
    "CREATE TABLE acceptances("
    " id INTEGER PRIMARY KEY,"
    " contract TEXT NOT NULL, runtime TEXT, runtime_version TEXT, sensor_version TEXT,"
    " passed INTEGER NOT NULL CHECK(passed IN (0, 1)),"
    " at_ns INTEGER NOT NULL,"
    " report TEXT);"
    "CREATE INDEX acceptances_contract ON acceptances(contract, at_ns);";

/* Cached statements, prepared on first use and kept until close. */
enum stmt_id {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_HEAD,
	ST_EV_INSERT,
	ST_EV_LINE,
	ST_HEAD_SET,
	ST_BIND_INSERT,
	ST_BIND_SAME,
	ST_HEALTH_INSERT,
	ST_BOUND,
	ST_END_BIND,
	ST_STATE_SET,
	ST_HEARTBEAT,
	ST_ALERT_FIND,
	ST_ALERT_INSERT,
	ST_ALERT_CLOSE,
	ST_ALERT_EXISTS,
	ST_REJECT,
	ST_REVOKE,
	ST_IS_REVOKED,
	ST_ACCEPT_INSERT,
	ST_COUNT
};

/* The binding's columns in parameter order ?1..?13 (shared by ST_BIND_INSERT and ST_BIND_SAME). */
#define BIND_COLS                                                                                            \
	"sandbox_id, tenant, agent, task, version, credential_ref, risk_class, runtime, runtime_version, "   \
	"sensor_version, control, key_fingerprint, started_ns"

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_HEAD] = "SELECT last_seq, last_hash FROM health WHERE sandbox_id = ?1",
    [ST_EV_INSERT] = "INSERT INTO event_batches(sandbox_id, first_seq, last_seq, first_time_ns, last_time_ns,"
		     " received_ns, lines) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_EV_LINE] = "SELECT first_seq, last_seq, lines FROM event_batches WHERE sandbox_id = ?1 AND first_seq <= ?2"
		   " ORDER BY first_seq DESC LIMIT 1",
    [ST_HEAD_SET] =
	"UPDATE health SET last_seq = ?2, last_hash = ?3, last_frame_ns = ?4 WHERE sandbox_id = ?1",
    [ST_BIND_INSERT] = "INSERT INTO bindings(" BIND_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
		       "?11, ?12, ?13) ON CONFLICT(sandbox_id) DO NOTHING",
    [ST_BIND_SAME] =
	"SELECT tenant IS ?2 AND agent IS ?3 AND task IS ?4 AND version IS ?5 AND credential_ref IS ?6"
	" AND risk_class IS ?7 AND runtime IS ?8 AND runtime_version IS ?9 AND sensor_version IS ?10"
	" AND control IS ?11 AND key_fingerprint IS ?12 AND started_ns IS ?13"
	" FROM bindings WHERE sandbox_id = ?1",
    [ST_HEALTH_INSERT] = "INSERT INTO health(sandbox_id, state, state_since_ns, last_seq, last_hash)"
			 " VALUES(?1, 'healthy', ?2, 0, '" ZERO_HASH "')",
    [ST_BOUND] = "SELECT 1 FROM bindings WHERE sandbox_id = ?1",
    [ST_END_BIND] = "UPDATE bindings SET ended_ns = ?2 WHERE sandbox_id = ?1 AND ended_ns IS NULL",
    [ST_STATE_SET] =
	"UPDATE health SET state = ?2, state_since_ns = ?3 WHERE sandbox_id = ?1 AND state IS NOT ?2",
    [ST_HEARTBEAT] = "UPDATE health SET last_heartbeat_ns = ?2, emitted = ?3, recorded = ?4, exported = ?5,"
		     " acked = ?6, dropped = ?7, backlog = ?8 WHERE sandbox_id = ?1",
    [ST_ALERT_FIND] = "SELECT id FROM alerts WHERE sandbox_id IS ?1 AND kind = ?2 AND ended_ns IS NULL",
    [ST_ALERT_INSERT] =
	"INSERT INTO alerts(sandbox_id, kind, severity, started_ns, detail) VALUES(?1, ?2, ?3, ?4, ?5)",
    [ST_ALERT_CLOSE] = "UPDATE alerts SET ended_ns = ?2 WHERE id = ?1 AND ended_ns IS NULL",
    [ST_ALERT_EXISTS] = "SELECT 1 FROM alerts WHERE id = ?1",
    [ST_REJECT] = "INSERT INTO rejects(reason, count) VALUES(?1, 1)"
		  " ON CONFLICT(reason) DO UPDATE SET count = count + 1",
    [ST_REVOKE] = "INSERT INTO revoked(credential_ref, revoked_ns, reason) VALUES(?1, ?2, ?3)"
		  " ON CONFLICT(credential_ref) DO NOTHING",
    [ST_IS_REVOKED] = "SELECT 1 FROM revoked WHERE credential_ref = ?1",
    [ST_ACCEPT_INSERT] =
	"INSERT INTO acceptances(contract, runtime, runtime_version, sensor_version, passed, at_ns,"
	" report) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
};

struct sl_store {
	sqlite3 *db;
	sqlite3_stmt *st[ST_COUNT];
	int64_t default_max_pages;
	int64_t page_kib; /* page size in KiB */
	char *path;
	/* The background checkpointer (see ckpt_main). */
	pthread_mutex_t ckpt_mu;
	pthread_cond_t ckpt_cv;
	pthread_t ckpt_thread;
	bool ckpt_started, ckpt_failed, ckpt_want, ckpt_stop;
	char err[512];
};

static _Thread_local char open_err[512];

/* ---- errors ---- */

static int map_rc(sqlite3 *db, int rc)
{
	int sys = db ? sqlite3_system_errno(db) : 0;
	switch (rc & 0xff) {
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_CONSTRAINT:
		return rc == SQLITE_CONSTRAINT_FOREIGNKEY ? -ENOENT : -EIO;
	case SQLITE_CANTOPEN:
		return sys > 0 ? -sys : -EIO;
	case SQLITE_IOERR:
		return sys == ENOSPC || sys == EDQUOT ? -sys : -EIO;
	default:
		return -EIO;
	}
}

/* A SQLite failure: keep its message, return the mapped errno. */
static int fail(struct sl_store *s, int rc)
{
	const char *msg = sqlite3_errmsg(s->db);
	if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
		msg = "sandbox is not bound (FOREIGN KEY constraint failed)";
	snprintf(s->err, sizeof(s->err), "%s", msg ? msg : sqlite3_errstr(rc));
	return map_rc(s->db, rc);
}

/* The store's own failure. */
static int failf(struct sl_store *s, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(struct sl_store *s, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return err;
}

const char *sl_store_errmsg(const struct sl_store *s)
{
	return s ? s->err : open_err;
}

/* ---- statements ---- */

static int stmt(struct sl_store *s, enum stmt_id id, sqlite3_stmt **out)
{
	if (!s->st[id]) {
		int rc =
		    sqlite3_prepare_v3(s->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &s->st[id], NULL);
		if (rc != SQLITE_OK) {
			*out = NULL;
			return fail(s, rc);
		}
	}
	*out = s->st[id];
	return 0;
}

/* Reset a cached statement and drop its bindings (they may point into caller memory). */
static void done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

static int bind_str(sqlite3_stmt *st, int i, const char *v)
{
	return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

/* Any bind_* returned non-zero: report the connection's error (set by the failing bind). */
static int bind_failed(struct sl_store *s, sqlite3_stmt *st)
{
	int r = fail(s, sqlite3_errcode(s->db) ? sqlite3_errcode(s->db) : SQLITE_MISUSE);
	done(st);
	return r;
}

/* Step a statement that returns no row to its end. Returns 0 or -errno; resets it either way. */
static int run(struct sl_store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	int r = rc == SQLITE_DONE ? 0 : fail(s, rc);
	done(st);
	return r;
}

/* Step a statement expected to return at most one row with an integer in column 0. Returns 1 with
 * *v set, 0 if no row, or -errno; resets it either way. */
static int run_int(struct sl_store *s, sqlite3_stmt *st, int64_t *v)
{
	int rc = sqlite3_step(st), r;
	if (rc == SQLITE_ROW) {
		if (v)
			*v = sqlite3_column_int64(st, 0);
		r = 1;
	} else {
		r = rc == SQLITE_DONE ? 0 : fail(s, rc);
	}
	done(st);
	return r;
}

static int exec_id(struct sl_store *s, enum stmt_id id)
{
	sqlite3_stmt *st;
	int r = stmt(s, id, &st);
	return r < 0 ? r : run(s, st);
}

static int tx_begin(struct sl_store *s)
{
	return exec_id(s, ST_BEGIN);
}

static void tx_rollback(struct sl_store *s)
{
	/* SQLite may already have rolled back on its own (SQLITE_FULL, SQLITE_IOERR, ...). The error
	 * message of the failure that led here is kept. */
	if (sqlite3_get_autocommit(s->db))
		return;
	char saved[sizeof(s->err)];
	memcpy(saved, s->err, sizeof(saved));
	sqlite3_stmt *st;
	if (stmt(s, ST_ROLLBACK, &st) == 0)
		run(s, st);
	memcpy(s->err, saved, sizeof(saved));
}

static int tx_commit(struct sl_store *s)
{
	int r = exec_id(s, ST_COMMIT);
	if (r < 0)
		tx_rollback(s);
	return r;
}

/* A statement with at most one row: integer pragmas, counts. */
static int query_int(struct sl_store *s, const char *sql, int64_t *v)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(s, rc);
	int r = run_int(s, st, v);
	sqlite3_finalize(st);
	return r;
}

static int exec_sql(struct sl_store *s, const char *sql)
{
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : fail(s, rc);
}

/* ---- open / close ---- */

static int pragma_wal(struct sl_store *s)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(s, rc);
	int r;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *mode = (const char *)sqlite3_column_text(st, 0);
		r = mode && strcmp(mode, "wal") == 0
			? 0
			: failf(s, -EIO, "journal_mode=WAL is not available here (journal mode %s)",
				mode ? mode : "?");
	} else {
		r = fail(s, rc == SQLITE_DONE ? SQLITE_ERROR : rc);
	}
	sqlite3_finalize(st);
	return r;
}

/* Version 1 -> 2: the events table loses its two secondary indexes (each cost 15-25 % of the insert
 * rate, docs/collector-schema.md); nothing else changed. One transaction, so a crash leaves v1 or v2.
 * *ver becomes what the file now is (another opener may have migrated it first). */
static int migrate_v1(struct sl_store *s, int64_t *ver)
{
	int r = tx_begin(s);
	if (r < 0)
		return r;
	if ((r = query_int(s, "PRAGMA user_version", ver)) < 0)
		goto rollback;
	if (*ver == 1) {
		if ((r = exec_sql(s, "DROP INDEX IF EXISTS events_time; DROP INDEX IF EXISTS events_class_time;"
				     " PRAGMA user_version=2;")) < 0)
			goto rollback;
		*ver = 2;
	}
	return tx_commit(s);
rollback:
	tx_rollback(s);
	return r;
}

/* Lines per batch row that migrate_v2 makes out of version 2 events rows (rows received in one
 * batch, received_ns equal, stay together up to this many). */
#define MIGRATE_ROW_LINES 1024

/* Flush the lines gathered by migrate_v2 as one event_batches row. */
static int migrate_flush(struct sl_store *s, sqlite3_stmt *ins, const char *sid, int64_t first, int64_t last,
			 int64_t t0, int64_t t1, int64_t recv, const char *buf, size_t len)
{
	if (sqlite3_bind_text(ins, 1, sid, -1, SQLITE_TRANSIENT) | sqlite3_bind_int64(ins, 2, first) |
	    sqlite3_bind_int64(ins, 3, last) | sqlite3_bind_int64(ins, 4, t0) | sqlite3_bind_int64(ins, 5, t1) |
	    sqlite3_bind_int64(ins, 6, recv) | sqlite3_bind_blob(ins, 7, buf, (int)len, SQLITE_STATIC))
		return bind_failed(s, ins);
	return run(s, ins);
}

/* Version 2 -> 3: the events rows (one per line) become event_batches rows (one per received batch,
 * its lines newline-separated), the events table is dropped. One transaction: a crash leaves v2 or
 * v3, never half of each. *ver becomes what the file now is. */
static int migrate_v2(struct sl_store *s, int64_t *ver)
{
	sqlite3_stmt *sel = NULL, *ins = NULL;
	char *buf = NULL, *sid = NULL;
	size_t len = 0, cap = 0, lines = 0;
	int64_t first = 0, last = 0, t0 = 0, t1 = 0, recv = 0;
	int r = tx_begin(s), rc;
	if (r < 0)
		return r;
	if ((r = query_int(s, "PRAGMA user_version", ver)) < 0)
		goto rollback;
	if (*ver != 2)
		return tx_commit(s);
	if ((r = exec_sql(s, "CREATE TABLE event_batches(sandbox_id TEXT NOT NULL, first_seq INTEGER NOT NULL,"
			     " last_seq INTEGER NOT NULL, first_time_ns INTEGER NOT NULL, last_time_ns INTEGER NOT NULL,"
			     " received_ns INTEGER NOT NULL, lines BLOB NOT NULL, PRIMARY KEY(sandbox_id, first_seq));")) < 0)
		goto rollback;
	if ((rc = sqlite3_prepare_v2(s->db,
				     "SELECT sandbox_id, seq, time_ns, received_ns, line FROM events ORDER BY sandbox_id, seq",
				     -1, &sel, NULL)) != SQLITE_OK ||
	    (rc = sqlite3_prepare_v2(s->db, stmt_sql[ST_EV_INSERT], -1, &ins, NULL)) != SQLITE_OK) {
		r = fail(s, rc);
		goto rollback;
	}
	while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(sel, 0);
		int64_t seq = sqlite3_column_int64(sel, 1), t = sqlite3_column_int64(sel, 2),
			rv = sqlite3_column_int64(sel, 3);
		const char *line = (const char *)sqlite3_column_blob(sel, 4);
		size_t ll = (size_t)sqlite3_column_bytes(sel, 4);
		if (!id || (ll && memchr(line, '\n', ll))) {
			r = failf(s, -EBADMSG, "migration to schema 3: a malformed events row (seq %" PRId64 ")", seq);
			goto rollback;
		}
		bool same = sid && strcmp(sid, id) == 0 && seq == last + 1 && rv == recv && lines < MIGRATE_ROW_LINES;
		if (!same && lines) {
			if ((r = migrate_flush(s, ins, sid, first, last, t0, t1, recv, buf, len)) < 0)
				goto rollback;
			lines = len = 0;
		}
		if (!sid || strcmp(sid, id) != 0) {
			free(sid);
			if (!(sid = strdup(id))) {
				r = failf(s, -ENOMEM, "out of memory");
				goto rollback;
			}
		}
		if (lines == 0) {
			first = seq;
			t0 = t;
			recv = rv;
		}
		if (len + ll + 1 > cap) {
			size_t nc = (len + ll + 1) * 2;
			char *nb = realloc(buf, nc);
			if (!nb) {
				r = failf(s, -ENOMEM, "out of memory");
				goto rollback;
			}
			buf = nb;
			cap = nc;
		}
		if (ll)
			memcpy(buf + len, line, ll);
		buf[len + ll] = '\n';
		len += ll + 1;
		last = seq;
		t1 = t;
		lines++;
	}
	if (rc != SQLITE_DONE) {
		r = fail(s, rc);
		goto rollback;
	}
	if (lines && (r = migrate_flush(s, ins, sid, first, last, t0, t1, recv, buf, len)) < 0)
		goto rollback;
	sqlite3_finalize(sel);
	sqlite3_finalize(ins);
	sel = ins = NULL;
	if ((r = exec_sql(s, "DROP TABLE events; PRAGMA user_version=3;")) < 0)
		goto rollback;
	free(buf);
	free(sid);
	*ver = 3;
	return tx_commit(s);
rollback:
	sqlite3_finalize(sel);
	sqlite3_finalize(ins);
	free(buf);
	free(sid);
	tx_rollback(s);
	return r;
}

/* Create the schema if the file has none; migrate an older one; refuse a newer or foreign one. */
static int ensure_schema(struct sl_store *s)
{
	int64_t ver = 0, app = 0, tables = 0;
	int r = query_int(s, "PRAGMA user_version", &ver);
	if (r < 0)
		return r;
	if (ver == 0) {
		/* Create under the write lock; another opener may have created it meanwhile. */
		r = tx_begin(s);
		if (r < 0)
			return r;
		if ((r = query_int(s, "PRAGMA user_version", &ver)) < 0 ||
		    (r = query_int(s, "SELECT count(*) FROM sqlite_schema", &tables)) < 0)
			goto rollback;
		if (ver == 0 && tables > 0) {
			r = failf(s, -EPROTO,
				  "not a sightline collector store: it has %" PRId64
				  " tables and no schema version",
				  tables);
			goto rollback;
		}
		if (ver == 0) {
			char pragmas[128];
			snprintf(pragmas, sizeof(pragmas),
				 "PRAGMA user_version=%d; PRAGMA application_id=%d;", SL_STORE_SCHEMA_VERSION,
				 APPLICATION_ID);
			if ((r = exec_sql(s, schema_sql)) < 0 || (r = exec_sql(s, pragmas)) < 0)
				goto rollback;
			ver = SL_STORE_SCHEMA_VERSION;
		}
		if ((r = tx_commit(s)) < 0)
			return r;
	}
	if (ver > SL_STORE_SCHEMA_VERSION)
		return failf(s, -EPROTO,
			     "the store's schema version %" PRId64 " is newer than this build's (%d)", ver,
			     SL_STORE_SCHEMA_VERSION);
	/* Someone else's database is never migrated (changed): check whose it is first. */
	if ((r = query_int(s, "PRAGMA application_id", &app)) < 0)
		return r;
	if (ver < 0 || app != APPLICATION_ID)
		return failf(s, -EPROTO,
			     "not a sightline collector store (application_id %" PRId64
			     ", user_version %" PRId64 ")",
			     app, ver);
	/* The writer migrates an older store: 1 -> 2 -> 3. */
	if (ver == 1 && (r = migrate_v1(s, &ver)) < 0)
		return r;
	if (ver == 2 && (r = migrate_v2(s, &ver)) < 0)
		return r;
	return 0;
rollback:
	tx_rollback(s);
	return r;
}

/* ---- checkpoints ----
 *
 * SQLite's automatic checkpoint runs inside the COMMIT that crosses the threshold: it copies the
 * WAL into the database and fsyncs both, and the writer waits for the disk. Here the commit only
 * wakes a checkpointer thread (its own connection, started on first need), which runs PASSIVE
 * checkpoints while the writer goes on appending to the WAL. The WAL starts over only when a
 * write transaction begins with every frame copied; the checkpointer, always a few commits behind,
 * may never see that moment. So past CHECKPOINT_HELP pages the writer runs a PASSIVE checkpoint
 * itself between two transactions (cheap: the checkpointer has copied most of it), and past
 * CHECKPOINT_FORCE pages (a reader pins the WAL) a RESTART; if the thread could not be started,
 * the writer checkpoints itself as SQLite would. A failed checkpoint loses nothing: the pages stay
 * in the WAL and a later checkpoint copies them. */

static void *ckpt_main(void *arg)
{
	struct sl_store *s = arg;
	sqlite3 *db = NULL;
	bool ok =
	    sqlite3_open_v2(s->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK &&
	    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS) == SQLITE_OK &&
	    sqlite3_exec(db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) == SQLITE_OK;
	pthread_mutex_lock(&s->ckpt_mu);
	if (!ok)
		s->ckpt_failed = true; /* the writer checkpoints itself from now on */
	while (ok) {
		while (!s->ckpt_want && !s->ckpt_stop)
			pthread_cond_wait(&s->ckpt_cv, &s->ckpt_mu);
		if (s->ckpt_stop)
			break;
		s->ckpt_want = false;
		pthread_mutex_unlock(&s->ckpt_mu);
		sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		pthread_mutex_lock(&s->ckpt_mu);
	}
	pthread_mutex_unlock(&s->ckpt_mu);
	sqlite3_close(db);
	return NULL;
}

/* sqlite3_wal_hook: after every commit of this connection, with the WAL's size in pages. */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct sl_store *s = arg;
	pages = (int)((int64_t)pages * s->page_kib / 4); /* in 4 KiB pages, as the thresholds */
	if (pages < CHECKPOINT_PAGES)
		return SQLITE_OK;
	bool inline_ckpt = pages >= CHECKPOINT_HELP;
	pthread_mutex_lock(&s->ckpt_mu);
	if (!s->ckpt_started && !s->ckpt_failed) {
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes no signals */
		if (pthread_create(&s->ckpt_thread, NULL, ckpt_main, s) == 0)
			s->ckpt_started = true;
		else
			s->ckpt_failed = true;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (s->ckpt_failed) {
		inline_ckpt = true;
	} else if (!inline_ckpt) {
		/* Past CHECKPOINT_HELP the thread is left alone, so that it finishes its pass and
		 * lets go of the checkpoint lock for the writer's own checkpoint. */
		s->ckpt_want = true;
		pthread_cond_signal(&s->ckpt_cv);
	}
	pthread_mutex_unlock(&s->ckpt_mu);
	if (inline_ckpt) /* the commit happened; a failed checkpoint is retried on a later commit */
		sqlite3_wal_checkpoint_v2(db, name,
					  pages >= CHECKPOINT_FORCE ? SQLITE_CHECKPOINT_RESTART
								    : SQLITE_CHECKPOINT_PASSIVE,
					  NULL, NULL);
	return SQLITE_OK;
}

static void ckpt_stop(struct sl_store *s)
{
	pthread_mutex_lock(&s->ckpt_mu);
	bool started = s->ckpt_started;
	s->ckpt_stop = true;
	pthread_cond_signal(&s->ckpt_cv);
	pthread_mutex_unlock(&s->ckpt_mu);
	if (started)
		pthread_join(s->ckpt_thread, NULL);
	s->ckpt_started = false;
}

/* Process-wide, once, before SQLite initializes: no memory statistics. With them (the default of
 * most builds) every SQLite malloc takes a global mutex; turning them off is worth ~10-15% of the
 * insert rate. It fails harmlessly if SQLite was already initialized by someone else. */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static void sqlite_setup(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* The steps both opens share. store_path_ok: a plain file system path (no ":memory:", no URI).
 * store_connect: a new handle on path with SQLite's flags, extended result codes and the busy
 * timeout; on failure *out is a handle to give to open_failed (or NULL: out of memory). */
static int store_path_ok(const char *path)
{
	if (!path || !*path || path[0] == ':' || strncmp(path, "file:", 5) == 0) {
		snprintf(open_err, sizeof(open_err), "the store needs a file system path (not %s)",
			 path ? path : "NULL");
		return -EINVAL;
	}
	return 0;
}

static int store_connect(const char *path, int flags, struct sl_store **out)
{
	struct sl_store *s = calloc(1, sizeof(*s));
	*out = s;
	if (!s || !(s->path = strdup(path))) {
		free(s);
		*out = NULL;
		snprintf(open_err, sizeof(open_err), "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&s->ckpt_mu, NULL);
	pthread_cond_init(&s->ckpt_cv, NULL);
	int rc = sqlite3_open_v2(path, &s->db, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, NULL);
	if (rc != SQLITE_OK)
		return s->db ? fail(s, rc) : failf(s, -ENOMEM, "out of memory");
	sqlite3_extended_result_codes(s->db, 1);
	if ((rc = sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS)) != SQLITE_OK)
		return fail(s, rc);
	return 0;
}

/* A failed open: the reason, prefixed with the path, for sl_store_open_error; the handle closed. */
static int open_failed(const char *path, struct sl_store *s, int r)
{
	if (snprintf(open_err, sizeof(open_err), "%s: %s", path, s->err) >= (int)sizeof(open_err))
		memcpy(open_err + sizeof(open_err) - 4, "...", 4); /* cut */
	sl_store_close(s);
	return r;
}

int sl_store_open(const char *path, struct sl_store **out)
{
	*out = NULL;
	pthread_once(&sqlite_once, sqlite_setup);
	open_err[0] = '\0';
	int r = store_path_ok(path);
	if (r < 0)
		return r;
	/* The store holds evidence and key fingerprints: create it 0600 (the -wal and -shm files take the
	 * database file's mode). */
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		close(fd);
	else if (errno != EEXIST) {
		int e = errno;
		snprintf(open_err, sizeof(open_err), "cannot create %s: %s", path, strerror(e));
		return -e;
	}

	struct sl_store *s;
	if ((r = store_connect(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &s)) < 0) {
		if (!s)
			return r;
		goto fail;
	}
	char tune[256];
	snprintf(tune, sizeof(tune),
		 "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-%d;"
		 " PRAGMA journal_size_limit=%d;",
		 CACHE_KIB, WAL_SIZE_LIMIT);
	/* page_size first: it only takes effect on a file that is still empty (before WAL mode). */
	char psz[64];
	snprintf(psz, sizeof(psz), "PRAGMA page_size=%d", NEW_PAGE_SIZE);
	int64_t page = 0;
	if ((r = exec_sql(s, psz)) < 0 || (r = pragma_wal(s)) < 0 || (r = exec_sql(s, tune)) < 0 ||
	    (r = ensure_schema(s)) < 0 || (r = query_int(s, "PRAGMA max_page_count", &s->default_max_pages)) < 0 ||
	    (r = query_int(s, "PRAGMA page_size", &page)) < 0)
		goto fail;
	s->page_kib = page >= 1024 ? page / 1024 : 4;
	sqlite3_wal_hook(s->db, wal_hook, s); /* replaces wal_autocheckpoint */
	s->err[0] = '\0';
	*out = s;
	return 0;
fail:
	return open_failed(path, s, r);
}

void sl_store_close(struct sl_store *s)
{
	if (!s)
		return;
	ckpt_stop(s);
	for (size_t i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_close(s->db); /* the last connection checkpoints and removes the WAL */
	pthread_cond_destroy(&s->ckpt_cv);
	pthread_mutex_destroy(&s->ckpt_mu);
	free(s->path);
	free(s);
}

int sl_store_set_max_size(struct sl_store *s, uint64_t max_bytes)
{
	int64_t page = 0, pages, got = 0;
	int r = query_int(s, "PRAGMA page_size", &page);
	if (r < 0)
		return r;
	if (page <= 0)
		return failf(s, -EIO, "no page size");
	pages = max_bytes ? (int64_t)(max_bytes / (uint64_t)page) : s->default_max_pages;
	if (pages < 1)
		pages = 1;
	if (pages > s->default_max_pages)
		pages = s->default_max_pages;
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA max_page_count=%" PRId64, pages);
	r = query_int(s, sql, &got);
	return r < 0 ? r : 0;
}

/* ---- bindings ---- */

static int bind_binding(sqlite3_stmt *st, const struct sl_store_binding *b)
{
	return bind_str(st, 1, b->sandbox_id) | bind_str(st, 2, b->tenant) | bind_str(st, 3, b->agent) |
	       bind_str(st, 4, b->task) | bind_str(st, 5, b->version) | bind_str(st, 6, b->credential_ref) |
	       bind_str(st, 7, b->risk_class) | bind_str(st, 8, b->runtime) |
	       bind_str(st, 9, b->runtime_version) | bind_str(st, 10, b->sensor_version) |
	       bind_str(st, 11, b->control) | bind_str(st, 12, b->key_fingerprint) |
	       sqlite3_bind_int64(st, 13, b->started_ns);
}

int sl_store_bind(struct sl_store *s, const struct sl_store_binding *b)
{
	if (!b || !b->sandbox_id || !*b->sandbox_id || b->started_ns <= 0)
		return failf(s, -EINVAL, "a binding needs a sandbox_id and started_ns > 0");
	sqlite3_stmt *ins, *same, *health;
	int r;
	if ((r = stmt(s, ST_BIND_INSERT, &ins)) < 0 || (r = stmt(s, ST_BIND_SAME, &same)) < 0 ||
	    (r = stmt(s, ST_HEALTH_INSERT, &health)) < 0 || (r = tx_begin(s)) < 0)
		return r;
	if (bind_binding(ins, b)) {
		r = bind_failed(s, ins);
		goto rollback;
	}
	if ((r = run(s, ins)) < 0)
		goto rollback;
	if (sqlite3_changes(s->db) == 1) {
		if (bind_str(health, 1, b->sandbox_id) | sqlite3_bind_int64(health, 2, b->started_ns)) {
			r = bind_failed(s, health);
			goto rollback;
		}
		if ((r = run(s, health)) < 0)
			goto rollback;
		return tx_commit(s);
	}
	/* Already bound: identical is fine, anything else is a conflict. */
	if (bind_binding(same, b)) {
		r = bind_failed(s, same);
		goto rollback;
	}
	int64_t eq = 0;
	if ((r = run_int(s, same, &eq)) < 0)
		goto rollback;
	tx_rollback(s);
	if (r == 1 && eq == 1)
		return 0;
	return failf(s, -EEXIST, "sandbox %s is already bound to a different identity", b->sandbox_id);
rollback:
	tx_rollback(s);
	return r;
}

static int is_bound(struct sl_store *s, const char *sandbox_id)
{
	sqlite3_stmt *st;
	int r = stmt(s, ST_BOUND, &st);
	if (r < 0)
		return r;
	if (bind_str(st, 1, sandbox_id))
		return bind_failed(s, st);
	return run_int(s, st, NULL);
}

int sl_store_end(struct sl_store *s, const char *sandbox_id, int64_t ended_ns)
{
	if (!sandbox_id || ended_ns <= 0)
		return failf(s, -EINVAL, "sl_store_end needs a sandbox_id and ended_ns > 0");
	sqlite3_stmt *end, *state;
	int r;
	if ((r = stmt(s, ST_END_BIND, &end)) < 0 || (r = stmt(s, ST_STATE_SET, &state)) < 0 ||
	    (r = tx_begin(s)) < 0)
		return r;
	if ((r = is_bound(s, sandbox_id)) <= 0) {
		if (r == 0)
			r = failf(s, -ENOENT, "sandbox %s is not bound", sandbox_id);
		goto rollback;
	}
	if (bind_str(end, 1, sandbox_id) | sqlite3_bind_int64(end, 2, ended_ns)) {
		r = bind_failed(s, end);
		goto rollback;
	}
	if ((r = run(s, end)) < 0)
		goto rollback;
	if (bind_str(state, 1, sandbox_id) | bind_str(state, 2, "ended") |
	    sqlite3_bind_int64(state, 3, ended_ns)) {
		r = bind_failed(s, state);
		goto rollback;
	}
	if ((r = run(s, state)) < 0)
		goto rollback;
	return tx_commit(s);
rollback:
	tx_rollback(s);
	return r;
}

/* ---- events ---- */

/* The head of a sandbox, inside or outside a transaction. Returns 1 (found), 0 (no health row) or
 * -errno. hash gets 64 characters + NUL. */
static int read_head(struct sl_store *s, const char *sandbox_id, uint64_t *seq,
		     char hash[SL_STORE_HASH_LEN + 1])
{
	sqlite3_stmt *st;
	int r = stmt(s, ST_HEAD, &st);
	if (r < 0)
		return r;
	if (bind_str(st, 1, sandbox_id))
		return bind_failed(s, st);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *h = (const char *)sqlite3_column_text(st, 1);
		int64_t v = sqlite3_column_int64(st, 0);
		if (!h || sqlite3_column_bytes(st, 1) != SL_STORE_HASH_LEN || v < 0) {
			r = failf(s, -EBADMSG, "sandbox %s: the stored head is malformed", sandbox_id);
		} else {
			*seq = (uint64_t)v;
			memcpy(hash, h, SL_STORE_HASH_LEN + 1);
			r = 1;
		}
	} else {
		*seq = 0;
		memcpy(hash, ZERO_HASH, SL_STORE_HASH_LEN + 1);
		r = rc == SQLITE_DONE ? 0 : fail(s, rc);
	}
	done(st);
	return r;
}

int sl_store_last(struct sl_store *s, const char *sandbox_id, uint64_t *seq, char hash[SL_STORE_HASH_LEN + 1])
{
	uint64_t v = 0;
	char h[SL_STORE_HASH_LEN + 1];
	if (!sandbox_id)
		return failf(s, -EINVAL, "no sandbox_id");
	int r = read_head(s, sandbox_id, &v, h);
	if (r < 0)
		return r;
	if (seq)
		*seq = v;
	if (hash)
		memcpy(hash, h, sizeof(h));
	return 0;
}

static size_t line_len(const struct sl_store_event *e)
{
	size_t n = e->line_len;
	return n > 0 && e->line[n - 1] == '\n' ? n - 1 : n;
}

/* The stored batch row that holds the resent seqs being compared (one fetch serves a run of
 * resends), and where the last looked-up line starts in it. */
struct resend_row {
	uint64_t first, last; /* 0, 0: nothing fetched */
	char *lines;
	size_t len;
	uint64_t at_seq; /* the line at offset at_off */
	size_t at_off;
};

/* Line seq of a fetched row: *p, *n (without its '\n'). 0, or -EBADMSG if the row is malformed. */
static int row_line(struct resend_row *rr, uint64_t seq, const char **p, size_t *n)
{
	if (seq < rr->at_seq) {
		rr->at_seq = rr->first;
		rr->at_off = 0;
	}
	while (rr->at_seq < seq) {
		const char *nl = memchr(rr->lines + rr->at_off, '\n', rr->len - rr->at_off);
		if (!nl)
			return -EBADMSG;
		rr->at_off = (size_t)(nl - rr->lines) + 1;
		rr->at_seq++;
	}
	const char *l = rr->lines + rr->at_off;
	const char *nl = memchr(l, '\n', rr->len - rr->at_off);
	if (!nl)
		return -EBADMSG;
	*p = l;
	*n = (size_t)(nl - l);
	return 0;
}

/* A resend of a stored seq must be the stored line, byte for byte. Returns 0, -EPROTO or -errno. */
static int check_resend(struct sl_store *s, const char *sandbox_id, const struct sl_store_event *e,
			struct resend_row *rr)
{
	int r;
	if (rr->last == 0 || e->seq < rr->first || e->seq > rr->last) {
		sqlite3_stmt *st;
		if ((r = stmt(s, ST_EV_LINE, &st)) < 0)
			return r;
		if (bind_str(st, 1, sandbox_id) | sqlite3_bind_int64(st, 2, (int64_t)e->seq))
			return bind_failed(s, st);
		int rc = sqlite3_step(st);
		r = 0;
		if (rc == SQLITE_ROW) {
			int64_t f = sqlite3_column_int64(st, 0), l = sqlite3_column_int64(st, 1);
			const void *b = sqlite3_column_blob(st, 2);
			size_t n = (size_t)sqlite3_column_bytes(st, 2);
			free(rr->lines);
			*rr = (struct resend_row){0};
			if (f >= 1 && l >= f && (uint64_t)l >= e->seq && n > 0) {
				if (!(rr->lines = malloc(n)))
					r = failf(s, -ENOMEM, "out of memory");
				else {
					memcpy(rr->lines, b, n);
					*rr = (struct resend_row){(uint64_t)f, (uint64_t)l, rr->lines, n, (uint64_t)f, 0};
				}
			}
		} else if (rc != SQLITE_DONE) {
			r = fail(s, rc);
		}
		done(st);
		if (r < 0)
			return r;
		if (rr->last == 0)
			return failf(s, -EBADMSG, "sandbox %s: seq %" PRIu64 " is below the stored head but not stored",
				     sandbox_id, e->seq);
	}
	const char *stored;
	size_t n;
	if (row_line(rr, e->seq, &stored, &n) < 0)
		return failf(s, -EBADMSG, "sandbox %s: the stored batch %" PRIu64 "..%" PRIu64 " is malformed",
			     sandbox_id, rr->first, rr->last);
	size_t len = line_len(e);
	return n == len && (len == 0 || memcmp(stored, e->line, len) == 0)
		   ? 0
		   : failf(s, -EPROTO, "sandbox %s: seq %" PRIu64 " resent with different content", sandbox_id,
			   e->seq);
}

int sl_store_append_events(struct sl_store *s, const char *sandbox_id, const struct sl_store_event *ev,
			   size_t n, int64_t received_ns, uint64_t *last_seq, size_t *dups)
{
	uint64_t head = 0, last;
	char head_hash[SL_STORE_HASH_LEN + 1];
	size_t ndup = 0;
	struct resend_row rr = {0};
	char *blob = NULL;
	int r;

	if (dups)
		*dups = 0;
	if (last_seq)
		*last_seq = 0;
	if (!sandbox_id || (n > 0 && !ev))
		return failf(s, -EINVAL, "no sandbox_id or no events");
	for (size_t i = 0; i < n; i++) {
		const struct sl_store_event *e = &ev[i];
		if (!e->class_name || !e->prev_hash || !e->hash || !e->line || e->seq == 0 ||
		    e->seq > (uint64_t)INT64_MAX || e->line_len > INT_MAX || e->class_len > INT_MAX ||
		    memchr(e->line, '\n', line_len(e))) {
			/* A '\n' inside a line would split it in the stored batch. */
			r = failf(s, -EINVAL, "sandbox %s: event %zu of the batch is malformed", sandbox_id,
				  i);
			if (last_seq && read_head(s, sandbox_id, &head, head_hash) >= 0)
				*last_seq = head;
			return r;
		}
	}

	sqlite3_stmt *ins, *set;
	if ((r = stmt(s, ST_EV_INSERT, &ins)) < 0 || (r = stmt(s, ST_HEAD_SET, &set)) < 0 ||
	    (r = tx_begin(s)) < 0)
		goto out_head;
	if ((r = read_head(s, sandbox_id, &head, head_hash)) <= 0) {
		if (r == 0)
			r = failf(s, -ENOENT, "sandbox %s is not bound", sandbox_id);
		goto rollback;
	}
	last = head;
	const char *last_hash = head_hash;
	int proto = 0;
	/* The new lines are ev[run0..run1] (contiguous seqs head+1..last): resends are cut off at the
	 * stored head before the insert, so batch rows never overlap. */
	size_t run0 = SIZE_MAX, run1 = 0, blen = 0;
	for (size_t i = 0; i < n; i++) {
		const struct sl_store_event *e = &ev[i];
		if (e->seq <= last) {
			if (e->seq > head) {
				/* A repeat of a line of this very batch: compare with it. */
				const struct sl_store_event *o = e;
				for (size_t j = i; j-- > run0;)
					if (ev[j].seq == e->seq) {
						o = &ev[j];
						break;
					}
				if (o == e || line_len(o) != line_len(e) || memcmp(o->line, e->line, line_len(e)) != 0) {
					proto = failf(s, -EPROTO,
						      "sandbox %s: seq %" PRIu64 " resent with different content",
						      sandbox_id, e->seq);
					break;
				}
			} else if ((r = check_resend(s, sandbox_id, e, &rr)) < 0) {
				if (r != -EPROTO)
					goto rollback;
				proto = r;
				break;
			}
			ndup++;
			continue;
		}
		if (e->seq != last + 1) {
			proto = failf(s, -EPROTO, "sandbox %s: seq %" PRIu64 " after %" PRIu64 ": a hole",
				      sandbox_id, e->seq, last);
			break;
		}
		if (memcmp(e->prev_hash, last_hash, SL_STORE_HASH_LEN) != 0) {
			proto = failf(s, -EPROTO,
				      "sandbox %s: seq %" PRIu64
				      ": prev_hash does not match the hash of seq %" PRIu64,
				      sandbox_id, e->seq, last);
			break;
		}
		if (run0 == SIZE_MAX)
			run0 = i;
		run1 = i;
		blen += line_len(e) + 1;
		last = e->seq;
		last_hash = e->hash;
	}
	if (run0 != SIZE_MAX) {
		if (blen > INT_MAX) {
			r = failf(s, -EINVAL, "sandbox %s: the batch is too large (%zu bytes)", sandbox_id, blen);
			goto rollback;
		}
		if (!(blob = malloc(blen))) {
			r = failf(s, -ENOMEM, "out of memory");
			goto rollback;
		}
		char *w = blob;
		size_t k = 0;
		int64_t last_time = ev[run0].time_ns;
		for (size_t i = run0; i <= run1; i++) {
			const struct sl_store_event *e = &ev[i];
			if (e->seq <= head + k)
				continue; /* a resend inside the run (compared above) */
			size_t l = line_len(e);
			memcpy(w, e->line, l);
			w[l] = '\n';
			w += l + 1;
			last_time = e->time_ns;
			k++;
		}
		if (bind_str(ins, 1, sandbox_id) | sqlite3_bind_int64(ins, 2, (int64_t)head + 1) |
		    sqlite3_bind_int64(ins, 3, (int64_t)last) | sqlite3_bind_int64(ins, 4, ev[run0].time_ns) |
		    sqlite3_bind_int64(ins, 5, last_time) | sqlite3_bind_int64(ins, 6, received_ns) |
		    sqlite3_bind_blob(ins, 7, blob, (int)(w - blob), SQLITE_STATIC)) {
			r = bind_failed(s, ins);
			goto rollback;
		}
		int rc = sqlite3_step(ins);
		done(ins);
		if (rc != SQLITE_DONE) {
			r = fail(s, rc);
			goto rollback;
		}
	}
	if (last != head) {
		if (bind_str(set, 1, sandbox_id) | sqlite3_bind_int64(set, 2, (int64_t)last) |
		    sqlite3_bind_text(set, 3, last_hash, SL_STORE_HASH_LEN, SQLITE_STATIC) |
		    sqlite3_bind_int64(set, 4, received_ns)) {
			r = bind_failed(s, set);
			goto rollback;
		}
		if ((r = run(s, set)) < 0)
			goto rollback;
	}
	if ((r = tx_commit(s)) < 0)
		goto out_head;
	free(blob);
	free(rr.lines);
	if (last_seq)
		*last_seq = last;
	if (dups)
		*dups = ndup;
	return proto;
rollback:
	tx_rollback(s);
out_head:
	free(blob);
	free(rr.lines);
	/* Nothing of the batch is stored: report the head as it is (best effort). */
	if (last_seq) {
		char saved[sizeof(s->err)];
		memcpy(saved, s->err, sizeof(saved));
		if (read_head(s, sandbox_id, &head, head_hash) >= 0)
			*last_seq = head;
		memcpy(s->err, saved, sizeof(saved));
	}
	return r;
}

/* ---- health, alerts, counters ---- */

static int64_t clamp_u64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

int sl_store_heartbeat(struct sl_store *s, const char *sandbox_id, const struct sl_store_counters *c,
		       int64_t now_ns)
{
	if (!sandbox_id || !c)
		return failf(s, -EINVAL, "no sandbox_id or no counters");
	sqlite3_stmt *st;
	int r = stmt(s, ST_HEARTBEAT, &st);
	if (r < 0)
		return r;
	if (bind_str(st, 1, sandbox_id) | sqlite3_bind_int64(st, 2, now_ns) |
	    sqlite3_bind_int64(st, 3, clamp_u64(c->emitted)) |
	    sqlite3_bind_int64(st, 4, clamp_u64(c->recorded)) |
	    sqlite3_bind_int64(st, 5, clamp_u64(c->exported)) |
	    sqlite3_bind_int64(st, 6, clamp_u64(c->acked)) |
	    sqlite3_bind_int64(st, 7, clamp_u64(c->dropped)) |
	    sqlite3_bind_int64(st, 8, clamp_u64(c->backlog)))
		return bind_failed(s, st);
	if ((r = run(s, st)) < 0)
		return r;
	return sqlite3_changes(s->db) == 1 ? 0 : failf(s, -ENOENT, "sandbox %s is not bound", sandbox_id);
}

static bool valid_state(const char *state)
{
	static const char *const states[] = {"healthy", "lagging", "blind", "ended"};
	for (size_t i = 0; state && i < SL_ARRAY_LEN(states); i++)
		if (strcmp(state, states[i]) == 0)
			return true;
	return false;
}

int sl_store_set_state(struct sl_store *s, const char *sandbox_id, const char *state, int64_t now_ns)
{
	if (!sandbox_id || !valid_state(state))
		return failf(s, -EINVAL, "bad state %s or no sandbox_id", state ? state : "(null)");
	sqlite3_stmt *st;
	int r = stmt(s, ST_STATE_SET, &st);
	if (r < 0)
		return r;
	if (bind_str(st, 1, sandbox_id) | bind_str(st, 2, state) | sqlite3_bind_int64(st, 3, now_ns))
		return bind_failed(s, st);
	if ((r = run(s, st)) < 0)
		return r;
	if (sqlite3_changes(s->db) == 1)
		return 1;
	uint64_t seq;
	char h[SL_STORE_HASH_LEN + 1];
	r = read_head(s, sandbox_id, &seq, h);
	if (r < 0)
		return r;
	return r == 1 ? 0 : failf(s, -ENOENT, "sandbox %s is not bound", sandbox_id);
}

int64_t sl_store_alert_open(struct sl_store *s, const char *sandbox_id, const char *kind,
			    const char *severity, int64_t start_ns, const char *detail)
{
	if (!kind || !severity)
		return failf(s, -EINVAL, "an alert needs a kind and a severity");
	sqlite3_stmt *find, *ins;
	int r;
	int64_t id = 0;
	if ((r = stmt(s, ST_ALERT_FIND, &find)) < 0 || (r = stmt(s, ST_ALERT_INSERT, &ins)) < 0 ||
	    (r = tx_begin(s)) < 0)
		return r;
	if (bind_str(find, 1, sandbox_id) | bind_str(find, 2, kind)) {
		r = bind_failed(s, find);
		goto rollback;
	}
	if ((r = run_int(s, find, &id)) < 0)
		goto rollback;
	if (r == 1) {
		tx_rollback(s);
		return id;
	}
	if (bind_str(ins, 1, sandbox_id) | bind_str(ins, 2, kind) | bind_str(ins, 3, severity) |
	    sqlite3_bind_int64(ins, 4, start_ns) | bind_str(ins, 5, detail)) {
		r = bind_failed(s, ins);
		goto rollback;
	}
	if ((r = run(s, ins)) < 0)
		goto rollback;
	id = sqlite3_last_insert_rowid(s->db);
	if ((r = tx_commit(s)) < 0)
		return r;
	return id;
rollback:
	tx_rollback(s);
	return r;
}

int sl_store_alert_close(struct sl_store *s, int64_t id, int64_t end_ns)
{
	if (end_ns <= 0)
		return failf(s, -EINVAL, "end_ns must be > 0");
	sqlite3_stmt *close_st, *exists;
	int r;
	if ((r = stmt(s, ST_ALERT_CLOSE, &close_st)) < 0 || (r = stmt(s, ST_ALERT_EXISTS, &exists)) < 0)
		return r;
	if (sqlite3_bind_int64(close_st, 1, id) | sqlite3_bind_int64(close_st, 2, end_ns))
		return bind_failed(s, close_st);
	if ((r = run(s, close_st)) < 0)
		return r;
	if (sqlite3_changes(s->db) == 1)
		return 0;
	if (sqlite3_bind_int64(exists, 1, id))
		return bind_failed(s, exists);
	r = run_int(s, exists, NULL);
	if (r < 0)
		return r;
	return r == 1 ? 0 : failf(s, -ENOENT, "no alert %" PRId64, id);
}

int sl_store_reject(struct sl_store *s, const char *reason)
{
	if (!reason)
		return failf(s, -EINVAL, "no reason");
	sqlite3_stmt *st;
	int r = stmt(s, ST_REJECT, &st);
	if (r < 0)
		return r;
	if (bind_str(st, 1, reason))
		return bind_failed(s, st);
	return run(s, st);
}

int sl_store_revoke(struct sl_store *s, const char *credential_ref, int64_t revoked_ns, const char *reason)
{
	if (!credential_ref)
		return failf(s, -EINVAL, "no credential_ref");
	sqlite3_stmt *st;
	int r = stmt(s, ST_REVOKE, &st);
	if (r < 0)
		return r;
	if (bind_str(st, 1, credential_ref) | sqlite3_bind_int64(st, 2, revoked_ns) | bind_str(st, 3, reason))
		return bind_failed(s, st);
	if ((r = run(s, st)) < 0)
		return r;
	return sqlite3_changes(s->db) == 1 ? 0 : 1;
}

int sl_store_is_revoked(struct sl_store *s, const char *credential_ref)
{
	if (!credential_ref)
		return failf(s, -EINVAL, "no credential_ref");
	sqlite3_stmt *st;
	int r = stmt(s, ST_IS_REVOKED, &st);
	if (r < 0)
		return r;
	if (bind_str(st, 1, credential_ref))
		return bind_failed(s, st);
	return run_int(s, st, NULL);
}

int64_t sl_store_acceptance_add(struct sl_store *s, const struct sl_store_acceptance *a)
{
	if (!a || !a->contract)
		return failf(s, -EINVAL, "an acceptance needs a contract");
	sqlite3_stmt *st;
	int r = stmt(s, ST_ACCEPT_INSERT, &st);
	if (r < 0)
		return r;
	if (bind_str(st, 1, a->contract) | bind_str(st, 2, a->runtime) | bind_str(st, 3, a->runtime_version) |
	    bind_str(st, 4, a->sensor_version) | sqlite3_bind_int(st, 5, a->passed ? 1 : 0) |
	    sqlite3_bind_int64(st, 6, a->at_ns) | bind_str(st, 7, a->report))
		return bind_failed(s, st);
	if ((r = run(s, st)) < 0)
		return r;
	return sqlite3_last_insert_rowid(s->db);
}

/* ---- queries ---- */

/* A query built from the filter: SQL text with named parameters for the filters in use. */
struct query {
	char sql[1024];
	size_t len;
	bool overflow;
};

static void q_add(struct query *q, const char *text)
{
	size_t n = strlen(text);
	if (q->len + n >= sizeof(q->sql)) {
		q->overflow = true;
		return;
	}
	memcpy(q->sql + q->len, text, n + 1);
	q->len += n;
}

/* Prepare q and bind the filter's values to the parameters it uses. */
static int q_prepare(struct sl_store *s, struct query *q, const struct sl_store_filter *f, sqlite3_stmt **out)
{
	*out = NULL;
	if (q->overflow)
		return failf(s, -EINVAL, "query too long");
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, q->sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(s, rc);
	static const struct sl_store_filter none;
	if (!f)
		f = &none;
	struct {
		const char *name, *text;
		int64_t num;
	} p[] = {
	    {":tenant", f->tenant, 0},
	    {":task", f->task, 0},
	    {":sandbox", f->sandbox_id, 0},
	    {":class", f->class_name, 0},
	    {":kind", f->kind, 0},
	    {":state", f->state, 0},
	    {":since", NULL, f->since_ns},
	    {":limit", NULL, f->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)f->limit},
	};
	for (size_t i = 0; i < SL_ARRAY_LEN(p); i++) {
		int idx = sqlite3_bind_parameter_index(st, p[i].name);
		if (idx == 0)
			continue;
		rc = p[i].text ? sqlite3_bind_text(st, idx, p[i].text, -1, SQLITE_STATIC)
			       : sqlite3_bind_int64(st, idx, p[i].num);
		if (rc != SQLITE_OK) {
			int r = fail(s, rc);
			sqlite3_finalize(st);
			return r;
		}
	}
	*out = st;
	return 0;
}

/* Step st, calling row(st) per row; finalize. */
static int q_each(struct sl_store *s, sqlite3_stmt *st, int (*row)(sqlite3_stmt *st, void *ctx), void *ctx)
{
	int rc, r = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((r = row(st, ctx)) != 0)
			break;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = fail(s, rc);
	sqlite3_finalize(st);
	return r;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL ? NULL : (const char *)sqlite3_column_text(st, i);
}

static void q_limit(struct query *q, const struct sl_store_filter *f)
{
	if (f && f->limit)
		q_add(q, " LIMIT :limit");
}

/* One sandbox's event stream for sl_store_each_event_row: its batch rows in seq order, the current
 * row copied with each '\n' made a NUL (so every line is a C string), and the current line. */
struct ev_stream {
	sqlite3_stmt *st;
	char *sid;
	char *buf;
	size_t len, cap, off;
	uint64_t next_seq, row_last;
	int64_t received_ns;
	struct sl_store_event_row row; /* the current line (valid while has_row) */
	bool has_row;
};

/* The line's "time" and "class" (the line was checked at ingest: the scan only finds them). */
static void parse_line(struct sl_store_event_row *e)
{
	size_t head = e->len < 512 ? e->len : 512; /* both are in the fixed prefix of a record line */
	const char *t = memmem(e->line, head, "\"time\":", 7);
	e->time_ns = t ? strtoll(t + 7, NULL, 10) : 0;
	const char *c = memmem(e->line, head, "\"class\":\"", 9);
	const char *q = c ? memchr(c + 9, '"', e->len - (size_t)(c + 9 - e->line)) : NULL;
	e->class_name = q ? c + 9 : "";
	e->class_len = q ? (size_t)(q - (c + 9)) : 0;
}

/* Advance st to its next line that passes the filter's class and since. 1: has_row, 0: end, -errno. */
static int ev_next(struct sl_store *s, struct ev_stream *x, const struct sl_store_filter *f)
{
	for (;;) {
		while (x->off < x->len) {
			char *l = x->buf + x->off;
			char *nul = memchr(l, '\0', x->len - x->off);
			if (!nul || x->next_seq > x->row_last)
				return failf(s, -EBADMSG, "sandbox %s: the stored batch ending at seq %" PRIu64
							  " is malformed", x->sid, x->row_last);
			x->off = (size_t)(nul - x->buf) + 1;
			x->row = (struct sl_store_event_row){.sandbox_id = x->sid, .seq = x->next_seq++,
							     .received_ns = x->received_ns, .line = l,
							     .len = (size_t)(nul - l)};
			parse_line(&x->row);
			if (f && f->since_ns && x->row.time_ns < f->since_ns)
				continue;
			if (f && f->class_name &&
			    (strlen(f->class_name) != x->row.class_len ||
			     memcmp(f->class_name, x->row.class_name, x->row.class_len) != 0))
				continue;
			return x->has_row = true;
		}
		if (x->next_seq != 0 && x->next_seq != x->row_last + 1)
			return failf(s, -EBADMSG, "sandbox %s: the stored batch ending at seq %" PRIu64
						  " has the wrong number of lines", x->sid, x->row_last);
		x->has_row = false;
		int rc = sqlite3_step(x->st);
		if (rc == SQLITE_DONE)
			return 0;
		if (rc != SQLITE_ROW)
			return fail(s, rc);
		int64_t first = sqlite3_column_int64(x->st, 0), last = sqlite3_column_int64(x->st, 1);
		const void *b = sqlite3_column_blob(x->st, 3);
		size_t n = (size_t)sqlite3_column_bytes(x->st, 3);
		if (first < 1 || last < first || n == 0 || ((const char *)b)[n - 1] != '\n')
			return failf(s, -EBADMSG, "sandbox %s: the stored batch at seq %" PRId64 " is malformed",
				     x->sid, first);
		if (n > x->cap) {
			char *nb = realloc(x->buf, n);
			if (!nb)
				return failf(s, -ENOMEM, "out of memory");
			x->buf = nb;
			x->cap = n;
		}
		memcpy(x->buf, b, n);
		for (char *p = x->buf; (p = memchr(p, '\n', (size_t)(x->buf + n - p))); p++)
			*p = '\0';
		x->len = n;
		x->off = 0;
		x->next_seq = (uint64_t)first;
		x->row_last = (uint64_t)last;
		x->received_ns = sqlite3_column_int64(x->st, 2);
	}
}

/* Heap order of two streams' current lines: time_ns, sandbox_id, seq. */
static bool ev_before(const struct ev_stream *a, const struct ev_stream *b)
{
	if (a->row.time_ns != b->row.time_ns)
		return a->row.time_ns < b->row.time_ns;
	int c = strcmp(a->sid, b->sid);
	return c != 0 ? c < 0 : a->row.seq < b->row.seq;
}

static void heap_down(struct ev_stream **h, size_t n, size_t i)
{
	for (;;) {
		size_t m = i, l = 2 * i + 1, r = l + 1;
		if (l < n && ev_before(h[l], h[m]))
			m = l;
		if (r < n && ev_before(h[r], h[m]))
			m = r;
		if (m == i)
			return;
		struct ev_stream *t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

int sl_store_each_event_row(struct sl_store *s, const struct sl_store_filter *f,
			    int (*cb)(void *arg, const struct sl_store_event_row *e), void *arg)
{
	/* The sandboxes that pass the binding filters, then one stream per sandbox. */
	struct query q = {0};
	q_add(&q, "SELECT b.sandbox_id FROM bindings b WHERE EXISTS(SELECT 1 FROM event_batches e"
		  " WHERE e.sandbox_id = b.sandbox_id)");
	if (f && f->tenant)
		q_add(&q, " AND b.tenant = :tenant");
	if (f && f->task)
		q_add(&q, " AND b.task = :task");
	if (f && f->sandbox_id)
		q_add(&q, " AND b.sandbox_id = :sandbox");
	q_add(&q, " ORDER BY b.sandbox_id");
	sqlite3_stmt *ids;
	int r = q_prepare(s, &q, f, &ids);
	if (r < 0)
		return r;
	struct ev_stream *xs = NULL, **heap = NULL;
	size_t nx = 0, cap = 0, nh = 0;
	int rc;
	while ((rc = sqlite3_step(ids)) == SQLITE_ROW) {
		if (nx == cap) {
			size_t nc = cap ? cap * 2 : 8;
			struct ev_stream *n2 = realloc(xs, nc * sizeof(*n2));
			if (!n2) {
				r = failf(s, -ENOMEM, "out of memory");
				goto out;
			}
			xs = n2;
			cap = nc;
		}
		struct ev_stream *x = &xs[nx];
		*x = (struct ev_stream){0};
		const char *id = (const char *)sqlite3_column_text(ids, 0);
		if (!(x->sid = strdup(id ? id : ""))) {
			r = failf(s, -ENOMEM, "out of memory");
			goto out;
		}
		nx++;
		if ((rc = sqlite3_prepare_v2(s->db,
					     "SELECT first_seq, last_seq, received_ns, lines FROM event_batches"
					     " WHERE sandbox_id = ?1 ORDER BY first_seq",
					     -1, &x->st, NULL)) != SQLITE_OK ||
		    (rc = sqlite3_bind_text(x->st, 1, x->sid, -1, SQLITE_STATIC)) != SQLITE_OK) {
			r = fail(s, rc);
			goto out;
		}
	}
	if (rc != SQLITE_DONE) {
		r = fail(s, rc);
		goto out;
	}
	if (nx && !(heap = malloc(nx * sizeof(*heap)))) {
		r = failf(s, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nx; i++) {
		if ((r = ev_next(s, &xs[i], f)) < 0)
			goto out;
		if (r == 1)
			heap[nh++] = &xs[i];
	}
	r = 0;
	for (size_t i = nh / 2; i-- > 0;)
		heap_down(heap, nh, i);
	size_t emitted = 0;
	while (nh > 0 && (!f || !f->limit || emitted < f->limit)) {
		struct ev_stream *x = heap[0];
		if ((r = cb(arg, &x->row)) != 0)
			goto out;
		emitted++;
		if ((r = ev_next(s, x, f)) < 0)
			goto out;
		if (r == 0)
			heap[0] = heap[--nh];
		r = 0;
		heap_down(heap, nh, 0);
	}
out:
	sqlite3_finalize(ids);
	for (size_t i = 0; i < nx; i++) {
		sqlite3_finalize(xs[i].st);
		free(xs[i].sid);
		free(xs[i].buf);
	}
	free(xs);
	free(heap);
	return r;
}

struct event_ctx {
	int (*cb)(void *arg, const char *line, size_t len);
	void *arg;
};

static int event_line(void *arg, const struct sl_store_event_row *e)
{
	struct event_ctx *c = arg;
	return c->cb(c->arg, e->line, e->len);
}

int sl_store_each_event(struct sl_store *s, const struct sl_store_filter *f,
			int (*cb)(void *arg, const char *line, size_t len), void *arg)
{
	struct event_ctx c = {cb, arg};
	return sl_store_each_event_row(s, f, event_line, &c);
}

struct alert_ctx {
	int (*cb)(void *arg, const struct sl_store_alert *a);
	void *arg;
};

static int alert_row(sqlite3_stmt *st, void *ctx)
{
	struct alert_ctx *c = ctx;
	struct sl_store_alert a = {
	    .id = sqlite3_column_int64(st, 0),
	    .sandbox_id = col_text(st, 1),
	    .kind = col_text(st, 2),
	    .severity = col_text(st, 3),
	    .detail = col_text(st, 4),
	    .started_ns = sqlite3_column_int64(st, 5),
	    .ended_ns = sqlite3_column_int64(st, 6),
	};
	return c->cb(c->arg, &a);
}

int sl_store_each_alert(struct sl_store *s, const struct sl_store_filter *f,
			int (*cb)(void *arg, const struct sl_store_alert *a), void *arg)
{
	struct query q = {0};
	q_add(&q, "SELECT a.id, a.sandbox_id, a.kind, a.severity, a.detail, a.started_ns, a.ended_ns FROM "
		  "alerts a");
	if (f && (f->tenant || f->task))
		q_add(&q, " JOIN bindings b ON b.sandbox_id = a.sandbox_id");
	q_add(&q, " WHERE 1");
	if (f && f->tenant)
		q_add(&q, " AND b.tenant = :tenant");
	if (f && f->task)
		q_add(&q, " AND b.task = :task");
	if (f && f->sandbox_id)
		q_add(&q, " AND a.sandbox_id = :sandbox");
	if (f && f->kind)
		q_add(&q, " AND a.kind = :kind");
	if (f && f->open_only)
		q_add(&q, " AND a.ended_ns IS NULL");
	if (f && f->since_ns)
		q_add(&q, " AND (a.ended_ns IS NULL OR a.ended_ns >= :since)");
	q_add(&q, " ORDER BY a.started_ns, a.id");
	q_limit(&q, f);
	sqlite3_stmt *st;
	int r = q_prepare(s, &q, f, &st);
	if (r < 0)
		return r;
	struct alert_ctx c = {cb, arg};
	return q_each(s, st, alert_row, &c);
}

struct health_ctx {
	int (*cb)(void *arg, const struct sl_store_health *h);
	void *arg;
};

static int health_row(sqlite3_stmt *st, void *ctx)
{
	struct health_ctx *c = ctx;
	struct sl_store_health h = {
	    .binding =
		{
		    .sandbox_id = col_text(st, 0),
		    .tenant = col_text(st, 1),
		    .agent = col_text(st, 2),
		    .task = col_text(st, 3),
		    .version = col_text(st, 4),
		    .credential_ref = col_text(st, 5),
		    .risk_class = col_text(st, 6),
		    .runtime = col_text(st, 7),
		    .runtime_version = col_text(st, 8),
		    .sensor_version = col_text(st, 9),
		    .control = col_text(st, 10),
		    .key_fingerprint = col_text(st, 11),
		    .started_ns = sqlite3_column_int64(st, 12),
		    .ended_ns = sqlite3_column_int64(st, 13),
		},
	    .state = col_text(st, 14),
	    .state_since_ns = sqlite3_column_int64(st, 15),
	    .last_frame_ns = sqlite3_column_int64(st, 16),
	    .last_heartbeat_ns = sqlite3_column_int64(st, 17),
	    .last_seq = (uint64_t)sqlite3_column_int64(st, 18),
	    .counters =
		{
		    .emitted = (uint64_t)sqlite3_column_int64(st, 20),
		    .recorded = (uint64_t)sqlite3_column_int64(st, 21),
		    .exported = (uint64_t)sqlite3_column_int64(st, 22),
		    .acked = (uint64_t)sqlite3_column_int64(st, 23),
		    .dropped = (uint64_t)sqlite3_column_int64(st, 24),
		    .backlog = (uint64_t)sqlite3_column_int64(st, 25),
		},
	};
	const char *hash = col_text(st, 19);
	snprintf(h.last_hash, sizeof(h.last_hash), "%s", hash ? hash : ZERO_HASH);
	return c->cb(c->arg, &h);
}

int sl_store_each_health(struct sl_store *s, const struct sl_store_filter *f,
			 int (*cb)(void *arg, const struct sl_store_health *h), void *arg)
{
	struct query q = {0};
	q_add(&q,
	      "SELECT b.sandbox_id, b.tenant, b.agent, b.task, b.version, b.credential_ref, b.risk_class,"
	      " b.runtime, b.runtime_version, b.sensor_version, b.control, b.key_fingerprint, b.started_ns,"
	      " b.ended_ns, h.state, h.state_since_ns, h.last_frame_ns, h.last_heartbeat_ns, h.last_seq,"
	      " h.last_hash, h.emitted, h.recorded, h.exported, h.acked, h.dropped, h.backlog"
	      " FROM bindings b JOIN health h ON h.sandbox_id = b.sandbox_id WHERE 1");
	if (f && f->tenant)
		q_add(&q, " AND b.tenant = :tenant");
	if (f && f->task)
		q_add(&q, " AND b.task = :task");
	if (f && f->sandbox_id)
		q_add(&q, " AND b.sandbox_id = :sandbox");
	if (f && f->state)
		q_add(&q, " AND h.state = :state");
	if (f && f->since_ns)
		q_add(&q, " AND (b.ended_ns IS NULL OR b.ended_ns >= :since)");
	q_add(&q, " ORDER BY b.started_ns, b.sandbox_id");
	q_limit(&q, f);
	sqlite3_stmt *st;
	int r = q_prepare(s, &q, f, &st);
	if (r < 0)
		return r;
	struct health_ctx c = {cb, arg};
	return q_each(s, st, health_row, &c);
}

struct reject_ctx {
	int (*cb)(void *arg, const char *reason, uint64_t count);
	void *arg;
};

static int reject_row(sqlite3_stmt *st, void *ctx)
{
	struct reject_ctx *c = ctx;
	const char *reason = col_text(st, 0);
	return c->cb(c->arg, reason ? reason : "", (uint64_t)sqlite3_column_int64(st, 1));
}

int sl_store_each_reject(struct sl_store *s, int (*cb)(void *arg, const char *reason, uint64_t count),
			 void *arg)
{
	struct query q = {0};
	q_add(&q, "SELECT reason, count FROM rejects ORDER BY reason");
	sqlite3_stmt *st;
	int r = q_prepare(s, &q, NULL, &st);
	if (r < 0)
		return r;
	struct reject_ctx c = {cb, arg};
	return q_each(s, st, reject_row, &c);
}

struct acceptance_ctx {
	int (*cb)(void *arg, const struct sl_store_acceptance *a);
	void *arg;
};

static int acceptance_row(sqlite3_stmt *st, void *ctx)
{
	struct acceptance_ctx *c = ctx;
	struct sl_store_acceptance a = {
	    .id = sqlite3_column_int64(st, 0),
	    .contract = col_text(st, 1),
	    .runtime = col_text(st, 2),
	    .runtime_version = col_text(st, 3),
	    .sensor_version = col_text(st, 4),
	    .passed = sqlite3_column_int(st, 5) != 0,
	    .at_ns = sqlite3_column_int64(st, 6),
	    .report = col_text(st, 7),
	};
	return c->cb(c->arg, &a);
}

int sl_store_each_acceptance(struct sl_store *s, const char *contract,
			     int (*cb)(void *arg, const struct sl_store_acceptance *a), void *arg)
{
	struct query q = {0};
	q_add(&q, "SELECT id, contract, runtime, runtime_version, sensor_version, passed, at_ns, report"
		  " FROM acceptances");
	if (contract)
		q_add(&q, " WHERE contract = :contract");
	q_add(&q, " ORDER BY at_ns DESC, id DESC");
	sqlite3_stmt *st;
	int r = q_prepare(s, &q, NULL, &st);
	if (r < 0)
		return r;
	if (contract) {
		int rc = sqlite3_bind_text(st, sqlite3_bind_parameter_index(st, ":contract"), contract, -1,
					   SQLITE_STATIC);
		if (rc != SQLITE_OK) {
			r = fail(s, rc);
			sqlite3_finalize(st);
			return r;
		}
	}
	struct acceptance_ctx c = {cb, arg};
	return q_each(s, st, acceptance_row, &c);
}

/* ---- readers, and alerts reported from beneath the boundary ---- */

int sl_store_open_readonly(const char *path, struct sl_store **out)
{
	*out = NULL;
	pthread_once(&sqlite_once, sqlite_setup);
	open_err[0] = '\0';
	int r = store_path_ok(path);
	if (r < 0)
		return r;
	/* A reader never creates a store: a mistyped path must say so, not show an empty one. */
	struct stat sb;
	if (stat(path, &sb) < 0) {
		int e = errno;
		snprintf(open_err, sizeof(open_err), "no collector store at %s: %s", path, strerror(e));
		return -e;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(open_err, sizeof(open_err), "%s is not a collector store (not a regular file)", path);
		return -EINVAL;
	}
	struct sl_store *s;
	int64_t ver = 0, app = 0;
	if ((r = store_connect(path, SQLITE_OPEN_READONLY, &s)) < 0) {
		if (!s)
			return r;
		goto fail;
	}
	if ((r = query_int(s, "PRAGMA user_version", &ver)) < 0 ||
	    (r = query_int(s, "PRAGMA application_id", &app)) < 0)
		goto fail;
	if (app != APPLICATION_ID || ver < 1) {
		r = failf(s, -EPROTO, "not a sightline collector store (application_id %" PRId64 ", user_version %" PRId64 ")",
			  app, ver);
		goto fail;
	}
	if (ver > SL_STORE_SCHEMA_VERSION) {
		r = failf(s, -EPROTO, "the store's schema version %" PRId64 " is newer than this build's (%d)", ver,
			  SL_STORE_SCHEMA_VERSION);
		goto fail;
	}
	if (ver < SL_STORE_SCHEMA_VERSION) {
		/* Reading the old layout would need a second reader; the collector converts it at start. */
		r = failf(s, -EPROTO,
			  "the store has schema version %" PRId64 " (this build reads %d): start the collector"
			  " (sightline collectd) on it once to migrate it",
			  ver, SL_STORE_SCHEMA_VERSION);
		goto fail;
	}
	s->err[0] = '\0';
	*out = s;
	return 0;
fail:
	return open_failed(path, s, r);
}

int sl_store_alert_restart(struct sl_store *s, int64_t id, int64_t start_ns, const char *detail)
{
	if (start_ns <= 0)
		return failf(s, -EINVAL, "start_ns must be > 0");
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db,
				    "UPDATE alerts SET started_ns = ?2, detail = coalesce(?3, detail) WHERE id = ?1", -1,
				    &st, NULL);
	if (rc != SQLITE_OK)
		return fail(s, rc);
	int r;
	if (sqlite3_bind_int64(st, 1, id) | sqlite3_bind_int64(st, 2, start_ns) | bind_str(st, 3, detail)) {
		r = bind_failed(s, st);
		sqlite3_finalize(st);
		return r;
	}
	r = run(s, st);
	int changed = sqlite3_changes(s->db);
	sqlite3_finalize(st);
	if (r < 0)
		return r;
	return changed == 1 ? 0 : failf(s, -ENOENT, "no alert %" PRId64, id);
}

/* ---- what observed a sandbox (from its record.begin) ---- */

int sl_store_set_runtime(struct sl_store *s, const char *sandbox_id, const char *runtime,
			 const char *runtime_version, const char *sensor_version)
{
	sqlite3_stmt *st;
	/* Not a cached statement: once per sandbox. */
	int rc = sqlite3_prepare_v2(s->db,
				    "UPDATE bindings SET runtime = ?1, runtime_version = ?2, sensor_version = ?3 "
				    "WHERE sandbox_id = ?4",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(s, rc);
	if (bind_str(st, 1, runtime) | bind_str(st, 2, runtime_version) | bind_str(st, 3, sensor_version) |
	    bind_str(st, 4, sandbox_id)) {
		int r = fail(s, sqlite3_errcode(s->db));
		sqlite3_finalize(st);
		return r;
	}
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : fail(s, rc);
}
