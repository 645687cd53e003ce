/* File opens, emulated. The sensor reads the path once, checks its copy, opens that copy itself
 * as the workload (same fsuid/fsgid, no groups, no capability, resolved beneath the sandbox's
 * root) and installs the resulting descriptor in the workload. The kernel never re-reads the
 * workload's buffer, so the record names exactly the file the workload got, whatever another
 * thread writes into the buffer meanwhile. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/kabi.h"
#include "sensor/internal.h"
#include "sensor/paths.h"

#define VALID_OPEN_FLAGS                                                                                    \
	(O_RDONLY | O_WRONLY | O_RDWR | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NDELAY |          \
	 O_DSYNC | FASYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC |        \
	 O_PATH | __O_TMPFILE | O_SYNC)

static bool wants_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) || IS_TMPFILE(flags);
}

/* One open, as decided after reading the workload's memory. Lives on the heap when it moves to
 * a worker thread. */
struct open_req {
	uint64_t id;
	pid_t tid;
	int nr;
	int dirfd;
	bool user_cloexec, user_nonblock, beneath;
	struct open_how how;
	struct sl_task_info ti;
	char path[PATH_MAXLEN]; /* as the workload wrote it */
	char tr[PATH_MAXLEN];	/* absolute, /proc/self rewritten */
	char norm[PATH_MAXLEN]; /* tr, lexically normalised: what the policy judged */
};

/* /proc/<own pid>/{fd/N,exe,cwd,root}: magic links, which the resolver will not follow inside a
 * root. Each leads only to an object the caller already holds, so the link itself is opened
 * through the host's /proc entry of the same process, as the workload. A path going on past the
 * link is rewritten to the sandbox path it names and resolved in the root like any other:
 * followed from the host side, an absolute symlink further down would resolve against the host's
 * root. Returns 1 and sets *fd when handled, 0 to resolve (possibly rewritten) abs, or -errno. */
static int magic_link(const struct sl_task_info *ti, struct open_how *how, const char **abs, char *rewritten, int *fd)
{
	const char *p = *abs;
	unsigned pid, fdn;
	const char *end;
	if (strncmp(p, "/proc/", 6) != 0 || !sl_parse_uint(p + 6, &pid, &end) || *end != '/' ||
	    (pid_t)pid != ti->ns_pid)
		return 0;
	const char *rest = end + 1, *tail = NULL, *link = NULL;
	bool fdlink = false;
	if (!strncmp(rest, "fd/", 3) && sl_parse_uint(rest + 3, &fdn, &tail)) {
		link = "fd";
		fdlink = true;
	} else if (!strncmp(rest, "cwd", 3) && (rest[3] == '\0' || rest[3] == '/')) {
		link = "cwd", tail = rest + 3;
	} else if (!strncmp(rest, "root", 4) && (rest[4] == '\0' || rest[4] == '/')) {
		link = "root", tail = rest + 4;
	} else if (!strcmp(rest, "exe")) {
		link = "exe", tail = rest + 3;
	}
	if (!link)
		return 0;
	char host[96];
	if (fdlink)
		snprintf(host, sizeof(host), "/proc/%d/fd/%u", (int)ti->tgid, fdn);
	else
		snprintf(host, sizeof(host), "/proc/%d/%s", (int)ti->tgid, link);
	if (*tail == '\0') {
		struct open_how h = *how;
		h.resolve &= ~(uint64_t)RESOLVE_IN_ROOT;
		*fd = (int)syscall(SYS_openat2, AT_FDCWD, host, &h, sizeof(h));
		if (*fd < 0)
			*fd = -errno;
		return 1;
	}
	char base[PATH_MAXLEN] = "";
	if (strcmp(link, "root") != 0 && (sl_read_link(host, base, sizeof(base)) < 0 || base[0] != '/'))
		return -ENOTDIR;
	if ((size_t)snprintf(rewritten, PATH_MAXLEN, "%s%s", strcmp(base, "/") ? base : "", tail) >= PATH_MAXLEN)
		return -ENAMETOOLONG;
	*abs = rewritten;
	return 0;
}

/* Open as the workload. Called with the open-time credentials in place (no capability). */
static int open_once(struct sl_supervisor *s, const struct open_req *q, struct open_how *how)
{
	if (HAS_CREATE(how->flags)) {
		/* The workload's umask applies to what it creates (this thread has its own fs_struct). */
		struct sl_task_info fresh;
		umask(sl_task_info(q->tid, &fresh) == 0 ? fresh.umask : 022);
	}
	if (q->beneath) {
		/* openat2 with RESOLVE_BENEATH/IN_ROOT from the workload: the lookup is confined beneath
		 * its dirfd, which we take from the calling thread's own fd table. */
		int dfd;
		if (q->dirfd == AT_FDCWD) {
			char cwd[64];
			snprintf(cwd, sizeof(cwd), "/proc/%d/cwd", (int)q->tid);
			dfd = open(cwd, O_PATH | O_DIRECTORY | O_CLOEXEC);
		} else {
			int pfd = (int)syscall(SYS_pidfd_open, q->tid, PIDFD_THREAD);
			dfd = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, q->dirfd, 0);
			if (pfd >= 0)
				close(pfd);
		}
		if (dfd < 0)
			return -EBADF;
		int fd = (int)syscall(SYS_openat2, dfd, q->path, how, sizeof(*how));
		int e = errno;
		close(dfd);
		return fd < 0 ? -e : fd;
	}
	return sl_open_in_sandbox(s, &q->ti, q->tr, how);
}

int sl_open_in_sandbox(struct sl_supervisor *s, const struct sl_task_info *ti, const char *abs, struct open_how *how)
{
	char rewritten[PATH_MAXLEN];
	int fd = -1;
	int r = magic_link(ti, how, &abs, rewritten, &fd);
	if (r < 0)
		return r;
	if (r == 1)
		return fd;
	/* RESOLVE_IN_ROOT, always, here: absolute paths, absolute symlinks and ".." stay inside the
	 * sandbox's root. Without it an absolute path would ignore root_fd and name the host's. */
	struct open_how h = *how;
	h.resolve |= RESOLVE_IN_ROOT;
	fd = (int)syscall(SYS_openat2, s->sb->root_fd, abs, &h, sizeof(h));
	return fd < 0 ? -errno : fd;
}

static bool is_canary_fd(struct sl_supervisor *s, const struct stat *st)
{
	for (size_t i = 0; i < s->n_canary_ino; i++)
		if (s->canary_ino[i].dev == st->st_dev && s->canary_ino[i].ino == st->st_ino)
			return true;
	return false;
}

/* Install, record, answer. fd < 0 is the errno to answer. */
static void finish(struct sl_supervisor *s, struct open_req *q, int fd, const char *deny_layer,
		   const char *deny_reason, const char *resolved, bool canary)
{
	int64_t result = fd;
	if (fd >= 0) {
		/* Install first without answering, so the event carries the number the workload will
		 * see; then record; then answer. */
		struct seccomp_notif_addfd add = {
			.id = q->id, .srcfd = (uint32_t)fd, .newfd_flags = q->user_cloexec ? O_CLOEXEC : 0};
		int newfd = ioctl(s->sb->listener_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
		int e = errno;
		close(fd);
		if (newfd < 0) {
			if (e == ENOENT)
				return; /* the task died meanwhile: nothing happened */
			result = -e;
		} else {
			result = newfd;
		}
	}
	if (!q->user_cloexec)
		q->how.flags &= ~(uint64_t)O_CLOEXEC;
	struct sl_json j;
	sl_json_init(&j);
	sl_json_task(&j, q->tid, &q->ti);
	sl_json_str(&j, "syscall",
		    q->nr == SYS_open ? "open" : q->nr == SYS_creat ? "creat" : q->nr == SYS_openat ? "openat" : "openat2",
		    0);
	sl_json_str(&j, "path", q->norm[0] ? q->norm : q->path, 0);
	if (strcmp(q->path, q->norm) != 0)
		sl_json_str(&j, "requested", q->path, 0);
	if (resolved && resolved[0] && strcmp(resolved, q->norm) != 0)
		sl_json_str(&j, "resolved", resolved, 0);
	char fl[200];
	sl_flags_str((int)q->how.flags, fl, sizeof(fl));
	sl_json_str(&j, "flags", fl, 0);
	sl_json_bool(&j, "write", wants_write((int)q->how.flags));
	sl_json_int(&j, "result", result);
	if (result < 0)
		sl_json_str(&j, "errno", sl_errno_name((int)-result), 0);
	sl_json_bool(&j, "canary", canary);
	sl_json_bool(&j, "exact", true);
	sl_json_ocsf(&j, 1001, 14 /* Open */, deny_layer ? 2 /* Blocked */ : 1);
	atomic_fetch_add(&s->c.open, 1);
	if (result < 0)
		atomic_fetch_add(&s->c.open_failed, 1);
	if (canary)
		atomic_fetch_add(&s->c.canary, 1);
	int er = sl_emit(s, "file.open", &j);
	sl_json_free(&j);
	if (er == 0 && deny_layer)
		er = sl_deny_event(s, q->tid, &q->ti, q->nr, deny_layer, (int)-result, deny_reason, q->norm, 1001, 14);
	if (er < 0)
		sl_respond(s, q->id, 0, EIO, false);
	else if (result >= 0)
		sl_respond(s, q->id, result, 0, false);
	else
		sl_respond(s, q->id, 0, (int)-result, false);
}

#define OPEN_WOULD_BLOCK (-100000)

/* Open for the workload, knowing what is opened before opening it. The path is resolved once,
 * to an O_PATH handle (no side effect: opening a FIFO for real would pair with a writer); its type
 * decides; then that very inode is reopened through /proc/self/fd with the workload's flags. A
 * FIFO (whose open waits for the other end) is left to a worker unless blocking is allowed.
 * Returns an fd with *st filled, -errno, or OPEN_WOULD_BLOCK. */
static int open_typed(struct sl_supervisor *s, struct open_req *q, struct open_how *how, struct stat *st,
		      bool blocking)
{
	int fd;
	if ((how->flags & O_PATH) || IS_TMPFILE(how->flags)) {
		fd = open_once(s, q, how); /* nothing that can block */
	} else if (!sl_path_writable(s->policy, q->norm) && !q->beneath) {
		/* Read-only parts of the view (the system paths, /proc, /dev): the workload cannot
		 * make a FIFO there, so open directly, without waiting (a host FIFO there, if any,
		 * goes to a worker below), and clear O_NONBLOCK after. One resolution, fewer
		 * syscalls on the path every library load takes. */
		struct open_how nh = *how;
		nh.flags |= O_NONBLOCK;
		fd = open_once(s, q, &nh);
		if (fd >= 0 && fstat(fd, st) == 0 && S_ISFIFO(st->st_mode) && !blocking && !q->user_nonblock) {
			close(fd);
			return OPEN_WOULD_BLOCK;
		}
		if (fd == -ENXIO && !blocking && !q->user_nonblock)
			return OPEN_WOULD_BLOCK;
		if (fd >= 0 && !q->user_nonblock)
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	} else {
		struct open_how ph = {.flags = O_PATH | O_CLOEXEC | (how->flags & (O_NOFOLLOW | O_DIRECTORY)),
				      .resolve = how->resolve};
		int pfd = open_once(s, q, &ph);
		if (pfd == -ENOENT && (how->flags & O_CREAT)) {
			/* Creating: nothing is there (yet). O_NONBLOCK keeps a FIFO made meanwhile by
			 * another process from stalling the sensor; it is cleared below. */
			struct open_how ch = *how;
			ch.flags |= O_NONBLOCK;
			fd = open_once(s, q, &ch);
			if (fd >= 0 && !q->user_nonblock)
				fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		} else if (pfd < 0) {
			fd = pfd;
		} else {
			if (fstat(pfd, st) < 0) {
				fd = -errno;
			} else if (S_ISLNK(st->st_mode)) {
				fd = -ELOOP; /* O_NOFOLLOW on a symlink */
			} else if ((how->flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
				fd = -EEXIST;
			} else if (S_ISFIFO(st->st_mode) && !blocking && !q->user_nonblock) {
				fd = OPEN_WOULD_BLOCK;
			} else {
				char self[64];
				snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
				int fl = (int)(how->flags & ~(uint64_t)(O_CREAT | O_EXCL | O_NOFOLLOW));
				fd = open(self, fl, 0);
				if (fd < 0)
					fd = -errno;
			}
			close(pfd);
		}
	}
	if (fd >= 0 && fstat(fd, st) < 0) {
		close(fd);
		fd = -EIO;
	}
	return fd;
}

/* Open (blocking=false: never wait for a FIFO's other end), post-check, finish. Returns 1 if the
 * open would block and must go to a worker (nothing done yet), else 0. */
static int execute(struct sl_supervisor *s, struct open_req *q, bool blocking)
{
	struct open_how how = q->how;
	how.flags |= O_CLOEXEC; /* never leak into the supervisor's own children */
	struct stat st;
	int fd = open_typed(s, q, &how, &st, blocking);
	if (fd == OPEN_WOULD_BLOCK)
		return 1;
	char resolved[PATH_MAXLEN] = "";
	const char *deny_layer = NULL, *deny_reason = NULL;
	bool canary = sl_path_is_canary(s->policy, q->norm);
	if (fd >= 0) {
		char link[64];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		if (sl_read_link(link, resolved, sizeof(resolved)) < 0)
			resolved[0] = '\0';
		if (is_canary_fd(s, &st) || (resolved[0] == '/' && sl_path_is_canary(s->policy, resolved)))
			canary = true;
		if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 5 && minor(st.st_rdev) <= 2) {
			/* /dev/tty, /dev/console, /dev/ptmx: opened here they would be the supervisor's
			 * terminal. The workload has no controlling terminal (setsid): ENXIO, as the
			 * kernel says to a process without one. */
			close(fd);
			fd = -ENXIO;
		} else if (resolved[0] == '/' &&
			   (!sl_path_readable(s->policy, resolved) ||
			    (wants_write((int)how.flags) && !sl_path_writable(s->policy, resolved)))) {
			/* Post-check on what was really opened: a symlink may lead where the name did
			 * not say. */
			close(fd);
			fd = -EACCES;
			deny_layer = "supervisor";
			deny_reason = "resolves outside the paths the policy allows";
		}
	} else if (fd == -EACCES || fd == -EPERM || fd == -EROFS) {
		deny_layer = "kernel";
		deny_reason = fd == -EROFS ? "read-only mount" : "file permissions";
	}
	finish(s, q, fd, deny_layer, deny_reason, resolved, canary);
	return 0;
}

/* /proc/<own pid>/fd/N (what /dev/stdout and friends name): reopening an object the caller
 * already holds. Whether it may be written is the kernel's and the post-check's question
 * (on the object really opened), not a question about the /proc path. */
static bool own_fd_link(const struct open_req *q)
{
	unsigned pid, fdn;
	const char *end;
	return !strncmp(q->norm, "/proc/", 6) && sl_parse_uint(q->norm + 6, &pid, &end) && *end == '/' &&
	       (pid_t)pid == q->ti.ns_pid && !strncmp(end, "/fd/", 4) && sl_parse_uint(end + 4, &fdn, &end) &&
	       *end == '\0';
}

static void blocking_open(struct sl_supervisor *s, void *arg)
{
	struct open_req *q = arg;
	execute(s, q, true);
	free(q);
}

void sl_handle_open(struct sl_supervisor *s, const struct seccomp_notif *n, const struct sl_task_info *ti)
{
	struct open_req *q = malloc(sizeof(*q));
	if (!q) {
		sl_respond(s, n->id, 0, ENOMEM, false);
		return;
	}
	memset(q, 0, offsetof(struct open_req, path));
	q->path[0] = q->tr[0] = q->norm[0] = '\0';
	q->id = n->id;
	q->tid = n->pid;
	q->nr = n->data.nr;
	q->ti = *ti;
	q->dirfd = AT_FDCWD;
	uint64_t path_addr;
	int r = 0;
	if (q->nr == SYS_open) {
		path_addr = n->data.args[0];
		q->how.flags = n->data.args[1];
		q->how.mode = n->data.args[2];
	} else if (q->nr == SYS_creat) {
		path_addr = n->data.args[0];
		q->how.flags = O_CREAT | O_WRONLY | O_TRUNC;
		q->how.mode = n->data.args[1];
	} else if (q->nr == SYS_openat) {
		q->dirfd = (int)n->data.args[0];
		path_addr = n->data.args[1];
		q->how.flags = n->data.args[2];
		q->how.mode = n->data.args[3];
	} else {
		q->dirfd = (int)n->data.args[0];
		path_addr = n->data.args[1];
		size_t usize = n->data.args[3];
		unsigned char raw[4096];
		if (usize < sizeof(q->how)) {
			r = -EINVAL;
		} else if (usize > sizeof(raw)) {
			r = -E2BIG;
		} else if (sl_mem_read(n->pid, n->data.args[2], raw, usize) < 0) {
			r = -EFAULT;
		} else {
			/* A larger struct from a newer libc is fine only if the part we do not know is
			 * zero, as the kernel requires. */
			for (size_t i = sizeof(q->how); i < usize; i++)
				if (raw[i])
					r = -E2BIG;
			memcpy(&q->how, raw, sizeof(q->how));
		}
	}
	if (q->nr != SYS_openat2) {
		/* What the kernel does for open/openat/creat: drop unknown bits, force O_LARGEFILE,
		 * keep only the O_PATH flags with O_PATH, no mode without a create. */
		q->how.flags = (q->how.flags & VALID_OPEN_FLAGS) | O_LARGEFILE;
		if (q->how.flags & O_PATH)
			q->how.flags &= O_DIRECTORY | O_NOFOLLOW | O_PATH | O_CLOEXEC;
		if (!HAS_CREATE(q->how.flags))
			q->how.mode = 0;
		q->how.mode &= 07777;
	}
	q->user_cloexec = q->how.flags & O_CLOEXEC;
	q->user_nonblock = q->how.flags & O_NONBLOCK;
	ssize_t pl = r == 0 ? sl_mem_read_str(n->pid, path_addr, q->path, sizeof(q->path)) : r;
	if (!sl_id_valid(s, n->id)) {
		free(q); /* the task is gone: what we read may belong to a recycled tid */
		return;
	}
	if (pl < 0) {
		sl_respond(s, n->id, 0, (int)-pl, false);
		free(q);
		return;
	}
	q->beneath = q->nr == SYS_openat2 && (q->how.resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) &&
		     q->path[0] != '/';
	char abs[PATH_MAXLEN];
	r = sl_absolute_path(n->pid, q->dirfd, q->path, abs, sizeof(abs));
	if (r == 0)
		r = sl_translate_self(abs, ti, q->tr, sizeof(q->tr));
	if (r == 0) {
		snprintf(q->norm, sizeof(q->norm), "%s", q->tr);
		sl_path_normalize(q->norm);
	}
	const char *deny_reason = NULL;
	if (r == 0 && !strcmp(q->norm, "/dev/tty")) {
		/* The workload has no controlling terminal (setsid); opened here, /dev/tty would be
		 * the supervisor's. ENXIO is what the kernel answers a process without one. */
		r = -ENXIO;
	} else if (r == 0 && !sl_path_readable(s->policy, q->norm)) {
		r = -EACCES;
		deny_reason = "outside the paths the policy makes visible";
	} else if (r == 0 && wants_write((int)q->how.flags) && !sl_path_writable(s->policy, q->norm) &&
		   !own_fd_link(q)) {
		r = -EACCES;
		deny_reason = "write outside the workspace";
	}
	if (r < 0) {
		/* Refused by policy, or not resolvable (the kernel would fail the same way). */
		finish(s, q, r, deny_reason ? "supervisor" : NULL, deny_reason, NULL,
		       q->norm[0] && sl_path_is_canary(s->policy, q->norm));
		free(q);
		return;
	}
	if (execute(s, q, false) == 1) {
		if (sl_worker_spawn(s, blocking_open, q) == 0)
			return; /* the worker owns q now */
		sl_gap_event(s, q->tid, &q->ti, q->nr, "too many blocking operations at once", EAGAIN);
		finish(s, q, -EAGAIN, NULL, NULL, NULL, false);
	}
	free(q);
}
