/*
 * test_harness_gpu.c — the tuner's harness (tuner/harness.c) with cuDNN as the baseline and the
 * yardstick, for FP8 shapes as for bf16 (skips without a GPU or without cuDNN):
 *
 *   1. bf16: cuDNN's composite graph writes bf16, passes 1e-2 against the naive reference, and
 *      is timed;
 *   2. FP8 (E4M3, E5M2; no mask and causal; D = 64 and 128): cuDNN's FP8 graph writes FP8 output
 *      (O · scale_o with scale_o the format's largest value), which the harness decodes with
 *      1 / scale_o; it passes the dtype's tolerance against the naive reference and cannot be
 *      exact there (an FP8 output rounds); kept as the yardstick, the default generated kernel
 *      (bf16 output) is compared with it; cuDNN is timed. A refusal (below sm_90 cuDNN has no FP8
 *      attention) must be AT_ERR_UNSUPPORTED and name the FP8 graph; on sm_90 and newer E4M3
 *      must run;
 *   3. the single fused op has no FP8 form: refused with a message that says what to use;
 *   4. the comparison on the GPU (runtime/compare.c), which tn_harness_verify uses, gives the
 *      host's tn_compare figure for fresh random outputs of every 16-bit and FP8 dtype (with a
 *      descale), and infinity when one entry is NaN.
 *
 * The errors are printed, so a run on the GPU shows how much of the tolerance cuDNN's FP8 output
 * takes (tests/test_reference.c predicts E4M3 ~3.7e-2, E5M2 ~7e-2).
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
#include "tests/testutil.h"
#include "tuner/harness.h"

static const rt_timing_opts QUICK = {.warmup = 2, .reps = 5};

static at_shape shape_of(int t, int d, at_dtype dtype, at_mask mask)
{
  return (at_shape){.batch = 1, .q_len = t, .kv_len = t, .q_heads = 4, .kv_heads = 4, .head_dim = d,
                    .dtype = dtype, .mask = mask};
}

/* A harness on tu_gpu with fresh inputs (seed printed) and its naive reference. */
static void open_harness(tn_harness *h, const at_shape *s)
{
  unsigned long long seed = tu_next_seed(); /* from the program's seed: ATTNTUNE_TEST_SEED replays it */
  char key[160];
  at_shape_key(s, key, sizeof key);
  printf("  %s: seed %llu\n", key, seed);
  TU_OK(tn_harness_open(h, &tu_gpu, s, seed));
  TU_OK(tn_harness_make_reference(h));
}

/* cuDNN on the harness's shape; 0 (after closing the harness) when there is no cuDNN to test. */
static int open_cudnn(tn_harness *h, tn_impl *impl, rt_cudnn_plan_info *info)
{
  at_status rc = tn_impl_cudnn(h, RT_CUDNN_PATH_COMPOSITE, impl, info);
  if (rc == AT_ERR_CUDNN) {
    printf("  no cuDNN: %s\n", at_last_error());
    tn_harness_close(h);
    return 0;
  }
  TU_OK(rc);
  return 1;
}

static void time_it(tn_harness *h, tn_impl *impl)
{
  rt_timing tm;
  TU_OK(tn_harness_time(h, impl, &QUICK, &tm));
  assert_true(tm.median_ms > 0 && isfinite(tm.median_ms));
  printf("    %s: %.4f ms\n", impl->name, tm.median_ms);
}

static void test_bf16_baseline(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  at_shape s = shape_of(256, 64, AT_DTYPE_BF16, AT_MASK_NONE);
  tn_harness h;
  tn_impl cudnn;
  rt_cudnn_plan_info info;
  open_harness(&h, &s);
  if (!open_cudnn(&h, &cudnn, &info)) skip();
  assert_int_equal(cudnn.out_dtype, AT_DTYPE_BF16);
  assert_true(cudnn.out_descale == 1.0f);
  double err, err_cudnn;
  TU_OK(tn_harness_verify(&h, &cudnn, &err, &err_cudnn));
  printf("    cudnn: err vs naive %.2e\n", err);
  assert_true(err <= at_dtype_tolerance(AT_DTYPE_BF16));
  TU_OK(tn_harness_keep_cudnn_output(&h, &cudnn));
  time_it(&h, &cudnn);
  tn_impl_close(&cudnn);
  tn_harness_close(&h);
}

/* The default generated kernel for the harness's shape, compiled and loaded (*c freed by the
 * caller with rt_compiled_free). */
static void open_default_variant(tn_harness *h, tn_impl *impl, rt_compiled *c)
{
  gen_target target;
  gen_variant v;
  TU_OK(gen_target_make(tu_gpu.arch, tu_gpu.info.smem_per_block_optin, &target));
  TU_OK(gen_default_variant(&h->shape, &target, &v));
  TU_OK(rt_compile_all(&v, 1, &target, 1, c));
  if (c->status != AT_OK) fail_msg("%s does not compile: %s", c->key, c->message);
  TU_OK(tn_impl_variant(h, &v, c->binary.cubin, impl));
}

/* One FP8 shape: cuDNN's FP8 graph verified, kept and timed; ours compared with it. Returns 0
 * when this GPU has no cuDNN FP8 attention (after checking the refusal says so). */
static int check_fp8_shape(const at_shape *s)
{
  const double tol = at_dtype_tolerance(s->dtype);
  tn_harness h;
  tn_impl cudnn, ours;
  rt_cudnn_plan_info info;
  open_harness(&h, s);
  at_status rc = tn_impl_cudnn(&h, RT_CUDNN_PATH_COMPOSITE, &cudnn, &info);
  if (rc == AT_ERR_CUDNN) {
    printf("  no cuDNN: %s\n", at_last_error());
    tn_harness_close(&h);
    return 0;
  }
  if (rc == AT_ERR_UNSUPPORTED) {
    /* cuDNN's FP8 attention is Hopper and newer, and there it runs E4M3 (bench_cudnn measured
     * D = 128 and 256 on the H200); elsewhere a refusal is fine if its reason names the graph. */
    printf("    refused on %s: %s\n", tu_gpu.arch, at_last_error());
    assert_non_null(strstr(at_last_error(), "cuDNN's FP8 graph"));
    if (tu_gpu.info.cc_major >= 9 && s->dtype == AT_DTYPE_E4M3) fail_msg("cuDNN refused E4M3 on sm_90 or newer");
    tn_harness_close(&h);
    return 0;
  }
  TU_OK(rc);
  assert_int_equal(info.path, RT_CUDNN_PATH_FP8);
  assert_int_equal(cudnn.out_dtype, s->dtype); /* FP8 output, */
  assert_true(fabs(cudnn.out_descale * at_fp8_max(s->dtype) - 1) < 1e-6); /* read back x 1/scale_o */
  double err, err_cudnn;
  TU_OK(tn_harness_verify(&h, &cudnn, &err, &err_cudnn));
  printf("    cudnn fp8: err vs naive %.2e (tolerance %.0e)\n", err, tol);
  if (!(err <= tol)) fail_msg("cuDNN's FP8 output: error %.3g over the tolerance %.3g", err, tol);
  assert_true(err > 1e-3); /* an FP8 output is rounded to 3 or 2 mantissa bits: not this close */
  TU_OK(tn_harness_keep_cudnn_output(&h, &cudnn));
  time_it(&h, &cudnn);

  rt_compiled c;
  open_default_variant(&h, &ours, &c);
  TU_OK(tn_harness_verify(&h, &ours, &err, &err_cudnn));
  printf("    %s: err vs naive %.2e, vs cuDNN %.2e\n", ours.name, err, err_cudnn);
  assert_true(err <= tol);
  /* ours (bf16 output) against cuDNN's (FP8 output): both roundings, within twice the tolerance */
  assert_true(isfinite(err_cudnn) && err_cudnn <= 2 * tol);
  tn_impl_close(&ours);
  rt_compiled_free(&c, 1);
  tn_impl_close(&cudnn);
  tn_harness_close(&h);
  return 1;
}

static void test_fp8_baseline(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const at_dtype dtypes[2] = {AT_DTYPE_E4M3, AT_DTYPE_E5M2};
  const at_mask masks[2] = {AT_MASK_NONE, AT_MASK_CAUSAL_TL};
  const int dims[2] = {64, 128};
  int ran = 0;
  for (int d = 0; d < 2; d++)
    for (int m = 0; m < 2; m++)
      for (int k = 0; k < 2; k++) {
        at_shape s = shape_of(512, dims[k], dtypes[d], masks[m]);
        ran += check_fp8_shape(&s);
      }
  if (!ran) skip();
}

static void test_fp8_unified_refused(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  at_shape s = shape_of(128, 64, AT_DTYPE_E4M3, AT_MASK_NONE);
  tn_harness h;
  tn_impl cudnn;
  TU_OK(tn_harness_open(&h, &tu_gpu, &s, tu_next_seed()));
  assert_int_equal(tn_impl_cudnn(&h, RT_CUDNN_PATH_UNIFIED, &cudnn, NULL), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "FP8 graph"));
  tn_harness_close(&h);
}

/* n fresh values in [-2, 2) as dtype bytes (packed) and decoded back times descale (got). */
static void random_output(at_dtype dtype, float descale, size_t n, void *packed, float *got)
{
  tn_rng rng = tn_rng_seeded(tu_next_seed());
  for (size_t i = 0; i < n; i++) got[i] = tn_rng_uniform(&rng, -2.0f, 2.0f);
  TU_OK(tn_pack(dtype, got, n, packed));
  TU_OK(tn_decode_output(dtype, descale, packed, n, got));
}

static void test_compare_on_gpu_matches_host(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const size_t n = 3 * 100003; /* not a multiple of a block or of the grid's stride */
  const at_dtype dtypes[] = {AT_DTYPE_BF16, AT_DTYPE_F16, AT_DTYPE_E4M3, AT_DTYPE_E5M2, AT_DTYPE_F32};
  float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
  double *ref64 = malloc(n * sizeof(double));
  void *packed = malloc(n * sizeof(float));
  assert_true(ref && got && ref64 && packed);
  tn_rng rng = tn_rng_seeded(tu_next_seed());
  for (size_t i = 0; i < n; i++) ref[i] = tn_rng_uniform(&rng, -2.0f, 2.0f), ref64[i] = ref[i];
  CUdeviceptr d_ref = 0, d_out = 0;
  TU_OK(rt_alloc(&d_ref, n * sizeof(float)));
  TU_OK(rt_alloc(&d_out, n * sizeof(float)));
  TU_OK(rt_upload(d_ref, ref, n * sizeof(float)));
  for (size_t k = 0; k < sizeof dtypes / sizeof *dtypes; k++) {
    const at_dtype dt = dtypes[k];
    const float descale = at_dtype_is_fp8(dt) ? 1.0f / 64 : 1.0f;
    rt_compare c;
    rt_compare_sums sums;
    TU_OK(rt_compare_create(tu_gpu.arch, dt, &c));
    random_output(dt, descale, n, packed, got);
    TU_OK(rt_upload(d_out, packed, n * at_dtype_size(dt)));
    TU_OK(rt_compare_run(&c, d_ref, d_out, descale, n, &sums));
    const double host = tn_compare(ref64, got, n).rel_l2, gpu = rt_compare_rel_l2(&sums);
    printf("  %s: rel L2 %.6e on the GPU, %.6e on the host\n", at_dtype_name(dt), gpu, host);
    assert_int_equal(sums.nonfinite, 0);
    assert_true(host > 0.1 && fabs(gpu - host) <= 1e-9 * host);
    /* One NaN entry (a poisoned byte pattern) anywhere makes it infinite, as on the host. */
    memset((unsigned char *)packed + (n / 2) * at_dtype_size(dt), 0xff, at_dtype_size(dt));
    TU_OK(rt_upload(d_out, packed, n * at_dtype_size(dt)));
    TU_OK(rt_compare_run(&c, d_ref, d_out, descale, n, &sums));
    assert_int_equal(sums.nonfinite, 1);
    assert_true(isinf(rt_compare_rel_l2(&sums)));
    rt_compare_destroy(&c);
  }
  rt_free(d_ref), rt_free(d_out);
  free(ref), free(got), free(ref64), free(packed);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bf16_baseline),
      cmocka_unit_test(test_fp8_baseline),
      cmocka_unit_test(test_fp8_unified_refused),
      cmocka_unit_test(test_compare_on_gpu_matches_host),
  };
  return TU_RUN_GROUP(tests, tu_gpu_setup, tu_gpu_teardown);
}
