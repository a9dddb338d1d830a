/* measure.c — see measure.h. */
#include <math.h>

#include "tuner/measure.h"

int tn_is_decode_shape(const at_shape *s)
{
  return s->q_len >= 1 && s->q_len <= TN_DECODE_MAX_T;
}

double tn_kv_bytes(const at_shape *s)
{
  return 2.0 * s->batch * s->kv_heads * (double)s->kv_len * s->head_dim * (double)at_dtype_size(at_shape_kv_dtype(s));
}

double tn_kv_tbs(const at_shape *s, double ms)
{
  if (!(isfinite(ms) && ms > 0)) return NAN;
  return tn_kv_bytes(s) / (ms * 1e-3) / 1e12;
}
