/* The supervisor's side of a run that does not depend on the runtime: the control socket beside
 * the record, the collector's secret, the export watch (blind detection for every risk class,
 * the high-risk stop, a refused credential) and the validator's listener. `sightline run` uses it
 * for native (cmd_run.c) and gVisor (run_gvisor.c), so both runtimes answer the same commands and
 * respond to loss the same way; only how a sandbox is frozen and killed differs (the target). */
#ifndef SL_CLI_SUPERVISE_H
#define SL_CLI_SUPERVISE_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/json.h"
#include "contract/listener.h"
#include "export/exporter.h"
#include "export/frame.h"
#include "record/record.h"

/* How the supervisor acts on its sandbox. */
struct sl_sup_target {
	void *arg;
	/* Freeze (on) or thaw the sandbox. Returns 0 or -errno. */
	int (*freeze)(void *arg, bool on);
	/* Kill every process of the sandbox, frozen first where the runtime can (nothing runs
	 * between the decision and the kill). */
	void (*stop)(void *arg);
	/* Kill every process of the sandbox at once (the wall-clock limit, an operator signal). */
	void (*kill)(void *arg);
	/* The control socket's answer when freeze fails. */
	const char *freeze_error;
};

/* Append one line with the current time. Returns 0 or -errno. */
int sl_sup_append(struct sl_record *rec, const char *cls, struct sl_json *j);

/* Listen on the control socket at path (0600: this uid and root). Returns the fd or -errno. */
int sl_sup_control_listen(const char *path);
/* Answer every pending connection of lfd: "stop [reason]", "freeze", "thaw", "revoke [reason]".
 * Only root or this supervisor's uid (SO_PEERCRED). Every accepted action is recorded before it
 * happens; cred names the credential reference a revoke concerns. Returns the lifecycle reason
 * when the sandbox was stopped, else NULL. */
const char *sl_sup_control(int lfd, const struct sl_sup_target *t, struct sl_record *rec, const char *cred);

/* The collector's 32-byte master secret. Returns 0, -errno, or -EINVAL when it is not 32 bytes. */
int sl_sup_read_secret(const char *path, uint8_t out[SL_FRAME_MASTER_LEN]);

/* The longest export silence for a risk class: max_blind_ms if set, else 2000 (high), 10000
 * (medium), 60000 (low), the collector's defaults (docs/collector.md). */
unsigned sl_sup_blind_limit_ms(const char *risk_class, unsigned max_blind_ms);

/* The export watch: one per run with a collector. */
struct sl_sup_watch {
	const char *risk_class;
	const char *collector;
	unsigned limit_ms;
	/* state */
	bool blind, stopped, warned_refused;
	int64_t blind_mono_ns, blind_real_ns;
};
/* One look at the exporter (call at least every 100 ms): records export.blind when no ACK came
 * for limit_ms and export.restored when ACKs resume (every risk class); for high risk stops the
 * sandbox when blind or when the collector refused its credential (revoked). Returns the
 * lifecycle reason when it stopped the sandbox, else NULL. */
const char *sl_sup_watch_tick(struct sl_sup_watch *w, struct sl_exporter *ex, struct sl_record *rec,
			      const struct sl_sup_target *t);

/* Record a stop by the supervisor with its reason, then freeze and kill the sandbox. */
void sl_sup_stop(struct sl_record *rec, const struct sl_sup_target *t, const char *why);

/* --validator-listen PORT:LOGFILE: the validator's listener in the network namespace of
 * netns_pid (the sandbox's for native; the supervisor's own, the host loopback, for gVisor,
 * whose netstack lives inside the Sentry). Returns 0 or -errno (said on stderr). */
int sl_sup_validator_listener(const char *spec, pid_t netns_pid, struct sl_canary_listener **out);
#endif
