/* libFuzzer target for the on-disk record reader: any bytes must give a verdict, never a crash, a
 * leak or an out-of-bounds read, and the verdict must be self-consistent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_verify_result res;
	int rc = sl_record_verify_buf((const char *)data, size, &res);
	if (rc != 0 && rc != 1)
		abort(); /* a buffer has no I/O errors */
	if ((rc == 0) != (res.reason == SL_VERIFY_OK))
		abort();
	if (res.reason == SL_VERIFY_IO || strnlen(res.detail, sizeof(res.detail)) == sizeof(res.detail) ||
	    strlen(res.head) != 64)
		abort();
	/* The first bad seq is at most one past the good lines (or the good line it un-counts). */
	if (rc == 1 && (res.bad_seq == 0 || res.bad_seq > res.events + 1))
		abort();
	return 0;
}
