/* sightline export RECORD: deliver (again) a finished record to the collector. The record is the
 * buffer of last resort: whatever a run could not get acknowledged is shipped from here, and the
 * collector keeps each event once (it deduplicates by sandbox and seq). The identity sent is the
 * one the supervisor stamped on the record's first line at launch. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/util.h"
#include "export/exporter.h"

static const char *str(json_object *o, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
												       : NULL;
}

int sl_cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {{"collector", required_argument, 0, 'c'},
					     {"collector-secret", required_argument, 0, 's'},
					     {"risk-class", required_argument, 0, 'r'},
					     {"timeout", required_argument, 0, 't'},
					     {0, 0, 0, 0}};
	const char *addr = "unix:/run/sightline/collector.sock", *secret = "/var/lib/sightline/collector.secret";
	const char *risk = NULL; /* default: the record's manifest.risk_class, else medium */
	unsigned timeout_s = 60;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'c')
			addr = optarg;
		else if (c == 's')
			secret = optarg;
		else if (c == 'r')
			risk = optarg;
		else if (c == 't')
			timeout_s = (unsigned)strtoul(optarg, NULL, 10);
		else
			return 2;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: sightline export [--collector ADDR] [--collector-secret FILE] [--risk-class C] [--timeout S]\n"
				"                        RECORD   (risk class: the record's, else medium)\n");
		return 2;
	}
	const char *path = argv[optind];
	char *text = NULL;
	FILE *f = fopen(path, "re");
	size_t cap = 0;
	if (!f || getline(&text, &cap, f) <= 0) {
		fprintf(stderr, "sightline export: cannot read %s\n", path);
		if (f)
			fclose(f);
		free(text);
		return 1;
	}
	fclose(f);
	json_object *first = json_tokener_parse(text);
	json_object *id = NULL;
	if (!first || !json_object_object_get_ex(first, "identity", &id) || !str(first, "sandbox_id")) {
		fprintf(stderr, "sightline export: %s: first line is not a record.begin\n", path);
		json_object_put(first);
		free(text);
		return 1;
	}
	json_object *man;
	const char *rec_risk = json_object_object_get_ex(first, "manifest", &man) ? str(man, "risk_class") : NULL;
	if (!risk)
		risk = rec_risk ? rec_risk : "medium";
	if (strcmp(risk, "high") && strcmp(risk, "medium") && strcmp(risk, "low")) {
		fprintf(stderr, "sightline export: risk class '%s' (from %s) is not high, medium or low\n", risk,
			rec_risk == risk ? path : "--risk-class");
		json_object_put(first);
		free(text);
		return 1;
	}
	uint8_t master[SL_FRAME_MASTER_LEN];
	FILE *sf = fopen(secret, "re");
	size_t got = sf ? fread(master, 1, sizeof(master), sf) : 0;
	if (sf)
		fclose(sf);
	struct sl_exporter_cfg cfg = {.addr = addr,
				      .record_path = path,
				      .sandbox_id = str(first, "sandbox_id"),
				      .id = {str(id, "tenant"), str(id, "agent"), str(id, "task"), str(id, "version"),
					     str(id, "credential_ref")},
				      .risk_class = risk,
				      .control = "none",
				      /* Each line's hash and link is checked as it is read for sending (no
				       * pass of its own): what follows a break is not shipped, and the
				       * collector re-checks everything anyway. */
				      .check_chain = true};
	int r = got == sizeof(master) ? sl_frame_derive_key(master, cfg.sandbox_id, cfg.key) : -EINVAL;
	explicit_bzero(master, sizeof(master));
	struct sl_exporter *e = NULL;
	if (r == 0)
		r = sl_exporter_start(&cfg, &e);
	explicit_bzero(cfg.key, sizeof(cfg.key));
	if (r < 0) {
		fprintf(stderr, "sightline export: %s\n", strerror(-r));
		json_object_put(first);
		free(text);
		return 1;
	}
	struct sl_exporter_stats st;
	r = sl_exporter_finish(e, timeout_s * 1000u, &st);
	printf("%llu of %llu events acknowledged by %s\n", (unsigned long long)st.acked, (unsigned long long)st.recorded,
	       addr);
	if (r == -EBADMSG) {
		/* The export stopped at a bad line; the whole verifier says exactly what is wrong. */
		struct sl_verify_result vr;
		int vr_rc = sl_record_verify(path, &vr);
		if (vr_rc != 0 && vr.reason != SL_VERIFY_TRUNCATED)
			fprintf(stderr, "sightline export: %s does not verify: %s (the %llu events before it were delivered)\n",
				path, vr.detail, (unsigned long long)st.acked);
		else
			fprintf(stderr, "sightline export: the collector refused seq %llu of %s: %s\n",
				(unsigned long long)st.acked + 1, path, st.error_msg);
	}
	json_object_put(first);
	free(text);
	return r == 0 ? 0 : 1;
}
