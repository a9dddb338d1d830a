/*
 * rt.h — the runtime layer: CUDA driver (loaded with dlopen), NVRTC, modules, launches, device
 * info, timing, and the naive reference attention. Internal to attntune; prefix rt_.
 *
 * Every function returns at_status and leaves a message in the thread-local error (at_fail).
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
#include "core/core.h"
#include "generator/generator.h"

/* ---- errors ------------------------------------------------------------------------------ */

at_status rt_cu_check(CUresult result, const char *expr, const char *file, int line);
#define RT_CU(expr) rt_cu_check((expr), #expr, __FILE__, __LINE__)

/* ---- the driver API, loaded at run time --------------------------------------------------- */

/* One pointer per driver entry point we use; the names are cuda.h's (which map e.g. cuMemAlloc
 * to cuMemAlloc_v2, so the versioned symbol is what gets looked up). */
#define RT_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)     \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                 \
  X(cuDeviceGetPCIBusId) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)               \
  X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuMemGetInfo) X(cuMemAlloc)       \
  X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemsetD8) X(cuMemsetD32) X(cuMemsetD32Async)     \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute)            \
  X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuStreamCreate) X(cuStreamDestroy)                  \
  X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                    \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamBeginCapture) X(cuStreamEndCapture)     \
  X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)                \
  X(cuTensorMapEncodeTiled) X(cuLaunchKernelEx)

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
/* Multiprocessors of the device of the calling thread's current context. */
at_status rt_current_sm_count(int *sm_count);
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
  /* ptxas serialized the kernel's wgmmas ("Potential Performance Loss: wgmma.mma_async
   * instructions are serialized ...", C7510-C7520): each one issued alone and waited for. */
  int wgmma_serialized;
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
/* The NVRTC version as the cache records it ("13.0"), or "" when NVRTC cannot be loaded. */
void rt_nvrtc_version_text(char *buf, size_t size);
/* Load NVRTC (once; rt_compile does it). AT_ERR_COMPILE with a message when it is missing. */
at_status rt_nvrtc_load(void);

/* ---- modules and launches ---------------------------------------------------------------- */

at_status rt_module_load(const void *cubin, CUmodule *module);
/* NVRTC-compile source (named name, for arch) and load the cubin: the runtime's own small
 * kernels (naive, compare, cuDNN's ragged metadata). */
at_status rt_module_compile(const char *source, const char *name, const char *arch, CUmodule *module);
void rt_module_unload(CUmodule module);
at_status rt_module_function(CUmodule module, const char *name, CUfunction *fn);
/* Allow a kernel more than 48 KB of dynamic shared memory. */
at_status rt_function_set_smem(CUfunction fn, int bytes);

typedef struct rt_launch_dims {
  unsigned grid[3];
  unsigned block[3];
  unsigned smem_bytes;
  int programmatic; /* launch as a programmatic dependent of the stream's previous kernel */
} rt_launch_dims;

at_status rt_launch(CUfunction fn, const rt_launch_dims *dims, CUstream stream, void **args);

/* ---- generated variants: compile (a thread pool), load, launch ------------------------------- */

/* One variant compiled. */
typedef struct rt_compiled {
  gen_variant variant;
  char key[GEN_KEY_MAX];
  at_status status;
  char message[512]; /* when status != AT_OK */
  rt_binary binary;  /* owned; free with rt_compiled_free */
  rt_kernel_resources resources; /* of the first entry point (the one that does the work) */
  double compile_ms;
} rt_compiled;

/* out[i] is variants[i] compiled; jobs <= 0 means one thread per online CPU. Returns AT_OK when
 * the pool ran; each out[i].status says how its compile went. NVRTC runs on the CPU (no GPU). */
at_status rt_compile_all(const gen_variant *variants, int n, const gen_target *target, int jobs,
                         rt_compiled *out);
void rt_compiled_free(rt_compiled *c, int n);
/* dst = a deep copy of src (its cubin and log duplicated; free it with rt_compiled_free). On
 * AT_ERR_NOMEM dst has no binary and says so in its status and message. */
at_status rt_compiled_copy(const rt_compiled *src, rt_compiled *dst);

/* Variants compiled at most once per (key, target) for as long as the memo lives, whichever
 * thread asks: a tuning run's shapes that list the same keys (B1 and B2 of one head dim, mask and
 * GQA ratio) and its GPUs share the compiles. The generated source depends on the variant and
 * the target only, so a key's cubin is the same for every shape. Thread-safe; a thread asking
 * for a key another is compiling waits for that compile. */
typedef struct rt_compile_memo rt_compile_memo;
at_status rt_compile_memo_create(rt_compile_memo **memo);
void rt_compile_memo_destroy(rt_compile_memo *memo);
/* out = v compiled for target (a copy of the memo's, which keeps the first compile's status,
 * message, resources and compile_ms); out->variant is v. */
void rt_compile_memoized(rt_compile_memo *memo, const gen_variant *v, const gen_target *target, rt_compiled *out);
/* How many requests were served from the memo, and how many compiles it ran. */
void rt_compile_memo_counts(rt_compile_memo *memo, int *hits, int *compiles);

/* A variant's module on the current context and its entry points in launch order. */
typedef struct rt_variant {
  gen_variant variant;
  CUmodule module;
  CUfunction fn[GEN_MAX_KERNELS];
  int n_fn;
  int binary_version; /* of the cubin, 10 * major + minor (90: sm_90a) */
  int sm_count; /* of the context's device: persistent variants launch at most this many CTAs per
                 * ctas_per_sm (gen_launch_desc.work_tiles); 0 launches one CTA per work tile */
} rt_variant;

/* Load a variant's cubin, find every entry point and note the SM count of the current context's
 * device (persistent launches). On failure nothing stays loaded. */
at_status rt_variant_load(const gen_variant *v, const void *cubin, rt_variant *out);
void rt_variant_unload(rt_variant *lv);

/* Per-tensor FP8 scaling of one call: device pointers to one fp32 each (x_real = code * descale,
 * as include/attntune_fp8.h). NULL inputs mean 1. scale_o and amax_o are used only when O is FP8:
 * O = fp8(O_real * scale_o), amax_o = max |O_real| (the launch zeroes it on the stream first).
 * P's scale is fixed inside the kernel (448, E4M3's largest value), so it is not an argument. */
typedef struct rt_fp8_args {
  const float *descale_q, *descale_k, *descale_v;
  const float *scale_o;
  float *amax_o;
} rt_fp8_args;

/* One call's checked arguments, as cuLaunchKernel reads them, built from the generator's launch
 * description (gen_launch_describe): what rt_variant_launch does before its launches (including
 * raising each function's shared-memory limit), for callers that launch the same call many times.
 * args point into the frame: do not copy a frame. */
typedef union rt_arg_slot {
  CUdeviceptr ptr;
  int i;
  long long ll;
  float f;
} rt_arg_slot;

typedef struct rt_launch_frame {
  gen_launch_desc desc;
  CUfunction fn[GEN_MAX_KERNELS];
  rt_launch_dims dims[GEN_MAX_KERNELS];
  rt_arg_slot slots[GEN_ARG_COUNT];
  void *args[GEN_MAX_KERNELS][GEN_MAX_ARGS];
  CUdeviceptr amax_o; /* zeroed on the stream before the kernels when set */
  /* GEN_ARG_TMAP_Q, _K, _V of TMA variants (desc.tmap_rows), GEN_ARG_TMAP_SCRATCH (desc.scratch_tmap) */
  CUtensorMap tmaps[4];
} rt_launch_frame;

/* The paged K/V metadata of one call (at_serving_tensors' block table, lengths and their bounds),
 * what variants with spec.page_size > 0 read besides the tensors; NULL for contiguous K/V. */
typedef struct rt_paged_args {
  const int32_t *block_table; /* device, [B, max_pages_per_seq] */
  const int32_t *seqlens_kv;  /* device, [B] */
  int max_pages_per_seq, num_pages;
} rt_paged_args;

/* The ragged metadata of one call (at_serving_tensors' offsets and packed totals), what variants
 * with spec.ragged read besides the tensors; NULL for padded tensors. cu_seqlens_kv is NULL for
 * ragged Q with padded K/V (.rgq). */
typedef struct rt_ragged_args {
  const int32_t *cu_seqlens_q;  /* device, [B + 1] */
  const int32_t *cu_seqlens_kv; /* device, [B + 1], or NULL */
  int total_q, total_kv;
} rt_ragged_args;

/* The scratch bytes a call of v on shape needs (0 for single-kernel variants). */
at_status rt_variant_scratch_bytes(const gen_variant *v, const at_shape *shape, size_t *bytes);
/* That scratch, allocated on the current context's GPU and zeroed (0 and AT_OK where none is
 * needed); every owner of a variant's scratch allocates it here. */
at_status rt_variant_scratch_alloc(const gen_variant *v, const at_shape *shape, CUdeviceptr *scratch);
/* Checks that the shape is the variant's spec and that pointers and strides allow the copies the
 * kernels make (rows a multiple of 16 bytes: 8 elements of 16 bits, 16 of FP8). fp8 may be NULL
 * (unit descales, no amax); scratch holds rt_variant_scratch_bytes. */
at_status rt_variant_prepare(const rt_variant *lv, const at_shape *shape, const at_tensors *t,
                             const rt_fp8_args *fp8, CUdeviceptr scratch, rt_launch_frame *frame);
/* The same for a serving call: paged the metadata of paged K/V (NULL for contiguous variants; a
 * paged variant refuses NULL, a contiguous one a non-NULL paged), ragged the offsets of a ragged
 * variant (NULL for padded tensors, likewise). Both NULL is rt_variant_prepare. */
at_status rt_variant_prepare_serving(const rt_variant *lv, const at_shape *shape, const at_tensors *t,
                                     const rt_fp8_args *fp8, const rt_paged_args *paged,
                                     const rt_ragged_args *ragged, CUdeviceptr scratch, rt_launch_frame *frame);
/* Enqueue a prepared frame's kernels (amax first zeroed). */
at_status rt_frame_launch(const rt_launch_frame *frame, CUstream stream);
at_status rt_variant_launch(const rt_variant *lv, const at_shape *shape, const at_tensors *t,
                            const rt_fp8_args *fp8, CUdeviceptr scratch, CUstream stream);
at_status rt_variant_launch_serving(const rt_variant *lv, const at_shape *shape, const at_tensors *t,
                                    const rt_fp8_args *fp8, const rt_paged_args *paged, const rt_ragged_args *ragged,
                                    CUdeviceptr scratch, CUstream stream);

/* ---- timing ------------------------------------------------------------------------------ */

/* How every implementation is timed, the same way: warm-up launches first, then `reps` launches
 * enqueued back to back with an event between each two, behind memsets that keep the GPU busy
 * while they are enqueued, so the GPU runs them without gaps and each interval holds one launch;
 * the median interval is the result. Inputs rotate among several sets so that small problems are
 * not served from L2. The library's at_plan_benchmark and the tuner share it. */
typedef struct rt_timing_opts {
  int warmup; /* launches before timing */
  int reps;   /* timed launches */
  /* Optional: a device buffer that a few memsets fill before the first timed launch, so the GPU
   * is busy while the host enqueues and no interval holds the host's launch latency. */
  CUdeviceptr cover;
  size_t cover_words;
  /* Time CUDA-graph replays instead: the launches are captured into one graph (on a stream of
   * the timing's own) and the graph is replayed; the result is the median replay's time over the
   * launches it holds. No host enqueue time is left in it, for either side of a comparison, which
   * is what small (decode) shapes need. Falls back to events when a launch cannot be captured. */
  int graph;
} rt_timing_opts;

typedef struct rt_timing {
  double median_ms, min_ms, max_ms;
  int reps;
  int graph; /* 1 when measured by graph replay */
} rt_timing;

/* Enqueue one launch on stream, reading input set `set`. */
typedef at_status (*rt_launch_fn)(void *user, int set, CUstream stream);

at_status rt_time_launches(rt_launch_fn launch, void *user, int n_sets, const rt_timing_opts *opts,
                           CUstream stream, rt_timing *out);

/* The n > 0 readings in ms (sorted here) as a timing: the fastest, slowest and median, each times
 * scale. Every median of times is taken here: the timing's own, and the medians over repeated
 * timings (bench --rounds and --overhead, the tuner's final rounds). */
void rt_timing_summarize(float *ms, int n, double scale, rt_timing *out);

/* How many input sets of `bytes` each to rotate so that together they are at least twice the L2
 * (1 when one set already is), capped at max_sets. */
int rt_rotation_sets(size_t bytes, size_t l2_bytes, int max_sets);

/* ---- cuDNN (loaded at run time) ----------------------------------------------------------- */

/* Load cuDNN: $ATTNTUNE_CUDNN (a file or a folder holding libcudnn.so.9) if set, else
 * libcudnn.so.9 from the loader path. *version is cudnnGetVersion() (e.g. 91900) and path the
 * file actually loaded. */
at_status rt_cudnn_load(void);
at_status rt_cudnn_version(size_t *version, const char **path);
/* The cuDNN version as the cache records it ("9.19.0"), or "" when cuDNN cannot be loaded. */
void rt_cudnn_version_text(char *buf, size_t size);

/* ---- the naive reference ------------------------------------------------------------------ */

/* Three kernels (scores, softmax, P·V) that materialize the fp32 [B, Nq, T, S] score matrix.
 * One rt_naive holds the module compiled for an input and an output dtype on the current context. */
typedef struct rt_naive {
  at_dtype in_dtype, out_dtype;
  at_dtype kv_dtype; /* of K and V: in_dtype, or e4m3/e5m2 with 16-bit Q */
  CUmodule module;
  CUfunction scores, softmax, pv;
} rt_naive;

/* Source the naive kernels compile from, for in/out dtypes (caller frees). */
at_status rt_naive_source(at_dtype in_dtype, at_dtype out_dtype, char **source);
/* Compile and load for the current context's arch. out_dtype: F32, F16 or BF16. */
at_status rt_naive_create(const char *arch, at_dtype in_dtype, at_dtype out_dtype, rt_naive *naive);
/* The same with K and V in kv_dtype (at_shape_kv_dtype: in_dtype, or e4m3/e5m2 with f16/bf16 Q). */
at_status rt_naive_source_kv(at_dtype in_dtype, at_dtype kv_dtype, at_dtype out_dtype, char **source);
at_status rt_naive_create_kv(const char *arch, at_dtype in_dtype, at_dtype kv_dtype, at_dtype out_dtype,
                             rt_naive *naive);
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
 * inputs that are not e4m3/e5m2: descale_q with 16-bit Q, descale_k and descale_v with 16-bit K/V. */
at_status rt_naive_run_fp8(const rt_naive *naive, const at_shape *shape, const at_tensors *t,
                           const rt_naive_descales *fp8, CUdeviceptr scratch, CUstream stream);
/* The same for a serving layout (include/attntune.h, "Serving layouts"): layout and t are this
 * library's versions of the structs (copied by at_versioned_copy), the shape's q_len and kv_len
 * the maxima; scratch holds rt_naive_scratch_bytes(shape). The layout and the host fields of t
 * are checked; the device metadata is not read here (the kernels clamp it: naive.cu). */
at_status rt_naive_run_serving(const rt_naive *naive, const at_shape *shape, const at_serving_layout *layout,
                               const at_serving_tensors *t, const rt_naive_descales *fp8, CUdeviceptr scratch,
                               CUstream stream);

/* The source of one of the runtime's own kernels: preamble (its #defines), then common.cuh, then
 * the template body_name ("naive.cu", "compare.cu"); the caller frees *source. */
at_status rt_template_source(const char *preamble, const char *body_name, char **source);

/* ---- comparing an output with its reference on the GPU (templates/compare.cu) ----------------- */

/* One module per output dtype on the current context, with its own device sums. */
typedef struct rt_compare {
  at_dtype out_dtype;
  CUmodule module;
  CUfunction fn;
  CUdeviceptr sums; /* 2 fp64 sums and a count */
  CUdevice device;
  unsigned blocks;
} rt_compare;

/* Over the entries whose decoded output is finite: sum (out - ref)^2 and sum ref^2; and how many
 * are NaN or infinite. */
typedef struct rt_compare_sums {
  double diff2, ref2;
  unsigned long long nonfinite;
} rt_compare_sums;

at_status rt_compare_source(at_dtype out_dtype, char **source); /* caller frees */
at_status rt_compare_create(const char *arch, at_dtype out_dtype, rt_compare *c);
void rt_compare_destroy(rt_compare *c);
/* ref: n fp32; out: n entries of c's dtype, compared as decode(out) * descale. Synchronous (the
 * NULL stream): call it after the output's kernels have finished. */
at_status rt_compare_run(const rt_compare *c, CUdeviceptr ref, CUdeviceptr out, float descale, size_t n,
                         rt_compare_sums *sums);
/* sqrt(diff2 / ref2) (sqrt(diff2) when ref2 is 0); infinite when any entry is not finite, as
 * tuner/reference.c's tn_compare. */
double rt_compare_rel_l2(const rt_compare_sums *s);

#endif /* AT_RUNTIME_RT_H */
