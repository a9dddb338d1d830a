/*
 * fa2.c — the fa2 family: constraints, enumeration, the family default, emission and the launcher
 * of templates/fa2.cu.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/families.h"
#include "generator/generator.h"

/* The tuning space before pruning. */
static const int k_block_m[] = {128, 64};
static const int k_warps[] = {4, 8};
static const int k_block_n[] = {128, 64, 32};
static const int k_stages[] = {2, 3};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* FA2_FP8_REGS of the template: registers an FP8 variant needs beyond the 16-bit estimate where
 * its MMAs are lowered to f16 (sm_90): the f16 copies of the operands, (D - 64)/8 + 1 up to D=128
 * and 36 above, plus 16 per stage past two and 6 for a second 16-row slice per warp. Calibrated
 * on sm_90a (CUDA 13.0) compiles of every tile at D 32..256: spilling are d128 bm64 bn128 w4 s3
 * causal, d160 bm64 bn64 w4 s3, d192 bn64, d240/d256 bn32, d80 bm128 bn64 w4 and d112 bm128 bn32
 * w4 (two slices); not spilling d128 bm128 bn128 w8 s2 (237 registers), d224 bn32 s2 (250). The
 * native m16n8k32 (sm_89) needs no more than 16-bit data. */
static int fp8_extra_regs(int d_out, int stages, int slices)
{
  int operands = d_out > 128 ? 36 : d_out > 56 ? (d_out - 64) / 8 + 1 : 0;
  return operands + 16 * (stages - 2) + 6 * (slices - 1);
}

int gen_threads(const gen_variant *v) { return 32 * v->warps; }

static int is_fp8(at_dtype dtype) { return dtype == AT_DTYPE_E4M3 || dtype == AT_DTYPE_E5M2; }

/* FA2_FP8_VIA_F16: sm_90 has no native m16n8k32 FP8 mma.sync (ptxas emulates it with f16 MMAs
 * at a cost of ~58 registers); the template then lowers it itself (templates/fa2.cu). */
int gen_fa2_fp8_via_f16(const gen_variant *v, const gen_target *target)
{
  return is_fp8(v->spec.dtype) && target->cc_major == 9 && target->cc_minor == 0;
}

/* Mirrors FA2_SMEM_BYTES in the template: Q tile plus STAGES K and V tiles, rows padded to whole
 * 128-byte swizzle lines (D rounded up to 64 elements of 16 bits, 128 of FP8). */
int gen_smem_bytes(const gen_variant *v)
{
  if (v->family == GEN_FAMILY_FA3) return gen_fa3_smem_bytes(v);
  int elem = is_fp8(v->spec.dtype) ? 1 : 2;
  int row_bytes = round_up(v->spec.head_dim * elem, 128);
  return (v->block_m + 2 * v->stages * v->block_n) * row_bytes;
}

/* Mirrors FA2_REG_ESTIMATE in the template: O and S accumulators (fp32 per thread), the K fragments
 * in flight, ~80 for the rest and 12 more with two 16-row slices per warp. Calibrated against ptxas
 * for sm_90a (CUDA 13.0): at 255 registers ptxas spilled a few bytes for d128 bm128 w4 bn32 (two
 * slices) but not for d256 bm128 w8 bn64 (one slice), though both hold 160 accumulators. Every
 * variant it admits at the tested head dims compiles with zero spills (tests/test_generator.c). */
static int register_estimate(const gen_variant *v, int via_f16)
{
  int slices = v->block_m / v->warps / 16;
  int d_out = round_up(v->spec.head_dim, 16);
  int fp8 = is_fp8(v->spec.dtype) && via_f16 ? fp8_extra_regs(d_out, v->stages, slices) : 0;
  return slices * (d_out + v->block_n) / 2 + v->block_n / 4 + 79 + 12 * (slices - 1) + fp8;
}

int gen_register_estimate(const gen_variant *v)
{
  return v->family == GEN_FAMILY_FA3 ? gen_fa3_register_estimate(v) : register_estimate(v, 1);
}

static int register_budget(const gen_variant *v)
{
  int share = 65536 / gen_threads(v);
  return share < 255 ? share : 255;
}

at_status gen_variant_check(const gen_variant *v, const gen_target *target)
{
  const gen_spec *s = &v->spec;
  if (v->family == GEN_FAMILY_FA3) return gen_fa3_variant_check(v, target);
  if (v->family != GEN_FAMILY_FA2) return rt_fail(AT_ERR_INVALID, "unknown kernel family %d", (int)v->family);
  if (s->dtype != AT_DTYPE_F16 && s->dtype != AT_DTYPE_BF16 && !is_fp8(s->dtype))
    return rt_fail(AT_ERR_INVALID, "dtype %s is not supported by fa2 (expected f16, bf16, e4m3 or e5m2)",
                   at_dtype_name(s->dtype));
  if (!is_fp8(s->dtype) && s->out_dtype != s->dtype)
    return rt_fail(AT_ERR_INVALID, "fa2 writes O of %s inputs as %s, not %s", at_dtype_name(s->dtype),
                   at_dtype_name(s->dtype), at_dtype_name(s->out_dtype));
  if (is_fp8(s->dtype) && s->out_dtype != AT_DTYPE_BF16 && s->out_dtype != AT_DTYPE_F16 && !is_fp8(s->out_dtype))
    return rt_fail(AT_ERR_INVALID, "fa2 writes O of %s inputs as bf16, f16, e4m3 or e5m2, not %s",
                   at_dtype_name(s->dtype), at_dtype_name(s->out_dtype));
  if (s->head_dim < 32 || s->head_dim > 256 || s->head_dim % 8 != 0)
    return rt_fail(AT_ERR_INVALID, "head dim %d is not a multiple of 8 in 32..256", s->head_dim);
  if (is_fp8(s->dtype) && s->head_dim % 16 != 0)
    return rt_fail(AT_ERR_INVALID, "head dim %d with %s inputs is not a multiple of 16", s->head_dim,
                   at_dtype_name(s->dtype));
  if (is_fp8(s->dtype) && !gen_target_has_fp8(target))
    return rt_fail(AT_ERR_UNSUPPORTED,
                   "%s inputs need sm_89 or newer (mma.sync m16n8k32 with FP8 operands); %s has no FP8 MMA",
                   at_dtype_name(s->dtype), target->arch);
  if (s->mask != AT_MASK_NONE && s->mask != AT_MASK_CAUSAL_TL && s->mask != AT_MASK_CAUSAL_BR)
    return rt_fail(AT_ERR_INVALID, "unknown mask %d", (int)s->mask);
  if (s->gqa < 1 || s->gqa > 1024) return rt_fail(AT_ERR_INVALID, "GQA ratio %d is out of range (1..1024)", s->gqa);
  if (v->warps != 4 && v->warps != 8)
    return rt_fail(AT_ERR_UNSUPPORTED, "%d warps (expected 4 or 8)", v->warps);
  if (v->block_m % (16 * v->warps) != 0 || v->block_m / v->warps > 32)
    return rt_fail(AT_ERR_UNSUPPORTED,
                   "block_m %d with %d warps gives %d rows per warp (expected 16 or 32)", v->block_m,
                   v->warps, v->block_m / v->warps);
  if (v->block_n % 16 != 0 || v->block_n < 16 || v->block_n > 128)
    return rt_fail(AT_ERR_UNSUPPORTED, "block_n %d is not a multiple of 16 in 16..128", v->block_n);
  if (is_fp8(s->dtype) && v->block_n % 32 != 0)
    return rt_fail(AT_ERR_UNSUPPORTED, "block_n %d is not a multiple of 32 (the k extent of FP8 P V)",
                   v->block_n);
  if (v->stages < 2 || v->stages > 4)
    return rt_fail(AT_ERR_UNSUPPORTED, "%d stages (expected 2..4)", v->stages);
  int smem = gen_smem_bytes(v);
  if (smem > target->smem_limit)
    return rt_fail(AT_ERR_UNSUPPORTED, "needs %d bytes of shared memory, %s allows %d", smem,
                   target->arch, target->smem_limit);
  int regs = register_estimate(v, gen_fa2_fp8_via_f16(v, target)), budget = register_budget(v);
  if (regs > budget)
    return rt_fail(AT_ERR_UNSUPPORTED, "needs about %d registers per thread, budget %d (would spill)",
                   regs, budget);
  return AT_OK;
}

/* Tiles far larger than a known sequence only add masked work: a block_m at least twice T (rounded
 * to 16) when a smaller one exists, a block_n likewise for S, and stages beyond the tiles there are. */
static int tile_makes_sense(const gen_variant *v, const at_shape *shape)
{
  if (shape->q_len > 0 && v->block_m > 64 && v->block_m >= 2 * round_up(shape->q_len, 16)) return 0;
  if (shape->kv_len > 0 && v->block_n > 32 && v->block_n >= 2 * round_up(shape->kv_len, 16)) return 0;
  if (shape->kv_len > 0 && v->stages > 2 && (shape->kv_len + v->block_n - 1) / v->block_n <= v->stages - 1)
    return 0;
  return 1;
}

at_status gen_enumerate(const at_shape *shape, const gen_target *target, gen_variant *out, int cap,
                        int *n_out)
{
  return gen_enumerate_out(shape, gen_default_out_dtype(shape->dtype), target, out, cap, n_out);
}

at_status gen_enumerate_out(const at_shape *shape, at_dtype out_dtype, const gen_target *target,
                            gen_variant *out, int cap, int *n_out)
{
  gen_spec spec;
  at_status rc = gen_spec_from_shape_out(GEN_FAMILY_FA2, shape, out_dtype, &spec);
  *n_out = 0;
  if (rc != AT_OK) return rc;
  if (is_fp8(spec.dtype) && !gen_target_has_fp8(target))
    return rt_fail(AT_ERR_UNSUPPORTED,
                   "fa2 has no %s variants for %s: FP8 needs sm_89 or newer (mma.sync m16n8k32 with FP8 "
                   "operands)",
                   at_dtype_name(spec.dtype), target->arch);
  /* fa3 first: it is the faster family wherever it applies (docs/perf.md), so a tuning budget
   * that keeps only the first candidates keeps it. */
  int n = 0;
  if ((rc = gen_fa3_enumerate(&spec, target, tile_makes_sense, shape, out, cap, &n)) != AT_OK) return rc;
  for (int a = 0; a < COUNT(k_block_m); a++)
    for (int b = 0; b < COUNT(k_warps); b++)
      for (int c = 0; c < COUNT(k_block_n); c++)
        for (int d = 0; d < COUNT(k_stages); d++) {
          gen_variant v = {GEN_FAMILY_FA2, spec, k_block_m[a], k_block_n[c], k_warps[b], k_stages[d]};
          if (gen_variant_check(&v, target) != AT_OK || !tile_makes_sense(&v, shape)) continue;
          if (n == cap) return rt_fail(AT_ERR_INVALID, "more than %d variants for this shape", cap);
          out[n++] = v;
        }
  rt_clear_error(); /* the refusals above are expected, not errors */
  if (n == 0)
    return rt_fail(AT_ERR_UNSUPPORTED,
                   "no fa2/fa3 variant fits head dim %d %s on %s (shared memory %d bytes, at most 255 registers "
                   "per thread without spills)",
                   spec.head_dim, at_dtype_name(spec.dtype), target->arch, target->smem_limit);
  *n_out = n;
  return AT_OK;
}

/* Family defaults by head dim, best first; measured choices are in docs/perf.md ("## fa2"). The first
 * that passes the constraints wins, else the first enumerated variant. */
at_status gen_default_variant(const at_shape *shape, const gen_target *target, gen_variant *out)
{
  static const struct { int max_d, block_m, block_n, warps, stages; } prefs[] = {
      {64, 128, 64, 4, 2},  {64, 64, 128, 4, 2},  {128, 128, 128, 8, 3}, {128, 128, 64, 8, 2},
      {256, 128, 64, 8, 2}, {256, 128, 32, 8, 2}, {256, 64, 32, 4, 2},
  };
  gen_spec spec;
  at_status rc = gen_spec_from_shape(GEN_FAMILY_FA2, shape, &spec);
  if (rc != AT_OK) return rc;
  /* sm_90a: wgmma (fa3) beats mma.sync (fa2) at every measured large shape (docs/perf.md), and
   * FP8 reaches the tensor cores' FP8 rate only through it. */
  if (gen_fa3_default(&spec, target, out)) return AT_OK;
  for (int i = 0; i < COUNT(prefs); i++) {
    if (spec.head_dim > prefs[i].max_d) continue;
    gen_variant v = {GEN_FAMILY_FA2, spec, prefs[i].block_m, prefs[i].block_n, prefs[i].warps,
                     prefs[i].stages};
    if (gen_variant_check(&v, target) == AT_OK) {
      *out = v;
      return AT_OK;
    }
  }
  gen_variant all[GEN_MAX_VARIANTS];
  int n = 0;
  at_shape any_len = *shape;
  any_len.q_len = any_len.kv_len = 0;
  if ((rc = gen_enumerate(&any_len, target, all, GEN_MAX_VARIANTS, &n)) != AT_OK) return rc;
  *out = all[0];
  return AT_OK;
}

/* ---- launch ------------------------------------------------------------------------------------ */

/* cp.async and the output stores move 16 bytes (FP8 inputs: O stores of 4 or 8 bytes per lane from
 * 16-byte aligned rows): rows of whole 16-byte chunks, 16-byte aligned. */
static at_status check_tensor(const char *name, const void *ptr, const at_strides *st, at_dtype dtype)
{
  const long long per_chunk = 16 / (long long)at_dtype_size(dtype);
  if (!ptr) return rt_fail(AT_ERR_INVALID, "tensor %s is NULL", name);
  if ((uintptr_t)ptr % 16 != 0)
    return rt_fail(AT_ERR_UNSUPPORTED, "tensor %s at %p is not 16-byte aligned (fa2 copies 16 bytes)", name, ptr);
  if (st->batch % per_chunk != 0 || st->seq % per_chunk != 0 || st->head % per_chunk != 0)
    return rt_fail(AT_ERR_UNSUPPORTED,
                   "strides of %s (batch %lld, seq %lld, head %lld) are not all multiples of %lld elements "
                   "(16 bytes of %s)",
                   name, (long long)st->batch, (long long)st->seq, (long long)st->head, per_chunk,
                   at_dtype_name(dtype));
  if (st->batch < 0 || st->seq < 0 || st->head < 0 || st->seq > INT_MAX || st->head > INT_MAX)
    return rt_fail(AT_ERR_UNSUPPORTED, "strides of %s (seq %lld, head %lld) must be in 0..%d", name,
                   (long long)st->seq, (long long)st->head, INT_MAX);
  return AT_OK;
}

at_status gen_launch(const gen_variant *v, CUfunction fn, const at_shape *shape, const at_tensors *t,
                     CUstream stream)
{
  return gen_launch_fp8(v, fn, shape, t, NULL, stream);
}

at_status gen_launch_prepare(const gen_variant *v, CUfunction fn, const at_shape *shape, const at_tensors *t,
                             const gen_fp8_args *fp8, gen_launch_frame *f)
{
  at_status rc;
  memset(f, 0, sizeof *f);
  if ((rc = gen_variant_matches(v, shape)) != AT_OK) return rc;
  if (shape->batch < 0 || shape->q_len < 0 || shape->kv_len < 0)
    return rt_fail(AT_ERR_INVALID, "negative size (batch %d, T %d, S %d)", shape->batch, shape->q_len,
                   shape->kv_len);
  if (shape->q_heads > 65535)
    return rt_fail(AT_ERR_UNSUPPORTED, "%d q heads exceed the grid's y limit 65535", shape->q_heads);
  if (shape->batch > 65535)
    return rt_fail(AT_ERR_UNSUPPORTED, "batch %d exceeds the grid's z limit 65535", shape->batch);
  const int out_fp8 = is_fp8(v->spec.out_dtype);
  f->amax_o = fp8 && out_fp8 ? (CUdeviceptr)(uintptr_t)fp8->amax_o : 0;
  if (shape->batch == 0 || shape->q_len == 0) return AT_OK; /* dims stay empty: nothing to launch */
  if ((rc = check_tensor("q", t->q, &t->q_stride, v->spec.dtype)) != AT_OK ||
      (rc = check_tensor("k", t->k, &t->k_stride, v->spec.dtype)) != AT_OK ||
      (rc = check_tensor("v", t->v, &t->v_stride, v->spec.dtype)) != AT_OK ||
      (rc = check_tensor("o", t->o, &t->o_stride, v->spec.out_dtype)) != AT_OK)
    return rc;
  if (v->spec.with_lse && !t->lse) return rt_fail(AT_ERR_INVALID, "variant writes lse but the lse pointer is NULL");

  int smem = gen_smem_bytes(v);
  if (smem > 48 * 1024 && (rc = rt_function_set_smem(fn, smem)) != AT_OK) return rc;

  /* Argument order and types of FA2_KERNEL in templates/fa2.cu. */
  f->q = (CUdeviceptr)(uintptr_t)t->q, f->k = (CUdeviceptr)(uintptr_t)t->k;
  f->v = (CUdeviceptr)(uintptr_t)t->v, f->o = (CUdeviceptr)(uintptr_t)t->o;
  f->lse = (CUdeviceptr)(uintptr_t)t->lse;
  if (fp8 && is_fp8(v->spec.dtype)) {
    f->dq = (CUdeviceptr)(uintptr_t)fp8->descale_q, f->dk = (CUdeviceptr)(uintptr_t)fp8->descale_k;
    f->dv = (CUdeviceptr)(uintptr_t)fp8->descale_v;
    if (out_fp8) f->so = (CUdeviceptr)(uintptr_t)fp8->scale_o;
  }
  f->T = shape->q_len, f->S = shape->kv_len;
  f->scale_log2 = at_shape_scale(shape) * 1.4426950408889634f;
  f->q_sb = t->q_stride.batch, f->k_sb = t->k_stride.batch, f->v_sb = t->v_stride.batch;
  f->o_sb = t->o_stride.batch;
  f->q_ss = (int)t->q_stride.seq, f->q_sh = (int)t->q_stride.head, f->k_ss = (int)t->k_stride.seq;
  f->k_sh = (int)t->k_stride.head, f->v_ss = (int)t->v_stride.seq, f->v_sh = (int)t->v_stride.head;
  f->o_ss = (int)t->o_stride.seq, f->o_sh = (int)t->o_stride.head;
  void *args[GEN_LAUNCH_ARGS] = {&f->q,    &f->k,    &f->v,    &f->o,    &f->lse,  &f->T,    &f->S,
                                 &f->scale_log2, &f->q_sb, &f->q_ss, &f->q_sh, &f->k_sb, &f->k_ss,
                                 &f->k_sh, &f->v_sb, &f->v_ss, &f->v_sh, &f->o_sb, &f->o_ss, &f->o_sh,
                                 &f->dq,   &f->dk,   &f->dv,   &f->so,   &f->amax_o};
  memcpy(f->args, args, sizeof args);
  rt_launch_dims dims = {
      {(unsigned)((f->T + v->block_m - 1) / v->block_m), (unsigned)shape->q_heads, (unsigned)shape->batch},
      {(unsigned)gen_threads(v), 1, 1},
      (unsigned)smem};
  f->dims = dims;
  return AT_OK;
}

at_status gen_launch_fp8(const gen_variant *v, CUfunction fn, const at_shape *shape, const at_tensors *t,
                         const gen_fp8_args *fp8, CUstream stream)
{
  gen_launch_frame f;
  at_status rc = gen_launch_prepare(v, fn, shape, t, fp8, &f);
  if (rc != AT_OK) return rc;
  /* amax is a max over the CTAs' atomics: start from 0, also when there is nothing to compute. */
  if (f.amax_o && (rc = RT_CU(rt_cu()->cuMemsetD32Async(f.amax_o, 0, 1, stream))) != AT_OK) return rc;
  if (f.dims.grid[0] == 0) return AT_OK;
  return rt_launch(fn, &f.dims, stream, f.args);
}
