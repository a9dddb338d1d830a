/*
 * cudnn_ragged.h — what cuDNN's ragged (varlen) SDPA graph needs around it: the per-call device
 * metadata cuDNN reads (element offsets and sequence lengths, computed on the caller's stream from
 * attntune's cu_seqlens) and the fix-ups after it (rows without keys, the ragged lse). The kernels
 * are templates/cudnn_ragged.cu, compiled with NVRTC once per plan object; the graph itself is
 * runtime/cudnn_sdpa.c's. Internal; prefix rt_cudnn_ragged_.
 */
#ifndef AT_RUNTIME_CUDNN_RAGGED_H
#define AT_RUNTIME_CUDNN_RAGGED_H

#include <stddef.h>

#include "runtime/rt.h"

/* The module of templates/cudnn_ragged.cu for one output dtype, on the current context. */
typedef struct rt_cudnn_ragged_kernels {
  at_dtype io;
  CUmodule module;
  CUfunction prepare, finish;
} rt_cudnn_ragged_kernels;

/* The source NVRTC compiles for io (f16 or bf16; else AT_ERR_INVALID); the caller frees it. */
at_status rt_cudnn_ragged_source(at_dtype io, char **source);
/* Compile (NVRTC) and load for arch and io. */
at_status rt_cudnn_ragged_kernels_load(const char *arch, at_dtype io, rt_cudnn_ragged_kernels *k);
void rt_cudnn_ragged_kernels_unload(rt_cudnn_ragged_kernels *k);

/* Where one call's metadata lives in a scratch buffer (every part 256-byte aligned, as cuDNN's
 * tensors want 16): int32 element offsets [B + 1] of Q, O, K and V; int32 lengths [B] of Q and
 * K/V; and, when the shape asks for the lse, cuDNN's fp32 stats [B, Nq, T] (padded). */
typedef struct rt_cudnn_ragged_meta {
  CUdeviceptr q_off, o_off, k_off, v_off;
  CUdeviceptr seq_q, seq_kv;
  CUdeviceptr stats; /* 0 without lse */
} rt_cudnn_ragged_meta;

/* Bytes of scratch a shape's metadata needs (rt_cudnn_ragged_meta_at lays them out). */
size_t rt_cudnn_ragged_meta_bytes(const at_shape *shape);
rt_cudnn_ragged_meta rt_cudnn_ragged_meta_at(CUdeviceptr scratch, const at_shape *shape);

/* Largest element offset a call can hand cuDNN (total rows times the larger seq stride of the
 * tensors sharing those offsets) fits the int32 offsets used here; AT_ERR_UNSUPPORTED naming the
 * tensor and the numbers otherwise. Host fields of t only. */
at_status rt_cudnn_ragged_check_offsets(const at_serving_layout *layout, const at_serving_tensors *t);

/* Before the graph: offsets and lengths from t's cu_seqlens into meta, on stream. */
at_status rt_cudnn_ragged_prepare(const rt_cudnn_ragged_kernels *k, const at_shape *shape,
                                  const at_serving_layout *layout, const at_serving_tensors *t,
                                  const rt_cudnn_ragged_meta *meta, CUstream stream);
/* Does a call need rt_cudnn_ragged_finish: the shape asks for the lse, or a row may see no key
 * (ragged K/V, where S_b may be 0; bottom-right masks with T > S)? */
int rt_cudnn_ragged_needs_finish(const at_shape *shape, const at_serving_layout *layout);
/* After the graph: o = 0 and lse = -inf on rows without a visible key, and the stats copied to
 * t's ragged lse when the shape asks for it; on stream. */
at_status rt_cudnn_ragged_finish(const rt_cudnn_ragged_kernels *k, const at_shape *shape,
                                 const at_serving_layout *layout, const at_serving_tensors *t,
                                 const rt_cudnn_ragged_meta *meta, CUstream stream);

#endif /* AT_RUNTIME_CUDNN_RAGGED_H */
