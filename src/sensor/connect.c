/* Connects. The sensor reads the address once and checks the port policy on its copy. An inet or
 * abstract-unix connect is then performed by the sensor on the workload's own socket (taken
 * from the calling thread's fd table with pidfd_getfd) with that copy: the socket lives in the
 * sandbox's network namespace, so the connect goes exactly where the workload's would, and the
 * record names exactly where it went. A blocking connect runs on a worker thread so it cannot
 * stall the sensor. A path-based unix socket must be resolved in the workload's filesystem, so
 * the kernel does that one (recorded with "exact": false). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/kabi.h"
#include "sensor/internal.h"

struct conn_req {
	uint64_t id;
	pid_t tid;
	int nr;
	int sockfd; /* our duplicate of the workload's socket, or -1 */
	struct sl_task_info ti;
	struct sockaddr_storage ss;
	socklen_t alen;
	char host[128];
	const char *family;
	unsigned port;
	bool inet, emulate, exact;
	int sotype;
};

static bool port_allowed(const struct sl_policy *p, unsigned port)
{
	for (size_t i = 0; i < p->n_tcp_connect; i++)
		if (p->tcp_connect[i] == port)
			return true;
	return false;
}

/* Record and answer. result: 0, -errno, or 1 for "continued to the kernel". */
static void finish(struct sl_supervisor *s, struct conn_req *q, int result, const char *deny_reason)
{
	struct sl_json j;
	sl_json_init(&j);
	sl_json_task(&j, q->tid, &q->ti);
	sl_json_str(&j, "family", q->family, 0);
	sl_json_str(&j, "address", q->host, 0);
	if (q->inet)
		sl_json_uint(&j, "port", q->port);
	if (q->sotype)
		sl_json_str(&j, "type", q->sotype == SOCK_STREAM ? "stream" : q->sotype == SOCK_DGRAM ? "dgram" : "other",
			    0);
	if (result <= 0) {
		sl_json_int(&j, "result", result);
		if (result < 0)
			sl_json_str(&j, "errno", sl_errno_name(-result), 0);
	} else {
		sl_json_null(&j, "result"); /* decided by the kernel after this record */
	}
	sl_json_bool(&j, "exact", q->exact);
	sl_json_ocsf(&j, 4001, deny_reason ? 5 /* Refuse */ : 1 /* Open */, deny_reason ? 2 : 1);
	atomic_fetch_add(&s->c.connect, 1);
	if (!q->exact)
		atomic_fetch_add(&s->c.inexact, 1);
	int er = sl_emit(s, "network.connect", &j);
	sl_json_free(&j);
	if (er == 0 && deny_reason) {
		char where[160];
		snprintf(where, sizeof(where), "%s:%u", q->host, q->port);
		er = sl_deny_event(s, q->tid, &q->ti, q->nr, "supervisor", -result, deny_reason, where, 4001, 5);
	}
	if (er < 0)
		sl_respond(s, q->id, 0, EIO, false);
	else if (result <= 0)
		sl_respond(s, q->id, 0, -result, false);
	else
		sl_respond(s, q->id, 0, 0, true);
}

static void perform(struct sl_supervisor *s, void *arg)
{
	struct conn_req *q = arg;
	int r = connect(q->sockfd, (struct sockaddr *)&q->ss, q->alen) < 0 ? -errno : 0;
	close(q->sockfd);
	finish(s, q, r, NULL);
	free(q);
}

void sl_handle_connect(struct sl_supervisor *s, const struct seccomp_notif *n, const struct sl_task_info *ti)
{
	uint64_t alen = n->data.args[2] & 0xffffffffu;
	if (alen > sizeof(struct sockaddr_storage) || alen < sizeof(sa_family_t)) {
		sl_respond(s, n->id, 0, EINVAL, false);
		return;
	}
	struct conn_req *q = calloc(1, sizeof(*q));
	if (!q) {
		sl_respond(s, n->id, 0, ENOMEM, false);
		return;
	}
	q->id = n->id;
	q->tid = n->pid;
	q->nr = n->data.nr;
	q->ti = *ti;
	q->sockfd = -1;
	q->alen = (socklen_t)alen;
	q->exact = true;
	q->family = "other";
	int mr = sl_mem_read(n->pid, n->data.args[1], &q->ss, alen);
	if (!sl_id_valid(s, n->id)) {
		free(q);
		return;
	}
	if (mr < 0) {
		sl_respond(s, n->id, 0, EFAULT, false);
		free(q);
		return;
	}
	if (q->ss.ss_family == AF_INET && alen >= sizeof(struct sockaddr_in)) {
		struct sockaddr_in *in = (struct sockaddr_in *)&q->ss;
		inet_ntop(AF_INET, &in->sin_addr, q->host, sizeof(q->host));
		q->port = ntohs(in->sin_port);
		q->family = "inet";
		q->inet = q->emulate = true;
	} else if (q->ss.ss_family == AF_INET6 && alen >= sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&q->ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, q->host, sizeof(q->host));
		q->port = ntohs(in6->sin6_port);
		q->family = "inet6";
		q->inet = q->emulate = true;
	} else if (q->ss.ss_family == AF_UNIX) {
		struct sockaddr_un *un = (struct sockaddr_un *)&q->ss;
		size_t plen = alen - offsetof(struct sockaddr_un, sun_path);
		q->family = "unix";
		if (plen > 0 && un->sun_path[0] == '\0') {
			/* Abstract: looked up in the socket's own (the sandbox's) network namespace. */
			snprintf(q->host, sizeof(q->host), "@%.*s", (int)(plen - 1 < 40 ? plen - 1 : 40), un->sun_path + 1);
			q->emulate = true;
		} else {
			snprintf(q->host, sizeof(q->host), "%.*s", (int)(plen < 100 ? plen : 100), un->sun_path);
			q->exact = false;
		}
	} else {
		q->exact = false;
	}
	if (q->inet && !port_allowed(s->policy, q->port)) {
		finish(s, q, -EACCES, "destination port not allowed by the policy");
		free(q);
		return;
	}
	if (!q->emulate) {
		finish(s, q, 1, NULL);
		free(q);
		return;
	}
	/* The calling thread's fd table (a thread may have unshared it), not the leader's. */
	int pfd = (int)syscall(SYS_pidfd_open, n->pid, PIDFD_THREAD);
	q->sockfd = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, (int)n->data.args[0], 0);
	int e = errno;
	if (pfd >= 0)
		close(pfd);
	if (q->sockfd < 0) {
		finish(s, q, e == EBADF ? -EBADF : -ENOTSOCK, NULL);
		free(q);
		return;
	}
	socklen_t sl = sizeof(q->sotype);
	if (getsockopt(q->sockfd, SOL_SOCKET, SO_TYPE, &q->sotype, &sl) < 0) {
		close(q->sockfd);
		finish(s, q, -ENOTSOCK, NULL);
		free(q);
		return;
	}
	int fl = fcntl(q->sockfd, F_GETFL);
	if (fl >= 0 && !(fl & O_NONBLOCK)) {
		/* A blocking connect can take as long as the peer wants: not on the sensor thread. */
		if (sl_worker_spawn(s, perform, q) == 0)
			return;
		close(q->sockfd);
		sl_gap_event(s, q->tid, &q->ti, q->nr, "too many blocking operations at once", EAGAIN);
		finish(s, q, -EAGAIN, NULL);
		free(q);
		return;
	}
	perform(s, q);
}
