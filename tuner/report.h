/*
 * report.h — `attntune report`: tuned-vs-cuDNN results of a cache as tables and charts.
 * Prefix tn_report_ (tn_fail_exit in cli.h is the CLI's error printer, not part of this).
 *
 * The model is built once from a cache file (read only) and then rendered in any format:
 *
 *   best rows ──┐
 *               ├─> one row per (GPU model, shape) ──> groups (dtype, head dim, mask) with the
 *   trials ─────┘   best, tuned (fastest ok fa2.*),      geometric-mean speedup tuned vs cuDNN
 *                   cuDNN, naive
 *
 * Rows are sorted by GPU model, dtype, head dim, mask, heads, batch, T, S, lse, so a group's rows
 * are contiguous. Every time is in milliseconds; NaN means "not measured" everywhere.
 *
 * Decode shapes (tn_is_decode_shape, tuner/measure.h) are memory bound: their rows give TB/s of
 * K/V read next to TFLOP/s, and the HTML page draws them against the KV length with the HBM copy
 * rate as a ceiling (only when the cache holds decode rows). cuDNN has no FP8 KV cache graph, so
 * an FP8 K/V row is set against its shape with 16-bit K/V instead (kv8_gain: tokens per second,
 * best over best), in a table of its own where the cache holds both.
 *
 * A row with no best row and no trial of a generated kernel had no fused kernel to try (f32: the
 * tuner times only the naive kernels there and stores no best): it shows its naive time, "no
 * fused kernel" where the best would be, no speedup, and counts in no geometric mean.
 */
#ifndef AT_TUNER_REPORT_H
#define AT_TUNER_REPORT_H

#include <stdio.h>

#include "attntune.h"
#include "cache/cache.h"
#include "tuner/measure.h"

/* What cuDNN did with a shape. */
typedef enum tn_report_cudnn {
  TN_REPORT_CUDNN_OK = 0,      /* timed: cudnn_ms holds the time */
  TN_REPORT_CUDNN_UNSUPPORTED, /* cuDNN declined the shape */
  TN_REPORT_CUDNN_FAILED,      /* its trial ended otherwise (crashed, wrong...): cudnn_trial_status */
  TN_REPORT_CUDNN_MISSING,     /* no cuDNN trial and no cuDNN time in the best row */
} tn_report_cudnn;

typedef struct tn_report_row {
  char gpu_model[128];
  char key[160]; /* at_shape_key, then a ragged or paged shape's serving part (".kvpaged16.lkv2048") */
  at_shape shape;
  int has_best;  /* 0: only trials, none of which was stored as the best */
  char best_impl[96];
  double best_ms, best_tflops;
  double best_kv_tbs; /* K/V bytes read per second / 1e12 at best_ms; NaN unless a decode shape */
  char tuned_impl[96]; /* the fastest verified fa2.* trial; "" when none */
  double tuned_ms, tuned_tflops;
  tn_report_cudnn cudnn;
  cache_status cudnn_trial_status; /* meaningful for TN_REPORT_CUDNN_FAILED */
  double cudnn_ms;
  double naive_ms;      /* a verified "naive" trial */
  double speedup_tuned; /* cudnn_ms / tuned_ms */
  double speedup_best;  /* cudnn_ms / best_ms */
  double err_naive, err_cudnn; /* of the tuned kernel, else of the best row */
  int n_fused_trials; /* trials of generated kernels (variant keys), any status */
  char cudnn_message[512]; /* the cuDNN trial's message: its plan, or why it has no time */
  /* An FP8 KV cache's row (shape.kv_dtype e4m3/e5m2): the best time of the same shape with 16-bit
   * K/V (the row whose key differs only by the K/V dtype), and that time over this row's best,
   * the FP8 cache's tokens per second over the 16-bit cache's; NaN without such a row. */
  double kv8_base_ms, kv8_gain;
  /* What the cuDNN column needs said: "cuDNN writes FP8 output (e4m3); attntune writes bf16" for
   * FP8 shapes cuDNN timed, "cuDNN: <reason>" where it has no time; "" otherwise. */
  char note[600];
} tn_report_row;

/* The geometric mean of speedup_tuned over a group's rows that have both times. */
typedef struct tn_report_group {
  char gpu_model[128];
  at_dtype dtype;
  at_dtype kv_dtype; /* at_shape.kv_dtype of the group's rows (AT_KV_SAME: K and V in dtype) */
  int head_dim;
  at_mask mask;
  int n_shapes;   /* rows in the group */
  int n_compared; /* rows with a tuned and a cuDNN time: the mean's sample */
  int n_won;      /* of those, rows where the tuned kernel beat cuDNN's time (speedup_tuned > 1) */
  double geomean; /* NaN when n_compared is 0 */
} tn_report_group;

/* The environment of one GPU model's rows; several distinct values are joined with ", ". */
typedef struct tn_report_model {
  char gpu_model[128];
  char cc[64], driver[128], nvrtc[64], cudnn[64], templates[128];
  int n_shapes;
} tn_report_model;

typedef struct tn_report {
  char db_path[1024];
  char gpu_filter[128];       /* --gpu, "" for all */
  char models_in_cache[1024]; /* every GPU model of the file, for messages */
  int n_models_in_cache;
  tn_report_row *rows;
  int n_rows;
  tn_report_group *groups;
  int n_groups;
  tn_report_model *models;
  int n_models;
  int n_older_best; /* best rows of older template versions, not shown (a newer one is) */
} tn_report;

/* Read db_path (read only) into out; gpu_model NULL or "" means every model. A cache without
 * matching rows is not an error: out->n_rows is 0 and tn_report_explain_empty says why. */
at_status tn_report_load(const char *db_path, const char *gpu_model, tn_report *out);
void tn_report_free(tn_report *report);
/* The message for a report with no rows: an empty cache, or no rows for the GPU model asked. */
void tn_report_explain_empty(const tn_report *report, char *buf, size_t size);

typedef enum tn_report_format {
  TN_REPORT_TEXT = 0,
  TN_REPORT_MD,
  TN_REPORT_CSV,
  TN_REPORT_JSON,
  TN_REPORT_HTML,
} tn_report_format;

/* "text", "md", "csv", "json", "html"; an unknown name fails with a message listing them. */
at_status tn_report_format_parse(const char *text, tn_report_format *out);

/* Render into out; out_name names it in the error when writing fails. */
at_status tn_report_write(const tn_report *report, tn_report_format format, FILE *out,
                          const char *out_name);

/* Helpers the renderers share, public for the tests. */
const char *tn_report_cudnn_label(const tn_report_row *row); /* "ok", "unsupported", "crashed", "no time" */
/* No best row and no fused kernel tried (see above): 1 for an f32 shape. */
int tn_report_no_fused(const tn_report_row *row);

#endif
