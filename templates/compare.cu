/*
 * compare.cu — the distance of an output from its reference, reduced on the GPU, so that checking
 * a candidate does not copy its whole output to the host (at B2 Nq32 T=16k D128 that copy and
 * the host loop took over a second per candidate, most of a tuning run's time).
 *
 * The preamble sets AT_IN_DTYPE (and AT_OUT_DTYPE, which common.cuh asks for) to the dtype of the
 * output compared, so at_in_to_float decodes it. With o = decode(out[i]) * descale in fp32:
 *   sums[0] += sum of (o - ref[i])^2 and sums[1] += sum of ref[i]^2 in fp64, over the entries
 *   whose o is finite; nonfinite[0] += the number whose o is NaN or infinite
 * which is what tuner/reference.c's tn_compare adds on the host (it also finds the worst entry).
 */

__device__ __forceinline__ double at_warp_sum(double x)
{
#pragma unroll
  for (int off = 16; off; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
  return x;
}

__device__ __forceinline__ unsigned long long at_warp_sum_u64(unsigned long long x)
{
#pragma unroll
  for (int off = 16; off; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
  return x;
}

/* Any grid of whole warps (at most 1024 threads a block); sums and nonfinite zeroed first. */
extern "C" __global__ void at_compare(const float *__restrict__ ref, const at_in_t *__restrict__ out, float descale,
                                      long long n, double *__restrict__ sums,
                                      unsigned long long *__restrict__ nonfinite)
{
  double d2 = 0.0, r2 = 0.0;
  unsigned long long bad = 0;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const float o = at_in_to_float(out[i]) * descale;
    if (!isfinite(o)) {
      bad++;
      continue;
    }
    const double r = ref[i], d = (double)o - r;
    d2 += d * d;
    r2 += r * r;
  }
  __shared__ double s_d2[32], s_r2[32];
  __shared__ unsigned long long s_bad[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  d2 = at_warp_sum(d2), r2 = at_warp_sum(r2), bad = at_warp_sum_u64(bad);
  if (lane == 0) s_d2[warp] = d2, s_r2[warp] = r2, s_bad[warp] = bad;
  __syncthreads();
  if (warp != 0) return;
  d2 = at_warp_sum(lane < warps ? s_d2[lane] : 0.0);
  r2 = at_warp_sum(lane < warps ? s_r2[lane] : 0.0);
  bad = at_warp_sum_u64(lane < warps ? s_bad[lane] : 0ull);
  if (lane == 0) {
    atomicAdd(&sums[0], d2);
    atomicAdd(&sums[1], r2);
    atomicAdd(nonfinite, bad);
  }
}
