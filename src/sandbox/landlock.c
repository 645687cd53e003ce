/* Landlock: the kernel-enforced file and TCP policy the workload applies to itself, last before
 * seccomp. It guards every file syscall the supervisor does not emulate (mkdir, unlink, rename,
 * truncate, stat-less reads by exec...) and, at ABI >= 6, scopes abstract unix sockets and signals
 * to the sandbox's own domain. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common/util.h"
#include "sandbox/kabi.h"
#include "sandbox/sandbox.h"

#define FS_READ (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

int sl_landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	return abi < 0 ? 0 : (int)abi;
}

static uint64_t fs_all(int abi)
{
	uint64_t all = (1ULL << 13) - 1; /* ABI 1: EXECUTE .. MAKE_SYM */
	if (abi >= 2)
		all |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		all |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return all;
}

static int add_path(int rs, const char *path, uint64_t access, uint64_t handled, char *err, size_t errlen)
{
	/* O_PATH: we only name the hierarchy, we never read it. */
	_cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) /* an optional path (say /lib64) absent here: nothing to allow */
			return 0;
		snprintf(err, errlen, "landlock: open %s: %s", path, strerror(errno));
		return -errno;
	}
	struct landlock_path_beneath_attr pb = {.allowed_access = access & handled, .parent_fd = fd};
	/* A rule on a non-directory may carry only file rights. */
	struct stat st;
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		pb.allowed_access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
				     LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
				     LANDLOCK_ACCESS_FS_IOCTL_DEV;
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
		snprintf(err, errlen, "landlock: rule for %s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

int sl_landlock_apply(const struct sl_policy *p, int abi, unsigned gaps, char *err, size_t errlen)
{
	if (abi < 1 || (gaps & SL_GAP_LANDLOCK))
		return 0; /* accepted gap: recorded by the supervisor */
	struct sl_landlock_ruleset_attr attr = {.handled_access_fs = fs_all(abi)};
	size_t attr_size = sizeof(uint64_t);
	if (abi >= 4 && !(gaps & SL_GAP_LANDLOCK_NET)) {
		/* Connect is handled: only the policy's ports. Bind stays unhandled: the sandbox has its
		 * own loopback-only network namespace, so a listener there reaches nothing outside. */
		attr.handled_access_net = SL_LANDLOCK_ACCESS_NET_CONNECT_TCP;
		attr_size = 2 * sizeof(uint64_t);
	}
	if (abi >= 6 && !(gaps & SL_GAP_LANDLOCK_SCOPE)) {
		/* Signals and abstract unix sockets only within the sandbox's own domain. */
		attr.scoped = SL_LANDLOCK_SCOPE_ABSTRACT_UNIX | SL_LANDLOCK_SCOPE_SIGNAL;
		attr_size = 3 * sizeof(uint64_t);
	}
	_cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (rs < 0) {
		snprintf(err, errlen, "landlock: create ruleset (ABI %d): %s", abi, strerror(errno));
		return -errno;
	}
	uint64_t all = attr.handled_access_fs;
	int r;
	/* "/" itself: list it, nothing more (it is a read-only tmpfs holding mount points). */
	if ((r = add_path(rs, "/", LANDLOCK_ACCESS_FS_READ_DIR, all, err, errlen)) < 0)
		return r;
	for (size_t i = 0; i < p->n_ro; i++)
		if ((r = add_path(rs, p->ro_paths[i], FS_READ, all, err, errlen)) < 0)
			return r;
	if ((r = add_path(rs, p->workspace_mount, all, all, err, errlen)) < 0)
		return r;
	if (p->tmp && (r = add_path(rs, "/tmp", all, all, err, errlen)) < 0)
		return r;
	if ((r = add_path(rs, "/dev",
			  LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
				  LANDLOCK_ACCESS_FS_IOCTL_DEV,
			  all, err, errlen)) < 0)
		return r;
	/* /dev/shm is a private tmpfs: writable, as the supervisor's policy says. */
	if ((r = add_path(rs, "/dev/shm", all, all, err, errlen)) < 0)
		return r;
	if ((r = add_path(rs, "/proc", LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR, all, err,
			  errlen)) < 0)
		return r;
	if (attr.handled_access_net) {
		for (size_t i = 0; i < p->n_tcp_connect; i++) {
			struct sl_landlock_net_port_attr np = {.allowed_access = SL_LANDLOCK_ACCESS_NET_CONNECT_TCP,
							       .port = p->tcp_connect[i]};
			if (syscall(SYS_landlock_add_rule, rs, SL_LANDLOCK_RULE_NET_PORT, &np, 0) < 0) {
				snprintf(err, errlen, "landlock: port rule %u: %s", p->tcp_connect[i],
					 strerror(errno));
				return -errno;
			}
		}
	}
	/* no_new_privs is already set by the caller; restrict_self requires it without CAP_SYS_ADMIN. */
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) {
		snprintf(err, errlen, "landlock: restrict_self: %s", strerror(errno));
		return -errno;
	}
	return 0;
}
