/* Execs. The kernel must perform an exec itself, so the sensor cannot act on its own copy as
 * it does for opens. It pre-checks, as the workload, what the path resolves to (a name that does
 * not resolve or may not be executed is answered here: shells try every PATH entry), records the
 * binary it found (path, inode, interpreter), lets the kernel continue, and verifies afterwards:
 * on the process's next notification, /proc/PID/exe must be the recorded inode; if not, a
 * sensor.gap "exec-mismatch" names the recorded seq and what really runs (the old program when
 * the exec failed). "exact" says whether the path buffer could change between our read and the
 * kernel's (other threads, vfork-shared memory, shared writable mappings). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "sensor/binfmt.h"
#include "sensor/internal.h"
#include "sensor/paths.h"
#include "sensor/redact.h"
#include "sensor/syscalls.h"

#define ARGC_COUNT_MAX 1000000 /* the kernel's own limit is lower (ARG_MAX) */

/* Any shared, writable mapping in the process ("rw-s" in /proc/PID/maps)? */
static bool has_shared_writable(pid_t tid)
{
	char path[64], buf[8192];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true; /* cannot tell: do not claim exactness */
	bool found = false, at_line_start = true;
	size_t col = 0;
	char perms[5] = {0};
	ssize_t n;
	while (!found && (n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n && !found; i++) {
			char c = buf[i];
			if (c == '\n') {
				at_line_start = true;
				continue;
			}
			if (at_line_start) {
				at_line_start = false;
				col = 0;
				perms[0] = 0;
			}
			/* "start-end perms ...": the perms field follows the first space. */
			if (col == 0 && c == ' ') {
				col = 1;
				continue;
			}
			if (col >= 1 && col <= 4) {
				perms[col - 1] = c;
				if (++col == 5 && perms[1] == 'w' && perms[3] == 's')
					found = true;
			}
		}
	}
	close(fd);
	return found || n < 0;
}

/* ---- pending verifications ------------------------------------------------------------------ */

#define PENDING_SLOTS 256
struct pending {
	pid_t tgid;
	dev_t dev;
	ino_t ino;
	int64_t seq;
	char path[256];
};
static struct pending pending[PENDING_SLOTS];
static pthread_mutex_t pending_mu = PTHREAD_MUTEX_INITIALIZER;

static void pending_add(struct sl_supervisor *s, pid_t tgid, const struct stat *st, int64_t seq, const char *path)
{
	(void)s;
	pthread_mutex_lock(&pending_mu);
	struct pending *p = &pending[(unsigned)tgid % PENDING_SLOTS];
	/* A slot still holding another process's unverified exec is overwritten: that exec stays
	 * unverified (as do execs of processes that never make another notified call). */
	p->tgid = tgid;
	p->dev = st->st_dev;
	p->ino = st->st_ino;
	p->seq = seq;
	snprintf(p->path, sizeof(p->path), "%.*s", (int)sizeof(p->path) - 1, path);
	pthread_mutex_unlock(&pending_mu);
}

void sl_exec_verify(struct sl_supervisor *s, pid_t tid, const struct sl_task_info *ti)
{
	pthread_mutex_lock(&pending_mu);
	struct pending *p = &pending[(unsigned)ti->tgid % PENDING_SLOTS];
	if (p->tgid != ti->tgid) {
		pthread_mutex_unlock(&pending_mu);
		return;
	}
	struct pending want = *p;
	p->tgid = 0;
	pthread_mutex_unlock(&pending_mu);
	char exe[64], actual[PATH_MAXLEN] = "?";
	struct stat st;
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)ti->tgid);
	if (stat(exe, &st) == 0 && st.st_dev == want.dev && st.st_ino == want.ino)
		return; /* the kernel ran what was recorded */
	sl_read_link(exe, actual, sizeof(actual));
	struct sl_json j;
	sl_json_init(&j);
	sl_json_task(&j, tid, ti);
	sl_json_str(&j, "gap", "exec-mismatch", 0);
	sl_json_int(&j, "exec_seq", want.seq);
	sl_json_str(&j, "expected", want.path, 0);
	sl_json_str(&j, "actual", actual, 0);
	sl_json_ocsf(&j, 2004, 1, 0);
	atomic_fetch_add(&s->c.gap, 1);
	sl_emit(s, "sensor.gap", &j);
	sl_json_free(&j);
}

void sl_handle_exec(struct sl_supervisor *s, const struct seccomp_notif *n, const struct sl_task_info *ti)
{
	int nr = n->data.nr;
	int dirfd = nr == SYS_execveat ? (int)n->data.args[0] : AT_FDCWD;
	uint64_t path_addr = nr == SYS_execveat ? n->data.args[1] : n->data.args[0];
	uint64_t argv_addr = nr == SYS_execveat ? n->data.args[2] : n->data.args[1];
	int at_flags = nr == SYS_execveat ? (int)n->data.args[4] : 0;
	char path[PATH_MAXLEN], abs[PATH_MAXLEN], norm[PATH_MAXLEN], resolved[PATH_MAXLEN] = "", interp[256] = "";
	struct stat bin = {0}, runs = {0};
	bool script = false;
	ssize_t pl = sl_mem_read_str(n->pid, path_addr, path, sizeof(path));
	/* argv: pointers then strings, all bounded; argc is counted to the end (up to the kernel's
	 * own limit) so a truncated list says how much it left out. */
	static __thread char args[ARGV_MAX][ARG_MAX_LEN + 1];
	static __thread size_t arglen[ARGV_MAX];
	static __thread bool argcut[ARGV_MAX];
	size_t argc = 0, shown = 0;
	bool argv_ok = true;
	for (; argv_addr && argc < ARGC_COUNT_MAX; argc++) {
		uint64_t ptr;
		if (sl_mem_read(n->pid, argv_addr + 8 * argc, &ptr, 8) < 0) {
			argv_ok = false;
			break;
		}
		if (!ptr)
			break;
		if (shown < ARGV_MAX) {
			ssize_t l = sl_mem_read_str(n->pid, ptr, args[shown], sizeof(args[shown]));
			argcut[shown] = l == -ENAMETOOLONG;
			if (l < 0 && l != -ENAMETOOLONG) {
				argv_ok = false;
				break;
			}
			arglen[shown] = strlen(args[shown]);
			shown++;
		}
	}
	if (!sl_id_valid(s, n->id))
		return;
	if (pl < 0 || !argv_ok) {
		/* The kernel would fail this exec with EFAULT too; nothing runs. */
		sl_respond(s, n->id, 0, pl < 0 ? (int)-pl : EFAULT, false);
		return;
	}
	int r = 0;
	if (path[0] == '\0' && (at_flags & AT_EMPTY_PATH) && dirfd >= 0) {
		char link[64];
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)n->pid, dirfd);
		r = sl_read_link(link, abs, sizeof(abs)) < 0 ? -EBADF : 0;
	} else {
		r = sl_absolute_path(n->pid, dirfd, path, abs, sizeof(abs));
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
			int fd = abs[0] == '/' && sl_translate_self(abs, ti, tr, sizeof(tr)) == 0
				 ? sl_open_in_sandbox(s, ti, tr, &how)
				 : -ENOENT;
		if (fd < 0) {
			r = fd;
		} else {
			if (syscall(SYS_faccessat2, fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0)
				r = -errno;
			char link[64];
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
			if (sl_read_link(link, resolved, sizeof(resolved)) < 0)
				resolved[0] = '\0';
			if (fstat(fd, &bin) < 0)
				r = -errno;
			/* The interpreter (#! or PT_INTERP) is what runs first: name it. Read as the
			 * workload; an execute-only binary simply has no interpreter field. */
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
			int rfd = r == 0 ? open(link, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
			if (rfd >= 0) {
				unsigned char head[4096];
				ssize_t hn = pread(rfd, head, sizeof(head), 0);
				if (hn > 0 && sl_binfmt_interpreter(head, (size_t)hn, interp, sizeof(interp)) != 1)
					interp[0] = '\0';
				/* For a "#!" script the kernel runs the interpreter: that is what
				 * /proc/PID/exe will name, so that is what the check expects. */
				if (interp[0] == '/' && hn >= 2 && head[0] == '#' && head[1] == '!') {
					struct open_how ih = {.flags = O_PATH | O_CLOEXEC};
					int ifd = sl_open_in_sandbox(s, ti, interp, &ih);
					if (ifd >= 0) {
						script = fstat(ifd, &runs) == 0;
						close(ifd);
					}
				}
				close(rfd);
			}
			close(fd);
		}
		}
	if (r < 0) {
		sl_respond(s, n->id, 0, -r, false);
		return;
	}
	struct sl_task_info parent = {0};
	bool have_parent = ti->ppid > 0 && sl_task_info(ti->ppid, &parent) == 0;
	char cwd_link[64], cwd[PATH_MAXLEN];
	snprintf(cwd_link, sizeof(cwd_link), "/proc/%d/cwd", (int)n->pid);
	if (sl_read_link(cwd_link, cwd, sizeof(cwd)) < 0)
		snprintf(cwd, sizeof(cwd), "?");
	/* Exact unless another thread could change the memory the kernel will re-read: our own
	 * threads, or, after vfork/posix_spawn (memory shared with the parent), the parent's. */
	bool exact = ti->threads <= 1;
	if (exact && have_parent && syscall(SYS_kcmp, ti->tgid, ti->ppid, 1 /* KCMP_VM */, 0, 0) == 0)
		exact = parent.threads <= 1;
	/* ... or another process, through memory mapped shared and writable. */
	if (exact && has_shared_writable(n->pid))
		exact = false;
	struct sl_json j;
	sl_json_init(&j);
	sl_json_task(&j, n->pid, ti);
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
	if (argc >= ARGC_COUNT_MAX)
		sl_json_bool(&j, "argc_capped", true); /* counted up to ARGC_COUNT_MAX only */
	sl_json_str(&j, "cwd", cwd, 0);
	if (interp[0])
		sl_json_str(&j, "interpreter", interp, 0);
	char ino[64];
	snprintf(ino, sizeof(ino), "%llu:%llu", (unsigned long long)bin.st_dev, (unsigned long long)bin.st_ino);
	sl_json_str(&j, "inode", ino, 0);
	sl_json_bool(&j, "exact", exact);
	sl_json_ocsf(&j, 1007, 1 /* Launch */, 0);
	atomic_fetch_add(&s->c.exec, 1);
	if (!exact)
		atomic_fetch_add(&s->c.inexact, 1);
	int64_t seq = sl_emit_seq(s, "process.exec", &j);
	sl_json_free(&j);
	int er = seq < 0 ? (int)seq : 0;
	if (er == 0)
		pending_add(s, ti->tgid, script ? &runs : &bin, seq, script ? interp : resolved[0] ? resolved : norm);
	if (er < 0) {
		sl_respond(s, n->id, 0, EIO, false);
		return;
	}
	/* The kernel performs the exec (it cannot be emulated from outside). */
	sl_respond(s, n->id, 0, 0, true);
}
