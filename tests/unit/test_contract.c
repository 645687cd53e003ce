/* Unit tests for the contract parser and the static check (src/contract/, format in
 * docs/contract.md). Exit 0 on success. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "contract/caps.h"
#include "contract/contract.h"

#define CHECK_COUNTS
#include "check.h"

static const char good[] = "contract: t\n"
			   "behaviours:\n"
			   "  - id: exec\n"
			   "    event: process.exec\n"
			   "    observer: supervisor\n"
			   "    fields: [executable, argv, identity.tenant]\n"
			   "    max_delay: 500ms\n"
			   "    action: exec\n"
			   "  - id: sha\n"
			   "    event: process.exec\n"
			   "    observer: supervisor\n"
			   "    fields: [sha256]\n"
			   "    max_delay: 1m\n"
			   "    required: false\n"
			   "  - id: gw\n"
			   "    event: network.connect\n"
			   "    observer: gateway\n"
			   "    fields: [address]\n"
			   "    max_delay: 2s\n"
			   "risk_classes:\n"
			   "  high: {max_blind: 2s, response: stop}\n"
			   "  low: {max_blind: 60s, response: pause-dispatch}\n"
			   "unsupported:\n"
			   "  - op: gw\n"
			   "    reason: no gateway here\n"
			   "    runtimes: [native]\n";

static void test_good(void)
{
	struct sl_contract c;
	char err[512] = "";
	int r = sl_contract_parse(good, strlen(good), "t.yaml", &c, err, sizeof(err));
	CHECK(r == 0);
	if (r) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	CHECK(!strcmp(c.name, "t"));
	CHECK(c.n_b == 3);
	CHECK(!strcmp(c.b[0].id, "exec") && c.b[0].n_fields == 3 && c.b[0].max_delay_ms == 500 &&
	      c.b[0].required && c.b[0].action == SL_ACT_EXEC && c.b[0].line == 3);
	CHECK(c.b[1].max_delay_ms == 60000 && !c.b[1].required && c.b[1].action == SL_ACT_NONE);
	CHECK(c.b[2].observer == SL_OBS_GATEWAY);
	CHECK(c.risk[SL_RISK_HIGH].set && c.risk[SL_RISK_HIGH].max_blind_ms == 2000 &&
	      c.risk[SL_RISK_HIGH].response == SL_RESP_STOP);
	CHECK(!c.risk[SL_RISK_MEDIUM].set);
	CHECK(c.risk[SL_RISK_LOW].response == SL_RESP_PAUSE_DISPATCH);
	CHECK(c.n_u == 1 && sl_contract_unsupported_for(&c, "gw", "native") &&
	      !sl_contract_unsupported_for(&c, "gw", "gvisor"));

	/* The static check. */
	struct sl_check_row row;
	sl_contract_check_one(&c, &c.b[0], &sl_caps_native, &row);
	CHECK(row.verdict == SL_CHECK_COVERED);
	sl_contract_check_one(&c, &c.b[1], &sl_caps_native, &row);
	CHECK(row.verdict == SL_CHECK_OPTIONAL && strstr(row.detail, "missing fields: sha256"));
	sl_contract_check_one(&c, &c.b[2], &sl_caps_native, &row);
	CHECK(row.verdict == SL_CHECK_UNSUPPORTED && strstr(row.detail, "no gateway here"));
	sl_contract_check_one(&c, &c.b[2], &sl_caps_gvisor, &row);
	CHECK(row.verdict == SL_CHECK_UNCOVERED && strstr(row.detail, "only from the guest-runtime"));
	sl_contract_check_one(&c, &c.b[0], &sl_caps_gvisor, &row);
	CHECK(row.verdict == SL_CHECK_UNCOVERED);
	sl_contract_free(&c);
	sl_contract_free(&c); /* twice is harmless */
}

/* Bad inputs: each must fail with "t.yaml:LINE:COL:" and the named problem. */
static const struct {
	const char *yaml;
	const char *where, *what;
} bads[] = {
    {"", "t.yaml:1:1:", "empty"},
    {"contract: x\n", "t.yaml:1:1:", "needs contract, behaviours and risk_classes"},
    {"contract: x\nbehaviours: []\nrisk_classes: {}\n", "t.yaml:1:1:", "promises nothing"},
    {"contract: x\nbogus: 1\n", "t.yaml:2:1:", "unknown key \"bogus\""},
    {"contract: x\ncontract: y\n", "t.yaml:2:1:", "duplicate key"},
    {"contract: x\nrisk_classes: {}\nbehaviours:\n  - id: a\n    event: e\n    observer: kernel\n",
     "t.yaml:6:15:", "observer: expected supervisor"},
    {"contract: x\nrisk_classes: {}\nbehaviours:\n  - {id: a, event: e, observer: host, fields: [], "
     "max_delay: 0s}\n",
     "t.yaml:4:", "not a duration"},
    {"contract: x\nrisk_classes: {}\nbehaviours:\n  - {id: a, event: e, observer: host, fields: [], "
     "max_delay: 2h}\n",
     "t.yaml:4:", "not a duration"},
    {"contract: x\nrisk_classes: {}\nbehaviours:\n  - {id: a, event: e, observer: host, fields: [], "
     "max_delay: 2s, "
     "required: yes}\n",
     "t.yaml:4:", "expected true or false"},
    {"contract: x\nrisk_classes: {}\nbehaviours:\n  - {id: a, event: e, observer: host, fields: [f, f], "
     "max_delay: 2s}\n",
     "t.yaml:4:", "listed twice"},
    {"contract: x\nrisk_classes: {}\nbehaviours:\n  - {id: a, event: e, observer: host, fields: [], "
     "max_delay: 2s}\n"
     "  - {id: a, event: e, observer: host, fields: [], max_delay: 2s}\n",
     "t.yaml:5:", "used twice (first at line 4)"},
    {"contract: x\nrisk_classes: {}\nbehaviours:\n  - {id: a, event: e, observer: host, max_delay: 2s}\n",
     "t.yaml:4:", "needs id, event, observer, fields and max_delay"},
    {"contract: x\nrisk_classes: {medium: {max_blind: 2s}}\n", "t.yaml:2:", "needs max_blind and response"},
    {"contract: x\nrisk_classes: {medium: {max_blind: 2s, response: kill}}\n",
     "t.yaml:2:", "pause-dispatch or stop"},
    {"contract: x\nrisk_classes: {extreme: {}}\n", "t.yaml:2:", "unknown key \"extreme\""},
    {"contract: x\nunsupported:\n  - op: a\n", "t.yaml:3:", "needs op and reason"},
    {"contract: x\nunsupported:\n  - {op: a, reason: r, runtimes: []}\n", "t.yaml:3:", "empty list"},
    {"contract: &a x\n", "t.yaml:1:11:", "anchors are not allowed"},
    {"contract: !!str x\n", "t.yaml:1:11:", "tags are not allowed"},
    {"a: &x 1\nb: *x\n", "t.yaml:1:", "anchors"},
    {"contract: x\n---\ncontract: y\n", "t.yaml:2:", "only one document"},
    {"contract: [x\n", "t.yaml:", "not valid YAML"},
    {"contract: \"a b\"\n", "t.yaml:1:11:", "may hold only letters"},
    {"- 1\n", "t.yaml:1:1:", "expected a mapping"},
    {"contract: x\nbehaviours:\n  - {id: a, event: e, observer: host, fields: [\"\\x01\"], max_delay: 2s}\n",
     "t.yaml:3:", "control character"},
};

static void test_bad(void)
{
	for (size_t i = 0; i < SL_ARRAY_LEN(bads); i++) {
		struct sl_contract c;
		char err[512] = "";
		int r = sl_contract_parse(bads[i].yaml, strlen(bads[i].yaml), "t.yaml", &c, err, sizeof(err));
		if (r != -EINVAL || strncmp(err, bads[i].where, strlen(bads[i].where)) ||
		    !strstr(err, bads[i].what)) {
			fprintf(stderr, "bad input %zu: r=%d err=\"%s\", want %s ... %s\n", i, r, err,
				bads[i].where, bads[i].what);
			failures++;
		}
		CHECK(c.n_b == 0 && c.name == NULL); /* nothing left behind */
	}
	/* Size and NUL. */
	char *big = malloc(SL_CONTRACT_MAX_BYTES + 2);
	memset(big, ' ', SL_CONTRACT_MAX_BYTES + 1);
	struct sl_contract c;
	char err[256];
	CHECK(sl_contract_parse(big, SL_CONTRACT_MAX_BYTES + 1, "t.yaml", &c, err, sizeof(err)) == -EFBIG);
	free(big);
	CHECK(sl_contract_parse("a\0b", 3, "t.yaml", &c, err, sizeof(err)) == -EINVAL && strstr(err, "NUL"));
	CHECK(sl_contract_load("/nonexistent/c.yaml", &c, err, sizeof(err)) == -ENOENT &&
	      strstr(err, "cannot read"));
}

/* The shipped contract parses and is covered on native. */
static void test_shipped(void)
{
	struct sl_contract c;
	char err[512];
	const char *root = getenv("SL_ROOT");
	char path[1024];
	snprintf(path, sizeof(path), "%s/contracts/native.yaml", root ? root : ".");
	int r = sl_contract_load(path, &c, err, sizeof(err));
	CHECK(r == 0);
	if (r) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	for (size_t i = 0; i < c.n_b; i++) {
		struct sl_check_row row;
		sl_contract_check_one(&c, &c.b[i], &sl_caps_native, &row);
		CHECK(row.verdict == SL_CHECK_COVERED);
	}
	char rv[256];
	CHECK(sl_caps_native.runtime_version(rv, sizeof(rv)) == 0 && !strncmp(rv, "linux ", 6) &&
	      strstr(rv, "landlock abi"));
	sl_contract_free(&c);

	/* The shipped gVisor contract: covered on gvisor but for connect-denied, which the table
	 * emits as a class (opens refused by EROFS) but never after a blocked connect: declared. */
	snprintf(path, sizeof(path), "%s/contracts/gvisor.yaml", root ? root : ".");
	r = sl_contract_load(path, &c, err, sizeof(err));
	CHECK(r == 0);
	if (r) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	for (size_t i = 0; i < c.n_b; i++) {
		struct sl_check_row row;
		sl_contract_check_one(&c, &c.b[i], &sl_caps_gvisor, &row);
		if (!strcmp(c.b[i].id, "connect-denied"))
			CHECK(row.verdict == SL_CHECK_UNSUPPORTED &&
			      strstr(row.detail, "gvisor emits policy.deny but not after blocked-connect"));
		else
			CHECK(row.verdict == SL_CHECK_COVERED);
	}
	/* Without its declaration it is a gap. */
	size_t n_u = c.n_u;
	c.n_u = 0;
	for (size_t i = 0; i < c.n_b; i++) {
		struct sl_check_row row;
		sl_contract_check_one(&c, &c.b[i], &sl_caps_gvisor, &row);
		if (!strcmp(c.b[i].id, "connect-denied"))
			CHECK(row.verdict == SL_CHECK_UNCOVERED);
	}
	c.n_u = n_u; /* freed with the rest */
	CHECK(!strcmp(sl_caps_gvisor.record_observer, "gvisor-sentry") &&
	      !strcmp(sl_caps_native.record_observer, "supervisor"));
	sl_contract_free(&c);
}

int main(void)
{
	test_good();
	test_bad();
	test_shipped();
	if (failures) {
		fprintf(stderr, "test_contract: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_contract: ok (%zu bad inputs)\n", SL_ARRAY_LEN(bads));
	return 0;
}
