/*
 * test_cudnn_gpu.c — cuDNN fused attention (runtime/cudnn_sdpa.c) against the naive GPU reference
 * with fp32 output, on fresh random inputs (never zeros) and poisoned outputs. Skips without a
 * GPU or without cuDNN.
 *
 * FP8: inputs are quantized on the host with at_quantize_fp8; the reference runs in fp32 on the
 * dequantized values (code · descale), so the only differences left are cuDNN's quantization of
 * P and of O (E4M3 keeps 4 significant bits: ~2-3% relative rounding each), which the E4M3
 * tolerance 5e-2 (E5M2: 1e-1) is meant to hold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attntune_fp8.h"
#include "runtime/cudnn_sdpa.h"
#include "tests/testutil.h"

static rt_ctx g_ctx;
static int g_have_gpu;
static rt_cudnn_sdpa *g_cd;
static size_t g_version;
static rt_naive g_naive[3]; /* fp32 output, by input dtype: f32 (FP8 dequantized), f16, bf16 */
static int g_naive_ready[3];

static int setup(void **state)
{
  (void)state;
  g_have_gpu = tu_open_gpu(&g_ctx);
  if (!g_have_gpu) return 0;
  const char *path = NULL;
  if (rt_cudnn_sdpa_create(&g_ctx, &g_cd) != AT_OK) {
    fprintf(stderr, "no cuDNN: %s\n", at_last_error());
    g_cd = NULL;
    return 0;
  }
  if (rt_cudnn_version(&g_version, &path) != AT_OK) return -1;
  printf("cuDNN %zu from %s on %s (%s)\n", g_version, path, g_ctx.info.name, g_ctx.arch);
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  for (int i = 0; i < 3; i++)
    if (g_naive_ready[i]) rt_naive_destroy(&g_naive[i]);
  rt_cudnn_sdpa_destroy(g_cd);
  if (g_have_gpu) rt_ctx_close(&g_ctx);
  return 0;
}

static void need_cudnn(void)
{
  if (!g_have_gpu || !g_cd) skip();
}

static const rt_naive *naive_for(at_dtype in)
{
  int i = in == AT_DTYPE_F16 ? 1 : in == AT_DTYPE_BF16 ? 2 : 0;
  if (!g_naive_ready[i]) {
    TU_OK(rt_naive_create(g_ctx.arch, in, AT_DTYPE_F32, &g_naive[i]));
    g_naive_ready[i] = 1;
  }
  return &g_naive[i];
}

typedef struct sdpa_case {
  int b, t, s, nq, nkv, d;
  at_dtype dtype;
  at_mask mask;
  int bhsd; /* Q, K, V stored [B, H, seq, D], described by strides */
  rt_cudnn_path path;
  int may_be_unsupported; /* cuDNN may refuse it: then print why and pass */
} sdpa_case;

static at_strides strides_for(const sdpa_case *c, int seq, int heads)
{
  if (!c->bhsd) return at_strides_bshd(seq, heads, c->d);
  at_strides st = {.batch = (int64_t)heads * seq * c->d, .seq = c->d, .head = (int64_t)seq * c->d};
  return st;
}

static double *widen(const float *x, size_t n)
{
  double *y = malloc(n * sizeof *y);
  assert_non_null(y);
  for (size_t i = 0; i < n; i++) y[i] = x[i];
  return y;
}

static CUdeviceptr upload_bytes(const void *host, size_t bytes)
{
  CUdeviceptr dev = 0;
  TU_OK(rt_alloc(&dev, bytes));
  TU_OK(rt_upload(dev, host, bytes));
  return dev;
}

/* An FP8 input: quantized codes on the device, dequantized fp32 values on the host (for the
 * reference), and the descale on the device. */
typedef struct fp8_input {
  CUdeviceptr codes, descale;
  float *dequant;
  float scale;
} fp8_input;

static fp8_input fp8_make(tn_rng *rng, at_dtype fp8, size_t n, float amplitude)
{
  fp8_input in;
  float *x = malloc(n * sizeof *x);
  uint8_t *q = malloc(n);
  in.dequant = malloc(n * sizeof *in.dequant);
  assert_true(x && q && in.dequant);
  tn_rng_fill(rng, x, n, -amplitude, amplitude);
  TU_OK(at_quantize_fp8(x, n, fp8, q, &in.scale));
  for (size_t i = 0; i < n; i++) in.dequant[i] = at_fp8_to_f32(q[i], fp8) / in.scale;
  float descale = 1.0f / in.scale;
  in.codes = upload_bytes(q, n);
  in.descale = upload_bytes(&descale, sizeof descale);
  free(x);
  free(q);
  return in;
}

static CUdeviceptr device_scalar(float value) { return upload_bytes(&value, sizeof value); }

static float download_scalar(CUdeviceptr dev)
{
  float x;
  TU_OK(rt_download(&x, dev, sizeof x));
  return x;
}

/* Run one case through cuDNN and the naive reference; fail on a mismatch. Returns 0 when cuDNN
 * refused a case marked may_be_unsupported. */
static int check_case(const sdpa_case *c)
{
  const int fp8 = c->dtype == AT_DTYPE_E4M3 || c->dtype == AT_DTYPE_E5M2;
  tn_rng rng = tu_rng();
  at_shape s = {.batch = c->b, .q_len = c->t, .kv_len = c->s, .q_heads = c->nq, .kv_heads = c->nkv,
                .head_dim = c->d, .dtype = c->dtype, .mask = c->mask, .with_lse = 1};
  size_t nq = (size_t)c->b * c->t * c->nq * c->d, nkv = (size_t)c->b * c->s * c->nkv * c->d;
  size_t nlse = (size_t)c->b * c->nq * c->t;
  at_tensors t = {0}, rt = {0};
  t.q_stride = strides_for(c, c->t, c->nq);
  t.k_stride = t.v_stride = strides_for(c, c->s, c->nkv);
  t.o_stride = at_strides_bshd(c->t, c->nq, c->d);

  /* inputs: the dtype under test for cuDNN, the same values for the reference */
  at_dtype ref_dtype = fp8 ? AT_DTYPE_F32 : c->dtype;
  CUdeviceptr dq, dk, dv, rq, rk, rv;
  fp8_input f8[3] = {{0}};
  rt_cudnn_fp8_args args = {0};
  float scale_o = 1.0f;
  if (fp8) {
    /* different magnitudes so that each descale matters */
    f8[0] = fp8_make(&rng, c->dtype, nq, 2.0f);
    f8[1] = fp8_make(&rng, c->dtype, nkv, 0.5f);
    f8[2] = fp8_make(&rng, c->dtype, nkv, 3.0f);
    dq = f8[0].codes, dk = f8[1].codes, dv = f8[2].codes;
    rq = tu_upload(AT_DTYPE_F32, f8[0].dequant, nq);
    rk = tu_upload(AT_DTYPE_F32, f8[1].dequant, nkv);
    rv = tu_upload(AT_DTYPE_F32, f8[2].dequant, nkv);
    float fp8_max = at_fp8_max(c->dtype);
    scale_o = fp8_max / 3.0f; /* |O| <= max |V| <= 3 */
    args = (rt_cudnn_fp8_args){.descale_q = f8[0].descale, .descale_k = f8[1].descale,
                               .descale_v = f8[2].descale, .scale_s = device_scalar(fp8_max),
                               .descale_s = device_scalar(1.0f / fp8_max), .scale_o = device_scalar(scale_o),
                               .amax_s = tu_alloc_poisoned(4), .amax_o = tu_alloc_poisoned(4)};
  } else {
    float *q = tu_random_tensor(&rng, c->dtype, nq), *k = tu_random_tensor(&rng, c->dtype, nkv);
    float *v = tu_random_tensor(&rng, c->dtype, nkv);
    dq = rq = tu_upload(c->dtype, q, nq);
    dk = rk = tu_upload(c->dtype, k, nkv);
    dv = rv = tu_upload(c->dtype, v, nkv);
    free(q), free(k), free(v);
  }
  CUdeviceptr o = tu_alloc_poisoned(nq * at_dtype_size(c->dtype)), lse = tu_alloc_poisoned(nlse * 4);
  CUdeviceptr ro = tu_alloc_poisoned(nq * 4), rlse = tu_alloc_poisoned(nlse * 4);
  t.q = (void *)(uintptr_t)dq, t.k = (void *)(uintptr_t)dk, t.v = (void *)(uintptr_t)dv;
  t.o = (void *)(uintptr_t)o, t.lse = (float *)(uintptr_t)lse;
  rt = t;
  rt.q = (void *)(uintptr_t)rq, rt.k = (void *)(uintptr_t)rk, rt.v = (void *)(uintptr_t)rv;
  rt.o = (void *)(uintptr_t)ro, rt.lse = (float *)(uintptr_t)rlse;

  char label[160];
  snprintf(label, sizeof label, "%-4s B%d T%d S%d Nq%d Nkv%d D%-3d %-9s %s %-9s", at_dtype_name(c->dtype), c->b,
           c->t, c->s, c->nq, c->nkv, c->d, at_mask_name(c->mask), c->bhsd ? "bhsd" : "bshd",
           rt_cudnn_path_name(c->path));
  rt_cudnn_sdpa_set_path(g_cd, c->path);
  at_status rc = rt_cudnn_sdpa_run(g_cd, &s, &t, fp8 ? &args : NULL, NULL);
  int ran = 1;
  if (rc == AT_ERR_UNSUPPORTED && c->may_be_unsupported) {
    printf("  %s: unsupported by cuDNN: %s\n", label, at_last_error());
    ran = 0;
  } else {
    TU_OK(rc);
  }
  if (ran) {
    /* the reference on the same (dequantized) values */
    at_shape rs = s;
    rs.dtype = ref_dtype;
    CUdeviceptr scratch = tu_alloc_poisoned(rt_naive_scratch_bytes(&rs));
    TU_OK(rt_naive_run(naive_for(ref_dtype), &rs, &rt, scratch, NULL));
    TU_OK(rt_ctx_sync(&g_ctx));
    rt_free(scratch);
    float *got = malloc(nq * sizeof *got), *want = malloc(nq * sizeof *want);
    float *got_lse = malloc(nlse * 4), *want_lse = malloc(nlse * 4);
    assert_true(got && want && got_lse && want_lse);
    if (fp8) {
      uint8_t *codes = malloc(nq);
      assert_non_null(codes);
      TU_OK(rt_download(codes, o, nq));
      for (size_t i = 0; i < nq; i++) got[i] = at_fp8_to_f32(codes[i], c->dtype) / scale_o;
      free(codes);
    } else {
      tu_download(c->dtype, o, nq, got);
    }
    TU_OK(rt_download(want, ro, nq * 4));
    TU_OK(rt_download(got_lse, lse, nlse * 4));
    TU_OK(rt_download(want_lse, rlse, nlse * 4));
    double *ref = widen(want, nq), *ref_lse = widen(want_lse, nlse);
    tn_error eo = tn_compare(ref, got, nq), el = tn_compare_lse(ref_lse, got_lse, nlse);
    double tol = c->dtype == AT_DTYPE_E4M3 ? 5e-2 : c->dtype == AT_DTYPE_E5M2 ? 1e-1 : 1e-2;
    rt_cudnn_plan_info info;
    char plan[320];
    TU_OK(rt_cudnn_sdpa_plan_info(g_cd, &info));
    rt_cudnn_plan_info_format(&info, plan, sizeof plan);
    printf("  %s: rel_l2 o %.2e lse %.2e | %s\n", label, eo.rel_l2, el.rel_l2, plan);
    if (eo.n_nonfinite || !(eo.rel_l2 <= tol))
      fail_msg("%s: output rel_l2 %.3e (tol %.0e), %zu non-finite (unwritten?), worst at %zu: %g vs %g",
               label, eo.rel_l2, tol, eo.n_nonfinite, eo.worst_index, got[eo.worst_index], ref[eo.worst_index]);
    /* stats come from the fp32 scores of the same inputs on both sides */
    if (el.n_nonfinite || !(el.rel_l2 <= 1e-3))
      fail_msg("%s: lse rel_l2 %.3e, %zu non-finite, worst at %zu: %g vs %g", label, el.rel_l2, el.n_nonfinite,
               el.worst_index, got_lse[el.worst_index], ref_lse[el.worst_index]);
    if (fp8) {
      double ref_amax = 0;
      for (size_t i = 0; i < nq; i++) ref_amax = fmax(ref_amax, fabs(ref[i]));
      float amax_o = download_scalar(args.amax_o), amax_s = download_scalar(args.amax_s);
      printf("    amax_o %.4g (reference %.4g), amax_s %.4g\n", amax_o, ref_amax, amax_s);
      if (!(fabs(amax_o - ref_amax) <= 0.05 * ref_amax)) fail_msg("%s: amax_o %g, reference %g", label, amax_o, ref_amax);
      if (!(amax_s > 0.0f && amax_s <= 1.0f + 1e-6f)) fail_msg("%s: amax_s %g not in (0, 1]", label, amax_s);
    }
    free(got), free(want), free(got_lse), free(want_lse), free(ref), free(ref_lse);
  }
  if (fp8) {
    for (int i = 0; i < 3; i++) rt_free(f8[i].codes), rt_free(f8[i].descale), free(f8[i].dequant);
    rt_free(args.scale_s), rt_free(args.descale_s), rt_free(args.scale_o), rt_free(args.amax_s), rt_free(args.amax_o);
  }
  rt_free(dq), rt_free(dk), rt_free(dv);
  if (fp8) rt_free(rq), rt_free(rk), rt_free(rv);
  rt_free(o), rt_free(lse), rt_free(ro), rt_free(rlse);
  return ran;
}

static void run_cases(const sdpa_case *cases, size_t n)
{
  for (size_t i = 0; i < n; i++) check_case(&cases[i]);
}

#define N_OF(a) (sizeof(a) / sizeof(a)[0])

/* T=200, S=333: not multiples of any tile; D 64/128/256; causal; GQA 4; MQA; strided BHSD. */
static void run_dtype(at_dtype dt)
{
  need_cudnn();
  const rt_cudnn_path G = RT_CUDNN_PATH_COMPOSITE;
  const sdpa_case cases[] = {
      {2, 200, 333, 8, 8, 64, dt, AT_MASK_NONE, 0, G, 0},
      {2, 200, 333, 8, 8, 128, dt, AT_MASK_CAUSAL_TL, 0, G, 0},
      {2, 200, 333, 8, 8, 256, dt, AT_MASK_NONE, 0, G, 0},
      {2, 200, 333, 8, 2, 128, dt, AT_MASK_CAUSAL_TL, 0, G, 0}, /* GQA 4 */
      {2, 200, 333, 8, 1, 64, dt, AT_MASK_NONE, 0, G, 0},       /* MQA */
      {1, 128, 96, 4, 4, 128, dt, AT_MASK_CAUSAL_TL, 1, G, 0},  /* T > S, BHSD */
      {2, 200, 333, 8, 2, 128, dt, AT_MASK_NONE, 0, RT_CUDNN_PATH_AUTO, 0},
  };
  run_cases(cases, N_OF(cases));
}

static void test_f16(void **state) { (void)state; run_dtype(AT_DTYPE_F16); }
static void test_bf16(void **state) { (void)state; run_dtype(AT_DTYPE_BF16); }

static void test_causal_bottom_right(void **state)
{
  (void)state;
  need_cudnn();
  const sdpa_case cases[] = {
      {2, 200, 333, 8, 2, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 0, RT_CUDNN_PATH_AUTO, 1},
      {1, 1, 333, 8, 8, 64, AT_DTYPE_F16, AT_MASK_CAUSAL_BR, 0, RT_CUDNN_PATH_AUTO, 1}, /* decode */
  };
  run_cases(cases, N_OF(cases));
  /* T > S leaves rows without keys: refused before cuDNN is asked */
  at_shape s = {.batch = 1, .q_len = 64, .kv_len = 32, .q_heads = 2, .kv_heads = 2, .head_dim = 64,
                .dtype = AT_DTYPE_BF16, .mask = AT_MASK_CAUSAL_BR};
  at_tensors t = {.q_stride = at_strides_bshd(64, 2, 64), .k_stride = at_strides_bshd(32, 2, 64),
                  .v_stride = at_strides_bshd(32, 2, 64), .o_stride = at_strides_bshd(64, 2, 64)};
  rt_cudnn_sdpa_set_path(g_cd, RT_CUDNN_PATH_AUTO);
  assert_int_equal(rt_cudnn_sdpa_plan(g_cd, &s, &t, NULL, NULL), AT_ERR_UNSUPPORTED);
}

static void test_unified_op(void **state)
{
  (void)state;
  need_cudnn();
  const sdpa_case cases[] = {
      {2, 200, 333, 8, 2, 128, AT_DTYPE_BF16, AT_MASK_NONE, 0, RT_CUDNN_PATH_UNIFIED, g_version < 91301},
      {2, 256, 256, 8, 8, 64, AT_DTYPE_F16, AT_MASK_NONE, 0, RT_CUDNN_PATH_UNIFIED, g_version < 91301},
  };
  run_cases(cases, N_OF(cases));
  at_shape s = {.batch = 1, .q_len = 64, .kv_len = 64, .q_heads = 2, .kv_heads = 2, .head_dim = 64,
                .dtype = AT_DTYPE_BF16, .mask = AT_MASK_CAUSAL_TL};
  at_tensors t = {.q_stride = at_strides_bshd(64, 2, 64), .k_stride = at_strides_bshd(64, 2, 64),
                  .v_stride = at_strides_bshd(64, 2, 64), .o_stride = at_strides_bshd(64, 2, 64)};
  rt_cudnn_sdpa_set_path(g_cd, RT_CUDNN_PATH_UNIFIED);
  assert_int_equal(rt_cudnn_sdpa_plan(g_cd, &s, &t, NULL, NULL), AT_ERR_UNSUPPORTED);
  printf("  unified + causal: %s\n", at_last_error());
  rt_cudnn_sdpa_set_path(g_cd, RT_CUDNN_PATH_AUTO);
}

static void test_fp8(void **state)
{
  (void)state;
  need_cudnn();
  if (g_ctx.info.cc_major < 9) skip(); /* cuDNN's FP8 attention is Hopper and newer */
  const sdpa_case cases[] = {
      {2, 200, 333, 8, 2, 128, AT_DTYPE_E4M3, AT_MASK_NONE, 0, RT_CUDNN_PATH_AUTO, 0},
      {2, 200, 333, 8, 8, 64, AT_DTYPE_E4M3, AT_MASK_CAUSAL_TL, 0, RT_CUDNN_PATH_AUTO, 0},
      {2, 256, 256, 4, 4, 256, AT_DTYPE_E4M3, AT_MASK_CAUSAL_TL, 0, RT_CUDNN_PATH_AUTO, 1},
      {2, 200, 333, 8, 8, 128, AT_DTYPE_E5M2, AT_MASK_NONE, 0, RT_CUDNN_PATH_AUTO, 1},
  };
  run_cases(cases, N_OF(cases));
}

/* A head dim cuDNN has no engine for: the distinct status and cuDNN's words, not a crash; the
 * refusal is remembered, so asking again builds nothing. */
static void test_unsupported_shape(void **state)
{
  (void)state;
  need_cudnn();
  at_shape s = {.batch = 1, .q_len = 64, .kv_len = 64, .q_heads = 2, .kv_heads = 2, .head_dim = 12,
                .dtype = AT_DTYPE_BF16, .mask = AT_MASK_CAUSAL_TL};
  at_tensors t = {.q_stride = at_strides_bshd(64, 2, 12), .k_stride = at_strides_bshd(64, 2, 12),
                  .v_stride = at_strides_bshd(64, 2, 12), .o_stride = at_strides_bshd(64, 2, 12)};
  rt_cudnn_sdpa_set_path(g_cd, RT_CUDNN_PATH_AUTO);
  long builds = rt_cudnn_sdpa_builds(g_cd);
  at_status rc = rt_cudnn_sdpa_plan(g_cd, &s, &t, NULL, NULL);
  printf("  D=12: %s: %s\n", at_status_name(rc), at_last_error());
  assert_int_equal(rc, AT_ERR_UNSUPPORTED);
  assert_true(strlen(at_last_error()) > 20);
  static char first[16384];
  snprintf(first, sizeof first, "%s", at_last_error());
  assert_int_equal(rt_cudnn_sdpa_plan(g_cd, &s, &t, NULL, NULL), AT_ERR_UNSUPPORTED);
  assert_string_equal(at_last_error(), first);
  /* with no mask AUTO tries the fused op first, then the graph: refused both ways */
  s.mask = AT_MASK_NONE;
  assert_int_equal(rt_cudnn_sdpa_plan(g_cd, &s, &t, NULL, NULL), AT_ERR_UNSUPPORTED);
  printf("  D=12, no mask: %s\n", at_last_error());
  assert_int_equal(rt_cudnn_sdpa_builds(g_cd), builds);
  /* f32 inputs: refused by name */
  s.head_dim = 64, s.dtype = AT_DTYPE_F32;
  assert_int_equal(rt_cudnn_sdpa_plan(g_cd, &s, &t, NULL, NULL), AT_ERR_UNSUPPORTED);
}

/* AUTO: FP8 graph for FP8, the fused op without a mask (cuDNN >= 9.13.1), else the graph. */
static void test_auto_path(void **state)
{
  (void)state;
  need_cudnn();
  at_shape s = {.batch = 1, .q_len = 256, .kv_len = 256, .q_heads = 4, .kv_heads = 4, .head_dim = 128,
                .dtype = AT_DTYPE_BF16, .mask = AT_MASK_NONE};
  at_strides st = at_strides_bshd(256, 4, 128);
  at_tensors t = {.q_stride = st, .k_stride = st, .v_stride = st, .o_stride = st};
  rt_cudnn_fp8_args unused = {0};
  rt_cudnn_plan_info info;
  rt_cudnn_sdpa_set_path(g_cd, RT_CUDNN_PATH_AUTO);
  TU_OK(rt_cudnn_sdpa_plan(g_cd, &s, &t, NULL, &info));
  assert_int_equal(info.path, g_version >= 91301 ? RT_CUDNN_PATH_UNIFIED : RT_CUDNN_PATH_COMPOSITE);
  s.mask = AT_MASK_CAUSAL_TL;
  TU_OK(rt_cudnn_sdpa_plan(g_cd, &s, &t, NULL, &info));
  assert_int_equal(info.path, RT_CUDNN_PATH_COMPOSITE);
  if (g_ctx.info.cc_major >= 9) {
    s.dtype = AT_DTYPE_E4M3;
    TU_OK(rt_cudnn_sdpa_plan(g_cd, &s, &t, &unused, &info));
    assert_int_equal(info.path, RT_CUDNN_PATH_FP8);
  }
  /* FP8 inputs without scaling arguments, or with a path that cannot take them: refused */
  s.dtype = AT_DTYPE_E4M3;
  assert_int_equal(rt_cudnn_sdpa_plan(g_cd, &s, &t, NULL, &info), AT_ERR_INVALID);
  rt_cudnn_sdpa_set_path(g_cd, RT_CUDNN_PATH_COMPOSITE);
  assert_int_equal(rt_cudnn_sdpa_plan(g_cd, &s, &t, &unused, &info), AT_ERR_INVALID);
  rt_cudnn_sdpa_set_path(g_cd, RT_CUDNN_PATH_AUTO);
}

/* The same shape twice builds one plan; new pointers or a new set of inputs reuse it. */
static void test_plan_reuse(void **state)
{
  (void)state;
  need_cudnn();
  const int b = 1, n = 96, h = 2, d = 64;
  at_shape s = {.batch = b, .q_len = n, .kv_len = n, .q_heads = h, .kv_heads = h, .head_dim = d,
                .dtype = AT_DTYPE_F16, .mask = AT_MASK_CAUSAL_TL};
  size_t count = (size_t)b * n * h * d;
  tn_rng rng = tu_rng();
  float *x = tu_random_tensor(&rng, AT_DTYPE_F16, count);
  CUdeviceptr buf[4];
  for (int i = 0; i < 4; i++) buf[i] = tu_upload(AT_DTYPE_F16, x, count);
  at_strides st = at_strides_bshd(n, h, d);
  at_tensors t = {.q = (void *)(uintptr_t)buf[0], .k = (void *)(uintptr_t)buf[1], .v = (void *)(uintptr_t)buf[2],
                  .o = (void *)(uintptr_t)buf[3], .q_stride = st, .k_stride = st, .v_stride = st, .o_stride = st};
  rt_cudnn_sdpa_set_path(g_cd, RT_CUDNN_PATH_AUTO);
  long b0 = rt_cudnn_sdpa_builds(g_cd);
  TU_OK(rt_cudnn_sdpa_run(g_cd, &s, &t, NULL, NULL));
  assert_int_equal(rt_cudnn_sdpa_builds(g_cd), b0 + 1);
  TU_OK(rt_cudnn_sdpa_run(g_cd, &s, &t, NULL, NULL));
  t.q = (void *)(uintptr_t)buf[1], t.k = (void *)(uintptr_t)buf[0]; /* other pointers */
  TU_OK(rt_cudnn_sdpa_run(g_cd, &s, &t, NULL, NULL));
  s.scale = 1.0f / sqrtf((float)d); /* the default scale spelled out: the same plan */
  TU_OK(rt_cudnn_sdpa_run(g_cd, &s, &t, NULL, NULL));
  assert_int_equal(rt_cudnn_sdpa_builds(g_cd), b0 + 1);
  s.mask = AT_MASK_NONE; /* another graph */
  TU_OK(rt_cudnn_sdpa_run(g_cd, &s, &t, NULL, NULL));
  assert_int_equal(rt_cudnn_sdpa_builds(g_cd), b0 + 2);
  TU_OK(rt_ctx_sync(&g_ctx));
  rt_cudnn_plan_info info;
  char line[320];
  TU_OK(rt_cudnn_sdpa_plan_info(g_cd, &info));
  rt_cudnn_plan_info_format(&info, line, sizeof line);
  printf("  reuse: %ld builds for 5 runs; %s\n", rt_cudnn_sdpa_builds(g_cd) - b0, line);
  assert_true(info.cudnn_version == g_version && info.engine >= 0);
  for (int i = 0; i < 4; i++) rt_free(buf[i]);
  free(x);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_f16),
      cmocka_unit_test(test_causal_bottom_right),
      cmocka_unit_test(test_unified_op),
      cmocka_unit_test(test_fp8),
      cmocka_unit_test(test_unsupported_shape),
      cmocka_unit_test(test_auto_path),
      cmocka_unit_test(test_plan_reuse),
  };
  return TU_RUN_GROUP(tests, setup, teardown);
}
