/* test_fa2_gpu.c — every listed 16-bit variant (fa2, fa3 on sm_90a, its warp-specialized and
 * persistent and tail-split forms included, decode for T <= 16) against the naive reference on awkward shapes
 * (skips without a GPU). Outputs and the split-KV scratch are poisoned (0xFF bytes: NaN) before
 * each run; inputs are fresh random values per case; NaN never passes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/generator.h"
#include "tests/testutil.h"

typedef struct fa2_case {
  int b, t, s, nq, nkv, d;
  at_dtype dtype;
  at_mask mask;
  int lse;
  int bhsd; /* Q, K, V, O stored (B, H, S, D) and described by strides */
  tu_keys keys; /* scores that move the row max late (BSHD only) */
} fa2_case;

static at_strides strides_for(const fa2_case *c, int seq, int heads)
{
  if (!c->bhsd) return at_strides_bshd(seq, heads, c->d);
  at_strides st = {.batch = (int64_t)heads * seq * c->d, .seq = c->d, .head = (int64_t)seq * c->d};
  return st;
}

/* The naive kernels with fp32 output: reference O and lse, widened to double. */
static void reference(const fa2_case *c, const at_shape *s, const at_tensors *t, double *o, double *lse)
{
  size_t nq = (size_t)c->b * c->t * c->nq * c->d, nlse = (size_t)c->b * c->nq * c->t;
  rt_naive naive;
  TU_OK(rt_naive_create(tu_gpu.arch, c->dtype, AT_DTYPE_F32, &naive));
  CUdeviceptr o32 = tu_alloc_poisoned(nq * sizeof(float)), l32 = tu_alloc_poisoned(nlse * sizeof(float));
  CUdeviceptr scratch = tu_alloc_poisoned(rt_naive_scratch_bytes(s));
  at_shape sl = *s;
  sl.with_lse = 1;
  at_tensors tr = *t;
  tr.o = (void *)(uintptr_t)o32, tr.lse = (float *)(uintptr_t)l32;
  TU_OK(rt_naive_run(&naive, &sl, &tr, scratch, NULL));
  TU_OK(rt_ctx_sync(&tu_gpu));
  float *host = malloc((nq > nlse ? nq : nlse) * sizeof(float));
  assert_non_null(host);
  TU_OK(rt_download(host, o32, nq * sizeof(float)));
  for (size_t i = 0; i < nq; i++) o[i] = host[i];
  TU_OK(rt_download(host, l32, nlse * sizeof(float)));
  for (size_t i = 0; i < nlse; i++) lse[i] = host[i];
  free(host);
  rt_free(o32), rt_free(l32), rt_free(scratch);
  rt_naive_destroy(&naive);
}

/* What one variant's run needs: the shape, its device buffers and the reference. */
typedef struct fa2_run {
  const fa2_case *c;
  const at_shape *s;
  const at_tensors *t;
  CUdeviceptr dout, dlse;
  size_t nq, nlse;
  const double *ref_o, *ref_lse;
  float *got_o, *got_lse;
} fa2_run;

static int check_variant(const rt_variant *lv, const char *key, int i, void *ctx)
{
  fa2_run *r = ctx;
  const fa2_case *c = r->c;
  TU_OK(rt_fill_u8(r->dout, 0xFF, r->nq * at_dtype_size(c->dtype)));
  TU_OK(rt_fill_u8(r->dlse, 0xFF, r->nlse * sizeof(float)));
  CUdeviceptr scratch = tu_variant_scratch(&lv->variant, r->s);
  TU_OK(rt_variant_launch(lv, r->s, r->t, NULL, scratch, NULL));
  TU_OK(rt_ctx_sync(&tu_gpu));
  tu_variant_scratch_done(&lv->variant, r->s, scratch);
  tu_download(c->dtype, r->dout, r->nq, r->got_o);
  tn_error eo = tn_compare(r->ref_o, r->got_o, r->nq);
  tn_error el = {0};
  if (c->lse) {
    TU_OK(rt_download(r->got_lse, r->dlse, r->nlse * sizeof(float)));
    el = tn_compare_lse(r->ref_lse, r->got_lse, r->nlse);
  }
  int ok = eo.n_nonfinite == 0 && eo.rel_l2 < 1e-2 && el.n_nonfinite == 0 && el.rel_l2 < 1e-2;
  if (!ok) {
    printf("    %s: WRONG o rel_l2 %.3e (%zu non-finite, worst at %zu: %g vs %g), lse rel_l2 %.3e (%zu)\n",
           key, eo.rel_l2, eo.n_nonfinite, eo.worst_index, r->got_o[eo.worst_index],
           r->ref_o[eo.worst_index], el.rel_l2, el.n_nonfinite);
    return 1;
  }
  if (i == 0 || getenv("ATTNTUNE_TEST_VERBOSE"))
    printf("    %s: o rel_l2 %.2e lse rel_l2 %.2e\n", key, eo.rel_l2, el.rel_l2);
  return 0;
}

static int check_case(const fa2_case *c)
{
  gen_target target;
  TU_OK(gen_target_make(tu_gpu.arch, tu_gpu.info.smem_per_block_optin, &target));
  at_shape s = {.batch = c->b, .q_len = c->t, .kv_len = c->s, .q_heads = c->nq, .kv_heads = c->nkv,
                .head_dim = c->d, .dtype = c->dtype, .mask = c->mask, .with_lse = c->lse};
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0, failures = 0;
  TU_OK(gen_enumerate(&s, &target, vs, GEN_MAX_VARIANTS, &n));

  tn_rng rng = tu_rng();
  size_t nq = (size_t)c->b * c->t * c->nq * c->d, nkv = (size_t)c->b * c->s * c->nkv * c->d;
  size_t nlse = (size_t)c->b * c->nq * c->t;
  float *q = tu_random_tensor(&rng, c->dtype, nq), *k = tu_random_tensor(&rng, c->dtype, nkv);
  float *v = tu_random_tensor(&rng, c->dtype, nkv);
  assert_true(c->keys == TU_KEYS_RANDOM || !c->bhsd);
  tu_shape_keys(c->keys, k, q, c->b, c->t, c->s, c->nq, c->nkv, c->d);
  double *ref_o = malloc(nq * sizeof(double)), *ref_lse = malloc(nlse * sizeof(double));
  float *got_o = malloc(nq * sizeof(float)), *got_lse = malloc(nlse * sizeof(float));
  assert_true(ref_o && ref_lse && got_o && got_lse);

  at_tensors t = {0};
  t.q_stride = t.o_stride = strides_for(c, c->t, c->nq);
  t.k_stride = t.v_stride = strides_for(c, c->s, c->nkv);
  CUdeviceptr dq = tu_upload(c->dtype, q, nq), dk = tu_upload(c->dtype, k, nkv), dv = tu_upload(c->dtype, v, nkv);
  CUdeviceptr dout = tu_alloc_poisoned(nq * at_dtype_size(c->dtype));
  CUdeviceptr dlse = tu_alloc_poisoned(nlse * sizeof(float));
  t.q = (void *)(uintptr_t)dq, t.k = (void *)(uintptr_t)dk, t.v = (void *)(uintptr_t)dv;
  t.o = (void *)(uintptr_t)dout, t.lse = c->lse ? (float *)(uintptr_t)dlse : NULL;
  reference(c, &s, &t, ref_o, ref_lse);

  static const char *const keys[] = {"", " rising keys", " rising keys, a spike"};
  printf("  B%d T%d S%d Nq%d Nkv%d D%d %s %s%s%s%s: %d variants\n", c->b, c->t, c->s, c->nq, c->nkv, c->d,
         at_dtype_name(c->dtype), at_mask_name(c->mask), c->lse ? " lse" : "", c->bhsd ? " bhsd" : "",
         keys[c->keys], n);
  fa2_run run = {.c = c, .s = &s, .t = &t, .dout = dout, .dlse = dlse, .nq = nq, .nlse = nlse,
                 .ref_o = ref_o, .ref_lse = ref_lse, .got_o = got_o, .got_lse = got_lse};
  failures += tu_check_variants(vs, n, &target, check_variant, &run);
  rt_free(dq), rt_free(dk), rt_free(dv), rt_free(dout), rt_free(dlse);
  free(q), free(k), free(v), free(ref_o), free(ref_lse), free(got_o), free(got_lse);
  return failures;
}

static const fa2_case CASES[] = {
    /* odd lengths, D = 80 (padded to 96 for the MMAs), GQA 6, every mask, with lse */
    {2, 77, 1000, 12, 2, 80, AT_DTYPE_BF16, AT_MASK_NONE, 1, 0, TU_KEYS_RANDOM},
    {2, 77, 1000, 12, 2, 80, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL, 1, 0, TU_KEYS_RANDOM},
    {2, 77, 1000, 12, 2, 80, AT_DTYPE_F16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* T > S bottom-right: the first rows see no key (o = 0, lse = -inf) */
    {1, 300, 77, 4, 4, 64, AT_DTYPE_F16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* MQA, strided (B, H, S, D) storage */
    {2, 256, 256, 8, 1, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL, 0, 1, TU_KEYS_RANDOM},
    {1, 200, 333, 8, 2, 256, AT_DTYPE_BF16, AT_MASK_NONE, 1, 0, TU_KEYS_RANDOM},
    {1, 333, 200, 4, 2, 96, AT_DTYPE_F16, AT_MASK_CAUSAL_TL, 1, 0, TU_KEYS_RANDOM},
    {1, 65, 130, 4, 4, 40, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    {1, 1, 1000, 8, 8, 160, AT_DTYPE_F16, AT_MASK_NONE, 1, 0, TU_KEYS_RANDOM},
    {1, 129, 129, 2, 2, 192, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL, 1, 1, TU_KEYS_RANDOM},
    /* decode (T <= 16): MQA, S not a multiple of the tile or of the split */
    {1, 1, 1000, 8, 1, 128, AT_DTYPE_BF16, AT_MASK_NONE, 1, 0, TU_KEYS_RANDOM},
    /* GQA 7, T = 16 bottom-right (each token sees its own prefix), f16 */
    {2, 16, 777, 14, 2, 64, AT_DTYPE_F16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* S shorter than one K/V tile, T = 3 (a partial token block) */
    {1, 3, 20, 8, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* GQA 4 in (B, H, S, D) storage, no lse; D = 256 top-left */
    {3, 1, 5000, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE, 0, 1, TU_KEYS_RANDOM},
    {1, 8, 2000, 16, 2, 256, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL, 1, 0, TU_KEYS_RANDOM},
    /* decode's wgmma rows (.wg, more than 32 packed rows): 128 rows in two warpgroups with S off
     * the tiles; 64 rows of which 16 are tokens past T, in (B, H, S, D) storage; 56 rows (GQA 7)
     * at D = 64, top-left */
    {2, 16, 1000, 32, 4, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    {3, 12, 700, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE, 0, 1, TU_KEYS_RANDOM},
    {1, 5, 333, 28, 4, 64, AT_DTYPE_F16, AT_MASK_CAUSAL_TL, 1, 0, TU_KEYS_RANDOM},
    /* .wg at 64 rows with one K/V tile (S < the tile) */
    {1, 8, 50, 16, 2, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* the in-kernel merges (.lc, .cl: listed for small grids): GQA 7, T = 2 bottom-right, (B, H,
     * S, D) storage, and 9 or 18 tiles over 8 splits, so some of a cluster's splits are empty */
    {1, 2, 1100, 14, 2, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, 1, TU_KEYS_RANDOM},
    /* Persistent fa3 (.pers) with more work tiles (B x Nq x query blocks: 168 to 512) than the
     * H200's 132 SMs, so CTAs walk two to four each and the K/V ring, Q's phase and the ping-pong
     * carry across work tiles; T and S off the tiles, GQA 4 and 6, both causal masks, lse */
    {2, 1000, 1000, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL, 1, 0, TU_KEYS_RANDOM},
    {3, 333, 1000, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    {1, 777, 900, 24, 4, 192, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, 1, TU_KEYS_RANDOM},
    /* fa3's causal order in groups of heads whose K/V fit 16 MB (v44): 16 K/V heads of 2.3 MB (B2
     * Nkv 8, S 4500, D 128) in 4 groups of 4, GQA 2 keeping a K/V head's q heads in one group;
     * D 256 top-left, 8 K/V heads of 3.1 MB in 2 groups */
    {2, 600, 4500, 16, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    {1, 300, 3000, 8, 8, 256, AT_DTYPE_F16, AT_MASK_CAUSAL_TL, 0, 0, TU_KEYS_RANDOM},
    /* T > S bottom-right, GQA 3: work tiles without keys among the ones a CTA walks */
    {2, 700, 300, 24, 8, 64, AT_DTYPE_F16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RANDOM},
    /* fa3's speculative row max: a max that rises tile after tile (P rescaled after the
     * exponentials), and one score far above the rest late in the row (S recomputed) */
    {1, 200, 2000, 8, 2, 128, AT_DTYPE_BF16, AT_MASK_NONE, 1, 0, TU_KEYS_RISING},
    {1, 200, 2000, 8, 2, 128, AT_DTYPE_F16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_SPIKE},
    {2, 300, 1100, 4, 1, 64, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_SPIKE},
    {1, 129, 900, 4, 2, 256, AT_DTYPE_BF16, AT_MASK_NONE, 0, 0, TU_KEYS_SPIKE},
    {1, 150, 1200, 4, 2, 256, AT_DTYPE_F16, AT_MASK_CAUSAL_BR, 1, 0, TU_KEYS_RISING},
    /* No mask: T off the query blocks (333 rows: 3 of 128, 2 of 192); D 64 in (B, H, S, D)
     * storage; D 96 (fa3 warp-specialized only, padded to 128 columns) and S off the tiles */
    {2, 333, 1000, 8, 2, 128, AT_DTYPE_BF16, AT_MASK_NONE, 1, 0, TU_KEYS_RANDOM},
    {1, 450, 700, 4, 4, 64, AT_DTYPE_F16, AT_MASK_NONE, 1, 1, TU_KEYS_RANDOM},
    {1, 500, 611, 6, 3, 96, AT_DTYPE_F16, AT_MASK_NONE, 0, 0, TU_KEYS_RANDOM},
    /* fa3's tail split (.tw<SMs>) with whole work tiles before the pieces: 192 tiles of 192 rows
     * (T off the tile), 132 whole and the last 60 in two pieces each; lse; (B, H, S, D) storage.
     * The shorter shapes above split every tile of their one partial wave. */
    {1, 1000, 4000, 32, 8, 64, AT_DTYPE_BF16, AT_MASK_NONE, 1, 0, TU_KEYS_RANDOM},
    {1, 1000, 4000, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE, 0, 1, TU_KEYS_RANDOM},
};

static void test_fa2_variants(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  int failures = 0;
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) failures += check_case(&CASES[i]);
  assert_int_equal(failures, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fa2_variants),
  };
  return TU_RUN_GROUP(tests, tu_gpu_setup, tu_gpu_teardown);
}
