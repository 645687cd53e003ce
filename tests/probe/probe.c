/* probe: a tiny static program the tests run inside the sandbox. Each action performs one thing
 * and prints "RESULT <action> OK" or "RESULT <action> <ERRNO_NAME>"; it exits 0 on success and
 * with the errno otherwise, so a test can assert the exact errno. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dirent.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <termios.h>
#include <unistd.h>

static int report(const char *what, int rc)
{
	int e = rc < 0 ? errno : 0;
	if (e) {
		const char *n = strerrorname_np(e);
		printf("RESULT %s %s\n", what, n ? n : "E?");
	} else {
		printf("RESULT %s OK\n", what);
	}
	fflush(stdout);
	return e;
}

static int do_connect(int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int r = connect(s, (struct sockaddr *)&a, sizeof(a));
	int e = errno;
	close(s);
	errno = e;
	return r;
}

/* ---- race: threads open a path buffer that another thread keeps flipping ---------------------- */
static char race_buf[256];
static char race_a[256], race_b[256];
static atomic_int race_stop;
static int race_per_thread;
struct race_log {
	int tid;
	int n;
	char (*content)[32];
	int *fd;
};

static void *flipper(void *arg)
{
	(void)arg;
	size_t len = strlen(race_a) + 1;
	while (!atomic_load(&race_stop)) {
		/* The barriers keep the compiler from dropping the first copy as a dead store. */
		memcpy(race_buf, race_a, len);
		__asm__ volatile("" ::: "memory");
		memcpy(race_buf, race_b, len);
		__asm__ volatile("" ::: "memory");
	}
	return NULL;
}

static void *opener(void *arg)
{
	struct race_log *l = arg;
	l->tid = (int)syscall(SYS_gettid);
	for (int i = 0; i < race_per_thread; i++) {
		int fd = open(race_buf, O_RDONLY);
		l->fd[l->n] = fd;
		l->content[l->n][0] = '\0';
		if (fd >= 0) {
			ssize_t n = read(fd, l->content[l->n], 31);
			l->content[l->n][n > 0 ? n : 0] = '\0';
			char *nl = strchr(l->content[l->n], '\n');
			if (nl)
				*nl = '\0';
			close(fd);
		} else {
			snprintf(l->content[l->n], 32, "ERR%d", errno);
		}
		l->n++;
	}
	return NULL;
}

static int race(int total, int threads, const char *a, const char *b)
{
	if (strlen(a) != strlen(b) || strlen(a) >= sizeof(race_a))
		return fprintf(stderr, "race: paths must have equal length\n"), 2;
	snprintf(race_a, sizeof(race_a), "%s", a);
	snprintf(race_b, sizeof(race_b), "%s", b);
	snprintf(race_buf, sizeof(race_buf), "%s", a);
	race_per_thread = total / threads;
	pthread_t fl, th[16];
	struct race_log logs[16];
	pthread_create(&fl, NULL, flipper, NULL);
	for (int t = 0; t < threads; t++) {
		logs[t].n = 0;
		logs[t].content = calloc((size_t)race_per_thread, 32);
		logs[t].fd = calloc((size_t)race_per_thread, sizeof(int));
		pthread_create(&th[t], NULL, opener, &logs[t]);
	}
	for (int t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	atomic_store(&race_stop, 1);
	pthread_join(fl, NULL);
	/* One line per open, in order per thread: TID FD CONTENT */
	for (int t = 0; t < threads; t++)
		for (int i = 0; i < logs[t].n; i++)
			printf("OPEN %d %d %s\n", logs[t].tid, logs[t].fd[i], logs[t].content[i]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: probe ACTION [ARGS]\n");
		return 2;
	}
	const char *a = argv[1];
	if (!strcmp(a, "noop"))
		return 0;
	if (!strcmp(a, "read") && argc == 3) {
		int fd = open(argv[2], O_RDONLY);
		if (fd >= 0) {
			char buf[256];
			ssize_t n = read(fd, buf, sizeof(buf) - 1);
			buf[n > 0 ? n : 0] = '\0';
			printf("CONTENT %s\n", buf);
		}
		return report("read", fd);
	}
	if (!strcmp(a, "write") && argc == 3)
		return report("write", open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644));
	if (!strcmp(a, "mkdir") && argc == 3)
		return report("mkdir", mkdir(argv[2], 0755));
	if (!strcmp(a, "unlink") && argc == 3)
		return report("unlink", unlink(argv[2]));
	if (!strcmp(a, "connect") && argc == 3)
		return report("connect", do_connect(atoi(argv[2])));
	if (!strcmp(a, "ptrace") && argc == 3)
		return report("ptrace", (int)ptrace(PTRACE_ATTACH, atoi(argv[2]), 0, 0));
	if (!strcmp(a, "ptrace-traceme"))
		return report("ptrace", (int)ptrace(PTRACE_TRACEME, 0, 0, 0));
	if (!strcmp(a, "kill") && argc == 3)
		return report("kill", kill(atoi(argv[2]), SIGKILL));
	if (!strcmp(a, "kill-all"))
		return report("kill-all", kill(-1, SIGTERM) == 0 && 0);
	if (!strcmp(a, "mount"))
		return report("mount", mount("tmpfs", "/tmp", "tmpfs", 0, NULL));
	if (!strcmp(a, "umount"))
		return report("umount", umount2("/proc", MNT_DETACH));
	if (!strcmp(a, "io_uring")) {
		char params[120] = {0};
		return report("io_uring", (int)syscall(SYS_io_uring_setup, 8, params));
	}
	if (!strcmp(a, "userns"))
		return report("userns", unshare(CLONE_NEWUSER));
	if (!strcmp(a, "clone-userns")) {
		long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
		if (r == 0)
			_exit(0);
		if (r > 0)
			waitpid((pid_t)r, NULL, 0);
		return report("clone-userns", r < 0 ? -1 : 0);
	}
	if (!strcmp(a, "bpf"))
		return report("bpf", (int)syscall(SYS_bpf, 0, NULL, 0));
	if (!strcmp(a, "tiocsti")) {
		char c = 'x';
		return report("tiocsti", ioctl(0, TIOCSTI, &c));
	}
	if (!strcmp(a, "setns"))
		return report("setns", (int)syscall(SYS_setns, 0, 0));
	if (!strcmp(a, "listproc")) {
		DIR *d = opendir("/proc");
		if (!d)
			return report("listproc", -1);
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
				printf("PID %s\n", e->d_name);
		closedir(d);
		return report("listproc", 0);
	}
	if (!strcmp(a, "opens") && argc == 4) {
		int n = atoi(argv[2]), ok = 0;
		for (int i = 0; i < n; i++) {
			int fd = open(argv[3], O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				ok++;
				close(fd);
			}
		}
		printf("COUNT opens %d\n", ok);
		return ok == n ? 0 : 1;
	}
	if (!strcmp(a, "execs") && argc == 3) {
		int n = atoi(argv[2]), ok = 0;
		for (int i = 0; i < n; i++) {
			pid_t p = fork();
			if (p == 0) {
				execl("/proc/self/exe", "probe", "noop", (char *)NULL);
				_exit(127);
			}
			int st;
			if (p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0)
				ok++;
		}
		printf("COUNT execs %d\n", ok);
		return ok == n ? 0 : 1;
	}
	if (!strcmp(a, "connects") && argc == 4) {
		int n = atoi(argv[2]), port = atoi(argv[3]), tried = 0;
		for (int i = 0; i < n; i++) {
			do_connect(port);
			tried++;
		}
		printf("COUNT connects %d\n", tried);
		return 0;
	}
	if (!strcmp(a, "exec") && argc == 3) {
		/* exec PATH; if it fails, report, then make one more (notified) syscall so the
		 * sensor can notice the exec it recorded did not happen. */
		execl(argv[2], argv[2], (char *)NULL);
		int e = report("exec", -1);
		close(open("/dev/null", O_RDONLY));
		return e;
	}
	if (!strcmp(a, "fastopen") && argc == 3) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return report("fastopen", (int)sendto(s, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&sa, sizeof(sa)));
	}
	if (!strcmp(a, "sigmask")) {
		sigset_t cur;
		sigprocmask(SIG_BLOCK, NULL, &cur);
		int blocked = 0;
		for (int i = 1; i < 64; i++)
			blocked += sigismember(&cur, i) == 1;
		printf("BLOCKED %d\n", blocked);
		return 0;
	}
	if (!strcmp(a, "race") && argc == 6)
		return race(atoi(argv[2]), atoi(argv[3]), argv[4], argv[5]);
	fprintf(stderr, "probe: unknown action %s\n", a);
	return 2;
}
