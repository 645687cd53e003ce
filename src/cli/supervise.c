/* The runtime-independent supervisor pieces of `sightline run` (see supervise.h). */
#include "cli/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/util.h"

int sl_sup_append(struct sl_record *rec, const char *cls, struct sl_json *j)
{
	if (sl_json_error(j))
		return sl_json_error(j);
	int64_t r = sl_record_append(rec, cls, sl_now_realtime_ns(), j);
	return r < 0 ? (int)r : 0;
}

int sl_sup_control_listen(const char *path)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(un.sun_path))
		return -ENAMETOOLONG;
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	mode_t old = umask(0177); /* 0600: the supervisor's uid (and root) only */
	int r = bind(fd, (struct sockaddr *)&un, sizeof(un));
	umask(old);
	if (r < 0 || listen(fd, 8) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static void control_event(struct sl_record *rec, const char *action, const struct ucred *cr, const char *why,
			  const char *cred)
{
	struct sl_json j;
	sl_json_init(&j);
	sl_json_str(&j, "action", action, 0);
	sl_json_str(&j, "by", "control socket", 0);
	if (cred) /* revoke: which credential reference (the collector enforces it, docs/collector.md) */
		sl_json_str(&j, "credential_ref", cred, 0);
	sl_json_int(&j, "peer_uid", cr->uid);
	sl_json_int(&j, "peer_pid", cr->pid);
	if (why && *why)
		sl_json_str(&j, "reason", why, 256);
	sl_json_obj_open(&j, "ocsf");
	sl_json_int(&j, "class_uid", 1007);
	sl_json_int(&j, "activity_id", !strcmp(action, "stop") ? 2 : 99);
	sl_json_obj_close(&j);
	sl_sup_append(rec, "control.action", &j);
	sl_json_free(&j);
}

const char *sl_sup_control(int lfd, const struct sl_sup_target *t, struct sl_record *rec, const char *cred)
{
	const char *stopped = NULL;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return stopped;
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		char req[300] = "";
		const char *resp = "ok\n";
		struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		/* Who may steer the sandbox: root or the supervisor's own uid, by the kernel's word. */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
		    (cr.uid != 0 && cr.uid != geteuid())) {
			resp = "denied\n";
		} else {
			ssize_t n = recv(fd, req, sizeof(req) - 1, 0);
			req[n > 0 ? n : 0] = '\0';
			char *nl = strchr(req, '\n');
			if (nl)
				*nl = '\0';
			char *arg = strchr(req, ' ');
			if (arg)
				*arg++ = '\0';
			if (!strcmp(req, "stop")) {
				control_event(rec, "stop", &cr, arg, NULL);
				t->stop(t->arg);
				stopped = "killed: control path (stop)";
			} else if (!strcmp(req, "freeze") || !strcmp(req, "thaw")) {
				control_event(rec, req, &cr, arg, NULL);
				if (t->freeze(t->arg, !strcmp(req, "freeze")) < 0)
					resp = t->freeze_error;
			} else if (!strcmp(req, "revoke")) {
				control_event(rec, "revoke", &cr, arg, cred);
			} else {
				resp = "error: stop|freeze|thaw|revoke\n";
			}
		}
		(void)!send(fd, resp, strlen(resp), MSG_NOSIGNAL);
		close(fd);
	}
}

int sl_sup_read_secret(const char *path, uint8_t out[SL_FRAME_MASTER_LEN])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	ssize_t n = sl_read_full(fd, out, SL_FRAME_MASTER_LEN + 1);
	close(fd);
	return n == SL_FRAME_MASTER_LEN ? 0 : -EINVAL;
}

unsigned sl_sup_blind_limit_ms(const char *risk_class, unsigned max_blind_ms)
{
	if (max_blind_ms)
		return max_blind_ms;
	return !strcmp(risk_class, "high") ? 2000 : !strcmp(risk_class, "low") ? 60000 : 10000;
}

/* export.blind: no ACK from the collector for longer than the limit (docs/events.md). */
static void export_blind_event(struct sl_record *rec, const struct sl_sup_watch *w,
			       const struct sl_exporter_stats *es, int64_t detected_ns, int64_t last_ack_ns)
{
	uint64_t backlog = es->recorded > es->acked ? es->recorded - es->acked : 0;
	struct sl_json j;
	sl_json_init(&j);
	sl_json_int(&j, "detected_ns", detected_ns);
	sl_json_int(&j, "last_ack_ns", last_ack_ns);
	sl_json_uint(&j, "last_ack_seq", es->acked);
	sl_json_uint(&j, "backlog", backlog);
	sl_json_int(&j, "max_blind_ms", w->limit_ms);
	sl_json_str(&j, "risk_class", w->risk_class, 0);
	sl_json_str(&j, "collector", w->collector, 256);
	sl_sup_append(rec, "export.blind", &j);
	sl_json_free(&j);
	fprintf(stderr,
		"sightline run: export blind: no acknowledgement from %s for %lld ms (limit %u ms), last "
		"acknowledged seq %llu, %llu events waiting in the record\n",
		w->collector, (long long)((detected_ns - last_ack_ns) / 1000000), w->limit_ms,
		(unsigned long long)es->acked, (unsigned long long)backlog);
}

/* export.restored: ACKs arrive again after an export.blind. */
static void export_restored_event(struct sl_record *rec, const struct sl_sup_watch *w,
				  const struct sl_exporter_stats *es, int64_t restored_ns)
{
	struct sl_json j;
	sl_json_init(&j);
	sl_json_int(&j, "restored_ns", restored_ns);
	sl_json_int(&j, "blind_since_ns", w->blind_real_ns);
	sl_json_uint(&j, "ack_seq", es->acked);
	sl_json_uint(&j, "backlog", es->recorded > es->acked ? es->recorded - es->acked : 0);
	sl_sup_append(rec, "export.restored", &j);
	sl_json_free(&j);
	fprintf(stderr,
		"sightline run: export restored: %s acknowledges again (seq %llu), blind for %lld ms\n",
		w->collector, (unsigned long long)es->acked,
		(long long)((restored_ns - w->blind_real_ns) / 1000000));
}

void sl_sup_stop(struct sl_record *rec, const struct sl_sup_target *t, const char *why)
{
	struct sl_json cj;
	sl_json_init(&cj);
	sl_json_str(&cj, "action", "stop", 0);
	sl_json_str(&cj, "by", "supervisor", 0);
	sl_json_str(&cj, "reason", why, 0);
	sl_json_obj_open(&cj, "ocsf");
	sl_json_int(&cj, "class_uid", 1007);
	sl_json_int(&cj, "activity_id", 2);
	sl_json_obj_close(&cj);
	sl_sup_append(rec, "control.action", &cj);
	sl_json_free(&cj);
	t->stop(t->arg);
	fprintf(stderr, "sightline run: %s\n", why);
}

const char *sl_sup_watch_tick(struct sl_sup_watch *w, struct sl_exporter *ex, struct sl_record *rec,
			      const struct sl_sup_target *t)
{
	struct sl_exporter_stats es;
	sl_exporter_stats(ex, &es);
	bool high = !strcmp(w->risk_class, "high");
	int64_t now_mono = sl_now_monotonic_ns();
	int64_t silent_ms = (now_mono - es.last_answer_ns) / 1000000;
	/* Blind beneath the boundary: the collector may be dead and unable to alert, so the
	 * supervisor records (and says) it itself, and records when ACKs resume. */
	if (!w->blind && silent_ms > (int64_t)w->limit_ms) {
		w->blind = true;
		w->blind_mono_ns = now_mono;
		w->blind_real_ns = sl_now_realtime_ns();
		export_blind_event(rec, w, &es, w->blind_real_ns,
				   w->blind_real_ns - (now_mono - es.last_answer_ns));
	} else if (w->blind && es.last_answer_ns > w->blind_mono_ns) {
		w->blind = false;
		export_restored_event(rec, w, &es, sl_now_realtime_ns() - (now_mono - es.last_answer_ns));
	}
	if (w->stopped)
		return NULL;
	if (es.error_code == SL_FRAME_ERR_REVOKED) {
		if (!high) {
			if (!w->warned_refused) {
				w->warned_refused = true;
				fprintf(stderr,
					"sightline run: the collector refused the sandbox: %s; the workload "
					"(risk "
					"%s) keeps running, recorded but not watched\n",
					es.error_msg, w->risk_class);
			}
			return NULL;
		}
		/* The collector will not watch this sandbox (its credential reference is revoked): a
		 * high-risk workload does not run unwatched. */
		w->stopped = true;
		char why[SL_FRAME_ERROR_MSG_MAX + 64];
		snprintf(why, sizeof(why), "collector refused the sandbox: %s", es.error_msg);
		sl_sup_stop(rec, t, why);
		return "killed: collector refused the credential reference";
	}
	if (high && silent_ms > (int64_t)w->limit_ms) {
		/* High risk: evidence that stops reaching the collector stops the workload. This control
		 * path is the supervisor's own: nothing inside the sandbox can refuse it. */
		w->stopped = true;
		char why[160];
		snprintf(why, sizeof(why),
			 "high-risk sandbox blind: no acknowledgement from the collector for %lld ms (limit "
			 "%u ms)",
			 (long long)silent_ms, w->limit_ms);
		sl_sup_stop(rec, t, why);
		return "killed: blind past the high-risk limit";
	}
	return NULL;
}

int sl_sup_validator_listener(const char *spec, pid_t netns_pid, struct sl_canary_listener **out)
{
	char *end;
	unsigned long port = strtoul(spec, &end, 10);
	if (end == spec || *end != ':' || port == 0 || port > 65535 || end[1] != '/') {
		fprintf(stderr, "sightline run: --validator-listen takes PORT:/ABSOLUTE/LOGFILE\n");
		return -EINVAL;
	}
	int r = sl_canary_listener_start(netns_pid, (uint16_t)port, end + 1, out);
	if (r < 0)
		fprintf(stderr, "sightline run: validator listener on 127.0.0.1:%lu: %s\n", port,
			strerror(-r));
	return r;
}
