/* `sightline run --runtime gvisor`: the same launcher contract as native (identity, policy,
 * record, control socket, collector export), with runsc as the sandbox and the Sentry's
 * runtime-monitoring stream as the sensor. cmd_run.c parses and resolves (identity, policy,
 * workspace, record dir) and hands over here. */
#ifndef SL_RUN_GVISOR_H
#define SL_RUN_GVISOR_H
#include <stdbool.h>
#include <sys/types.h>

#include "policy/policy.h"
#include "record/record.h"

struct sl_gv_run_args {
	struct sl_identity id;
	const struct sl_policy *policy;
	const char *policy_file;
	const char *workspace; /* resolved host path */
	const char *recdir;    /* resolved record dir */
	const char *sandbox_id;
	uid_t uid;
	gid_t gid;
	char **argv;
	unsigned sync_ms;
	bool quiet;
	const char *collector;
	const char *collector_secret;
	const char *risk_class;
	unsigned drain_seconds;
	unsigned max_blind_ms;
	/* --validator-listen PORT:LOGFILE: the validator's listener, on the host loopback (the
	 * sandbox's netstack is the Sentry's own; docs/contract.md), or NULL */
	const char *validator_listen;
};

/* Run the sandbox to its end. Returns the process exit status (the workload's, 125 for our own
 * failure, 3 when the sandbox could not be built). */
int sl_run_gvisor(const struct sl_gv_run_args *a);
#endif
