/* test_naive_gpu.c — the naive GPU kernels against the CPU reference (skips without a GPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attntune_fp8.h"
#include "tests/testutil.h"

typedef struct layout_case {
  int b, t, s, nq, nkv, d;
  at_mask mask;
  int bhsd; /* Q, K, V stored (B, H, S, D) and described by strides */
} layout_case;

static at_strides strides_for(const layout_case *c, int seq, int heads)
{
  if (!c->bhsd) return at_strides_bshd(seq, heads, c->d);
  at_strides st = {.batch = (int64_t)heads * seq * c->d, .seq = c->d, .head = (int64_t)seq * c->d};
  return st;
}

/* Runs the naive kernels for one case and dtype pair; returns the relative L2 errors. */
static void check_case(const layout_case *c, at_dtype in, at_dtype out, const rt_naive *naive)
{
  tn_rng rng = tu_rng();
  at_shape s = {.batch = c->b, .q_len = c->t, .kv_len = c->s, .q_heads = c->nq,
                .kv_heads = c->nkv, .head_dim = c->d, .dtype = in, .mask = c->mask, .with_lse = 1};
  size_t nq = (size_t)c->b * c->t * c->nq * c->d, nkv = (size_t)c->b * c->s * c->nkv * c->d;
  size_t nlse = (size_t)c->b * c->nq * c->t;
  float *q = tu_random_tensor(&rng, in, nq), *k = tu_random_tensor(&rng, in, nkv);
  float *v = tu_random_tensor(&rng, in, nkv);
  double *ref_o = malloc(nq * sizeof(double)), *ref_lse = malloc(nlse * sizeof(double));
  float *got_o = malloc(nq * sizeof(float)), *got_lse = malloc(nlse * sizeof(float));
  assert_true(ref_o && ref_lse && got_o && got_lse);

  at_tensors t = {0};
  t.q_stride = strides_for(c, c->t, c->nq);
  t.k_stride = t.v_stride = strides_for(c, c->s, c->nkv);
  t.o_stride = at_strides_bshd(c->t, c->nq, c->d);
  TU_OK(tn_ref_attention(&s, q, t.q_stride, k, t.k_stride, v, t.v_stride, ref_o, ref_lse));

  CUdeviceptr dq = tu_upload(in, q, nq), dk = tu_upload(in, k, nkv), dv = tu_upload(in, v, nkv);
  CUdeviceptr dout = tu_alloc_poisoned(nq * at_dtype_size(out));
  CUdeviceptr dlse = tu_alloc_poisoned(nlse * sizeof(float));
  CUdeviceptr scratch = tu_alloc_poisoned(rt_naive_scratch_bytes(&s));
  t.q = (void *)(uintptr_t)dq, t.k = (void *)(uintptr_t)dk, t.v = (void *)(uintptr_t)dv;
  t.o = (void *)(uintptr_t)dout, t.lse = (float *)(uintptr_t)dlse;
  TU_OK(rt_naive_run(naive, &s, &t, scratch, NULL));
  TU_OK(rt_ctx_sync(&tu_gpu));
  tu_download(out, dout, nq, got_o);
  TU_OK(rt_download(got_lse, dlse, nlse * sizeof(float)));

  tn_error eo = tn_compare(ref_o, got_o, nq), el = tn_compare_lse(ref_lse, got_lse, nlse);
  /* fp32 arithmetic on both sides: far below 1e-4; a 16-bit output adds its rounding. */
  double tol = out == AT_DTYPE_F32 ? 1e-4 : 1e-2;
  printf("  %s->%s B%d T%d S%d Nq%d Nkv%d D%d %-9s %s: rel_l2 o %.2e lse %.2e\n",
         at_dtype_name(in), at_dtype_name(out), c->b, c->t, c->s, c->nq, c->nkv, c->d,
         at_mask_name(c->mask), c->bhsd ? "bhsd" : "bshd", eo.rel_l2, el.rel_l2);
  if (eo.n_nonfinite || !(eo.rel_l2 < tol))
    fail_msg("output: rel_l2 %.3e (tol %.0e), %zu non-finite (unwritten?), worst at %zu: %g vs %g",
             eo.rel_l2, tol, eo.n_nonfinite, eo.worst_index, got_o[eo.worst_index],
             ref_o[eo.worst_index]);
  if (el.n_nonfinite || !(el.rel_l2 < 1e-5))
    fail_msg("lse: rel_l2 %.3e, %zu mismatched non-finite", el.rel_l2, el.n_nonfinite);

  rt_free(dq), rt_free(dk), rt_free(dv), rt_free(dout), rt_free(dlse), rt_free(scratch);
  free(q), free(k), free(v), free(ref_o), free(ref_lse), free(got_o), free(got_lse);
}

static const layout_case CASES[] = {
    {2, 77, 1000, 12, 2, 80, AT_MASK_NONE, 0},       /* odd sizes, GQA 6 */
    {2, 77, 1000, 12, 2, 80, AT_MASK_CAUSAL_TL, 0},
    {2, 77, 1000, 12, 2, 80, AT_MASK_CAUSAL_BR, 0},
    {1, 64, 64, 4, 1, 64, AT_MASK_CAUSAL_TL, 1},     /* MQA, strided BHSD inputs */
    {1, 50, 20, 4, 4, 32, AT_MASK_CAUSAL_BR, 0},     /* T > S: rows without keys */
    {3, 33, 129, 2, 2, 128, AT_MASK_NONE, 1},
};

static void run_dtype(at_dtype in)
{
  if (!tu_have_gpu) skip();
  const at_dtype outs[2] = {AT_DTYPE_F32, in};
  for (int o = 0; o < (in == AT_DTYPE_F32 ? 1 : 2); o++) {
    rt_naive naive;
    TU_OK(rt_naive_create(tu_gpu.arch, in, outs[o], &naive));
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) check_case(&CASES[i], in, outs[o], &naive);
    rt_naive_destroy(&naive);
  }
}

static void test_naive_f32(void **state) { (void)state; run_dtype(AT_DTYPE_F32); }
static void test_naive_f16(void **state) { (void)state; run_dtype(AT_DTYPE_F16); }
static void test_naive_bf16(void **state) { (void)state; run_dtype(AT_DTYPE_BF16); }

/* FP8 inputs with descales: fresh fp32 at different magnitudes per tensor, quantized with
 * at_quantize_fp8 (descale = 1 / scale); the CPU reference runs on decode(code) * descale. */
static float *quantize_input(tn_rng *rng, at_dtype dtype, size_t n, float magnitude, uint8_t *codes,
                             float *descale)
{
  float *x = malloc(n * sizeof *x), scale = 0.f;
  assert_non_null(x);
  tn_rng_fill(rng, x, n, -magnitude, magnitude);
  TU_OK(at_quantize_fp8(x, n, dtype, codes, &scale));
  *descale = 1.0f / scale;
  for (size_t i = 0; i < n; i++) x[i] = at_fp8_to_f32(codes[i], dtype) * *descale;
  return x;
}

static void check_fp8_case(const layout_case *c, at_dtype in, at_dtype out, const rt_naive *naive)
{
  tn_rng rng = tu_rng();
  at_shape s = {.batch = c->b, .q_len = c->t, .kv_len = c->s, .q_heads = c->nq,
                .kv_heads = c->nkv, .head_dim = c->d, .dtype = in, .mask = c->mask, .with_lse = 1};
  size_t nq = (size_t)c->b * c->t * c->nq * c->d, nkv = (size_t)c->b * c->s * c->nkv * c->d;
  size_t nlse = (size_t)c->b * c->nq * c->t;
  uint8_t *cq = malloc(nq), *ck = malloc(nkv), *cv = malloc(nkv);
  assert_true(cq && ck && cv);
  float descales[3];
  float *q = quantize_input(&rng, in, nq, 3.0f, cq, &descales[0]);
  float *k = quantize_input(&rng, in, nkv, 0.5f, ck, &descales[1]);
  float *v = quantize_input(&rng, in, nkv, 2.0f, cv, &descales[2]);
  double *ref_o = malloc(nq * sizeof(double)), *ref_lse = malloc(nlse * sizeof(double));
  float *got_o = malloc(nq * sizeof(float)), *got_lse = malloc(nlse * sizeof(float));
  assert_true(ref_o && ref_lse && got_o && got_lse);

  at_tensors t = {0};
  t.q_stride = strides_for(c, c->t, c->nq);
  t.k_stride = t.v_stride = strides_for(c, c->s, c->nkv);
  t.o_stride = at_strides_bshd(c->t, c->nq, c->d);
  TU_OK(tn_ref_attention(&s, q, t.q_stride, k, t.k_stride, v, t.v_stride, ref_o, ref_lse));

  CUdeviceptr dq, dk, dv, dscale;
  TU_OK(rt_alloc(&dq, nq));
  TU_OK(rt_alloc(&dk, nkv));
  TU_OK(rt_alloc(&dv, nkv));
  TU_OK(rt_upload(dq, cq, nq));
  TU_OK(rt_upload(dk, ck, nkv));
  TU_OK(rt_upload(dv, cv, nkv));
  TU_OK(rt_alloc(&dscale, sizeof descales));
  TU_OK(rt_upload(dscale, descales, sizeof descales));
  CUdeviceptr dout = tu_alloc_poisoned(nq * at_dtype_size(out));
  CUdeviceptr dlse = tu_alloc_poisoned(nlse * sizeof(float));
  CUdeviceptr scratch = tu_alloc_poisoned(rt_naive_scratch_bytes(&s));
  t.q = (void *)(uintptr_t)dq, t.k = (void *)(uintptr_t)dk, t.v = (void *)(uintptr_t)dv;
  t.o = (void *)(uintptr_t)dout, t.lse = (float *)(uintptr_t)dlse;
  const float *d0 = (const float *)(uintptr_t)dscale;
  rt_naive_descales ds = {d0, d0 + 1, d0 + 2};
  TU_OK(rt_naive_run_fp8(naive, &s, &t, &ds, scratch, NULL));
  TU_OK(rt_ctx_sync(&tu_gpu));
  tu_download(out, dout, nq, got_o);
  TU_OK(rt_download(got_lse, dlse, nlse * sizeof(float)));

  tn_error eo = tn_compare(ref_o, got_o, nq), el = tn_compare_lse(ref_lse, got_lse, nlse);
  double tol = out == AT_DTYPE_F32 ? 1e-4 : 1e-2;
  printf("  %s->%s B%d T%d S%d Nq%d Nkv%d D%d %-9s %s descales %.3g %.3g %.3g: rel_l2 o %.2e lse %.2e\n",
         at_dtype_name(in), at_dtype_name(out), c->b, c->t, c->s, c->nq, c->nkv, c->d,
         at_mask_name(c->mask), c->bhsd ? "bhsd" : "bshd", descales[0], descales[1], descales[2],
         eo.rel_l2, el.rel_l2);
  if (eo.n_nonfinite || !(eo.rel_l2 < tol))
    fail_msg("output: rel_l2 %.3e (tol %.0e), %zu non-finite, worst at %zu: %g vs %g", eo.rel_l2, tol,
             eo.n_nonfinite, eo.worst_index, got_o[eo.worst_index], ref_o[eo.worst_index]);
  if (el.n_nonfinite || !(el.rel_l2 < 1e-5))
    fail_msg("lse: rel_l2 %.3e, %zu mismatched non-finite", el.rel_l2, el.n_nonfinite);

  rt_free(dq), rt_free(dk), rt_free(dv), rt_free(dscale), rt_free(dout), rt_free(dlse), rt_free(scratch);
  free(cq), free(ck), free(cv), free(q), free(k), free(v);
  free(ref_o), free(ref_lse), free(got_o), free(got_lse);
}

static void run_fp8(at_dtype in)
{
  if (!tu_have_gpu) skip();
  if (tu_gpu.info.cc_major < 8 || (tu_gpu.info.cc_major == 8 && tu_gpu.info.cc_minor < 9)) {
    printf("  no FP8 conversions before sm_89\n");
    skip();
  }
  const at_dtype outs[2] = {AT_DTYPE_F32, AT_DTYPE_BF16};
  for (int o = 0; o < 2; o++) {
    rt_naive naive;
    TU_OK(rt_naive_create(tu_gpu.arch, in, outs[o], &naive));
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) check_fp8_case(&CASES[i], in, outs[o], &naive);
    rt_naive_destroy(&naive);
  }
}

static void test_naive_e4m3(void **state) { (void)state; run_fp8(AT_DTYPE_E4M3); }
static void test_naive_e5m2(void **state) { (void)state; run_fp8(AT_DTYPE_E5M2); }

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_naive_f32),
      cmocka_unit_test(test_naive_f16),
      cmocka_unit_test(test_naive_bf16),
      cmocka_unit_test(test_naive_e4m3),
      cmocka_unit_test(test_naive_e5m2),
  };
  return TU_RUN_GROUP(tests, tu_gpu_setup, tu_gpu_teardown);
}
