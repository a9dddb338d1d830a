/*
 * common.cuh — device helpers shared by every kernel template.
 *
 * The generator emits: a preamble of #defines for one variant, then this file, then the family's
 * template, as one string for NVRTC. No CUDA headers are included (NVRTC needs none): 16-bit and
 * 8-bit floats travel as raw bits and convert through PTX.
 *
 * The preamble must define AT_IN_DTYPE (dtype of Q, K, V) and AT_OUT_DTYPE (dtype of O) with the
 * codes of at_dtype in attntune.h.
 */
#define AT_DTYPE_F32 0
#define AT_DTYPE_F16 1
#define AT_DTYPE_BF16 2
#define AT_DTYPE_E4M3 3
#define AT_DTYPE_E5M2 4

#define AT_MASK_NONE 0
#define AT_MASK_CAUSAL_TL 1
#define AT_MASK_CAUSAL_BR 2

#ifndef AT_IN_DTYPE
#error "AT_IN_DTYPE must be defined by the preamble"
#endif
#ifndef AT_OUT_DTYPE
#error "AT_OUT_DTYPE must be defined by the preamble"
#endif

#define AT_NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float at_f16_bits_to_float(unsigned short h)
{
  float f;
  asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
  return f;
}

__device__ __forceinline__ float at_bf16_bits_to_float(unsigned short h)
{
  return __uint_as_float((unsigned)h << 16);
}

__device__ __forceinline__ unsigned short at_float_to_f16_bits(float f)
{
  unsigned short h;
  asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
  return h;
}

__device__ __forceinline__ unsigned short at_float_to_bf16_bits(float f)
{
  unsigned short h;
  asm("{ .reg .b16 t; cvt.rn.bf16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
  return h;
}

/* at_in_t: storage of one Q/K/V element; at_in_to_float widens it. */
#if AT_IN_DTYPE == AT_DTYPE_F32
typedef float at_in_t;
__device__ __forceinline__ float at_in_to_float(at_in_t x) { return x; }
#elif AT_IN_DTYPE == AT_DTYPE_F16
typedef unsigned short at_in_t;
__device__ __forceinline__ float at_in_to_float(at_in_t x) { return at_f16_bits_to_float(x); }
#elif AT_IN_DTYPE == AT_DTYPE_BF16
typedef unsigned short at_in_t;
__device__ __forceinline__ float at_in_to_float(at_in_t x) { return at_bf16_bits_to_float(x); }
#elif AT_IN_DTYPE == AT_DTYPE_E4M3 || AT_IN_DTYPE == AT_DTYPE_E5M2
typedef unsigned char at_in_t;
/* FP8 -> f16 is exact for both formats; cvt from e4m3x2/e5m2x2 exists on sm_89+. */
__device__ __forceinline__ float at_in_to_float(at_in_t x)
{
  unsigned int pair;
  unsigned short lo = (unsigned short)x;
#if AT_IN_DTYPE == AT_DTYPE_E4M3
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(pair) : "h"(lo));
#else
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(pair) : "h"(lo));
#endif
  return at_f16_bits_to_float((unsigned short)(pair & 0xffffu));
}
#else
#error "unknown AT_IN_DTYPE"
#endif

/* ---- FP8 (sm_89+) --------------------------------------------------------------------------- */
/* Four floats to four FP8 bytes, x0 in the lowest byte, round-to-nearest-even with saturation to
 * the largest finite value (as __NV_SATFINITE; NaN stays NaN). cvt.*x2.f32 d, a, b puts a in the
 * upper byte of d and b in the lower, hence the swapped operands. */
#define AT_FP8X4_PACK(NAME, FMT)                                                                   \
  __device__ __forceinline__ unsigned NAME(float x0, float x1, float x2, float x3)                 \
  {                                                                                                \
    unsigned r;                                                                                    \
    asm("{ .reg .b16 lo, hi;\n"                                                                    \
        "  cvt.rn.satfinite." FMT "x2.f32 lo, %2, %1;\n"                                           \
        "  cvt.rn.satfinite." FMT "x2.f32 hi, %4, %3;\n"                                           \
        "  mov.b32 %0, {lo, hi}; }"                                                                \
        : "=r"(r)                                                                                  \
        : "f"(x0), "f"(x1), "f"(x2), "f"(x3));                                                     \
    return r;                                                                                      \
  }
AT_FP8X4_PACK(at_e4m3x4_from_float, "e4m3")
AT_FP8X4_PACK(at_e5m2x4_from_float, "e5m2")
#undef AT_FP8X4_PACK

/* The largest finite values (OCP FP8): what a saturating conversion clamps to. */
#define AT_E4M3_MAX 448.0f
#define AT_E5M2_MAX 57344.0f

/* at_out_t: storage of one O element; at_out_from_float narrows with round-to-nearest-even
 * (saturating for FP8). */
#if AT_OUT_DTYPE == AT_DTYPE_F32
typedef float at_out_t;
__device__ __forceinline__ at_out_t at_out_from_float(float x) { return x; }
#elif AT_OUT_DTYPE == AT_DTYPE_F16
typedef unsigned short at_out_t;
__device__ __forceinline__ at_out_t at_out_from_float(float x) { return at_float_to_f16_bits(x); }
#elif AT_OUT_DTYPE == AT_DTYPE_BF16
typedef unsigned short at_out_t;
__device__ __forceinline__ at_out_t at_out_from_float(float x) { return at_float_to_bf16_bits(x); }
#elif AT_OUT_DTYPE == AT_DTYPE_E4M3
typedef unsigned char at_out_t;
__device__ __forceinline__ at_out_t at_out_from_float(float x)
{
  return (at_out_t)(at_e4m3x4_from_float(x, 0.f, 0.f, 0.f) & 0xffu);
}
#elif AT_OUT_DTYPE == AT_DTYPE_E5M2
typedef unsigned char at_out_t;
__device__ __forceinline__ at_out_t at_out_from_float(float x)
{
  return (at_out_t)(at_e5m2x4_from_float(x, 0.f, 0.f, 0.f) & 0xffu);
}
#else
#error "unsupported AT_OUT_DTYPE"
#endif

/* ---- PTX helpers shared by the fused families (fa2.cu, fa3.cu, decode.cu) ----------------------- */

__device__ __forceinline__ unsigned at_smem_addr(const void *p)
{
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

/* 16-byte global -> shared copy; src_bytes 0 writes zeros (rows/columns past the tensor). */
__device__ __forceinline__ void at_cp_async16(unsigned dst, const void *src, int src_bytes)
{
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

/* 4-byte global -> shared copy (.ca: the only cache mode below 16 bytes); src_bytes 0 writes
 * zeros. Paged K/V's page ids ride in the K/V groups this way (decode.cu, fa2.cu). */
__device__ __forceinline__ void at_cp_async4(unsigned dst, const void *src, int src_bytes)
{
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ int at_ld_shared_s32(unsigned addr)
{
  int x;
  asm volatile("ld.shared.s32 %0, [%1];\n" : "=r"(x) : "r"(addr) : "memory");
  return x;
}

__device__ __forceinline__ void at_cp_async_commit(void)
{
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Programmatic dependent launch (sm_90+). A kernel the runtime launches with programmatic
 * stream serialization may start while the kernel before it on the stream still runs, so its
 * CTAs are placed and ready when that one ends: it must wait here before its first global read
 * or write (the previous kernel may be writing its inputs, or reading what it overwrites). The
 * wait returns at once after a plain launch. at_allow_next_grid lets the next kernel launch
 * early in turn; that kernel still waits for this whole grid's results. */
__device__ __forceinline__ void at_wait_for_previous_grid(void)
{
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void at_allow_next_grid(void)
{
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* Wait until at most n of this thread's most recent groups are still in flight. */
template <int n> __device__ __forceinline__ void at_cp_async_wait(void)
{
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}

__device__ __forceinline__ float at_exp2(float x)
{
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float at_log2(float x)
{
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Four 8x8 matrices of 16-bit elements from shared memory (lane l addresses row l % 8 of matrix
 * l / 8), as the m16n8 fragments of mma.sync; .trans gives them transposed. */
__device__ __forceinline__ void at_ldmatrix_x4(unsigned r[4], unsigned addr)
{
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void at_ldmatrix_x4_trans(unsigned r[4], unsigned addr)
{
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/* Max and sum over the 4 lanes of a quad (the lanes that share a row of an m16n8 fragment). */
__device__ __forceinline__ float at_quad_max(float x)
{
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float at_quad_sum(float x)
{
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* O *= alpha per row half of an m16n8-layout accumulator (acc[j][0..1] row g, acc[j][2..3] row
 * g + 8; OT n8 tiles). Once a row's max has settled alpha is exactly 1 (2^0); with SKIP, where it
 * is for every row of the warp, the multiplies are skipped: exact, and the branch is
 * warp-uniform (fa3 v15, decode step 17). */
template <int OT, bool SKIP> __device__ __forceinline__ void at_rescale_o(float (*acc)[4], const float *alpha)
{
  if (SKIP && __all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;
#pragma unroll
  for (int j = 0; j < OT; j++) {
    acc[j][0] *= alpha[0];
    acc[j][1] *= alpha[0];
    acc[j][2] *= alpha[1];
    acc[j][3] *= alpha[1];
  }
}

/* Two floats to a packed pair of 16-bit values, lo in bits 0..15: bf16 when the output is bf16,
 * else f16 (for 16-bit inputs also the input dtype, which P uses). */
__device__ __forceinline__ unsigned at_pack_out(float lo, float hi)
{
  unsigned r;
#if AT_OUT_DTYPE == AT_DTYPE_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

/* ---- wgmma (sm_90a: fa3.cu, decode.cu's .wg kernel) ------------------------------------------- */

/* Tiles for wgmma are stored in CW-byte column blocks: block c holds bytes [c*CW, (c+1)*CW) of
 * every row, R rows of CW bytes one after another, and the 16-byte chunks of a row are swizzled
 * the way the hardware's 128-, 64- or 32-byte swizzle reads them (CW 128: chunk k of row r at
 * chunk k ^ (r % 8)). So 8 rows of a block are one 8*CW-byte swizzle atom, tiles start on
 * 1024-byte boundaries, and a K-major operand's k step is an address step inside a block. */

/* Byte offset of byte `col` of row `r` in a tile of R rows stored in CW-byte column blocks. */
template <int R, int CW> __device__ __forceinline__ unsigned at_swz_off(int r, int col)
{
  constexpr unsigned M = CW / 16 - 1; /* the 16-byte chunks of one swizzled row, less one */
  const unsigned x = (unsigned)(r * CW + (col % CW));
  return (unsigned)((col / CW) * R * CW) + (x ^ (((x >> 7) & M) << 4));
}

/* A warp's 16 rows of a K-major tile (R rows in CW-byte column blocks), from row row0, as the A
 * fragments of KS k steps of 32 bytes: ldmatrix x4, lane l addressing row row0 + l % 16 at byte
 * 16 (l / 16) of the step, gives each lane the m16 k16 (16-bit) or m16 k32 (FP8) A fragment of
 * mma.sync, which is also wgmma's A from registers (fa3 .qr, decode's DEC_WG_QREG). */
template <int R, int CW, int KS>
__device__ __forceinline__ void at_load_a_frags(unsigned (*f)[4], unsigned tile, int row0, int lane)
{
#pragma unroll
  for (int ks = 0; ks < KS; ks++)
    at_ldmatrix_x4(f[ks], tile + at_swz_off<R, CW>(row0 + (lane & 15), 32 * ks + 16 * (lane >> 4)));
}

/* Generic-proxy writes to shared memory (cp.async, st.shared) become visible to wgmma. */
__device__ __forceinline__ void at_fence_async_smem(void)
{
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void at_wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void at_wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void at_wgmma_wait0(void) { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

/* ---- mbarriers and TMA (sm_90) ----
 * A ring of shared-memory tiles filled by TMA: the copy engine completes its bytes on a "full"
 * mbarrier, consumers arrive on an "empty" one when done reading. */
/* A CUtensorMap as the kernel receives it: 128 opaque bytes, 64-byte aligned. */
struct __align__(64) at_tmap {
  unsigned long long word[16];
};

__device__ __forceinline__ void at_bar_init(unsigned bar, unsigned count)
{
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* The producer's arrival on a full barrier, announcing the bytes its copies will complete there. */
__device__ __forceinline__ void at_bar_expect(unsigned bar, unsigned bytes)
{
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void at_bar_arrive(unsigned bar)
{
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* Wait until the barrier's phase of this parity completed (a fresh barrier counts its phase
 * before 0, parity 1, as completed: the producer's first pass over the ring does not wait). */
__device__ __forceinline__ void at_bar_wait(unsigned bar, unsigned parity)
{
  unsigned done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

/* One box of a 4-D tensor map (D, rows, heads, batch) into shared memory; rows past the tensor
 * arrive as zeros. */
__device__ __forceinline__ void at_tma_load(unsigned dst, const at_tmap *map, int d, int row, int head, int b,
                                             unsigned bar)
{
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
               "l"(map), "r"(d), "r"(row), "r"(head), "r"(b), "r"(bar)
               : "memory");
}

/* The same with an L2 cache policy (at_l2_evict_first) for the lines the box reads. */
__device__ __forceinline__ void at_tma_load_hint(unsigned dst, const at_tmap *map, int d, int row, int head, int b,
                                                 unsigned bar, unsigned long long policy)
{
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
               "[%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(dst),
               "l"(map), "r"(d), "r"(row), "r"(head), "r"(b), "r"(bar), "l"(policy)
               : "memory");
}

/* An L2 policy under which the lines a copy brings in are the first to go */
__device__ __forceinline__ unsigned long long at_l2_evict_first()
{
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

/* An L2 policy under which the lines an access brings in or writes are the last to go; a later
 * load does not take that back (scripts/l2_policy_probe.cu), applypriority or discard do. */
__device__ __forceinline__ unsigned long long at_l2_evict_last()
{
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

/* A wgmma shared-memory matrix descriptor for a K-major operand stored as above: start address,
 * leading byte offset 1 (unused when swizzled), stride byte offset 8*CW (one 8-row atom), swizzle
 * mode 1 (128 B), 2 (64 B) or 3 (32 B). */
template <int CW> __device__ __forceinline__ unsigned long long at_wgmma_desc(unsigned addr)
{
  return (unsigned long long)((addr & 0x3ffffu) >> 4) | (1ull << 16) |
         ((unsigned long long)((8 * CW) >> 4) << 32) | ((CW == 128 ? 1ull : CW == 64 ? 2ull : 3ull) << 62);
}

/* The descriptor of the same operand `bytes` further on (a k step, the next column block): its
 * start address field (bits 0-13, in 16-byte units) moves by bytes / 16, in the low word alone.
 * Exact while the operand stays inside shared memory (under 2^18 bytes, so no carry leaves the
 * field), as every tile does. Built once per tile and advanced per wgmma, a descriptor costs
 * one add a wgmma instead of a mask, a shift and an or of the address (fa3 v23). */
__device__ __forceinline__ unsigned long long at_wgmma_desc_advance(unsigned long long desc, unsigned bytes)
{
  const unsigned lo = (unsigned)desc + (bytes >> 4);
  return (desc & 0xffffffff00000000ull) | lo;
}

/* The descriptor of an MN-major operand (16-bit V as the B of P V, read with the transpose bit):
 * the same tile layout, read the other way — 64 elements of N (one 128-byte swizzled row) per
 * column block, leading byte offset = the stride between column blocks, stride byte offset =
 * 1024 between groups of 8 k rows. */
template <int BLOCK_BYTES> __device__ __forceinline__ unsigned long long at_wgmma_desc_mn(unsigned addr)
{
  return (unsigned long long)((addr & 0x3ffffu) >> 4) | ((unsigned long long)(BLOCK_BYTES >> 4) << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

/* Rows of sequence b in a packed tensor of `total` rows: cu[b] .. cu[b+1] - 1, clamped into
 * [0, total] whatever cu holds (offsets are device data nobody has checked), and cut to max_len;
 * *first is its first row. The one reading of a ragged offset table: the kernels, their grid
 * (at_ragged_block), the naive reference and cuDNN's ragged offsets all agree on it. */
__device__ __forceinline__ int at_ragged_rows(const int *cu, int b, int total, int max_len, int *first)
{
  const int start = min(max(cu[b], 0), total), end = min(max(cu[b + 1], start), total);
  *first = start;
  return min(end - start, max_len);
}

/* Ragged launches (fa2, fa3; generator/rules.c): grid x runs over the query blocks of the
 * sequences one after another, ceil(T_b / bm) for sequence b, T_b = at_ragged_rows. Block p is
 * block j of sequence b with blocks(0 .. b-1) <= p < blocks(0 .. b): one warp-wide scan per 32
 * sequences. from_last (causal masks) numbers a sequence's blocks from its last, which reads the
 * most K/V tiles, so each sequence's longest CTAs start first. False past the last block (a grid bound by the
 * totals, or offsets that overlap). Every lane of the warp calls it with the same p. */
__device__ __forceinline__ bool at_ragged_block(const int *cu, int batch, int total, int max_len, int bm,
                                                bool from_last, int p, int *b_out, int *m_out)
{
  const int lane = threadIdx.x & 31;
  int before = 0; /* blocks of the sequences before this group of 32 */
  for (int b0 = 0; b0 < batch; b0 += 32) {
    const int b = b0 + lane;
    int blocks = 0;
    int first;
    if (b < batch) blocks = (at_ragged_rows(cu, b, total, max_len, &first) + bm - 1) / bm;
    int upto = blocks; /* inclusive prefix sum over the lanes */
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, upto, o);
      if (lane >= o) upto += y;
    }
    const unsigned hit = __ballot_sync(0xffffffffu, b < batch && p < before + upto);
    if (hit) {
      const int l = __ffs(hit) - 1;
      const int j = p - before - __shfl_sync(0xffffffffu, upto - blocks, l);
      const int n = __shfl_sync(0xffffffffu, blocks, l);
      *b_out = b0 + l, *m_out = from_last ? n - 1 - j : j;
      return true;
    }
    before += __shfl_sync(0xffffffffu, upto, 31);
  }
  return false;
}

/* Is key j visible from query i? offset = 0 (top-left) or S - T (bottom-right). */
__device__ __forceinline__ bool at_visible(int mask, long long i, long long j, long long offset)
{
  return mask == AT_MASK_NONE || j <= i + offset;
}
