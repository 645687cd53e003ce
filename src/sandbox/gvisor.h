/* The gVisor runtime: one runsc sandbox per sightline sandbox, built from the same policy as the
 * native one. Everything runsc needs lives in a private per-sandbox directory (0700, beside the
 * record, out of the workload's view): the OCI bundle (config.json, an empty read-only rootfs
 * with read-only binds of the policy's system paths and the writable workspace), the pod-init
 * trace config that points the Sentry at the sink socket, and runsc's --root state. Lifecycle:
 *   sl_gvisor_prepare -> (sink listening) -> sl_gvisor_start -> wait on pidfd -> sl_gvisor_reap
 *   -> sl_gvisor_destroy; sl_gvisor_kill / sl_gvisor_pause from the control path. */
#ifndef SL_GVISOR_H
#define SL_GVISOR_H
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "policy/policy.h"

struct sl_gvisor_cfg {
	const struct sl_policy *policy;
	const char *dir;	    /* private directory for this sandbox (created 0700 by prepare) */
	const char *workspace_host; /* bound read-write at policy->workspace_mount */
	char *const *argv;
	char *const *envp;
	const char *container_id; /* the id sightline gives runsc (and expects in every point) */
	uid_t uid;
	gid_t gid;
	const char *sink_path; /* the sink's socket */
	unsigned retries;      /* the Sentry's retries on a full socket before it drops a point */
	const char *runsc;     /* runsc binary ("runsc" from PATH by default) */
};

struct sl_gvisor {
	pid_t pid; /* the `runsc run` process (its own process group) */
	int pidfd;
	char root[PATH_MAX]; /* runsc --root */
	char bundle[PATH_MAX];
	char pod_config[PATH_MAX];
	char id[80];
	const char *runsc;
	int64_t start_mono_ns, start_real_ns;
	/* stdout/stderr relay: the Sentry writes a host file at its own offset per descriptor, so
	 * `> log 2>&1` would overwrite one stream with the other; pipes and a copy thread keep both. */
	int relay_fd[2];
	pthread_t relay;
	bool relay_on;
	atomic_bool relay_stop;
};

/* First line of `runsc --version` ("runsc version 0.0~20221219.0") into out. 0 or -errno. */
int sl_gvisor_version(const char *runsc, char *out, size_t len);
/* Write the bundle and the pod-init config into cfg->dir. 0 or -errno, err names the step. */
int sl_gvisor_prepare(const struct sl_gvisor_cfg *cfg, struct sl_gvisor *g, char *err, size_t errlen);
/* Start `runsc --root R --network=none --pod-init-config P run --bundle B ID`. 0 or -errno. */
int sl_gvisor_start(const struct sl_gvisor_cfg *cfg, struct sl_gvisor *g, char *err, size_t errlen);
/* Kill every process of the container (`runsc kill --all ID KILL`), then runsc's own process
 * group. Safe to call more than once and from another thread. 0 or -errno. */
int sl_gvisor_kill(struct sl_gvisor *g);
/* `runsc pause` / `runsc resume`. 0 or -errno. */
int sl_gvisor_pause(struct sl_gvisor *g, bool paused);
/* Reap `runsc run` (after its pidfd is readable). 0 or -errno. */
int sl_gvisor_reap(struct sl_gvisor *g, int *wstatus, struct rusage *ru);
/* `runsc delete --force`, close fds, remove the bundle's directories. */
void sl_gvisor_destroy(struct sl_gvisor *g);
#endif
