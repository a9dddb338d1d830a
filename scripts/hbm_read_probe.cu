// hbm_read_probe.cu — a floor to read a split-KV decode call's time against: how long a plain kernel
// takes to read B bytes from HBM with C CTAs (one contiguous slice each, as a decode split reads
// its keys), timed as attntune's bench times a call (a CUDA graph of 20 launches, each on its own
// window of a buffer several times the L2, replayed), and how evenly the CTAs finish: each CTA
// records %globaltimer at its start and end in one more launch, and the table gives the spread.
//
//   nvcc -O3 -arch=sm_90a -o hbm_read_probe scripts/hbm_read_probe.cu -lcuda && ./hbm_read_probe [tma]
//
// With `tma` it streams instead exactly what decode's `.wg` split kernel reads at B8 T16 GQA 8
// (Nkv 4, D 128, 16-bit, four splits: 128 CTAs of splits x heads x batch), with no arithmetic:
// TMA boxes of 64 keys by 128 bytes (two a tensor, or one of 256 bytes unswizzled) into a ring of
// STAGES x 32 KB under full/empty mbarriers, one producer thread and one consumer thread a CTA,
// the consumer optionally waiting a while a tile (and holding the stage until the next tile is in,
// as `.wg` holds V for P V). Per map form (BSHD as the kernel's, BHSD, L2 promotion), S and wait:
// the time a launch in graph replay, its rate, and from a stamped launch when tile 0 lands and
// the median interval between tiles 0-15 and 16-31 (docs/perf.md, thirty-fifth session).
//
// Rows: bytes (the K/V of #15's shapes: B1 S4k Nkv8 16.8 MB, B1 S16k Nkv8 in FP8 33.6 MB, B8 T16
// S4k Nkv4 67 MB, B8 S16k Nkv4 in FP8 134 MB, B8 S16k Nkv4 268 MB, B8 S16k Nkv8 537 MB), CTAs (64,
// 128, 132, and 264: two an SM) of 256 or 512 threads (64 or 128 KB of loads in flight a CTA), the
// time per launch in graph replay and its rate, and per CTA (one launch, globaltimer's ns ticks)
// the latest start, the earliest, mean and latest end, from the first start. First, the launch
// floor: the same kernel reading nothing, 132 CTAs, in the same graph replay.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "probe_check.h"

static constexpr int UNROLL = 16; /* 16-byte loads in flight a thread: 64 KB a CTA of 256, 128 KB of 512 */

__device__ __forceinline__ unsigned long long now_ns()
{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ int4 load_stream(const int4 *p)
{
  int4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// CTA c reads int4s [c * per_cta, (c + 1) * per_cta) of src. The xor of the words is stored only
// if it equals a value the 0x5a fill never gives, so that the compiler keeps the loads.
template <int THREADS>
__global__ void __launch_bounds__(THREADS) stream_read(const int4 *__restrict__ src, long long per_cta,
                                                       int *__restrict__ sink, unsigned long long *__restrict__ times)
{
  const unsigned long long t0 = now_ns();
  const int4 *p = src + blockIdx.x * per_cta;
  int acc = 0;
  for (long long i = threadIdx.x; i < per_cta; i += (long long)THREADS * UNROLL) {
    int4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const long long j = i + (long long)u * THREADS;
      v[u] = j < per_cta ? load_stream(p + j) : make_int4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x7fffffff) sink[threadIdx.x] = acc;
  __syncthreads();
  if (times && threadIdx.x == 0) times[2 * blockIdx.x] = t0, times[2 * blockIdx.x + 1] = now_ns();
}

static void launch(int threads, int ctas, cudaStream_t st, const int4 *src, long long per_cta, int *sink,
                   unsigned long long *times)
{
  if (threads == 512) stream_read<512><<<ctas, 512, 0, st>>>(src, per_cta, sink, times);
  else stream_read<256><<<ctas, 256, 0, st>>>(src, per_cta, sink, times);
}

/* The time one launch takes in graph replay, as attntune's bench times a call: `launches`
 * launches (launch(i) issues the i-th on st) captured in one graph, one warm-up replay, then the
 * mean over 10 replays, in us. */
template <class Launch> static double graph_us_per_launch(cudaStream_t st, int launches, Launch launch)
{
  const int replays = 10;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < launches; i++) launch(i);
  CHECK(cudaStreamEndCapture(st, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  CHECK(cudaGraphLaunch(ge, st)); /* warm-up */
  CHECK(cudaEventRecord(e0, st));
  for (int r = 0; r < replays; r++) CHECK(cudaGraphLaunch(ge, st));
  CHECK(cudaEventRecord(e1, st));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0.f;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return ms * 1e3 / (replays * launches);
}

/* A stream table's start: the GPU's name before what the table streams, a pool of pool_bytes
 * (filled, so that no read is of untouched pages) and the stream its launches go to. */
static cudaStream_t stream_table_start(const char *what, size_t pool_bytes, unsigned char **pool)
{
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  printf("%s: %s, no arithmetic\n", prop.name, what);
  CHECK(cudaMalloc(pool, pool_bytes));
  CHECK(cudaMemset(*pool, 0x3c, pool_bytes));
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  return st;
}

static int plain_table(void)
{
  /* #15's K/V: B1 S4k Nkv 8 (16.8 MB), B1 S16k Nkv 8 in FP8 (33.6), B8 S4k Nkv 4 and B1 S16k Nkv 8
   * (67.1), B8 S16k Nkv 4 in FP8 (134.2), B8 S16k Nkv 4 (268.4), Nkv 8 (536.9) */
  const double sizes_mb[] = {16.8, 33.6, 67.1, 134.2, 268.4, 536.9};
  const int n_sizes = (int)(sizeof sizes_mb / sizeof *sizes_mb);
  const int ctas[] = {64, 128, 132, 264};
  const int launches = 20;
  int dev = 0, l2 = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  char what[96];
  snprintf(what, sizeof what, "plain reads, %d SMs, L2 %.1f MB", sms, l2 / 1e6);

  const size_t max_bytes = (size_t)(sizes_mb[n_sizes - 1] * 1e6) + (1 << 20);
  const size_t pool_bytes = max_bytes * 4; /* windows rotate through 4 x the largest size */
  unsigned char *bytes;
  cudaStream_t st = stream_table_start(what, pool_bytes, &bytes);
  int4 *pool = reinterpret_cast<int4 *>(bytes);
  int *sink;
  unsigned long long *times;
  CHECK(cudaMalloc(&sink, 512 * sizeof(int)));
  CHECK(cudaMalloc(&times, 2 * 1024 * sizeof(unsigned long long))); /* up to 1024 CTAs */

  /* the launch floor: the same kernel reading nothing, in the same graph replay */
  const double empty_us = graph_us_per_launch(st, launches, [&](int) { launch(256, 132, st, pool, 0, sink, nullptr); });
  printf("an empty launch of 132 CTAs: %.2f us in graph replay\n", empty_us);
  printf("%9s %5s %4s %10s %8s %12s %12s %12s %12s\n", "MB", "CTAs", "thr", "us/launch", "TB/s", "last start", "first end",
         "mean end", "last end");
  for (double mb : sizes_mb)
    for (int c : ctas)
      for (int threads : {256, 512}) {
        const long long per_cta = (long long)(mb * 1e6 / 16) / c; /* int4s a CTA */
        const size_t bytes = (size_t)per_cta * c * 16;
        const int windows = (int)(pool_bytes / bytes) < launches ? (int)(pool_bytes / bytes) : launches;
        if (windows < 2 || (double)bytes * windows < 2.0 * l2) {
          printf("%9.1f %5d %4d  (the pool holds %d windows: under twice the L2)\n", mb, c, threads, windows);
          continue;
        }
        const double us = graph_us_per_launch(st, launches, [&](int i) {
          launch(threads, c, st, pool + (size_t)(i % windows) * per_cta * c, per_cta, sink, nullptr);
        });

        /* one more launch, on a window the last replay did not read, with the CTAs' clocks */
        launch(threads, c, st, pool + (size_t)((launches + 1) % windows) * per_cta * c, per_cta, sink, times);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(st));
        unsigned long long h[2 * 1024];
        CHECK(cudaMemcpy(h, times, 2 * c * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        unsigned long long first_start = ~0ull, last_start = 0, first_end = ~0ull, last_end = 0;
        double sum_end = 0;
        for (int i = 0; i < c; i++) {
          if (h[2 * i] < first_start) first_start = h[2 * i];
          if (h[2 * i] > last_start) last_start = h[2 * i];
        }
        for (int i = 0; i < c; i++) {
          const unsigned long long e = h[2 * i + 1];
          if (e < first_end) first_end = e;
          if (e > last_end) last_end = e;
          sum_end += (double)(e - first_start);
        }
        printf("%9.1f %5d %4d %10.2f %8.2f %10.2fus %10.2fus %10.2fus %10.2fus\n", bytes / 1e6, c, threads, us, bytes / us / 1e6,
               (last_start - first_start) / 1e3, (first_end - first_start) / 1e3, sum_end / c / 1e3,
               (last_end - first_start) / 1e3);
      }
  CHECK(cudaFree(pool));
  CHECK(cudaFree(sink));
  CHECK(cudaFree(times));
  return 0;
}

/* ---- tma: decode .wg's K/V stream ------------------------------------------------------------ */

/* The kernels' own mbarrier and TMA helpers (at_bar_*, at_tma_load): the file NVRTC compiles after
 * a variant's preamble, which here need only name the dtypes. */
#define AT_IN_DTYPE 2  /* bf16 */
#define AT_OUT_DTYPE 2
#include "../templates/common.cuh"
static_assert(sizeof(at_tmap) == sizeof(CUtensorMap), "a tensor map passed as the kernels' at_tmap");

static constexpr int TMA_BN = 64, TMA_D = 128, TMA_TILE = TMA_BN * TMA_D * 2; /* 16 KB of K or V */
static constexpr int TMA_STAMPS = 32;                                       /* tiles stamped a CTA */

/* Grid (splits, heads, batch) as the split kernel's. Thread 0 produces, thread 32 consumes: waits
 * for each tile, then wait_ns (negative: also holds the stage until the next tile is in). */
template <int STAGES>
__global__ void __launch_bounds__(64) tma_stream(const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv,
                                                 int boxes, int keys_per_cta, int wait_ns, unsigned long long *stamps)
{
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  const unsigned ring = (at_smem_addr(smem_raw) + 1023u) & ~1023u; /* swizzle atoms */
  const unsigned full = at_smem_addr(bars), empty = full + 8 * STAGES;
  const int n_tiles = keys_per_cta / TMA_BN, k_lo = blockIdx.x * keys_per_cta;
  const long long cta = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long t0 = now_ns();
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) at_bar_init(full + 8 * s, 1), at_bar_init(empty + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  int stage = 0;
  unsigned phase = 0;
  if (threadIdx.x == 0) {
    for (int t = 0; t < n_tiles; t++) {
      at_bar_wait(empty + 8 * stage, phase ^ 1u); /* a fresh barrier passes: the ring's first pass */
      at_bar_expect(full + 8 * stage, 2 * TMA_TILE);
      const unsigned k_dst = ring + stage * 2 * TMA_TILE, v_dst = k_dst + TMA_TILE;
      const int key = k_lo + t * TMA_BN;
      for (int c = 0; c < boxes; c++) {
        at_tma_load(k_dst + c * TMA_TILE / boxes, (const at_tmap *)&tk, c * 64, key, blockIdx.y, blockIdx.z, full + 8 * stage);
        at_tma_load(v_dst + c * TMA_TILE / boxes, (const at_tmap *)&tv, c * 64, key, blockIdx.y, blockIdx.z, full + 8 * stage);
      }
      if (++stage == STAGES) stage = 0, phase ^= 1u;
    }
  } else if (threadIdx.x == 32) {
    const int spin = wait_ns < 0 ? -wait_ns : wait_ns;
    for (int t = 0; t < n_tiles; t++) {
      at_bar_wait(full + 8 * stage, phase);
      if (stamps && t < TMA_STAMPS) stamps[cta * (TMA_STAMPS + 2) + 2 + t] = now_ns();
      for (const unsigned long long end = now_ns() + spin; spin && now_ns() < end;) {
      }
      if (wait_ns >= 0) at_bar_arrive(empty + 8 * stage);
      else if (t > 0) at_bar_arrive(empty + 8 * (stage == 0 ? STAGES - 1 : stage - 1));
      if (++stage == STAGES) stage = 0, phase ^= 1u;
    }
    if (stamps) stamps[cta * (TMA_STAMPS + 2)] = t0, stamps[cta * (TMA_STAMPS + 2) + 1] = now_ns();
  }
}

struct tma_form {
  const char *name;
  int boxes; /* 2: 128-byte boxes, swizzled as the kernel's; 1: one 256-byte box, unswizzled */
  int bhsd;  /* each head's keys contiguous, else BSHD (the kernel's bench layout) */
  CUtensorMapL2promotion promotion;
};

static void encode_kv_map(CUtensorMap *map, void *base, const tma_form &f, int B, int S, int H)
{
  const cuuint64_t dims[4] = {(cuuint64_t)TMA_D, (cuuint64_t)S, (cuuint64_t)H, (cuuint64_t)B};
  const cuuint64_t row = TMA_D * 2; /* bytes of one key of one head */
  cuuint64_t strides[3] = {H * row, row, (cuuint64_t)S * H * row};
  if (f.bhsd) strides[0] = row, strides[1] = (cuuint64_t)S * row, strides[2] = (cuuint64_t)H * S * row;
  const cuuint32_t box[4] = {(cuuint32_t)(TMA_D / f.boxes), (cuuint32_t)TMA_BN, 1, 1}, unit[4] = {1, 1, 1, 1};
  CU_CHECK(cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, base, dims, strides, box, unit,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  f.boxes == 2 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE, f.promotion,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

static double median(std::vector<double> v)
{
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <int STAGES> static void tma_rows(unsigned char *pool, size_t pool_bytes, unsigned long long *stamps, cudaStream_t st)
{
  const tma_form forms[] = {{"BSHD 2x128 B, promotion 256 B (.wg's)", 2, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
                            {"BSHD 2x128 B, no promotion", 2, 0, CU_TENSOR_MAP_L2_PROMOTION_NONE},
                            {"BSHD 1x256 B, promotion 256 B", 1, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
                            {"BHSD 2x128 B, promotion 256 B", 2, 1, CU_TENSOR_MAP_L2_PROMOTION_L2_256B}};
  const int B = 8, H = 4, SPLITS = 4, launches = 20, n_ctas = B * H * SPLITS;
  const int smem = STAGES * 2 * TMA_TILE + 1024;
  CHECK(cudaFuncSetAttribute(tma_stream<STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int S : {4096, 65536})
    for (int wait : {0, 700, -700})
      for (const tma_form &f : forms) {
        if (S == 65536 && wait) continue;
        const size_t kv_bytes = (size_t)B * S * H * TMA_D * 2, set = 2 * kv_bytes;
        const int windows = std::min((int)(pool_bytes / set), launches);
        std::vector<CUtensorMap> mk(windows), mv(windows);
        for (int w = 0; w < windows; w++) {
          encode_kv_map(&mk[w], pool + w * set, f, B, S, H);
          encode_kv_map(&mv[w], pool + w * set + kv_bytes, f, B, S, H);
        }
        const dim3 grid(SPLITS, H, B);
        const int per_cta = S / SPLITS;
        const double us = graph_us_per_launch(st, launches, [&](int i) {
          tma_stream<STAGES><<<grid, 64, smem, st>>>(mk[i % windows], mv[i % windows], f.boxes, per_cta, wait, nullptr);
        });

        /* a stamped launch right behind a plain one, as in replay */
        const size_t stamp_bytes = (size_t)n_ctas * (TMA_STAMPS + 2) * sizeof(unsigned long long);
        CHECK(cudaMemsetAsync(stamps, 0, stamp_bytes, st));
        tma_stream<STAGES><<<grid, 64, smem, st>>>(mk[0], mv[0], f.boxes, per_cta, wait, nullptr);
        tma_stream<STAGES><<<grid, 64, smem, st>>>(mk[1 % windows], mv[1 % windows], f.boxes, per_cta, wait, stamps);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(st));
        std::vector<unsigned long long> h(stamp_bytes / sizeof(unsigned long long));
        CHECK(cudaMemcpy(h.data(), stamps, stamp_bytes, cudaMemcpyDeviceToHost));
        unsigned long long first = ~0ull;
        for (int c = 0; c < n_ctas; c++) first = std::min(first, h[c * (TMA_STAMPS + 2)]);
        const int stamped = std::min(per_cta / TMA_BN, TMA_STAMPS);
        std::vector<double> tile0, early, late;
        for (int c = 0; c < n_ctas; c++) {
          const unsigned long long *r = &h[c * (TMA_STAMPS + 2)];
          tile0.push_back((r[2] - first) / 1e3);
          early.push_back((r[2 + std::min(15, stamped - 1)] - r[2]) / 1e3 / std::min(15, stamped - 1));
          if (stamped >= 32) late.push_back((r[2 + 31] - r[2 + 16]) / 1e3 / 15);
        }
        printf("%-40s %6d %6d %6d %9.2f %7.2f %8.2f %8.3f %8.3f\n", f.name, STAGES, S, wait, us, set / us / 1e6,
               median(tile0), median(early), median(late));
      }
}

static int tma_table(void)
{
  const size_t pool_bytes = (size_t)2300 << 20; /* two windows at S 64k */
  unsigned char *pool;
  cudaStream_t st = stream_table_start("decode .wg's K/V stream (B8 Nkv 4 D 128, 4 splits, 128 CTAs)", pool_bytes, &pool);
  unsigned long long *stamps;
  CHECK(cudaMalloc(&stamps, (size_t)128 * (TMA_STAMPS + 2) * sizeof(unsigned long long)));
  printf("%-40s %6s %6s %6s %9s %7s %8s %8s %8s\n", "map", "stages", "S", "wait", "us/launch", "TB/s", "tile 0",
         "dt 0-15", "dt 16-31");
  tma_rows<4>(pool, pool_bytes, stamps, st);
  tma_rows<5>(pool, pool_bytes, stamps, st);
  CHECK(cudaFree(pool));
  CHECK(cudaFree(stamps));
  return 0;
}

/* ---- t1: the one-token split kernel's stream, cp.async ring against a TMA ring ---------------- */

/* As decode's mma.sync split kernel loads K/V (dec_load_kv): 128 threads, each tile's K and V
 * (T1_BN keys of one head, 256 bytes a key, BSHD) by 16-byte cp.async into a ring of STAGES,
 * STAGES - 1 tiles ahead, a __syncthreads a tile; no arithmetic. */
static constexpr int T1_BN = 128, T1_ROW = TMA_D * 2, T1_TILE = T1_BN * T1_ROW; /* 32 KB of K or V */

template <int STAGES>
__global__ void __launch_bounds__(128) cp_async_stream(const unsigned char *__restrict__ k, const unsigned char *__restrict__ v,
                                                       int S, int H, int keys_per_cta)
{
  extern __shared__ __align__(128) unsigned char ring_raw[];
  const unsigned ring = at_smem_addr(ring_raw);
  const int tid = threadIdx.x, n_tiles = keys_per_cta / T1_BN, k_lo = blockIdx.x * keys_per_cta;
  const long long head = ((long long)blockIdx.z * S * H + blockIdx.y) * T1_ROW; /* key 0 of (b, h) */
  const auto load = [&](int t) {
    const unsigned dst = ring + (t % STAGES) * 2 * T1_TILE;
#pragma unroll
    for (int i = 0; i < T1_TILE / 16 / 128; i++) {
      const int c = tid + i * 128, key = k_lo + t * T1_BN + c / (T1_ROW / 16), col = c % (T1_ROW / 16);
      const long long at = head + (long long)key * H * T1_ROW + col * 16;
      at_cp_async16(dst + c * 16, k + at, 16);
      at_cp_async16(dst + T1_TILE + c * 16, v + at, 16);
    }
  };
  for (int t = 0; t < STAGES - 1; t++) {
    if (t < n_tiles) load(t);
    at_cp_async_commit();
  }
  for (int t = 0; t < n_tiles; t++) {
    at_cp_async_wait<STAGES - 2>();
    __syncthreads(); /* tile t in for every thread; tile t-1's slot free */
    if (t + STAGES - 1 < n_tiles) load(t + STAGES - 1);
    at_cp_async_commit();
  }
}

static int t1_table(void)
{
  const size_t pool_bytes = (size_t)2200 << 20; /* one window of B8 S64k Nkv 8 */
  unsigned char *pool;
  cudaStream_t st = stream_table_start("the one-token split kernel's K/V stream (D 128, bf16, BSHD)", pool_bytes, &pool);
  const int launches = 20;
  CHECK(cudaFuncSetAttribute(cp_async_stream<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * 2 * T1_TILE));
  CHECK(cudaFuncSetAttribute(tma_stream<6>, cudaFuncAttributeMaxDynamicSharedMemorySize, 6 * 2 * TMA_TILE + 1024));
  CHECK(cudaFuncSetAttribute(tma_stream<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * 2 * TMA_TILE + 1024));
  const tma_form form = {"BSHD 2x128 B, promotion 256 B", 2, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B};
  struct row {
    int B, H, S, splits;
  } rows[] = {{1, 8, 4096, 4},  {1, 8, 4096, 8},  {1, 8, 4096, 16}, {1, 8, 16384, 8}, {8, 4, 16384, 1},
              {8, 4, 16384, 2}, {8, 4, 16384, 4}, {8, 8, 16384, 1}, {8, 8, 16384, 2}, {8, 8, 65536, 2}};
  printf("%3s %3s %6s %6s %5s %9s | %-28s %9s %7s\n", "B", "Nkv", "S", "splits", "CTAs", "MB", "ring", "us/launch",
         "TB/s");
  for (const row &r : rows) {
    const size_t kv_bytes = (size_t)r.B * r.S * r.H * T1_ROW, set = 2 * kv_bytes;
    const int windows = std::min((int)(pool_bytes / set), launches);
    const int per_cta = r.S / r.splits;
    const dim3 grid(r.splits, r.H, r.B);
    std::vector<CUtensorMap> mk(windows), mv(windows);
    for (int w = 0; w < windows; w++) {
      encode_kv_map(&mk[w], pool + w * set, form, r.B, r.S, r.H);
      encode_kv_map(&mv[w], pool + w * set + kv_bytes, form, r.B, r.S, r.H);
    }
    const auto print = [&](const char *ring, double us) {
      printf("%3d %3d %6d %6d %5d %9.1f | %-28s %9.2f %7.2f\n", r.B, r.H, r.S, r.splits, r.splits * r.H * r.B, set / 1e6,
             ring, us, set / us / 1e6);
    };
    print("cp.async, 3 x 64 KB (bn128 s3)", graph_us_per_launch(st, launches, [&](int i) {
            const unsigned char *base = pool + (i % windows) * set;
            cp_async_stream<3><<<grid, 128, 3 * 2 * T1_TILE, st>>>(base, base + kv_bytes, r.S, r.H, per_cta);
          }));
    print("TMA, 4 x 32 KB (64 keys)", graph_us_per_launch(st, launches, [&](int i) {
            tma_stream<4><<<grid, 64, 4 * 2 * TMA_TILE + 1024, st>>>(mk[i % windows], mv[i % windows], 2, per_cta, 0, nullptr);
          }));
    print("TMA, 6 x 32 KB (64 keys)", graph_us_per_launch(st, launches, [&](int i) {
            tma_stream<6><<<grid, 64, 6 * 2 * TMA_TILE + 1024, st>>>(mk[i % windows], mv[i % windows], 2, per_cta, 0, nullptr);
          }));
    CHECK(cudaGetLastError());
  }
  CHECK(cudaStreamSynchronize(st));
  CHECK(cudaFree(pool));
  return 0;
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "tma") == 0) return tma_table();
  if (argc > 1 && strcmp(argv[1], "t1") == 0) return t1_table();
  if (argc > 1) {
    fprintf(stderr, "usage: hbm_read_probe [tma | t1]\n");
    return 2;
  }
  return plain_table();
}
