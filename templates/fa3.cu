/*
 * fa3.cu — Hopper (sm_90a) fused attention forward with wgmma: FP8 inputs (E4M3 or E5M2) with bf16
 * or f16 output, or f16/bf16 inputs and output; fp32 accumulate. Computes what fa2.cu computes
 * (same arguments, same BSHD strides, same masks, GQA and log-sum-exp; templates/fa2.cu's header
 * has the formula).
 *
 * Why a second family: wgmma, the warpgroup MMA with operands in shared memory, is how Hopper's
 * tensor cores reach their rate (mma.sync gets about half), and on sm_90 the FP8 mma.sync is not
 * a tensor-core instruction at all (ptxas lowers it to f16 MMAs).
 *
 * The generator's preamble defines AT_IN_DTYPE, AT_OUT_DTYPE, FA3_KERNEL, FA3_HEAD_DIM, FA3_MASK,
 * FA3_GQA, FA3_LSE, FA3_BLOCK_M, FA3_BLOCK_N, FA3_WARPS, FA3_STAGES, FA3_SMEM_LIMIT, and after
 * common.cuh two wgmma wrappers whose register lists depend on the tile (generator/fa3.c), with
 * k = 32 for FP8 and 16 for 16-bit inputs:
 *   fa3_mma_qk(float *s, desc_q, desc_k, accumulate)   S[64 x BN] (+)= Q[64 x k] K[BN x k]^T
 *   fa3_mma_pv(float *o, const unsigned p[4], desc_v)   O[64 x D]   += P[64 x k] V[k x D]
 *     (FP8: V from the V^T tile, K-major; 16-bit: from V's tile as loaded, MN-major)
 *   .qr also fa3_mma_qk_rs(float *s, const unsigned q[4], desc_k, accumulate): Q K^T with Q's A
 *     fragment of the k step from four registers (FA3_QREG, v26)
 * Accumulator element 4*j + e of a thread is the m16n8 C fragment element e of n8 tile j, for the
 * 16 rows of its warp: rows 16*warp + g (+8 for e >= 2), columns 8j + 2t + (e & 1), lane = 4g + t.
 *
 * Warp-specialized variants (FA3_WS 1, FA3_PINGPONG 0/1) have their own kernel at the end:
 * a producer warpgroup loading by TMA, FA3_WARPS / 4 consumer warpgroups running the loop below.
 * FP8 there either transposes V in the producer's idle warps (v9) or, with FA3_VT_PRE 1 (".vt",
 * "V^T ahead" below), reads V^T that a first kernel of the call wrote to the scratch.
 * With FA3_PERSISTENT 1 (16-bit, causal masks) that kernel is persistent: at most one CTA per SM,
 * each walking work tiles (a query block of one head) of a longest-first order in rounds of
 * gridDim.x, every second round backwards (v43), its mbarrier ring and ping-pong running on from
 * one work tile to the next.
 * With FA3_RAGGED 1 or 2 (16-bit, not persistent) it reads packed Q/O (and K/V) of varlen
 * prefill: each CTA takes its sequence's lengths and first rows from cu_seqlens ("Ragged" below).
 * With FA3_PAGE_SIZE > 0 (16-bit, not persistent, padded or ragged Q) its producer gathers K and
 * V from pools of pages through a block table, by TMA ("Paged K/V" below).
 *
 * Work split: grid (ceil(T / BLOCK_M), Nq, B); BLOCK_M = 64 per warpgroup; warp w of the CTA owns
 * query rows 16w..16w+15, so the online softmax is fa2's, per warp, with quad shuffles.
 *
 * Shared memory. A K-major wgmma operand of R rows and KB bytes per row (KB = 64 ... 512) is
 * stored as column blocks of CW = min(KB, 128) bytes: block c holds bytes [c*CW, (c+1)*CW) of every
 * row, rows CW bytes apart, with the hardware's swizzle (CW = 128: 16-byte chunk ^= row % 8;
 * CW = 64: chunk ^= (row / 2) % 4; V^T ahead also CW = 32: chunk ^= (row / 4) % 2), which is what
 * the matrix descriptor's swizzle mode expects (8-row atoms, stride byte offset 8*CW, blocks
 * aligned to 1024 bytes). One k step is 32 bytes along K either way: the descriptor's start
 * address moves by 32 inside a block (CW = 32: to the next block).
 *   Q [BM][D]   STAGES x K [BN][D]   STAGES x V [BN][D] (as loaded)   FP8: V^T [D][BN] (one)
 *
 * V. FP8 wgmma takes both operands K-major, and for P V the k dimension is the keys: V^T, with the
 * keys of each d contiguous. V arrives [key][d] (cp.async), and every warp transposes a share of
 * it into V^T while S = Q K^T runs on the tensor cores. P's A fragment comes straight from the S
 * accumulators, as in fa2.cu's FP8 path: lane (g,t) holds, per 32 keys, keys {2t, 2t+1, 8+2t, 9+2t}
 * (+16 for registers 2 and 3) where the A fragment wants k slots 4t..4t+3. So V^T is written with
 * that order: k slot 4w+i of V^T row d holds key 32(w/8) + 16((w/4)%2) + 2(w%4) + {0,1,8,9}[i].
 * A thread reads one 32-bit word (4 d's) from each of those 4 key rows of V and forms, with byte
 * permutes, one V^T word per d. The 32 lanes of a warp take 8 groups of 4 d's (g) times 4 words
 * (t) of one 16-byte chunk of V^T, and lane group g writes its 4 rows in an order rotated by g/2:
 * then each store instruction hits 8 rows with distinct row % 8 (distinct swizzled chunks) and
 * 4 words each — 32 banks; the reads hit 4 key rows with distinct swizzles — 32 banks too.
 *
 * V^T ahead (FA3_VT_PRE, FP8 warp-specialized, keys .ws.vt / .wspp.vt): the call's first kernel
 * (FA3_VT_KERNEL, memory-bound, 2 B Nkv S D bytes moved) writes V^T once to the plan's scratch as
 * [B][Nkv][D][S'] bytes, S' = S rounded up to BN, keys >= S zero, each 32 keys of a row in the
 * order above. A TMA box of CW_N keys x D rows of it, in the swizzle of CW_N bytes, then lands in
 * shared memory exactly as the transpose would write it, so the producer loads V^T tiles like K
 * (one box per column block: CW_N the widest of 128, 64 and 32 bytes that divides BN, so BN is
 * any multiple of 32: 192 is three blocks of 64, 224 seven of 32), the consumers read them from
 * the K/V stage ring as
 * the 16-bit kernel reads V, and no warp transposes and no V^T buffer or hand-off barrier is left.
 * The attention kernel is a programmatic dependent of the transpose (griddepcontrol.wait before
 * any global access), and the transpose of the previous call's, whose V^T it overwrites.
 *
 * 16-bit inputs need no transpose: wgmma reads a 16-bit B operand MN-major when asked (its
 * transpose bit), so V's tile as loaded serves P V directly (at_wgmma_desc_mn), P's A fragment is the
 * S accumulators in order (as in fa2.cu), and the V^T buffers and P's scale go away.
 *
 * Per K/V tile t (the overlapped loop: FP8, and 16-bit with 3+ stages): wait for the tile's
 * copies, barrier; prefetch tile t + AHEAD; issue S = Q K_t^T (32-byte k steps of the row); FP8:
 * transpose V_t into V^T buffer t % 2 (v28); issue O += P_{t-1} V_{t-1}; wait for S only; mask; online
 * softmax (exp2; FP8: P as e4m3(p * 448), fa2.cu explains the scale) while P V runs; then, at the
 * top of tile t+1 (v17, fa3_finish_tile), wait for P V, rescale O, pack P_t. P V of the last
 * tile follows the loop. The barrier at the top of tile t+1 publishes V^T_t to every warp and
 * frees buffer (t+1) % 2, whose P V all warps waited for. 16-bit
 * with 2 stages runs the in-order loop (S, softmax, P V, wait), because there P V reads V in place
 * and the prefetch would overwrite tile t-1's V while it runs.
 *
 * Steps (docs/perf.md, "## fa3", has the measurements; H200, B2 N16 T=S=8192):
 *   v1: FP8 with the V^T transpose: D128 488 TFLOP/s (bf16 fa2: 334), D256 536.
 *   v2: f16/bf16 through the transpose bit: bf16 D128 509 (cuDNN 700), causal 464, D256 531.
 *   v3: P V overlapped with the softmax, one barrier per tile: e4m3 D128 495 (s3 509), D256 566.
 *   v4: the transpose's offsets folded at compile time: e4m3 D128 638 (s3), D256 718 (s3).
 *   v5: no fence after the transpose (the next tile's fence publishes V^T): D128 657, D256 737.
 *   v6 (FA3_WS, 16-bit): a TMA producer warpgroup, 2-3 consumer warpgroups, mbarriers instead of
 *       CTA barriers, setmaxnreg, block_n any multiple of 16: bf16 D128 491 -> 657 (128x176),
 *       D256 515 -> 670, D64 430 -> 475 (192x128) in one call; cuDNN 694, 670, 484.
 *   v7: ping-pong barrier opened after Q K^T's issue (not P V's): .wspp 0.69x -> 0.87-1.06x of
 *       cuDNN, kept as a choice; O's rescale under Q K^T tried, slower on 4 of 6 shapes.
 *   v8: causal grid (Nq, B, query blocks), longest blocks first over all heads: 2k causal GQA
 *       0.88x -> 1.04x of cuDNN, D64 causal 1.04x -> 1.11x (docs/perf.md, "v6").
 *   v9: FP8 warp-specialized: the producer's warps 1-3 transpose V into two V^T buffers:
 *       e4m3 D128 577 (v5 657), D256 583 (v5 736): slower, listed after v5 (docs/perf.md, "v9").
 *   v10 (FA3_PERSISTENT, 16-bit causal): persistent causal scheduler: one CTA per SM walks the
 *       work tiles longest first, GQA heads side by side; Q reloaded per work tile behind an
 *       empty mbarrier, the K/V ring and the ping-pong order continue across work tiles.
 *       Predicted a few percent on short causal shapes; measured 3-14% SLOWER on every pair
 *       (B2 N16 8k D128 128x176: 596 -> 512 TFLOP/s; B1 32/8 2k: 434 -> 400; D64: 443 -> 410):
 *       the next work tile's Q waits for the slowest consumer's last Q K^T. A listed choice
 *       (.pers), not the default (docs/perf.md, "v10"); next: Q double-buffered.
 *       Tried after v20, not kept: Q double-buffered in the persistent kernel (work tile j in
 *       buffer j % 2): no consistent change (B2 N16 8k 192x64 s3 573-581 -> 543-551, B1 32/8 2k
 *       128x96 s3 390-392 -> 420-424; docs/perf.md "v21").
 *   v11 (FA3_VT_PRE, FP8): V^T ahead: a first kernel transposes V into the scratch in P's key
 *       order, the warp-specialized kernel loads V^T tiles by TMA like K (no transposing warps, the
 *       16-bit setmaxnreg split 240/24, block_n any multiple of 32: 128x224 at D128). Predicted:
 *       the transpose ~17 us (67 MB at B2 N16 S8k D128) against ~1.1 ms of attention at 1 PFLOP/s,
 *       the main kernel the 16-bit WS kernel's structure at twice the MMA rate: >= 1050 TFLOP/s
 *       at D128, >= 1200 at D256 (cuDNN 934, 1033; v5 657, 736). Measured, one call: e4m3 D128
 *       847 (192x96, 3 consumers; 128x224 s3 844) against v5 656 (1.29x) and cuDNN 1009 (0.84x);
 *       D256 1096 (128x128 s2) against v5 741 (1.48x) and cuDNN 1087 (1.01x). Short of the
 *       prediction by 20% and 9%; now FP8's first listed kind and its default.
 *   v12 (tried, removed): ping-pong over both GEMMs for FP8 .vt (the turn passed after the P V
 *       issue, FA3's order). Measured: e4m3 D128 128x224 818 against .ws 867 (cuDNN 953), D256
 *       128x128 908 against 1106; ncu unchanged (MUFU 45%, issue 40%), so the two consumers'
 *       exponentials and MMAs were not serialised by the turn order (docs/perf.md, "v12").
 *   v13: the row max of a tile as a tree instead of a chain of BN/4 dependent maxes: bf16 D64
 *       192x128 468 -> 493 TFLOP/s (cuDNN 488), e4m3 D128 128x224 850/845 -> 876, bf16 D128 and
 *       e4m3 D256 within noise. Tried with it: a share of the exponentials on the FMA pipe (a
 *       cubic for 2^f; every 8th, 4th or 2nd n8 tile, or all): slower at every share, 1-4% at
 *       an eighth and 15-30% at a half (docs/perf.md, "v13"); not kept.
 *   v14 (tried, reverted): FP8's exponentials two at a time (ex2.approx.f16x2, row sums in
 *       f16x2, P from f16 pairs). ptxas lowers the packed ex2 to two MUFU.EX2.F16, so the MUFU
 *       count stayed and the conversions were extra: e4m3 D128 128x224 862/841 -> 703 TFLOP/s.
 *   v15: O's rescale skipped where alpha is 1 for every row of the warp (the row max did not
 *       move this tile), exact. The unmasked tile of e4m3 D128 128x224 issues 64 FMULs for it.
 *   v16 (FA3_ONES, FP8 .vt at D 128): the row sums by the tensor cores: 8 rows of ones after
 *       V^T's D rows in each V stage, P V as m64n136, O's last n8 tile the sums: the softmax's
 *       112 FADDs per tile go, for 6% more P V work on tensor cores the softmax leaves idle.
 *       First run: 14% off at S 8192 (FP8 wgmma's accumulation is narrower than fp32), so each
 *       tile's sums now move to fp32 registers (fa3_take_row_sums); lse variants keep the exact
 *       sums. Measured after v17: 192x96 w12 887 against 858 TFLOP/s without it (+3.4%).
 *   v17: P V under the softmax for real. cuobjdump of every fa3 kernel up to v16 showed none of
 *       it: the first tile's empty commit group made ptxas add a dummy wgmma group after each
 *       P V, so "wait for S" (wait_group 1) waited for P V too, and ptxas also scheduled the
 *       wait for P V at the top of the softmax's basic block. P V's commit now sits with its
 *       issue, and the wait, rescale and pack run at the top of the next tile (fa3_finish_tile),
 *       behind the loop's back edge: all 114 exponentials of e4m3 D128 128x224 sit between the
 *       two waits. Measured with v15 against the binary before (one call, B2 N16 8k): bf16
 *       D128 1.02x, causal 1.06x, D64 1.03x, D256 1.05x, e4m3 D128 1.03-1.05x, D256 1.03x;
 *       with v16 e4m3 D128 192x96 w12 887 TFLOP/s (cuDNN ~912). Tried after it: the ping-pong
 *       turn passed after P V's issue: every .wspp slower (bf16 D128 619 -> 496).
 *   v18 (FA3_PAGE_SIZE, 16-bit .ws/.wspp): paged K/V ("Paged K/V" below): the producer reads a
 *       tile's block-table entries and issues one TMA box per page, so ragged Q on a paged cache
 *       can run at fa3's rate instead of fa2's (51% of the contiguous fa3 ideal at 16 sequences
 *       of 512-8192, docs/perf.md). Predicted: within a few percent of contiguous fa3 at pages
 *       of 64 and more, since the boxes are the same bytes and a tile's table reads are the
 *       producer's (BN / page size per tile, behind STAGES tiles of MMA); at 16, 8-11 boxes per
 *       column block per tile. First run (H200, 16 ragged sequences of 512-8192, pages of 16):
 *       71.8% of the contiguous fa3 ideal causal, 75.2% without a mask; padded Q B4 T2048 S8192
 *       causal-br 1.32x contiguous fa2. But NaN wherever a sequence's last page had rows past
 *       S_b: they hold what the cache holds, and P V multiplied them by P = 0. The last tile's V
 *       rows past S_b are now zeroed by each consumer before its last P V, and boxes from S_b on
 *       load no page. The paged default on sm_90a (docs/perf.md, "fa3 reads pages").
 *   v19 (FA3_SPEC, the generator's choice where registers allow): the speculative row max (below,
 *       "Speculative row max"): from the second K/V tile on, a tile's exponentials wait for S
 *       alone, and its max is taken from P under them and checked. Predicted from the eleventh
 *       session's leave-one-out (the max, its shuffles and the update cost as much as the
 *       exponentials): FP8 D128 part of the way from 904 to 1311 TFLOP/s. Measured (B2 N16 8k,
 *       against the binary before in the same calls): e4m3 D128 192x96 w12 929-948 -> 1003-1009
 *       (+7%), 128x224 863-875 -> 952-1039; bf16 D128 192x80 w12 634-653 -> 665-688 (+5%, now
 *       the default); bf16 128x176 and D64 192x128 1-4% slower. A first build, with the rare
 *       path's recomputed scores unrolled (60% of the kernel's code), ran those two 10% slower.
 *       At D 256 too since the thirteenth session (not FP8 from block_n 128, which spills): bf16
 *       128x80 .wspp 666-670 -> 711-712, 128x64 .ws 679-690 -> 705-710, 128x80 .ws +0.5%.
 *   v20 (FA3_LINP, FP8 .vt at D 128 without lse): linear P ("Linear P" below). By the counts, at
 *       FP8 D 128 the MUFU's exponentials (16 a clock per SM) take as long as the MMAs, and
 *       a warp issued nothing else during its run of 46 of them. For every second pair
 *       of n8 tiles, P's e4m3 code comes from one FFMA, a clamp and an FADD (the code's
 *       exponent and a linearly interpolated mantissa), and the pack gathers bytes. Predicted:
 *       the MUFU's share halved for one more FMA-pipe instruction per such score. Measured
 *       (three rounds, a diagnostic build, the same kernels with all, half and a third of the
 *       pairs linear): 128x224 s2 999-1014 -> 998-1069 TFLOP/s with half (all: 967-1000),
 *       s3 965-975 -> 1014-1086, .wspp 906-926 -> 1003-1024, 192x96 w12 944-999 -> 930-988;
 *       O's error against the naive reference 2.68e-2 -> 2.90e-2 (all: 3.19e-2; cuDNN's FP8
 *       3.7e-2). Half is the generator's choice with two consumers, and 128x224 s2 FP8's
 *       default at D 128: against the binary before, 916-1005 -> 964-1061 (five runs each);
 *       three consumers (192x96) ran 3% slower with it, so they keep the exact exponentials.
 *   v22 (FA3_MULTICAST 2, .mc; measured slower, removed): K/V multicast (docs/perf.md "v22").
 *       At block_m 128 a CTA reads 32 bytes of K/V from L2 per clock per SM at the tensor
 *       cores' full rate: B2 N16 T=S=8k D128 moves 8.6 GB from L2 to the SMs. Two CTAs of a
 *       cluster shared each tile's TMA copies, halving that: two query blocks of one head
 *       without a mask, one query block of two q heads of one K/V head under a causal
 *       mask (even GQA ratios). Measured (H200, each tile against its twin in one bench, two
 *       rounds): 13-45% slower at every shape, e.g. bf16 D128 128x176 619 -> 527 TFLOP/s, D256
 *       128x80 705 -> 603, e4m3 D128 128x224 995 -> 693. ncu: L2 to the SMs 5.16 -> 2.76 TB/s,
 *       and without .mc L2 ran at a third of its sector rate, so L2 was not the limit. A third
 *       stage did not help the pair either (128x128 s3 614 -> 478), so the ring's depth is not
 *       what the lockstep of the two CTAs costs.
 *   v23: wgmma descriptors built once per tile and advanced by a constant per k step
 *       (at_wgmma_desc_advance), and the consumer warpgroup's index broadcast from lane 0 so
 *       that ptxas keeps Q's descriptors in uniform registers. cuobjdump of the loop's Q K^T and
 *       P V issue blocks: e4m3 D128 128x224 83 -> 51 instructions a tile, bf16 D128 192x80 108
 *       -> 57, D256 128x80 191 -> 104 (Q K^T's 16 wgmmas issued in 77 instructions, not 152);
 *       whole kernels 2-11% shorter; spills, the exponentials under P V and the waits as before.
 *       Predicted: 1-3% where the consumers issue most (FP8 D128, bf16 D256). Measured with v24
 *       (one binary against main's, H200, B2 N16 8k, two rounds): bf16 D128 causal 192x80
 *       654 / 616 -> 674 / 651 TFLOP/s, GQA 32/8 causal 16k 630 / 631 -> 650 / 648, e4m3 D256
 *       128x128 .vt 1115 / 1120 -> 1132 / 1150 (+2-6%); bf16 D128 192x80 B4 N32 T2k 610 / 608
 *       -> 625 / 623.
 *   v24 (FA3_LINP): a linear tile's MAGIC + code / 8 from one FFMA, s * scale_log2 + c, and the
 *       clamp (fa3_lin_z): the add of MAGIC goes, for a row reference moved to the grid that c
 *       stands for (fa3_lin_ref; the exact tiles of the row take the same reference). cuobjdump
 *       of e4m3 D128 128x224's speculative softmax block: 641 -> 602 instructions (FADD 60 ->
 *       10, the range check +10). Predicted: 2-4% at FP8 D128. Measured with v23 (the same A/B):
 *       e4m3 D128 128x224 .vt 979 / 975 -> 1075 / 1052 (+8-10%, past #14's 1050 in both
 *       rounds), B1 N32 T4k 920 / 917 -> 931 / 930.
 *   v25 (FA3_TAIL, .tw<W>, no mask): the tail split ("Tail split" below): the work tiles of the
 *       last partial wave of W CTAs (or that and the wave before) run as 2-8 CTAs each over
 *       slices of their K/V tiles, whose fp32 partials FA3_TAIL_COMBINE merges; generator/fa3.c
 *       plan_tail picks the split from a count of waves, K/V tiles and the combine's bytes. At B2
 *       N16 8k the bf16 D128 192x80 default's 1376 tiles are 10 waves and 56: 76 SMs idle through
 *       the eleventh. Predicted: bf16 D128 and D64 (block_m 192) +3-4%, D256 +1%. Measured
 *       against the plain twin in one binary (H100, calls 76 and 78): bf16 D128 +1 to +12% on
 *       four shapes (B4 N32 T2k's plan splits nothing), D64 +2%, D256 +1-2%, e4m3 192x96
 *       -3% then +1% (the order reversed) and +5% at B1 N32 T4k. The default since (where its
 *       plan splits); H200, against main's plain default: B1 N32 T4k 607 / 605 -> 666 / 666
 *       (+10%, 0.90x -> 0.99x cuDNN), B2 N16 8k 653 -> 676 (medians of six pairs), D64 503 / 494
 *       -> 521 / 536, D256 698 / 698 -> 705 / 714.
 *   v26 (FA3_QREG, .qr): Q K^T with Q's A fragments in registers, loaded once per work tile by
 *       ldmatrix, instead of wgmma re-reading the warpgroup's 64 rows of Q from shared memory for
 *       every K/V tile. Counted (bf16 D128 128x128): shared memory read by a consumer's GEMMs per
 *       K/V tile 16 (Q) + 32 (K) + 32 (V) KB -> 64 KB, -20%; the H200 runs these kernels at its
 *       power cap (docs/perf.md "v22": 1.63-1.72 GHz, 1.80 with half the L2 traffic), so bytes
 *       not moved are clock. Fits 128-row tiles to block_n 144 at D 128 (32 registers more); the
 *       192-row defaults have no room. Predicted: 128x128 +2-4%, maybe past 192x80. Measured (B2
 *       N16 8k, against 128x128 in one bench): H100 635 -> 647 verified, 668 -> 671 unverified in
 *       the other order, where 192x80 ran 663 / 686; H200 635 -> 617 (-3%), 192x80 .tw 689; D64
 *       128x128 453 -> 419. Kept as a twin for the tuner; no default takes it.
 *   v27 (tried, not kept): .wspp passing the turn after the P V issue, not after Q K^T's (FA3's
 *       order), with the arrive on each side of the first tile's branch (after the join ptxas
 *       serialized the wgmmas, C7515). H100, main's binary against v27's, two rounds, B2 N16 8k:
 *       bf16 D128 128x176 685/671 -> 627/644, 128x128 657/653 -> 626/618; causal 128x128
 *       600/622 -> 580/578; D256 128x80 718/708 -> 714/700; e4m3 D256 .vt 1174/1205 ->
 *       1150/1217; e4m3 D128 224 .vt 1033/1000 -> 1059/1007. Lost or level everywhere.
 *   v28 (in-CTA FP8): V_t's transpose moved from after P V's issue to before it. Where it was,
 *       between the first tile's branch around P V and the wait for S, ptxas serialized every
 *       wgmma of the kernel (C7515: each k step of Q K^T and P V issued alone and waited for),
 *       in every in-CTA FP8 kernel since v3, FP8 D64's default among them; wgmma_sass.sh read
 *       0 of 34 exponentials under P V at e4m3 D64 128x64 s3, 34 of 34 after. H100, main's
 *       binary against this one, two rounds, FP8 D64 default 64x128 s3: B4 N8 2k 338/338 ->
 *       371/371 TFLOP/s (+10%), B2 N16 8k 376/376 -> 414/410 (+9%), causal B4 N8 1k 169/169 ->
 *       181/183 (+8%).
 *   v29 (FP8 D64 .vt): rows of 64 bytes (FA3_CW_D 64) load as TMA boxes in the 64-byte swizzle,
 *       and the V^T kernel transposes one 64-byte piece of D. Counted exponential-bound (24576
 *       exponentials a 192x128 tile, 1536 clocks, against 768 of MMA). Predicted 480-560
 *       TFLOP/s at B2 N16 8k; H200: 192x128 .ws.vt 632 against the in-CTA kernel's 407 (+55%),
 *       B4 N8 2k 463 against 370 (+25%).
 *   v30 (FP8 D64 .vt): the row sums on the tensor cores (FA3_ONES, n 72) and, in two-consumer
 *       tiles, linear P, as at D128: 198 -> 166 exponentials in 128x128's loop. Predicted
 *       +10-20% over v29 at 128 rows; H200, B2 N16 8k: 128x224 564 -> 654 (+16%), 192x128
 *       632 -> 658 (+4%); causal 1k 128x128 -3%. 192x128 .ws.vt is FP8 D64's default: 668
 *       TFLOP/s (.tw132) against cuDNN's 577 at B2 N16 8k.
 *   v31 (FP8 D256 .vt): the row sums on the tensor cores too, as a second wgmma of n 8
 *       (FA3_PV_SUMS_APART: n 264 is past wgmma's 256). Predicted flat to +2% (MMA-bound);
 *       H100, B2 N16 8k: the default 128x128 .wspp.vt flat (1207 -> 1205), 128x96 +2.3%.
 *   v32 (FP8 D256 .vt): linear P where the speculative max runs in two consumers (128x128
 *       .wspp.vt, 128x96). H100, B2 N16 8k, against main in two calls of two rounds: the
 *       default +2.2% then -1.4% (flat: 1233 -> 1237 over the four), 128x96 +2.5%.
 *   v33 (FP8 D64 .vt): linear P in the three-consumer tiles too, where the exponentials bound
 *       the tile (1536 MUFU clocks against 768 of MMA at 192x128). H100, against main: the
 *       default 192x128 .tw132 +6.6% at B2 N16 8k (675 -> 719), causal 8k +6.2% (598 -> 635);
 *       causal B4 N8 1k -4.5% (200 -> 191; 128x128 there 213, unchanged).
 *   v35 (16-bit, FA3_SPEC): the speculative check is bit 30 of the OR of P's words (every P
 *       below 2) where a max compared every score: in bf16 D128 192x80's loop the path from S's
 *       wait to the vote goes 218 -> 199 instructions (40 FMNMX out, 22 LOP3 in); the rows'
 *       maxes are taken only where the check fails. The OR is taken in PTX (fa3_or_bits): a C
 *       bit cast of S made ptxas serialize the wgmmas.
 *       Predicted +0-2% at #14's 16-bit shapes (issue is 40% busy there: the chain, not the
 *       count, bounds the tile). H100, B2 N16 8k, a first build against main (two rounds):
 *       D128 +2.7%, D256 +0.6%, D64 +4.4%, causal D128 -2.7%, inside the rounds' spread (cuDNN
 *       moved -2.8% to +1.2%). That build bounded a failing row's max by the OR read as a float
 *       (wrong: 0x80 | 0x7f is 0xff), and test_fa2_gpu's f16 causal-br lse case went non-finite;
 *       this one takes the maxes from P there. H200 (test_fa2_gpu and test_fp8_gpu pass; three
 *       rounds against main, same inputs): D128 .tw132 673 -> 686 (+2.0%, cuDNN +0.0%), D256
 *       700 -> 707 (+1.0%, cuDNN +0.1%), D64 527 -> 531 (+0.7%, cuDNN +0.5%), causal D128
 *       604 -> 637 (+5.5%, cuDNN -2.9%: that row's clocks moved; docs/perf.md, "Thirty-second
 *       session").
 *   v36 (FP8, FA3_SPEC): the speculative check's maxes of P and of the linear codes, values that
 *       are never negative, as a tree of three-input integer maxes on their bit patterns
 *       (fa3_row_max<..., true>: VIMNMX3) where a tree of FMNMX took two at a time. cuobjdump: e4m3
 *       D128 128x224's FMNMX 416 -> 308 for 56 more VIMNMX, the kernel 3864 -> 3816
 *       instructions, the hot loop 3331 -> 3279; D256 128x128 .wspp 3176 -> 3144, D64 192x128
 *       3672 -> 3648; no spills, the exponentials under P V as before. Predicted +1-3% at e4m3
 *       D128 (issue 44% busy; the tree stands between the exponentials and the vote), +0-2% at
 *       D256 and D64. Measured (H100, calls 114-115, main's binary against this one alternately,
 *       B2 N16 8k; test_fp8_gpu passes): e4m3 D128 128x224 level (0.998 over three rounds with
 *       cuDNN +0.9%, 1.000 over two more), D256 128x128 .wspp +0.6% (cuDNN +0.7%: level), D64
 *       192x128 .tw132 +3.8% (730.7 / 725.0 -> 752.7 / 759.0). Kept: D64 gains, nothing loses.
 *   v37 (FP8 D 128, FA3_LINP 1): every pair of n8 tiles linear, two or three consumers (half, two
 *       consumers only, since v20). v24 made a linear score one FFMA and a clamp, so the trade v20
 *       measured (all slower than half) was timed again. Counted (cuobjdump, 128x224 s2): the
 *       speculative path's 56 exponentials a thread go (MUFU in the loop 289 -> 231, the rest on
 *       the rare exact path), PRMT 56 -> 84, the kernel 3816 -> 4184 instructions; 192x96 w12
 *       150 -> 102 exponentials. Predicted: part of the leave-one-out's 13-19% for the
 *       exponentials. Measured (H100, B2 N16 8k, main's binary against this one alternately,
 *       3-4 rounds): 128x224 s2 +1.8% and +2.7%, causal +4.1%, s3 +3.8%, .wspp +5.1%, 128x192
 *       +4.6%, B4 N32 T2k +1.4%, B1 N32 T4k +2.5%, GQA 32/8 causal 16k +0.9%; 192x96 w12 +7.8%
 *       (945 -> 1010 TFLOP/s). Three quarters linear ran between half and all. O's error 2.9e-2
 *       -> 3.1e-2 (cuDNN's FP8 3.8e-2). D 256 all-linear level (MMA-bound), D 64 +1.8% at 8k but
 *       -5.7% at B4 N8 1k causal: both keep half (docs/perf.md, "Thirty-seventh session").
 *   v38, v39 (tried, not kept; branches fa3-v38, fa3-v39): the linear tiles' clamp on the FMA pipe
 *       (fma.rn.sat to code / 1024, then onto MAGIC again: two FFMAs for one FMNMX), and with it
 *       the codes as 16-bit lanes (VIMNMX3.U16x2 for the check, one PRMT a pack). Fewer ALU
 *       instructions, more in all: H100, e4m3 D128 B2 N16 8k, v38 level at 128x224 and -3.4% at
 *       192x96, v39 -6.0% and -6.6% (ncu: 646 consumer instructions a warp and K/V tile against
 *       550). The consumers' chain from S to the vote is issue-bound, whichever pipe runs it.
 *   v40 (FP8, FA3_LINP): the codes' max from z before the clamp (fa3_softmax_spec), so the vote
 *       waits for the tree alone and the clamps fill in beside it; the same instructions. H100,
 *       B2 N16 8k against main alternately (test_fp8_gpu passes): e4m3 D128 128x224 +1.1% and
 *       +3.6% (cuDNN +0.8%, -0.6% in the same rounds), 192x96 w12 +1.4% and +0.6%, D256 +0.4%,
 *       D64 -0.3%, causal -0.6% and -1.6% (cuDNN +3.3%: noisy rounds), B4 N32 T2k +0.5%.
 *   v41 (FP8, FA3_LINP): a linear score's FFMA gives code * 2^-24, and one F2FP
 *       (cvt.rn.relu.f16x2.f32) rounds two of them to f16 subnormals, whose bits are the codes,
 *       clamped at 0 (fa3_lin_lanes_of); v39's 16-bit lanes follow (check, shift, pack), and the
 *       f16's bits still grow past code 1023 up to inf and NaN, the upper guard v39 lacked. A
 *       linear score: FFMA, FMNMX, 0.75 PRMT, 0.5 VIMNMX3 -> FFMA, 0.5 F2FP, 0.25 PRMT, 0.25
 *       VIMNMX3. cuobjdump: e4m3 D128 128x224 4184 -> 3984 instructions (hot loop 2996 -> 2857),
 *       0 spills; ncu: 550 -> 432 consumer instructions a warp and K/V tile, the kernel 975 ->
 *       893 us. H100, B2 N16 8k against main alternately (test_fp8_gpu passes, O's error 3.1e-2
 *       as before): 128x224 +9.7% (cuDNN +1.6% in the same rounds), 192x96 w12 +4.9%, causal
 *       +3.5%, B4 N32 T2k +4.3%, D64 +2.4%, D256 +0.4%. With it D 64 takes every pair linear
 *       (generator/fa3.c linear_p): +11.0% at 8k against half, level at B4 N8 T1k causal.
 *   v42 (16-bit D 64, FA3_ONES_BLOCK): the row sums on the tensor cores, as FP8's since v16: per
 *       k step of P V a second wgmma of n 8 multiplies P by a block of ones that stays in shared
 *       memory (256 bytes after the mbarriers), into O's last n8 tile, which the rescale scales
 *       with O and which accumulates in fp32 to the end. The softmax's adds (one a score) go for
 *       BN / 16 HGMMA.64x8x16 a tile. cuobjdump, bf16 D128 192x80 .tw132 (built for all head
 *       dims first): 3088 -> 2944 instructions, hot loop 1202 -> 1031, 0 spills in every listed
 *       warp-specialized kernel; ncu: 300 -> 266 consumer instructions a warp and tile, but the
 *       kernel 1.42 -> 1.46 ms. H100, B2 N16 8k, against main alternately: D128 192x80 -2.8%,
 *       causal -4.2%, 128x192 .wspp -5.9%, D256 128x80 -4.0%: where the MMAs bound the tile the
 *       n8 wgmmas cost more tensor time than the adds saved. D 64, where the exponentials bound
 *       it: 192x128 .tw132 +2.7% / +3.7% (two calls), causal +1.7%, B4 N8 T2k +3.7%, f16 GQA 4
 *       causal 16k +3.3%, B4 N8 T1k causal -2.1%. So D 64 only (generator/fa3.c ones_block);
 *       test_fa2_gpu, test_api_gpu and test_serving_gpu pass with it at every head dim.
 *   v43 (FA3_PERSISTENT): the work tiles in a snake (fa3_pers_tile_index). The static schedule
 *       gave CTA x tiles x, x + n, x + 2n, ... of the longest-first order, so CTA 0 took the
 *       longest tile of every round and the call waited for it. Every second round now runs
 *       backwards. Counted (each CTA's K/V tiles plus a fixed part a work tile, 132 CTAs):
 *       the last CTA's share falls 3-6% at B2 Nq 32 T 8k-2k, 12-17% at B1 T 4k-2k.
 *       Measured (H100, bf16 D128 causal Nq 32 Nkv 4, against main's binary in one call):
 *       128x128 s2 .wspp.pers B1 T2k +11.5%, T4k +8.8%, T8k +12.6%, T16k +0.3%; B2 T1k +6.5%,
 *       T2k +3.2%, T4k +2.3-3.9%; 192x64 .ws.pers +14% at B1 T4k. The .pers tile now runs
 *       ahead of the default 192x80 .ws at B1 T2k-8k and B2 T1k-4k (4-29%), not at B1 T16k.
 *   v44 (causal grids): the causal order in groups of heads whose K/V fit 16 MB
 *       (fa3_grouped_work_tile, FA3_L2_GROUP_BYTES). Counted: B2 N16 T=S=8192
 *       D128 read its K/V from HBM about 8 times over (1.1 GB a call: every wave of 132 CTAs
 *       spans all 32 heads), 0.13-0.29 GB in groups; under the power cap fewer HBM bytes may buy
 *       SM clock (v22's .mc: half the L2 traffic, 1.80 GHz). Unchanged where every head's K/V
 *       fits 16 MB (B1 Nq 32 Nkv 4 T 8k: 16 MB; #14's GQA 32/8 16k row: 4 groups of 2).
 *       Measured (H100, B2 N16 T=S=8192 causal, two rounds): 192x80 .ws grid 638.7/626.0 ->
 *       645.3/629.4 TFLOP/s (+0.5-1%, inside a process's 2-4% spread), against cuDNN in the same
 *       processes 1.12x -> 1.19x (cuDNN, unchanged, read 5% slower there). In the .pers
 *       snake the groups cost 29% (128x128 602 -> 428): a static schedule balances only a falling
 *       order (fa3_work_tile), so .pers keeps v43's.
 * Copies by cp.async and stores by threads are generic-proxy writes; wgmma reads shared memory
 * through the async proxy, hence fence.proxy.async before the barriers that publish them.
 */

#if AT_IN_DTYPE == AT_DTYPE_E4M3 || AT_IN_DTYPE == AT_DTYPE_E5M2
#define FA3_FP8 1
#elif AT_IN_DTYPE == AT_DTYPE_BF16 || AT_IN_DTYPE == AT_DTYPE_F16
#define FA3_FP8 0
#if AT_OUT_DTYPE != AT_IN_DTYPE
#error "fa3 writes O of f16/bf16 inputs in the input dtype"
#endif
#else
#error "fa3 takes e4m3, e5m2, bf16 or f16 inputs"
#endif
#if AT_OUT_DTYPE != AT_DTYPE_BF16 && AT_OUT_DTYPE != AT_DTYPE_F16
#error "fa3 writes O as bf16 or f16"
#endif

#ifndef FA3_WS
#define FA3_WS 0
#endif
static constexpr int FA3_D = FA3_HEAD_DIM;
/* Warp-specialized variants keep tiles in whole 128-byte column blocks: head dims 96 and 192
 * are padded to 128 and 192 columns, which the tensor maps fill with zeros past D. */
static constexpr int FA3_DP = FA3_WS ? (FA3_D + 63) / 64 * 64 : FA3_D;
static constexpr int FA3_BM = FA3_BLOCK_M;
static constexpr int FA3_BN = FA3_BLOCK_N;
static constexpr int FA3_THREADS = FA3_WARPS * 32;
static constexpr int FA3_NT = FA3_BN / 8; /* n8 tiles of S per warp */
#ifndef FA3_VT_PRE
#define FA3_VT_PRE 0 /* FP8 warp-specialized: V^T from the scratch (the V^T-ahead section below) */
#endif
/* Row sums by the tensor cores (v16; FP8 V^T ahead, whose head dims are 64, 128 and 256: at D 128,
 * at D 64 since v30 and D 256 since v31): each V^T stage holds 8 rows of ones after its D rows,
 * P V runs n = D + 8, and O's last n8 tile is P's row sum (every column of it, summed over the
 * keys by the MMA). The softmax adds nothing up, and O's rescale scales the sum too. Variants
 * that write the lse keep the adds: these sums are of P as rounded to FP8, whose noise put
 * test_fp8_gpu's lse (S 45) at 1.06e-3 relative error, against 4e-6 from the exact sums. */
/* 16-bit (v42, FA3_ONES_BLOCK: warp-specialized D 64 without lse, generator/fa3.c ones_block): V is
 * read MN-major in place, with no room for rows of ones, so the sums are a second wgmma of n 8
 * per k step whose B is a block of ones after the mbarriers (fa3_fill_ones_block); bf16 wgmma
 * accumulates in fp32, so they stay in O's last n8 tile to the end, rescaled with O. */
#ifndef FA3_ONES_BLOCK
#define FA3_ONES_BLOCK 0
#endif
static_assert(!FA3_ONES_BLOCK || (FA3_WS && !FA3_FP8 && !FA3_LSE), "the ones block is 16-bit warp-specialized");
#define FA3_ONES ((FA3_VT_PRE || FA3_ONES_BLOCK) && !FA3_LSE)
static constexpr int FA3_ONES_ROWS = FA3_ONES && FA3_FP8 ? 8 : 0; /* in each V^T stage */
/* D 256 (v31): n would be 264, past wgmma's 256, so the sums are a second wgmma of n 8 over the
 * ones rows (fa3_mma_pv_sums, generated beside fa3_mma_pv), into O's last n8 tile; 16-bit (v42)
 * over the ones block. */
#define FA3_PV_SUMS_APART (FA3_ONES && (FA3_ONES_BLOCK || FA3_HEAD_DIM + 8 > 256))
static constexpr int FA3_OT = (FA3_DP + (FA3_ONES ? 8 : 0)) / 8; /* n8 tiles of O (and the sums) per warp */
static constexpr int FA3_ESIZE = FA3_FP8 ? 1 : 2;  /* bytes per Q/K/V element */
static constexpr int FA3_ROWB = FA3_D * FA3_ESIZE;  /* bytes per Q/K/V row */
static constexpr int FA3_KSTEP = 32 / FA3_ESIZE;    /* wgmma k: 32 (FP8) or 16 (16-bit), 32 bytes */
static constexpr int FA3_PK = FA3_BN / FA3_KSTEP;   /* k steps of P V */
static constexpr int FA3_QK = FA3_ROWB / 32;        /* k steps of Q K^T */
static constexpr int FA3_CW_D = FA3_ROWB < 128 ? FA3_ROWB : 128; /* column block of Q, K, V */
/* Column block of V^T (FP8): BN bytes up to 128; V^T ahead: the widest of 128, 64 and 32 that
 * divides BN, so that one TMA box fills one swizzled block (BN = 192: three blocks of 64; 224:
 * seven of 32). */
static constexpr int FA3_CW_N = FA3_VT_PRE ? (FA3_BN % 128 == 0 ? 128 : FA3_BN % 64 == 0 ? 64 : 32)
                                            : FA3_BN < 128 ? FA3_BN : 128;
static constexpr int FA3_TILE_ROWB = FA3_DP * FA3_ESIZE; /* bytes per tile row */
static constexpr int FA3_Q_BYTES = FA3_BM * FA3_TILE_ROWB;
static constexpr int FA3_KV_BYTES = FA3_BN * FA3_TILE_ROWB;
/* A V stage: as K's, or with the ones rows, BN / CW_N column blocks of D + 8 rows (each block
 * stays a whole number of its swizzle's 8-row atoms, so its alignment holds). */
static constexpr int FA3_V_BYTES = FA3_ONES_ROWS ? FA3_BN * (FA3_D + FA3_ONES_ROWS) : FA3_KV_BYTES;
/* FP8: the bytes of one V^T column block in a stage, its D rows (and the ones rows) of CW_N. */
static constexpr int FA3_VT_BLOCK_BYTES = (FA3_D + FA3_ONES_ROWS) * FA3_CW_N;
/* Overlapped loop (header): P V of tile t-1 runs during tile t's softmax. 16-bit V is read in
 * place by that P V, so its stage must outlive one more tile: the prefetch runs STAGES-2 tiles
 * ahead instead of STAGES-1, which needs 3 stages; 16-bit with 2 stages keeps the in-order loop.
 * FP8 reads V^T instead, double-buffered. */
static constexpr bool FA3_OVERLAP = FA3_FP8 || FA3_STAGES >= 3;
static constexpr int FA3_AHEAD = FA3_OVERLAP && !FA3_FP8 ? FA3_STAGES - 2 : FA3_STAGES - 1;
static constexpr int FA3_VT_BUFS = FA3_FP8 && !FA3_VT_PRE ? 2 : 0;
/* Warp-specialized variants (FA3_WS, below): 256 bytes after the tiles hold the mbarriers, and
 * with FA3_ONES_BLOCK 256 more the ones (8 rows of 32 bytes: one atom of the 32-byte swizzle). */
static constexpr int FA3_BAR_BYTES = FA3_WS ? 256 : 0;
static constexpr int FA3_ONES_BLOCK_BYTES = FA3_ONES_BLOCK ? 256 : 0;
static constexpr int FA3_SMEM_BYTES =
    1024 + FA3_Q_BYTES + (FA3_STAGES + FA3_VT_BUFS) * FA3_KV_BYTES + FA3_STAGES * FA3_V_BYTES + FA3_BAR_BYTES +
    FA3_ONES_BLOCK_BYTES;
static constexpr bool FA3_CAUSAL = FA3_MASK != AT_MASK_NONE;
/* FP8: P is stored as e4m3(p * 448); log2(448) is added in the exponent instead of multiplying.
 * 16-bit: P is stored in the input dtype, unscaled. */
#define FA3_P_LOG2_SCALE (FA3_FP8 ? 8.8073549220576041f : 0.0f)
/* Speculative row max (FA3_SPEC, v19; warp-specialized kernels): from a work tile's second K/V
 * tile on, the exponentials use the row's reference max as it stands, with no wait for the
 * tile's own max. The reference sits FA3_SPEC_HEADROOM (log2 units) above the largest score
 * seen, so P of a later tile may exceed P of that score by 2^headroom before it would pass 2^L
 * (FP8: 448, e4m3's largest value; 16-bit: 2, P staying below it, since v35; 1 before). The
 * tile's max is then taken from P, under the exponentials (16-bit: an OR of P's words, v35), and
 * checked: where P stays within 2^L in every row of the warp (nearly every tile),
 * alpha is 1 and nothing else runs. Else the rows past it scale their P down and move their
 * reference (fa3_softmax_spec), and only where P overflowed (a score 2^100 above the reference)
 * does the warp recompute S from shared memory and take the exact path; so the K tile and Q
 * stay in their buffers until the softmax is done. The headroom costs P's smallest values: FP8
 * keeps 2^-9 / 56 of the row's max instead of 2^-9 / 448, f16 2^-16 instead of 2^-24. */
#ifndef FA3_SPEC /* the generator's choice (generator/fa3.c, speculative_max: where it fits) */
#define FA3_SPEC 0
#endif
static_assert(!FA3_SPEC || FA3_WS, "the speculative row max is the warp-specialized consumers'");
#define FA3_SPEC_HEADROOM (FA3_FP8 ? 3.0f : 8.0f)
/* Linear P (FA3_LINP, v20; FP8 with the tensor cores' row sums and the speculative max): P's
 * e4m3 code taken in the log domain, code = 8 log2(P) + 55.5 rounded, which is e4m3's exponent
 * and its mantissa interpolated linearly (2^f ~ 1 + f, at most 6% high; the 0.5 centres it).
 * One FFMA and half an F2FP per score replace the exponential (MUFU, 16 a clock per SM: as long
 * as the MMAs at FP8 D 128) and the conversion: the FFMA gives code * 2^-24, and the F2FP rounds
 * two of them to f16 subnormals, whose bits are the codes, clamped at 0 (v41; before, an FADD of
 * MAGIC rounded to eighths and left the code in a float's low bits, MAGIC + code / 8, and an FMNMX
 * clamped it). So a linear n8 tile keeps its codes as 16-bit lanes: element 0 holds the row half
 * g's two codes, element 2 row g + 8's (fa3_lin_lanes_of), and the speculative check's max and the
 * pack take two codes an operand (v39).
 * Every FA3_LINP-th pair of n8 tiles (nt / 2) is taken so (1: all); the rest stay exact. Costs
 * P's values below 2^-7 (e4m3's subnormals; P of the row's max is 56) and widens P's error from
 * e4m3's rounding alone (2.7% rms) to 3.2% rms. */
#ifndef FA3_LINP
#define FA3_LINP 0
#endif
#ifndef FA3_QREG /* .qr: Q K^T's A from registers (v26; generator/fa3.c check_qr) */
#define FA3_QREG 0
#endif
static_assert(!FA3_QREG || FA3_WS, "Q in registers is the warp-specialized consumers'");
#if FA3_LINP && !(FA3_FP8 && FA3_ONES && FA3_SPEC)
#undef FA3_LINP
#define FA3_LINP 0
#endif
/* 1.5 * 2^20: in [2^20, 2^21) a float's last bit is 1/8, so adding it rounds y to eighths and
 * leaves 8 y in the low bits. y = log2(P) + FA3_LIN_BIAS: e4m3's exponent bias, less 1/16, the
 * linear part's mean excess. */
#define FA3_LIN_MAGIC 1572864.0f
#define FA3_LIN_BIAS 6.9375f
#define FA3_LIN_MAX_CODE 126 /* 448 */
__device__ __forceinline__ constexpr bool fa3_lin_tile(int nt) { return FA3_LINP && (nt / 2) % (FA3_LINP ? FA3_LINP : 1) == 0; }

/* The row's reference for FA3_LINP (v24). A linear tile's code / 8 is s * scale_log2 + c - MAGIC
 * with c = MAGIC - (m - BIAS), rounded to eighths (fa3_softmax_spec, fa3_lin_lanes_of). c itself
 * is rounded to eighths, so the row's exponentials take the reference m' that c stands for, m' = (MAGIC - c) + BIAS, exact (Sterbenz: c within a
 * factor 2 of MAGIC) while m lies in [-1e6, 7e5] (log2 units; a row that has seen no key, m
 * about -3.4e38, gives P = 0 with any c). m' is m moved to the nearest point of its grid, so an m
 * recomputed from row_max within a rounding of m' gives m' again. Elsewhere m' = m, and the
 * speculative tiles take the exact path. */
__device__ __forceinline__ bool fa3_lin_ref_ok(float m) { return (m >= -1.0e6f && m <= 7.0e5f) || m <= -3.0e38f; }

/* m' and c where fa3_lin_ref_ok(m) */
__device__ __forceinline__ float fa3_lin_ref_in_range(float m, float &c)
{
  c = __fsub_rn(FA3_LIN_MAGIC, __fsub_rn(m, FA3_LIN_BIAS));
  return __fadd_rn(__fsub_rn(FA3_LIN_MAGIC, c), FA3_LIN_BIAS);
}

__device__ __forceinline__ float fa3_lin_ref(float m, float &c)
{
  const float r = fa3_lin_ref_in_range(m, c);
  return fa3_lin_ref_ok(m) ? r : m;
}

/* Two linear codes as one word of 16-bit lanes, a's in the low one (v41), from z = code * 2^-24:
 * an f16 of that size is subnormal and its bits are the code. One F2FP rounds two z to their
 * nearest codes and clamps them below at 0 (.relu), where v40 took an FMNMX a score to clamp and
 * a PRMT more to pack. Past code 1023 the f16 is normal, and its bits still grow with z up to inf
 * (0x7c00) and NaN (0x7fff): every code too large stays too large for the check. */
__device__ __forceinline__ float fa3_lin_lanes_of(float a, float b)
{
  float r;
  asm("{\n .reg .b32 tw;\n cvt.rn.relu.f16x2.f32 tw, %2, %1;\n mov.b32 %0, tw;\n}\n" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

/* Two codes MAGIC + code / 8 (fa3_code_of) as one word of 16-bit lanes, a's in the low one (v39):
 * the form the linear tiles keep in S's registers, two lanes a max and four a pack (fa3_lin_bytes). */
__device__ __forceinline__ float fa3_lin_lanes(float a, float b)
{
  float r;
  asm("prmt.b32 %0, %1, %2, 0x5410;\n" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

/* Each lane's code moved by k (k in both lanes of kk) and clamped below at 0: one
 * VIADDMNMX.S16x2. Run only where every code is under 800 (fa3_softmax_spec's Z_HUGE), where a
 * lane is the code itself (fa3_lin_lanes_of), and moved down by less than 1024. */
__device__ __forceinline__ float fa3_lanes_shift(float w, unsigned kk)
{
  float r;
  asm("{\n .reg .b32 tw, zero;\n mov.b32 tw, %1;\n mov.b32 zero, 0;\n add.s16x2 tw, tw, %2;\n"
      " max.s16x2 tw, tw, zero;\n mov.b32 %0, tw;\n}\n"
      : "=f"(r)
      : "f"(w), "r"(kk));
  return r;
}

/* The e4m3 bytes of two lane words, a's codes in the low two bytes (every code below 256). */
__device__ __forceinline__ unsigned fa3_lin_bytes(float a, float b)
{
  unsigned r;
  asm("prmt.b32 %0, %1, %2, 0x6420;\n" : "=r"(r) : "f"(a), "f"(b));
  return r;
}

/* Four P of row half e / 2 of the pair of n8 tiles c[0], c[1] (n8 tile nt first) as e4m3 bytes:
 * a linear pair's lane words are elements 0 and 2 (fa3_softmax_spec), the others' P floats. */
__device__ __forceinline__ unsigned fa3_p_bytes(const float (*c)[4], int nt, int e)
{
  return fa3_lin_tile(nt) ? fa3_lin_bytes(c[0][e], c[1][e])
                          : at_e4m3x4_from_float(c[0][e], c[0][e + 1], c[1][e], c[1][e + 1]);
}

/* The PTX of a three-input max of type T on float registers' bit patterns (ptxas: one VIMNMX3). */
#define FA3_MAX3_ASM(T)                                                                            \
  "{\n .reg .b32 ta, tb, tc;\n mov.b32 ta, %1;\n mov.b32 tb, %2;\n mov.b32 tc, %3;\n max." T      \
  " ta, ta, tb;\n max." T " ta, ta, tc;\n mov.b32 %0, ta;\n}\n"

/* Lane by lane, the largest of three lane words: VIMNMX3.U16x2, six codes an instruction. */
__device__ __forceinline__ float fa3_lanes_max3(float a, float b, float c)
{
  float r;
  asm(FA3_MAX3_ASM("u16x2") : "=f"(r) : "f"(a), "f"(b), "f"(c));
  return r;
}

/* MAGIC + code / 8 of the larger lane of w. */
__device__ __forceinline__ float fa3_lanes_top(float w)
{
  float r;
  asm("{\n .reg .b32 tw, lo, hi;\n mov.b32 tw, %1;\n and.b32 lo, tw, 0xffff;\n shr.u32 hi, tw, 16;\n"
      " max.u32 lo, lo, hi;\n add.u32 lo, lo, 0x49C00000;\n mov.b32 %0, lo;\n}\n"
      : "=f"(r)
      : "f"(w));
  return r;
}

/* The same from P itself (the exact path's P, for the linear tiles): e4m3's code rounded to
 * nearest from P's exponent and top mantissa bits; P under 2^-6 (e4m3's subnormals, about 2^-12
 * of the row's max) becomes 0, and NaN stays NaN. */
__device__ __forceinline__ float fa3_code_of(float p)
{
  const int code = min(max((int)((__float_as_uint(p) + 0x80000u) >> 20) - 960, 0), FA3_LIN_MAX_CODE);
  const float z = __uint_as_float(__float_as_uint(FA3_LIN_MAGIC) + (unsigned)code);
  return p == p ? z : p;
}

static_assert(FA3_D == 64 || FA3_D == 128 || FA3_D == 256 || (FA3_WS && (FA3_D == 96 || FA3_D == 192)),
              "head dim 64, 128 or 256 (warp-specialized: also 96 and 192)");
static_assert(FA3_WS ? FA3_BN % 16 == 0 && FA3_BN <= 256 : FA3_BN == 64 || FA3_BN == 128,
              "BLOCK_N 64 or 128 (warp-specialized: a multiple of 16 up to 256)");
static_assert(FA3_BM == 16 * FA3_WARPS && FA3_WARPS % 4 == 0, "16 rows per warp, whole warpgroups");
static_assert(FA3_STAGES >= 2 && FA3_STAGES <= 4, "2..4 K/V stages");
static_assert(FA3_SMEM_BYTES <= FA3_SMEM_LIMIT, "shared memory over the target's limit");

/* ---- PTX wrappers ----------------------------------------------------------------------------- */

__device__ __forceinline__ unsigned fa3_prmt(unsigned a, unsigned b, unsigned sel)
{
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

/* ---- global -> shared ------------------------------------------------------------------------- */

/* Rows [row0, row0 + R) of a [rows_total][D] slice (row stride `stride` bytes) into a tile of
 * R rows in CW_D column blocks; rows past rows_total are zero-filled. Thread i copies 16-byte
 * chunk i % CPR of rows i / CPR, i / CPR + STEP, ...: a warp reads whole rows, and its 8 chunks of
 * one 128-byte block land in 8 distinct swizzled chunks. */
template <int R>
__device__ __forceinline__ void fa3_load_tile(unsigned tile, const unsigned char *base, int stride, int row0,
                                              int rows_total, int tid)
{
  constexpr int CPR = FA3_ROWB / 16;
  constexpr int STEP = FA3_THREADS / CPR;
  static_assert(FA3_THREADS % CPR == 0 && R % STEP == 0, "whole rows per pass");
  const int c = tid % CPR, r = tid / CPR;
  const unsigned char *src = base + (long long)(row0 + r) * stride + 16 * c;
  const long long step = (long long)STEP * stride;
#pragma unroll
  for (int i = 0; i < R / STEP; i++) {
    const bool valid = row0 + r + i * STEP < rows_total;
    at_cp_async16(tile + at_swz_off<R, FA3_CW_D>(r + i * STEP, 16 * c), valid ? src : base, valid ? 16 : 0);
    src += step;
  }
}

#if FA3_FP8 && !FA3_VT_PRE /* 16-bit V is read MN-major by wgmma, not transposed */
/* V [BN][D] -> V^T [D][BN] in the key order of P's A fragment (header). Work units: 8 groups of
 * 4 d's x one 16-byte chunk (4 words) of V^T rows, i.e. 16 keys; warp w of NW takes units
 * w + NW*i. Where the unit count per warp is a compile-time constant and a unit's coordinates
 * split into this warp's part and the compile-time part of i (FOLD), the offsets fold into a few
 * adds per unit (a loop from `warp` with runtime coordinates cost ~50 integer instructions per
 * unit); the warp-specialized kernel's 3 transposing warps take the runtime form, off the
 * consumers' path. */
/* One unit: 16 keys (block wb) x 4 d's of the 32-d block ab, this lane's share. Store e writes
 * V^T row d0 + drow[e]; pair[] are the permute selectors (fa3_transpose_v). */
__device__ __forceinline__ void fa3_transpose_unit(unsigned vt, unsigned v, int wb, int ab, int g, int tw,
                                                   const int *drow, const unsigned *pair)
{
  const int d0 = 32 * ab + 4 * g;
  const int w = 4 * wb + tw;
  const int key0 = 16 * wb + 2 * tw; /* = 32(w/8) + 16((w/4)%2) + 2(w%4) */
  unsigned in[4];
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const int key = key0 + (k & 1) + 8 * (k >> 1);
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(in[k]) : "r"(v + at_swz_off<FA3_BN, FA3_CW_D>(key, d0)));
  }
#pragma unroll
  for (int e = 0; e < 4; e++) {
    /* keys 0,1 of d_a and d_b in lo, keys 2,3 in hi; the word of d_a is their low halves */
    const unsigned lo = fa3_prmt(in[0], in[1], pair[e / 2]), hi = fa3_prmt(in[2], in[3], pair[e / 2]);
    const unsigned word = fa3_prmt(lo, hi, e % 2 ? 0x7632u : 0x5410u);
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(vt + at_swz_off<FA3_D, FA3_CW_N>(d0 + drow[e], 4 * w)), "r"(word)
                 : "memory");
  }
}

template <int NW> __device__ __forceinline__ void fa3_transpose_v(unsigned vt, unsigned v, int warp, int lane)
{
  constexpr int NB = FA3_BN / 16; /* 16-key units along the keys */
  constexpr int UNITS = (FA3_D / 32) * NB;
  constexpr bool FOLD = UNITS % NW == 0 && (NB % NW == 0 || NW % NB == 0);
  const int g = lane >> 2, tw = lane & 3, rot = (g >> 1) & 3;
  /* Store e writes V^T row d0 + drow[e], drow[e] = (e + rot) % 4. One permute of two key rows
   * gathers the bytes of two of those d's (pair[0]: stores 0 and 1, pair[1]: stores 2 and 3), so
   * a pair of output words costs 4 permutes instead of 6. */
  int drow[4];
  unsigned pair[2];
#pragma unroll
  for (int e = 0; e < 4; e++) drow[e] = (e + rot) & 3;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const unsigned a = (unsigned)drow[2 * h], b = (unsigned)drow[2 * h + 1];
    pair[h] = a | (a + 4) << 4 | b << 8 | (b + 4) << 12;
  }
  if constexpr (FOLD) {
    const int wb0 = warp % NB, ab0 = warp / NB;
#pragma unroll
    for (int i = 0; i < UNITS / NW; i++)
      fa3_transpose_unit(vt, v, wb0 + (NW * i) % NB, ab0 + (NW * i) / NB, g, tw, drow, pair);
  } else {
    /* Not unrolled: these warps run on few registers, and nothing folds at run time anyway. */
#pragma unroll 1
    for (int u = warp; u < UNITS; u += NW) fa3_transpose_unit(vt, v, u % NB, u / NB, g, tw, drow, pair);
  }
}
#endif

/* ---- steps of one K/V tile ------------------------------------------------------------------ */

/* Where k step ks (32 bytes of the row) of a K-major operand tile of R rows starts. */
template <int R> __device__ __forceinline__ unsigned fa3_k_step(int ks)
{
  return (unsigned)((32 * ks / FA3_CW_D) * R * FA3_CW_D + 32 * ks % FA3_CW_D);
}

/* Issue S = Q K^T for this warpgroup's 64 rows (not waited for): 32-byte k steps of the row. */
__device__ __forceinline__ void fa3_issue_qk(float (*s)[4], unsigned q_wg, unsigned k_tile)
{
  const unsigned long long dq = at_wgmma_desc<FA3_CW_D>(q_wg), dk = at_wgmma_desc<FA3_CW_D>(k_tile);
#pragma unroll
  for (int ks = 0; ks < FA3_QK; ks++)
    fa3_mma_qk(&s[0][0], at_wgmma_desc_advance(dq, fa3_k_step<FA3_BM>(ks)),
               at_wgmma_desc_advance(dk, fa3_k_step<FA3_BN>(ks)), ks > 0);
}

#if FA3_QREG
/* Issue S = Q K^T with Q's A fragments from registers (.qr; not waited for). */
__device__ __forceinline__ void fa3_issue_qk_regs(float (*s)[4], const unsigned (*qf)[4], unsigned k_tile)
{
  const unsigned long long dk = at_wgmma_desc<FA3_CW_D>(k_tile);
#pragma unroll
  for (int ks = 0; ks < FA3_QK; ks++)
    fa3_mma_qk_rs(&s[0][0], qf[ks], at_wgmma_desc_advance(dk, fa3_k_step<FA3_BN>(ks)), ks > 0);
}
#endif

/* Issue O += P V (not waited for). FP8: V from the V^T buffer (K-major); 16-bit: V's tile as
 * loaded ([key][d], d in 128-byte column blocks) is the MN-major B, k step kk 16 key rows down.
 * FA3_ONES_BLOCK: and the row sums, P times the ones block, d_ones (every k step the same ones). */
__device__ __forceinline__ void fa3_issue_pv(float (*acc)[4], const unsigned (*p)[4], unsigned v_buf,
                                             unsigned long long d_ones = 0ull)
{
  (void)d_ones;
#if FA3_FP8
  const unsigned long long dv = at_wgmma_desc<FA3_CW_N>(v_buf);
#else
  const unsigned long long dv = at_wgmma_desc_mn<FA3_BN * 128>(v_buf);
#endif
#pragma unroll
  for (int kk = 0; kk < FA3_PK; kk++) {
#if FA3_FP8
    const int col = 32 * kk;
    const unsigned block = (unsigned)((col / FA3_CW_N) * FA3_VT_BLOCK_BYTES + col % FA3_CW_N);
    fa3_mma_pv(&acc[0][0], p[kk], at_wgmma_desc_advance(dv, block));
#if FA3_PV_SUMS_APART /* the ones rows: D rows of CW_N bytes down the column block */
    fa3_mma_pv_sums(&acc[FA3_OT - 1][0], p[kk], at_wgmma_desc_advance(dv, block + FA3_D * FA3_CW_N));
#endif
#else
    fa3_mma_pv(&acc[0][0], p[kk], at_wgmma_desc_advance(dv, (unsigned)(kk * 16 * 128)));
#if FA3_ONES_BLOCK
    fa3_mma_pv_sums(&acc[FA3_OT - 1][0], p[kk], d_ones);
#endif
#endif
  }
}

/* Wait for S = Q K^T, the older of the two groups when P V of the previous tile was issued
 * after it. P V's commit sits inside its `if`: an empty group on the first tile made ptxas put
 * a dummy wgmma into every tile's group sequence, and the wait for S then waited for P V too,
 * with no P V / softmax overlap left (v17). */
__device__ __forceinline__ void fa3_wait_s(bool pv_in_flight)
{
  if (pv_in_flight) asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  else at_wgmma_wait0();
}

/* Keys past S, and for causal masks keys after the row's diagonal, get -inf. */
__device__ __forceinline__ void fa3_mask(float (*s)[4], int row0, int key0, int S, int offset, int g, int tq)
{
#pragma unroll
  for (int nt = 0; nt < FA3_NT; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int i = row0 + g + (e >> 1) * 8;
      const int j = key0 + nt * 8 + 2 * tq + (e & 1);
      if (j >= S || (FA3_CAUSAL && j > i + offset)) s[nt][e] = AT_NEG_INF;
    }
}

/* A max of three floats known to be non-negative, as the signed integers their bit patterns are,
 * which order the same way: one VIMNMX3 on sm_90, where FMNMX takes two (v36). In PTX, as
 * fa3_or_bits: a C bit cast of S made ptxas serialize the wgmmas (C7514). A positive NaN is the
 * largest pattern, so it wins here where fmaxf drops it. */
__device__ __forceinline__ float fa3_max3_nonneg(float a, float b, float c)
{
  float r;
  asm(FA3_MAX3_ASM("s32") : "=f"(r) : "f"(a), "f"(b), "f"(c));
  return r;
}

/* m[0] becomes the largest of m[0..n) by a tree of ARITY-input nodes, max3(a, b, c) (ARITY 2
 * passes b as c): n - 1 dependent maxes in a chain stood before every exponential (v13). */
template <int ARITY, int N, class Max3>
__device__ __forceinline__ float fa3_tree_max(float (&m)[N], int n, Max3 max3)
{
#pragma unroll
  for (int w = 1; w < N; w *= ARITY)
#pragma unroll
    for (int i = 0; i + w < N; i += ARITY * w)
      if (i + w < n) m[i] = max3(m[i], m[i + w], ARITY == 3 && i + 2 * w < n ? m[i + 2 * w] : m[i + w]);
  return m[0];
}

/* The largest of a row half's BN/4 scores in this thread (EXACT_ONLY: of the n8 tiles FA3_LINP
 * leaves exact). NONNEG, for values never negative (P): three a node by fa3_max3_nonneg (v36),
 * half the instructions and fewer levels; there a NaN P fails the speculative check, where the
 * FMNMX tree dropped it and passed. */
template <bool EXACT_ONLY = false, bool NONNEG = false>
__device__ __forceinline__ float fa3_row_max(const float (*s)[4], int half)
{
  float m[2 * FA3_NT];
  int n = 0;
#pragma unroll
  for (int nt = 0; nt < FA3_NT; nt++)
    if (!EXACT_ONLY || !fa3_lin_tile(nt)) m[n++] = s[nt][2 * half], m[n++] = s[nt][2 * half + 1];
  if (n == 0) return AT_NEG_INF;
  if (NONNEG) return fa3_tree_max<3>(m, n, [](float a, float b, float c) { return fa3_max3_nonneg(a, b, c); });
  return fa3_tree_max<2>(m, n, [](float a, float b, float) { return fmaxf(a, b); });
}

/* The lane-wise largest of a row half's lane words (the linear tiles' element 2 half): a quarter
 * of an instruction a code where fa3_row_max took half (v39). */
__device__ __forceinline__ float fa3_lin_lanes_max(const float (*s)[4], int half)
{
  float m[FA3_NT];
  int n = 0;
#pragma unroll
  for (int nt = 0; nt < FA3_NT; nt++)
    if (fa3_lin_tile(nt)) m[n++] = s[nt][2 * half];
  if (n == 0) return 0.f;
  return fa3_tree_max<3>(m, n, [](float a, float b, float c) { return fa3_lanes_max3(a, b, c); });
}

/* Online softmax of one tile, as fa2.cu's: s becomes p = 2^(s*scale*log2e - m) (FP8: times 448,
 * added as log2 448 in the exponent); row_max and row_sum move on; alpha rescales the old O.
 * SPEC (FA3_SPEC): a row max that moves goes the headroom past the new max. */
template <bool SPEC>
__device__ __forceinline__ void fa3_softmax(float (*s)[4], float *row_max, float *row_sum, float *alpha,
                                            float scale_log2)
{
#pragma unroll
  for (int half = 0; half < 2; half++) {
    float mx = fmaxf(row_max[half], fa3_row_max(s, half));
    mx = at_quad_max(mx);
    if (SPEC && mx > row_max[half] && scale_log2 > 0.f) mx += FA3_SPEC_HEADROOM / scale_log2;
    float m_shift;
    if constexpr (FA3_LINP) {
      /* both references as the speculative tiles take them (fa3_lin_ref, fa3_softmax_spec) */
      float c;
      const float m_old = fa3_lin_ref(__fsub_rn(fmaxf(__fmul_rn(row_max[half], scale_log2), -3.402823466e38f),
                                                FA3_P_LOG2_SCALE), c);
      m_shift = fa3_lin_ref(__fsub_rn(fmaxf(__fmul_rn(mx, scale_log2), -3.402823466e38f), FA3_P_LOG2_SCALE), c);
      alpha[half] = at_exp2(m_old - m_shift);
    } else {
      const float m_scaled = mx == AT_NEG_INF ? 0.f : mx * scale_log2;
      alpha[half] = at_exp2(row_max[half] * scale_log2 - m_scaled);
      m_shift = m_scaled - FA3_P_LOG2_SCALE;
    }
    row_max[half] = mx;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < FA3_NT; nt++) {
      s[nt][2 * half] = at_exp2(fmaf(s[nt][2 * half], scale_log2, -m_shift));
      s[nt][2 * half + 1] = at_exp2(fmaf(s[nt][2 * half + 1], scale_log2, -m_shift));
      if (!FA3_ONES) sum += s[nt][2 * half] + s[nt][2 * half + 1];
    }
    if (!FA3_ONES) row_sum[half] = row_sum[half] * alpha[half] + sum; /* FA3_ONES: O's last n8 tile */
  }
  if (SPEC && FA3_LINP)
#pragma unroll
    for (int nt = 0; nt < FA3_NT; nt++)
      if (fa3_lin_tile(nt))
#pragma unroll
        for (int half = 0; half < 2; half++)
          s[nt][2 * half] = fa3_lin_lanes(fa3_code_of(s[nt][2 * half]), fa3_code_of(s[nt][2 * half + 1]));
}

/* bits | the words of a and b. In PTX, not by __float_as_uint: a bit cast of S's registers (wgmma
 * accumulators) turns them into integer registers for NVVM, and ptxas then serializes the
 * kernel's wgmmas (C7514), even where the cast is dead code. */
__device__ __forceinline__ unsigned fa3_or_bits(unsigned bits, float a, float b)
{
  asm("{\n .reg .b32 ta, tb;\n mov.b32 ta, %1;\n mov.b32 tb, %2;\n or.b32 %0, %0, ta;\n or.b32 %0, %0, tb;\n}\n"
      : "+r"(bits)
      : "f"(a), "f"(b));
  return bits;
}

/* FA3_SPEC's softmax of a tile after the first: P from the reference as it stands, then the
 * check (the header's "Speculative row max"). Returns true where the warp must recompute S and
 * take the exact path, with row_max and row_sum as they were. */
__device__ __forceinline__ bool fa3_softmax_spec(float (*s)[4], float *row_max, float *row_sum, float *alpha,
                                                 float scale_log2)
{
  /* 2^L: FP8 passes P <= 448; 16-bit (v35) P < 2, below */
  constexpr float P_LIMIT = FA3_FP8 ? 448.f : 2.f;
  constexpr float Z_LIMIT = FA3_LIN_MAGIC + FA3_LIN_MAX_CODE * 0.125f;
  /* 16-bit (v35): the check is one bit of the OR of P's words, where a max took a compare per
   * score. A non-negative float is below 2 exactly where bit 30 (the exponent's top bit) is clear,
   * and an OR has a bit set where any operand has it, so the tile passes iff every P < 2 (inf
   * and NaN have the bit); the 3-input LOP3 folds two scores an instruction against FMNMX's one.
   * So 16-bit P may reach 2 (one octave more of the headroom spent; P's range is unharmed). FP8
   * keeps the max: 448 is no single bit. */
  constexpr bool BITS = !FA3_FP8;
  float sum[2] = {0.f, 0.f}, pmax[2], zmax[2] = {AT_NEG_INF, AT_NEG_INF}, m_shift[2], c_lin[2];
  const float a_lin = __fmul_rn(scale_log2, 0x1p-21f);
  unsigned p_bits = 0u;
  /* The exponent's offset, recomputed from row_max (two instructions a tile) rather than kept
   * across the loop (two registers, which the tiles at the register budget cannot spare). A row
   * that has seen no key (-inf) gets a finite one, so its masked scores still give 0. FA3_LINP:
   * the reference of fa3_lin_ref, and c for the linear tiles (v24). */
#pragma unroll
  for (int half = 0; half < 2; half++) {
    if constexpr (FA3_LINP)
      m_shift[half] = __fsub_rn(fmaxf(__fmul_rn(row_max[half], scale_log2), -3.402823466e38f), FA3_P_LOG2_SCALE);
    else
      m_shift[half] = fmaxf(row_max[half] * scale_log2, -3.402823466e38f) - FA3_P_LOG2_SCALE;
  }
  if constexpr (FA3_LINP) {
    /* A reference out of fa3_lin_ref's range (scores some 10^6 octaves apart): the exact path. */
    if (__any_sync(0xffffffffu, !(fa3_lin_ref_ok(m_shift[0]) && fa3_lin_ref_ok(m_shift[1])))) return true;
#pragma unroll
    for (int half = 0; half < 2; half++) {
      m_shift[half] = fa3_lin_ref_in_range(m_shift[half], c_lin[half]);
      /* v41: code * 2^-24 = (s * scale_log2 + c - MAGIC) * 2^-21, both factors exact (c - MAGIC by
       * Sterbenz, a power of two); the FFMA rounds once, the F2FP to the code. */
      c_lin[half] = __fmul_rn(__fsub_rn(c_lin[half], FA3_LIN_MAGIC), 0x1p-21f);
    }
  }
#pragma unroll
  for (int half = 0; half < 2; half++) {
#pragma unroll
    for (int nt = 0; nt < FA3_NT; nt++) {
      if (fa3_lin_tile(nt)) { /* two codes as one lane word (v41) */
        s[nt][2 * half] = fa3_lin_lanes_of(fmaf(s[nt][2 * half], a_lin, c_lin[half]),
                                           fmaf(s[nt][2 * half + 1], a_lin, c_lin[half]));
        continue;
      }
      s[nt][2 * half] = at_exp2(fmaf(s[nt][2 * half], scale_log2, -m_shift[half]));
      s[nt][2 * half + 1] = at_exp2(fmaf(s[nt][2 * half + 1], scale_log2, -m_shift[half]));
      if (!FA3_ONES) sum[half] += s[nt][2 * half] + s[nt][2 * half + 1];
      if (BITS) p_bits = fa3_or_bits(p_bits, s[nt][2 * half], s[nt][2 * half + 1]);
    }
    if (!BITS) pmax[half] = fa3_row_max<FA3_LINP != 0, true>(s, half);
    if (FA3_LINP) zmax[half] = fa3_lanes_top(fa3_lin_lanes_max(s, half));
  }
  const bool codes_fit = !FA3_LINP || (zmax[0] <= Z_LIMIT && zmax[1] <= Z_LIMIT);
  static_assert(!BITS || P_LIMIT == 2.f, "bit 30 is clear exactly below 2");
  const bool p_fit = BITS ? (p_bits & 0x40000000u) == 0u : pmax[0] <= P_LIMIT && pmax[1] <= P_LIMIT;
  if (__all_sync(0xffffffffu, p_fit && codes_fit)) {
    alpha[0] = alpha[1] = 1.f;
    if (!FA3_ONES) row_sum[0] += sum[0], row_sum[1] += sum[1];
    return false;
  }
  /* Some row of the warp passed its reference: the rows' maxes over their quads (16-bit: taken
   * here, off the common path; the OR's bits bound no float, 0x80 | 0x7f being 0xff). */
  float pm[2], zm[2] = {AT_NEG_INF, AT_NEG_INF};
  if (BITS) pmax[0] = fa3_row_max(s, 0), pmax[1] = fa3_row_max(s, 1);
  pm[0] = at_quad_max(pmax[0]), pm[1] = at_quad_max(pmax[1]);
  if (FA3_LINP) zm[0] = at_quad_max(zmax[0]), zm[1] = at_quad_max(zmax[1]);
  /* Past 2^100 (or inf, or NaN) the factor below would underflow, or P lost its scores. */
  constexpr float Z_HUGE = FA3_LIN_MAGIC + 100.f; /* a linear code of 2^93 */
  const bool codes_ok = !FA3_LINP || (zm[0] < Z_HUGE && zm[1] < Z_HUGE);
  if (__any_sync(0xffffffffu, !(pm[0] < 0x1p100f && pm[1] < 0x1p100f && codes_ok))) return true;
  /* The rows past their reference move it so that their max becomes 2^(L - headroom), as the
   * exact path puts it; the others keep theirs (d = 0). Without branches: S's registers are
   * wgmma accumulators, and writes to them on a divergent path make ptxas serialize the
   * kernel's wgmmas. */
#pragma unroll
  for (int half = 0; half < 2; half++) {
#if FA3_LINP
    /* log2 of the row's largest P, from either kind of tile; the shift is a whole number of
     * codes (eighths of an octave), so the linear tiles move by an exact add. */
    const float lp = fmaxf(pm[half] > 0.f ? at_log2(pm[half]) : AT_NEG_INF,
                           zm[half] - (FA3_LIN_MAGIC + FA3_LIN_BIAS));
    const bool past = pm[half] > P_LIMIT || zm[half] > Z_LIMIT;
    const float d = past ? 0.125f * rintf(8.f * ((FA3_P_LOG2_SCALE - FA3_SPEC_HEADROOM) - lp)) : 0.f;
#else
    const bool past = BITS ? pm[half] >= P_LIMIT : pm[half] > P_LIMIT;
    const float d = past ? (FA3_P_LOG2_SCALE - FA3_SPEC_HEADROOM) - at_log2(pm[half]) : 0.f;
#endif
    const float f = at_exp2(d);
    const unsigned kk = ((unsigned)(int)(8.f * d) & 0xffffu) * 0x10001u; /* d in codes, both lanes */
#pragma unroll
    for (int nt = 0; nt < FA3_NT; nt++) {
      if (fa3_lin_tile(nt)) {
        s[nt][2 * half] = fa3_lanes_shift(s[nt][2 * half], kk);
        continue;
      }
      s[nt][2 * half] *= f, s[nt][2 * half + 1] *= f;
    }
    alpha[half] = f;
    row_max[half] = __fdividef(m_shift[half] - d + FA3_P_LOG2_SCALE, scale_log2);
    if (!FA3_ONES) row_sum[half] = row_sum[half] * f + sum[half] * f;
  }
  return false;
}

/* FA3_SPEC's rare path: this thread's S of a K tile again, by scalar FMAs from the Q and K tiles
 * in shared memory (run only where a score stood 2^100 above the row's reference). qrow: the
 * warp's first row in the CTA's Q tile. The n8 tiles go by in a loop that is not unrolled, each
 * written to its registers by selects: fully unrolled, this path alone was 60% of the kernel's
 * code, and the kernel ran 10% slower with it (bf16 D 128 128x176) without ever taking it. */
__device__ __forceinline__ float fa3_smem_elem(unsigned addr)
{
  unsigned x;
#if FA3_FP8
  asm volatile("ld.shared.u8 %0, [%1];\n" : "=r"(x) : "r"(addr) : "memory");
#else
  asm volatile("ld.shared.u16 %0, [%1];\n" : "=r"(x) : "r"(addr) : "memory");
#endif
  return at_in_to_float((at_in_t)x);
}

__device__ __forceinline__ void fa3_recompute_s(float (*s)[4], unsigned q, unsigned k_tile, int qrow, int g, int tq)
{
#pragma unroll 1
  for (int nt = 0; nt < FA3_NT; nt++) {
    float dot[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = qrow + g + (e >> 1) * 8, j = nt * 8 + 2 * tq + (e & 1);
      dot[e] = 0.f;
#pragma unroll 1
      for (int d = 0; d < FA3_D; d++)
        dot[e] = fmaf(fa3_smem_elem(q + at_swz_off<FA3_BM, FA3_CW_D>(r, d * FA3_ESIZE)),
                      fa3_smem_elem(k_tile + at_swz_off<FA3_BN, FA3_CW_D>(j, d * FA3_ESIZE)), dot[e]);
    }
#pragma unroll
    for (int n = 0; n < FA3_NT; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[n][e] = n == nt ? dot[e] : s[n][e];
  }
}

/* O *= alpha per row half, skipped where alpha is 1 for every row of the warp (v15; common.cuh). */
__device__ __forceinline__ void fa3_rescale(float (*acc)[4], const float *alpha) { at_rescale_o<FA3_OT, true>(acc, alpha); }

/* P's A fragment from the S accumulators. FP8: n8 tiles 4kk..4kk+3 are the E4M3 fragment of keys
 * 32kk..32kk+31 (the header's order); 16-bit: n8 tiles 2kk, 2kk+1 are keys 16kk..16kk+15, in order. */
__device__ __forceinline__ void fa3_pack_p(const float (*s)[4], unsigned (*p)[4])
{
#pragma unroll
  for (int kk = 0; kk < FA3_PK; kk++) {
#if FA3_FP8
    p[kk][0] = fa3_p_bytes(&s[4 * kk], 4 * kk, 0), p[kk][1] = fa3_p_bytes(&s[4 * kk], 4 * kk, 2);
    p[kk][2] = fa3_p_bytes(&s[4 * kk + 2], 4 * kk + 2, 0), p[kk][3] = fa3_p_bytes(&s[4 * kk + 2], 4 * kk + 2, 2);
#else
    p[kk][0] = at_pack_out(s[2 * kk][0], s[2 * kk][1]);
    p[kk][1] = at_pack_out(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = at_pack_out(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = at_pack_out(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#endif
  }
}

/* FA3_ONES: the row sums of the P V just waited for (O's last n8 tile, in every thread) join the
 * fp32 row sums, and the tile starts again from 0. Left to accumulate over the whole row, the
 * sums came out 14% off at S 8192: FP8 wgmma accumulates in less than fp32, and these sums
 * only grow (test_fp8_gpu's short rows passed). Summed per tile, they stay small. */
__device__ __forceinline__ void fa3_take_row_sums(float (*acc)[4], float *row_sum)
{
  if (!FA3_ONES) return;
  if (FA3_ONES_BLOCK) { /* fp32 all along: taken once, after the last P V */
    row_sum[0] = acc[FA3_OT - 1][0], row_sum[1] = acc[FA3_OT - 1][2];
    return;
  }
  /* One asm for the adds and the zeroing: written as C, the compiler's copies of the tile made
   * ptxas spill 1.6 KB. */
  asm("{\nadd.f32 %0, %0, %2;\nadd.f32 %1, %1, %3;\nmov.b32 %2, 0;\nmov.b32 %3, 0;\nmov.b32 %4, 0;\nmov.b32 %5, 0;\n}\n"
      : "+f"(row_sum[0]), "+f"(row_sum[1]), "+f"(acc[FA3_OT - 1][0]), "+f"(acc[FA3_OT - 1][2]),
        "+f"(acc[FA3_OT - 1][1]), "+f"(acc[FA3_OT - 1][3]));
}

/* The end of a tile in the overlapped loop, run at the top of the next tile (and after the
 * last): wait for P V of the tile before, rescale O (and FA3_ONES' row sums), pack P. Written
 * after the softmax, in its basic block, ptxas scheduled this wait before the exponentials, so
 * P V never ran under them; behind the loop's back edge it cannot (v17). */
__device__ __forceinline__ void fa3_finish_tile(float (*acc)[4], const float *alpha, float *row_sum,
                                                const float (*s)[4], unsigned (*p)[4])
{
  at_wgmma_wait0();
  if (FA3_ONES_ROWS) { /* FP8: each tile's sums join fp32 (16-bit's stay in O's tile to the end) */
    fa3_take_row_sums(acc, row_sum);
    row_sum[0] *= alpha[0], row_sum[1] *= alpha[1];
  }
  fa3_rescale(acc, alpha);
  fa3_pack_p(s, p);
}

/* The K/V tiles a block of query rows from m0 visits, and how many of them (from the first) no
 * key of which is masked for any of its rows: every tile of S, cut at the last row's diagonal
 * for causal masks (offset = S - T bottom-right, else 0). */
__device__ __forceinline__ void fa3_key_tiles(int m0, int T, int S, int offset, int *n_tiles, int *n_full)
{
  *n_tiles = (S + FA3_BN - 1) / FA3_BN;
  *n_full = S / FA3_BN;
  if (FA3_CAUSAL) {
    const int last_row = min(m0 + FA3_BM, T) - 1;
    const int last_key = last_row + offset;
    *n_tiles = last_key < 0 ? 0 : min(*n_tiles, last_key / FA3_BN + 1);
    const int first_row_keys = m0 + offset + 1;
    *n_full = first_row_keys <= 0 ? 0 : min(*n_full, first_row_keys / FA3_BN);
  }
}

/* The row sum of row half (0: g, 1: g + 8) of this thread's rows: with FA3_ONES every thread holds
 * the whole sum (from O's last n8 tile), otherwise a quarter of it (its quad's columns). */
__device__ __forceinline__ float fa3_whole_row_sum(const float *row_sum, int half)
{
  return FA3_ONES ? row_sum[half] : at_quad_sum(row_sum[half]);
}

/* The warp-specialized kernel's epilogue: O = acc / row sum (times V's descale) of this warp's
 * 16 rows, m0 + wrow on, below `rows`, and their lse (T rows per head); lane (g,t) holds columns
 * 8j + 2t, 8j + 2t + 1 of rows g and g+8. Only D's columns are stored (a D 96 tile holds 128). The in-CTA kernel keeps the same
 * lines inline: called through here, ptxas schedules its causal variants differently, and its
 * machine code is what docs/perf.md measured. */
__device__ __forceinline__ void fa3_store_o(at_out_t *__restrict__ o, float *__restrict__ lse, const float (*acc)[4],
                                            const float *row_max, const float *row_sum, float o_descale,
                                            float scale_log2, int T, int rows, int b, int h, int n_heads, int m0,
                                            int wrow, long long o_sb, int o_ss, int o_sh, int g, int tq)
{
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const float sum = fa3_whole_row_sum(row_sum, half);
    const float inv = sum > 0.f ? o_descale / sum : 0.f;
    const int r = wrow + g + half * 8;
    if (m0 + r >= rows) continue;
    if (FA3_LSE && tq == 0) {
      const float m = row_max[half];
      lse[((long long)b * n_heads + h) * T + m0 + r] =
          sum > 0.f ? (m * scale_log2 + at_log2(sum) - FA3_P_LOG2_SCALE) * 0.69314718055994531f : AT_NEG_INF;
    }
    at_out_t *orow = o + b * o_sb + (long long)h * o_sh + (long long)(m0 + r) * o_ss + 2 * tq;
#pragma unroll
    for (int j = 0; j < FA3_D / 8; j++) {
      const unsigned packed = at_pack_out(acc[j][2 * half] * inv, acc[j][2 * half + 1] * inv);
      asm volatile("st.global.b32 [%0], %1;\n" ::"l"(orow + 8 * j), "r"(packed) : "memory");
    }
  }
}

/* ---- V^T ahead (FA3_VT_PRE): V's transpose, the first kernel of the call ----------------------- */
#if FA3_VT_PRE
static_assert(FA3_WS, "V^T ahead feeds the warp-specialized kernel");
/* D is transposed in pieces of 128 bytes, or at D 64 in one of 64 (generator/fa3.c describe_vt). */
static constexpr int FA3_VT_PIECE = FA3_D < 128 ? FA3_D : 128;
static constexpr int FA3_VT_PIECES = FA3_D / FA3_VT_PIECE;
static constexpr int FA3_VT_CHUNKS = FA3_VT_PIECE / 16; /* 16-byte chunks of a key row's piece */
static_assert((FA3_D % 128 == 0 || FA3_D == 64) && FA3_VT_KEYS == 128 && FA3_VT_THREADS == 256,
              "a transposing CTA: 128 keys x a piece of 128 (or 64) bytes of D, one 4 d x 16 key unit per thread");

/* V [B][S][Nkv][D] (the call's strides) -> V^T [B][Nkv][D][S'] in the scratch, S' = S rounded up to
 * BN, keys >= S zero, each 32 keys in the order of P's A fragment (the header: slot 4w+i holds key
 * 32(w/8) + 16((w/4)%2) + 2(w%4) + {0,1,8,9}[i]), so that a TMA box of V^T lands in shared memory
 * as the in-CTA transpose writes it. Grid (S' / 128 rounded up, Nkv x D / 128, B; at D 64, Nkv
 * pieces of 64 bytes): a CTA moves 128 keys x 128 bytes of D, by 16-byte loads (8 lanes per key
 * row: whole 128-byte lines; 4 lanes at D 64) into shared memory as [key][32 words] (D 64: 16
 * words of each), and 16-byte stores of V^T (8 lanes per row; at D 64 half the threads store).
 * In shared memory word w of key k sits at w ^ 4((k / 16) % 8): the loads' 4-word chunks stay
 * whole, and the transpose reads, lane (c, dg) taking word dg of keys 16c + 0..15, hit 32 distinct
 * banks. A thread's unit:
 * d's 4dg .. 4dg+3 by the 16 slots of chunk c of the 128 (keys 16c + 2(s/4) + {0,1,8,9}[s%4]):
 * 16 words in, byte permutes, 4 rows of 16 bytes out. Memory-bound: it moves 2 B Nkv S D bytes. */
extern "C" __global__ void __launch_bounds__(FA3_VT_THREADS)
FA3_VT_KERNEL(const unsigned char *__restrict__ v, unsigned char *__restrict__ vt, int S, long long v_sb, int v_ss,
              int v_sh)
{
  __shared__ __align__(16) unsigned tile[FA3_VT_KEYS * 32];
  const int n_kv = gridDim.y / FA3_VT_PIECES, h = blockIdx.y / FA3_VT_PIECES, piece = blockIdx.y % FA3_VT_PIECES;
  const int b = blockIdx.z, key0 = blockIdx.x * FA3_VT_KEYS, tid = threadIdx.x;
  const long long s_pad = ((long long)(S > 0 ? S : 1) + FA3_BN - 1) / FA3_BN * FA3_BN;
  at_wait_for_previous_grid(); /* V may be the previous kernel's output; its readers of V^T are done */

  {
    /* chunk j of key rows r, r + R, r + 2R, ... (R = 32 key rows a pass, 64 at D 64) */
    constexpr int R = FA3_VT_THREADS / FA3_VT_CHUNKS;
    const int j = tid % FA3_VT_CHUNKS, r = tid / FA3_VT_CHUNKS;
    const unsigned char *src = v + b * v_sb + (long long)h * v_sh + piece * FA3_VT_PIECE + 16 * j;
    uint4 x[FA3_VT_KEYS / R];
#pragma unroll
    for (int i = 0; i < FA3_VT_KEYS / R; i++) {
      const int key = key0 + r + R * i;
      x[i] = key < S ? __ldg((const uint4 *)(src + (long long)key * v_ss)) : make_uint4(0u, 0u, 0u, 0u);
    }
    at_allow_next_grid(); /* the attention kernel may be placed; it waits for this grid's end */
#pragma unroll
    for (int i = 0; i < FA3_VT_KEYS / R; i++) {
      const int k = r + R * i;
      *(uint4 *)&tile[k * 32 + 4 * (j ^ ((k / 16) % 8))] = x[i];
    }
  }
  __syncthreads();

  const int c = tid % 8, dg = tid / 8; /* slots 16c .. 16c+15, d's 4dg .. 4dg+3 of this piece */
  unsigned in[16];
#pragma unroll
  for (int sl = 0; sl < 16; sl++) {
    const int k = 16 * c + 2 * (sl / 4) + ((sl % 4) & 1) + 8 * ((sl % 4) >> 1);
    in[sl] = tile[k * 32 + (dg ^ (4 * c))]; /* (k / 16) % 8 == c */
  }
  if (key0 + 16 * c >= s_pad || (FA3_VT_PIECE < 128 && 4 * dg >= FA3_VT_PIECE)) return; /* D 64: half store */
  unsigned out[4][4]; /* [d row e][word q]: byte i of word q is byte e of in[4q + i] */
#pragma unroll
  for (int q = 0; q < 4; q++) {
    const unsigned lo01 = fa3_prmt(in[4 * q], in[4 * q + 1], 0x5140u), hi01 = fa3_prmt(in[4 * q], in[4 * q + 1], 0x7362u);
    const unsigned lo23 = fa3_prmt(in[4 * q + 2], in[4 * q + 3], 0x5140u);
    const unsigned hi23 = fa3_prmt(in[4 * q + 2], in[4 * q + 3], 0x7362u);
    out[0][q] = fa3_prmt(lo01, lo23, 0x5410u), out[1][q] = fa3_prmt(lo01, lo23, 0x7632u);
    out[2][q] = fa3_prmt(hi01, hi23, 0x5410u), out[3][q] = fa3_prmt(hi01, hi23, 0x7632u);
  }
  const long long row0 = ((long long)b * n_kv + h) * FA3_D + piece * FA3_VT_PIECE + 4 * dg;
  unsigned char *dst = vt + row0 * s_pad + key0 + 16 * c;
#pragma unroll
  for (int e = 0; e < 4; e++)
    *(uint4 *)(dst + e * s_pad) = make_uint4(out[e][0], out[e][1], out[e][2], out[e][3]);
}
#endif

/* ---- the warp-specialized kernel (FA3_WS) ---------------------------------------------------- */
#if FA3_WS
/* Warpgroup 0 is the producer: one thread issues TMA copies of Q and of each K and V tile into a
 * ring of STAGES slots, each slot guarded by a "full" mbarrier (the copy engine completes its
 * bytes there) and an "empty" one (every consumer warp arrives when its wgmma no longer reads the
 * slot). Warpgroups 1.. are consumers, 64 query rows each, running the overlapped loop above
 * without any CTA-wide barrier; setmaxnreg hands the producer's registers to them. With
 * ping-pong, named barriers make the consumers issue their GEMMs in turn, so one warpgroup's
 * softmax runs while another's MMAs do.
 * FP8: the producer's warps 1-3 transpose each V tile into one of two V^T buffers (a V^T full
 * and empty mbarrier each) and release the V stage, so the transpose leaves the consumers. */
static_assert(!FA3_FP8 || FA3_VT_PRE || (FA3_WARPS == 8 && (FA3_BN == 64 || FA3_BN == 128)),
              "warp-specialized FP8: 2 consumer warpgroups, block_n 64 or 128");
static_assert(!FA3_VT_PRE || (FA3_FP8 && FA3_BN % 32 == 0), "V^T ahead: FP8, block_n a multiple of 32");
static_assert(FA3_TILE_ROWB % FA3_CW_D == 0 && (FA3_CW_D == 128 || FA3_CW_D == 64),
              "TMA boxes of 128-byte column blocks, or one of 64 bytes (FP8 D 64)");
static constexpr int FA3_CONSUMERS = FA3_WARPS / 4;
static constexpr int FA3_ALL_THREADS = FA3_THREADS + 128;
/* 2 consumers: 2*128*240 + 128*24 = 64512 registers; 3 consumers: 3*128*160 + 128*32 = 65536;
 * FP8 with the producer transposing: 2*128*232 + 128*40 = 64512; V^T ahead: as 16-bit. */
#define FA3_PRODUCER_TRANSPOSES (FA3_FP8 && !FA3_VT_PRE) /* FP8 but V^T ahead: v9's transposing warps */
static constexpr int FA3_CONSUMER_REGS = FA3_PRODUCER_TRANSPOSES ? 232 : FA3_CONSUMERS == 2 ? 240 : 160;
static constexpr int FA3_PRODUCER_REGS = FA3_PRODUCER_TRANSPOSES ? 40 : FA3_CONSUMERS == 2 ? 24 : 32;
static constexpr int FA3_TRANSPOSERS = 3; /* FP8: producer warps 1..3 */
static constexpr int FA3_COLS = FA3_TILE_ROWB / FA3_CW_D; /* TMA boxes per tile: one per column block */
static_assert(FA3_CONSUMERS == 2 || FA3_CONSUMERS == 3, "2 or 3 consumer warpgroups");

#ifndef FA3_PINGPONG
#define FA3_PINGPONG 1
#endif

/* A tile of R rows from row0: one box per column block of CW_D bytes (128: 64 16-bit or 128 FP8
 * elements; FP8 D 64: its 64-byte rows, the map's boxes and swizzle of 64 bytes). */
template <int R>
__device__ __forceinline__ void fa3_tma_tile(unsigned dst, const at_tmap *map, int row0, int head, int b,
                                             unsigned bar)
{
#pragma unroll
  for (int c = 0; c < FA3_COLS; c++)
    at_tma_load(dst + c * R * FA3_CW_D, map, c * (FA3_CW_D / FA3_ESIZE), row0, head, b, bar);
}

/* V^T ahead: the V^T tile of keys key0 .. key0 + BN - 1 from the scratch's map (keys, D, Nkv, B),
 * one box of CW_N keys by D rows per column block, in the layout fa3_issue_pv reads. */
__device__ __forceinline__ void fa3_tma_vt_tile(unsigned dst, const at_tmap *map, int key0, int head, int b,
                                                unsigned bar)
{
#pragma unroll
  for (int c = 0; c < FA3_BN / FA3_CW_N; c++)
    at_tma_load(dst + c * FA3_VT_BLOCK_BYTES, map, key0 + c * FA3_CW_N, 0, head, b, bar);
}

__device__ __forceinline__ void fa3_named_sync(int id, int threads)
{
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void fa3_named_arrive(int id, int threads)
{
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#ifndef FA3_PERSISTENT
#define FA3_PERSISTENT 0
#endif
static_assert(!FA3_PERSISTENT || (!FA3_FP8 && FA3_CAUSAL), "persistent: f16/bf16 inputs and a causal mask");

/* Ragged tensors (generator.h gen_ragged, as in fa2.cu): 0 padded, 1 (.rg) Q, O, K and V packed
 * along the sequence axis with cu_seqlens, 2 (.rgq) Q and O packed, K and V padded. The tensor
 * maps of packed tensors are (D, total, heads, 1): a CTA reads rows cu_seqlens[b] + m0 .., so the
 * rows past its sequence's end are the next sequence's (keys past S_b are masked, rows past T_b
 * never stored) or, past the tensor, the map's zeros. */
#define FA3_RAGGED_QKV 1
#define FA3_RAGGED_Q 2
#ifndef FA3_RAGGED
#define FA3_RAGGED 0
#endif
static_assert(!FA3_RAGGED || (!FA3_FP8 && !FA3_PERSISTENT), "ragged: the 16-bit kernel with one CTA per work tile");

/* Paged K/V (FA3_PAGE_SIZE = PS > 0; the vLLM layout of include/attntune.h "Serving layouts"):
 * K and V are pools [num_pages, PS, Nkv, D], and the maps of K and V describe them as (D, PS,
 * Nkv, num_pages) with boxes of BOX = min(PS, BN) rows. Key j of sequence b is row j % PS of page
 * block_table[b * max_pages_per_seq + j / PS], and S_b = clamp(seqlens_kv[b], 0, S) replaces S
 * (keys, causal offset). PS and BN divide one another (generator/fa3.c), so a K/V tile is BN /
 * BOX whole boxes, each in one page; the producer thread reads the tile's table entries (entries
 * past the row read as -1) and issues one box per page and column block, to the box's rows of the
 * tile. A page outside [0, num_pages) lies outside the map, so TMA fills its box with zeros and
 * reads nothing; the producer sets the box's bit in the stage's mask (a word after the
 * mbarriers, written before the stage's full barrier is armed, so the consumers' wait on it
 * orders the read), and the consumers mask that box's keys (-inf). 16 bits cover BN / BOX <= 16
 * (PS >= 16). */
#ifndef FA3_PAGE_SIZE
#define FA3_PAGE_SIZE 0
#endif
static_assert(!FA3_PAGE_SIZE || FA3_CW_D == 128, "paged boxes of 128-byte column blocks");
static_assert(!FA3_PAGE_SIZE || (!FA3_FP8 && !FA3_PERSISTENT && FA3_RAGGED != FA3_RAGGED_QKV),
              "paged K/V: the 16-bit kernel with one CTA per work tile, padded or ragged Q");
static constexpr int FA3_PAGE_BOX = FA3_PAGE_SIZE && FA3_PAGE_SIZE < FA3_BN ? FA3_PAGE_SIZE : FA3_BN;
static_assert(!FA3_PAGE_SIZE || (FA3_PAGE_SIZE >= 16 && (FA3_BN % FA3_PAGE_SIZE == 0 || FA3_PAGE_SIZE % FA3_BN == 0)),
              "paged K/V: page size >= 16, a divisor or a multiple of block_n");

#if FA3_PAGE_SIZE > 0
/* Paged: -inf for the keys of the boxes in bad (pages outside the pool). A box is BOX >= 16 keys,
 * so each n8 tile of S lies in one. */
__device__ __forceinline__ void fa3_mask_boxes(float (*s)[4], unsigned bad)
{
#pragma unroll
  for (int nt = 0; nt < FA3_NT; nt++)
    if ((bad >> (nt * 8 / FA3_PAGE_BOX)) & 1u) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = AT_NEG_INF;
}
#endif

/* What every work tile of a warp-specialized CTA shares: the shared-memory tiles and mbarriers
 * (addresses), the call's lengths and the causal offset. */
struct fa3_ws_ctx {
  unsigned q, k, v, vt; /* Q, STAGES x K, STAGES x V, (FP8) two V^T */
  unsigned bar_q, bar_full_k, bar_full_v, bar_empty_k, bar_empty_v, bar_vt_full, bar_vt_empty, bar_q_empty;
  int T, S, offset;
  int q_first, kv_first; /* ragged: the sequence's first rows in the packed tensors (else 0) */
  const int *table_row;  /* paged: this sequence's block-table row (else 0) */
  int max_pages;         /* paged: entries in it */
  unsigned page_bad;     /* paged: STAGES words, the boxes of each stage's K tile with no page in the pool */
  unsigned ones;         /* FA3_ONES_BLOCK: the ones block */
};

/* One work tile: query rows m0 .. m0 + BM - 1 of head h (K/V head hk) of batch b, and its K/V
 * tiles: n_tiles of them from tile t0 (0 but for a piece of a tail split), n_full of the row's
 * tiles (counted from 0) unmasked. */
struct fa3_work {
  int m0, h, hk, b, n_tiles, n_full, t0;
};

__device__ __forceinline__ fa3_work fa3_work_at(const fa3_ws_ctx &c, int m_block, int h, int b)
{
  fa3_work w;
  w.m0 = m_block * FA3_BM, w.h = h, w.hk = h / FA3_GQA, w.b = b, w.t0 = 0;
  fa3_key_tiles(w.m0, c.T, c.S, c.offset, &w.n_tiles, &w.n_full);
  return w;
}

#ifndef FA3_L2_GROUP_BYTES
/* The K and V bytes one group of the causal order may span (v44): under a third of the L2 of an
 * H100 (50 MB) or H200 (60 MB), so that a group's K/V stays there while its tiles run. */
#define FA3_L2_GROUP_BYTES (16 << 20)
#endif

/* K/V heads (of all batches, b-major) per group of the causal order (v44): the most whose K and V
 * fit FA3_L2_GROUP_BYTES, at least one, and a divisor of all of them, so every group is whole. */
__device__ __forceinline__ int fa3_group_kv_heads(int kv_pairs, int S)
{
  const long long fit = (long long)FA3_L2_GROUP_BYTES / (2LL * S * FA3_ROWB);
  if (fit >= kv_pairs) return kv_pairs;
  int g = fit > 1 ? (int)fit : 1;
  while (kv_pairs % g) g--;
  return g;
}

/* Work tile i of the grid's causal order. The (batch, head) pairs, head fastest, fall into groups
 * of consecutive pairs whose K/V fit FA3_L2_GROUP_BYTES (fa3_group_kv_heads, whole GQA groups); a
 * group's tiles come one after the other, and within a group query block index from the last
 * (the most K/V tiles) down, then pair. So the CTAs running at one time hold a few query block
 * indices of one group's pairs: the q heads of one KV head (h / G) read its K/V tiles from L2
 * once for all of them, and the rows running later read what the group's first rows brought in.
 * Where every pair's K/V fits, one group: fa3_work_tile's order. v44: at B2 N16 T=S=8192 D128 each
 * wave of 132 CTAs spanned about 4 query block indices of all 32 pairs (128 MB of K/V) and read
 * them from HBM again: 1.1 GB a call counted wave by wave, 0.29 GB in groups of 4 pairs counted
 * the same way (0.13 GB where L2 keeps a group's K/V across its two waves; docs/perf.md). The
 * block scheduler hands a tile to whichever SM frees first, so the groups' sawtooth of lengths
 * costs no balance here; the persistent schedule is static and keeps fa3_work_tile's order. */
__device__ __forceinline__ fa3_work fa3_grouped_work_tile(const fa3_ws_ctx &c, int i, int n_heads, int batch, int m_blocks)
{
  const int pairs = batch * n_heads;
  const int group = fa3_group_kv_heads(pairs / FA3_GQA, c.S) * FA3_GQA; /* q-head pairs a group */
  const int group_tiles = group * m_blocks, g = i / group_tiles, j = i - g * group_tiles;
  const int r = j / group, p = g * group + (j - r * group);
  return fa3_work_at(c, m_blocks - 1 - r, p % n_heads, p / n_heads);
}

/* Work tile i of the persistent order: query block index from the last (the most K/V tiles)
 * down, then batch, then head fastest. The CTAs running at one time hold one query block index
 * of consecutive heads, so the q heads of one KV head (GQA, h / G) run side by side and read its
 * K/V tiles from L2 once for all of them. Longest first over the whole call, because the snake
 * (fa3_pers_tile_index) balances a static schedule only on a falling order: v44's groups here,
 * a sawtooth of lengths, left the busiest CTA 855 tile-steps against a mean of 504 at B2 N16
 * T=S=8192 (128x128), and ran 29% slower on the H100 (602 -> 428 TFLOP/s). */
__device__ __forceinline__ fa3_work fa3_work_tile(const fa3_ws_ctx &c, int i, int n_heads, int batch, int m_blocks)
{
  const int r = i / n_heads;
  return fa3_work_at(c, m_blocks - 1 - r / batch, i - r * n_heads, r % batch);
}

/* The work tile of this CTA when there is one CTA per tile. Causal masks: grid (Nq, B, query
 * blocks), the block scheduler's issue order (x fastest) taken as fa3_grouped_work_tile's (paged K/V:
 * the grid's own order, since its table row is read by blockIdx.y); otherwise (query blocks, Nq,
 * B), so the CTAs running together share a head's K and V in L2. */
__device__ __forceinline__ fa3_work fa3_work_of_block(const fa3_ws_ctx &c)
{
  if (FA3_CAUSAL && !FA3_PAGE_SIZE) {
    const int i = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
    return fa3_grouped_work_tile(c, i, (int)gridDim.x, (int)gridDim.y, (int)gridDim.z);
  }
  const int h = FA3_CAUSAL ? blockIdx.x : blockIdx.y, b = FA3_CAUSAL ? blockIdx.y : blockIdx.z;
  const int m_block = FA3_CAUSAL ? (int)(gridDim.z - 1 - blockIdx.z) : (int)blockIdx.x;
  return fa3_work_at(c, m_block, h, b);
}

/* The persistent order's index of this CTA's k-th work tile. The CTAs take the longest-first order
 * in rounds of gridDim.x tiles, every second round backwards (a snake): in a plain round robin
 * the CTA that takes a round's longest tile takes the longest of every round, and a causal
 * call waits for that CTA; in the snake it takes the next round's shortest. Indices past
 * work_tiles end a CTA's walk (every later round starts past them). */
__device__ __forceinline__ int fa3_pers_tile_index(int k)
{
  const int n = (int)gridDim.x, x = (int)blockIdx.x;
  return k * n + ((k & 1) ? n - 1 - x : x);
}

#if FA3_PAGE_SIZE > 0
/* The page of tile-relative box i of the tile from key0: its table entry; -1 (no page: TMA
 * zero-fills the box) for boxes from S_b on, whose entries a server leaves unset, and past the row. */
__device__ __forceinline__ int fa3_page_of_box(const fa3_ws_ctx &c, int key0, int i)
{
  const int first_key = key0 + i * FA3_PAGE_BOX, p = first_key / FA3_PAGE_SIZE;
  return first_key < c.S && p < c.max_pages ? __ldg(c.table_row + p) : -1;
}

/* Rows S_b - key0 .. BN - 1 of the last tile's V stage to zero, by this consumer warpgroup
 * (wg_tid 0..127), before its P V reads them. The last page's rows past S_b are whatever the
 * cache holds there (NaN, in the tests): their keys' P is 0, but 0 * NaN is NaN. Every consumer
 * warpgroup writes the same zeros and publishes its own to its wgmma (fence, then a barrier of
 * its 128 threads), so none reads the rows before they are zero, and nobody writes anything
 * else there. A row of the 128-byte swizzle is 128 contiguous bytes per column block. */
__device__ __forceinline__ void fa3_zero_v_rows_past_s(unsigned v_stage, int first_row, int cw, int wg_tid)
{
  if (first_row >= FA3_BN) return;
  const int chunks = (FA3_BN - first_row) * 8; /* 16-byte chunks of one column block's rows */
  for (int i = wg_tid; i < FA3_COLS * chunks; i += 128) {
    const int col = i / chunks, r = first_row + (i % chunks) / 8, chunk = i % 8;
    const unsigned addr = v_stage + (unsigned)((col * FA3_BN + r) * 128 + chunk * 16);
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0u) : "memory");
  }
  at_fence_async_smem();
  fa3_named_sync(4 + cw, 128);
}

/* The boxes of the tile from key0 whose page is outside [0, num_pages), boxes from S_b on included
 * (no page, and masked by fa3_mask anyway): TMA fills them with zeros. */
__device__ __forceinline__ unsigned fa3_bad_boxes(const fa3_ws_ctx &c, int key0, int num_pages)
{
  unsigned bad = 0;
#pragma unroll 1 /* the producer runs on FA3_PRODUCER_REGS registers */
  for (int i = 0; i < FA3_BN / FA3_PAGE_BOX; i++)
    if ((unsigned)fa3_page_of_box(c, key0, i) >= (unsigned)num_pages) bad |= 1u << i;
  return bad;
}

/* A K or V tile of BN keys from key0 (a multiple of BN), box by box through the table: box i
 * (BOX rows of one page) into rows i * BOX .. of every column block. */
__device__ __forceinline__ void fa3_tma_tile_paged(unsigned dst, const at_tmap *map, const fa3_ws_ctx &c, int key0,
                                                   int head, unsigned bar)
{
  const int row = key0 % FA3_PAGE_SIZE; /* 0 unless a page holds several tiles */
#pragma unroll 1
  for (int i = 0; i < FA3_BN / FA3_PAGE_BOX; i++) {
    const int page = fa3_page_of_box(c, key0, i);
#pragma unroll
    for (int col = 0; col < FA3_COLS; col++)
      at_tma_load(dst + (col * FA3_BN + i * FA3_PAGE_BOX) * 128, map, col * (128 / FA3_ESIZE), row, head, page, bar);
  }
}
#endif

/* The producer thread's copies for one work tile: Q, then its K/V tiles into ring positions
 * it, it + 1, ... (stage u % STAGES, pass u / STAGES), each once the consumers freed that stage
 * in the previous pass. The ring position runs on across work tiles, as in the consumers, so
 * stage and parity stay those of one long sequence of K/V tiles. Persistent: Q has one buffer,
 * refilled for work tile j (this CTA's j-th) only after every consumer warp finished its last
 * Q K^T of tile j - 1 (bar_q_empty, phase j - 1; the first wait passes on the fresh barrier). */
__device__ __forceinline__ void fa3_ws_produce(const fa3_ws_ctx &c, const fa3_work &w, int j, int it,
                                               const at_tmap *tm_q, const at_tmap *tm_k, const at_tmap *tm_v,
                                               int num_pages)
{
  (void)num_pages;
  if (FA3_PERSISTENT) at_bar_wait(c.bar_q_empty, ((unsigned)j & 1u) ^ 1u);
  const int q_b = FA3_RAGGED ? 0 : w.b, kv_b = FA3_RAGGED == FA3_RAGGED_QKV ? 0 : w.b; /* packed: one batch */
  at_bar_expect(c.bar_q, FA3_Q_BYTES);
  fa3_tma_tile<FA3_BM>(c.q, tm_q, c.q_first + w.m0, w.h, q_b, c.bar_q);
  for (int t = 0; t < w.n_tiles; t++) {
    const int u = it + t;
    const int s = u % FA3_STAGES;
    const unsigned phase = (unsigned)(u / FA3_STAGES) & 1u;
    at_bar_wait(c.bar_empty_k + 8 * s, phase ^ 1u);
#if FA3_PAGE_SIZE > 0
    (void)kv_b; /* pages are the maps' batch coordinate */
    /* The stage's mask is written before its full barrier is armed: the consumers read it after
     * their wait, and the stage (mask included) is not reused before every consumer warp freed it. */
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(c.page_bad + 4 * s), "r"(fa3_bad_boxes(c, t * FA3_BN, num_pages))
                 : "memory");
    at_bar_expect(c.bar_full_k + 8 * s, FA3_KV_BYTES);
    fa3_tma_tile_paged(c.k + s * FA3_KV_BYTES, tm_k, c, t * FA3_BN, w.hk, c.bar_full_k + 8 * s);
    at_bar_wait(c.bar_empty_v + 8 * s, phase ^ 1u);
    at_bar_expect(c.bar_full_v + 8 * s, FA3_KV_BYTES);
    fa3_tma_tile_paged(c.v + s * FA3_KV_BYTES, tm_v, c, t * FA3_BN, w.hk, c.bar_full_v + 8 * s);
#else
    const int key0 = (w.t0 + t) * FA3_BN;
    at_bar_expect(c.bar_full_k + 8 * s, FA3_KV_BYTES);
    fa3_tma_tile<FA3_BN>(c.k + s * FA3_KV_BYTES, tm_k, c.kv_first + key0, w.hk, kv_b, c.bar_full_k + 8 * s);
    at_bar_wait(c.bar_empty_v + 8 * s, phase ^ 1u);
    at_bar_expect(c.bar_full_v + 8 * s, FA3_KV_BYTES); /* the ones rows are not loaded */
#if FA3_VT_PRE /* tm_v maps the V^T in the scratch */
    fa3_tma_vt_tile(c.v + s * FA3_V_BYTES, tm_v, key0, w.hk, w.b, c.bar_full_v + 8 * s);
#else
    fa3_tma_tile<FA3_BN>(c.v + s * FA3_KV_BYTES, tm_v, c.kv_first + key0, w.hk, kv_b, c.bar_full_v + 8 * s);
#endif
#endif
  }
}

/* A word of ones: 1.0 in each element of V's dtype (bytes for FP8, halves for 16 bits). */
__device__ __forceinline__ constexpr unsigned fa3_ones_word()
{
  return AT_IN_DTYPE == AT_DTYPE_E4M3   ? 0x38383838u
         : AT_IN_DTYPE == AT_DTYPE_E5M2 ? 0x3c3c3c3cu
         : AT_IN_DTYPE == AT_DTYPE_BF16 ? 0x3f803f80u
                                        : 0x3c003c00u;
}

/* FA3_ONES: rows D .. D + 7 of every column block of every V stage hold ones (of V's dtype; the
 * TMA boxes never reach them), written once before the CTA's barrier and published to wgmma. */
__device__ __forceinline__ void fa3_fill_ones_rows(unsigned v, int tid)
{
  if (!FA3_ONES_ROWS) return;
  /* (1 where there are no rows: a divisor for code that never runs) */
  constexpr int WORDS_PER_BLOCK = FA3_ONES_ROWS ? FA3_ONES_ROWS * FA3_CW_N / 4 : 1;
  constexpr int BLOCKS = FA3_STAGES * (FA3_BN / FA3_CW_N);
  for (int i = tid; i < BLOCKS * WORDS_PER_BLOCK; i += FA3_ALL_THREADS) {
    const int blk = i / WORDS_PER_BLOCK, w = i % WORDS_PER_BLOCK;
    const unsigned addr = v + (unsigned)(blk * FA3_VT_BLOCK_BYTES + FA3_D * FA3_CW_N + 4 * w);
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(fa3_ones_word()) : "memory");
  }
  at_fence_async_smem();
}

/* FA3_ONES_BLOCK: 256 bytes of ones of V's dtype, the B of the row sums' wgmma (fa3_issue_pv),
 * written once before the CTA's barrier and published to wgmma. Whatever layout wgmma reads
 * them in, every element it reads is a one. */
__device__ __forceinline__ void fa3_fill_ones_block(unsigned ones, int tid)
{
  if (!FA3_ONES_BLOCK) return;
  if (tid < FA3_ONES_BLOCK_BYTES / 4)
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(ones + 4 * tid), "r"(fa3_ones_word()) : "memory");
  at_fence_async_smem();
}

/* A consumer warp is done with K tile stage s (and, on its work tile's last tile, with Q). */
__device__ __forceinline__ void fa3_release_k_q(const fa3_ws_ctx &c, int s, bool last_tile, int lane)
{
  if (lane == 0) at_bar_arrive(c.bar_empty_k + 8 * s);
  /* This warp's last Q K^T of the work tile is done: Q's buffer may take the next tile's. */
  if (FA3_PERSISTENT && last_tile && lane == 0) at_bar_arrive(c.bar_q_empty);
}

/* -inf for the keys a tile's rows must not see: past S, after the diagonal (tiles from n_full
 * on), and in boxes without a page (paged). t and n_full count from the work tile's first K/V
 * tile, t0. */
__device__ __forceinline__ void fa3_mask_tile(float (*s)[4], int t, int n_full, int t0, int row0,
                                              const fa3_ws_ctx &c, unsigned bad_boxes, int g, int tq)
{
  if (t >= n_full) fa3_mask(s, row0, (t0 + t) * FA3_BN, c.S, c.offset, g, tq);
#if FA3_PAGE_SIZE > 0
  if (bad_boxes) fa3_mask_boxes(s, bad_boxes);
#else
  (void)bad_boxes;
#endif
}

/* One consumer warpgroup's loop over a work tile's K/V tiles (ring positions it, it + 1, ...):
 * O (acc), row max and row sum of its 64 rows, for the epilogue. j is the work tile's index in
 * this CTA's sequence (Q's phase). */
__device__ __forceinline__ void fa3_ws_consume(const fa3_ws_ctx &c, const fa3_work &w, int j, int it, int cw,
                                               int cwarp, int lane, float scale_log2, float (*acc)[4],
                                               float *row_max, float *row_sum)
{
  const int g = lane >> 2, tq = lane & 3;
  const int n_tiles = w.n_tiles, n_full = w.n_full - w.t0; /* both from tile t0 */
  const unsigned q_wg = c.q + (unsigned)(cw * 64 * FA3_CW_D);
#pragma unroll
  for (int jj = 0; jj < FA3_OT; jj++) acc[jj][0] = acc[jj][1] = acc[jj][2] = acc[jj][3] = 0.f;
  row_max[0] = row_max[1] = AT_NEG_INF, row_sum[0] = row_sum[1] = 0.f;
  const int row0 = w.m0 + cwarp * 16;
  float alpha[2];
  unsigned p[FA3_PK][4];
  /* Ping-pong: consumer c waits on barrier 1 + c before its GEMMs and opens the next consumer's
   * after issuing them. One CTA per tile: the last consumer opens the first one's for tile 0,
   * and skips that after its last tile, so every barrier sees as many arrivals as waits.
   * Persistent: the K/V tiles of all work tiles are one sequence for the ping-pong (the kernel
   * opens the first barrier once and absorbs the last arrival; it says why). */
  const int next_cw = (cw + 1) % FA3_CONSUMERS;
  if (FA3_PINGPONG && !FA3_PERSISTENT && cw == FA3_CONSUMERS - 1 && n_tiles > 0) fa3_named_arrive(1 + next_cw, 256);

  at_bar_wait(c.bar_q, (unsigned)j & 1u);
  /* A work tile without keys (bottom-right rows above the first key) reads no Q. */
  if (FA3_PERSISTENT && n_tiles == 0 && lane == 0) at_bar_arrive(c.bar_q_empty);
#if FA3_QREG
  unsigned qf[FA3_QK][4];
  if (n_tiles > 0) at_load_a_frags<FA3_BM, FA3_CW_D, FA3_QK>(qf, c.q, cwarp * 16, lane);
  (void)q_wg;
#endif
  float sacc[FA3_NT][4];
  /* built once: per tile, ptxas rebuilt it from the address (five uniform instructions) */
  const unsigned long long d_ones = FA3_ONES_BLOCK ? at_wgmma_desc<32>(c.ones) : 0ull;
  unsigned v_release = 0; /* the V stage (or V^T buffer) that the P V in flight reads */
  for (int t = 0; t < n_tiles; t++) {
    const int u = it + t; /* ring position */
    const int s = u % FA3_STAGES, sp = (u + FA3_STAGES - 1) % FA3_STAGES;
    if (t > 0) {
      fa3_finish_tile(acc, alpha, row_sum, sacc, p);
      if (v_release && lane == 0) at_bar_arrive(v_release);
    }
    at_bar_wait(c.bar_full_k + 8 * s, (unsigned)(u / FA3_STAGES) & 1u);
#if FA3_PAGE_SIZE > 0
    unsigned bad_boxes; /* read before this warp frees the stage, which the producer then rewrites */
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(bad_boxes) : "r"(c.page_bad + 4 * s) : "memory");
#else
    constexpr unsigned bad_boxes = 0;
#endif
#if FA3_PRODUCER_TRANSPOSES /* never persistent: V^T's buffers count from the CTA's only work tile */
    const unsigned v_prev = c.vt + ((t - 1) & 1) * FA3_KV_BYTES;
    const unsigned bar_v_prev_full = c.bar_vt_full + 8 * ((t - 1) & 1), bar_v_prev_empty = c.bar_vt_empty + 8 * ((t - 1) & 1);
    const unsigned v_prev_parity = (unsigned)((t - 1) / 2) & 1u;
#else
    const unsigned v_prev = c.v + sp * FA3_V_BYTES;
    const unsigned bar_v_prev_full = c.bar_full_v + 8 * sp, bar_v_prev_empty = c.bar_empty_v + 8 * sp;
    const unsigned v_prev_parity = (unsigned)((u - 1) / FA3_STAGES) & 1u;
#endif
    if (t > 0) at_bar_wait(bar_v_prev_full, v_prev_parity);
    if (FA3_PINGPONG) fa3_named_sync(1 + cw, 256);
    at_wgmma_fence();
#if FA3_QREG
    fa3_issue_qk_regs(sacc, qf, c.k + s * FA3_KV_BYTES);
#else
    fa3_issue_qk(sacc, q_wg, c.k + s * FA3_KV_BYTES);
#endif
    at_wgmma_commit();
    if (FA3_PINGPONG && (FA3_PERSISTENT || !(cw == FA3_CONSUMERS - 1 && t == n_tiles - 1)))
      fa3_named_arrive(1 + next_cw, 256);
    /* O += P V of tile t-1 runs behind Q K^T and through this tile's softmax. (Rescaling O here,
     * under Q K^T, instead of in fa3_finish_tile measured slower on 4 of 6 shapes, before v17.) */
    if (t > 0) {
      fa3_issue_pv(acc, p, v_prev, d_ones);
      at_wgmma_commit();
    }
    fa3_wait_s(t > 0);
    /* FA3_SPEC's rare path may read Q and this K tile again: they are freed after the softmax. */
    if (!FA3_SPEC) fa3_release_k_q(c, s, t == n_tiles - 1, lane);

    fa3_mask_tile(sacc, t, n_full, w.t0, row0, c, bad_boxes, g, tq);
#if FA3_SPEC
    /* The first tile, and every tile of a scale that is not positive (a zero descale), take the
     * exact path; so do the tiles whose guess failed, with S recomputed. */
    const bool guess = t > 0 && scale_log2 > 0.f;
    const bool failed = guess && fa3_softmax_spec(sacc, row_max, row_sum, alpha, scale_log2);
    if (failed) {
      fa3_recompute_s(sacc, c.q, c.k + s * FA3_KV_BYTES, cwarp * 16, g, tq);
      fa3_mask_tile(sacc, t, n_full, w.t0, row0, c, bad_boxes, g, tq);
    }
    if (!guess || failed) fa3_softmax<true>(sacc, row_max, row_sum, alpha, scale_log2);
    fa3_release_k_q(c, s, t == n_tiles - 1, lane);
#else
    fa3_softmax<false>(sacc, row_max, row_sum, alpha, scale_log2);
#endif
    v_release = t > 0 ? bar_v_prev_empty : 0u;
  }
  if (n_tiles > 0) {
    fa3_finish_tile(acc, alpha, row_sum, sacc, p);
    if (v_release && lane == 0) at_bar_arrive(v_release);
    const int last = n_tiles - 1;
#if FA3_PRODUCER_TRANSPOSES
    at_bar_wait(c.bar_vt_full + 8 * (last & 1), (unsigned)(last / 2) & 1u);
    const unsigned v_last = c.vt + (last & 1) * FA3_KV_BYTES;
#else
    const int s = (it + last) % FA3_STAGES;
    at_bar_wait(c.bar_full_v + 8 * s, (unsigned)((it + last) / FA3_STAGES) & 1u);
    const unsigned v_last = c.v + s * FA3_V_BYTES;
#endif
#if FA3_PAGE_SIZE > 0
    /* Only the last tile reaches past S_b: the tiles before it end below it. */
    fa3_zero_v_rows_past_s(v_last, max(0, c.S - last * FA3_BN), cw, (cwarp % 4) * 32 + lane);
#endif
    at_wgmma_fence();
    fa3_issue_pv(acc, p, v_last, d_ones);
    at_wgmma_commit();
    at_wgmma_wait0();
    fa3_take_row_sums(acc, row_sum);
#if !FA3_FP8
    /* One CTA per tile: nothing more is loaded. Persistent: the next work tile's producer
     * reuses the last tile's V stage, like any other. */
    if (FA3_PERSISTENT && lane == 0) at_bar_arrive(c.bar_empty_v + 8 * s);
#endif
  }
}

#ifndef FA3_TAIL
#define FA3_TAIL 0
#endif
static_assert(!FA3_TAIL || (!FA3_CAUSAL && !FA3_RAGGED && !FA3_PAGE_SIZE && !FA3_PERSISTENT),
              "tail split: no mask, padded contiguous tensors, one CTA per work tile");
#if FA3_TAIL
/* Tail split (.tw<W>, v25; generator/fa3.c plan_tail says when and how much). Grid: one dimension,
 * the work tiles in the order of the padded grid (query block fastest, then head, then batch),
 * except that each of the last tail_tiles of them runs as `pieces` consecutive CTAs. Piece p of
 * a work tile with n K/V tiles takes tiles [p n / pieces, (p + 1) n / pieces) and writes, for each
 * of its rows below T, O / l (times V's descale: fp32, D values) and its log-sum-exp in log2
 * units to partial `part` = split tile index * pieces + p of the scratch (rows of BM);
 * FA3_TAIL_COMBINE merges a tile's pieces into O (and lse). */
struct fa3_tail_cta {
  int tile;   /* the work tile, in the grid's order */
  int pieces; /* CTAs sharing it: 1 (a whole tile) or the call's pieces */
  int piece;
  long long part; /* the partial this piece writes */
};

__device__ __forceinline__ fa3_tail_cta fa3_tail_cta_of(int tail_tiles, int pieces)
{
  const int whole = (int)gridDim.x - tail_tiles * pieces; /* CTAs before the split tiles' pieces */
  fa3_tail_cta t = {(int)blockIdx.x, 1, 0, 0};
  if (t.tile >= whole) {
    const int r = (t.tile - whole) / pieces;
    t.piece = t.tile - whole - r * pieces, t.tile = whole + r, t.pieces = pieces;
    t.part = (long long)r * pieces + t.piece;
  }
  return t;
}

__device__ __forceinline__ fa3_work fa3_tail_work(const fa3_ws_ctx &c, const fa3_tail_cta &t, int n_heads)
{
  const int m_blocks = (c.T + FA3_BM - 1) / FA3_BM;
  fa3_work w = fa3_work_at(c, t.tile % m_blocks, (t.tile / m_blocks) % n_heads, t.tile / (m_blocks * n_heads));
  const int first = (int)((long long)t.piece * w.n_tiles / t.pieces);
  const int end = (int)((long long)(t.piece + 1) * w.n_tiles / t.pieces);
  w.t0 = first, w.n_tiles = end - first; /* n_full stays the row's */
  return w;
}

/* The log2-domain reference of the row's P at the end of the loop: P = 2^(s scale_log2 - ref),
 * so the row's log-sum-exp is ref + log2(l) (fa3_softmax, fa3_softmax_spec; FA3_LINP snaps it,
 * fa3_lin_ref). */
__device__ __forceinline__ float fa3_row_ref(float m, float scale_log2)
{
  if constexpr (FA3_LINP) {
    float c;
    return fa3_lin_ref(__fsub_rn(fmaxf(__fmul_rn(m, scale_log2), -3.402823466e38f), FA3_P_LOG2_SCALE), c);
  } else {
    return m * scale_log2 - FA3_P_LOG2_SCALE;
  }
}

/* A piece's epilogue: this warp's rows of partial `part` (fa3_store_o's fragment layout). */
__device__ __forceinline__ void fa3_store_part(float *__restrict__ o_part, float *__restrict__ lse_part,
                                               const float (*acc)[4], const float *row_max, const float *row_sum,
                                               float o_descale, float scale_log2, int T, long long part, int m0,
                                               int wrow, int g, int tq)
{
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const float sum = fa3_whole_row_sum(row_sum, half);
    const float inv = sum > 0.f ? o_descale / sum : 0.f;
    const int r = wrow + g + half * 8;
    if (m0 + r >= T) continue;
    const long long row = part * FA3_BM + r;
    if (tq == 0) lse_part[row] = sum > 0.f ? fa3_row_ref(row_max[half], scale_log2) + at_log2(sum) : AT_NEG_INF;
    float *orow = o_part + row * FA3_D + 2 * tq;
#pragma unroll
    for (int j = 0; j < FA3_D / 8; j++)
      *(float2 *)(orow + 8 * j) = make_float2(acc[j][2 * half] * inv, acc[j][2 * half + 1] * inv);
  }
}

/* The combine: grid (tail_tiles x BM / ROWS), FA3_TAIL_COMBINE_THREADS threads merging ROWS rows
 * of a split tile, four columns a step. A row's partials weigh 2^(lse_p - max lse), O = sum of
 * w_p O_p / sum of w_p, lse (natural log) = (max + log2 sum w) ln 2. Runs after the attention
 * kernel (a programmatic dependent: it waits before reading the partials). */
extern "C" __global__ void __launch_bounds__(FA3_TAIL_COMBINE_THREADS)
FA3_TAIL_COMBINE(const float *__restrict__ o_part, const float *__restrict__ lse_part, at_out_t *__restrict__ o,
                 float *__restrict__ lse, int T, int n_heads, int batch, int tail_tiles, int pieces, long long o_sb,
                 int o_ss, int o_sh)
{
  constexpr int ROWS = FA3_TAIL_COMBINE_ROWS, QUADS = FA3_D / 4;
  static_assert(FA3_BM % ROWS == 0 && FA3_D % 4 == 0, "whole row groups, four columns a step");
  at_wait_for_previous_grid();
  const int m_blocks = (T + FA3_BM - 1) / FA3_BM;
  const int r = blockIdx.x / (FA3_BM / ROWS), row0 = blockIdx.x % (FA3_BM / ROWS) * ROWS;
  const int tile = m_blocks * n_heads * batch - tail_tiles + r;
  const int m_block = tile % m_blocks, h = (tile / m_blocks) % n_heads, b = tile / (m_blocks * n_heads);
  for (int i = threadIdx.x; i < ROWS * QUADS; i += FA3_TAIL_COMBINE_THREADS) {
    const int rr = row0 + i / QUADS, quad = i % QUADS, m = m_block * FA3_BM + rr;
    if (m >= T) continue;
    const long long first = (long long)r * pieces * FA3_BM + rr; /* partial p's row: first + p BM */
    float top = AT_NEG_INF;
    for (int p = 0; p < pieces; p++) top = fmaxf(top, lse_part[first + (long long)p * FA3_BM]);
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    float weights = 0.f;
    for (int p = 0; top != AT_NEG_INF && p < pieces; p++) {
      const long long row = first + (long long)p * FA3_BM;
      const float w = at_exp2(lse_part[row] - top);
      const float4 x = *(const float4 *)(o_part + row * FA3_D + 4 * quad);
      weights += w, sum.x += w * x.x, sum.y += w * x.y, sum.z += w * x.z, sum.w += w * x.w;
    }
    const float inv = weights > 0.f ? 1.f / weights : 0.f;
    at_out_t *orow = o + b * o_sb + (long long)h * o_sh + (long long)m * o_ss + 4 * quad;
    *(uint2 *)orow = make_uint2(at_pack_out(sum.x * inv, sum.y * inv), at_pack_out(sum.z * inv, sum.w * inv));
    if (FA3_LSE && quad == 0)
      lse[((long long)b * n_heads + h) * T + m] =
          weights > 0.f ? (top + at_log2(weights)) * 0.69314718055994531f : AT_NEG_INF;
  }
}
#endif

extern "C" __global__ void __launch_bounds__(FA3_ALL_THREADS, 1)
FA3_KERNEL(const at_in_t *__restrict__ q, const at_in_t *__restrict__ k,
           const at_in_t *__restrict__ v, at_out_t *__restrict__ o, float *__restrict__ lse, int T, int S,
           float scale_log2, long long q_sb, int q_ss, int q_sh, long long k_sb, int k_ss, int k_sh,
           long long v_sb, int v_ss, int v_sh, long long o_sb, int o_ss, int o_sh,
           const float *__restrict__ descale_q, const float *__restrict__ descale_k,
           const float *__restrict__ descale_v, const float *__restrict__ scale_o, float *__restrict__ amax_o,
#if FA3_RAGGED
           const int *__restrict__ cu_seqlens_q, const int *__restrict__ cu_seqlens_kv, int total_q, int total_kv,
           int n_seqs,
#endif
#if FA3_PAGE_SIZE > 0
           const int *__restrict__ block_table, const int *__restrict__ seqlens_kv, int max_pages_per_seq,
           int num_pages,
#endif
           const __grid_constant__ at_tmap tm_q, const __grid_constant__ at_tmap tm_k,
           const __grid_constant__ at_tmap tm_v
#if FA3_PERSISTENT
           , int n_heads, int work_tiles /* Nq; work tiles B * Nq * ceil(T / BM) */
#endif
#if FA3_TAIL
           , int n_heads, int tail_tiles, int pieces, float *__restrict__ o_part, float *__restrict__ lse_part
#endif
           )
{
  /* Q, K and V come through the tensor maps, which hold their pointers and strides. */
  (void)q, (void)k, (void)v, (void)q_sb, (void)q_ss, (void)q_sh, (void)k_sb, (void)k_ss, (void)k_sh;
  (void)v_sb, (void)v_ss, (void)v_sh, (void)scale_o, (void)amax_o; /* FP8 output is not written by fa3 */
  at_wait_for_previous_grid(); /* a programmatic launch: the previous kernel's results first */
  float o_descale = 1.f;
  if (FA3_FP8) {
    if (descale_q) scale_log2 *= *descale_q;
    if (descale_k) scale_log2 *= *descale_k;
    if (descale_v) o_descale = *descale_v;
  }
  extern __shared__ __align__(128) unsigned char fa3_smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;

  fa3_ws_ctx c;
  c.q_first = c.kv_first = 0;
#if FA3_RAGGED
  /* Ragged: grid (query blocks, Nq, 1), x over the sequences' query blocks (common.cuh
   * at_ragged_block); this CTA's sequence's T_b and S_b replace the maxima. */
  int rg_b, rg_m;
  if (!at_ragged_block(cu_seqlens_q, n_seqs, total_q, T, FA3_BM, FA3_CAUSAL, (int)blockIdx.x, &rg_b, &rg_m)) return;
  T = at_ragged_rows(cu_seqlens_q, rg_b, total_q, T, &c.q_first);
#if FA3_RAGGED == FA3_RAGGED_QKV
  S = at_ragged_rows(cu_seqlens_kv, rg_b, total_kv, S, &c.kv_first);
#else
  (void)cu_seqlens_kv, (void)total_kv;
#endif
#endif
#if FA3_PAGE_SIZE > 0
  /* Paged: the sequence's length S_b = clamp(seqlens_kv[b], 0, S) replaces S, and its table row. */
  {
#if FA3_RAGGED
    const int pb = rg_b;
#else
    const int pb = FA3_CAUSAL ? (int)blockIdx.y : (int)blockIdx.z; /* fa3_work_of_block's b */
#endif
    S = max(0, min(S, seqlens_kv[pb]));
    c.table_row = block_table + (long long)pb * max_pages_per_seq, c.max_pages = max_pages_per_seq;
  }
#else
  const int num_pages = 0;
  c.table_row = 0, c.max_pages = 0;
#endif
  c.T = T, c.S = S, c.offset = FA3_MASK == AT_MASK_CAUSAL_BR ? S - T : 0;
#if FA3_PERSISTENT
  /* Work tiles fa3_pers_tile_index(0), (1), ... (a static schedule: producer and consumers walk
   * the same sequence without talking about it); B follows from the count. */
  const int m_blocks = (T + FA3_BM - 1) / FA3_BM;
  const int batch = work_tiles / (n_heads * m_blocks);
#else
#if FA3_RAGGED
  const fa3_work work = fa3_work_at(c, rg_m, blockIdx.y, rg_b);
  const int n_heads = gridDim.y;
#elif FA3_TAIL
  const fa3_tail_cta tail = fa3_tail_cta_of(tail_tiles, pieces);
  const fa3_work work = fa3_tail_work(c, tail, n_heads);
#else
  const fa3_work work = fa3_work_of_block(c);
  const int n_heads = FA3_CAUSAL ? gridDim.x : gridDim.y;
#endif
  if (FA3_RAGGED && work.m0 >= c.T) return; /* past this sequence's rows: the whole CTA, before any barrier */
#endif

  c.q = (at_smem_addr(fa3_smem) + 1023u) & ~1023u;
  c.k = c.q + FA3_Q_BYTES;
  c.v = c.k + FA3_STAGES * FA3_KV_BYTES;
  c.vt = c.v + FA3_STAGES * FA3_V_BYTES; /* FP8: V^T of tile t in buffer t % 2 */
  /* mbarriers: Q's, then full K, full V, empty K, empty V per stage, then (FP8) V^T full and
   * empty per buffer, then (persistent) Q's empty one. */
  c.bar_q = c.vt + FA3_VT_BUFS * FA3_KV_BYTES;
  c.bar_full_k = c.bar_q + 8, c.bar_full_v = c.bar_full_k + 8 * FA3_STAGES;
  c.bar_empty_k = c.bar_full_v + 8 * FA3_STAGES, c.bar_empty_v = c.bar_empty_k + 8 * FA3_STAGES;
  c.bar_vt_full = c.bar_empty_v + 8 * FA3_STAGES, c.bar_vt_empty = c.bar_vt_full + 16;
  c.bar_q_empty = c.bar_vt_empty + 16;
  c.page_bad = c.bar_q_empty + 8; /* paged: a word per stage */
  c.ones = c.bar_q + FA3_BAR_BYTES; /* 16-bit: 256 bytes of ones, 256-aligned (FA3_ONES_BLOCK) */
  static_assert(8 * (1 + 4 * FA3_STAGES + 4 + 1) + 4 * FA3_STAGES <= FA3_BAR_BYTES, "mbarriers fit their room");
  if (tid == 0) {
    at_bar_init(c.bar_q, 1);
#pragma unroll
    for (int s = 0; s < FA3_STAGES; s++) {
      at_bar_init(c.bar_full_k + 8 * s, 1);
      at_bar_init(c.bar_full_v + 8 * s, 1);
      at_bar_init(c.bar_empty_k + 8 * s, FA3_WARPS); /* one arrival per consumer warp */
      at_bar_init(c.bar_empty_v + 8 * s, FA3_PRODUCER_TRANSPOSES ? FA3_TRANSPOSERS : FA3_WARPS); /* V's readers */
    }
    if (FA3_PRODUCER_TRANSPOSES)
      for (int i = 0; i < 2; i++) {
        at_bar_init(c.bar_vt_full + 8 * i, FA3_TRANSPOSERS);
        at_bar_init(c.bar_vt_empty + 8 * i, FA3_WARPS);
      }
    if (FA3_PERSISTENT) at_bar_init(c.bar_q_empty, FA3_WARPS); /* every consumer warp's last Q K^T */
    /* The copy engine (async proxy) must see the initialized barriers. */
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    at_fence_async_smem();
  }
  fa3_fill_ones_rows(c.v, tid);
  fa3_fill_ones_block(c.ones, tid);
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(FA3_PRODUCER_REGS));
    if (tid == 0) {
#if FA3_PERSISTENT
      for (int j = 0, i, it = 0; (i = fa3_pers_tile_index(j)) < work_tiles; j++) {
        const fa3_work w = fa3_work_tile(c, i, n_heads, batch, m_blocks);
        fa3_ws_produce(c, w, j, it, &tm_q, &tm_k, &tm_v, num_pages);
        it += w.n_tiles;
      }
#else
      fa3_ws_produce(c, work, 0, 0, &tm_q, &tm_k, &tm_v, num_pages);
#endif
    }
#if FA3_PRODUCER_TRANSPOSES
    if (warp > 0) { /* V -> V^T for the consumers; the V stage is free once read */
      for (int t = 0; t < work.n_tiles; t++) {
        const int s = t % FA3_STAGES, buf = t & 1;
        at_bar_wait(c.bar_full_v + 8 * s, (unsigned)(t / FA3_STAGES) & 1u);
        at_bar_wait(c.bar_vt_empty + 8 * buf, ((unsigned)(t / 2) & 1u) ^ 1u);
        fa3_transpose_v<FA3_TRANSPOSERS>(c.vt + buf * FA3_KV_BYTES, c.v + s * FA3_KV_BYTES, warp - 1, lane);
        at_fence_async_smem(); /* each writer publishes its stores to wgmma */
        __syncwarp();
        if (lane == 0) {
          at_bar_arrive(c.bar_vt_full + 8 * buf);
          at_bar_arrive(c.bar_empty_v + 8 * s);
        }
      }
    }
#endif
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(FA3_CONSUMER_REGS));

  /* The consumer warpgroup's index, broadcast from lane 0 so that ptxas knows it is the same in
   * every lane: Q's wgmma descriptors then live in uniform registers (v23). */
  const int cw = __shfl_sync(0xffffffffu, wg - 1, 0), cwarp = warp - 4;
  const int g = lane >> 2, tq = lane & 3;
  float acc[FA3_OT][4], row_max[2], row_sum[2];
#if FA3_PERSISTENT
  /* Ping-pong across work tiles. The consumers walk the same work tiles with the same K/V tile
   * counts, so the K/V tiles of all of them are one sequence, and the GEMMs run in the order
   * consumer 0, 1, (2,) 0, ... through it, work tile boundaries included: the last consumer
   * opens the first one's barrier once here, opens it again after every tile (the last tile of
   * a work tile lets consumer 0 start the next work tile while the others finish theirs), and
   * consumer 0 takes that last arrival after its loop. Each barrier then sees as many arrivals
   * as waits, and each arrival waits for the previous one to be consumed (an arrival by
   * consumer c follows its own wait, which followed the arrival by c - 1 before it), so no
   * barrier is ever arrived at twice in one phase. Work tiles without keys take no part. An
   * epilogue between work tiles sits outside the ordered GEMMs and delays nobody's turn but
   * its own. tests/fa3_ws_protocol.py models these barriers and the mbarriers under random
   * interleavings. */
  if (FA3_PINGPONG && cw == FA3_CONSUMERS - 1) fa3_named_arrive(1, 256);
  for (int j = 0, i, it = 0; (i = fa3_pers_tile_index(j)) < work_tiles; j++) {
    const fa3_work w = fa3_work_tile(c, i, n_heads, batch, m_blocks);
    fa3_ws_consume(c, w, j, it, cw, cwarp, lane, scale_log2, acc, row_max, row_sum);
    fa3_store_o(o, lse, acc, row_max, row_sum, o_descale, scale_log2, T, T, w.b, w.h, n_heads, w.m0, cwarp * 16,
                o_sb, o_ss, o_sh, g, tq);
    it += w.n_tiles;
  }
  if (FA3_PINGPONG && cw == 0) fa3_named_sync(1, 256);
#else
  fa3_ws_consume(c, work, 0, 0, cw, cwarp, lane, scale_log2, acc, row_max, row_sum);
#if FA3_RAGGED
  /* Packed O from the sequence's first row; lse [Nq, total_q]; rows below T_b. */
  fa3_store_o(o + (long long)c.q_first * o_ss, FA3_LSE ? lse + c.q_first : lse, acc, row_max, row_sum, o_descale,
              scale_log2, total_q, T, 0, work.h, n_heads, work.m0, cwarp * 16, 0, o_ss, o_sh, g, tq);
#else
#if FA3_TAIL
  if (tail.pieces > 1) {
    fa3_store_part(o_part, lse_part, acc, row_max, row_sum, o_descale, scale_log2, T, tail.part, work.m0, cwarp * 16,
                   g, tq);
    return;
  }
#endif
  fa3_store_o(o, lse, acc, row_max, row_sum, o_descale, scale_log2, T, T, work.b, work.h, n_heads, work.m0,
              cwarp * 16, o_sb, o_ss, o_sh, g, tq);
#endif
#endif
}
#else /* !FA3_WS */

/* ---- the kernel ------------------------------------------------------------------------------- */
extern "C" __global__ void __launch_bounds__(FA3_THREADS, 1)
FA3_KERNEL(const at_in_t *__restrict__ q, const at_in_t *__restrict__ k,
           const at_in_t *__restrict__ v, at_out_t *__restrict__ o, float *__restrict__ lse, int T, int S,
           float scale_log2, long long q_sb, int q_ss, int q_sh, long long k_sb, int k_ss, int k_sh,
           long long v_sb, int v_ss, int v_sh, long long o_sb, int o_ss, int o_sh,
           const float *__restrict__ descale_q, const float *__restrict__ descale_k,
           const float *__restrict__ descale_v, const float *__restrict__ scale_o, float *__restrict__ amax_o)
{
  (void)scale_o, (void)amax_o; /* FP8 output is not written by fa3 */
  at_wait_for_previous_grid(); /* a programmatic launch: the previous kernel's results first */
  float o_descale = 1.f;
  if (FA3_FP8) {
    if (descale_q) scale_log2 *= *descale_q;
    if (descale_k) scale_log2 *= *descale_k;
    if (descale_v) o_descale = *descale_v;
  }

  extern __shared__ __align__(128) unsigned char fa3_smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;
  const int h = blockIdx.y, b = blockIdx.z, hk = h / FA3_GQA;
  const int m_block = FA3_CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
  const int m0 = m_block * FA3_BM;

  /* Element strides become byte strides for the loader. */
  const unsigned char *qh = (const unsigned char *)(q + b * q_sb + (long long)h * q_sh + (long long)m0 * q_ss);
  const unsigned char *kh = (const unsigned char *)(k + b * k_sb + (long long)hk * k_sh);
  const unsigned char *vh = (const unsigned char *)(v + b * v_sb + (long long)hk * v_sh);
  q_ss *= FA3_ESIZE, k_ss *= FA3_ESIZE, v_ss *= FA3_ESIZE;

  const int offset = FA3_MASK == AT_MASK_CAUSAL_BR ? S - T : 0;
  int n_tiles, n_full;
  fa3_key_tiles(m0, T, S, offset, &n_tiles, &n_full);

  /* Tiles start on 1024-byte boundaries (the swizzle atoms' alignment). */
  const unsigned smem_q = (at_smem_addr(fa3_smem) + 1023u) & ~1023u;
  const unsigned smem_k = smem_q + FA3_Q_BYTES;
  const unsigned smem_v = smem_k + FA3_STAGES * FA3_KV_BYTES;
#if FA3_FP8
  const unsigned smem_vt = smem_v + FA3_STAGES * FA3_KV_BYTES; /* V^T of tile t: buffer t % 2 */
#endif

  /* cp.async groups in commit order: Q, then one group per K/V tile. */
  fa3_load_tile<FA3_BM>(smem_q, qh, q_ss, 0, T - m0, tid);
  at_cp_async_commit();
#pragma unroll
  for (int s = 0; s < FA3_AHEAD; s++) {
    if (s < n_tiles) {
      fa3_load_tile<FA3_BN>(smem_k + s * FA3_KV_BYTES, kh, k_ss, s * FA3_BN, S, tid);
      fa3_load_tile<FA3_BN>(smem_v + s * FA3_KV_BYTES, vh, v_ss, s * FA3_BN, S, tid);
    }
    at_cp_async_commit();
  }

  const int g = lane >> 2, tq = lane & 3;
  /* This warpgroup's 64 rows of Q: row offset inside each column block. */
  const unsigned q_wg = smem_q + (unsigned)(wg * 64 * FA3_CW_D);
  float acc[FA3_OT][4];
  float row_max[2] = {AT_NEG_INF, AT_NEG_INF}, row_sum[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < FA3_OT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  const int row0 = m0 + warp * 16;
  float alpha[2];
  unsigned p[FA3_PK][4];
  float s[FA3_NT][4];
  for (int t = 0; t < n_tiles; t++) {
    const int stage = t % FA3_STAGES;
    if (FA3_OVERLAP && t > 0) fa3_finish_tile(acc, alpha, row_sum, s, p); /* P V of tile t-2 is in O */
    /* Tile t landed (AHEAD - 1 younger groups may be in flight); publish it to the async proxy.
     * The barrier also means every warp is done with what the prefetch below overwrites: tile
     * t-1's K and (FP8) V, or, when P V of the previous tile is still running (16-bit,
     * overlapped), tile t-2's; and with the V^T buffer the transpose below overwrites. */
    at_cp_async_wait<FA3_AHEAD - 1>();
    at_fence_async_smem();
    __syncthreads();
    {
      const int tn = t + FA3_AHEAD, sn = tn % FA3_STAGES;
      if (tn < n_tiles) {
        fa3_load_tile<FA3_BN>(smem_k + sn * FA3_KV_BYTES, kh, k_ss, tn * FA3_BN, S, tid);
        fa3_load_tile<FA3_BN>(smem_v + sn * FA3_KV_BYTES, vh, v_ss, tn * FA3_BN, S, tid);
      }
      at_cp_async_commit();
    }

    at_wgmma_fence();
    fa3_issue_qk(s, q_wg, smem_k + stage * FA3_KV_BYTES);
    at_wgmma_commit();
#if FA3_FP8
    const unsigned vt_now = smem_vt + (t & 1) * FA3_KV_BYTES, vt_prev = smem_vt + ((t + 1) & 1) * FA3_KV_BYTES;
    /* V^T_t, read by P V in the next tile after the fence and barrier at its top, is written
     * under Q K^T and before P V's issue (v28): between that issue's branch and the wait for S,
     * ptxas serialized every wgmma of the kernel (its C7515 warning). Buffer t % 2 was last read
     * by P V of tile t-2, which fa3_finish_tile waited for above. */
    fa3_transpose_v<FA3_WARPS>(vt_now, smem_v + stage * FA3_KV_BYTES, warp, lane);
#endif
    if (FA3_OVERLAP) {
      /* O += P V of tile t-1 (its V^T was published by the barrier above) runs behind Q K^T and
       * through this tile's softmax; only the O rescale waits for it. */
      if (t > 0) {
#if FA3_FP8
        fa3_issue_pv(acc, p, vt_prev);
#else
        fa3_issue_pv(acc, p, smem_v + ((t + FA3_STAGES - 1) % FA3_STAGES) * FA3_KV_BYTES);
#endif
        at_wgmma_commit();
      }
    }
    fa3_wait_s(FA3_OVERLAP && t > 0);

    if (t >= n_full) fa3_mask(s, row0, t * FA3_BN, S, offset, g, tq);
    fa3_softmax<false>(s, row_max, row_sum, alpha, scale_log2);

    if (!FA3_OVERLAP) {
      fa3_rescale(acc, alpha);
      fa3_pack_p(s, p);
      at_wgmma_fence();
      fa3_issue_pv(acc, p, smem_v + stage * FA3_KV_BYTES);
      at_wgmma_commit();
      at_wgmma_wait0();
    }
  }
  if (FA3_OVERLAP && n_tiles > 0) {
    /* P V of the last tile. FP8: every warp's share of its V^T must be written and fenced. */
    fa3_finish_tile(acc, alpha, row_sum, s, p);
    const int last = n_tiles - 1;
#if FA3_FP8
    at_fence_async_smem();
    __syncthreads();
    const unsigned v_last = smem_vt + (last & 1) * FA3_KV_BYTES;
#else
    const unsigned v_last = smem_v + (last % FA3_STAGES) * FA3_KV_BYTES;
#endif
    at_wgmma_fence();
    fa3_issue_pv(acc, p, v_last);
    at_wgmma_commit();
    at_wgmma_wait0();
  }
  at_cp_async_wait<0>(); /* no copy may outlive the CTA */

  /* Epilogue: lane (g,t) holds columns 8j + 2t, 8j + 2t + 1 of rows g and g+8 of its warp. */
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const float sum = at_quad_sum(row_sum[half]);
    const float inv = sum > 0.f ? o_descale / sum : 0.f;
    const int r = warp * 16 + g + half * 8;
    if (m0 + r >= T) continue;
    if (FA3_LSE && tq == 0) {
      const float m = row_max[half];
      lse[((long long)b * gridDim.y + h) * T + m0 + r] =
          sum > 0.f ? (m * scale_log2 + at_log2(sum) - FA3_P_LOG2_SCALE) * 0.69314718055994531f : AT_NEG_INF;
    }
    at_out_t *orow = o + b * o_sb + (long long)h * o_sh + (long long)(m0 + r) * o_ss + 2 * tq;
#pragma unroll
    for (int j = 0; j < FA3_OT; j++) {
      const unsigned packed = at_pack_out(acc[j][2 * half] * inv, acc[j][2 * half + 1] * inv);
      asm volatile("st.global.b32 [%0], %1;\n" ::"l"(orow + 8 * j), "r"(packed) : "memory");
    }
  }
}
#endif /* FA3_WS */
