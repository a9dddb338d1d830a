/*
 * tune.h — the offline tuning run (tune.c) and its command (cmd_tune.c). Prefix tn_tune_.
 */
#ifndef AT_TUNER_TUNE_H
#define AT_TUNER_TUNE_H

#include <stddef.h>

#include "tuner/config.h"

typedef struct tn_tune_opts {
  const char *db_path;
  const char *exe;  /* the attntune binary the workers run */
  int force;        /* retune shapes already done */
  int jobs;         /* NVRTC threads, shared by the GPUs; 0: one per CPU */
  double watchdog_s; /* a worker silent this long (plus the shape's own time) is hung */
  int with_naive;   /* also verify and time the naive kernels (trial "naive"), as the codelab does;
                     * f32 shapes always do, it is all they run */
} tn_tune_opts;

/* The candidates a tuning run times for shape s on target: the generator's list (gen_enumerate;
 * for a ragged or paged shape v, gen_enumerate_serving with its page size and ragged tensors; v
 * NULL: padded) narrowed by cfg's search section and capped by budget.candidates, in the
 * generator's order. */
at_status tn_tune_candidates(const tn_config *cfg, const at_shape *s, const tn_serving_shape *v,
                             const gen_target *target, gen_variant *out, int *n_out);

/* 1 when cuDNN, measured fastest, may be stored as shape s's best: not for FP8 inputs, whose
 * cuDNN baseline writes FP8 output where plans write bf16 (tune.c's header). */
int tn_tune_cudnn_may_be_best(const at_shape *s);

/* Tune cfg's shapes on the given GPUs (one worker each); prints progress on stderr and the
 * best-vs-cuDNN table on stdout. Returns the exit code (130 when interrupted). */
int tn_tune_run(const tn_config *cfg, const tn_tune_opts *opts, const int *devices, int n_devices);


#endif
