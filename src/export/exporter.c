/* The exporter thread: tail the record, send EVENTS in order, take ACKs, send HEARTBEATs,
 * reconnect with backoff and resume from the collector's durable seq. */
#include "export/exporter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/util.h"

#define BATCH_LINES 4096
#define BATCH_BYTES (512u << 10)
#define WINDOW	    64 /* EVENTS frames in flight before waiting for an ACK */

struct sl_exporter {
	struct sl_exporter_cfg cfg;
	char addr[512], record_path[4096], sandbox_id[33], risk[8], control[257];
	char tenant[257], agent[257], task[257], version[257], cred[257];
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool finishing, stop;
	int result;
	/* the record, as read so far */
	int rfd;
	uint64_t scan_off; /* bytes of the record scanned into complete lines */
	uint64_t *offs;	   /* offs[k] = byte offset of the line with seq k+1 */
	size_t n_lines, cap_lines;
	/* shared counters */
	_Atomic uint64_t exported, acked, connects, failures;
	_Atomic int64_t last_answer_ns;
	/* the collector's last ERROR (under mu) */
	uint16_t error_code;
	char error_msg[SL_FRAME_ERROR_MSG_MAX + 1];
	bool session_error; /* an ERROR on the current connection */
	uint8_t *rbuf;
	size_t rlen;
	char *scanbuf;
	char *linebuf; /* one record line read back, LINEBUF bytes */
	/* check_chain: lines [0, checked) passed sl_chain_walk; after the first bad one (bad), only
	 * [0, good) may be shipped. Used by the exporter thread only (finish reads it after join). */
	struct sl_chain_walk *walk;
	uint64_t checked, good;
	_Atomic bool bad;
};
#define LINEBUF (1u << 20)

int sl_addr_parse(const char *addr, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (!strncmp(addr, "unix:", 5)) {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;
		size_t n = strlen(addr + 5);
		if (n == 0 || n >= sizeof(un->sun_path) || addr[5] != '/')
			return -EINVAL;
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, addr + 5, n + 1);
		return (int)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	}
	if (!strncmp(addr, "tcp:", 4)) {
		char host[64];
		const char *colon = strrchr(addr + 4, ':');
		if (!colon || (size_t)(colon - (addr + 4)) >= sizeof(host))
			return -EINVAL;
		memcpy(host, addr + 4, (size_t)(colon - (addr + 4)));
		host[colon - (addr + 4)] = '\0';
		char *end;
		unsigned long port = strtoul(colon + 1, &end, 10);
		if (*end || port == 0 || port > 65535)
			return -EINVAL;
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		/* Loopback only: evidence does not leave this host over plain TCP. */
		if (inet_pton(AF_INET, host, &in->sin_addr) != 1 || (ntohl(in->sin_addr.s_addr) >> 24) != 127)
			return -EINVAL;
		return (int)sizeof(*in);
	}
	return -EINVAL;
}

/* Index the complete lines appended to the record since the last scan (a line may be up to 1 MiB,
 * the record's own limit). */
static int scan(struct sl_exporter *e)
{
	enum { SCAN_BUF = (1 << 20) + 65536 };
	/* One buffer per exporter, used by its thread and, after it is joined, by finish. */
	if (!e->scanbuf && !(e->scanbuf = malloc(SCAN_BUF)))
		return -ENOMEM;
	char *buf = e->scanbuf;
	for (;;) {
		ssize_t n = pread(e->rfd, buf, SCAN_BUF, (off_t)e->scan_off);
		if (n < 0)
			return errno == EINTR ? 0 : -errno;
		size_t line_start = 0;
		const char *nl;
		while ((nl = memchr(buf + line_start, '\n', (size_t)n - line_start))) {
			if (e->n_lines == e->cap_lines) {
				size_t cap = e->cap_lines ? e->cap_lines * 2 : 4096;
				uint64_t *no = realloc(e->offs, cap * sizeof(*no));
				if (!no)
					return -ENOMEM;
				e->offs = no;
				e->cap_lines = cap;
			}
			e->offs[e->n_lines++] = e->scan_off + line_start;
			line_start = (size_t)(nl - buf) + 1;
		}
		e->scan_off += line_start;
		if ((size_t)n < SCAN_BUF)
			return 0; /* all read; a partial last line waits for its newline */
		if (line_start == 0)
			return -E2BIG; /* a "line" longer than any record line: not a record */
	}
}

/* How many leading lines may be shipped now. Without check_chain: all complete ones. With it: the
 * checked ones, less the last unless it is final (record.end, or the last line of a finished
 * record): a line whose successor does not link to it counts as edited (verify.c), so it waits
 * for its successor's check. */
static uint64_t deliverable(struct sl_exporter *e, bool finishing)
{
	if (!e->walk)
		return e->n_lines;
	if (atomic_load(&e->bad))
		return e->good;
	if (e->checked == 0)
		return 0;
	if (sl_chain_walk_ended(e->walk) || (finishing && e->checked == e->n_lines))
		return e->checked;
	return e->checked - 1;
}

/* Check the lines not yet checked that lie wholly in buf (record bytes [first, end)). */
static void check_lines(struct sl_exporter *e, const char *buf, uint64_t first, uint64_t end)
{
	while (!atomic_load(&e->bad) && e->checked < e->n_lines) {
		uint64_t k = e->checked, off = e->offs[k];
		uint64_t lend = k + 1 < e->n_lines ? e->offs[k + 1] : e->scan_off;
		if (off < first || lend > end)
			return;
		bool prev_bad;
		if (sl_chain_walk_line(e->walk, buf + (off - first), (size_t)(lend - off - 1), &prev_bad)) {
			e->good = prev_bad ? k - 1 : k;
			atomic_store(&e->bad, true);
			return;
		}
		e->checked++;
	}
}

/* Line seq is checked but its successor did not fit in the same read (two lines near the 1 MiB
 * limit): check the successor alone, in the scan buffer (free between scans), so line seq is not
 * held back forever. */
static int check_successor(struct sl_exporter *e, uint64_t seq)
{
	if (atomic_load(&e->bad) || e->checked != seq + 1 || seq + 1 >= e->n_lines)
		return 0;
	uint64_t off = e->offs[seq + 1], end = seq + 2 < e->n_lines ? e->offs[seq + 2] : e->scan_off;
	size_t n = (size_t)(end - off);
	if (n < 2) {
		e->good = seq + 1;
		atomic_store(&e->bad, true);
		return 0;
	}
	if (n > LINEBUF || pread(e->rfd, e->scanbuf, n, (off_t)off) != (ssize_t)n)
		return -EIO;
	check_lines(e, e->scanbuf, off, end);
	return 0;
}

/* Check lines [checked, upto) reading them on their own: after a resume the collector already
 * holds the lines before its ACK, but the walk still starts at line 1 (the link and the sandbox id
 * are checked against what came before). */
static int check_upto(struct sl_exporter *e, uint64_t upto)
{
	enum { SCAN_BUF = (1 << 20) + 65536 }; /* scan()'s buffer, filled by it already */
	while (!atomic_load(&e->bad) && e->checked < upto) {
		uint64_t first = e->offs[e->checked], end = upto < e->n_lines ? e->offs[upto] : e->scan_off;
		if (end - first > SCAN_BUF)
			end = first + SCAN_BUF;
		size_t n = (size_t)(end - first);
		if (pread(e->rfd, e->scanbuf, n, (off_t)first) != (ssize_t)n)
			return -EIO;
		uint64_t before = e->checked;
		check_lines(e, e->scanbuf, first, end);
		if (e->checked == before && !atomic_load(&e->bad)) {
			/* A line that does not fit in the buffer cannot be a record line. */
			if (end - first < SCAN_BUF)
				return -EIO;
			e->good = e->checked;
			atomic_store(&e->bad, true);
		}
	}
	return 0;
}

static int dial(struct sl_exporter *e)
{
	struct sockaddr_storage ss;
	int len = sl_addr_parse(e->addr, &ss);
	if (len < 0)
		return len;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, (socklen_t)len) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static bool stopping(struct sl_exporter *e)
{
	pthread_mutex_lock(&e->mu);
	bool st = e->stop;
	pthread_mutex_unlock(&e->mu);
	return st;
}

/* Write it all; give up after timeout_ms without progress, or at once when told to stop (a
 * frozen or vanished collector must not hold the supervisor's exit). */
static int send_all(struct sl_exporter *e, int fd, const uint8_t *p, size_t n, int timeout_ms)
{
	int waited = 0;
	while (n > 0) {
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		int pr = poll(&pf, 1, 100);
		if (pr == 0) {
			waited += 100;
			if (waited >= timeout_ms || stopping(e))
				return -ETIMEDOUT;
			continue;
		}
		waited = 0;
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read and decode frames that are available (wait up to timeout_ms for the first). */
static int recv_frames(struct sl_exporter *e, int fd, struct sl_frame_ctx *ctx, int timeout_ms)
{
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	int pr = poll(&pf, 1, timeout_ms);
	if (pr < 0)
		return errno == EINTR ? 0 : -errno;
	if (pr == 0)
		return 0;
	ssize_t n = recv(fd, e->rbuf + e->rlen, SL_FRAME_MAX_FRAME - e->rlen, MSG_DONTWAIT);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	e->rlen += (size_t)n;
	for (;;) {
		struct sl_frame f;
		size_t used;
		int r = sl_frame_decode(e->rbuf, e->rlen, ctx, &f, &used);
		if (r == -EAGAIN)
			return 0;
		if (r < 0)
			return -EPROTO;
		sl_frame_ctx_accept(ctx, &f);
		if (f.type == SL_FRAME_ACK) {
			atomic_store(&e->last_answer_ns, sl_now_monotonic_ns());
			uint64_t cur = atomic_load(&e->acked);
			if (f.ack_seq > cur)
				atomic_store(&e->acked, f.ack_seq);
		} else if (f.type == SL_FRAME_ERROR) {
			/* The collector refused something (and acked what it has): resend from there. */
			atomic_store(&e->exported, atomic_load(&e->acked));
			if (e->walk && f.error_code == SL_FRAME_ERR_PROTOCOL && !atomic_load(&e->bad)) {
				/* A finished record's line the collector refuses stays refused: the
				 * export ends after what it acknowledged. */
				e->good = atomic_load(&e->acked);
				atomic_store(&e->bad, true);
			}
			pthread_mutex_lock(&e->mu);
			e->session_error = true;
			e->error_code = f.error_code;
			snprintf(e->error_msg, sizeof(e->error_msg), "%.*s", (int)f.error_msg_len, f.error_msg);
			pthread_mutex_unlock(&e->mu);
		}
		memmove(e->rbuf, e->rbuf + used, e->rlen - used);
		e->rlen -= used;
	}
}

static int send_frame(struct sl_exporter *e, int fd, struct sl_frame_ctx *ctx, uint8_t type, const uint8_t *p,
		      size_t n, uint8_t *wbuf)
{
	size_t out;
	int r = sl_frame_encode(type, p, n, ctx, wbuf, SL_FRAME_MAX_FRAME, &out);
	if (r < 0)
		return r;
	return send_all(e, fd, wbuf, out, 10000);
}

/* One connection's life: challenge, hello, resume point, then stream until finished or broken. */
static int session(struct sl_exporter *e, int fd, uint8_t *wbuf, struct sl_frame_events_buf *batch)
{
	struct sl_frame_ctx ctx;
	sl_frame_ctx_init(&ctx, SL_FRAME_ROLE_SUPERVISOR, e->cfg.key);
	e->rlen = 0;
	pthread_mutex_lock(&e->mu);
	e->session_error = false;
	pthread_mutex_unlock(&e->mu);
	int r;
	/* CHALLENGE, then HELLO, then the collector's ACK says where to resume. */
	for (int tries = 0; !ctx.have_challenge && tries < 50; tries++)
		if ((r = recv_frames(e, fd, &ctx, 100)) < 0)
			goto out;
	if (!ctx.have_challenge) {
		r = -ETIMEDOUT;
		goto out;
	}
	struct sl_frame_hello h;
	memset(&h, 0, sizeof(h));
	snprintf(h.sandbox_id, sizeof(h.sandbox_id), "%s", e->sandbox_id);
	if ((r = sl_frame_key_id(e->cfg.key, h.key_id)) < 0)
		goto out;
	snprintf(h.tenant, sizeof(h.tenant), "%s", e->tenant);
	snprintf(h.agent, sizeof(h.agent), "%s", e->agent);
	snprintf(h.task, sizeof(h.task), "%s", e->task);
	snprintf(h.version, sizeof(h.version), "%s", e->version);
	snprintf(h.credential_ref, sizeof(h.credential_ref), "%s", e->cred);
	snprintf(h.risk_class, sizeof(h.risk_class), "%s", e->risk);
	snprintf(h.control, sizeof(h.control), "%s", e->control);
	h.resume = atomic_load(&e->connects) > 0;
	char hello[SL_FRAME_HELLO_MAX];
	int hl = sl_frame_hello_build(&h, hello, sizeof(hello));
	if (hl < 0 || (r = send_frame(e, fd, &ctx, SL_FRAME_HELLO, (uint8_t *)hello, (size_t)hl, wbuf)) < 0) {
		r = hl < 0 ? hl : r;
		goto out;
	}
	uint64_t before = atomic_load(&e->acked);
	atomic_store(&e->acked, 0);
	for (int tries = 0; atomic_load(&e->acked) == 0 && ctx.recv_seq == 0 && tries < 50; tries++)
		if ((r = recv_frames(e, fd, &ctx, 100)) < 0)
			goto out;
	pthread_mutex_lock(&e->mu);
	bool refused = e->session_error;
	pthread_mutex_unlock(&e->mu);
	if (ctx.recv_seq == 0 || (refused && atomic_load(&e->acked) == 0)) {
		/* No answer, or an ERROR instead of the ACK (e.g. a revoked credential): not connected. */
		atomic_store(&e->acked, before);
		r = refused ? -ECONNREFUSED : -ETIMEDOUT;
		goto out;
	}
	atomic_store(&e->exported, atomic_load(&e->acked)); /* resume after what is durable */
	atomic_fetch_add(&e->connects, 1);
	int64_t next_hb = 0;
	for (;;) {
		pthread_mutex_lock(&e->mu);
		bool finishing = e->finishing, stop = e->stop;
		pthread_mutex_unlock(&e->mu);
		if (stop) {
			r = 0;
			goto out;
		}
		if ((r = scan(e)) < 0)
			goto out;
		uint64_t exported = atomic_load(&e->exported), acked = atomic_load(&e->acked);
		if (finishing && acked >= (atomic_load(&e->bad) ? e->good : e->n_lines)) {
			r = 0;
			goto out;
		}
		int64_t now = sl_now_monotonic_ns();
		if (now >= next_hb) {
			uint64_t dropped = e->cfg.dropped ? e->cfg.dropped(e->cfg.dropped_arg) : 0;
			struct sl_frame_heartbeat hb = {.emitted = e->n_lines + dropped,
							.recorded = e->n_lines,
							.exported = exported,
							.acked = acked,
							.dropped = dropped,
							.backlog = e->n_lines - acked};
			char hbuf[SL_FRAME_HEARTBEAT_MAX];
			int n = sl_frame_heartbeat_build(&hb, hbuf, sizeof(hbuf));
			if (n < 0 || (r = send_frame(e, fd, &ctx, SL_FRAME_HEARTBEAT, (uint8_t *)hbuf, (size_t)n, wbuf)) < 0)
				goto out;
			next_hb = now + (int64_t)e->cfg.heartbeat_ms * 1000000;
		}
		if (exported < e->n_lines && exported - acked < (uint64_t)WINDOW * BATCH_LINES) {
			/* One batch of whole lines, read back from the record. */
			sl_frame_events_reset(batch);
			uint64_t seq = exported;
			/* The lines are contiguous in the record: read the next ones, up to about a
			 * batch's worth (and never more than the line buffer), with one pread. */
			uint64_t first = 0, got_end = 0;
			char *line;
			if (e->walk && (r = check_upto(e, seq)) < 0)
				goto out;
			while (seq < e->n_lines && batch->count < BATCH_LINES && batch->len < BATCH_BYTES) {
				uint64_t off = e->offs[seq];
				uint64_t end = seq + 1 < e->n_lines ? e->offs[seq + 1] : e->scan_off;
				size_t ll = (size_t)(end - off);
				if (e->walk && atomic_load(&e->bad) && seq >= e->good)
					break;
				if (ll < 2 || ll > LINEBUF) {
					if (e->walk) {
						/* An empty line: not an event, the first bad one (seq == checked). */
						e->good = seq;
						atomic_store(&e->bad, true);
						break;
					}
					r = -EBADMSG;
					goto out;
				}
				if (end > got_end) {
					first = off;
					uint64_t k = seq, rend = end;
					while (k + 1 < e->n_lines && k + 1 - exported < BATCH_LINES) {
						uint64_t nend = k + 2 < e->n_lines ? e->offs[k + 2] : e->scan_off;
						if (nend - first > LINEBUF || nend - first > BATCH_BYTES)
							break;
						k++;
						rend = nend;
					}
					size_t rl = (size_t)(rend - first);
					if (pread(e->rfd, e->linebuf, rl, (off_t)first) != (ssize_t)rl) {
						r = -EIO;
						goto out;
					}
					got_end = rend;
					if (e->walk)
						check_lines(e, e->linebuf, first, got_end);
					if (e->walk && (r = check_successor(e, seq)) < 0)
						goto out;
				}
				if (seq >= deliverable(e, finishing))
					break;
				line = e->linebuf + (off - first);
				int ar = sl_frame_events_add(batch, line, ll - 1);
				if (ar == -ENOSPC)
					break;
				if (ar < 0) {
					r = ar;
					goto out;
				}
				seq++;
			}
			if (batch->count == 0) {
				/* Nothing shippable yet (a line waits for its successor's check, or the
				 * rest is after a bad line): wait for ACKs or new lines. */
				if ((r = recv_frames(e, fd, &ctx, 20)) < 0)
					goto out;
				continue;
			}
			size_t pl;
			const uint8_t *p = sl_frame_events_payload(batch, &pl);
			if ((r = send_frame(e, fd, &ctx, SL_FRAME_EVENTS, p, pl, wbuf)) < 0)
				goto out;
			atomic_store(&e->exported, seq);
			if ((r = recv_frames(e, fd, &ctx, 0)) < 0)
				goto out;
			continue;
		}
		/* Nothing to send now: wait for ACKs or new lines (the record grows, we poll it). */
		if ((r = recv_frames(e, fd, &ctx, 20)) < 0)
			goto out;
	}
out:
	sl_frame_ctx_wipe(&ctx);
	return r;
}

static void *run(void *arg)
{
	struct sl_exporter *e = arg;
	uint8_t *wbuf = malloc(SL_FRAME_MAX_FRAME);
	e->rbuf = malloc(SL_FRAME_MAX_FRAME);
	e->linebuf = malloc(LINEBUF);
	struct sl_frame_events_buf batch;
	sl_frame_events_init(&batch);
	unsigned backoff_ms = 50;
	while (wbuf && e->rbuf && e->linebuf) {
		pthread_mutex_lock(&e->mu);
		bool stop = e->stop;
		pthread_mutex_unlock(&e->mu);
		if (stop)
			break;
		int fd = dial(e);
		int r = fd < 0 ? fd : session(e, fd, wbuf, &batch);
		if (fd >= 0)
			close(fd);
		if (r == 0)
			break; /* finished: everything acknowledged, or told to stop */
		atomic_fetch_add(&e->failures, 1);
		/* Keep recording, retry with backoff: the record is the buffer. */
		pthread_mutex_lock(&e->mu);
		if (!e->stop) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)backoff_ms * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&e->cond, &e->mu, &ts);
		}
		pthread_mutex_unlock(&e->mu);
		backoff_ms = backoff_ms >= 1000 ? 1000 : backoff_ms * 2;
	}
	sl_frame_events_free(&batch);
	free(wbuf);
	return NULL;
}

int sl_exporter_start(const struct sl_exporter_cfg *cfg, struct sl_exporter **out)
{
	struct sockaddr_storage ss;
	if (!cfg->addr || sl_addr_parse(cfg->addr, &ss) < 0 || !cfg->record_path || !cfg->sandbox_id)
		return -EINVAL;
	struct sl_exporter *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->cfg = *cfg;
	if (!e->cfg.heartbeat_ms)
		e->cfg.heartbeat_ms = 1000;
	snprintf(e->addr, sizeof(e->addr), "%s", cfg->addr);
	snprintf(e->record_path, sizeof(e->record_path), "%s", cfg->record_path);
	snprintf(e->sandbox_id, sizeof(e->sandbox_id), "%s", cfg->sandbox_id);
	snprintf(e->risk, sizeof(e->risk), "%s", cfg->risk_class ? cfg->risk_class : "medium");
	snprintf(e->control, sizeof(e->control), "%s", cfg->control ? cfg->control : "none");
	snprintf(e->tenant, sizeof(e->tenant), "%s", cfg->id.tenant);
	snprintf(e->agent, sizeof(e->agent), "%s", cfg->id.agent);
	snprintf(e->task, sizeof(e->task), "%s", cfg->id.task);
	snprintf(e->version, sizeof(e->version), "%s", cfg->id.version);
	snprintf(e->cred, sizeof(e->cred), "%s", cfg->id.credential_ref);
	if (cfg->check_chain) {
		int wr = sl_chain_walk_new(&e->walk);
		if (wr < 0) {
			free(e);
			return wr;
		}
	}
	e->rfd = open(cfg->record_path, O_RDONLY | O_CLOEXEC);
	if (e->rfd < 0) {
		int r = -errno;
		sl_chain_walk_free(e->walk);
		free(e);
		return r;
	}
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cond, NULL);
	atomic_store(&e->last_answer_ns, sl_now_monotonic_ns()); /* the grace starts now */
	int r = pthread_create(&e->thread, NULL, run, e);
	if (r) {
		close(e->rfd);
		sl_chain_walk_free(e->walk);
		free(e);
		return -r;
	}
	*out = e;
	return 0;
}

void sl_exporter_stats(struct sl_exporter *e, struct sl_exporter_stats *st)
{
	st->recorded = e->n_lines;
	st->exported = atomic_load(&e->exported);
	st->acked = atomic_load(&e->acked);
	st->connects = atomic_load(&e->connects);
	st->send_failures = atomic_load(&e->failures);
	st->last_answer_ns = atomic_load(&e->last_answer_ns);
	pthread_mutex_lock(&e->mu);
	st->error_code = e->error_code;
	snprintf(st->error_msg, sizeof(st->error_msg), "%s", e->error_msg);
	pthread_mutex_unlock(&e->mu);
}

int sl_exporter_finish(struct sl_exporter *e, unsigned timeout_ms, struct sl_exporter_stats *st)
{
	if (!e)
		return 0;
	pthread_mutex_lock(&e->mu);
	e->finishing = true;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->mu);
	int64_t deadline = sl_now_monotonic_ns() + (int64_t)timeout_ms * 1000000;
	while (sl_now_monotonic_ns() < deadline) {
		if (pthread_tryjoin_np(e->thread, NULL) == 0)
			goto joined;
		usleep(5000);
	}
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->thread, NULL);
joined:;
	/* The final count of lines: the record is complete now. */
	scan(e);
	struct sl_exporter_stats s;
	sl_exporter_stats(e, &s);
	if (st)
		*st = s;
	int r = s.acked >= s.recorded ? 0 : -ETIMEDOUT;
	if (atomic_load(&e->bad))
		r = s.acked >= e->good ? -EBADMSG : -ETIMEDOUT;
	sl_chain_walk_free(e->walk);
	explicit_bzero(e->cfg.key, sizeof(e->cfg.key));
	close(e->rfd);
	free(e->offs);
	free(e->rbuf);
	free(e->scanbuf);
	free(e->linebuf);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cond);
	free(e);
	return r;
}
