/*
 * naive.cu — the reference attention: three kernels that materialize the full score matrix.
 *
 *   q: (B, T, Nq, D)   k, v: (B, S, Nkv, D)   o: (B, T, Nq, D)   with element strides, D stride 1
 *   scores: (B, Nq, T, S) fp32, contiguous    lse: (B, Nq, T) fp32 (natural log)
 *
 *   scores = (q @ k^T) * scale, masked to -inf      (naive_scores)
 *   p = softmax(scores, axis=-1), lse = logsumexp    (naive_softmax, in place)
 *   o = p @ v                                         (naive_pv)
 *
 * PyTorch: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=..., enable_gqa=True)
 * on (B, N, T, D) transposes. Query head h reads KV head h / (Nq / Nkv). A row with no visible key
 * (bottom-right mask with T > S) gives o = 0 and lse = -inf. All arithmetic is fp32.
 *
 * FP8 inputs (e4m3, e5m2) carry per-tensor descales (device fp32 scalars, NULL = 1): every element
 * is dequantized as it is read, q = decode(q8) * descale_q (likewise k, v), so the kernels compute
 * exactly the fp32 attention of the dequantized tensors:
 *   scores = (q * descale_q) @ (k * descale_k)^T * scale,  o = p @ (v * descale_v).
 * K and V may be FP8 with 16-bit Q (AT_KV_DTYPE e4m3 or e5m2, an FP8 KV cache; the preamble sets
 * it, else it is AT_IN_DTYPE): they are decoded exactly in integer arithmetic (any arch) and take
 * descale_k and descale_v; Q then has no descale (the runtime passes NULL).
 */

#ifndef AT_KV_DTYPE
#define AT_KV_DTYPE AT_IN_DTYPE
#endif
#if AT_KV_DTYPE == AT_IN_DTYPE
typedef at_in_t naive_kv_t;
__device__ __forceinline__ float naive_kv_to_float(naive_kv_t x) { return at_in_to_float(x); }
#elif AT_KV_DTYPE == AT_DTYPE_E4M3 || AT_KV_DTYPE == AT_DTYPE_E5M2
typedef unsigned char naive_kv_t;
/* OCP FP8: e4m3 2^(e-7) (1 + m/8), subnormal m 2^-9, S.1111.111 NaN; e5m2 2^(e-15) (1 + m/4),
 * subnormal m 2^-16, exponent 31 inf (m = 0) or NaN. */
__device__ __forceinline__ float naive_kv_to_float(naive_kv_t x)
{
  const unsigned code = x;
  float v;
#if AT_KV_DTYPE == AT_DTYPE_E4M3
  const unsigned e = (code >> 3) & 15u, m = code & 7u;
  if (e == 15u && m == 7u) v = __int_as_float(0x7fc00000);
  else if (e == 0u) v = (float)m * 0.001953125f;
  else v = __int_as_float((int)(((e + 120u) << 23) | (m << 20)));
#else
  const unsigned e = (code >> 2) & 31u, m = code & 3u;
  if (e == 31u) v = m ? __int_as_float(0x7fc00000) : __int_as_float(0x7f800000);
  else if (e == 0u) v = (float)m * 1.52587890625e-05f;
  else v = __int_as_float((int)(((e + 112u) << 23) | (m << 21)));
#endif
  return code & 0x80u ? -v : v;
}
#else
#error "naive K/V: the input dtype, or e4m3/e5m2 with 16-bit Q"
#endif

/* Must match struct naive_params in runtime/naive.c field for field. */
struct at_naive_params {
  const at_in_t *q;
  const naive_kv_t *k, *v;
  at_out_t *o;
  float *lse;    /* may be null */
  float *scores; /* B * Nq * T * S floats */
  long long q_sb, q_ss, q_sh;
  long long k_sb, k_ss, k_sh;
  long long v_sb, v_ss, v_sh;
  long long o_sb, o_ss, o_sh;
  const float *descale_q, *descale_k, *descale_v; /* FP8 inputs; NULL means 1 */
  int B, T, S, Nq, Nkv, D;
  int mask;
  float scale;
};
static_assert(sizeof(at_naive_params) == 9 * 8 + 12 * 8 + 8 * 4, "naive_params layout");

__device__ __forceinline__ float naive_descale(const float *d) { return d ? *d : 1.0f; }

#define NAIVE_TILE 16

/* grid (ceil(S/16), ceil(T/16), B*Nq), block (16, 16): thread (x, y) owns score (t0+y, s0+x).
 * Q and K tiles of 16 rows x 16 head-dim columns go through shared memory. */
extern "C" __global__ void naive_scores(at_naive_params p)
{
  __shared__ float q_tile[NAIVE_TILE][NAIVE_TILE + 1];
  __shared__ float k_tile[NAIVE_TILE][NAIVE_TILE + 1];
  const int bh = blockIdx.z, b = bh / p.Nq, h = bh % p.Nq, hk = h / (p.Nq / p.Nkv);
  const int t0 = blockIdx.y * NAIVE_TILE, s0 = blockIdx.x * NAIVE_TILE;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const at_in_t *q = p.q + b * p.q_sb + h * p.q_sh;
  const naive_kv_t *k = p.k + b * p.k_sb + hk * p.k_sh;
  const float dq = naive_descale(p.descale_q), dk = naive_descale(p.descale_k);
  float acc = 0.0f;
  for (int d0 = 0; d0 < p.D; d0 += NAIVE_TILE) {
    int d = d0 + tx, tq = t0 + ty, sk = s0 + ty;
    q_tile[ty][tx] = (tq < p.T && d < p.D) ? at_in_to_float(q[tq * p.q_ss + d]) * dq : 0.0f;
    k_tile[ty][tx] = (sk < p.S && d < p.D) ? naive_kv_to_float(k[sk * p.k_ss + d]) * dk : 0.0f;
    __syncthreads();
    for (int i = 0; i < NAIVE_TILE; i++) acc += q_tile[ty][i] * k_tile[tx][i];
    __syncthreads();
  }
  const int t = t0 + ty, s = s0 + tx;
  if (t >= p.T || s >= p.S) return;
  const long long offset = p.mask == AT_MASK_CAUSAL_BR ? (long long)p.S - p.T : 0;
  float value = at_visible(p.mask, t, s, offset) ? acc * p.scale : AT_NEG_INF;
  p.scores[((long long)bh * p.T + t) * p.S + s] = value;
}

#define NAIVE_ROW_THREADS 256

__device__ float naive_block_reduce(float x, bool is_max, float *shared)
{
  for (int o = 16; o > 0; o >>= 1) {
    float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = is_max ? fmaxf(x, y) : x + y;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = shared[0];
  for (int w = 1; w < NAIVE_ROW_THREADS / 32; w++) x = is_max ? fmaxf(x, shared[w]) : x + shared[w];
  __syncthreads();
  return x;
}

/* grid (T, B*Nq), block 256: one block normalizes one score row in place and writes its lse. */
extern "C" __global__ void naive_softmax(at_naive_params p)
{
  __shared__ float partial[NAIVE_ROW_THREADS / 32];
  const int t = blockIdx.x, bh = blockIdx.y;
  float *row = p.scores + ((long long)bh * p.T + t) * p.S;
  float m = AT_NEG_INF;
  for (int s = threadIdx.x; s < p.S; s += NAIVE_ROW_THREADS) m = fmaxf(m, row[s]);
  m = naive_block_reduce(m, true, partial);
  if (m == AT_NEG_INF) { /* nothing visible: p = 0, lse = -inf */
    for (int s = threadIdx.x; s < p.S; s += NAIVE_ROW_THREADS) row[s] = 0.0f;
    if (threadIdx.x == 0 && p.lse) p.lse[(long long)bh * p.T + t] = AT_NEG_INF;
    return;
  }
  float sum = 0.0f;
  for (int s = threadIdx.x; s < p.S; s += NAIVE_ROW_THREADS) sum += expf(row[s] - m);
  sum = naive_block_reduce(sum, false, partial);
  const float inv = 1.0f / sum;
  for (int s = threadIdx.x; s < p.S; s += NAIVE_ROW_THREADS) row[s] = expf(row[s] - m) * inv;
  if (threadIdx.x == 0 && p.lse) p.lse[(long long)bh * p.T + t] = m + logf(sum);
}

/* grid (ceil(D/16), ceil(T/16), B*Nq), block (16, 16): thread (x, y) owns o(t0+y, d0+x).
 * P (16 rows x 16 keys) and V (16 keys x 16 dims) tiles go through shared memory. */
extern "C" __global__ void naive_pv(at_naive_params p)
{
  __shared__ float p_tile[NAIVE_TILE][NAIVE_TILE + 1];
  __shared__ float v_tile[NAIVE_TILE][NAIVE_TILE + 1];
  const int bh = blockIdx.z, b = bh / p.Nq, h = bh % p.Nq, hk = h / (p.Nq / p.Nkv);
  const int t0 = blockIdx.y * NAIVE_TILE, d0 = blockIdx.x * NAIVE_TILE;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const float *prow = p.scores + (long long)bh * p.T * p.S;
  const naive_kv_t *v = p.v + b * p.v_sb + hk * p.v_sh;
  const float dv = naive_descale(p.descale_v);
  float acc = 0.0f;
  for (int s0 = 0; s0 < p.S; s0 += NAIVE_TILE) {
    int tp = t0 + ty, sp = s0 + tx, sv = s0 + ty, d = d0 + tx;
    p_tile[ty][tx] = (tp < p.T && sp < p.S) ? prow[(long long)tp * p.S + sp] : 0.0f;
    v_tile[ty][tx] = (sv < p.S && d < p.D) ? naive_kv_to_float(v[sv * p.v_ss + d]) * dv : 0.0f;
    __syncthreads();
    for (int i = 0; i < NAIVE_TILE; i++) acc += p_tile[ty][i] * v_tile[i][tx];
    __syncthreads();
  }
  const int t = t0 + ty, d = d0 + tx;
  if (t >= p.T || d >= p.D) return;
  p.o[b * p.o_sb + t * p.o_ss + h * p.o_sh + d] = at_out_from_float(acc);
}
