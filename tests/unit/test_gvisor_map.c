/* Unit tests for the mapping of decoded gVisor points to events: identity from the launcher's
 * container id only, paths made absolute, refusals named only where the errno is a layer's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "sensor/gvisor_map.h"
#include "sensor/gvisor_wire.h"

#define CHECK_COUNTS
#include "check.h"
#include "gv_build.h"

static struct sl_gv_msg m;
static struct sl_json j, deny;
static const char *cls;

static int map(struct buf *b, const struct sl_gv_map_cfg *cfg)
{
	sl_json_reset(&j);
	sl_json_reset(&deny);
	cls = NULL;
	if (sl_gv_decode(b->b, b->n, &m) != SL_GV_OK)
		return -1000;
	int r = sl_gv_map(&m, cfg, &j, &cls, &deny);
	sl_json_raw(&j, "", 0);
	return r;
}

static bool has(const struct sl_json *x, const char *s)
{
	/* the builder's buffer is not NUL-terminated: search within len */
	size_t n = strlen(s);
	for (size_t i = 0; i + n <= x->len; i++)
		if (!memcmp(x->buf + i, s, n))
			return true;
	return false;
}

static void open_exit(struct buf *b, const char *path, int64_t fd, int64_t err)
{
	header(b, 7, 0);
	ctx(b);
	struct buf e = {.n = 0};
	if (err)
		vfield(&e, 2, (uint64_t)err);
	else
		vfield(&e, 1, 3);
	sfield(b, 2, e.b, e.n);
	vfield(b, 3, 257);
	vfield(b, 4, (uint64_t)fd);
	if (fd >= 0)
		sfield(b, 5, "/w/sub", 6);
	sfield(b, 6, path, strlen(path));
	vfield(b, 7, 0101); /* O_WRONLY|O_CREAT */
}

int main(void)
{
	static struct buf b;
	struct sl_policy pol;
	sl_policy_default(&pol);
	pol.canaries[0] = strdup("/w/canary");
	pol.n_canaries = 1;
	struct sl_gv_map_cfg cfg = {.container_id = "c1", .policy = &pol};
	struct sl_gv_map_cfg other = {.container_id = "c2", .policy = &pol};
	sl_json_init(&j);
	sl_json_init(&deny);

	/* A relative open against AT_FDCWD: joined with the task's cwd, normalised. */
	open_exit(&b, "x/../canary", -100, 0);
	CHECK(map(&b, &cfg) == 1 && cls && !strcmp(cls, "file.open"));
	CHECK(has(&j, "\"path\":\"/w/canary\"") && has(&j, "\"requested\":\"x/../canary\""));
	CHECK(has(&j, "\"canary\":true") && has(&j, "\"write\":true") && has(&j, "\"result\":3"));
	CHECK(has(&j, "\"flags\":\"O_WRONLY|O_CREAT\"") && has(&j, "\"pid\":7"));
	/* Relative to a directory fd: joined with its fd_path. */
	open_exit(&b, "f", 5, 0);
	CHECK(map(&b, &cfg) == 1 && has(&j, "\"path\":\"/w/sub/f\""));
	/* The same point under another sandbox's container id: never attributed. */
	open_exit(&b, "/w/f", -100, 0);
	CHECK(map(&b, &other) == -EXDEV);
	/* No container id at all: not attributed either. */
	header(&b, 7, 0);
	sfield(&b, 2, "\x08\x03", 2);
	CHECK(map(&b, &cfg) == -EXDEV);
	/* EROFS and EACCES: a file.open with disposition 2 and a policy.deny; ENOENT: no deny. */
	open_exit(&b, "/etc/x", -100, EROFS);
	CHECK(map(&b, &cfg) == 2 && has(&j, "\"errno\":\"EROFS\"") && has(&j, "\"disposition_id\":2"));
	CHECK(has(&deny, "\"reason\":\"read-only mount\"") && has(&deny, "\"layer\":\"gvisor\""));
	open_exit(&b, "/etc/x", -100, EACCES);
	CHECK(map(&b, &cfg) == 2 && has(&deny, "\"reason\":\"file permissions\""));
	open_exit(&b, "/nope", -100, ENOENT);
	CHECK(map(&b, &cfg) == 1 && has(&j, "\"result\":-2") && has(&j, "\"disposition_id\":1"));
	/* Enter points give no event. */
	header(&b, 7, 0);
	ctx(&b);
	CHECK(map(&b, &cfg) == 0);
	/* Connect exit: inet address and port from the raw sockaddr. */
	header(&b, 10, 0);
	ctx(&b);
	{
		struct buf e = {.n = 0};
		vfield(&e, 2, 111);
		sfield(&b, 2, e.b, e.n);
	}
	sfield(&b, 6, "\x02\x00\x00\x50\x7f\x00\x00\x01\0\0\0\0\0\0\0\0", 16);
	CHECK(map(&b, &cfg) == 1 && !strcmp(cls, "network.connect"));
	CHECK(has(&j, "\"family\":\"inet\",\"address\":\"127.0.0.1\",\"port\":80") &&
	      has(&j, "\"errno\":\"ECONNREFUSED\""));
	/* A truncated sockaddr is "other", not a read past the bytes. */
	header(&b, 10, 0);
	ctx(&b);
	sfield(&b, 2, "", 0);
	sfield(&b, 6, "\x02\x00\x00", 3);
	CHECK(map(&b, &cfg) == 1 && has(&j, "\"family\":\"other\""));
	/* Exit notify parent: the wait status split into code / signal. */
	header(&b, 4, 0);
	ctx(&b);
	vfield(&b, 2, 3 << 8);
	CHECK(map(&b, &cfg) == 1 && !strcmp(cls, "process.exit") && has(&j, "\"exit_code\":3"));
	header(&b, 4, 0);
	ctx(&b);
	vfield(&b, 2, 9);
	CHECK(map(&b, &cfg) == 1 && has(&j, "\"signal\":\"SIGKILL\""));
	/* Sentry exec: the resolved binary and argv. */
	header(&b, 3, 0);
	ctx(&b);
	sfield(&b, 2, "/usr/bin/dash", 13);
	sfield(&b, 3, "sh", 2);
	sfield(&b, 3, "-c", 2);
	CHECK(map(&b, &cfg) == 1 && !strcmp(cls, "process.exec") &&
	      has(&j, "\"executable\":\"/usr/bin/dash\""));
	CHECK(has(&j, "\"argv\":[\"sh\",\"-c\"],\"argc\":2"));

	sl_json_free(&j);
	sl_json_free(&deny);
	sl_policy_free(&pol);
	if (failures)
		fprintf(stderr, "test_gvisor_map: %d failures\n", failures);
	else
		printf("test_gvisor_map: ok\n");
	return failures ? 1 : 0;
}
