/*
 * attntune.h — public API of attntune, a code-generating autotuner for fused attention.
 *
 * Conventions
 *   - Every function that can fail returns an at_status; at_last_error() then holds a message for
 *     the calling thread that names the failing call and its arguments.
 *   - Tensors are BSHD by default: Q is [B, T, Nq, D], K and V are [B, S, Nkv, D], O is [B, T, Nq, D],
 *     with Nq % Nkv == 0 (MHA when equal, MQA when Nkv == 1, GQA otherwise). Other layouts are given
 *     by element strides; the head-dim stride is always 1.
 *   - The optional log-sum-exp output is fp32 [B, Nq, T], natural log, -inf for fully masked rows.
 */
#ifndef ATTNTUNE_H
#define ATTNTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbols of the shared library: only what this header declares is exported. */
#if defined(__GNUC__)
#define AT_API __attribute__((visibility("default")))
#else
#define AT_API
#endif

#define ATTNTUNE_VERSION_MAJOR 0
#define ATTNTUNE_VERSION_MINOR 1
#define ATTNTUNE_VERSION_PATCH 0

typedef enum at_status {
  AT_OK = 0,
  AT_ERR_INVALID,     /* a bad argument, shape or pointer */
  AT_ERR_NO_DRIVER,   /* libcuda.so.1 could not be loaded */
  AT_ERR_NO_DEVICE,   /* the driver loaded but no (such) GPU is present */
  AT_ERR_CUDA,        /* a CUDA driver call failed */
  AT_ERR_COMPILE,     /* NVRTC refused a kernel; the message carries the log */
  AT_ERR_CUDNN,       /* cuDNN missing or a cuDNN call failed */
  AT_ERR_UNSUPPORTED, /* the implementation cannot run this shape (e.g. cuDNN says so) */
  AT_ERR_NOMEM,       /* host allocation failed */
  AT_ERR_IO,          /* a file could not be read or written */
  AT_ERR_CACHE,       /* SQLite error */
  AT_ERR_CONFIG,      /* a tuning config is malformed */
  AT_ERR_MISMATCH,    /* a result failed verification */
} at_status;

/* Name of a status ("AT_ERR_CUDA") and the calling thread's last error message ("" if none). */
AT_API const char *at_status_name(at_status status);
AT_API const char *at_last_error(void);
AT_API const char *at_version(void);

typedef enum at_dtype {
  AT_DTYPE_F32 = 0,
  AT_DTYPE_F16,
  AT_DTYPE_BF16,
  AT_DTYPE_E4M3,
  AT_DTYPE_E5M2,
} at_dtype;

typedef enum at_mask {
  AT_MASK_NONE = 0,
  AT_MASK_CAUSAL_TL, /* row i sees keys j <= i (JAX is_causal, cuDNN default) */
  AT_MASK_CAUSAL_BR, /* row i sees keys j <= i + S - T (decode, chunked prefill) */
} at_mask;

/* What an attention call computes. */
typedef struct at_shape {
  int batch;    /* B */
  int q_len;    /* T */
  int kv_len;   /* S */
  int q_heads;  /* Nq */
  int kv_heads; /* Nkv, divides Nq */
  int head_dim; /* D */
  at_dtype dtype; /* of Q, and of K and V unless kv_dtype says otherwise */
  at_mask mask;
  float scale;  /* softmax scale; 0 means 1/sqrt(D) */
  int with_lse; /* also write the row log-sum-exp */
  /* The dtype of K and V where it differs from dtype: an FP8 KV cache, AT_DTYPE_E4M3 or
   * AT_DTYPE_E5M2 with f16 or bf16 Q (the decode family runs it, T <= 16; fa2, fa3 and cuDNN do
   * not). O is then in Q's dtype, and at_fp8_args gives descale_k and descale_v (descale_q is
   * not read: Q is 16-bit). AT_KV_SAME (0, what a zeroed struct and a designated initializer
   * without this field hold) means K and V are in dtype, as before the field existed; so is
   * kv_dtype == dtype. at_shape_kv_dtype() gives the dtype K and V are in either way. */
  at_dtype kv_dtype;
} at_shape;

/* at_shape.kv_dtype: K and V are in the shape's dtype. The value 0 is also AT_DTYPE_F32's, which
 * is never a K/V dtype of its own: f32 K and V come only with f32 Q (dtype = AT_DTYPE_F32). */
#define AT_KV_SAME 0

/* Element strides of a [B, seq, heads, D] tensor; the D stride is 1. */
typedef struct at_strides {
  int64_t batch, seq, head;
} at_strides;

/* Device pointers and strides of one attention call. */
typedef struct at_tensors {
  const void *q, *k, *v;
  void *o;
  float *lse; /* [B, Nq, T] fp32 or NULL */
  at_strides q_stride, k_stride, v_stride, o_stride;
} at_tensors;

/* Size limits of a shape, from the kernels' index math (templates/fa2.cu, fa3.cu, decode.cu). Row and key indices,
 * T and S, and the per-tensor row and head strides are int there; batch strides and every
 * element offset are long long, and byte offsets are those times the element size (up to 4: f32
 * inputs, the f32 room the tuner gives an output, the fp32 log-sum-exp).
 *   - T and S in 1..AT_MAX_SEQ_LEN = 2^30, so that an index plus a tile (at most 256 rows) and the
 *     bottom-right mask's S - T stay below 2^31;
 *   - Nq x D and Nkv x D (the row stride of Q/O and K/V in BSHD) at most AT_MAX_ROW_ELEMENTS =
 *     INT_MAX;
 *   - each tensor, B x T x Nq x D elements for Q and O and B x S x Nkv x D for K and V, at most
 *     AT_MAX_TENSOR_ELEMENTS = 2^61, so that its byte offsets at 4 bytes per element fit a signed
 *     64-bit integer (2^63).
 * Launch limits are checked when a kernel is chosen, not here (the grid's y and z: Nq and B up
 * to 65535 for the fused kernels). */
#define AT_MAX_SEQ_LEN (1 << 30)
#define AT_MAX_ROW_ELEMENTS 2147483647
#define AT_MAX_TENSOR_ELEMENTS (1ull << 61)

/* Shape helpers. at_shape_check explains the first problem it finds: every field in range (B, T,
 * S, Nq, Nkv >= 1, Nkv divides Nq, D in 1..512, a known dtype and mask, a finite scale >= 0; a
 * kv_dtype other than dtype only e4m3 or e5m2 with f16 or bf16 dtype) and the size limits above;
 * its message names the fields, their values and the limit. */
AT_API at_status at_shape_check(const at_shape *shape);
/* The dtype K and V are in: kv_dtype, or dtype where kv_dtype is AT_KV_SAME. */
AT_API at_dtype at_shape_kv_dtype(const at_shape *shape);
AT_API float at_shape_scale(const at_shape *shape);
AT_API double at_shape_flops(const at_shape *shape);
AT_API at_strides at_strides_bshd(int seq_len, int heads, int head_dim);
/* Stable text key of a shape, as the cache and reports use it:
 * "b2.t8192.s8192.hq16.hkv16.d128.bf16.causal" (+ ".lse"); K and V in another dtype than Q add
 * ".kv<dtype>" after the dtype: "b8.t1.s16384.hq32.hkv8.d128.bf16.kve4m3.none". The scale is not
 * part of it: it is a run-time argument that no kernel choice depends on. */
AT_API void at_shape_key(const at_shape *shape, char *buf, size_t size);

AT_API const char *at_dtype_name(at_dtype dtype); /* "f32", "f16", "bf16", "e4m3", "e5m2" */
AT_API size_t at_dtype_size(at_dtype dtype);
AT_API at_status at_dtype_parse(const char *text, at_dtype *out);
AT_API const char *at_mask_name(at_mask mask); /* "none", "causal", "causal-br" */
AT_API at_status at_mask_parse(const char *text, at_mask *out);

/* Host-side conversions, round-to-nearest-even. */
AT_API uint16_t at_f32_to_f16(float x);
AT_API float at_f16_to_f32(uint16_t h);
AT_API uint16_t at_f32_to_bf16(float x);
AT_API float at_bf16_to_f32(uint16_t h);
/* FP8 per the OCP 8-bit floating point spec: E4M3 (no infinities, NaN = S.1111.111, max 448) and
 * E5M2 (IEEE-like, max 57344). Encoding rounds to nearest even and saturates to the largest
 * finite value; NaN encodes as NaN. */
AT_API uint8_t at_f32_to_e4m3(float x);
AT_API float at_e4m3_to_f32(uint8_t code);
AT_API uint8_t at_f32_to_e5m2(float x);
AT_API float at_e5m2_to_f32(uint8_t code);

/* ==== The library: contexts and plans ====================================================
 *
 * An application opens a context on a GPU with a tuning cache (read-only is enough), creates a
 * plan per call shape, and runs plans on its streams with its own device pointers:
 *
 *     at_context *ctx;
 *     at_plan *plan;
 *     at_context_create(0, "attntune.db", 0, &ctx);
 *     at_plan_create(ctx, &shape, NULL, NULL, &plan);      // BSHD; picks the implementation
 *     at_plan_run(plan, &tensors, NULL, stream);            // a launch: no NVRTC, no SQLite
 *     at_plan_destroy(plan);
 *     at_context_destroy(ctx);
 *
 * How a plan chooses (auto): the best verified implementation tuned for exactly this shape on
 * this GPU model (cuDNN when it measured fastest) -> the winner of the nearest tuned shape with
 * the same dtypes, head dim, mask, GQA ratio and log-sum-exp -> the generator's default for the
 * architecture (decode for T <= 16; fa3 on sm_90a for head dims 64/128/256, else fa2) -> cuDNN ->
 * the naive reference kernels (an FP8 KV cache with T > 16 has no generated kernel and no cuDNN
 * graph: the naive kernels run it). Cache rows measured with other kernel templates than this
 * library's are not used (at_plan_describe says so); rows measured with another cuDNN or NVRTC
 * than this process loads are used, and info.reason calls them stale and names both versions
 * (retune to refresh them). Kernels come from the cache's cubins when present; otherwise the
 * plan compiles once (NVRTC) and, when the cache was opened writable, stores the cubin for the
 * next process.
 *
 * Threads: a context may be shared; plan creation is serialized inside it. A plan may be run
 * from one thread at a time (cuDNN plans bind pointers per run); create one per thread for
 * concurrent runs, each on its own stream if you like. A plan may be destroyed on another thread
 * than the one that made it. Every call that touches the GPU (creating, running and destroying
 * plans and contexts, the memory helpers) makes the context's primary context current on the
 * calling thread. at_last_error() is per thread. */

typedef struct at_context at_context;
typedef struct at_plan at_plan;

enum {
  AT_CONTEXT_CACHE_WRITABLE = 1, /* open the cache read-write and store compiled cubins in it */
};

/* cache_path may be NULL (no tuned results: defaults, cuDNN, naive). */
AT_API at_status at_context_create(int device, const char *cache_path, unsigned flags, at_context **out);
AT_API void at_context_destroy(at_context *ctx);
/* "NVIDIA H200 (sm_90a)" */
AT_API const char *at_context_describe(const at_context *ctx);

/* Strides of the four tensors; NULL in at_plan_create means contiguous BSHD. */
typedef struct at_layout {
  at_strides q, k, v, o;
} at_layout;
AT_API at_layout at_layout_bshd(const at_shape *shape);

typedef struct at_plan_options {
  /* NULL or "auto": the chain above. "fused" (or "fa2", its older name): the chain without cuDNN
   * and naive, i.e. generated kernels only; "decode": that chain's decode variants only. "cudnn",
   * "naive", or a variant key
   * ("fa2.bf16.d128.causal.g4.bm128.bn64.w8.s2", "fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.obf16"):
   * exactly that. */
  const char *impl;
} at_plan_options;

/* Per-tensor FP8 scaling of FP8 inputs, device pointers to one fp32 each (x_real = code *
 * descale; attntune_fp8.h makes them). Plans for FP8 inputs write bf16 output. With an FP8 KV
 * cache (at_shape.kv_dtype e4m3 or e5m2, 16-bit Q) only descale_k and descale_v are read;
 * descale_q may be NULL, and O is in Q's dtype. */
typedef struct at_fp8_args {
  const float *descale_q, *descale_k, *descale_v;
} at_fp8_args;

AT_API at_status at_plan_create(at_context *ctx, const at_shape *shape, const at_layout *layout,
                                const at_plan_options *opts, at_plan **out);
/* Enqueue the attention on stream (a CUstream; NULL: the default stream). t's strides must be
 * the plan's layout; pointers must be 16-byte aligned; fp8 is required for FP8 shapes (FP8 Q, K
 * and V, or an FP8 KV cache). */
AT_API at_status at_plan_run(at_plan *plan, const at_tensors *t, const at_fp8_args *fp8, void *stream);
AT_API void at_plan_destroy(at_plan *plan);

typedef enum at_choice {
  AT_CHOICE_EXACT = 0, /* tuned for this shape on this GPU model */
  AT_CHOICE_NEAREST,   /* tuned for the nearest shape of the same kind */
  AT_CHOICE_DEFAULT,   /* the family's default variant */
  AT_CHOICE_CUDNN,     /* cuDNN, as the fallback */
  AT_CHOICE_NAIVE,     /* the naive kernels, the last resort */
  AT_CHOICE_FORCED,    /* at_plan_options.impl named it */
} at_choice;

typedef struct at_plan_info {
  char impl[96];        /* a variant key, "cudnn" or "naive" */
  at_choice choice;
  char reason[768];     /* why, in words: which steps of the chain applied and which did not */
  char tuned_shape[160]; /* the cache row used (exact or nearest), else "" */
  double tuned_ms, cudnn_ms; /* measured on that row; NaN when unknown */
  int compiled;         /* 1 when this plan ran NVRTC (no cubin in the cache) */
  double create_ms;     /* host time at_plan_create took */
} at_plan_info;

AT_API at_status at_plan_describe(const at_plan *plan, at_plan_info *info);
AT_API const char *at_choice_name(at_choice choice); /* "exact", "nearest", ... */

/* Median device time of reps runs after warmup runs, timed like attntune's tuner does. */
AT_API at_status at_plan_benchmark(at_plan *plan, const at_tensors *t, const at_fp8_args *fp8,
                                   int warmup, int reps, double *median_ms);

/* ==== Serving layouts: ragged batches and paged K/V ======================================
 *
 * What LLM servers hand an attention call: B sequences of different lengths in one launch.
 *
 *   Ragged (varlen): the sequences of a tensor are packed one after another along the sequence
 *     axis, [total, N, D], and int32 offsets on the device say where each begins:
 *     cu_seqlens[0] = 0, sequence b is rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1, and
 *     cu_seqlens[B] = total. Q and O share cu_seqlens_q (O is packed like Q); K and V share
 *     cu_seqlens_kv. A sequence may be empty (length 0).
 *   Paged (K and V only; the vLLM layout): K and V are pools of pages [num_pages, page_size, Nkv,
 *     D] (two pools with the same page numbering); an int32 block table [B, max_pages_per_seq]
 *     (row-major) names, for sequence b, the page that holds its tokens p * page_size ..
 *     (p + 1) * page_size - 1 at block_table[b * max_pages_per_seq + p]; seqlens_kv[b] (int32) is
 *     the sequence's length. Pages may sit anywhere in the pool, in any order, and may be shared
 *     between sequences (a common prefix). Page sizes: 1, 16, 32, 64, 128, 256.
 *   Padded: what at_plan_create takes, [B, T, N, D] with every sequence the shape's full length.
 *
 * Q may be padded or ragged; K and V padded, ragged or paged, in any combination (ragged Q with
 * paged K/V is a prefill or mixed step of a server, padded Q of length 1 with paged K/V a decode
 * step). The shape's q_len and kv_len are then the longest lengths the plan accepts (they size
 * the plan: tiles, scratch), batch is B, and everything else means what it means for padded
 * tensors. Masks apply per sequence with that sequence's lengths T_b and S_b: causal top-left
 * lets row i see keys j <= i; causal bottom-right j <= i + S_b - T_b (each sequence's last query
 * row sees its last key, as in decode and chunked prefill). A row that sees no key (every row
 * when S_b = 0; the first T_b - S_b rows under bottom-right when T_b > S_b) gets o = 0 and
 * lse = -inf. The log-sum-exp output is fp32
 * [B, Nq, T] for padded Q, [Nq, total_q] for ragged Q (row cu_seqlens_q[b] + i of head h at
 * h * total_q + cu_seqlens_q[b] + i).
 *
 * What runs them today: padded Q of 1 to 16 tokens (f16 or bf16, K/V in Q's dtype or an FP8 KV
 * cache) with paged K/V runs the decode family's paged variants (keys with .pg<page size>,
 * e.g. "decode.bf16.pg16.d128.none.g4.bm1.bn128.w4.s3.sp8"): "auto", "fused" and "decode" plan
 * the variant `attntune tune` stored for this shape and layout where the cache holds one, else
 * the generator's paged decode default, a paged decode
 * key is taken as given, and "naive" is still the naive kernels. Ragged Q with ragged K/V, or
 * with padded K/V (varlen prefill; Q, K and V in one dtype) runs ragged variants (keys with .rg,
 * or .rgq for padded K/V): fa3's warp-specialized kernel for f16/bf16 on sm_90a (e.g.
 * "fa3.bf16.rg.d128.causal-br.g4.bm128.bn176.w8.s2.ws.lse") and fa2 for f16, bf16 and FP8 with
 * bf16 output on sm_89+ (e.g. "fa2.bf16.rg.d128.causal-br.g4.bm128.bn64.w8.s2.lse"): "auto" and
 * "fused" plan the tuned variant of this shape and layout where the cache holds one, else the
 * generator's ragged default (fa3 where it applies), a ragged key is taken as given; the launch
 * runs over the query blocks of the sequences one after another. Paged K/V in Q's dtype under
 * padded Q of more than 16 tokens (prefill into a paged cache) or under ragged Q runs the paged
 * prefill variants (.pg<N>, and .pg<N>.rgq for ragged Q), planned the same way: on sm_90a with
 * f16/bf16 and pages of 16 tokens or more fa3's warp-specialized kernel, the default there (e.g.
 * "fa3.bf16.pg16.rgq.d128.causal.g4.bm192.bn64.w12.s3.ws": TMA boxes of whole pages), and fa2's
 * (e.g. "fa2.bf16.pg16.rgq.d128.causal.g4.bm128.bn128.w8.s2", the default elsewhere); tuning
 * lists and checks both. Everything else
 * (padded Q with ragged K/V, an FP8 KV cache with ragged or longer Q) runs only the naive
 * reference kernels (impl "naive", and what "auto" falls back to; at_plan_info.reason says why).
 * cuDNN ("cudnn", and the step of "auto" after the generated default) runs, in f16/bf16 with
 * cuDNN >= 9.6.0, ragged Q with ragged or padded K/V through its ragged SDPA graph (a small kernel
 * on the caller's stream turns cu_seqlens into cuDNN's element offsets and lengths before it,
 * another writes rows that see no key and the ragged lse after it), and padded Q with paged K/V
 * through its paged graph (cuDNN's paged cache loads read the pools through the block table;
 * the same kernels give it the lengths and fix the rows without keys). That graph reads every
 * entry of a sequence's table row, not only those its length uses, and multiplies the last
 * page's rows past S_b by zero: those entries must name pages of the pool (at_serving_check
 * refuses a cuDNN plan's table otherwise) and those rows must be finite. cuDNN refuses ragged Q
 * with paged K/V and padded Q with ragged K/V with AT_ERR_UNSUPPORTED (not built). A plan made by
 * at_plan_create_serving with padded Q and padded K/V is an ordinary plan (the whole chain
 * applies).
 *
 * Metadata the generated and naive kernels read on the device is never trusted for addressing:
 * whatever the offsets, lengths and table hold, no such kernel reads or writes outside [0, total_q) rows of Q and O,
 * [0, total_kv) rows of K and V, [0, num_pages) pages of the pools, or B x max_pages_per_seq
 * entries of the table (the decode variants may load entries of a sequence's row past its last
 * page, within the row, and never use them). What the kernels do assume: total_q and total_kv
 * are the rows the tensors have (checked to be >= 0 on the host, not against the allocation),
 * the offsets arrays have B + 1 readable entries, and a packed tensor's rows are seq-stride
 * apart from its pointer. The naive kernels and the ragged fa2/fa3 variants clamp each sequence's
 * range to its tensor (an offset below 0 counts as 0 and one past total as total; a
 * decreasing offset gives an empty sequence), cut lengths to the planned maxima, and treat the
 * keys of a page whose table entry is outside [0, num_pages) as masked (skipped); the paged
 * decode variants do the same (those keys are zero-filled, never read, and masked), and the
 * paged fa2 variants zero-fill them without reading (their scores count as 0), and the paged fa3
 * variants have TMA zero-fill their boxes and mask them. Such a result is
 * wrong but harmless; at_serving_check
 * finds the bad entry and names it, before a run, where the caller asks for it. */

typedef enum at_seq_layout {
  AT_SEQ_PADDED = 0, /* [B, len, N, D]: every sequence the shape's full length */
  AT_SEQ_RAGGED,     /* [total, N, D] packed, int32 cu_seqlens [B + 1] on the device */
  AT_SEQ_PAGED,      /* K and V only: [num_pages, page_size, Nkv, D] pools, a block table, lengths */
} at_seq_layout;

AT_API const char *at_seq_layout_name(at_seq_layout layout); /* "padded", "ragged", "paged" */
AT_API at_status at_seq_layout_parse(const char *text, at_seq_layout *out);
/* 1 when page_size is one the plans take (1, 16, 32, 64, 128, 256), else 0. */
AT_API int at_page_size_allowed(int page_size);

/* How a serving plan's tensors are laid out; a plan parameter, fixed at at_plan_create_serving.
 *
 * Versioned by size: struct_size is sizeof(at_serving_layout) as the caller compiled it
 * (at_serving_layout_make sets it). A later attntune may append fields; this library then reads
 * the fields it knows and refuses a larger struct whose unknown tail is not all zeros (the caller
 * asks for something this library cannot do), and refuses a struct_size smaller than this first
 * version's. Strides are in elements, the D stride is 1, and their batch field means:
 *   padded: the stride between sequences, as in at_layout;
 *   ragged: nothing (rows are found through cu_seqlens): it must be 0;
 *   paged:  the stride between pages of the pool (page_size x Nkv x D for dense pages). */
typedef struct at_serving_layout {
  size_t struct_size;
  at_seq_layout q_layout;  /* of Q and O: AT_SEQ_PADDED or AT_SEQ_RAGGED */
  at_seq_layout kv_layout; /* of K and V: AT_SEQ_PADDED, AT_SEQ_RAGGED or AT_SEQ_PAGED */
  int page_size;           /* paged: tokens per page (1, 16, 32, 64, 128, 256); otherwise 0 */
  int max_pages_per_seq;   /* paged: entries per block-table row, at least ceil(kv_len / page_size);
                            * otherwise 0 */
  at_layout strides;
} at_serving_layout;

/* The dense layout of those kinds for shape: struct_size set, strides of dense BSHD, packed or
 * paged tensors, max_pages_per_seq = ceil(kv_len / page_size) when paged. Values it cannot use
 * (a page size not allowed, Q paged) are kept as given for at_serving_layout_check to refuse. */
AT_API at_serving_layout at_serving_layout_make(const at_shape *shape, at_seq_layout q_layout,
                                                at_seq_layout kv_layout, int page_size);
/* Explains the first problem: the struct size, a layout kind Q cannot have (paged), a page size
 * not allowed (or one given without paged K/V), too few block-table entries for kv_len, a ragged
 * batch stride that is not 0. The shape is checked as at_shape_check does. */
AT_API at_status at_serving_layout_check(const at_shape *shape, const at_serving_layout *layout);
/* "ragged Q with paged K/V (page size 16)", for messages. */
AT_API void at_serving_layout_describe(const at_serving_layout *layout, char *buf, size_t size);

/* Device pointers, strides and metadata of one call of a serving plan.
 *
 * Versioned by size like at_serving_layout: set struct_size to sizeof(at_serving_tensors), which
 * AT_SERVING_TENSORS_INIT does (at_serving_tensors t = AT_SERVING_TENSORS_INIT;). Metadata that
 * the plan's layout does not use must be NULL / 0. */
typedef struct at_serving_tensors {
  size_t struct_size;
  const void *q, *k, *v; /* padded [B, T, Nq, D] / ragged [total_q, Nq, D] / paged pools */
  void *o;               /* laid out like Q */
  float *lse;            /* [B, Nq, T] (padded Q) or [Nq, total_q] (ragged Q), fp32; or NULL */
  at_strides q_stride, k_stride, v_stride, o_stride; /* the plan's layout.strides */
  const int32_t *cu_seqlens_q;  /* ragged Q: [B + 1] */
  const int32_t *cu_seqlens_kv; /* ragged K/V: [B + 1] */
  const int32_t *block_table;   /* paged K/V: [B, max_pages_per_seq] */
  const int32_t *seqlens_kv;    /* paged K/V: [B], each in 0..kv_len */
  int total_q;   /* ragged Q: rows of packed Q and O, cu_seqlens_q[B] (0 allowed) */
  int total_kv;  /* ragged K/V: rows of packed K and V, cu_seqlens_kv[B] */
  int num_pages; /* paged K/V: pages in each pool (at least 1) */
} at_serving_tensors;

#define AT_SERVING_TENSORS_INIT {.struct_size = sizeof(at_serving_tensors)}

/* A plan for a serving layout (see above). NULL layout: padded Q and K/V, dense, which is
 * at_plan_create. Padded Q of 1..16 tokens with paged K/V: "auto", "fused" and "decode" give
 * the paged decode default (auto falls back to cuDNN's paged graph, then naive, where there is
 * none), a paged decode key (.pg<N> matching the layout's page size) is taken as given,
 * "cudnn" gives cuDNN's paged graph (f16/bf16). Longer padded Q or ragged Q with paged K/V:
 * the same with the paged prefill default (fa3's on sm_90a, fa2's elsewhere) and keys (.pg<N>,
 * .pg<N>.rgq; cuDNN only for padded Q). Ragged Q with
 * ragged or padded K/V: "auto" and "fused" give the ragged prefill default (fa3/fa2 .rg / .rgq;
 * auto falls back to cuDNN's ragged graph, then naive, where there is none), a ragged key of the
 * layout's kind is taken as given, "cudnn" gives cuDNN's ragged graph (f16/bf16). Other ragged
 * or paged tensors: "auto" (or NULL opts) gives the naive kernels, whose info.reason names why
 * every earlier step of the chain was skipped; "fused", "cudnn" and variant keys are refused
 * with AT_ERR_UNSUPPORTED naming the layout; "naive" is "naive". A paged decode, ragged prefill
 * or cuDNN ragged plan's run launches on the caller's stream and allocates nothing (capturable in
 * a CUDA graph; for cuDNN's, as far as its engine is). */
AT_API at_status at_plan_create_serving(at_context *ctx, const at_shape *shape, const at_serving_layout *layout,
                                        const at_plan_options *opts, at_plan **out);
/* Enqueue a plan's attention (any plan: one from at_plan_create takes padded tensors here). The
 * rules of at_plan_run hold (strides must be the plan's, Q, K, V and O pointers 16-byte
 * aligned, fp8 for FP8 shapes); metadata pointers must be 4-byte aligned device pointers. Only
 * the host fields (struct_size, pointers, totals, num_pages) are checked here: the device
 * metadata is read by the kernels alone (at_serving_check reads it on the host). at_plan_run
 * refuses a plan with ragged or paged tensors. */
AT_API at_status at_plan_run_serving(at_plan *plan, const at_serving_tensors *t, const at_fp8_args *fp8,
                                     void *stream);
AT_API at_status at_plan_benchmark_serving(at_plan *plan, const at_serving_tensors *t, const at_fp8_args *fp8,
                                           int warmup, int reps, double *median_ms);

/* Checks a call's metadata against its plan: copies the device arrays to the host (a synchronous
 * copy: call it once the metadata is written, e.g. after at_synchronize) and applies
 * at_serving_check_host. */
AT_API at_status at_serving_check(const at_plan *plan, const at_serving_tensors *t);
/* The same checks on metadata in host memory (t's metadata pointers are host pointers here;
 * its tensor pointers are not read): for ragged tensors, cu_seqlens[0] = 0, no offset below the
 * one before it, no sequence longer than the planned q_len / kv_len, cu_seqlens[B] equal to
 * total_q / total_kv; for paged K/V, seqlens_kv in 0..kv_len, and for each sequence the
 * ceil(seqlens_kv[b] / page_size) table entries it uses in [0, num_pages) (entries past those are
 * never used and not checked, but for a cuDNN plan in at_serving_check, which checks every entry
 * of every row). AT_ERR_INVALID names the array, the index and the value:
 * "block_table[2][5] = 4096 is outside the pool (num_pages 4096: pages 0..4095)". */
AT_API at_status at_serving_check_host(const at_shape *shape, const at_serving_layout *layout,
                                       const at_serving_tensors *t);

/* Device memory on the context's GPU, for programs that do not use the CUDA runtime. */
AT_API at_status at_device_alloc(at_context *ctx, size_t bytes, void **ptr);
AT_API void at_device_free(at_context *ctx, void *ptr);
AT_API at_status at_copy_to_device(at_context *ctx, void *dst, const void *src, size_t bytes);
AT_API at_status at_copy_to_host(at_context *ctx, void *dst, const void *src, size_t bytes);
AT_API at_status at_synchronize(at_context *ctx);

#ifdef __cplusplus
}
#endif
#endif /* ATTNTUNE_H */
