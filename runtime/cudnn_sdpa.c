/*
 * cudnn_sdpa.c — cuDNN SDPA forward through the backend API; see cudnn_sdpa.h for the graphs.
 *
 * Building a plan, in backend terms:
 *   tensors (dims, strides, UID; virtual for intermediates, by-value for host scalars) →
 *   operations (matmul, pointwise, reduction, or the fused SDPA_FWD) → operation graph →
 *   engine heuristics (mode A, then FALLBACK) → engine configs → the first config whose
 *   execution plan finalizes.
 * Every descriptor a plan depends on is owned by its cache entry and destroyed with it.
 *
 * Graph-building helpers share a "sticky" status (struct builder): the first failing cuDNN call
 * records its message and every later step does nothing, so the graph code reads as a list of
 * operations with one check at the end.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/cudnn_ragged.h"
#include "runtime/cudnn_sdpa.h"

/* The ragged graph sets CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC and the matmul M/N/K override
 * attributes, which cuDNN's headers have since 8.9. Older headers build the library without the
 * ragged graph (it then says so at run time) rather than failing to compile. */
#if defined(CUDNN_VERSION) && CUDNN_VERSION >= 8900
#define HEADERS_HAVE_RAGGED 1
#else
#define HEADERS_HAVE_RAGGED 0
#endif

/* The paged graph loads K and V through page tables (CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD),
 * in cuDNN's headers and library since 9.5 (cudnn-frontend's checks). */
#if defined(CUDNN_VERSION) && CUDNN_VERSION >= 90500
#define HEADERS_HAVE_PAGED 1
#else
#define HEADERS_HAVE_PAGED 0
#endif
/* The pools' page count as the paged graph's container tensors give it: the block table's
 * entries are the caller's, so the container is described as large as any call may pass
 * (num_pages is checked against it per call). */
enum { PAGED_CONTAINER_PAGES = 1 << 24 };

/* The loaded cuDNN the ragged graph needs: ragged offsets with GQA (Nkv < Nq) and the
 * bottom-right mask at any lengths came with 9.6.0 (cudnn-frontend's support checks). */
enum { RAGGED_MIN_VERSION = 90600 };

/* PACKS_PER_PLAN: variant packs kept per plan, one per set of pointers, so that a benchmark
 * rotating a few input sets does not rebuild a pack on every launch. */
enum { PLAN_CACHE_CAP = 16, PACKS_PER_PLAN = 8, MAX_CONFIGS = 64, MAX_OPS = 48 };

/* UIDs of the tensors the caller supplies (the variant pack); virtual tensors count up from
 * UID_VIRTUAL. By-value scalars (scale, -inf, sequence lengths) point at host memory in the
 * plan entry. */
enum {
  UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF, UID_SEQ_KV, UID_SEQ_Q,
  UID_DESCALE_Q, UID_DESCALE_K, UID_DESCALE_V, UID_DESCALE_S, UID_SCALE_S, UID_SCALE_O,
  UID_AMAX_S, UID_AMAX_O,
  /* the ragged graph: per-sequence lengths [B,1,1,1] and element offsets [B+1,1,1,1] (int32, device) */
  UID_SEQ_LEN_Q, UID_SEQ_LEN_KV, UID_RAGGED_Q, UID_RAGGED_K, UID_RAGGED_V, UID_RAGGED_O,
  /* the paged graph: the block table [B,1,max_pages,1] (int32, device), once per paged load */
  UID_PAGE_TABLE_K, UID_PAGE_TABLE_V,
  UID_END,
  UID_VIRTUAL = 100
};
_Static_assert(UID_END <= 32, "plan_entry.uid_used has a bit per caller-visible UID");

/* A variant pack: the pointers (and workspace) it was made for. */
typedef struct pack_slot {
  cudnnBackendDescriptor_t desc;
  int n;
  void *ptrs[UID_END];
  void *workspace;
} pack_slot;

/* What makes two calls share a plan. Built with memset first so that memcmp compares it. */
typedef struct plan_key {
  int batch, q_len, kv_len, q_heads, kv_heads, head_dim;
  int dtype, mask, with_lse, path;
  int q_ragged, kv_ragged; /* packed Q/O, packed K/V (the ragged graph); 0, 0 for padded tensors */
  int page_size, max_pages; /* K/V pools read through a block table (the paged graph); 0, 0 otherwise */
  float scale;
  at_strides q, k, v, o;
} plan_key;

typedef struct plan_entry {
  plan_key key;
  unsigned long last_use;
  cudnnBackendDescriptor_t *descs; /* owned, in creation order */
  int n_descs, cap_descs;
  cudnnBackendDescriptor_t plan;   /* one of descs; NULL for a cached refusal */
  char *refusal;                   /* why cuDNN cannot run this key (then nothing else is set) */
  rt_cudnn_plan_info info;
  unsigned uid_used;               /* bit per caller-visible UID present in the graph */
  /* by-value scalars the variant pack points at */
  float attn_scale, neg_inf;
  int32_t seq_q, seq_kv;
  pack_slot packs[PACKS_PER_PLAN];
  int next_pack; /* round-robin replacement */
} plan_entry;

struct rt_cudnn_sdpa {
  rt_ctx ctx;
  cudnnHandle_t handle;
  size_t version;
  rt_cudnn_path path;
  plan_entry *cache[PLAN_CACHE_CAP];
  unsigned long clock;
  long builds;
  plan_entry *last;  /* of the last plan/bind */
  plan_entry *bound; /* of the last bind */
  cudnnBackendDescriptor_t bound_pack;
  CUdeviceptr workspace;
  size_t workspace_bytes;
  /* the ragged graph's metadata kernels (loaded at its first plan) and their scratch */
  rt_cudnn_ragged_kernels ragged_kernels;
  CUdeviceptr ragged_scratch;
  size_t ragged_scratch_bytes;
};

/* ---- names ---------------------------------------------------------------------------------- */

static const char *const PATH_NAMES[] = {"auto", "composite", "unified", "fp8"};

const char *rt_cudnn_path_name(rt_cudnn_path path)
{
  return (unsigned)path < sizeof PATH_NAMES / sizeof *PATH_NAMES ? PATH_NAMES[path] : "?";
}

at_status rt_cudnn_path_parse(const char *text, rt_cudnn_path *out)
{
  for (int i = 0; i < (int)(sizeof PATH_NAMES / sizeof *PATH_NAMES); i++)
    if (strcmp(text, PATH_NAMES[i]) == 0) {
      *out = (rt_cudnn_path)i;
      return AT_OK;
    }
  return at_fail(AT_ERR_INVALID, "unknown cuDNN path '%s' (expected auto, composite, unified, fp8)", text);
}

static const char *knob_name(int type)
{
  switch (type) {
  case CUDNN_KNOB_TYPE_SWIZZLE: return "SWIZZLE";
  case CUDNN_KNOB_TYPE_TILE_SIZE: return "TILE_SIZE";
  case CUDNN_KNOB_TYPE_EDGE: return "EDGE";
  case CUDNN_KNOB_TYPE_MULTIPLY: return "MULTIPLY";
  case CUDNN_KNOB_TYPE_SPLIT_K_BUF: return "SPLIT_K_BUF";
  case CUDNN_KNOB_TYPE_TILEK: return "TILEK";
  case CUDNN_KNOB_TYPE_STAGES: return "STAGES";
  case CUDNN_KNOB_TYPE_REDUCTION_MODE: return "REDUCTION_MODE";
  case CUDNN_KNOB_TYPE_SPLIT_K_SLC: return "SPLIT_K_SLC";
  case CUDNN_KNOB_TYPE_IDX_MODE: return "IDX_MODE";
  case CUDNN_KNOB_TYPE_SPECFILT: return "SPECFILT";
  case CUDNN_KNOB_TYPE_KERNEL_CFG: return "KERNEL_CFG";
  case CUDNN_KNOB_TYPE_WORKSPACE: return "WORKSPACE";
  case CUDNN_KNOB_TYPE_TILE_CGA_M: return "TILE_CGA_M";
  case CUDNN_KNOB_TYPE_TILE_CGA_N: return "TILE_CGA_N";
  case CUDNN_KNOB_TYPE_BLOCK_SIZE: return "BLOCK_SIZE";
  case CUDNN_KNOB_TYPE_OCCUPANCY: return "OCCUPANCY";
  case CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD: return "ARRAY_SIZE_PER_THREAD";
  case CUDNN_KNOB_TYPE_SPLIT_COLS: return "SPLIT_COLS";
  case CUDNN_KNOB_TYPE_TILE_ROWS: return "TILE_ROWS";
  case CUDNN_KNOB_TYPE_TILE_COLS: return "TILE_COLS";
  case CUDNN_KNOB_TYPE_LOAD_SIZE: return "LOAD_SIZE";
  case CUDNN_KNOB_TYPE_CTA_COUNT: return "CTA_COUNT";
  case CUDNN_KNOB_TYPE_STREAM_K: return "STREAM_K";
  case CUDNN_KNOB_TYPE_SPLIT_P_SLC: return "SPLIT_P_SLC";
  case CUDNN_KNOB_TYPE_TILE_M: return "TILE_M";
  case CUDNN_KNOB_TYPE_TILE_N: return "TILE_N";
  case CUDNN_KNOB_TYPE_WARP_SPEC_CFG: return "WARP_SPEC_CFG";
  case CUDNN_KNOB_TYPE_SWAP_AB: return "SWAP_AB";
  }
  return NULL;
}

/* ---- plan entries ----------------------------------------------------------------------------- */

static int entry_own(plan_entry *e, cudnnBackendDescriptor_t d)
{
  if (e->n_descs == e->cap_descs) {
    int cap = e->cap_descs ? 2 * e->cap_descs : 64;
    cudnnBackendDescriptor_t *grown = realloc(e->descs, (size_t)cap * sizeof *grown);
    if (!grown) return 0;
    e->descs = grown;
    e->cap_descs = cap;
  }
  e->descs[e->n_descs++] = d;
  return 1;
}

/* Destroy failures are not actionable (the memory is gone either way), so they are not reported;
 * they are still not ignored silently in debug builds. */
static void destroy_desc(cudnnBackendDescriptor_t d)
{
  if (!d) return;
  cudnnStatus_t st = rt_cudnn()->cudnnBackendDestroyDescriptor(d);
  (void)st;
#ifndef NDEBUG
  if (st != CUDNN_STATUS_SUCCESS) fprintf(stderr, "attntune: cudnnBackendDestroyDescriptor: %d\n", (int)st);
#endif
}

static void entry_free(plan_entry *e)
{
  if (!e) return;
  for (int i = 0; i < PACKS_PER_PLAN; i++) destroy_desc(e->packs[i].desc);
  for (int i = e->n_descs - 1; i >= 0; i--) destroy_desc(e->descs[i]);
  free(e->descs);
  free(e->refusal);
  free(e);
}

/* ---- the graph builder -------------------------------------------------------------------- */

typedef struct builder {
  plan_entry *e;
  at_status rc; /* first failure; later steps do nothing */
  int64_t next_virtual_uid;
  cudnnDataType_t io; /* Q, K, V (and P, O) */
  cudnnBackendDescriptor_t ops[MAX_OPS];
  int n_ops;
} builder;

static int ok(const builder *b) { return b->rc == AT_OK; }

static void b_check(builder *b, cudnnStatus_t st, const char *expr, int line)
{
  if (b->rc == AT_OK && st != CUDNN_STATUS_SUCCESS) b->rc = rt_cudnn_check(st, expr, __FILE__, line);
}

/* Finalizing is where cuDNN judges the graph: BAD_PARAM or NOT_SUPPORTED there means no engine
 * takes this shape/layout/dtype (our own checks passed before), so it is "unsupported". */
static void b_finalize(builder *b, cudnnBackendDescriptor_t d, const char *what, int line)
{
  if (!ok(b)) return;
  cudnnStatus_t st = rt_cudnn()->cudnnBackendFinalize(d);
  if (st == CUDNN_STATUS_SUCCESS) return;
  b->rc = rt_cudnn_check(st, what, __FILE__, line);
  int cat = CUDNN_STATUS_CATEGORY(st);
  if (cat == CUDNN_STATUS_BAD_PARAM || cat == CUDNN_STATUS_NOT_SUPPORTED)
    b->rc = at_fail_context(AT_ERR_UNSUPPORTED, "cuDNN cannot run this attention");
}
#define B_FINALIZE(b, d, what) b_finalize((b), (d), "cudnnBackendFinalize(" what ")", __LINE__)

static cudnnBackendDescriptor_t b_create(builder *b, cudnnBackendDescriptorType_t type, const char *what, int line)
{
  cudnnBackendDescriptor_t d = NULL;
  if (!ok(b)) return NULL;
  b_check(b, rt_cudnn()->cudnnBackendCreateDescriptor(type, &d), what, line);
  if (!ok(b)) return NULL;
  if (!entry_own(b->e, d)) {
    destroy_desc(d);
    b->rc = at_fail(AT_ERR_NOMEM, "no memory to keep cuDNN descriptors");
    return NULL;
  }
  return d;
}
#define B_CREATE(b, type) b_create((b), (type), "cudnnBackendCreateDescriptor(" #type ")", __LINE__)

static void b_set(builder *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                  cudnnBackendAttributeType_t type, int64_t n, const void *value, const char *what, int line)
{
  if (!ok(b)) return;
  b_check(b, rt_cudnn()->cudnnBackendSetAttribute(d, name, type, n, value), what, line);
}
#define B_SET(b, d, name, type, n, value)                                                       \
  b_set((b), (d), (name), (type), (n), (value), "cudnnBackendSetAttribute(" #name ")", __LINE__)

/* A tensor [d0, d1, d2, d3] with strides. uid 0: a virtual intermediate with the next free UID.
 * by_value: a host scalar passed in the variant pack. ragged_offsets: NULL, or the int32
 * [d0 + 1, 1, 1, 1] tensor whose entry b is the element offset of batch entry b (a packed
 * tensor; then the batch stride is not what addresses it). */
static cudnnBackendDescriptor_t b_tensor_at(builder *b, int64_t uid, cudnnDataType_t dtype, const int64_t dims[4],
                                            const int64_t strides[4], bool by_value,
                                            cudnnBackendDescriptor_t ragged_offsets)
{
  bool is_virtual = uid == 0;
  int64_t alignment = 16;
  if (is_virtual) uid = b->next_virtual_uid++;
  else if (uid < UID_END) b->e->uid_used |= 1u << uid;
  cudnnBackendDescriptor_t t = B_CREATE(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  B_SET(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype);
  B_SET(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  B_SET(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  B_SET(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  B_SET(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  if (is_virtual) B_SET(b, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  if (by_value) B_SET(b, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
#if HEADERS_HAVE_RAGGED
  if (ragged_offsets)
    B_SET(b, t, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ragged_offsets);
#else
  if (ragged_offsets && ok(b))
    b->rc = at_fail(AT_ERR_UNSUPPORTED, "unsupported: this build's cuDNN headers (%d) lack ragged offsets",
                    (int)CUDNN_VERSION);
#endif
  B_FINALIZE(b, t, "tensor");
  return t;
}

static cudnnBackendDescriptor_t b_tensor(builder *b, int64_t uid, cudnnDataType_t dtype, const int64_t dims[4],
                                         const int64_t strides[4], bool by_value)
{
  return b_tensor_at(b, uid, dtype, dims, strides, by_value, NULL);
}

static const int64_t ONE4[4] = {1, 1, 1, 1};

static cudnnBackendDescriptor_t b_virtual(builder *b, cudnnDataType_t dtype, const int64_t dims[4],
                                          const int64_t strides[4])
{
  return b_tensor(b, 0, dtype, dims, strides, false);
}

/* A [1,1,1,1] fp32 scalar: by value (host) or a device tensor. */
static cudnnBackendDescriptor_t b_scalar(builder *b, int64_t uid, cudnnDataType_t dtype, bool by_value)
{
  return b_tensor(b, uid, dtype, ONE4, ONE4, by_value);
}

static void b_add_op(builder *b, cudnnBackendDescriptor_t op)
{
  if (!ok(b)) return;
  if (b->n_ops == MAX_OPS) {
    b->rc = at_fail(AT_ERR_INVALID, "cuDNN graph has more than %d operations", MAX_OPS);
    return;
  }
  b->ops[b->n_ops++] = op;
}

/* y = mode(x[, bx[, t]]) elementwise with broadcasting; axis >= 0 only for GEN_INDEX. */
static void b_pointwise(builder *b, cudnnPointwiseMode_t mode, cudnnDataType_t math,
                        cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t bx,
                        cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis)
{
  float alpha = 1.0f;
  cudnnBackendDescriptor_t pw = B_CREATE(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  B_SET(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  B_SET(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math);
  if (axis >= 0) B_SET(b, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  B_FINALIZE(b, pw, "pointwise");
  cudnnBackendDescriptor_t op = B_CREATE(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  B_SET(b, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
  B_SET(b, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  if (bx) B_SET(b, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bx);
  if (t) B_SET(b, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
  B_SET(b, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  B_SET(b, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &alpha);
  B_SET(b, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha);
  B_FINALIZE(b, op, "pointwise operation");
  b_add_op(b, op);
}

/* y = reduce(x) over the dimensions where y has extent 1. */
static void b_reduction(builder *b, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                        cudnnBackendDescriptor_t y)
{
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t red = B_CREATE(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  B_SET(b, red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
  B_SET(b, red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
  B_FINALIZE(b, red, "reduction");
  cudnnBackendDescriptor_t op = B_CREATE(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  B_SET(b, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  B_SET(b, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  B_SET(b, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red);
  B_FINALIZE(b, op, "reduction operation");
  b_add_op(b, op);
}

/* The GEMM sizes one batch entry actually has: M, N or K overridden per entry by an int32
 * [B,1,1,1] tensor (the ragged graph's sequence lengths), NULL keeping the tensor's extent. */
typedef struct gemm_overrides {
  cudnnBackendDescriptor_t m, n, k;
} gemm_overrides;

/* c = a · bm, batched over the two leading dims (bm may have fewer heads: GQA). fp32 accumulate.
 * ov may be NULL (no overrides). */
static void b_matmul_sized(builder *b, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t bm,
                           cudnnBackendDescriptor_t c, const gemm_overrides *ov)
{
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t mm = B_CREATE(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  B_SET(b, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
  B_FINALIZE(b, mm, "matmul");
  cudnnBackendDescriptor_t op = B_CREATE(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  B_SET(b, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
  B_SET(b, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bm);
  B_SET(b, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
  B_SET(b, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
#if HEADERS_HAVE_RAGGED
  if (ov && ov->m) B_SET(b, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ov->m);
  if (ov && ov->n) B_SET(b, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ov->n);
  if (ov && ov->k) B_SET(b, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ov->k);
#else
  if (ov && ok(b))
    b->rc = at_fail(AT_ERR_UNSUPPORTED, "unsupported: this build's cuDNN headers (%d) lack matmul size overrides",
                    (int)CUDNN_VERSION);
#endif
  B_FINALIZE(b, op, "matmul operation");
  b_add_op(b, op);
}

static void b_matmul(builder *b, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t bm,
                     cudnnBackendDescriptor_t c)
{
  b_matmul_sized(b, a, bm, c, NULL);
}

/* ---- the SDPA graphs ---------------------------------------------------------------------- */

static cudnnDataType_t cudnn_dtype(int dtype)
{
  switch (dtype) {
  case AT_DTYPE_F16: return CUDNN_DATA_HALF;
  case AT_DTYPE_BF16: return CUDNN_DATA_BFLOAT16;
  case AT_DTYPE_E4M3: return CUDNN_DATA_FP8_E4M3;
  case AT_DTYPE_E5M2: return CUDNN_DATA_FP8_E5M2;
  default: return CUDNN_DATA_FLOAT;
  }
}

/* Dims and strides of the score matrix [B, Nq, T, S] and of per-row values [B, Nq, T, 1]. */
typedef struct sdpa_dims {
  int64_t s[4], s_str[4];
  int64_t row[4], row_str[4];
} sdpa_dims;

static sdpa_dims dims_of(const plan_key *k)
{
  int64_t B = k->batch, H = k->q_heads, T = k->q_len, S = k->kv_len;
  sdpa_dims d = {{B, H, T, S}, {H * T * S, T * S, S, 1}, {B, H, T, 1}, {H * T, T, 1, 1}};
  return d;
}

/* The ragged graph's extra inputs, all int32 device tensors the plan's metadata kernel writes
 * (runtime/cudnn_ragged.h): per-sequence lengths [B,1,1,1], and element offsets [B+1,1,1,1] of
 * each packed tensor (K's and V's only when K/V are packed). All NULL in the padded graphs. */
typedef struct ragged_tensors {
  cudnnBackendDescriptor_t seq_q, seq_kv;
  cudnnBackendDescriptor_t off_q, off_k, off_v, off_o;
} ragged_tensors;

/* Is the graph sized per sequence (the padding mask, the GEMMs' M/N/K overrides)? Packed Q, or
 * K/V read through page tables with per-sequence lengths. */
static int per_sequence(const plan_key *k) { return k->q_ragged || k->page_size; }

static ragged_tensors b_ragged_tensors(builder *b, const plan_key *k)
{
  ragged_tensors r;
  memset(&r, 0, sizeof r);
  if (!per_sequence(k)) return r;
  const int64_t lens[4] = {k->batch, 1, 1, 1}, offsets[4] = {k->batch + 1, 1, 1, 1};
  r.seq_q = b_tensor(b, UID_SEQ_LEN_Q, CUDNN_DATA_INT32, lens, ONE4, false);
  r.seq_kv = b_tensor(b, UID_SEQ_LEN_KV, CUDNN_DATA_INT32, lens, ONE4, false);
  if (!k->q_ragged) return r;
  r.off_q = b_tensor(b, UID_RAGGED_Q, CUDNN_DATA_INT32, offsets, ONE4, false);
  r.off_o = b_tensor(b, UID_RAGGED_O, CUDNN_DATA_INT32, offsets, ONE4, false);
  if (k->kv_ragged) {
    r.off_k = b_tensor(b, UID_RAGGED_K, CUDNN_DATA_INT32, offsets, ONE4, false);
    r.off_v = b_tensor(b, UID_RAGGED_V, CUDNN_DATA_INT32, offsets, ONE4, false);
  }
  return r;
}

/* A packed tensor has no batch stride of its own (its layout says 0; the offsets address each
 * sequence): cuDNN is given what a padded tensor of the same rows would have. */
static int64_t batch_stride(at_strides st, int64_t len, int packed)
{
  return packed ? len * st.seq : st.batch;
}

/* Q [B,Nq,T,D]; K as given [B,Nkv,S,D] or transposed Kᵀ [B,Nkv,D,S]; V [B,Nkv,S,D]; O [B,Nq,T,D];
 * packed ones with their ragged offsets (r may be NULL: padded). Paged K/V are the paged loads'
 * (b_paged_kv): out[1] and out[2] are left NULL. */
static void b_qkvo(builder *b, const plan_key *k, int k_transposed, const ragged_tensors *r,
                   cudnnBackendDescriptor_t out[4])
{
  int64_t B = k->batch, H = k->q_heads, Hk = k->kv_heads, T = k->q_len, S = k->kv_len, D = k->head_dim;
  const ragged_tensors none = {0};
  if (!r) r = &none;
  const int64_t qb = batch_stride(k->q, T, k->q_ragged), ob = batch_stride(k->o, T, k->q_ragged);
  const int64_t kb = batch_stride(k->k, S, k->kv_ragged), vb = batch_stride(k->v, S, k->kv_ragged);
  out[0] = b_tensor_at(b, UID_Q, b->io, (int64_t[4]){B, H, T, D}, (int64_t[4]){qb, k->q.head, k->q.seq, 1}, false,
                       r->off_q);
  out[3] = b_tensor_at(b, UID_O, b->io, (int64_t[4]){B, H, T, D}, (int64_t[4]){ob, k->o.head, k->o.seq, 1}, false,
                       r->off_o);
  out[1] = out[2] = NULL;
  if (k->page_size) return;
  if (k_transposed)
    out[1] = b_tensor_at(b, UID_K, b->io, (int64_t[4]){B, Hk, D, S}, (int64_t[4]){kb, k->k.head, 1, k->k.seq}, false,
                         r->off_k);
  else
    out[1] = b_tensor_at(b, UID_K, b->io, (int64_t[4]){B, Hk, S, D}, (int64_t[4]){kb, k->k.head, k->k.seq, 1}, false,
                         r->off_k);
  out[2] = b_tensor_at(b, UID_V, b->io, (int64_t[4]){B, Hk, S, D}, (int64_t[4]){vb, k->v.head, k->v.seq, 1}, false,
                       r->off_v);
}

#if HEADERS_HAVE_PAGED
/* y (virtual, dense) = the pool container read through table for lengths seq_kv: cuDNN's paged
 * cache load, which cudnn-frontend places right before the GEMM that reads K (as Kᵀ) or V. */
static void b_paged_load(builder *b, cudnnBackendDescriptor_t container, cudnnBackendDescriptor_t table,
                         cudnnBackendDescriptor_t seq_kv, cudnnBackendDescriptor_t y)
{
  if (!ok(b)) return;
  cudnnBackendDescriptor_t op = B_CREATE(b, CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR);
  B_SET(b, op, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &container);
  B_SET(b, op, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &table);
  B_SET(b, op, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &seq_kv);
  B_SET(b, op, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  B_FINALIZE(b, op, "paged cache load operation");
  b_add_op(b, op);
}

/* Kᵀ [B,Nkv,D,S] and V [B,Nkv,S,D] (S = max_pages x page size, virtual) loaded from the pools
 * [num_pages, Nkv, page, D] (the vLLM layout [num_pages, page, Nkv, D] by its strides: the
 * layout's batch stride is the page stride) through the block table [B,1,max_pages,1], given
 * twice (one table tensor per load, as cudnn-frontend builds them). */
static void b_paged_kv(builder *b, const plan_key *k, const ragged_tensors *r, cudnnBackendDescriptor_t *kt,
                       cudnnBackendDescriptor_t *v)
{
  const int64_t B = k->batch, Hk = k->kv_heads, D = k->head_dim, P = k->page_size, M = k->max_pages, S = M * P;
  const int64_t table_dims[4] = {B, 1, M, 1}, table_str[4] = {M, M, 1, 1};
  cudnnBackendDescriptor_t k_pool = b_tensor(b, UID_K, b->io, (int64_t[4]){PAGED_CONTAINER_PAGES, Hk, P, D},
                                             (int64_t[4]){k->k.batch, k->k.head, k->k.seq, 1}, false);
  cudnnBackendDescriptor_t v_pool = b_tensor(b, UID_V, b->io, (int64_t[4]){PAGED_CONTAINER_PAGES, Hk, P, D},
                                             (int64_t[4]){k->v.batch, k->v.head, k->v.seq, 1}, false);
  cudnnBackendDescriptor_t k_table = b_tensor(b, UID_PAGE_TABLE_K, CUDNN_DATA_INT32, table_dims, table_str, false);
  cudnnBackendDescriptor_t v_table = b_tensor(b, UID_PAGE_TABLE_V, CUDNN_DATA_INT32, table_dims, table_str, false);
  *kt = b_virtual(b, b->io, (int64_t[4]){B, Hk, D, S}, (int64_t[4]){Hk * D * S, D * S, 1, D});
  *v = b_virtual(b, b->io, (int64_t[4]){B, Hk, S, D}, (int64_t[4]){Hk * S * D, S * D, D, 1});
  b_paged_load(b, k_pool, k_table, r->seq_kv, *kt);
  b_paged_load(b, v_pool, v_table, r->seq_kv, *v);
}
#endif

/* y = x · scalar (a fresh virtual fp32 tensor shaped like the score matrix or like dims). */
static cudnnBackendDescriptor_t b_mul(builder *b, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t scalar,
                                      const int64_t dims[4], const int64_t strides[4])
{
  cudnnBackendDescriptor_t y = b_virtual(b, CUDNN_DATA_FLOAT, dims, strides);
  b_pointwise(b, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, x, scalar, NULL, y, -1);
  return y;
}

/* The -inf that masked scores become, one by-value scalar however many masks use it. */
static cudnnBackendDescriptor_t b_mask_fill(builder *b, size_t version)
{
  /* cuDNN before 9.10 wanted the lowest finite float rather than -inf as the fill */
  b->e->neg_inf = version >= 91000 ? -INFINITY : -FLT_MAX;
  return b_scalar(b, UID_NEG_INF, CUDNN_DATA_FLOAT, true);
}

/* The padding mask of the ragged graph, as cudnn-frontend's padding_mask builds it: keep (i, j)
 * where i < seq_len_q[b] and j < seq_len_kv[b] (GEN_INDEX rows and columns, CMP_LT against the
 * [B,1,1,1] lengths broadcast, LOGICAL_AND), else -inf (BINARY_SELECT). */
static cudnnBackendDescriptor_t b_padding_mask(builder *b, const sdpa_dims *d, cudnnBackendDescriptor_t s,
                                               const ragged_tensors *r, cudnnBackendDescriptor_t fill)
{
  const cudnnDataType_t I = CUDNN_DATA_INT32, L = CUDNN_DATA_BOOLEAN;
  cudnnBackendDescriptor_t row = b_virtual(b, I, d->s, d->s_str), col = b_virtual(b, I, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_GEN_INDEX, I, s, NULL, NULL, row, 2);
  b_pointwise(b, CUDNN_POINTWISE_GEN_INDEX, I, s, NULL, NULL, col, 3);
  cudnnBackendDescriptor_t row_in = b_virtual(b, L, d->s, d->s_str), col_in = b_virtual(b, L, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_CMP_LT, L, row, r->seq_q, NULL, row_in, -1);
  b_pointwise(b, CUDNN_POINTWISE_CMP_LT, L, col, r->seq_kv, NULL, col_in, -1);
  cudnnBackendDescriptor_t keep = b_virtual(b, L, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_LOGICAL_AND, L, row_in, col_in, NULL, keep, -1);
  cudnnBackendDescriptor_t masked = b_virtual(b, CUDNN_DATA_FLOAT, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, fill, keep, masked, -1);
  return masked;
}

/* Causal masks, as the frontend's diagonal-band node lowers them for cuDNN < 9.21:
 * keep (i, j) where row' >= j with row' = i (top-left) or i + S - T (bottom-right), else -inf.
 * In the ragged graph S and T are each sequence's lengths (r's device tensors); in the padded
 * graphs the shape's, by value. */
static cudnnBackendDescriptor_t b_causal(builder *b, const plan_key *k, const sdpa_dims *d,
                                         cudnnBackendDescriptor_t s, const ragged_tensors *r,
                                         cudnnBackendDescriptor_t fill)
{
  cudnnBackendDescriptor_t row = b_virtual(b, CUDNN_DATA_INT32, d->s, d->s_str);
  cudnnBackendDescriptor_t col = b_virtual(b, CUDNN_DATA_INT32, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, row, 2);
  b_pointwise(b, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, col, 3);
  if (k->mask == AT_MASK_CAUSAL_BR) {
    cudnnBackendDescriptor_t skv = r->seq_kv, sq = r->seq_q;
    if (!r->seq_q) {
      b->e->seq_kv = k->kv_len;
      b->e->seq_q = k->q_len;
      skv = b_scalar(b, UID_SEQ_KV, CUDNN_DATA_INT32, true);
      sq = b_scalar(b, UID_SEQ_Q, CUDNN_DATA_INT32, true);
    }
    cudnnBackendDescriptor_t r1 = b_virtual(b, CUDNN_DATA_INT32, d->s, d->s_str);
    cudnnBackendDescriptor_t r2 = b_virtual(b, CUDNN_DATA_INT32, d->s, d->s_str);
    b_pointwise(b, CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, row, skv, NULL, r1, -1);
    b_pointwise(b, CUDNN_POINTWISE_SUB, CUDNN_DATA_INT32, r1, sq, NULL, r2, -1);
    row = r2;
  }
  cudnnBackendDescriptor_t keep = b_virtual(b, CUDNN_DATA_BOOLEAN, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep, -1);
  cudnnBackendDescriptor_t masked = b_virtual(b, CUDNN_DATA_FLOAT, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, fill, keep, masked, -1);
  return masked;
}

/* Softmax over the last axis with the stats branch; returns P in p_dtype. */
static cudnnBackendDescriptor_t b_softmax(builder *b, const plan_key *k, const sdpa_dims *d,
                                          cudnnBackendDescriptor_t s, cudnnDataType_t p_dtype)
{
  const cudnnDataType_t F = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t m = b_virtual(b, F, d->row, d->row_str);
  b_reduction(b, CUDNN_REDUCE_TENSOR_MAX, s, m);
  cudnnBackendDescriptor_t x = b_virtual(b, F, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_SUB, F, s, m, NULL, x, -1);
  cudnnBackendDescriptor_t e = b_virtual(b, F, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_EXP, F, x, NULL, NULL, e, -1);
  cudnnBackendDescriptor_t z = b_virtual(b, F, d->row, d->row_str);
  b_reduction(b, CUDNN_REDUCE_TENSOR_ADD, e, z);
  cudnnBackendDescriptor_t log_z = b_virtual(b, F, d->row, d->row_str);
  b_pointwise(b, CUDNN_POINTWISE_LOG, F, z, NULL, NULL, log_z, -1);
  /* stats = max + log(sum): the natural-log LSE of the scaled scores; built even when not
   * wanted, since cuDNN's fused pattern includes it */
  cudnnBackendDescriptor_t stats = k->with_lse ? b_tensor(b, UID_STATS, F, d->row, d->row_str, false)
                                               : b_virtual(b, F, d->row, d->row_str);
  b_pointwise(b, CUDNN_POINTWISE_ADD, F, m, log_z, NULL, stats, -1);
  cudnnBackendDescriptor_t p = b_virtual(b, p_dtype, d->s, d->s_str);
  b_pointwise(b, CUDNN_POINTWISE_DIV, F, e, z, NULL, p, -1);
  return p;
}

/* The composite graph; with packed tensors (k->q_ragged) the ragged one: the GEMMs sized per
 * sequence by the lengths (Q·Kᵀ: M = seq_len_q, N = seq_len_kv; P·V: M = seq_len_q,
 * K = seq_len_kv), the padding mask before the causal one, as cudnn-frontend orders them. */
static void build_composite(builder *b, const plan_key *k, size_t version)
{
  const cudnnDataType_t F = CUDNN_DATA_FLOAT;
  const int fp8 = k->path == RT_CUDNN_PATH_FP8;
  sdpa_dims d = dims_of(k);
  cudnnBackendDescriptor_t t[4];
  const ragged_tensors r = b_ragged_tensors(b, k);
  const int per_seq = per_sequence(k);
  b_qkvo(b, k, 1, &r, t);
#if HEADERS_HAVE_PAGED
  if (k->page_size) b_paged_kv(b, k, &r, &t[1], &t[2]);
#endif
  b->e->attn_scale = k->scale;
  cudnnBackendDescriptor_t scale = b_scalar(b, UID_SCALE, F, true);
  cudnnBackendDescriptor_t fill = per_seq || k->mask != AT_MASK_NONE ? b_mask_fill(b, version) : NULL;
  const gemm_overrides qk_sizes = {r.seq_q, r.seq_kv, NULL}, pv_sizes = {r.seq_q, NULL, r.seq_kv};

  cudnnBackendDescriptor_t s = b_virtual(b, F, d.s, d.s_str);
  b_matmul_sized(b, t[0], t[1], s, per_seq ? &qk_sizes : NULL);
  s = b_mul(b, s, scale, d.s, d.s_str);
  if (fp8) {
    s = b_mul(b, s, b_scalar(b, UID_DESCALE_Q, F, false), d.s, d.s_str);
    s = b_mul(b, s, b_scalar(b, UID_DESCALE_K, F, false), d.s, d.s_str);
  }
  if (per_seq) s = b_padding_mask(b, &d, s, &r, fill);
  if (k->mask != AT_MASK_NONE) s = b_causal(b, k, &d, s, &r, fill);
  /* P must be in the I/O type for f16/bf16 (else NOT_SUPPORTED); FP8 quantizes it below */
  cudnnBackendDescriptor_t p = b_softmax(b, k, &d, s, fp8 ? F : b->io);
  if (!fp8) {
    b_matmul_sized(b, p, t[2], t[3], per_seq ? &pv_sizes : NULL);
    return;
  }
  b_reduction(b, CUDNN_REDUCE_TENSOR_AMAX, p, b_scalar(b, UID_AMAX_S, F, false));
  cudnnBackendDescriptor_t p8 = b_virtual(b, b->io, d.s, d.s_str);
  b_pointwise(b, CUDNN_POINTWISE_MUL, F, p, b_scalar(b, UID_SCALE_S, F, false), NULL, p8, -1);
  int64_t B = k->batch, H = k->q_heads, T = k->q_len, D = k->head_dim;
  int64_t od[4] = {B, H, T, D}, os[4] = {H * T * D, T * D, D, 1};
  cudnnBackendDescriptor_t o = b_virtual(b, F, od, os);
  b_matmul(b, p8, t[2], o);
  o = b_mul(b, o, b_scalar(b, UID_DESCALE_S, F, false), od, os);
  o = b_mul(b, o, b_scalar(b, UID_DESCALE_V, F, false), od, os);
  b_pointwise(b, CUDNN_POINTWISE_MUL, F, o, b_scalar(b, UID_SCALE_O, F, false), NULL, t[3], -1);
  b_reduction(b, CUDNN_REDUCE_TENSOR_AMAX, o, b_scalar(b, UID_AMAX_O, F, false)); /* of O_real */
}

static void build_unified(builder *b, const plan_key *k)
{
  sdpa_dims d = dims_of(k);
  cudnnBackendDescriptor_t t[4], stats = NULL;
  b_qkvo(b, k, 0, NULL, t);
  b->e->attn_scale = k->scale;
  cudnnBackendDescriptor_t scale = b_scalar(b, UID_SCALE, CUDNN_DATA_FLOAT, true);
  if (k->with_lse) stats = b_tensor(b, UID_STATS, CUDNN_DATA_FLOAT, d.row, d.row_str, false);
  cudnnBackendDescriptor_t op = B_CREATE(b, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR);
  B_SET(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[0]);
  B_SET(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[1]);
  B_SET(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[2]);
  B_SET(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[3]);
  if (stats) B_SET(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &stats);
  B_SET(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &scale);
  B_FINALIZE(b, op, "SDPA_FWD operation");
  b_add_op(b, op);
}

/* ---- engine choice ------------------------------------------------------------------------ */

/* Fill info->engine and info->knobs from an engine config. Only descriptive, so a failure here
 * leaves "?" rather than failing the plan. */
static void describe_config(cudnnBackendDescriptor_t cfg, rt_cudnn_plan_info *info)
{
  const rt_cudnn_api *api = rt_cudnn();
  cudnnBackendDescriptor_t engine = NULL, knobs[CUDNN_KNOB_TYPE_COUNTS] = {0};
  int64_t n = 0;
  info->engine = -1;
  snprintf(info->knobs, sizeof info->knobs, "?");
  if (api->cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) == CUDNN_STATUS_SUCCESS &&
      api->cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                    &engine) == CUDNN_STATUS_SUCCESS &&
      api->cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                    &info->engine) != CUDNN_STATUS_SUCCESS)
    info->engine = -1;
  destroy_desc(engine);

  int n_made = 0;
  while (n_made < CUDNN_KNOB_TYPE_COUNTS &&
         api->cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &knobs[n_made]) ==
             CUDNN_STATUS_SUCCESS)
    n_made++;
  if (api->cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                    n_made, &n, knobs) == CUDNN_STATUS_SUCCESS) {
    size_t used = 0;
    info->knobs[0] = '\0';
    for (int64_t i = 0; i < n && i < n_made; i++) {
      cudnnBackendKnobType_t type;
      int64_t value = 0, got = 0;
      if (api->cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1,
                                        &got, &type) != CUDNN_STATUS_SUCCESS ||
          api->cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &got,
                                        &value) != CUDNN_STATUS_SUCCESS)
        continue;
      const char *name = knob_name((int)type);
      char item[48];
      if (name) snprintf(item, sizeof item, "%s%s=%lld", used ? " " : "", name, (long long)value);
      else snprintf(item, sizeof item, "%sk%d=%lld", used ? " " : "", (int)type, (long long)value);
      if (used + strlen(item) + 1 > sizeof info->knobs) break;
      memcpy(info->knobs + used, item, strlen(item) + 1);
      used += strlen(item);
    }
  }
  for (int i = 0; i < n_made; i++) destroy_desc(knobs[i]);
}

/* Heuristics mode A, then FALLBACK; the first engine config whose plan finalizes wins. */
static void choose_plan(builder *b, cudnnHandle_t handle, cudnnBackendDescriptor_t graph)
{
  const rt_cudnn_api *api = rt_cudnn();
  const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  char last_reason[2048] = "the heuristics offered no engine config";
  int tried = 0;
  for (int m = 0; m < 2 && ok(b); m++) {
    cudnnBackendDescriptor_t heur = B_CREATE(b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    B_SET(b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    B_SET(b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]);
    if (!ok(b)) return;
    at_status rc = RT_CUDNN(api->cudnnBackendFinalize(heur));
    int64_t n = 0;
    if (rc == AT_OK)
      rc = RT_CUDNN(api->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL));
    if (rc != AT_OK) {
      snprintf(last_reason, sizeof last_reason, "%s", at_last_error());
      continue;
    }
    if (n == 0) {
      char why[1024];
      rt_cudnn_last_reason(why, sizeof why);
      snprintf(last_reason, sizeof last_reason, "heuristics mode %s offered no engine config%s%s",
               m == 0 ? "A" : "FALLBACK", why[0] ? ": " : "", why);
      continue;
    }
    if (n > MAX_CONFIGS) n = MAX_CONFIGS;
    cudnnBackendDescriptor_t cfgs[MAX_CONFIGS];
    for (int64_t i = 0; i < n; i++) cfgs[i] = B_CREATE(b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    int64_t got = 0;
    b_check(b, api->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n,
                                             &got, cfgs),
            "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)", __LINE__);
    if (ok(b) && got == 0) {
      char why[1536];
      rt_cudnn_last_reason(why, sizeof why);
      snprintf(last_reason, sizeof last_reason, "none of the %lld engine configs of heuristics mode %s is viable%s%s",
               (long long)n, m == 0 ? "A" : "FALLBACK", why[0] ? ": " : "", why);
    }
    for (int64_t i = 0; i < got && i < n && ok(b); i++) {
      cudnnBackendDescriptor_t plan = NULL;
      b_check(b, api->cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan),
              "cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)", __LINE__);
      if (!ok(b)) return;
      tried++;
      rc = RT_CUDNN(api->cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                                  &handle));
      if (rc == AT_OK)
        rc = RT_CUDNN(api->cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]));
      if (rc == AT_OK) rc = RT_CUDNN(api->cudnnBackendFinalize(plan));
      if (rc != AT_OK) {
        snprintf(last_reason, sizeof last_reason, "%s", at_last_error());
        destroy_desc(plan);
        continue;
      }
      if (!entry_own(b->e, plan)) {
        destroy_desc(plan);
        b->rc = at_fail(AT_ERR_NOMEM, "no memory to keep cuDNN descriptors");
        return;
      }
      b->e->plan = plan;
      b->e->info.n_configs = (int)got;
      b->e->info.config_index = (int)i;
      b_check(b, api->cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                               &n, &b->e->info.workspace_bytes),
              "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)", __LINE__);
      describe_config(cfgs[i], &b->e->info);
      return;
    }
  }
  if (ok(b) && tried == 0) b->rc = at_fail(AT_ERR_UNSUPPORTED, "cuDNN cannot run this attention: %s", last_reason);
  else if (ok(b))
    b->rc = at_fail(AT_ERR_UNSUPPORTED, "cuDNN cannot run this attention: none of %d engine configs finalized; "
                    "the last: %s", tried, last_reason);
}

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static at_status build_graph_and_plan(rt_cudnn_sdpa *cd, const plan_key *k, plan_entry *e)
{
  builder b;
  memset(&b, 0, sizeof b);
  b.e = e;
  b.next_virtual_uid = UID_VIRTUAL;
  b.io = cudnn_dtype(k->dtype);
  if (k->path == RT_CUDNN_PATH_UNIFIED) build_unified(&b, k);
  else build_composite(&b, k, cd->version);
  cudnnBackendDescriptor_t graph = B_CREATE(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  B_SET(&b, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, b.n_ops, b.ops);
  B_SET(&b, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &cd->handle);
  B_FINALIZE(&b, graph, "operation graph");
  choose_plan(&b, cd->handle, graph);
  return b.rc;
}

/* Build the plan for k. A refusal (AT_ERR_UNSUPPORTED) is returned as an entry too, holding the
 * message, so that the cache answers the next ask at once. */
static at_status build_plan(rt_cudnn_sdpa *cd, const plan_key *k, plan_entry **out)
{
  double t0 = now_ms();
  plan_entry *e = calloc(1, sizeof *e);
  if (!e) return at_fail(AT_ERR_NOMEM, "no memory for a cuDNN plan");
  e->key = *k;
  at_status rc = build_graph_and_plan(cd, k, e);
  if (rc != AT_OK)
    rc = at_fail_context(rc, "cuDNN %s plan for B=%d T=%d S=%d Nq=%d Nkv=%d D=%d %s %s%s",
                         rt_cudnn_path_name((rt_cudnn_path)k->path), k->batch, k->q_len, k->kv_len, k->q_heads,
                         k->kv_heads, k->head_dim, at_dtype_name((at_dtype)k->dtype), at_mask_name((at_mask)k->mask),
                         k->page_size ? " (padded Q, paged K/V)"
                         : !k->q_ragged ? ""
                         : k->kv_ragged ? " (ragged Q and K/V)"
                                        : " (ragged Q, padded K/V)");
  if (rc == AT_ERR_UNSUPPORTED) {
    /* keep the refusal: descriptors go, the message stays */
    for (int i = e->n_descs - 1; i >= 0; i--) destroy_desc(e->descs[i]);
    e->n_descs = 0;
    e->plan = NULL;
    e->refusal = strdup(at_last_error());
    if (!e->refusal) rc = at_fail(AT_ERR_NOMEM, "no memory for a cuDNN refusal");
  }
  if (rc != AT_OK && !e->refusal) {
    entry_free(e);
    return rc;
  }
  if (rc == AT_OK) {
    e->info.path = (rt_cudnn_path)k->path;
    e->info.cudnn_version = cd->version;
    e->info.build_ms = now_ms() - t0;
    cd->builds++;
  }
  *out = e;
  return rc;
}

/* ---- requests ----------------------------------------------------------------------------- */


/* Positive strides; a packed tensor's batch stride is 0 (at_serving_layout), the offsets
 * address its sequences. */
static at_status check_strides(const char *name, at_strides st, int packed)
{
  if ((packed ? st.batch != 0 : st.batch <= 0) || st.seq <= 0 || st.head <= 0)
    return at_fail(AT_ERR_INVALID, "%s strides (batch %lld, seq %lld, head %lld) must be positive%s", name,
                   (long long)st.batch, (long long)st.seq, (long long)st.head,
                   packed ? " (batch 0 for a packed tensor)" : "");
  return AT_OK;
}

/* Validate a request and turn it into a plan key. Refusals that are cuDNN's own limits (not
 * argument errors) are AT_ERR_UNSUPPORTED. q_ragged, kv_ragged: the ragged graph's packed
 * tensors; page_size, max_pages: the paged graph's pools and block table (make_serving_key has
 * checked them). */
static at_status make_key_for(const rt_cudnn_sdpa *cd, const at_shape *s, const at_tensors *t,
                              const rt_cudnn_fp8_args *fp8, int q_ragged, int kv_ragged, int page_size, int max_pages,
                              plan_key *k)
{
  const int per_seq = q_ragged || page_size;
  at_status rc;
  if ((rc = at_shape_check(s)) != AT_OK) return rc;
  if (!t) return at_fail(AT_ERR_INVALID, "cuDNN SDPA: tensors are NULL");
  if (s->dtype == AT_DTYPE_F32)
    return at_fail(AT_ERR_UNSUPPORTED, "cuDNN SDPA takes f16, bf16, e4m3 or e5m2 inputs (got f32)");
  if (at_shape_kv_dtype(s) != s->dtype)
    return at_fail(AT_ERR_UNSUPPORTED, "cuDNN SDPA here takes Q, K and V in one dtype (got %s Q with %s K/V: an FP8 "
                   "KV cache runs on the decode family)", at_dtype_name(s->dtype), at_dtype_name(at_shape_kv_dtype(s)));
  if (at_dtype_is_fp8(s->dtype) != (fp8 != NULL))
    return at_fail(AT_ERR_INVALID, "cuDNN SDPA: %s inputs %s FP8 scaling arguments", at_dtype_name(s->dtype),
                   fp8 ? "take no" : "need");
  rt_cudnn_path path = cd->path;
  if (path == RT_CUDNN_PATH_AUTO) {
    /* as cudnn-frontend chooses: the fused op where it covers the request (measured a few
     * percent faster on the H200 with 9.19), else the composite graph */
    if (at_dtype_is_fp8(s->dtype)) path = RT_CUDNN_PATH_FP8;
    else if (per_seq) path = RT_CUDNN_PATH_COMPOSITE; /* the only graph with ragged offsets or pages here */
    else if (s->mask == AT_MASK_NONE && cd->version >= 91301) path = RT_CUDNN_PATH_UNIFIED;
    else path = RT_CUDNN_PATH_COMPOSITE;
  }
  if (at_dtype_is_fp8(s->dtype) != (path == RT_CUDNN_PATH_FP8))
    return at_fail(AT_ERR_INVALID, "cuDNN path '%s' does not take %s inputs", rt_cudnn_path_name(path),
                   at_dtype_name(s->dtype));
  if (per_seq && path != RT_CUDNN_PATH_COMPOSITE)
    return at_fail(AT_ERR_UNSUPPORTED, "unsupported: attntune's %s cuDNN graph is the composite one (asked for "
                   "the %s path)", q_ragged ? "ragged" : "paged", rt_cudnn_path_name(path));
  /* With the padding mask (ragged graph) cuDNN takes T > S; the rows that see no key are
   * written by the fix-up kernel afterwards (runtime/cudnn_ragged.h). */
  if (!per_seq && s->mask == AT_MASK_CAUSAL_BR && s->q_len > s->kv_len)
    return at_fail(AT_ERR_UNSUPPORTED, "cuDNN's bottom-right causal mask needs T <= S (got T=%d, S=%d): "
                   "rows without a visible key are not supported", s->q_len, s->kv_len);
  if (path == RT_CUDNN_PATH_UNIFIED && cd->version < 91301)
    return at_fail(AT_ERR_UNSUPPORTED, "the fused SDPA_FWD operation needs cuDNN >= 9.13.1 (loaded %zu)",
                   cd->version);
  if (path == RT_CUDNN_PATH_UNIFIED && s->mask != AT_MASK_NONE)
    return at_fail(AT_ERR_UNSUPPORTED, "the fused SDPA_FWD operation takes no mask before cuDNN 9.21 "
                   "(asked for %s); use the composite path", at_mask_name(s->mask));
  if ((rc = check_strides("q", t->q_stride, q_ragged)) != AT_OK ||
      (rc = check_strides("k", t->k_stride, kv_ragged)) != AT_OK ||
      (rc = check_strides("v", t->v_stride, kv_ragged)) != AT_OK ||
      (rc = check_strides("o", t->o_stride, q_ragged)) != AT_OK)
    return rc;
  memset(k, 0, sizeof *k);
  k->batch = s->batch, k->q_len = s->q_len, k->kv_len = s->kv_len;
  k->q_heads = s->q_heads, k->kv_heads = s->kv_heads, k->head_dim = s->head_dim;
  k->dtype = s->dtype, k->mask = s->mask, k->with_lse = s->with_lse != 0, k->path = path;
  k->q_ragged = q_ragged, k->kv_ragged = kv_ragged;
  k->page_size = page_size, k->max_pages = max_pages;
  if (page_size) k->kv_len = page_size * max_pages; /* the dense K/V the paged loads give cuDNN */
  k->scale = at_shape_scale(s);
  k->q = t->q_stride, k->k = t->k_stride, k->v = t->v_stride, k->o = t->o_stride;
  return AT_OK;
}

static at_status make_key(const rt_cudnn_sdpa *cd, const at_shape *s, const at_tensors *t,
                          const rt_cudnn_fp8_args *fp8, plan_key *k)
{
  return make_key_for(cd, s, t, fp8, 0, 0, 0, 0, k);
}

/* The cached plan for k, or a new one (evicting the least recently used when full). */
static at_status lookup(rt_cudnn_sdpa *cd, const plan_key *k, plan_entry **out)
{
  int free_slot = -1, oldest = 0;
  for (int i = 0; i < PLAN_CACHE_CAP; i++) {
    plan_entry *e = cd->cache[i];
    if (!e) {
      if (free_slot < 0) free_slot = i;
      continue;
    }
    if (memcmp(&e->key, k, sizeof *k) == 0) {
      e->last_use = ++cd->clock;
      if (e->refusal) return at_fail(AT_ERR_UNSUPPORTED, "%s", e->refusal);
      *out = e;
      return AT_OK;
    }
    if (cd->cache[oldest] == NULL || e->last_use < cd->cache[oldest]->last_use) oldest = i;
  }
  plan_entry *e = NULL;
  at_status rc = build_plan(cd, k, &e);
  if (!e) return rc;
  int slot = free_slot >= 0 ? free_slot : oldest;
  if (cd->cache[slot]) {
    if (cd->bound == cd->cache[slot]) cd->bound = NULL, cd->bound_pack = NULL;
    if (cd->last == cd->cache[slot]) cd->last = NULL;
    entry_free(cd->cache[slot]);
  }
  e->last_use = ++cd->clock;
  cd->cache[slot] = e;
  if (e->refusal) return rc;
  *out = e;
  return AT_OK;
}

/* ---- public API --------------------------------------------------------------------------- */

at_status rt_cudnn_sdpa_create(const rt_ctx *ctx, rt_cudnn_sdpa **out)
{
  at_status rc;
  *out = NULL;
  if ((rc = rt_cudnn_load()) != AT_OK) return rc;
  if ((rc = rt_ctx_bind(ctx)) != AT_OK) return rc;
  rt_cudnn_sdpa *cd = calloc(1, sizeof *cd);
  if (!cd) return at_fail(AT_ERR_NOMEM, "no memory for the cuDNN SDPA state");
  cd->ctx = *ctx;
  if ((rc = rt_cudnn_version(&cd->version, NULL)) != AT_OK ||
      (rc = RT_CUDNN(rt_cudnn()->cudnnCreate(&cd->handle))) != AT_OK) {
    free(cd);
    return rc;
  }
  *out = cd;
  return AT_OK;
}

void rt_cudnn_sdpa_destroy(rt_cudnn_sdpa *cd)
{
  if (!cd) return;
  /* the handle and the workspace belong to this context; failing to bind leaves them to the
   * context's own teardown */
  if (rt_ctx_bind(&cd->ctx) == AT_OK) {
    for (int i = 0; i < PLAN_CACHE_CAP; i++) entry_free(cd->cache[i]);
    rt_free(cd->workspace);
    rt_free(cd->ragged_scratch);
    rt_cudnn_ragged_kernels_unload(&cd->ragged_kernels);
    (void)RT_CUDNN(rt_cudnn()->cudnnDestroy(cd->handle));
  }
  free(cd);
}

void rt_cudnn_sdpa_set_path(rt_cudnn_sdpa *cd, rt_cudnn_path path) { cd->path = path; }

at_status rt_cudnn_sdpa_plan(rt_cudnn_sdpa *cd, const at_shape *shape, const at_tensors *t,
                             const rt_cudnn_fp8_args *fp8, rt_cudnn_plan_info *info)
{
  plan_key k;
  plan_entry *e = NULL;
  at_status rc;
  if ((rc = make_key(cd, shape, t, fp8, &k)) != AT_OK) return rc;
  if ((rc = rt_ctx_bind(&cd->ctx)) != AT_OK) return rc;
  rc = lookup(cd, &k, &e);
  if (rc == AT_ERR_UNSUPPORTED && cd->path == RT_CUDNN_PATH_AUTO && k.path == RT_CUDNN_PATH_UNIFIED) {
    k.path = RT_CUDNN_PATH_COMPOSITE; /* the fused op refused: the graph may still run */
    rc = lookup(cd, &k, &e);
  }
  if (rc != AT_OK) return rc;
  cd->last = e;
  if (info) *info = e->info;
  return AT_OK;
}

static at_status ensure_workspace(rt_cudnn_sdpa *cd, int64_t bytes)
{
  if ((size_t)bytes <= cd->workspace_bytes) return AT_OK;
  /* earlier launches may still use the old workspace */
  at_status rc = rt_ctx_sync(&cd->ctx);
  if (rc != AT_OK) return rc;
  rt_free(cd->workspace);
  cd->workspace = 0;
  cd->workspace_bytes = 0;
  if ((rc = rt_alloc(&cd->workspace, (size_t)bytes)) != AT_OK)
    return at_fail_context(rc, "cuDNN workspace of %lld bytes", (long long)bytes);
  cd->workspace_bytes = (size_t)bytes;
  return AT_OK;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static void *dev(CUdeviceptr p) { return (void *)(uintptr_t)p; }

/* The caller's pointer for each UID the graph uses; host addresses for by-value scalars. meta:
 * the ragged graph's metadata (then its stats, not t->lse, are the stats tensor), else NULL. */
static at_status gather_pointers(plan_entry *e, const at_tensors *t, const rt_cudnn_fp8_args *f,
                                 const rt_cudnn_ragged_meta *meta, const void *page_table, void *ptrs[UID_END])
{
  static const char *const names[UID_END] = {
      [UID_Q] = "q", [UID_K] = "k", [UID_V] = "v", [UID_O] = "o", [UID_STATS] = "lse",
      [UID_DESCALE_Q] = "descale_q", [UID_DESCALE_K] = "descale_k", [UID_DESCALE_V] = "descale_v",
      [UID_DESCALE_S] = "descale_s", [UID_SCALE_S] = "scale_s", [UID_SCALE_O] = "scale_o",
      [UID_AMAX_S] = "amax_s", [UID_AMAX_O] = "amax_o", [UID_SEQ_LEN_Q] = "seq_len_q",
      [UID_SEQ_LEN_KV] = "seq_len_kv", [UID_RAGGED_Q] = "q offsets", [UID_RAGGED_K] = "k offsets",
      [UID_RAGGED_V] = "v offsets", [UID_RAGGED_O] = "o offsets", [UID_PAGE_TABLE_K] = "block_table",
      [UID_PAGE_TABLE_V] = "block_table"};
  memset(ptrs, 0, UID_END * sizeof *ptrs);
  ptrs[UID_Q] = (void *)t->q, ptrs[UID_K] = (void *)t->k, ptrs[UID_V] = (void *)t->v;
  ptrs[UID_O] = t->o, ptrs[UID_STATS] = t->lse;
  if (meta) {
    ptrs[UID_STATS] = dev(meta->stats);
    ptrs[UID_SEQ_LEN_Q] = dev(meta->seq_q), ptrs[UID_SEQ_LEN_KV] = dev(meta->seq_kv);
    ptrs[UID_RAGGED_Q] = dev(meta->q_off), ptrs[UID_RAGGED_K] = dev(meta->k_off);
    ptrs[UID_RAGGED_V] = dev(meta->v_off), ptrs[UID_RAGGED_O] = dev(meta->o_off);
  }
  ptrs[UID_PAGE_TABLE_K] = ptrs[UID_PAGE_TABLE_V] = (void *)(uintptr_t)page_table;
  ptrs[UID_SCALE] = &e->attn_scale, ptrs[UID_NEG_INF] = &e->neg_inf;
  ptrs[UID_SEQ_KV] = &e->seq_kv, ptrs[UID_SEQ_Q] = &e->seq_q;
  if (f) {
    ptrs[UID_DESCALE_Q] = (void *)(uintptr_t)f->descale_q, ptrs[UID_DESCALE_K] = (void *)(uintptr_t)f->descale_k;
    ptrs[UID_DESCALE_V] = (void *)(uintptr_t)f->descale_v, ptrs[UID_DESCALE_S] = (void *)(uintptr_t)f->descale_s;
    ptrs[UID_SCALE_S] = (void *)(uintptr_t)f->scale_s, ptrs[UID_SCALE_O] = (void *)(uintptr_t)f->scale_o;
    ptrs[UID_AMAX_S] = (void *)(uintptr_t)f->amax_s, ptrs[UID_AMAX_O] = (void *)(uintptr_t)f->amax_o;
  }
  for (int uid = 1; uid < UID_END; uid++) {
    if (!(e->uid_used & (1u << uid)) || !names[uid]) continue;
    if (!ptrs[uid]) return at_fail(AT_ERR_INVALID, "cuDNN SDPA: %s pointer is NULL", names[uid]);
    if (!aligned16(ptrs[uid]))
      return at_fail(AT_ERR_INVALID, "cuDNN SDPA: %s pointer %p is not 16-byte aligned", names[uid], ptrs[uid]);
  }
  return AT_OK;
}

/* The variant pack for these pointers: a kept one, or a new one in the next slot. */
static at_status find_pack(rt_cudnn_sdpa *cd, plan_entry *e, void *const ptrs[UID_END],
                           cudnnBackendDescriptor_t *out)
{
  int64_t uids[UID_END];
  void *data[UID_END];
  int n = 0;
  for (int uid = 1; uid < UID_END; uid++)
    if (e->uid_used & (1u << uid)) uids[n] = uid, data[n++] = ptrs[uid];
  void *ws = (void *)(uintptr_t)cd->workspace;
  for (int i = 0; i < PACKS_PER_PLAN; i++) {
    pack_slot *p = &e->packs[i];
    if (p->desc && p->n == n && p->workspace == ws && memcmp(p->ptrs, data, n * sizeof *data) == 0) {
      *out = p->desc;
      return AT_OK;
    }
  }
  const rt_cudnn_api *api = rt_cudnn();
  cudnnBackendDescriptor_t pack = NULL;
  at_status rc = RT_CUDNN(api->cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
  if (rc == AT_OK)
    rc = RT_CUDNN(api->cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids));
  if (rc == AT_OK)
    rc = RT_CUDNN(api->cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                                n, data));
  if (rc == AT_OK)
    rc = RT_CUDNN(api->cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                                &ws));
  if (rc == AT_OK) rc = RT_CUDNN(api->cudnnBackendFinalize(pack));
  if (rc != AT_OK) {
    destroy_desc(pack);
    return rc;
  }
  pack_slot *p = &e->packs[e->next_pack];
  e->next_pack = (e->next_pack + 1) % PACKS_PER_PLAN;
  destroy_desc(p->desc);
  p->desc = pack;
  p->n = n;
  memcpy(p->ptrs, data, n * sizeof *data);
  p->workspace = ws;
  *out = pack;
  return AT_OK;
}

at_status rt_cudnn_sdpa_bind(rt_cudnn_sdpa *cd, const at_shape *shape, const at_tensors *t,
                             const rt_cudnn_fp8_args *fp8)
{
  void *ptrs[UID_END];
  cudnnBackendDescriptor_t pack = NULL;
  at_status rc;
  cd->bound = NULL;
  cd->bound_pack = NULL;
  if ((rc = rt_cudnn_sdpa_plan(cd, shape, t, fp8, NULL)) != AT_OK) return rc;
  plan_entry *e = cd->last;
  if (shape->with_lse && !t->lse) return at_fail(AT_ERR_INVALID, "cuDNN SDPA: shape asks for lse but lse is NULL");
  if ((rc = gather_pointers(e, t, fp8, NULL, NULL, ptrs)) != AT_OK) return rc;
  if ((rc = ensure_workspace(cd, e->info.workspace_bytes)) != AT_OK) return rc;
  if ((rc = find_pack(cd, e, ptrs, &pack)) != AT_OK) return rc;
  cd->bound = e;
  cd->bound_pack = pack;
  return AT_OK;
}

at_status rt_cudnn_sdpa_launch(rt_cudnn_sdpa *cd, CUstream stream)
{
  const rt_cudnn_api *api = rt_cudnn();
  plan_entry *e = cd->bound;
  at_status rc;
  if (!e) return at_fail(AT_ERR_INVALID, "cuDNN SDPA: launch without a successful bind");
  if ((rc = RT_CUDNN(api->cudnnSetStream(cd->handle, (cudaStream_t)stream))) != AT_OK) return rc;
  return RT_CUDNN(api->cudnnBackendExecute(cd->handle, e->plan, cd->bound_pack));
}

at_status rt_cudnn_sdpa_run(rt_cudnn_sdpa *cd, const at_shape *shape, const at_tensors *t,
                            const rt_cudnn_fp8_args *fp8, CUstream stream)
{
  at_status rc = rt_cudnn_sdpa_bind(cd, shape, t, fp8);
  return rc != AT_OK ? rc : rt_cudnn_sdpa_launch(cd, stream);
}

at_status rt_cudnn_sdpa_plan_info(const rt_cudnn_sdpa *cd, rt_cudnn_plan_info *info)
{
  if (!cd->last) return at_fail(AT_ERR_INVALID, "cuDNN SDPA: no plan yet");
  *info = cd->last->info;
  return AT_OK;
}

void rt_cudnn_plan_info_format(const rt_cudnn_plan_info *info, char *out, size_t cap)
{
  size_t v = info->cudnn_version;
  snprintf(out, cap, "cudnn %zu.%zu.%zu %s eng%lld {%s} ws %lld B, config %d/%d, built in %.0f ms",
           v / 10000, v / 100 % 100, v % 100, rt_cudnn_path_name(info->path), (long long)info->engine,
           info->knobs, (long long)info->workspace_bytes, info->config_index + 1, info->n_configs, info->build_ms);
}

long rt_cudnn_sdpa_builds(const rt_cudnn_sdpa *cd) { return cd->builds; }

/* ---- the ragged graph --------------------------------------------------------------------- */

int rt_cudnn_serving_supported(const at_shape *s, const at_serving_layout *l, char *why, size_t cap)
{
  char what[96];
  if (cap) why[0] = '\0';
  if (!l || at_serving_is_padded(l)) return 1;
  at_serving_layout_describe(l, what, sizeof what);
  if (l->kv_layout == AT_SEQ_PAGED && l->q_layout == AT_SEQ_RAGGED)
    snprintf(why, cap, "%s: attntune's paged cuDNN graph takes padded Q; ragged Q with page tables is not built "
             "yet", what);
  else if (l->kv_layout == AT_SEQ_PAGED && !HEADERS_HAVE_PAGED)
    snprintf(why, cap, "%s: this build's cuDNN headers (%d) lack the paged cache load", what, (int)CUDNN_VERSION);
  else if (l->q_layout != AT_SEQ_RAGGED && l->kv_layout != AT_SEQ_PAGED)
    snprintf(why, cap, "%s: attntune's ragged cuDNN graph takes ragged Q (with ragged or padded K/V); this "
             "combination's graph is not built yet", what);
  else if (at_shape_kv_dtype(s) != s->dtype)
    snprintf(why, cap, "%s with %s Q and %s K/V: attntune's cuDNN graphs take Q, K and V in one dtype", what,
             at_dtype_name(s->dtype), at_dtype_name(at_shape_kv_dtype(s)));
  else if (s->dtype != AT_DTYPE_F16 && s->dtype != AT_DTYPE_BF16)
    snprintf(why, cap, "%s with %s inputs: attntune's ragged and paged cuDNN graphs take f16 or bf16%s", what,
             at_dtype_name(s->dtype),
             at_dtype_is_fp8(s->dtype) ? " (cuDNN's FP8 attention writes FP8; plans for FP8 inputs write bf16)" : "");
  else
    return 1;
  return 0;
}

/* The plan key of a ragged call: the layout's strides, its packed tensors, and what this build
 * and the loaded cuDNN can do. */
static at_status make_serving_key(const rt_cudnn_sdpa *cd, const at_shape *s, const at_serving_layout *l,
                                  plan_key *k)
{
  char why[256];
  at_status rc;
  if ((rc = at_serving_layout_check(s, l)) != AT_OK) return rc;
  if (!rt_cudnn_serving_supported(s, l, why, sizeof why))
    return at_fail(AT_ERR_UNSUPPORTED, "unsupported: %s", why);
  if (at_serving_is_padded(l))
    return at_fail(AT_ERR_INVALID, "cuDNN ragged plan for padded tensors: use rt_cudnn_sdpa_plan");
  if (!HEADERS_HAVE_RAGGED)
    return at_fail(AT_ERR_UNSUPPORTED, "unsupported: this build's cuDNN headers (%d) lack ragged offsets",
                   (int)CUDNN_VERSION);
  if (cd->version < RAGGED_MIN_VERSION)
    return at_fail(AT_ERR_UNSUPPORTED, "unsupported: cuDNN %zu.%zu.%zu lacks ragged offsets with GQA and per-sequence "
                   "bottom-right masks (attntune's ragged and paged graphs need cuDNN >= 9.6.0)",
                   cd->version / 10000, cd->version / 100 % 100, cd->version % 100);
  at_tensors strides;
  memset(&strides, 0, sizeof strides);
  strides.q_stride = l->strides.q, strides.k_stride = l->strides.k;
  strides.v_stride = l->strides.v, strides.o_stride = l->strides.o;
  const int paged = l->kv_layout == AT_SEQ_PAGED;
  return make_key_for(cd, s, &strides, NULL, l->q_layout == AT_SEQ_RAGGED, l->kv_layout == AT_SEQ_RAGGED,
                      paged ? l->page_size : 0, paged ? l->max_pages_per_seq : 0, k);
}

/* What every run of a ragged plan uses, made at plan time so that runs allocate nothing: the
 * metadata kernels, their scratch, cuDNN's workspace. */
static at_status prepare_ragged_resources(rt_cudnn_sdpa *cd, const at_shape *s, const plan_entry *e)
{
  at_status rc;
  const at_dtype io = s->dtype;
  if (cd->ragged_kernels.module && cd->ragged_kernels.io != io) rt_cudnn_ragged_kernels_unload(&cd->ragged_kernels);
  if (!cd->ragged_kernels.module &&
      (rc = rt_cudnn_ragged_kernels_load(cd->ctx.arch, io, &cd->ragged_kernels)) != AT_OK)
    return rc;
  const size_t bytes = rt_cudnn_ragged_meta_bytes(s);
  if (bytes > cd->ragged_scratch_bytes) {
    if ((rc = rt_ctx_sync(&cd->ctx)) != AT_OK) return rc; /* earlier runs may still read the old one */
    rt_free(cd->ragged_scratch);
    cd->ragged_scratch = 0, cd->ragged_scratch_bytes = 0;
    if ((rc = rt_alloc(&cd->ragged_scratch, bytes)) != AT_OK)
      return at_fail_context(rc, "cuDNN ragged metadata of %zu bytes", bytes);
    cd->ragged_scratch_bytes = bytes;
  }
  return ensure_workspace(cd, e->info.workspace_bytes);
}

at_status rt_cudnn_sdpa_plan_serving(rt_cudnn_sdpa *cd, const at_shape *shape, const at_serving_layout *layout,
                                     rt_cudnn_plan_info *info)
{
  plan_key k;
  plan_entry *e = NULL;
  at_status rc;
  if ((rc = make_serving_key(cd, shape, layout, &k)) != AT_OK) return rc;
  if ((rc = rt_ctx_bind(&cd->ctx)) != AT_OK) return rc;
  if ((rc = lookup(cd, &k, &e)) != AT_OK) return rc;
  cd->last = e;
  if ((rc = prepare_ragged_resources(cd, shape, e)) != AT_OK) return rc;
  if (info) *info = e->info;
  return AT_OK;
}

/* The variant pack of a ragged call: the caller's tensors, the plan's metadata. */
static at_status bind_serving(rt_cudnn_sdpa *cd, const at_shape *s, const at_serving_layout *l,
                              const at_serving_tensors *t, rt_cudnn_ragged_meta *meta)
{
  void *ptrs[UID_END];
  cudnnBackendDescriptor_t pack = NULL;
  at_status rc;
  cd->bound = NULL, cd->bound_pack = NULL;
  if ((rc = rt_cudnn_sdpa_plan_serving(cd, s, l, NULL)) != AT_OK) return rc;
  if (s->with_lse && !t->lse) return at_fail(AT_ERR_INVALID, "cuDNN SDPA: shape asks for lse but lse is NULL");
  if ((l->q_layout == AT_SEQ_RAGGED && !t->cu_seqlens_q) || (l->kv_layout == AT_SEQ_RAGGED && !t->cu_seqlens_kv))
    return at_fail(AT_ERR_INVALID, "cuDNN ragged SDPA: cu_seqlens_%s is NULL", t->cu_seqlens_q ? "kv" : "q");
  if (l->kv_layout == AT_SEQ_PAGED && (!t->block_table || !t->seqlens_kv))
    return at_fail(AT_ERR_INVALID, "cuDNN paged SDPA: %s is NULL", t->block_table ? "seqlens_kv" : "block_table");
  if (l->kv_layout == AT_SEQ_PAGED && (t->num_pages < 1 || t->num_pages > PAGED_CONTAINER_PAGES))
    return at_fail(AT_ERR_UNSUPPORTED, "cuDNN paged SDPA: a pool of %d pages (attntune's paged graph describes up to "
                   "%d)", t->num_pages, PAGED_CONTAINER_PAGES);
  if ((rc = rt_cudnn_ragged_check_offsets(l, t)) != AT_OK) return rc;
  *meta = rt_cudnn_ragged_meta_at(cd->ragged_scratch, s);
  at_tensors plain = {t->q, t->k, t->v, t->o, t->lse, t->q_stride, t->k_stride, t->v_stride, t->o_stride};
  if ((rc = gather_pointers(cd->last, &plain, NULL, meta, t->block_table, ptrs)) != AT_OK) return rc;
  if ((rc = find_pack(cd, cd->last, ptrs, &pack)) != AT_OK) return rc;
  cd->bound = cd->last, cd->bound_pack = pack;
  return AT_OK;
}

at_status rt_cudnn_sdpa_run_serving(rt_cudnn_sdpa *cd, const at_shape *shape, const at_serving_layout *layout,
                                    const at_serving_tensors *t, CUstream stream)
{
  rt_cudnn_ragged_meta meta;
  at_status rc;
  if ((rc = bind_serving(cd, shape, layout, t, &meta)) != AT_OK) return rc;
  if ((rc = rt_cudnn_ragged_prepare(&cd->ragged_kernels, shape, layout, t, &meta, stream)) != AT_OK) return rc;
  if ((rc = rt_cudnn_sdpa_launch(cd, stream)) != AT_OK) return rc;
  if (!rt_cudnn_ragged_needs_finish(shape, layout)) return AT_OK;
  return rt_cudnn_ragged_finish(&cd->ragged_kernels, shape, layout, t, &meta, stream);
}
