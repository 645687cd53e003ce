/* The acceptance validator's run: a fresh identity, a real collector (this binary's `collectd`, on
 * a private socket and database), a disposable workload (this binary's `run`, streaming through a
 * relay the validator controls), three harmless actions (a program, a read of a random canary, a
 * connection the policy must block to a listener of the validator's own), an export cut long enough
 * to go blind, the restore, then the checks (validate_checks.c) over what the collector stored.
 * It drives the real binaries as child processes rather than re-implementing them: what is proven
 * is what runs in production. */
#include "contract/validate.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/selfrun.h"
#include "common/util.h"
#include "contract/relay.h"
#include "contract/validate_internal.h"

/* The children of the running validation, for sl_validate_abort (a signal handler). */
static volatile pid_t child_collector = -1, child_run = -1;

void sl_validate_abort(void)
{
	pid_t a = child_collector, b = child_run;
	if (b > 0)
		kill(b, SIGTERM);
	if (a > 0)
		kill(a, SIGTERM);
}

const char *sl_vverdict_name(int v)
{
	switch (v) {
	case SL_V_PASS:
		return "pass";
	case SL_V_FAIL:
		return "FAIL";
	case SL_V_GAP:
		return "GAP";
	default:
		return "n/a";
	}
}

void sl_vrow_add(struct sl_validate_result *res, bool control, int verdict, const char *check,
		 const char *subject, const char *expected, const char *fmt, ...)
{
	if (res->n_rows == SL_VALIDATE_MAX_ROWS)
		return;
	struct sl_vrow *r = &res->rows[res->n_rows++];
	memset(r, 0, sizeof(*r));
	r->control = control;
	r->verdict = verdict;
	snprintf(r->check, sizeof(r->check), "%s", check);
	snprintf(r->subject, sizeof(r->subject), "%s", subject);
	snprintf(r->expected, sizeof(r->expected), "%s", expected);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->observed, sizeof(r->observed), fmt, ap);
	va_end(ap);
}

static void progress(const struct sl_validate_cfg *cfg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void progress(const struct sl_validate_cfg *cfg, const char *fmt, ...)
{
	if (!cfg->progress)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	cfg->progress(line);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Ask the collector's operator socket one line. */
int sl_vask(const char *sock, const char *req, char *resp, size_t len)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", sock);
	resp[0] = '\0';
	if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0) {
		int r = -errno;
		if (fd >= 0)
			close(fd);
		return r;
	}
	struct timeval tv = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t n = -1;
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req))
		n = recv(fd, resp, len - 1, MSG_WAITALL);
	close(fd);
	resp[n > 0 ? n : 0] = '\0';
	resp[strcspn(resp, "\n")] = '\0';
	return n > 0 ? 0 : -EPROTO;
}

/* Does text file path contain needle? */
bool sl_vfile_has(const char *path, const char *needle)
{
	char *buf = NULL;
	size_t len = 0;
	if (sl_read_file(path, 16 << 20, &buf, &len) < 0)
		return false;
	bool r = memmem(buf, len, needle, strlen(needle)) != NULL;
	free(buf);
	return r;
}

static size_t count_lines(const char *path)
{
	char *buf = NULL;
	size_t len = 0, n = 0;
	if (sl_read_file(path, 256 << 20, &buf, &len) < 0)
		return 0;
	for (size_t i = 0; i < len; i++)
		n += buf[i] == '\n';
	free(buf);
	return n;
}

/* Write one line to the workload's control FIFO (it is blocked opening it for reading). */
static int fifo_say(const char *path, const char *what, unsigned timeout_ms)
{
	for (unsigned t = 0; t < timeout_ms; t += 20) {
		int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			int r = sl_write_all(fd, what, strlen(what));
			close(fd);
			return r;
		}
		if (errno != ENXIO)
			return -errno;
		sleep_ms(20);
	}
	return -ETIMEDOUT;
}

static void hex(char *out, size_t n)
{
	char id[33];
	if (sl_random_id(id) < 0)
		snprintf(id, sizeof(id), "%032lx", (unsigned long)getpid());
	snprintf(out, n + 1, "%.*s", (int)n, id);
}

/* Has the workload ended? Reaps it once; true from then on. */
static bool reaped(struct sl_vctx *v, pid_t pid)
{
	if (!v->run_exited && waitpid(pid, &v->run_status, WNOHANG) == pid)
		v->run_exited = true;
	return v->run_exited;
}

/* The workload: each action prints what it did (the application's own word, used only to tell a
 * coverage gap from an action that did not happen), then it waits twice for the validator's word:
 * while the export is cut it acts again (those events must survive the outage), then it ends.
 * Native waits on a FIFO in the workspace. gVisor cannot: a FIFO on a gofer mount is the Sentry's
 * own pipe, never joined to the host's, so there the workload polls for a file the validator
 * creates (bind mounts are revalidated, runsc --file-access-mounts=shared). */
static const char workload_fmt[] = "/usr/bin/uname -sr >/dev/null && echo 'ACTION exec ok'\n"
				   "cat %s >/dev/null && echo 'ACTION canary-read ok'\n"
				   "if exec 3<>/dev/tcp/127.0.0.1/%u; then echo 'ACTION blocked-connect "
				   "CONNECTED'; echo canary >&3; exec 3>&-;"
				   " else echo 'ACTION blocked-connect refused'; fi\n"
				   "%s\n"
				   "for i in 1 2 3 4 5; do /bin/true; done; echo 'ACTION during-loss ok'\n"
				   "%s\n"
				   "exit 0\n";
static const char wait_fifo[] = "read -r x < /workspace/ctl.fifo";
static const char wait_go[] = "until [ -e /workspace/ctl.go ]; do /bin/sleep 0.1; done";
static const char wait_end[] = "until [ -e /workspace/ctl.end ]; do /bin/sleep 0.1; done";

/* Tell the waiting workload to go on: the FIFO (native) or the file it polls for (gVisor). */
static int say(const struct sl_vctx *v, const char *fifo, const char *ws, const char *what)
{
	if (!v->gvisor)
		return fifo_say(fifo, what, 5000);
	char p[192];
	snprintf(p, sizeof(p), "%s/ctl.%.*s", ws, (int)strcspn(what, "\n"), what);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

int sl_validate_run(const struct sl_validate_cfg *cfg, struct sl_validate_result *res, char *err,
		    size_t errlen)
{
	memset(res, 0, sizeof(*res));
	struct sl_vctx v = {.cfg = cfg, .res = res, .gvisor = !strcmp(cfg->rt->runtime, "gvisor")};
	const struct sl_contract *c = cfg->contract;
	int risk = !strcmp(cfg->risk_class, "high")  ? SL_RISK_HIGH
		   : !strcmp(cfg->risk_class, "low") ? SL_RISK_LOW
						     : SL_RISK_MEDIUM;
	if (!c->risk[risk].set) {
		snprintf(err, errlen, "the contract has no risk class %s (risk_classes.%s)", cfg->risk_class,
			 cfg->risk_class);
		return -EINVAL;
	}
	v.max_blind_ms = c->risk[risk].max_blind_ms;
	v.response = c->risk[risk].response;
	if (geteuid() != 0) {
		snprintf(err, errlen,
			 "needs root: the listener joins the sandbox's network namespace (setns needs "
			 "CAP_SYS_ADMIN)");
		return -EPERM;
	}
	if (cfg->rt->runtime_version(res->runtime_version, sizeof(res->runtime_version)) < 0) {
		/* Without runsc there is no gVisor to accept: say so rather than fail every row. */
		if (!strcmp(cfg->rt->runtime, "gvisor")) {
			snprintf(err, errlen, "--runtime gvisor needs runsc (`runsc --version` failed)");
			return -ENOENT;
		}
		snprintf(res->runtime_version, sizeof(res->runtime_version), "unknown");
	}
	res->started_ns = sl_now_realtime_ns();
	snprintf(res->workdir, sizeof(res->workdir), "/tmp/sightline-validate.XXXXXX");
	if (!mkdtemp(res->workdir)) {
		snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
		return -errno;
	}
	chmod(res->workdir, 0755);
	const char *W = res->workdir;
	snprintf(v.db, sizeof(v.db), "%s/collector.db", W);
	snprintf(v.admin, sizeof(v.admin), "%s/admin.sock", W);
	snprintf(v.listener_log, sizeof(v.listener_log), "%s/listener.log", W);
	snprintf(v.run_out, sizeof(v.run_out), "%s/run.out", W);
	char secret[128], csock[128], rsock[128], ws[128], rec[128], pol[128], fifo[160], runerr[128],
	    clog[128];
	snprintf(secret, sizeof(secret), "%s/collector.secret", W);
	snprintf(csock, sizeof(csock), "%s/collector.sock", W);
	snprintf(rsock, sizeof(rsock), "%s/relay.sock", W);
	snprintf(ws, sizeof(ws), "%s/ws", W);
	snprintf(rec, sizeof(rec), "%s/rec", W);
	snprintf(pol, sizeof(pol), "%s/policy.yaml", W);
	snprintf(fifo, sizeof(fifo), "%s/ctl.fifo", ws);
	snprintf(runerr, sizeof(runerr), "%s/run.err", W);
	snprintf(clog, sizeof(clog), "%s/collectd.log", W);

	/* Fresh identity and canary: nothing of an earlier run can satisfy this one. */
	char r8[9], d12[13], f12[13], content[33];
	hex(r8, 8);
	snprintf(res->id.tenant, sizeof(res->id.tenant), "validate-%s", r8);
	hex(r8, 8);
	snprintf(res->id.agent, sizeof(res->id.agent), "validator-%s", r8);
	hex(r8, 8);
	snprintf(res->id.task, sizeof(res->id.task), "canary-%s", r8);
	hex(r8, 8);
	snprintf(res->id.version, sizeof(res->id.version), "v-%s", r8);
	hex(r8, 8);
	snprintf(res->id.credential_ref, sizeof(res->id.credential_ref), "validate:cred-%s", r8);
	hex(d12, 12);
	hex(f12, 12);
	hex(content, 32);
	snprintf(res->canary_path, sizeof(res->canary_path), "/workspace/%s/%s.txt", d12, f12);
	if (cfg->listen_port)
		res->port = cfg->listen_port;
	else {
		unsigned char rb[2];
		if (getrandom(rb, 2, 0) != 2)
			rb[0] = rb[1] = 0;
		res->port = 20000 + ((unsigned)rb[0] << 8 | rb[1]) % 40000;
	}
	snprintf(v.content, sizeof(v.content), "%s", content);

	int rc = 0;
	pid_t cpid = -1, rpid = -1;
	struct sl_relay *relay = NULL;
	char p1[160], p2[192];
	snprintf(p1, sizeof(p1), "%s/%s", ws, d12);
	snprintf(p2, sizeof(p2), "%s/%s.txt", p1, f12);
	if (mkdir(ws, 0755) < 0 || mkdir(rec, 0700) < 0 || mkdir(p1, 0755) < 0 ||
	    sl_write_text(p2, content, O_TRUNC, 0644) < 0 || mkfifo(fifo, 0666) < 0) {
		rc = -errno;
		snprintf(err, errlen, "set up %s: %s", W, strerror(errno));
		goto out;
	}
	/* As root, the workload runs as nobody (docs/cli.md): give it its workspace. */
	if (chown(ws, 65534, 65534) < 0 || chown(p1, 65534, 65534) < 0 || chown(p2, 65534, 65534) < 0 ||
	    chown(fifo, 65534, 65534) < 0) {
		rc = -errno;
		snprintf(err, errlen, "chown the workspace: %s", strerror(errno));
		goto out;
	}
	char ptxt[8192];
	snprintf(ptxt, sizeof(ptxt), "workspace: %s\ncanaries: [%s]\n%s\n", ws, res->canary_path, "");
	if (cfg->policy_extra) {
		char *extra = NULL;
		size_t el = 0;
		rc = sl_read_file(cfg->policy_extra, 1 << 20, &extra, &el);
		if (rc < 0) {
			snprintf(err, errlen, "%s: %s", cfg->policy_extra, strerror(-rc));
			goto out;
		}
		size_t l = strlen(ptxt);
		snprintf(ptxt + l, sizeof(ptxt) - l, "%s\n", extra);
		free(extra);
	}
	if ((rc = sl_write_text(pol, ptxt, O_TRUNC, 0644)) < 0) {
		snprintf(err, errlen, "write %s: %s", pol, strerror(-rc));
		goto out;
	}

	/* 1. The collector, with the contract's blind limits. */
	char blind[96];
	snprintf(blind, sizeof(blind), "high=%llums,medium=%llums,low=%llums",
		 (unsigned long long)(c->risk[0].set ? c->risk[0].max_blind_ms : 2000),
		 (unsigned long long)(c->risk[1].set ? c->risk[1].max_blind_ms : 10000),
		 (unsigned long long)(c->risk[2].set ? c->risk[2].max_blind_ms : 60000));
	char la[160], aa[160];
	snprintf(la, sizeof(la), "unix:%s", csock);
	snprintf(aa, sizeof(aa), "unix:%s", v.admin);
	char *cargv[32] = {"sightline", "collectd", "--listen", la, "--db",	   v.db,
			   "--secret",	secret,	    "--admin",	aa, "--max-blind", blind};
	size_t ca = 12;
	for (size_t i = 0; i < cfg->n_collectd_flags && ca < 30; i++)
		cargv[ca++] = (char *)cfg->collectd_flags[i];
	cargv[ca] = NULL;
	rc = sl_selfrun_spawn(cargv, "/dev/null", clog, &cpid);
	child_collector = rc < 0 ? -1 : cpid;
	if (rc < 0) {
		snprintf(err, errlen, "start the collector: %s", strerror(-rc));
		goto out;
	}
	for (int i = 0; i < 200 && !sl_vfile_has(clog, "collector ready"); i++) {
		if (waitpid(cpid, NULL, WNOHANG) == cpid) {
			cpid = -1;
			break;
		}
		sleep_ms(25);
	}
	if (cpid < 0 || !sl_vfile_has(clog, "collector ready")) {
		rc = -EIO;
		snprintf(err, errlen, "the collector did not start (log %s)", clog);
		goto out;
	}
	progress(cfg, "collector up (store %s)", v.db);
	if ((rc = sl_relay_start(rsock, csock, &relay)) < 0) {
		snprintf(err, errlen, "start the relay: %s", strerror(-rc));
		goto out;
	}

	/* 2. The workload. */
	char script[2048], ra[160], vl[192], port[8];
	snprintf(script, sizeof(script), workload_fmt, res->canary_path, res->port,
		 v.gvisor ? wait_go : wait_fifo, v.gvisor ? wait_end : wait_fifo);
	snprintf(ra, sizeof(ra), "unix:%s", rsock);
	snprintf(vl, sizeof(vl), "%u:%s", res->port, v.listener_log);
	snprintf(port, sizeof(port), "%u", res->port);
	char *rargv[] = {"sightline",
			 "run",
			 "--tenant",
			 res->id.tenant,
			 "--agent",
			 res->id.agent,
			 "--task",
			 res->id.task,
			 "--version",
			 res->id.version,
			 "--credential-ref",
			 res->id.credential_ref,
			 "--policy",
			 pol,
			 "--record-dir",
			 rec,
			 "--collector",
			 ra,
			 "--collector-secret",
			 secret,
			 "--risk-class",
			 (char *)cfg->risk_class,
			 "--runtime",
			 (char *)cfg->rt->runtime,
			 "--validator-listen",
			 vl,
			 "--quiet",
			 "--drain-seconds",
			 "15",
			 "--",
			 "/bin/bash",
			 "-c",
			 script,
			 NULL};
	rc = sl_selfrun_spawn(rargv, v.run_out, runerr, &rpid);
	child_run = rc < 0 ? -1 : rpid;
	if (rc < 0) {
		snprintf(err, errlen, "start the workload: %s", strerror(-rc));
		goto out;
	}
	v.run_pid = rpid;
	progress(cfg, "workload started (tenant %s, task %s, canary %s, listener 127.0.0.1:%u)",
		 res->id.tenant, res->id.task, res->canary_path, res->port);
	/* Phase 1: the three actions; the workload then waits on the FIFO. */
	bool phase1 = false;
	for (int i = 0; i < 400 && !phase1; i++) {
		phase1 = sl_vfile_has(v.run_out, "ACTION blocked-connect");
		if (!phase1 && reaped(&v, rpid))
			break;
		if (!phase1)
			sleep_ms(25);
	}
	if (v.run_exited) {
		rpid = -1; /* reaped */
		child_run = -1;
	}
	v.record[0] = '\0';
	if (sl_vfind_record(rec, v.record, sizeof(v.record), res->sandbox_id) < 0 && phase1) {
		rc = -ENOENT;
		snprintf(err, errlen, "no record in %s", rec);
		goto out;
	}
	if (!phase1) {
		rc = -EIO;
		snprintf(err, errlen, "the workload did not reach its actions (exit %d; see %s, %s)",
			 v.run_exited ? WEXITSTATUS(v.run_status) : -1, v.run_out, runerr);
		goto out;
	}
	/* On gVisor the workload's output (the relay) can overtake the Sentry's points (the sink):
	 * the "ACTION" line is no proof that the connect's point is recorded yet. The first
	 * /bin/sleep of the wait loop follows the actions in the Sentry's stream, so its exec marks
	 * them recorded; bounded (3 s), so a sensor that misses it shows in the checks, not as a
	 * hang. */
	for (int i = 0; v.gvisor && i < 120 && !sl_vfile_has(v.record, "\"argv\":[\"/bin/sleep\""); i++)
		sleep_ms(25);
	/* Wait until the collector holds what the record holds (the actions' events). */
	size_t want = count_lines(v.record);
	for (int i = 0; i < 200 && sl_vstored(&v) < want; i++)
		sleep_ms(25);
	progress(cfg, "actions done; %zu lines recorded, %zu stored", want, sl_vstored(&v));

	/* 3. Loss: cut the export path; the workload goes on (it acts while nothing is delivered). */
	if (sl_relay_cut(relay) < 0) {
		rc = -EIO;
		snprintf(err, errlen, "cut the relay");
		goto out;
	}
	v.cut_ns = sl_now_realtime_ns();
	say(&v, fifo, ws, "go\n");
	progress(cfg, "export cut; watching the gate (risk %s allows %llu ms blind)", cfg->risk_class,
		 (unsigned long long)v.max_blind_ms);
	char gq[32];
	snprintf(gq, sizeof(gq), "GATE %s\n", cfg->risk_class);
	int64_t limit = v.cut_ns + (int64_t)(v.max_blind_ms + 3000) * 1000000;
	while (sl_now_realtime_ns() < limit) {
		char resp[256];
		if (sl_vask(v.admin, gq, resp, sizeof(resp)) == 0 && !strncmp(resp, "closed", 6)) {
			v.gate_closed_ns = sl_now_realtime_ns();
			const char *since = strstr(resp, "blind since ");
			v.blind_since_ns = since ? strtoll(since + 12, NULL, 10) : 0;
			snprintf(v.gate_answer, sizeof(v.gate_answer), "%s", resp);
			break;
		}
		snprintf(v.gate_answer, sizeof(v.gate_answer), "%s", resp);
		sleep_ms(50);
	}
	v.running_at_close = !reaped(&v, rpid);
	/* While blind the high-risk response is the stop: give it the time to happen. */
	if (v.response == SL_RESP_STOP && !v.run_exited) {
		for (int i = 0;
		     i < 60 && !reaped(&v, rpid) && !sl_vfile_has(v.record, "\"class\":\"lifecycle.exit\"");
		     i++)
			sleep_ms(50);
	}
	progress(cfg, "gate: %s", v.gate_answer[0] ? v.gate_answer : "(no answer)");

	/* 4. Recovery: restore the path; the exporter reconnects and delivers what it buffered. */
	sl_relay_restore(relay);
	v.restore_ns = sl_now_realtime_ns();
	want = count_lines(v.record);
	for (int i = 0; i < 400 && sl_vstored(&v) < want; i++)
		sleep_ms(25);
	progress(cfg, "export restored; %zu of %zu lines stored", sl_vstored(&v), want);
	if (!v.run_exited)
		say(&v, fifo, ws, "end\n");
	for (int i = 0; i < 1200 && !reaped(&v, rpid); i++)
		sleep_ms(25);
	if (!v.run_exited) {
		kill(rpid, SIGTERM);
		waitpid(rpid, &v.run_status, 0);
		v.run_exited = true;
	}
	rpid = -1;
	child_run = -1;
	progress(cfg, "workload ended (status %d)",
		 WIFEXITED(v.run_status) ? WEXITSTATUS(v.run_status) : 128 + WTERMSIG(v.run_status));
	/* The collector has its own 100 ms tick: let it see the end before it stops. */
	sleep_ms(200);
	sl_relay_stop(relay);
	relay = NULL;
	kill(cpid, SIGTERM);
	waitpid(cpid, NULL, 0);
	cpid = -1;
	child_collector = -1;

	/* 5. The checks, each independent of the others. */
	rc = sl_vchecks(&v, err, errlen);
	res->ended_ns = sl_now_realtime_ns();
	res->controls_passed = res->visibility_passed = true;
	for (size_t i = 0; i < res->n_rows; i++) {
		int vd = res->rows[i].verdict;
		if (vd == SL_V_FAIL || vd == SL_V_GAP) {
			if (res->rows[i].control)
				res->controls_passed = false;
			else
				res->visibility_passed = false;
		}
	}
	/* Passing one never compensates for failing the other. */
	res->passed = rc == 0 && res->controls_passed && res->visibility_passed && res->n_rows > 0;
out:
	child_run = child_collector = -1;
	if (rpid > 0 && !v.run_exited) {
		kill(rpid, SIGTERM);
		waitpid(rpid, NULL, 0);
	}
	sl_relay_stop(relay);
	if (cpid > 0) {
		kill(cpid, SIGTERM);
		waitpid(cpid, NULL, 0);
	}
	/* A failed validation keeps its evidence (record, store, logs) for the operator. */
	if (!cfg->keep && rc == 0 && res->passed)
		sl_rm_tree(res->workdir);
	return rc;
}
