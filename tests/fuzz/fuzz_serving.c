/*
 * fuzz_serving.c — libFuzzer target: arbitrary bytes as a serving layout and a call's metadata
 * through at_serving_check_host (offsets, lengths and block tables in arrays sized exactly as the
 * layout says, so that a read past one is an ASan finding), at_serving_key into buffers of every
 * size, and the tail of the input as at_lengths_parse text. Whatever the metadata holds, the
 * check must return (AT_OK or AT_ERR_INVALID with a message), never read outside its arrays.
 * Seeds: corpus/serving/ (tests/fuzz/make_seeds.c).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input read front to back; past its end every byte is 0. */
typedef struct reader {
  const uint8_t *data;
  size_t size, at;
} reader;

static uint8_t next_byte(reader *r) { return r->at < r->size ? r->data[r->at++] : 0; }

static int32_t next_int(reader *r)
{
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)next_byte(r) << (8 * i);
  return (int32_t)v;
}

/* An exactly sized copy of n int32 from the input (NULL for n == 0). */
static int32_t *next_ints(reader *r, size_t n)
{
  if (n == 0) return NULL;
  int32_t *v = malloc(n * sizeof *v);
  if (!v) abort();
  for (size_t i = 0; i < n; i++) v[i] = next_int(r);
  return v;
}

static void check_key(const at_shape *s, const at_serving_layout *l, const int *q_lens, const int *kv_lens, size_t cap)
{
  char *buf = malloc(cap ? cap : 1);
  if (!buf) abort();
  at_serving_key(s, l, q_lens, kv_lens, buf, cap);
  if (cap && strlen(buf) >= cap) abort();
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const int PAGES[] = {1, 16, 32, 64, 128, 256, 0, 8, -16};
  reader r = {data, size, 0};
  at_shape s = {.batch = 1 + next_byte(&r) % 16, .q_len = 1 + next_byte(&r) % 64, .kv_len = 1 + next_byte(&r) % 200,
                .q_heads = 4, .kv_heads = 2, .head_dim = 64, .dtype = AT_DTYPE_BF16, .mask = AT_MASK_CAUSAL_BR};
  const int q_kind = next_byte(&r) % 4, kv_kind = next_byte(&r) % 4; /* 3: a value no layout has */
  at_serving_layout l = at_serving_layout_make(&s, (at_seq_layout)q_kind, (at_seq_layout)kv_kind,
                                               PAGES[next_byte(&r) % (sizeof PAGES / sizeof *PAGES)]);
  l.max_pages_per_seq += (int)(next_byte(&r) % 8) - 2; /* sometimes too narrow a table */
  const int wide = l.max_pages_per_seq > 0 ? l.max_pages_per_seq : 0;
  /* Now and then another version: a struct_size below this one's, or a later header's larger
   * struct (the layout followed by fields this library does not know, zero or not). The tail is
   * real memory: struct_size is the caller's sizeof, never more than the struct it sent. */
  struct {
    at_serving_layout layout;
    unsigned char tail[64];
  } sent;
  memset(&sent, 0, sizeof sent);
  sent.layout = l;
  const int version = next_byte(&r);
  if (version % 16 == 0) sent.layout.struct_size = (size_t)(version / 16);
  if (version % 16 == 1) {
    sent.layout.struct_size = sizeof l + next_byte(&r) % sizeof sent.tail;
    if (next_byte(&r) % 2) sent.tail[next_byte(&r) % sizeof sent.tail] = 1;
  }

  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  t.total_q = next_int(&r) % 4096, t.total_kv = next_int(&r) % 4096, t.num_pages = next_int(&r) % 4096;
  const int flags = next_byte(&r); /* which arrays are given: usually the ones the layout uses */
  int32_t *cu_q = next_ints(&r, (flags & 1) ? (size_t)s.batch + 1 : 0);
  int32_t *cu_kv = next_ints(&r, (flags & 2) ? (size_t)s.batch + 1 : 0);
  int32_t *lens = next_ints(&r, (flags & 4) ? (size_t)s.batch : 0);
  int32_t *table = next_ints(&r, (flags & 8) ? (size_t)s.batch * (size_t)wide : 0);
  t.cu_seqlens_q = cu_q, t.cu_seqlens_kv = cu_kv, t.seqlens_kv = lens, t.block_table = table;

  at_status rc = at_serving_check_host(&s, &sent.layout, &t);
  if (rc != AT_OK && (rc != AT_ERR_INVALID && rc != AT_ERR_UNSUPPORTED)) abort();
  if (rc != AT_OK && !at_last_error()[0]) abort(); /* a refusal always says why */
  if (rc == AT_OK && l.q_layout == AT_SEQ_RAGGED && cu_q[s.batch] != t.total_q) abort();

  /* Keys of whatever lengths the input holds, into buffers of every size up to a real key's. */
  const size_t cap = next_byte(&r) % 200;
  int *q_lens = cu_q, *kv_lens = lens;
  if (at_serving_layout_check(&s, &sent.layout) == AT_OK) check_key(&s, &l, q_lens, kv_lens, cap);

  /* The rest as a lengths spec. */
  char *text = malloc(size - (r.at < size ? r.at : size) + 1);
  if (!text) abort();
  size_t n_text = r.at < size ? size - r.at : 0;
  memcpy(text, data + (size - n_text), n_text);
  text[n_text] = '\0';
  int out[8], n = 0;
  if (at_lengths_parse(text, 1 + (int)(n_text % 8), 8, out, &n) == AT_OK) {
    if (n < 1 || n > 8) abort();
    for (int i = 0; i < n; i++)
      if (out[i] < 0 || out[i] > AT_MAX_SEQ_LEN) abort();
  }
  free(text);
  free(cu_q), free(cu_kv), free(lens), free(table);
  return 0;
}
