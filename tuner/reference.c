/* reference.c — CPU reference attention, error measures, and random inputs. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attntune_fp8.h"
#include "runtime/rt.h"
#include "tuner/reference.h"

static double dot_row(const float *a, const float *b, int n)
{
  double acc = 0.0;
  for (int i = 0; i < n; i++) acc += (double)a[i] * (double)b[i];
  return acc;
}

/* One query row of one head: scores, softmax with the max subtracted, weighted sum of V. */
static void attend_row(const at_shape *s, const float *qrow, const float *kbase, at_strides ks,
                       const float *vbase, at_strides vs, double *scores, double *orow,
                       double *lse_out, long long t)
{
  const double scale = at_shape_scale(s);
  const long long offset = s->mask == AT_MASK_CAUSAL_BR ? (long long)s->kv_len - s->q_len : 0;
  double m = -INFINITY;
  for (int j = 0; j < s->kv_len; j++) {
    int visible = s->mask == AT_MASK_NONE || (long long)j <= t + offset;
    scores[j] = visible ? dot_row(qrow, kbase + j * ks.seq, s->head_dim) * scale : -INFINITY;
    if (scores[j] > m) m = scores[j];
  }
  for (int d = 0; d < s->head_dim; d++) orow[d] = 0.0;
  if (m == -INFINITY) {
    if (lse_out) *lse_out = -INFINITY;
    return;
  }
  double sum = 0.0;
  for (int j = 0; j < s->kv_len; j++) {
    scores[j] = exp(scores[j] - m);
    sum += scores[j];
  }
  for (int j = 0; j < s->kv_len; j++) {
    if (scores[j] == 0.0) continue;
    const float *vrow = vbase + j * vs.seq;
    double w = scores[j] / sum;
    for (int d = 0; d < s->head_dim; d++) orow[d] += w * vrow[d];
  }
  if (lse_out) *lse_out = m + log(sum);
}

at_status tn_ref_attention(const at_shape *s, const float *q, at_strides qs, const float *k,
                           at_strides ks, const float *v, at_strides vs, double *o, double *lse)
{
  at_status rc = at_shape_check(s);
  if (rc != AT_OK) return rc;
  double *scores = malloc(sizeof(double) * (size_t)s->kv_len);
  if (!scores) return at_fail(AT_ERR_NOMEM, "no memory for %d reference scores", s->kv_len);
  const int group = s->q_heads / s->kv_heads;
  for (int b = 0; b < s->batch; b++)
    for (int h = 0; h < s->q_heads; h++) {
      const float *kbase = k + b * ks.batch + (h / group) * ks.head;
      const float *vbase = v + b * vs.batch + (h / group) * vs.head;
      for (int t = 0; t < s->q_len; t++) {
        const float *qrow = q + b * qs.batch + t * qs.seq + h * qs.head;
        double *orow = o + (((size_t)b * s->q_len + t) * s->q_heads + h) * s->head_dim;
        double *lrow = lse ? lse + ((size_t)b * s->q_heads + h) * s->q_len + t : NULL;
        attend_row(s, qrow, kbase, ks, vbase, vs, scores, orow, lrow, t);
      }
    }
  free(scores);
  return AT_OK;
}

/* Relative L2 over the entries both have finite; lse_rows: -inf in ref is a row with no visible
 * key, which must be -inf in out too and is left out of the norm. */
static tn_error compare(const double *ref, const float *out, size_t n, int lse_rows)
{
  tn_error e = {0, 0, 0, 0};
  double diff2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (lse_rows && isinf(ref[i]) && ref[i] < 0) {
      if (!(isinf(out[i]) && out[i] < 0)) e.n_nonfinite++;
      continue;
    }
    if (!isfinite(out[i])) {
      e.n_nonfinite++;
      continue;
    }
    double d = (double)out[i] - ref[i];
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
    if (fabs(d) > e.max_abs) {
      e.max_abs = fabs(d);
      e.worst_index = i;
    }
  }
  e.rel_l2 = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
  /* A NaN or a missing -inf anywhere must fail any tolerance. */
  if (e.n_nonfinite) e.rel_l2 = INFINITY;
  return e;
}

tn_error tn_compare(const double *ref, const float *out, size_t n) { return compare(ref, out, n, 0); }

tn_error tn_compare_lse(const double *ref, const float *out, size_t n) { return compare(ref, out, n, 1); }

tn_rng tn_rng_seeded(uint64_t seed)
{
  tn_rng r = {seed ? seed : 0x9e3779b97f4a7c15ull};
  return r;
}

uint64_t tn_fresh_seed(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
}

static uint64_t next_u64(tn_rng *r)
{
  /* xorshift64* */
  uint64_t x = r->state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->state = x;
  return x * 0x2545f4914f6cdd1dull;
}

float tn_rng_uniform(tn_rng *rng, float lo, float hi)
{
  double u = (double)(next_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(lo + (hi - lo) * u);
}

void tn_rng_fill(tn_rng *rng, float *x, size_t n, float lo, float hi)
{
  for (size_t i = 0; i < n; i++) x[i] = tn_rng_uniform(rng, lo, hi);
}

uint64_t tn_rng_u64(tn_rng *rng) { return next_u64(rng); }

/* splitmix64's finalizer: chunk seeds far apart in xorshift's state space. */
static uint64_t mix_seed(uint64_t seed, uint64_t chunk)
{
  uint64_t z = seed + (chunk + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct random_job {
  uint64_t seed;
  at_dtype dtype;
  size_t n, chunks;
  unsigned char *out;
  int stride, first; /* this thread takes chunks first, first + stride, ... */
  at_status rc;
} random_job;

static void *random_chunks(void *arg)
{
  random_job *j = arg;
  const size_t esz = at_dtype_size(j->dtype);
  float *x = malloc(TN_RANDOM_CHUNK * sizeof *x);
  j->rc = x ? AT_OK : at_fail(AT_ERR_NOMEM, "no host memory for random inputs");
  for (size_t c = (size_t)j->first; c < j->chunks && j->rc == AT_OK; c += (size_t)j->stride) {
    const size_t begin = c * TN_RANDOM_CHUNK, m = j->n - begin < TN_RANDOM_CHUNK ? j->n - begin : TN_RANDOM_CHUNK;
    tn_rng rng = tn_rng_seeded(mix_seed(j->seed, c));
    tn_rng_fill(&rng, x, m, -1.0f, 1.0f);
    j->rc = tn_pack(j->dtype, x, m, j->out + begin * esz);
  }
  free(x);
  return NULL;
}

at_status tn_random_packed(uint64_t seed, at_dtype dtype, size_t n, void *out)
{
  enum { MAX_THREADS = 32 };
  const size_t chunks = (n + TN_RANDOM_CHUNK - 1) / TN_RANDOM_CHUNK;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
  if ((size_t)threads > chunks) threads = chunks ? (int)chunks : 1;
  random_job jobs[MAX_THREADS];
  pthread_t tid[MAX_THREADS];
  int running[MAX_THREADS] = {0};
  for (int t = 0; t < threads; t++) {
    jobs[t] = (random_job){.seed = seed, .dtype = dtype, .n = n, .chunks = chunks, .out = out, .stride = threads, .first = t};
    running[t] = t > 0 && pthread_create(&tid[t], NULL, random_chunks, &jobs[t]) == 0;
  }
  /* This thread takes share 0, and the share of any thread that could not start. */
  at_status rc = AT_OK;
  for (int t = 0; t < threads; t++) {
    if (running[t]) pthread_join(tid[t], NULL);
    else random_chunks(&jobs[t]);
    if (rc == AT_OK) rc = jobs[t].rc;
  }
  return rc;
}

at_status tn_decode_output(at_dtype dtype, float descale, const void *in, size_t n, float *out)
{
  at_status rc = tn_unpack(dtype, in, n, out);
  if (rc != AT_OK || descale == 1.0f) return rc;
  for (size_t i = 0; i < n; i++) out[i] *= descale;
  return AT_OK;
}

at_status tn_fp8_unit_input_scales(at_dtype fp8, tn_fp8_scales *out)
{
  if (!at_dtype_is_fp8(fp8)) return at_fail(AT_ERR_INVALID, "FP8 scales asked for %s", at_dtype_name(fp8));
  float top = at_fp8_max(fp8);
  *out = (tn_fp8_scales){1.0f, 1.0f, 1.0f, top, 1.0f / top, top};
  return AT_OK;
}

void tn_round_to_dtype(at_dtype dtype, float *x, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (dtype == AT_DTYPE_F16) x[i] = at_f16_to_f32(at_f32_to_f16(x[i]));
    else if (dtype == AT_DTYPE_BF16) x[i] = at_bf16_to_f32(at_f32_to_bf16(x[i]));
    else if (dtype == AT_DTYPE_E4M3) x[i] = at_e4m3_to_f32(at_f32_to_e4m3(x[i]));
    else if (dtype == AT_DTYPE_E5M2) x[i] = at_e5m2_to_f32(at_f32_to_e5m2(x[i]));
  }
}

at_status tn_pack(at_dtype dtype, const float *x, size_t n, void *out)
{
  switch (dtype) {
  case AT_DTYPE_F32: memcpy(out, x, n * sizeof(float)); return AT_OK;
  case AT_DTYPE_F16:
    for (size_t i = 0; i < n; i++) ((uint16_t *)out)[i] = at_f32_to_f16(x[i]);
    return AT_OK;
  case AT_DTYPE_BF16:
    for (size_t i = 0; i < n; i++) ((uint16_t *)out)[i] = at_f32_to_bf16(x[i]);
    return AT_OK;
  case AT_DTYPE_E4M3:
    for (size_t i = 0; i < n; i++) ((uint8_t *)out)[i] = at_f32_to_e4m3(x[i]);
    return AT_OK;
  case AT_DTYPE_E5M2:
    for (size_t i = 0; i < n; i++) ((uint8_t *)out)[i] = at_f32_to_e5m2(x[i]);
    return AT_OK;
  }
  return at_fail(AT_ERR_INVALID, "cannot pack dtype %d", (int)dtype);
}

at_status tn_unpack(at_dtype dtype, const void *in, size_t n, float *out)
{
  switch (dtype) {
  case AT_DTYPE_F32: memcpy(out, in, n * sizeof(float)); return AT_OK;
  case AT_DTYPE_F16:
    for (size_t i = 0; i < n; i++) out[i] = at_f16_to_f32(((const uint16_t *)in)[i]);
    return AT_OK;
  case AT_DTYPE_BF16:
    for (size_t i = 0; i < n; i++) out[i] = at_bf16_to_f32(((const uint16_t *)in)[i]);
    return AT_OK;
  case AT_DTYPE_E4M3:
    for (size_t i = 0; i < n; i++) out[i] = at_e4m3_to_f32(((const uint8_t *)in)[i]);
    return AT_OK;
  case AT_DTYPE_E5M2:
    for (size_t i = 0; i < n; i++) out[i] = at_e5m2_to_f32(((const uint8_t *)in)[i]);
    return AT_OK;
  }
  return at_fail(AT_ERR_INVALID, "cannot unpack dtype %d", (int)dtype);
}
