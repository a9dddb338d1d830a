/* test_api_gpu.c — the public library on a GPU (skips without one): plans from a tuned cache
 * (cubins read, nothing compiled) match the naive kernels; a row measured with another cuDNN is
 * served and called stale; forced cuDNN and naive; a read-only cache; a writable one that keeps
 * compiled cubins; one context used from eight threads, each planning its own shapes (dtypes,
 * masks, head dims, decode) and running them on its own stream; clear errors for misaligned
 * pointers and wrong strides. */
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
static at_shape g_tuned, g_stale;

static at_shape shape(int t, int d, at_mask mask, int nq, int nkv, int lse)
{
  return (at_shape){.batch = 2, .q_len = t, .kv_len = t, .q_heads = nq, .kv_heads = nkv,
                    .head_dim = d, .dtype = AT_DTYPE_BF16, .mask = mask, .with_lse = lse};
}

/* One tuned row (and its cubin) for s, as `attntune tune` would leave it on this machine, but
 * measured with cudnn when that is not NULL. */
static void put_tuned_row(cache_db *db, const rt_ctx *ctx, const gen_target *target, const at_shape *s,
                          const char *cudnn)
{
  gen_variant v;
  rt_compiled c;
  cache_best b;
  TU_OK(gen_default_variant(s, target, &v));
  TU_OK(rt_compile_all(&v, 1, target, 1, &c));
  TU_OK(c.status);
  memset(&b, 0, sizeof b);
  b.shape = *s;
  snprintf(b.env.gpu_model, sizeof b.env.gpu_model, "%.127s", ctx->info.name);
  gen_templates_version(b.env.template_version, sizeof b.env.template_version);
  rt_nvrtc_version_text(b.env.nvrtc, sizeof b.env.nvrtc);
  rt_cudnn_version_text(b.env.cudnn, sizeof b.env.cudnn);
  if (cudnn) snprintf(b.env.cudnn, sizeof b.env.cudnn, "%s", cudnn);
  snprintf(b.impl, sizeof b.impl, "%s", c.key);
  b.time_ms = 0.01, b.tflops = 1, b.cudnn_ms = NAN, b.err_naive = NAN, b.err_cudnn = NAN;
  snprintf(b.arch, sizeof b.arch, "%s", ctx->arch);
  TU_OK(gen_entry_name(&v, b.entry, sizeof b.entry));
  b.cubin = c.binary.cubin, b.cubin_size = c.binary.cubin_size;
  TU_OK(cache_put_best(db, &b, NULL));
  rt_compiled_free(&c, 1);
}

/* The cache: g_tuned as this machine measures, g_stale as if an older cuDNN had. */
static void make_cache(void)
{
  rt_ctx ctx;
  gen_target target;
  cache_db *db;
  TU_OK(rt_ctx_open(0, &ctx));
  TU_OK(gen_target_make(ctx.arch, ctx.info.smem_per_block_optin, &target));
  TU_OK(cache_open(g_db, 0, &db));
  put_tuned_row(db, &ctx, &target, &g_tuned, NULL);
  put_tuned_row(db, &ctx, &target, &g_stale, "0.0.1");
  cache_close(db);
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
  g_stale = shape(640, 128, AT_MASK_CAUSAL_BR, 8, 4, 1); /* a kind no other case asks for */
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
  tn_rng rng = tu_rng(); /* from the main thread only: the threads' test has its own inputs */
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
  assert_null(strstr(info.reason, "stale")); /* measured with this process's cuDNN and NVRTC */
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

/* A row whose cuDNN baseline was another cuDNN's is served (its kernel is the verified one),
 * and the plan's reason says it is stale and why; without cuDNN here nothing can judge it. */
static void test_stale_row_is_served_and_called_stale(void **state)
{
  (void)state;
  if (!g_have_gpu) skip();
  at_context *ctx;
  at_plan *plan;
  at_plan_info info;
  io x;
  char cudnn[16];
  rt_cudnn_version_text(cudnn, sizeof cudnn);
  TU_OK(at_context_create(0, g_db, 0, &ctx));
  TU_OK(at_plan_create(ctx, &g_stale, NULL, NULL, &plan));
  TU_OK(at_plan_describe(plan, &info));
  printf("  stale row: %s (%s, compiled %d): %s\n", info.impl, at_choice_name(info.choice), info.compiled,
         info.reason);
  assert_int_equal(info.choice, AT_CHOICE_EXACT);
  assert_int_equal(info.compiled, 0);
  if (cudnn[0]) {
    char want[128];
    snprintf(want, sizeof want, "stale: compared with cuDNN 0.0.1, this process has cuDNN %s", cudnn);
    assert_non_null(strstr(info.reason, want));
  } else {
    printf("  no cuDNN here: the row cannot be judged by it\n");
    assert_null(strstr(info.reason, "stale"));
  }
  make_io(ctx, &g_stale, &x);
  double err = run_against_naive(ctx, plan, &g_stale, &x);
  printf("  stale row's plan vs naive: rel_l2 %.2e\n", err);
  assert_true(err < 1e-2);
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

/* ---- one context, eight threads, a stream each ------------------------------------------------
 *
 * Each thread plans its own shapes on the shared context (the chain, and cuDNN for some),
 * makes its own stream, and per round draws fresh inputs, poisons the outputs, runs the naive
 * plan and then the plan under test on that stream, and compares. cmocka's asserts are not for
 * other threads (a failure longjmps), so a thread records its first failure and the main thread
 * asserts. Uploads and the poison are synchronous copies on the legacy default stream, and the
 * streams are created blocking (flags 0) so that work on them waits for those copies. */

enum { N_THREADS = 8, SHAPES_PER_THREAD = 2, ROUNDS = 3 };

typedef struct thread_case {
  int b, t, s, nq, nkv, d;
  at_dtype dtype;
  at_mask mask;
  int lse;
  const char *impl; /* NULL: the lookup chain; "cudnn": cuDNN, when it is here and takes it */
} thread_case;

/* Thread i runs cases 2i and 2i+1. Case 0 is g_tuned (the cached row), filled in at run time. */
static thread_case THREAD_CASES[N_THREADS * SHAPES_PER_THREAD] = {
    {0},                                                              /* g_tuned: exact row */
    {1, 1, 4096, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE, 1, NULL},  /* decode T=1, GQA 4 */
    {2, 300, 300, 8, 2, 128, AT_DTYPE_F16, AT_MASK_CAUSAL_TL, 1, NULL},
    {1, 4, 1000, 16, 2, 64, AT_DTYPE_F16, AT_MASK_CAUSAL_BR, 0, NULL}, /* decode T=4, GQA 8 */
    {1, 512, 512, 4, 4, 256, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL, 0, "cudnn"},
    {2, 1, 777, 8, 1, 128, AT_DTYPE_F16, AT_MASK_NONE, 0, NULL},     /* decode MQA */
    {1, 200, 333, 6, 2, 96, AT_DTYPE_BF16, AT_MASK_NONE, 1, NULL},
    {3, 16, 512, 8, 8, 64, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, NULL}, /* decode T=16 */
    {1, 128, 640, 8, 4, 80, AT_DTYPE_F16, AT_MASK_CAUSAL_BR, 0, "cudnn"},
    {2, 1, 2048, 16, 16, 64, AT_DTYPE_BF16, AT_MASK_CAUSAL_BR, 1, NULL},
    {1, 384, 384, 16, 4, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL, 1, NULL},
    {1, 77, 1000, 12, 2, 80, AT_DTYPE_F16, AT_MASK_NONE, 1, NULL},
    {2, 64, 64, 4, 1, 192, AT_DTYPE_BF16, AT_MASK_NONE, 0, "cudnn"},
    {1, 1, 333, 8, 8, 256, AT_DTYPE_F16, AT_MASK_NONE, 1, NULL},     /* decode D=256 */
    {1, 1024, 1024, 8, 8, 64, AT_DTYPE_F16, AT_MASK_NONE, 0, NULL},
    {1, 8, 256, 32, 4, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL, 0, NULL}, /* decode T=8, top-left */
};

typedef struct thread_result {
  at_context *ctx;
  int index;
  int failed;
  char message[1024];       /* the first failure */
  double worst;             /* largest rel_l2 against naive over every case and round */
  char impls[SHAPES_PER_THREAD][GEN_KEY_MAX];
  at_choice choices[SHAPES_PER_THREAD];
} thread_result;

static void thread_fail(thread_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void thread_fail(thread_result *r, const char *fmt, ...)
{
  if (r->failed++) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
}

/* Records a failed call with its message; the caller then stops. */
#define THREAD_OK(r, expr)                                                                        \
  ((tu_rc_ = (expr)) == AT_OK ? 1                                                                 \
                              : (thread_fail((r), "thread %d: %s -> %s: %s", (r)->index, #expr,   \
                                             at_status_name(tu_rc_), at_last_error()), 0))

static at_shape case_shape(const thread_case *c)
{
  return (at_shape){.batch = c->b, .q_len = c->t, .kv_len = c->s, .q_heads = c->nq, .kv_heads = c->nkv,
                    .head_dim = c->d, .dtype = c->dtype, .mask = c->mask, .with_lse = c->lse};
}

/* Device buffers of one case. */
typedef struct case_io {
  void *q, *k, *v, *o, *o_ref, *lse, *lse_ref;
  size_t nq, nkv, nlse, esize;
} case_io;

static int alloc_io(thread_result *r, const at_shape *s, case_io *x)
{
  at_status tu_rc_;
  memset(x, 0, sizeof *x);
  x->esize = at_dtype_size(s->dtype);
  x->nq = (size_t)s->batch * s->q_len * s->q_heads * s->head_dim;
  x->nkv = (size_t)s->batch * s->kv_len * s->kv_heads * s->head_dim;
  x->nlse = (size_t)s->batch * s->q_heads * s->q_len;
  size_t sizes[7] = {x->nq, x->nkv, x->nkv, x->nq, x->nq, 0, 0};
  void **bufs[7] = {&x->q, &x->k, &x->v, &x->o, &x->o_ref, &x->lse, &x->lse_ref};
  for (int i = 0; i < 7; i++) {
    size_t bytes = i < 5 ? sizes[i] * x->esize : x->nlse * sizeof(float);
    if (!THREAD_OK(r, at_device_alloc(r->ctx, bytes, bufs[i]))) return 0;
  }
  return 1;
}

static void free_case_io(at_context *ctx, case_io *x)
{
  void *all[7] = {x->q, x->k, x->v, x->o, x->o_ref, x->lse, x->lse_ref};
  for (int i = 0; i < 7; i++) at_device_free(ctx, all[i]);
}

/* Fresh random values (rounded to the dtype) packed and copied to dst. */
static int upload_random(thread_result *r, tn_rng *rng, at_dtype dtype, void *dst, size_t n)
{
  at_status tu_rc_;
  float *h = malloc(n * sizeof *h);
  void *packed = malloc(n * at_dtype_size(dtype));
  int ok = h && packed;
  if (!ok) thread_fail(r, "thread %d: no host memory for %zu values", r->index, n);
  if (ok) {
    tn_rng_fill(rng, h, n, -1.0f, 1.0f);
    tn_round_to_dtype(dtype, h, n);
    ok = THREAD_OK(r, tn_pack(dtype, h, n, packed)) &&
         THREAD_OK(r, at_copy_to_device(r->ctx, dst, packed, n * at_dtype_size(dtype)));
  }
  free(h), free(packed);
  return ok;
}

/* Every byte 0xFF: NaN in f16, bf16 and f32 alike. */
static int poison(thread_result *r, void *dst, size_t bytes)
{
  at_status tu_rc_;
  unsigned char *h = malloc(bytes);
  if (!h) return thread_fail(r, "thread %d: no host memory to poison %zu bytes", r->index, bytes), 0;
  memset(h, 0xFF, bytes);
  int ok = THREAD_OK(r, at_copy_to_device(r->ctx, dst, h, bytes));
  free(h);
  return ok;
}

/* rel_l2 of o against o_ref (both in the dtype), INFINITY when o holds a NaN or the lse rows
 * differ; ok 0 when a copy failed. */
static double compare_case(thread_result *r, const at_shape *s, const case_io *x, int *ok)
{
  at_status tu_rc_;
  size_t bytes = x->nq * x->esize;
  void *pa = malloc(bytes), *pb = malloc(bytes);
  float *a = malloc(x->nq * sizeof *a), *b = malloc(x->nq * sizeof *b);
  float *la = malloc(x->nlse * sizeof *la), *lb = malloc(x->nlse * sizeof *lb);
  double err = INFINITY;
  *ok = pa && pb && a && b && la && lb;
  if (!*ok) thread_fail(r, "thread %d: no host memory to compare", r->index);
  *ok = *ok && THREAD_OK(r, at_copy_to_host(r->ctx, pa, x->o, bytes)) &&
        THREAD_OK(r, at_copy_to_host(r->ctx, pb, x->o_ref, bytes)) && THREAD_OK(r, tn_unpack(s->dtype, pa, x->nq, a)) &&
        THREAD_OK(r, tn_unpack(s->dtype, pb, x->nq, b));
  if (*ok) {
    double d2 = 0, r2 = 0;
    int finite = 1;
    for (size_t i = 0; i < x->nq; i++) {
      if (!isfinite(a[i]) || !isfinite(b[i])) finite = 0;
      d2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r2 += (double)b[i] * b[i];
    }
    err = finite && r2 > 0 ? sqrt(d2 / r2) : INFINITY;
  }
  if (*ok && s->with_lse) {
    *ok = THREAD_OK(r, at_copy_to_host(r->ctx, la, x->lse, x->nlse * sizeof(float))) &&
          THREAD_OK(r, at_copy_to_host(r->ctx, lb, x->lse_ref, x->nlse * sizeof(float)));
    for (size_t i = 0; *ok && i < x->nlse; i++) {
      int both_empty = isinf(la[i]) && la[i] < 0 && isinf(lb[i]) && lb[i] < 0; /* a row that sees no key */
      if (!both_empty && !(fabsf(la[i] - lb[i]) <= 1e-3f * (1 + fabsf(lb[i])))) err = INFINITY;
    }
  }
  free(pa), free(pb), free(a), free(b), free(la), free(lb);
  return err;
}

/* One round of case c: fresh inputs, poisoned outputs, naive then plan on stream, compare. */
static int run_round(thread_result *r, const thread_case *c, at_plan *plan, at_plan *naive, case_io *x,
                     CUstream stream, uint64_t stream_id, double *err)
{
  at_status tu_rc_;
  at_shape s = case_shape(c);
  at_layout l = at_layout_bshd(&s);
  tn_rng rng = tu_rng_for(stream_id);
  if (!upload_random(r, &rng, s.dtype, x->q, x->nq) || !upload_random(r, &rng, s.dtype, x->k, x->nkv) ||
      !upload_random(r, &rng, s.dtype, x->v, x->nkv))
    return 0;
  if (!poison(r, x->o, x->nq * x->esize) || !poison(r, x->o_ref, x->nq * x->esize) ||
      !poison(r, x->lse, x->nlse * sizeof(float)) || !poison(r, x->lse_ref, x->nlse * sizeof(float)))
    return 0;
  at_tensors t = {x->q, x->k, x->v, x->o, s.with_lse ? x->lse : NULL, l.q, l.k, l.v, l.o};
  at_tensors t_ref = t;
  t_ref.o = x->o_ref, t_ref.lse = s.with_lse ? x->lse_ref : NULL;
  if (!THREAD_OK(r, at_plan_run(naive, &t_ref, NULL, stream)) || !THREAD_OK(r, at_plan_run(plan, &t, NULL, stream)) ||
      !THREAD_OK(r, RT_CU(rt_cu()->cuStreamSynchronize(stream))))
    return 0;
  int ok = 0;
  *err = compare_case(r, &s, x, &ok);
  return ok;
}

/* A plan for case c: the chain, or cuDNN when asked for (falling back to the chain, said, when
 * cuDNN is not here or declines the shape). */
static int plan_case(thread_result *r, const thread_case *c, int k, at_plan **plan, at_plan **naive)
{
  at_status tu_rc_;
  at_shape s = case_shape(c);
  at_plan_options naive_o = {.impl = "naive"}, o = {.impl = c->impl};
  at_plan_info info;
  *plan = *naive = NULL;
  at_status rc = at_plan_create(r->ctx, &s, NULL, &o, plan);
  if (rc != AT_OK && c->impl && (rc == AT_ERR_CUDNN || rc == AT_ERR_UNSUPPORTED)) {
    printf("  thread %d case %d: cuDNN not used (%s); the chain instead\n", r->index, k, at_last_error());
    rc = at_plan_create(r->ctx, &s, NULL, NULL, plan);
  }
  if (rc != AT_OK) return thread_fail(r, "thread %d: at_plan_create case %d: %s", r->index, k, at_last_error()), 0;
  if (!THREAD_OK(r, at_plan_describe(*plan, &info)) || !THREAD_OK(r, at_plan_create(r->ctx, &s, NULL, &naive_o, naive)))
    return 0;
  snprintf(r->impls[k], sizeof r->impls[k], "%s", info.impl);
  r->choices[k] = info.choice;
  return 1;
}

static void *thread_main(void *p)
{
  thread_result *r = p;
  at_status tu_rc_;
  CUstream stream = NULL;
  /* Any call binds the context's GPU to this thread; the stream needs it current. */
  if (!THREAD_OK(r, at_synchronize(r->ctx)) || !THREAD_OK(r, RT_CU(rt_cu()->cuStreamCreate(&stream, 0))))
    return NULL;
  for (int k = 0; k < SHAPES_PER_THREAD && !r->failed; k++) {
    int index = r->index * SHAPES_PER_THREAD + k;
    const thread_case *c = &THREAD_CASES[index];
    at_shape s = case_shape(c);
    at_plan *plan = NULL, *naive = NULL;
    case_io x;
    memset(&x, 0, sizeof x);
    if (plan_case(r, c, k, &plan, &naive) && alloc_io(r, &s, &x)) {
      for (int round = 0; round < ROUNDS && !r->failed; round++) {
        double err = INFINITY;
        if (!run_round(r, c, plan, naive, &x, stream, (uint64_t)index * ROUNDS + round, &err)) break;
        if (!(err < 1e-2))
          thread_fail(r, "thread %d case %d (%s) round %d: rel_l2 %.3e against naive", r->index, index, r->impls[k],
                      round, err);
        if (err > r->worst || !isfinite(err)) r->worst = err;
      }
    }
    free_case_io(r->ctx, &x); /* what was allocated, also after a failure */
    at_plan_destroy(plan);
    at_plan_destroy(naive);
  }
  if (stream) (void)THREAD_OK(r, RT_CU(rt_cu()->cuStreamDestroy(stream)));
  return NULL;
}

static void test_one_context_eight_threads_own_streams(void **state)
{
  (void)state;
  if (!g_have_gpu) skip();
  at_context *ctx;
  pthread_t threads[N_THREADS];
  thread_result results[N_THREADS];
  const at_shape *t0 = &g_tuned;
  THREAD_CASES[0] = (thread_case){t0->batch, t0->q_len, t0->kv_len, t0->q_heads, t0->kv_heads, t0->head_dim,
                                  t0->dtype, t0->mask, t0->with_lse, NULL};
  TU_OK(at_context_create(0, g_db, 0, &ctx));
  for (int i = 0; i < N_THREADS; i++) {
    results[i] = (thread_result){.ctx = ctx, .index = i};
    assert_int_equal(pthread_create(&threads[i], NULL, thread_main, &results[i]), 0);
  }
  for (int i = 0; i < N_THREADS; i++) assert_int_equal(pthread_join(threads[i], NULL), 0);
  int failed = 0;
  for (int i = 0; i < N_THREADS; i++) {
    const thread_result *r = &results[i];
    for (int k = 0; k < SHAPES_PER_THREAD; k++) {
      char key[160];
      at_shape s = case_shape(&THREAD_CASES[i * SHAPES_PER_THREAD + k]);
      at_shape_key(&s, key, sizeof key);
      printf("  thread %d: %-44s %-48s (%s)\n", i, key, r->impls[k], at_choice_name(r->choices[k]));
    }
    printf("  thread %d: worst rel_l2 %.2e over %d rounds%s%s\n", i, r->worst, ROUNDS, r->failed ? ": " : "",
           r->failed ? r->message : "");
    failed += r->failed != 0;
  }
  at_context_destroy(ctx);
  assert_int_equal(failed, 0);
  /* The tuned shape came from its row, in a thread, while the others planned. */
  assert_int_equal(results[0].choices[0], AT_CHOICE_EXACT);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tuned_plan_uses_the_cached_cubin),
      cmocka_unit_test(test_stale_row_is_served_and_called_stale),
      cmocka_unit_test(test_nearest_default_cudnn_and_naive_run),
      cmocka_unit_test(test_writable_cache_keeps_compiled_cubins),
      cmocka_unit_test(test_one_context_eight_threads_own_streams),
  };
  return TU_RUN_GROUP(tests, setup, teardown);
}
