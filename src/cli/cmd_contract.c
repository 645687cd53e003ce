/* sightline contract check CONTRACT --runtime R [--runtime R2]... [--json]: the static answer, per
 * behaviour and runtime, whether the runtime's sensors can emit it with the contract's fields.
 * sightline contract caps --runtime R [--json]: the capability table itself (what the static
 * answer is made from), so a test can hold it against a real record. */
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
	fprintf(f, "usage: sightline contract check CONTRACT --runtime native|gvisor [--runtime ...] [--json]\n"
		   "       sightline contract caps --runtime native|gvisor [--json]\n");
}

/* The capability table of one runtime: per class the observation point, the members, the note. */
static int caps(int argc, char **argv)
{
	const struct sl_runtime_caps *rt = NULL;
	bool json = false;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--runtime") && i + 1 < argc && !rt) {
			rt = sl_caps_find(argv[++i]);
			if (!rt) {
				fprintf(stderr, "sightline contract caps: unknown runtime '%s' (native, gvisor)\n",
					argv[i]);
				return 2;
			}
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!rt) {
		usage(stderr);
		return 2;
	}
	if (!json) {
		printf("runtime %s, sensor %s %s, record observer %s\n", rt->runtime, rt->sensor,
		       rt->sensor_version, rt->record_observer);
		for (size_t i = 0; i < rt->n_classes; i++) {
			const struct sl_cap_class *cc = &rt->classes[i];
			printf("%-16s %-14s", cc->event, sl_observer_name(cc->observer));
			for (size_t k = 0; cc->fields[k]; k++)
				printf("%s%s", k ? "," : " ", cc->fields[k]);
			if (cc->note)
				printf("  (%s)", cc->note);
			printf("\n");
		}
		return 0;
	}
	struct sl_json j;
	sl_json_init(&j);
	sl_json_obj_open(&j, NULL);
	sl_json_str(&j, "runtime", rt->runtime, 0);
	sl_json_str(&j, "sensor", rt->sensor, 0);
	sl_json_str(&j, "sensor_version", rt->sensor_version, 0);
	sl_json_str(&j, "record_observer", rt->record_observer, 0);
	sl_json_arr_open(&j, "classes");
	for (size_t i = 0; i < rt->n_classes; i++) {
		const struct sl_cap_class *cc = &rt->classes[i];
		sl_json_obj_open(&j, NULL);
		sl_json_str(&j, "event", cc->event, 0);
		sl_json_str(&j, "observer", sl_observer_name(cc->observer), 0);
		sl_json_arr_open(&j, "fields");
		for (size_t k = 0; cc->fields[k]; k++)
			sl_json_str(&j, NULL, cc->fields[k], 0);
		sl_json_arr_close(&j);
		if (cc->note)
			sl_json_str(&j, "note", cc->note, 0);
		sl_json_arr_open(&j, "not_after");
		for (int a = 0; a < SL_ACT_COUNT; a++)
			if (cc->not_after & (1u << a))
				sl_json_str(&j, NULL, sl_action_name(a), 0);
		sl_json_arr_close(&j);
		sl_json_obj_close(&j);
	}
	sl_json_arr_close(&j);
	sl_json_obj_close(&j);
	int r = sl_json_error(&j);
	if (r == 0)
		printf("%s\n", j.buf);
	sl_json_free(&j);
	return r == 0 ? 0 : 1;
}

int sl_cmd_contract(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "caps"))
		return caps(argc, argv);
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
