/* The validator's listener. It belongs to the trusted side (a thread of the supervisor, outside the
 * sandbox's other namespaces and out of its reach) but must sit in the sandbox's network namespace,
 * because that namespace has only its own loopback: a connection the policy fails to block could
 * reach nothing else. Network namespace membership is per thread, so one thread does setns and the
 * rest of the supervisor is unaffected. */
#include "contract/listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"

struct sl_canary_listener {
	pthread_t th;
	pid_t pid;
	uint16_t port;
	int log_fd;
	int stop_pipe[2];
	/* start handshake */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool ready;
	int result;
};

static void lis_log(struct sl_canary_listener *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void lis_log(struct sl_canary_listener *l, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)sl_write_all(l->log_fd, line, (size_t)n);
	fdatasync(l->log_fd);
}

static void started(struct sl_canary_listener *l, int r)
{
	pthread_mutex_lock(&l->mu);
	l->ready = true;
	l->result = r;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

static void *run(void *arg)
{
	struct sl_canary_listener *l = arg;
	char ns[64];
	snprintf(ns, sizeof(ns), "/proc/%d/ns/net", (int)l->pid);
	int nfd = open(ns, O_RDONLY | O_CLOEXEC);
	if (nfd < 0 || setns(nfd, CLONE_NEWNET) < 0) {
		int r = -errno;
		if (nfd >= 0)
			close(nfd);
		started(l, r);
		return NULL;
	}
	close(nfd);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(l->port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int one = 1;
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0) {
		int r = -errno;
		if (lfd >= 0)
			close(lfd);
		started(l, r);
		return NULL;
	}
	lis_log(l, "listening 127.0.0.1:%u", l->port);
	started(l, 0);
	for (;;) {
		struct pollfd pf[2] = {{.fd = lfd, .events = POLLIN},
				       {.fd = l->stop_pipe[0], .events = POLLIN}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents)
			break;
		struct sockaddr_in peer;
		socklen_t pl = sizeof(peer);
		int cfd = accept4(lfd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		char a[INET_ADDRSTRLEN] = "?";
		inet_ntop(AF_INET, &peer.sin_addr, a, sizeof(a));
		lis_log(l, "connection from %s:%u", a, ntohs(peer.sin_port));
		/* Whatever arrives within 200 ms is counted, never interpreted. */
		size_t total = 0;
		char buf[4096];
		struct pollfd cp = {.fd = cfd, .events = POLLIN};
		while (poll(&cp, 1, 200) > 0) {
			ssize_t n = recv(cfd, buf, sizeof(buf), 0);
			if (n <= 0)
				break;
			total += (size_t)n;
		}
		lis_log(l, "received %zu bytes", total);
		close(cfd);
	}
	close(lfd);
	return NULL;
}

int sl_canary_listener_start(pid_t pid, uint16_t port, const char *log_path, struct sl_canary_listener **out)
{
	*out = NULL;
	if (!port || !log_path)
		return -EINVAL;
	struct sl_canary_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->pid = pid;
	l->port = port;
	l->stop_pipe[0] = l->stop_pipe[1] = -1;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	int r;
	l->log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (l->log_fd < 0 || pipe2(l->stop_pipe, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	/* The thread takes no signal meant for the supervisor's main thread. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = -pthread_create(&l->th, NULL, run, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		goto fail;
	pthread_mutex_lock(&l->mu);
	while (!l->ready)
		pthread_cond_wait(&l->cv, &l->mu);
	r = l->result;
	pthread_mutex_unlock(&l->mu);
	if (r < 0) {
		pthread_join(l->th, NULL);
		goto fail;
	}
	*out = l;
	return 0;
fail:
	if (l->log_fd >= 0)
		close(l->log_fd);
	if (l->stop_pipe[0] >= 0) {
		close(l->stop_pipe[0]);
		close(l->stop_pipe[1]);
	}
	free(l);
	return r;
}

void sl_canary_listener_stop(struct sl_canary_listener *l)
{
	if (!l)
		return;
	(void)!write(l->stop_pipe[1], "x", 1);
	pthread_join(l->th, NULL);
	close(l->stop_pipe[0]);
	close(l->stop_pipe[1]);
	close(l->log_fd);
	free(l);
}
