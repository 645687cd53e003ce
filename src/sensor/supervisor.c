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
#include <time.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "sandbox/kabi.h"
#include "sensor/internal.h"
#include "sensor/paths.h"
#include "sensor/redact.h"
#include "sensor/syscalls.h"


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

/* ---- credentials ---------------------------------------------------------------------------- */

int sl_thread_become_workload(struct sl_supervisor *s)
{
	/* This thread acts as the workload for file access: its own cwd/umask (CLONE_FS), the
	 * workload's fsuid/fsgid (per-thread in Linux), no supplementary groups (raw syscall: glibc's
	 * setgroups would change every thread). The fs capabilities drop with a non-zero fsuid. */
	if (unshare(CLONE_FS) < 0 || (s->drop_groups && syscall(SYS_setgroups, 0, NULL) < 0))
		return -errno;
	setfsgid(s->w_gid);
	setfsuid(s->w_uid);
	if ((uid_t)setfsuid((uid_t)-1) != s->w_uid || (gid_t)setfsgid((gid_t)-1) != s->w_gid)
		return -EPERM;
	sl_drop_effective_caps(s);
	return 0;
}

void sl_drop_effective_caps(struct sl_supervisor *s)
{
	/* Per thread (raw capset): no effective capability at all, so a file the sensor opens for
	 * the workload carries no host privilege in its credentials (kallsyms, pagemap and
	 * /proc/PID/mem decide by them). Reading the workload's memory and taking its fds still
	 * works: the workload's user namespace is a child of ours owned by our euid, and the kernel
	 * gives the owner every capability inside it, whatever our effective set. */
	if (!s->privileged)
		return;
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return;
	data[0].effective = data[1].effective = 0;
	if (syscall(SYS_capset, &hdr, data) < 0)
		abort(); /* cannot happen (lowering is always allowed); never open with privilege */
}

/* ---- workers for operations that may block --------------------------------------------------- */

#define MAX_WORKERS 64
struct worker_arg {
	struct sl_supervisor *s;
	void (*fn)(struct sl_supervisor *, void *);
	void *arg;
	int slot;
};

static void *worker_main(void *p)
{
	struct worker_arg w = *(struct worker_arg *)p;
	free(p);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	/* Created by the sensor thread, a worker inherits its identity (the workload's fsuid/fsgid,
	 * no groups, no effective capability: it could not switch again). It needs only its own
	 * fs_struct, for the workload's umask. fn always runs: it owes the kernel an answer. */
	unshare(CLONE_FS);
	w.fn(w.s, w.arg);
	pthread_mutex_lock(&w.s->workers_mu);
	w.s->worker_busy[w.slot] = false;
	w.s->n_workers--;
	pthread_mutex_unlock(&w.s->workers_mu);
	return NULL;
}

int sl_worker_spawn(struct sl_supervisor *s, void (*fn)(struct sl_supervisor *, void *), void *arg)
{
	struct worker_arg *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct worker_arg){.s = s, .fn = fn, .arg = arg, .slot = -1};
	pthread_mutex_lock(&s->workers_mu);
	for (int i = 0; i < MAX_WORKERS && w->slot < 0; i++)
		if (!s->worker_busy[i])
			w->slot = i;
	if (w->slot < 0 || atomic_load(&s->stopping)) {
		pthread_mutex_unlock(&s->workers_mu);
		free(w);
		return -EAGAIN;
	}
	s->worker_busy[w->slot] = true;
	s->n_workers++;
	int slot = w->slot;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int r = pthread_create(&s->worker[slot], &attr, worker_main, w);
	pthread_attr_destroy(&attr);
	if (r) {
		s->worker_busy[slot] = false;
		s->n_workers--;
		pthread_mutex_unlock(&s->workers_mu);
		free(w);
		return -r;
	}
	pthread_mutex_unlock(&s->workers_mu);
	return 0;
}

/* Canary files by identity too: an alias (another bind, a hard link) is still the canary. */
static void canaries_init(struct sl_supervisor *s)
{
	s->n_canary_ino = 0;
	for (size_t i = 0; i < s->policy->n_canaries && s->n_canary_ino < SL_ARRAY_LEN(s->canary_ino); i++) {
		struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
		int fd = (int)syscall(SYS_openat2, s->sb->root_fd, s->policy->canaries[i], &how, sizeof(how));
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
			s->canary_ino[s->n_canary_ino].dev = st.st_dev;
			s->canary_ino[s->n_canary_ino].ino = st.st_ino;
			s->n_canary_ino++;
		}
		if (fd >= 0)
			close(fd);
	}
}

/* ---- the loop ------------------------------------------------------------------------------- */

static void handle(struct sl_supervisor *s, const struct seccomp_notif *n)
{
	struct sl_task_info ti;
	int nr = n->data.nr;
	atomic_fetch_add(&s->c.notifications, 1);
	if (n->data.arch != AUDIT_ARCH_X86_64) {
		/* The filter kills other ABIs; this cannot happen. Refuse, and say so. */
		sl_respond(s, n->id, 0, ENOSYS, false);
		return;
	}
	bool fresh = nr == SYS_execve || nr == SYS_execveat;
	int tr = task_get(s, n->pid, &ti, fresh);
	if (tr < 0) {
		/* Cannot say who asked (the task died, or we are out of fds): refuse, and never
		 * silently. */
		if (tr != -ESRCH && tr != -ENOENT)
			sl_gap_event(s, n->pid, NULL, nr, "task unknown to the sensor", -tr);
		sl_respond(s, n->id, 0, tr == -ENOENT ? ESRCH : -tr, false);
		return;
	}
	sl_exec_verify(s, n->pid, &ti);
	switch (nr) {
	case SYS_open:
	case SYS_openat:
	case SYS_openat2:
	case SYS_creat:
		sl_handle_open(s, n, &ti);
		return;
	case SYS_execve:
	case SYS_execveat:
		sl_handle_exec(s, n, &ti);
		return;
	case SYS_connect:
		sl_handle_connect(s, n, &ti);
		return;
	case SYS_clone:
	case SYS_unshare:
		if (sl_deny_event(s, n->pid, &ti, nr, "seccomp", EPERM, "new namespaces are not allowed", NULL, 1007, 0) < 0)
			sl_respond(s, n->id, 0, EIO, false);
		else
			sl_respond(s, n->id, 0, EPERM, false);
		return;
	case SYS_sendto:
	case SYS_sendmsg:
	case SYS_sendmmsg:
		if (sl_deny_event(s, n->pid, &ti, nr, "seccomp", EPERM, "TCP Fast Open (connect without connect())",
				  NULL, 4001, 5) < 0)
			sl_respond(s, n->id, 0, EIO, false);
		else
			sl_respond(s, n->id, 0, EPERM, false);
		return;
	case SYS_ioctl:
		if (sl_deny_event(s, n->pid, &ti, nr, "seccomp", EPERM, "terminal input injection", NULL, 1007, 0) < 0)
			sl_respond(s, n->id, 0, EIO, false);
		else
			sl_respond(s, n->id, 0, EPERM, false);
		return;
	default:
		if (sl_syscall_is_denied(nr)) {
			if (sl_deny_event(s, n->pid, &ti, nr, "seccomp", EPERM, "syscall refused by the sandbox", NULL, 1007,
				       0) < 0)
				sl_respond(s, n->id, 0, EIO, false);
			else
				sl_respond(s, n->id, 0, EPERM, false);
			return;
		}
		/* A notification we never asked for: refuse rather than guess, and record the gap. */
		sl_gap_event(s, n->pid, &ti, nr, "unexpected notification", ENOSYS);
		sl_respond(s, n->id, 0, ENOSYS, false);
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
	int cr = sl_thread_become_workload(s);
	if (cr < 0) {
		atomic_store(&s->fatal, cr);
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
	s->privileged = geteuid() == 0;
	pthread_mutex_init(&s->workers_mu, NULL);
	canaries_init(s);
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
		for (;;) {
			pthread_kill(s->thread, SL_STOP_SIGNAL);
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			if (pthread_timedjoin_np(s->thread, NULL, &ts) != ETIMEDOUT)
				break;
		}
		s->running = false;
		/* Workers blocked on a FIFO or a connect whose other end died with the sandbox: wake
		 * them (EINTR) until none is left, so none touches the record after it is closed. */
		for (;;) {
			pthread_mutex_lock(&s->workers_mu);
			int n = s->n_workers;
			for (int i = 0; i < MAX_WORKERS; i++)
				if (s->worker_busy[i])
					pthread_kill(s->worker[i], SL_STOP_SIGNAL);
			pthread_mutex_unlock(&s->workers_mu);
			if (n == 0)
				break;
			usleep(200);
		}
	}
	if (s->cache) {
		for (size_t i = 0; i < CACHE_SLOTS; i++)
			if (s->cache->e[i].pidfd >= 0)
				close(s->cache->e[i].pidfd);
		free(s->cache);
		s->cache = NULL;
	}
}
