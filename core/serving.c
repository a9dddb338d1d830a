/*
 * serving.c — serving layouts (ragged batches, paged K/V) on the host: their names, the checks of
 * a layout and of a call's metadata, and the size-versioned copies of the public structs
 * (include/attntune.h, "Serving layouts"). Pure C: the library downloads device metadata and
 * hands it here, and the CPU tests call these directly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static const char *const SEQ_LAYOUT_NAMES[] = {"padded", "ragged", "paged"};
#define N_SEQ_LAYOUTS ((int)(sizeof SEQ_LAYOUT_NAMES / sizeof *SEQ_LAYOUT_NAMES))

/* The page sizes of issue #18: 1 (token-granular tables, as FlashInfer allows), 16 (vLLM's
 * default) and the powers of two up to 256 that the future kernels tile by. */
static const int PAGE_SIZES[] = {1, 16, 32, 64, 128, 256};
#define PAGE_SIZE_LIST "1, 16, 32, 64, 128, 256"

const char *at_seq_layout_name(at_seq_layout layout)
{
  return (unsigned)layout < (unsigned)N_SEQ_LAYOUTS ? SEQ_LAYOUT_NAMES[layout] : "?";
}

at_status at_seq_layout_parse(const char *text, at_seq_layout *out)
{
  for (int i = 0; text && i < N_SEQ_LAYOUTS; i++)
    if (strcmp(text, SEQ_LAYOUT_NAMES[i]) == 0) return *out = (at_seq_layout)i, AT_OK;
  return at_fail(AT_ERR_INVALID, "unknown sequence layout '%s' (expected padded, ragged, paged)",
                 text ? text : "(null)");
}

int at_page_size_allowed(int page_size)
{
  for (size_t i = 0; i < sizeof PAGE_SIZES / sizeof *PAGE_SIZES; i++)
    if (PAGE_SIZES[i] == page_size) return 1;
  return 0;
}

const char *at_page_sizes_text(void) { return PAGE_SIZE_LIST; }

/* ---- size-versioned structs -------------------------------------------------------------------- */

at_status at_versioned_copy(const char *type, const void *src, size_t min_size, size_t known_size, void *dst)
{
  if (!src) return at_fail(AT_ERR_INVALID, "%s is NULL", type);
  size_t given;
  memcpy(&given, src, sizeof given); /* every versioned struct begins with its size_t struct_size */
  if (given == 0)
    return at_fail(AT_ERR_INVALID, "%s.struct_size is 0: set it to sizeof(%s) (a zeroed struct has no version)",
                   type, type);
  if (given < min_size)
    return at_fail(AT_ERR_INVALID, "%s.struct_size %zu is smaller than its first version's %zu bytes", type, given,
                   min_size);
  /* A struct from a later header: its fields past the ones this library knows must ask for
   * nothing (all zeros), or the caller would silently get less than it asked for. */
  const unsigned char *bytes = src;
  for (size_t i = known_size; i < given; i++)
    if (bytes[i] != 0)
      return at_fail(AT_ERR_UNSUPPORTED,
                     "%s of %zu bytes sets fields this attntune (%s, %zu bytes) does not know (byte %zu is not 0)",
                     type, given, at_version(), known_size, i);
  memset(dst, 0, known_size);
  memcpy(dst, src, given < known_size ? given : known_size);
  memcpy(dst, &known_size, sizeof known_size); /* the copy is this library's version */
  return AT_OK;
}

/* ---- layouts ------------------------------------------------------------------------------------ */

static long long pages_for(long long tokens, int page_size) { return (tokens + page_size - 1) / page_size; }

static at_strides dense_strides(at_seq_layout layout, int len, int heads, int head_dim, int page_size)
{
  at_strides st = at_strides_bshd(len, heads, head_dim);
  if (layout == AT_SEQ_RAGGED) st.batch = 0;
  if (layout == AT_SEQ_PAGED) st.batch = (int64_t)page_size * heads * head_dim;
  return st;
}

at_serving_layout at_serving_layout_make(const at_shape *s, at_seq_layout q_layout, at_seq_layout kv_layout,
                                         int page_size)
{
  at_serving_layout l;
  memset(&l, 0, sizeof l);
  l.struct_size = sizeof l;
  l.q_layout = q_layout, l.kv_layout = kv_layout;
  l.page_size = page_size;
  if (!s) return l;
  if (kv_layout == AT_SEQ_PAGED && page_size > 0) l.max_pages_per_seq = (int)pages_for(s->kv_len, page_size);
  l.strides.q = l.strides.o = dense_strides(q_layout, s->q_len, s->q_heads, s->head_dim, page_size);
  l.strides.k = l.strides.v = dense_strides(kv_layout, s->kv_len, s->kv_heads, s->head_dim, page_size);
  return l;
}

int at_serving_is_padded(const at_serving_layout *l)
{
  return l->q_layout == AT_SEQ_PADDED && l->kv_layout == AT_SEQ_PADDED;
}

void at_serving_layout_describe(const at_serving_layout *l, char *buf, size_t size)
{
  if (l->kv_layout == AT_SEQ_PAGED)
    snprintf(buf, size, "%s Q with paged K/V (page size %d)", at_seq_layout_name(l->q_layout), l->page_size);
  else
    snprintf(buf, size, "%s Q with %s K/V", at_seq_layout_name(l->q_layout), at_seq_layout_name(l->kv_layout));
}

static at_status check_ragged_batch_stride(const char *tensor, at_strides st)
{
  if (st.batch != 0)
    return at_fail(AT_ERR_INVALID,
                   "%s batch stride %lld given for a ragged tensor: its rows are found through cu_seqlens, so it "
                   "must be 0",
                   tensor, (long long)st.batch);
  return AT_OK;
}

static at_status check_pages(const at_shape *s, const at_serving_layout *l)
{
  if (!at_page_size_allowed(l->page_size))
    return at_fail(AT_ERR_INVALID, "page_size %d not allowed for paged K/V (expected one of " PAGE_SIZE_LIST ")",
                   l->page_size);
  const long long need = pages_for(s->kv_len, l->page_size);
  if (l->max_pages_per_seq < need)
    return at_fail(AT_ERR_INVALID,
                   "max_pages_per_seq %d holds %lld tokens at page size %d, fewer than the planned kv_len %d "
                   "(needs %lld pages)",
                   l->max_pages_per_seq, (long long)l->max_pages_per_seq * l->page_size, l->page_size, s->kv_len,
                   need);
  if (l->max_pages_per_seq > AT_MAX_SEQ_LEN)
    return at_fail(AT_ERR_INVALID, "max_pages_per_seq %d out of range (at most %d)", l->max_pages_per_seq,
                   AT_MAX_SEQ_LEN);
  return AT_OK;
}

/* A valid layout (already copied to this library's version). */
static at_status check_layout(const at_shape *s, const at_serving_layout *l)
{
  at_status rc;
  if (l->q_layout == AT_SEQ_PAGED)
    return at_fail(AT_ERR_INVALID, "q_layout paged: only K and V can be paged (Q and O are padded or ragged)");
  if ((unsigned)l->q_layout >= (unsigned)N_SEQ_LAYOUTS) return at_fail(AT_ERR_INVALID, "q_layout %d unknown", l->q_layout);
  if ((unsigned)l->kv_layout >= (unsigned)N_SEQ_LAYOUTS)
    return at_fail(AT_ERR_INVALID, "kv_layout %d unknown", l->kv_layout);
  if (l->kv_layout == AT_SEQ_PAGED) {
    if ((rc = check_pages(s, l)) != AT_OK) return rc;
  } else if (l->page_size != 0 || l->max_pages_per_seq != 0) {
    return at_fail(AT_ERR_INVALID, "page_size %d / max_pages_per_seq %d given for %s K/V: only paged K/V has pages",
                   l->page_size, l->max_pages_per_seq, at_seq_layout_name(l->kv_layout));
  }
  if (l->q_layout == AT_SEQ_RAGGED &&
      ((rc = check_ragged_batch_stride("q", l->strides.q)) != AT_OK ||
       (rc = check_ragged_batch_stride("o", l->strides.o)) != AT_OK))
    return rc;
  if (l->kv_layout == AT_SEQ_RAGGED &&
      ((rc = check_ragged_batch_stride("k", l->strides.k)) != AT_OK ||
       (rc = check_ragged_batch_stride("v", l->strides.v)) != AT_OK))
    return rc;
  return AT_OK;
}

at_status at_serving_layout_copy(const at_shape *s, const at_serving_layout *given, at_serving_layout *out)
{
  at_status rc;
  if ((rc = at_shape_check(s)) != AT_OK) return rc;
  if ((rc = at_versioned_copy("at_serving_layout", given, sizeof *out, sizeof *out, out)) != AT_OK) return rc;
  return check_layout(s, out);
}

at_status at_serving_layout_check(const at_shape *s, const at_serving_layout *l)
{
  at_serving_layout copy;
  return at_serving_layout_copy(s, l, &copy);
}

/* ---- a call's metadata: what the host can see without reading the device ----------------------- */

/* A metadata pointer is given exactly when the layout uses it. */
static at_status check_presence(const char *name, const void *ptr, int used, const at_serving_layout *l)
{
  char what[96];
  if (used && !ptr) {
    at_serving_layout_describe(l, what, sizeof what);
    return at_fail(AT_ERR_INVALID, "%s is NULL, and %s needs it", name, what);
  }
  if (!used && ptr) {
    at_serving_layout_describe(l, what, sizeof what);
    return at_fail(AT_ERR_INVALID, "%s is given, but %s does not use it (set it to NULL)", name, what);
  }
  return AT_OK;
}

static at_status check_count(const char *name, int value, int used, int least)
{
  if (used && value < least) return at_fail(AT_ERR_INVALID, "%s %d must be at least %d", name, value, least);
  if (!used && value != 0) return at_fail(AT_ERR_INVALID, "%s %d given, but the layout has no use for it (set it to 0)", name, value);
  return AT_OK;
}

/* Rows x heads x D of a packed tensor or a pool within the element limit of attntune.h. */
static at_status check_elements(const char *what, long long rows, int heads, int head_dim)
{
  const unsigned long long row = (unsigned long long)heads * (unsigned)head_dim;
  if (rows > 0 && (unsigned long long)rows > AT_MAX_TENSOR_ELEMENTS / row)
    return at_fail(AT_ERR_INVALID, "%s: %lld rows of %llu elements exceed 2^61 elements", what, rows, row);
  return AT_OK;
}

at_status at_serving_fields_check(const at_shape *s, const at_serving_layout *l, const at_serving_tensors *t)
{
  at_status rc;
  const int rq = l->q_layout == AT_SEQ_RAGGED, rkv = l->kv_layout == AT_SEQ_RAGGED;
  const int paged = l->kv_layout == AT_SEQ_PAGED;
  if ((rc = check_presence("cu_seqlens_q", t->cu_seqlens_q, rq, l)) != AT_OK ||
      (rc = check_presence("cu_seqlens_kv", t->cu_seqlens_kv, rkv, l)) != AT_OK ||
      (rc = check_presence("block_table", t->block_table, paged, l)) != AT_OK ||
      (rc = check_presence("seqlens_kv", t->seqlens_kv, paged, l)) != AT_OK)
    return rc;
  if ((rc = check_count("total_q", t->total_q, rq, 0)) != AT_OK ||
      (rc = check_count("total_kv", t->total_kv, rkv, 0)) != AT_OK ||
      (rc = check_count("num_pages", t->num_pages, paged, 1)) != AT_OK)
    return rc;
  if ((rc = check_elements("total_q", t->total_q, s->q_heads, s->head_dim)) != AT_OK ||
      (rc = check_elements("total_kv", t->total_kv, s->kv_heads, s->head_dim)) != AT_OK ||
      (rc = check_elements("num_pages x page_size", (long long)t->num_pages * l->page_size, s->kv_heads,
                           s->head_dim)) != AT_OK)
    return rc;
  return AT_OK;
}

/* ---- a call's metadata, read on the host -------------------------------------------------------- */

/* cu_seqlens of B sequences packed in total rows, each at most max_len long. */
static at_status check_offsets(const char *name, const int32_t *cu, int batch, const char *max_name, int max_len,
                               const char *total_name, int total)
{
  if (cu[0] != 0) return at_fail(AT_ERR_INVALID, "%s[0] = %d, expected 0 (the first sequence starts at row 0)", name, cu[0]);
  for (int b = 0; b < batch; b++) {
    if (cu[b + 1] < cu[b])
      return at_fail(AT_ERR_INVALID, "%s[%d] = %d is below %s[%d] = %d (offsets must not decrease)", name, b + 1,
                     cu[b + 1], name, b, cu[b]);
    const long long len = (long long)cu[b + 1] - cu[b];
    if (len > max_len)
      return at_fail(AT_ERR_INVALID,
                     "%s: sequence %d is %lld rows long (%s[%d] - %s[%d] = %d - %d), more than the planned %s %d",
                     name, b, len, name, b + 1, name, b, cu[b + 1], cu[b], max_name, max_len);
  }
  if (cu[batch] != total)
    return at_fail(AT_ERR_INVALID, "%s[%d] = %d differs from %s %d (the rows the packed tensors hold)", name, batch,
                   cu[batch], total_name, total);
  return AT_OK;
}

static at_status check_block_table(const at_shape *s, const at_serving_layout *l, const at_serving_tensors *t)
{
  for (int b = 0; b < s->batch; b++) {
    const int len = t->seqlens_kv[b];
    if (len < 0 || len > s->kv_len)
      return at_fail(AT_ERR_INVALID, "seqlens_kv[%d] = %d is outside 0..%d (the planned kv_len)", b, len, s->kv_len);
    const long long used = pages_for(len, l->page_size);
    if (used > l->max_pages_per_seq) /* cannot happen with len <= kv_len and a checked layout */
      return at_fail(AT_ERR_INVALID, "seqlens_kv[%d] = %d needs %lld pages of %d, more than max_pages_per_seq %d", b,
                     len, used, l->page_size, l->max_pages_per_seq);
    const int32_t *row = t->block_table + (size_t)b * (size_t)l->max_pages_per_seq;
    for (long long p = 0; p < used; p++)
      if (row[p] < 0 || row[p] >= t->num_pages)
        return at_fail(AT_ERR_INVALID,
                       "block_table[%d][%lld] = %d is outside the pool (num_pages %d: pages 0..%d); sequence %d "
                       "uses its first %lld entries for %d tokens",
                       b, p, row[p], t->num_pages, t->num_pages - 1, b, used, len);
  }
  return AT_OK;
}

at_status at_serving_check_host(const at_shape *s, const at_serving_layout *given_layout,
                                const at_serving_tensors *given)
{
  at_serving_layout l;
  at_serving_tensors t;
  at_status rc;
  if ((rc = at_serving_layout_copy(s, given_layout, &l)) != AT_OK) return rc;
  if ((rc = at_versioned_copy("at_serving_tensors", given, sizeof t, sizeof t, &t)) != AT_OK) return rc;
  if ((rc = at_serving_fields_check(s, &l, &t)) != AT_OK) return rc;
  if (l.q_layout == AT_SEQ_RAGGED &&
      (rc = check_offsets("cu_seqlens_q", t.cu_seqlens_q, s->batch, "q_len", s->q_len, "total_q", t.total_q)) != AT_OK)
    return rc;
  if (l.kv_layout == AT_SEQ_RAGGED &&
      (rc = check_offsets("cu_seqlens_kv", t.cu_seqlens_kv, s->batch, "kv_len", s->kv_len, "total_kv", t.total_kv)) !=
          AT_OK)
    return rc;
  if (l.kv_layout == AT_SEQ_PAGED && (rc = check_block_table(s, &l, &t)) != AT_OK) return rc;
  return AT_OK;
}

/* ---- length mixes and keys ------------------------------------------------------------------------ */

/* splitmix64: a seeded stream with no state beyond the seed, so a {dist: uniform, seed} mix is
 * the same lengths on every machine and in every layer (core has no tuner rng). */
static uint64_t splitmix64(uint64_t *state)
{
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static at_status check_length_range(int min, int max)
{
  if (min < 0 || max < min || max > AT_MAX_SEQ_LEN)
    return at_fail(AT_ERR_INVALID, "length range %d..%d invalid (expected 0 <= min <= max <= %d)", min, max,
                   AT_MAX_SEQ_LEN);
  return AT_OK;
}

at_status at_lengths_uniform(int min, int max, uint64_t seed, int n, int *out)
{
  at_status rc;
  if ((rc = check_length_range(min, max)) != AT_OK) return rc;
  const uint64_t span = (uint64_t)max - (uint64_t)min + 1;
  uint64_t state = seed;
  for (int i = 0; i < n; i++) out[i] = min + (int)(splitmix64(&state) % span);
  return AT_OK;
}

static at_status parse_length(const char *text, const char *end, const char *what, int *out)
{
  long long v = 0;
  const char *c = text;
  if (c == end) return at_fail(AT_ERR_INVALID, "empty %s in lengths", what);
  for (; c < end; c++) {
    if (*c < '0' || *c > '9' || v > AT_MAX_SEQ_LEN)
      return at_fail(AT_ERR_INVALID, "%s '%.*s' in lengths is not a length in 0..%d", what, (int)(end - text), text,
                     AT_MAX_SEQ_LEN);
    v = v * 10 + (*c - '0');
  }
  if (v > AT_MAX_SEQ_LEN)
    return at_fail(AT_ERR_INVALID, "%s %lld in lengths is over %d", what, v, AT_MAX_SEQ_LEN);
  *out = (int)v;
  return AT_OK;
}

/* "uniform:MIN:MAX[:SEED]" */
static at_status parse_uniform(const char *text, int batch, int cap, int *out, int *n)
{
  const char *p = text + strlen("uniform:");
  const char *colon = strchr(p, ':');
  int min = 0, max = 0;
  at_status rc;
  if (!colon) return at_fail(AT_ERR_INVALID, "lengths '%s': expected uniform:MIN:MAX[:SEED]", text);
  const char *colon2 = strchr(colon + 1, ':');
  const char *max_end = colon2 ? colon2 : colon + 1 + strlen(colon + 1);
  if ((rc = parse_length(p, colon, "minimum", &min)) != AT_OK ||
      (rc = parse_length(colon + 1, max_end, "maximum", &max)) != AT_OK)
    return rc;
  uint64_t seed = 1;
  if (colon2) {
    char *end = NULL;
    seed = strtoull(colon2 + 1, &end, 10);
    if (!colon2[1] || *end) return at_fail(AT_ERR_INVALID, "lengths '%s': the seed is not an unsigned integer", text);
  }
  if (batch < 1 || batch > cap)
    return at_fail(AT_ERR_INVALID, "lengths '%s' for a batch of %d (expected 1..%d sequences)", text, batch, cap);
  if ((rc = at_lengths_uniform(min, max, seed, batch, out)) != AT_OK) return rc;
  *n = batch;
  return AT_OK;
}

at_status at_lengths_parse(const char *text, int batch, int cap, int *out, int *n)
{
  *n = 0;
  if (!text || !*text) return at_fail(AT_ERR_INVALID, "lengths are empty (expected L1,L2,... or uniform:MIN:MAX[:SEED])");
  if (strncmp(text, "uniform:", 8) == 0) return parse_uniform(text, batch, cap, out, n);
  at_status rc;
  for (const char *p = text;;) {
    const char *comma = strchr(p, ',');
    const char *end = comma ? comma : p + strlen(p);
    if (*n == cap) return at_fail(AT_ERR_INVALID, "lengths '%.40s...': more than %d sequences", text, cap);
    if ((rc = parse_length(p, end, "length", &out[*n])) != AT_OK) return rc;
    ++*n;
    if (!comma) return AT_OK;
    p = comma + 1;
  }
}

/* The smallest power of two at least the mean length (0 for a mix of empty sequences): kernels
 * are tuned per scale of sequence, not per exact mix, and the mean sets the work per sequence. */
static long long length_bucket(const int *lens, int n)
{
  long long sum = 0;
  for (int i = 0; i < n; i++) sum += lens[i] > 0 ? lens[i] : 0;
  const long long mean = n > 0 ? (sum + n - 1) / n : 0;
  long long bucket = mean > 0 ? 1 : 0;
  while (bucket && bucket < mean) bucket *= 2;
  return bucket;
}

void at_serving_key(const at_shape *s, const at_serving_layout *l, const int *q_lens, const int *kv_lens, char *buf,
                    size_t size)
{
  if (size == 0) return; /* nothing can be written, not even the terminating NUL */
  at_shape_key(s, buf, size);
  const size_t used = strlen(buf);
  at_serving_part(s, l, q_lens, kv_lens, buf + used, size - used);
}

void at_serving_part(const at_shape *s, const at_serving_layout *l, const int *q_lens, const int *kv_lens, char *buf,
                     size_t size)
{
  if (size == 0) return;
  buf[0] = '\0';
  if (!l || at_serving_is_padded(l)) return;
  size_t used = 0;
  if (l->q_layout == AT_SEQ_RAGGED && used < size)
    used += (size_t)snprintf(buf + used, size - used, ".qragged");
  if (l->kv_layout == AT_SEQ_RAGGED && used < size)
    used += (size_t)snprintf(buf + used, size - used, ".kvragged");
  if (l->kv_layout == AT_SEQ_PAGED && used < size)
    used += (size_t)snprintf(buf + used, size - used, ".kvpaged%d", l->page_size);
  if (l->q_layout == AT_SEQ_RAGGED && q_lens && used < size)
    used += (size_t)snprintf(buf + used, size - used, ".lq%lld", length_bucket(q_lens, s->batch));
  if (l->kv_layout != AT_SEQ_PADDED && kv_lens && used < size)
    snprintf(buf + used, size - used, ".lkv%lld", length_bucket(kv_lens, s->batch));
}
