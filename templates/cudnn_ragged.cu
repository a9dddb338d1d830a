/*
 * cudnn_ragged.cu — the two small kernels around cuDNN's ragged (varlen) SDPA graph
 * (runtime/cudnn_ragged.c launches them, runtime/cudnn_sdpa.c builds the graph).
 *
 * attntune's callers describe packed tensors FlashAttention's way: int32 row offsets cu_seqlens
 * [B + 1] (include/attntune.h, "Serving layouts"). cuDNN reads a packed tensor as [B, H, maxlen, D]
 * with a ragged offset tensor (entry b: the *element* offset of sequence b's first row, cu[b] times
 * the tensor's seq stride) and takes each sequence's lengths from its padding-mask tensors
 * seq_len_q and seq_len_kv [B]. So, on the caller's stream:
 *
 *   cudnn_ragged_prepare (before the graph)   grid ceil((B + 1) / 256), block 256; thread b:
 *     first = clamp(cu[b], 0, total), end = clamp(cu[b + 1], first, total)
 *     len[b] = min(end - first, maxlen)          off[b] = first * seq_stride     (b < B)
 *     off[B] = clamp(cu[B], 0, total) * seq_stride
 *   for Q and O (cu_q, their own seq strides) and, when K/V are packed, for K and V (cu_kv); with
 *   padded K/V every seq_len_kv[b] is the planned S. The clamping is common.cuh's (at_ragged_rows),
 *   so cuDNN is handed only rows inside the tensors, whatever the offsets hold, and every
 *   implementation sees the same sequences. The host checks that total * seq_stride fits int32.
 *
 *   cudnn_ragged_finish (after the graph)      grid (ceil(T / 64), B), block 256; block (x, b)
 *     owns rows x*64 .. x*64 + 63 of sequence b (those < T_b):
 *     - rows that see no key (all T_b rows when S_b = 0; rows i < T_b - S_b under the bottom-right
 *       mask) get o = 0 and lse = -inf, attntune's contract for them; what cuDNN writes there is
 *       not relied on (its softmax of an all -inf row is not specified);
 *     - with lse, the cuDNN stats [B, H, T] (padded, natural log) are copied to attntune's ragged
 *       lse [H, total_q]: row first_b + i of head h at h * total_q + first_b + i.
 *   The keyless rows of a sequence are always a prefix 0 .. L_b - 1 of its rows, so a block
 *   whose rows start past L_b (and lse is not wanted) returns at once.
 *
 * Paged K/V with padded Q (cudnn_sdpa.c's paged graph: cuDNN's paged cache loads read the pools
 * through the caller's block table) uses the same two kernels with cu_q null: prepare writes
 * seq_len_q[b] = T and seq_len_kv[b] = clamp(seqlens_kv[b], 0, S); finish addresses O and the
 * lse of padded Q (O row b * o_sb + i * o_ss, lse [B, H, T]).
 *
 * The preamble sets AT_IN_DTYPE and AT_OUT_DTYPE to the plan's I/O dtype (f16 or bf16), so
 * at_out_t is O's element.
 */

/* Must match struct cudnn_ragged_params in runtime/cudnn_ragged.c field for field. */
struct cudnn_ragged_params {
  const int *cu_q, *cu_kv;            /* [B + 1]; cu_q null for padded Q, cu_kv null for padded K/V */
  const int *seqlens_kv;              /* [B] paged K/V's lengths, or null */
  int *q_off, *o_off, *k_off, *v_off; /* [B + 1] element offsets (k_off, v_off unused for padded K/V) */
  int *seq_q, *seq_kv;                /* [B] */
  const float *stats;                 /* cuDNN's [B, H, T] stats, or null (no lse) */
  float *lse;                         /* [H, total_q], or null */
  at_out_t *o;
  long long q_ss, o_ss, k_ss, v_ss;   /* seq strides in elements */
  long long o_sh, o_sb;               /* O's head and batch strides (o_sb: padded Q) */
  int B, T, S, H, D;
  int total_q, total_kv;
  int bottom_right;                   /* mask is causal bottom-right */
};
static_assert(sizeof(cudnn_ragged_params) == 12 * 8 + 6 * 8 + 8 * 4, "cudnn_ragged_params layout");

extern "C" __global__ void cudnn_ragged_prepare(cudnn_ragged_params p)
{
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b > p.B) return;
  int q_first = 0, kv_first = 0;
  if (b < p.B) {
    p.seq_q[b] = p.cu_q ? at_ragged_rows(p.cu_q, b, p.total_q, p.T, &q_first) : p.T;
    p.seq_kv[b] = p.seqlens_kv ? min(max(p.seqlens_kv[b], 0), p.S)
                  : p.cu_kv    ? at_ragged_rows(p.cu_kv, b, p.total_kv, p.S, &kv_first)
                               : p.S;
  }
  if (!p.cu_q) return; /* padded Q: no offsets */
  if (b == p.B) {
    q_first = min(max(p.cu_q[b], 0), p.total_q); /* the end offset, clamped as at_ragged_rows does */
    kv_first = p.cu_kv ? min(max(p.cu_kv[b], 0), p.total_kv) : 0;
  }
  p.q_off[b] = (int)(q_first * p.q_ss);
  p.o_off[b] = (int)(q_first * p.o_ss);
  if (p.cu_kv) {
    p.k_off[b] = (int)(kv_first * p.k_ss);
    p.v_off[b] = (int)(kv_first * p.v_ss);
  }
}

#define CUDNN_RAGGED_FINISH_ROWS 64

extern "C" __global__ void cudnn_ragged_finish(cudnn_ragged_params p)
{
  const int b = blockIdx.y, row0 = blockIdx.x * CUDNN_RAGGED_FINISH_ROWS;
  int first = 0;
  const int T_b = p.cu_q ? at_ragged_rows(p.cu_q, b, p.total_q, p.T, &first) : p.T;
  /* padded Q: O's rows of sequence b from b * o_sb, the lse [B, H, T] like cuDNN's stats */
  const long long o_row0 = p.cu_q ? (long long)first * p.o_ss : (long long)b * p.o_sb;
  const int S_b = p.seq_kv[b];
  const int keyless = S_b == 0 ? T_b : (p.bottom_right ? max(T_b - S_b, 0) : 0);
  const int rows = min(T_b - row0, CUDNN_RAGGED_FINISH_ROWS);
  if (rows <= 0 || (!p.lse && row0 >= keyless)) return;
  if (p.lse) {
    for (int k = threadIdx.x; k < rows * p.H; k += blockDim.x) {
      const int i = row0 + k % rows, h = k / rows;
      const float stat = p.stats[((long long)b * p.H + h) * p.T + i];
      const long long at = p.cu_q ? (long long)h * p.total_q + first + i : ((long long)b * p.H + h) * p.T + i;
      p.lse[at] = i < keyless ? AT_NEG_INF : stat;
    }
  }
  const int zero_rows = min(keyless - row0, rows);
  for (long long k = threadIdx.x; k < (long long)max(zero_rows, 0) * p.H * p.D; k += blockDim.x) {
    const int d = (int)(k % p.D), h = (int)(k / p.D % p.H), i = row0 + (int)(k / ((long long)p.D * p.H));
    p.o[o_row0 + (long long)i * p.o_ss + (long long)h * p.o_sh + d] = at_out_from_float(0.0f);
  }
}
