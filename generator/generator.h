/*
 * generator.h — the variant space of the fused kernels and their source emission. Prefix gen_.
 *
 * A variant is a kernel family, the shape specialization it is compiled for (dtype, head dim, mask,
 * GQA ratio, log-sum-exp or not) and the family's tuning parameters. Its key is stable and readable,
 * and parses back into the same variant:
 *
 *     fa2.bf16.d128.causal.g4.bm128.bn64.w4.s2[.o<dtype>][.lse]
 *         |    |    |      |  |     |    |  |   `- output dtype, FP8 inputs only (obf16, of16,
 *         |    |    |      |  |     |    |  |      oe4m3, oe5m2); 16-bit inputs write their own
 *         |    |    |      |  |     |    |  `- K/V pipeline stages in shared memory
 *         |    |    |      |  |     |    `--- warps per CTA
 *         |    |    |      |  |     `-------- keys per K/V tile (block_n)
 *         |    |    |      |  `-------------- query rows per CTA (block_m)
 *         |    |    |      `----------------- GQA ratio Nq / Nkv (1: MHA)
 *         |    |    `------------------------ mask: none, causal (top-left), causal-br (bottom-right)
 *         |    `----------------------------- head dim
 *         `---------------------------------- family
 *
 *     e.g. fa2.e4m3.d128.none.g1.bm128.bn64.w4.s2.obf16
 *
 * Families: fa2 (templates/fa2.cu, generator/fa2.c): mma.sync, f16/bf16/FP8, sm_80 and newer.
 * fa3 (templates/fa3.cu, generator/fa3.c): wgmma, sm_90a only; FP8 inputs with bf16/f16 output,
 * or f16/bf16 in and out; head dim 64/128/256, block_m = 16 * warps (one or two warpgroups), block_n 64 or 128; the same
 * kernel arguments and launch as fa2. gen_enumerate lists both where both apply; the tuner picks.
 *
 * FP8 (e4m3, e5m2): Q, K and V in one FP8 type with per-tensor fp32 descales (device scalars,
 * gen_fp8_args), mma.sync m16n8k32 (sm_89 and newer; sm_80/86/87 targets refuse FP8), head dim a
 * multiple of 16, block_n a multiple of 32, output bf16 by default (f16, e4m3, e5m2 on request;
 * FP8 output takes scale_o and writes amax_o). templates/fa2.cu explains P's scaling and V's layout.
 *
 * Data flow: shape -> gen_enumerate (pruned variants) -> gen_emit (source) -> rt_compile -> cubin ->
 * gen_launch (gen_launch_fp8 with descales). Constraints (shared memory, register budget, tile shapes) are checked before anything
 * is compiled; the template repeats them as static_asserts.
 */
#ifndef AT_GENERATOR_GENERATOR_H
#define AT_GENERATOR_GENERATOR_H

#include <stddef.h>

#include <cuda.h>

#include "attntune.h"
#include "runtime/rt.h"

typedef enum gen_family {
  GEN_FAMILY_FA2 = 0, /* FlashAttention-2 style, mma.sync, sm_80+ */
  GEN_FAMILY_FA3 = 1, /* Hopper: wgmma, FP8/bf16/f16, sm_90a only (templates/fa3.cu) */
} gen_family;

/* What a variant is specialized for; a variant runs exactly the shapes with this spec. */
typedef struct gen_spec {
  at_dtype dtype; /* of Q, K, V */
  int head_dim;
  at_mask mask;
  int gqa;      /* Nq / Nkv */
  int with_lse; /* also writes the log-sum-exp */
  at_dtype out_dtype; /* of O: dtype for f16/bf16; bf16 (default), f16, e4m3 or e5m2 for FP8 */
} gen_spec;

typedef struct gen_variant {
  gen_family family;
  gen_spec spec;
  int block_m; /* query rows per CTA */
  int block_n; /* keys per K/V tile */
  int warps;
  int stages; /* K/V tiles resident in shared memory */
} gen_variant;

/* What the variants are built for: an NVRTC arch and the dynamic shared memory a block may use. */
typedef struct gen_target {
  char arch[16]; /* "sm_90a" */
  int cc_major, cc_minor;
  int smem_limit; /* bytes */
} gen_target;

#define GEN_KEY_MAX 96
#define GEN_MAX_VARIANTS 64 /* upper bound on gen_enumerate's output for one shape */

/* A target for an NVRTC arch, with the opt-in shared memory limit of that compute capability
 * (227 KB on sm_90, 163 KB on sm_80/87, 99 KB on sm_86/89/120). */
at_status gen_target_for_arch(const char *arch, gen_target *out);
/* The same with an explicit limit (from rt_device_info.smem_per_block_optin). */
at_status gen_target_make(const char *arch, int smem_limit, gen_target *out);

/* The output dtype used when none is asked for: the input dtype for f16/bf16, bf16 for FP8. */
at_dtype gen_default_out_dtype(at_dtype in_dtype);
/* Is FP8 (mma.sync m16n8k32 with e4m3/e5m2 operands) available on target? sm_89 and newer. */
int gen_target_has_fp8(const gen_target *target);

/* The spec of a shape, refusing what the family cannot run (message names the field and value).
 * The output dtype is gen_default_out_dtype(shape->dtype); _out asks for another one. */
at_status gen_spec_from_shape(gen_family family, const at_shape *shape, gen_spec *out);
at_status gen_spec_from_shape_out(gen_family family, const at_shape *shape, at_dtype out_dtype,
                                  gen_spec *out);
/* AT_OK when the variant's spec is the spec of shape. at_shape does not carry an output dtype
 * (yet), so the variant's own output dtype is taken as the caller's (checked to be allowed). */
at_status gen_variant_matches(const gen_variant *v, const at_shape *shape);

/* Does name look like a variant key (a family name and a dot: "fa2.", "fa3."), as opposed to the
 * implementation names "naive" and "cudnn"? Cheap, sets no error; gen_variant_parse validates. */
int gen_is_variant_key(const char *name);
/* Key <-> variant. Parsing is strict: every field, in order, nothing else. */
at_status gen_variant_key(const gen_variant *v, char *buf, size_t size);
at_status gen_variant_parse(const char *key, gen_variant *out);
/* The entry point: the key with '.' and '-' made '_' (fa2_bf16_d128_causal_g4_bm128_bn64_w4_s2). */
at_status gen_entry_name(const gen_variant *v, char *buf, size_t size);

/* Constraints: AT_OK if the variant can be built for target, else AT_ERR_UNSUPPORTED with the reason
 * (AT_ERR_INVALID if the variant itself is malformed). */
at_status gen_variant_check(const gen_variant *v, const gen_target *target);
int gen_threads(const gen_variant *v);
int gen_smem_bytes(const gen_variant *v);     /* dynamic shared memory per CTA */
/* Per thread, what pruning uses; for FP8 the sm_90 figure (MMAs lowered to f16, the larger one). */
int gen_register_estimate(const gen_variant *v);

/* The pruned space for a shape: every variant that passes the constraints, in a fixed order.
 * Known T and S (> 0) also drop tiles far larger than the sequence. */
at_status gen_enumerate(const at_shape *shape, const gen_target *target, gen_variant *out, int cap,
                        int *n_out);
/* The same with an explicit output dtype (FP8 inputs: bf16, f16, e4m3, e5m2). */
at_status gen_enumerate_out(const at_shape *shape, at_dtype out_dtype, const gen_target *target,
                            gen_variant *out, int cap, int *n_out);
/* The variant used when nothing is tuned for a shape. */
at_status gen_default_variant(const at_shape *shape, const gen_target *target, gen_variant *out);

/* The exact source NVRTC compiles: #define preamble, templates/common.cuh, the family template.
 * Caller frees *source. */
at_status gen_emit(const gen_variant *v, const gen_target *target, char **source);

/* Compile many variants in parallel (NVRTC runs on the CPU; no GPU needed). */
typedef struct gen_compiled {
  gen_variant variant;
  char key[GEN_KEY_MAX];
  at_status status;
  char message[512]; /* when status != AT_OK */
  rt_binary binary;  /* owned; free with gen_compiled_free */
  rt_kernel_resources resources; /* of the entry point */
  double compile_ms;
} gen_compiled;

/* out[i] is variants[i] compiled; jobs <= 0 means one thread per online CPU. Returns AT_OK when
 * the pool ran; each out[i].status says how its compile went. */
at_status gen_compile_all(const gen_variant *variants, int n, const gen_target *target, int jobs,
                          gen_compiled *out);
void gen_compiled_free(gen_compiled *c, int n);

/* Load a variant's cubin on the current context and find its entry point. On failure nothing
 * stays loaded. */
at_status gen_module_load(const gen_variant *v, const void *cubin, CUmodule *module, CUfunction *fn);

/* Per-tensor FP8 scaling of one call: device pointers to one fp32 each (x_real = code * descale,
 * as include/attntune_fp8.h). NULL inputs mean 1. scale_o and amax_o are used only when O is FP8:
 * O = fp8(O_real * scale_o), amax_o = max |O_real| (the launch zeroes it on the stream first).
 * P's scale is fixed inside the kernel (448, E4M3's largest value), so it is not an argument. */
typedef struct gen_fp8_args {
  const float *descale_q, *descale_k, *descale_v;
  const float *scale_o;
  float *amax_o;
} gen_fp8_args;

/* Launch a compiled variant on stream: grid (ceil(T / block_m), Nq, B), block 32*warps, dynamic
 * shared memory gen_smem_bytes (raising the function's limit past 48 KB). Checks that the shape is
 * the variant's spec and that pointers and strides allow 16-byte copies (row strides a multiple of
 * 16 bytes: 8 elements of 16 bits, 16 of FP8). An FP8 variant launched by gen_launch runs with unit
 * descales; gen_launch_fp8 passes them (fp8 may be NULL: all ones, no amax). */
at_status gen_launch(const gen_variant *v, CUfunction fn, const at_shape *shape, const at_tensors *t,
                     CUstream stream);
at_status gen_launch_fp8(const gen_variant *v, CUfunction fn, const at_shape *shape, const at_tensors *t,
                         const gen_fp8_args *fp8, CUstream stream);

/* One launch's checked arguments, as cuLaunchKernel reads them: what gen_launch_fp8 does before
 * its launch (including raising the function's shared-memory limit), for callers that launch
 * the same call many times. args points into the frame: do not copy a frame. dims.grid[0] is 0
 * when there is nothing to launch (B or T zero); amax_o, when set, must be zeroed first. */
enum { GEN_LAUNCH_ARGS = 25 };
typedef struct gen_launch_frame {
  rt_launch_dims dims;
  CUdeviceptr q, k, v, o, lse, dq, dk, dv, so, amax_o;
  int T, S;
  float scale_log2;
  long long q_sb, k_sb, v_sb, o_sb;
  int q_ss, q_sh, k_ss, k_sh, v_ss, v_sh, o_ss, o_sh;
  void *args[GEN_LAUNCH_ARGS];
} gen_launch_frame;
at_status gen_launch_prepare(const gen_variant *v, CUfunction fn, const at_shape *shape, const at_tensors *t,
                             const gen_fp8_args *fp8, gen_launch_frame *frame);

#endif /* AT_GENERATOR_GENERATOR_H */
