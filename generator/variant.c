/*
 * variant.c — shape specs and the stable variant keys (format and parse), entry point names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/family.h"

at_status gen_spec_from_shape(gen_family family, const at_shape *shape, gen_spec *out)
{
  return gen_spec_from_shape_out(family, shape, at_dtype_default_out(shape->dtype), out);
}

at_status gen_spec_from_shape_out(gen_family family, const at_shape *shape, at_dtype out_dtype,
                                  gen_spec *out)
{
  return gen_spec_from_shape_paged(family, shape, out_dtype, 0, out);
}

/* Paged K/V only where the family gathers pages, in the page sizes of the serving layouts. */
static at_status check_page_size(const gen_family_ops *f, int page_size)
{
  if (page_size == 0) return AT_OK;
  if (!at_page_size_allowed(page_size))
    return at_fail(AT_ERR_INVALID, "page size %d is not one of %s", page_size, at_page_sizes_text());
  if (!f->paged)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "%s reads contiguous K and V, not pages (page size %d): paged K/V runs on the decode family "
                   "(queries of 1 to %d tokens), fa2 and fa3 (longer queries, and ragged Q) and the naive kernels",
                   f->name, page_size, GEN_DECODE_MAX_T);
  return AT_OK;
}

const char *gen_ragged_name(int ragged)
{
  static const char *const NAMES[] = {"", "rg", "rgq"};
  return ragged >= 0 && ragged < 3 ? NAMES[ragged] : NULL;
}

at_status gen_refuse_packed_paged(int page_size, int ragged)
{
  if (!page_size || ragged != GEN_RAGGED_QKV) return AT_OK;
  return at_fail(AT_ERR_INVALID, "paged K/V (page size %d) is not packed K/V (.rg): ragged Q with paged K/V is .rgq",
                 page_size);
}

/* Ragged tensors only where the family finds its rows through cu_seqlens; with pages only ragged
 * Q (.rgq: paged K/V is not packed) and only where the family also gathers pages. */
static at_status check_ragged(const gen_family_ops *f, int page_size, int ragged)
{
  if (ragged == GEN_RAGGED_NONE) return AT_OK;
  if (!gen_ragged_name(ragged)) return at_fail(AT_ERR_INVALID, "unknown ragged layout %d", ragged);
  if (!f->ragged)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "%s reads padded tensors, not ragged ones (.%s): ragged prefill runs on fa2, fa3's "
                   "warp-specialized kernel and the naive kernels",
                   f->name, gen_ragged_name(ragged));
  at_status rc = gen_refuse_packed_paged(page_size, ragged);
  if (rc != AT_OK) return rc;
  if (page_size && !f->paged)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "%s has no kernel for ragged Q with paged K/V (page size %d); fa2 and the naive kernels run it",
                   f->name, page_size);
  return AT_OK;
}

at_status gen_spec_from_shape_paged(gen_family family, const at_shape *shape, at_dtype out_dtype, int page_size,
                                    gen_spec *out)
{
  return gen_spec_from_shape_serving(family, shape, out_dtype, page_size, GEN_RAGGED_NONE, out);
}

at_status gen_spec_from_shape_serving(gen_family family, const at_shape *shape, at_dtype out_dtype, int page_size,
                                      int ragged, gen_spec *out)
{
  const gen_family_ops *f = gen_family_row(family);
  memset(out, 0, sizeof *out);
  if (!f) return at_fail(AT_ERR_INVALID, "unknown kernel family %d", (int)family);
  if (shape->q_heads < 1 || shape->kv_heads < 1)
    return at_fail(AT_ERR_INVALID, "head counts must be positive (q heads %d, kv heads %d)",
                   shape->q_heads, shape->kv_heads);
  if (shape->q_heads % shape->kv_heads != 0)
    return at_fail(AT_ERR_INVALID, "q heads %d are not a multiple of kv heads %d", shape->q_heads,
                   shape->kv_heads);
  if (shape->mask != AT_MASK_NONE && shape->mask != AT_MASK_CAUSAL_TL && shape->mask != AT_MASK_CAUSAL_BR)
    return at_fail(AT_ERR_INVALID, "unknown mask %d", (int)shape->mask);
  at_status rc = check_page_size(f, page_size);
  if (rc == AT_OK) rc = check_ragged(f, page_size, ragged);
  if (rc != AT_OK) return rc;
  const at_dtype kv = at_shape_kv_dtype(shape);
  gen_spec spec = {shape->dtype, shape->head_dim, shape->mask, shape->q_heads / shape->kv_heads,
                   shape->with_lse ? 1 : 0, out_dtype, kv == shape->dtype ? AT_KV_SAME : kv, page_size, ragged};
  rc = f->spec_check(&spec);
  if (rc != AT_OK) return rc;
  *out = spec;
  return AT_OK;
}

at_dtype gen_spec_kv_dtype(const gen_spec *spec)
{
  return spec->kv_dtype == AT_KV_SAME ? spec->dtype : spec->kv_dtype;
}

at_status gen_variant_matches(const gen_variant *v, const at_shape *shape)
{
  return gen_variant_matches_paged(v, shape, 0);
}

at_status gen_variant_matches_paged(const gen_variant *v, const at_shape *shape, int page_size)
{
  return gen_variant_matches_serving(v, shape, page_size, GEN_RAGGED_NONE);
}

at_status gen_variant_matches_serving(const gen_variant *v, const at_shape *shape, int page_size, int ragged)
{
  gen_spec spec;
  at_status rc = gen_spec_from_shape_serving(v->family, shape, v->spec.out_dtype, page_size, ragged, &spec);
  if (rc != AT_OK) return rc;
  if (memcmp(&spec, &v->spec, sizeof spec) != 0) {
    static const char *const RAGGED_TEXT[] = {"padded", "ragged Q and K/V", "ragged Q, padded K/V"};
    char key[GEN_KEY_MAX] = "?", pages[48] = "contiguous K/V";
    gen_variant_key(v, key, sizeof key);
    if (page_size) snprintf(pages, sizeof pages, "K/V in pages of %d", page_size);
    return at_fail(AT_ERR_INVALID,
                   "variant %s does not fit shape (dtype %s, head dim %d, mask %s, GQA %d, lse %d, %s, %s)", key,
                   at_dtypes_name(spec.dtype, spec.kv_dtype), spec.head_dim, at_mask_name(spec.mask),
                   spec.gqa, spec.with_lse, pages, RAGGED_TEXT[spec.ragged]);
  }
  return AT_OK;
}

const char *gen_family_name(gen_family family)
{
  const gen_family_ops *f = gen_family_row(family);
  return f ? f->name : NULL;
}

int gen_family_of_name(const char *name, size_t len)
{
  for (int f = 0; f < GEN_FAMILY_COUNT; f++) {
    const char *family = gen_family_row((gen_family)f)->name;
    if (name && strlen(family) == len && strncmp(name, family, len) == 0) return f;
  }
  return -1;
}

int gen_is_variant_key(const char *name)
{
  const char *dot = name ? strchr(name, '.') : NULL;
  return dot && gen_family_of_name(name, (size_t)(dot - name)) >= 0;
}

/* Decode's wgmma-rows suffix by gen_variant.wg (0 none, 1 .wg, 2 .wgi, 3 .wgi3), written and
 * parsed from this one table. */
static const char *const WG_SUFFIX[] = {"", ".wg", ".wgi", ".wgi3"};
#define WG_KINDS ((int)(sizeof WG_SUFFIX / sizeof WG_SUFFIX[0]))

static int wg_of_suffix(const char *field)
{
  for (int wg = 1; wg < WG_KINDS; wg++)
    if (strcmp(field, WG_SUFFIX[wg] + 1) == 0) return wg;
  return 0;
}

at_status gen_variant_key(const gen_variant *v, char *buf, size_t size)
{
  const gen_family_ops *f = gen_family_row(v->family);
  const char *family = f ? f->name : NULL;
  if (!family) return at_fail(AT_ERR_INVALID, "unknown kernel family %d", (int)v->family);
  /* The output dtype is spelled only where it is a choice (FP8 inputs). */
  char out[16] = "", splits[32] = "", pages[16] = "", ragged[8] = "", tail[16] = "";
  const char *ws = v->ws == 2 ? ".wspp" : v->ws ? ".ws" : "";
  const char *pers = v->persistent ? ".pers" : "", *vt = v->vt ? ".vt" : "";
  const char *qr = v->q_regs ? ".qr" : "";
  if (at_dtype_is_fp8(v->spec.dtype)) snprintf(out, sizeof out, ".o%s", at_dtype_name(v->spec.out_dtype));
  /* Only split-KV variants have a split count; a 0 elsewhere keeps the older families' keys. */
  static const char *const merge_suffix[] = {"", ".lc", ".cl"};
  const char *merge = v->merge >= 0 && v->merge < 3 ? merge_suffix[v->merge] : ".merge?";
  const char *wg = v->wg >= 0 && v->wg < WG_KINDS ? WG_SUFFIX[v->wg] : ".wg?";
  if (v->splits) snprintf(splits, sizeof splits, ".sp%d%s%s", v->splits, merge, wg);
  if (v->tail_wave) snprintf(tail, sizeof tail, ".tw%d", v->tail_wave);
  /* Paged K/V is part of the spec, next to the dtypes; contiguous keys do not change. */
  if (v->spec.page_size) snprintf(pages, sizeof pages, ".pg%d", v->spec.page_size);
  /* Ragged tensors likewise; padded keys do not change. */
  if (v->spec.ragged && !gen_ragged_name(v->spec.ragged))
    return at_fail(AT_ERR_INVALID, "unknown ragged layout %d", v->spec.ragged);
  if (v->spec.ragged) snprintf(ragged, sizeof ragged, ".%s", gen_ragged_name(v->spec.ragged));
  int n = snprintf(buf, size, "%s.%s%s%s.d%d.%s.g%d.bm%d.bn%d.w%d.s%d%s%s%s%s%s%s%s%s", family,
                   at_dtypes_name(v->spec.dtype, v->spec.kv_dtype), pages, ragged, v->spec.head_dim,
                   at_mask_name(v->spec.mask),
                   v->spec.gqa, v->block_m, v->block_n, v->warps, v->stages, splits, ws, vt, qr, tail, pers, out,
                   v->spec.with_lse ? ".lse" : "");
  if (n < 0 || (size_t)n >= size)
    return at_fail(AT_ERR_INVALID, "variant key needs %d bytes, buffer has %zu", n, size);
  return AT_OK;
}

at_status gen_entry_name(const gen_variant *v, char *buf, size_t size)
{
  at_status rc = gen_variant_key(v, buf, size);
  if (rc != AT_OK) return rc;
  for (char *p = buf; *p; p++)
    if (*p == '.' || *p == '-') *p = '_';
  return AT_OK;
}

at_status gen_entry_names(const gen_variant *v, char names[GEN_MAX_KERNELS][GEN_ENTRY_MAX], int *n)
{
  const gen_family_ops *f = gen_family_row(v->family);
  *n = 0;
  if (!f) return at_fail(AT_ERR_INVALID, "unknown kernel family %d", (int)v->family);
  at_status rc = gen_entry_name(v, names[0], GEN_ENTRY_MAX);
  if (rc != AT_OK) return rc;
  *n = 1;
  const char *const *extra = f->extra_entries ? f->extra_entries(v) : NULL;
  for (int i = 0; extra && extra[i]; i++) {
    if (*n == GEN_MAX_KERNELS)
      return at_fail(AT_ERR_INVALID, "family %s lists more than %d kernels", f->name, GEN_MAX_KERNELS);
    memcpy(names[*n], names[0], GEN_ENTRY_MAX);
    size_t used = strlen(names[*n]);
    snprintf(names[*n] + used, GEN_ENTRY_MAX - used, "%s", extra[i]);
    (*n)++;
  }
  return AT_OK;
}

/* "<prefix><positive int>" exactly, e.g. "bm128". */
static int parse_field(const char *field, const char *prefix, int *value)
{
  size_t n = strlen(prefix);
  if (strncmp(field, prefix, n) != 0) return 0;
  const char *digits = field + n;
  if (*digits < '1' || *digits > '9') return 0;
  char *end;
  long x = strtol(digits, &end, 10);
  if (*end != '\0' || x > 1 << 20) return 0;
  *value = (int)x;
  return 1;
}

at_status gen_variant_parse(const char *key, gen_variant *out)
{
  char buf[GEN_KEY_MAX];
  char *fields[16];
  int n = 0;
  memset(out, 0, sizeof *out);
  if (!key || strlen(key) >= sizeof buf)
    return at_fail(AT_ERR_INVALID, "variant key '%s' is too long or missing", key ? key : "(null)");
  strcpy(buf, key);
  for (char *save = NULL, *f = strtok_r(buf, ".", &save); f; f = strtok_r(NULL, ".", &save)) {
    if (n == 16) return at_fail(AT_ERR_INVALID, "variant key '%s' has too many fields", key);
    fields[n++] = f;
  }
  /* K and V in another dtype (kv<dtype> after the dtype): read, then the rest as without it. */
  int has_kv = n >= 3 && strncmp(fields[2], "kv", 2) == 0;
  if (has_kv && at_dtype_parse(fields[2] + 2, &out->spec.kv_dtype) != AT_OK)
    return at_fail(AT_ERR_INVALID, "variant key '%s': unknown K/V dtype '%s' (expected kv<dtype>, e.g. kve4m3)",
                   key, fields[2]);
  if (has_kv) {
    for (int i = 2; i + 1 < n; i++) fields[i] = fields[i + 1];
    n--;
  }
  /* Paged K/V (pg<page size> after the dtypes): read, then the rest as without it. */
  int has_pg = n >= 3 && strncmp(fields[2], "pg", 2) == 0;
  if (has_pg && !parse_field(fields[2], "pg", &out->spec.page_size))
    return at_fail(AT_ERR_INVALID, "variant key '%s': field '%s' is not pg<page size> (e.g. pg16)", key, fields[2]);
  if (has_pg) {
    for (int i = 2; i + 1 < n; i++) fields[i] = fields[i + 1];
    n--;
  }
  /* Ragged tensors (rg or rgq after those): read, then the rest as without it. */
  if (n >= 3 && (strcmp(fields[2], "rg") == 0 || strcmp(fields[2], "rgq") == 0)) {
    out->spec.ragged = fields[2][2] ? GEN_RAGGED_Q : GEN_RAGGED_QKV;
    for (int i = 2; i + 1 < n; i++) fields[i] = fields[i + 1];
    n--;
  }
  int family = n >= 1 ? gen_family_of_name(fields[0], strlen(fields[0])) : -1;
  if (n < 9 || family < 0) {
    char names[64] = "";
    for (int f = 0, len = 0; f < GEN_FAMILY_COUNT; f++)
      len += snprintf(names + len, sizeof names - (size_t)len, "%s%s", f ? "|" : "", gen_family_name((gen_family)f));
    return at_fail(AT_ERR_INVALID,
                   "variant key '%s' is malformed (expected "
                   "<%s>.<dtype>[.kv<dtype>][.pg<page size>][.rg|.rgq].d<D>.<mask>.g<G>.bm<M>.bn<N>.w<W>.s<S>[.sp<splits>[.lc|.cl][.wg|.wgi|.wgi3]][.ws|.wspp][.vt][.qr][.tw<W>][.pers][.o<dtype>][.lse])",
                   key, names);
  }
  out->family = (gen_family)family;
  if (at_dtype_parse(fields[1], &out->spec.dtype) != AT_OK)
    return at_fail(AT_ERR_INVALID, "variant key '%s': unknown dtype '%s'", key, fields[1]);
  out->spec.out_dtype = at_dtype_default_out(out->spec.dtype);
  if (at_mask_parse(fields[3], &out->spec.mask) != AT_OK)
    return at_fail(AT_ERR_INVALID, "variant key '%s': unknown mask '%s' (expected none, causal, causal-br)",
                   key, fields[3]);
  static const char *const prefixes[] = {"d", NULL, "g", "bm", "bn", "w", "s"};
  int *targets[] = {&out->spec.head_dim, NULL, &out->spec.gqa, &out->block_m, &out->block_n,
                    &out->warps, &out->stages};
  for (int i = 0; i < 7; i++) {
    if (!prefixes[i]) continue;
    if (!parse_field(fields[2 + i], prefixes[i], targets[i]))
      return at_fail(AT_ERR_INVALID, "variant key '%s': field '%s' is not %s<positive number>", key,
                     fields[2 + i], prefixes[i]);
  }
  /* Suffixes: o<dtype>, then lse; their order and presence are checked by the canonical form. */
  for (int i = 9; i < n; i++) {
    if (strcmp(fields[i], "lse") == 0) {
      out->spec.with_lse = 1;
    } else if (strncmp(fields[i], "sp", 2) == 0 && parse_field(fields[i], "sp", &out->splits)) {
      continue;
    } else if (strcmp(fields[i], "lc") == 0 || strcmp(fields[i], "cl") == 0) {
      out->merge = fields[i][0] == 'l' ? GEN_MERGE_LAST_CTA : GEN_MERGE_CLUSTER;
    } else if (strcmp(fields[i], "ws") == 0 || strcmp(fields[i], "wspp") == 0) {
      out->ws = fields[i][2] ? 2 : 1;
    } else if (wg_of_suffix(fields[i])) {
      out->wg = wg_of_suffix(fields[i]);
    } else if (strcmp(fields[i], "vt") == 0) {
      out->vt = 1;
    } else if (strcmp(fields[i], "qr") == 0) {
      out->q_regs = 1;
    } else if (strcmp(fields[i], "pers") == 0) {
      out->persistent = 1;
    } else if (strncmp(fields[i], "tw", 2) == 0 && parse_field(fields[i], "tw", &out->tail_wave)) {
      continue;
    } else if (fields[i][0] == 'o' && at_dtype_parse(fields[i] + 1, &out->spec.out_dtype) == AT_OK) {
      continue;
    } else {
      return at_fail(AT_ERR_INVALID, "variant key '%s': unknown suffix '%s' (expected sp<N>, lc, cl, wg, wgi, wgi3, ws, wspp, vt, qr, tw<W>, pers, o<dtype> or lse)", key,
                     fields[i]);
    }
  }
  if (out->ws && !gen_family_row(out->family)->warp_specialized)
    return at_fail(AT_ERR_INVALID, "variant key '%s': family %s has no warp-specialized variants (.ws)", key,
                   gen_family_row(out->family)->name);
  if (out->wg && !gen_family_row(out->family)->wgmma_rows)
    return at_fail(AT_ERR_INVALID, "variant key '%s': family %s has no wgmma-rows variants (.wg)", key,
                   gen_family_row(out->family)->name);
  if (out->merge && !gen_family_row(out->family)->split_kv)
    return at_fail(AT_ERR_INVALID, "variant key '%s': family %s has no split-KV merge to choose (.lc, .cl)", key,
                   gen_family_row(out->family)->name);
  /* The persistent kernel is the warp-specialized one looping over work tiles. */
  if (out->persistent && !out->ws)
    return at_fail(AT_ERR_INVALID,
                   "variant key '%s': .pers is a form of the warp-specialized kernel and needs .ws or .wspp before it",
                   key);
  /* V^T ahead is a form of the warp-specialized kernel too (its producer loads V^T by TMA). */
  if (out->vt && !out->ws)
    return at_fail(AT_ERR_INVALID,
                   "variant key '%s': .vt is a form of the warp-specialized kernel and needs .ws or .wspp before it",
                   key);
  /* So is the tail split (its last query tiles are pieces of the same kernel's work tiles). */
  if (out->tail_wave && !out->ws)
    return at_fail(AT_ERR_INVALID,
                   "variant key '%s': .tw<W> is a form of the warp-specialized kernel and needs .ws or .wspp before it",
                   key);
  /* And Q in registers (the consumers' Q K^T). */
  if (out->q_regs && !out->ws)
    return at_fail(AT_ERR_INVALID,
                   "variant key '%s': .qr is a form of the warp-specialized kernel and needs .ws or .wspp before it",
                   key);
  if (n > 15) return at_fail(AT_ERR_INVALID, "variant key '%s' has too many fields", key);
  if (out->spec.page_size && !gen_family_row(out->family)->paged)
    return at_fail(AT_ERR_INVALID,
                   "variant key '%s': family %s reads contiguous K and V (no .pg<N>; paged K/V runs on decode, fa2 and fa3)", key,
                   gen_family_row(out->family)->name);
  if (out->spec.page_size && !at_page_size_allowed(out->spec.page_size))
    return at_fail(AT_ERR_INVALID, "variant key '%s': page size %d is not one of %s", key, out->spec.page_size,
                   at_page_sizes_text());
  if (out->spec.ragged && !gen_family_row(out->family)->ragged)
    return at_fail(AT_ERR_INVALID,
                   "variant key '%s': family %s reads padded tensors (no .rg/.rgq; ragged prefill runs on fa2 and fa3)",
                   key, gen_family_row(out->family)->name);
  if (out->spec.ragged == GEN_RAGGED_QKV && out->spec.page_size)
    return at_fail(AT_ERR_INVALID, "variant key '%s': paged K/V is not packed K/V (.pg<N> with .rg; ragged Q with paged K/V is .pg<N>.rgq)",
                   key);
  const int split_kv = gen_family_row(out->family)->split_kv;
  if (split_kv != (out->splits != 0))
    return at_fail(AT_ERR_INVALID, "variant key '%s': %s", key,
                   split_kv ? "a split-KV family needs .sp<splits> after the stages"
                            : "this family has no split count (.sp<N>)");
  /* Only canonical spellings round-trip (no "d064", no "bf16" spelled another way, no kv<dtype>
   * that repeats the dtype, pg<N> after kv<dtype>, never before, rg/rgq after those). */
  char again[GEN_KEY_MAX];
  at_status rc = gen_variant_key(out, again, sizeof again);
  if (rc != AT_OK) return rc;
  if (strcmp(again, key) != 0)
    return at_fail(AT_ERR_INVALID, "variant key '%s' is not in canonical form ('%s')", key, again);
  return AT_OK;
}
