/* bench_serving.c — see bench_serving.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attntune_fp8.h"
#include "core/core.h"
#include "generator/generator.h"
#include "runtime/api_internal.h"
#include "runtime/lookup.h"
#include "runtime/rt.h"
#include "tuner/bench_serving.h"
#include "tuner/cli.h"
#include "tuner/measure.h"
#include "tuner/reference.h"

/* ---- setup (no GPU) ---------------------------------------------------------------------------- */

static int max_of(const int *v, int n)
{
  int m = 0;
  for (int i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
  return m;
}

int tn_serving_bench_setup(const char *lengths, int page_size, int q_len_given, const at_shape *s,
                           tn_serving_bench *b)
{
  memset(b, 0, sizeof *b);
  b->shape = *s;
  int n = s->batch;
  if (lengths) {
    if (at_lengths_parse(lengths, s->batch, TN_SERVING_MAX_BATCH, b->kv_lens, &n) != AT_OK)
      return tn_usage_error("bench", "--lengths: %s", at_last_error()), 0;
  } else {
    if (n > TN_SERVING_MAX_BATCH)
      return tn_usage_error("bench", "--batch %d with --page-size: at most %d sequences", n, TN_SERVING_MAX_BATCH), 0;
    for (int i = 0; i < n; i++) b->kv_lens[i] = s->kv_len;
  }
  if (page_size && !at_page_size_allowed(page_size))
    return tn_usage_error("bench", "--page-size %d not allowed (expected %s)", page_size, at_page_sizes_text()), 0;
  const int q_ragged = lengths && !q_len_given;
  const int longest = max_of(b->kv_lens, n) > 0 ? max_of(b->kv_lens, n) : 1; /* a shape's maxima are >= 1 */
  for (int i = 0; i < n; i++) b->q_lens[i] = q_ragged ? b->kv_lens[i] : s->q_len;
  b->shape.batch = n;
  b->shape.kv_len = longest;
  b->shape.q_len = q_ragged ? longest : s->q_len;
  if (at_shape_check(&b->shape) != AT_OK) return tn_usage_error("bench", "%s", at_last_error()), 0;
  const at_seq_layout kv = page_size ? AT_SEQ_PAGED : (lengths ? AT_SEQ_RAGGED : AT_SEQ_PADDED);
  b->layout = at_serving_layout_make(&b->shape, q_ragged ? AT_SEQ_RAGGED : AT_SEQ_PADDED, kv, page_size);
  if (at_serving_layout_check(&b->shape, &b->layout) != AT_OK)
    return tn_usage_error("bench", "%s", at_last_error()), 0;
  return 1;
}

/* ---- inputs -------------------------------------------------------------------------------------- */

/* Random inputs are drawn and uploaded this many elements at a time (a host buffer of that many). */
enum { FILL_CHUNK = 64 * TN_RANDOM_CHUNK };

/* n random elements of dtype in [-1, 1) (FP8 codes at unit scale; tn_random_packed), uploaded
 * chunk by chunk, each chunk from the next seed of rng. */
static at_status fill_random(at_context *ctx, at_dtype dtype, void *dev, size_t n, tn_rng *rng)
{
  const size_t esz = at_dtype_size(dtype);
  unsigned char *packed = malloc(FILL_CHUNK * esz);
  at_status rc = packed ? AT_OK : at_fail(AT_ERR_NOMEM, "no memory for random inputs");
  for (size_t done = 0; done < n && rc == AT_OK; done += FILL_CHUNK) {
    const size_t m = n - done < FILL_CHUNK ? n - done : FILL_CHUNK;
    rc = tn_random_packed(tn_rng_u64(rng), dtype, m, packed);
    if (rc == AT_OK) rc = at_copy_to_device(ctx, (unsigned char *)dev + done * esz, packed, m * esz);
  }
  free(packed);
  return rc;
}

static at_status alloc_filled(at_context *ctx, at_dtype dtype, size_t n, tn_rng *rng, void **dev)
{
  at_status rc = at_device_alloc(ctx, n * at_dtype_size(dtype) + 16, dev);
  return rc == AT_OK ? fill_random(ctx, dtype, *dev, n, rng) : rc;
}

static at_status upload_ints(at_context *ctx, const int32_t *host, size_t n, int32_t **dev)
{
  at_status rc = at_device_alloc(ctx, n * sizeof *host, (void **)dev);
  return rc == AT_OK ? at_copy_to_device(ctx, *dev, host, n * sizeof *host) : rc;
}

/* A block table that hands out the pool's pages in shuffled order; entries past a sequence's
 * pages are -1 (never read). */
static int32_t *shuffled_table(const tn_serving_bench *b, int num_pages, tn_rng *rng)
{
  const int ps = b->layout.page_size, maxp = b->layout.max_pages_per_seq, n = b->shape.batch;
  int32_t *order = malloc((size_t)num_pages * sizeof *order);
  int32_t *table = malloc((size_t)n * maxp * sizeof *table);
  if (!order || !table) return free(order), free(table), NULL;
  for (int i = 0; i < num_pages; i++) order[i] = i;
  for (int i = num_pages - 1; i > 0; i--) {
    int j = (int)(tn_rng_uniform(rng, 0.0f, 1.0f) * (float)(i + 1));
    if (j > i) j = i;
    int32_t t = order[i];
    order[i] = order[j], order[j] = t;
  }
  int next = 0;
  for (int s = 0; s < n; s++)
    for (int p = 0; p < maxp; p++) table[s * maxp + p] = p < (b->kv_lens[s] + ps - 1) / ps ? order[next++] : -1;
  free(order);
  return table;
}

static at_status upload_metadata(at_context *ctx, const tn_serving_bench *b, tn_rng *rng, tn_serving_buffers *x)
{
  const int n = b->shape.batch;
  int32_t *cu = malloc((size_t)(n + 1) * sizeof *cu);
  at_status rc = cu ? AT_OK : at_fail(AT_ERR_NOMEM, "no memory for offsets");
  if (rc == AT_OK && b->layout.q_layout == AT_SEQ_RAGGED) {
    cu[0] = 0;
    for (int i = 0; i < n; i++) cu[i + 1] = cu[i] + b->q_lens[i];
    rc = upload_ints(ctx, cu, (size_t)n + 1, &x->cu_q);
  }
  if (rc == AT_OK && b->layout.kv_layout == AT_SEQ_RAGGED) {
    cu[0] = 0;
    for (int i = 0; i < n; i++) cu[i + 1] = cu[i] + b->kv_lens[i];
    rc = upload_ints(ctx, cu, (size_t)n + 1, &x->cu_kv);
  }
  if (rc == AT_OK && b->layout.kv_layout == AT_SEQ_PAGED) {
    int32_t *table = shuffled_table(b, x->num_pages, rng);
    rc = table ? upload_ints(ctx, table, (size_t)n * b->layout.max_pages_per_seq, &x->table)
               : at_fail(AT_ERR_NOMEM, "no memory for the block table");
    if (rc == AT_OK) rc = upload_ints(ctx, b->kv_lens, (size_t)n, &x->lens);
    free(table);
  }
  free(cu);
  return rc;
}

static long long sum_of(const int *v, int n)
{
  long long s = 0;
  for (int i = 0; i < n; i++) s += v[i];
  return s;
}

at_status tn_serving_buffers_make(at_context *ctx, const tn_serving_bench *b, tn_serving_buffers *x)
{
  const at_shape *s = &b->shape;
  const at_serving_layout *l = &b->layout;
  tn_rng rng = tn_rng_seeded(b->seed);
  memset(x, 0, sizeof *x);
  long long q_rows = l->q_layout == AT_SEQ_RAGGED ? sum_of(b->q_lens, s->batch) : (long long)s->batch * s->q_len;
  long long kv_rows = (long long)s->batch * s->kv_len, pages = 0;
  if (l->kv_layout == AT_SEQ_RAGGED) kv_rows = sum_of(b->kv_lens, s->batch);
  if (l->kv_layout == AT_SEQ_PAGED) {
    for (int i = 0; i < s->batch; i++) pages += (b->kv_lens[i] + l->page_size - 1) / l->page_size;
    if (pages < 1) pages = 1;
    kv_rows = pages * l->page_size;
  }
  if (q_rows > INT32_MAX || kv_rows > INT32_MAX || pages > INT32_MAX)
    return at_fail(AT_ERR_INVALID, "%lld query rows and %lld key rows: more than int32 offsets address", q_rows,
                   kv_rows);
  x->q_rows = (int)q_rows, x->kv_rows = (int)kv_rows, x->num_pages = (int)pages;
  const size_t q_elems = (size_t)q_rows * s->q_heads * s->head_dim, kv_elems = (size_t)kv_rows * s->kv_heads * s->head_dim;
  const at_dtype kv_dtype = at_shape_kv_dtype(s), out = at_dtype_default_out(s->dtype);
  const float ones[3] = {1.0f, 1.0f, 1.0f};
  at_status rc;
  if ((rc = alloc_filled(ctx, s->dtype, q_elems, &rng, &x->q)) != AT_OK ||
      (rc = alloc_filled(ctx, kv_dtype, kv_elems, &rng, &x->k)) != AT_OK ||
      (rc = alloc_filled(ctx, kv_dtype, kv_elems, &rng, &x->v)) != AT_OK ||
      (rc = at_device_alloc(ctx, q_elems * at_dtype_size(out) + 16, &x->o)) != AT_OK ||
      (rc = at_device_alloc(ctx, (size_t)q_rows * s->q_heads * sizeof(float) + 16, &x->lse)) != AT_OK ||
      (rc = at_device_alloc(ctx, sizeof ones, &x->descales)) != AT_OK ||
      (rc = at_copy_to_device(ctx, x->descales, ones, sizeof ones)) != AT_OK ||
      (rc = upload_metadata(ctx, b, &rng, x)) != AT_OK)
    return rc;
  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  t.q = x->q, t.k = x->k, t.v = x->v, t.o = x->o, t.lse = s->with_lse ? x->lse : NULL;
  t.q_stride = l->strides.q, t.k_stride = l->strides.k, t.v_stride = l->strides.v, t.o_stride = l->strides.o;
  t.cu_seqlens_q = x->cu_q, t.cu_seqlens_kv = x->cu_kv, t.block_table = x->table, t.seqlens_kv = x->lens;
  if (l->q_layout == AT_SEQ_RAGGED) t.total_q = x->q_rows;
  if (l->kv_layout == AT_SEQ_RAGGED) t.total_kv = x->kv_rows;
  if (l->kv_layout == AT_SEQ_PAGED) t.num_pages = x->num_pages;
  x->t = t;
  return AT_OK;
}

void tn_serving_buffers_free(at_context *ctx, tn_serving_buffers *x)
{
  void *all[] = {x->q, x->k, x->v, x->o, x->lse, x->descales, x->cu_q, x->cu_kv, x->table, x->lens};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) at_device_free(ctx, all[i]);
}

/* ---- rates and rows ----------------------------------------------------------------------------- */

/* Sequence i as a contiguous shape of one sequence. */
static at_shape sequence_shape(const tn_serving_bench *b, int i)
{
  at_shape one = b->shape;
  one.batch = 1, one.q_len = b->q_lens[i], one.kv_len = b->kv_lens[i];
  return one;
}

static int is_decode(const tn_serving_bench *b)
{
  return b->layout.q_layout == AT_SEQ_PADDED && tn_is_decode_shape(&b->shape);
}

/* See bench_serving.h. */
double tn_serving_work(const tn_serving_bench *b)
{
  return tn_sequences_work(&b->shape, b->q_lens, b->kv_lens, is_decode(b));
}

static void print_row(const tn_serving_bench *b, const char *name, double ms, const char *note)
{
  printf("%-44s %10.4f %9.2f %9s  %s\n", name, ms, tn_serving_work(b) / (ms * 1e-3) / 1e12, "-", note);
  fflush(stdout);
}

/* A row with its own work (bytes or FLOPs) and error against the reference (NAN: not checked). */
static void print_row_checked(const char *name, double ms, double work, double rel_err, const char *note)
{
  char err[16] = "-";
  if (!isnan(rel_err)) snprintf(err, sizeof err, "%.2e", rel_err);
  printf("%-44s %10.4f %9.2f %9s  %s\n", name, ms, work / (ms * 1e-3) / 1e12, err, note);
  fflush(stdout);
}

static void print_failure(const char *name, const char *status, const char *why)
{
  printf("%-44s %10s %9s %9s  %s: %.200s\n", name, "-", "-", "-", status, why);
  fflush(stdout);
}

const at_fp8_args *tn_serving_fp8_args(const at_shape *s, const tn_serving_buffers *x, at_fp8_args *a)
{
  const float *d = x->descales;
  if (!at_dtype_is_fp8(s->dtype) && !at_dtype_is_fp8(at_shape_kv_dtype(s))) return NULL;
  *a = (at_fp8_args){at_dtype_is_fp8(s->dtype) ? d : NULL, d + 1, d + 2};
  return a;
}

/* What at_plan_options.impl a bench name asks the library for. */
static const char *plan_impl_of(const char *name)
{
  if (strcmp(name, "cudnn") == 0 || strcmp(name, "cudnn-unified") == 0) return "cudnn";
  static const char *const FUSED[] = {"fused", "fa2", "fa3", "decode", "default", "fa2-default"};
  for (size_t i = 0; i < sizeof FUSED / sizeof *FUSED; i++)
    if (strcmp(name, FUSED[i]) == 0) return "fused";
  return name; /* naive, or a variant key */
}

/* ---- paged decode: every variant, and contiguous decode of the same shape ------------------------ */

static int is_paged_decode(const tn_serving_bench *b)
{
  return b->layout.kv_layout == AT_SEQ_PAGED && is_decode(b);
}

/* Paged K/V under longer or ragged queries: the paged prefill variants (fa3's on sm_90a, fa2's). */
static int is_paged_prefill(const tn_serving_bench *b)
{
  return b->layout.kv_layout == AT_SEQ_PAGED && !is_decode(b);
}

/* The library's target for the bench's device, as at_context_create builds it. */
static at_status device_target(int device, gen_target *t)
{
  rt_device_info info;
  char arch[16];
  at_status rc = rt_device_query(device, &info);
  if (rc != AT_OK) return rc;
  at_arch_for_cc(info.cc_major, info.cc_minor, arch);
  return gen_target_make(arch, info.smem_per_block_optin, t);
}

/* The output of a call (o of the bench's buffers) as fp32 on the host; NULL on failure. */
static float *download_output(at_context *ctx, const tn_serving_bench *b, const tn_serving_buffers *x)
{
  const at_dtype out = at_dtype_default_out(b->shape.dtype);
  const size_t n = (size_t)x->q_rows * b->shape.q_heads * b->shape.head_dim;
  void *raw = malloc(n * at_dtype_size(out));
  float *o = malloc(n * sizeof *o);
  at_status rc = raw && o ? at_copy_to_host(ctx, raw, x->o, n * at_dtype_size(out)) : at_fail(AT_ERR_NOMEM, "no memory");
  if (rc == AT_OK) rc = tn_unpack(out, raw, n, o);
  free(raw);
  if (rc != AT_OK) return free(o), NULL;
  return o;
}

static size_t output_entries(const tn_serving_bench *b, const tn_serving_buffers *x)
{
  return (size_t)x->q_rows * b->shape.q_heads * b->shape.head_dim;
}

/* The naive kernels' output on the bench's paged or ragged inputs, as fp32 on the device (the
 * reference of the variants), and the comparison kernel for the plans' output dtype: checking a
 * candidate then copies three numbers back, not its output (a 16-sequence prefill batch's O
 * has 288M entries, which the host took seconds to compare). */
at_status tn_serving_reference(at_context *ctx, const tn_serving_bench *b, tn_serving_buffers *x, tn_serving_ref *ref)
{
  at_plan *plan = NULL;
  at_plan_options naive = {"naive"};
  at_fp8_args a;
  const char *arch = NULL;
  float *host = NULL;
  const size_t n = output_entries(b, x);
  memset(ref, 0, sizeof *ref);
  at_status rc = at_plan_create_serving(ctx, &b->shape, &b->layout, &naive, &plan);
  if (rc == AT_OK) rc = at_plan_run_serving(plan, &x->t, tn_serving_fp8_args(&b->shape, x, &a), NULL);
  if (rc == AT_OK) rc = at_synchronize(ctx);
  at_plan_destroy(plan);
  if (rc == AT_OK && !(host = download_output(ctx, b, x))) rc = AT_ERR_CUDA;
  if (rc == AT_OK) rc = at_device_alloc(ctx, (n ? n : 1) * sizeof(float), &ref->o);
  if (rc == AT_OK && n) rc = at_copy_to_device(ctx, ref->o, host, n * sizeof(float));
  free(host);
  if (rc == AT_OK) rc = rt_context_bind(ctx, &arch);
  if (rc == AT_OK) rc = rt_compare_create(arch, at_dtype_default_out(b->shape.dtype), &ref->compare);
  if (rc != AT_OK) tn_serving_reference_free(ctx, ref);
  return rc;
}

void tn_serving_reference_free(at_context *ctx, tn_serving_ref *ref)
{
  if (ref->compare.module) rt_compare_destroy(&ref->compare);
  if (ref->o) at_device_free(ctx, ref->o);
  memset(ref, 0, sizeof *ref);
}

/* Poisons O, runs plan once and compares O with the reference on the GPU: *err is the relative
 * L2 error (infinite where an entry is NaN, or unwritten and still poisoned; NAN when it could
 * not be measured). */
at_status tn_serving_run_checked(at_context *ctx, const tn_serving_bench *b, tn_serving_buffers *x, at_plan *plan,
                                 const tn_serving_ref *ref, double *err)
{
  at_fp8_args a;
  rt_compare_sums sums;
  const size_t n = output_entries(b, x), o_bytes = n * at_dtype_size(at_dtype_default_out(b->shape.dtype));
  unsigned char *poison = malloc(o_bytes ? o_bytes : 1);
  at_status rc = poison ? AT_OK : at_fail(AT_ERR_NOMEM, "no memory");
  *err = NAN;
  if (rc == AT_OK && o_bytes) memset(poison, 0xff, o_bytes), rc = at_copy_to_device(ctx, x->o, poison, o_bytes);
  free(poison);
  if (rc == AT_OK) rc = at_plan_run_serving(plan, &x->t, tn_serving_fp8_args(&b->shape, x, &a), NULL);
  if (rc == AT_OK) rc = at_synchronize(ctx);
  if (rc == AT_OK) rc = rt_context_bind(ctx, NULL);
  if (rc == AT_OK)
    rc = rt_compare_run(&ref->compare, (CUdeviceptr)ref->o, (CUdeviceptr)x->o, 1.0f, n, &sums);
  if (rc == AT_OK) *err = rt_compare_rel_l2(&sums);
  return rc;
}

/* Is variant v one that --impl name asks for ("fused": all; "fa2", "fa3", "decode": a family)? */
static int variant_wanted(const gen_variant *v, const char *name)
{
  return strcmp(name, "fused") == 0 || strcmp(gen_family_name(v->family), name) == 0;
}

/* Every generated variant of the layout that --impl name asks for (paged decode: "decode";
 * ragged prefill: "fa2", "fa3" or "fused") through the serving API (a forced key), verified
 * against the naive kernels and timed. *best_ms: the fastest verified one. */
static int bench_serving_variants(at_context *ctx, const tn_serving_bench *b, tn_serving_buffers *x, const char *name,
                                  double *best_ms)
{
  gen_target target;
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0, failures = 0, listed = 0;
  at_status rc = device_target(b->device, &target);
  if (rc == AT_OK)
    rc = gen_enumerate_serving(&b->shape, b->layout.kv_layout == AT_SEQ_PAGED ? b->layout.page_size : 0,
                               rt_serving_ragged(&b->layout), &target, vs, GEN_MAX_VARIANTS, &n);
  if (rc != AT_OK) {
    print_failure(name, rc == AT_ERR_UNSUPPORTED ? "unsupported" : "failed", at_last_error());
    return rc != AT_ERR_UNSUPPORTED;
  }
  tn_serving_ref ref;
  if (tn_serving_reference(ctx, b, x, &ref) != AT_OK) {
    print_failure(name, "failed", at_last_error());
    return 1;
  }
  const double tol = at_dtype_tolerance(b->shape.dtype);
  const char *what = is_decode(b)           ? "paged decode variant (KV TB/s of the sequences' lengths)"
                     : is_paged_prefill(b) ? "paged prefill variant (TFLOP/s of the sequences' visible pairs)"
                                           : "ragged prefill variant (TFLOP/s of the sequences' visible pairs)";
  for (int i = 0; i < n; i++) {
    char key[GEN_KEY_MAX];
    if (!variant_wanted(&vs[i], name) || gen_variant_key(&vs[i], key, sizeof key) != AT_OK) continue;
    listed++;
    at_plan *plan = NULL;
    at_plan_options opts = {key};
    at_fp8_args a;
    double ms = 0, err = NAN;
    rc = at_plan_create_serving(ctx, &b->shape, &b->layout, &opts, &plan);
    if (rc == AT_OK) rc = tn_serving_run_checked(ctx, b, x, plan, &ref, &err);
    if (rc == AT_OK && !(err <= tol)) {
      printf("%-44s %10s %9s %9.2e  WRONG (tolerance %.0e): not timed\n", key, "-", "-", err, tol);
      failures++;
    } else {
      if (rc == AT_OK) rc = at_plan_benchmark_serving(plan, &x->t, tn_serving_fp8_args(&b->shape, x, &a), b->warmup, b->reps, &ms);
      if (rc == AT_OK) {
        print_row_checked(key, ms, tn_serving_work(b), err, what);
        if (*best_ms <= 0 || ms < *best_ms) *best_ms = ms;
      } else {
        print_failure(key, "failed", at_last_error());
        failures++;
      }
    }
    at_plan_destroy(plan);
  }
  if (!listed) print_failure(name, "unsupported", "no variant of this family reads this layout for this shape");
  tn_serving_reference_free(ctx, &ref);
  return failures != 0;
}

/* One implementation on the whole batch through the serving API; a generated kernel's output is
 * checked against the naive kernels' first. *ms_out: its time when it ran and verified. */
static int bench_plan(at_context *ctx, const tn_serving_bench *b, tn_serving_buffers *x, const char *name,
                      double *ms_out)
{
  at_plan *plan = NULL;
  at_plan_options opts = {plan_impl_of(name)};
  at_fp8_args a;
  at_plan_info info;
  double ms = 0, err = NAN;
  at_status rc = at_plan_create_serving(ctx, &b->shape, &b->layout, &opts, &plan);
  if (rc != AT_OK) {
    print_failure(name, rc == AT_ERR_UNSUPPORTED ? "unsupported" : "failed", at_last_error());
    return rc != AT_ERR_UNSUPPORTED;
  }
  rc = at_serving_check(plan, &x->t); /* the metadata this bench built, as a server would check its own */
  if (rc == AT_OK) rc = at_plan_describe(plan, &info);
  const int generated = rc == AT_OK && strcmp(info.impl, "naive") != 0;
  if (generated) {
    tn_serving_ref ref;
    rc = tn_serving_reference(ctx, b, x, &ref);
    if (rc == AT_OK) rc = tn_serving_run_checked(ctx, b, x, plan, &ref, &err);
    tn_serving_reference_free(ctx, &ref);
    if (rc == AT_OK && !(err <= at_dtype_tolerance(b->shape.dtype))) {
      printf("%-44s %10s %9s %9.2e  WRONG (tolerance %.0e): %s, not timed\n", name, "-", "-", err,
             at_dtype_tolerance(b->shape.dtype), info.impl);
      at_plan_destroy(plan);
      return 1;
    }
  }
  if (rc == AT_OK) rc = at_plan_benchmark_serving(plan, &x->t, tn_serving_fp8_args(&b->shape, x, &a), b->warmup, b->reps, &ms);
  if (rc == AT_OK && generated) {
    /* cuDNN's ragged and paged plans run three launches; all are in its time, as a caller pays for them */
    const int cudnn_serving = strcmp(info.impl, "cudnn") == 0 && !at_serving_is_padded(&b->layout);
    const char *note = !cudnn_serving                             ? info.impl
                       : b->layout.kv_layout == AT_SEQ_PAGED ? "cudnn: paged graph, with its length and fix-up kernels"
                                                             : "cudnn: ragged graph, with its offsets and fix-up kernels";
    print_row_checked(name, ms, tn_serving_work(b), err, note);
    if (*ms_out <= 0 || ms < *ms_out) *ms_out = ms;
  } else if (rc == AT_OK) {
    print_row(b, name, ms, "the naive kernels: scores, softmax, PV over the maxima (the reference)");
  } else {
    print_failure(name, "failed", at_last_error());
  }
  at_plan_destroy(plan);
  return rc != AT_OK;
}

/* The paged batch's shape on contiguous K/V (B sequences of the longest length, dense [B, S, Nkv,
 * D]): every variant gen_enumerate lists of the family the paged batch runs (decode for paged
 * decode, fa2 for paged prefill with padded Q), through ordinary plans. With uniform lengths (no
 * --lengths) it does the same work on the same bytes as the paged batch, so the two compare
 * directly. *best_ms: the fastest. */
static int bench_contiguous_variants(at_context *ctx, const tn_serving_bench *b, double *best_ms)
{
  gen_target target;
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0, failures = 0;
  if (b->layout.q_layout != AT_SEQ_PADDED || b->layout.kv_layout != AT_SEQ_PAGED) {
    print_failure("contiguous", "unsupported",
                  "compares paged K/V with padded Q against contiguous K/V; for ragged Q, seqsum is the comparison");
    return 0;
  }
  const gen_family family = is_paged_decode(b) ? GEN_FAMILY_DECODE : GEN_FAMILY_FA2;
  const double work = family == GEN_FAMILY_DECODE ? tn_kv_bytes(&b->shape) : at_shape_flops(&b->shape);
  at_status rc = device_target(b->device, &target);
  if (rc == AT_OK) rc = gen_enumerate(&b->shape, &target, vs, GEN_MAX_VARIANTS, &n);
  if (rc != AT_OK) {
    print_failure("contiguous", "failed", at_last_error());
    return 1;
  }
  tn_serving_bench dense = *b;
  dense.layout = at_serving_layout_make(&b->shape, AT_SEQ_PADDED, AT_SEQ_PADDED, 0);
  tn_serving_buffers c;
  if ((rc = tn_serving_buffers_make(ctx, &dense, &c)) != AT_OK) {
    tn_serving_buffers_free(ctx, &c);
    print_failure("contiguous", "failed", at_last_error());
    return 1;
  }
  const at_layout l = at_layout_bshd(&b->shape);
  const at_tensors t = {c.q, c.k, c.v, c.o, b->shape.with_lse ? c.lse : NULL, l.q, l.k, l.v, l.o};
  for (int i = 0; i < n; i++) {
    char key[GEN_KEY_MAX], name[GEN_KEY_MAX + 16];
    if (vs[i].family != family || gen_variant_key(&vs[i], key, sizeof key) != AT_OK) continue;
    snprintf(name, sizeof name, "contiguous %s", key);
    at_plan *plan = NULL;
    at_plan_options opts = {key};
    at_fp8_args a;
    double ms = 0;
    rc = at_plan_create(ctx, &b->shape, NULL, &opts, &plan);
    if (rc == AT_OK) rc = at_plan_benchmark(plan, &t, tn_serving_fp8_args(&b->shape, &c, &a), b->warmup, b->reps, &ms);
    if (rc == AT_OK) {
      print_row_checked(name, ms, work, NAN, "contiguous K/V, B x S_max (not verified here)");
      if (*best_ms <= 0 || ms < *best_ms) *best_ms = ms;
    } else {
      print_failure(name, "failed", at_last_error());
      failures++;
    }
    at_plan_destroy(plan);
  }
  tn_serving_buffers_free(ctx, &c);
  return failures != 0;
}

/* The padding-free ideal: each sequence alone through an ordinary plan ("auto") on contiguous
 * buffers of the longest sequence, the medians summed. */
static int bench_sequence_sum(at_context *ctx, const tn_serving_bench *b, double *sum_ms)
{
  at_shape longest = b->shape;
  longest.batch = 1;
  tn_serving_buffers c;
  tn_serving_bench one = *b;
  one.shape = longest;
  one.layout = at_serving_layout_make(&longest, AT_SEQ_PADDED, AT_SEQ_PADDED, 0);
  at_status rc = tn_serving_buffers_make(ctx, &one, &c);
  double total_ms = 0;
  int n_timed = 0;
  char impl[96] = "";
  for (int i = 0; i < b->shape.batch && rc == AT_OK; i++) {
    if (b->q_lens[i] < 1 || b->kv_lens[i] < 1) continue; /* no work */
    at_shape s = sequence_shape(b, i);
    at_layout l = at_layout_bshd(&s);
    at_tensors t = {c.q, c.k, c.v, c.o, s.with_lse ? c.lse : NULL, l.q, l.k, l.v, l.o};
    at_plan *plan = NULL;
    at_plan_info info;
    at_fp8_args a;
    double ms = 0;
    rc = at_plan_create(ctx, &s, NULL, NULL, &plan);
    if (rc == AT_OK) rc = at_plan_benchmark(plan, &t, tn_serving_fp8_args(&s, &c, &a), b->warmup, b->reps, &ms);
    if (rc == AT_OK && at_plan_describe(plan, &info) == AT_OK && s.kv_len == b->shape.kv_len)
      snprintf(impl, sizeof impl, "%s", info.impl);
    at_plan_destroy(plan);
    total_ms += ms, n_timed++;
  }
  tn_serving_buffers_free(ctx, &c);
  if (rc != AT_OK) {
    print_failure("seqsum", "failed", at_last_error());
    return 1;
  }
  char note[192];
  snprintf(note, sizeof note, "sum of %d sequences alone, contiguous, 'auto' plans (longest: %s)", n_timed,
           impl[0] ? impl : "-");
  print_row(b, "seqsum", total_ms, note);
  *sum_ms = total_ms;
  return 0;
}

static void print_header(const at_context *ctx, const tn_serving_bench *b, const tn_serving_buffers *x)
{
  const at_shape *s = &b->shape;
  char what[96], key[256];
  at_serving_layout_describe(&b->layout, what, sizeof what);
  at_serving_key(s, &b->layout, b->layout.q_layout == AT_SEQ_RAGGED ? b->q_lens : NULL, b->kv_lens, key, sizeof key);
  int min = b->kv_lens[0], max = 0;
  for (int i = 0; i < s->batch; i++) min = b->kv_lens[i] < min ? b->kv_lens[i] : min, max = b->kv_lens[i] > max ? b->kv_lens[i] : max;
  printf("shape: %s, B=%d T<=%d S<=%d Nq=%d Nkv=%d D=%d %s mask=%s%s\n", what, s->batch, s->q_len, s->kv_len,
         s->q_heads, s->kv_heads, s->head_dim, at_dtypes_name(s->dtype, s->kv_dtype), at_mask_name(s->mask),
         s->with_lse ? " lse" : "");
  printf("lengths: K/V %d..%d, mean %.1f, %lld tokens; %d query rows; key %s\n", min, max,
         (double)sum_of(b->kv_lens, s->batch) / s->batch, sum_of(b->kv_lens, s->batch), x->q_rows, key);
  if (b->layout.kv_layout == AT_SEQ_PAGED) printf("pool: %d pages of %d tokens, handed out shuffled\n", x->num_pages, b->layout.page_size);
  printf("device: %s, warm-up %d, %d timed launches (events), seed %llu; %s\n", at_context_describe(ctx), b->warmup,
         b->reps, b->seed,
         is_paged_decode(b) && b->layout.q_layout == AT_SEQ_PADDED
             ? "paged decode variants, cuDNN's paged graph and the naive kernels run this layout"
         : is_paged_prefill(b) && b->layout.q_layout == AT_SEQ_PADDED
             ? "paged fa3/fa2 variants (prefill), cuDNN's paged graph and the naive kernels run this layout"
         : is_paged_prefill(b) ? "paged fa3/fa2 variants (prefill) and the naive kernels run this layout"
         : rt_serving_ragged(&b->layout) != GEN_RAGGED_NONE
             ? "ragged fa2/fa3 variants, cuDNN's ragged graph and the naive kernels run this layout"
                                                         : "only the naive kernels run this layout");
  printf("%-44s %10s %9s %9s  %s\n", "impl", "time_ms", is_decode(b) ? "KV TB/s" : "TFLOP/s", "rel_err", "note");
}

int tn_serving_bench_run(const tn_serving_bench *b)
{
  at_context *ctx = NULL;
  tn_serving_buffers x;
  at_status rc = at_context_create(b->device, NULL, 0, &ctx);
  if (rc != AT_OK) return tn_fail_exit("bench", rc);
  if ((rc = tn_serving_buffers_make(ctx, b, &x)) != AT_OK) {
    tn_serving_buffers_free(ctx, &x);
    at_context_destroy(ctx);
    return tn_fail_exit("bench", rc);
  }
  print_header(ctx, b, &x);
  int failures = 0;
  const int ragged = rt_serving_ragged(&b->layout) != GEN_RAGGED_NONE;
  double best_paged = 0, best_contiguous = 0, best_ragged = 0, seqsum_ms = 0, cudnn_ms = 0;
  char *list = strdup(b->impls), *save = NULL;
  for (char *name = list ? strtok_r(list, ",", &save) : NULL; name; name = strtok_r(NULL, ",", &save)) {
    const int family = strcmp(name, "fa2") == 0 || strcmp(name, "fa3") == 0 || strcmp(name, "fused") == 0;
    if (strcmp(name, "seqsum") == 0) failures += bench_sequence_sum(ctx, b, &seqsum_ms);
    else if (strcmp(name, "decode") == 0 && is_paged_decode(b))
      failures += bench_serving_variants(ctx, b, &x, name, &best_paged);
    else if (family && ragged) failures += bench_serving_variants(ctx, b, &x, name, &best_ragged);
    else if (family && is_paged_prefill(b)) failures += bench_serving_variants(ctx, b, &x, name, &best_paged);
    else if (strcmp(name, "contiguous") == 0) failures += bench_contiguous_variants(ctx, b, &best_contiguous);
    else if (strcmp(name, "cudnn-unified") == 0 && ragged)
      print_failure(name, "unsupported", "attntune's ragged cuDNN graph is the composite one: --impl cudnn runs it");
    else if (strcmp(plan_impl_of(name), "cudnn") == 0) failures += bench_plan(ctx, b, &x, name, &cudnn_ms);
    else failures += bench_plan(ctx, b, &x, name, ragged ? &best_ragged : &(double){0});
  }
  free(list);
  if (best_ragged > 0 && seqsum_ms > 0)
    printf("best ragged prefill %.4f ms (%.1f TFLOP/s) vs seqsum %.4f ms: %.1f%% of the padding-free ideal's rate\n",
           best_ragged, tn_serving_work(b) / (best_ragged * 1e-3) / 1e12, seqsum_ms, 100.0 * seqsum_ms / best_ragged);
  if (best_ragged > 0 && cudnn_ms > 0)
    printf("best ragged prefill %.4f ms vs cuDNN's ragged graph %.4f ms (%.1f TFLOP/s): %.2fx cuDNN\n", best_ragged,
           cudnn_ms, tn_serving_work(b) / (cudnn_ms * 1e-3) / 1e12, cudnn_ms / best_ragged);
  if (best_paged > 0 && cudnn_ms > 0)
    printf("best paged %s %.4f ms vs cuDNN's paged graph %.4f ms: %.2fx cuDNN\n", is_decode(b) ? "decode" : "prefill",
           best_paged, cudnn_ms, cudnn_ms / best_paged);
  if (best_paged > 0 && best_contiguous > 0 && is_paged_prefill(b))
    printf("best paged prefill %.4f ms (%.1f TFLOP/s) vs best contiguous fa2 %.4f ms: %.1f%% of contiguous's rate%s\n",
           best_paged, tn_serving_work(b) / (best_paged * 1e-3) / 1e12, best_contiguous,
           100.0 * (tn_serving_work(b) / best_paged) / (at_shape_flops(&b->shape) / best_contiguous),
           tn_serving_work(b) != at_shape_flops(&b->shape) ? " (lengths differ: contiguous runs B x S_max)" : "");
  else if (best_paged > 0 && best_contiguous > 0)
    printf("best paged decode %.4f ms (%.2f TB/s) vs best contiguous decode %.4f ms (%.2f TB/s): %.1f%% of contiguous "
           "bandwidth%s\n",
           best_paged, tn_serving_work(b) / (best_paged * 1e-3) / 1e12, best_contiguous,
           tn_kv_bytes(&b->shape) / (best_contiguous * 1e-3) / 1e12,
           100.0 * (tn_serving_work(b) / best_paged) / (tn_kv_bytes(&b->shape) / best_contiguous),
           b->layout.kv_layout == AT_SEQ_PAGED && tn_serving_work(b) != tn_kv_bytes(&b->shape)
               ? " (lengths differ: contiguous reads B x S_max)"
               : "");
  tn_serving_buffers_free(ctx, &x);
  at_context_destroy(ctx);
  return failures ? TN_EXIT_RUNTIME : TN_EXIT_OK;
}
