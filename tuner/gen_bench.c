/*
 * gen_bench.c — `attntune gen --bench`. For one shape on GPU 0: compile every listed variant,
 * verify each against the naive reference (fp32 output, output poisoned first, fresh random inputs),
 * then time the verified ones and the naive path the same way:
 *   - warm-up launches, then `reps` launches enqueued back to back with an event between each two,
 *     behind a few large memsets that keep the GPU busy while the host enqueues, so that each
 *     interval holds one kernel and not the host's launch latency; the median interval is reported;
 *   - inputs rotate among enough sets to be at least twice the L2, so small shapes are not timed
 *     out of the cache.
 * TFLOP/s = 4·B·Nq·T·S·D / t, halved for causal masks with T = S.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/cli.h"
#include "tuner/gen_bench.h"
#include "tuner/reference.h"

typedef struct tensor_set {
  CUdeviceptr q, k, v, o;
} tensor_set;

typedef struct bench {
  at_shape shape;
  size_t nq, nkv, nlse; /* elements of Q (and O), of K (and V), of lse */
  int n_sets;
  tensor_set *sets;
  CUdeviceptr lse, scratch, cover;
  size_t cover_words;
  at_tensors layout; /* strides; pointers filled per launch */
} bench;

typedef struct launch_ctx {
  bench *b;
  const gen_variant *variant;
  CUfunction fn;
  const rt_naive *naive;
} launch_ctx;

static double bench_flops(const at_shape *s)
{
  double f = 4.0 * s->batch * s->q_heads * (double)s->q_len * s->kv_len * s->head_dim;
  return s->mask != AT_MASK_NONE && s->q_len == s->kv_len ? f / 2 : f;
}

static at_tensors tensors_of(const bench *b, int set)
{
  at_tensors t = b->layout;
  const tensor_set *ts = &b->sets[set % b->n_sets];
  t.q = (void *)(uintptr_t)ts->q, t.k = (void *)(uintptr_t)ts->k, t.v = (void *)(uintptr_t)ts->v;
  t.o = (void *)(uintptr_t)ts->o;
  t.lse = b->shape.with_lse ? (float *)(uintptr_t)b->lse : NULL;
  return t;
}

static at_status launch_variant(launch_ctx *c, int set)
{
  at_tensors t = tensors_of(c->b, set);
  return gen_launch(c->variant, c->fn, &c->b->shape, &t, NULL);
}

static at_status launch_naive(launch_ctx *c, int set)
{
  at_tensors t = tensors_of(c->b, set);
  return rt_naive_run(c->naive, &c->b->shape, &t, c->b->scratch, NULL);
}

typedef at_status (*launch_fn)(launch_ctx *c, int set);

static int cmp_float(const void *a, const void *b)
{
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static at_status time_launches(launch_fn launch, launch_ctx *c, int reps, double *median_ms)
{
  const rt_driver *cu = rt_cu();
  CUevent *ev = calloc((size_t)reps + 1, sizeof *ev);
  float *ms = calloc((size_t)reps, sizeof *ms);
  at_status rc = AT_OK;
  int made = 0;
  if (!ev || !ms) {
    rc = rt_fail(AT_ERR_NOMEM, "no memory for %d timing events", reps);
    goto out;
  }
  for (; made <= reps; made++)
    if ((rc = RT_CU(cu->cuEventCreate(&ev[made], CU_EVENT_DEFAULT))) != AT_OK) goto out;
  for (int i = 0; i < 3; i++)
    if ((rc = launch(c, i)) != AT_OK) goto out;
  if ((rc = RT_CU(cu->cuCtxSynchronize())) != AT_OK) goto out;
  for (int i = 0; i < 8; i++) /* keep the GPU busy while the launches below are enqueued */
    if ((rc = rt_fill_u32(c->b->cover, (uint32_t)i, c->b->cover_words)) != AT_OK) goto out;
  if ((rc = RT_CU(cu->cuEventRecord(ev[0], NULL))) != AT_OK) goto out;
  for (int r = 0; r < reps; r++) {
    if ((rc = launch(c, r)) != AT_OK) goto out;
    if ((rc = RT_CU(cu->cuEventRecord(ev[r + 1], NULL))) != AT_OK) goto out;
  }
  for (int r = 0; r < reps; r++)
    if ((rc = rt_event_ms(ev[r], ev[r + 1], &ms[r])) != AT_OK) goto out;
  qsort(ms, (size_t)reps, sizeof *ms, cmp_float);
  *median_ms = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
out:
  for (int i = 0; i < made; i++) cu->cuEventDestroy(ev[i]);
  free(ev);
  free(ms);
  return rc;
}

static at_status upload_random(tn_rng *rng, at_dtype dtype, size_t n, CUdeviceptr *dev)
{
  float *x = malloc(n * sizeof *x);
  void *packed = malloc(n * at_dtype_size(dtype));
  at_status rc = AT_OK;
  if (!x || !packed) {
    rc = rt_fail(AT_ERR_NOMEM, "no memory for %zu input elements", n);
    goto out;
  }
  tn_rng_fill(rng, x, n, -1.0f, 1.0f);
  if ((rc = tn_pack(dtype, x, n, packed)) != AT_OK) goto out;
  if ((rc = rt_alloc(dev, n * at_dtype_size(dtype))) != AT_OK) goto out;
  rc = rt_upload(*dev, packed, n * at_dtype_size(dtype));
out:
  free(x);
  free(packed);
  return rc;
}

static at_status bench_setup(bench *b, const at_shape *shape, size_t l2_bytes)
{
  const at_shape *s = shape;
  size_t esz = at_dtype_size(s->dtype);
  at_status rc;
  memset(b, 0, sizeof *b);
  b->shape = *s;
  b->nq = (size_t)s->batch * s->q_len * s->q_heads * s->head_dim;
  b->nkv = (size_t)s->batch * s->kv_len * s->kv_heads * s->head_dim;
  b->nlse = (size_t)s->batch * s->q_heads * s->q_len;
  size_t set_bytes = (2 * b->nq + 2 * b->nkv) * esz;
  b->n_sets = (int)((2 * l2_bytes + set_bytes - 1) / set_bytes);
  if (b->n_sets < 1) b->n_sets = 1;
  if (b->n_sets > 64) b->n_sets = 64;
  b->sets = calloc((size_t)b->n_sets, sizeof *b->sets);
  if (!b->sets) return rt_fail(AT_ERR_NOMEM, "no memory for %d input sets", b->n_sets);
  tn_rng rng = tn_rng_seeded(tn_fresh_seed());
  for (int i = 0; i < b->n_sets; i++) {
    tensor_set *t = &b->sets[i];
    if ((rc = upload_random(&rng, s->dtype, b->nq, &t->q)) != AT_OK ||
        (rc = upload_random(&rng, s->dtype, b->nkv, &t->k)) != AT_OK ||
        (rc = upload_random(&rng, s->dtype, b->nkv, &t->v)) != AT_OK ||
        (rc = rt_alloc(&t->o, b->nq * esz)) != AT_OK)
      return rc;
  }
  if ((rc = rt_alloc(&b->lse, b->nlse * sizeof(float))) != AT_OK) return rc;
  if ((rc = rt_alloc(&b->scratch, rt_naive_scratch_bytes(s))) != AT_OK) return rc;
  b->cover_words = 128u << 20; /* 512 MB: a few tenths of a ms per memset */
  if ((rc = rt_alloc(&b->cover, b->cover_words * 4)) != AT_OK) return rc;
  b->layout.q_stride = b->layout.o_stride = at_strides_bshd(s->q_len, s->q_heads, s->head_dim);
  b->layout.k_stride = b->layout.v_stride = at_strides_bshd(s->kv_len, s->kv_heads, s->head_dim);
  return AT_OK;
}

static void bench_free(bench *b)
{
  for (int i = 0; b->sets && i < b->n_sets; i++) {
    rt_free(b->sets[i].q), rt_free(b->sets[i].k), rt_free(b->sets[i].v), rt_free(b->sets[i].o);
  }
  free(b->sets);
  rt_free(b->lse), rt_free(b->scratch), rt_free(b->cover);
}

/* The reference on set 0: naive kernels with fp32 output, widened to double for tn_compare. */
typedef struct reference {
  double *o, *lse;
} reference;

static at_status make_reference(bench *b, const char *arch, reference *ref)
{
  rt_naive naive;
  CUdeviceptr o32 = 0;
  float *host = NULL;
  at_status rc;
  size_t n = b->nq > b->nlse ? b->nq : b->nlse;
  memset(ref, 0, sizeof *ref);
  if ((rc = rt_naive_create(arch, b->shape.dtype, AT_DTYPE_F32, &naive)) != AT_OK) return rc;
  ref->o = malloc(b->nq * sizeof(double));
  ref->lse = malloc(b->nlse * sizeof(double));
  host = malloc(n * sizeof(float));
  if (!ref->o || !ref->lse || !host) {
    rc = rt_fail(AT_ERR_NOMEM, "no memory for the reference output (%zu elements)", b->nq);
    goto out;
  }
  if ((rc = rt_alloc(&o32, b->nq * sizeof(float))) != AT_OK) goto out;
  at_shape s = b->shape;
  s.with_lse = 1;
  at_tensors t = tensors_of(b, 0);
  t.o = (void *)(uintptr_t)o32;
  t.lse = (float *)(uintptr_t)b->lse;
  if ((rc = rt_naive_run(&naive, &s, &t, b->scratch, NULL)) != AT_OK) goto out;
  if ((rc = RT_CU(rt_cu()->cuCtxSynchronize())) != AT_OK) goto out;
  if ((rc = rt_download(host, o32, b->nq * sizeof(float))) != AT_OK) goto out;
  for (size_t i = 0; i < b->nq; i++) ref->o[i] = host[i];
  if ((rc = rt_download(host, b->lse, b->nlse * sizeof(float))) != AT_OK) goto out;
  for (size_t i = 0; i < b->nlse; i++) ref->lse[i] = host[i];
out:
  rt_free(o32);
  free(host);
  rt_naive_destroy(&naive);
  return rc;
}

/* Run once on poisoned outputs and compare with the reference. */
static at_status verify(launch_ctx *c, const reference *ref, double *err_o, double *err_lse)
{
  bench *b = c->b;
  size_t n = b->nq > b->nlse ? b->nq : b->nlse;
  float *host = malloc(n * sizeof(float));
  void *packed = malloc(b->nq * at_dtype_size(b->shape.dtype));
  at_status rc;
  *err_o = *err_lse = NAN;
  if (!host || !packed) {
    rc = rt_fail(AT_ERR_NOMEM, "no memory to check %zu outputs", b->nq);
    goto out;
  }
  if ((rc = rt_fill_u8(b->sets[0].o, 0xFF, b->nq * at_dtype_size(b->shape.dtype))) != AT_OK ||
      (rc = rt_fill_u8(b->lse, 0xFF, b->nlse * sizeof(float))) != AT_OK)
    goto out;
  if ((rc = launch_variant(c, 0)) != AT_OK) goto out;
  if ((rc = RT_CU(rt_cu()->cuCtxSynchronize())) != AT_OK) goto out;
  if ((rc = rt_download(packed, b->sets[0].o, b->nq * at_dtype_size(b->shape.dtype))) != AT_OK) goto out;
  if ((rc = tn_unpack(b->shape.dtype, packed, b->nq, host)) != AT_OK) goto out;
  tn_error e = tn_compare(ref->o, host, b->nq);
  *err_o = e.n_nonfinite ? INFINITY : e.rel_l2;
  *err_lse = 0;
  if (b->shape.with_lse) {
    if ((rc = rt_download(host, b->lse, b->nlse * sizeof(float))) != AT_OK) goto out;
    tn_error el = tn_compare_lse(ref->lse, host, b->nlse);
    *err_lse = el.n_nonfinite ? INFINITY : el.rel_l2;
  }
out:
  free(host);
  free(packed);
  return rc;
}

typedef struct result {
  double err_o, err_lse, ms;
  int ok;
} result;

static int run_bench(bench *b, const rt_ctx *ctx, const gen_target *target, const gen_variant *vs, int n,
                     int reps, int jobs)
{
  const double tol = 1e-2;
  gen_compiled *compiled = calloc((size_t)n, sizeof *compiled);
  CUmodule *modules = calloc((size_t)n, sizeof *modules);
  result *res = calloc((size_t)n, sizeof *res);
  reference ref = {0};
  rt_naive naive = {0};
  int have_naive = 0, code = TN_EXIT_RUNTIME, wrong = 0;
  at_status rc;
  if (!compiled || !modules || !res) {
    rc = rt_fail(AT_ERR_NOMEM, "no memory for %d variants", n);
    goto fail;
  }
  gen_compile_all(vs, n, target, jobs, compiled);
  if ((rc = make_reference(b, ctx->arch, &ref)) != AT_OK) goto fail;
  const at_shape *s = &b->shape;
  double flops = bench_flops(s);
  printf("shape B%d T%d S%d Nq%d Nkv%d D%d %s %s%s: %.3g GFLOP, %d input set(s)\n", s->batch, s->q_len,
         s->kv_len, s->q_heads, s->kv_heads, s->head_dim, at_dtype_name(s->dtype), at_mask_name(s->mask),
         s->with_lse ? " lse" : "", flops / 1e9, b->n_sets);
  printf("%-48s %5s %9s %9s %10s %8s\n", "variant", "regs", "rel_l2", "lse_l2", "ms", "TFLOP/s");
  int best = -1;
  for (int i = 0; i < n; i++) {
    gen_compiled *c = &compiled[i];
    char entry[GEN_KEY_MAX];
    CUfunction fn;
    if (c->status != AT_OK) {
      printf("%-48s compile FAILED: %s\n", c->key, c->message);
      wrong++;
      continue;
    }
    if ((rc = gen_entry_name(&vs[i], entry, sizeof entry)) != AT_OK ||
        (rc = rt_module_load(c->binary.cubin, &modules[i])) != AT_OK ||
        (rc = rt_module_function(modules[i], entry, &fn)) != AT_OK)
      goto fail;
    launch_ctx lc = {b, &vs[i], fn, NULL};
    if ((rc = verify(&lc, &ref, &res[i].err_o, &res[i].err_lse)) != AT_OK) goto fail;
    res[i].ok = res[i].err_o < tol && res[i].err_lse < tol;
    if (!res[i].ok) {
      printf("%-48s %5d %9.2e %9.2e WRONG\n", c->key, c->resources.registers, res[i].err_o, res[i].err_lse);
      wrong++;
      continue;
    }
    if ((rc = time_launches(launch_variant, &lc, reps, &res[i].ms)) != AT_OK) goto fail;
    printf("%-48s %5d %9.2e %9.2e %10.4f %8.1f\n", c->key, c->resources.registers, res[i].err_o,
           res[i].err_lse, res[i].ms, flops / (res[i].ms * 1e-3) / 1e12);
    if (best < 0 || res[i].ms < res[best].ms) best = i;
  }

  if ((rc = rt_naive_create(ctx->arch, s->dtype, s->dtype, &naive)) != AT_OK) goto fail;
  have_naive = 1;
  double naive_ms = 0;
  launch_ctx nc = {b, NULL, NULL, &naive};
  if ((rc = time_launches(launch_naive, &nc, reps < 10 ? reps : 10, &naive_ms)) != AT_OK) goto fail;

  gen_variant def;
  int def_index = -1;
  if (gen_default_variant(s, target, &def) == AT_OK)
    for (int i = 0; i < n; i++)
      if (memcmp(&vs[i], &def, sizeof def) == 0 && res[i].ok) def_index = i;
  printf("summary B%d T%d S%d Nq%d Nkv%d D%d %s %s:", s->batch, s->q_len, s->kv_len, s->q_heads,
         s->kv_heads, s->head_dim, at_dtype_name(s->dtype), at_mask_name(s->mask));
  if (best >= 0)
    printf(" best %s %.4f ms %.1f TFLOP/s |", compiled[best].key, res[best].ms, flops / (res[best].ms * 1e-3) / 1e12);
  if (def_index >= 0)
    printf(" default %.4f ms %.1f TFLOP/s |", res[def_index].ms, flops / (res[def_index].ms * 1e-3) / 1e12);
  printf(" naive %.4f ms %.1f TFLOP/s\n", naive_ms, flops / (naive_ms * 1e-3) / 1e12);
  code = wrong ? TN_EXIT_RUNTIME : TN_EXIT_OK;
  if (wrong) fprintf(stderr, "attntune gen: %d variant(s) failed to compile or verify\n", wrong);
  goto out;
fail:
  code = tn_report_failure("gen", rc);
out:
  if (have_naive) rt_naive_destroy(&naive);
  for (int i = 0; modules && i < n; i++)
    if (modules[i]) rt_module_unload(modules[i]);
  if (compiled) gen_compiled_free(compiled, n);
  free(compiled), free(modules), free(res), free(ref.o), free(ref.lse);
  return code;
}

int tn_gen_bench(const at_shape *shape, const gen_target *target, const gen_variant *vs, int n, int reps,
                 int jobs)
{
  rt_ctx ctx;
  bench b;
  at_status rc = rt_ctx_open(0, &ctx);
  if (rc != AT_OK) return tn_report_failure("gen", rc);
  if ((rc = at_shape_check(shape)) != AT_OK) {
    rt_ctx_close(&ctx);
    return tn_report_failure("gen", rc);
  }
  int code;
  if ((rc = bench_setup(&b, shape, (size_t)ctx.info.l2_bytes)) != AT_OK)
    code = tn_report_failure("gen", rc);
  else
    code = run_bench(&b, &ctx, target, vs, n, reps, jobs);
  bench_free(&b);
  rt_ctx_close(&ctx);
  return code;
}
