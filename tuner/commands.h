/*
 * commands.h — subcommands of the attntune CLI. Each takes the arguments after its own name
 * (argv[0] is the subcommand) and returns the process exit code: 0 success, 1 runtime failure
 * (no GPU, CUDA error), 2 usage or config error.
 */
#ifndef AT_TUNER_COMMANDS_H
#define AT_TUNER_COMMANDS_H

int tn_cmd_devices(int argc, char **argv);
int tn_cmd_gen(int argc, char **argv);
int tn_cmd_bench(int argc, char **argv);
int tn_cmd_tune(int argc, char **argv);
int tn_cmd_cache(int argc, char **argv);
int tn_cmd_report(int argc, char **argv);
int tn_cmd_worker(int argc, char **argv); /* hidden: the tuning run's GPU process */

#endif
