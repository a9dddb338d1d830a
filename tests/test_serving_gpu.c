/* test_serving_gpu.c — ragged and paged plans on a GPU (skips without one).
 *
 * Each case draws a batch of sequences with random lengths (always including lengths 0 and 1
 * and the planned maximum), fresh random inputs, and for paged K/V a pool whose pages are handed
 * out in shuffled order, whose unused pages and page tails are NaN, and whose block-table
 * entries past each sequence's pages are garbage. The serving plan ("auto", which must come out
 * naive) runs into poisoned outputs; the reference is the contiguous naive kernel run per
 * sequence on gathered copies (Q_b [1, T_b, Nq, D], K_b and V_b [1, S_b, Nkv, D]). The two do
 * the same fp32 arithmetic on the same values, so they agree to rounding noise or better. A
 * sequence with no keys must give o = 0 and lse = -inf.
 *
 * Padded Q of 1..16 tokens with paged K/V plans a paged decode variant ("auto": the decode
 * family's paged default), checked the same way at the output dtype's tolerance; and every
 * paged decode variant gen_enumerate_paged lists for a few shapes (page sizes 1, 16, 64, 256,
 * GQA and MQA, T = 1 and 16 causal-br, lse, FP8 K/V) runs through rt_variant_launch_serving into
 * poisoned outputs and poisoned split scratch; one case puts a table entry past the pool
 * (nothing may fault; that sequence is not compared).
 *
 * Ragged Q with ragged or padded K/V plans a ragged prefill variant ("auto": fa3's
 * warp-specialized kernel on sm_90a for 16-bit inputs, else fa2), checked the same way; and
 * every ragged variant gen_enumerate_serving lists for a few shapes (lengths 0, 1, off-tile and
 * the maximum; masks none, causal, causal-br; MHA, GQA, MQA; D 64, 80, 128, 256; lse; FP8 on
 * sm_89+) runs through rt_variant_launch_serving into poisoned outputs, with NaN rows after Q, K
 * and V that no kernel may read; offsets that point anywhere run without a fault or a NaN, and
 * a ragged plan replays in a CUDA graph.
 *
 * cuDNN's ragged graph (impl "cudnn": ragged Q with ragged or padded K/V, f16/bf16) runs the same
 * kinds of cases (lengths 0, 1 and the maximum; none, causal and causal-br masks with T_b and S_b
 * drawn apart, so some rows see no key; GQA and MQA; lse) into poisoned outputs, each sequence
 * compared on its own with the reference at the output dtype's tolerance; its run replays in a
 * CUDA graph.
 *
 * Also: metadata that points outside the tensors and the pool runs without a fault, the device
 * check names it, and the API refuses what it cannot run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attntune_fp8.h"
#include "tests/testutil.h"

static at_context *g_ctx;

static int setup(void **state)
{
  tu_gpu_setup(state);
  if (tu_have_gpu && at_context_create(0, NULL, 0, &g_ctx) != AT_OK) {
    fprintf(stderr, "at_context_create: %s\n", at_last_error());
    return -1;
  }
  return 0;
}

static int teardown(void **state)
{
  at_context_destroy(g_ctx);
  return tu_gpu_teardown(state);
}

static int have_fp8_conversions(void)
{
  return tu_gpu.info.cc_major > 8 || (tu_gpu.info.cc_major == 8 && tu_gpu.info.cc_minor >= 9);
}

typedef struct serving_case {
  at_seq_layout q_layout, kv_layout;
  int page_size;
  int batch, max_q, max_kv, nq, nkv, d;
  at_mask mask;
  at_dtype dtype, kv_dtype;
  int with_lse;
  int kv_in_one_page; /* paged: K and V of a page side by side, [num_pages, 2, page_size, Nkv, D] */
} serving_case;

/* Paged pools for cuDNN's graph (set around its cases): every table entry a page of the pool and
 * unused rows zero, since its paged loads read a sequence's whole table row and P·V multiplies
 * the last page's rows past S_b by zero, which a NaN there survives. Otherwise unused entries
 * are wild and unused rows NaN: the generated kernels must never read them. */
static int g_pool_for_cudnn;

/* ---- host data ------------------------------------------------------------------------------ */

/* n elements of dtype as stored bytes: random values in [-1, 1) (16-bit and f32), or FP8 codes of
 * values in [-magnitude, magnitude) quantized per tensor (*descale set; 1 otherwise). */
static uint8_t *random_storage(tn_rng *rng, at_dtype dtype, size_t n, float magnitude, float *descale)
{
  uint8_t *bytes = malloc(n * at_dtype_size(dtype) + 1);
  assert_non_null(bytes);
  *descale = 1.0f;
  if (at_dtype_is_fp8(dtype)) {
    float *x = malloc(n * sizeof *x + 1), scale = 0.0f;
    assert_non_null(x);
    tn_rng_fill(rng, x, n, -magnitude, magnitude);
    TU_OK(at_quantize_fp8(x, n, dtype, bytes, &scale));
    *descale = 1.0f / scale;
    free(x);
  } else {
    float *x = tu_random_tensor(rng, dtype, n);
    TU_OK(tn_pack(dtype, x, n, bytes));
    free(x);
  }
  return bytes;
}

/* Lengths of B sequences for a ragged or paged side: the maximum, 1 and 0 at the given positions
 * (so every case has them), random in 0..max elsewhere; all max for a padded side. */
static void draw_lengths(tn_rng *rng, at_seq_layout layout, int batch, int max, int at_max, int at_one, int at_zero,
                         int *len)
{
  for (int b = 0; b < batch; b++) {
    if (layout == AT_SEQ_PADDED) len[b] = max;
    else if (b == at_max % batch) len[b] = max;
    else if (b == at_one % batch) len[b] = 1;
    else if (b == at_zero % batch) len[b] = 0;
    else len[b] = (int)tn_rng_uniform(rng, 0.0f, (float)max + 0.999f);
  }
}

/* One case's inputs on the host and the device. Logical rows: sequence b's queries are rows
 * q_first[b] .. q_first[b] + T_b - 1 of q_host (which is also the padded or packed Q the plan
 * reads), its keys rows kv_first[b] .. of k_logical / v_logical (dense, in sequence order); the
 * device K/V are those rows placed as the layout says. */
typedef struct serving_io {
  at_shape shape;
  at_serving_layout layout;
  int T[16], S[16], q_first[17], kv_first[17];
  int q_rows, kv_rows; /* rows of Q and of logical K/V */
  size_t q_row_bytes, kv_row_bytes;
  uint8_t *q_host, *k_logical, *v_logical;
  float descale[3];
  int32_t cu_q[17], cu_kv[17], lens[16], *table;
  int num_pages;
  void *q, *k_pool, *o, *lse, *descales, *cu_q_dev, *cu_kv_dev, *table_dev, *lens_dev;
  const void *k, *v;
  size_t o_bytes, lse_count;
} serving_io;

static void *device_copy(const void *host, size_t bytes)
{
  void *dev = NULL;
  TU_OK(at_device_alloc(g_ctx, bytes, &dev));
  TU_OK(at_copy_to_device(g_ctx, dev, host, bytes));
  return dev;
}

static void *device_poisoned(size_t bytes)
{
  void *dev = NULL;
  uint8_t *ones = malloc(bytes);
  assert_non_null(ones);
  memset(ones, 0xff, bytes); /* NaN in f32, f16 and bf16, and in e4m3 / e5m2 */
  dev = device_copy(ones, bytes);
  free(ones);
  return dev;
}

/* NaN rows after Q, K and V (padded and ragged), which no kernel may read. */
enum { TAIL_ROWS = 64 };

/* Rows of K and V as the layout places them: padded [B, S, ...], ragged packed, or pages. */
static void place_kv(tn_rng *rng, const serving_case *c, serving_io *x)
{
  const size_t row = x->kv_row_bytes;
  if (c->kv_layout != AT_SEQ_PAGED) {
    /* Padded with every S_b = S and ragged both are the logical rows themselves. */
    /* K, then V, each followed by TAIL_ROWS rows of NaN: a kernel that reads past the rows it
     * was given (ragged offsets clamped wrongly) turns its output NaN. */
    size_t bytes = (size_t)x->kv_rows * row, span = bytes + TAIL_ROWS * row;
    void *kv = device_poisoned(2 * span + 16);
    TU_OK(at_copy_to_device(g_ctx, kv, x->k_logical, bytes));
    TU_OK(at_copy_to_device(g_ctx, (uint8_t *)kv + span, x->v_logical, bytes));
    x->k_pool = kv, x->k = kv, x->v = (uint8_t *)kv + span;
    return;
  }
  const int ps = c->page_size, maxp = x->layout.max_pages_per_seq;
  int used = 0;
  for (int b = 0; b < c->batch; b++) used += (x->S[b] + ps - 1) / ps;
  x->num_pages = used + 3; /* three pages nobody uses: NaN */
  int *order = malloc((size_t)x->num_pages * sizeof *order);
  x->table = malloc((size_t)c->batch * maxp * sizeof *x->table);
  assert_true(order && x->table);
  for (int i = 0; i < x->num_pages; i++) order[i] = i;
  for (int i = x->num_pages - 1; i > 0; i--) { /* shuffle the pool */
    int j = (int)tn_rng_uniform(rng, 0.0f, (float)i + 0.999f), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  for (int i = 0; i < c->batch * maxp; i++) /* never read, but by cuDNN's paged graph */
    x->table[i] = g_pool_for_cudnn ? order[0] : i % 2 ? INT32_MIN + i : 1000000 + i;
  /* One page holds K and V (interleaved) or K alone with V in a second pool right after. */
  const size_t page_bytes = (size_t)ps * row, pool_bytes = (size_t)x->num_pages * page_bytes * 2;
  uint8_t *pool = malloc(pool_bytes);
  assert_non_null(pool);
  memset(pool, g_pool_for_cudnn ? 0 : 0xff, pool_bytes);
  const size_t k_page_step = c->kv_in_one_page ? 2 * page_bytes : page_bytes;
  const size_t v_offset = c->kv_in_one_page ? page_bytes : (size_t)x->num_pages * page_bytes;
  int next = 0;
  for (int b = 0; b < c->batch; b++)
    for (int j = 0; j < x->S[b]; j++) {
      if (j % ps == 0) x->table[b * maxp + j / ps] = order[next++];
      const size_t at = (size_t)x->table[b * maxp + j / ps] * k_page_step + (size_t)(j % ps) * row;
      memcpy(pool + at, x->k_logical + (size_t)(x->kv_first[b] + j) * row, row);
      memcpy(pool + v_offset + at, x->v_logical + (size_t)(x->kv_first[b] + j) * row, row);
    }
  x->k_pool = device_copy(pool, pool_bytes);
  x->k = x->k_pool, x->v = (uint8_t *)x->k_pool + v_offset;
  if (c->kv_in_one_page) {
    const int64_t elements_per_page = (int64_t)ps * c->nkv * c->d;
    x->layout.strides.k.batch = x->layout.strides.v.batch = 2 * elements_per_page;
  }
  free(order), free(pool);
}

static void make_io(const serving_case *c, serving_io *x)
{
  tn_rng rng = tu_rng();
  memset(x, 0, sizeof *x);
  assert_true(c->batch <= 16);
  x->shape = (at_shape){.batch = c->batch, .q_len = c->max_q, .kv_len = c->max_kv, .q_heads = c->nq,
                        .kv_heads = c->nkv, .head_dim = c->d, .dtype = c->dtype, .mask = c->mask,
                        .with_lse = c->with_lse, .kv_dtype = c->kv_dtype};
  x->layout = at_serving_layout_make(&x->shape, c->q_layout, c->kv_layout, c->page_size);
  if (c->kv_layout == AT_SEQ_PAGED) x->layout.max_pages_per_seq += 2; /* a wider table than needed */
  draw_lengths(&rng, c->q_layout, c->batch, c->max_q, 0, 1, 2, x->T);
  draw_lengths(&rng, c->kv_layout, c->batch, c->max_kv, 0, 2, 1, x->S);
  for (int b = 0; b < c->batch; b++) {
    x->q_first[b + 1] = x->q_first[b] + (c->q_layout == AT_SEQ_PADDED ? c->max_q : x->T[b]);
    x->kv_first[b + 1] = x->kv_first[b] + x->S[b];
    x->lens[b] = x->S[b];
  }
  memcpy(x->cu_q, x->q_first, sizeof x->cu_q);
  memcpy(x->cu_kv, x->kv_first, sizeof x->cu_kv);
  x->q_rows = x->q_first[c->batch], x->kv_rows = x->kv_first[c->batch];
  const at_dtype kv_dtype = at_shape_kv_dtype(&x->shape);
  x->q_row_bytes = (size_t)c->nq * c->d * at_dtype_size(c->dtype);
  x->kv_row_bytes = (size_t)c->nkv * c->d * at_dtype_size(kv_dtype);
  x->q_host = random_storage(&rng, c->dtype, (size_t)x->q_rows * c->nq * c->d, 3.0f, &x->descale[0]);
  x->k_logical = random_storage(&rng, kv_dtype, (size_t)x->kv_rows * c->nkv * c->d, 0.5f, &x->descale[1]);
  x->v_logical = random_storage(&rng, kv_dtype, (size_t)x->kv_rows * c->nkv * c->d, 2.0f, &x->descale[2]);
  x->q = device_poisoned((size_t)(x->q_rows + TAIL_ROWS) * x->q_row_bytes + 16);
  TU_OK(at_copy_to_device(g_ctx, x->q, x->q_host, (size_t)x->q_rows * x->q_row_bytes));
  place_kv(&rng, c, x);
  const at_dtype out = at_dtype_default_out(c->dtype);
  x->o_bytes = (size_t)x->q_rows * c->nq * c->d * at_dtype_size(out);
  x->lse_count = (size_t)x->q_rows * c->nq;
  x->o = device_poisoned(x->o_bytes + 16);
  x->lse = device_poisoned(x->lse_count * sizeof(float) + 16);
  x->descales = device_copy(x->descale, sizeof x->descale);
  if (c->q_layout == AT_SEQ_RAGGED) x->cu_q_dev = device_copy(x->cu_q, (size_t)(c->batch + 1) * sizeof(int32_t));
  if (c->kv_layout == AT_SEQ_RAGGED) x->cu_kv_dev = device_copy(x->cu_kv, (size_t)(c->batch + 1) * sizeof(int32_t));
  if (c->kv_layout == AT_SEQ_PAGED) {
    x->table_dev = device_copy(x->table, (size_t)c->batch * x->layout.max_pages_per_seq * sizeof(int32_t));
    x->lens_dev = device_copy(x->lens, (size_t)c->batch * sizeof(int32_t));
  }
}

static at_serving_tensors tensors_of(const serving_io *x)
{
  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  t.q = x->q, t.k = x->k, t.v = x->v, t.o = x->o;
  t.lse = x->shape.with_lse ? x->lse : NULL;
  t.q_stride = x->layout.strides.q, t.k_stride = x->layout.strides.k;
  t.v_stride = x->layout.strides.v, t.o_stride = x->layout.strides.o;
  t.cu_seqlens_q = x->cu_q_dev, t.cu_seqlens_kv = x->cu_kv_dev;
  t.block_table = x->table_dev, t.seqlens_kv = x->lens_dev;
  if (x->layout.q_layout == AT_SEQ_RAGGED) t.total_q = x->q_rows;
  if (x->layout.kv_layout == AT_SEQ_RAGGED) t.total_kv = x->kv_rows;
  if (x->layout.kv_layout == AT_SEQ_PAGED) t.num_pages = x->num_pages;
  return t;
}

static at_fp8_args fp8_of(const serving_io *x)
{
  const float *d = x->descales;
  at_fp8_args a = {at_dtype_is_fp8(x->shape.dtype) ? d : NULL, d + 1, d + 2};
  return a;
}

static int needs_fp8(const at_shape *s) { return at_dtype_is_fp8(s->dtype) || at_dtype_is_fp8(at_shape_kv_dtype(s)); }

static void free_io(serving_io *x)
{
  void *dev[] = {x->q, x->k_pool, x->o, x->lse, x->descales, x->cu_q_dev, x->cu_kv_dev, x->table_dev, x->lens_dev};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) at_device_free(g_ctx, dev[i]);
  free(x->q_host), free(x->k_logical), free(x->v_logical), free(x->table);
}

/* ---- the reference: the contiguous naive kernels, one sequence at a time ------------------------ */

typedef struct reference {
  float *o;   /* [q_rows, Nq, D] like the serving output */
  float *lse; /* at the serving output's lse indices */
} reference;

/* lse index of row i of head h of sequence b in the serving plan's output. */
static size_t lse_index(const serving_io *x, int b, int h, int i)
{
  if (x->layout.q_layout == AT_SEQ_RAGGED) return (size_t)h * x->q_rows + x->q_first[b] + i;
  return ((size_t)b * x->shape.q_heads + h) * x->shape.q_len + i;
}

static void reference_sequence(const rt_naive *naive, const serving_io *x, int b, reference *r)
{
  const at_shape *s = &x->shape;
  const int nq = s->q_heads, d = s->head_dim, T = x->T[b], S = x->S[b];
  const at_dtype out = at_dtype_default_out(s->dtype);
  float *o_b = r->o + (size_t)x->q_first[b] * nq * d;
  if (T == 0) return;
  if (S == 0) { /* no keys: o = 0, lse = -inf; the contiguous kernels take no S = 0 */
    memset(o_b, 0, (size_t)T * nq * d * sizeof *o_b);
    for (int h = 0; h < nq; h++)
      for (int i = 0; i < T; i++) r->lse[lse_index(x, b, h, i)] = -INFINITY;
    return;
  }
  at_shape one = *s;
  one.batch = 1, one.q_len = T, one.kv_len = S;
  void *q = device_copy(x->q_host + (size_t)x->q_first[b] * x->q_row_bytes, (size_t)T * x->q_row_bytes);
  void *k = device_copy(x->k_logical + (size_t)x->kv_first[b] * x->kv_row_bytes, (size_t)S * x->kv_row_bytes);
  void *v = device_copy(x->v_logical + (size_t)x->kv_first[b] * x->kv_row_bytes, (size_t)S * x->kv_row_bytes);
  const size_t o_count = (size_t)T * nq * d, lse_count = (size_t)nq * T;
  void *o = device_poisoned(o_count * at_dtype_size(out)), *lse = device_poisoned(lse_count * sizeof(float));
  void *scratch = device_poisoned(rt_naive_scratch_bytes(&one));
  at_layout l = at_layout_bshd(&one);
  at_tensors t = {q, k, v, o, lse, l.q, l.k, l.v, l.o};
  const float *ds = x->descales;
  rt_naive_descales descales = {at_dtype_is_fp8(s->dtype) ? ds : NULL, ds + 1, ds + 2};
  TU_OK(rt_naive_run_fp8(naive, &one, &t, needs_fp8(s) ? &descales : NULL, (CUdeviceptr)(uintptr_t)scratch, NULL));
  TU_OK(at_synchronize(g_ctx));
  tu_download(out, (CUdeviceptr)(uintptr_t)o, o_count, o_b);
  float *lse_b = malloc(lse_count * sizeof *lse_b);
  assert_non_null(lse_b);
  TU_OK(at_copy_to_host(g_ctx, lse_b, lse, lse_count * sizeof(float)));
  for (int h = 0; h < nq; h++)
    for (int i = 0; i < T; i++) r->lse[lse_index(x, b, h, i)] = lse_b[(size_t)h * T + i];
  free(lse_b);
  void *dev[] = {q, k, v, o, lse, scratch};
  for (int i = 0; i < 6; i++) at_device_free(g_ctx, dev[i]);
}

/* ---- comparing ------------------------------------------------------------------------------------ */

/* Relative L2 of got against want over n values; NaN in either fails (a row left unwritten
 * keeps its NaN poison). */
static void expect_close(const char *what, const float *want, const float *got, size_t n, double tol,
                         const char *label)
{
  double num = 0, den = 0, worst = 0;
  size_t worst_at = 0, n_nan = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(want[i]) || isnan(got[i])) {
      if (n_nan++ == 0) worst_at = i;
      continue;
    }
    if (isinf(want[i]) || isinf(got[i])) { /* -inf lse of rows without keys */
      if (want[i] != got[i]) n_nan++;
      continue;
    }
    double e = (double)got[i] - want[i];
    num += e * e, den += (double)want[i] * want[i];
    if (fabs(e) > worst) worst = fabs(e), worst_at = i;
  }
  double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  printf("    %s: rel_l2 %.2e, max |diff| %.2e\n", what, rel, worst);
  if (n_nan) fail_msg("%s %s: %zu NaN or mismatched infinities, first at %zu (got %g, want %g)", label, what, n_nan,
                      worst_at, got[worst_at], want[worst_at]);
  if (!(rel <= tol))
    fail_msg("%s %s: rel_l2 %.3e over %.0e, worst at %zu: %g vs %g", label, what, rel, tol, worst_at, got[worst_at],
             want[worst_at]);
}

static rt_naive g_naive[8];
static int g_n_naive;

/* The reference module for a case's dtypes, compiled once per program. */
static const rt_naive *naive_for(const at_shape *s)
{
  const at_dtype out = at_dtype_default_out(s->dtype), kv = at_shape_kv_dtype(s);
  for (int i = 0; i < g_n_naive; i++)
    if (g_naive[i].in_dtype == s->dtype && g_naive[i].kv_dtype == kv && g_naive[i].out_dtype == out) return &g_naive[i];
  assert_true(g_n_naive < 8);
  TU_OK(rt_naive_create_kv(tu_gpu.arch, s->dtype, kv, out, &g_naive[g_n_naive]));
  return &g_naive[g_n_naive++];
}

static void describe(const serving_case *c, const serving_io *x, char *label, size_t size)
{
  char what[96];
  at_serving_layout_describe(&x->layout, what, sizeof what);
  int n = snprintf(label, size, "%s B%d T<=%d S<=%d Nq%d Nkv%d D%d %s %s%s [T,S:", what, c->batch, c->max_q,
                   c->max_kv, c->nq, c->nkv, c->d, at_dtypes_name(c->dtype, c->kv_dtype), at_mask_name(c->mask),
                   c->kv_in_one_page ? " K,V in one page" : "");
  for (int b = 0; b < c->batch && n < (int)size; b++) n += snprintf(label + n, size - (size_t)n, " %d,%d", x->T[b], x->S[b]);
  if (n < (int)size) snprintf(label + n, size - (size_t)n, "]");
}

/* Does "auto" plan a ragged prefill variant for this case (ragged Q with ragged or padded K/V,
 * Q, K and V in one 16-bit dtype, or FP8 where the GPU converts it; a head dim fa2 runs)? */
static int ragged_prefill_case(const serving_case *c)
{
  const int fp8 = at_dtype_is_fp8(c->dtype);
  return c->q_layout == AT_SEQ_RAGGED && c->kv_layout != AT_SEQ_PAGED && c->kv_dtype == AT_KV_SAME &&
         (c->dtype == AT_DTYPE_BF16 || c->dtype == AT_DTYPE_F16 || (fp8 && have_fp8_conversions())) &&
         c->d % (fp8 ? 16 : 8) == 0 && c->d >= 32 && c->d <= 256;
}

/* Does "auto" plan a paged fa2 variant for this case (paged K/V in Q's dtype with ragged Q, or
 * padded Q of more than 16 tokens: prefill on a paged cache)? */
static int paged_prefill_case(const serving_case *c)
{
  const int fp8 = at_dtype_is_fp8(c->dtype);
  return c->kv_layout == AT_SEQ_PAGED && (c->q_layout == AT_SEQ_RAGGED || c->max_q > GEN_DECODE_MAX_T) &&
         c->kv_dtype == AT_KV_SAME &&
         (c->dtype == AT_DTYPE_BF16 || c->dtype == AT_DTYPE_F16 || (fp8 && have_fp8_conversions())) &&
         c->d % (fp8 ? 16 : 8) == 0 && c->d >= 32 && c->d <= 256;
}

/* Does "auto" plan a paged decode variant for this case (padded Q of 1..16 tokens, paged K/V,
 * 16-bit Q)? */
static int paged_decode_case(const serving_case *c)
{
  return c->q_layout == AT_SEQ_PADDED && c->kv_layout == AT_SEQ_PAGED && c->max_q <= GEN_DECODE_MAX_T &&
         (c->dtype == AT_DTYPE_BF16 || c->dtype == AT_DTYPE_F16);
}

static void run_case(const serving_case *c)
{
  serving_io x;
  make_io(c, &x);
  char label[512];
  describe(c, &x, label, sizeof label);
  printf("  %s\n", label);

  at_plan *plan = NULL;
  TU_OK(at_plan_create_serving(g_ctx, &x.shape, &x.layout, NULL, &plan));
  at_plan_info info;
  TU_OK(at_plan_describe(plan, &info));
  const int decode = paged_decode_case(c), prefill = ragged_prefill_case(c), paged_prefill = paged_prefill_case(c);
  if (decode) { /* padded Q of 1..16 tokens with paged K/V: the decode family's paged default */
    if (strncmp(info.impl, "decode.", 7) != 0 || !strstr(info.impl, ".pg"))
      fail_msg("padded Q with paged K/V planned %s, not a paged decode variant: %s", info.impl, info.reason);
    assert_int_equal(info.choice, AT_CHOICE_DEFAULT);
    printf("    %s\n", info.impl);
  } else if (paged_prefill) { /* longer or ragged Q with paged K/V: fa3's paged default (fa2's where
                                 fa3 does not run, or reads no page of that size) */
    const char *want = c->q_layout == AT_SEQ_RAGGED ? ".rgq." : ".d";
    if ((strncmp(info.impl, "fa2.", 4) != 0 && strncmp(info.impl, "fa3.", 4) != 0) || !strstr(info.impl, ".pg") ||
        !strstr(info.impl, want))
      fail_msg("paged K/V with %s Q planned %s, not a paged fa2 or fa3 variant: %s", at_seq_layout_name(c->q_layout),
               info.impl, info.reason);
    assert_int_equal(info.choice, AT_CHOICE_DEFAULT);
    printf("    %s\n", info.impl);
  } else if (prefill) { /* ragged Q with ragged or padded K/V: the ragged prefill default */
    const char *want = c->kv_layout == AT_SEQ_RAGGED ? ".rg." : ".rgq.";
    if ((strncmp(info.impl, "fa2.", 4) != 0 && strncmp(info.impl, "fa3.", 4) != 0) || !strstr(info.impl, want))
      fail_msg("ragged Q planned %s, not a %s prefill variant: %s", info.impl, want, info.reason);
    assert_int_equal(info.choice, AT_CHOICE_DEFAULT);
    printf("    %s\n", info.impl);
  } else {
    assert_string_equal(info.impl, "naive");
    assert_int_equal(info.choice, AT_CHOICE_NAIVE);
    if (!strstr(info.reason, "unsupported") || !strstr(info.reason, "cuDNN: unsupported"))
      fail_msg("reason does not say why the fused kernels and cuDNN were skipped: %s", info.reason);
  }

  at_serving_tensors t = tensors_of(&x);
  TU_OK(at_serving_check(plan, &t));
  at_fp8_args fp8 = fp8_of(&x);
  TU_OK(at_plan_run_serving(plan, &t, needs_fp8(&x.shape) ? &fp8 : NULL, NULL));
  TU_OK(at_synchronize(g_ctx));

  const at_dtype out = at_dtype_default_out(c->dtype);
  const size_t o_count = (size_t)x.q_rows * c->nq * c->d;
  reference r = {calloc(o_count + 1, sizeof(float)), calloc(x.lse_count + 1, sizeof(float))};
  float *got_o = malloc((o_count + 1) * sizeof *got_o), *got_lse = malloc((x.lse_count + 1) * sizeof *got_lse);
  assert_true(r.o && r.lse && got_o && got_lse);
  for (size_t i = 0; i < o_count; i++) r.o[i] = NAN; /* rows no sequence owns must not exist */
  for (size_t i = 0; i < x.lse_count; i++) r.lse[i] = NAN;
  tu_download(out, (CUdeviceptr)(uintptr_t)x.o, o_count, got_o);
  TU_OK(at_copy_to_host(g_ctx, got_lse, x.lse, x.lse_count * sizeof(float)));
  const rt_naive *naive = naive_for(&x.shape);
  for (int b = 0; b < c->batch; b++) reference_sequence(naive, &x, b, &r);
  /* Naive: the same fp32 arithmetic on the same values, only the summation over the longer
   * padded score rows (exact zeros added) differs, so the bound is far below the output's
   * rounding. A decode variant: the output dtype's tolerance (P rounded to 16 bits). */
  const int generated = decode || prefill || paged_prefill;
  expect_close("o", r.o, got_o, o_count, generated ? at_dtype_tolerance(c->dtype) : 1e-6, label);
  if (c->with_lse) expect_close("lse", r.lse, got_lse, x.lse_count, generated ? 1e-3 : 1e-6, label);

  at_plan_destroy(plan);
  free(r.o), free(r.lse), free(got_o), free(got_lse);
  free_io(&x);
}

/* ---- the cases ------------------------------------------------------------------------------------ */

#define BF16 AT_DTYPE_BF16
#define SAME AT_KV_SAME

static void test_ragged_q_ragged_kv(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case cases[] = {
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 6, 70, 300, 8, 2, 64, AT_MASK_NONE, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 6, 70, 300, 8, 2, 64, AT_MASK_CAUSAL_TL, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 6, 70, 300, 8, 2, 64, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 5, 48, 48, 4, 4, 80, AT_MASK_CAUSAL_TL, AT_DTYPE_F16, SAME, 0, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 4, 33, 65, 6, 1, 32, AT_MASK_CAUSAL_BR, AT_DTYPE_F32, SAME, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
}

static void test_paged_kv_every_page_size(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const int pages[] = {1, 16, 32, 64, 128, 256};
  const at_mask masks[] = {AT_MASK_CAUSAL_BR, AT_MASK_NONE, AT_MASK_CAUSAL_TL};
  for (int i = 0; i < 6; i++) {
    /* Lengths up to 600 span several pages of 128 and 256 too. */
    serving_case c = {AT_SEQ_RAGGED, AT_SEQ_PAGED, pages[i], 5, 40, pages[i] >= 64 ? 600 : 200, 8, 2, 64,
                      masks[i % 3], BF16, SAME, 1, 0};
    run_case(&c);
  }
}

static void test_paged_and_padded_mixes(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case cases[] = {
      /* decode: padded Q of one row, paged K/V, MQA and GQA */
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 7, 1, 500, 8, 1, 128, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 4, 4, 100, 16, 2, 64, AT_MASK_CAUSAL_BR, AT_DTYPE_F16, SAME, 1, 0},
      /* K and V of a page side by side: page strides twice the page */
      {AT_SEQ_RAGGED, AT_SEQ_PAGED, 32, 4, 30, 130, 4, 2, 64, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 1},
      {AT_SEQ_PADDED, AT_SEQ_RAGGED, 0, 5, 8, 90, 8, 4, 64, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_PADDED, 0, 4, 50, 60, 8, 2, 96, AT_MASK_CAUSAL_TL, BF16, SAME, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
}

static void test_fp8_kv_cache(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  /* An FP8 KV cache with 16-bit Q decodes K and V in integer arithmetic (any arch); FP8 Q needs
   * the sm_89 conversions. */
  const serving_case cases[] = {
      {AT_SEQ_RAGGED, AT_SEQ_PAGED, 16, 5, 20, 200, 8, 2, 128, AT_MASK_CAUSAL_BR, BF16, AT_DTYPE_E4M3, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 64, 4, 1, 300, 8, 1, 64, AT_MASK_NONE, AT_DTYPE_F16, AT_DTYPE_E5M2, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 4, 40, 80, 4, 2, 64, AT_MASK_CAUSAL_TL, BF16, AT_DTYPE_E4M3, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
  if (!have_fp8_conversions()) {
    printf("  no FP8 Q before sm_89\n");
    return;
  }
  const serving_case e4m3 = {AT_SEQ_RAGGED, AT_SEQ_PAGED, 16, 4, 30, 100, 8, 2, 64, AT_MASK_CAUSAL_BR,
                             AT_DTYPE_E4M3, SAME, 1, 0};
  run_case(&e4m3);
}

/* ---- every paged decode variant ----------------------------------------------------------------- */

/* One shape's inputs and reference, shared by the checks of its variants. */
typedef struct variant_run {
  const serving_case *c;
  serving_io *x;
  reference r;
  int skip_b;  /* a sequence whose table has an entry outside the pool: not compared (-1: none) */
  int n_runs;  /* variants launched */
} variant_run;

/* Relative L2 over the sequences compared (all but skip_b); NaN or infinities that differ fail.
 * Returns 1 when within tol. */
static int sequences_close(const variant_run *vr, const float *want, const float *got, size_t per_seq, double tol,
                           const char *what, const char *key)
{
  double num = 0, den = 0;
  size_t bad = 0, first_bad = 0;
  for (int b = 0; b < vr->c->batch; b++) {
    if (b == vr->skip_b) continue;
    for (size_t i = (size_t)b * per_seq; i < (size_t)(b + 1) * per_seq; i++) {
      if (isnan(want[i]) || isnan(got[i]) || ((isinf(want[i]) || isinf(got[i])) && want[i] != got[i])) {
        if (bad++ == 0) first_bad = i;
        continue;
      }
      if (isinf(want[i])) continue;
      const double e = (double)got[i] - want[i];
      num += e * e, den += (double)want[i] * want[i];
    }
  }
  const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  if (bad == 0 && rel <= tol) return 1;
  printf("    %s: WRONG %s rel_l2 %.3e (tol %.0e), %zu NaN/inf mismatches (first at %zu: %g vs %g)\n", key, what, rel,
         tol, bad, first_bad, bad ? got[first_bad] : 0.0, bad ? want[first_bad] : 0.0);
  return 0;
}

/* Poisons o and lse, launches the variant on the case's paged tensors (its scratch poisoned),
 * compares every sequence with valid pages against the per-sequence reference. */
static int check_paged_variant(const rt_variant *lv, const char *key, int i, void *ctx)
{
  (void)i;
  variant_run *vr = ctx;
  serving_io *x = vr->x;
  const at_shape *s = &x->shape;
  uint8_t *ff = malloc(x->o_bytes > x->lse_count * 4 ? x->o_bytes : x->lse_count * 4);
  assert_non_null(ff);
  memset(ff, 0xff, x->o_bytes > x->lse_count * 4 ? x->o_bytes : x->lse_count * 4);
  TU_OK(at_copy_to_device(g_ctx, x->o, ff, x->o_bytes));
  TU_OK(at_copy_to_device(g_ctx, x->lse, ff, x->lse_count * 4));
  free(ff);
  at_serving_tensors st = tensors_of(x);
  at_tensors t = {st.q, st.k, st.v, st.o, st.lse, st.q_stride, st.k_stride, st.v_stride, st.o_stride};
  rt_paged_args paged = {st.block_table, st.seqlens_kv, x->layout.max_pages_per_seq, st.num_pages};
  const int ragged_q = x->layout.q_layout == AT_SEQ_RAGGED;
  rt_ragged_args ragged = {st.cu_seqlens_q, NULL, st.total_q, 0};
  const float *d = x->descales;
  rt_fp8_args fp8 = {at_dtype_is_fp8(s->dtype) ? d : NULL, d + 1, d + 2, NULL, NULL};
  CUdeviceptr scratch = tu_variant_scratch(&lv->variant, s);
  TU_OK(rt_variant_launch_serving(lv, s, &t, needs_fp8(s) ? &fp8 : NULL, &paged, ragged_q ? &ragged : NULL, scratch,
                                  NULL));
  TU_OK(at_synchronize(g_ctx));
  tu_variant_scratch_done(&lv->variant, s, scratch);
  const size_t o_count = (size_t)x->q_rows * s->q_heads * s->head_dim;
  float *got_o = malloc(o_count * sizeof *got_o), *got_lse = malloc(x->lse_count * sizeof *got_lse);
  assert_true(got_o && got_lse);
  tu_download(at_dtype_default_out(s->dtype), (CUdeviceptr)(uintptr_t)x->o, o_count, got_o);
  TU_OK(at_copy_to_host(g_ctx, got_lse, x->lse, x->lse_count * sizeof(float)));
  /* Packed Q: one "sequence" of every packed row (rows of no sequence do not exist). */
  variant_run all = *vr;
  serving_case one = *vr->c;
  one.batch = 1;
  all.c = &one, all.skip_b = -1;
  const variant_run *by = ragged_q ? &all : vr;
  const size_t seqs = ragged_q ? 1 : (size_t)s->batch;
  int ok = sequences_close(by, vr->r.o, got_o, o_count / seqs, at_dtype_tolerance(s->dtype), "o", key);
  if (s->with_lse) ok &= sequences_close(by, vr->r.lse, got_lse, x->lse_count / seqs, 1e-3, "lse", key);
  /* The skipped sequence's rows are still written, and finite (its pages outside the pool are
   * masked, not read). */
  for (size_t e = 0; ok && vr->skip_b >= 0 && e < o_count / (size_t)s->batch; e++)
    if (!isfinite(got_o[(size_t)vr->skip_b * (o_count / (size_t)s->batch) + e]))
      printf("    %s: sequence %d (a page outside the pool) wrote a non-finite o\n", key, vr->skip_b), ok = 0;
  free(got_o), free(got_lse);
  vr->n_runs++;
  return !ok;
}

/* Every variant gen_enumerate_serving lists for the case's shape, page size and Q layout (padded
 * Q: decode's for 1..16 tokens, fa2's above; ragged Q: fa2's .rgq), against the naive kernels
 * run per sequence on gathered copies. bad_entry (padded Q): sequence 0's first table entry
 * points past the pool (that sequence is not compared; nothing may fault). */
static void check_paged_variants(const serving_case *c, int bad_entry)
{
  serving_io x;
  make_io(c, &x);
  char label[512];
  describe(c, &x, label, sizeof label);
  printf("  %s%s\n", label, bad_entry ? " (sequence 0: a table entry past the pool)" : "");
  variant_run vr = {c, &x, {NULL, NULL}, bad_entry ? 0 : -1, 0};
  const size_t o_count = (size_t)x.q_rows * c->nq * c->d;
  vr.r.o = calloc(o_count + 1, sizeof(float)), vr.r.lse = calloc(x.lse_count + 1, sizeof(float));
  assert_true(vr.r.o && vr.r.lse);
  const rt_naive *naive = naive_for(&x.shape);
  for (int b = 0; b < c->batch; b++) reference_sequence(naive, &x, b, &vr.r);
  if (bad_entry) {
    assert_true(x.S[0] > 0);
    x.table[0] = x.num_pages + 7;
    TU_OK(at_copy_to_device(g_ctx, x.table_dev, x.table, sizeof(int32_t)));
  }
  gen_target target;
  TU_OK(gen_target_make(tu_gpu.arch, tu_gpu.info.smem_per_block_optin, &target));
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0;
  const int ragged = c->q_layout == AT_SEQ_RAGGED ? GEN_RAGGED_Q : GEN_RAGGED_NONE;
  assert_true(!bad_entry || !ragged);
  TU_OK(gen_enumerate_serving(&x.shape, c->page_size, ragged, &target, vs, GEN_MAX_VARIANTS, &n));
  assert_true(n > 0);
  const int failures = tu_check_variants(vs, n, &target, check_paged_variant, &vr);
  printf("    %d paged variants, %d wrong\n", vr.n_runs, failures);
  free(vr.r.o), free(vr.r.lse);
  free_io(&x);
  if (failures) fail_msg("%d of %d paged variants are wrong for %s", failures, n, label);
}

static void test_paged_decode_variants(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  /* Padded Q, paged K/V: page sizes 1, 16, 64, 256; GQA 4 and MQA; T = 1 and 16 (causal-br);
   * lse; lengths 0, 1 and the max among random ones; shuffled pools with NaN in unused pages
   * and tails (make_io). */
  const serving_case cases[] = {
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 6, 1, 700, 32, 8, 128, AT_MASK_NONE, BF16, SAME, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 64, 5, 16, 600, 16, 4, 128, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 1, 5, 1, 300, 8, 1, 64, AT_MASK_NONE, AT_DTYPE_F16, SAME, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 256, 4, 4, 1100, 8, 1, 128, AT_MASK_CAUSAL_BR, BF16, SAME, 0, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 4, 16, 400, 8, 2, 64, AT_MASK_CAUSAL_BR, AT_DTYPE_F16, SAME, 1, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_paged_variants(&cases[i], 0);
}

static void test_paged_decode_variants_fp8_kv(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case cases[] = {
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 256, 5, 1, 900, 32, 8, 128, AT_MASK_NONE, BF16, AT_DTYPE_E4M3, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 4, 16, 500, 16, 4, 128, AT_MASK_CAUSAL_BR, BF16, AT_DTYPE_E4M3, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 1, 4, 1, 200, 8, 1, 64, AT_MASK_NONE, AT_DTYPE_F16, AT_DTYPE_E4M3, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_paged_variants(&cases[i], 0);
}

static void test_paged_decode_entry_outside_pool(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case cases[] = {
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 5, 4, 300, 16, 4, 64, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 1, 4, 1, 200, 8, 2, 128, AT_MASK_NONE, BF16, AT_DTYPE_E4M3, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_paged_variants(&cases[i], 1);
}

/* fa2 on a paged cache: padded Q longer than decode's (chunked prefill) and ragged Q (.rgq);
 * page sizes 1, 16, 64, 256; lengths 0, 1 and the max among random ones; every mask; GQA, MQA;
 * lse; head dims 64, 96 (fa2_load_tile_paged's second path), 128, 256; f16, bf16 and e4m3. */
static void test_paged_prefill_variants(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case cases[] = {
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 4, 100, 700, 16, 4, 128, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_PAGED, 1, 5, 90, 300, 8, 2, 64, AT_MASK_CAUSAL_TL, AT_DTYPE_F16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_PAGED, 64, 5, 130, 450, 8, 1, 96, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_PAGED, 256, 4, 70, 600, 4, 4, 128, AT_MASK_NONE, BF16, SAME, 0, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 32, 3, 40, 200, 8, 2, 256, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_paged_variants(&cases[i], 0);
  const serving_case outside = {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 4, 64, 300, 8, 2, 64, AT_MASK_CAUSAL_BR, BF16,
                                SAME, 1, 0};
  check_paged_variants(&outside, 1);
  if (!have_fp8_conversions()) {
    printf("  no FP8 Q before sm_89\n");
    return;
  }
  const serving_case e4m3 = {AT_SEQ_RAGGED, AT_SEQ_PAGED, 16, 4, 80, 260, 8, 2, 128, AT_MASK_CAUSAL_BR,
                             AT_DTYPE_E4M3, SAME, 1, 0};
  check_paged_variants(&e4m3, 0);
}

/* A plan's run captured in a CUDA graph on the caller's stream replays what a direct run writes,
 * bit for bit (the run allocates nothing, so capture succeeds; O is poisoned between the two).
 * Destroys the plan and the case's buffers. */
static void expect_graph_replay_matches(at_plan *plan, serving_io *x)
{
  at_serving_tensors t = tensors_of(x);
  TU_OK(at_plan_run_serving(plan, &t, NULL, NULL));
  TU_OK(at_synchronize(g_ctx));
  uint8_t *direct = malloc(x->o_bytes), *replayed = malloc(x->o_bytes), *ff = malloc(x->o_bytes);
  assert_true(direct && replayed && ff);
  TU_OK(at_copy_to_host(g_ctx, direct, x->o, x->o_bytes));
  memset(ff, 0xff, x->o_bytes);
  TU_OK(at_copy_to_device(g_ctx, x->o, ff, x->o_bytes));
  const rt_driver *cu = rt_cu();
  CUstream stream = NULL;
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  TU_OK(RT_CU(cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)));
  TU_OK(RT_CU(cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)));
  at_status run = at_plan_run_serving(plan, &t, NULL, stream);
  TU_OK(RT_CU(cu->cuStreamEndCapture(stream, &graph)));
  TU_OK(run);
  TU_OK(RT_CU(cu->cuGraphInstantiate(&exec, graph, 0)));
  TU_OK(RT_CU(cu->cuGraphLaunch(exec, stream)));
  TU_OK(RT_CU(cu->cuStreamSynchronize(stream)));
  TU_OK(at_copy_to_host(g_ctx, replayed, x->o, x->o_bytes));
  assert_memory_equal(direct, replayed, x->o_bytes);
  cu->cuGraphExecDestroy(exec);
  cu->cuGraphDestroy(graph);
  cu->cuStreamDestroy(stream);
  free(direct), free(replayed), free(ff);
  at_plan_destroy(plan);
  free_io(x);
}

/* A paged decode plan's run captured in a CUDA graph on the caller's stream: the replay writes
 * what a direct run writes, bit for bit (the run allocates nothing, so capture succeeds). */
static void test_paged_decode_plan_in_a_graph(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case c = {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 4, 1, 2000, 32, 8, 128, AT_MASK_NONE, BF16, SAME, 1, 0};
  serving_io x;
  make_io(&c, &x);
  at_plan *plan = NULL;
  TU_OK(at_plan_create_serving(g_ctx, &x.shape, &x.layout, NULL, &plan));
  at_plan_info info;
  TU_OK(at_plan_describe(plan, &info));
  printf("  %s\n", info.impl);
  assert_non_null(strstr(info.impl, ".pg16."));
  expect_graph_replay_matches(plan, &x);
}

/* ---- every ragged prefill variant --------------------------------------------------------------- */

/* Poisons o and lse, launches a ragged variant on the case's packed tensors, compares every row
 * of O (packed: every row belongs to a sequence) and of lse with the per-sequence reference. */
static int check_ragged_variant(const rt_variant *lv, const char *key, int i, void *ctx)
{
  (void)i;
  variant_run *vr = ctx;
  serving_io *x = vr->x;
  const at_shape *s = &x->shape;
  const size_t poison_bytes = x->o_bytes > x->lse_count * 4 ? x->o_bytes : x->lse_count * 4;
  uint8_t *ff = malloc(poison_bytes + 1);
  assert_non_null(ff);
  memset(ff, 0xff, poison_bytes + 1);
  TU_OK(at_copy_to_device(g_ctx, x->o, ff, x->o_bytes));
  TU_OK(at_copy_to_device(g_ctx, x->lse, ff, x->lse_count * 4));
  free(ff);
  at_serving_tensors st = tensors_of(x);
  at_tensors t = {st.q, st.k, st.v, st.o, st.lse, st.q_stride, st.k_stride, st.v_stride, st.o_stride};
  rt_ragged_args ragged = {st.cu_seqlens_q, st.cu_seqlens_kv, st.total_q, st.total_kv};
  const float *d = x->descales;
  rt_fp8_args fp8 = {d, d + 1, d + 2, NULL, NULL};
  TU_OK(rt_variant_launch_serving(lv, s, &t, needs_fp8(s) ? &fp8 : NULL, NULL, &ragged, 0, NULL));
  TU_OK(at_synchronize(g_ctx));
  const size_t o_count = (size_t)x->q_rows * s->q_heads * s->head_dim;
  float *got_o = malloc((o_count + 1) * sizeof *got_o), *got_lse = malloc((x->lse_count + 1) * sizeof *got_lse);
  assert_true(got_o && got_lse);
  tu_download(at_dtype_default_out(s->dtype), (CUdeviceptr)(uintptr_t)x->o, o_count, got_o);
  TU_OK(at_copy_to_host(g_ctx, got_lse, x->lse, x->lse_count * sizeof(float)));
  /* One "sequence" of every packed row: rows of no sequence do not exist in a packed layout. */
  variant_run all = *vr;
  serving_case one = *vr->c;
  one.batch = 1;
  all.c = &one, all.skip_b = -1;
  int ok = sequences_close(&all, vr->r.o, got_o, o_count, at_dtype_tolerance(s->dtype), "o", key);
  if (s->with_lse) ok &= sequences_close(&all, vr->r.lse, got_lse, x->lse_count, 1e-3, "lse", key);
  free(got_o), free(got_lse);
  vr->n_runs++;
  return !ok;
}

/* Every ragged variant gen_enumerate_serving lists for the case's shape (ragged Q with ragged
 * K/V, .rg, or with padded K/V, .rgq), against the naive kernels run per sequence on gathered
 * copies, the inputs followed by NaN rows (make_io) that no variant may read. */
static void check_ragged_variants(const serving_case *c)
{
  serving_io x;
  make_io(c, &x);
  char label[512];
  describe(c, &x, label, sizeof label);
  printf("  %s\n", label);
  variant_run vr = {c, &x, {NULL, NULL}, -1, 0};
  const size_t o_count = (size_t)x.q_rows * c->nq * c->d;
  vr.r.o = calloc(o_count + 1, sizeof(float)), vr.r.lse = calloc(x.lse_count + 1, sizeof(float));
  assert_true(vr.r.o && vr.r.lse);
  const rt_naive *naive = naive_for(&x.shape);
  for (int b = 0; b < c->batch; b++) reference_sequence(naive, &x, b, &vr.r);
  gen_target target;
  TU_OK(gen_target_make(tu_gpu.arch, tu_gpu.info.smem_per_block_optin, &target));
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0;
  const int ragged = c->kv_layout == AT_SEQ_RAGGED ? GEN_RAGGED_QKV : GEN_RAGGED_Q;
  TU_OK(gen_enumerate_serving(&x.shape, 0, ragged, &target, vs, GEN_MAX_VARIANTS, &n));
  assert_true(n > 0);
  const int failures = tu_check_variants(vs, n, &target, check_ragged_variant, &vr);
  printf("    %d ragged variants, %d wrong\n", vr.n_runs, failures);
  free(vr.r.o), free(vr.r.lse);
  free_io(&x);
  if (failures) fail_msg("%d of %d ragged prefill variants are wrong for %s", failures, n, label);
}

static void test_ragged_prefill_variants(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  /* Lengths 0, 1 and the maximum among random ones (make_io), most not multiples of any tile;
   * masks none, causal, causal-br (T_b != S_b with ragged K/V drawn apart); MHA, GQA 4, MQA;
   * lse; ragged and padded K/V; head dims 64, 80 (not a power of two), 128, 256. */
  const serving_case cases[] = {
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 7, 300, 300, 8, 2, 128, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 6, 200, 333, 8, 8, 64, AT_MASK_NONE, AT_DTYPE_F16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 6, 257, 190, 4, 1, 128, AT_MASK_CAUSAL_TL, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 5, 150, 400, 8, 2, 80, AT_MASK_CAUSAL_BR, AT_DTYPE_F16, SAME, 0, 0},
      {AT_SEQ_RAGGED, AT_SEQ_PADDED, 0, 5, 130, 170, 8, 2, 64, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_PADDED, 0, 4, 100, 60, 4, 4, 128, AT_MASK_CAUSAL_TL, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 4, 140, 140, 4, 2, 256, AT_MASK_CAUSAL_TL, BF16, SAME, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_ragged_variants(&cases[i]);
}

static void test_ragged_prefill_variants_fp8(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  if (!have_fp8_conversions()) skip();
  const serving_case cases[] = {
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 6, 200, 260, 8, 2, 128, AT_MASK_CAUSAL_BR, AT_DTYPE_E4M3, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 5, 150, 150, 4, 4, 64, AT_MASK_NONE, AT_DTYPE_E5M2, SAME, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_ragged_variants(&cases[i]);
}

/* A ragged plan ("auto": the ragged default) on offsets that point anywhere: decreasing,
 * negative, past the packed rows, longer than the planned maxima. Nothing faults; O (zeroed
 * first) and lse stay free of NaN, so no NaN row after Q, K or V (make_io) was read; and the
 * check names the first bad offset. */
static void test_ragged_prefill_bad_offsets(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case c = {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 6, 90, 120, 8, 2, 64, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0};
  serving_io x;
  make_io(&c, &x);
  at_plan *plan = NULL;
  TU_OK(at_plan_create_serving(g_ctx, &x.shape, &x.layout, NULL, &plan));
  at_plan_info info;
  TU_OK(at_plan_describe(plan, &info));
  printf("  %s\n", info.impl);
  assert_non_null(strstr(info.impl, ".rg."));
  const int32_t cu_q[7] = {0, 300, 20, INT32_MAX, -100, 5, x.q_rows};
  const int32_t cu_kv[7] = {-7, x.kv_rows + 50, 3, 3, INT32_MIN, 1 << 30, x.kv_rows};
  TU_OK(at_copy_to_device(g_ctx, x.cu_q_dev, cu_q, sizeof cu_q));
  TU_OK(at_copy_to_device(g_ctx, x.cu_kv_dev, cu_kv, sizeof cu_kv));
  const size_t bytes = x.o_bytes > x.lse_count * 4 ? x.o_bytes : x.lse_count * 4;
  uint8_t *zero = calloc(1, bytes + 1);
  assert_non_null(zero);
  TU_OK(at_copy_to_device(g_ctx, x.o, zero, x.o_bytes));
  TU_OK(at_copy_to_device(g_ctx, x.lse, zero, x.lse_count * 4));
  free(zero);
  at_serving_tensors t = tensors_of(&x);
  TU_OK(at_plan_run_serving(plan, &t, NULL, NULL));
  TU_OK(at_synchronize(g_ctx)); /* a read outside the tensors faults here */
  const size_t o_count = (size_t)x.q_rows * c.nq * c.d;
  float *o = malloc(o_count * sizeof *o), *lse = malloc(x.lse_count * sizeof *lse);
  assert_true(o && lse);
  tu_download(AT_DTYPE_BF16, (CUdeviceptr)(uintptr_t)x.o, o_count, o);
  TU_OK(at_copy_to_host(g_ctx, lse, x.lse, x.lse_count * sizeof(float)));
  for (size_t i = 0; i < o_count; i++)
    if (isnan(o[i])) fail_msg("o[%zu] is NaN after a run with bad offsets (a NaN row past a tensor was read)", i);
  for (size_t i = 0; i < x.lse_count; i++)
    if (isnan(lse[i])) fail_msg("lse[%zu] is NaN after a run with bad offsets", i);
  free(o), free(lse);
  at_status rc = at_serving_check(plan, &t);
  assert_int_equal(rc, AT_ERR_INVALID);
  printf("  at_serving_check: %s\n", at_last_error());
  at_plan_destroy(plan);
  free_io(&x);
}

/* A ragged plan's run captured in a CUDA graph replays what a direct run writes, bit for bit. */
static void test_ragged_prefill_plan_in_a_graph(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case c = {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 5, 400, 400, 8, 2, 128, AT_MASK_CAUSAL_TL, BF16, SAME, 1, 0};
  serving_io x;
  make_io(&c, &x);
  at_plan *plan = NULL;
  TU_OK(at_plan_create_serving(g_ctx, &x.shape, &x.layout, NULL, &plan));
  expect_graph_replay_matches(plan, &x);
}

/* ---- cuDNN's ragged graph ------------------------------------------------------------------------ */

/* Sequence b's rows of O and entries of lse, output against reference, compared on their own so
 * that a failure names the sequence and its lengths (rows that see no key: o = 0, lse = -inf). */
static void expect_sequence_close(const serving_io *x, int b, const reference *want, const float *got_o,
                                  const float *got_lse, const char *label)
{
  const at_shape *s = &x->shape;
  const int T = x->T[b], nq = s->q_heads, d = s->head_dim;
  if (T == 0) return;
  char what[600];
  snprintf(what, sizeof what, "%s: sequence %d (T_b %d, S_b %d)", label, b, T, x->S[b]);
  printf("   sequence %d (T_b %d, S_b %d)\n", b, T, x->S[b]);
  const size_t first = (size_t)x->q_first[b] * nq * d, n = (size_t)T * nq * d;
  expect_close("o", want->o + first, got_o + first, n, at_dtype_tolerance(s->dtype), what);
  if (!s->with_lse) return;
  float *w = malloc((size_t)nq * T * sizeof *w), *g = malloc((size_t)nq * T * sizeof *g);
  assert_true(w && g);
  for (int h = 0; h < nq; h++)
    for (int i = 0; i < T; i++) {
      w[(size_t)h * T + i] = want->lse[lse_index(x, b, h, i)];
      g[(size_t)h * T + i] = got_lse[lse_index(x, b, h, i)];
    }
  expect_close("lse", w, g, (size_t)nq * T, 1e-3, what);
  free(w), free(g);
}

/* A "cudnn" plan for a case; skips the test where the loaded cuDNN has no ragged graph (older
 * than 9.6.0), and fails with cuDNN's reason where it refuses the graph. */
static at_plan *cudnn_plan(serving_io *x, const char *label)
{
  at_plan *plan = NULL;
  at_plan_options cudnn = {"cudnn"};
  at_status rc = at_plan_create_serving(g_ctx, &x->shape, &x->layout, &cudnn, &plan);
  if (rc == AT_ERR_UNSUPPORTED && strstr(at_last_error(), "lacks ragged offsets")) {
    printf("  skipped: %s\n", at_last_error());
    free_io(x);
    skip();
  }
  if (rc != AT_OK) fail_msg("%s: cuDNN's serving plan: %s", label, at_last_error());
  at_plan_info info;
  TU_OK(at_plan_describe(plan, &info));
  assert_string_equal(info.impl, "cudnn");
  assert_int_equal(info.choice, AT_CHOICE_FORCED);
  return plan;
}

/* Plans cuDNN for the case, runs it into the poisoned O and lse make_io left, and compares every
 * sequence with the naive kernels run on its gathered copy. */
static void run_cudnn_case(const serving_case *c)
{
  serving_io x;
  make_io(c, &x);
  char label[512];
  describe(c, &x, label, sizeof label);
  printf("  cudnn %s\n", label);
  at_plan *plan = cudnn_plan(&x, label);
  at_serving_tensors t = tensors_of(&x);
  TU_OK(at_serving_check(plan, &t));
  TU_OK(at_plan_run_serving(plan, &t, NULL, NULL));
  TU_OK(at_synchronize(g_ctx)); /* a read past the tensors (the NaN rows are inside) faults here */

  const size_t o_count = (size_t)x.q_rows * c->nq * c->d;
  reference r = {calloc(o_count + 1, sizeof(float)), calloc(x.lse_count + 1, sizeof(float))};
  float *got_o = malloc((o_count + 1) * sizeof *got_o), *got_lse = malloc((x.lse_count + 1) * sizeof *got_lse);
  assert_true(r.o && r.lse && got_o && got_lse);
  tu_download(at_dtype_default_out(c->dtype), (CUdeviceptr)(uintptr_t)x.o, o_count, got_o);
  TU_OK(at_copy_to_host(g_ctx, got_lse, x.lse, x.lse_count * sizeof(float)));
  const rt_naive *naive = naive_for(&x.shape);
  for (int b = 0; b < c->batch; b++) reference_sequence(naive, &x, b, &r);
  for (int b = 0; b < c->batch; b++) expect_sequence_close(&x, b, &r, got_o, got_lse, label);
  /* and the whole packed output: no row is left poisoned */
  expect_close("o (all rows)", r.o, got_o, o_count, at_dtype_tolerance(c->dtype), label);

  at_plan_destroy(plan);
  free(r.o), free(r.lse), free(got_o), free(got_lse);
  free_io(&x);
}

static void test_cudnn_ragged_prefill(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  /* T_b and S_b are drawn apart (make_io): sequence 1 has T 1, S 0 and sequence 2 T 0, S 1, so
   * rows without keys occur under every mask; causal-br with T_b > S_b adds more. */
  const serving_case cases[] = {
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 7, 300, 300, 8, 2, 128, AT_MASK_NONE, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 7, 300, 300, 8, 2, 128, AT_MASK_CAUSAL_TL, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 6, 200, 333, 8, 2, 128, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 6, 257, 190, 4, 1, 64, AT_MASK_CAUSAL_BR, AT_DTYPE_F16, SAME, 0, 0},
      /* padded K/V: every S_b = S; T > S under bottom-right leaves the first rows without keys */
      {AT_SEQ_RAGGED, AT_SEQ_PADDED, 0, 5, 130, 100, 8, 2, 128, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_RAGGED, AT_SEQ_PADDED, 0, 4, 100, 160, 8, 8, 64, AT_MASK_NONE, AT_DTYPE_F16, SAME, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_cudnn_case(&cases[i]);
}

/* cuDNN's paged graph (padded Q, K/V through the block table): decode and a prefill chunk, page
 * sizes 1, 16, 64; lengths 0, 1 and off the page (make_io), so rows without keys occur (the
 * fix-up writes them); GQA and MQA; lse; pages shuffled, K and V side by side in one page. */
static void test_cudnn_paged(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case cases[] = {
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 6, 1, 700, 32, 8, 128, AT_MASK_NONE, BF16, SAME, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 64, 5, 8, 600, 16, 4, 128, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 1, 4, 1, 300, 8, 1, 64, AT_MASK_NONE, AT_DTYPE_F16, SAME, 0, 0},
      {AT_SEQ_PADDED, AT_SEQ_PAGED, 16, 4, 96, 400, 8, 2, 128, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 1},
  };
  g_pool_for_cudnn = 1;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_cudnn_case(&cases[i]);
  g_pool_for_cudnn = 0;
  /* A table whose unused entries are outside the pool: at_serving_check refuses it for cuDNN
   * (its loads read the whole row), where the generated kernels' plans take it. */
  serving_io x;
  make_io(&cases[1], &x);
  at_plan *plan = cudnn_plan(&x, "cudnn paged, wild table");
  at_serving_tensors t = tensors_of(&x);
  tu_expect_refused(at_serving_check(plan, &t), AT_ERR_INVALID, "reads every entry of a sequence's row");
  at_plan_destroy(plan);
  TU_OK(at_plan_create_serving(g_ctx, &x.shape, &x.layout, NULL, &plan));
  TU_OK(at_serving_check(plan, &t));
  at_plan_destroy(plan);
  free_io(&x);
}

/* cuDNN's ragged plan allocates nothing at run time: its run (metadata kernel, graph, fix-up)
 * captured in a CUDA graph replays what a direct run writes, bit for bit. */
static void test_cudnn_ragged_plan_in_a_graph(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case c = {AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0, 5, 400, 400, 8, 2, 128, AT_MASK_CAUSAL_TL, BF16, SAME, 1, 0};
  serving_io x;
  make_io(&c, &x);
  at_plan *plan = cudnn_plan(&x, "cudnn ragged in a graph");
  expect_graph_replay_matches(plan, &x);
}

/* ---- metadata that points anywhere --------------------------------------------------------------- */

static void test_bad_metadata_never_reads_outside(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case c = {AT_SEQ_RAGGED, AT_SEQ_PAGED, 16, 6, 40, 200, 8, 2, 64, AT_MASK_NONE, BF16, SAME, 1, 0};
  serving_io x;
  make_io(&c, &x);
  at_plan *plan = NULL;
  TU_OK(at_plan_create_serving(g_ctx, &x.shape, &x.layout, NULL, &plan));
  const int maxp = x.layout.max_pages_per_seq;
  /* Every used entry of sequence 0 past the pool, negative or huge; lengths past the maximum and
   * negative; offsets decreasing, negative and past the packed rows. */
  const int32_t bad_pages[] = {INT32_MAX, INT32_MIN, -1, x.num_pages, 1 << 28};
  for (int p = 0; p < maxp; p++) x.table[p] = bad_pages[p % 5];
  const int32_t lens[6] = {INT32_MAX, -5, 200, 1, 0, 1 << 30};
  const int32_t cu_q[7] = {0, 30, 20, INT32_MAX, -100, 5, x.q_rows};
  TU_OK(at_copy_to_device(g_ctx, x.table_dev, x.table, (size_t)c.batch * maxp * sizeof(int32_t)));
  TU_OK(at_copy_to_device(g_ctx, x.lens_dev, lens, sizeof lens));
  TU_OK(at_copy_to_device(g_ctx, x.cu_q_dev, cu_q, sizeof cu_q));
  at_serving_tensors t = tensors_of(&x);
  TU_OK(at_plan_run_serving(plan, &t, NULL, NULL));
  TU_OK(at_synchronize(g_ctx)); /* a read outside the pool or the tensors faults here */

  /* The check names the first problem it finds, in the offsets. */
  at_status rc = at_serving_check(plan, &t);
  assert_int_equal(rc, AT_ERR_INVALID);
  printf("  at_serving_check: %s\n", at_last_error());
  assert_non_null(strstr(at_last_error(), "cu_seqlens_q[2] = 20"));
  TU_OK(at_copy_to_device(g_ctx, x.cu_q_dev, x.cu_q, (size_t)(c.batch + 1) * sizeof(int32_t)));
  rc = at_serving_check(plan, &t);
  assert_int_equal(rc, AT_ERR_INVALID);
  printf("  at_serving_check: %s\n", at_last_error());
  assert_non_null(strstr(at_last_error(), "seqlens_kv[0] = 2147483647"));
  /* Lengths restored: only the table of sequence 0 is bad now. */
  TU_OK(at_copy_to_device(g_ctx, x.lens_dev, x.lens, (size_t)c.batch * sizeof(int32_t)));
  rc = at_serving_check(plan, &t);
  assert_int_equal(rc, AT_ERR_INVALID);
  printf("  at_serving_check: %s\n", at_last_error());
  assert_non_null(strstr(at_last_error(), "block_table[0][0] = 2147483647"));
  /* The run masks the keys of pages outside the pool: sequence 0 sees none of them, every other
   * sequence is what it was, and nothing is NaN (no unused page was read). */
  TU_OK(at_plan_run_serving(plan, &t, NULL, NULL));
  TU_OK(at_synchronize(g_ctx));
  const size_t o_count = (size_t)x.q_rows * c.nq * c.d;
  float *o = malloc(o_count * sizeof *o);
  assert_non_null(o);
  tu_download(AT_DTYPE_BF16, (CUdeviceptr)(uintptr_t)x.o, o_count, o);
  for (size_t i = 0; i < o_count; i++)
    if (!isfinite(o[i])) fail_msg("o[%zu] = %g after a run with pages outside the pool", i, o[i]);
  for (size_t i = 0; i < (size_t)x.T[0] * c.nq * c.d; i++)
    if (o[i] != 0.0f) fail_msg("sequence 0 has no page in the pool, yet o[%zu] = %g", i, o[i]);
  free(o);
  at_plan_destroy(plan);
  free_io(&x);
}

/* ---- what the API refuses ---------------------------------------------------------------------------- */

static void test_api_refusals(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case c = {AT_SEQ_RAGGED, AT_SEQ_PAGED, 16, 3, 16, 64, 8, 2, 64, AT_MASK_CAUSAL_BR, BF16, SAME, 0, 0};
  serving_io x;
  make_io(&c, &x);
  at_plan *plan = NULL;
  at_plan_options cudnn = {"cudnn"}, fused = {"fused"};
  tu_expect_refused(at_plan_create_serving(g_ctx, &x.shape, &x.layout, &cudnn, &plan), AT_ERR_UNSUPPORTED,
               "unsupported: cudnn cannot run ragged Q with paged K/V (page size 16)");
  at_serving_layout kv_only = at_serving_layout_make(&x.shape, AT_SEQ_PADDED, AT_SEQ_RAGGED, 0);
  tu_expect_refused(at_plan_create_serving(g_ctx, &x.shape, &kv_only, &cudnn, &plan), AT_ERR_UNSUPPORTED,
               "unsupported: cudnn cannot run padded Q with ragged K/V");
  tu_expect_refused(at_plan_create_serving(g_ctx, &x.shape, &kv_only, &fused, &plan), AT_ERR_UNSUPPORTED,
               "no generated kernel reads it");
  gen_target target;
  gen_variant v;
  char key[GEN_KEY_MAX];
  TU_OK(gen_target_make(tu_gpu.arch, tu_gpu.info.smem_per_block_optin, &target));
  at_shape padded = x.shape;
  padded.q_len = 64; /* a prefill default, valid for the padded shape */
  at_serving_layout l = at_serving_layout_make(&padded, AT_SEQ_PADDED, AT_SEQ_RAGGED, 0);
  TU_OK(gen_default_variant(&padded, &target, &v));
  TU_OK(gen_variant_key(&v, key, sizeof key));
  at_plan_options forced = {key};
  tu_expect_refused(at_plan_create_serving(g_ctx, &padded, &l, &forced, &plan), AT_ERR_UNSUPPORTED,
               "no generated kernel reads padded Q with ragged K/V");
  assert_null(plan);
  /* A contiguous key for paged K/V, and a paged one whose Q layout differs. */
  at_serving_layout pl = at_serving_layout_make(&padded, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  tu_expect_refused(at_plan_create_serving(g_ctx, &padded, &pl, &forced, &plan), AT_ERR_INVALID, "does not fit shape");
  assert_null(plan);
  at_plan_options pg_padded = {"fa2.bf16.pg16.d64.causal-br.g4.bm64.bn64.w4.s2"};
  tu_expect_refused(at_plan_create_serving(g_ctx, &padded, &pl, &pg_padded, &plan), AT_ERR_INVALID, "does not fit shape");
  assert_null(plan);
  /* A padded variant for ragged Q and K/V, and a ragged one for the other ragged layout. */
  at_serving_layout rg = at_serving_layout_make(&padded, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);
  at_plan_options fa2_padded = {"fa2.bf16.d64.causal-br.g4.bm64.bn64.w4.s2"};
  tu_expect_refused(at_plan_create_serving(g_ctx, &padded, &rg, &fa2_padded, &plan), AT_ERR_INVALID, "does not fit shape");
  assert_null(plan);
  at_plan_options rgq = {"fa2.bf16.rgq.d64.causal-br.g4.bm64.bn64.w4.s2"};
  tu_expect_refused(at_plan_create_serving(g_ctx, &padded, &rg, &rgq, &plan), AT_ERR_INVALID, "does not fit shape");
  assert_null(plan);

  at_plan_options naive = {"naive"};
  TU_OK(at_plan_create_serving(g_ctx, &x.shape, &x.layout, &naive, &plan));
  at_layout bshd = at_layout_bshd(&x.shape);
  at_tensors plain = {x.q, x.k, x.v, x.o, NULL, bshd.q, bshd.k, bshd.v, bshd.o};
  tu_expect_refused(at_plan_run(plan, &plain, NULL, NULL), AT_ERR_INVALID, "at_plan_run_serving");
  at_serving_tensors t = tensors_of(&x);
  at_serving_tensors bad = t;
  bad.block_table = NULL;
  tu_expect_refused(at_plan_run_serving(plan, &bad, NULL, NULL), AT_ERR_INVALID, "block_table is NULL");
  bad = t;
  bad.cu_seqlens_kv = x.cu_q_dev;
  tu_expect_refused(at_plan_run_serving(plan, &bad, NULL, NULL), AT_ERR_INVALID, "cu_seqlens_kv is given");
  bad = t;
  bad.seqlens_kv = (const int32_t *)((const char *)x.lens_dev + 2);
  tu_expect_refused(at_plan_run_serving(plan, &bad, NULL, NULL), AT_ERR_INVALID, "not 4-byte aligned");
  bad = t;
  bad.struct_size = 0;
  tu_expect_refused(at_plan_run_serving(plan, &bad, NULL, NULL), AT_ERR_INVALID, "struct_size is 0");
  bad = t;
  bad.k_stride.batch += 1;
  tu_expect_refused(at_plan_run_serving(plan, &bad, NULL, NULL), AT_ERR_INVALID, "differ from the plan's");
  bad = t;
  bad.num_pages = 0;
  tu_expect_refused(at_plan_run_serving(plan, &bad, NULL, NULL), AT_ERR_INVALID, "num_pages 0");
  at_plan_destroy(plan);

  at_serving_layout wrong = x.layout;
  wrong.page_size = 8;
  tu_expect_refused(at_plan_create_serving(g_ctx, &x.shape, &wrong, NULL, &plan), AT_ERR_INVALID, "page_size 8 not allowed");
  free_io(&x);
}

/* A plan from at_plan_create_serving with padded tensors is an ordinary plan: the same output
 * through at_plan_run_serving as at_plan_create's through at_plan_run, bit for bit. */
static void test_padded_serving_plan_is_an_ordinary_plan(void **state)
{
  (void)state;
  if (!tu_have_gpu) skip();
  const serving_case c = {AT_SEQ_PADDED, AT_SEQ_PADDED, 0, 3, 40, 90, 8, 2, 64, AT_MASK_CAUSAL_BR, BF16, SAME, 1, 0};
  serving_io x;
  make_io(&c, &x);
  at_plan_options naive = {"naive"};
  at_plan *ordinary = NULL, *serving = NULL;
  TU_OK(at_plan_create(g_ctx, &x.shape, NULL, &naive, &ordinary));
  TU_OK(at_plan_create_serving(g_ctx, &x.shape, NULL, &naive, &serving));
  at_serving_tensors t = tensors_of(&x);
  TU_OK(at_serving_check(serving, &t));
  TU_OK(at_plan_run_serving(serving, &t, NULL, NULL));
  TU_OK(at_synchronize(g_ctx));
  uint8_t *a = malloc(x.o_bytes), *b = malloc(x.o_bytes);
  float *la = malloc(x.lse_count * 4), *lb = malloc(x.lse_count * 4);
  assert_true(a && b && la && lb);
  TU_OK(at_copy_to_host(g_ctx, a, x.o, x.o_bytes));
  TU_OK(at_copy_to_host(g_ctx, la, x.lse, x.lse_count * 4));
  at_tensors plain = {t.q, t.k, t.v, t.o, t.lse, t.q_stride, t.k_stride, t.v_stride, t.o_stride};
  TU_OK(at_plan_run(ordinary, &plain, NULL, NULL));
  TU_OK(at_synchronize(g_ctx));
  TU_OK(at_copy_to_host(g_ctx, b, x.o, x.o_bytes));
  TU_OK(at_copy_to_host(g_ctx, lb, x.lse, x.lse_count * 4));
  assert_memory_equal(a, b, x.o_bytes);
  assert_memory_equal(la, lb, x.lse_count * 4);
  double ms = 0;
  TU_OK(at_plan_benchmark_serving(serving, &t, NULL, 1, 3, &ms));
  assert_true(ms > 0);
  free(a), free(b), free(la), free(lb);
  at_plan_destroy(ordinary);
  at_plan_destroy(serving);
  free_io(&x);
}

static int teardown_modules(void **state)
{
  for (int i = 0; i < g_n_naive; i++) rt_naive_destroy(&g_naive[i]);
  g_n_naive = 0;
  return teardown(state);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ragged_q_ragged_kv),
      cmocka_unit_test(test_paged_kv_every_page_size),
      cmocka_unit_test(test_paged_and_padded_mixes),
      cmocka_unit_test(test_fp8_kv_cache),
      cmocka_unit_test(test_paged_decode_variants),
      cmocka_unit_test(test_paged_decode_variants_fp8_kv),
      cmocka_unit_test(test_paged_decode_entry_outside_pool),
      cmocka_unit_test(test_paged_decode_plan_in_a_graph),
      cmocka_unit_test(test_paged_prefill_variants),
      cmocka_unit_test(test_ragged_prefill_variants),
      cmocka_unit_test(test_ragged_prefill_variants_fp8),
      cmocka_unit_test(test_ragged_prefill_bad_offsets),
      cmocka_unit_test(test_ragged_prefill_plan_in_a_graph),
      cmocka_unit_test(test_cudnn_ragged_prefill),
      cmocka_unit_test(test_cudnn_ragged_plan_in_a_graph),
      cmocka_unit_test(test_cudnn_paged),
      cmocka_unit_test(test_bad_metadata_never_reads_outside),
      cmocka_unit_test(test_api_refusals),
      cmocka_unit_test(test_padded_serving_plan_is_an_ordinary_plan),
  };
  return TU_RUN_GROUP(tests, setup, teardown_modules);
}
