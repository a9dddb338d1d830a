/*
 * harness.h — what bench and the tuning worker share: random inputs for one shape on a GPU
 * (rotated sets), the naive fp32 reference and cuDNN's output on set 0, and one way to launch,
 * verify and time any implementation. Prefix tn_.
 */
#ifndef AT_TUNER_HARNESS_H
#define AT_TUNER_HARNESS_H

#include "generator/generator.h"
#include "runtime/cudnn_sdpa.h"
#include "runtime/rt.h"

enum { TN_MAX_SETS = 16 };

/* Why an f32 shape runs only the naive kernels: the two implementations it lacks. bench, the
 * tuner and the worker say it in these words. */
#define TN_F32_NO_FUSED "attntune has no fused f32 kernel (its kernels take f16, bf16, e4m3 and e5m2)"
#define TN_F32_NO_CUDNN "cuDNN has no fp32 attention (its SDPA takes f16, bf16 and FP8 inputs)"
/* Why an FP8 KV cache (16-bit Q, FP8 K/V) has no cuDNN baseline. */
#define TN_KV8_NO_CUDNN                                                                            \
  "no cuDNN baseline for an FP8 KV cache: attntune's cuDNN graphs take Q, K and V in one dtype"


typedef struct tn_harness {
  const rt_ctx *ctx;
  at_shape shape;
  int n_sets;
  CUdeviceptr q[TN_MAX_SETS], k[TN_MAX_SETS], v[TN_MAX_SETS];
  CUdeviceptr o, lse, scratch;
  CUdeviceptr cover; /* keeps the GPU busy while timed launches are enqueued */
  size_t cover_words;
  size_t n_q, n_kv, n_lse;
  double *ref_lse; /* the naive reference's log-sum-exp on set 0 (host); NULL until made */
  float *got;       /* host staging */
  /* The naive reference's O and cuDNN's (decoded; 0 when cuDNN did not run) on set 0, fp32 on the
   * device, and a compare module per output dtype, made on first use: tn_harness_verify reduces
   * on the GPU and copies back two sums, not the output. */
  CUdeviceptr ref_o_dev, cudnn_o_dev;
  rt_compare compare[AT_DTYPE_E5M2 + 1];
  rt_cudnn_sdpa *cudnn;    /* created on first use */
  /* FP8 shapes: cuDNN's scales and amax outputs, one fp32 each 16 bytes apart (cuDNN aligns its
   * tensors), and the arguments pointing into them; allocated with the first cuDNN FP8 plan. */
  CUdeviceptr fp8_scalars;
  rt_cudnn_fp8_args cudnn_fp8;
  float cudnn_o_descale; /* 1 / scale_o of cuDNN's FP8 output */
} tn_harness;

/* Allocate and fill inputs for shape (fresh random values from seed, in [-1, 1), rounded to the
 * dtype; K and V to at_shape_kv_dtype's; FP8 with unit descales). */
at_status tn_harness_open(tn_harness *h, const rt_ctx *ctx, const at_shape *shape,
                          unsigned long long seed);
void tn_harness_close(tn_harness *h);
/* Run the naive kernels with fp32 output on set 0 and keep O (on the device) and LSE (on the host). */
at_status tn_harness_make_reference(tn_harness *h);

/* Faults a test can plant in a candidate (ATTNTUNE_FAULT). */
typedef enum tn_fault {
  TN_FAULT_NONE = 0,
  TN_FAULT_CRASH, /* launch with a wild output pointer: an illegal address */
  TN_FAULT_HANG,  /* the worker stops answering */
  TN_FAULT_NAN,   /* the kernel does not run: the poisoned output (NaN) stays */
} tn_fault;

typedef enum tn_impl_kind { TN_IMPL_NAIVE, TN_IMPL_CUDNN, TN_IMPL_FA2 } tn_impl_kind;

typedef struct tn_impl {
  tn_impl_kind kind;
  char name[GEN_KEY_MAX];
  at_dtype out_dtype; /* what it writes to O: the dtype's default, but the input FP8 for cuDNN */
  float out_descale;  /* O's values are the decoded output times this (1 but for cuDNN FP8) */
  rt_naive naive;     /* TN_IMPL_NAIVE */
  rt_cudnn_path path; /* TN_IMPL_CUDNN */
  rt_variant kernel;   /* TN_IMPL_FA2: any generated variant */
  CUdeviceptr scratch; /* its split-KV partials, when it has any */
  tn_fault fault; /* test hook: TN_FAULT_CRASH or TN_FAULT_NAN */
} tn_impl;

/* Prepare an implementation by name: "naive", "cudnn", "cudnn-unified", or a variant whose
 * cubin is given (module loaded here). tn_impl_close undoes it.
 *
 * cuDNN on FP8 inputs runs its FP8 graph (path composite or auto; the single fused op takes no
 * FP8) with the scales of tn_fp8_unit_input_scales, and writes FP8 output: Hopper's FP8 engines
 * write no other. Its output is decoded with 1 / scale_o before any comparison, and it is
 * verified against the naive reference with the dtype's tolerance, as ours is (the table's FP8
 * tolerances allow for an FP8 output: tests/test_reference.c). A shape cuDNN declines is
 * AT_ERR_UNSUPPORTED with cuDNN's reason after the graph's name, dtype, head dim and arch. */
at_status tn_impl_naive(tn_harness *h, tn_impl *impl);
at_status tn_impl_cudnn(tn_harness *h, rt_cudnn_path path, tn_impl *impl,
                        rt_cudnn_plan_info *info);
at_status tn_impl_variant(tn_harness *h, const gen_variant *v, const void *cubin, tn_impl *impl);
void tn_impl_close(tn_impl *impl);

at_status tn_impl_launch(tn_harness *h, tn_impl *impl, int set, CUstream stream);

/* One launch on set 0 with O and LSE poisoned (0xFF bytes, NaN); relative L2 error of O (or of
 * LSE, the larger) against the naive reference, and of O against cuDNN's output where that is
 * kept (else NaN). A kernel fault comes back as AT_ERR_CUDA. */
at_status tn_harness_verify(tn_harness *h, tn_impl *impl, double *err_naive, double *err_cudnn);
/* After verifying cuDNN (impl): keep the output now in O, decoded, as the cuDNN yardstick. */
at_status tn_harness_keep_cudnn_output(tn_harness *h, const tn_impl *cudnn);

at_status tn_harness_time(tn_harness *h, tn_impl *impl, const rt_timing_opts *opts, rt_timing *out);


#endif
