/*
 * timing.h — how every implementation is timed, the same way: warm-up launches first, then
 * `reps` launches enqueued back to back with an event between each two, behind memsets that keep
 * the GPU busy while they are enqueued, so the GPU runs them without gaps and each interval holds
 * one launch; the median interval is the result. Inputs
 * rotate among several sets so that small problems are not served from L2. Prefix tn_.
 */
#ifndef AT_TUNER_TIMING_H
#define AT_TUNER_TIMING_H

#include <stddef.h>

#include "runtime/rt.h"

typedef struct tn_timing_opts {
  int warmup; /* launches before timing */
  int reps;   /* timed launches */
  /* Optional: a device buffer that a few memsets fill before the first timed launch, so the GPU
   * is busy while the host enqueues and no interval holds the host's launch latency. */
  CUdeviceptr cover;
  size_t cover_words;
} tn_timing_opts;

typedef struct tn_timing {
  double median_ms, min_ms, max_ms;
  int reps;
} tn_timing;

/* Enqueue one launch on stream, reading input set `set`. */
typedef at_status (*tn_launch_fn)(void *user, int set, CUstream stream);

at_status tn_time_launches(tn_launch_fn launch, void *user, int n_sets, const tn_timing_opts *opts,
                           CUstream stream, tn_timing *out);

/* How many input sets of `bytes` each to rotate so that together they are at least twice the L2
 * (1 when one set already is), capped at max_sets. */
int tn_rotation_sets(size_t bytes, size_t l2_bytes, int max_sets);

#endif
