/* libFuzzer target for the contract parser: any input must give 0 or a negative errno with a
 * NUL-terminated "name:..." message, never a crash or a leak; what parses satisfies the documented
 * invariants and parses again to the same result. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	if (size)
		memcpy(text, data, size);
	struct sl_contract c;
	char err[512];
	int r = sl_contract_parse(text, size, "fuzz.yaml", &c, err, sizeof(err));
	if (r < 0) {
		if (!memchr(err, '\0', sizeof(err)) || strncmp(err, "fuzz.yaml:", 10) != 0)
			abort();
		if (c.n_b || c.n_u || c.name)
			abort(); /* a failed parse leaves nothing */
	} else {
		if (!c.name || !c.n_b || c.n_b > SL_CONTRACT_MAX_BEHAVIOURS ||
		    c.n_u > SL_CONTRACT_MAX_UNSUPPORTED)
			abort();
		for (size_t i = 0; i < c.n_b; i++) {
			const struct sl_contract_behaviour *b = &c.b[i];
			if (!b->id || !b->event || b->n_fields > SL_CONTRACT_MAX_FIELDS ||
			    !sl_observer_name(b->observer) || !sl_action_name(b->action) ||
			    b->max_delay_ms == 0 || b->max_delay_ms > 86400000)
				abort();
		}
		for (size_t i = 0; i < c.n_u; i++)
			if (!c.u[i].op || !c.u[i].reason)
				abort();
		struct sl_contract c2;
		if (sl_contract_parse(text, size, "fuzz.yaml", &c2, err, sizeof(err)) != 0 ||
		    c2.n_b != c.n_b || c2.n_u != c.n_u)
			abort();
		sl_contract_free(&c2);
	}
	sl_contract_free(&c);
	free(text);
	return 0;
}
