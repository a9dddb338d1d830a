/* arch.c — NVRTC target names and compute capabilities (core.h). */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

void at_arch_for_cc(int cc_major, int cc_minor, char arch[16])
{
  /* wgmma and setmaxnreg exist only on the arch-specific Hopper target. */
  const char *suffix = (cc_major == 9 && cc_minor == 0) ? "a" : "";
  snprintf(arch, 16, "sm_%d%d%s", cc_major, cc_minor, suffix);
}

at_status at_arch_parse(const char *arch, int *cc_major, int *cc_minor, int *arch_specific)
{
  const char *digits = NULL;
  if (strncmp(arch, "sm_", 3) == 0) digits = arch + 3;
  else if (strncmp(arch, "compute_", 8) == 0) digits = arch + 8;
  int n = 0;
  if (digits) {
    while (digits[n] >= '0' && digits[n] <= '9') n++;
  }
  int tail_ok = digits && (digits[n] == '\0' || (digits[n] == 'a' && digits[n + 1] == '\0') ||
                           (digits[n] == 'f' && digits[n + 1] == '\0'));
  if (!digits || (n != 2 && n != 3) || !tail_ok)
    return at_fail(AT_ERR_INVALID, "unknown architecture '%s' (expected e.g. sm_80, sm_89, sm_90a)",
                   arch);
  int value = 0;
  for (int i = 0; i < n; i++) value = value * 10 + (digits[i] - '0');
  *cc_major = value / 10;
  *cc_minor = value % 10;
  *arch_specific = digits[n] == 'a';
  if (*cc_major < 8)
    return at_fail(AT_ERR_INVALID, "architecture '%s' is too old (attntune needs sm_80 or newer)", arch);
  return AT_OK;
}
