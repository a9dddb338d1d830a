/* shape.c — the dtype and mask tables, and validation, naming and FLOP counting of shapes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

/* Indexed by at_dtype. Tolerances are docs/design.md's; f32 runs only the naive kernels, which are
 * the reference itself, so its bound is a sanity check, not a setting. */
static const at_dtype_info DTYPES[] = {
    [AT_DTYPE_F32] = {"f32", 4, 0, 1e-4, AT_DTYPE_F32},
    [AT_DTYPE_F16] = {"f16", 2, 0, 1e-2, AT_DTYPE_F16},
    [AT_DTYPE_BF16] = {"bf16", 2, 0, 1e-2, AT_DTYPE_BF16},
    [AT_DTYPE_E4M3] = {"e4m3", 1, 1, 5e-2, AT_DTYPE_BF16},
    [AT_DTYPE_E5M2] = {"e5m2", 1, 1, 1e-1, AT_DTYPE_BF16},
};
#define N_DTYPES ((int)(sizeof DTYPES / sizeof *DTYPES))
static const char *const MASK_NAMES[] = {"none", "causal", "causal-br"};

const at_dtype_info *at_dtype_info_of(at_dtype dtype)
{
  return (unsigned)dtype < (unsigned)N_DTYPES ? &DTYPES[dtype] : NULL;
}

const char *at_dtype_name(at_dtype dtype)
{
  const at_dtype_info *d = at_dtype_info_of(dtype);
  return d ? d->name : "?";
}

size_t at_dtype_size(at_dtype dtype)
{
  const at_dtype_info *d = at_dtype_info_of(dtype);
  return d ? d->size : 0;
}

int at_dtype_is_fp8(at_dtype dtype)
{
  const at_dtype_info *d = at_dtype_info_of(dtype);
  return d && d->is_fp8;
}

double at_dtype_tolerance(at_dtype dtype)
{
  const at_dtype_info *d = at_dtype_info_of(dtype);
  return d ? d->tolerance : 1e-2;
}

at_dtype at_dtype_default_out(at_dtype dtype)
{
  const at_dtype_info *d = at_dtype_info_of(dtype);
  return d ? d->default_out : dtype;
}

const char *at_dtype_names(void) { return "f32, f16, bf16, e4m3, e5m2"; }

at_status at_dtype_parse(const char *text, at_dtype *out)
{
  for (int i = 0; text && i < N_DTYPES; i++)
    if (strcmp(text, DTYPES[i].name) == 0) {
      *out = (at_dtype)i;
      return AT_OK;
    }
  /* Common spellings people type. */
  if (!text) text = "(null)";
  if (strcmp(text, "fp32") == 0 || strcmp(text, "float32") == 0) return *out = AT_DTYPE_F32, AT_OK;
  if (strcmp(text, "fp16") == 0 || strcmp(text, "float16") == 0) return *out = AT_DTYPE_F16, AT_OK;
  if (strcmp(text, "bfloat16") == 0) return *out = AT_DTYPE_BF16, AT_OK;
  return at_fail(AT_ERR_INVALID, "unknown dtype '%s' (expected %s)", text, at_dtype_names());
}

/* [dtype][kv_dtype]: the plain name on the diagonal, "<dtype>.kv<kv_dtype>" elsewhere. */
static const char *const DTYPE_PAIRS[][N_DTYPES] = {
    {"f32", "f32.kvf16", "f32.kvbf16", "f32.kve4m3", "f32.kve5m2"},
    {"f16.kvf32", "f16", "f16.kvbf16", "f16.kve4m3", "f16.kve5m2"},
    {"bf16.kvf32", "bf16.kvf16", "bf16", "bf16.kve4m3", "bf16.kve5m2"},
    {"e4m3.kvf32", "e4m3.kvf16", "e4m3.kvbf16", "e4m3", "e4m3.kve5m2"},
    {"e5m2.kvf32", "e5m2.kvf16", "e5m2.kvbf16", "e5m2.kve4m3", "e5m2"},
};

const char *at_dtypes_name(at_dtype dtype, at_dtype kv_dtype)
{
  if (kv_dtype == AT_KV_SAME) kv_dtype = dtype;
  if ((unsigned)dtype >= (unsigned)N_DTYPES || (unsigned)kv_dtype >= (unsigned)N_DTYPES) return "?";
  return DTYPE_PAIRS[dtype][kv_dtype];
}

at_status at_dtypes_parse(const char *text, at_dtype *dtype, at_dtype *kv_dtype)
{
  char q[16];
  const char *dot = text ? strchr(text, '.') : NULL;
  *kv_dtype = AT_KV_SAME;
  if (!dot) return at_dtype_parse(text, dtype);
  if ((size_t)(dot - text) >= sizeof q || strncmp(dot + 1, "kv", 2) != 0)
    return at_fail(AT_ERR_INVALID, "unknown dtypes '%s' (expected a dtype, or <dtype>.kv<dtype> as bf16.kve4m3)",
                   text);
  snprintf(q, sizeof q, "%.*s", (int)(dot - text), text);
  at_status rc = at_dtype_parse(q, dtype);
  if (rc == AT_OK) rc = at_dtype_parse(dot + 3, kv_dtype);
  if (rc == AT_OK && *kv_dtype == *dtype) *kv_dtype = AT_KV_SAME;
  return rc;
}

const char *at_mask_name(at_mask mask)
{
  return (unsigned)mask < sizeof MASK_NAMES / sizeof *MASK_NAMES ? MASK_NAMES[mask] : "?";
}

at_status at_mask_parse(const char *text, at_mask *out)
{
  for (int i = 0; i < (int)(sizeof MASK_NAMES / sizeof *MASK_NAMES); i++)
    if (strcmp(text, MASK_NAMES[i]) == 0) {
      *out = (at_mask)i;
      return AT_OK;
    }
  return at_fail(AT_ERR_INVALID, "unknown mask '%s' (expected none, causal, causal-br)", text);
}

/* The limits of include/attntune.h's comment on at_shape_check. */
static at_status check_len(const char *name, int len)
{
  if (len < 1) return at_fail(AT_ERR_INVALID, "%s %d must be at least 1", name, len);
  if (len > AT_MAX_SEQ_LEN)
    return at_fail(AT_ERR_INVALID, "%s %d out of range (expected 1..%d: row indices are int in the kernels)", name,
                   len, AT_MAX_SEQ_LEN);
  return AT_OK;
}

/* One tensor: its row (heads x D) and its element count; len_name is q_len or kv_len. All
 * operands are positive and at most 2^31 - 1, so B x len fits in 64 bits unsigned. */
static at_status check_tensor_size(const at_shape *s, const char *tensor, const char *len_name, int len,
                                   const char *heads_name, int heads)
{
  const unsigned long long row = (unsigned long long)heads * (unsigned)s->head_dim;
  if (row > AT_MAX_ROW_ELEMENTS)
    return at_fail(AT_ERR_INVALID,
                   "%s %d x head_dim %d = %llu elements per row exceed %d (the kernels' row stride is an int)",
                   heads_name, heads, s->head_dim, row, AT_MAX_ROW_ELEMENTS);
  if ((unsigned long long)s->batch * (unsigned)len > AT_MAX_TENSOR_ELEMENTS / row)
    return at_fail(AT_ERR_INVALID,
                   "batch %d x %s %d x %s %d x head_dim %d = %.3g elements of %s exceed 2^61 = %llu (the kernels' "
                   "64-bit byte offsets at up to 4 bytes per element)",
                   s->batch, len_name, len, heads_name, heads, s->head_dim,
                   (double)s->batch * len * (double)row, tensor, AT_MAX_TENSOR_ELEMENTS);
  return AT_OK;
}

at_status at_shape_check(const at_shape *s)
{
  if (!s) return at_fail(AT_ERR_INVALID, "shape is NULL");
  if (s->batch < 1) return at_fail(AT_ERR_INVALID, "batch %d must be at least 1", s->batch);
  at_status rc;
  if ((rc = check_len("q_len", s->q_len)) != AT_OK || (rc = check_len("kv_len", s->kv_len)) != AT_OK) return rc;
  if (s->q_heads < 1) return at_fail(AT_ERR_INVALID, "q_heads %d must be at least 1", s->q_heads);
  if (s->kv_heads < 1) return at_fail(AT_ERR_INVALID, "kv_heads %d must be at least 1", s->kv_heads);
  if (s->q_heads % s->kv_heads != 0)
    return at_fail(AT_ERR_INVALID, "q_heads %d is not a multiple of kv_heads %d", s->q_heads,
                   s->kv_heads);
  if (s->head_dim < 1 || s->head_dim > 512)
    return at_fail(AT_ERR_INVALID, "head_dim %d out of range (expected 1..512)", s->head_dim);
  if ((rc = check_tensor_size(s, "Q", "q_len", s->q_len, "q_heads", s->q_heads)) != AT_OK ||
      (rc = check_tensor_size(s, "K and V", "kv_len", s->kv_len, "kv_heads", s->kv_heads)) != AT_OK)
    return rc;
  if ((unsigned)s->dtype > AT_DTYPE_E5M2) return at_fail(AT_ERR_INVALID, "dtype %d unknown", s->dtype);
  if ((unsigned)s->kv_dtype > AT_DTYPE_E5M2) return at_fail(AT_ERR_INVALID, "kv_dtype %d unknown", s->kv_dtype);
  const at_dtype kv = at_shape_kv_dtype(s);
  if (kv != s->dtype && !((s->dtype == AT_DTYPE_F16 || s->dtype == AT_DTYPE_BF16) && at_dtype_is_fp8(kv)))
    return at_fail(AT_ERR_INVALID,
                   "kv_dtype %s with dtype %s: K and V may differ from Q only as FP8 (e4m3, e5m2) with f16 or bf16 "
                   "Q, an FP8 KV cache",
                   at_dtype_name(kv), at_dtype_name(s->dtype));
  if ((unsigned)s->mask > AT_MASK_CAUSAL_BR) return at_fail(AT_ERR_INVALID, "mask %d unknown", s->mask);
  if (!(s->scale >= 0.0f) || isinf(s->scale))
    return at_fail(AT_ERR_INVALID, "scale %g must be finite and >= 0 (0 means 1/sqrt(D))",
                   (double)s->scale);
  return AT_OK;
}

at_dtype at_shape_kv_dtype(const at_shape *s)
{
  return s->kv_dtype == AT_KV_SAME ? s->dtype : s->kv_dtype;
}

float at_shape_scale(const at_shape *s)
{
  return s->scale > 0.0f ? s->scale : 1.0f / sqrtf((float)s->head_dim);
}

/* Number of (query, key) pairs the mask leaves visible. */
static double visible_pairs(const at_shape *s)
{
  double t = s->q_len, n = s->kv_len;
  if (s->mask == AT_MASK_NONE) return t * n;
  /* Convention shared with FlashAttention and cuDNN reports: causal with T == S counts half. */
  if (s->q_len == s->kv_len) return t * n / 2.0;
  long long offset = s->mask == AT_MASK_CAUSAL_BR ? (long long)s->kv_len - s->q_len : 0;
  double pairs = 0;
  for (long long i = 0; i < s->q_len; i++) {
    long long seen = i + offset + 1;
    if (seen > s->kv_len) seen = s->kv_len;
    if (seen > 0) pairs += (double)seen;
  }
  return pairs;
}

double at_shape_flops(const at_shape *s)
{
  return 4.0 * s->batch * s->q_heads * s->head_dim * visible_pairs(s);
}

at_strides at_strides_bshd(int seq_len, int heads, int head_dim)
{
  at_strides st;
  st.head = head_dim;
  st.seq = (int64_t)heads * head_dim;
  st.batch = (int64_t)seq_len * heads * head_dim;
  return st;
}

void at_shape_key(const at_shape *s, char *buf, size_t size)
{
  snprintf(buf, size, "b%d.t%d.s%d.hq%d.hkv%d.d%d.%s.%s%s", s->batch, s->q_len, s->kv_len,
           s->q_heads, s->kv_heads, s->head_dim, at_dtypes_name(s->dtype, s->kv_dtype), at_mask_name(s->mask),
           s->with_lse ? ".lse" : "");
}
