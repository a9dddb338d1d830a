/*
 * fa3.c — the fa3 family (templates/fa3.cu): constraints, enumeration, default and the wgmma
 * wrappers the template calls. Its kernel takes fa2's arguments and grid
 * (gen_describe_fa_launch). One row of the family table (gen_fa3_family, at the end).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/family.h"

static const int k_warps[] = {8, 4};     /* block_m = 16 * warps: 128 or 64 */
static const int k_block_n[] = {128, 64};
static const int k_stages[] = {2, 3};
/* Warp-specialized variants: 2 or 3 consumer warpgroups (block_m 128 or 192) and tiles of keys
 * that need not be powers of two (FA3's table: D64 192x128 and 192x192, D128 128x176 and
 * 128x192, D256 128x80 and 128x96), pruned by the budgets. */
static const int k_ws_warps[] = {8, 12};
static const int k_ws_block_n[] = {192, 176, 128, 112, 96, 80, 64};
static const int k_ws_stages[] = {2, 3};
static const int k_ws_kinds[] = {1, 2}; /* without ping-pong, then with */
/* Each warp-specialized tile, then (causal masks; check_persistent) its persistent form. */
static const int k_ws_persistent[] = {0, 1};
/* FP8 with V^T ahead: V^T's column blocks of 128, 64 or 32 keys take block_n a multiple of 32;
 * 224 is FA3's FP8 D128 tile. */
static const int k_vt_block_n[] = {224, 192, 128, 96, 64};
/* .vt's first kernel (templates/fa3.cu, FA3_VT_KERNEL): a CTA of VT_THREADS threads moves
 * VT_KEYS keys x 128 bytes of D from V to V^T. */
enum { VT_KEYS = 128, VT_THREADS = 256 };
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))


static int target_ok(const gen_target *target)
{
  return target->cc_major == 9 && target->cc_minor == 0 && strcmp(target->arch, "sm_90a") == 0;
}

static int elem_size(at_dtype dtype) { return at_dtype_is_fp8(dtype) ? 1 : 2; }

/* Columns of a tile row: warp-specialized variants pad D to whole 64-column (128-byte) blocks
 * (FA3_DP in the template), so D 96 holds 128 columns; otherwise D. */
static int tile_cols(const gen_variant *v) { return v->ws ? gen_round_up(v->spec.head_dim, 64) : v->spec.head_dim; }

/* Bytes of a Q/K tile row (FA3_TILE_ROWB). */
static int tile_row_bytes(const gen_variant *v) { return tile_cols(v) * elem_size(v->spec.dtype); }

/* FP8 variants that transpose V in shared memory (all but .vt, whose V^T comes transposed). */
static int transposes_v(const gen_variant *v) { return at_dtype_is_fp8(v->spec.dtype) && !v->vt; }

/* FP8 .vt (head dims 64 since v30, 128, and 256 since v31: check_ws_tiles) without lse sums P's
 * rows on the tensor cores (FA3_ONES in the template says why not with lse): each V^T stage holds
 * 8 rows of ones after its D rows, and P V is 8 columns wider; at D 256, past wgmma's n 256, as a
 * second wgmma of n 8. */
static int ones_rows(const gen_variant *v)
{
  return at_dtype_is_fp8(v->spec.dtype) && v->vt && !v->spec.with_lse ? 8 : 0;
}

/* 16-bit warp-specialized variants at D 64 without lse sum P's rows on the tensor cores too (v42):
 * a second wgmma of n 8 per k step, P times a block of ones that stays in shared memory
 * (FA3_ONES_BLOCK in the template). Only where the exponentials bound the tile: at D 128 and
 * 256, MMA-bound, the n8 wgmmas cost more tensor time than the adds saved (H100, B2 N16 8k:
 * 192x80 -2.8%, causal -4.2%, D256 128x80 -4.0%; D64 192x128 +2.7%). With lse the softmax
 * keeps its adds, as FP8's does. */
static int ones_block(const gen_variant *v)
{
  return v->ws && !at_dtype_is_fp8(v->spec.dtype) && !v->spec.with_lse && v->spec.head_dim <= 64;
}

/* Mirrors FA3_SMEM_BYTES: 1 KB to align the tiles, Q, STAGES x (K, V; V with its ones rows), two
 * V^T where the kernel transposes V, and the mbarriers of warp-specialized variants (and after
 * them, 16-bit, the ones block). */
static int smem_bytes(const gen_variant *v)
{
  const int row = tile_row_bytes(v);
  const int v_stage = v->block_n * (row + ones_rows(v));
  return 1024 + v->block_m * row + (v->stages + 2 * transposes_v(v)) * v->block_n * row + v->stages * v_stage +
         (v->ws ? 256 : 0) + (ones_block(v) ? 256 : 0);
}

/* Registers a consumer warpgroup gets from setmaxnreg (templates/fa3.cu, FA3_CONSUMER_REGS). */
static int ws_consumer_registers(const gen_variant *v)
{
  return transposes_v(v) ? 232 : v->warps == 8 ? 240 : 160;
}

/* O (D/2) and S (BN/2) fp32 accumulators per thread, P (BN/8 words for FP8, BN/4 for 16 bits),
 * about 56 for addresses and softmax state, and for FP8 about 7 per V-transpose unit of the warp
 * (their shared-memory offsets stay in registers across the K/V loop). The 7 is ptxas's: with it
 * the one-warpgroup FP8 tiles that spilled (D=128 64x128 causal: 24 bytes; D=256 64x64: 100) are
 * refused and D=256 128x64 (251-255 registers, no spill) is kept. */
static int register_estimate(const gen_variant *v)
{
  const int fp8 = at_dtype_is_fp8(v->spec.dtype);
  /* Consumers of warp-specialized variants hold no load addresses: about 32 besides the tiles. */
  const int p_words = v->block_n / (fp8 ? 8 : 4);
  /* Persistent: S stays live across the K/V loop's back edge (v17) while the work-tile loop holds
   * its state. With lse ptxas spilled 48-184 bytes in exactly the tiles that BN/4 more registers
   * put over setmaxnreg's budget (all of them, and none that it kept); without lse, NVRTC 13.0
   * spilled 96-380 bytes at D 64-128 in exactly those tiles too, 28 of them (and in none of the
   * kept ones; D 192 and 256 lose none). */
  const int persistent_live_s = v->persistent ? v->block_n / 4 : 0;
  /* .qr: a warp's 16 rows of Q as A fragments, D bytes (FP8) or 2 D bytes a row over 32 lanes. With
   * it the estimate refuses exactly the tiles whose nvcc build spilled (bf16 D128 128x160: 32 bytes,
   * 128x176: 128, 192x80: 192; D64 192x128: 96; e4m3 D128 128x224 .vt: 96, D256 128x128 .vt: 208)
   * and keeps 128x144 and 128x128, which spilled none. */
  const int q_words = v->q_regs ? v->spec.head_dim * (fp8 ? 1 : 2) / 8 : 0;
  /* The sums' n8 tile at D 256 (v31) is not counted: with it 128x128 counts 244, and NVRTC 13.0
   * compiled that tile (.ws and .wspp, 2 stages) with no spill. Nor is 16-bit D 64's (v42,
   * ones_block): with it the default 192x128 would count 164 of setmaxnreg's 160, and every
   * listed 16-bit warp-specialized tile compiles with its n8 tile with no spill (test_generator). */
  const int counted_ones = v->spec.head_dim > 128 ? 0 : ones_rows(v);
  if (v->ws)
    return (tile_cols(v) + counted_ones) / 2 + v->block_n / 2 + p_words + 32 + persistent_live_s + q_words;
  const int transpose_units = fp8 ? (v->spec.head_dim / 32) * (v->block_n / 16) / v->warps : 0;
  return v->spec.head_dim / 2 + v->block_n / 2 + p_words + 56 + 7 * transpose_units;
}

/* warps counts the warps that compute; a warp-specialized variant adds its producer warpgroup. */
static int threads(const gen_variant *v) { return 32 * v->warps + (v->ws ? 128 : 0); }

/* What fa3 runs whatever the tiles: fa2's rules, and O of FP8 inputs in 16 bits. */
static at_status spec_check(const gen_spec *s)
{
  if (s->kv_dtype != AT_KV_SAME) return gen_refuse_kv_dtype("fa3", s);
  if (at_dtype_is_fp8(s->dtype) && s->out_dtype != AT_DTYPE_BF16 && s->out_dtype != AT_DTYPE_F16)
    return at_fail(AT_ERR_UNSUPPORTED, "fa3 writes O of %s inputs as bf16 or f16, not %s",
                   at_dtype_name(s->dtype), at_dtype_name(s->out_dtype));
  return gen_fa2_family.spec_check(s);
}

/* The warp-specialized kernel's warps and tiles (check() has the rules both kernels share). */
static at_status check_ws_tiles(const gen_variant *v)
{
  const gen_spec *s = &v->spec;
  if (v->ws != 1 && v->ws != 2) return at_fail(AT_ERR_INVALID, "fa3 ws must be 0, 1 or 2, not %d", v->ws);
  /* FP8: V^T by the producer's 3 idle warps into two buffers of v5's layout (block_n 64 or 128),
   * beside two consumer warpgroups; or (.vt) V^T tiles by TMA in column blocks of the widest of
   * 128, 64 and 32 keys that divides block_n (the swizzle's widths), beside 2 or 3 of them. */
  if (at_dtype_is_fp8(s->dtype) && s->head_dim != 128 && s->head_dim != 256 && !(s->head_dim == 64 && v->vt))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "warp-specialized fa3 with %s inputs runs head dim 128 or 256, or 64 with V^T ahead (.vt), not %d%s",
                   at_dtype_name(s->dtype), s->head_dim, s->head_dim == 64 ? " without .vt" : "");
  if (v->vt && (v->block_n % 32 != 0 || v->block_n > 256))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "fa3 with V^T ahead (.vt) loads V^T in column blocks of 32, 64 or 128 keys: block_n must be a "
                   "multiple of 32 up to 256, not %d",
                   v->block_n);
  if (transposes_v(v) && (v->warps != 8 || (v->block_n != 64 && v->block_n != 128)))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "warp-specialized fa3 with %s inputs runs 2 consumer warpgroups (8 warps) and block_n 64 or 128, "
                   "not %d warps and block_n %d",
                   at_dtype_name(s->dtype), v->warps, v->block_n);
  if (v->warps != 8 && v->warps != 12)
    return at_fail(AT_ERR_UNSUPPORTED, "warp-specialized fa3 runs 2 or 3 consumer warpgroups (8 or 12 warps), not %d",
                   v->warps);
  if (v->block_n % 16 != 0 || v->block_n < 16 || v->block_n > 256)
    return at_fail(AT_ERR_UNSUPPORTED, "warp-specialized fa3 block_n must be a multiple of 16 in 16..256, not %d",
                   v->block_n);
  return AT_OK;
}

/* The persistent form of the warp-specialized kernel (.pers): its work-tile loop is written for
 * the 16-bit consumers and producer (the FP8 producer's transposing warps have none), and its
 * longest-first order is what causal masks need (without a mask every work tile is as long). */
static at_status check_persistent(const gen_variant *v)
{
  const gen_spec *s = &v->spec;
  if (v->persistent == 0) return AT_OK;
  if (v->persistent != 1) return at_fail(AT_ERR_INVALID, "fa3 persistent must be 0 or 1, not %d", v->persistent);
  if (!v->ws)
    return at_fail(AT_ERR_INVALID,
                   "persistent fa3 is the warp-specialized kernel looping over work tiles: it needs ws 1 or 2, not 0");
  if (at_dtype_is_fp8(s->dtype))
    return at_fail(AT_ERR_UNSUPPORTED, "persistent fa3 runs f16 or bf16 inputs, not %s", at_dtype_name(s->dtype));
  if (s->mask == AT_MASK_NONE)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "persistent fa3 runs causal masks (causal, causal-br), not none: it orders work tiles longest first");
  return AT_OK;
}

/* V^T ahead (.vt): the FP8 warp-specialized kernel reading V^T that a first kernel wrote (16-bit
 * inputs need no transpose: wgmma reads their V MN-major). */
static at_status check_vt(const gen_variant *v)
{
  if (v->vt == 0) return AT_OK;
  if (v->vt != 1) return at_fail(AT_ERR_INVALID, "fa3 vt must be 0 or 1, not %d", v->vt);
  if (!v->ws)
    return at_fail(AT_ERR_INVALID, "fa3 with V^T ahead (.vt) is a warp-specialized kernel: it needs ws 1 or 2, not 0");
  if (!at_dtype_is_fp8(v->spec.dtype))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "fa3 with V^T ahead (.vt) runs e4m3 or e5m2 inputs, not %s (16-bit V is read as it is)",
                   at_dtype_name(v->spec.dtype));
  if (v->persistent)
    return at_fail(AT_ERR_UNSUPPORTED, "fa3 with V^T ahead (.vt) has no persistent form (.pers)");
  return AT_OK;
}

/* Ragged tensors (.rg, .rgq) run in the 16-bit warp-specialized kernel with one CTA per query
 * block: its TMA producer addresses the packed rows; the in-CTA, FP8 and persistent kernels
 * read padded tensors only. */
static at_status check_ragged(const gen_variant *v)
{
  if (!v->spec.ragged) return AT_OK;
  if (!v->ws || v->persistent || at_dtype_is_fp8(v->spec.dtype))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "ragged fa3 (.%s) is the warp-specialized 16-bit kernel without .pers (got %s%s, %s inputs)",
                   gen_ragged_name(v->spec.ragged), v->ws ? "ws" : "in-CTA", v->persistent ? " persistent" : "",
                   at_dtype_name(v->spec.dtype));
  return AT_OK;
}

/* Paged K/V (.pg<N>, padded Q or .rgq) runs in the 16-bit warp-specialized kernel with one CTA
 * per query block: its TMA producer reads K/V tiles as boxes of whole pages (templates/fa3.cu
 * "Paged K/V"), so the page size and block_n divide one another, and a page is 16 keys at least
 * (a box's rows start on the 128-byte swizzle's 8-row period; 16 bits of a stage's mask cover a
 * tile's boxes). */
static at_status check_paged(const gen_variant *v)
{
  const int ps = v->spec.page_size;
  if (!ps) return AT_OK;
  if (!v->ws || v->persistent || v->vt || at_dtype_is_fp8(v->spec.dtype))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "paged fa3 (.pg%d) is the warp-specialized 16-bit kernel without .pers (got %s%s, %s inputs)", ps,
                   v->ws ? "ws" : "in-CTA", v->persistent ? " persistent" : "", at_dtype_name(v->spec.dtype));
  if (ps < 16 || (v->block_n % ps != 0 && ps % v->block_n != 0))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "paged fa3 loads whole pages of at least 16 keys per box: page size %d and block_n %d must divide "
                   "one another",
                   ps, v->block_n);
  return AT_OK;
}

/* The tail split (.tw<W>): the warp-specialized kernel with one CTA per work tile, all of them
 * equally long (no mask: the causal grid already ends on its shortest tiles), on padded
 * contiguous tensors. */
static at_status check_tail(const gen_variant *v)
{
  if (v->tail_wave == 0) return AT_OK;
  if (v->tail_wave < 1 || v->tail_wave > 4096)
    return at_fail(AT_ERR_INVALID, "fa3 tail wave must be 1..4096 CTAs, not %d", v->tail_wave);
  if (!v->ws || v->persistent)
    return at_fail(AT_ERR_INVALID,
                   "the fa3 tail split (.tw) is a form of the warp-specialized kernel with one CTA per work tile "
                   "(.ws or .wspp, not .pers)");
  if (v->spec.mask != AT_MASK_NONE)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "the fa3 tail split (.tw) runs without a mask, not %s: causal work tiles differ in length, and "
                   "the causal grid already ends on its shortest",
                   at_mask_name(v->spec.mask));
  if (v->spec.ragged || v->spec.page_size)
    return at_fail(AT_ERR_UNSUPPORTED, "the fa3 tail split (.tw) reads padded, contiguous tensors (no .rg, .rgq, .pg)");
  return AT_OK;
}

/* Q in registers (.qr): the warp-specialized consumers' Q K^T takes A from registers (wgmma's
 * register form), where the register estimate leaves them room. */
static at_status check_qr(const gen_variant *v)
{
  if (v->q_regs == 0) return AT_OK;
  if (v->q_regs != 1) return at_fail(AT_ERR_INVALID, "fa3 q_regs must be 0 or 1, not %d", v->q_regs);
  if (!v->ws)
    return at_fail(AT_ERR_INVALID, "fa3 with Q in registers (.qr) is a warp-specialized kernel: it needs ws 1 or 2, not 0");
  return AT_OK;
}

static at_status check_in_cta_tiles(const gen_variant *v)
{
  if (v->warps != 4 && v->warps != 8)
    return at_fail(AT_ERR_UNSUPPORTED, "fa3 runs 4 or 8 warps (1 or 2 warpgroups), not %d", v->warps);
  if (v->block_n != 64 && v->block_n != 128)
    return at_fail(AT_ERR_UNSUPPORTED, "fa3 block_n must be 64 or 128, not %d", v->block_n);
  return AT_OK;
}

static at_status check(const gen_variant *v, const gen_target *target)
{
  const gen_spec *s = &v->spec;
  if (!at_dtype_is_fp8(s->dtype) && s->dtype != AT_DTYPE_BF16 && s->dtype != AT_DTYPE_F16)
    return at_fail(AT_ERR_INVALID, "dtype %s is not supported by fa3 (expected e4m3, e5m2, bf16 or f16)",
                   at_dtype_name(s->dtype));
  if (s->out_dtype != AT_DTYPE_BF16 && s->out_dtype != AT_DTYPE_F16)
    return at_fail(AT_ERR_INVALID, "fa3 writes O as bf16 or f16, not %s", at_dtype_name(s->out_dtype));
  if (!at_dtype_is_fp8(s->dtype) && s->out_dtype != s->dtype)
    return at_fail(AT_ERR_INVALID, "fa3 writes O of %s inputs as %s, not %s", at_dtype_name(s->dtype),
                   at_dtype_name(s->dtype), at_dtype_name(s->out_dtype));
  if (!target_ok(target))
    return at_fail(AT_ERR_UNSUPPORTED, "fa3 needs sm_90a (wgmma), not %s", target->arch);
  const int ws_dim = v->ws && (s->head_dim == 96 || s->head_dim == 192);
  if (s->head_dim != 64 && s->head_dim != 128 && s->head_dim != 256 && !ws_dim)
    return at_fail(AT_ERR_UNSUPPORTED, "fa3 runs head dim 64, 128 or 256 (warp-specialized also 96 and 192), not %d",
                   s->head_dim);
  if (s->mask != AT_MASK_NONE && s->mask != AT_MASK_CAUSAL_TL && s->mask != AT_MASK_CAUSAL_BR)
    return at_fail(AT_ERR_INVALID, "unknown mask %d", (int)s->mask);
  if (s->gqa < 1 || s->gqa > 1024) return at_fail(AT_ERR_INVALID, "GQA ratio %d is out of range (1..1024)", s->gqa);
  at_status rc = check_vt(v);
  if (rc != AT_OK || (rc = v->ws ? check_ws_tiles(v) : check_in_cta_tiles(v)) != AT_OK) return rc;
  if ((rc = check_persistent(v)) != AT_OK || (rc = check_ragged(v)) != AT_OK || (rc = check_paged(v)) != AT_OK ||
      (rc = check_tail(v)) != AT_OK || (rc = check_qr(v)) != AT_OK)
    return rc;
  if (v->block_m != 16 * v->warps)
    return at_fail(AT_ERR_UNSUPPORTED, "fa3 block_m must be 16 rows per warp (%d for %d warps), not %d",
                   16 * v->warps, v->warps, v->block_m);
  if (v->stages < 2 || v->stages > 4)
    return at_fail(AT_ERR_UNSUPPORTED, "%d stages (expected 2..4)", v->stages);
  if (!v->ws) return gen_check_budgets(target, threads(v), smem_bytes(v), register_estimate(v));
  /* Warp-specialized: the consumers' registers are setmaxnreg's, not 64K / threads. */
  if ((rc = gen_check_budgets(target, threads(v), smem_bytes(v), 0)) != AT_OK) return rc;
  if (register_estimate(v) > ws_consumer_registers(v))
    return at_fail(AT_ERR_UNSUPPORTED, "needs about %d registers per consumer thread, setmaxnreg gives %d (would spill)",
                   register_estimate(v), ws_consumer_registers(v));
  return AT_OK;
}

/* ---- the tail split (.tw<W>) ------------------------------------------------------------------ */

/* Without a mask every work tile (a query block of one head) takes as long, and one CTA of the
 * warp-specialized kernel fills an SM, so a call runs in waves of W = SMs CTAs and its last wave
 * holds work_tiles % W of them: B2 Nq16 T8192 at block_m 192 is 1376 tiles, 10 full waves and 56,
 * and 76 SMs wait through the eleventh. The tail split runs the last `tiles` work tiles as
 * `pieces` CTAs each, piece p taking K/V tiles [p n / pieces, (p + 1) n / pieces), whose fp32
 * partials a combine kernel merges.
 *
 * The plan is a count in units of one K/V tile's time. A work tile takes its n K/V tiles and one
 * more (Q, the pipeline's fill, the epilogue); a piece its share and two (its partial is fp32,
 * twice O's bytes); the CTAs run in waves of W; and the combine moves each piece's partial twice
 * (written, read: 8 BM D bytes) across the whole GPU after the attention kernel. At the rates
 * measured on the H200 (prefill ~650 TFLOP/s 16-bit and ~1000 FP8, docs/perf.md; ~3 TB/s for the
 * combine's traffic) a K/V tile of one CTA, 4 BM BN D FLOP at 1/132 of the rate, lasts as long as
 * the combine of BN / 3.3 (16-bit) or BN / 5 (FP8) pieces, whatever BM and D. The plan splits the
 * last partial wave, or that and the full wave before it, into 2..TAIL_MAX_PIECES pieces, the
 * shortest count, and nothing unless that saves TAIL_MIN_GAIN of the call. Measured against the
 * plain grid: docs/perf.md "v25". */
enum { TAIL_MAX_PIECES = 8 };
#define TAIL_MIN_GAIN 0.01

typedef struct {
  int tiles;  /* work tiles split (the last ones of the call), 0 for none */
  int pieces; /* CTAs each */
} tail_plan;

/* combine: the combine's cost of one piece, in K/V tiles */
static tail_plan plan_tail(long long work_tiles, int wave, long long kv_tiles, double combine)
{
  tail_plan best = {0, 1};
  if (wave < 1 || work_tiles <= 0 || kv_tiles < 2 || work_tiles % wave == 0) return best;
  const long long rest = work_tiles % wave, waves = (work_tiles + wave - 1) / wave;
  double best_time = (double)waves * (double)(kv_tiles + 1) * (1.0 - TAIL_MIN_GAIN);
  for (long long split = rest; split <= rest + wave && split <= work_tiles; split += wave)
    for (int k = 2; k <= TAIL_MAX_PIECES && k <= kv_tiles; k++) {
      const long long piece_waves = (split * k + wave - 1) / wave, piece = (kv_tiles + k - 1) / k + 2;
      const double t = (double)((work_tiles - split) / wave) * (double)(kv_tiles + 1) +
                       (double)(piece_waves * piece) + combine * (double)(split * k);
      if (t < best_time) best_time = t, best.tiles = (int)split, best.pieces = k;
    }
  return best;
}

/* The tail plan of v (tail_wave W) for a shape: its work tiles are the padded grid's. */
static tail_plan tail_plan_of(const gen_variant *v, const at_shape *shape)
{
  const tail_plan none = {0, 1};
  if (!v->tail_wave || shape->batch <= 0 || shape->q_len <= 0 || shape->kv_len <= 0) return none;
  const long long tiles = gen_tiles(shape->q_len, v->block_m) * shape->q_heads * (long long)shape->batch;
  const double combine = (at_dtype_is_fp8(v->spec.dtype) ? 5.0 : 3.3) / v->block_n;
  return plan_tail(tiles, v->tail_wave, gen_tiles(shape->kv_len, v->block_n), combine);
}

/* Twins of a listed tile: the tail split (W = the target's SMs) where its plan splits something at
 * this shape, and Q in registers (.qr) where the consumers have room for Q's fragments (check's
 * register estimate: 128-row tiles up to block_n 144 at D 128, none of the 192-row ones there).
 * Each sets its field in *v and says whether the twin is listed. */
static int tail_twin(gen_variant *v, const gen_target *target, const at_shape *shape)
{
  v->tail_wave = target->sm_count;
  return check(v, target) == AT_OK && tail_plan_of(v, shape).tiles > 0;
}

static int qr_twin(gen_variant *v, const gen_target *target, const at_shape *shape)
{
  (void)shape;
  v->q_regs = 1;
  return check(v, target) == AT_OK;
}

/* After out[first, listed): the twins that make_twin lists of each one-CTA-per-tile form without
 * ping-pong (every default's kind). Listed after them, so that a config's candidate budget meets
 * the plain tiles first. */
static at_status enumerate_twins(int (*make_twin)(gen_variant *, const gen_target *, const at_shape *),
                                 const gen_target *target, const at_shape *shape, int first, int listed,
                                 gen_variant *out, int cap, int *n)
{
  for (int i = first; i < listed; i++) {
    gen_variant v = out[i];
    if (out[i].persistent || out[i].ws != 1 || !make_twin(&v, target, shape)) continue;
    if (*n == cap) return at_fail(AT_ERR_INVALID, "more than %d variants for this shape", cap);
    out[(*n)++] = v;
  }
  return AT_OK;
}

/* The persistent forms come after every non-persistent tile: on the H200 each ran 3-14% slower
 * than its twin alone (docs/perf.md, "v10"), so a config's candidate budget goes to the others
 * first; tuning configs/llm-prefill.yaml still picked a persistent form on 9 of its 23 shapes. */
static at_status enumerate_ws(const gen_spec *spec, const gen_target *target, const at_shape *shape, int vt,
                              gen_variant *out, int cap, int *n)
{
  const int first = *n;
  for (int p = 0; p < COUNT(k_ws_persistent); p++)
    for (int a = 0; a < COUNT(k_ws_warps); a++)
      for (int b = 0; b < (vt ? COUNT(k_vt_block_n) : COUNT(k_ws_block_n)); b++)
        for (int c = 0; c < COUNT(k_ws_stages); c++)
          for (int d = 0; d < COUNT(k_ws_kinds); d++) {
            const int block_n = vt ? k_vt_block_n[b] : k_ws_block_n[b];
            gen_variant v = {GEN_FAMILY_FA3, *spec,          16 * k_ws_warps[a], block_n,           k_ws_warps[a],
                             k_ws_stages[c], 0,              k_ws_kinds[d],      k_ws_persistent[p], 0, vt, 0, 0, 0};
            if (check(&v, target) != AT_OK || !gen_tile_makes_sense(&v, shape)) continue;
            if (*n == cap) return at_fail(AT_ERR_INVALID, "more than %d variants for this shape", cap);
            out[(*n)++] = v;
          }
  /* Tail twins of the plain tiles, then .qr twins of those (not of the tail twins). */
  const int plain = *n;
  at_status rc = enumerate_twins(tail_twin, target, shape, first, plain, out, cap, n);
  return rc != AT_OK ? rc : enumerate_twins(qr_twin, target, shape, first, plain, out, cap, n);
}

static at_status enumerate_in_cta(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                                  gen_variant *out, int cap, int *n)
{
  for (int a = 0; a < COUNT(k_warps); a++)
    for (int b = 0; b < COUNT(k_block_n); b++)
      for (int c = 0; c < COUNT(k_stages); c++) {
        gen_variant v = {GEN_FAMILY_FA3, *spec, 16 * k_warps[a], k_block_n[b], k_warps[a], k_stages[c], 0, 0, 0, 0, 0, 0, 0, 0};
        if (check(&v, target) != AT_OK || !gen_tile_makes_sense(&v, shape)) continue;
        if (*n == cap) return at_fail(AT_ERR_INVALID, "more than %d variants for this shape", cap);
        out[(*n)++] = v;
      }
  return AT_OK;
}

/* The faster kind first, so a config's candidate budget (the first ones listed) gets it:
 * warp-specialized for 16-bit inputs; for FP8 the warp-specialized kernel with V^T ahead (.vt,
 * 1.29x the in-CTA kernel at D=128 and 1.48x at D=256, docs/perf.md "v11"), then the in-CTA
 * pipeline, then the warp-specialized kernel whose producer transposes (0.79-0.88x in-CTA, "v9"). */
static at_status enumerate(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                           gen_variant *out, int cap, int *n)
{
  at_status rc;
  /* check_ragged and check_paged keep their kind */
  if (spec->ragged || spec->page_size) return enumerate_ws(spec, target, shape, 0, out, cap, n);
  if (!at_dtype_is_fp8(spec->dtype)) {
    rc = enumerate_ws(spec, target, shape, 0, out, cap, n);
    return rc != AT_OK ? rc : enumerate_in_cta(spec, target, shape, out, cap, n);
  }
  if ((rc = enumerate_ws(spec, target, shape, 1, out, cap, n)) != AT_OK) return rc;
  if ((rc = enumerate_in_cta(spec, target, shape, out, cap, n)) != AT_OK) return rc;
  return enumerate_ws(spec, target, shape, 0, out, cap, n);
}

typedef struct {
  int max_d, block_n, warps, stages, ws; /* ws: 1 .ws, 2 .wspp */
} ws_pref;

/* The default is warp-specialized where a tile fits, each from B2 N16 T=S=8192 on the H200. 16-bit
 * inputs: the tiles that ran fastest or within the noise of the fastest (docs/perf.md, "## fa3",
 * step 6), 2 stages, no ping-pong. FP8: V^T ahead (.vt, "v11"), at D=64 192x128 with 3
 * consumers and 2 stages (v30), at D=128 128x224 with 2 stages since linear P (below; 192x96
 * with 3 consumers before it) and 128x128 with 2 stages and ping-pong at D=256. */
static int default_ws_variant(const gen_spec *spec, const gen_target *target, gen_variant *out)
{
  /* D 128: 192x80 with three consumers since the speculative row max (v19: 665-688 TFLOP/s
   * against 128x176's 619-631 in the same call, docs/perf.md "v19"). */
  static const ws_pref prefs16[] = {
      {64, 128, 12, 2, 1}, {128, 80, 12, 2, 1}, {192, 112, 8, 2, 1}, {256, 80, 8, 2, 1}, {0, 0, 0, 0, 0}};
  /* FP8 D 128: 128x224 since linear P (v20: 964-1061 TFLOP/s, where 192x96 ran 942-1000 in the
   * same calls, docs/perf.md "v20"). D 256: 128x128 with ping-pong (.wspp.vt) since v28's call:
   * 1174/1205 against .ws.vt's 1114/1124 on the H100, 1138/1149 against 1122/1129 on the H200
   * (docs/perf.md "v27"). */
  /* FP8 D 64: 192x128 .ws.vt since v30 (H200, B2 N16 8k: 656/660 TFLOP/s against the in-CTA
   * 64x128's 407/410 and cuDNN's 567/577; B4 N8 2k 481 against 370; docs/perf.md "v30"). */
  static const ws_pref prefs8[] = {{64, 128, 12, 2, 1}, {128, 224, 8, 2, 1}, {256, 128, 8, 2, 2}, {0, 0, 0, 0, 0}};
  /* Paged K/V: a tile's boxes are pages, and 192x64 with three consumers and 3 stages ran fastest
   * or within 2% of it on the H200's three paged batches (pages of 16; 128x176 ran 22-24%
   * slower there, docs/perf.md "fa3 reads pages"); block_n 64 divides or is divided by every page
   * size of 16 or more. Larger head dims keep the contiguous tiles (fa2 where they do not fit the
   * pages). */
  static const ws_pref prefs_paged[] = {{128, 64, 12, 3, 1}, {192, 112, 8, 2, 1}, {256, 80, 8, 2, 1}, {0, 0, 0, 0, 0}};
  const int fp8 = at_dtype_is_fp8(spec->dtype);
  for (const ws_pref *p = fp8 ? prefs8 : spec->page_size ? prefs_paged : prefs16; p->max_d; p++) {
    if (spec->head_dim > p->max_d) continue;
    gen_variant v = {GEN_FAMILY_FA3, *spec, 16 * p->warps, p->block_n, p->warps, p->stages, 0, p->ws, 0, 0, fp8, 0, 0, 0};
    if (check(&v, target) == AT_OK) {
      *out = v;
      return 1;
    }
  }
  return 0;
}

/* The tail split (v25) where its plan splits something at this shape (never causal, paged or
 * ragged: check_tail refuses those). Against the plain 192x80 / 192x128 / 128x80 / 192x96 tiles on
 * the H100 (calls 76 and 78): +1 to +12% at bf16 D128 on four shapes (at a fifth, B4 N32 T2048,
 * the plan splits nothing and the two launches, both the plain grid, ran within 0.8%), +2% at D64,
 * +1 to +2% at D256, -3.4 then +1.1% (two orders) and +5.4% at e4m3; on the H200 against main's
 * plain default, B1 N32 T4096 607 -> 666 TFLOP/s and B2 N16 8k 653 -> 676 (medians of six pairs);
 * docs/perf.md "v25". */
static void with_tail_split(gen_variant *v, const gen_target *target, const at_shape *shape)
{
  gen_variant t = *v;
  if (tail_twin(&t, target, shape)) *v = t;
}

/* Causal prefill of up to 4096 query rows at D 128, over up to 16384 keys (T = S, or chunked
 * prefill T < S bottom-right): the persistent 128x128 tile with ping-pong since v43's snake order.
 * H100, bf16, against the 192x80 grid tile in the same calls (docs/perf.md, "Forty-eighth
 * session"). T = S, Nq 32 Nkv 4: 31% ahead at B1 T 512, 34% at T 1k, 14% at 2k, 7% at 4k, 6% at
 * B2 T 4k, 27% at B4 T 1k; at T = 8192 even at B1 and 7% behind at B2 N16 over three rounds of
 * alternating order. Chunked, Nq 32 Nkv 8 with lse, medians of three rounds: 39-42% ahead at
 * T 1k S 4k-8k, 5-10% at T 2k S 4k-16k (B1 and B2), 2-6% at T 4k S 8k-16k. At D 256 the 128x80
 * twins run even at T = S 2k-8k (within 1.5%), and at D 64 the grid's three consumers lead
 * (13%): those keep the grid's tile, as do longer rows and chunks over longer K/V (not measured). */
static int default_persistent_variant(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                                      gen_variant *out)
{
  if (!shape || at_dtype_is_fp8(spec->dtype) || spec->page_size || spec->ragged) return 0;
  if (spec->mask != AT_MASK_CAUSAL_TL && spec->mask != AT_MASK_CAUSAL_BR) return 0;
  if (shape->q_len > 4096 || shape->kv_len > 16384 || spec->head_dim != 128) return 0;
  if (shape->q_len != shape->kv_len && spec->mask != AT_MASK_CAUSAL_BR) return 0;
  gen_variant v = {GEN_FAMILY_FA3, *spec, 128, 128, 8, 2, 0, 2, 1, 0, 0, 0, 0, 0};
  if (check(&v, target) != AT_OK) return 0;
  *out = v;
  return 1;
}

/* Otherwise the in-CTA kernel, best first from the H200 sweeps in docs/perf.md ("## fa3"): at
 * T=S=8192 the 128x128 tile with two warpgroups wins at D=128 (FP8 and bf16), 64x128 with one warpgroup at bf16 D=64, and 128x64
 * at D=256, where 128x128 does not fit the registers. FP8 runs faster with a third stage (632
 * against 620 TFLOP/s at D=128, 696 against 664 at D=256, one run); 16-bit runs slower with it. */
static int default_variant(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                           gen_variant *out)
{
  if (default_persistent_variant(spec, target, shape, out)) return 1;
  /* Paged K/V: default_ws_variant's paged tiles where one fits the page size, ahead of fa2's
   * paged kernels (52-53% of the padding-free ideal against fa3's 67-75% on the H200, docs/perf.md
   * "fa3 reads pages"); none here otherwise, so fa2's default follows. */
  if (default_ws_variant(spec, target, out)) {
    with_tail_split(out, target, shape);
    return 1;
  }
  if (spec->page_size) return 0;
  if (spec->ragged) return 0; /* only the warp-specialized kernel reads ragged tensors */
  static const struct { int max_d, block_n, warps, stages; } prefs[] = {
      {64, 128, 4, 2}, {128, 128, 8, 2}, {256, 64, 8, 2}, {256, 64, 4, 2}};
  const int extra_stage = at_dtype_is_fp8(spec->dtype);
  (void)shape;
  for (int i = 0; i < COUNT(prefs); i++) {
    if (spec->head_dim > prefs[i].max_d) continue;
    for (int s = prefs[i].stages + extra_stage; s >= prefs[i].stages; s--) {
      gen_variant v = {GEN_FAMILY_FA3, *spec, 16 * prefs[i].warps, prefs[i].block_n, prefs[i].warps, s, 0, 0, 0, 0, 0, 0, 0, 0};
      if (check(&v, target) == AT_OK) {
        *out = v;
        return 1;
      }
    }
  }
  return 0;
}

/* ---- wgmma wrappers ---------------------------------------------------------------------------- */

/* Two wgmma wrappers per variant (three with .qr), their register lists sized for the tile: fa3_mma_qk (A = Q and
 * B = K from shared memory; the accumulators zeroed when accumulate is 0, the scale-d predicate)
 * and fa3_mma_pv (A = P from four registers, B = V, and the ones rows where there are; always
 * accumulates). k is 32 for FP8 and 16 for 16-bit inputs. */
static void wgmma_wrappers(const gen_variant *v, gen_text *t)
{
  const int fp8 = at_dtype_is_fp8(v->spec.dtype);
  const char *in = at_dtype_name(v->spec.dtype); /* e4m3, e5m2, bf16, f16: PTX's type names */
  const char *p_type = fp8 ? "e4m3" : in;       /* P: E4M3 for FP8 inputs, else the input type */
  const int k = fp8 ? 32 : 16;
  /* Trailing immediates: scale-a, scale-b, and for 16-bit types the transpose bits (A and B from
   * shared memory: both K-major; A from registers: B = V read MN-major). */
  const char *qk_tail = fp8 ? "1, 1" : "1, 1, 0, 0", *pv_tail = fp8 ? "1, 1" : "1, 1, 1";
  gen_text_put(t, "/* wgmma wrappers generated by generator/fa3.c for this variant */\n");
  gen_wgmma_ss(t, "fa3_mma_qk", v->block_n, k, in, in, qk_tail);
  /* The ones rows ride in P V's n up to wgmma's 256; past it (D 256) fa3_mma_pv_sums takes them
   * (FA3_PV_SUMS_APART in the template). */
  const int sums_apart = tile_cols(v) + ones_rows(v) > 256;
  gen_wgmma_rs(t, "fa3_mma_pv", tile_cols(v) + (sums_apart ? 0 : ones_rows(v)), k, p_type, in, pv_tail);
  /* 16-bit's (v42) read the ones block K-major: no transpose bit */
  if (sums_apart || ones_block(v))
    gen_wgmma_rs(t, "fa3_mma_pv_sums", 8, k, p_type, in, ones_block(v) ? "1, 1, 0" : pv_tail);
  /* .qr: Q K^T with A = Q from four registers (K-major as A always is from registers), B = K */
  if (v->q_regs) gen_wgmma_rs_acc(t, "fa3_mma_qk_rs", v->block_n, k, in, in, fp8 ? "1, 1" : "1, 1, 0");
}

/* Persistent variants: one CTA per work tile as described, which the runtime narrows to the
 * device's SMs (generator.h, gen_launch_desc.work_tiles); the kernel finds its tiles from Nq and
 * the tile count, arguments after the tensor maps. One CTA per SM: the warp-specialized kernel's
 * setmaxnreg split hands out the whole register file. */
static at_status describe_persistent(const at_shape *shape, gen_launch_desc *out)
{
  gen_kernel_launch *k = &out->kernels[0];
  const long long tiles = (long long)k->grid[0] * k->grid[1] * k->grid[2];
  if (tiles > 0x7fffffff)
    return at_fail(AT_ERR_UNSUPPORTED, "persistent fa3: %lld work tiles (B %d x Nq %d x %u query blocks) exceed %d",
                   tiles, shape->batch, shape->q_heads, k->grid[0], 0x7fffffff);
  static const gen_arg SCHEDULE_ARGS[] = {GEN_ARG_Q_HEADS, GEN_ARG_WORK_TILES};
  at_status rc = gen_launch_append_args(k, SCHEDULE_ARGS, COUNT(SCHEDULE_ARGS));
  if (rc != AT_OK) return rc;
  k->grid[0] = (unsigned)tiles;
  k->grid[1] = k->grid[2] = 1;
  out->work_tiles = (int)tiles;
  out->ctas_per_sm = 1;
  return AT_OK;
}

/* .vt's V^T: [B][Nkv][D][S'] bytes in the scratch, S' = S rounded up to block_n (one tile at
 * least, so that the tensor map has a tile to describe when S is 0); keys >= S are zeros. */
static long long vt_keys(const gen_variant *v, const at_shape *shape)
{
  const long long s = shape->kv_len > 0 ? shape->kv_len : 1;
  return (s + v->block_n - 1) / v->block_n * v->block_n;
}

/* The arguments of FA3_VT_KERNEL (templates/fa3.cu). */
static const gen_arg VT_ARGS[] = {GEN_ARG_V, GEN_ARG_SCRATCH, GEN_ARG_S, GEN_ARG_V_SB, GEN_ARG_V_SS, GEN_ARG_V_SH};

/* .vt: kernels[0] transposes V into the scratch (grid: blocks of VT_KEYS keys, Nkv x pieces of D
 * of 128 bytes, or one of 64 at D 64, B), kernels[1] is the attention kernel as described,
 * waiting for it, with the scratch's V^T tensor map in place of V's: boxes of one column block
 * (the widest of 128, 64 and 32 keys that divides block_n; FA3_CW_N) by D rows. */
static at_status describe_vt(const gen_variant *v, const at_shape *shape, gen_launch_desc *out)
{
  const int d = v->spec.head_dim, cw = v->block_n % 128 == 0 ? 128 : v->block_n % 64 == 0 ? 64 : 32;
  const int pieces = d < 128 ? 1 : d / 128; /* FA3_VT_PIECES */
  const long long keys = vt_keys(v, shape);
  const long long d_pieces = (long long)shape->kv_heads * pieces;
  if (d_pieces > 65535 || shape->batch > 65535)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "fa3 .vt transposes V on a grid (S / %d, Nkv x %d pieces of D, B): Nkv %d or batch %d is over 65535",
                   VT_KEYS, pieces, shape->kv_heads, shape->batch);
  out->kernels[1] = out->kernels[0];
  gen_kernel_launch *attn = &out->kernels[1], *tr = &out->kernels[0];
  for (int i = 0; i < attn->n_args; i++)
    if (attn->args[i] == GEN_ARG_TMAP_V) attn->args[i] = GEN_ARG_TMAP_SCRATCH;
  attn->waits_for_previous = 1; /* reads the V^T kernels[0] writes */
  out->tmap_rows[2] = 0;        /* V itself has no tensor map */
  memset(tr, 0, sizeof *tr);
  tr->entry = 1;
  if (shape->batch > 0 && shape->q_len > 0) {
    tr->grid[0] = (unsigned)((keys + VT_KEYS - 1) / VT_KEYS);
    tr->grid[1] = (unsigned)d_pieces, tr->grid[2] = (unsigned)shape->batch;
  }
  tr->block[0] = VT_THREADS, tr->block[1] = tr->block[2] = 1;
  tr->waits_for_previous = 1; /* the previous call's attention kernel may still read the scratch */
  tr->n_args = 0;
  at_status rc = gen_launch_append_args(tr, VT_ARGS, COUNT(VT_ARGS));
  if (rc != AT_OK) return rc;
  const size_t bytes = (size_t)shape->batch * (size_t)shape->kv_heads * (size_t)d * (size_t)keys;
  out->scratch_bytes = (bytes + 255) / 256 * 256;
  struct gen_scratch_tmap *m = &out->scratch_tmap;
  m->offset = 0;
  m->dims[0] = (unsigned long long)keys, m->dims[1] = (unsigned long long)d;
  m->dims[2] = (unsigned long long)shape->kv_heads, m->dims[3] = (unsigned long long)shape->batch;
  m->strides[0] = (unsigned long long)keys, m->strides[1] = m->strides[0] * (unsigned long long)d;
  m->strides[2] = m->strides[1] * (unsigned long long)shape->kv_heads;
  m->box[0] = (unsigned)cw, m->box[1] = (unsigned)d, m->box[2] = m->box[3] = 1;
  m->swizzle_bytes = cw;
  out->n_kernels = 2;
  return AT_OK;
}

/* The tail split's arguments after the tensor maps, and its combine kernel's (FA3_TAIL_COMBINE). */
static const gen_arg TAIL_ARGS[] = {GEN_ARG_Q_HEADS, GEN_ARG_TAIL_TILES, GEN_ARG_SPLITS, GEN_ARG_O_PART,
                                    GEN_ARG_LSE_PART};
static const gen_arg TAIL_COMBINE_ARGS[] = {GEN_ARG_O_PART, GEN_ARG_LSE_PART, GEN_ARG_O,     GEN_ARG_LSE,
                                            GEN_ARG_T,      GEN_ARG_Q_HEADS,  GEN_ARG_BATCH, GEN_ARG_TAIL_TILES,
                                            GEN_ARG_SPLITS, GEN_ARG_O_SB,     GEN_ARG_O_SS,  GEN_ARG_O_SH};
/* The combine: a CTA of TAIL_COMBINE_THREADS threads merges TAIL_COMBINE_ROWS rows of a split tile. */
enum { TAIL_COMBINE_THREADS = 128, TAIL_COMBINE_ROWS = 16 };

/* .tw<W>: the attention kernel (kernels[attn]) on a grid of one dimension, the work tiles in the
 * order of the padded grid (query block fastest, then head, then batch) with the last `tiles` of
 * them as `pieces` CTAs each; then the combine, a programmatic dependent, over the split tiles'
 * rows. The scratch holds the pieces' fp32 O rows (normalized, as decode's partials) and their
 * log-sum-exps (log2 units), after V^T's (.vt). A plan that splits nothing launches no combine. */
static at_status describe_tail(const gen_variant *v, const at_shape *shape, int attn, gen_launch_desc *out)
{
  gen_kernel_launch *k = &out->kernels[attn];
  at_status rc = gen_launch_append_args(k, TAIL_ARGS, COUNT(TAIL_ARGS));
  if (rc != AT_OK) return rc;
  const tail_plan plan = tail_plan_of(v, shape);
  if (k->grid[0]) {
    const long long tiles = (long long)k->grid[0] * k->grid[1] * k->grid[2];
    const long long ctas = tiles + (long long)plan.tiles * (plan.pieces - 1);
    if (ctas > 0x7fffffff)
      return at_fail(AT_ERR_UNSUPPORTED, "fa3 .tw launches its %lld work tiles on one grid dimension: over 2^31 - 1",
                     tiles);
    k->grid[0] = (unsigned)ctas, k->grid[1] = k->grid[2] = 1;
  }
  out->tail_tiles = plan.tiles, out->n_splits = plan.pieces;
  gen_kernel_launch *c = &out->kernels[out->n_kernels++];
  memset(c, 0, sizeof *c);
  c->entry = v->vt ? 2 : 1;
  c->grid[0] = (unsigned)((long long)plan.tiles * (v->block_m / TAIL_COMBINE_ROWS));
  c->grid[1] = c->grid[2] = 1;
  c->block[0] = TAIL_COMBINE_THREADS, c->block[1] = c->block[2] = 1;
  c->waits_for_previous = 1; /* reads the pieces' partials */
  if ((rc = gen_launch_append_args(c, TAIL_COMBINE_ARGS, COUNT(TAIL_COMBINE_ARGS))) != AT_OK) return rc;
  const size_t parts = (size_t)plan.tiles * (size_t)plan.pieces * (size_t)v->block_m;
  const size_t o_bytes = parts * (size_t)v->spec.head_dim * sizeof(float), lse_bytes = parts * sizeof(float);
  out->o_part_offset = (out->scratch_bytes + 255) / 256 * 256;
  out->lse_part_offset = out->o_part_offset + (o_bytes + 255) / 256 * 256;
  out->scratch_bytes = plan.tiles ? out->lse_part_offset + (lse_bytes + 255) / 256 * 256 : out->scratch_bytes;
  return AT_OK;
}

/* Warp-specialized variants take fa2's arguments (ragged ones with the offsets and totals after
 * them, gen_describe_fa_launch) and then the tensor maps of Q, K and V (.vt: of Q, K and the V^T
 * in the scratch), and .tw the tail split's (describe_tail). */
static at_status describe_launch(const gen_variant *v, const at_shape *shape, gen_launch_desc *out)
{
  at_status rc = gen_describe_fa_launch(v, shape, threads(v), smem_bytes(v), out);
  if (rc != AT_OK || !v->ws) return rc;
  gen_kernel_launch *k = &out->kernels[0];
  static const gen_arg TMAP_ARGS[] = {GEN_ARG_TMAP_Q, GEN_ARG_TMAP_K, GEN_ARG_TMAP_V};
  if ((rc = gen_launch_append_args(k, TMAP_ARGS, COUNT(TMAP_ARGS))) != AT_OK) return rc;
  out->tmap_rows[0] = v->block_m;
  /* One column block of a tile row: 128 bytes, or the whole 64-byte row of FP8 D 64 (FA3_CW_D). */
  out->tmap_box_bytes = tile_row_bytes(v) < 128 ? 64 : 128;
  /* Paged: K and V come as boxes of one page's rows (the page, or block_n if pages are longer). */
  const int ps = v->spec.page_size;
  out->tmap_rows[1] = out->tmap_rows[2] = ps && ps < v->block_n ? ps : v->block_n;
  if (v->persistent) return describe_persistent(shape, out);
  if (v->spec.mask != AT_MASK_NONE && !v->spec.ragged && k->grid[0]) { /* (Nq, B, query blocks): the template says why */
    if (k->grid[0] > 65535 || k->grid[2] > 65535)
      return at_fail(AT_ERR_UNSUPPORTED,
                     "causal warp-specialized fa3 launches (Nq, B, T / block_m): %u query blocks or batch %u is over 65535",
                     k->grid[0], k->grid[2]);
    const unsigned m = k->grid[0];
    k->grid[0] = k->grid[1], k->grid[1] = k->grid[2], k->grid[2] = m;
  }
  if (v->vt && (rc = describe_vt(v, shape, out)) != AT_OK) return rc;
  return v->tail_wave ? describe_tail(v, shape, v->vt ? 1 : 0, out) : AT_OK;
}

/* .vt modules hold the transpose kernel too (FA3_VT_KERNEL), .tw ones the combine (FA3_TAIL_COMBINE). */
static const char *const VT_ENTRIES[] = {"_vt", NULL};
static const char *const TAIL_ENTRIES[] = {"_tc", NULL};
static const char *const VT_TAIL_ENTRIES[] = {"_vt", "_tc", NULL};

static const char *const *extra_entries(const gen_variant *v)
{
  if (v->tail_wave) return v->vt ? VT_TAIL_ENTRIES : TAIL_ENTRIES;
  return v->vt ? VT_ENTRIES : NULL;
}

/* The speculative row max (templates/fa3.cu, FA3_SPEC) where its registers fit: not in FP8
 * .ws tiles at D 256 from block_n 128 (O alone holds 128 registers a thread; e4m3 128x128 .ws
 * spilled 8 bytes under nvcc and 20 under NVRTC, its ping-pong twin none), nor in 16-bit tiles of two consumers at block_n 192 and more (bf16 D 128
 * 128x192 spilled 4-24 bytes; its ping-pong twin did not, and gen --compile found no other
 * listed tile that did). */
static int speculative_max(const gen_variant *v)
{
  const int two_consumers = v->warps == 8, fp8 = at_dtype_is_fp8(v->spec.dtype);
  if (!v->ws) return 0;
  if (v->spec.head_dim > 192) return !(fp8 && v->block_n >= 128 && v->ws != 2);
  return !(two_consumers && !fp8 && v->block_n >= 192);
}

/* Linear P (templates/fa3.cu, FA3_LINP, v20): P's e4m3 codes from one FFMA in place of an
 * exponential, where P's rows are summed by the tensor cores (ones_rows) and the speculative max
 * runs. The value is the share: every FA3_LINP-th pair of S's n8 tiles (1: all).
 * D 128 takes every pair, two or three consumers (v37: after v24 made a linear score one FFMA,
 * all ran 1-4% faster than half at 128x224 and 7.8% faster than exact at 192x96, on the H100; O's
 * error 2.9e-2 -> 3.1e-2 against cuDNN's FP8 3.8e-2; v20 had measured half the faster share).
 * D 256 (v32: its sums since v31) takes half in two consumers: all measured level there (v37,
 * MMA-bound). D 64, where the exponentials bound the tile (twice the MMAs' clocks), takes every
 * pair since v41 made a linear score two instructions: +11.0% at B2 N16 8k against half, level
 * at B4 N8 T=S=1024 causal (H100; under v37's costlier codes all ran +1.8% and -5.7% there). */
static int linear_p(const gen_variant *v)
{
  if (!ones_rows(v) || !speculative_max(v)) return 0;
  if (v->spec.head_dim == 128 || v->spec.head_dim == 64) return 1;
  return v->warps == 8 ? 2 : 0;
}

static void ws_preamble(const gen_variant *v, const gen_target *target, const char *entry, gen_text *t)
{
  (void)target;
  if (v->ws) gen_text_put(t, "#define FA3_WS 1\n#define FA3_PINGPONG %d\n", v->ws == 2);
  if (v->persistent) gen_text_put(t, "#define FA3_PERSISTENT 1\n");
  if (v->ws) gen_text_put(t, "#define FA3_SPEC %d\n", speculative_max(v));
  if (linear_p(v)) gen_text_put(t, "#define FA3_LINP %d\n", linear_p(v));
  if (ones_block(v)) gen_text_put(t, "#define FA3_ONES_BLOCK 1\n");
  if (v->q_regs) gen_text_put(t, "#define FA3_QREG 1\n");
  if (v->vt)
    gen_text_put(t, "#define FA3_VT_PRE 1\n#define FA3_VT_KERNEL %s%s\n#define FA3_VT_KEYS %d\n#define FA3_VT_THREADS %d\n",
                 entry, VT_ENTRIES[0], VT_KEYS, VT_THREADS);
  if (v->tail_wave)
    gen_text_put(t, "#define FA3_TAIL 1\n#define FA3_TAIL_COMBINE %s%s\n#define FA3_TAIL_COMBINE_THREADS %d\n"
                    "#define FA3_TAIL_COMBINE_ROWS %d\n",
                 entry, TAIL_ENTRIES[0], TAIL_COMBINE_THREADS, TAIL_COMBINE_ROWS);
}

const gen_family_ops gen_fa3_family = {
    .name = "fa3",
    .template_file = "fa3.cu",
    .macro_prefix = "FA3",
    .split_kv = 0,
    .warp_specialized = 1,
    .ragged = 1,
    .paged = 1,
    .target_ok = target_ok,
    .spec_check = spec_check,
    .check = check,
    .threads = threads,
    .smem_bytes = smem_bytes,
    .register_estimate = register_estimate,
    .enumerate = enumerate,
    .default_variant = default_variant,
    .extra_preamble = ws_preamble,
    .helpers = wgmma_wrappers,
    .extra_entries = extra_entries,
    .describe_launch = describe_launch,
};
