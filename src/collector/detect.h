/* The collector's built-in detections over stored lines, and its scheduled canaries. */
#ifndef SL_COLLECTOR_DETECT_H
#define SL_COLLECTOR_DETECT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_detection {
	const char *kind; /* "canary-read" or "blocked-connect" */
	char detail[320];
	char path[256]; /* the canary's path, or the refused destination */
};

/* Look at one line that was just stored (already validated). Returns 1 and fills *d when a
 * built-in detection fires: a file.open of a path the sandbox's policy registered as a canary
 * ("canary": true), or a policy.deny of a connect. 0 otherwise. */
int sl_detect_line(const char *line, size_t len, struct sl_detection *d);

struct sl_store;
struct sl_canary_sched;
struct sl_canary_cfg {
	unsigned every_ms;	 /* interval between scheduled canaries */
	const char *collector;	 /* the collector's own ingest address */
	const char *secret_path; /* its master secret (the canary's supervisor derives its key) */
	const char *policy;	 /* extra policy YAML for the canary sandbox, or NULL */
	void (*log)(const char *line);
};
/* A scheduler that runs `sightline run` (this binary) every every_ms through the whole pipeline.
 * Returns 0 or -errno. */
int sl_canary_sched_new(const struct sl_canary_cfg *cfg, struct sl_canary_sched **out);
/* Called every collector tick: starts a canary when one is due, reaps it, raises "canary-failed"
 * (the run ended but its canary read never arrived) or "canary-late" (not arrived within the
 * interval) as collector-wide alerts. */
void sl_canary_tick(struct sl_canary_sched *cs, struct sl_store *st, int64_t now_ns);
/* A canary-read detection for path: true if it is the scheduled canary's (then it is consumed: no
 * alert for it). */
bool sl_canary_seen(struct sl_canary_sched *cs, const char *path, int64_t now_ns);
void sl_canary_sched_free(struct sl_canary_sched *cs);
#endif
