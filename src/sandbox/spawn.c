/* Creating the sandbox. The hardening order, and why:
 *  1. clone3 into new user, pid, mount, net, ipc, uts and cgroup namespaces (CLONE_INTO_CGROUP: the
 *     child is in its fresh cgroup before it runs one instruction, and its cgroup namespace is
 *     rooted there). The supervisor writes the uid/gid maps: the workload's inner uid maps to one
 *     unprivileged host uid, never to host root.
 *  2. The child builds its filesystem view (needs CAP_SYS_ADMIN in its own user namespace).
 *  3. setsid: no controlling terminal to inject keystrokes into.
 *  4. (Before 2, keeping capabilities: setgroups/setresgid/setresuid to the inner ids, so what
 *     the setup creates is owned by a mapped id.) Drop the bounding set and every capability,
 *     and check with capget that none is left.
 *  5. rlimits (lowering needs no privilege).
 *  6. no_new_privs: nothing exec'ed later can gain privilege; Landlock and seccomp require it.
 *  7. Landlock: file, TCP and scope rules, enforced by the kernel on the whole subtree.
 *  8. seccomp last: it would refuse the syscalls steps 2-7 need. Its listener goes to the
 *     supervisor and is closed here: the workload must never hold the fd that answers its own
 *     syscalls.
 *  9. Wait for "go" (the supervisor's recorder is ready), close every other fd, exec.
 * The parent dies => the child gets SIGKILL (PDEATHSIG): nothing runs unsupervised. */
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "common/util.h"
#include "sandbox/kabi.h"
#include "sandbox/sandbox.h"

static const char *const gap_names[SL_GAP_COUNT] = {
	"landlock", "landlock-net", "landlock-scope", "cgroup", "cgroup-memory", "cgroup-pids", "notify-sync",
};
static const char *const gap_explain[SL_GAP_COUNT] = {
	"Landlock is not available: file syscalls the supervisor does not emulate are confined only by the "
	"mount view",
	"Landlock ABI < 4: no kernel TCP connect rules (the supervisor still enforces the port policy)",
	"Landlock ABI < 6: abstract unix sockets and signals are not scoped to the sandbox",
	"no writable cgroup v2 (not root, or none mounted): no freeze, no kill-all by cgroup, no memory/pids "
	"limits",
	"no cgroup memory controller: the memory limit is not enforced",
	"no cgroup pids controller: the process-count limit is enforced only by RLIMIT_NPROC",
	"no SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (kernel < 6.6): capture stays exact but each event is slower",
};

const char *sl_gap_name(unsigned i)
{
	return i < SL_GAP_COUNT ? gap_names[i] : "?";
}
const char *sl_gap_explain(unsigned i)
{
	return i < SL_GAP_COUNT ? gap_explain[i] : "?";
}
int sl_gap_parse(const char *name, unsigned *bit)
{
	for (unsigned i = 0; i < SL_GAP_COUNT; i++)
		if (!strcmp(name, gap_names[i])) {
			*bit = 1u << i;
			return 0;
		}
	return -EINVAL;
}

unsigned sl_sandbox_probe(bool want_cgroup, int *landlock_abi)
{
	unsigned gaps = 0;
	int abi = sl_landlock_abi();
	*landlock_abi = abi;
	if (abi < 1)
		gaps |= SL_GAP_LANDLOCK | SL_GAP_LANDLOCK_NET | SL_GAP_LANDLOCK_SCOPE;
	else if (abi < 4)
		gaps |= SL_GAP_LANDLOCK_NET | SL_GAP_LANDLOCK_SCOPE;
	else if (abi < 6)
		gaps |= SL_GAP_LANDLOCK_SCOPE;
	if (!want_cgroup || geteuid() != 0)
		gaps |= SL_GAP_CGROUP | SL_GAP_CGROUP_MEMORY | SL_GAP_CGROUP_PIDS;
	return gaps;
}

/* ---- child side ---------------------------------------------------------------------------- */

static __attribute__((noreturn)) void child_fail(int ctl, const char *msg)
{
	char buf[600];
	int n = snprintf(buf, sizeof(buf), "E%s", msg);
	(void)!send(ctl, buf, (size_t)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1), MSG_NOSIGNAL);
	_exit(127);
}

static int send_fd(int sock, int fd)
{
	char byte = 'L';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

static int wait_byte(int ctl, char want)
{
	char b;
	ssize_t n;
	do
		n = recv(ctl, &b, 1, 0);
	while (n < 0 && errno == EINTR);
	return n == 1 && b == want ? 0 : -EPIPE;
}

static void loopback_up(void)
{
	/* The namespace's own loopback only: there is no route out of it. */
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return;
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
}

static int set_rlimit(int res, uint64_t v)
{
	if (!v)
		return 0;
	struct rlimit rl = {.rlim_cur = v, .rlim_max = v};
	return setrlimit(res, &rl);
}

static __attribute__((noreturn)) void child_main(const struct sl_sandbox_cfg *cfg, int ctl, int landlock_abi,
						  pid_t parent)
{
	char err[512];
	const struct sl_policy *p = cfg->policy;
	/* If the supervisor dies, so does the sandbox (pid 1 dying takes the namespace with it). */
	(void)parent; /* getppid() is 0 here: the parent lives outside our pid namespace */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(127);
	if (cfg->cpu >= 0) {
		/* Share one CPU with the sensor thread: every event is then a same-CPU hand-off
		 * instead of a cross-CPU wake-up. A performance choice, not confinement: the
		 * workload may change its own affinity. */
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cfg->cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	if (wait_byte(ctl, 'M') < 0)
		_exit(127);
	/* Become the inner uid/gid first, keeping the capabilities this user namespace gave us:
	 * files the setup creates must belong to an id mapped in the namespace (host root is not). */
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2] = {{0}};
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		child_fail(ctl, "keepcaps failed");
	/* setgroups is refused when the supervisor is unprivileged ("deny" in setgroups, as the
	 * kernel requires); then the workload keeps no mapped group anyway. */
	if (setgroups(0, NULL) < 0 && errno != EPERM)
		child_fail(ctl, "setgroups failed");
	if (setresgid(cfg->inner_gid, cfg->inner_gid, cfg->inner_gid) < 0)
		child_fail(ctl, "setresgid failed");
	if (setresuid(cfg->inner_uid, cfg->inner_uid, cfg->inner_uid) < 0)
		child_fail(ctl, "setresuid failed");
	if (syscall(SYS_capget, &hdr, data) < 0)
		child_fail(ctl, "capget failed");
	data[0].effective = data[0].permitted;
	data[1].effective = data[1].permitted;
	if (syscall(SYS_capset, &hdr, data) < 0)
		child_fail(ctl, "capset failed");
	if (sl_mounts_setup(cfg, err, sizeof(err)) < 0)
		child_fail(ctl, err);
	if (sethostname("sightline", 9) < 0)
		child_fail(ctl, "sethostname failed");
	loopback_up();
	/* TCP Fast Open would put data on the wire from sendto()/sendmsg() without a connect()
	 * the sensor sees: off in the sandbox's own network namespace. */
	int tfo = open("/proc/sys/net/ipv4/tcp_fastopen", O_WRONLY | O_CLOEXEC);
	if (tfo < 0 || write(tfo, "0", 1) != 1)
		child_fail(ctl, "cannot turn off TCP Fast Open in the sandbox's network namespace");
	close(tfo);
	if (setsid() < 0)
		child_fail(ctl, "setsid failed");
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			child_fail(ctl, "dropping the capability bounding set failed");
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	/* Now drop every capability for good, and check. */
	memset(data, 0, sizeof(data));
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0 || syscall(SYS_capset, &hdr, data) < 0 ||
	    syscall(SYS_capget, &hdr, data) < 0 || data[0].effective || data[0].permitted || data[0].inheritable ||
	    data[1].effective || data[1].permitted || data[1].inheritable)
		child_fail(ctl, "capabilities could not be cleared");
	if (set_rlimit(RLIMIT_NOFILE, p->limits.nofile) < 0 || set_rlimit(RLIMIT_CPU, p->limits.cpu_seconds) < 0 ||
	    set_rlimit(RLIMIT_FSIZE, p->limits.file_size) < 0 || set_rlimit(RLIMIT_NPROC, p->limits.pids) < 0 ||
	    set_rlimit(RLIMIT_CORE, 1) < 0)
		child_fail(ctl, "setrlimit failed");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(ctl, "no_new_privs failed");
	/* The uid change made us non-dumpable; the sensor (holding no capability in the host's
	 * user namespace) must read our memory from the first exec on. Our memory is a copy of the
	 * supervisor's before exec replaces it, and no other sandbox process exists yet to read it. */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		child_fail(ctl, "set dumpable failed");
	if (sl_landlock_apply(p, landlock_abi, cfg->gaps, err, sizeof(err)) < 0)
		child_fail(ctl, err);
	int listener = sl_seccomp_install(cfg->record_opens, err, sizeof(err));
	if (listener < 0)
		child_fail(ctl, err);
	if (send_fd(ctl, listener) < 0)
		_exit(127);
	close(listener);
	if (wait_byte(ctl, 'G') < 0)
		_exit(127);
	/* Nothing of the supervisor's crosses into the workload but stdin/stdout/stderr: no fd,
	 * no blocked signal, no ignored signal. */
	syscall(SYS_close_range, 3, ~0U, 0);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	environ = (char **)cfg->envp; /* execvp searches the workload's PATH, not ours */
	execvp(cfg->argv[0], cfg->argv);
	int e = errno;
	dprintf(2, "sightline: exec %s: %s\n", cfg->argv[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/* ---- parent side --------------------------------------------------------------------------- */

static int write_map(pid_t pid, const char *file, const char *val)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return sl_write_all(fd, val, strlen(val));
}

static int recv_listener(int ctl, int *fd_out, char *err, size_t errlen)
{
	char buf[600];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
	union {
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.cbuf, .msg_controllen = sizeof(u.cbuf)};
	ssize_t n;
	do
		n = recvmsg(ctl, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		snprintf(err, errlen, "sandbox setup: the child died before handing over its listener");
		return -EPIPE;
	}
	buf[n] = '\0';
	int fd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (buf[0] == 'E') {
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "sandbox setup: %s", buf + 1);
		return -EPERM;
	}
	if (buf[0] != 'L' || fd < 0 || (msg.msg_flags & MSG_CTRUNC)) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "sandbox setup: malformed handover from the child");
		return -EPROTO;
	}
	*fd_out = fd;
	return 0;
}

int sl_sandbox_start(const struct sl_sandbox_cfg *cfg, struct sl_sandbox *sb, char *err, size_t errlen)
{
	int r;
	int sv[2];
	memset(sb, 0, sizeof(*sb));
	sb->pidfd = sb->listener_fd = sb->ctl_fd = sb->root_fd = sb->cg.v2_fd = -1;
	sb->pid = -1;
	sb->landlock_abi = sl_landlock_abi();
	unsigned gaps = cfg->gaps;
	if (!(gaps & SL_GAP_CGROUP)) {
		if ((r = sl_cgroup_create(&sb->cg, cfg->sandbox_id, &cfg->policy->limits, &gaps)) < 0) {
			snprintf(err, errlen, "cgroup: %s", strerror(-r));
			return r;
		}
		sb->gaps_found = gaps & ~cfg->gaps & cfg->accepted;
		if ((gaps & ~cfg->gaps & ~cfg->accepted) != 0) {
			unsigned missing = gaps & ~cfg->gaps & ~cfg->accepted;
			for (unsigned i = 0; i < SL_GAP_COUNT; i++)
				if (missing & (1u << i)) {
					snprintf(err, errlen, "missing layer '%s': %s (accept with --accept-gap %s)",
						 sl_gap_name(i), sl_gap_explain(i), sl_gap_name(i));
					break;
				}
			sl_cgroup_destroy(&sb->cg);
			return -EOPNOTSUPP;
		}
	}
	sl_timing("cgroups created");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		r = -errno;
		goto fail;
	}
	pid_t parent = getpid();
	int pidfd = -1;
	struct clone_args ca = {
		.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
			 CLONE_NEWCGROUP | CLONE_PIDFD,
		.pidfd = (uint64_t)(uintptr_t)&pidfd,
		.exit_signal = SIGCHLD,
	};
	if (sb->cg.v2_fd >= 0) {
		ca.flags |= CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)sb->cg.v2_fd;
	}
	/* The supervisor is single-threaded here (the recorder starts after), so a raw clone3 is as
	 * safe as fork(). */
	long pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid < 0) {
		r = -errno;
		snprintf(err, errlen, "clone3 into new namespaces: %s%s", strerror(errno),
			 errno == EPERM || errno == ENOSPC ? " (are user namespaces disabled?)" : "");
		close(sv[0]);
		close(sv[1]);
		goto fail;
	}
	if (pid == 0) {
		close(sv[0]);
		child_main(cfg, sv[1], sb->landlock_abi, parent);
	}
	close(sv[1]);
	sb->pid = (pid_t)pid;
	sb->pidfd = pidfd;
	sb->ctl_fd = sv[0];
	sb->start_mono_ns = sl_now_monotonic_ns();
	sb->start_real_ns = sl_now_realtime_ns();
	sl_timing("cloned");
	char map[64];
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)cfg->inner_uid, (unsigned)cfg->host_uid);
	if (geteuid() != 0 && (r = write_map(sb->pid, "setgroups", "deny")) < 0) {
		snprintf(err, errlen, "write setgroups: %s", strerror(-r));
		goto fail;
	}
	if ((r = write_map(sb->pid, "uid_map", map)) < 0) {
		snprintf(err, errlen, "write uid_map: %s", strerror(-r));
		goto fail;
	}
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)cfg->inner_gid, (unsigned)cfg->host_gid);
	if ((r = write_map(sb->pid, "gid_map", map)) < 0) {
		snprintf(err, errlen, "write gid_map: %s", strerror(-r));
		goto fail;
	}
	sl_timing("maps written");
	if (send(sb->ctl_fd, "M", 1, MSG_NOSIGNAL) != 1) {
		r = -EPIPE;
		snprintf(err, errlen, "sandbox setup: child gone");
		goto fail;
	}
	/* While the child builds its root: join the v1 memory/pids cgroups (slow: the kernel waits
	 * for an RCU grace period). The child runs nothing of the workload's before "go". */
	if ((r = sl_cgroup_attach_v1(&sb->cg, sb->pid)) < 0) {
		snprintf(err, errlen, "attach to v1 cgroups: %s", strerror(-r));
		goto fail;
	}
	sl_timing("v1 cgroups attached");
	if ((r = recv_listener(sb->ctl_fd, &sb->listener_fd, err, errlen)) < 0)
		goto fail;
	sl_timing("listener received");
	/* The sandbox's root, as an O_PATH handle: the supervisor resolves the workload's paths
	 * beneath it (RESOLVE_IN_ROOT), exactly as the workload would. */
	char rootp[64];
	snprintf(rootp, sizeof(rootp), "/proc/%d/root", (int)sb->pid);
	sb->root_fd = open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (sb->root_fd < 0) {
		r = -errno;
		snprintf(err, errlen, "open sandbox root: %s", strerror(errno));
		goto fail;
	}
	return 0;
fail:
	if (sb->pid > 0) {
		kill(sb->pid, SIGKILL);
		waitpid(sb->pid, NULL, 0);
		sb->pid = -1;
	}
	sl_sandbox_destroy(sb);
	return r;
}

int sl_sandbox_go(struct sl_sandbox *sb)
{
	int r = send(sb->ctl_fd, "G", 1, MSG_NOSIGNAL) == 1 ? 0 : -EPIPE;
	close(sb->ctl_fd);
	sb->ctl_fd = -1;
	return r;
}

int sl_sandbox_reap(struct sl_sandbox *sb, int *wstatus, struct rusage *ru)
{
	pid_t r;
	do
		r = wait4(sb->pid, wstatus, 0, ru);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

int sl_sandbox_kill(struct sl_sandbox *sb)
{
	/* cgroup.kill reaches every process even if one escaped the pid namespace's teardown order;
	 * SIGKILL to pid 1 takes the whole pid namespace with it. Do both. */
	int r = -ESRCH;
	if (sb->cg.v2[0]) {
		char path[600];
		snprintf(path, sizeof(path), "%s/cgroup.kill", sb->cg.v2);
		_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0 && write(fd, "1", 1) == 1)
			r = 0;
	}
	if (sb->pidfd >= 0 && syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0) == 0)
		r = 0;
	return r;
}

void sl_sandbox_destroy(struct sl_sandbox *sb)
{
	int *fds[] = {&sb->pidfd, &sb->listener_fd, &sb->ctl_fd, &sb->root_fd};
	for (size_t i = 0; i < SL_ARRAY_LEN(fds); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
	sl_cgroup_destroy(&sb->cg);
}
