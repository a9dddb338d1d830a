/* test_api_gpu.c — the public library on a GPU (skips without one): plans from a tuned cache
 * (cubins read, nothing compiled) match the naive kernels; forced cuDNN and naive; a read-only
 * cache; a writable one that keeps compiled cubins; one context used from several threads;
 * clear errors for misaligned pointers and wrong strides. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "generator/generator.h"
#include "tests/testutil.h"
#include "tuner/tune.h"

static int g_have_gpu;
static char g_db[256], g_db_rw[256];
static at_shape g_tuned;

static at_shape shape(int t, int d, at_mask mask, int nq, int nkv, int lse)
{
  return (at_shape){.batch = 2, .q_len = t, .kv_len = t, .q_heads = nq, .kv_heads = nkv,
                    .head_dim = d, .dtype = AT_DTYPE_BF16, .mask = mask, .with_lse = lse};
}

/* A cache with one tuned row (and its cubin) for g_tuned, as `attntune tune` would leave it. */
static void make_cache(void)
{
  rt_ctx ctx;
  gen_target target;
  gen_variant v;
  rt_compiled c;
  cache_db *db;
  cache_best b;
  TU_OK(rt_ctx_open(0, &ctx));
  TU_OK(gen_target_make(ctx.arch, ctx.info.smem_per_block_optin, &target));
  TU_OK(gen_default_variant(&g_tuned, &target, &v));
  TU_OK(rt_compile_all(&v, 1, &target, 1, &c));
  TU_OK(c.status);
  memset(&b, 0, sizeof b);
  b.shape = g_tuned;
  snprintf(b.env.gpu_model, sizeof b.env.gpu_model, "%.127s", ctx.info.name);
  gen_templates_version(b.env.template_version, sizeof b.env.template_version);
  snprintf(b.impl, sizeof b.impl, "%s", c.key);
  b.time_ms = 0.01, b.tflops = 1, b.cudnn_ms = NAN, b.err_naive = NAN, b.err_cudnn = NAN;
  snprintf(b.arch, sizeof b.arch, "%s", ctx.arch);
  TU_OK(gen_entry_name(&v, b.entry, sizeof b.entry));
  b.cubin = c.binary.cubin, b.cubin_size = c.binary.cubin_size;
  TU_OK(cache_open(g_db, 0, &db));
  TU_OK(cache_put_best(db, &b, NULL));
  cache_close(db);
  rt_compiled_free(&c, 1);
  rt_ctx_close(&ctx);
}

static int setup(void **state)
{
  (void)state;
  rt_ctx probe;
  g_have_gpu = tu_open_gpu(&probe);
  if (!g_have_gpu) return 0;
  rt_ctx_close(&probe);
  snprintf(g_db, sizeof g_db, "/tmp/attntune-api-%d.db", (int)getpid());
  snprintf(g_db_rw, sizeof g_db_rw, "/tmp/attntune-api-rw-%d.db", (int)getpid());
  unlink(g_db), unlink(g_db_rw);
  g_tuned = shape(300, 64, AT_MASK_CAUSAL_TL, 8, 2, 1);
  make_cache();
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  if (g_have_gpu) unlink(g_db), unlink(g_db_rw);
  return 0;
}

typedef struct io {
  void *q, *k, *v, *o, *o_ref;
  float *lse, *lse_ref;
  at_tensors t, t_ref;
  size_t nq, nlse;
} io;

static void make_io(at_context *ctx, const at_shape *s, io *x)
{
  tn_rng rng = tu_rng();
  at_layout l = at_layout_bshd(s);
  size_t nkv = (size_t)s->batch * s->kv_len * s->kv_heads * s->head_dim;
  memset(x, 0, sizeof *x);
  x->nq = (size_t)s->batch * s->q_len * s->q_heads * s->head_dim;
  x->nlse = (size_t)s->batch * s->q_heads * s->q_len;
  void **bufs[] = {&x->q, &x->k, &x->v};
  size_t sizes[] = {x->nq, nkv, nkv};
  for (int i = 0; i < 3; i++) {
    float *h = tu_random_tensor(&rng, AT_DTYPE_BF16, sizes[i]);
    uint16_t *packed = malloc(sizes[i] * 2);
    TU_OK(tn_pack(AT_DTYPE_BF16, h, sizes[i], packed));
    TU_OK(at_device_alloc(ctx, sizes[i] * 2, bufs[i]));
    TU_OK(at_copy_to_device(ctx, *bufs[i], packed, sizes[i] * 2));
    free(h), free(packed);
  }
  TU_OK(at_device_alloc(ctx, x->nq * 2, &x->o));
  TU_OK(at_device_alloc(ctx, x->nq * 2, &x->o_ref));
  TU_OK(at_device_alloc(ctx, x->nlse * 4, (void **)&x->lse));
  TU_OK(at_device_alloc(ctx, x->nlse * 4, (void **)&x->lse_ref));
  at_tensors t = {x->q, x->k, x->v, x->o, x->lse, l.q, l.k, l.v, l.o};
  x->t = t;
  x->t_ref = t;
  x->t_ref.o = x->o_ref, x->t_ref.lse = x->lse_ref;
}

static void free_io(at_context *ctx, io *x)
{
  void *all[] = {x->q, x->k, x->v, x->o, x->o_ref, x->lse, x->lse_ref};
  for (int i = 0; i < 7; i++) at_device_free(ctx, all[i]);
}

/* Relative L2 of the plan's output (bf16) against the naive plan's. */
static double compare(at_context *ctx, io *x, int with_lse)
{
  uint16_t *a = malloc(x->nq * 2), *b = malloc(x->nq * 2);
  TU_OK(at_synchronize(ctx));
  TU_OK(at_copy_to_host(ctx, a, x->o, x->nq * 2));
  TU_OK(at_copy_to_host(ctx, b, x->o_ref, x->nq * 2));
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < x->nq; i++) {
    double u = at_bf16_to_f32(a[i]), w = at_bf16_to_f32(b[i]);
    if (!isfinite(u)) return INFINITY;
    d2 += (u - w) * (u - w), r2 += w * w;
  }
  free(a), free(b);
  double err = sqrt(d2 / r2);
  if (with_lse) {
    float *la = malloc(x->nlse * 4), *lb = malloc(x->nlse * 4);
    TU_OK(at_copy_to_host(ctx, la, x->lse, x->nlse * 4));
    TU_OK(at_copy_to_host(ctx, lb, x->lse_ref, x->nlse * 4));
    for (size_t i = 0; i < x->nlse; i++)
      if (!(fabsf(la[i] - lb[i]) <= 1e-3f * (1 + fabsf(lb[i])))) err = INFINITY;
    free(la), free(lb);
  }
  return err;
}

/* Run plan and the naive plan on the same inputs (outputs poisoned) and compare. */
static double run_against_naive(at_context *ctx, at_plan *plan, const at_shape *s, io *x)
{
  at_plan *naive;
  at_plan_options o = {.impl = "naive"};
  TU_OK(at_plan_create(ctx, s, NULL, &o, &naive));
  uint8_t *poison = malloc(x->nq * 2);
  memset(poison, 0xFF, x->nq * 2);
  TU_OK(at_copy_to_device(ctx, x->o, poison, x->nq * 2));
  free(poison);
  TU_OK(at_plan_run(naive, &x->t_ref, NULL, NULL));
  TU_OK(at_plan_run(plan, &x->t, NULL, NULL));
  at_plan_destroy(naive);
  return compare(ctx, x, s->with_lse);
}

static void test_tuned_plan_uses_the_cached_cubin(void **state)
{
  (void)state;
  if (!g_have_gpu) skip();
  at_context *ctx;
  at_plan *plan;
  at_plan_info info;
  io x;
  TU_OK(at_context_create(0, g_db, 0, &ctx)); /* read-only */
  TU_OK(at_plan_create(ctx, &g_tuned, NULL, NULL, &plan));
  TU_OK(at_plan_describe(plan, &info));
  printf("  tuned: %s (%s, compiled %d, %.2f ms to create): %s\n", info.impl,
         at_choice_name(info.choice), info.compiled, info.create_ms, info.reason);
  assert_int_equal(info.choice, AT_CHOICE_EXACT);
  assert_int_equal(info.compiled, 0);
  make_io(ctx, &g_tuned, &x);
  double err = run_against_naive(ctx, plan, &g_tuned, &x);
  printf("  tuned plan vs naive: rel_l2 %.2e\n", err);
  assert_true(err < 1e-2);
  /* Wrong arguments are refused with a message. */
  at_tensors bad = x.t;
  bad.q = (const char *)x.t.q + 2;
  assert_int_equal(at_plan_run(plan, &bad, NULL, NULL), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "not 16-byte aligned"));
  bad = x.t;
  bad.k_stride.seq += 8;
  assert_int_equal(at_plan_run(plan, &bad, NULL, NULL), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "k strides"));
  bad = x.t;
  bad.lse = NULL;
  assert_int_equal(at_plan_run(plan, &bad, NULL, NULL), AT_ERR_INVALID);
  at_plan_destroy(plan);
  free_io(ctx, &x);
  at_context_destroy(ctx);
}

static void test_nearest_default_cudnn_and_naive_run(void **state)
{
  (void)state;
  if (!g_have_gpu) skip();
  at_context *ctx;
  TU_OK(at_context_create(0, g_db, 0, &ctx));
  struct {
    at_shape s;
    const char *impl;
    at_choice want;
  } cases[] = {
      {shape(333, 64, AT_MASK_CAUSAL_TL, 8, 2, 1), NULL, AT_CHOICE_NEAREST},
      {shape(200, 128, AT_MASK_NONE, 4, 4, 0), NULL, AT_CHOICE_DEFAULT},
      {shape(200, 128, AT_MASK_CAUSAL_BR, 4, 1, 1), "cudnn", AT_CHOICE_FORCED},
      {shape(77, 80, AT_MASK_NONE, 6, 1, 0), "fa2", AT_CHOICE_DEFAULT},
      {shape(64, 24, AT_MASK_NONE, 2, 2, 0), NULL, AT_CHOICE_CUDNN}, /* no fa2 for D=24? then cuDNN */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    at_plan *plan;
    at_plan_info info;
    at_plan_options o = {.impl = cases[i].impl};
    io x;
    TU_OK(at_plan_create(ctx, &cases[i].s, NULL, &o, &plan));
    TU_OK(at_plan_describe(plan, &info));
    make_io(ctx, &cases[i].s, &x);
    double err = run_against_naive(ctx, plan, &cases[i].s, &x);
    printf("  case %zu: %s (%s) rel_l2 %.2e: %s\n", i, info.impl, at_choice_name(info.choice), err, info.reason);
    if (i < 4) assert_int_equal(info.choice, cases[i].want);
    assert_true(err < 1e-2);
    at_plan_destroy(plan);
    free_io(ctx, &x);
  }
  at_context_destroy(ctx);
}

static void test_writable_cache_keeps_compiled_cubins(void **state)
{
  (void)state;
  if (!g_have_gpu) skip();
  at_shape s = shape(512, 96, AT_MASK_NONE, 4, 4, 0);
  for (int round = 0; round < 2; round++) {
    at_context *ctx;
    at_plan *plan;
    at_plan_info info;
    TU_OK(at_context_create(0, g_db_rw, AT_CONTEXT_CACHE_WRITABLE, &ctx));
    TU_OK(at_plan_create(ctx, &s, NULL, NULL, &plan));
    TU_OK(at_plan_describe(plan, &info));
    printf("  round %d: %s compiled %d, %.2f ms\n", round, info.impl, info.compiled, info.create_ms);
    assert_int_equal(info.choice, AT_CHOICE_DEFAULT);
    assert_int_equal(info.compiled, round == 0); /* the second context reads the stored cubin */
    at_plan_destroy(plan);
    at_context_destroy(ctx);
  }
}

typedef struct worker_arg {
  at_context *ctx;
  int index;
  double err;
  at_status rc;
  char message[256];
} worker_arg;

static void *worker(void *p)
{
  worker_arg *w = p;
  at_shape s = shape(128 + 64 * w->index, w->index % 2 ? 64 : 128, w->index % 3 ? AT_MASK_NONE : AT_MASK_CAUSAL_TL,
                     8, 2, 0);
  at_plan *plan;
  io x;
  w->err = INFINITY;
  if ((w->rc = at_plan_create(w->ctx, &s, NULL, NULL, &plan)) != AT_OK) {
    snprintf(w->message, sizeof w->message, "%s", at_last_error());
    return NULL;
  }
  make_io(w->ctx, &s, &x);
  for (int rep = 0; rep < 3; rep++) w->err = fmax(rep ? w->err : 0, run_against_naive(w->ctx, plan, &s, &x));
  at_plan_destroy(plan);
  free_io(w->ctx, &x);
  return NULL;
}

static void test_one_context_many_threads(void **state)
{
  (void)state;
  if (!g_have_gpu) skip();
  at_context *ctx;
  enum { N = 6 };
  pthread_t threads[N];
  worker_arg args[N];
  TU_OK(at_context_create(0, g_db, 0, &ctx));
  for (int i = 0; i < N; i++) {
    args[i] = (worker_arg){.ctx = ctx, .index = i};
    assert_int_equal(pthread_create(&threads[i], NULL, worker, &args[i]), 0);
  }
  for (int i = 0; i < N; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < N; i++) {
    if (args[i].rc != AT_OK) fail_msg("thread %d: %s", i, args[i].message);
    printf("  thread %d: rel_l2 %.2e\n", i, args[i].err);
    assert_true(args[i].err < 1e-2);
  }
  at_context_destroy(ctx);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tuned_plan_uses_the_cached_cubin),
      cmocka_unit_test(test_nearest_default_cudnn_and_naive_run),
      cmocka_unit_test(test_writable_cache_keeps_compiled_cubins),
      cmocka_unit_test(test_one_context_many_threads),
  };
  return TU_RUN_GROUP(tests, setup, teardown);
}
