/*
 * fa2.cu — FlashAttention-2 style fused attention forward (mma.sync, fp32 accumulate): f16/bf16
 * inputs with m16n8k16, FP8 (E4M3/E5M2, sm_89+) inputs with m16n8k32.
 *
 * What it computes (JAX: jax.nn.dot_product_attention(q, k, v, is_causal=...), BSHD):
 *   q: (B, T, Nq, D)   k, v: (B, S, Nkv, D)   o: (B, T, Nq, D)   lse: (B, Nq, T) fp32, natural log
 *   o[b,i,h] = sum_j softmax_j(scale * q[b,i,h] . k[b,j,h/G]) v[b,j,h/G],  G = Nq / Nkv
 *   over the visible keys j: all (FA2_MASK 0), j <= i (1, top-left), j <= i + S - T (2, bottom-right).
 *   A row with no visible key writes o = 0 and lse = -inf.
 *   FP8: q, k, v hold codes with per-tensor fp32 descales (x_real = decode(code) * descale, see
 *   include/attntune_fp8.h), and the formula above applies to the real values.
 *
 * The generator's preamble defines, before common.cuh:
 *   AT_IN_DTYPE, AT_OUT_DTYPE   f16 -> f16, bf16 -> bf16; e4m3/e5m2 -> bf16, f16, e4m3 or e5m2
 *   FA2_KERNEL                  entry point name (the variant key as an identifier)
 *   FA2_HEAD_DIM                D, a multiple of 8 in 32..256 (of 16 for FP8)
 *   FA2_MASK                    AT_MASK_NONE / AT_MASK_CAUSAL_TL / AT_MASK_CAUSAL_BR
 *   FA2_GQA                     G = Nq / Nkv (q head h reads kv head h / G)
 *   FA2_LSE                     1: also write the log-sum-exp
 *   FA2_BLOCK_M, FA2_BLOCK_N    query rows per CTA, keys per K/V tile
 *   FA2_WARPS, FA2_STAGES       warps per CTA, K/V tiles in flight in shared memory
 *   FA2_SMEM_LIMIT              dynamic shared memory a block may have on the target
 *   FA2_FP8_VIA_F16             FP8 only: 1 to run each m16n8k32 FP8 product as FP8 -> f16
 *                               conversions and two m16n8k16 f16 MMAs (sm_90, below), 0 for the
 *                               m16n8k32 FP8 instruction (sm_89, sm_100+)
 *
 *   FA2_RAGGED                  0 padded; 1 (.rg) Q, O, K and V packed along the sequence axis,
 *                               2 (.rgq) Q and O packed, K and V padded or paged (below)
 *   FA2_PAGE_SIZE               0: K/V contiguous; 1, 16, 32, 64, 128 or 256 (.pg<N>): K/V paged
 *                               in pages of that many tokens ("Paged K/V" below)
 *
 * Ragged (varlen prefill, include/attntune.h "Serving layouts"): q, o: (total_q, Nq, D) with
 * int32 cu_seqlens_q [B + 1]; k, v: (total_kv, Nkv, D) with cu_seqlens_kv (.rg) or (B, S, Nkv, D)
 * (.rgq); lse: (Nq, total_q). T and S are the planned maxima. The grid is (query blocks, Nq, 1):
 * x runs over the query blocks of the sequences one after another (common.cuh at_ragged_block,
 * from each sequence's last block under a causal mask; the launch sizes x from total_q, so no CTA
 * starts past a sequence's end). Each CTA reads its sequence's T_b, S_b and first rows from the
 * offsets (clamped into the tensors, at_ragged_rows) and runs the padded kernel's loop with T_b
 * and S_b: keys past S_b are never loaded (zero-filled) and masked, the
 * masks apply per sequence (bottom-right aligns T_b with S_b), and rows past T_b are neither
 * read nor stored. The batch strides of packed tensors are ignored.
 *
 * Paged K/V (FA2_PAGE_SIZE = PS > 0; the vLLM layout of include/attntune.h "Serving layouts"),
 * with padded Q (prefill or a chunk of it, T > 16: shorter queries run on the decode family) or
 * ragged Q (.rgq): k, v are pools [num_pages, PS, Nkv, D], pages k_sb / v_sb elements apart,
 * rows k_ss / v_ss apart within a page; block_table int32 [B, max_pages_per_seq]; seqlens_kv
 * int32 [B]. Key j of sequence b is row j % PS of page block_table[b * max_pages_per_seq + j /
 * PS]; the sequence has S_b = clamp(seqlens_kv[b], 0, S) keys, which replaces S (the key range,
 * the bottom-right offset S_b - T_b). Four arguments follow the others: block_table, seqlens_kv,
 * max_pages_per_seq, num_pages.
 *   Page ids (IDS = BLOCK_N / PS per tile, 1 when PS >= BLOCK_N: a tile never crosses a page,
 *   both powers of two) are staged in shared memory after V, in a ring of 2*STAGES-2 slots, by
 *   4-byte cp.async in the pipeline's own groups: K_n's group carries the ids of tile
 *   n + STAGES - 1, so when iteration t issues tile t + STAGES - 1 its ids landed with K_t (the
 *   wait that is there anyway) and the table's latency hides behind the tiles in flight. Only the
 *   ids of the first 2*STAGES-2 tiles are waited for, once per CTA, with Q. Slots: the ids of
 *   tile n are written at iteration n - 2*STAGES + 2 (after its barrier) and read at iteration
 *   n - STAGES + 1, so 2*STAGES-2 slots never overlap a write with a read.
 *   A table entry outside [0, num_pages) is never dereferenced: its keys are zero-filled (a
 *   caller's error; at_serving_check refuses such tables on the host). The bytes read from HBM
 *   are those of contiguous K/V; per 16-byte copy one shared-memory read of its page id and a
 *   64-bit multiply-add.
 *
 * Work split: grid (ceil(T / BLOCK_M), Nq, B); CTA (x, h, b) owns query rows
 * [m0, m0 + BLOCK_M) of head h. Warp w owns rows [m0 + w*RW, m0 + (w+1)*RW), RW = BLOCK_M / WARPS,
 * as MT = RW / 16 slices of 16 rows, so softmax needs no cross-warp reduction. Within an m16n8
 * accumulator, lane = 4*g + t holds rows g and g+8, columns 2t and 2t+1 of each 8-column tile.
 *
 * Shared memory (dynamic): Q [BLOCK_M][ROW], then STAGES x K [BLOCK_N][ROW], then STAGES x V
 * [BLOCK_N][ROW]. A row is D elements padded to whole 128-byte lines (ROW_BYTES); the 16-byte chunk
 * c of row r lives at chunk c ^ (r % 8) (the 128-byte swizzle), which makes ldmatrix and the
 * cp.async stores conflict-free. Columns D..DK-1 (DK = D rounded up to the MMA's k extent) are
 * zero-filled; columns past DK are never touched.
 *
 * Per K/V tile t: S = Q K_t^T (Q and K by ldmatrix.x4), mask if the tile crosses the diagonal or
 * the end of the keys, online softmax in registers (exp2 with scale*log2(e) folded into one FFMA),
 * P packed to 16 bits (FP8: to E4M3, below) becomes the A operand of O += P V_t. Tiles wholly
 * above the diagonal are never loaded.
 *
 * FP8 (AT_IN_DTYPE e4m3 or e5m2), mma.sync.m16n8k32 with 8-bit operands:
 *   - Descales. The kernel reads descale_q, descale_k, descale_v (device fp32 scalars; NULL means
 *     1) once. descale_q * descale_k folds into scale*log2(e); descale_v into the final 1/rowsum.
 *   - P. The unnormalized p = 2^(s - m) is in [0, 1]; it is stored as E4M3 (whatever the input
 *     type: E4M3 has one more mantissa bit than E5M2 and P needs no range beyond 448) after
 *     scaling by FA2_P_SCALE = 448, the largest E4M3 value, so P uses E4M3's whole range (p down
 *     to ~2^-9/448 survives). The scale is folded into the exponent (p*448 = 2^(s - m + log2 448))
 *     and the row sum adds the same scaled values, so it cancels in O = (P V) / rowsum with no
 *     descale of P. The second MMA is then e4m3 x <V type> (the MMA takes mixed FP8 operands).
 *   - Q K^T: an m16n8k32 A/B fragment is, byte for byte, the m16n8k16 fragment of 16-bit data
 *     (lane g,t holds bytes 4t..4t+3 of rows g and g+8 in each 16-byte half of the k extent), so
 *     Q and K go through the same ldmatrix.x4 (non-transposed) addressing: one k32 step reads the
 *     two 16-byte chunks that a k16 step of 16-bit data reads.
 *   - P V: the B operand (V, k = keys) must be K-major: lane (g,t) needs 4 consecutive k of one
 *     column n. V sits in shared memory as loaded, [key][d] (d contiguous), and ldmatrix.trans
 *     moves 16-bit units only, so it cannot hand out single bytes of V transposed. Instead:
 *       (1) ldmatrix.x4.trans on the bytes viewed as b16 pairs: matrix j covers keys 8j..8j+7 of a
 *           32-key block and one 16-byte chunk dc of d (d pairs 2u, 2u+1, u = 0..7). Lane (g,t)
 *           receives r_j = { V[8j+2t][2g], V[8j+2t][2g+1], V[8j+2t+1][2g], V[8j+2t+1][2g+1] }
 *           (byte 0 first, d relative to the chunk).
 *       (2) prmt picks the bytes of one d column: prmt(r_0, r_1, 0x6420) =
 *           { V[2t][2g], V[2t+1][2g], V[8+2t][2g], V[9+2t][2g] } and 0x7531 the same for d = 2g+1;
 *           r_2, r_3 give keys 16.. the same way.
 *       (3) The keys of a 32-key block thus enter the MMA in the order k-slot 4t+i <-> key
 *           {2t, 2t+1, 8+2t, 9+2t}[i] (and +16 for the second register). P's A fragment uses the
 *           same order, which is free: lane (g,t) holds S columns 2t, 2t+1 of every n8 tile, so
 *           its P register for row g is { S tile 0 cols 2t, 2t+1 ; S tile 1 cols 2t, 2t+1 }.
 *       (4) The MMA fed with the 0x6420 bytes computes O columns d = 16dc + 2n, the 0x7531 one
 *           d = 16dc + 2n + 1 (n = the MMA's column). Lane (g,t) therefore ends up with
 *           d = 16dc + 4t .. 16dc + 4t + 3 of rows g and g+8: four contiguous outputs, stored
 *           straight from registers (8 bytes of bf16/f16 or 4 bytes of FP8 per row and chunk; a
 *           quad writes one whole 32-byte sector).
 *     Cost: 4 prmt per ldmatrix.x4, which feeds two m16n8k32 MMAs (per 16-row slice); no extra
 *     shared memory pass or barrier.
 *   - FP8 output: O = fp8(O_real * scale_o) with the max |O_real| of the CTA atomically max-ed into
 *     amax_o (the launcher zeroes it first), as cuDNN's FP8 graph does.
 *   - On sm_90 the m16n8k32 FP8 mma.sync is not a native tensor-core instruction: ptxas lowers it
 *     to FP8 -> f16 conversions and f16 MMAs (NVIDIA/cutlass issue 1986; native on sm_89 and
 *     sm_120). Left to ptxas, that lowering costs ~58 registers per thread (d128 bm64 bn64 w4:
 *     255 registers and spills, against 197 for bf16), which would prune every D=256 tile. With
 *     FA2_FP8_VIA_F16 the template does the same lowering itself, converting each fragment next
 *     to its two f16 MMAs (cvt.rn.f16x2.e4m3x2 per byte pair: exact): 197 registers, no spills.
 *     Either way Hopper's FP8 tensor-core rate needs wgmma (the fa3 family); here FP8 saves
 *     memory traffic and shared memory, not MMA time.
 *
 * Steps (docs/perf.md, "## fa2", has the measurements):
 *   v1: this structure — cp.async multi-stage K/V ring, swizzled smem, quad-shuffle softmax:
 *       H200 bf16 B2 N16 T=S=8192 D128: 333.7 TFLOP/s (bm128 bn128 w8 s3), causal 312.4.
 *   v2: FP8 inputs (m16n8k32, P in E4M3, V transposed in registers): not yet measured.
 *   v3: paged K/V (.pg<N>, .pg<N>.rgq; "Paged K/V" above): predicted within a few percent of
 *       contiguous (the same HBM bytes; an id read and a multiply-add per 16-byte copy).
 *       Measured B4 T2048 S8192 GQA 4 causal-br, page 16: 3.118 ms against 2.935 contiguous
 *       (bn128 w8 s2 against s3), 94.1%.
 */

#if AT_IN_DTYPE == AT_DTYPE_BF16 || AT_IN_DTYPE == AT_DTYPE_F16
#define FA2_FP8 0
#if AT_IN_DTYPE != AT_OUT_DTYPE
#error "fa2 writes O in the input dtype for f16/bf16 inputs"
#endif
#if AT_IN_DTYPE == AT_DTYPE_BF16
#define FA2_QK_MMA "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#else
#define FA2_QK_MMA "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#endif
#define FA2_PV_MMA FA2_QK_MMA
#define FA2_P_LOG2_SCALE 0.0f
#elif AT_IN_DTYPE == AT_DTYPE_E4M3 || AT_IN_DTYPE == AT_DTYPE_E5M2
#define FA2_FP8 1
#if AT_OUT_DTYPE != AT_DTYPE_BF16 && AT_OUT_DTYPE != AT_DTYPE_F16 && AT_OUT_DTYPE != AT_DTYPE_E4M3 && \
    AT_OUT_DTYPE != AT_DTYPE_E5M2
#error "fa2 writes O of FP8 inputs as bf16, f16, e4m3 or e5m2"
#endif
#if AT_IN_DTYPE == AT_DTYPE_E4M3
#define FA2_QK_MMA "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
#define FA2_PV_MMA "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
#else
#define FA2_QK_MMA "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 "
#define FA2_PV_MMA "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 "
#endif
/* P is stored as e4m3(p * 448); log2(448) is added in the exponent instead of multiplying. */
#define FA2_P_LOG2_SCALE 8.8073549220576041f
#else
#error "fa2 takes f16, bf16, e4m3 or e5m2 inputs"
#endif
#ifndef FA2_FP8_VIA_F16
#define FA2_FP8_VIA_F16 0
#endif
/* Ragged tensors (generator.h gen_ragged): 0 padded, 1 Q and K/V packed (.rg), 2 Q packed (.rgq). */
#define FA2_RAGGED_QKV 1
#define FA2_RAGGED_Q 2
#ifndef FA2_RAGGED
#define FA2_RAGGED 0
#endif
#if FA2_RAGGED != 0 && FA2_RAGGED != FA2_RAGGED_QKV && FA2_RAGGED != FA2_RAGGED_Q
#error "FA2_RAGGED: 0, 1 (.rg) or 2 (.rgq)"
#endif
#ifndef FA2_PAGE_SIZE
#define FA2_PAGE_SIZE 0
#endif
#if FA2_PAGE_SIZE != 0 && FA2_PAGE_SIZE != 1 && FA2_PAGE_SIZE != 16 && FA2_PAGE_SIZE != 32 && FA2_PAGE_SIZE != 64 && \
    FA2_PAGE_SIZE != 128 && FA2_PAGE_SIZE != 256
#error "FA2_PAGE_SIZE: 0 (contiguous), 1, 16, 32, 64, 128 or 256"
#endif
#if FA2_PAGE_SIZE && FA2_RAGGED == FA2_RAGGED_QKV
#error "paged K/V with packed K/V (.rg): ragged Q with paged K/V is .rgq"
#endif
#define FA2_OUT_FP8 (AT_OUT_DTYPE == AT_DTYPE_E4M3 || AT_OUT_DTYPE == AT_DTYPE_E5M2)

static constexpr int FA2_ESIZE = FA2_FP8 ? 1 : 2;   /* bytes per Q/K/V element */
static constexpr int FA2_CHUNK = 16 / FA2_ESIZE;    /* elements per 16-byte chunk */
static constexpr int FA2_KSTEP = 32 / FA2_ESIZE;    /* MMA k extent: 16 (16-bit) or 32 (FP8) */
static constexpr int FA2_D = FA2_HEAD_DIM;
static constexpr int FA2_DK = (FA2_D + FA2_KSTEP - 1) / FA2_KSTEP * FA2_KSTEP; /* Q K^T extent along D */
static constexpr int FA2_DO = (FA2_D + 15) / 16 * 16;                         /* O extent along D */
static constexpr int FA2_BM = FA2_BLOCK_M;
static constexpr int FA2_BN = FA2_BLOCK_N;
static constexpr int FA2_THREADS = FA2_WARPS * 32;
static constexpr int FA2_RW = FA2_BM / FA2_WARPS;  /* query rows per warp */
static constexpr int FA2_MT = FA2_RW / 16;         /* m16 slices per warp */
static constexpr int FA2_NT = FA2_BN / 8;          /* n8 tiles of S per slice */
static constexpr int FA2_OT = FA2_DO / 8;          /* n8 tiles of O per slice */
static constexpr int FA2_PK = FA2_BN / FA2_KSTEP;  /* k steps of P V per tile */
static constexpr int FA2_ROW_BYTES = (FA2_D * FA2_ESIZE + 127) / 128 * 128;
static constexpr int FA2_Q_BYTES = FA2_BM * FA2_ROW_BYTES;
static constexpr int FA2_KV_BYTES = FA2_BN * FA2_ROW_BYTES; /* one K or one V tile */
static constexpr int FA2_PS = FA2_PAGE_SIZE;                                  /* 0: contiguous */
static constexpr int FA2_IDS = FA2_PS == 0 ? 0 : FA2_PS >= FA2_BN ? 1 : FA2_BN / FA2_PS; /* ids per tile */
static constexpr int FA2_ID_SLOTS = 2 * FA2_STAGES - 2;
static constexpr int FA2_IDS_BYTES = (4 * FA2_IDS * FA2_ID_SLOTS + 127) / 128 * 128;
static constexpr int FA2_SMEM_BYTES = FA2_Q_BYTES + 2 * FA2_STAGES * FA2_KV_BYTES + FA2_IDS_BYTES;
static constexpr bool FA2_CAUSAL = FA2_MASK != AT_MASK_NONE;

static_assert(FA2_D % 8 == 0 && FA2_D >= 32 && FA2_D <= 256, "head dim: multiple of 8 in 32..256");
static_assert(!FA2_FP8 || FA2_D % 16 == 0, "FP8 head dim: a multiple of 16 (whole 16-byte chunks)");
static_assert(FA2_RW % 16 == 0 && FA2_MT >= 1 && FA2_MT <= 2, "each warp owns 1 or 2 slices of 16 rows");
static_assert(FA2_BN % 16 == 0 && FA2_BN >= 16 && FA2_BN <= 128, "BLOCK_N: multiple of 16 up to 128");
static_assert(FA2_BN % FA2_KSTEP == 0, "BLOCK_N: whole k steps of P V (multiple of 32 for FP8)");
static_assert(FA2_STAGES >= 2 && FA2_STAGES <= 4, "2..4 K/V stages");
static_assert(FA2_SMEM_BYTES <= FA2_SMEM_LIMIT, "shared memory over the target's limit");
/* Registers: O (MT*DO/2) and S (MT*BN/2) fp32 per thread, plus the K fragments in flight (BN/4),
 * about 80 for fragments, addresses and loop state, and 12 more with two slices per warp (their Q
 * fragments and P), must fit under the 255 cap and the per-thread share of the 64K register file.
 * FP8 with FA2_FP8_VIA_F16 adds FA2_FP8_REGS for the f16 operands of the lowered MMAs:
 * (DO - 64) / 8 + 1 up to D=128, 36 above, plus 16 per stage past two and 6 with two slices
 * per warp (sm_90a: d256 bm64 bn32
 * w4 s2 needs 255 registers and spills 28 bytes where bf16 takes 248; sm_89's native m16n8k32
 * takes 223, no more than 16-bit data; generator/fa2.c lists the calibration points).
 * Calibrated on sm_90a
 * ptxas output (CUDA 13.0) so that what passes compiles with no spills; the generator prunes on
 * the same estimate (generator/fa2.c). */
static constexpr int FA2_FP8_OPERAND_REGS = FA2_DO > 128 ? 36 : FA2_DO > 56 ? (FA2_DO - 64) / 8 + 1 : 0;
static constexpr int FA2_FP8_REGS =
    FA2_FP8 && FA2_FP8_VIA_F16 ? FA2_FP8_OPERAND_REGS + 16 * (FA2_STAGES - 2) + 6 * (FA2_MT - 1) : 0;
/* Ragged: the CTA's sequence and query block are values the loop keeps in registers, where the
 * padded kernel reads them again from blockIdx (sm_90a: d80 bm128 bn64 w4 s3 .rgq, estimated
 * 251, spilled 32 bytes at 254 registers). */
static constexpr int FA2_RAGGED_REGS = FA2_RAGGED ? 6 : 0;
/* Paged K/V: the table's bounds and the ring's slot addresses, and per stage past two the ids of
 * the tiles in flight, more where a thread's chunks do not keep one column (fa2_load_tile_paged's
 * second path, e.g. D 96): calibrated like the rest (sm_90a, CUDA 13.0: with 8 + 8 per stage,
 * d96 bm64 bn128 w4 s3 and d256 bm64 bn32 w4 s3 .rgq spilled 40-96 bytes at 255 registers; with
 * 8 + 20 per stage d96 bm64 bn128 w4 s3 still 32). */
static constexpr int FA2_KV_CPR = FA2_DK / FA2_CHUNK;
static constexpr bool FA2_ONE_COLUMN = FA2_THREADS % FA2_KV_CPR == 0 && (FA2_BN * FA2_KV_CPR) % FA2_THREADS == 0;
static constexpr int FA2_PAGED_REGS = FA2_PAGE_SIZE ? 8 + (FA2_ONE_COLUMN ? 20 : 32) * (FA2_STAGES - 2) : 0;
static constexpr int FA2_REG_ESTIMATE = FA2_MT * (FA2_DO + FA2_BN) / 2 + FA2_BN / 4 + 79 + 12 * (FA2_MT - 1) +
                                        FA2_FP8_REGS + FA2_RAGGED_REGS + FA2_PAGED_REGS;
static_assert(FA2_REG_ESTIMATE <= (65536 / FA2_THREADS < 255 ? 65536 / FA2_THREADS : 255),
              "accumulators do not fit the register budget");

/* ---- PTX wrappers ----------------------------------------------------------------------------- */

/* d += a * b for one MMA tile: a = 4 regs (16 x k, row-major), b = 2 regs (k x 8, col-major);
 * k = 16 for 16-bit data, 32 for FP8. The first MMA multiplies Q and K, the second P and V. */
#if FA2_FP8 && FA2_FP8_VIA_F16
/* One m16n8k32 FP8 product as two m16n8k16 f16 products: byte pair 0-1 of every operand register
 * goes to the first, pair 2-3 to the second. Lane (g,t)'s A byte i and B byte i share a k slot in
 * both forms, so the pairing of Q with K (P with V) bytes is unchanged. */
template <int A_FMT, int B_FMT>
__device__ __forceinline__ void fa2_mma_fp8_via_f16(float d[4], const unsigned a[4], unsigned b0, unsigned b1)
{
#define FA2_CVT(FMT, DST, SRC, HALF)                                                               \
  asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.rn.f16x2." FMT "x2 %0, " HALF "; }" : "=r"(DST) : "r"(SRC))
  unsigned lo[6], hi[6];
  const unsigned in[6] = {a[0], a[1], a[2], a[3], b0, b1};
#pragma unroll
  for (int i = 0; i < 6; i++) {
    if ((i < 4 ? A_FMT : B_FMT) == AT_DTYPE_E4M3) {
      FA2_CVT("e4m3", lo[i], in[i], "l");
      FA2_CVT("e4m3", hi[i], in[i], "h");
    } else {
      FA2_CVT("e5m2", lo[i], in[i], "l");
      FA2_CVT("e5m2", hi[i], in[i], "h");
    }
  }
#undef FA2_CVT
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(lo[0]), "r"(lo[1]), "r"(lo[2]), "r"(lo[3]), "r"(lo[4]), "r"(lo[5]));
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(hi[0]), "r"(hi[1]), "r"(hi[2]), "r"(hi[3]), "r"(hi[4]), "r"(hi[5]));
}
#endif

__device__ __forceinline__ void fa2_mma_qk(float d[4], const unsigned a[4], unsigned b0, unsigned b1)
{
#if FA2_FP8 && FA2_FP8_VIA_F16
  fa2_mma_fp8_via_f16<AT_IN_DTYPE, AT_IN_DTYPE>(d, a, b0, b1);
#else
  asm volatile(FA2_QK_MMA "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ void fa2_mma_pv(float d[4], const unsigned a[4], unsigned b0, unsigned b1)
{
#if FA2_FP8 && FA2_FP8_VIA_F16
  fa2_mma_fp8_via_f16<AT_DTYPE_E4M3, AT_IN_DTYPE>(d, a, b0, b1);
#else
  asm volatile(FA2_PV_MMA "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/* Byte permute: byte i of the result is byte SEL[4i+3..4i] of {b, a} (a = bytes 0-3, b = 4-7). */
template <unsigned SEL> __device__ __forceinline__ unsigned fa2_prmt(unsigned a, unsigned b)
{
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "n"(SEL));
  return d;
}

/* Byte offset of 16-byte chunk c of row r in a swizzled tile. */
__device__ __forceinline__ unsigned fa2_swz(int r, int c)
{
  return (unsigned)(r * FA2_ROW_BYTES + ((c ^ (r & 7)) << 4));
}

/* ---- global -> shared tile loads ---------------------------------------------------------------- */

/* Load rows [row0, row0 + ROWS) of a [rows_total, D] tensor slice (row stride `stride` elements) into
 * a swizzled tile with cp.async. Chunk i of the tile goes to thread i % THREADS, so a warp copies
 * consecutive 16-byte pieces of a row: coalesced reads, conflict-free writes. When THREADS is a
 * multiple of the chunks per row, a thread keeps one column and steps down the rows with one pointer,
 * which keeps the address registers to a handful. */
template <int ROWS>
__device__ __forceinline__ void fa2_load_tile(unsigned tile, const at_in_t *base, int stride,
                                              int row0, int rows_total, int tid)
{
  constexpr int CPR = FA2_DK / FA2_CHUNK; /* chunks per row that the MMAs read */
  constexpr int TOTAL = ROWS * CPR;
  if constexpr (FA2_THREADS % CPR == 0 && TOTAL % FA2_THREADS == 0) {
    constexpr int STEP = FA2_THREADS / CPR; /* rows per pass */
    const int c = tid % CPR, r = tid / CPR;
    const bool col_ok = c * FA2_CHUNK < FA2_D;
    /* The pointer advances by a running sum: offsets i*STEP*stride would each be a 64-bit value
     * that the compiler hoists out of the K/V loop and keeps in registers. */
    const at_in_t *src = base + (long long)(row0 + r) * stride + c * FA2_CHUNK;
    const long long step = (long long)STEP * stride;
    const unsigned dst = tile + fa2_swz(r, c); /* rows r + STEP*i keep r % 8 when STEP % 8 == 0 */
#pragma unroll
    for (int i = 0; i < TOTAL / FA2_THREADS; i++) {
      const bool valid = col_ok && row0 + r + i * STEP < rows_total;
      const unsigned d = STEP % 8 == 0 ? dst + i * STEP * FA2_ROW_BYTES : tile + fa2_swz(r + i * STEP, c);
      at_cp_async16(d, valid ? src : base, valid ? 16 : 0);
      src += step;
    }
  } else {
#pragma unroll
    for (int i = 0; i < (TOTAL + FA2_THREADS - 1) / FA2_THREADS; i++) {
      const int idx = tid + i * FA2_THREADS;
      if (TOTAL % FA2_THREADS == 0 || idx < TOTAL) {
        const int r = idx / CPR, c = idx % CPR;
        const bool valid = row0 + r < rows_total && c * FA2_CHUNK < FA2_D;
        const at_in_t *src = valid ? base + (long long)(row0 + r) * stride + c * FA2_CHUNK : base;
        at_cp_async16(tile + fa2_swz(r, c), src, valid ? 16 : 0);
      }
    }
  }
}

/* ---- paged K/V: page ids and gathered tiles (FA2_PAGE_SIZE > 0; header "Paged K/V") ------------ */

/* The ring slot of tile n's page ids. */
__device__ __forceinline__ unsigned fa2_ids_slot(unsigned ring, int n)
{
  return ring + (unsigned)((n % (FA2_ID_SLOTS > 0 ? FA2_ID_SLOTS : 1)) * FA2_IDS * 4);
}

/* Page ids of tile n (keys n * BLOCK_N ..) into its slot, in the current cp.async group; nothing
 * for a tile this CTA never loads. Entries past the table row are zero-filled, never read. */
__device__ __forceinline__ void fa2_load_ids(unsigned ring, const int *table_row, int max_pages, int n, int n_tiles,
                                             int tid)
{
  if (FA2_PS == 0 || n >= n_tiles) return;
  const unsigned slot = fa2_ids_slot(ring, n);
  const int p0 = n * FA2_BN / (FA2_PS > 0 ? FA2_PS : 1);
  for (int i = tid; i < FA2_IDS; i += FA2_THREADS) {
    const bool in_row = p0 + i < max_pages;
    at_cp_async4(slot + 4 * i, in_row ? table_row + p0 + i : table_row, in_row ? 4 : 0);
  }
}

/* Keys [j0, j0 + BLOCK_N) of one head (pool: head hk of page 0) into a swizzled tile through the
 * tile's page ids (slot): key j is row j % PS of page ids[(j - j0) / PS] (ids[0] when PS >=
 * BLOCK_N). fa2_load_tile's chunk-to-thread mapping: where a thread keeps one column and steps
 * down rows r + i*STEP, the row's slot is i*STEP / PS for PS >= STEP (r < STEP: the same for
 * every thread, one broadcast read per page) and (r + i*STEP) / PS below. Keys >= j_end and keys
 * of a page outside [0, num_pages) are zero-filled (src-size 0: never read). */
__device__ __forceinline__ void fa2_load_tile_paged(unsigned tile, const at_in_t *pool, long long page_stride,
                                                    int stride, int j0, int j_end, unsigned slot, int num_pages,
                                                    int tid)
{
  constexpr int PS = FA2_PS > 0 ? FA2_PS : 1;
  constexpr int CPR = FA2_DK / FA2_CHUNK;
  constexpr int TOTAL = FA2_BN * CPR;
  if constexpr (FA2_THREADS % CPR == 0 && TOTAL % FA2_THREADS == 0) {
    constexpr int STEP = FA2_THREADS / CPR, PER = TOTAL / FA2_THREADS;
    const int c = tid % CPR, r = tid / CPR;
    const bool col_ok = c * FA2_CHUNK < FA2_D;
    const at_in_t *col = pool + c * FA2_CHUNK;
    int page[PER > 0 ? PER : 1];
#pragma unroll
    for (int i = 0; i < PER; i++) {
      if constexpr (PS >= STEP) {
        const int sl = PS >= FA2_BN ? 0 : i * STEP / PS, prev = PS >= FA2_BN ? 0 : (i - 1) * STEP / PS;
        page[i] = i > 0 && sl == prev ? page[i > 0 ? i - 1 : 0] : at_ld_shared_s32(slot + 4 * sl);
      } else {
        page[i] = at_ld_shared_s32(slot + 4 * ((r + i * STEP) / PS));
      }
    }
    const int first = PS >= FA2_BN ? (int)((unsigned)j0 % PS) : 0; /* row of key j0 in its page */
#pragma unroll
    for (int i = 0; i < PER; i++) {
      const int rr = r + i * STEP;
      const int row = PS >= FA2_BN ? first + rr : (int)((unsigned)rr % PS);
      const bool valid = col_ok && j0 + rr < j_end && (unsigned)page[i] < (unsigned)num_pages;
      const at_in_t *src = valid ? col + page[i] * page_stride + (long long)row * stride : pool;
      at_cp_async16(tile + fa2_swz(rr, c), src, valid ? 16 : 0);
    }
  } else {
#pragma unroll
    for (int i = 0; i < (TOTAL + FA2_THREADS - 1) / FA2_THREADS; i++) {
      const int idx = tid + i * FA2_THREADS;
      if (TOTAL % FA2_THREADS == 0 || idx < TOTAL) {
        const int r = idx / CPR, c = idx % CPR;
        const int page = at_ld_shared_s32(slot + 4 * (PS >= FA2_BN ? 0 : r / PS));
        const int row = PS >= FA2_BN ? (int)((unsigned)j0 % PS) + r : r % PS;
        const bool valid = j0 + r < j_end && c * FA2_CHUNK < FA2_D && (unsigned)page < (unsigned)num_pages;
        const at_in_t *src = valid ? pool + page * page_stride + (long long)row * stride + c * FA2_CHUNK : pool;
        at_cp_async16(tile + fa2_swz(r, c), src, valid ? 16 : 0);
      }
    }
  }
}

/* K or V tile n: contiguous rows of base, or gathered through the page ids in ring. */
__device__ __forceinline__ void fa2_load_kv(unsigned tile, const at_in_t *base, long long page_stride, int stride,
                                            int n, int S, unsigned ring, int num_pages, int tid)
{
  if constexpr (FA2_PS > 0)
    fa2_load_tile_paged(tile, base, page_stride, stride, n * FA2_BN, S, fa2_ids_slot(ring, n), num_pages, tid);
  else
    fa2_load_tile<FA2_BN>(tile, base, stride, n * FA2_BN, S, tid);
}

/* ---- the kernel ------------------------------------------------------------------------------- */

extern "C" __global__ void __launch_bounds__(FA2_THREADS, 1)
FA2_KERNEL(const at_in_t *__restrict__ q, const at_in_t *__restrict__ k, const at_in_t *__restrict__ v,
           at_out_t *__restrict__ o, float *__restrict__ lse, int T, int S, float scale_log2,
           long long q_sb, int q_ss, int q_sh, long long k_sb, int k_ss, int k_sh, long long v_sb,
           int v_ss, int v_sh, long long o_sb, int o_ss, int o_sh, const float *__restrict__ descale_q,
           const float *__restrict__ descale_k, const float *__restrict__ descale_v,
           const float *__restrict__ scale_o, float *__restrict__ amax_o
#if FA2_RAGGED
           ,
           const int *__restrict__ cu_seqlens_q, const int *__restrict__ cu_seqlens_kv, int total_q, int total_kv,
           int n_seqs
#endif
#if FA2_PAGE_SIZE
           ,
           const int *__restrict__ block_table, const int *__restrict__ seqlens_kv, int max_pages_per_seq,
           int num_pages
#endif
)
{
  at_wait_for_previous_grid(); /* a programmatic launch: the previous kernel's results first */
  /* FP8 scaling (16-bit variants get NULLs and ignore them): scores in code units times
   * descale_q * descale_k are real scores; O in code units of V times descale_v is real O. */
  float o_descale = 1.f;
  if (FA2_FP8) {
    if (descale_q) scale_log2 *= *descale_q;
    if (descale_k) scale_log2 *= *descale_k;
    if (descale_v) o_descale = *descale_v;
  }
  extern __shared__ __align__(128) unsigned char fa2_smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int h = blockIdx.y, hk = h / FA2_GQA;
#if FA2_RAGGED
  /* Ragged: x runs over the sequences' query blocks (common.cuh at_ragged_block). */
  int b, m_block;
  if (!at_ragged_block(cu_seqlens_q, n_seqs, total_q, T, FA2_BM, FA2_CAUSAL, (int)blockIdx.x, &b, &m_block)) return;
#else
  const int b = blockIdx.z;
  /* Causal CTAs near the bottom have the most tiles: launch them first for a better tail. */
  const int m_block = FA2_CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
#endif
  const int m0 = m_block * FA2_BM;

  /* Ragged: T and S become this sequence's T_b and S_b, and its rows start at q_first / kv_first
   * of the packed tensors (batch strides unused). */
  int q_first = 0, kv_first = 0;
#if FA2_RAGGED
  T = at_ragged_rows(cu_seqlens_q, b, total_q, T, &q_first);
  q_sb = o_sb = 0;
#if FA2_RAGGED == FA2_RAGGED_QKV
  S = at_ragged_rows(cu_seqlens_kv, b, total_kv, S, &kv_first);
  k_sb = v_sb = 0;
#else
  (void)cu_seqlens_kv, (void)total_kv;
#endif
  if (m0 >= T) return;
#endif
  /* Paged: S becomes S_b; K and V are pools whose batch strides are the page strides. */
  long long k_page = 0, v_page = 0;
  const int *table_row = nullptr;
  int max_pages = 0, pool_pages = 0;
#if FA2_PAGE_SIZE
  S = min(max(seqlens_kv[b], 0), S);
  k_page = k_sb, v_page = v_sb, k_sb = v_sb = 0;
  max_pages = max(max_pages_per_seq, 0), pool_pages = num_pages;
  table_row = block_table + (long long)b * max_pages;
#endif
  const long long q_row0 = b * q_sb + (long long)q_first * q_ss; /* row 0 of this sequence in Q */
  const long long o_row0 = b * o_sb + (long long)q_first * o_ss;
  const at_in_t *qh = q + q_row0 + (long long)h * q_sh + (long long)m0 * q_ss;
  const at_in_t *kh = k + b * k_sb + (long long)kv_first * k_ss + (long long)hk * k_sh;
  const at_in_t *vh = v + b * v_sb + (long long)kv_first * v_ss + (long long)hk * v_sh;
#if FA2_RAGGED
  const long long lse_row0 = (long long)h * total_q + q_first; /* lse: [Nq, total_q] */
#else
  const long long lse_row0 = ((long long)b * gridDim.y + h) * T; /* lse: [B, Nq, T] */
#endif

  /* Which K/V tiles this CTA reads: n_tiles in all; the first n_full need no mask. Key j is visible
   * from row i iff j < S and (no mask or j <= i + offset). */
  const int offset = FA2_MASK == AT_MASK_CAUSAL_BR ? S - T : 0;
  int n_tiles = (S + FA2_BN - 1) / FA2_BN;
  int n_full = S / FA2_BN;
  if (FA2_CAUSAL) {
    const int last_row = min(m0 + FA2_BM, T) - 1;
    const int last_key = last_row + offset; /* the last key any row here sees */
    n_tiles = last_key < 0 ? 0 : min(n_tiles, last_key / FA2_BN + 1);
    const int first_row_keys = m0 + offset + 1; /* keys the first row sees */
    n_full = first_row_keys <= 0 ? 0 : min(n_full, first_row_keys / FA2_BN);
  }

  const unsigned smem_q = at_smem_addr(fa2_smem);
  const unsigned smem_k = smem_q + FA2_Q_BYTES;
  const unsigned smem_v = smem_k + FA2_STAGES * FA2_KV_BYTES;
  const unsigned smem_ids = smem_v + FA2_STAGES * FA2_KV_BYTES; /* paged: the page ids' ring */

  /* cp.async groups, in commit order: Q (paged: with the first 2*STAGES-2 tiles' page ids,
   * waited for here), then K_t and V_t as separate groups for every tile t, so S = Q K_t^T can
   * start before V_t has landed. The first STAGES-1 tiles are issued here. */
  fa2_load_tile<FA2_BM>(smem_q, qh, q_ss, 0, T - m0, tid);
  if constexpr (FA2_PS > 0) {
#pragma unroll
    for (int n = 0; n < FA2_ID_SLOTS; n++) fa2_load_ids(smem_ids, table_row, max_pages, n, n_tiles, tid);
  }
  at_cp_async_commit();
  if constexpr (FA2_PS > 0) {
    at_cp_async_wait<0>();
    __syncthreads();
  }
#pragma unroll
  for (int s = 0; s < FA2_STAGES - 1; s++) {
    if (s < n_tiles) fa2_load_kv(smem_k + s * FA2_KV_BYTES, kh, k_page, k_ss, s, S, smem_ids, pool_pages, tid);
    at_cp_async_commit();
    if (s < n_tiles) fa2_load_kv(smem_v + s * FA2_KV_BYTES, vh, v_page, v_ss, s, S, smem_ids, pool_pages, tid);
    at_cp_async_commit();
  }

  /* Per-lane ldmatrix addressing. Every row a lane points at is congruent to r = lane % 8, so the
   * swizzle of chunk c is c ^ x with x fixed per lane; the chunk index c is a compile-time constant
   * in the unrolled loops. */
  const int r8 = lane & 7, quad = lane >> 3;
  /* Q (A operand, x4): matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). */
  const unsigned q_lane = smem_q + (warp * FA2_RW + (lane & 15)) * FA2_ROW_BYTES;
  const unsigned q_x = (unsigned)((lane >> 4) ^ r8) << 4;
  /* K (B operand of Q K^T, x4): matrices (keys 0-7, d 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15)
   * give b0, b1 of n8 tile 2p and b0, b1 of tile 2p+1. */
  const unsigned k_lane = (r8 + (quad >> 1) * 8) * FA2_ROW_BYTES;
  const unsigned k_x = (unsigned)((quad & 1) ^ r8) << 4;
  /* V (B operand of P V, x4.trans). 16-bit: matrices (keys 0-7, d 0-7), (8-15, 0-7), (0-7, 8-15),
   * (8-15, 8-15) give b0, b1 of d tile 2p and b0, b1 of d tile 2p+1. FP8: matrix j is keys
   * 8j..8j+7 of a 32-key block in one 16-byte chunk of d, so lane l points at key l (header). */
  const unsigned v_lane = FA2_FP8 ? lane * FA2_ROW_BYTES : (r8 + (quad & 1) * 8) * FA2_ROW_BYTES;
  const unsigned v_x = FA2_FP8 ? (unsigned)r8 << 4 : (unsigned)((quad >> 1) ^ r8) << 4;

  const int g = lane >> 2, tq = lane & 3;
  float acc[FA2_MT][FA2_OT][4];
  float row_max[FA2_MT][2], row_sum[FA2_MT][2]; /* running max (raw score units), partial sums */
#pragma unroll
  for (int mt = 0; mt < FA2_MT; mt++) {
#pragma unroll
    for (int j = 0; j < FA2_OT; j++)
      acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.f;
    row_max[mt][0] = row_max[mt][1] = AT_NEG_INF;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }

  for (int t = 0; t < n_tiles; t++) {
    const int stage = t % FA2_STAGES;
    /* K_t landed (groups after it: V_t and 2 per prefetched tile); the barrier also means every
     * warp finished tile t-1, whose buffers the prefetch below overwrites. */
    at_cp_async_wait<2 * FA2_STAGES - 3>();
    __syncthreads();
    {
      const int tn = t + FA2_STAGES - 1, sn = tn % FA2_STAGES;
      if (tn < n_tiles) fa2_load_kv(smem_k + sn * FA2_KV_BYTES, kh, k_page, k_ss, tn, S, smem_ids, pool_pages, tid);
      /* paged: the ids of the tile iteration tn issues, with K_tn (header "Paged K/V") */
      fa2_load_ids(smem_ids, table_row, max_pages, tn + FA2_STAGES - 1, n_tiles, tid);
      at_cp_async_commit();
      if (tn < n_tiles) fa2_load_kv(smem_v + sn * FA2_KV_BYTES, vh, v_page, v_ss, tn, S, smem_ids, pool_pages, tid);
      at_cp_async_commit();
    }

    /* S = Q K_t^T for this warp's rows: s[mt][nt] is the m16n8 tile (rows mt*16.., keys nt*8..). */
    float s[FA2_MT][FA2_NT][4];
#pragma unroll
    for (int mt = 0; mt < FA2_MT; mt++)
#pragma unroll
      for (int nt = 0; nt < FA2_NT; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
    const unsigned k_tile = smem_k + stage * FA2_KV_BYTES + k_lane;
#pragma unroll
    for (int ks = 0; ks < FA2_DK / FA2_KSTEP; ks++) {
      unsigned a[FA2_MT][4];
#pragma unroll
      for (int mt = 0; mt < FA2_MT; mt++)
        at_ldmatrix_x4(a[mt], q_lane + mt * 16 * FA2_ROW_BYTES + (((unsigned)(2 * ks) << 4) ^ q_x));
#pragma unroll
      for (int np = 0; np < FA2_NT / 2; np++) {
        unsigned kb[4];
        at_ldmatrix_x4(kb, k_tile + np * 16 * FA2_ROW_BYTES + (((unsigned)(2 * ks) << 4) ^ k_x));
#pragma unroll
        for (int mt = 0; mt < FA2_MT; mt++) {
          fa2_mma_qk(s[mt][2 * np], a[mt], kb[0], kb[1]);
          fa2_mma_qk(s[mt][2 * np + 1], a[mt], kb[2], kb[3]);
        }
      }
    }

    /* Mask the tiles that cross the diagonal or the end of the keys. */
    if (t >= n_full) {
#pragma unroll
      for (int mt = 0; mt < FA2_MT; mt++)
#pragma unroll
        for (int nt = 0; nt < FA2_NT; nt++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const int i = m0 + warp * FA2_RW + mt * 16 + g + (e >> 1) * 8;
            const int j = t * FA2_BN + nt * 8 + 2 * tq + (e & 1);
            if (j >= S || (FA2_CAUSAL && j > i + offset)) s[mt][nt][e] = AT_NEG_INF;
          }
    }

    /* Online softmax. Row max over the quad; p = 2^(s*scale*log2e - m*scale*log2e) in one FFMA
     * (FP8: times 448, by adding log2 448 to the exponent);
     * O and the running sum rescale by 2^((m_old - m_new)*scale*log2e). A row that has seen only
     * masked keys keeps m = -inf; using 0 as its scaled max makes every p and alpha exactly 0. */
    unsigned p[FA2_MT][FA2_PK][4];
#pragma unroll
    for (int mt = 0; mt < FA2_MT; mt++) {
#pragma unroll
      for (int half = 0; half < 2; half++) {
        float mx = row_max[mt][half];
#pragma unroll
        for (int nt = 0; nt < FA2_NT; nt++)
          mx = fmaxf(mx, fmaxf(s[mt][nt][2 * half], s[mt][nt][2 * half + 1]));
        mx = at_quad_max(mx);
        const float m_scaled = mx == AT_NEG_INF ? 0.f : mx * scale_log2;
        const float alpha = at_exp2(row_max[mt][half] * scale_log2 - m_scaled);
        const float m_shift = FA2_FP8 ? m_scaled - FA2_P_LOG2_SCALE : m_scaled;
        row_max[mt][half] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < FA2_NT; nt++) {
          s[mt][nt][2 * half] = at_exp2(fmaf(s[mt][nt][2 * half], scale_log2, -m_shift));
          s[mt][nt][2 * half + 1] = at_exp2(fmaf(s[mt][nt][2 * half + 1], scale_log2, -m_shift));
          sum += s[mt][nt][2 * half] + s[mt][nt][2 * half + 1];
        }
        row_sum[mt][half] = row_sum[mt][half] * alpha + sum;
#pragma unroll
        for (int j = 0; j < FA2_OT; j++) {
          acc[mt][j][2 * half] *= alpha;
          acc[mt][j][2 * half + 1] *= alpha;
        }
      }
#if FA2_FP8
      /* The S accumulators of n8 tiles 4kk..4kk+3 are the E4M3 A fragment of keys 32kk..32kk+31
       * in the key order of the header: register 0 = row g, keys {2t, 2t+1, 8+2t, 9+2t}; 1 = the
       * same for row g+8; 2 and 3 = keys 16 further. */
#pragma unroll
      for (int kk = 0; kk < FA2_PK; kk++) {
        const float(*c)[4] = &s[mt][4 * kk];
        p[mt][kk][0] = at_e4m3x4_from_float(c[0][0], c[0][1], c[1][0], c[1][1]);
        p[mt][kk][1] = at_e4m3x4_from_float(c[0][2], c[0][3], c[1][2], c[1][3]);
        p[mt][kk][2] = at_e4m3x4_from_float(c[2][0], c[2][1], c[3][0], c[3][1]);
        p[mt][kk][3] = at_e4m3x4_from_float(c[2][2], c[2][3], c[3][2], c[3][3]);
      }
#else
      /* The S accumulator layout of n8 tiles 2kk and 2kk+1 is the A fragment of keys 16kk..16kk+15. */
#pragma unroll
      for (int kk = 0; kk < FA2_PK; kk++) {
        p[mt][kk][0] = at_pack_out(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        p[mt][kk][1] = at_pack_out(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        p[mt][kk][2] = at_pack_out(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        p[mt][kk][3] = at_pack_out(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#endif
    }

    /* V_t landed (groups after it: 2 per tile in flight); the barrier publishes other threads' copies. */
    at_cp_async_wait<2 * FA2_STAGES - 2>();
    __syncthreads();
    const unsigned v_tile = smem_v + stage * FA2_KV_BYTES + v_lane;
#if FA2_FP8
    /* Per 32-key block kk and 16-byte chunk dc of d: one ldmatrix.x4.trans, 4 prmt, two MMAs per
     * slice; acc[2dc] collects d = 16dc + 2n, acc[2dc+1] d = 16dc + 2n + 1 (header). */
#pragma unroll
    for (int kk = 0; kk < FA2_PK; kk++) {
#pragma unroll
      for (int dc = 0; dc < FA2_DO / 16; dc++) {
        unsigned vr[4];
        at_ldmatrix_x4_trans(vr, v_tile + kk * 32 * FA2_ROW_BYTES + (((unsigned)dc << 4) ^ v_x));
        const unsigned b0_even = fa2_prmt<0x6420>(vr[0], vr[1]), b0_odd = fa2_prmt<0x7531>(vr[0], vr[1]);
        const unsigned b1_even = fa2_prmt<0x6420>(vr[2], vr[3]), b1_odd = fa2_prmt<0x7531>(vr[2], vr[3]);
#pragma unroll
        for (int mt = 0; mt < FA2_MT; mt++) {
          fa2_mma_pv(acc[mt][2 * dc], p[mt][kk], b0_even, b1_even);
          fa2_mma_pv(acc[mt][2 * dc + 1], p[mt][kk], b0_odd, b1_odd);
        }
      }
    }
#else
#pragma unroll
    for (int kk = 0; kk < FA2_PK; kk++) {
#pragma unroll
      for (int dp = 0; dp < FA2_OT / 2; dp++) {
        unsigned vb[4];
        at_ldmatrix_x4_trans(vb, v_tile + kk * 16 * FA2_ROW_BYTES + (((unsigned)(2 * dp) << 4) ^ v_x));
#pragma unroll
        for (int mt = 0; mt < FA2_MT; mt++) {
          fa2_mma_pv(acc[mt][2 * dp], p[mt][kk], vb[0], vb[1]);
          fa2_mma_pv(acc[mt][2 * dp + 1], p[mt][kk], vb[2], vb[3]);
        }
      }
    }
#endif
  }

#if FA2_FP8
  /* Epilogue (FP8 inputs): no staging; lane (g,t) owns d = 16dc + 4t .. 16dc + 4t + 3 of rows g and
   * g+8 of each slice (header), written from registers. */
  at_cp_async_wait<0>(); /* no copy may outlive the CTA (one with no tiles never waited) */
#if FA2_OUT_FP8
  float amax = 0.f; /* of the real O values this lane writes */
  const float o_scale = scale_o ? *scale_o : 1.f;
#else
  (void)scale_o, (void)amax_o; /* FP8 output only */
#endif
#pragma unroll
  for (int mt = 0; mt < FA2_MT; mt++) {
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const float sum = at_quad_sum(row_sum[mt][half]);
      const float inv = sum > 0.f ? o_descale / sum : 0.f;
      const int r = warp * FA2_RW + mt * 16 + g + half * 8; /* row within the CTA */
      if (m0 + r >= T) continue;
      if (FA2_LSE && tq == 0) {
        /* The row sum is in units of P (p * 448): log2 448 comes off. */
        const float m = row_max[mt][half];
        lse[lse_row0 + m0 + r] =
            sum > 0.f ? (m * scale_log2 + at_log2(sum) - FA2_P_LOG2_SCALE) * 0.69314718055994531f
                      : AT_NEG_INF;
      }
      at_out_t *orow = o + o_row0 + (long long)h * o_sh + (long long)(m0 + r) * o_ss + 4 * tq;
#pragma unroll
      for (int dc = 0; dc < FA2_DO / 16; dc++) {
        const float x0 = acc[mt][2 * dc][2 * half] * inv, x1 = acc[mt][2 * dc + 1][2 * half] * inv;
        const float x2 = acc[mt][2 * dc][2 * half + 1] * inv, x3 = acc[mt][2 * dc + 1][2 * half + 1] * inv;
#if FA2_OUT_FP8
        amax = fmaxf(amax, fmaxf(fmaxf(fabsf(x0), fabsf(x1)), fmaxf(fabsf(x2), fabsf(x3))));
#if AT_OUT_DTYPE == AT_DTYPE_E4M3
        const unsigned packed = at_e4m3x4_from_float(x0 * o_scale, x1 * o_scale, x2 * o_scale, x3 * o_scale);
#else
        const unsigned packed = at_e5m2x4_from_float(x0 * o_scale, x1 * o_scale, x2 * o_scale, x3 * o_scale);
#endif
        asm volatile("st.global.b32 [%0], %1;\n" ::"l"(orow + 16 * dc), "r"(packed) : "memory");
#else
        asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(orow + 16 * dc), "r"(at_pack_out(x0, x1)),
                     "r"(at_pack_out(x2, x3))
                     : "memory");
#endif
      }
    }
  }
#if FA2_OUT_FP8
  /* amax: max over the warp, then one atomic per warp. Non-negative floats order like their bits
   * as unsigned integers; a NaN (bits above +inf) wins, which is what an amax of NaNs should say. */
  if (amax_o) {
    for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    if (lane == 0) asm volatile("red.global.max.u32 [%0], %1;\n" ::"l"(amax_o), "r"(__float_as_uint(amax)) : "memory");
  }
#endif
#else
  (void)o_descale, (void)scale_o, (void)amax_o; /* FP8 only */
  /* Epilogue. Nothing may still be copying into Q's rows (a CTA with no tiles never waited). */
  at_cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < FA2_MT; mt++) {
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const float sum = at_quad_sum(row_sum[mt][half]);
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const int r = warp * FA2_RW + mt * 16 + g + half * 8; /* row within the CTA */
      if (FA2_LSE && tq == 0 && m0 + r < T) {
        const float m = row_max[mt][half];
        lse[lse_row0 + m0 + r] =
            sum > 0.f ? (m * scale_log2 + at_log2(sum)) * 0.69314718055994531f : AT_NEG_INF;
      }
      /* Stage O in this warp's own Q rows (swizzled like Q) for coalesced 16-byte stores. */
#pragma unroll
      for (int j = 0; j < FA2_OT; j++) {
        const unsigned packed = at_pack_out(acc[mt][j][2 * half] * inv, acc[mt][j][2 * half + 1] * inv);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(smem_q + fa2_swz(r, j) + 4 * tq), "r"(packed)
                     : "memory");
      }
    }
  }
  __syncwarp();
  constexpr int OUT_CPR = FA2_D / 8; /* chunks per output row */
  at_out_t *oh = o + o_row0 + (long long)h * o_sh + (long long)m0 * o_ss;
#pragma unroll
  for (int i = 0; i < (FA2_RW * OUT_CPR + 31) / 32; i++) {
    const int idx = lane + i * 32;
    if ((FA2_RW * OUT_CPR) % 32 == 0 || idx < FA2_RW * OUT_CPR) {
      const int r = warp * FA2_RW + idx / OUT_CPR, c = idx % OUT_CPR;
      if (m0 + r < T) {
        unsigned x0, x1, x2, x3;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                     : "r"(smem_q + fa2_swz(r, c)));
        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(oh + (long long)r * o_ss + c * 8),
                     "r"(x0), "r"(x1), "r"(x2), "r"(x3)
                     : "memory");
      }
    }
  }
#endif
}
