/* sightline contract check CONTRACT --runtime R [--runtime R2]... [--json]: the static answer, per
 * behaviour and runtime, whether the runtime's sensors can emit it with the contract's fields. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "contract/caps.h"
#include "contract/contract.h"

#define MAX_RT 8

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: sightline contract check CONTRACT --runtime native|gvisor [--runtime ...] [--json]\n");
}

int sl_cmd_contract(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "check") != 0) {
		usage(argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? stdout : stderr);
		return argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? 0 : 2;
	}
	static const struct option opts[] = {{"runtime", required_argument, 0, 'r'},
					     {"json", no_argument, 0, 'j'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	const struct sl_runtime_caps *rts[MAX_RT];
	size_t n_rt = 0;
	bool json = false;
	int c;
	optind = 1;
	argc--;
	argv++;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r': {
			const struct sl_runtime_caps *rt = sl_caps_find(optarg);
			if (!rt) {
				fprintf(stderr,
					"sightline contract check: unknown runtime '%s' (native, gvisor)\n",
					optarg);
				return 2;
			}
			if (n_rt == MAX_RT) {
				fprintf(stderr, "sightline contract check: at most %d --runtime\n", MAX_RT);
				return 2;
			}
			rts[n_rt++] = rt;
			break;
		}
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || !n_rt) {
		usage(stderr);
		return 2;
	}
	struct sl_contract ct;
	char err[512];
	if (sl_contract_load(argv[optind], &ct, err, sizeof(err)) < 0) {
		fprintf(stderr, "sightline contract check: %s\n", err);
		return 2;
	}
	static struct sl_check_row rows[SL_CONTRACT_MAX_BEHAVIOURS][MAX_RT];
	size_t gaps = 0;
	for (size_t i = 0; i < ct.n_b; i++)
		for (size_t k = 0; k < n_rt; k++) {
			sl_contract_check_one(&ct, &ct.b[i], rts[k], &rows[i][k]);
			gaps += rows[i][k].verdict == SL_CHECK_UNCOVERED;
		}
	if (json) {
		struct sl_json j;
		sl_json_init(&j);
		sl_json_obj_open(&j, NULL);
		sl_json_str(&j, "contract", ct.name, 0);
		sl_json_arr_open(&j, "runtimes");
		for (size_t k = 0; k < n_rt; k++)
			sl_json_str(&j, NULL, rts[k]->runtime, 0);
		sl_json_arr_close(&j);
		sl_json_bool(&j, "covered", gaps == 0);
		sl_json_uint(&j, "gaps", gaps);
		sl_json_arr_open(&j, "behaviours");
		for (size_t i = 0; i < ct.n_b; i++) {
			sl_json_obj_open(&j, NULL);
			sl_json_str(&j, "id", ct.b[i].id, 0);
			sl_json_str(&j, "event", ct.b[i].event, 0);
			sl_json_str(&j, "observer", sl_observer_name(ct.b[i].observer), 0);
			sl_json_bool(&j, "required", ct.b[i].required);
			sl_json_obj_open(&j, "runtimes");
			for (size_t k = 0; k < n_rt; k++) {
				sl_json_obj_open(&j, rts[k]->runtime);
				const char *v = rows[i][k].verdict == SL_CHECK_COVERED	     ? "covered"
						: rows[i][k].verdict == SL_CHECK_UNCOVERED   ? "gap"
						: rows[i][k].verdict == SL_CHECK_UNSUPPORTED ? "unsupported"
											     : "optional-gap";
				sl_json_str(&j, "verdict", v, 0);
				sl_json_str(&j, "detail", rows[i][k].detail, 0);
				sl_json_obj_close(&j);
			}
			sl_json_obj_close(&j);
			sl_json_obj_close(&j);
		}
		sl_json_arr_close(&j);
		sl_json_arr_open(&j, "unsupported");
		for (size_t i = 0; i < ct.n_u; i++) {
			sl_json_obj_open(&j, NULL);
			sl_json_str(&j, "op", ct.u[i].op, 0);
			sl_json_str(&j, "reason", ct.u[i].reason, 0);
			sl_json_obj_close(&j);
		}
		sl_json_arr_close(&j);
		sl_json_obj_close(&j);
		if (!sl_json_error(&j))
			printf("%s\n", j.buf);
		sl_json_free(&j);
	} else {
		printf("contract %s\n\n%-20s %-16s %-14s", ct.name, "behaviour", "event", "observer");
		for (size_t k = 0; k < n_rt; k++)
			printf(" %-12s", rts[k]->runtime);
		printf("\n");
		for (size_t i = 0; i < ct.n_b; i++) {
			printf("%-20s %-16s %-14s", ct.b[i].id, ct.b[i].event,
			       sl_observer_name(ct.b[i].observer));
			for (size_t k = 0; k < n_rt; k++)
				printf(" %-12s", sl_check_verdict_name(rows[i][k].verdict));
			printf("\n");
		}
		bool any = false;
		for (size_t i = 0; i < ct.n_b; i++)
			for (size_t k = 0; k < n_rt; k++)
				if (rows[i][k].verdict != SL_CHECK_COVERED) {
					if (!any)
						printf("\n");
					any = true;
					printf("  %s on %s: %s\n", ct.b[i].id, rts[k]->runtime,
					       rows[i][k].detail);
				}
		if (ct.n_u) {
			printf("\ndeclared unsupported:\n");
			for (size_t i = 0; i < ct.n_u; i++)
				printf("  %s: %s\n", ct.u[i].op, ct.u[i].reason);
		}
		printf("\n%s\n",
		       gaps
			   ? "NOT COVERED: a required behaviour cannot be emitted and is not declared "
			     "unsupported"
			   : "covered: every required behaviour can be emitted (or is declared unsupported)");
	}
	sl_contract_free(&ct);
	return gaps ? 1 : 0;
}
