/* The gVisor runtime's capabilities: what `sightline run --runtime gvisor` really writes, class by
 * class. The Sentry's points (guest runtime) are mapped by src/sensor/gvisor_map.c; the launcher and
 * supervisor (src/cli/run_gvisor.c, supervise.c, src/sensor/gvisor_sink.c) write the lifecycle,
 * gaps, control and export lines. Keep it in step with gvisor_map.c: a field listed here that the
 * mapping does not write makes the static check lie, which the validator then shows. Every line of
 * a gVisor record says "observer": "gvisor-sentry" (one stamp per record, docs/gvisor.md). */

#include "common/util.h"
#include "common/version.h"
#include "contract/caps.h"
#include "sandbox/gvisor.h"

/* sentry/execve (and container/start for init): no host pid, interpreter, inode or path as passed;
 * uid, binary_mode, binary_uid on sentry/execve only (not the container's init, whose only extra
 * member is ppid 0, not listed). */
static const char *const f_exec[] = {"pid",   "tid",  "syscall", "executable",	"argv",	      "argc", "cwd",
				     "exact", "ocsf", "uid",	 "binary_mode", "binary_uid", NULL};
/* syscall/open,openat,creat exit: canary by path only (no inode). */
static const char *const f_open[] = {"pid",    "tid",	"syscall", "path",  "requested", "flags", "write",
				     "result", "errno", "canary",  "exact", "ocsf",	 NULL};
/* syscall/connect exit (and bind): the raw sockaddr, the fd's path, Exit{result, errorno}. */
static const char *const f_connect[] = {"pid",	  "tid",   "family", "address", "port", "socket",
					"result", "errno", "exact",  "ocsf",	NULL};
static const char *const f_socket[] = {"pid",	 "tid",	  "domain", "type", "protocol",
				       "result", "errno", "ocsf",   NULL};
static const char *const f_clone[] = {"pid",	"tid",	 "child_pid", "child_tid",
				      "thread", "flags", "ocsf",      NULL};
static const char *const f_pexit[] = {"pid", "tid", "exit_code", "signal", "wait_status", "ocsf", NULL};
/* An open refused with EROFS/EACCES/EPERM: the only refusal whose errno names a layer. */
static const char *const f_deny[] = {"pid",    "tid",  "layer", "syscall", "errno",
				     "reason", "path", "ocsf",	NULL};
/* Written by the launcher: the container's init is pid 1 in the sandbox; no host pid. */
static const char *const f_start[] = {"pid", "container_id", "workspace", "ocsf", NULL};
static const char *const f_exit[] = {"pid",	    "exit_code",     "signal", "reason", "duration_ns",
				     "cpu_user_us", "cpu_system_us", "ocsf",   NULL};
static const char *const f_gap[] = {
    "gap",	    "detail",	"accepted", "dropped", "dropped_total",	       "reason", "bytes",
    "message_type", "rejected", "foreign",  "reasons", "claimed_container_id", NULL};
static const char *const f_begin[] = {"manifest",
				      "manifest.runtime",
				      "manifest.runtime_version",
				      "manifest.sensor",
				      "manifest.sensor_version",
				      "manifest.sightline_version",
				      "manifest.policy",
				      "manifest.layers",
				      "manifest.risk_class",
				      "manifest.container_id",
				      NULL};

static const struct sl_cap_class gvisor_classes[] = {
    {"process.exec", SL_OBS_GUEST_RUNTIME, f_exec,
     "sentry/execve and container/start points; successful execs only (failed ones are counted); uid, "
     "binary_mode, binary_uid not for the container's init",
     0},
    {"file.open", SL_OBS_GUEST_RUNTIME, f_open,
     "syscall/open,openat,creat exit points (not openat2); off with sensor.record_opens: false", 0},
    {"network.connect", SL_OBS_GUEST_RUNTIME, f_connect, "syscall/connect exit point", 0},
    {"network.bind", SL_OBS_GUEST_RUNTIME, f_connect, "syscall/bind exit point", 0},
    {"network.socket", SL_OBS_GUEST_RUNTIME, f_socket, "syscall/socket exit point", 0},
    {"process.clone", SL_OBS_GUEST_RUNTIME, f_clone, "sentry/clone point", 0},
    {"process.exit", SL_OBS_GUEST_RUNTIME, f_pexit, "sentry/exit_notify_parent (not the container's init)",
     0},
    {"policy.deny", SL_OBS_GUEST_RUNTIME, f_deny, "only for opens refused with EROFS/EACCES/EPERM",
     1u << SL_ACT_BLOCKED_CONNECT},
    {"lifecycle.start", SL_OBS_SUPERVISOR, f_start, "written by the launcher before runsc starts", 0},
    {"lifecycle.exit", SL_OBS_SUPERVISOR, f_exit, "from runsc run's exit status (the container's init)", 0},
    {"sensor.gap", SL_OBS_SUPERVISOR, f_gap, "the sink's dropped_count, decode rejects, foreign points", 0},
    SL_CAPS_SHARED_CLASSES(f_begin),
};

/* runsc's own version line: an upgrade of runsc changes what the Sentry emits. The same reading
 * as the run's manifest (sl_gvisor_version: runsc's whole output is read before it is waited for,
 * so it never dies of SIGPIPE on its second line), so an acceptance and a binding agree. */
static int gvisor_version(char *buf, size_t len)
{
	return sl_gvisor_version(NULL, buf, len);
}

const struct sl_runtime_caps sl_caps_gvisor = {
    .runtime = "gvisor",
    .sensor = "gvisor-sentry",
    .record_observer = "gvisor-sentry",
    .classes = gvisor_classes,
    .n_classes = SL_ARRAY_LEN(gvisor_classes),
    .sensor_version = SL_GVISOR_SENSOR_VERSION,
    .runtime_version = gvisor_version,
};
