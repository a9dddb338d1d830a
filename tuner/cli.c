/* cli.c — error reporting and argument parsing shared by the subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/rt.h"
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

int tn_check_db_path(const char *cmd, const char *path)
{
  struct stat st;
  if (!path || !*path) {
    tn_usage_error(cmd, "empty file name for --db (give a file, e.g. --db attntune.db)");
    return 0;
  }
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    tn_usage_error(cmd, "'%s' for --db is a directory (give a file, e.g. --db %s/attntune.db)", path, path);
    return 0;
  }
  return 1;
}

int tn_parse_devices(const char *cmd, const char *text, int max, int *all, int *devices, int *n)
{
  *n = 0;
  *all = strcmp(text, "all") == 0;
  if (*all) return 1;
  char *copy = strdup(text), *save = NULL;
  int ok = copy != NULL;
  if (!copy) tn_usage_error(cmd, "out of memory reading --devices");
  for (char *tok = ok ? strtok_r(copy, ",", &save) : NULL; tok && ok; tok = strtok_r(NULL, ",", &save)) {
    int d = 0;
    if (!(ok = tn_parse_int(cmd, "--devices", tok, 0, 1023, &d))) break;
    for (int i = 0; i < *n && ok; i++)
      if (devices[i] == d) ok = 0, tn_usage_error(cmd, "GPU %d is listed twice in --devices '%s'", d, text);
    if (ok && *n == max) ok = 0, tn_usage_error(cmd, "more than %d GPUs in --devices '%s'", max, text);
    if (ok) devices[(*n)++] = d;
  }
  free(copy);
  if (ok && *n == 0) ok = 0, tn_usage_error(cmd, "--devices needs 'all' or ordinals like 0,1 (got '%s')", text);
  return ok;
}

at_status tn_resolve_devices(int all, int max, int *devices, int *n)
{
  int count = 0;
  at_status rc = rt_device_count(&count);
  if (rc != AT_OK) return rc;
  if (count == 0) return at_fail(AT_ERR_NO_DEVICE, "no CUDA GPU found");
  if (all) {
    *n = count < max ? count : max;
    for (int i = 0; i < *n; i++) devices[i] = i;
    return AT_OK;
  }
  for (int i = 0; i < *n; i++)
    if (devices[i] >= count)
      return at_fail(AT_ERR_NO_DEVICE, "GPU %d does not exist (%d GPU%s present)", devices[i], count,
                     count == 1 ? "" : "s");
  return AT_OK;
}
