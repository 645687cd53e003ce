/* sightline: the one binary. The program's edge: only code under src/cli prints and exits. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sightline COMMAND [ARGS]\n"
		   "  run      run a command in a recorded sandbox (see docs/cli.md)\n"
		   "  verify   verify a record's hash chain\n"
		   "  collectd the collector daemon\n"
		   "  export   deliver a record to the collector (again)\n"
		   "  dispatch run a queue of tasks, pausing while the collector is blind\n"
		   "  status | events | alerts   read the collector's store\n"
		   "  contract check   which behaviours of a visibility contract a runtime can emit\n"
		   "  validate the canary acceptance test of a contract (and --status)\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "run"))
		return sl_cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "verify"))
		return sl_cmd_verify(argc - 1, argv + 1);
	if (!strcmp(cmd, "dispatch"))
		return sl_cmd_dispatch(argc - 1, argv + 1);
	if (!strcmp(cmd, "export"))
		return sl_cmd_export(argc - 1, argv + 1);
	if (!strcmp(cmd, "contract"))
		return sl_cmd_contract(argc - 1, argv + 1);
	if (!strcmp(cmd, "validate"))
		return sl_cmd_validate(argc - 1, argv + 1);
	if (!strcmp(cmd, "collectd"))
		return sl_cmd_collectd(argc - 1, argv + 1);
	if (!strcmp(cmd, "status") || !strcmp(cmd, "events") || !strcmp(cmd, "alerts"))
		return sl_cmd_query(argc - 1, argv + 1);
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "sightline: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
