/* The sandbox policy file (YAML, documented in docs/policy.md): what the workload may see and
 * do. Parsed with libyaml; every error names file:line:column and what is wrong. */
#ifndef SL_POLICY_H
#define SL_POLICY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_POLICY_MAX_PATHS 64
#define SL_POLICY_MAX_PORTS 64

struct sl_policy_limits {
	uint64_t memory_bytes; /* cgroup memory.limit; 0 = none */
	uint64_t pids;	       /* cgroup pids.max and RLIMIT_NPROC; 0 = none */
	uint64_t nofile;       /* RLIMIT_NOFILE */
	uint64_t cpu_seconds;  /* RLIMIT_CPU */
	uint64_t file_size;    /* RLIMIT_FSIZE, bytes */
	uint64_t tmp_size;     /* size of the sandbox-private /tmp tmpfs, bytes */
	uint64_t wall_seconds; /* the supervisor kills the sandbox after this; 0 = none */
};

struct sl_policy {
	char *workspace;       /* host path of the one writable directory; NULL: a fresh one per sandbox */
	char *workspace_mount; /* where it appears inside (default /workspace) */
	char *ro_paths[SL_POLICY_MAX_PATHS]; /* host paths bound read-only at the same place inside */
	size_t n_ro;
	char *canaries[SL_POLICY_MAX_PATHS]; /* paths as the workload sees them; opens are flagged */
	size_t n_canaries;
	uint16_t tcp_connect[SL_POLICY_MAX_PORTS]; /* ports the workload may connect to (TCP) */
	size_t n_tcp_connect;
	struct sl_policy_limits limits;
	bool tmp;		/* give a private tmpfs /tmp (default true) */
	bool redact_argv;	/* redact secret-looking argv values (default true) */
	bool record_opens;	/* the sensor records file.open (default true; false only for tests of gaps) */
	/* record.on_full: when the record's disk is full, the workload's syscall waits until the line
	 * fits ("wait", true) or the sandbox is stopped ("stop", false, the default). Either way the
	 * workload never goes on unrecorded. */
	bool record_wait_on_full;
	char *env[SL_POLICY_MAX_PATHS]; /* NAME=VALUE pairs given to the workload (default PATH, HOME, LANG) */
	size_t n_env;
};

/* Fill p with the defaults (ro: /usr /bin /lib /lib64 /etc /sbin; no canaries; no ports;
 * memory 1 GiB, pids 512, nofile 1024, cpu 3600 s, file_size 1 GiB, tmp 256 MiB; wall 0). */
int sl_policy_default(struct sl_policy *p);
/* Parse YAML text into p (which starts from the defaults). name is used in errors. On error
 * returns -EINVAL and writes "name:line:col: what is wrong" into err. */
int sl_policy_parse(const char *text, size_t len, const char *name, struct sl_policy *p, char *err, size_t errlen);
/* Read and parse a file. */
int sl_policy_load(const char *path, struct sl_policy *p, char *err, size_t errlen);
void sl_policy_free(struct sl_policy *p);
#endif
