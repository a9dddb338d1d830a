/* cudnn_ragged.c — the metadata kernels around cuDNN's ragged SDPA graph; see cudnn_ragged.h and
 * templates/cudnn_ragged.cu (the index math is written there). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cudnn_ragged.h"

/* Mirrors struct cudnn_ragged_params in templates/cudnn_ragged.cu. */
struct ragged_params {
  CUdeviceptr cu_q, cu_kv;
  CUdeviceptr seqlens_kv;
  CUdeviceptr q_off, o_off, k_off, v_off;
  CUdeviceptr seq_q, seq_kv;
  CUdeviceptr stats, lse, o;
  long long q_ss, o_ss, k_ss, v_ss;
  long long o_sh, o_sb;
  int B, T, S, H, D;
  int total_q, total_kv;
  int bottom_right;
};
_Static_assert(sizeof(struct ragged_params) == 12 * 8 + 6 * 8 + 8 * 4, "ragged_params layout");

/* FINISH_ROWS is CUDNN_RAGGED_FINISH_ROWS of the template: the rows one block of the fix-up owns. */
enum { PREPARE_THREADS = 256, FINISH_THREADS = 256, FINISH_ROWS = 64, META_ALIGN = 256 };

at_status rt_cudnn_ragged_source(at_dtype io, char **source)
{
  char preamble[160];
  *source = NULL;
  if (io != AT_DTYPE_F16 && io != AT_DTYPE_BF16)
    return at_fail(AT_ERR_INVALID, "cuDNN ragged kernels take f16 or bf16 output (got %s)", at_dtype_name(io));
  snprintf(preamble, sizeof preamble, "/* attntune cuDNN ragged metadata: %s */\n#define AT_IN_DTYPE %d\n"
           "#define AT_OUT_DTYPE %d\n", at_dtype_name(io), (int)io, (int)io);
  return rt_template_source(preamble, "cudnn_ragged.cu", source);
}

at_status rt_cudnn_ragged_kernels_load(const char *arch, at_dtype io, rt_cudnn_ragged_kernels *k)
{
  char *source = NULL;
  at_status rc;
  memset(k, 0, sizeof *k);
  if ((rc = rt_cudnn_ragged_source(io, &source)) != AT_OK) return rc;
  rc = rt_module_compile(source, "cudnn_ragged.cu", arch, &k->module);
  free(source);
  if (rc == AT_OK) rc = rt_module_function(k->module, "cudnn_ragged_prepare", &k->prepare);
  if (rc == AT_OK) rc = rt_module_function(k->module, "cudnn_ragged_finish", &k->finish);
  if (rc != AT_OK) rt_cudnn_ragged_kernels_unload(k);
  else k->io = io;
  return rc;
}

void rt_cudnn_ragged_kernels_unload(rt_cudnn_ragged_kernels *k)
{
  rt_module_unload(k->module);
  memset(k, 0, sizeof *k);
}

static size_t aligned(size_t bytes) { return (bytes + META_ALIGN - 1) / META_ALIGN * META_ALIGN; }

size_t rt_cudnn_ragged_meta_bytes(const at_shape *s)
{
  const size_t offsets = aligned((size_t)(s->batch + 1) * sizeof(int32_t));
  const size_t lengths = aligned((size_t)s->batch * sizeof(int32_t));
  const size_t stats = s->with_lse ? aligned((size_t)s->batch * s->q_heads * s->q_len * sizeof(float)) : 0;
  return 4 * offsets + 2 * lengths + stats;
}

rt_cudnn_ragged_meta rt_cudnn_ragged_meta_at(CUdeviceptr scratch, const at_shape *s)
{
  const size_t offsets = aligned((size_t)(s->batch + 1) * sizeof(int32_t));
  const size_t lengths = aligned((size_t)s->batch * sizeof(int32_t));
  rt_cudnn_ragged_meta m;
  m.q_off = scratch, m.o_off = m.q_off + offsets, m.k_off = m.o_off + offsets, m.v_off = m.k_off + offsets;
  m.seq_q = m.v_off + offsets, m.seq_kv = m.seq_q + lengths;
  m.stats = s->with_lse ? m.seq_kv + lengths : 0;
  return m;
}

/* total rows times a seq stride, the last offset cuDNN reads, against int32. */
static at_status check_span(const char *tensor, long long rows, long long seq_stride)
{
  if (rows * seq_stride > INT32_MAX)
    return at_fail(AT_ERR_UNSUPPORTED, "unsupported: cuDNN's ragged offsets here are int32 elements, and %s's last "
                   "sequence starts up to row %lld x seq stride %lld = %lld elements in (more than %d)", tensor, rows,
                   seq_stride, rows * seq_stride, INT32_MAX);
  return AT_OK;
}

at_status rt_cudnn_ragged_check_offsets(const at_serving_layout *l, const at_serving_tensors *t)
{
  at_status rc;
  if (l->q_layout == AT_SEQ_RAGGED &&
      ((rc = check_span("q", t->total_q, t->q_stride.seq)) != AT_OK ||
       (rc = check_span("o", t->total_q, t->o_stride.seq)) != AT_OK))
    return rc;
  if (l->kv_layout == AT_SEQ_RAGGED &&
      ((rc = check_span("k", t->total_kv, t->k_stride.seq)) != AT_OK ||
       (rc = check_span("v", t->total_kv, t->v_stride.seq)) != AT_OK))
    return rc;
  return AT_OK;
}

static CUdeviceptr dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

static struct ragged_params params_of(const at_shape *s, const at_serving_layout *l, const at_serving_tensors *t,
                                      const rt_cudnn_ragged_meta *m)
{
  const int kv_packed = l->kv_layout == AT_SEQ_RAGGED, q_packed = l->q_layout == AT_SEQ_RAGGED;
  const int paged = l->kv_layout == AT_SEQ_PAGED;
  struct ragged_params p = {
      .cu_q = q_packed ? dptr(t->cu_seqlens_q) : 0, .cu_kv = kv_packed ? dptr(t->cu_seqlens_kv) : 0,
      .seqlens_kv = paged ? dptr(t->seqlens_kv) : 0,
      .q_off = m->q_off, .o_off = m->o_off, .k_off = m->k_off, .v_off = m->v_off,
      .seq_q = m->seq_q, .seq_kv = m->seq_kv,
      .stats = s->with_lse ? m->stats : 0, .lse = s->with_lse ? dptr(t->lse) : 0, .o = dptr(t->o),
      .q_ss = t->q_stride.seq, .o_ss = t->o_stride.seq, .k_ss = t->k_stride.seq, .v_ss = t->v_stride.seq,
      .o_sh = t->o_stride.head, .o_sb = t->o_stride.batch,
      .B = s->batch, .T = s->q_len, .S = s->kv_len, .H = s->q_heads, .D = s->head_dim,
      .total_q = q_packed ? t->total_q : 0, .total_kv = kv_packed ? t->total_kv : 0,
      .bottom_right = s->mask == AT_MASK_CAUSAL_BR,
  };
  return p;
}

int rt_cudnn_ragged_needs_finish(const at_shape *s, const at_serving_layout *l)
{
  const int keys_may_be_missing = l->kv_layout != AT_SEQ_PADDED || (s->mask == AT_MASK_CAUSAL_BR && s->q_len > s->kv_len);
  return s->with_lse || keys_may_be_missing;
}

static unsigned ceil_div(long long a, long long b) { return (unsigned)((a + b - 1) / b); }

at_status rt_cudnn_ragged_prepare(const rt_cudnn_ragged_kernels *k, const at_shape *s, const at_serving_layout *l,
                                  const at_serving_tensors *t, const rt_cudnn_ragged_meta *m, CUstream stream)
{
  if (l->q_layout != AT_SEQ_RAGGED && l->kv_layout != AT_SEQ_PAGED)
    return at_fail(AT_ERR_INVALID, "cuDNN ragged metadata: Q is %s and K/V %s (expected ragged Q or paged K/V)",
                   at_seq_layout_name(l->q_layout), at_seq_layout_name(l->kv_layout));
  struct ragged_params p = params_of(s, l, t, m);
  void *args[] = {&p};
  rt_launch_dims dims = {{ceil_div(s->batch + 1, PREPARE_THREADS), 1, 1}, {PREPARE_THREADS, 1, 1}, 0, 0};
  at_status rc = rt_launch(k->prepare, &dims, stream, args);
  return rc == AT_OK ? AT_OK : at_fail_context(rc, "cuDNN ragged offsets and lengths (B=%d)", s->batch);
}

at_status rt_cudnn_ragged_finish(const rt_cudnn_ragged_kernels *k, const at_shape *s, const at_serving_layout *l,
                                 const at_serving_tensors *t, const rt_cudnn_ragged_meta *m, CUstream stream)
{
  if (s->batch > 65535)
    return at_fail(AT_ERR_UNSUPPORTED, "cuDNN ragged fix-up grid takes at most 65535 sequences (got %d)", s->batch);
  struct ragged_params p = params_of(s, l, t, m);
  void *args[] = {&p};
  rt_launch_dims dims = {{ceil_div(s->q_len, FINISH_ROWS), (unsigned)s->batch, 1}, {FINISH_THREADS, 1, 1}, 0, 0};
  at_status rc = rt_launch(k->finish, &dims, stream, args);
  return rc == AT_OK ? AT_OK : at_fail_context(rc, "cuDNN ragged rows without keys and lse (B=%d)", s->batch);
}
