/*
 * naive_fp8.h — the naive reference with FP8 descales. Prefix rt_ (part of the runtime's naive
 * reference, runtime/naive.c). To be folded into runtime/rt.h (rt_naive_run taking the descales)
 * when that header next changes.
 */
#ifndef AT_RUNTIME_NAIVE_FP8_H
#define AT_RUNTIME_NAIVE_FP8_H

#include "runtime/rt.h"

/* Per-tensor descales of FP8 inputs: device pointers to one fp32 each; NULL means 1. The naive
 * kernels read x_real = decode(code) * descale as they load (include/attntune_fp8.h's convention). */
typedef struct rt_naive_descales {
  const float *descale_q, *descale_k, *descale_v;
} rt_naive_descales;

/* rt_naive_run with descales (fp8 NULL: all ones, which is rt_naive_run). Descales are refused for
 * inputs that are not e4m3/e5m2. */
at_status rt_naive_run_fp8(const rt_naive *naive, const at_shape *shape, const at_tensors *t,
                           const rt_naive_descales *fp8, CUdeviceptr scratch, CUstream stream);

#endif /* AT_RUNTIME_NAIVE_FP8_H */
