/*
 * generator.h — the variant space of the fused kernels and their source emission. Prefix gen_.
 *
 * A variant is a kernel family, the shape specialization it is compiled for (dtype, head dim, mask,
 * GQA ratio, log-sum-exp or not) and the family's tuning parameters. Its key is stable and readable,
 * and parses back into the same variant:
 *
 *     fa2.bf16.d128.causal.g4.bm128.bn64.w4.s2[.sp<N>][.ws|.wspp][.vt][.qr][.tw<W>][.pers][.o<dtype>][.lse]
 *     (decode also: decode.<dtype>[.kv<dtype>][.pg<page size>].d128..., below)
 *         |    |    |      |  |     |    |  |   |     |       |    |      `- output dtype, FP8 inputs only
 *         |    |    |      |  |     |    |  |   |     |       |    |         (obf16, of16, oe4m3, oe5m2);
 *         |    |    |      |  |     |    |  |   |     |       |    |         16-bit inputs write their own
 *         |    |    |      |  |     |    |  |   |     |       |    `- persistent (fa3 after .ws/.wspp, causal
 *         |    |    |      |  |     |    |  |   |     |       |       masks): at most one CTA per SM walks
 *         |    |    |      |  |     |    |  |   |     |       |       the work tiles, longest first
 *         |    |    |      |  |     |    |  |   |     |       `- V^T ahead (fa3, FP8, after .ws/.wspp): a
 *         |    |    |      |  |     |    |  |   |     |          first kernel transposes V into the
 *         |    |    |      |  |     |    |  |   |     |          scratch, the attention kernel loads
 *         |    |    |      |  |     |    |  |   |     |          V^T tiles by TMA like K
 *         |    |    |      |  |     |    |  |   |     `- warp-specialized (fa3: TMA producer warpgroup;
 *         |    |    |      |  |     |    |  |   |        .wspp: with consumer ping-pong)
 *         |    |    |      |  |     |    |  |   `- split count, split-KV families only (decode)
 *         |    |    |      |  |     |    |  `- K/V pipeline stages in shared memory
 *         |    |    |      |  |     |    `--- warps per CTA
 *         |    |    |      |  |     `-------- keys per K/V tile (block_n)
 *         |    |    |      |  `-------------- query rows per CTA (block_m)
 *         |    |    |      `----------------- GQA ratio Nq / Nkv (1: MHA)
 *         |    |    `------------------------ mask: none, causal (top-left), causal-br (bottom-right)
 *         |    `----------------------------- head dim
 *         `---------------------------------- family; then the dtype of Q (and of K and V), and
 *                                             .kv<dtype> after it where K and V differ (decode's
 *                                             FP8 KV cache: decode.bf16.kve4m3.d128...), and
 *                                             .pg<N> after those where K and V are paged in
 *                                             pages of N tokens (decode.bf16.pg16.d128...), and
 *                                             .rg / .rgq after those where Q and K/V, or Q
 *                                             alone, are ragged (fa2.bf16.rg.d128...)
 *
 *     .qr (fa3 after .ws/.wspp[.vt]): Q K^T with Q in registers (wgmma's A operand from registers,
 *     loaded once per work tile), where the tile leaves the consumers room for them
 *
 *     .tw<W> (fa3 after .ws/.wspp[.vt][.qr], no mask): the tail split for a wave of W CTAs: the call's
 *     last query tiles, which would leave part of the last wave empty, run as pieces of their keys
 *     (templates/fa3.cu "Tail split")
 *
 *     e.g. fa2.e4m3.d128.none.g1.bm128.bn64.w4.s2.obf16,
 *          fa3.e4m3.d128.causal.g1.bm128.bn128.w8.s2.ws.vt.obf16 (V^T ahead),
 *          decode.bf16.kve4m3.d128.none.g4.bm1.bn256.w4.s3.sp8,
 *          decode.bf16.kve4m3.pg16.d128.causal-br.g4.bm16.bn128.w8.s2.sp4 (paged K/V),
 *          fa2.bf16.rg.d128.causal-br.g4.bm128.bn64.w4.s2.lse (ragged Q and K/V: varlen prefill)
 *
 * Families, one file and one row of the family table each (generator/table.c; the row type is
 * generator/family.h):
 * fa2 (templates/fa2.cu, generator/fa2.c): mma.sync, f16/bf16/FP8, sm_80 and newer; also ragged
 * (.rg, .rgq: varlen prefill, the offsets and packed totals appended to the arguments).
 * fa3 (templates/fa3.cu, generator/fa3.c): wgmma, sm_90a only; FP8 inputs with bf16/f16 output,
 * or f16/bf16 in and out; head dim 64/128/256, block_m = 16 * warps (one or two warpgroups), block_n 64 or 128; the same
 * kernel arguments and launch as fa2. Warp-specialized fa3 (.ws, .wspp; f16/bf16): a TMA producer
 * warpgroup and 2 or 3 consumer warpgroups (warps 8 or 12), block_n a multiple of 16 up to 192,
 * head dims 64/96/128/192/256; fa2's arguments plus three tensor maps (gen_launch_desc.tmap_rows);
 * for f16/bf16 also ragged (.rg, .rgq; not .pers), the offsets and totals before the maps.
 * Persistent fa3 (.ws.pers, .wspp.pers; f16/bf16, causal masks): the same kernel looping over work
 * tiles (a block of query rows of one head), longest first, the q heads of one KV head side by
 * side; the grid is at most one CTA per SM (gen_launch_desc.work_tiles says how the runtime sizes
 * it), and the kernel also takes Nq and the work tile count.
 * decode (templates/decode.cu, generator/decode.c): T <= 16, f16/bf16, and f16/bf16 Q with FP8
 * K/V (an FP8 KV cache, .kve4m3/.kve5m2 in the key), sm_80+; the G query heads of a KV head and
 * block_m tokens share one K/V pass; the keys are split over `splits` CTAs (.sp<N> in the key)
 * whose fp32 partials a second kernel combines (scratch the caller owns), or, with .lc, the last
 * split of each row group to finish (counters in the scratch, which starts zeroed).
 * gen_enumerate lists every family that applies, decode first; the tuner picks.
 *
 * FP8 (e4m3, e5m2): Q, K and V in one FP8 type with per-tensor fp32 descales (device scalars,
 * rt_fp8_args), mma.sync m16n8k32 (sm_89 and newer; sm_80/86/87 targets refuse FP8), head dim a
 * multiple of 16, block_n a multiple of 32, output bf16 by default (f16, e4m3, e5m2 on request;
 * FP8 output takes scale_o and writes amax_o). templates/fa2.cu explains P's scaling and V's layout.
 *
 * Data flow: shape -> gen_enumerate (pruned variants) -> gen_emit (source) -> runtime: rt_compile ->
 * cubin -> rt_variant_load -> gen_launch_describe (grid, block, shared memory, argument order) ->
 * rt_variant_launch. Constraints (shared memory, register budget, tile shapes) are checked before
 * anything is compiled; the template repeats them as static_asserts.
 *
 * The generator is pure C: no CUDA header, no runtime. It never compiles or launches.
 */
#ifndef AT_GENERATOR_GENERATOR_H
#define AT_GENERATOR_GENERATOR_H

#include <stddef.h>

#include "attntune.h"
#include "core/core.h"

/* Indexes of the family table (generator/table.c). */
typedef enum gen_family {
  GEN_FAMILY_FA2 = 0, /* FlashAttention-2 style, mma.sync, sm_80+ */
  GEN_FAMILY_FA3 = 1, /* Hopper: wgmma, FP8/bf16/f16, sm_90a only (templates/fa3.cu) */
  GEN_FAMILY_DECODE = 2, /* short queries: split-KV, GQA group packed into M (templates/decode.cu) */
  GEN_FAMILY_COUNT
} gen_family;

/* How the splits of a split-KV variant merge their partials. */
typedef enum gen_merge {
  GEN_MERGE_KERNEL = 0,   /* a combine kernel reads them from the scratch (no suffix) */
  GEN_MERGE_LAST_CTA = 1, /* the last split of each row group to finish, from the scratch (.lc) */
  GEN_MERGE_CLUSTER = 2,  /* the splits of a row group are one thread block cluster and merge
                           * through distributed shared memory; sm_90+, 2-8 splits (.cl) */
} gen_merge;

/* What a variant is specialized for; a variant runs exactly the shapes with this spec. */
typedef struct gen_spec {
  at_dtype dtype; /* of Q, K, V */
  int head_dim;
  at_mask mask;
  int gqa;      /* Nq / Nkv */
  int with_lse; /* also writes the log-sum-exp */
  at_dtype out_dtype; /* of O: dtype for f16/bf16; bf16 (default), f16, e4m3 or e5m2 for FP8 */
  /* of K and V where it differs from dtype (e4m3 or e5m2 with f16/bf16 Q, decode only); AT_KV_SAME
   * (0) otherwise, so a spec written without it and a spec from a shape compare equal */
  at_dtype kv_dtype;
  /* K and V in pages of this many tokens, gathered through a block table (the vLLM layout,
   * include/attntune.h "Serving layouts"; decode only: 1, 16, 32, 64, 128, 256); 0: contiguous
   * [B, S, Nkv, D], so a spec from at_shape (which has no page size) is contiguous */
  int page_size;
  /* Q (and O), and maybe K and V, packed along the sequence axis with int32 cu_seqlens
   * (gen_ragged; include/attntune.h "Serving layouts"; fa2 and fa3's warp-specialized kernel):
   * 0 (GEN_RAGGED_NONE), so a spec from at_shape has padded tensors */
  int ragged;
} gen_spec;

/* Which tensors of a variant are ragged (packed [total, N, D] with cu_seqlens [B + 1]): the
 * layouts of the serving API the prefill families run. The key spells it after the dtypes and
 * any page size: .rg (Q and K/V packed), .rgq (Q packed, K/V padded [B, S, Nkv, D]). */
typedef enum gen_ragged {
  GEN_RAGGED_NONE = 0,
  GEN_RAGGED_QKV = 1, /* .rg: Q/O with cu_seqlens_q, K/V with cu_seqlens_kv */
  GEN_RAGGED_Q = 2,   /* .rgq: Q/O with cu_seqlens_q, K/V padded */
} gen_ragged;

/* The dtype K and V are in: kv_dtype, or dtype where it is AT_KV_SAME. */
at_dtype gen_spec_kv_dtype(const gen_spec *spec);

typedef struct gen_variant {
  gen_family family;
  gen_spec spec;
  int block_m; /* query rows per CTA */
  int block_n; /* keys per K/V tile */
  int warps;
  int stages; /* K/V tiles resident in shared memory */
  int splits; /* CTAs sharing one row's keys (split-KV families); 0 where the family has none */
  int ws;     /* fa3: 1 = warp-specialized (a TMA producer warpgroup; .ws in the key), 2 = that
               * with ping-pong between the consumer warpgroups (.wspp), else 0 */
  int persistent; /* fa3 with ws >= 1: 1 = one CTA per SM loops over the work tiles (.pers), else 0 */
  int merge; /* split-KV: how the splits' partials merge (gen_merge; its suffix after .sp<N>) */
  /* fa3 with FP8 inputs and ws >= 1: 1 = V transposed once per call by a first kernel into the
   * scratch, the attention kernel loading V^T tiles by TMA (.vt), else 0 */
  int vt;
  /* decode: 1 = the packed rows on wgmma (.wg; sm_90a): one warpgroup per 64 rows instead of
   * mma.sync warps; 2 = that at 64 rows with two warpgroups taking the K/V tiles in turn (.wgi),
   * each writing its own partial; 3 = with three (.wgi3); else 0 */
  int wg;
  /* fa3 warp-specialized without a mask: W > 0 = the last query tiles of the call, those that
   * would leave a wave of W CTAs (the device's SMs) part empty, each split along the keys into
   * pieces whose partials a combine kernel merges (.tw<W>; templates/fa3.cu "Tail split");
   * else 0 */
  int tail_wave;
  /* fa3 warp-specialized: 1 = Q K^T takes Q's A fragments from registers, loaded from shared
   * memory once per work tile, instead of re-reading Q there for every K/V tile (.qr), else 0 */
  int q_regs;
} gen_variant;

/* What the variants are built for: an NVRTC arch and the dynamic shared memory a block may use. */
typedef struct gen_target {
  char arch[16]; /* "sm_90a" */
  int cc_major, cc_minor;
  int smem_limit; /* bytes */
  int sm_count;   /* multiprocessors (split heuristics); a typical count for the arch when unknown */
} gen_target;

#define GEN_KEY_MAX 96
#define GEN_ENTRY_MAX (GEN_KEY_MAX + 16)
#define GEN_MAX_VARIANTS 192 /* upper bound on gen_enumerate's output for one shape */
#define GEN_MAX_KERNELS 3   /* kernels one variant launches, in order (split-KV: partials, combine;
                             * fa3 .vt: V's transpose, attention; fa3 .tw: then the combine) */
/* The longest query the decode family serves (and the tuner and reports rate in TB/s of K/V):
 * longer queries are prefill (fa2, fa3). */
#define GEN_DECODE_MAX_T 16

/* A target for an NVRTC arch, with the opt-in shared memory limit of that compute capability
 * (227 KB on sm_90, 163 KB on sm_80/87, 99 KB on sm_86/89/120). */
at_status gen_target_for_arch(const char *arch, gen_target *out);
/* The same with an explicit limit (from rt_device_info.smem_per_block_optin). */
at_status gen_target_make(const char *arch, int smem_limit, gen_target *out);
/* Is FP8 (mma.sync m16n8k32 with e4m3/e5m2 operands) available on target? sm_89 and newer. */
int gen_target_has_fp8(const gen_target *target);

/* The spec of a shape, refusing what the family cannot run (message names the field and value).
 * The output dtype is at_dtype_default_out(shape->dtype); _out asks for another one. */
at_status gen_spec_from_shape(gen_family family, const at_shape *shape, gen_spec *out);
at_status gen_spec_from_shape_out(gen_family family, const at_shape *shape, at_dtype out_dtype,
                                  gen_spec *out);
/* The spec of a shape whose K and V are paged in pages of page_size tokens (0: contiguous, what
 * gen_spec_from_shape_out gives). at_shape has no page size: the runtime takes it from the
 * plan's at_serving_layout. Families that read contiguous K/V only refuse page_size > 0. */
at_status gen_spec_from_shape_paged(gen_family family, const at_shape *shape, at_dtype out_dtype, int page_size,
                                    gen_spec *out);
/* The same for any serving layout: page_size as above and ragged (gen_ragged) saying which
 * tensors are packed with cu_seqlens. The shape's T and S are then the planned maxima. Families
 * without ragged kernels refuse ragged != 0 (AT_ERR_UNSUPPORTED naming the families that have). */
at_status gen_spec_from_shape_serving(gen_family family, const at_shape *shape, at_dtype out_dtype, int page_size,
                                      int ragged, gen_spec *out);
/* The key spelling of a gen_ragged value: "", "rg", "rgq"; NULL when out of range. */
const char *gen_ragged_name(int ragged);
/* AT_OK when the variant's spec is the spec of shape. at_shape does not carry an output dtype
 * (yet), so the variant's own output dtype is taken as the caller's (checked to be allowed).
 * K/V contiguous: a paged variant does not match (gen_variant_matches_paged). */
at_status gen_variant_matches(const gen_variant *v, const at_shape *shape);
at_status gen_variant_matches_paged(const gen_variant *v, const at_shape *shape, int page_size);
at_status gen_variant_matches_serving(const gen_variant *v, const at_shape *shape, int page_size, int ragged);

/* A family's name ("fa2") and the family of a name; -1 when unknown. */
const char *gen_family_name(gen_family family);
int gen_family_of_name(const char *name, size_t len);
/* Does name look like a variant key (a family name and a dot: "fa2.", "fa3."), as opposed to the
 * implementation names "naive" and "cudnn"? Cheap, sets no error; gen_variant_parse validates. */
int gen_is_variant_key(const char *name);
/* Key <-> variant. Parsing is strict: every field, in order, nothing else. */
at_status gen_variant_key(const gen_variant *v, char *buf, size_t size);
at_status gen_variant_parse(const char *key, gen_variant *out);
/* The entry point: the key with '.' and '-' made '_' (fa2_bf16_d128_causal_g4_bm128_bn64_w4_s2). */
at_status gen_entry_name(const gen_variant *v, char *buf, size_t size);
/* Every entry point the variant's module holds, in launch order (names[0] is gen_entry_name). */
at_status gen_entry_names(const gen_variant *v, char names[GEN_MAX_KERNELS][GEN_ENTRY_MAX], int *n);

/* Constraints: AT_OK if the variant can be built for target, else AT_ERR_UNSUPPORTED with the reason
 * (AT_ERR_INVALID if the variant itself is malformed). */
at_status gen_variant_check(const gen_variant *v, const gen_target *target);
int gen_threads(const gen_variant *v);
int gen_smem_bytes(const gen_variant *v);     /* dynamic shared memory per CTA */
/* Per thread, what pruning uses; for FP8 the sm_90 figure (MMAs lowered to f16, the larger one). */
int gen_register_estimate(const gen_variant *v);

/* The pruned space for a shape: every variant that passes the constraints, in a fixed order.
 * Known T and S (> 0) also drop tiles far larger than the sequence. */
at_status gen_enumerate(const at_shape *shape, const gen_target *target, gen_variant *out, int cap,
                        int *n_out);
/* The same with an explicit output dtype (FP8 inputs: bf16, f16, e4m3, e5m2). */
at_status gen_enumerate_out(const at_shape *shape, at_dtype out_dtype, const gen_target *target,
                            gen_variant *out, int cap, int *n_out);
/* The same for K/V paged in pages of page_size tokens (0: gen_enumerate_out): the families that
 * gather pages (decode) for queries of 1 to GEN_DECODE_MAX_T tokens; AT_ERR_UNSUPPORTED naming
 * why otherwise. */
at_status gen_enumerate_paged(const at_shape *shape, int page_size, const gen_target *target, gen_variant *out,
                              int cap, int *n_out);
/* The same for any serving layout (page_size, ragged: gen_spec_from_shape_serving): ragged Q and
 * K/V (or ragged Q with padded K/V) list the fa2 variants and fa3's warp-specialized ones;
 * AT_ERR_UNSUPPORTED naming why where no family runs the layout. */
at_status gen_enumerate_serving(const at_shape *shape, int page_size, int ragged, const gen_target *target,
                                gen_variant *out, int cap, int *n_out);
/* The variant used when nothing is tuned for a shape. */
at_status gen_default_variant(const at_shape *shape, const gen_target *target, gen_variant *out);
/* The same for paged K/V (0: gen_default_variant): the decode family's default, or
 * AT_ERR_UNSUPPORTED saying why there is none. */
at_status gen_default_variant_paged(const at_shape *shape, int page_size, const gen_target *target,
                                    gen_variant *out);
/* The same for any serving layout: for ragged tensors the first prefill family (fa3 on sm_90a
 * for 16-bit inputs where its warp-specialized kernel fits, else fa2) whose default applies. */
at_status gen_default_variant_serving(const at_shape *shape, int page_size, int ragged, const gen_target *target,
                                      gen_variant *out);

/* The exact source NVRTC compiles: #define preamble, templates/common.cuh, the family template.
 * Caller frees *source. */
at_status gen_emit(const gen_variant *v, const gen_target *target, char **source);

/* The version of a family's kernels: a hash of its template and common.cuh ("fa2-1a2b3c4d").
 * Results measured under another version of a family's kernels are stale; the other families'
 * results are not. */
void gen_family_version(gen_family family, char *buf, size_t size);
/* Every family's version and the naive reference's, joined by '.': the version a tuning run
 * records ("fa2-...fa3-...naive-..."). */
void gen_templates_version(char *buf, size_t size);
/* Is a result of impl (a variant key, "cudnn" or "naive") recorded under the joined version
 * `recorded` still current under the joined version `now`? A variant needs its family's part
 * unchanged, the naive kernels theirs; cuDNN's result needs every part unchanged (any family may
 * now beat it). When not, why holds the reason. */
int gen_version_current(const char *recorded, const char *now, const char *impl, char *why, size_t why_size);

/* ---- launch descriptions --------------------------------------------------------------------- */

/* What a kernel argument is; the runtime fills each from the call (at_tensors, at_fp8_args, the
 * shape, the plan's scratch). */
typedef enum gen_arg {
  GEN_ARG_Q, GEN_ARG_K, GEN_ARG_V, GEN_ARG_O, GEN_ARG_LSE, /* device pointers */
  GEN_ARG_DESCALE_Q, GEN_ARG_DESCALE_K, GEN_ARG_DESCALE_V, GEN_ARG_SCALE_O, GEN_ARG_AMAX_O,
  GEN_ARG_O_PART, GEN_ARG_LSE_PART, /* scratch: fp32 partials of split-KV variants */
  GEN_ARG_SPLIT_COUNTERS, /* scratch: int32 per row group, the splits done (last-CTA merge; zeroed
                           * when the scratch is allocated, reset by the merging CTA) */
  GEN_ARG_T, GEN_ARG_S, GEN_ARG_Q_HEADS, GEN_ARG_SPLITS, GEN_ARG_KEYS_PER_SPLIT, /* int */
  GEN_ARG_SCALE_LOG2, /* float: softmax scale times log2(e) */
  GEN_ARG_Q_SB, GEN_ARG_K_SB, GEN_ARG_V_SB, GEN_ARG_O_SB, /* long long: batch strides */
  GEN_ARG_Q_SS, GEN_ARG_Q_SH, GEN_ARG_K_SS, GEN_ARG_K_SH, /* int: seq and head strides */
  GEN_ARG_V_SS, GEN_ARG_V_SH, GEN_ARG_O_SS, GEN_ARG_O_SH,
  GEN_ARG_TMAP_Q, GEN_ARG_TMAP_K, GEN_ARG_TMAP_V, /* TMA tensor maps (128 bytes each, by value) */
  GEN_ARG_WORK_TILES, /* int: persistent kernels' work tile count (gen_launch_desc.work_tiles) */
  /* paged K/V (spec.page_size > 0), from at_serving_tensors: K and V are pools of pages whose
   * stride is GEN_ARG_K_SB / GEN_ARG_V_SB (the layout's batch stride) */
  GEN_ARG_BLOCK_TABLE,       /* const int32 [B, max_pages_per_seq] */
  GEN_ARG_SEQLENS_KV,        /* const int32 [B] */
  GEN_ARG_MAX_PAGES_PER_SEQ, /* int */
  GEN_ARG_NUM_PAGES,         /* int: pages in each pool */
  GEN_ARG_SCRATCH,      /* device pointer: the scratch itself (fa3 .vt: V^T, written by kernels[0]) */
  GEN_ARG_TMAP_SCRATCH, /* TMA tensor map over the scratch (gen_launch_desc.scratch_tmap) */
  /* ragged tensors (spec.ragged), from at_serving_tensors: packed rows found through the offsets;
   * the tensors' batch strides are 0 and unused */
  GEN_ARG_CU_SEQLENS_Q,  /* const int32 [B + 1] */
  GEN_ARG_CU_SEQLENS_KV, /* const int32 [B + 1]; NULL for .rgq */
  GEN_ARG_TOTAL_Q,       /* int: rows of packed Q and O */
  GEN_ARG_TOTAL_KV,      /* int: rows of packed K and V (0 for .rgq) */
  GEN_ARG_BATCH,         /* int: B, the sequences (grid x runs over their query blocks) */
  GEN_ARG_TAIL_TILES,    /* int: fa3 .tw: the query tiles split into GEN_ARG_SPLITS pieces */
  GEN_ARG_COUNT
} gen_arg;

enum { GEN_MAX_ARGS = 40 };

typedef struct gen_kernel_launch {
  int entry; /* index into gen_entry_names */
  unsigned grid[3], block[3];
  unsigned smem_bytes; /* dynamic */
  int n_args;
  gen_arg args[GEN_MAX_ARGS]; /* in the kernel's parameter order */
  /* 1: the kernel waits for the one before it (griddepcontrol.wait, sm_90+) before reading what
   * it wrote, so it may be launched while that one runs (programmatic dependent launch) */
  int waits_for_previous;
} gen_kernel_launch;

/* How one call of a variant runs: its kernels in order on one stream, the scratch they share
 * (fp32 partials; the caller provides scratch_bytes, 256-byte aligned), the tensor rules. A kernel
 * with grid[0] == 0 has nothing to do (B or T zero). */
typedef struct gen_launch_desc {
  int n_kernels;
  gen_kernel_launch kernels[GEN_MAX_KERNELS];
  size_t scratch_bytes;
  size_t o_part_offset;   /* GEN_ARG_O_PART = scratch + this (0 but for fa3 .vt.tw: after V^T) */
  size_t lse_part_offset; /* GEN_ARG_LSE_PART = scratch + this */
  size_t counters_offset; /* GEN_ARG_SPLIT_COUNTERS = scratch + this (last-CTA variants) */
  /* split-KV: partials per row (GEN_ARG_SPLITS; CTAs per row, grid[0], times the partials a CTA
   * writes: 2 for decode .wgi) and keys per CTA */
  int n_splits, keys_per_split;
  int align_bytes; /* tensors' pointers and seq/head/batch strides: multiples of this many bytes */
  int zero_amax;   /* amax_o must start at 0 (the kernels atomically max into it) */
  /* TMA variants: box rows of the Q, K and V tensor maps (GEN_ARG_TMAP_*), 0 when unused. A map
   * views its tensor as (D, seq, heads, B) with the call's strides; a box is tmap_box_bytes of D
   * (one column block in the swizzle of as many bytes: 128, or 64 where a row is 64 bytes, as FP8
   * D 64's; 0 reads as 128) by that many rows; rows and columns past the tensor read 0. */
  int tmap_rows[3];
  int tmap_box_bytes;
  /* The L2 promotion of the K and V maps, in bytes (128 or 256; 0 reads as 256). Decode asks 128
   * where a head's row of FP8 K/V is one 128-byte box: 256 also fetched the next head's row, and
   * cost its kernels up to 13% at S64k (docs/perf.md, decode step 37). */
  int tmap_kv_promotion;
  /* Q's map in the packed order of decode .wg (token t, then its heads): (D, heads, seq, B), boxes
   * of tmap_q_heads heads by tmap_rows[0] tokens, so that box row r is token r / heads, head
   * r % heads. 0: Q's map is (D, seq, heads, B) as above. */
  int tmap_q_heads;
  /* A tensor map over the scratch (GEN_ARG_TMAP_SCRATCH; fa3 .vt: the V^T that kernels[0] writes
   * and kernels[1] loads), unused when box[0] is 0: bytes (CU_TENSOR_MAP_DATA_TYPE_UINT8) at
   * scratch + offset, dims[0] innermost, strides[i] the bytes between steps of dims[i + 1], boxes of
   * box[0..3] bytes / rows in the swizzle of swizzle_bytes (32, 64 or 128) bytes. */
  struct gen_scratch_tmap {
    size_t offset;
    unsigned long long dims[4], strides[3];
    unsigned box[4];
    int swizzle_bytes;
  } scratch_tmap;
  /* Persistent variants (.pers): kernels[0] is one CTA per work tile as described (grid
   * {work_tiles, 1, 1}, a launch that is correct as it stands), and every CTA walks the tiles
   * blockIdx.x, + gridDim.x, ... up to GEN_ARG_WORK_TILES. The generator knows no device, so the
   * runtime narrows grid[0] to min(work_tiles, SMs x ctas_per_sm) of the device the variant was
   * loaded on (rt_variant_prepare): each CTA then stays resident and the tiles' prologues and
   * epilogues overlap other tiles' loops. 0 and 0 for other variants. */
  int work_tiles;
  int ctas_per_sm;
  /* fa3 .tw: the query tiles split along the keys (the call's last ones), each into n_splits
   * pieces; 0 where the tail plan splits nothing (the launch is then the plain kernel's) */
  int tail_tiles;
} gen_launch_desc;

/* The launch of v for shape (checked to be v's spec; sizes in range of the grid). */
at_status gen_launch_describe(const gen_variant *v, const at_shape *shape, gen_launch_desc *out);
/* A ragged variant's CTAs along grid x for a call of total_q packed query rows: the query blocks
 * of its sequences, bounded by total_q (the description's grid[0] is the bound over the maxima). */
unsigned gen_ragged_query_blocks(const gen_variant *v, const at_shape *shape, int total_q);

#endif /* AT_GENERATOR_GENERATOR_H */
