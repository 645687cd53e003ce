/* The unit tests' checks, one kind per test file:
 * - by default the first failed CHECK ends the test (die(): "FAIL: file:line: cond" on stderr,
 *   exit 1), for tests where what follows a failure would only fail again or crash; CHECK_EQ
 *   says both values;
 * - with CHECK_COUNTS defined before the include, a failed CHECK is said on stderr and counted in
 *   `failures`, and the test goes on; the test's main reports the count and exits 1 if any. */
#ifndef SL_TESTS_UNIT_CHECK_H
#define SL_TESTS_UNIT_CHECK_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef CHECK_COUNTS
static int failures;

#define CHECK(cond)                                                                                          \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
			failures++;                                                                          \
		}                                                                                            \
	} while (0)
#else
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	va_start(ap, fmt);
	fprintf(stderr, "FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

#define CHECK(cond)                                                                                          \
	do {                                                                                                 \
		if (!(cond))                                                                                 \
			die("%s:%d: %s", __FILE__, __LINE__, #cond);                                         \
	} while (0)
#define CHECK_EQ(a, b)                                                                                       \
	do {                                                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);                                          \
		if (a_ != b_)                                                                                \
			die("%s:%d: %s == %lld, want %lld", __FILE__, __LINE__, #a, a_, b_);                 \
	} while (0)
#endif
#endif
