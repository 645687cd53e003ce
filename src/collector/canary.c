/* Scheduled canaries: every N the collector launches a disposable canary workload through the
 * whole pipeline (this binary's `sightline run`: sandbox, sensor, record, exporter, this
 * collector's ingest, the canary-read detection) and alerts when one fails or is late. A healthy
 * sensor that stopped seeing is a visibility change; only an action that must be seen, seen, says
 * the pipeline works. The canary's path and content are random per run, so an old record can never
 * satisfy a new canary. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collector/detect.h"
#include "collector/store.h"
#include "common/selfrun.h"
#include "common/util.h"
#include "common/version.h"

struct sl_canary_sched {
	struct sl_canary_cfg cfg;
	char *policy_extra; /* the operator's extra policy text */
	int64_t next_ns;
	uint64_t n;
	/* the one canary in flight */
	bool pending, seen, exited;
	pid_t pid;
	int status;
	int64_t started_ns, exited_ns;
	char dir[64];
	char path[128]; /* the canary's path inside the sandbox */
};

static void clog_(struct sl_canary_sched *cs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void clog_(struct sl_canary_sched *cs, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (cs->cfg.log)
		cs->cfg.log(line);
}

int sl_canary_sched_new(const struct sl_canary_cfg *cfg, struct sl_canary_sched **out)
{
	*out = NULL;
	if (!cfg->every_ms || !cfg->collector || !cfg->secret_path)
		return -EINVAL;
	struct sl_canary_sched *cs = calloc(1, sizeof(*cs));
	if (!cs)
		return -ENOMEM;
	cs->cfg = *cfg;
	if (cfg->policy) {
		size_t len;
		int r = sl_read_file(cfg->policy, 1 << 20, &cs->policy_extra, &len);
		if (r < 0) {
			free(cs);
			return r;
		}
	}
	*out = cs;
	return 0;
}

static void cleanup(struct sl_canary_sched *cs)
{
	if (cs->dir[0])
		sl_rm_tree(cs->dir);
	cs->dir[0] = '\0';
	cs->pending = false;
}

static int launch(struct sl_canary_sched *cs, int64_t now)
{
	char id[33], tok[33];
	if (sl_random_id(id) < 0 || sl_random_id(tok) < 0)
		return -EIO;
	snprintf(cs->dir, sizeof(cs->dir), "/tmp/sightline-canary.XXXXXX");
	if (!mkdtemp(cs->dir)) {
		cs->dir[0] = '\0';
		return -errno;
	}
	chmod(cs->dir, 0755);
	char ws[128], rec[128], pol[128], file[192], text[4096];
	snprintf(ws, sizeof(ws), "%s/ws", cs->dir);
	snprintf(rec, sizeof(rec), "%s/rec", cs->dir);
	snprintf(pol, sizeof(pol), "%s/policy.yaml", cs->dir);
	snprintf(cs->path, sizeof(cs->path), "/workspace/canary-%.12s.txt", id);
	snprintf(file, sizeof(file), "%s/canary-%.12s.txt", ws, id);
	int r = 0;
	if (mkdir(ws, 0755) < 0 || mkdir(rec, 0700) < 0)
		r = -errno;
	if (r == 0)
		r = sl_write_text(file, tok, O_EXCL, 0644);
	/* As root the workload runs as nobody: it must be able to read its workspace. */
	if (r == 0 && geteuid() == 0 && (chown(ws, 65534, 65534) < 0 || chown(file, 65534, 65534) < 0))
		r = -errno;
	snprintf(text, sizeof(text), "%s\nworkspace: %s\ncanaries: [%s]\n",
		 cs->policy_extra ? cs->policy_extra : "", ws, cs->path);
	if (r == 0)
		r = sl_write_text(pol, text, O_EXCL, 0644);
	if (r < 0)
		return r;
	char task[48];
	snprintf(task, sizeof(task), "canary-%llu", (unsigned long long)++cs->n);
	char *argv[40];
	int a = 0;
	argv[a++] = "sightline";
	argv[a++] = "run";
	char *fixed[] = {"--tenant",
			 "sightline",
			 "--agent",
			 "scheduled-canary",
			 "--task",
			 task,
			 "--version",
			 SL_VERSION,
			 "--credential-ref",
			 "none",
			 "--policy",
			 pol,
			 "--record-dir",
			 rec,
			 "--collector",
			 (char *)cs->cfg.collector,
			 "--collector-secret",
			 (char *)cs->cfg.secret_path,
			 "--risk-class",
			 "low",
			 "--quiet",
			 "--drain-seconds",
			 "5"};
	for (size_t i = 0; i < SL_ARRAY_LEN(fixed); i++)
		argv[a++] = fixed[i];
	if (geteuid() != 0) {
		/* Unprivileged there are no cgroups; the canary is about visibility, not limits. */
		char *gaps[] = {"--accept-gap",	 "cgroup",	 "--accept-gap",
				"cgroup-memory", "--accept-gap", "cgroup-pids"};
		for (size_t i = 0; i < SL_ARRAY_LEN(gaps); i++)
			argv[a++] = gaps[i];
	}
	argv[a++] = "--";
	argv[a++] = "/bin/cat";
	argv[a++] = cs->path;
	argv[a] = NULL;
	int e = sl_selfrun_spawn(argv, NULL, NULL, &cs->pid);
	if (e < 0)
		return e;
	cs->pending = true;
	cs->seen = cs->exited = false;
	cs->started_ns = now;
	clog_(cs, "scheduled canary %llu started (task %s, canary %s)", (unsigned long long)cs->n, task,
	      cs->path);
	return 0;
}

void sl_canary_tick(struct sl_canary_sched *cs, struct sl_store *st, int64_t now)
{
	if (!cs)
		return;
	if (cs->pending && !cs->exited && waitpid(cs->pid, &cs->status, WNOHANG) == cs->pid) {
		cs->exited = true;
		cs->exited_ns = now;
	}
	if (cs->pending && cs->seen && cs->exited) {
		clog_(cs, "scheduled canary %llu: ok (seen %lld ms after launch)", (unsigned long long)cs->n,
		      (long long)((cs->started_ns ? now - cs->started_ns : 0) / 1000000));
		cleanup(cs);
	} else if (cs->pending && !cs->seen && cs->exited && now - cs->exited_ns > 2000000000LL) {
		/* The run ended and its canary read still has not arrived: the pipeline failed it. */
		char d[256];
		snprintf(d, sizeof(d),
			 "scheduled canary %llu: the canary read never arrived (run exit status %d)",
			 (unsigned long long)cs->n,
			 WIFEXITED(cs->status) ? WEXITSTATUS(cs->status) : 128 + WTERMSIG(cs->status));
		sl_store_alert_open(st, NULL, "canary-failed", "critical", cs->started_ns, d);
		clog_(cs, "%s", d);
		cleanup(cs);
	} else if (cs->pending && !cs->seen && now - cs->started_ns > (int64_t)cs->cfg.every_ms * 1000000) {
		char d[256];
		snprintf(d, sizeof(d), "scheduled canary %llu: not seen within %u ms",
			 (unsigned long long)cs->n, cs->cfg.every_ms);
		sl_store_alert_open(st, NULL, "canary-late", "critical", cs->started_ns, d);
		clog_(cs, "%s", d);
		if (!cs->exited) {
			kill(cs->pid, SIGKILL); /* never block the collector's one thread on its drain;
						   PDEATHSIG takes the sandbox */
			waitpid(cs->pid, NULL, 0);
		}
		cleanup(cs);
	}
	if (!cs->pending && now >= cs->next_ns) {
		cs->next_ns = now + (int64_t)cs->cfg.every_ms * 1000000;
		int r = launch(cs, now);
		if (r < 0) {
			char d[256];
			snprintf(d, sizeof(d), "scheduled canary: cannot launch: %s", strerror(-r));
			sl_store_alert_open(st, NULL, "canary-failed", "critical", now, d);
			clog_(cs, "%s", d);
			cleanup(cs);
		}
	}
}

bool sl_canary_seen(struct sl_canary_sched *cs, const char *path, int64_t now)
{
	(void)now;
	if (!cs || !cs->pending || strcmp(path, cs->path) != 0)
		return false;
	cs->seen = true;
	return true;
}

void sl_canary_sched_free(struct sl_canary_sched *cs)
{
	if (!cs)
		return;
	if (cs->pending && !cs->exited) {
		kill(cs->pid, SIGKILL); /* never block the collector's one thread on its drain; PDEATHSIG
					   takes the sandbox */
		waitpid(cs->pid, NULL, 0);
	}
	cleanup(cs);
	free(cs->policy_extra);
	free(cs);
}
