/*
 * core.h — what every layer of attntune shares and that needs neither CUDA nor SQLite: the
 * thread-local error message, the dtype and mask tables, arch names. Prefix at_ (the public
 * shape functions of include/attntune.h live here too: core/shape.c).
 *
 * Every function that can fail returns at_status and leaves a message for the calling thread
 * (at_fail), which at_last_error() reads:
 *
 *     if (head_dim % 8 != 0) return at_fail(AT_ERR_INVALID, "head dim %d is not a multiple of 8", head_dim);
 *
 * Layers (docs/design.md): core/ and include/ at the bottom; generator/ and cache/ include only these;
 * runtime/ adds CUDA; tuner/ is on top. tests/layers_test.sh enforces it.
 */
#ifndef AT_CORE_CORE_H
#define AT_CORE_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "attntune.h"

/* ---- errors ------------------------------------------------------------------------------ */

/* Store a formatted message for the calling thread and return code. */
at_status at_fail(at_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepend context to the current message ("while compiling fa2...: <old message>"). */
at_status at_fail_context(at_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void at_clear_error(void);

/* ---- dtypes ------------------------------------------------------------------------------ */

/* One row per at_dtype: what every layer asks of a dtype. Adding a dtype is one row here (and
 * its conversions in templates/common.cuh and core/numerics.c or runtime/fp8.c). */
typedef struct at_dtype_info {
  const char *name;      /* "bf16": keys, configs, messages */
  size_t size;           /* bytes per element */
  int is_fp8;            /* e4m3 / e5m2: per-tensor descales, FP8 MMAs */
  double tolerance;      /* default relative L2 error against the naive reference (docs/design.md) */
  at_dtype default_out;  /* output dtype when none is asked for */
} at_dtype_info;

/* The row of dtype, or NULL for a value that is not an at_dtype. */
const at_dtype_info *at_dtype_info_of(at_dtype dtype);
int at_dtype_is_fp8(at_dtype dtype);
double at_dtype_tolerance(at_dtype dtype);
at_dtype at_dtype_default_out(at_dtype dtype);
/* "f16, bf16, e4m3, e5m2" style list of every name, for messages. */
const char *at_dtype_names(void);

/* The dtypes of a shape as one word, the spelling of shape keys, variant keys and the cache's
 * dtype column: "bf16", or "bf16.kve4m3" where K and V are in another dtype than Q
 * (at_shape.kv_dtype; AT_KV_SAME or the dtype itself: the plain name). A static string; "?" for
 * values that are not at_dtypes. */
const char *at_dtypes_name(at_dtype dtype, at_dtype kv_dtype);
/* Parse that word back: dtype, and kv_dtype AT_KV_SAME unless ".kv<dtype>" names another one. */
at_status at_dtypes_parse(const char *text, at_dtype *dtype, at_dtype *kv_dtype);

/* ---- serving layouts (core/serving.c; the public part is in attntune.h) ----------------------- */

/* "1, 16, 32, 64, 128, 256": the page sizes at_page_size_allowed takes, for messages. */
const char *at_page_sizes_text(void);
/* Copy a size-versioned public struct (its first field a size_t struct_size) into dst, this
 * library's version of known_size bytes: refused when src is NULL, struct_size is 0 or below
 * min_size (the first version's size), or when a larger struct (a later header's) has a byte
 * that is not 0 past known_size; fields the caller's version lacks are 0 in dst. type names the
 * struct in messages. */
at_status at_versioned_copy(const char *type, const void *src, size_t min_size, size_t known_size, void *dst);
/* A checked copy of a serving layout for shape (at_serving_layout_check's rules). */
at_status at_serving_layout_copy(const at_shape *shape, const at_serving_layout *given, at_serving_layout *out);
/* Padded Q and padded K/V: an ordinary plan's tensors. */
int at_serving_is_padded(const at_serving_layout *layout);
/* What the host sees of a call's metadata (t already copied): exactly the pointers and counts the
 * layout uses are given (pointers non-NULL, totals >= 0, num_pages >= 1), the others NULL / 0,
 * and the packed tensors and pools within the element limit. */
at_status at_serving_fields_check(const at_shape *shape, const at_serving_layout *layout,
                                  const at_serving_tensors *t);

/* Length mixes of ragged and paged batches, as configs and `bench --lengths` give them: n
 * lengths drawn uniformly from min..max (inclusive) by a stream seeded with seed (the same
 * lengths everywhere); or text "L1,L2,..." (n = the count, at most cap) or
 * "uniform:MIN:MAX[:SEED]" (n = batch, seed 1 when not given). */
at_status at_lengths_uniform(int min, int max, uint64_t seed, int n, int *out);
at_status at_lengths_parse(const char *text, int batch, int cap, int *out, int *n);
/* The key of a serving call's shape: at_shape_key (the maxima), then for ragged or paged
 * tensors the layouts and page size and a length bucket per side whose lengths vary (the power of
 * two at or above the mean length of the batch):
 * "b8.t4096.s4096.hq16.hkv16.d128.bf16.causal-br.qragged.kvpaged16.lq2048.lkv2048". Padded
 * tensors (or layout NULL) give at_shape_key alone. q_lens / kv_lens (B each) may be NULL: no
 * bucket for that side. */
void at_serving_key(const at_shape *shape, const at_serving_layout *layout, const int *q_lens, const int *kv_lens,
                    char *buf, size_t size);
/* The part of at_serving_key after at_shape_key (".qragged.kvpaged16.lq2048.lkv2048"; "" for padded
 * tensors): what a cache row's serving field holds. */
void at_serving_part(const at_shape *shape, const at_serving_layout *layout, const int *q_lens, const int *kv_lens,
                     char *buf, size_t size);

/* ---- arch names -------------------------------------------------------------------------- */

/* The NVRTC target for a compute capability: "sm_90a" for 9.0 (wgmma and setmaxnreg exist only
 * on the arch-specific Hopper target), "sm_<major><minor>" else. */
void at_arch_for_cc(int cc_major, int cc_minor, char arch[16]);
/* Parse "sm_80", "sm_90a", "compute_90a"; fills the compute capability and whether it is an
 * arch-specific ('a') target. sm_80 and newer only. */
at_status at_arch_parse(const char *arch, int *cc_major, int *cc_minor, int *arch_specific);

/* ---- templates --------------------------------------------------------------------------- */

/* Text of an embedded template file ("naive.cu", "common.cuh"), or NULL (the build embeds
 * templates/ as strings: cmake/embed_templates.cmake). */
const char *at_template_text(const char *name, size_t *size);

#endif /* AT_CORE_CORE_H */
