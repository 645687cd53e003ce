/* The validator's report for machines: JSON (one object) and JUnit XML (one testsuite, one
 * testcase per row; a FAIL or GAP row is a <failure>, an n/a row is <skipped>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "contract/validate.h"

char *sl_validate_json(const struct sl_validate_cfg *cfg, const struct sl_validate_result *res)
{
	struct sl_json j;
	sl_json_init(&j);
	sl_json_obj_open(&j, NULL);
	sl_json_str(&j, "contract", cfg->contract->name, 0);
	sl_json_str(&j, "runtime", cfg->rt->runtime, 0);
	sl_json_str(&j, "runtime_version", res->runtime_version, 0);
	sl_json_str(&j, "sensor_version", cfg->rt->sensor_version, 0);
	sl_json_str(&j, "risk_class", cfg->risk_class, 0);
	sl_json_bool(&j, "passed", res->passed);
	sl_json_bool(&j, "controls_passed", res->controls_passed);
	sl_json_bool(&j, "visibility_passed", res->visibility_passed);
	sl_json_str(&j, "sandbox_id", res->sandbox_id, 0);
	sl_json_obj_open(&j, "identity");
	sl_json_str(&j, "tenant", res->id.tenant, 0);
	sl_json_str(&j, "agent", res->id.agent, 0);
	sl_json_str(&j, "task", res->id.task, 0);
	sl_json_str(&j, "version", res->id.version, 0);
	sl_json_str(&j, "credential_ref", res->id.credential_ref, 0);
	sl_json_obj_close(&j);
	sl_json_str(&j, "canary_path", res->canary_path, 0);
	sl_json_uint(&j, "listener_port", res->port);
	sl_json_str(&j, "workdir", res->workdir, 0);
	sl_json_bool(&j, "workdir_kept", cfg->keep || !res->passed);
	sl_json_int(&j, "started_ns", res->started_ns);
	sl_json_int(&j, "ended_ns", res->ended_ns);
	sl_json_arr_open(&j, "rows");
	for (size_t i = 0; i < res->n_rows; i++) {
		const struct sl_vrow *r = &res->rows[i];
		sl_json_obj_open(&j, NULL);
		sl_json_str(&j, "check", r->check, 0);
		sl_json_str(&j, "subject", r->subject, 0);
		sl_json_str(&j, "kind", r->control ? "control" : "visibility", 0);
		sl_json_str(&j, "expected", r->expected, 0);
		sl_json_str(&j, "observed", r->observed, 0);
		sl_json_str(&j, "verdict",
			    r->verdict == SL_V_PASS  ? "pass"
			    : r->verdict == SL_V_GAP ? "gap"
			    : r->verdict == SL_V_NA  ? "n/a"
						     : "fail",
			    0);
		sl_json_obj_close(&j);
	}
	sl_json_arr_close(&j);
	sl_json_obj_close(&j);
	if (sl_json_error(&j)) {
		sl_json_free(&j);
		return NULL;
	}
	return j.buf; /* the caller frees it */
}

static void xml_esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n')
				fputc('?', f);
			else
				fputc(*s, f);
		}
	}
}

char *sl_validate_junit(const struct sl_validate_cfg *cfg, const struct sl_validate_result *res)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	size_t failures = 0, skipped = 0;
	for (size_t i = 0; i < res->n_rows; i++) {
		failures += res->rows[i].verdict == SL_V_FAIL || res->rows[i].verdict == SL_V_GAP;
		skipped += res->rows[i].verdict == SL_V_NA;
	}
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"", f);
	xml_esc(f, "sightline validate ");
	xml_esc(f, cfg->contract->name);
	fputs(" on ", f);
	xml_esc(f, cfg->rt->runtime);
	fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" time=\"%.3f\">\n",
		res->n_rows, failures, skipped, (double)(res->ended_ns - res->started_ns) / 1e9);
	fputs("<properties>\n<property name=\"runtime_version\" value=\"", f);
	xml_esc(f, res->runtime_version);
	fputs("\"/>\n<property name=\"sensor_version\" value=\"", f);
	xml_esc(f, cfg->rt->sensor_version);
	fputs("\"/>\n<property name=\"sandbox_id\" value=\"", f);
	xml_esc(f, res->sandbox_id);
	fputs("\"/>\n</properties>\n", f);
	for (size_t i = 0; i < res->n_rows; i++) {
		const struct sl_vrow *r = &res->rows[i];
		fputs("<testcase classname=\"", f);
		xml_esc(f, r->control ? "control." : "visibility.");
		xml_esc(f, r->check);
		fputs("\" name=\"", f);
		xml_esc(f, r->subject);
		fputs("\">", f);
		if (r->verdict == SL_V_FAIL || r->verdict == SL_V_GAP) {
			fprintf(f, "<failure type=\"%s\" message=\"",
				r->verdict == SL_V_GAP ? "coverage-gap" : "failed");
			xml_esc(f, r->observed);
			fputs("\">expected: ", f);
			xml_esc(f, r->expected);
			fputs("</failure>", f);
		} else if (r->verdict == SL_V_NA) {
			fputs("<skipped message=\"", f);
			xml_esc(f, r->observed);
			fputs("\"/>", f);
		} else {
			fputs("<system-out>", f);
			xml_esc(f, r->observed);
			fputs("</system-out>", f);
		}
		fputs("</testcase>\n", f);
	}
	fputs("</testsuite>\n</testsuites>\n", f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
