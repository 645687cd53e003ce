/* The validator's export relay: one thread, poll over the listening socket and up to 32 relayed
 * pairs. Commands come over a pipe and are acknowledged over another, so a cut is complete (every
 * relayed connection closed, the listener gone) when sl_relay_cut returns. */
#include "contract/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_PAIRS 32

struct sl_relay {
	pthread_t th;
	char lpath[108], tpath[108];
	int lfd;
	int cmd[2], ack[2];
	int a[MAX_PAIRS], b[MAX_PAIRS];
};

static int unix_listen(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&un, sizeof(un)) < 0 || listen(fd, 16) < 0) {
		int r = -errno;
		if (fd >= 0)
			close(fd);
		return r;
	}
	return fd;
}

static void close_pair(struct sl_relay *r, int i)
{
	if (r->a[i] >= 0)
		close(r->a[i]);
	if (r->b[i] >= 0)
		close(r->b[i]);
	r->a[i] = r->b[i] = -1;
}

static void *run(void *arg)
{
	struct sl_relay *r = arg;
	char buf[65536];
	for (;;) {
		struct pollfd pf[2 + 2 * MAX_PAIRS];
		int n = 0;
		pf[n++] = (struct pollfd){.fd = r->cmd[0], .events = POLLIN};
		pf[n++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
		for (int i = 0; i < MAX_PAIRS; i++) {
			pf[n++] = (struct pollfd){.fd = r->a[i], .events = POLLIN};
			pf[n++] = (struct pollfd){.fd = r->b[i], .events = POLLIN};
		}
		if (poll(pf, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[0].revents) {
			char c = 0;
			if (read(r->cmd[0], &c, 1) != 1 || c == 'q')
				break;
			if (c == 'c') {
				for (int i = 0; i < MAX_PAIRS; i++)
					close_pair(r, i);
				if (r->lfd >= 0)
					close(r->lfd);
				r->lfd = -1;
				unlink(r->lpath);
			} else if (c == 'r' && r->lfd < 0) {
				r->lfd = unix_listen(r->lpath);
			}
			(void)!write(r->ack[1], "k", 1);
			continue;
		}
		if (r->lfd >= 0 && pf[1].revents) {
			int cfd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (cfd >= 0) {
				int tfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
				struct sockaddr_un un = {.sun_family = AF_UNIX};
				snprintf(un.sun_path, sizeof(un.sun_path), "%s", r->tpath);
				int slot = -1;
				for (int i = 0; i < MAX_PAIRS && slot < 0; i++)
					if (r->a[i] < 0)
						slot = i;
				if (tfd < 0 || slot < 0 ||
				    connect(tfd, (struct sockaddr *)&un, sizeof(un)) < 0) {
					close(cfd);
					if (tfd >= 0)
						close(tfd);
				} else {
					r->a[slot] = cfd;
					r->b[slot] = tfd;
				}
			}
		}
		for (int i = 0; i < MAX_PAIRS; i++) {
			for (int side = 0; side < 2; side++) {
				struct pollfd *p = &pf[2 + 2 * i + side];
				if (p->fd < 0 || !p->revents || r->a[i] < 0)
					continue;
				int from = side ? r->b[i] : r->a[i], to = side ? r->a[i] : r->b[i];
				ssize_t got = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
				if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
					close_pair(r, i);
					continue;
				}
				if (got > 0) {
					size_t off = 0;
					while (off < (size_t)got) {
						ssize_t w =
						    send(to, buf + off, (size_t)got - off, MSG_NOSIGNAL);
						if (w <= 0)
							break;
						off += (size_t)w;
					}
					if (off < (size_t)got)
						close_pair(r, i);
				}
			}
		}
	}
	for (int i = 0; i < MAX_PAIRS; i++)
		close_pair(r, i);
	if (r->lfd >= 0)
		close(r->lfd);
	unlink(r->lpath);
	return NULL;
}

int sl_relay_start(const char *listen_path, const char *target_path, struct sl_relay **out)
{
	*out = NULL;
	if (strlen(listen_path) >= 108 || strlen(target_path) >= 108)
		return -ENAMETOOLONG;
	struct sl_relay *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	snprintf(r->lpath, sizeof(r->lpath), "%s", listen_path);
	snprintf(r->tpath, sizeof(r->tpath), "%s", target_path);
	for (int i = 0; i < MAX_PAIRS; i++)
		r->a[i] = r->b[i] = -1;
	r->cmd[0] = r->cmd[1] = r->ack[0] = r->ack[1] = -1;
	int e = 0;
	r->lfd = unix_listen(listen_path);
	if (r->lfd < 0)
		e = r->lfd;
	else if (pipe2(r->cmd, O_CLOEXEC) < 0 || pipe2(r->ack, O_CLOEXEC) < 0)
		e = -errno;
	if (!e) {
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		e = -pthread_create(&r->th, NULL, run, r);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (e) {
		if (r->lfd >= 0)
			close(r->lfd);
		for (int i = 0; i < 2; i++) {
			if (r->cmd[i] >= 0)
				close(r->cmd[i]);
			if (r->ack[i] >= 0)
				close(r->ack[i]);
		}
		free(r);
		return e;
	}
	*out = r;
	return 0;
}

static int command(struct sl_relay *r, char c)
{
	char k;
	if (write(r->cmd[1], &c, 1) != 1 || read(r->ack[0], &k, 1) != 1)
		return -EIO;
	return 0;
}

int sl_relay_cut(struct sl_relay *r)
{
	return command(r, 'c');
}

int sl_relay_restore(struct sl_relay *r)
{
	return command(r, 'r');
}

void sl_relay_stop(struct sl_relay *r)
{
	if (!r)
		return;
	(void)!write(r->cmd[1], "q", 1);
	pthread_join(r->th, NULL);
	for (int i = 0; i < 2; i++) {
		close(r->cmd[i]);
		close(r->ack[i]);
	}
	free(r);
}
