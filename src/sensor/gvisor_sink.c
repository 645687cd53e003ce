/* The gVisor sink's socket, handshake and receive loop (see gvisor_sink.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "sensor/gvisor_map.h"
#include "sensor/gvisor_sink.h"

struct conn {
	int fd;
	bool handshaken;
	uint32_t last_dropped; /* the Sentry's cumulative dropped_count last seen */
	uint32_t reasons_seen; /* bit per reject reason already reported on this connection */
	bool foreign_seen;
};

int sl_gv_sink_listen(struct sl_gv_sink *s, const char *path)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(un.sun_path) || strlen(path) >= sizeof(s->path))
		return -ENAMETOOLONG;
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->lfd = -1;
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	/* 0600: runsc (root, or this uid) connects; nobody else may speak for this sandbox. */
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&un, sizeof(un));
	umask(old);
	/* The accepted socket's queue is bounded by the backlog for SEQPACKET: take the maximum. */
	if (r < 0 || listen(fd, 4096) < 0) {
		r = -errno;
		close(fd);
		unlink(path);
		return r;
	}
	s->lfd = fd;
	return 0;
}

static int emit(struct sl_gv_sink *s, const char *cls, struct sl_json *j)
{
	int r = sl_json_error(j);
	if (r == 0) {
		int64_t seq = sl_record_append(s->rec, cls, sl_now_realtime_ns(), j);
		r = seq < 0 ? (int)seq : 0;
	}
	if (r < 0) {
		int zero = 0;
		/* Fail closed: points that cannot be recorded stop the sandbox. */
		if (atomic_compare_exchange_strong(&s->fatal, &zero, r) && s->on_fatal)
			s->on_fatal(s->fatal_arg);
	} else if (!strcmp(cls, "sensor.gap")) {
		atomic_fetch_add(&s->c.gaps, 1);
	} else {
		atomic_fetch_add(&s->c.events, 1);
	}
	return r;
}

static void gap_ocsf(struct sl_json *j)
{
	sl_json_obj_open(j, "ocsf");
	sl_json_int(j, "class_uid", 2004);
	sl_json_int(j, "activity_id", 1);
	sl_json_obj_close(j);
}

static void reject(struct sl_gv_sink *s, struct conn *c, enum sl_gv_reject why, uint16_t type, size_t len)
{
	atomic_fetch_add(&s->c.rejected[why], 1);
	if (c->reasons_seen & (1u << why))
		return; /* counted; summed in one gap at the end (a hostile peer cannot flood the record) */
	c->reasons_seen |= 1u << why;
	struct sl_json j;
	sl_json_init(&j);
	sl_json_str(&j, "gap", "gvisor-malformed", 0);
	sl_json_str(&j, "reason", sl_gv_reject_name(why), 0);
	sl_json_uint(&j, "message_type", type);
	sl_json_uint(&j, "bytes", len);
	sl_json_str(&j, "detail",
		    "a datagram on the sandbox's monitoring socket was rejected (further rejections of this "
		    "reason on this connection are counted at the end)",
		    0);
	gap_ocsf(&j);
	emit(s, "sensor.gap", &j);
	sl_json_free(&j);
}

static void dropped(struct sl_gv_sink *s, struct conn *c, uint32_t now)
{
	/* Cumulative, wrapping at 2^32: the increase is the difference modulo 2^32. A value that
	 * goes "back" by less than 2^31 is a hostile or confused peer: not counted as loss. */
	uint32_t delta = now - c->last_dropped;
	if (delta == 0 || delta >= 0x80000000u)
		return;
	c->last_dropped = now;
	uint64_t total = atomic_fetch_add(&s->c.dropped, delta) + delta;
	struct sl_json j;
	sl_json_init(&j);
	sl_json_str(&j, "gap", "gvisor-dropped", 0);
	sl_json_uint(&j, "dropped", delta);
	sl_json_uint(&j, "dropped_total", total);
	sl_json_str(&j, "detail",
		    "the Sentry dropped points it could not send to the sink (its queue was full)", 0);
	gap_ocsf(&j);
	emit(s, "sensor.gap", &j);
	sl_json_free(&j);
}

static void foreign(struct sl_gv_sink *s, struct conn *c, const struct sl_gv_msg *m)
{
	atomic_fetch_add(&s->c.foreign, 1);
	if (c->foreign_seen)
		return;
	c->foreign_seen = true;
	struct sl_json j;
	sl_json_init(&j);
	sl_json_str(&j, "gap", "gvisor-foreign-container", 0);
	sl_json_uint(&j, "message_type", m->type);
	if (m->ctx.container_id.p)
		sl_json_strn(&j, "claimed_container_id", m->ctx.container_id.p, m->ctx.container_id.n, 80);
	else
		sl_json_null(&j, "claimed_container_id");
	sl_json_str(&j, "detail",
		    "a point that does not carry this sandbox's container id: not attributed to any sandbox "
		    "(further ones are counted at the end)",
		    0);
	gap_ocsf(&j);
	emit(s, "sensor.gap", &j);
	sl_json_free(&j);
}

static void point(struct sl_gv_sink *s, struct conn *c, const uint8_t *buf, size_t len)
{
	static __thread struct sl_gv_msg m; /* 1.5 KiB; one per sink thread */
	enum sl_gv_reject why = sl_gv_decode(buf, len, &m);
	if (why != SL_GV_OK) {
		reject(s, c, why, len >= 4 ? (uint16_t)(buf[2] | buf[3] << 8) : 0, len);
		return;
	}
	dropped(s, c, m.dropped);
	struct sl_gv_map_cfg cfg = {.container_id = s->cid, .policy = s->policy};
	struct sl_json j, deny;
	sl_json_init(&j);
	sl_json_init(&deny);
	const char *cls = NULL;
	int r = sl_gv_map(&m, &cfg, &j, &cls, &deny);
	if (r == -EXDEV) {
		foreign(s, c, &m);
	} else if (r == 0) {
		atomic_fetch_add(&s->c.no_event, 1);
		if (m.type == SL_GV_SYSCALL_EXECVE && m.has_exit && m.errorno)
			atomic_fetch_add(&s->c.exec_failed, 1);
		if (m.type == SL_GV_SYSCALL_CONNECT && !m.has_exit)
			atomic_fetch_add(&s->c.connect_enter, 1);
	} else if (r > 0) {
		if (m.type == SL_GV_CONTAINER_START)
			atomic_fetch_add(&s->c.starts, 1);
		if (m.type == SL_GV_SYSCALL_OPEN)
			atomic_fetch_add(&s->c.open, 1);
		if (m.type == SL_GV_SENTRY_EXEC || m.type == SL_GV_CONTAINER_START)
			atomic_fetch_add(&s->c.exec, 1);
		if (m.type == SL_GV_SYSCALL_CONNECT)
			atomic_fetch_add(&s->c.connect, 1);
		if (emit(s, cls, &j) == 0 && r == 2 && emit(s, "policy.deny", &deny) == 0)
			atomic_fetch_add(&s->c.deny, 1);
	}
	sl_json_free(&j);
	sl_json_free(&deny);
}

/* Read what is queued on one connection. Returns false when it is finished (EOF, error, bad
 * handshake). */
static bool conn_read(struct sl_gv_sink *s, struct conn *c, uint8_t *buf)
{
	for (int i = 0; i < 512; i++) { /* bounded: other connections and the stop pipe get a turn */
		ssize_t n = recv(c->fd, buf, SL_GV_SINK_MSG_MAX, MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		if (n == 0)
			return false;
		atomic_fetch_add(&s->c.datagrams, 1);
		if ((size_t)n > SL_GV_SINK_MSG_MAX) {
			reject(s, c, SL_GV_R_TOO_BIG, (uint16_t)(buf[2] | buf[3] << 8), (size_t)n);
			continue;
		}
		if (!c->handshaken) {
			uint32_t ver;
			enum sl_gv_reject why = sl_gv_handshake(buf, (size_t)n, &ver);
			if (why != SL_GV_OK) {
				/* Not the protocol we speak: nothing after it can be trusted to be framed. */
				reject(s, c, SL_GV_R_BAD_HANDSHAKE, 0, (size_t)n);
				return false;
			}
			if (send(c->fd, SL_GV_HANDSHAKE_REPLY, SL_GV_HANDSHAKE_REPLY_LEN, MSG_NOSIGNAL) < 0)
				return false;
			c->handshaken = true;
			atomic_fetch_add(&s->c.handshakes, 1);
			continue;
		}
		point(s, c, buf, (size_t)n);
	}
	return true;
}

struct sink_thread_arg {
	struct sl_gv_sink *s;
	unsigned linger_ms;
};

static void *sink_main(void *arg)
{
	struct sl_gv_sink *s = arg;
	struct conn conns[SL_GV_SINK_MAX_CONN];
	size_t n = 0;
	uint8_t *buf = malloc(SL_GV_SINK_MSG_MAX);
	if (!buf) {
		int zero = 0;
		atomic_compare_exchange_strong(&s->fatal, &zero, -ENOMEM);
		if (s->on_fatal)
			s->on_fatal(s->fatal_arg);
		return NULL;
	}
	int64_t deadline = 0;
	for (;;) {
		struct pollfd pf[2 + SL_GV_SINK_MAX_CONN];
		pf[0] = (struct pollfd){.fd = deadline ? -1 : s->lfd, .events = POLLIN};
		pf[1] = (struct pollfd){.fd = s->stop_pipe[0], .events = POLLIN};
		for (size_t i = 0; i < n; i++)
			pf[2 + i] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
		int timeout = -1;
		if (deadline) {
			if (n == 0)
				break;
			int64_t left = (deadline - sl_now_monotonic_ns()) / 1000000;
			if (left <= 0)
				break;
			timeout = (int)left;
		}
		int pr = poll(pf, 2 + n, timeout);
		if (pr < 0 && errno != EINTR)
			break;
		if (pr <= 0)
			continue;
		if (pf[1].revents) {
			unsigned ms = 0;
			if (read(s->stop_pipe[0], &ms, sizeof(ms)) != sizeof(ms))
				ms = 0;
			deadline = sl_now_monotonic_ns() + (int64_t)ms * 1000000 + 1;
		}
		if (pf[0].revents) {
			int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (fd >= 0 && n < SL_GV_SINK_MAX_CONN) {
				int rb = SL_GV_SINK_RCVBUF;
				setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb));
				conns[n++] = (struct conn){.fd = fd};
				atomic_fetch_add(&s->c.connections, 1);
			} else if (fd >= 0) {
				close(fd); /* bounded: a peer cannot make us hold unlimited connections */
				atomic_fetch_add(&s->c.rejected[SL_GV_R_BAD_HANDSHAKE], 1);
			}
		}
		for (size_t i = 0; i < n;) {
			if (pf[2 + i].revents && !conn_read(s, &conns[i], buf)) {
				close(conns[i].fd);
				conns[i] = conns[--n];
				pf[2 + i] = pf[2 + n]; /* keep the revents of the one moved here */
				continue;
			}
			i++;
		}
	}
	for (size_t i = 0; i < n; i++)
		close(conns[i].fd);
	free(buf);
	return NULL;
}

int sl_gv_sink_start(struct sl_gv_sink *s)
{
	snprintf(s->cid, sizeof(s->cid), "%s", s->container_id ? s->container_id : "");
	if (pipe2(s->stop_pipe, O_CLOEXEC) < 0)
		return -errno;
	int r = pthread_create(&s->thread, NULL, sink_main, s);
	if (r) {
		close(s->stop_pipe[0]);
		close(s->stop_pipe[1]);
		s->stop_pipe[0] = s->stop_pipe[1] = -1;
		return -r;
	}
	s->running = true;
	return 0;
}

void sl_gv_sink_stop(struct sl_gv_sink *s, unsigned linger_ms)
{
	if (s->running) {
		(void)!write(s->stop_pipe[1], &linger_ms, sizeof(linger_ms));
		pthread_join(s->thread, NULL);
		s->running = false;
	}
	if (s->stop_pipe[0] >= 0) {
		close(s->stop_pipe[0]);
		close(s->stop_pipe[1]);
		s->stop_pipe[0] = s->stop_pipe[1] = -1;
	}
	if (s->lfd >= 0) {
		close(s->lfd);
		unlink(s->path);
		s->lfd = -1;
	}
	if (!s->rec || atomic_load(&s->fatal))
		return;
	struct sl_json j;
	sl_json_init(&j);
	uint64_t total = 0;
	for (int i = 1; i < SL_GV_R_COUNT; i++)
		total += atomic_load(&s->c.rejected[i]);
	if (total || atomic_load(&s->c.foreign)) {
		sl_json_str(&j, "gap", "gvisor-rejected-total", 0);
		sl_json_uint(&j, "rejected", total);
		sl_json_uint(&j, "foreign", atomic_load(&s->c.foreign));
		sl_json_obj_open(&j, "reasons");
		for (int i = 1; i < SL_GV_R_COUNT; i++)
			if (atomic_load(&s->c.rejected[i]))
				sl_json_uint(&j, sl_gv_reject_name((enum sl_gv_reject)i),
					     atomic_load(&s->c.rejected[i]));
		sl_json_obj_close(&j);
		sl_json_str(&j, "detail",
			    "datagrams on the monitoring socket that were not recorded as events", 0);
		gap_ocsf(&j);
		emit(s, "sensor.gap", &j);
	}
	if (atomic_load(&s->c.starts) == 0) {
		/* runsc only warns when a trace session cannot be created and runs the workload
		 * anyway: without the container start nothing says the points were on. */
		sl_json_reset(&j);
		sl_json_str(&j, "gap", "gvisor-no-start", 0);
		sl_json_str(
		    &j, "detail",
		    "the Sentry never reported this sandbox's container start: its trace session may not "
		    "have been active, so the absence of events proves nothing",
		    0);
		gap_ocsf(&j);
		emit(s, "sensor.gap", &j);
	}
	sl_json_free(&j);
}

void sl_gv_sink_counts_json(struct sl_gv_sink *s, struct sl_json *j)
{
	uint64_t total = 0;
	for (int i = 1; i < SL_GV_R_COUNT; i++)
		total += atomic_load(&s->c.rejected[i]);
	sl_json_uint(j, "process.exec", atomic_load(&s->c.exec));
	sl_json_uint(j, "file.open", atomic_load(&s->c.open));
	sl_json_uint(j, "network.connect", atomic_load(&s->c.connect));
	sl_json_uint(j, "policy.deny", atomic_load(&s->c.deny));
	sl_json_uint(j, "sensor.gap", atomic_load(&s->c.gaps));
	sl_json_uint(j, "gvisor.datagrams", atomic_load(&s->c.datagrams));
	sl_json_uint(j, "gvisor.connections", atomic_load(&s->c.connections));
	sl_json_uint(j, "gvisor.dropped", atomic_load(&s->c.dropped));
	sl_json_uint(j, "gvisor.rejected", total);
	sl_json_uint(j, "gvisor.foreign", atomic_load(&s->c.foreign));
	sl_json_uint(j, "gvisor.no_event", atomic_load(&s->c.no_event));
	sl_json_uint(j, "gvisor.exec_failed", atomic_load(&s->c.exec_failed));
}
