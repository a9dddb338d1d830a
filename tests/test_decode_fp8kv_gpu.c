/* test_decode_fp8kv_gpu.c — an FP8 KV cache (16-bit Q and O, K and V e4m3 or e5m2 with per-tensor
 * descales) on the GPU (skips without one):
 *
 *   1. inputs: fresh random values per case (never zeros): Q rounded to its 16-bit dtype, K and V
 *      quantized per tensor with at_quantize_fp8 at magnitudes that make the descales matter;
 *   2. the reference: the naive kernels compiled for the K/V dtype, with descale_k and descale_v,
 *      checked against the naive f32 kernels on the same values dequantized on the host;
 *   3. every decode variant the generator lists for the shape (tiles, warps, stages, split counts)
 *      against it: O in Q's dtype within Q's tolerance (1e-2: K and V are widened exactly and P
 *      stays 16-bit), the log-sum-exp within 1e-3, NaN never passes; O, lse and the split-KV
 *      scratch poisoned (0xFF: NaN) before each run;
 *   4. through the public API: the default plan of an FP8 KV shape is a decode variant and matches
 *      the reference; a plan refuses to run without at_fp8_args; T > 16 falls to the naive kernels
 *      (no generated kernel and no cuDNN graph reads FP8 K/V there), and generated kernels only
 *      ("fused") is refused with the reason.
 *
 * The cases: S not a multiple of the tile or of the split, S shorter than one tile, T = 1, 2, 3, 8
 * and 16, MHA, GQA 4, GQA 6, GQA 7, MQA, head dims 48 and 80 (an odd number of 16-byte FP8 chunks
 * per row) to 256, every mask, lse on and off, (B, H, S, D) strides, both FP8 formats with f16 and
 * bf16 Q, and keys that move a row's max late (rising scores; one score of 90) for the kernels
 * that guess it. tests/test_generator.c compiles the variants of these shapes for sm_90a (no spills). */
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
#include "generator/generator.h"
#include "tests/testutil.h"

typedef struct kv8_case {
  int b, t, s, nq, nkv, d;
  at_dtype q, kv; /* q: f16 or bf16; kv: e4m3 or e5m2 */
  at_mask mask;
  int lse;
  int bhsd; /* Q, K, V, O stored (B, H, S, D) and described by strides */
  tu_keys keys; /* random, or scores that move a row's max late (BSHD cases only) */
} kv8_case;

static const kv8_case CASES[] = {
    /* MQA (G 8 in one 16-row tile), S not a multiple of the tile or the split */
    {1, 1, 1000, 8, 1, 128, AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_MASK_NONE, 1, 0, TU_KEYS_RANDOM},
    /* GQA 7, T = 16 bottom-right (each token sees its own prefix; 112 packed rows), f16 Q, e5m2 */
    {2, 16, 777, 14, 2, 64, AT_DTYPE_F16, AT_DTYPE_E5M2, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* S shorter than one K/V tile, T = 3 (a partial token block) */
    {1, 3, 20, 8, 8, 128, AT_DTYPE_BF16, AT_DTYPE_E5M2, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* GQA 4, the serving shape, in (B, H, S, D) storage, no lse */
    {3, 1, 5000, 32, 8, 128, AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_MASK_NONE, 0, 1, TU_KEYS_RANDOM},
    /* D = 256 (Q re-read from shared memory), top-left */
    {1, 8, 2000, 16, 2, 256, AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_MASK_CAUSAL_TL, 1, 0, TU_KEYS_RANDOM},
    /* T = 16 GQA 4 (64 packed rows), S just past a multiple of 128 */
    {2, 16, 4099, 32, 8, 128, AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* D = 80: five FP8 chunks per row (the x2 tail of V), GQA 6, f16 Q with e4m3 */
    {1, 2, 3333, 12, 2, 80, AT_DTYPE_F16, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* D = 48, MHA: three chunks per row, bf16 Q with e5m2 */
    {2, 1, 1500, 4, 4, 48, AT_DTYPE_BF16, AT_DTYPE_E5M2, AT_MASK_NONE, 1, 0, TU_KEYS_RANDOM},
    /* .wg (the tiles widened into f16 by a warpgroup): 128 packed rows, S not a multiple of the tile */
    {2, 16, 1000, 32, 4, 128, AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* .wg: GQA 8 T 8 (64 rows), f16 Q with e5m2, (B, H, S, D) strides in the tensor maps */
    {1, 8, 2100, 24, 3, 128, AT_DTYPE_F16, AT_DTYPE_E5M2, AT_MASK_NONE, 0, 1, TU_KEYS_RANDOM},
    /* .wg: GQA 7, T 5 in a block of 8 (56 rows), bf16 Q with e5m2 */
    {1, 5, 333, 56, 8, 128, AT_DTYPE_BF16, AT_DTYPE_E5M2, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* .wgi and .wgi3 (64 rows, the tiles to two or three warpgroups in turn): S under one
     * tile, so the others have none and their partials must weigh nothing */
    {1, 8, 50, 16, 2, 128, AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* .wgi's speculative row max: keys whose scores rise tile after tile (its exact step again
     * and again), and one key at 7S/8 scoring 90 against the group's first row (P far past f16) */
    {2, 8, 3000, 32, 4, 128, AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RISING},
    {1, 16, 2500, 32, 8, 128, AT_DTYPE_F16, AT_DTYPE_E4M3, AT_MASK_NONE, 1, 0, TU_KEYS_SPIKE},
    /* .wgi with bf16 Q (Q K^T on the FP8 tensor cores, Q as two E4M3 parts): the spike, e5m2 K */
    {2, 8, 1900, 16, 2, 128, AT_DTYPE_BF16, AT_DTYPE_E5M2, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_SPIKE},
};

static at_strides strides_for(const kv8_case *c, int seq, int heads)
{
  if (!c->bhsd) return at_strides_bshd(seq, heads, c->d);
  at_strides st = {.batch = (int64_t)heads * seq * c->d, .seq = c->d, .head = (int64_t)seq * c->d};
  return st;
}

static at_shape shape_of(const kv8_case *c)
{
  return (at_shape){.batch = c->b, .q_len = c->t, .kv_len = c->s, .q_heads = c->nq, .kv_heads = c->nkv,
                    .head_dim = c->d, .dtype = c->q, .mask = c->mask, .with_lse = c->lse, .kv_dtype = c->kv};
}

/* Everything one case holds: inputs, device scalars, the reference. */
typedef struct kv8_data {
  const kv8_case *c;
  at_shape s;
  size_t nq, nkv, nlse;
  float *q;        /* host values of Q (already in its dtype) */
  CUdeviceptr dq;  /* Q in its dtype */
  tu_fp8_tensor k, v;
  CUdeviceptr dscal; /* fp32 descale_k, descale_v */
  at_tensors t;      /* q, k, v set; o and lse per run */
  double *ref_o, *ref_lse;
} kv8_data;

static void data_open(kv8_data *x, const kv8_case *c, int *failures)
{
  memset(x, 0, sizeof *x);
  x->c = c;
  x->s = shape_of(c);
  TU_OK(at_shape_check(&x->s));
  x->nq = (size_t)c->b * c->t * c->nq * c->d, x->nkv = (size_t)c->b * c->s * c->nkv * c->d;
  x->nlse = (size_t)c->b * c->nq * c->t;
  tn_rng rng = tn_rng_seeded(tu_next_seed());
  x->q = tu_random_tensor(&rng, c->q, x->nq);
  x->dq = tu_upload(c->q, x->q, x->nq);
  /* K as tu_fp8_tensor_make draws it, then shaped (random keys are left as drawn) */
  float *real = malloc(x->nkv * sizeof *real);
  assert_non_null(real);
  tn_rng_fill(&rng, real, x->nkv, -0.5f, 0.5f);
  assert_true(c->keys == TU_KEYS_RANDOM || !c->bhsd); /* tu_shape_keys reads and writes BSHD */
  tu_shape_keys(c->keys, real, x->q, c->b, c->t, c->s, c->nq, c->nkv, c->d);
  x->k = tu_fp8_tensor_from(real, c->kv, x->nkv);
  free(real);
  x->v = tu_fp8_tensor_make(&rng, c->kv, x->nkv, 2.0f);
  float scalars[2] = {x->k.descale, x->v.descale};
  x->dscal = tu_upload(AT_DTYPE_F32, scalars, 2);
  x->t.q_stride = x->t.o_stride = strides_for(c, c->t, c->nq);
  x->t.k_stride = x->t.v_stride = strides_for(c, c->s, c->nkv);
  x->t.q = (void *)(uintptr_t)x->dq, x->t.k = (void *)(uintptr_t)x->k.dev, x->t.v = (void *)(uintptr_t)x->v.dev;
  x->ref_o = malloc(x->nq * sizeof(double)), x->ref_lse = malloc(x->nlse * sizeof(double));
  assert_true(x->ref_o && x->ref_lse);

  /* Reference 1: the naive kernels for the FP8 K/V dtype with the descales (f32 out, lse). */
  at_shape sl = x->s;
  sl.with_lse = 1;
  CUdeviceptr o32 = tu_alloc_poisoned(x->nq * sizeof(float)), l32 = tu_alloc_poisoned(x->nlse * sizeof(float));
  CUdeviceptr scratch = tu_alloc_poisoned(rt_naive_scratch_bytes(&sl));
  rt_naive naive;
  TU_OK(rt_naive_create_kv(tu_gpu.arch, c->q, c->kv, AT_DTYPE_F32, &naive));
  at_tensors tr = x->t;
  tr.o = (void *)(uintptr_t)o32, tr.lse = (float *)(uintptr_t)l32;
  const float *d_descale_k = (const float *)(uintptr_t)x->dscal;
  rt_naive_descales ds = {NULL, d_descale_k, d_descale_k + 1};
  TU_OK(rt_naive_run_fp8(&naive, &sl, &tr, &ds, scratch, NULL));
  TU_OK(rt_ctx_sync(&tu_gpu));
  tu_download_f64(o32, x->nq, x->ref_o);
  tu_download_f64(l32, x->nlse, x->ref_lse);
  rt_naive_destroy(&naive);

  /* Reference 2: the naive f32 kernels on the host-dequantized values; must agree with 1. */
  TU_OK(rt_naive_create(tu_gpu.arch, AT_DTYPE_F32, AT_DTYPE_F32, &naive));
  CUdeviceptr fq = tu_upload(AT_DTYPE_F32, x->q, x->nq), fk = tu_upload(AT_DTYPE_F32, x->k.deq, x->nkv), fv = tu_upload(AT_DTYPE_F32, x->v.deq, x->nkv);
  at_shape s32 = sl;
  s32.dtype = AT_DTYPE_F32, s32.kv_dtype = AT_KV_SAME;
  tr.q = (void *)(uintptr_t)fq, tr.k = (void *)(uintptr_t)fk, tr.v = (void *)(uintptr_t)fv;
  TU_OK(rt_fill_u8(o32, 0xFF, x->nq * sizeof(float)));
  TU_OK(rt_naive_run(&naive, &s32, &tr, scratch, NULL));
  TU_OK(rt_ctx_sync(&tu_gpu));
  double *o2 = malloc(x->nq * sizeof(double)), *l2 = malloc(x->nlse * sizeof(double));
  float *tmp = malloc((x->nq > x->nlse ? x->nq : x->nlse) * sizeof(float));
  assert_true(o2 && l2 && tmp);
  tu_download_f64(o32, x->nq, o2);
  tu_download_f64(l32, x->nlse, l2);
  for (size_t i = 0; i < x->nq; i++) tmp[i] = (float)x->ref_o[i];
  tn_error e = tn_compare(o2, tmp, x->nq);
  for (size_t i = 0; i < x->nlse; i++) tmp[i] = (float)x->ref_lse[i];
  tn_error el = tn_compare_lse(l2, tmp, x->nlse);
  printf("    naive FP8-K/V path vs f32 on dequantized inputs: o %.2e, lse %.2e\n", e.rel_l2, el.rel_l2);
  if (e.n_nonfinite || !(e.rel_l2 < 1e-5) || el.n_nonfinite || !(el.rel_l2 < 1e-5)) {
    printf("    WRONG: the naive FP8-K/V path does not match the f32 path\n");
    (*failures)++;
  }
  free(o2), free(l2), free(tmp);
  rt_free(fq), rt_free(fk), rt_free(fv), rt_free(o32), rt_free(l32), rt_free(scratch);
  rt_naive_destroy(&naive);
}

static void data_close(kv8_data *x)
{
  rt_free(x->dq), rt_free(x->dscal);
  tu_fp8_tensor_free(&x->k), tu_fp8_tensor_free(&x->v);
  free(x->q), free(x->ref_o), free(x->ref_lse);
}

/* O (in Q's dtype) and lse of a run against the reference; prints and returns 1 when wrong. */
static int compare_run(const kv8_data *x, const char *name, CUdeviceptr dout, CUdeviceptr dlse, int print)
{
  float *got_o = malloc(x->nq * sizeof(float)), *got_lse = malloc(x->nlse * sizeof(float));
  assert_true(got_o && got_lse);
  tu_download(x->c->q, dout, x->nq, got_o);
  tn_error eo = tn_compare(x->ref_o, got_o, x->nq), el = {0, 0, 0, 0};
  if (x->c->lse) {
    TU_OK(rt_download(got_lse, dlse, x->nlse * sizeof(float)));
    el = tn_compare_lse(x->ref_lse, got_lse, x->nlse);
  }
  const double tol = at_dtype_tolerance(x->c->q);
  int ok = eo.n_nonfinite == 0 && eo.rel_l2 <= tol && el.n_nonfinite == 0 && el.rel_l2 < 1e-3;
  if (!ok)
    printf("    %s: WRONG o rel_l2 %.3e (tol %.0e; %zu non-finite, worst at %zu: %g vs %g), lse rel_l2 %.3e (%zu)\n",
           name, eo.rel_l2, tol, eo.n_nonfinite, eo.worst_index, got_o[eo.worst_index], x->ref_o[eo.worst_index],
           el.rel_l2, el.n_nonfinite);
  else if (print || getenv("ATTNTUNE_TEST_VERBOSE"))
    printf("    %s: o rel_l2 %.2e lse rel_l2 %.2e\n", name, eo.rel_l2, el.rel_l2);
  free(got_o), free(got_lse);
  return !ok;
}

typedef struct kv8_run {
  const kv8_data *x;
  CUdeviceptr dout, dlse;
} kv8_run;

static int check_variant(const rt_variant *lv, const char *key, int i, void *ctx)
{
  kv8_run *r = ctx;
  const kv8_data *x = r->x;
  if (lv->variant.family != GEN_FAMILY_DECODE) {
    printf("    %s: listed for an FP8 KV cache, but not a decode variant\n", key);
    return 1;
  }
  TU_OK(rt_fill_u8(r->dout, 0xFF, x->nq * at_dtype_size(x->c->q)));
  TU_OK(rt_fill_u8(r->dlse, 0xFF, x->nlse * sizeof(float)));
  CUdeviceptr scratch = tu_variant_scratch(&lv->variant, &x->s);
  at_tensors t = x->t;
  t.o = (void *)(uintptr_t)r->dout, t.lse = x->c->lse ? (float *)(uintptr_t)r->dlse : NULL;
  const float *d_descale_k = (const float *)(uintptr_t)x->dscal;
  rt_fp8_args fp8 = {NULL, d_descale_k, d_descale_k + 1, NULL, NULL};
  TU_OK(rt_variant_launch(lv, &x->s, &t, &fp8, scratch, NULL));
  TU_OK(rt_ctx_sync(&tu_gpu));
  tu_variant_scratch_done(&lv->variant, &x->s, scratch);
  return compare_run(x, key, r->dout, r->dlse, i == 0);
}

/* The 9-slot twin of each listed 6-slot .wgi3 variant (decode step 25), which is taken by key
 * but not listed, appended so that it is checked too; the new count. */
static int with_unlisted_wgi3(gen_variant *vs, int n, const gen_target *target)
{
  const int listed = n;
  for (int i = 0; i < listed && n < GEN_MAX_VARIANTS; i++) {
    if (vs[i].wg != 3 || vs[i].stages != 6) continue;
    vs[n] = vs[i], vs[n].stages = 9;
    TU_OK(gen_variant_check(&vs[n], target));
    n++;
  }
  return n;
}

static int check_case(const kv8_case *c)
{
  gen_target target;
  TU_OK(gen_target_make(tu_gpu.arch, tu_gpu.info.smem_per_block_optin, &target));
  int failures = 0;
  kv8_data x;
  static const char *const key_names[] = {"", " rising keys", " a spike key"};
  printf("  B%d T%d S%d Nq%d Nkv%d D%d %s Q, %s K/V %s%s%s%s\n", c->b, c->t, c->s, c->nq, c->nkv, c->d,
         at_dtype_name(c->q), at_dtype_name(c->kv), at_mask_name(c->mask), c->lse ? " lse" : "",
         c->bhsd ? " bhsd" : "", key_names[c->keys]);
  data_open(&x, c, &failures);
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0;
  TU_OK(gen_enumerate(&x.s, &target, vs, GEN_MAX_VARIANTS, &n));
  printf("    %d variants\n", n);
  assert_true(n > 0);
  n = with_unlisted_wgi3(vs, n, &target);
  kv8_run run = {.x = &x, .dout = tu_alloc_poisoned(x.nq * at_dtype_size(c->q)),
                 .dlse = tu_alloc_poisoned(x.nlse * sizeof(float))};
  failures += tu_check_variants(vs, n, &target, check_variant, &run);
  rt_free(run.dout), rt_free(run.dlse);
  data_close(&x);
  return failures;
}

static void test_fp8_kv_variants(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  int failures = 0;
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) failures += check_case(&CASES[i]);
  assert_int_equal(failures, 0);
}

/* One plan of the public API on x (BSHD cases only), run with the descales; 0 when right. */
static int run_plan(at_context *ctx, kv8_data *x, const char *impl, const char *want_prefix)
{
  at_plan *plan = NULL;
  at_plan_info info;
  at_plan_options opts = {impl};
  TU_OK(at_plan_create(ctx, &x->s, NULL, impl ? &opts : NULL, &plan));
  TU_OK(at_plan_describe(plan, &info));
  printf("    plan: %s (%s): %s\n", info.impl, at_choice_name(info.choice), info.reason);
  int bad = strncmp(info.impl, want_prefix, strlen(want_prefix)) != 0;
  if (bad) printf("    WRONG: expected an implementation starting with %s\n", want_prefix);
  CUdeviceptr dout = tu_alloc_poisoned(x->nq * at_dtype_size(x->c->q));
  CUdeviceptr dlse = tu_alloc_poisoned(x->nlse * sizeof(float));
  at_tensors t = x->t;
  t.o = (void *)(uintptr_t)dout, t.lse = x->c->lse ? (float *)(uintptr_t)dlse : NULL;
  /* FP8 K/V without descales: refused before any launch */
  assert_int_equal(at_plan_run(plan, &t, NULL, NULL), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "descale"));
  const float *d_descale_k = (const float *)(uintptr_t)x->dscal;
  at_fp8_args fp8 = {NULL, d_descale_k, d_descale_k + 1};
  TU_OK(at_plan_run(plan, &t, &fp8, NULL));
  TU_OK(at_synchronize(ctx));
  bad += compare_run(x, info.impl, dout, dlse, 1);
  rt_free(dout), rt_free(dlse);
  at_plan_destroy(plan);
  return bad;
}

static void test_fp8_kv_plans(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  at_context *ctx = NULL;
  TU_OK(at_context_create(0, NULL, 0, &ctx));
  int failures = 0;
  kv8_data x;
  /* T = 1 and T = 16: the generator's default is decode's FP8-K/V variant */
  const kv8_case decode_cases[] = {CASES[0], CASES[5]};
  for (int i = 0; i < 2; i++) {
    printf("  plan for B%d T%d S%d %s Q, %s K/V\n", decode_cases[i].b, decode_cases[i].t, decode_cases[i].s,
           at_dtype_name(decode_cases[i].q), at_dtype_name(decode_cases[i].kv));
    data_open(&x, &decode_cases[i], &failures);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "decode.%s.kv%s.", at_dtype_name(decode_cases[i].q),
             at_dtype_name(decode_cases[i].kv));
    failures += run_plan(ctx, &x, NULL, prefix);
    data_close(&x);
  }
  /* T = 40: no generated kernel and no cuDNN graph reads FP8 K/V: the naive kernels */
  const kv8_case long_q = {1, 40, 300, 8, 2, 64, AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM};
  printf("  plan for B1 T40 S300 bf16 Q, e4m3 K/V\n");
  data_open(&x, &long_q, &failures);
  failures += run_plan(ctx, &x, NULL, "naive");
  at_plan *plan = NULL;
  at_plan_options fused = {"fused"};
  assert_int_equal(at_plan_create(ctx, &x.s, NULL, &fused, &plan), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "runs on the decode family only, for queries of 1 to 16 tokens"));
  assert_null(plan);
  at_plan_options cudnn = {"cudnn"};
  assert_int_equal(at_plan_create(ctx, &x.s, NULL, &cudnn, &plan), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "one dtype"));
  data_close(&x);
  at_context_destroy(ctx);
  assert_int_equal(failures, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp8_kv_variants),
      cmocka_unit_test(test_fp8_kv_plans),
  };
  return TU_RUN_GROUP(tests, tu_gpu_setup, tu_gpu_teardown);
}
