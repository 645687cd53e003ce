/* Unit tests for the supervisor's pure parts: path policy and argv redaction. */
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"
#include "sensor/paths.h"
#include "sensor/redact.h"

#define CHECK_COUNTS
#include "check.h"

static void norm(const char *in, const char *want)
{
	char b[256];
	snprintf(b, sizeof(b), "%s", in);
	sl_path_normalize(b);
	if (strcmp(b, want) != 0) {
		fprintf(stderr, "normalize(%s) = %s, want %s\n", in, b, want);
		failures++;
	}
}

static void red(const char *prev, const char *arg, int want, size_t want_keep)
{
	size_t keep = 99;
	bool r = sl_redact_arg(prev, arg, &keep);
	if ((int)r != want || (r && keep != want_keep)) {
		fprintf(stderr, "redact(%s, %s) = %d keep %zu, want %d keep %zu\n", prev ? prev : "-", arg, r, keep,
			want, want_keep);
		failures++;
	}
}

int main(void)
{
	norm("/", "/");
	norm("//", "/");
	norm("/a/./b", "/a/b");
	norm("/a/../../..", "/");
	norm("/workspace/../etc/passwd", "/etc/passwd");
	norm("/a//b///c/", "/a/b/c");
	norm("/..", "/");

	struct sl_policy p;
	sl_policy_default(&p);
	CHECK(sl_path_readable(&p, "/usr/lib/x"));
	CHECK(sl_path_readable(&p, "/"));
	CHECK(!sl_path_readable(&p, "/root/.ssh/id_rsa"));
	CHECK(!sl_path_readable(&p, "/usrx"));
	CHECK(sl_path_writable(&p, "/workspace/a"));
	CHECK(sl_path_writable(&p, "/workspace"));
	CHECK(!sl_path_writable(&p, "/workspacex/a"));
	CHECK(!sl_path_writable(&p, "/etc/passwd"));
	CHECK(sl_path_writable(&p, "/dev/null"));
	CHECK(!sl_path_writable(&p, "/dev/sda"));
	CHECK(sl_path_writable(&p, "/tmp/x"));
	sl_policy_free(&p);

	red(NULL, "--token=abc", 1, 8);
	red("--token", "abc", 1, 0);
	red("--password", "hunter2", 1, 0);
	red(NULL, "PASSWORD=hunter2", 1, 9);
	red(NULL, "https://bob:s3cret@example.com/x", 1, 12);
	red(NULL, "ghp_abcdefghijklmnopqrstuvwxyz0123", 1, 0);
	red(NULL, "AKIAABCDEFGHIJKLMNOP", 1, 0);
	red(NULL, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijkl", 1, 0);
	red(NULL, "0123456789abcdef0123456789abcdef01234567", 0, 0); /* a git hash is not a secret */
	red(NULL, "hello", 0, 0);
	red(NULL, "-c", 0, 0);
	red("-c", "print(1)", 0, 0);
	red(NULL, "--output=/tmp/x", 0, 0);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	return 0;
}
