/* libFuzzer target for the policy parser: any input must give 0 or a negative errno with a
 * NUL-terminated "name:..." message, never a crash, a leak, or a change to the policy on failure. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_policy p;
	char err[256];
	if (sl_policy_default(&p) < 0)
		return 0;
	/* Copy into an exactly sized buffer so ASan catches any read past the input. */
	char *text = malloc(size ? size : 1);
	if (!text) {
		sl_policy_free(&p);
		return 0;
	}
	if (size)
		memcpy(text, data, size);
	int r = sl_policy_parse(text, size, "fuzz.yaml", &p, err, sizeof(err));
	if (r < 0) {
		if (memchr(err, '\0', sizeof(err)) == NULL || strncmp(err, "fuzz.yaml:", 10) != 0)
			abort();
		/* A failed parse leaves the defaults in place. */
		if (p.n_ro != 6 || !p.workspace_mount || strcmp(p.workspace_mount, "/workspace") ||
		    p.n_env != 4)
			abort();
	} else {
		/* Whatever parsed must satisfy the documented invariants. */
		if (p.n_ro > SL_POLICY_MAX_PATHS || p.n_canaries > SL_POLICY_MAX_PATHS ||
		    p.n_env > SL_POLICY_MAX_PATHS || p.n_tcp_connect > SL_POLICY_MAX_PORTS)
			abort();
		for (size_t i = 0; i < p.n_ro; i++)
			if (p.ro_paths[i][0] != '/' || !strcmp(p.ro_paths[i], "/") ||
			    strstr(p.ro_paths[i], "//") || strstr(p.ro_paths[i], "/../") ||
			    strstr(p.ro_paths[i], "/./"))
				abort();
		for (size_t i = 0; i < p.n_tcp_connect; i++)
			if (p.tcp_connect[i] == 0)
				abort();
		for (size_t i = 0; i < p.n_env; i++)
			if (!strchr(p.env[i], '=') || !strncmp(p.env[i], "SIGHTLINE_", 10))
				abort();
		/* A second parse of the same text on top of the result must also succeed. */
		if (sl_policy_parse(text, size, "fuzz.yaml", &p, err, sizeof(err)) != 0)
			abort();
	}
	sl_policy_free(&p);
	free(text);
	return 0;
}
