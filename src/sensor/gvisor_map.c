/* gVisor point -> sightline event. Every string comes from the Sentry (untrusted): it goes
 * through the JSON writer (escaped, bounded) and nothing from it chooses the identity, the
 * sandbox or the class of the event. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "sensor/gvisor_map.h"
#include "sensor/paths.h"

static void jstr(struct sl_json *j, const char *key, struct sl_gv_str s, size_t max)
{
	if (s.p)
		sl_json_strn(j, key, s.p, s.n, max);
	else
		sl_json_str(j, key, "", 0);
}

static void ocsf(struct sl_json *j, int cls, int act, int disp)
{
	sl_json_obj_open(j, "ocsf");
	sl_json_int(j, "class_uid", cls);
	sl_json_int(j, "activity_id", act);
	if (disp)
		sl_json_int(j, "disposition_id", disp);
	sl_json_obj_close(j);
}

static void task(struct sl_json *j, const struct sl_gv_msg *m)
{
	/* Sandbox pid namespace ids as the Sentry reports them; there is no host pid: the workload's
	 * tasks are Sentry threads, not host processes. */
	sl_json_int(j, "pid", m->ctx.tgid);
	sl_json_int(j, "tid", m->ctx.tid);
}

static void result(struct sl_json *j, const struct sl_gv_msg *m)
{
	/* gVisor reports the raw result and errno separately; the workload saw -errno. */
	int64_t r = m->errorno ? -m->errorno : m->result;
	sl_json_int(j, "result", r);
	if (m->errorno) {
		const char *n = m->errorno > 0 && m->errorno < 4096 ? strerrorname_np((int)m->errorno) : NULL;
		sl_json_str(j, "errno", n ? n : "E?", 0);
	}
}

static void strv(struct sl_json *j, const struct sl_gv_strv *v)
{
	sl_json_arr_open(j, "argv");
	for (uint32_t i = 0; i < v->n && i < SL_GV_ARGV_KEEP; i++)
		sl_json_strn(j, NULL, v->v[i].p, v->v[i].n, 256);
	sl_json_arr_close(j);
	sl_json_uint(j, "argc", v->n);
}

/* The same spelling as the native sensor (sensor_util.c sl_flags_str), kept here so this pure
 * file links alone into the fuzzer. */
static void flags_str(int64_t flags, char *buf, size_t len)
{
	static const struct {
		int bit;
		const char *name;
	} names[] = {{O_CREAT, "O_CREAT"},	 {O_EXCL, "O_EXCL"},	    {O_NOCTTY, "O_NOCTTY"},
		     {O_TRUNC, "O_TRUNC"},	 {O_APPEND, "O_APPEND"},    {O_NONBLOCK, "O_NONBLOCK"},
		     {O_DSYNC, "O_DSYNC"},	 {O_DIRECT, "O_DIRECT"},    {O_DIRECTORY, "O_DIRECTORY"},
		     {O_NOFOLLOW, "O_NOFOLLOW"}, {O_NOATIME, "O_NOATIME"},  {O_CLOEXEC, "O_CLOEXEC"},
		     {O_PATH, "O_PATH"},	 {__O_TMPFILE, "O_TMPFILE"}};
	int f = (int)flags;
	int acc = f & O_ACCMODE;
	size_t off = (size_t)snprintf(buf, len, "%s",
				      acc == O_RDONLY	? "O_RDONLY"
				      : acc == O_WRONLY ? "O_WRONLY"
				      : acc == O_RDWR	? "O_RDWR"
							: "O_ACC3");
	for (size_t i = 0; i < SL_ARRAY_LEN(names) && off < len; i++)
		if ((f & names[i].bit) == names[i].bit)
			off += (size_t)snprintf(buf + off, len - off, "|%s", names[i].name);
}

static const char *open_name(int64_t sysno)
{
	switch (sysno) {
	case 2:
		return "open";
	case 85:
		return "creat";
	case 257:
		return "openat";
	default:
		return "open?";
	}
}

/* Absolute path of the request: the pathname if absolute, else joined to the directory fd's path
 * (fd_path) or, for AT_FDCWD, the task's cwd; then lexically normalised. false if it cannot be
 * made absolute (the pathname is then recorded as given). */
static bool absolute(const struct sl_gv_msg *m, char *out, size_t len)
{
	if (!m->pathname.p)
		return false;
	struct sl_gv_str base = {NULL, 0};
	if (m->pathname.n && m->pathname.p[0] == '/')
		base.p = "", base.n = 0;
	else if (m->fd == -100) /* AT_FDCWD */
		base = m->ctx.cwd;
	else
		base = m->fd_path;
	if (!base.p || (base.n && base.p[0] != '/') || memchr(base.p, '\0', base.n) ||
	    memchr(m->pathname.p, '\0', m->pathname.n) || m->pathname.n == 0)
		return false;
	int n = snprintf(out, len, "%.*s/%.*s", (int)base.n, base.p, (int)m->pathname.n, m->pathname.p);
	if (n < 0 || (size_t)n >= len)
		return false;
	sl_path_normalize(out);
	return true;
}

static int map_open(const struct sl_gv_msg *m, const struct sl_gv_map_cfg *cfg, struct sl_json *j,
		    struct sl_json *deny)
{
	char abs[2 * SL_GV_PATH_MAX + 2], fl[256];
	bool have = absolute(m, abs, sizeof(abs));
	int f = (int)m->flags;
	if (m->sysno == 85)
		f = O_WRONLY | O_CREAT | O_TRUNC;
	flags_str(f, fl, sizeof(fl));
	bool wr =
	    (f & O_ACCMODE) != O_RDONLY || (f & (O_CREAT | O_TRUNC)) || (f & __O_TMPFILE) == __O_TMPFILE;
	task(j, m);
	sl_json_str(j, "syscall", open_name(m->sysno), 0);
	if (have)
		sl_json_str(j, "path", abs, 0);
	else
		jstr(j, "path", m->pathname, 0);
	if (have && (m->pathname.n != strlen(abs) || memcmp(m->pathname.p, abs, m->pathname.n)))
		jstr(j, "requested", m->pathname, 0);
	sl_json_str(j, "flags", fl, 0);
	sl_json_bool(j, "write", wr);
	result(j, m);
	bool canary = false;
	if (cfg->policy && have)
		canary = sl_path_is_canary(cfg->policy, abs);
	sl_json_bool(j, "canary", canary);
	/* What the Sentry says it did: gVisor performs the open itself, there is no second copy of
	 * the arguments to compare, so "exact" means "as reported by the Sentry". */
	sl_json_bool(j, "exact", true);
	/* A refusal is honest to name only where the errno can only come from a layer: EROFS is the
	 * read-only bind of the policy, EACCES/EPERM the file's permissions (the same sentence the
	 * native sensor writes for its kernel layer). Paths the policy hides simply do not exist
	 * in the bundle (ENOENT): no deny can be told from a missing file there. */
	const char *reason = m->errorno == EROFS			     ? "read-only mount"
			     : (m->errorno == EACCES || m->errorno == EPERM) ? "file permissions"
									     : NULL;
	ocsf(j, 1001, 14, reason ? 2 : 1);
	if (!reason || !deny)
		return 1;
	task(deny, m);
	sl_json_str(deny, "layer", "gvisor", 0);
	sl_json_str(deny, "syscall", open_name(m->sysno), 0);
	const char *en = strerrorname_np((int)m->errorno);
	sl_json_str(deny, "errno", en ? en : "E?", 0);
	sl_json_str(deny, "reason", reason, 0);
	if (have)
		sl_json_str(deny, "path", abs, 0);
	else
		jstr(deny, "path", m->pathname, 0);
	ocsf(deny, 1001, 14, 2);
	return 2;
}

/* Raw sockaddr bytes (from the workload, via the Sentry) -> family/address/port. */
static void sockaddr_json(struct sl_json *j, struct sl_gv_str a)
{
	const uint8_t *b = (const uint8_t *)a.p;
	unsigned fam = a.n >= 2 ? (unsigned)(b[0] | b[1] << 8) : 0;
	char txt[64];
	if (fam == 2 && a.n >= 8) {
		snprintf(txt, sizeof(txt), "%u.%u.%u.%u", b[4], b[5], b[6], b[7]);
		sl_json_str(j, "family", "inet", 0);
		sl_json_str(j, "address", txt, 0);
		sl_json_int(j, "port", b[2] << 8 | b[3]);
	} else if (fam == 10 && a.n >= 24) {
		size_t off = 0;
		for (int i = 0; i < 8; i++)
			off += (size_t)snprintf(txt + off, sizeof(txt) - off, "%s%x", i ? ":" : "",
						(unsigned)(b[8 + 2 * i] << 8 | b[9 + 2 * i]));
		sl_json_str(j, "family", "inet6", 0);
		sl_json_str(j, "address", txt, 0);
		sl_json_int(j, "port", b[2] << 8 | b[3]);
	} else if (fam == 1) {
		const char *p = a.p + 2;
		size_t n = a.n - 2;
		sl_json_str(j, "family", "unix", 0);
		if (n && p[0] == '\0') {
			const char *e = memchr(p + 1, '\0', n - 1);
			size_t k = e ? (size_t)(e - (p + 1)) : n - 1;
			char ab[48];
			snprintf(ab, sizeof(ab), "@%.*s", (int)(k > 40 ? 40 : k), p + 1);
			sl_json_str(j, "address", ab, 0);
		} else {
			const char *e = memchr(p, '\0', n);
			size_t k = e ? (size_t)(e - p) : n;
			sl_json_strn(j, "address", p, k > 93 ? 93 : k, 0);
		}
	} else {
		sl_json_str(j, "family", "other", 0);
		sl_json_str(j, "address", "", 0);
	}
}

int sl_gv_map(const struct sl_gv_msg *m, const struct sl_gv_map_cfg *cfg, struct sl_json *j, const char **cls,
	      struct sl_json *deny)
{
	/* Identity comes from the socket the launcher bound for this sandbox and the id it chose;
	 * a point claiming any other container (or none) is not this sandbox's, and never
	 * another's. */
	const struct sl_gv_str *cid = &m->ctx.container_id;
	if (!cfg->container_id || !cid->p || cid->n != strlen(cfg->container_id) ||
	    memcmp(cid->p, cfg->container_id, cid->n))
		return -EXDEV;
	switch (m->type) {
	case SL_GV_CONTAINER_START:
		/* The container's init process: the Sentry creates it without an execve. */
		*cls = "process.exec";
		task(j, m);
		sl_json_int(j, "ppid", 0);
		sl_json_str(j, "syscall", "container/start", 0);
		if (m->argv.n)
			jstr(j, "executable", m->argv.v[0], 0);
		else
			sl_json_str(j, "executable", "", 0);
		strv(j, &m->argv);
		jstr(j, "cwd", m->cwd.p ? m->cwd : m->ctx.cwd, 0);
		sl_json_bool(j, "exact", true);
		ocsf(j, 1007, 1, 0);
		return 1;
	case SL_GV_SENTRY_EXEC:
		*cls = "process.exec";
		task(j, m);
		sl_json_str(j, "syscall", "execve", 0);
		jstr(j, "executable", m->binary_path, 0);
		strv(j, &m->argv);
		jstr(j, "cwd", m->ctx.cwd, 0);
		if (m->ctx.cred.present)
			sl_json_uint(j, "uid", m->ctx.cred.euid);
		sl_json_uint(j, "binary_mode", m->binary_mode);
		sl_json_uint(j, "binary_uid", m->binary_uid);
		sl_json_bool(j, "exact", true);
		ocsf(j, 1007, 1, 0);
		return 1;
	case SL_GV_SENTRY_CLONE:
		*cls = "process.clone";
		task(j, m);
		sl_json_int(j, "child_pid", m->created_tgid);
		sl_json_int(j, "child_tid", m->created_tid);
		sl_json_bool(j, "thread", m->created_tgid == m->ctx.tgid);
		sl_json_uint(j, "flags", (uint64_t)m->clone_flags);
		ocsf(j, 1007, 1, 0);
		return 1;
	case SL_GV_SENTRY_EXIT_NOTIFY_PARENT: {
		*cls = "process.exit";
		task(j, m);
		int st = m->exit_status;
		if ((st & 0x7f) == 0) {
			sl_json_int(j, "exit_code", (st >> 8) & 0xff);
			sl_json_null(j, "signal");
		} else {
			sl_json_null(j, "exit_code");
			const char *sn = sigabbrev_np(st & 0x7f);
			char sig[32];
			snprintf(sig, sizeof(sig), "SIG%s", sn ? sn : "?");
			sl_json_str(j, "signal", sig, 0);
		}
		sl_json_int(j, "wait_status", st);
		ocsf(j, 1007, 2, 0);
		return 1;
	}
	case SL_GV_SENTRY_TASK_EXIT:
		return 0; /* one per thread; the process's exit is exit_notify_parent */
	case SL_GV_SYSCALL_OPEN:
		if (!m->has_exit)
			return 0;
		*cls = "file.open";
		return map_open(m, cfg, j, deny);
	case SL_GV_SYSCALL_CONNECT:
	case SL_GV_SYSCALL_BIND:
		if (!m->has_exit)
			return 0; /* the enter point is counted: a connect that never returns shows there */
		*cls = m->type == SL_GV_SYSCALL_BIND ? "network.bind" : "network.connect";
		task(j, m);
		sockaddr_json(j, m->address);
		if (m->fd_path.p)
			jstr(j, "socket", m->fd_path, 256);
		result(j, m);
		sl_json_bool(j, "exact", true);
		ocsf(j, 4001, 1, 1);
		return 1;
	case SL_GV_SYSCALL_SOCKET:
		if (!m->has_exit)
			return 0;
		*cls = "network.socket";
		task(j, m);
		sl_json_int(j, "domain", m->domain);
		sl_json_int(j, "type", m->sock_type);
		sl_json_int(j, "protocol", m->protocol);
		result(j, m);
		ocsf(j, 4001, 99, 0);
		return 1;
	case SL_GV_SYSCALL_EXECVE:
		/* Successful execs are the Sentry's exec point; failed ones are not recorded, as in the
		 * native sensor (a shell walking PATH). The caller counts them. */
		return 0;
	}
	return 0;
}
