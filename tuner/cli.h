/*
 * cli.h — helpers shared by the subcommands: usage errors and number parsing with messages that
 * name the flag and the value.
 */
#ifndef AT_TUNER_CLI_H
#define AT_TUNER_CLI_H

#include "attntune.h"

enum { TN_EXIT_OK = 0, TN_EXIT_RUNTIME = 1, TN_EXIT_USAGE = 2 };

/* Print "attntune <cmd>: <message>" and a pointer to --help on stderr; return TN_EXIT_USAGE. */
int tn_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "attntune <cmd>: <at_last_error()>" on stderr and return the exit code for status. */
int tn_fail_exit(const char *cmd, at_status status);
/* Parse a decimal int in [lo, hi] for flag; on error prints a usage error and returns 0. */
int tn_parse_int(const char *cmd, const char *flag, const char *text, int lo, int hi, int *out);

#endif
