/* test_generator.c — variant keys, enumeration, constraints and spill-free compiles (no GPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/generator.h"
#include "tests/testutil.h"

static at_shape shape_of(at_dtype dtype, int d, at_mask mask, int nq, int nkv, int lse)
{
  at_shape s = {.batch = 1, .q_len = 0, .kv_len = 0, .q_heads = nq, .kv_heads = nkv,
                .head_dim = d, .dtype = dtype, .mask = mask, .with_lse = lse};
  return s;
}

static void test_literal_keys(void **state)
{
  (void)state;
  char key[GEN_KEY_MAX], entry[GEN_KEY_MAX];
  gen_variant v = {GEN_FAMILY_FA2, {AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_TL, 4, 0, AT_DTYPE_BF16, AT_KV_SAME, 0, 0}, 128, 64, 4, 2, 0, 0, 0, 0, 0, 0, 0, 0};
  TU_OK(gen_variant_key(&v, key, sizeof key));
  assert_string_equal(key, "fa2.bf16.d128.causal.g4.bm128.bn64.w4.s2");
  TU_OK(gen_entry_name(&v, entry, sizeof entry));
  assert_string_equal(entry, "fa2_bf16_d128_causal_g4_bm128_bn64_w4_s2");

  gen_variant w = {GEN_FAMILY_FA2, {AT_DTYPE_F16, 80, AT_MASK_CAUSAL_BR, 6, 1, AT_DTYPE_F16, AT_KV_SAME, 0, 0}, 64, 32, 4, 3, 0, 0, 0, 0, 0, 0, 0, 0};
  TU_OK(gen_variant_key(&w, key, sizeof key));
  assert_string_equal(key, "fa2.f16.d80.causal-br.g6.bm64.bn32.w4.s3.lse");
  TU_OK(gen_entry_name(&w, entry, sizeof entry));
  assert_string_equal(entry, "fa2_f16_d80_causal_br_g6_bm64_bn32_w4_s3_lse");

  gen_variant back;
  TU_OK(gen_variant_parse("fa2.f16.d80.causal-br.g6.bm64.bn32.w4.s3.lse", &back));
  assert_memory_equal(&back, &w, sizeof w);
  TU_OK(gen_variant_parse("fa2.bf16.d64.none.g1.bm128.bn128.w8.s2", &back));
  assert_int_equal(back.spec.head_dim, 64);
  assert_int_equal(back.spec.mask, AT_MASK_NONE);
  assert_int_equal(back.block_n, 128);
  assert_int_equal(back.warps, 8);
  assert_int_equal(back.spec.with_lse, 0);
}

static void test_bad_keys(void **state)
{
  (void)state;
  static const char *const bad[] = {
      "",
      "fa2",
      "fa2.bf16.d128.causal.g4.bm128.bn64.w4",         /* missing stages */
      "fa4.bf16.d128.causal.g4.bm128.bn64.w4.s2",      /* unknown family */
      "fa2.bf17.d128.causal.g4.bm128.bn64.w4.s2",      /* unknown dtype */
      "fa2.bf16.d128.diagonal.g4.bm128.bn64.w4.s2",    /* unknown mask */
      "fa2.bf16.d0128.causal.g4.bm128.bn64.w4.s2",     /* not canonical */
      "fa2.bf16.d128.causal.g4.bm128.bn64.w4.s2.lse.x", /* trailing field */
      "fa2.bf16.d128.causal.g4.bm128.bn64.w4.s2.fast", /* unknown suffix */
      "fa2.bf16.dx.causal.g4.bm128.bn64.w4.s2",
      "fa2.bf16.d128.causal.g4.bn64.bm128.w4.s2",      /* fields out of order */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    gen_variant v;
    at_status rc = gen_variant_parse(bad[i], &v);
    if (rc == AT_OK) fail_msg("key '%s' was accepted", bad[i]);
    assert_true(strlen(at_last_error()) > 0);
  }
}

static void expect_refused(at_shape s, const char *needle)
{
  gen_target t = tu_sm90();
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = -1;
  at_status rc = gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n);
  if (rc == AT_OK) fail_msg("shape with head dim %d, Nq %d, Nkv %d was accepted", s.head_dim, s.q_heads, s.kv_heads);
  assert_int_equal(n, 0);
  if (!strstr(at_last_error(), needle)) fail_msg("message '%s' does not mention '%s'", at_last_error(), needle);
}

static void test_bad_shapes(void **state)
{
  (void)state;
  expect_refused(shape_of(AT_DTYPE_BF16, 0, AT_MASK_NONE, 8, 8, 0), "head dim 0");
  expect_refused(shape_of(AT_DTYPE_BF16, 12, AT_MASK_NONE, 8, 8, 0), "head dim 12 is not a multiple of 8");
  expect_refused(shape_of(AT_DTYPE_BF16, 300, AT_MASK_NONE, 8, 8, 0), "head dim 300");
  expect_refused(shape_of(AT_DTYPE_BF16, 264, AT_MASK_NONE, 8, 8, 0), "head dim 264");
  expect_refused(shape_of(AT_DTYPE_F16, 128, AT_MASK_CAUSAL_TL, 6, 4, 0), "q heads 6 are not a multiple of kv heads 4");
  expect_refused(shape_of(AT_DTYPE_F32, 128, AT_MASK_NONE, 8, 8, 0), "dtype f32");
  expect_refused(shape_of(AT_DTYPE_BF16, 128, AT_MASK_NONE, 8, 0, 0), "kv heads 0");
}

/* Every head dim, mask, dtype, GQA and lse: variants exist, keys are unique and round-trip, and the
 * constraints hold (shared memory within the limit, register estimate within budget). */
static void test_enumeration_space(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  const at_mask masks[] = {AT_MASK_NONE, AT_MASK_CAUSAL_TL, AT_MASK_CAUSAL_BR};
  const at_dtype dtypes[] = {AT_DTYPE_F16, AT_DTYPE_BF16};
  int total = 0;
  for (int d = 32; d <= 256; d += 8)
    for (int m = 0; m < 3; m++)
      for (int dt = 0; dt < 2; dt++)
        for (int g = 1; g <= 8; g *= 8)
          for (int lse = 0; lse < 2; lse++) {
            at_shape s = shape_of(dtypes[dt], d, masks[m], 8 * g, 8, lse);
            gen_variant vs[GEN_MAX_VARIANTS];
            char keys[GEN_MAX_VARIANTS][GEN_KEY_MAX];
            int n = 0;
            TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
            assert_true(n > 0);
            for (int i = 0; i < n; i++) {
              gen_variant back;
              TU_OK(gen_variant_key(&vs[i], keys[i], sizeof keys[i]));
              TU_OK(gen_variant_parse(keys[i], &back));
              assert_memory_equal(&back, &vs[i], sizeof back);
              TU_OK(gen_variant_check(&vs[i], &t));
              TU_OK(gen_variant_matches(&vs[i], &s));
              assert_true(gen_smem_bytes(&vs[i]) <= t.smem_limit);
              for (int j = 0; j < i; j++)
                if (strcmp(keys[i], keys[j]) == 0) fail_msg("key %s listed twice", keys[i]);
            }
            gen_variant def;
            TU_OK(gen_default_variant(&s, &t, &def));
            TU_OK(gen_variant_check(&def, &t));
            total += n;
          }
  printf("  %d variants over all head dims, masks, dtypes, GQA and lse\n", total);
}

/* A smaller shared memory limit (sm_86-class, 99 KB) prunes large tiles but leaves variants. */
static void test_smem_limit_prunes(void **state)
{
  (void)state;
  gen_target big = tu_sm90(), small;
  TU_OK(gen_target_for_arch("sm_86", &small));
  assert_int_equal(small.smem_limit, 99 * 1024);
  at_shape s = shape_of(AT_DTYPE_BF16, 256, AT_MASK_NONE, 8, 8, 0);
  gen_variant a[GEN_MAX_VARIANTS], b[GEN_MAX_VARIANTS];
  int na = 0, nb = 0;
  TU_OK(gen_enumerate(&s, &big, a, GEN_MAX_VARIANTS, &na));
  TU_OK(gen_enumerate(&s, &small, b, GEN_MAX_VARIANTS, &nb));
  assert_true(nb > 0 && nb < na);
  for (int i = 0; i < nb; i++) assert_true(gen_smem_bytes(&b[i]) <= small.smem_limit);
  /* A variant over the limit is refused with the numbers. */
  gen_variant v = {GEN_FAMILY_FA2, {AT_DTYPE_BF16, 256, AT_MASK_NONE, 1, 0, AT_DTYPE_BF16, AT_KV_SAME, 0, 0}, 128, 128, 8, 3, 0, 0, 0, 0, 0, 0, 0, 0};
  assert_int_not_equal(gen_variant_check(&v, &big), AT_OK);
  assert_non_null(strstr(at_last_error(), "shared memory"));
}

static void test_emit(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant v;
  char *src = NULL;
  TU_OK(gen_variant_parse("fa2.bf16.d80.causal-br.g6.bm128.bn32.w4.s2.lse", &v));
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "#define FA2_KERNEL fa2_bf16_d80_causal_br_g6_bm128_bn32_w4_s2_lse\n"));
  assert_non_null(strstr(src, "#define FA2_HEAD_DIM 80\n"));
  assert_non_null(strstr(src, "#define FA2_MASK 2"));
  assert_non_null(strstr(src, "#define FA2_GQA 6\n"));
  assert_non_null(strstr(src, "#define FA2_LSE 1\n"));
  assert_non_null(strstr(src, "#define AT_IN_DTYPE 2"));
  assert_non_null(strstr(src, "FA2_KERNEL("));
  assert_null(strstr(src, "#include"));
  free(src);
}

/* Variant keys that must parse and pass their checks, compiled for sm_90a: how many of them had
 * errors or spills (tu_compile_count_bad). */
static int compile_keys_count_bad(const char *const *keys, int n, const gen_target *t, const char *what)
{
  gen_variant vs[16];
  assert_true(n <= 16);
  for (int i = 0; i < n; i++) {
    TU_OK(gen_variant_parse(keys[i], &vs[i]));
    TU_OK(gen_variant_check(&vs[i], t));
  }
  return tu_compile_count_bad(vs, n, t, what);
}

/* The spill-free promise: every listed variant of the tested shapes compiles for sm_90a with zero
 * spill bytes and no stack frame. All of them, compiled in parallel (~0.3 s each). */
/* Keeps the variants that are not warp-specialized (test_ws_compile_no_spills has those: the
 * full cross product of them costs NVRTC more time than CI has). Returns the new count. */
static int without_ws(gen_variant *vs, int n)
{
  int kept = 0;
  for (int i = 0; i < n; i++)
    if (!vs[i].ws) vs[kept++] = vs[i];
  return kept;
}

static void test_compile_no_spills(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  const int dims[] = {64, 96, 128, 256};
  const at_mask masks[] = {AT_MASK_NONE, AT_MASK_CAUSAL_TL};
  const at_dtype dtypes[] = {AT_DTYPE_F16, AT_DTYPE_BF16};
  const int gqa[] = {1, 4};
  int cap = 4 * 2 * 2 * 2 * GEN_MAX_VARIANTS, n = 0;
  gen_variant *all = calloc((size_t)cap, sizeof *all);
  assert_non_null(all);
  for (int d = 0; d < 4; d++)
    for (int m = 0; m < 2; m++)
      for (int dt = 0; dt < 2; dt++)
        for (int g = 0; g < 2; g++) {
          at_shape s = shape_of(dtypes[dt], dims[d], masks[m], 8 * gqa[g], 8, 0);
          int k = 0;
          TU_OK(gen_enumerate(&s, &t, all + n, cap - n, &k));
          n += without_ws(all + n, k);
        }
  int bad = tu_compile_count_bad(all, n, &t, "16-bit, all but warp-specialized");
  free(all);
  assert_int_equal(bad, 0);
}

/* ---- FP8 ----------------------------------------------------------------------------------- */

static void test_fp8_keys(void **state)
{
  (void)state;
  char key[GEN_KEY_MAX], entry[GEN_KEY_MAX];
  gen_variant v = {GEN_FAMILY_FA2, {AT_DTYPE_E4M3, 128, AT_MASK_NONE, 1, 0, AT_DTYPE_BF16, AT_KV_SAME, 0, 0}, 128, 64, 8, 2, 0, 0, 0, 0, 0, 0, 0, 0};
  TU_OK(gen_variant_key(&v, key, sizeof key));
  assert_string_equal(key, "fa2.e4m3.d128.none.g1.bm128.bn64.w8.s2.obf16");
  TU_OK(gen_entry_name(&v, entry, sizeof entry));
  assert_string_equal(entry, "fa2_e4m3_d128_none_g1_bm128_bn64_w8_s2_obf16");
  gen_variant back;
  TU_OK(gen_variant_parse(key, &back));
  assert_memory_equal(&back, &v, sizeof v);

  gen_variant w = {GEN_FAMILY_FA2, {AT_DTYPE_E5M2, 80, AT_MASK_CAUSAL_BR, 6, 1, AT_DTYPE_E5M2, AT_KV_SAME, 0, 0}, 64, 32, 4, 3, 0, 0, 0, 0, 0, 0, 0, 0};
  TU_OK(gen_variant_key(&w, key, sizeof key));
  assert_string_equal(key, "fa2.e5m2.d80.causal-br.g6.bm64.bn32.w4.s3.oe5m2.lse");
  TU_OK(gen_variant_parse(key, &back));
  assert_memory_equal(&back, &w, sizeof w);
  TU_OK(gen_variant_parse("fa2.e4m3.d64.causal.g4.bm64.bn128.w4.s2.of16", &back));
  assert_int_equal(back.spec.out_dtype, AT_DTYPE_F16);
  assert_int_equal(back.spec.dtype, AT_DTYPE_E4M3);

  static const char *const bad[] = {
      "fa2.e4m3.d128.none.g1.bm128.bn64.w8.s2",           /* FP8 keys name their output */
      "fa2.bf16.d128.none.g1.bm128.bn64.w8.s2.obf16",     /* 16-bit keys do not */
      "fa2.e4m3.d128.none.g1.bm128.bn64.w8.s2.lse.obf16", /* out before lse */
      "fa2.e4m3.d128.none.g1.bm128.bn64.w8.s2.ox",
      "fa2.e4m3.d128.none.g1.bm128.bn64.w8.s2.obf16.obf16",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    at_status rc = gen_variant_parse(bad[i], &back);
    if (rc == AT_OK) fail_msg("key '%s' was accepted", bad[i]);
  }
  /* Parsed but refused by the constraints: f32 output, D not a multiple of 16, block_n 16. */
  gen_target t = tu_sm90();
  TU_OK(gen_variant_parse("fa2.e4m3.d128.none.g1.bm128.bn64.w8.s2.of32", &back));
  assert_int_not_equal(gen_variant_check(&back, &t), AT_OK);
  TU_OK(gen_variant_parse("fa2.e4m3.d72.none.g1.bm128.bn64.w8.s2.obf16", &back));
  assert_int_not_equal(gen_variant_check(&back, &t), AT_OK);
  assert_non_null(strstr(at_last_error(), "multiple of 16"));
  TU_OK(gen_variant_parse("fa2.e4m3.d64.none.g1.bm128.bn16.w8.s2.obf16", &back));
  assert_int_not_equal(gen_variant_check(&back, &t), AT_OK);
  assert_non_null(strstr(at_last_error(), "multiple of 32"));
}

/* sm_80 (and 86, 87) has no FP8 MMA: enumeration and the check refuse with a message that says so;
 * sm_89 lists variants. FP8 head dims are multiples of 16. */
static void test_fp8_targets(void **state)
{
  (void)state;
  gen_target sm80, sm89, t90 = tu_sm90();
  TU_OK(gen_target_for_arch("sm_80", &sm80));
  TU_OK(gen_target_for_arch("sm_89", &sm89));
  assert_false(gen_target_has_fp8(&sm80));
  assert_true(gen_target_has_fp8(&sm89) && gen_target_has_fp8(&t90));
  at_shape s = shape_of(AT_DTYPE_E4M3, 128, AT_MASK_NONE, 8, 8, 0);
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = -1;
  assert_int_equal(gen_enumerate(&s, &sm80, vs, GEN_MAX_VARIANTS, &n), AT_ERR_UNSUPPORTED);
  assert_int_equal(n, 0);
  if (!strstr(at_last_error(), "sm_89")) fail_msg("message '%s' does not name sm_89", at_last_error());
  printf("  sm_80: %s\n", at_last_error());
  gen_variant v;
  TU_OK(gen_variant_parse("fa2.e4m3.d128.none.g1.bm128.bn64.w8.s2.obf16", &v));
  assert_int_equal(gen_variant_check(&v, &sm80), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "sm_80"));
  char *src = NULL;
  assert_int_not_equal(gen_emit(&v, &sm80, &src), AT_OK);
  assert_null(src);
  TU_OK(gen_enumerate(&s, &sm89, vs, GEN_MAX_VARIANTS, &n));
  assert_true(n > 0);
  expect_refused(shape_of(AT_DTYPE_E5M2, 72, AT_MASK_NONE, 8, 8, 0), "not a multiple of 16");
  /* A 16-bit shape still lists the same variants on sm_80 as before. */
  s.dtype = AT_DTYPE_BF16;
  TU_OK(gen_enumerate(&s, &sm80, vs, GEN_MAX_VARIANTS, &n));
  assert_true(n > 0);
}

/* FP8 head dims (multiples of 16), masks, both formats, GQA, lse and every output dtype: keys are
 * unique and round-trip, constraints hold, block_n is a multiple of 32. D=240 (and D=256 with FP8
 * output) has no FP8 tile on sm_90a (fa2: registers, docs/perf.md; fa3: D 64/128/256, bf16/f16
 * output), which enumeration says in words. */
static void test_fp8_enumeration(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  const at_dtype ins[] = {AT_DTYPE_E4M3, AT_DTYPE_E5M2};
  const at_dtype outs[] = {AT_DTYPE_BF16, AT_DTYPE_F16, AT_DTYPE_E4M3, AT_DTYPE_E5M2};
  int total = 0, empty = 0;
  for (int d = 32; d <= 256; d += 16)
    for (int m = 0; m < 3; m++)
      for (int i = 0; i < 2; i++)
        for (int o = 0; o < 4; o++)
          for (int lse = 0; lse < 2; lse++) {
            at_shape s = shape_of(ins[i], d, (at_mask)m, 32, 8, lse);
            gen_variant vs[GEN_MAX_VARIANTS];
            char keys[GEN_MAX_VARIANTS][GEN_KEY_MAX];
            int n = 0;
            at_status rc = gen_enumerate_out(&s, outs[o], &t, vs, GEN_MAX_VARIANTS, &n);
            if (rc == AT_ERR_UNSUPPORTED && d > 224) {
              assert_non_null(strstr(at_last_error(), "registers"));
              empty++;
              continue;
            }
            TU_OK(rc);
            assert_true(n > 0);
            for (int j = 0; j < n; j++) {
              gen_variant back;
              assert_int_equal(vs[j].spec.out_dtype, outs[o]);
              assert_int_equal(vs[j].block_n % 32, 0);
              TU_OK(gen_variant_key(&vs[j], keys[j], sizeof keys[j]));
              TU_OK(gen_variant_parse(keys[j], &back));
              assert_memory_equal(&back, &vs[j], sizeof back);
              TU_OK(gen_variant_check(&vs[j], &t));
              TU_OK(gen_variant_matches(&vs[j], &s));
              for (int k = 0; k < j; k++)
                if (strcmp(keys[j], keys[k]) == 0) fail_msg("key %s listed twice", keys[j]);
            }
            if (o == 0) {
              gen_variant def;
              TU_OK(gen_default_variant(&s, &t, &def));
              assert_int_equal(def.spec.out_dtype, AT_DTYPE_BF16);
            }
            total += n;
          }
  printf("  %d FP8 variants over head dims 32..256, masks, formats, outputs, lse; %d specs without one "
         "(D > 224)\n",
         total, empty);
}

static void test_fp8_emit(void **state)
{
  (void)state;
  gen_target t = tu_sm90(), sm89;
  TU_OK(gen_target_for_arch("sm_89", &sm89));
  gen_variant v;
  char *src = NULL;
  TU_OK(gen_variant_parse("fa2.e5m2.d80.causal.g4.bm128.bn64.w8.s2.oe4m3.lse", &v));
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "#define AT_IN_DTYPE 4"));
  assert_non_null(strstr(src, "#define AT_OUT_DTYPE 3"));
  assert_non_null(strstr(src, "#define FA2_FP8_VIA_F16 1\n"));
  assert_non_null(strstr(src, "#define FA2_KERNEL fa2_e5m2_d80_causal_g4_bm128_bn64_w8_s2_oe4m3_lse\n"));
  free(src);
  TU_OK(gen_emit(&v, &sm89, &src));
  assert_non_null(strstr(src, "#define FA2_FP8_VIA_F16 0\n"));
  free(src);
}

/* fa3 (wgmma, sm_90a): keys round-trip, the emitted source has the wgmma wrappers for the tile,
 * and the constraints refuse what the template cannot run, each with a message naming it. */
static void test_fa3_family(void **state)
{
  (void)state;
  gen_target t = tu_sm90(), sm89, sm90;
  TU_OK(gen_target_for_arch("sm_89", &sm89));
  TU_OK(gen_target_for_arch("sm_90", &sm90));
  gen_variant v;
  char *src = NULL, key[GEN_KEY_MAX];
  TU_OK(gen_variant_parse("fa3.e5m2.d256.causal.g2.bm128.bn64.w8.s2.of16.lse", &v));
  assert_int_equal(v.family, GEN_FAMILY_FA3);
  TU_OK(gen_variant_key(&v, key, sizeof key));
  assert_string_equal(key, "fa3.e5m2.d256.causal.g2.bm128.bn64.w8.s2.of16.lse");
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "#define FA3_KERNEL fa3_e5m2_d256_causal_g2_bm128_bn64_w8_s2_of16_lse\n"));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e5m2 "));  /* Q K^T, N = BN */
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2 ")); /* P V, N = D */
  free(src);
  assert_int_equal(gen_smem_bytes(&v), 1024 + 128 * 256 + 6 * 64 * 256); /* Q, 2 x (K, V), 2 V^T */

  /* Refusals: the arch (sm_89 has no wgmma; plain sm_90 has no wgmma either), the tile, the dtypes. */
  assert_int_equal(gen_variant_check(&v, &sm89), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "sm_90a"));
  assert_int_equal(gen_variant_check(&v, &sm90), AT_ERR_UNSUPPORTED);
  gen_variant bad = v;
  bad.block_m = 64;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "block_m"));
  bad = v, bad.spec.head_dim = 96;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  bad = v, bad.block_n = 32;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  bad = v, bad.spec.out_dtype = AT_DTYPE_E4M3;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  bad = v, bad.spec.dtype = AT_DTYPE_F32, bad.spec.out_dtype = AT_DTYPE_F32;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "e4m3, e5m2, bf16 or f16"));

  /* 16-bit inputs: V is read MN-major (transpose bit), O in the input dtype, no V^T buffer. */
  TU_OK(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2", &v));
  TU_OK(gen_variant_check(&v, &t));
  assert_int_equal(gen_smem_bytes(&v), 1024 + 128 * 256 + 4 * 128 * 256);
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "));
  assert_non_null(strstr(src, ", p, 1, 1, 0, 0;")); /* Q K^T: both K-major */
  assert_non_null(strstr(src, ", 1, 1, 1, 1;"));    /* P V: B transposed (MN-major V) */
  free(src);
  bad = v, bad.spec.out_dtype = AT_DTYPE_F16;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
}

/* Warp-specialized fa3: keys .ws/.wspp round-trip, a producer warpgroup on top of the consumers,
 * tiles padded to whole column blocks (D 96 holds 128 columns), the tensor maps after fa2's
 * arguments, causal grids (Nq, B, query blocks), and refusals that name what is wrong. */
static void test_fa3_ws_family(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant v, back;
  char key[GEN_KEY_MAX], *src = NULL;
  TU_OK(gen_variant_parse("fa3.bf16.d128.causal.g4.bm128.bn176.w8.s2.ws.lse", &v));
  assert_int_equal(v.ws, 1);
  TU_OK(gen_variant_check(&v, &t));
  assert_int_equal(gen_threads(&v), 3 * 128);
  assert_int_equal(gen_smem_bytes(&v), 1024 + 128 * 256 + 4 * 176 * 256 + 256);
  TU_OK(gen_variant_parse("fa3.f16.d96.none.g1.bm128.bn128.w8.s2.wspp", &back));
  assert_int_equal(back.ws, 2);
  TU_OK(gen_variant_key(&back, key, sizeof key));
  assert_string_equal(key, "fa3.f16.d96.none.g1.bm128.bn128.w8.s2.wspp");
  assert_int_equal(gen_threads(&back), 3 * 128);
  assert_int_equal(gen_smem_bytes(&back), 1024 + 128 * 256 + 4 * 128 * 256 + 256); /* 128 columns */
  TU_OK(gen_emit(&back, &t, &src));
  assert_non_null(strstr(src, "#define FA3_WS 1\n#define FA3_PINGPONG 1\n"));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 ")); /* P V over 128 columns */
  assert_null(strstr(src, "#define FA3_ONES_BLOCK 1")); /* D 96: the softmax adds P's rows */
  free(src);
  /* D 64 without lse: the row sums on the tensor cores, over 256 bytes of ones after the
   * mbarriers (v42); with lse the softmax keeps its adds. */
  gen_variant d64, d64_lse;
  TU_OK(gen_variant_parse("fa3.bf16.d64.none.g1.bm192.bn128.w12.s2.ws", &d64));
  TU_OK(gen_variant_parse("fa3.bf16.d64.none.g1.bm192.bn128.w12.s2.ws.lse", &d64_lse));
  assert_int_equal(gen_smem_bytes(&d64), gen_smem_bytes(&d64_lse) + 256);
  TU_OK(gen_emit(&d64, &t, &src));
  assert_non_null(strstr(src, "#define FA3_ONES_BLOCK 1\n"));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 ")); /* the row sums */
  free(src);
  TU_OK(gen_emit(&d64_lse, &t, &src));
  assert_null(strstr(src, "#define FA3_ONES_BLOCK 1"));
  assert_null(strstr(src, "m64n8k16"));
  free(src);

  at_shape s = shape_of(AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_TL, 32, 8, 1);
  s.batch = 3, s.q_len = s.kv_len = 1000;
  gen_launch_desc d;
  TU_OK(gen_launch_describe(&v, &s, &d));
  const gen_kernel_launch *k = &d.kernels[0];
  assert_int_equal(k->block[0], 384u);
  assert_int_equal(k->grid[0], 32u);
  assert_int_equal(k->grid[1], 3u);
  assert_int_equal(k->grid[2], 8u); /* ceil(1000 / 128) */
  assert_int_equal(k->args[k->n_args - 3], GEN_ARG_TMAP_Q);
  assert_int_equal(k->args[k->n_args - 1], GEN_ARG_TMAP_V);
  assert_int_equal(d.tmap_rows[0], 128);
  assert_int_equal(d.tmap_rows[1], 176);
  s.mask = AT_MASK_NONE, v.spec.mask = AT_MASK_NONE;
  TU_OK(gen_launch_describe(&v, &s, &d));
  assert_int_equal(d.kernels[0].grid[0], 8u);
  assert_int_equal(d.kernels[0].grid[2], 3u);

  /* Refusals. */
  gen_variant bad = v;
  bad.spec.dtype = AT_DTYPE_E4M3; /* FP8 keeps v5's V^T layout: block_n 64 or 128 */
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "block_n 64 or 128"));
  bad.block_n = 128;
  TU_OK(gen_variant_check(&bad, &t));
  bad.spec.head_dim = 64;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "head dim 128 or 256"));
  bad = v, bad.warps = 4, bad.block_m = 64;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "consumer warpgroups"));
  bad = v, bad.block_n = 72;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "multiple of 16"));
  bad = v, bad.block_n = 256, bad.stages = 3;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED); /* shared memory */
  bad = v, bad.ws = 3;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  assert_int_equal(gen_variant_parse("fa2.bf16.d128.none.g1.bm128.bn64.w4.s2.ws", &back), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "no warp-specialized"));
  assert_int_equal(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.obf16.ws", &back), AT_ERR_INVALID);

  /* 16-bit fa3 defaults are warp-specialized; so are FP8's, with V^T ahead (test_fa3_vt_family).
   * Causal prefill of up to 4096 rows at D 128 over up to 16384 keys (T = S, or T < S
   * bottom-right) takes the persistent 128-row tile (v43); more rows or keys, T < S top-left and
   * the other head dims keep the grid's tiles. */
  gen_variant def;
  s = shape_of(AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_TL, 32, 8, 0);
  s.q_len = s.kv_len = 4096;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.family, GEN_FAMILY_FA3);
  assert_int_equal(def.persistent, 1);
  assert_int_equal(def.ws, 2);
  assert_int_equal(def.block_m, 128);
  assert_int_equal(def.block_n, 128);
  s.q_len = s.kv_len = 8192;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.persistent, 0);
  assert_int_equal(def.ws, 1);
  assert_int_equal(def.block_m, 192);
  s.q_len = 2048, s.kv_len = 8192, s.mask = AT_MASK_CAUSAL_BR; /* chunked prefill */
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.persistent, 1);
  s.kv_len = 32768;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.persistent, 0);
  s.kv_len = 8192, s.mask = AT_MASK_CAUSAL_TL; /* top-left with T < S: not measured */
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.persistent, 0);
  s = shape_of(AT_DTYPE_BF16, 256, AT_MASK_CAUSAL_BR, 16, 16, 0);
  s.q_len = s.kv_len = 4096;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.persistent, 0);
  assert_int_equal(def.block_n, 80);
  s = shape_of(AT_DTYPE_F16, 64, AT_MASK_CAUSAL_TL, 16, 16, 0);
  s.q_len = s.kv_len = 4096;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.persistent, 0);
  s = shape_of(AT_DTYPE_BF16, 128, AT_MASK_NONE, 16, 16, 0);
  s.q_len = s.kv_len = 4096;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.persistent, 0);
  s = shape_of(AT_DTYPE_E4M3, 128, AT_MASK_NONE, 16, 16, 0);
  s.q_len = s.kv_len = 8192;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.ws, 1);
  assert_int_equal(def.vt, 1);
}

/* The digit of the generator's `#define NAME d` for KEY on sm_90a (its preamble, ahead of the
 * template's `#ifndef NAME` default), or -1 where the template's default alone is there. */
static int generated_define(const char *key, const char *name)
{
  gen_target t = tu_sm90();
  gen_variant v;
  char *src = NULL, line_start[64], fallback_start[64];
  snprintf(line_start, sizeof line_start, "#define %s ", name);
  snprintf(fallback_start, sizeof fallback_start, "#ifndef %s", name);
  TU_OK(gen_variant_parse(key, &v));
  TU_OK(gen_emit(&v, &t, &src));
  const char *line = strstr(src, line_start), *fallback = strstr(src, fallback_start);
  assert_non_null(fallback);
  const int value = line && line < fallback ? line[strlen(line_start)] - '0' : -1;
  free(src);
  return value;
}

/* The speculative row max (templates/fa3.cu, FA3_SPEC): emitted on for the warp-specialized
 * tiles whose registers allow it, off for FP8 .ws (not .wspp) at D 256 from block_n 128 and for 16-bit
 * two-consumer tiles at block_n 192 and more (where ptxas spilled), and never for the in-CTA
 * kernel. */
static void test_fa3_speculative_max(void **state)
{
  (void)state;
  static const struct {
    const char *key;
    int spec; /* -1: no FA3_SPEC line at all */
  } cases[] = {
      {"fa3.e4m3.d128.none.g1.bm192.bn96.w12.s2.ws.vt.obf16", 1},
      {"fa3.e4m3.d128.none.g1.bm128.bn224.w8.s3.ws.vt.obf16", 1},
      {"fa3.bf16.d128.none.g1.bm192.bn80.w12.s2.ws", 1},
      {"fa3.bf16.d128.causal.g4.bm128.bn176.w8.s2.wspp.lse", 1},
      {"fa3.f16.d192.causal.g4.bm128.bn96.w8.s2.ws.lse", 1},
      {"fa3.bf16.d128.causal.g4.bm128.bn128.w8.s2.wspp.pers.lse", 1},
      {"fa3.bf16.d128.none.g1.bm128.bn192.w8.s2.ws", 0},
      {"fa3.bf16.d256.none.g1.bm128.bn80.w8.s2.ws", 1},
      {"fa3.f16.d256.causal.g2.bm128.bn64.w8.s2.wspp.pers.lse", 1},
      {"fa3.e4m3.d256.none.g1.bm128.bn96.w8.s3.ws.vt.obf16", 1},
      {"fa3.e4m3.d256.none.g1.bm128.bn128.w8.s2.ws.vt.obf16", 0},
      {"fa3.e4m3.d256.causal.g1.bm128.bn128.w8.s3.wspp.vt.obf16.lse", 1},
      {"fa3.bf16.d128.none.g1.bm128.bn128.w8.s2", -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    assert_int_equal(generated_define(cases[i].key, "FA3_SPEC"), cases[i].spec);
}

/* Linear P (templates/fa3.cu, FA3_LINP): the share of S's n8-tile pairs taken linearly, where
 * the tensor cores sum P's rows (FP8 .vt without lse) and the speculative max runs: every pair at
 * D 128 (v37) and D 64 (v41), two or three consumers; every second in D 256's two consumers; no
 * line elsewhere, so the template's default (0) holds. */
static void test_fa3_linear_p(void **state)
{
  (void)state;
  static const struct {
    const char *key;
    int linp; /* -1: no FA3_LINP line (the template's default, 0) */
  } cases[] = {
      {"fa3.e4m3.d128.none.g1.bm128.bn224.w8.s2.ws.vt.obf16", 1},
      {"fa3.e5m2.d128.causal.g4.bm128.bn192.w8.s2.wspp.vt.obf16", 1},
      {"fa3.e4m3.d128.none.g1.bm192.bn96.w12.s2.ws.vt.obf16", 1}, /* three consumers too (v37) */
      {"fa3.e4m3.d128.none.g1.bm128.bn224.w8.s2.ws.vt.obf16.lse", -1},
      {"fa3.e4m3.d128.none.g1.bm128.bn64.w8.s2.ws.obf16", -1},
      {"fa3.bf16.d128.none.g1.bm192.bn80.w12.s2.ws", -1},
      {"fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.obf16", -1},
      /* D 64 (v30): its row sums on the tensor cores too; every pair since v41 */
      {"fa3.e4m3.d64.none.g1.bm128.bn128.w8.s2.ws.vt.obf16", 1},
      {"fa3.e4m3.d64.none.g1.bm192.bn128.w12.s2.ws.vt.obf16", 1}, /* three consumers too at D 64 (v33) */
      {"fa3.e4m3.d64.none.g1.bm128.bn128.w8.s2.ws.vt.obf16.lse", -1},
      /* D 256 (v32): the sums on the tensor cores (v31), and linear P where the speculative max
       * runs in two consumers (.wspp at block_n 128, any kind below it) */
      {"fa3.e4m3.d256.none.g1.bm128.bn128.w8.s2.wspp.vt.obf16", 2},
      {"fa3.e4m3.d256.none.g1.bm128.bn96.w8.s2.ws.vt.obf16", 2},
      {"fa3.e4m3.d256.none.g1.bm128.bn128.w8.s2.ws.vt.obf16", -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    assert_int_equal(generated_define(cases[i].key, "FA3_LINP"), cases[i].linp);
}

/* V^T ahead (.vt after .ws/.wspp, FP8): keys round-trip and old keys keep vt 0; the refusals name
 * the field; the module has the transpose kernel as a second entry; a call launches it first
 * (entry 1, into the scratch) and then the attention kernel (entry 0, a programmatic dependent)
 * with the scratch's V^T tensor map in place of V's; the scratch holds B x Nkv x D x S' bytes, S'
 * = S rounded up to block_n; the listing puts .vt first, then the in-CTA tiles and the older
 * warp-specialized FP8 ones. */
static void test_fa3_vt_family(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant v, back;
  char key[GEN_KEY_MAX], names[GEN_MAX_KERNELS][GEN_ENTRY_MAX], *src = NULL;
  int n = 0;
  TU_OK(gen_variant_parse("fa3.e4m3.d128.causal.g4.bm128.bn192.w8.s2.wspp.vt.obf16.lse", &v));
  assert_int_equal(v.ws, 2);
  assert_int_equal(v.vt, 1);
  TU_OK(gen_variant_check(&v, &t));
  TU_OK(gen_variant_key(&v, key, sizeof key));
  assert_string_equal(key, "fa3.e4m3.d128.causal.g4.bm128.bn192.w8.s2.wspp.vt.obf16.lse");
  assert_int_equal(gen_threads(&v), 3 * 128);
  assert_int_equal(gen_smem_bytes(&v), 1024 + 128 * 128 + 4 * 192 * 128 + 256); /* no V^T buffers */
  /* Without lse, at D 128, each V stage holds 8 rows of ones after V^T's 128 (FA3_ONES). */
  gen_variant ones;
  TU_OK(gen_variant_parse("fa3.e4m3.d128.causal.g4.bm128.bn192.w8.s2.wspp.vt.obf16", &ones));
  assert_int_equal(gen_smem_bytes(&ones), 1024 + 128 * 128 + 2 * 192 * 128 + 2 * 192 * 136 + 256);
  TU_OK(gen_emit(&ones, &t, &src));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n136k32.f32.e4m3.e4m3"));
  free(src);
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"));
  free(src);
  src = NULL;
  TU_OK(gen_variant_parse("fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.ws.obf16", &back));
  assert_int_equal(back.vt, 0);
  TU_OK(gen_entry_names(&back, names, &n));
  assert_int_equal(n, 1);
  TU_OK(gen_entry_names(&v, names, &n));
  assert_int_equal(n, 2);
  assert_string_equal(names[1], "fa3_e4m3_d128_causal_g4_bm128_bn192_w8_s2_wspp_vt_obf16_lse_vt");
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "#define FA3_VT_PRE 1\n#define FA3_VT_KERNEL fa3_e4m3_d128_causal_g4_bm128_bn192_w8_s2_wspp_vt_obf16_lse_vt\n"));
  free(src);

  /* D 256 (v31): the ones rows too, but n 264 is past wgmma's 256, so P V stays n 256 and the
   * sums are a second wgmma of n 8; no linear P there. With the lse, no ones rows. */
  gen_variant wide;
  TU_OK(gen_variant_parse("fa3.e4m3.d256.none.g1.bm128.bn128.w8.s2.wspp.vt.obf16", &wide));
  TU_OK(gen_variant_check(&wide, &t));
  assert_int_equal(gen_smem_bytes(&wide), 1024 + 128 * 256 + 2 * 128 * 256 + 2 * 128 * 264 + 256);
  TU_OK(gen_emit(&wide, &t, &src));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"));
  assert_null(strstr(src, "m64n264"));
  free(src);
  src = NULL;
  wide.spec.with_lse = 1;
  assert_int_equal(gen_smem_bytes(&wide), 1024 + 128 * 256 + 4 * 128 * 256 + 256);
  TU_OK(gen_emit(&wide, &t, &src));
  assert_null(strstr(src, "m64n8k32"));
  free(src);
  src = NULL;

  /* The launch: B 3, Nq 16 / Nkv 4, T 1000, S 1000 -> S' = 1152 (6 tiles of 192). */
  at_shape s = shape_of(AT_DTYPE_E4M3, 128, AT_MASK_CAUSAL_TL, 16, 4, 1);
  s.batch = 3, s.q_len = 1000, s.kv_len = 1000;
  gen_launch_desc d;
  TU_OK(gen_launch_describe(&v, &s, &d));
  assert_int_equal(d.n_kernels, 2);
  const gen_kernel_launch *tr = &d.kernels[0], *k = &d.kernels[1];
  assert_int_equal(tr->entry, 1);
  assert_int_equal(k->entry, 0);
  assert_int_equal(tr->grid[0], 9u); /* ceil(1152 / 128) */
  assert_int_equal(tr->grid[1], 4u); /* Nkv x D / 128 */
  assert_int_equal(tr->grid[2], 3u);
  assert_int_equal(tr->block[0], 256u);
  assert_int_equal(tr->args[0], GEN_ARG_V);
  assert_int_equal(tr->args[1], GEN_ARG_SCRATCH);
  assert_int_equal(tr->waits_for_previous, 1);
  assert_int_equal(k->waits_for_previous, 1);
  assert_int_equal(k->block[0], 384u);
  assert_int_equal(k->grid[0], 16u); /* causal: (Nq, B, query blocks) */
  assert_int_equal(k->grid[2], 8u);
  assert_int_equal(k->args[k->n_args - 2], GEN_ARG_TMAP_K);
  assert_int_equal(k->args[k->n_args - 1], GEN_ARG_TMAP_SCRATCH);
  assert_int_equal(d.tmap_rows[0], 128);
  assert_int_equal(d.tmap_rows[1], 192);
  assert_int_equal(d.tmap_rows[2], 0); /* no map of V */
  assert_int_equal(d.scratch_bytes, (size_t)3 * 4 * 128 * 1152);
  assert_int_equal(d.scratch_tmap.dims[0], 1152u);
  assert_int_equal(d.scratch_tmap.dims[1], 128u);
  assert_int_equal(d.scratch_tmap.dims[2], 4u);
  assert_int_equal(d.scratch_tmap.dims[3], 3u);
  assert_int_equal(d.scratch_tmap.strides[0], 1152u);
  assert_int_equal(d.scratch_tmap.strides[2], (unsigned long long)1152 * 128 * 4);
  assert_int_equal(d.scratch_tmap.box[0], 64u); /* 192 keys: three column blocks of 64 */
  assert_int_equal(d.scratch_tmap.box[1], 128u);
  assert_int_equal(d.scratch_tmap.swizzle_bytes, 64);
  /* block_n 128 at D 256: boxes of 128 keys in the 128-byte swizzle; S 77 -> S' 128; T 0: no launch. */
  TU_OK(gen_variant_parse("fa3.e5m2.d256.none.g1.bm128.bn128.w8.s3.ws.vt.obf16", &back));
  /* 3 stages with the ones rows (v31) are past the shared memory: 233728 bytes */
  assert_int_equal(gen_variant_check(&back, &t), AT_ERR_UNSUPPORTED);
  back.stages = 2;
  TU_OK(gen_variant_check(&back, &t));
  s = shape_of(AT_DTYPE_E5M2, 256, AT_MASK_NONE, 2, 2, 0);
  s.batch = 1, s.q_len = 5, s.kv_len = 77;
  TU_OK(gen_launch_describe(&back, &s, &d));
  assert_int_equal(d.kernels[0].grid[0], 1u);
  assert_int_equal(d.kernels[0].grid[1], 4u);
  assert_int_equal(d.scratch_bytes, (size_t)2 * 256 * 128);
  assert_int_equal(d.scratch_tmap.box[0], 128u);
  assert_int_equal(d.scratch_tmap.swizzle_bytes, 128);
  /* D 64: Q and K rows of 64 bytes, so the maps' boxes and swizzle are 64 bytes (the other tiles'
   * 128); the transpose runs one 64-byte piece of D per K/V head; V^T boxes are 64 rows. Without
   * .vt FP8 D 64 has no warp-specialized kernel. */
  gen_variant d64;
  TU_OK(gen_variant_parse("fa3.e4m3.d64.none.g1.bm192.bn128.w12.s2.ws.vt.obf16", &d64));
  TU_OK(gen_variant_check(&d64, &t));
  /* V stages with the 8 ones rows (v30: row sums by the tensor cores at D 64 too) */
  assert_int_equal(gen_smem_bytes(&d64), 1024 + 192 * 64 + 2 * 128 * 64 + 2 * 128 * 72 + 256);
  s = shape_of(AT_DTYPE_E4M3, 64, AT_MASK_NONE, 2, 2, 0);
  s.batch = 2, s.q_len = 1000, s.kv_len = 1000;
  TU_OK(gen_launch_describe(&d64, &s, &d));
  assert_int_equal(d.tmap_box_bytes, 64);
  assert_int_equal(d.kernels[0].grid[0], 8u); /* ceil(1024 / 128) */
  assert_int_equal(d.kernels[0].grid[1], 2u); /* Nkv x one piece */
  assert_int_equal(d.scratch_bytes, (size_t)2 * 2 * 64 * 1024);
  assert_int_equal(d.scratch_tmap.box[1], 64u);
  TU_OK(gen_emit(&d64, &t, &src));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n72k32.f32.e4m3.e4m3")); /* P V: D 64 + 8 */
  free(src);
  src = NULL;
  d64.vt = 0;
  assert_int_equal(gen_variant_check(&d64, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "or 64 with V^T ahead (.vt), not 64 without .vt"));
  TU_OK(gen_variant_parse("fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.ws.vt.obf16", &d64));
  s.head_dim = 128;
  TU_OK(gen_launch_describe(&d64, &s, &d));
  assert_int_equal(d.tmap_box_bytes, 128);
  /* block_n 224 (FA3's FP8 D128 tile): seven column blocks of 32 keys, the 32-byte swizzle. */
  TU_OK(gen_variant_parse("fa3.e4m3.d128.none.g1.bm128.bn224.w8.s2.ws.vt.obf16", &v));
  TU_OK(gen_variant_check(&v, &t));
  s = shape_of(AT_DTYPE_E4M3, 128, AT_MASK_NONE, 2, 2, 0);
  s.batch = 1, s.q_len = 300, s.kv_len = 300;
  TU_OK(gen_launch_describe(&v, &s, &d));
  assert_int_equal(d.scratch_tmap.dims[0], 448u);
  assert_int_equal(d.scratch_tmap.box[0], 32u);
  assert_int_equal(d.scratch_tmap.swizzle_bytes, 32);
  TU_OK(gen_variant_parse("fa3.e4m3.d128.causal.g4.bm128.bn192.w8.s2.wspp.vt.obf16.lse", &v));
  s = shape_of(AT_DTYPE_E5M2, 256, AT_MASK_NONE, 2, 2, 0);
  s.batch = 1, s.q_len = 0, s.kv_len = 77;
  TU_OK(gen_launch_describe(&back, &s, &d));
  assert_int_equal(d.kernels[0].grid[0], 0u);
  assert_int_equal(d.kernels[1].grid[0], 0u);

  /* Refusals. */
  gen_variant bad = v;
  bad.block_n = 176;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "multiple of 32"));
  bad = v, bad.spec.dtype = AT_DTYPE_BF16, bad.spec.out_dtype = AT_DTYPE_BF16;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "e4m3 or e5m2"));
  bad = v, bad.ws = 0;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "ws 1 or 2"));
  bad = v, bad.vt = 2;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  bad = v, bad.spec.head_dim = 256; /* 128 + 96 + 24 + 32 registers > 240 */
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_int_equal(gen_variant_parse("fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.vt.obf16", &back), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "needs .ws or .wspp"));
  assert_int_equal(gen_variant_parse("fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.vt.ws.obf16", &back), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "canonical"));
  assert_int_equal(gen_variant_parse("fa2.e4m3.d128.none.g1.bm128.bn128.w8.s2.ws.vt.obf16", &back), AT_ERR_INVALID);

  /* Listing order for FP8: .vt, then in-CTA, then the warp-specialized kernel that transposes. */
  s = shape_of(AT_DTYPE_E4M3, 128, AT_MASK_NONE, 16, 16, 0);
  s.q_len = s.kv_len = 8192;
  gen_variant vs[GEN_MAX_VARIANTS];
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  int last_vt = -1, first_ws = -1, first_in_cta = -1, last_in_cta = -1, n_vt = 0;
  for (int i = 0; i < n; i++) {
    if (vs[i].family != GEN_FAMILY_FA3) continue;
    if (vs[i].vt) {
      n_vt++, last_vt = i;
    } else if (vs[i].ws) {
      if (first_ws < 0) first_ws = i;
    } else {
      if (first_in_cta < 0) first_in_cta = i;
      last_in_cta = i;
    }
  }
  assert_true(n_vt >= 12);
  assert_true(first_in_cta > last_vt && last_in_cta < first_ws);
  /* The default is .vt's 128x224, 2 stages at D=128 (v20) and 128x128, 2 stages with ping-pong
   * at D=256;
   * at D=64 192x128 with three consumers (v30). */
  gen_variant def;
  TU_OK(gen_default_variant(&s, &t, &def));
  TU_OK(gen_variant_key(&def, key, sizeof key));
  assert_string_equal(key, "fa3.e4m3.d128.none.g1.bm128.bn224.w8.s2.ws.vt.obf16");
  s.head_dim = 256;
  TU_OK(gen_default_variant(&s, &t, &def));
  TU_OK(gen_variant_key(&def, key, sizeof key));
  assert_string_equal(key, "fa3.e4m3.d256.none.g1.bm128.bn128.w8.s2.wspp.vt.obf16");
  s.head_dim = 64;
  TU_OK(gen_default_variant(&s, &t, &def));
  TU_OK(gen_variant_key(&def, key, sizeof key));
  assert_string_equal(key, "fa3.e4m3.d64.none.g1.bm192.bn128.w12.s2.ws.vt.tw132.obf16"); /* this shape's tail splits */
  s.head_dim = 128;
  /* 16-bit inputs list no .vt. */
  s.dtype = AT_DTYPE_BF16;
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  for (int i = 0; i < n; i++) assert_int_equal(vs[i].vt, 0);
}

/* The spill-free promise for FP8: every variant listed for D {64, 128, 256} x {none, causal} x
 * {e4m3, e5m2} x {MHA, GQA 4} compiles for sm_90a with no spills and no stack (fa2 with MMAs via
 * f16 and fa3 with wgmma; D=256 lists fa3 only there), plus the other output dtypes at D=128 and the native m16n8k32 form on sm_89 (all of
 * D=256, which fits there, and D=128 e4m3). */
static void test_fp8_compile_no_spills(void **state)
{
  (void)state;
  gen_target t = tu_sm90(), sm89;
  TU_OK(gen_target_for_arch("sm_89", &sm89));
  const int dims[] = {64, 128, 256};
  const at_mask masks[] = {AT_MASK_NONE, AT_MASK_CAUSAL_TL};
  const at_dtype dtypes[] = {AT_DTYPE_E4M3, AT_DTYPE_E5M2};
  const int gqa[] = {1, 4};
  int cap = 3 * 2 * 2 * 2 * GEN_MAX_VARIANTS + 4 * GEN_MAX_VARIANTS, n = 0, bad = 0;
  gen_variant *all = calloc((size_t)cap, sizeof *all);
  assert_non_null(all);
  for (int d = 0; d < 3; d++)
    for (int m = 0; m < 2; m++)
      for (int dt = 0; dt < 2; dt++)
        for (int g = 0; g < 2; g++) {
          at_shape s = shape_of(dtypes[dt], dims[d], masks[m], 8 * gqa[g], 8, 0);
          int k = 0;
          at_status rc = gen_enumerate(&s, &t, all + n, cap - n, &k);
          if (dims[d] == 256 && rc == AT_ERR_UNSUPPORTED) continue; /* none listed (registers) */
          TU_OK(rc);
          n += without_ws(all + n, k);
        }
  /* f16 and FP8 outputs (with lse) at D=128, e4m3 -> e4m3 and e5m2 -> f16. */
  {
    at_shape s = shape_of(AT_DTYPE_E4M3, 128, AT_MASK_CAUSAL_TL, 32, 8, 1);
    int k = 0;
    TU_OK(gen_enumerate_out(&s, AT_DTYPE_E4M3, &t, all + n, cap - n, &k));
    n += without_ws(all + n, k);
    s.dtype = AT_DTYPE_E5M2;
    TU_OK(gen_enumerate_out(&s, AT_DTYPE_F16, &t, all + n, cap - n, &k));
    n += without_ws(all + n, k);
  }
  bad += tu_compile_count_bad(all, n, &t, "FP8 (fa2 via f16 MMAs, fa3 wgmma)");

  n = 0;
  for (int m = 0; m < 2; m++)
    for (int dt = 0; dt < 2; dt++) {
      at_shape s = shape_of(dtypes[dt], 256, masks[m], 32, 8, 0);
      int k = 0;
      TU_OK(gen_enumerate(&s, &sm89, all + n, cap - n, &k));
      n += k;
    }
  {
    at_shape s = shape_of(AT_DTYPE_E4M3, 128, AT_MASK_CAUSAL_TL, 32, 8, 1);
    int k = 0;
    TU_OK(gen_enumerate(&s, &sm89, all + n, cap - n, &k));
    n += k;
  }
  bad += tu_compile_count_bad(all, n, &sm89, "FP8 m16n8k32");
  free(all);
  assert_int_equal(bad, 0);
}

/* Each family has its own version (common.cuh + its template); a row goes stale only when its own
 * family's part changes, a cuDNN row when any part does, an old single "tpl-" version always. */
static void test_template_versions(void **state)
{
  (void)state;
  char now[256], fa2[48], fa3[48], why[256];
  gen_templates_version(now, sizeof now);
  gen_family_version(GEN_FAMILY_FA2, fa2, sizeof fa2);
  gen_family_version(GEN_FAMILY_FA3, fa3, sizeof fa3);
  assert_true(strncmp(fa2, "fa2-", 4) == 0 && strlen(fa2) == 12);
  assert_true(strncmp(fa3, "fa3-", 4) == 0 && strcmp(fa2 + 4, fa3 + 4) != 0);
  assert_non_null(strstr(now, fa2));
  assert_non_null(strstr(now, fa3));
  assert_non_null(strstr(now, ".naive-"));
  for (int f = 0; f < GEN_FAMILY_COUNT; f++) { /* every family's name maps back to it */
    const char *name = gen_family_name((gen_family)f);
    assert_int_equal(gen_family_of_name(name, strlen(name)), f);
  }

  /* The same library: everything current. */
  assert_true(gen_version_current(now, now, "fa2.bf16.d128.none.g1.bm128.bn64.w4.s2", why, sizeof why));
  assert_true(gen_version_current(now, now, "cudnn", why, sizeof why));
  assert_true(gen_version_current(now, now, "naive", why, sizeof why));

  /* A row recorded when fa3's template was different: fa2 and naive rows stay current. */
  char old_fa3[256];
  snprintf(old_fa3, sizeof old_fa3, "%s", now);
  char *part = strstr(old_fa3, "fa3-");
  part[4] = part[4] == '0' ? '1' : '0';
  assert_true(gen_version_current(old_fa3, now, "fa2.bf16.d128.none.g1.bm128.bn64.w4.s2", why, sizeof why));
  assert_true(gen_version_current(old_fa3, now, "naive", why, sizeof why));
  assert_false(gen_version_current(old_fa3, now, "fa3.bf16.d128.none.g1.bm128.bn128.w8.s2", why, sizeof why));
  assert_non_null(strstr(why, "fa3 kernels"));
  assert_false(gen_version_current(old_fa3, now, "cudnn", why, sizeof why));
  assert_non_null(strstr(why, "cuDNN measured fastest"));

  /* Rows from before per-family versions. */
  assert_false(gen_version_current("tpl-0123456789ab", now, "fa2.bf16.d128.none.g1.bm128.bn64.w4.s2", why,
                                   sizeof why));
  assert_non_null(strstr(why, "one version for all families"));
}

/* ---- decode -------------------------------------------------------------------------------- */

static at_shape decode_shape(at_dtype dtype, int d, at_mask mask, int nq, int nkv, int t, int kv)
{
  at_shape s = shape_of(dtype, d, mask, nq, nkv, 1);
  s.batch = 2, s.q_len = t, s.kv_len = kv;
  return s;
}

static int count_family(const gen_variant *vs, int n, gen_family f)
{
  int k = 0;
  for (int i = 0; i < n; i++) k += vs[i].family == f;
  return k;
}

/* The default merges its splits in the combine kernel, also where the grid is small enough for
 * the in-kernel merges to be listed (B=1, Nkv=8 on 132 SMs; .cl lost there after decode step
 * 27); it is a listed variant, and .cl is listed beside it. One token with 16-bit K/V takes half
 * the one-wave split count (16 there: 8), two tokens the whole; with half the row groups
 * (Nkv=4: 32, the tiles of S4k -> 16), or an FP8 KV cache, it merges in the combine kernel too. */
static void test_decode_default_merge(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant vs[GEN_MAX_VARIANTS], def;
  int n = 0;
  at_shape s = decode_shape(AT_DTYPE_BF16, 128, AT_MASK_NONE, 32, 8, 1, 4096);
  s.batch = 1;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.merge, GEN_MERGE_KERNEL);
  assert_int_equal(def.splits, 8);
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  int listed = 0, listed_cl = 0;
  for (int i = 0; i < n; i++) {
    listed += memcmp(&vs[i], &def, sizeof def) == 0;
    listed_cl += vs[i].merge == GEN_MERGE_CLUSTER;
  }
  assert_int_equal(listed, 1);
  assert_true(listed_cl > 0);
  s.q_len = 2, s.mask = AT_MASK_CAUSAL_BR;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.splits, 16);
  s.q_len = 1, s.mask = AT_MASK_NONE;
  s.kv_heads = 4;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.merge, GEN_MERGE_KERNEL);
  assert_int_equal(def.splits, 16); /* one wave: 33 splits, cut to the 32 tiles of S4k */
  s.kv_heads = 8, s.kv_dtype = AT_DTYPE_E4M3;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.merge, GEN_MERGE_KERNEL);
}

/* .wg (decode's packed rows on wgmma): listed first where a CTA packs more than 32 rows, on sm_90a
 * with contiguous K/V only (FP8 K/V where D is a multiple of 128: a widening warpgroup for the producer warp),
 * one warpgroup per 64 rows and a TMA producer warp (K and V tensor maps), the default past 64
 * rows; its key round-trips; the combine
 * kernel merges its splits; what it cannot run is refused by name. */
/* Every listed .wgi or .wgi3 variant of shape (`partials` consumer warpgroups on the same 64
 * rows, 16 warps a CTA): its key (ending in suffix) round-trips; one split writes `partials`
 * partials a row, which the combine kernel merges, and a split count that many times the grid; it
 * fits shared memory; its source holds every string of `present` (NULL-ended) and none of
 * `absent`. There is at least one. */
static void check_listed_wgi(const at_shape *shape, const gen_target *t, int partials, const char *suffix,
                            const char *const *present, const char *const *absent)
{
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0, listed = 0;
  TU_OK(gen_enumerate(shape, t, vs, GEN_MAX_VARIANTS, &n));
  for (int i = 0; i < n; i++) {
    const gen_variant *v = &vs[i];
    if (v->wg != partials) continue;
    listed++;
    char key[GEN_KEY_MAX];
    TU_OK(gen_variant_key(v, key, sizeof key));
    assert_non_null(strstr(key, suffix));
    gen_variant again;
    TU_OK(gen_variant_parse(key, &again));
    assert_memory_equal(&again, v, sizeof again);
    gen_variant one = *v;
    one.splits = 1;
    gen_launch_desc d;
    TU_OK(gen_launch_describe(&one, shape, &d));
    assert_int_equal(d.kernels[0].block[0], 32u * 16u);
    assert_int_equal(d.kernels[0].grid[0], 1u);
    assert_int_equal(d.n_splits, partials);
    assert_int_equal(d.n_kernels, 2);
    assert_true(d.scratch_bytes >= (size_t)partials * 32 * 8 * (128 + 1) * sizeof(float));
    assert_true(d.kernels[0].smem_bytes <= (unsigned)t->smem_limit);
    TU_OK(gen_launch_describe(v, shape, &d));
    assert_int_equal((unsigned)d.n_splits, (unsigned)partials * d.kernels[0].grid[0]);
    char *src = NULL;
    TU_OK(gen_emit(v, t, &src));
    for (const char *const *p = present; *p; p++) assert_non_null(strstr(src, *p));
    for (const char *const *p = absent; *p; p++) assert_null(strstr(src, *p));
    free(src);
  }
  assert_true(listed > 0);
}

static void test_decode_wg(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant vs[GEN_MAX_VARIANTS], back;
  char key[GEN_KEY_MAX];
  int n = 0;
  at_shape s = decode_shape(AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_BR, 32, 4, 16, 65536); /* 128 rows */
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  assert_true(n > 0);
  assert_int_equal(vs[0].wg, 1);
  int wg = 0;
  for (int i = 0; i < n; i++) {
    if (!vs[i].wg) continue;
    wg++;
    assert_int_equal(vs[i].warps, 8);
    assert_int_equal(vs[i].merge, GEN_MERGE_KERNEL);
    TU_OK(gen_variant_key(&vs[i], key, sizeof key));
    assert_non_null(strstr(key, ".wg"));
    TU_OK(gen_variant_parse(key, &back));
    assert_memory_equal(&back, &vs[i], sizeof back);
    gen_launch_desc d;
    TU_OK(gen_launch_describe(&vs[i], &s, &d));
    assert_int_equal(d.kernels[0].block[0], 32u * (unsigned)(vs[i].warps + 1)); /* and the TMA producer warp */
    assert_int_equal(d.kernels[0].args[d.kernels[0].n_args - 1], GEN_ARG_TMAP_V);
    assert_int_equal(d.kernels[0].args[d.kernels[0].n_args - 2], GEN_ARG_TMAP_K);
    assert_int_equal(d.tmap_rows[1], vs[i].block_n);
    assert_int_equal(d.tmap_rows[2], vs[i].block_n);
    assert_int_equal(d.kernels[0].args[d.kernels[0].n_args - 3], GEN_ARG_TMAP_Q);
    assert_int_equal(d.tmap_rows[0], vs[i].block_m); /* Q: boxes of G heads by block_m tokens */
    assert_int_equal(d.tmap_q_heads, 8);
    assert_int_equal(d.tmap_kv_promotion, 256); /* 16-bit: a head's row is two boxes, both this CTA's */
    assert_true(d.kernels[0].smem_bytes >=
                (unsigned)(8 * vs[i].block_m * 256 + 2 * vs[i].stages * vs[i].block_n * 256));
  }
  assert_true(wg > 0);
  gen_variant def;
  TU_OK(gen_default_variant(&s, &t, &def)); /* more than 64 rows: .wg */
  assert_int_equal(def.wg, 1);
  assert_int_equal(def.block_n, 64);
  s.q_len = 8; /* 64 rows at D 128: .wg too (decode step 36) */
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.wg, 1);
  assert_int_equal(def.warps, 4);
  s.q_len = 4; /* 32 rows: mma.sync's */
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.wg, 0);
  at_shape d64 = decode_shape(AT_DTYPE_F16, 64, AT_MASK_CAUSAL_BR, 32, 4, 8, 4096); /* 64 rows at D 64: mma.sync's */
  TU_OK(gen_default_variant(&d64, &t, &def));
  assert_int_equal(def.wg, 0);
  s.q_len = 16;
  TU_OK(gen_variant_parse("decode.bf16.d128.none.g4.bm16.bn64.w4.s3.sp8.wg", &back));
  assert_int_equal(back.wg, 1);
  TU_OK(gen_variant_check(&back, &t));
  /* FP8 K/V at D 128: listed, with the widening warpgroup, and staging for the FP8 tiles */
  at_shape fp8kv = s;
  fp8kv.kv_dtype = AT_DTYPE_E4M3;
  TU_OK(gen_enumerate(&fp8kv, &t, vs, GEN_MAX_VARIANTS, &n));
  assert_true(n > 0);
  assert_int_equal(vs[0].wg, 1);
  {
    gen_launch_desc d;
    TU_OK(gen_launch_describe(&vs[0], &fp8kv, &d));
    assert_int_equal(d.kernels[0].block[0], 32u * (unsigned)(vs[0].warps + 4));
    assert_true(d.kernels[0].smem_bytes >= (unsigned)(8 * vs[0].block_m * 256 + 2 * vs[0].stages * vs[0].block_n * 384));
    TU_OK(gen_variant_key(&vs[0], key, sizeof key));
    assert_non_null(strstr(key, ".kve4m3."));
    assert_non_null(strstr(key, ".wg"));
    /* a head's FP8 row is one 128-byte box: K and V promote 128 bytes into L2 (decode step 37) */
    assert_int_equal(d.tmap_kv_promotion, 128);
  }
  fp8kv.q_len = 8; /* 64 rows: with an FP8 KV cache the default is .wgi3 at S 64k (three consumer warpgroups) */
  TU_OK(gen_default_variant(&fp8kv, &t, &def));
  assert_int_equal(def.wg, 3);
  assert_int_equal(def.stages, 6);
  fp8kv.kv_len = 16384; /* shorter: .wgi (two) */
  TU_OK(gen_default_variant(&fp8kv, &t, &def));
  assert_int_equal(def.wg, 2);
  assert_int_equal(def.stages, 6); /* bf16 Q: K read as FP8 (DEC_WG_K8), so 6 stages fit */
  fp8kv.kv_len = 65536;
  def.wg = 1, def.stages = 4;
  { /* .wg, one consumer warpgroup: two widening warpgroups, so 4 + 8 warps and an even stage count */
    gen_launch_desc d;
    TU_OK(gen_launch_describe(&def, &fp8kv, &d));
    assert_int_equal(d.kernels[0].block[0], 32u * 12u);
    gen_variant odd = def;
    odd.stages = 3;
    tu_expect_refused(gen_variant_check(&odd, &t), AT_ERR_UNSUPPORTED, "even stage count");
  }
  { /* .wgi at 64 rows: two consumer warpgroups over the same rows (8 warps) and two widening
     * warpgroups (16 warps; setmaxnreg splits the registers); each CTA writes two partials, so
     * the combine merges twice the CTAs, even at one split; its key round-trips; listed, and
     * refused past 64 rows; Q K^T reads Q from registers (an _rs wgmma wrapper) */
    /* bf16 Q: Q K^T on the FP8 tensor cores against the staged K, Q as two E4M3 parts;
     * setmaxnreg: the consumers' 64 extra a thread (192 against the launch's 128) are what the
     * two widening warpgroups give back (64 each) */
    const char *const present[] = {"#define DEC_WG_K8 1\n", "void dec_mma_qk8(",
                                   "#define DEC_WG_CONSUMER_REGS 192\n#define DEC_WG_HELPER_REGS 64\n", NULL};
    const char *const absent[] = {"#define DEC_WG_QREG 1", NULL};
    check_listed_wgi(&fp8kv, &t, 2, ".wgi", present, absent);
    /* f16 Q keeps the f16 MMAs (Q's fragments from registers, an _rs wrapper), and no 6 stages */
    at_shape fp8kv_f16 = fp8kv;
    fp8kv_f16.dtype = AT_DTYPE_F16;
    TU_OK(gen_enumerate(&fp8kv_f16, &t, vs, GEN_MAX_VARIANTS, &n));
    int wgi_f16 = 0;
    for (int i = 0; i < n; i++) {
      if (vs[i].wg) assert_true(vs[i].stages < 6);
      if (vs[i].wg != 2) continue;
      wgi_f16++;
      char *src = NULL;
      TU_OK(gen_emit(&vs[i], &t, &src));
      assert_non_null(strstr(src, "dec_mma_qk_rs("));
      assert_null(strstr(src, "#define DEC_WG_K8 1"));
      free(src);
    }
    assert_true(wgi_f16 > 0);
    gen_variant wide = def;
    wide.wg = 2, wide.block_m = 16, wide.warps = 8;
    tu_expect_refused(gen_variant_check(&wide, &t), AT_ERR_UNSUPPORTED, "at most 64 rows");
    gen_variant odd = def;
    odd.wg = 2, odd.stages = 3;
    tu_expect_refused(gen_variant_check(&odd, &t), AT_ERR_UNSUPPORTED, "even stage count");
    gen_variant parsed;
    TU_OK(gen_variant_parse("decode.bf16.kve4m3.d128.none.g8.bm8.bn64.w4.s4.sp8.wgi", &parsed));
    assert_int_equal(parsed.wg, 2);
    TU_OK(gen_variant_check(&parsed, &t));
    parsed.spec.kv_dtype = AT_KV_SAME; /* 16-bit K/V: refused */
    tu_expect_refused(gen_variant_check(&parsed, &t), AT_ERR_UNSUPPORTED, "FP8 KV cache");
  }
  { /* .wgi3 at 64 rows: three consumer warpgroups and one widening warpgroup (16 warps), three
     * partials a CTA; 6 staging slots and a ring of 6 (each stage one warpgroup's), 64-key tiles; Q's E4M3 parts
     * read from shared memory (an _ss wrapper); bf16 Q at D 128 only */
    /* setmaxnreg: 3 x 128 consumers at 152 take the 72 a thread the widener gives back from 128 */
    const char *const present[] = {"#define DEC_STAGES 6\n", "#define DEC_BLOCK_N 64\n", "#define DEC_WG_KSPLIT 3\n",
                                   "#define DEC_WG_K8 1\n", "void dec_mma_qk8_ss(",
                                   "#define DEC_WG_CONSUMER_REGS 152\n#define DEC_WG_HELPER_REGS 56\n", NULL};
    const char *const absent[] = {"void dec_mma_qk8(", NULL};
    check_listed_wgi(&fp8kv, &t, 3, ".wgi3", present, absent);
    gen_variant w3 = def;
    w3.wg = 3, w3.stages = 8;
    tu_expect_refused(gen_variant_check(&w3, &t), AT_ERR_UNSUPPORTED, "a multiple of 3");
    w3.stages = 6, w3.spec.dtype = AT_DTYPE_F16, w3.spec.out_dtype = AT_DTYPE_F16;
    tu_expect_refused(gen_variant_check(&w3, &t), AT_ERR_UNSUPPORTED, "FP8 tensor cores");
    gen_variant parsed;
    TU_OK(gen_variant_parse("decode.bf16.kve4m3.d128.none.g8.bm8.bn64.w4.s6.sp8.wgi3", &parsed));
    assert_int_equal(parsed.wg, 3);
    assert_int_equal(parsed.stages, 6);
    TU_OK(gen_variant_check(&parsed, &t));
    parsed.stages = 9; /* 9 slots beside an f16 ring of 3, in the room of 6 and 6 (step 25): taken by key */
    TU_OK(gen_variant_check(&parsed, &t));
    assert_int_equal(gen_smem_bytes(&parsed), 1024 + 64 * 256 + 3 * 64 * 256 + 9 * 2 * 64 * 128 + 256);
    parsed.stages = 12;
    tu_expect_refused(gen_variant_check(&parsed, &t), AT_ERR_UNSUPPORTED, "12 stages");
  }
  fp8kv.q_len = 16;
  /* 32 rows or fewer, sm_80, FP8 K/V at D 64, pages: none listed */
  const at_shape small = decode_shape(AT_DTYPE_BF16, 128, AT_MASK_NONE, 32, 8, 1, 16384); /* 4 rows */
  gen_target t80;
  TU_OK(gen_target_for_arch("sm_80", &t80));
  at_shape fp8kv64 = decode_shape(AT_DTYPE_BF16, 64, AT_MASK_CAUSAL_BR, 32, 4, 16, 65536);
  fp8kv64.kv_dtype = AT_DTYPE_E4M3;
  const struct {
    const at_shape *shape;
    const gen_target *target;
  } none[] = {{&small, &t}, {&s, &t80}, {&fp8kv64, &t}};
  for (size_t c = 0; c < sizeof none / sizeof none[0]; c++) {
    TU_OK(gen_enumerate(none[c].shape, none[c].target, vs, GEN_MAX_VARIANTS, &n));
    for (int i = 0; i < n; i++) assert_int_equal(vs[i].wg, 0);
  }
  /* refusals */
  gen_variant v = back;
  v.merge = GEN_MERGE_CLUSTER;
  tu_expect_refused(gen_variant_check(&v, &t), AT_ERR_UNSUPPORTED, "combine kernel");
  v = back, v.warps = 8;
  tu_expect_refused(gen_variant_check(&v, &t), AT_ERR_UNSUPPORTED, "one warpgroup per 64 rows");
  v = back, v.spec.head_dim = 80;
  tu_expect_refused(gen_variant_check(&v, &t), AT_ERR_UNSUPPORTED, "multiple of 64");
  v = back, v.spec.kv_dtype = AT_DTYPE_E5M2, v.spec.head_dim = 64;
  tu_expect_refused(gen_variant_check(&v, &t), AT_ERR_UNSUPPORTED, "multiple of 128");
  v = back, v.spec.gqa = 16;
  tu_expect_refused(gen_variant_check(&v, &t), AT_ERR_UNSUPPORTED, "at most 128 rows");
  tu_expect_refused(gen_variant_check(&back, &t80), AT_ERR_UNSUPPORTED, "sm_90a");
  tu_expect_refused(gen_variant_parse("fa2.bf16.d128.none.g1.bm128.bn64.w4.s2.wg", &v), AT_ERR_INVALID, "wgmma-rows");
}

/* The combine kernel packs rows: the fewest split groups whose batches of 4 loads cover the
 * variant's partials per row, and as many rows a CTA as its 128 threads then hold (a float4 chunk
 * of D a thread); its grid covers every row once, the last CTA's rows past the end idle. */
static void test_decode_combine_rows(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  struct {
    const char *key;
    int d, q_len, sg, rows;
  } cases[] = {
      {"decode.bf16.d128.causal-br.g8.bm16.bn64.w8.s4.sp4.wg", 128, 16, 1, 4},     /* 4 partials: a warp a row */
      {"decode.bf16.d128.none.g4.bm1.bn128.w4.s3.sp8", 128, 1, 2, 2},              /* 8: two groups */
      {"decode.bf16.d128.none.g4.bm1.bn128.w4.s3.sp16", 128, 1, 4, 1},             /* 16: a CTA a row, as before */
      {"decode.bf16.kve4m3.d128.causal-br.g8.bm8.bn64.w4.s6.sp4.wgi3", 128, 8, 4, 1}, /* 3 x 4 partials */
      {"decode.bf16.d64.none.g4.bm1.bn128.w4.s3.sp2", 64, 3, 1, 8},                /* 16 chunks a row */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gen_variant v;
    TU_OK(gen_variant_parse(cases[i].key, &v));
    at_shape s = decode_shape(AT_DTYPE_BF16, cases[i].d, v.spec.mask, 32, 32 / v.spec.gqa, cases[i].q_len, 65536);
    s.batch = 3, s.with_lse = 0;
    if (v.spec.kv_dtype != AT_KV_SAME) s.kv_dtype = v.spec.kv_dtype;
    gen_launch_desc d;
    TU_OK(gen_launch_describe(&v, &s, &d));
    assert_int_equal(d.n_kernels, 2);
    const long long rows = 32LL * cases[i].q_len;
    assert_int_equal(d.kernels[1].grid[0], (unsigned)((rows + cases[i].rows - 1) / cases[i].rows));
    assert_int_equal(d.kernels[1].grid[1], 3u);
    char *src = NULL, want[64];
    TU_OK(gen_emit(&v, &t, &src));
    snprintf(want, sizeof want, "#define DEC_COMBINE_SG %d\n", cases[i].sg);
    assert_non_null(strstr(src, want));
    free(src);
  }
}

/* decode is listed first for T <= 16 only, its keys carry the split count and round-trip, its
 * launch has two kernels when split and a scratch sized for the partials, and the default for a
 * short query is a decode variant. */
static void test_decode_family(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant vs[GEN_MAX_VARIANTS], back, def;
  char key[GEN_KEY_MAX];
  int n = 0;
  at_shape s = decode_shape(AT_DTYPE_BF16, 128, AT_MASK_NONE, 32, 8, 1, 4096);
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  assert_true(count_family(vs, n, GEN_FAMILY_DECODE) > 0);
  assert_int_equal(vs[0].family, GEN_FAMILY_DECODE);
  for (int i = 0; i < n; i++) {
    TU_OK(gen_variant_key(&vs[i], key, sizeof key));
    TU_OK(gen_variant_parse(key, &back));
    assert_memory_equal(&back, &vs[i], sizeof back);
    if (vs[i].family == GEN_FAMILY_DECODE) assert_non_null(strstr(key, ".sp"));
    else assert_null(strstr(key, ".sp"));
  }
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.family, GEN_FAMILY_DECODE);
  assert_int_equal(def.block_m, 1);
  assert_true(def.splits > 1); /* B=2 x 8 KV heads fill 16 of 132 SMs: split the keys */

  gen_variant split = def;
  gen_launch_desc d;
  TU_OK(gen_launch_describe(&split, &s, &d));
  assert_int_equal(d.n_kernels, 2);
  assert_true(d.n_splits > 1 && d.n_splits <= split.splits);
  assert_int_equal(d.keys_per_split % split.block_n, 0);
  assert_true((long long)d.keys_per_split * d.n_splits >= s.kv_len);
  assert_true((long long)d.keys_per_split * (d.n_splits - 1) < s.kv_len); /* no empty split */
  assert_int_equal(d.kernels[0].grid[0], (unsigned)d.n_splits);
  assert_int_equal(d.kernels[0].grid[1], 8u);
  assert_true(d.scratch_bytes >= (size_t)2 * 32 * d.n_splits * (128 + 1) * sizeof(float));
  assert_int_equal(d.counters_offset, 0);
  /* .lc: one kernel, the partials as before, then one int32 counter per row group (B x Nkv) */
  gen_variant lc = split;
  lc.merge = GEN_MERGE_LAST_CTA;
  gen_launch_desc dl;
  TU_OK(gen_launch_describe(&lc, &s, &dl));
  assert_int_equal(dl.n_kernels, 1);
  assert_int_equal(dl.counters_offset, d.scratch_bytes);
  assert_true(dl.scratch_bytes >= dl.counters_offset + (size_t)s.batch * s.kv_heads * sizeof(int));
  assert_int_equal(dl.kernels[0].args[dl.kernels[0].n_args - 1], GEN_ARG_SPLIT_COUNTERS);
  TU_OK(gen_variant_key(&lc, key, sizeof key));
  assert_non_null(strstr(key, ".lc"));
  TU_OK(gen_variant_parse(key, &back));
  assert_memory_equal(&back, &lc, sizeof back);
  int listed_lc = 0;
  for (int i = 0; i < n; i++) listed_lc += vs[i].merge == GEN_MERGE_LAST_CTA;
  assert_true(listed_lc > 0);
  /* .cl: one kernel, no scratch, exactly the variant's splits (one cluster per row group) even
   * where the keys fill fewer tiles; sm_90 only, 2..8 splits */
  gen_variant cl = split;
  cl.merge = GEN_MERGE_CLUSTER, cl.splits = 8;
  TU_OK(gen_variant_check(&cl, &t));
  TU_OK(gen_launch_describe(&cl, &s, &dl));
  assert_int_equal(dl.n_kernels, 1);
  assert_int_equal(dl.scratch_bytes, 0);
  assert_int_equal(dl.kernels[0].grid[0], 8u);
  at_shape short_s = s;
  short_s.kv_len = 3 * cl.block_n; /* 3 tiles for 8 splits */
  TU_OK(gen_launch_describe(&cl, &short_s, &dl));
  assert_int_equal(dl.kernels[0].grid[0], 8u);
  TU_OK(gen_variant_key(&cl, key, sizeof key));
  assert_non_null(strstr(key, ".sp8.cl"));
  TU_OK(gen_variant_parse(key, &back));
  assert_memory_equal(&back, &cl, sizeof back);
  int listed_cl = 0;
  for (int i = 0; i < n; i++) listed_cl += vs[i].merge == GEN_MERGE_CLUSTER;
  assert_true(listed_cl > 0);
  assert_int_equal(dl.kernels[0].waits_for_previous, 0); /* placed on an idle GPU */
  cl.splits = 16;
  assert_int_equal(gen_variant_check(&cl, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "2..8 splits"));
  cl.splits = 4;
  gen_target t80;
  TU_OK(gen_target_for_arch("sm_80", &t80));
  assert_int_equal(gen_variant_check(&cl, &t80), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "needs sm_90"));
  split.splits = 1;
  TU_OK(gen_launch_describe(&split, &s, &d));
  assert_int_equal(d.n_kernels, 1);
  assert_int_equal(d.scratch_bytes, 0);

  /* T = 16 packs 16 tokens; T = 17 is prefill: no decode variant, and the default is not decode. */
  s = decode_shape(AT_DTYPE_F16, 64, AT_MASK_CAUSAL_BR, 14, 2, 16, 777);
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  assert_true(count_family(vs, n, GEN_FAMILY_DECODE) > 0);
  for (int i = 0; i < n; i++)
    if (vs[i].family == GEN_FAMILY_DECODE) assert_int_equal(vs[i].block_m, 16);
  s.q_len = 17;
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  assert_int_equal(count_family(vs, n, GEN_FAMILY_DECODE), 0);
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_not_equal(def.family, GEN_FAMILY_DECODE);

  /* Refusals name the field. */
  gen_variant bad = {GEN_FAMILY_DECODE, {AT_DTYPE_BF16, 128, AT_MASK_NONE, 4, 0, AT_DTYPE_BF16, AT_KV_SAME, 0, 0}, 1, 32, 4, 2, 4, 0, 0, 0, 0, 0, 0, 0};
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "keys per warp"));
  bad.block_n = 64, bad.splits = 0;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "split count 0"));
  assert_int_equal(gen_variant_parse("decode.e4m3.d128.none.g4.bm1.bn64.w4.s2.sp4.obf16", &back), AT_OK);
  assert_int_equal(gen_variant_check(&back, &t), AT_ERR_INVALID);
  assert_int_not_equal(gen_variant_parse("fa2.bf16.d128.none.g4.bm128.bn64.w4.s2.sp4", &back), AT_OK);
  /* .lc: split-KV families only, right after the split count, and at most 2 rows per warp */
  assert_int_not_equal(gen_variant_parse("fa2.bf16.d128.none.g4.bm128.bn64.w4.s2.lc", &back), AT_OK);
  assert_non_null(strstr(at_last_error(), "no split-KV merge"));
  assert_int_not_equal(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.cl", &back), AT_OK);
  assert_int_not_equal(gen_variant_parse("decode.bf16.d128.none.g4.bm1.bn64.w4.s2.lc.sp4", &back), AT_OK);
  TU_OK(gen_variant_parse("decode.bf16.d128.causal-br.g8.bm4.bn64.w8.s2.sp4.lc", &back));
  assert_int_equal(gen_variant_check(&back, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "at most 2 rows per warp"));
}

/* Every decode variant the shapes of the decode tests list compiles for sm_90a without spills. */
static void test_decode_compile_no_spills(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  const at_shape shapes[] = {
      decode_shape(AT_DTYPE_BF16, 128, AT_MASK_NONE, 32, 8, 1, 16384),
      decode_shape(AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_BR, 32, 8, 16, 8192),
      decode_shape(AT_DTYPE_F16, 64, AT_MASK_CAUSAL_BR, 14, 2, 16, 777),
      decode_shape(AT_DTYPE_BF16, 256, AT_MASK_CAUSAL_TL, 16, 2, 8, 2000),
      decode_shape(AT_DTYPE_BF16, 128, AT_MASK_NONE, 8, 1, 1, 1000),
      decode_shape(AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_BR, 32, 4, 16, 65536), /* .wg: 128 rows */
  };
  const int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
  int cap = n_shapes * GEN_MAX_VARIANTS, n = 0;
  gen_variant *all = calloc((size_t)cap, sizeof *all);
  assert_non_null(all);
  for (int i = 0; i < n_shapes; i++) {
    gen_variant vs[GEN_MAX_VARIANTS];
    int k = 0;
    TU_OK(gen_enumerate(&shapes[i], &t, vs, GEN_MAX_VARIANTS, &k));
    /* One variant per tile (the split count changes no code). */
    for (int j = 0; j < k; j++)
      if (vs[j].family == GEN_FAMILY_DECODE && (j == 0 || vs[j - 1].stages != vs[j].stages ||
                                                 vs[j - 1].block_n != vs[j].block_n || vs[j - 1].warps != vs[j].warps ||
                                                 vs[j - 1].wg != vs[j].wg))
        all[n++] = vs[j];
  }
  int bad = tu_compile_count_bad(all, n, &t, "decode");
  free(all);
  assert_int_equal(bad, 0);
}

/* Every warp-specialized tile compiles without spills: all listed for bf16 at every head dim,
 * no mask and causal with lse, and for e4m3 at D 128 and 256; ping-pong's .wspp (named barriers
 * around the same code) at D=128 and for e4m3. f16 and GQA > 1 change no register use (a type
 * name, a constant), so they are left out for CI's time. */
static void test_ws_compile_no_spills(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  const struct { at_dtype dtype; int d; } sets[] = {{AT_DTYPE_BF16, 64},  {AT_DTYPE_BF16, 96}, {AT_DTYPE_BF16, 128},
                                                    {AT_DTYPE_BF16, 192}, {AT_DTYPE_BF16, 256}, {AT_DTYPE_E4M3, 64},
                                                    {AT_DTYPE_E4M3, 128}, {AT_DTYPE_E4M3, 256}};
  const int n_sets = (int)(sizeof sets / sizeof sets[0]);
  int cap = 2 * n_sets * GEN_MAX_VARIANTS, n = 0;
  gen_variant *all = calloc((size_t)cap, sizeof *all);
  assert_non_null(all);
  for (int i = 0; i < n_sets; i++)
    for (int causal = 0; causal < 2; causal++) {
      at_shape s = shape_of(sets[i].dtype, sets[i].d, causal ? AT_MASK_CAUSAL_TL : AT_MASK_NONE, 8, 8, causal);
      gen_variant vs[GEN_MAX_VARIANTS];
      int k = 0;
      TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &k));
      const int with_pp = sets[i].d == 128;
      for (int j = 0; j < k; j++)
        if (vs[j].ws == 1 || (vs[j].ws == 2 && with_pp)) all[n++] = vs[j];
    }
  assert_true(n > 50);
  int bad = tu_compile_count_bad(all, n, &t, "warp-specialized fa3");
  free(all);
  assert_int_equal(bad, 0);
}

/* The tail split (.tw<W>): keys round-trip and need .ws/.wspp; only the unmasked one-CTA-per-tile
 * kernel on padded contiguous tensors takes it; the launch runs the padded grid's work tiles on
 * one dimension with the last partial wave's tiles as pieces, then a combine over their rows,
 * and launches the plain grid where the waves come out even; the twins are listed after the
 * plain tiles, for unmasked shapes only, and the default takes one where its plan splits; a
 * sample of them compiles without spills. */
static void test_fa3_tail_family(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant v, vt, back;
  char key[GEN_KEY_MAX], names[GEN_MAX_KERNELS][GEN_ENTRY_MAX], *src = NULL;
  int n = 0;
  TU_OK(gen_variant_parse("fa3.bf16.d128.none.g1.bm192.bn80.w12.s2.ws.tw132", &v));
  assert_int_equal(v.tail_wave, 132);
  TU_OK(gen_variant_check(&v, &t));
  TU_OK(gen_variant_key(&v, key, sizeof key));
  assert_string_equal(key, "fa3.bf16.d128.none.g1.bm192.bn80.w12.s2.ws.tw132");
  TU_OK(gen_variant_parse("fa3.bf16.d128.none.g1.bm192.bn80.w12.s2.ws", &back));
  assert_int_equal(back.tail_wave, 0);
  TU_OK(gen_entry_names(&v, names, &n));
  assert_int_equal(n, 2);
  assert_string_equal(names[1], "fa3_bf16_d128_none_g1_bm192_bn80_w12_s2_ws_tw132_tc");
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "#define FA3_TAIL 1\n#define FA3_TAIL_COMBINE fa3_bf16_d128_none_g1_bm192_bn80_w12_s2_ws_tw132_tc\n"));
  free(src);
  src = NULL;

  /* B2 Nq16 T=S=8192 at block_m 192: 43 x 16 x 2 = 1376 work tiles, 10 waves of 132 and 56; the
   * 56 split in two (56 x 2 <= 132): 1320 + 112 CTAs, a combine of 56 x 192 / 16 CTAs. */
  at_shape s = shape_of(AT_DTYPE_BF16, 128, AT_MASK_NONE, 16, 16, 0);
  s.batch = 2, s.q_len = 8192, s.kv_len = 8192;
  gen_launch_desc d;
  TU_OK(gen_launch_describe(&v, &s, &d));
  assert_int_equal(d.n_kernels, 2);
  const gen_kernel_launch *k = &d.kernels[0], *c = &d.kernels[1];
  assert_int_equal(k->entry, 0);
  assert_int_equal(k->grid[0], 1320u + 112u);
  assert_int_equal(k->grid[1], 1u);
  assert_int_equal(k->grid[2], 1u);
  assert_int_equal(d.tail_tiles, 56);
  assert_int_equal(d.n_splits, 2);
  assert_int_equal(k->args[k->n_args - 5], GEN_ARG_Q_HEADS);
  assert_int_equal(k->args[k->n_args - 4], GEN_ARG_TAIL_TILES);
  assert_int_equal(k->args[k->n_args - 3], GEN_ARG_SPLITS);
  assert_int_equal(k->args[k->n_args - 2], GEN_ARG_O_PART);
  assert_int_equal(k->args[k->n_args - 1], GEN_ARG_LSE_PART);
  assert_int_equal(c->entry, 1);
  assert_int_equal(c->grid[0], 56u * 12u);
  assert_int_equal(c->block[0], 128u);
  assert_int_equal(c->waits_for_previous, 1);
  assert_int_equal(c->args[0], GEN_ARG_O_PART);
  assert_int_equal(c->args[c->n_args - 1], GEN_ARG_O_SH);
  assert_int_equal(d.o_part_offset, 0);
  const size_t o_bytes = (size_t)56 * 2 * 192 * 128 * 4;
  assert_int_equal(d.lse_part_offset, o_bytes);
  assert_int_equal(d.scratch_bytes, o_bytes + (size_t)56 * 2 * 192 * 4);
  assert_int_equal(d.work_tiles, 0); /* not a persistent launch: the runtime keeps the grid */

  /* Waves that come out even (B1 Nq33 T=S=8448: 44 x 33 = 11 x 132): the plain grid, no combine. */
  s = shape_of(AT_DTYPE_BF16, 128, AT_MASK_NONE, 33, 33, 0);
  s.batch = 1, s.q_len = 8448, s.kv_len = 8448;
  TU_OK(gen_launch_describe(&v, &s, &d));
  assert_int_equal(d.kernels[0].grid[0], 1452u);
  assert_int_equal(d.tail_tiles, 0);
  assert_int_equal(d.kernels[1].grid[0], 0u);
  assert_int_equal(d.scratch_bytes, 0);

  /* block_m 128 (2048 tiles: 15 waves and 68; 103 K/V tiles of 80): too many to halve in the last
   * wave, so the plan counts 2..8 pieces of the last 68, and of those and the wave before, with
   * the combine's cost: 68 x 3 pieces of 35 tiles, two waves of pieces, is the shortest. */
  TU_OK(gen_variant_parse("fa3.bf16.d256.none.g1.bm128.bn80.w8.s2.ws.tw132", &back));
  TU_OK(gen_variant_check(&back, &t));
  s = shape_of(AT_DTYPE_BF16, 256, AT_MASK_NONE, 16, 16, 0);
  s.batch = 2, s.q_len = 8192, s.kv_len = 8192;
  TU_OK(gen_launch_describe(&back, &s, &d));
  assert_int_equal(d.tail_tiles, 68);
  assert_int_equal(d.n_splits, 3);
  assert_int_equal(d.kernels[0].grid[0], 1980u + 68u * 3u);
  /* One K/V tile (S <= block_n): nothing to split. */
  s.kv_len = 80;
  TU_OK(gen_launch_describe(&back, &s, &d));
  assert_int_equal(d.tail_tiles, 0);
  assert_int_equal(d.kernels[0].grid[0], 2048u);
  /* T 0: no launch at all. */
  s.q_len = 0;
  TU_OK(gen_launch_describe(&back, &s, &d));
  assert_int_equal(d.kernels[0].grid[0], 0u);
  assert_int_equal(d.kernels[1].grid[0], 0u);

  /* With V^T ahead: transpose, attention, combine; the partials after V^T in the scratch. FP8's
   * 192x96 (1376 tiles) splits its last 56 in two; its 128x224 (2048 tiles of 37 K/V tiles) splits
   * nothing: at twice the 16-bit rate a K/V tile is short against the combine's bytes. */
  TU_OK(gen_variant_parse("fa3.e4m3.d128.none.g1.bm192.bn96.w12.s2.ws.vt.tw132.obf16", &vt));
  TU_OK(gen_variant_check(&vt, &t));
  TU_OK(gen_entry_names(&vt, names, &n));
  assert_int_equal(n, 3);
  assert_string_equal(names[1], "fa3_e4m3_d128_none_g1_bm192_bn96_w12_s2_ws_vt_tw132_obf16_vt");
  assert_string_equal(names[2], "fa3_e4m3_d128_none_g1_bm192_bn96_w12_s2_ws_vt_tw132_obf16_tc");
  s = shape_of(AT_DTYPE_E4M3, 128, AT_MASK_NONE, 16, 16, 0);
  s.batch = 2, s.q_len = 8192, s.kv_len = 8192;
  TU_OK(gen_launch_describe(&vt, &s, &d));
  assert_int_equal(d.n_kernels, 3);
  assert_int_equal(d.kernels[0].entry, 1);
  assert_int_equal(d.kernels[1].entry, 0);
  assert_int_equal(d.kernels[2].entry, 2);
  assert_int_equal(d.tail_tiles, 56);
  assert_int_equal(d.n_splits, 2);
  assert_int_equal(d.kernels[1].grid[0], 1376u + 56u);
  assert_int_equal(d.kernels[2].grid[0], 56u * 12u);
  assert_int_equal(d.kernels[1].args[d.kernels[1].n_args - 6], GEN_ARG_TMAP_SCRATCH);
  const size_t vt_bytes = (size_t)2 * 16 * 128 * 8256; /* S' = 8192 rounded up to 96 */
  const size_t vt_o_bytes = (size_t)56 * 2 * 192 * 128 * 4;
  assert_int_equal(d.scratch_tmap.offset, 0);
  assert_int_equal(d.o_part_offset, vt_bytes);
  assert_int_equal(d.lse_part_offset, vt_bytes + vt_o_bytes);
  assert_int_equal(d.scratch_bytes, vt_bytes + vt_o_bytes + (size_t)56 * 2 * 192 * 4);
  TU_OK(gen_variant_parse("fa3.e4m3.d128.none.g1.bm128.bn224.w8.s2.ws.vt.tw132.obf16", &back));
  TU_OK(gen_launch_describe(&back, &s, &d));
  assert_int_equal(d.tail_tiles, 0);
  assert_int_equal(d.kernels[1].grid[0], 2048u);
  assert_int_equal(d.kernels[2].grid[0], 0u);

  /* Refusals. */
  gen_variant bad = v;
  bad.spec.mask = AT_MASK_CAUSAL_TL;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "without a mask"));
  bad = v, bad.ws = 0, bad.block_n = 128, bad.warps = 8, bad.block_m = 128;
  assert_int_not_equal(gen_variant_check(&bad, &t), AT_OK);
  bad = v, bad.spec.ragged = GEN_RAGGED_Q;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "padded, contiguous"));
  bad = v, bad.tail_wave = 5000;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  bad = v, bad.family = GEN_FAMILY_FA2, bad.ws = 0;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "no tail-split variants"));
  assert_int_equal(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.tw132", &back), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "needs .ws or .wspp"));
  assert_int_equal(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.tw132.ws", &back), AT_ERR_INVALID);
  assert_int_equal(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.ws.tw0", &back), AT_ERR_INVALID);

  /* Listing: the twins of the .ws tiles whose plan splits, after every plain tile; none causal. */
  gen_variant vs[GEN_MAX_VARIANTS];
  s = shape_of(AT_DTYPE_BF16, 128, AT_MASK_NONE, 16, 16, 0);
  s.batch = 2, s.q_len = 8192, s.kv_len = 8192;
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  int twins = 0, first_twin = -1, last_plain = -1;
  for (int i = 0; i < n; i++) {
    if (vs[i].family != GEN_FAMILY_FA3 || !vs[i].ws || vs[i].q_regs) continue; /* .qr twins: last */
    if (vs[i].tail_wave) {
      twins++;
      if (first_twin < 0) first_twin = i;
      assert_int_equal(vs[i].tail_wave, t.sm_count);
      assert_int_equal(vs[i].ws, 1);
    } else {
      last_plain = i;
    }
  }
  assert_true(twins > 0);
  assert_true(first_twin > last_plain);
  gen_variant def;
  TU_OK(gen_default_variant(&s, &t, &def));
  /* The default takes the split where its plan splits (10.4 waves of 192-row tiles here), not
   * where the tiles fill whole waves (B1 N33 T8448: 33 x 44 = 11 x 132) nor under a mask. */
  TU_OK(gen_variant_key(&def, key, sizeof key));
  assert_string_equal(key, "fa3.bf16.d128.none.g1.bm192.bn80.w12.s2.ws.tw132");
  at_shape fit = s;
  fit.batch = 1, fit.q_heads = fit.kv_heads = 33, fit.q_len = fit.kv_len = 8448;
  TU_OK(gen_default_variant(&fit, &t, &def));
  TU_OK(gen_variant_key(&def, key, sizeof key));
  assert_string_equal(key, "fa3.bf16.d128.none.g1.bm192.bn80.w12.s2.ws");
  s.mask = AT_MASK_CAUSAL_TL;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.tail_wave, 0);
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  for (int i = 0; i < n; i++) assert_int_equal(vs[i].tail_wave, 0);

  /* A sample compiles without spills: each consumer count, head dim and FP8 kind. */
  static const char *const sample[] = {
      "fa3.bf16.d128.none.g1.bm192.bn80.w12.s2.ws.tw132",
      "fa3.bf16.d64.none.g4.bm192.bn128.w12.s2.ws.tw132.lse",
      "fa3.f16.d96.none.g1.bm128.bn128.w8.s3.wspp.tw132",
      "fa3.bf16.d256.none.g1.bm128.bn80.w8.s2.ws.tw132",
      "fa3.e4m3.d128.none.g1.bm128.bn224.w8.s2.ws.vt.tw132.obf16",
      "fa3.e5m2.d256.none.g2.bm128.bn128.w8.s2.ws.vt.tw132.of16.lse",
      "fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.ws.tw132.obf16",
  };
  assert_int_equal(compile_keys_count_bad(sample, 7, &t, "fa3 tail split"), 0);
}

/* Q in registers (.qr after .ws/.wspp[.vt]): keys round-trip and need .ws/.wspp; the kernel gets
 * FA3_QREG and a register-A wrapper for Q K^T; the register estimate refuses the tiles whose
 * build spilled with it (bf16 D128 192x80, 128x160; e4m3 D128 128x224 .vt) and keeps 128x128;
 * twins come after the plain tiles and their tail twins, of .ws tiles only; a sample compiles
 * without spills. */
static void test_fa3_qr_family(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant v, back;
  char key[GEN_KEY_MAX], *src = NULL;
  TU_OK(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.ws.qr", &v));
  assert_int_equal(v.q_regs, 1);
  TU_OK(gen_variant_check(&v, &t));
  TU_OK(gen_variant_key(&v, key, sizeof key));
  assert_string_equal(key, "fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.ws.qr");
  TU_OK(gen_variant_parse("fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.ws.vt.qr.tw132.obf16.lse", &back));
  assert_int_equal(back.q_regs, 1);
  assert_int_equal(back.tail_wave, 132);
  TU_OK(gen_variant_key(&back, key, sizeof key));
  assert_string_equal(key, "fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.ws.vt.qr.tw132.obf16.lse");
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "#define FA3_QREG 1\n"));
  assert_non_null(strstr(src, "void fa3_mma_qk_rs(float *d, const unsigned *a, unsigned long long desc_b, int accumulate)"));
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "));
  free(src);
  src = NULL;
  TU_OK(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.ws", &back));
  TU_OK(gen_emit(&back, &t, &src));
  assert_null(strstr(src, "#define FA3_QREG 1"));
  assert_null(strstr(src, "void fa3_mma_qk_rs("));
  free(src);
  src = NULL;

  /* Refusals: not warp-specialized, not in front of .ws, not fa2, no room in the registers. */
  assert_int_equal(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.qr", &back), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "needs .ws or .wspp"));
  assert_int_equal(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.qr.ws", &back), AT_ERR_INVALID);
  gen_variant bad = v;
  bad.family = GEN_FAMILY_FA2, bad.ws = 0;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "no Q-in-registers variants"));
  bad = v, bad.q_regs = 2;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  static const char *const no_room[] = {
      "fa3.bf16.d128.none.g1.bm192.bn80.w12.s2.ws.qr",
      "fa3.bf16.d128.none.g1.bm128.bn160.w8.s2.ws.qr",
      "fa3.bf16.d64.none.g1.bm192.bn128.w12.s2.ws.qr",
      "fa3.e4m3.d128.none.g1.bm128.bn224.w8.s2.ws.vt.qr.obf16",
      "fa3.e4m3.d256.none.g1.bm128.bn128.w8.s2.ws.vt.qr.obf16",
  };
  for (int i = 0; i < 5; i++) {
    TU_OK(gen_variant_parse(no_room[i], &bad));
    assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
    assert_non_null(strstr(at_last_error(), "would spill"));
    bad.q_regs = 0; /* the plain tile fits */
    TU_OK(gen_variant_check(&bad, &t));
  }

  /* Listing: .qr twins of .ws tiles only, after every plain tile and tail twin; the default plain. */
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0, twins = 0, first_twin = -1, last_other = -1;
  at_shape s = shape_of(AT_DTYPE_BF16, 128, AT_MASK_NONE, 16, 16, 0);
  s.batch = 2, s.q_len = 8192, s.kv_len = 8192;
  TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  for (int i = 0; i < n; i++) {
    if (vs[i].family != GEN_FAMILY_FA3 || !vs[i].ws) continue;
    if (vs[i].q_regs) {
      twins++;
      if (first_twin < 0) first_twin = i;
      assert_int_equal(vs[i].ws, 1);
      assert_int_equal(vs[i].tail_wave, 0);
      assert_int_equal(vs[i].block_m, 128);
      assert_true(vs[i].block_n <= 144);
    } else {
      last_other = i;
    }
  }
  assert_true(twins >= 8);
  assert_true(first_twin > last_other);
  gen_variant def;
  TU_OK(gen_default_variant(&s, &t, &def));
  assert_int_equal(def.q_regs, 0);

  /* A sample compiles without spills (test_ws_compile_no_spills compiles every listed bf16 twin). */
  static const char *const sample[] = {
      "fa3.bf16.d128.causal.g4.bm128.bn128.w8.s2.wspp.qr.lse",
      "fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.ws.vt.qr.obf16",
      "fa3.bf16.d128.none.g1.bm128.bn128.w8.s2.ws.qr.tw132",
  };
  assert_int_equal(compile_keys_count_bad(sample, 3, &t, "fa3 Q in registers"), 0);
}

/* Persistent fa3 (.pers after .ws/.wspp): keys round-trip and old keys keep persistent 0; only
 * warp-specialized 16-bit fa3 with a causal mask takes it, and the refusals say so; the launch is
 * one CTA per work tile (B x Nq x query blocks) with Nq and the tile count after the tensor
 * maps, for the runtime to narrow to the SMs; every listed warp-specialized causal tile has its
 * persistent twin right after it, and no other variant has one. */
static void test_fa3_persistent_family(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant v, back;
  char key[GEN_KEY_MAX], *src = NULL;
  TU_OK(gen_variant_parse("fa3.bf16.d128.causal.g4.bm128.bn128.w8.s2.ws.pers.lse", &v));
  assert_int_equal(v.ws, 1);
  assert_int_equal(v.persistent, 1);
  assert_int_equal(v.spec.with_lse, 1);
  TU_OK(gen_variant_check(&v, &t));
  TU_OK(gen_variant_key(&v, key, sizeof key));
  assert_string_equal(key, "fa3.bf16.d128.causal.g4.bm128.bn128.w8.s2.ws.pers.lse");
  TU_OK(gen_entry_name(&v, key, sizeof key));
  assert_string_equal(key, "fa3_bf16_d128_causal_g4_bm128_bn128_w8_s2_ws_pers_lse");
  TU_OK(gen_variant_parse("fa3.f16.d64.causal-br.g1.bm192.bn96.w12.s2.wspp.pers", &back));
  assert_int_equal(back.ws, 2);
  assert_int_equal(back.persistent, 1);
  TU_OK(gen_variant_check(&back, &t));
  /* Its bn128 twin is refused: the loop keeps S live (BN/4 registers more), and at bf16 causal
   * NVRTC spilled 240-252 bytes there; without .pers the tile fits. */
  TU_OK(gen_variant_parse("fa3.f16.d64.causal-br.g1.bm192.bn128.w12.s2.wspp.pers", &back));
  tu_expect_refused(gen_variant_check(&back, &t), AT_ERR_UNSUPPORTED, "would spill");
  TU_OK(gen_variant_parse("fa3.f16.d64.causal-br.g1.bm192.bn128.w12.s2.wspp", &back));
  TU_OK(gen_variant_check(&back, &t));
  /* the same budgets as the tile without the loop (the barrier room has space for Q's empty) */
  gen_variant plain = v;
  plain.persistent = 0;
  assert_int_equal(gen_smem_bytes(&v), gen_smem_bytes(&plain));
  assert_int_equal(gen_threads(&v), gen_threads(&plain));
  TU_OK(gen_variant_parse("fa3.bf16.d128.causal.g4.bm128.bn176.w8.s2.ws.lse", &back));
  assert_int_equal(back.persistent, 0);
  TU_OK(gen_variant_parse("fa3.bf16.d128.none.g1.bm128.bn128.w8.s2", &back));
  assert_int_equal(back.persistent, 0);

  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "#define FA3_WS 1\n#define FA3_PINGPONG 0\n#define FA3_PERSISTENT 1\n"));
  assert_non_null(strstr(src, "FA3_KERNEL fa3_bf16_d128_causal_g4_bm128_bn128_w8_s2_ws_pers_lse\n"));
  free(src);
  TU_OK(gen_emit(&plain, &t, &src));
  assert_null(strstr(src, "#define FA3_PERSISTENT 1")); /* the old preamble, unchanged */
  free(src);

  /* Keys that cannot be: .pers without a warp-specialized kernel, out of order, on fa2. */
  static const char *const bad_keys[] = {
      "fa3.bf16.d128.causal.g1.bm128.bn128.w8.s2.pers",
      "fa3.bf16.d128.causal.g1.bm128.bn128.w8.s2.pers.ws",
      "fa3.bf16.d128.causal.g1.bm128.bn128.w8.s2.ws.lse.pers",
      "fa3.bf16.d128.causal.g1.bm128.bn128.w8.s2.ws.pers.pers",
      "fa2.bf16.d128.causal.g1.bm128.bn64.w4.s2.pers",
      "fa2.bf16.d128.causal.g1.bm128.bn64.w4.s2.ws.pers",
      "decode.bf16.d128.causal.g1.bm16.bn64.w4.s2.sp2.pers",
  };
  for (size_t i = 0; i < sizeof bad_keys / sizeof *bad_keys; i++)
    if (gen_variant_parse(bad_keys[i], &back) == AT_OK) fail_msg("key '%s' was accepted", bad_keys[i]);
  assert_int_equal(gen_variant_parse(bad_keys[0], &back), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "needs .ws or .wspp before it"));

  /* Variants that cannot run it, refused by name. */
  gen_variant bad = v;
  bad.spec.mask = AT_MASK_NONE;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "persistent fa3 runs causal masks (causal, causal-br), not none"));
  bad = v, bad.spec.dtype = bad.spec.out_dtype = AT_DTYPE_E4M3, bad.block_n = 128;
  bad.spec.out_dtype = AT_DTYPE_BF16;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "persistent fa3 runs f16 or bf16 inputs, not e4m3"));
  bad = v, bad.ws = 0, bad.warps = 8, bad.block_m = 128, bad.block_n = 128;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "needs ws 1 or 2"));
  bad = v, bad.persistent = 2;
  assert_int_equal(gen_variant_check(&bad, &t), AT_ERR_INVALID);
  gen_variant fa2 = {GEN_FAMILY_FA2, {AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_TL, 4, 0, AT_DTYPE_BF16, AT_KV_SAME, 0, 0},
                     128, 64, 4, 2, 0, 0, 1, 0, 0, 0, 0, 0};
  assert_int_equal(gen_variant_check(&fa2, &t), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "fa2 has no persistent variants"));

  /* The launch: B 3, Nq 32 (GQA 4), T = S = 1000: 8 query blocks of 128, 768 work tiles. */
  at_shape s = shape_of(AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_TL, 32, 8, 1);
  s.batch = 3, s.q_len = s.kv_len = 1000;
  gen_launch_desc d;
  TU_OK(gen_launch_describe(&v, &s, &d));
  const gen_kernel_launch *k = &d.kernels[0];
  assert_int_equal(d.work_tiles, 3 * 32 * 8);
  assert_int_equal(d.ctas_per_sm, 1);
  assert_int_equal(k->grid[0], 3u * 32u * 8u);
  assert_int_equal(k->grid[1], 1u);
  assert_int_equal(k->grid[2], 1u);
  assert_int_equal(k->block[0], 384u);
  assert_int_equal(k->args[k->n_args - 5], GEN_ARG_TMAP_Q);
  assert_int_equal(k->args[k->n_args - 3], GEN_ARG_TMAP_V);
  assert_int_equal(k->args[k->n_args - 2], GEN_ARG_Q_HEADS);
  assert_int_equal(k->args[k->n_args - 1], GEN_ARG_WORK_TILES);
  assert_int_equal(d.tmap_rows[0], 128);
  assert_int_equal(d.tmap_rows[2], 128);
  TU_OK(gen_launch_describe(&plain, &s, &d)); /* without the loop: no work tiles */
  assert_int_equal(d.work_tiles, 0);
  assert_int_equal(d.kernels[0].grid[2], 8u);
  s.q_len = 0; /* nothing to do: no CTA */
  TU_OK(gen_launch_describe(&v, &s, &d));
  assert_int_equal(d.kernels[0].grid[0], 0u);
  assert_int_equal(d.work_tiles, 0);

  /* Enumeration: every warp-specialized causal tile, then the persistent twins of those whose
   * twin fits the registers (the large ones do not, with lse or without), in the same order
   * (measured slower: they come last); none without a mask, none for FP8. */
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0, twins = 0;
  const at_mask causal[] = {AT_MASK_CAUSAL_TL, AT_MASK_CAUSAL_BR};
  for (int lse = 0; lse < 2; lse++)
    for (int m = 0; m < 2; m++) {
      s = shape_of(AT_DTYPE_BF16, 128, causal[m], 32, 8, lse);
      TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
      int first_pers = -1, n_ws = 0, n_fit = 0, n_pers = 0, next_plain = 0;
      for (int i = 0; i < n; i++) {
        if (vs[i].q_regs) continue; /* the .qr twins come last (test_fa3_qr_family) */
        if (vs[i].ws && !vs[i].persistent) {
          assert_true(first_pers < 0); /* no plain tile after the first persistent one */
          if (n_ws++ == 0) next_plain = i;
          gen_variant twin = vs[i];
          twin.persistent = 1;
          if (gen_variant_check(&twin, &t) == AT_OK) n_fit++;
        }
        if (!vs[i].persistent) continue;
        if (first_pers < 0) first_pers = i;
        twins++, n_pers++;
        gen_variant twin = vs[i];
        twin.persistent = 0;
        while (next_plain < first_pers && memcmp(&vs[next_plain], &twin, sizeof twin) != 0) next_plain++;
        assert_true(next_plain < first_pers); /* its plain tile, after the previous twin's */
        next_plain++;
        TU_OK(gen_variant_key(&vs[i], key, sizeof key));
        TU_OK(gen_variant_parse(key, &back));
        assert_memory_equal(&back, &vs[i], sizeof back);
      }
      assert_int_equal(n_pers, n_fit);
      assert_true(n_pers > 0 && n_pers < n_ws); /* the loop keeps S live: the largest tiles' twins do not fit */
    }
  assert_true(twins >= 2 * 16);
  const at_shape none[] = {shape_of(AT_DTYPE_BF16, 128, AT_MASK_NONE, 32, 8, 1),
                           shape_of(AT_DTYPE_E4M3, 128, AT_MASK_CAUSAL_TL, 32, 8, 1)};
  for (int i = 0; i < 2; i++) {
    TU_OK(gen_enumerate(&none[i], &t, vs, GEN_MAX_VARIANTS, &n));
    for (int j = 0; j < n; j++) assert_int_equal(vs[j].persistent, 0);
  }
  /* Every head dim's causal space, persistent twins included, fits GEN_MAX_VARIANTS. */
  const int dims[] = {64, 96, 128, 192, 256};
  for (int i = 0; i < 5; i++) {
    s = shape_of(AT_DTYPE_F16, dims[i], AT_MASK_CAUSAL_BR, 16, 16, 1);
    TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
  }
}

/* Persistent variants compile without spills: at every head dim (bf16, causal bottom-right, GQA 4,
 * lse: the register-heaviest spec), for each listed warps x stages x ping-pong, the first listed
 * (the widest block_n, the most registers). The work-tile loop adds a few registers to the
 * producer (24 or 32 after setmaxnreg) and the consumers; a narrower tile of the same kind has
 * fewer. */
static void test_persistent_compile_no_spills(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  const int dims[] = {64, 96, 128, 192, 256};
  gen_variant all[5 * 8];
  int n = 0;
  for (int i = 0; i < 5; i++) {
    at_shape s = shape_of(AT_DTYPE_BF16, dims[i], AT_MASK_CAUSAL_BR, 32, 8, 1);
    gen_variant vs[GEN_MAX_VARIANTS];
    int k = 0;
    TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &k));
    for (int j = 0; j < k; j++) {
      if (!vs[j].persistent) continue;
      int seen = 0;
      for (int a = 0; a < n && !seen; a++)
        seen = all[a].spec.head_dim == vs[j].spec.head_dim && all[a].warps == vs[j].warps &&
               all[a].stages == vs[j].stages && all[a].ws == vs[j].ws;
      if (!seen) all[n++] = vs[j];
    }
  }
  assert_true(n >= 20);
  int bad = tu_compile_count_bad(all, n, &t, "persistent fa3");
  assert_int_equal(bad, 0);
}

/* ---- decode with an FP8 KV cache ---------------------------------------------------------- */

static at_shape kv8_shape(at_dtype q, at_dtype kv, int d, at_mask mask, int nq, int nkv, int t, int s, int lse)
{
  at_shape x = decode_shape(q, d, mask, nq, nkv, t, s);
  x.kv_dtype = kv, x.with_lse = lse;
  return x;
}

/* Keys spell the K/V dtype after Q's and round-trip; only decode takes it; malformed spellings
 * and pairings are refused. */
static void test_fp8_kv_keys(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  char key[GEN_KEY_MAX], entry[GEN_KEY_MAX];
  gen_variant v = {GEN_FAMILY_DECODE, {AT_DTYPE_BF16, 128, AT_MASK_NONE, 4, 0, AT_DTYPE_BF16, AT_DTYPE_E4M3, 0, 0},
                   1, 256, 4, 3, 8, 0, 0, 0, 0, 0, 0, 0};
  TU_OK(gen_variant_key(&v, key, sizeof key));
  assert_string_equal(key, "decode.bf16.kve4m3.d128.none.g4.bm1.bn256.w4.s3.sp8");
  TU_OK(gen_entry_name(&v, entry, sizeof entry));
  assert_string_equal(entry, "decode_bf16_kve4m3_d128_none_g4_bm1_bn256_w4_s3_sp8");
  TU_OK(gen_variant_check(&v, &t));
  gen_variant back;
  TU_OK(gen_variant_parse(key, &back));
  assert_memory_equal(&back, &v, sizeof v);
  TU_OK(gen_variant_parse("decode.f16.kve5m2.d64.causal-br.g7.bm16.bn64.w8.s2.sp3.lse", &back));
  assert_int_equal(back.spec.dtype, AT_DTYPE_F16);
  assert_int_equal(back.spec.kv_dtype, AT_DTYPE_E5M2);
  assert_int_equal(gen_spec_kv_dtype(&back.spec), AT_DTYPE_E5M2);
  assert_int_equal(back.spec.with_lse, 1);
  assert_int_equal(back.splits, 3);
  TU_OK(gen_variant_check(&back, &t));

  static const char *const bad[] = {
      "decode.bf16.kvbf16.d128.none.g4.bm1.bn128.w4.s3.sp8", /* the dtype repeated: not canonical */
      "decode.bf16.kvf32.d128.none.g4.bm1.bn128.w4.s3.sp8",
      "decode.bf16.kvx.d128.none.g4.bm1.bn128.w4.s3.sp8",
      "decode.bf16.d128.kve4m3.none.g4.bm1.bn128.w4.s3.sp8", /* out of order */
      "decode.kve4m3.bf16.d128.none.g4.bm1.bn128.w4.s3.sp8",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (gen_variant_parse(bad[i], &back) == AT_OK) fail_msg("key '%s' was accepted", bad[i]);
  /* Well-formed, but no family runs them: fa2 and fa3 read K/V in Q's dtype, decode 16-bit Q. */
  static const char *const refused[] = {
      "fa2.bf16.kve4m3.d128.none.g4.bm64.bn64.w4.s2",
      "fa3.bf16.kve4m3.d128.none.g4.bm64.bn64.w4.s2",
      "decode.e4m3.kve5m2.d128.none.g4.bm1.bn128.w4.s3.sp8.obf16",
      "decode.bf16.kvf16.d128.none.g4.bm1.bn128.w4.s3.sp8",
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    TU_OK(gen_variant_parse(refused[i], &back));
    if (gen_variant_check(&back, &t) != AT_ERR_INVALID) fail_msg("key '%s' passed the check", refused[i]);
  }
  TU_OK(gen_variant_parse(refused[0], &back));
  gen_variant_check(&back, &t);
  assert_non_null(strstr(at_last_error(), "fa2 reads K and V in the dtype of Q (bf16), not e4m3"));
  /* 256-key tiles are FP8 K/V's alone */
  v.spec.kv_dtype = AT_KV_SAME;
  assert_int_equal(gen_variant_check(&v, &t), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "block_n must be 32, 64 or 128 (or 256 with FP8 K/V)"));
}

/* An FP8 KV cache lists decode variants only (fa2 and fa3 say why not), with FP8-K/V keys that
 * round-trip and fit; tiles are bytes (block_n up to 256 at the smem of 128 16-bit keys); the
 * default is decode's; the source defines DEC_KV_DTYPE; T > 16 has no variant, in words. */
static void test_fp8_kv_enumeration(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  gen_variant vs[GEN_MAX_VARIANTS], back, def;
  char key[GEN_KEY_MAX];
  int n = 0, n16 = 0, seen256 = 0;
  const at_dtype qs[] = {AT_DTYPE_BF16, AT_DTYPE_F16}, kvs[] = {AT_DTYPE_E4M3, AT_DTYPE_E5M2};
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++) {
      at_shape s = kv8_shape(qs[a], kvs[b], 128, AT_MASK_NONE, 32, 8, 1, 16384, 0);
      TU_OK(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n));
      assert_true(n > 0);
      for (int i = 0; i < n; i++) {
        assert_int_equal(vs[i].family, GEN_FAMILY_DECODE);
        assert_int_equal(vs[i].spec.kv_dtype, kvs[b]);
        TU_OK(gen_variant_key(&vs[i], key, sizeof key));
        assert_non_null(strstr(key, b ? ".kve5m2.d128." : ".kve4m3.d128."));
        TU_OK(gen_variant_parse(key, &back));
        assert_memory_equal(&back, &vs[i], sizeof back);
        TU_OK(gen_variant_check(&vs[i], &t));
        TU_OK(gen_variant_matches(&vs[i], &s));
        assert_true(gen_smem_bytes(&vs[i]) <= t.smem_limit);
        seen256 += vs[i].block_n == 256;
        gen_launch_desc d;
        TU_OK(gen_launch_describe(&vs[i], &s, &d));
        int descales = 0;
        for (int k = 0; k < d.kernels[0].n_args; k++)
          descales += d.kernels[0].args[k] == GEN_ARG_DESCALE_K || d.kernels[0].args[k] == GEN_ARG_DESCALE_V;
        assert_int_equal(descales, 2);
      }
      TU_OK(gen_default_variant(&s, &t, &def));
      assert_int_equal(def.family, GEN_FAMILY_DECODE);
      assert_int_equal(def.spec.kv_dtype, kvs[b]);
      assert_int_equal(def.block_n, 256);
    }
  assert_true(seen256 > 0);
  /* the same shape with bf16 K/V: no 256-key tile, and twice the bytes per 128-key stage */
  at_shape s16 = decode_shape(AT_DTYPE_BF16, 128, AT_MASK_NONE, 32, 8, 1, 16384);
  TU_OK(gen_enumerate(&s16, &t, vs, GEN_MAX_VARIANTS, &n16));
  for (int i = 0; i < n16; i++) assert_int_not_equal(vs[i].block_n, 256);
  gen_variant a = {GEN_FAMILY_DECODE, {AT_DTYPE_BF16, 128, AT_MASK_NONE, 4, 0, AT_DTYPE_BF16, AT_DTYPE_E4M3, 0, 0},
                   1, 128, 4, 3, 1, 0, 0, 0, 0, 0, 0, 0};
  gen_variant b16 = a;
  b16.spec.kv_dtype = AT_KV_SAME;
  /* Q: 16 rows x 256 B; K and V: 3 stages x 128 keys x 128 B (FP8) or 256 B (bf16) */
  assert_int_equal(gen_smem_bytes(&a), 16 * 256 + 2 * 3 * 128 * 128);
  assert_int_equal(gen_smem_bytes(&b16), 16 * 256 + 2 * 3 * 128 * 256);

  /* GQA 7 at T = 16, D = 80 (odd chunk count), MQA: decode lists variants */
  const at_shape more[] = {kv8_shape(AT_DTYPE_F16, AT_DTYPE_E5M2, 64, AT_MASK_CAUSAL_BR, 14, 2, 16, 777, 1),
                           kv8_shape(AT_DTYPE_F16, AT_DTYPE_E4M3, 80, AT_MASK_CAUSAL_BR, 12, 2, 2, 3333, 1),
                           kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 128, AT_MASK_NONE, 8, 1, 1, 1000, 1)};
  for (int i = 0; i < 3; i++) {
    TU_OK(gen_enumerate(&more[i], &t, vs, GEN_MAX_VARIANTS, &n));
    assert_true(n > 0);
    assert_int_equal(count_family(vs, n, GEN_FAMILY_DECODE), n);
  }

  char *src = NULL;
  TU_OK(gen_emit(&a, &t, &src));
  assert_non_null(strstr(src, "#define DEC_KV_DTYPE 3 /* e4m3 */"));
  assert_non_null(strstr(src, "#define AT_IN_DTYPE 2 /* bf16 */"));
  free(src);
  TU_OK(gen_emit(&b16, &t, &src));
  /* no preamble line: the first definition is the template's default (K/V in Q's dtype) */
  assert_true(strstr(src, "#define DEC_KV_DTYPE ") == strstr(src, "#define DEC_KV_DTYPE AT_IN_DTYPE"));
  free(src);

  /* fa2 and fa3 refuse the spec and say which family runs it */
  at_shape s = kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 128, AT_MASK_NONE, 32, 8, 1, 16384, 0);
  gen_spec spec;
  assert_int_equal(gen_spec_from_shape(GEN_FAMILY_FA2, &s, &spec), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "fa2 reads K and V in the dtype of Q (bf16), not e4m3: an FP8 KV cache with "
                                          "16-bit Q runs on the decode family (queries of 1 to 16 tokens)"));
  assert_int_equal(gen_spec_from_shape(GEN_FAMILY_FA3, &s, &spec), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "fa3 reads K and V"));
  TU_OK(gen_spec_from_shape(GEN_FAMILY_DECODE, &s, &spec));
  /* T > 16, and T unknown: no variant, in words */
  s.q_len = 17;
  assert_int_equal(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n), AT_ERR_UNSUPPORTED);
  assert_int_equal(n, 0);
  assert_non_null(strstr(at_last_error(), "no generated variant reads e4m3 K/V with bf16 Q for T = 17: an FP8 KV cache "
                                          "runs on the decode family only, for queries of 1 to 16 tokens"));
  assert_int_equal(gen_default_variant(&s, &t, &def), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "for T = 17"));
  s.q_len = 0;
  assert_int_equal(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "without a query length"));
  /* decode's own limits come first for an FP8 KV cache (not fa2's refusal) */
  s = kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 72, AT_MASK_NONE, 8, 8, 1, 1000, 0);
  assert_int_equal(gen_enumerate(&s, &t, vs, GEN_MAX_VARIANTS, &n), AT_ERR_UNSUPPORTED);
  assert_non_null(strstr(at_last_error(), "decode runs head dims that are multiples of 16 in 32..256, not 72"));
}

/* Every FP8-K/V decode variant of the GPU test's shapes (tests/test_decode_fp8kv_gpu.c), of
 * configs/decode.yaml's FP8 rows and of the register-heaviest layouts compiles for sm_90a without
 * spills (one variant per tile: the split count changes no code). */
static void test_fp8_kv_compile_no_spills(void **state)
{
  (void)state;
  gen_target t = tu_sm90();
  const at_shape shapes[] = {
      /* test_decode_fp8kv_gpu.c's cases */
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 128, AT_MASK_NONE, 8, 1, 1, 1000, 1),
      kv8_shape(AT_DTYPE_F16, AT_DTYPE_E5M2, 64, AT_MASK_CAUSAL_BR, 14, 2, 16, 777, 1),
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E5M2, 128, AT_MASK_CAUSAL_BR, 8, 8, 3, 20, 1),
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 128, AT_MASK_NONE, 32, 8, 1, 5000, 0),
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 256, AT_MASK_CAUSAL_TL, 16, 2, 8, 2000, 1),
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 128, AT_MASK_CAUSAL_BR, 32, 8, 16, 4099, 1),
      kv8_shape(AT_DTYPE_F16, AT_DTYPE_E4M3, 80, AT_MASK_CAUSAL_BR, 12, 2, 2, 3333, 1),
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E5M2, 48, AT_MASK_NONE, 4, 4, 1, 1500, 1),
      /* configs/decode.yaml's FP8 K/V rows: GQA 4 and 8 at T 1, 4 and 16 */
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 128, AT_MASK_NONE, 32, 4, 1, 16384, 0),
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 128, AT_MASK_CAUSAL_BR, 32, 8, 4, 65536, 0),
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E4M3, 128, AT_MASK_CAUSAL_BR, 32, 4, 16, 65536, 0),
      /* the register-heaviest: D 256 with 16-row tiles, 128 packed rows at D 144, D 192 at T 1 */
      kv8_shape(AT_DTYPE_BF16, AT_DTYPE_E5M2, 256, AT_MASK_CAUSAL_BR, 16, 16, 16, 5000, 1),
      kv8_shape(AT_DTYPE_F16, AT_DTYPE_E5M2, 144, AT_MASK_CAUSAL_BR, 16, 2, 16, 5000, 1),
      kv8_shape(AT_DTYPE_F16, AT_DTYPE_E5M2, 192, AT_MASK_CAUSAL_BR, 32, 8, 1, 5000, 1),
  };
  enum { N_SHAPES = sizeof shapes / sizeof *shapes };
  int cap = N_SHAPES * GEN_MAX_VARIANTS, n = 0;
  gen_variant *all = calloc((size_t)cap, sizeof *all);
  assert_non_null(all);
  for (int i = 0; i < N_SHAPES; i++) {
    gen_variant vs[GEN_MAX_VARIANTS];
    int k = 0;
    TU_OK(gen_enumerate(&shapes[i], &t, vs, GEN_MAX_VARIANTS, &k));
    for (int j = 0; j < k; j++)
      if (j == 0 || vs[j - 1].stages != vs[j].stages || vs[j - 1].block_n != vs[j].block_n ||
          vs[j - 1].warps != vs[j].warps)
        all[n++] = vs[j];
  }
  /* .wgi3 with 9 slots (decode step 25): taken by key, not listed yet */
  assert_true(n < cap);
  TU_OK(gen_variant_parse("decode.bf16.kve4m3.d128.causal-br.g4.bm16.bn64.w4.s9.sp2.wgi3", &all[n]));
  TU_OK(gen_variant_check(&all[n++], &t));
  int bad = tu_compile_count_bad(all, n, &t, "decode with FP8 K/V");
  free(all);
  assert_int_equal(bad, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_literal_keys),     cmocka_unit_test(test_bad_keys),
      cmocka_unit_test(test_bad_shapes),       cmocka_unit_test(test_enumeration_space),
      cmocka_unit_test(test_smem_limit_prunes), cmocka_unit_test(test_emit),
      cmocka_unit_test(test_compile_no_spills), cmocka_unit_test(test_fp8_keys),
      cmocka_unit_test(test_fp8_targets),      cmocka_unit_test(test_fp8_enumeration),
      cmocka_unit_test(test_fp8_emit),
      cmocka_unit_test(test_fa3_family),         cmocka_unit_test(test_fp8_compile_no_spills),
      cmocka_unit_test(test_template_versions),  cmocka_unit_test(test_decode_family),
      cmocka_unit_test(test_decode_default_merge),
      cmocka_unit_test(test_decode_combine_rows),
      cmocka_unit_test(test_decode_wg),
      cmocka_unit_test(test_decode_compile_no_spills), cmocka_unit_test(test_fa3_ws_family), cmocka_unit_test(test_fa3_speculative_max), cmocka_unit_test(test_fa3_linear_p),
      cmocka_unit_test(test_ws_compile_no_spills), cmocka_unit_test(test_fa3_vt_family),
      cmocka_unit_test(test_fa3_tail_family),
      cmocka_unit_test(test_fa3_qr_family),
      cmocka_unit_test(test_fa3_persistent_family), cmocka_unit_test(test_persistent_compile_no_spills),
      cmocka_unit_test(test_fp8_kv_keys),        cmocka_unit_test(test_fp8_kv_enumeration),
      cmocka_unit_test(test_fp8_kv_compile_no_spills),
  };
  return TU_RUN_GROUP(tests, NULL, NULL);
}
