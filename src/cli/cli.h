/* Subcommands of the one binary. Each returns the process exit status. */
#ifndef SL_CLI_H
#define SL_CLI_H
int sl_cmd_run(int argc, char **argv);
int sl_cmd_verify(int argc, char **argv);
int sl_cmd_collectd(int argc, char **argv);
int sl_cmd_export(int argc, char **argv);
int sl_cmd_dispatch(int argc, char **argv);
int sl_cmd_contract(int argc, char **argv);
int sl_cmd_validate(int argc, char **argv);
/* status, events, alerts: argv[0] names which. */
int sl_cmd_query(int argc, char **argv);
#endif
