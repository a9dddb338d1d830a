/*
 * lookup.h — the lookup chain of the library, as a pure decision over a cache file: which
 * implementations a plan should try, in order, and why. No GPU is touched here, so tests can
 * check the chain on hand-made caches; runtime/api.c then tries the steps until one loads.
 */
#ifndef AT_RUNTIME_LOOKUP_H
#define AT_RUNTIME_LOOKUP_H

#include "attntune.h"
#include "cache/cache.h"
#include "generator/generator.h"

enum { RT_LOOKUP_MAX_STEPS = 5 };

typedef struct rt_lookup_step {
  at_choice choice;
  char impl[GEN_KEY_MAX]; /* a variant key, "cudnn" or "naive" */
  char why[512];
  char tuned_shape[160];  /* the cache row behind an exact or nearest step */
  double tuned_ms, cudnn_ms;
} rt_lookup_step;

typedef struct rt_lookup {
  rt_lookup_step steps[RT_LOOKUP_MAX_STEPS];
  int n_steps;
  char skipped[768]; /* the steps that did not apply, and why */
} rt_lookup;

/* The chain for shape on a GPU model: exact row -> nearest row of the same kind -> generator default
 * -> cuDNN -> naive; fused_only drops cuDNN and naive (and rows whose best is cuDNN). Rows measured
 * with another template version are skipped (named in `skipped`). cache may be NULL. */
at_status rt_lookup_chain(cache_db *cache, const char *gpu_model, const char *template_version,
                          const gen_target *target, const at_shape *shape, int fused_only,
                          rt_lookup *out);

#endif
