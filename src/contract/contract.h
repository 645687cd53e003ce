/* The visibility contract (format: docs/contract.md): what must be visible in one deployment, with
 * which fields, from which observation point, within what delay; the blind interval each risk class
 * allows and the response; the operations declared unsupported. Parsed strictly (parse.c), checked
 * statically against a runtime's capability table (check.c, caps_*.c), proven by the validator
 * (validate.c). */
#ifndef SL_CONTRACT_H
#define SL_CONTRACT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_CONTRACT_MAX_BEHAVIOURS  64
#define SL_CONTRACT_MAX_FIELDS	    32
#define SL_CONTRACT_MAX_UNSUPPORTED 64
#define SL_CONTRACT_MAX_RUNTIMES    8
#define SL_CONTRACT_MAX_BYTES	    (1024 * 1024)

/* Observation points: the component that emits an event. */
enum sl_observer {
	SL_OBS_SUPERVISOR = 0, /* beneath the sandbox (native: seccomp notify, pidfd) */
	SL_OBS_GUEST_RUNTIME,  /* the runtime's own kernel (gVisor's Sentry) */
	SL_OBS_GATEWAY,	       /* the egress gateway */
	SL_OBS_APPLICATION,    /* the workload itself (never trusted for identity) */
	SL_OBS_HOST,	       /* a host-wide monitor */
	SL_OBS_COUNT,
};
/* "supervisor", "guest-runtime", ... ; NULL for an out-of-range value. */
const char *sl_observer_name(int obs);
/* The enum value for a name, or -1. */
int sl_observer_parse(const char *name);

/* What the validator does to exercise a behaviour. */
enum sl_action {
	SL_ACT_NONE = 0,	/* checked statically only */
	SL_ACT_EXEC,		/* run a harmless program */
	SL_ACT_CANARY_READ,	/* read the synthetic canary file */
	SL_ACT_BLOCKED_CONNECT, /* a connection the policy must block */
	SL_ACT_START,		/* the workload's start */
	SL_ACT_EXIT,		/* the workload's end */
	SL_ACT_COUNT,
};
const char *sl_action_name(int act);
int sl_action_parse(const char *name);

enum sl_response { SL_RESP_PAUSE_DISPATCH = 0, SL_RESP_STOP };
const char *sl_response_name(int resp);

struct sl_contract_behaviour {
	char *id;
	char *event; /* event class, e.g. "process.exec" */
	char *fields[SL_CONTRACT_MAX_FIELDS];
	size_t n_fields;
	int observer;	       /* enum sl_observer */
	uint64_t max_delay_ms; /* action -> stored in the collector */
	bool required;
	int action; /* enum sl_action */
	unsigned line;
};

struct sl_contract_risk {
	bool set;
	uint64_t max_blind_ms;
	int response; /* enum sl_response */
};
#define SL_RISK_HIGH   0
#define SL_RISK_MEDIUM 1
#define SL_RISK_LOW    2
const char *sl_risk_name(int idx);

struct sl_contract_unsupported {
	char *op; /* a behaviour id, or any operation name */
	char *reason;
	char *runtimes[SL_CONTRACT_MAX_RUNTIMES]; /* none: every runtime */
	size_t n_runtimes;
	unsigned line;
};

struct sl_contract {
	char *name;
	struct sl_contract_behaviour b[SL_CONTRACT_MAX_BEHAVIOURS];
	size_t n_b;
	struct sl_contract_risk risk[3];
	struct sl_contract_unsupported u[SL_CONTRACT_MAX_UNSUPPORTED];
	size_t n_u;
};

/* Parse a contract from text (need not be NUL-terminated; at most SL_CONTRACT_MAX_BYTES, else
 * -EFBIG). name is used in messages. On success returns 0 and fills *c (free with
 * sl_contract_free); on failure returns -EINVAL/-EFBIG/-ENOMEM, writes "name:LINE:COL: what is
 * wrong" into err and leaves *c empty. */
int sl_contract_parse(const char *text, size_t len, const char *name, struct sl_contract *c, char *err,
		      size_t errlen);
/* Read and parse a file. A read failure returns -errno with "PATH: cannot read: ...". */
int sl_contract_load(const char *path, struct sl_contract *c, char *err, size_t errlen);
/* Free everything; leaves an empty contract. Safe twice and on a failed parse. */
void sl_contract_free(struct sl_contract *c);
/* The unsupported entry declaring operation op on runtime rt, or NULL. */
const struct sl_contract_unsupported *sl_contract_unsupported_for(const struct sl_contract *c, const char *op,
								  const char *rt);
#endif
