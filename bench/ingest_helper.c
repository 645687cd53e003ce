/*
 * bench/ingest_helper.c: the static workload used by bench/ingest.
 *
 * Built by bench/ingest with `gcc -O2 -static` into build/bench/ingest_helper and copied into the
 * benchmark workspace (owned by 65534, since root runs workloads as nobody).
 *
 *   ingest_helper open N PATH
 *       N x (openat(AT_FDCWD, PATH, O_RDONLY) + close), as fast as the sandbox lets it.
 *
 *   ingest_helper paced RATE SECONDS BURST PATH
 *       RATE x SECONDS opens of PATH in all, BURST at a time; burst k may start no earlier than
 *       t0 + k * BURST / RATE (clock_nanosleep to an absolute CLOCK_MONOTONIC deadline), so the
 *       long-run rate is RATE/s. A burst that starts late is not made up by a faster burst; the
 *       schedule simply catches up by not sleeping. Prints one line on stdout:
 *         paced: N opens in S s = R/s (target RATE/s), behind schedule at most M ms
 *
 * Any failed open exits 1: a workload that stops opening must not look like a paced one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long parse_count(const char *s)
{
	char *end;
	errno = 0;
	long n = strtol(s, &end, 10);
	if (errno || *end || n <= 0) {
		fprintf(stderr, "ingest_helper: bad count '%s'\n", s);
		exit(2);
	}
	return n;
}

static long long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void open_close(const char *path)
{
	int fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "ingest_helper: open %s: %s\n", path, strerror(errno));
		exit(1);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "open")) {
		long n = parse_count(argv[2]);
		for (long i = 0; i < n; i++)
			open_close(argv[3]);
		return 0;
	}
	if (argc == 6 && !strcmp(argv[1], "paced")) {
		long rate = parse_count(argv[2]), secs = parse_count(argv[3]), burst = parse_count(argv[4]);
		const char *path = argv[5];
		long total = rate * secs;
		long long period_ns = (long long)burst * 1000000000LL / rate; /* one burst's share of time */
		long long t0 = mono_ns(), worst_late = 0;
		long done = 0;
		for (long k = 0; done < total; k++) {
			long long due = t0 + k * period_ns;
			long long now = mono_ns();
			if (now < due) {
				struct timespec ts = {.tv_sec = due / 1000000000LL, .tv_nsec = due % 1000000000LL};
				while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
					;
			} else if (now - due > worst_late) {
				worst_late = now - due;
			}
			for (long i = 0; i < burst && done < total; i++, done++)
				open_close(path);
		}
		double el = (double)(mono_ns() - t0) / 1e9;
		printf("paced: %ld opens in %.3f s = %.0f/s (target %ld/s), behind schedule at most %.1f ms\n", done, el,
		       (double)done / el, rate, (double)worst_late / 1e6);
		return 0;
	}
	fprintf(stderr, "usage: ingest_helper open N PATH | paced RATE SECONDS BURST PATH\n");
	return 2;
}
