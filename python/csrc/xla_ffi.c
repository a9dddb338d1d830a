/*
 * xla_ffi.c — the XLA FFI handlers behind attntune.jax.dot_product_attention,
 * attntune.jax.varlen_attention and attntune.jax.paged_attention (the last two at the end),
 * written against the XLA FFI C API (xla/ffi/api/c_api.h).
 *
 *   operands  q (B, T, Nq, D), k (B, S, Nkv, D), v (B, S, Nkv, D)    row-major (BSHD)
 *             [descale_q, descale_k, descale_v: f32 scalars, FP8 inputs only]
 *   result    o (B, T, Nq, D): q's dtype, bf16 for FP8 inputs
 *   attrs     mask (s32: at_mask), scale (f32, 0 = 1/sqrt(D)), impl (string, "" = auto),
 *             db (string: the tuning cache, "" = none)
 *
 * JAX equivalent: jax.nn.dot_product_attention(q, k, v, scale=scale, is_causal=mask != 0).
 *
 * The plan for a shape is made on its first execution (atpy_plan_get) and reused; later calls are
 * a cache lookup and a launch on XLA's stream. The handler declares itself command-buffer
 * compatible: a plan always enqueues the same kernels for the same shape. When the first
 * execution happens while XLA captures a CUDA graph, plan creation runs with the thread's capture
 * mode relaxed, so that its allocations and module loads are allowed (they are not captured).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "atpy.h"
#include "xla/ffi/api/c_api.h"

static XLA_FFI_Error *ffi_fail(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *fmt, ...)
{
  char msg[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  XLA_FFI_Error_Create_Args args = {XLA_FFI_Error_Create_Args_STRUCT_SIZE, NULL, msg, code};
  return api->XLA_FFI_Error_Create(&args);
}

/* Answer XLA's metadata query: the API version we were built against and our traits. */
static XLA_FFI_Error *answer_metadata(const XLA_FFI_Api *api, XLA_FFI_Metadata_Extension *ext)
{
  if (ext->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE || !ext->metadata ||
      ext->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: XLA metadata struct too small");
  ext->metadata->api_version = (XLA_FFI_Api_Version){XLA_FFI_Api_Version_STRUCT_SIZE, NULL, XLA_FFI_API_MAJOR,
                                                     XLA_FFI_API_MINOR};
  ext->metadata->traits = XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE;
  return NULL;
}

/* ---- attributes ------------------------------------------------------------------------------ */

static int attr_index(const XLA_FFI_CallFrame *cf, const char *name)
{
  size_t n = strlen(name);
  for (int64_t i = 0; i < cf->attrs.size; i++) {
    const XLA_FFI_ByteSpan *s = cf->attrs.names[i];
    if (s->len == n && memcmp(s->ptr, name, n) == 0) return (int)i;
  }
  return -1;
}

static XLA_FFI_Error *attr_scalar(const XLA_FFI_CallFrame *cf, const char *name, XLA_FFI_DataType dtype,
                                  void *out, size_t size)
{
  int i = attr_index(cf, name);
  if (i < 0) return ffi_fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: attribute '%s' missing", name);
  const XLA_FFI_Scalar *s = cf->attrs.attrs[i];
  if (cf->attrs.types[i] != XLA_FFI_AttrType_SCALAR || s->dtype != dtype)
    return ffi_fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: attribute '%s' has the wrong type (expected a scalar of XLA dtype %d)", name,
                    (int)dtype);
  memcpy(out, s->value, size);
  return NULL;
}

static XLA_FFI_Error *attr_string(const XLA_FFI_CallFrame *cf, const char *name, char *out, size_t size)
{
  int i = attr_index(cf, name);
  if (i < 0) return ffi_fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: attribute '%s' missing", name);
  if (cf->attrs.types[i] != XLA_FFI_AttrType_STRING)
    return ffi_fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: attribute '%s' is not a string", name);
  const XLA_FFI_ByteSpan *s = cf->attrs.attrs[i];
  if (s->len >= size)
    return ffi_fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: attribute '%s' longer than %zu bytes",
                    name, size - 1);
  memcpy(out, s->ptr, s->len);
  out[s->len] = '\0';
  return NULL;
}

/* ---- buffers --------------------------------------------------------------------------------- */

static XLA_FFI_Buffer *arg_buffer(const XLA_FFI_CallFrame *cf, int64_t i)
{
  return i < cf->args.size && cf->args.types[i] == XLA_FFI_ArgType_BUFFER ? cf->args.args[i] : NULL;
}

static XLA_FFI_Buffer *ret_buffer(const XLA_FFI_CallFrame *cf, int64_t i)
{
  return i < cf->rets.size && cf->rets.types[i] == XLA_FFI_RetType_BUFFER ? cf->rets.rets[i] : NULL;
}

static int dtype_from_xla(XLA_FFI_DataType t, at_dtype *out)
{
  switch (t) {
  case XLA_FFI_DataType_F32: *out = AT_DTYPE_F32; return 1;
  case XLA_FFI_DataType_F16: *out = AT_DTYPE_F16; return 1;
  case XLA_FFI_DataType_BF16: *out = AT_DTYPE_BF16; return 1;
  case XLA_FFI_DataType_F8E4M3FN: *out = AT_DTYPE_E4M3; return 1;
  case XLA_FFI_DataType_F8E5M2: *out = AT_DTYPE_E5M2; return 1;
  default: return 0;
  }
}

static int is_fp8(at_dtype d) { return d == AT_DTYPE_E4M3 || d == AT_DTYPE_E5M2; }

static int dims_fit_int(const XLA_FFI_Buffer *b)
{
  for (int64_t i = 0; i < b->rank; i++)
    if (b->dims[i] < 1 || b->dims[i] > 0x7fffffff) return 0;
  return 1;
}

/* ---- the driver, for the capture mode only (XLA has loaded it already) ------------------------ */

typedef CUresult (*exchange_capture_mode_fn)(CUstreamCaptureMode *mode);
typedef CUresult (*ctx_get_device_fn)(CUdevice *device);

static void *driver_symbol(const char *name)
{
  void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  void *f = h ? dlsym(h, name) : NULL;
  if (h) dlclose(h);
  return f;
}

/* serving NULL: a padded plan (dense BSHD); else a serving plan of that layout. */
static at_status plan_get_relaxed(int device, const at_shape *shape, const at_serving_layout *serving,
                                  const char *impl, const char *db, at_plan **plan)
{
  exchange_capture_mode_fn exchange = (exchange_capture_mode_fn)driver_symbol("cuThreadExchangeStreamCaptureMode");
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  int exchanged = exchange && exchange(&mode) == CUDA_SUCCESS;
  at_status rc = serving ? atpy_plan_get_serving(device, shape, serving, impl, db, plan)
                         : atpy_plan_get(device, shape, NULL, impl, db, plan);
  if (exchanged) exchange(&mode); /* restores the previous mode */
  return rc;
}



static XLA_FFI_Error *device_ordinal(const XLA_FFI_CallFrame *cf, int *device)
{
  const XLA_FFI_Api *api = cf->api;
  size_t need = offsetof(XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get) + sizeof api->XLA_FFI_DeviceOrdinal_Get;
  if (api->struct_size >= need && api->XLA_FFI_DeviceOrdinal_Get) {
    XLA_FFI_DeviceOrdinal_Get_Args args = {XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE, NULL, cf->ctx, 0};
    XLA_FFI_Error *err = api->XLA_FFI_DeviceOrdinal_Get(&args);
    if (err) return err;
    *device = args.device_ordinal;
    return NULL;
  }
  ctx_get_device_fn get = (ctx_get_device_fn)driver_symbol("cuCtxGetDevice");
  CUdevice d = 0;
  if (!get || get(&d) != CUDA_SUCCESS)
    return ffi_fail(api, XLA_FFI_Error_Code_INTERNAL, "attntune: cannot tell which GPU XLA runs on");
  *device = (int)d;
  return NULL;
}

/* ---- what every handler does ------------------------------------------------------------------ */

/* 1 when the call is not an execution: XLA's metadata query (answered in *answer) or another
 * stage (nothing to do); the handler returns *answer then. */
static int answered_early(XLA_FFI_CallFrame *cf, XLA_FFI_Error **answer)
{
  *answer = NULL;
  if (cf->extension_start && cf->extension_start->type == XLA_FFI_Extension_Metadata) {
    *answer = answer_metadata(cf->api, (XLA_FFI_Metadata_Extension *)cf->extension_start);
    return 1;
  }
  return cf->stage != XLA_FFI_ExecutionStage_EXECUTE;
}

/* The attributes every call has. */
typedef struct call_attrs {
  int32_t mask;
  float scale;
  char impl[128], db[1024];
} call_attrs;

static XLA_FFI_Error *read_call_attrs(const XLA_FFI_CallFrame *cf, call_attrs *a)
{
  XLA_FFI_Error *err;
  if ((err = attr_scalar(cf, "mask", XLA_FFI_DataType_S32, &a->mask, sizeof a->mask))) return err;
  if ((err = attr_scalar(cf, "scale", XLA_FFI_DataType_F32, &a->scale, sizeof a->scale))) return err;
  if ((err = attr_string(cf, "impl", a->impl, sizeof a->impl))) return err;
  return attr_string(cf, "db", a->db, sizeof a->db);
}

/* n f32 scalar operands from index first (an FP8 call's descales) into ptrs, or an error naming
 * them. */
static XLA_FFI_Error *descale_operands(const XLA_FFI_CallFrame *cf, int first, int n, const char *names,
                                       const void **ptrs)
{
  if (cf->args.size != first + n)
    return ffi_fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: %lld operands, expected %d (with %s)",
                    (long long)cf->args.size, first + n, names);
  for (int i = 0; i < n; i++) {
    XLA_FFI_Buffer *b = arg_buffer(cf, first + i);
    if (!b || b->dtype != XLA_FFI_DataType_F32)
      return ffi_fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: FP8 needs f32 %s operands", names);
    ptrs[i] = b->data;
  }
  return NULL;
}

/* The cached plan for shape on XLA's device (serving NULL: padded tensors), and XLA's stream. */
static XLA_FFI_Error *plan_and_stream(XLA_FFI_CallFrame *cf, const at_shape *shape, const at_serving_layout *serving,
                                      const call_attrs *a, at_plan **plan, void **stream)
{
  const XLA_FFI_Api *api = cf->api;
  XLA_FFI_Error *err;
  int device = 0;
  if ((err = device_ordinal(cf, &device))) return err;
  XLA_FFI_Stream_Get_Args sargs = {XLA_FFI_Stream_Get_Args_STRUCT_SIZE, NULL, cf->ctx, NULL};
  if ((err = api->XLA_FFI_Stream_Get(&sargs))) return err;
  *stream = sargs.stream;
  at_status rc = plan_get_relaxed(device, shape, serving, a->impl, a->db, plan);
  if (rc == AT_OK) return NULL;
  return ffi_fail(api, rc == AT_ERR_INVALID || rc == AT_ERR_UNSUPPORTED ? XLA_FFI_Error_Code_INVALID_ARGUMENT
                                                                        : XLA_FFI_Error_Code_INTERNAL,
                  "attntune: %s", atpy_last_error());
}

static XLA_FFI_Error *run_failed(const XLA_FFI_Api *api)
{
  return ffi_fail(api, XLA_FFI_Error_Code_INTERNAL, "attntune: %s", atpy_last_error());
}

/* A serving call's tensors: the buffers' data with the layout's strides; metadata by the caller. */
static at_serving_tensors serving_tensors(const XLA_FFI_Buffer *q, const XLA_FFI_Buffer *k, const XLA_FFI_Buffer *v,
                                          const XLA_FFI_Buffer *o, const at_serving_layout *layout)
{
  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  t.q = q->data, t.k = k->data, t.v = v->data, t.o = o->data;
  t.q_stride = layout->strides.q, t.k_stride = layout->strides.k, t.v_stride = layout->strides.v;
  t.o_stride = layout->strides.o;
  return t;
}

/* ---- the handler ----------------------------------------------------------------------------- */

AT_API XLA_FFI_Error *attntune_xla_sdpa(XLA_FFI_CallFrame *cf);

XLA_FFI_Error *attntune_xla_sdpa(XLA_FFI_CallFrame *cf)
{
  XLA_FFI_Error *err;
  if (answered_early(cf, &err)) return err;
  const XLA_FFI_Api *api = cf->api;

  XLA_FFI_Buffer *q = arg_buffer(cf, 0), *k = arg_buffer(cf, 1), *v = arg_buffer(cf, 2), *o = ret_buffer(cf, 0);
  if (!q || !k || !v || !o)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: expected buffers q, k, v and one result, got %lld operands and %lld results",
                    (long long)cf->args.size, (long long)cf->rets.size);
  if (q->rank != 4 || k->rank != 4 || v->rank != 4 || o->rank != 4)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: q, k, v and o must be rank 4 (B, T, N, H); got ranks %lld, %lld, %lld, %lld",
                    (long long)q->rank, (long long)k->rank, (long long)v->rank, (long long)o->rank);
  if (!dims_fit_int(q) || !dims_fit_int(k) || !dims_fit_int(v))
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: a dimension is empty or too large");
  for (int i = 0; i < 4; i++)
    if (k->dims[i] != v->dims[i] || o->dims[i] != q->dims[i])
      return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "attntune: k and v must have equal shapes and o the shape of q (dim %d)", i);
  if (k->dims[0] != q->dims[0] || k->dims[3] != q->dims[3])
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: q and k must agree in batch and head dim (q %lldx..x%lld, k %lldx..x%lld)",
                    (long long)q->dims[0], (long long)q->dims[3], (long long)k->dims[0], (long long)k->dims[3]);

  at_shape shape = {.batch = (int)q->dims[0], .q_len = (int)q->dims[1], .kv_len = (int)k->dims[1],
                    .q_heads = (int)q->dims[2], .kv_heads = (int)k->dims[2], .head_dim = (int)q->dims[3]};
  if (!dtype_from_xla(q->dtype, &shape.dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: q, k, v must share one dtype of f32, f16, bf16, f8e4m3fn, f8e5m2 (XLA dtypes %d, %d, %d)",
                    (int)q->dtype, (int)k->dtype, (int)v->dtype);
  XLA_FFI_DataType want_o = is_fp8(shape.dtype) ? XLA_FFI_DataType_BF16 : q->dtype;
  if (o->dtype != want_o)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: result has XLA dtype %d, expected %d",
                    (int)o->dtype, (int)want_o);

  call_attrs a;
  if ((err = read_call_attrs(cf, &a))) return err;
  shape.mask = (at_mask)a.mask;
  shape.scale = a.scale;

  const void *descales[3] = {NULL, NULL, NULL};
  if (is_fp8(shape.dtype) && (err = descale_operands(cf, 3, 3, "descale_q, descale_k, descale_v", descales)))
    return err;
  if (!is_fp8(shape.dtype) && cf->args.size != 3)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: %lld operands for a non-FP8 call, expected 3",
                    (long long)cf->args.size);
  const at_fp8_args fp8 = {descales[0], descales[1], descales[2]};

  at_plan *plan;
  void *stream;
  if ((err = plan_and_stream(cf, &shape, NULL, &a, &plan, &stream))) return err;
  at_layout l = at_layout_bshd(&shape);
  at_tensors t = {q->data, k->data, v->data, o->data, NULL, l.q, l.k, l.v, l.o};
  if (atpy_plan_run(plan, &t, is_fp8(shape.dtype) ? &fp8 : NULL, stream) != AT_OK) return run_failed(api);
  return NULL;
}

/* ---- packed sequences (varlen) ----------------------------------------------------------------
 *
 *   operands  q (total_q, Nq, D), k (total_k, Nkv, D), v (total_k, Nkv, D)    row-major
 *             cu_seqlens_q, cu_seqlens_k (B + 1): s32 offsets of each sequence's first row
 *   result    o (total_q, Nq, D) in q's dtype (f16 or bf16)
 *   attrs     mask, scale, impl, db as above; max_q, max_k (s32): the longest lengths, which size
 *             the plan (include/attntune.h, "Serving layouts")
 */

AT_API XLA_FFI_Error *attntune_xla_varlen(XLA_FFI_CallFrame *cf);

XLA_FFI_Error *attntune_xla_varlen(XLA_FFI_CallFrame *cf)
{
  XLA_FFI_Error *err;
  if (answered_early(cf, &err)) return err;
  const XLA_FFI_Api *api = cf->api;

  XLA_FFI_Buffer *q = arg_buffer(cf, 0), *k = arg_buffer(cf, 1), *v = arg_buffer(cf, 2);
  XLA_FFI_Buffer *cu_q = arg_buffer(cf, 3), *cu_k = arg_buffer(cf, 4), *o = ret_buffer(cf, 0);
  if (!q || !k || !v || !cu_q || !cu_k || !o || cf->args.size != 5)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: expected buffers q, k, v, cu_seqlens_q, cu_seqlens_k and one result, got %lld "
                    "operands and %lld results",
                    (long long)cf->args.size, (long long)cf->rets.size);
  if (q->rank != 3 || k->rank != 3 || v->rank != 3 || o->rank != 3 || cu_q->rank != 1 || cu_k->rank != 1)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: q, k, v and o must be rank 3 (total, N, H) and the offsets rank 1");
  if (!dims_fit_int(q) || !dims_fit_int(k) || !dims_fit_int(cu_q) || cu_q->dims[0] < 2 ||
      cu_k->dims[0] != cu_q->dims[0])
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: rows and heads must be 1 .. 2^31 - 1, and cu_seqlens_q and cu_seqlens_k (B + 1) "
                    "of one length >= 2");
  for (int i = 0; i < 3; i++)
    if (k->dims[i] != v->dims[i] || o->dims[i] != q->dims[i])
      return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "attntune: k and v must have equal shapes and o the shape of q (dim %d)", i);
  if (k->dims[2] != q->dims[2])
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: q and k must agree in head dim");
  at_dtype dtype;
  if (!dtype_from_xla(q->dtype, &dtype) || (dtype != AT_DTYPE_F16 && dtype != AT_DTYPE_BF16) ||
      k->dtype != q->dtype || v->dtype != q->dtype || o->dtype != q->dtype)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: packed q, k, v and o must share one dtype, f16 or bf16 (XLA dtypes %d, %d, %d, %d)",
                    (int)q->dtype, (int)k->dtype, (int)v->dtype, (int)o->dtype);
  if (cu_q->dtype != XLA_FFI_DataType_S32 || cu_k->dtype != XLA_FFI_DataType_S32)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: cu_seqlens_q and cu_seqlens_k must be s32");

  call_attrs a;
  int32_t max_q, max_k;
  if ((err = read_call_attrs(cf, &a))) return err;
  if ((err = attr_scalar(cf, "max_q", XLA_FFI_DataType_S32, &max_q, sizeof max_q))) return err;
  if ((err = attr_scalar(cf, "max_k", XLA_FFI_DataType_S32, &max_k, sizeof max_k))) return err;

  at_shape shape = {.batch = (int)cu_q->dims[0] - 1, .q_len = max_q, .kv_len = max_k, .q_heads = (int)q->dims[1],
                    .kv_heads = (int)k->dims[1], .head_dim = (int)q->dims[2], .dtype = dtype,
                    .mask = (at_mask)a.mask, .scale = a.scale};
  at_serving_layout layout = at_serving_layout_make(&shape, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);

  at_plan *plan;
  void *stream;
  if ((err = plan_and_stream(cf, &shape, &layout, &a, &plan, &stream))) return err;
  at_serving_tensors t = serving_tensors(q, k, v, o, &layout);
  t.cu_seqlens_q = cu_q->data, t.cu_seqlens_kv = cu_k->data;
  t.total_q = (int)q->dims[0], t.total_kv = (int)k->dims[0];
  if (atpy_plan_run_serving(plan, &t, NULL, stream) != AT_OK) return run_failed(api);
  return NULL;
}

/* ---- decode over a paged KV cache ----------------------------------------------------------------
 *
 *   operands  q (B, T, Nq, D) with T 1..16, k_cache and v_cache (num_pages, page_size, Nkv, D)
 *             row-major, block_table (B, max_pages) s32, seqlens_k (B,) s32
 *             [descale_k, descale_v: f32 scalars, for an FP8 (f8e4m3fn, f8e5m2) cache only]
 *   result    o (B, T, Nq, D) in q's dtype (f16 or bf16)
 *   attrs     mask, scale, impl, db as above; max_k (s32): the longest KV length, sizing the plan
 */

AT_API XLA_FFI_Error *attntune_xla_paged(XLA_FFI_CallFrame *cf);

XLA_FFI_Error *attntune_xla_paged(XLA_FFI_CallFrame *cf)
{
  XLA_FFI_Error *err;
  if (answered_early(cf, &err)) return err;
  const XLA_FFI_Api *api = cf->api;

  XLA_FFI_Buffer *q = arg_buffer(cf, 0), *kc = arg_buffer(cf, 1), *vc = arg_buffer(cf, 2);
  XLA_FFI_Buffer *table = arg_buffer(cf, 3), *lengths = arg_buffer(cf, 4), *o = ret_buffer(cf, 0);
  if (!q || !kc || !vc || !table || !lengths || !o)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: expected buffers q, k_cache, v_cache, block_table, seqlens_k and one result, got "
                    "%lld operands and %lld results",
                    (long long)cf->args.size, (long long)cf->rets.size);
  if (q->rank != 4 || kc->rank != 4 || vc->rank != 4 || o->rank != 4 || table->rank != 2 || lengths->rank != 1)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: q and o must be (B, T, N, H), the caches (pages, page_size, K, H), block_table "
                    "(B, max_pages) and seqlens_k (B,)");
  if (!dims_fit_int(q) || !dims_fit_int(kc) || !dims_fit_int(table) || table->dims[0] != q->dims[0] ||
      lengths->dims[0] != q->dims[0])
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: dimensions must be 1 .. 2^31 - 1 and block_table and seqlens_k have B rows");
  for (int i = 0; i < 4; i++)
    if (kc->dims[i] != vc->dims[i] || o->dims[i] != q->dims[i])
      return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "attntune: the caches must have equal shapes and o the shape of q (dim %d)", i);
  if (kc->dims[3] != q->dims[3])
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: q and the caches must agree in head dim");
  at_dtype dtype, kv_dtype;
  if (!dtype_from_xla(q->dtype, &dtype) || (dtype != AT_DTYPE_F16 && dtype != AT_DTYPE_BF16) ||
      o->dtype != q->dtype || !dtype_from_xla(kc->dtype, &kv_dtype) || vc->dtype != kc->dtype ||
      (kv_dtype != dtype && !is_fp8(kv_dtype)))
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attntune: q (and o) must be f16 or bf16 and the caches in q's dtype or FP8 (XLA dtypes %d, %d, "
                    "%d, %d)",
                    (int)q->dtype, (int)kc->dtype, (int)vc->dtype, (int)o->dtype);
  if (table->dtype != XLA_FFI_DataType_S32 || lengths->dtype != XLA_FFI_DataType_S32)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: block_table and seqlens_k must be s32");

  call_attrs a;
  int32_t max_k;
  if ((err = read_call_attrs(cf, &a))) return err;
  if ((err = attr_scalar(cf, "max_k", XLA_FFI_DataType_S32, &max_k, sizeof max_k))) return err;

  const void *descales[2] = {NULL, NULL};
  if (is_fp8(kv_dtype) && (err = descale_operands(cf, 5, 2, "descale_k, descale_v", descales))) return err;
  if (!is_fp8(kv_dtype) && cf->args.size != 5)
    return ffi_fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "attntune: %lld operands for a 16-bit cache, expected 5",
                    (long long)cf->args.size);
  const at_fp8_args fp8 = {NULL, descales[0], descales[1]};

  at_shape shape = {.batch = (int)q->dims[0], .q_len = (int)q->dims[1], .kv_len = max_k,
                    .q_heads = (int)q->dims[2], .kv_heads = (int)kc->dims[2], .head_dim = (int)q->dims[3],
                    .dtype = dtype, .mask = (at_mask)a.mask, .scale = a.scale,
                    .kv_dtype = kv_dtype == dtype ? AT_KV_SAME : kv_dtype};
  at_serving_layout layout = at_serving_layout_make(&shape, AT_SEQ_PADDED, AT_SEQ_PAGED, (int)kc->dims[1]);
  layout.max_pages_per_seq = (int)table->dims[1];

  at_plan *plan;
  void *stream;
  if ((err = plan_and_stream(cf, &shape, &layout, &a, &plan, &stream))) return err;
  at_serving_tensors t = serving_tensors(q, kc, vc, o, &layout);
  t.block_table = table->data, t.seqlens_kv = lengths->data;
  t.num_pages = (int)kc->dims[0];
  if (atpy_plan_run_serving(plan, &t, is_fp8(kv_dtype) ? &fp8 : NULL, stream) != AT_OK) return run_failed(api);
  return NULL;
}
