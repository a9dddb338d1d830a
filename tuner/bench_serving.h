/*
 * bench_serving.h — `attntune bench --lengths / --page-size`: timing a ragged or paged batch
 * through the public library (at_plan_create_serving), next to the sum of contiguous plans run
 * one sequence at a time (the time a kernel without padding would need). Prefix tn_serving_.
 *
 * Padded Q of 1..16 tokens with paged K/V runs the decode family's paged variants: --impl decode
 * lists every one, verifies it against the naive kernels and times it, and --impl contiguous
 * times the contiguous decode variants of the same shape for comparison (a last line compares
 * the best of each). Ragged Q with ragged or padded K/V (prefill) runs the ragged fa2 variants:
 * --impl fa2 (fa3, fused) lists every ragged variant of the family, verifies and times it, and a
 * last line compares the best with seqsum; default and variant keys are verified too; --impl
 * cudnn plans cuDNN's ragged graph (f16/bf16), verified the same way and timed with its metadata
 * kernels, and a line compares it with the best ragged variant. Everything else runs only the
 * naive kernels yet: every other implementation gets a row that says why the library refused it. The naive kernels are the reference itself (tests/test_serving_gpu.c checks
 * them against the contiguous path).
 */
#ifndef AT_TUNER_BENCH_SERVING_H
#define AT_TUNER_BENCH_SERVING_H

#include <stdint.h>

#include "attntune.h"
#include "attntune_fp8.h"
#include "runtime/rt.h"

enum { TN_SERVING_MAX_BATCH = 4096 };

typedef struct tn_serving_bench {
  at_shape shape;            /* batch and the maxima q_len, kv_len */
  at_serving_layout layout;
  int q_lens[TN_SERVING_MAX_BATCH];  /* T_b (q_len each for padded Q) */
  int kv_lens[TN_SERVING_MAX_BATCH]; /* S_b */
  char impls[2048];
  int warmup, reps, device;
  unsigned long long seed;
} tn_serving_bench;

/* A batch's tensors on the device: random Q, K and V (packed or in a shuffled page pool), O and
 * LSE, unit FP8 descales, and the metadata (offsets, block table, lengths); t is the call. */
typedef struct tn_serving_buffers {
  void *q, *k, *v, *o, *lse, *descales;
  int32_t *cu_q, *cu_kv, *table, *lens; /* device */
  at_serving_tensors t;
  int q_rows, kv_rows, num_pages;
} tn_serving_buffers;

/* The reference output of a batch: fp32 on the device, and the comparison kernel
 * (runtime/rt.h rt_compare) for the output dtype of the plans checked against it. */
typedef struct tn_serving_ref {
  void *o;
  rt_compare compare;
} tn_serving_ref;

/* What `bench` and the tuning worker share (tuner/worker.c tunes serving shapes with these, so
 * both verify and time a serving variant the same way): the buffers of b's batch from b->seed
 * (free them with tn_serving_buffers_free, also after a failure); the naive kernels' output on
 * them as fp32 on the device with the kernel that compares an output with it (the reference;
 * free it with tn_serving_reference_free, also after a failure); one checked run of plan (O
 * poisoned first; *err the relative L2 error against ref over every row of O, reduced on the
 * GPU: infinite where an entry is NaN, NAN when it could not be measured); the FP8 descales of the buffers for plans of FP8 shapes (NULL else). */
at_status tn_serving_buffers_make(at_context *ctx, const tn_serving_bench *b, tn_serving_buffers *x);
void tn_serving_buffers_free(at_context *ctx, tn_serving_buffers *x);
at_status tn_serving_reference(at_context *ctx, const tn_serving_bench *b, tn_serving_buffers *x, tn_serving_ref *ref);
void tn_serving_reference_free(at_context *ctx, tn_serving_ref *ref);
at_status tn_serving_run_checked(at_context *ctx, const tn_serving_bench *b, tn_serving_buffers *x, at_plan *plan,
                                 const tn_serving_ref *ref, double *err);
const at_fp8_args *tn_serving_fp8_args(const at_shape *s, const tn_serving_buffers *x, at_fp8_args *a);
/* The batch's work: FLOPs of its sequences' visible pairs, or for decode (padded Q of at most 16
 * tokens) the K/V bytes its lengths read; what TFLOP/s or TB/s of a serving row divide. */
double tn_serving_work(const tn_serving_bench *b);

/* The shape, layout and lengths from bench's flags: lengths (NULL: every sequence kv_len long)
 * and page_size (0: not paged). With lengths and no explicit q_len Q is ragged with T_b = S_b
 * (prefill); with q_len Q is padded (decode, chunks). s holds the other flags' shape (batch for a
 * uniform draw). A usage error is printed and 0 returned when they do not fit together. */
int tn_serving_bench_setup(const char *lengths, int page_size, int q_len_given, const at_shape *s,
                           tn_serving_bench *out);
/* Run it: a process exit code (TN_EXIT_*). */
int tn_serving_bench_run(const tn_serving_bench *b);

#endif
