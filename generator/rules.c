/*
 * rules.c — what the families' files share: rounding and tile counts, the sequence fit of a tile,
 * the shared-memory and register budgets, and the single-kernel launch fa2 and fa3 have in common.
 */
#include <string.h>

#include "generator/family.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- shared rules ---------------------------------------------------------------------------- */

int gen_round_up(int x, int m) { return (x + m - 1) / m * m; }

int gen_tile_too_long(int tile, int len)
{
  return len > 0 && tile >= 2 * (((long long)len + 15) / 16 * 16);
}

long long gen_tiles(int len, int tile) { return ((long long)len + tile - 1) / tile; }

int gen_tile_makes_sense(const gen_variant *v, const at_shape *shape)
{
  /* A block_m at least twice T (rounded to 16) when a smaller one exists, a block_n likewise for
   * S, and stages beyond the tiles there are. In 64 bits: T and S go up to AT_MAX_SEQ_LEN. */
  if (v->block_m > 64 && gen_tile_too_long(v->block_m, shape->q_len)) return 0;
  if (v->block_n > 32 && gen_tile_too_long(v->block_n, shape->kv_len)) return 0;
  if (shape->kv_len > 0 && v->stages > 2 && gen_tiles(shape->kv_len, v->block_n) <= v->stages - 1) return 0;
  return 1;
}

int gen_register_budget(int threads)
{
  int share = 65536 / threads;
  return share < 255 ? share : 255;
}

at_status gen_refuse_kv_dtype(const char *family, const gen_spec *s)
{
  return at_fail(AT_ERR_UNSUPPORTED,
                 "%s reads K and V in the dtype of Q (%s), not %s: an FP8 KV cache with 16-bit Q runs on the decode "
                 "family (queries of 1 to %d tokens)",
                 family, at_dtype_name(s->dtype), at_dtype_name(gen_spec_kv_dtype(s)), GEN_DECODE_MAX_T);
}

at_status gen_check_budgets(const gen_target *target, int threads, int smem, int regs)
{
  if (smem > target->smem_limit)
    return at_fail(AT_ERR_UNSUPPORTED, "needs %d bytes of shared memory, %s allows %d", smem, target->arch,
                   target->smem_limit);
  int budget = gen_register_budget(threads);
  if (regs > budget)
    return at_fail(AT_ERR_UNSUPPORTED, "needs about %d registers per thread, budget %d (would spill)", regs,
                   budget);
  return AT_OK;
}

/* The argument list of FA2_KERNEL in templates/fa2.cu, which fa3.cu's kernel shares. */
static const gen_arg FA_ARGS[] = {
    GEN_ARG_Q,    GEN_ARG_K,    GEN_ARG_V,    GEN_ARG_O,    GEN_ARG_LSE,  GEN_ARG_T,         GEN_ARG_S,
    GEN_ARG_SCALE_LOG2,         GEN_ARG_Q_SB, GEN_ARG_Q_SS, GEN_ARG_Q_SH, GEN_ARG_K_SB,      GEN_ARG_K_SS,
    GEN_ARG_K_SH, GEN_ARG_V_SB, GEN_ARG_V_SS, GEN_ARG_V_SH, GEN_ARG_O_SB, GEN_ARG_O_SS,      GEN_ARG_O_SH,
    GEN_ARG_DESCALE_Q,          GEN_ARG_DESCALE_K,          GEN_ARG_DESCALE_V,  GEN_ARG_SCALE_O, GEN_ARG_AMAX_O,
};
/* Ragged variants: after the list (before fa3's tensor maps), the offsets, the packed totals and B. */
static const gen_arg RAGGED_ARGS[] = {
    GEN_ARG_CU_SEQLENS_Q, GEN_ARG_CU_SEQLENS_KV, GEN_ARG_TOTAL_Q, GEN_ARG_TOTAL_KV, GEN_ARG_BATCH,
};

/* Ragged grids (padded: ceil(T / block_m) x Nq x B) run over the query blocks of the sequences
 * one after another on x (templates/common.cuh at_ragged_block), so no CTA starts past a
 * sequence's end. sum_b ceil(T_b / block_m) is at most ceil(max T / block_m) per sequence (the
 * description's bound), and, with at most min(B, total_q) sequences not empty, at most
 * (total_q + min(B, total_q) (block_m - 1)) / block_m in all (a call's). */
static long long ragged_blocks_of_maxima(const gen_variant *v, const at_shape *shape)
{
  return (long long)shape->batch * gen_tiles(shape->q_len, v->block_m);
}

unsigned gen_ragged_query_blocks(const gen_variant *v, const at_shape *shape, int total_q)
{
  const long long padded = ragged_blocks_of_maxima(v, shape);
  const long long nonempty = total_q < shape->batch ? total_q : shape->batch;
  const long long by_total = ((long long)total_q + nonempty * (v->block_m - 1)) / v->block_m;
  return (unsigned)(by_total < padded ? by_total : padded);
}

/* Paged variants: after the others (and a ragged variant's), the block table, lengths and bounds. */
static const gen_arg PAGED_ARGS[] = {
    GEN_ARG_BLOCK_TABLE, GEN_ARG_SEQLENS_KV, GEN_ARG_MAX_PAGES_PER_SEQ, GEN_ARG_NUM_PAGES,
};

at_status gen_launch_append_args(gen_kernel_launch *k, const gen_arg *args, int n)
{
  if (n < 0 || k->n_args + n > GEN_MAX_ARGS)
    return at_fail(AT_ERR_INVALID, "a kernel launch of %d + %d arguments is over the %d the launch holds", k->n_args,
                   n, GEN_MAX_ARGS);
  memcpy(k->args + k->n_args, args, (size_t)n * sizeof *args);
  k->n_args += n;
  return AT_OK;
}

at_status gen_describe_fa_launch(const gen_variant *v, const at_shape *shape, int threads, int smem,
                                 gen_launch_desc *out)
{
  gen_kernel_launch *k = &out->kernels[0];
  out->n_kernels = 1;
  out->align_bytes = 16; /* cp.async and the output stores move 16 bytes */
  out->zero_amax = at_dtype_is_fp8(v->spec.out_dtype);
  k->entry = 0;
  if (shape->batch > 0 && shape->q_len > 0 && v->spec.ragged) {
    const long long blocks = ragged_blocks_of_maxima(v, shape);
    if (blocks > 0x7fffffffLL)
      return at_fail(AT_ERR_UNSUPPORTED, "a ragged launch of %d sequences of up to %d rows (%lld query blocks of %d) is over 2^31 - 1 CTAs",
                     shape->batch, shape->q_len, blocks, v->block_m);
    k->grid[0] = (unsigned)blocks;
    k->grid[1] = (unsigned)shape->q_heads;
    k->grid[2] = 1;
  } else if (shape->batch > 0 && shape->q_len > 0) {
    k->grid[0] = (unsigned)gen_tiles(shape->q_len, v->block_m);
    k->grid[1] = (unsigned)shape->q_heads;
    k->grid[2] = (unsigned)shape->batch;
  }
  k->block[0] = (unsigned)threads, k->block[1] = k->block[2] = 1;
  k->smem_bytes = (unsigned)smem;
  k->waits_for_previous = 1; /* its launch may run under the previous kernel's tail (sm_90+) */
  k->n_args = 0;
  at_status rc = gen_launch_append_args(k, FA_ARGS, COUNT(FA_ARGS));
  if (rc == AT_OK && v->spec.ragged) rc = gen_launch_append_args(k, RAGGED_ARGS, COUNT(RAGGED_ARGS));
  if (rc == AT_OK && v->spec.page_size) rc = gen_launch_append_paged_args(k);
  return rc;
}

at_status gen_launch_append_paged_args(gen_kernel_launch *k)
{
  return gen_launch_append_args(k, PAGED_ARGS, COUNT(PAGED_ARGS));
}


/* ---- wgmma wrappers (generated helpers: fa3, decode's .wg) -------------------------------------- */

/* "{%first, ..., %(first+count-1)}" */
static void reg_list(gen_text *t, int first, int count)
{
  gen_text_put(t, "{");
  for (int i = 0; i < count; i++) gen_text_put(t, "%s%%%d", i ? ", " : "", first + i);
  gen_text_put(t, "}");
}

static void acc_operands(gen_text *t, int count)
{
  for (int i = 0; i < count; i++) gen_text_put(t, "%s\"+f\"(d[%d])", i ? ", " : "", i);
}

void gen_wgmma_ss(gen_text *t, const char *name, int n, int k, const char *type_a, const char *type_b,
                  const char *tail)
{
  gen_text_put(t,
      "__device__ __forceinline__ void %s(float *d, unsigned long long desc_a, "
      "unsigned long long desc_b, int accumulate)\n{\n"
      "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n\"\n"
      "               \"wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s \"\n               \"",
      name, n / 2 + 2, n, k, type_a, type_b);
  reg_list(t, 0, n / 2);
  gen_text_put(t, ", %%%d, %%%d, p, %s;\\n}\\n\"\n               : ", n / 2, n / 2 + 1, tail);
  acc_operands(t, n / 2);
  gen_text_put(t, "\n               : \"l\"(desc_a), \"l\"(desc_b), \"r\"(accumulate));\n}\n\n");
}

/* A from registers; `predicated` adds an int argument `accumulate` (0: d zeroed first), as _ss
 * has, where scale-d is otherwise 1 (always accumulating). */
static void wgmma_rs(gen_text *t, const char *name, int n, int k, const char *type_a, const char *type_b,
                     const char *tail, int predicated)
{
  gen_text_put(t, "__device__ __forceinline__ void %s(float *d, const unsigned *a, unsigned long long desc_b%s)\n{\n",
               name, predicated ? ", int accumulate" : "");
  if (predicated)
    gen_text_put(t, "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n\"\n               ", n / 2 + 5);
  else
    gen_text_put(t, "  asm volatile(");
  gen_text_put(t, "\"wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s \"\n               \"", n, k, type_a, type_b);
  reg_list(t, 0, n / 2);
  gen_text_put(t, ", ");
  reg_list(t, n / 2, 4);
  gen_text_put(t, ", %%%d, %s, %s;\\n%s\"\n               : ", n / 2 + 4, predicated ? "p" : "1", tail,
               predicated ? "}\\n" : "");
  acc_operands(t, n / 2);
  gen_text_put(t, "\n               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b)%s);\n}\n\n",
               predicated ? ", \"r\"(accumulate)" : "");
}

void gen_wgmma_rs(gen_text *t, const char *name, int n, int k, const char *type_a, const char *type_b,
                  const char *tail)
{
  wgmma_rs(t, name, n, k, type_a, type_b, tail, 0);
}

void gen_wgmma_rs_acc(gen_text *t, const char *name, int n, int k, const char *type_a, const char *type_b,
                      const char *tail)
{
  wgmma_rs(t, name, n, k, type_a, type_b, tail, 1);
}
