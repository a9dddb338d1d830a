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

double tn_sequences_work(const at_shape *s, const int *q_lens, const int *kv_lens, int kv_bytes)
{
  double total = 0;
  for (int b = 0; b < s->batch; b++) {
    at_shape one = *s;
    one.batch = 1;
    one.q_len = q_lens ? q_lens[b] : s->q_len;
    one.kv_len = kv_lens ? kv_lens[b] : s->kv_len;
    if (one.q_len > 0 && one.kv_len > 0) total += kv_bytes ? tn_kv_bytes(&one) : at_shape_flops(&one);
  }
  return total;
}
