// probe_check.h — the standalone probes' (scripts/*_probe.cu) return checks: a failed CUDA runtime
// or driver call prints where and why, and the probe exits 1, so that no table is printed from a
// run that went wrong.
#ifndef ATTNTUNE_PROBE_CHECK_H
#define ATTNTUNE_PROBE_CHECK_H

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));        \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#define CU_CHECK(x)                                                                                \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char *s_ = "?";                                                                        \
      cuGetErrorString(r_, &s_);                                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_);                             \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#endif
