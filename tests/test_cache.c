/* test_cache.c — the SQLite cache on real files: schema, trials, best, merge, resume, prune. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "tests/testutil.h"

static char g_dir[256];

static int make_dir(void **state)
{
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/attntune-test-cache-XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static const char *path_in_dir(const char *name)
{
  static char path[4][320];
  static int next;
  char *p = path[next++ % 4];
  snprintf(p, 320, "%s/%s", g_dir, name);
  unlink(p);
  return p;
}

static cache_env h200(void)
{
  cache_env e;
  memset(&e, 0, sizeof e);
  snprintf(e.gpu_model, sizeof e.gpu_model, "NVIDIA H200");
  e.cc_major = 9, e.cc_minor = 0, e.sm_count = 132;
  snprintf(e.driver, sizeof e.driver, "580.159.04");
  snprintf(e.nvrtc, sizeof e.nvrtc, "13.0");
  snprintf(e.cudnn, sizeof e.cudnn, "9.19.0");
  snprintf(e.template_version, sizeof e.template_version, "t1");
  return e;
}

static at_shape shape(int t, at_mask mask)
{
  return (at_shape){.batch = 2, .q_len = t, .kv_len = t, .q_heads = 16, .kv_heads = 4,
                    .head_dim = 128, .dtype = AT_DTYPE_BF16, .mask = mask};
}

static cache_trial trial(at_shape s, const char *impl, cache_status st, double ms)
{
  cache_trial t;
  memset(&t, 0, sizeof t);
  t.shape = s;
  snprintf(t.impl, sizeof t.impl, "%s", impl);
  t.status = st;
  t.time_ms = ms, t.tflops = ms > 0 ? 1.0 / ms : NAN, t.err_naive = 1e-3, t.err_cudnn = NAN;
  t.registers = 128, t.spill_bytes = 0, t.smem_bytes = 49152;
  return t;
}

static cache_best best(at_shape s, const char *impl, double ms)
{
  cache_best b;
  memset(&b, 0, sizeof b);
  b.shape = s;
  b.env = h200();
  snprintf(b.impl, sizeof b.impl, "%s", impl);
  b.time_ms = ms, b.tflops = 100.0 / ms, b.cudnn_ms = 2 * ms, b.err_naive = 2e-3, b.err_cudnn = NAN;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  snprintf(b.entry, sizeof b.entry, "fa2_entry");
  static unsigned char cubin[] = {0x7f, 'E', 'L', 'F', 1, 2, 3};
  b.cubin = cubin, b.cubin_size = sizeof cubin;
  return b;
}

static void test_schema_created_with_version_and_wal(void **state)
{
  (void)state;
  const char *p = path_in_dir("schema.db");
  cache_db *db;
  TU_OK(cache_open(p, 0, &db));
  assert_int_equal(cache_schema_version(db), CACHE_SCHEMA_VERSION);
  cache_close(db);
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(p, &raw), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
  sqlite3_finalize(st);
  sqlite3_close(raw);
  /* Reopening an up-to-date file migrates nothing and keeps the version. */
  TU_OK(cache_open(p, 1, &db));
  assert_int_equal(cache_schema_version(db), CACHE_SCHEMA_VERSION);
  cache_close(db);
}

static void test_newer_schema_and_foreign_files_are_refused(void **state)
{
  (void)state;
  const char *p = path_in_dir("newer.db");
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(p, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(raw);
  cache_db *db = NULL;
  assert_int_equal(cache_open(p, 0, &db), AT_ERR_CACHE);
  assert_non_null(strstr(at_last_error(), "schema version 99"));
  assert_null(db);
  assert_int_equal(cache_open(path_in_dir("missing.db"), 1, &db), AT_ERR_IO);
  assert_non_null(strstr(at_last_error(), "does not exist"));
  /* A text file is not a database. */
  const char *junk = path_in_dir("junk.db");
  FILE *f = fopen(junk, "w");
  fputs("this is not a database, it is a text file of some length.........................", f);
  fclose(f);
  assert_int_equal(cache_open(junk, 0, &db), AT_ERR_CACHE);
  assert_non_null(strstr(at_last_error(), junk));
}

static void test_migration_from_empty_file(void **state)
{
  (void)state;
  const char *p = path_in_dir("v0.db");
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(p, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw, "CREATE TABLE unrelated(x)", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(raw);
  cache_db *db;
  assert_int_equal(cache_open(p, 1, &db), AT_ERR_CACHE); /* read-only cannot migrate */
  assert_non_null(strstr(at_last_error(), "schema version 0"));
  TU_OK(cache_open(p, 0, &db));
  assert_int_equal(cache_schema_version(db), CACHE_SCHEMA_VERSION);
  cache_env e = h200();
  cache_trial t = trial(shape(512, AT_MASK_NONE), "cudnn", CACHE_OK, 0.5);
  TU_OK(cache_put_trial(db, &e, &t));
  cache_close(db);
}

/* A version-1 file (no cubins table) with data migrates to version 2 and keeps its rows. */
static void test_migration_from_version_1_keeps_rows(void **state)
{
  (void)state;
  const char *p = path_in_dir("v1.db");
  cache_db *db;
  cache_env e = h200();
  at_shape s = shape(256, AT_MASK_CAUSAL_TL);
  TU_OK(cache_open(p, 0, &db));
  cache_trial t = trial(s, "fa2.kept", CACHE_OK, 0.3);
  TU_OK(cache_put_trial(db, &e, &t));
  cache_close(db);
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(p, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw, "DROP TABLE cubins; PRAGMA user_version = 1", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(raw);
  TU_OK(cache_open(p, 0, &db));
  assert_int_equal(cache_schema_version(db), 2);
  int found = 0;
  TU_OK(cache_find_trial(db, &e, &s, "fa2.kept", &found, NULL));
  assert_true(found);
  static const unsigned char bin[] = {0x7f, 'E', 'L', 'F', 9};
  TU_OK(cache_put_cubin(db, "fa2.x", "sm_90a", "t1", "13.0", "fa2_x", bin, sizeof bin));
  void *got = NULL;
  size_t size = 0;
  TU_OK(cache_get_cubin(db, "fa2.x", "sm_90a", "t1", &got, &size, &found));
  assert_true(found);
  assert_int_equal(size, sizeof bin);
  assert_memory_equal(got, bin, sizeof bin);
  free(got);
  TU_OK(cache_get_cubin(db, "fa2.x", "sm_80", "t1", &got, &size, &found));
  assert_false(found);
  /* A best row's cubin is found by variant too. */
  cache_best b = best(s, "fa2.in-best", 0.5);
  TU_OK(cache_put_best(db, &b, NULL));
  TU_OK(cache_get_cubin(db, "fa2.in-best", "sm_90a", "t1", &got, &size, &found));
  assert_true(found && size == 7);
  free(got);
  cache_close(db);
}

static void test_trials_round_trip_and_replace(void **state)
{
  (void)state;
  cache_db *db;
  TU_OK(cache_open(path_in_dir("trials.db"), 0, &db));
  cache_env e = h200();
  at_shape s = shape(1024, AT_MASK_CAUSAL_TL);
  cache_trial a = trial(s, "fa2.bf16.d128.causal.g4.bm128.bn64.w4.s2", CACHE_OK, 0.25);
  cache_trial b = trial(s, "fa2.bf16.d128.causal.g4.bm64.bn64.w4.s2", CACHE_CRASHED, NAN);
  snprintf(b.message, sizeof b.message, "CUDA_ERROR_ILLEGAL_ADDRESS");
  TU_OK(cache_put_trial(db, &e, &a));
  TU_OK(cache_put_trial(db, &e, &b));
  int found = 0, count = 0;
  cache_trial got;
  TU_OK(cache_find_trial(db, &e, &s, b.impl, &found, &got));
  assert_true(found);
  assert_int_equal(got.status, CACHE_CRASHED);
  assert_true(isnan(got.time_ms));
  assert_string_equal(got.message, "CUDA_ERROR_ILLEGAL_ADDRESS");
  assert_int_equal(got.shape.mask, AT_MASK_CAUSAL_TL);
  assert_int_equal(got.shape.kv_heads, 4);
  TU_OK(cache_find_trial(db, &e, &s, a.impl, &found, &got));
  assert_true(found && got.status == CACHE_OK && fabs(got.time_ms - 0.25) < 1e-12);
  TU_OK(cache_count_trials(db, &e, &s, &count));
  assert_int_equal(count, 2);
  /* Another template version does not see these rows. */
  cache_env e2 = e;
  snprintf(e2.template_version, sizeof e2.template_version, "t2");
  TU_OK(cache_find_trial(db, &e2, &s, a.impl, &found, NULL));
  assert_false(found);
  /* Rewriting a trial (a --force rerun) replaces it. */
  a.time_ms = 0.2;
  TU_OK(cache_put_trial(db, &e, &a));
  TU_OK(cache_count_trials(db, &e, &s, &count));
  assert_int_equal(count, 2);
  cache_close(db);
}

static void test_best_keeps_the_faster(void **state)
{
  (void)state;
  cache_db *db;
  TU_OK(cache_open(path_in_dir("best.db"), 0, &db));
  at_shape s = shape(2048, AT_MASK_NONE);
  int stored = 0, found = 0;
  cache_best b = best(s, "fa2.a", 1.0);
  TU_OK(cache_put_best(db, &b, &stored));
  assert_true(stored);
  b = best(s, "fa2.slower", 1.5);
  TU_OK(cache_put_best(db, &b, &stored));
  assert_false(stored);
  b = best(s, "fa2.faster", 0.8);
  TU_OK(cache_put_best(db, &b, &stored));
  assert_true(stored);
  cache_best got;
  TU_OK(cache_get_best(db, "NVIDIA H200", &s, &got, &found));
  assert_true(found);
  assert_string_equal(got.impl, "fa2.faster");
  assert_int_equal(got.cubin_size, 7);
  assert_memory_equal(got.cubin, "\x7f" "ELF", 4);
  assert_true(fabs(got.cudnn_ms - 1.6) < 1e-12);
  cache_best_clear(&got);
  TU_OK(cache_get_best(db, "NVIDIA A100", &s, &got, &found));
  assert_false(found);
  cache_close(db);
}

static void test_resume_marks(void **state)
{
  (void)state;
  const char *p = path_in_dir("resume.db");
  cache_db *db;
  cache_env e = h200();
  at_shape s1 = shape(256, AT_MASK_NONE), s2 = shape(512, AT_MASK_NONE);
  TU_OK(cache_open(p, 0, &db));
  TU_OK(cache_mark_done(db, &e, &s1));
  cache_trial t = trial(s2, "fa2.x", CACHE_OK, 0.1);
  TU_OK(cache_put_trial(db, &e, &t));
  cache_close(db); /* as if the process died here */
  TU_OK(cache_open(p, 0, &db));
  int done = -1, found = 0;
  TU_OK(cache_is_done(db, &e, &s1, &done));
  assert_int_equal(done, 1);
  TU_OK(cache_is_done(db, &e, &s2, &done));
  assert_int_equal(done, 0);
  TU_OK(cache_find_trial(db, &e, &s2, "fa2.x", &found, NULL));
  assert_true(found);
  TU_OK(cache_forget_shape(db, &e, &s2));
  TU_OK(cache_find_trial(db, &e, &s2, "fa2.x", &found, NULL));
  assert_false(found);
  cache_close(db);
}

static int count_best(void *user, const cache_best *b)
{
  (void)b;
  ++*(int *)user;
  return 0;
}

static void test_merge_keeps_better_per_key(void **state)
{
  (void)state;
  const char *a = path_in_dir("a.db"), *b = path_in_dir("b.db"), *c = path_in_dir("c.db");
  cache_db *db;
  cache_env e = h200();
  at_shape s1 = shape(1024, AT_MASK_NONE), s2 = shape(4096, AT_MASK_NONE), s3 = shape(64, AT_MASK_NONE);
  cache_best x;
  TU_OK(cache_open(a, 0, &db));
  x = best(s1, "from-a-fast", 1.0); TU_OK(cache_put_best(db, &x, NULL));
  x = best(s2, "from-a-slow", 3.0); TU_OK(cache_put_best(db, &x, NULL));
  cache_trial t = trial(s1, "from-a-fast", CACHE_OK, 1.0);
  TU_OK(cache_put_trial(db, &e, &t));
  cache_close(db);
  TU_OK(cache_open(b, 0, &db));
  x = best(s1, "from-b-slow", 2.0); TU_OK(cache_put_best(db, &x, NULL));
  x = best(s2, "from-b-fast", 1.5); TU_OK(cache_put_best(db, &x, NULL));
  x = best(s3, "from-b-only", 0.1); TU_OK(cache_put_best(db, &x, NULL));
  t = trial(s2, "from-b-fast", CACHE_OK, 1.5);
  TU_OK(cache_put_trial(db, &e, &t));
  cache_close(db);
  const char *inputs[] = {a, b};
  TU_OK(cache_merge(inputs, 2, c));
  TU_OK(cache_open(c, 1, &db));
  cache_best got;
  int found, n = 0;
  TU_OK(cache_get_best(db, "NVIDIA H200", &s1, &got, &found));
  assert_string_equal(got.impl, "from-a-fast");
  cache_best_clear(&got);
  TU_OK(cache_get_best(db, "NVIDIA H200", &s2, &got, &found));
  assert_string_equal(got.impl, "from-b-fast");
  cache_best_clear(&got);
  TU_OK(cache_each_best(db, NULL, count_best, &n));
  assert_int_equal(n, 3);
  TU_OK(cache_find_trial(db, &e, &s1, "from-a-fast", &found, NULL));
  assert_true(found);
  TU_OK(cache_find_trial(db, &e, &s2, "from-b-fast", &found, NULL));
  assert_true(found);
  cache_close(db);
  /* Merging a missing file names it. */
  const char *bad[] = {path_in_dir("nope.db")};
  assert_int_equal(cache_merge(bad, 1, c), AT_ERR_IO);
  assert_non_null(strstr(at_last_error(), "nope.db"));
}

static void test_prune_drops_stale_template_rows(void **state)
{
  (void)state;
  cache_db *db;
  TU_OK(cache_open(path_in_dir("prune.db"), 0, &db));
  cache_env old = h200(), cur = h200();
  snprintf(old.template_version, sizeof old.template_version, "t0");
  at_shape s = shape(128, AT_MASK_NONE);
  cache_trial t = trial(s, "fa2.y", CACHE_OK, 0.01);
  TU_OK(cache_put_trial(db, &old, &t));
  TU_OK(cache_put_trial(db, &cur, &t));
  int removed = 0, found = 0;
  TU_OK(cache_prune(db, "t1", &removed));
  assert_int_equal(removed, 1);
  TU_OK(cache_find_trial(db, &cur, &s, "fa2.y", &found, NULL));
  assert_true(found);
  TU_OK(cache_find_trial(db, &old, &s, "fa2.y", &found, NULL));
  assert_false(found);
  char models[256];
  int n_models = 0;
  TU_OK(cache_models(db, models, sizeof models, &n_models));
  assert_int_equal(n_models, 1);
  assert_string_equal(models, "NVIDIA H200");
  cache_close(db);
}

/* Two handles (as two tuning processes) interleave writes on one WAL file. */
static void test_two_writers_share_a_file(void **state)
{
  (void)state;
  const char *p = path_in_dir("shared.db");
  cache_db *a, *b;
  TU_OK(cache_open(p, 0, &a));
  TU_OK(cache_open(p, 0, &b));
  cache_env e = h200();
  for (int i = 0; i < 50; i++) {
    cache_trial t = trial(shape(64 + i, AT_MASK_NONE), "w", CACHE_OK, 1.0);
    TU_OK(cache_put_trial(i % 2 ? a : b, &e, &t));
  }
  int count = 0;
  at_shape s = shape(64 + 49, AT_MASK_NONE);
  TU_OK(cache_count_trials(a, &e, &s, &count));
  assert_int_equal(count, 1);
  cache_close(a);
  cache_close(b);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema_created_with_version_and_wal),
      cmocka_unit_test(test_newer_schema_and_foreign_files_are_refused),
      cmocka_unit_test(test_migration_from_empty_file),
      cmocka_unit_test(test_migration_from_version_1_keeps_rows),
      cmocka_unit_test(test_trials_round_trip_and_replace),
      cmocka_unit_test(test_best_keeps_the_faster),
      cmocka_unit_test(test_resume_marks),
      cmocka_unit_test(test_merge_keeps_better_per_key),
      cmocka_unit_test(test_prune_drops_stale_template_rows),
      cmocka_unit_test(test_two_writers_share_a_file),
  };
  return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
