/* What a runtime and its sensors can emit: one table per runtime (caps_native.c, caps_gvisor.c, ...),
 * read by the static check (check.c) and by the validator for the versions an acceptance is tied to. */
#ifndef SL_CONTRACT_CAPS_H
#define SL_CONTRACT_CAPS_H
#include <stddef.h>

#include "contract/contract.h"

/* One event class a runtime's sensor emits, from one observation point, with these fields (the
 * line's members; "identity.tenant" names a member of a member). */
struct sl_cap_class {
	const char *event;
	int observer;		   /* enum sl_observer */
	const char *const *fields; /* NULL-terminated */
	const char *note;	   /* a condition on coverage, or NULL */
	/* Actions (1u << enum sl_action) after which this class is NOT emitted although it is
	 * emitted after others (gVisor: policy.deny after an open refused with EROFS, never after a
	 * blocked connect). 0: every action. */
	unsigned not_after;
};

struct sl_runtime_caps {
	const char *runtime; /* "native", "gvisor" */
	const char *sensor;  /* the sensor's name */
	/* What every line of this runtime's record says in "observer" (the record writer stamps one
	 * per record): the validator checks it, the observation point per class is the table's. */
	const char *record_observer;
	const struct sl_cap_class *classes;
	size_t n_classes;
	/* The sensor version acceptances are tied to (src/common/version.h for native). */
	const char *sensor_version;
	/* Write the runtime's version (what an upgrade changes) into buf. Returns 0 or -errno. */
	int (*runtime_version)(char *buf, size_t len);
};

/* The field lists of the classes every runtime writes through the same code (caps_shared.c):
 * control.action, export.blind, export.restored, record.end. */
extern const char *const sl_caps_f_control[];
extern const char *const sl_caps_f_blind[];
extern const char *const sl_caps_f_restored[];
extern const char *const sl_caps_f_end[];
/* The rows of those classes, and record.begin with the runtime's own begin_fields, for the end of
 * a runtime's class table. */
/* clang-format off */
#define SL_CAPS_SHARED_CLASSES(begin_fields)                                                                 \
	{"control.action", SL_OBS_SUPERVISOR, sl_caps_f_control, NULL, 0},                                   \
	{"export.blind", SL_OBS_SUPERVISOR, sl_caps_f_blind,                                                 \
	 "no ACK from the collector for the risk class's max blind", 0},                                     \
	{"export.restored", SL_OBS_SUPERVISOR, sl_caps_f_restored, NULL, 0},                                 \
	{"record.begin", SL_OBS_SUPERVISOR, begin_fields, NULL, 0},                                          \
	{"record.end", SL_OBS_SUPERVISOR, sl_caps_f_end, NULL, 0}
/* clang-format on */

extern const struct sl_runtime_caps sl_caps_native;
extern const struct sl_runtime_caps sl_caps_gvisor;

/* The table for a runtime name, or NULL. */
const struct sl_runtime_caps *sl_caps_find(const char *runtime);
/* The names of every runtime with a table, NULL-terminated. */
extern const char *const sl_caps_runtimes[];

/* The static answer for one behaviour on one runtime. */
enum sl_check_verdict {
	SL_CHECK_COVERED = 0,
	SL_CHECK_UNCOVERED,   /* required and not emitted: a gap */
	SL_CHECK_UNSUPPORTED, /* not emitted, and declared unsupported with a reason */
	SL_CHECK_OPTIONAL,    /* not emitted, but the behaviour is not required */
};
const char *sl_check_verdict_name(int v);

struct sl_check_row {
	int verdict;
	char detail[384]; /* what is missing, or the declared reason, or the capability note */
};

/* Check behaviour b of contract c against runtime caps rt. Fills *row. */
void sl_contract_check_one(const struct sl_contract *c, const struct sl_contract_behaviour *b,
			   const struct sl_runtime_caps *rt, struct sl_check_row *row);
/* 1 if a behaviour's line carries field (a member, or a dotted member of a member) per the table. */
int sl_caps_has_field(const struct sl_cap_class *cc, const char *field);
#endif
