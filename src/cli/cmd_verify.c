/* sightline verify [--json] FILE: check a record's hash chain (docs/record.md).
 * Exit 0: intact. 1: tampered, truncated or malformed (the first problem is printed on stdout).
 * 2: usage or I/O error (on stderr). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "record/record.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sightline verify [--json] FILE\n"
		"  Check the record FILE: every line's hash, the chain, the seq order, the end line.\n"
		"  Prints 'ok N events, head HASH' (exit 0) or the first problem (exit 1).\n"
		"  --json  print {\"ok\",\"events\",\"head\",\"bad_seq\",\"reason\",\"detail\"} instead\n");
}

static int print_json(const struct sl_verify_result *res)
{
	bool ok = res->reason == SL_VERIFY_OK;
	struct sl_json j;
	sl_json_init(&j);
	sl_json_obj_open(&j, NULL);
	sl_json_bool(&j, "ok", ok);
	sl_json_uint(&j, "events", res->events);
	sl_json_str(&j, "head", res->head, 0);
	if (ok)
		sl_json_null(&j, "bad_seq");
	else
		sl_json_uint(&j, "bad_seq", res->bad_seq);
	sl_json_str(&j, "reason", sl_verify_reason_name(res->reason), 0);
	if (ok)
		sl_json_null(&j, "detail");
	else
		sl_json_str(&j, "detail", res->detail, 0);
	sl_json_obj_close(&j);
	int rc = sl_json_error(&j);
	if (rc == 0)
		printf("%s\n", j.buf);
	sl_json_free(&j);
	return rc;
}

int sl_cmd_verify(int argc, char **argv)
{
	bool json = false, opts_done = false;
	const char *file = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!opts_done && !strcmp(a, "--")) {
			opts_done = true;
		} else if (!opts_done && !strcmp(a, "--json")) {
			json = true;
		} else if (!opts_done && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
			usage(stdout);
			return 0;
		} else if (!opts_done && a[0] == '-' && a[1]) {
			fprintf(stderr, "sightline verify: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		} else if (file) {
			fprintf(stderr, "sightline verify: one FILE only\n");
			usage(stderr);
			return 2;
		} else {
			file = a;
		}
	}
	if (!file) {
		usage(stderr);
		return 2;
	}

	struct sl_verify_result res;
	int rc = sl_record_verify(file, &res);
	if (rc < 0) {
		fprintf(stderr, "sightline verify: %s: %s\n", file, strerror(-rc));
		return 2;
	}
	if (json) {
		int jr = print_json(&res);
		if (jr < 0) {
			fprintf(stderr, "sightline verify: %s\n", strerror(-jr));
			return 2;
		}
	} else if (rc == 0) {
		printf("ok %" PRIu64 " events, head %s\n", res.events, res.head);
	} else {
		printf("%s: bad seq %" PRIu64 ": %s (%s)\n", file, res.bad_seq,
		       sl_verify_reason_name(res.reason), res.detail);
	}
	if (fflush(stdout) != 0) {
		perror("sightline verify: stdout");
		return 2;
	}
	return rc == 0 ? 0 : 1;
}
