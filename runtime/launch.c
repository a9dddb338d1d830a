/*
 * launch.c — a generated variant's module and its launches: the generator describes a call
 * (gen_launch_describe: kernels, grids, shared memory, argument order), this fills the arguments
 * from the caller's tensors and launches on the caller's stream.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"

at_status rt_variant_load(const gen_variant *v, const void *cubin, rt_variant *out)
{
  char names[GEN_MAX_KERNELS][GEN_ENTRY_MAX];
  int n = 0;
  memset(out, 0, sizeof *out);
  out->variant = *v;
  at_status rc = gen_entry_names(v, names, &n);
  if (rc == AT_OK) rc = rt_module_load(cubin, &out->module);
  if (rc == AT_OK) rc = rt_current_sm_count(&out->sm_count);
  for (int i = 0; rc == AT_OK && i < n; i++) rc = rt_module_function(out->module, names[i], &out->fn[i]);
  if (rc == AT_OK)
    rc = RT_CU(rt_cu()->cuFuncGetAttribute(&out->binary_version, CU_FUNC_ATTRIBUTE_BINARY_VERSION, out->fn[0]));
  if (rc != AT_OK) {
    rt_variant_unload(out);
    return rc;
  }
  out->n_fn = n;
  return AT_OK;
}

void rt_variant_unload(rt_variant *lv)
{
  rt_module_unload(lv->module);
  memset(lv, 0, sizeof *lv);
}

/* The kernels' copies move align bytes: pointers aligned, strides whole multiples of them. */
static at_status check_tensor(const char *name, const void *ptr, const at_strides *st, at_dtype dtype, int align)
{
  const long long per_chunk = align / (long long)at_dtype_size(dtype);
  if (!ptr) return at_fail(AT_ERR_INVALID, "tensor %s is NULL", name);
  if ((uintptr_t)ptr % (uintptr_t)align != 0)
    return at_fail(AT_ERR_UNSUPPORTED, "tensor %s at %p is not %d-byte aligned (the kernels copy %d bytes)", name,
                   ptr, align, align);
  if (st->batch % per_chunk != 0 || st->seq % per_chunk != 0 || st->head % per_chunk != 0)
    return at_fail(AT_ERR_UNSUPPORTED,
                   "strides of %s (batch %lld, seq %lld, head %lld) are not all multiples of %lld elements "
                   "(%d bytes of %s)",
                   name, (long long)st->batch, (long long)st->seq, (long long)st->head, per_chunk, align,
                   at_dtype_name(dtype));
  if (st->batch < 0 || st->seq < 0 || st->head < 0 || st->seq > INT_MAX || st->head > INT_MAX)
    return at_fail(AT_ERR_UNSUPPORTED, "strides of %s (seq %lld, head %lld) must be in 0..%d", name,
                   (long long)st->seq, (long long)st->head, INT_MAX);
  return AT_OK;
}

at_status rt_variant_scratch_bytes(const gen_variant *v, const at_shape *shape, size_t *bytes)
{
  gen_launch_desc d;
  at_status rc = gen_launch_describe(v, shape, &d);
  *bytes = rc == AT_OK ? d.scratch_bytes : 0;
  return rc;
}

at_status rt_variant_scratch_alloc(const gen_variant *v, const at_shape *shape, CUdeviceptr *scratch)
{
  size_t bytes = 0;
  *scratch = 0;
  at_status rc = rt_variant_scratch_bytes(v, shape, &bytes);
  if (rc != AT_OK || bytes == 0) return rc;
  if ((rc = rt_alloc(scratch, bytes)) != AT_OK) return rc;
  /* Zeroed once, and finished before any stream's kernels read it: a last-CTA merge counts the
   * splits done per row group there, and the merging CTA puts its counter back to 0. */
  rc = rt_fill_u8(*scratch, 0, bytes);
  if (rc == AT_OK) rc = RT_CU(rt_cu()->cuCtxSynchronize());
  if (rc != AT_OK) {
    rt_free(*scratch);
    *scratch = 0;
  }
  return rc;
}

static CUdeviceptr dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

/* Every slot an argument list may name, from the call. */
static void fill_slots(rt_launch_frame *f, const gen_variant *v, const at_shape *shape, const at_tensors *t,
                       const rt_fp8_args *fp8, const rt_paged_args *paged, const rt_ragged_args *ragged,
                       CUdeviceptr scratch)
{
  rt_arg_slot *s = f->slots;
  s[GEN_ARG_Q].ptr = dptr(t->q), s[GEN_ARG_K].ptr = dptr(t->k), s[GEN_ARG_V].ptr = dptr(t->v);
  s[GEN_ARG_O].ptr = dptr(t->o), s[GEN_ARG_LSE].ptr = dptr(t->lse);
  if (fp8 && at_dtype_is_fp8(v->spec.dtype)) {
    s[GEN_ARG_DESCALE_Q].ptr = dptr(fp8->descale_q), s[GEN_ARG_DESCALE_K].ptr = dptr(fp8->descale_k);
    s[GEN_ARG_DESCALE_V].ptr = dptr(fp8->descale_v);
    if (at_dtype_is_fp8(v->spec.out_dtype)) s[GEN_ARG_SCALE_O].ptr = dptr(fp8->scale_o);
  } else if (fp8 && at_dtype_is_fp8(gen_spec_kv_dtype(&v->spec))) { /* FP8 KV cache: 16-bit Q has no descale */
    s[GEN_ARG_DESCALE_K].ptr = dptr(fp8->descale_k), s[GEN_ARG_DESCALE_V].ptr = dptr(fp8->descale_v);
  }
  s[GEN_ARG_AMAX_O].ptr = f->amax_o;
  s[GEN_ARG_O_PART].ptr = scratch ? scratch + f->desc.o_part_offset : 0, s[GEN_ARG_SCRATCH].ptr = scratch;
  s[GEN_ARG_LSE_PART].ptr = scratch ? scratch + f->desc.lse_part_offset : 0;
  s[GEN_ARG_SPLIT_COUNTERS].ptr = scratch && f->desc.counters_offset ? scratch + f->desc.counters_offset : 0;
  s[GEN_ARG_T].i = shape->q_len, s[GEN_ARG_S].i = shape->kv_len, s[GEN_ARG_Q_HEADS].i = shape->q_heads;
  s[GEN_ARG_SPLITS].i = f->desc.n_splits, s[GEN_ARG_KEYS_PER_SPLIT].i = f->desc.keys_per_split;
  s[GEN_ARG_WORK_TILES].i = f->desc.work_tiles, s[GEN_ARG_TAIL_TILES].i = f->desc.tail_tiles;
  s[GEN_ARG_BATCH].i = shape->batch;
  s[GEN_ARG_SCALE_LOG2].f = at_shape_scale(shape) * 1.4426950408889634f;
  s[GEN_ARG_Q_SB].ll = t->q_stride.batch, s[GEN_ARG_K_SB].ll = t->k_stride.batch;
  s[GEN_ARG_V_SB].ll = t->v_stride.batch, s[GEN_ARG_O_SB].ll = t->o_stride.batch;
  s[GEN_ARG_Q_SS].i = (int)t->q_stride.seq, s[GEN_ARG_Q_SH].i = (int)t->q_stride.head;
  s[GEN_ARG_K_SS].i = (int)t->k_stride.seq, s[GEN_ARG_K_SH].i = (int)t->k_stride.head;
  s[GEN_ARG_V_SS].i = (int)t->v_stride.seq, s[GEN_ARG_V_SH].i = (int)t->v_stride.head;
  s[GEN_ARG_O_SS].i = (int)t->o_stride.seq, s[GEN_ARG_O_SH].i = (int)t->o_stride.head;
  if (paged) {
    s[GEN_ARG_BLOCK_TABLE].ptr = dptr(paged->block_table), s[GEN_ARG_SEQLENS_KV].ptr = dptr(paged->seqlens_kv);
    s[GEN_ARG_MAX_PAGES_PER_SEQ].i = paged->max_pages_per_seq, s[GEN_ARG_NUM_PAGES].i = paged->num_pages;
  }
  if (ragged) {
    s[GEN_ARG_CU_SEQLENS_Q].ptr = dptr(ragged->cu_seqlens_q), s[GEN_ARG_CU_SEQLENS_KV].ptr = dptr(ragged->cu_seqlens_kv);
    s[GEN_ARG_TOTAL_Q].i = ragged->total_q, s[GEN_ARG_TOTAL_KV].i = ragged->total_kv;
  }
}

/* A ragged variant's metadata: the offsets its layout reads, aligned, and totals the kernels can
 * clamp to (what the offsets hold is device data, never trusted: templates/fa2.cu). */
static at_status check_ragged(const gen_variant *v, const rt_ragged_args *ragged)
{
  if (!v->spec.ragged && ragged)
    return at_fail(AT_ERR_INVALID, "a variant for padded tensors was given cu_seqlens (ragged tensors need a .rg/.rgq variant)");
  if (!v->spec.ragged) return AT_OK;
  const int kv_packed = v->spec.ragged == GEN_RAGGED_QKV;
  if (!ragged || !ragged->cu_seqlens_q || (kv_packed && !ragged->cu_seqlens_kv))
    return at_fail(AT_ERR_INVALID, "a ragged variant (.%s) needs cu_seqlens_q%s", gen_ragged_name(v->spec.ragged),
                   kv_packed ? " and cu_seqlens_kv" : "");
  if ((uintptr_t)ragged->cu_seqlens_q % 4 || (uintptr_t)ragged->cu_seqlens_kv % 4)
    return at_fail(AT_ERR_INVALID, "cu_seqlens_q (%p) and cu_seqlens_kv (%p) must be 4-byte aligned",
                   (const void *)ragged->cu_seqlens_q, (const void *)ragged->cu_seqlens_kv);
  if (ragged->total_q < 0 || ragged->total_kv < 0)
    return at_fail(AT_ERR_INVALID, "a ragged call needs total_q >= 0 and total_kv >= 0 (got %d, %d)", ragged->total_q,
                   ragged->total_kv);
  if (!kv_packed && (ragged->cu_seqlens_kv || ragged->total_kv))
    return at_fail(AT_ERR_INVALID, "a ragged-Q variant (.rgq) reads padded K/V: cu_seqlens_kv must be NULL and total_kv 0");
  return AT_OK;
}

/* A paged variant's metadata: present, aligned, and bounds the kernels can trust. */
static at_status check_paged(const gen_variant *v, const rt_paged_args *paged)
{
  if (!v->spec.page_size && paged)
    return at_fail(AT_ERR_INVALID, "a variant for contiguous K/V was given a block table (paged K/V needs a .pg<N> variant)");
  if (!v->spec.page_size) return AT_OK;
  if (!paged || !paged->block_table || !paged->seqlens_kv)
    return at_fail(AT_ERR_INVALID, "a paged variant (page size %d) needs the block table and seqlens_kv",
                   v->spec.page_size);
  if ((uintptr_t)paged->block_table % 4 || (uintptr_t)paged->seqlens_kv % 4)
    return at_fail(AT_ERR_INVALID, "block_table (%p) and seqlens_kv (%p) must be 4-byte aligned",
                   (const void *)paged->block_table, (const void *)paged->seqlens_kv);
  if (paged->num_pages < 1 || paged->max_pages_per_seq < 1)
    return at_fail(AT_ERR_INVALID, "a paged call needs num_pages >= 1 and max_pages_per_seq >= 1 (got %d, %d)",
                   paged->num_pages, paged->max_pages_per_seq);
  return AT_OK;
}

/* The tensor map of one of Q, K, V: (D, seq, heads, B) with the call's strides, boxes of
 * box_bytes (128 or 64) bytes of D by box_rows rows in the swizzle of as many bytes, the one the
 * kernels' wgmma descriptors read. box_heads > 0 (decode .wg's Q): (D, heads, seq, B) instead,
 * boxes of box_heads heads by box_rows rows, a token's heads next to each other. */
static at_status encode_tmap(CUtensorMap *map, const char *name, const void *ptr, const at_strides *st,
                             at_dtype dtype, const at_shape *shape, int seq, int heads, int box_rows, int box_bytes,
                             int box_heads, CUtensorMapL2promotion promotion)
{
  const size_t es = at_dtype_size(dtype);
  const CUtensorMapDataType type = dtype == AT_DTYPE_BF16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                   : dtype == AT_DTYPE_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  cuuint64_t dims[4] = {(cuuint64_t)shape->head_dim, (cuuint64_t)seq, (cuuint64_t)heads, (cuuint64_t)shape->batch};
  cuuint64_t strides[3] = {(cuuint64_t)st->seq * es, (cuuint64_t)st->head * es, (cuuint64_t)st->batch * es};
  if (box_bytes != 128 && box_bytes != 64)
    return at_fail(AT_ERR_INVALID, "tensor %s: TMA boxes of %d bytes of D (expected 128 or 64)", name, box_bytes);
  cuuint32_t box[4] = {(cuuint32_t)(box_bytes / es), (cuuint32_t)box_rows, 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  if (st->seq <= 0 || st->head <= 0 || (shape->batch > 1 && st->batch <= 0))
    return at_fail(AT_ERR_UNSUPPORTED,
                   "tensor %s: TMA variants need positive strides (seq %lld, head %lld, batch %lld)", name,
                   (long long)st->seq, (long long)st->head, (long long)st->batch);
  if (st->batch <= 0) strides[2] = strides[1] * (cuuint64_t)heads; /* B = 1: the batch stride is never used */
  if (box_heads > 0) { /* heads before seq: swap dims 1 and 2 (strides 0 and 1), boxes of box_heads heads */
    const cuuint64_t d = dims[1], s = strides[0];
    dims[1] = dims[2], dims[2] = d, strides[0] = strides[1], strides[1] = s;
    box[1] = (cuuint32_t)box_heads, box[2] = (cuuint32_t)box_rows;
  }
  return RT_CU(rt_cu()->cuTensorMapEncodeTiled(map, type, 4, (void *)(uintptr_t)ptr, dims, strides, box, unit,
                                               CU_TENSOR_MAP_INTERLEAVE_NONE,
                                               box_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
                                               promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

/* Ragged tensors are one batch of total rows (the map's batch dim 1): a kernel addresses row
 * cu_seqlens[b] + i, and the map's bounds are the packed tensor's. */
static at_status encode_tmaps(rt_launch_frame *f, const gen_variant *v, const at_shape *shape, const at_tensors *t,
                              const rt_paged_args *paged, const rt_ragged_args *ragged)
{
  const int *rows = f->desc.tmap_rows, box_bytes = f->desc.tmap_box_bytes ? f->desc.tmap_box_bytes : 128;
  const at_dtype kv = gen_spec_kv_dtype(&v->spec); /* an FP8 KV cache (decode .wg): byte maps */
  const CUtensorMapL2promotion kv_promotion =
      f->desc.tmap_kv_promotion == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  at_status rc = AT_OK;
  at_shape q_shape = *shape, kv_shape = *shape;
  int q_rows = shape->q_len, kv_rows = shape->kv_len;
  at_strides q_st = t->q_stride, k_st = t->k_stride, v_st = t->v_stride;
  if (ragged && v->spec.ragged) {
    q_shape.batch = 1, q_rows = ragged->total_q, q_st.batch = 0;
    if (v->spec.ragged == GEN_RAGGED_QKV) kv_shape.batch = 1, kv_rows = ragged->total_kv, k_st.batch = v_st.batch = 0;
  }
  /* Paged K/V: the pools as (D, page, Nkv, pages), the layout's batch stride between pages; a
   * table entry outside the pool is outside the map, whose boxes there TMA fills with zeros. */
  if (paged && v->spec.page_size) kv_shape.batch = paged->num_pages, kv_rows = v->spec.page_size;
  /* A map needs at least one row; an empty packed tensor is never read (every CTA returns). */
  if (q_rows < 1) q_rows = 1;
  if (kv_rows < 1) kv_rows = 1;
  if (rows[0] && (rc = encode_tmap(&f->tmaps[0], "q", t->q, &q_st, v->spec.dtype, &q_shape, q_rows, shape->q_heads,
                                   rows[0], box_bytes, f->desc.tmap_q_heads, CU_TENSOR_MAP_L2_PROMOTION_L2_256B)) != AT_OK)
    return rc;
  if (rows[1] && (rc = encode_tmap(&f->tmaps[1], "k", t->k, &k_st, kv, &kv_shape, kv_rows,
                                   shape->kv_heads, rows[1], box_bytes, 0, kv_promotion)) != AT_OK)
    return rc;
  if (rows[2] && (rc = encode_tmap(&f->tmaps[2], "v", t->v, &v_st, kv, &kv_shape, kv_rows,
                                   shape->kv_heads, rows[2], box_bytes, 0, kv_promotion)) != AT_OK)
    return rc;
  return AT_OK;
}

/* The tensor map over the scratch that the launch description asks for (fa3 .vt: V^T), bytes
 * with the description's dims, strides, box and swizzle. */
static at_status encode_scratch_tmap(rt_launch_frame *f, CUdeviceptr scratch)
{
  const struct gen_scratch_tmap *m = &f->desc.scratch_tmap;
  if (!m->box[0]) return AT_OK;
  if (m->swizzle_bytes != 32 && m->swizzle_bytes != 64 && m->swizzle_bytes != 128)
    return at_fail(AT_ERR_INVALID, "scratch tensor map: swizzle of %d bytes (expected 32, 64 or 128)",
                   m->swizzle_bytes);
  const cuuint64_t dims[4] = {m->dims[0], m->dims[1], m->dims[2], m->dims[3]};
  const cuuint64_t strides[3] = {m->strides[0], m->strides[1], m->strides[2]};
  const cuuint32_t box[4] = {m->box[0], m->box[1], m->box[2], m->box[3]};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  const CUtensorMapSwizzle swizzle = m->swizzle_bytes == 32   ? CU_TENSOR_MAP_SWIZZLE_32B
                                     : m->swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                              : CU_TENSOR_MAP_SWIZZLE_128B;
  return RT_CU(rt_cu()->cuTensorMapEncodeTiled(&f->tmaps[3], CU_TENSOR_MAP_DATA_TYPE_UINT8, 4,
                                               (void *)(uintptr_t)(scratch + m->offset), dims, strides, box, unit,
                                               CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

/* Where the value of argument a lives in the frame. */
static void *arg_address(rt_launch_frame *f, gen_arg a)
{
  if (a == GEN_ARG_TMAP_Q || a == GEN_ARG_TMAP_K || a == GEN_ARG_TMAP_V) return &f->tmaps[a - GEN_ARG_TMAP_Q];
  if (a == GEN_ARG_TMAP_SCRATCH) return &f->tmaps[3];
  return &f->slots[a];
}

/* Kernels that wait with griddepcontrol.wait (compiled in for sm_90 and newer) may start while
 * the kernel before them on the stream runs: a variant's second kernel under its first, and its
 * first under whatever the caller ran before (the launch of a short call is then off its time).
 * ATTNTUNE_PDL=0 launches them plainly, to measure what it gains. */
static int programmatic_launch_ok(const rt_variant *lv)
{
  const char *env = getenv("ATTNTUNE_PDL");
  return lv->binary_version >= 90 && !(env && strcmp(env, "0") == 0);
}

/* A persistent kernel's CTAs: the described grid (one per work tile) narrowed to what the
 * device holds at once, so each CTA stays resident and walks its share of the tiles. */
static unsigned persistent_ctas(const rt_variant *lv, const gen_launch_desc *d, unsigned described)
{
  const long long resident = (long long)lv->sm_count * (d->ctas_per_sm > 0 ? d->ctas_per_sm : 1);
  return resident > 0 && resident < described ? (unsigned)resident : described;
}

at_status rt_variant_prepare(const rt_variant *lv, const at_shape *shape, const at_tensors *t,
                             const rt_fp8_args *fp8, CUdeviceptr scratch, rt_launch_frame *f)
{
  return rt_variant_prepare_serving(lv, shape, t, fp8, NULL, NULL, scratch, f);
}

at_status rt_variant_prepare_serving(const rt_variant *lv, const at_shape *shape, const at_tensors *t,
                                     const rt_fp8_args *fp8, const rt_paged_args *paged,
                                     const rt_ragged_args *ragged, CUdeviceptr scratch, rt_launch_frame *f)
{
  const gen_variant *v = &lv->variant;
  at_status rc;
  memset(f, 0, sizeof *f);
  if ((rc = check_paged(v, paged)) != AT_OK) return rc;
  if ((rc = check_ragged(v, ragged)) != AT_OK) return rc;
  if ((rc = gen_launch_describe(v, shape, &f->desc)) != AT_OK) return rc;
  const gen_launch_desc *d = &f->desc;
  if (d->n_kernels > lv->n_fn)
    return at_fail(AT_ERR_INVALID, "the variant launches %d kernels, its module has %d", d->n_kernels, lv->n_fn);
  f->amax_o = fp8 && d->zero_amax ? dptr(fp8->amax_o) : 0;
  if (shape->batch == 0 || shape->q_len == 0) return AT_OK; /* dims stay empty: nothing to launch */
  const at_dtype kv = gen_spec_kv_dtype(&v->spec);
  if ((rc = check_tensor("q", t->q, &t->q_stride, v->spec.dtype, d->align_bytes)) != AT_OK ||
      (rc = check_tensor("k", t->k, &t->k_stride, kv, d->align_bytes)) != AT_OK ||
      (rc = check_tensor("v", t->v, &t->v_stride, kv, d->align_bytes)) != AT_OK ||
      (rc = check_tensor("o", t->o, &t->o_stride, v->spec.out_dtype, d->align_bytes)) != AT_OK)
    return rc;
  if (v->spec.with_lse && !t->lse) return at_fail(AT_ERR_INVALID, "variant writes lse but the lse pointer is NULL");
  if (d->scratch_bytes && !scratch)
    return at_fail(AT_ERR_INVALID, "variant needs %zu bytes of scratch and none was given", d->scratch_bytes);
  if (scratch % 256 != 0) return at_fail(AT_ERR_INVALID, "scratch is not 256-byte aligned");
  fill_slots(f, v, shape, t, fp8, paged, ragged, scratch);
  if ((rc = encode_tmaps(f, v, shape, t, paged, ragged)) != AT_OK || (rc = encode_scratch_tmap(f, scratch)) != AT_OK) return rc;
  for (int k = 0; k < d->n_kernels; k++) {
    const gen_kernel_launch *kl = &d->kernels[k];
    f->fn[k] = lv->fn[kl->entry];
    if (kl->smem_bytes > 48 * 1024 && (rc = rt_function_set_smem(f->fn[k], (int)kl->smem_bytes)) != AT_OK)
      return rc;
    for (int i = 0; i < 3; i++) f->dims[k].grid[i] = kl->grid[i], f->dims[k].block[i] = kl->block[i];
    if (k == 0 && d->work_tiles > 0) f->dims[k].grid[0] = persistent_ctas(lv, d, kl->grid[0]);
    if (k == 0 && v->spec.ragged && kl->grid[0]) f->dims[k].grid[0] = gen_ragged_query_blocks(v, shape, ragged->total_q);
    f->dims[k].smem_bytes = kl->smem_bytes;
    f->dims[k].programmatic = kl->waits_for_previous && programmatic_launch_ok(lv);
    for (int a = 0; a < kl->n_args; a++) f->args[k][a] = arg_address(f, kl->args[a]);
  }
  return AT_OK;
}

at_status rt_frame_launch(const rt_launch_frame *f, CUstream stream)
{
  at_status rc;
  /* amax is a max over the CTAs' atomics: start from 0, also when there is nothing to compute. */
  if (f->amax_o && (rc = RT_CU(rt_cu()->cuMemsetD32Async(f->amax_o, 0, 1, stream))) != AT_OK) return rc;
  for (int k = 0; k < f->desc.n_kernels; k++) {
    if (f->dims[k].grid[0] == 0) continue;
    if ((rc = rt_launch(f->fn[k], &f->dims[k], stream, (void **)f->args[k])) != AT_OK) return rc;
  }
  return AT_OK;
}

at_status rt_variant_launch(const rt_variant *lv, const at_shape *shape, const at_tensors *t,
                            const rt_fp8_args *fp8, CUdeviceptr scratch, CUstream stream)
{
  return rt_variant_launch_serving(lv, shape, t, fp8, NULL, NULL, scratch, stream);
}

at_status rt_variant_launch_serving(const rt_variant *lv, const at_shape *shape, const at_tensors *t,
                                    const rt_fp8_args *fp8, const rt_paged_args *paged, const rt_ragged_args *ragged,
                                    CUdeviceptr scratch, CUstream stream)
{
  rt_launch_frame f;
  at_status rc = rt_variant_prepare_serving(lv, shape, t, fp8, paged, ragged, scratch, &f);
  return rc == AT_OK ? rt_frame_launch(&f, stream) : rc;
}
