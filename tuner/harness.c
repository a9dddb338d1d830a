/* harness.c — see harness.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/harness.h"
#include "tuner/reference.h"

static at_tensors tensors_for(const tn_harness *h, int set)
{
  const at_shape *s = &h->shape;
  at_tensors t;
  memset(&t, 0, sizeof t);
  t.q = (const void *)(uintptr_t)h->q[set];
  t.k = (const void *)(uintptr_t)h->k[set];
  t.v = (const void *)(uintptr_t)h->v[set];
  t.o = (void *)(uintptr_t)h->o;
  t.lse = s->with_lse ? (float *)(uintptr_t)h->lse : NULL;
  t.q_stride = t.o_stride = at_strides_bshd(s->q_len, s->q_heads, s->head_dim);
  t.k_stride = t.v_stride = at_strides_bshd(s->kv_len, s->kv_heads, s->head_dim);
  return t;
}

/* Each tensor draws from its own seed, the next number of the harness's generator. */
static at_status upload_random(tn_rng *rng, at_dtype dtype, size_t n, void *packed, CUdeviceptr *out)
{
  at_status rc;
  if ((rc = tn_random_packed(tn_rng_u64(rng), dtype, n, packed)) != AT_OK) return rc;
  if ((rc = rt_alloc(out, n * at_dtype_size(dtype))) != AT_OK) return rc;
  return rt_upload(*out, packed, n * at_dtype_size(dtype));
}

at_status tn_harness_open(tn_harness *h, const rt_ctx *ctx, const at_shape *shape,
                          unsigned long long seed)
{
  memset(h, 0, sizeof *h);
  h->ctx = ctx;
  h->shape = *shape;
  at_status rc = at_shape_check(shape);
  if (rc != AT_OK) return rc;
  const at_shape *s = &h->shape;
  /* K and V in their own dtype (an FP8 KV cache: 1 byte each, unit descales like FP8 inputs). */
  const at_dtype kv = at_shape_kv_dtype(s);
  size_t esz = at_dtype_size(s->dtype), esz_kv = at_dtype_size(kv);
  h->n_q = (size_t)s->batch * s->q_len * s->q_heads * s->head_dim;
  h->n_kv = (size_t)s->batch * s->kv_len * s->kv_heads * s->head_dim;
  h->n_lse = (size_t)s->batch * s->q_heads * s->q_len;
  h->n_sets = rt_rotation_sets(h->n_q * esz + 2 * h->n_kv * esz_kv, (size_t)ctx->info.l2_bytes, TN_MAX_SETS);
  size_t n_max = h->n_q > h->n_kv ? h->n_q : h->n_kv;
  void *packed = malloc(n_max * (esz > esz_kv ? esz : esz_kv));
  tn_rng rng = tn_rng_seeded(seed);
  if (!packed) rc = at_fail(AT_ERR_NOMEM, "no host memory for %zu inputs", n_max);
  for (int i = 0; i < h->n_sets && rc == AT_OK; i++) {
    if ((rc = upload_random(&rng, s->dtype, h->n_q, packed, &h->q[i])) != AT_OK) break;
    if ((rc = upload_random(&rng, kv, h->n_kv, packed, &h->k[i])) != AT_OK) break;
    rc = upload_random(&rng, kv, h->n_kv, packed, &h->v[i]);
  }
  free(packed);
  if (rc == AT_OK) rc = rt_alloc(&h->o, h->n_q * 4); /* room for an f32 output */
  if (rc == AT_OK) rc = rt_alloc(&h->lse, h->n_lse * sizeof(float));
  h->cover_words = 128u << 20; /* 512 MB: each memset takes a few tenths of a millisecond */
  if (rc == AT_OK) rc = rt_alloc(&h->cover, h->cover_words * 4);
  if (rc == AT_OK && !(h->got = malloc(h->n_q * sizeof(float))))
    rc = at_fail(AT_ERR_NOMEM, "no host memory for %zu outputs", h->n_q);
  if (rc != AT_OK) tn_harness_close(h);
  return rc;
}

void tn_harness_close(tn_harness *h)
{
  for (int i = 0; i < h->n_sets; i++) rt_free(h->q[i]), rt_free(h->k[i]), rt_free(h->v[i]);
  rt_free(h->o), rt_free(h->lse), rt_free(h->scratch), rt_free(h->cover), rt_free(h->fp8_scalars);
  rt_free(h->ref_o_dev), rt_free(h->cudnn_o_dev);
  for (int i = 0; i <= AT_DTYPE_E5M2; i++)
    if (h->compare[i].module) rt_compare_destroy(&h->compare[i]);
  if (h->cudnn) rt_cudnn_sdpa_destroy(h->cudnn);
  free(h->ref_lse), free(h->got);
  memset(h, 0, sizeof *h);
}

static at_status ensure_scratch(tn_harness *h)
{
  if (h->scratch) return AT_OK;
  at_status rc = rt_alloc(&h->scratch, rt_naive_scratch_bytes(&h->shape));
  if (rc != AT_OK) return at_fail_context(rc, "the naive path's score matrix");
  return AT_OK;
}

static at_status to_double(const float *x, size_t n, double **out)
{
  free(*out);
  *out = malloc(n * sizeof(double));
  if (!*out) return at_fail(AT_ERR_NOMEM, "no host memory for %zu reference values", n);
  for (size_t i = 0; i < n; i++) (*out)[i] = x[i];
  return AT_OK;
}

/* n fp32 values of host staging into *dev (allocated on first use, kept for the harness). */
static at_status keep_on_device(const float *x, size_t n, CUdeviceptr *dev)
{
  at_status rc;
  if (!*dev && (rc = rt_alloc(dev, n * sizeof(float))) != AT_OK)
    return at_fail_context(rc, "a device copy of %zu reference values", n);
  return rt_upload(*dev, x, n * sizeof(float));
}

at_status tn_harness_make_reference(tn_harness *h)
{
  rt_naive ref;
  at_status rc;
  at_tensors t = tensors_for(h, 0);
  at_shape s = h->shape;
  s.with_lse = 1;
  t.lse = (float *)(uintptr_t)h->lse;
  if ((rc = ensure_scratch(h)) != AT_OK) return rc;
  if ((rc = rt_naive_create_kv(h->ctx->arch, s.dtype, at_shape_kv_dtype(&s), AT_DTYPE_F32, &ref)) != AT_OK) return rc;
  rc = rt_naive_run(&ref, &s, &t, h->scratch, NULL);
  if (rc == AT_OK) rc = rt_ctx_sync(h->ctx);
  rt_naive_destroy(&ref);
  if (rc != AT_OK) return rc;
  if ((rc = rt_download(h->got, h->o, h->n_q * sizeof(float))) != AT_OK) return rc;
  if ((rc = keep_on_device(h->got, h->n_q, &h->ref_o_dev)) != AT_OK) return rc;
  if ((rc = rt_download(h->got, h->lse, h->n_lse * sizeof(float))) != AT_OK) return rc;
  return to_double(h->got, h->n_lse, &h->ref_lse);
}

/* ---- implementations --------------------------------------------------------------------- */

/* A fresh impl of kind: writes the dtype's default output at unit scale until told otherwise. */
static void impl_init(const tn_harness *h, tn_impl *impl, tn_impl_kind kind)
{
  memset(impl, 0, sizeof *impl);
  impl->kind = kind;
  impl->out_dtype = at_dtype_default_out(h->shape.dtype);
  impl->out_descale = 1.0f;
}

at_status tn_impl_naive(tn_harness *h, tn_impl *impl)
{
  impl_init(h, impl, TN_IMPL_NAIVE);
  snprintf(impl->name, sizeof impl->name, "naive");
  at_status rc = ensure_scratch(h);
  if (rc != AT_OK) return rc;
  return rt_naive_create_kv(h->ctx->arch, h->shape.dtype, at_shape_kv_dtype(&h->shape),
                            at_dtype_default_out(h->shape.dtype), &impl->naive);
}

/* cuDNN's FP8 scalars on the device (see harness.h), made once per harness. */
static at_status ensure_fp8_scalars(tn_harness *h)
{
  if (h->fp8_scalars) return AT_OK;
  tn_fp8_scales sc;
  at_status rc = tn_fp8_unit_input_scales(h->shape.dtype, &sc);
  if (rc != AT_OK) return rc;
  /* descale q, k, v, scale_s, descale_s, scale_o, then amax_s and amax_o (written by cuDNN) */
  enum { STRIDE = 4, N_SCALARS = 8 };
  float host[N_SCALARS * STRIDE] = {0};
  const float in[6] = {sc.descale_q, sc.descale_k, sc.descale_v, sc.scale_s, sc.descale_s, sc.scale_o};
  for (int i = 0; i < 6; i++) host[i * STRIDE] = in[i];
  if ((rc = rt_alloc(&h->fp8_scalars, sizeof host)) != AT_OK) return rc;
  if ((rc = rt_upload(h->fp8_scalars, host, sizeof host)) != AT_OK) return rc;
  const CUdeviceptr b = h->fp8_scalars;
  const size_t step = STRIDE * sizeof(float);
  h->cudnn_fp8 = (rt_cudnn_fp8_args){.descale_q = b, .descale_k = b + step, .descale_v = b + 2 * step,
                                     .scale_s = b + 3 * step, .descale_s = b + 4 * step, .scale_o = b + 5 * step,
                                     .amax_s = b + 6 * step, .amax_o = b + 7 * step};
  h->cudnn_o_descale = 1.0f / sc.scale_o;
  return AT_OK;
}

/* FP8 shapes take cuDNN's FP8 graph, which the composite and auto paths name; the single fused
 * op has no FP8 form. */
static at_status cudnn_path_for(const at_shape *s, rt_cudnn_path asked, rt_cudnn_path *out)
{
  *out = asked;
  if (!at_dtype_is_fp8(s->dtype)) return AT_OK;
  if (asked == RT_CUDNN_PATH_UNIFIED)
    return at_fail(AT_ERR_UNSUPPORTED, "cuDNN's single SDPA_FWD op takes f16 and bf16; %s inputs run its FP8 "
                   "graph (implementation 'cudnn')", at_dtype_name(s->dtype));
  *out = RT_CUDNN_PATH_FP8;
  return AT_OK;
}

at_status tn_impl_cudnn(tn_harness *h, rt_cudnn_path path, tn_impl *impl, rt_cudnn_plan_info *info)
{
  impl_init(h, impl, TN_IMPL_CUDNN);
  snprintf(impl->name, sizeof impl->name, "%s", path == RT_CUDNN_PATH_UNIFIED ? "cudnn-unified" : "cudnn");
  if (h->shape.dtype == AT_DTYPE_F32) return at_fail(AT_ERR_UNSUPPORTED, "%s", TN_F32_NO_CUDNN);
  if (at_shape_kv_dtype(&h->shape) != h->shape.dtype) return at_fail(AT_ERR_UNSUPPORTED, "%s", TN_KV8_NO_CUDNN);
  const int fp8 = at_dtype_is_fp8(h->shape.dtype);
  at_status rc = cudnn_path_for(&h->shape, path, &impl->path);
  if (rc != AT_OK) return rc;
  if (!h->cudnn && (rc = rt_cudnn_sdpa_create(h->ctx, &h->cudnn)) != AT_OK) return rc;
  if (fp8 && (rc = ensure_fp8_scalars(h)) != AT_OK) return rc;
  rt_cudnn_sdpa_set_path(h->cudnn, impl->path);
  at_tensors t = tensors_for(h, 0);
  rt_cudnn_plan_info local;
  rc = rt_cudnn_sdpa_plan(h->cudnn, &h->shape, &t, fp8 ? &h->cudnn_fp8 : NULL, info ? info : &local);
  if (rc != AT_OK && fp8)
    return at_fail_context(rc, "cuDNN's FP8 graph (%s, D=%d, %s, %s)", at_dtype_name(h->shape.dtype),
                           h->shape.head_dim, at_mask_name(h->shape.mask), h->ctx->arch);
  if (rc != AT_OK) return rc;
  if (fp8) impl->out_dtype = h->shape.dtype, impl->out_descale = h->cudnn_o_descale;
  return AT_OK;
}

at_status tn_impl_variant(tn_harness *h, const gen_variant *v, const void *cubin, tn_impl *impl)
{
  impl_init(h, impl, TN_IMPL_FA2);
  impl->out_dtype = v->spec.out_dtype; /* an FP8 output is written at unit scale (no rt_fp8_args) */
  at_status rc = gen_variant_key(v, impl->name, sizeof impl->name);
  if (rc == AT_OK) rc = rt_variant_scratch_alloc(v, &h->shape, &impl->scratch);
  if (rc == AT_OK) rc = rt_variant_load(v, cubin, &impl->kernel);
  return rc;
}

void tn_impl_close(tn_impl *impl)
{
  if (impl->kind == TN_IMPL_NAIVE && impl->naive.module) rt_naive_destroy(&impl->naive);
  if (impl->kernel.module) rt_variant_unload(&impl->kernel);
  if (impl->scratch) rt_free(impl->scratch);
  impl->scratch = 0;
}

at_status tn_impl_launch(tn_harness *h, tn_impl *impl, int set, CUstream stream)
{
  at_tensors t = tensors_for(h, set);
  at_status rc;
  if (impl->fault == TN_FAULT_CRASH) t.o = (void *)(uintptr_t)0x10; /* an illegal address */
  if (impl->fault == TN_FAULT_NAN) return AT_OK;                    /* the poison stays */
  switch (impl->kind) {
  case TN_IMPL_NAIVE: return rt_naive_run(&impl->naive, &h->shape, &t, h->scratch, stream);
  case TN_IMPL_CUDNN:
    rt_cudnn_sdpa_set_path(h->cudnn, impl->path);
    if ((rc = rt_cudnn_sdpa_bind(h->cudnn, &h->shape, &t, at_dtype_is_fp8(h->shape.dtype) ? &h->cudnn_fp8 : NULL)) !=
        AT_OK)
      return rc;
    return rt_cudnn_sdpa_launch(h->cudnn, stream);
  case TN_IMPL_FA2: return rt_variant_launch(&impl->kernel, &h->shape, &t, NULL, impl->scratch, stream);
  }
  return at_fail(AT_ERR_INVALID, "unknown implementation kind %d", (int)impl->kind);
}

/* O as the values impl wrote, in h->got: its output dtype decoded with its descale. */
static at_status download_output(tn_harness *h, const tn_impl *impl)
{
  size_t bytes = h->n_q * at_dtype_size(impl->out_dtype);
  void *packed = malloc(bytes);
  if (!packed) return at_fail(AT_ERR_NOMEM, "no host memory for the output");
  at_status rc = rt_download(packed, h->o, bytes);
  if (rc == AT_OK) rc = tn_decode_output(impl->out_dtype, impl->out_descale, packed, h->n_q, h->got);
  free(packed);
  return rc;
}

/* The compare module for outputs of dtype, compiled on first use. */
static at_status compare_for(tn_harness *h, at_dtype dtype, rt_compare **out)
{
  if ((unsigned)dtype > AT_DTYPE_E5M2) return at_fail(AT_ERR_INVALID, "unknown output dtype %d", (int)dtype);
  rt_compare *c = &h->compare[dtype];
  at_status rc;
  if (!c->module && (rc = rt_compare_create(h->ctx->arch, dtype, c)) != AT_OK)
    return at_fail_context(rc, "the %s output comparison", at_dtype_name(dtype));
  *out = c;
  return AT_OK;
}

at_status tn_harness_verify(tn_harness *h, tn_impl *impl, double *err_naive, double *err_cudnn)
{
  at_status rc;
  *err_naive = *err_cudnn = NAN;
  if (!h->ref_o_dev) return at_fail(AT_ERR_INVALID, "verify before the reference was made");
  if ((rc = rt_fill_u8(h->o, 0xFF, h->n_q * 4)) != AT_OK) return rc;
  if ((rc = rt_fill_u8(h->lse, 0xFF, h->n_lse * sizeof(float))) != AT_OK) return rc;
  if ((rc = tn_impl_launch(h, impl, 0, NULL)) != AT_OK) return rc;
  if ((rc = rt_ctx_sync(h->ctx)) != AT_OK) return rc;
  rt_compare *cmp = NULL;
  rt_compare_sums sums;
  if ((rc = compare_for(h, impl->out_dtype, &cmp)) != AT_OK) return rc;
  if ((rc = rt_compare_run(cmp, h->ref_o_dev, h->o, impl->out_descale, h->n_q, &sums)) != AT_OK) return rc;
  *err_naive = rt_compare_rel_l2(&sums);
  if (h->cudnn_o_dev) {
    if ((rc = rt_compare_run(cmp, h->cudnn_o_dev, h->o, impl->out_descale, h->n_q, &sums)) != AT_OK) return rc;
    *err_cudnn = rt_compare_rel_l2(&sums);
  }
  if (h->shape.with_lse) {
    if ((rc = rt_download(h->got, h->lse, h->n_lse * sizeof(float))) != AT_OK) return rc;
    double e = tn_compare_lse(h->ref_lse, h->got, h->n_lse).rel_l2;
    if (!(e <= *err_naive)) *err_naive = e;
  }
  return AT_OK;
}

at_status tn_harness_keep_cudnn_output(tn_harness *h, const tn_impl *cudnn)
{
  at_status rc = download_output(h, cudnn);
  if (rc != AT_OK) return rc;
  return keep_on_device(h->got, h->n_q, &h->cudnn_o_dev);
}

typedef struct launch_ctx {
  tn_harness *h;
  tn_impl *impl;
} launch_ctx;

static at_status launch_thunk(void *user, int set, CUstream stream)
{
  launch_ctx *l = user;
  return tn_impl_launch(l->h, l->impl, set, stream);
}

at_status tn_harness_time(tn_harness *h, tn_impl *impl, const rt_timing_opts *opts, rt_timing *out)
{
  launch_ctx l = {h, impl};
  rt_timing_opts o = *opts;
  o.cover = h->cover;
  o.cover_words = h->cover_words;
  /* Graph replay for every implementation alike: at decode sizes a launch is shorter than its
   * host enqueue (cuDNN's execute, two launches of a split-KV variant), which events between
   * back-to-back launches would count. */
  o.graph = 1;
  return rt_time_launches(launch_thunk, &l, h->n_sets, &o, NULL, out);
}
