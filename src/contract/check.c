/* The static check: can this runtime and its sensors emit each behaviour of a contract, from the
 * contract's observation point, with every required field? Answered from the runtime's capability
 * table only; the validator proves it dynamically. */
#include <stdio.h>
#include <string.h>

#include "contract/caps.h"

const char *const sl_caps_runtimes[] = {"native", "gvisor", NULL};

const struct sl_runtime_caps *sl_caps_find(const char *runtime)
{
	if (!strcmp(runtime, "native"))
		return &sl_caps_native;
	if (!strcmp(runtime, "gvisor"))
		return &sl_caps_gvisor;
	return NULL;
}

const char *sl_check_verdict_name(int v)
{
	switch (v) {
	case SL_CHECK_COVERED:
		return "covered";
	case SL_CHECK_UNCOVERED:
		return "GAP";
	case SL_CHECK_UNSUPPORTED:
		return "unsupported";
	default:
		return "optional-gap";
	}
}

/* Members every line of every class carries (docs/events.md, "Common fields"). */
static const char *const common_fields[] = {"seq",
					    "sandbox_id",
					    "time",
					    "class",
					    "observer",
					    "identity",
					    "identity.tenant",
					    "identity.agent",
					    "identity.task",
					    "identity.version",
					    "identity.credential_ref",
					    "prev_hash",
					    "hash",
					    NULL};

int sl_caps_has_field(const struct sl_cap_class *cc, const char *field)
{
	for (size_t i = 0; common_fields[i]; i++)
		if (!strcmp(common_fields[i], field))
			return 1;
	for (size_t i = 0; cc->fields[i]; i++)
		if (!strcmp(cc->fields[i], field))
			return 1;
	return 0;
}

void sl_contract_check_one(const struct sl_contract *c, const struct sl_contract_behaviour *b,
			   const struct sl_runtime_caps *rt, struct sl_check_row *row)
{
	const struct sl_cap_class *cc = NULL, *other_obs = NULL;
	for (size_t i = 0; i < rt->n_classes; i++) {
		if (strcmp(rt->classes[i].event, b->event) != 0)
			continue;
		if (rt->classes[i].observer == b->observer)
			cc = &rt->classes[i];
		else
			other_obs = &rt->classes[i];
	}
	char why[384] = "";
	if (!cc && other_obs)
		snprintf(why, sizeof(why), "%s emits %s only from the %s, not the %s", rt->runtime, b->event,
			 sl_observer_name(other_obs->observer), sl_observer_name(b->observer));
	else if (!cc)
		snprintf(why, sizeof(why), "%s does not emit %s", rt->runtime, b->event);
	else if (cc->not_after & (1u << b->action))
		snprintf(why, sizeof(why), "%s emits %s but not after %s (%s)", rt->runtime, b->event,
			 sl_action_name(b->action), cc->note ? cc->note : "");
	else {
		size_t l = 0;
		for (size_t k = 0; k < b->n_fields; k++)
			if (!sl_caps_has_field(cc, b->fields[k]))
				l += (size_t)snprintf(why + l, l < sizeof(why) ? sizeof(why) - l : 0, "%s%s",
						      l ? ", " : "missing fields: ", b->fields[k]);
	}
	if (!why[0]) {
		row->verdict = SL_CHECK_COVERED;
		snprintf(row->detail, sizeof(row->detail), "%s", cc->note ? cc->note : "");
		return;
	}
	const struct sl_contract_unsupported *u = sl_contract_unsupported_for(c, b->id, rt->runtime);
	if (u) {
		row->verdict = SL_CHECK_UNSUPPORTED;
		snprintf(row->detail, sizeof(row->detail), "declared unsupported: %s (%s)", u->reason, why);
	} else {
		row->verdict = b->required ? SL_CHECK_UNCOVERED : SL_CHECK_OPTIONAL;
		snprintf(row->detail, sizeof(row->detail), "%s", why);
	}
}
