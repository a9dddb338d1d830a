/* testutil.c — see testutil.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <libgen.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/testutil.h"
#include "attntune_fp8.h"

/* ---- a group whose tests all skipped is a skipped program -------------------------------------
 *
 * cmocka counts skips but returns only the failures, so a runner around it learns which tests
 * skipped from the outside: each test's setup (ours, chaining the test's own) counts the test as
 * begun, and the test function (ours, calling the test's own) counts it as returned. skip() and a
 * failure both leave the test by longjmp, never returning; a test that neither returned nor
 * failed skipped. */

static const struct CMUnitTest *g_group;
static size_t g_begun, g_returned;

static int begin_test(void **state)
{
  const struct CMUnitTest *t = &g_group[g_begun++];
  return t->setup_func ? t->setup_func(state) : 0;
}

static void call_test(void **state)
{
  g_group[g_begun - 1].test_func(state);
  g_returned++;
}

static int end_test(void **state)
{
  const struct CMUnitTest *t = &g_group[g_begun - 1];
  return t->teardown_func ? t->teardown_func(state) : 0;
}

int tu_run_group(const char *group, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                 CMFixtureFunction teardown)
{
  struct CMUnitTest *chosen = calloc(n ? n : 1, sizeof *chosen), *wrapped = calloc(n ? n : 1, sizeof *wrapped);
  if (!chosen || !wrapped) {
    fprintf(stderr, "%s: no memory for %zu tests\n", group, n);
    free(chosen), free(wrapped);
    return 1;
  }
  /* ATTNTUNE_TEST_FILTER=PATTERN (fnmatch: * and ?) runs only the tests whose names match it. */
  const char *filter = getenv("ATTNTUNE_TEST_FILTER");
  const int filtered = filter && *filter;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (!filtered || fnmatch(filter, tests[i].name, 0) == 0) chosen[m++] = tests[i];
  for (size_t i = 0; i < m; i++) {
    wrapped[i] = chosen[i];
    wrapped[i].setup_func = begin_test;
    wrapped[i].test_func = call_test;
    wrapped[i].teardown_func = end_test;
  }
  g_group = chosen, g_begun = g_returned = 0;
  int failed = _cmocka_run_group_tests(group, wrapped, m, setup, teardown);
  free(wrapped);
  free(chosen);
  if (failed != 0) return failed;
  size_t skipped = g_begun - g_returned;
  const char *name = strrchr(group, '/') ? strrchr(group, '/') + 1 : group;
  if (filtered && m == 0) {
    printf("%s: no test matches ATTNTUNE_TEST_FILTER '%s'\n", name, filter);
    return 1;
  }
  if (m > 0 && g_begun == m && skipped == m) {
    printf("%s: all %zu tests skipped (exit %d: ctest lists the program as skipped)\n", name, m, TU_SKIPPED);
    return TU_SKIPPED;
  }
  if (g_begun < m) {
    /* The group setup failed (cmocka then runs no test) and cmocka still said 0. */
    printf("%s: only %zu of %zu tests ran\n", name, g_begun, m);
    return 1;
  }
  return 0;
}

/* ---- seeds ------------------------------------------------------------------------------------ */

static uint64_t g_seed;
static pthread_once_t g_seed_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t g_next_stream;

static void choose_seed(void)
{
  const char *env = getenv("ATTNTUNE_TEST_SEED");
  if (env && *env) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(env, &end, 0);
    if (errno || !end || *end != '\0' || env[0] == '-') {
      fprintf(stderr, "ATTNTUNE_TEST_SEED='%s' is not an unsigned 64-bit integer\n", env);
      exit(2);
    }
    g_seed = (uint64_t)v;
    fprintf(stderr, "seed %" PRIu64 " (from ATTNTUNE_TEST_SEED)\n", g_seed);
    return;
  }
  g_seed = tn_fresh_seed();
  fprintf(stderr, "seed %" PRIu64 " (ATTNTUNE_TEST_SEED=%" PRIu64 " replays it)\n", g_seed, g_seed);
}

uint64_t tu_seed(void)
{
  pthread_once(&g_seed_once, choose_seed);
  return g_seed;
}

/* splitmix64's finalizer: nearby stream numbers give unrelated generator states. */
static uint64_t mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

tn_rng tu_rng_for(uint64_t stream) { return tn_rng_seeded(mix(tu_seed() ^ mix(stream))); }

tn_rng tu_rng(void) { return tu_rng_for(atomic_fetch_add(&g_next_stream, 1)); }

uint64_t tu_next_seed(void) { return tu_rng().state; }

/* ---- GPU ------------------------------------------------------------------------------------- */

int tu_open_gpu(rt_ctx *ctx)
{
  int count = 0;
  at_status rc = rt_device_count(&count);
  if (rc == AT_ERR_NO_DRIVER || (rc == AT_OK && count == 0)) {
    static int said;
    if (!said++) fprintf(stderr, "no GPU: %s\n", rc == AT_OK ? "no CUDA device" : at_last_error());
    return 0;
  }
  TU_OK(rc);
  TU_OK(rt_ctx_open(0, ctx));
  return 1;
}

rt_ctx tu_gpu;
int tu_have_gpu;

int tu_gpu_setup(void **state)
{
  (void)state;
  tu_have_gpu = tu_open_gpu(&tu_gpu);
  return 0;
}

int tu_gpu_teardown(void **state)
{
  (void)state;
  if (tu_have_gpu) rt_ctx_close(&tu_gpu);
  return 0;
}

CUdeviceptr tu_upload(at_dtype dtype, const float *host, size_t n)
{
  size_t bytes = n * at_dtype_size(dtype);
  void *packed = malloc(bytes ? bytes : 1);
  CUdeviceptr dev = 0;
  assert_non_null(packed);
  TU_OK(tn_pack(dtype, host, n, packed));
  TU_OK(rt_alloc(&dev, bytes));
  TU_OK(rt_upload(dev, packed, bytes));
  free(packed);
  return dev;
}

void tu_download(at_dtype dtype, CUdeviceptr dev, size_t n, float *host)
{
  size_t bytes = n * at_dtype_size(dtype);
  void *packed = malloc(bytes ? bytes : 1);
  assert_non_null(packed);
  TU_OK(rt_download(packed, dev, bytes));
  TU_OK(tn_unpack(dtype, packed, n, host));
  free(packed);
}

CUdeviceptr tu_alloc_poisoned(size_t bytes)
{
  CUdeviceptr dev = 0;
  TU_OK(rt_alloc(&dev, bytes));
  TU_OK(rt_fill_u8(dev, 0xFF, bytes));
  return dev;
}

cache_env tu_h200_env(const char *templates)
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

gen_target tu_sm90(void)
{
  gen_target t;
  TU_OK(gen_target_for_arch("sm_90a", &t));
  return t;
}

void tu_expect_refused(at_status rc, at_status want, const char *word)
{
  if (rc != want) fail_msg("got %s, expected %s: %s", at_status_name(rc), at_status_name(want), at_last_error());
  if (!strstr(at_last_error(), word)) fail_msg("message lacks '%s': %s", word, at_last_error());
  printf("  refused: %s\n", at_last_error());
}

int tu_compile_count_bad(const gen_variant *vs, int n, const gen_target *t, const char *what)
{
  rt_compiled *out = calloc((size_t)n, sizeof *out);
  assert_non_null(out);
  TU_OK(rt_compile_all(vs, n, t, 0, out));
  int bad = 0, rmin = 1 << 30, rmax = 0;
  double ms = 0;
  for (int i = 0; i < n; i++) {
    const rt_compiled *c = &out[i];
    ms += c->compile_ms;
    if (c->status != AT_OK) {
      printf("  %s: %s\n", c->key, c->message);
      bad++;
    } else if (c->resources.registers < 0 || c->resources.spill_store_bytes != 0 ||
               c->resources.spill_load_bytes != 0 || c->resources.stack_bytes != 0 ||
               c->resources.wgmma_serialized) {
      printf("  %s: %d registers, %d/%d bytes spilled, %d bytes stack%s\n", c->key, c->resources.registers,
             c->resources.spill_store_bytes, c->resources.spill_load_bytes, c->resources.stack_bytes,
             c->resources.wgmma_serialized ? ", wgmmas serialized by ptxas" : "");
      bad++;
    } else {
      if (c->resources.registers < rmin) rmin = c->resources.registers;
      if (c->resources.registers > rmax) rmax = c->resources.registers;
    }
    if (getenv("ATTNTUNE_TEST_VERBOSE") && c->status == AT_OK)
      printf("  %s: %d registers\n", c->key, c->resources.registers);
  }
  printf("  %s: compiled %d variants for %s (%d..%d registers, %.0f s of NVRTC), %d with errors, spills or serialized wgmmas\n",
         what, n, t->arch, rmin, rmax, ms / 1e3, bad);
  rt_compiled_free(out, n);
  free(out);
  return bad;
}

CUdeviceptr tu_variant_scratch(const gen_variant *v, const at_shape *shape)
{
  CUdeviceptr scratch = 0;
  gen_launch_desc d;
  TU_OK(gen_launch_describe(v, shape, &d));
  TU_OK(rt_variant_scratch_alloc(v, shape, &scratch));
  const size_t partials = d.counters_offset ? d.counters_offset : d.scratch_bytes;
  if (scratch && partials) TU_OK(rt_fill_u8(scratch, 0xFF, partials));
  return scratch;
}

void tu_variant_scratch_done(const gen_variant *v, const at_shape *shape, CUdeviceptr scratch)
{
  gen_launch_desc d;
  TU_OK(gen_launch_describe(v, shape, &d));
  if (scratch && d.counters_offset) {
    const size_t n = (d.scratch_bytes - d.counters_offset) / sizeof(int);
    int *counters = malloc(n * sizeof *counters);
    assert_non_null(counters);
    TU_OK(rt_download(counters, scratch + d.counters_offset, n * sizeof *counters));
    for (size_t i = 0; i < n; i++)
      if (counters[i] != 0) fail_msg("split counter %zu is %d after the launch, not 0", i, counters[i]);
    free(counters);
  }
  if (scratch) rt_free(scratch);
}

int tu_run_attntune(const char *args, const char *dir, char *output, size_t size)
{
  char self[512], cmd[4096], out_path[600];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(n > 0);
  self[n] = '\0';
  snprintf(out_path, sizeof out_path, "%s/cli.out", dir);
  snprintf(cmd, sizeof cmd, "'%s/../attntune' %s > '%s' 2>&1", dirname(self), args, out_path);
  int status = system(cmd);
  assert_true(WIFEXITED(status));
  FILE *f = fopen(out_path, "r");
  assert_non_null(f);
  size_t got = fread(output, 1, size - 1, f);
  output[got] = '\0';
  fclose(f);
  return WEXITSTATUS(status);
}

float *tu_random_tensor(tn_rng *rng, at_dtype dtype, size_t n)
{
  float *x = malloc(n * sizeof *x);
  assert_non_null(x);
  tn_rng_fill(rng, x, n, -1.0f, 1.0f);
  tn_round_to_dtype(dtype, x, n);
  return x;
}

int tu_check_variants(const gen_variant *vs, int n, const gen_target *target, tu_variant_check check,
                      void *ctx)
{
  rt_compiled *comp = calloc((size_t)n, sizeof *comp);
  assert_true(n == 0 || comp != NULL);
  TU_OK(rt_compile_all(vs, n, target, 0, comp));
  int failures = 0;
  for (int i = 0; i < n; i++) {
    if (comp[i].status != AT_OK) {
      printf("    %s: compile failed: %s\n", comp[i].key, comp[i].message);
      failures++;
      continue;
    }
    rt_variant lv;
    TU_OK(rt_variant_load(&vs[i], comp[i].binary.cubin, &lv));
    failures += check(&lv, comp[i].key, i, ctx) != 0;
    rt_variant_unload(&lv);
  }
  rt_compiled_free(comp, n);
  free(comp);
  return failures;
}

char *tu_slurp(const char *path, size_t *size)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = '\0';
  fclose(f);
  *size = (size_t)n;
  return buf;
}

void tu_assert_file_unchanged(const char *path, const char *before, size_t n)
{
  size_t now_n = 0;
  char *now = tu_slurp(path, &now_n);
  assert_non_null(now);
  assert_int_equal(now_n, n);
  assert_memory_equal(now, before, n);
  free(now);
  static const char *const SUFFIXES[] = {"-wal", "-shm", "-journal"};
  for (int i = 0; i < 3; i++) {
    char side[1100];
    snprintf(side, sizeof side, "%s%s", path, SUFFIXES[i]);
    if (access(side, F_OK) == 0) fail_msg("%s appeared", side);
  }
}

int tu_without_write_access(const char *dir, int (*fn)(void *), void *arg)
{
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
      fprintf(stderr, "SKIP: cannot become uid 65534 to read without write access\n");
      _exit(77);
    }
    if (access(dir, W_OK) == 0) {
      fprintf(stderr, "SKIP: uid %d can write %s despite mode 0555\n", (int)geteuid(), dir);
      _exit(77);
    }
    _exit(fn(arg));
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

tu_fp8_tensor tu_fp8_tensor_make(tn_rng *rng, at_dtype fp8, size_t n, float magnitude)
{
  float *real = malloc(n * sizeof *real);
  assert_non_null(real);
  tn_rng_fill(rng, real, n, -magnitude, magnitude);
  tu_fp8_tensor x = tu_fp8_tensor_from(real, fp8, n);
  free(real);
  return x;
}

tu_fp8_tensor tu_fp8_tensor_from(const float *real, at_dtype fp8, size_t n)
{
  tu_fp8_tensor x;
  x.codes = malloc(n);
  x.deq = malloc(n * sizeof *x.deq);
  assert_true(x.codes && x.deq);
  float scale = 0.f;
  TU_OK(at_quantize_fp8(real, n, fp8, x.codes, &scale));
  assert_true(scale > 0.f && isfinite(scale));
  x.descale = 1.0f / scale;
  for (size_t i = 0; i < n; i++) x.deq[i] = at_fp8_to_f32(x.codes[i], fp8) * x.descale;
  TU_OK(rt_alloc(&x.dev, n));
  TU_OK(rt_upload(x.dev, x.codes, n));
  return x;
}

void tu_shape_keys(tu_keys how, float *k, const float *q, int b, int t, int s, int nq, int nkv, int d)
{
  if (how == TU_KEYS_RANDOM) return;
  const int group = nq / nkv;
  for (int bi = 0; bi < b; bi++)
    for (int j = 0; j < s; j++)
      for (int h = 0; h < nkv; h++) {
        float *row = k + (((size_t)bi * s + j) * nkv + h) * d;
        const float rise = 1.0f + 3.0f * (float)j / (float)s;
        for (int x = 0; x < d; x++) row[x] *= rise;
      }
  if ((how != TU_KEYS_SPIKE && how != TU_KEYS_HUGE) || t < 1) return;
  const double spike = how == TU_KEYS_HUGE ? 1e7 : 90.0;
  const int js = s * 7 / 8;
  for (int bi = 0; bi < b; bi++)
    for (int h = 0; h < nkv; h++) {
      const float *qrow = q + ((size_t)bi * t * nq + (size_t)h * group) * d;
      double norm2 = 0.0;
      for (int x = 0; x < d; x++) norm2 += (double)qrow[x] * qrow[x];
      if (norm2 <= 0.0) continue;
      const float f = (float)(spike * sqrt((double)d) / norm2); /* q . k / sqrt(d) = spike */
      float *row = k + (((size_t)bi * s + js) * nkv + h) * d;
      for (int x = 0; x < d; x++) row[x] = f * qrow[x];
    }
}

void tu_fp8_tensor_free(tu_fp8_tensor *x)
{
  rt_free(x->dev);
  free(x->codes), free(x->deq);
}

void tu_download_f64(CUdeviceptr dev, size_t n, double *host)
{
  float *f = malloc(n * sizeof *f);
  assert_non_null(f);
  TU_OK(rt_download(f, dev, n * sizeof(float)));
  for (size_t i = 0; i < n; i++) host[i] = f[i];
  free(f);
}
