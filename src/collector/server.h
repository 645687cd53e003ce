/* The collector daemon: accepts supervisors' streams, authenticates every frame with the
 * sandbox's key (derived from the collector's master secret), validates every line, stores it
 * durably before acknowledging it, and watches each sandbox's liveness. */
#ifndef SL_COLLECTOR_SERVER_H
#define SL_COLLECTOR_SERVER_H
#include <stdbool.h>
#include <stdint.h>

#include "export/frame.h"

#define SL_COLLECTD_MAX_LISTEN 4

struct sl_collectd_cfg {
	const char *listen[SL_COLLECTD_MAX_LISTEN]; /* "unix:/path" or "tcp:127.0.0.1:PORT" */
	int n_listen;
	const char *db_path;
	/* Operator socket (unix only, peer credentials checked): the dispatch gate. NULL: none. */
	const char *admin;
	/* Prometheus text on http://ADDR/metrics ("tcp:127.0.0.1:PORT", loopback only). NULL: none. */
	const char *metrics;
	uint8_t master[SL_FRAME_MASTER_LEN];
	/* Longest silence (no frame, no heartbeat) before a running sandbox is "blind", per risk
	 * class, in milliseconds. */
	unsigned max_blind_ms_high, max_blind_ms_medium, max_blind_ms_low;
	/* Delivery later than this (events behind, per the heartbeat's backlog) is "lagging". */
	unsigned max_delay_ms;
	/* Negative testing only (the validator's "disabled gate" control): the gate always answers
	 * open. */
	bool gate_disabled;
	/* Scheduled canaries (src/collector/canary.c): every canary_every_ms (0: off) run a canary
	 * workload through this collector; secret_path is the master secret's file (the canary's
	 * supervisor derives its key), canary_policy extra policy YAML for it (or NULL). */
	unsigned canary_every_ms;
	const char *secret_path;
	const char *canary_policy;
	/* Called with one line of operator log (the daemon's edge prints it). */
	void (*log)(const char *line);
};

/* Run until SIGINT/SIGTERM (blocked by the caller and read through a signalfd here). Returns 0 on
 * a clean stop or -errno if it could not start (the message went to log). */
int sl_collectd_run(const struct sl_collectd_cfg *cfg);

/* Create (mode 0600, O_EXCL) or read the 32-byte master secret at path. Returns 0 or -errno. */
int sl_collectd_secret(const char *path, uint8_t out[SL_FRAME_MASTER_LEN]);
#endif
