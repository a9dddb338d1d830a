/* test_serving.c — serving layouts on the CPU: layout checks, size-versioned structs, the host
 * check of ragged offsets and paged block tables (good and bad metadata, messages that name the
 * array, the index and the value), the lookup chain's refusals for these layouts, and what
 * cuDNN's ragged graph takes (its refusals, its metadata scratch, its int32 offset bound). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cudnn_ragged.h"
#include "runtime/cudnn_sdpa.h"
#include "runtime/lookup.h"
#include "tests/testutil.h"

static at_shape shape(int batch, int t, int s)
{
  return (at_shape){.batch = batch, .q_len = t, .kv_len = s, .q_heads = 8, .kv_heads = 2, .head_dim = 64,
                    .dtype = AT_DTYPE_BF16, .mask = AT_MASK_CAUSAL_BR};
}

/* Fails unless rc is want and the message holds every one of the NULL-terminated words. */
static void expect_error(at_status rc, at_status want, ...)
{
  if (rc != want)
    fail_msg("got %s, expected %s: %s", at_status_name(rc), at_status_name(want), at_last_error());
  va_list ap;
  va_start(ap, want);
  for (const char *word = va_arg(ap, const char *); word; word = va_arg(ap, const char *))
    if (!strstr(at_last_error(), word)) fail_msg("message lacks '%s': %s", word, at_last_error());
  va_end(ap);
}

/* ---- names and page sizes ----------------------------------------------------------------------- */

static void test_names_and_page_sizes(void **state)
{
  (void)state;
  const char *names[] = {"padded", "ragged", "paged"};
  for (int i = 0; i < 3; i++) {
    at_seq_layout l;
    assert_string_equal(at_seq_layout_name((at_seq_layout)i), names[i]);
    TU_OK(at_seq_layout_parse(names[i], &l));
    assert_int_equal(l, i);
  }
  at_seq_layout l;
  expect_error(at_seq_layout_parse("packed", &l), AT_ERR_INVALID, "'packed'", "padded, ragged, paged", NULL);
  assert_string_equal(at_seq_layout_name((at_seq_layout)7), "?");
  const int allowed[] = {1, 16, 32, 64, 128, 256};
  for (int i = 0; i < 6; i++) assert_true(at_page_size_allowed(allowed[i]));
  const int refused[] = {0, -16, 2, 8, 15, 17, 48, 512, 1024};
  for (int i = 0; i < 9; i++) assert_false(at_page_size_allowed(refused[i]));
}

/* ---- layouts ------------------------------------------------------------------------------------ */

static void test_dense_layouts_are_valid(void **state)
{
  (void)state;
  const at_shape s = shape(3, 100, 1000);
  const int pages[] = {1, 16, 32, 64, 128, 256};
  for (int q = AT_SEQ_PADDED; q <= AT_SEQ_RAGGED; q++) {
    for (int kv = AT_SEQ_PADDED; kv <= AT_SEQ_RAGGED; kv++) {
      at_serving_layout l = at_serving_layout_make(&s, (at_seq_layout)q, (at_seq_layout)kv, 0);
      assert_int_equal(l.struct_size, sizeof l);
      TU_OK(at_serving_layout_check(&s, &l));
    }
    for (int i = 0; i < 6; i++) {
      at_serving_layout l = at_serving_layout_make(&s, (at_seq_layout)q, AT_SEQ_PAGED, pages[i]);
      TU_OK(at_serving_layout_check(&s, &l));
      assert_int_equal(l.max_pages_per_seq, (1000 + pages[i] - 1) / pages[i]);
      assert_int_equal(l.strides.k.batch, (int64_t)pages[i] * 2 * 64); /* one page */
      assert_int_equal(l.strides.k.seq, 2 * 64);
      assert_int_equal(l.strides.k.head, 64);
    }
  }
  at_serving_layout r = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);
  assert_int_equal(r.strides.q.batch, 0);
  assert_int_equal(r.strides.q.seq, 8 * 64);
  assert_int_equal(r.strides.o.seq, 8 * 64);
  assert_int_equal(r.strides.k.batch, 0);
  at_serving_layout p = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_PADDED, 0);
  at_layout bshd = at_layout_bshd(&s);
  assert_memory_equal(&p.strides, &bshd, sizeof bshd);
  assert_true(at_serving_is_padded(&p));
  assert_false(at_serving_is_padded(&r));
  char text[96];
  at_serving_layout pg = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  at_serving_layout_describe(&pg, text, sizeof text);
  assert_string_equal(text, "ragged Q with paged K/V (page size 16)");
  at_serving_layout_describe(&r, text, sizeof text);
  assert_string_equal(text, "ragged Q with ragged K/V");
}

static void test_bad_layouts_are_refused(void **state)
{
  (void)state;
  const at_shape s = shape(2, 64, 100);
  at_serving_layout l = at_serving_layout_make(&s, AT_SEQ_PAGED, AT_SEQ_PADDED, 0);
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "q_layout paged", "only K and V", NULL);
  l = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_PAGED, 8);
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "page_size 8 not allowed", "1, 16, 32, 64, 128, 256",
               NULL);
  l = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_PAGED, 0);
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "page_size 0 not allowed", NULL);
  l = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_PAGED, 16);
  l.max_pages_per_seq = 6; /* 96 tokens < kv_len 100 */
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "max_pages_per_seq 6", "96 tokens", "kv_len 100",
               "needs 7 pages", NULL);
  l = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_RAGGED, 16);
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "page_size 16", "only paged K/V has pages", NULL);
  l = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PADDED, 0);
  l.strides.q.batch = 64 * 8 * 64;
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "q batch stride 32768", "ragged", "must be 0", NULL);
  l = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_RAGGED, 0);
  l.strides.v.batch = 1;
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "v batch stride 1", NULL);
  l = at_serving_layout_make(&s, AT_SEQ_PADDED, (at_seq_layout)9, 0);
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "kv_layout 9 unknown", NULL);
  at_shape bad = s;
  bad.kv_heads = 3;
  l = at_serving_layout_make(&bad, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);
  expect_error(at_serving_layout_check(&bad, &l), AT_ERR_INVALID, "q_heads 8 is not a multiple of kv_heads 3", NULL);
}

/* ---- size-versioned structs ---------------------------------------------------------------------- */

/* A caller built against a later header: this version's fields, then ones it does not know. */
typedef struct later_layout {
  at_serving_layout v1;
  int future_flag;
  int future_pad;
} later_layout;

static void test_struct_sizes_are_versions(void **state)
{
  (void)state;
  const at_shape s = shape(2, 64, 100);
  at_serving_layout l = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  l.struct_size = 0;
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "at_serving_layout.struct_size is 0",
               "sizeof(at_serving_layout)", NULL);
  l.struct_size = sizeof(size_t) + 4;
  expect_error(at_serving_layout_check(&s, &l), AT_ERR_INVALID, "smaller than its first version", NULL);
  expect_error(at_serving_layout_check(&s, NULL), AT_ERR_INVALID, "at_serving_layout is NULL", NULL);

  later_layout later;
  memset(&later, 0, sizeof later);
  later.v1 = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  later.v1.struct_size = sizeof later;
  TU_OK(at_serving_layout_check(&s, &later.v1)); /* the unknown tail asks for nothing */
  at_serving_layout copy;
  TU_OK(at_serving_layout_copy(&s, &later.v1, &copy));
  assert_int_equal(copy.struct_size, sizeof copy);
  assert_int_equal(copy.page_size, 16);
  later.future_flag = 1;
  expect_error(at_serving_layout_check(&s, &later.v1), AT_ERR_UNSUPPORTED, "does not know", NULL);

  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  assert_int_equal(t.struct_size, sizeof t);
  assert_null(t.q);
  assert_null(t.block_table);
  assert_int_equal(t.num_pages, 0);
  at_serving_tensors zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  at_serving_layout padded = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_PADDED, 0);
  expect_error(at_serving_check_host(&s, &padded, &zeroed), AT_ERR_INVALID, "at_serving_tensors.struct_size is 0",
               NULL);
  TU_OK(at_serving_check_host(&s, &padded, &t));
}

/* ---- metadata ------------------------------------------------------------------------------------ */

static at_status check_ragged(const at_shape *s, const int32_t *cu_q, int total_q, const int32_t *cu_kv,
                              int total_kv)
{
  at_serving_layout l = at_serving_layout_make(s, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);
  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  t.cu_seqlens_q = cu_q, t.total_q = total_q;
  t.cu_seqlens_kv = cu_kv, t.total_kv = total_kv;
  return at_serving_check_host(s, &l, &t);
}

static void test_ragged_offsets(void **state)
{
  (void)state;
  const at_shape s = shape(4, 64, 100);
  const int32_t cu_q[] = {0, 64, 64, 65, 100}, cu_kv[] = {0, 100, 100, 101, 190};
  TU_OK(check_ragged(&s, cu_q, 100, cu_kv, 190)); /* lengths 64, 0, 1, 35 and 100, 0, 1, 89 */

  const int32_t decreasing[] = {0, 64, 60, 65, 100};
  expect_error(check_ragged(&s, decreasing, 100, cu_kv, 190), AT_ERR_INVALID, "cu_seqlens_q[2] = 60",
               "below cu_seqlens_q[1] = 64", "must not decrease", NULL);
  const int32_t not_zero[] = {3, 64, 64, 65, 100};
  expect_error(check_ragged(&s, not_zero, 100, cu_kv, 190), AT_ERR_INVALID, "cu_seqlens_q[0] = 3", "expected 0", NULL);
  const int32_t too_long[] = {0, 10, 75, 80, 100}; /* sequence 1: 65 rows > q_len 64 */
  expect_error(check_ragged(&s, too_long, 100, cu_kv, 190), AT_ERR_INVALID, "sequence 1 is 65 rows long",
               "cu_seqlens_q[2] - cu_seqlens_q[1] = 75 - 10", "planned q_len 64", NULL);
  expect_error(check_ragged(&s, cu_q, 128, cu_kv, 190), AT_ERR_INVALID, "cu_seqlens_q[4] = 100", "total_q 128",
               NULL);
  const int32_t kv_long[] = {0, 100, 201, 201, 290};
  expect_error(check_ragged(&s, cu_q, 100, kv_long, 290), AT_ERR_INVALID, "cu_seqlens_kv: sequence 1 is 101 rows",
               "planned kv_len 100", NULL);
  const int32_t kv_negative[] = {0, -5, 0, 1, 90};
  expect_error(check_ragged(&s, cu_q, 100, kv_negative, 90), AT_ERR_INVALID, "cu_seqlens_kv[1] = -5", NULL);

  /* Pointers the layout needs, and ones it does not use. */
  expect_error(check_ragged(&s, NULL, 100, cu_kv, 190), AT_ERR_INVALID, "cu_seqlens_q is NULL",
               "ragged Q with ragged K/V", NULL);
  expect_error(check_ragged(&s, cu_q, -1, cu_kv, 190), AT_ERR_INVALID, "total_q -1", NULL);
  at_serving_layout padded_kv = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PADDED, 0);
  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  t.cu_seqlens_q = cu_q, t.total_q = 100, t.cu_seqlens_kv = cu_kv;
  expect_error(at_serving_check_host(&s, &padded_kv, &t), AT_ERR_INVALID, "cu_seqlens_kv is given",
               "does not use it", NULL);
  t.cu_seqlens_kv = NULL, t.total_kv = 190;
  expect_error(at_serving_check_host(&s, &padded_kv, &t), AT_ERR_INVALID, "total_kv 190 given", NULL);
  t.total_kv = 0;
  TU_OK(at_serving_check_host(&s, &padded_kv, &t));
  /* Every sequence empty is a valid call. */
  const int32_t empty[] = {0, 0, 0, 0, 0};
  TU_OK(check_ragged(&s, empty, 0, empty, 0));
}

typedef struct paged_meta {
  at_serving_layout layout;
  at_serving_tensors t;
  int32_t table[4 * 8];
  int32_t lens[4];
} paged_meta;

/* Four sequences of kv lengths 100, 0, 1, 33 at page size 16 in a pool of 20 pages, pages
 * scattered; table entries past each sequence's pages hold garbage that must not matter. */
static void make_paged(const at_shape *s, paged_meta *m)
{
  m->layout = at_serving_layout_make(s, AT_SEQ_PADDED, AT_SEQ_PAGED, 16);
  assert_int_equal(m->layout.max_pages_per_seq, 7);
  m->layout.max_pages_per_seq = 8; /* wider than needed, as servers allocate */
  const int32_t lens[4] = {100, 0, 1, 33};
  for (int i = 0; i < 4 * 8; i++) m->table[i] = -77777 - i;
  const int32_t seq0[] = {19, 3, 7, 0, 11, 12, 5}, seq2[] = {2}, seq3[] = {3, 18, 9}; /* 3: shared */
  memcpy(m->table + 0 * 8, seq0, sizeof seq0);
  memcpy(m->table + 2 * 8, seq2, sizeof seq2);
  memcpy(m->table + 3 * 8, seq3, sizeof seq3);
  memcpy(m->lens, lens, sizeof lens);
  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  t.block_table = m->table, t.seqlens_kv = m->lens, t.num_pages = 20;
  m->t = t;
}

static void test_paged_block_tables(void **state)
{
  (void)state;
  const at_shape s = shape(4, 1, 100);
  paged_meta m;
  make_paged(&s, &m);
  TU_OK(at_serving_check_host(&s, &m.layout, &m.t));

  m.table[3 * 8 + 2] = 20;
  expect_error(at_serving_check_host(&s, &m.layout, &m.t), AT_ERR_INVALID, "block_table[3][2] = 20",
               "outside the pool", "num_pages 20: pages 0..19", "first 3 entries for 33 tokens", NULL);
  m.table[3 * 8 + 2] = -1;
  expect_error(at_serving_check_host(&s, &m.layout, &m.t), AT_ERR_INVALID, "block_table[3][2] = -1", NULL);
  make_paged(&s, &m);
  m.table[0 * 8 + 6] = 1 << 30; /* the last page of the longest sequence */
  expect_error(at_serving_check_host(&s, &m.layout, &m.t), AT_ERR_INVALID, "block_table[0][6] = 1073741824", NULL);

  make_paged(&s, &m);
  m.lens[2] = 101;
  expect_error(at_serving_check_host(&s, &m.layout, &m.t), AT_ERR_INVALID, "seqlens_kv[2] = 101",
               "outside 0..100", "planned kv_len", NULL);
  m.lens[2] = -1;
  expect_error(at_serving_check_host(&s, &m.layout, &m.t), AT_ERR_INVALID, "seqlens_kv[2] = -1", NULL);
  make_paged(&s, &m);
  m.lens[2] = 17; /* now it uses a second entry, which holds garbage */
  expect_error(at_serving_check_host(&s, &m.layout, &m.t), AT_ERR_INVALID, "block_table[2][1] = ", NULL);

  make_paged(&s, &m);
  m.t.num_pages = 0;
  expect_error(at_serving_check_host(&s, &m.layout, &m.t), AT_ERR_INVALID, "num_pages 0 must be at least 1", NULL);
  make_paged(&s, &m);
  m.t.block_table = NULL;
  expect_error(at_serving_check_host(&s, &m.layout, &m.t), AT_ERR_INVALID, "block_table is NULL",
               "padded Q with paged K/V (page size 16)", NULL);
  make_paged(&s, &m);
  m.layout.page_size = 24;
  expect_error(at_serving_check_host(&s, &m.layout, &m.t), AT_ERR_INVALID, "page_size 24 not allowed", NULL);

  /* Page size 1: one entry per token. */
  const at_shape tiny = shape(2, 1, 3);
  at_serving_layout l = at_serving_layout_make(&tiny, AT_SEQ_RAGGED, AT_SEQ_PAGED, 1);
  int32_t table[2 * 3] = {4, 0, 2, 1, -9, -9}, lens[2] = {3, 1}, cu_q[3] = {0, 1, 2};
  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  t.cu_seqlens_q = cu_q, t.total_q = 2, t.block_table = table, t.seqlens_kv = lens, t.num_pages = 5;
  TU_OK(at_serving_check_host(&tiny, &l, &t));
  lens[1] = 2;
  expect_error(at_serving_check_host(&tiny, &l, &t), AT_ERR_INVALID, "block_table[1][1] = -9", NULL);
}

/* ---- the lookup chain ------------------------------------------------------------------------------ */

static void test_lookup_falls_back_to_naive(void **state)
{
  (void)state;
  gen_target target;
  TU_OK(gen_target_for_arch("sm_90a", &target));
  const cache_env now = tu_h200_env(""); /* no cache: only the GPU model matters */
  const at_shape s = shape(4, 512, 4096);
  rt_lookup l;
  at_serving_layout kv_ragged = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_RAGGED, 0);
  TU_OK(rt_lookup_chain_serving(NULL, &now, &target, &s, &kv_ragged, 0, &l));
  assert_int_equal(l.n_steps, 1);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_NAIVE);
  assert_string_equal(l.steps[0].impl, "naive");
  printf("  skipped: %s\n", l.skipped);
  const char *words[] = {"unsupported", "padded Q with ragged K/V", "not built yet", "cuDNN"};
  for (int i = 0; i < 4; i++)
    if (!strstr(l.skipped, words[i])) fail_msg("skipped lacks '%s': %s", words[i], l.skipped);

  TU_OK(rt_lookup_chain_serving(NULL, &now, &target, &s, &kv_ragged, 1, &l));
  assert_int_equal(l.n_steps, 0); /* "fused": nothing generated reads it */
  assert_non_null(strstr(l.skipped, "unsupported"));

  /* Ragged Q with paged K/V: the .rgq paged default (fa3's on sm_90a), then naive; cuDNN skipped
   * with its reason. */
  at_serving_layout ragged = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  TU_OK(rt_lookup_chain_serving(NULL, &now, &target, &s, &ragged, 0, &l));
  assert_int_equal(l.n_steps, 2);
  assert_non_null(strstr(l.steps[0].impl, ".pg16.rgq."));
  assert_string_equal(l.steps[1].impl, "naive");
  assert_non_null(strstr(l.skipped, "cuDNN: unsupported: ragged Q with paged K/V (page size 16)"));

  /* Padded tensors (or no layout): the ordinary chain, default first. */
  at_serving_layout padded = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_PADDED, 0);
  rt_lookup plain;
  TU_OK(rt_lookup_chain(NULL, &now, &target, &s, 0, &plain));
  TU_OK(rt_lookup_chain_serving(NULL, &now, &target, &s, &padded, 0, &l));
  assert_int_equal(l.n_steps, plain.n_steps);
  assert_true(l.n_steps >= 2);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
  assert_string_equal(l.steps[0].impl, plain.steps[0].impl);
  TU_OK(rt_lookup_chain_serving(NULL, &now, &target, &s, NULL, 0, &l));
  assert_int_equal(l.n_steps, plain.n_steps);

  at_serving_layout bad = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PAGED, 12);
  expect_error(rt_lookup_chain_serving(NULL, &now, &target, &s, &bad, 0, &l), AT_ERR_INVALID, "page_size 12", NULL);
}

/* ---- cuDNN's ragged graph ------------------------------------------------------------------------ */

/* Fails unless rt_cudnn_serving_supported says no, with every one of the NULL-terminated words. */
static void expect_cudnn_refusal(const at_shape *s, const at_serving_layout *l, ...)
{
  char why[256];
  if (rt_cudnn_serving_supported(s, l, why, sizeof why)) fail_msg("cuDNN's graphs should refuse this layout");
  printf("  refused: %s\n", why);
  va_list ap;
  va_start(ap, l);
  for (const char *word = va_arg(ap, const char *); word; word = va_arg(ap, const char *))
    if (!strstr(why, word)) fail_msg("reason lacks '%s': %s", word, why);
  va_end(ap);
}

/* Ragged Q with ragged or padded K/V in f16/bf16 is cuDNN's (the lookup chain puts cuDNN between
 * the ragged default and naive); everything else is refused, and the reason names the layout and
 * what is missing. */
static void test_cudnn_ragged_support(void **state)
{
  (void)state;
  gen_target target;
  TU_OK(gen_target_for_arch("sm_90a", &target));
  const cache_env now = tu_h200_env(""); /* no cache: only the GPU model matters */
  at_shape s = shape(4, 512, 4096);
  char why[256] = "x";
  assert_true(rt_cudnn_serving_supported(&s, NULL, why, sizeof why));
  assert_string_equal(why, "");
  const at_seq_layout kv_kinds[] = {AT_SEQ_RAGGED, AT_SEQ_PADDED};
  const at_dtype dtypes[] = {AT_DTYPE_BF16, AT_DTYPE_F16};
  for (int i = 0; i < 2; i++) {
    at_shape t = s;
    t.dtype = dtypes[i];
    at_serving_layout l = at_serving_layout_make(&t, AT_SEQ_RAGGED, kv_kinds[i], 0);
    assert_true(rt_cudnn_serving_supported(&t, &l, why, sizeof why));
    rt_lookup chain;
    TU_OK(rt_lookup_chain_serving(NULL, &now, &target, &t, &l, 0, &chain));
    assert_int_equal(chain.n_steps, 3);
    assert_int_equal(chain.steps[0].choice, AT_CHOICE_DEFAULT);
    assert_int_equal(chain.steps[1].choice, AT_CHOICE_CUDNN);
    assert_string_equal(chain.steps[1].impl, "cudnn");
    assert_non_null(strstr(chain.steps[1].why, "ragged graph"));
    assert_string_equal(chain.steps[2].impl, "naive");
    TU_OK(rt_lookup_chain_serving(NULL, &now, &target, &t, &l, 1, &chain)); /* "fused": no cuDNN */
    for (int k = 0; k < chain.n_steps; k++) assert_string_not_equal(chain.steps[k].impl, "cudnn");
  }
  at_serving_layout paged = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  expect_cudnn_refusal(&s, &paged, "ragged Q with paged K/V (page size 16)", "paged cuDNN graph takes padded Q",
                       "not built yet", NULL);
  /* Padded Q with paged K/V: cuDNN's paged graph (paged cache loads), after the paged default. */
  at_shape dec = shape(4, 1, 4096);
  at_serving_layout decode = at_serving_layout_make(&dec, AT_SEQ_PADDED, AT_SEQ_PAGED, 64);
  assert_true(rt_cudnn_serving_supported(&dec, &decode, why, sizeof why));
  rt_lookup paged_chain;
  TU_OK(rt_lookup_chain_serving(NULL, &now, &target, &dec, &decode, 0, &paged_chain));
  assert_int_equal(paged_chain.n_steps, 3);
  assert_int_equal(paged_chain.steps[0].choice, AT_CHOICE_DEFAULT);
  assert_string_equal(paged_chain.steps[1].impl, "cudnn");
  assert_non_null(strstr(paged_chain.steps[1].why, "paged graph"));
  at_shape dec8 = dec;
  dec8.kv_dtype = AT_DTYPE_E4M3;
  expect_cudnn_refusal(&dec8, &decode, "padded Q with paged K/V (page size 64)", "one dtype", NULL);
  at_serving_layout kv_only = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_RAGGED, 0);
  expect_cudnn_refusal(&s, &kv_only, "padded Q with ragged K/V", "takes ragged Q", NULL);
  at_serving_layout ragged = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);
  at_shape wide = s;
  wide.dtype = AT_DTYPE_F32;
  expect_cudnn_refusal(&wide, &ragged, "with f32 inputs", "f16 or bf16", NULL);
  wide.dtype = AT_DTYPE_E4M3;
  expect_cudnn_refusal(&wide, &ragged, "with e4m3 inputs", "writes FP8", NULL);
  wide.dtype = AT_DTYPE_BF16, wide.kv_dtype = AT_DTYPE_E5M2;
  expect_cudnn_refusal(&wide, &ragged, "one dtype", NULL);
  rt_lookup chain; /* the chain says the same, and goes on to naive */
  TU_OK(rt_lookup_chain_serving(NULL, &now, &target, &wide, &ragged, 0, &chain));
  assert_string_equal(chain.steps[chain.n_steps - 1].impl, "naive");
  assert_non_null(strstr(chain.skipped, "cuDNN: unsupported"));
  assert_non_null(strstr(chain.skipped, "one dtype"));
}

/* The ragged graph's metadata: offsets [B + 1] of Q, O, K, V and lengths [B] of Q and K/V, each
 * 256-byte aligned and apart; cuDNN's stats [B, Nq, T] only with lse. The fix-up after the graph
 * runs where a row may see no key or the lse is wanted. */
static void test_cudnn_ragged_metadata(void **state)
{
  (void)state;
  at_shape s = shape(3, 100, 200);
  s.with_lse = 0;
  const size_t plain = rt_cudnn_ragged_meta_bytes(&s);
  assert_int_equal(plain, 6 * 256);
  rt_cudnn_ragged_meta m = rt_cudnn_ragged_meta_at(4096, &s);
  const CUdeviceptr parts[] = {m.q_off, m.o_off, m.k_off, m.v_off, m.seq_q, m.seq_kv};
  for (int i = 0; i < 6; i++) assert_int_equal(parts[i], 4096 + 256 * i);
  assert_int_equal(m.stats, 0);
  s.with_lse = 1;
  assert_int_equal(rt_cudnn_ragged_meta_bytes(&s), plain + 3 * 8 * 100 * sizeof(float) / 256 * 256 + 256);
  m = rt_cudnn_ragged_meta_at(4096, &s);
  assert_int_equal(m.stats, 4096 + 6 * 256);
  at_shape big = shape(1000, 100, 200); /* offsets of 1001 entries: 4004 bytes, 16 blocks */
  big.with_lse = 0;
  assert_int_equal(rt_cudnn_ragged_meta_bytes(&big), 4 * 4096 + 2 * 4096);

  at_serving_layout rg = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);
  at_serving_layout rgq = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PADDED, 0);
  assert_true(rt_cudnn_ragged_needs_finish(&s, &rgq)); /* lse */
  s.with_lse = 0;
  assert_true(rt_cudnn_ragged_needs_finish(&s, &rg)); /* S_b may be 0 */
  s.mask = AT_MASK_CAUSAL_TL;
  assert_false(rt_cudnn_ragged_needs_finish(&s, &rgq)); /* every row sees key 0 */
  s.mask = AT_MASK_CAUSAL_BR;
  assert_false(rt_cudnn_ragged_needs_finish(&s, &rgq)); /* T <= S: row i sees i + S - T_b >= 0 */
  at_shape longer_q = shape(3, 300, 200);
  at_serving_layout rgq_long = at_serving_layout_make(&longer_q, AT_SEQ_RAGGED, AT_SEQ_PADDED, 0);
  assert_true(rt_cudnn_ragged_needs_finish(&longer_q, &rgq_long)); /* T_b > S: the first rows see none */
}

/* cuDNN's ragged offsets are int32 elements: the last row's start times the seq stride must fit,
 * for Q and O (total_q) and packed K and V (total_kv); the message names the tensor and the numbers. */
static void test_cudnn_ragged_offsets_fit_int32(void **state)
{
  (void)state;
  at_shape s = shape(2, 100000, 100000);
  s.q_heads = 64, s.kv_heads = 8, s.head_dim = 256; /* Q rows of 16384 elements */
  at_serving_layout l = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);
  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  t.q_stride = l.strides.q, t.k_stride = l.strides.k, t.v_stride = l.strides.v, t.o_stride = l.strides.o;
  t.total_q = 131071, t.total_kv = 200000; /* 131071 x 16384 < 2^31; 200000 x 2048 too */
  TU_OK(rt_cudnn_ragged_check_offsets(&l, &t));
  t.total_q = 131072; /* 2^31 */
  expect_error(rt_cudnn_ragged_check_offsets(&l, &t), AT_ERR_UNSUPPORTED, "int32", "q's last", "131072",
               "16384", "2147483648", NULL);
  t.total_q = 1000, t.total_kv = 1 << 20; /* 2^20 x 2048 = 2^31 */
  expect_error(rt_cudnn_ragged_check_offsets(&l, &t), AT_ERR_UNSUPPORTED, "k's last", NULL);
  at_serving_layout padded_kv = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PADDED, 0);
  TU_OK(rt_cudnn_ragged_check_offsets(&padded_kv, &t)); /* padded K/V have no offsets */
}

/* ---- length mixes and keys ------------------------------------------------------------------------ */

static void test_length_mixes(void **state)
{
  (void)state;
  int lens[64], n = 0;
  TU_OK(at_lengths_parse("512,0,1,8192", 7, 64, lens, &n));
  assert_int_equal(n, 4); /* a list sets the batch */
  assert_int_equal(lens[0], 512);
  assert_int_equal(lens[1], 0);
  assert_int_equal(lens[2], 1);
  assert_int_equal(lens[3], 8192);
  TU_OK(at_lengths_parse("uniform:512:8192:7", 32, 64, lens, &n));
  assert_int_equal(n, 32);
  int again[64], spread = 0;
  TU_OK(at_lengths_uniform(512, 8192, 7, 32, again));
  assert_memory_equal(lens, again, 32 * sizeof *lens); /* the seed gives the same mix */
  for (int i = 0; i < 32; i++) {
    assert_true(lens[i] >= 512 && lens[i] <= 8192);
    spread |= lens[i] != lens[0];
  }
  assert_true(spread);
  TU_OK(at_lengths_parse("uniform:3:3", 5, 64, lens, &n)); /* default seed */
  assert_int_equal(n, 5);
  for (int i = 0; i < 5; i++) assert_int_equal(lens[i], 3);
  TU_OK(at_lengths_uniform(0, 1, 99, 64, lens));
  int seen[2] = {0, 0};
  for (int i = 0; i < 64; i++) seen[lens[i]]++;
  assert_true(seen[0] > 0 && seen[1] > 0); /* both ends of the range are drawn */

  expect_error(at_lengths_parse("512,,3", 1, 64, lens, &n), AT_ERR_INVALID, "empty length", NULL);
  expect_error(at_lengths_parse("512,-3", 1, 64, lens, &n), AT_ERR_INVALID, "'-3'", NULL);
  expect_error(at_lengths_parse("12x", 1, 64, lens, &n), AT_ERR_INVALID, "'12x'", NULL);
  expect_error(at_lengths_parse("2000000000", 1, 64, lens, &n), AT_ERR_INVALID, "2000000000", NULL);
  expect_error(at_lengths_parse("uniform:9:3", 4, 64, lens, &n), AT_ERR_INVALID, "length range 9..3", NULL);
  expect_error(at_lengths_parse("uniform:1", 4, 64, lens, &n), AT_ERR_INVALID, "uniform:MIN:MAX", NULL);
  expect_error(at_lengths_parse("uniform:1:4:x", 4, 64, lens, &n), AT_ERR_INVALID, "seed", NULL);
  expect_error(at_lengths_parse("uniform:1:4", 100, 64, lens, &n), AT_ERR_INVALID, "batch of 100", NULL);
  expect_error(at_lengths_parse("", 4, 64, lens, &n), AT_ERR_INVALID, "empty", NULL);
  expect_error(at_lengths_parse("1,2,3", 4, 2, lens, &n), AT_ERR_INVALID, "more than 2 sequences", NULL);
}

static void test_serving_keys(void **state)
{
  (void)state;
  at_shape s = shape(4, 4096, 4096);
  s.q_heads = 16, s.kv_heads = 16, s.head_dim = 128;
  const int q[4] = {100, 4096, 1, 0}, kv[4] = {1000, 4096, 3000, 0}; /* means 1050 and 2024 */
  char key[256], plain[160];
  at_shape_key(&s, plain, sizeof plain);
  at_serving_layout l = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  at_serving_key(&s, &l, q, kv, key, sizeof key);
  assert_string_equal(key, "b4.t4096.s4096.hq16.hkv16.d128.bf16.causal-br.qragged.kvpaged16.lq2048.lkv2048");
  char part[64];
  at_serving_part(&s, &l, q, kv, part, sizeof part); /* what follows at_shape_key */
  assert_string_equal(part, ".qragged.kvpaged16.lq2048.lkv2048");
  at_serving_part(&s, &l, NULL, NULL, part, sizeof part);
  assert_string_equal(part, ".qragged.kvpaged16");
  at_serving_part(&s, NULL, q, kv, part, sizeof part);
  assert_string_equal(part, "");
  l = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_PAGED, 256);
  at_serving_key(&s, &l, NULL, kv, key, sizeof key);
  assert_string_equal(key, "b4.t4096.s4096.hq16.hkv16.d128.bf16.causal-br.kvpaged256.lkv2048");
  l = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_RAGGED, 0);
  const int zeros[4] = {0, 0, 0, 0}, ones[4] = {1, 1, 1, 1};
  at_serving_key(&s, &l, zeros, ones, key, sizeof key);
  assert_string_equal(key, "b4.t4096.s4096.hq16.hkv16.d128.bf16.causal-br.qragged.kvragged.lq0.lkv1");
  l = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_PADDED, 0);
  at_serving_key(&s, &l, q, kv, key, sizeof key);
  assert_string_equal(key, plain); /* padded: the ordinary key */
  at_serving_key(&s, NULL, NULL, NULL, key, sizeof key);
  assert_string_equal(key, plain);
  /* Short buffers: cut and terminated; none at all: untouched. */
  l = at_serving_layout_make(&s, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  at_serving_key(&s, &l, q, kv, key, sizeof key);
  const size_t full = strlen(key);
  for (size_t cap = 1; cap < 100; cap++) {
    char small[100];
    memset(small, 'x', sizeof small);
    at_serving_key(&s, &l, q, kv, small, cap);
    assert_int_equal(strlen(small), cap - 1 < full ? cap - 1 : full);
    assert_int_equal(small[cap], 'x');
  }
  key[0] = 'x';
  at_serving_key(&s, &l, q, kv, key, 0);
  assert_int_equal(key[0], 'x');
}

/* ---- the library without a GPU ---------------------------------------------------------------------- */

static void test_api_refuses_null_plans(void **state)
{
  (void)state;
  at_serving_tensors t = AT_SERVING_TENSORS_INIT;
  double ms;
  expect_error(at_plan_run_serving(NULL, &t, NULL, NULL), AT_ERR_INVALID, "plan is NULL", NULL);
  expect_error(at_plan_benchmark_serving(NULL, &t, NULL, 1, 1, &ms), AT_ERR_INVALID, "plan is NULL", NULL);
  expect_error(at_serving_check(NULL, &t), AT_ERR_INVALID, "plan is NULL", NULL);
  at_plan *p = (at_plan *)&t;
  at_shape s = shape(1, 1, 1);
  expect_error(at_plan_create_serving(NULL, &s, NULL, NULL, &p), AT_ERR_INVALID, "context is NULL", NULL);
  assert_null(p);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_and_page_sizes),
      cmocka_unit_test(test_dense_layouts_are_valid),
      cmocka_unit_test(test_bad_layouts_are_refused),
      cmocka_unit_test(test_struct_sizes_are_versions),
      cmocka_unit_test(test_ragged_offsets),
      cmocka_unit_test(test_paged_block_tables),
      cmocka_unit_test(test_lookup_falls_back_to_naive),
      cmocka_unit_test(test_cudnn_ragged_support),
      cmocka_unit_test(test_cudnn_ragged_metadata),
      cmocka_unit_test(test_cudnn_ragged_offsets_fit_int32),
      cmocka_unit_test(test_length_mixes),
      cmocka_unit_test(test_serving_keys),
      cmocka_unit_test(test_api_refuses_null_plans),
  };
  return TU_RUN_GROUP(tests, NULL, NULL);
}
