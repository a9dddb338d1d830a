/* target.c — what variants are built for: an NVRTC arch, its shared-memory limit and SM count. */
#include <stdio.h>
#include <string.h>

#include "generator/generator.h"

/* The opt-in dynamic shared memory per block, by compute capability (CUDA programming guide,
 * "Technical Specifications per Compute Capability"). */
static int smem_limit_for_cc(int major, int minor)
{
  if (major == 9) return 227 * 1024;
  if (major == 8 && (minor == 0 || minor == 7)) return 163 * 1024;
  if (major >= 8) return 99 * 1024;
  return 48 * 1024;
}

at_status gen_target_make(const char *arch, int smem_limit, gen_target *out)
{
  int specific = 0;
  at_status rc;
  memset(out, 0, sizeof *out);
  if (!arch || strlen(arch) >= sizeof out->arch)
    return at_fail(AT_ERR_INVALID, "arch '%s' is not an NVRTC target (expected e.g. sm_90a)",
                   arch ? arch : "(null)");
  if ((rc = at_arch_parse(arch, &out->cc_major, &out->cc_minor, &specific)) != AT_OK) return rc;
  if (out->cc_major < 8)
    return at_fail(AT_ERR_UNSUPPORTED, "arch %s is older than sm_80 (fa2 needs cp.async and bf16 mma)",
                   arch);
  if (smem_limit < 48 * 1024 || smem_limit > 1024 * 1024)
    return at_fail(AT_ERR_INVALID, "shared memory limit %d bytes is out of range (expected 49152..1048576)",
                   smem_limit);
  snprintf(out->arch, sizeof out->arch, "%s", arch);
  out->smem_limit = smem_limit;
  out->sm_count = out->cc_major == 9 ? 132 : 108; /* H100/H200 SXM, A100; the device's count when known */
  return AT_OK;
}

at_status gen_target_for_arch(const char *arch, gen_target *out)
{
  int major = 0, minor = 0, specific = 0;
  at_status rc = at_arch_parse(arch, &major, &minor, &specific);
  if (rc != AT_OK) return rc;
  return gen_target_make(arch, smem_limit_for_cc(major, minor), out);
}



int gen_target_has_fp8(const gen_target *target)
{
  return target->cc_major > 8 || (target->cc_major == 8 && target->cc_minor >= 9);
}
