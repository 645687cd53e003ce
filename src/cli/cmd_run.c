/* sightline run: the launcher and the supervisor of one sandbox. The identity comes from this
 * command line only (the launcher's word); nothing the workload says about itself is read. */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "cli/cli.h"
#include "cli/run_common.h"
#include "cli/run_gvisor.h"
#include "cli/supervise.h"
#include "common/json.h"
#include "common/util.h"
#include "common/version.h"
#include "contract/listener.h"
#include "export/exporter.h"
#include "export/frame.h"
#include "policy/policy.h"
#include "record/record.h"
#include "sandbox/sandbox.h"
#include "sensor/paths.h"
#include "sensor/redact.h"
#include "sensor/supervisor.h"

#define NOBODY 65534

struct run_opts {
	struct sl_identity id;
	const char *policy_file;
	const char *record_dir;
	unsigned accepted;
	unsigned sync_ms;
	bool quiet;
	bool spread; /* do not pin the workload and its sensor to one CPU */
	const char *collector;	      /* ADDR to stream the record to, or NULL */
	const char *collector_secret; /* the collector's master secret (to derive this sandbox's key) */
	const char *risk_class;
	unsigned drain_seconds;
	/* Longest time without an ACK from the collector before the export is blind: recorded
	 * (export.blind), and for high risk the workload is stopped. 0: the risk class's default. */
	unsigned max_blind_ms;
	const char *validator_listen; /* "PORT:LOGFILE": the validator's listener (docs/contract.md) */
	char **argv;
	bool gvisor; /* --runtime gvisor: runsc, the Sentry's stream as the sensor (run_gvisor.c) */
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sightline run --tenant T --agent A --task K --version V --credential-ref R\n"
		   "                     [--policy FILE] [--record-dir DIR] [--accept-gap NAME]...\n"
		   "                     [--sync-ms N] [--no-colocate] [--quiet]\n"
		   "                     [--collector unix:PATH|tcp:127.0.0.1:PORT] [--collector-secret FILE]\n"
		   "                     [--risk-class high|medium|low] [--max-blind-ms N] [--drain-seconds N]\n"
		   "                     [--runtime native|gvisor]\n"
		   "                     [--validator-listen PORT:LOGFILE]\n"
		   "                     -- CMD [ARGS...]\n"
		   "gaps: landlock landlock-net landlock-scope cgroup cgroup-memory cgroup-pids notify-sync\n");
}

/* Identity values are the launcher's: printable, bounded, non-empty. */
static bool valid_ident(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 256)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

static int parse(int argc, char **argv, struct run_opts *o)
{
	enum { OPT_TENANT = 256, OPT_AGENT, OPT_TASK, OPT_VERSION, OPT_CRED, OPT_POLICY, OPT_RECDIR, OPT_GAP, OPT_SYNC, OPT_QUIET, OPT_SPREAD, OPT_COLLECTOR, OPT_SECRET, OPT_RISK, OPT_DRAIN, OPT_MAXBLIND, OPT_RUNTIME, OPT_VLISTEN };
	static const struct option opts[] = {{"tenant", required_argument, 0, OPT_TENANT},
					     {"agent", required_argument, 0, OPT_AGENT},
					     {"task", required_argument, 0, OPT_TASK},
					     {"version", required_argument, 0, OPT_VERSION},
					     {"credential-ref", required_argument, 0, OPT_CRED},
					     {"policy", required_argument, 0, OPT_POLICY},
					     {"record-dir", required_argument, 0, OPT_RECDIR},
					     {"accept-gap", required_argument, 0, OPT_GAP},
					     {"sync-ms", required_argument, 0, OPT_SYNC},
					     {"quiet", no_argument, 0, OPT_QUIET},
					     {"no-colocate", no_argument, 0, OPT_SPREAD},
					     {"collector", required_argument, 0, OPT_COLLECTOR},
					     {"collector-secret", required_argument, 0, OPT_SECRET},
					     {"risk-class", required_argument, 0, OPT_RISK},
					     {"drain-seconds", required_argument, 0, OPT_DRAIN},
					     {"max-blind-ms", required_argument, 0, OPT_MAXBLIND},
					     {"runtime", required_argument, 0, OPT_RUNTIME},
					     {"validator-listen", required_argument, 0, OPT_VLISTEN},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	memset(o, 0, sizeof(*o));
	o->sync_ms = 20;
	o->risk_class = "medium";
	o->drain_seconds = 10;
	o->collector_secret = "/var/lib/sightline/collector.secret";
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		unsigned bit;
		switch (c) {
		case OPT_TENANT:
			o->id.tenant = optarg;
			break;
		case OPT_AGENT:
			o->id.agent = optarg;
			break;
		case OPT_TASK:
			o->id.task = optarg;
			break;
		case OPT_VERSION:
			o->id.version = optarg;
			break;
		case OPT_CRED:
			o->id.credential_ref = optarg;
			break;
		case OPT_POLICY:
			o->policy_file = optarg;
			break;
		case OPT_RECDIR:
			o->record_dir = optarg;
			break;
		case OPT_GAP:
			if (sl_gap_parse(optarg, &bit) < 0) {
				fprintf(stderr, "sightline run: unknown gap '%s'\n", optarg);
				return -1;
			}
			o->accepted |= bit;
			break;
		case OPT_SYNC: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v > 10000) {
				fprintf(stderr, "sightline run: --sync-ms takes 0..10000\n");
				return -1;
			}
			o->sync_ms = (unsigned)v;
			break;
		}
		case OPT_QUIET:
			o->quiet = true;
			break;
		case OPT_SPREAD:
			o->spread = true;
			break;
		case OPT_COLLECTOR:
			o->collector = optarg;
			break;
		case OPT_SECRET:
			o->collector_secret = optarg;
			break;
		case OPT_RISK:
			if (strcmp(optarg, "high") && strcmp(optarg, "medium") && strcmp(optarg, "low")) {
				fprintf(stderr, "sightline run: --risk-class is high, medium or low\n");
				return -1;
			}
			o->risk_class = optarg;
			break;
		case OPT_MAXBLIND: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 100 || v > 3600000) {
				fprintf(stderr, "sightline run: --max-blind-ms takes 100..3600000\n");
				return -1;
			}
			o->max_blind_ms = (unsigned)v;
			break;
		}
		case OPT_DRAIN: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v > 3600) {
				fprintf(stderr, "sightline run: --drain-seconds takes 0..3600\n");
				return -1;
			}
			o->drain_seconds = (unsigned)v;
			break;
		}
		case OPT_RUNTIME:
			if (strcmp(optarg, "native") && strcmp(optarg, "gvisor")) {
				fprintf(stderr, "sightline run: --runtime is native or gvisor\n");
				return -1;
			}
			o->gvisor = !strcmp(optarg, "gvisor");
			break;
		case OPT_VLISTEN: {
			char *end;
			unsigned long port = strtoul(optarg, &end, 10);
			if (end == optarg || *end != ':' || port == 0 || port > 65535 || end[1] != '/') {
				fprintf(stderr, "sightline run: --validator-listen takes PORT:/ABSOLUTE/LOGFILE\n");
				return -1;
			}
			o->validator_listen = optarg;
			break;
		}
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	const struct {
		const char *v, *name;
	} req[] = {{o->id.tenant, "--tenant"},
		   {o->id.agent, "--agent"},
		   {o->id.task, "--task"},
		   {o->id.version, "--version"},
		   {o->id.credential_ref, "--credential-ref"}};
	for (size_t i = 0; i < SL_ARRAY_LEN(req); i++) {
		if (!req[i].v) {
			fprintf(stderr, "sightline run: %s is required (identity comes from the launcher)\n", req[i].name);
			return -1;
		}
		if (!valid_ident(req[i].v)) {
			fprintf(stderr, "sightline run: %s must be 1-256 printable characters\n", req[i].name);
			return -1;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "sightline run: no command given (put it after --)\n");
		usage(stderr);
		return -1;
	}
	o->argv = argv + optind;
	return 0;
}

static const char *default_record_dir(char *buf, size_t len)
{
	if (geteuid() == 0)
		return "/var/lib/sightline/records";
	const char *state = getenv("XDG_STATE_HOME");
	if (state && state[0] == '/')
		snprintf(buf, len, "%s/sightline/records", state);
	else {
		const char *home = getenv("HOME");
		struct passwd *pw = getpwuid(getuid());
		snprintf(buf, len, "%s/.local/state/sightline/records", home && home[0] == '/' ? home : pw ? pw->pw_dir : "/tmp");
	}
	return buf;
}

static bool path_under(const char *p, const char *root)
{
	size_t n = strlen(root);
	return !strncmp(p, root, n) && (p[n] == '\0' || p[n] == '/' || (n == 1 && root[0] == '/'));
}

/* The heartbeat's "dropped": the sensor never drops an event by design (the workload's syscall
 * waits for its line), so the only one ever lost is the line whose append failed, which stops
 * recording and kills the sandbox (sup.fatal). */
static uint64_t sensor_dropped(void *arg)
{
	const struct sl_supervisor *sup = arg;
	return atomic_load(&sup->fatal) ? 1 : 0;
}

/* One of the CPUs we may use, chosen by the sandbox id so concurrent sandboxes spread out. */
static int pick_cpu(const char *sandbox_id)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return -1;
	int n = CPU_COUNT(&set);
	if (n <= 0)
		return -1;
	int want = (int)(strtoul(sandbox_id + 24, NULL, 16) % (unsigned long)n);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &set) && want-- == 0)
			return cpu;
	return -1;
}

/* The native sandbox as the supervisor's target (supervise.h): freeze through its cgroup. */
static int sb_freeze(void *arg, bool on)
{
	return sl_sandbox_freeze(arg, on);
}

/* Freeze first: nothing runs between the decision and the kill. */
static void sb_stop(void *arg)
{
	sl_sandbox_freeze(arg, true);
	sl_sandbox_kill(arg);
}

static void sb_kill(void *arg)
{
	sl_sandbox_kill(arg);
}

static void begin_body(struct sl_json *j, const struct run_opts *o, const struct sl_policy *p, const char *ws,
		       const struct sl_sandbox *sb, unsigned gaps, uid_t huid, bool sync_wakeup, int cpu)
{
	struct utsname u;
	uname(&u);
	char rt[256];
	snprintf(rt, sizeof(rt), "linux %s", u.release);
	sl_run_manifest_open(j, "native", rt, "sightline-supervisor", SL_SENSOR_VERSION, sb->start_real_ns,
			     o->risk_class);
	sl_run_manifest_workload(j, o->argv, p, o->policy_file, ws);
	sl_json_obj_open(j, "layers");
	sl_json_str(j, "namespaces", "user,pid,mount,net,ipc,uts,cgroup", 0);
	sl_json_int(j, "landlock_abi", (gaps & SL_GAP_LANDLOCK) ? 0 : sb->landlock_abi);
	sl_json_str(j, "seccomp", sync_wakeup ? "user-notify+sync-wakeup" : "user-notify", 0);
	sl_json_str(j, "cgroup", sb->cg.v2[0] ? sb->cg.v2 : NULL, 0);
	sl_json_bool(j, "no_new_privs", true);
	sl_json_int(j, "cpu", cpu);
	sl_json_bool(j, "capabilities", false);
	sl_json_obj_close(j);
	sl_json_arr_open(j, "accepted_gaps");
	for (unsigned i = 0; i < SL_GAP_COUNT; i++)
		if (gaps & (1u << i))
			sl_json_str(j, NULL, sl_gap_name(i), 0);
	sl_json_arr_close(j);
	sl_run_manifest_close(j, huid);
}

int sl_cmd_run(int argc, char **argv)
{
	struct run_opts o;
	struct sl_policy pol;
	struct sl_sandbox sb;
	struct sl_supervisor sup;
	struct sl_record *rec = NULL;
	struct sl_exporter *exporter = NULL;
	struct sl_canary_listener *vlistener = NULL;
	char err[1024], ws[PATH_MAX], recdir_buf[PATH_MAX], recdir[PATH_MAX];
	int status = 125; /* our own failure, as env(1) and friends use it */
	bool sb_started = false;
	memset(&sup, 0, sizeof(sup));
	memset(&sb, 0, sizeof(sb));
	sl_timing("start");
	/* The sensor holds a pidfd per live workload thread and per blocking operation: take the
	 * whole hard limit for fds (the workload gets the policy's own limit). */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	if (parse(argc, argv, &o) < 0)
		return 2;
	sl_policy_default(&pol);
	if (o.policy_file && sl_policy_load(o.policy_file, &pol, err, sizeof(err)) < 0) {
		fprintf(stderr, "sightline run: policy: %s\n", err);
		sl_policy_free(&pol);
		return 2;
	}
	/* Fail closed: every layer this host lacks must be accepted by name. */
	int abi;
	unsigned gaps = sl_sandbox_probe(true, &abi);
	unsigned missing = o.gvisor ? 0 : gaps & ~o.accepted; /* native layers: not used by runsc */
	if (missing) {
		for (unsigned i = 0; i < SL_GAP_COUNT; i++)
			if (missing & (1u << i))
				fprintf(stderr, "sightline run: missing layer '%s': %s\n", sl_gap_name(i), sl_gap_explain(i));
		fprintf(stderr, "sightline run: refusing to run; accept each named gap with --accept-gap NAME\n");
		sl_policy_free(&pol);
		return 3;
	}

	char sandbox_id[33];
	if (sl_random_id(sandbox_id) < 0) {
		fprintf(stderr, "sightline run: no randomness for the sandbox id\n");
		goto out;
	}
	/* The workload's host ids: the invoker's when unprivileged; as root, never root: the
	 * workspace owner's, or nobody. */
	uid_t huid = getuid();
	gid_t hgid = getgid();
	if (pol.workspace) {
		if (!realpath(pol.workspace, ws)) {
			fprintf(stderr, "sightline run: workspace %s: %s\n", pol.workspace, strerror(errno));
			goto out;
		}
		struct stat st;
		if (stat(ws, &st) < 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "sightline run: workspace %s is not a directory\n", ws);
			goto out;
		}
		if (geteuid() == 0) {
			/* A regular user's workspace runs as that user; anything owned by root or a
			 * system account runs as nobody: never a privileged uid or gid (a workspace of
			 * group shadow must not make /etc/shadow readable). */
			huid = st.st_uid >= 1000 ? st.st_uid : NOBODY;
			hgid = st.st_gid >= 1000 ? st.st_gid : NOBODY;
		}
	} else {
		snprintf(ws, sizeof(ws), "/tmp/sightline-ws-%s", sandbox_id);
		if (mkdir(ws, 0700) < 0) {
			fprintf(stderr, "sightline run: create workspace %s: %s\n", ws, strerror(errno));
			goto out;
		}
		if (geteuid() == 0) {
			huid = hgid = NOBODY;
			if (chown(ws, huid, hgid) < 0) {
				fprintf(stderr, "sightline run: chown workspace: %s\n", strerror(errno));
				goto out;
			}
		}
	}
	if (geteuid() == 0 && (huid == 0 || hgid == 0)) {
		fprintf(stderr, "sightline run: refusing to run the workload as host root\n");
		goto out;
	}
	/* The record must be out of the workload's reach: never inside its workspace. */
	const char *rd = o.record_dir ? o.record_dir : default_record_dir(recdir_buf, sizeof(recdir_buf));
	char rd_abs[PATH_MAX];
	if (rd[0] == '/')
		snprintf(rd_abs, sizeof(rd_abs), "%s", rd);
	else if (!getcwd(rd_abs, sizeof(rd_abs)) || strlen(rd_abs) + strlen(rd) + 2 > sizeof(rd_abs))
		rd_abs[0] = '\0';
	else
		strcat(strcat(rd_abs, "/"), rd);
	if (rd_abs[0])
		sl_path_normalize(rd_abs); /* "WS/../rec" is not inside WS */
	if (!rd_abs[0] || path_under(rd_abs, ws)) {
		fprintf(stderr, "sightline run: the record dir %s must not be inside the workspace %s\n", rd, ws);
		goto out;
	}
	int mr = sl_mkdir_p(rd, 0700);
	if (mr < 0 || !realpath(rd, recdir)) {
		fprintf(stderr, "sightline run: record dir %s: %s\n", rd, strerror(mr < 0 ? -mr : errno));
		goto out;
	}
	if (path_under(recdir, ws) || path_under(ws, recdir)) {
		fprintf(stderr, "sightline run: the record dir %s and the workspace %s must not contain each other\n",
			recdir, ws);
		goto out;
	}

	if (o.gvisor) {
		struct sl_gv_run_args ga = {.id = o.id,
					    .policy = &pol,
					    .policy_file = o.policy_file,
					    .workspace = ws,
					    .recdir = recdir,
					    .sandbox_id = sandbox_id,
					    .uid = huid,
					    .gid = hgid,
					    .argv = o.argv,
					    .sync_ms = o.sync_ms,
					    .quiet = o.quiet,
					    .collector = o.collector,
					    .collector_secret = o.collector_secret,
					    .risk_class = o.risk_class,
					    .drain_seconds = o.drain_seconds,
					    .max_blind_ms = o.max_blind_ms,
					    .validator_listen = o.validator_listen};
		status = sl_run_gvisor(&ga);
		goto out;
	}
	/* Build the workload's environment from the policy alone: the launcher's environment
	 * (which may hold secrets, or SIGHTLINE_* values) never crosses. */
	char *envp[SL_POLICY_MAX_PATHS + 1];
	for (size_t i = 0; i < pol.n_env; i++)
		envp[i] = pol.env[i];
	envp[pol.n_env] = NULL;

	struct sl_sandbox_cfg cfg = {.policy = &pol,
				     .workspace_host = ws,
				     .argv = o.argv,
				     .envp = envp,
				     .sandbox_id = sandbox_id,
				     .host_uid = huid,
				     .host_gid = hgid,
				     .inner_uid = 1000,
				     .inner_gid = 1000,
				     .record_opens = pol.record_opens,
				     .gaps = gaps,
				     .accepted = o.accepted,
				     .cpu = o.spread ? -1 : pick_cpu(sandbox_id)};
	/* Signals for the whole run are taken through a signalfd; block them before any thread. */
	sigset_t sigs;
	sl_run_block_signals(&sigs, SIGUSR1); /* SIGUSR1: the sensor thread's stop signal: only it unblocks it */
	sl_timing("policy, ids, dirs");
	if (sl_sandbox_start(&cfg, &sb, err, sizeof(err)) < 0) {
		fprintf(stderr, "sightline run: %s\n", err);
		status = 3;
		goto out;
	}
	sb_started = true;
	sl_timing("sandbox ready");
	int r = sl_record_create(&rec, recdir, sandbox_id, &o.id, "supervisor", o.sync_ms);
	sl_timing("record created");
	if (r < 0) {
		fprintf(stderr, "sightline run: create record in %s: %s\n", recdir, strerror(-r));
		goto out;
	}
	sup.sb = &sb;
	sup.rec = rec;
	sup.policy = &pol;
	sup.w_uid = huid;
	sup.w_gid = hgid;
	sup.drop_groups = geteuid() == 0;
	sup.cpu = cfg.cpu;
	r = sl_supervisor_start(&sup);
	sl_timing("sensor started");
	if (r < 0) {
		fprintf(stderr, "sightline run: start sensor: %s\n", strerror(-r));
		goto out;
	}
	gaps |= sb.gaps_found;
	struct sl_json j;
	sl_json_init(&j);
	begin_body(&j, &o, &pol, ws, &sb, gaps, huid, sup.sync_wakeup, cfg.cpu);
	r = sl_sup_append(rec, "record.begin", &j);
	for (unsigned i = 0; r == 0 && i < SL_GAP_COUNT; i++)
		if (gaps & (1u << i))
			r = sl_run_gap(rec, &j, sl_gap_name(i), sl_gap_explain(i));
	if (r == 0 && !pol.record_opens)
		r = sl_run_gap(rec, &j, "file.open", "the policy turned off recording of file opens");
	if (r == 0) {
		sl_json_reset(&j);
		sl_json_int(&j, "pid", 1);
		sl_json_int(&j, "host_pid", sb.pid);
		sl_json_str(&j, "workspace", pol.workspace_mount, 0);
		sl_run_ocsf(&j, 1007, 1);
		r = sl_sup_append(rec, "lifecycle.start", &j);
	}
	if (r < 0) {
		fprintf(stderr, "sightline run: write record: %s\n", strerror(-r));
		sl_json_free(&j);
		goto out;
	}
	/* The control path: a socket beside the record (out of the sandbox's view), answered by this
	 * supervisor, which the workload can neither see nor refuse. */
	char ctl_path[PATH_MAX + 48];
	snprintf(ctl_path, sizeof(ctl_path), "%.*s/%s.ctl", PATH_MAX - 1, recdir, sandbox_id);
	int ctl_fd = sl_sup_control_listen(ctl_path);
	if (ctl_fd < 0)
		fprintf(stderr, "sightline run: no control socket at %s: %s\n", ctl_path, strerror(-ctl_fd));
	if (o.collector) {
		/* This sandbox's key, derived from the collector's secret; the secret is wiped at once
		 * and the key lives only in this process, never in the sandbox. */
		struct sl_exporter_cfg ec = {.addr = o.collector,
					     .record_path = sl_record_path(rec),
					     .sandbox_id = sandbox_id,
					     .id = o.id,
					     .risk_class = o.risk_class,
					     .control = ctl_fd >= 0 ? ctl_path : "none",
					     .dropped = sensor_dropped,
					     .dropped_arg = &sup};
		if (sl_run_export_start(&ec, o.collector_secret, &exporter) < 0) {
			sl_json_free(&j);
			if (ctl_fd >= 0) {
				close(ctl_fd);
				unlink(ctl_path);
			}
			goto out;
		}
	}
	if (!o.quiet)
		fprintf(stderr, "sightline: sandbox %s, record %s\n", sandbox_id, sl_record_path(rec));
	sl_timing("record + sensor ready");
	if (o.validator_listen && sl_sup_validator_listener(o.validator_listen, sb.pid, &vlistener) < 0) {
		sl_json_free(&j);
		if (ctl_fd >= 0) {
			close(ctl_fd);
			unlink(ctl_path);
		}
		goto out;
	}
	if (sl_sandbox_go(&sb) < 0) {
		fprintf(stderr, "sightline run: the sandbox died before exec\n");
	}

	/* Wait for the workload, the wall limit, an operator signal, or (high risk, streaming) the
	 * collector's silence past the risk class's limit. */
	struct sl_sup_target tgt = {.arg = &sb,
				    .freeze = sb_freeze,
				    .stop = sb_stop,
				    .kill = sb_kill,
				    .freeze_error = "error: no cgroup v2 here (freeze is a named gap)\n"};
	struct sl_run_wait wt = {.pidfd = sb.pidfd,
				 .ctl_fd = ctl_fd,
				 .sigs = &sigs,
				 .start_mono_ns = sb.start_mono_ns,
				 .wall_seconds = pol.limits.wall_seconds,
				 .exporter = exporter,
				 .risk_class = o.risk_class,
				 .collector = o.collector,
				 .max_blind_ms = o.max_blind_ms,
				 .rec = rec,
				 .t = &tgt,
				 .credential_ref = o.id.credential_ref};
	const char *reason = sl_run_wait(&wt);
	if (ctl_fd >= 0) {
		close(ctl_fd);
		unlink(ctl_path);
	}
	sl_timing("workload exited");
	sl_canary_listener_stop(vlistener);
	vlistener = NULL;
	int wstatus = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	sl_sandbox_reap(&sb, &wstatus, &ru);
	int64_t dur = sl_now_monotonic_ns() - sb.start_mono_ns;
	/* pid 1 is gone, so the kernel has killed the rest of the pid namespace; the sensor thread
	 * ends when the last task leaves the filter. */
	sl_sandbox_kill(&sb);
	sl_supervisor_join(&sup);
	if (atomic_load(&sup.fatal))
		reason = "killed: the record could not be written";
	uint64_t mem_peak, pids_peak;
	sl_sandbox_cgroup_stats(&sb, &mem_peak, &pids_peak);
	sl_json_reset(&j);
	sl_json_int(&j, "pid", 1);
	sl_json_int(&j, "host_pid", sb.pid);
	status = sl_run_exit_status(&j, wstatus);
	sl_run_exit_usage(&j, reason, dur, &ru);
	sl_json_int(&j, "max_rss_kb", ru.ru_maxrss);
	if (mem_peak)
		sl_json_uint(&j, "memory_peak_bytes", mem_peak);
	if (pids_peak)
		sl_json_uint(&j, "pids_peak", pids_peak);
	sl_run_ocsf(&j, 1007, 2);
	/* Even after a record failure, try: the end of the story may still fit once the failed line
	 * was rolled back, and says why the workload was stopped. */
	r = sl_sup_append(rec, "lifecycle.exit", &j);
	if (atomic_load(&sup.fatal))
		r = atomic_load(&sup.fatal);
	sl_json_reset(&j);
	sl_json_obj_open(&j, "counts");
	sl_json_uint(&j, "events", sl_record_count(rec) + 1);
	sl_json_uint(&j, "notifications", atomic_load(&sup.c.notifications));
	sl_json_uint(&j, "process.exec", atomic_load(&sup.c.exec));
	sl_json_uint(&j, "file.open", atomic_load(&sup.c.open));
	sl_json_uint(&j, "file.open_failed", atomic_load(&sup.c.open_failed));
	sl_json_uint(&j, "network.connect", atomic_load(&sup.c.connect));
	sl_json_uint(&j, "policy.deny", atomic_load(&sup.c.deny));
	sl_json_uint(&j, "sensor.gap", atomic_load(&sup.c.gap));
	sl_json_uint(&j, "canary", atomic_load(&sup.c.canary));
	sl_json_uint(&j, "inexact", atomic_load(&sup.c.inexact));
	sl_json_obj_close(&j);
	sl_timing("sensor joined");
	/* No record.end after a lost line: the record must read as cut short, not complete. */
	int fr = r < 0 ? sl_record_abandon(rec) : sl_record_finish(rec, &j);
	sl_timing("record finished");
	rec = NULL;
	if (exporter) {
		/* Ship what is left. What the collector has not acknowledged stays in the record:
		 * nothing is discarded; it can be delivered later from there. */
		sl_run_export_finish(exporter, o.drain_seconds, o.collector, o.quiet);
		exporter = NULL;
	}
	sl_json_free(&j);
	status = sl_run_final_status(status, r, fr);
out:
	sl_canary_listener_stop(vlistener);
	if (exporter)
		sl_exporter_finish(exporter, 0, NULL);
	if (rec)
		sl_record_finish(rec, NULL);
	if (sb_started) {
		sl_supervisor_join(&sup);
		sl_sandbox_destroy(&sb);
	}
	sl_policy_free(&pol);
	return status;
}
