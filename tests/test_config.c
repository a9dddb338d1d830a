/*
 * test_config.c — tuning configs: the sample files in configs/, sweep expansion and dedup, every
 * kind of error with its line and column, shape keys and fleet shards. No GPU needed.
 *
 * Error messages are compared whole: they are what a user reads, and docs/config.md quotes them.
 * Each file in configs/bad/ starts with "# expect: LINE:COL: message", the message its path gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tuner/config.h"
#include "tuner/tune.h"
#include "generator/generator.h"
#include "tests/testutil.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* The source tree's configs/ (or configs/bad), found from this file's path. */
static void configs_dir(const char *sub, char *out, size_t size)
{
  /* <root>/tests/test_config.c -> <root>/configs/<sub>; "<root>/" is empty for a relative path. */
  const char *file = __FILE__, *end = strstr(file, "tests/test_config.c");
  if (!end) fail_msg("cannot find the source tree from %s", file);
  snprintf(out, size, "%.*sconfigs%s%s", (int)(end - file), file, *sub ? "/" : "", sub);
}

static tn_config parse_ok(const char *yaml)
{
  tn_config c;
  at_status rc = tn_config_parse(yaml, strlen(yaml), "t.yaml", &c);
  if (rc != AT_OK) fail_msg("parse -> %s: %s", at_status_name(rc), at_last_error());
  return c;
}

/* Mismatches are printed and counted rather than fatal, so one run shows every wrong message;
 * each error test ends with assert_no_mismatch(). */
static int g_mismatches;

static void expect_error(const char *yaml, at_status want, const char *message)
{
  tn_config c;
  at_status rc = tn_config_parse(yaml, strlen(yaml), "t.yaml", &c);
  if (rc != want || strcmp(at_last_error(), message) != 0) {
    print_error("for config:\n%s  expected %s: %s\n  got      %s: %s\n", yaml, at_status_name(want), message,
                at_status_name(rc), at_last_error());
    g_mismatches++;
  }
  assert_int_equal(c.n_shapes, 0);
  assert_null(c.shapes);
}

static void assert_no_mismatch(void)
{
  int n = g_mismatches;
  g_mismatches = 0;
  assert_int_equal(n, 0);
}

/* Shape i's key; a ragged or paged shape's with its layout and length buckets (at_serving_key),
 * as tune names it: a paged and a ragged shape of one batch share the padded key. */
static void key_of(const tn_config *c, int i, char *key)
{
  const tn_serving_shape *v = c->serving ? &c->serving[i] : NULL;
  if (v && !at_serving_is_padded(&v->layout)) {
    at_serving_key(&c->shapes[i], &v->layout, v->layout.q_layout == AT_SEQ_RAGGED ? v->q_lens : NULL, v->kv_lens, key,
                   TN_SHAPE_KEY_CAP);
    return;
  }
  tn_shape_key(&c->shapes[i], key, TN_SHAPE_KEY_CAP);
}

/* Index of the shape with key, or -1. */
static int find_key(const tn_config *c, const char *key)
{
  char k[TN_SHAPE_KEY_CAP];
  for (int i = 0; i < c->n_shapes; i++) {
    key_of(c, i, k);
    if (strcmp(k, key) == 0) return i;
  }
  return -1;
}

static void assert_keys(const tn_config *c, const char *const *keys, int n)
{
  char k[TN_SHAPE_KEY_CAP];
  assert_int_equal(c->n_shapes, n);
  for (int i = 0; i < n; i++) {
    key_of(c, i, k);
    assert_string_equal(k, keys[i]);
  }
}

/* A minimal valid entry, for tests about other sections. */
#define ONE_SHAPE "shapes:\n  - {seq_len: 128, q_heads: 4, head_dim: 64}\n"

/* ---- the sample configs ------------------------------------------------------------------ */

static int is_yaml(const char *name)
{
  size_t n = strlen(name);
  return n > 5 && strcmp(name + n - 5, ".yaml") == 0;
}

static void test_every_sample_config_parses(void **state)
{
  (void)state;
  char dir[1024], path[2048];
  configs_dir("", dir, sizeof dir);
  DIR *d = opendir(dir);
  if (!d) fail_msg("cannot open %s", dir);
  int n_files = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!is_yaml(e->d_name)) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    tn_config c;
    at_status rc = tn_config_load(path, &c);
    if (rc != AT_OK) fail_msg("%s: %s", path, at_last_error());
    assert_true(c.n_shapes > 0);
    assert_string_equal(c.path, path);
    for (int i = 0; i < c.n_shapes; i++) assert_int_equal(at_shape_check(&c.shapes[i]), AT_OK);
    for (int i = 0; i < c.n_shapes; i++) { /* deduplicated: keys are unique */
      char k[TN_SHAPE_KEY_CAP];
      key_of(&c, i, k);
      assert_int_equal(find_key(&c, k), i);
    }
    tn_config_free(&c);
    n_files++;
  }
  closedir(d);
  assert_true(n_files >= 3);
}

static void load_sample(const char *name, tn_config *c)
{
  char dir[1024], path[2048];
  configs_dir("", dir, sizeof dir);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  at_status rc = tn_config_load(path, c);
  if (rc != AT_OK) fail_msg("%s: %s", path, at_last_error());
}

static void test_codelab_shapes(void **state)
{
  (void)state;
  tn_config c;
  load_sample("codelab.yaml", &c);
  /* seq-sweep 6 lengths x 2 masks = 12; batch-sweep 16, one already in seq-sweep (B=4, T=256);
   * mha-gqa-mqa 2 x 3 x 2 = 12, of which Nkv=8 (4) repeat seq-sweep; fp8 3 x 2 x 2 = 12; fp32 1. */
  assert_int_equal(c.n_shapes, 12 + 15 + 8 + 12 + 1);
  static const char *const first[] = {
      "b4.t64.s64.hq8.hkv8.d64.bf16.none",
      "b4.t64.s64.hq8.hkv8.d64.bf16.causal",
      "b4.t128.s128.hq8.hkv8.d64.bf16.none",
      "b4.t128.s128.hq8.hkv8.d64.bf16.causal",
  };
  char k[TN_SHAPE_KEY_CAP];
  for (int i = 0; i < 4; i++) {
    key_of(&c, i, k);
    assert_string_equal(k, first[i]);
    assert_string_equal(c.groups[i], "seq-sweep");
  }
  int i = find_key(&c, "b4.t256.s256.hq8.hkv8.d64.bf16.none");
  assert_int_equal(i, 4);
  assert_string_equal(c.groups[i], "seq-sweep"); /* first occurrence keeps its group */
  i = find_key(&c, "b16.t256.s256.hq8.hkv8.d64.bf16.none");
  assert_true(i > 0);
  assert_string_equal(c.groups[i], "batch-sweep");
  i = find_key(&c, "b4.t2048.s2048.hq8.hkv1.d64.bf16.causal");
  assert_true(i > 0);
  assert_string_equal(c.groups[i], "mha-gqa-mqa");
  assert_true(find_key(&c, "b4.t1024.s1024.hq8.hkv8.d64.e5m2.causal") > 0);
  assert_true(find_key(&c, "b4.t512.s512.hq8.hkv8.d64.e4m3.none") > 0);
  assert_int_equal(find_key(&c, "b4.t4096.s4096.hq8.hkv8.d64.bf16.none"), -1);
  /* The codelab's shape in fp32 (the naive kernels only), next to its bf16 row; the last shape. */
  i = find_key(&c, "b4.t128.s128.hq8.hkv8.d64.f32.none");
  assert_int_equal(i, c.n_shapes - 1);
  assert_string_equal(c.groups[i], "fp32");
  assert_int_equal(c.shapes[i].dtype, AT_DTYPE_F32);
  assert_false(c.shapes[i].with_lse);
  assert_int_equal(find_key(&c, "b4.t128.s128.hq8.hkv8.d64.bf16.none"), 2);
  for (int k = 0; k < c.n_shapes; k++) /* the only f32 shape */
    assert_true(k == i || c.shapes[k].dtype != AT_DTYPE_F32);
  assert_true(c.all_devices);
  assert_int_equal(c.budget_seconds, 60);
  tn_config_free(&c);
}

static void test_llm_prefill_and_quick(void **state)
{
  (void)state;
  tn_config c;
  load_sample("llm-prefill.yaml", &c);
  assert_int_equal(c.n_shapes, 2 * 5 * 2 + 3);
  for (int i = 0; i < c.n_shapes; i++) {
    assert_int_equal(c.shapes[i].head_dim, 128);
    assert_int_equal(c.shapes[i].q_heads, 32);
    assert_int_equal(c.shapes[i].dtype, AT_DTYPE_BF16);
    assert_true(c.shapes[i].mask != AT_MASK_NONE);
  }
  assert_true(find_key(&c, "b2.t16384.s16384.hq32.hkv4.d128.bf16.causal") >= 0);
  assert_true(find_key(&c, "b1.t2048.s16384.hq32.hkv8.d128.bf16.causal-br.lse") >= 0);
  tn_config_free(&c);

  load_sample("quick.yaml", &c);
  assert_int_equal(c.n_shapes, 9);
  const tn_values *bm = tn_config_search(&c, "fa2", "block_m");
  assert_non_null(bm);
  assert_int_equal(bm->n, 2);
  assert_int_equal(bm->v[0], 64);
  assert_int_equal(bm->v[1], 128);
  assert_int_equal(tn_config_search(&c, "fa2", "stages")->n, 1);
  assert_int_equal(c.budget_candidates, 8);
  assert_int_equal(c.keep_count, 4);
  assert_true(c.keep_fraction == 0);
  tn_config_free(&c);
}

/* configs/decode.yaml (issue #15) and its quick check: short queries only, bf16 D = 128 (K/V bf16
 * or e4m3), GQA 4 and 8, no mask for T = 1 and bottom-right causal above, B 1..128 and S 1k..128k
 * covered, and the search narrowed so the budget goes to decode. */
static void check_decode_shapes(const tn_config *c)
{
  for (int i = 0; i < c->n_shapes; i++) {
    const at_shape *s = &c->shapes[i];
    assert_true(s->q_len >= 1 && s->q_len <= 16);
    assert_int_equal(s->dtype, AT_DTYPE_BF16);
    assert_true(s->kv_dtype == AT_KV_SAME || s->kv_dtype == AT_DTYPE_E4M3);
    assert_int_equal(s->head_dim, 128);
    assert_int_equal(s->q_heads, 32);
    assert_true(s->kv_heads == 8 || s->kv_heads == 4);
    assert_int_equal(s->mask, s->q_len == 1 ? AT_MASK_NONE : AT_MASK_CAUSAL_BR);
    /* Every K/V cache fits the H200 several times over: at most 2M tokens of 8 heads. */
    assert_true((double)s->batch * s->kv_len * s->kv_heads <= 2.0 * 1024 * 1024 * 8);
  }
}

static void test_decode_configs(void **state)
{
  (void)state;
  tn_config c;
  load_sample("decode.yaml", &c);
  /* decode-batch repeats B=8 S=16k; each sweep twice: bf16 K/V and an e4m3 KV cache */
  assert_int_equal(c.n_shapes, 2 * (5 * 2 + (4 * 2 - 2) + 4 * 2 * 2));
  check_decode_shapes(&c);
  int kv8 = 0;
  for (int i = 0; i < c.n_shapes; i++) kv8 += c.shapes[i].kv_dtype == AT_DTYPE_E4M3;
  assert_int_equal(kv8, c.n_shapes / 2);
  assert_true(find_key(&c, "b8.t1.s16384.hq32.hkv8.d128.bf16.kve4m3.none") >= 0);
  assert_true(find_key(&c, "b128.t1.s16384.hq32.hkv4.d128.bf16.kve4m3.none") >= 0);
  assert_true(find_key(&c, "b8.t16.s65536.hq32.hkv8.d128.bf16.kve4m3.causal-br") >= 0);
  assert_true(find_key(&c, "b8.t1.s131072.hq32.hkv4.d128.bf16.none") >= 0);
  assert_true(find_key(&c, "b128.t1.s16384.hq32.hkv8.d128.bf16.none") >= 0);
  assert_true(find_key(&c, "b1.t1.s16384.hq32.hkv4.d128.bf16.none") >= 0);
  assert_true(find_key(&c, "b8.t2.s4096.hq32.hkv8.d128.bf16.causal-br") >= 0);
  assert_true(find_key(&c, "b8.t16.s65536.hq32.hkv4.d128.bf16.causal-br") >= 0);
  assert_int_equal(tn_config_search(&c, "decode", "splits")->n, 0);
  assert_int_equal(tn_config_search(&c, "fa2", "block_n")->n, 1);
  assert_int_equal(tn_config_search(&c, "fa3", "block_n")->n, 1);
  assert_true(c.budget_candidates > 0);
  assert_true(c.budget_seconds > 0);
  tn_config_free(&c);

  load_sample("decode-quick.yaml", &c);
  assert_true(c.n_shapes >= 6 && c.n_shapes <= 10);
  assert_true(find_key(&c, "b8.t1.s65536.hq32.hkv8.d128.bf16.kve4m3.none") >= 0);
  check_decode_shapes(&c);
  assert_true(c.budget_candidates > 0);
  tn_config_free(&c);
}

/* Every file in configs/bad fails with the message its first line announces. */
static void test_bad_config_files(void **state)
{
  (void)state;
  char dir[1024], path[2048], line[1024], want[4096];
  configs_dir("bad", dir, sizeof dir);
  DIR *d = opendir(dir);
  if (!d) fail_msg("cannot open %s", dir);
  int n_files = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!is_yaml(e->d_name)) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "# expect: ", 10) != 0) fail_msg("%s: first line is not '# expect: ...'", path);
    snprintf(want, sizeof want, "%s:%s", path, line + 10);
    tn_config c;
    at_status rc = tn_config_load(path, &c);
    if (rc != AT_ERR_CONFIG)
      fail_msg("%s: expected AT_ERR_CONFIG, got %s: %s", path, at_status_name(rc), at_last_error());
    assert_string_equal(at_last_error(), want);
    n_files++;
  }
  closedir(d);
  assert_true(n_files >= 5);
}

static void test_missing_file_is_io_error(void **state)
{
  (void)state;
  tn_config c;
  assert_int_equal(tn_config_load("configs/no-such.yaml", &c), AT_ERR_IO);
  assert_string_equal(at_last_error(),
                      "cannot read config 'configs/no-such.yaml': No such file or directory");
  assert_int_equal(c.n_shapes, 0);
  char dir[1024];
  configs_dir("", dir, sizeof dir);
  assert_int_equal(tn_config_load(dir, &c), AT_ERR_IO); /* a folder */
  assert_non_null(strstr(at_last_error(), "Is a directory"));
}

/* ---- expansion --------------------------------------------------------------------------- */

static void test_defaults(void **state)
{
  (void)state;
  tn_config c = parse_ok(ONE_SHAPE);
  static const char *const keys[] = {"b1.t128.s128.hq4.hkv4.d64.bf16.none"};
  assert_keys(&c, keys, 1);
  assert_string_equal(c.groups[0], "");
  assert_string_equal(c.path, "t.yaml");
  assert_true(c.all_devices);
  assert_int_equal(c.n_devices, 0);
  assert_int_equal(tn_config_search(&c, "fa2", "warps")->n, 0);
  assert_null(tn_config_search(&c, "fa2", "tile"));
  assert_null(tn_config_search(&c, "fa9", "warps"));
  assert_int_equal(c.budget_candidates, 0);
  assert_true(c.budget_seconds == 0);
  assert_true(c.tolerance[AT_DTYPE_F16] == 1e-2 && c.tolerance[AT_DTYPE_BF16] == 1e-2);
  assert_true(c.tolerance[AT_DTYPE_E4M3] == 5e-2 && c.tolerance[AT_DTYPE_E5M2] == 1e-1);
  assert_true(c.tolerance[AT_DTYPE_F32] == 1e-4); /* fixed: f32 runs the naive kernels only */
  assert_int_equal(c.warmup, 10);
  assert_int_equal(c.reps, 50);
  assert_int_equal(c.first_pass_reps, 5);
  assert_true(c.keep_fraction == 0.5);
  assert_int_equal(c.keep_count, 0);
  assert_true(c.shapes[0].scale == 0.0f);
  tn_config_free(&c);
  assert_null(c.shapes);
  assert_int_equal(c.n_shapes, 0);
}

/* The first field varies slowest; seq_len sets both lengths; kv_heads follows q_heads. */
static void test_sweep_is_a_cartesian_product_in_field_order(void **state)
{
  (void)state;
  tn_config c = parse_ok("shapes:\n"
                         "  - name: grid\n"
                         "    mask: [none, causal]\n"
                         "    seq_len: [128, 256]\n"
                         "    batch: [1, 2]\n"
                         "    q_heads: [4, 8]\n"
                         "    head_dim: 64\n"
                         "    lse: [false, true]\n");
  assert_int_equal(c.n_shapes, 2 * 2 * 2 * 2 * 2);
  static const char *const first[] = {
      "b1.t128.s128.hq4.hkv4.d64.bf16.none",   "b1.t128.s128.hq4.hkv4.d64.bf16.none.lse",
      "b1.t128.s128.hq4.hkv4.d64.bf16.causal", "b1.t128.s128.hq4.hkv4.d64.bf16.causal.lse",
      "b1.t128.s128.hq8.hkv8.d64.bf16.none",
  };
  char k[TN_SHAPE_KEY_CAP];
  for (int i = 0; i < 5; i++) {
    key_of(&c, i, k);
    assert_string_equal(k, first[i]);
  }
  key_of(&c, c.n_shapes - 1, k);
  assert_string_equal(k, "b2.t256.s256.hq8.hkv8.d64.bf16.causal.lse");
  for (int i = 0; i < c.n_shapes; i++) assert_string_equal(c.groups[i], "grid");
  tn_config_free(&c);
}

static void test_q_len_and_kv_len_sweep_independently(void **state)
{
  (void)state;
  tn_config c = parse_ok("shapes:\n"
                         "  - q_len: [1, 16]\n"
                         "    kv_len: [4096, 8192]\n"
                         "    q_heads: 32\n"
                         "    kv_heads: [8, 32]\n"
                         "    head_dim: 128\n"
                         "    dtype: [f16, e4m3]\n"
                         "    mask: causal-br\n");
  assert_int_equal(c.n_shapes, 2 * 2 * 2 * 2);
  assert_true(find_key(&c, "b1.t16.s4096.hq32.hkv8.d128.e4m3.causal-br") >= 0);
  assert_true(find_key(&c, "b1.t1.s8192.hq32.hkv32.d128.f16.causal-br") >= 0);
  tn_config_free(&c);
}

static void test_ranges(void **state)
{
  (void)state;
  tn_config c = parse_ok("shapes:\n"
                         "  - seq_len: {from: 64, to: 1000, mul: 2}\n" /* 64..512: 1000 is not reached */
                         "    q_heads: 8\n"
                         "    head_dim: 64\n"
                         "  - batch: {from: 1, to: 10, step: 3}\n" /* 1, 4, 7, 10 */
                         "    seq_len: 32\n"
                         "    q_heads: 8\n"
                         "    head_dim: 64\n"
                         "  - batch: 1\n"
                         "    seq_len: [{from: 1, to: 3, step: 1}, 100, {to: 8, from: 8, mul: 4}]\n"
                         "    q_heads: 8\n"
                         "    head_dim: 64\n");
  static const char *const keys[] = {
      "b1.t64.s64.hq8.hkv8.d64.bf16.none",   "b1.t128.s128.hq8.hkv8.d64.bf16.none",
      "b1.t256.s256.hq8.hkv8.d64.bf16.none", "b1.t512.s512.hq8.hkv8.d64.bf16.none",
      "b1.t32.s32.hq8.hkv8.d64.bf16.none",   "b4.t32.s32.hq8.hkv8.d64.bf16.none",
      "b7.t32.s32.hq8.hkv8.d64.bf16.none",   "b10.t32.s32.hq8.hkv8.d64.bf16.none",
      "b1.t1.s1.hq8.hkv8.d64.bf16.none",     "b1.t2.s2.hq8.hkv8.d64.bf16.none",
      "b1.t3.s3.hq8.hkv8.d64.bf16.none",     "b1.t100.s100.hq8.hkv8.d64.bf16.none",
      "b1.t8.s8.hq8.hkv8.d64.bf16.none",
  };
  assert_keys(&c, keys, 13);
  tn_config_free(&c);
}

/* Repeats within and across entries collapse to the first occurrence, order kept. */
static void test_dedup_keeps_first_occurrence(void **state)
{
  (void)state;
  tn_config c = parse_ok("shapes:\n"
                         "  - name: a\n"
                         "    seq_len: [256, 128, 256]\n"
                         "    q_heads: 8\n"
                         "    kv_heads: [8, 8]\n"
                         "    head_dim: 64\n"
                         "  - name: b\n"
                         "    q_len: [128, 512]\n"
                         "    kv_len: 128\n"
                         "    q_heads: 8\n"
                         "    head_dim: 64\n"
                         "    dtype: bfloat16\n" /* the same dtype spelled another way */
                         "    lse: false\n");
  static const char *const keys[] = {
      "b1.t256.s256.hq8.hkv8.d64.bf16.none",
      "b1.t128.s128.hq8.hkv8.d64.bf16.none",
      "b1.t512.s128.hq8.hkv8.d64.bf16.none",
  };
  assert_keys(&c, keys, 3);
  assert_string_equal(c.groups[0], "a");
  assert_string_equal(c.groups[1], "a");
  assert_string_equal(c.groups[2], "b");
  tn_config_free(&c);
}

/* f32 shapes are accepted (the tuner times the naive kernels on them), under each of the names
 * at_dtype_parse knows, deduplicated with one another, and beside other dtypes in one sweep. */
static void test_f32_shapes(void **state)
{
  (void)state;
  tn_config c = parse_ok("shapes:\n"
                         "  - name: naive\n"
                         "    batch: 4\n"
                         "    seq_len: 128\n"
                         "    q_heads: 8\n"
                         "    kv_heads: [8, 2]\n"
                         "    head_dim: 64\n"
                         "    dtype: [f32, bf16]\n"
                         "    mask: [none, causal]\n"
                         "    lse: true\n"
                         "  - {name: again, batch: 4, seq_len: 128, q_heads: 8, head_dim: 64, dtype: [fp32, float32]}\n"
                         "  - {batch: 4, seq_len: 128, q_heads: 8, head_dim: 64, dtype: float32, mask: causal-br}\n");
  static const char *const keys[] = {
      "b4.t128.s128.hq8.hkv8.d64.f32.none.lse",   "b4.t128.s128.hq8.hkv8.d64.f32.causal.lse",
      "b4.t128.s128.hq8.hkv8.d64.bf16.none.lse",  "b4.t128.s128.hq8.hkv8.d64.bf16.causal.lse",
      "b4.t128.s128.hq8.hkv2.d64.f32.none.lse",   "b4.t128.s128.hq8.hkv2.d64.f32.causal.lse",
      "b4.t128.s128.hq8.hkv2.d64.bf16.none.lse",  "b4.t128.s128.hq8.hkv2.d64.bf16.causal.lse",
      "b4.t128.s128.hq8.hkv8.d64.f32.none",       "b4.t128.s128.hq8.hkv8.d64.f32.causal-br",
  };
  assert_keys(&c, keys, 10);
  assert_int_equal(c.shapes[0].dtype, AT_DTYPE_F32);
  assert_int_equal(c.shapes[0].mask, AT_MASK_NONE);
  assert_int_equal(c.shapes[2].dtype, AT_DTYPE_BF16);
  assert_string_equal(c.groups[8], "again"); /* fp32 and float32 are one shape: the first stays */
  assert_string_equal(c.groups[9], "");
  for (int i = 0; i < c.n_shapes; i++) assert_int_equal(at_shape_check(&c.shapes[i]), AT_OK);
  /* The shard ranking handles f32 beside other dtypes. */
  int owner[10];
  assert_int_equal(tn_shard_owners(&c, 3, owner), AT_OK);
  tn_config_free(&c);
}

/* kv_dtype: the K/V dtype of an FP8 KV cache, sweepable like dtype; absent or equal to the dtype,
 * K and V are in the dtype (one shape either way, the first entry keeps it); a pairing the shape
 * check refuses points at kv_dtype. */
static void test_kv_dtype_shapes(void **state)
{
  (void)state;
  tn_config c = parse_ok("shapes:\n"
                         "  - name: fp8-kv\n"
                         "    batch: 8\n"
                         "    q_len: 1\n"
                         "    kv_len: 16384\n"
                         "    q_heads: 32\n"
                         "    kv_heads: 8\n"
                         "    head_dim: 128\n"
                         "    dtype: bf16\n"
                         "    kv_dtype: [bf16, e4m3, e5m2]\n"
                         "  - {name: again, batch: 8, q_len: 1, kv_len: 16384, q_heads: 32, kv_heads: 8, head_dim: 128}\n"
                         "  - {batch: 8, q_len: 1, kv_len: 16384, q_heads: 32, kv_heads: 8, head_dim: 128, dtype: f16,\n"
                         "     kv_dtype: e4m3, mask: causal-br, lse: true}\n"
                         "  - {batch: 8, q_len: 1, kv_len: 16384, q_heads: 32, kv_heads: 8, head_dim: 128, dtype: f16,\n"
                         "     kv_dtype: f16}\n");
  static const char *const keys[] = {
      "b8.t1.s16384.hq32.hkv8.d128.bf16.none",
      "b8.t1.s16384.hq32.hkv8.d128.bf16.kve4m3.none",
      "b8.t1.s16384.hq32.hkv8.d128.bf16.kve5m2.none",
      "b8.t1.s16384.hq32.hkv8.d128.f16.kve4m3.causal-br.lse",
      "b8.t1.s16384.hq32.hkv8.d128.f16.none",
  };
  assert_keys(&c, keys, 5);
  assert_string_equal(c.groups[0], "fp8-kv");
  assert_int_equal(c.shapes[0].kv_dtype, AT_KV_SAME); /* kv_dtype: bf16 with dtype bf16 */
  assert_int_equal(c.shapes[1].kv_dtype, AT_DTYPE_E4M3);
  assert_int_equal(c.shapes[3].dtype, AT_DTYPE_F16);
  assert_int_equal(c.shapes[3].kv_dtype, AT_DTYPE_E4M3);
  assert_int_equal(c.shapes[4].kv_dtype, AT_KV_SAME);
  for (int i = 0; i < c.n_shapes; i++) assert_int_equal(at_shape_check(&c.shapes[i]), AT_OK);
  tn_config_free(&c);

  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, dtype: f16, kv_dtype: [f16, bf16]}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:74: shapes[0].kv_dtype: kv_dtype bf16 with dtype f16: K and V may differ from Q only as FP8 "
               "(e4m3, e5m2) with f16 or bf16 Q, an FP8 KV cache");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, dtype: e4m3, kv_dtype: e5m2}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:69: shapes[0].kv_dtype: kv_dtype e5m2 with dtype e4m3: K and V may differ from Q only as FP8 "
               "(e4m3, e5m2) with f16 or bf16 Q, an FP8 KV cache");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, kv_dtype: e6m1}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:56: shapes[0].kv_dtype: unknown dtype 'e6m1' (expected f32, f16, bf16, e4m3, e5m2)");
  assert_no_mismatch();
}

/* Ragged and paged shapes: lengths as a list or a seeded uniform draw per batch, page sizes
 * swept, the maxima set from the lengths, dedup by lengths, and tune's refusal. */
static void test_serving_shapes(void **state)
{
  (void)state;
  tn_config c = parse_ok("shapes:\n"
                         "  - name: ragged-prefill\n"
                         "    batch: [4, 8]\n"
                         "    lengths: {dist: uniform, min: 512, max: 8192, seed: 3}\n"
                         "    q_heads: 16\n"
                         "    head_dim: 128\n"
                         "    mask: causal\n"
                         "  - name: paged-decode\n"
                         "    lengths: [100, 0, 1, 4096]\n"
                         "    q_len: 1\n"
                         "    page_size: [16, 64]\n"
                         "    q_heads: 32\n"
                         "    kv_heads: 8\n"
                         "    head_dim: 128\n"
                         "    mask: causal-br\n"
                         "  - {name: paged, batch: 3, q_len: 1, kv_len: 300, q_heads: 8, head_dim: 64, page_size: 1}\n"
                         "  - {name: again, lengths: [100, 0, 1, 4096], q_len: 1, page_size: 16, q_heads: 32,\n"
                         "     kv_heads: 8, head_dim: 128, mask: causal-br}\n"
                         "  - {name: other, lengths: [100, 0, 2, 4096], q_len: 1, page_size: 16, q_heads: 32,\n"
                         "     kv_heads: 8, head_dim: 128, mask: causal-br}\n"
                         "  - {name: plain, seq_len: 1024, q_heads: 16, head_dim: 128}\n");
  assert_int_equal(c.n_shapes, 7); /* 2 + 2 + 1 + (again: a duplicate) + 1 + 1 */
  int want[8];
  TU_OK(at_lengths_uniform(512, 8192, 3, 8, want));
  for (int i = 0; i < 2; i++) {
    const tn_serving_shape *v = &c.serving[i];
    const int batch = 4 * (i + 1);
    int longest = 0;
    assert_int_equal(c.shapes[i].batch, batch);
    assert_int_equal(v->layout.q_layout, AT_SEQ_RAGGED);
    assert_int_equal(v->layout.kv_layout, AT_SEQ_RAGGED);
    assert_memory_equal(v->kv_lens, want, (size_t)batch * sizeof *want); /* one seeded stream */
    assert_memory_equal(v->q_lens, want, (size_t)batch * sizeof *want);   /* prefill: Q as K/V */
    for (int b = 0; b < batch; b++) longest = want[b] > longest ? want[b] : longest;
    assert_int_equal(c.shapes[i].kv_len, longest);
    assert_int_equal(c.shapes[i].q_len, longest);
    assert_string_equal(c.groups[i], "ragged-prefill");
  }
  const int listed[4] = {100, 0, 1, 4096};
  for (int i = 2; i < 4; i++) {
    const tn_serving_shape *v = &c.serving[i];
    assert_int_equal(c.shapes[i].batch, 4);
    assert_int_equal(c.shapes[i].q_len, 1);
    assert_int_equal(c.shapes[i].kv_len, 4096);
    assert_int_equal(v->layout.q_layout, AT_SEQ_PADDED);
    assert_int_equal(v->layout.kv_layout, AT_SEQ_PAGED);
    assert_int_equal(v->layout.page_size, i == 2 ? 16 : 64);
    assert_int_equal(v->layout.max_pages_per_seq, 4096 / (i == 2 ? 16 : 64));
    assert_memory_equal(v->kv_lens, listed, sizeof listed);
    for (int b = 0; b < 4; b++) assert_int_equal(v->q_lens[b], 1);
    TU_OK(at_serving_layout_check(&c.shapes[i], &v->layout));
  }
  assert_int_equal(c.serving[4].layout.kv_layout, AT_SEQ_PAGED); /* page_size alone: every sequence kv_len */
  assert_int_equal(c.serving[4].layout.page_size, 1);
  for (int b = 0; b < 3; b++) assert_int_equal(c.serving[4].kv_lens[b], 300);
  assert_string_equal(c.groups[5], "other"); /* same maxima as 'again', other lengths: kept */
  assert_int_equal(c.serving[5].kv_lens[2], 2);
  assert_true(at_serving_is_padded(&c.serving[6].layout));
  assert_null(c.serving[6].kv_lens);
  assert_int_equal(tn_config_first_serving(&c), 0);
  assert_int_equal(tn_config_refuse_serving(&c), AT_ERR_CONFIG);
  char head[160];
  snprintf(head, sizeof head, "t.yaml: shape b4.t%d.s%d.hq16.hkv16.d128.bf16.causal.qragged.kvragged.lq", c.shapes[0].q_len,
           c.shapes[0].kv_len);
  if (strncmp(at_last_error(), head, strlen(head)) != 0 ||
      !strstr(at_last_error(), "(ragged-prefill) has ragged Q with ragged K/V: ragged and paged shapes are not benchmarked from a config"))
    fail_msg("refusal: %s", at_last_error());

  /* Sharding keeps every shape's own lengths with it. */
  TU_OK(tn_config_keep_shard(&c, 1, 3));
  for (int i = 0; i < c.n_shapes; i++) {
    if (!c.serving[i].kv_lens) continue;
    int longest = 1;
    for (int b = 0; b < c.shapes[i].batch; b++) longest = c.serving[i].kv_lens[b] > longest ? c.serving[i].kv_lens[b] : longest;
    assert_int_equal(c.shapes[i].kv_len, longest);
  }
  tn_config_free(&c);

  tn_config plain = parse_ok("shapes:\n  - {seq_len: 1024, q_heads: 16, head_dim: 128}\n");
  assert_int_equal(tn_config_first_serving(&plain), -1);
  TU_OK(tn_config_refuse_serving(&plain));
  tn_config_free(&plain);

  const char *common = "q_heads: 8, head_dim: 64";
  char yaml[512];
#define SERVING_ERROR(entry, message)                                                            \
  do {                                                                                           \
    snprintf(yaml, sizeof yaml, "shapes:\n  - {%s, %s}\n", common, entry);                       \
    expect_error(yaml, AT_ERR_CONFIG, message);                                                  \
  } while (0)
  SERVING_ERROR("lengths: [5, 6], kv_len: 9",
                "t.yaml:2:57: shapes[0].kv_len: lengths give the K/V lengths: drop kv_len (q_len gives padded queries)");
  SERVING_ERROR("lengths: [5, 6], seq_len: 9",
                "t.yaml:2:58: shapes[0].seq_len: lengths give the K/V lengths: drop seq_len (q_len gives padded queries)");
  SERVING_ERROR("lengths: [5, 6], batch: 3", "t.yaml:2:56: shapes[0].batch: batch 3 differs from the 2 lengths listed");
  SERVING_ERROR("lengths: [5, -6]", "t.yaml:2:45: shapes[0].lengths[1]: -6 must be at least 0");
  SERVING_ERROR("lengths: 5", "t.yaml:2:41: shapes[0].lengths: expected a list of lengths or {dist: uniform, min, max, "
                              "seed}, got a value");
  SERVING_ERROR("lengths: {dist: normal, min: 1, max: 9}",
                "t.yaml:2:48: shapes[0].lengths.dist: unknown length distribution 'normal' (expected uniform)");
  SERVING_ERROR("lengths: {dist: uniform, min: 9, max: 1}", "t.yaml:2:70: shapes[0].lengths: max 1 is below min 9");
  SERVING_ERROR("lengths: {dist: uniform, min: 9}", "t.yaml:2:41: shapes[0].lengths: missing 'max'");
  SERVING_ERROR("lengths: {min: 9, max: 10}", "t.yaml:2:41: shapes[0].lengths: missing 'dist' (the only one is uniform)");
  SERVING_ERROR("lengths: {dist: uniform, min: 1, max: 2, mean: 3}",
                "t.yaml:2:73: shapes[0].lengths: unknown key 'mean' (expected dist, min, max, seed)");
  SERVING_ERROR("lengths: [5, 6], page_size: 8",
                "t.yaml:2:60: shapes[0].page_size: page size 8 not allowed (expected 1, 16, 32, 64, 128, 256)");
  SERVING_ERROR("lengths: {dist: uniform, min: 1, max: 2}, batch: 5000",
                "t.yaml:2:81: shapes[0].batch: batch 5000: at most 4096 sequences with lengths");
  SERVING_ERROR("seq_len: 64, page_size: 16, batch: 5000",
                "t.yaml:2:67: shapes[0].batch: batch 5000: at most 4096 sequences with page_size");
#undef SERVING_ERROR
  assert_no_mismatch();
}

/* Enough shapes to grow the dedup table several times. */
static void test_large_sweep_with_dedup(void **state)
{
  (void)state;
  tn_config c = parse_ok("shapes:\n"
                         "  - batch: {from: 1, to: 50, step: 1}\n"
                         "    q_len: {from: 1, to: 100, step: 1}\n"
                         "    kv_len: [1, 2]\n"
                         "    q_heads: 1\n"
                         "    head_dim: 8\n"
                         "  - batch: {from: 1, to: 50, step: 1}\n"
                         "    q_len: {from: 51, to: 150, step: 1}\n"
                         "    kv_len: [2, 1]\n"
                         "    q_heads: 1\n"
                         "    head_dim: 8\n");
  assert_int_equal(c.n_shapes, 50 * 150 * 2);
  assert_int_equal(find_key(&c, "b50.t150.s1.hq1.hkv1.d8.bf16.none"), c.n_shapes - 1);
  tn_config_free(&c);
}

static void test_other_sections(void **state)
{
  (void)state;
  tn_config c = parse_ok("devices: [2, 0]\n" ONE_SHAPE "search:\n"
                         "  fa2:\n"
                         "    block_n: [32, 64, 32, {from: 64, to: 256, mul: 2}]\n"
                         "    warps: 4\n"
                         "  fa3: {stages: 2, block_n: [128]}\n"
                         "budget: {candidates: 12, seconds: 2.5}\n"
                         "tolerance: {e4m3: 0.08, bf16: 2e-2}\n"
                         "timing: {warmup: 0, reps: 7, first_pass_reps: 0, keep: 1.0}\n");
  assert_false(c.all_devices);
  assert_int_equal(c.n_devices, 2);
  assert_int_equal(c.devices[0], 2);
  assert_int_equal(c.devices[1], 0);
  const tn_values *bn = &c.search.family[GEN_FAMILY_FA2].block_n;
  assert_int_equal(bn->n, 4);
  assert_int_equal(bn->v[0], 32);
  assert_int_equal(bn->v[1], 64);
  assert_int_equal(bn->v[2], 128);
  assert_int_equal(bn->v[3], 256);
  assert_int_equal(c.search.family[GEN_FAMILY_FA2].warps.n, 1);
  assert_int_equal(c.search.family[GEN_FAMILY_FA2].block_m.n, 0);
  /* fa3 has its own overrides; fa2's do not leak into it. */
  assert_int_equal(c.search.family[GEN_FAMILY_FA3].stages.n, 1);
  assert_int_equal(c.search.family[GEN_FAMILY_FA3].stages.v[0], 2);
  assert_int_equal(c.search.family[GEN_FAMILY_FA3].block_n.n, 1);
  assert_int_equal(c.search.family[GEN_FAMILY_FA3].warps.n, 0);
  assert_int_equal(tn_config_search(&c, "fa3", "block_n")->v[0], 128);
  assert_int_equal(c.budget_candidates, 12);
  assert_true(c.budget_seconds == 2.5);
  assert_true(c.tolerance[AT_DTYPE_E4M3] == 0.08);
  assert_true(c.tolerance[AT_DTYPE_BF16] == 2e-2);
  assert_true(c.tolerance[AT_DTYPE_F16] == 1e-2);
  assert_int_equal(c.warmup, 0);
  assert_int_equal(c.reps, 7);
  assert_int_equal(c.first_pass_reps, 0);
  assert_true(c.keep_fraction == 1.0);
  assert_int_equal(c.keep_count, 0);
  tn_config_free(&c);

  c = parse_ok("devices: 1\n" ONE_SHAPE);
  assert_int_equal(c.n_devices, 1);
  assert_int_equal(c.devices[0], 1);
  tn_config_free(&c);
}

/* ---- errors ------------------------------------------------------------------------------ */

/* decode's search overrides: the tiling fa2 and fa3 have, and the split count, which is decode's
 * own (split-KV); setting them leaves the other families unrestricted. */
static void test_decode_search(void **state)
{
  (void)state;
  tn_config c = parse_ok(ONE_SHAPE "search:\n"
                         "  decode:\n"
                         "    block_n: [64, 128]\n"
                         "    warps: 4\n"
                         "    stages: [4, 3]\n"
                         "    splits: [8, {from: 16, to: 64, mul: 2}, 8]\n"
                         "  fa2: {stages: 2}\n");
  const tn_family_search *d = &c.search.family[GEN_FAMILY_DECODE];
  assert_int_equal(d->block_m.n, 0);
  assert_int_equal(d->block_n.n, 2);
  assert_int_equal(d->warps.n, 1);
  assert_int_equal(d->stages.v[0], 4);
  assert_int_equal(d->splits.n, 4); /* 8, 16, 32, 64: the repeated 8 is dropped */
  assert_int_equal(d->splits.v[0], 8);
  assert_int_equal(d->splits.v[3], 64);
  assert_ptr_equal(tn_config_search(&c, "decode", "splits"), &d->splits);
  assert_int_equal(c.search.family[GEN_FAMILY_FA2].stages.n, 1);
  assert_int_equal(c.search.family[GEN_FAMILY_FA2].splits.n, 0);
  assert_int_equal(c.search.family[GEN_FAMILY_FA3].splits.n, 0);
  /* Only the split-KV family has a split count. */
  assert_null(tn_config_search(&c, "fa2", "splits"));
  assert_null(tn_config_search(&c, "fa3", "splits"));
  tn_config_free(&c);
}

/* The values a config's search section gave family's param, in order: want[0..n). */
static void assert_search_values(const tn_config *c, const char *family, const char *param, int n, const int *want)
{
  const tn_values *got = tn_config_search(c, family, param);
  assert_non_null(got);
  assert_int_equal(got->n, n);
  for (int i = 0; i < n; i++) assert_int_equal(got->v[i], want[i]);
}

/* fa3's ws (0 in-CTA, 1 warp-specialized, 2 with ping-pong) starts at 0, unlike the tile sizes. */
static void test_fa3_ws_search(void **state)
{
  (void)state;
  tn_config c = parse_ok(ONE_SHAPE "search:\n  fa3: {ws: [0, 2, 0]}\n");
  assert_search_values(&c, "fa3", "ws", 2, (const int[]){0, 2});
  assert_null(tn_config_search(&c, "fa2", "ws"));
  tn_config_free(&c);
  expect_error(ONE_SHAPE "search:\n  fa3: {ws: 3}\n", AT_ERR_CONFIG,
               "t.yaml:4:13: search.fa3.ws: 3 is too large (at most 2)");
  expect_error(ONE_SHAPE "search:\n  fa2: {ws: 0}\n", AT_ERR_CONFIG,
               "t.yaml:4:9: search.fa2: unknown key 'ws' (expected block_m, block_n, warps, stages)");
}

/* fa3's persistent (0 one CTA per work tile, 1 the .pers kernel looping over them) is 0 or 1 and
 * fa3's alone. */
static void test_fa3_persistent_search(void **state)
{
  (void)state;
  tn_config c = parse_ok(ONE_SHAPE "search:\n  fa3: {ws: [1, 2], persistent: [1, 0, 1]}\n");
  assert_search_values(&c, "fa3", "persistent", 2, (const int[]){1, 0});
  assert_null(tn_config_search(&c, "fa2", "persistent"));
  tn_config_free(&c);
  expect_error(ONE_SHAPE "search:\n  fa3: {persistent: 2}\n", AT_ERR_CONFIG,
               "t.yaml:4:21: search.fa3.persistent: 2 is too large (at most 1)");
  expect_error(ONE_SHAPE "search:\n  decode: {persistent: [0]}\n", AT_ERR_CONFIG,
               "t.yaml:4:12: search.decode: unknown key 'persistent' (expected block_m, block_n, warps, stages, splits)");
}

/* fa3's vt (0 V^T in shared memory, 1 the .vt kernels with V^T written ahead) is 0 or 1 and fa3's
 * alone. */
static void test_fa3_vt_search(void **state)
{
  (void)state;
  tn_config c = parse_ok(ONE_SHAPE "search:\n  fa3: {ws: 1, vt: 1}\n");
  assert_search_values(&c, "fa3", "vt", 1, (const int[]){1});
  assert_null(tn_config_search(&c, "fa2", "vt"));
  tn_config_free(&c);
  expect_error(ONE_SHAPE "search:\n  fa3: {vt: 2}\n", AT_ERR_CONFIG, "t.yaml:4:13: search.fa3.vt: 2 is too large (at most 1)");
}

/* A 0/1 search parameter of fa3 (`param`) is fa3's alone and narrows the tuner's candidates at
 * B2 N16 T=S=8192 D128 to the variants whose flag_of is `want`, for both values. */
static void check_fa3_flag_search(const char *param, int (*flag_of)(const gen_variant *), const char *too_large)
{
  const char *shape = "shapes:\n  - {batch: 2, seq_len: 8192, q_heads: 16, head_dim: 128}\n";
  char text[256];
  gen_target t = tu_sm90();
  at_shape s = {.batch = 2, .q_len = 8192, .kv_len = 8192, .q_heads = 16, .kv_heads = 16, .head_dim = 128,
                .dtype = AT_DTYPE_BF16, .mask = AT_MASK_NONE};
  gen_variant vs[GEN_MAX_VARIANTS];
  for (int want = 0; want < 2; want++) {
    snprintf(text, sizeof text, "%ssearch:\n  fa3: {ws: 1, %s: %d}\n", shape, param, want);
    tn_config c = parse_ok(text);
    assert_search_values(&c, "fa3", param, 1, (const int[]){want});
    int n = 0, fa3 = 0;
    TU_OK(tn_tune_candidates(&c, &s, NULL, &t, vs, &n));
    for (int i = 0; i < n; i++) {
      if (vs[i].family != GEN_FAMILY_FA3) continue;
      fa3++;
      assert_int_equal(flag_of(&vs[i]), want);
    }
    assert_true(fa3 > 0);
    tn_config_free(&c);
  }
  assert_null(tn_config_search(&(tn_config){0}, "fa2", param));
  snprintf(text, sizeof text, ONE_SHAPE "search:\n  fa3: {%s: 2}\n", param);
  expect_error(text, AT_ERR_CONFIG, too_large);
}

static int tail_split_of(const gen_variant *v) { return v->tail_wave != 0; }
static int q_regs_of(const gen_variant *v) { return v->q_regs; }

/* fa3's tail: 0 the plain grid, 1 the .tw tail split. */
static void test_fa3_tail_search(void **state)
{
  (void)state;
  check_fa3_flag_search("tail", tail_split_of, "t.yaml:4:15: search.fa3.tail: 2 is too large (at most 1)");
}

/* fa3's qr: 0 Q K^T reads Q from shared memory, 1 the .qr twins (Q in registers). */
static void test_fa3_qr_search(void **state)
{
  (void)state;
  check_fa3_flag_search("qr", q_regs_of, "t.yaml:4:13: search.fa3.qr: 2 is too large (at most 1)");
}

static void test_decode_search_errors(void **state)
{
  (void)state;
  expect_error(ONE_SHAPE "search:\n  decode: {splits: [4, 0]}\n", AT_ERR_CONFIG,
               "t.yaml:4:24: search.decode.splits[1]: 0 must be at least 1");
  expect_error(ONE_SHAPE "search:\n  decode:\n    splits: 2048\n", AT_ERR_CONFIG,
               "t.yaml:5:13: search.decode.splits: 2048 is too large (at most 1024)");
  expect_error(ONE_SHAPE "search:\n  decode: {splits: many}\n", AT_ERR_CONFIG,
               "t.yaml:4:20: search.decode.splits: expected an integer, got 'many'");
  expect_error(ONE_SHAPE "search:\n  decode: {split: [4]}\n", AT_ERR_CONFIG,
               "t.yaml:4:12: search.decode: unknown key 'split' (expected block_m, block_n, warps, stages, "
               "splits)");
  expect_error(ONE_SHAPE "search:\n  fa2: {splits: [4]}\n", AT_ERR_CONFIG,
               "t.yaml:4:9: search.fa2: unknown key 'splits' (expected block_m, block_n, warps, stages)");
  assert_no_mismatch();
}

static void test_errors_in_shapes(void **state)
{
  (void)state;
  expect_error("shapes:\n"
               "  - seq_len: 128\n"
               "    q_heads: 8\n"
               "    head_dim: -64\n",
               AT_ERR_CONFIG, "t.yaml:4:15: shapes[0].head_dim: head_dim -64 out of range (expected 1..512)");
  expect_error("shapes:\n"
               "  - seq_len: 128\n"
               "    q_heads: 8\n"
               "    head_dim: [64, 1024]\n",
               AT_ERR_CONFIG,
               "t.yaml:4:20: shapes[0].head_dim: head_dim 1024 out of range (expected 1..512)");
  expect_error("shapes:\n"
               "  - seq_len: 128\n"
               "    batch: 0\n"
               "    q_heads: 8\n"
               "    head_dim: 64\n",
               AT_ERR_CONFIG, "t.yaml:3:12: shapes[0].batch: batch 0 must be at least 1");
  expect_error("shapes:\n"
               "  - seq_len: -5\n",
               AT_ERR_CONFIG, "t.yaml:2:14: shapes[0].seq_len: seq_len -5 must be at least 1");
  expect_error("shapes:\n"
               "  - seq_len: 128\n"
               "    q_heads: eight\n",
               AT_ERR_CONFIG, "t.yaml:3:14: shapes[0].q_heads: expected an integer, got 'eight'");
  expect_error("shapes:\n"
               "  - seq_len: \"128\"\n",
               AT_ERR_CONFIG, "t.yaml:2:14: shapes[0].seq_len: expected an integer, got the string '128'");
  expect_error("shapes:\n"
               "  - seq_len: 12.5\n",
               AT_ERR_CONFIG, "t.yaml:2:14: shapes[0].seq_len: expected an integer, got '12.5'");
  expect_error("shapes:\n"
               "  - seq_len: 99999999999\n",
               AT_ERR_CONFIG,
               "t.yaml:2:14: shapes[0].seq_len: 99999999999 is too large (at most 2147483647)");
  expect_error("shapes:\n"
               "  - seq_len:\n"
               "    q_heads: 8\n",
               AT_ERR_CONFIG, "t.yaml:2:13: shapes[0].seq_len: expected an integer, got nothing");
  expect_error("shapes:\n"
               "  - seq_len: [128, [256]]\n",
               AT_ERR_CONFIG, "t.yaml:2:20: shapes[0].seq_len[1]: expected a value or a range, got a list");
  expect_error("shapes:\n"
               "  - seq_len: []\n",
               AT_ERR_CONFIG, "t.yaml:2:14: shapes[0].seq_len: empty list (give at least one value)");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, dtype: f64}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:53: shapes[0].dtype: unknown dtype 'f64' (expected f32, f16, bf16, e4m3, e5m2)");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, dtype: [f32, tf32]}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:59: shapes[0].dtype[1]: unknown dtype 'tf32' (expected f32, f16, bf16, e4m3, e5m2)");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, dtype: 32}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:53: shapes[0].dtype: unknown dtype '32' (expected f32, f16, bf16, e4m3, e5m2)");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, dtype: {from: 1, to: 2, step: 1}}\n",
               AT_ERR_CONFIG, "t.yaml:2:53: shapes[0].dtype: expected a value or a list, got a mapping");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, mask: [none, sliding]}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:59: shapes[0].mask[1]: unknown mask 'sliding' (expected none, causal, causal-br)");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, lse: yes}\n",
               AT_ERR_CONFIG, "t.yaml:2:51: shapes[0].lse: expected true or false, got 'yes'");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, kv_heads: 3, head_dim: 64}\n",
               AT_ERR_CONFIG, "t.yaml:2:42: shapes[0].kv_heads: q_heads 8 is not a multiple of kv_heads 3");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: [8, 12], kv_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG, "t.yaml:2:48: shapes[0].kv_heads: q_heads 12 is not a multiple of kv_heads 8");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, heads: 8}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:46: shapes[0]: unknown key 'heads' (expected name, batch, seq_len, q_len, kv_len, "
               "q_heads, kv_heads, head_dim, dtype, kv_dtype, mask, lse, lengths, page_size)");
  expect_error("shapes:\n"
               "  - seq_len: 128\n"
               "    q_heads: 8\n"
               "    head_dim: 64\n"
               "    q_heads: 16\n",
               AT_ERR_CONFIG, "t.yaml:5:5: shapes[0]: duplicate key 'q_heads' (first given at line 3)");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_len: 128, q_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:27: shapes[0].q_len: give either seq_len or q_len and kv_len, not both");
  expect_error("shapes:\n"
               "  - {q_len: 128, q_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG, "t.yaml:2:5: shapes[0]: missing 'kv_len' (or 'seq_len' for both lengths)");
  expect_error("shapes:\n"
               "  - {seq_len: 128, head_dim: 64}\n",
               AT_ERR_CONFIG, "t.yaml:2:5: shapes[0]: missing 'q_heads'");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8}\n",
               AT_ERR_CONFIG, "t.yaml:2:5: shapes[0]: missing 'head_dim'");
  expect_error("shapes:\n"
               "  - 128\n",
               AT_ERR_CONFIG,
               "t.yaml:2:5: shapes[0]: expected a mapping with name, batch, seq_len, q_len, kv_len, q_heads, "
               "kv_heads, head_dim, dtype, kv_dtype, mask, lse, lengths, page_size, got a value");
  expect_error("shapes:\n"
               "  - {seq_len: 128, q_heads: 8, head_dim: 64, name: [a]}\n",
               AT_ERR_CONFIG, "t.yaml:2:52: shapes[0].name: expected a group name, got a list");
  assert_no_mismatch();
}

/* Tensors larger than the kernels index are refused with the field, the value and the limit
 * (include/attntune.h, at_shape_check); the largest accepted lengths still parse. */
static void test_size_limits(void **state)
{
  (void)state;
  expect_error("shapes:\n"
               "  - {batch: 2147483647, seq_len: 2147483647, q_heads: 1, head_dim: 64}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:34: shapes[0].seq_len: seq_len 2147483647 out of range (expected 1..1073741824: "
               "row indices are int in the kernels)");
  expect_error("shapes:\n"
               "  - {q_len: 1, kv_len: [1024, 1073741825], q_heads: 1, head_dim: 64}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:31: shapes[0].kv_len: kv_len 1073741825 out of range (expected 1..1073741824: "
               "row indices are int in the kernels)");
  expect_error("shapes:\n"
               "  - {batch: 1073741824, seq_len: 1073741824, q_heads: 16, head_dim: 128}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:5: shapes[0]: batch 1073741824 x q_len 1073741824 x q_heads 16 x head_dim 128 = "
               "2.36e+21 elements of Q exceed 2^61 = 2305843009213693952 (the kernels' 64-bit byte offsets "
               "at up to 4 bytes per element)");
  expect_error("shapes:\n"
               "  - {seq_len: 1, q_heads: 4194304, head_dim: 512}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:5: shapes[0]: q_heads 4194304 x head_dim 512 = 2147483648 elements per row exceed "
               "2147483647 (the kernels' row stride is an int)");
  assert_no_mismatch();
  tn_config c = parse_ok("shapes:\n"
                         "  - {batch: 2, seq_len: 1073741824, q_heads: 4194304, head_dim: 256}\n");
  assert_int_equal(c.n_shapes, 1);
  assert_int_equal(c.shapes[0].q_len, 1073741824);
  tn_config_free(&c);
}

static void test_errors_in_ranges(void **state)
{
  (void)state;
  expect_error("shapes:\n"
               "  - {seq_len: {from: 64, to: 512}, q_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:15: shapes[0].seq_len: a range needs exactly one of 'mul' and 'step' "
               "(e.g. {from: 1, to: 16, step: 1})");
  expect_error("shapes:\n"
               "  - {seq_len: {from: 64, to: 512, mul: 2, step: 1}, q_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:15: shapes[0].seq_len: a range needs exactly one of 'mul' and 'step' "
               "(e.g. {from: 1, to: 16, step: 1})");
  expect_error(
      "shapes:\n"
      "  - {seq_len: {from: 64, mul: 2}, q_heads: 8, head_dim: 64}\n",
      AT_ERR_CONFIG,
      "t.yaml:2:15: shapes[0].seq_len: a range needs 'from' and 'to' (e.g. {from: 64, to: 2048, mul: 2})");
  expect_error("shapes:\n"
               "  - {seq_len: {from: 64, to: 32, mul: 2}, q_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG, "t.yaml:2:30: shapes[0].seq_len.to: 32 is less than from (64)");
  expect_error("shapes:\n"
               "  - {seq_len: {from: 64, to: 512, mul: 1}, q_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG, "t.yaml:2:40: shapes[0].seq_len.mul: 1 must be at least 2");
  expect_error("shapes:\n"
               "  - {seq_len: {from: 0, to: 512, step: 64}, q_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG, "t.yaml:2:22: shapes[0].seq_len.from: 0 must be at least 1");
  expect_error("shapes:\n"
               "  - {seq_len: {from: 1, to: 512, by: 64}, q_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:34: shapes[0].seq_len: unknown key 'by' (expected from, to, mul, step)");
  expect_error("shapes:\n"
               "  - {seq_len: {from: 1, to: 2000000000, step: 1}, q_heads: 8, head_dim: 64}\n",
               AT_ERR_CONFIG,
               "t.yaml:2:15: shapes[0].seq_len: range from 1 to 2000000000 step 1 has 2000000000 values "
               "(at most 100000)");
  expect_error("shapes:\n"
               "  - seq_len: [{from: 1, to: 90000, step: 1}, {from: 1, to: 90000, step: 1}]\n",
               AT_ERR_CONFIG, "t.yaml:2:46: shapes[0].seq_len[1]: the list has more than 100000 values");
  expect_error("shapes:\n"
               "  - batch: {from: 1, to: 100, step: 1}\n"
               "    seq_len: {from: 1, to: 100, step: 1}\n"
               "    q_heads: {from: 1, to: 10, step: 1}\n"
               "    head_dim: [64, 128]\n",
               AT_ERR_CONFIG,
               "t.yaml:2:5: shapes[0]: the sweep expands to 200000 shapes, 0 with the entries before it "
               "(at most 100000)");
  expect_error(
      "shapes:\n"
      "  - {batch: {from: 1, to: 1000, step: 1}, seq_len: {from: 1, to: 60, step: 1}, q_heads: 1,\n"
      "     head_dim: 8}\n"
      "  - {batch: {from: 1, to: 1000, step: 1}, seq_len: {from: 61, to: 120, step: 1}, q_heads: 1,\n"
      "     head_dim: 8}\n",
      AT_ERR_CONFIG,
      "t.yaml:4:5: shapes[1]: the sweep expands to 60000 shapes, 60000 with the entries before it "
      "(at most 100000)");
  assert_no_mismatch();
}

static void test_errors_in_other_sections(void **state)
{
  (void)state;
  expect_error("", AT_ERR_CONFIG,
               "t.yaml:1:1: empty config (expected a mapping with devices, shapes, search, budget, "
               "tolerance, timing)");
  expect_error("# nothing but a comment\n", AT_ERR_CONFIG,
               "t.yaml:1:1: empty config (expected a mapping with devices, shapes, search, budget, "
               "tolerance, timing)");
  expect_error(
      "- 1\n", AT_ERR_CONFIG,
      "t.yaml:1:1: expected a mapping with devices, shapes, search, budget, tolerance, timing, got a list");
  expect_error("devices: all\n", AT_ERR_CONFIG, "t.yaml:1:1: missing 'shapes' (the shapes to tune)");
  expect_error("devices: all\nshapes: []\n", AT_ERR_CONFIG,
               "t.yaml:2:9: shapes: empty list (give at least one shape entry)");
  expect_error("shapes: {seq_len: 1}\n", AT_ERR_CONFIG,
               "t.yaml:1:9: shapes: expected a list of shape entries, got a mapping");
  expect_error(
      ONE_SHAPE "shape: []\n", AT_ERR_CONFIG,
      "t.yaml:3:1: unknown key 'shape' (expected devices, shapes, search, budget, tolerance, timing)");
  expect_error("devices: [0, 1, 1]\n" ONE_SHAPE, AT_ERR_CONFIG,
               "t.yaml:1:17: devices: GPU 1 is listed twice");
  expect_error("devices: [0, -1]\n" ONE_SHAPE, AT_ERR_CONFIG,
               "t.yaml:1:14: devices[1]: -1 must be at least 0");
  expect_error("devices: every\n" ONE_SHAPE, AT_ERR_CONFIG,
               "t.yaml:1:10: devices: expected 'all' or a list of GPU ordinals, got 'every'");
  expect_error(ONE_SHAPE "search:\n  fa4: {block_m: [64]}\n", AT_ERR_CONFIG,
               "t.yaml:4:3: search: unknown key 'fa4' (expected fa2, fa3, decode)");
  expect_error(ONE_SHAPE "search:\n  fa3: {tile: [64]}\n", AT_ERR_CONFIG,
               "t.yaml:4:9: search.fa3: unknown key 'tile' (expected block_m, block_n, warps, stages, ws, persistent, vt, tail, qr)");
  expect_error(ONE_SHAPE "search:\n  fa2: {block_m: [64, 0]}\n", AT_ERR_CONFIG,
               "t.yaml:4:23: search.fa2.block_m[1]: 0 must be at least 1");
  expect_error(ONE_SHAPE "search:\n  fa2: [64]\n", AT_ERR_CONFIG,
               "t.yaml:4:8: search.fa2: expected a mapping of parameters to lists of values, got a list");
  expect_error(ONE_SHAPE "search:\n  fa2: {warps: {from: 1, to: 20, step: 1}}\n", AT_ERR_CONFIG,
               "t.yaml:4:16: search.fa2.warps: more than 16 distinct values");
  expect_error(ONE_SHAPE "budget: {candidates: -1}\n", AT_ERR_CONFIG,
               "t.yaml:3:22: budget.candidates: -1 must be at least 0");
  expect_error(ONE_SHAPE "budget: {seconds: soon}\n", AT_ERR_CONFIG,
               "t.yaml:3:19: budget.seconds: expected a number, got 'soon'");
  expect_error(ONE_SHAPE "budget: {time: 5}\n", AT_ERR_CONFIG,
               "t.yaml:3:10: budget: unknown key 'time' (expected candidates, seconds)");
  expect_error(ONE_SHAPE "tolerance: {fp32: 0.001}\n", AT_ERR_CONFIG,
               "t.yaml:3:13: tolerance: unknown key 'fp32' (expected f16, bf16, e4m3, e5m2)");
  /* f32 shapes are accepted, but they run the naive kernels, which are the reference itself. */
  expect_error(ONE_SHAPE "tolerance: {bf16: 0.02, f32: 0.001}\n", AT_ERR_CONFIG,
               "t.yaml:3:25: tolerance: no tolerance for f32: f32 shapes run only the naive kernels, which "
               "are the reference itself (expected f16, bf16, e4m3, e5m2)");
  expect_error(ONE_SHAPE "tolerance: {bf16: 0}\n", AT_ERR_CONFIG,
               "t.yaml:3:19: tolerance.bf16: 0 must be greater than 0");
  expect_error(ONE_SHAPE "tolerance: {bf16: .nan}\n", AT_ERR_CONFIG,
               "t.yaml:3:19: tolerance.bf16: expected a number, got '.nan'");
  expect_error(
      ONE_SHAPE "timing: {reps: 5}\n", AT_ERR_CONFIG,
      "t.yaml:3:16: timing.reps: first_pass_reps (5) must be less than reps (5); 0 turns the first pass off");
  expect_error(ONE_SHAPE "timing: {reps: 10, first_pass_reps: 20}\n", AT_ERR_CONFIG,
               "t.yaml:3:37: timing.first_pass_reps: first_pass_reps (20) must be less than reps (10); "
               "0 turns the first pass off");
  expect_error(ONE_SHAPE "timing: {keep: 1.5}\n", AT_ERR_CONFIG,
               "t.yaml:3:16: timing.keep: 1.5 is too large (at most 1)");
  expect_error(ONE_SHAPE "timing: {keep: 0}\n", AT_ERR_CONFIG,
               "t.yaml:3:16: timing.keep: 0 must be at least 1");
  expect_error(
      ONE_SHAPE "timing: 5\n", AT_ERR_CONFIG,
      "t.yaml:3:9: timing: expected a mapping of warmup, reps, first_pass_reps and keep, got a value");
  assert_no_mismatch();
}

static void test_yaml_errors(void **state)
{
  (void)state;
  expect_error(
      "shapes:\n"
      "  - seq_len: [128, 256\n"
      "    q_heads: 8\n",
      AT_ERR_CONFIG,
      "t.yaml:3:12: YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence at "
      "line 2, column 14)");
  expect_error("shapes: *nowhere\n", AT_ERR_CONFIG, "t.yaml:1:9: YAML syntax error: found undefined alias");
  expect_error(ONE_SHAPE "---\n" ONE_SHAPE, AT_ERR_CONFIG,
               "t.yaml:4:1: a second YAML document (a config is one document)");
  assert_no_mismatch();
  /* Anchors and aliases are fine: they share one node. */
  tn_config c = parse_ok("shapes:\n"
                         "  - &base {seq_len: 128, q_heads: 8, head_dim: 64}\n"
                         "  - *base\n");
  assert_int_equal(c.n_shapes, 1);
  tn_config_free(&c);
}

/* libyaml's scanner is quadratic in the nesting depth (100000 '[' took 23 s); the parser refuses
 * the 33rd level before reading on. The time bound is a loose sanity check, not a benchmark. */
static void test_deep_nesting_is_refused_fast(void **state)
{
  (void)state;
  enum { DEPTH = 100000 };
  static const struct {
    const char *prefix, *open, *message;
  } cases[] = {
      {"shapes: ", "[", "t.yaml:1:40: lists and mappings nested deeper than 32 levels"},
      {"shapes: ", "{a: ", "t.yaml:1:133: lists and mappings nested deeper than 32 levels"},
      {"shapes: ", "[\n", "t.yaml:32:1: lists and mappings nested deeper than 32 levels"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t pre = strlen(cases[i].prefix), open = strlen(cases[i].open);
    char *yaml = malloc(pre + DEPTH * open + 1);
    assert_non_null(yaml);
    memcpy(yaml, cases[i].prefix, pre);
    for (int d = 0; d < DEPTH; d++) memcpy(yaml + pre + (size_t)d * open, cases[i].open, open);
    yaml[pre + DEPTH * open] = '\0';
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tn_config c;
    at_status rc = tn_config_parse(yaml, strlen(yaml), "t.yaml", &c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* Not expect_error: it would print the 100000-level document. */
    if (rc != AT_ERR_CONFIG || strcmp(at_last_error(), cases[i].message) != 0)
      fail_msg("case %zu: expected %s, got %s: %s", i, cases[i].message, at_status_name(rc), at_last_error());
    assert_null(c.shapes);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (seconds >= 1.0) fail_msg("case %zu took %.2f s (expected well under 1 s)", i, seconds);
    free(yaml);
  }
  /* 31 levels under the root are allowed through to the usual checks. */
  expect_error("shapes: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n", AT_ERR_CONFIG,
               "t.yaml:1:10: shapes[0]: expected a mapping with name, batch, seq_len, q_len, kv_len, "
               "q_heads, kv_heads, head_dim, dtype, kv_dtype, mask, lse, lengths, page_size, got a list");
  assert_no_mismatch();
}

/* ---- keys and shards --------------------------------------------------------------------- */

static void test_shape_key(void **state)
{
  (void)state;
  at_shape s = {.batch = 2,
                .q_len = 8192,
                .kv_len = 8192,
                .q_heads = 16,
                .kv_heads = 16,
                .head_dim = 128,
                .dtype = AT_DTYPE_BF16,
                .mask = AT_MASK_CAUSAL_TL};
  char key[TN_SHAPE_KEY_CAP];
  tn_shape_key(&s, key, sizeof key);
  assert_string_equal(key, "b2.t8192.s8192.hq16.hkv16.d128.bf16.causal");
  s.with_lse = 1, s.mask = AT_MASK_CAUSAL_BR, s.dtype = AT_DTYPE_E5M2, s.kv_heads = 2, s.q_len = 1;
  tn_shape_key(&s, key, sizeof key);
  assert_string_equal(key, "b2.t1.s8192.hq16.hkv2.d128.e5m2.causal-br.lse");
  s.scale = 0.125f;
  tn_shape_key(&s, key, sizeof key);
  assert_string_equal(key, "b2.t1.s8192.hq16.hkv2.d128.e5m2.causal-br.lse.scale0.125");
}

/* Device threads take shapes largest first: the order is a permutation of the shapes by FLOPs,
 * and the same set of shapes in another file order gives the same shapes in the same ranks. */
static void test_work_order(void **state)
{
  (void)state;
  tn_config a = parse_ok("shapes:\n"
                         "  - {batch: 1, seq_len: [1024, 8192, 2048], q_heads: 16, head_dim: 128}\n"
                         "  - {batch: 2, seq_len: 4096, q_heads: 16, head_dim: 64}\n");
  tn_config b = parse_ok("shapes:\n"
                         "  - {batch: 2, seq_len: 4096, q_heads: 16, head_dim: 64}\n"
                         "  - {batch: 1, seq_len: [2048, 8192, 1024], q_heads: 16, head_dim: 128}\n");
  int oa[4], ob[4], seen[4] = {0};
  TU_OK(tn_work_order(&a, oa));
  TU_OK(tn_work_order(&b, ob));
  for (int r = 0; r < 4; r++) {
    assert_true(oa[r] >= 0 && oa[r] < 4);
    seen[oa[r]]++;
    if (r > 0) assert_true(at_shape_flops(&a.shapes[oa[r - 1]]) >= at_shape_flops(&a.shapes[oa[r]]));
    char ka[TN_SHAPE_KEY_CAP], kb[TN_SHAPE_KEY_CAP];
    tn_shape_key(&a.shapes[oa[r]], ka, sizeof ka);
    tn_shape_key(&b.shapes[ob[r]], kb, sizeof kb);
    assert_string_equal(ka, kb);
  }
  for (int i = 0; i < 4; i++) assert_int_equal(seen[i], 1);
  assert_int_equal(a.shapes[oa[0]].q_len, 8192);
  assert_int_equal(tn_work_order(NULL, oa), AT_ERR_INVALID);
  tn_config_free(&a);
  tn_config_free(&b);
}

static void test_shard_parse(void **state)
{
  (void)state;
  int i = -1, n = -1;
  assert_int_equal(tn_shard_parse("0/1", &i, &n), AT_OK);
  assert_int_equal(i, 0);
  assert_int_equal(n, 1);
  assert_int_equal(tn_shard_parse("6/7", &i, &n), AT_OK);
  assert_int_equal(i, 6);
  assert_int_equal(n, 7);
  assert_int_equal(tn_shard_parse("3/2", &i, &n), AT_ERR_INVALID);
  assert_string_equal(at_last_error(),
                      "invalid shard '3/2': index 3 is not below the count 2 (shards are 0 to 1)");
  assert_int_equal(tn_shard_parse("a/b", &i, &n), AT_ERR_INVALID);
  assert_string_equal(at_last_error(), "invalid shard 'a/b' (expected i/n with 0 <= i < n, e.g. 0/4)");
  assert_int_equal(tn_shard_parse("0/0", &i, &n), AT_ERR_INVALID);
  assert_string_equal(at_last_error(), "invalid shard '0/0': the count 0 must be from 1 to 65536");
  static const char *const bad[] = {
      "", "1", "1/", "/2", "-1/2", "1/-2", "2/2", "1/2x", " 1/2", "1/ 2", "1/99999999999999999999"};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
    if (tn_shard_parse(bad[k], &i, &n) != AT_ERR_INVALID)
      fail_msg("'%s' parsed as shard %d/%d", bad[k], i, n);
  assert_int_equal(i, 6); /* untouched by failures */
  assert_int_equal(n, 7);
}

/* Shards are disjoint and cover the codelab config; their sizes differ by at most one. */
static void test_shards_partition_codelab(void **state)
{
  (void)state;
  tn_config all;
  load_sample("codelab.yaml", &all);
  int *seen = calloc((size_t)all.n_shapes, sizeof *seen);
  assert_non_null(seen);
  for (int n = 1; n <= 7; n++) {
    memset(seen, 0, (size_t)all.n_shapes * sizeof *seen);
    int smallest = all.n_shapes, largest = 0, total = 0;
    for (int i = 0; i < n; i++) {
      tn_config part;
      load_sample("codelab.yaml", &part);
      assert_int_equal(tn_config_keep_shard(&part, i, n), AT_OK);
      for (int k = 0; k < part.n_shapes; k++) {
        char key[TN_SHAPE_KEY_CAP];
        key_of(&part, k, key);
        int at = find_key(&all, key);
        assert_true(at >= 0);
        assert_string_equal(part.groups[k], all.groups[at]);
        if (k > 0) { /* original order kept */
          char prev[TN_SHAPE_KEY_CAP];
          key_of(&part, k - 1, prev);
          assert_true(find_key(&all, prev) < at);
        }
        seen[at]++;
      }
      total += part.n_shapes;
      if (part.n_shapes < smallest) smallest = part.n_shapes;
      if (part.n_shapes > largest) largest = part.n_shapes;
      tn_config_free(&part);
    }
    assert_int_equal(total, all.n_shapes);
    for (int k = 0; k < all.n_shapes; k++) assert_int_equal(seen[k], 1);
    assert_true(largest - smallest <= 1);
  }
  free(seen);
  tn_config_free(&all);
}

/* The owner of a shape depends on the set of shapes, not on their order in the file. */
static void test_shards_ignore_order(void **state)
{
  (void)state;
  tn_config c;
  load_sample("codelab.yaml", &c);
  int n = c.n_shapes;
  int *owner = malloc((size_t)n * sizeof *owner), *owner_rev = malloc((size_t)n * sizeof *owner_rev);
  assert_non_null(owner);
  assert_non_null(owner_rev);
  assert_int_equal(tn_shard_owners(&c, 5, owner), AT_OK);
  for (int i = 0; i < n / 2; i++) { /* reverse the list in place */
    at_shape t = c.shapes[i];
    c.shapes[i] = c.shapes[n - 1 - i];
    c.shapes[n - 1 - i] = t;
  }
  assert_int_equal(tn_shard_owners(&c, 5, owner_rev), AT_OK);
  for (int i = 0; i < n; i++) assert_int_equal(owner[i], owner_rev[n - 1 - i]);
  assert_int_equal(tn_shard_owners(&c, 1, owner), AT_OK);
  for (int i = 0; i < n; i++) assert_int_equal(owner[i], 0);
  assert_int_equal(tn_shard_owners(&c, 0, owner), AT_ERR_INVALID);
  assert_int_equal(tn_config_keep_shard(&c, 3, 3), AT_ERR_INVALID);
  assert_int_equal(c.n_shapes, n);
  free(owner);
  free(owner_rev);
  tn_config_free(&c);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_sample_config_parses),
      cmocka_unit_test(test_codelab_shapes),
      cmocka_unit_test(test_llm_prefill_and_quick),
      cmocka_unit_test(test_decode_configs),
      cmocka_unit_test(test_bad_config_files),
      cmocka_unit_test(test_missing_file_is_io_error),
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_sweep_is_a_cartesian_product_in_field_order),
      cmocka_unit_test(test_q_len_and_kv_len_sweep_independently),
      cmocka_unit_test(test_ranges),
      cmocka_unit_test(test_dedup_keeps_first_occurrence),
      cmocka_unit_test(test_f32_shapes),
      cmocka_unit_test(test_kv_dtype_shapes),
      cmocka_unit_test(test_serving_shapes),
      cmocka_unit_test(test_large_sweep_with_dedup),
      cmocka_unit_test(test_other_sections),
      cmocka_unit_test(test_errors_in_shapes),
      cmocka_unit_test(test_size_limits),
      cmocka_unit_test(test_errors_in_ranges),
      cmocka_unit_test(test_errors_in_other_sections),
      cmocka_unit_test(test_decode_search),
      cmocka_unit_test(test_decode_search_errors), cmocka_unit_test(test_fa3_ws_search),
      cmocka_unit_test(test_fa3_persistent_search), cmocka_unit_test(test_fa3_vt_search),
      cmocka_unit_test(test_fa3_tail_search),
      cmocka_unit_test(test_fa3_qr_search),
      cmocka_unit_test(test_yaml_errors),
      cmocka_unit_test(test_deep_nesting_is_refused_fast),
      cmocka_unit_test(test_shape_key),
      cmocka_unit_test(test_work_order),
      cmocka_unit_test(test_shard_parse),
      cmocka_unit_test(test_shards_partition_codelab),
      cmocka_unit_test(test_shards_ignore_order),
  };
  return TU_RUN_GROUP(tests, NULL, NULL);
}
