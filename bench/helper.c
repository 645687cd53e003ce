/*
 * bench/helper.c: the small static workload and timing helper used by bench/overhead.
 *
 * Built by bench/overhead with `gcc -O2 -static` into build/bench/helper, and copied into the
 * benchmark workspace so the same binary runs bare, under bubblewrap and under sightline.
 *
 *   helper noop                      exit 0 at once (the exec target of `forkexec`)
 *   helper open N PATH               N x (openat(AT_FDCWD, PATH, O_RDONLY) + close)
 *   helper forkexec N                N x (fork; child execs argv[0] with "noop"; parent waits)
 *   helper time CMD [ARGS...]        run CMD once, print its wall time in seconds on stderr
 *   helper repeat N CMD [ARGS...]    run CMD N times in turn, print the mean wall time per run
 *
 * `time` and `repeat` are the harness (they run on the host, outside any sandbox); they print
 * the time as a bare decimal number of seconds on fd 3 when fd 3 is open, else on stderr, so the
 * workload's own output is never mixed into the measurement. They fail (exit 1) if any run of CMD
 * exits non-zero or is killed: a failed run must never be reported as a fast one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long parse_count(const char *s)
{
	char *end;
	errno = 0;
	long n = strtol(s, &end, 10);
	if (errno || *end || n <= 0) {
		fprintf(stderr, "helper: bad count '%s'\n", s);
		exit(2);
	}
	return n;
}

/* Fork, exec argv, wait. Returns 0 when the child exited 0. */
static int run_once(char **argv)
{
	pid_t pid = fork();
	if (pid < 0) {
		perror("helper: fork");
		return -1;
	}
	if (pid == 0) {
		execv(argv[0], argv);
		fprintf(stderr, "helper: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			perror("helper: waitpid");
			return -1;
		}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (WIFEXITED(st))
			fprintf(stderr, "helper: %s exited %d\n", argv[0], WEXITSTATUS(st));
		else
			fprintf(stderr, "helper: %s killed by signal %d\n", argv[0], WTERMSIG(st));
		return -1;
	}
	return 0;
}

static void report(double seconds)
{
	/* fd 3 if the caller opened it (bench/overhead does), else stderr. */
	int fd = fcntl(3, F_GETFD) >= 0 ? 3 : 2;
	dprintf(fd, "%.6f\n", seconds);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: helper noop | open N PATH | forkexec N | time CMD... | repeat N CMD...\n");
		return 2;
	}
	const char *mode = argv[1];

	if (!strcmp(mode, "noop"))
		return 0;

	if (!strcmp(mode, "open") && argc == 4) {
		long n = parse_count(argv[2]);
		for (long i = 0; i < n; i++) {
			int fd = openat(AT_FDCWD, argv[3], O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				fprintf(stderr, "helper: openat %s: %s\n", argv[3], strerror(errno));
				return 1;
			}
			close(fd);
		}
		return 0;
	}

	if (!strcmp(mode, "forkexec") && argc == 3) {
		long n = parse_count(argv[2]);
		/* argv[0] is the path this helper was started by (absolute, given by the caller). */
		char *child[] = {argv[0], "noop", NULL};
		for (long i = 0; i < n; i++)
			if (run_once(child))
				return 1;
		return 0;
	}

	/* The harness's result pipe (fd 3) must not leak into the measured command. */
	if (fcntl(3, F_GETFD) >= 0)
		fcntl(3, F_SETFD, FD_CLOEXEC);

	if (!strcmp(mode, "time") && argc >= 3) {
		double t0 = now();
		if (run_once(argv + 2))
			return 1;
		report(now() - t0);
		return 0;
	}

	if (!strcmp(mode, "repeat") && argc >= 4) {
		long n = parse_count(argv[2]);
		double t0 = now();
		for (long i = 0; i < n; i++)
			if (run_once(argv + 3))
				return 1;
		report((now() - t0) / (double)n);
		return 0;
	}

	fprintf(stderr, "helper: bad arguments for '%s'\n", mode);
	return 2;
}
