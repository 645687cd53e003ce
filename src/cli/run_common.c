/* The parts of `sightline run` both runtimes share (see run_common.h). */
#include "cli/run_common.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "common/version.h"
#include "export/frame.h"
#include "sensor/redact.h"

void sl_run_ocsf(struct sl_json *j, int class_uid, int activity_id)
{
	sl_json_obj_open(j, "ocsf");
	sl_json_int(j, "class_uid", class_uid);
	sl_json_int(j, "activity_id", activity_id);
	sl_json_obj_close(j);
}

void sl_run_manifest_open(struct sl_json *j, const char *runtime, const char *runtime_version,
			  const char *sensor, const char *sensor_version, int64_t started,
			  const char *risk_class)
{
	struct utsname u;
	uname(&u);
	sl_json_obj_open(j, "manifest");
	sl_json_str(j, "runtime", runtime, 0);
	sl_json_str(j, "runtime_version", runtime_version, 0);
	sl_json_str(j, "sensor", sensor, 0);
	sl_json_str(j, "sensor_version", sensor_version, 0);
	sl_json_str(j, "sightline_version", SL_VERSION, 0);
	sl_json_str(j, "host", u.nodename, 0);
	sl_json_int(j, "started", started);
	/* The risk class is part of the sandbox's binding at the collector: kept in the record, so a
	 * later `sightline export` of it binds (or re-binds) with the same one. */
	sl_json_str(j, "risk_class", risk_class, 0);
}

static void json_strs(struct sl_json *j, const char *key, char *const *v, size_t n)
{
	sl_json_arr_open(j, key);
	for (size_t i = 0; i < n; i++)
		sl_json_str(j, NULL, v[i], 0);
	sl_json_arr_close(j);
}

void sl_run_manifest_workload(struct sl_json *j, char *const *argv, const struct sl_policy *p,
			      const char *policy_file, const char *workspace)
{
	sl_json_arr_open(j, "command");
	for (size_t i = 0; argv[i]; i++) {
		size_t keep;
		if (p->redact_argv && sl_redact_arg(i ? argv[i - 1] : NULL, argv[i], &keep)) {
			char red[300];
			snprintf(red, sizeof(red), "%.*s%s", (int)(keep < 256 ? keep : 256), argv[i],
				 SL_REDACTED);
			sl_json_str(j, NULL, red, 0);
		} else {
			sl_json_str(j, NULL, argv[i], 256);
		}
	}
	sl_json_arr_close(j);
	sl_json_obj_open(j, "policy");
	sl_json_str(j, "file", policy_file ? policy_file : "(default)", 0);
	sl_json_str(j, "workspace", workspace, 0);
	sl_json_str(j, "workspace_mount", p->workspace_mount, 0);
	json_strs(j, "read_only", p->ro_paths, p->n_ro);
	json_strs(j, "canaries", p->canaries, p->n_canaries);
	sl_json_arr_open(j, "tcp_connect");
	for (size_t i = 0; i < p->n_tcp_connect; i++)
		sl_json_uint(j, NULL, p->tcp_connect[i]);
	sl_json_arr_close(j);
	sl_json_bool(j, "record_opens", p->record_opens);
	sl_json_obj_close(j);
}

void sl_run_manifest_close(struct sl_json *j, uid_t workload_uid)
{
	sl_json_int(j, "supervisor_pid", getpid());
	sl_json_int(j, "invoker_uid", getuid());
	sl_json_int(j, "workload_host_uid", workload_uid);
	sl_json_obj_close(j);
	sl_run_ocsf(j, 6002, 3);
}

int sl_run_gap(struct sl_record *rec, struct sl_json *j, const char *gap, const char *detail)
{
	sl_json_reset(j);
	sl_json_str(j, "gap", gap, 0);
	sl_json_str(j, "detail", detail, 0);
	sl_json_bool(j, "accepted", true);
	return sl_sup_append(rec, "sensor.gap", j);
}

void sl_run_block_signals(sigset_t *sigs, int extra)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGHUP);
	if (extra)
		sigaddset(sigs, extra);
	sigprocmask(SIG_BLOCK, sigs, NULL);
	if (extra)
		sigdelset(sigs, extra);
}

int sl_run_exit_status(struct sl_json *j, int wstatus)
{
	if (WIFEXITED(wstatus)) {
		sl_json_int(j, "exit_code", WEXITSTATUS(wstatus));
		sl_json_null(j, "signal");
		return WEXITSTATUS(wstatus);
	}
	sl_json_null(j, "exit_code");
	const char *sn = sigabbrev_np(WTERMSIG(wstatus));
	char sig[32];
	snprintf(sig, sizeof(sig), "SIG%s", sn ? sn : "?");
	sl_json_str(j, "signal", sig, 0);
	return 128 + WTERMSIG(wstatus);
}

void sl_run_exit_usage(struct sl_json *j, const char *reason, int64_t duration_ns, const struct rusage *ru)
{
	sl_json_str(j, "reason", reason, 0);
	sl_json_int(j, "duration_ns", duration_ns);
	sl_json_int(j, "cpu_user_us", (int64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec);
	sl_json_int(j, "cpu_system_us", (int64_t)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec);
}

int sl_run_export_start(struct sl_exporter_cfg *ec, const char *secret_path, struct sl_exporter **out)
{
	uint8_t master[SL_FRAME_MASTER_LEN];
	int kr = sl_sup_read_secret(secret_path, master);
	if (kr == 0)
		kr = sl_frame_derive_key(master, ec->sandbox_id, ec->key);
	explicit_bzero(master, sizeof(master));
	if (kr == 0)
		kr = sl_exporter_start(ec, out);
	explicit_bzero(ec->key, sizeof(ec->key));
	if (kr < 0)
		fprintf(stderr, "sightline run: collector export (%s, secret %s): %s\n", ec->addr,
			secret_path, strerror(-kr));
	return kr;
}

void sl_run_export_finish(struct sl_exporter *ex, unsigned drain_seconds, const char *collector, bool quiet)
{
	struct sl_exporter_stats es;
	sl_exporter_stats(ex, &es);
	/* Refused for good (revoked): waiting would only delay the exit; the record keeps it all. */
	unsigned drain_ms = es.error_code == SL_FRAME_ERR_REVOKED ? 0 : drain_seconds * 1000u;
	int er = sl_exporter_finish(ex, drain_ms, &es);
	if (er < 0)
		fprintf(stderr,
			"sightline run: %llu of %llu events not yet acknowledged by the collector; "
			"they are kept in the record\n",
			(unsigned long long)(es.recorded - es.acked), (unsigned long long)es.recorded);
	else if (!quiet)
		fprintf(stderr, "sightline: %llu events delivered to %s (%llu connection%s)\n",
			(unsigned long long)es.acked, collector, (unsigned long long)es.connects,
			es.connects == 1 ? "" : "s");
}

const char *sl_run_wait(const struct sl_run_wait *w)
{
	unsigned watchdog_ms = w->exporter ? sl_sup_blind_limit_ms(w->risk_class, w->max_blind_ms) : 0;
	struct sl_sup_watch watch = {
	    .risk_class = w->risk_class, .collector = w->collector, .limit_ms = watchdog_ms};
	int sfd = signalfd(-1, w->sigs, SFD_CLOEXEC);
	int64_t deadline = w->wall_seconds ? w->start_mono_ns + (int64_t)w->wall_seconds * 1000000000LL : 0;
	const char *reason = "exited";
	for (;;) {
		struct pollfd pf[3] = {{.fd = w->pidfd, .events = POLLIN},
				       {.fd = sfd, .events = POLLIN},
				       {.fd = w->ctl_fd, .events = POLLIN}};
		int timeout = -1;
		if (deadline) {
			int64_t left = (deadline - sl_now_monotonic_ns()) / 1000000;
			timeout = left < 0 ? 0 : (int)(left > INT_MAX ? INT_MAX : left);
		}
		if (watchdog_ms && (timeout < 0 || timeout > 100))
			timeout = 100;
		int pr = poll(pf, w->ctl_fd >= 0 ? 3 : 2, timeout);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pf[0].revents)
			break;
		if (watchdog_ms) {
			const char *r2 = sl_sup_watch_tick(&watch, w->exporter, w->rec, w->t);
			if (r2)
				reason = r2;
			if (pr == 0 && (!deadline || sl_now_monotonic_ns() < deadline))
				continue;
		}
		if (pr == 0 && deadline && sl_now_monotonic_ns() >= deadline) {
			reason = "killed: wall-clock limit";
			w->t->kill(w->t->arg);
			deadline = 0;
			continue;
		}
		if (w->ctl_fd >= 0 && pf[2].revents) {
			const char *r2 = sl_sup_control(w->ctl_fd, w->t, w->rec, w->credential_ref);
			if (r2)
				reason = r2;
		}
		if (pf[1].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				reason = "killed: operator signal";
				w->t->kill(w->t->arg);
			}
		}
	}
	if (sfd >= 0)
		close(sfd);
	return reason;
}

int sl_run_final_status(int status, int r, int fr)
{
	if (r >= 0 && fr >= 0)
		return status;
	/* The evidence is incomplete: that outranks the workload's own status. */
	fprintf(stderr, "sightline run: the record is incomplete: %s (the workload's status was %d)\n",
		strerror(-(r < 0 ? r : fr)), status);
	return 125;
}
