/* test_lookup.c — the library's lookup chain on a real cache file with hand-inserted rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "runtime/lookup.h"
#include "tests/testutil.h"
#include "tuner/tune.h"

static const char *GPU = "NVIDIA H200";
static char g_path[256];
static char g_templates[96];
static gen_target g_target;

static at_shape bf16(int d, int t, at_mask mask, int nq, int nkv)
{
  return (at_shape){.batch = 2, .q_len = t, .kv_len = t, .q_heads = nq, .kv_heads = nkv,
                    .head_dim = d, .dtype = AT_DTYPE_BF16, .mask = mask};
}

/* A variant valid for shape: its default, with block_n and stages changed so it differs from the
 * default. */
static void variant_key_for(const at_shape *s, int block_n, int stages, char *key)
{
  gen_variant v;
  TU_OK(gen_default_variant(s, &g_target, &v));
  v.block_n = block_n;
  v.stages = stages;
  TU_OK(gen_variant_check(&v, &g_target));
  TU_OK(gen_variant_key(&v, key, GEN_KEY_MAX));
}

/* This process as the lookup sees it: cuDNN 9.19.0 and NVRTC 13.0. */
static cache_env now_env(void)
{
  cache_env e;
  memset(&e, 0, sizeof e);
  snprintf(e.gpu_model, sizeof e.gpu_model, "%s", GPU);
  e.cc_major = 9, e.sm_count = 132;
  snprintf(e.driver, sizeof e.driver, "580.159.04");
  snprintf(e.nvrtc, sizeof e.nvrtc, "13.0");
  snprintf(e.cudnn, sizeof e.cudnn, "9.19.0");
  snprintf(e.template_version, sizeof e.template_version, "%s", g_templates);
  return e;
}

/* A best row measured under cudnn and nvrtc. */
static void put_best_measured(cache_db *db, const at_shape *s, const char *impl, double ms, const char *templates,
                              const char *cudnn, const char *nvrtc)
{
  cache_best b;
  memset(&b, 0, sizeof b);
  b.shape = *s;
  b.env = now_env();
  snprintf(b.env.cudnn, sizeof b.env.cudnn, "%s", cudnn);
  snprintf(b.env.nvrtc, sizeof b.env.nvrtc, "%s", nvrtc);
  snprintf(b.env.template_version, sizeof b.env.template_version, "%s", templates);
  snprintf(b.impl, sizeof b.impl, "%s", impl);
  b.time_ms = ms, b.tflops = 1, b.cudnn_ms = 2 * ms, b.err_naive = 1e-3, b.err_cudnn = NAN;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  TU_OK(cache_put_best(db, &b, NULL));
}

static void put_best(cache_db *db, const at_shape *s, const char *impl, double ms, const char *templates)
{
  put_best_measured(db, s, impl, ms, templates, "9.19.0", "13.0");
}

static char g_exact_key[GEN_KEY_MAX], g_far_key[GEN_KEY_MAX], g_near_key[GEN_KEY_MAX];
static char g_old_compare_key[GEN_KEY_MAX], g_old_nvrtc_key[GEN_KEY_MAX];
static char g_kv8_key[GEN_KEY_MAX], g_decode_key[GEN_KEY_MAX];

/* Decode, Nq 32 Nkv 8 D 128 T 1, bf16 Q; kv e4m3 for an FP8 KV cache, AT_KV_SAME for bf16 K/V. */
static at_shape decode_shape(int s, at_dtype kv)
{
  return (at_shape){.batch = 8, .q_len = 1, .kv_len = s, .q_heads = 32, .kv_heads = 8, .head_dim = 128,
                    .dtype = AT_DTYPE_BF16, .kv_dtype = kv};
}

/* The cache file and the -wal and -shm files SQLite keeps beside it. */
static void remove_cache_files(void)
{
  char side[sizeof g_path + 8];
  unlink(g_path);
  snprintf(side, sizeof side, "%s-wal", g_path), unlink(side);
  snprintf(side, sizeof side, "%s-shm", g_path), unlink(side);
}

static int setup(void **state)
{
  (void)state;
  snprintf(g_path, sizeof g_path, "/tmp/attntune-lookup-%d.db", (int)getpid());
  remove_cache_files();
  gen_templates_version(g_templates, sizeof g_templates);
  if (gen_target_for_arch("sm_90a", &g_target) != AT_OK) return -1;
  cache_db *db;
  if (cache_open(g_path, 0, &db) != AT_OK) return -1;
  at_shape a = bf16(128, 1024, AT_MASK_NONE, 16, 16), b = bf16(128, 4096, AT_MASK_NONE, 16, 16);
  at_shape c = bf16(64, 512, AT_MASK_CAUSAL_TL, 16, 16), stale = bf16(96, 1024, AT_MASK_NONE, 16, 16);
  at_shape g = bf16(128, 256, AT_MASK_NONE, 32, 8);
  variant_key_for(&a, 64, 2, g_exact_key);
  variant_key_for(&b, 64, 3, g_near_key);
  variant_key_for(&g, 64, 2, g_far_key);
  put_best(db, &a, g_exact_key, 0.05, g_templates);
  put_best(db, &b, g_near_key, 0.6, g_templates);
  put_best(db, &c, "cudnn", 0.02, g_templates); /* cuDNN measured fastest here */
  put_best(db, &stale, g_exact_key, 0.05, "tpl-000000000000");
  put_best(db, &g, g_far_key, 0.01, g_templates); /* GQA 4: another kind */
  /* Measured under an older cuDNN: a cuDNN winner, and a generated winner compared with it. */
  at_shape old_cudnn = bf16(64, 2048, AT_MASK_NONE, 16, 16), old_compare = bf16(64, 8192, AT_MASK_NONE, 16, 16);
  variant_key_for(&old_compare, 64, 3, g_old_compare_key);
  put_best_measured(db, &old_cudnn, "cudnn", 0.2, g_templates, "9.14.0", "13.0");
  put_best_measured(db, &old_compare, g_old_compare_key, 1.5, g_templates, "9.14.0", "13.0");
  /* A generated winner compiled by an older NVRTC, of a kind of its own. */
  at_shape old_nvrtc = bf16(128, 1024, AT_MASK_CAUSAL_BR, 8, 8);
  variant_key_for(&old_nvrtc, 64, 2, g_old_nvrtc_key);
  put_best_measured(db, &old_nvrtc, g_old_nvrtc_key, 0.1, g_templates, "9.19.0", "12.8");
  /* An FP8 KV cache and the same shape with bf16 K/V: two kinds (the cache keeps the K/V dtype). */
  at_shape kv8 = decode_shape(16384, AT_DTYPE_E4M3), dec = decode_shape(16384, AT_KV_SAME);
  variant_key_for(&kv8, 128, 2, g_kv8_key);
  variant_key_for(&dec, 64, 3, g_decode_key);
  put_best(db, &kv8, g_kv8_key, 0.03, g_templates);
  put_best(db, &dec, g_decode_key, 0.06, g_templates);
  cache_close(db);
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  remove_cache_files();
  return 0;
}

static void chain_in(const cache_env *now, const at_shape *s, int fused_only, rt_lookup *l)
{
  cache_db *db;
  TU_OK(cache_open(g_path, 1, &db)); /* read-only is enough */
  TU_OK(rt_lookup_chain(db, now, &g_target, s, fused_only, l));
  cache_close(db);
}

static void chain(const at_shape *s, int fused_only, rt_lookup *l)
{
  cache_env now = now_env();
  chain_in(&now, s, fused_only, l);
}

static void test_exact_row_first(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = bf16(128, 1024, AT_MASK_NONE, 16, 16);
  chain(&s, 0, &l);
  assert_true(l.n_steps >= 4);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_EXACT);
  assert_string_equal(l.steps[0].impl, g_exact_key);
  assert_true(fabs(l.steps[0].tuned_ms - 0.05) < 1e-12);
  /* then the nearest other shape of the kind, the default, cuDNN, naive */
  assert_int_equal(l.steps[1].choice, AT_CHOICE_NEAREST);
  assert_string_equal(l.steps[1].impl, g_near_key);
  assert_int_equal(l.steps[2].choice, AT_CHOICE_DEFAULT);
  assert_int_equal(l.steps[3].choice, AT_CHOICE_CUDNN);
  assert_int_equal(l.steps[4].choice, AT_CHOICE_NAIVE);
}

static void test_nearest_row_of_the_same_kind(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = bf16(128, 3000, AT_MASK_NONE, 16, 16); /* closer to 4096 than to 1024 */
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_NEAREST);
  assert_string_equal(l.steps[0].impl, g_near_key);
  assert_string_equal(l.steps[0].tuned_shape, "b2.t4096.s4096.hq16.hkv16.d128.bf16.none");
  assert_non_null(strstr(l.skipped, "no tuned kernel stored for this shape"));
  s = bf16(128, 1100, AT_MASK_NONE, 16, 16); /* closer to 1024 */
  chain(&s, 0, &l);
  assert_string_equal(l.steps[0].impl, g_exact_key);
  /* The GQA-4 row is another kind: a GQA-4 query of a new length finds it, MHA never does. */
  s = bf16(128, 512, AT_MASK_NONE, 32, 8);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_NEAREST);
  assert_string_equal(l.steps[0].impl, g_far_key);
}

static void test_default_when_nothing_of_the_kind(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = bf16(256, 2048, AT_MASK_CAUSAL_BR, 16, 16);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
  gen_variant v;
  TU_OK(gen_variant_parse(l.steps[0].impl, &v));
  TU_OK(gen_variant_matches(&v, &s));
  assert_int_equal(l.steps[1].choice, AT_CHOICE_CUDNN);
  assert_non_null(strstr(l.skipped, "nearest: no other tuned shape"));
}

static void test_cudnn_when_it_measured_fastest(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = bf16(64, 512, AT_MASK_CAUSAL_TL, 16, 16);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_EXACT);
  assert_string_equal(l.steps[0].impl, "cudnn");
  assert_non_null(strstr(l.steps[0].why, "cuDNN measured fastest"));
  /* Asking for fa2 skips the cuDNN row and never ends in cuDNN or naive. */
  chain(&s, 1, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
  for (int i = 0; i < l.n_steps; i++) assert_string_not_equal(l.steps[i].impl, "cudnn");
  assert_non_null(strstr(l.skipped, "generated kernels were asked for"));
}

static void test_cudnn_then_naive_when_fa2_cannot(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = bf16(12, 64, AT_MASK_NONE, 2, 2); /* no fa2 variant for head dim 12 */
  chain(&s, 0, &l);
  assert_int_equal(l.n_steps, 2);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_CUDNN);
  assert_int_equal(l.steps[1].choice, AT_CHOICE_NAIVE);
  assert_non_null(strstr(l.skipped, "generator default"));
}

static void test_stale_rows_are_not_used(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = bf16(96, 1024, AT_MASK_NONE, 16, 16);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
  assert_non_null(strstr(l.skipped, "stale"));
  assert_non_null(strstr(l.skipped, "tpl-000000000000"));
}

/* A row that says cuDNN is fastest, measured with another cuDNN, is served but marked stale,
 * with the versions in words (before, it was served as current). */
static void test_rows_of_another_cudnn_are_marked_stale(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = bf16(64, 2048, AT_MASK_NONE, 16, 16);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_EXACT);
  assert_string_equal(l.steps[0].impl, "cudnn");
  assert_true(l.steps[0].stale);
  assert_non_null(strstr(l.steps[0].why, "stale: cuDNN measured fastest with cuDNN 9.14.0, this process has cuDNN 9.19.0"));
  assert_non_null(strstr(l.steps[0].why, "'attntune tune' retimes it"));
  /* A generated kernel that beat the old cuDNN: the comparison is stale too. */
  s = bf16(64, 8192, AT_MASK_NONE, 16, 16);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_EXACT);
  assert_string_equal(l.steps[0].impl, g_old_compare_key);
  assert_true(l.steps[0].stale);
  assert_non_null(strstr(l.steps[0].why, "compared with cuDNN 9.14.0, this process has cuDNN 9.19.0"));
  /* The nearest step says the same of the row it takes. */
  s = bf16(64, 6000, AT_MASK_NONE, 16, 16);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_NEAREST);
  assert_string_equal(l.steps[0].impl, g_old_compare_key);
  assert_true(l.steps[0].stale);
  assert_non_null(strstr(l.steps[0].why, "stale: compared with cuDNN 9.14.0"));
  /* Current rows are not marked; under cuDNN 9.14.0 the old rows are current. */
  s = bf16(64, 512, AT_MASK_CAUSAL_TL, 16, 16);
  chain(&s, 0, &l);
  assert_false(l.steps[0].stale);
  assert_null(strstr(l.steps[0].why, "stale"));
  cache_env then = now_env();
  snprintf(then.cudnn, sizeof then.cudnn, "9.14.0");
  s = bf16(64, 2048, AT_MASK_NONE, 16, 16);
  chain_in(&then, &s, 0, &l);
  assert_false(l.steps[0].stale);
  /* A process without cuDNN cannot tell: the row is not called stale. */
  cache_env blind = now_env();
  blind.cudnn[0] = '\0';
  chain_in(&blind, &s, 0, &l);
  assert_false(l.steps[0].stale);
}

static void test_rows_of_another_nvrtc_are_marked_stale(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = bf16(128, 1024, AT_MASK_CAUSAL_BR, 8, 8);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_EXACT);
  assert_string_equal(l.steps[0].impl, g_old_nvrtc_key);
  assert_true(l.steps[0].stale);
  assert_non_null(strstr(l.steps[0].why, "kernels compiled with NVRTC 12.8, this process has NVRTC 13.0"));
  /* And the row helper says so directly; another template version is not usable at all. */
  cache_best b;
  memset(&b, 0, sizeof b);
  b.env = now_env();
  snprintf(b.env.nvrtc, sizeof b.env.nvrtc, "12.8");
  snprintf(b.impl, sizeof b.impl, "%s", g_old_nvrtc_key);
  cache_env now = now_env();
  int stale = 0;
  char why[256];
  assert_true(rt_row_usable(&b, &now, &stale, why, sizeof why));
  assert_true(stale);
  snprintf(b.env.template_version, sizeof b.env.template_version, "tpl-000000000000");
  assert_false(rt_row_usable(&b, &now, &stale, why, sizeof why));
  assert_non_null(strstr(why, "tpl-000000000000"));
}

static void test_no_cache(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = bf16(128, 1024, AT_MASK_NONE, 16, 16);
  cache_env now = now_env(), a100 = now_env();
  TU_OK(rt_lookup_chain(NULL, &now, &g_target, &s, 0, &l));
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
  assert_non_null(strstr(l.skipped, "no cache"));
  /* Another GPU model's rows are not this GPU's. */
  cache_db *db;
  TU_OK(cache_open(g_path, 1, &db));
  snprintf(a100.gpu_model, sizeof a100.gpu_model, "NVIDIA A100-SXM4-80GB");
  TU_OK(rt_lookup_chain(db, &a100, &g_target, &s, 0, &l));
  cache_close(db);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
}

/* The FP8 KV cache: its own rows (never the bf16 one's), decode's FP8-K/V default, no cuDNN step
 * (with the reason), and for T > 16 only the naive kernels, with the generator's reason. */
static void test_fp8_kv_cache(void **state)
{
  (void)state;
  rt_lookup l;
  at_shape s = decode_shape(16384, AT_DTYPE_E4M3);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_EXACT);
  assert_string_equal(l.steps[0].impl, g_kv8_key);
  assert_string_equal(l.steps[0].tuned_shape, "b8.t1.s16384.hq32.hkv8.d128.bf16.kve4m3.none");
  assert_non_null(strstr(g_kv8_key, "decode.bf16.kve4m3.d128.none.g4."));
  s = decode_shape(8192, AT_DTYPE_E4M3);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_NEAREST);
  assert_string_equal(l.steps[0].impl, g_kv8_key);
  assert_int_equal(l.steps[1].choice, AT_CHOICE_DEFAULT);
  assert_non_null(strstr(l.steps[1].impl, "decode.bf16.kve4m3.d128.none.g4.bm1."));
  assert_int_equal(l.steps[2].choice, AT_CHOICE_NAIVE);
  assert_int_equal(l.n_steps, 3);
  assert_non_null(strstr(l.skipped, "cuDNN: attntune's cuDNN graphs take Q, K and V in one dtype"));
  /* the same shape with bf16 K/V finds the bf16 row, and e5m2 neither */
  s = decode_shape(8192, AT_KV_SAME);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_NEAREST);
  assert_string_equal(l.steps[0].impl, g_decode_key);
  s = decode_shape(8192, AT_DTYPE_E5M2);
  chain(&s, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
  assert_non_null(strstr(l.steps[0].impl, "decode.bf16.kve5m2."));
  /* T > 16: decode does not serve it, fa2/fa3 read K/V in Q's dtype, cuDNN neither: naive */
  s.q_len = 100;
  chain(&s, 0, &l);
  assert_int_equal(l.n_steps, 1);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_NAIVE);
  assert_non_null(strstr(l.skipped, "generator default: no generated variant reads e5m2 K/V with bf16 Q for T = 100"));
  chain(&s, 1, &l);
  assert_int_equal(l.n_steps, 0);
}

/* A serving row (cache.h: its key's serving part) in a cache of its own. */
static void put_serving_best(cache_db *db, const at_shape *s, const char *serving, const char *impl, double ms)
{
  cache_best b;
  memset(&b, 0, sizeof b);
  b.shape = *s;
  snprintf(b.serving, sizeof b.serving, "%s", serving);
  b.env = now_env();
  snprintf(b.impl, sizeof b.impl, "%s", impl);
  b.time_ms = ms, b.tflops = 1, b.cudnn_ms = 2 * ms, b.err_naive = 1e-3, b.err_cudnn = NAN;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  TU_OK(cache_put_best(db, &b, NULL));
}

static void paged_key(const at_shape *s, int page_size, int splits, char *key)
{
  gen_variant v;
  TU_OK(gen_default_variant_paged(s, page_size, &g_target, &v));
  if (splits) v.splits = splits;
  TU_OK(gen_variant_check(&v, &g_target));
  TU_OK(gen_variant_key(&v, key, GEN_KEY_MAX));
}

static void serving_chain(cache_db *db, const at_shape *s, const at_serving_layout *layout, int fused_only,
                          rt_lookup *l)
{
  cache_env now = now_env();
  TU_OK(rt_lookup_chain_serving(db, &now, &g_target, s, layout, fused_only, l));
}

/* Tuned serving rows: the exact step takes the row of the same shape and layout (any length
 * bucket: the plan does not know its lengths; the longest bucket of several), never a row of
 * another layout or page size, nor one whose kernel reads another page size; the padded chain
 * never takes a serving row as its nearest. */
static void test_tuned_serving_rows(void **state)
{
  (void)state;
  char path[300], pg16[GEN_KEY_MAX], pg16_other[GEN_KEY_MAX], pg32[GEN_KEY_MAX], rg[GEN_KEY_MAX];
  snprintf(path, sizeof path, "%s.serving", g_path);
  unlink(path);
  cache_db *db;
  TU_OK(cache_open(path, 0, &db));
  at_shape dec = decode_shape(4096, AT_KV_SAME);
  paged_key(&dec, 16, 0, pg16);
  paged_key(&dec, 16, 4, pg16_other);
  paged_key(&dec, 32, 0, pg32);
  assert_string_not_equal(pg16, pg16_other);
  put_serving_best(db, &dec, ".kvpaged16.lkv1024", pg16_other, 0.02);
  put_serving_best(db, &dec, ".kvpaged16.lkv4096", pg16, 0.04); /* the longer mix: taken */
  put_serving_best(db, &dec, ".kvpaged32.lkv4096", pg32, 0.01);
  at_shape pre = bf16(128, 1024, AT_MASK_CAUSAL_BR, 16, 16);
  gen_variant v;
  TU_OK(gen_default_variant_serving(&pre, 0, GEN_RAGGED_QKV, &g_target, &v));
  TU_OK(gen_variant_key(&v, rg, sizeof rg));
  put_serving_best(db, &pre, ".qragged.kvragged.lq512.lkv512", rg, 0.03);
  put_serving_best(db, &pre, ".qragged.lq512", pg16, 0.01); /* a paged decode kernel: refused */
  rt_lookup l;

  at_serving_layout paged16 = at_serving_layout_make(&dec, AT_SEQ_PADDED, AT_SEQ_PAGED, 16);
  serving_chain(db, &dec, &paged16, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_EXACT);
  assert_string_equal(l.steps[0].impl, pg16);
  assert_non_null(strstr(l.steps[0].tuned_shape, ".kvpaged16.lkv4096"));
  assert_non_null(strstr(l.steps[0].why, "lengths lkv4096"));
  assert_int_equal(l.steps[1].choice, AT_CHOICE_DEFAULT);

  /* Page size 64: the rows of 16 and 32 are another layout's. */
  at_serving_layout paged64 = at_serving_layout_make(&dec, AT_SEQ_PADDED, AT_SEQ_PAGED, 64);
  serving_chain(db, &dec, &paged64, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
  assert_non_null(strstr(l.skipped, "exact: no tuned kernel stored for"));
  assert_non_null(strstr(l.skipped, ".kvpaged64 on NVIDIA H200"));

  /* Page size 1 is not a prefix match of .kvpaged16. */
  at_serving_layout paged1 = at_serving_layout_make(&dec, AT_SEQ_PADDED, AT_SEQ_PAGED, 1);
  serving_chain(db, &dec, &paged1, 0, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);

  /* Ragged Q and K/V: its own row; ragged Q with padded K/V: the row there names a paged kernel. */
  at_serving_layout ragged = at_serving_layout_make(&pre, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);
  serving_chain(db, &pre, &ragged, 1, &l);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_EXACT);
  assert_string_equal(l.steps[0].impl, rg);
  at_serving_layout q_only = at_serving_layout_make(&pre, AT_SEQ_RAGGED, AT_SEQ_PADDED, 0);
  serving_chain(db, &pre, &q_only, 0, &l);
  assert_int_not_equal(l.steps[0].choice, AT_CHOICE_EXACT);
  assert_non_null(strstr(l.skipped, "exact: 1 tuned row of this shape and layout refused"));
  assert_non_null(strstr(l.skipped, "does not read this layout"));

  /* Padded tensors of the same shape: no exact row, and no serving row as the nearest. */
  cache_env now = now_env();
  TU_OK(rt_lookup_chain(db, &now, &g_target, &dec, 0, &l));
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
  assert_non_null(strstr(l.skipped, "nearest: no other tuned shape"));
  cache_close(db);
  unlink(path);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exact_row_first),
      cmocka_unit_test(test_nearest_row_of_the_same_kind),
      cmocka_unit_test(test_default_when_nothing_of_the_kind),
      cmocka_unit_test(test_cudnn_when_it_measured_fastest),
      cmocka_unit_test(test_cudnn_then_naive_when_fa2_cannot),
      cmocka_unit_test(test_stale_rows_are_not_used),
      cmocka_unit_test(test_rows_of_another_cudnn_are_marked_stale),
      cmocka_unit_test(test_rows_of_another_nvrtc_are_marked_stale),
      cmocka_unit_test(test_no_cache),
      cmocka_unit_test(test_fp8_kv_cache),
      cmocka_unit_test(test_tuned_serving_rows),
  };
  return TU_RUN_GROUP(tests, setup, teardown);
}
