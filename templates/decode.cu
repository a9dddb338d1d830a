/*
 * decode.cu — split-KV decode attention (mma.sync m16n8k16, fp32 accumulate, 16-bit Q; K/V 16-bit
 * or FP8, an FP8 KV cache): the G query heads of one KV head and BLOCK_M query tokens share one
 * pass over a slice of K/V.
 *
 * What it computes (JAX, BSHD: jax.nn.dot_product_attention(q, k, v, scale=scale,
 * is_causal=mask == 1); mask 2 is the same call with mask=jnp.tril(jnp.ones((T, S), bool), S - T)):
 *   q: (B, T, Nq, D)   k, v: (B, S, Nkv, D)   o: (B, T, Nq, D)   lse: (B, Nq, T) fp32, natural log
 *   o[b,i,h] = sum_j softmax_j(scale * q[b,i,h] . k[b,j,h/G]) v[b,j,h/G],  G = Nq / Nkv,
 *   over the visible keys j (at_visible): all (DEC_MASK 0), j <= i (1, top-left),
 *   j <= i + S - T (2, bottom-right). A row with no visible key writes o = 0 and lse = -inf.
 *   Scores enter the exp2 domain as s * scale_log2 (scale_log2 = scale * log2 e), as in fa2.cu.
 *
 * The generator's preamble defines, before common.cuh:
 *   AT_IN_DTYPE, AT_OUT_DTYPE   f16 -> f16 or bf16 -> bf16 (Q and O)
 *   DEC_KV_DTYPE                K and V: AT_IN_DTYPE, or AT_DTYPE_E4M3 / AT_DTYPE_E5M2 (FP8 K/V,
 *                               "KV8" below; default AT_IN_DTYPE)
 *   DEC_KERNEL, DEC_COMBINE     entry point names (split kernel, combine kernel)
 *   DEC_HEAD_DIM                D, a multiple of 16 in 32..256
 *   DEC_MASK                    AT_MASK_NONE / AT_MASK_CAUSAL_TL / AT_MASK_CAUSAL_BR
 *   DEC_GQA                     G = Nq / Nkv, 1..64 (q head h reads kv head h / G)
 *   DEC_LSE                     1: also write the log-sum-exp
 *   DEC_BLOCK_M                 query tokens per CTA: 1, 2, 4, 8 or 16
 *   DEC_BLOCK_N                 keys per K/V tile in shared memory: 32, 64 or 128 (and 256 for
 *                               KV8: a tile of bytes is half as large)
 *   DEC_WARPS, DEC_STAGES       warps per CTA (4 or 8), K/V tiles in flight (2..6)
 *   DEC_SMEM_LIMIT              dynamic shared memory a block may have on the target
 *   DEC_PAGE_SIZE               0: K/V contiguous (the layout above); 1, 16, 32, 64, 128 or 256:
 *                               K/V paged in pages of that many tokens ("Paged K/V" below)
 *   optional: DEC_Q_IN_REGS (0/1; default: chosen below from the register estimate),
 *             DEC_COMBINE_THREADS (default 128), DEC_COMBINE_SG (the combine's split groups
 *             per row; default: one row a CTA)
 *
 * Packed rows. A CTA works on ROWS = G * BLOCK_M query rows: packed row r = t_local * G + g is
 * token t = tb * BLOCK_M + t_local and q head h = hk * G + g. ROWS is padded to MT tiles of 16
 * rows: MT_RAW = ceil(ROWS / 16); MT = MT_RAW rounded up to 1, 2, 4 or 8 when MT_RAW <= WARPS, else
 * to a multiple of WARPS (so every warp layout divides evenly; padding rows are zero Q rows whose
 * results are dropped). Rows r >= ROWS or with t >= T are zero-filled in Q and never written.
 *
 * Grid (n_splits, Nkv * ceil(T / BLOCK_M), B), block 32 * WARPS, dynamic smem DEC_SMEM_BYTES.
 * CTA (split, y, b): hk = y % Nkv, tb = y / Nkv (Nkv = gridDim.y / ceil(T / BLOCK_M)), keys
 * [split * keys_per_split, min(S, (split + 1) * keys_per_split)) (keys_per_split: a multiple of
 * BLOCK_N, set by the host; an empty range writes lse_part = -inf and o_part = 0). Under a causal
 * mask the range is cut at the last key the block's last token sees, and tiles wholly past it are
 * never loaded; the tiles that end at or before the first token's last key (and before S) skip
 * the per-element mask.
 *
 * Warps. WARPS_M = min(MT, WARPS) warps along M, warp wm = warp % WARPS_M owns the MTW = MT /
 * WARPS_M tiles wm*MTW .. wm*MTW+MTW-1; WARPS_N = WARPS / WARPS_M warps along the keys, warp
 * wn = warp / WARPS_M takes keys [wn*NW, (wn+1)*NW) of every tile, NW = BLOCK_N / WARPS_N (must
 * be a multiple of 16: static_assert; e.g. one M tile with 8 warps needs BLOCK_N = 128). Each warp
 * runs its own online softmax (m, l, O) over its keys. In an m16n8
 * accumulator lane = 4*g + t holds rows g and g+8, columns 2t and 2t+1 of each 8-column tile.
 * At the end (WARPS_N > 1) warps wn > 0 put (m, l, O) in shared memory, the wn = 0 warp of each
 * M tile merges them (m = max m_w, O = sum 2^(m_w - m) O_w, l likewise) and writes.
 *
 * Shared memory (dynamic), rows padded to whole 128-byte lines, 16-byte chunk c of row r stored at
 * chunk c ^ (r % 8) (the 128-byte swizzle of fa2.cu: conflict-free ldmatrix and cp.async; KV8's
 * Q rows at chunk c ^ (2r % 8), conflict-free for its 8-byte fragment loads, below):
 *   Q      [MT*16][QROW]                      QROW  = roundup(2 * D, 128)
 *   K      STAGES x [BLOCK_N][KVROW]          KVROW = roundup(sizeof(dec_kv_t) * D, 128), bytes
 *                                             of the K/V dtype (16 FP8 or 8 16-bit elements per chunk)
 *   V      STAGES x [BLOCK_N][KVROW]
 *   after the K/V loop the K/V area is reused for the merge (WARPS_N > 1 only):
 *   ml     fp32 [WARPS_N][MT*16][2]           (m in log2 units, l)
 *   obuf   fp32 [WARPS_N-1][MT*16][D+8]       (O of warps wn >= 1; +8 floats: conflict-free float2)
 *   ids    int32 [2*STAGES-1][IDS]              paged K/V only: page ids (below), 128-byte rounded
 *   DEC_SMEM_BYTES = MT*16*QROW + max(2*STAGES*BLOCK_N*KVROW,
 *                                     WARPS_N > 1 ? WARPS_N*MT*16*8 + (WARPS_N-1)*MT*16*(D+8)*4 : 0)
 *                    + (paged: roundup(4 * IDS * (2*STAGES-1), 128))
 *   (macros DEC_*_OF below, plain integer arithmetic the C generator can copy).
 *
 * Pipeline: cp.async groups in commit order: Q, then one group (K_t and V_t) per tile. STAGES-1
 * tiles are issued before the loop; iteration t waits for tile t (wait_group STAGES-2), one
 * __syncthreads (tile t visible; every warp is done with tile t-1), issues tile t+STAGES-1 into
 * the stage of tile t-1, then computes S = Q K_t^T (ldmatrix.x4), masks, online softmax (exp2,
 * one FFMA per score), P packed to 16 bits, O += P V_t (ldmatrix.x4.trans). Keys past the range
 * are zero-filled (cp.async src-size 0) and masked to -inf. Q fragments: loaded once into
 * registers (DEC_Q_IN_REGS 1), or re-read from shared memory by ldmatrix each tile where the
 * registers would not fit (D=256, or two tiles per warp).
 *
 * KV8 (FP8 K/V, 16-bit Q, O and MMAs). The K/V tiles arrive as bytes by the same 16-byte cp.async
 * (half the bytes per key of a 16-bit tile) and are widened in registers, after ldmatrix and
 * before each MMA; ldmatrix moves 16-bit units, so a unit is two FP8 elements:
 *   - K: ldmatrix.x4 of 8 keys x one 16-byte chunk per matrix (32 keys of one 16-element d block)
 *     gives lane (g, t) K[key g][16c + 4t .. 4t+3]; bytes 0,1 become b0 and bytes 2,3 b1 of
 *     the m16n8k16 B fragment. So the MMA's k index runs over d permuted in each 16-block: k = 2t,
 *     2t+1, 2t+8, 2t+9 are d = 4t .. 4t+3. Q takes the same permutation: its A fragment is read
 *     with 8-byte loads, a0|a2 = Q[row g][16c + 4t .. 4t+3] (a1|a3 the same for row g+8), which
 *     the Q swizzle c ^ (2r % 8) keeps free of bank conflicts.
 *   - V: ldmatrix.x4.trans of 8 keys x one chunk per matrix gives lane (g, t) the bytes
 *     V[2t][16c+2g], V[2t][16c+2g+1], V[2t+1][16c+2g], V[2t+1][16c+2g+1]: bytes 0,2 are keys 2t,
 *     2t+1 of d = 16c+2g (one B fragment half), bytes 1,3 the same of d = 16c+2g+1. So O's n8
 *     tiles come in pairs per chunk c: tile 2c holds d = 16c + 2n, tile 2c+1 d = 16c + 2n + 1,
 *     and a lane's accumulators of one row are d = 16c + 4t .. 4t+3, written as one 8-byte (16-bit
 *     O) or 16-byte (fp32 partials) store.
 *   - widening two bytes to a 16-bit pair (dec_kv_pair): a byte permute that sign-extends each
 *     byte to 16 bits, a shift and a mask that put its exponent and mantissa in the low bits of
 *     the 16-bit exponent and the top of its mantissa (the sign at bit 15), and one fma by
 *     2^(bias difference): e4m3 -> bf16 shift 4 and 2^120, e5m2 -> bf16 shift 5 and 2^112,
 *     e4m3 -> f16 shift 7 and 2^8; e5m2 is f16's top byte (the permute alone). Exact for every
 *     finite code, FP8 subnormals included (they are 16-bit subnormals until the fma, which
 *     keeps subnormals); NaN codes of e4m3 read as +-480 and e5m2's inf/NaN as finite values
 *     with bf16 Q (a KV cache holds neither).
 *   - KV8 in f16 (DEC_F16_MMA: f16 Q, or bf16 Q on sm_89+): the MMAs run in f16. e4m3 pairs widen
 *     by the hardware's cvt.rn.f16x2.e4m3x2 (bytes 0,1 and 2,3 as they lie; 0,2 and 1,3 after a
 *     permute into the low half), e5m2 pairs by the permute alone, where a bf16 pair takes four
 *     instructions. bf16 Q is rewritten once per CTA, in shared memory, as f16 values of
 *     q * 2^e (dec_q_exponent: the largest |q| of a warp's rows lands in [2^14, 2^15); exact
 *     within 2^29 of it), scale_log2 takes 2^-e, and P is packed to f16 (three more mantissa
 *     bits than bf16). e4m3's NaN codes read as NaN here.
 *   descale_k multiplies scale_log2 and descale_v the final normalization, as for 16-bit K/V.
 *
 * Outputs. n_splits == 1: o = O / l * descale_v (16-bit), lse (if DEC_LSE) = (m + log2 l) * ln 2.
 * n_splits > 1, p = (b*Nq + h)*T + t:
 *   o_part[(p*n_splits + split)*D + d] = fp32 NORMALIZED partial O of the split (O_i / l_i, times
 *     descale_v; 0 when the split saw no visible key)
 *   lse_part[p*n_splits + split] = the split's log-sum-exp, NATURAL log (-inf when empty)
 * Combine (DEC_COMBINE, grid (ceil(Nq*T / CR), B), CTAs of DEC_COMBINE_THREADS taking CR (h, t) rows
 *   each (CR from DEC_COMBINE_SG, at the kernel):
 *   m = max_i lse_i, w_i = exp(lse_i - m), o = sum_i w_i O_i / sum_i w_i, lse = m + log sum_i w_i;
 *   all -inf: o = 0, lse = -inf. o_part rows are read as float4 (D is a multiple of 16).
 *   On sm_90 the host launches it as a programmatic dependent of the split kernel: the split
 *   kernel lets it launch at once (griddepcontrol.launch_dependents), and it waits for the
 *   split grid's results (griddepcontrol.wait), so its launch overlaps the split kernel.
 * Last-CTA merge (DEC_LAST_CTA 1, .lc; no combine kernel): after writing its partials a CTA
 *   counts its split done in split_counters[b * gridDim.y + blockIdx.y] (int32 in the scratch,
 *   zeroed when the scratch is allocated); the CTA that counts n_splits merges the group's
 *   ROWS rows as the combine does (one warp per row, 8 splits' loads in flight) and puts the
 *   counter back to 0. split_counters is unused (may be 0) otherwise.
 * Cluster merge (DEC_CLUSTER = n_splits, 2..8, .cl; sm_90; no scratch, no combine kernel): the
 *   n_splits CTAs of a row group are one thread block cluster; each writes its rows' partials
 *   (O / l * descale_v, and the lse) into its own K/V area, PART below, and after a cluster
 *   barrier every CTA merges a share of the (row, 16-byte chunk) items, reading that chunk and
 *   the lse of every split through distributed shared memory (mapa + ld.shared::cluster); a
 *   second cluster barrier keeps each CTA's shared memory alive until all reads are done.
 *   PART: fp32 [ROWS][D + 4] rows, then fp32 lse [ROWS] (DEC_PART_BYTES, within the K/V area).
 *
 * Paged K/V (DEC_PAGE_SIZE = PS > 0; the vLLM layout of include/attntune.h "Serving layouts"):
 *   k, v: pools [num_pages, PS, Nkv, D], pages k_sb / v_sb elements apart (the layout's batch
 *   stride), rows k_ss / v_ss apart within a page; block_table int32 [B, max_pages_per_seq];
 *   seqlens_kv int32 [B]. Key j of sequence b is row j % PS of page
 *   block_table[b * max_pages_per_seq + j / PS]. The sequence has S_b = clamp(seqlens_kv[b],
 *   0, S) keys (S: the planned kv_len), which replaces S above: the key range, the splits (a
 *   split starting at or past S_b is empty and writes -inf), and the bottom-right offset S_b - T.
 *   keys_per_split is the host's, from the planned S. The kernel gains four arguments after
 *   split_counters: block_table, seqlens_kv, max_pages_per_seq, num_pages.
 *   Page ids. Each K/V tile needs IDS = BLOCK_N / PS ids (1 when PS >= BLOCK_N: a tile never
 *   crosses a page, both being powers of two and tiles starting at multiples of BLOCK_N). They
 *   are staged in shared memory, in a ring of 2*STAGES-1 slots of IDS int32 after the K/V (or
 *   merge) area (DEC_IDS_BYTES_OF), by 4-byte cp.async in the pipeline's own groups: the group
 *   of tile n also carries the ids of tile n + STAGES - 1, so when iteration t issues tile
 *   t + STAGES - 1 its ids landed with tile t (the wait that is there anyway), and the table's
 *   latency hides behind STAGES - 1 tiles of compute; only the first STAGES - 1 tiles' ids are
 *   waited for, once per CTA, in their own group ahead of Q (together with the seqlens_kv load).
 *   A tile's ids stay in their slot until the tile is computed (2*STAGES-1 slots: the slot of
 *   tile t + 2*STAGES - 2 is written at iteration t, after every warp is past tile t - 1).
 *   Cost: one table entry per tile per page (one 4-byte copy by one thread when PS >= BLOCK_N),
 *   4 * IDS * (2*STAGES-1) bytes of shared memory (3 x 4 bytes at PS >= BLOCK_N, STAGES 2; 2.5 KB
 *   at PS = 1, BLOCK_N 128, STAGES 3), and per 16-byte copy one shared-memory read of its page id
 *   (all of a thread's reads first, then its copies back to back) and a 64-bit multiply-add for
 *   the page's address: the bytes read from HBM are those of contiguous decode, rows of D
 *   elements at the same strides, whatever the page size.
 *   A table entry outside [0, num_pages) is never dereferenced: the copies of its keys are
 *   zero-filled (src-size 0) and the thread notes it; the loop's barrier becomes
 *   __syncthreads_or of those notes, and from then on every tile takes the masked path, which
 *   also masks (-inf) the keys of such pages (read back from the ring). Entries of the
 *   sequence's row past its last page may be loaded but their keys are never used (one outside
 *   the pool still turns the masked path on for the last tiles, step 10); entries past the row
 *   are not loaded.
 *
 * descale_k / descale_v: NULL means 1 (16-bit K/V pass NULL): descale_k folds into scale_log2,
 * descale_v into the final normalization.
 *
 * Budgets (static_asserts): DEC_SMEM_BYTES <= DEC_SMEM_LIMIT, and the register estimate (below,
 * calibrated on sm_90a) <= 255, so that what compiles does not spill. With 8 warps and D=256 a
 * 128-row CTA (e.g. G=8, BLOCK_M=16) fits with BLOCK_N=32 (Q read from shared memory each tile:
 * 255 registers, 0 spills; ptxas still fits it under a 232-register cap); BLOCK_N=64 there, and
 * two 16-row tiles per warp at D=128 (256 rows with 8 warps), are refused.
 *
 * Steps, measured on the H200 against cuDNN 9.19 in the same run (docs/perf.md "## decode"; Nq 32,
 * Nkv 8, D 128, bf16; the fastest listed variant of each shape):
 *   1. this structure, warp-per-row combine, event timing: B1 S4k 14.0 us, B1 S16k 25.6 us,
 *      B8 S16k 128.6 us (4.18 TB/s), B64 S16k 940 us (4.57), B8 T16 S8k causal-br 75.5 us.
 *   2. every implementation timed by graph replay (no kernel change): 10.2, 22.3, 124.4, 940,
 *      70.8 us (cuDNN 10.8, 22.3, 123.0, 937, 202.9).
 *   3. combine with one CTA per row and the splits' loads in flight (ncu: the warp-per-row
 *      combine took 6.4 us of 27 at B1 S16k); the host's split count rounds down to one wave:
 *      9.3, 20.6 (3.26 TB/s), 119.2 (4.50), 919 (4.68), 71.6 us (3.75 TB/s, 2.8x cuDNN).
 *   4. the combine launched as a programmatic dependent (predicted: its launch latency, about
 *      1 us, off the B1 shapes). Measured in one run against ATTNTUNE_PDL=0: B1 S4k 9.3 -> 8.6,
 *      B1 S16k 20.9 -> 20.2 us (3.32 TB/s), T16 72.9 -> 72.2; FP8 K/V B1 8.9 -> 7.8, 14.8 -> 13.6.
 *   5. the last-CTA merge (.lc), predicted to save the combine's launch and tail at B1: 9.2 and
 *      20.5 us, slower than step 4 (the merging CTA's fence, atomic and two L2 round trips run
 *      after the grid's last split); kept in the space for small grids, never the default.
 *   6. the cluster merge (.cl): a row group's splits are one cluster and merge through
 *      distributed shared memory (no partials in HBM, no atomics, no second kernel). Predicted:
 *      the ~1 us tail of step 4 down to a cluster barrier and one DSMEM round trip. Measured:
 *      B1 S4k 8.5 -> 8.2, B1 S16k 20.2 -> 19.5 us (3.44 TB/s), T2 S16k 20.4 -> 19.5; with FP8 K/V
 *      slower (S16k 13.6 -> 18.7: 8 splits, where FP8 wants 16), so there the combine stays best.
 *   7. paged K/V (DEC_PAGE_SIZE, .pg<N>): tiles gathered through the block table, page ids staged
 *      in shared memory one pipeline depth ahead (above). Predicted: the same HBM bytes as
 *      contiguous decode and one table read per page per tile, so within a few percent of step 6
 *      at page size 16 and above (issue #18 asks for 10%); what remains is the once-per-CTA wait
 *      for the first tiles' ids and the per-copy address arithmetic, largest at page size 1.
 *      Measured (one bench, B8 T1 S16k GQA 4, page size 16, pages shuffled): 128.0 us = 4.20
 *      TB/s against 121.0 us = 4.44 TB/s contiguous, 94.6%. Other page sizes, B1, T16 and FP8
 *      K/V not measured yet.
 *   8. the split kernel launched as a programmatic dependent of the stream's previous kernel
 *      (it waits before its first read; the combine, and the next call, may launch once that
 *      wait returns). Predicted: the launch of a B1 call, about 1 us, under the previous
 *      kernel's tail. Measured (one run against ATTNTUNE_PDL=0, 16 splits + combine): B1 S256
 *      5.3 -> 4.3, S1k 6.5 -> 5.1, S4k 9.5 -> 8.2, S16k 21.1 -> 19.8 us; B8 S16k 125.1 ->
 *      123.6. Clusters lost: with the early trigger the next call's clusters took the GPCs'
 *      room (S16k 19.4 -> 26.1 us), without it they still ran 0.1-0.3 us slower than placed on
 *      an idle GPU, so .cl kernels are launched plainly: B1 S4k 8.0 us, S16k 19.0 us (3.53
 *      TB/s), now the default where 8 splits fill half a wave. 16-CTA clusters (non-portable)
 *      measured slower: the H200 holds 7 of them at one CTA per SM (ncu), so the eighth row
 *      group ran after the others (S4k 13.5 us); not listed.
 *   9. KV8 in f16 (above) and, where rows 8..15 of the one M tile are padding (ROWS <= 8: T=1
 *      up to G=8), the softmax of one accumulator row per lane instead of two (DEC_HALVES).
 *      ncu before (B1 S16k e4m3, 16 splits, bn128 w4 s3): one warp per scheduler, 2.44 cycles
 *      per issued instruction, 52% of peak DRAM throughput: issue-bound. Predicted: about 40%
 *      fewer instructions per key (K widening 4 -> 1 per pair, V 4 -> 2, half the exponentials).
 *      Measured (one run, the best listed variant before and after): e4m3 K/V B1 S4k 7.0 ->
 *      6.7 us, B1 S16k 12.8 -> 12.2, B8 S16k 65.6 -> 64.7, B8 T16 S8k causal-br 94.9 -> 69.5 us
 *      (bf16 K/V there: 73.1); bf16 K/V unchanged (B1 S4k 8.0 -> 7.9, S16k 19.5 -> 19.5).
 *   10. paged copies addressed as page 0's column and row + a compile-time number of row steps
 *      + page * page bytes (one wide multiply-add per copy; a page outside the pool addresses
 *      page 0 with src-size 0, so no select; one pool test per page, not per copy). cuobjdump
 *      before: the 32 copies of a bn128 w4 tile took 763 instructions of the K/V loop
 *      (contiguous: 139), 64-bit products recomputed per copy with constants reloaded under
 *      predicates; the paged kernels fell behind most where a CTA streams most keys (B1 S16k,
 *      8 splits: 33.2 us against 23.5 contiguous), so the 8-split cluster that is contiguous's
 *      best at B1 was out of reach. After: 200. Measured (page 16, the same keys, one run each;
 *      first form = the address without the per-page test, 247 instructions): B1 S16k bn128 w4
 *      s3 sp8.cl 32.6 -> 25.2 (first form) -> 24.0 us, the best paged variant now, 92.3% of
 *      contiguous (before: the 16-split kernel at 24.3 us, 89.4-91.3%); w8 sp8.cl 33.0 -> 29.3
 *      -> 25.0; B8 S16k best 130.5 -> 126.8 -> 129.2 us, 95.0% -> 95.9% -> 95.8% of contiguous.
 *   11. .wg (DEC_WG, below): the packed rows on wgmma where a CTA packs more than 32 rows, and P V of
 *      tile t-1 under tile t's softmax. Predicted: at 128 rows (GQA 8, T16) mma.sync's ldmatrix
 *      re-reads gone, near the HBM limit. Measured (B8 T16 S64k GQA 8): 423.9 -> 356.7 us, S4k
 *      37.3 -> 33.4; 64 rows even. ncu: the warpgroups' lockstep behind the tile barrier is what
 *      remains (docs/perf.md "decode .wg").
 *   12. .wg warp-specialized: a TMA producer warp and full/empty mbarriers per stage instead of
 *      the cp.async ring and its CTA barrier a tile (ncu of step 11: barrier 1.40 and wait 0.98 of
 *      4.99 cycles per issued instruction, DRAM 62%). Predicted: the warpgroups drift apart and
 *      copies leave the computing warps, toward the HBM limit (~255 us). Measured (same run, old
 *      binary against new, best .wg): B8 T16 S64k GQA 8 355.7 -> 281.4 us (3.82 TB/s), S4k 33.4
 *      -> 29.5, B1 T16 S16k 21.1 -> 18.8; registers 184-191 -> 154 (no copy addressing).
 *   13. .wg with FP8 K/V (D a multiple of 128): a widening warpgroup in place of the producer warp
 *      (below). Measured (one run, B8 S64k causal-br, e4m3, best before -> best .wg): T16 GQA 8
 *      470.4 -> 271.0 us (bf16 280.0), T8 GQA 8 246.5 -> 195.4, T16 GQA 4 494.2 -> 384.8.
 *   14. ping-pong of the two consumer warpgroups at 128 rows (DEC_WG_PINGPONG, 16-bit K/V only):
 *      B8 T16 S64k GQA 8 277.5 -> 271.1 us; with FP8 K/V 1% slower, so not there.
 *   15. .wg FP8 at 64 rows: two widening warpgroups taking the tiles in turn (DEC_WG_WIDENERS):
 *      B8 S64k e4m3 GQA 8 T8 193.7 -> 189.8 us, GQA 4 T16 381.6 -> 375.1 (docs/perf.md: the ncu
 *      before it, and why the gain is small).
 *   16. .wg at 64 rows: P V of tile t-1 issued after tile t's S is in and masked.
 *      Source-level ncu of the FP8 64-row kernel: the widening warps waited 23% of their samples
 *      on the ring's empty barrier (the consumers were the bound), and the consumers' SASS had the
 *      wait for P V (DEPBAR gsb0, 0x0) ahead of the softmax, right after the mask's branch: since
 *      step 11, P V never ran under the softmax. Measured (B8 S64k causal-br, same run, old binary
 *      against new, two rounds): e4m3 GQA 8 T8 191.7 -> 176.9 us, GQA 4 T16 378.1 -> 347.8; bf16
 *      at 64 rows even (HBM-bound); at 128 rows 1% slower then (before 17; see 16b).
 *   17. .wg with two consumer warpgroups: O's rescale skipped where alpha is 1 for every row of
 *      the warp (DEC_WG_SKIP_RESCALE; exact). Measured (B8 S64k causal-br T16 GQA 8, same run,
 *      two rounds): e4m3 269.9 -> 260.2 us, bf16 273.8 -> 268.7; at 64 rows 3-4% slower with
 *      FP8 K/V, so not there (mma.sync's kernel lost 6-8% with it: "Tried after 9" below).
 *   16b. step 16 at 128 rows too, on top of 17: bf16 GQA 8 T16 S64k 267.3 -> 260.7 us (s4),
 *      268.0 -> 263.5 (s5); e4m3 even (260.3 -> 260.5). One P V order for every .wg kernel.
 *   18. .wgi (DEC_WG_KSPLIT 2): at 64 rows two consumer warpgroups take the tiles in turn, each
 *      writing its own partial; even stage counts only; with FP8 K/V two widening warpgroups and
 *      setmaxnreg. Measured (B8 causal-br e4m3, best of each, same run): GQA 8 T8 S64k 177.0 ->
 *      171.6 us, GQA 4 T16 357.2 -> 348.2; with one widener 17% slower. ncu: shared memory, which
 *      both warpgroups and the wideners share, carries ~900 of the ~1430 cycles a tile takes.
 *   19. FP8 K/V at 64 rows: Q K^T with Q's fragments in registers (DEC_WG_QREG; setmaxnreg):
 *      B8 S64k causal-br e4m3, same run: .wgi GQA 8 T8 170.6 -> 164.7 us, GQA 4 T16 333.4 ->
 *      322.7; .wg under 1%. .wgi is the FP8 default at 64 rows.
 *   19b. the same at 128 rows (setmaxnreg 208/88: what the consumers take must equal what the
 *      widener gives back; 216/80 hung): B8 S64k GQA 8 T16 e4m3 262.5 -> 251.7 us.
 *   20. .wgi: the speculative row max (dec_softmax_spec; fa3's v19 turned around: the reference
 *      is the row's max, scores may pass it by 2^8 before the exact step runs). ncu of step 19
 *      had the consumers issuing every ~7 cycles over ~379 instructions a tile; the common path
 *      from S to P V is now 199 (no max before the exponentials, no O rescale). Measured (B8
 *      causal-br e4m3, same run against step 19b, two rounds): GQA 8 T8 S64k sp4 166.7 -> 164.5
 *      us, sp8 172.6 -> 166.9, GQA 4 T16 S64k sp2 326.6 -> 324.0, GQA 8 T8 S16k 48.7 -> 47.5:
 *      1-3%, so the consumers' instruction count is not what bounds .wgi.
 *   21. .wgi with bf16 Q at D 128 (DEC_WG_K8): Q K^T on the FP8 tensor cores against K as TMA
 *      staged it, Q as two E4M3 parts in registers (q 2^e = hi + lo, exact for bf16), so K is
 *      neither widened nor stored in f16 (per 64-key tile 24 of the ~96 KB through shared memory,
 *      and half the widening); a warpgroup's first thread refills its staging slot once its four
 *      warps are done with the tile; 8 staging slots and a ring of 4 f16 V fit where 4 stages of
 *      both rings did. Measured (B8 causal-br e4m3, same run against step 20, two rounds): at 4
 *      stages 1-5% slower (GQA 8 T8 S64k 164.0 -> 166.5 us: the refill waits for the tile's end),
 *      at 6 159.9, at 8 158.8 (-3.2%); GQA 4 T16 S64k 323 -> 314.7 (6), S16k 47.3 -> 46.0 (8).
 *      O's error unchanged (1.68e-3). Refilled as soon as the warps' Q K^T were done, under the
 *      softmax: 8-12% slower (177.2 us at 4 stages).
 *   22. .wgi3 (DEC_WG_KSPLIT 3, K8 only): three consumer warpgroups take the tiles in turn, one
 *      widening warpgroup (only V is widened), setmaxnreg 152/56; Q's E4M3 parts go to shared
 *      memory (DEC_WG_Q8_SMEM: in registers the consumers spilled under 152 and 160); 6
 *      staging slots and an f16 V ring of 6 (9 and a ring of 4, measured below, could deadlock:
 *      22c); the widener's loads of a tile first. Measured (B8 causal-br e4m3, same run against step 21's .wgi at 8 slots, two
 *      rounds): with 9 slots and a ring of 3, even (GQA 8 T8 S64k 155.6 -> 154.9 us; ncu: the
 *      consumers waited 24% of their samples for the widened V, the widener 46% on its shared
 *      loads); a ring of 4, even (156.7); the loads first: 151.4-151.7 (-3.7%), GQA 4 T16 S64k
 *      310.9 -> 295.3 (-5.0%); S16k 46.3 -> 47.1 (+1.7%). With .wgi's two wideners the loads
 *      first ran 2% slower, so there they stay in place. The default from S 32k.
 *   22b. .wgi3: each widening warp arrives on the full barrier itself (4 arrivals), no named
 *      barrier of the 128 (tests/decode_wgi_protocol.py models these barriers): GQA 8 T8 S64k 145.7 -> 143.7 us (9 slots), 148.0 -> 143.2 (6); GQA 4
 *      T16 282.0 -> 274.8; S16k 46.8 -> 46.55 (same run, two rounds; this GPU ran ~5% faster
 *      than step 22's). Tried, not kept: each consumer warpgroup widening its own V under its
 *      Q K^T, no widener (384 threads, 168 registers, two named barriers a tile): 12% slower
 *      (155.0 -> 174.3 us).
 *   22c. .wgi3 with 9 slots and a ring of 4 removed: tests/decode_wgi_protocol.py, with warps of
 *      unequal speed, deadlocked it (a consumer's first thread late to its refill wait sees two
 *      phases of a ring stage another warpgroup uses next, and waits for a third). 6 slots, a
 *      ring of 6, ran as fast after 22b (143.2 against 143.7 us) and the model passes it.
 *   23. the combine kernel takes several rows a CTA (DEC_COMBINE_SG split groups a row, the fewest
 *      whose batches of 4 loads cover the variant's partials; DEC_CR rows a CTA). ncu before, B8
 *      T16 S4k GQA 8 (4 partials): split kernel 23.8 us, combine 7.2 us over 4096 CTAs. Measured
 *      (same run, before -> after, two rounds): that shape 29.4 -> 26.7 us (2.28 -> 2.51 TB/s),
 *      with FP8 K/V 28.6 -> 25.8; T8 S4k 24.0 -> 23.0; B1 and S64k unchanged.
 *   24. K8: a staging slot refilled by the fourth warp of its warpgroup to count itself (an
 *      atom.shared.add) under the tile's P V, in place of the first thread's wait on the ring
 *      stage's empty barrier after it (no barrier wait left in the refill). ncu before: consumers
 *      waiting 18.6% on the widened V, the widener 18.1% on the TMA copy. Measured (B8 causal-br
 *      e4m3, same run, two rounds): .wgi3 even (GQA 8 T8 S64k 151.5 -> 151.0 us), .wgi s8 157.3
 *      (-1.6%); the count right after Q K^T was 5-7% slower (the warpgroup's P V waited for the
 *      warp issuing the copy).
 *   25. .wgi3 with 9 staging slots beside an f16 V ring of 3 (the same 214 KB), taken by key, not
 *      listed: measured (B8 causal-br e4m3, same run, two rounds) GQA 8 T8 S16k 47.6 -> 46.8 us,
 *      but S64k 146.6 -> 149.9 and GQA 4 T16 S64k 281.8 -> 291.5.
 *   26. K8: Q K^T waits only for the staged K; the wait for the widened V moves down to P V, so
 *      the widening of a tile runs under its Q K^T and softmax (ncu after 24: the consumers'
 *      largest stall, 18.5%, was that wait). Measured (as 25): .wgi3 6 slots GQA 8 T8 S64k
 *      146.6 -> 145.9 us, GQA 4 T16 S64k 281.8 -> 280.8, S16k 47.6 either way; 9 slots 149.8 ->
 *      147.0. Small, in both rounds.
 *   27. Each split kernel's wait for the previous grid moved from its first line to right before
 *      its first global access (contiguous K/V), so that its index arithmetic runs under the
 *      previous kernel's tail; Q's copy addresses come before it too. SASS (B1 T1 bf16 sp17): the
 *      wait from instruction 5 to 170, the first load 179 -> 185; .wg 128 rows: 3 -> 118. The
 *      descales are read by coherent loads there: ptxas had hoisted their read-only (.nc) load
 *      above the wait (a race under a programmatic launch; scripts/sass_wait.awk). Measured
 *      (bf16 unless named, three rounds alternating, medians): B1 S4k GQA 4 8.0 -> 7.8 us, B1
 *      S16k GQA 8 12.0 -> 11.6 (e4m3 K/V 9.2 -> 9.0), GQA 4 19.2 -> 19.0, B8 S16k GQA 8 63.4 ->
 *      63.1, B8 T16 S4k GQA 8 (.wg) 26.7 -> 26.4.
 *   28. (generator) B=1's default merges in the combine kernel again, not .cl: after step 27
 *      every plain split kernel beat .cl at B1 GQA 4 S 1k-8k by 0.4-1.4 us and tied at 16k
 *      (H100, two rounds). H200, the default against cuDNN 9.19 in one run: B1 S4k 7.9 us
 *      (.cl: 8.3-8.5 in the session before; cuDNN 11.5), B1 S16k 19.2 us = 3.50 TB/s (.cl 3.42).
 *   29. (generator) One token with 16-bit K/V defaults to half the one-wave split count: in the
 *      H200 tune of configs/decode.yaml the half won 13 of the 16 bf16 T=1 shapes (B1 S4k with
 *      this tile: sp8 7.7 against sp16 8.0 us, two rounds; H100: 9.3 against 9.6). Not yet
 *      measured as the default against the one before in one bench (docs/perf.md).
 *   30. 16-bit .wg at 128 rows: K and V of a stage on mbarriers of their own (DEC_WG_VFULL): Q K^T
 *      of tile t waits for K alone, P V of tile t-1 (issued in iteration t) for that V. SASS, B8 T16 GQA 8 bn64 s4: 2168 -> 2208
 *      instructions, 148 registers (150), the exponentials under P V unchanged (34 of 42).
 *      Counted (B8 T16 S4k GQA 8, H200): the first Q K^T of a CTA waits for 16 KB, not 32 (~0.5
 *      us at a CTA's 32 GB/s share), and the last tile's Q K^T and softmax run while its V lands
 *      (~0.5 us). Predicted: 0-4% at S4k (26.6 us), nothing at S64k (HBM-bound). The first build
 *      hung (call 112): the P V of nothing waited for parity 1 of a fresh V barrier, which passes
 *      only until tile 0's V lands; it now waits on tile 0's K barrier (phase 0). Measured (H100,
 *      call 113, B8 T16 causal-br, main's binary against this one alternately, 2-6 rounds): GQA 8
 *      (128 rows) S1k +3.6%, S2k +2.2%, S4k +0.7%, S64k -0.3%; GQA 4 (64 rows, w4) S2k -0.3%,
 *      S4k -0.4 to -0.8%: kept at 128 rows only. test_fa2_gpu passes.
 *   32. .wg's start (ncu source counters, H100, B8 T16 S4k GQA 8, 30.9 us: 9% of the warps' samples
 *      before the loop, 7% after it, about 2.8 and 2.1 us, the same absolute counts as at S64k;
 *      the loop's tile 1.51 us against S64k's 1.23): with 16-bit K/V the CTA barrier after the
 *      mbarriers' set-up moves above Q's copies, so the producer's first K/V copies leave while
 *      the consumers issue Q's; and Q's copies take one column of rows from one base in unsigned
 *      arithmetic (ptxas had ~60 instructions a chunk: 2208 -> 1928 instructions at 128 rows, the
 *      loop's SASS unchanged). With FP8 K/V the widening warps started that early cost 2.5-4.6%
 *      (H100, call 118), so there the barrier stays below Q's copies. Predicted: 2-4% at S4k,
 *      more at S1k, nothing at S64k. Measured (H100, calls 118-119, main's binary against this
 *      one alternately, B8 causal-br): bf16 GQA 8 T16 S1k +1.8%, S2k +1.6%, S4k +1.7% (three
 *      rounds), S64k level; GQA 4 (64 rows) S4k +0.4%; e4m3 GQA 8 T16 S4k (128 rows) +1.8%,
 *      .wgi3 T8 S16k +0.5%, T16 GQA 4 S64k level. test_fa2_gpu and test_decode_fp8kv_gpu pass.
 *   33. .wg's Q by TMA: the producer's (or the widening warpgroup's) first thread loads Q's packed
 *      rows ahead of its first K/V tile, through a map of Q as (D, Nq, T, B) whose boxes of G heads
 *      by BLOCK_M tokens land in the packed order (r = t_local * G + g; tokens past T read 0); the
 *      consumers zero the padding rows and wait on Q's mbarrier. So Q no longer queues behind the
 *      producer's copies (step 32), and the consumers issue no copies (1928 -> 1736 instructions at
 *      128 rows, 144 registers). The widening warps now start before any Q work too, which step 32
 *      measured 2.5-4.6% slower with cp.async Q. Measured (H100, call 121, step 32's binary against
 *      this one alternately): bf16 GQA 8 T16 S4k +0.7% (three rounds), S1k +2.6%, S64k level, GQA 4
 *      T16 S4k -0.4%; e4m3 GQA 8 T16 S4k +0.3% (three rounds), .wgi3 T8 S16k +0.7%.
 *      test_fa2_gpu and test_decode_fp8kv_gpu pass.
 *   34. .wg's 16-bit K/V copies under an L2 evict_first policy (dec_wg_tma_tile). A probe
 *      streaming the same boxes with no arithmetic drew 2.98 TB/s at B8 T16 S4k GQA 8 (22.5 us)
 *      where the kernel took 33.5; stamped, its copies took ~4 us to land against the probe's ~3.
 *      The call's other traffic: 8.4 MB of fp32 partials, written dirty into L2 and read back by
 *      the combine, then evicted and written to HBM under the next call's K/V stream. Streamed K/V
 *      going first keeps them (and Q, O) resident. Measured (H100, calls 134-137, main against this
 *      alternately, two rounds): T16 GQA 8 S4k +9.3%, S16k +1.7%, S1k +0.4%, S256 -1.2%; GQA 4 S4k
 *      +3.3%; call 139 S4k +8.8%. With FP8 K/V (call 138) .wgi T8 GQA 8 S16k +3.7% but .wgi3 T16
 *      GQA 4 S64k -1.2% (dec_wg_tma_tile says why), so 16-bit only. Dropping the partials' lines
 *      after the combine read them (discard.global.L2) instead: S4k +7.8%, S16k +3.6%, but S1k -1.4
 *      to -2.5% and S256 -4.8% (the discards' own cost), and with both no better; ld.global.lu for
 *      the partials: level. test_fa2_gpu, test_decode_fp8kv_gpu, test_serving_gpu and test_api_gpu
 *      pass.
 *   35. The partials stored under an L2 evict_last policy (dec_st_global_f2/f4, st.global with
 *      .L2::cache_hint), so that no kernel kind's K/V stream pushes them to HBM before the combine
 *      reads them; step 34 did it from the K/V side for .wg only, and the cp.async form for
 *      mma.sync (34b) met a ptxas fault. Measured (H100, call 143, main against this alternately,
 *      two rounds, the defaults, B8 D128, TB/s of K/V): mma.sync T8 GQA 8 S4k +5.3%, T4 +3.7%, T2
 *      +3.2%, T16 GQA 4 S8k +1.9%, T1 S4k +0.4%, T1 S16k and B1 S4k level; .wg T16 GQA 8 S4k +3.4%,
 *      S16k +2.4%, S256 and S1k level; e4m3 .wgi T8 S16k +6.6%, .wg T16 S4k +0.4%. Step 34's hint
 *      taken out again on top of this: S4k -3.1%, so both stay. test_fa2_gpu,
 *      test_decode_fp8kv_gpu, test_serving_gpu and test_api_gpu pass (calls 144-145).
 *   36. (generator/decode.c) The 16-bit default at 64 packed rows is .wg at D 128, where it was
 *      mma.sync's since the two ran even (steps 32-35 sped up .wg). Measured (H100, call 148, main's
 *      default against .wg bn64 w4 s4, two rounds, B8 causal-br, TB/s): GQA 4 T16 S1k 1.81 ->
 *      2.01, S4k 2.58 -> 2.69, S8k 2.84 -> 2.90, S16k 2.97 -> 3.00, S64k 3.04 -> 3.08, B1 S16k
 *      2.24 -> 2.41; GQA 8 T8 S1k 1.38 -> 1.44, S4k 2.28 -> 2.43, S16k 2.80 -> 2.86, S64k 2.98 ->
 *      3.05, B1 S16k 1.91 -> 1.97, B32 S8k 2.96 -> 2.99; T5 S3000 2.10 -> 2.28; MQA T2 S4k 1.38 ->
 *      1.44; but f16 D64 GQA 8 T8 S4k 1.79 -> 1.77, so D 64 keeps mma.sync.
 *   37. An FP8 KV cache's K/V maps promote 128 bytes into L2, not 256 (tmap_kv_promotion in the
 *      launch description): at D 128 a head's key row is one 128-byte box, and the 256-byte
 *      promotion also fetched the next head's row (not measured directly: whether the next
 *      head's CTA, at its own pace, found it still in L2; the time says the extra half cost
 *      more than it saved). Measured (H100, calls 151-152, main against this alternately, two
 *      rounds, B8 causal-br, TB/s of K/V): .wgi3 GQA 4 T16 S64k 2.64 -> 2.97 (+12.9%, +15.1% in
 *      call 151), GQA 8 T8 S64k 2.69 -> 2.85 (+6.3%), S128k 2.59 -> 2.94 (+13.5%); .wgi S16k
 *      +0.8-1.8%; the 128-row .wg at S4k level. FP8 over bf16 tokens/s at 64 rows then
 *      1.82-1.87x at S16k-64k (1.70x at GQA 8 T8 S16k). fa3's FP8 maps keep 256 (e4m3 D128
 *      prefill read 0.984, within its clocks' spread).
 *      test_decode_fp8kv_gpu passes.
 *   Tried after 39, not kept (H100, docs/perf.md "Fifty-first session"; B8 T16 Nq 32 Nkv 4
 *      e4m3 causal-br, two invocations each): at 128 rows, .p8, P V on the FP8 tensor cores (P
 *      rounded to E4M3 after a 2^8 scale, V staged as V^T; branch decode-p8): level with f16 P
 *      (S64k 0.2394/0.2386 against 0.2378/0.2383 ms; S16k 0.0674/0.0676 against 0.0672/0.0671)
 *      at 15x its error (o rel_l2 2.5e-2 against 1.7e-3). .wg K8, Q K^T on the FP8 tensor cores
 *      against the staged K with Q in two E4M3 parts, only V widened (branch decode-k8w): 5-9%
 *      slower (s4 S64k 0.2589/0.2602, S16k 0.0718/0.0724; its .p8 2-3% faster than it), though it
 *      halves the widener's shared-memory bytes, which were not the bound (the consumer
 *      warpgroups' serial chain is, by count; two FP8 wgmmas per K tile where one f16 wgmma was
 *      is the likely cost, not measured). K8 with the consumers in
 *      ping-pong (branch decode-k8w-pp): 1-2% over K8, 4-8% behind K widened. Both verified by
 *      test_decode_fp8kv_gpu.
 *   Tried after 38, not kept (H100, docs/perf.md "Forty-fifth session"): where .lc lets the
 *      next grid launch (after its partial stores, or at exit, in place of after its wait) and one
 *      atom.acq_rel.gpu by thread 0 a CTA in place of every thread's __threadfence (branch
 *      decode-lc-allow): the fence took 0.2-0.4 us off .lc, the later allows made it slower (B8
 *      S16k GQA 8 sp2 by 5 us), and no form reached the combine kernel (B1 S4k 9.4 against 9.2-9.3
 *      us at best). The epilogue's loops bounded by DEC_HALVES where the rows fit half an M tile
 *      (branch decode-halves-epilogue, 24-64 SASS instructions fewer): even within 0.3 us.
 *   Tried after 38, not kept: a GQA group's query heads over H CTAs that read the same K/V
 *      (branch decode-hsplit), so that B8 S16k GQA 8 runs 64 CTAs with no combine. HBM read each
 *      byte once (ncu: 268.5 MB, L2 served the sibling), but siblings ask for the same lines at
 *      once, so the unique bytes in flight halve and the rate with them (H200: 104.1 against
 *      63.8 us; B1 S4k H 2 sp4 10.0 against sp8's 7.7). docs/perf.md, "Forty-fourth session".
 *   Tried after 38, not kept: the combine waiting on per-group counters (each split CTA counts
 *      itself done after its partials; one lane per combine row polls; branch decode-flag-combine)
 *      in place of the wait for the split grid, whose end came 1.1-1.5 us after the last stores.
 *      Predicted 0.5-0.7 us a call. Measured (H100, two rounds): with the next grid allowed at the
 *      combine's start, its CTAs took the SMs that 64 split CTAs leave idle, and calls ran up to
 *      23% slower (B8 S16k GQA 8 sp2 98.9 against 89.9 us); allowed after the poll, still B1 S4k
 *      sp8 9.7 against 9.3 us, B8 sp2 90.0 against 89.9. docs/perf.md, "Forty-third session".
 *   Tried after 38, not kept: the column merge by every warp (branch decode-par-merge; warp w
 *      merges and stores columns w*D/WN.. where warp 0 merged all D). Predicted 0.3-0.4 us a
 *      one-token call; measured (H100, two rounds) B1 S4k 9.2 against 9.3 us, B8 S16k even.
 *   Tried after 38, not kept: a row group's splits claiming their K/V tiles from one counter
 *      (branch decode-dyn; thread 0 claims two tiles ahead, the combine resets the counters). A
 *      %globaltimer timeline had shown equal-work CTAs ending 11 us apart at B8 S16k GQA 8 sp2
 *      (H100); with claims they ended within 1.4 us, but the call ran 92.7-93.1 us against
 *      89.8-90.0 (B1 S4k 11.0 against 9.3): the early CTAs had not idled HBM, the others took
 *      their share. docs/perf.md, "Forty-second session".
 *   Tried after 37, not kept: this kernel's 16-bit K/V tiles by TMA from thread 0 onto a full
 *      mbarrier a stage, in TMA's 128-byte column blocks (.tma; branch decode-t1-tma). Hot loop
 *      463 -> 352 instructions; verified by test_fa2_gpu. Measured (H100, two rounds, T=1 D128):
 *      even within 0.3% (B8 S16k GQA 8 sp2 89.9-90.0 against 90.0-90.2 us, B1 S4k 9.3-9.4
 *      against 9.3-9.5), as a bare cp.async ring streams as fast as a TMA ring of the same bytes
 *      and grid (scripts/hbm_read_probe.cu t1). docs/perf.md, "Forty-first session".
 *   Tried after 38, not kept: .wgi's CTAs of a row group claiming K/V tiles past their
 *      first STAGES from one counter (branch decode-wgi-dyn; the widener claims one position
 *      ahead, the refilling consumer warp stages the tile or ends its parity; the combine resets
 *      the counters). H100, B8 T8 S16k GQA 8 e4m3: s6 sp4 53.2 -> 52.6 us, but sp2 72.0 -> 78.9,
 *      GQA 4 T16 S16k sp2 95.9 -> 97.6; ncu: the CTAs ended closer (SMs active 82% -> 87% of the
 *      cycles) while HBM's rate moved 76.7% -> 78.4%. docs/perf.md, "Forty-fifth session".
 *   Tried after 30, not kept: .wgi's speculative check on P itself (P <= 2^8) with P's max three
 *      at a time (VIMNMX3, as fa3 v36), where a chain of FMNMX over the scores took one each
 *      (branch decode-spec-max3; FMNMX 70 -> 38 at T16 GQA 4 .wgi3). Predicted 0-1%; measured
 *      (H100, call 116, three rounds) e4m3 T16 GQA 4 S64k 1.001, T8 GQA 8 S64k 1.000.
 *   Tried after 29, not kept: .wg's splits merged in a cluster (.cl.wg: partials into the CTA's
 *      K/V ring after a named barrier of the consumers, merged through distributed shared memory
 *      as the kernel above does; branch decode-wg-cluster). Predicted: the T16 128-row call's
 *      fp32 partials (12.5% of the K/V bytes at S4k) and the combine's place after the grid gone.
 *      Measured (H200, B8 T16 S4k causal-br GQA 8, two rounds): 16 tokens a CTA, 2 splits: 36.8
 *      us against 36.1 with the combine kernel (the default, 4 splits: 26.6); 8 tokens a CTA, 2
 *      splits (128 CTAs, 64 clusters): 32.6-33.7 against 27.5-28.4 with the combine; GQA 4 T16
 *      S4k 38.5 against 38.9 (noise). docs/perf.md, "Thirty-second session".
 *   Tried after 29, not kept: .wg's partials stored in the output dtype, 16 bits, half the bytes
 *      (branch decode-part-bf16). H100, B8 T16 GQA 8 causal-br, main against it, same run: S4k
 *      1.95-1.96 TB/s either way (three rounds), S1k 1.12 -> 1.00-1.02 (two rounds); O's error
 *      2.34e-3 -> 2.88e-3. ncu (caches as they are) at S4k: split kernel 33-36 us, combine 4.4.
 *   Tried after 18, not kept: the widening's loads of a tile pair all issued before its stores:
 *      9% slower (GQA 8 T8 S64k .wg 176.0 -> 192.2 us).
 *   Tried after 17, not kept: at 64 rows, tile t+1's Q K^T issued right after tile t's P is
 *      packed, O's rescale under it: even (e4m3 GQA 8 T8 S64k 177.3 -> 178.4 us; docs/perf.md).
 *   Tried after 15, not kept: the widening threads loading their FP8 chunks from global memory
 *      into registers (two tiles ahead) in place of TMA into a staging ring: 43% slower (B8 S64k
 *      e4m3 GQA 8 T8 191.7 -> 274.9 us; docs/perf.md).
 *   Tried after 10, not kept: L2 prefetch of the split's table entries (paged) or first K/V
 *      tiles (contiguous) before griddepcontrol.wait: no paged gain, contiguous B1 S4k 7.9 ->
 *      8.1 us and S16k 19.2 -> 19.4 in the same run.
 *   Tried after 9, not kept: KV8 tiles widened once per CTA into f16 rows in shared memory (a
 *   second barrier per tile; 8-30% slower at T8-16, e.g. B8 T16 S8k 69.1 -> 85.0 us), and the
 *   exponentials two at a time by ex2.approx.f16x2 (ptxas splits it into two MUFU ops: 1-6%
 *   slower); and O's rescale skipped where alpha is 1 for the whole warp (a vote and a branch
 *   per row half: 6-8% slower at T8-16, e.g. B8 T16 S8k causal-br 71.7 -> 77.7 us). docs/perf.md
 *   has all three.
 */

#if AT_IN_DTYPE != AT_DTYPE_BF16 && AT_IN_DTYPE != AT_DTYPE_F16
#error "decode takes f16 or bf16 inputs"
#endif
#if AT_OUT_DTYPE != AT_IN_DTYPE
#error "decode writes O in the input dtype"
#endif

/* The K/V element: the 16-bit input type, or a byte (KV8: widened before the MMAs). */
#ifndef DEC_KV_DTYPE
#define DEC_KV_DTYPE AT_IN_DTYPE
#endif
#if DEC_KV_DTYPE == AT_IN_DTYPE
typedef at_in_t dec_kv_t;
#define DEC_KV_ESIZE 2
#define DEC_KV8 0
#elif DEC_KV_DTYPE == AT_DTYPE_E4M3 || DEC_KV_DTYPE == AT_DTYPE_E5M2
typedef unsigned char dec_kv_t;
#define DEC_KV_ESIZE 1
#define DEC_KV8 1
#else
#error "decode reads K and V in the input dtype or as FP8 (e4m3, e5m2)"
#endif

/* KV8 on sm_89+: the MMAs run in f16 whatever Q's type ("KV8 in f16" in the header): the
 * hardware widens e4m3 pairs to f16 pairs in one cvt (e5m2 is f16's top byte), where a bf16
 * pair costs a permute, a shift, a mask and an fma. bf16 Q is then converted to f16 once per
 * CTA (DEC_Q_TO_F16), and P is packed to f16. */
#if DEC_KV8 && (AT_IN_DTYPE == AT_DTYPE_F16 || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890))
#define DEC_F16_MMA 1
#else
#define DEC_F16_MMA 0
#endif
#define DEC_Q_TO_F16 (DEC_F16_MMA && AT_IN_DTYPE == AT_DTYPE_BF16)
#if AT_IN_DTYPE == AT_DTYPE_F16 || DEC_F16_MMA
#define DEC_MMA "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#else
#define DEC_MMA "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#endif

#ifndef DEC_COMBINE_THREADS
#define DEC_COMBINE_THREADS 128
#endif
#ifndef DEC_LAST_CTA
#define DEC_LAST_CTA 0
#endif
#ifndef DEC_CLUSTER
#define DEC_CLUSTER 1
#endif
#if DEC_CLUSTER > 1
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "a cluster merge (DEC_CLUSTER > 1) needs sm_90"
#endif
#define DEC_CLUSTER_DIMS __cluster_dims__(DEC_CLUSTER, 1, 1)
#else
#define DEC_CLUSTER_DIMS
#endif
#ifndef DEC_WG
#define DEC_WG 0
#endif
#ifndef DEC_WG_K8 /* .wgi with bf16 Q: Q K^T on the FP8 tensor cores (below, step 21) */
#define DEC_WG_K8 0
#endif
#ifndef DEC_WG_KSPLIT /* .wgi: 2 or 3 consumer warpgroups on the same 64 rows (below, steps 18, 22) */
#define DEC_WG_KSPLIT 1
#endif
/* Every warp stays to the end of the split kernel (an in-kernel merge's barriers). */
#define DEC_IN_KERNEL_MERGE (DEC_LAST_CTA || DEC_CLUSTER > 1)

/* ---- sizes as integer macros (mirrored by the host generator) -------------------------------- */
#define DEC_RUP(x, m) (((x) + (m) - 1) / (m) * (m))
#define DEC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DEC_MT_RAW_OF(G, BM) (((G) * (BM) + 15) / 16)
#define DEC_MT_OF(G, BM, W)                                                                        \
  (DEC_MT_RAW_OF(G, BM) > (W)   ? DEC_RUP(DEC_MT_RAW_OF(G, BM), W)                                \
   : DEC_MT_RAW_OF(G, BM) > 4 ? 8                                                                 \
   : DEC_MT_RAW_OF(G, BM) > 2 ? 4                                                                 \
                              : DEC_MT_RAW_OF(G, BM))
#define DEC_WARPS_M_OF(G, BM, W) (DEC_MT_OF(G, BM, W) < (W) ? DEC_MT_OF(G, BM, W) : (W))
#define DEC_WARPS_N_OF(G, BM, W) ((W) / DEC_WARPS_M_OF(G, BM, W))
#define DEC_QROW_BYTES_OF(D) DEC_RUP(2 * (D), 128)
#define DEC_KVROW_BYTES_OF(D, KVE) DEC_RUP((KVE) * (D), 128)
#define DEC_Q_BYTES_OF(D, G, BM, W) (DEC_MT_OF(G, BM, W) * 16 * DEC_QROW_BYTES_OF(D))
#define DEC_STAGE_BYTES_OF(D, KVE, BN, ST) (2 * (ST) * (BN) * DEC_KVROW_BYTES_OF(D, KVE))
#define DEC_MERGE_BYTES_OF(D, G, BM, W)                                                            \
  (DEC_WARPS_N_OF(G, BM, W) > 1                                                                    \
       ? DEC_WARPS_N_OF(G, BM, W) * DEC_MT_OF(G, BM, W) * 16 * 8 +                                 \
             (DEC_WARPS_N_OF(G, BM, W) - 1) * DEC_MT_OF(G, BM, W) * 16 * ((D) + 8) * 4             \
       : 0)
#define DEC_SMEM_BYTES_OF(D, KVE, G, BM, BN, W, ST)                                                \
  (DEC_Q_BYTES_OF(D, G, BM, W) + DEC_MAX(DEC_STAGE_BYTES_OF(D, KVE, BN, ST), DEC_MERGE_BYTES_OF(D, G, BM, W)))
/* Paged K/V: the ring of page ids after the K/V (or merge) area (header, "Paged K/V"). */
#ifndef DEC_PAGE_SIZE
#define DEC_PAGE_SIZE 0
#endif
#define DEC_IDS_PER_TILE_OF(BN, PS) ((PS) == 0 ? 0 : (PS) >= (BN) ? 1 : (BN) / (PS))
#define DEC_ID_SLOTS_OF(ST) (2 * (ST) - 1)
#define DEC_IDS_BYTES_OF(BN, ST, PS) DEC_RUP(DEC_ID_SLOTS_OF(ST) * DEC_IDS_PER_TILE_OF(BN, PS) * 4, 128)
#define DEC_SMEM_BYTES                                                                             \
  (DEC_SMEM_BYTES_OF(DEC_HEAD_DIM, DEC_KV_ESIZE, DEC_GQA, DEC_BLOCK_M, DEC_BLOCK_N, DEC_WARPS, DEC_STAGES) + \
   DEC_IDS_BYTES_OF(DEC_BLOCK_N, DEC_STAGES, DEC_PAGE_SIZE))

static constexpr int DEC_D = DEC_HEAD_DIM;
static constexpr int DEC_G = DEC_GQA;
static constexpr int DEC_BM = DEC_BLOCK_M;
static constexpr int DEC_BN = DEC_BLOCK_N;
static constexpr int DEC_W = DEC_WARPS;
static constexpr int DEC_THREADS = 32 * DEC_W;
static constexpr int DEC_ROWS = DEC_G * DEC_BM;                  /* real packed rows */
static constexpr int DEC_MT = DEC_MT_OF(DEC_G, DEC_BM, DEC_W);   /* 16-row tiles, padded */
static constexpr int DEC_WM = DEC_WARPS_M_OF(DEC_G, DEC_BM, DEC_W);
static constexpr int DEC_WN = DEC_WARPS_N_OF(DEC_G, DEC_BM, DEC_W);
static constexpr int DEC_MTW = DEC_MT / DEC_WM;                  /* 16-row tiles per warp */
static constexpr int DEC_NW = DEC_BN / DEC_WN;                   /* keys per warp per tile */
static constexpr int DEC_NT = DEC_NW / 8;                        /* n8 tiles of S per warp */
static constexpr int DEC_PK = DEC_NW / 16;                       /* k16 steps of P V per warp */
/* Accumulator rows a lane softmaxes: g and g + 8, or g alone where rows 8..15 of the one M tile
 * are padding (ROWS <= 8: T=1 up to G=8), which halves the softmax of those shapes. */
static constexpr int DEC_HALVES = DEC_MT == 1 && DEC_ROWS <= 8 ? 1 : 2;
static constexpr int DEC_OT = DEC_D / 8;                         /* n8 tiles of O */
static constexpr int DEC_KS = DEC_D / 16;                        /* k16 steps of Q K^T */
static constexpr int DEC_CPR = DEC_D / 8;                        /* 16-byte chunks per Q row */
static constexpr int DEC_KV_CPR = DEC_D * DEC_KV_ESIZE / 16;      /* 16-byte chunks per K/V row */
static constexpr int DEC_KV_EPC = 16 / DEC_KV_ESIZE;              /* K/V elements per chunk */
static constexpr bool DEC_K8 = DEC_KV8;
static constexpr int DEC_QROW = DEC_QROW_BYTES_OF(DEC_D);
static constexpr int DEC_KVROW = DEC_KVROW_BYTES_OF(DEC_D, DEC_KV_ESIZE);
static constexpr int DEC_Q_BYTES = DEC_Q_BYTES_OF(DEC_D, DEC_G, DEC_BM, DEC_W);
static constexpr int DEC_KV_BYTES = DEC_BN * DEC_KVROW;          /* one K or one V tile */
static constexpr int DEC_ML_BYTES = DEC_WN * DEC_MT * 16 * 8;    /* merge: (m, l) per warp column */
static constexpr int DEC_OSTRIDE = DEC_D + 8;                    /* merge: floats per O row */
static constexpr bool DEC_CAUSAL = DEC_MASK != AT_MASK_NONE;
static constexpr int DEC_PS = DEC_PAGE_SIZE;                     /* tokens per page; 0: contiguous */
#if DEC_PAGE_SIZE > 0
static constexpr int DEC_IDS = DEC_IDS_PER_TILE_OF(DEC_BN, DEC_PS); /* page ids per K/V tile */
static constexpr int DEC_ID_SLOTS = DEC_ID_SLOTS_OF(DEC_STAGES);    /* tiles' ids in the ring */
#endif
/* the ring, after the K/V area or the column merge's buffers, whichever is larger */
#define DEC_IDS_OFFSET \
  DEC_SMEM_BYTES_OF(DEC_HEAD_DIM, DEC_KV_ESIZE, DEC_GQA, DEC_BLOCK_M, DEC_BLOCK_N, DEC_WARPS, DEC_STAGES)

/* Registers per thread: O (MTW*D/2) and S (MTW*NW/2) fp32, Q fragments (MTW*D/4) when kept in
 * registers, 8 more with a cross-warp merge (WARPS_N > 1), plus DEC_REG_BASE for addresses,
 * softmax state and loads in flight. Calibrated on sm_90a ptxas (CUDA 13.0) at the spill boundary:
 *   fit (0 spills): d256 128 rows w8 bn32, Q in smem (estimate 255; needs ~232: compiled with
 *   __maxnreg__ 232 no spill, 200 spills); d128 128 rows w8 bn64 Q in regs (239; needs ~229);
 *   d64 256 rows w8 bn64 (239); d128 128 rows bn128 (239);
 *   spill: d256 w4 bn128 one M tile (263), d256 128 rows bn64 (271), d256 128 rows bn32 with Q in
 *   registers (319), d128 256 rows w8 bn32 (271).
 * Q stays in registers when the estimate with its fragments still fits. The generator mirrors:
 *   est = MTW*(D/2 + NW/2) + (Q_IN_REGS ? MTW*D/4 : 0) + (WARPS_N > 1 ? 8 : 0) + 111 <= 255
 * (+ DEC_REG_PAGED with paged K/V). */
static constexpr int DEC_REG_ACC = DEC_MTW * (DEC_D / 2 + DEC_NW / 2) + (DEC_WN > 1 ? 8 : 0);
static constexpr int DEC_REG_QFRAG = DEC_MTW * DEC_D / 4;
#ifndef DEC_KV8_REG_BASE
#define DEC_KV8_REG_BASE 111 /* KV8: the same terms; the widening's temporaries (calibrated below) */
#endif
/* Paged K/V past 2 stages: the ring's slot arithmetic and the table pointer stay live across the
 * loop (sm_90a: d256, 128 rows, w8 bn32, Q in shared memory, page size 16: 2 stages fit in 255
 * registers with 0 spills, 3 and 4 stages spill 12-16 bytes). */
static constexpr int DEC_REG_PAGED = DEC_PAGE_SIZE > 0 && DEC_STAGES > 2 ? DEC_STAGES - 2 : 0;
static constexpr int DEC_REG_BASE = (DEC_KV8 ? DEC_KV8_REG_BASE : 111) + DEC_REG_PAGED;
#ifndef DEC_Q_IN_REGS
#define DEC_Q_IN_REGS (DEC_REG_ACC + DEC_REG_QFRAG + DEC_REG_BASE <= 255)
#endif
static constexpr bool DEC_QR = DEC_Q_IN_REGS;
static constexpr int DEC_REG_ESTIMATE = DEC_REG_ACC + (DEC_QR ? DEC_REG_QFRAG : 0) + DEC_REG_BASE;

static_assert(DEC_D % 16 == 0 && DEC_D >= 32 && DEC_D <= 256, "head dim: a multiple of 16 in 32..256");
static_assert(DEC_G >= 1 && DEC_G <= 64, "GQA group: 1..64");
static_assert(DEC_BM == 1 || DEC_BM == 2 || DEC_BM == 4 || DEC_BM == 8 || DEC_BM == 16,
              "BLOCK_M: 1, 2, 4, 8 or 16 tokens");
static_assert(DEC_BN == 32 || DEC_BN == 64 || DEC_BN == 128 || (DEC_KV8 && DEC_BN == 256),
              "BLOCK_N: 32, 64 or 128 (256 with FP8 K/V)");
static_assert(DEC_D % 16 == 0 && DEC_KV_CPR * DEC_KV_EPC == DEC_D, "K/V rows are whole 16-byte chunks");
static_assert(DEC_W == 4 || DEC_W == 8, "4 or 8 warps");
static_assert(DEC_STAGES >= 2 && DEC_STAGES <= (DEC_WG_K8 ? (DEC_WG_KSPLIT == 3 ? 9 : 8) : 6),
              "2..6 K/V stages (.wgi K8: up to 8 staging slots, .wgi3 9)");
static_assert(DEC_WM * DEC_WN == DEC_W && DEC_MT % DEC_WM == 0, "warp layout");
static_assert(DEC_NW % 16 == 0, "BLOCK_N / WARPS_N (keys per warp per tile) must be a multiple of 16");
static_assert(DEC_PS == 0 || DEC_PS == 1 || DEC_PS == 16 || DEC_PS == 32 || DEC_PS == 64 || DEC_PS == 128 ||
                  DEC_PS == 256,
              "page size: 1, 16, 32, 64, 128 or 256 tokens (0: contiguous K/V)");
#ifndef DEC_NO_BUDGET_ASSERTS /* calibration builds only */
#if !DEC_WG
static_assert(DEC_SMEM_BYTES <= DEC_SMEM_LIMIT, "shared memory over the target's limit");
static_assert(DEC_REG_ESTIMATE <= 255, "accumulators do not fit the register budget");
#endif
#endif

/* ---- PTX wrappers ----------------------------------------------------------------------------- */

__device__ __forceinline__ void dec_ldmatrix_x2(unsigned r[2], unsigned addr)
{
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

__device__ __forceinline__ void dec_ldmatrix_x2_trans(unsigned r[2], unsigned addr)
{
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

/* 8 bytes of shared memory as two 32-bit words (KV8's Q fragments). */
__device__ __forceinline__ void dec_ld_shared_u2(unsigned addr, unsigned &x, unsigned &y)
{
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(x), "=r"(y) : "r"(addr) : "memory");
}

/* d += a * b: a = 4 regs (16 x 16, row-major), b = 2 regs (16 x 8, col-major). */
__device__ __forceinline__ void dec_mma(float d[4], const unsigned a[4], unsigned b0, unsigned b1)
{
  asm volatile(DEC_MMA "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void dec_st_shared_f2(unsigned addr, float x, float y)
{
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

__device__ __forceinline__ void dec_ld_shared_f2(unsigned addr, float &x, float &y)
{
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(x), "=f"(y) : "r"(addr) : "memory");
}

/* The split kernels' partials (their only global stores of fp32 pairs and quads) under an L2
 * evict_last policy (step 35): the combine reads them back from L2, and the K/V stream (8.4 MB of
 * partials against 67 MB of K/V at B8 T16 GQA 8 S4k) must not evict them to HBM first. A store
 * hint serves every kernel kind; the same end through mma.sync's cp.async copies (step 34b) met a
 * ptxas fault that drops the policy of some LDGSTS. .wg's evict_first K/V (step 34) still adds 3%
 * on top at T16 S4k. */
__device__ __forceinline__ void dec_st_global_f2(float *p, float x, float y)
{
  asm volatile("st.global.L2::cache_hint.v2.f32 [%0], {%1, %2}, %3;\n" ::"l"(p), "f"(x), "f"(y), "l"(at_l2_evict_last())
               : "memory");
}

__device__ __forceinline__ void dec_st_global_f4(float *p, float x, float y, float z, float w)
{
  asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p), "f"(x), "f"(y), "f"(z), "f"(w),
               "l"(at_l2_evict_last())
               : "memory");
}

/* Two packed 16-bit pairs, 8 bytes (KV8's O rows: four consecutive d). */
__device__ __forceinline__ void dec_st_global_u2(at_out_t *p, unsigned lo, unsigned hi)
{
  asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(p), "r"(lo), "r"(hi) : "memory");
}

/* Byte offset of 16-byte chunk c of row r in a swizzled tile with rows of ROW bytes. */
template <int ROW> __device__ __forceinline__ unsigned dec_swz(int r, int c)
{
  return (unsigned)(r * ROW + ((c ^ (r & 7)) << 4));
}

/* Q's swizzle: that one for 16-bit K/V (ldmatrix reads Q); for KV8, chunk c ^ (2r % 8), where the
 * half-warp of an 8-byte fragment load (rows g = 0..3, chunks 2ks and 2ks+1) meets 8 distinct
 * chunk slots. */
__device__ __forceinline__ unsigned dec_swz_q(int r, int c)
{
  if constexpr (DEC_K8) return (unsigned)(r * DEC_QROW + ((c ^ ((2 * r) & 7)) << 4));
  else return dec_swz<DEC_QROW>(r, c);
}

/* ---- KV8: FP8 pairs to 16-bit pairs ----------------------------------------------------------- */

/* Bytes I and J of w as the 16-bit pair (lo = byte I) of the MMA's type; see the header. The
 * permute's selector takes byte I into bits 0..7 and sign-fills bits 8..15 (nibble 8 | I), then
 * the same for J in the upper half; e5m2 -> f16 takes the bytes into bits 8..15 instead, over
 * zeros (nibble 4: a byte of the zero operand). */
#if DEC_KV8
#if DEC_F16_MMA && DEC_KV_DTYPE == AT_DTYPE_E4M3 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define DEC_KV_CVT 1 /* cvt.rn.f16x2.e4m3x2 (sm_89+) */
#elif DEC_F16_MMA && DEC_KV_DTYPE == AT_DTYPE_E5M2 /* e5m2 -> f16: the byte is the top half */
#define DEC_KV_SHIFT 0
#elif AT_IN_DTYPE == AT_DTYPE_BF16 && DEC_KV_DTYPE == AT_DTYPE_E4M3
#define DEC_KV_SHIFT 4
#define DEC_KV_MASK 0x87f087f0u
#define DEC_KV_BIAS 0x7b807b80u /* 2^120 in bf16: 2^(127 - 7) */
#define DEC_KV_FMA "fma.rn.bf16x2"
#elif AT_IN_DTYPE == AT_DTYPE_BF16 && DEC_KV_DTYPE == AT_DTYPE_E5M2
#define DEC_KV_SHIFT 5
#define DEC_KV_MASK 0x8fe08fe0u
#define DEC_KV_BIAS 0x77807780u /* 2^112 in bf16: 2^(127 - 15) */
#define DEC_KV_FMA "fma.rn.bf16x2"
#elif AT_IN_DTYPE == AT_DTYPE_F16 && DEC_KV_DTYPE == AT_DTYPE_E4M3
#define DEC_KV_SHIFT 7
#define DEC_KV_MASK 0xbf80bf80u
#define DEC_KV_BIAS 0x5c005c00u /* 2^8 in f16: 2^(15 - 7) */
#define DEC_KV_FMA "fma.rn.f16x2"
#endif
#endif

#ifndef DEC_KV_CVT
#define DEC_KV_CVT 0
#endif

template <int I, int J> __device__ __forceinline__ unsigned dec_kv_pair(unsigned w)
{
#if DEC_KV8 && DEC_KV_CVT
  /* The cvt widens the low 16 bits (byte 0 -> the low half); bytes 2,3 are the high half as
   * they are, any other pair is permuted into the low half first. */
  unsigned x = w, r;
  if constexpr (I == 2 && J == 3) {
    asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, hi; }" : "=r"(r) : "r"(x));
    return r;
  }
  if constexpr (I != 0 || J != 1) {
    constexpr unsigned SEL = (unsigned)I | (unsigned)J << 4 | 4u << 8 | 4u << 12;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(x) : "r"(w), "r"(0u), "n"(SEL));
  }
  asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, lo; }" : "=r"(r) : "r"(x));
  return r;
#elif DEC_KV8 && DEC_KV_SHIFT == 0
  constexpr unsigned SEL = 4u | (unsigned)I << 4 | 4u << 8 | (unsigned)J << 12;
  unsigned r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(w), "r"(0u), "n"(SEL));
  return r;
#elif DEC_KV8
  constexpr unsigned SEL = (unsigned)I | (8u | I) << 4 | (unsigned)J << 8 | (8u | J) << 12;
  unsigned x, r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(x) : "r"(w), "r"(0u), "n"(SEL));
  x = (x << DEC_KV_SHIFT) & DEC_KV_MASK;
  asm(DEC_KV_FMA " %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(DEC_KV_BIAS), "r"(0x80008000u));
  return r;
#else
  return w; /* not used for 16-bit K/V */
#endif
}

/* P for the P V MMA, in the MMA's type. */
__device__ __forceinline__ unsigned dec_pack_p(float lo, float hi)
{
#if DEC_Q_TO_F16
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return at_pack_out(lo, hi);
#endif
}

__device__ __forceinline__ void dec_ld_shared_u4(unsigned addr, unsigned w[4])
{
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
               : "r"(addr));
}

__device__ __forceinline__ void dec_st_shared_u4(unsigned addr, const unsigned w[4])
{
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(w[0]), "r"(w[1]), "r"(w[2]),
               "r"(w[3])
               : "memory");
}

#if DEC_Q_TO_F16
/* e for ROWS bf16 Q rows of one warp (addr(r, c): the shared address of 16-byte chunk c of its
 * row r): 2^e puts their largest |q| in [2^14, 2^15), under f16's largest finite value (header,
 * "KV8 in f16"). Every warp with these rows finds the same e; inf or NaN in them gives 0 (they
 * stay inf or NaN). */
template <int ROWS, class Addr> __device__ __forceinline__ int dec_q_exponent(Addr addr, int lane)
{
  constexpr int ITEMS = ROWS * DEC_CPR;
  unsigned mx = 0;
  for (int idx = lane; idx < ITEMS; idx += 32) {
    unsigned w[4];
    dec_ld_shared_u4(addr(idx / DEC_CPR, idx % DEC_CPR), w);
#pragma unroll
    for (int j = 0; j < 4; j++) mx = max(mx, max(w[j] & 0x7fffu, (w[j] >> 16) & 0x7fffu));
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  const int biased = (int)(mx >> 7); /* bf16: 8 exponent bits over 7 of mantissa */
  return mx >= 0x7f80u || biased == 0 ? 0 : min(100, max(-100, 141 - biased));
}

/* Those rows, in place, as f16 values of q * 2^e: exact within 2^29 of the largest (bf16's 8
 * significant bits fit f16's 11); smaller ones round to f16 subnormals or 0, less than 2^-38 of
 * the largest term of any score they enter. */
template <int ROWS, class Addr> __device__ __forceinline__ void dec_q_rows_to_f16(Addr addr, int lane, int e)
{
  constexpr int ITEMS = ROWS * DEC_CPR;
  const float up = __int_as_float((127 + e) << 23);
  for (int idx = lane; idx < ITEMS; idx += 32) {
    const unsigned at = addr(idx / DEC_CPR, idx % DEC_CPR);
    unsigned w[4];
    dec_ld_shared_u4(at, w);
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const float lo = __uint_as_float(w[j] << 16) * up, hi = __uint_as_float(w[j] & 0xffff0000u) * up;
      asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w[j]) : "f"(hi), "f"(lo));
    }
    dec_st_shared_u4(at, w);
  }
}
#endif

/* ---- global -> shared K/V tile ---------------------------------------------------------------- */

/* Keys [j0, j0 + BLOCK_N) of one head (base = key 0, stride elements per key) into a swizzled tile;
 * keys >= j_end are zero-filled. Chunk i goes to thread i % THREADS: a warp copies consecutive
 * 16-byte pieces of a row (coalesced reads, conflict-free writes). When THREADS is a multiple of
 * the chunks per row, a thread keeps one column and steps down the rows with one pointer. */
__device__ __forceinline__ void dec_load_kv(unsigned tile, const dec_kv_t *base, int stride, int j0,
                                            int j_end, int tid)
{
  constexpr int TOTAL = DEC_BN * DEC_KV_CPR;
  if constexpr (DEC_THREADS % DEC_KV_CPR == 0 && TOTAL % DEC_THREADS == 0) {
    constexpr int STEP = DEC_THREADS / DEC_KV_CPR; /* rows per pass */
    const int c = tid % DEC_KV_CPR, r = tid / DEC_KV_CPR;
    const dec_kv_t *src = base + (long long)(j0 + r) * stride + c * DEC_KV_EPC;
    const long long step = (long long)STEP * stride * (long long)sizeof(dec_kv_t);
    const int rem = j_end - j0 - r; /* rows of this thread's column still in range: i*STEP < rem */
#pragma unroll
    for (int i = 0; i < TOTAL / DEC_THREADS; i++) {
      const bool valid = i * STEP < rem;
      at_cp_async16(tile + dec_swz<DEC_KVROW>(r + i * STEP, c), valid ? src : base, valid ? 16 : 0);
      /* The step is opaque to the compiler (asm), so it cannot hoist the i*step offsets of every
       * row out of the K/V loop as 64-bit registers. */
      asm("add.s64 %0, %0, %1;" : "+l"(src) : "l"(step));
    }
  } else {
#pragma unroll
    for (int i = 0; i < (TOTAL + DEC_THREADS - 1) / DEC_THREADS; i++) {
      const int idx = tid + i * DEC_THREADS;
      if (TOTAL % DEC_THREADS == 0 || idx < TOTAL) {
        const int r = idx / DEC_KV_CPR, c = idx % DEC_KV_CPR;
        const bool valid = j0 + r < j_end;
        const dec_kv_t *src = valid ? base + (long long)(j0 + r) * stride + c * DEC_KV_EPC : base;
        at_cp_async16(tile + dec_swz<DEC_KVROW>(r, c), src, valid ? 16 : 0);
      }
    }
  }
}

/* ---- paged K/V: page ids and the gathered tile loads (DEC_PAGE_SIZE > 0) ---------------------- */
#if DEC_PAGE_SIZE > 0

/* The ring slot of tile m's page ids. */
__device__ __forceinline__ unsigned dec_ids_slot(unsigned ring, int m)
{
  return ring + (unsigned)((m % DEC_ID_SLOTS) * DEC_IDS * 4);
}

/* Page ids of tile m (first key first_key, a multiple of BLOCK_N) into its ring slot: entries
 * first_key / PS .. + DEC_IDS - 1 of the sequence's table row; entries past the row are
 * zero-filled (never read). Entries past the sequence's last page are within the row, loaded
 * and never used (their keys are >= S_b): the loads do not wait for seqlens_kv. */
__device__ __forceinline__ void dec_load_ids(unsigned ring, const int *table_row, int max_pages, int first_key, int m,
                                             int tid)
{
  const unsigned slot = dec_ids_slot(ring, m);
  const int p0 = first_key / DEC_PS;
  for (int i = tid; i < DEC_IDS; i += DEC_THREADS) {
    const bool in_row = p0 + i < max_pages;
    at_cp_async4(slot + 4 * i, in_row ? table_row + p0 + i : table_row, in_row ? 4 : 0);
  }
}

/* Is key j (tile-relative row r) of a page inside the pool? The masked path's check after a
 * table entry outside [0, num_pages) was met (rare: a caller's error). */
__device__ __forceinline__ bool dec_page_ok(unsigned slot, int r, int num_pages)
{
  const int page = at_ld_shared_s32(slot + 4 * (DEC_PS >= DEC_BN ? 0 : r / DEC_PS));
  return (unsigned)page < (unsigned)num_pages;
}

/* A value the compiler must take as new at every call: products with it (row offsets) are
 * recomputed per tile instead of hoisted out of the K/V loop into registers for every row. */
__device__ __forceinline__ int dec_opaque(int x)
{
  asm volatile("mov.b32 %0, %0;\n" : "+r"(x));
  return x;
}

/* Keys [j0, j0 + BLOCK_N) of one head into a swizzled tile, gathered through this tile's page ids
 * (slot): key j is row j % PS of page ids[(j - j0) / PS] (ids[0] when PS >= BLOCK_N: a tile never
 * crosses a page then, both powers of two and j0 a multiple of BLOCK_N), at pool + page *
 * page_stride + (j % PS) * stride (pool: head hk of page 0). Keys >= j_end, and keys of a page
 * outside [0, num_pages), are zero-filled (src-size 0: the pool is never read there); the latter
 * set *bad (the compute masks them). The chunk-to-thread mapping is dec_load_kv's: where a thread
 * keeps one column and steps down the rows by STEP, row r + i*STEP is in slot i*STEP / PS at row
 * r + i*STEP % PS of its page (PS >= STEP: the slot is the same for every thread, a broadcast
 * read, once per page), or in slot r / PS + i*STEP / PS at row r % PS (PS < STEP). A thread's ids
 * are read from shared memory first, so its 16-byte copies issue back to back. */
__device__ __forceinline__ void dec_load_kv_paged(unsigned tile, const dec_kv_t *pool, long long page_stride,
                                                  int stride, int j0, int j_end, unsigned slot, int num_pages,
                                                  int tid, bool &bad)
{
  constexpr int TOTAL = DEC_BN * DEC_KV_CPR;
  constexpr int PER_THREAD = (TOTAL + DEC_THREADS - 1) / DEC_THREADS;
  stride = dec_opaque(stride);
  int page[PER_THREAD];
  if constexpr (DEC_THREADS % DEC_KV_CPR == 0 && TOTAL % DEC_THREADS == 0) {
    constexpr int STEP = DEC_THREADS / DEC_KV_CPR; /* rows per pass */
    const int c = tid % DEC_KV_CPR, r = tid / DEC_KV_CPR;
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) {
      if constexpr (DEC_PS >= STEP) {
        /* the slot is a constant per i: one read per page of the tile, reused down its rows */
        const int sl = DEC_PS >= DEC_BN ? 0 : i * STEP / DEC_PS;
        const int prev = DEC_PS >= DEC_BN ? 0 : (i - 1) * STEP / DEC_PS;
        page[i] = i > 0 && sl == prev ? page[i > 0 ? i - 1 : 0] : at_ld_shared_s32(slot + 4 * sl);
      } else {
        page[i] = at_ld_shared_s32(slot + 4 * (r / DEC_PS + i * STEP / DEC_PS));
      }
    }
    const int rem = j_end - j0 - r; /* rows of this thread's column still in range: i*STEP < rem */
    const int first = DEC_PS >= DEC_BN ? (int)((unsigned)j0 % DEC_PS) : 0; /* row of key j0 in its page */
    /* Addresses: this thread's column and first row in page 0, plus a compile-time number of
     * STEP-row steps (the row within the page), plus page * page bytes, the one wide multiply-add
     * per copy. A page outside the pool addresses page 0 with src-size 0, so every address is in
     * the pool and needs no select. Such a page sets *bad whether or not its rows are in range:
     * entries past a sequence's last page only meet its last tiles, which the masked path (that
     * *bad turns on) computes correctly anyway, and one test per page replaces one per copy. */
    const unsigned long long page_bytes = (unsigned long long)page_stride * sizeof(dec_kv_t);
    const unsigned long long base0 =
        (unsigned long long)(pool + c * DEC_KV_EPC) +
        (unsigned long long)((long long)(DEC_PS >= STEP ? first + r : r % DEC_PS) * stride * (long long)sizeof(dec_kv_t));
    const unsigned long long step_bytes = (unsigned long long)((long long)STEP * stride * (long long)sizeof(dec_kv_t));
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) {
      const int k = DEC_PS >= STEP ? (i * STEP) % DEC_PS / STEP : 0; /* steps below the first row */
      const bool in_pool = (unsigned)page[i] < (unsigned)num_pages;
      bad |= !in_pool;
      const unsigned pg = in_pool ? (unsigned)page[i] : 0u;
      const unsigned long long base_k = base0 + (unsigned long long)k * step_bytes;
      at_cp_async16(tile + dec_swz<DEC_KVROW>(r + i * STEP, c), (const void *)(base_k + pg * page_bytes),
                    i * STEP < rem && in_pool ? 16 : 0);
    }
  } else {
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) {
      const int r = min((tid + i * DEC_THREADS) / DEC_KV_CPR, DEC_BN - 1);
      page[i] = at_ld_shared_s32(slot + 4 * (DEC_PS >= DEC_BN ? 0 : r / DEC_PS));
    }
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) {
      const int idx = tid + i * DEC_THREADS;
      if (TOTAL % DEC_THREADS == 0 || idx < TOTAL) {
        const int r = idx / DEC_KV_CPR, c = idx % DEC_KV_CPR;
        const int j = j0 + r;
        const bool in_pool = (unsigned)page[i] < (unsigned)num_pages;
        const bool valid = j < j_end && in_pool;
        bad |= j < j_end && !in_pool;
        const dec_kv_t *src =
            valid ? pool + page[i] * page_stride + (long long)((unsigned)j % DEC_PS) * stride + c * DEC_KV_EPC : pool;
        at_cp_async16(tile + dec_swz<DEC_KVROW>(r, c), src, valid ? 16 : 0);
      }
    }
  }
}
#endif /* DEC_PAGE_SIZE > 0 */

/* ---- the last-CTA merge (DEC_LAST_CTA) --------------------------------------------------------- */

/* Loads at L2 (.cg), volatile so that they stay after the fences and barriers before them: the
 * partials were written by other CTAs of this launch, after which no L1 copy may be trusted; and
 * ptxas may hoist a read-only (.nc) load above the wait for the previous grid, where that kernel
 * may still be writing what it reads (scripts/sass_wait.awk checks for it). */
__device__ __forceinline__ float dec_ld_cg_f(const float *p)
{
  float x;
  asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(x) : "l"(p) : "memory");
  return x;
}

/* A split kernel's wait for the previous grid (it is launched as a programmatic dependent: that
 * kernel may still be writing its inputs), the next grid's early launch where allowed, then its
 * first global reads, the descales. Step 27 (WAIT_LATE: contiguous K/V) calls it below the index
 * arithmetic and reads the descales by coherent loads. */
template <bool WAIT_LATE>
__device__ __forceinline__ void dec_inputs_ready(bool allow_next, const float *descale_k, const float *descale_v,
                                                 float &scale_log2, float &o_descale)
{
  at_wait_for_previous_grid();
  if (allow_next) at_allow_next_grid();
  if (descale_k) scale_log2 *= WAIT_LATE ? dec_ld_cg_f(descale_k) : *descale_k;
  if (descale_v) o_descale = WAIT_LATE ? dec_ld_cg_f(descale_v) : *descale_v;
}

__device__ __forceinline__ void dec_ld_cg_f4(const float *p, float x[4])
{
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3])
               : "l"(p)
               : "memory");
}

static constexpr int DEC_MC = (DEC_D / 4 + 31) / 32; /* 16-byte chunks of a row per lane */
static constexpr int DEC_MB = 8;                     /* splits per batch of loads */

/* One warp merges the n_splits partials of row prow into orow (and *lse_out): lane l takes the
 * 16-byte chunks l, l + 32, ... of the row; DEC_MB splits' lse and chunks are loaded together,
 * then merged online (running max of the splits' lse), so a row costs n_splits / DEC_MB round
 * trips to L2, not n_splits. */
__device__ __forceinline__ void dec_merge_row(const float *o_part, const float *lse_part, long long prow,
                                              int n_splits, at_out_t *orow, float *lse_out, int lane)
{
  const float LOG2E = 1.4426950408889634f;
  const float *lp = lse_part + prow * n_splits, *op = o_part + prow * n_splits * DEC_D;
  float m = AT_NEG_INF, l = 0.f, acc[DEC_MC][4];
#pragma unroll
  for (int c = 0; c < DEC_MC; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.f;
  for (int s0 = 0; s0 < n_splits; s0 += DEC_MB) {
    float ls[DEC_MB], x[DEC_MB][DEC_MC][4];
#pragma unroll
    for (int u = 0; u < DEC_MB; u++) { /* loads first, then the arithmetic */
      const int s = s0 + u;
      ls[u] = s < n_splits ? dec_ld_cg_f(lp + s) : AT_NEG_INF;
#pragma unroll
      for (int c = 0; c < DEC_MC; c++) {
        const int ch = lane + 32 * c;
        if (s < n_splits && ch < DEC_D / 4) dec_ld_cg_f4(op + (long long)s * DEC_D + 4 * ch, x[u][c]);
        else x[u][c][0] = x[u][c][1] = x[u][c][2] = x[u][c][3] = 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < DEC_MB; u++) {
      if (ls[u] == AT_NEG_INF) continue; /* an empty split (or past the end) weighs 0 */
      if (ls[u] > m) {
        const float shrink = m == AT_NEG_INF ? 0.f : at_exp2((m - ls[u]) * LOG2E);
        l *= shrink;
#pragma unroll
        for (int c = 0; c < DEC_MC; c++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[c][e] *= shrink;
        m = ls[u];
      }
      const float w = at_exp2((ls[u] - m) * LOG2E);
      l += w;
#pragma unroll
      for (int c = 0; c < DEC_MC; c++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[c][e] = fmaf(w, x[u][c][e], acc[c][e]);
    }
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int c = 0; c < DEC_MC; c++) {
    const int ch = lane + 32 * c;
    if (ch < DEC_D / 4)
      dec_st_global_u2(orow + 4 * ch, at_pack_out(acc[c][0] * inv, acc[c][1] * inv),
                       at_pack_out(acc[c][2] * inv, acc[c][3] * inv));
  }
  if (lse_out && lane == 0) *lse_out = l > 0.f ? m + at_log2(l) * 0.69314718055994531f : AT_NEG_INF;
}

/* After a CTA wrote its split's partials: count the split done for its row group (b, blockIdx.y);
 * the CTA that counts last merges the group's rows, one warp per row, and puts the counter back
 * to 0 for the next launch (the scratch starts zeroed). Each thread's fence orders its partial
 * stores before the count; the merging CTA's fence orders the count before its loads. is_last:
 * a word of the dynamic shared memory, free once every warp passed the first barrier (a static
 * __shared__ word would add to a block that may already use the whole opt-in limit). */
__device__ __forceinline__ void dec_merge_if_last(const float *o_part, const float *lse_part, at_out_t *o, float *lse,
                                               int *split_counters, int b, int hk, int t0, int T, int n_q,
                                               int n_splits, long long o_sb, int o_ss, int o_sh,
                                               volatile int *is_last)
{
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int *counter = split_counters + (long long)blockIdx.z * gridDim.y + blockIdx.y;
    const int done = atomicAdd(counter, 1) + 1;
    *is_last = done == n_splits;
    if (done == n_splits) *counter = 0; /* every split of this launch has counted */
  }
  __syncthreads();
  if (!*is_last) return;
  __threadfence();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int r = warp; r < DEC_ROWS; r += DEC_W) {
    const int tok = t0 + r / DEC_G, h = hk * DEC_G + r % DEC_G;
    if (tok >= T) continue;
    const long long prow = ((long long)b * n_q + h) * T + tok;
    at_out_t *orow = o + b * o_sb + (long long)tok * o_ss + (long long)h * o_sh;
    dec_merge_row(o_part, lse_part, prow, n_splits, orow, DEC_LSE ? lse + prow : (float *)0, lane);
  }
}

/* ---- the cluster merge (DEC_CLUSTER > 1) --------------------------------------------------------- */

/* Partials of the split kernel: to the scratch, or (cluster merge) to this CTA's shared memory. */
__device__ __forceinline__ void dec_st_part_f2(float *p, float x, float y)
{
  if constexpr (DEC_CLUSTER > 1) *reinterpret_cast<float2 *>(p) = make_float2(x, y);
  else dec_st_global_f2(p, x, y);
}

__device__ __forceinline__ void dec_st_part_f4(float *p, float x, float y, float z, float w)
{
  if constexpr (DEC_CLUSTER > 1) *reinterpret_cast<float4 *>(p) = make_float4(x, y, z, w);
  else dec_st_global_f4(p, x, y, z, w);
}

static constexpr int DEC_PSTRIDE = DEC_D + 4; /* floats per partial row (16-byte aligned rows) */
#define DEC_PART_BYTES (DEC_ROWS * (DEC_D + 4) * 4 + DEC_ROWS * 4)
#if DEC_CLUSTER > 1
static_assert(DEC_PART_BYTES <= 2 * DEC_STAGES * DEC_KV_BYTES, "cluster merge: the partials must fit the K/V area");

__device__ __forceinline__ unsigned dec_cluster_rank()
{
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

/* All threads of the cluster; release/acquire: shared-memory writes before it are visible to
 * every CTA of the cluster after it. */
__device__ __forceinline__ void dec_cluster_sync()
{
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* The address of the same shared-memory word in CTA `rank` of the cluster. */
__device__ __forceinline__ unsigned dec_dsmem(unsigned local, unsigned rank)
{
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(local), "r"(rank));
  return r;
}

__device__ __forceinline__ float dec_ld_dsmem_f(unsigned addr)
{
  float x;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(x) : "r"(addr) : "memory");
  return x;
}

__device__ __forceinline__ void dec_ld_dsmem_f4(unsigned addr, float x[4])
{
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3])
               : "r"(addr)
               : "memory");
}

/* The CTAs of a cluster are the DEC_CLUSTER splits of one row group, each with its partials (O
 * rows of DEC_PSTRIDE floats at part_o, lse at part_l) in its own shared memory. Work item (row,
 * 16-byte chunk) goes to thread item % THREADS of CTA item / THREADS (cyclically): it reads that
 * chunk and lse from every split at once (distributed shared memory), merges and writes o. The
 * second barrier keeps every CTA's shared memory alive until all reads are done. */
__device__ __forceinline__ void dec_cluster_merge(at_out_t *o, float *lse, int b, int hk, int t0, int T, int n_q,
                                                  long long o_sb, int o_ss, int o_sh, unsigned part_o, unsigned part_l)
{
  const float LOG2E = 1.4426950408889634f;
  constexpr int C4 = DEC_D / 4;
  dec_cluster_sync();
  for (int item = (int)dec_cluster_rank() * DEC_THREADS + threadIdx.x; item < DEC_ROWS * C4;
       item += DEC_CLUSTER * DEC_THREADS) {
    const int r = item / C4, ch = item % C4;
    const int tok = t0 + r / DEC_G, h = hk * DEC_G + r % DEC_G;
    if (tok >= T) continue;
    float ls[DEC_CLUSTER], x[DEC_CLUSTER][4];
#pragma unroll
    for (int s = 0; s < DEC_CLUSTER; s++) {
      ls[s] = dec_ld_dsmem_f(dec_dsmem(part_l + r * 4, s));
      dec_ld_dsmem_f4(dec_dsmem(part_o + (r * DEC_PSTRIDE + 4 * ch) * 4, s), x[s]);
    }
    float m = AT_NEG_INF;
#pragma unroll
    for (int s = 0; s < DEC_CLUSTER; s++) m = fmaxf(m, ls[s]);
    float l = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
    if (m != AT_NEG_INF) {
#pragma unroll
      for (int s = 0; s < DEC_CLUSTER; s++) {
        const float w = at_exp2((ls[s] - m) * LOG2E); /* 0 for an empty split (lse -inf, O 0) */
        l += w;
#pragma unroll
        for (int e = 0; e < 4; e++) acc[e] = fmaf(w, x[s][e], acc[e]);
      }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    at_out_t *orow = o + b * o_sb + (long long)tok * o_ss + (long long)h * o_sh;
    dec_st_global_u2(orow + 4 * ch, at_pack_out(acc[0] * inv, acc[1] * inv), at_pack_out(acc[2] * inv, acc[3] * inv));
    if (DEC_LSE && ch == 0)
      lse[((long long)b * n_q + h) * T + tok] = l > 0.f ? m + at_log2(l) * 0.69314718055994531f : AT_NEG_INF;
  }
  dec_cluster_sync();
}
#else
__device__ __forceinline__ void dec_cluster_merge(at_out_t *, float *, int, int, int, int, int, long long, int, int,
                                                  unsigned, unsigned)
{
}
#endif

/* ---- the split kernel ------------------------------------------------------------------------- */

/* The max step of the online softmax for one accumulator row half over NT n8 tiles of S: row_max
 * (raw score units) takes the tile's, m_scaled is it in the exp2 domain, and the return is alpha,
 * by which the row's sum and O are rescaled. A row that has seen only masked keys keeps m = -inf
 * and uses 0 as its scaled max, so its p and alpha are 0. */
template <int NT>
__device__ __forceinline__ float dec_row_max_step(const float (*s)[4], int half, float &row_max, float scale_log2,
                                                  float &m_scaled)
{
  float mx = row_max;
#pragma unroll
  for (int nt = 0; nt < NT; nt++) mx = fmaxf(mx, fmaxf(s[nt][2 * half], s[nt][2 * half + 1]));
  mx = at_quad_max(mx);
  m_scaled = mx == AT_NEG_INF ? 0.f : mx * scale_log2;
  const float alpha = at_exp2(row_max * scale_log2 - m_scaled);
  row_max = mx;
  return alpha;
}

/* Online softmax of one accumulator row half (fa2.cu): p = 2^(s*scale_log2 - m*scale_log2) in one
 * FFMA, written over s; this lane's row_sum moves on; returns alpha. */
template <int NT>
__device__ __forceinline__ float dec_softmax_half(float (*s)[4], int half, float &row_max, float &row_sum,
                                                  float scale_log2)
{
  float m_scaled;
  const float alpha = dec_row_max_step<NT>(s, half, row_max, scale_log2, m_scaled);
  float sum = 0.f;
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    s[nt][2 * half] = at_exp2(fmaf(s[nt][2 * half], scale_log2, -m_scaled));
    s[nt][2 * half + 1] = at_exp2(fmaf(s[nt][2 * half + 1], scale_log2, -m_scaled));
    sum += s[nt][2 * half] + s[nt][2 * half + 1];
  }
  row_sum = row_sum * alpha + sum;
  return alpha;
}

/* P of n8 tile nt and row half h in the m64 A fragments of P V (keys 16kk .. 16kk+15 are n8 tiles
 * 2kk and 2kk+1): p[nt / 2][2 (nt % 2) + h]. */
__device__ __forceinline__ void dec_put_p(unsigned (*p)[4], int nt, int half, float lo, float hi)
{
  p[nt / 2][2 * (nt % 2) + half] = dec_pack_p(lo, hi);
}

/* The same softmax with P packed into the P V fragments and S left as it is (the speculative
 * path's fallback, below). */
template <int NT>
__device__ __forceinline__ float dec_softmax_half_to_p(const float (*s)[4], int half, float &row_max,
                                                       float &row_sum, float scale_log2, unsigned (*p)[4])
{
  float m_scaled;
  const float alpha = dec_row_max_step<NT>(s, half, row_max, scale_log2, m_scaled);
  float sum = 0.f;
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    const float lo = at_exp2(fmaf(s[nt][2 * half], scale_log2, -m_scaled));
    const float hi = at_exp2(fmaf(s[nt][2 * half + 1], scale_log2, -m_scaled));
    sum += lo + hi;
    dec_put_p(p, nt, half, lo, hi);
  }
  row_sum = row_sum * alpha + sum;
  return alpha;
}

/* The speculative row max (decode step 20; fa3's v19 turned around): the exponentials take the
 * row's max as it stands (row_max, from the last exact step) instead of waiting for this tile's,
 * and the tile's max is taken beside them, off their path. P is kept if, for every row of the
 * warp, the row has a max and no score of this tile lies more than DEC_SPEC_HEADROOM (log2 units)
 * above it: P then stays under 2^8 (f16 holds 65504), alpha is 1 and O is not rescaled. Nothing is
 * lost at the small end: the reference is the max seen, as in the exact step. Returns false where
 * the warp must take the exact step (dec_softmax_half_to_p) over this tile's S, which is left
 * as it is: a row's first visible tile, or a score that rose by more than the headroom. */
static constexpr float DEC_SPEC_HEADROOM = 8.f;
template <int NT>
__device__ __forceinline__ bool dec_softmax_spec(const float (*s)[4], const float *row_max, float *row_sum,
                                                 float scale_log2, unsigned (*p)[4])
{
  float ref[2], mx[2] = {AT_NEG_INF, AT_NEG_INF}, sum[2] = {0.f, 0.f};
#pragma unroll
  for (int half = 0; half < 2; half++) ref[half] = row_max[half] * scale_log2;
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    float x[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
      x[e] = at_exp2(fmaf(s[nt][e], scale_log2, -ref[e >> 1]));
      mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
      sum[e >> 1] += x[e];
    }
    dec_put_p(p, nt, 0, x[0], x[1]);
    dec_put_p(p, nt, 1, x[2], x[3]);
  }
  /* ref = -inf (no max yet) fails both ways: -inf is not > -inf, and mx - ref is +inf or NaN */
  bool ok = true;
#pragma unroll
  for (int half = 0; half < 2; half++)
    ok = ok && ref[half] > AT_NEG_INF && fmaf(mx[half], scale_log2, -ref[half]) <= DEC_SPEC_HEADROOM;
  if (!__all_sync(0xffffffffu, ok)) return false;
  row_sum[0] += sum[0];
  row_sum[1] += sum[1];
  return true;
}

/* The keys of split [k_lo, k_lo + keys_per_split) that the token block t0 .. t0 + BM - 1 reads:
 * keys >= hi are zero-filled and masked (past S, past the split, or under a causal mask past
 * the block's last token's last key), n_tiles tiles to load, and the first n_full of them visible
 * to every real row (no per-element mask). */
struct dec_keys {
  int hi, n_tiles, n_full;
};

__device__ __forceinline__ dec_keys dec_split_keys(int k_lo, int keys_per_split, int S, int T, int t0, int offset)
{
  dec_keys r;
  r.hi = min(S, k_lo + keys_per_split);
  int full_hi = r.hi;
  if (DEC_CAUSAL) {
    const int t_last = min(t0 + DEC_BM, T) - 1;
    r.hi = min(r.hi, t_last + offset + 1);
    full_hi = min(full_hi, t0 + offset + 1);
  }
  r.n_tiles = r.hi > k_lo ? (r.hi - k_lo + DEC_BN - 1) / DEC_BN : 0;
  r.n_full = full_hi > k_lo ? min(r.n_tiles, (full_hi - k_lo) / DEC_BN) : 0;
  return r;
}

#if !DEC_WG

extern "C" __global__ void DEC_CLUSTER_DIMS __launch_bounds__(DEC_THREADS, 1)
DEC_KERNEL(const at_in_t *__restrict__ q, const dec_kv_t *__restrict__ k, const dec_kv_t *__restrict__ v,
           at_out_t *__restrict__ o, float *__restrict__ lse, float *__restrict__ o_part,
           float *__restrict__ lse_part, int T, int S, int n_splits, int keys_per_split, float scale_log2,
           long long q_sb, int q_ss, int q_sh, long long k_sb, int k_ss, int k_sh, long long v_sb,
           int v_ss, int v_sh, long long o_sb, int o_ss, int o_sh, const float *__restrict__ descale_k,
           const float *__restrict__ descale_v, int *__restrict__ split_counters
#if DEC_PAGE_SIZE > 0
           , const int *__restrict__ block_table, const int *__restrict__ seqlens_kv, int max_pages_per_seq,
           int num_pages
#endif
)
{
  /* Launched as a programmatic dependent of the stream's previous kernel: its launch ran under
   * that kernel's tail, and nothing is read before that kernel's results are complete. Then the
   * combine kernel (or the next call) may launch under this one; it waits for this grid. Not
   * after clusters: a next call's clusters placed early took the GPCs' room and made one of its
   * clusters start late (H200: B1 S16k 19.4 -> 26.1 us). A cluster kernel is launched plainly
   * (generator/decode.c), so its wait returns at once. */
  float o_descale = 1.f;
  /* Step 27: the wait is down at the first global access, below the index arithmetic
   * (contiguous K/V: paged K/V reads its block table after little arithmetic, and ptxas put the
   * wait first there anyway). */
  constexpr bool WAIT_LATE = DEC_PAGE_SIZE == 0;
  const auto inputs_ready = [&]() {
    dec_inputs_ready<WAIT_LATE>(DEC_CLUSTER == 1, descale_k, descale_v, scale_log2, o_descale);
  };
  if (!WAIT_LATE) inputs_ready();

  extern __shared__ __align__(128) unsigned char dec_smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wm = warp % DEC_WM, wn = warp / DEC_WM;
  const int split = blockIdx.x, b = blockIdx.z;
  const int n_tb = (T + DEC_BM - 1) / DEC_BM;
  const int n_kv = gridDim.y / n_tb;
  const int hk = blockIdx.y % n_kv, tb = blockIdx.y / n_kv;
  const int n_q = n_kv * DEC_G;
  const int t0 = tb * DEC_BM; /* first token of the block */
  const int k_lo = split * keys_per_split;

  const unsigned smem_q = at_smem_addr(dec_smem);
  const unsigned smem_k = smem_q + DEC_Q_BYTES;
  const unsigned smem_v = smem_k + DEC_STAGES * DEC_KV_BYTES;

  /* Paged: the first tiles' page ids go first (their own group), then this sequence's length
   * S_b = min(seqlens_kv[b], S) replaces S (keys, causal offset); both loads are in flight
   * together. */
#if DEC_PAGE_SIZE > 0
  const unsigned smem_ids = smem_q + DEC_IDS_OFFSET; /* the ring of page ids */
  const int *table_row = block_table + (long long)b * max_pages_per_seq;
#pragma unroll
  for (int s = 0; s < DEC_STAGES - 1; s++)
    dec_load_ids(smem_ids, table_row, max_pages_per_seq, k_lo + s * DEC_BN, s, tid);
  at_cp_async_commit();
  S = max(0, min(S, seqlens_kv[b]));
  bool page_bad = false; /* this thread met a table entry outside the pool (sticky) */
#endif
  const int offset = DEC_MASK == AT_MASK_CAUSAL_BR ? S - T : 0;

  /* Key range of this split, tiles to load (n_tiles) and tiles that need no mask (n_full). */
  const dec_keys keys = dec_split_keys(k_lo, keys_per_split, S, T, t0, offset);
  const int k_hi = keys.hi, n_tiles = keys.n_tiles, n_full = keys.n_full;

  /* Q: packed row r = t_local * G + g; padding rows and tokens >= T zero-filled. */
  {
    const at_in_t *qb = q + b * q_sb + (long long)(hk * DEC_G) * q_sh + (long long)t0 * q_ss;
    constexpr int TOTAL = DEC_MT * 16 * DEC_CPR;
    /* Step 27: the copies' addresses first, then the wait (contiguous K/V), then the copies */
    constexpr int PER_THREAD = (TOTAL + DEC_THREADS - 1) / DEC_THREADS;
    const at_in_t *src[PER_THREAD];
    unsigned dst[PER_THREAD], bytes[PER_THREAD];
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) {
      const int idx = tid + i * DEC_THREADS;
      const int r = idx / DEC_CPR, c = idx % DEC_CPR;
      const int tl = r / DEC_G, g = r % DEC_G;
      const bool valid = r < DEC_ROWS && t0 + tl < T;
      src[i] = valid ? qb + (long long)tl * q_ss + (long long)g * q_sh + c * 8 : q;
      dst[i] = smem_q + dec_swz_q(r, c), bytes[i] = valid ? 16 : 0;
    }
    if (WAIT_LATE) inputs_ready();
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++)
      if (TOTAL % DEC_THREADS == 0 || tid + i * DEC_THREADS < TOTAL) at_cp_async16(dst[i], src[i], bytes[i]);
    at_cp_async_commit();
  }

#if DEC_PAGE_SIZE > 0
  /* Paged: K and V of head hk in page 0 of the pools; pages k_sb / v_sb elements apart. Tile s's
   * copies wait for the first ids (group 0: at most the Q group after it in flight), and its
   * group carries the ids of tile s + STAGES - 1. */
  const dec_kv_t *kh = k + (long long)hk * k_sh;
  const dec_kv_t *vh = v + (long long)hk * v_sh;
  at_cp_async_wait<1>();
  __syncthreads();
#pragma unroll
  for (int s = 0; s < DEC_STAGES - 1; s++) {
    if (s < n_tiles) {
      const unsigned slot = dec_ids_slot(smem_ids, s);
      dec_load_kv_paged(smem_k + s * DEC_KV_BYTES, kh, k_sb, k_ss, k_lo + s * DEC_BN, k_hi, slot, num_pages, tid,
                        page_bad);
      dec_load_kv_paged(smem_v + s * DEC_KV_BYTES, vh, v_sb, v_ss, k_lo + s * DEC_BN, k_hi, slot, num_pages, tid,
                        page_bad);
    }
    const int m = s + DEC_STAGES - 1;
    if (m < n_tiles) dec_load_ids(smem_ids, table_row, max_pages_per_seq, k_lo + m * DEC_BN, m, tid);
    at_cp_async_commit();
  }
#else
  const dec_kv_t *kh = k + b * k_sb + (long long)hk * k_sh;
  const dec_kv_t *vh = v + b * v_sb + (long long)hk * v_sh;
#pragma unroll
  for (int s = 0; s < DEC_STAGES - 1; s++) {
    if (s < n_tiles) {
      dec_load_kv(smem_k + s * DEC_KV_BYTES, kh, k_ss, k_lo + s * DEC_BN, k_hi, tid);
      dec_load_kv(smem_v + s * DEC_KV_BYTES, vh, v_ss, k_lo + s * DEC_BN, k_hi, tid);
    }
    at_cp_async_commit();
  }
#endif

  /* Per-lane ldmatrix addressing (fa2.cu): every row a lane points at is congruent to lane % 8,
   * so the swizzle is an XOR with a per-lane constant. */
  const int r8 = lane & 7, quad = lane >> 3;
  const int row0 = wm * DEC_MTW * 16; /* first packed row of this warp */
  /* Q (A, x4): matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). */
  const unsigned q_lane = smem_q + (row0 + (lane & 15)) * DEC_QROW;
  const unsigned q_x = (unsigned)((lane >> 4) ^ r8) << 4;
  /* K (B of Q K^T, x4): (keys 0-7, d 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15). */
  const unsigned k_lane = (wn * DEC_NW + r8 + (quad >> 1) * 8) * DEC_KVROW;
  const unsigned k_x = (unsigned)((quad & 1) ^ r8) << 4;
  /* V (B of P V, x4.trans): (keys 0-7, d 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). */
  const unsigned v_lane = (wn * DEC_NW + r8 + (quad & 1) * 8) * DEC_KVROW;
  const unsigned v_x = (unsigned)((quad >> 1) ^ r8) << 4;

  const int g = lane >> 2, tq = lane & 3;
  /* KV8 (header): Q fragments by 8-byte loads, lane (g, t) at Q[row g][16ks + 4t] (chunk 2ks +
   * t/2, half t%2; row g+8 the same chunk slot); K by x4 over 32 keys of one chunk (matrix quad:
   * keys 8*quad..), or x2 over 16 for the last n8 pair; V by x4.trans over 16 keys of two chunks
   * (matrix quad: keys 8*(quad&1).., chunk +quad/2), or x2.trans over one chunk for the last. */
  const unsigned q8_lane = smem_q + (row0 + g) * DEC_QROW + (tq & 1) * 8;
  const int q8_h = tq >> 1, q8_x = (2 * g) & 7;
  const unsigned k8_lane = (wn * DEC_NW + quad * 8 + r8) * DEC_KVROW;
  const unsigned k8_lane2 = (wn * DEC_NW + (quad & 1) * 8 + r8) * DEC_KVROW;
  const unsigned v8_lane = (wn * DEC_NW + (quad & 1) * 8 + r8) * DEC_KVROW;
  const int v8_c = quad >> 1;
  /* Token of each accumulator row of this lane (causal mask). */
  int tok[DEC_MTW][2];
#pragma unroll
  for (int i = 0; i < DEC_MTW; i++)
#pragma unroll
    for (int half = 0; half < 2; half++) tok[i][half] = t0 + (row0 + i * 16 + g + half * 8) / DEC_G;

  /* Q landed (groups after it: STAGES-1 tiles). */
  at_cp_async_wait<DEC_STAGES - 1>();
  __syncthreads();
#if DEC_Q_TO_F16
  {
    const auto q_chunk = [&](int r, int c) { return smem_q + dec_swz_q(row0 + r, c); };
    const int e = dec_q_exponent<DEC_MTW * 16>(q_chunk, lane);
    __syncthreads(); /* every warp has read its rows before any is rewritten */
    if (wn == 0) dec_q_rows_to_f16<DEC_MTW * 16>(q_chunk, lane, e);
    __syncthreads(); /* the f16 rows, for every warp's fragments */
    scale_log2 *= __int_as_float((127 - e) << 23); /* the scores came out 2^e too large */
  }
#endif
  unsigned qf[DEC_QR ? DEC_MTW : 1][DEC_QR ? DEC_KS : 1][4];
  if constexpr (DEC_QR) {
#pragma unroll
    for (int i = 0; i < DEC_MTW; i++)
#pragma unroll
      for (int ks = 0; ks < DEC_KS; ks++) {
        if constexpr (DEC_K8) {
          const unsigned at = q8_lane + i * 16 * DEC_QROW + ((unsigned)((2 * ks + q8_h) ^ q8_x) << 4);
          dec_ld_shared_u2(at, qf[i][ks][0], qf[i][ks][2]);
          dec_ld_shared_u2(at + 8 * DEC_QROW, qf[i][ks][1], qf[i][ks][3]);
        } else {
          at_ldmatrix_x4(qf[i][ks], q_lane + i * 16 * DEC_QROW + (((unsigned)(2 * ks) << 4) ^ q_x));
        }
      }
  }

  float acc[DEC_MTW][DEC_OT][4];
  float row_max[DEC_MTW][2], row_sum[DEC_MTW][2]; /* running max (raw score units), partial sums */
#pragma unroll
  for (int i = 0; i < DEC_MTW; i++) {
#pragma unroll
    for (int j = 0; j < DEC_OT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    row_max[i][0] = row_max[i][1] = AT_NEG_INF;
    row_sum[i][0] = row_sum[i][1] = 0.f;
  }

  int stage = 0, stage_next = DEC_STAGES - 1;
#pragma unroll 1
  for (int t = 0; t < n_tiles; t++) {
    /* Tile t landed (groups after it: STAGES-2); the barrier publishes every thread's copies and
     * means every warp is done with tile t-1, whose stage the prefetch below refills. */
    at_cp_async_wait<DEC_STAGES - 2>();
#if DEC_PAGE_SIZE > 0
    /* The barrier also tells every thread whether any copy so far (tiles up to t + STAGES - 2)
     * met a page outside the pool: then the tiles from here on take the masked path. */
    const bool bad_seen = __syncthreads_or(page_bad) != 0;
    {
      const int tn = t + DEC_STAGES - 1;
      if (tn < n_tiles) {
        const unsigned slot = dec_ids_slot(smem_ids, tn);
        dec_load_kv_paged(smem_k + stage_next * DEC_KV_BYTES, kh, k_sb, k_ss, k_lo + tn * DEC_BN, k_hi, slot,
                          num_pages, tid, page_bad);
        dec_load_kv_paged(smem_v + stage_next * DEC_KV_BYTES, vh, v_sb, v_ss, k_lo + tn * DEC_BN, k_hi, slot,
                          num_pages, tid, page_bad);
      }
      const int m = tn + DEC_STAGES - 1; /* into the slot of tile t - 1, which every warp is done with */
      if (m < n_tiles) dec_load_ids(smem_ids, table_row, max_pages_per_seq, k_lo + m * DEC_BN, m, tid);
      at_cp_async_commit();
    }
#else
    constexpr bool bad_seen = false;
    __syncthreads();
    {
      const int tn = t + DEC_STAGES - 1;
      if (tn < n_tiles) {
        dec_load_kv(smem_k + stage_next * DEC_KV_BYTES, kh, k_ss, k_lo + tn * DEC_BN, k_hi, tid);
        dec_load_kv(smem_v + stage_next * DEC_KV_BYTES, vh, v_ss, k_lo + tn * DEC_BN, k_hi, tid);
      }
      at_cp_async_commit();
    }
#endif
    const int j0 = k_lo + t * DEC_BN + wn * DEC_NW; /* first key of this warp's columns */

    /* S = Q K_t^T over this warp's rows and keys. */
    float s[DEC_MTW][DEC_NT][4];
#pragma unroll
    for (int i = 0; i < DEC_MTW; i++)
#pragma unroll
      for (int nt = 0; nt < DEC_NT; nt++) s[i][nt][0] = s[i][nt][1] = s[i][nt][2] = s[i][nt][3] = 0.f;
    const unsigned k_tile = smem_k + stage * DEC_KV_BYTES + k_lane;
#pragma unroll
    for (int ks = 0; ks < DEC_KS; ks++) {
      unsigned a[DEC_MTW][4];
#pragma unroll
      for (int i = 0; i < DEC_MTW; i++) {
        if constexpr (DEC_QR) {
          a[i][0] = qf[i][ks][0], a[i][1] = qf[i][ks][1], a[i][2] = qf[i][ks][2], a[i][3] = qf[i][ks][3];
        } else if constexpr (DEC_K8) {
          const unsigned at = q8_lane + i * 16 * DEC_QROW + ((unsigned)((2 * ks + q8_h) ^ q8_x) << 4);
          dec_ld_shared_u2(at, a[i][0], a[i][2]);
          dec_ld_shared_u2(at + 8 * DEC_QROW, a[i][1], a[i][3]);
        } else {
          at_ldmatrix_x4(a[i], q_lane + i * 16 * DEC_QROW + (((unsigned)(2 * ks) << 4) ^ q_x));
        }
      }
      if constexpr (DEC_K8) {
        /* 4 n8 tiles (32 keys) of chunk ks per x4: kr[m] = K[key 8m + g][16ks + 4t ..] */
        const unsigned k8_tile = smem_k + stage * DEC_KV_BYTES;
        const unsigned k8_chunk = (unsigned)(ks ^ r8) << 4;
#pragma unroll
        for (int n4 = 0; n4 < DEC_NT / 4; n4++) {
          unsigned kr[4];
          at_ldmatrix_x4(kr, k8_tile + k8_lane + n4 * 32 * DEC_KVROW + k8_chunk);
#pragma unroll
          for (int m = 0; m < 4; m++) {
            const unsigned b0 = dec_kv_pair<0, 1>(kr[m]), b1 = dec_kv_pair<2, 3>(kr[m]);
#pragma unroll
            for (int i = 0; i < DEC_MTW; i++) dec_mma(s[i][4 * n4 + m], a[i], b0, b1);
          }
        }
        if constexpr (DEC_NT % 4 != 0) {
          unsigned kr[2];
          dec_ldmatrix_x2(kr, k8_tile + k8_lane2 + (DEC_NT / 4) * 32 * DEC_KVROW + k8_chunk);
#pragma unroll
          for (int m = 0; m < 2; m++) {
            const unsigned b0 = dec_kv_pair<0, 1>(kr[m]), b1 = dec_kv_pair<2, 3>(kr[m]);
#pragma unroll
            for (int i = 0; i < DEC_MTW; i++) dec_mma(s[i][4 * (DEC_NT / 4) + m], a[i], b0, b1);
          }
        }
      } else {
#pragma unroll
        for (int np = 0; np < DEC_NT / 2; np++) {
          unsigned kb[4];
          at_ldmatrix_x4(kb, k_tile + np * 16 * DEC_KVROW + (((unsigned)(2 * ks) << 4) ^ k_x));
#pragma unroll
          for (int i = 0; i < DEC_MTW; i++) {
            dec_mma(s[i][2 * np], a[i], kb[0], kb[1]);
            dec_mma(s[i][2 * np + 1], a[i], kb[2], kb[3]);
          }
        }
      }
    }

    /* Mask tiles that cross the end of the range or the diagonal (paged: and, once a table entry
     * outside the pool was met, the keys of such pages; their tiles hold zeros there). */
    if (t >= n_full || bad_seen) {
#pragma unroll
      for (int i = 0; i < DEC_MTW; i++)
#pragma unroll
        for (int nt = 0; nt < DEC_NT; nt++)
#pragma unroll
          for (int e = 0; e < 2 * DEC_HALVES; e++) {
            const int j = j0 + nt * 8 + 2 * tq + (e & 1);
            bool masked = j >= k_hi || (DEC_CAUSAL && !at_visible(DEC_MASK, tok[i][e >> 1], j, offset));
#if DEC_PAGE_SIZE > 0
            if (bad_seen && !masked)
              masked = !dec_page_ok(dec_ids_slot(smem_ids, t), j - (k_lo + t * DEC_BN), num_pages);
#endif
            if (masked) s[i][nt][e] = AT_NEG_INF;
          }
    }

    /* Online softmax (dec_softmax_half), O rescaled by alpha. */
    unsigned p[DEC_MTW][DEC_PK][4];
#pragma unroll
    for (int i = 0; i < DEC_MTW; i++) {
#pragma unroll
      for (int half = 0; half < DEC_HALVES; half++) {
        const float alpha = dec_softmax_half<DEC_NT>(s[i], half, row_max[i][half], row_sum[i][half], scale_log2);
#pragma unroll
        for (int j = 0; j < DEC_OT; j++) {
          acc[i][j][2 * half] *= alpha;
          acc[i][j][2 * half + 1] *= alpha;
        }
      }
      /* The S accumulators of n8 tiles 2kk, 2kk+1 are the A fragment of keys 16kk..16kk+15. */
#pragma unroll
      for (int kk = 0; kk < DEC_PK; kk++) {
        p[i][kk][0] = dec_pack_p(s[i][2 * kk][0], s[i][2 * kk][1]);
        p[i][kk][2] = dec_pack_p(s[i][2 * kk + 1][0], s[i][2 * kk + 1][1]);
        if constexpr (DEC_HALVES == 2) {
          p[i][kk][1] = dec_pack_p(s[i][2 * kk][2], s[i][2 * kk][3]);
          p[i][kk][3] = dec_pack_p(s[i][2 * kk + 1][2], s[i][2 * kk + 1][3]);
        } else {
          p[i][kk][1] = p[i][kk][3] = 0u; /* rows g + 8: padding */
        }
      }
    }

    /* O += P V_t. */
    if constexpr (DEC_K8) {
      /* Per chunk c: vr = V[keys 2t, 2t+1 (+8)][16c + 2g, 2g+1]; bytes 0,2 feed O tile 2c (even d),
       * bytes 1,3 tile 2c+1 (odd d). */
      const unsigned v8_tile = smem_v + stage * DEC_KV_BYTES + v8_lane;
#pragma unroll
      for (int kk = 0; kk < DEC_PK; kk++) {
#pragma unroll
        for (int cp = 0; cp < DEC_KV_CPR / 2; cp++) {
          unsigned vr[4];
          at_ldmatrix_x4_trans(vr, v8_tile + kk * 16 * DEC_KVROW + ((unsigned)((2 * cp + v8_c) ^ r8) << 4));
#pragma unroll
          for (int h2 = 0; h2 < 2; h2++) {
            const unsigned e0 = dec_kv_pair<0, 2>(vr[2 * h2]), e1 = dec_kv_pair<0, 2>(vr[2 * h2 + 1]);
            const unsigned o0 = dec_kv_pair<1, 3>(vr[2 * h2]), o1 = dec_kv_pair<1, 3>(vr[2 * h2 + 1]);
#pragma unroll
            for (int i = 0; i < DEC_MTW; i++) {
              dec_mma(acc[i][4 * cp + 2 * h2], p[i][kk], e0, e1);
              dec_mma(acc[i][4 * cp + 2 * h2 + 1], p[i][kk], o0, o1);
            }
          }
        }
        if constexpr (DEC_KV_CPR % 2 != 0) {
          constexpr int C = DEC_KV_CPR - 1;
          unsigned vr[2];
          dec_ldmatrix_x2_trans(vr, v8_tile + kk * 16 * DEC_KVROW + ((unsigned)(C ^ r8) << 4));
          const unsigned e0 = dec_kv_pair<0, 2>(vr[0]), e1 = dec_kv_pair<0, 2>(vr[1]);
          const unsigned o0 = dec_kv_pair<1, 3>(vr[0]), o1 = dec_kv_pair<1, 3>(vr[1]);
#pragma unroll
          for (int i = 0; i < DEC_MTW; i++) {
            dec_mma(acc[i][2 * C], p[i][kk], e0, e1);
            dec_mma(acc[i][2 * C + 1], p[i][kk], o0, o1);
          }
        }
      }
    } else {
      const unsigned v_tile = smem_v + stage * DEC_KV_BYTES + v_lane;
#pragma unroll
      for (int kk = 0; kk < DEC_PK; kk++) {
#pragma unroll
        for (int dp = 0; dp < DEC_OT / 2; dp++) {
          unsigned vb[4];
          at_ldmatrix_x4_trans(vb, v_tile + kk * 16 * DEC_KVROW + (((unsigned)(2 * dp) << 4) ^ v_x));
#pragma unroll
          for (int i = 0; i < DEC_MTW; i++) {
            dec_mma(acc[i][2 * dp], p[i][kk], vb[0], vb[1]);
            dec_mma(acc[i][2 * dp + 1], p[i][kk], vb[2], vb[3]);
          }
        }
      }
    }
    stage = stage + 1 == DEC_STAGES ? 0 : stage + 1;
    stage_next = stage_next + 1 == DEC_STAGES ? 0 : stage_next + 1;
  }
  at_cp_async_wait<0>(); /* no copy outlives the loop (a CTA with no tiles never waited) */

  /* Per row: m in log2 units (-inf: nothing visible), l = the row sum over the quad. */
  float m_fin[DEC_MTW][2], l_fin[DEC_MTW][2];
#pragma unroll
  for (int i = 0; i < DEC_MTW; i++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      l_fin[i][half] = at_quad_sum(row_sum[i][half]);
      m_fin[i][half] = row_max[i][half] == AT_NEG_INF ? AT_NEG_INF : row_max[i][half] * scale_log2;
    }

  bool writer = true; /* this warp writes rows: all warps, or after a column merge those with wn 0 */
  if constexpr (DEC_WN > 1) {
    /* Merge the WARPS_N key columns of each M tile (MTW == 1 here) in the K/V area. */
    constexpr int MR = DEC_MT * 16;
    const unsigned ml = smem_k;
    const unsigned ob = smem_k + DEC_ML_BYTES;
    __syncthreads(); /* every warp is done reading K/V */
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int rr = row0 + g + half * 8;
      if (tq == 0) dec_st_shared_f2(ml + (wn * MR + rr) * 8, m_fin[0][half], l_fin[0][half]);
      if (wn > 0) {
#pragma unroll
        for (int j = 0; j < DEC_OT; j++)
          dec_st_shared_f2(ob + (((wn - 1) * MR + rr) * DEC_OSTRIDE + 8 * j + 2 * tq) * 4,
                           acc[0][j][2 * half], acc[0][j][2 * half + 1]);
      }
    }
    __syncthreads();
    if (wn != 0) {
      if constexpr (!DEC_IN_KERNEL_MERGE) return;
      writer = false; /* stays for the in-kernel merge's barriers */
    }
    if (writer)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int rr = row0 + g + half * 8;
      float mw[DEC_WN], lw[DEC_WN];
      float m = AT_NEG_INF;
#pragma unroll
      for (int w = 0; w < DEC_WN; w++) {
        dec_ld_shared_f2(ml + (w * MR + rr) * 8, mw[w], lw[w]);
        m = fmaxf(m, mw[w]);
      }
      float l = 0.f;
#pragma unroll
      for (int w = 0; w < DEC_WN; w++) {
        mw[w] = mw[w] == AT_NEG_INF ? 0.f : at_exp2(mw[w] - m); /* the weight of column w */
        l += mw[w] * lw[w];
      }
#pragma unroll
      for (int j = 0; j < DEC_OT; j++) {
        float x0 = acc[0][j][2 * half] * mw[0], x1 = acc[0][j][2 * half + 1] * mw[0];
#pragma unroll
        for (int w = 1; w < DEC_WN; w++) {
          float y0, y1;
          dec_ld_shared_f2(ob + (((w - 1) * MR + rr) * DEC_OSTRIDE + 8 * j + 2 * tq) * 4, y0, y1);
          x0 = fmaf(y0, mw[w], x0);
          x1 = fmaf(y1, mw[w], x1);
        }
        acc[0][j][2 * half] = x0;
        acc[0][j][2 * half + 1] = x1;
      }
      m_fin[0][half] = m;
      l_fin[0][half] = l;
    }
  }

  /* Write: o (and lse) for one split, else the normalized partial O and the split's natural lse
   * (to the scratch, or with a cluster merge to this CTA's K/V area, once every warp is done
   * reading the column merge's buffers there). */
  if constexpr (DEC_CLUSTER > 1) __syncthreads();
  float *const part_o = (float *)(dec_smem + DEC_Q_BYTES), *const part_l = part_o + DEC_ROWS * DEC_PSTRIDE;
  if (writer)
#pragma unroll
  for (int i = 0; i < DEC_MTW; i++) {
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int r = row0 + i * 16 + g + half * 8;
      const int tl = r / DEC_G, h = hk * DEC_G + r % DEC_G, tok_i = t0 + tl;
      if (r >= DEC_ROWS || tok_i >= T) continue;
      const float l = l_fin[i][half];
      const float inv = l > 0.f ? o_descale / l : 0.f;
      const float lse_val = l > 0.f ? (m_fin[i][half] + at_log2(l)) * 0.69314718055994531f : AT_NEG_INF;
      const long long prow = ((long long)b * n_q + h) * T + tok_i;
      if (DEC_CLUSTER == 1 && n_splits == 1) {
        if (DEC_LSE && tq == 0) lse[prow] = lse_val;
        at_out_t *orow = o + b * o_sb + (long long)tok_i * o_ss + (long long)h * o_sh;
        if constexpr (DEC_K8) { /* tiles 2c, 2c+1: d = 16c + 4t .. 4t+3 (header) */
#pragma unroll
          for (int c = 0; c < DEC_OT / 2; c++) {
            const float *e = acc[i][2 * c], *od = acc[i][2 * c + 1];
            dec_st_global_u2(orow + 16 * c + 4 * tq, at_pack_out(e[2 * half] * inv, od[2 * half] * inv),
                             at_pack_out(e[2 * half + 1] * inv, od[2 * half + 1] * inv));
          }
        } else {
#pragma unroll
          for (int j = 0; j < DEC_OT; j++)
            *(unsigned *)(orow + 8 * j + 2 * tq) =
                at_pack_out(acc[i][j][2 * half] * inv, acc[i][j][2 * half + 1] * inv);
        }
      } else {
        float *orow;
        if constexpr (DEC_CLUSTER > 1) {
          if (tq == 0) part_l[r] = lse_val;
          orow = part_o + r * DEC_PSTRIDE;
        } else {
          const long long pidx = prow * n_splits + split;
          if (tq == 0) lse_part[pidx] = lse_val;
          orow = o_part + pidx * DEC_D;
        }
        if constexpr (DEC_K8) {
#pragma unroll
          for (int c = 0; c < DEC_OT / 2; c++) {
            const float *e = acc[i][2 * c], *od = acc[i][2 * c + 1];
            dec_st_part_f4(orow + 16 * c + 4 * tq, e[2 * half] * inv, od[2 * half] * inv, e[2 * half + 1] * inv,
                           od[2 * half + 1] * inv);
          }
        } else {
#pragma unroll
          for (int j = 0; j < DEC_OT; j++)
            dec_st_part_f2(orow + 8 * j + 2 * tq, acc[i][j][2 * half] * inv, acc[i][j][2 * half + 1] * inv);
        }
      }
    }
  }
  if constexpr (DEC_CLUSTER > 1)
    dec_cluster_merge(o, lse, b, hk, t0, T, n_q, o_sb, o_ss, o_sh, at_smem_addr(part_o), at_smem_addr(part_l));
  if constexpr (DEC_LAST_CTA) {
    if (n_splits > 1)
      dec_merge_if_last(o_part, lse_part, o, lse, split_counters, b, hk, t0, T, n_q, n_splits, o_sb, o_ss, o_sh,
                        (volatile int *)dec_smem);
  }
}

#else /* DEC_WG */

/* ---- the wgmma kernel (.wg, DEC_WG) ------------------------------------------------------------
 * The same grid, arguments, key range and outputs as the kernel above, for 16-bit contiguous K/V
 * on sm_90a: the packed rows (r = t_local * G + g, as above) are padded to whole warpgroups of 64,
 * warpgroup w owning rows 64w .. 64w+63, and both products run on wgmma with their B operand read
 * by the tensor cores from shared memory in place: S = Q K^T (m64 x BLOCK_N, Q and K K-major),
 * O += P V (m64 x D, P from registers, V MN-major). mma.sync's warps each re-read every K and V
 * tile by ldmatrix, 8 times a tile for 128 rows; here each warpgroup's tensor cores read it once.
 * Tiles (Q, then STAGES x K and STAGES x V, [rows][D]) are stored in 128-byte column blocks
 * (common.cuh, at_swz_off) on 1024-byte boundaries. In an m64nN accumulator warp w4 of the
 * warpgroup holds rows 16*w4 + g and + 8 (lane = 4g + t), columns 8j + 2t and + 1 of each n8
 * tile j: the m16n8 layout of the kernel above, so the softmax and the epilogue are its.
 * Warp specialization (step 12): one more warp, the last, is the producer: its lane 0 issues the
 * TMA boxes of each K and V tile (tensor maps (D, S, Nkv, B), kernel arguments; keys
 * past S arrive as zeros) into a ring of STAGES stages, each with a "full" mbarrier (the copy
 * engine completes its bytes there) and an "empty" one (every consumer warp arrives when its
 * wgmmas no longer read the stage). No CTA-wide barrier in the K/V loop, so the two warpgroups
 * of a 128-row CTA run apart and copies are never issued by the warps that compute. Q is
 * loaded once, by TMA ahead of the first K/V tile (step 33: a map (D, Nq, T, B), boxes of G heads
 * by BLOCK_M tokens, which land in the packed rows' order; its own mbarrier).
 * KV8 (FP8 K/V, step 13): the MMAs run in f16 (Q rewritten as in the kernel above, per warp:
 * a warp's 16 rows are its own in the m64 accumulator, so its 2^e scales only its scores). In
 * place of the producer warp a widening warpgroup (two at 64 rows, taking the tiles in turn:
 * step 15): its thread 0 loads each FP8 tile by TMA
 * into a staging ring (STAGES stages, one "staged" mbarrier each), and its 128 threads widen
 * the tile into the f16 K/V ring the consumers read (dec_kv_pair; a named barrier among the
 * 128 after the stores and their proxy fence, then one arrival on the stage's full mbarrier).
 * Staging and ring stage of tile t are both t % STAGES (K8: t % STAGES and t % RING, below). */
static constexpr int DEC_WG_ROWS = (DEC_ROWS + 63) / 64 * 64;  /* packed rows, whole warpgroups */
static constexpr int DEC_WG_ROWB = 2 * DEC_D;                   /* bytes of a Q, K or V row */
static constexpr int DEC_WG_CPR = DEC_WG_ROWB / 16;             /* 16-byte chunks per row */
static constexpr int DEC_WG_Q_BYTES = DEC_WG_ROWS * DEC_WG_ROWB;
static constexpr int DEC_WG_KV_BYTES = DEC_BN * DEC_WG_ROWB;    /* one K or V tile */
static constexpr int DEC_WG_BAR_BYTES = 256;                    /* full, empty (and staged) mbarriers */
/* 16-bit .wg at 128 rows (step 30): K and V of a stage land on mbarriers of their own ("vfull":
 * the staged barriers' slots, which only FP8 K/V uses). Tile t's P V is issued in iteration t + 1,
 * so V has one iteration more than K to land, and Q K^T of the first tile waits for half the
 * bytes. The P V of nothing before the first tile reads Q (finite), so Q's rows must fill a V
 * tile. Measured (H100, B8 T16 causal-br): 128 rows +3.6% at S1k, +0.7% at S4k, level at S64k;
 * 64 rows (GQA 4) 0.3-0.8% slower, so not there. */
#ifndef DEC_WG_VFULL
#define DEC_WG_VFULL (!DEC_KV8 && DEC_WG_KSPLIT == 1 && DEC_W == 8 && DEC_WG_ROWS >= DEC_BN)
#endif
/* KV8: one FP8 K or V tile as TMA stages it (D bytes a key, 128-byte column blocks) */
static constexpr int DEC_WG_STG_BYTES = DEC_KV8 ? DEC_BN * DEC_D : 0;
/* Step 21 (.wgi, bf16 Q, FP8 K/V, D 128): Q K^T on the FP8 tensor cores, K read as TMA staged it
 * (no f16 K ring, no K widening), Q as two E4M3 parts (dec_wg_q8_fragments: exact for bf16 Q);
 * V widened as before. The consumers refill a staging slot once their warpgroup's four warps have
 * read its K and the widener its V (step 24). */
static constexpr int DEC_WG_RINGS = DEC_WG_K8 ? 1 : 2; /* f16 rings: V, or K and V */
/* Stages of the f16 ring(s). K8 keeps at most 4 (the widened V is needed only a tile or two
 * ahead; .wgi3 keeps 6 at 6 slots, 3 at 9: step 25) and spends the room on FP8 staging slots:
 * STAGES of them, the copies in flight. Tile t is in staging slot t % STAGES and ring stage
 * t % RING; elsewhere the two are the same. */
static constexpr int DEC_WG_RING = DEC_WG_K8 && DEC_WG_KSPLIT == 2 && DEC_STAGES > 4   ? 4
                                   : DEC_WG_K8 && DEC_WG_KSPLIT == 3 && DEC_STAGES > 6 ? 3
                                                                                       : DEC_STAGES;
static constexpr int DEC_WG_SMEM_BYTES = 1024 + DEC_WG_Q_BYTES + DEC_WG_RING * DEC_WG_RINGS * DEC_WG_KV_BYTES +
                                         DEC_STAGES * 2 * DEC_WG_STG_BYTES + DEC_WG_BAR_BYTES;
/* .wgi (step 18): two consumer warpgroups for the same 64 rows, taking the K/V tiles in turn
 * (tile t to warpgroup t % 2), each writing its own partial (split index 2 x split + its turn)
 * for the combine kernel to merge. One warpgroup's chain of S, softmax and P V then runs while
 * the other's does, where at 64 rows one warpgroup's chain was the bound (docs/perf.md, step 16's
 * ncu). Each runs its P V within the tile (it holds one stage, not two): the other's work fills
 * the tensor pipe. With FP8 K/V two widening warpgroups serve them (16 warps; setmaxnreg below):
 * with one, .wgi ran 17% slower than .wg (B8 S64k GQA 8 T8 e4m3 207.9 against 176.9 us), one
 * warpgroup widening a tile in about the time the CTA took per tile. .wgi3 (DEC_WG_KSPLIT 3, K8
 * only: step 22): three consumer warpgroups, tile t to t % 3, and one widener for V alone. */
static constexpr bool DEC_WG_SEQ = DEC_WG_KSPLIT > 1;           /* P V waited for within its tile */
static constexpr int DEC_WG_CT = DEC_THREADS * DEC_WG_KSPLIT;   /* consumer threads */
/* KV8: widening warpgroups, taking the tiles in turn: two where the consumers are one warpgroup
 * (the ring's stages then even, so that a staging slot's next tile is its own widener's) */
#ifndef DEC_WG_WIDENERS
#define DEC_WG_WIDENERS (DEC_KV8 && DEC_W == 4 && DEC_WG_KSPLIT < 3 ? 2 : 1)
#endif
static_assert(DEC_WG_WIDENERS == 1 || DEC_STAGES % 2 == 0, ".wg KV8: two widening warpgroups need an even stage count");
/* after the consumers: the producer warp, or (KV8) the widening warpgroups */
static constexpr int DEC_WG_HELPERS = DEC_KV8 ? 128 * DEC_WG_WIDENERS : 32;
#ifndef DEC_WG_PINGPONG
#define DEC_WG_PINGPONG (DEC_W == 8 && !DEC_KV8) /* two consumer warpgroups take turns (below; not with the widening: 1% slower) */
#endif
/* Two consumer warpgroups: O's rescale skipped where alpha is 1 for all rows of the warp (step
 * 17). Measured, B8 S64k causal-br T16 GQA 8: e4m3 269.9 -> 260.2 us, bf16 273.8 -> 268.7; at
 * 64 rows 3-4% slower with FP8 K/V (ptxas moved the vote in among P V's wgmmas), so not there. */
#ifndef DEC_WG_SKIP_RESCALE
#define DEC_WG_SKIP_RESCALE (DEC_W == 8)
#endif
static constexpr int DEC_WG_THREADS = DEC_WG_CT + DEC_WG_HELPERS;
/* Steps 19 and 19b: with FP8 K/V, Q K^T takes Q's fragments from registers (32 more a consumer
 * thread at D 128), so its wgmmas read only K from shared memory, where they read Q as well each
 * tile: at 64 rows 16 of the ~112 KB a 64-key tile moves through shared memory (docs/perf.md,
 * the ncu of step 18). */
#ifndef DEC_WG_QREG
#define DEC_WG_QREG 0
#endif
/* setmaxnreg (the generator's wg_register_split, with FP8 K/V): the consumers' and the widening
 * warpgroups' registers. What the consumers take must be what the others give back, not merely
 * fit 65536: setmaxnreg.inc waits until the CTA's pool has the registers, and a first try at
 * 216 and 80 at 128 rows (1024 short) hung there. */
#ifdef DEC_WG_CONSUMER_REGS
static constexpr int DEC_WG_LAUNCH_REGS = 65536 / DEC_WG_THREADS / 8 * 8;
static_assert(DEC_WG_THREADS % 128 == 0 && DEC_WG_CT * (DEC_WG_CONSUMER_REGS - DEC_WG_LAUNCH_REGS) <=
                                             DEC_WG_HELPERS * (DEC_WG_LAUNCH_REGS - DEC_WG_HELPER_REGS),
              ".wg setmaxnreg: whole warpgroups, and the consumers take no more registers than the helpers give back");
#endif
static constexpr int DEC_WG_NT = DEC_BN / 8;                    /* n8 tiles of S */
static constexpr int DEC_WG_PK = DEC_BN / 16;                   /* k16 steps of P V */
static constexpr int DEC_WG_KS = DEC_D / 16;                    /* k16 steps of Q K^T */
static_assert(DEC_PAGE_SIZE == 0 && !DEC_IN_KERNEL_MERGE, ".wg reads contiguous K/V and merges its splits by the combine kernel");
static_assert(!DEC_KV8 || (DEC_F16_MMA && DEC_D % 128 == 0), ".wg KV8: f16 MMAs, whole 128-byte FP8 column blocks");
static_assert(DEC_D % 64 == 0, ".wg: 128-byte column blocks of K and V rows");
static_assert(DEC_BN == 64 || DEC_BN == 128, ".wg: BLOCK_N 64 or 128");
static_assert(DEC_STAGES >= 3, ".wg: tile t-1's V, tile t and at least one tile in flight");
static_assert(DEC_W * 16 == DEC_WG_ROWS, ".wg: one warpgroup (4 warps) per 64 packed rows");
static_assert(DEC_WG_KSPLIT == 1 || ((DEC_WG_KSPLIT == 2 || DEC_WG_KSPLIT == 3) && DEC_W == 4),
              ".wgi: two (or three) warpgroups for one warpgroup's 64 rows");
static_assert(DEC_WG_KSPLIT < 3 || DEC_WG_K8, ".wgi3: with K8 only (Q K^T on the FP8 tensor cores; the registers)");
/* A count that is not a multiple of the warpgroups would hand a stage to two of them in turn, and
 * one could wait for a phase parity two phases ahead of the stage's and pass at once. */
static_assert(DEC_STAGES % DEC_WG_KSPLIT == 0, ".wgi: whole turns of stages (each stage one warpgroup's)");
/* K8: after the mbarriers, one count a staging slot of the warps that issued its tile's P V (below) */
static_assert(8 * (2 * DEC_WG_RING + DEC_STAGES) + (DEC_WG_K8 ? 4 * DEC_STAGES : 0) + 8 <= DEC_WG_BAR_BYTES,
              ".wg: the mbarriers (and K8's counts, and Q's barrier in the area's last 8 bytes) fit their area");
/* Each ring stage one warpgroup's. Until step 24 a K8 warpgroup's first thread waited on the
 * stage's empty barrier for its own warps' release before it refilled the slot, and where another
 * warpgroup used the stage next, that thread, late to its wait, could see two phases complete and
 * wait for a third that needed its own warpgroup: a deadlock (tests/decode_wgi_protocol.py found it
 * for .wgi3 with 9 slots and a ring of 4, which step 22 had listed). Step 24's refill waits on no
 * barrier, and the rule stays: every listed form is one the model and the GPU have run. */
static_assert(DEC_WG_RING % DEC_WG_KSPLIT == 0, ".wgi: each ring stage one warpgroup's");
static_assert(DEC_WG_SMEM_BYTES <= DEC_SMEM_LIMIT, "shared memory over the target's limit");
static_assert(!DEC_WG_K8 || (DEC_KV8 && DEC_Q_TO_F16 && DEC_WG_SEQ && DEC_D == 128 && !DEC_WG_QREG),
              ".wgi K8: bf16 Q, FP8 K/V, two consumer warpgroups, D 128 (one 128-byte FP8 block a key)");
/* .wgi3: three consumer warpgroups do not have the registers for Q's E4M3 parts (32 a thread: the
 * consumer code spilled 84-88 bytes under setmaxnreg 152 and 160 with them), so the first
 * warpgroup writes them over bf16 Q in shared memory, 8 KB each, and Q K^T reads them there. */
#define DEC_WG_Q8_SMEM (DEC_WG_K8 && DEC_WG_KSPLIT == 3)
static constexpr int DEC_WG_Q8_PART = 64 * DEC_D;
static_assert(!DEC_WG_Q8_SMEM || 2 * DEC_WG_Q8_PART <= DEC_WG_Q_BYTES, ".wgi3: Q's two E4M3 parts fit bf16 Q's room");

/* A K or V tile of BLOCK_N keys from key0: one TMA box of 128 bytes (64 16-bit or 128 FP8
 * elements) by BLOCK_N keys per column block, in the 128-byte swizzle at_swz_off describes. */
__device__ __forceinline__ void dec_wg_tma_tile(unsigned dst, const at_tmap *map, int key0, int head, int b,
                                                unsigned bar)
{
  constexpr int PER_BOX = 128 / DEC_KV_ESIZE;
  /* Step 34: each 16-bit K/V line is read once a call, so it goes first from L2, before the
   * partials the combine reads back and that would otherwise be written to HBM under the next
   * stream. Not FP8's: .wgi3 at S64k lost 1.2% under the policy with 256-byte promotions, and
   * with step 37's 128 bytes it still splits (GQA 8 T8 S16k-32k +1.5-1.9%, GQA 4 T16 S32k-64k
   * -0.3 to -0.8%; docs/perf.md, "Thirty-seventh session"). */
  const unsigned long long policy = DEC_KV8 ? 0ull : at_l2_evict_first();
#pragma unroll
  for (int c = 0; c < DEC_D / PER_BOX; c++) {
    if constexpr (DEC_KV8) at_tma_load(dst + c * DEC_BN * 128, map, c * PER_BOX, key0, head, b, bar);
    else at_tma_load_hint(dst + c * DEC_BN * 128, map, c * PER_BOX, key0, head, b, bar, policy);
  }
}

/* Q's packed rows by TMA (step 33): the map views Q as (D, heads, seq, B), so a box of G heads by
 * BLOCK_M tokens lands as rows r = t_local * G + g, the packed order; tokens past T read 0. One
 * box a 128-byte column block, into Q's column blocks of DEC_WG_ROWS rows. */
__device__ __forceinline__ void dec_wg_tma_q(unsigned smem_q, const at_tmap *map, int hk, int t0, int b, unsigned bar)
{
  at_bar_expect(bar, DEC_ROWS * DEC_WG_ROWB);
#pragma unroll
  for (int c = 0; c < DEC_D / 64; c++) at_tma_load(smem_q + c * DEC_WG_ROWS * 128, map, c * 64, hk * DEC_G, t0, b, bar);
}

/* Issue S = Q K^T for this warpgroup's 64 rows (not waited for): 16-element (32-byte) k steps
 * inside each column block; with DEC_WG_QREG Q's fragments come from registers (qf). */
__device__ __forceinline__ void dec_wg_issue_qk(float (*s)[4], unsigned q_wg, unsigned k_tile,
                                                const unsigned (*qf)[4])
{
  (void)qf;
  const unsigned long long dq = at_wgmma_desc<128>(q_wg), dk = at_wgmma_desc<128>(k_tile);
#pragma unroll
  for (int ks = 0; ks < DEC_WG_KS; ks++) {
    const int col = 32 * ks;
    const unsigned qa = (unsigned)((col / 128) * DEC_WG_ROWS * 128 + col % 128);
    const unsigned kb = (unsigned)((col / 128) * DEC_BN * 128 + col % 128);
#if DEC_WG_QREG
    (void)qa, (void)dq;
    dec_mma_qk_rs(&s[0][0], qf[ks], at_wgmma_desc_advance(dk, kb), ks > 0);
#else
    dec_mma_qk(&s[0][0], at_wgmma_desc_advance(dq, qa), at_wgmma_desc_advance(dk, kb), ks > 0);
#endif
  }
  at_wgmma_commit();
}

#if DEC_WG_K8
/* Issue S = Q K^T on the FP8 tensor cores (not waited for): k32 steps of 32 bytes along the
 * staged FP8 K rows, the high parts of Q first, then the low parts into the same S. */
#if !DEC_WG_Q8_SMEM
__device__ __forceinline__ void dec_wg_issue_qk8(float (*s)[4], unsigned k_stg, const unsigned (*qh)[4],
                                                 const unsigned (*ql)[4])
{
  const unsigned long long dk = at_wgmma_desc<128>(k_stg);
#pragma unroll
  for (int ks = 0; ks < DEC_D / 32; ks++) dec_mma_qk8(&s[0][0], qh[ks], at_wgmma_desc_advance(dk, 32 * ks), ks > 0);
#pragma unroll
  for (int ks = 0; ks < DEC_D / 32; ks++) dec_mma_qk8(&s[0][0], ql[ks], at_wgmma_desc_advance(dk, 32 * ks), 1);
  at_wgmma_commit();
}
#else
/* .wgi3: the same with Q's two E4M3 parts read from shared memory (DEC_WG_Q8_SMEM: 64 rows of
 * 128 bytes each, hi at q8, lo 8 KB after it, in the 128-byte swizzle). */
__device__ __forceinline__ void dec_wg_issue_qk8_ss(float (*s)[4], unsigned k_stg, unsigned q8)
{
  const unsigned long long dq = at_wgmma_desc<128>(q8), dk = at_wgmma_desc<128>(k_stg);
#pragma unroll
  for (int part = 0; part < 2; part++)
#pragma unroll
    for (int ks = 0; ks < DEC_D / 32; ks++)
      dec_mma_qk8_ss(&s[0][0], at_wgmma_desc_advance(dq, part * DEC_WG_Q8_PART + 32 * ks),
                     at_wgmma_desc_advance(dk, 32 * ks), part > 0 || ks > 0);
  at_wgmma_commit();
}
#endif

/* K8: the count of slot `count` goes up by one for this warp; true for the fourth warp of a tile
 * (the count runs on: every tile adds four). */
__device__ __forceinline__ bool dec_wg_last_of_four(unsigned count)
{
  unsigned old;
  asm volatile("atom.shared.add.u32 %0, [%1], 1;\n" : "=r"(old) : "r"(count) : "memory");
  return (old & 3u) == 3u;
}

/* Two floats as an E4M3 pair (lo in the low byte), and the pair back as floats. */
__device__ __forceinline__ unsigned dec_e4m3x2(float lo, float hi)
{
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ void dec_e4m3x2_value(unsigned pair, float &lo, float &hi)
{
  asm("{\n.reg .b32 h2;\n.reg .b16 l, h, p;\ncvt.u16.u32 p, %2;\ncvt.rn.f16x2.e4m3x2 h2, p;\n"
      "mov.b32 {l, h}, h2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}"
      : "=f"(lo), "=f"(hi)
      : "r"(pair));
}

/* This warp's 16 rows of bf16 Q as E4M3 A fragments of Q K^T (k32: register r holds row g + 8(r %
 * 2), k slots 16(r / 2) + 4t .. +3, one byte each): q 2^e = hi + lo, both E4M3, with 2^e putting
 * the rows' largest |q| in [2^7, 2^8) (under E4M3's 448). Exact for bf16: hi keeps 4 of q's 8
 * significant bits, the rest (at most 4, 2^-4 of hi or less) is lo, while |q 2^e| >= 2^-2 (2^-9
 * of the largest); smaller elements are at most 2^-10 off, where lo meets E4M3's smallest
 * subnormal (tests/test_fp8.c checks every bf16 value). Returns e. */
template <class Addr>
__device__ __forceinline__ int dec_wg_q8_fragments(Addr q_at, int lane, unsigned (*qh)[4], unsigned (*ql)[4])
{
  const int e = dec_q_exponent<16>([&](int r, int c) { return q_at(r, 16 * c); }, lane) - 7;
  const float up = __int_as_float((127 + e) << 23);
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int ks = 0; ks < DEC_D / 32; ks++)
#pragma unroll
    for (int r = 0; r < 4; r++) {
      unsigned w0, w1; /* 4 bf16: d = 32ks + 16(r / 2) + 4t .. +3 */
      dec_ld_shared_u2(q_at(g + 8 * (r % 2), 2 * (32 * ks + 16 * (r / 2) + 4 * tq)), w0, w1);
      const float x[4] = {__uint_as_float(w0 << 16) * up, __uint_as_float(w0 & 0xffff0000u) * up,
                          __uint_as_float(w1 << 16) * up, __uint_as_float(w1 & 0xffff0000u) * up};
      const unsigned h01 = dec_e4m3x2(x[0], x[1]), h23 = dec_e4m3x2(x[2], x[3]);
      float v[4];
      dec_e4m3x2_value(h01, v[0], v[1]);
      dec_e4m3x2_value(h23, v[2], v[3]);
      qh[ks][r] = h01 | h23 << 16;
      ql[ks][r] = dec_e4m3x2(x[0] - v[0], x[1] - v[1]) | dec_e4m3x2(x[2] - v[2], x[3] - v[3]) << 16;
    }
  return e;
}

/* .wgi3: a warp's fragments from dec_wg_q8_fragments into shared memory at q8 (hi) and q8 + 8 KB
 * (lo), where Q K^T's wgmmas read them: register r of k step ks is row row0 + g + 8(r % 2), bytes
 * 32ks + 16(r / 2) + 4t .. +3. */
__device__ __forceinline__ void dec_wg_q8_store(unsigned q8, int row0, int lane, const unsigned (*qh)[4],
                                                const unsigned (*ql)[4])
{
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int ks = 0; ks < DEC_D / 32; ks++)
#pragma unroll
    for (int r = 0; r < 4; r++) {
      const unsigned at = q8 + at_swz_off<64, 128>(row0 + g + 8 * (r % 2), 32 * ks + 16 * (r / 2) + 4 * tq);
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(qh[ks][r]) : "memory");
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at + DEC_WG_Q8_PART), "r"(ql[ks][r]) : "memory");
    }
}
#endif

/* Issue O += P V (not waited for): k step kk is keys 16kk .. 16kk+15, 16 rows of 128 bytes down
 * V's column blocks. */
__device__ __forceinline__ void dec_wg_issue_pv(float (*acc)[4], const unsigned (*p)[4], unsigned v_tile)
{
  const unsigned long long dv = at_wgmma_desc_mn<DEC_BN * 128>(v_tile);
#pragma unroll
  for (int kk = 0; kk < DEC_WG_PK; kk++) dec_mma_pv(&acc[0][0], p[kk], at_wgmma_desc_advance(dv, kk * 16 * 128));
  at_wgmma_commit();
}

/* The producer (lane 0 of the last warp): every K/V tile of the split into the ring, a stage
 * once every consumer warp has released it. */
__device__ __forceinline__ void dec_wg_produce(const at_tmap *tm_k, const at_tmap *tm_v, unsigned smem_k,
                                               unsigned smem_v, unsigned bar_full, unsigned bar_empty,
                                               unsigned bar_vfull, int n_tiles, int k_lo, int hk, int b)
{
  int stage = 0;
  unsigned phase = 0;
  for (int t = 0; t < n_tiles; t++) {
    at_bar_wait(bar_empty + 8 * stage, phase ^ 1u); /* a fresh barrier passes: the ring's first pass */
    const unsigned v_bar = DEC_WG_VFULL ? bar_vfull + 8 * stage : bar_full + 8 * stage;
    at_bar_expect(bar_full + 8 * stage, (DEC_WG_VFULL ? 1 : 2) * DEC_WG_KV_BYTES);
    dec_wg_tma_tile(smem_k + stage * DEC_WG_KV_BYTES, tm_k, k_lo + t * DEC_BN, hk, b, bar_full + 8 * stage);
    if (DEC_WG_VFULL) at_bar_expect(v_bar, DEC_WG_KV_BYTES);
    dec_wg_tma_tile(smem_v + stage * DEC_WG_KV_BYTES, tm_v, k_lo + t * DEC_BN, hk, b, v_bar);
    if (++stage == DEC_STAGES) stage = 0, phase ^= 1u;
  }
}

#if DEC_KV8
/* KV8: an FP8 tile from staging into an f16 tile of the ring. Item idx is 16-byte FP8 chunk c of
 * key r (16 elements, two f16 chunks); 8 consecutive items take one chunk of 8 consecutive keys,
 * so a quarter warp's loads and stores each fall in 8 distinct 16-byte bank groups. */
__device__ __forceinline__ void dec_wg_widen_tile(unsigned dst, unsigned src, int wtid)
{
  constexpr int DCH = DEC_D / 16; /* FP8 chunks per key */
  constexpr int ITEMS = DEC_BN * DCH;
  static_assert(ITEMS % 128 == 0, "whole items per widening thread");
#if DEC_WG_KSPLIT == 3
  /* .wgi3's one widener (V alone: 4 chunks a thread): the thread's loads first, so that their
   * latencies overlap (B8 S64k T8 GQA 8: 156.7 -> 151.5 us; with .wgi's two wideners 2% slower) */
  unsigned wl[ITEMS / 128][4];
#pragma unroll
  for (int i = 0; i < ITEMS / 128; i++) {
    const int idx = wtid + 128 * i;
    dec_ld_shared_u4(src + at_swz_off<DEC_BN, 128>((idx & 7) + 8 * (idx / (8 * DCH)), 16 * ((idx >> 3) % DCH)), wl[i]);
  }
#endif
#pragma unroll
  for (int i = 0; i < ITEMS / 128; i++) {
    const int idx = wtid + 128 * i;
    const int c = (idx >> 3) % DCH, r = (idx & 7) + 8 * (idx / (8 * DCH));
#if DEC_WG_KSPLIT == 3
    unsigned h[8];
    const unsigned *w = wl[i];
#else
    unsigned w[4], h[8];
    dec_ld_shared_u4(src + at_swz_off<DEC_BN, 128>(r, 16 * c), w);
#endif
#pragma unroll
    for (int j = 0; j < 4; j++) h[2 * j] = dec_kv_pair<0, 1>(w[j]), h[2 * j + 1] = dec_kv_pair<2, 3>(w[j]);
    dec_st_shared_u4(dst + at_swz_off<DEC_BN, 128>(r, 32 * c), h);
    dec_st_shared_u4(dst + at_swz_off<DEC_BN, 128>(r, 32 * c + 16), h + 4);
  }
}

#if DEC_KV8
/* KV8: tile t's FP8 K and V into staging slot s (TMA, completing on the slot's "staged" mbarrier). */
__device__ __forceinline__ void dec_wg_stage_in(const at_tmap *tm_k, const at_tmap *tm_v, unsigned stg,
                                                unsigned bar_staged, int t, int s, int k_lo, int hk, int b)
{
  at_bar_expect(bar_staged + 8 * s, 2 * DEC_WG_STG_BYTES);
  dec_wg_tma_tile(stg + (2 * s) * DEC_WG_STG_BYTES, tm_k, k_lo + t * DEC_BN, hk, b, bar_staged + 8 * s);
  dec_wg_tma_tile(stg + (2 * s + 1) * DEC_WG_STG_BYTES, tm_v, k_lo + t * DEC_BN, hk, b, bar_staged + 8 * s);
}
#endif

/* KV8: the widening warpgroup (wtid 0..127). Thread 0 keeps STAGES FP8 tiles in flight into the
 * staging ring; all widen tile t once its FP8 bytes landed and the consumers freed its ring stage,
 * fence their stores to the async proxy, meet at named barrier 2, and thread 0 announces the
 * stage and refills the staging slot with tile t + STAGES. */
__device__ __forceinline__ void dec_wg_widen(const at_tmap *tm_k, const at_tmap *tm_v, unsigned smem_k,
                                             unsigned smem_v, unsigned stg, unsigned bar_full, unsigned bar_empty,
                                             unsigned bar_staged, int n_tiles, int k_lo, int hk, int b, int wtid,
                                             int wi)
{
  const auto stage_in = [&](int t, int s) { dec_wg_stage_in(tm_k, tm_v, stg, bar_staged, t, s, k_lo, hk, b); };
  if (wtid == 0)
    for (int t = 0; t < DEC_STAGES && t < n_tiles; t++)
      if (t % DEC_WG_WIDENERS == wi) stage_in(t, t);
  int stage = wi; /* wi < STAGES */
  unsigned phase = 0;
  for (int t = wi; t < n_tiles; t += DEC_WG_WIDENERS) {
    if (DEC_WG_WIDENERS > 1) stage = t % DEC_STAGES, phase = (unsigned)(t / DEC_STAGES) & 1u;
    /* the ring stage (K8: its own count; else the staging slot's) */
    const int r = DEC_WG_RING == DEC_STAGES ? stage : t % DEC_WG_RING;
    const unsigned rphase = DEC_WG_RING == DEC_STAGES ? phase : (unsigned)(t / DEC_WG_RING) & 1u;
    at_bar_wait(bar_staged + 8 * stage, phase);
    at_bar_wait(bar_empty + 8 * r, rphase ^ 1u);
    if (!DEC_WG_K8) dec_wg_widen_tile(smem_k + r * DEC_WG_KV_BYTES, stg + (2 * stage) * DEC_WG_STG_BYTES, wtid);
    dec_wg_widen_tile(smem_v + r * DEC_WG_KV_BYTES, stg + (2 * stage + 1) * DEC_WG_STG_BYTES, wtid);
    at_fence_async_smem();
#if DEC_WG_KSPLIT == 3
    /* .wgi3: each widening warp announces its own quarter of the tile (the full barrier counts 4
     * arrivals), in place of a named barrier of the 128 and one arrival (step 22b: B8 S64k GQA 8
     * T8 145.7 -> 143.7 us at 9 slots, 148.0 -> 143.2 at 6; GQA 4 T16 282.0 -> 274.8) */
    __syncwarp();
    if ((wtid & 31) == 0) at_bar_arrive(bar_full + 8 * r);
#else
    if (DEC_WG_WIDENERS == 1) asm volatile("bar.sync 2, 128;\n" ::: "memory");
    else asm volatile("bar.sync %0, 128;\n" ::"r"(2 + 4 * wi) : "memory"); /* 2, and 6 for the second */
    if (wtid == 0) {
      at_bar_arrive(bar_full + 8 * r);
      /* K8: the consumers refill the slot once done with tile t's K (their loop) */
      if (!DEC_WG_K8 && t + DEC_STAGES < n_tiles) stage_in(t + DEC_STAGES, stage);
    }
#endif
    if (DEC_WG_WIDENERS == 1 && ++stage == DEC_STAGES) stage = 0, phase ^= 1u;
  }
}
#endif

extern "C" __global__ void __launch_bounds__(DEC_WG_THREADS, 1)
DEC_KERNEL(const at_in_t *__restrict__ q, const dec_kv_t *__restrict__ k, const dec_kv_t *__restrict__ v,
           at_out_t *__restrict__ o, float *__restrict__ lse, float *__restrict__ o_part,
           float *__restrict__ lse_part, int T, int S, int n_splits, int keys_per_split, float scale_log2,
           long long q_sb, int q_ss, int q_sh, long long k_sb, int k_ss, int k_sh, long long v_sb,
           int v_ss, int v_sh, long long o_sb, int o_ss, int o_sh, const float *__restrict__ descale_k,
           const float *__restrict__ descale_v, int *__restrict__ split_counters,
           const __grid_constant__ at_tmap tm_q, const __grid_constant__ at_tmap tm_k,
           const __grid_constant__ at_tmap tm_v)
{
  (void)split_counters, (void)k, (void)v, (void)k_sb, (void)k_ss, (void)k_sh, (void)v_sb, (void)v_ss, (void)v_sh;
  (void)q, (void)q_sb, (void)q_ss, (void)q_sh;
  float o_descale = 1.f;

  extern __shared__ __align__(128) unsigned char dec_smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = warp / 4;
  const int split = blockIdx.x, b = blockIdx.z;
  const int n_tb = (T + DEC_BM - 1) / DEC_BM;
  const int n_kv = gridDim.y / n_tb;
  const int hk = blockIdx.y % n_kv, tb = blockIdx.y / n_kv;
  const int n_q = n_kv * DEC_G;
  const int t0 = tb * DEC_BM;
  const int k_lo = split * keys_per_split;
  const int offset = DEC_MASK == AT_MASK_CAUSAL_BR ? S - T : 0;
  const dec_keys keys = dec_split_keys(k_lo, keys_per_split, S, T, t0, offset);

  /* Tiles on 1024-byte boundaries (the swizzle atoms' alignment), the mbarriers after them. */
  const unsigned smem_q = (at_smem_addr(dec_smem) + 1023u) & ~1023u;
  const unsigned smem_k = smem_q + DEC_WG_Q_BYTES;
  const unsigned smem_v = smem_k + (DEC_WG_RINGS - 1) * DEC_WG_RING * DEC_WG_KV_BYTES; /* K8: no K ring */
  const unsigned stg = smem_v + DEC_WG_RING * DEC_WG_KV_BYTES; /* KV8: STAGES x (FP8 K, FP8 V) */
  const unsigned bar_full = stg + 2 * DEC_STAGES * DEC_WG_STG_BYTES, bar_empty = bar_full + 8 * DEC_WG_RING;
  const unsigned bar_staged = bar_empty + 8 * DEC_WG_RING;
  const unsigned slot_count = bar_staged + 8 * DEC_STAGES; /* K8: the slots' counts */
  const unsigned bar_q = bar_full + DEC_WG_BAR_BYTES - 8;   /* Q's rows landed */
  (void)stg, (void)bar_staged, (void)slot_count;
  if (tid == 0) {
    for (int s = 0; s < DEC_WG_RING; s++) {
      at_bar_init(bar_full + 8 * s, DEC_WG_KSPLIT == 3 ? 4 : 1); /* .wgi3: one arrival per widening warp */
      at_bar_init(bar_empty + 8 * s, DEC_W); /* one arrival per consumer warp (.wgi: of the tile's warpgroup) */
    }
    for (int s = 0; (DEC_KV8 || DEC_WG_VFULL) && s < DEC_STAGES; s++) at_bar_init(bar_staged + 8 * s, 1);
    for (int s = 0; DEC_WG_K8 && s < DEC_STAGES; s++)
      asm volatile("st.shared.u32 [%0], 0;\n" ::"r"(slot_count + 4 * s) : "memory");
    at_bar_init(bar_q, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  /* As above (step 27: the wait below the arithmetic and the mbarriers' set-up, before any copy) */
  dec_inputs_ready<true>(true, descale_k, descale_v, scale_log2, o_descale);
  /* The mbarriers are initialized; from here on no CTA-wide barrier. */
  __syncthreads();
  /* Q (step 33): the producer's (or widening warpgroup's) first thread loads Q's packed rows by TMA
   * ahead of its first K/V tile; padding rows past G * BLOCK_M the consumers zero (generic stores,
   * published with Q below). Until step 32 the consumers copied Q by cp.async (eight 16-byte chunks
   * a thread), and the producer's first copies waited for those to be issued. */
  if (tid == DEC_WG_CT) dec_wg_tma_q(smem_q, &tm_q, hk, t0, b, bar_q);
  if (DEC_ROWS < DEC_WG_ROWS && warp < DEC_W) {
    constexpr int PAD = (DEC_WG_ROWS - DEC_ROWS) * DEC_WG_CPR; /* 16-byte chunks */
    for (int i = tid; i < PAD; i += DEC_THREADS) {
      const int r = DEC_ROWS + i / DEC_WG_CPR, c = i % DEC_WG_CPR;
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(smem_q + at_swz_off<DEC_WG_ROWS, 128>(r, 16 * c)),
                   "r"(0u)
                   : "memory");
    }
  }
  if (tid >= DEC_WG_CT) {
#ifdef DEC_WG_CONSUMER_REGS
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(DEC_WG_HELPER_REGS));
#endif
#if DEC_KV8
    dec_wg_widen(&tm_k, &tm_v, smem_k, smem_v, stg, bar_full, bar_empty, bar_staged, keys.n_tiles, k_lo, hk, b,
                 DEC_WG_WIDENERS == 1 ? tid - DEC_WG_CT : (tid - DEC_WG_CT) % 128,
                 DEC_WG_WIDENERS == 1 ? 0 : (tid - DEC_WG_CT) / 128);
#else
    if (lane == 0)
      dec_wg_produce(&tm_k, &tm_v, smem_k, smem_v, bar_full, bar_empty, bar_staged, keys.n_tiles, k_lo, hk, b);
#endif
    return;
  }
#ifdef DEC_WG_CONSUMER_REGS
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(DEC_WG_CONSUMER_REGS));
#endif
  /* this warp's first packed row (warpgroup wg: 64wg + 16 (warp % 4); .wgi: both warpgroups 16 (warp % 4)) */
  const int row0 = 16 * (DEC_WG_SEQ ? warp % DEC_W : warp);
  /* .wgi: tiles turn, turn + KSPLIT, ... The warpgroup's index broadcast from lane 0, so that ptxas
   * keeps Q's wgmma descriptors in uniform registers (fa3 v23). */
  const int wg_u = __shfl_sync(0xffffffffu, wg, 0);
  const int turn = DEC_WG_SEQ ? wg_u : 0, rwg = DEC_WG_SEQ ? 0 : wg_u;
  at_bar_wait(bar_q, 0); /* Q landed; the padding rows' zeros go to the async proxy, then to every consumer */
#if DEC_WG_K8
  /* K8: each warp's 16 rows as two E4M3 parts of q * 2^e (registers; Q in shared memory stays
   * bf16), its scores scaled back by 2^-e */
  unsigned qh[DEC_D / 32][4], ql[DEC_D / 32][4];
  asm volatile("bar.sync 1, %0;\n" ::"n"(DEC_WG_CT) : "memory"); /* the padding rows' zeros too */
  scale_log2 *= __int_as_float(
      (127 - dec_wg_q8_fragments([&](int r, int col) { return smem_q + at_swz_off<DEC_WG_ROWS, 128>(row0 + r, col); },
                                 lane, qh, ql))
      << 23);
#if DEC_WG_Q8_SMEM
  asm volatile("bar.sync 1, %0;\n" ::"n"(DEC_WG_CT) : "memory"); /* every warp is done with bf16 Q */
  if (turn == 0) dec_wg_q8_store(smem_q, row0, lane, qh, ql);
#endif
#elif DEC_Q_TO_F16
  { /* bf16 Q with FP8 K/V: each warp's rows as f16 q * 2^e, its scores scaled back by 2^-e */
    asm volatile("bar.sync 1, %0;\n" ::"n"(DEC_WG_CT) : "memory"); /* the padding rows' zeros too */
    const auto q_chunk = [&](int r, int c) { return smem_q + at_swz_off<DEC_WG_ROWS, 128>(row0 + r, 16 * c); };
    const int e = dec_q_exponent<16>(q_chunk, lane);
    if (DEC_WG_SEQ) asm volatile("bar.sync 1, %0;\n" ::"n"(DEC_WG_CT) : "memory"); /* both read e from bf16 Q */
    if (turn == 0) dec_q_rows_to_f16<16>(q_chunk, lane, e); /* .wgi: the first warpgroup rewrites the rows */
    scale_log2 *= __int_as_float((127 - e) << 23);
  }
#endif
  at_fence_async_smem();
  asm volatile("bar.sync 1, %0;\n" ::"n"(DEC_WG_CT) : "memory");

  const int g = lane >> 2, tq = lane & 3;
  const unsigned q_wg = smem_q + (unsigned)(rwg * 64 * 128);
  /* DEC_WG_QREG: this warp's 16 rows of Q as wgmma A fragments */
  unsigned qf[DEC_WG_QREG ? DEC_WG_KS : 1][4];
#if DEC_WG_QREG
  at_load_a_frags<DEC_WG_ROWS, 128, DEC_WG_KS>(qf, smem_q, row0, lane);
#endif
  int tok[2];
#pragma unroll
  for (int half = 0; half < 2; half++) tok[half] = t0 + (row0 + g + half * 8) / DEC_G;

  float acc[DEC_OT][4];
  float row_max[2] = {AT_NEG_INF, AT_NEG_INF}, row_sum[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < DEC_OT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  /* P of the previous tile: the A operand of its P V, in flight under this tile's softmax. Zero
   * before the first tile, whose P V of nothing (0 times tile 0's V, finite) keeps the loop free
   * of branches around its wgmmas: ptxas serialized every wgmma of the kernel where a P V was
   * issued and waited for under conditions. */
  unsigned p[DEC_WG_PK][4];
#pragma unroll
  for (int kk = 0; kk < DEC_WG_PK; kk++) p[kk][0] = p[kk][1] = p[kk][2] = p[kk][3] = 0u;
  int stage = turn, stage_prev = turn; /* the first P V (of nothing) reads a landed stage */
  unsigned phase = 0;
  /* DEC_WG_VFULL: the phase of stage_prev's V. The P V of nothing reads Q, and its wait is on
   * tile 0's K barrier, phase 0, which this thread has just seen complete and which cannot move
   * on before this CTA releases the stage: it passes at once. (A wait for parity 1 of the fresh V
   * barrier passed only while tile 0's V had not yet landed; once it had, it waited for tile
   * STAGES's V, which needs this stage released: the first build hung.) */
  unsigned phase_prev = 0;
  /* Two warpgroups (128 rows): ping-pong. Each issues its tile's wgmmas in turn (named barriers
   * 3 + wg: wait for this warpgroup's turn, then hand the turn over), so one's softmax runs under
   * the other's MMAs; warpgroup 1 hands warpgroup 0 the first turn. Every wait has its arrival:
   * warpgroup 1 hands over after all but its last tile. */
  if (DEC_WG_PINGPONG && wg == 1) asm volatile("bar.arrive 3, 256;\n" ::: "memory");
#pragma unroll 1
  for (int t = turn; t < keys.n_tiles; t += DEC_WG_KSPLIT) {
    if (DEC_WG_SEQ) stage = t % DEC_STAGES, phase = (unsigned)(t / DEC_STAGES) & 1u;
    /* K8: the ring stage has its own count (stage is then the staging slot); else the same */
    const int r = DEC_WG_RING == DEC_STAGES ? stage : t % DEC_WG_RING;
    const unsigned rphase = DEC_WG_RING == DEC_STAGES ? phase : (unsigned)(t / DEC_WG_RING) & 1u;
    /* K8, step 26: Q K^T needs only the staged K, so the wait for the widened V is down at P V,
     * and the widening of tile t runs under this tile's Q K^T and softmax. */
    if (!DEC_WG_K8) at_bar_wait(bar_full + 8 * r, rphase); /* tile t landed */

    /* S = Q K^T of tile t; once it is in and masked, O += P V of tile t-1, so that the softmax
     * below runs under P V and only O's rescale waits for it (step 16). Issued right behind Q K^T,
     * before the mask (a branch), P V ran under nothing: ptxas put the wait for it
     * (WARPGROUP.DEPBAR.LE gsb0, 0x0) right after that branch, ahead of the softmax. Measured,
     * B8 S64k causal-br: e4m3 64 rows 192 -> 177 us; 128 rows, with step 17, bf16 267.3 -> 260.7
     * (step 16b). scripts/wgmma_sass.sh counts the exponentials under P V. */
    float s[DEC_WG_NT][4];
    if (DEC_WG_PINGPONG) asm volatile("bar.sync %0, 256;\n" ::"r"(3 + wg) : "memory");
#if DEC_WG_K8
    at_bar_wait(bar_staged + 8 * stage, phase); /* K as TMA staged it */
#endif
    at_wgmma_fence();
#if DEC_WG_Q8_SMEM
    (void)q_wg, (void)qf;
    dec_wg_issue_qk8_ss(s, stg + (2 * stage) * DEC_WG_STG_BYTES, smem_q);
#elif DEC_WG_K8
    (void)q_wg, (void)qf;
    dec_wg_issue_qk8(s, stg + (2 * stage) * DEC_WG_STG_BYTES, qh, ql);
#else
    dec_wg_issue_qk(s, q_wg, smem_k + stage * DEC_WG_KV_BYTES, qf);
#endif
    if (DEC_WG_PINGPONG && (wg == 0 || t + 1 < keys.n_tiles))
      asm volatile("bar.arrive %0, 256;\n" ::"r"(4 - wg) : "memory");
    at_wgmma_wait0(); /* S is in */

    const int j0 = k_lo + t * DEC_BN;
    if (t >= keys.n_full) {
#pragma unroll
      for (int nt = 0; nt < DEC_WG_NT; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int j = j0 + nt * 8 + 2 * tq + (e & 1);
          if (j >= keys.hi || (DEC_CAUSAL && !at_visible(DEC_MASK, tok[e >> 1], j, offset))) s[nt][e] = AT_NEG_INF;
        }
    }
#if DEC_WG_KSPLIT > 1
    /* .wgi. Step 20: the speculative max (only here, where P V is waited for within its tile; in
     * .wg tile t-1's P V still reads p while the softmax runs): the exact step only where the
     * warp's rows need it, and O's rescale only after it (alpha 1 otherwise). Then P V of this
     * tile, and its stage back to the producer. */
    float alpha[2] = {1.f, 1.f};
    if (!dec_softmax_spec<DEC_WG_NT>(s, row_max, row_sum, scale_log2, p)) {
#pragma unroll
      for (int half = 0; half < 2; half++)
        alpha[half] = dec_softmax_half_to_p<DEC_WG_NT>(s, half, row_max[half], row_sum[half], scale_log2, p);
    }
    at_rescale_o<DEC_OT, true>(acc, alpha);
    if (DEC_WG_K8) at_bar_wait(bar_full + 8 * r, rphase); /* tile t's V widened */
    at_wgmma_fence();
    dec_wg_issue_pv(acc, p, smem_v + r * DEC_WG_KV_BYTES);
#if DEC_WG_K8
    /* K8 (step 24): the slot is free once the warpgroup's four warps are past Q K^T (K read) and
     * the widener has widened its V (the full barrier waited for above): the last of the four to
     * count itself here, under P V, refills it with tile t + STAGES (this warpgroup's too). Where
     * the first thread waited for that (step 21b, a second mbarrier) the wait held warp 0's
     * softmax: 8-12% slower; a count waits for no one. */
    if (lane == 0 && dec_wg_last_of_four(slot_count + 4 * stage) && t + DEC_STAGES < keys.n_tiles)
      dec_wg_stage_in(&tm_k, &tm_v, stg, bar_staged, t + DEC_STAGES, stage, k_lo, hk, b);
#endif
    at_wgmma_wait0();
    if (lane == 0) at_bar_arrive(bar_empty + 8 * r);
#else
    if (DEC_WG_VFULL) /* tile t-1's V landed */
      at_bar_wait(t == 0 ? bar_full + 8 * stage : bar_staged + 8 * stage_prev, phase_prev);
    at_wgmma_fence();
    dec_wg_issue_pv(acc, p, DEC_WG_VFULL && t == 0 ? smem_q : smem_v + stage_prev * DEC_WG_KV_BYTES);

    /* Online softmax (dec_softmax_half); O's rescale by alpha after tile t-1's P V is in O. */
    float alpha[2];
#pragma unroll
    for (int half = 0; half < 2; half++)
      alpha[half] = dec_softmax_half<DEC_WG_NT>(s, half, row_max[half], row_sum[half], scale_log2);
    at_wgmma_wait0(); /* P V of tile t-1 is in O: its stage goes back to the producer */
    if (t > 0 && lane == 0) at_bar_arrive(bar_empty + 8 * stage_prev);
    /* Two consumer warpgroups skip the multiplies where alpha is 1 for all 16 rows of the warp
     * (DEC_WG_SKIP_RESCALE, step 17; the branch comes after every wgmma is waited for). */
    at_rescale_o<DEC_OT, DEC_WG_SKIP_RESCALE>(acc, alpha);
    /* The S accumulators of n8 tiles 2kk, 2kk+1 are the A fragment of keys 16kk .. 16kk+15. */
#pragma unroll
    for (int kk = 0; kk < DEC_WG_PK; kk++) {
      p[kk][0] = dec_pack_p(s[2 * kk][0], s[2 * kk][1]);
      p[kk][1] = dec_pack_p(s[2 * kk][2], s[2 * kk][3]);
      p[kk][2] = dec_pack_p(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      p[kk][3] = dec_pack_p(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
    stage_prev = stage, phase_prev = phase;
    if (++stage == DEC_STAGES) stage = 0, phase ^= 1u;
#endif
  }
  if (!DEC_WG_SEQ && keys.n_tiles > 0) { /* P V of the last tile */
    if (DEC_WG_VFULL) at_bar_wait(bar_staged + 8 * stage_prev, phase_prev);
    at_wgmma_fence();
    dec_wg_issue_pv(acc, p, smem_v + stage_prev * DEC_WG_KV_BYTES);
    at_wgmma_wait0();
  }

  /* Write: o (and lse) for one split, else the normalized partial O and the split's natural lse. */
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const float l = at_quad_sum(row_sum[half]);
    const float m = row_max[half] == AT_NEG_INF ? AT_NEG_INF : row_max[half] * scale_log2;
    const int r = row0 + g + half * 8;
    const int tl = r / DEC_G, h = hk * DEC_G + r % DEC_G, tok_i = t0 + tl;
    if (r >= DEC_ROWS || tok_i >= T) continue;
    const float inv = l > 0.f ? o_descale / l : 0.f;
    const float lse_val = l > 0.f ? (m + at_log2(l)) * 0.69314718055994531f : AT_NEG_INF;
    const long long prow = ((long long)b * n_q + h) * T + tok_i;
    if (!DEC_WG_SEQ && n_splits == 1) {
      if (DEC_LSE && tq == 0) lse[prow] = lse_val;
      at_out_t *orow = o + b * o_sb + (long long)tok_i * o_ss + (long long)h * o_sh;
#pragma unroll
      for (int j = 0; j < DEC_OT; j++)
        *(unsigned *)(orow + 8 * j + 2 * tq) = at_pack_out(acc[j][2 * half] * inv, acc[j][2 * half + 1] * inv);
    } else { /* n_splits counts partials: .wgi writes two per CTA */
      const long long pidx = prow * n_splits + split * DEC_WG_KSPLIT + turn;
      if (tq == 0) lse_part[pidx] = lse_val;
      float *orow = o_part + pidx * DEC_D;
#pragma unroll
      for (int j = 0; j < DEC_OT; j++)
        dec_st_part_f2(orow + 8 * j + 2 * tq, acc[j][2 * half] * inv, acc[j][2 * half + 1] * inv);
    }
  }
}
#endif /* DEC_WG */

/* ---- the combine kernel ----------------------------------------------------------------------- */

/* A read-only 16-byte load; not volatile, so the compiler may issue several before their use. */
__device__ __forceinline__ void dec_ld_global_f4(const float *p, float x[4])
{
  asm("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3]) : "l"(p));
}

__device__ __forceinline__ float dec_ld_global_f(const float *p)
{
  float x;
  asm("ld.global.nc.f32 %0, [%1];\n" : "=f"(x) : "l"(p));
  return x;
}

/* Combine: DEC_CR (b, h, t) rows per CTA, each taken by DEC_SG split groups of DEC_C4 threads.
 * Thread (cr, sg, ch) takes 16-byte chunk ch of row cr and the splits sg, sg + SG, ... (SG =
 * DEC_SG), merging them online (a running max of the splits' lse and the weighted sum), CB
 * splits' loads in flight at a time; the SG groups of a row then merge through shared memory.
 * The row's partials are read once, with no serial chain of loads longer than n_splits / (SG *
 * CB). The generator sets DEC_COMBINE_SG from the variant's partials per row, the fewest groups
 * whose batches of CB cover them, so that a CTA holds DEC_CR = THREADS / (SG * C4) rows: at 4
 * partials and D 128 one warp a row, 4 rows a CTA, where one CTA a row launched 4096 CTAs of
 * which three quarters idled (B8 T16 GQA 8, 4 splits; docs/perf.md, step 23). */
static constexpr int DEC_C4 = DEC_D / 4; /* float4 chunks per row */
#ifndef DEC_COMBINE_SG
#define DEC_COMBINE_SG (DEC_COMBINE_THREADS / (DEC_D / 4)) /* one row a CTA */
#endif
static constexpr int DEC_SG = DEC_COMBINE_SG;                /* split groups per row */
static constexpr int DEC_TPR = DEC_SG * DEC_C4;              /* threads per row */
static constexpr int DEC_CR = DEC_COMBINE_THREADS / DEC_TPR; /* rows per CTA */
static constexpr int DEC_CB = 4;                             /* splits per batch of loads */
static_assert(DEC_SG >= 1 && DEC_CR >= 1, "combine: a row's split groups need at most DEC_COMBINE_THREADS threads");

extern "C" __global__ void __launch_bounds__(DEC_COMBINE_THREADS)
DEC_COMBINE(const float *__restrict__ o_part, const float *__restrict__ lse_part, at_out_t *__restrict__ o,
            float *__restrict__ lse, int T, int n_q_heads, int n_splits, long long o_sb, int o_ss, int o_sh)
{
  /* Launched as a programmatic dependent of the split kernel (runtime/launch.c): its partials
   * are complete and visible after this wait. */
  at_wait_for_previous_grid();
  at_allow_next_grid();
  __shared__ float grp_m[DEC_CR][DEC_SG], grp_l[DEC_CR][DEC_SG];
  __shared__ float grp_o[DEC_SG > 1 ? DEC_CR : 1][DEC_SG][DEC_C4][4];
  const int tid = threadIdx.x, cr = tid / DEC_TPR, sg = tid % DEC_TPR / DEC_C4, ch = tid % DEC_C4;
  const int row = blockIdx.x * DEC_CR + cr; /* h * T + t */
  const bool live = cr < DEC_CR && row < n_q_heads * T;
  const int b = blockIdx.y, h = row / T, t = row - h * T;
  const long long prow = (long long)b * n_q_heads * T + row; /* (b*Nq + h)*T + t */
  const float *lp = lse_part + prow * n_splits;
  const float *op = o_part + prow * n_splits * DEC_D + 4 * ch;
  const float LOG2E = 1.4426950408889634f;

  float m = AT_NEG_INF, l = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (live) {
    for (int s0 = sg; s0 < n_splits; s0 += DEC_SG * DEC_CB) {
      float ls[DEC_CB], x[DEC_CB][4];
#pragma unroll
      for (int u = 0; u < DEC_CB; u++) { /* loads first, then the arithmetic */
        const int s = s0 + u * DEC_SG;
        ls[u] = s < n_splits ? dec_ld_global_f(lp + s) : AT_NEG_INF;
        if (s < n_splits) dec_ld_global_f4(op + (long long)s * DEC_D, x[u]);
        else x[u][0] = x[u][1] = x[u][2] = x[u][3] = 0.f;
      }
#pragma unroll
      for (int u = 0; u < DEC_CB; u++) {
        if (ls[u] == AT_NEG_INF) continue; /* an empty split (or past the end) weighs 0 */
        if (ls[u] > m) {
          const float shrink = m == AT_NEG_INF ? 0.f : at_exp2((m - ls[u]) * LOG2E);
          l *= shrink;
#pragma unroll
          for (int e = 0; e < 4; e++) acc[e] *= shrink;
          m = ls[u];
        }
        const float w = at_exp2((ls[u] - m) * LOG2E);
        l += w;
#pragma unroll
        for (int e = 0; e < 4; e++) acc[e] = fmaf(w, x[u][e], acc[e]);
      }
    }
  }
  float big = m, sum = l, out[4] = {acc[0], acc[1], acc[2], acc[3]};
  if constexpr (DEC_SG > 1) {
    if (live) {
      if (ch == 0) grp_m[cr][sg] = m, grp_l[cr][sg] = l; /* the same for every chunk of the group */
#pragma unroll
      for (int e = 0; e < 4; e++) grp_o[cr][sg][ch][e] = acc[e];
    }
    __syncthreads();
    if (sg != 0 || !live) return;
    big = AT_NEG_INF;
#pragma unroll
    for (int g = 0; g < DEC_SG; g++) big = fmaxf(big, grp_m[cr][g]);
    sum = 0.f, out[0] = out[1] = out[2] = out[3] = 0.f;
    if (big != AT_NEG_INF) {
#pragma unroll
      for (int g = 0; g < DEC_SG; g++) {
        if (grp_m[cr][g] == AT_NEG_INF) continue;
        const float w = at_exp2((grp_m[cr][g] - big) * LOG2E);
        sum = fmaf(w, grp_l[cr][g], sum);
#pragma unroll
        for (int e = 0; e < 4; e++) out[e] = fmaf(w, grp_o[cr][g][ch][e], out[e]);
      }
    }
  }
  if (!live) return;
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  at_out_t *orow = o + b * o_sb + (long long)t * o_ss + (long long)h * o_sh;
  const unsigned lo = at_pack_out(out[0] * inv, out[1] * inv), hi = at_pack_out(out[2] * inv, out[3] * inv);
  asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(orow + 4 * ch), "r"(lo), "r"(hi) : "memory");
  if (DEC_LSE && ch == 0) lse[prow] = sum > 0.f ? big + at_log2(sum) * 0.69314718055994531f : AT_NEG_INF;
}
