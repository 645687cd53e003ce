/* Shared between the sensor's files (supervisor loop, open, exec, connect, workers). Not an API:
 * everything here runs in the sensor's threads. */
#ifndef SL_SENSOR_INTERNAL_H
#define SL_SENSOR_INTERNAL_H
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/json.h"
#include "sensor/supervisor.h"

#define PATH_MAXLEN 4096
#define ARGV_MAX    64	/* recorded arguments */
#define ARG_MAX_LEN 256 /* recorded bytes per argument */

/* glibc's __O_TMPFILE includes O_DIRECTORY: test all its bits. */
#define IS_TMPFILE(f)  (((f) & __O_TMPFILE) == __O_TMPFILE)
#define HAS_CREATE(f) (((f) & O_CREAT) || IS_TMPFILE(f))

/* Workload memory (hostile): exact reads, and bounded NUL-terminated strings. */
int sl_mem_read(pid_t tid, uint64_t addr, void *buf, size_t len);
ssize_t sl_mem_read_str(pid_t tid, uint64_t addr, char *buf, size_t max);

/* Event helpers. sl_emit appends and, if the record refuses, kills the sandbox (fail closed). */
void sl_json_task(struct sl_json *j, pid_t tid, const struct sl_task_info *ti);
void sl_json_ocsf(struct sl_json *j, int class_uid, int activity_id, int disposition_id);
const char *sl_errno_name(int e);
int sl_emit(struct sl_supervisor *s, const char *cls, struct sl_json *j);
int64_t sl_emit_seq(struct sl_supervisor *s, const char *cls, struct sl_json *j); /* seq or -errno */
int sl_deny_event(struct sl_supervisor *s, pid_t tid, const struct sl_task_info *ti, int nr, const char *layer,
		  int err, const char *reason, const char *path, int ocsf_class, int ocsf_act);
int sl_gap_event(struct sl_supervisor *s, pid_t tid, const struct sl_task_info *ti, int nr, const char *what,
		 int err);

/* Paths as the workload names them. */
ssize_t sl_read_link(const char *link, char *buf, size_t size);
int sl_absolute_path(pid_t tid, int dirfd, const char *path, char *out, size_t outlen);
int sl_translate_self(const char *in, const struct sl_task_info *ti, char *out, size_t outlen);
void sl_flags_str(int flags, char *buf, size_t len);
/* Strict decimal: digits only, no sign, no leading zero (but "0"); stops at end or '/'. */
bool sl_parse_uint(const char *s, unsigned *out, const char **end);

/* Answering the kernel. */
void sl_respond(struct sl_supervisor *s, uint64_t id, int64_t val, int err, bool cont);
bool sl_id_valid(struct sl_supervisor *s, uint64_t id);

/* Credentials of sensor threads. sl_thread_become_workload: this thread's fs identity becomes
 * the workload's (fsuid/fsgid, no groups, own umask) and it keeps no effective capability
 * (sl_drop_effective_caps), so a file it opens for the workload carries no host privilege. */
int sl_thread_become_workload(struct sl_supervisor *s);
void sl_drop_effective_caps(struct sl_supervisor *s);

/* Run fn(arg) on a short-lived worker thread with the workload's fs identity, for an operation
 * that may block (a FIFO open, a blocking connect) so the sensor keeps serving other tasks.
 * arg is freed by fn. Returns 0, or -EAGAIN when too many workers are busy. */
int sl_worker_spawn(struct sl_supervisor *s, void (*fn)(struct sl_supervisor *, void *), void *arg);

/* Open abs (absolute, /proc/self already rewritten) as the workload would resolve it: beneath
 * the sandbox's root, magic links of the caller's own /proc entry followed safely. Call with the
 * sensor's credentials (sl_thread_become_workload). Returns an fd or -errno. */
int sl_open_in_sandbox(struct sl_supervisor *s, const struct sl_task_info *ti, const char *abs, struct open_how *how);

/* The handlers. */
void sl_handle_open(struct sl_supervisor *s, const struct seccomp_notif *n, const struct sl_task_info *ti);
void sl_handle_exec(struct sl_supervisor *s, const struct seccomp_notif *n, const struct sl_task_info *ti);
void sl_handle_connect(struct sl_supervisor *s, const struct seccomp_notif *n, const struct sl_task_info *ti);
/* After an exec was let through: check, on the task's next notification, that the kernel ran
 * what was recorded. */
void sl_exec_verify(struct sl_supervisor *s, pid_t tid, const struct sl_task_info *ti);
#endif
