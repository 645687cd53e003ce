/* sightline dispatch TASKS: the launcher. Before each launch it asks the collector's gate; while a
 * running sandbox of the task's risk class or above is blind (or the collector cannot be asked:
 * fail closed), the queue waits and says so. Each task runs as its own `sightline run` (its own
 * supervisor), with the identity from the task file, never from the task's own output.
 *
 * TASKS: one JSON object per line:
 *   {"tenant":..,"agent":..,"task":..,"version":..,"credential_ref":..,"risk_class":"high|medium|low",
 *    "command":["prog","arg",...], "policy":"FILE" (optional), "not_before_ms": N (optional:
 *    earliest start, after the dispatcher's own start), "max_blind_ms": N (optional: the
 *    supervisor's --max-blind-ms)} */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/util.h"

#define MAX_TASKS 1024
#define MAX_ARGS  64

struct task {
	json_object *o;
	const char *name, *risk;
	int64_t not_before_ms;
	pid_t pid;
	bool started, done;
	int status;
};

static const char *jstr(json_object *o, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
												       : NULL;
}

/* Ask the gate for this task's risk class and credential reference. Returns 1 open, 0 closed (why
 * filled), -1 the credential reference is revoked (why filled): the task is never started. */
static int gate(const char *admin, const char *risk, const char *cred, char *why, size_t whylen)
{
	if (strncmp(admin, "unix:", 5) != 0) {
		snprintf(why, whylen, "the gate address must be unix:PATH");
		return 0;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", admin + 5);
	if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0) {
		/* Cannot ask: nobody is watching the evidence, so nothing new starts. */
		snprintf(why, whylen, "collector unreachable (%s)", strerror(errno));
		if (fd >= 0)
			close(fd);
		return 0;
	}
	struct timeval tv = {.tv_sec = 1};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char req[320], resp[256] = "";
	int n = cred && *cred ? snprintf(req, sizeof(req), "GATE %s %.256s\n", risk, cred)
			      : snprintf(req, sizeof(req), "GATE %s\n", risk);
	ssize_t got = -1;
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) == n)
		got = recv(fd, resp, sizeof(resp) - 1, 0);
	close(fd);
	resp[got > 0 ? got : 0] = '\0';
	char *nl = strchr(resp, '\n');
	if (nl)
		*nl = '\0';
	if (!strcmp(resp, "open"))
		return 1;
	if (!strncmp(resp, "revoked ", 8)) {
		snprintf(why, whylen, "%s", resp + 8);
		return -1;
	}
	snprintf(why, whylen, "%s", got > 0 ? resp : "no answer from the collector");
	return 0;
}

static pid_t launch(struct task *t, const char *self, const char *collector, const char *secret, const char *recdir)
{
	const char *argv[MAX_ARGS + 32];
	int a = 0;
	argv[a++] = "sightline";
	argv[a++] = "run";
	const char *keys[][2] = {{"--tenant", "tenant"},   {"--agent", "agent"},
				 {"--task", "task"},	   {"--version", "version"},
				 {"--credential-ref", "credential_ref"}};
	for (size_t i = 0; i < SL_ARRAY_LEN(keys); i++) {
		argv[a++] = keys[i][0];
		argv[a++] = jstr(t->o, keys[i][1]);
	}
	argv[a++] = "--risk-class";
	argv[a++] = t->risk;
	char mb[24];
	json_object *mbv;
	if (json_object_object_get_ex(t->o, "max_blind_ms", &mbv) && json_object_is_type(mbv, json_type_int)) {
		snprintf(mb, sizeof(mb), "%lld", (long long)json_object_get_int64(mbv));
		argv[a++] = "--max-blind-ms";
		argv[a++] = mb;
	}
	if (jstr(t->o, "policy")) {
		argv[a++] = "--policy";
		argv[a++] = jstr(t->o, "policy");
	}
	if (collector) {
		argv[a++] = "--collector";
		argv[a++] = collector;
		argv[a++] = "--collector-secret";
		argv[a++] = secret;
	}
	if (recdir) {
		argv[a++] = "--record-dir";
		argv[a++] = recdir;
	}
	argv[a++] = "--quiet";
	argv[a++] = "--";
	json_object *cmd;
	json_object_object_get_ex(t->o, "command", &cmd);
	size_t n = json_object_array_length(cmd);
	for (size_t i = 0; i < n; i++)
		argv[a++] = json_object_get_string(json_object_array_get_idx(cmd, i));
	argv[a] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		execv(self, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

int sl_cmd_dispatch(int argc, char **argv)
{
	static const struct option opts[] = {{"admin", required_argument, 0, 'a'},
					     {"collector", required_argument, 0, 'c'},
					     {"collector-secret", required_argument, 0, 's'},
					     {"record-dir", required_argument, 0, 'r'},
					     {"parallel", required_argument, 0, 'p'},
					     {0, 0, 0, 0}};
	const char *admin = "unix:/run/sightline/collector-admin.sock";
	const char *collector = "unix:/run/sightline/collector.sock";
	const char *secret = "/var/lib/sightline/collector.secret", *recdir = NULL;
	int parallel = 4, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'a')
			admin = optarg;
		else if (c == 'c')
			collector = optarg;
		else if (c == 's')
			secret = optarg;
		else if (c == 'r')
			recdir = optarg;
		else if (c == 'p')
			parallel = atoi(optarg) > 0 ? atoi(optarg) : 1;
		else
			return 2;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: sightline dispatch [--admin unix:PATH] [--collector ADDR] [--collector-secret FILE]\n"
				"                          [--record-dir DIR] [--parallel N] TASKS.jsonl\n");
		return 2;
	}
	FILE *f = fopen(argv[optind], "re");
	if (!f) {
		fprintf(stderr, "sightline dispatch: %s: %s\n", argv[optind], strerror(errno));
		return 2;
	}
	static struct task tasks[MAX_TASKS];
	size_t n = 0, lineno = 0, cap = 0;
	char *line = NULL;
	while (getline(&line, &cap, f) > 0) {
		lineno++;
		if (line[0] == '\n' || line[0] == '#')
			continue;
		json_object *o = json_tokener_parse(line);
		json_object *cmd;
		const char *risk = o ? jstr(o, "risk_class") : NULL;
		bool ok = o && json_object_is_type(o, json_type_object) && jstr(o, "tenant") && jstr(o, "agent") &&
			  jstr(o, "task") && jstr(o, "version") && jstr(o, "credential_ref") && risk &&
			  (!strcmp(risk, "high") || !strcmp(risk, "medium") || !strcmp(risk, "low")) &&
			  json_object_object_get_ex(o, "command", &cmd) && json_object_is_type(cmd, json_type_array) &&
			  json_object_array_length(cmd) > 0 && json_object_array_length(cmd) <= MAX_ARGS;
		for (size_t i = 0; ok && i < json_object_array_length(cmd); i++)
			ok = json_object_is_type(json_object_array_get_idx(cmd, i), json_type_string);
		if (!ok || n == MAX_TASKS) {
			fprintf(stderr, "sightline dispatch: %s:%zu: %s\n", argv[optind], lineno,
				n == MAX_TASKS ? "too many tasks"
					       : "expected {tenant, agent, task, version, credential_ref, risk_class, command[]}");
			json_object_put(o);
			fclose(f);
			free(line);
			return 2;
		}
		json_object *nb;
		tasks[n] = (struct task){.o = o, .name = jstr(o, "task"), .risk = risk};
		if (json_object_object_get_ex(o, "not_before_ms", &nb))
			tasks[n].not_before_ms = json_object_get_int64(nb);
		n++;
	}
	fclose(f);
	free(line);
	char self[4096];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sl <= 0) {
		fprintf(stderr, "sightline dispatch: cannot find my own binary\n");
		return 1;
	}
	self[sl] = '\0';
	int64_t t0 = sl_now_monotonic_ns();
	size_t next = 0, running = 0, finished = 0;
	bool paused = false;
	int failures = 0;
	while (finished < n) {
		int st;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			for (size_t i = 0; i < n; i++)
				if (tasks[i].pid == p && !tasks[i].done) {
					tasks[i].done = true;
					tasks[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
					failures += tasks[i].status != 0;
					running--;
					finished++;
					printf("dispatch: task %s exited %d\n", tasks[i].name, tasks[i].status);
					fflush(stdout);
				}
		if (next < n && running < (size_t)parallel &&
		    (sl_now_monotonic_ns() - t0) / 1000000 >= tasks[next].not_before_ms) {
			char why[256];
			int g = gate(admin, tasks[next].risk, jstr(tasks[next].o, "credential_ref"), why, sizeof(why));
			if (g < 0) {
				/* Revoked: this task never starts; the queue goes on with the next one. */
				printf("dispatch: task %s not started: %s\n", tasks[next].name, why);
				fflush(stdout);
				tasks[next].done = true;
				tasks[next].status = 1;
				failures++;
				finished++;
				next++;
				continue;
			}
			if (g) {
				if (paused)
					printf("dispatch: resumed\n");
				paused = false;
				tasks[next].pid = launch(&tasks[next], self, collector, secret, recdir);
				tasks[next].started = true;
				running++;
				printf("dispatch: task %s (risk %s) started\n", tasks[next].name, tasks[next].risk);
				fflush(stdout);
				next++;
				continue;
			}
			if (!paused)
				printf("dispatch: paused before task %s: %s\n", tasks[next].name, why);
			fflush(stdout);
			paused = true;
		}
		usleep(100000);
	}
	for (size_t i = 0; i < n; i++)
		json_object_put(tasks[i].o);
	return failures ? 1 : 0;
}
