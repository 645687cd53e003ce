/* The collector's durable store: one SQLite database (WAL) holding, per sandbox, the identity
 * binding from the launcher, the event stream (the record's lines, deduplicated by (sandbox_id, seq)
 * and continuity-checked against the hash chain), health, alerts, and collector-wide tables (reject
 * counters, revoked credentials, acceptance results). Schema and durability: docs/collector-schema.md.
 *
 * Every function returns 0 (or a documented non-negative value) or a negative errno, and never
 * prints. SQLite errors map to: SQLITE_FULL -> -ENOSPC, SQLITE_BUSY/LOCKED -> -EBUSY,
 * SQLITE_CORRUPT/NOTADB -> -EBADMSG, SQLITE_NOMEM -> -ENOMEM, SQLITE_READONLY -> -EROFS, a foreign
 * key violation (an unknown sandbox) -> -ENOENT, SQLITE_CANTOPEN -> the OS errno (or -EIO), an I/O
 * error whose OS errno is ENOSPC/EDQUOT -> that errno, anything else -> -EIO. The message of the
 * last failure (SQLite's, or the store's own for -EPROTO/-EINVAL/-EEXIST) stays readable with
 * sl_store_errmsg().
 *
 * Threads: a struct sl_store is one SQLite connection (opened SQLITE_OPEN_NOMUTEX) with cached
 * statements: use it from one thread at a time. Several stores (threads, processes) may open the same
 * file: readers never block the writer (WAL); writers queue for up to 5 s (busy_timeout), then -EBUSY.
 * A store that writes starts one checkpointer thread of its own (all signals blocked; joined by
 * sl_store_close), so that WAL checkpoints and their fsyncs do not stall the writer. The first
 * sl_store_open turns SQLite's memory statistics off for the process (SQLITE_CONFIG_MEMSTATUS).
 *
 * Times are nanoseconds since the epoch. A time that is NULL in the database (not ended, no frame
 * or heartbeat yet) reads back as 0, so an end time (sl_store_end, sl_store_alert_close) and a
 * binding's started_ns must be > 0 (else -EINVAL). */
#ifndef SL_COLLECTOR_STORE_H
#define SL_COLLECTOR_STORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_STORE_SCHEMA_VERSION 3 /* 3: event_batches; 2: events rows; 1: with events indexes (1, 2 migrated at open) */
#define SL_STORE_HASH_LEN	64 /* a hash is 64 lowercase hex characters */

struct sl_store;

/* Open (creating if absent, mode 0600) the database file at path (not ":memory:" nor a "file:" URI:
 * -EINVAL); set journal_mode=WAL, synchronous=NORMAL, foreign_keys=ON, busy_timeout=5000; create
 * the schema if the file has none. A file with tables but no schema version, or another
 * application_id, is refused with -EPROTO.
 * A database whose user_version is newer than SL_STORE_SCHEMA_VERSION is refused with -EPROTO;
 * a file that is not a database gives -EBADMSG. On failure *out is NULL and the message is
 * sl_store_errmsg(NULL) (per thread). */
int sl_store_open(const char *path, struct sl_store **out);
/* Open an existing store for reading only (SQLITE_OPEN_READONLY; the readers: status, events,
 * alerts). Never creates anything: a missing path gives -ENOENT ("no collector store at PATH"), a
 * file that is not a sightline store -EPROTO or -EBADMSG, with the message in sl_store_errmsg(NULL).
 * Every query works on it; a write fails with -EROFS. */
int sl_store_open_readonly(const char *path, struct sl_store **out);
/* Finalize every statement and close the connection (a clean close checkpoints the WAL). NULL ok. */
void sl_store_close(struct sl_store *s);
/* The message of this store's last failure ("" if none). sl_store_errmsg(NULL): the calling
 * thread's last sl_store_open failure. The string is owned by the store (or the thread). */
const char *sl_store_errmsg(const struct sl_store *s);
/* Cap the database file at about max_bytes (PRAGMA max_page_count, this connection only; 0 lifts
 * the cap): a write that would grow it further fails with -ENOSPC and changes nothing. The cap
 * cannot go below the current size. Returns 0 or -errno. */
int sl_store_set_max_size(struct sl_store *s, uint64_t max_bytes);

/* ---- identity bindings ---- */

/* The server-controlled binding of one sandbox, from the launcher. Every string may be NULL (stored
 * as NULL) except sandbox_id; started_ns must be > 0. */
struct sl_store_binding {
	const char *sandbox_id;
	const char *tenant, *agent, *task, *version, *credential_ref;
	const char *risk_class; /* e.g. "high", "medium", "low" */
	const char *runtime, *runtime_version, *sensor_version;
	const char *control;	     /* address of the supervisor's control socket */
	const char *key_fingerprint; /* fingerprint of the sandbox's stream key (never the key) */
	int64_t started_ns;
	int64_t ended_ns; /* read back only (0 while running); sl_store_bind ignores it */
};
/* Insert the binding and the sandbox's health row (state "healthy" since started_ns, last seq 0,
 * head 64 '0'), in one transaction. Binding the same sandbox_id again with every field identical
 * (ended_ns aside) returns 0 and changes nothing; any difference returns -EEXIST. */
int sl_store_bind(struct sl_store *s, const struct sl_store_binding *b);
/* Set the binding's runtime, runtime_version and sensor_version (the collector takes them from the
 * sandbox's verified record.begin manifest: which runtime and sensor observed it). 0 or -errno. */
int sl_store_set_runtime(struct sl_store *s, const char *sandbox_id, const char *runtime,
			 const char *runtime_version, const char *sensor_version);
/* The sandbox has ended: sets bindings.ended_ns (the first end is kept) and health.state "ended" in
 * one transaction. -ENOENT if the sandbox is not bound. */
int sl_store_end(struct sl_store *s, const char *sandbox_id, int64_t ended_ns);

/* ---- the event stream ---- */

/* One record line, already validated by the caller (structure, hash). The pointers may point into
 * the caller's frame buffer: nothing needs to be NUL-terminated, nothing is copied, and they need
 * only live for the duration of the call. */
struct sl_store_event {
	uint64_t seq;		/* >= 1 */
	int64_t time_ns;	/* the line's "time" */
	const char *class_name; /* the line's "class" */
	size_t class_len;	/* bytes of class_name; 0: class_name is NUL-terminated */
	const char *prev_hash;	/* SL_STORE_HASH_LEN characters */
	const char *hash;	/* SL_STORE_HASH_LEN characters */
	const char *line;	/* the raw line; a trailing '\n' is not stored */
	size_t line_len;
	/* Set by the line checker when no built-in detection (detect.h) can fire on this line, so
	 * the event loop need not look (false: look). Not stored. */
	bool no_detection;
};
/* The stored head of a sandbox: last seq and its hash (0 and 64 '0' if none, or not bound). hash
 * may be NULL. Returns 0 or -errno. */
int sl_store_last(struct sl_store *s, const char *sandbox_id, uint64_t *seq,
		  char hash[SL_STORE_HASH_LEN + 1]);
/* Append a batch of a sandbox's events in ONE transaction as ONE event_batches row (schema 3: the
 * new lines, newline-separated; resends are cut off at the stored head first, so rows never
 * overlap), in order, by these rules (last = the stored head, updated as events are accepted):
 *   - seq <= last: a resend. Skipped and counted in *dups. It must be byte-identical to the stored
 *     line; if it is not (the record was rewritten, or a forged replay), processing stops as below.
 *   - seq == last + 1 and prev_hash == the stored head hash: inserted (received_ns recorded).
 *   - anything else (a hole, a chain break, a conflicting resend): processing stops there, what was
 *     inserted before it is committed, and -EPROTO is returned (sl_store_errmsg says which). The
 *     caller tells the kinds apart with *last_seq: the stopping event has seq > *last_seq + 1 (hole),
 *     seq == *last_seq + 1 (chain break) or seq <= *last_seq (conflicting resend).
 * health.last_seq/last_hash (and last_frame_ns = received_ns, if anything was inserted) are updated
 * in the same transaction. On a SQLite failure (-ENOSPC, -EBUSY, ...) the whole batch is rolled
 * back: nothing of it is stored and the head does not move. -ENOENT if the sandbox is not bound;
 * -EINVAL (nothing done) if an event is malformed (NULL pointer, seq 0 or > INT64_MAX, a '\n'
 * inside the line).
 * *last_seq (may be NULL) is always set to the stored head after the call (the acknowledgeable
 * seq); *dups (may be NULL) to the number of resends skipped. */
int sl_store_append_events(struct sl_store *s, const char *sandbox_id, const struct sl_store_event *ev,
			   size_t n, int64_t received_ns, uint64_t *last_seq, size_t *dups);

/* ---- health, alerts, counters ---- */

/* A sensor's heartbeat counters (values must be < 2^63). */
struct sl_store_counters {
	uint64_t emitted, recorded, exported, acked, dropped, backlog;
};
/* Record a heartbeat: the counters and last_heartbeat_ns = now_ns. -ENOENT if not bound. */
int sl_store_heartbeat(struct sl_store *s, const char *sandbox_id, const struct sl_store_counters *c,
		       int64_t now_ns);
/* Set the health state: "healthy", "lagging", "blind" or "ended" (else -EINVAL). Returns 1 if the
 * state changed (state_since_ns = now_ns), 0 if it already was that state (nothing changes),
 * -ENOENT if not bound. The store enforces no transition rules. */
int sl_store_set_state(struct sl_store *s, const char *sandbox_id, const char *state, int64_t now_ns);

/* Open an alert. sandbox_id may be NULL (a collector-wide alert); kind and severity are required,
 * detail may be NULL. If an alert of the same kind is already open for that sandbox, returns its id
 * and stores nothing. Returns the id (> 0) or -errno (-ENOENT: sandbox not bound). */
int64_t sl_store_alert_open(struct sl_store *s, const char *sandbox_id, const char *kind,
			    const char *severity, int64_t start_ns, const char *detail);
/* Close an alert at end_ns. 0 if closed now or already closed (the first end is kept), -ENOENT if
 * there is no such alert. */
int sl_store_alert_close(struct sl_store *s, int64_t id, int64_t end_ns);
/* Move an alert's start to start_ns and, if detail is not NULL, replace its detail (a blind
 * interval the supervisor detected while the collector was down: its detection time is the start).
 * -ENOENT if there is no such alert. */
int sl_store_alert_restart(struct sl_store *s, int64_t id, int64_t start_ns, const char *detail);
/* Count one rejected frame under reason (count += 1). */
int sl_store_reject(struct sl_store *s, const char *reason);

/* Mark a credential reference revoked. Returns 0 if newly revoked, 1 if it already was (the first
 * revocation's time and reason are kept). reason may be NULL. */
int sl_store_revoke(struct sl_store *s, const char *credential_ref, int64_t revoked_ns, const char *reason);
/* 1 if revoked, 0 if not, or -errno. */
int sl_store_is_revoked(struct sl_store *s, const char *credential_ref);

/* An acceptance result (check + validate of a contract on a runtime and sensor version). */
struct sl_store_acceptance {
	int64_t id; /* read back only */
	const char *contract, *runtime, *runtime_version, *sensor_version;
	bool passed;
	int64_t at_ns;
	const char *report; /* JSON text or NULL */
};
/* Store an acceptance result. Returns its id (> 0) or -errno. */
int64_t sl_store_acceptance_add(struct sl_store *s, const struct sl_store_acceptance *a);

/* ---- queries (for the CLI, /metrics and the gate) ----
 *
 * Each calls cb once per row, in the documented order. The row's pointers are valid only during
 * the callback. If cb returns non-zero, iteration stops and that value is returned; otherwise the
 * call returns 0 (or -errno). A NULL filter, NULL strings, since_ns 0 and limit 0 mean "any". */
struct sl_store_filter {
	const char *tenant;	/* events, alerts, health: the binding's tenant */
	const char *task;	/* events, alerts, health: the binding's task */
	const char *sandbox_id; /* events, alerts, health */
	const char *class_name; /* events: the class */
	const char *kind;	/* alerts: the kind */
	const char *state;	/* health: the state */
	bool open_only;		/* alerts: only those not closed */
	int64_t since_ns;	/* events: time_ns >= since; alerts: open, or ended >= since;
				 * health: running, or ended >= since */
	size_t limit;		/* at most this many rows (the first ones in order) */
};
/* One stored event as the readers see it. */
struct sl_store_event_row {
	const char *sandbox_id;
	uint64_t seq;
	int64_t time_ns;     /* the line's "time" */
	int64_t received_ns; /* when the collector received its batch */
	const char *class_name; /* the line's "class" (class_len bytes, not NUL-terminated) */
	size_t class_len;
	const char *line; /* the stored line, NUL-terminated, no '\n' */
	size_t len;
};
/* Events, ORDER BY time_ns, sandbox_id, seq: the batch rows are split into lines and filtered
 * (class, since; sandbox, tenant, task through the bindings) line by line. Each sandbox's lines come
 * in seq order and the sandboxes are merged by time, so the order is exactly time_ns, sandbox_id,
 * seq whenever each sandbox's times do not decrease with seq (a record's times are taken in seq
 * order; only a clock set back breaks that, and then that sandbox's lines stay in seq order). */
int sl_store_each_event_row(struct sl_store *s, const struct sl_store_filter *f,
			    int (*cb)(void *arg, const struct sl_store_event_row *e), void *arg);
/* sl_store_each_event_row, with only the line (NUL-terminated, no '\n'). */
int sl_store_each_event(struct sl_store *s, const struct sl_store_filter *f,
			int (*cb)(void *arg, const char *line, size_t len), void *arg);

struct sl_store_alert {
	int64_t id;
	const char *sandbox_id; /* NULL for a collector-wide alert */
	const char *kind, *severity;
	const char *detail;	      /* may be NULL */
	int64_t started_ns, ended_ns; /* ended_ns 0 while open */
};
/* Alerts, ORDER BY started_ns, id. */
int sl_store_each_alert(struct sl_store *s, const struct sl_store_filter *f,
			int (*cb)(void *arg, const struct sl_store_alert *a), void *arg);

struct sl_store_health {
	struct sl_store_binding binding; /* with ended_ns */
	const char *state;
	int64_t state_since_ns, last_frame_ns, last_heartbeat_ns; /* 0: never */
	uint64_t last_seq;
	char last_hash[SL_STORE_HASH_LEN + 1];
	struct sl_store_counters counters;
};
/* Sandboxes with their binding and health, ORDER BY started_ns, sandbox_id. */
int sl_store_each_health(struct sl_store *s, const struct sl_store_filter *f,
			 int (*cb)(void *arg, const struct sl_store_health *h), void *arg);

/* Reject counters, ORDER BY reason. */
int sl_store_each_reject(struct sl_store *s, int (*cb)(void *arg, const char *reason, uint64_t count),
			 void *arg);
/* Acceptance results, newest first (ORDER BY at_ns DESC, id DESC); contract NULL: all. */
int sl_store_each_acceptance(struct sl_store *s, const char *contract,
			     int (*cb)(void *arg, const struct sl_store_acceptance *a), void *arg);
#endif
