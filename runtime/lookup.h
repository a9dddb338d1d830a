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
  int stale;              /* that row was measured with another cuDNN or NVRTC (why says which) */
} rt_lookup_step;

typedef struct rt_lookup {
  rt_lookup_step steps[RT_LOOKUP_MAX_STEPS];
  int n_steps;
  char skipped[768]; /* the steps that did not apply, and why */
} rt_lookup;

/* The chain for shape on now's GPU model: exact row -> nearest row of the same kind -> generator
 * default -> cuDNN -> naive; fused_only drops cuDNN and naive (and rows whose best is cuDNN).
 * now names the GPU model, this library's template version and the cuDNN and NVRTC versions of
 * this process ("" where one cannot be loaded).
 *
 * Rows measured with other kernel templates are skipped (named in `skipped`): the key's kernel
 * is no longer the one that was timed. Rows measured with another cuDNN or NVRTC
 * (cache_best_stale) are still used, since the implementation they name is the one that was
 * verified, but the step is marked stale and its why says what changed: the timing, or the
 * comparison with cuDNN it won, is old, and 'attntune tune' retimes it. cache may be NULL. */
at_status rt_lookup_chain(cache_db *cache, const cache_env *now, const gen_target *target, const at_shape *shape,
                          int fused_only, rt_lookup *out);

/* The chain for a serving layout: rt_lookup_chain for padded Q and K/V (layout NULL too); for
 * ragged or paged tensors that a generated kernel reads: the tuned row of the same shape and
 * layout (exact step: a row whose key is the plan's at_serving_key followed only by length
 * buckets, `attntune tune` on a ragged or paged config entry; of several length mixes the one
 * tuned at the longest lengths; its impl must be a variant of this layout and page size, or
 * cuDNN where it runs the layout; rows of padded shapes, of other layouts or page sizes are never
 * taken, and there is no nearest step), then the generator's default for the layout (paged
 * decode; ragged prefill: fa3's warp-specialized kernel or fa2), then cuDNN's ragged graph for
 * ragged Q with ragged or padded K/V in f16/bf16 (rt_cudnn_serving_supported), then the naive
 * kernels (neither when fused_only), with `skipped` saying why each missing step is missing,
 * naming the layout. */
at_status rt_lookup_chain_serving(cache_db *cache, const cache_env *now, const gen_target *target,
                                  const at_shape *shape, const at_serving_layout *layout, int fused_only,
                                  rt_lookup *out);

/* The generator's name for a layout's ragged tensors (gen_ragged): GEN_RAGGED_QKV for ragged Q and
 * K/V, GEN_RAGGED_Q for ragged Q with padded or paged K/V, GEN_RAGGED_NONE otherwise (no ragged
 * kernel reads padded Q with ragged K/V). */
int rt_serving_ragged(const at_serving_layout *layout);

/* Is row current for now? 0 when its templates are another build's (why says so: skip it);
 * else 1, with *stale and why saying whether, and how, its cuDNN or NVRTC differs from now's. */
int rt_row_usable(const cache_best *row, const cache_env *now, int *stale, char *why, size_t why_size);

#endif
