/* The gVisor runtime's capabilities, from the trace points this machine's runsc offers
 * (/work/shared/reference/gvisor-runtime-monitoring.md): the Sentry (guest runtime) emits execs,
 * opens, connects, container start and task exit through its remote sink; the record writer, gaps
 * (the sink's dropped_count) and the control path stay the supervisor's. gVisor has no point for a
 * refusal by a policy, so policy.deny is not in this table: a contract must declare it unsupported
 * for gvisor (or the gateway must emit it). The sink itself is built in issue 5 (branch gvisor);
 * this table says what the points can carry, the validator shows what arrives. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "contract/caps.h"

/* sentry/execve: ContextData thread_id, cwd; binary_path (resolved), argv. */
static const char *const f_exec[] = {"pid", "executable", "argv", "cwd", NULL};
/* syscall/openat exit: pathname, flags, Exit{result, errorno}; canary matched by the sink. */
static const char *const f_open[] = {"pid", "syscall", "path", "flags", "result", "errno", "canary", NULL};
/* syscall/connect exit: the raw sockaddr (family, address, port), Exit{result, errorno}. */
static const char *const f_connect[] = {"pid", "family", "address", "port", "result", "errno", NULL};
/* container/start: id, cwd, args. */
static const char *const f_start[] = {"pid", "cwd", "argv", NULL};
/* sentry/task_exit: exit_status (a wait status). */
static const char *const f_exit[] = {"pid", "exit_code", "signal", NULL};
static const char *const f_gap[] = {"gap", "detail", NULL};
static const char *const f_control[] = {"action", "by", "peer_uid", "peer_pid", "reason", NULL};
static const char *const f_begin[] = {
    "manifest",	       "manifest.runtime",	  "manifest.runtime_version",
    "manifest.sensor", "manifest.sensor_version", NULL};
static const char *const f_end[] = {"counts", NULL};

static const struct sl_cap_class gvisor_classes[] = {
    {"process.exec", SL_OBS_GUEST_RUNTIME, f_exec, "sentry/execve point"},
    {"file.open", SL_OBS_GUEST_RUNTIME, f_open, "syscall/open,openat,creat exit points"},
    {"network.connect", SL_OBS_GUEST_RUNTIME, f_connect, "syscall/connect exit point"},
    {"lifecycle.start", SL_OBS_GUEST_RUNTIME, f_start, "container/start point"},
    {"lifecycle.exit", SL_OBS_GUEST_RUNTIME, f_exit, "sentry/task_exit point"},
    {"sensor.gap", SL_OBS_SUPERVISOR, f_gap, "the sink's dropped_count and decode rejects"},
    {"control.action", SL_OBS_SUPERVISOR, f_control, NULL},
    {"record.begin", SL_OBS_SUPERVISOR, f_begin, NULL},
    {"record.end", SL_OBS_SUPERVISOR, f_end, NULL},
};

/* runsc's own version line: an upgrade of runsc changes what the Sentry emits. */
static int gvisor_version(char *buf, size_t len)
{
	FILE *f = popen("runsc --version 2>/dev/null", "r");
	if (!f)
		return -errno;
	char line[256] = "";
	char *got = fgets(line, sizeof(line), f);
	int st = pclose(f);
	if (!got || st != 0)
		return -ENOENT;
	line[strcspn(line, "\n")] = '\0';
	snprintf(buf, len, "%s", line);
	return 0;
}

const struct sl_runtime_caps sl_caps_gvisor = {
    .runtime = "gvisor",
    .sensor = "sightline-gvisor-sink",
    .classes = gvisor_classes,
    .n_classes = SL_ARRAY_LEN(gvisor_classes),
    .sensor_version = "gvisor-sink/1",
    .runtime_version = gvisor_version,
};
