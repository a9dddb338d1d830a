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
const char *at_status_name(at_status status);
const char *at_last_error(void);
const char *at_version(void);

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
  at_dtype dtype; /* of Q, K and V */
  at_mask mask;
  float scale;  /* softmax scale; 0 means 1/sqrt(D) */
  int with_lse; /* also write the row log-sum-exp */
} at_shape;

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

/* Shape helpers. at_shape_check explains the first problem it finds. */
at_status at_shape_check(const at_shape *shape);
float at_shape_scale(const at_shape *shape);
double at_shape_flops(const at_shape *shape);
at_strides at_strides_bshd(int seq_len, int heads, int head_dim);
/* Stable text key of a shape, as the cache and reports use it:
 * "b2.t8192.s8192.hq16.hkv16.d128.bf16.causal" (+ ".lse"). The scale is not part of it: it is
 * a run-time argument that no kernel choice depends on. */
void at_shape_key(const at_shape *shape, char *buf, size_t size);

const char *at_dtype_name(at_dtype dtype); /* "f32", "f16", "bf16", "e4m3", "e5m2" */
size_t at_dtype_size(at_dtype dtype);
at_status at_dtype_parse(const char *text, at_dtype *out);
const char *at_mask_name(at_mask mask); /* "none", "causal", "causal-br" */
at_status at_mask_parse(const char *text, at_mask *out);

/* Host-side conversions, round-to-nearest-even. */
uint16_t at_f32_to_f16(float x);
float at_f16_to_f32(uint16_t h);
uint16_t at_f32_to_bf16(float x);
float at_bf16_to_f32(uint16_t h);
/* FP8 per the OCP 8-bit floating point spec: E4M3 (no infinities, NaN = S.1111.111, max 448) and
 * E5M2 (IEEE-like, max 57344). Encoding rounds to nearest even and saturates to the largest
 * finite value; NaN encodes as NaN. */
uint8_t at_f32_to_e4m3(float x);
float at_e4m3_to_f32(uint8_t code);
uint8_t at_f32_to_e5m2(float x);
float at_e5m2_to_f32(uint8_t code);

#ifdef __cplusplus
}
#endif
#endif /* ATTNTUNE_H */
