/* cli.c — error reporting and argument parsing shared by the subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tuner/cli.h"

int tn_usage_error(const char *cmd, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "attntune %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'attntune %s --help'.\n", cmd);
  return TN_EXIT_USAGE;
}

int tn_fail_exit(const char *cmd, at_status status)
{
  fprintf(stderr, "attntune %s: %s\n", cmd, at_last_error());
  switch (status) {
  case AT_OK: return TN_EXIT_OK;
  case AT_ERR_INVALID:
  case AT_ERR_CONFIG: return TN_EXIT_USAGE;
  default: return TN_EXIT_RUNTIME;
  }
}

int tn_parse_int(const char *cmd, const char *flag, const char *text, int lo, int hi, int *out)
{
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || !end || end == text || *end != '\0' || v < lo || v > hi) {
    tn_usage_error(cmd, "invalid value '%s' for %s (expected an integer from %d to %d)", text, flag,
                   lo, hi);
    return 0;
  }
  *out = (int)v;
  return 1;
}
