/* Unit tests for the policy parser (src/policy/policy.c, format in docs/policy.md). Exit 0 on success. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "policy/policy.h"

#define CHECK_COUNTS
#include "check.h"

#define CHECK_STR(a, b)                                                                                      \
	do {                                                                                                 \
		const char *a_ = (a), *b_ = (b);                                                             \
		if (!a_ || !b_ || strcmp(a_, b_)) {                                                          \
			fprintf(stderr, "%s:%d: CHECK_STR failed: %s = \"%s\", want \"%s\"\n", __FILE__,     \
				__LINE__, #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                       \
			failures++;                                                                          \
		}                                                                                            \
	} while (0)

static int parse(const char *yaml, struct sl_policy *p, char *err, size_t errlen)
{
	int r = sl_policy_default(p);
	if (r < 0)
		return r;
	return sl_policy_parse(yaml, strlen(yaml), "t.yaml", p, err, errlen);
}

static void check_default_env(const struct sl_policy *p, const char *home)
{
	char want_home[128];
	snprintf(want_home, sizeof(want_home), "HOME=%s", home);
	CHECK(p->n_env == 4);
	if (p->n_env != 4)
		return;
	CHECK_STR(p->env[0], "PATH=/usr/local/bin:/usr/bin:/bin");
	CHECK_STR(p->env[1], want_home);
	CHECK_STR(p->env[2], "LANG=C.UTF-8");
	CHECK_STR(p->env[3], "TMPDIR=/tmp");
}

static void check_defaults(const struct sl_policy *p)
{
	static const char *ro[] = {"/usr", "/bin", "/lib", "/lib64", "/etc", "/sbin"};
	CHECK(p->workspace == NULL);
	CHECK_STR(p->workspace_mount, "/workspace");
	CHECK(p->n_ro == SL_ARRAY_LEN(ro));
	for (size_t i = 0; i < SL_ARRAY_LEN(ro) && i < p->n_ro; i++)
		CHECK_STR(p->ro_paths[i], ro[i]);
	CHECK(p->n_canaries == 0);
	CHECK(p->n_tcp_connect == 0);
	CHECK(p->limits.memory_bytes == 1ULL << 30);
	CHECK(p->limits.pids == 512);
	CHECK(p->limits.nofile == 1024);
	CHECK(p->limits.cpu_seconds == 3600);
	CHECK(p->limits.file_size == 1ULL << 30);
	CHECK(p->limits.tmp_size == 256ULL << 20);
	CHECK(p->limits.wall_seconds == 0);
	CHECK(p->tmp == true);
	CHECK(p->redact_argv == true);
	CHECK(p->record_opens == true);
	CHECK(p->record_wait_on_full == false);
	check_default_env(p, "/workspace");
}

static void test_defaults(void)
{
	struct sl_policy p;
	CHECK(sl_policy_default(&p) == 0);
	check_defaults(&p);
	sl_policy_free(&p);
	sl_policy_free(&p); /* a second free is harmless */

	/* Empty input, comments only, and an empty mapping all mean "the defaults". */
	const char *empties[] = {"", "# nothing here\n", "{}\n", "---\n{}\n...\n"};
	for (size_t i = 0; i < SL_ARRAY_LEN(empties); i++) {
		char err[256] = "";
		CHECK(parse(empties[i], &p, err, sizeof(err)) == 0);
		CHECK_STR(err, "");
		check_defaults(&p);
		sl_policy_free(&p);
	}
}

static const char full_example[] =
    "# all keys optional\n"
    "workspace: /var/tmp/ws\n"
    "workspace_mount: /work/space/\n"
    "read_only: [/usr, /bin, /lib, /lib64, /etc, /sbin]\n"
    "read_only_extra: [/opt//tools/]\n"
    "canaries: [/work/space/.canary/token.txt, \"/etc/shadow\"]\n"
    "network:\n"
    "  allow_tcp_connect: [8080, 5432, 8080]\n"
    "limits:\n"
    "  memory: 512M\n"
    "  pids: 256\n"
    "  nofile: 4096\n"
    "  cpu_seconds: 600\n"
    "  file_size: 1G\n"
    "  tmp_size: \"64K\"\n"
    "  wall_seconds: 0\n"
    "tmp: false\n"
    "redact_argv: false\n"
    "sensor:\n"
    "  record_opens: false\n"
    "record:\n"
    "  on_full: wait\n"
    "env: {PATH: \"/usr/bin:/bin\", LANG: C.UTF-8, EMPTY: \"\", _X1: 'a=b: c'}\n";

static void test_full_example(void)
{
	struct sl_policy p;
	char err[512] = "";
	int r = parse(full_example, &p, err, sizeof(err));
	CHECK(r == 0);
	if (r != 0) {
		fprintf(stderr, "  error: %s\n", err);
		sl_policy_free(&p);
		return;
	}
	CHECK_STR(p.workspace, "/var/tmp/ws");
	CHECK_STR(p.workspace_mount, "/work/space");
	static const char *ro[] = {"/usr", "/bin", "/lib", "/lib64", "/etc", "/sbin", "/opt/tools"};
	CHECK(p.n_ro == SL_ARRAY_LEN(ro));
	for (size_t i = 0; i < SL_ARRAY_LEN(ro) && i < p.n_ro; i++)
		CHECK_STR(p.ro_paths[i], ro[i]);
	CHECK(p.n_canaries == 2);
	CHECK_STR(p.canaries[0], "/work/space/.canary/token.txt");
	CHECK_STR(p.canaries[1], "/etc/shadow");
	CHECK(p.n_tcp_connect == 2); /* the duplicate 8080 is dropped */
	CHECK(p.tcp_connect[0] == 8080);
	CHECK(p.tcp_connect[1] == 5432);
	CHECK(p.limits.memory_bytes == 512ULL << 20);
	CHECK(p.limits.pids == 256);
	CHECK(p.limits.nofile == 4096);
	CHECK(p.limits.cpu_seconds == 600);
	CHECK(p.limits.file_size == 1ULL << 30);
	CHECK(p.limits.tmp_size == 64ULL << 10);
	CHECK(p.limits.wall_seconds == 0);
	CHECK(p.tmp == false);
	CHECK(p.redact_argv == false);
	CHECK(p.record_opens == false);
	CHECK(p.record_wait_on_full == true);
	/* env replaces the default entirely: no HOME, no TMPDIR. */
	CHECK(p.n_env == 4);
	if (p.n_env == 4) {
		CHECK_STR(p.env[0], "PATH=/usr/bin:/bin");
		CHECK_STR(p.env[1], "LANG=C.UTF-8");
		CHECK_STR(p.env[2], "EMPTY=");
		CHECK_STR(p.env[3], "_X1=a=b: c");
	}
	sl_policy_free(&p);
}

static void test_semantics(void)
{
	struct sl_policy p;
	char err[512] = "";

	/* HOME follows workspace_mount when env is not given. */
	CHECK(parse("workspace_mount: /home/agent\n", &p, err, sizeof(err)) == 0);
	CHECK_STR(p.workspace_mount, "/home/agent");
	check_default_env(&p, "/home/agent");
	sl_policy_free(&p);

	/* read_only_extra appends to the given list whatever the key order; duplicates collapse. */
	CHECK(parse("read_only_extra: [/opt, /usr]\nread_only: [/usr]\n", &p, err, sizeof(err)) == 0);
	CHECK(p.n_ro == 2);
	if (p.n_ro == 2) {
		CHECK_STR(p.ro_paths[0], "/usr");
		CHECK_STR(p.ro_paths[1], "/opt");
	}
	sl_policy_free(&p);

	/* An empty read_only list is allowed (a static workload needs nothing from the host). */
	CHECK(parse("read_only: []\n", &p, err, sizeof(err)) == 0);
	CHECK(p.n_ro == 0);
	sl_policy_free(&p);

	/* Sizes: every suffix, zero memory means "no limit", the largest value that fits. */
	CHECK(parse("limits: {memory: 0, file_size: 3K, tmp_size: 2T}\n", &p, err, sizeof(err)) == 0);
	CHECK(p.limits.memory_bytes == 0);
	CHECK(p.limits.file_size == 3072);
	CHECK(p.limits.tmp_size == 2ULL << 40);
	sl_policy_free(&p);
	CHECK(parse("limits: {memory: 18446744073709551615, file_size: 16777215T}\n", &p, err, sizeof(err)) ==
	      0);
	CHECK(p.limits.memory_bytes == UINT64_MAX);
	CHECK(p.limits.file_size == 16777215ULL << 40);
	sl_policy_free(&p);

	/* Ports at the edges; block style lists. */
	CHECK(parse("network:\n  allow_tcp_connect:\n    - 1\n    - 65535\n", &p, err, sizeof(err)) == 0);
	CHECK(p.n_tcp_connect == 2 && p.tcp_connect[0] == 1 && p.tcp_connect[1] == 65535);
	sl_policy_free(&p);

	/* The policy is left exactly as it was when a parse fails. */
	CHECK(parse("workspace_mount: /a\nlimits: {pids: 7}\n", &p, err, sizeof(err)) == 0);
	CHECK(sl_policy_parse("limits: {pids: 9}\nbogus: 1\n", 26, "t.yaml", &p, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(p.limits.pids == 7);
	CHECK_STR(p.workspace_mount, "/a");
	check_default_env(&p, "/a");
	sl_policy_free(&p);

	/* A parse on top of an earlier one keeps what the second does not mention. */
	CHECK(parse("limits: {pids: 7}\n", &p, err, sizeof(err)) == 0);
	CHECK(sl_policy_parse("tmp: false\n", 11, "t.yaml", &p, err, sizeof(err)) == 0);
	CHECK(p.limits.pids == 7 && p.tmp == false);
	sl_policy_free(&p);

	/* HOME only follows the mount when it was pointing at it: an explicit env is left alone. */
	CHECK(parse("env: {A: b, HOME: /h}\n", &p, err, sizeof(err)) == 0);
	CHECK(sl_policy_parse("workspace_mount: /x\n", 20, "t.yaml", &p, err, sizeof(err)) == 0);
	CHECK(p.n_env == 2 && !strcmp(p.env[0], "A=b") && !strcmp(p.env[1], "HOME=/h"));
	sl_policy_free(&p);
	CHECK(parse("env: {A: b}\n", &p, err, sizeof(err)) == 0);
	CHECK(sl_policy_parse("workspace_mount: /x\n", 20, "t.yaml", &p, err, sizeof(err)) == 0);
	CHECK(p.n_env == 1 && !strcmp(p.env[0], "A=b"));
	sl_policy_free(&p);

	/* Input larger than 1 MiB is refused before parsing. */
	size_t big = 1024 * 1024 + 1;
	char *text = malloc(big);
	CHECK(text != NULL);
	if (text) {
		memset(text, '#', big);
		CHECK(sl_policy_default(&p) == 0);
		CHECK(sl_policy_parse(text, big, "big.yaml", &p, err, sizeof(err)) == -EFBIG);
		CHECK(strstr(err, "big.yaml") && strstr(err, "1 MiB"));
		/* exactly 1 MiB of comment is fine */
		CHECK(sl_policy_parse(text, big - 1, "big.yaml", &p, err, sizeof(err)) == 0);
		sl_policy_free(&p);
		free(text);
	}

	/* A tiny error buffer truncates but never overflows; no buffer at all is fine too. */
	char small[8];
	CHECK(parse("nope: 1\n", &p, small, sizeof(small)) == -EINVAL);
	CHECK(strlen(small) == sizeof(small) - 1);
	sl_policy_free(&p);
	CHECK(parse("nope: 1\n", &p, NULL, 0) == -EINVAL);
	sl_policy_free(&p);
}

struct bad {
	const char *yaml;
	int line, col;
	const char *want; /* substring of the message after "t.yaml:L:C: " */
};

static const struct bad bads[] = {
    /* unknown keys, at every level, naming the key and the allowed ones */
    {"workspace: /w\nworkspaces: /x\n", 2, 1,
     "unknown key \"workspaces\" (allowed: workspace, workspace_mount"},
    {"limits:\n  memroy: 1G\n", 2, 3, "limits: unknown key \"memroy\" (allowed: memory, pids"},
    {"network: {allow_udp: [53]}\n", 1, 11,
     "network: unknown key \"allow_udp\" (allowed: allow_tcp_connect)"},
    {"sensor: {record_exec: true}\n", 1, 10, "sensor: unknown key \"record_exec\""},
    /* paths */
    {"workspace: relative/dir\n", 1, 12, "workspace: path \"relative/dir\" is not absolute"},
    {"read_only: [/usr, usr/lib]\n", 1, 19, "read_only: path \"usr/lib\" is not absolute"},
    {"canaries: [/workspace/../etc/passwd]\n", 1, 12,
     "canaries: path \"/workspace/../etc/passwd\" contains a \"..\""},
    {"read_only_extra: [/opt/./x]\n", 1, 19, "read_only_extra: path \"/opt/./x\" contains a \".\""},
    {"read_only: [/usr, /]\n", 1, 19, "read_only: \"/\" is not allowed: binding the host root"},
    {"read_only_extra: [\"//\"]\n", 1, 19, "read_only_extra: \"/\" is not allowed"},
    {"workspace: \"/a\\0b\"\n", 1, 12, "workspace: path \"/a\\x00b\" contains a NUL byte"},
    {"workspace: \"/a\\nb\"\n", 1, 12, "workspace: path \"/a\\x0ab\" contains a control character"},
    {"workspace:\n", 1, 11, "workspace: expected an absolute path, got an empty value"},
    {"workspace: [/a]\n", 1, 12, "workspace: expected an absolute path, got a list"},
    {"workspace_mount: /\n", 1, 18, "workspace_mount: \"/\" is not allowed"},
    {"workspace_mount: /usr/ws\n", 1, 18,
     "workspace_mount: workspace_mount /usr/ws is inside read-only path /usr"},
    {"read_only_extra: [/workspace/tools]\n", 1, 19,
     "read_only_extra: read-only path /workspace/tools is inside workspace_mount"},
    {"workspace_mount: /tmp/ws\n", 1, 18, "workspace_mount: /tmp/ws overlaps the private /tmp"},
    {"workspace: /\n", 1, 12, "workspace: \"/\" is not allowed"},
    {"read_only_extra: [/opt/tools]\nworkspace: /opt\n", 2, 12,
     "workspace: host directory /opt contains read-only path /opt/tools"},
    {"canaries: /x\n", 1, 11, "canaries: expected a list of absolute paths, got a single value"},
    /* sizes and numbers */
    {"limits:\n  memory: 12Q\n", 2, 11, "limits.memory: \"12Q\" has an invalid suffix"},
    {"limits:\n  memory: 12k\n", 2, 11, "limits.memory: \"12k\" has an invalid suffix"},
    {"limits:\n  memory: 16777216T\n", 2, 11, "limits.memory: \"16777216T\" is too large"},
    {"limits:\n  memory: 18446744073709551616\n", 2, 11,
     "limits.memory: \"18446744073709551616\" is too large"},
    {"limits:\n  memory: -1\n", 2, 11, "limits.memory: \"-1\" is negative"},
    {"limits:\n  memory: \"\"\n", 2, 11, "limits.memory: expected a size"},
    {"limits:\n  memory:\n", 2, 10, "limits.memory: expected a size"},
    {"limits:\n  memory: 0x10\n", 2, 11, "limits.memory: \"0x10\" has an invalid suffix"},
    {"limits:\n  pids: 010\n", 2, 9, "limits.pids: \"010\" has a leading zero"},
    {"limits:\n  pids: 1K\n", 2, 9, "limits.pids: \"1K\" is not a plain decimal integer"},
    {"limits:\n  pids: 1.5\n", 2, 9, "limits.pids: \"1.5\" is not a plain decimal integer"},
    {"limits:\n  nofile: 0\n", 2, 11, "limits.nofile: \"0\" is out of range (1..1048576)"},
    {"limits:\n  tmp_size: 0\n", 2, 13, "limits.tmp_size: \"0\" is out of range"},
    {"limits:\n  wall_seconds: 4294967296\n", 2, 17, "limits.wall_seconds: \"4294967296\" is out of range"},
    {"limits: [1]\n", 1, 9, "limits: expected a mapping (key: value), got a list"},
    /* ports */
    {"network:\n  allow_tcp_connect: [8080, 0]\n", 2, 29,
     "network.allow_tcp_connect: \"0\" is out of range (1..65535)"},
    {"network:\n  allow_tcp_connect: [70000]\n", 2, 23,
     "network.allow_tcp_connect: \"70000\" is out of range"},
    {"network:\n  allow_tcp_connect: [abc]\n", 2, 23, "network.allow_tcp_connect: \"abc\" is not a number"},
    {"network:\n  allow_tcp_connect: [[80]]\n", 2, 23,
     "network.allow_tcp_connect: expected a non-negative integer, got a list"},
    /* booleans */
    {"tmp: yes\n", 1, 6, "tmp: expected true or false, got \"yes\""},
    {"tmp: True\n", 1, 6, "tmp: expected true or false, got \"True\""},
    {"redact_argv: \"true\"\n", 1, 14, "redact_argv: expected unquoted true or false"},
    {"sensor:\n  record_opens: off\n", 2, 17, "sensor.record_opens: expected true or false"},
    {"record: {on_full: pause}\n", 1, 19, "record.on_full: expected stop or wait, got \"pause\""},
    {"record: {on_full: \"wait\"}\n", 1, 19, "record.on_full: expected stop or wait"},
    {"record: {on_fill: wait}\n", 1, 10, "record: unknown key \"on_fill\""},
    /* env */
    {"env: {SIGHTLINE_X: 1}\n", 1, 7, "env: variable \"SIGHTLINE_X\" is reserved"},
    {"env: {sightline_token: 1}\n", 1, 7, "env: variable \"sightline_token\" is reserved"},
    {"env: {1BAD: x}\n", 1, 7, "env: invalid variable name \"1BAD\""},
    {"env: {\"A=B\": x}\n", 1, 7, "env: invalid variable name \"A=B\""},
    {"env: {A: \"x\\0y\"}\n", 1, 10, "env.A: value contains a NUL byte"},
    {"env: {A: ~}\n", 1, 10, "env.A: value is null"},
    {"env: {A: [x]}\n", 1, 10, "env.A: expected a string value, got a list"},
    {"env: {A: x, A: y}\n", 1, 13, "env: duplicate key \"A\""},
    {"env: [A=x]\n", 1, 6, "env: expected a mapping"},
    /* YAML features that are refused */
    {"workspace: &b /usr\nread_only: [*b]\n", 1, 12, "workspace: anchors and aliases are not allowed"},
    {"read_only: [/usr]\nread_only_extra: *x\n", 2, 18,
     "read_only_extra: anchors and aliases are not allowed"},
    {"workspace: !!str /x\n", 1, 12, "workspace: YAML tags (\"tag:yaml.org,2002:str\") are not allowed"},
    {"tmp: true\ntmp: false\n", 2, 1, "duplicate key \"tmp\""},
    {"limits:\n  pids: 1\n  pids: 2\n", 3, 3, "limits: duplicate key \"pids\""},
    {"? [a]\n: b\n", 1, 3, "top level: keys must be plain names, got a list"},
    {"- /usr\n- /bin\n", 1, 1, "the top level must be a mapping (key: value lines), got a list"},
    {"just a string\n", 1, 1, "the top level must be a mapping"},
    {"---\n", 2, 1, "the top level must be a mapping"},
    {"tmp: true\n---\ntmp: false\n", 2, 1, "only one YAML document is allowed"},
    {"tmp: true\n\tredact_argv: true\n", 2, 1, "YAML syntax error"},
    {"read_only: [/usr\n", 2, 1, "YAML syntax error"},
    {"tmp: true\n]\n", 2, 1, "YAML syntax error: did not find expected key"},
    {"tmp: true\nredact_argv: 'open\n", 3, 1, "YAML syntax error: found unexpected end of stream"},
    {"tmp: \"\xff\"\n", 1, 7, "invalid input"},
    {"tmp: tr\x01ue\n", 1, 8, "invalid input"},
};

static void test_errors(void)
{
	for (size_t i = 0; i < SL_ARRAY_LEN(bads); i++) {
		struct sl_policy p;
		char err[512] = "";
		int r = parse(bads[i].yaml, &p, err, sizeof(err));
		char prefix[64];
		snprintf(prefix, sizeof(prefix), "t.yaml:%d:%d: ", bads[i].line, bads[i].col);
		bool ok = r == -EINVAL && !strncmp(err, prefix, strlen(prefix)) && strstr(err, bads[i].want);
		if (!ok) {
			fprintf(stderr, "bad input #%zu %s\n  r=%d err=%s\n  want %s...%s\n", i, bads[i].yaml,
				r, err, prefix, bads[i].want);
			failures++;
		}
		/* A failed parse leaves the defaults untouched. */
		check_defaults(&p);
		sl_policy_free(&p);
	}
}

static void test_list_limits(void)
{
	/* 64 distinct entries are fine, the 65th is an error at its own position. */
	for (int count = 64; count <= 65; count++) {
		char *y = NULL;
		size_t ylen = 0;
		FILE *f = open_memstream(&y, &ylen);
		CHECK(f != NULL);
		if (!f)
			return;
		fputs("canaries:\n", f);
		for (int i = 0; i < count; i++)
			fprintf(f, "  - /c/%d\n", i);
		fputs("env:\n", f);
		for (int i = 0; i < 64; i++)
			fprintf(f, "  V%d: x\n", i);
		fclose(f);
		struct sl_policy p;
		char err[512] = "";
		int r = parse(y, &p, err, sizeof(err));
		if (count == 64) {
			CHECK(r == 0);
			CHECK(p.n_canaries == 64 && p.n_env == 64);
			CHECK_STR(p.canaries[63], "/c/63");
			CHECK_STR(p.env[63], "V63=x");
		} else {
			CHECK(r == -EINVAL);
			CHECK(strstr(err, "t.yaml:66:5: canaries: too many entries (at most 64)") != NULL);
		}
		sl_policy_free(&p);
		free(y);
	}

	/* read_only and read_only_extra share the 64 slots: 6 defaults + 59 extras is one too many. */
	char *y = NULL;
	size_t ylen = 0;
	FILE *f = open_memstream(&y, &ylen);
	CHECK(f != NULL);
	if (!f)
		return;
	fputs("read_only_extra:\n", f);
	for (int i = 0; i < 59; i++)
		fprintf(f, "  - /x/%d\n", i);
	fclose(f);
	struct sl_policy p;
	char err[512] = "";
	CHECK(parse(y, &p, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "t.yaml:60:5: read_only_extra: too many read-only paths") != NULL);
	sl_policy_free(&p);
	free(y);

	/* 65 entries in env. */
	f = open_memstream(&y, &ylen);
	CHECK(f != NULL);
	if (!f)
		return;
	fputs("env:\n", f);
	for (int i = 0; i < 65; i++)
		fprintf(f, "  V%d: x\n", i);
	fclose(f);
	CHECK(parse(y, &p, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "t.yaml:66:3: env: too many variables (at most 64)") != NULL);
	sl_policy_free(&p);
	free(y);

	/* A path of 1024 bytes is fine, 1025 is not. */
	char path[1100];
	for (int len = 1024; len <= 1025; len++) {
		memset(path, 'a', sizeof(path));
		path[0] = '/';
		path[len] = '\0';
		char doc[1200];
		snprintf(doc, sizeof(doc), "workspace: %s\n", path);
		int r = parse(doc, &p, err, sizeof(err));
		if (len == 1024)
			CHECK(r == 0 && p.workspace && strlen(p.workspace) == 1024);
		else
			CHECK(r == -EINVAL && strstr(err, "t.yaml:1:12: workspace: path is 1025 bytes long"));
		sl_policy_free(&p);
	}
}

static void test_load(void)
{
	struct sl_policy p;
	char err[512] = "";
	char dir[] = "/tmp/sl-test-policy-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[128];
	snprintf(path, sizeof(path), "%s/p.yaml", dir);
	const char body[] = "limits:\n  pids: 33\n";
	CHECK(sl_write_file_durable(path, body, sizeof(body) - 1, 0600) == 0);
	CHECK(sl_policy_default(&p) == 0);
	CHECK(sl_policy_load(path, &p, err, sizeof(err)) == 0);
	CHECK(p.limits.pids == 33);
	/* Errors name the file. */
	const char bad[] = "limits:\n  pids: lots\n";
	CHECK(sl_write_file_durable(path, bad, sizeof(bad) - 1, 0600) == 0);
	CHECK(sl_policy_load(path, &p, err, sizeof(err)) == -EINVAL);
	char want[192];
	snprintf(want, sizeof(want), "%s:2:9: limits.pids: \"lots\" is not a number", path);
	CHECK(strstr(err, want) == err);
	unlink(path);
	CHECK(sl_policy_load(path, &p, err, sizeof(err)) == -ENOENT);
	CHECK(strstr(err, path) == err);
	rmdir(dir);
	sl_policy_free(&p);

	/* The shipped demo policy parses (run from the repository root, as tests/run.sh does). */
	const char *root = getenv("SL_ROOT");
	char demo[4096];
	snprintf(demo, sizeof(demo), "%s/policies/canary.yaml", root ? root : ".");
	if (access(demo, R_OK) == 0) {
		CHECK(sl_policy_default(&p) == 0);
		int r = sl_policy_load(demo, &p, err, sizeof(err));
		CHECK(r == 0);
		if (r)
			fprintf(stderr, "  %s\n", err);
		CHECK(p.n_canaries == 1 && !strcmp(p.canaries[0], "/workspace/canary/secret-token.txt"));
		CHECK(p.n_tcp_connect == 1 && p.tcp_connect[0] == 8080);
		CHECK(p.n_ro == 6);
		sl_policy_free(&p);
	} else {
		fprintf(stderr, "note: %s not found, demo policy not checked\n", demo);
	}
}

int main(void)
{
	test_defaults();
	test_full_example();
	test_semantics();
	test_errors();
	test_list_limits();
	test_load();
	if (failures) {
		fprintf(stderr, "test_policy: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_policy: ok (%zu bad inputs)\n", SL_ARRAY_LEN(bads));
	return 0;
}
