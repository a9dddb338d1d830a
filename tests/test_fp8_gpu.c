/* test_fp8_gpu.c — FP8 (E4M3/E5M2) attention on the GPU (skips without one):
 *
 *   1. inputs: fresh random fp32 (never zeros; Q, K, V at different magnitudes so the descales
 *      matter), quantized per tensor with at_quantize_fp8; descale = 1 / scale;
 *   2. the naive reference's FP8 path (rt_naive_run_fp8 with the descales) against the naive f32
 *      path on the same values dequantized on the host (decode(code) * descale);
 *   3. every FP8 variant the generator lists for the shape (fa2, and fa3 on sm_90a; masks, GQA, odd
 *      sizes) against that
 *      reference: relative L2 <= 5e-2 for E4M3, <= 1e-1 for E5M2, NaN never passes, output poisoned
 *      (0xFF: NaN in every dtype) before each run; lse where asked; for FP8 output, O decoded with
 *      1 / scale_o, and amax_o against max |O_ref|; the variant's scratch (fa3 .vt: V^T, written by
 *      its first kernel) poisoned too, so that V^T's padding keys must be written as zeros;
 *   4. V in other layouts for the variants (the references read it contiguous): rows padded
 *      (seq stride > Nkv x D) and head-major [B, Nkv, S, D] strides, which .vt's transpose reads.
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
#include "generator/generator.h"
#include "tests/testutil.h"

/* How the variants get V (the references read it as BSHD, contiguous). */
typedef enum v_layout {
  V_BSHD = 0,   /* contiguous [B, S, Nkv, D] */
  V_PADDED = 1, /* [B, S, Nkv, D] with each key's row V_PAD bytes longer (seq stride Nkv D + V_PAD) */
  V_BHSD = 2,   /* head-major [B, Nkv, S, D] through the strides */
} v_layout;
enum { V_PAD = 48 };

typedef struct fp8_case {
  int b, t, s, nq, nkv, d;
  at_dtype dtype; /* e4m3 or e5m2 */
  at_mask mask;
  int lse;
  at_dtype out; /* bf16, f16, e4m3, e5m2 */
  v_layout v_layout;
  tu_keys keys; /* scores that move the row max late */
} fp8_case;

/* V's strides for layout l, in elements (bytes: FP8). */
static at_strides v_strides(const fp8_case *c, v_layout l)
{
  at_strides st = at_strides_bshd(c->s, c->nkv, c->d);
  if (l == V_PADDED) st.seq += V_PAD, st.batch = (long long)c->s * st.seq;
  if (l == V_BHSD) st.seq = c->d, st.head = (long long)c->s * c->d, st.batch = (long long)c->nkv * c->s * c->d;
  return st;
}

/* V's codes (contiguous BSHD) on the device in layout l, the bytes between rows poisoned (0xFF:
 * NaN in E4M3 and E5M2), or the contiguous tensor itself. *owned is what the caller frees. */
static CUdeviceptr v_in_layout(const fp8_case *c, const tu_fp8_tensor *v, v_layout l, CUdeviceptr *owned)
{
  *owned = 0;
  if (l == V_BSHD) return v->dev;
  const at_strides st = v_strides(c, l);
  const size_t bytes = (size_t)c->b * (size_t)st.batch;
  uint8_t *host = malloc(bytes);
  assert_non_null(host);
  memset(host, 0xFF, bytes);
  for (int b = 0; b < c->b; b++)
    for (int j = 0; j < c->s; j++)
      for (int h = 0; h < c->nkv; h++)
        memcpy(host + b * st.batch + j * st.seq + h * st.head, v->codes + (((size_t)b * c->s + j) * c->nkv + h) * c->d,
               (size_t)c->d);
  *owned = tu_alloc_poisoned(bytes);
  TU_OK(rt_upload(*owned, host, bytes));
  free(host);
  return *owned;
}

static double tolerance(at_dtype dtype) { return at_dtype_tolerance(dtype); }

/* Output of n elements of dtype as real values: FP8 codes decoded and multiplied by descale_o. */
static void download_out(at_dtype dtype, CUdeviceptr d, size_t n, float descale_o, float *out)
{
  tu_download(dtype, d, n, out);
  if (dtype == AT_DTYPE_E4M3 || dtype == AT_DTYPE_E5M2)
    for (size_t i = 0; i < n; i++) out[i] *= descale_o;
}

/* What one variant's run needs: the shape, its device buffers, the scales and the reference. */
typedef struct fp8_run {
  const fp8_case *c;
  const at_shape *s;
  const at_tensors *t;
  const rt_fp8_args *fp8;
  CUdeviceptr dout, dlse, d_amax;
  size_t nq, nlse;
  float scale_o;
  double tol, ref_amax;
  const double *ref_o, *ref_lse;
  float *got_o, *got_lse;
} fp8_run;

static int check_variant(const rt_variant *lv, const char *key, int i, void *ctx)
{
  fp8_run *r = ctx;
  const fp8_case *c = r->c;
  const int out_fp8 = c->out == AT_DTYPE_E4M3 || c->out == AT_DTYPE_E5M2;
  TU_OK(rt_fill_u8(r->dout, 0xFF, r->nq * at_dtype_size(c->out)));
  TU_OK(rt_fill_u8(r->dlse, 0xFF, r->nlse * sizeof(float)));
  TU_OK(rt_fill_u8(r->d_amax, 0xFF, sizeof(float)));
  CUdeviceptr scratch = tu_variant_scratch(&lv->variant, r->s);
  TU_OK(rt_variant_launch(lv, r->s, r->t, r->fp8, scratch, NULL));
  TU_OK(rt_ctx_sync(&tu_gpu));
  tu_variant_scratch_done(&lv->variant, r->s, scratch);
  download_out(c->out, r->dout, r->nq, 1.0f / r->scale_o, r->got_o);
  tn_error eo = tn_compare(r->ref_o, r->got_o, r->nq);
  tn_error el = {0};
  if (c->lse) {
    TU_OK(rt_download(r->got_lse, r->dlse, r->nlse * sizeof(float)));
    el = tn_compare_lse(r->ref_lse, r->got_lse, r->nlse);
  }
  float amax = 0.f;
  double amax_err = 0.0;
  if (out_fp8) {
    TU_OK(rt_download(&amax, r->d_amax, sizeof amax));
    amax_err = r->ref_amax > 0 ? fabs(amax - r->ref_amax) / r->ref_amax : fabs(amax);
  }
  /* The spike's key is some 90 / |q| times longer than the others, and the FP8 tensor cores sum
   * Q K^T in less than fp32 precision: every kernel, fa3's in-CTA one included, read the lse of one
   * seed's D 256 spike case 1.003e-3 off, and another seed's 6.9e-4 (the same to four digits in
   * all of them, which share the order of the sum over d); random keys give 1e-7 to 6e-6. */
  const double lse_tol = c->keys == TU_KEYS_SPIKE ? 3e-3 : 1e-3;
  int ok = eo.n_nonfinite == 0 && eo.rel_l2 <= r->tol && el.n_nonfinite == 0 && el.rel_l2 < lse_tol &&
           (!out_fp8 || (isfinite(amax) && amax_err <= 2 * tolerance(c->dtype)));
  if (!ok) {
    printf("    %s: WRONG o rel_l2 %.3e (tol %.0e; %zu non-finite, worst at %zu: %g vs %g), lse rel_l2 "
           "%.3e (%zu)",
           key, eo.rel_l2, r->tol, eo.n_nonfinite, eo.worst_index, r->got_o[eo.worst_index],
           r->ref_o[eo.worst_index], el.rel_l2, el.n_nonfinite);
    if (out_fp8) printf(", amax %g vs %g", amax, r->ref_amax);
    printf("\n");
    return 1;
  }
  if (i == 0 || getenv("ATTNTUNE_TEST_VERBOSE")) {
    printf("    %s: o rel_l2 %.2e lse rel_l2 %.2e", key, eo.rel_l2, el.rel_l2);
    if (out_fp8) printf(" amax %g (ref %g)", amax, r->ref_amax);
    printf("\n");
  }
  return 0;
}

static int check_case(const fp8_case *c)
{
  gen_target target;
  TU_OK(gen_target_make(tu_gpu.arch, tu_gpu.info.smem_per_block_optin, &target));
  at_shape s = {.batch = c->b, .q_len = c->t, .kv_len = c->s, .q_heads = c->nq, .kv_heads = c->nkv,
                .head_dim = c->d, .dtype = c->dtype, .mask = c->mask, .with_lse = c->lse};
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0, failures = 0;
  at_status rc = gen_enumerate_out(&s, c->out, &target, vs, GEN_MAX_VARIANTS, &n);
  static const char *const layouts[] = {"", " V rows padded", " V head-major"};
  static const char *const keys[] = {"", " rising keys", " rising keys, a spike", " rising keys, a spike of 1e7"};
  printf("  B%d T%d S%d Nq%d Nkv%d D%d %s->%s %s%s%s%s: ", c->b, c->t, c->s, c->nq, c->nkv, c->d,
         at_dtype_name(c->dtype), at_dtype_name(c->out), at_mask_name(c->mask), c->lse ? " lse" : "",
         layouts[c->v_layout], keys[c->keys]);
  if (rc == AT_ERR_UNSUPPORTED) {
    /* e.g. D=256 on sm_89, where no fa2 FP8 tile fits the registers and fa3 (sm_90a) is not there */
    printf("no variants on %s: %s\n", target.arch, at_last_error());
    return 0;
  }
  TU_OK(rc);
  printf("%d variants\n", n);

  tn_rng rng = tu_rng();
  size_t nq = (size_t)c->b * c->t * c->nq * c->d, nkv = (size_t)c->b * c->s * c->nkv * c->d;
  size_t nlse = (size_t)c->b * c->nq * c->t;
  tu_fp8_tensor q = tu_fp8_tensor_make(&rng, c->dtype, nq, 3.0f), k;
  if (c->keys == TU_KEYS_RANDOM) {
    k = tu_fp8_tensor_make(&rng, c->dtype, nkv, 0.5f);
  } else {
    float *real = malloc(nkv * sizeof *real);
    assert_non_null(real);
    tn_rng_fill(&rng, real, nkv, -0.5f, 0.5f);
    tu_shape_keys(c->keys, real, q.deq, c->b, c->t, c->s, c->nq, c->nkv, c->d);
    k = tu_fp8_tensor_from(real, c->dtype, nkv);
    free(real);
  }
  tu_fp8_tensor v = tu_fp8_tensor_make(&rng, c->dtype, nkv, 2.0f);

  at_tensors t = {0};
  t.q_stride = t.o_stride = at_strides_bshd(c->t, c->nq, c->d);
  t.k_stride = t.v_stride = at_strides_bshd(c->s, c->nkv, c->d);

  /* Device scalars: descale q, k, v; scale_o; amax_o. */
  float scalars[5] = {q.descale, k.descale, v.descale, 1.0f, NAN};
  CUdeviceptr dscal = tu_upload(AT_DTYPE_F32, scalars, 5);
  const float *d_descale_q = (const float *)(uintptr_t)dscal, *d_descale_k = d_descale_q + 1;
  const float *d_descale_v = d_descale_q + 2;
  float *d_scale_o = (float *)(uintptr_t)dscal + 3, *d_amax = (float *)(uintptr_t)dscal + 4;

  /* Reference 1: the naive FP8 path with descales (f32 out, lse). */
  double *ref_o = malloc(nq * sizeof(double)), *ref_lse = malloc(nlse * sizeof(double));
  double *ref32_o = malloc(nq * sizeof(double)), *ref32_lse = malloc(nlse * sizeof(double));
  float *got_o = malloc(nq * sizeof(float)), *got_lse = malloc(nlse * sizeof(float));
  assert_true(ref_o && ref_lse && ref32_o && ref32_lse && got_o && got_lse);
  CUdeviceptr o32 = tu_alloc_poisoned(nq * sizeof(float)), l32 = tu_alloc_poisoned(nlse * sizeof(float));
  at_shape sl = s;
  sl.with_lse = 1;
  CUdeviceptr scratch = tu_alloc_poisoned(rt_naive_scratch_bytes(&sl));
  {
    rt_naive naive;
    TU_OK(rt_naive_create(tu_gpu.arch, c->dtype, AT_DTYPE_F32, &naive));
    at_tensors tr = t;
    tr.q = (void *)(uintptr_t)q.dev, tr.k = (void *)(uintptr_t)k.dev, tr.v = (void *)(uintptr_t)v.dev;
    tr.o = (void *)(uintptr_t)o32, tr.lse = (float *)(uintptr_t)l32;
    rt_naive_descales ds = {d_descale_q, d_descale_k, d_descale_v};
    TU_OK(rt_naive_run_fp8(&naive, &sl, &tr, &ds, scratch, NULL));
    TU_OK(rt_ctx_sync(&tu_gpu));
    tu_download_f64(o32, nq, ref_o);
    tu_download_f64(l32, nlse, ref_lse);
    rt_naive_destroy(&naive);
  }
  /* Reference 2: the naive f32 path on the host-dequantized values; must agree with 1. */
  {
    rt_naive naive;
    TU_OK(rt_naive_create(tu_gpu.arch, AT_DTYPE_F32, AT_DTYPE_F32, &naive));
    CUdeviceptr fq = tu_upload(AT_DTYPE_F32, q.deq, nq), fk = tu_upload(AT_DTYPE_F32, k.deq, nkv), fv = tu_upload(AT_DTYPE_F32, v.deq, nkv);
    at_shape s32 = sl;
    s32.dtype = AT_DTYPE_F32;
    at_tensors tr = t;
    tr.q = (void *)(uintptr_t)fq, tr.k = (void *)(uintptr_t)fk, tr.v = (void *)(uintptr_t)fv;
    tr.o = (void *)(uintptr_t)o32, tr.lse = (float *)(uintptr_t)l32;
    TU_OK(rt_fill_u8(o32, 0xFF, nq * sizeof(float)));
    TU_OK(rt_naive_run(&naive, &s32, &tr, scratch, NULL));
    TU_OK(rt_ctx_sync(&tu_gpu));
    tu_download_f64(o32, nq, ref32_o);
    tu_download_f64(l32, nlse, ref32_lse);
    rt_free(fq), rt_free(fk), rt_free(fv);
    rt_naive_destroy(&naive);
    float *tmp = malloc(nq * sizeof(float));
    assert_non_null(tmp);
    for (size_t i = 0; i < nq; i++) tmp[i] = (float)ref_o[i];
    tn_error e = tn_compare(ref32_o, tmp, nq);
    for (size_t i = 0; i < nlse; i++) tmp[i] = (float)ref_lse[i];
    tn_error el = tn_compare_lse(ref32_lse, tmp, nlse);
    free(tmp);
    printf("    naive fp8 path vs f32 on dequantized inputs: o %.2e, lse %.2e\n", e.rel_l2, el.rel_l2);
    if (e.n_nonfinite || !(e.rel_l2 < 1e-5) || el.n_nonfinite || !(el.rel_l2 < 1e-5)) {
      printf("    WRONG: the naive FP8 path does not match the f32 path\n");
      failures++;
    }
  }

  /* FP8 output: scale_o from the reference's amax with headroom (as a previous step's amax would). */
  double ref_amax = 0.0;
  for (size_t i = 0; i < nq; i++)
    if (isfinite(ref_o[i]) && fabs(ref_o[i]) > ref_amax) ref_amax = fabs(ref_o[i]);
  const int out_fp8 = c->out == AT_DTYPE_E4M3 || c->out == AT_DTYPE_E5M2;
  float scale_o = 1.0f;
  if (out_fp8 && ref_amax > 0) scale_o = at_fp8_max(c->out) / (float)(1.25 * ref_amax);
  TU_OK(rt_upload((CUdeviceptr)(uintptr_t)d_scale_o, &scale_o, sizeof scale_o));

  CUdeviceptr dout = tu_alloc_poisoned(nq * at_dtype_size(c->out));
  CUdeviceptr dlse = tu_alloc_poisoned(nlse * sizeof(float));
  CUdeviceptr v_owned = 0;
  t.q = (void *)(uintptr_t)q.dev, t.k = (void *)(uintptr_t)k.dev;
  t.v = (void *)(uintptr_t)v_in_layout(c, &v, c->v_layout, &v_owned);
  t.v_stride = v_strides(c, c->v_layout);
  t.o = (void *)(uintptr_t)dout, t.lse = c->lse ? (float *)(uintptr_t)dlse : NULL;
  rt_fp8_args fp8 = {d_descale_q, d_descale_k, d_descale_v, d_scale_o, d_amax};

  /* The input format's tolerance, or the output's if that is the coarser FP8 format. */
  const double tol = out_fp8 && tolerance(c->out) > tolerance(c->dtype) ? tolerance(c->out) : tolerance(c->dtype);
  fp8_run run = {.c = c, .s = &s, .t = &t, .fp8 = &fp8, .dout = dout, .dlse = dlse,
                 .d_amax = (CUdeviceptr)(uintptr_t)d_amax, .nq = nq, .nlse = nlse, .scale_o = scale_o,
                 .tol = tol, .ref_amax = ref_amax, .ref_o = ref_o, .ref_lse = ref_lse, .got_o = got_o,
                 .got_lse = got_lse};
  failures += tu_check_variants(vs, n, &target, check_variant, &run);
  rt_free(dout), rt_free(dlse), rt_free(dscal), rt_free(o32), rt_free(l32), rt_free(scratch), rt_free(v_owned);
  tu_fp8_tensor_free(&q), tu_fp8_tensor_free(&k), tu_fp8_tensor_free(&v);
  free(ref_o), free(ref_lse), free(ref32_o), free(ref32_lse), free(got_o), free(got_lse);
  return failures;
}

static const fp8_case CASES[] = {
    /* odd lengths, D = 80 (Q K^T padded to 96), GQA 6, every mask, with lse */
    {2, 77, 1000, 12, 2, 80, AT_DTYPE_E4M3, AT_MASK_NONE, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {2, 77, 1000, 12, 2, 80, AT_DTYPE_E5M2, AT_MASK_CAUSAL_TL, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {2, 77, 1000, 12, 2, 80, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    /* T > S bottom-right: the first rows see no key (o = 0, lse = -inf) */
    {1, 300, 77, 4, 4, 64, AT_DTYPE_E5M2, AT_MASK_CAUSAL_BR, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    /* GQA 4 and MQA, D 128 */
    {2, 256, 256, 8, 2, 128, AT_DTYPE_E4M3, AT_MASK_CAUSAL_TL, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {1, 200, 333, 8, 1, 128, AT_DTYPE_E5M2, AT_MASK_NONE, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    /* D 48 (Q K^T padded to 64), D 256 (fa3 only on sm_90a: no fa2 FP8 tile fits its registers) */
    {1, 65, 130, 4, 4, 48, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {1, 129, 129, 4, 2, 256, AT_DTYPE_E4M3, AT_MASK_CAUSAL_TL, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {2, 190, 333, 6, 3, 256, AT_DTYPE_E5M2, AT_MASK_NONE, 1, AT_DTYPE_F16, V_BSHD, TU_KEYS_RANDOM},
    /* fa3's tiles: rows and keys past a whole tile at D 64 and 128, causal, both formats */
    {3, 333, 333, 4, 4, 64, AT_DTYPE_E4M3, AT_MASK_CAUSAL_TL, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {1, 191, 517, 16, 2, 128, AT_DTYPE_E5M2, AT_MASK_CAUSAL_BR, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    /* other outputs: f16, and FP8 with scale_o and amax_o */
    {1, 77, 1000, 8, 2, 128, AT_DTYPE_E4M3, AT_MASK_NONE, 0, AT_DTYPE_F16, V_BSHD, TU_KEYS_RANDOM},
    {2, 77, 1000, 12, 2, 80, AT_DTYPE_E4M3, AT_MASK_CAUSAL_TL, 1, AT_DTYPE_E4M3, V_BSHD, TU_KEYS_RANDOM},
    {1, 200, 333, 8, 2, 64, AT_DTYPE_E5M2, AT_MASK_NONE, 0, AT_DTYPE_E5M2, V_BSHD, TU_KEYS_RANDOM},
    /* fa3 .vt (V^T ahead, D 128 and 256): S under one 32-key group, S not a multiple of 32 nor of
     * any block_n (64, 128, 192), T != S both ways, every mask, GQA, lse, both formats */
    {1, 100, 45, 4, 2, 128, AT_DTYPE_E4M3, AT_MASK_NONE, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {2, 250, 1001, 8, 2, 128, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {1, 515, 203, 6, 6, 128, AT_DTYPE_E5M2, AT_MASK_CAUSAL_TL, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {2, 130, 450, 4, 1, 256, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {1, 333, 321, 4, 4, 256, AT_DTYPE_E5M2, AT_MASK_NONE, 0, AT_DTYPE_F16, V_BSHD, TU_KEYS_RANDOM},
    /* V through other strides (the transpose's reads; the in-CTA and TMA loaders' too) */
    {2, 200, 383, 8, 2, 128, AT_DTYPE_E4M3, AT_MASK_NONE, 1, AT_DTYPE_BF16, V_PADDED, TU_KEYS_RANDOM},
    {1, 190, 517, 4, 2, 128, AT_DTYPE_E5M2, AT_MASK_CAUSAL_TL, 0, AT_DTYPE_BF16, V_BHSD, TU_KEYS_RANDOM},
    {2, 97, 300, 4, 4, 256, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, AT_DTYPE_BF16, V_BHSD, TU_KEYS_RANDOM},
    {1, 77, 1000, 12, 2, 80, AT_DTYPE_E4M3, AT_MASK_NONE, 0, AT_DTYPE_BF16, V_PADDED, TU_KEYS_RANDOM},
    /* fa3's speculative row max: a max that rises tile after tile (P rescaled after the
     * exponentials), and one score far above the rest late in the row (S recomputed); D 128
     * with and without lse (the row sums of the tensor cores, and the exact ones) */
    {1, 200, 2000, 8, 2, 128, AT_DTYPE_E4M3, AT_MASK_NONE, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RISING},
    {1, 200, 2000, 8, 2, 128, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_SPIKE},
    {1, 150, 1500, 4, 4, 128, AT_DTYPE_E5M2, AT_MASK_NONE, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_SPIKE},
    {1, 129, 900, 4, 2, 256, AT_DTYPE_E4M3, AT_MASK_NONE, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_SPIKE},
    {1, 150, 1200, 4, 2, 256, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RISING},
    /* fa3's tail split (.tw<SMs>) with whole work tiles before the pieces (192x96 .vt: 192 tiles,
     * 132 whole and the last 60 in two pieces), with lse */
    {1, 1000, 4000, 32, 8, 128, AT_DTYPE_E4M3, AT_MASK_NONE, 1, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    /* fa3 .vt at D 64 (rows of 64 bytes: TMA boxes and swizzle of 64): GQA, lse (the exact row
     * sums), V through BHSD strides into the one-piece transpose; and without lse (the tensor
     * cores' row sums and linear P) its tail split (192x128: 6 query blocks x 32 heads = 192
     * tiles, the last 60 in pieces), and a spike late in the row */
    {2, 250, 1001, 8, 2, 64, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 1, AT_DTYPE_BF16, V_BHSD, TU_KEYS_RANDOM},
    {1, 1000, 4000, 32, 8, 64, AT_DTYPE_E5M2, AT_MASK_NONE, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RANDOM},
    {1, 200, 2000, 8, 2, 64, AT_DTYPE_E4M3, AT_MASK_NONE, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_SPIKE},
    /* scores some 1e6 octaves apart: past linear P's reference range (the exact path takes them) */
    {1, 200, 2000, 8, 2, 128, AT_DTYPE_E4M3, AT_MASK_NONE, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_HUGE},
    /* the same at D 64, whose three-consumer tiles run linear P too (v33) */
    {1, 200, 2000, 8, 2, 64, AT_DTYPE_E4M3, AT_MASK_NONE, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_HUGE},
    /* and a rising max at D 64: the shift of its codes, linear pairs beside exact ones (v39) */
    {1, 200, 2000, 8, 2, 64, AT_DTYPE_E4M3, AT_MASK_NONE, 0, AT_DTYPE_BF16, V_BSHD, TU_KEYS_RISING},
};

static void test_fp8_variants(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  gen_target target;
  TU_OK(gen_target_make(tu_gpu.arch, tu_gpu.info.smem_per_block_optin, &target));
  if (!gen_target_has_fp8(&target)) {
    printf("  %s has no FP8 MMA (sm_89 or newer needed)\n", target.arch);
    skip();
  }
  int failures = 0;
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) failures += check_case(&CASES[i]);
  assert_int_equal(failures, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp8_variants),
  };
  return TU_RUN_GROUP(tests, tu_gpu_setup, tu_gpu_teardown);
}
