/* A fresh cgroup per sandbox (never reused: after cgroup.kill the kernel kills later children of
 * the same cgroup, so reuse would kill an innocent sandbox). cgroup v2 gives freeze and kill-all;
 * memory and pids limits come from v2 when its controllers are there, else from the v1
 * hierarchies (this host is hybrid). Only root may do this; others get a named gap. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "sandbox/sandbox.h"

/* Find the mount point of a cgroup hierarchy: fstype "cgroup2", or v1 with option opt. */
static int find_mount(const char *fstype, const char *opt, char *out, size_t outlen)
{
	_cleanup_free_ char *mi = NULL;
	int r = sl_read_file("/proc/self/mountinfo", 1 << 20, &mi, NULL);
	if (r < 0)
		return r;
	char *save = NULL;
	for (char *line = strtok_r(mi, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		/* id parent maj:min root mountpoint opts ... - fstype source superopts */
		char mnt[512], type[64], super[512];
		char *dash = strstr(line, " - ");
		if (!dash)
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1)
			continue;
		if (sscanf(dash + 3, "%63s %*s %511s", type, super) < 1)
			continue;
		if (strcmp(type, fstype) != 0)
			continue;
		if (opt) {
			bool found = false;
			/* Compare by hand: strtok cannot nest inside the line loop. */
			size_t ol = strlen(opt);
			for (char *s = super; (s = strstr(s, opt)); s += ol)
				if ((s == super || s[-1] == ',') && (s[ol] == ',' || s[ol] == '\0'))
					found = true;
			if (!found)
				continue;
		}
		snprintf(out, outlen, "%s", mnt);
		return 0;
	}
	return -ENOENT;
}

static int write_str(const char *dir, const char *file, const char *val)
{
	char path[768];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return sl_write_all(fd, val, strlen(val));
}

static bool has_controller(const char *dir, const char *name)
{
	char path[768];
	_cleanup_free_ char *c = NULL;
	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	if (sl_read_file(path, 4096, &c, NULL) < 0)
		return false;
	size_t nl = strlen(name);
	for (char *s = c; (s = strstr(s, name)); s += nl)
		if ((s == c || s[-1] == ' ') && (s[nl] == ' ' || s[nl] == '\n' || s[nl] == '\0'))
			return true;
	return false;
}

static int make_child(const char *mnt, const char *id, char *out, size_t outlen)
{
	char base[512];
	snprintf(base, sizeof(base), "%s/sightline", mnt);
	if (mkdir(base, 0755) < 0 && errno != EEXIST)
		return -errno;
	if ((size_t)snprintf(out, outlen, "%s/%s", base, id) >= outlen)
		return -ENAMETOOLONG;
	/* A sandbox id is fresh and random: an existing directory means something is wrong. */
	if (mkdir(out, 0755) < 0) {
		int e = -errno;
		out[0] = '\0';
		return e;
	}
	return 0;
}

int sl_cgroup_create(struct sl_cgroup *cg, const char *id, const struct sl_policy_limits *lim, unsigned *gaps)
{
	char mnt[512], num[32];
	memset(cg, 0, sizeof(*cg));
	cg->v2_fd = -1;
	int r = find_mount("cgroup2", NULL, mnt, sizeof(mnt));
	if (r < 0 || make_child(mnt, id, cg->v2, sizeof(cg->v2)) < 0) {
		*gaps |= SL_GAP_CGROUP | SL_GAP_CGROUP_MEMORY | SL_GAP_CGROUP_PIDS;
		return 0;
	}
	cg->v2_fd = open(cg->v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg->v2_fd < 0)
		return -errno;
	char base[600];
	snprintf(base, sizeof(base), "%s/sightline", mnt);
	bool v2mem = has_controller(mnt, "memory"), v2pids = has_controller(mnt, "pids");
	if (v2mem || v2pids) {
		/* Pure v2 host: enable the controllers down to the sandbox's cgroup. */
		write_str(mnt, "cgroup.subtree_control", v2mem && v2pids ? "+memory +pids" : v2mem ? "+memory" : "+pids");
		write_str(base, "cgroup.subtree_control", v2mem && v2pids ? "+memory +pids" : v2mem ? "+memory" : "+pids");
	}
	if (v2mem) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)lim->memory_bytes);
		if (!lim->memory_bytes || write_str(cg->v2, "memory.max", num) < 0)
			*gaps |= lim->memory_bytes ? SL_GAP_CGROUP_MEMORY : 0;
	} else if (!lim->memory_bytes) {
		/* No limit asked: do not pay for joining a v1 hierarchy (an RCU grace period). */
	} else if (find_mount("cgroup", "memory", mnt, sizeof(mnt)) == 0 &&
		   make_child(mnt, id, cg->mem_v1, sizeof(cg->mem_v1)) == 0) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)lim->memory_bytes);
		if (lim->memory_bytes && write_str(cg->mem_v1, "memory.limit_in_bytes", num) < 0)
			*gaps |= SL_GAP_CGROUP_MEMORY;
	} else {
		*gaps |= SL_GAP_CGROUP_MEMORY;
	}
	if (v2pids) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)lim->pids);
		if (lim->pids && write_str(cg->v2, "pids.max", num) < 0)
			*gaps |= SL_GAP_CGROUP_PIDS;
	} else if (!lim->pids) {
	} else if (find_mount("cgroup", "pids", mnt, sizeof(mnt)) == 0 &&
		   make_child(mnt, id, cg->pids_v1, sizeof(cg->pids_v1)) == 0) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)lim->pids);
		if (lim->pids && write_str(cg->pids_v1, "pids.max", num) < 0)
			*gaps |= SL_GAP_CGROUP_PIDS;
	} else {
		*gaps |= SL_GAP_CGROUP_PIDS;
	}
	return 0;
}

int sl_cgroup_attach_v1(struct sl_cgroup *cg, pid_t pid)
{
	char num[32];
	snprintf(num, sizeof(num), "%d", (int)pid);
	int r;
	if (cg->mem_v1[0] && (r = write_str(cg->mem_v1, "cgroup.procs", num)) < 0)
		return r;
	if (cg->pids_v1[0] && (r = write_str(cg->pids_v1, "cgroup.procs", num)) < 0)
		return r;
	return 0;
}

int sl_sandbox_freeze(struct sl_sandbox *sb, bool frozen)
{
	if (!sb->cg.v2[0])
		return -EOPNOTSUPP;
	return write_str(sb->cg.v2, "cgroup.freeze", frozen ? "1" : "0");
}

static uint64_t read_u64(const char *dir, const char *file)
{
	char path[768];
	_cleanup_free_ char *s = NULL;
	if (!dir[0])
		return 0;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (sl_read_file(path, 64, &s, NULL) < 0)
		return 0;
	return strtoull(s, NULL, 10);
}

void sl_sandbox_cgroup_stats(struct sl_sandbox *sb, uint64_t *mem_peak, uint64_t *pids_peak)
{
	*mem_peak = read_u64(sb->cg.mem_v1, "memory.max_usage_in_bytes");
	if (!*mem_peak)
		*mem_peak = read_u64(sb->cg.v2, "memory.peak");
	*pids_peak = read_u64(sb->cg.pids_v1, "pids.peak");
	if (!*pids_peak)
		*pids_peak = read_u64(sb->cg.v2, "pids.peak");
}

void sl_cgroup_destroy(struct sl_cgroup *cg)
{
	if (cg->v2_fd >= 0)
		close(cg->v2_fd);
	cg->v2_fd = -1;
	/* rmdir fails while a process is still inside; the caller has reaped everything. */
	if (cg->v2[0])
		rmdir(cg->v2);
	if (cg->mem_v1[0])
		rmdir(cg->mem_v1);
	if (cg->pids_v1[0])
		rmdir(cg->pids_v1);
	cg->v2[0] = cg->mem_v1[0] = cg->pids_v1[0] = '\0';
}
