/* The validator's checks, each independent of the others, over what the collector stored (read
 * straight from its SQLite file, read-only), the supervisor's record, the listener's log and the
 * workload's own report of its actions. A behaviour whose action happened and whose event is absent
 * is a coverage gap, never a pass. */
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "collector/store.h"
#include "common/util.h"
#include "contract/validate_internal.h"
#include "record/record.h"

int sl_vfind_record(const char *dir, char *path, size_t len, char sandbox_id[33])
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	int r = -ENOENT;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n == 38 && !strcmp(e->d_name + 32, ".jsonl")) {
			snprintf(path, len, "%s/%s", dir, e->d_name);
			snprintf(sandbox_id, 33, "%.32s", e->d_name);
			r = 0;
		}
	}
	closedir(d);
	return r;
}

static sqlite3 *db_open(const char *path)
{
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 2000);
	return db;
}

size_t sl_vstored(const struct sl_vctx *v)
{
	sqlite3 *db = db_open(v->db);
	if (!db)
		return 0;
	sqlite3_stmt *st = NULL;
	size_t n = 0;
	if (sqlite3_prepare_v2(db, "SELECT last_seq FROM health WHERE sandbox_id = ?", -1, &st, NULL) ==
	    SQLITE_OK) {
		sqlite3_bind_text(st, 1, v->res->sandbox_id, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			n = (size_t)sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

struct ev {
	uint64_t seq;
	int64_t time_ns, received_ns;
	char *line;
	struct json_object *o;
};

struct evs {
	struct ev *e;
	size_t n, cap;
};

static void evs_free(struct evs *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->e[i].line);
		json_object_put(s->e[i].o);
	}
	free(s->e);
	memset(s, 0, sizeof(*s));
}

static int load_event(void *arg, const struct sl_store_event_row *row)
{
	struct evs *s = arg;
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;
		struct ev *ne = realloc(s->e, nc * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		s->e = ne;
		s->cap = nc;
	}
	struct ev *e = &s->e[s->n++];
	e->seq = row->seq;
	e->time_ns = row->time_ns;
	e->received_ns = row->received_ns;
	e->line = strndup(row->line, row->len);
	e->o = e->line ? json_tokener_parse(e->line) : NULL;
	return 0;
}

/* The sandbox's stored events in seq order, through the store's reader (schema 3 keeps them as
 * batch rows). */
static int load_events(const char *path, const char *sid, struct evs *s)
{
	struct sl_store *st;
	int r = sl_store_open_readonly(path, &st);
	if (r < 0)
		return r;
	struct sl_store_filter f = {.sandbox_id = sid};
	r = sl_store_each_event_row(st, &f, load_event, s);
	sl_store_close(st);
	return r < 0 ? r : 0; /* one sandbox: its lines come in seq order */
}

static const char *jstr(struct json_object *o, const char *k)
{
	struct json_object *v;
	return o && json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
		   ? json_object_get_string(v)
		   : NULL;
}

static int64_t jint(struct json_object *o, const char *k, int64_t dflt)
{
	struct json_object *v;
	return o && json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_int)
		   ? json_object_get_int64(v)
		   : dflt;
}

/* A member, or "a.b" a member of a member. */
static struct json_object *jpath(struct json_object *o, const char *path)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", path);
	struct json_object *cur = o;
	for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && cur; k = strtok_r(NULL, ".", &save)) {
		struct json_object *nx;
		cur = json_object_is_type(cur, json_type_object) && json_object_object_get_ex(cur, k, &nx)
			  ? nx
			  : NULL;
	}
	return cur;
}

/* Present and well formed: not null; a string or array not empty. */
static const char *field_problem(struct json_object *o, const char *f)
{
	struct json_object *v = jpath(o, f);
	if (!v)
		return json_object_is_type(o, json_type_object) && strchr(f, '.') == NULL &&
			       json_object_object_get_ex(o, f, &v)
			   ? "null"
			   : "absent";
	if (json_object_is_type(v, json_type_string) && !json_object_get_string_len(v))
		return "empty";
	if (json_object_is_type(v, json_type_array) && !json_object_array_length(v))
		return "empty";
	return NULL;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !strcmp(s + a - b, suf);
}

/* The event that shows behaviour b's action, or NULL. */
static struct ev *match(struct evs *s, const struct sl_contract_behaviour *b, const struct sl_vctx *v)
{
	char dest[64];
	snprintf(dest, sizeof(dest), "127.0.0.1:%u", v->res->port);
	for (size_t i = 0; i < s->n; i++) {
		struct json_object *o = s->e[i].o;
		const char *cls = jstr(o, "class");
		if (!cls || strcmp(cls, b->event) != 0)
			continue;
		const char *p = jstr(o, "path"), *ex = jstr(o, "executable");
		switch (b->action) {
		case SL_ACT_EXEC:
			if (!strcmp(cls, "process.exec") && !(ex && ends_with(ex, "/uname")))
				continue;
			break;
		case SL_ACT_CANARY_READ:
			if (!strcmp(cls, "file.open") && !(p && !strcmp(p, v->res->canary_path)))
				continue;
			break;
		case SL_ACT_BLOCKED_CONNECT:
			if (!strcmp(cls, "network.connect") && jint(o, "port", -1) != (int64_t)v->res->port)
				continue;
			if (!strcmp(cls, "policy.deny") && !(p && !strcmp(p, dest)))
				continue;
			break;
		default:
			break;
		}
		return &s->e[i];
	}
	return NULL;
}

static bool action_happened(const struct sl_vctx *v, int act)
{
	switch (act) {
	case SL_ACT_EXEC:
		return sl_vfile_has(v->run_out, "ACTION exec ok");
	case SL_ACT_CANARY_READ:
		return sl_vfile_has(v->run_out, "ACTION canary-read ok");
	case SL_ACT_BLOCKED_CONNECT:
		return sl_vfile_has(v->run_out, "ACTION blocked-connect");
	case SL_ACT_START:
	case SL_ACT_EXIT:
		return true;
	default:
		return false;
	}
}

int sl_vchecks(struct sl_vctx *v, char *err, size_t errlen)
{
	struct sl_validate_result *res = v->res;
	const struct sl_contract *c = v->cfg->contract;
	sqlite3 *db = db_open(v->db);
	if (!db) {
		snprintf(err, errlen, "cannot open the collector's store %s", v->db);
		return -EIO;
	}
	struct evs s = {0};
	int r = load_events(v->db, res->sandbox_id, &s);
	if (r < 0) {
		snprintf(err, errlen, "cannot read the events from %s: %s", v->db, strerror(-r));
		evs_free(&s);
		sqlite3_close(db);
		return r;
	}
	bool listener_up = sl_vfile_has(v->listener_log, "listening 127.0.0.1:");
	bool listener_hit = sl_vfile_has(v->listener_log, "connection from");
	bool denial_happened = listener_up && !listener_hit;

	/* a. binding: the collector's binding and every event join to the launched identity. */
	{
		sqlite3_stmt *st = NULL;
		char bound[512] = "no binding";
		bool ok = false;
		if (sqlite3_prepare_v2(db,
				       "SELECT tenant, agent, task, version, credential_ref FROM bindings "
				       "WHERE sandbox_id = ?",
				       -1, &st, NULL) == SQLITE_OK) {
			sqlite3_bind_text(st, 1, res->sandbox_id, -1, SQLITE_STATIC);
			if (sqlite3_step(st) == SQLITE_ROW) {
				const char *got[5];
				for (int i = 0; i < 5; i++)
					got[i] = (const char *)sqlite3_column_text(st, i);
				const char *want[5] = {res->id.tenant, res->id.agent, res->id.task,
						       res->id.version, res->id.credential_ref};
				ok = true;
				for (int i = 0; i < 5; i++)
					ok = ok && got[i] && !strcmp(got[i], want[i]);
				snprintf(bound, sizeof(bound), "binding %s/%s/%s/%s/%s",
					 got[0] ? got[0] : "-", got[1] ? got[1] : "-", got[2] ? got[2] : "-",
					 got[3] ? got[3] : "-", got[4] ? got[4] : "-");
			}
		}
		sqlite3_finalize(st);
		size_t bad = 0;
		uint64_t first_bad = 0;
		static const char *const keys[5] = {"tenant", "agent", "task", "version", "credential_ref"};
		const char *want[5] = {res->id.tenant, res->id.agent, res->id.task, res->id.version,
				       res->id.credential_ref};
		for (size_t i = 0; i < s.n; i++) {
			struct json_object *id = jpath(s.e[i].o, "identity");
			bool good = id && jstr(s.e[i].o, "sandbox_id") &&
				    !strcmp(jstr(s.e[i].o, "sandbox_id"), res->sandbox_id);
			for (int k = 0; good && k < 5; k++)
				good = jstr(id, keys[k]) && !strcmp(jstr(id, keys[k]), want[k]);
			if (!good && !bad++)
				first_bad = s.e[i].seq;
		}
		char first_bad_txt[48];
		snprintf(first_bad_txt, sizeof(first_bad_txt), " (first seq %llu)",
			 (unsigned long long)first_bad);
		char exp[256];
		snprintf(exp, sizeof(exp), "every event joins %s/%s/%s/%s/%s", res->id.tenant, res->id.agent,
			 res->id.task, res->id.version, res->id.credential_ref);
		sl_vrow_add(res, false, ok && !bad && s.n ? SL_V_PASS : SL_V_FAIL, "binding", "identity", exp,
			    "%s; %zu events, %zu not joining%s", bound, s.n, bad, bad ? first_bad_txt : "");
	}

	/* Per behaviour: visible (or a gap), fields, delay. */
	for (size_t i = 0; i < c->n_b; i++) {
		const struct sl_contract_behaviour *b = &c->b[i];
		char exp[256];
		snprintf(exp, sizeof(exp), "%s from the %s after %s", b->event, sl_observer_name(b->observer),
			 sl_action_name(b->action));
		bool happened = action_happened(v, b->action);
		const struct sl_contract_unsupported *u =
		    sl_contract_unsupported_for(c, b->id, v->cfg->rt->runtime);
		/* The static answer first, shown when it is not "covered": the runtime's table says it
		 * cannot emit this behaviour as the contract asks. */
		struct sl_check_row cr;
		sl_contract_check_one(c, b, v->cfg->rt, &cr);
		if (cr.verdict != SL_CHECK_COVERED)
			sl_vrow_add(res, false, cr.verdict == SL_CHECK_UNCOVERED ? SL_V_GAP : SL_V_NA,
				    "static", b->id, "the runtime's sensors can emit it with these fields",
				    "%s", cr.detail);
		if (b->action == SL_ACT_NONE) {
			sl_vrow_add(res, false, u || !b->required ? SL_V_NA : SL_V_FAIL, "visible", b->id,
				    exp, "not exercised by the validator (action: none)%s",
				    u ? "; declared unsupported" : "");
			continue;
		}
		/* A denial's own event exists only if the denial happened (the control says whether). */
		bool is_denial_event =
		    b->action == SL_ACT_BLOCKED_CONNECT && !strcmp(b->event, "policy.deny");
		struct ev *e = match(&s, b, v);
		if (!e) {
			if (is_denial_event && !denial_happened)
				sl_vrow_add(res, false, SL_V_NA, "visible", b->id, exp,
					    "no denial happened, so no %s to see (see the control row)",
					    b->event);
			else if (!happened)
				sl_vrow_add(res, false, SL_V_FAIL, "visible", b->id, exp,
					    "the action did not happen (workload output: %s)", v->run_out);
			else if (u)
				sl_vrow_add(res, false, SL_V_NA, "visible", b->id, exp,
					    "absent, declared unsupported: %s", u->reason);
			else
				sl_vrow_add(res, false, b->required ? SL_V_GAP : SL_V_NA, "visible", b->id,
					    exp, "coverage gap: the action happened and no %s arrived",
					    b->event);
			continue;
		}
		/* The line's observer is the record's stamp (one per record: "supervisor" for native,
		 * "gvisor-sentry" for gVisor); which observation point writes the class is the
		 * runtime's table, already checked statically above. */
		const char *obs = jstr(e->o, "observer");
		const char *want_obs = v->cfg->rt->record_observer;
		bool obs_ok = obs && !strcmp(obs, want_obs) && cr.verdict == SL_CHECK_COVERED;
		sl_vrow_add(res, false, obs_ok ? SL_V_PASS : SL_V_FAIL, "visible", b->id, exp,
			    "seq %llu from the %s (observer %s)", (unsigned long long)e->seq,
			    cr.verdict == SL_CHECK_COVERED ? sl_observer_name(b->observer)
							   : "wrong observation point",
			    obs ? obs : "?");
		char probs[384] = "";
		size_t pl = 0;
		for (size_t k = 0; k < b->n_fields; k++) {
			const char *why = field_problem(e->o, b->fields[k]);
			if (why)
				pl +=
				    (size_t)snprintf(probs + pl, pl < sizeof(probs) ? sizeof(probs) - pl : 0,
						     "%s%s %s", pl ? ", " : "", b->fields[k], why);
		}
		snprintf(exp, sizeof(exp), "%zu required fields present and well formed", b->n_fields);
		sl_vrow_add(res, false, probs[0] ? SL_V_FAIL : SL_V_PASS, "fields", b->id, exp, "%s",
			    probs[0] ? probs : "all present");
		int64_t delay_ms = (e->received_ns - e->time_ns) / 1000000;
		snprintf(exp, sizeof(exp), "stored within %llu ms of the action",
			 (unsigned long long)b->max_delay_ms);
		sl_vrow_add(res, false, delay_ms <= (int64_t)b->max_delay_ms ? SL_V_PASS : SL_V_FAIL, "delay",
			    b->id, exp, "%lld ms", (long long)delay_ms);
	}

	/* c. delay, for every event of a contract class recorded before the cut (those recorded
	 * during the outage are late by design; recovery checks them). The bound is the smallest
	 * max_delay of the behaviours of that class. */
	{
		size_t checked = 0, late = 0;
		int64_t worst = 0;
		uint64_t worst_seq = 0;
		for (size_t i = 0; i < s.n; i++) {
			const char *cls = jstr(s.e[i].o, "class");
			if (!cls || s.e[i].time_ns >= v->cut_ns)
				continue;
			uint64_t bound = 0;
			for (size_t k = 0; k < c->n_b; k++)
				if (!strcmp(c->b[k].event, cls) && (!bound || c->b[k].max_delay_ms < bound))
					bound = c->b[k].max_delay_ms;
			if (!bound)
				continue;
			checked++;
			int64_t d = (s.e[i].received_ns - s.e[i].time_ns) / 1000000;
			if (d > (int64_t)bound)
				late++;
			if (d > worst) {
				worst = d;
				worst_seq = s.e[i].seq;
			}
		}
		sl_vrow_add(res, false, checked && !late ? SL_V_PASS : SL_V_FAIL, "delay", "every-event",
			    "every event of a contract class before the cut stored within its max_delay",
			    "%zu checked, %zu late; worst %lld ms (seq %llu)", checked, late,
			    (long long)worst, (unsigned long long)worst_seq);
	}

	/* d. alert delivery: the two built-in detections fired for this sandbox. The blocked-connect
	 * detection reads the policy.deny of a connect: where the contract declares that event
	 * unsupported on this runtime (gVisor), the missing alert is that declared gap, not a pass. */
	{
		const struct sl_contract_unsupported *deny_unsupported = NULL;
		for (size_t i = 0; i < c->n_b && !deny_unsupported; i++)
			if (c->b[i].action == SL_ACT_BLOCKED_CONNECT && !strcmp(c->b[i].event, "policy.deny"))
				deny_unsupported =
				    sl_contract_unsupported_for(c, c->b[i].id, v->cfg->rt->runtime);
		static const char *const kinds[2] = {"canary-read", "blocked-connect"};
		for (int k = 0; k < 2; k++) {
			sqlite3_stmt *st = NULL;
			char got[300] = "";
			if (sqlite3_prepare_v2(db,
					       "SELECT id, detail FROM alerts WHERE sandbox_id = ? AND kind "
					       "= ? ORDER BY id LIMIT 1",
					       -1, &st, NULL) == SQLITE_OK) {
				sqlite3_bind_text(st, 1, res->sandbox_id, -1, SQLITE_STATIC);
				sqlite3_bind_text(st, 2, kinds[k], -1, SQLITE_STATIC);
				if (sqlite3_step(st) == SQLITE_ROW)
					snprintf(got, sizeof(got), "alert #%lld: %s",
						 (long long)sqlite3_column_int64(st, 0),
						 sqlite3_column_text(st, 1)
						     ? (const char *)sqlite3_column_text(st, 1)
						     : "");
			}
			sqlite3_finalize(st);
			char exp[128];
			snprintf(exp, sizeof(exp), "a %s alert for the sandbox", kinds[k]);
			if (got[0])
				sl_vrow_add(res, false, SL_V_PASS, "alert", kinds[k], exp, "%s", got);
			else if (k == 1 && deny_unsupported)
				sl_vrow_add(
				    res, false, SL_V_NA, "alert", kinds[k], exp,
				    "no such alert: the detection reads policy.deny, declared unsupported "
				    "on %s (%s): %s",
				    v->cfg->rt->runtime, deny_unsupported->op, deny_unsupported->reason);
			else if (k == 1 && !denial_happened)
				sl_vrow_add(
				    res, false, SL_V_NA, "alert", kinds[k], exp,
				    "no denial happened, so nothing to alert on (see the control row)");
			else
				sl_vrow_add(res, false, SL_V_FAIL, "alert", kinds[k], exp, "no such alert");
		}
	}

	/* e. control: the connection the policy must block never arrived. */
	{
		char exp[128];
		snprintf(exp, sizeof(exp), "the listener on 127.0.0.1:%u saw nothing", res->port);
		if (!listener_up)
			sl_vrow_add(res, true, SL_V_FAIL, "control", "blocked-connect", exp,
				    "the listener never started (%s): the denial cannot be proven",
				    v->listener_log);
		else if (listener_hit)
			sl_vrow_add(res, true, SL_V_FAIL, "control", "blocked-connect", exp,
				    "the connection ARRIVED: the policy did not block it (%s)",
				    v->listener_log);
		else
			sl_vrow_add(res, true, SL_V_PASS, "control", "blocked-connect", exp,
				    "nothing arrived; workload: %s",
				    sl_vfile_has(v->run_out, "blocked-connect refused") ? "connect refused"
											: "?");
	}

	/* f. loss response. */
	{
		sqlite3_stmt *st = NULL;
		char got[300] = "";
		if (sqlite3_prepare_v2(db,
				       "SELECT id, started_ns, detail FROM alerts WHERE sandbox_id = ? AND "
				       "kind = 'blind' ORDER BY id LIMIT 1",
				       -1, &st, NULL) == SQLITE_OK) {
			sqlite3_bind_text(st, 1, res->sandbox_id, -1, SQLITE_STATIC);
			if (sqlite3_step(st) == SQLITE_ROW)
				snprintf(got, sizeof(got), "alert #%lld: %s",
					 (long long)sqlite3_column_int64(st, 0),
					 sqlite3_column_text(st, 2) ? (const char *)sqlite3_column_text(st, 2)
								    : "");
		}
		sqlite3_finalize(st);
		sl_vrow_add(res, false, got[0] ? SL_V_PASS : SL_V_FAIL, "loss", "blind-detected",
			    "the export cut is detected as a blind interval", "%s",
			    got[0] ? got : "no blind alert");
		char exp[192];
		/* 100 ms collector tick + 50 ms polling + scheduling: 500 ms of slack on the bound. */
		snprintf(exp, sizeof(exp),
			 "gate %s closed within %llu ms (+500 ms slack) of the last evidence",
			 v->cfg->risk_class, (unsigned long long)v->max_blind_ms);
		if (v->response == SL_RESP_STOP) {
			/* high risk: the response is the stop, through the control path */
			const char *why = NULL;
			for (size_t i = 0; i < s.n && !why; i++) {
				const char *cls = jstr(s.e[i].o, "class");
				if (cls && !strcmp(cls, "lifecycle.exit"))
					why = jstr(s.e[i].o, "reason");
			}
			/* Stopped by the control path (the collector) or the supervisor's own watchdog:
			 * either is the contract's "stop"; an exit of its own is not. */
			bool stopped = why && (strstr(why, "control path") || strstr(why, "blind past"));
			sl_vrow_add(res, false, stopped ? SL_V_PASS : SL_V_FAIL, "loss", "response-stop",
				    "the blind high-risk workload is stopped",
				    "run status %d, lifecycle.exit reason \"%s\"",
				    WIFEXITED(v->run_status) ? WEXITSTATUS(v->run_status)
							     : 128 + WTERMSIG(v->run_status),
				    why ? why : "(none stored)");
		}
		if (!v->gate_closed_ns)
			sl_vrow_add(res, false, SL_V_FAIL, "loss", "dispatch-paused", exp,
				    "the gate stayed open for %lld ms after the cut (last answer: %s)",
				    (long long)((v->restore_ns - v->cut_ns) / 1000000),
				    v->gate_answer[0] ? v->gate_answer : "none");
		else {
			int64_t from = v->blind_since_ns ? v->blind_since_ns : v->cut_ns;
			int64_t took = (v->gate_closed_ns - from) / 1000000;
			sl_vrow_add(res, false,
				    took <= (int64_t)v->max_blind_ms + 500 ? SL_V_PASS : SL_V_FAIL, "loss",
				    "dispatch-paused", exp,
				    "closed %lld ms after the last evidence (%lld ms after the cut)",
				    (long long)took, (long long)((v->gate_closed_ns - v->cut_ns) / 1000000));
		}
		if (v->response == SL_RESP_PAUSE_DISPATCH) {
			bool acted = sl_vfile_has(v->run_out, "ACTION during-loss ok");
			sl_vrow_add(res, false, v->running_at_close && acted ? SL_V_PASS : SL_V_FAIL, "loss",
				    "workload-kept", "the workload keeps running through the outage", "%s%s",
				    v->running_at_close ? "running when the gate closed"
							: "NOT running when the gate closed",
				    acted ? ", acted during the outage" : ", did not act during the outage");
		}
	}

	/* g. recovery: nothing buffered was discarded. */
	{
		struct sl_verify_result vr;
		int vrc = sl_record_verify(v->record, &vr);
		char *buf = NULL;
		size_t len = 0;
		sl_read_file(v->record, 256 << 20, &buf, &len);
		size_t nlines = 0, differ = 0;
		uint64_t first_differ = 0;
		for (char *p = buf, *end = buf ? buf + len : NULL; p && p < end; nlines++) {
			char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
			if (nlines >= s.n || strlen(s.e[nlines].line) != l ||
			    memcmp(s.e[nlines].line, p, l) != 0) {
				if (!differ++)
					first_differ = nlines + 1;
			}
			p += l + 1;
		}
		char first_differ_txt[48];
		snprintf(first_differ_txt, sizeof(first_differ_txt), " (first line %llu)",
			 (unsigned long long)first_differ);
		bool contiguous = true;
		for (size_t i = 0; i < s.n; i++)
			contiguous = contiguous && s.e[i].seq == i + 1;
		sl_vrow_add(res, false, contiguous && s.n ? SL_V_PASS : SL_V_FAIL, "recovery",
			    "seq-contiguous", "stored seq 1..N without a hole", "%zu stored, %s", s.n,
			    contiguous ? "contiguous" : "HOLES");
		sl_vrow_add(res, false, vrc == 0 ? SL_V_PASS : SL_V_FAIL, "recovery", "chain-verified",
			    "the record's hash chain verifies", "%s (%llu lines)%s%s",
			    vrc == 0 ? "verified" : sl_verify_reason_name(vr.reason),
			    (unsigned long long)vr.events, vrc ? ": " : "", vrc ? vr.detail : "");
		sl_vrow_add(res, false, nlines == s.n && !differ ? SL_V_PASS : SL_V_FAIL, "recovery",
			    "store-equals-record", "the store holds the record byte for byte",
			    "%zu record lines, %zu stored, %zu differ%s", nlines, s.n, differ,
			    differ ? first_differ_txt : "");
		/* The supervisor's own tallies (record.end counts) against what the collector holds. */
		struct json_object *counts = s.n ? jpath(s.e[s.n - 1].o, "counts") : NULL;
		static const char *const classes[] = {"process.exec", "file.open", "network.connect",
						      "policy.deny"};
		char obs[384] = "";
		size_t ol = 0;
		bool eq = counts != NULL;
		int64_t ce = jint(counts, "events", -1);
		eq = eq && ce == (int64_t)s.n;
		ol += (size_t)snprintf(obs + ol, sizeof(obs) - ol, "events %lld/%zu", (long long)ce, s.n);
		for (size_t k = 0; k < SL_ARRAY_LEN(classes); k++) {
			int64_t want = jint(counts, classes[k], -1), got = 0;
			for (size_t i = 0; i < s.n; i++) {
				const char *cls = jstr(s.e[i].o, "class");
				got += cls && !strcmp(cls, classes[k]);
			}
			eq = eq && want == got;
			if (ol < sizeof(obs))
				ol += (size_t)snprintf(obs + ol, sizeof(obs) - ol, ", %s %lld/%lld",
						       classes[k], (long long)want, (long long)got);
		}
		sl_vrow_add(res, false, eq ? SL_V_PASS : SL_V_FAIL, "recovery", "counts-equal",
			    "record.end counts (supervisor) = events stored (collector)", "%s%s",
			    counts ? "" : "no record.end; ", obs);
		free(buf);
	}
	evs_free(&s);
	sqlite3_close(db);
	return 0;
}
