/* What `sightline run` writes and does the same way for both runtimes (native in cmd_run.c,
 * gVisor in run_gvisor.c): the manifest's shared parts, the exit line, the collector export's
 * set-up and drain, and the wait for the workload. Each runtime's file keeps only what differs. */
#ifndef SL_CLI_RUN_COMMON_H
#define SL_CLI_RUN_COMMON_H
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "cli/supervise.h"
#include "common/json.h"
#include "export/exporter.h"
#include "policy/policy.h"
#include "record/record.h"

/* An "ocsf" object with class_uid and activity_id. */
void sl_run_ocsf(struct sl_json *j, int class_uid, int activity_id);

/* Open record.begin's "manifest" with the runtime, the sensor, this host, the start time and the
 * risk class. */
void sl_run_manifest_open(struct sl_json *j, const char *runtime, const char *runtime_version,
			  const char *sensor, const char *sensor_version, int64_t started,
			  const char *risk_class);
/* The manifest's "command" (redacted as the policy says) and "policy" objects. */
void sl_run_manifest_workload(struct sl_json *j, char *const *argv, const struct sl_policy *p,
			      const char *policy_file, const char *workspace);
/* Close the manifest with the supervisor's and the workload's ids, then record.begin's ocsf. */
void sl_run_manifest_close(struct sl_json *j, uid_t workload_uid);

/* Append one accepted sensor.gap (gap, detail). Returns 0 or -errno. */
int sl_run_gap(struct sl_record *rec, struct sl_json *j, const char *gap, const char *detail);

/* Block SIGINT, SIGTERM, SIGHUP and extra (0: none) for the whole run, before any thread; sigs is
 * left with the first three, for the run's signalfd. */
void sl_run_block_signals(sigset_t *sigs, int extra);

/* lifecycle.exit's "exit_code" and "signal" from wstatus. Returns the process exit status
 * (the exit code, or 128+N for signal N). */
int sl_run_exit_status(struct sl_json *j, int wstatus);
/* lifecycle.exit's "reason", "duration_ns" and CPU times. */
void sl_run_exit_usage(struct sl_json *j, const char *reason, int64_t duration_ns, const struct rusage *ru);

/* Start the collector export: this sandbox's key is derived from the master secret at
 * secret_path into ec->key; secret and key are wiped here, so the key lives only in the exporter
 * (never in the sandbox). ec holds everything else. Returns 0 or -errno (said on stderr). */
int sl_run_export_start(struct sl_exporter_cfg *ec, const char *secret_path, struct sl_exporter **out);
/* Ship what is left for up to drain_seconds (none when the collector refused the sandbox for
 * good) and say how it went; what is not acknowledged stays in the record. Ends ex. */
void sl_run_export_finish(struct sl_exporter *ex, unsigned drain_seconds, const char *collector, bool quiet);

/* The wait for the workload: its exit (pidfd readable), the policy's wall-clock limit from
 * start_mono_ns, an operator signal of sigs (taken through a signalfd for the wait), the control
 * socket ctl_fd (-1: none) and, with an exporter, the export watch (supervise.h) every 100 ms for
 * the risk class's blind limit. Kills through t->kill on the limit and a signal. Returns the
 * lifecycle reason ("exited" unless something stopped it). */
struct sl_run_wait {
	int pidfd, ctl_fd;
	const sigset_t *sigs;
	int64_t start_mono_ns;
	uint64_t wall_seconds;	      /* 0: no limit */
	struct sl_exporter *exporter; /* NULL: no watch */
	const char *risk_class, *collector;
	unsigned max_blind_ms; /* 0: the risk class's default */
	struct sl_record *rec;
	const struct sl_sup_target *t;
	const char *credential_ref;
};
const char *sl_run_wait(const struct sl_run_wait *w);

/* The run's exit status once the record is written: 125 when the record is incomplete (r or fr
 * negative, said on stderr), which outranks the workload's status; else status. */
int sl_run_final_status(int status, int r, int fr);
#endif
