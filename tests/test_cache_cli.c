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
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache/cache.h"
#include "tests/testutil.h"
#include "generator/generator.h"
#include "tuner/tune.h"

static char g_dir[256], g_a[320], g_b[320];
static char g_out[1 << 16];

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
  cache_env now = tu_h200_env(current), old = tu_h200_env("tpl-000000000000");
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

/* A ragged or paged shape's rows carry their layout in the shape column of every listing, so
 * they are never read as the padded shape's. */
static void test_serving_rows_keep_their_layout(void **state)
{
  (void)state;
  char path[320], current[96];
  snprintf(path, sizeof path, "%s/serving.db", g_dir);
  gen_templates_version(current, sizeof current);
  const cache_env now = tu_h200_env(current);
  const char *serving = ".qragged.kvragged.lq128.lkv128";
  cache_db *db;
  TU_OK(cache_open(path, CACHE_WRITE, &db));
  cache_trial tr;
  memset(&tr, 0, sizeof tr);
  tr.shape = shape(256);
  snprintf(tr.serving, sizeof tr.serving, "%s", serving);
  snprintf(tr.impl, sizeof tr.impl, "fa2.bf16.rg.d128.causal.g1.bm128.bn64.w8.s2");
  tr.status = CACHE_OK, tr.time_ms = 0.02, tr.tflops = 50, tr.err_naive = 2e-3, tr.err_cudnn = NAN;
  tr.registers = 180, tr.reps = 10;
  TU_OK(cache_put_trial(db, &now, &tr));
  cache_best b;
  memset(&b, 0, sizeof b);
  b.shape = tr.shape, b.env = now;
  snprintf(b.serving, sizeof b.serving, "%s", serving);
  snprintf(b.impl, sizeof b.impl, "%s", tr.impl);
  b.time_ms = 0.02, b.tflops = 50, b.cudnn_ms = 0.03, b.err_naive = 2e-3, b.err_cudnn = NAN;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  TU_OK(cache_put_best(db, &b, NULL));
  cache_close(db);
  const char *row = "b2.t256.s256.hq16.hkv16.d128.bf16.causal.qragged.kvragged.lq128.lkv128,";
  assert_int_equal(cli("cache export --format csv --trials --db '%s'", path), 0);
  assert_non_null(strstr(g_out, row));
  assert_int_equal(cli("cache export --format csv --db '%s'", path), 0);
  assert_non_null(strstr(g_out, row));
  assert_int_equal(cli("cache list --db '%s'", path), 0);
  assert_non_null(strstr(g_out, "causal.qragged.kvragged.lq128.lkv128 "));
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

/* `cache list` says which rows a library here would not use (other templates) and which it
 * would use but calls stale (another NVRTC), and why. cuDNN is made unloadable so that this
 * machine's cuDNN, whatever it is, judges nothing. */
static void test_list_marks_stale_rows(void **state)
{
  (void)state;
  char nvrtc[16], current[96], path[400];
  rt_nvrtc_version_text(nvrtc, sizeof nvrtc);
  if (!nvrtc[0]) skip(); /* no NVRTC here: nothing can be judged by it */
  gen_templates_version(current, sizeof current);
  snprintf(path, sizeof path, "%s/stale.db", g_dir);
  cache_env now = tu_h200_env(current), old_nvrtc = tu_h200_env(current), old_templates = tu_h200_env("tpl-000000000000");
  snprintf(now.nvrtc, sizeof now.nvrtc, "%s", nvrtc);
  snprintf(old_nvrtc.nvrtc, sizeof old_nvrtc.nvrtc, "1.0");
  add(path, &now, 512, "fa2.bf16.d128.causal.g1.bm128.bn64.w8.s2", 0.01, 0.02);
  add(path, &old_nvrtc, 1536, "fa2.bf16.d128.causal.g1.bm128.bn64.w8.s2", 0.1, 0.2);
  add(path, &old_templates, 2560, "fa2.bf16.d128.causal.g1.bm128.bn64.w8.s2", 0.3, 0.4);
  assert_int_equal(setenv("ATTNTUNE_CUDNN", "/nonexistent/libcudnn.so.9", 1), 0);
  int rc = cli("cache list --db '%s'", path);
  unsetenv("ATTNTUNE_CUDNN");
  assert_int_equal(rc, 0);
  char want[200];
  snprintf(want, sizeof want, "stale: kernels compiled with NVRTC 1.0, this process has NVRTC %s", nvrtc);
  int rows = 0;
  for (char *line = strtok(g_out, "\n"); line; line = strtok(NULL, "\n")) {
    if (strstr(line, "b2.t512.s512")) rows++, assert_null(strstr(line, "stale"));
    if (strstr(line, "b2.t1536.s1536")) rows++, assert_non_null(strstr(line, want));
    if (strstr(line, "b2.t2560.s2560"))
      rows++, assert_non_null(strstr(line, "not used: tuned with templates tpl-000000000000"));
  }
  assert_int_equal(rows, 3);
}

/* Caches of other schema versions: a newer one is refused with no talk of migrating (this
 * attntune cannot read it however it is opened); an older one, which readers do not change,
 * names the command that upgrades it, and that command does. */
static void test_other_schema_versions(void **state)
{
  (void)state;
  char newer[400], older[400];
  snprintf(newer, sizeof newer, "%s/newer.db", g_dir);
  snprintf(older, sizeof older, "%s/older.db", g_dir);
  cache_env now = tu_h200_env("t1");
  add(newer, &now, 1024, "fa2.x", 0.1, 0.2);
  add(older, &now, 1024, "fa2.y", 0.1, 0.2);
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(newer, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(raw);
  assert_int_equal(sqlite3_open(older, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw, "DROP TABLE cubins; PRAGMA user_version = 1", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(raw);
  static const char *const READERS[] = {"cache list --db '%s'", "cache export --format csv --db '%s'",
                                        "report --db '%s'", "cache migrate --db '%s'"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(cli(READERS[i], newer), 1);
    assert_non_null(strstr(g_out, "has cache schema version 99, newer than this attntune knows"));
    assert_non_null(strstr(g_out, "use a newer attntune"));
    assert_null(strstr(g_out, "migrate"));
  }
  assert_int_equal(cli("cache list --db '%s'", older), 1);
  assert_non_null(strstr(g_out, "has cache schema version 1, written by an older attntune"));
  char want[600];
  snprintf(want, sizeof want, "'attntune cache migrate --db %s'", older);
  assert_non_null(strstr(g_out, want));
  assert_int_equal(cli("cache migrate --db '%s'", older), 0);
  char moved[64];
  snprintf(moved, sizeof moved, "from cache schema version 1 to %d", CACHE_SCHEMA_VERSION);
  assert_non_null(strstr(g_out, moved));
  assert_int_equal(cli("cache list --db '%s'", older), 0);
  assert_non_null(strstr(g_out, "fa2.y")); /* the rows survived */
  assert_int_equal(cli("cache migrate --db '%s'", older), 0);
  snprintf(moved, sizeof moved, "at cache schema version %d already", CACHE_SCHEMA_VERSION);
  assert_non_null(strstr(g_out, moved));
  /* migrate, like prune, never creates a file. */
  assert_int_equal(cli("cache migrate --db '%s/absent.db'", g_dir), 1);
  assert_non_null(strstr(g_out, "does not exist"));
}

/* The shell command arg, in this (child) process. */
static int run_shell(void *arg)
{
  execl("/bin/sh", "sh", "-c", (const char *)arg, (char *)NULL);
  return 126;
}

/* `cache list`, `export` and `report` on a cache shipped in a folder the user cannot write: run
 * as uid 65534 (nobody) when root, else as this user with the folder at mode 0555. */
static void test_read_only_folder(void **state)
{
  (void)state;
  char top[320], ro[400], db[420], bin[420], self[512], cmd[4096];
  snprintf(top, sizeof top, "%s/shipped", g_dir);
  snprintf(ro, sizeof ro, "%s/ro", top);
  snprintf(db, sizeof db, "%s/report.db", ro);
  snprintf(bin, sizeof bin, "%s/attntune", top);
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(n > 0);
  self[n] = '\0';
  *strrchr(self, '/') = '\0';
  /* The binary is copied out so that the other user need not reach the build folder. */
  snprintf(cmd, sizeof cmd, "chmod 0711 '%s' && mkdir -m 0777 '%s' && mkdir '%s' && cp '%s' '%s' && "
           "cp '%s/../attntune' '%s' && chmod 0755 '%s' && chmod 0444 '%s' && chmod 0555 '%s'",
           g_dir, top, ro, g_a, db, self, bin, bin, db, ro);
  assert_int_equal(system(cmd), 0);
  static const char *const COMMANDS[] = {"cache list --db '%s'", "cache export --format csv --db '%s'",
                                         "report --db '%s'", "cache show b2.t1024.s1024.hq16.hkv16.d128.bf16.causal --db '%s'"};
  for (int i = 0; i < 4; i++) {
    char args[1024], run[4096], out_path[440];
    snprintf(args, sizeof args, COMMANDS[i], db);
    snprintf(out_path, sizeof out_path, "%s/out.txt", top);
    snprintf(run, sizeof run, "'%s' %s > '%s' 2>&1", bin, args, out_path);
    const int rc = tu_without_write_access(ro, run_shell, run);
    if (rc == 77) skip();
    size_t got = 0;
    char *out = tu_slurp(out_path, &got);
    assert_non_null(out);
    if (rc != 0) fail_msg("attntune %s as a reader without write access: %s", args, out);
    assert_non_null(strstr(out, i == 3 ? "fa2.bf16.d128.causal.g1.bm128.bn128.w8.s3" : "b2.t1024.s1024"));
    free(out);
  }
  snprintf(cmd, sizeof cmd, "ls -A '%s'", ro);
  FILE *ls = popen(cmd, "r");
  char listing[256] = "";
  size_t got = fread(listing, 1, sizeof listing - 1, ls);
  listing[got] = '\0';
  pclose(ls);
  assert_string_equal(listing, "report.db\n");
  snprintf(cmd, sizeof cmd, "chmod 0755 '%s'", ro);
  assert_int_equal(system(cmd), 0);
}

/* `merge B A --into A`: refused at once, naming A, and A is left as it was. */
static void test_merge_into_an_input(void **state)
{
  (void)state;
  size_t n;
  char *before = tu_slurp(g_a, &n);
  assert_non_null(before);
  time_t t0 = time(NULL);
  assert_int_equal(cli("cache merge '%s' '%s' --into '%s'", g_b, g_a, g_a), 2);
  assert_true(time(NULL) - t0 < 5);
  assert_non_null(strstr(g_out, g_a));
  assert_non_null(strstr(g_out, "is also an input"));
  tu_assert_file_unchanged(g_a, before, n);
  free(before);
  assert_int_equal(cli("cache list --db '%s'", g_a), 0);
  assert_null(strstr(g_out, "b2.t4096")); /* none of b's rows */
}

/* Other programs' files are not ours to write; a missing file is an error for every command but
 * merge's --into. */
static void test_foreign_and_missing_files(void **state)
{
  (void)state;
  char foreign[400], text[400], missing[400], fresh[400];
  snprintf(foreign, sizeof foreign, "%s/foreign.db", g_dir);
  snprintf(text, sizeof text, "%s/notes.txt", g_dir);
  snprintf(missing, sizeof missing, "%s/missing.db", g_dir);
  snprintf(fresh, sizeof fresh, "%s/fresh.db", g_dir);
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(foreign, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw, "CREATE TABLE contacts(name TEXT); INSERT INTO contacts VALUES ('x')",
                                NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(raw);
  FILE *f = fopen(text, "w");
  fputs("shopping list: milk, eggs, a SQLite book, and something long enough to be a header.......\n", f);
  fclose(f);
  size_t nf, nt;
  char *foreign_before = tu_slurp(foreign, &nf), *text_before = tu_slurp(text, &nt);
  const char *const files[] = {foreign, text};
  for (int i = 0; i < 2; i++) {
    const char *p = files[i];
    assert_int_equal(cli("cache prune --db '%s'", p), 1);
    assert_non_null(strstr(g_out, p));
    assert_non_null(strstr(g_out, "not an attntune cache"));
    assert_int_equal(cli("cache merge '%s' --into '%s'", g_a, p), 1);
    assert_non_null(strstr(g_out, p));
    assert_non_null(strstr(g_out, "not an attntune cache"));
    assert_int_equal(cli("cache merge '%s' --into '%s'", p, fresh), 1);
    assert_non_null(strstr(g_out, "not an attntune cache"));
    assert_int_not_equal(access(fresh, F_OK), 0);
    assert_int_equal(cli("cache list --db '%s'", p), 1);
    assert_non_null(strstr(g_out, "not an attntune cache"));
    assert_int_equal(cli("report --db '%s'", p), 1);
    assert_non_null(strstr(g_out, "not an attntune cache"));
  }
  tu_assert_file_unchanged(foreign, foreign_before, nf);
  tu_assert_file_unchanged(text, text_before, nt);
  free(foreign_before);
  free(text_before);
  static const char *const READERS_AND_PRUNE[] = {"cache prune --db '%s'", "cache list --db '%s'",
                                                  "cache export --format json --db '%s'", "report --db '%s'"};
  for (int i = 0; i < 4; i++) {
    char args[600];
    snprintf(args, sizeof args, READERS_AND_PRUNE[i], missing);
    assert_int_equal(cli("%s", args), 1);
    assert_non_null(strstr(g_out, missing));
    assert_non_null(strstr(g_out, "does not exist"));
    assert_int_not_equal(access(missing, F_OK), 0);
  }
  /* merge's --into may be new. */
  assert_int_equal(cli("cache merge '%s' --into '%s'", g_a, fresh), 0);
  assert_int_equal(cli("cache list --db '%s'", fresh), 0);
  assert_non_null(strstr(g_out, "b2.t1024.s1024"));
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
      cmocka_unit_test(test_serving_rows_keep_their_layout),
      cmocka_unit_test(test_merge_then_prune),
      cmocka_unit_test(test_list_marks_stale_rows),
      cmocka_unit_test(test_other_schema_versions),
      cmocka_unit_test(test_read_only_folder),
      cmocka_unit_test(test_merge_into_an_input),
      cmocka_unit_test(test_foreign_and_missing_files),
      cmocka_unit_test(test_tune_argument_errors),
  };
  return TU_RUN_GROUP(tests, setup, teardown);
}
