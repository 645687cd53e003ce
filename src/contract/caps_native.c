/* The native runtime's capabilities: what the supervisor's sensor (seccomp user notification beneath
 * the sandbox, src/sensor/) and sightline run (lifecycle, gaps, control) write into the record, class
 * by class, as docs/events.md describes. Keep this table in step with the sensor: a field listed
 * here that the sensor does not write makes the static check lie, which the validator then shows. */
#include <errno.h>
#include <stdio.h>
#include <sys/utsname.h>

#include "common/util.h"
#include "common/version.h"
#include "contract/caps.h"
#include "sandbox/sandbox.h"

static const char *const f_exec[] = {"pid",	    "tid",	  "host_pid", "host_tid", "ppid", "host_ppid",
				     "syscall",	    "executable", "path",     "argv",	  "argc", "cwd",
				     "interpreter", "inode",	  "exact",    "ocsf",	  NULL};
static const char *const f_open[] = {"pid",	  "tid",      "host_pid", "host_tid", "syscall", "path",
				     "requested", "resolved", "flags",	  "write",    "result",	 "errno",
				     "canary",	  "exact",    "ocsf",	  NULL};
static const char *const f_connect[] = {"pid",	"tid",	  "host_pid", "host_tid", "family", "address", "port",
					"type", "result", "errno",    "exact",	  "ocsf",   NULL};
static const char *const f_deny[] = {"pid",   "tid",	"host_pid", "host_tid", "layer", "syscall",
				     "errno", "reason", "path",	    "ocsf",	NULL};
static const char *const f_start[] = {"pid", "host_pid", "workspace", "ocsf", NULL};
static const char *const f_exit[] = {"pid",	   "host_pid",	  "exit_code",	 "signal",
				     "reason",	   "duration_ns", "cpu_user_us", "cpu_system_us",
				     "max_rss_kb", "ocsf",	  NULL};
static const char *const f_gap[] = {"gap",	"detail",   "accepted", "pid",	  "tid", "host_pid",
				    "host_tid", "exec_seq", "expected", "actual", NULL};
static const char *const f_begin[] = {"manifest",
				      "manifest.runtime",
				      "manifest.runtime_version",
				      "manifest.sensor",
				      "manifest.sensor_version",
				      "manifest.sightline_version",
				      "manifest.policy",
				      "manifest.layers",
				      "manifest.risk_class",
				      NULL};

static const struct sl_cap_class native_classes[] = {
    {"process.exec", SL_OBS_SUPERVISOR, f_exec,
     "written before the kernel runs the exec (exact: false when another thread could race it)", 0},
    {"file.open", SL_OBS_SUPERVISOR, f_open,
     "opens only (not stat/unlink/rename); off with sensor.record_opens: false", 0},
    {"network.connect", SL_OBS_SUPERVISOR, f_connect, "connect only (not sendto without connect)", 0},
    {"policy.deny", SL_OBS_SUPERVISOR, f_deny,
     "refusals by the supervisor and the seccomp layer (not Landlock's)", 0},
    {"lifecycle.start", SL_OBS_SUPERVISOR, f_start, NULL, 0},
    {"lifecycle.exit", SL_OBS_SUPERVISOR, f_exit, "pid 1 only", 0},
    {"sensor.gap", SL_OBS_SUPERVISOR, f_gap, NULL, 0},
    SL_CAPS_SHARED_CLASSES(f_begin),
};

/* The native runtime is the host kernel plus the Landlock ABI it offers: an upgrade of either
 * changes what the sandbox confines and sees, so it makes an acceptance stale. */
static int native_version(char *buf, size_t len)
{
	struct utsname u;
	if (uname(&u) < 0)
		return -errno;
	snprintf(buf, len, "linux %s, landlock abi %d", u.release, sl_landlock_abi());
	return 0;
}

const struct sl_runtime_caps sl_caps_native = {
    .runtime = "native",
    .sensor = "sightline-supervisor",
    .record_observer = "supervisor",
    .classes = native_classes,
    .n_classes = SL_ARRAY_LEN(native_classes),
    .sensor_version = SL_SENSOR_VERSION,
    .runtime_version = native_version,
};
