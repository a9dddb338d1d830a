/* naive.c — compiling and launching the naive reference kernels of templates/naive.cu. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"

/* Mirrors struct at_naive_params in templates/naive.cu. */
struct naive_params {
  CUdeviceptr q, k, v, o, lse, scores;
  long long q_sb, q_ss, q_sh;
  long long k_sb, k_ss, k_sh;
  long long v_sb, v_ss, v_sh;
  long long o_sb, o_ss, o_sh;
  CUdeviceptr descale_q, descale_k, descale_v; /* 0: 1 */
  int B, T, S, Nq, Nkv, D;
  int mask;
  float scale;
  CUdeviceptr cu_q, cu_kv, block_table, seqlens_kv; /* serving layouts; 0 for padded tensors */
  int q_layout, kv_layout; /* at_seq_layout */
  int page_size, max_pages;
  int total_q, total_kv, num_pages;
  int unused;
};
_Static_assert(sizeof(struct naive_params) == 9 * 8 + 12 * 8 + 8 * 4 + 4 * 8 + 8 * 4, "naive_params layout");

enum { NAIVE_TILE = 16, NAIVE_ROW_THREADS = 256 };

at_status rt_naive_source(at_dtype in_dtype, at_dtype out_dtype, char **source)
{
  return rt_naive_source_kv(in_dtype, in_dtype, out_dtype, source);
}

at_status rt_naive_source_kv(at_dtype in_dtype, at_dtype kv_dtype, at_dtype out_dtype, char **source)
{
  char preamble[256];
  *source = NULL;
  if (out_dtype != AT_DTYPE_F32 && out_dtype != AT_DTYPE_F16 && out_dtype != AT_DTYPE_BF16)
    return at_fail(AT_ERR_INVALID, "naive output dtype %s unsupported (expected f32, f16, bf16)",
                   at_dtype_name(out_dtype));
  if ((unsigned)in_dtype > AT_DTYPE_E5M2) return at_fail(AT_ERR_INVALID, "unknown input dtype %d", in_dtype);
  if (kv_dtype != in_dtype &&
      !((in_dtype == AT_DTYPE_F16 || in_dtype == AT_DTYPE_BF16) && at_dtype_is_fp8(kv_dtype)))
    return at_fail(AT_ERR_INVALID, "naive K/V dtype %s with %s Q unsupported (expected the Q dtype, or e4m3/e5m2 "
                   "with f16/bf16 Q)", at_dtype_name(kv_dtype), at_dtype_name(in_dtype));
  int n_pre = snprintf(preamble, sizeof preamble,
                       "/* attntune naive reference: in %s, out %s */\n#define AT_IN_DTYPE %d\n"
                       "#define AT_OUT_DTYPE %d\n",
                       at_dtype_name(in_dtype), at_dtype_name(out_dtype), (int)in_dtype, (int)out_dtype);
  if (kv_dtype != in_dtype)
    snprintf(preamble + n_pre, sizeof preamble - (size_t)n_pre, "#define AT_KV_DTYPE %d /* K, V: %s */\n",
             (int)kv_dtype, at_dtype_name(kv_dtype));
  return rt_template_source(preamble, "naive.cu", source);
}

at_status rt_naive_create(const char *arch, at_dtype in_dtype, at_dtype out_dtype, rt_naive *naive)
{
  return rt_naive_create_kv(arch, in_dtype, in_dtype, out_dtype, naive);
}

at_status rt_naive_create_kv(const char *arch, at_dtype in_dtype, at_dtype kv_dtype, at_dtype out_dtype,
                             rt_naive *naive)
{
  char *source = NULL;
  at_status rc;
  memset(naive, 0, sizeof *naive);
  if ((rc = rt_naive_source_kv(in_dtype, kv_dtype, out_dtype, &source)) != AT_OK) return rc;
  rc = rt_module_compile(source, "naive.cu", arch, &naive->module);
  free(source);
  if (rc != AT_OK) goto out;
  if ((rc = rt_module_function(naive->module, "naive_scores", &naive->scores)) != AT_OK) goto out;
  if ((rc = rt_module_function(naive->module, "naive_softmax", &naive->softmax)) != AT_OK) goto out;
  if ((rc = rt_module_function(naive->module, "naive_pv", &naive->pv)) != AT_OK) goto out;
  naive->in_dtype = in_dtype;
  naive->kv_dtype = kv_dtype;
  naive->out_dtype = out_dtype;
out:
  if (rc != AT_OK) {
    rt_module_unload(naive->module);
    naive->module = NULL;
  }
  return rc;
}

void rt_naive_destroy(rt_naive *naive)
{
  rt_module_unload(naive->module);
  memset(naive, 0, sizeof *naive);
}

size_t rt_naive_scratch_bytes(const at_shape *s)
{
  /* B x Nq x T x S floats can pass size_t for shapes at_shape_check accepts (T, S up to 2^30):
   * saturate, so that the allocation fails instead of wrapping around to a small buffer. */
  size_t bytes = sizeof(float);
  const long long dims[] = {s->batch, s->q_heads, s->q_len, s->kv_len};
  for (int i = 0; i < 4; i++)
    if (dims[i] < 0 || __builtin_mul_overflow(bytes, (size_t)dims[i], &bytes)) return SIZE_MAX;
  return bytes;
}

static unsigned ceil_div(long long a, long long b) { return (unsigned)((a + b - 1) / b); }

at_status rt_naive_run(const rt_naive *naive, const at_shape *s, const at_tensors *t,
                       CUdeviceptr scratch, CUstream stream)
{
  return rt_naive_run_fp8(naive, s, t, NULL, scratch, stream);
}

/* What both entry points check before a launch: the dtypes the module was compiled for, the
 * descales (only FP8 inputs take them), the pointers, and the grid limits. */
static at_status check_naive_call(const rt_naive *naive, const at_shape *s, const void *q, const void *k,
                                  const void *v, const void *o, const float *lse, const rt_naive_descales *fp8,
                                  CUdeviceptr scratch)
{
  at_status rc;
  if ((rc = at_shape_check(s)) != AT_OK) return rc;
  if (s->dtype != naive->in_dtype || at_shape_kv_dtype(s) != naive->kv_dtype) {
    return at_fail(AT_ERR_INVALID, "naive reference compiled for %s inputs, shape has %s",
                   at_dtypes_name(naive->in_dtype, naive->kv_dtype), at_dtypes_name(s->dtype, s->kv_dtype));
  }
  if (fp8 && !at_dtype_is_fp8(s->dtype) && fp8->descale_q)
    return at_fail(AT_ERR_INVALID, "descale_q given for %s Q (only e4m3/e5m2 inputs take descales)",
                   at_dtype_name(s->dtype));
  if (fp8 && !at_dtype_is_fp8(naive->kv_dtype) && (fp8->descale_k || fp8->descale_v))
    return at_fail(AT_ERR_INVALID, "descales given for %s K/V (only e4m3/e5m2 inputs take them)",
                   at_dtype_name(naive->kv_dtype));
  if (!q || !k || !v || !o || !scratch)
    return at_fail(AT_ERR_INVALID, "naive reference needs q, k, v, o and scratch pointers");
  if (s->with_lse && !lse) return at_fail(AT_ERR_INVALID, "shape asks for lse but lse is NULL");
  if ((long long)s->batch * s->q_heads > 65535)
    return at_fail(AT_ERR_INVALID, "naive reference handles at most 65535 batch*heads (got %lld)",
                   (long long)s->batch * s->q_heads);
  if (ceil_div(s->q_len, NAIVE_TILE) > 65535)
    return at_fail(AT_ERR_INVALID, "shape too large for the naive reference grid");
  return AT_OK;
}

static CUdeviceptr dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

/* The parameters every layout shares: pointers, strides, descales, sizes. */
static struct naive_params base_params(const at_shape *s, const void *q, const void *k, const void *v, void *o,
                                       float *lse, const at_strides st[4], const rt_naive_descales *fp8,
                                       CUdeviceptr scratch)
{
  struct naive_params p = {
      .q = dptr(q), .k = dptr(k), .v = dptr(v), .o = dptr(o),
      .lse = s->with_lse ? dptr(lse) : 0, .scores = scratch,
      .q_sb = st[0].batch, .q_ss = st[0].seq, .q_sh = st[0].head,
      .k_sb = st[1].batch, .k_ss = st[1].seq, .k_sh = st[1].head,
      .v_sb = st[2].batch, .v_ss = st[2].seq, .v_sh = st[2].head,
      .o_sb = st[3].batch, .o_ss = st[3].seq, .o_sh = st[3].head,
      .descale_q = fp8 ? dptr(fp8->descale_q) : 0,
      .descale_k = fp8 ? dptr(fp8->descale_k) : 0,
      .descale_v = fp8 ? dptr(fp8->descale_v) : 0,
      .B = s->batch, .T = s->q_len, .S = s->kv_len, .Nq = s->q_heads, .Nkv = s->kv_heads,
      .D = s->head_dim, .mask = (int)s->mask, .scale = at_shape_scale(s),
  };
  return p;
}

/* scores -> softmax -> P.V over the planned maxima (T, S): every sequence fits inside. */
static at_status launch_naive(const rt_naive *naive, const at_shape *s, struct naive_params *p, CUstream stream)
{
  at_status rc;
  void *args[] = {p};
  unsigned bh = (unsigned)(s->batch * s->q_heads);
  rt_launch_dims scores = {{ceil_div(s->kv_len, NAIVE_TILE), ceil_div(s->q_len, NAIVE_TILE), bh},
                           {NAIVE_TILE, NAIVE_TILE, 1}, 0, 0};
  rt_launch_dims softmax = {{(unsigned)s->q_len, bh, 1}, {NAIVE_ROW_THREADS, 1, 1}, 0, 0};
  rt_launch_dims pv = {{ceil_div(s->head_dim, NAIVE_TILE), ceil_div(s->q_len, NAIVE_TILE), bh},
                       {NAIVE_TILE, NAIVE_TILE, 1}, 0, 0};
  if ((rc = rt_launch(naive->scores, &scores, stream, args)) != AT_OK) return rc;
  if ((rc = rt_launch(naive->softmax, &softmax, stream, args)) != AT_OK) return rc;
  return rt_launch(naive->pv, &pv, stream, args);
}

at_status rt_naive_run_fp8(const rt_naive *naive, const at_shape *s, const at_tensors *t,
                           const rt_naive_descales *fp8, CUdeviceptr scratch, CUstream stream)
{
  at_status rc;
  if ((rc = check_naive_call(naive, s, t->q, t->k, t->v, t->o, t->lse, fp8, scratch)) != AT_OK) return rc;
  const at_strides st[4] = {t->q_stride, t->k_stride, t->v_stride, t->o_stride};
  struct naive_params p = base_params(s, t->q, t->k, t->v, t->o, t->lse, st, fp8, scratch);
  return launch_naive(naive, s, &p, stream);
}

at_status rt_naive_run_serving(const rt_naive *naive, const at_shape *s, const at_serving_layout *l,
                               const at_serving_tensors *t, const rt_naive_descales *fp8, CUdeviceptr scratch,
                               CUstream stream)
{
  at_status rc;
  if ((rc = check_naive_call(naive, s, t->q, t->k, t->v, t->o, t->lse, fp8, scratch)) != AT_OK) return rc;
  if ((rc = at_serving_layout_check(s, l)) != AT_OK || (rc = at_serving_fields_check(s, l, t)) != AT_OK) return rc;
  const at_strides st[4] = {t->q_stride, t->k_stride, t->v_stride, t->o_stride};
  struct naive_params p = base_params(s, t->q, t->k, t->v, t->o, t->lse, st, fp8, scratch);
  p.cu_q = dptr(t->cu_seqlens_q), p.cu_kv = dptr(t->cu_seqlens_kv);
  p.block_table = dptr(t->block_table), p.seqlens_kv = dptr(t->seqlens_kv);
  p.q_layout = (int)l->q_layout, p.kv_layout = (int)l->kv_layout;
  p.page_size = l->page_size, p.max_pages = l->max_pages_per_seq;
  p.total_q = t->total_q, p.total_kv = t->total_kv, p.num_pages = t->num_pages;
  return launch_naive(naive, s, &p, stream);
}
