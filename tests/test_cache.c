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
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
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

/* The file's journal mode as a fresh connection sees it. */
static void journal_mode(const char *path, char *mode, size_t size)
{
  sqlite3 *raw;
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_open_v2(path, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  snprintf(mode, size, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(raw);
}

static int raw_int(const char *path, const char *sql)
{
  sqlite3 *raw;
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(raw, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int v = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(raw);
  return v;
}

static void raw_exec(const char *path, const char *sql)
{
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
  char *err = NULL;
  if (sqlite3_exec(raw, sql, NULL, NULL, &err) != SQLITE_OK) fail_msg("%s: %s", sql, err);
  sqlite3_close(raw);
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
  b.env = tu_h200_env("t1");
  snprintf(b.impl, sizeof b.impl, "%s", impl);
  b.time_ms = ms, b.tflops = 100.0 / ms, b.cudnn_ms = 2 * ms, b.err_naive = 2e-3, b.err_cudnn = NAN;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  snprintf(b.entry, sizeof b.entry, "fa2_entry");
  static unsigned char cubin[] = {0x7f, 'E', 'L', 'F', 1, 2, 3};
  b.cubin = cubin, b.cubin_size = sizeof cubin;
  return b;
}

/* A writer works in WAL mode (several tuning processes share a file) and leaves the file in
 * rollback mode when the last writer closes it: one self-contained file, no -wal or -shm, that a
 * reader can open where it cannot write. */
static void test_schema_created_with_version_and_wal(void **state)
{
  (void)state;
  const char *p = path_in_dir("schema.db");
  char mode[16];
  cache_db *db;
  TU_OK(cache_open(p, 0, &db));
  assert_int_equal(cache_schema_version(db), CACHE_SCHEMA_VERSION);
  journal_mode(p, mode, sizeof mode);
  assert_string_equal(mode, "wal");
  cache_close(db);
  journal_mode(p, mode, sizeof mode);
  assert_string_equal(mode, "delete");
  char side[400];
  snprintf(side, sizeof side, "%s-wal", p);
  assert_int_not_equal(access(side, F_OK), 0);
  snprintf(side, sizeof side, "%s-shm", p);
  assert_int_not_equal(access(side, F_OK), 0);
  /* Reopening an up-to-date file migrates nothing and keeps the version. */
  TU_OK(cache_open(p, 1, &db));
  assert_int_equal(cache_schema_version(db), CACHE_SCHEMA_VERSION);
  cache_close(db);
}

static void test_newer_schema_and_foreign_files_are_refused(void **state)
{
  (void)state;
  const char *p = path_in_dir("newer.db");
  cache_db *db = NULL;
  TU_OK(cache_open(p, 0, &db));
  cache_close(db);
  raw_exec(p, "PRAGMA user_version = 99");
  db = NULL;
  assert_int_equal(cache_open(p, 0, &db), AT_ERR_CACHE);
  assert_non_null(strstr(at_last_error(), "schema version 99"));
  assert_null(db);
  assert_int_equal(cache_open(p, 1, &db), AT_ERR_CACHE);
  assert_non_null(strstr(at_last_error(), "schema version 99"));
  assert_int_equal(cache_open(path_in_dir("missing.db"), 1, &db), AT_ERR_IO);
  assert_non_null(strstr(at_last_error(), "does not exist"));
  /* A directory is named as one, by readers and writers (SQLite alone said "disk I/O error"). */
  for (int mode = 0; mode < 3; mode++) {
    assert_int_equal(cache_open(g_dir, (cache_mode)mode, &db), AT_ERR_IO);
    assert_non_null(strstr(at_last_error(), "is a directory; give a file in it"));
  }
  /* An older schema opened read-only: not changed, and the message says how to upgrade it. */
  const char *old = path_in_dir("older.db");
  TU_OK(cache_open(old, 0, &db));
  cache_close(db);
  raw_exec(old, "DROP TABLE cubins; PRAGMA user_version = 1");
  assert_int_equal(cache_open(old, 1, &db), AT_ERR_CACHE);
  assert_non_null(strstr(at_last_error(), "schema version 1, written by an older attntune"));
  assert_non_null(strstr(at_last_error(), "attntune cache migrate --db"));
  assert_null(strstr(at_last_error(), "open it writable once"));
  TU_OK(cache_open(old, CACHE_WRITE_EXISTING, &db));
  assert_int_equal(cache_opened_version(db), 1);
  assert_int_equal(cache_schema_version(db), CACHE_SCHEMA_VERSION);
  cache_close(db);
  /* A text file is not a database: refused by name, by readers and writers, and left as it was. */
  const char *junk = path_in_dir("junk.db");
  FILE *f = fopen(junk, "w");
  fputs("this is not a database, it is a text file of some length.........................", f);
  fclose(f);
  size_t n;
  char *before = tu_slurp(junk, &n);
  for (int read_only = 0; read_only < 2; read_only++) {
    assert_int_equal(cache_open(junk, read_only, &db), AT_ERR_CACHE);
    assert_non_null(strstr(at_last_error(), junk));
    assert_non_null(strstr(at_last_error(), "not an attntune cache"));
    assert_non_null(strstr(at_last_error(), "not a SQLite database"));
    tu_assert_file_unchanged(junk, before, n);
  }
  free(before);
}

/* Another program's SQLite file is nobody's to take over: a writer (tune, a writable library
 * context) refuses it before any write, as a reader does. */
static void test_foreign_sqlite_files_are_refused_and_left_alone(void **state)
{
  (void)state;
  static const char *const SETUPS[] = {
      "CREATE TABLE unrelated(x); INSERT INTO unrelated VALUES (1)",
      /* another program that numbers its schema too */
      "CREATE TABLE trials(id INTEGER PRIMARY KEY, subject TEXT); PRAGMA user_version = 2",
      "CREATE TABLE notes(x); PRAGMA user_version = 1; PRAGMA journal_mode = WAL",
  };
  for (int i = 0; i < 3; i++) {
    const char *p = path_in_dir("foreign.db");
    raw_exec(p, SETUPS[i]);
    size_t n;
    char *before = tu_slurp(p, &n);
    cache_db *db = NULL;
    for (int read_only = 0; read_only < 2; read_only++) {
      assert_int_equal(cache_open(p, read_only, &db), AT_ERR_CACHE);
      assert_null(db);
      assert_non_null(strstr(at_last_error(), p));
      assert_non_null(strstr(at_last_error(), "not an attntune cache"));
      tu_assert_file_unchanged(p, before, n);
    }
    free(before);
  }
}

/* A file of 0 bytes (mktemp's, or an interrupted first open) holds nothing to lose: a writer
 * makes it a cache; readers say it holds none. */
static void test_empty_file_becomes_a_cache(void **state)
{
  (void)state;
  const char *p = path_in_dir("empty.db");
  FILE *f = fopen(p, "w");
  fclose(f);
  cache_db *db;
  assert_int_equal(cache_open(p, 1, &db), AT_ERR_CACHE);
  assert_non_null(strstr(at_last_error(), "empty"));
  TU_OK(cache_open(p, 0, &db));
  assert_int_equal(cache_schema_version(db), CACHE_SCHEMA_VERSION);
  cache_env e = tu_h200_env("t1");
  cache_trial t = trial(shape(512, AT_MASK_NONE), "cudnn", CACHE_OK, 0.5);
  TU_OK(cache_put_trial(db, &e, &t));
  cache_close(db);
  TU_OK(cache_open(p, 1, &db));
  cache_close(db);
}

/* Writers that must not create: a missing file is an error naming it, as for readers. */
static void test_open_existing_refuses_a_missing_file(void **state)
{
  (void)state;
  const char *p = path_in_dir("absent.db");
  cache_db *db = NULL;
  assert_int_equal(cache_open(p, CACHE_WRITE_EXISTING, &db), AT_ERR_IO);
  assert_non_null(strstr(at_last_error(), p));
  assert_non_null(strstr(at_last_error(), "does not exist"));
  assert_int_not_equal(access(p, F_OK), 0);
  const char *e = path_in_dir("zero.db");
  FILE *f = fopen(e, "w");
  fclose(f);
  assert_int_equal(cache_open(e, CACHE_WRITE_EXISTING, &db), AT_ERR_CACHE);
  assert_non_null(strstr(at_last_error(), "empty"));
  struct stat st;
  assert_int_equal(stat(e, &st), 0);
  assert_int_equal(st.st_size, 0);
}

/* A version-1 file (no cubins table) with data migrates to version 2 and keeps its rows. */
static void test_migration_from_version_1_keeps_rows(void **state)
{
  (void)state;
  const char *p = path_in_dir("v1.db");
  cache_db *db;
  cache_env e = tu_h200_env("t1");
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
  assert_int_equal(cache_schema_version(db), CACHE_SCHEMA_VERSION);
  int found = 0;
  TU_OK(cache_find_trial(db, &e, &s, NULL, "fa2.kept", &found, NULL, NULL));
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
  cache_env e = tu_h200_env("t1");
  at_shape s = shape(1024, AT_MASK_CAUSAL_TL);
  cache_trial a = trial(s, "fa2.bf16.d128.causal.g4.bm128.bn64.w4.s2", CACHE_OK, 0.25);
  cache_trial b = trial(s, "fa2.bf16.d128.causal.g4.bm64.bn64.w4.s2", CACHE_CRASHED, NAN);
  snprintf(b.message, sizeof b.message, "CUDA_ERROR_ILLEGAL_ADDRESS");
  TU_OK(cache_put_trial(db, &e, &a));
  TU_OK(cache_put_trial(db, &e, &b));
  int found = 0, count = 0;
  cache_trial got;
  TU_OK(cache_find_trial(db, &e, &s, NULL, b.impl, &found, &got, NULL));
  assert_true(found);
  assert_int_equal(got.status, CACHE_CRASHED);
  assert_true(isnan(got.time_ms));
  assert_string_equal(got.message, "CUDA_ERROR_ILLEGAL_ADDRESS");
  assert_int_equal(got.shape.mask, AT_MASK_CAUSAL_TL);
  assert_int_equal(got.shape.kv_heads, 4);
  TU_OK(cache_find_trial(db, &e, &s, NULL, a.impl, &found, &got, NULL));
  assert_true(found && got.status == CACHE_OK && fabs(got.time_ms - 0.25) < 1e-12);
  TU_OK(cache_count_trials(db, &e, &s, NULL, &count));
  assert_int_equal(count, 2);
  /* Another template version does not see these rows. */
  cache_env e2 = e;
  snprintf(e2.template_version, sizeof e2.template_version, "t2");
  TU_OK(cache_find_trial(db, &e2, &s, NULL, a.impl, &found, NULL, NULL));
  assert_false(found);
  /* Rewriting a trial (a --force rerun) replaces it. */
  a.time_ms = 0.2;
  TU_OK(cache_put_trial(db, &e, &a));
  TU_OK(cache_count_trials(db, &e, &s, NULL, &count));
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
  TU_OK(cache_get_best(db, "NVIDIA H200", &s, NULL, &got, &found));
  assert_true(found);
  assert_string_equal(got.impl, "fa2.faster");
  assert_int_equal(got.cubin_size, 7);
  assert_memory_equal(got.cubin, "\x7f" "ELF", 4);
  assert_true(fabs(got.cudnn_ms - 1.6) < 1e-12);
  cache_best_clear(&got);
  TU_OK(cache_get_best(db, "NVIDIA A100", &s, NULL, &got, &found));
  assert_false(found);
  cache_close(db);
}

/* Which results another cuDNN or NVRTC makes stale, and the words that say so. */
static void test_staleness_against_cudnn_and_nvrtc(void **state)
{
  (void)state;
  cache_env now = tu_h200_env("t1"), old_cudnn = tu_h200_env("t1"), old_nvrtc = tu_h200_env("t1"), no_cudnn = tu_h200_env("t1"), unknown = tu_h200_env("t1");
  snprintf(old_cudnn.cudnn, sizeof old_cudnn.cudnn, "9.14.0");
  snprintf(old_nvrtc.nvrtc, sizeof old_nvrtc.nvrtc, "12.8");
  no_cudnn.cudnn[0] = '\0';
  char why[256];
  const char *fa2 = "fa2.bf16.d128.none.g1.bm128.bn64.w4.s2";
  /* Trials: cuDNN's by the cuDNN version, every other by the NVRTC version. */
  assert_true(cache_trial_stale(&old_cudnn, &now, "cudnn", why, sizeof why));
  assert_non_null(strstr(why, "timed with cuDNN 9.14.0, this process has cuDNN 9.19.0"));
  assert_false(cache_trial_stale(&old_nvrtc, &now, "cudnn", why, sizeof why));
  assert_true(cache_trial_stale(&old_nvrtc, &now, fa2, why, sizeof why));
  assert_non_null(strstr(why, "compiled with NVRTC 12.8, this process has NVRTC 13.0"));
  assert_true(cache_trial_stale(&old_nvrtc, &now, "naive", why, sizeof why));
  assert_false(cache_trial_stale(&old_cudnn, &now, fa2, why, sizeof why));
  assert_string_equal(why, "");
  /* Best rows: either library changed, whichever won. */
  assert_true(cache_best_stale(&old_cudnn, &now, "cudnn", why, sizeof why));
  assert_non_null(strstr(why, "cuDNN measured fastest with cuDNN 9.14.0, this process has cuDNN 9.19.0"));
  assert_true(cache_best_stale(&old_cudnn, &now, fa2, why, sizeof why));
  assert_non_null(strstr(why, "compared with cuDNN 9.14.0, this process has cuDNN 9.19.0"));
  assert_true(cache_best_stale(&old_nvrtc, &now, fa2, why, sizeof why));
  assert_non_null(strstr(why, "kernels compiled with NVRTC 12.8, this process has NVRTC 13.0"));
  assert_true(cache_best_stale(&old_nvrtc, &now, "cudnn", why, sizeof why));
  assert_non_null(strstr(why, "against kernels compiled with NVRTC 12.8"));
  /* Tuned without cuDNN, now with it: never compared. */
  assert_true(cache_best_stale(&no_cudnn, &now, fa2, why, sizeof why));
  assert_non_null(strstr(why, "compared with no cuDNN"));
  /* A process without cuDNN or NVRTC cannot judge: nothing is stale. The driver never counts. */
  unknown.cudnn[0] = unknown.nvrtc[0] = '\0';
  assert_false(cache_best_stale(&old_cudnn, &unknown, "cudnn", NULL, 0));
  assert_false(cache_best_stale(&old_nvrtc, &unknown, fa2, NULL, 0));
  cache_env other_driver = tu_h200_env("t1");
  snprintf(other_driver.driver, sizeof other_driver.driver, "570.1");
  assert_false(cache_best_stale(&other_driver, &now, fa2, NULL, 0));
  assert_false(cache_best_stale(&now, &now, "cudnn", why, sizeof why));
}

/* A best row measured under another cuDNN is replaced by a retune even when the new time is
 * slower (the old time is not one this environment can have); among rows of one environment the
 * faster still wins. */
static void test_stale_best_is_replaced_by_a_slower_retune(void **state)
{
  (void)state;
  cache_db *db;
  TU_OK(cache_open(path_in_dir("stale-best.db"), 0, &db));
  at_shape s = shape(3072, AT_MASK_NONE);
  int stored = 0, found = 0;
  cache_best b = best(s, "cudnn", 1.0);
  snprintf(b.env.cudnn, sizeof b.env.cudnn, "9.14.0");
  TU_OK(cache_put_best(db, &b, &stored));
  assert_true(stored);
  b = best(s, "fa2.now-fastest", 1.2); /* tu_h200_env("t1"): cuDNN 9.19.0 */
  TU_OK(cache_put_best(db, &b, &stored));
  assert_true(stored);
  b = best(s, "fa2.slower", 1.3);
  TU_OK(cache_put_best(db, &b, &stored));
  assert_false(stored);
  cache_best got;
  TU_OK(cache_get_best(db, "NVIDIA H200", &s, NULL, &got, &found));
  assert_true(found);
  assert_string_equal(got.impl, "fa2.now-fastest");
  assert_string_equal(got.env.cudnn, "9.19.0");
  cache_best_clear(&got);
  TU_OK(cache_forget_best(db, &b.env, &s, NULL));
  TU_OK(cache_get_best(db, "NVIDIA H200", &s, NULL, &got, &found));
  assert_false(found);
  cache_close(db);
}

/* What tune asks of a shape done earlier: is any of its results stale here? */
static void test_shape_staleness_names_the_result(void **state)
{
  (void)state;
  cache_db *db;
  TU_OK(cache_open(path_in_dir("stale-shape.db"), 0, &db));
  cache_env now = tu_h200_env("t1"), old = tu_h200_env("t1");
  snprintf(old.cudnn, sizeof old.cudnn, "9.14.0");
  snprintf(old.nvrtc, sizeof old.nvrtc, "12.8");
  at_shape s = shape(640, AT_MASK_CAUSAL_TL);
  cache_trial variant = trial(s, "fa2.v", CACHE_OK, 0.4), cudnn = trial(s, "cudnn", CACHE_OK, 0.3);
  TU_OK(cache_put_trial(db, &old, &variant));
  int stale = 0, found = 0;
  char why[256];
  /* A generated kernel's trial alone is judged when a retune meets it, not here. */
  TU_OK(cache_shape_stale(db, &now, &s, NULL, &stale, why, sizeof why));
  assert_false(stale);
  TU_OK(cache_put_trial(db, &old, &cudnn));
  TU_OK(cache_shape_stale(db, &now, &s, NULL, &stale, why, sizeof why));
  assert_true(stale);
  assert_non_null(strstr(why, "trial cudnn: timed with cuDNN 9.14.0"));
  /* find_trial says where a trial was measured. */
  cache_env measured;
  TU_OK(cache_find_trial(db, &now, &s, NULL, "cudnn", &found, NULL, &measured));
  assert_true(found);
  assert_string_equal(measured.cudnn, "9.14.0");
  assert_string_equal(measured.nvrtc, "12.8");
  TU_OK(cache_put_trial(db, &now, &cudnn)); /* retimed */
  TU_OK(cache_shape_stale(db, &now, &s, NULL, &stale, why, sizeof why));
  assert_false(stale);
  /* The best row counts too, and a process that knows neither library judges nothing. */
  cache_best b = best(s, "cudnn", 0.3);
  b.env = old;
  TU_OK(cache_put_best(db, &b, NULL));
  TU_OK(cache_shape_stale(db, &now, &s, NULL, &stale, why, sizeof why));
  assert_true(stale);
  assert_non_null(strstr(why, "best cudnn: cuDNN measured fastest with cuDNN 9.14.0"));
  cache_env blind = now;
  blind.cudnn[0] = blind.nvrtc[0] = '\0';
  TU_OK(cache_shape_stale(db, &blind, &s, NULL, &stale, why, sizeof why));
  assert_false(stale);
  cache_close(db);
}

/* A serving shape's rows are its own: the same at_shape with a serving part is another key, which
 * reads back with that part; the done mark and the best row follow it. */
static void test_serving_rows_are_their_own_key(void **state)
{
  (void)state;
  cache_db *db;
  TU_OK(cache_open(path_in_dir("serving.db"), 0, &db));
  cache_env e = tu_h200_env("t1");
  at_shape s = shape(1024, AT_MASK_CAUSAL_BR);
  const char *ragged = ".qragged.kvragged.lq512.lkv512";
  cache_trial padded = trial(s, "fa2.x", CACHE_OK, 0.5), packed = trial(s, "fa2.x", CACHE_OK, 0.25);
  snprintf(packed.serving, sizeof packed.serving, "%s", ragged);
  TU_OK(cache_put_trial(db, &e, &padded));
  TU_OK(cache_put_trial(db, &e, &packed));
  int found = 0, count = 0, done = 0;
  cache_trial got;
  TU_OK(cache_find_trial(db, &e, &s, ragged, "fa2.x", &found, &got, NULL));
  assert_true(found && fabs(got.time_ms - 0.25) < 1e-12);
  assert_string_equal(got.serving, ragged);
  TU_OK(cache_find_trial(db, &e, &s, "", "fa2.x", &found, &got, NULL));
  assert_true(found && fabs(got.time_ms - 0.5) < 1e-12);
  assert_string_equal(got.serving, "");
  TU_OK(cache_count_trials(db, &e, &s, ragged, &count));
  assert_int_equal(count, 1);
  TU_OK(cache_mark_done(db, &e, &s, ragged));
  TU_OK(cache_is_done(db, &e, &s, NULL, &done));
  assert_int_equal(done, 0);
  TU_OK(cache_is_done(db, &e, &s, ragged, &done));
  assert_int_equal(done, 1);
  cache_best b = best(s, "fa2.rg", 0.25);
  snprintf(b.serving, sizeof b.serving, "%s", ragged);
  TU_OK(cache_put_best(db, &b, NULL));
  cache_best row;
  TU_OK(cache_get_best(db, "NVIDIA H200", &s, NULL, &row, &found));
  assert_false(found);
  TU_OK(cache_get_best(db, "NVIDIA H200", &s, ragged, &row, &found));
  assert_true(found);
  assert_string_equal(row.serving, ragged);
  assert_string_equal(row.impl, "fa2.rg");
  cache_best_clear(&row);
  TU_OK(cache_forget_shape(db, &e, &s, ragged));
  TU_OK(cache_find_trial(db, &e, &s, ragged, "fa2.x", &found, NULL, NULL));
  assert_false(found);
  TU_OK(cache_find_trial(db, &e, &s, NULL, "fa2.x", &found, NULL, NULL));
  assert_true(found); /* the padded row is another shape's */
  cache_close(db);
}

static void test_resume_marks(void **state)
{
  (void)state;
  const char *p = path_in_dir("resume.db");
  cache_db *db;
  cache_env e = tu_h200_env("t1");
  at_shape s1 = shape(256, AT_MASK_NONE), s2 = shape(512, AT_MASK_NONE);
  TU_OK(cache_open(p, 0, &db));
  TU_OK(cache_mark_done(db, &e, &s1, NULL));
  cache_trial t = trial(s2, "fa2.x", CACHE_OK, 0.1);
  TU_OK(cache_put_trial(db, &e, &t));
  cache_close(db); /* as if the process died here */
  TU_OK(cache_open(p, 0, &db));
  int done = -1, found = 0;
  TU_OK(cache_is_done(db, &e, &s1, NULL, &done));
  assert_int_equal(done, 1);
  TU_OK(cache_is_done(db, &e, &s2, NULL, &done));
  assert_int_equal(done, 0);
  TU_OK(cache_find_trial(db, &e, &s2, NULL, "fa2.x", &found, NULL, NULL));
  assert_true(found);
  TU_OK(cache_forget_shape(db, &e, &s2, NULL));
  TU_OK(cache_find_trial(db, &e, &s2, NULL, "fa2.x", &found, NULL, NULL));
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
  cache_env e = tu_h200_env("t1");
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
  TU_OK(cache_get_best(db, "NVIDIA H200", &s1, NULL, &got, &found));
  assert_string_equal(got.impl, "from-a-fast");
  cache_best_clear(&got);
  TU_OK(cache_get_best(db, "NVIDIA H200", &s2, NULL, &got, &found));
  assert_string_equal(got.impl, "from-b-fast");
  cache_best_clear(&got);
  TU_OK(cache_each_best(db, NULL, count_best, &n));
  assert_int_equal(n, 3);
  TU_OK(cache_find_trial(db, &e, &s1, NULL, "from-a-fast", &found, NULL, NULL));
  assert_true(found);
  TU_OK(cache_find_trial(db, &e, &s2, NULL, "from-b-fast", &found, NULL, NULL));
  assert_true(found);
  cache_close(db);
  /* Merging a missing file names it. */
  const char *bad[] = {path_in_dir("nope.db")};
  assert_int_equal(cache_merge(bad, 1, c), AT_ERR_IO);
  assert_non_null(strstr(at_last_error(), "nope.db"));
}

/* Rows of one key measured with different cuDNN versions do not compare: the later one wins a
 * merge, even when slower; rows of one cuDNN still compare by time. */
static void test_merge_prefers_the_later_of_other_versions(void **state)
{
  (void)state;
  const char *old_path = path_in_dir("old-cudnn.db"), *new_path = path_in_dir("new-cudnn.db");
  cache_db *db;
  at_shape s1 = shape(1536, AT_MASK_NONE), s2 = shape(2560, AT_MASK_NONE);
  cache_env old_env = tu_h200_env("t1"), new_env = tu_h200_env("t1");
  snprintf(old_env.cudnn, sizeof old_env.cudnn, "9.14.0");
  cache_best x;
  cache_trial t;
  TU_OK(cache_open(old_path, 0, &db));
  x = best(s1, "cudnn", 1.0), x.env = old_env; /* fast, under the old cuDNN */
  TU_OK(cache_put_best(db, &x, NULL));
  t = trial(s1, "cudnn", CACHE_OK, 1.0);
  TU_OK(cache_put_trial(db, &old_env, &t));
  x = best(s2, "fa2.same-version-slow", 2.0);
  TU_OK(cache_put_best(db, &x, NULL));
  cache_close(db);
  raw_exec(old_path, "UPDATE best SET updated_at = '2020-01-01T00:00:00Z'; "
                     "UPDATE trials SET created_at = '2020-01-01T00:00:00Z'");
  TU_OK(cache_open(new_path, 0, &db));
  x = best(s1, "fa2.retuned", 1.2), x.env = new_env; /* slower, under the new cuDNN, later */
  TU_OK(cache_put_best(db, &x, NULL));
  t = trial(s1, "cudnn", CACHE_OK, 1.3);
  TU_OK(cache_put_trial(db, &new_env, &t));
  x = best(s2, "fa2.same-version-fast", 1.5);
  TU_OK(cache_put_best(db, &x, NULL));
  cache_close(db);
  /* Both directions: into the old file, and the old file into a copy of the new one. */
  const char *ins[] = {new_path};
  TU_OK(cache_merge(ins, 1, old_path));
  const char *other = path_in_dir("merged-other-way.db"), *ins2[] = {new_path, old_path};
  TU_OK(cache_merge(ins2, 2, other));
  const char *outs[] = {old_path, other};
  for (int i = 0; i < 2; i++) {
    cache_best got;
    cache_trial tr;
    cache_env measured;
    int found = 0;
    TU_OK(cache_open(outs[i], 1, &db));
    TU_OK(cache_get_best(db, "NVIDIA H200", &s1, NULL, &got, &found));
    assert_true(found);
    assert_string_equal(got.impl, "fa2.retuned");
    assert_string_equal(got.env.cudnn, "9.19.0");
    cache_best_clear(&got);
    TU_OK(cache_get_best(db, "NVIDIA H200", &s2, NULL, &got, &found));
    assert_string_equal(got.impl, "fa2.same-version-fast");
    cache_best_clear(&got);
    TU_OK(cache_find_trial(db, &new_env, &s1, NULL, "cudnn", &found, &tr, &measured));
    assert_true(found);
    assert_string_equal(measured.cudnn, "9.19.0");
    assert_true(fabs(tr.time_ms - 1.3) < 1e-12);
    cache_close(db);
  }
}

static void test_prune_drops_stale_template_rows(void **state)
{
  (void)state;
  cache_db *db;
  TU_OK(cache_open(path_in_dir("prune.db"), 0, &db));
  cache_env old = tu_h200_env("t1"), cur = tu_h200_env("t1");
  snprintf(old.template_version, sizeof old.template_version, "t0");
  at_shape s = shape(128, AT_MASK_NONE);
  cache_trial t = trial(s, "fa2.y", CACHE_OK, 0.01);
  TU_OK(cache_put_trial(db, &old, &t));
  TU_OK(cache_put_trial(db, &cur, &t));
  int removed = 0, found = 0;
  TU_OK(cache_prune(db, "t1", &removed));
  assert_int_equal(removed, 1);
  TU_OK(cache_find_trial(db, &cur, &s, NULL, "fa2.y", &found, NULL, NULL));
  assert_true(found);
  TU_OK(cache_find_trial(db, &old, &s, NULL, "fa2.y", &found, NULL, NULL));
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
  cache_env e = tu_h200_env("t1");
  for (int i = 0; i < 50; i++) {
    cache_trial t = trial(shape(64 + i, AT_MASK_NONE), "w", CACHE_OK, 1.0);
    TU_OK(cache_put_trial(i % 2 ? a : b, &e, &t));
  }
  int count = 0;
  at_shape s = shape(64 + 49, AT_MASK_NONE);
  TU_OK(cache_count_trials(a, &e, &s, NULL, &count));
  assert_int_equal(count, 1);
  /* The first to close leaves WAL mode to the other, at once (no wait on its lock). */
  time_t t0 = time(NULL);
  cache_close(a);
  assert_true(time(NULL) - t0 < 5);
  char mode[16];
  journal_mode(p, mode, sizeof mode);
  assert_string_equal(mode, "wal");
  cache_trial last = trial(shape(1, AT_MASK_NONE), "w", CACHE_OK, 1.0);
  TU_OK(cache_put_trial(b, &e, &last));
  cache_close(b);
  journal_mode(p, mode, sizeof mode);
  assert_string_equal(mode, "delete");
  TU_OK(cache_open(p, 1, &a));
  TU_OK(cache_count_trials(a, &e, &last.shape, NULL, &count));
  assert_int_equal(count, 1);
  cache_close(a);
}

/* Eight processes, as `tune --devices all` runs on an 8-GPU host (one writer connection per GPU
 * thread) and as 8 shards writing one shared file would: each opens the file at the same time,
 * writes its own shapes' trials, best rows and done marks one transaction at a time, and closes
 * at about the same moment. No write fails with "database is locked", no row is lost, and the
 * file alone holds every row once the last writer has closed. */
static void test_eight_writers_lose_nothing(void **state)
{
  (void)state;
  enum { WRITERS = 8, SHAPES = 12, IMPLS = 5 };
  const char *p = path_in_dir("eight.db");
  for (int w = 0; w < WRITERS; w++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid > 0) continue;
    cache_db *db;
    cache_env e = tu_h200_env("t1");
    if (cache_open(p, CACHE_WRITE, &db) != AT_OK) {
      fprintf(stderr, "writer %d: open: %s\n", w, at_last_error());
      _exit(1);
    }
    for (int i = 0; i < SHAPES; i++) {
      const at_shape s = shape(64 * (w * SHAPES + i + 1), AT_MASK_CAUSAL_TL);
      for (int k = 0; k < IMPLS; k++) {
        char impl[32];
        snprintf(impl, sizeof impl, "fa3.w%d.k%d", w, k);
        cache_trial t = trial(s, impl, CACHE_OK, 1.0 + k);
        if (cache_put_trial(db, &e, &t) != AT_OK) {
          fprintf(stderr, "writer %d: trial: %s\n", w, at_last_error());
          _exit(2);
        }
      }
      char impl[32];
      snprintf(impl, sizeof impl, "fa3.w%d.k0", w);
      cache_best b = best(s, impl, 1.0);
      if (cache_put_best(db, &b, NULL) != AT_OK || cache_mark_done(db, &e, &s, NULL) != AT_OK) {
        fprintf(stderr, "writer %d: best: %s\n", w, at_last_error());
        _exit(3);
      }
      usleep((useconds_t)(1000 * ((w * 7 + i) % 5))); /* the writers interleave differently */
    }
    cache_close(db);
    _exit(0);
  }
  for (int w = 0; w < WRITERS; w++) {
    int status = 0;
    assert_true(wait(&status) > 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  assert_int_equal(raw_int(p, "SELECT count(*) FROM trials"), WRITERS * SHAPES * IMPLS);
  assert_int_equal(raw_int(p, "SELECT count(*) FROM best"), WRITERS * SHAPES);
  /* Writers closing at the same moment may each see the other still open and leave the file in
   * WAL mode (leave_wal's switch fails at once, by design), but the last connection's close
   * checkpoints: no -wal with rows is left, so the file alone holds every result. */
  char side[400];
  snprintf(side, sizeof side, "%s-wal", p);
  struct stat st;
  assert_true(stat(side, &st) != 0 || st.st_size == 0);
  cache_db *db;
  TU_OK(cache_open(p, CACHE_READ, &db));
  cache_env e = tu_h200_env("t1");
  for (int w = 0; w < WRITERS; w++)
    for (int i = 0; i < SHAPES; i++) {
      const at_shape s = shape(64 * (w * SHAPES + i + 1), AT_MASK_CAUSAL_TL);
      int done = 0, n = 0;
      TU_OK(cache_is_done(db, &e, &s, NULL, &done));
      TU_OK(cache_count_trials(db, &e, &s, NULL, &n));
      assert_int_equal(done, 1);
      assert_int_equal(n, IMPLS);
    }
  cache_close(db);
}

/* A writer that closes while a reader still has the file open cannot leave WAL mode, but its
 * results are in the file itself, the -wal emptied: the file alone can be copied and shipped. */
static void test_writer_closing_before_a_reader(void **state)
{
  (void)state;
  const char *p = path_in_dir("reader-last.db");
  cache_db *w, *r;
  TU_OK(cache_open(p, 0, &w));
  cache_close(w);
  TU_OK(cache_open(p, 0, &w));
  TU_OK(cache_open(p, 1, &r));
  cache_env e = tu_h200_env("t1");
  cache_trial t = trial(shape(96, AT_MASK_NONE), "fa2.before-reader", CACHE_OK, 0.4);
  TU_OK(cache_put_trial(w, &e, &t));
  cache_close(w);
  char mode[16], side[400];
  journal_mode(p, mode, sizeof mode);
  assert_string_equal(mode, "wal");
  snprintf(side, sizeof side, "%s-wal", p);
  struct stat st;
  assert_true(stat(side, &st) != 0 || st.st_size == 0);
  char uri[400];
  snprintf(uri, sizeof uri, "file:%s?immutable=1", p);
  sqlite3 *raw;
  sqlite3_stmt *q;
  assert_int_equal(sqlite3_open_v2(uri, &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(raw, "SELECT count(*) FROM trials WHERE impl = 'fa2.before-reader'", -1, &q, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(q), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(q, 0), 1);
  sqlite3_finalize(q);
  sqlite3_close(raw);
  int found = 0;
  TU_OK(cache_find_trial(r, &e, &t.shape, NULL, t.impl, &found, NULL, NULL));
  assert_true(found);
  cache_close(r);
}

/* ---- a cache in a folder the reader cannot write (a container image, a read-only volume) ---- */

typedef struct ro_case {
  const char *path;
  int expect_ok;          /* else cache_open must fail naming expect_in_message */
  const char *expect_in_message;
  const char *trial_impl; /* a trial that must be read back ("" for none) */
} ro_case;

static int read_cases(void *arg)
{
  const ro_case *cases = arg;
  int failures = 0;
  for (const ro_case *k = cases; k->path; k++) {
    cache_db *db = NULL;
    at_status rc = cache_open(k->path, 1, &db);
    if (!k->expect_ok) {
      if (rc == AT_OK || !strstr(at_last_error(), k->expect_in_message)) {
        fprintf(stderr, "%s: expected a refusal naming '%s', got %s: %s\n", k->path, k->expect_in_message,
                at_status_name(rc), at_last_error());
        failures++;
      }
      cache_close(db);
      continue;
    }
    if (rc != AT_OK) {
      fprintf(stderr, "%s: %s\n", k->path, at_last_error());
      failures++;
      continue;
    }
    cache_best got;
    int found = 0, n = 0;
    at_shape s = shape(1024, AT_MASK_CAUSAL_TL);
    void *cubin = NULL;
    size_t size = 0;
    if ((rc = cache_get_best(db, "NVIDIA H200", &s, NULL, &got, &found)) != AT_OK || !found ||
        strcmp(got.impl, "fa2.shipped") != 0 || got.cubin_size != 7) {
      fprintf(stderr, "%s: best row not read back (%s: %s)\n", k->path, at_status_name(rc), at_last_error());
      failures++;
    }
    cache_best_clear(&got);
    if (cache_each_best(db, NULL, count_best, &n) != AT_OK || n != 1) failures++;
    if (cache_get_cubin(db, "fa2.shipped", "sm_90a", "t1", &cubin, &size, &found) != AT_OK || !found) {
      fprintf(stderr, "%s: cubin not read back: %s\n", k->path, at_last_error());
      failures++;
    }
    free(cubin);
    if (k->trial_impl[0]) {
      cache_env e = tu_h200_env("t1");
      if (cache_find_trial(db, &e, &s, NULL, k->trial_impl, &found, NULL, NULL) != AT_OK || !found) {
        fprintf(stderr, "%s: trial %s not read back: %s\n", k->path, k->trial_impl, at_last_error());
        failures++;
      }
    }
    cache_close(db);
  }
  return failures ? 1 : 0;
}

static void write_shipped(const char *p)
{
  cache_db *db;
  TU_OK(cache_open(p, 0, &db));
  cache_best b = best(shape(1024, AT_MASK_CAUSAL_TL), "fa2.shipped", 0.5);
  TU_OK(cache_put_best(db, &b, NULL));
  cache_close(db);
}

static void test_read_only_directory(void **state)
{
  (void)state;
  char dir[320], clean[400], wal[400], killed[400], no_shm[400], side[420];
  snprintf(dir, sizeof dir, "%s/ro", g_dir);
  assert_int_equal(chmod(g_dir, 0711), 0);
  assert_int_equal(mkdir(dir, 0755), 0);
  /* What a writer leaves when it closes the file. */
  snprintf(clean, sizeof clean, "%s/clean.db", dir);
  write_shipped(clean);
  /* A file in WAL mode without -wal or -shm (an older attntune's, or sqlite3's). */
  snprintf(wal, sizeof wal, "%s/wal.db", dir);
  write_shipped(wal);
  raw_exec(wal, "PRAGMA journal_mode = WAL");
  /* A writer killed with committed rows still in its -wal (and its -shm beside it). */
  snprintf(killed, sizeof killed, "%s/killed.db", dir);
  write_shipped(killed);
  pid_t pid = fork();
  if (pid == 0) {
    cache_db *db;
    cache_env e = tu_h200_env("t1");
    cache_trial t = trial(shape(1024, AT_MASK_CAUSAL_TL), "fa2.in-wal", CACHE_OK, 0.6);
    if (cache_open(killed, 0, &db) != AT_OK || cache_put_trial(db, &e, &t) != AT_OK) _exit(1);
    _exit(0); /* no close: the row lives in killed.db-wal */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  snprintf(side, sizeof side, "%s-wal", killed);
  assert_int_equal(access(side, F_OK), 0);
  /* The same with its -shm lost: the -wal's rows cannot be read, and are not silently dropped. */
  snprintf(no_shm, sizeof no_shm, "%s/no-shm.db", dir);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s' && cp '%s-wal' '%s-wal'", killed, no_shm, killed, no_shm);
  assert_int_equal(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "chmod 0444 '%s'/* && chmod 0555 '%s'", dir, dir);
  assert_int_equal(system(cmd), 0);
  const ro_case cases[] = {{clean, 1, "", ""},
                           {wal, 1, "", ""},
                           {killed, 1, "", "fa2.in-wal"},
                           {no_shm, 0, "no-shm.db-wal", ""},
                           {NULL, 0, NULL, NULL}};
  int rc = tu_without_write_access(dir, read_cases, (void *)cases);
  snprintf(cmd, sizeof cmd, "chmod 0755 '%s' && chmod 0644 '%s'/*", dir, dir);
  assert_int_equal(system(cmd), 0);
  if (rc == 77) skip();
  assert_int_equal(rc, 0);
}

/* ---- merge: all or nothing, never into one of its inputs -------------------------------------- */

static void write_one_best(const char *p, int t, const char *impl, double ms)
{
  cache_db *db;
  TU_OK(cache_open(p, 0, &db));
  cache_best b = best(shape(t, AT_MASK_NONE), impl, ms);
  TU_OK(cache_put_best(db, &b, NULL));
  cache_env e = tu_h200_env("t1");
  cache_trial tr = trial(shape(t, AT_MASK_NONE), impl, CACHE_OK, ms);
  TU_OK(cache_put_trial(db, &e, &tr));
  cache_close(db);
}

static void test_merge_refuses_an_input_as_output(void **state)
{
  (void)state;
  const char *a = path_in_dir("in-a.db"), *b = path_in_dir("in-b.db");
  const char *hard = path_in_dir("in-a-link.db"), *soft = path_in_dir("in-a-symlink.db");
  write_one_best(a, 64, "from-a", 1.0);
  write_one_best(b, 128, "from-b", 1.0);
  assert_int_equal(link(a, hard), 0);
  assert_int_equal(symlink(a, soft), 0);
  size_t n;
  char *before = tu_slurp(a, &n);
  /* By name, by a hard link among the inputs, and by a symbolic link as the output. */
  const char *const named[] = {b, a}, *const linked[] = {b, hard}, *const plain[] = {a};
  struct { const char *const *inputs; int n; const char *into, *named; } cases[] = {
      {named, 2, a, a}, {linked, 2, a, hard}, {plain, 1, soft, soft}};
  for (int i = 0; i < 3; i++) {
    time_t t0 = time(NULL);
    assert_int_equal(cache_merge(cases[i].inputs, cases[i].n, cases[i].into), AT_ERR_INVALID);
    assert_true(time(NULL) - t0 < 5);
    assert_non_null(strstr(at_last_error(), cases[i].named));
    assert_non_null(strstr(at_last_error(), "is also an input"));
    tu_assert_file_unchanged(a, before, n);
  }
  free(before);
}

/* A merge that fails part-way (the second input's pages are damaged) leaves the output as it
 * was and no temporary file beside it. */
static void test_merge_is_all_or_nothing(void **state)
{
  (void)state;
  const char *out = path_in_dir("whole.db"), *a = path_in_dir("whole-a.db"), *cut = path_in_dir("damaged.db");
  write_one_best(out, 32, "already-there", 1.0);
  write_one_best(a, 64, "from-a", 1.0);
  cache_db *db;
  TU_OK(cache_open(cut, 0, &db));
  cache_close(db);
  int schema_pages = raw_int(cut, "PRAGMA page_count"), page_size = raw_int(cut, "PRAGMA page_size");
  TU_OK(cache_open(cut, 0, &db));
  cache_env e = tu_h200_env("t1");
  for (int i = 0; i < 300; i++) {
    cache_trial t = trial(shape(100 + i, AT_MASK_NONE), "fa2.cut", CACHE_OK, 1.0);
    memset(t.message, 'x', 400);
    TU_OK(cache_put_trial(db, &e, &t));
  }
  cache_close(db);
  /* Damaged in transfer: the schema's pages survive, the rows' pages are overwritten. */
  size_t cut_size;
  char *bytes = tu_slurp(cut, &cut_size);
  assert_true(cut_size > (size_t)(schema_pages + 4) * (size_t)page_size);
  memset(bytes + (size_t)schema_pages * (size_t)page_size, 0xab, cut_size - (size_t)schema_pages * (size_t)page_size);
  FILE *w = fopen(cut, "wb");
  assert_non_null(w);
  assert_int_equal(fwrite(bytes, 1, cut_size, w), cut_size);
  fclose(w);
  free(bytes);
  TU_OK(cache_open(cut, 1, &db));
  cache_close(db);
  size_t n;
  char *before = tu_slurp(out, &n);
  const char *const inputs[] = {a, cut};
  assert_int_not_equal(cache_merge(inputs, 2, out), AT_OK);
  printf("    the merge failed: %s\n", at_last_error());
  tu_assert_file_unchanged(out, before, n);
  assert_non_null(strstr(at_last_error(), cut));
  free(before);
  char cmd[600], listing[4096] = "";
  snprintf(cmd, sizeof cmd, "ls -a '%s' | grep '^whole\\.db' | tr '\\n' ' '", g_dir);
  FILE *ls = popen(cmd, "r");
  assert_non_null(ls);
  size_t got = fread(listing, 1, sizeof listing - 1, ls);
  listing[got] = '\0';
  pclose(ls);
  assert_string_equal(listing, "whole.db ");
  /* Without the cut file the same merge goes through, keeping what the output held. */
  const char *const good[] = {a};
  TU_OK(cache_merge(good, 1, out));
  TU_OK(cache_open(out, 1, &db));
  int count = 0;
  TU_OK(cache_each_best(db, NULL, count_best, &count));
  assert_int_equal(count, 2);
  cache_close(db);
}

/* A cache whose schema gained a view or trigger (a hostile file: 'best' replaced by a view over an
 * endless recursive query hung every reader) is refused before any row is read, writable or not. */
static void test_views_and_triggers_are_refused(void **state)
{
  (void)state;
  static const char *const EXTRA[] = {
      "CREATE VIEW extra AS SELECT 1",
      "CREATE TRIGGER extra AFTER INSERT ON done BEGIN SELECT 1; END",
      "DROP TABLE best; CREATE VIEW best AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
      "SELECT * FROM r",
  };
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "hostile-%d.db", i);
    const char *p = path_in_dir(name);
    cache_db *db = NULL;
    TU_OK(cache_open(p, CACHE_WRITE, &db));
    cache_close(db);
    sqlite3 *raw = NULL;
    assert_int_equal(sqlite3_open(p, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, EXTRA[i], NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(cache_open(p, CACHE_READ, &db), AT_ERR_CACHE);
    assert_non_null(strstr(at_last_error(), "view(s) or trigger(s)"));
    assert_int_equal(cache_open(p, CACHE_WRITE, &db), AT_ERR_CACHE);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema_created_with_version_and_wal),
      cmocka_unit_test(test_newer_schema_and_foreign_files_are_refused),
      cmocka_unit_test(test_foreign_sqlite_files_are_refused_and_left_alone),
      cmocka_unit_test(test_views_and_triggers_are_refused),
      cmocka_unit_test(test_empty_file_becomes_a_cache),
      cmocka_unit_test(test_open_existing_refuses_a_missing_file),
      cmocka_unit_test(test_migration_from_version_1_keeps_rows),
      cmocka_unit_test(test_trials_round_trip_and_replace),
      cmocka_unit_test(test_best_keeps_the_faster),
      cmocka_unit_test(test_staleness_against_cudnn_and_nvrtc),
      cmocka_unit_test(test_stale_best_is_replaced_by_a_slower_retune),
      cmocka_unit_test(test_shape_staleness_names_the_result),
      cmocka_unit_test(test_resume_marks),
      cmocka_unit_test(test_serving_rows_are_their_own_key),
      cmocka_unit_test(test_merge_keeps_better_per_key),
      cmocka_unit_test(test_merge_prefers_the_later_of_other_versions),
      cmocka_unit_test(test_prune_drops_stale_template_rows),
      cmocka_unit_test(test_two_writers_share_a_file),
      cmocka_unit_test(test_eight_writers_lose_nothing),
      cmocka_unit_test(test_writer_closing_before_a_reader),
      cmocka_unit_test(test_read_only_directory),
      cmocka_unit_test(test_merge_refuses_an_input_as_output),
      cmocka_unit_test(test_merge_is_all_or_nothing),
  };
  return TU_RUN_GROUP(tests, make_dir, remove_dir);
}
