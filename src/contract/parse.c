/* The contract parser (format: docs/contract.md). The file is operator-written but read as hostile
 * input: bounded size, no anchors/aliases/tags (they make the text mean something other than what
 * it reads, and aliases expand exponentially), one document, unknown and duplicate keys refused at
 * every level, and every error names "file:line:col" and what is wrong. A contract that silently
 * means less than it says would turn a visibility gap into a false pass. */
#include "contract/contract.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/util.h"

static const char *const obs_names[SL_OBS_COUNT] = {"supervisor", "guest-runtime", "gateway", "application",
						    "host"};
static const char *const act_names[SL_ACT_COUNT] = {"none",  "exec", "canary-read", "blocked-connect",
						    "start", "exit"};
static const char *const risk_names[3] = {"high", "medium", "low"};

const char *sl_observer_name(int obs)
{
	return obs >= 0 && obs < SL_OBS_COUNT ? obs_names[obs] : NULL;
}
int sl_observer_parse(const char *name)
{
	for (int i = 0; i < SL_OBS_COUNT; i++)
		if (!strcmp(name, obs_names[i]))
			return i;
	return -1;
}
const char *sl_action_name(int act)
{
	return act >= 0 && act < SL_ACT_COUNT ? act_names[act] : NULL;
}
int sl_action_parse(const char *name)
{
	for (int i = 0; i < SL_ACT_COUNT; i++)
		if (!strcmp(name, act_names[i]))
			return i;
	return -1;
}
const char *sl_response_name(int resp)
{
	return resp == SL_RESP_STOP ? "stop" : "pause-dispatch";
}
const char *sl_risk_name(int idx)
{
	return idx >= 0 && idx < 3 ? risk_names[idx] : NULL;
}

void sl_contract_free(struct sl_contract *c)
{
	if (!c)
		return;
	free(c->name);
	for (size_t i = 0; i < c->n_b && i < SL_CONTRACT_MAX_BEHAVIOURS; i++) {
		free(c->b[i].id);
		free(c->b[i].event);
		for (size_t k = 0; k < c->b[i].n_fields && k < SL_CONTRACT_MAX_FIELDS; k++)
			free(c->b[i].fields[k]);
	}
	for (size_t i = 0; i < c->n_u && i < SL_CONTRACT_MAX_UNSUPPORTED; i++) {
		free(c->u[i].op);
		free(c->u[i].reason);
		for (size_t k = 0; k < c->u[i].n_runtimes && k < SL_CONTRACT_MAX_RUNTIMES; k++)
			free(c->u[i].runtimes[k]);
	}
	memset(c, 0, sizeof(*c));
}

const struct sl_contract_unsupported *sl_contract_unsupported_for(const struct sl_contract *c, const char *op,
								  const char *rt)
{
	for (size_t i = 0; i < c->n_u; i++) {
		if (strcmp(c->u[i].op, op) != 0)
			continue;
		if (!c->u[i].n_runtimes)
			return &c->u[i];
		for (size_t k = 0; k < c->u[i].n_runtimes; k++)
			if (!strcmp(c->u[i].runtimes[k], rt))
				return &c->u[i];
	}
	return NULL;
}

/* ---- parsing ---- */

struct pctx {
	yaml_document_t *doc;
	const char *name;
	char *err;
	size_t errlen;
};

static int perr(struct pctx *p, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int perr(struct pctx *p, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->err, p->errlen, "%s:%zu:%zu: %s", p->name, n ? n->start_mark.line + 1 : 1,
		 n ? n->start_mark.column + 1 : 1, msg);
	return -EINVAL;
}

static const char *scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A plain (or quoted) string of 1..max printable bytes. */
static int get_str(struct pctx *p, const yaml_node_t *n, const char *key, size_t max, char **out)
{
	const char *s = scalar(n);
	if (!s)
		return perr(p, n, "%s: expected a string", key);
	size_t len = n->data.scalar.length;
	if (len == 0 || len > max)
		return perr(p, n, "%s: expected 1..%zu characters, got %zu", key, max, len);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return perr(p, n, "%s: control character in the value", key);
	char *d = strdup(s);
	if (!d)
		return -ENOMEM;
	free(*out);
	*out = d;
	return 0;
}

/* An identifier-like name: [A-Za-z0-9._-]{1,64}, the shape of event classes and ids. */
static int get_name(struct pctx *p, const yaml_node_t *n, const char *key, char **out)
{
	int r = get_str(p, n, key, 64, out);
	if (r < 0)
		return r;
	for (const char *s = *out; *s; s++)
		if (!(*s == '.' || *s == '_' || *s == '-' || (*s >= '0' && *s <= '9') ||
		      (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
			return perr(p, n, "%s: \"%s\" may hold only letters, digits, '.', '_' and '-'", key,
				    *out);
	return 0;
}

/* Booleans: exactly the plain words true and false (YAML 1.1's yes/no/on/off are refused). */
static int get_bool(struct pctx *p, const yaml_node_t *n, const char *key, bool *out)
{
	const char *s = scalar(n);
	if (s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !strcmp(s, "true"))
		*out = true;
	else if (s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !strcmp(s, "false"))
		*out = false;
	else
		return perr(p, n, "%s: expected true or false", key);
	return 0;
}

/* A duration: 1..9 digits (no leading zero) and a unit ms, s or m. At most one day. */
static int get_duration(struct pctx *p, const yaml_node_t *n, const char *key, uint64_t *ms)
{
	const char *s = scalar(n);
	if (!s)
		return perr(p, n, "%s: expected a duration (500ms, 2s, 1m)", key);
	size_t d = 0;
	uint64_t v = 0;
	while (s[d] >= '0' && s[d] <= '9' && d < 10)
		v = v * 10 + (uint64_t)(s[d++] - '0');
	uint64_t mul = 0;
	if (d && !strcmp(s + d, "ms"))
		mul = 1;
	else if (d && !strcmp(s + d, "s"))
		mul = 1000;
	else if (d && !strcmp(s + d, "m"))
		mul = 60000;
	if (!mul || d > 9 || (s[0] == '0' && d > 1) || v == 0 || v * mul > 86400000)
		return perr(p, n, "%s: \"%s\" is not a duration of 1ms..24h (500ms, 2s, 1m)", key, s);
	*ms = v * mul;
	return 0;
}

typedef int (*key_fn)(struct pctx *p, const char *key, yaml_node_t *v, void *obj);

/* Walk a mapping: every key must be a scalar in allowed (comma-separated list), at most once. */
static int walk_map(struct pctx *p, yaml_node_t *m, const char *what, const char *const *allowed, key_fn fn,
		    void *obj)
{
	if (!m || m->type != YAML_MAPPING_NODE)
		return perr(p, m, "%s: expected a mapping", what);
	unsigned seen = 0;
	for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
		yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
		yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
		const char *ks = scalar(k);
		if (!ks)
			return perr(p, k, "%s: keys must be plain strings", what);
		int idx = -1;
		for (int i = 0; allowed[i]; i++)
			if (!strcmp(ks, allowed[i]))
				idx = i;
		if (idx < 0) {
			char list[256] = "";
			for (int i = 0; allowed[i]; i++) {
				size_t l = strlen(list);
				snprintf(list + l, sizeof(list) - l, "%s%s", i ? ", " : "", allowed[i]);
			}
			return perr(p, k, "%s: unknown key \"%.64s\" (allowed: %s)", what, ks, list);
		}
		if (seen & (1u << idx))
			return perr(p, k, "%s: duplicate key \"%s\"", what, ks);
		seen |= 1u << idx;
		int r = fn(p, ks, v, obj);
		if (r < 0)
			return r;
	}
	return (int)seen;
}

struct bctx {
	struct sl_contract_behaviour *b;
};

static int behaviour_key(struct pctx *p, const char *key, yaml_node_t *v, void *obj)
{
	struct sl_contract_behaviour *b = obj;
	if (!strcmp(key, "id"))
		return get_name(p, v, "behaviours[].id", &b->id);
	if (!strcmp(key, "event"))
		return get_name(p, v, "behaviours[].event", &b->event);
	if (!strcmp(key, "observer")) {
		const char *s = scalar(v);
		int o = s ? sl_observer_parse(s) : -1;
		if (o < 0)
			return perr(p, v,
				    "behaviours[].observer: expected supervisor, guest-runtime, gateway, "
				    "application or host");
		b->observer = o;
		return 0;
	}
	if (!strcmp(key, "max_delay"))
		return get_duration(p, v, "behaviours[].max_delay", &b->max_delay_ms);
	if (!strcmp(key, "required"))
		return get_bool(p, v, "behaviours[].required", &b->required);
	if (!strcmp(key, "action")) {
		const char *s = scalar(v);
		int a = s ? sl_action_parse(s) : -1;
		if (a < 0)
			return perr(p, v,
				    "behaviours[].action: expected none, exec, canary-read, blocked-connect, "
				    "start or exit");
		b->action = a;
		return 0;
	}
	/* fields */
	if (v->type != YAML_SEQUENCE_NODE)
		return perr(p, v, "behaviours[].fields: expected a list of field names");
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *f = yaml_document_get_node(p->doc, *it);
		if (b->n_fields == SL_CONTRACT_MAX_FIELDS)
			return perr(p, f, "behaviours[].fields: at most %d fields", SL_CONTRACT_MAX_FIELDS);
		char *name = NULL;
		int r = get_name(p, f, "behaviours[].fields[]", &name);
		if (r < 0) {
			free(name);
			return r;
		}
		for (size_t k = 0; k < b->n_fields; k++)
			if (!strcmp(b->fields[k], name)) {
				free(name);
				return perr(p, f, "behaviours[].fields: \"%s\" is listed twice",
					    b->fields[k]);
			}
		b->fields[b->n_fields++] = name;
	}
	return 0;
}

static int risk_key(struct pctx *p, const char *key, yaml_node_t *v, void *obj)
{
	struct sl_contract_risk *rk = obj;
	if (!strcmp(key, "max_blind"))
		return get_duration(p, v, "risk_classes.max_blind", &rk->max_blind_ms);
	const char *s = scalar(v);
	if (s && !strcmp(s, "pause-dispatch"))
		rk->response = SL_RESP_PAUSE_DISPATCH;
	else if (s && !strcmp(s, "stop"))
		rk->response = SL_RESP_STOP;
	else
		return perr(p, v, "risk_classes.response: expected pause-dispatch or stop");
	return 0;
}

static int risks_key(struct pctx *p, const char *key, yaml_node_t *v, void *obj)
{
	struct sl_contract *c = obj;
	int idx = !strcmp(key, "high") ? SL_RISK_HIGH : !strcmp(key, "medium") ? SL_RISK_MEDIUM : SL_RISK_LOW;
	static const char *const allowed[] = {"max_blind", "response", NULL};
	int seen = walk_map(p, v, "risk_classes", allowed, risk_key, &c->risk[idx]);
	if (seen < 0)
		return seen;
	if (seen != 3)
		return perr(p, v, "risk_classes.%s: needs max_blind and response", key);
	c->risk[idx].set = true;
	return 0;
}

static int unsup_key(struct pctx *p, const char *key, yaml_node_t *v, void *obj)
{
	struct sl_contract_unsupported *u = obj;
	if (!strcmp(key, "op"))
		return get_name(p, v, "unsupported[].op", &u->op);
	if (!strcmp(key, "reason"))
		return get_str(p, v, "unsupported[].reason", 512, &u->reason);
	if (v->type != YAML_SEQUENCE_NODE)
		return perr(p, v, "unsupported[].runtimes: expected a list of runtime names");
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *f = yaml_document_get_node(p->doc, *it);
		if (u->n_runtimes == SL_CONTRACT_MAX_RUNTIMES)
			return perr(p, f, "unsupported[].runtimes: at most %d", SL_CONTRACT_MAX_RUNTIMES);
		int r = get_name(p, f, "unsupported[].runtimes[]", &u->runtimes[u->n_runtimes]);
		if (u->runtimes[u->n_runtimes])
			u->n_runtimes++;
		if (r < 0)
			return r;
	}
	if (!u->n_runtimes)
		return perr(p, v,
			    "unsupported[].runtimes: an empty list declares nothing (leave the key out for "
			    "every runtime)");
	return 0;
}

static int top_key(struct pctx *p, const char *key, yaml_node_t *v, void *obj)
{
	struct sl_contract *c = obj;
	if (!strcmp(key, "contract"))
		return get_name(p, v, "contract", &c->name);
	if (!strcmp(key, "risk_classes")) {
		static const char *const allowed[] = {"high", "medium", "low", NULL};
		int seen = walk_map(p, v, "risk_classes", allowed, risks_key, c);
		return seen < 0 ? seen : 0;
	}
	if (v->type != YAML_SEQUENCE_NODE)
		return perr(p, v, "%s: expected a list", key);
	bool beh = !strcmp(key, "behaviours");
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *e = yaml_document_get_node(p->doc, *it);
		if (beh) {
			if (c->n_b == SL_CONTRACT_MAX_BEHAVIOURS)
				return perr(p, e, "behaviours: at most %d", SL_CONTRACT_MAX_BEHAVIOURS);
			struct sl_contract_behaviour *b = &c->b[c->n_b++];
			b->required = true;
			b->line = (unsigned)e->start_mark.line + 1;
			static const char *const allowed[] = {"id",	   "event",    "observer", "fields",
							      "max_delay", "required", "action",   NULL};
			int seen = walk_map(p, e, "behaviours[]", allowed, behaviour_key, b);
			if (seen < 0)
				return seen;
			if ((seen & 0x1f) != 0x1f)
				return perr(p, e,
					    "behaviours[]: needs id, event, observer, fields and max_delay");
			for (size_t k = 0; k + 1 < c->n_b; k++)
				if (!strcmp(c->b[k].id, b->id))
					return perr(
					    p, e, "behaviours[]: id \"%s\" is used twice (first at line %u)",
					    b->id, c->b[k].line);
		} else {
			if (c->n_u == SL_CONTRACT_MAX_UNSUPPORTED)
				return perr(p, e, "unsupported: at most %d", SL_CONTRACT_MAX_UNSUPPORTED);
			struct sl_contract_unsupported *u = &c->u[c->n_u++];
			u->line = (unsigned)e->start_mark.line + 1;
			static const char *const allowed[] = {"op", "reason", "runtimes", NULL};
			int seen = walk_map(p, e, "unsupported[]", allowed, unsup_key, u);
			if (seen < 0)
				return seen;
			if ((seen & 3) != 3)
				return perr(p, e,
					    "unsupported[]: needs op and reason (the reason is the point)");
		}
	}
	return 0;
}

/* First pass over libyaml's events: one document, no anchors, aliases or explicit tags. */
static int prescan(const char *text, size_t len, const char *name, char *err, size_t errlen)
{
	yaml_parser_t ps;
	yaml_event_t ev;
	if (!yaml_parser_initialize(&ps))
		return -ENOMEM;
	yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
	int r = 0, docs = 0;
	for (bool done = false; !done && r == 0;) {
		if (!yaml_parser_parse(&ps, &ev)) {
			snprintf(err, errlen, "%s:%zu:%zu: not valid YAML: %s", name,
				 ps.problem_mark.line + 1, ps.problem_mark.column + 1,
				 ps.problem ? ps.problem : "parse error");
			r = -EINVAL;
			break;
		}
		const char *bad = NULL;
		switch (ev.type) {
		case YAML_ALIAS_EVENT:
			bad = "aliases are not allowed";
			break;
		case YAML_SCALAR_EVENT:
			if (ev.data.scalar.anchor)
				bad = "anchors are not allowed";
			else if (ev.data.scalar.tag)
				bad = "tags are not allowed";
			break;
		case YAML_SEQUENCE_START_EVENT:
			if (ev.data.sequence_start.anchor || ev.data.sequence_start.tag)
				bad = "anchors and tags are not allowed";
			break;
		case YAML_MAPPING_START_EVENT:
			if (ev.data.mapping_start.anchor || ev.data.mapping_start.tag)
				bad = "anchors and tags are not allowed";
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				bad = "only one document is allowed";
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		if (bad) {
			snprintf(err, errlen, "%s:%zu:%zu: %s", name, ev.start_mark.line + 1,
				 ev.start_mark.column + 1, bad);
			r = -EINVAL;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&ps);
	return r;
}

int sl_contract_parse(const char *text, size_t len, const char *name, struct sl_contract *c, char *err,
		      size_t errlen)
{
	memset(c, 0, sizeof(*c));
	if (len > SL_CONTRACT_MAX_BYTES) {
		snprintf(err, errlen, "%s:1:1: larger than %d bytes", name, SL_CONTRACT_MAX_BYTES);
		return -EFBIG;
	}
	if (memchr(text, '\0', len)) {
		snprintf(err, errlen, "%s:1:1: a NUL byte in the file", name);
		return -EINVAL;
	}
	int r = prescan(text, len, name, err, errlen);
	if (r < 0)
		return r;
	yaml_parser_t ps;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&ps))
		return -ENOMEM;
	yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
	if (!yaml_parser_load(&ps, &doc)) {
		snprintf(err, errlen, "%s:%zu:%zu: not valid YAML: %s", name, ps.problem_mark.line + 1,
			 ps.problem_mark.column + 1, ps.problem ? ps.problem : "load error");
		yaml_parser_delete(&ps);
		return -EINVAL;
	}
	struct pctx p = {.doc = &doc, .name = name, .err = err, .errlen = errlen};
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (!root) {
		r = perr(&p, NULL, "empty: a contract needs contract, behaviours and risk_classes");
		goto out;
	}
	static const char *const allowed[] = {"contract", "behaviours", "risk_classes", "unsupported", NULL};
	int seen = walk_map(&p, root, "top level", allowed, top_key, c);
	if (seen < 0) {
		r = seen;
		goto out;
	}
	if ((seen & 7) != 7) {
		r = perr(&p, root, "top level: needs contract, behaviours and risk_classes");
		goto out;
	}
	if (!c->n_b) {
		r = perr(&p, root, "behaviours: a contract with no behaviour promises nothing");
		goto out;
	}
	r = 0;
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&ps);
	if (r < 0)
		sl_contract_free(c);
	return r;
}

int sl_contract_load(const char *path, struct sl_contract *c, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	memset(c, 0, sizeof(*c));
	int r = sl_read_file(path, SL_CONTRACT_MAX_BYTES, &buf, &len);
	if (r < 0) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-r));
		return r;
	}
	r = sl_contract_parse(buf, len, path, c, err, errlen);
	free(buf);
	return r;
}
