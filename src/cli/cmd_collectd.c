/* sightline collectd / status / events / alerts: the collector daemon and its readers. */
#include <errno.h>
#include <getopt.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "collector/server.h"
#include "collector/store.h"
#include "common/json.h"
#include "common/util.h"

#define DEFAULT_SOCK   "unix:/run/sightline/collector.sock"
#define DEFAULT_DB     "/var/lib/sightline/collector.db"
#define DEFAULT_SECRET "/var/lib/sightline/collector.secret"

static void log_line(const char *line)
{
	char ts[32];
	time_t t = time(NULL);
	struct tm tm;
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	fprintf(stderr, "%s collectd: %s\n", ts, line);
}

static int parse_ms(const char *s, unsigned *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || v <= 0 || v > 86400)
		return -1;
	if (!strcmp(end, "ms"))
		*out = (unsigned)v;
	else if (!strcmp(end, "s") || !*end)
		*out = (unsigned)(v * 1000);
	else
		return -1;
	return 0;
}

int sl_cmd_collectd(int argc, char **argv)
{
	static const struct option opts[] = {{"listen", required_argument, 0, 'l'}, {"db", required_argument, 0, 'd'},
					     {"secret", required_argument, 0, 's'}, {"max-blind", required_argument, 0, 'b'},
					     {"max-delay", required_argument, 0, 'y'}, {"help", no_argument, 0, 'h'},
					     {"admin", required_argument, 0, 'a'},
					     {"metrics", required_argument, 0, 'm'},
					     {"gate-disabled", no_argument, 0, 'G'},
					     {"canary-every", required_argument, 0, 'E'},
					     {"canary-policy", required_argument, 0, 'P'},
					     {0, 0, 0, 0}};
	struct sl_collectd_cfg cfg = {.db_path = DEFAULT_DB,
				      .max_blind_ms_high = 2000,
				      .max_blind_ms_medium = 10000,
				      .max_blind_ms_low = 60000,
				      .max_delay_ms = 1000,
				      .log = log_line};
	const char *secret = DEFAULT_SECRET;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (cfg.n_listen == SL_COLLECTD_MAX_LISTEN) {
				fprintf(stderr, "sightline collectd: at most %d --listen\n", SL_COLLECTD_MAX_LISTEN);
				return 2;
			}
			cfg.listen[cfg.n_listen++] = optarg;
			break;
		case 'd':
			cfg.db_path = optarg;
			break;
		case 'a':
			cfg.admin = optarg;
			break;
		case 'm':
			cfg.metrics = optarg;
			break;
		case 'G':
			cfg.gate_disabled = true;
			break;
		case 'E': {
			/* minutes by default (--canary-every 15), or with a unit: 30s, 500ms, 2m */
			size_t l = strlen(optarg);
			char tmp[64];
			snprintf(tmp, sizeof(tmp), "%s", optarg);
			double mul = 60000;
			if (l && tmp[l - 1] == 'm' && (l < 2 || tmp[l - 2] != 'm')) {
				tmp[l - 1] = '\0';
			} else if (l && (tmp[l - 1] == 's' || !strcmp(tmp + (l > 2 ? l - 2 : 0), "ms"))) {
				mul = 0;
			}
			unsigned ms = 0;
			char *end;
			double v = strtod(tmp, &end);
			if (mul && (end == tmp || *end || v <= 0 || v > 1440))
				ms = 0;
			else if (mul)
				ms = (unsigned)(v * mul);
			else if (parse_ms(tmp, &ms) < 0)
				ms = 0;
			if (ms < 1000) {
				fprintf(stderr, "sightline collectd: --canary-every takes minutes (15) or a duration of at least 1s (30s, 2m)\n");
				return 2;
			}
			cfg.canary_every_ms = ms;
			break;
		}
		case 'P':
			cfg.canary_policy = optarg;
			break;
		case 's':
			secret = optarg;
			break;
		case 'b': {
			/* high=2s,medium=10s,low=60s */
			char buf[256];
			snprintf(buf, sizeof(buf), "%s", optarg);
			for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
				char *eqp = strchr(kv, '=');
				unsigned ms;
				if (!eqp || parse_ms(eqp + 1, &ms) < 0) {
					fprintf(stderr, "sightline collectd: --max-blind takes high=2s,medium=10s,low=60s\n");
					return 2;
				}
				*eqp = '\0';
				if (!strcmp(kv, "high"))
					cfg.max_blind_ms_high = ms;
				else if (!strcmp(kv, "medium"))
					cfg.max_blind_ms_medium = ms;
				else if (!strcmp(kv, "low"))
					cfg.max_blind_ms_low = ms;
				else {
					fprintf(stderr, "sightline collectd: unknown risk class '%s'\n", kv);
					return 2;
				}
			}
			break;
		}
		case 'y':
			if (parse_ms(optarg, &cfg.max_delay_ms) < 0) {
				fprintf(stderr, "sightline collectd: --max-delay takes a duration (500ms, 2s)\n");
				return 2;
			}
			break;
		case 'h':
			printf("usage: sightline collectd [--listen unix:PATH|tcp:127.0.0.1:PORT]... [--db FILE]\n"
			       "                          [--secret FILE] [--max-blind high=2s,medium=10s,low=60s]\n"
			       "                          [--max-delay 1s] [--admin unix:PATH] [--metrics tcp:127.0.0.1:PORT]\n"
			       "                          [--canary-every MINUTES|30s] [--canary-policy FILE] [--gate-disabled]\n");
			return 0;
		default:
			return 2;
		}
	}
	if (!cfg.admin)
		cfg.admin = "unix:/run/sightline/collector-admin.sock";
	if (cfg.n_listen == 0) {
		cfg.listen[cfg.n_listen++] = DEFAULT_SOCK;
		sl_mkdir_p("/run/sightline", 0755);
	}
	if (!strncmp(cfg.admin, "unix:", 5)) {
		char adir[4096];
		snprintf(adir, sizeof(adir), "%s", cfg.admin + 5);
		char *as = strrchr(adir, '/');
		if (as && as != adir) {
			*as = '\0';
			sl_mkdir_p(adir, 0755);
		}
	}
	cfg.secret_path = secret;
	int r = sl_collectd_secret(secret, cfg.master);
	if (r < 0) {
		fprintf(stderr, "sightline collectd: secret %s: %s\n", secret, strerror(-r));
		return 1;
	}
	char dbdir[4096];
	snprintf(dbdir, sizeof(dbdir), "%s", cfg.db_path);
	char *slash = strrchr(dbdir, '/');
	if (slash && slash != dbdir) {
		*slash = '\0';
		sl_mkdir_p(dbdir, 0700);
	}
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = sl_collectd_run(&cfg);
	explicit_bzero(cfg.master, sizeof(cfg.master));
	return r < 0 ? 1 : 0;
}

/* ---- readers ---- */

struct reader {
	bool json;
	size_t rows;
};

static void fmt_time(int64_t ns, char *out, size_t len)
{
	if (!ns) {
		snprintf(out, len, "-");
		return;
	}
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	strftime(out, len, "%H:%M:%S", gmtime_r(&t, &tm));
	size_t l = strlen(out);
	snprintf(out + l, len - l, ".%03d", (int)(ns / 1000000 % 1000));
}

static int health_cb(void *arg, const struct sl_store_health *h)
{
	struct reader *r = arg;
	char since[32], hb[32];
	fmt_time(h->state_since_ns, since, sizeof(since));
	fmt_time(h->last_heartbeat_ns, hb, sizeof(hb));
	if (r->json) {
		/* Every string through the JSON writer: tenant or task names are the launcher's, but
		 * they may hold quotes or backslashes. */
		struct sl_json j;
		sl_json_init(&j);
		sl_json_obj_open(&j, NULL);
		sl_json_str(&j, "sandbox_id", h->binding.sandbox_id, 0);
		sl_json_str(&j, "tenant", h->binding.tenant ? h->binding.tenant : "", 0);
		sl_json_str(&j, "task", h->binding.task ? h->binding.task : "", 0);
		sl_json_str(&j, "risk_class", h->binding.risk_class ? h->binding.risk_class : "", 0);
		sl_json_str(&j, "state", h->state, 0);
		sl_json_int(&j, "state_since_ns", h->state_since_ns);
		sl_json_int(&j, "last_heartbeat_ns", h->last_heartbeat_ns);
		sl_json_uint(&j, "last_seq", h->last_seq);
		sl_json_uint(&j, "recorded", h->counters.recorded);
		sl_json_uint(&j, "acked", h->counters.acked);
		sl_json_uint(&j, "backlog", h->counters.backlog);
		sl_json_uint(&j, "dropped", h->counters.dropped);
		sl_json_obj_close(&j);
		if (!sl_json_error(&j))
			printf("%s\n", j.buf);
		sl_json_free(&j);
	}
	else
		printf("%-32s %-10s %-12s %-6s %-8s since %s  heartbeat %s  seq %" PRIu64 "  backlog %" PRIu64 "\n",
		       h->binding.sandbox_id, h->binding.tenant ? h->binding.tenant : "-",
		       h->binding.task ? h->binding.task : "-", h->binding.risk_class ? h->binding.risk_class : "-",
		       h->state, since, hb, h->last_seq, h->counters.backlog);
	r->rows++;
	return 0;
}

static int alert_cb(void *arg, const struct sl_store_alert *a)
{
	struct reader *r = arg;
	char st[32], en[32];
	fmt_time(a->started_ns, st, sizeof(st));
	fmt_time(a->ended_ns, en, sizeof(en));
	if (r->json) {
		struct sl_json j;
		sl_json_init(&j);
		sl_json_obj_open(&j, NULL);
		sl_json_int(&j, "id", a->id);
		sl_json_str(&j, "sandbox_id", a->sandbox_id ? a->sandbox_id : "", 0);
		sl_json_str(&j, "kind", a->kind, 0);
		sl_json_str(&j, "severity", a->severity, 0);
		sl_json_int(&j, "started_ns", a->started_ns);
		sl_json_int(&j, "ended_ns", a->ended_ns);
		sl_json_str(&j, "detail", a->detail ? a->detail : "", 0);
		sl_json_obj_close(&j);
		if (!sl_json_error(&j))
			printf("%s\n", j.buf);
		sl_json_free(&j);
	}
	else
		printf("#%-4" PRId64 " %-8s %-8s %-32s %s -> %s  %s\n", a->id, a->kind, a->severity,
		       a->sandbox_id ? a->sandbox_id : "-", st, a->ended_ns ? en : "open", a->detail ? a->detail : "");
	r->rows++;
	return 0;
}

/* events: the stored line as received; --json: {"sandbox_id","seq","time_ns","received_ns","class",
 * "event": the line}, one object a line (the latency bench needs received_ns). */
static int event_cb(void *arg, const struct sl_store_event_row *e)
{
	struct reader *r = arg;
	if (r->json) {
		struct sl_json j;
		sl_json_init(&j);
		sl_json_obj_open(&j, NULL);
		sl_json_str(&j, "sandbox_id", e->sandbox_id, 0);
		sl_json_uint(&j, "seq", e->seq);
		sl_json_int(&j, "time_ns", e->time_ns);
		sl_json_int(&j, "received_ns", e->received_ns);
		sl_json_strn(&j, "class", e->class_name, e->class_len, 0);
		sl_json_obj_close(&j);
		/* The line is a checked JSON object: it goes in as it is, without re-encoding. */
		if (!sl_json_error(&j) && j.len > 0 && j.buf[j.len - 1] == '}')
			printf("%.*s,\"event\":%s}\n", (int)(j.len - 1), j.buf, e->line);
		sl_json_free(&j);
	} else {
		fwrite(e->line, 1, e->len, stdout);
		fputc('\n', stdout);
	}
	r->rows++;
	return 0;
}

/* Ask the collector's operator socket (unix:PATH) where its store is. */
static int ask_db(const char *admin, char *out, size_t len)
{
	if (strncmp(admin, "unix:", 5) != 0)
		return -EINVAL;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", admin + 5);
	if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	char resp[4200] = "";
	ssize_t n = -1;
	if (send(fd, "DB\n", 3, MSG_NOSIGNAL) == 3)
		n = recv(fd, resp, sizeof(resp) - 1, MSG_WAITALL);
	close(fd);
	resp[n > 0 ? n : 0] = '\0';
	char *nl = strchr(resp, '\n');
	if (nl)
		*nl = '\0';
	if (strncmp(resp, "db /", 4) != 0)
		return -EPROTO;
	if (strlen(resp + 3) >= len)
		return -ENAMETOOLONG;
	memcpy(out, resp + 3, strlen(resp + 3) + 1);
	return 0;
}

/* status | events | alerts  [--db FILE] [--json] [--tenant T] [--task K] [--sandbox S] [--class C]
 * [--since NS] [--open] [--limit N] */
int sl_cmd_query(int argc, char **argv)
{
	static const struct option opts[] = {
		{"db", required_argument, 0, 'd'},	  {"json", no_argument, 0, 'j'},
		{"tenant", required_argument, 0, 't'},	  {"task", required_argument, 0, 'k'},
		{"sandbox", required_argument, 0, 's'},	  {"class", required_argument, 0, 'c'},
		{"since", required_argument, 0, 'S'},	  {"open", no_argument, 0, 'o'},
		{"limit", required_argument, 0, 'n'},	  {"collector", required_argument, 0, 'C'},
		{0, 0, 0, 0}};
	const char *what = argv[0];
	const char *db = DEFAULT_DB;
	static char dbbuf[4096];
	struct sl_store_filter f = {0};
	struct reader rd = {0};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			db = optarg;
			break;
		case 'j':
			rd.json = true;
			break;
		case 't':
			f.tenant = optarg;
			break;
		case 'k':
			f.task = optarg;
			break;
		case 's':
			f.sandbox_id = optarg;
			break;
		case 'c':
			f.class_name = optarg;
			break;
		case 'S':
			f.since_ns = strtoll(optarg, NULL, 10);
			break;
		case 'o':
			f.open_only = true;
			break;
		case 'n':
			f.limit = strtoul(optarg, NULL, 10);
			break;
		case 'C':
			if (ask_db(optarg, dbbuf, sizeof(dbbuf)) < 0) {
				fprintf(stderr, "sightline %s: cannot ask the collector at %s for its store\n", what, optarg);
				return 1;
			}
			db = dbbuf;
			break;
		default:
			return 2;
		}
	}
	struct sl_store *st;
	/* Readers only read: a typo'd --db must be an error, never a new empty store. */
	if (sl_store_open_readonly(db, &st) < 0) {
		fprintf(stderr, "sightline %s: %s\n", what, sl_store_errmsg(NULL));
		return 1;
	}
	int r;
	if (!strcmp(what, "status"))
		r = sl_store_each_health(st, &f, health_cb, &rd);
	else if (!strcmp(what, "alerts"))
		r = sl_store_each_alert(st, &f, alert_cb, &rd);
	else
		r = sl_store_each_event_row(st, &f, event_cb, &rd);
	if (r < 0)
		fprintf(stderr, "sightline %s: %s\n", what, sl_store_errmsg(st));
	sl_store_close(st);
	return r < 0 ? 1 : 0;
}
