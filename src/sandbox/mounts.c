/* The sandbox's filesystem view: a fresh tmpfs root holding only the policy's read-only system
 * paths, the one writable workspace, a private /tmp, its own /proc and a minimal /dev. Nothing
 * else of the host exists inside, so there is nothing else to reach. Runs in the child, in its
 * new user+mount namespace, before any privilege is dropped. */
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common/util.h"
#include "sandbox/sandbox.h"

#define OLDROOT "/.oldroot"

static int fail(char *err, size_t errlen, const char *what, const char *path)
{
	int e = errno;
	snprintf(err, errlen, "mounts: %s %s: %s", what, path ? path : "", strerror(e));
	return -e;
}

static int setattr(const char *path, uint64_t set, bool recursive)
{
	struct mount_attr a = {.attr_set = set};
	return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, AT_NO_AUTOMOUNT | (recursive ? AT_RECURSIVE : 0), &a,
			    sizeof(a));
}

/* Create the mount point for src at dst inside the new root: a directory for a directory, an
 * empty file for anything else. */
static int make_point(const char *dst, bool dir)
{
	char parent[4096];
	snprintf(parent, sizeof(parent), "%s", dst);
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		int r = sl_mkdir_p(parent, 0755);
		if (r < 0) {
			errno = -r;
			return -1;
		}
	}
	if (dir)
		return mkdir(dst, 0755) < 0 && errno != EEXIST ? -1 : 0;
	int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int bind_ro(const char *host_path, char *err, size_t errlen)
{
	char src[4200];
	snprintf(src, sizeof(src), OLDROOT "%s", host_path);
	struct stat st;
	if (lstat(src, &st) < 0) {
		if (errno == ENOENT) /* a default path this host lacks (say /lib32): nothing to show */
			return 0;
		return fail(err, errlen, "stat", host_path);
	}
	if (S_ISLNK(st.st_mode)) {
		/* Merged-/usr hosts make /bin a symlink: recreate the link, do not bind its target
		 * twice. The target resolves inside the new root. */
		char target[4096];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return fail(err, errlen, "readlink", host_path);
		target[n] = '\0';
		if (make_point(host_path, true) == 0)
			rmdir(host_path);
		if (symlink(target, host_path) < 0 && errno != EEXIST)
			return fail(err, errlen, "symlink", host_path);
		return 0;
	}
	if (make_point(host_path, S_ISDIR(st.st_mode)) < 0)
		return fail(err, errlen, "mount point", host_path);
	if (mount(src, host_path, NULL, MS_BIND | MS_REC, NULL) < 0)
		return fail(err, errlen, "bind", host_path);
	/* Read-only, no setuid, no device nodes, on every submount too (AT_RECURSIVE): a plain
	 * MS_REMOUNT would leave submounts writable. */
	if (setattr(host_path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true) < 0)
		return fail(err, errlen, "make read-only", host_path);
	return 0;
}

static int setup_dev(char *err, size_t errlen)
{
	if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
		return fail(err, errlen, "tmpfs", "/dev");
	static const char *nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
	for (size_t i = 0; i < SL_ARRAY_LEN(nodes); i++) {
		char src[64], dst[64];
		snprintf(src, sizeof(src), OLDROOT "/dev/%s", nodes[i]);
		snprintf(dst, sizeof(dst), "/dev/%s", nodes[i]);
		if (make_point(dst, false) < 0)
			return fail(err, errlen, "mount point", dst);
		/* User namespaces cannot mknod: bind the host's nodes. */
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			return fail(err, errlen, "bind", dst);
	}
	static const char *links[][2] = {{"/proc/self/fd", "/dev/fd"},
					 {"/proc/self/fd/0", "/dev/stdin"},
					 {"/proc/self/fd/1", "/dev/stdout"},
					 {"/proc/self/fd/2", "/dev/stderr"}};
	for (size_t i = 0; i < SL_ARRAY_LEN(links); i++)
		if (symlink(links[i][0], links[i][1]) < 0)
			return fail(err, errlen, "symlink", links[i][1]);
	if (mkdir("/dev/shm", 01777) < 0 ||
	    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") < 0)
		return fail(err, errlen, "tmpfs", "/dev/shm");
	if (setattr("/dev", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, false) < 0)
		return fail(err, errlen, "make read-only", "/dev");
	return 0;
}

int sl_mounts_setup(const struct sl_sandbox_cfg *cfg, char *err, size_t errlen)
{
	const struct sl_policy *p = cfg->policy;
	int r;
	/* Nothing we mount may propagate back to the host, and nothing of the host's later mounts
	 * may appear here. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(err, errlen, "make private", "/");
	/* The new root: a small tmpfs over /tmp (only in this namespace; after pivot_root the host's
	 * /tmp is reachable again under OLDROOT for binding). */
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
		return fail(err, errlen, "tmpfs", "new root");
	if (mkdir("/tmp" OLDROOT, 0700) < 0)
		return fail(err, errlen, "mkdir", OLDROOT);
	if (chdir("/tmp") < 0)
		return fail(err, errlen, "chdir", "new root");
	if (syscall(SYS_pivot_root, ".", "." OLDROOT) < 0)
		return fail(err, errlen, "pivot_root", NULL);
	if (chdir("/") < 0)
		return fail(err, errlen, "chdir", "/");
	for (size_t i = 0; i < p->n_ro; i++)
		if ((r = bind_ro(p->ro_paths[i], err, errlen)) < 0)
			return r;
	/* The workspace: the only host directory the workload may write. */
	char src[4200];
	snprintf(src, sizeof(src), OLDROOT "%s", cfg->workspace_host);
	if (make_point(p->workspace_mount, true) < 0)
		return fail(err, errlen, "mount point", p->workspace_mount);
	if (mount(src, p->workspace_mount, NULL, MS_BIND | MS_REC, NULL) < 0)
		return fail(err, errlen, "bind workspace", cfg->workspace_host);
	if (setattr(p->workspace_mount, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true) < 0)
		return fail(err, errlen, "nosuid/nodev", p->workspace_mount);
	if (p->tmp) {
		char opt[64];
		snprintf(opt, sizeof(opt), "mode=1777,size=%llu", (unsigned long long)p->limits.tmp_size);
		if (make_point("/tmp", true) < 0 || mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0)
			return fail(err, errlen, "tmpfs", "/tmp");
	}
	/* Our own /proc: we are pid 1 of a new pid namespace, so it lists only the sandbox. */
	if (make_point("/proc", true) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return fail(err, errlen, "mount", "/proc");
	if (make_point("/dev", true) < 0 || (r = setup_dev(err, errlen)) < 0)
		return r < 0 ? r : fail(err, errlen, "mount point", "/dev");
	/* Cut the host off: after this no path leads out of the new root. */
	if (umount2(OLDROOT, MNT_DETACH) < 0)
		return fail(err, errlen, "detach old root", NULL);
	if (rmdir(OLDROOT) < 0)
		return fail(err, errlen, "rmdir", OLDROOT);
	if (setattr("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) < 0)
		return fail(err, errlen, "make read-only", "/");
	if (chdir(p->workspace_mount) < 0)
		return fail(err, errlen, "chdir", p->workspace_mount);
	return 0;
}
