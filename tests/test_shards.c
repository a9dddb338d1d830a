/* test_shards.c — a fleet run's answer equals one run's: the shards of a config, each tuned into
 * its own cache and merged with cache_merge, give the same best row per shape as tuning the whole
 * config into one cache, wherever the two runs' best and second-best candidates differ by more
 * than the run-to-run noise. The tuning is synthetic (no GPU): each candidate of each shape has a
 * true time from a fixed model, and each run measures it with its own noise, as two runs on two
 * GPUs of one model would. */
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
#include "tuner/config.h"

/* 2 batches x 5 lengths x 2 GQA ratios, causal, plus 2 chunked-prefill shapes: 22 shapes of
 * very different sizes, as in configs/llm-prefill.yaml. */
static const char CONFIG[] = "shapes:\n"
                             "  - batch: [1, 2]\n"
                             "    seq_len: {from: 1024, to: 16384, mul: 2}\n"
                             "    q_heads: 32\n"
                             "    kv_heads: [8, 4]\n"
                             "    head_dim: 128\n"
                             "    mask: causal\n"
                             "  - {batch: 1, q_len: 2048, kv_len: [4096, 8192], q_heads: 32, kv_heads: 8, head_dim: 128,\n"
                             "     mask: causal-br, lse: true}\n";

static const char *const CANDIDATES[] = {"cudnn", "fa3.bf16.a", "fa3.bf16.b", "fa3.bf16.c", "fa2.bf16.d"};
#define N_CANDIDATES ((int)(sizeof CANDIDATES / sizeof CANDIDATES[0]))
#define NOISE 0.01 /* relative run-to-run spread of one measurement: +-1% */

/* A deterministic hash of (shape, candidate, run) in [0, 1). */
static double unit_hash(const char *shape_key, int candidate, unsigned run)
{
  uint64_t h = 1469598103934665603ull ^ run;
  for (const char *p = shape_key; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  h = (h ^ (uint64_t)candidate) * 1099511628211ull;
  h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33;
  return (double)(h >> 11) / 9007199254740992.0;
}

/* The model's time of a candidate: the shape's FLOPs at a rate that depends on the candidate and
 * the shape (so different shapes have different winners), some within 1% of each other. */
static double true_ms(const at_shape *s, int candidate)
{
  char key[TN_SHAPE_KEY_CAP];
  tn_shape_key(s, key, sizeof key);
  const double rate = 400e12 * (1.0 + 0.5 * unit_hash(key, candidate, 0));
  return at_shape_flops(s) / rate * 1e3;
}

static double measured_ms(const at_shape *s, int candidate, unsigned run)
{
  char key[TN_SHAPE_KEY_CAP];
  tn_shape_key(s, key, sizeof key);
  return true_ms(s, candidate) * (1.0 + NOISE * (2.0 * unit_hash(key, candidate, run) - 1.0));
}

/* What tune stores for one shape: every candidate's trial, the fastest as the best row. */
static void tune_shape_synthetic(cache_db *db, const cache_env *e, const at_shape *s, unsigned run)
{
  int best = 0;
  double ms[N_CANDIDATES];
  for (int c = 0; c < N_CANDIDATES; c++) {
    cache_trial tr;
    memset(&tr, 0, sizeof tr);
    tr.shape = *s;
    snprintf(tr.impl, sizeof tr.impl, "%s", CANDIDATES[c]);
    tr.status = CACHE_OK, tr.time_ms = ms[c] = measured_ms(s, c, run);
    tr.tflops = at_shape_flops(s) / (ms[c] * 1e-3) / 1e12, tr.err_naive = 2e-3, tr.err_cudnn = 1e-3;
    tr.registers = tr.spill_bytes = tr.smem_bytes = -1, tr.reps = 50;
    TU_OK(cache_put_trial(db, e, &tr));
    if (ms[c] < ms[best]) best = c;
  }
  cache_best b;
  memset(&b, 0, sizeof b);
  b.shape = *s, b.env = *e;
  snprintf(b.impl, sizeof b.impl, "%s", CANDIDATES[best]);
  b.time_ms = ms[best], b.tflops = at_shape_flops(s) / (ms[best] * 1e-3) / 1e12, b.cudnn_ms = ms[0];
  b.err_naive = 2e-3, b.err_cudnn = 1e-3;
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  TU_OK(cache_put_best(db, &b, NULL));
  TU_OK(cache_mark_done(db, e, s, NULL));
}

static void tune_into(const char *path, const tn_config *c, const int *owner, int shard, unsigned run)
{
  cache_db *db;
  const cache_env e = tu_h200_env("fa2-test+fa3-test");
  TU_OK(cache_open(path, CACHE_WRITE, &db));
  for (int i = 0; i < c->n_shapes; i++)
    if (!owner || owner[i] == shard) tune_shape_synthetic(db, &e, &c->shapes[i], run);
  cache_close(db);
}

static char g_dir[256];

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

/* Is the single run's winner separated from its runner-up by more than the noise of two runs? */
static int clear_winner(const at_shape *s)
{
  double best = INFINITY, second = INFINITY;
  for (int c = 0; c < N_CANDIDATES; c++) {
    const double t = true_ms(s, c);
    if (t < best) second = best, best = t;
    else if (t < second) second = t;
  }
  /* then every measurement of the best, at most best * (1 + NOISE), is below every measurement
   * of another, at least second * (1 - NOISE): both runs must pick it */
  return second * (1.0 - NOISE) > best * (1.0 + NOISE);
}

static void expect_same_best(const char *single, const char *merged, const tn_config *c)
{
  cache_db *a, *b;
  TU_OK(cache_open(single, CACHE_READ, &a));
  TU_OK(cache_open(merged, CACHE_READ, &b));
  int clear = 0;
  for (int i = 0; i < c->n_shapes; i++) {
    cache_best x, y;
    int fx = 0, fy = 0, nx = 0, ny = 0;
    TU_OK(cache_get_best(a, "NVIDIA H200", &c->shapes[i], NULL, &x, &fx));
    TU_OK(cache_get_best(b, "NVIDIA H200", &c->shapes[i], NULL, &y, &fy));
    assert_true(fx && fy);
    const cache_env e = tu_h200_env("fa2-test+fa3-test");
    TU_OK(cache_count_trials(a, &e, &c->shapes[i], NULL, &nx));
    TU_OK(cache_count_trials(b, &e, &c->shapes[i], NULL, &ny));
    assert_int_equal(nx, N_CANDIDATES);
    assert_int_equal(ny, N_CANDIDATES); /* every trial of every shard reached the merged file */
    if (clear_winner(&c->shapes[i])) {
      clear++;
      if (strcmp(x.impl, y.impl) != 0) {
        char key[TN_SHAPE_KEY_CAP];
        tn_shape_key(&c->shapes[i], key, sizeof key);
        fail_msg("%s: one run chose %s, the merged shards %s", key, x.impl, y.impl);
      }
    }
    /* the merged row is its shard's measurement of the candidate it names */
    int cy = -1;
    for (int k = 0; k < N_CANDIDATES; k++)
      if (strcmp(y.impl, CANDIDATES[k]) == 0) cy = k;
    assert_true(cy >= 0);
    assert_true(fabs(y.time_ms / true_ms(&c->shapes[i], cy) - 1.0) <= NOISE * 1.0001);
    cache_best_clear(&x);
    cache_best_clear(&y);
  }
  assert_true(clear >= c->n_shapes / 2); /* the comparison is not vacuous */
  cache_close(a);
  cache_close(b);
}

static void test_shards_merge_to_one_run(void **state)
{
  (void)state;
  tn_config c;
  TU_OK(tn_config_parse(CONFIG, strlen(CONFIG), "fleet.yaml", &c));
  assert_int_equal(c.n_shapes, 22);
  char single[320], merged[320], name[64], paths[8][320];
  path_in(single, sizeof single, "single.db");
  tune_into(single, &c, NULL, 0, 1);
  for (int n = 2; n <= 8; n *= 2) {
    int owner[22];
    TU_OK(tn_shard_owners(&c, n, owner));
    const char *inputs[8];
    for (int i = 0; i < n; i++) {
      snprintf(name, sizeof name, "n%d-shard-%d.db", n, i);
      path_in(paths[i], sizeof paths[i], name);
      inputs[i] = paths[i];
      tune_into(inputs[i], &c, owner, i, 100u + (unsigned)i); /* each host its own noise */
    }
    snprintf(name, sizeof name, "n%d-merged.db", n);
    path_in(merged, sizeof merged, name);
    TU_OK(cache_merge(inputs, n, merged));
    expect_same_best(single, merged, &c);
  }
  tn_config_free(&c);
}

static int setup(void **state)
{
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/attntune-shards-XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
  (void)state;
  char cmd[320];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_shards_merge_to_one_run, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
