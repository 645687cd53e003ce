/* sightline validate CONTRACT --runtime native [...]: the acceptance test (docs/contract.md), its
 * table, JSON and JUnit reports, and the acceptance stored in the collector's database;
 * sightline validate --status: whether the current runtime and sensor versions have a passing
 * acceptance. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "collector/store.h"
#include "common/json.h"
#include "common/util.h"
#include "contract/caps.h"
#include "contract/validate.h"

#define DEFAULT_DB "/var/lib/sightline/collector.db"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: sightline validate CONTRACT --runtime native|gvisor [--risk-class medium] [--json FILE] "
	    "[--junit FILE]\n"
	    "                          [--db FILE] [--no-store] [--keep] [--quiet]\n"
	    "                          [--policy-extra FILE] [--collectd-flag FLAG]... [--listen-port N]\n"
	    "       sightline validate --status [--runtime native|gvisor] [--contract NAME] [--db FILE] [--json]\n");
}

/* Interrupted: stop what the validation started (the collector, the workload), then die of the
 * same signal. */
static void on_signal(int sig)
{
	sl_validate_abort();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void progress(const char *line)
{
	fprintf(stderr, "validate: %s\n", line);
}

static int write_out(const char *path, const char *text)
{
	if (!strcmp(path, "-")) {
		fputs(text, stdout);
		fputc('\n', stdout);
		return 0;
	}
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	fputc('\n', f);
	return fclose(f) == 0 ? 0 : -1;
}

struct status_ctx {
	const char *runtime;
	struct sl_store_acceptance a;
	char contract[128], rv[256], sv[128];
	bool found;
};

static int status_cb(void *arg, const struct sl_store_acceptance *a)
{
	struct status_ctx *s = arg;
	if (!a->runtime || strcmp(a->runtime, s->runtime) != 0)
		return 0;
	s->a = *a;
	snprintf(s->contract, sizeof(s->contract), "%s", a->contract ? a->contract : "");
	snprintf(s->rv, sizeof(s->rv), "%s", a->runtime_version ? a->runtime_version : "");
	snprintf(s->sv, sizeof(s->sv), "%s", a->sensor_version ? a->sensor_version : "");
	s->found = true;
	return 1; /* newest first: the first match is the one */
}

static int status(const char *db, const char *runtime, const char *contract, bool json)
{
	const struct sl_runtime_caps *rt = sl_caps_find(runtime);
	if (!rt) {
		fprintf(stderr, "sightline validate: unknown runtime '%s'\n", runtime);
		return 2;
	}
	char cur_rv[256] = "unknown";
	rt->runtime_version(cur_rv, sizeof(cur_rv));
	if (access(db, F_OK) < 0) {
		/* Asking must not create a database. */
		if (json)
			printf("{\"status\":\"none\"}\n");
		else
			printf("none: no database at %s\n", db);
		return 1;
	}
	struct sl_store *st;
	if (sl_store_open(db, &st) < 0) {
		fprintf(stderr, "sightline validate --status: %s: %s\n", db, sl_store_errmsg(NULL));
		return 1;
	}
	struct status_ctx s = {.runtime = runtime};
	int r = sl_store_each_acceptance(st, contract, status_cb, &s);
	sl_store_close(st);
	if (r < 0) {
		fprintf(stderr, "sightline validate --status: cannot read acceptances from %s\n", db);
		return 1;
	}
	const char *verdict = "none";
	if (s.found && (strcmp(s.rv, cur_rv) != 0 || strcmp(s.sv, rt->sensor_version) != 0))
		verdict = "stale";
	else if (s.found)
		verdict = s.a.passed ? "pass" : "fail";
	if (json) {
		struct sl_json j;
		sl_json_init(&j);
		sl_json_obj_open(&j, NULL);
		sl_json_str(&j, "status", verdict, 0);
		sl_json_str(&j, "runtime", runtime, 0);
		sl_json_str(&j, "current_runtime_version", cur_rv, 0);
		sl_json_str(&j, "current_sensor_version", rt->sensor_version, 0);
		if (s.found) {
			sl_json_str(&j, "contract", s.contract, 0);
			sl_json_bool(&j, "passed", s.a.passed);
			sl_json_int(&j, "at_ns", s.a.at_ns);
			sl_json_str(&j, "runtime_version", s.rv, 0);
			sl_json_str(&j, "sensor_version", s.sv, 0);
		}
		sl_json_obj_close(&j);
		if (!sl_json_error(&j))
			printf("%s\n", j.buf);
		sl_json_free(&j);
	} else if (!s.found) {
		printf("none: no acceptance for runtime %s%s%s in %s\n", runtime,
		       contract ? " and contract " : "", contract ? contract : "", db);
	} else {
		char when[32];
		time_t t = (time_t)(s.a.at_ns / 1000000000);
		struct tm tm;
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
		printf("%s: contract %s on %s, %s at %s\n", verdict, s.contract, runtime,
		       s.a.passed ? "passed" : "failed", when);
		printf("  accepted on: runtime %s, sensor %s\n", s.rv, s.sv);
		printf("  current:     runtime %s, sensor %s\n", cur_rv, rt->sensor_version);
		if (!strcmp(verdict, "stale"))
			printf("  the versions changed since: re-run sightline validate\n");
	}
	return !strcmp(verdict, "pass") ? 0 : 1;
}

/* validate --status [--runtime R] [--contract NAME] [--db FILE] [--json] */
static int status_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"status", no_argument, 0, 's'},	     {"runtime", required_argument, 0, 'r'},
	    {"contract", required_argument, 0, 'c'}, {"db", required_argument, 0, 'd'},
	    {"json", no_argument, 0, 'j'},	     {0, 0, 0, 0}};
	const char *runtime = "native", *contract = NULL, *db = DEFAULT_DB;
	bool json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			break;
		case 'r':
			runtime = optarg;
			break;
		case 'c':
			contract = optarg;
			break;
		case 'd':
			db = optarg;
			break;
		case 'j':
			json = true;
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	return status(db, runtime, contract, json);
}

int sl_cmd_validate(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--status"))
			return status_main(argc, argv);
	enum {
		O_RT = 256,
		O_JSON,
		O_JUNIT,
		O_DB,
		O_NOSTORE,
		O_KEEP,
		O_QUIET,
		O_STATUS,
		O_PEXTRA,
		O_CFLAG,
		O_PORT,
		O_RISK,
		O_CONTRACT
	};
	static const struct option opts[] = {{"runtime", required_argument, 0, O_RT},
					     {"json", required_argument, 0, O_JSON},
					     {"junit", required_argument, 0, O_JUNIT},
					     {"db", required_argument, 0, O_DB},
					     {"no-store", no_argument, 0, O_NOSTORE},
					     {"keep", no_argument, 0, O_KEEP},
					     {"quiet", no_argument, 0, O_QUIET},
					     {"policy-extra", required_argument, 0, O_PEXTRA},
					     {"collectd-flag", required_argument, 0, O_CFLAG},
					     {"listen-port", required_argument, 0, O_PORT},
					     {"risk-class", required_argument, 0, O_RISK},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	struct sl_validate_cfg cfg = {.risk_class = "medium", .progress = progress};
	const char *runtime = NULL, *json_out = NULL, *junit_out = NULL, *db = DEFAULT_DB;
	bool store = true;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_RT:
			if (runtime) {
				fprintf(stderr, "sightline validate: one --runtime per run\n");
				return 2;
			}
			runtime = optarg;
			break;
		case O_JSON:
			json_out = optarg;
			break;
		case O_JUNIT:
			junit_out = optarg;
			break;
		case O_DB:
			db = optarg;
			break;
		case O_NOSTORE:
			store = false;
			break;
		case O_KEEP:
			cfg.keep = true;
			break;
		case O_QUIET:
			cfg.progress = NULL;
			break;
		case O_PEXTRA:
			cfg.policy_extra = optarg;
			break;
		case O_CFLAG:
			if (cfg.n_collectd_flags == SL_VALIDATE_MAX_FLAGS) {
				fprintf(stderr, "sightline validate: at most %d --collectd-flag\n",
					SL_VALIDATE_MAX_FLAGS);
				return 2;
			}
			cfg.collectd_flags[cfg.n_collectd_flags++] = optarg;
			break;
		case O_PORT: {
			char *end;
			unsigned long p = strtoul(optarg, &end, 10);
			if (*end || p < 1024 || p > 65535) {
				fprintf(stderr, "sightline validate: --listen-port takes 1024..65535\n");
				return 2;
			}
			cfg.listen_port = (unsigned)p;
			break;
		}
		case O_RISK:
			if (strcmp(optarg, "high") && strcmp(optarg, "medium") && strcmp(optarg, "low")) {
				fprintf(stderr, "sightline validate: --risk-class high|medium|low\n");
				return 2;
			}
			cfg.risk_class = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || !runtime) {
		usage(stderr);
		return 2;
	}
	cfg.rt = sl_caps_find(runtime);
	if (!cfg.rt) {
		fprintf(stderr, "sightline validate: unknown runtime '%s' (native, gvisor)\n", runtime);
		return 2;
	}
	struct sl_contract ct;
	char err[512];
	if (sl_contract_load(argv[optind], &ct, err, sizeof(err)) < 0) {
		fprintf(stderr, "sightline validate: %s\n", err);
		return 2;
	}
	cfg.contract = &ct;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	static struct sl_validate_result res;
	int r = sl_validate_run(&cfg, &res, err, sizeof(err));
	if (r < 0) {
		if (res.workdir[0])
			fprintf(stderr, "sightline validate: %s (work directory %s kept)\n", err, res.workdir);
		else
			fprintf(stderr, "sightline validate: %s\n", err);
		sl_contract_free(&ct);
		return 3;
	}
	printf("%-9s %-21s %-10s %-60s %s\n", "check", "subject", "verdict", "expected", "observed");
	for (size_t i = 0; i < res.n_rows; i++) {
		const struct sl_vrow *w = &res.rows[i];
		char chk[48];
		snprintf(chk, sizeof(chk), "%s%s", w->control ? "*" : "", w->check);
		printf("%-9s %-21s %-10s %-60s %s\n", chk, w->subject, sl_vverdict_name(w->verdict),
		       w->expected, w->observed);
	}
	printf("\n(* control check) contract %s on %s (%s, sensor %s), sandbox %s\n", ct.name, runtime,
	       res.runtime_version, cfg.rt->sensor_version, res.sandbox_id);
	if (cfg.keep || !res.passed)
		printf("evidence kept in %s\n", res.workdir);
	printf("controls: %s; visibility: %s => %s\n", res.controls_passed ? "passed" : "FAILED",
	       res.visibility_passed ? "passed" : "FAILED", res.passed ? "ACCEPTED" : "NOT ACCEPTED");
	char *js = sl_validate_json(&cfg, &res);
	int st_rc = 0;
	if (json_out && (!js || write_out(json_out, js) < 0)) {
		fprintf(stderr, "sightline validate: cannot write %s\n", json_out);
		st_rc = 1;
	}
	if (junit_out) {
		char *xml = sl_validate_junit(&cfg, &res);
		if (!xml || write_out(junit_out, xml) < 0) {
			fprintf(stderr, "sightline validate: cannot write %s\n", junit_out);
			st_rc = 1;
		}
		free(xml);
	}
	if (store) {
		/* The acceptance is tied to the versions it ran on: an upgrade makes it stale. */
		struct sl_store *st;
		char dbdir[4096];
		snprintf(dbdir, sizeof(dbdir), "%s", db);
		char *slash = strrchr(dbdir, '/');
		if (slash && slash != dbdir) {
			*slash = '\0';
			sl_mkdir_p(dbdir, 0700);
		}
		if (sl_store_open(db, &st) < 0) {
			fprintf(stderr, "sightline validate: store the acceptance in %s: %s\n", db,
				sl_store_errmsg(NULL));
			st_rc = 1;
		} else {
			struct sl_store_acceptance a = {.contract = ct.name,
							.runtime = runtime,
							.runtime_version = res.runtime_version,
							.sensor_version = cfg.rt->sensor_version,
							.passed = res.passed,
							.at_ns = sl_now_realtime_ns(),
							.report = js};
			int64_t id = sl_store_acceptance_add(st, &a);
			if (id < 0) {
				fprintf(stderr, "sightline validate: store the acceptance in %s: %s\n", db,
					sl_store_errmsg(st));
				st_rc = 1;
			} else
				printf("acceptance #%lld stored in %s\n", (long long)id, db);
			sl_store_close(st);
		}
	}
	free(js);
	sl_contract_free(&ct);
	if (!res.passed)
		return 1;
	return st_rc;
}
