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
 *
 * Serving layouts (include/attntune.h, "Serving layouts"): Q/O padded or ragged, K/V padded,
 * ragged or paged. T and S are then the planned maxima and the score matrix keeps that size;
 * sequence b has its own T_b <= T query rows and S_b <= S keys (naive_seq_of), scores outside
 * them are -inf, rows past T_b are neither normalized nor written, and the masks use T_b and S_b
 * (bottom-right: j <= i + S_b - T_b). Row addresses:
 *   Q/O padded: b * sb + i * ss        ragged: (cu_q[b] + i) * ss       (+ h * sh + d)
 *   K/V padded: b * sb + j * ss        ragged: (cu_kv[b] + j) * ss
 *       paged:  page * sb + (j % page_size) * ss, page = block_table[b * max_pages + j / page_size]
 * The metadata is device data the kernels do not trust: offsets are clamped into [0, total),
 * lengths to the maxima, and keys of a page whose table entry is outside [0, num_pages) are
 * masked and never loaded, so nothing outside the tensors and the pool is read or written.
 * With padded Q and K/V (the metadata pointers NULL) every sequence has T_b = T and S_b = S and
 * the kernels compute exactly what they computed before serving layouts existed.
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
  /* Serving layouts; all 0 for padded tensors. */
  const int *cu_q, *cu_kv;        /* ragged Q, ragged K/V: [B + 1] */
  const int *block_table;         /* paged K/V: [B, max_pages] */
  const int *seqlens_kv;          /* paged K/V: [B] */
  int q_layout, kv_layout;        /* at_seq_layout: 0 padded, 1 ragged, 2 paged */
  int page_size, max_pages;
  int total_q, total_kv, num_pages;
  int unused;
};
static_assert(sizeof(at_naive_params) == 9 * 8 + 12 * 8 + 8 * 4 + 4 * 8 + 8 * 4, "naive_params layout");

#define NAIVE_SEQ_PADDED 0
#define NAIVE_SEQ_RAGGED 1
#define NAIVE_SEQ_PAGED 2

__device__ __forceinline__ float naive_descale(const float *d) { return d ? *d : 1.0f; }

__device__ __forceinline__ int naive_clamp(int x, int lo, int hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* One sequence as the kernels see it: its lengths and where its rows start. */
struct naive_seq {
  int T, S;          /* T_b query rows, S_b keys */
  int q_first;       /* ragged Q: its first packed row */
  int kv_first;      /* ragged K/V: its first packed row */
};

__device__ naive_seq naive_seq_of(const at_naive_params &p, int b)
{
  naive_seq q;
  q.q_first = q.kv_first = 0;
  q.T = p.q_layout == NAIVE_SEQ_RAGGED ? at_ragged_rows(p.cu_q, b, p.total_q, p.T, &q.q_first) : p.T;
  if (p.kv_layout == NAIVE_SEQ_RAGGED) q.S = at_ragged_rows(p.cu_kv, b, p.total_kv, p.S, &q.kv_first);
  else if (p.kv_layout == NAIVE_SEQ_PAGED) q.S = naive_clamp(p.seqlens_kv[b], 0, p.S);
  else q.S = p.S;
  return q;
}

/* Element offset of row i of sequence b in Q (sb, ss: Q's strides) or O (O's). */
__device__ __forceinline__ long long naive_q_row(const at_naive_params &p, int b, const naive_seq &q, int i,
                                                 long long sb, long long ss)
{
  return p.q_layout == NAIVE_SEQ_RAGGED ? (long long)(q.q_first + i) * ss : b * sb + i * ss;
}

/* Is key j of sequence b loadable (j < S_b and, paged, its page in the pool)? Then *row is its
 * element offset in K or V (their strides). A key whose page is not in the pool is masked. With
 * j < S_b <= S <= max_pages * page_size the table index stays inside sequence b's row. */
__device__ __forceinline__ bool naive_kv_row(const at_naive_params &p, int b, const naive_seq &q, int j,
                                             long long sb, long long ss, long long *row)
{
  if (j >= q.S) return false;
  if (p.kv_layout == NAIVE_SEQ_RAGGED) {
    *row = (long long)(q.kv_first + j) * ss;
    return true;
  }
  if (p.kv_layout != NAIVE_SEQ_PAGED) {
    *row = b * sb + j * ss;
    return true;
  }
  const int page = p.block_table[(long long)b * p.max_pages + j / p.page_size];
  if (page < 0 || page >= p.num_pages) return false;
  *row = page * sb + (long long)(j % p.page_size) * ss;
  return true;
}

/* Where row i of head h of sequence b keeps its log-sum-exp. */
__device__ __forceinline__ long long naive_lse_index(const at_naive_params &p, int b, int h, const naive_seq &q,
                                                     int i)
{
  if (p.q_layout == NAIVE_SEQ_RAGGED) return (long long)h * p.total_q + q.q_first + i;
  return ((long long)b * p.Nq + h) * p.T + i;
}

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
  const naive_seq seq = naive_seq_of(p, b);
  const at_in_t *q = p.q + h * p.q_sh;
  const naive_kv_t *k = p.k + hk * p.k_sh;
  const int tq = t0 + ty, sk = s0 + ty; /* the Q row and the key this thread loads */
  const bool q_in = tq < seq.T;
  const long long q_row = q_in ? naive_q_row(p, b, seq, tq, p.q_sb, p.q_ss) : 0;
  long long k_row = 0;
  const bool k_in = naive_kv_row(p, b, seq, sk, p.k_sb, p.k_ss, &k_row);
  const float dq = naive_descale(p.descale_q), dk = naive_descale(p.descale_k);
  float acc = 0.0f;
  for (int d0 = 0; d0 < p.D; d0 += NAIVE_TILE) {
    int d = d0 + tx;
    q_tile[ty][tx] = (q_in && d < p.D) ? at_in_to_float(q[q_row + d]) * dq : 0.0f;
    k_tile[ty][tx] = (k_in && d < p.D) ? naive_kv_to_float(k[k_row + d]) * dk : 0.0f;
    __syncthreads();
    for (int i = 0; i < NAIVE_TILE; i++) acc += q_tile[ty][i] * k_tile[tx][i];
    __syncthreads();
  }
  const int t = t0 + ty, s = s0 + tx;
  if (t >= p.T || s >= p.S) return;
  long long unused_row;
  const bool in_seq = t < seq.T && naive_kv_row(p, b, seq, s, p.k_sb, p.k_ss, &unused_row);
  const long long offset = p.mask == AT_MASK_CAUSAL_BR ? (long long)seq.S - seq.T : 0;
  float value = in_seq && at_visible(p.mask, t, s, offset) ? acc * p.scale : AT_NEG_INF;
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

/* grid (T, B*Nq), block 256: one block normalizes one score row in place and writes its lse
 * (rows past the sequence's T_b are left alone: they are not part of the output). */
extern "C" __global__ void naive_softmax(at_naive_params p)
{
  __shared__ float partial[NAIVE_ROW_THREADS / 32];
  const int t = blockIdx.x, bh = blockIdx.y, b = bh / p.Nq, h = bh % p.Nq;
  const naive_seq seq = naive_seq_of(p, b);
  if (t >= seq.T) return;
  float *row = p.scores + ((long long)bh * p.T + t) * p.S;
  const long long lse_at = naive_lse_index(p, b, h, seq, t);
  float m = AT_NEG_INF;
  for (int s = threadIdx.x; s < p.S; s += NAIVE_ROW_THREADS) m = fmaxf(m, row[s]);
  m = naive_block_reduce(m, true, partial);
  if (m == AT_NEG_INF) { /* nothing visible: p = 0, lse = -inf */
    for (int s = threadIdx.x; s < p.S; s += NAIVE_ROW_THREADS) row[s] = 0.0f;
    if (threadIdx.x == 0 && p.lse) p.lse[lse_at] = AT_NEG_INF;
    return;
  }
  float sum = 0.0f;
  for (int s = threadIdx.x; s < p.S; s += NAIVE_ROW_THREADS) sum += expf(row[s] - m);
  sum = naive_block_reduce(sum, false, partial);
  const float inv = 1.0f / sum;
  for (int s = threadIdx.x; s < p.S; s += NAIVE_ROW_THREADS) row[s] = expf(row[s] - m) * inv;
  if (threadIdx.x == 0 && p.lse) p.lse[lse_at] = m + logf(sum);
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
  const naive_seq seq = naive_seq_of(p, b);
  const float *prow = p.scores + (long long)bh * p.T * p.S;
  const naive_kv_t *v = p.v + hk * p.v_sh;
  const float dv = naive_descale(p.descale_v);
  float acc = 0.0f;
  for (int s0 = 0; s0 < p.S; s0 += NAIVE_TILE) {
    int tp = t0 + ty, sp = s0 + tx, sv = s0 + ty, d = d0 + tx;
    long long v_row = 0;
    const bool v_in = naive_kv_row(p, b, seq, sv, p.v_sb, p.v_ss, &v_row);
    p_tile[ty][tx] = (tp < seq.T && sp < seq.S) ? prow[(long long)tp * p.S + sp] : 0.0f;
    v_tile[ty][tx] = (v_in && d < p.D) ? naive_kv_to_float(v[v_row + d]) * dv : 0.0f;
    __syncthreads();
    for (int i = 0; i < NAIVE_TILE; i++) acc += p_tile[ty][i] * v_tile[i][tx];
    __syncthreads();
  }
  const int t = t0 + ty, d = d0 + tx;
  if (t >= seq.T || d >= p.D) return;
  p.o[naive_q_row(p, b, seq, t, p.o_sb, p.o_ss) + h * p.o_sh + d] = at_out_from_float(acc);
}
