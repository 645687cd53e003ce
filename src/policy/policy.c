/* The sandbox policy parser (format: docs/policy.md). The input is operator-written but treated as
 * hostile: bounded size, a strict schema walked event by event with libyaml (so nesting can never go
 * deeper than the schema), no anchors/aliases/tags, every error "name:line:col: what is wrong".
 *
 * The parse works on a private copy of the caller's policy and only replaces it on success, so a
 * failed parse leaves p exactly as it was and leaks nothing. */
#include "policy/policy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "common/util.h"

#define POLICY_MAX_BYTES (1024 * 1024) /* input size limit */
#define POLICY_MAX_PATH	 1024	       /* longest accepted path, in bytes */
/* execve refuses any single "NAME=VALUE" string of MAX_ARG_STRLEN (32 pages) or more. */
#define POLICY_MAX_ENV_STR (32 * 4096 - 1)
/* Seconds fit in int64 nanoseconds after multiplying by 1e9. */
#define POLICY_MAX_SECONDS UINT64_C(4294967295)
#define POLICY_MAX_PIDS	   UINT64_C(4194304) /* PID_MAX_LIMIT */
#define POLICY_MAX_NOFILE  UINT64_C(1048576) /* default fs.nr_open */

static const char *const default_ro[] = {"/usr", "/bin", "/lib", "/lib64", "/etc", "/sbin"};
static const char default_mount[] = "/workspace";
static const char default_home_prefix[] = "HOME=";
static const char *const default_env_fixed[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
						"TMPDIR=/tmp"};

/* ---- struct lifetime ------------------------------------------------------------------------ */

void sl_policy_free(struct sl_policy *p)
{
	if (!p)
		return;
	free(p->workspace);
	free(p->workspace_mount);
	for (size_t i = 0; i < p->n_ro && i < SL_POLICY_MAX_PATHS; i++)
		free(p->ro_paths[i]);
	for (size_t i = 0; i < p->n_canaries && i < SL_POLICY_MAX_PATHS; i++)
		free(p->canaries[i]);
	for (size_t i = 0; i < p->n_env && i < SL_POLICY_MAX_PATHS; i++)
		free(p->env[i]);
	/* Leave a valid empty policy behind, so a second free (or a later default) is harmless. */
	memset(p, 0, sizeof(*p));
}

static char *str_concat(const char *a, const char *b)
{
	char *s;
	if (asprintf(&s, "%s%s", a, b) < 0)
		return NULL;
	return s;
}

int sl_policy_default(struct sl_policy *p)
{
	if (!p)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->workspace_mount = strdup(default_mount);
	if (!p->workspace_mount)
		goto oom;
	for (size_t i = 0; i < SL_ARRAY_LEN(default_ro); i++) {
		p->ro_paths[i] = strdup(default_ro[i]);
		if (!p->ro_paths[i])
			goto oom;
		p->n_ro++;
	}
	/* PATH, HOME, LANG, TMPDIR: HOME follows workspace_mount (re-resolved after a parse). */
	p->env[p->n_env] = strdup(default_env_fixed[0]);
	if (!p->env[p->n_env])
		goto oom;
	p->n_env++;
	p->env[p->n_env] = str_concat(default_home_prefix, default_mount);
	if (!p->env[p->n_env])
		goto oom;
	p->n_env++;
	for (size_t i = 1; i < SL_ARRAY_LEN(default_env_fixed); i++) {
		p->env[p->n_env] = strdup(default_env_fixed[i]);
		if (!p->env[p->n_env])
			goto oom;
		p->n_env++;
	}
	p->limits = (struct sl_policy_limits){
	    .memory_bytes = UINT64_C(1) << 30,
	    .pids = 512,
	    .nofile = 1024,
	    .cpu_seconds = 3600,
	    .file_size = UINT64_C(1) << 30,
	    .tmp_size = UINT64_C(256) << 20,
	    .wall_seconds = 0,
	};
	p->tmp = true;
	p->redact_argv = true;
	p->record_opens = true;
	return 0;
oom:
	sl_policy_free(p);
	return -ENOMEM;
}

/* Deep copy; on failure dst is an empty (freeable) policy. */
static int policy_copy(struct sl_policy *dst, const struct sl_policy *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->limits = src->limits;
	dst->tmp = src->tmp;
	dst->redact_argv = src->redact_argv;
	dst->record_opens = src->record_opens;
	dst->record_wait_on_full = src->record_wait_on_full;
	memcpy(dst->tcp_connect, src->tcp_connect, sizeof(dst->tcp_connect));
	dst->n_tcp_connect =
	    src->n_tcp_connect > SL_POLICY_MAX_PORTS ? SL_POLICY_MAX_PORTS : src->n_tcp_connect;
	if (src->workspace && !(dst->workspace = strdup(src->workspace)))
		goto oom;
	if (src->workspace_mount && !(dst->workspace_mount = strdup(src->workspace_mount)))
		goto oom;
	struct {
		char **to;
		size_t *n_to;
		char *const *from;
		size_t n_from;
	} lists[] = {
	    {dst->ro_paths, &dst->n_ro, src->ro_paths, src->n_ro},
	    {dst->canaries, &dst->n_canaries, src->canaries, src->n_canaries},
	    {dst->env, &dst->n_env, src->env, src->n_env},
	};
	for (size_t l = 0; l < SL_ARRAY_LEN(lists); l++) {
		for (size_t i = 0; i < lists[l].n_from && i < SL_POLICY_MAX_PATHS; i++) {
			if (!lists[l].from[i])
				continue;
			char *s = strdup(lists[l].from[i]);
			if (!s)
				goto oom;
			lists[l].to[(*lists[l].n_to)++] = s;
		}
	}
	return 0;
oom:
	sl_policy_free(dst);
	return -ENOMEM;
}

/* ---- parse context and errors --------------------------------------------------------------- */

struct pctx {
	yaml_parser_t parser;
	yaml_event_t ev; /* the current event; always owned here, deleted by next() and at the end */
	const char *name;
	const unsigned char *text;
	size_t len;
	char *err;
	size_t errlen;
	struct sl_policy *p; /* the private copy being filled */

	/* Where each read_only entry came from (for errors found after the whole file is read). */
	yaml_mark_t ro_mark[SL_POLICY_MAX_PATHS];
	/* The key each entry came from: "read_only", "read_only_extra", or NULL (not from this file). */
	const char *ro_key[SL_POLICY_MAX_PATHS];
	/* read_only_extra is appended after the whole file is read, whatever the key order. */
	char *extra[SL_POLICY_MAX_PATHS];
	yaml_mark_t extra_mark[SL_POLICY_MAX_PATHS];
	size_t n_extra;
	bool mount_given, ws_given, env_given;
	/* Before the parse: the mount point, and the index of env "HOME=<that mount>" (-1: none). */
	const char *old_mount;
	ssize_t home_idx;
	yaml_mark_t mount_mark, ws_mark;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* "name:line:col: message" at a libyaml mark (0-based there, 1-based here). Returns -EINVAL. */
static int perr(struct pctx *c, yaml_mark_t m, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(struct pctx *c, yaml_mark_t m, const char *fmt, ...)
{
	if (!c->err || c->errlen == 0)
		return -EINVAL;
	int n = snprintf(c->err, c->errlen, "%s:%zu:%zu: ", c->name, m.line + 1, m.column + 1);
	if (n >= 0 && (size_t)n < c->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Quote untrusted text for an error message: escapes control bytes, quotes and backslashes, and
 * truncates long values. out must hold at least 8 bytes. */
#define QUOTE_MAX 64
static const char *quote(const void *data, size_t n, char out[QUOTE_MAX * 4 + 8])
{
	const unsigned char *s = data;
	size_t o = 0;
	out[o++] = '"';
	for (size_t i = 0; i < n; i++) {
		if (i == QUOTE_MAX) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		unsigned char ch = s[i];
		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, 5, "\\x%02x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}
#define QBUF char qbuf[QUOTE_MAX * 4 + 8]

/* Line and column (1-based) of a byte offset, for libyaml reader errors, which only carry an offset. */
static void offset_to_mark(const struct pctx *c, size_t off, yaml_mark_t *m)
{
	m->line = 0;
	m->column = 0;
	m->index = off;
	for (size_t i = 0; i < off && i < c->len; i++) {
		if (c->text[i] == '\n') {
			m->line++;
			m->column = 0;
		} else {
			m->column++;
		}
	}
}

static int syntax_error(struct pctx *c)
{
	const yaml_parser_t *y = &c->parser;
	yaml_mark_t m;
	switch (y->error) {
	case YAML_MEMORY_ERROR:
		set_err(c->err, c->errlen, "%s: out of memory while parsing", c->name);
		return -ENOMEM;
	case YAML_READER_ERROR:
		offset_to_mark(c, y->problem_offset, &m);
		if (y->problem_value >= 0)
			return perr(c, m, "invalid input: %s (#x%X)",
				    y->problem ? y->problem : "unreadable input", (unsigned)y->problem_value);
		return perr(c, m, "invalid input: %s", y->problem ? y->problem : "unreadable input");
	case YAML_SCANNER_ERROR:
	case YAML_PARSER_ERROR:
		if (y->context)
			return perr(c, y->problem_mark, "YAML syntax error: %s (%s at line %zu column %zu)",
				    y->problem ? y->problem : "invalid syntax", y->context,
				    y->context_mark.line + 1, y->context_mark.column + 1);
		return perr(c, y->problem_mark, "YAML syntax error: %s",
			    y->problem ? y->problem : "invalid syntax");
	default:
		set_err(c->err, c->errlen, "%s: YAML parser failed", c->name);
		return -EINVAL;
	}
}

static int next(struct pctx *c)
{
	yaml_event_delete(&c->ev);
	if (!yaml_parser_parse(&c->parser, &c->ev))
		return syntax_error(c);
	return 0;
}

static yaml_mark_t here(const struct pctx *c)
{
	return c->ev.start_mark;
}

static const char *event_kind(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return "a single value";
	case YAML_SEQUENCE_START_EVENT:
		return "a list";
	case YAML_MAPPING_START_EVENT:
		return "a mapping";
	case YAML_ALIAS_EVENT:
		return "an alias";
	default:
		return "something else";
	}
}

/* Every node: no aliases, anchors or tags (they make the text mean something other than it reads). */
static int check_node(struct pctx *c, const char *key)
{
	const yaml_event_t *ev = &c->ev;
	const yaml_char_t *anchor = NULL, *tag = NULL;
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		return perr(c, here(c), "%s: anchors and aliases are not allowed", key);
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		return perr(c, here(c), "%s: unexpected YAML structure", key);
	}
	if (anchor)
		return perr(c, here(c), "%s: anchors and aliases are not allowed", key);
	if (tag) {
		QBUF;
		return perr(c, here(c), "%s: YAML tags (%s) are not allowed", key,
			    quote(tag, strlen((const char *)tag), qbuf));
	}
	return 0;
}

/* The current event must be a scalar; returns its text and length. */
static int get_scalar(struct pctx *c, const char *key, const char *what, const char **s, size_t *n)
{
	int r = check_node(c, key);
	if (r < 0)
		return r;
	if (c->ev.type != YAML_SCALAR_EVENT)
		return perr(c, here(c), "%s: expected %s, got %s", key, what, event_kind(&c->ev));
	*s = (const char *)c->ev.data.scalar.value;
	*n = c->ev.data.scalar.length;
	return 0;
}

static bool plain(const struct pctx *c)
{
	return c->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static bool is_null_text(const char *s, size_t n)
{
	return n == 0 || (n == 1 && s[0] == '~') ||
	       (n == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

/* ---- value parsers ---------------------------------------------------------------------------- */

/* Validate and normalise an absolute path: collapse repeated '/', drop a trailing '/', reject ".", "..",
 * NUL and control bytes. */
static int parse_path(struct pctx *c, const char *key, char **out)
{
	const char *s;
	size_t n;
	int r = get_scalar(c, key, "an absolute path", &s, &n);
	if (r < 0)
		return r;
	QBUF;
	if (plain(c) && is_null_text(s, n))
		return perr(c, here(c), "%s: expected an absolute path, got an empty value", key);
	if (memchr(s, '\0', n))
		return perr(c, here(c), "%s: path %s contains a NUL byte", key, quote(s, n, qbuf));
	if (n > POLICY_MAX_PATH)
		return perr(c, here(c), "%s: path is %zu bytes long, the limit is %d", key, n,
			    POLICY_MAX_PATH);
	if (s[0] != '/')
		return perr(c, here(c), "%s: path %s is not absolute (it must start with '/')", key,
			    quote(s, n, qbuf));
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return perr(c, here(c), "%s: path %s contains a control character", key,
				    quote(s, n, qbuf));
	_cleanup_free_ char *buf = malloc(n + 2);
	if (!buf)
		return -ENOMEM;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		while (i < n && s[i] == '/')
			i++;
		size_t start = i;
		while (i < n && s[i] != '/')
			i++;
		size_t clen = i - start;
		if (clen == 0)
			break;
		if ((clen == 1 && s[start] == '.') || (clen == 2 && s[start] == '.' && s[start + 1] == '.'))
			return perr(c, here(c),
				    "%s: path %s contains a \"%.*s\" component (paths must be normalised)",
				    key, quote(s, n, qbuf), (int)clen, s + start);
		buf[o++] = '/';
		memcpy(buf + o, s + start, clen);
		o += clen;
	}
	if (o == 0)
		buf[o++] = '/';
	buf[o] = '\0';
	*out = sl_steal_ptr(&buf);
	return 0;
}

/* Decimal unsigned integer, optionally with a K/M/G/T (powers of 1024) suffix. */
static int parse_number(struct pctx *c, const char *key, bool size, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *what = size ? "a size (bytes, optional suffix K, M, G or T)" : "a non-negative integer";
	const char *s;
	size_t n;
	int r = get_scalar(c, key, what, &s, &n);
	if (r < 0)
		return r;
	QBUF;
	if (n == 0 || (plain(c) && is_null_text(s, n)))
		return perr(c, here(c), "%s: expected %s, got an empty value", key, what);
	if (s[0] == '-')
		return perr(c, here(c), "%s: %s is negative; expected %s", key, quote(s, n, qbuf), what);
	if (s[0] < '0' || s[0] > '9')
		return perr(c, here(c), "%s: %s is not a number; expected %s", key, quote(s, n, qbuf), what);
	if (s[0] == '0' && n > 1 && s[1] >= '0' && s[1] <= '9')
		return perr(c, here(c), "%s: %s has a leading zero (ambiguous: YAML 1.1 reads it as octal)",
			    key, quote(s, n, qbuf));
	uint64_t v = 0;
	size_t i = 0;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return perr(c, here(c), "%s: %s is too large", key, quote(s, n, qbuf));
		v = v * 10 + d;
	}
	if (i < n) {
		unsigned shift = 0;
		if (size && i + 1 == n) {
			switch (s[i]) {
			case 'K':
				shift = 10;
				break;
			case 'M':
				shift = 20;
				break;
			case 'G':
				shift = 30;
				break;
			case 'T':
				shift = 40;
				break;
			default:
				break;
			}
		}
		if (!shift) {
			if (size)
				return perr(c, here(c),
					    "%s: %s has an invalid suffix; expected bytes with an "
					    "optional K, M, G or T suffix (powers of 1024)",
					    key, quote(s, n, qbuf));
			return perr(c, here(c), "%s: %s is not a plain decimal integer", key,
				    quote(s, n, qbuf));
		}
		if (v > (UINT64_MAX >> shift))
			return perr(c, here(c), "%s: %s is too large (overflows 64 bits)", key,
				    quote(s, n, qbuf));
		v <<= shift;
	}
	if (v < min || v > max)
		return perr(c, here(c), "%s: %s is out of range (%" PRIu64 "..%" PRIu64 ")", key,
			    quote(s, n, qbuf), min, max);
	*out = v;
	return 0;
}

/* Booleans are exactly the plain words true and false: YAML 1.1's yes/no/on/off and quoted strings are
 * refused, because different YAML readers disagree about them. */
static int parse_bool(struct pctx *c, const char *key, bool *out)
{
	const char *s;
	size_t n;
	int r = get_scalar(c, key, "true or false", &s, &n);
	if (r < 0)
		return r;
	if (plain(c) && n == 4 && !memcmp(s, "true", 4)) {
		*out = true;
		return 0;
	}
	if (plain(c) && n == 5 && !memcmp(s, "false", 5)) {
		*out = false;
		return 0;
	}
	QBUF;
	if (!plain(c))
		return perr(c, here(c), "%s: expected unquoted true or false, got the quoted string %s", key,
			    quote(s, n, qbuf));
	return perr(c, here(c), "%s: expected true or false, got %s (yes/no/on/off are not accepted)", key,
		    quote(s, n, qbuf));
}

/* ---- collections ------------------------------------------------------------------------------ */

/* The current event must start a list; on success the caller loops with seq_next(). */
static int seq_start(struct pctx *c, const char *key, const char *what)
{
	int r = check_node(c, key);
	if (r < 0)
		return r;
	if (c->ev.type != YAML_SEQUENCE_START_EVENT)
		return perr(c, here(c), "%s: expected a list of %s, got %s", key, what, event_kind(&c->ev));
	return 0;
}

/* Advance to the next list item. Returns 1 with the item as the current event, 0 at the end. */
static int seq_next(struct pctx *c)
{
	int r = next(c);
	if (r < 0)
		return r;
	return c->ev.type == YAML_SEQUENCE_END_EVENT ? 0 : 1;
}

static int map_start(struct pctx *c, const char *key)
{
	int r = check_node(c, key);
	if (r < 0)
		return r;
	if (c->ev.type != YAML_MAPPING_START_EVENT)
		return perr(c, here(c), "%s: expected a mapping (key: value), got %s", key,
			    event_kind(&c->ev));
	return 0;
}

/* Advance to the next key of a mapping. Returns 1 with the key scalar as the current event, 0 at the end. */
static int map_next_key(struct pctx *c, const char *where)
{
	int r = next(c);
	if (r < 0)
		return r;
	if (c->ev.type == YAML_MAPPING_END_EVENT)
		return 0;
	r = check_node(c, where);
	if (r < 0)
		return r;
	if (c->ev.type != YAML_SCALAR_EVENT)
		return perr(c, here(c), "%s: keys must be plain names, got %s", where, event_kind(&c->ev));
	return 1;
}

/* Mappings with a fixed set of keys: look the key up, refuse unknown and repeated ones. */
struct key_spec {
	const char *name;
	int (*parse)(struct pctx *c, const char *key);
};

static int lookup_key(struct pctx *c, const char *where, const struct key_spec *keys, size_t n_keys,
		      uint64_t *seen, size_t *idx)
{
	const char *k = (const char *)c->ev.data.scalar.value;
	size_t klen = c->ev.data.scalar.length;
	for (size_t i = 0; i < n_keys; i++) {
		if (strlen(keys[i].name) == klen && !memcmp(keys[i].name, k, klen)) {
			if (*seen & (UINT64_C(1) << i))
				return perr(c, here(c), "%s%sduplicate key \"%s\"", where ? where : "",
					    where ? ": " : "", keys[i].name);
			*seen |= UINT64_C(1) << i;
			*idx = i;
			return 0;
		}
	}
	char allowed[512];
	size_t o = 0;
	allowed[0] = '\0';
	for (size_t i = 0; i < n_keys && o < sizeof(allowed); i++) {
		int w = snprintf(allowed + o, sizeof(allowed) - o, "%s%s", i ? ", " : "", keys[i].name);
		if (w < 0)
			break;
		o += (size_t)w;
	}
	QBUF;
	if (where)
		return perr(c, here(c), "%s: unknown key %s (allowed: %s)", where, quote(k, klen, qbuf),
			    allowed);
	return perr(c, here(c), "unknown key %s (allowed: %s)", quote(k, klen, qbuf), allowed);
}

/* Walk a mapping whose keys are in keys[]. The current event is the mapping start. */
static int parse_fixed_map(struct pctx *c, const char *where, const struct key_spec *keys, size_t n_keys)
{
	uint64_t seen = 0;
	for (;;) {
		int r = map_next_key(c, where ? where : "top level");
		if (r <= 0)
			return r;
		size_t idx;
		r = lookup_key(c, where, keys, n_keys, &seen, &idx);
		if (r < 0)
			return r;
		r = next(c);
		if (r < 0)
			return r;
		char full[64];
		snprintf(full, sizeof(full), "%s%s%s", where ? where : "", where ? "." : "", keys[idx].name);
		r = keys[idx].parse(c, full);
		if (r < 0)
			return r;
	}
}

/* ---- the keys --------------------------------------------------------------------------------- */

static int key_workspace(struct pctx *c, const char *key)
{
	char *path = NULL;
	c->ws_mark = here(c);
	int r = parse_path(c, key, &path);
	if (r < 0)
		return r;
	if (!strcmp(path, "/")) {
		free(path);
		return perr(c, c->ws_mark,
			    "%s: \"/\" is not allowed: the whole host filesystem would be writable", key);
	}
	free(c->p->workspace);
	c->p->workspace = path;
	c->ws_given = true;
	return 0;
}

static int key_workspace_mount(struct pctx *c, const char *key)
{
	char *path = NULL;
	c->mount_mark = here(c);
	int r = parse_path(c, key, &path);
	if (r < 0)
		return r;
	if (!strcmp(path, "/")) {
		free(path);
		return perr(
		    c, c->mount_mark,
		    "%s: \"/\" is not allowed: the workspace would hide the sandbox's whole filesystem", key);
	}
	free(c->p->workspace_mount);
	c->p->workspace_mount = path;
	c->mount_given = true;
	return 0;
}

static bool in_list(char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

/* One read-only path entry: parse, refuse "/". */
static int ro_entry(struct pctx *c, const char *key, char **out)
{
	yaml_mark_t m = here(c);
	int r = parse_path(c, key, out);
	if (r < 0)
		return r;
	if (!strcmp(*out, "/")) {
		free(*out);
		*out = NULL;
		return perr(
		    c, m,
		    "%s: \"/\" is not allowed: binding the host root into the sandbox would expose the whole "
		    "host filesystem and defeat the sandbox; list the directories the workload needs",
		    key);
	}
	return 0;
}

static int key_read_only(struct pctx *c, const char *key)
{
	int r = seq_start(c, key, "absolute paths");
	if (r < 0)
		return r;
	/* Replaces the default list. */
	for (size_t i = 0; i < c->p->n_ro; i++)
		free(c->p->ro_paths[i]);
	c->p->n_ro = 0;
	while ((r = seq_next(c)) > 0) {
		yaml_mark_t m = here(c);
		char *path = NULL;
		r = ro_entry(c, key, &path);
		if (r < 0)
			return r;
		if (in_list(c->p->ro_paths, c->p->n_ro, path)) {
			free(path);
			continue;
		}
		if (c->p->n_ro >= SL_POLICY_MAX_PATHS) {
			free(path);
			return perr(c, m, "%s: too many entries (at most %d)", key, SL_POLICY_MAX_PATHS);
		}
		c->ro_mark[c->p->n_ro] = m;
		c->ro_key[c->p->n_ro] = "read_only";
		c->p->ro_paths[c->p->n_ro++] = path;
	}
	return r;
}

static int key_read_only_extra(struct pctx *c, const char *key)
{
	int r = seq_start(c, key, "absolute paths");
	if (r < 0)
		return r;
	while ((r = seq_next(c)) > 0) {
		yaml_mark_t m = here(c);
		char *path = NULL;
		r = ro_entry(c, key, &path);
		if (r < 0)
			return r;
		if (in_list(c->extra, c->n_extra, path)) {
			free(path);
			continue;
		}
		if (c->n_extra >= SL_POLICY_MAX_PATHS) {
			free(path);
			return perr(c, m, "%s: too many entries (at most %d)", key, SL_POLICY_MAX_PATHS);
		}
		c->extra_mark[c->n_extra] = m;
		c->extra[c->n_extra++] = path;
	}
	return r;
}

static int key_canaries(struct pctx *c, const char *key)
{
	int r = seq_start(c, key, "absolute paths");
	if (r < 0)
		return r;
	for (size_t i = 0; i < c->p->n_canaries; i++)
		free(c->p->canaries[i]);
	c->p->n_canaries = 0;
	while ((r = seq_next(c)) > 0) {
		yaml_mark_t m = here(c);
		char *path = NULL;
		r = parse_path(c, key, &path);
		if (r < 0)
			return r;
		if (!strcmp(path, "/")) {
			free(path);
			return perr(c, m, "%s: \"/\" cannot be a canary; name a file", key);
		}
		if (in_list(c->p->canaries, c->p->n_canaries, path)) {
			free(path);
			continue;
		}
		if (c->p->n_canaries >= SL_POLICY_MAX_PATHS) {
			free(path);
			return perr(c, m, "%s: too many entries (at most %d)", key, SL_POLICY_MAX_PATHS);
		}
		c->p->canaries[c->p->n_canaries++] = path;
	}
	return r;
}

static int key_allow_tcp_connect(struct pctx *c, const char *key)
{
	int r = seq_start(c, key, "TCP ports");
	if (r < 0)
		return r;
	c->p->n_tcp_connect = 0;
	while ((r = seq_next(c)) > 0) {
		yaml_mark_t m = here(c);
		uint64_t port;
		r = parse_number(c, key, false, 1, 65535, &port);
		if (r < 0)
			return r;
		bool dup = false;
		for (size_t i = 0; i < c->p->n_tcp_connect; i++)
			dup = dup || c->p->tcp_connect[i] == port;
		if (dup)
			continue;
		if (c->p->n_tcp_connect >= SL_POLICY_MAX_PORTS)
			return perr(c, m, "%s: too many ports (at most %d)", key, SL_POLICY_MAX_PORTS);
		c->p->tcp_connect[c->p->n_tcp_connect++] = (uint16_t)port;
	}
	return r;
}

static const struct key_spec network_keys[] = {
    {"allow_tcp_connect", key_allow_tcp_connect},
};

static int key_network(struct pctx *c, const char *key)
{
	int r = map_start(c, key);
	if (r < 0)
		return r;
	return parse_fixed_map(c, key, network_keys, SL_ARRAY_LEN(network_keys));
}

#define LIMIT_KEY(fn, field, is_size, min, max)                                                              \
	static int fn(struct pctx *c, const char *key)                                                       \
	{                                                                                                    \
		return parse_number(c, key, is_size, min, max, &c->p->limits.field);                         \
	}
LIMIT_KEY(key_memory, memory_bytes, true, 0, UINT64_MAX)
LIMIT_KEY(key_pids, pids, false, 0, POLICY_MAX_PIDS)
LIMIT_KEY(key_nofile, nofile, false, 1, POLICY_MAX_NOFILE)
LIMIT_KEY(key_cpu_seconds, cpu_seconds, false, 1, POLICY_MAX_SECONDS)
LIMIT_KEY(key_file_size, file_size, true, 1, UINT64_MAX)
LIMIT_KEY(key_tmp_size, tmp_size, true, 1, UINT64_MAX)
LIMIT_KEY(key_wall_seconds, wall_seconds, false, 0, POLICY_MAX_SECONDS)
#undef LIMIT_KEY

static const struct key_spec limit_keys[] = {
    {"memory", key_memory},
    {"pids", key_pids},
    {"nofile", key_nofile},
    {"cpu_seconds", key_cpu_seconds},
    {"file_size", key_file_size},
    {"tmp_size", key_tmp_size},
    {"wall_seconds", key_wall_seconds},
};

static int key_limits(struct pctx *c, const char *key)
{
	int r = map_start(c, key);
	if (r < 0)
		return r;
	return parse_fixed_map(c, key, limit_keys, SL_ARRAY_LEN(limit_keys));
}

static int key_tmp(struct pctx *c, const char *key)
{
	return parse_bool(c, key, &c->p->tmp);
}

static int key_redact_argv(struct pctx *c, const char *key)
{
	return parse_bool(c, key, &c->p->redact_argv);
}

static int key_record_opens(struct pctx *c, const char *key)
{
	return parse_bool(c, key, &c->p->record_opens);
}

static const struct key_spec sensor_keys[] = {
    {"record_opens", key_record_opens},
};

static int key_sensor(struct pctx *c, const char *key)
{
	int r = map_start(c, key);
	if (r < 0)
		return r;
	return parse_fixed_map(c, key, sensor_keys, SL_ARRAY_LEN(sensor_keys));
}

static int key_on_full(struct pctx *c, const char *key)
{
	const char *s;
	size_t n;
	int r = get_scalar(c, key, "stop or wait", &s, &n);
	if (r < 0)
		return r;
	if (plain(c) && n == 4 && !memcmp(s, "stop", 4)) {
		c->p->record_wait_on_full = false;
		return 0;
	}
	if (plain(c) && n == 4 && !memcmp(s, "wait", 4)) {
		c->p->record_wait_on_full = true;
		return 0;
	}
	QBUF;
	return perr(c, here(c), "%s: expected stop or wait, got %s", key, quote(s, n, qbuf));
}

static const struct key_spec record_keys[] = {
    {"on_full", key_on_full},
};

static int key_record(struct pctx *c, const char *key)
{
	int r = map_start(c, key);
	if (r < 0)
		return r;
	return parse_fixed_map(c, key, record_keys, SL_ARRAY_LEN(record_keys));
}

/* ASCII only, independent of the caller's locale. */
static bool env_name_char(char ch, bool first)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_' ||
	       (!first && ch >= '0' && ch <= '9');
}

static bool env_name_ok(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!env_name_char(s[i], i == 0))
			return false;
	return true;
}

static int key_env(struct pctx *c, const char *key)
{
	int r = map_start(c, key);
	if (r < 0)
		return r;
	/* Replaces the default environment. */
	for (size_t i = 0; i < c->p->n_env; i++)
		free(c->p->env[i]);
	c->p->n_env = 0;
	c->env_given = true;
	while ((r = map_next_key(c, key)) > 0) {
		const char *s = (const char *)c->ev.data.scalar.value;
		size_t n = c->ev.data.scalar.length;
		yaml_mark_t m = here(c);
		QBUF;
		if (!env_name_ok(s, n))
			return perr(c, m, "%s: invalid variable name %s (must match [A-Za-z_][A-Za-z0-9_]*)",
				    key, quote(s, n, qbuf));
		if (n >= 10 && !strncasecmp(s, "SIGHTLINE_", 10))
			return perr(
			    c, m,
			    "%s: variable %s is reserved: names starting with SIGHTLINE_ are never passed "
			    "to the workload (its identity comes from the server, not its environment)",
			    key, quote(s, n, qbuf));
		for (size_t i = 0; i < c->p->n_env; i++)
			if (!strncmp(c->p->env[i], s, n) && c->p->env[i][n] == '=')
				return perr(c, m, "%s: duplicate key %s", key, quote(s, n, qbuf));
		if (c->p->n_env >= SL_POLICY_MAX_PATHS)
			return perr(c, m, "%s: too many variables (at most %d)", key, SL_POLICY_MAX_PATHS);
		_cleanup_free_ char *name = strndup(s, n);
		if (!name)
			return -ENOMEM;
		r = next(c);
		if (r < 0)
			return r;
		char full[96];
		snprintf(full, sizeof(full), "%s.%s", key, name);
		const char *v;
		size_t vlen;
		r = get_scalar(c, full, "a string value", &v, &vlen);
		if (r < 0)
			return r;
		if (plain(c) && is_null_text(v, vlen))
			return perr(c, here(c), "%s: value is null; write \"\" for an empty string", full);
		if (memchr(v, '\0', vlen))
			return perr(c, here(c), "%s: value contains a NUL byte", full);
		if (n + 1 + vlen > POLICY_MAX_ENV_STR)
			return perr(c, here(c),
				    "%s: NAME=VALUE is longer than %d bytes (the kernel's execve limit)",
				    full, POLICY_MAX_ENV_STR);
		char *entry;
		if (asprintf(&entry, "%s=%.*s", name, (int)vlen, v) < 0)
			return -ENOMEM;
		c->p->env[c->p->n_env++] = entry;
	}
	return r;
}

static const struct key_spec top_keys[] = {
    {"workspace", key_workspace},
    {"workspace_mount", key_workspace_mount},
    {"read_only", key_read_only},
    {"read_only_extra", key_read_only_extra},
    {"canaries", key_canaries},
    {"network", key_network},
    {"limits", key_limits},
    {"tmp", key_tmp},
    {"redact_argv", key_redact_argv},
    {"sensor", key_sensor},
    {"record", key_record},
    {"env", key_env},
};

/* ---- whole-policy checks ---------------------------------------------------------------------- */

/* a is b or an ancestor of b. Both normalised. */
static bool path_covers(const char *a, const char *b)
{
	if (!strcmp(a, "/"))
		return true;
	size_t n = strlen(a);
	return !strncmp(a, b, n) && (b[n] == '\0' || b[n] == '/');
}

static int finish(struct pctx *c)
{
	struct sl_policy *p = c->p;
	/* read_only_extra goes after the (default or given) list, whatever the key order was. */
	for (size_t i = 0; i < c->n_extra; i++) {
		if (in_list(p->ro_paths, p->n_ro, c->extra[i]))
			continue;
		if (p->n_ro >= SL_POLICY_MAX_PATHS)
			return perr(
			    c, c->extra_mark[i],
			    "read_only_extra: too many read-only paths (read_only and read_only_extra "
			    "together allow at most %d)",
			    SL_POLICY_MAX_PATHS);
		c->ro_mark[p->n_ro] = c->extra_mark[i];
		c->ro_key[p->n_ro] = "read_only_extra";
		p->ro_paths[p->n_ro++] = sl_steal_ptr(&c->extra[i]);
	}
	/* Mount points must not overlap: the result would depend on mount order. */
	const char *mount = p->workspace_mount ? p->workspace_mount : default_mount;
	for (size_t i = 0; i < p->n_ro; i++) {
		const char *ro = p->ro_paths[i];
		if (!path_covers(ro, mount) && !path_covers(mount, ro))
			continue;
		bool blame_mount = c->mount_given || !c->ro_key[i];
		yaml_mark_t m = blame_mount ? c->mount_mark : c->ro_mark[i];
		const char *key = blame_mount ? "workspace_mount" : c->ro_key[i];
		if (path_covers(ro, mount))
			return perr(c, m,
				    "%s: workspace_mount %s is %s read-only path %s: the writable workspace "
				    "cannot be mounted at or inside a read-only bind",
				    key, mount, strcmp(ro, mount) ? "inside" : "the same as", ro);
		return perr(c, m,
			    "%s: read-only path %s is inside workspace_mount %s: it would be bound into the "
			    "writable workspace",
			    key, ro, mount);
	}
	if (p->tmp && (path_covers("/tmp", mount) || path_covers(mount, "/tmp")))
		return perr(
		    c, c->mount_mark,
		    "workspace_mount: %s overlaps the private /tmp (tmp: true); choose another mount point "
		    "or set tmp: false",
		    mount);
	/* The workspace is writable: if it contains a read-only path, that path is writable through it. */
	if (p->workspace) {
		for (size_t i = 0; i < p->n_ro; i++) {
			if (path_covers(p->workspace, p->ro_paths[i]))
				return perr(
				    c, c->ws_mark,
				    "workspace: host directory %s contains read-only path %s, which would be "
				    "writable through the workspace",
				    p->workspace, p->ro_paths[i]);
		}
	}
	/* HOME follows workspace_mount unless env was given: when the HOME entry pointed at the old mount
	 * point (as the default does), it now points at the new one. */
	if (!c->env_given && c->home_idx >= 0 && strcmp(mount, c->old_mount ? c->old_mount : "")) {
		char *home = str_concat(default_home_prefix, mount);
		if (!home)
			return -ENOMEM;
		free(p->env[c->home_idx]);
		p->env[c->home_idx] = home;
	}
	return 0;
}

/* ---- entry points ----------------------------------------------------------------------------- */

static int parse_stream(struct pctx *c)
{
	int r = next(c);
	if (r < 0)
		return r;
	if (c->ev.type != YAML_STREAM_START_EVENT)
		return perr(c, here(c), "expected the start of a YAML stream");
	r = next(c);
	if (r < 0)
		return r;
	if (c->ev.type == YAML_STREAM_END_EVENT)
		return 0; /* empty (or comments only): all defaults */
	if (c->ev.type != YAML_DOCUMENT_START_EVENT)
		return perr(c, here(c), "expected a YAML document");
	r = next(c);
	if (r < 0)
		return r;
	r = check_node(c, "top level");
	if (r < 0)
		return r;
	if (c->ev.type != YAML_MAPPING_START_EVENT)
		return perr(c, here(c), "the top level must be a mapping (key: value lines), got %s",
			    event_kind(&c->ev));
	r = parse_fixed_map(c, NULL, top_keys, SL_ARRAY_LEN(top_keys));
	if (r < 0)
		return r;
	r = next(c);
	if (r < 0)
		return r;
	if (c->ev.type != YAML_DOCUMENT_END_EVENT)
		return perr(c, here(c), "expected the end of the document");
	r = next(c);
	if (r < 0)
		return r;
	if (c->ev.type == YAML_DOCUMENT_START_EVENT)
		return perr(c, here(c), "only one YAML document is allowed");
	if (c->ev.type != YAML_STREAM_END_EVENT)
		return perr(c, here(c), "expected the end of the input");
	return 0;
}

int sl_policy_parse(const char *text, size_t len, const char *name, struct sl_policy *p, char *err,
		    size_t errlen)
{
	if (!name)
		name = "<policy>";
	if (err && errlen)
		err[0] = '\0';
	if (!p || (!text && len)) {
		set_err(err, errlen, "%s: no policy given", name);
		return -EINVAL;
	}
	if (len > POLICY_MAX_BYTES) {
		set_err(err, errlen, "%s: policy is %zu bytes, more than the %d byte (1 MiB) limit", name,
			len, POLICY_MAX_BYTES);
		return -EFBIG;
	}

	struct sl_policy work;
	int r = policy_copy(&work, p);
	if (r < 0) {
		set_err(err, errlen, "%s: out of memory", name);
		return r;
	}
	struct pctx *c = calloc(1, sizeof(*c));
	if (!c) {
		sl_policy_free(&work);
		set_err(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	c->name = name;
	c->text = (const unsigned char *)(text ? text : "");
	c->len = len;
	c->err = err;
	c->errlen = errlen;
	c->p = &work;
	c->old_mount = p->workspace_mount;
	c->home_idx = -1;
	for (size_t i = 0; i < work.n_env && p->workspace_mount; i++) {
		size_t hl = strlen(default_home_prefix);
		if (!strncmp(work.env[i], default_home_prefix, hl) &&
		    !strcmp(work.env[i] + hl, p->workspace_mount)) {
			c->home_idx = (ssize_t)i;
			break;
		}
	}
	if (!yaml_parser_initialize(&c->parser)) {
		r = -ENOMEM;
		set_err(err, errlen, "%s: out of memory", name);
		goto out;
	}
	yaml_parser_set_input_string(&c->parser, c->text, len);
	yaml_parser_set_encoding(&c->parser, YAML_UTF8_ENCODING);

	r = parse_stream(c);
	if (r >= 0)
		r = finish(c);
	if (r == -ENOMEM && err && errlen && !err[0])
		set_err(err, errlen, "%s: out of memory", name);
	yaml_event_delete(&c->ev);
	yaml_parser_delete(&c->parser);
out:
	for (size_t i = 0; i < c->n_extra; i++)
		free(c->extra[i]);
	free(c);
	if (r < 0) {
		sl_policy_free(&work);
		return r;
	}
	sl_policy_free(p);
	*p = work;
	return 0;
}

int sl_policy_load(const char *path, struct sl_policy *p, char *err, size_t errlen)
{
	if (!path) {
		set_err(err, errlen, "<policy>: no path given");
		return -EINVAL;
	}
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = sl_read_file(path, POLICY_MAX_BYTES, &text, &len);
	if (r == -EFBIG) {
		set_err(err, errlen, "%s: policy is larger than the %d byte (1 MiB) limit", path,
			POLICY_MAX_BYTES);
		return r;
	}
	if (r < 0) {
		set_err(err, errlen, "%s: cannot read: %s", path, strerrordesc_np(-r));
		return r;
	}
	return sl_policy_parse(text, len, path, p, err, errlen);
}
