/*
 * families.c — the gen_ functions that dispatch through the family table (table.c): constraints,
 * enumeration, defaults, launch descriptions and the per-family template versions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/family.h"

static at_status unknown_family(gen_family family)
{
  return at_fail(AT_ERR_INVALID, "unknown kernel family %d", (int)family);
}


/* ---- dispatch -------------------------------------------------------------------------------- */

at_status gen_variant_check(const gen_variant *v, const gen_target *target)
{
  const gen_family_ops *f = gen_family_row(v->family);
  if (!f) return unknown_family(v->family);
  if (!f->split_kv && v->splits != 0)
    return at_fail(AT_ERR_INVALID, "%s variants have no split count (got %d)", f->name, v->splits);
  if (!f->warp_specialized && v->ws != 0)
    return at_fail(AT_ERR_INVALID, "%s variants are not warp-specialized (got ws %d)", f->name, v->ws);
  if (!f->wgmma_rows && v->wg != 0)
    return at_fail(AT_ERR_INVALID, "%s has no wgmma-rows variants (got wg %d)", f->name, v->wg);
  if (v->wg < 0 || v->wg > 3)
    return at_fail(AT_ERR_INVALID, "wg %d is not 0, 1 (.wg), 2 (.wgi) or 3 (.wgi3)", v->wg);
  if (!f->warp_specialized && v->vt != 0)
    return at_fail(AT_ERR_INVALID, "%s has no V^T-ahead variants (got vt %d)", f->name, v->vt);
  if (!f->warp_specialized && v->persistent != 0)
    return at_fail(AT_ERR_INVALID, "%s has no persistent variants (got persistent %d)", f->name, v->persistent);
  if (!f->warp_specialized && v->tail_wave != 0)
    return at_fail(AT_ERR_INVALID, "%s has no tail-split variants (got tail wave %d)", f->name, v->tail_wave);
  if (!f->warp_specialized && v->q_regs != 0)
    return at_fail(AT_ERR_INVALID, "%s has no Q-in-registers variants (got q_regs %d)", f->name, v->q_regs);
  if (v->spec.page_size != 0 && !f->paged)
    return at_fail(AT_ERR_INVALID, "%s variants read contiguous K and V (got page size %d)", f->name,
                   v->spec.page_size);
  if (v->spec.page_size != 0 && !at_page_size_allowed(v->spec.page_size))
    return at_fail(AT_ERR_INVALID, "page size %d is not one of %s", v->spec.page_size, at_page_sizes_text());
  if (v->spec.ragged != 0 && (!f->ragged || !gen_ragged_name(v->spec.ragged)))
    return at_fail(AT_ERR_INVALID, "%s variants cannot read ragged layout %d", f->name, v->spec.ragged);
  at_status rc = gen_refuse_packed_paged(v->spec.page_size, v->spec.ragged);
  if (rc != AT_OK) return rc;
  /* K and V in another dtype than Q: only where the family's spec allows it (decode). */
  if (v->spec.kv_dtype != AT_KV_SAME && f->spec_check(&v->spec) != AT_OK) return AT_ERR_INVALID;
  return f->check(v, target);
}

int gen_threads(const gen_variant *v)
{
  const gen_family_ops *f = gen_family_row(v->family);
  return f ? f->threads(v) : 0;
}

int gen_smem_bytes(const gen_variant *v)
{
  const gen_family_ops *f = gen_family_row(v->family);
  return f ? f->smem_bytes(v) : 0;
}

int gen_register_estimate(const gen_variant *v)
{
  const gen_family_ops *f = gen_family_row(v->family);
  return f ? f->register_estimate(v) : 0;
}

at_status gen_enumerate(const at_shape *shape, const gen_target *target, gen_variant *out, int cap,
                        int *n_out)
{
  return gen_enumerate_out(shape, at_dtype_default_out(shape->dtype), target, out, cap, n_out);
}

static at_status enumerate_families(const at_shape *shape, at_dtype out_dtype, int page_size, int ragged,
                                    const gen_target *target, gen_variant *out, int cap, int *n_out);

at_status gen_enumerate_out(const at_shape *shape, at_dtype out_dtype, const gen_target *target,
                            gen_variant *out, int cap, int *n_out)
{
  return enumerate_families(shape, out_dtype, 0, GEN_RAGGED_NONE, target, out, cap, n_out);
}

/* Why no variant gathers pages for this shape, where the shape itself is fine. */
static at_status refuse_paged(const at_shape *shape, int page_size)
{
  char t[48] = "without a query length (T unknown)";
  if (shape->q_len > 0) snprintf(t, sizeof t, "for T = %d", shape->q_len);
  return at_fail(AT_ERR_UNSUPPORTED,
                 "no generated variant reads K/V in pages of %d %s for head dim %d %s: paged K/V runs on the "
                 "decode family for queries of 1 to %d tokens, on fa2 for longer or ragged ones, and on fa3's "
                 "warp-specialized 16-bit kernel for those with pages of 16 tokens or more; the naive kernels "
                 "run it)",
                 page_size, t, shape->head_dim, at_dtypes_name(shape->dtype, shape->kv_dtype), GEN_DECODE_MAX_T);
}

at_status gen_enumerate_paged(const at_shape *shape, int page_size, const gen_target *target, gen_variant *out,
                              int cap, int *n_out)
{
  return gen_enumerate_serving(shape, page_size, GEN_RAGGED_NONE, target, out, cap, n_out);
}

/* Why no variant reads these ragged tensors, where the shape itself is fine. */
static at_status refuse_ragged(const at_shape *shape, int page_size, int ragged, const gen_target *target)
{
  const char *what = ragged != GEN_RAGGED_Q ? "ragged Q and K/V" : page_size ? "ragged Q with paged K/V" : "ragged Q with padded K/V";
  return at_fail(AT_ERR_UNSUPPORTED,
                 "no generated variant reads %s tensors (.%s) for head dim %d %s on %s (fa2 and fa3's "
                 "warp-specialized kernel run ragged prefill, also with paged K/V; the naive kernels run it)",
                 what, gen_ragged_name(ragged), shape->head_dim, at_dtype_name(shape->dtype), target->arch);
}

at_status gen_enumerate_serving(const at_shape *shape, int page_size, int ragged, const gen_target *target,
                                gen_variant *out, int cap, int *n_out)
{
  at_status rc =
      enumerate_families(shape, at_dtype_default_out(shape->dtype), page_size, ragged, target, out, cap, n_out);
  if (rc == AT_OK && ragged && *n_out == 0) return refuse_ragged(shape, page_size, ragged, target);
  if (rc == AT_OK && page_size && *n_out == 0) return refuse_paged(shape, page_size);
  return rc;
}

static at_status enumerate_families(const at_shape *shape, at_dtype out_dtype, int page_size, int ragged,
                                    const gen_target *target, gen_variant *out, int cap, int *n_out)
{
  at_status rc = AT_OK, last_refusal = AT_OK;
  char refusal[512] = "";
  int n = 0, any_spec = 0;
  *n_out = 0;
  int n_order = 0;
  const gen_family *order = gen_family_order(&n_order);
  for (int i = 0; i < n_order; i++) {
    const gen_family_ops *f = gen_family_row(order[i]);
    gen_spec spec;
    if (!f->target_ok(target)) continue;
    if ((rc = gen_spec_from_shape_serving(order[i], shape, out_dtype, page_size, ragged, &spec)) != AT_OK) {
      /* The family declines the shape; another may run it. Keep the reason of the last (the most
       * general family, fa2) for the end; for an FP8 KV cache or paged K/V the first's (decode,
       * the one family that reads it: the others only say they do not). */
      if (last_refusal == AT_OK || (at_shape_kv_dtype(shape) == shape->dtype && !page_size))
        snprintf(refusal, sizeof refusal, "%s", at_last_error());
      last_refusal = rc;
      continue;
    }
    any_spec = 1;
    if ((rc = f->enumerate(&spec, target, shape, out, cap, &n)) != AT_OK) return rc;
  }
  at_clear_error(); /* the refusals above are expected, not errors */
  if (!any_spec && last_refusal != AT_OK) return at_fail(last_refusal, "%s", refusal);
  if (n == 0 && ragged) return refuse_ragged(shape, page_size, ragged, target);
  if (n == 0 && page_size) return refuse_paged(shape, page_size);
  if (n == 0) {
    const at_dtype kv = at_shape_kv_dtype(shape);
    if (kv != shape->dtype && !(shape->q_len >= 1 && shape->q_len <= GEN_DECODE_MAX_T)) {
      char t[48] = "without a query length (T unknown)";
      if (shape->q_len > 0) snprintf(t, sizeof t, "for T = %d", shape->q_len);
      return at_fail(AT_ERR_UNSUPPORTED,
                     "no generated variant reads %s K/V with %s Q %s: an FP8 KV cache runs on the decode family "
                     "only, for queries of 1 to %d tokens (fa2 and fa3 read K and V in the dtype of Q)",
                     at_dtype_name(kv), at_dtype_name(shape->dtype), t, GEN_DECODE_MAX_T);
    }
    if (at_dtype_is_fp8(shape->dtype) && !gen_target_has_fp8(target))
      return at_fail(AT_ERR_UNSUPPORTED,
                     "no %s variants for %s: FP8 needs sm_89 or newer (mma.sync m16n8k32 with FP8 operands)",
                     at_dtype_name(shape->dtype), target->arch);
    return at_fail(AT_ERR_UNSUPPORTED,
                   "no generated variant fits head dim %d %s on %s (shared memory %d bytes, at most 255 "
                   "registers per thread without spills)",
                   shape->head_dim, at_dtypes_name(shape->dtype, shape->kv_dtype), target->arch,
                   target->smem_limit);
  }
  *n_out = n;
  return AT_OK;
}

/* Ragged tensors: the first family in gen_family_order whose default applies (fa3's is its
 * warp-specialized kernel, on sm_90a for 16-bit inputs), else the first variant listed. */
static at_status default_variant_ragged(const at_shape *shape, int page_size, int ragged, const gen_target *target,
                                        gen_variant *out)
{
  int n_order = 0;
  const gen_family *order = gen_family_order(&n_order);
  for (int i = 0; i < n_order; i++) {
    const gen_family_ops *f = gen_family_row(order[i]);
    gen_spec spec;
    if (!f->ragged || !f->target_ok(target)) continue;
    if (gen_spec_from_shape_serving(order[i], shape, at_dtype_default_out(shape->dtype), page_size, ragged, &spec) !=
        AT_OK)
      continue;
    if (f->default_variant(&spec, target, shape, out)) {
      at_clear_error();
      return AT_OK;
    }
  }
  gen_variant all[GEN_MAX_VARIANTS];
  int n = 0;
  at_shape any_len = *shape;
  any_len.q_len = any_len.kv_len = 0;
  at_status rc = gen_enumerate_serving(&any_len, page_size, ragged, target, all, GEN_MAX_VARIANTS, &n);
  if (rc != AT_OK) return rc;
  *out = all[0];
  return AT_OK;
}

at_status gen_default_variant_serving(const at_shape *shape, int page_size, int ragged, const gen_target *target,
                                      gen_variant *out)
{
  if (ragged == GEN_RAGGED_NONE) return gen_default_variant_paged(shape, page_size, target, out);
  at_status rc = gen_refuse_packed_paged(page_size, ragged);
  if (rc != AT_OK) return rc;
  return default_variant_ragged(shape, page_size, ragged, target, out);
}

at_status gen_default_variant_paged(const at_shape *shape, int page_size, const gen_target *target,
                                    gen_variant *out)
{
  if (page_size == 0) return gen_default_variant(shape, target, out);
  int n_order = 0;
  const gen_family *order = gen_family_order(&n_order);
  for (int i = 0; i < n_order; i++) {
    const gen_family_ops *f = gen_family_row(order[i]);
    gen_spec spec;
    if (!f->paged || !f->target_ok(target)) continue;
    /* A family declining the shape (dtype, head dim) leaves it to the next; the listing below
     * says why none takes it. */
    if (gen_spec_from_shape_paged(order[i], shape, at_dtype_default_out(shape->dtype), page_size, &spec) != AT_OK)
      continue;
    if (f->default_variant(&spec, target, shape, out)) {
      at_clear_error();
      return AT_OK;
    }
  }
  /* No preferred tile fits: the first listed variant (gen_enumerate_paged says why none is). */
  gen_variant all[GEN_MAX_VARIANTS];
  int n = 0;
  at_status rc = gen_enumerate_paged(shape, page_size, target, all, GEN_MAX_VARIANTS, &n);
  if (rc != AT_OK) return rc;
  *out = all[0];
  return AT_OK;
}

at_status gen_default_variant(const at_shape *shape, const gen_target *target, gen_variant *out)
{
  at_status rc = AT_OK;
  int n_order = 0;
  const gen_family *order = gen_family_order(&n_order);
  for (int i = 0; i < n_order; i++) {
    const gen_family_ops *f = gen_family_row(order[i]);
    gen_spec spec;
    if (!f->target_ok(target)) continue;
    if (gen_spec_from_shape(order[i], shape, &spec) != AT_OK) continue;
    if (f->default_variant(&spec, target, shape, out)) {
      at_clear_error();
      return AT_OK;
    }
  }
  /* No family prefers a tile: the first variant any family lists, for any sequence length (but
   * an FP8 KV cache's own: decode, its one family, lists variants only for T <= 16). */
  gen_variant all[GEN_MAX_VARIANTS];
  int n = 0;
  at_shape any_len = *shape;
  if (at_shape_kv_dtype(shape) == shape->dtype) any_len.q_len = any_len.kv_len = 0;
  if ((rc = gen_enumerate(&any_len, target, all, GEN_MAX_VARIANTS, &n)) != AT_OK) return rc;
  *out = all[0];
  return AT_OK;
}

at_status gen_launch_describe(const gen_variant *v, const at_shape *shape, gen_launch_desc *out)
{
  const gen_family_ops *f = gen_family_row(v->family);
  memset(out, 0, sizeof *out);
  if (!f) return unknown_family(v->family);
  /* The layout is the caller's to match (gen_variant_matches_paged when the plan is made): a paged
   * variant launches for the shape's maxima with its own page size. */
  at_status rc = gen_variant_matches_serving(v, shape, v->spec.page_size, v->spec.ragged);
  if (rc != AT_OK) return rc;
  if (shape->batch < 0 || shape->q_len < 0 || shape->kv_len < 0)
    return at_fail(AT_ERR_INVALID, "negative size (batch %d, T %d, S %d)", shape->batch, shape->q_len,
                   shape->kv_len);
  if (shape->q_heads > 65535)
    return at_fail(AT_ERR_UNSUPPORTED, "%d q heads exceed the grid's y limit 65535", shape->q_heads);
  if (shape->batch > 65535)
    return at_fail(AT_ERR_UNSUPPORTED, "batch %d exceeds the grid's z limit 65535", shape->batch);
  return f->describe_launch(v, shape, out);
}

/* ---- template versions ----------------------------------------------------------------------- */

static unsigned long long fnv1a(unsigned long long h, const char *name)
{
  size_t n = 0;
  const char *text = at_template_text(name, &n);
  for (size_t i = 0; text && i < n; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
  return h;
}

static void version_of(const char *label, const char *template_file, char *buf, size_t size)
{
  unsigned long long h = fnv1a(fnv1a(1469598103934665603ull, "common.cuh"), template_file);
  snprintf(buf, size, "%s-%08llx", label, h & 0xffffffffull);
}

void gen_family_version(gen_family family, char *buf, size_t size)
{
  const gen_family_ops *f = gen_family_row(family);
  if (!f) {
    snprintf(buf, size, "?");
    return;
  }
  version_of(f->name, f->template_file, buf, size);
}

void gen_templates_version(char *buf, size_t size)
{
  size_t len = 0;
  buf[0] = '\0';
  for (int f = 0; f < GEN_FAMILY_COUNT; f++) {
    char part[48];
    gen_family_version((gen_family)f, part, sizeof part);
    len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s%s", f ? "." : "", part);
  }
  char naive[48];
  version_of("naive", "naive.cu", naive, sizeof naive);
  if (len < size) snprintf(buf + len, size - len, ".%s", naive);
}

/* The part of a joined version that starts with "<label>-", copied to part; 0 when absent. */
static int version_part(const char *joined, const char *label, char *part, size_t size)
{
  size_t n = strlen(label);
  for (const char *p = joined; p && *p;) {
    const char *end = strchr(p, '.');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > n && strncmp(p, label, n) == 0 && p[n] == '-') {
      snprintf(part, size, "%.*s", (int)len, p);
      return 1;
    }
    p = end ? end + 1 : NULL;
  }
  return 0;
}

int gen_version_current(const char *recorded, const char *now, const char *impl, char *why, size_t why_size)
{
  char want[48], had[48];
  if (why_size) why[0] = '\0';
  if (strncmp(recorded, "tpl-", 4) == 0) {
    snprintf(why, why_size,
             "tuned with templates %s, one version for all families from an older attntune (this library "
             "versions each family: %s); stale, retune",
             recorded, now);
    return 0;
  }
  const char *label = NULL;
  char family[16];
  if (strcmp(impl, "naive") == 0) {
    label = "naive";
  } else if (strcmp(impl, "cudnn") != 0) {
    const char *dot = strchr(impl, '.');
    size_t n = dot ? (size_t)(dot - impl) : strlen(impl);
    snprintf(family, sizeof family, "%.*s", (int)(n < sizeof family ? n : sizeof family - 1), impl);
    label = family;
  }
  if (!label) { /* cuDNN measured fastest against every family: any change may beat it now */
    if (strcmp(recorded, now) == 0) return 1;
    snprintf(why, why_size, "cuDNN measured fastest against kernels %s, this library has %s; stale, retune",
             recorded, now);
    return 0;
  }
  if (!version_part(now, label, want, sizeof want)) {
    snprintf(why, why_size, "%s is not a family of this library", label);
    return 0;
  }
  if (version_part(recorded, label, had, sizeof had) && strcmp(had, want) == 0) return 1;
  snprintf(why, why_size, "tuned with %s kernels %s, this library has %s; stale, retune", label,
           version_part(recorded, label, had, sizeof had) ? had : "(none)", want);
  return 0;
}
