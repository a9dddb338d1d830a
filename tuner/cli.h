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

/* --db FILE before anything is opened: not empty and not a directory. On error prints a usage
 * error and returns 0. */
int tn_check_db_path(const char *cmd, const char *path);
/* --devices 'all' or distinct ordinals "0,1,3" (at most max of them, each 0..1023), parsed
 * without loading the driver. On error prints a usage error and returns 0. */
int tn_parse_devices(const char *cmd, const char *text, int max, int *all, int *devices, int *n);
/* The ordinals to use once the driver is loaded: every GPU (at most max) when all, else the
 * given ones, each checked against the GPUs present (AT_ERR_NO_DEVICE). */
at_status tn_resolve_devices(int all, int max, int *devices, int *n);

#endif
