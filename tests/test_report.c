/*
 * test_report.c — `attntune report` from a real cache file built through the cache API (no GPU):
 * every format renders, the numbers are the ones the test computes itself, CSV and JSON parse
 * back, the HTML holds a chart of each kind with data and no network reference, and an empty
 * cache, another GPU model and a missing file give clear messages and exit codes (through the
 * attntune binary next to this test). An f32 shape, timed on the naive kernels only (no fused
 * kernel, cuDNN unsupported, no best row), shows its naive time in every format and stays out of
 * the geometric means; a cache of such shapes alone renders too.
 *
 * ATTNTUNE_REPORT_KEEP=DIR keeps the test cache and its HTML report there, to look at.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <ctype.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/cache.h"
#include "generator/generator.h"
#include "tests/testutil.h"
#include "tuner/report.h"
#include "tuner/tune.h"

/* cmocka 1.1 has no assert_double_equal. */
#define assert_near(a, b, eps)                                                                  \
  do {                                                                                         \
    double an_a_ = (a), an_b_ = (b);                                                           \
    if (!(fabs(an_a_ - an_b_) <= (eps))) fail_msg("%s = %.9g, expected %.9g", #a, an_a_, an_b_); \
  } while (0)

static char g_dir[256];
static char g_db[320];

#define H200 "NVIDIA H200"
#define A100 "NVIDIA A100-SXM4-80GB"

/* ---- the test cache ---------------------------------------------------------------------- */

/* What the test inserted for one shape, to compute the expected numbers independently. */
typedef struct expected {
  const char *gpu;
  at_shape shape;
  double tuned_ms, cudnn_ms; /* cudnn_ms NaN: cuDNN unsupported */
} expected;

static expected g_exp[64];
static int g_n_exp;

static cache_env env_of(const char *gpu)
{
  cache_env e;
  memset(&e, 0, sizeof e);
  snprintf(e.gpu_model, sizeof e.gpu_model, "%s", gpu);
  e.cc_major = strcmp(gpu, H200) == 0 ? 9 : 8, e.cc_minor = 0;
  e.sm_count = strcmp(gpu, H200) == 0 ? 132 : 108;
  snprintf(e.driver, sizeof e.driver, "580.159.04");
  snprintf(e.nvrtc, sizeof e.nvrtc, "13.0");
  snprintf(e.cudnn, sizeof e.cudnn, "9.19.0");
  snprintf(e.template_version, sizeof e.template_version, "tpl-test1");
  return e;
}

static at_shape mk(int b, int t, int s, int hq, int hkv, int d, at_dtype dt, at_mask m)
{
  return (at_shape){.batch = b, .q_len = t, .kv_len = s, .q_heads = hq, .kv_heads = hkv,
                    .head_dim = d, .dtype = dt, .mask = m};
}

static void put_trial(cache_db *db, const cache_env *e, at_shape s, const char *impl, cache_status st, double ms)
{
  cache_trial t;
  memset(&t, 0, sizeof t);
  t.shape = s;
  snprintf(t.impl, sizeof t.impl, "%s", impl);
  t.status = st;
  t.time_ms = ms;
  t.tflops = isfinite(ms) ? at_shape_flops(&s) / (ms * 1e-3) / 1e12 : NAN;
  t.err_naive = st == CACHE_OK ? 3e-3 : NAN, t.err_cudnn = st == CACHE_OK ? 2e-3 : NAN;
  t.registers = 128, t.spill_bytes = 0, t.smem_bytes = 49152, t.reps = 50;
  TU_OK(cache_put_trial(db, e, &t));
}

/* One shape: naive (optional), cuDNN (NaN: unsupported), two fa2 variants, a wrong one that is
 * faster (must be ignored) and the best row. */
static void put_shape(cache_db *db, const char *gpu, at_shape s, double tuned_ms, double cudnn_ms, double naive_ms)
{
  cache_env e = env_of(gpu);
  char variant[96];
  snprintf(variant, sizeof variant, "fa2.%s.d%d.%s.g%d.bm128.bn64.w4.s2", at_dtype_name(s.dtype), s.head_dim,
           at_mask_name(s.mask), s.q_heads / s.kv_heads);
  if (isfinite(naive_ms)) put_trial(db, &e, s, "naive", CACHE_OK, naive_ms);
  if (isfinite(cudnn_ms)) put_trial(db, &e, s, "cudnn", CACHE_OK, cudnn_ms);
  else put_trial(db, &e, s, "cudnn", CACHE_UNSUPPORTED, NAN);
  put_trial(db, &e, s, variant, CACHE_OK, tuned_ms);
  put_trial(db, &e, s, "fa2.slower.bm64.bn64.w4.s2", CACHE_OK, tuned_ms * 1.3);
  put_trial(db, &e, s, "fa2.wrong.bm64.bn32.w4.s2", CACHE_WRONG, tuned_ms * 0.5);
  put_trial(db, &e, s, "fa2.dropped.bm64.bn32.w2.s2", CACHE_DROPPED, tuned_ms * 0.9);
  cache_best b;
  memset(&b, 0, sizeof b);
  b.shape = s, b.env = e;
  /* As the tuner decides: cuDNN is never the best of an FP8 shape (tn_tune_cudnn_may_be_best). */
  int cudnn_wins = isfinite(cudnn_ms) && cudnn_ms < tuned_ms && tn_tune_cudnn_may_be_best(&s);
  snprintf(b.impl, sizeof b.impl, "%s", cudnn_wins ? "cudnn" : variant);
  b.time_ms = cudnn_wins ? cudnn_ms : tuned_ms;
  b.tflops = at_shape_flops(&s) / (b.time_ms * 1e-3) / 1e12;
  b.cudnn_ms = cudnn_ms, b.err_naive = 3e-3, b.err_cudnn = cudnn_wins ? NAN : 2e-3;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  int stored = 0;
  TU_OK(cache_put_best(db, &b, &stored));
  assert_true(stored);
  g_exp[g_n_exp++] = (expected){gpu, s, tuned_ms, cudnn_ms};
}

/* The f32 shapes: what the tuner records for them (tune.c): cuDNN unsupported, a naive trial,
 * no fa2 trial and no best row. */
#define F32_NAIVE_MS 0.0412
static void put_f32_shape(cache_db *db, const cache_env *e, at_shape s, double naive_ms)
{
  put_trial(db, e, s, "cudnn", CACHE_UNSUPPORTED, NAN);
  put_trial(db, e, s, "naive", CACHE_OK, naive_ms);
}

/* A plausible time: flops at rate TFLOP/s plus a launch floor. */
static double ms_at(at_shape s, double tflops)
{
  return at_shape_flops(&s) / (tflops * 1e12) * 1e3 + 0.004;
}

static void build_cache(void)
{
  cache_db *db;
  TU_OK(cache_open(g_db, 0, &db));
  /* T sweep, no mask: cuDNN's ratio to ours varies from 0.85 (cuDNN faster) to 1.35. */
  for (int i = 0, t = 64; t <= 2048; t *= 2, i++) {
    at_shape s = mk(2, t, t, 16, 16, 64, AT_DTYPE_BF16, AT_MASK_NONE);
    double tuned = ms_at(s, 250);
    put_shape(db, H200, s, tuned, tuned * (0.85 + 0.1 * i), tuned * 25);
  }
  /* Batch sweep at T = 256, causal. */
  for (int b = 1; b <= 16; b *= 2) {
    at_shape s = mk(b, 256, 256, 8, 8, 64, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL);
    double tuned = ms_at(s, 180);
    put_shape(db, H200, s, tuned, tuned * 1.1, tuned * 12);
  }
  /* MHA, GQA, MQA. */
  for (int hkv = 16; hkv >= 1; hkv /= 4) {
    at_shape s = mk(2, 1024, 1024, 16, hkv, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL);
    double tuned = ms_at(s, 300 + hkv);
    put_shape(db, H200, s, tuned, tuned * 0.95, NAN);
  }
  /* FP8 vs bf16, same shape. */
  at_shape s16 = mk(4, 2048, 2048, 16, 16, 128, AT_DTYPE_BF16, AT_MASK_NONE), s8 = s16;
  s8.dtype = AT_DTYPE_E4M3;
  put_shape(db, H200, s16, ms_at(s16, 320), ms_at(s16, 330), NAN);
  put_shape(db, H200, s8, ms_at(s8, 480), ms_at(s8, 560), NAN);
  /* cuDNN declines head dim 264. */
  at_shape big = mk(1, 512, 512, 8, 8, 264, AT_DTYPE_BF16, AT_MASK_NONE);
  put_shape(db, H200, big, ms_at(big, 90), NAN, NAN);
  /* Decode: T = 1, reported in TB/s of K/V too. */
  at_shape dec = mk(8, 1, 4096, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR);
  put_shape(db, H200, dec, 0.021, 0.025, NAN);
  /* A shape whose every kernel failed verification: trials only, no best row. */
  cache_env e = env_of(H200);
  at_shape failed = mk(1, 128, 128, 4, 4, 32, AT_DTYPE_F16, AT_MASK_NONE);
  put_trial(db, &e, failed, "fa2.f16.d32.none.g1.bm64.bn32.w4.s2", CACHE_WRONG, 0.01);
  put_trial(db, &e, failed, "cudnn", CACHE_OK, 0.012);
  /* f32, naive only; the same shape as the T sweep's T = 128 but for the dtype. */
  put_f32_shape(db, &e, mk(2, 128, 128, 16, 16, 64, AT_DTYPE_F32, AT_MASK_NONE), F32_NAIVE_MS);
  /* A second GPU model. */
  for (int t = 512; t <= 1024; t *= 2) {
    at_shape s = mk(2, t, t, 16, 16, 64, AT_DTYPE_BF16, AT_MASK_NONE);
    double tuned = ms_at(s, 150);
    put_shape(db, A100, s, tuned, tuned * 1.05, NAN);
  }
  cache_close(db);
}

static int setup(void **state)
{
  (void)state;
  const char *keep = getenv("ATTNTUNE_REPORT_KEEP");
  if (keep && keep[0]) snprintf(g_dir, sizeof g_dir, "%s", keep);
  else snprintf(g_dir, sizeof g_dir, "/tmp/attntune-test-report-XXXXXX");
  if (!(keep && keep[0]) && !mkdtemp(g_dir)) return -1;
  snprintf(g_db, sizeof g_db, "%s/report.db", g_dir);
  unlink(g_db);
  build_cache();
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  const char *keep = getenv("ATTNTUNE_REPORT_KEEP");
  if (keep && keep[0]) return 0;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- helpers ----------------------------------------------------------------------------- */

/* The report of a cache (gpu NULL: every model) in one format, as a malloc'd string. */
static char *render_from(const char *db_path, const char *gpu, tn_report_format format)
{
  tn_report r;
  char *text = NULL;
  size_t size = 0;
  TU_OK(tn_report_load(db_path, gpu, &r));
  FILE *f = open_memstream(&text, &size);
  assert_non_null(f);
  TU_OK(tn_report_write(&r, format, f, "memory"));
  assert_int_equal(fclose(f), 0);
  tn_report_free(&r);
  return text;
}

/* The report of the test cache. */
static char *render(const char *gpu, tn_report_format format) { return render_from(g_db, gpu, format); }

static int count_of(const char *hay, const char *needle)
{
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

static const expected *find_exp(at_shape s)
{
  char want[160], key[160];
  at_shape_key(&s, want, sizeof want);
  for (int i = 0; i < g_n_exp; i++) {
    at_shape_key(&g_exp[i].shape, key, sizeof key);
    if (strcmp(key, want) == 0) return &g_exp[i];
  }
  fail_msg("no expected row for %s", want);
  return NULL;
}

/* The geometric mean of cuDNN / tuned over the inserted shapes of one group; n of them, the
 * tuned kernel faster on won. */
static double expected_geomean(const char *gpu, at_dtype dtype, int head_dim, at_mask mask, int *n, int *won)
{
  double sum = 0;
  *n = *won = 0;
  for (int i = 0; i < g_n_exp; i++) {
    const expected *e = &g_exp[i];
    if (strcmp(e->gpu, gpu) || e->shape.dtype != dtype || e->shape.head_dim != head_dim ||
        e->shape.mask != mask || !isfinite(e->cudnn_ms))
      continue;
    sum += log(e->cudnn_ms / e->tuned_ms);
    ++*n;
    *won += e->tuned_ms < e->cudnn_ms;
  }
  return exp(sum / *n);
}

/* The line of text that holds needle (copied into line). */
static int line_with(const char *text, const char *needle, char *line, size_t size)
{
  const char *p = strstr(text, needle);
  if (!p) return 0;
  const char *start = p, *end = strchr(p, '\n');
  while (start > text && start[-1] != '\n') start--;
  if (!end) end = p + strlen(p);
  snprintf(line, size, "%.*s", (int)(end - start), start);
  return 1;
}

/* ---- text and markdown ------------------------------------------------------------------- */

static void check_numbers(const char *all)
{
  char key[160], want[32], line[1024];
  /* The A100 section comes first and has a shape and a group of the same names. */
  const char *text = strstr(all, "GPU " H200);
  assert_non_null(text);
  /* T = 1024 of the sweep: cuDNN / tuned = 0.85 + 0.1 * 4. */
  at_shape s = mk(2, 1024, 1024, 16, 16, 64, AT_DTYPE_BF16, AT_MASK_NONE);
  const expected *e = find_exp(s);
  at_shape_key(&s, key, sizeof key);
  snprintf(want, sizeof want, "%.2fx", e->cudnn_ms / e->tuned_ms);
  assert_true(line_with(text, key, line, sizeof line));
  assert_non_null(strstr(line, want));
  assert_non_null(strstr(line, "1.25x"));
  /* The group's geometric mean, computed here from what was inserted. */
  int n, won;
  double g = expected_geomean(H200, AT_DTYPE_BF16, 64, AT_MASK_NONE, &n, &won);
  assert_int_equal(n, 6);
  assert_int_equal(won, 4); /* 0.85 + 0.1 i: faster from i = 2 */
  snprintf(want, sizeof want, "%.2fx", g);
  assert_true(line_with(text, "bf16 d64 none", line, sizeof line));
  assert_non_null(strstr(line, want));
  assert_non_null(strstr(line, "6 of 6"));
  /* and how many of them the tuned kernel won: text "tuned faster on 4", md "| 4 of 6 |" */
  assert_true(strstr(line, "tuned faster on 4") || strstr(line, "| 4 of 6 |"));
  /* cuDNN unsupported is said, not printed as a number. */
  at_shape big = mk(1, 512, 512, 8, 8, 264, AT_DTYPE_BF16, AT_MASK_NONE);
  at_shape_key(&big, key, sizeof key);
  assert_true(line_with(text, key, line, sizeof line));
  assert_non_null(strstr(line, "unsupported"));
  assert_null(strstr(line, "nan"));
  /* Decode reports TB/s of K/V read: 2·B·Nkv·S·D·2 bytes / 0.021 ms (6.39). */
  at_shape dec = mk(8, 1, 4096, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR);
  at_shape_key(&dec, key, sizeof key);
  snprintf(want, sizeof want, " %.2f ", 2.0 * 8 * 8 * 4096 * 128 * 2 / 0.021e-3 / 1e12);
  assert_true(line_with(text, key, line, sizeof line));
  assert_non_null(strstr(line, want));
  /* The shape with no verified kernel is listed without a best. */
  assert_non_null(strstr(text, "b1.t128.s128.hq4.hkv4.d32.f16.none"));
  /* Header: models and versions. */
  assert_non_null(strstr(all, "GPU " A100));
  assert_non_null(strstr(text, "driver 580.159.04"));
  assert_non_null(strstr(text, "NVRTC 13.0"));
  assert_non_null(strstr(text, "cuDNN 9.19.0"));
  assert_non_null(strstr(text, "templates tpl-test1"));
  assert_null(strstr(all, "nan"));
  assert_null(strstr(all, "inf"));
}

static void test_text_has_the_numbers(void **state)
{
  (void)state;
  char *text = render(NULL, TN_REPORT_TEXT);
  check_numbers(text);
  assert_non_null(strstr(text, "20 shapes")); /* H200: 6 + 5 + 3 + 2 + 1 + 1 + 1 + 1 */
  assert_non_null(strstr(text, "2 shapes"));  /* A100 */
  free(text);
}

static void test_markdown_has_the_numbers(void **state)
{
  (void)state;
  char *text = render(NULL, TN_REPORT_MD);
  check_numbers(text);
  assert_non_null(strstr(text, "## GPU " H200));
  assert_non_null(strstr(text, "|---|---|---:|"));
  free(text);
}

/* ---- csv --------------------------------------------------------------------------------- */

/* Split one CSV line (no quoted fields in this report) into at most max fields. */
static int split_csv(char *line, char **fields, int max)
{
  int n = 0;
  for (char *p = line; n < max;) {
    fields[n++] = p;
    char *comma = strchr(p, ',');
    if (!comma) break;
    *comma = '\0';
    p = comma + 1;
  }
  return n;
}

static int column(char **header, int n, const char *name)
{
  for (int i = 0; i < n; i++)
    if (strcmp(header[i], name) == 0) return i;
  fail_msg("no CSV column '%s'", name);
  return -1;
}

static void test_csv_parses_back(void **state)
{
  (void)state;
  char *text = render(NULL, TN_REPORT_CSV);
  char *lines[64], *save = NULL;
  int n_lines = 0;
  for (char *l = strtok_r(text, "\n", &save); l && n_lines < 64; l = strtok_r(NULL, "\n", &save))
    lines[n_lines++] = l;
  assert_int_equal(n_lines, 1 + 20 + 2); /* header, H200, A100 */
  char *head[40], *f[40];
  int n_cols = split_csv(lines[0], head, 40);
  assert_int_equal(n_cols, 28);
  int c_shape = column(head, n_cols, "shape"), c_speed = column(head, n_cols, "speedup_tuned");
  int c_cudnn = column(head, n_cols, "cudnn_ms"), c_status = column(head, n_cols, "cudnn_status");
  int c_tuned = column(head, n_cols, "tuned_ms"), c_gpu = column(head, n_cols, "gpu");
  int n_h200 = 0, seen_unsupported = 0;
  for (int i = 1; i < n_lines; i++) {
    assert_int_equal(split_csv(lines[i], f, 40), n_cols);
    n_h200 += strcmp(f[c_gpu], H200) == 0;
    if (strcmp(f[c_shape], "b1.t512.s512.hq8.hkv8.d264.bf16.none") == 0) {
      assert_string_equal(f[c_status], "unsupported");
      assert_string_equal(f[c_cudnn], "");
      assert_string_equal(f[c_speed], "");
      seen_unsupported = 1;
    }
    if (!f[c_speed][0]) continue;
    /* Every speedup equals cudnn_ms / tuned_ms of its own row and of what was inserted. */
    double sp = strtod(f[c_speed], NULL), cu = strtod(f[c_cudnn], NULL), tu = strtod(f[c_tuned], NULL);
    assert_near(sp, cu / tu, 1e-4 * sp);
    if (strcmp(f[c_gpu], H200) == 0) {
      for (int k = 0; k < g_n_exp; k++) {
        char key[160];
        at_shape_key(&g_exp[k].shape, key, sizeof key);
        if (strcmp(key, f[c_shape]) == 0 && strcmp(g_exp[k].gpu, H200) == 0)
          assert_near(sp, g_exp[k].cudnn_ms / g_exp[k].tuned_ms, 1e-4 * sp);
      }
    }
  }
  assert_int_equal(n_h200, 20);
  assert_true(seen_unsupported);
  free(text);
}

/* ---- json: a small validating parser ----------------------------------------------------- */

typedef struct json_in {
  const char *p;
  int objects; /* objects seen, to count rows */
} json_in;

static int json_value(json_in *in);

static void json_space(json_in *in)
{
  while (*in->p == ' ' || *in->p == '\n' || *in->p == '\t' || *in->p == '\r') in->p++;
}

static int json_string(json_in *in)
{
  if (*in->p != '"') return 0;
  for (in->p++; *in->p != '"'; in->p++) {
    if (!*in->p || (unsigned char)*in->p < 0x20) return 0;
    if (*in->p == '\\') {
      in->p++;
      if (*in->p == 'u') {
        for (int i = 0; i < 4; i++)
          if (!isxdigit((unsigned char)*++in->p)) return 0;
      } else if (!strchr("\"\\/bfnrt", *in->p) || !*in->p) {
        return 0;
      }
    }
  }
  in->p++;
  return 1;
}

static int json_number(json_in *in)
{
  const char *start = in->p;
  if (*in->p == '-') in->p++;
  if (!isdigit((unsigned char)*in->p)) return 0;
  if (*in->p == '0' && isdigit((unsigned char)in->p[1])) return 0;
  while (isdigit((unsigned char)*in->p)) in->p++;
  if (*in->p == '.') {
    if (!isdigit((unsigned char)*++in->p)) return 0;
    while (isdigit((unsigned char)*in->p)) in->p++;
  }
  if (*in->p == 'e' || *in->p == 'E') {
    in->p++;
    if (*in->p == '+' || *in->p == '-') in->p++;
    if (!isdigit((unsigned char)*in->p)) return 0;
    while (isdigit((unsigned char)*in->p)) in->p++;
  }
  return in->p > start;
}

static int json_list(json_in *in, char close, int members)
{
  in->p++;
  json_space(in);
  if (*in->p == close) return in->p++, 1;
  for (;;) {
    json_space(in);
    if (members) {
      if (!json_string(in)) return 0;
      json_space(in);
      if (*in->p++ != ':') return 0;
    }
    if (!json_value(in)) return 0;
    json_space(in);
    if (*in->p == close) return in->p++, 1;
    if (*in->p++ != ',') return 0;
  }
}

static int json_value(json_in *in)
{
  json_space(in);
  switch (*in->p) {
  case '{': in->objects++; return json_list(in, '}', 1);
  case '[': return json_list(in, ']', 0);
  case '"': return json_string(in);
  case 't': return strncmp(in->p, "true", 4) == 0 ? (in->p += 4, 1) : 0;
  case 'f': return strncmp(in->p, "false", 5) == 0 ? (in->p += 5, 1) : 0;
  case 'n': return strncmp(in->p, "null", 4) == 0 ? (in->p += 4, 1) : 0;
  default: return json_number(in);
  }
}

static int json_valid(const char *text, int *objects)
{
  json_in in = {text, 0};
  int ok = json_value(&in);
  json_space(&in);
  *objects = in.objects;
  return ok && *in.p == '\0';
}

static void test_json_parses_back(void **state)
{
  (void)state;
  char *text = render(NULL, TN_REPORT_JSON);
  int objects = 0;
  assert_true(json_valid(text, &objects));
  /* The document, its models, shapes and groups are all objects. */
  assert_int_equal(count_of(text, "\"shape\": "), 22);
  assert_int_equal(count_of(text, "\"geomean_speedup_tuned\": "), count_of(text, "\"n_compared\": "));
  int n_groups = count_of(text, "\"n_compared\": ");
  assert_int_equal(objects, 1 + 2 + 22 + n_groups);
  /* The unsupported shape: status as text, times as null. */
  const char *big = strstr(text, "\"shape\": \"b1.t512.s512.hq8.hkv8.d264.bf16.none\"");
  assert_non_null(big);
  const char *end = strchr(big, '}');
  char row[2048];
  snprintf(row, sizeof row, "%.*s", (int)(end - big), big);
  assert_non_null(strstr(row, "\"cudnn_status\": \"unsupported\""));
  assert_non_null(strstr(row, "\"cudnn_ms\": null"));
  assert_non_null(strstr(row, "\"speedup_tuned\": null"));
  /* The T-sweep group's mean, as a number. */
  int n, won;
  double g = expected_geomean(H200, AT_DTYPE_BF16, 64, AT_MASK_NONE, &n, &won);
  const char *grp = strstr(text, "\"dtype\": \"bf16\", \"head_dim\": 64, \"mask\": \"none\", \"n_shapes\": 6");
  assert_non_null(grp);
  const char *num = strstr(grp, "\"geomean_speedup_tuned\": ");
  assert_non_null(num);
  assert_near(strtod(num + strlen("\"geomean_speedup_tuned\": "), NULL), g, 1e-5 * g);
  const char *wins = strstr(grp, "\"n_won\": ");
  assert_true(wins && wins < num);
  assert_int_equal(atoi(wins + strlen("\"n_won\": ")), won);
  free(text);
}

/* ---- html -------------------------------------------------------------------------------- */

static void test_html_is_self_contained_with_charts(void **state)
{
  (void)state;
  char *html = render(NULL, TN_REPORT_HTML);
  assert_null(strstr(html, "http://"));
  assert_null(strstr(html, "https://"));
  assert_null(strstr(html, "<script"));
  assert_null(strstr(html, "<link"));
  assert_null(strstr(html, "@import"));
  assert_null(strstr(html, "url("));
  /* H200: speedup, 1 T sweep and 1 batch sweep (a latency and a speedup chart each), 1
   * MHA/GQA/MQA, 2 dtype (e4m3 vs bf16, f32 vs bf16), 1 decode bandwidth (its one decode shape);
   * A100: speedup, 1 T sweep (two charts). */
  assert_int_equal(count_of(html, "<svg"), 9 + 3);
  assert_int_equal(count_of(html, "</svg>"), 12);
  assert_int_equal(count_of(html, "Decode: K/V bandwidth vs KV length"), 1);
  assert_int_equal(count_of(html, "Speedup of the tuned kernel over cuDNN"), 2 * 3); /* aria, title, text */
  assert_int_equal(count_of(html, "sequence length T = S (log scale)"), 2 * 2);
  assert_int_equal(count_of(html, "batch size B (log scale)"), 2);
  assert_int_equal(count_of(html, ": speedup over cuDNN</title>"), 3);
  assert_non_null(strstr(html, ">MHA<"));
  assert_non_null(strstr(html, ">GQA<"));
  assert_non_null(strstr(html, ">MQA<"));
  assert_non_null(strstr(html, ">e4m3<"));
  assert_non_null(strstr(html, "1.0 = as fast as cuDNN"));
  /* A100 has no batch, heads or dtype families: said in a sentence. */
  assert_int_equal(count_of(html, "No chart:"), 3);
  for (int i = 0; i < g_n_exp; i++) {
    char key[160];
    at_shape_key(&g_exp[i].shape, key, sizeof key);
    assert_non_null(strstr(html, key));
  }
  assert_non_null(strstr(html, "cuDNN unsupported"));
  /* the T sweep's group: compared on all six shapes, the tuned kernel faster on four */
  assert_non_null(strstr(html, "<td class=\"n\">6 of 6</td><td class=\"n\">4 of 6</td></tr>"));
  const char *keep = getenv("ATTNTUNE_REPORT_KEEP");
  if (keep && keep[0]) {
    char path[400];
    snprintf(path, sizeof path, "%s/report.html", g_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(html, f);
    assert_int_equal(fclose(f), 0);
  }
  free(html);
}

/* ---- chart text: no label covers another --------------------------------------------------- */

/* One <text> of a chart, with the box it takes on screen. Widths are counted per character from
 * the page's fonts (DejaVu Sans: digits 0.64 em, 0.62 em taken for any character; DejaVu Sans
 * Mono 0.602 em), heights from the cap line to the descender. Rotated text is left out. */
typedef struct chart_text {
  char cls[16], text[256], anchor[16];
  double x, y, x0, x1, y0, y1;
} chart_text;

static double font_px(const char *cls)
{
  if (strcmp(cls, "ct") == 0) return 13;
  if (strcmp(cls, "ax") == 0) return 12;
  if (strcmp(cls, "val") == 0 || strcmp(cls, "miss") == 0) return 10;
  return 11; /* tk, key */
}

/* The value of attribute name in the tag that starts at tag (up to its '>'), or "" when absent. */
static void attr_of(const char *tag, const char *name, char *out, size_t size)
{
  char want[32];
  snprintf(want, sizeof want, " %s=\"", name);
  const char *end = strchr(tag, '>'), *p = strstr(tag, want);
  out[0] = '\0';
  if (!p || !end || p > end) return;
  p += strlen(want);
  const char *q = strchr(p, '"');
  if (q) snprintf(out, size, "%.*s", (int)(q - p), p);
}

/* Characters of XML text: an entity counts once, and so does a UTF-8 sequence. */
static int xml_chars(const char *s, size_t n)
{
  int count = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '&') {
      while (i < n && s[i] != ';') i++;
      count++;
    } else if (((unsigned char)s[i] & 0xC0) != 0x80) {
      count++;
    }
  }
  return count;
}

/* The unrotated texts of the svg element that starts at svg (up to its </svg>); returns how many. */
static int chart_texts(const char *svg, chart_text *out, int max)
{
  const char *end = strstr(svg, "</svg>");
  int n = 0;
  assert_non_null(end);
  for (const char *p = svg; (p = strstr(p, "<text ")) != NULL && p < end && n < max; p++) {
    char tr[64], num[32];
    attr_of(p, "transform", tr, sizeof tr);
    if (tr[0]) continue;
    chart_text *t = &out[n];
    attr_of(p, "class", t->cls, sizeof t->cls);
    attr_of(p, "text-anchor", t->anchor, sizeof t->anchor);
    attr_of(p, "x", num, sizeof num), t->x = strtod(num, NULL);
    attr_of(p, "y", num, sizeof num), t->y = strtod(num, NULL);
    const char *body = strchr(p, '>') + 1, *close = strstr(body, "</text>");
    assert_non_null(close);
    snprintf(t->text, sizeof t->text, "%.*s", (int)(close - body), body);
    double fs = font_px(t->cls), w = xml_chars(body, (size_t)(close - body)) * fs *
                                     (strcmp(t->cls, "key") == 0 ? 0.602 : 0.62);
    t->x0 = strcmp(t->anchor, "middle") == 0 ? t->x - w / 2 : strcmp(t->anchor, "end") == 0 ? t->x - w : t->x;
    t->x1 = t->x0 + w;
    t->y0 = t->y - 0.76 * fs, t->y1 = t->y + 0.24 * fs;
    n++;
  }
  return n;
}

/* No two texts of any chart of the page cover each other (half a pixel of slack). */
static void assert_no_text_overlap(const char *html)
{
  static chart_text texts[1024];
  int charts = 0;
  for (const char *svg = html; (svg = strstr(svg, "<svg ")) != NULL; svg++, charts++) {
    char title[256];
    attr_of(svg, "aria-label", title, sizeof title);
    int n = chart_texts(svg, texts, 1024);
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++) {
        const chart_text *a = &texts[i], *b = &texts[j];
        if (a->x0 < b->x1 - 0.5 && b->x0 < a->x1 - 0.5 && a->y0 < b->y1 - 0.5 && b->y0 < a->y1 - 0.5)
          fail_msg("chart '%s': '%s' at (%.1f, %.1f) and '%s' at (%.1f, %.1f) overlap", title, a->text, a->x, a->y,
                   b->text, b->x, b->y);
      }
  }
  assert_true(charts > 0);
}

/* The x tick labels of the chart titled title: its middle-anchored tick texts. */
static int x_tick_labels(const char *html, const char *title, chart_text *out, int max)
{
  char want[300];
  snprintf(want, sizeof want, "aria-label=\"%s\"", title);
  const char *at = strstr(html, want);
  if (!at) fail_msg("no chart '%s'", title);
  while (at > html && strncmp(at, "<svg ", 5) != 0) at--;
  chart_text all[256];
  int n = chart_texts(at, all, 256), k = 0;
  for (int i = 0; i < n && k < max; i++)
    if (strcmp(all[i].cls, "tk") == 0 && strcmp(all[i].anchor, "middle") == 0) out[k++] = all[i];
  return k;
}

static int has_label(const chart_text *t, int n, const char *text)
{
  for (int i = 0; i < n; i++)
    if (strcmp(t[i].text, text) == 0) return 1;
  return 0;
}

#define H100 "NVIDIA H100 80GB HBM3"

/* Dense sweeps as the codelab runs them: B = 1..16 (two-digit labels 11 px apart on a log axis at
 * the top) and T = S = 512..8192 in steps of 512 (four-digit labels). Not part of g_exp. */
static void build_dense_cache(const char *db_path)
{
  cache_db *db;
  int n_exp = g_n_exp;
  unlink(db_path);
  TU_OK(cache_open(db_path, 0, &db));
  for (int b = 1; b <= 16; b++) {
    at_shape s = mk(b, 256, 256, 8, 8, 64, AT_DTYPE_BF16, AT_MASK_NONE);
    double tuned = ms_at(s, 150);
    put_shape(db, H100, s, tuned, tuned * (b < 13 ? 1.2 : 0.95), tuned * 20);
  }
  for (int t = 512; t <= 8192; t += 512) {
    at_shape s = mk(1, t, t, 16, 16, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL);
    double tuned = ms_at(s, 400);
    put_shape(db, H100, s, tuned, tuned * 0.9, NAN);
  }
  cache_close(db);
  g_n_exp = n_exp;
}

static void test_dense_axes_do_not_overlap(void **state)
{
  (void)state;
  char db_path[320];
  snprintf(db_path, sizeof db_path, "%s/dense.db", g_dir);
  build_dense_cache(db_path);
  char *html = render_from(db_path, NULL, TN_REPORT_HTML);
  assert_no_text_overlap(html);
  chart_text t[64];
  /* Batch: both ends and the doublings keep their labels; some of 11..15 give way. */
  const char *batch[] = {"T=256 S=256 Nq=8 Nkv=8 D=64 bf16 none", "T=256 S=256 Nq=8 Nkv=8 D=64 bf16 none: speedup over cuDNN"};
  for (int k = 0; k < 2; k++) {
    int n = x_tick_labels(html, batch[k], t, 64);
    assert_true(n >= 8 && n < 16);
    const char *must[] = {"1", "2", "4", "8", "16"};
    for (int i = 0; i < 5; i++)
      if (!has_label(t, n, must[i])) fail_msg("chart '%s' has no x label '%s'", batch[k], must[i]);
  }
  /* T: the first and last lengths and the doublings are labelled. */
  int n = x_tick_labels(html, "B=1 Nq=16 Nkv=16 D=128 bf16 causal", t, 64);
  assert_true(n >= 4 && n < 16);
  const char *must[] = {"512", "1024", "2048", "4096", "8192"};
  for (int i = 0; i < 5; i++)
    if (!has_label(t, n, must[i])) fail_msg("T chart has no x label '%s'", must[i]);
  /* Every value is in a table even where the chart had no room for its label. */
  assert_non_null(strstr(html, "<caption>T=256 S=256 Nq=8 Nkv=8 D=64 bf16 none</caption>"));
  for (int b = 1; b <= 16; b++) {
    char cell[64];
    snprintf(cell, sizeof cell, "<tr><td class=\"n\">%d</td>", b);
    assert_non_null(strstr(html, cell));
  }
  const char *table = strstr(html, "<caption>T=256 S=256 Nq=8 Nkv=8 D=64 bf16 none</caption>");
  char *copy = strndup(table, (size_t)(strstr(table, "</table>") - table));
  assert_int_equal(count_of(copy, "<td class=\"n fast\">1.20x</td>"), 12); /* B = 1..12 */
  assert_int_equal(count_of(copy, "<td class=\"n slow\">0.95x</td>"), 4);  /* B = 13..16 */
  free(copy);
  free(html);
}

/* The pixel coordinates of the circles (the tuned series' markers) of the chart titled title. */
static int circles_of(const char *html, const char *title, double *cx, double *cy, int max)
{
  char want[300], num[32];
  snprintf(want, sizeof want, "aria-label=\"%s\"", title);
  const char *at = strstr(html, want);
  if (!at) fail_msg("no chart '%s'", title);
  const char *end = strstr(at, "</svg>");
  int n = 0;
  for (const char *p = at; (p = strstr(p, "<circle ")) != NULL && p < end && n < max; p++, n++) {
    attr_of(p, "cx", num, sizeof num), cx[n] = strtod(num, NULL);
    attr_of(p, "cy", num, sizeof num), cy[n] = strtod(num, NULL);
  }
  return n;
}

/* The speedup against T is a linear axis with the line at 1.0 where the points say it is, and each
 * point's value printed; the table under the charts holds them all. */
static void test_speedup_line_chart_is_linear(void **state)
{
  (void)state;
  char *html = render(H200, TN_REPORT_HTML);
  assert_no_text_overlap(html);
  const char *title = "B=2 Nq=16 Nkv=16 D=64 bf16 none: speedup over cuDNN";
  double cx[16], cy[16], sp[6];
  /* The first circle is the legend's marker; then one per T = 64..2048. */
  int n = circles_of(html, title, cx, cy, 16);
  assert_int_equal(n, 1 + 6);
  for (int i = 0; i < 6; i++) {
    const expected *e = find_exp(mk(2, 64 << i, 64 << i, 16, 16, 64, AT_DTYPE_BF16, AT_MASK_NONE));
    sp[i] = e->cudnn_ms / e->tuned_ms;
  }
  double slope = (cy[6] - cy[1]) / (sp[5] - sp[0]); /* pixels per unit of speedup: negative, up is faster */
  assert_true(slope < 0);
  for (int i = 0; i < 6; i++) assert_near(cy[1 + i], cy[1] + slope * (sp[i] - sp[0]), 0.15);
  /* The 1.0 line: the longest dashed line of the chart (the legend has a short one). */
  const char *at = strstr(html, title), *end = strstr(at, "</svg>");
  double one_y = NAN, longest = 0;
  for (const char *p = at; (p = strstr(p, "<line ")) != NULL && p < end; p++) {
    char cls[16], num[32];
    attr_of(p, "class", cls, sizeof cls);
    if (strcmp(cls, "one") != 0) continue;
    attr_of(p, "x1", num, sizeof num);
    double x1 = strtod(num, NULL);
    attr_of(p, "x2", num, sizeof num);
    double len = strtod(num, NULL) - x1;
    attr_of(p, "y1", num, sizeof num);
    if (len > longest) longest = len, one_y = strtod(num, NULL);
  }
  assert_true(longest > 400);
  assert_near(one_y, cy[1] + slope * (1.0 - sp[0]), 0.15);
  /* A 10% gap is tall on this axis: 0.85 to 0.95 spans 26 px of the 264 px plot. On the latency
   * chart's log axis over four decades it is 3 px, and its two lines at T = 64, 15% apart, touch. */
  assert_true(fabs(slope) * 0.1 > 20);
  char label[32];
  for (int i = 0; i < 6; i++) {
    snprintf(label, sizeof label, ">%.2f×</text>", sp[i]);
    if (!strstr(at, label) || strstr(at, label) > end) fail_msg("no value label %s on the speedup chart", label);
  }
  const char *table = strstr(html, "<caption>B=2 Nq=16 Nkv=16 D=64 bf16 none</caption>");
  assert_non_null(table);
  const char *table_end = strstr(table, "</table>");
  for (int i = 0; i < 6; i++) {
    char row[128];
    snprintf(row, sizeof row, "<tr><td class=\"n\">%d</td>", 64 << i);
    const char *r = strstr(table, row);
    assert_true(r && r < table_end);
    snprintf(label, sizeof label, ">%.2fx</td></tr>", sp[i]);
    const char *v = strstr(r, label);
    assert_true(v && v < strstr(r, "</tr>") + 5);
  }
  free(html);
}

/* ---- f32: the naive kernels only ------------------------------------------------------------ */

#define F32_KEY "b2.t128.s128.hq16.hkv16.d64.f32.none"

/* The JSON object of one shape (up to its closing brace) or of one group, copied into buf. */
static void json_object_with(const char *text, const char *needle, char *buf, size_t size)
{
  const char *at = strstr(text, needle);
  if (!at) fail_msg("no '%s' in the JSON", needle);
  const char *start = at, *end = strchr(at, '}');
  while (start > text && *start != '{') start--;
  assert_non_null(end);
  snprintf(buf, size, "%.*s", (int)(end - start + 1), start);
}

static void test_f32_row_in_every_format(void **state)
{
  (void)state;
  /* The model: naive time, no tuned, cuDNN unsupported, no speedup, alone in its group. */
  tn_report r;
  TU_OK(tn_report_load(g_db, H200, &r));
  const tn_report_row *row = NULL, *failed = NULL;
  for (int i = 0; i < r.n_rows; i++) {
    if (strcmp(r.rows[i].key, F32_KEY) == 0) row = &r.rows[i];
    if (strcmp(r.rows[i].key, "b1.t128.s128.hq4.hkv4.d32.f16.none") == 0) failed = &r.rows[i];
  }
  assert_non_null(row);
  assert_non_null(failed);
  assert_false(row->has_best);
  assert_int_equal(row->n_fused_trials, 0);
  assert_true(tn_report_no_fused(row));
  assert_false(tn_report_no_fused(failed)); /* fa2 was tried there: none verified is another story */
  assert_near(row->naive_ms, F32_NAIVE_MS, 1e-12);
  assert_true(isnan(row->tuned_ms) && isnan(row->best_ms) && isnan(row->cudnn_ms));
  assert_true(isnan(row->speedup_tuned) && isnan(row->speedup_best));
  assert_int_equal(row->cudnn, TN_REPORT_CUDNN_UNSUPPORTED);
  int seen_group = 0;
  for (int i = 0; i < r.n_groups; i++) {
    const tn_report_group *g = &r.groups[i];
    if (g->dtype != AT_DTYPE_F32) continue;
    assert_int_equal(g->n_shapes, 1);
    assert_int_equal(g->n_compared, 0);
    assert_int_equal(g->n_won, 0);
    assert_true(isnan(g->geomean));
    seen_group = 1;
  }
  assert_true(seen_group);
  tn_report_free(&r);

  /* text: the row names the missing kernel and prints the naive time, no speedup. */
  char line[1024], want[64];
  char *text = render(H200, TN_REPORT_TEXT);
  assert_true(line_with(text, F32_KEY, line, sizeof line));
  assert_non_null(strstr(line, "no fused kernel"));
  assert_non_null(strstr(line, "0.0412"));
  assert_non_null(strstr(line, "unsupported"));
  assert_null(strchr(line + strlen(F32_KEY), 'x')); /* no "1.23x" */
  assert_null(strstr(line, "nan"));
  assert_true(line_with(text, "f32 d64 none", line, sizeof line));
  assert_non_null(strstr(line, "n/a"));
  assert_non_null(strstr(line, "over 0 of 1 shape"));
  /* The bf16 group of the same head dim and mask keeps its six shapes and its mean. */
  int n, won;
  double g = expected_geomean(H200, AT_DTYPE_BF16, 64, AT_MASK_NONE, &n, &won);
  snprintf(want, sizeof want, "%.2fx", g);
  assert_true(line_with(text, "bf16 d64 none", line, sizeof line));
  assert_non_null(strstr(line, want));
  assert_non_null(strstr(line, "6 of 6"));
  /* The shape whose fa2 kernels all failed still shows "-" as its best. */
  assert_true(line_with(text, "b1.t128.s128.hq4.hkv4.d32.f16.none", line, sizeof line));
  assert_null(strstr(line, "no fused kernel"));
  free(text);

  /* md: the same, the label not set as code. */
  text = render(H200, TN_REPORT_MD);
  assert_true(line_with(text, F32_KEY, line, sizeof line));
  assert_non_null(strstr(line, "| `" F32_KEY "` | no fused kernel | - |"));
  assert_non_null(strstr(line, "| 0.0412 |"));
  assert_non_null(strstr(line, "| unsupported |"));
  assert_true(line_with(text, "| f32 d64 none |", line, sizeof line));
  assert_non_null(strstr(line, "| n/a | 0 of 1 |"));
  free(text);

  /* csv: empty best and tuned, the naive time, no speedups. */
  text = render(H200, TN_REPORT_CSV);
  char *lines[64], *save = NULL, *head[40], *f[40];
  int n_lines = 0, found = 0;
  for (char *l = strtok_r(text, "\n", &save); l && n_lines < 64; l = strtok_r(NULL, "\n", &save))
    lines[n_lines++] = l;
  int n_cols = split_csv(lines[0], head, 40);
  for (int i = 1; i < n_lines; i++) {
    assert_int_equal(split_csv(lines[i], f, 40), n_cols);
    if (strcmp(f[column(head, n_cols, "shape")], F32_KEY) != 0) continue;
    found = 1;
    assert_string_equal(f[column(head, n_cols, "dtype")], "f32");
    assert_string_equal(f[column(head, n_cols, "best_impl")], "");
    assert_string_equal(f[column(head, n_cols, "best_ms")], "");
    assert_string_equal(f[column(head, n_cols, "tuned_impl")], "");
    assert_string_equal(f[column(head, n_cols, "tuned_ms")], "");
    assert_string_equal(f[column(head, n_cols, "cudnn_status")], "unsupported");
    assert_string_equal(f[column(head, n_cols, "cudnn_ms")], "");
    assert_string_equal(f[column(head, n_cols, "naive_ms")], "0.0412");
    assert_string_equal(f[column(head, n_cols, "speedup_tuned")], "");
    assert_string_equal(f[column(head, n_cols, "speedup_best")], "");
  }
  assert_true(found);
  free(text);

  /* json: nulls, the naive time as a number, a group with nothing compared. */
  char obj[2048];
  int objects = 0;
  text = render(H200, TN_REPORT_JSON);
  assert_true(json_valid(text, &objects));
  json_object_with(text, "\"shape\": \"" F32_KEY "\"", obj, sizeof obj);
  assert_non_null(strstr(obj, "\"dtype\": \"f32\""));
  assert_non_null(strstr(obj, "\"best_impl\": null"));
  assert_non_null(strstr(obj, "\"tuned_ms\": null"));
  assert_non_null(strstr(obj, "\"cudnn_status\": \"unsupported\""));
  assert_non_null(strstr(obj, "\"naive_ms\": 0.0412,"));
  assert_non_null(strstr(obj, "\"speedup_tuned\": null"));
  assert_non_null(strstr(obj, "\"speedup_best\": null"));
  json_object_with(text, "\"dtype\": \"f32\", \"head_dim\": 64, \"mask\": \"none\", \"n_shapes\": 1", obj, sizeof obj);
  assert_non_null(strstr(obj, "\"n_compared\": 0, \"n_won\": 0, \"geomean_speedup_tuned\": null"));
  free(text);

  /* html: the table row, the speedup chart's reason, and the f32-vs-bf16 bars with a naive bar. */
  text = render(H200, TN_REPORT_HTML);
  assert_non_null(strstr(text, "no fused kernel (naive 0.0412 ms)"));
  assert_non_null(strstr(text, ">no fused kernel</td>"));
  assert_non_null(strstr(text, "<title>naive " F32_KEY ": 0.0412 ms</title>"));
  assert_non_null(strstr(text, ">f32<"));
  assert_non_null(strstr(text, "no fused kernel</text>")); /* its missing tuned bar */
  assert_null(strstr(text, "nan"));
  assert_null(strstr(text, "inf\""));
  free(text);
}

/* A cache of f32 shapes alone: no best row anywhere, only naive times; every format renders,
 * the header still names the environment, the charts have naive data and no NaN coordinates. */
static void test_f32_only_cache(void **state)
{
  (void)state;
  char db_path[320];
  snprintf(db_path, sizeof db_path, "%s/f32.db", g_dir);
  unlink(db_path);
  cache_db *db;
  TU_OK(cache_open(db_path, 0, &db));
  cache_env e = env_of(H200);
  put_f32_shape(db, &e, mk(4, 128, 128, 8, 8, 64, AT_DTYPE_F32, AT_MASK_NONE), 0.031);
  put_f32_shape(db, &e, mk(4, 256, 256, 8, 8, 64, AT_DTYPE_F32, AT_MASK_NONE), 0.052);
  put_f32_shape(db, &e, mk(4, 256, 256, 8, 2, 64, AT_DTYPE_F32, AT_MASK_NONE), 0.049);
  /* One without a naive time either (its naive trial crashed). */
  at_shape bare = mk(4, 512, 512, 8, 8, 64, AT_DTYPE_F32, AT_MASK_NONE);
  put_trial(db, &e, bare, "cudnn", CACHE_UNSUPPORTED, NAN);
  put_trial(db, &e, bare, "naive", CACHE_CRASHED, NAN);
  cache_close(db);

  static const tn_report_format formats[] = {TN_REPORT_TEXT, TN_REPORT_MD, TN_REPORT_CSV, TN_REPORT_JSON,
                                             TN_REPORT_HTML};
  for (size_t k = 0; k < sizeof formats / sizeof *formats; k++) {
    tn_report r;
    char *text = NULL;
    size_t size = 0;
    TU_OK(tn_report_load(db_path, NULL, &r));
    assert_int_equal(r.n_rows, 4);
    assert_int_equal(r.n_groups, 1);
    assert_int_equal(r.groups[0].n_compared, 0);
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    TU_OK(tn_report_write(&r, formats[k], f, "memory"));
    assert_int_equal(fclose(f), 0);
    tn_report_free(&r);
    assert_non_null(strstr(text, "b4.t256.s256.hq8.hkv2.d64.f32.none"));
    assert_non_null(strstr(text, "0.052"));
    assert_null(strstr(text, "nan"));
    assert_null(strstr(text, "inf"));
    if (formats[k] == TN_REPORT_TEXT) {
      assert_non_null(strstr(text, "driver 580.159.04")); /* from the trials: there is no best row */
      char line[1024];
      assert_true(line_with(text, "b4.t512.s512.hq8.hkv8.d64.f32.none", line, sizeof line));
      assert_non_null(strstr(line, "no fused kernel"));
    }
    if (formats[k] == TN_REPORT_JSON) {
      int objects = 0;
      assert_true(json_valid(text, &objects));
    }
    if (formats[k] == TN_REPORT_HTML) {
      /* speedup, T sweep (naive line), MHA vs GQA (naive bars); no batch or dtype family. */
      assert_int_equal(count_of(text, "<svg"), 3);
      assert_int_equal(count_of(text, "sequence length T = S (log scale)"), 1);
      assert_non_null(strstr(text, ">GQA<"));
      assert_non_null(strstr(text, "<title>naive b4.t256.s256.hq8.hkv2.d64.f32.none: 0.049 ms</title>"));
      assert_non_null(strstr(text, "no fused kernel (naive 0.031 ms)"));
      assert_int_equal(count_of(text, "No chart:"), 2);
    }
    free(text);
  }
}

/* ---- FP8: cuDNN's FP8 graph as the baseline ------------------------------------------------- */

/* A trial of cuDNN with its message, as the tuner records it (worker.c, harness.c). */
static void put_cudnn_trial(cache_db *db, const cache_env *e, at_shape s, cache_status st, double ms,
                            const char *message)
{
  cache_trial t;
  memset(&t, 0, sizeof t);
  t.shape = s;
  snprintf(t.impl, sizeof t.impl, "cudnn");
  t.status = st;
  t.time_ms = ms;
  t.tflops = isfinite(ms) ? at_shape_flops(&s) / (ms * 1e-3) / 1e12 : NAN;
  t.err_naive = st == CACHE_OK ? 3.6e-2 : st == CACHE_WRONG ? 6.1e-2 : NAN;
  t.err_cudnn = NAN;
  t.registers = t.spill_bytes = t.smem_bytes = -1;
  t.reps = st == CACHE_OK ? 50 : 0;
  snprintf(t.message, sizeof t.message, "%s", message);
  TU_OK(cache_put_trial(db, e, &t));
}

/* A generated kernel's trial and the best row the tuner stores for an FP8 shape: that kernel,
 * whatever cuDNN measured, with cuDNN's time as cudnn_ms. */
static void put_fp8_best(cache_db *db, const cache_env *e, at_shape s, const char *variant, double tuned_ms,
                         double cudnn_ms)
{
  put_trial(db, e, s, variant, CACHE_OK, tuned_ms);
  cache_best b;
  memset(&b, 0, sizeof b);
  b.shape = s, b.env = *e;
  snprintf(b.impl, sizeof b.impl, "%s", variant);
  b.time_ms = tuned_ms;
  b.tflops = at_shape_flops(&s) / (tuned_ms * 1e-3) / 1e12;
  b.cudnn_ms = cudnn_ms, b.err_naive = 2.6e-2, b.err_cudnn = isfinite(cudnn_ms) ? 4.4e-2 : NAN;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  int stored = 0;
  TU_OK(cache_put_best(db, &b, &stored));
  assert_true(stored);
}

#define FP8_NOTE "cuDNN writes FP8 output (e4m3); attntune writes bf16"
#define E5M2_WHY "cuDNN's FP8 graph (e5m2, D=128, none, sm_90a): no engine, config 0 of 0"
#define WRONG_WHY "cuDNN's error vs naive 0.061 over 0.05"

/* e4m3 timed by cuDNN (faster than ours: the best is still ours), e5m2 that cuDNN declines, e4m3
 * causal whose cuDNN output failed verification, and bf16 of the same shape. */
static void build_fp8_cache(const char *db_path, at_shape *e4, at_shape *e5, at_shape *e4c, at_shape *b16)
{
  cache_db *db;
  cache_env e = env_of(H200);
  unlink(db_path);
  TU_OK(cache_open(db_path, 0, &db));
  *e4 = mk(2, 2048, 2048, 16, 16, 128, AT_DTYPE_E4M3, AT_MASK_NONE);
  *e5 = *e4, e5->dtype = AT_DTYPE_E5M2;
  *e4c = *e4, e4c->mask = AT_MASK_CAUSAL_TL;
  *b16 = *e4, b16->dtype = AT_DTYPE_BF16;
  put_cudnn_trial(db, &e, *e4, CACHE_OK, 0.20,
                  "cudnn 9.19.0 fp8 eng5; writes e4m3 output (O x 448), decoded x 1/448 for the comparisons");
  put_fp8_best(db, &e, *e4, "fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.obf16", 0.30, 0.20);
  put_cudnn_trial(db, &e, *e5, CACHE_UNSUPPORTED, NAN, E5M2_WHY);
  put_fp8_best(db, &e, *e5, "fa3.e5m2.d128.none.g1.bm128.bn128.w8.s2.obf16", 0.31, NAN);
  put_cudnn_trial(db, &e, *e4c, CACHE_WRONG, NAN, WRONG_WHY);
  put_fp8_best(db, &e, *e4c, "fa3.e4m3.d128.causal.g1.bm128.bn128.w8.s2.obf16", 0.17, NAN);
  put_cudnn_trial(db, &e, *b16, CACHE_OK, 0.45, "cudnn 9.19.0 composite eng4");
  put_fp8_best(db, &e, *b16, "fa3.bf16.d128.none.g1.bm128.bn128.w8.s2", 0.50, 0.45);
  cache_close(db);
}

static const tn_report_row *row_of(const tn_report *r, at_shape s)
{
  char key[160];
  at_shape_key(&s, key, sizeof key);
  for (int i = 0; i < r->n_rows; i++)
    if (strcmp(r->rows[i].key, key) == 0) return &r->rows[i];
  fail_msg("no report row %s", key);
  return NULL;
}

/* The FP8 rows have a cuDNN column (its FP8 graph's time) with a note that cuDNN writes FP8
 * output; where cuDNN has no time the note gives the trial's reason. In every format. */
static void test_fp8_rows_have_cudnn_and_a_note(void **state)
{
  (void)state;
  char db_path[320], key[160], line[2048], want[256];
  snprintf(db_path, sizeof db_path, "%s/fp8.db", g_dir);
  at_shape e4, e5, e4c, b16;
  build_fp8_cache(db_path, &e4, &e5, &e4c, &b16);

  tn_report r;
  TU_OK(tn_report_load(db_path, NULL, &r));
  const tn_report_row *row = row_of(&r, e4);
  assert_int_equal(row->cudnn, TN_REPORT_CUDNN_OK);
  assert_near(row->cudnn_ms, 0.20, 1e-12);
  assert_near(row->speedup_tuned, 0.20 / 0.30, 1e-12);
  assert_string_equal(row->best_impl, "fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.obf16");
  assert_string_equal(row->note, FP8_NOTE);
  row = row_of(&r, e5);
  assert_int_equal(row->cudnn, TN_REPORT_CUDNN_UNSUPPORTED);
  assert_string_equal(row->note, "cuDNN: " E5M2_WHY);
  row = row_of(&r, e4c);
  assert_int_equal(row->cudnn, TN_REPORT_CUDNN_FAILED);
  assert_string_equal(row->note, "cuDNN: " WRONG_WHY);
  assert_string_equal(row_of(&r, b16)->note, ""); /* bf16: nothing to say */
  int e4_groups = 0;
  for (int i = 0; i < r.n_groups; i++)
    if (r.groups[i].dtype == AT_DTYPE_E4M3 && r.groups[i].mask == AT_MASK_NONE) {
      e4_groups++;
      assert_int_equal(r.groups[i].n_compared, 1);
      assert_near(r.groups[i].geomean, 0.20 / 0.30, 1e-9);
    }
  assert_int_equal(e4_groups, 1);
  tn_report_free(&r);

  /* text and md: the cuDNN time, the speedup and the note on the e4m3 line. */
  for (int md = 0; md < 2; md++) {
    char *text = render_from(db_path, NULL, md ? TN_REPORT_MD : TN_REPORT_TEXT);
    at_shape_key(&e4, key, sizeof key);
    assert_true(line_with(text, key, line, sizeof line));
    assert_non_null(strstr(line, " 0.2 "));
    assert_non_null(strstr(line, "0.67x"));
    assert_non_null(strstr(line, md ? "| " FP8_NOTE " |" : "  " FP8_NOTE));
    at_shape_key(&e5, key, sizeof key);
    assert_true(line_with(text, key, line, sizeof line));
    assert_non_null(strstr(line, "unsupported"));
    assert_non_null(strstr(line, "cuDNN: " E5M2_WHY));
    at_shape_key(&b16, key, sizeof key);
    assert_true(line_with(text, key, line, sizeof line));
    assert_null(strstr(line, "cuDNN writes"));
    if (!md) assert_true(line[strlen(line) - 1] != ' '); /* no note: no trailing blanks */
    free(text);
  }

  /* csv: the note is the last field; a note with a comma is quoted. */
  char *csv = render_from(db_path, NULL, TN_REPORT_CSV);
  assert_true(line_with(csv, "gpu,", line, sizeof line));
  assert_non_null(strstr(line, ",err_naive,err_cudnn,kv8_base_ms,kv8_tokens_per_s_gain,note"));
  at_shape_key(&e4, key, sizeof key);
  assert_true(line_with(csv, key, line, sizeof line));
  snprintf(want, sizeof want, ",%s", FP8_NOTE);
  assert_non_null(strstr(line, want));
  assert_string_equal(line + strlen(line) - strlen(want), want);
  at_shape_key(&e5, key, sizeof key);
  assert_true(line_with(csv, key, line, sizeof line));
  assert_non_null(strstr(line, ",\"cuDNN: " E5M2_WHY "\""));
  free(csv);

  /* json: the note as text, null where there is none. */
  char *json = render_from(db_path, NULL, TN_REPORT_JSON), obj[4096];
  int objects = 0;
  assert_true(json_valid(json, &objects));
  at_shape_key(&e4, key, sizeof key);
  snprintf(want, sizeof want, "\"%s\"", key);
  json_object_with(json, want, obj, sizeof obj);
  assert_non_null(strstr(obj, "\"cudnn_ms\": 0.2,"));
  assert_non_null(strstr(obj, "\"note\": \"" FP8_NOTE "\""));
  at_shape_key(&b16, key, sizeof key);
  snprintf(want, sizeof want, "\"%s\"", key);
  json_object_with(json, want, obj, sizeof obj);
  assert_non_null(strstr(obj, "\"note\": null"));
  free(json);

  /* html: the note cell, cuDNN's bar next to ours in the dtype chart, no overlapping labels. */
  char *html = render_from(db_path, NULL, TN_REPORT_HTML);
  assert_non_null(strstr(html, "<th>note</th>"));
  assert_non_null(strstr(html, "<td class=\"note\">" FP8_NOTE "</td>"));
  assert_non_null(strstr(html, "<td class=\"note\">cuDNN: " E5M2_WHY "</td>"));
  at_shape_key(&e4, key, sizeof key);
  snprintf(want, sizeof want, "<title>cuDNN %s: 0.2 ms</title>", key);
  assert_non_null(strstr(html, want));
  assert_no_text_overlap(html);
  free(html);
}

/* ---- decode: TB/s of K/V read ------------------------------------------------------------ */

#define DECODE_KEY(mask, bm) "decode.bf16.d128." mask ".g4.bm" #bm ".bn64.w4.s4.sp8"

/* A decode shape as the tuner records it: a decode variant's trial (the tuned time), cuDNN's
 * (NaN: unsupported), and the best row. */
static void put_decode_shape(cache_db *db, at_shape s, const char *variant, double tuned_ms, double cudnn_ms)
{
  cache_env e = env_of(H200);
  put_trial(db, &e, s, variant, CACHE_OK, tuned_ms);
  if (isfinite(cudnn_ms)) put_trial(db, &e, s, "cudnn", CACHE_OK, cudnn_ms);
  else put_trial(db, &e, s, "cudnn", CACHE_UNSUPPORTED, NAN);
  cache_best b;
  memset(&b, 0, sizeof b);
  b.shape = s, b.env = e;
  int cudnn_wins = isfinite(cudnn_ms) && cudnn_ms < tuned_ms;
  snprintf(b.impl, sizeof b.impl, "%s", cudnn_wins ? "cudnn" : variant);
  b.time_ms = cudnn_wins ? cudnn_ms : tuned_ms;
  b.tflops = at_shape_flops(&s) / (b.time_ms * 1e-3) / 1e12;
  b.cudnn_ms = cudnn_ms, b.err_naive = 3e-3, b.err_cudnn = 2e-3;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  int stored = 0;
  TU_OK(cache_put_best(db, &b, &stored));
}

static double kv_tbs(at_shape s, double ms)
{
  return 2.0 * s.batch * s.kv_heads * (double)s.kv_len * s.head_dim * 2 / (ms * 1e-3) / 1e12;
}

/* The decode cache: T = 1 over four KV lengths (one chart, cuDNN unsupported at the longest),
 * T = 4 causal-br at one length (a chart of one point), and one prefill shape (no TB/s). */
static const int DEC_S[] = {1024, 4096, 16384, 65536};
static const double DEC_MS[] = {0.012, 0.021, 0.061, 0.235};

static void build_decode_cache(const char *db_path)
{
  cache_db *db;
  unlink(db_path);
  TU_OK(cache_open(db_path, 0, &db));
  for (int i = 0; i < 4; i++)
    put_decode_shape(db, mk(8, 1, DEC_S[i], 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE), DECODE_KEY("none", 1),
                     DEC_MS[i], i == 3 ? NAN : DEC_MS[i] * 1.4);
  put_decode_shape(db, mk(32, 4, 8192, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR),
                   DECODE_KEY("causal-br", 4), 0.118, 0.150);
  at_shape pre = mk(2, 1024, 1024, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL);
  put_decode_shape(db, pre, "fa3.bf16.d128.causal.g4.bm128.bn128.w8.s2", ms_at(pre, 400), ms_at(pre, 450));
  cache_close(db);
}

static char *render_db(const char *db_path, tn_report_format format) { return render_from(db_path, NULL, format); }

/* Serving rows (a ragged prefill and a paged decode shape, with the padded shape of the same
 * at_shape beside each): their own rows, the layout in the shape column of every format. */
static void test_serving_rows_show_their_layout(void **state)
{
  (void)state;
  char db_path[320], line[1024];
  snprintf(db_path, sizeof db_path, "%s/serving.db", g_dir);
  unlink(db_path);
  cache_db *db;
  TU_OK(cache_open(db_path, 0, &db));
  cache_env e = env_of(H200);
  at_shape pre = mk(3, 1024, 1024, 16, 16, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR);
  at_shape dec = mk(4, 1, 2048, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE);
  const char *layouts[] = {".qragged.kvragged.lq512.lkv512", ".kvpaged16.lkv2048"};
  const at_shape shapes[] = {pre, dec};
  for (int k = 0; k < 2; k++) {
    cache_best b;
    memset(&b, 0, sizeof b);
    b.shape = shapes[k], b.env = e;
    snprintf(b.serving, sizeof b.serving, "%s", layouts[k]);
    snprintf(b.impl, sizeof b.impl, "%s", k ? "decode.bf16.pg16.d128.none.g4.bm1.bn128.w4.s3.sp2"
                                            : "fa2.bf16.rg.d128.causal-br.g1.bm128.bn64.w4.s2");
    b.time_ms = 0.05, b.tflops = 100, b.cudnn_ms = k ? NAN : 0.06, b.err_naive = 3e-3, b.err_cudnn = NAN;
    snprintf(b.arch, sizeof b.arch, "sm_90a");
    TU_OK(cache_put_best(db, &b, NULL));
    cache_trial t;
    memset(&t, 0, sizeof t);
    t.shape = shapes[k];
    snprintf(t.serving, sizeof t.serving, "%s", layouts[k]);
    snprintf(t.impl, sizeof t.impl, "%s", b.impl);
    t.status = CACHE_OK, t.time_ms = 0.05, t.tflops = 100, t.err_naive = 3e-3, t.err_cudnn = NAN, t.reps = 50;
    TU_OK(cache_put_trial(db, &e, &t));
  }
  put_trial(db, &e, pre, "fa2.bf16.d128.causal-br.g1.bm128.bn64.w4.s2", CACHE_OK, 0.2); /* padded: its own row */
  cache_close(db);

  tn_report r;
  TU_OK(tn_report_load(db_path, NULL, &r));
  assert_int_equal(r.n_rows, 3);
  /* The paged decode row's K/V rate from the tuner's TFLOP/s (no mask, T = 1: 4 Nq D FLOPs per
   * key against 2 Nkv D bf16 bytes): 100 TFLOP/s x 32 / 128 = 25 TB/s; prefill rows have none. */
  int decode_rows = 0;
  for (int i = 0; i < r.n_rows; i++) {
    if (r.rows[i].shape.q_len == 1) assert_float_equal(r.rows[i].best_kv_tbs, 25.0, 1e-9), decode_rows++;
    else assert_true(isnan(r.rows[i].best_kv_tbs));
  }
  assert_int_equal(decode_rows, 1);
  tn_report_free(&r);
  const tn_report_format formats[] = {TN_REPORT_TEXT, TN_REPORT_MD, TN_REPORT_CSV, TN_REPORT_JSON};
  for (size_t f = 0; f < sizeof formats / sizeof *formats; f++) {
    char *text = render_db(db_path, formats[f]);
    for (int k = 0; k < 2; k++) {
      char key[160];
      at_shape_key(&shapes[k], key, sizeof key);
      strcat(key, layouts[k]);
      assert_true(line_with(text, key, line, sizeof line));
    }
    free(text);
  }
}

static void test_decode_rows_in_tb_per_s(void **state)
{
  (void)state;
  char db_path[320], key[160], want[200], line[1024];
  snprintf(db_path, sizeof db_path, "%s/decode.db", g_dir);
  build_decode_cache(db_path);
  at_shape t1 = mk(8, 1, 4096, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE);
  at_shape t4 = mk(32, 4, 8192, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR);
  at_shape pre = mk(2, 1024, 1024, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL);

  /* The model: TB/s of the best time for decode rows, NaN for prefill. */
  tn_report r;
  TU_OK(tn_report_load(db_path, NULL, &r));
  assert_int_equal(r.n_rows, 6);
  for (int i = 0; i < r.n_rows; i++) {
    const tn_report_row *row = &r.rows[i];
    if (row->shape.q_len > 16) assert_true(isnan(row->best_kv_tbs));
    else assert_near(row->best_kv_tbs, kv_tbs(row->shape, row->best_ms), 1e-9 * row->best_kv_tbs);
  }
  tn_report_free(&r);

  /* text and md: the TB/s column, two decimals; "-" for the prefill row. */
  for (int md = 0; md < 2; md++) {
    char *text = render_db(db_path, md ? TN_REPORT_MD : TN_REPORT_TEXT);
    assert_non_null(strstr(text, md ? "| TB/s |" : "TFLOP/s  TB/s"));
    at_shape_key(&t1, key, sizeof key);
    snprintf(want, sizeof want, md ? " %.2f |" : " %.2f ", kv_tbs(t1, 0.021)); /* 3.20 */
    assert_true(line_with(text, key, line, sizeof line));
    assert_non_null(strstr(line, want));
    at_shape_key(&t4, key, sizeof key);
    snprintf(want, sizeof want, md ? " %.2f |" : " %.2f ", kv_tbs(t4, 0.118));
    assert_true(line_with(text, key, line, sizeof line));
    assert_non_null(strstr(line, want));
    assert_non_null(strstr(text, "TB/s = K/V bytes read per second, for decode shapes (T <= 16)"));
    assert_null(strstr(text, "GB/s"));
    free(text);
  }

  /* csv: best_kv_tbs, empty for prefill. */
  char *csv = render_db(db_path, TN_REPORT_CSV);
  char *lines[16], *save = NULL, *head[40], *f[40];
  int n_lines = 0;
  for (char *l = strtok_r(csv, "\n", &save); l && n_lines < 16; l = strtok_r(NULL, "\n", &save)) lines[n_lines++] = l;
  assert_int_equal(n_lines, 1 + 6);
  int n_cols = split_csv(lines[0], head, 40);
  int c_shape = column(head, n_cols, "shape"), c_tbs = column(head, n_cols, "best_kv_tbs");
  int c_ms = column(head, n_cols, "best_ms");
  at_shape_key(&pre, key, sizeof key);
  for (int i = 1; i < n_lines; i++) {
    assert_int_equal(split_csv(lines[i], f, 40), n_cols);
    if (strcmp(f[c_shape], key) == 0) {
      assert_string_equal(f[c_tbs], "");
      continue;
    }
    assert_true(f[c_tbs][0] != '\0');
    at_shape s = mk(atoi(f[column(head, n_cols, "batch")]), 1, atoi(f[column(head, n_cols, "kv_len")]), 32,
                    atoi(f[column(head, n_cols, "kv_heads")]), atoi(f[column(head, n_cols, "head_dim")]),
                    AT_DTYPE_BF16, AT_MASK_NONE);
    double tbs = strtod(f[c_tbs], NULL), ms = strtod(f[c_ms], NULL);
    assert_near(tbs, kv_tbs(s, ms), 1e-5 * tbs); /* %.6g in the CSV */
  }
  free(csv);

  /* json: best_kv_tbs a number for decode, null for prefill. */
  char *json = render_db(db_path, TN_REPORT_JSON), obj[4096];
  int objects = 0;
  assert_true(json_valid(json, &objects));
  at_shape_key(&t1, key, sizeof key);
  snprintf(want, sizeof want, "\"%s\"", key);
  json_object_with(json, want, obj, sizeof obj);
  snprintf(want, sizeof want, "\"best_kv_tbs\": %.6g", kv_tbs(t1, 0.021));
  assert_non_null(strstr(obj, want));
  at_shape_key(&pre, key, sizeof key);
  snprintf(want, sizeof want, "\"%s\"", key);
  json_object_with(json, want, obj, sizeof obj);
  assert_non_null(strstr(obj, "\"best_kv_tbs\": null"));
  free(json);

  /* html: the table column, and one bandwidth chart per decode family (T = 1 over S, T = 4) with
   * the ceiling; tuned has a point at every S, cuDNN none where it is unsupported. */
  char *html = render_db(db_path, TN_REPORT_HTML);
  assert_non_null(strstr(html, "<th>TFLOP/s</th><th>TB/s</th>"));
  assert_int_equal(count_of(html, "Decode: K/V bandwidth vs KV length"), 1);
  assert_int_equal(count_of(html, "K/V read (TB/s)"), 2);
  assert_int_equal(count_of(html, "HBM copy ~4.3 TB/s (H200, measured)"), 2);
  assert_int_equal(count_of(html, "KV length S (log scale)"), 2);
  assert_non_null(strstr(html, "aria-label=\"B=8 T=1 Nq=32 Nkv=8 D=128 bf16 none\""));
  assert_non_null(strstr(html, "aria-label=\"B=32 T=4 Nq=32 Nkv=8 D=128 bf16 causal-br\""));
  for (int i = 0; i < 4; i++) {
    at_shape s = mk(8, 1, DEC_S[i], 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE);
    at_shape_key(&s, key, sizeof key);
    char tip[256];
    snprintf(tip, sizeof tip, "<title>tuned (attntune) %s: %.4g TB/s</title>", key, kv_tbs(s, DEC_MS[i]));
    assert_non_null(strstr(html, tip));
    snprintf(tip, sizeof tip, "<title>cuDNN %s: %.4g TB/s</title>", key, kv_tbs(s, DEC_MS[i] * 1.4));
    if (i < 3) assert_non_null(strstr(html, tip));
    else assert_null(strstr(html, tip));
  }
  /* The prefill shape is in no bandwidth chart. */
  at_shape_key(&pre, key, sizeof key);
  char tip[256];
  snprintf(tip, sizeof tip, "<title>tuned (attntune) %s: ", key);
  assert_null(strstr(html, tip));
  assert_null(strstr(html, "nan"));
  assert_null(strstr(html, "inf\""));
  free(html);
}

/* FP8 KV cache rows against their shapes with 16-bit K/V: the model links the twins (tokens/s =
 * the 16-bit best over the FP8 best; NaN for an FP8 row with no twin, and for 16-bit rows), and
 * every format shows it: a table of its own in text, md and html, two columns in csv and json. */
static void test_fp8_kv_rows_against_16bit(void **state)
{
  (void)state;
  char db_path[320], key[160], twin_key[160], lone_key[160], line[1024], want[256];
  snprintf(db_path, sizeof db_path, "%s/kv8.db", g_dir);
  unlink(db_path);
  cache_db *db;
  TU_OK(cache_open(db_path, 0, &db));
  at_shape bf = mk(8, 1, 16384, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE);
  at_shape kv8 = bf, lone = mk(8, 1, 4096, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE);
  kv8.kv_dtype = AT_DTYPE_E4M3, lone.kv_dtype = AT_DTYPE_E5M2;
  put_decode_shape(db, bf, DECODE_KEY("none", 1), 0.120, 0.125);
  put_decode_shape(db, kv8, "decode.bf16.kve4m3.d128.none.g4.bm1.bn256.w4.s3.sp8", 0.064, NAN);
  put_decode_shape(db, lone, "decode.bf16.kve5m2.d128.none.g4.bm1.bn256.w4.s3.sp8", 0.020, NAN);
  cache_close(db);
  at_shape_key(&kv8, key, sizeof key);
  at_shape_key(&bf, twin_key, sizeof twin_key);
  at_shape_key(&lone, lone_key, sizeof lone_key);
  const double gain = 0.120 / 0.064;

  tn_report r;
  TU_OK(tn_report_load(db_path, NULL, &r));
  assert_int_equal(r.n_rows, 3);
  int linked = 0;
  for (int i = 0; i < r.n_rows; i++) {
    const tn_report_row *row = &r.rows[i];
    if (strcmp(row->key, key) == 0) {
      assert_near(row->kv8_base_ms, 0.120, 1e-12);
      assert_near(row->kv8_gain, gain, 1e-12);
      linked++;
    } else {
      assert_true(isnan(row->kv8_gain));
      assert_true(isnan(row->kv8_base_ms));
    }
  }
  assert_int_equal(linked, 1);
  tn_report_free(&r);

  for (int md = 0; md < 2; md++) {
    char *text = render_db(db_path, md ? TN_REPORT_MD : TN_REPORT_TEXT);
    const char *table = strstr(text, "FP8 KV cache against 16-bit K/V, tokens per second");
    assert_non_null(table);
    assert_true(line_with(table, key, line, sizeof line));
    snprintf(want, sizeof want, "%.2fx", gain); /* 1.88x */
    assert_non_null(strstr(line, want));
    assert_non_null(strstr(line, "0.12"));
    assert_non_null(strstr(line, "0.064"));
    assert_false(line_with(table, lone_key, line, sizeof line)); /* no 16-bit twin: not in it */
    if (md) assert_non_null(strstr(table, "| shape | 16-bit K/V best_ms | FP8 K/V best_ms | tokens/s |"));
    free(text);
  }

  char *csv = render_db(db_path, TN_REPORT_CSV);
  char *lines[8], *save = NULL, *head[40], *f[40];
  int n_lines = 0;
  for (char *l = strtok_r(csv, "\n", &save); l && n_lines < 8; l = strtok_r(NULL, "\n", &save)) lines[n_lines++] = l;
  assert_int_equal(n_lines, 1 + 3);
  int n_cols = split_csv(lines[0], head, 40);
  int c_shape = column(head, n_cols, "shape"), c_gain = column(head, n_cols, "kv8_tokens_per_s_gain");
  int c_base = column(head, n_cols, "kv8_base_ms");
  assert_true(c_gain >= 0 && c_base >= 0);
  for (int i = 1; i < n_lines; i++) {
    assert_int_equal(split_csv(lines[i], f, 40), n_cols);
    if (strcmp(f[c_shape], key) == 0) assert_near(strtod(f[c_gain], NULL), gain, 1e-5 * gain);
    else assert_string_equal(f[c_gain], "");
  }
  free(csv);

  char *json = render_db(db_path, TN_REPORT_JSON), obj[4096];
  int objects = 0;
  assert_true(json_valid(json, &objects));
  snprintf(want, sizeof want, "\"%s\"", key);
  json_object_with(json, want, obj, sizeof obj);
  snprintf(want, sizeof want, "\"kv8_tokens_per_s_gain\": %.6g", gain);
  assert_non_null(strstr(obj, want));
  snprintf(want, sizeof want, "\"%s\"", twin_key);
  json_object_with(json, want, obj, sizeof obj);
  assert_non_null(strstr(obj, "\"kv8_tokens_per_s_gain\": null"));
  free(json);

  char *html = render_db(db_path, TN_REPORT_HTML);
  char *h = strstr(html, "<h3>FP8 KV cache against 16-bit K/V, tokens per second");
  assert_non_null(h);
  char *end = strstr(h, "</table>");
  assert_non_null(end);
  *end = '\0'; /* the table alone */
  assert_non_null(strstr(h, key));
  snprintf(want, sizeof want, ">%.2fx<", gain);
  assert_non_null(strstr(h, want));
  assert_null(strstr(h, lone_key));
  free(html);

  /* Without FP8 K/V rows, no such table */
  build_decode_cache(db_path);
  char *plain = render_db(db_path, TN_REPORT_MD);
  assert_null(strstr(plain, "FP8 KV cache against"));
  free(plain);
}

/* Without decode rows the page has no decode section: the main cache's A100 has none, and a
 * prefill-only cache none either. */
static void test_no_decode_chart_without_decode_rows(void **state)
{
  (void)state;
  char *html = render(A100, TN_REPORT_HTML);
  assert_null(strstr(html, "Decode: K/V bandwidth"));
  assert_null(strstr(html, "HBM copy"));
  assert_null(strstr(html, "K/V read (TB/s)"));
  free(html);
  char db_path[320];
  snprintf(db_path, sizeof db_path, "%s/prefill.db", g_dir);
  unlink(db_path);
  cache_db *db;
  TU_OK(cache_open(db_path, 0, &db));
  at_shape pre = mk(2, 1024, 1024, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL);
  put_decode_shape(db, pre, "fa3.bf16.d128.causal.g4.bm128.bn128.w8.s2", ms_at(pre, 400), ms_at(pre, 450));
  /* T = 17 is prefill: one token longer than decode serves. */
  at_shape t17 = mk(2, 17, 4096, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR);
  put_decode_shape(db, t17, "fa2.bf16.d128.causal-br.g4.bm64.bn64.w4.s2", 0.03, 0.04);
  cache_close(db);
  html = render_db(db_path, TN_REPORT_HTML);
  assert_null(strstr(html, "Decode: K/V bandwidth"));
  assert_null(strstr(html, "HBM copy"));
  free(html);
  char *text = render_db(db_path, TN_REPORT_TEXT), line[1024], key[160];
  at_shape_key(&t17, key, sizeof key);
  assert_true(line_with(text, key, line, sizeof line));
  assert_null(strstr(line, "TB/s"));
  free(text);
}

/* The report's decode shapes are the ones the decode family serves: gen_enumerate lists decode
 * variants exactly for 1 <= T <= TN_DECODE_MAX_T (GEN_DECODE_MAX_T). */
static void test_decode_shape_matches_the_generator(void **state)
{
  (void)state;
  gen_target target;
  TU_OK(gen_target_for_arch("sm_90a", &target));
  for (int t = 1; t <= TN_DECODE_MAX_T + 8; t++) {
    at_shape s = mk(2, t, 4096, 32, 8, 128, AT_DTYPE_BF16, t > 1 ? AT_MASK_CAUSAL_BR : AT_MASK_NONE);
    gen_variant vs[GEN_MAX_VARIANTS];
    int n = 0, decode = 0;
    TU_OK(gen_enumerate(&s, &target, vs, GEN_MAX_VARIANTS, &n));
    for (int i = 0; i < n; i++) decode |= vs[i].family == GEN_FAMILY_DECODE;
    if (decode != tn_is_decode_shape(&s)) fail_msg("T = %d: decode listed %d, tn_is_decode_shape %d", t, decode,
                                                   tn_is_decode_shape(&s));
  }
}

/* ---- selection and messages -------------------------------------------------------------- */

/* A batch's work is its sequences' own: the sum of each alone, none for an empty sequence; with
 * no lengths the shape's, as at_shape_flops and tn_kv_bytes give it. */
static void test_sequences_work(void **state)
{
  (void)state;
  at_shape s = {.batch = 3, .q_len = 512, .kv_len = 512, .q_heads = 8, .kv_heads = 2, .head_dim = 64,
                .dtype = AT_DTYPE_BF16, .mask = AT_MASK_NONE};
  const int q[3] = {512, 100, 0}, kv[3] = {512, 300, 400};
  at_shape a = s, b = s;
  a.batch = b.batch = 1, b.q_len = 100, b.kv_len = 300;
  assert_true(fabs(tn_sequences_work(&s, q, kv, 0) - (at_shape_flops(&a) + at_shape_flops(&b))) < 1.0);
  assert_true(fabs(tn_sequences_work(&s, NULL, kv, 1) -
                   (tn_kv_bytes(&a) + tn_kv_bytes(&b) + 400.0 / 512.0 * tn_kv_bytes(&a))) < 1.0);
  assert_true(fabs(tn_sequences_work(&s, NULL, NULL, 0) - at_shape_flops(&s)) < 1.0);
}

static void test_gpu_filter_and_messages(void **state)
{
  (void)state;
  tn_report r;
  char why[2048];
  TU_OK(tn_report_load(g_db, A100, &r));
  assert_int_equal(r.n_rows, 2);
  assert_int_equal(r.n_models, 1);
  tn_report_free(&r);

  TU_OK(tn_report_load(g_db, "NVIDIA B200", &r));
  assert_int_equal(r.n_rows, 0);
  tn_report_explain_empty(&r, why, sizeof why);
  assert_non_null(strstr(why, "has no results for GPU 'NVIDIA B200'"));
  assert_non_null(strstr(why, H200));
  assert_non_null(strstr(why, A100));
  tn_report_free(&r);

  char empty[320];
  snprintf(empty, sizeof empty, "%s/empty.db", g_dir);
  unlink(empty);
  cache_db *db;
  TU_OK(cache_open(empty, 0, &db));
  cache_close(db);
  TU_OK(tn_report_load(empty, NULL, &r));
  assert_int_equal(r.n_rows, 0);
  tn_report_explain_empty(&r, why, sizeof why);
  assert_non_null(strstr(why, "holds no tuning results yet (run 'attntune tune' or "
                              "'attntune bench --suite codelab')"));
  tn_report_free(&r);

  char missing[320];
  snprintf(missing, sizeof missing, "%s/missing.db", g_dir);
  assert_int_equal(tn_report_load(missing, NULL, &r), AT_ERR_IO);
  assert_non_null(strstr(at_last_error(), missing));
  tn_report_format fmt;
  assert_int_equal(tn_report_format_parse("pdf", &fmt), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "'pdf'"));
}

/* ---- the command line -------------------------------------------------------------------- */

/* attntune report ARGS: exit code and output. */
static int run_cli(const char *args, char *output, size_t size)
{
  char full[1200];
  snprintf(full, sizeof full, "report %s", args);
  return tu_run_attntune(full, g_dir, output, size);
}

static void test_cli_exit_codes(void **state)
{
  (void)state;
  char out[65536], args[1024];
  snprintf(args, sizeof args, "--db '%s' --format text", g_db);
  assert_int_equal(run_cli(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "b2.t1024.s1024.hq16.hkv16.d64.bf16.none"));

  snprintf(args, sizeof args, "--db '%s' --format html --out '%s/cli.html'", g_db, g_dir);
  assert_int_equal(run_cli(args, out, sizeof out), 0);

  snprintf(args, sizeof args, "--db '%s' --gpu 'NVIDIA B200'", g_db);
  assert_int_equal(run_cli(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "no results for GPU 'NVIDIA B200'; it holds results for: " A100 ", " H200));

  snprintf(args, sizeof args, "--db '%s/empty.db'", g_dir);
  assert_int_equal(run_cli(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "holds no tuning results yet"));

  snprintf(args, sizeof args, "--db '%s/nope.db'", g_dir);
  assert_int_equal(run_cli(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "nope.db' does not exist"));

  assert_int_equal(run_cli("--format pdf", out, sizeof out), 2);
  assert_non_null(strstr(out, "unknown format 'pdf'"));
  assert_int_equal(run_cli("--bogus", out, sizeof out), 2);
  assert_int_equal(run_cli("extra", out, sizeof out), 2);
  assert_int_equal(run_cli("--help", out, sizeof out), 0);
  assert_non_null(strstr(out, "usage: attntune report"));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_text_has_the_numbers),
      cmocka_unit_test(test_markdown_has_the_numbers),
      cmocka_unit_test(test_csv_parses_back),
      cmocka_unit_test(test_json_parses_back),
      cmocka_unit_test(test_html_is_self_contained_with_charts),
      cmocka_unit_test(test_dense_axes_do_not_overlap),
      cmocka_unit_test(test_speedup_line_chart_is_linear),
      cmocka_unit_test(test_fp8_rows_have_cudnn_and_a_note),
      cmocka_unit_test(test_f32_row_in_every_format),
      cmocka_unit_test(test_f32_only_cache),
      cmocka_unit_test(test_decode_rows_in_tb_per_s),
      cmocka_unit_test(test_fp8_kv_rows_against_16bit),
      cmocka_unit_test(test_sequences_work),
      cmocka_unit_test(test_serving_rows_show_their_layout),
      cmocka_unit_test(test_no_decode_chart_without_decode_rows),
      cmocka_unit_test(test_decode_shape_matches_the_generator),
      cmocka_unit_test(test_gpu_filter_and_messages),
      cmocka_unit_test(test_cli_exit_codes),
  };
  return TU_RUN_GROUP(tests, setup, teardown);
}
