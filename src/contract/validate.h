/* The acceptance validator (`sightline validate`, docs/contract.md): proves a contract end to end
 * with harmless canaries, a real collector and a real denial, an export interruption and recovery. */
#ifndef SL_CONTRACT_VALIDATE_H
#define SL_CONTRACT_VALIDATE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/caps.h"
#include "contract/contract.h"

enum sl_vverdict {
	SL_V_PASS = 0,
	SL_V_FAIL, /* the check ran and failed */
	SL_V_GAP,  /* the action happened and its expected event is absent: a coverage gap */
	SL_V_NA,   /* does not apply in this run (said why); neither passes nor fails */
};
const char *sl_vverdict_name(int v);

struct sl_vrow {
	char check[32];	  /* binding, visible, fields, delay, alert, control, loss, recovery */
	char subject[64]; /* behaviour id or what is checked */
	char expected[256];
	char observed[512];
	int verdict;
	bool control; /* a control check (the denial really happened) rather than a visibility check */
};

#define SL_VALIDATE_MAX_ROWS  256
#define SL_VALIDATE_MAX_FLAGS 8

struct sl_validate_cfg {
	const struct sl_contract *contract;
	const struct sl_runtime_caps *rt;
	const char *risk_class;	  /* the workload's risk class, default "medium" */
	const char *policy_extra; /* YAML appended to the workload's policy (negative tests) */
	const char *collectd_flags[SL_VALIDATE_MAX_FLAGS]; /* extra flags for the collector it starts */
	size_t n_collectd_flags;
	unsigned listen_port;		    /* the listener's port; 0: random */
	bool keep;			    /* keep the work directory */
	void (*progress)(const char *line); /* one line per step, or NULL */
};

struct sl_validate_result {
	struct sl_vrow rows[SL_VALIDATE_MAX_ROWS];
	size_t n_rows;
	bool passed;	      /* every control and every visibility check passed */
	bool controls_passed; /* every control row */
	bool visibility_passed;
	char sandbox_id[33];
	char workdir[64];
	char runtime_version[256];
	int64_t started_ns, ended_ns;
	struct {
		char tenant[32], agent[32], task[32], version[32], credential_ref[48];
	} id;
	char canary_path[128];
	unsigned port;
};

/* Run the validation. Returns 0 when it could run (res says whether it passed) or -errno when it
 * could not even set up (err says why). Needs root (the listener joins the sandbox's network
 * namespace). */
int sl_validate_run(const struct sl_validate_cfg *cfg, struct sl_validate_result *res, char *err,
		    size_t errlen);
/* Async-signal-safe: SIGTERM the collector and the workload a running sl_validate_run started (for
 * the program's signal handler, so an interrupted validation leaves no process behind). */
void sl_validate_abort(void);
/* The result as JSON (owned by the caller: free()), or NULL. */
char *sl_validate_json(const struct sl_validate_cfg *cfg, const struct sl_validate_result *res);
/* The result as JUnit XML (free()), or NULL. */
char *sl_validate_junit(const struct sl_validate_cfg *cfg, const struct sl_validate_result *res);
#endif
