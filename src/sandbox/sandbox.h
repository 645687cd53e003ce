/* Building the native sandbox: namespaces, a minimal root, Landlock, seccomp (with a user-
 * notification listener handed to the supervisor), no_new_privs, no capabilities, rlimits and a
 * fresh cgroup. The supervisor (outside) drives the lifecycle:
 *   sl_sandbox_probe -> sl_sandbox_start (child set up, stopped before exec) -> sl_sandbox_go
 *   -> wait on pidfd -> sl_sandbox_reap -> sl_sandbox_destroy. */
#ifndef SL_SANDBOX_H
#define SL_SANDBOX_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "policy/policy.h"

/* Named confinement layers and sensors. A missing one makes sightline refuse to run unless the
 * operator accepts the gap by name (--accept-gap NAME); an accepted gap is recorded. */
enum sl_gap {
	SL_GAP_LANDLOCK = 1u << 0,	 /* no Landlock at all */
	SL_GAP_LANDLOCK_NET = 1u << 1,	 /* Landlock ABI < 4: no TCP rules */
	SL_GAP_LANDLOCK_SCOPE = 1u << 2, /* Landlock ABI < 6: no abstract-unix/signal scoping */
	SL_GAP_CGROUP = 1u << 3,	 /* no writable cgroup v2: no freeze/kill-all, no limits */
	SL_GAP_CGROUP_MEMORY = 1u << 4,	 /* no memory controller reachable */
	SL_GAP_CGROUP_PIDS = 1u << 5,	 /* no pids controller reachable */
	SL_GAP_NOTIFY_SYNC = 1u << 6,	 /* no SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: slower, still exact */
};
#define SL_GAP_COUNT 7
const char *sl_gap_name(unsigned bit_index);
/* Parse a gap name into its bit; -EINVAL if unknown. */
int sl_gap_parse(const char *name, unsigned *bit);
/* Human sentence: what is missing and what it means. */
const char *sl_gap_explain(unsigned bit_index);

struct sl_sandbox_cfg {
	const struct sl_policy *policy;
	const char *workspace_host; /* existing host directory bound read-write at policy->workspace_mount */
	char *const *argv;	    /* command to run (argv[0] resolved inside the sandbox via PATH) */
	char *const *envp;	    /* its whole environment */
	const char *sandbox_id;
	uid_t host_uid, host_gid;   /* the workload's ids on the host */
	uid_t inner_uid, inner_gid; /* the workload's ids inside */
	bool record_opens;	    /* route opens to the supervisor */
	unsigned gaps;		    /* layers known missing (accepted): skip them */
	unsigned accepted;	    /* every gap the operator accepted (--accept-gap) */
	int cpu;		    /* >= 0: pin the workload to this CPU (shared with its sensor) */
};

struct sl_cgroup {
	char v2[512];	  /* the sandbox's own cgroup v2 dir ("" if none) */
	char mem_v1[512]; /* v1 memory cgroup dir ("" if none) */
	char pids_v1[512];
	int v2_fd;
};

struct sl_sandbox {
	pid_t pid;	 /* host pid of the workload's pid 1 */
	int pidfd;	 /* its pidfd */
	int listener_fd; /* seccomp user-notification listener */
	int ctl_fd;	 /* setup channel to the child (closed after go) */
	int root_fd;	 /* O_PATH fd of the sandbox's root, for resolving paths as it does */
	int landlock_abi;
	unsigned gaps_found; /* accepted gaps discovered while building (say, no memory controller) */
	struct sl_cgroup cg;
	int64_t start_mono_ns, start_real_ns;
};

/* Which layers this host lacks for cfg (bitmask of enum sl_gap). Never fails. */
unsigned sl_sandbox_probe(bool want_cgroup, int *landlock_abi);

/* Clone and set up the sandbox; returns once the child sits confined, before exec, having handed
 * over its listener. On failure the child is killed and reaped and err names the failing step.
 * Returns 0 or -errno. */
int sl_sandbox_start(const struct sl_sandbox_cfg *cfg, struct sl_sandbox *sb, char *err, size_t errlen);
/* Let the child exec the command. Returns 0 or -errno. */
int sl_sandbox_go(struct sl_sandbox *sb);
/* Reap the workload (call after its pidfd is readable). Returns 0 or -errno. */
int sl_sandbox_reap(struct sl_sandbox *sb, int *wstatus, struct rusage *ru);
/* Freeze/thaw (cgroup v2) and kill everything in the sandbox. Return 0 or -errno. */
int sl_sandbox_freeze(struct sl_sandbox *sb, bool frozen);
int sl_sandbox_kill(struct sl_sandbox *sb);
/* Read memory.peak/max_usage and pids peak where present; fields left 0 if unknown. */
void sl_sandbox_cgroup_stats(struct sl_sandbox *sb, uint64_t *mem_peak, uint64_t *pids_peak);
/* Close fds, remove the cgroups. */
void sl_sandbox_destroy(struct sl_sandbox *sb);

/* Internals shared between the sandbox files. */
int sl_landlock_abi(void);
/* Restrict the calling thread with Landlock for policy (paths as seen inside). */
int sl_landlock_apply(const struct sl_policy *p, int abi, unsigned gaps, char *err, size_t errlen);
/* Install the seccomp filter and return the listener fd. */
int sl_seccomp_install(bool record_opens, char *err, size_t errlen);
/* Build the root filesystem (called in the child, in its new mount namespace). */
int sl_mounts_setup(const struct sl_sandbox_cfg *cfg, char *err, size_t errlen);
int sl_cgroup_create(struct sl_cgroup *cg, const char *sandbox_id, const struct sl_policy_limits *lim, unsigned *gaps);
int sl_cgroup_attach_v1(struct sl_cgroup *cg, pid_t pid);
void sl_cgroup_destroy(struct sl_cgroup *cg);
#endif
