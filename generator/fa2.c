/*
 * fa2.c — the fa2 family (templates/fa2.cu): constraints, enumeration, the family default, its
 * preamble and its launch. One row of the family table (gen_fa2_family, at the end).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/family.h"

/* The tuning space before pruning. */
static const int k_block_m[] = {128, 64};
static const int k_warps[] = {4, 8};
static const int k_block_n[] = {128, 64, 32};
static const int k_stages[] = {2, 3};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))


/* FA2_FP8_REGS of the template: registers an FP8 variant needs beyond the 16-bit estimate where
 * its MMAs are lowered to f16 (sm_90): the f16 copies of the operands, (D - 64)/8 + 1 up to D=128
 * and 36 above, plus 16 per stage past two and 6 for a second 16-row slice per warp. Calibrated
 * on sm_90a (CUDA 13.0) compiles of every tile at D 32..256: spilling are d128 bm64 bn128 w4 s3
 * causal, d160 bm64 bn64 w4 s3, d192 bn64, d240/d256 bn32, d80 bm128 bn64 w4 and d112 bm128 bn32
 * w4 (two slices); not spilling d128 bm128 bn128 w8 s2 (237 registers), d224 bn32 s2 (250). The
 * native m16n8k32 (sm_89) needs no more than 16-bit data. */
static int fp8_extra_regs(int d_out, int stages, int slices)
{
  int operands = d_out > 128 ? 36 : d_out > 56 ? (d_out - 64) / 8 + 1 : 0;
  return operands + 16 * (stages - 2) + 6 * (slices - 1);
}

static int threads(const gen_variant *v) { return 32 * v->warps; }


/* FA2_FP8_VIA_F16: sm_90 has no native m16n8k32 FP8 mma.sync (ptxas emulates it with f16 MMAs
 * at a cost of ~58 registers); the template then lowers it itself (templates/fa2.cu). */
static int fp8_via_f16(const gen_variant *v, const gen_target *target)
{
  return at_dtype_is_fp8(v->spec.dtype) && target->cc_major == 9 && target->cc_minor == 0;
}

/* Mirrors FA2_IDS_BYTES: paged K/V's ring of page ids, 2*STAGES-2 slots of one int32 per page a
 * K/V tile touches (BLOCK_N / page size, at least 1), in whole 128-byte lines. */
static int page_ids_bytes(const gen_variant *v)
{
  const int ps = v->spec.page_size;
  if (!ps) return 0;
  const int ids = ps >= v->block_n ? 1 : v->block_n / ps;
  return gen_round_up(4 * ids * (2 * v->stages - 2), 128);
}

/* Mirrors FA2_SMEM_BYTES in the template: Q tile plus STAGES K and V tiles, rows padded to whole
 * 128-byte swizzle lines (D rounded up to 64 elements of 16 bits, 128 of FP8), and paged K/V's
 * page ids. */
static int smem_bytes(const gen_variant *v)
{
  int elem = at_dtype_is_fp8(v->spec.dtype) ? 1 : 2;
  int row_bytes = gen_round_up(v->spec.head_dim * elem, 128);
  return (v->block_m + 2 * v->stages * v->block_n) * row_bytes + page_ids_bytes(v);
}

/* Mirrors FA2_ONE_COLUMN: does each thread copy chunks of one column down a K/V tile's rows? (16-byte
 * chunks per row of the MMAs' extent, D rounded up to 16 elements of 16 bits, 32 of FP8.) */
static int one_column_loads(const gen_variant *v)
{
  const int fp8 = at_dtype_is_fp8(v->spec.dtype);
  const int cpr = gen_round_up(v->spec.head_dim, fp8 ? 32 : 16) / (fp8 ? 16 : 8);
  return threads(v) % cpr == 0 && (v->block_n * cpr) % threads(v) == 0;
}

/* Mirrors FA2_REG_ESTIMATE in the template: O and S accumulators (fp32 per thread), the K fragments
 * in flight, ~80 for the rest and 12 more with two 16-row slices per warp. Calibrated against ptxas
 * for sm_90a (CUDA 13.0): at 255 registers ptxas spilled a few bytes for d128 bm128 w4 bn32 (two
 * slices) but not for d256 bm128 w8 bn64 (one slice), though both hold 160 accumulators. Every
 * variant it admits at the tested head dims compiles with zero spills (tests/test_generator.c). */
static int register_estimate(const gen_variant *v, int via_f16)
{
  int slices = v->block_m / v->warps / 16;
  int d_out = gen_round_up(v->spec.head_dim, 16);
  int fp8 = at_dtype_is_fp8(v->spec.dtype) && via_f16 ? fp8_extra_regs(d_out, v->stages, slices) : 0;
  int ragged = v->spec.ragged ? 6 : 0;     /* FA2_RAGGED_REGS */
  int paged = v->spec.page_size ? 8 + (one_column_loads(v) ? 20 : 32) * (v->stages - 2) : 0; /* FA2_PAGED_REGS */
  return slices * (d_out + v->block_n) / 2 + v->block_n / 4 + 79 + 12 * (slices - 1) + fp8 + ragged + paged;
}

static int pruning_register_estimate(const gen_variant *v) { return register_estimate(v, 1); }

static int target_ok(const gen_target *target) { return target->cc_major >= 8; }

/* What fa2 runs whatever the tiles (gen_spec_from_shape's family rules). */
static at_status spec_check(const gen_spec *s)
{
  if (s->kv_dtype != AT_KV_SAME) return gen_refuse_kv_dtype("fa2", s);
  if (s->dtype != AT_DTYPE_F16 && s->dtype != AT_DTYPE_BF16 && !at_dtype_is_fp8(s->dtype))
    return at_fail(AT_ERR_UNSUPPORTED, "dtype %s is not supported by fa2 (expected f16, bf16, e4m3 or e5m2)",
                   at_dtype_name(s->dtype));
  if (!at_dtype_is_fp8(s->dtype) && s->out_dtype != s->dtype)
    return at_fail(AT_ERR_UNSUPPORTED, "fa2 writes O of %s inputs as %s, not %s", at_dtype_name(s->dtype),
                   at_dtype_name(s->dtype), at_dtype_name(s->out_dtype));
  if (at_dtype_is_fp8(s->dtype) && s->out_dtype != AT_DTYPE_BF16 && s->out_dtype != AT_DTYPE_F16 &&
      !at_dtype_is_fp8(s->out_dtype))
    return at_fail(AT_ERR_UNSUPPORTED, "fa2 writes O of %s inputs as bf16, f16, e4m3 or e5m2, not %s",
                   at_dtype_name(s->dtype), at_dtype_name(s->out_dtype));
  if (s->head_dim % 8 != 0)
    return at_fail(AT_ERR_INVALID, "head dim %d is not a multiple of 8 (expected 32..256)", s->head_dim);
  if (s->head_dim < 32 || s->head_dim > 256)
    return at_fail(AT_ERR_INVALID, "head dim %d is out of range (expected a multiple of 8 in 32..256)",
                   s->head_dim);
  if (at_dtype_is_fp8(s->dtype) && s->head_dim % 16 != 0)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "head dim %d with %s inputs is not a multiple of 16 (FP8 rows move in 16-byte chunks of "
                   "16 elements)",
                   s->head_dim, at_dtype_name(s->dtype));
  return AT_OK;
}

static at_status check(const gen_variant *v, const gen_target *target)
{
  const gen_spec *s = &v->spec;
  if (s->dtype != AT_DTYPE_F16 && s->dtype != AT_DTYPE_BF16 && !at_dtype_is_fp8(s->dtype))
    return at_fail(AT_ERR_INVALID, "dtype %s is not supported by fa2 (expected f16, bf16, e4m3 or e5m2)",
                   at_dtype_name(s->dtype));
  if (!at_dtype_is_fp8(s->dtype) && s->out_dtype != s->dtype)
    return at_fail(AT_ERR_INVALID, "fa2 writes O of %s inputs as %s, not %s", at_dtype_name(s->dtype),
                   at_dtype_name(s->dtype), at_dtype_name(s->out_dtype));
  if (at_dtype_is_fp8(s->dtype) && s->out_dtype != AT_DTYPE_BF16 && s->out_dtype != AT_DTYPE_F16 && !at_dtype_is_fp8(s->out_dtype))
    return at_fail(AT_ERR_INVALID, "fa2 writes O of %s inputs as bf16, f16, e4m3 or e5m2, not %s",
                   at_dtype_name(s->dtype), at_dtype_name(s->out_dtype));
  if (s->head_dim < 32 || s->head_dim > 256 || s->head_dim % 8 != 0)
    return at_fail(AT_ERR_INVALID, "head dim %d is not a multiple of 8 in 32..256", s->head_dim);
  if (at_dtype_is_fp8(s->dtype) && s->head_dim % 16 != 0)
    return at_fail(AT_ERR_INVALID, "head dim %d with %s inputs is not a multiple of 16", s->head_dim,
                   at_dtype_name(s->dtype));
  if (at_dtype_is_fp8(s->dtype) && !gen_target_has_fp8(target))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "%s inputs need sm_89 or newer (mma.sync m16n8k32 with FP8 operands); %s has no FP8 MMA",
                   at_dtype_name(s->dtype), target->arch);
  if (s->mask != AT_MASK_NONE && s->mask != AT_MASK_CAUSAL_TL && s->mask != AT_MASK_CAUSAL_BR)
    return at_fail(AT_ERR_INVALID, "unknown mask %d", (int)s->mask);
  if (s->gqa < 1 || s->gqa > 1024) return at_fail(AT_ERR_INVALID, "GQA ratio %d is out of range (1..1024)", s->gqa);
  if (v->warps != 4 && v->warps != 8)
    return at_fail(AT_ERR_UNSUPPORTED, "%d warps (expected 4 or 8)", v->warps);
  if (v->block_m % (16 * v->warps) != 0 || v->block_m / v->warps > 32)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "block_m %d with %d warps gives %d rows per warp (expected 16 or 32)", v->block_m,
                   v->warps, v->block_m / v->warps);
  if (v->block_n % 16 != 0 || v->block_n < 16 || v->block_n > 128)
    return at_fail(AT_ERR_UNSUPPORTED, "block_n %d is not a multiple of 16 in 16..128", v->block_n);
  if (at_dtype_is_fp8(s->dtype) && v->block_n % 32 != 0)
    return at_fail(AT_ERR_UNSUPPORTED, "block_n %d is not a multiple of 32 (the k extent of FP8 P V)",
                   v->block_n);
  if (v->stages < 2 || v->stages > 4)
    return at_fail(AT_ERR_UNSUPPORTED, "%d stages (expected 2..4)", v->stages);
  return gen_check_budgets(target, threads(v), smem_bytes(v), register_estimate(v, fp8_via_f16(v, target)));
}

/* Paged K/V with padded Q of 1..GEN_DECODE_MAX_T tokens is the decode family's (it reads each
 * K/V tile once per KV head); fa2 lists paged variants for longer queries and for ragged Q. */
static int paged_decode_shape(const gen_spec *spec, const at_shape *shape)
{
  return spec->page_size && spec->ragged == GEN_RAGGED_NONE && shape->q_len >= 1 && shape->q_len <= GEN_DECODE_MAX_T;
}

static at_status enumerate(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                           gen_variant *out, int cap, int *n)
{
  if (paged_decode_shape(spec, shape)) return AT_OK;
  for (int a = 0; a < COUNT(k_block_m); a++)
    for (int b = 0; b < COUNT(k_warps); b++)
      for (int c = 0; c < COUNT(k_block_n); c++)
        for (int d = 0; d < COUNT(k_stages); d++) {
          gen_variant v = {GEN_FAMILY_FA2, *spec, k_block_m[a], k_block_n[c], k_warps[b], k_stages[d], 0, 0, 0, 0, 0, 0, 0, 0};
          if (check(&v, target) != AT_OK || !gen_tile_makes_sense(&v, shape)) continue;
          if (*n == cap) return at_fail(AT_ERR_INVALID, "more than %d variants for this shape", cap);
          out[(*n)++] = v;
        }
  return AT_OK;
}

/* Family defaults by head dim, best first; measured choices are in docs/perf.md ("## fa2"). The first
 * that passes the constraints wins. */
static int default_variant(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                           gen_variant *out)
{
  static const struct { int max_d, block_m, block_n, warps, stages; } prefs[] = {
      /* bm128 bn128 w8 s2 after s3: paged K/V's register surcharge prunes s3 at D 128, and s2 ran
       * paged prefill 1.13x faster than bn64 (docs/perf.md, "Paged prefill") */
      {64, 128, 64, 4, 2},  {64, 64, 128, 4, 2},  {128, 128, 128, 8, 3}, {128, 128, 128, 8, 2}, {128, 128, 64, 8, 2},
      {256, 128, 64, 8, 2}, {256, 128, 32, 8, 2}, {256, 64, 32, 4, 2},
  };
  if (paged_decode_shape(spec, shape)) return 0;
  for (int i = 0; i < COUNT(prefs); i++) {
    if (spec->head_dim > prefs[i].max_d) continue;
    gen_variant v = {GEN_FAMILY_FA2, *spec, prefs[i].block_m, prefs[i].block_n, prefs[i].warps,
                     prefs[i].stages, 0, 0, 0, 0, 0, 0, 0, 0};
    if (check(&v, target) == AT_OK) {
      *out = v;
      return 1;
    }
  }
  return 0;
}

static void extra_preamble(const gen_variant *v, const gen_target *target, const char *entry, gen_text *t)
{
  (void)entry;
  gen_text_put(t, "#define FA2_FP8_VIA_F16 %d\n", fp8_via_f16(v, target));
}

static at_status describe_launch(const gen_variant *v, const at_shape *shape, gen_launch_desc *out)
{
  return gen_describe_fa_launch(v, shape, threads(v), smem_bytes(v), out);
}

const gen_family_ops gen_fa2_family = {
    .name = "fa2",
    .template_file = "fa2.cu",
    .macro_prefix = "FA2",
    .split_kv = 0,
    .paged = 1,
    .ragged = 1,
    .target_ok = target_ok,
    .spec_check = spec_check,
    .check = check,
    .threads = threads,
    .smem_bytes = smem_bytes,
    .register_estimate = pruning_register_estimate,
    .enumerate = enumerate,
    .default_variant = default_variant,
    .extra_preamble = extra_preamble,
    .helpers = NULL,
    .extra_entries = NULL,
    .describe_launch = describe_launch,
};
