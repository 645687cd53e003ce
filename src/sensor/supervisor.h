/* The sensor beneath the boundary: one thread per sandbox that receives the workload's seccomp
 * notifications, decides, emulates (opens, connects) or lets the kernel continue (exec), and
 * writes the event to the record before the workload's syscall returns. Nothing the workload
 * does through these syscalls can happen unrecorded: if the record cannot be written, the
 * sandbox is killed and the syscall fails. */
#ifndef SL_SUPERVISOR_H
#define SL_SUPERVISOR_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"
#include "record/record.h"
#include "sandbox/sandbox.h"

struct sl_counters {
	atomic_uint_fast64_t notifications, exec, open, open_failed, connect, deny, gap, canary, inexact;
};

struct sl_tid_cache;

struct sl_supervisor {
	struct sl_sandbox *sb;
	struct sl_record *rec;
	const struct sl_policy *policy;
	uid_t w_uid;
	gid_t w_gid;
	int cpu;	  /* >= 0: pin the sensor thread here (the workload's CPU) */
	bool drop_groups; /* we are root: give the sensor thread no supplementary groups */
	struct sl_counters c;
	atomic_int fatal; /* first -errno that stopped recording (the sandbox is then killed) */
	pthread_t thread;
	bool running;
	bool sync_wakeup; /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP took effect */
	atomic_bool stopping;
	struct sl_tid_cache *cache;
	bool privileged; /* the supervisor has capabilities to drop around opens */
	struct {
		dev_t dev;
		ino_t ino;
	} canary_ino[64];
	size_t n_canary_ino;
	pthread_mutex_t workers_mu;
	pthread_t worker[64];
	bool worker_busy[64];
	int n_workers;
};

/* Start the notification thread. Returns 0 or -errno. */
int sl_supervisor_start(struct sl_supervisor *s);
/* Stop the notification thread and join it. Call only after the sandbox's pid 1 was reaped (so
 * the kernel has reaped every other task of the sandbox). The process must keep SIGUSR1 blocked
 * in every other thread. */
void sl_supervisor_join(struct sl_supervisor *s);

/* Helpers shared with the CLI (they read the kernel's view of a task). */
struct sl_task_info {
	pid_t tgid, ppid;	 /* host view */
	pid_t ns_pid, ns_tid;	 /* sandbox view (last NStgid / NSpid value) */
	unsigned threads;
	unsigned levels; /* pid namespace depth (numbers on the NSpid line) */
	unsigned umask;
};
int sl_task_info(pid_t tid, struct sl_task_info *ti);
#endif
