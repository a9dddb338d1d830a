/*
 * bench_cudnn.c — cuDNN fused attention on the H200 benchmark shapes (B=2, Nq=16, T=S=8192):
 * bf16 D=64/128/256 with and without the causal mask, the single fused op, and FP8 E4M3 next to
 * bf16. Each configuration is checked against the naive fp32 reference on the same inputs first,
 * then timed with tuner/timing.c (the code `attntune bench` uses): warm-up, back-to-back
 * launches with an event between each two, median. Only cudnnSetStream + cudnnBackendExecute
 * sit between the events (rt_cudnn_sdpa_launch).
 *
 * usage: bench_cudnn [--quick] [--no-verify]   (--quick: T=S=2048)
 * Not a ctest test: scripts/cudnn_gpu_check.sh builds and runs it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attntune_fp8.h"
#include "runtime/cudnn_sdpa.h"
#include "tuner/reference.h"
#include "runtime/rt.h"

#define CHECK(expr)                                                                              \
  do {                                                                                           \
    at_status rc_ = (expr);                                                                      \
    if (rc_ != AT_OK) {                                                                          \
      fprintf(stderr, "bench_cudnn: %s: %s: %s\n", #expr, at_status_name(rc_), at_last_error()); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

typedef struct config {
  at_dtype dtype;
  int d;
  at_mask mask;
  rt_cudnn_path path;
} config;

static const config CONFIGS[] = {
    {AT_DTYPE_BF16, 128, AT_MASK_NONE, RT_CUDNN_PATH_COMPOSITE},
    {AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_TL, RT_CUDNN_PATH_COMPOSITE},
    {AT_DTYPE_BF16, 64, AT_MASK_NONE, RT_CUDNN_PATH_COMPOSITE},
    {AT_DTYPE_BF16, 64, AT_MASK_CAUSAL_TL, RT_CUDNN_PATH_COMPOSITE},
    {AT_DTYPE_BF16, 256, AT_MASK_NONE, RT_CUDNN_PATH_COMPOSITE},
    {AT_DTYPE_BF16, 256, AT_MASK_CAUSAL_TL, RT_CUDNN_PATH_COMPOSITE},
    {AT_DTYPE_BF16, 64, AT_MASK_NONE, RT_CUDNN_PATH_UNIFIED},
    {AT_DTYPE_BF16, 128, AT_MASK_NONE, RT_CUDNN_PATH_UNIFIED},
    {AT_DTYPE_BF16, 256, AT_MASK_NONE, RT_CUDNN_PATH_UNIFIED},
    {AT_DTYPE_E4M3, 128, AT_MASK_NONE, RT_CUDNN_PATH_FP8},
    {AT_DTYPE_E4M3, 128, AT_MASK_CAUSAL_TL, RT_CUDNN_PATH_FP8},
    {AT_DTYPE_E4M3, 256, AT_MASK_NONE, RT_CUDNN_PATH_FP8},
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0], POOL_TABLE = 4096 };

typedef struct result {
  const config *c;
  at_status rc;
  char why[200];
  double ms, ms_again, tflops, err, build_ms;
  int64_t engine, ws;
} result;

/* Input pools sized for the largest D, shared by every configuration (each reads a prefix).
 * Values are drawn from a table of POOL_TABLE random numbers: uniform-looking data without
 * spending seconds of GPU-machine time on a per-element generator. */
typedef struct pools {
  CUdeviceptr bf16[3], fp8[3], fp8_ref[3]; /* Q, K, V */
  CUdeviceptr o, scratch, scalars;
  float fp8_scale;
  size_t n;
} pools;

static void fill_pools(pools *p, size_t n, int verify, tn_rng *rng, size_t scratch_bytes)
{
  float table[POOL_TABLE];
  uint16_t t16[POOL_TABLE];
  uint8_t t8[POOL_TABLE];
  float t8_deq[POOL_TABLE];
  tn_rng_fill(rng, table, POOL_TABLE, -1.0f, 1.0f);
  CHECK(tn_pack(AT_DTYPE_BF16, table, POOL_TABLE, t16));
  CHECK(at_quantize_fp8(table, POOL_TABLE, AT_DTYPE_E4M3, t8, &p->fp8_scale));
  for (int i = 0; i < POOL_TABLE; i++) t8_deq[i] = at_e4m3_to_f32(t8[i]) / p->fp8_scale;
  uint16_t *h16 = malloc(n * 2);
  uint8_t *h8 = malloc(n);
  float *h32 = malloc(n * 4);
  if (!h16 || !h8 || !h32) fprintf(stderr, "bench_cudnn: out of host memory\n"), exit(1);
  p->n = n;
  for (int t = 0; t < 3; t++) {
    for (size_t i = 0; i < n; i++) {
      unsigned j = (unsigned)(tn_rng_uniform(rng, 0.0f, 1.0f) * POOL_TABLE) % POOL_TABLE;
      h16[i] = t16[j], h8[i] = t8[j], h32[i] = t8_deq[j];
    }
    CHECK(rt_alloc(&p->bf16[t], n * 2));
    CHECK(rt_upload(p->bf16[t], h16, n * 2));
    CHECK(rt_alloc(&p->fp8[t], n));
    CHECK(rt_upload(p->fp8[t], h8, n));
    if (verify) {
      CHECK(rt_alloc(&p->fp8_ref[t], n * 4));
      CHECK(rt_upload(p->fp8_ref[t], h32, n * 4));
    }
  }
  free(h16), free(h8), free(h32);
  CHECK(rt_alloc(&p->o, n * 4));
  if (verify) CHECK(rt_alloc(&p->scratch, scratch_bytes));
  /* FP8 scalars, 16 bytes apart (cuDNN wants aligned tensors): descale q/k/v, scale_s,
   * descale_s, scale_o, then amax_s and amax_o written by cuDNN */
  float s[32] = {0};
  const float d = 1 / p->fp8_scale, v[6] = {d, d, d, 448.0f, 1 / 448.0f, 448.0f};
  for (int i = 0; i < 6; i++) s[4 * i] = v[i];
  CHECK(rt_alloc(&p->scalars, sizeof s));
  CHECK(rt_upload(p->scalars, s, sizeof s));
}

static at_status launch(void *user, int set, CUstream stream)
{
  (void)set;
  return rt_cudnn_sdpa_launch(user, stream);
}

/* Relative L2 of cuDNN's output (already in p->o as the dtype) against the naive reference. */
static at_status verify(const rt_ctx *ctx, pools *p, const at_shape *s, const at_tensors *t, double *err)
{
  const int fp8 = s->dtype == AT_DTYPE_E4M3;
  size_t n = (size_t)s->batch * s->q_len * s->q_heads * s->head_dim;
  size_t out_bytes = n * at_dtype_size(s->dtype);
  void *raw = malloc(out_bytes);
  float *got = malloc(n * 4), *want = malloc(n * 4);
  double *ref = malloc(n * 8);
  at_status rc = AT_ERR_NOMEM;
  rt_naive naive = {0};
  if (!raw || !got || !want || !ref) goto out;
  if ((rc = rt_ctx_sync(ctx)) != AT_OK || (rc = rt_download(raw, p->o, out_bytes)) != AT_OK) goto out;
  if (fp8)
    for (size_t i = 0; i < n; i++) got[i] = at_e4m3_to_f32(((uint8_t *)raw)[i]) / 448.0f;
  else if ((rc = tn_unpack(s->dtype, raw, n, got)) != AT_OK)
    goto out;
  at_shape rs = *s;
  at_tensors rt = *t;
  CUdeviceptr ro = 0;
  rs.dtype = fp8 ? AT_DTYPE_F32 : s->dtype;
  if (fp8) {
    rt.q = (void *)(uintptr_t)p->fp8_ref[0], rt.k = (void *)(uintptr_t)p->fp8_ref[1];
    rt.v = (void *)(uintptr_t)p->fp8_ref[2];
  }
  if ((rc = rt_alloc(&ro, n * 4)) != AT_OK) goto out;
  rt.o = (void *)(uintptr_t)ro;
  if ((rc = rt_naive_create(ctx->arch, rs.dtype, AT_DTYPE_F32, &naive)) == AT_OK &&
      (rc = rt_naive_run(&naive, &rs, &rt, p->scratch, NULL)) == AT_OK && (rc = rt_ctx_sync(ctx)) == AT_OK)
    rc = rt_download(want, ro, n * 4);
  rt_free(ro);
  if (naive.module) rt_naive_destroy(&naive);
  if (rc != AT_OK) goto out;
  for (size_t i = 0; i < n; i++) ref[i] = want[i];
  *err = tn_compare(ref, got, n).rel_l2;
out:
  free(raw), free(got), free(want), free(ref);
  return rc;
}

static void run_config(const rt_ctx *ctx, rt_cudnn_sdpa *cd, pools *p, int seq, int verify_on, result *r)
{
  const config *c = r->c;
  const int fp8 = c->dtype == AT_DTYPE_E4M3;
  at_shape s = {.batch = 2, .q_len = seq, .kv_len = seq, .q_heads = 16, .kv_heads = 16, .head_dim = c->d,
                .dtype = c->dtype, .mask = c->mask};
  at_strides st = at_strides_bshd(seq, 16, c->d);
  CUdeviceptr *in = fp8 ? p->fp8 : p->bf16;
  at_tensors t = {.q = (void *)(uintptr_t)in[0], .k = (void *)(uintptr_t)in[1], .v = (void *)(uintptr_t)in[2],
                  .o = (void *)(uintptr_t)p->o, .q_stride = st, .k_stride = st, .v_stride = st, .o_stride = st};
  CUdeviceptr sc = p->scalars;
  rt_cudnn_fp8_args f = {.descale_q = sc, .descale_k = sc + 16, .descale_v = sc + 32, .scale_s = sc + 48,
                         .descale_s = sc + 64, .scale_o = sc + 80, .amax_s = sc + 96, .amax_o = sc + 112};
  rt_cudnn_fp8_args *fa = fp8 ? &f : NULL;
  rt_cudnn_sdpa_set_path(cd, c->path);
  rt_cudnn_plan_info info;
  r->err = NAN;
  if ((r->rc = rt_cudnn_sdpa_plan(cd, &s, &t, fa, &info)) != AT_OK ||
      (r->rc = rt_cudnn_sdpa_bind(cd, &s, &t, fa)) != AT_OK) {
    snprintf(r->why, sizeof r->why, "%s", at_last_error());
    return;
  }
  r->engine = info.engine, r->ws = info.workspace_bytes, r->build_ms = info.build_ms;
  CHECK(rt_fill_u8(p->o, 0xFF, p->n * 4)); /* poison: NaN in every dtype */
  if ((r->rc = rt_cudnn_sdpa_launch(cd, NULL)) != AT_OK ||
      (verify_on && (r->rc = verify(ctx, p, &s, &t, &r->err)) != AT_OK)) {
    snprintf(r->why, sizeof r->why, "%s", at_last_error());
    return;
  }
  rt_timing_opts opts = {.warmup = 5, .reps = 30};
  rt_timing tm, again;
  /* timed twice: the spread between the two says what difference is noise */
  if ((r->rc = rt_time_launches(launch, cd, 1, &opts, NULL, &tm)) != AT_OK ||
      (r->rc = rt_time_launches(launch, cd, 1, &opts, NULL, &again)) != AT_OK) {
    snprintf(r->why, sizeof r->why, "%s", at_last_error());
    return;
  }
  r->ms = tm.median_ms;
  r->ms_again = again.median_ms;
  r->tflops = at_shape_flops(&s) / (tm.median_ms * 1e-3) / 1e12;
}

int main(int argc, char **argv)
{
  int seq = 8192, verify_on = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) seq = 2048;
    else if (strcmp(argv[i], "--no-verify") == 0) verify_on = 0;
    else return fprintf(stderr, "usage: bench_cudnn [--quick] [--no-verify]\n"), 2;
  }
  rt_ctx ctx;
  rt_cudnn_sdpa *cd;
  size_t version;
  const char *path;
  CHECK(rt_ctx_open(0, &ctx));
  CHECK(rt_cudnn_sdpa_create(&ctx, &cd));
  CHECK(rt_cudnn_version(&version, &path));
  tn_rng rng = tn_rng_seeded(tn_fresh_seed());
  pools p;
  memset(&p, 0, sizeof p);
  size_t n = (size_t)2 * seq * 16 * 256;
  at_shape big = {.batch = 2, .q_len = seq, .kv_len = seq, .q_heads = 16, .kv_heads = 16, .head_dim = 256};
  fill_pools(&p, n, verify_on, &rng, rt_naive_scratch_bytes(&big));

  result res[N_CONFIGS];
  for (int i = 0; i < N_CONFIGS; i++) {
    memset(&res[i], 0, sizeof res[i]);
    res[i].c = &CONFIGS[i];
    run_config(&ctx, cd, &p, seq, verify_on, &res[i]);
    if (res[i].rc != AT_OK) fprintf(stderr, "config %d: %s\n", i, res[i].why);
  }
  printf("\ncuDNN %zu (%s) on %s, B=2 Nq=Nkv=16 T=S=%d BSHD, median of 30 after 5 warm-up, timed twice\n", version, path,
         ctx.info.name, seq);
  printf("%-5s %4s %-7s %-9s %9s %8s %8s %9s %6s %8s %8s\n", "dtype", "D", "mask", "path", "time_ms", "again",
         "TFLOP/s", "rel_err", "engine", "ws_bytes", "build_ms");
  for (int i = 0; i < N_CONFIGS; i++) {
    const result *r = &res[i];
    if (r->rc != AT_OK) {
      printf("%-5s %4d %-7s %-9s %s: %.120s\n", at_dtype_name(r->c->dtype), r->c->d, at_mask_name(r->c->mask),
             rt_cudnn_path_name(r->c->path), at_status_name(r->rc), r->why);
      continue;
    }
    printf("%-5s %4d %-7s %-9s %9.3f %8.3f %8.1f %9.2e %6lld %8lld %8.0f\n", at_dtype_name(r->c->dtype), r->c->d,
           at_mask_name(r->c->mask), rt_cudnn_path_name(r->c->path), r->ms, r->ms_again, r->tflops, r->err,
           (long long)r->engine, (long long)r->ws, r->build_ms);
  }
  rt_cudnn_sdpa_destroy(cd);
  rt_ctx_close(&ctx);
  return 0;
}
