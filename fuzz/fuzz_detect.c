/* libFuzzer target for the collector's built-in detections: any line gives 0 or 1, never a crash;
 * a detection names one of the two kinds and NUL-terminated strings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/detect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = malloc(size ? size : 1);
	if (!line)
		return 0;
	if (size)
		memcpy(line, data, size);
	struct sl_detection d;
	int r = sl_detect_line(line, size, &d);
	if (r != 0 && r != 1)
		abort();
	if (r == 1 && ((strcmp(d.kind, "canary-read") && strcmp(d.kind, "blocked-connect")) ||
		       !memchr(d.detail, '\0', sizeof(d.detail)) || !memchr(d.path, '\0', sizeof(d.path))))
		abort();
	free(line);
	return 0;
}
