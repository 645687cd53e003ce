/* The notification loop. Trust: the notification (syscall number, arguments, tid) comes from the
 * kernel and is trusted; everything behind an argument pointer is workload memory and is hostile:
 * it is read once, bounded, and the copy is what we both check and act on. Acting on our copy
 * (emulating the open or connect) is what keeps the record true under a TOCTOU race: the kernel
 * never re-reads a buffer the workload can still change. Where we must let the kernel act on
 * workload memory (exec, path-based unix connect) the event says "exact": false unless no other
 * thread could have changed the buffer. */
#include "sensor/supervisor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "common/json.h"
#include "common/util.h"
#include "sandbox/kabi.h"
#include "sensor/paths.h"
#include "sensor/redact.h"
#include "sensor/syscalls.h"

#define PATH_MAXLEN 4096
#define ARGV_MAX    64	/* recorded arguments; argc is always exact */
#define ARG_MAX_LEN 256 /* recorded bytes per argument */

/* ---- per-thread task info cache ------------------------------------------------------------ */

#define CACHE_SLOTS 1024
struct cache_ent {
	pid_t tid;
	int pidfd; /* thread pidfd: readable once the thread has exited, so a reused tid is noticed */
	struct sl_task_info ti;
};
struct sl_tid_cache {
	struct cache_ent e[CACHE_SLOTS];
};

int sl_task_info(pid_t tid, struct sl_task_info *ti)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = sl_read_full(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return n < 0 ? (int)n : -EIO;
	buf[n] = '\0';
	memset(ti, 0, sizeof(*ti));
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (!strncmp(l, "Tgid:", 5))
			ti->tgid = (pid_t)strtol(l + 5, NULL, 10);
		else if (!strncmp(l, "PPid:", 5))
			ti->ppid = (pid_t)strtol(l + 5, NULL, 10);
		else if (!strncmp(l, "Threads:", 8))
			ti->threads = (unsigned)strtoul(l + 8, NULL, 10);
		else if (!strncmp(l, "Umask:", 6))
			ti->umask = (unsigned)strtoul(l + 6, NULL, 8);
		else if (!strncmp(l, "NStgid:", 7) || !strncmp(l, "NSpid:", 6)) {
			/* The last number is the innermost (sandbox) namespace's view. */
			char *end = strchr(l, '\n');
			char *p = end ? end : l + strlen(l);
			while (p > l && (p[-1] == ' ' || p[-1] == '\t'))
				p--;
			while (p > l && p[-1] >= '0' && p[-1] <= '9')
				p--;
			pid_t v = (pid_t)strtol(p, NULL, 10);
			unsigned levels = 0;
			for (char *q = strchr(l, ':') + 1; q < (end ? end : l + strlen(l)); q++)
				if (*q >= '0' && *q <= '9' && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == ':'))
					levels++;
			ti->levels = levels;
			if (l[2] == 't')
				ti->ns_pid = v;
			else
				ti->ns_tid = v;
		}
	}
	return ti->tgid > 0 ? 0 : -ESRCH;
}

static bool pidfd_exited(int pidfd)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	return poll(&p, 1, 0) != 0;
}

/* Task info for tid, cached while that thread lives. */
static int task_get(struct sl_supervisor *s, pid_t tid, struct sl_task_info *out, bool fresh)
{
	struct cache_ent *e = &s->cache->e[(unsigned)tid % CACHE_SLOTS];
	if (!fresh && e->tid == tid && e->pidfd >= 0 && !pidfd_exited(e->pidfd)) {
		*out = e->ti;
		return 0;
	}
	if (e->pidfd >= 0)
		close(e->pidfd);
	e->pidfd = -1;
	e->tid = 0;
	int pidfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	if (pidfd < 0)
		return -errno;
	int r = sl_task_info(tid, &e->ti);
	if (r < 0) {
		close(pidfd);
		return r;
	}
	e->tid = tid;
	e->pidfd = pidfd;
	*out = e->ti;
	return 0;
}

/* ---- reading workload memory (hostile) ------------------------------------------------------ */

/* Read exactly len bytes at addr of tid. */
static int mem_read(pid_t tid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

/* Read a NUL-terminated string of at most max-1 bytes. Reads page by page so a string that ends
 * just before an unmapped page is still read. Returns its length, -ENAMETOOLONG, or -EFAULT. */
static ssize_t mem_read_str(pid_t tid, uint64_t addr, char *buf, size_t max)
{
	if (!addr)
		return -EFAULT;
	size_t got = 0;
	while (got < max - 1) {
		uint64_t cur = addr + got;
		size_t chunk = 4096 - (size_t)(cur & 4095);
		if (chunk > max - 1 - got)
			chunk = max - 1 - got;
		int r = mem_read(tid, cur, buf + got, chunk);
		if (r < 0)
			return r;
		char *nul = memchr(buf + got, '\0', chunk);
		if (nul)
			return nul - buf;
		got += chunk;
	}
	buf[max - 1] = '\0';
	return -ENAMETOOLONG;
}

/* ---- event helpers ------------------------------------------------------------------------- */

static void json_task(struct sl_json *j, pid_t tid, const struct sl_task_info *ti)
{
	sl_json_int(j, "pid", ti->ns_pid);
	sl_json_int(j, "tid", ti->ns_tid);
	sl_json_int(j, "host_pid", ti->tgid);
	sl_json_int(j, "host_tid", tid);
}

static void json_ocsf(struct sl_json *j, int class_uid, int activity_id, int disposition_id)
{
	sl_json_obj_open(j, "ocsf");
	sl_json_int(j, "class_uid", class_uid);
	sl_json_int(j, "activity_id", activity_id);
	if (disposition_id)
		sl_json_int(j, "disposition_id", disposition_id);
	sl_json_obj_close(j);
}

static const char *errno_name(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

/* Append an event; on failure stop everything (fail closed). Returns 0 or -errno. */
static int emit(struct sl_supervisor *s, const char *cls, struct sl_json *j)
{
	int r = sl_json_error(j);
	if (r == 0) {
		int64_t seq = sl_record_append(s->rec, cls, sl_now_realtime_ns(), j);
		r = seq < 0 ? (int)seq : 0;
	}
	if (r < 0) {
		int expected = 0;
		atomic_compare_exchange_strong(&s->fatal, &expected, r);
		/* The record cannot take more evidence: the workload must not go on unrecorded. */
		sl_sandbox_kill(s->sb);
	}
	return r;
}

static int deny_event(struct sl_supervisor *s, pid_t tid, const struct sl_task_info *ti, int nr, const char *layer,
		      int err, const char *reason, const char *path, int ocsf_class, int ocsf_act)
{
	struct sl_json j;
	sl_json_init(&j);
	json_task(&j, tid, ti);
	sl_json_str(&j, "layer", layer, 0);
	sl_json_str(&j, "syscall", sl_syscall_name(nr), 0);
	sl_json_str(&j, "errno", errno_name(err), 0);
	sl_json_str(&j, "reason", reason, 0);
	if (path)
		sl_json_str(&j, "path", path, 0);
	json_ocsf(&j, ocsf_class, ocsf_act, 2 /* Blocked */);
	atomic_fetch_add(&s->c.deny, 1);
	int r = emit(s, "policy.deny", &j);
	sl_json_free(&j);
	return r;
}

static int gap_event(struct sl_supervisor *s, pid_t tid, const struct sl_task_info *ti, int nr, const char *what,
		     int err)
{
	struct sl_json j;
	sl_json_init(&j);
	if (ti)
		json_task(&j, tid, ti);
	else
		sl_json_int(&j, "host_tid", tid);
	sl_json_str(&j, "gap", what, 0);
	sl_json_str(&j, "syscall", sl_syscall_name(nr), 0);
	sl_json_str(&j, "errno", errno_name(err), 0);
	json_ocsf(&j, 2004, 1, 0);
	atomic_fetch_add(&s->c.gap, 1);
	int r = emit(s, "sensor.gap", &j);
	sl_json_free(&j);
	return r;
}

/* ---- paths --------------------------------------------------------------------------------- */






/* readlink of a /proc magic link into buf; returns length or -errno. */
static ssize_t read_link(const char *link, char *buf, size_t size)
{
	ssize_t n = readlink(link, buf, size - 1);
	if (n < 0)
		return -errno;
	if ((size_t)n >= size - 1)
		return -ENAMETOOLONG;
	buf[n] = '\0';
	return n;
}

/* The absolute path, as the workload sees it, that (dirfd, path) names. */
static int absolute_path(pid_t tid, int dirfd, const char *path, char *out, size_t outlen)
{
	if (path[0] == '/') {
		if (strlen(path) >= outlen)
			return -ENAMETOOLONG;
		strcpy(out, path);
		return 0;
	}
	char link[64], base[PATH_MAXLEN];
	if (dirfd == AT_FDCWD)
		snprintf(link, sizeof(link), "/proc/%d/cwd", (int)tid);
	else if (dirfd < 0)
		return -EBADF;
	else
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)tid, dirfd);
	ssize_t n = read_link(link, base, sizeof(base));
	if (n < 0)
		return n == -ENOENT ? (dirfd == AT_FDCWD ? -ENOENT : -EBADF) : (int)n;
	/* Seen from outside, a path in the sandbox's mount namespace reads as it does inside.
	 * Anything else (a pipe, a socket, a deleted directory) is not a directory to resolve in. */
	if (base[0] != '/')
		return -ENOTDIR;
	if (n > 10 && !strcmp(base + n - 10, " (deleted)"))
		return -ENOENT;
	if (path[0] == '\0')
		return -ENOENT;
	if ((size_t)snprintf(out, outlen, "%s%s%s", base, base[1] ? "/" : "", path) >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

/* /proc/self and friends name the caller; the sensor is not in the sandbox's pid namespace, so
 * they are rewritten to the caller's pid as the sandbox numbers it. */
static int translate_self(const char *in, const struct sl_task_info *ti, char *out, size_t outlen)
{
	static const struct {
		const char *from, *to;
	} map[] = {{"/dev/fd", "/proc/self/fd"},	  {"/dev/stdin", "/proc/self/fd/0"},
		   {"/dev/stdout", "/proc/self/fd/1"}, {"/dev/stderr", "/proc/self/fd/2"}};
	char tmp[PATH_MAXLEN];
	const char *p = in;
	for (size_t i = 0; i < SL_ARRAY_LEN(map); i++)
		if (sl_path_under(in, map[i].from)) {
			if ((size_t)snprintf(tmp, sizeof(tmp), "%s%s", map[i].to, in + strlen(map[i].from)) >=
			    sizeof(tmp))
				return -ENAMETOOLONG;
			p = tmp;
			break;
		}
	int n;
	if (sl_path_under(p, "/proc/self"))
		n = snprintf(out, outlen, "/proc/%d%s", (int)ti->ns_pid, p + 10);
	else if (sl_path_under(p, "/proc/thread-self"))
		n = snprintf(out, outlen, "/proc/%d/task/%d%s", (int)ti->ns_pid, (int)ti->ns_tid, p + 17);
	else
		n = snprintf(out, outlen, "%s", p);
	return (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

static void flags_str(int flags, char *buf, size_t len)
{
	static const struct {
		int bit;
		const char *name;
	} names[] = {{O_CREAT, "O_CREAT"},	 {O_EXCL, "O_EXCL"},	   {O_NOCTTY, "O_NOCTTY"},
		     {O_TRUNC, "O_TRUNC"},	 {O_APPEND, "O_APPEND"},   {O_NONBLOCK, "O_NONBLOCK"},
		     {O_DSYNC, "O_DSYNC"},	 {O_DIRECT, "O_DIRECT"},   {O_DIRECTORY, "O_DIRECTORY"},
		     {O_NOFOLLOW, "O_NOFOLLOW"}, {O_NOATIME, "O_NOATIME"}, {O_CLOEXEC, "O_CLOEXEC"},
		     {O_PATH, "O_PATH"},	 {__O_TMPFILE, "O_TMPFILE"}};
	int acc = flags & O_ACCMODE;
	size_t off = (size_t)snprintf(buf, len, "%s",
				      acc == O_RDONLY ? "O_RDONLY" : acc == O_WRONLY ? "O_WRONLY" : acc == O_RDWR ? "O_RDWR" : "O_ACC3");
	for (size_t i = 0; i < SL_ARRAY_LEN(names) && off < len; i++)
		if ((flags & names[i].bit) == names[i].bit)
			off += (size_t)snprintf(buf + off, len - off, "|%s", names[i].name);
}

/* ---- responses ------------------------------------------------------------------------------ */

static void respond(struct sl_supervisor *s, uint64_t id, int64_t val, int err, bool cont)
{
	struct seccomp_notif_resp resp = {.id = id, .val = val, .error = err ? -err : 0};
	if (cont)
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	/* ENOENT: the task died (for instance killed) while we decided; nothing to answer. */
	if (ioctl(s->sb->listener_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
		atomic_fetch_add(&s->c.gap, 1);
}

static bool id_valid(struct sl_supervisor *s, uint64_t id)
{
	return ioctl(s->sb->listener_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* ---- open ----------------------------------------------------------------------------------- */

#define VALID_OPEN_FLAGS                                                                                    \
	(O_RDONLY | O_WRONLY | O_RDWR | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NDELAY |          \
	 O_DSYNC | FASYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC |        \
	 O_PATH | __O_TMPFILE | O_SYNC)

/* glibc's __O_TMPFILE includes O_DIRECTORY: test all its bits. */
#define IS_TMPFILE(f)  (((f) & __O_TMPFILE) == __O_TMPFILE)
#define HAS_CREATE(f) (((f) & O_CREAT) || IS_TMPFILE(f))

static bool wants_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) || IS_TMPFILE(flags);
}

/* Open on the workload's behalf. The sensor thread runs with the workload's fsuid/fsgid and no
 * supplementary groups, so the kernel applies the same permission checks it would apply to the
 * workload; RESOLVE_IN_ROOT keeps every absolute path, symlink and ".." inside the sandbox's
 * root. Returns an fd or -errno. */
static int open_as_workload(struct sl_supervisor *s, pid_t tid, const char *abs, struct open_how *how,
			    const struct sl_task_info *ti)
{
	/* /proc/<own pid>/{fd/N,exe,cwd,root}: magic links, which the resolver will not follow
	 * inside a root. Each leads only to an object the caller already holds, so the link itself
	 * is opened through the host's /proc entry of the same process, as the workload. A path that
	 * goes on past the link is rewritten to the sandbox path it names and resolved in the root
	 * like any other: followed from the host side, an absolute symlink further down would
	 * resolve against the host's root. */
	unsigned pid, fdn;
	int consumed = 0;
	char rewritten[PATH_MAXLEN];
	if (sscanf(abs, "/proc/%u/%n", &pid, &consumed) == 1 && consumed > 0 && (pid_t)pid == ti->ns_pid) {
		const char *rest = abs + consumed;
		int c2 = 0;
		bool fdlink = sscanf(rest, "fd/%u%n", &fdn, &c2) == 1 && c2 > 0;
		const char *tail = fdlink ? rest + c2 : NULL;
		const char *link = NULL;
		if (fdlink)
			link = "fd";
		else if (!strncmp(rest, "cwd", 3) && (rest[3] == '\0' || rest[3] == '/'))
			link = "cwd", tail = rest + 3;
		else if (!strncmp(rest, "root", 4) && (rest[4] == '\0' || rest[4] == '/'))
			link = "root", tail = rest + 4;
		else if (!strcmp(rest, "exe"))
			link = "exe", tail = rest + 3;
		if (link && *tail == '\0') {
			char host[96];
			if (fdlink)
				snprintf(host, sizeof(host), "/proc/%d/fd/%u", (int)ti->tgid, fdn);
			else
				snprintf(host, sizeof(host), "/proc/%d/%s", (int)ti->tgid, link);
			struct open_how h = *how;
			h.resolve &= ~(uint64_t)RESOLVE_IN_ROOT;
			int fd = (int)syscall(SYS_openat2, AT_FDCWD, host, &h, sizeof(h));
			return fd < 0 ? -errno : fd;
		}
		if (link && *tail == '/') {
			char base[PATH_MAXLEN] = "";
			if (!strcmp(link, "fd") || !strcmp(link, "cwd")) {
				char l[96];
				if (fdlink)
					snprintf(l, sizeof(l), "/proc/%d/fd/%u", (int)ti->tgid, fdn);
				else
					snprintf(l, sizeof(l), "/proc/%d/cwd", (int)ti->tgid);
				if (read_link(l, base, sizeof(base)) < 0 || base[0] != '/')
					return -ENOTDIR;
			}
			if ((size_t)snprintf(rewritten, sizeof(rewritten), "%s%s", base, tail) >= sizeof(rewritten))
				return -ENAMETOOLONG;
			abs = rewritten;
		}
	}
	if (HAS_CREATE(how->flags)) {
		struct sl_task_info fresh;
		if (sl_task_info(tid, &fresh) == 0)
			umask(fresh.umask);
	}
	int fd = (int)syscall(SYS_openat2, s->sb->root_fd, abs, how, sizeof(*how));
	return fd < 0 ? -errno : fd;
}

static void handle_open(struct sl_supervisor *s, const struct seccomp_notif *n, const struct sl_task_info *ti)
{
	int nr = n->data.nr;
	int dirfd = AT_FDCWD;
	uint64_t path_addr;
	struct open_how how = {0};
	const char *sysname = nr == SYS_open ? "open" : nr == SYS_creat ? "creat" : nr == SYS_openat ? "openat" : "openat2";
	if (nr == SYS_open) {
		path_addr = n->data.args[0];
		how.flags = n->data.args[1];
		how.mode = n->data.args[2];
	} else if (nr == SYS_creat) {
		path_addr = n->data.args[0];
		how.flags = O_CREAT | O_WRONLY | O_TRUNC;
		how.mode = n->data.args[1];
	} else if (nr == SYS_openat) {
		dirfd = (int)n->data.args[0];
		path_addr = n->data.args[1];
		how.flags = n->data.args[2];
		how.mode = n->data.args[3];
	} else {
		dirfd = (int)n->data.args[0];
		path_addr = n->data.args[1];
		size_t usize = n->data.args[3];
		if (usize < 24 || usize > 4096) {
			respond(s, n->id, 0, usize < 24 ? EINVAL : E2BIG, false);
			return;
		}
		if (mem_read(n->pid, n->data.args[2], &how, sizeof(how)) < 0) {
			respond(s, n->id, 0, EFAULT, false);
			return;
		}
	}
	if (nr != SYS_openat2) {
		/* What the kernel does for open/openat/creat: drop unknown bits, force O_LARGEFILE,
		 * keep only the O_PATH flags with O_PATH, no mode without a create. */
		how.flags = (how.flags & VALID_OPEN_FLAGS) | O_LARGEFILE;
		if (how.flags & O_PATH)
			how.flags &= O_DIRECTORY | O_NOFOLLOW | O_PATH | O_CLOEXEC;
		if (!HAS_CREATE(how.flags))
			how.mode = 0;
		how.mode &= 07777;
	}
	char path[PATH_MAXLEN], abs[PATH_MAXLEN], tr[PATH_MAXLEN], norm[PATH_MAXLEN], resolved[PATH_MAXLEN] = "";
	ssize_t pl = mem_read_str(n->pid, path_addr, path, sizeof(path));
	if (!id_valid(s, n->id))
		return; /* the task is gone: what we read may belong to a recycled tid */
	if (pl < 0) {
		respond(s, n->id, 0, (int)-pl, false);
		return;
	}
	int r = absolute_path(n->pid, dirfd, path, abs, sizeof(abs));
	if (r == 0)
		r = translate_self(abs, ti, tr, sizeof(tr));
	if (r < 0) {
		/* Not resolvable: the kernel would have failed the same way. Recorded as a failed open. */
		snprintf(tr, sizeof(tr), "%s", path);
	}
	snprintf(norm, sizeof(norm), "%s", tr);
	sl_path_normalize(norm);
	bool canary = sl_path_is_canary(s->policy, norm);
	int fd = -1;
	const char *deny_layer = NULL, *deny_reason = NULL;
	if (r == 0) {
		/* Supervisor policy, on the path as named. */
		if (!sl_path_readable(s->policy, norm)) {
			r = -EACCES;
			deny_layer = "supervisor";
			deny_reason = "outside the paths the policy makes visible";
		} else if (wants_write((int)how.flags) && !sl_path_writable(s->policy, norm)) {
			r = -EACCES;
			deny_layer = "supervisor";
			deny_reason = "write outside the workspace";
		}
	}
	if (r == 0) {
		bool user_cloexec = how.flags & O_CLOEXEC;
		how.flags |= O_CLOEXEC; /* never leak into our own children */
		if (nr == SYS_openat2 && (how.resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) && path[0] != '/') {
			/* The workload confined this lookup beneath its dirfd: honour that exactly. */
			int pfd = (int)syscall(SYS_pidfd_open, ti->tgid, 0);
			int dfd = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, dirfd, 0);
			fd = dfd < 0 ? -EBADF : (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
			if (fd < 0 && dfd >= 0)
				fd = -errno;
			if (dfd >= 0)
				close(dfd);
			if (pfd >= 0)
				close(pfd);
		} else {
			how.resolve |= RESOLVE_IN_ROOT;
			fd = open_as_workload(s, n->pid, tr, &how, ti);
		}
		if (!user_cloexec)
			how.flags &= ~(uint64_t)O_CLOEXEC;
		if (fd >= 0) {
			char link[64];
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
			if (read_link(link, resolved, sizeof(resolved)) < 0)
				resolved[0] = '\0';
			/* Post-check on what was really opened: a symlink may lead where the name
			 * did not say. */
			if (resolved[0] == '/') {
				if (sl_path_is_canary(s->policy, resolved))
					canary = true;
				if (!sl_path_readable(s->policy, resolved) ||
				    (wants_write((int)how.flags) && !sl_path_writable(s->policy, resolved))) {
					close(fd);
					fd = -EACCES;
					deny_layer = "supervisor";
					deny_reason = "resolves outside the paths the policy allows";
				}
			}
		} else if (fd == -EACCES || fd == -EPERM || fd == -EROFS) {
			deny_layer = "kernel";
			deny_reason = fd == -EROFS ? "read-only mount" : "file permissions";
		}
		r = fd < 0 ? fd : 0;
	}
	/* Install the fd in the workload first (not yet answering), so the event can carry the
	 * descriptor number the workload will see; then record; then answer. */
	int64_t result = r;
	if (fd >= 0) {
		struct seccomp_notif_addfd add = {.id = n->id,
						  .srcfd = (uint32_t)fd,
						  .newfd_flags = (how.flags & O_CLOEXEC) ? O_CLOEXEC : 0};
		int newfd = ioctl(s->sb->listener_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
		close(fd);
		if (newfd < 0) {
			if (errno == ENOENT)
				return; /* the task died meanwhile */
			result = -errno;
		} else {
			result = newfd;
		}
	}
	struct sl_json j;
	sl_json_init(&j);
	json_task(&j, n->pid, ti);
	sl_json_str(&j, "syscall", sysname, 0);
	sl_json_str(&j, "path", r == 0 || deny_layer ? norm : path, 0);
	if (strcmp(path, norm) != 0)
		sl_json_str(&j, "requested", path, 0);
	if (resolved[0] && strcmp(resolved, norm) != 0)
		sl_json_str(&j, "resolved", resolved, 0);
	char fl[200];
	flags_str((int)how.flags, fl, sizeof(fl));
	sl_json_str(&j, "flags", fl, 0);
	sl_json_bool(&j, "write", wants_write((int)how.flags));
	sl_json_int(&j, "result", result);
	if (result < 0)
		sl_json_str(&j, "errno", errno_name((int)-result), 0);
	sl_json_bool(&j, "canary", canary);
	sl_json_bool(&j, "exact", true);
	json_ocsf(&j, 1001, 14 /* Open */, result < 0 ? 2 : 1);
	atomic_fetch_add(&s->c.open, 1);
	if (result < 0)
		atomic_fetch_add(&s->c.open_failed, 1);
	if (canary)
		atomic_fetch_add(&s->c.canary, 1);
	int er = emit(s, "file.open", &j);
	sl_json_free(&j);
	if (er == 0 && deny_layer)
		er = deny_event(s, n->pid, ti, nr, deny_layer, (int)-result, deny_reason, norm, 1001, 14);
	if (er < 0) {
		respond(s, n->id, 0, EIO, false);
		return;
	}
	if (result >= 0)
		respond(s, n->id, result, 0, false);
	else
		respond(s, n->id, 0, (int)-result, false);
}

/* ---- exec ----------------------------------------------------------------------------------- */

static void handle_exec(struct sl_supervisor *s, const struct seccomp_notif *n, const struct sl_task_info *ti)
{
	int nr = n->data.nr;
	int dirfd = nr == SYS_execveat ? (int)n->data.args[0] : AT_FDCWD;
	uint64_t path_addr = nr == SYS_execveat ? n->data.args[1] : n->data.args[0];
	uint64_t argv_addr = nr == SYS_execveat ? n->data.args[2] : n->data.args[1];
	int at_flags = nr == SYS_execveat ? (int)n->data.args[4] : 0;
	char path[PATH_MAXLEN], abs[PATH_MAXLEN], norm[PATH_MAXLEN], resolved[PATH_MAXLEN] = "";
	ssize_t pl = mem_read_str(n->pid, path_addr, path, sizeof(path));
	/* argv: pointers then strings, all bounded; argc is counted to the end (up to the kernel's
	 * own limit) so a truncated list says how much it left out. */
	static __thread char args[ARGV_MAX][ARG_MAX_LEN + 1];
	static __thread size_t arglen[ARGV_MAX];
	static __thread bool argcut[ARGV_MAX];
	size_t argc = 0, shown = 0;
	bool argv_ok = true;
	for (; argv_addr && argc < 100000; argc++) {
		uint64_t ptr;
		if (mem_read(n->pid, argv_addr + 8 * argc, &ptr, 8) < 0) {
			argv_ok = false;
			break;
		}
		if (!ptr)
			break;
		if (shown < ARGV_MAX) {
			ssize_t l = mem_read_str(n->pid, ptr, args[shown], sizeof(args[shown]));
			argcut[shown] = l == -ENAMETOOLONG;
			if (l < 0 && l != -ENAMETOOLONG) {
				argv_ok = false;
				break;
			}
			arglen[shown] = strlen(args[shown]);
			shown++;
		}
	}
	if (!id_valid(s, n->id))
		return;
	if (pl < 0 || !argv_ok) {
		/* The kernel would fail this exec with EFAULT too; nothing runs. */
		respond(s, n->id, 0, pl < 0 ? (int)-pl : EFAULT, false);
		return;
	}
	int r = 0;
	if (path[0] == '\0' && (at_flags & AT_EMPTY_PATH) && dirfd >= 0) {
		char link[64];
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)n->pid, dirfd);
		r = read_link(link, abs, sizeof(abs)) < 0 ? -EBADF : 0;
	} else {
		r = absolute_path(n->pid, dirfd, path, abs, sizeof(abs));
	}
	if (r == 0) {
		snprintf(norm, sizeof(norm), "%s", abs);
		sl_path_normalize(norm);
		/* Pre-check what the kernel is about to exec, as the workload: a name that does not
		 * resolve or may not be executed is answered here and is not an exec (shells try
		 * every PATH entry). */
		struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
		if (at_flags & AT_SYMLINK_NOFOLLOW)
			how.flags |= O_NOFOLLOW;
		char tr[PATH_MAXLEN];
		int fd = abs[0] == '/' && translate_self(abs, ti, tr, sizeof(tr)) == 0
				 ? open_as_workload(s, n->pid, tr, &how, ti)
				 : -ENOENT;
		if (fd < 0) {
			r = fd;
		} else {
			if (syscall(SYS_faccessat2, fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0)
				r = -errno;
			char link[64];
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
			if (read_link(link, resolved, sizeof(resolved)) < 0)
				resolved[0] = '\0';
			close(fd);
		}
	}
	if (r < 0) {
		respond(s, n->id, 0, -r, false);
		return;
	}
	struct sl_task_info parent = {0};
	bool have_parent = ti->ppid > 0 && sl_task_info(ti->ppid, &parent) == 0;
	char cwd_link[64], cwd[PATH_MAXLEN];
	snprintf(cwd_link, sizeof(cwd_link), "/proc/%d/cwd", (int)n->pid);
	if (read_link(cwd_link, cwd, sizeof(cwd)) < 0)
		snprintf(cwd, sizeof(cwd), "?");
	/* Exact unless another thread could change the memory the kernel will re-read: our own
	 * threads, or, after vfork/posix_spawn (memory shared with the parent), the parent's. */
	bool exact = ti->threads <= 1;
	if (exact && have_parent && syscall(SYS_kcmp, ti->tgid, ti->ppid, 1 /* KCMP_VM */, 0, 0) == 0)
		exact = parent.threads <= 1;
	struct sl_json j;
	sl_json_init(&j);
	json_task(&j, n->pid, ti);
	/* A parent outside the sandbox (the supervisor, for pid 1) has no pid inside: 0. */
	sl_json_int(&j, "ppid", have_parent && parent.levels == ti->levels ? parent.ns_pid : 0);
	sl_json_int(&j, "host_ppid", ti->ppid);
	sl_json_str(&j, "syscall", sl_syscall_name(nr), 0);
	sl_json_str(&j, "executable", resolved[0] ? resolved : norm, 0);
	if (strcmp(path, resolved[0] ? resolved : norm) != 0)
		sl_json_str(&j, "path", path, 0);
	sl_json_arr_open(&j, "argv");
	for (size_t i = 0; i < shown; i++) {
		size_t keep;
		if (s->policy->redact_argv && sl_redact_arg(i ? args[i - 1] : NULL, args[i], &keep)) {
			char red[ARG_MAX_LEN + 16];
			snprintf(red, sizeof(red), "%.*s%s", (int)keep, args[i], SL_REDACTED);
			sl_json_str(&j, NULL, red, 0);
		} else {
			char tail[ARG_MAX_LEN + 8];
			snprintf(tail, sizeof(tail), "%.*s%s", ARG_MAX_LEN, args[i], argcut[i] ? "..." : "");
			sl_json_strn(&j, NULL, tail, strlen(tail), ARG_MAX_LEN + 3);
		}
		(void)arglen;
	}
	sl_json_arr_close(&j);
	sl_json_uint(&j, "argc", argc);
	sl_json_str(&j, "cwd", cwd, 0);
	sl_json_bool(&j, "exact", exact);
	json_ocsf(&j, 1007, 1 /* Launch */, 0);
	atomic_fetch_add(&s->c.exec, 1);
	if (!exact)
		atomic_fetch_add(&s->c.inexact, 1);
	int er = emit(s, "process.exec", &j);
	sl_json_free(&j);
	if (er < 0) {
		respond(s, n->id, 0, EIO, false);
		return;
	}
	/* The kernel performs the exec (it cannot be emulated from outside). */
	respond(s, n->id, 0, 0, true);
}

/* ---- connect -------------------------------------------------------------------------------- */

static bool port_allowed(const struct sl_policy *p, unsigned port)
{
	for (size_t i = 0; i < p->n_tcp_connect; i++)
		if (p->tcp_connect[i] == port)
			return true;
	return false;
}

static void handle_connect(struct sl_supervisor *s, const struct seccomp_notif *n, const struct sl_task_info *ti)
{
	int sockfd = (int)n->data.args[0];
	uint64_t addr_ptr = n->data.args[1];
	uint64_t alen = n->data.args[2] & 0xffffffffu;
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	if (alen > sizeof(ss) || alen < sizeof(sa_family_t)) {
		respond(s, n->id, 0, EINVAL, false);
		return;
	}
	int mr = mem_read(n->pid, addr_ptr, &ss, alen);
	if (!id_valid(s, n->id))
		return;
	if (mr < 0) {
		respond(s, n->id, 0, EFAULT, false);
		return;
	}
	char host[INET6_ADDRSTRLEN + 8] = "";
	unsigned port = 0;
	const char *family = "other";
	bool emulate = false, exact = true;
	if (ss.ss_family == AF_INET && alen >= sizeof(struct sockaddr_in)) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
		family = "inet";
		emulate = true;
	} else if (ss.ss_family == AF_INET6 && alen >= sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
		family = "inet6";
		emulate = true;
	} else if (ss.ss_family == AF_UNIX) {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		size_t plen = alen - offsetof(struct sockaddr_un, sun_path);
		family = "unix";
		if (plen > 0 && un->sun_path[0] == '\0') {
			/* Abstract: looked up in the socket's own (the sandbox's) network namespace,
			 * so connecting our copy from here is exact. */
			snprintf(host, sizeof(host), "@%.*s", (int)(plen - 1 < 40 ? plen - 1 : 40), un->sun_path + 1);
			emulate = true;
		} else {
			/* A path would be resolved in OUR filesystem if we connected: let the kernel do
			 * it in the workload's, and say the record could not pin the buffer. */
			snprintf(host, sizeof(host), "%.*s", (int)(plen < 40 ? plen : 40), un->sun_path);
			exact = false;
		}
	} else {
		exact = false;
	}
	int sotype = 0;
	int result = 0;
	const char *deny_reason = NULL;
	bool inet = ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
	if (inet && !port_allowed(s->policy, port)) {
		result = -EACCES;
		deny_reason = "destination port not allowed by the policy";
		emulate = false;
	}
	if (emulate) {
		_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, ti->tgid, 0);
		_cleanup_close_ int dup = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, sockfd, 0);
		if (dup < 0) {
			result = errno == EBADF ? -EBADF : -ENOTSOCK;
		} else {
			socklen_t sl = sizeof(sotype);
			getsockopt(dup, SOL_SOCKET, SO_TYPE, &sotype, &sl);
			/* The socket belongs to the sandbox's network namespace, so this connect goes
			 * exactly where the workload's would, with the address we checked. */
			result = connect(dup, (struct sockaddr *)&ss, (socklen_t)alen) < 0 ? -errno : 0;
		}
	}
	struct sl_json j;
	sl_json_init(&j);
	json_task(&j, n->pid, ti);
	sl_json_str(&j, "family", family, 0);
	sl_json_str(&j, "address", host, 0);
	if (inet)
		sl_json_uint(&j, "port", port);
	if (sotype)
		sl_json_str(&j, "type", sotype == SOCK_STREAM ? "stream" : sotype == SOCK_DGRAM ? "dgram" : "other", 0);
	if (emulate || deny_reason) {
		sl_json_int(&j, "result", result);
		if (result < 0)
			sl_json_str(&j, "errno", errno_name(-result), 0);
	} else {
		sl_json_null(&j, "result"); /* decided by the kernel after this record */
	}
	sl_json_bool(&j, "exact", exact);
	json_ocsf(&j, 4001, deny_reason ? 5 /* Refuse */ : 1 /* Open */, deny_reason ? 2 : 1);
	atomic_fetch_add(&s->c.connect, 1);
	if (!exact)
		atomic_fetch_add(&s->c.inexact, 1);
	int er = emit(s, "network.connect", &j);
	sl_json_free(&j);
	if (er == 0 && deny_reason) {
		char where[INET6_ADDRSTRLEN + 16];
		snprintf(where, sizeof(where), "%s:%u", host, port);
		er = deny_event(s, n->pid, ti, n->data.nr, "supervisor", EACCES, deny_reason, where, 4001, 5);
	}
	if (er < 0)
		respond(s, n->id, 0, EIO, false);
	else if (emulate || deny_reason)
		respond(s, n->id, 0, result < 0 ? -result : 0, false);
	else
		respond(s, n->id, 0, 0, true);
}

/* ---- the loop ------------------------------------------------------------------------------- */

static void handle(struct sl_supervisor *s, const struct seccomp_notif *n)
{
	struct sl_task_info ti;
	int nr = n->data.nr;
	atomic_fetch_add(&s->c.notifications, 1);
	if (n->data.arch != AUDIT_ARCH_X86_64) {
		/* The filter kills other ABIs; this cannot happen. Refuse, and say so. */
		respond(s, n->id, 0, ENOSYS, false);
		return;
	}
	bool fresh = nr == SYS_execve || nr == SYS_execveat;
	if (task_get(s, n->pid, &ti, fresh) < 0) {
		respond(s, n->id, 0, ESRCH, false);
		return;
	}
	switch (nr) {
	case SYS_open:
	case SYS_openat:
	case SYS_openat2:
	case SYS_creat:
		handle_open(s, n, &ti);
		return;
	case SYS_execve:
	case SYS_execveat:
		handle_exec(s, n, &ti);
		return;
	case SYS_connect:
		handle_connect(s, n, &ti);
		return;
	case SYS_clone:
	case SYS_unshare:
		if (deny_event(s, n->pid, &ti, nr, "seccomp", EPERM, "new namespaces are not allowed", NULL, 1007, 0) < 0)
			respond(s, n->id, 0, EIO, false);
		else
			respond(s, n->id, 0, EPERM, false);
		return;
	case SYS_ioctl:
		if (deny_event(s, n->pid, &ti, nr, "seccomp", EPERM, "terminal input injection", NULL, 1007, 0) < 0)
			respond(s, n->id, 0, EIO, false);
		else
			respond(s, n->id, 0, EPERM, false);
		return;
	default:
		if (sl_syscall_is_denied(nr)) {
			if (deny_event(s, n->pid, &ti, nr, "seccomp", EPERM, "syscall refused by the sandbox", NULL, 1007,
				       0) < 0)
				respond(s, n->id, 0, EIO, false);
			else
				respond(s, n->id, 0, EPERM, false);
			return;
		}
		/* A notification we never asked for: refuse rather than guess, and record the gap. */
		gap_event(s, n->pid, &ti, nr, "unexpected notification", ENOSYS);
		respond(s, n->id, 0, ENOSYS, false);
	}
}

#define SL_STOP_SIGNAL SIGUSR1
static void wake_handler(int sig)
{
	(void)sig;
}

static void *loop(void *arg)
{
	struct sl_supervisor *s = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SL_STOP_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	if (s->cpu >= 0) {
		cpu_set_t cpus;
		CPU_ZERO(&cpus);
		CPU_SET(s->cpu, &cpus);
		pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	}
	/* This thread acts as the workload for file access: its own cwd/umask (CLONE_FS), the
	 * workload's fsuid/fsgid (per-thread in Linux), no supplementary groups (raw syscall: glibc's
	 * setgroups would change every thread). The fs capabilities drop with a non-zero fsuid. */
	if (unshare(CLONE_FS) < 0 || (s->drop_groups && syscall(SYS_setgroups, 0, NULL) < 0)) {
		atomic_store(&s->fatal, -errno);
		sl_sandbox_kill(s->sb);
		return NULL;
	}
	setfsgid(s->w_gid);
	setfsuid(s->w_uid);
	if ((uid_t)setfsuid((uid_t)-1) != s->w_uid || (gid_t)setfsgid((gid_t)-1) != s->w_gid) {
		atomic_store(&s->fatal, -EPERM);
		sl_sandbox_kill(s->sb);
		return NULL;
	}
	/* Block in NOTIF_RECV itself, not in poll(): only a task waiting in RECV gets the
	 * same-CPU wake-up (SYNC_WAKE_UP); a poll() waiter costs a cross-CPU wake-up per event,
	 * about ten times slower here. sl_supervisor_join() ends the wait with a signal. */
	struct seccomp_notif req;
	while (!atomic_load(&s->stopping)) {
		memset(&req, 0, sizeof(req)); /* the kernel insists on a zeroed buffer */
		if (ioctl(s->sb->listener_fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
			if (errno == EINTR || errno == ENOENT)
				continue; /* ENOENT: the task died before we took its notification */
			break;
		}
		handle(s, &req);
	}
	return NULL;
}

int sl_supervisor_start(struct sl_supervisor *s)
{
	s->cache = calloc(1, sizeof(*s->cache));
	if (!s->cache)
		return -ENOMEM;
	for (size_t i = 0; i < CACHE_SLOTS; i++)
		s->cache->e[i].pidfd = -1;
	/* The stop signal: a handler that does nothing, installed without SA_RESTART so that it
	 * interrupts NOTIF_RECV. It is unblocked only in the sensor thread. */
	struct sigaction sa = {.sa_handler = wake_handler};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SL_STOP_SIGNAL, &sa, NULL) < 0)
		return -errno;
	/* Wake the workload's task on the CPU this thread runs on when we answer (kernel >= 6.6):
	 * ~10 us per event instead of ~60 us. Absence is a recorded gap, not an error. */
	uint64_t fl = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
	s->sync_wakeup = ioctl(s->sb->listener_fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, fl) == 0;
	int r = pthread_create(&s->thread, NULL, loop, s);
	if (r)
		return -r;
	s->running = true;
	return 0;
}

void sl_supervisor_join(struct sl_supervisor *s)
{
	if (s->running) {
		/* Called once the sandbox's pid 1 has been reaped: the kernel has then reaped every
		 * other task of its pid namespace, so no notification can still arrive. Signal until
		 * the thread notices (it may be busy, not waiting, when one signal lands). */
		atomic_store(&s->stopping, true);
		while (pthread_tryjoin_np(s->thread, NULL) == EBUSY) {
			pthread_kill(s->thread, SL_STOP_SIGNAL);
			usleep(1000);
		}
		s->running = false;
	}
	if (s->cache) {
		for (size_t i = 0; i < CACHE_SLOTS; i++)
			if (s->cache->e[i].pidfd >= 0)
				close(s->cache->e[i].pidfd);
		free(s->cache);
		s->cache = NULL;
	}
}
