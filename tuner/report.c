/*
 * report.c — see report.h. Sections: the model (rows from a cache, groups, geometric means),
 * number formatting, the text/md/csv/json renderers, and the HTML renderer with its SVG charts.
 *
 * The charts are SVG written here rather than by a plotting library: no dependency to install,
 * exact control over what each chart shows, and the text in them (shape keys, numbers) stays
 * searchable and selectable in the browser. The HTML is one file with no network references.
 *
 * Output goes through stdio; a write error sticks to the stream, so each renderer checks
 * ferror() and fflush() once at the end instead of every fprintf.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generator/generator.h"
#include "runtime/rt.h"
#include "tuner/report.h"

/* ---- the model --------------------------------------------------------------------------- */

/* Per-row bookkeeping that only the loader needs. */
typedef struct row_extra {
  cache_env env;       /* of the best row */
  cache_env trial_env; /* of the first trial, for the header of rows without a best */
  int has_trial_env;
  char updated_at[32]; /* of the best row: the newest template version's row wins */
  int has_cudnn_trial;
  double cudnn_trial_ms;
} row_extra;

typedef struct loader {
  tn_report *r;
  row_extra *extra;
  int cap;
  int hint; /* trials come ordered by (GPU model, shape key): the last row found is likely next */
  at_status rc;
} loader;

static int find_row(loader *l, const char *gpu_model, const char *key)
{
  const tn_report *r = l->r;
  if (l->hint < r->n_rows && strcmp(r->rows[l->hint].key, key) == 0 &&
      strcmp(r->rows[l->hint].gpu_model, gpu_model) == 0)
    return l->hint;
  for (int i = 0; i < r->n_rows; i++)
    if (strcmp(r->rows[i].key, key) == 0 && strcmp(r->rows[i].gpu_model, gpu_model) == 0)
      return l->hint = i;
  return -1;
}

/* Is this a ragged or paged shape's row (a key longer than its shape's)? */
static int row_is_serving(const tn_report_row *row)
{
  char plain[160];
  at_shape_key(&row->shape, plain, sizeof plain);
  return strlen(row->key) > strlen(plain);
}

/* A fresh row with every time unknown; -1 (and l->rc set) when memory runs out. */
static int add_row(loader *l, const char *gpu_model, const at_shape *shape, const char *key)
{
  tn_report *r = l->r;
  if (r->n_rows == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    tn_report_row *rows = realloc(r->rows, (size_t)cap * sizeof *rows);
    if (rows) r->rows = rows;
    row_extra *extra = realloc(l->extra, (size_t)cap * sizeof *extra);
    if (extra) l->extra = extra;
    if (!rows || !extra) {
      l->rc = at_fail(AT_ERR_NOMEM, "no memory for %d report rows", cap);
      return -1;
    }
    l->cap = cap;
  }
  tn_report_row *row = &r->rows[r->n_rows];
  memset(row, 0, sizeof *row);
  memset(&l->extra[r->n_rows], 0, sizeof *l->extra);
  snprintf(row->gpu_model, sizeof row->gpu_model, "%s", gpu_model);
  row->shape = *shape;
  snprintf(row->key, sizeof row->key, "%s", key);
  row->best_ms = row->best_tflops = row->best_kv_tbs = NAN;
  row->tuned_ms = row->tuned_tflops = row->cudnn_ms = row->naive_ms = NAN;
  row->speedup_tuned = row->speedup_best = row->err_naive = row->err_cudnn = NAN;
  row->kv8_base_ms = row->kv8_gain = NAN;
  l->extra[r->n_rows].cudnn_trial_ms = NAN;
  return l->hint = r->n_rows++;
}

static void take_best(tn_report_row *row, row_extra *x, const cache_best *b)
{
  row->has_best = 1;
  snprintf(row->best_impl, sizeof row->best_impl, "%s", b->impl);
  row->best_ms = b->time_ms;
  row->best_tflops = b->tflops;
  row->cudnn_ms = b->cudnn_ms;
  row->err_naive = b->err_naive;
  /* cuDNN compared with itself says nothing (the tuning run stores 0 there). */
  row->err_cudnn = strcmp(b->impl, "cudnn") == 0 ? NAN : b->err_cudnn;
  x->env = b->env;
  snprintf(x->updated_at, sizeof x->updated_at, "%s", b->updated_at);
}

static int visit_best(void *user, const cache_best *b)
{
  loader *l = user;
  char key[CACHE_ROW_KEY_CAP];
  cache_row_key(&b->shape, b->serving, key);
  int i = find_row(l, b->env.gpu_model, key);
  if (i >= 0) {
    /* Another template version's row for the same shape: keep the newest, count the other. */
    l->r->n_older_best++;
    if (strcmp(b->updated_at, l->extra[i].updated_at) > 0) take_best(&l->r->rows[i], &l->extra[i], b);
    return 0;
  }
  if ((i = add_row(l, b->env.gpu_model, &b->shape, key)) < 0) return 1;
  take_best(&l->r->rows[i], &l->extra[i], b);
  return 0;
}

static int visit_trial(void *user, const cache_env *env, const cache_trial *t)
{
  loader *l = user;
  char key[CACHE_ROW_KEY_CAP];
  cache_row_key(&t->shape, t->serving, key);
  int i = find_row(l, env->gpu_model, key);
  if (i < 0 && (i = add_row(l, env->gpu_model, &t->shape, key)) < 0) return 1;
  tn_report_row *row = &l->r->rows[i];
  row_extra *x = &l->extra[i];
  /* Trials measured with other kernel templates than the row's best say nothing about it. */
  if (x->env.template_version[0] && strcmp(env->template_version, x->env.template_version) != 0) return 0;
  if (!x->has_trial_env) x->trial_env = *env, x->has_trial_env = 1;
  int timed = t->status == CACHE_OK && isfinite(t->time_ms) && t->time_ms > 0;
  if (strcmp(t->impl, "naive") != 0 && strcmp(t->impl, "cudnn") != 0) row->n_fused_trials++; /* a variant key */
  if (gen_is_variant_key(t->impl) && timed && !(t->time_ms >= row->tuned_ms)) {
    snprintf(row->tuned_impl, sizeof row->tuned_impl, "%s", t->impl);
    row->tuned_ms = t->time_ms;
    row->tuned_tflops = t->tflops;
    row->err_naive = t->err_naive;
    row->err_cudnn = t->err_cudnn;
  } else if (strcmp(t->impl, "cudnn") == 0) {
    x->has_cudnn_trial = 1;
    row->cudnn_trial_status = t->status;
    x->cudnn_trial_ms = timed ? t->time_ms : NAN;
    snprintf(row->cudnn_message, sizeof row->cudnn_message, "%s", t->message);
  } else if (strcmp(t->impl, "naive") == 0 && timed && !(t->time_ms >= row->naive_ms)) {
    row->naive_ms = t->time_ms;
  }
  return 0;
}

/* cuDNN's time: the best row's, else its trial's; otherwise say why there is none. */
static void settle_cudnn(tn_report_row *row, const row_extra *x)
{
  if (!isfinite(row->cudnn_ms) && isfinite(x->cudnn_trial_ms)) row->cudnn_ms = x->cudnn_trial_ms;
  if (isfinite(row->cudnn_ms)) row->cudnn = TN_REPORT_CUDNN_OK;
  else if (!x->has_cudnn_trial) row->cudnn = TN_REPORT_CUDNN_MISSING;
  else if (row->cudnn_trial_status == CACHE_UNSUPPORTED) row->cudnn = TN_REPORT_CUDNN_UNSUPPORTED;
  else row->cudnn = TN_REPORT_CUDNN_FAILED;
}

/* The note column (report.h). cuDNN's FP8 graph writes FP8 output (Hopper's FP8 engines write
 * no other) where attntune's FP8 kernels write bf16: the times compare the same attention, the
 * outputs differ in precision, and a reader of the cuDNN column must know it. */
static void settle_note(tn_report_row *row)
{
  const char *dtype = at_dtype_name(row->shape.dtype);
  row->note[0] = '\0';
  if (row->cudnn == TN_REPORT_CUDNN_OK && at_dtype_is_fp8(row->shape.dtype))
    snprintf(row->note, sizeof row->note, "cuDNN writes FP8 output (%s); attntune writes bf16", dtype);
  else if ((row->cudnn == TN_REPORT_CUDNN_UNSUPPORTED || row->cudnn == TN_REPORT_CUDNN_FAILED) &&
           row->cudnn_message[0])
    snprintf(row->note, sizeof row->note, "cuDNN: %s", row->cudnn_message);
}

/* A serving decode row's K/V rate. Its key keeps length buckets, not lengths, so the bytes are
 * not known here; its TFLOP/s are the tuner's, of the sequences' own lengths, and where every
 * key is visible from every query row (no mask, or T = 1) FLOPs and K/V bytes are in a fixed
 * ratio: 4 Nq T D FLOPs per key against 2 Nkv D element sizes. NaN otherwise (causal-br with
 * T > 1: the visible pairs depend on the lengths). */
static double serving_kv_tbs(const tn_report_row *row)
{
  const at_shape *s = &row->shape;
  if (!isfinite(row->best_tflops) || (s->mask != AT_MASK_NONE && s->q_len != 1)) return NAN;
  const double bytes_per_flop =
      2.0 * s->kv_heads * (double)at_dtype_size(at_shape_kv_dtype(s)) / (4.0 * s->q_heads * s->q_len);
  return row->best_tflops * bytes_per_flop;
}

static void settle_row(tn_report_row *row, const row_extra *x)
{
  double flops = at_shape_flops(&row->shape);
  settle_cudnn(row, x);
  if (isfinite(row->tuned_ms) && !isfinite(row->tuned_tflops))
    row->tuned_tflops = flops / (row->tuned_ms * 1e-3) / 1e12;
  if (isfinite(row->best_ms) && !isfinite(row->best_tflops))
    row->best_tflops = flops / (row->best_ms * 1e-3) / 1e12;
  if (tn_is_decode_shape(&row->shape) && !row_is_serving(row)) row->best_kv_tbs = tn_kv_tbs(&row->shape, row->best_ms);
  else if (tn_is_decode_shape(&row->shape)) row->best_kv_tbs = serving_kv_tbs(row);
  row->speedup_tuned = row->cudnn_ms / row->tuned_ms; /* NaN when either is missing */
  row->speedup_best = row->cudnn_ms / row->best_ms;
  settle_note(row);
}

/* An FP8 KV cache's row and the same shape with 16-bit K/V: the key's K/V dtype part dropped
 * (at_shape_key of the shape with K/V in Q's dtype, then the rest of the row's key). */
static void link_kv8_rows(tn_report *r)
{
  for (int i = 0; i < r->n_rows; i++) {
    tn_report_row *row = &r->rows[i];
    const at_dtype kv = at_shape_kv_dtype(&row->shape);
    if (!at_dtype_is_fp8(kv) || kv == row->shape.dtype) continue;
    char plain[160], twin_key[sizeof row->key];
    at_shape twin = row->shape;
    at_shape_key(&row->shape, plain, sizeof plain);
    twin.kv_dtype = AT_KV_SAME;
    at_shape_key(&twin, twin_key, sizeof twin_key);
    const size_t used = strlen(twin_key);
    snprintf(twin_key + used, sizeof twin_key - used, "%s", row->key + strlen(plain));
    for (int j = 0; j < r->n_rows; j++) {
      const tn_report_row *other = &r->rows[j];
      if (strcmp(other->gpu_model, row->gpu_model) != 0 || strcmp(other->key, twin_key) != 0) continue;
      row->kv8_base_ms = other->best_ms;
      row->kv8_gain = other->best_ms / row->best_ms; /* NaN when either is missing */
      break;
    }
  }
}

static int compare_rows(const void *pa, const void *pb)
{
  const tn_report_row *a = pa, *b = pb;
  int c = strcmp(a->gpu_model, b->gpu_model);
  if (c) return c;
  const at_shape *x = &a->shape, *y = &b->shape;
  const int ka[] = {(int)x->dtype, (int)at_shape_kv_dtype(x), x->head_dim, (int)x->mask, x->q_heads,
                    x->kv_heads, x->batch, x->q_len, x->kv_len, x->with_lse};
  const int kb[] = {(int)y->dtype, (int)at_shape_kv_dtype(y), y->head_dim, (int)y->mask, y->q_heads,
                    y->kv_heads, y->batch, y->q_len, y->kv_len, y->with_lse};
  for (size_t i = 0; i < sizeof ka / sizeof *ka; i++)
    if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
  /* Rows of one shape's maxima differ by the rest of their key: a serving part, a scale. */
  return strcmp(a->key, b->key);
}

static int same_group(const tn_report_row *a, const tn_report_row *b)
{
  return strcmp(a->gpu_model, b->gpu_model) == 0 && a->shape.dtype == b->shape.dtype &&
         at_shape_kv_dtype(&a->shape) == at_shape_kv_dtype(&b->shape) && a->shape.head_dim == b->shape.head_dim &&
         a->shape.mask == b->shape.mask;
}

/* Groups are contiguous runs of sorted rows; the mean is taken in log space. */
static at_status build_groups(tn_report *r)
{
  r->groups = calloc((size_t)r->n_rows + 1, sizeof *r->groups);
  if (!r->groups) return at_fail(AT_ERR_NOMEM, "no memory for %d report groups", r->n_rows);
  for (int i = 0; i < r->n_rows;) {
    tn_report_group *g = &r->groups[r->n_groups++];
    const tn_report_row *first = &r->rows[i];
    double sum_log = 0;
    snprintf(g->gpu_model, sizeof g->gpu_model, "%s", first->gpu_model);
    g->dtype = first->shape.dtype, g->head_dim = first->shape.head_dim, g->mask = first->shape.mask;
    g->kv_dtype = first->shape.kv_dtype;
    for (; i < r->n_rows && same_group(first, &r->rows[i]); i++) {
      g->n_shapes++;
      if (isfinite(r->rows[i].speedup_tuned) && r->rows[i].speedup_tuned > 0) {
        g->n_compared++;
        g->n_won += r->rows[i].speedup_tuned > 1;
        sum_log += log(r->rows[i].speedup_tuned);
      }
    }
    g->geomean = g->n_compared ? exp(sum_log / g->n_compared) : NAN;
  }
  return AT_OK;
}

/* Append text to a ", "-joined list unless it is already there. */
static void join_distinct(char *list, size_t size, const char *text)
{
  if (!text[0]) text = "-";
  size_t n = strlen(text), used = strlen(list);
  for (const char *p = list; (p = strstr(p, text)) != NULL; p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ',')) return;
  snprintf(list + used, size - used, "%s%s", used ? ", " : "", text);
}

static at_status build_models(tn_report *r, const row_extra *extra)
{
  r->models = calloc((size_t)r->n_rows + 1, sizeof *r->models);
  if (!r->models) return at_fail(AT_ERR_NOMEM, "no memory for the report's GPU models");
  for (int i = 0; i < r->n_rows; i++) {
    const tn_report_row *row = &r->rows[i];
    if (r->n_models == 0 || strcmp(r->models[r->n_models - 1].gpu_model, row->gpu_model) != 0)
      snprintf(r->models[r->n_models++].gpu_model, sizeof r->models->gpu_model, "%s", row->gpu_model);
    tn_report_model *m = &r->models[r->n_models - 1];
    m->n_shapes++;
    /* The header describes the environment of best rows, and of the trials of rows without one
     * (an f32 shape has trials only). */
    if (!row->has_best && !extra[i].has_trial_env) continue;
    const cache_env *e = row->has_best ? &extra[i].env : &extra[i].trial_env;
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", e->cc_major, e->cc_minor);
    join_distinct(m->cc, sizeof m->cc, cc);
    join_distinct(m->driver, sizeof m->driver, e->driver);
    join_distinct(m->nvrtc, sizeof m->nvrtc, e->nvrtc);
    join_distinct(m->cudnn, sizeof m->cudnn, e->cudnn);
    join_distinct(m->templates, sizeof m->templates, e->template_version);
  }
  return AT_OK;
}

/* Sort rows with their extras: sort an index, then permute both arrays. */
static at_status sort_rows(tn_report *r, row_extra **extra)
{
  if (r->n_rows < 2) return AT_OK;
  tn_report_row *rows = malloc((size_t)r->n_rows * sizeof *rows);
  row_extra *ex = malloc((size_t)r->n_rows * sizeof *ex);
  if (!rows || !ex) {
    free(rows), free(ex);
    return at_fail(AT_ERR_NOMEM, "no memory to sort %d report rows", r->n_rows);
  }
  /* Rows are unique per (model, key), so ties cannot occur and a search finds each row again. */
  memcpy(rows, r->rows, (size_t)r->n_rows * sizeof *rows);
  qsort(rows, (size_t)r->n_rows, sizeof *rows, compare_rows);
  for (int i = 0; i < r->n_rows; i++) {
    const tn_report_row *old = bsearch(&r->rows[i], rows, (size_t)r->n_rows, sizeof *rows, compare_rows);
    ex[old - rows] = (*extra)[i];
  }
  free(r->rows), free(*extra);
  r->rows = rows, *extra = ex;
  return AT_OK;
}

at_status tn_report_load(const char *db_path, const char *gpu_model, tn_report *out)
{
  memset(out, 0, sizeof *out);
  if (gpu_model && !gpu_model[0]) gpu_model = NULL;
  snprintf(out->db_path, sizeof out->db_path, "%s", db_path);
  snprintf(out->gpu_filter, sizeof out->gpu_filter, "%s", gpu_model ? gpu_model : "");
  cache_db *db = NULL;
  at_status rc = cache_open(db_path, CACHE_READ, &db);
  if (rc != AT_OK) return rc;
  loader l = {.r = out, .rc = AT_OK};
  rc = cache_models(db, out->models_in_cache, sizeof out->models_in_cache, &out->n_models_in_cache);
  if (rc == AT_OK) rc = cache_each_best(db, gpu_model, visit_best, &l);
  if (rc == AT_OK) rc = l.rc;
  if (rc == AT_OK) rc = cache_each_trial(db, gpu_model, visit_trial, &l);
  if (rc == AT_OK) rc = l.rc;
  cache_close(db);
  for (int i = 0; rc == AT_OK && i < out->n_rows; i++) settle_row(&out->rows[i], &l.extra[i]);
  if (rc == AT_OK) rc = sort_rows(out, &l.extra);
  if (rc == AT_OK) link_kv8_rows(out);
  if (rc == AT_OK) rc = build_groups(out);
  if (rc == AT_OK) rc = build_models(out, l.extra);
  free(l.extra);
  if (rc != AT_OK) tn_report_free(out);
  return rc;
}

void tn_report_free(tn_report *r)
{
  free(r->rows), free(r->groups), free(r->models);
  r->rows = NULL, r->groups = NULL, r->models = NULL;
  r->n_rows = r->n_groups = r->n_models = 0;
}

void tn_report_explain_empty(const tn_report *r, char *buf, size_t size)
{
  if (r->gpu_filter[0] && r->n_models_in_cache > 0)
    snprintf(buf, size, "%s has no results for GPU '%s'; it holds results for: %s", r->db_path,
             r->gpu_filter, r->models_in_cache);
  else
    snprintf(buf, size, "%s holds no tuning results yet (run 'attntune tune' or 'attntune bench "
                        "--suite codelab')", r->db_path);
}

static const char *const FORMAT_NAMES[] = {"text", "md", "csv", "json", "html"};

at_status tn_report_format_parse(const char *text, tn_report_format *out)
{
  for (size_t i = 0; i < sizeof FORMAT_NAMES / sizeof *FORMAT_NAMES; i++)
    if (strcmp(text, FORMAT_NAMES[i]) == 0) return *out = (tn_report_format)i, AT_OK;
  return at_fail(AT_ERR_INVALID, "unknown report format '%s' (expected text, md, csv, json, html)", text);
}

int tn_report_no_fused(const tn_report_row *row)
{
  return !row->has_best && row->n_fused_trials == 0 && !isfinite(row->tuned_ms);
}

/* The best column: the best row's implementation, "no fused kernel", or "-" (none verified). */
static const char *best_label(const tn_report_row *row)
{
  return row->has_best ? row->best_impl : tn_report_no_fused(row) ? "no fused kernel" : "-";
}

const char *tn_report_cudnn_label(const tn_report_row *row)
{
  switch (row->cudnn) {
  case TN_REPORT_CUDNN_OK: return "ok";
  case TN_REPORT_CUDNN_UNSUPPORTED: return "unsupported";
  case TN_REPORT_CUDNN_FAILED: return cache_status_name(row->cudnn_trial_status);
  case TN_REPORT_CUDNN_MISSING: break;
  }
  return "no time";
}

/* ---- numbers ----------------------------------------------------------------------------- */

/* Milliseconds with about four significant digits; "-" when not measured. */
static const char *fmt_ms(char *buf, size_t size, double ms)
{
  if (!isfinite(ms)) snprintf(buf, size, "-");
  else if (ms >= 100) snprintf(buf, size, "%.1f", ms);
  else if (ms >= 1) snprintf(buf, size, "%.3f", ms);
  else snprintf(buf, size, "%.4g", ms);
  return buf;
}

static const char *fmt_fixed(char *buf, size_t size, double x, int digits, const char *suffix)
{
  if (isfinite(x)) snprintf(buf, size, "%.*f%s", digits, x, suffix);
  else snprintf(buf, size, "-");
  return buf;
}

static const char *fmt_err(char *buf, size_t size, double x)
{
  if (isfinite(x)) snprintf(buf, size, "%.1e", x);
  else snprintf(buf, size, "-");
  return buf;
}

/* cuDNN's time, or why there is none. */
static const char *fmt_cudnn(char *buf, size_t size, const tn_report_row *row)
{
  if (row->cudnn == TN_REPORT_CUDNN_OK) return fmt_ms(buf, size, row->cudnn_ms);
  snprintf(buf, size, "%s", tn_report_cudnn_label(row));
  return buf;
}

/* A speedup against cuDNN, or "-" (no time of ours) / "n/a" (no cuDNN time). */
static const char *fmt_speedup(char *buf, size_t size, double ours_ms, double speedup)
{
  if (isfinite(speedup)) snprintf(buf, size, "%.2fx", speedup);
  else snprintf(buf, size, "%s", isfinite(ours_ms) ? "n/a" : "-");
  return buf;
}

static at_status finish(FILE *out, const char *out_name)
{
  if (fflush(out) != 0 || ferror(out))
    return at_fail(AT_ERR_IO, "writing the report to %s failed", out_name ? out_name : "the output");
  return AT_OK;
}

/* The rows of one GPU model: [*lo, *hi). */
static void model_range(const tn_report *r, const tn_report_model *m, int *lo, int *hi)
{
  *lo = 0;
  while (*lo < r->n_rows && strcmp(r->rows[*lo].gpu_model, m->gpu_model) != 0) ++*lo;
  *hi = *lo;
  while (*hi < r->n_rows && strcmp(r->rows[*hi].gpu_model, m->gpu_model) == 0) ++*hi;
}

/* One row's cells as the text and md tables print them. */
enum { N_CELLS = 13 };
static const char *const CELL_NAMES[N_CELLS] = {
    "shape",    "best",     "best_ms",     "TFLOP/s",    "TB/s",      "tuned_ms", "cudnn_ms",
    "naive_ms", "tuned/cuDNN", "best/cuDNN", "err_naive", "err_cudnn", "note"};
typedef char cells[N_CELLS][600];

/* Names and the note are text, read from the left; numbers line up on the right. */
static int cell_left(int k)
{
  return k < 2 || k == N_CELLS - 1;
}

static void row_cells(const tn_report_row *row, cells c)
{
  snprintf(c[0], sizeof c[0], "%s", row->key);
  snprintf(c[1], sizeof c[1], "%s", best_label(row));
  fmt_ms(c[2], sizeof c[2], row->best_ms);
  fmt_fixed(c[3], sizeof c[3], row->best_tflops, 1, "");
  fmt_fixed(c[4], sizeof c[4], row->best_kv_tbs, 2, "");
  fmt_ms(c[5], sizeof c[5], row->tuned_ms);
  fmt_cudnn(c[6], sizeof c[6], row);
  fmt_ms(c[7], sizeof c[7], row->naive_ms);
  fmt_speedup(c[8], sizeof c[8], row->tuned_ms, row->speedup_tuned);
  fmt_speedup(c[9], sizeof c[9], row->best_ms, row->speedup_best);
  fmt_err(c[10], sizeof c[10], row->err_naive);
  fmt_err(c[11], sizeof c[11], row->err_cudnn);
  snprintf(c[12], sizeof c[12], "%s", row->note);
}

static void group_label(const tn_report_group *g, char *buf, size_t size)
{
  snprintf(buf, size, "%s d%d %s", at_dtypes_name(g->dtype, g->kv_dtype), g->head_dim, at_mask_name(g->mask));
}

/* ---- text and markdown ------------------------------------------------------------------- */

static void text_header(const tn_report *r, const tn_report_model *m, FILE *out, int md)
{
  const char *indent = md ? "" : "  ", *br = md ? "  " : ""; /* two spaces end a md line */
  if (md) fprintf(out, "## GPU %s — %d shape%s\n\n", m->gpu_model, m->n_shapes, m->n_shapes == 1 ? "" : "s");
  else fprintf(out, "GPU %s — %d shape%s\n", m->gpu_model, m->n_shapes, m->n_shapes == 1 ? "" : "s");
  fprintf(out, "%scompute capability %s, driver %s, NVRTC %s, cuDNN %s, templates %s%s\n", indent,
          m->cc[0] ? m->cc : "-", m->driver[0] ? m->driver : "-", m->nvrtc[0] ? m->nvrtc : "-",
          m->cudnn[0] ? m->cudnn : "-", m->templates[0] ? m->templates : "-", br);
  fprintf(out, "%scache %s%s\n\n", indent, r->db_path,
          r->n_older_best ? " (best rows of older template versions are not shown)" : "");
}

/* One line of the text table. The last column (the note) is not padded, and a line whose note is
 * empty ends at err_cudnn's value: no trailing blanks. */
static void text_line(FILE *out, const int *width, const char *const *cell)
{
  for (int k = 0; k < N_CELLS; k++) {
    if (k + 1 == N_CELLS) {
      fprintf(out, "%s%s\n", cell[k][0] ? "  " : "", cell[k]);
      break;
    }
    fprintf(out, cell_left(k) ? "%s%-*s" : "%s%*s", k ? "  " : "", width[k], cell[k]);
  }
}

static void text_table(const tn_report *r, int lo, int hi, FILE *out)
{
  int width[N_CELLS];
  cells c;
  for (int k = 0; k < N_CELLS; k++) width[k] = (int)strlen(CELL_NAMES[k]);
  for (int i = lo; i < hi; i++) {
    row_cells(&r->rows[i], c);
    for (int k = 0; k < N_CELLS; k++)
      if ((int)strlen(c[k]) > width[k]) width[k] = (int)strlen(c[k]);
  }
  text_line(out, width, CELL_NAMES);
  for (int i = lo; i < hi; i++) {
    row_cells(&r->rows[i], c);
    const char *cell[N_CELLS];
    for (int k = 0; k < N_CELLS; k++) cell[k] = c[k];
    text_line(out, width, cell);
  }
}

/* Free text in a markdown table cell: a '|' would end the cell, a newline the row. */
static void md_text(FILE *out, const char *s)
{
  for (; *s; s++) {
    if (*s == '|') fputs("\\|", out);
    else fputc(*s == '\n' ? ' ' : *s, out);
  }
}

static void md_table(const tn_report *r, int lo, int hi, FILE *out)
{
  cells c;
  fputc('|', out);
  for (int k = 0; k < N_CELLS; k++) fprintf(out, " %s |", CELL_NAMES[k]);
  fputs("\n|", out);
  for (int k = 0; k < N_CELLS; k++) fputs(cell_left(k) ? "---|" : "---:|", out);
  fputc('\n', out);
  for (int i = lo; i < hi; i++) {
    row_cells(&r->rows[i], c);
    fputc('|', out);
    for (int k = 0; k + 1 < N_CELLS; k++)
      fprintf(out, k == 0 || (k == 1 && r->rows[i].has_best) ? " `%s` |" : " %s |", c[k]);
    fputc(' ', out);
    md_text(out, c[N_CELLS - 1]);
    fputs(" |\n", out);
  }
}

static void text_groups(const tn_report *r, const char *gpu_model, FILE *out, int md)
{
  char label[96], mean[32];
  fprintf(out, md ? "\n### Geometric-mean speedup, tuned vs cuDNN\n\n"
                    "| dtype, head dim, mask | speedup | shapes compared | tuned faster |\n|---|---:|---:|---:|\n"
                  : "\ngeometric-mean speedup, tuned vs cuDNN, per (dtype, head dim, mask):\n");
  for (int i = 0; i < r->n_groups; i++) {
    const tn_report_group *g = &r->groups[i];
    if (strcmp(g->gpu_model, gpu_model) != 0) continue;
    group_label(g, label, sizeof label);
    fmt_speedup(mean, sizeof mean, 1, g->geomean);
    if (!isfinite(g->geomean)) snprintf(mean, sizeof mean, "n/a");
    if (md) fprintf(out, "| %s | %s | %d of %d | %d of %d |\n", label, mean, g->n_compared, g->n_shapes, g->n_won,
                    g->n_compared);
    else fprintf(out, "  %-24s %8s  over %d of %d shape%s, tuned faster on %d\n", label, mean, g->n_compared,
                 g->n_shapes, g->n_shapes == 1 ? "" : "s", g->n_won);
  }
}

/* Rows of this GPU model with an FP8 KV cache and a 16-bit twin (kv8_gain), in row order. */
static int kv8_rows(const tn_report *r, const char *gpu_model, const tn_report_row **out, int cap)
{
  int n = 0;
  for (int i = 0; i < r->n_rows && n < cap; i++)
    if (strcmp(r->rows[i].gpu_model, gpu_model) == 0 && isfinite(r->rows[i].kv8_gain)) out[n++] = &r->rows[i];
  return n;
}

static const char KV8_TITLE[] = "FP8 KV cache against 16-bit K/V, tokens per second (the same shape's best kernels)";

static void text_kv8(const tn_report *r, const char *gpu_model, FILE *out, int md)
{
  const tn_report_row **rows = malloc((size_t)r->n_rows * sizeof *rows);
  const int n = rows ? kv8_rows(r, gpu_model, rows, r->n_rows) : 0;
  char base[32], ours[32], gain[32];
  if (n) fprintf(out, md ? "\n### %s\n\n| shape | 16-bit K/V best_ms | FP8 K/V best_ms | tokens/s |\n|---|---:|---:|---:|\n"
                         : "\n%s:\n", KV8_TITLE);
  for (int i = 0; i < n; i++) {
    fmt_ms(base, sizeof base, rows[i]->kv8_base_ms), fmt_ms(ours, sizeof ours, rows[i]->best_ms);
    snprintf(gain, sizeof gain, "%.2fx", rows[i]->kv8_gain);
    if (md) fprintf(out, "| `%s` | %s | %s | %s |\n", rows[i]->key, base, ours, gain);
    else fprintf(out, "  %-56s %10s %10s %8s\n", rows[i]->key, base, ours, gain);
  }
  free(rows);
}

static void write_text(const tn_report *r, FILE *out, int md)
{
  if (md) fputs("# attntune report\n\n", out);
  for (int m = 0; m < r->n_models; m++) {
    int lo, hi;
    model_range(r, &r->models[m], &lo, &hi);
    if (m) fputc('\n', out);
    text_header(r, &r->models[m], out, md);
    if (md) md_table(r, lo, hi, out);
    else text_table(r, lo, hi, out);
    text_groups(r, r->models[m].gpu_model, out, md);
    text_kv8(r, r->models[m].gpu_model, out, md);
  }
  fprintf(out, "\ntuned = the fastest verified generated kernel (fa2, fa3, decode); speedups are cuDNN's time / ours (> 1: "
               "faster than cuDNN); TB/s = K/V bytes read per second, for decode shapes (T <= %d); times in ms; "
               "no fused kernel = only the naive kernels run the shape (f32); for FP8 shapes cuDNN times its FP8 graph, "
               "which writes FP8 output where attntune's kernels write bf16 (never the best: plans for FP8 inputs write "
               "bf16); note = that cuDNN wrote FP8, or why cuDNN has no time.\n",
          TN_DECODE_MAX_T);
}

/* ---- csv and json ------------------------------------------------------------------------ */

static void csv_text(FILE *out, const char *s)
{
  if (!strpbrk(s, ",\"\n")) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"') fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

static void json_text(FILE *out, const char *s)
{
  fputc('"', out);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(out, "\\%c", ch);
    else if (ch < 0x20) fprintf(out, "\\u%04x", ch);
    else fputc(ch, out);
  }
  fputc('"', out);
}

static void number(FILE *out, double x, int json)
{
  if (isfinite(x)) fprintf(out, "%.6g", x);
  else if (json) fputs("null", out);
}

/* Each field: a name, and how to write it as CSV and as JSON. */
typedef enum { F_TEXT, F_INT, F_NUM, F_BOOL } field_kind;
typedef struct field {
  const char *name;
  field_kind kind;
  const char *text;
  double num;
} field;

enum { N_FIELDS = 28 };

static void row_fields(const tn_report_row *row, field f[N_FIELDS])
{
  const at_shape *s = &row->shape;
  int i = 0;
  f[i++] = (field){"gpu", F_TEXT, row->gpu_model, 0};
  f[i++] = (field){"shape", F_TEXT, row->key, 0};
  f[i++] = (field){"batch", F_INT, NULL, s->batch};
  f[i++] = (field){"q_len", F_INT, NULL, s->q_len};
  f[i++] = (field){"kv_len", F_INT, NULL, s->kv_len};
  f[i++] = (field){"q_heads", F_INT, NULL, s->q_heads};
  f[i++] = (field){"kv_heads", F_INT, NULL, s->kv_heads};
  f[i++] = (field){"head_dim", F_INT, NULL, s->head_dim};
  f[i++] = (field){"dtype", F_TEXT, at_dtypes_name(s->dtype, s->kv_dtype), 0};
  f[i++] = (field){"mask", F_TEXT, at_mask_name(s->mask), 0};
  f[i++] = (field){"lse", F_BOOL, NULL, s->with_lse};
  f[i++] = (field){"best_impl", F_TEXT, row->has_best ? row->best_impl : NULL, 0};
  f[i++] = (field){"best_ms", F_NUM, NULL, row->best_ms};
  f[i++] = (field){"best_tflops", F_NUM, NULL, row->best_tflops};
  f[i++] = (field){"best_kv_tbs", F_NUM, NULL, row->best_kv_tbs};
  f[i++] = (field){"tuned_impl", F_TEXT, row->tuned_impl[0] ? row->tuned_impl : NULL, 0};
  f[i++] = (field){"tuned_ms", F_NUM, NULL, row->tuned_ms};
  f[i++] = (field){"tuned_tflops", F_NUM, NULL, row->tuned_tflops};
  f[i++] = (field){"cudnn_status", F_TEXT, tn_report_cudnn_label(row), 0};
  f[i++] = (field){"cudnn_ms", F_NUM, NULL, row->cudnn_ms};
  f[i++] = (field){"naive_ms", F_NUM, NULL, row->naive_ms};
  f[i++] = (field){"speedup_tuned", F_NUM, NULL, row->speedup_tuned};
  f[i++] = (field){"speedup_best", F_NUM, NULL, row->speedup_best};
  f[i++] = (field){"err_naive", F_NUM, NULL, row->err_naive};
  f[i++] = (field){"err_cudnn", F_NUM, NULL, row->err_cudnn};
  f[i++] = (field){"kv8_base_ms", F_NUM, NULL, row->kv8_base_ms};
  f[i++] = (field){"kv8_tokens_per_s_gain", F_NUM, NULL, row->kv8_gain};
  f[i++] = (field){"note", F_TEXT, row->note[0] ? row->note : NULL, 0}; /* last: free text */
}

static void write_field(FILE *out, const field *f, int json)
{
  switch (f->kind) {
  case F_TEXT:
    if (f->text) json ? json_text(out, f->text) : csv_text(out, f->text);
    else if (json) fputs("null", out);
    break;
  case F_INT: fprintf(out, "%d", (int)f->num); break;
  case F_BOOL: fputs(json ? (f->num ? "true" : "false") : (f->num ? "1" : "0"), out); break;
  case F_NUM: number(out, f->num, json); break;
  }
}

static void write_csv(const tn_report *r, FILE *out)
{
  field f[N_FIELDS];
  tn_report_row blank;
  memset(&blank, 0, sizeof blank);
  row_fields(&blank, f);
  for (int k = 0; k < N_FIELDS; k++) fprintf(out, "%s%s", k ? "," : "", f[k].name);
  fputc('\n', out);
  for (int i = 0; i < r->n_rows; i++) {
    row_fields(&r->rows[i], f);
    for (int k = 0; k < N_FIELDS; k++) {
      if (k) fputc(',', out);
      write_field(out, &f[k], 0);
    }
    fputc('\n', out);
  }
}

static void json_models(const tn_report *r, FILE *out)
{
  fputs("  \"models\": [", out);
  for (int m = 0; m < r->n_models; m++) {
    const tn_report_model *x = &r->models[m];
    const char *names[] = {"gpu", "compute_capability", "driver", "nvrtc", "cudnn", "templates"};
    const char *values[] = {x->gpu_model, x->cc, x->driver, x->nvrtc, x->cudnn, x->templates};
    fputs(m ? ",\n    {" : "\n    {", out);
    for (int k = 0; k < 6; k++) {
      fprintf(out, "%s\"%s\": ", k ? ", " : "", names[k]);
      json_text(out, values[k]);
    }
    fprintf(out, ", \"n_shapes\": %d}", x->n_shapes);
  }
  fputs("\n  ],\n", out);
}

static void json_groups(const tn_report *r, FILE *out)
{
  fputs("  \"groups\": [", out);
  for (int i = 0; i < r->n_groups; i++) {
    const tn_report_group *g = &r->groups[i];
    fputs(i ? ",\n    {\"gpu\": " : "\n    {\"gpu\": ", out);
    json_text(out, g->gpu_model);
    fprintf(out, ", \"dtype\": \"%s\", \"head_dim\": %d, \"mask\": \"%s\", \"n_shapes\": %d, "
                 "\"n_compared\": %d, \"n_won\": %d, \"geomean_speedup_tuned\": ",
            at_dtypes_name(g->dtype, g->kv_dtype), g->head_dim, at_mask_name(g->mask), g->n_shapes, g->n_compared,
            g->n_won);
    number(out, g->geomean, 1);
    fputc('}', out);
  }
  fputs("\n  ]\n", out);
}

static void write_json(const tn_report *r, FILE *out)
{
  field f[N_FIELDS];
  fputs("{\n  \"db\": ", out);
  json_text(out, r->db_path);
  fputs(",\n", out);
  json_models(r, out);
  fputs("  \"shapes\": [", out);
  for (int i = 0; i < r->n_rows; i++) {
    row_fields(&r->rows[i], f);
    fputs(i ? ",\n    {" : "\n    {", out);
    for (int k = 0; k < N_FIELDS; k++) {
      fprintf(out, "%s\"%s\": ", k ? ", " : "", f[k].name);
      write_field(out, &f[k], 1);
    }
    fputc('}', out);
  }
  fputs("\n  ],\n", out);
  json_groups(r, out);
  fputs("}\n", out);
}

/* ---- SVG charts -------------------------------------------------------------------------- */

/* Colors from the Okabe–Ito palette (distinct for color-blind readers), and a different marker
 * per implementation so the lines differ in print as well. */
enum { S_NAIVE, S_TUNED, S_CUDNN, N_SERIES };
static const struct {
  const char *name, *color, *marker;
} SERIES[N_SERIES] = {{"naive", "#555555", "square"},
                      {"tuned (attntune)", "#0072B2", "circle"},
                      {"cuDNN", "#D55E00", "triangle"}};

static double series_ms(const tn_report_row *row, int s)
{
  switch (s) {
  case S_NAIVE: return row->naive_ms;
  case S_TUNED: return row->tuned_ms;
  default: return row->cudnn == TN_REPORT_CUDNN_OK ? row->cudnn_ms : NAN;
  }
}

static void xml_text(FILE *out, const char *s)
{
  for (; *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", out); break;
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '"': fputs("&quot;", out); break;
    default: fputc(*s, out);
    }
  }
}

/* Pixel positions of a linear or log10 axis. */
typedef struct axis {
  double lo, hi;   /* data range */
  double p_lo, p_hi; /* pixels of lo and hi */
  int log;
} axis;

static double axis_px(const axis *a, double v)
{
  double t = a->log ? (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo))
                    : (v - a->lo) / (a->hi - a->lo);
  return a->p_lo + t * (a->p_hi - a->p_lo);
}

/* 1, 2 or 5 times a power of ten, about range / target. */
static double nice_step(double range, int target)
{
  double raw = range / target, p = pow(10, floor(log10(raw))), f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* A chart's size and the margins around its plot area, in pixels. Every piece of a chart is
 * placed relative to the plot area, so the drawing helpers take this rather than six numbers. */
typedef struct canvas {
  int width, height;
  double left, right, top, bottom; /* margins */
} canvas;

static double plot_right(const canvas *c)
{
  return c->width - c->right;
}

static double plot_bottom(const canvas *c)
{
  return c->height - c->bottom;
}

static void svg_begin(FILE *out, const canvas *c, const char *title)
{
  fprintf(out, "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"", c->width,
          c->height, c->width, c->height);
  xml_text(out, title);
  fputs("\">\n<title>", out);
  xml_text(out, title);
  fputs("</title>\n", out);
  fputs("<text class=\"ct\" x=\"12\" y=\"20\">", out);
  xml_text(out, title);
  fputs("</text>\n", out);
}

static void svg_end(FILE *out)
{
  fputs("</svg>\n", out);
}

/* Text at (x, y); anchor NULL keeps SVG's default (start). The text is escaped here, so callers
 * pass keys and labels as they are. */
static void svg_text(FILE *out, const char *cls, double x, double y, const char *anchor, const char *text)
{
  fprintf(out, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\"", cls, x, y);
  if (anchor) fprintf(out, " text-anchor=\"%s\"", anchor);
  fputc('>', out);
  xml_text(out, text);
  fputs("</text>\n", out);
}

/* A line styled by its CSS class (grid, one). */
static void svg_line(FILE *out, double x1, double y1, double x2, double y2, const char *cls)
{
  fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"%s\"/>", x1, y1, x2, y2, cls);
}

/* The border of the plot area. */
static void svg_frame(FILE *out, const canvas *c)
{
  fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"frame\"/>\n", c->left,
          c->top, plot_right(c) - c->left, plot_bottom(c) - c->top);
}

/* A filled bar; the tooltip says what it measures to a reader hovering over it. */
static void svg_bar(FILE *out, double x, double y, double w, double h, const char *color, const char *tooltip)
{
  fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", x, y, w, h,
          color);
  xml_text(out, tooltip);
  fputs("</title></rect>", out);
}

static void svg_marker(FILE *out, const char *kind, double x, double y, const char *color)
{
  if (strcmp(kind, "square") == 0)
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"/>", x - 4, y - 4, color);
  else if (strcmp(kind, "triangle") == 0)
    fprintf(out, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"%s\"/>", x, y - 5, x + 5, y + 4, x - 5,
            y + 4, color);
  else fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/>", x, y, color);
}

/* Legend in one row under the title, for the series that have data: a line with its marker,
 * or a swatch for bars. */
static void svg_legend(FILE *out, const int *present, double x, double y, int bars)
{
  for (int s = 0; s < N_SERIES; s++) {
    if (!present[s]) continue;
    if (bars) {
      fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"12\" fill=\"%s\"/>", x + 10, y - 6,
              SERIES[s].color);
    } else {
      fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>",
              x, y, x + 24, y, SERIES[s].color);
      svg_marker(out, SERIES[s].marker, x + 12, y, SERIES[s].color);
    }
    svg_text(out, "tk", x + 30, y + 4, NULL, SERIES[s].name);
    x += 40 + 7.0 * (double)strlen(SERIES[s].name);
  }
}

static void fmt_tick(char *buf, size_t size, double v)
{
  snprintf(buf, size, "%g", v);
}

typedef enum { AXIS_X, AXIS_Y } axis_kind;

/* A grid line across the plot at value v, and its label unless `labelled` is 0: left of the plot
 * for y, under it for x, where the line pokes 4 px out of the frame as a tick mark. */
static void svg_tick_at(FILE *out, const canvas *c, axis_kind which, const axis *a, double v, int labelled)
{
  char label[32];
  double p = axis_px(a, v);
  fmt_tick(label, sizeof label, v);
  if (which == AXIS_Y) {
    svg_line(out, c->left, p, plot_right(c), p, "grid");
    if (labelled) svg_text(out, "tk", c->left - 6, p + 4, "end", label);
  } else {
    svg_line(out, p, c->top, p, plot_bottom(c) + 4, "grid");
    if (labelled) svg_text(out, "tk", p, plot_bottom(c) + 18, "middle", label);
  }
}

static void svg_tick(FILE *out, const canvas *c, axis_kind which, const axis *a, double v)
{
  svg_tick_at(out, c, which, a, v, 1);
}

/* Ticks at the multiples of step from the start of a linear axis to its end (lo is 0 for times,
 * not for speedups). Counted in whole steps, so rounding neither skips nor adds one; the slack
 * keeps the last tick when lo + k·step overshoots hi by rounding. */
static void svg_linear_ticks(FILE *out, const canvas *c, axis_kind which, const axis *a, double step)
{
  double first = ceil(a->lo / step - 1e-9) * step;
  for (int k = 0; first + k * step <= a->hi + step * 1e-4; k++) svg_tick(out, c, which, a, first + k * step);
}

/* Tick labels are 11 px text. A digit of DejaVu Sans is 0.64 em, 7.0 px, so 7 px per character
 * never counts a label narrower than it is, and 6 px keep two labels apart. */
#define TICK_CHAR_PX 7.0
#define TICK_GAP_PX 6.0

static int is_power_of_two(double v)
{
  if (!(v >= 1 && v < 9.0e15) || v != floor(v)) return 0;
  long long n = (long long)v;
  return (n & (n - 1)) == 0;
}

/* One x tick's label box, for choose_x_labels. */
typedef struct tick_box {
  double centre, half; /* pixels */
  char show;
} tick_box;

/* Which of the n x ticks get a label (t[i].show): the first and the last, then powers of two
 * (sweeps double their sizes), then the rest from the left, each only where its label keeps
 * clear of the labels already placed. A dense axis loses labels but never overlaps them: a batch
 * sweep B = 1..16 on a log axis puts 15 and 16 eleven pixels apart, less than two digits. */
static void choose_x_labels(const axis *x, const double *xs, int n, tick_box *t)
{
  for (int i = 0; i < n; i++) {
    char label[32];
    fmt_tick(label, sizeof label, xs[i]);
    t[i] = (tick_box){axis_px(x, xs[i]), TICK_CHAR_PX * (double)strlen(label) / 2, 0};
  }
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < n; i++) {
      int first_or_last = i == 0 || i == n - 1;
      if (t[i].show || (pass == 0 && !first_or_last) || (pass == 1 && !is_power_of_two(xs[i]))) continue;
      int clear = 1;
      for (int k = 0; k < n && clear; k++)
        clear = !t[k].show || fabs(t[i].centre - t[k].centre) >= t[i].half + t[k].half + TICK_GAP_PX;
      t[i].show = (char)clear;
    }
}

/* A grid line at every measured x; labels where choose_x_labels finds room for them. Without
 * memory for the layout the grid is drawn unlabelled rather than with labels that may collide. */
static void svg_x_ticks(FILE *out, const canvas *c, const axis *x, const double *xs, int n)
{
  tick_box *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
  if (t) choose_x_labels(x, xs, n, t);
  for (int i = 0; i < n; i++) svg_tick_at(out, c, AXIS_X, x, xs[i], t && t[i].show);
  free(t);
}

/* Log-scale y ticks: every decade, plus 2 and 5 when the range spans few decades. */
static void svg_log_yticks(FILE *out, const canvas *c, const axis *y)
{
  int d0 = (int)floor(log10(y->lo) + 1e-9), d1 = (int)ceil(log10(y->hi) - 1e-9);
  for (int d = d0; d <= d1; d++) {
    const double mult[] = {1, 2, 5};
    for (int m = 0; m < (d1 - d0 <= 2 ? 3 : 1); m++) {
      double v = mult[m] * pow(10, d);
      if (v >= y->lo * 0.999 && v <= y->hi * 1.001) svg_tick(out, c, AXIS_Y, y, v);
    }
  }
}

/* An axis' title: x centred under the plot, y turned to read upwards along the left edge. */
static void svg_axis_title(FILE *out, const canvas *c, axis_kind which, const char *text)
{
  double mid = (c->top + c->height - c->bottom) / 2;
  if (which == AXIS_Y)
    fprintf(out, "<text class=\"ax\" x=\"16\" y=\"%.1f\" text-anchor=\"middle\" "
                 "transform=\"rotate(-90 16 %.1f)\">", mid, mid);
  else
    fprintf(out, "<text class=\"ax\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
            (c->left + c->width - c->right) / 2, c->height - 10);
  xml_text(out, text);
  fputs("</text>\n", out);
}

/* A series' time where a log axis can show it (finite and positive), else NaN. */
static double log_plottable_ms(const tn_report_row *row, int s)
{
  double v = series_ms(row, s);
  return isfinite(v) && v > 0 ? v : NAN;
}

/* What a line chart plots of series s for a row (NaN: nothing there), and its unit for tooltips. */
typedef double (*series_value)(const tn_report_row *row, int s);

/* One implementation's line through the shapes it has a value for (a shape without one is left
 * out, so the line joins its neighbours), with a marker and a tooltip at each point. */
static void svg_series_line(FILE *out, int s, const tn_report_row *const *rows, const double *xs, int n,
                            const axis *x, const axis *y, series_value value, const char *unit)
{
  fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", SERIES[s].color);
  for (int i = 0; i < n; i++) {
    double v = value(rows[i], s);
    if (isfinite(v)) fprintf(out, "%.1f,%.1f ", axis_px(x, xs[i]), axis_px(y, v));
  }
  fputs("\"/>\n", out);
  for (int i = 0; i < n; i++) {
    double v = value(rows[i], s);
    if (!isfinite(v)) continue;
    fputs("<g>", out);
    svg_marker(out, SERIES[s].marker, axis_px(x, xs[i]), axis_px(y, v), SERIES[s].color);
    fprintf(out, "<title>%s %s: %.4g %s</title></g>\n", SERIES[s].name, rows[i]->key, v, unit);
  }
}

/* Latency (log) against x (log), one line per implementation. rows are ordered by x. */
static void svg_line_chart(FILE *out, const char *title, const char *x_label, const tn_report_row *const *rows,
                           const double *xs, int n)
{
  const canvas c = {.width = 640, .height = 380, .left = 78, .right = 24, .top = 62, .bottom = 54};
  double y_min = INFINITY, y_max = 0;
  int present[N_SERIES] = {0};
  for (int i = 0; i < n; i++)
    for (int s = 0; s < N_SERIES; s++) {
      double v = log_plottable_ms(rows[i], s);
      if (!isfinite(v)) continue;
      present[s] = 1;
      y_min = fmin(y_min, v), y_max = fmax(y_max, v);
    }
  axis x = {xs[0] / 1.25, xs[n - 1] * 1.25, c.left, plot_right(&c), 1};
  axis y = {pow(10, floor(log10(y_min))), pow(10, ceil(log10(y_max))), plot_bottom(&c), c.top, 1};
  if (y.hi <= y.lo * 1.001) y.hi = y.lo * 10;
  svg_begin(out, &c, title);
  svg_legend(out, present, c.left, 42, 0);
  svg_log_yticks(out, &c, &y);
  svg_x_ticks(out, &c, &x, xs, n);
  svg_frame(out, &c);
  for (int s = 0; s < N_SERIES; s++)
    if (present[s]) svg_series_line(out, s, rows, xs, n, &x, &y, log_plottable_ms, "ms");
  svg_axis_title(out, &c, AXIS_X, x_label);
  svg_axis_title(out, &c, AXIS_Y, "latency (ms, log scale)");
  svg_end(out);
}

/* ---- speedup against T or B --------------------------------------------------------------- */

/* The tuned kernel's speedup over cuDNN (cuDNN time / tuned time; NaN where either is missing),
 * as a series_value, so svg_series_line draws it as it draws a latency. */
static double speedup_of(const tn_report_row *row, int s)
{
  (void)s;
  return row->speedup_tuned;
}

static int has_any_speedup(const tn_report_row *const *m, int n)
{
  for (int i = 0; i < n; i++)
    if (isfinite(m[i]->speedup_tuned)) return 1;
  return 0;
}

/* Characters in UTF-8 text (the speedup labels hold a multiplication sign). */
static size_t utf8_chars(const char *s)
{
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

/* A label's box in pixels, for placing value labels clear of one another. */
typedef struct text_box {
  double x0, x1, y0, y1;
} text_box;

static int boxes_meet(const text_box *a, const text_box *b)
{
  return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

/* Value labels are 10 px text: 6.5 px per character holds a digit (0.64 em) with room to spare;
 * the box runs from the cap height to below the baseline. */
#define VAL_CHAR_PX 6.5

static text_box val_box(double x, double baseline, const char *text)
{
  double half = VAL_CHAR_PX * (double)utf8_chars(text) / 2 + 1;
  return (text_box){x - half, x + half, baseline - 9, baseline + 3};
}

/* Each point's value printed next to it, above the marker or else below, where the label stays
 * inside the plot and clear of the 1.0 line and of the labels already placed; a point without
 * room keeps its value in the table under the charts (html_family_table) and its tooltip. */
static void svg_point_values(FILE *out, const canvas *c, const tn_report_row *const *rows, const double *xs,
                             int n, const axis *x, const axis *y)
{
  text_box *placed = malloc((size_t)(n + 1) * sizeof *placed);
  if (!placed) return; /* the table and the tooltips still hold every value */
  double one = axis_px(y, 1.0);
  placed[0] = (text_box){c->left, plot_right(c), one - 1.5, one + 1.5}; /* text across the line is hard to read */
  int n_placed = 1;
  for (int i = 0; i < n; i++) {
    double v = rows[i]->speedup_tuned;
    if (!isfinite(v)) continue;
    char text[32];
    snprintf(text, sizeof text, "%.2f×", v);
    double px = axis_px(x, xs[i]), py = axis_px(y, v);
    const double baselines[2] = {py - 9, py + 17};
    for (int k = 0; k < 2; k++) {
      text_box b = val_box(px, baselines[k], text);
      int clear = b.y0 >= c->top && b.y1 <= plot_bottom(c) && b.x0 >= c->left && b.x1 <= plot_right(c);
      for (int j = 0; j < n_placed && clear; j++) clear = !boxes_meet(&b, &placed[j]);
      if (!clear) continue;
      placed[n_placed++] = b;
      svg_text(out, "val", px, baselines[k], "middle", text);
      break;
    }
  }
  free(placed);
}

/* The legend of a speedup chart: the tuned kernel's line and the dashed 1.0 line. It stands above
 * the plot rather than next to the 1.0 line, where points near 1.0 would cover it. */
static void svg_speedup_legend(FILE *out, double x, double y)
{
  const char *tuned = "tuned (attntune) vs cuDNN";
  fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>", x, y,
          x + 24, y, SERIES[S_TUNED].color);
  svg_marker(out, SERIES[S_TUNED].marker, x + 12, y, SERIES[S_TUNED].color);
  svg_text(out, "tk", x + 30, y + 4, NULL, tuned);
  x += 40 + TICK_CHAR_PX * (double)strlen(tuned);
  svg_line(out, x, y, x + 24, y, "one");
  svg_text(out, "tk", x + 30, y + 4, NULL, "1.0 = as fast as cuDNN");
}

/* Speedup of the tuned kernel over cuDNN (linear) against x (log), with the line at 1.0 and each
 * point's value. The axis spans the speedups and 1.0 with a margin rather than starting at 0, so
 * that a 10% gap takes a good part of the plot's height: on the latency chart's log axis over
 * decades it is a few pixels. rows are ordered by x. */
static void svg_speedup_line_chart(FILE *out, const char *title, const char *x_label,
                                   const tn_report_row *const *rows, const double *xs, int n)
{
  const canvas c = {.width = 640, .height = 380, .left = 78, .right = 24, .top = 62, .bottom = 54};
  double lo = 1, hi = 1;
  for (int i = 0; i < n; i++)
    if (isfinite(rows[i]->speedup_tuned)) lo = fmin(lo, rows[i]->speedup_tuned), hi = fmax(hi, rows[i]->speedup_tuned);
  double pad = fmax(0.05, (hi - lo) * 0.15), step = nice_step(hi - lo + 2 * pad, 5);
  axis x = {xs[0] / 1.25, xs[n - 1] * 1.25, c.left, plot_right(&c), 1};
  axis y = {fmax(0, floor((lo - pad) / step + 1e-9) * step), ceil((hi + pad) / step - 1e-9) * step, plot_bottom(&c),
            c.top, 0};
  char full[256];
  snprintf(full, sizeof full, "%s: speedup over cuDNN", title);
  svg_begin(out, &c, full);
  svg_speedup_legend(out, c.left, 42);
  svg_linear_ticks(out, &c, AXIS_Y, &y, step);
  svg_x_ticks(out, &c, &x, xs, n);
  svg_frame(out, &c);
  double one = axis_px(&y, 1.0);
  svg_line(out, c.left, one, plot_right(&c), one, "one");
  fputc('\n', out);
  svg_series_line(out, S_TUNED, rows, xs, n, &x, &y, speedup_of, "x (cuDNN time / tuned time)");
  svg_point_values(out, &c, rows, xs, n, &x, &y);
  svg_axis_title(out, &c, AXIS_X, x_label);
  svg_axis_title(out, &c, AXIS_Y, "speedup = cuDNN time / tuned time (linear)");
  svg_end(out);
}

/* ---- decode bandwidth ---------------------------------------------------------------------- */

/* What a decode kernel, reading K/V once, cannot beat: the H200's HBM copy rate as measured (the
 * figure docs/perf.md's byte counts use). The label says where it comes from, so on another GPU
 * model's chart the line still reads as the H200's ceiling, not that GPU's. */
#define HBM_COPY_TBS 4.3
#define HBM_COPY_LABEL "HBM copy ~4.3 TB/s (H200, measured)"

/* A series' K/V rate in TB/s: tuned and cuDNN only (the naive kernels re-read K/V per step). */
static double series_kv_tbs(const tn_report_row *row, int s)
{
  if (row_is_serving(row)) return NAN; /* settle_row says why */
  return s == S_NAIVE ? NAN : tn_kv_tbs(&row->shape, series_ms(row, s));
}

/* The dashed horizontal ceiling at v with its label above the line, right-aligned in the plot. */
static void svg_ceiling(FILE *out, const canvas *c, const axis *y, double v, const char *label)
{
  double p = axis_px(y, v);
  fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#009E73\" stroke-width=\"1.5\" "
               "stroke-dasharray=\"6 3\"/>\n", c->left, p, plot_right(c), p);
  svg_text(out, "tk", plot_right(c) - 6, p - 5, "end", label);
}

/* K/V TB/s (linear, from 0) against the KV length S (log), one line per implementation, with the
 * HBM copy rate as the ceiling. rows are ordered by S. */
static void svg_bandwidth_chart(FILE *out, const char *title, const tn_report_row *const *rows, const double *xs,
                                int n)
{
  const canvas c = {.width = 640, .height = 380, .left = 78, .right = 24, .top = 62, .bottom = 54};
  double v_max = HBM_COPY_TBS;
  int present[N_SERIES] = {0};
  for (int i = 0; i < n; i++)
    for (int s = 0; s < N_SERIES; s++) {
      double v = series_kv_tbs(rows[i], s);
      if (!isfinite(v)) continue;
      present[s] = 1;
      v_max = fmax(v_max, v);
    }
  double step = nice_step(v_max * 1.15, 5);
  axis x = {xs[0] / 1.25, xs[n - 1] * 1.25, c.left, plot_right(&c), 1};
  axis y = {0, ceil(v_max * 1.15 / step) * step, plot_bottom(&c), c.top, 0};
  svg_begin(out, &c, title);
  svg_legend(out, present, c.left, 42, 0);
  svg_linear_ticks(out, &c, AXIS_Y, &y, step);
  svg_x_ticks(out, &c, &x, xs, n);
  svg_frame(out, &c);
  svg_ceiling(out, &c, &y, HBM_COPY_TBS, HBM_COPY_LABEL);
  for (int s = 0; s < N_SERIES; s++)
    if (present[s]) svg_series_line(out, s, rows, xs, n, &x, &y, series_kv_tbs, "TB/s");
  svg_axis_title(out, &c, AXIS_X, "KV length S (log scale)");
  svg_axis_title(out, &c, AXIS_Y, "K/V read (TB/s)");
  svg_end(out);
}

/* Why a bar chart has no bar for series s of a row. */
static void missing_bar_reason(const tn_report_row *row, int s, char *buf, size_t size)
{
  const char *why = s == S_CUDNN ? tn_report_cudnn_label(row)
                    : s == S_NAIVE ? "no naive time"
                    : tn_report_no_fused(row) ? "no fused kernel" : "no tuned kernel";
  snprintf(buf, size, "%s%s", s == S_CUDNN ? "cuDNN " : "", why);
}

/* Where a bar is missing: why, written upwards from the base line it would stand on. */
static void svg_missing_bar(FILE *out, double x, double y, const char *why)
{
  fprintf(out, "<text class=\"miss\" x=\"%.1f\" y=\"%.1f\" transform=\"rotate(-90 %.1f %.1f)\">", x, y, x, y);
  xml_text(out, why);
  fputs("</text>\n", out);
}

/* Latency bars (tuned, cuDNN) per category; a missing bar says why instead. Naive bars join them
 * only when a category has no fused kernel (an f32 shape), so that its naive time is seen. */
static void svg_bar_chart(FILE *out, const char *title, const tn_report_row *const *rows,
                          char (*labels)[2][32], int n)
{
  int S[3] = {S_TUNED, S_CUDNN}, ns = 2;
  for (int i = 0; i < n && ns == 2; i++)
    if (tn_report_no_fused(rows[i]) && isfinite(rows[i]->naive_ms))
      S[0] = S_NAIVE, S[1] = S_TUNED, S[2] = S_CUDNN, ns = 3;
  /* Wide enough for the bars and for the title in one line. */
  const canvas c = {.width = (int)fmax(150 + (ns == 3 ? 150 : 110) * n, 28 + 9.0 * (double)strlen(title)),
                    .height = 370, .left = 78, .right = 20, .top = 62, .bottom = 64};
  double y_max = 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < ns; k++) {
      double v = series_ms(rows[i], S[k]);
      if (isfinite(v)) y_max = fmax(y_max, v);
    }
  if (!(y_max > 0)) y_max = 1; /* no time at all: an empty axis rather than NaN coordinates */
  double step = nice_step(y_max * 1.15, 5);
  axis y = {0, ceil(y_max * 1.15 / step) * step, plot_bottom(&c), c.top, 0};
  svg_begin(out, &c, title);
  svg_legend(out, (int[N_SERIES]){ns == 3, 1, 1}, c.left, 42, 1);
  svg_linear_ticks(out, &c, AXIS_Y, &y, step);
  double slot = (plot_right(&c) - c.left) / n, bar = fmin(slot * (ns == 3 ? 0.24 : 0.32), 40);
  char text[256];
  for (int i = 0; i < n; i++) {
    double cx = c.left + slot * (i + 0.5);
    for (int k = 0; k < ns; k++) {
      double v = series_ms(rows[i], S[k]), x0 = cx - (ns * bar + (ns - 1) * 4) / 2 + k * (bar + 4);
      double base = axis_px(&y, 0);
      if (isfinite(v)) {
        double top = axis_px(&y, v);
        snprintf(text, sizeof text, "%s %s: %.4g ms", SERIES[S[k]].name, rows[i]->key, v);
        svg_bar(out, x0, top, bar, base - top, SERIES[S[k]].color, text);
        snprintf(text, sizeof text, "%.3g", v);
        svg_text(out, "val", x0 + bar / 2, top - 4, "middle", text);
      } else {
        missing_bar_reason(rows[i], S[k], text, sizeof text);
        svg_missing_bar(out, x0 + bar / 2 + 4, base - 6, text);
      }
    }
    for (int line = 0; line < 2; line++)
      svg_text(out, "tk", cx, plot_bottom(&c) + 16 + 14 * line, "middle", labels[i][line]);
  }
  svg_frame(out, &c);
  svg_axis_title(out, &c, AXIS_Y, "latency (ms)");
  svg_end(out);
}

/* Why a shape has no speedup bar: no fused kernel, no tuned time, or no cuDNN time. */
static void missing_speedup_reason(const tn_report_row *row, char *why, size_t size)
{
  if (tn_report_no_fused(row) && isfinite(row->naive_ms))
    snprintf(why, size, "no fused kernel (naive %.4g ms)", row->naive_ms);
  else if (tn_report_no_fused(row)) snprintf(why, size, "no fused kernel");
  else if (!isfinite(row->tuned_ms)) snprintf(why, size, "no verified attntune kernel");
  else if (row->cudnn == TN_REPORT_CUDNN_UNSUPPORTED) snprintf(why, size, "cuDNN unsupported");
  else snprintf(why, size, "no cuDNN time (%s)", tn_report_cudnn_label(row));
}

/* Speedup tuned vs cuDNN, one horizontal bar per shape, with the 1.0 line marked. */
static void svg_speedup_chart(FILE *out, const tn_report *r, int lo, int hi, const char *gpu)
{
  size_t key_len = 10;
  double s_max = 1;
  for (int i = lo; i < hi; i++) {
    key_len = strlen(r->rows[i].key) > key_len ? strlen(r->rows[i].key) : key_len;
    if (isfinite(r->rows[i].speedup_tuned)) s_max = fmax(s_max, r->rows[i].speedup_tuned);
  }
  /* Values stand in a column right of the plot, where no bar or the 1.0 line can cover them. */
  const double L = 20 + 6.7 * (double)key_len, R = 64, T = 62, B = 48, row_h = 22;
  const canvas c = {.width = (int)L + 560, .height = (int)(T + B + row_h * (hi - lo)),
                    .left = L, .right = R, .top = T, .bottom = B};
  double step = nice_step(s_max * 1.1, 6);
  axis x = {0, ceil(fmax(1.25, s_max * 1.1) / step) * step, c.left, plot_right(&c), 0};
  char title[256], text[256];
  snprintf(title, sizeof title, "Speedup of the tuned kernel over cuDNN per shape, %s", gpu);
  svg_begin(out, &c, title);
  /* Not svg_legend: the two entries are the bar colors for faster and slower, not series. */
  fprintf(out, "<rect x=\"%.1f\" y=\"34\" width=\"14\" height=\"12\" fill=\"%s\"/><text class=\"tk\" x=\"%.1f\" "
               "y=\"44\">faster than cuDNN (&gt; 1)</text><rect x=\"%.1f\" y=\"34\" width=\"14\" height=\"12\" "
               "fill=\"%s\"/><text class=\"tk\" x=\"%.1f\" y=\"44\">slower than cuDNN (&lt; 1)</text>\n",
          c.left, SERIES[S_TUNED].color, c.left + 20, c.left + 190, SERIES[S_CUDNN].color, c.left + 210);
  svg_linear_ticks(out, &c, AXIS_X, &x, step);
  for (int i = lo; i < hi; i++) {
    const tn_report_row *row = &r->rows[i];
    double cy = c.top + row_h * (i - lo) + row_h / 2, s = row->speedup_tuned;
    svg_text(out, "key", c.left - 8, cy + 4, "end", row->key);
    if (isfinite(s)) {
      snprintf(text, sizeof text, "%s: cuDNN %.4g ms / tuned %.4g ms", row->key, row->cudnn_ms, row->tuned_ms);
      svg_bar(out, c.left, cy - 7, axis_px(&x, s) - c.left, 14.0,
              s >= 1 ? SERIES[S_TUNED].color : SERIES[S_CUDNN].color, text);
      /* The value column stands at a whole pixel (x has no tenths), so not through svg_text. */
      fprintf(out, "<text class=\"val\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.2f×</text>\n", c.width - 10,
              cy + 4, s);
    } else {
      missing_speedup_reason(row, text, sizeof text);
      svg_text(out, "miss", c.left + 6, cy + 4, NULL, text);
    }
  }
  double one = axis_px(&x, 1.0);
  svg_line(out, one, c.top - 4, one, plot_bottom(&c) + 4, "one");
  svg_text(out, "tk", one + 4, c.top - 6, "start", "1.0 = as fast as cuDNN");
  svg_frame(out, &c);
  svg_axis_title(out, &c, AXIS_X, "speedup = cuDNN time / tuned time (linear)");
  svg_end(out);
}

/* ---- HTML: sweeps ------------------------------------------------------------------------ */

/* Which shape field a family of charts varies. */
typedef enum vary { VARY_SEQ, VARY_BATCH, VARY_KV_HEADS, VARY_DTYPE, N_VARY } vary;

/* x_label NULL: a bar chart per family; else a latency and a speedup line chart with a table. */
static const struct {
  const char *heading, *what, *x_label, *x_head;
} VARY[N_VARY] = {
    {"Latency and speedup vs sequence length", "sequence length (T = S)", "sequence length T = S (log scale)",
     "T = S"},
    {"Latency and speedup vs batch size", "batch size", "batch size B (log scale)", "B"},
    {"MHA vs GQA vs MQA", "the number of K/V heads", NULL, NULL},
    {"FP8 vs bf16 (and other dtypes)", "dtype", NULL, NULL},
};

static int same_except(const at_shape *a, const at_shape *b, vary v)
{
  return (v == VARY_BATCH || a->batch == b->batch) &&
         (v == VARY_SEQ || (a->q_len == b->q_len && a->kv_len == b->kv_len)) &&
         a->q_heads == b->q_heads && (v == VARY_KV_HEADS || a->kv_heads == b->kv_heads) &&
         a->head_dim == b->head_dim &&
         (v == VARY_DTYPE || (a->dtype == b->dtype && at_shape_kv_dtype(a) == at_shape_kv_dtype(b))) &&
         a->mask == b->mask && a->with_lse == b->with_lse;
}

static double vary_value(const at_shape *s, vary v)
{
  switch (v) {
  case VARY_SEQ: return s->q_len;
  case VARY_BATCH: return s->batch;
  case VARY_KV_HEADS: return -s->kv_heads; /* MHA first, MQA last */
  default: return 8 * s->dtype + at_shape_kv_dtype(s);
  }
}

/* "B=2 Nq=16 Nkv=4 D=128 bf16 causal", leaving out the field that varies. */
static void describe_fixed(const at_shape *s, vary v, char *buf, size_t size)
{
  int n = 0;
#define ADD(...) (n += snprintf(buf + n, n < (int)size ? size - (size_t)n : 0, __VA_ARGS__))
  buf[0] = '\0';
  if (v != VARY_BATCH) ADD("B=%d ", s->batch);
  if (v != VARY_SEQ) ADD("T=%d S=%d ", s->q_len, s->kv_len);
  ADD("Nq=%d ", s->q_heads);
  if (v != VARY_KV_HEADS) ADD("Nkv=%d ", s->kv_heads);
  ADD("D=%d ", s->head_dim);
  if (v != VARY_DTYPE) ADD("%s ", at_dtypes_name(s->dtype, s->kv_dtype));
  ADD("%s%s", at_mask_name(s->mask), s->with_lse ? " lse" : "");
#undef ADD
}

static void category_label(const at_shape *s, vary v, char out[2][32])
{
  if (v == VARY_DTYPE) {
    snprintf(out[0], 32, "%s", at_dtypes_name(s->dtype, s->kv_dtype));
    snprintf(out[1], 32, "%s", s->dtype >= AT_DTYPE_E4M3 ? "FP8" : at_dtype_is_fp8(at_shape_kv_dtype(s)) ? "FP8 K/V" : "");
    return;
  }
  const char *kind = s->kv_heads == s->q_heads ? "MHA" : s->kv_heads == 1 ? "MQA" : "GQA";
  snprintf(out[0], 32, "%s", kind);
  snprintf(out[1], 32, "Nkv=%d", s->kv_heads);
}

/* Insertion sort of a group's rows by the varying value (groups are small). */
static void sort_members(const tn_report_row **m, int n, vary v)
{
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && vary_value(&m[j]->shape, v) < vary_value(&m[j - 1]->shape, v); j--) {
      const tn_report_row *t = m[j];
      m[j] = m[j - 1], m[j - 1] = t;
    }
}

static int has_any_time(const tn_report_row *const *m, int n)
{
  for (int i = 0; i < n; i++)
    for (int s = 0; s < N_SERIES; s++)
      if (isfinite(series_ms(m[i], s))) return 1;
  return 0;
}

static void html_cell_num(FILE *out, const char *text, const char *cls);

/* The numbers behind a family's charts, one row per shape, so that no value is only in a tooltip:
 * the varying value, each implementation's time (cuDNN's, or why there is none), for decode
 * families the K/V rates, and the speedup. */
static void html_family_table(FILE *out, const char *caption, const char *x_head, const tn_report_row *const *rows,
                              const double *xs, int n, int kv_rates)
{
  char b[64];
  fputs("<table class=\"vals\"><caption>", out);
  xml_text(out, caption);
  fprintf(out, "</caption>\n<tr><th>%s</th><th>naive ms</th><th>tuned ms</th><th>cuDNN ms</th>%s"
               "<th>tuned / cuDNN</th></tr>\n", x_head, kv_rates ? "<th>tuned TB/s</th><th>cuDNN TB/s</th>" : "");
  for (int i = 0; i < n; i++) {
    const tn_report_row *row = rows[i];
    snprintf(b, sizeof b, "%g", xs[i]);
    fputs("<tr>", out);
    html_cell_num(out, b, NULL);
    html_cell_num(out, fmt_ms(b, sizeof b, row->naive_ms), NULL);
    html_cell_num(out, fmt_ms(b, sizeof b, row->tuned_ms), NULL);
    html_cell_num(out, fmt_cudnn(b, sizeof b, row), row->cudnn == TN_REPORT_CUDNN_OK ? NULL : "miss");
    if (kv_rates) {
      html_cell_num(out, fmt_fixed(b, sizeof b, series_kv_tbs(row, S_TUNED), 2, ""), NULL);
      html_cell_num(out, fmt_fixed(b, sizeof b, series_kv_tbs(row, S_CUDNN), 2, ""), NULL);
    }
    double sp = row->speedup_tuned;
    html_cell_num(out, fmt_speedup(b, sizeof b, row->tuned_ms, sp), !isfinite(sp) ? NULL : sp >= 1 ? "fast" : "slow");
    fputs("</tr>\n", out);
  }
  fputs("</table>\n", out);
}

/* A family of a sweep: its latency chart, its speedup chart (when any shape has both times) and
 * the table of their values. */
static void html_sweep_family(FILE *out, vary v, const char *title, const tn_report_row *const *m, const double *xs,
                              int n)
{
  int speedups = has_any_speedup(m, n);
  fputs("<div class=\"family\">\n<div class=\"charts\">\n", out);
  svg_line_chart(out, title, VARY[v].x_label, m, xs, n);
  if (speedups) svg_speedup_line_chart(out, title, VARY[v].x_label, m, xs, n);
  fputs("</div>\n", out);
  if (!speedups)
    fputs("<p class=\"none\">No speedup line: no shape of this family has both a tuned and a cuDNN time.</p>\n", out);
  html_family_table(out, title, VARY[v].x_head, m, xs, n, 0);
  fputs("</div>\n", out);
}

/* One chart (bars) or one family of charts (sweeps) per family of shapes that differ only in v;
 * a sentence when there is none. The scratch arrays hold n_rows entries. */
static void html_vary_section(FILE *out, const tn_report *r, int lo, int hi, vary v, char *used,
                              const tn_report_row **members, double *xs, char (*labels)[2][32])
{
  int charts = 0;
  fprintf(out, "<div class=\"sweep\"><h3>%s</h3>\n<div class=\"charts\">\n", VARY[v].heading);
  memset(used, 0, (size_t)r->n_rows);
  for (int i = lo; i < hi; i++) {
    const at_shape *s = &r->rows[i].shape;
    if (used[i] || (v == VARY_SEQ && s->q_len != s->kv_len)) continue;
    int n = 0;
    for (int j = i; j < hi; j++) {
      const at_shape *t = &r->rows[j].shape;
      if (used[j] || !same_except(s, t, v) || (v == VARY_SEQ && t->q_len != t->kv_len)) continue;
      used[j] = 1;
      members[n++] = &r->rows[j];
    }
    if (n < 2 || !has_any_time(members, n)) continue;
    sort_members(members, n, v);
    char title[200];
    describe_fixed(s, v, title, sizeof title);
    for (int k = 0; k < n; k++) {
      xs[k] = vary_value(&members[k]->shape, v);
      category_label(&members[k]->shape, v, labels[k]);
    }
    if (VARY[v].x_label) html_sweep_family(out, v, title, members, xs, n);
    else svg_bar_chart(out, title, members, labels, n);
    charts++;
  }
  fputs("</div>\n", out);
  if (!charts)
    fprintf(out, "<p class=\"none\">No chart: no two shapes of this GPU with measured times differ only "
                 "in %s.</p>\n", VARY[v].what);
  fputs("</div>\n", out);
}

/* ---- HTML: decode ------------------------------------------------------------------------- */

static int same_but_kv_len(const at_shape *a, const at_shape *b)
{
  return a->batch == b->batch && a->q_len == b->q_len && a->q_heads == b->q_heads && a->kv_heads == b->kv_heads &&
         a->head_dim == b->head_dim && a->dtype == b->dtype && at_shape_kv_dtype(a) == at_shape_kv_dtype(b) &&
         a->mask == b->mask && a->with_lse == b->with_lse;
}

static int has_decode_rows(const tn_report *r, int lo, int hi)
{
  for (int i = lo; i < hi; i++)
    if (tn_is_decode_shape(&r->rows[i].shape)) return 1;
  return 0;
}

static int has_any_kv_rate(const tn_report_row *const *m, int n)
{
  for (int i = 0; i < n; i++)
    for (int s = 0; s < N_SERIES; s++)
      if (isfinite(series_kv_tbs(m[i], s))) return 1;
  return 0;
}

/* Insertion sort by the KV length (groups are small). */
static void sort_by_kv_len(const tn_report_row **m, int n)
{
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && m[j]->shape.kv_len < m[j - 1]->shape.kv_len; j--) {
      const tn_report_row *t = m[j];
      m[j] = m[j - 1], m[j - 1] = t;
    }
}

/* One bandwidth chart per family of decode shapes that differ only in S (a single S is a chart
 * too: its distance to the ceiling is the point). Nothing at all for a model without decode rows,
 * so a prefill report is as before. The scratch arrays hold n_rows entries. */
static void html_decode_section(FILE *out, const tn_report *r, int lo, int hi, char *used,
                                const tn_report_row **members, double *xs)
{
  if (!has_decode_rows(r, lo, hi)) return;
  int charts = 0;
  fprintf(out, "<h3>Decode: K/V bandwidth vs KV length</h3>\n<p>Decode shapes (1 &le; T &le; %d) read the K/V "
               "cache once per call, so they are rated in TB/s of K/V read, 2&middot;B&middot;Nkv&middot;S&middot;D"
               "&middot;sizeof(K/V dtype) / time (1 byte per element for an FP8 KV cache); the dashed line is the HBM copy rate, the ceiling for such a "
               "kernel.</p>\n<div class=\"charts\">\n", TN_DECODE_MAX_T);
  memset(used, 0, (size_t)r->n_rows);
  for (int i = lo; i < hi; i++) {
    const at_shape *s = &r->rows[i].shape;
    if (used[i] || !tn_is_decode_shape(s)) continue;
    int n = 0;
    for (int j = i; j < hi; j++)
      if (!used[j] && same_but_kv_len(s, &r->rows[j].shape)) used[j] = 1, members[n++] = &r->rows[j];
    if (!has_any_kv_rate(members, n)) continue;
    sort_by_kv_len(members, n);
    char title[200];
    snprintf(title, sizeof title, "B=%d T=%d Nq=%d Nkv=%d D=%d %s %s%s", s->batch, s->q_len, s->q_heads, s->kv_heads,
             s->head_dim, at_dtypes_name(s->dtype, s->kv_dtype), at_mask_name(s->mask), s->with_lse ? " lse" : "");
    for (int k = 0; k < n; k++) xs[k] = members[k]->shape.kv_len;
    fputs("<div class=\"family\">\n", out);
    svg_bandwidth_chart(out, title, members, xs, n);
    html_family_table(out, title, "S", members, xs, n, 1);
    fputs("</div>\n", out);
    charts++;
  }
  fputs("</div>\n", out);
  if (!charts) fputs("<p class=\"none\">No chart: no decode shape of this GPU has a tuned or cuDNN time.</p>\n", out);
}

/* ---- HTML: tables and page --------------------------------------------------------------- */

/* A variant key may wrap after its dots, so the table fits the page. */
static void html_breakable(FILE *out, const char *s)
{
  for (; *s; s++) {
    char one[2] = {*s, '\0'};
    xml_text(out, one);
    if (*s == '.') fputs("<wbr>", out);
  }
}

static void html_cell_num(FILE *out, const char *text, const char *cls)
{
  fprintf(out, "<td class=\"n%s%s\">%s</td>", cls ? " " : "", cls ? cls : "", text);
}

static void html_rows_table(FILE *out, const tn_report *r, int lo, int hi)
{
  static const char *const HEAD[] = {"shape", "B", "T", "S", "Nq", "Nkv", "D", "dtype", "mask",
                                     "best", "best ms", "TFLOP/s", "TB/s", "tuned ms", "cuDNN ms",
                                     "naive ms", "tuned / cuDNN", "best / cuDNN", "err naive",
                                     "err cuDNN", "note"};
  char b[64];
  fputs("<div class=\"scroll\"><table>\n<tr>", out);
  for (size_t k = 0; k < sizeof HEAD / sizeof *HEAD; k++) fprintf(out, "<th>%s</th>", HEAD[k]);
  fputs("</tr>\n", out);
  for (int i = lo; i < hi; i++) {
    const tn_report_row *row = &r->rows[i];
    const at_shape *s = &row->shape;
    fprintf(out, "<tr><td class=\"k\">%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td>"
                 "<td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td>%s</td><td>%s</td>"
                 "<td class=\"k impl\" title=\"tuned: %s\">",
            row->key, s->batch, s->q_len, s->kv_len, s->q_heads, s->kv_heads, s->head_dim,
            at_dtypes_name(s->dtype, s->kv_dtype), at_mask_name(s->mask), row->tuned_impl[0] ? row->tuned_impl : "none");
    html_breakable(out, best_label(row));
    fputs("</td>", out);
    html_cell_num(out, fmt_ms(b, sizeof b, row->best_ms), NULL);
    html_cell_num(out, fmt_fixed(b, sizeof b, row->best_tflops, 1, ""), NULL);
    html_cell_num(out, fmt_fixed(b, sizeof b, row->best_kv_tbs, 2, ""), NULL);
    html_cell_num(out, fmt_ms(b, sizeof b, row->tuned_ms), NULL);
    html_cell_num(out, fmt_cudnn(b, sizeof b, row), row->cudnn == TN_REPORT_CUDNN_OK ? NULL : "miss");
    html_cell_num(out, fmt_ms(b, sizeof b, row->naive_ms), NULL);
    double sp[2] = {row->speedup_tuned, row->speedup_best}, ms[2] = {row->tuned_ms, row->best_ms};
    for (int k = 0; k < 2; k++)
      html_cell_num(out, fmt_speedup(b, sizeof b, ms[k], sp[k]),
                    !isfinite(sp[k]) ? NULL : sp[k] >= 1 ? "fast" : "slow");
    html_cell_num(out, fmt_err(b, sizeof b, row->err_naive), NULL);
    html_cell_num(out, fmt_err(b, sizeof b, row->err_cudnn), NULL);
    fputs("<td class=\"note\">", out);
    xml_text(out, row->note);
    fputs("</td></tr>\n", out);
  }
  fputs("</table></div>\n", out);
}

static void html_groups_table(FILE *out, const tn_report *r, const char *gpu)
{
  char label[96], mean[32];
  fputs("<h3>Geometric-mean speedup, tuned vs cuDNN</h3>\n<table>\n<tr><th>dtype, head dim, mask</th>"
        "<th>speedup</th><th>shapes compared</th><th>tuned faster</th></tr>\n", out);
  for (int i = 0; i < r->n_groups; i++) {
    const tn_report_group *g = &r->groups[i];
    if (strcmp(g->gpu_model, gpu) != 0) continue;
    group_label(g, label, sizeof label);
    fmt_speedup(mean, sizeof mean, 1, g->geomean);
    fprintf(out, "<tr><td>%s</td>", label);
    html_cell_num(out, mean, !isfinite(g->geomean) ? NULL : g->geomean >= 1 ? "fast" : "slow");
    fprintf(out, "<td class=\"n\">%d of %d</td><td class=\"n\">%d of %d</td></tr>\n", g->n_compared, g->n_shapes,
            g->n_won, g->n_compared);
  }
  fputs("</table>\n", out);
}

static void html_kv8_table(FILE *out, const tn_report *r, const char *gpu)
{
  const tn_report_row **rows = malloc((size_t)r->n_rows * sizeof *rows);
  const int n = rows ? kv8_rows(r, gpu, rows, r->n_rows) : 0;
  char b[32];
  if (n)
    fprintf(out, "<h3>%s</h3>\n<table>\n<tr><th>shape</th><th>16-bit K/V best_ms</th><th>FP8 K/V best_ms</th>"
                 "<th>tokens/s</th></tr>\n", KV8_TITLE);
  for (int i = 0; i < n; i++) {
    fputs("<tr><td class=\"k\">", out);
    xml_text(out, rows[i]->key);
    fputs("</td>", out);
    html_cell_num(out, fmt_ms(b, sizeof b, rows[i]->kv8_base_ms), NULL);
    html_cell_num(out, fmt_ms(b, sizeof b, rows[i]->best_ms), NULL);
    snprintf(b, sizeof b, "%.2fx", rows[i]->kv8_gain);
    html_cell_num(out, b, rows[i]->kv8_gain >= 1 ? "fast" : "slow");
    fputs("</tr>\n", out);
  }
  if (n) fputs("</table>\n", out);
  free(rows);
}

static const char HTML_STYLE[] =
    "body{font-family:system-ui,\"DejaVu Sans\",\"Liberation Sans\",sans-serif;margin:16px;color:#1a1a1a;"
    "background:#fff;max-width:1400px}\n"
    "h1{font-size:22px}h2{font-size:19px;border-bottom:1px solid #bbb;padding-bottom:4px;margin-top:36px}\n"
    "h3{font-size:16px;margin:26px 0 8px}p{max-width:900px;line-height:1.45}\n"
    "table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #d5d5d5;padding:2px 4px}\n"
    "td{white-space:nowrap}td.impl{white-space:normal;min-width:140px;max-width:200px}\n"
    "td.note{white-space:normal;min-width:160px;max-width:320px;font-size:11px}\n"
    "th{background:#f2f2f2;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".k,code{font-family:\"DejaVu Sans Mono\",\"Liberation Mono\",monospace}td.k{font-size:11px}\n"
    "td.fast{color:#005a8c;font-weight:600}td.slow{color:#a63d00;font-weight:600}\n"
    "td.miss{color:#666;font-style:italic}\n"
    ".scroll{overflow-x:auto}.charts{display:flex;flex-wrap:wrap;gap:14px}\n"
    ".sweeps{display:flex;flex-wrap:wrap;gap:0 28px;align-items:flex-start}.sweep{max-width:100%}\n"
    ".family{display:flex;flex-direction:column;align-items:flex-start;gap:6px;margin-bottom:10px}\n"
    "table.vals caption{text-align:left;font-size:12px;padding:2px 0}\n"
    "svg{background:#fff;border:1px solid #e0e0e0}.none{color:#555;font-style:italic}\n"
    "svg text{font-family:system-ui,\"DejaVu Sans\",sans-serif;fill:#222}\n"
    "svg .ct{font-size:13px;font-weight:600}svg .ax{font-size:12px}svg .tk{font-size:11px}\n"
    "svg .val{font-size:10px;fill:#333}svg .miss{font-size:10px;fill:#666;font-style:italic}\n"
    "svg .key{font-family:\"DejaVu Sans Mono\",\"Liberation Mono\",monospace;font-size:11px}\n"
    "svg .grid{stroke:#e4e4e4;stroke-width:1}svg .frame{fill:none;stroke:#888}\n"
    "svg .one{stroke:#222;stroke-width:1.5;stroke-dasharray:5 3}\n";

static void html_model(FILE *out, const tn_report *r, const tn_report_model *m, char *used,
                       const tn_report_row **members, double *xs, char (*labels)[2][32])
{
  int lo, hi;
  model_range(r, m, &lo, &hi);
  fputs("<h2>", out);
  xml_text(out, m->gpu_model);
  fprintf(out, "</h2>\n<p>%d shape%s · compute capability %s · driver %s · NVRTC %s · cuDNN %s · templates ",
          m->n_shapes, m->n_shapes == 1 ? "" : "s", m->cc[0] ? m->cc : "-", m->driver[0] ? m->driver : "-",
          m->nvrtc[0] ? m->nvrtc : "-", m->cudnn[0] ? m->cudnn : "-");
  xml_text(out, m->templates[0] ? m->templates : "-");
  fputs("</p>\n<h3>Speedup per shape</h3>\n", out);
  svg_speedup_chart(out, r, lo, hi, m->gpu_model);
  html_groups_table(out, r, m->gpu_model);
  html_kv8_table(out, r, m->gpu_model);
  fputs("<div class=\"sweeps\">\n", out);
  for (int v = 0; v < N_VARY; v++) html_vary_section(out, r, lo, hi, (vary)v, used, members, xs, labels);
  fputs("</div>\n", out);
  html_decode_section(out, r, lo, hi, used, members, xs);
  fputs("<h3>All shapes</h3>\n", out);
  html_rows_table(out, r, lo, hi);
}

static at_status write_html(const tn_report *r, FILE *out)
{
  size_t n = (size_t)r->n_rows + 1;
  char *used = malloc(n);
  const tn_report_row **members = malloc(n * sizeof *members);
  double *xs = malloc(n * sizeof *xs);
  char(*labels)[2][32] = malloc(n * sizeof *labels);
  if (!used || !members || !xs || !labels) {
    free(used), free(members), free(xs), free(labels);
    return at_fail(AT_ERR_NOMEM, "no memory to lay out the charts of %d shapes", r->n_rows);
  }
  fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
               "<title>attntune report</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>attntune report</h1>\n"
               "<p>Cache <code>", HTML_STYLE);
  xml_text(out, r->db_path);
  fprintf(out, "</code>: %d shape%s on %d GPU model%s.%s <b>tuned</b> is the fastest verified kernel attntune "
               "generated (fa2, fa3 or decode family); speedups are cuDNN's time divided by ours, so above 1 means faster "
               "than cuDNN. Times are medians in milliseconds; TB/s (K/V bytes read per second) is shown for decode "
               "shapes, queries of at most %d rows. <b>no fused kernel</b>: only the naive kernels run the shape (f32), so it has a "
               "naive time and no speedup. For FP8 shapes the cuDNN column is cuDNN's FP8 graph, which writes FP8 output "
               "where attntune's FP8 kernels write bf16 (the note says so); it is the baseline, never the best, since "
               "plans for FP8 inputs write bf16.</p>\n",
          r->n_rows, r->n_rows == 1 ? "" : "s", r->n_models, r->n_models == 1 ? "" : "s",
          r->n_older_best ? " Best rows of older template versions are not shown." : "", TN_DECODE_MAX_T);
  for (int m = 0; m < r->n_models; m++) html_model(out, r, &r->models[m], used, members, xs, labels);
  fputs("</body>\n</html>\n", out);
  free(used), free(members), free(xs), free(labels);
  return AT_OK;
}

at_status tn_report_write(const tn_report *r, tn_report_format format, FILE *out, const char *out_name)
{
  at_status rc = AT_OK;
  switch (format) {
  case TN_REPORT_TEXT: write_text(r, out, 0); break;
  case TN_REPORT_MD: write_text(r, out, 1); break;
  case TN_REPORT_CSV: write_csv(r, out); break;
  case TN_REPORT_JSON: write_json(r, out); break;
  case TN_REPORT_HTML: rc = write_html(r, out); break;
  }
  return rc == AT_OK ? finish(out, out_name) : rc;
}
