/*
 * decode.c — the decode family (templates/decode.cu): split-KV attention for short queries
 * (T <= 16), the G query heads of one KV head and BLOCK_M tokens packed into the MMA's M
 * dimension so each K/V tile is read once per KV head. Two kernels per call: the split kernel
 * (fp32 partials and their log-sum-exp in the plan's scratch) and, with more than one split, the
 * combine kernel. One row of the family table (gen_decode_family, at the end).
 *
 * Key: decode.bf16.d128.causal-br.g4.bm16.bn64.w4.s4.sp4 — bm = query tokens per CTA (a power of
 * two >= T), sp = the split count asked for (the launch caps it by the K/V tiles there are);
 * .lc after it: no combine kernel, the last split of each row group to finish merges the
 * group's partials (one warp per row; listed where a group has at most 2 rows per warp); .cl:
 * the splits of a row group are one thread block cluster (sm_90) and merge in distributed
 * shared memory, no scratch at all. An
 * FP8 KV cache (K and V e4m3 or e5m2, Q and O f16 or bf16) adds .kv<dtype> after the dtype:
 * decode.bf16.kve4m3.d128.none.g4.bm1.bn256.w4.s3.sp8; its tiles are bytes, so block_n goes to
 * 256 at the shared memory of a 128-key 16-bit tile. Paged K/V (the vLLM layout: pools of pages
 * and a block table) adds .pg<page size> after the dtypes: decode.bf16.pg16.d128.none.g4...;
 * the same space and default as contiguous K/V of the shape's maxima (the split heuristic takes
 * the planned kv_len), the kernel gathers each tile's rows through the table.
 * .wg after the split count and merge (sm_90a, contiguous K/V, combine kernel): the packed rows
 * run on wgmma, one warpgroup (4 warps) per 64 rows, K and V loaded by TMA from a producer warp
 * and read by the tensor cores from shared memory in place
 * (decode.bf16.d128.causal-br.g8.bm16.bn64.w8.s3.sp4.wg); with FP8 K/V (D a multiple of 128) a
 * warpgroup loads and widens the tiles to f16. Listed first where a CTA packs more than 32 rows,
 * where mma.sync's warps each re-read every K/V tile. .wgi in its place (an FP8 KV cache, at most 64 rows): two
 * consumer warpgroups hold the same rows and take the K/V tiles in turn, each writing its own
 * partial, so a CTA of sp<N> writes 2 and the combine kernel merges 2N per row. With bf16 Q at
 * D 128, .wgi runs Q K^T on the FP8 tensor cores against K as TMA staged it (Q split exactly into
 * two E4M3 parts; only V is widened), and its stage count is the FP8 staging slots (up to 8; the
 * f16 V ring keeps 4): wg_k8. .wgi3 is the same kernel with three consumer warpgroups taking the
 * tiles in turn (3 partials a CTA; one widening warpgroup; 6 staging slots).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/family.h"

/* Threads of the combine kernel's CTA, and the splits each of its threads loads at a time
 * (the template's DEC_CB). */
#define COMBINE_THREADS 128
#define COMBINE_BATCH 4
/* The in-kernel merges (last CTA, cluster) run a few rows per CTA, one after another: past a
 * few rows per warp the combine kernel, its rows spread over the whole GPU, is the faster merge. */
#define MERGE_ROWS_PER_WARP 2
/* A cluster's splits: at most the portable cluster size. (16, which sm_90 allows when the launch
 * asks, measured slower at B=1 with 8 KV heads: the H200 holds 7 clusters of 16 one-CTA-per-SM
 * CTAs at once, so the eighth row group ran after the others: 13.5 against 8.0 us at S=4k.) */
#define CLUSTER_MAX 8
static const int k_cluster_splits[] = {8, 4};

static const int k_block_n[] = {64, 128, 32};
static const int k_block_n_kv8[] = {256, 128, 64, 32}; /* FP8 K/V: a key is half the bytes */
static const int k_warps[] = {4, 8};
static const int k_stages[] = {4, 3, 2};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- the template's size formulas (DEC_*_OF in templates/decode.cu) ---------------------------- */

static int mt_raw(int g, int bm) { return (g * bm + 15) / 16; }

/* 16-row tiles, padded so every warp layout divides evenly. */
static int m_tiles(int g, int bm, int w)
{
  int raw = mt_raw(g, bm);
  if (raw > w) return gen_round_up(raw, w);
  return raw > 4 ? 8 : raw > 2 ? 4 : raw;
}

static int warps_m(const gen_variant *v)
{
  int mt = m_tiles(v->spec.gqa, v->block_m, v->warps);
  return mt < v->warps ? mt : v->warps;
}

static int warps_n(const gen_variant *v) { return v->wg ? 1 : v->warps / warps_m(v); }

/* .wg: packed rows in whole warpgroups of 64 (DEC_WG_ROWS in the template). */
static int wg_rows(const gen_variant *v) { return (v->spec.gqa * v->block_m + 63) / 64 * 64; }

/* K and V are FP8 (KV8 in templates/decode.cu): byte tiles, widened in registers. */
static int kv8(const gen_spec *s) { return at_dtype_is_fp8(gen_spec_kv_dtype(s)); }

/* .wg with FP8 K/V: warpgroups that load and widen the tiles, two where the rows are one
 * warpgroup's (DEC_WG_WIDENERS); one for .wgi3, which widens only V and has three consumers to
 * give registers to. */
static int wideners(const gen_variant *v) { return v->warps == 4 && v->wg < 3 ? 2 : 1; }

/* .wgi (.wgi3): the K/V tiles go to two (three) consumer warpgroups in turn, each writing a
 * partial per CTA (DEC_WG_KSPLIT). */
static int partials_per_cta(const gen_variant *v) { return v->wg >= 2 ? v->wg : 1; }

/* .wg: one more warp, the TMA producer; with FP8 K/V the widening warpgroups. */
static int threads(const gen_variant *v)
{
  return 32 * (v->warps * partials_per_cta(v) + (v->wg ? (kv8(&v->spec) ? 4 * wideners(v) : 1) : 0));
}

/* Paged K/V: the ring of page ids after the K/V area, 2*stages-1 tiles' ids (DEC_IDS_BYTES_OF). */
static int page_id_bytes(const gen_variant *v)
{
  const int ps = v->spec.page_size;
  if (ps == 0) return 0;
  const int per_tile = ps >= v->block_n ? 1 : v->block_n / ps;
  return gen_round_up((2 * v->stages - 1) * per_tile * 4, 128);
}

/* .wg: Q, then STAGES K and V tiles, each in 128-byte column blocks on 1024-byte boundaries (FP8
 * K/V: also STAGES FP8 K and V tiles as TMA stages them; K8: f16 V alone, in a ring of at most 4),
 * 256 bytes of mbarriers, and 1024 bytes to align the dynamic area (DEC_WG_SMEM_BYTES). */
static int wg_k8(const gen_variant *v);
static int wg_smem_bytes(const gen_variant *v)
{
  const int d = v->spec.head_dim, staged = kv8(&v->spec) ? 2 * v->stages * v->block_n * d : 0;
  const int rings = wg_k8(v) ? 1 : 2; /* f16 V, or K and V (DEC_WG_RINGS) */
  /* DEC_WG_RING: .wgi K8's stages are staging slots beside a ring of 4 (.wgi3: 6 beside 6, 3 beside 9) */
  const int ring = wg_k8(v) && v->wg == 2 && v->stages > 4   ? 4
                   : wg_k8(v) && v->wg == 3 && v->stages > 6 ? 3
                                                             : v->stages;
  return 1024 + wg_rows(v) * d * 2 + rings * ring * v->block_n * d * 2 + staged + 256;
}

static int smem_bytes(const gen_variant *v)
{
  if (v->wg) return wg_smem_bytes(v);
  const int d = v->spec.head_dim, mt = m_tiles(v->spec.gqa, v->block_m, v->warps), wn = warps_n(v);
  const int kv_elem = (int)at_dtype_size(gen_spec_kv_dtype(&v->spec));
  const int q_bytes = mt * 16 * gen_round_up(2 * d, 128);
  const int stage_bytes = 2 * v->stages * v->block_n * gen_round_up(kv_elem * d, 128);
  const int merge_bytes = wn > 1 ? wn * mt * 16 * 8 + (wn - 1) * mt * 16 * (d + 8) * 4 : 0;
  return q_bytes + (stage_bytes > merge_bytes ? stage_bytes : merge_bytes) + page_id_bytes(v);
}

/* DEC_REG_ESTIMATE: O and S accumulators, Q fragments where they fit, 8 for a cross-warp merge
 * and a base for addresses, softmax state and loads in flight: 111 (calibrated on sm_90a ptxas;
 * the template's header lists the points), KV8_REG_BASE with FP8 K/V (the widening's
 * temporaries). Q moves to shared memory when keeping it would exceed 255. */
#define KV8_REG_BASE 111
/* .wg: O (D/2) and S (BN/2) fp32, P (BN/4) packed, and a base for addresses and softmax state. */
/* sm_90a ptxas (CUDA 13.0 NVRTC), with the producer warp: bn64 D128 154-156 registers; bn128 D128
 * spilled 444 bytes under the 168-register cap ptxas sets (below), so it is refused */
#define WG_REG_BASE 44
/* FP8 K/V: Q K^T reads Q's fragments from registers (DEC_WG_QREG), and setmaxnreg gives the
 * consumers what they need: at 64 rows 232 for .wg (one consumer warpgroup, two widening), 192
 * for .wgi (two and two), 152 for .wgi3 (three and one: the widener keeps 56; at 160 it would
 * keep 32 and spilled); at 128 rows 208 (two and one). The widening warpgroups keep what is
 * left: the launch's share (65536 / threads, in 8s) less what the consumers take from it. */
static int wg_setmaxnreg(const gen_variant *v) { return v->wg && kv8(&v->spec); }
/* .wgi with bf16 Q at D 128 (decode step 21, DEC_WG_K8): Q K^T on the FP8 tensor cores, K as TMA
 * staged it, Q as two E4M3 parts (exact for bf16; f16 Q keeps the f16 path). */
static int wg_k8(const gen_variant *v)
{
  return v->wg >= 2 && kv8(&v->spec) && v->spec.dtype == AT_DTYPE_BF16 && v->spec.head_dim == 128;
}
static int wg_q_in_regs(const gen_variant *v) { return wg_setmaxnreg(v) && !wg_k8(v); }
static int wg_consumer_regs(const gen_variant *v)
{
  return v->wg == 3 ? 152 : v->wg == 2 ? 192 : v->warps == 4 ? 232 : 208;
}
static int wg_helper_regs(const gen_variant *v)
{
  const int all = threads(v), consumers = 32 * v->warps * partials_per_cta(v), launch = 65536 / all / 8 * 8;
  return launch - consumers * (wg_consumer_regs(v) - launch) / (all - consumers);
}
static int register_estimate(const gen_variant *v)
{
  if (v->wg) /* .wgi packs P from S within the tile (S then dead); .wgi3 keeps Q in shared memory */
    return v->spec.head_dim / 2 + v->block_n / 2 + (v->wg >= 2 ? 0 : v->block_n / 4) + WG_REG_BASE +
           (wg_setmaxnreg(v) && v->wg < 3 ? v->spec.head_dim / 4 : 0); /* Q's fragments: f16, or K8's two E4M3 parts */
  const int d = v->spec.head_dim, mt = m_tiles(v->spec.gqa, v->block_m, v->warps);
  const int mtw = mt / warps_m(v), nw = v->block_n / warps_n(v);
  const int acc = mtw * (d / 2 + nw / 2) + (warps_n(v) > 1 ? 8 : 0);
  /* paged K/V past 2 stages: the ring's slot arithmetic (DEC_REG_PAGED) */
  const int paged = v->spec.page_size && v->stages > 2 ? v->stages - 2 : 0;
  const int qfrag = mtw * d / 4, base = (kv8(&v->spec) ? KV8_REG_BASE : 111) + paged;
  return acc + (acc + qfrag + base <= 255 ? qfrag : 0) + base;
}

static int target_ok(const gen_target *target) { return target->cc_major >= 8; }

static at_status spec_check(const gen_spec *s)
{
  if (s->dtype != AT_DTYPE_F16 && s->dtype != AT_DTYPE_BF16)
    return at_fail(AT_ERR_UNSUPPORTED, "decode runs f16 or bf16 inputs, not %s", at_dtype_name(s->dtype));
  const at_dtype kv = gen_spec_kv_dtype(s);
  if (kv != s->dtype && !at_dtype_is_fp8(kv))
    return at_fail(AT_ERR_UNSUPPORTED, "decode reads K and V in the dtype of Q (%s) or as FP8 (e4m3, e5m2), not %s",
                   at_dtype_name(s->dtype), at_dtype_name(kv));
  if (s->out_dtype != s->dtype)
    return at_fail(AT_ERR_UNSUPPORTED, "decode writes O of %s inputs as %s, not %s", at_dtype_name(s->dtype),
                   at_dtype_name(s->dtype), at_dtype_name(s->out_dtype));
  if (s->head_dim % 16 != 0 || s->head_dim < 32 || s->head_dim > 256)
    return at_fail(AT_ERR_UNSUPPORTED, "decode runs head dims that are multiples of 16 in 32..256, not %d",
                   s->head_dim);
  if (s->gqa < 1 || s->gqa > 64)
    return at_fail(AT_ERR_UNSUPPORTED, "decode packs GQA groups of 1..64 query heads, not %d", s->gqa);
  return AT_OK;
}

/* The cluster merge's partials (fp32 O rows of D + 4 floats and their lse) in the K/V area of
 * shared memory (DEC_PART_BYTES in the template). */
static int cluster_part_bytes(const gen_variant *v)
{
  const int rows = v->spec.gqa * v->block_m;
  return rows * (v->spec.head_dim + 4) * 4 + rows * 4;
}

static at_status check_merge(const gen_variant *v, const gen_target *target)
{
  static const char *const names[] = {"combine kernel", "last-CTA merge (.lc)", "cluster merge (.cl)"};
  if (v->merge < GEN_MERGE_KERNEL || v->merge > GEN_MERGE_CLUSTER)
    return at_fail(AT_ERR_INVALID, "decode merge %d is not 0 (kernel), 1 (.lc) or 2 (.cl)", v->merge);
  if (v->merge == GEN_MERGE_KERNEL) return AT_OK;
  if (v->spec.gqa * v->block_m > MERGE_ROWS_PER_WARP * v->warps)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "a %s takes at most %d rows per warp: %d query heads x %d tokens over %d warps",
                   names[v->merge], MERGE_ROWS_PER_WARP, v->spec.gqa, v->block_m, v->warps);
  if (v->merge != GEN_MERGE_CLUSTER) return AT_OK;
  if (target->cc_major < 9)
    return at_fail(AT_ERR_UNSUPPORTED, "a cluster merge (.cl) needs sm_90 or newer, not %s", target->arch);
  if (v->splits < 2 || v->splits > CLUSTER_MAX)
    return at_fail(AT_ERR_UNSUPPORTED, "a cluster merge (.cl) takes 2..%d splits (one cluster), not %d", CLUSTER_MAX,
                   v->splits);
  const int stage_bytes = 2 * v->stages * v->block_n * gen_round_up((int)at_dtype_size(gen_spec_kv_dtype(&v->spec)) * v->spec.head_dim, 128);
  if (cluster_part_bytes(v) > stage_bytes)
    return at_fail(AT_ERR_UNSUPPORTED, "a cluster merge's %d bytes of partials exceed the %d-byte K/V area",
                   cluster_part_bytes(v), stage_bytes);
  return AT_OK;
}

/* .wg: wgmma (sm_90a) on 16-bit K/V tiles in 128-byte column blocks, whole warpgroups of 64 rows. */
static at_status check_wg(const gen_variant *v, const gen_target *target)
{
  const int rows = v->spec.gqa * v->block_m;
  if (strcmp(target->arch, "sm_90a") != 0)
    return at_fail(AT_ERR_UNSUPPORTED, "decode .wg runs wgmma, which needs sm_90a, not %s", target->arch);
  if (v->spec.page_size) return at_fail(AT_ERR_UNSUPPORTED, "decode .wg reads contiguous K/V (no pages yet)");
  if (kv8(&v->spec) && v->spec.head_dim % 128 != 0)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "decode .wg with FP8 K/V needs a head dim that is a multiple of 128 (128-byte FP8 rows), not %d",
                   v->spec.head_dim);
  if (kv8(&v->spec) && wideners(v) == 2 && v->stages % 2 != 0)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "decode .wg with FP8 K/V and one consumer warpgroup has two widening warpgroups taking the tiles "
                   "in turn: an even stage count, not %d",
                   v->stages);
  if (v->merge != GEN_MERGE_KERNEL)
    return at_fail(AT_ERR_UNSUPPORTED, "decode .wg merges its splits by the combine kernel (no .lc, .cl)");
  if (v->spec.head_dim % 64 != 0)
    return at_fail(AT_ERR_UNSUPPORTED, "decode .wg needs a head dim that is a multiple of 64 (128-byte rows), not %d",
                   v->spec.head_dim);
  if (v->block_n != 64 && v->block_n != 128)
    return at_fail(AT_ERR_UNSUPPORTED, "decode .wg block_n must be 64 or 128, not %d", v->block_n);
  if (v->stages < 3)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "decode .wg needs 3 stages or more (tile t-1's V stays while tile t computes), not %d", v->stages);
  if (rows > 128)
    return at_fail(AT_ERR_UNSUPPORTED, "decode .wg packs at most 128 rows (two warpgroups), not %d (%d heads x %d tokens)",
                   rows, v->spec.gqa, v->block_m);
  if (v->warps != wg_rows(v) / 16)
    return at_fail(AT_ERR_UNSUPPORTED, "decode .wg runs one warpgroup per 64 rows: %d rows take %d warps, not %d",
                   rows, wg_rows(v) / 16, v->warps);
  if (v->wg >= 2 && v->stages % v->wg != 0)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "decode %s gives tile t to warpgroup t %% %d in stage t %% stages: a stage count that is a multiple "
                   "of %d, so that each stage has one warpgroup and its mbarrier phases come in order, not %d",
                   v->wg == 3 ? ".wgi3" : ".wgi", v->wg, v->wg, v->stages);
  if (v->wg == 3 && !wg_k8(v))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "decode .wgi3 runs Q K^T on the FP8 tensor cores (bf16 Q, FP8 K/V, D 128): its three consumer "
                   "warpgroups have the registers only there");
  if (v->wg >= 2 && !kv8(&v->spec))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "decode .wgi runs an FP8 KV cache (16-bit K/V at 64 rows is bound by HBM: .wgi ran 5-7%% slower "
                   "than .wg and mma.sync there)");
  if (v->wg >= 2 && rows > 64)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "decode %s runs %d warpgroups over the same 64 rows: at most 64 rows, not %d (%d heads x %d tokens)",
                   v->wg == 3 ? ".wgi3" : ".wgi", v->wg, rows, v->spec.gqa, v->block_m);
  return AT_OK;
}

static at_status check(const gen_variant *v, const gen_target *target)
{
  at_status rc = spec_check(&v->spec);
  if (rc != AT_OK) return AT_ERR_INVALID;
  if (v->spec.mask != AT_MASK_NONE && v->spec.mask != AT_MASK_CAUSAL_TL && v->spec.mask != AT_MASK_CAUSAL_BR)
    return at_fail(AT_ERR_INVALID, "unknown mask %d", (int)v->spec.mask);
  if (v->block_m != 1 && v->block_m != 2 && v->block_m != 4 && v->block_m != 8 && v->block_m != 16)
    return at_fail(AT_ERR_UNSUPPORTED, "decode block_m (query tokens per CTA) must be 1, 2, 4, 8 or 16, not %d",
                   v->block_m);
  if (v->block_n != 32 && v->block_n != 64 && v->block_n != 128 && !(kv8(&v->spec) && v->block_n == 256))
    return at_fail(AT_ERR_UNSUPPORTED, "decode block_n must be 32, 64 or 128 (or 256 with FP8 K/V), not %d",
                   v->block_n);
  if (v->warps != 4 && v->warps != 8)
    return at_fail(AT_ERR_UNSUPPORTED, "decode runs 4 or 8 warps, not %d", v->warps);
  /* K8: FP8 staging slots (16 KB a 64-key tile); .wgi3's 9 beside an f16 ring of 3 */
  const int max_stages = wg_k8(v) ? (v->wg == 3 ? 9 : 8) : 6;
  if (v->stages < 2 || v->stages > max_stages)
    return at_fail(AT_ERR_UNSUPPORTED, "%d stages (expected 2..%d)", v->stages, max_stages);
  if (v->splits < 1 || v->splits > 1024)
    return at_fail(AT_ERR_UNSUPPORTED, "decode split count %d is out of range (1..1024)", v->splits);
  if (v->wg && (rc = check_wg(v, target)) != AT_OK) return rc;
  if ((rc = check_merge(v, target)) != AT_OK) return rc;
  if ((v->block_n / warps_n(v)) % 16 != 0)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "block_n %d over %d warps along the keys gives %d keys per warp (a multiple of 16 is needed)",
                   v->block_n, warps_n(v), v->block_n / warps_n(v));
  /* .wg: ptxas caps registers as if the producer warp were a whole warpgroup (168 at 9 warps,
   * 65536 / 384 rounded down to 8), so the budget counts whole warpgroups. With FP8 K/V setmaxnreg
   * hands the consumers wg_consumer_regs: that is their budget. */
  int budget_threads = v->wg ? gen_round_up(threads(v), 128) : threads(v);
  if (wg_setmaxnreg(v)) budget_threads = 65536 / wg_consumer_regs(v);
  return gen_check_budgets(target, budget_threads, smem_bytes(v), register_estimate(v));
}

/* ---- splits ------------------------------------------------------------------------------------- */

static int next_pow2(int x)
{
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

/* CTAs of one variant that fit on a multiprocessor at once (shared memory and threads; 228 KB of
 * shared memory per SM on sm_90, 164 on sm_80, 100 elsewhere). */
static int ctas_per_sm(const gen_variant *v, const gen_target *target)
{
  int smem_sm = target->cc_major == 9 ? 228 * 1024 : target->smem_limit + 1024;
  int by_smem = smem_sm / (smem_bytes(v) + 1024), by_threads = 2048 / threads(v);
  int n = by_smem < by_threads ? by_smem : by_threads;
  return n > 0 ? n : 1;
}

/* As many CTAs as fit in one wave, never more: the grid without splits, spread over the K/V
 * tiles until the resident slots of all SMs are nearly full. Rounding down matters: at B=1,
 * S=4096 the 17 splits that round up gives (136 CTAs on 132 SMs) ran slower than 9 (H200). The
 * tuner also tries half and double. */
static long long one_wave_splits(const gen_variant *v, const gen_target *target, const at_shape *shape)
{
  long long base = (long long)shape->batch * shape->kv_heads * gen_tiles(shape->q_len, v->block_m);
  long long slots = (long long)target->sm_count * ctas_per_sm(v, target);
  return slots / base;
}

static int heuristic_splits(const gen_variant *v, const gen_target *target, const at_shape *shape)
{
  if (shape->kv_len <= 0 || shape->batch <= 0 || shape->q_len <= 0) return 1;
  long long tiles = gen_tiles(shape->kv_len, v->block_n);
  long long splits = one_wave_splits(v, target, shape);
  if (splits > tiles) splits = tiles;
  if (splits > 256) splits = 256;
  return splits < 1 ? 1 : (int)splits;
}

/* ---- the space and the default ------------------------------------------------------------------ */

/* The in-kernel merges save the combine kernel's launch and tail, which matter only where the
 * whole call is a few microseconds: grids of at most an eighth of the SMs before splitting (B x
 * Nkv x token blocks; B=1, Nkv=8 on 132 SMs). On the H200 the last-CTA merge ran 0.4-1.0 us
 * slower than the combine kernel launched as a programmatic dependent (docs/perf.md, "##
 * decode", steps 4 and 5); both are listed there for the tuner to check. */
static int in_kernel_merge_worth_trying(const gen_variant *v, const gen_target *target, const at_shape *shape)
{
  const long long base = (long long)shape->batch * shape->kv_heads * gen_tiles(shape->q_len, v->block_m);
  return gen_tiles(shape->kv_len, v->block_n) > 1 && base * 8 <= target->sm_count;
}

static int serves(const at_shape *shape) { return shape->q_len >= 1 && shape->q_len <= GEN_DECODE_MAX_T; }

static at_status append(gen_variant *out, int cap, int *n, const gen_variant *v)
{
  for (int i = 0; i < *n; i++)
    if (memcmp(&out[i], v, sizeof *v) == 0) return AT_OK;
  if (*n == cap) return at_fail(AT_ERR_INVALID, "more than %d variants for this shape", cap);
  out[(*n)++] = *v;
  return AT_OK;
}

/* Half of a one-wave split count, rounded up; 0 where there is no half (one split). */
static int half_wave(int wave) { return wave > 1 ? (wave + 1) / 2 : 0; }

/* The split counts tried for a tile: the one that fills one wave (first), half of it and double
 * (0 where there is none). */
static void split_tries(const gen_variant *v, const gen_target *target, const at_shape *shape, int tries[3])
{
  const int h = heuristic_splits(v, target, shape);
  tries[0] = h, tries[1] = half_wave(h), tries[2] = 2 * h;
}

/* The variants of one tile size (warps, stages, and the split counts around one wave). */
static at_status enumerate_block_n(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                                   int block_n, gen_variant *out, int cap, int *n)
{
  const int bm = next_pow2(shape->q_len);
  for (int b = 0; b < COUNT(k_warps); b++)
    for (int c = 0; c < COUNT(k_stages); c++) {
      gen_variant v = {GEN_FAMILY_DECODE, *spec, bm, block_n, k_warps[b], k_stages[c], 1, 0, 0, 0, 0, 0, 0, 0};
      if (check(&v, target) != AT_OK) continue;
      int tries[3];
      split_tries(&v, target, shape, tries);
      for (int s = 0; s < COUNT(tries); s++) {
        if (tries[s] < 1) continue;
        v.splits = tries[s];
        for (int m = GEN_MERGE_KERNEL; m <= GEN_MERGE_LAST_CTA; m++) {
          /* the last-CTA merge at the one-wave split count only: the space stays under GEN_MAX_VARIANTS */
          if (m != GEN_MERGE_KERNEL && (s > 0 || tries[s] < 2 || !in_kernel_merge_worth_trying(&v, target, shape)))
            continue;
          v.merge = m;
          if (check(&v, target) != AT_OK) continue;
          at_status rc = append(out, cap, n, &v);
          if (rc != AT_OK) return rc;
        }
      }
      /* One cluster per row group: its splits merge on chip. */
      v.merge = GEN_MERGE_CLUSTER;
      for (int s = 0; s < COUNT(k_cluster_splits) && in_kernel_merge_worth_trying(&v, target, shape); s++) {
        v.splits = k_cluster_splits[s];
        if (gen_tiles(shape->kv_len, block_n) < v.splits || check(&v, target) != AT_OK) continue;
        at_status rc = append(out, cap, n, &v);
        if (rc != AT_OK) return rc;
      }
      v.merge = GEN_MERGE_KERNEL;
    }
  return AT_OK;
}

/* .wg where a CTA packs more than 32 rows (two m16 tiles a warp of mma.sync and up): 64- and
 * 128-key tiles, the stages, and the split counts around one wave, as above. (Half the tokens a
 * CTA where they fill two warpgroups, one warpgroup each and two CTAs an SM, ran slower on the
 * H200: B8 T16 S64k GQA 8 380.6 against 356.7 us; docs/perf.md, "decode .wg".) */
static const int k_wg_block_n[] = {64, 128};
/* 6, 8: K8 only (FP8 staging slots; wg_stages_listed), first (docs/perf.md, decode steps 21 and
 * 22), so that a tuning budget of 20 candidates reaches them */
static const int k_wg_stages[] = {6, 8, 4, 3, 5};
#define WG_MIN_ROWS 33
static int wg_listed(const gen_spec *spec, const gen_target *target, int bm)
{
  return !spec->page_size && (!kv8(spec) || spec->head_dim % 128 == 0) && strcmp(target->arch, "sm_90a") == 0 &&
         spec->gqa * bm >= WG_MIN_ROWS;
}

/* K8's stages are FP8 staging slots beside a smaller f16 V ring: 6 and 8 (.wgi), 6 (.wgi3: a ring
 * of 6 too, each stage one warpgroup's; decode step 22c); the others keep 3-5 stages of both rings. */
static int wg_stages_listed(const gen_variant *v)
{
  /* .wgi3 with 9 slots beside a ring of 3 (decode step 25) is taken by key but not listed: on the
   * H200 it won at S16k (47.6 -> 46.8 us) and lost at S64k (146.6 -> 149.9, GQA 4 T16 281.8 ->
   * 291.5), where the default takes .wgi3 */
  if (v->wg == 3) return v->stages == 6;
  return wg_k8(v) ? v->stages >= 4 && v->stages <= 8 : v->stages < 6;
}

static at_status enumerate_wg(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                              gen_variant *out, int cap, int *n)
{
  const int bm = next_pow2(shape->q_len);
  if (!wg_listed(spec, target, bm)) return AT_OK;
  for (int a = 0; a < COUNT(k_wg_block_n); a++) {
    if (gen_tile_too_long(k_wg_block_n[a], shape->kv_len)) continue;
    for (int c = 0; c < COUNT(k_wg_stages); c++) {
      for (int wg = 1; wg <= 3; wg++) {
        gen_variant v = {GEN_FAMILY_DECODE, *spec, bm, k_wg_block_n[a], 4, k_wg_stages[c], 1, 0, 0, 0, 0, wg, 0, 0};
        v.warps = wg_rows(&v) / 16;
        if (!wg_stages_listed(&v) || check(&v, target) != AT_OK) continue;
        int tries[3];
        split_tries(&v, target, shape, tries);
        for (int s = 0; s < COUNT(tries); s++) {
          if (tries[s] < 1) continue;
          v.splits = tries[s];
          at_status rc = append(out, cap, n, &v);
          if (rc != AT_OK) return rc;
        }
      }
    }
  }
  return AT_OK;
}

static at_status enumerate(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                           gen_variant *out, int cap, int *n)
{
  if (!serves(shape)) return AT_OK;
  at_status rc = enumerate_wg(spec, target, shape, out, cap, n);
  if (rc != AT_OK) return rc;
  const int *block_n = kv8(spec) ? k_block_n_kv8 : k_block_n;
  const int n_block_n = kv8(spec) ? COUNT(k_block_n_kv8) : COUNT(k_block_n);
  const int first = *n;
  for (int a = 0; a < n_block_n; a++) {
    if (block_n[a] > 32 && gen_tile_too_long(block_n[a], shape->kv_len)) continue; /* far longer than S */
    if ((rc = enumerate_block_n(spec, target, shape, block_n[a], out, cap, n)) != AT_OK) return rc;
  }
  /* An FP8 KV cache has no other family: where S is shorter than every tile that fits (MHA with
   * a few tokens and S < 32), the shortest tile that fits, however long for S. */
  for (int len = 32; kv8(spec) && *n == first && len <= 256; len *= 2)
    if ((rc = enumerate_block_n(spec, target, shape, len, out, cap, n)) != AT_OK) return rc;
  return AT_OK;
}

/* Best first, from the H200 runs in docs/perf.md ("## decode"): 128-key tiles won every measured
 * shape (B 1-64, S 4k-16k, T 1 and 16): 4 warps and 3 stages for one token, 8 warps and 2 stages
 * for 16 tokens (64 packed rows). The default merges its splits in the combine kernel everywhere:
 * the cluster merge (.cl, listed where the grid is small) was B=1's default until decode step 27
 * moved the wait for the previous grid below the index arithmetic; since then the plain split
 * ran faster at B1 GQA 4 S 1k-16k (H100: 5.3 against 6.0 us at S1k, 9.6 against 10.0 at S4k;
 * H200 S4k: 7.8 against 8.5; docs/perf.md, "decode step 28"). */
typedef struct pref {
  int min_t, block_n, warps, stages;
} pref;

/* FP8 K/V (not measured yet): the same bytes per stage as the 16-bit choice, twice the keys
 * (256-key tiles; 128 where 256 does not fit or is too long for S). */
static const pref k_prefs_kv8[] = {{9, 256, 8, 2}, {9, 128, 8, 2}, {1, 256, 4, 3}, {1, 256, 4, 2},
                                   {1, 128, 4, 3}, {1, 128, 8, 2}, {1, 128, 4, 2}, {1, 64, 4, 3},
                                   {1, 64, 8, 2},  {1, 64, 4, 2},  {1, 32, 8, 2}};

/* One token (T=1) with 16-bit K/V: half the one-wave split count. Such a CTA does little
 * arithmetic per byte, so about half a wave of CTAs already draws HBM's rate, and fewer, longer
 * CTAs pay their start, partial write and merge fewer times: the tuner picked the half on 13 of
 * configs/decode.yaml's 16 bf16 T=1 shapes on the H200 (docs/perf.md, "decode step 29"). More
 * tokens keep the one-wave count, which won at T 2-16. */
static int default_splits(const gen_variant *v, const gen_target *target, const at_shape *shape)
{
  const int wave = heuristic_splits(v, target, shape);
  return shape->q_len == 1 && !kv8(&v->spec) && wave > 1 ? half_wave(wave) : wave;
}

static int default_variant(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                           gen_variant *out)
{
  static const pref k_prefs[] = {
      {9, 128, 8, 2}, {1, 128, 4, 3}, {1, 128, 4, 2}, {1, 128, 8, 2}, {1, 64, 4, 4},
      {1, 64, 4, 3},  {1, 64, 8, 3},  {1, 32, 8, 2},  {1, 64, 4, 2}};
  const pref *prefs = kv8(spec) ? k_prefs_kv8 : k_prefs;
  const int n_prefs = kv8(spec) ? COUNT(k_prefs_kv8) : COUNT(k_prefs);
  if (!serves(shape)) return 0;
  /* 64 packed rows or more on sm_90a: .wg with 64-key tiles and 4 stages (H200, B8 T16 GQA 8:
   * 280.0 against mma.sync's best 423.9 us at S64k, 29.5 against 37.3 at S4k; docs/perf.md,
   * "decode .wg"). At 64 rows the two once ran even with 16-bit K/V; since steps 32-35 .wg wins
   * there at D 128 (decode step 36, H100: GQA 8 T8 S4k +6.8%, GQA 4 T16 S1k +11%, S8k +2.1%, S64k
   * +1.3%), but not at D 64 (f16 GQA 8 T8 S4k -1.1%), which keeps mma.sync's default. An
   * FP8 KV cache takes .wg wherever it is listed (B8 S64k: 128 rows 271.0 against 470.4 us, 64
   * rows 195.4 and 384.8 against 246.5 and 494.2). FP8 at 64 rows or fewer: .wgi, two consumer
   * warpgroups on the rows (steps 18, 19: B8 S64k GQA 8 T8 164.8 against .wg's 175.7 us, GQA 4
   * T16 323 against 346; S16k 48.6 against 50.7). */
  const int bm = next_pow2(shape->q_len);
  const int rows = spec->gqa * bm;
  if (wg_listed(spec, target, bm) && (kv8(spec) || rows > 64 || (rows == 64 && spec->head_dim == 128))) {
    gen_variant v = {GEN_FAMILY_DECODE, *spec, bm, 64, 4, 4, 1, 0, 0, 0, 0, 1, 0, 0};
    v.warps = wg_rows(&v) / 16;
    if (kv8(spec) && v.warps == 4) v.wg = 2;
    /* K8 (bf16 Q): 6 FP8 staging slots (step 21, H200 B8 S64k causal-br: GQA 8 T8 159.9 us
     * against 166.5 at 4 and 158.8 at 8; GQA 4 T16 314.7 against 325.7 at 4 and 312.6-318.9 at 8) */
    if (wg_k8(&v)) v.stages = 6;
    /* K8 over long splits: .wgi3 with 6 slots (steps 22-22c, H200 B8 causal-br: S64k GQA 8 T8 143.2
     * us, as 9 slots' 143.7 in the same run; with 9 slots against .wgi 151.5-153.5 us against
     * 155.6-158.7, GQA 4 T16 295.0-299.3 against 305.4-312.9; at S16k 47.1-47.3 against 45.8-46.3,
     * where its third partial and fixed part cost more than it gains; 32k lies between the two
     * lengths measured) */
    if (wg_k8(&v) && shape->kv_len >= 32768) v.wg = 3, v.stages = 6;
    if (check(&v, target) == AT_OK) {
      v.splits = heuristic_splits(&v, target, shape);
      *out = v;
      return 1;
    }
  }
  for (int i = 0; i < n_prefs; i++) {
    if (shape->q_len < prefs[i].min_t) continue;
    if (prefs[i].block_n > 128 && gen_tile_too_long(prefs[i].block_n, shape->kv_len)) continue;
    gen_variant v = {GEN_FAMILY_DECODE, *spec, next_pow2(shape->q_len), prefs[i].block_n, prefs[i].warps,
                     prefs[i].stages, 1, 0, 0, 0, 0, 0, 0, 0};
    if (check(&v, target) != AT_OK) continue;
    v.splits = default_splits(&v, target, shape);
    *out = v;
    return 1;
  }
  return 0;
}

/* ---- emission and launch ------------------------------------------------------------------------ */

static const char *const EXTRA_ENTRIES[] = {"_combine", NULL};

/* The combine's split groups per row: the fewest (doubling, at most one thread a float4 chunk of
 * the CTA's threads) whose batches of COMBINE_BATCH loads cover the variant's partials per row in
 * one round; its CTA then takes combine_rows rows (the template's DEC_SG and DEC_CR). A split
 * count cut at run time (fewer tiles) only leaves groups idle. */
static int combine_split_groups(const gen_variant *v)
{
  const int most = COMBINE_THREADS / (v->spec.head_dim / 4), parts = v->splits * partials_per_cta(v);
  int sg = 1;
  while (2 * sg <= most && sg * COMBINE_BATCH < parts) sg *= 2;
  return sg;
}

static int combine_rows(const gen_variant *v)
{
  return COMBINE_THREADS / (combine_split_groups(v) * (v->spec.head_dim / 4));
}

/* Every decode module holds the combine kernel, whether or not a call launches it. */
static const char *const *extra_entries(const gen_variant *v)
{
  (void)v;
  return EXTRA_ENTRIES;
}

static void extra_preamble(const gen_variant *v, const gen_target *target, const char *entry, gen_text *t)
{
  (void)target;
  const at_dtype kv = gen_spec_kv_dtype(&v->spec);
  gen_text_put(t, "#define DEC_COMBINE %s%s\n#define DEC_COMBINE_THREADS %d\n#define DEC_COMBINE_SG %d\n",
               entry, EXTRA_ENTRIES[0], COMBINE_THREADS, combine_split_groups(v));
  gen_text_put(t, "#define DEC_LAST_CTA %d\n", v->merge == GEN_MERGE_LAST_CTA);
  if (v->merge == GEN_MERGE_CLUSTER) gen_text_put(t, "#define DEC_CLUSTER %d\n", v->splits);
  if (kv != v->spec.dtype)
    gen_text_put(t, "#define DEC_KV_DTYPE %d /* %s */\n#define DEC_KV8_REG_BASE %d\n", (int)kv, at_dtype_name(kv),
                 KV8_REG_BASE);
  if (v->wg) gen_text_put(t, "#define DEC_WG 1\n");
  if (v->wg >= 2) gen_text_put(t, "#define DEC_WG_KSPLIT %d\n", v->wg);
  if (wg_k8(v)) gen_text_put(t, "#define DEC_WG_K8 1\n");
  if (wg_q_in_regs(v)) gen_text_put(t, "#define DEC_WG_QREG 1\n");
  if (wg_setmaxnreg(v))
    gen_text_put(t, "#define DEC_WG_CONSUMER_REGS %d\n#define DEC_WG_HELPER_REGS %d\n", wg_consumer_regs(v),
                 wg_helper_regs(v));
}

/* .wg: its two wgmma wrappers, S = Q K^T (m64 x block_n, both from shared memory, K-major) and
 * O += P V (m64 x D, P from registers, V read MN-major with the transpose bit). */
static void helpers(const gen_variant *v, gen_text *t)
{
  if (!v->wg) return;
  /* FP8 K/V: f16 MMAs (the tiles widen to f16, bf16 Q is rewritten as f16) */
  const char *in = kv8(&v->spec) ? "f16" : at_dtype_name(v->spec.dtype);
  gen_text_put(t, "/* wgmma wrappers generated by generator/decode.c for this variant */\n");
  gen_wgmma_ss(t, "dec_mma_qk", v->block_n, 16, in, in, "1, 1, 0, 0");
  /* FP8 K/V: Q K^T with Q's fragments in registers (DEC_WG_QREG) */
  if (wg_q_in_regs(v)) gen_wgmma_rs_acc(t, "dec_mma_qk_rs", v->block_n, 16, in, in, "1, 1, 0");
  /* K8: Q's E4M3 parts from registers against the staged FP8 K (8-bit operands: K-major, no
   * transpose flags) */
  if (wg_k8(v) && v->wg == 2)
    gen_wgmma_rs_acc(t, "dec_mma_qk8", v->block_n, 32, "e4m3", at_dtype_name(gen_spec_kv_dtype(&v->spec)), "1, 1");
  /* .wgi3: Q's E4M3 parts from shared memory (DEC_WG_Q8_SMEM) */
  if (wg_k8(v) && v->wg == 3)
    gen_wgmma_ss(t, "dec_mma_qk8_ss", v->block_n, 32, "e4m3", at_dtype_name(gen_spec_kv_dtype(&v->spec)), "1, 1");
  gen_wgmma_rs(t, "dec_mma_pv", v->spec.head_dim, 16, in, in, "1, 1, 1");
}

static const gen_arg SPLIT_ARGS[] = {
    GEN_ARG_Q,    GEN_ARG_K,    GEN_ARG_V,         GEN_ARG_O,          GEN_ARG_LSE,        GEN_ARG_O_PART,
    GEN_ARG_LSE_PART, GEN_ARG_T, GEN_ARG_S,        GEN_ARG_SPLITS,     GEN_ARG_KEYS_PER_SPLIT,
    GEN_ARG_SCALE_LOG2, GEN_ARG_Q_SB, GEN_ARG_Q_SS, GEN_ARG_Q_SH,      GEN_ARG_K_SB,       GEN_ARG_K_SS,
    GEN_ARG_K_SH, GEN_ARG_V_SB, GEN_ARG_V_SS,      GEN_ARG_V_SH,       GEN_ARG_O_SB,       GEN_ARG_O_SS,
    GEN_ARG_O_SH, GEN_ARG_DESCALE_K, GEN_ARG_DESCALE_V, GEN_ARG_SPLIT_COUNTERS,
};
static const gen_arg COMBINE_ARGS[] = {
    GEN_ARG_O_PART, GEN_ARG_LSE_PART, GEN_ARG_O,    GEN_ARG_LSE,  GEN_ARG_T,
    GEN_ARG_Q_HEADS, GEN_ARG_SPLITS,  GEN_ARG_O_SB, GEN_ARG_O_SS, GEN_ARG_O_SH,
};

/* Split kernel grid (splits, Nkv * ceil(T / block_m), B); combine grid (ceil(Nq * T / rows), B)
 * (combine_rows), or with
 * .lc no combine and one int32 counter per row group (B x Nkv x ceil(T / block_m)) after the
 * partials. The split count is the variant's, capped by the K/V tiles there are, and then
 * trimmed so no split is empty: keys_per_split = ceil(tiles / splits) tiles. */
static at_status describe_launch(const gen_variant *v, const at_shape *shape, gen_launch_desc *out)
{
  const long long tiles = shape->kv_len > 0 ? gen_tiles(shape->kv_len, v->block_n) : 1;
  long long splits = v->splits < tiles ? v->splits : tiles;
  const long long tiles_per_split = (tiles + splits - 1) / splits;
  splits = (tiles + tiles_per_split - 1) / tiles_per_split;
  /* A cluster is compiled for exactly v->splits CTAs: trailing splits may be empty (they count
   * as -inf in the merge). */
  if (v->merge == GEN_MERGE_CLUSTER) splits = v->splits;
  const long long token_blocks = ((long long)shape->q_len + v->block_m - 1) / v->block_m;
  if ((long long)shape->kv_heads * token_blocks > 65535)
    return at_fail(AT_ERR_UNSUPPORTED, "%d kv heads x %lld token blocks exceed the grid's y limit 65535",
                   shape->kv_heads, token_blocks);
  out->align_bytes = 16;
  const long long parts = splits * partials_per_cta(v); /* partials per row */
  out->n_splits = (int)parts;
  out->keys_per_split = (int)(tiles_per_split * v->block_n);
  const int empty = shape->batch == 0 || shape->q_len == 0;
  gen_kernel_launch *k = &out->kernels[0];
  k->entry = 0;
  if (!empty) {
    k->grid[0] = (unsigned)splits, k->grid[1] = (unsigned)(shape->kv_heads * token_blocks);
    k->grid[2] = (unsigned)shape->batch;
  }
  k->block[0] = (unsigned)threads(v), k->block[1] = k->block[2] = 1;
  k->smem_bytes = (unsigned)smem_bytes(v);
  /* Its launch may run under the previous kernel's tail (sm_90+); not a cluster's: clusters
   * placed while the previous grid still held its SMs ran 0.1-0.3 us slower at B=1 (H200, S 128
   * to 16k) than clusters placed on an idle GPU. */
  k->waits_for_previous = v->merge != GEN_MERGE_CLUSTER;
  k->n_args = 0;
  at_status rc = gen_launch_append_args(k, SPLIT_ARGS, COUNT(SPLIT_ARGS));
  if (rc == AT_OK && v->spec.page_size) rc = gen_launch_append_paged_args(k); /* after split_counters */
  if (rc == AT_OK && v->wg) { /* .wg: Q, K and V by TMA; Q in boxes of the packed rows, K and V of block_n keys */
    static const gen_arg TMAP_ARGS[] = {GEN_ARG_TMAP_Q, GEN_ARG_TMAP_K, GEN_ARG_TMAP_V};
    rc = gen_launch_append_args(k, TMAP_ARGS, COUNT(TMAP_ARGS));
    out->tmap_rows[0] = v->block_m, out->tmap_q_heads = v->spec.gqa;
    out->tmap_rows[1] = out->tmap_rows[2] = v->block_n;
    out->tmap_kv_promotion = kv8(&v->spec) && v->spec.head_dim <= 128 ? 128 : 256;
  }
  if (rc != AT_OK) return rc;
  out->n_kernels = 1;
  if (splits > 1 && v->merge == GEN_MERGE_CLUSTER) return AT_OK; /* partials stay on chip */
  if (parts > 1) {
    const size_t rows = (size_t)shape->batch * shape->q_heads * shape->q_len * (size_t)parts;
    out->lse_part_offset = (rows * v->spec.head_dim * sizeof(float) + 255) / 256 * 256;
    out->scratch_bytes = out->lse_part_offset + (rows * sizeof(float) + 255) / 256 * 256;
    if (v->merge == GEN_MERGE_LAST_CTA) {
      const size_t groups = (size_t)shape->batch * shape->kv_heads * (size_t)token_blocks;
      out->counters_offset = out->scratch_bytes;
      out->scratch_bytes += (groups * sizeof(int) + 255) / 256 * 256;
      return AT_OK;
    }
    gen_kernel_launch *c = &out->kernels[1];
    c->entry = 1;
    if (!empty) {
      const long long rows = (long long)shape->q_heads * shape->q_len, per_cta = combine_rows(v);
      c->grid[0] = (unsigned)((rows + per_cta - 1) / per_cta), c->grid[1] = (unsigned)shape->batch;
      c->grid[2] = 1;
    }
    c->block[0] = COMBINE_THREADS, c->block[1] = c->block[2] = 1;
    c->waits_for_previous = 1; /* its launch overlaps the split kernel's tail (sm_90+) */
    c->n_args = 0;
    if ((rc = gen_launch_append_args(c, COMBINE_ARGS, COUNT(COMBINE_ARGS))) != AT_OK) return rc;
    out->n_kernels = 2;
  }
  return AT_OK;
}

const gen_family_ops gen_decode_family = {
    .name = "decode",
    .template_file = "decode.cu",
    .macro_prefix = "DEC",
    .split_kv = 1,
    .paged = 1,
    .wgmma_rows = 1,
    .target_ok = target_ok,
    .spec_check = spec_check,
    .check = check,
    .threads = threads,
    .smem_bytes = smem_bytes,
    .register_estimate = register_estimate,
    .enumerate = enumerate,
    .default_variant = default_variant,
    .extra_preamble = extra_preamble,
    .helpers = helpers,
    .extra_entries = extra_entries,
    .describe_launch = describe_launch,
};
