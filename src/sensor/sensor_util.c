/* Helpers of the sensor threads: reading workload memory, building events, naming paths the way
 * the workload does, answering the kernel. Trust: the notification itself comes from the kernel;
 * every byte behind a pointer is the workload's and hostile: read once, bounded. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "sensor/internal.h"
#include "sensor/paths.h"
#include "sensor/syscalls.h"

/* Read exactly len bytes at addr of tid. */
int sl_mem_read(pid_t tid, uint64_t addr, void *buf, size_t len)
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
ssize_t sl_mem_read_str(pid_t tid, uint64_t addr, char *buf, size_t max)
{
	if (!addr)
		return -EFAULT;
	size_t got = 0;
	while (got < max - 1) {
		uint64_t cur = addr + got;
		size_t chunk = 4096 - (size_t)(cur & 4095);
		if (chunk > max - 1 - got)
			chunk = max - 1 - got;
		int r = sl_mem_read(tid, cur, buf + got, chunk);
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
void sl_json_task(struct sl_json *j, pid_t tid, const struct sl_task_info *ti)
{
	sl_json_int(j, "pid", ti->ns_pid);
	sl_json_int(j, "tid", ti->ns_tid);
	sl_json_int(j, "host_pid", ti->tgid);
	sl_json_int(j, "host_tid", tid);
}

void sl_json_ocsf(struct sl_json *j, int class_uid, int activity_id, int disposition_id)
{
	sl_json_obj_open(j, "ocsf");
	sl_json_int(j, "class_uid", class_uid);
	sl_json_int(j, "activity_id", activity_id);
	if (disposition_id)
		sl_json_int(j, "disposition_id", disposition_id);
	sl_json_obj_close(j);
}

const char *sl_errno_name(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

/* record.on_full: wait. The record's disk is full: hold the workload's syscall (we are answering
 * its notification, so it cannot go on) and retry with backoff, 10 ms doubling to 250 ms, until the
 * line fits. Once space returns, a sensor.gap says how long the workload waited, then the held
 * event itself. Gives up (returns the error: stop, fail closed) when the supervisor is stopping. */
static int64_t wait_for_space(struct sl_supervisor *s, const char *cls, struct sl_json *j, int64_t err)
{
	int64_t since = sl_now_realtime_ns();
	unsigned ms = 10;
	bool gap_written = false;
	for (;;) {
		if (atomic_load(&s->stopping))
			return err;
		int sticky = sl_record_failed(s->rec);
		if (sticky)
			return sticky; /* the record itself is broken: no amount of space helps */
		struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		ms = ms >= 125 ? 250 : ms * 2;
		int64_t r;
		if (!gap_written) {
			struct sl_json g;
			sl_json_init(&g);
			sl_json_str(&g, "gap", "record-full", 0);
			sl_json_str(&g, "detail", "record disk full, workload waiting", 0);
			sl_json_int(&g, "since_ns", since);
			sl_json_int(&g, "waited_ms", (sl_now_realtime_ns() - since) / 1000000);
			sl_json_str(&g, "held", cls, 0);
			sl_json_ocsf(&g, 2004, 1, 0);
			r = sl_json_error(&g);
			if (r == 0)
				r = sl_record_append(s->rec, "sensor.gap", sl_now_realtime_ns(), &g);
			sl_json_free(&g);
			if (r == -ENOSPC || r == -EDQUOT)
				continue;
			if (r < 0)
				return r;
			atomic_fetch_add(&s->c.gap, 1);
			gap_written = true;
		}
		r = sl_record_append(s->rec, cls, sl_now_realtime_ns(), j);
		if (r != -ENOSPC && r != -EDQUOT)
			return r;
	}
}

/* Append an event; on failure stop everything (fail closed). Returns 0 or -errno. */
int64_t sl_emit_seq(struct sl_supervisor *s, const char *cls, struct sl_json *j)
{
	int64_t seq = sl_json_error(j);
	if (seq == 0)
		seq = sl_record_append(s->rec, cls, sl_now_realtime_ns(), j);
	if ((seq == -ENOSPC || seq == -EDQUOT) && s->policy && s->policy->record_wait_on_full)
		seq = wait_for_space(s, cls, j, seq);
	int r = seq < 0 ? (int)seq : 0;
	if (r < 0) {
		int expected = 0;
		atomic_compare_exchange_strong(&s->fatal, &expected, r);
		/* The record cannot take more evidence: the workload must not go on unrecorded. */
		sl_sandbox_kill(s->sb);
	}
	return r < 0 ? r : seq;
}

int sl_emit(struct sl_supervisor *s, const char *cls, struct sl_json *j)
{
	int64_t r = sl_emit_seq(s, cls, j);
	return r < 0 ? (int)r : 0;
}

int sl_deny_event(struct sl_supervisor *s, pid_t tid, const struct sl_task_info *ti, int nr, const char *layer,
		      int err, const char *reason, const char *path, int ocsf_class, int ocsf_act)
{
	struct sl_json j;
	sl_json_init(&j);
	sl_json_task(&j, tid, ti);
	sl_json_str(&j, "layer", layer, 0);
	sl_json_str(&j, "syscall", sl_syscall_name(nr), 0);
	sl_json_str(&j, "errno", sl_errno_name(err), 0);
	sl_json_str(&j, "reason", reason, 0);
	if (path)
		sl_json_str(&j, "path", path, 0);
	sl_json_ocsf(&j, ocsf_class, ocsf_act, 2 /* Blocked */);
	atomic_fetch_add(&s->c.deny, 1);
	int r = sl_emit(s, "policy.deny", &j);
	sl_json_free(&j);
	return r;
}

int sl_gap_event(struct sl_supervisor *s, pid_t tid, const struct sl_task_info *ti, int nr, const char *what,
		     int err)
{
	struct sl_json j;
	sl_json_init(&j);
	if (ti)
		sl_json_task(&j, tid, ti);
	else
		sl_json_int(&j, "host_tid", tid);
	sl_json_str(&j, "gap", what, 0);
	sl_json_str(&j, "syscall", sl_syscall_name(nr), 0);
	sl_json_str(&j, "errno", sl_errno_name(err), 0);
	sl_json_ocsf(&j, 2004, 1, 0);
	atomic_fetch_add(&s->c.gap, 1);
	int r = sl_emit(s, "sensor.gap", &j);
	sl_json_free(&j);
	return r;
}

/* readlink of a /proc magic link into buf; returns length or -errno. */
ssize_t sl_read_link(const char *link, char *buf, size_t size)
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
int sl_absolute_path(pid_t tid, int dirfd, const char *path, char *out, size_t outlen)
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
	ssize_t n = sl_read_link(link, base, sizeof(base));
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
int sl_translate_self(const char *in, const struct sl_task_info *ti, char *out, size_t outlen)
{
	const struct {
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

void sl_flags_str(int flags, char *buf, size_t len)
{
	const struct {
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
void sl_respond(struct sl_supervisor *s, uint64_t id, int64_t val, int err, bool cont)
{
	struct seccomp_notif_resp resp = {.id = id, .val = val, .error = err ? -err : 0};
	if (cont)
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	/* ENOENT: the task died (for instance killed) while we decided; nothing to answer. */
	if (ioctl(s->sb->listener_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
		atomic_fetch_add(&s->c.gap, 1);
}

bool sl_id_valid(struct sl_supervisor *s, uint64_t id)
{
	return ioctl(s->sb->listener_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

bool sl_parse_uint(const char *s, unsigned *out, const char **end)
{
	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
		return false;
	unsigned long v = 0;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (unsigned)(*s - '0');
		if (v > 0x7fffffff)
			return false;
		s++;
	}
	if (*s != '\0' && *s != '/')
		return false;
	*out = (unsigned)v;
	*end = s;
	return true;
}
