/* Unit tests for the collector's built-in detections (src/collector/detect.c). Exit 0 on success. */
#include <stdio.h>
#include <string.h>

#include "collector/detect.h"

#define CHECK_COUNTS
#include "check.h"

#define HEAD "{\"seq\":7,\"sandbox_id\":\"0123456789abcdef0123456789abcdef\",\"time\":1796108362979782000,"

static int det(const char *line, struct sl_detection *d)
{
	memset(d, 0, sizeof(*d));
	return sl_detect_line(line, strlen(line), d);
}

int main(void)
{
	struct sl_detection d;
	CHECK(det(HEAD "\"class\":\"file.open\",\"path\":\"/workspace/c.txt\",\"canary\":true}", &d) == 1 &&
	      !strcmp(d.kind, "canary-read") && !strcmp(d.path, "/workspace/c.txt") && strstr(d.detail, "opened"));
	CHECK(det(HEAD "\"class\":\"file.open\",\"path\":\"/workspace/c.txt\",\"canary\":false}", &d) == 0);
	/* The text of the flag inside a path (escaped quotes) is not the flag. */
	CHECK(det(HEAD "\"class\":\"file.open\",\"path\":\"/x\\\"canary\\\":true\",\"canary\":false}", &d) == 0);
	/* Another class carrying the words. */
	CHECK(det(HEAD "\"class\":\"process.exec\",\"argv\":[\"\\\"canary\\\":true\"],\"canary\":true}", &d) == 0);
	CHECK(det(HEAD "\"class\":\"policy.deny\",\"syscall\":\"connect\",\"path\":\"127.0.0.1:9\"}", &d) == 1 &&
	      !strcmp(d.kind, "blocked-connect") && !strcmp(d.path, "127.0.0.1:9"));
	CHECK(det(HEAD "\"class\":\"policy.deny\",\"syscall\":\"openat\",\"path\":\"/etc/shadow\"}", &d) == 0);
	/* Not JSON after the pre-filter matched: nothing, no crash. */
	CHECK(det(HEAD "\"class\":\"file.open\",\"canary\":true", &d) == 0);
	CHECK(sl_detect_line("", 0, &d) == 0);
	if (failures) {
		fprintf(stderr, "test_detect: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_detect: ok\n");
	return 0;
}
