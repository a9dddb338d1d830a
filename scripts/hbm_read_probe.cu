// hbm_read_probe.cu — a floor to read a split-KV decode call's time against: how long a plain kernel
// takes to read B bytes from HBM with C CTAs (one contiguous slice each, as a decode split reads
// its keys), timed as attntune's bench times a call (a CUDA graph of 20 launches, each on its own
// window of a buffer several times the L2, replayed), and how evenly the CTAs finish: each CTA
// records %globaltimer at its start and end in one more launch, and the table gives the spread.
//
//   nvcc -O3 -arch=sm_90a -o hbm_read_probe scripts/hbm_read_probe.cu && ./hbm_read_probe
//
// Rows: bytes (the K/V of #15's shapes: B1 S4k Nkv8 16.8 MB, B8 T16 S4k Nkv4 67 MB, B8 S16k Nkv4
// 268 MB, B8 S16k Nkv8 537 MB), CTAs (64, 128, 132) of 256 or 512 threads (64 or 128 KB of
// loads in flight a CTA), the time per launch in graph replay and its rate, and per CTA (one launch, globaltimer's
// ns ticks) the latest start, the earliest, mean and latest end, from the first start.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));        \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

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

int main(void)
{
  const double sizes_mb[] = {16.8, 67.1, 268.4, 536.9};
  const int ctas[] = {64, 128, 132};
  const int launches = 20, replays = 10;
  int dev = 0, l2 = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  printf("%s, %d SMs, L2 %.1f MB\n", prop.name, sms, l2 / 1e6);

  const size_t max_bytes = (size_t)(sizes_mb[3] * 1e6) + (1 << 20);
  const size_t pool_bytes = max_bytes * 4; /* windows rotate through 4 x the largest size */
  int4 *pool;
  int *sink;
  unsigned long long *times;
  CHECK(cudaMalloc(&pool, pool_bytes));
  CHECK(cudaMalloc(&sink, 512 * sizeof(int)));
  CHECK(cudaMalloc(&times, 2 * 1024 * sizeof(unsigned long long)));
  CHECK(cudaMemset(pool, 0x5a, pool_bytes));
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

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
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < launches; i++)
          launch(threads, c, st, pool + (size_t)(i % windows) * per_cta * c, per_cta, sink, nullptr);
        CHECK(cudaStreamEndCapture(st, &g));
        CHECK(cudaGraphInstantiate(&ge, g, 0));
        CHECK(cudaGraphLaunch(ge, st)); /* warm-up */
        CHECK(cudaEventRecord(e0, st));
        for (int r = 0; r < replays; r++) CHECK(cudaGraphLaunch(ge, st));
        CHECK(cudaEventRecord(e1, st));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0.f;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        const double us = ms * 1e3 / (replays * launches);

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
        CHECK(cudaGraphExecDestroy(ge));
        CHECK(cudaGraphDestroy(g));
      }
  CHECK(cudaFree(pool));
  CHECK(cudaFree(sink));
  CHECK(cudaFree(times));
  return 0;
}
