/* sightline run --runtime gvisor (see run_gvisor.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/run_common.h"
#include "cli/run_gvisor.h"
#include "cli/supervise.h"
#include "common/json.h"
#include "common/util.h"
#include "common/version.h"
#include "export/exporter.h"
#include "export/frame.h"
#include "sandbox/gvisor.h"
#include "sensor/gvisor_sink.h"
#include "sensor/redact.h"

#define DEFAULT_RETRIES 200 /* with 25 us .. 10 ms backoff: the Sentry waits up to ~2 s per point */

static void on_fatal(void *arg)
{
	sl_gvisor_kill(arg); /* the record failed: nothing more may happen unrecorded */
}

/* The runsc sandbox as the supervisor's target (supervise.h). */
static int gv_freeze(void *arg, bool on)
{
	return sl_gvisor_pause(arg, on);
}

/* runsc kill --all, then SIGKILL to runsc's process group (gofer and sandbox process); a pause
 * first would only add a runsc round trip before the same kill. */
static void gv_stop(void *arg)
{
	sl_gvisor_kill(arg);
}

static void begin_body(struct sl_json *j, const struct sl_gv_run_args *a, const char *runsc_version,
		       const char *cid, unsigned retries, const struct sl_gvisor *g)
{
	sl_run_manifest_open(j, "gvisor", runsc_version, "gvisor-sentry", SL_GVISOR_SENSOR_VERSION,
			     g->start_real_ns ? g->start_real_ns : sl_now_realtime_ns(), a->risk_class);
	sl_json_str(j, "container_id", cid, 0);
	sl_run_manifest_workload(j, a->argv, a->policy, a->policy_file, a->workspace);
	sl_json_obj_open(j, "layers");
	sl_json_str(j, "sandbox", "runsc (gVisor Sentry, ptrace platform)", 0);
	sl_json_str(j, "network", "none", 0);
	sl_json_str(j, "rootfs", "empty, read-only; read_only paths bound read-only; workspace read-write",
		    0);
	sl_json_str(j, "trace_sink", "remote (SOCK_SEQPACKET, supervisor-owned)", 0);
	sl_json_uint(j, "sink_retries", retries);
	sl_json_bool(j, "no_new_privs", true);
	sl_json_bool(j, "capabilities", false);
	sl_json_obj_close(j);
	sl_json_arr_open(j, "accepted_gaps");
	sl_json_arr_close(j);
	sl_run_manifest_close(j, a->uid);
}

int sl_run_gvisor(const struct sl_gv_run_args *a)
{
	const struct sl_policy *pol = a->policy;
	int status = 125;
	char err[1024], version[256], dir[PATH_MAX], sink_path[PATH_MAX], ctl_path[PATH_MAX], cid[64];
	struct sl_record *rec = NULL;
	struct sl_exporter *exporter = NULL;
	struct sl_canary_listener *vlistener = NULL;
	struct sl_gvisor g;
	struct sl_gv_sink sink;
	struct sl_json j;
	bool g_prepared = false, sink_up = false;
	int ctl_fd = -1;
	memset(&g, 0, sizeof(g));
	g.pidfd = -1;
	memset(&sink, 0, sizeof(sink));
	sink.lfd = -1;
	sink.stop_pipe[0] = sink.stop_pipe[1] = -1;
	sl_json_init(&j);

	if (geteuid() != 0) {
		/* runsc needs root here (its rootless mode is not wired up): say so, do not degrade. */
		fprintf(stderr, "sightline run: --runtime gvisor must be run as root (runsc run)\n");
		status = 3;
		goto out;
	}
	int r = sl_gvisor_version(NULL, version, sizeof(version));
	if (r < 0) {
		fprintf(stderr,
			"sightline run: --runtime gvisor needs runsc (`runsc --version` failed: %s)\n",
			strerror(-r));
		status = 3;
		goto out;
	}
	/* Test knob: the Sentry's retries before it drops a point (the loss test sets 0). */
	unsigned retries = DEFAULT_RETRIES;
	const char *rv = getenv("SIGHTLINE_GVISOR_RETRIES");
	if (rv && *rv) {
		char *end;
		unsigned long v = strtoul(rv, &end, 10);
		if (*end || v > 100000) {
			fprintf(stderr, "sightline run: SIGHTLINE_GVISOR_RETRIES takes 0..100000\n");
			status = 2;
			goto out;
		}
		retries = (unsigned)v;
	}
	/* The container id is ours, never the workload's: every point must carry it. */
	snprintf(cid, sizeof(cid), "sightline-%s", a->sandbox_id);
	/* Private per-sandbox directory beside the record (the record dir is 0700 and outside the
	 * workspace); nothing in it is mounted into the sandbox. */
	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s.gvisor", a->recdir, a->sandbox_id) >= sizeof(dir) ||
	    (size_t)snprintf(sink_path, sizeof(sink_path), "%s/sink.sock", dir) >=
		sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr, "sightline run: record dir %s is too long for the sink socket path\n",
			a->recdir);
		goto out;
	}
	char *envp[SL_POLICY_MAX_PATHS + 1];
	for (size_t i = 0; i < pol->n_env; i++)
		envp[i] = pol->env[i];
	envp[pol->n_env] = NULL;
	struct sl_gvisor_cfg gc = {.policy = pol,
				   .dir = dir,
				   .workspace_host = a->workspace,
				   .argv = a->argv,
				   .envp = envp,
				   .container_id = cid,
				   .uid = a->uid,
				   .gid = a->gid,
				   .sink_path = sink_path,
				   .retries = retries};
	r = sl_gvisor_prepare(&gc, &g, err, sizeof(err));
	g_prepared = true;
	if (r < 0) {
		fprintf(stderr, "sightline run: gvisor bundle: %s\n", err);
		status = 3;
		goto out;
	}
	sigset_t sigs;
	sl_run_block_signals(&sigs, 0);
	r = sl_record_create(&rec, a->recdir, a->sandbox_id, &a->id, "gvisor-sentry", a->sync_ms);
	if (r < 0) {
		fprintf(stderr, "sightline run: create record in %s: %s\n", a->recdir, strerror(-r));
		goto out;
	}
	begin_body(&j, a, version, cid, retries, &g);
	r = sl_sup_append(rec, "record.begin", &j);
	/* What this runtime does not do, said once at the start (docs/gvisor.md). */
	if (r == 0)
		r = sl_run_gap(
		    rec, &j, "gvisor-policy-deny",
		    "runsc enforces the policy by what the bundle contains: hidden paths do not exist "
		    "(ENOENT) and there is no network (--network=none); only EROFS/EACCES/EPERM of an open "
		    "become policy.deny, port rules and seccomp refusals are not reported as denials");
	if (r == 0 && (pol->limits.memory_bytes || pol->limits.pids))
		r = sl_run_gap(
		    rec, &j, "gvisor-limits",
		    "the policy's memory and pids cgroup limits are not applied to the runsc sandbox "
		    "(the rlimits nofile, cpu, file_size and pids as RLIMIT_NPROC are)");
	if (r == 0 && !pol->record_opens)
		r = sl_run_gap(rec, &j, "file.open", "the policy turned off recording of file opens");
	if (r < 0) {
		fprintf(stderr, "sightline run: write record: %s\n", strerror(-r));
		goto out;
	}
	sink.rec = rec;
	sink.container_id = cid;
	sink.policy = pol;
	sink.on_fatal = on_fatal;
	sink.fatal_arg = &g;
	if ((r = sl_gv_sink_listen(&sink, sink_path)) < 0 || (r = sl_gv_sink_start(&sink)) < 0) {
		fprintf(stderr, "sightline run: gvisor sink at %s: %s\n", sink_path, strerror(-r));
		goto out;
	}
	sink_up = true;
	sl_json_reset(&j);
	sl_json_int(&j, "pid", 1);
	sl_json_str(&j, "container_id", cid, 0);
	sl_json_str(&j, "workspace", pol->workspace_mount, 0);
	sl_run_ocsf(&j, 1007, 1);
	if ((r = sl_sup_append(rec, "lifecycle.start", &j)) < 0) {
		fprintf(stderr, "sightline run: write record: %s\n", strerror(-r));
		goto out;
	}
	snprintf(ctl_path, sizeof(ctl_path), "%.*s/%s.ctl", PATH_MAX - 64, a->recdir, a->sandbox_id);
	ctl_fd = sl_sup_control_listen(ctl_path);
	if (ctl_fd < 0)
		fprintf(stderr, "sightline run: no control socket at %s: %s\n", ctl_path, strerror(-ctl_fd));
	if (a->collector) {
		struct sl_exporter_cfg ec = {.addr = a->collector,
					     .record_path = sl_record_path(rec),
					     .sandbox_id = a->sandbox_id,
					     .id = a->id,
					     .risk_class = a->risk_class,
					     .control = ctl_fd >= 0 ? ctl_path : "none"};
		if (sl_run_export_start(&ec, a->collector_secret, &exporter) < 0)
			goto out;
	}
	if (!a->quiet)
		fprintf(stderr, "sightline: sandbox %s (gvisor, %s), record %s\n", a->sandbox_id, version,
			sl_record_path(rec));
	/* The validator's listener cannot live in the Sentry's netstack (runsc --network=none has
	 * only its own loopback, inside the Sentry): it listens on the host loopback at the port the
	 * workload tries, so a connection that leaked out of the sandbox to the host is seen. */
	if (a->validator_listen && sl_sup_validator_listener(a->validator_listen, getpid(), &vlistener) < 0)
		goto out;
	if ((r = sl_gvisor_start(&gc, &g, err, sizeof(err))) < 0) {
		fprintf(stderr, "sightline run: start runsc: %s\n", err);
		status = 3;
		goto out;
	}

	struct sl_sup_target tgt = {.arg = &g,
				    .freeze = gv_freeze,
				    .stop = gv_stop,
				    .kill = gv_stop,
				    .freeze_error = "error: runsc pause/resume failed\n"};
	/* The same wait and export watch as native: blind detection for every risk class, the
	 * high-risk stop and a refused credential (run_common.c, supervise.c). */
	struct sl_run_wait wt = {.pidfd = g.pidfd,
				 .ctl_fd = ctl_fd,
				 .sigs = &sigs,
				 .start_mono_ns = g.start_mono_ns,
				 .wall_seconds = pol->limits.wall_seconds,
				 .exporter = exporter,
				 .risk_class = a->risk_class,
				 .collector = a->collector,
				 .max_blind_ms = a->max_blind_ms,
				 .rec = rec,
				 .t = &tgt,
				 .credential_ref = a->id.credential_ref};
	const char *reason = sl_run_wait(&wt);
	if (ctl_fd >= 0) {
		close(ctl_fd);
		unlink(ctl_path);
		ctl_fd = -1;
	}
	sl_canary_listener_stop(vlistener);
	vlistener = NULL;
	int wstatus = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	sl_gvisor_reap(&g, &wstatus, &ru);
	int64_t dur = sl_now_monotonic_ns() - g.start_mono_ns;
	/* runsc is gone, so the Sentry's socket is closed: what is queued is read to EOF. */
	sl_gv_sink_stop(&sink, 3000);
	sink_up = false;
	if (atomic_load(&sink.fatal))
		reason = "killed: the record could not be written";
	sl_json_reset(&j);
	sl_json_int(&j, "pid", 1);
	/* runsc run exits with the container's status (128+N when its init was killed by N). */
	status = sl_run_exit_status(&j, wstatus);
	/* No container start from the Sentry: either runsc never started the container (its own
	 * failure, not the workload's status) or it ran without a trace session (runsc only warns):
	 * then the workload ran unobserved, which outranks its status. Both are ours to report. */
	int unobserved = 0;
	if (atomic_load(&sink.c.starts) == 0 && !strcmp(reason, "exited")) {
		unobserved = status == 0 ? 125 : 3;
		reason = status == 0 ? "exited unobserved: the Sentry sent no container start"
				     : "not started: runsc failed before the container start";
	}
	sl_run_exit_usage(&j, reason, dur, &ru);
	sl_run_ocsf(&j, 1007, 2);
	r = sl_sup_append(rec, "lifecycle.exit", &j);
	if (atomic_load(&sink.fatal))
		r = atomic_load(&sink.fatal);
	sl_json_reset(&j);
	sl_json_obj_open(&j, "counts");
	sl_json_uint(&j, "events", sl_record_count(rec) + 1);
	sl_gv_sink_counts_json(&sink, &j);
	sl_json_obj_close(&j);
	int fr = r < 0 ? sl_record_abandon(rec) : sl_record_finish(rec, &j);
	rec = NULL;
	if (exporter) {
		sl_run_export_finish(exporter, a->drain_seconds, a->collector, a->quiet);
		exporter = NULL;
	}
	if (unobserved) {
		fprintf(stderr, "sightline run: %s (runsc exit status %d)\n", reason, status);
		status = unobserved;
	}
	status = sl_run_final_status(status, r, fr);
out:
	sl_canary_listener_stop(vlistener);
	if (ctl_fd >= 0) {
		close(ctl_fd);
		unlink(ctl_path);
	}
	if (g.pid > 0)
		sl_gvisor_kill(&g);
	if (sink_up)
		sl_gv_sink_stop(&sink, 0);
	if (exporter)
		sl_exporter_finish(exporter, 0, NULL);
	if (rec)
		sl_record_finish(rec, NULL);
	if (g_prepared) {
		sl_gvisor_destroy(&g);
		rmdir(dir);
	}
	sl_json_free(&j);
	return status;
}
