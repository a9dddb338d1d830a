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

static gen_target sm90(void)
{
  gen_target t;
  TU_OK(gen_target_for_arch("sm_90a", &t));
  return t;
}

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
  gen_variant v = {GEN_FAMILY_FA2, {AT_DTYPE_BF16, 128, AT_MASK_CAUSAL_TL, 4, 0}, 128, 64, 4, 2};
  TU_OK(gen_variant_key(&v, key, sizeof key));
  assert_string_equal(key, "fa2.bf16.d128.causal.g4.bm128.bn64.w4.s2");
  TU_OK(gen_entry_name(&v, entry, sizeof entry));
  assert_string_equal(entry, "fa2_bf16_d128_causal_g4_bm128_bn64_w4_s2");

  gen_variant w = {GEN_FAMILY_FA2, {AT_DTYPE_F16, 80, AT_MASK_CAUSAL_BR, 6, 1}, 64, 32, 4, 3};
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
      "fa3.bf16.d128.causal.g4.bm128.bn64.w4.s2",      /* unknown family */
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
  gen_target t = sm90();
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
  gen_target t = sm90();
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
  gen_target big = sm90(), small;
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
  gen_variant v = {GEN_FAMILY_FA2, {AT_DTYPE_BF16, 256, AT_MASK_NONE, 1, 0}, 128, 128, 8, 3};
  assert_int_not_equal(gen_variant_check(&v, &big), AT_OK);
  assert_non_null(strstr(at_last_error(), "shared memory"));
}

static void test_emit(void **state)
{
  (void)state;
  gen_target t = sm90();
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

/* The spill-free promise: every listed variant of the tested shapes compiles for sm_90a with zero
 * spill bytes and no stack frame. All of them, compiled in parallel (~0.3 s each). */
static void test_compile_no_spills(void **state)
{
  (void)state;
  gen_target t = sm90();
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
          n += k;
        }
  gen_compiled *out = calloc((size_t)n, sizeof *out);
  assert_non_null(out);
  TU_OK(gen_compile_all(all, n, &t, 0, out));
  int bad = 0;
  for (int i = 0; i < n; i++) {
    const gen_compiled *c = &out[i];
    if (c->status != AT_OK) {
      printf("  %s: %s\n", c->key, c->message);
      bad++;
    } else if (c->resources.spill_store_bytes != 0 || c->resources.spill_load_bytes != 0 ||
               c->resources.stack_bytes != 0) {
      printf("  %s: %d registers, %d/%d bytes spilled, %d bytes stack\n", c->key, c->resources.registers,
             c->resources.spill_store_bytes, c->resources.spill_load_bytes, c->resources.stack_bytes);
      bad++;
    }
  }
  printf("  compiled %d variants for sm_90a, %d with errors or spills\n", n, bad);
  gen_compiled_free(out, n);
  free(out);
  free(all);
  assert_int_equal(bad, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_literal_keys),     cmocka_unit_test(test_bad_keys),
      cmocka_unit_test(test_bad_shapes),       cmocka_unit_test(test_enumeration_space),
      cmocka_unit_test(test_smem_limit_prunes), cmocka_unit_test(test_emit),
      cmocka_unit_test(test_compile_no_spills),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
