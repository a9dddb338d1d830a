/*
 * cudnn_sdpa.h — cuDNN fused attention (scaled dot-product attention, forward) through the cuDNN
 * backend API in plain C. Internal to attntune; prefix rt_cudnn_.
 *
 * cuDNN is loaded at run time (runtime/cudnn.c: $ATTNTUNE_CUDNN, else libcudnn.so.9 from the
 * loader path); rt_cudnn() is the table of the backend entry points we use and RT_CUDNN checks a
 * call, recording the expression, file and line, cuDNN's status name and its own explanation
 * (cudnnGetLastErrorString).
 *
 * Three graphs, one per rt_cudnn_path, and the ragged form of the composite one:
 *
 *   composite (f16/bf16) — the op graph cudnn-frontend's SDPA node emits, which cuDNN fuses into
 *     one flash-attention kernel:
 *       S = Q·Kᵀ → ·scale → [mask: GEN_INDEX row/col → (+S−T for bottom-right) → CMP_GE →
 *       BINARY_SELECT(S, −inf)] → M = max_j → E = exp(S−M) → Z = Σ_j E → stats = M + log Z →
 *       P = E / Z (stored in the I/O type) → O = P·V
 *     The stats branch is always built (cuDNN refuses the pattern without it); it is an output
 *     only when the shape asks for the log-sum-exp.
 *   unified (f16/bf16, cuDNN >= 9.13.1, no mask) — the single fused SDPA_FWD operation.
 *   fp8 (e4m3/e5m2, Hopper and newer) — the composite graph with per-tensor scaling:
 *       S = (Q·Kᵀ)·scale·descale_q·descale_k → mask → softmax (as above) → amax_s = max|P| →
 *       P8 = fp8(P·scale_s) → O32 = (P8·V)·descale_s·descale_v → amax_o = max|O32| →
 *       O = fp8(O32·scale_o)
 *     O has the input FP8 type (Hopper's FP8 engines write FP8 only).
 *   ragged (f16/bf16, cuDNN >= 9.6.0) — the composite graph for packed (varlen) tensors, as the
 *     frontend builds it with ragged offsets and a padding mask: ragged Q/O with ragged or padded
 *     K/V (include/attntune.h, "Serving layouts"). Each packed tensor is [B, H, maxlen, D] with a
 *     ragged offset tensor (int32 [B+1,1,1,1], entry b = the element offset of sequence b's first
 *     row, cu_seqlens[b] x its seq stride); seq_len_q and seq_len_kv (int32 [B,1,1,1]) size the
 *     GEMMs per sequence (matmul M/N/K overrides) and the padding mask
 *       keep(i, j) = i < seq_len_q[b] && j < seq_len_kv[b]   (GEN_INDEX, CMP_LT, LOGICAL_AND)
 *     comes before the causal mask, which then uses each sequence's lengths (bottom-right:
 *     j <= i + seq_len_kv[b] - seq_len_q[b]). A small kernel (runtime/cudnn_ragged.h) computes
 *     the offsets and lengths from cu_seqlens on the caller's stream before the graph, and a second
 *     one afterwards writes o = 0, lse = -inf on rows that see no key and copies cuDNN's stats
 *     ([B, Nq, T], padded, in the plan's scratch) to attntune's ragged lse [Nq, total_q]. Padded Q
 *     with ragged K/V and paged K/V are refused (rt_cudnn_serving_supported says why).
 *
 * Layout: Q [B, T, Nq, D], K/V [B, S, Nkv, D], O [B, T, Nq, D] by at_strides (D stride 1), GQA and
 * MQA by Nkv < Nq; cuDNN sees them as [B, H, seq, D] with those strides (Kᵀ is K's dims and
 * strides with the last two swapped). The log-sum-exp is fp32 [B, Nq, T], natural log, exactly
 * cuDNN's stats tensor [B, Nq, T, 1]. Device pointers must be 16-byte aligned.
 *
 * Plans are built once per (shape, strides, dtype, path) and kept in a small per-object cache
 * (least recently used goes first); rt_cudnn_sdpa_builds() counts the builds. A shape cuDNN
 * cannot run returns AT_ERR_UNSUPPORTED with cuDNN's reason in at_last_error(); the refusal is
 * cached too, so asking again costs nothing.
 *
 * Timing: rt_cudnn_sdpa_bind() does everything but the launch (plan lookup or build, variant
 * pack, workspace); rt_cudnn_sdpa_launch() is cudnnSetStream + cudnnBackendExecute and nothing
 * else, so events around it time cuDNN's kernel the way we time our own launches.
 *
 *     rt_cudnn_sdpa *cd;
 *     rt_cudnn_sdpa_create(&ctx, &cd);
 *     rt_cudnn_sdpa_bind(cd, &shape, &tensors, NULL);   // builds the plan (once)
 *     rt_cudnn_sdpa_launch(cd, stream);                  // time this
 *     rt_cudnn_sdpa_destroy(cd);
 *
 * One rt_cudnn_sdpa is bound to the context current at create (the cuDNN handle lives there);
 * use it from one thread at a time.
 */
#ifndef AT_RUNTIME_CUDNN_SDPA_H
#define AT_RUNTIME_CUDNN_SDPA_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/cudnn.h"
#include "runtime/rt.h"

/* ---- SDPA forward ------------------------------------------------------------------------- */

typedef enum rt_cudnn_path {
  RT_CUDNN_PATH_AUTO = 0,  /* fp8 for e4m3/e5m2; unified for f16/bf16 without a mask where
                              cuDNN has it (as cudnn-frontend picks), else composite */
  RT_CUDNN_PATH_COMPOSITE, /* the frontend's op graph (f16/bf16; masks) */
  RT_CUDNN_PATH_UNIFIED,   /* the single SDPA_FWD op (f16/bf16, no mask, cuDNN >= 9.13.1) */
  RT_CUDNN_PATH_FP8,       /* the FP8 op graph (e4m3/e5m2) */
} rt_cudnn_path;

const char *rt_cudnn_path_name(rt_cudnn_path path); /* "auto", "composite", "unified", "fp8" */
at_status rt_cudnn_path_parse(const char *text, rt_cudnn_path *out);

/* Per-tensor FP8 scaling: device pointers to one fp32 each (cuDNN [1,1,1,1] tensors). Inputs are
 * read, amax_s and amax_o written. The values follow attntune_fp8.h: x ≈ fp8 · descale. */
typedef struct rt_cudnn_fp8_args {
  CUdeviceptr descale_q, descale_k, descale_v; /* dequantize Q, K, V */
  CUdeviceptr scale_s, descale_s;              /* P is stored as fp8(P · scale_s); descale_s = 1/scale_s */
  CUdeviceptr scale_o;                         /* O = fp8(O_real · scale_o) */
  CUdeviceptr amax_s, amax_o;                  /* written: max |P| and max |O_real| */
} rt_cudnn_fp8_args;

/* What a plan is. */
typedef struct rt_cudnn_plan_info {
  rt_cudnn_path path;       /* resolved (never AUTO) */
  int64_t engine;           /* cuDNN's global engine index */
  char knobs[160];          /* the engine config's knob choices, "TILE_M=2 STAGES=3 ..." */
  int64_t workspace_bytes;
  int n_configs;            /* engine configs the heuristics offered */
  int config_index;         /* the first one whose plan finalized */
  size_t cudnn_version;     /* of the library actually loaded, e.g. 91900 */
  double build_ms;          /* host time spent building the graph and plan */
} rt_cudnn_plan_info;

typedef struct rt_cudnn_sdpa rt_cudnn_sdpa;

/* Load cuDNN if needed and create a handle on ctx's context (made current). AT_ERR_CUDNN with
 * the loader's message when cuDNN is missing. */
at_status rt_cudnn_sdpa_create(const rt_ctx *ctx, rt_cudnn_sdpa **out);
void rt_cudnn_sdpa_destroy(rt_cudnn_sdpa *cd);

/* Which graph later binds use (default AUTO). */
void rt_cudnn_sdpa_set_path(rt_cudnn_sdpa *cd, rt_cudnn_path path);

/* Find or build the plan for shape and the strides in t (pointers are not looked at), and
 * describe it. fp8 must be non-NULL exactly for e4m3/e5m2 shapes (its pointers are not looked at
 * either). AT_ERR_UNSUPPORTED with cuDNN's reason when cuDNN cannot run the shape. */
at_status rt_cudnn_sdpa_plan(rt_cudnn_sdpa *cd, const at_shape *shape, const at_tensors *t,
                             const rt_cudnn_fp8_args *fp8, rt_cudnn_plan_info *info);
/* rt_cudnn_sdpa_plan, then the variant pack for t's (and fp8's) pointers and a workspace large
 * enough; the object remembers this call for rt_cudnn_sdpa_launch. */
at_status rt_cudnn_sdpa_bind(rt_cudnn_sdpa *cd, const at_shape *shape, const at_tensors *t,
                             const rt_cudnn_fp8_args *fp8);
/* Enqueue the last bound call on stream (NULL: the legacy default stream). */
at_status rt_cudnn_sdpa_launch(rt_cudnn_sdpa *cd, CUstream stream);
/* bind + launch. */
at_status rt_cudnn_sdpa_run(rt_cudnn_sdpa *cd, const at_shape *shape, const at_tensors *t,
                            const rt_cudnn_fp8_args *fp8, CUstream stream);

/* The plan of the last successful bind/plan call; AT_ERR_INVALID before any. */
at_status rt_cudnn_sdpa_plan_info(const rt_cudnn_sdpa *cd, rt_cudnn_plan_info *info);
/* One line for logs: "cudnn 9.19.0 composite eng4 {TILE_M=2 ...} ws 0 B, config 1/5, 812 ms". */
void rt_cudnn_plan_info_format(const rt_cudnn_plan_info *info, char *out, size_t cap);
/* Plans built by this object so far (a cache hit builds none). */
long rt_cudnn_sdpa_builds(const rt_cudnn_sdpa *cd);

/* ---- ragged (varlen) tensors --------------------------------------------------------------- */

/* Can attntune's cuDNN graphs take this layout with this shape's dtypes? 1 for padded tensors and
 * for ragged Q with ragged or padded K/V in f16/bf16; else 0 and why names the layout and what is
 * missing (paged K/V, padded Q with ragged K/V, FP8, f32, an FP8 KV cache). Needs no GPU and no
 * cuDNN: the version checks come at plan time. */
int rt_cudnn_serving_supported(const at_shape *shape, const at_serving_layout *layout, char *why, size_t cap);
/* Find or build the ragged plan for shape and layout (its strides; packed tensors' batch strides
 * 0), and make what its runs use (the metadata kernels, compiled with NVRTC on first use, their
 * scratch, cuDNN's workspace), so that rt_cudnn_sdpa_run_serving allocates nothing.
 * AT_ERR_UNSUPPORTED with the reason where this layout, this build or the loaded cuDNN (< 9.6.0)
 * cannot run it, or cuDNN refuses the graph. */
at_status rt_cudnn_sdpa_plan_serving(rt_cudnn_sdpa *cd, const at_shape *shape, const at_serving_layout *layout,
                                     rt_cudnn_plan_info *info);
/* Enqueue a ragged call on stream: the metadata kernel, cuDNN's graph, and the fix-up kernel
 * where rows may see no key or the lse is wanted. t is checked by the caller
 * (at_plan_run_serving) except what cuDNN adds: the element offsets total x seq stride fit int32. */
at_status rt_cudnn_sdpa_run_serving(rt_cudnn_sdpa *cd, const at_shape *shape, const at_serving_layout *layout,
                                    const at_serving_tensors *t, CUstream stream);

#endif /* AT_RUNTIME_CUDNN_SDPA_H */
