// l2_policy_probe.cu — does a line written under an L2 evict_last policy stay in L2, and what
// takes that priority away again? Decode's split kernels store their partials under evict_last
// (templates/decode.cu, step 35) so that a call's K/V stream does not push them to HBM before the
// combine reads them; once read they are dead, and a library must not leave megabytes of its
// scratch outranking its caller's data in L2 (one plan per layer: dozens of such buffers).
//
//   nvcc -O3 -arch=sm_90a -o l2_policy_probe scripts/l2_policy_probe.cu && ./l2_policy_probe [MB]
//
// Per case: P (MB megabytes, default 16) is written (plainly or under evict_last), then read
// once the way named (the combine's read, or a demotion), then a 1 GB buffer is streamed with
// plain loads (20x the L2), then P is read again, timed by events: a read from L2 takes a
// fraction of a read from HBM, so the last read's time says whether P outlived the stream. Each
// case runs ROUNDS times; the table gives the median and the range, with two references: P read
// right after its write (in L2) and plain P after the stream (from HBM).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "probe_check.h"
/* The kernels' own L2 policies (at_l2_evict_first, at_l2_evict_last): the file NVRTC compiles
 * after a variant's preamble, which here need only name the dtypes. */
#define AT_IN_DTYPE 2 /* bf16 */
#define AT_OUT_DTYPE 2
#include "../templates/common.cuh"

static constexpr int ROUNDS = 15;
static constexpr int THREADS = 256;

enum write_mode { W_PLAIN, W_EVICT_LAST };
enum touch_mode { T_NONE, T_LD, T_LD_NC, T_LD_EVICT_FIRST, T_LD_NC_EVICT_FIRST, T_APPLYPRIORITY, T_DISCARD };
static const char *touch_name[] = {"no read",
                                   "ld.global (plain)",
                                   "ld.global.nc (the combine's)",
                                   "ld.global + evict_first policy",
                                   "ld.global.nc + evict_first policy",
                                   "applypriority.L2::evict_normal",
                                   "discard.global.L2"};

__global__ void write_p(float4 *p, size_t n, int mode)
{
  const unsigned long long pol = at_l2_evict_last();
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float4 v = make_float4((float)i, 1.f, 2.f, 3.f);
    if (mode == W_EVICT_LAST)
      asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p + i), "f"(v.x), "f"(v.y),
                   "f"(v.z), "f"(v.w), "l"(pol)
                   : "memory");
    else
      asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p + i), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                   : "memory");
  }
}

/* One read of P as named; the sum goes to *sink so that no load is dropped. Each thread's loads
 * touch one 16-byte chunk; applypriority and discard take a 128-byte line each. */
__global__ void touch_p(const float4 *p, size_t n, int mode, float *sink)
{
  const unsigned long long pol = at_l2_evict_first();
  float acc = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float x = 0.f, y = 0.f, z = 0.f, w = 0.f;
    const float4 *a = p + i;
    switch (mode) {
    case T_LD:
      asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(x), "=f"(y), "=f"(z), "=f"(w) : "l"(a));
      break;
    case T_LD_NC:
      asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(x), "=f"(y), "=f"(z), "=f"(w) : "l"(a));
      break;
    case T_LD_EVICT_FIRST:
      asm volatile("ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                   : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
                   : "l"(a), "l"(pol));
      break;
    case T_LD_NC_EVICT_FIRST:
      asm volatile("ld.global.nc.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                   : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
                   : "l"(a), "l"(pol));
      break;
    case T_APPLYPRIORITY:
      if (i % 8 == 0) asm volatile("applypriority.global.L2::evict_normal [%0], 128;\n" ::"l"(a) : "memory");
      break;
    case T_DISCARD:
      if (i % 8 == 0) asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(a) : "memory");
      break;
    default:
      break;
    }
    acc += x + y + z + w;
  }
  if (acc == 1234.5f) *sink = acc;
}

/* A plain read of n chunks, several 16-byte loads in flight a thread. */
__global__ void read_all(const float4 *p, size_t n, float *sink)
{
  float acc = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float4 v;
    asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p + i));
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5f) *sink = acc;
}

struct probe {
  float4 *p, *x;
  size_t np, nx;
  float *sink;
  int ctas;
  cudaEvent_t e0, e1;
};

/* Microseconds of the last read of P, after write, touch and (if stream) the 1 GB stream. */
static float one_round(const probe &pr, int wmode, int tmode, bool stream)
{
  write_p<<<pr.ctas, THREADS>>>(pr.p, pr.np, wmode);
  if (tmode != T_NONE) touch_p<<<pr.ctas, THREADS>>>(pr.p, pr.np, tmode, pr.sink);
  if (stream) read_all<<<pr.ctas, THREADS>>>(pr.x, pr.nx, pr.sink);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(pr.e0));
  read_all<<<pr.ctas, THREADS>>>(pr.p, pr.np, pr.sink);
  CHECK(cudaEventRecord(pr.e1));
  CHECK(cudaEventSynchronize(pr.e1));
  float ms = 0.f;
  CHECK(cudaEventElapsedTime(&ms, pr.e0, pr.e1));
  return ms * 1000.f;
}

static void row(const probe &pr, const char *write, int wmode, int tmode, bool stream)
{
  std::vector<float> us;
  for (int r = 0; r < ROUNDS; r++) us.push_back(one_round(pr, wmode, tmode, stream));
  std::sort(us.begin(), us.end());
  printf("| %-11s | %-34s | %-3s | %7.2f | %6.2f-%-6.2f |\n", write, touch_name[tmode], stream ? "yes" : "no",
         us[us.size() / 2], us.front(), us.back());
}

int main(int argc, char **argv)
{
  const size_t mb = argc > 1 ? (size_t)atoi(argv[1]) : 16;
  if (mb == 0 || mb > 40) {
    fprintf(stderr, "usage: l2_policy_probe [MB of P, 1-40]\n");
    return 2;
  }
  probe pr;
  pr.np = mb * (1 << 20) / sizeof(float4);
  pr.nx = (size_t)1024 * (1 << 20) / sizeof(float4);
  CHECK(cudaMalloc(&pr.p, pr.np * sizeof(float4)));
  CHECK(cudaMalloc(&pr.x, pr.nx * sizeof(float4)));
  CHECK(cudaMalloc(&pr.sink, sizeof(float)));
  CHECK(cudaMemset(pr.x, 1, pr.nx * sizeof(float4)));
  int sms = 0, dev = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  pr.ctas = sms * 4;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  CHECK(cudaEventCreate(&pr.e0));
  CHECK(cudaEventCreate(&pr.e1));
  for (int w = 0; w < 3; w++) one_round(pr, W_PLAIN, T_NONE, true); /* warm-up: clocks, first-touch */
  printf("%s, L2 %d MB; P %zu MB, a 1 GB stream between; us to read P, median of %d (range)\n\n", prop.name,
         prop.l2CacheSize >> 20, mb, ROUNDS);
  printf("| P written   | then read once by                  | 1 GB stream | us | range |\n|---|---|---|---|---|\n");
  row(pr, "plain", W_PLAIN, T_NONE, false);
  row(pr, "plain", W_PLAIN, T_NONE, true);
  row(pr, "evict_last", W_EVICT_LAST, T_NONE, true);
  for (int t = T_LD; t <= T_DISCARD; t++) row(pr, "evict_last", W_EVICT_LAST, t, true);
  row(pr, "plain", W_PLAIN, T_LD_NC, true);
  CHECK(cudaFree(pr.p));
  CHECK(cudaFree(pr.x));
  CHECK(cudaFree(pr.sink));
  return 0;
}
