/*
 * reference.h — the CPU reference attention in double precision, comparison of results, and the
 * random inputs tests and benchmarks draw. Prefix tn_.
 */
#ifndef AT_TUNER_REFERENCE_H
#define AT_TUNER_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "attntune.h"

/* Attention on the CPU with double accumulation: the same semantics as templates/naive.cu.
 * q, k, v are fp32 values (already rounded to the dtype under test) with the given strides;
 * o is written contiguous [B, T, Nq, D]; lse, if not NULL, [B, Nq, T] (natural log, -inf for a
 * row with no visible key, whose o is 0). Meant for small shapes: O(B·Nq·T·S·D). */
at_status tn_ref_attention(const at_shape *shape, const float *q, at_strides q_stride,
                           const float *k, at_strides k_stride, const float *v,
                           at_strides v_stride, double *o, double *lse);

/* How far out is from ref: ||out - ref|| / ||ref|| over n elements; counts NaN/inf in out. */
typedef struct tn_error {
  double rel_l2;
  double max_abs;
  size_t worst_index; /* where max_abs occurs */
  size_t n_nonfinite;
} tn_error;

tn_error tn_compare(const double *ref, const float *out, size_t n);
/* Same for log-sum-exp rows: -inf in ref must be -inf in out; finite entries compared. */
tn_error tn_compare_lse(const double *ref, const float *out, size_t n);

/* xorshift-based generator: reproducible, fast, never all zeros. */
typedef struct tn_rng {
  uint64_t state;
} tn_rng;

tn_rng tn_rng_seeded(uint64_t seed);
/* A seed from the clock and the process, so each run draws fresh inputs. */
uint64_t tn_fresh_seed(void);
float tn_rng_uniform(tn_rng *rng, float lo, float hi);
void tn_rng_fill(tn_rng *rng, float *x, size_t n, float lo, float hi);
uint64_t tn_rng_u64(tn_rng *rng);

/* n elements of dtype, uniform in [-1, 1) rounded to it (FP8: codes at unit scale), packed into
 * out (n * its size bytes); drawn in chunks of TN_RANDOM_CHUNK elements, chunk c from its own
 * generator seeded by (seed, c), on up to one thread per CPU: the same values for a seed whatever
 * the thread count. Inputs of a large decode shape (4.3e9 elements at B=128 S=16k) took over 20
 * s on one thread. */
enum { TN_RANDOM_CHUNK = 1 << 20 };
at_status tn_random_packed(uint64_t seed, at_dtype dtype, size_t n, void *out);

/* Round an fp32 buffer to the values a dtype can hold (f16/bf16; f32 is unchanged), and pack
 * it into that dtype's storage (2 bytes per element for f16/bf16, 4 for f32). */
void tn_round_to_dtype(at_dtype dtype, float *x, size_t n);
at_status tn_pack(at_dtype dtype, const float *x, size_t n, void *out);
/* Widen packed storage back to fp32. */
at_status tn_unpack(at_dtype dtype, const void *in, size_t n, float *out);
/* An output as the values it stands for: tn_unpack, times descale (1 for outputs written at unit
 * scale; 1 / scale_o for an FP8 output written as fp8(O · scale_o), as cuDNN's FP8 graph does). */
at_status tn_decode_output(at_dtype dtype, float descale, const void *in, size_t n, float *out);

/* The per-tensor scales cuDNN's FP8 graph is given for the inputs tests and benchmarks draw
 * (values in [-1, 1) encoded at unit scale; attntune_fp8.h's convention, x ~= fp8 · descale):
 * Q, K and V descale by 1; P in [0, 1] and O, whose |O| <= max |V| < 1 (each row a convex
 * combination of V's rows), are stored times the format's largest finite value, so neither
 * saturates and as few values as possible fall to subnormals. */
typedef struct tn_fp8_scales {
  float descale_q, descale_k, descale_v;
  float scale_s, descale_s; /* P is stored as fp8(P · scale_s) */
  float scale_o;            /* O is stored as fp8(O · scale_o): decode with 1 / scale_o */
} tn_fp8_scales;

/* AT_ERR_INVALID for a dtype that is not FP8. */
at_status tn_fp8_unit_input_scales(at_dtype fp8, tn_fp8_scales *out);

#endif
