/* The collector's event loop: one thread, epoll, non-blocking sockets. Trust: nothing that
 * arrives is trusted until its frame's HMAC checks out with the key of the sandbox it claims to
 * be; even then every line is re-validated (shape, JSON, own hash) and must continue that
 * sandbox's chain. A bad frame is counted under its reason and costs only its own connection;
 * the collector never crashes or stalls on input. An ACK is sent only after the events are
 * committed to SQLite, so an acknowledged event survives a kill -9 of the collector. */
#include "collector/server.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>
#include <json-c/json.h>

#include "collector/detect.h"
#include "collector/linecheck.h"
#include "collector/store.h"
#include "common/util.h"
#include "export/exporter.h"
#include "record/record.h"

#define MAX_CONNS     1024
#define MAX_SANDBOXES 4096
#define MAX_BATCH     SL_FRAME_EVENTS_MAX
#define MAX_KEY_IDS   65536 /* key ids of bound sandboxes remembered to name other-sandbox keys */
/* An ingest connection must complete its HELLO within this long, and at most this many may be
 * waiting to (so that connections that never authenticate cannot hold the slots or memory). */
#define HANDSHAKE_MS	  3000
#define MAX_UNAUTH	  64
/* Operator and metrics connections: a request of at most CLIENT_REQ_MAX bytes within CLIENT_MS, at
 * most MAX_CLIENTS of each kind at once (separate caps: any local user may connect to the metrics
 * port, and that must not lock the dispatcher out of the gate); all I/O non-blocking in the loop,
 * so none of them can stall ingest. */
#define CLIENT_MS	  2000
#define CLIENT_REQ_MAX	  1024
#define MAX_CLIENTS	  32
/* An idle authenticated connection gets its stored head re-acknowledged this often (see tick). */
#define KEEPALIVE_ACK_MS 250
/* Latency histogram: 4 sub-buckets per power of two of microseconds (each bucket's upper bound at
 * most 25 % above its lower one), up to 2^31 us. */
#define LAT_BUCKETS 128

struct sandbox {
	char id[33];
	char risk[8];
	int64_t last_frame_ns;	 /* any authenticated frame */
	int64_t backlog_since_ns; /* heartbeat said backlog > 0 since */
	int64_t delay_ns;	  /* action -> stored, for the newest event of the last batch */
	int64_t blind_since_ns;	  /* start of the current blind spell */
	char state[8];
	char control[257]; /* the supervisor's control socket ("none" if it has none) */
	char cred[257];	   /* the binding's credential_ref */
	int64_t alert_id; /* open blind/lagging alert, or 0 */
	int64_t reported_alert_id; /* blind alert opened from the supervisor's export.blind, or 0 */
	int64_t next_probe_ns;	   /* blind: when to probe the control socket next */
	bool ended, connected;
};

enum conn_kind { CONN_INGEST = 1, CONN_ADMIN, CONN_METRICS };

struct conn {
	enum conn_kind kind;
	int fd;
	int64_t opened_ns; /* CLOCK_MONOTONIC */
	size_t slot;	   /* index in server.conns */
	/* CONN_INGEST */
	struct sl_frame_ctx ctx;
	uint8_t *rbuf;
	size_t rlen;
	bool hello;
	struct sandbox *sb;
	int64_t last_ack_ns; /* CLOCK_MONOTONIC */
	unsigned in_check;   /* EVENTS batches of this connection at the line checker */
	bool closed;	     /* closed; freed by reap() once no batch refers to it */
	struct conn *grave_next;
	/* CONN_ADMIN, CONN_METRICS: the request, then the response being written */
	char req[CLIENT_REQ_MAX + 1];
	size_t req_len;
	char *resp;
	size_t resp_len, resp_off;
};

struct server {
	const struct sl_collectd_cfg *cfg;
	struct sl_store *st;
	int ep;
	struct sandbox sbx[MAX_SANDBOXES];
	size_t n_sbx;
	struct sl_linecheck *lc; /* the line checker thread (linecheck.h) */
	struct conn *graveyard;	 /* closed connections, freed after the current epoll batch */
	uint8_t *wbuf;
	int n_conns, n_unauth, n_clients[CONN_METRICS + 1]; /* clients by kind */
	/* The key id (sl_frame_key_id) of every sandbox bound in the store, newest last (a ring once
	 * full), so a HELLO tagged with another sandbox's key is told apart from an unknown key. */
	struct known_key {
		char key_id[SL_FRAME_KEY_ID_LEN + 1];
		char sandbox_id[SL_FRAME_SANDBOX_ID_LEN + 1];
	} *key_ids;
	size_t n_key_ids, key_ids_next;
	struct conn *conns[MAX_CONNS + 2 * MAX_CLIENTS]; /* every open connection, for the tick */
	size_t n_slots;
	/* counters for /metrics */
	uint64_t events_received, frames_received, duplicates;
	double blind_seconds;
	/* ingest latency (action time -> durable here), see LAT_BUCKETS */
	uint64_t lat_bucket[LAT_BUCKETS], lat_count;
	double lat_sum_s;
	struct sl_canary_sched *canary; /* scheduled canaries, or NULL */
};

static void logf_(struct server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct server *s, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (s->cfg->log)
		s->cfg->log(line);
}

int sl_collectd_secret(const char *path, uint8_t out[SL_FRAME_MASTER_LEN])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		ssize_t n = sl_read_full(fd, out, SL_FRAME_MASTER_LEN + 1);
		close(fd);
		return n == SL_FRAME_MASTER_LEN ? 0 : -EINVAL;
	}
	if (errno != ENOENT)
		return -errno;
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		sl_mkdir_p(dir, 0700);
	}
	if (getrandom(out, SL_FRAME_MASTER_LEN, 0) != SL_FRAME_MASTER_LEN)
		return -EIO;
	/* Only the collector (and root's launchers) may read it: it derives every sandbox's key. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	int r = sl_write_all(fd, out, SL_FRAME_MASTER_LEN);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

static struct sandbox *sandbox_get(struct server *s, const char *id)
{
	for (size_t i = 0; i < s->n_sbx; i++)
		if (!strcmp(s->sbx[i].id, id))
			return &s->sbx[i];
	if (s->n_sbx == MAX_SANDBOXES) {
		/* Reuse the slot of an ended sandbox. */
		for (size_t i = 0; i < s->n_sbx; i++)
			if (s->sbx[i].ended && !s->sbx[i].connected) {
				memset(&s->sbx[i], 0, sizeof(s->sbx[i]));
				snprintf(s->sbx[i].id, sizeof(s->sbx[i].id), "%s", id);
				return &s->sbx[i];
			}
		return NULL;
	}
	struct sandbox *b = &s->sbx[s->n_sbx++];
	memset(b, 0, sizeof(*b));
	snprintf(b->id, sizeof(b->id), "%s", id);
	snprintf(b->state, sizeof(b->state), "healthy");
	return b;
}

static void reject(struct server *s, const char *reason)
{
	sl_store_reject(s->st, reason);
}

static int send_frame(struct server *s, struct conn *c, uint8_t type, const uint8_t *p, size_t n)
{
	size_t out;
	int r = sl_frame_encode(type, p, n, &c->ctx, s->wbuf, SL_FRAME_MAX_FRAME, &out);
	if (r < 0)
		return r;
	/* Small control frames: the socket buffer takes them; a peer that stops reading loses its
	 * connection rather than stalling the collector. */
	size_t off = 0;
	while (off < out) {
		ssize_t w = send(c->fd, s->wbuf + off, out - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)w;
	}
	return 0;
}

static int send_ack(struct server *s, struct conn *c, uint64_t seq)
{
	uint8_t p[SL_FRAME_ACK_LEN];
	c->last_ack_ns = sl_now_monotonic_ns();
	sl_frame_ack_payload(seq, p);
	return send_frame(s, c, SL_FRAME_ACK, p, sizeof(p));
}

static void send_error(struct server *s, struct conn *c, uint16_t code, const char *msg)
{
	uint8_t p[2 + SL_FRAME_ERROR_MSG_MAX];
	int n = sl_frame_error_payload(code, msg, strlen(msg), p, sizeof(p));
	if (n > 0)
		send_frame(s, c, SL_FRAME_ERROR, p, (size_t)n);
}

/* Take a slot in s->conns for c (the caller checked the caps). */
static void conn_register(struct server *s, struct conn *c)
{
	c->slot = s->n_slots;
	s->conns[s->n_slots++] = c;
	c->opened_ns = sl_now_monotonic_ns();
}

/* Close c now (fd, epoll, counters, registry); free it later (reap), since an event of the same
 * epoll batch or a batch at the line checker may still point to it. Closing twice is a no-op. */
static void conn_close(struct server *s, struct conn *c)
{
	if (c->closed)
		return;
	c->closed = true;
	if (c->sb)
		c->sb->connected = false;
	epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->kind == CONN_INGEST) {
		s->n_conns--;
		if (!c->hello)
			s->n_unauth--;
	} else {
		s->n_clients[c->kind]--;
	}
	/* swap-remove from the registry */
	struct conn *last = s->conns[--s->n_slots];
	s->conns[c->slot] = last;
	last->slot = c->slot;
	sl_frame_ctx_wipe(&c->ctx);
	free(c->rbuf);
	c->rbuf = NULL;
	free(c->resp);
	c->resp = NULL;
	c->grave_next = s->graveyard;
	s->graveyard = c;
}

/* Free the closed connections that no batch at the line checker refers to any more. */
static void reap(struct server *s, bool all)
{
	for (struct conn **pp = &s->graveyard; *pp;) {
		struct conn *c = *pp;
		if (c->in_check && !all) {
			pp = &c->grave_next;
			continue;
		}
		*pp = c->grave_next;
		free(c);
	}
}

struct known {
	const struct sl_frame_hello *h;
	bool found, same, ended;
};

static bool eq(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static int known_cb(void *arg, const struct sl_store_health *hl)
{
	struct known *k = arg;
	const struct sl_store_binding *b = &hl->binding;
	k->found = true;
	k->ended = hl->binding.ended_ns != 0 || !strcmp(hl->state, "ended");
	k->same = eq(b->tenant, k->h->tenant) && eq(b->agent, k->h->agent) && eq(b->task, k->h->task) &&
		  eq(b->version, k->h->version) && eq(b->credential_ref, k->h->credential_ref) &&
		  eq(b->risk_class, k->h->risk_class);
	return 1;
}

/* Remember a bound sandbox's key id (ring of MAX_KEY_IDS, newest kept). Called once per binding
 * (a new one, or each stored one at start), so no sandbox is in it twice. stored: the binding's
 * key_fingerprint, used when it is a key id (bindings made since protocol version 2), else the
 * key id is derived again. */
static void key_id_remember(struct server *s, const char *sandbox_id, const char *stored)
{
	char kid[SL_FRAME_KEY_ID_LEN + 1];
	if (!s->key_ids)
		return;
	bool ok = stored && strlen(stored) == SL_FRAME_KEY_ID_LEN;
	for (size_t i = 0; ok && i < SL_FRAME_KEY_ID_LEN; i++)
		ok = (stored[i] >= '0' && stored[i] <= '9') || (stored[i] >= 'a' && stored[i] <= 'f');
	if (ok) {
		memcpy(kid, stored, sizeof(kid));
	} else {
		uint8_t key[SL_FRAME_KEY_LEN];
		if (sl_frame_derive_key(s->cfg->master, sandbox_id, key) < 0)
			return;
		int r = sl_frame_key_id(key, kid);
		explicit_bzero(key, sizeof(key));
		if (r < 0)
			return;
	}
	struct known_key *k = &s->key_ids[s->key_ids_next];
	memcpy(k->key_id, kid, sizeof(kid));
	snprintf(k->sandbox_id, sizeof(k->sandbox_id), "%s", sandbox_id);
	s->key_ids_next = (s->key_ids_next + 1) % MAX_KEY_IDS;
	if (s->n_key_ids < MAX_KEY_IDS)
		s->n_key_ids++;
}

static int key_id_load_cb(void *arg, const struct sl_store_health *h)
{
	key_id_remember(arg, h->binding.sandbox_id, h->binding.key_fingerprint);
	return 0;
}

/* Why a HELLO's tag failed: the key id it claims is the claimed sandbox's key's (bad_tag: the
 * frame was changed, or replayed from another connection), another bound sandbox's
 * (other_sandbox_key), or nobody's we know (wrong_key). */
static enum sl_frame_reject hello_key_verdict(struct server *s, const uint8_t key[SL_FRAME_KEY_LEN], const char *sid,
					     const char *kid)
{
	if (sl_frame_hello_tag_verdict(key, kid) == SL_FRAME_REJECT_BAD_TAG)
		return SL_FRAME_REJECT_BAD_TAG;
	for (size_t i = 0; i < s->n_key_ids; i++)
		if (!strcmp(s->key_ids[i].key_id, kid) && strcmp(s->key_ids[i].sandbox_id, sid) != 0)
			return SL_FRAME_REJECT_OTHER_SANDBOX_KEY;
	return SL_FRAME_REJECT_WRONG_KEY;
}

/* Returns 0 to keep the connection, 1 to wait for more bytes, -1 to drop it. */
static int on_hello(struct server *s, struct conn *c, size_t *used)
{
	char sid[SL_FRAME_SANDBOX_ID_LEN + 1], kid[SL_FRAME_KEY_ID_LEN + 1];
	enum sl_frame_reject why = SL_FRAME_REJECT_NONE;
	int r = sl_frame_peek_hello(c->rbuf, c->rlen, sid, kid, &why);
	if (r == -EAGAIN)
		return 1;
	if (r < 0) {
		reject(s, sl_frame_reject_name(why));
		return -1;
	}
	uint8_t key[SL_FRAME_KEY_LEN];
	if (sl_frame_derive_key(s->cfg->master, sid, key) < 0) {
		reject(s, "bad_payload");
		return -1;
	}
	sl_frame_ctx_set_key(&c->ctx, key);
	struct sl_frame f;
	r = sl_frame_decode(c->rbuf, c->rlen, &c->ctx, &f, used);
	if (r == -EAGAIN) {
		explicit_bzero(key, sizeof(key));
		return 1;
	}
	if (r < 0) {
		/* A HELLO signed with another key: the key id it carries says whose (a wrong key, or
		 * another sandbox's), or, if it is the claimed sandbox's, that the frame was changed. */
		enum sl_frame_reject v = f.reject;
		if (v == SL_FRAME_REJECT_BAD_TAG)
			v = hello_key_verdict(s, key, sid, kid);
		explicit_bzero(key, sizeof(key));
		reject(s, sl_frame_reject_name(v));
		return -1;
	}
	explicit_bzero(key, sizeof(key));
	sl_frame_ctx_accept(&c->ctx, &f);
	struct sl_frame_hello h;
	if (sl_frame_hello_parse(f.payload, f.payload_len, &h) < 0 || strcmp(h.sandbox_id, sid) != 0 ||
	    sl_frame_hello_tag_verdict(c->ctx.key, h.key_id) != SL_FRAME_REJECT_BAD_TAG) {
		/* Authentic, but its key id is not its own key's: refused, so a stored fingerprint and
		 * the verdicts built on key ids can be trusted. */
		reject(s, "bad_payload");
		return -1;
	}
	/* The identity comes from the launcher (through the supervisor, authenticated by the key
	 * only the launcher could hand out); a second HELLO must repeat it exactly. */
	struct sl_store_binding b = {.sandbox_id = h.sandbox_id,
				     .tenant = h.tenant,
				     .agent = h.agent,
				     .task = h.task,
				     .version = h.version,
				     .credential_ref = h.credential_ref,
				     .risk_class = h.risk_class,
				     .runtime = NULL, /* from the record.begin line (runtime_from_begin) */
				     .control = h.control,
				     .key_fingerprint = h.key_id,
				     .started_ns = sl_now_realtime_ns()};
	uint64_t last = 0;
	char head[SL_STORE_HASH_LEN + 1];
	struct known k = {.h = &h};
	struct sl_store_filter flt = {.sandbox_id = sid};
	r = sl_store_each_health(s->st, &flt, known_cb, &k);
	if (r >= 0 && k.found && !k.same) {
		/* A reconnect must claim exactly the identity the sandbox was bound with. */
		reject(s, "identity_conflict");
		send_error(s, c, SL_FRAME_ERR_UNAUTHORIZED, "identity differs from the sandbox's binding");
		return -1;
	}
	if (r >= 0 && !k.found) {
		/* A revoked credential reference binds no new sandbox. A sandbox bound before the
		 * revocation keeps delivering: its remaining evidence (the revocation itself, its end)
		 * must still arrive. */
		int rv = sl_store_is_revoked(s->st, h.credential_ref);
		if (rv == 1) {
			char msg[SL_FRAME_ERROR_MSG_MAX];
			snprintf(msg, sizeof(msg), "credential reference %.200s is revoked", h.credential_ref);
			reject(s, "revoked_credential");
			send_error(s, c, SL_FRAME_ERR_REVOKED, msg);
			logf_(s, "sandbox %s refused: %s", sid, msg);
			return -1;
		}
		r = rv < 0 ? rv : sl_store_bind(s->st, &b);
		if (r >= 0)
			key_id_remember(s, sid, h.key_id);
	}
	if (r < 0) {
		reject(s, "store_error");
		send_error(s, c, SL_FRAME_ERR_INTERNAL, "cannot store the binding");
		return -1;
	}
	struct sandbox *sb = sandbox_get(s, sid);
	if (!sb) {
		reject(s, "too_many_sandboxes");
		return -1;
	}
	if (k.found && k.ended && !sb->ended) {
		/* A complete record delivered again (sightline export after a restart): the sandbox has
		 * ended; its silence after this connection is not blindness. */
		sb->ended = true;
		snprintf(sb->state, sizeof(sb->state), "ended");
	}
	snprintf(sb->risk, sizeof(sb->risk), "%s", h.risk_class);
	snprintf(sb->control, sizeof(sb->control), "%s", h.control);
	snprintf(sb->cred, sizeof(sb->cred), "%s", h.credential_ref);
	sb->connected = true;
	sb->last_frame_ns = sl_now_realtime_ns();
	c->sb = sb;
	c->hello = true;
	s->n_unauth--;
	sl_store_last(s->st, sid, &last, head);
	return send_ack(s, c, last) < 0 ? -1 : 0;
}

struct last_alert {
	int64_t id, started_ns, ended_ns;
};
static int last_alert_cb(void *arg, const struct sl_store_alert *a)
{
	struct last_alert *l = arg;
	l->id = a->id; /* ORDER BY started_ns, id: the last row is the newest */
	l->started_ns = a->started_ns;
	l->ended_ns = a->ended_ns;
	return 0;
}

static int64_t jint(struct json_object *o, const char *k)
{
	struct json_object *v;
	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_int) ? json_object_get_int64(v)
											     : 0;
}

/* control.action revoke, stored just now: the sandbox's own supervisor was told (by root or its
 * uid, on its control socket) to revoke the task's credential. The credential reference revoked is
 * the one this sandbox is BOUND with, never one named in the line: a sandbox's key can only revoke
 * its own task's credential. From now on the gate refuses tasks with it and no new sandbox binds it. */
static void on_revoke(struct server *s, struct sandbox *b, struct json_object *o, int64_t time_ns)
{
	struct json_object *v;
	if (!json_object_object_get_ex(o, "action", &v) || !json_object_is_type(v, json_type_string) ||
	    strcmp(json_object_get_string(v), "revoke") != 0)
		return;
	const char *why = json_object_object_get_ex(o, "reason", &v) && json_object_is_type(v, json_type_string)
				  ? json_object_get_string(v)
				  : NULL;
	char reason[400];
	snprintf(reason, sizeof(reason), "control.action revoke in sandbox %s%s%.256s", b->id, why ? ": " : "",
		 why ? why : "");
	if (!b->cred[0]) {
		logf_(s, "sandbox %s: revoke without a credential reference: nothing to revoke", b->id);
		return;
	}
	int r = sl_store_revoke(s->st, b->cred, time_ns > 0 ? time_ns : sl_now_realtime_ns(), reason);
	logf_(s, "credential reference %s revoked (%s)%s", b->cred, reason, r == 1 ? " (already revoked)" : "");
}

/* export.blind / export.restored, stored just now (so authenticated, checked and in the chain):
 * the supervisor saw no ACK for longer than its limit, typically while this collector was down
 * and could not see anything. Its detection time becomes the start of the sandbox's blind alert:
 * the collector's own alert for the same spell (opened when it came back and saw the silence) is
 * moved to it, not duplicated; the restore closes it. */
static void on_export_event(struct server *s, struct sandbox *b, const struct sl_store_event *e)
{
	bool blind = e->class_len == strlen("export.blind") && !memcmp(e->class_name, "export.blind", e->class_len);
	bool restored = e->class_len == strlen("export.restored") && !memcmp(e->class_name, "export.restored", e->class_len);
	bool control = e->class_len == strlen("control.action") && !memcmp(e->class_name, "control.action", e->class_len);
	if (!blind && !restored && !control)
		return;
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o = tok ? json_tokener_parse_ex(tok, e->line, (int)e->line_len) : NULL;
	if (tok)
		json_tokener_free(tok);
	if (!o)
		return;
	if (control) {
		on_revoke(s, b, o, e->time_ns);
		json_object_put(o);
		return;
	}
	struct last_alert la = {0};
	struct sl_store_filter flt = {.sandbox_id = b->id, .kind = "blind"};
	sl_store_each_alert(s->st, &flt, last_alert_cb, &la);
	if (blind) {
		int64_t detected = jint(o, "detected_ns"), last_ack = jint(o, "last_ack_ns");
		char detail[256];
		snprintf(detail, sizeof(detail),
			 "detected by the supervisor: no ACK for %lld ms (limit %lld ms), last acknowledged seq %lld, "
			 "backlog %lld",
			 (long long)((detected - last_ack) / 1000000), (long long)jint(o, "max_blind_ms"),
			 (long long)jint(o, "last_ack_seq"), (long long)jint(o, "backlog"));
		if (detected > 0 && la.id && (la.ended_ns == 0 || la.ended_ns >= detected)) {
			/* The same spell: the collector's own alert, moved to the supervisor's detection. */
			sl_store_alert_restart(s->st, la.id, detected, detail);
		} else if (detected > 0) {
			int64_t id = sl_store_alert_open(s->st, b->id, "blind", !strcmp(b->risk, "high") ? "critical" : "warning",
							 detected, detail);
			if (id > 0 && id != b->alert_id)
				b->reported_alert_id = id;
		}
		logf_(s, "sandbox %s: blind (%s)", b->id, detail);
	} else {
		int64_t restored_ns = jint(o, "restored_ns");
		if (restored_ns > 0 && la.id && la.ended_ns == 0) {
			sl_store_alert_close(s->st, la.id, restored_ns);
			if (la.id == b->reported_alert_id)
				b->reported_alert_id = 0;
		}
		logf_(s, "sandbox %s: export restored (reported by the supervisor)", b->id);
	}
	json_object_put(o);
}

/* The binding's runtime comes from the sandbox's own record.begin (checked like every line): the
 * HELLO says nothing about it. Bounded: a manifest is small; a line that does not parse leaves the
 * binding as it was. */
static void runtime_from_begin(struct server *s, const char *sid, const char *line, size_t len)
{
	if (len > 1 << 20)
		return;
	struct json_tokener *tok = json_tokener_new();
	json_object *o = tok ? json_tokener_parse_ex(tok, line, (int)len) : NULL;
	json_object *m, *v;
	const char *f[3] = {NULL, NULL, NULL};
	static const char *const keys[3] = {"runtime", "runtime_version", "sensor_version"};
	if (o && json_object_object_get_ex(o, "manifest", &m))
		for (int i = 0; i < 3; i++)
			if (json_object_object_get_ex(m, keys[i], &v) && json_object_is_type(v, json_type_string))
				f[i] = json_object_get_string(v);
	if (f[0] && sl_store_set_runtime(s->st, sid, f[0], f[1], f[2]) < 0)
		logf_(s, "store: %s", sl_store_errmsg(s->st));
	json_object_put(o);
	if (tok)
		json_tokener_free(tok);
}

/* The built-in detections on a line just stored: a canary read, a blocked connection. A scheduled
 * canary's read is the scheduler's (no alert); anything else opens an alert for the sandbox. */
static void detect(struct server *s, struct sandbox *sb, const struct sl_store_event *ev, int64_t now_ns)
{
	struct sl_detection d;
	if (ev->no_detection || !sl_detect_line(ev->line, ev->line_len, &d))
		return;
	if (!strcmp(d.kind, "canary-read") && sl_canary_seen(s->canary, d.path, now_ns))
		return;
	sl_store_alert_open(s->st, sb->id, d.kind, "critical", ev->time_ns, d.detail);
	logf_(s, "sandbox %s: %s: %s", sb->id, d.kind, d.detail);
}

/* The histogram bucket of a latency of us microseconds: 0..3 hold 0..3 us exactly; from 4 us on,
 * bucket 4e+m holds [(4+m) << (e-2), (5+m) << (e-2)) for the leading bit e >= 2 and the next two
 * bits m (so buckets 4..7 stay empty). The last bucket takes everything from 2^31 us on. */
static unsigned lat_bucket_of(int64_t us)
{
	if (us < 4)
		return us < 0 ? 0 : (unsigned)us;
	unsigned e = 63u - (unsigned)__builtin_clzll((unsigned long long)us);
	if (e >= LAT_BUCKETS / 4)
		return LAT_BUCKETS - 1;
	return 4 * e + (unsigned)((us >> (e - 2)) & 3);
}

/* The upper bound (exclusive, microseconds) of bucket b; 0 for the unused buckets 4..7. */
static uint64_t lat_bucket_upper_us(unsigned b)
{
	if (b < 4)
		return b + 1;
	unsigned e = b / 4, m = b % 4;
	return e < 2 ? 0 : (uint64_t)(5 + m) << (e - 2);
}

/* The line checker has checked batch b of connection c (not closed): store the good lines, count
 * and acknowledge. Returns 0, or -1 to close the connection. */
static int finish_events(struct server *s, struct conn *c, struct sl_checked_batch *b)
{
	size_t n = b->n;
	const char *bad = b->bad;
	if (b->reject)
		reject(s, b->reject);
	uint64_t last = 0;
	size_t dups = 0;
	int r = n ? sl_store_append_events(s->st, c->sb->id, b->ev, n, sl_now_realtime_ns(), &last, &dups) : 0;
	if (!n)
		sl_store_last(s->st, c->sb->id, &last, NULL);
	if (r == -EPROTO) {
		reject(s, "out_of_order");
		bad = sl_store_errmsg(s->st);
	} else if (r < 0) {
		reject(s, "store_error");
		logf_(s, "store: %s", sl_store_errmsg(s->st));
		send_error(s, c, SL_FRAME_ERR_INTERNAL, "cannot store");
		return -1;
	}
	if (dups)
		reject(s, "duplicate");
	s->duplicates += dups;
	int64_t now_ns = sl_now_realtime_ns();
	if (n)
		c->sb->delay_ns = now_ns - b->ev[n - 1].time_ns;
	for (size_t i = 0; i < n; i++) {
		if (i >= dups && b->ev[i].seq <= last) { /* inserted now (resends come first) */
			s->events_received++;
			s->lat_bucket[lat_bucket_of((now_ns - b->ev[i].time_ns) / 1000)]++;
			s->lat_count++;
			s->lat_sum_s += (double)(now_ns - b->ev[i].time_ns) / 1e9;
			detect(s, c->sb, &b->ev[i], now_ns);
		}
	}
	for (size_t i = dups; i < n && b->ev[i].seq <= last; i++)
		if ((b->ev[i].class_len > 7 && !memcmp(b->ev[i].class_name, "export.", 7)) ||
		    (b->ev[i].class_len == 14 && !memcmp(b->ev[i].class_name, "control.action", 14)))
			on_export_event(s, c->sb, &b->ev[i]);
	for (size_t i = dups; r == 0 && i < n; i++)
		if (b->ev[i].seq == 1 && b->ev[i].seq <= last && !strncmp(b->ev[i].class_name, "record.begin\"", 13))
			runtime_from_begin(s, c->sb->id, b->ev[i].line, b->ev[i].line_len);
	if (b->ended && r == 0 && !bad) {
		c->sb->ended = true;
		int64_t end = sl_now_realtime_ns();
		sl_store_end(s->st, c->sb->id, end);
		/* An ended sandbox is no longer watched: close what was open for it. */
		if (c->sb->alert_id) {
			sl_store_alert_close(s->st, c->sb->alert_id, end);
			c->sb->alert_id = 0;
		}
		if (c->sb->reported_alert_id) {
			sl_store_alert_close(s->st, c->sb->reported_alert_id, end);
			c->sb->reported_alert_id = 0;
		}
	}
	/* ACK only now: after the commit (sl_store_append_events returned). */
	if (send_ack(s, c, last) < 0)
		return -1;
	if (bad) {
		/* What came before the bad line is stored and acknowledged; then ERROR and close, as
		 * docs/protocol.md promises: the sender reconnects and resumes after the ACK. */
		send_error(s, c, SL_FRAME_ERR_PROTOCOL, bad);
		return -1;
	}
	return 0;
}

/* A batch is back from the line checker: finish it unless its connection was closed meanwhile
 * (then nothing of it is stored or acknowledged: the sender resends after its last ACK). */
static void on_checked(struct server *s, struct sl_checked_batch *b)
{
	struct conn *c = b->owner;
	c->in_check--;
	if (!c->closed && finish_events(s, c, b) < 0)
		conn_close(s, c);
	sl_linecheck_put(s->lc, b);
}

static void drain_checked(struct server *s)
{
	struct sl_checked_batch *b;
	while ((b = sl_linecheck_done(s->lc, false)))
		on_checked(s, b);
}

/* Hand an authenticated EVENTS frame of c to the line checker (a copy of its payload: the receive
 * buffer moves on). With every batch in flight, first finish the oldest one here, which may close
 * c. Returns 0, 1 if c was closed meanwhile, or -errno. */
static int submit_events(struct server *s, struct conn *c, const struct sl_frame *f)
{
	int err = 0;
	struct sl_checked_batch *b;
	while (!(b = sl_linecheck_get(s->lc, f->payload_len, f->event_count, &err))) {
		if (err != -EBUSY)
			return err;
		struct sl_checked_batch *d = sl_linecheck_done(s->lc, true);
		if (d)
			on_checked(s, d);
		if (c->closed)
			return 1;
	}
	memcpy(b->payload, f->payload, f->payload_len);
	b->owner = c;
	snprintf(b->sandbox_id, sizeof(b->sandbox_id), "%s", c->sb->id);
	c->in_check++;
	sl_linecheck_submit(s->lc, b);
	return 0;
}

static int load_cb(void *arg, const struct sl_store_health *h)
{
	struct server *s = arg;
	if (!strcmp(h->state, "ended") || h->binding.ended_ns)
		return 0;
	struct sandbox *b = sandbox_get(s, h->binding.sandbox_id);
	if (!b)
		return 0;
	snprintf(b->risk, sizeof(b->risk), "%s", h->binding.risk_class ? h->binding.risk_class : "medium");
	snprintf(b->control, sizeof(b->control), "%s", h->binding.control ? h->binding.control : "none");
	snprintf(b->cred, sizeof(b->cred), "%s", h->binding.credential_ref ? h->binding.credential_ref : "");
	int64_t last = h->last_frame_ns > h->last_heartbeat_ns ? h->last_frame_ns : h->last_heartbeat_ns;
	b->last_frame_ns = last ? last : h->binding.started_ns;
	snprintf(b->state, sizeof(b->state), "%s", h->state);
	if (strcmp(h->state, "healthy") != 0) /* its open alert (dedup returns the existing id) */
		b->alert_id = sl_store_alert_open(s->st, b->id, h->state, "warning", b->last_frame_ns, NULL);
	return 0;
}

/* Close c for a fault in its stream, but first finish its batches still at the line checker, so
 * that what it sent before the fault is stored and acknowledged as if checked inline. */
static void close_after_checks(struct server *s, struct conn *c)
{
	while (c->in_check && !c->closed) {
		struct sl_checked_batch *d = sl_linecheck_done(s->lc, true);
		if (!d)
			break;
		on_checked(s, d);
	}
	conn_close(s, c);
}

static void on_readable(struct server *s, struct conn *c)
{
	if (c->closed)
		return;
	for (;;) {
		if (c->rlen == SL_FRAME_MAX_FRAME) {
			reject(s, "oversize");
			close_after_checks(s, c);
			return;
		}
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, SL_FRAME_MAX_FRAME - c->rlen, MSG_DONTWAIT);
		if (n == 0) {
			if (c->rlen) {
				struct sl_frame f;
				size_t used;
				if (sl_frame_decode_eof(c->rbuf, c->rlen, &c->ctx, &f, &used) == -EBADMSG)
					reject(s, sl_frame_reject_name(f.reject));
			}
			close_after_checks(s, c);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			close_after_checks(s, c);
			return;
		}
		c->rlen += (size_t)n;
		size_t off = 0; /* bytes of rbuf consumed: moved out once, after the frames in it */
		for (;;) {
			size_t used = 0;
			if (!c->hello) {
				int r = on_hello(s, c, &used);
				if (r == 1)
					break;
				if (r < 0) {
					close_after_checks(s, c);
					return;
				}
			} else {
				struct sl_frame f;
				int r = sl_frame_decode(c->rbuf + off, c->rlen - off, &c->ctx, &f, &used);
				if (r == -EAGAIN)
					break;
				if (r < 0) {
					reject(s, r == -EBADMSG ? sl_frame_reject_name(f.reject) : "bad_frame");
					close_after_checks(s, c);
					return;
				}
				sl_frame_ctx_accept(&c->ctx, &f);
				s->frames_received++;
				c->sb->last_frame_ns = sl_now_realtime_ns();
				if (f.type == SL_FRAME_EVENTS) {
					int er = submit_events(s, c, &f);
					if (er == 1)
						return; /* closed while an older batch was finished */
					if (er < 0) {
						reject(s, "store_error");
						send_error(s, c, SL_FRAME_ERR_INTERNAL, "out of memory");
						close_after_checks(s, c);
						return;
					}
				} else if (f.type == SL_FRAME_HEARTBEAT) {
					struct sl_frame_heartbeat hb;
					if (sl_frame_heartbeat_parse(f.payload, f.payload_len, &hb) < 0) {
						reject(s, "bad_payload");
						close_after_checks(s, c);
						return;
					}
					struct sl_store_counters sc = {hb.emitted, hb.recorded, hb.exported,
								       hb.acked,   hb.dropped,	hb.backlog};
					sl_store_heartbeat(s->st, c->sb->id, &sc, sl_now_realtime_ns());
					if (hb.backlog == 0) {
						c->sb->backlog_since_ns = 0;
						c->sb->delay_ns = 0; /* caught up: nothing is late any more */
					}
					else if (!c->sb->backlog_since_ns)
						c->sb->backlog_since_ns = sl_now_realtime_ns();
					/* Answer every heartbeat: the supervisor's own watchdog measures how long
					 * the collector has been silent. */
					uint64_t last = 0;
					sl_store_last(s->st, c->sb->id, &last, NULL);
					if (send_ack(s, c, last) < 0) {
						close_after_checks(s, c);
						return;
					}
				}
			}
			off += used;
		}
		if (off) {
			memmove(c->rbuf, c->rbuf + off, c->rlen - off);
			c->rlen -= off;
		}
	}
}

static unsigned max_blind(const struct server *s, const char *risk)
{
	if (!strcmp(risk, "high"))
		return s->cfg->max_blind_ms_high;
	if (!strcmp(risk, "low"))
		return s->cfg->max_blind_ms_low;
	return s->cfg->max_blind_ms_medium;
}

/* The control path: ask the sandbox's supervisor to stop it. Only a socket named for that very
 * sandbox (".../<sandbox_id>.ctl") is ever dialled, whatever a HELLO claimed. */
static bool control_path_ok(const struct sandbox *b)
{
	size_t n = strlen(b->control), idl = strlen(b->id);
	return n >= idl + 5 && b->control[0] == '/' && strcmp(b->control + n - 4, ".ctl") == 0 &&
	       strncmp(b->control + n - 4 - idl, b->id, idl) == 0 && b->control[n - 5 - idl] == '/';
}

/* Is the sandbox's supervisor still there? Connect to its control socket (only ".../<id>.ctl")
 * and hang up at once. Returns 1 if it is gone (ECONNREFUSED: nobody listens on the socket;
 * ENOENT: the socket was removed), 0 if it answered, -errno if we cannot tell (EACCES, ...). */
static int control_gone(const struct sandbox *b)
{
	if (!control_path_ok(b))
		return -EINVAL;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", b->control);
	int r = connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0 ? -errno : 0;
	close(fd);
	if (r == -ECONNREFUSED || r == -ENOENT)
		return 1;
	return r == 0 || r == -EAGAIN ? 0 : r; /* EAGAIN: a full backlog, so someone listens */
}

/* A blind sandbox whose supervisor is provably gone (it died without record.end): nothing more
 * can arrive, so it stops holding the gate closed. It ends, with a supervisor_lost alert. */
static void supervisor_lost(struct server *s, struct sandbox *b, int64_t now)
{
	char detail[400];
	snprintf(detail, sizeof(detail),
		 "control socket %.256s does not answer (the supervisor is gone without record.end); last seq stored "
		 "is the end of its evidence",
		 b->control);
	sl_store_alert_open(s->st, b->id, "supervisor_lost", "critical", now, detail);
	if (b->alert_id) {
		sl_store_alert_close(s->st, b->alert_id, now);
		if (!strcmp(b->state, "blind") && b->blind_since_ns)
			s->blind_seconds += (double)(now - b->blind_since_ns) / 1e9;
		b->alert_id = 0;
	}
	if (b->reported_alert_id) {
		sl_store_alert_close(s->st, b->reported_alert_id, now);
		b->reported_alert_id = 0;
	}
	sl_store_end(s->st, b->id, now);
	b->ended = true;
	snprintf(b->state, sizeof(b->state), "ended");
	logf_(s, "sandbox %s: supervisor lost (%s)", b->id, detail);
}

static int control_stop(struct server *s, struct sandbox *b, const char *why)
{
	if (!control_path_ok(b))
		return -EINVAL;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", b->control);
	if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0) {
		int r = -errno;
		if (fd >= 0)
			close(fd);
		return r;
	}
	char msg[256], resp[64] = "";
	int ml = snprintf(msg, sizeof(msg), "stop %s\n", why);
	struct timeval tv = {.tv_sec = 0, .tv_usec = 500000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t got = -1;
	if (send(fd, msg, (size_t)ml, MSG_NOSIGNAL) == ml)
		got = recv(fd, resp, sizeof(resp) - 1, 0);
	close(fd);
	(void)s;
	return got > 0 && !strncmp(resp, "ok", 2) ? 0 : -EPROTO;
}

/* Liveness, every tick: a running sandbox silent past its risk class's limit is blind (an alert
 * with its start time, closed with its end time when evidence flows again); delivery behind by
 * more than max_delay is lagging. */
static void tick(struct server *s)
{
	int64_t now = sl_now_realtime_ns();
	sl_canary_tick(s->canary, s->st, now);
	for (size_t i = 0; i < s->n_sbx; i++) {
		struct sandbox *b = &s->sbx[i];
		if (b->ended)
			continue;
		if (!strcmp(b->state, "blind") && !b->connected && now >= b->next_probe_ns) {
			/* Blind and disconnected: is anybody still there to deliver? Once a second. */
			b->next_probe_ns = now + 1000000000LL;
			if (control_gone(b) == 1) {
				supervisor_lost(s, b, now);
				continue;
			}
		}
		const char *want = "healthy";
		int64_t silent_ms = (now - b->last_frame_ns) / 1000000;
		if (silent_ms > (int64_t)max_blind(s, b->risk))
			want = "blind";
		else if (b->delay_ns / 1000000 > (int64_t)s->cfg->max_delay_ms)
			want = "lagging"; /* evidence arrives, but later than the allowed delivery delay */
		if (!strcmp(want, b->state))
			continue;
		if (b->alert_id) {
			sl_store_alert_close(s->st, b->alert_id, now);
			if (!strcmp(b->state, "blind") && b->blind_since_ns)
				s->blind_seconds += (double)(now - b->blind_since_ns) / 1e9;
			logf_(s, "sandbox %s: %s ended", b->id, b->state);
			b->alert_id = 0;
		}
		snprintf(b->state, sizeof(b->state), "%s", want);
		sl_store_set_state(s->st, b->id, want, now);
		if (strcmp(want, "healthy") != 0) {
			char detail[128];
			if (!strcmp(want, "blind"))
				snprintf(detail, sizeof(detail), "no evidence for %lld ms (risk %s allows %u ms)",
					 (long long)silent_ms, b->risk, max_blind(s, b->risk));
			else
				snprintf(detail, sizeof(detail), "events arrive %lld ms after the action (allowed %u ms)",
					 (long long)(b->delay_ns / 1000000), s->cfg->max_delay_ms);
			int64_t start = !strcmp(want, "blind") ? b->last_frame_ns : now;
			if (!strcmp(want, "blind"))
				b->blind_since_ns = b->last_frame_ns;
			b->alert_id = sl_store_alert_open(s->st, b->id, want, !strcmp(b->risk, "high") ? "critical" : "warning",
							  start, detail);
			logf_(s, "sandbox %s: %s (%s)", b->id, want, detail);
			if (!strcmp(want, "blind") && !strcmp(b->risk, "high")) {
				/* High risk and blind: stop it through its supervisor's control path. */
				int cr = control_stop(s, b, "collector: high-risk sandbox blind past its limit");
				sl_store_alert_open(s->st, b->id, cr == 0 ? "stopped" : "stop-failed", "critical", now,
						    cr == 0 ? "stopped through the control path" : strerror(-cr));
				logf_(s, "sandbox %s: stop through %s: %s", b->id, b->control, cr == 0 ? "done" : strerror(-cr));
			}
		}
	}
}

/* Connections, every tick: deadlines for the handshake and for operator/metrics requests, and a
 * keep-alive ACK (the stored head, committed) to each idle authenticated connection, so that a
 * supervisor's watchdog (`sightline run --max-blind-ms`) hears from a healthy collector at least
 * every KEEPALIVE_ACK_MS plus a tick, not only when it answers the once-a-second heartbeat. At most
 * one such ACK per connection per tick: the rate stays bounded. */
static void tick_conns(struct server *s)
{
	int64_t now = sl_now_monotonic_ns();
	for (size_t i = 0; i < s->n_slots;) {
		struct conn *c = s->conns[i];
		int64_t age_ms = (now - c->opened_ns) / 1000000;
		if (c->kind == CONN_INGEST && !c->hello && age_ms >= HANDSHAKE_MS) {
			reject(s, "handshake_timeout");
			conn_close(s, c); /* swaps another connection into slot i */
			continue;
		}
		if (c->kind != CONN_INGEST && age_ms >= CLIENT_MS) {
			conn_close(s, c);
			continue;
		}
		if (c->kind == CONN_INGEST && c->hello && (now - c->last_ack_ns) / 1000000 >= KEEPALIVE_ACK_MS) {
			uint64_t last = 0;
			if (sl_store_last(s->st, c->sb->id, &last, NULL) < 0 || send_ack(s, c, last) < 0) {
				conn_close(s, c);
				continue;
			}
		}
		i++;
	}
}

static int risk_rank(const char *r)
{
	return !strcmp(r, "high") ? 3 : !strcmp(r, "low") ? 1 : 2;
}

/* "GATE <class>" or "GATE <class> <credential_ref>" (the rest of the line, 1..256 bytes). */
static bool gate_request(char *req, const char **cls, const char **cred)
{
	if (strncmp(req, "GATE ", 5) != 0)
		return false;
	char *c = req + 5, *sp = strchr(c, ' ');
	if (sp) {
		*sp = '\0';
		if (!sp[1] || strlen(sp + 1) > 256)
			return false;
		*cred = sp + 1;
	}
	*cls = c;
	return !strcmp(c, "high") || !strcmp(c, "medium") || !strcmp(c, "low");
}

/* The dispatch gate: closed for a risk class while any running sandbox of that class or above is
 * blind. Answered on the operator socket to "GATE <class> [<credential_ref>]\n" with "open\n",
 * "closed <why>\n", or "revoked credential reference <ref> is revoked\n" (never open for a revoked one).
 * Only root or the collector's own uid may ask (SO_PEERCRED, checked at accept): the answer steers
 * dispatch. request is the request line without its newline. */
static void admin_answer(struct server *s, const char *request, char *resp, size_t cap)
{
	char req[CLIENT_REQ_MAX + 1];
	const char *gcls = NULL, *gcred = NULL;
	snprintf(req, sizeof(req), "%s", request);
	if (!strcmp(req, "DB")) {
		/* The readers (status, events, alerts --collector) open the store itself,
		 * read-only, concurrently with us (WAL). */
		snprintf(resp, cap, "db %s\n", s->cfg->db_path);
	} else if (!gate_request(req, &gcls, &gcred)) {
		snprintf(resp, cap, "error: expected GATE high|medium|low [CREDENTIAL_REF]\n");
	} else if (gcred && sl_store_is_revoked(s->st, gcred) == 1) {
		/* A revoked credential reference starts nothing, whatever the visibility. */
		snprintf(resp, cap, "revoked credential reference %.200s is revoked\n", gcred);
	} else {
		snprintf(resp, cap, "open\n");
		int want = risk_rank(gcls);
		for (size_t i = 0; !s->cfg->gate_disabled && i < s->n_sbx; i++) {
			struct sandbox *b = &s->sbx[i];
			if (!b->ended && !strcmp(b->state, "blind") && risk_rank(b->risk) >= want) {
				snprintf(resp, cap, "closed sandbox %s (risk %s) blind since %lld\n", b->id, b->risk,
					 (long long)b->last_frame_ns);
				break;
			}
		}
	}
}

struct mbuf {
	char *p;
	size_t len, cap;
};
static void mput(struct mbuf *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mput(struct mbuf *m, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(m->p + m->len, m->cap - m->len, fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < m->cap - m->len)
		m->len += (size_t)n;
}

static int reject_cb(void *arg, const char *reason, uint64_t count)
{
	mput(arg, "sightline_frames_rejected_total{reason=\"%s\"} %llu\n", reason, (unsigned long long)count);
	return 0;
}

struct hsum {
	uint64_t dropped;
};
static int drop_cb(void *arg, const struct sl_store_health *h)
{
	((struct hsum *)arg)->dropped += h->counters.dropped;
	return 0;
}

/* GET /metrics, Prometheus text format, loopback only. One request per connection. Sets c->resp
 * (the whole HTTP response) or leaves it NULL if out of memory. */
static void metrics_answer(struct server *s, struct conn *c)
{
	const char *req = c->req;
	{
		static char body[65536];
		struct mbuf m = {.p = body, .cap = sizeof(body)};
		unsigned blind = 0, lagging = 0, healthy = 0;
		for (size_t i = 0; i < s->n_sbx; i++)
			if (!s->sbx[i].ended) {
				blind += !strcmp(s->sbx[i].state, "blind");
				lagging += !strcmp(s->sbx[i].state, "lagging");
				healthy += !strcmp(s->sbx[i].state, "healthy");
			}
		mput(&m, "# TYPE sightline_events_received_total counter\nsightline_events_received_total %llu\n",
		     (unsigned long long)s->events_received);
		mput(&m, "# TYPE sightline_frames_received_total counter\nsightline_frames_received_total %llu\n",
		     (unsigned long long)s->frames_received);
		mput(&m, "# TYPE sightline_frames_rejected_total counter\n");
		sl_store_each_reject(s->st, reject_cb, &m);
		mput(&m, "# TYPE sightline_sandboxes gauge\nsightline_sandboxes{state=\"healthy\"} %u\n"
			 "sightline_sandboxes{state=\"lagging\"} %u\nsightline_sandboxes{state=\"blind\"} %u\n",
		     healthy, lagging, blind);
		mput(&m, "# TYPE sightline_blind_seconds_total counter\nsightline_blind_seconds_total %.3f\n", s->blind_seconds);
		struct hsum hs = {0};
		struct sl_store_filter all = {0};
		sl_store_each_health(s->st, &all, drop_cb, &hs);
		mput(&m, "# TYPE sightline_sensor_dropped_total counter\nsightline_sensor_dropped_total %llu\n",
		     (unsigned long long)hs.dropped);
		mput(&m, "# TYPE sightline_ingest_latency_seconds histogram\n");
		uint64_t cum = 0;
		for (unsigned b = 0; b + 1 < LAT_BUCKETS; b++) {
			cum += s->lat_bucket[b];
			/* Latencies are counted in whole microseconds, truncated: every one in bucket b
			 * was below its upper bound. */
			if (lat_bucket_upper_us(b))
				mput(&m, "sightline_ingest_latency_seconds_bucket{le=\"%.6f\"} %llu\n",
				     (double)lat_bucket_upper_us(b) / 1e6, (unsigned long long)cum);
		}
		mput(&m, "sightline_ingest_latency_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)s->lat_count);
		mput(&m, "sightline_ingest_latency_seconds_sum %.6f\nsightline_ingest_latency_seconds_count %llu\n",
		     s->lat_sum_s, (unsigned long long)s->lat_count);
		char head[256];
		bool ok = !strncmp(req, "GET /metrics ", 13) || !strncmp(req, "GET /metrics\r", 13);
		int hl = snprintf(head, sizeof(head),
				  "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %zu\r\n"
				  "Connection: close\r\n\r\n",
				  ok ? "200 OK" : "404 Not Found", ok ? m.len : (size_t)0);
		size_t bl = ok ? m.len : 0;
		c->resp = malloc((size_t)hl + bl);
		if (!c->resp)
			return;
		memcpy(c->resp, head, (size_t)hl);
		memcpy(c->resp + hl, body, bl);
		c->resp_len = (size_t)hl + bl;
	}
}

/* Write what is left of c's response without blocking; close when done or when the peer is gone.
 * Returns true if c is still open (waiting for EPOLLOUT). */
static bool client_flush(struct server *s, struct conn *c)
{
	while (c->resp_off < c->resp_len) {
		ssize_t w = send(c->fd, c->resp + c->resp_off, c->resp_len - c->resp_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
			epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev);
			return true;
		}
		if (w <= 0)
			break;
		c->resp_off += (size_t)w;
	}
	conn_close(s, c);
	return false;
}

static void client_respond_text(struct server *s, struct conn *c, const char *text)
{
	c->resp = strdup(text);
	c->resp_len = c->resp ? strlen(text) : 0;
	c->resp_off = 0;
	client_flush(s, c);
}

/* An operator or metrics connection is readable (or writable again). The request is complete at
 * its first newline (operator) or its blank line (HTTP); what arrives after it is ignored. */
static void on_client(struct server *s, struct conn *c, uint32_t events)
{
	if (c->closed)
		return;
	if (c->resp) {
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			client_flush(s, c);
		return;
	}
	for (;;) {
		ssize_t n = recv(c->fd, c->req + c->req_len, CLIENT_REQ_MAX - c->req_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return; /* more later, or the tick's deadline */
		if (n <= 0) {
			conn_close(s, c);
			return;
		}
		c->req_len += (size_t)n;
		c->req[c->req_len] = '\0';
		bool full = c->req_len == CLIENT_REQ_MAX;
		if (c->kind == CONN_ADMIN) {
			char *nl = strchr(c->req, '\n');
			if (!nl && !full)
				continue;
			if (nl)
				*nl = '\0';
			char resp[512];
			admin_answer(s, c->req, resp, sizeof(resp));
			client_respond_text(s, c, resp);
			return;
		}
		if (!full && !strstr(c->req, "\r\n\r\n") && !strstr(c->req, "\n\n"))
			continue;
		metrics_answer(s, c);
		if (!c->resp) {
			conn_close(s, c);
			return;
		}
		client_flush(s, c);
		return;
	}
}

/* Accept operator (kind CONN_ADMIN) or metrics connections: non-blocking, capped, each with a
 * deadline (tick). The operator's peer must be root or our own uid. */
static void on_client_accept(struct server *s, int lfd, enum conn_kind kind)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (s->n_clients[kind] >= MAX_CLIENTS) {
			/* Dropped, not queued: a local user holding many connections open gets only
			 * them refused, and ingest goes on. */
			reject(s, kind == CONN_ADMIN ? "too_many_operator_connections" : "too_many_metrics_connections");
			close(fd);
			continue;
		}
		struct conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->kind = kind;
		c->fd = fd;
		s->n_clients[kind]++;
		conn_register(s, c);
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev);
		if (kind == CONN_ADMIN) {
			struct ucred cr;
			socklen_t cl = sizeof(cr);
			if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
			    (cr.uid != 0 && cr.uid != geteuid())) {
				client_respond_text(s, c, "denied\n");
				continue;
			}
		}
		on_client(s, c, EPOLLIN); /* the request may be there already */
	}
}

static int listen_on(struct server *s, const char *addr)
{
	struct sockaddr_storage ss;
	int len = sl_addr_parse(addr, &ss);
	if (len < 0)
		return -EINVAL;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_UNIX)
		unlink(((struct sockaddr_un *)&ss)->sun_path); /* a stale socket of a previous run */
	if (bind(fd, (struct sockaddr *)&ss, (socklen_t)len) < 0 || listen(fd, 128) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	if (ss.ss_family == AF_UNIX)
		/* Any local supervisor may connect: a connection proves nothing until its frames
		 * carry a valid tag. */
		chmod(((struct sockaddr_un *)&ss)->sun_path, 0666);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)fd << 2 | 1};
	epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev);
	return fd;
}

static void on_accept(struct server *s, int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (s->n_conns >= MAX_CONNS) {
			reject(s, "too_many_connections");
			close(fd);
			continue;
		}
		if (s->n_unauth >= MAX_UNAUTH) {
			/* Connections that have not proven a key yet are cheap to open: cap them by
			 * closing the OLDEST waiting one, not by refusing the new one. A supervisor sends
			 * its HELLO within milliseconds of the CHALLENGE, so a flood of silent connections
			 * evicts mostly its own and cannot lock supervisors out. */
			struct conn *old = NULL;
			for (size_t i = 0; i < s->n_slots; i++) {
				struct conn *o = s->conns[i];
				if (o->kind == CONN_INGEST && !o->hello && (!old || o->opened_ns < old->opened_ns))
					old = o;
			}
			reject(s, "too_many_unauthenticated");
			if (!old) {
				close(fd);
				continue;
			}
			conn_close(s, old);
		}
		struct conn *c = calloc(1, sizeof(*c));
		uint8_t *rb = malloc(SL_FRAME_MAX_FRAME);
		if (!c || !rb) {
			free(c);
			free(rb);
			close(fd);
			continue;
		}
		c->kind = CONN_INGEST;
		c->fd = fd;
		c->rbuf = rb;
		sl_frame_ctx_init(&c->ctx, SL_FRAME_ROLE_COLLECTOR, NULL);
		sl_frame_ctx_new_challenge(&c->ctx);
		s->n_conns++;
		s->n_unauth++;
		conn_register(s, c);
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev);
		if (send_frame(s, c, SL_FRAME_CHALLENGE, c->ctx.challenge, SL_FRAME_CHALLENGE_LEN) < 0)
			conn_close(s, c);
	}
}

int sl_collectd_run(const struct sl_collectd_cfg *cfg)
{
	struct server *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = cfg;
	int r = sl_store_open(cfg->db_path, &s->st);
	if (r < 0) {
		logf_(s, "cannot open the store %s: %s", cfg->db_path, sl_store_errmsg(NULL));
		free(s);
		return r;
	}
	s->wbuf = malloc(SL_FRAME_MAX_FRAME);
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	int lc_efd = -1;
	if (!s->wbuf || s->ep < 0 || sl_linecheck_start(&s->lc, &lc_efd) < 0) {
		r = -ENOMEM;
		goto out;
	}
	struct epoll_event lcev = {.events = EPOLLIN, .data.u64 = 4};
	epoll_ctl(s->ep, EPOLL_CTL_ADD, lc_efd, &lcev);
	/* Sandboxes that were running when the collector stopped: watch them from their last
	 * evidence, so the time the collector itself was down counts as blind, not as nothing. */
	struct sl_store_filter running = {0};
	sl_store_each_health(s->st, &running, load_cb, s);
	s->key_ids = calloc(MAX_KEY_IDS, sizeof(*s->key_ids));
	sl_store_each_health(s->st, &running, key_id_load_cb, s);
	/* Judge them at once, before any supervisor can reconnect: a sandbox that was silent past its
	 * limit while the collector was down is blind (an alert from its last evidence), whether or
	 * not its supervisor's HELLO beats the first tick. */
	tick(s);
	int lfds[SL_COLLECTD_MAX_LISTEN];
	for (int i = 0; i < cfg->n_listen; i++) {
		lfds[i] = listen_on(s, cfg->listen[i]);
		if (lfds[i] < 0) {
			r = lfds[i];
			logf_(s, "cannot listen on %s: %s", cfg->listen[i], strerror(-r));
			goto out;
		}
		logf_(s, "listening on %s", cfg->listen[i]);
	}
	if (cfg->admin) {
		int afd = listen_on(s, cfg->admin);
		if (afd < 0 || strncmp(cfg->admin, "unix:", 5) != 0) {
			r = afd < 0 ? afd : -EINVAL;
			logf_(s, "cannot listen on the operator socket %s (unix only): %s", cfg->admin, strerror(-r));
			goto out;
		}
		/* Re-register as an operator listener, and only the owner may connect. */
		struct epoll_event aev = {.events = EPOLLIN, .data.u64 = (uint64_t)afd << 2 | 3};
		epoll_ctl(s->ep, EPOLL_CTL_MOD, afd, &aev);
		chmod(cfg->admin + 5, 0600);
		logf_(s, "operator socket %s", cfg->admin);
	}
	if (cfg->metrics) {
		int mfd = strncmp(cfg->metrics, "tcp:", 4) == 0 ? listen_on(s, cfg->metrics) : -EINVAL;
		if (mfd < 0) {
			r = mfd;
			logf_(s, "cannot serve metrics on %s (tcp:127.x.x.x:PORT only): %s", cfg->metrics, strerror(-r));
			goto out;
		}
		struct epoll_event mev = {.events = EPOLLIN, .data.u64 = (uint64_t)mfd << 2 | 2};
		epoll_ctl(s->ep, EPOLL_CTL_MOD, mfd, &mev);
		logf_(s, "metrics on http://%s/metrics", cfg->metrics + 4);
	}
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	struct itimerspec its = {.it_interval = {0, 100000000}, .it_value = {0, 100000000}};
	timerfd_settime(tfd, 0, &its, NULL);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 2};
	epoll_ctl(s->ep, EPOLL_CTL_ADD, sfd, &ev);
	ev.data.u64 = 3;
	epoll_ctl(s->ep, EPOLL_CTL_ADD, tfd, &ev);
	if (cfg->gate_disabled)
		logf_(s, "dispatch gate DISABLED: it answers open whatever is blind (negative testing only)");
	if (cfg->canary_every_ms) {
		struct sl_canary_cfg cc = {.every_ms = cfg->canary_every_ms,
					   .collector = cfg->listen[0],
					   .secret_path = cfg->secret_path,
					   .policy = cfg->canary_policy,
					   .log = cfg->log};
		r = sl_canary_sched_new(&cc, &s->canary);
		if (r < 0) {
			logf_(s, "cannot schedule canaries: %s", strerror(-r));
			goto out;
		}
		logf_(s, "scheduled canaries every %u ms", cfg->canary_every_ms);
	}
	logf_(s, "collector ready (store %s)", cfg->db_path);
	for (bool stop = false; !stop;) {
		struct epoll_event evs[64];
		int n = epoll_wait(s->ep, evs, 64, -1);
		bool do_tick = false;
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64;
			if (tag == 2) {
				stop = true;
			} else if (tag == 4) {
				uint64_t x;
				(void)!read(lc_efd, &x, sizeof(x));
				drain_checked(s);
			} else if (tag == 3) {
				uint64_t x;
				(void)!read(tfd, &x, sizeof(x));
				do_tick = true;
			} else if ((tag & 3) == 1) {
				on_accept(s, (int)(tag >> 2));
			} else if ((tag & 3) == 3) {
				on_client_accept(s, (int)(tag >> 2), CONN_ADMIN);
			} else if ((tag & 3) == 2) {
				on_client_accept(s, (int)(tag >> 2), CONN_METRICS);
			} else {
				struct conn *c = evs[i].data.ptr;
				if (c->kind == CONN_INGEST)
					on_readable(s, c);
				else
					on_client(s, c, evs[i].events);
			}
		}
		/* After the batch: the tick may close connections that later events of the same batch
		 * would still point to. */
		if (do_tick) {
			tick(s);
			tick_conns(s);
		}
		reap(s, false);
	}
	logf_(s, "collector stopping");
	r = 0;
out:
	sl_canary_sched_free(s->canary);
	/* Batches still at the checker are dropped unacknowledged: their senders resend them. */
	sl_linecheck_stop(s->lc);
	while (s->n_slots)
		conn_close(s, s->conns[s->n_slots - 1]);
	reap(s, true);
	sl_store_close(s->st);
	free(s->wbuf);
	free(s->key_ids);
	free(s);
	return r;
}
