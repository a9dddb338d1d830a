/* test_ragged_prefill.c — the ragged (varlen) prefill variants of fa2 and fa3 on the host (no
 * GPU): keys with .rg / .rgq round-trip and non-canonical or impossible spellings are refused, families without
 * ragged kernels refuse ragged specs, the space, the default and the launch (the padded grid over
 * the maxima and four arguments more: the offsets and the packed totals), the emitted define,
 * the lookup chain of a ragged serving plan, and every listed ragged variant of a few shapes
 * compiles for sm_90a with no spill (NVRTC). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/lookup.h"
#include "tests/testutil.h"

static at_shape prefill_shape(int q_len, int kv_len, int nq, int nkv, int d, at_mask mask, at_dtype dtype)
{
  at_shape s = {.batch = 16, .q_len = q_len, .kv_len = kv_len, .q_heads = nq, .kv_heads = nkv, .head_dim = d,
                .dtype = dtype, .mask = mask, .with_lse = 1};
  return s;
}

static void test_keys_round_trip(void **state)
{
  (void)state;
  const char *keys[] = {
      "fa2.bf16.rg.d128.causal-br.g4.bm128.bn64.w4.s2.lse",
      "fa2.f16.rgq.d64.none.g1.bm64.bn128.w4.s3",
      "fa2.e4m3.rg.d128.causal.g8.bm128.bn64.w8.s2.obf16.lse",
      "fa3.bf16.rg.d128.causal-br.g4.bm128.bn176.w8.s2.ws.lse",
      "fa3.f16.rgq.d64.none.g1.bm192.bn128.w12.s3.wspp",
  };
  const int ragged[] = {GEN_RAGGED_QKV, GEN_RAGGED_Q, GEN_RAGGED_QKV, GEN_RAGGED_QKV, GEN_RAGGED_Q};
  for (int i = 0; i < 5; i++) {
    gen_variant v;
    char again[GEN_KEY_MAX], entry[GEN_ENTRY_MAX];
    TU_OK(gen_variant_parse(keys[i], &v));
    assert_int_equal(v.family, i < 3 ? GEN_FAMILY_FA2 : GEN_FAMILY_FA3);
    assert_int_equal(v.spec.ragged, ragged[i]);
    TU_OK(gen_variant_key(&v, again, sizeof again));
    assert_string_equal(again, keys[i]);
    TU_OK(gen_entry_name(&v, entry, sizeof entry));
    assert_non_null(strstr(entry, ragged[i] == GEN_RAGGED_Q ? "_rgq_" : "_rg_"));
  }
  /* A padded key is what it was: no ragged field. */
  gen_variant v;
  TU_OK(gen_variant_parse("fa2.bf16.d128.causal-br.g4.bm128.bn64.w4.s2.lse", &v));
  assert_int_equal(v.spec.ragged, GEN_RAGGED_NONE);
  assert_string_equal(gen_ragged_name(GEN_RAGGED_NONE), "");
  assert_string_equal(gen_ragged_name(GEN_RAGGED_QKV), "rg");
  assert_string_equal(gen_ragged_name(GEN_RAGGED_Q), "rgq");
  assert_null(gen_ragged_name(3));
}

static void test_keys_refused(void **state)
{
  (void)state;
  gen_variant v;
  /* Out of place, unknown spellings, families without ragged kernels, ragged with pages. */
  tu_expect_refused(gen_variant_parse("fa2.bf16.d128.rg.none.g1.bm128.bn64.w4.s2", &v), AT_ERR_INVALID, "");
  tu_expect_refused(gen_variant_parse("fa2.bf16.rgkv.d128.none.g1.bm128.bn64.w4.s2", &v), AT_ERR_INVALID, "");
  tu_expect_refused(gen_variant_parse("fa2.bf16.rg.rg.d128.none.g1.bm128.bn64.w4.s2", &v), AT_ERR_INVALID, "");
  tu_expect_refused(gen_variant_parse("fa2.bf16.d128.none.g1.bm128.bn64.w4.s2.rg", &v), AT_ERR_INVALID,
                 "unknown suffix 'rg'");
  tu_expect_refused(gen_variant_parse("decode.bf16.rg.d128.none.g4.bm1.bn128.w4.s3.sp8", &v), AT_ERR_INVALID,
                 "reads padded tensors");
  tu_expect_refused(gen_variant_parse("decode.bf16.pg16.rg.d128.none.g4.bm1.bn128.w4.s3.sp8", &v), AT_ERR_INVALID,
                 "");
  /* In canonical order but impossible: the check refuses a ragged variant of a family without
   * ragged kernels, and one with pages. */
  const gen_target t = tu_sm90();
  TU_OK(gen_variant_parse("fa2.bf16.rg.d128.none.g1.bm128.bn64.w4.s2", &v));
  gen_variant w = v;
  w.spec.page_size = 16;
  tu_expect_refused(gen_variant_check(&w, &t), AT_ERR_INVALID, "page size 16");
  TU_OK(gen_variant_parse("decode.bf16.d128.none.g4.bm1.bn128.w4.s3.sp8", &w));
  w.spec.ragged = GEN_RAGGED_QKV;
  tu_expect_refused(gen_variant_check(&w, &t), AT_ERR_INVALID, "cannot read ragged");
  w = v;
  w.spec.ragged = 7;
  char key[GEN_KEY_MAX];
  tu_expect_refused(gen_variant_key(&w, key, sizeof key), AT_ERR_INVALID, "unknown ragged layout 7");
}

static void test_specs_and_families(void **state)
{
  (void)state;
  const gen_target t = tu_sm90();
  const at_shape s = prefill_shape(8192, 8192, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_DTYPE_BF16);
  gen_spec spec;
  TU_OK(gen_spec_from_shape_serving(GEN_FAMILY_FA2, &s, AT_DTYPE_BF16, 0, GEN_RAGGED_QKV, &spec));
  assert_int_equal(spec.ragged, GEN_RAGGED_QKV);
  tu_expect_refused(gen_spec_from_shape_serving(GEN_FAMILY_DECODE, &s, AT_DTYPE_BF16, 0, GEN_RAGGED_QKV, &spec),
                 AT_ERR_UNSUPPORTED, "reads padded tensors");
  TU_OK(gen_spec_from_shape_serving(GEN_FAMILY_FA2, &s, AT_DTYPE_BF16, 16, GEN_RAGGED_Q, &spec));
  assert_int_equal(spec.page_size, 16);
  tu_expect_refused(gen_spec_from_shape_serving(GEN_FAMILY_FA2, &s, AT_DTYPE_BF16, 16, GEN_RAGGED_QKV, &spec),
                 AT_ERR_INVALID, "paged K/V (page size 16) is not packed K/V");
  TU_OK(gen_spec_from_shape_serving(GEN_FAMILY_FA3, &s, AT_DTYPE_BF16, 16, GEN_RAGGED_Q, &spec));
  assert_int_equal(spec.page_size, 16);
  tu_expect_refused(gen_spec_from_shape_serving(GEN_FAMILY_FA2, &s, AT_DTYPE_BF16, 0, 5, &spec), AT_ERR_INVALID,
                 "unknown ragged layout 5");
  /* The space: only ragged variants of the asked kind: fa3's warp-specialized tiles without
   * .pers, then fa2's, each as its padded space has them. */
  gen_variant vs[GEN_MAX_VARIANTS], padded[GEN_MAX_VARIANTS];
  int n = 0, n_padded = 0;
  TU_OK(gen_enumerate_serving(&s, 0, GEN_RAGGED_QKV, &t, vs, GEN_MAX_VARIANTS, &n));
  TU_OK(gen_enumerate(&s, &t, padded, GEN_MAX_VARIANTS, &n_padded));
  assert_true(n > 0);
  int n_want = 0;
  for (int i = 0; i < n_padded; i++)
    n_want += padded[i].family == GEN_FAMILY_FA2 || (padded[i].family == GEN_FAMILY_FA3 && padded[i].ws &&
                                                     !padded[i].persistent);
  assert_int_equal(n, n_want);
  assert_int_equal(vs[0].family, GEN_FAMILY_FA3);
  for (int i = 0; i < n; i++) {
    assert_int_equal(vs[i].spec.ragged, GEN_RAGGED_QKV);
    assert_true(vs[i].family == GEN_FAMILY_FA2 || (vs[i].ws && !vs[i].persistent));
    TU_OK(gen_variant_matches_serving(&vs[i], &s, 0, GEN_RAGGED_QKV));
    assert_int_not_equal(gen_variant_matches_serving(&vs[i], &s, 0, GEN_RAGGED_Q), AT_OK);
    assert_int_not_equal(gen_variant_matches(&vs[i], &s), AT_OK);
  }
  gen_variant v;
  TU_OK(gen_default_variant_serving(&s, 0, GEN_RAGGED_Q, &t, &v));
  assert_int_equal(v.spec.ragged, GEN_RAGGED_Q);
  assert_int_equal(v.family, GEN_FAMILY_FA3); /* 16 bits on sm_90a: the warp-specialized kernel */
  assert_int_equal(v.ws, 1);
  TU_OK(gen_variant_check(&v, &t));
  /* fa3's other kernels refuse ragged tensors; FP8 ragged prefill and other targets get fa2. */
  gen_variant w = v;
  w.persistent = 1;
  tu_expect_refused(gen_variant_check(&w, &t), AT_ERR_UNSUPPORTED, "without .pers");
  TU_OK(gen_variant_parse("fa3.bf16.rgq.d128.causal-br.g4.bm128.bn128.w8.s2", &w));
  tu_expect_refused(gen_variant_check(&w, &t), AT_ERR_UNSUPPORTED, "warp-specialized 16-bit");
  const at_shape e4m3 = prefill_shape(8192, 8192, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_DTYPE_E4M3);
  TU_OK(gen_default_variant_serving(&e4m3, 0, GEN_RAGGED_QKV, &t, &w));
  assert_int_equal(w.family, GEN_FAMILY_FA2);
  gen_target sm80;
  TU_OK(gen_target_for_arch("sm_80", &sm80));
  TU_OK(gen_default_variant_serving(&s, 0, GEN_RAGGED_QKV, &sm80, &w));
  assert_int_equal(w.family, GEN_FAMILY_FA2);
  tu_expect_refused(gen_default_variant_serving(&s, 16, GEN_RAGGED_QKV, &t, &v), AT_ERR_INVALID,
                    "page size 16) is not packed");
  /* Ragged Q with paged K/V: fa3's warp-specialized default on sm_90a (fa2's before it), fa3's
   * tiles listed first, every variant .pg16.rgq. */
  TU_OK(gen_default_variant_serving(&s, 16, GEN_RAGGED_Q, &t, &v));
  assert_int_equal(v.family, GEN_FAMILY_FA3);
  assert_true(v.ws && !v.persistent);
  assert_int_equal(v.spec.page_size, 16);
  TU_OK(gen_default_variant_serving(&s, 16, GEN_RAGGED_Q, &sm80, &w));
  assert_int_equal(w.family, GEN_FAMILY_FA2);
  assert_int_equal(w.spec.page_size, 16);
  assert_int_equal(v.spec.ragged, GEN_RAGGED_Q);
  TU_OK(gen_enumerate_serving(&s, 16, GEN_RAGGED_Q, &t, vs, GEN_MAX_VARIANTS, &n));
  assert_true(n > 0);
  assert_int_equal(vs[0].family, GEN_FAMILY_FA3);
  int n_fa2 = 0;
  for (int i = 0; i < n; i++) {
    if (vs[i].family == GEN_FAMILY_FA3)
      assert_true(vs[i].ws && !vs[i].persistent && (vs[i].block_n % 16 == 0));
    else
      assert_int_equal(vs[i].family, GEN_FAMILY_FA2), n_fa2++;
    assert_int_equal(vs[i].spec.page_size, 16);
    assert_int_equal(vs[i].spec.ragged, GEN_RAGGED_Q);
  }
  assert_true(n_fa2 > 0);
  /* f32 has no fused kernel: the refusal names the layout. */
  const at_shape f32 = prefill_shape(512, 512, 8, 8, 64, AT_MASK_NONE, AT_DTYPE_F32);
  tu_expect_refused(gen_enumerate_serving(&f32, 0, GEN_RAGGED_QKV, &t, vs, GEN_MAX_VARIANTS, &n), AT_ERR_UNSUPPORTED, "");
}

static void test_launch_and_source(void **state)
{
  (void)state;
  const gen_target t = tu_sm90();
  const at_shape s = prefill_shape(3000, 5000, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_DTYPE_BF16);
  gen_variant v, p;
  TU_OK(gen_variant_parse("fa2.bf16.rg.d128.causal-br.g4.bm128.bn64.w8.s2.lse", &v));
  p = v;
  p.spec.ragged = GEN_RAGGED_NONE;
  gen_launch_desc dr, dp;
  TU_OK(gen_launch_describe(&v, &s, &dr));
  TU_OK(gen_launch_describe(&p, &s, &dp));
  /* The padded grid is (ceil(T / block_m), Nq, B); the ragged one (B * ceil(T / block_m), Nq, 1),
   * x over the sequences' query blocks, as a bound the launch lowers from total_q; five
   * arguments more, last. */
  const gen_kernel_launch *k = &dr.kernels[0];
  const unsigned tiles = (3000 + v.block_m - 1) / v.block_m;
  assert_int_equal(dp.kernels[0].grid[0], tiles);
  assert_int_equal(dp.kernels[0].grid[2], 16);
  assert_int_equal(k->grid[0], 16 * tiles);
  assert_int_equal(k->grid[1], 32);
  assert_int_equal(k->grid[2], 1);
  assert_int_equal(k->n_args, dp.kernels[0].n_args + 5);
  assert_memory_equal(k->args, dp.kernels[0].args, (size_t)dp.kernels[0].n_args * sizeof *k->args);
  assert_int_equal(k->args[k->n_args - 5], GEN_ARG_CU_SEQLENS_Q);
  assert_int_equal(k->args[k->n_args - 4], GEN_ARG_CU_SEQLENS_KV);
  assert_int_equal(k->args[k->n_args - 3], GEN_ARG_TOTAL_Q);
  assert_int_equal(k->args[k->n_args - 2], GEN_ARG_TOTAL_KV);
  assert_int_equal(k->args[k->n_args - 1], GEN_ARG_BATCH);
  /* A call's x: the blocks that total_q rows can fill, at most one partial block per sequence,
   * never over the bound of the maxima. */
  assert_int_equal(gen_ragged_query_blocks(&v, &s, 0), 0);
  assert_int_equal(gen_ragged_query_blocks(&v, &s, 1), 1);
  assert_int_equal(gen_ragged_query_blocks(&v, &s, 10 * v.block_m), 10 + 16 - 1);
  assert_int_equal(gen_ragged_query_blocks(&v, &s, 16 * 3000), 16 * tiles);
  assert_int_equal(dr.kernels[0].smem_bytes, dp.kernels[0].smem_bytes);
  assert_int_equal(dr.scratch_bytes, 0);
  /* The launch of a ragged variant needs the ragged shape: a padded spec does not match it. */
  gen_launch_desc none;
  at_shape mha = s;
  mha.kv_heads = 32;
  assert_int_not_equal(gen_launch_describe(&v, &mha, &none), AT_OK);
  char *src = NULL;
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "#define FA2_RAGGED 1"));
  free(src);
  TU_OK(gen_emit(&p, &t, &src));
  assert_null(strstr(src, "#define FA2_RAGGED 1"));
  free(src);

  /* fa3's warp-specialized kernel: the four after fa2's list, then the three tensor maps. */
  gen_variant f, fp;
  TU_OK(gen_default_variant_serving(&s, 0, GEN_RAGGED_QKV, &t, &f));
  assert_int_equal(f.family, GEN_FAMILY_FA3);
  fp = f;
  fp.spec.ragged = GEN_RAGGED_NONE;
  TU_OK(gen_launch_describe(&f, &s, &dr));
  TU_OK(gen_launch_describe(&fp, &s, &dp));
  k = &dr.kernels[0];
  /* Causal padded fa3 runs (Nq, B, query blocks); ragged fa3 the same grid as ragged fa2. */
  assert_int_equal(k->grid[0], 16 * ((3000 + f.block_m - 1) / f.block_m));
  assert_int_equal(k->grid[1], 32);
  assert_int_equal(k->grid[2], 1);
  assert_int_equal(dp.kernels[0].grid[0], 32);
  assert_int_equal(k->n_args, dp.kernels[0].n_args + 5);
  assert_int_equal(k->args[k->n_args - 8], GEN_ARG_CU_SEQLENS_Q);
  assert_int_equal(k->args[k->n_args - 5], GEN_ARG_TOTAL_KV);
  assert_int_equal(k->args[k->n_args - 4], GEN_ARG_BATCH);
  assert_int_equal(k->args[k->n_args - 3], GEN_ARG_TMAP_Q);
  assert_int_equal(k->args[k->n_args - 1], GEN_ARG_TMAP_V);
  assert_memory_equal(dr.tmap_rows, dp.tmap_rows, sizeof dr.tmap_rows);
  TU_OK(gen_emit(&f, &t, &src));
  assert_non_null(strstr(src, "#define FA3_RAGGED 1"));
  free(src);
}

/* The lookup chain of a ragged serving plan: the ragged default (fa3's on sm_90a) first, then
 * cuDNN's ragged graph, then naive (the tuned rows skipped with their reason); "fused" keeps the
 * default alone. Padded Q with ragged K/V has no generated kernel and no cuDNN graph; ragged Q
 * with paged K/V is fa2's (.pg<N>.rgq; tests/test_paged_decode.c). */
static void test_lookup_chain(void **state)
{
  (void)state;
  const gen_target t = tu_sm90();
  const cache_env now = tu_h200_env(""); /* no cache: only the GPU model matters */
  const at_shape s = prefill_shape(8192, 8192, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_DTYPE_BF16);
  const at_seq_layout kinds[] = {AT_SEQ_RAGGED, AT_SEQ_PADDED};
  const char *want[] = {".rg.", ".rgq."};
  for (int i = 0; i < 2; i++) {
    at_serving_layout l = at_serving_layout_make(&s, AT_SEQ_RAGGED, kinds[i], 0);
    rt_lookup chain;
    TU_OK(rt_lookup_chain_serving(NULL, &now, &t, &s, &l, 0, &chain));
    printf("  skipped: %s\n", chain.skipped);
    assert_int_equal(chain.n_steps, 3);
    assert_int_equal(chain.steps[0].choice, AT_CHOICE_DEFAULT);
    assert_non_null(strstr(chain.steps[0].impl, want[i]));
    assert_string_equal(chain.steps[1].impl, "cudnn");
    assert_string_equal(chain.steps[2].impl, "naive");
    assert_null(strstr(chain.skipped, "cuDNN"));
    assert_non_null(strstr(chain.skipped, "no cache")); /* no cache: no tuned rows to look for */
    TU_OK(rt_lookup_chain_serving(NULL, &now, &t, &s, &l, 1, &chain));
    assert_int_equal(chain.n_steps, 1);
  }
  at_serving_layout kv_only = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_RAGGED, 0);
  rt_lookup chain;
  TU_OK(rt_lookup_chain_serving(NULL, &now, &t, &s, &kv_only, 0, &chain));
  assert_int_equal(chain.n_steps, 1);
  assert_string_equal(chain.steps[0].impl, "naive");
  assert_non_null(strstr(chain.skipped, "cuDNN: unsupported: padded Q with ragged K/V"));
  assert_int_equal(rt_serving_ragged(&kv_only), GEN_RAGGED_NONE);
  at_serving_layout paged = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  assert_int_equal(rt_serving_ragged(&paged), GEN_RAGGED_Q); /* Q packed, K/V not */
  assert_int_equal(rt_serving_ragged(NULL), GEN_RAGGED_NONE);
}

/* Every listed ragged kernel of a few shapes compiles with no spill and no stack (sm_90a): fa2 at
 * head dims 64, 128 (GQA), 256 and 80, both ragged kinds, every mask, lse, FP8; fa3's 32
 * warp-specialized ragged kernels of D 128 causal-br GQA (about 3 minutes of NVRTC on 2 cores). */
static void test_compile_no_spills(void **state)
{
  (void)state;
  const gen_target t = tu_sm90();
  typedef struct rcase {
    at_shape s;
    int ragged;
    int with_fa3; /* also fa3's variants (else fa2's only, to keep the compile time down) */
  } rcase;
  const rcase cases[] = {
      {prefill_shape(8192, 8192, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_DTYPE_BF16), GEN_RAGGED_QKV, 1},
      {prefill_shape(8192, 8192, 16, 16, 64, AT_MASK_NONE, AT_DTYPE_F16), GEN_RAGGED_Q, 0},
      {prefill_shape(4096, 4096, 16, 2, 256, AT_MASK_CAUSAL_TL, AT_DTYPE_BF16), GEN_RAGGED_QKV, 0},
      {prefill_shape(2048, 2048, 8, 8, 80, AT_MASK_CAUSAL_TL, AT_DTYPE_BF16), GEN_RAGGED_Q, 0},
      {prefill_shape(8192, 8192, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_DTYPE_E4M3), GEN_RAGGED_QKV, 0},
  };
  const int n_cases = (int)(sizeof cases / sizeof *cases);
  gen_variant *all = calloc((size_t)n_cases * GEN_MAX_VARIANTS, sizeof *all);
  assert_non_null(all);
  int n = 0;
  for (int i = 0; i < n_cases; i++) {
    int k = 0;
    TU_OK(gen_enumerate_serving(&cases[i].s, 0, cases[i].ragged, &t, all + n, GEN_MAX_VARIANTS, &k));
    assert_true(k > 0);
    int kept = 0;
    for (int j = 0; j < k; j++)
      if (all[n + j].family == GEN_FAMILY_FA2 || cases[i].with_fa3) all[n + kept++] = all[n + j];
    n += kept;
  }
  int bad = tu_compile_count_bad(all, n, &t, "ragged prefill");
  free(all);
  assert_int_equal(bad, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keys_round_trip),    cmocka_unit_test(test_keys_refused),
      cmocka_unit_test(test_specs_and_families), cmocka_unit_test(test_launch_and_source),
      cmocka_unit_test(test_lookup_chain),       cmocka_unit_test(test_compile_no_spills),
  };
  return TU_RUN_GROUP(tests, NULL, NULL);
}
