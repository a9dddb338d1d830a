/* test_cache_cli.c — `attntune cache list|show|export|merge|prune` and `attntune tune`'s argument
 * errors, run as a user would, on cache files built through the cache API (no GPU). */
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
#include "tests/testutil.h"
#include "generator/generator.h"
#include "tuner/tune.h"

static char g_dir[256], g_a[320], g_b[320];
static char g_out[1 << 16];

static cache_env env(const char *templates)
{
  cache_env e;
  memset(&e, 0, sizeof e);
  snprintf(e.gpu_model, sizeof e.gpu_model, "NVIDIA H200");
  e.cc_major = 9, e.sm_count = 132;
  snprintf(e.driver, sizeof e.driver, "580.159.04");
  snprintf(e.nvrtc, sizeof e.nvrtc, "13.0");
  snprintf(e.cudnn, sizeof e.cudnn, "9.19.0");
  snprintf(e.template_version, sizeof e.template_version, "%s", templates);
  return e;
}

static at_shape shape(int t)
{
  return (at_shape){.batch = 2, .q_len = t, .kv_len = t, .q_heads = 16, .kv_heads = 16,
                    .head_dim = 128, .dtype = AT_DTYPE_BF16, .mask = AT_MASK_CAUSAL_TL};
}

static void add(const char *path, const cache_env *e, int t, const char *impl, double ms, double cudnn_ms)
{
  cache_db *db;
  cache_trial tr;
  cache_best b;
  TU_OK(cache_open(path, 0, &db));
  memset(&tr, 0, sizeof tr);
  tr.shape = shape(t);
  snprintf(tr.impl, sizeof tr.impl, "%s", impl);
  tr.status = CACHE_OK, tr.time_ms = ms, tr.tflops = 100, tr.err_naive = 2e-3, tr.err_cudnn = 1e-3;
  tr.registers = 200, tr.reps = 50;
  TU_OK(cache_put_trial(db, e, &tr));
  memset(&b, 0, sizeof b);
  b.shape = shape(t), b.env = *e;
  snprintf(b.impl, sizeof b.impl, "%s", impl);
  b.time_ms = ms, b.tflops = 100, b.cudnn_ms = cudnn_ms, b.err_naive = 2e-3, b.err_cudnn = 1e-3;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  TU_OK(cache_put_best(db, &b, NULL));
  cache_close(db);
}

static int setup(void **state)
{
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/attntune-cache-cli-XXXXXX");
  if (!mkdtemp(g_dir)) return -1;
  snprintf(g_a, sizeof g_a, "%s/a.db", g_dir);
  snprintf(g_b, sizeof g_b, "%s/b.db", g_dir);
  char current[96];
  gen_templates_version(current, sizeof current);
  cache_env now = env(current), old = env("tpl-000000000000");
  add(g_a, &now, 1024, "fa2.bf16.d128.causal.g1.bm128.bn128.w8.s3", 0.05, 0.04);
  add(g_a, &old, 2048, "fa2.bf16.d128.causal.g1.bm128.bn64.w8.s2", 0.20, 0.15);
  add(g_b, &now, 1024, "fa2.bf16.d128.causal.g1.bm128.bn64.w8.s2", 0.03, 0.04);
  add(g_b, &now, 4096, "cudnn", 0.60, 0.60);
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static int cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int cli(const char *fmt, ...)
{
  char args[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  return tu_run_attntune(args, g_dir, g_out, sizeof g_out);
}

static void test_list_and_show(void **state)
{
  (void)state;
  assert_int_equal(cli("cache list --db '%s'", g_a), 0);
  assert_non_null(strstr(g_out, "b2.t1024.s1024.hq16.hkv16.d128.bf16.causal"));
  assert_non_null(strstr(g_out, "0.80x")); /* 0.04 / 0.05 */
  assert_int_equal(cli("cache show b2.t1024.s1024.hq16.hkv16.d128.bf16.causal --db '%s'", g_a), 0);
  assert_non_null(strstr(g_out, "fa2.bf16.d128.causal.g1.bm128.bn128.w8.s3"));
  assert_int_equal(cli("cache show b9.t1.s1.hq1.hkv1.d8.bf16.none --db '%s'", g_a), 1);
  assert_non_null(strstr(g_out, "no trials for shape"));
  assert_int_equal(cli("cache list --db '%s' --gpu 'NVIDIA B200'", g_a), 1);
  assert_non_null(strstr(g_out, "it holds results for: NVIDIA H200"));
  assert_int_equal(cli("cache list --db '%s/none.db'", g_dir), 1);
  assert_non_null(strstr(g_out, "does not exist"));
}

static void test_export(void **state)
{
  (void)state;
  assert_int_equal(cli("cache export --format csv --db '%s'", g_a), 0);
  assert_non_null(strstr(g_out, "gpu,shape,batch,q_len"));
  int lines = 0;
  for (const char *p = g_out; (p = strchr(p, '\n')) != NULL; p++) lines++;
  assert_int_equal(lines, 3); /* header + two best rows */
  assert_int_equal(cli("cache export --format json --trials --db '%s'", g_a), 0);
  assert_non_null(strstr(g_out, "{\"trials\": ["));
  assert_non_null(strstr(g_out, "\"reps\": 50"));
  assert_int_equal(cli("cache export --format xml --db '%s'", g_a), 2);
  assert_non_null(strstr(g_out, "--format csv or json"));
}

static void test_merge_then_prune(void **state)
{
  (void)state;
  char merged[400];
  snprintf(merged, sizeof merged, "%s/merged.db", g_dir);
  assert_int_equal(cli("cache merge '%s' '%s' --into '%s'", g_a, g_b, merged), 0);
  assert_int_equal(cli("cache list --db '%s'", merged), 0);
  /* The faster of the two files' rows for T=1024 won: b's 0.03 ms variant. */
  assert_non_null(strstr(g_out, "bm128.bn64.w8.s2"));
  assert_non_null(strstr(g_out, "b2.t4096.s4096"));
  assert_int_equal(cli("cache prune --db '%s'", merged), 0);
  assert_non_null(strstr(g_out, "removed 2 rows")); /* the stale trial and best of T=2048 */
  assert_int_equal(cli("cache list --db '%s'", merged), 0);
  assert_null(strstr(g_out, "b2.t2048"));
  assert_int_equal(cli("cache merge '%s' --into '%s/m2.db'", g_a, g_dir), 0);
  assert_int_equal(cli("cache merge '%s/missing.db' --into '%s/m3.db'", g_dir, g_dir), 1);
  assert_int_equal(access(merged, F_OK), 0);
  char m3[400];
  snprintf(m3, sizeof m3, "%s/m3.db", g_dir);
  assert_int_not_equal(access(m3, F_OK), 0); /* a failed merge creates nothing */
  assert_int_equal(cli("cache merge '%s'", g_a), 2);
  assert_non_null(strstr(g_out, "--into"));
}

static void test_tune_argument_errors(void **state)
{
  (void)state;
  assert_int_equal(cli("tune"), 2);
  assert_non_null(strstr(g_out, "which config?"));
  assert_int_equal(cli("tune '%s/none.yaml'", g_dir), 2);
  assert_non_null(strstr(g_out, "none.yaml"));
  char bad[400];
  snprintf(bad, sizeof bad, "%s/bad.yaml", g_dir);
  FILE *f = fopen(bad, "w");
  fputs("shapes:\n  - head_dim: 64\n    dtype: bf17\n", f);
  fclose(f);
  assert_int_equal(cli("tune '%s'", bad), 2);
  assert_non_null(strstr(g_out, "bad.yaml:3:"));
  assert_non_null(strstr(g_out, "bf17"));
  assert_int_equal(cli("tune '%s' --shard 3/2", bad), 2);
  assert_non_null(strstr(g_out, "3/2"));
  assert_int_equal(cli("tune '%s' --jobs zero", bad), 2);
  assert_int_equal(cli("bench --suite nosuch"), 2);
  assert_non_null(strstr(g_out, "no suite 'nosuch'"));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_list_and_show),
      cmocka_unit_test(test_export),
      cmocka_unit_test(test_merge_then_prune),
      cmocka_unit_test(test_tune_argument_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
