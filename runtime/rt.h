/*
 * rt.h — the runtime layer: CUDA driver (loaded with dlopen), NVRTC, modules, launches, device
 * info, timing, and the naive reference attention. Internal to attntune; prefix rt_.
 *
 * Every function returns at_status and leaves a message in the thread-local error (rt_fail).
 * Driver calls go through rt_cu() (the table of function pointers) and are checked with RT_CU,
 * which records the expression, file and line:
 *
 *     at_status rc;
 *     if ((rc = RT_CU(rt_cu()->cuMemAlloc(&ptr, bytes))) != AT_OK) goto out;
 */
#ifndef AT_RUNTIME_RT_H
#define AT_RUNTIME_RT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "attntune.h"

/* ---- errors ------------------------------------------------------------------------------ */

/* Store a formatted message for the calling thread and return code. */
at_status rt_fail(at_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepend context to the current message ("while compiling fa2...: <old message>"). */
at_status rt_fail_context(at_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rt_clear_error(void);

at_status rt_cu_check(CUresult result, const char *expr, const char *file, int line);
#define RT_CU(expr) rt_cu_check((expr), #expr, __FILE__, __LINE__)

/* ---- the driver API, loaded at run time --------------------------------------------------- */

/* One pointer per driver entry point we use; the names are cuda.h's (which map e.g. cuMemAlloc
 * to cuMemAlloc_v2, so the versioned symbol is what gets looked up). */
#define RT_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)     \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                 \
  X(cuDeviceGetPCIBusId) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)               \
  X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuMemGetInfo) X(cuMemAlloc)       \
  X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemsetD8) X(cuMemsetD32) X(cuMemsetD32Async)     \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute)            \
  X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuStreamCreate) X(cuStreamDestroy)                  \
  X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                    \
  X(cuEventSynchronize) X(cuEventElapsedTime)

typedef struct rt_driver {
#define RT_DRIVER_FIELD(name) __typeof__(&name) name;
  RT_DRIVER_FUNCTIONS(RT_DRIVER_FIELD)
#undef RT_DRIVER_FIELD
} rt_driver;

/* Load libcuda.so.1 and call cuInit once per process (thread-safe). AT_ERR_NO_DRIVER when the
 * library is missing, AT_ERR_NO_DEVICE when cuInit reports no device. */
at_status rt_driver_load(void);
/* The loaded table; only valid after rt_driver_load() returned AT_OK. */
const rt_driver *rt_cu(void);

/* ---- devices ------------------------------------------------------------------------------ */

typedef struct rt_device_info {
  int ordinal;
  char name[256];
  char pci_bus_id[32];
  int cc_major, cc_minor;
  int sm_count;
  size_t total_mem;
  int l2_bytes;
  int smem_per_block_optin; /* the most dynamic shared memory a block may ask for */
  int smem_per_sm;
  int regs_per_sm;
  int clock_khz;
  int mem_clock_khz;
  int mem_bus_bits;
  int driver_version; /* e.g. 13000 */
} rt_device_info;

at_status rt_device_count(int *count);
/* The kernel driver's release ("580.159.04") from /proc/driver/nvidia/version, or "unknown". */
void rt_driver_release(char *out, size_t cap);
at_status rt_device_query(int ordinal, rt_device_info *info);
/* The NVRTC target for a device: "sm_90a" for compute capability 9.0, "sm_<major><minor>" else. */
void rt_arch_for_cc(int cc_major, int cc_minor, char arch[16]);
/* Parse "sm_80", "sm_90a", "compute_90a"; fills the compute capability and whether it is an
 * arch-specific ('a') target. */
at_status rt_arch_parse(const char *arch, int *cc_major, int *cc_minor, int *arch_specific);

/* ---- contexts, memory, streams, timing ----------------------------------------------------- */

/* The primary context of a device, retained and made current on the calling thread. */
typedef struct rt_ctx {
  int ordinal;
  CUdevice device;
  CUcontext context;
  rt_device_info info;
  char arch[16];
} rt_ctx;

at_status rt_ctx_open(int ordinal, rt_ctx *ctx);
at_status rt_ctx_bind(const rt_ctx *ctx); /* make current on this thread */
/* Wait for all work; a kernel fault (illegal address, trap) surfaces here as AT_ERR_CUDA. */
at_status rt_ctx_sync(const rt_ctx *ctx);
void rt_ctx_close(rt_ctx *ctx);

at_status rt_alloc(CUdeviceptr *ptr, size_t bytes);
void rt_free(CUdeviceptr ptr);
at_status rt_upload(CUdeviceptr dst, const void *src, size_t bytes);
at_status rt_download(void *dst, CUdeviceptr src, size_t bytes);
at_status rt_fill_u8(CUdeviceptr dst, unsigned char value, size_t bytes);
at_status rt_fill_u32(CUdeviceptr dst, uint32_t value, size_t count);

/* Milliseconds between two recorded events (waits for the second). */
at_status rt_event_ms(CUevent start, CUevent stop, float *ms);

/* ---- NVRTC -------------------------------------------------------------------------------- */

/* Resource use of one kernel as ptxas reported it (compiled with -Xptxas -v). -1: not reported. */
typedef struct rt_kernel_resources {
  char name[128];
  int registers;
  int spill_store_bytes, spill_load_bytes;
  int stack_bytes;
  int smem_bytes; /* static shared memory */
} rt_kernel_resources;

typedef struct rt_binary {
  void *cubin;
  size_t cubin_size;
  char *log; /* NVRTC's log, NUL-terminated, possibly empty */
  int n_kernels;
  rt_kernel_resources kernels[8];
} rt_binary;

/* Compile CUDA source to a cubin for arch ("sm_90a", "sm_80", ...). name is used in messages and
 * as the program name. extra_opts may be NULL. On AT_ERR_COMPILE the message holds the log. */
at_status rt_compile(const char *source, const char *name, const char *arch,
                     const char *const *extra_opts, int n_extra, rt_binary *out);
void rt_binary_free(rt_binary *bin);
/* Resources of the named kernel in a compiled binary, or NULL. */
const rt_kernel_resources *rt_binary_kernel(const rt_binary *bin, const char *kernel);
at_status rt_nvrtc_version(int *major, int *minor);
/* Load NVRTC (once; rt_compile does it). AT_ERR_COMPILE with a message when it is missing. */
at_status rt_nvrtc_load(void);

/* ---- modules and launches ---------------------------------------------------------------- */

at_status rt_module_load(const void *cubin, CUmodule *module);
void rt_module_unload(CUmodule module);
at_status rt_module_function(CUmodule module, const char *name, CUfunction *fn);
/* Allow a kernel more than 48 KB of dynamic shared memory. */
at_status rt_function_set_smem(CUfunction fn, int bytes);

typedef struct rt_launch_dims {
  unsigned grid[3];
  unsigned block[3];
  unsigned smem_bytes;
} rt_launch_dims;

at_status rt_launch(CUfunction fn, const rt_launch_dims *dims, CUstream stream, void **args);

/* ---- cuDNN (loaded at run time) ----------------------------------------------------------- */

/* Load cuDNN: $ATTNTUNE_CUDNN (a file or a folder holding libcudnn.so.9) if set, else
 * libcudnn.so.9 from the loader path. *version is cudnnGetVersion() (e.g. 91900) and path the
 * file actually loaded. */
at_status rt_cudnn_load(void);
at_status rt_cudnn_version(size_t *version, const char **path);

/* ---- templates ---------------------------------------------------------------------------- */

/* Text of an embedded template file ("naive.cu", "common.cuh"), or NULL. */
const char *at_template_text(const char *name, size_t *size);

/* ---- the naive reference ------------------------------------------------------------------ */

/* Three kernels (scores, softmax, P·V) that materialize the fp32 [B, Nq, T, S] score matrix.
 * One rt_naive holds the module compiled for an input and an output dtype on the current context. */
typedef struct rt_naive {
  at_dtype in_dtype, out_dtype;
  CUmodule module;
  CUfunction scores, softmax, pv;
} rt_naive;

/* Source the naive kernels compile from, for in/out dtypes (caller frees). */
at_status rt_naive_source(at_dtype in_dtype, at_dtype out_dtype, char **source);
/* Compile and load for the current context's arch. out_dtype: F32, F16 or BF16. */
at_status rt_naive_create(const char *arch, at_dtype in_dtype, at_dtype out_dtype, rt_naive *naive);
void rt_naive_destroy(rt_naive *naive);
/* Bytes of scratch (the score matrix) a call needs. */
size_t rt_naive_scratch_bytes(const at_shape *shape);
/* Run on stream; scratch holds rt_naive_scratch_bytes(shape). */
at_status rt_naive_run(const rt_naive *naive, const at_shape *shape, const at_tensors *t,
                       CUdeviceptr scratch, CUstream stream);

/* Per-tensor descales of FP8 inputs: device pointers to one fp32 each; NULL means 1. The naive
 * kernels read x_real = decode(code) * descale as they load (include/attntune_fp8.h's convention). */
typedef struct rt_naive_descales {
  const float *descale_q, *descale_k, *descale_v;
} rt_naive_descales;

/* rt_naive_run with descales (fp8 NULL: all ones, which is rt_naive_run). Descales are refused for
 * inputs that are not e4m3/e5m2. */
at_status rt_naive_run_fp8(const rt_naive *naive, const at_shape *shape, const at_tensors *t,
                           const rt_naive_descales *fp8, CUdeviceptr scratch, CUstream stream);

#endif /* AT_RUNTIME_RT_H */
