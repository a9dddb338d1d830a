/* compare.c — the GPU side of checking an output against a reference (templates/compare.cu):
 * the sums of squares come back, not the output. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"

enum { COMPARE_THREADS = 256, COMPARE_BLOCKS_PER_SM = 8 };

at_status rt_compare_source(at_dtype out_dtype, char **source)
{
  char preamble[160];
  *source = NULL;
  if ((unsigned)out_dtype > AT_DTYPE_E5M2) return at_fail(AT_ERR_INVALID, "unknown output dtype %d", (int)out_dtype);
  snprintf(preamble, sizeof preamble, "/* attntune compare: output %s */\n#define AT_IN_DTYPE %d\n#define AT_OUT_DTYPE %d\n",
           at_dtype_name(out_dtype), (int)out_dtype, (int)out_dtype);
  return rt_template_source(preamble, "compare.cu", source);
}

at_status rt_compare_create(const char *arch, at_dtype out_dtype, rt_compare *c)
{
  char *source = NULL;
  at_status rc;
  memset(c, 0, sizeof *c);
  if ((rc = rt_compare_source(out_dtype, &source)) != AT_OK) return rc;
  rc = rt_module_compile(source, "compare.cu", arch, &c->module);
  free(source);
  if (rc != AT_OK) goto out;
  if ((rc = rt_module_function(c->module, "at_compare", &c->fn)) != AT_OK) goto out;
  /* sums[2] (fp64) then the non-finite count: zeroed before, read after every call. */
  if ((rc = rt_alloc(&c->sums, 3 * sizeof(double))) != AT_OK) goto out;
  int sms = 0;
  if ((rc = RT_CU(rt_cu()->cuCtxGetDevice(&c->device))) != AT_OK) goto out;
  if ((rc = RT_CU(rt_cu()->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->device))) != AT_OK)
    goto out;
  c->blocks = (unsigned)(sms > 0 ? sms : 1) * COMPARE_BLOCKS_PER_SM;
  c->out_dtype = out_dtype;
out:
  if (rc != AT_OK) rt_compare_destroy(c);
  return rc;
}

void rt_compare_destroy(rt_compare *c)
{
  if (c->sums) rt_free(c->sums);
  rt_module_unload(c->module);
  memset(c, 0, sizeof *c);
}

at_status rt_compare_run(const rt_compare *c, CUdeviceptr ref, CUdeviceptr out, float descale, size_t n,
                         rt_compare_sums *sums)
{
  at_status rc;
  memset(sums, 0, sizeof *sums);
  if (!c->module) return at_fail(AT_ERR_INVALID, "compare before rt_compare_create");
  if (n > (size_t)LLONG_MAX) return at_fail(AT_ERR_INVALID, "%zu entries to compare is too many", n);
  if ((rc = rt_fill_u8(c->sums, 0, 3 * sizeof(double))) != AT_OK) return rc;
  CUdeviceptr count = c->sums + 2 * sizeof(double);
  long long nn = (long long)n;
  void *args[] = {&ref, &out, &descale, &nn, (void *)&c->sums, &count};
  const unsigned needed = (unsigned)((n + COMPARE_THREADS - 1) / COMPARE_THREADS);
  rt_launch_dims d = {{needed < c->blocks ? (needed ? needed : 1) : c->blocks, 1, 1}, {COMPARE_THREADS, 1, 1}, 0, 0};
  if ((rc = rt_launch(c->fn, &d, NULL, args)) != AT_OK) return at_fail_context(rc, "the output comparison");
  unsigned char host[3 * sizeof(double)];
  if ((rc = rt_download(host, c->sums, sizeof host)) != AT_OK) return rc; /* synchronous: waits for it */
  memcpy(&sums->diff2, host, sizeof(double));
  memcpy(&sums->ref2, host + sizeof(double), sizeof(double));
  memcpy(&sums->nonfinite, host + 2 * sizeof(double), sizeof(unsigned long long));
  return AT_OK;
}

double rt_compare_rel_l2(const rt_compare_sums *s)
{
  if (s->nonfinite) return INFINITY; /* a NaN or an unwritten entry fails any tolerance */
  return s->ref2 > 0 ? sqrt(s->diff2 / s->ref2) : sqrt(s->diff2);
}
