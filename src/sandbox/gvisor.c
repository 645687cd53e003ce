/* Building and driving one runsc sandbox (see gvisor.h). */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "sandbox/gvisor.h"

/* The context fields every point carries. env/envv are never asked for: metadata over content
 * (with them the Sentry would send whole environments). */
static const char *const ctx_fields[] = {"time", "thread_id",	 "group_id",   "container_id",
					 "cwd",	 "process_name", "credentials"};

static const struct {
	const char *name;
	const char *optional; /* NULL or the one optional field */
} points[] = {
    {"container/start", NULL},
    {"sentry/clone", NULL},
    {"sentry/execve", "binary_info"},
    {"sentry/exit_notify_parent", NULL},
    {"sentry/task_exit", NULL},
    /* runsc rejects an optional field a point lacks, and then runs the workload WITHOUT any
     * trace session (a warning only): open and execve have no fd_path in this version. */
    {"syscall/open/exit", NULL},
    {"syscall/openat/exit", "fd_path"},
    {"syscall/creat/exit", "fd_path"},
    {"syscall/socket/exit", NULL},
    {"syscall/connect/enter", "fd_path"},
    {"syscall/connect/exit", "fd_path"},
    {"syscall/bind/exit", "fd_path"},
    {"syscall/execve/exit", NULL},
    {"syscall/execveat/exit", "fd_path"},
};

static int write_json(const char *path, struct sl_json *j)
{
	if (sl_json_error(j))
		return sl_json_error(j);
	return sl_write_file_durable(path, j->buf, j->len, 0600);
}

static int pod_config(const struct sl_gvisor_cfg *cfg, const char *path)
{
	struct sl_json j;
	sl_json_init(&j);
	sl_json_obj_open(&j, NULL);
	sl_json_obj_open(&j, "trace_session");
	sl_json_str(&j, "name", "Default", 0);
	sl_json_arr_open(&j, "points");
	for (size_t i = 0; i < SL_ARRAY_LEN(points); i++) {
		/* The policy may turn open recording off (tests of gaps): then the Sentry is not even
		 * asked for them, and the record's declared gap is the truth. */
		if (!cfg->policy->record_opens &&
		    (strstr(points[i].name, "/open") || strstr(points[i].name, "/creat")))
			continue;
		sl_json_obj_open(&j, NULL);
		sl_json_str(&j, "name", points[i].name, 0);
		sl_json_arr_open(&j, "optional_fields");
		if (points[i].optional)
			sl_json_str(&j, NULL, points[i].optional, 0);
		sl_json_arr_close(&j);
		sl_json_arr_open(&j, "context_fields");
		for (size_t k = 0; k < SL_ARRAY_LEN(ctx_fields); k++)
			sl_json_str(&j, NULL, ctx_fields[k], 0);
		sl_json_arr_close(&j);
		sl_json_obj_close(&j);
	}
	sl_json_arr_close(&j);
	sl_json_arr_open(&j, "sinks");
	sl_json_obj_open(&j, NULL);
	sl_json_str(&j, "name", "remote", 0);
	sl_json_obj_open(&j, "config");
	sl_json_str(&j, "endpoint", cfg->sink_path, 0);
	/* The Sentry waits (exponential backoff 25 us .. 10 ms) instead of dropping: the workload is
	 * slowed, the evidence kept. retries 0 only for the loss test. */
	sl_json_uint(&j, "retries", cfg->retries);
	sl_json_str(&j, "backoff", "25us", 0);
	sl_json_str(&j, "backoff_max", "10ms", 0);
	sl_json_obj_close(&j);
	/* Fail closed: no sink, no sandbox. */
	sl_json_bool(&j, "ignore_setup_error", false);
	sl_json_obj_close(&j);
	sl_json_arr_close(&j);
	sl_json_obj_close(&j);
	sl_json_obj_close(&j);
	sl_json_raw(&j, "\n", 1);
	int r = write_json(path, &j);
	sl_json_free(&j);
	return r;
}

static void mount_entry(struct sl_json *j, const char *dst, const char *type, const char *src,
			const char *const *opts, size_t nopts)
{
	sl_json_obj_open(j, NULL);
	sl_json_str(j, "destination", dst, 0);
	sl_json_str(j, "type", type, 0);
	sl_json_str(j, "source", src, 0);
	sl_json_arr_open(j, "options");
	for (size_t i = 0; i < nopts; i++)
		sl_json_str(j, NULL, opts[i], 0);
	sl_json_arr_close(j);
	sl_json_obj_close(j);
}

/* Mount points must exist in the (read-only, empty) rootfs. */
static int mkpoint(const char *rootfs, const char *p)
{
	char path[PATH_MAX];
	if ((size_t)snprintf(path, sizeof(path), "%s%s", rootfs, p) >= sizeof(path))
		return -ENAMETOOLONG;
	return sl_mkdir_p(path, 0755);
}

static int oci_config(const struct sl_gvisor_cfg *cfg, const char *path, const char *rootfs, char *err,
		      size_t errlen)
{
	const struct sl_policy *p = cfg->policy;
	int r;
	const char *fixed[] = {"/proc", "/dev", "/tmp", p->workspace_mount};
	for (size_t i = 0; i < SL_ARRAY_LEN(fixed); i++)
		if ((r = mkpoint(rootfs, fixed[i])) < 0) {
			snprintf(err, errlen, "mount point %s: %s", fixed[i], strerror(-r));
			return r;
		}
	struct sl_json j;
	sl_json_init(&j);
	sl_json_obj_open(&j, NULL);
	sl_json_str(&j, "ociVersion", "1.0.0", 0);
	sl_json_obj_open(&j, "process");
	sl_json_obj_open(&j, "user");
	sl_json_uint(&j, "uid", cfg->uid);
	sl_json_uint(&j, "gid", cfg->gid);
	sl_json_obj_close(&j);
	sl_json_arr_open(&j, "args");
	for (size_t i = 0; cfg->argv[i]; i++)
		sl_json_str(&j, NULL, cfg->argv[i], SIZE_MAX / 2);
	sl_json_arr_close(&j);
	sl_json_arr_open(&j, "env");
	for (size_t i = 0; cfg->envp[i]; i++)
		sl_json_str(&j, NULL, cfg->envp[i], SIZE_MAX / 2);
	sl_json_arr_close(&j);
	sl_json_str(&j, "cwd", p->workspace_mount, 0);
	sl_json_bool(&j, "noNewPrivileges", true);
	/* No capabilities at all inside the Sentry either. */
	sl_json_obj_open(&j, "capabilities");
	sl_json_obj_close(&j);
	sl_json_arr_open(&j, "rlimits");
	const struct {
		const char *type;
		uint64_t v;
	} rl[] = {{"RLIMIT_NOFILE", p->limits.nofile},
		  {"RLIMIT_CPU", p->limits.cpu_seconds},
		  {"RLIMIT_FSIZE", p->limits.file_size},
		  {"RLIMIT_NPROC", p->limits.pids}};
	for (size_t i = 0; i < SL_ARRAY_LEN(rl); i++) {
		if (!rl[i].v)
			continue;
		sl_json_obj_open(&j, NULL);
		sl_json_str(&j, "type", rl[i].type, 0);
		sl_json_uint(&j, "hard", rl[i].v);
		sl_json_uint(&j, "soft", rl[i].v);
		sl_json_obj_close(&j);
	}
	sl_json_arr_close(&j);
	sl_json_obj_close(&j);
	/* An empty, read-only root: the workload sees only what is bound below. */
	sl_json_obj_open(&j, "root");
	sl_json_str(&j, "path", rootfs, 0);
	sl_json_bool(&j, "readonly", true);
	sl_json_obj_close(&j);
	sl_json_str(&j, "hostname", "sightline", 0);
	sl_json_arr_open(&j, "mounts");
	mount_entry(&j, "/proc", "proc", "proc", NULL, 0);
	if (p->tmp) {
		char size[64];
		snprintf(size, sizeof(size), "size=%llu", (unsigned long long)p->limits.tmp_size);
		const char *o[] = {"nosuid", "nodev", size};
		mount_entry(&j, "/tmp", "tmpfs", "tmpfs", o, p->limits.tmp_size ? 3 : 2);
	}
	for (size_t i = 0; i < p->n_ro; i++) {
		struct stat st;
		/* Like the native sandbox: a read-only path the host lacks is not bound. */
		if (stat(p->ro_paths[i], &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			r = mkpoint(rootfs, p->ro_paths[i]);
		else {
			char f[PATH_MAX];
			r = mkpoint(rootfs, p->ro_paths[i]);
			if (r == 0 &&
			    (size_t)snprintf(f, sizeof(f), "%s%s", rootfs, p->ro_paths[i]) < sizeof(f)) {
				rmdir(f);
				int fd = open(f, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
				if (fd >= 0)
					close(fd);
			}
		}
		if (r < 0) {
			snprintf(err, errlen, "mount point %s: %s", p->ro_paths[i], strerror(-r));
			sl_json_free(&j);
			return r;
		}
		const char *o[] = {"rbind", "ro", "nosuid", "nodev"};
		mount_entry(&j, p->ro_paths[i], "bind", p->ro_paths[i], o, 4);
	}
	const char *wo[] = {"rbind", "rw", "nosuid", "nodev"};
	mount_entry(&j, p->workspace_mount, "bind", cfg->workspace_host, wo, 4);
	sl_json_arr_close(&j);
	sl_json_obj_open(&j, "linux");
	sl_json_arr_open(&j, "namespaces");
	const char *ns[] = {"pid", "network", "ipc", "uts", "mount"};
	for (size_t i = 0; i < SL_ARRAY_LEN(ns); i++) {
		sl_json_obj_open(&j, NULL);
		sl_json_str(&j, "type", ns[i], 0);
		sl_json_obj_close(&j);
	}
	sl_json_arr_close(&j);
	sl_json_obj_close(&j);
	sl_json_obj_close(&j);
	sl_json_raw(&j, "\n", 1);
	r = write_json(path, &j);
	sl_json_free(&j);
	if (r < 0)
		snprintf(err, errlen, "write %s: %s", path, strerror(-r));
	return r;
}

int sl_gvisor_prepare(const struct sl_gvisor_cfg *cfg, struct sl_gvisor *g, char *err, size_t errlen)
{
	memset(g, 0, sizeof(*g));
	g->pid = -1;
	g->pidfd = -1;
	g->relay_fd[0] = g->relay_fd[1] = -1;
	g->runsc = cfg->runsc ? cfg->runsc : "runsc";
	snprintf(g->id, sizeof(g->id), "%s", cfg->container_id);
	char rootfs[PATH_MAX], conf[PATH_MAX];
	if ((size_t)snprintf(g->root, sizeof(g->root), "%s/state", cfg->dir) >= sizeof(g->root) ||
	    (size_t)snprintf(g->bundle, sizeof(g->bundle), "%s/bundle", cfg->dir) >= sizeof(g->bundle) ||
	    (size_t)snprintf(g->pod_config, sizeof(g->pod_config), "%s/pod-init.json", cfg->dir) >=
		sizeof(g->pod_config) ||
	    (size_t)snprintf(rootfs, sizeof(rootfs), "%s/rootfs", g->bundle) >= sizeof(rootfs) ||
	    (size_t)snprintf(conf, sizeof(conf), "%s/config.json", g->bundle) >= sizeof(conf)) {
		snprintf(err, errlen, "private directory path too long");
		return -ENAMETOOLONG;
	}
	/* Private: the sink socket and runsc's state must not be reachable by anyone else. */
	int r = sl_mkdir_p(cfg->dir, 0700);
	if (r == 0 && chmod(cfg->dir, 0700) < 0)
		r = -errno;
	if (r == 0)
		r = sl_mkdir_p(g->root, 0700);
	if (r == 0)
		r = sl_mkdir_p(rootfs, 0755);
	if (r < 0) {
		snprintf(err, errlen, "create %s: %s", cfg->dir, strerror(-r));
		return r;
	}
	if ((r = oci_config(cfg, conf, rootfs, err, errlen)) < 0)
		return r;
	if ((r = pod_config(cfg, g->pod_config)) < 0) {
		snprintf(err, errlen, "write %s: %s", g->pod_config, strerror(-r));
		return r;
	}
	return 0;
}

/* Run runsc with args; wait; return its exit status or -errno. stdout discarded unless out. */
static int runsc_cmd(const char *runsc, char *const *args, char *out, size_t outlen)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return e;
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(pfd[1], 1);
		int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (dn >= 0) {
			dup2(dn, 0);
			if (!out)
				dup2(dn, 1);
			dup2(dn, 2);
		}
		char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		execvpe(runsc, args, env);
		_exit(127);
	}
	close(pfd[1]);
	size_t off = 0;
	char tmp[512];
	ssize_t n;
	while ((n = read(pfd[0], tmp, sizeof(tmp))) > 0 || (n < 0 && errno == EINTR)) {
		if (n < 0)
			continue;
		if (out && off + 1 < outlen) {
			size_t k = (size_t)n < outlen - 1 - off ? (size_t)n : outlen - 1 - off;
			memcpy(out + off, tmp, k);
			off += k;
		}
	}
	if (out && outlen)
		out[off] = '\0';
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int sl_gvisor_version(const char *runsc, char *out, size_t len)
{
	char *args[] = {(char *)(runsc ? runsc : "runsc"), "--version", NULL};
	int r = runsc_cmd(args[0], args, out, len);
	if (r < 0)
		return r;
	if (r != 0)
		return -ENOENT;
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = '\0';
	return out[0] ? 0 : -ENOENT;
}

/* Copy the sandbox's stdout/stderr pipes to ours until both end, or until told to stop and
 * nothing came for 100 ms (a straggler holding a pipe must not hold the supervisor). */
static void *relay_main(void *arg)
{
	struct sl_gvisor *g = arg;
	sigset_t pipe_sig;
	sigemptyset(&pipe_sig);
	sigaddset(&pipe_sig, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_sig, NULL); /* a closed stdout is EPIPE here, not death */
	char buf[16384];
	for (;;) {
		struct pollfd pf[2] = {{.fd = g->relay_fd[0], .events = POLLIN},
				       {.fd = g->relay_fd[1], .events = POLLIN}};
		if (pf[0].fd < 0 && pf[1].fd < 0)
			break;
		int pr = poll(pf, 2, 100);
		if (pr == 0 && atomic_load(&g->relay_stop))
			break;
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			ssize_t n = read(pf[i].fd, buf, sizeof(buf));
			if (n > 0) {
				(void)sl_write_all(1 + i, buf, (size_t)n);
			} else if (n == 0 || errno != EINTR) {
				close(g->relay_fd[i]);
				g->relay_fd[i] = -1;
			}
		}
	}
	return NULL;
}

int sl_gvisor_start(const struct sl_gvisor_cfg *cfg, struct sl_gvisor *g, char *err, size_t errlen)
{
	int outp[2] = {-1, -1}, errp[2] = {-1, -1};
	if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		int e = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(-e));
		for (int i = 0; i < 2; i++) {
			if (outp[i] >= 0)
				close(outp[i]);
			if (errp[i] >= 0)
				close(errp[i]);
		}
		return e;
	}
	char rootarg[PATH_MAX + 8], podarg[PATH_MAX + 20];
	snprintf(rootarg, sizeof(rootarg), "--root=%s", g->root);
	snprintf(podarg, sizeof(podarg), "--pod-init-config=%s", g->pod_config);
	char *args[] = {
	    (char *)g->runsc, rootarg, "--network=none", podarg, "run", "--bundle", g->bundle, g->id, NULL};
	(void)cfg;
	g->start_real_ns = sl_now_realtime_ns();
	g->start_mono_ns = sl_now_monotonic_ns();
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		snprintf(err, errlen, "fork: %s", strerror(-e));
		for (int i = 0; i < 2; i++) {
			close(outp[i]);
			close(errp[i]);
		}
		return e;
	}
	if (pid == 0) {
		/* Its own process group: the control path can kill runsc, its gofer and its sandbox
		 * process together. The launcher's environment (secrets, SIGHTLINE_*) never reaches
		 * runsc: the workload's environment is the policy's, in config.json. */
		setpgid(0, 0);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (dup2(outp[1], 1) < 0 || dup2(errp[1], 2) < 0)
			_exit(127);
		char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		execvpe(g->runsc, args, env);
		_exit(127);
	}
	close(outp[1]);
	close(errp[1]);
	g->relay_fd[0] = outp[0];
	g->relay_fd[1] = errp[0];
	atomic_store(&g->relay_stop, false);
	if (pthread_create(&g->relay, NULL, relay_main, g) == 0) {
		g->relay_on = true;
	} else {
		close(outp[0]);
		close(errp[0]);
		g->relay_fd[0] = g->relay_fd[1] = -1;
	}
	setpgid(pid, pid);
	g->pid = pid;
	g->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (g->pidfd < 0) {
		int e = -errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		g->pid = -1;
		snprintf(err, errlen, "pidfd_open: %s", strerror(-e));
		return e;
	}
	return 0;
}

int sl_gvisor_kill(struct sl_gvisor *g)
{
	if (g->pid <= 0)
		return -ESRCH;
	char rootarg[PATH_MAX + 8];
	snprintf(rootarg, sizeof(rootarg), "--root=%s", g->root);
	char *args[] = {(char *)g->runsc, rootarg, "kill", "--all", g->id, "KILL", NULL};
	int r = runsc_cmd(g->runsc, args, NULL, 0);
	/* Whatever runsc said: its whole process group goes too (the sandbox and gofer are its
	 * children; killing only `runsc run` would leave the sandbox running). */
	kill(-g->pid, SIGKILL);
	return r == 0 ? 0 : -ESRCH;
}

int sl_gvisor_pause(struct sl_gvisor *g, bool paused)
{
	char rootarg[PATH_MAX + 8];
	snprintf(rootarg, sizeof(rootarg), "--root=%s", g->root);
	char *args[] = {(char *)g->runsc, rootarg, paused ? "pause" : "resume", g->id, NULL};
	int r = runsc_cmd(g->runsc, args, NULL, 0);
	return r == 0 ? 0 : r < 0 ? r : -EIO;
}

int sl_gvisor_reap(struct sl_gvisor *g, int *wstatus, struct rusage *ru)
{
	if (g->pid <= 0)
		return -ESRCH;
	/* runsc run has exited and is a zombie: its pid (and so its process group id) cannot be
	 * reused yet, so killing the group reaches only what it left behind. */
	kill(-g->pid, SIGKILL);
	pid_t r;
	while ((r = wait4(g->pid, wstatus, 0, ru)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return -errno;
	g->pid = 0;
	if (g->relay_on) {
		atomic_store(&g->relay_stop, true);
		pthread_join(g->relay, NULL);
		g->relay_on = false;
	}
	return 0;
}

static void rm_tree(const char *dir)
{
	/* Only what prepare created: the rootfs mount-point skeleton and the config files. The
	 * bind sources are never touched (nothing is mounted on the host side). */
	char *args[] = {"rm", "-rf", "--one-file-system", "--", (char *)dir, NULL};
	runsc_cmd("rm", args, NULL, 0);
}

void sl_gvisor_destroy(struct sl_gvisor *g)
{
	if (g->pid > 0) {
		sl_gvisor_kill(g);
		waitpid(g->pid, NULL, 0);
	}
	if (g->root[0]) {
		char rootarg[PATH_MAX + 8];
		snprintf(rootarg, sizeof(rootarg), "--root=%s", g->root);
		char *args[] = {(char *)g->runsc, rootarg, "delete", "--force", g->id, NULL};
		runsc_cmd(g->runsc, args, NULL, 0);
	}
	if (g->relay_on) {
		atomic_store(&g->relay_stop, true);
		pthread_join(g->relay, NULL);
		g->relay_on = false;
	}
	for (int i = 0; i < 2; i++)
		if (g->relay_fd[i] >= 0) {
			close(g->relay_fd[i]);
			g->relay_fd[i] = -1;
		}
	if (g->pidfd >= 0)
		close(g->pidfd);
	g->pidfd = -1;
	if (g->bundle[0])
		rm_tree(g->bundle);
	if (g->root[0])
		rm_tree(g->root);
	if (g->pod_config[0])
		unlink(g->pod_config);
}
