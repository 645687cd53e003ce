/* Fuzz the interpreter finder over arbitrary file heads: never reads out of bounds, always a
 * NUL-terminated result within the output buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sensor/binfmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *copy = malloc(size ? size : 1);
	memcpy(copy, data, size);
	char out[64];
	memset(out, 'x', sizeof(out));
	int r = sl_binfmt_interpreter(copy, size, out, sizeof(out));
	if (r == 1 && !memchr(out, '\0', sizeof(out)))
		abort();
	if (r != 0 && r != 1 && r != -22)
		abort();
	free(copy);
	return 0;
}
