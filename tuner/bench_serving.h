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

#include "attntune.h"

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

/* The shape, layout and lengths from bench's flags: lengths (NULL: every sequence kv_len long)
 * and page_size (0: not paged). With lengths and no explicit q_len Q is ragged with T_b = S_b
 * (prefill); with q_len Q is padded (decode, chunks). s holds the other flags' shape (batch for a
 * uniform draw). A usage error is printed and 0 returned when they do not fit together. */
int tn_serving_bench_setup(const char *lengths, int page_size, int q_len_given, const at_shape *s,
                           tn_serving_bench *out);
/* Run it: a process exit code (TN_EXIT_*). */
int tn_serving_bench_run(const tn_serving_bench *b);

#endif
