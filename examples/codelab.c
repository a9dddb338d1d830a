/*
 * codelab.c — the attention codelab through libattntune's public API: the naive path, the tuned
 * fused kernel and cuDNN on the codelab's shape (B=4, T=128, N=8, D=64, bf16), then causal, a
 * longer sequence, GQA and MQA. Each implementation is checked against the naive output and
 * timed; one table is printed.
 *
 *   codelab [CACHE.db]     (a cache from `attntune tune`; without one, plans use the defaults)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attntune.h>

typedef struct scenario {
  const char *name;
  int batch, seq, q_heads, kv_heads, head_dim;
  at_mask mask;
} scenario;

static const scenario SCENARIOS[] = {
    {"codelab", 4, 128, 8, 8, 64, AT_MASK_NONE},
    {"causal", 4, 128, 8, 8, 64, AT_MASK_CAUSAL_TL},
    {"long", 4, 2048, 8, 8, 64, AT_MASK_NONE},
    {"gqa", 4, 1024, 8, 2, 64, AT_MASK_NONE},
    {"mqa", 4, 1024, 8, 1, 64, AT_MASK_NONE},
};

static const char *const IMPLS[] = {"naive", "auto", "cudnn"};

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static float uniform(void)
{
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* A device tensor of n random bf16 values. */
static at_status random_bf16(at_context *ctx, size_t n, void **dev)
{
  uint16_t *host = malloc(n * sizeof *host);
  if (!host) return AT_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) host[i] = at_f32_to_bf16(uniform());
  at_status rc = at_device_alloc(ctx, n * 2, dev);
  if (rc == AT_OK) rc = at_copy_to_device(ctx, *dev, host, n * 2);
  free(host);
  return rc;
}

static double rel_l2(const uint16_t *a, const uint16_t *ref, size_t n)
{
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < n; i++) {
    double x = at_bf16_to_f32(a[i]), y = at_bf16_to_f32(ref[i]);
    d2 += (x - y) * (x - y), r2 += y * y;
  }
  return sqrt(d2 / r2);
}

static int run_scenario(at_context *ctx, const scenario *sc)
{
  at_shape s = {.batch = sc->batch, .q_len = sc->seq, .kv_len = sc->seq, .q_heads = sc->q_heads,
                .kv_heads = sc->kv_heads, .head_dim = sc->head_dim, .dtype = AT_DTYPE_BF16,
                .mask = sc->mask};
  size_t nq = (size_t)s.batch * s.q_len * s.q_heads * s.head_dim;
  size_t nkv = (size_t)s.batch * s.kv_len * s.kv_heads * s.head_dim;
  at_layout layout = at_layout_bshd(&s);
  at_tensors t = {0};
  void *q = NULL, *k = NULL, *v = NULL, *o = NULL;
  uint16_t *out = malloc(nq * 2), *ref = malloc(nq * 2);
  int failures = 0;
  if (!out || !ref || random_bf16(ctx, nq, &q) != AT_OK || random_bf16(ctx, nkv, &k) != AT_OK ||
      random_bf16(ctx, nkv, &v) != AT_OK || at_device_alloc(ctx, nq * 2, &o) != AT_OK) {
    fprintf(stderr, "codelab: %s\n", at_last_error());
    return 1;
  }
  t.q = q, t.k = k, t.v = v, t.o = o;
  t.q_stride = layout.q, t.k_stride = layout.k, t.v_stride = layout.v, t.o_stride = layout.o;
  for (size_t i = 0; i < sizeof IMPLS / sizeof *IMPLS; i++) {
    at_plan_options opts = {.impl = IMPLS[i]};
    at_plan *plan = NULL;
    at_plan_info info;
    double ms = 0;
    if (at_plan_create(ctx, &s, &layout, &opts, &plan) != AT_OK) {
      printf("%-8s %-6s %-44s %s\n", sc->name, IMPLS[i], "-", at_last_error());
      continue;
    }
    at_plan_describe(plan, &info);
    at_status rc = at_plan_run(plan, &t, NULL, NULL);
    if (rc == AT_OK) rc = at_synchronize(ctx);
    if (rc == AT_OK) rc = at_copy_to_host(ctx, i == 0 ? ref : out, o, nq * 2);
    if (rc == AT_OK) rc = at_plan_benchmark(plan, &t, NULL, 10, 100, &ms);
    if (rc != AT_OK) {
      printf("%-8s %-6s %-44s %s\n", sc->name, IMPLS[i], info.impl, at_last_error());
      failures++;
    } else {
      double err = i == 0 ? 0.0 : rel_l2(out, ref, nq);
      double tflops = at_shape_flops(&s) / (ms * 1e-3) / 1e12;
      printf("%-8s %-6s %-44s %-8s %10.4f %8.1f %9.1e\n", sc->name, IMPLS[i], info.impl,
             at_choice_name(info.choice), ms, tflops, err);
      if (err > 2e-2) failures++;
    }
    at_plan_destroy(plan);
  }
  at_device_free(ctx, q), at_device_free(ctx, k), at_device_free(ctx, v), at_device_free(ctx, o);
  free(out), free(ref);
  return failures;
}

int main(int argc, char **argv)
{
  at_context *ctx = NULL;
  const char *cache = argc > 1 ? argv[1] : NULL;
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
    fprintf(stderr, "usage: codelab [CACHE.db]\n");
    return 2;
  }
  if (at_context_create(0, cache, 0, &ctx) != AT_OK) {
    fprintf(stderr, "codelab: %s\n", at_last_error());
    return 1;
  }
  printf("attntune %s on %s, cache %s\n\n", at_version(), at_context_describe(ctx), cache ? cache : "(none)");
  printf("%-8s %-6s %-44s %-8s %10s %8s %9s\n", "scenario", "asked", "implementation", "choice",
         "time_ms", "TFLOP/s", "vs_naive");
  int failures = 0;
  for (size_t i = 0; i < sizeof SCENARIOS / sizeof *SCENARIOS; i++) failures += run_scenario(ctx, &SCENARIOS[i]);
  at_context_destroy(ctx);
  return failures ? 1 : 0;
}
