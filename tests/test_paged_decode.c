/* test_paged_decode.c — the decode family's paged K/V variants on the host (no GPU): keys with
 * page sizes round-trip and non-canonical spellings are refused, families that read contiguous
 * K/V refuse pages, the runtime's paged spec, space, default and launch (its four extra
 * arguments), the lookup chain of a paged serving plan, and every listed paged variant of a
 * few shapes compiles for sm_90a with no spill (NVRTC). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/lookup.h"
#include "tests/testutil.h"

static at_shape decode_shape(int q_len, int kv_len, int nq, int nkv, int d, at_mask mask, at_dtype kv)
{
  at_shape s = {.batch = 4, .q_len = q_len, .kv_len = kv_len, .q_heads = nq, .kv_heads = nkv, .head_dim = d,
                .dtype = AT_DTYPE_BF16, .mask = mask, .with_lse = 1, .kv_dtype = kv};
  return s;
}

static void test_keys_round_trip(void **state)
{
  (void)state;
  const char *keys[] = {
      "decode.bf16.pg16.d128.none.g4.bm1.bn128.w4.s3.sp8",
      "decode.bf16.pg1.d64.causal-br.g8.bm16.bn64.w8.s2.sp4.lse",
      "decode.f16.pg256.d128.none.g1.bm1.bn64.w4.s4.sp16.lc",
      "decode.bf16.kve4m3.pg32.d128.causal-br.g4.bm16.bn256.w8.s2.sp4.cl.lse",
      "decode.bf16.kve5m2.pg128.d256.none.g64.bm1.bn32.w8.s2.sp1024",
  };
  const int pages[] = {16, 1, 256, 32, 128};
  for (int i = 0; i < 5; i++) {
    gen_variant v;
    char again[GEN_KEY_MAX];
    TU_OK(gen_variant_parse(keys[i], &v));
    assert_int_equal(v.family, GEN_FAMILY_DECODE);
    assert_int_equal(v.spec.page_size, pages[i]);
    TU_OK(gen_variant_key(&v, again, sizeof again));
    assert_string_equal(again, keys[i]);
    char entry[GEN_ENTRY_MAX];
    TU_OK(gen_entry_name(&v, entry, sizeof entry));
    assert_null(strchr(entry, '.'));
  }
  /* A contiguous key is what it was: no page field. */
  gen_variant v;
  TU_OK(gen_variant_parse("decode.bf16.d128.none.g4.bm1.bn128.w4.s3.sp8", &v));
  assert_int_equal(v.spec.page_size, 0);
}

static void test_keys_refused(void **state)
{
  (void)state;
  gen_variant v;
  tu_expect_refused(gen_variant_parse("decode.bf16.pg17.d128.none.g4.bm1.bn128.w4.s3.sp8", &v), AT_ERR_INVALID,
                 "page size 17 is not one of 1, 16, 32, 64, 128, 256");
  tu_expect_refused(gen_variant_parse("decode.bf16.pg016.d128.none.g4.bm1.bn128.w4.s3.sp8", &v), AT_ERR_INVALID,
                 "pg<page size>");
  tu_expect_refused(gen_variant_parse("decode.bf16.pg0.d128.none.g4.bm1.bn128.w4.s3.sp8", &v), AT_ERR_INVALID,
                 "pg<page size>");
  /* pg after kv, never before */
  assert_int_not_equal(gen_variant_parse("decode.bf16.pg16.kve4m3.d128.none.g4.bm1.bn128.w4.s3.sp8", &v), AT_OK);
  /* pg belongs next to the dtypes, not among the suffixes */
  assert_int_not_equal(gen_variant_parse("decode.bf16.d128.none.g4.bm1.bn128.w4.s3.sp8.pg16", &v), AT_OK);
  /* fa2 gathers pages too (paged prefill), with padded or ragged Q; not with packed K/V */
  TU_OK(gen_variant_parse("fa2.bf16.pg16.d128.causal.g4.bm128.bn64.w4.s2", &v));
  assert_int_equal(v.family, GEN_FAMILY_FA2);
  assert_int_equal(v.spec.page_size, 16);
  TU_OK(gen_variant_parse("fa2.bf16.pg1.rgq.d128.causal.g4.bm128.bn64.w4.s2", &v));
  assert_int_equal(v.spec.ragged, GEN_RAGGED_Q);
  tu_expect_refused(gen_variant_parse("fa2.bf16.pg16.rg.d128.causal.g4.bm128.bn64.w4.s2", &v), AT_ERR_INVALID,
                 "paged K/V is not packed K/V");
  /* fa3 pages in its warp-specialized 16-bit kernel, in boxes of whole pages of 16 keys or more. */
  TU_OK(gen_variant_parse("fa3.bf16.pg16.rgq.d128.causal.g4.bm128.bn176.w8.s2.ws", &v));
  assert_int_equal(v.family, GEN_FAMILY_FA3);
  assert_int_equal(v.spec.page_size, 16);
  assert_int_equal(v.spec.ragged, GEN_RAGGED_Q);
  const gen_target t = tu_sm90();
  TU_OK(gen_variant_check(&v, &t));
  static const struct {
    const char *key, *why;
  } fa3_refused[] = {
      {"fa3.bf16.pg16.d128.none.g1.bm128.bn128.w8.s2", "paged fa3 (.pg16) is the warp-specialized 16-bit kernel"},
      {"fa3.bf16.pg1.d128.none.g1.bm128.bn128.w8.s2.ws", "page size 1 and block_n 128 must divide one another"},
      {"fa3.bf16.pg32.d128.none.g1.bm128.bn176.w8.s2.ws", "page size 32 and block_n 176"},
      {"fa3.bf16.pg16.d128.causal.g4.bm128.bn128.w8.s2.ws.pers", "without .pers"},
  };
  for (size_t i = 0; i < sizeof fa3_refused / sizeof *fa3_refused; i++) {
    TU_OK(gen_variant_parse(fa3_refused[i].key, &v));
    tu_expect_refused(gen_variant_check(&v, &t), AT_ERR_UNSUPPORTED, fa3_refused[i].why);
  }
}

static void test_specs_and_families(void **state)
{
  (void)state;
  const at_shape s = decode_shape(1, 4096, 32, 8, 128, AT_MASK_NONE, AT_KV_SAME);
  gen_spec spec, plain;
  TU_OK(gen_spec_from_shape_paged(GEN_FAMILY_DECODE, &s, AT_DTYPE_BF16, 16, &spec));
  assert_int_equal(spec.page_size, 16);
  TU_OK(gen_spec_from_shape(GEN_FAMILY_DECODE, &s, &plain));
  assert_int_equal(plain.page_size, 0);
  TU_OK(gen_spec_from_shape_paged(GEN_FAMILY_FA2, &s, AT_DTYPE_BF16, 16, &spec));
  TU_OK(gen_spec_from_shape_paged(GEN_FAMILY_FA3, &s, AT_DTYPE_BF16, 16, &spec));
  assert_int_equal(spec.page_size, 16);
  tu_expect_refused(gen_spec_from_shape_paged(GEN_FAMILY_DECODE, &s, AT_DTYPE_BF16, 8, &spec), AT_ERR_INVALID,
                 "page size 8");

  /* A paged variant matches the paged shape only, and a contiguous one the contiguous shape. */
  const gen_target t = tu_sm90();
  gen_variant v;
  TU_OK(gen_default_variant_paged(&s, 16, &t, &v));
  assert_int_equal(v.family, GEN_FAMILY_DECODE);
  assert_int_equal(v.spec.page_size, 16);
  TU_OK(gen_variant_matches_paged(&v, &s, 16));
  tu_expect_refused(gen_variant_matches(&v, &s), AT_ERR_INVALID, "contiguous K/V");
  tu_expect_refused(gen_variant_matches_paged(&v, &s, 32), AT_ERR_INVALID, "K/V in pages of 32");
  gen_variant c;
  TU_OK(gen_default_variant(&s, &t, &c));
  gen_variant same_tiles = v;
  same_tiles.spec.page_size = 0;
  assert_memory_equal(&same_tiles, &c, sizeof c); /* the paged default is the contiguous one, paged */

  /* Queries longer than decode's: fa3's warp-specialized paged variants, then fa2's (prefill),
   * every one paged; fa3's warp-specialized default; a dtype decode does not read at T = 1: none (fa2 and fa3
   * leave short queries to decode). */
  const at_shape prefill = decode_shape(128, 4096, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_KV_SAME);
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0, n_fa2 = 0;
  TU_OK(gen_enumerate_paged(&prefill, 16, &t, vs, GEN_MAX_VARIANTS, &n));
  assert_true(n > 0);
  assert_int_equal(vs[0].family, GEN_FAMILY_FA3);
  for (int i = 0; i < n; i++) {
    if (vs[i].family == GEN_FAMILY_FA3)
      assert_true(vs[i].ws && !vs[i].persistent);
    else
      assert_int_equal(vs[i].family, GEN_FAMILY_FA2), n_fa2++;
    assert_int_equal(vs[i].spec.page_size, 16);
  }
  assert_true(n_fa2 > 0);
  TU_OK(gen_default_variant_paged(&prefill, 16, &t, &v));
  assert_int_equal(v.family, GEN_FAMILY_FA3); /* the warp-specialized kernel reads pages on sm_90a */
  assert_true(v.ws);
  assert_int_equal(v.spec.page_size, 16);
  at_shape fp8 = s;
  fp8.dtype = AT_DTYPE_E4M3;
  tu_expect_refused(gen_enumerate_paged(&fp8, 16, &t, vs, GEN_MAX_VARIANTS, &n), AT_ERR_UNSUPPORTED,
                 "decode family for queries of 1 to 16 tokens");

  /* The paged space: the contiguous one's tiles, every one paged. */
  int n_plain = 0;
  TU_OK(gen_enumerate_paged(&s, 64, &t, vs, GEN_MAX_VARIANTS, &n));
  gen_variant plain_vs[GEN_MAX_VARIANTS];
  TU_OK(gen_enumerate(&s, &t, plain_vs, GEN_MAX_VARIANTS, &n_plain));
  assert_true(n > 0 && n <= n_plain);
  for (int i = 0; i < n; i++) {
    assert_int_equal(vs[i].family, GEN_FAMILY_DECODE);
    assert_int_equal(vs[i].spec.page_size, 64);
    TU_OK(gen_variant_check(&vs[i], &t));
  }
  /* fa3's in-CTA kernel with a page size set by hand is refused: only its warp-specialized one pages. */
  gen_variant bad;
  TU_OK(gen_variant_parse("fa3.bf16.d128.causal.g4.bm128.bn128.w8.s2", &bad));
  bad.spec.page_size = 16;
  tu_expect_refused(gen_variant_check(&bad, &t), AT_ERR_UNSUPPORTED, "warp-specialized 16-bit kernel");
}

static void test_launch_and_source(void **state)
{
  (void)state;
  const gen_target t = tu_sm90();
  const at_shape s = decode_shape(16, 8192, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_DTYPE_E4M3);
  gen_variant v, c;
  TU_OK(gen_default_variant_paged(&s, 16, &t, &v));
  c = v;
  c.spec.page_size = 0;
  gen_launch_desc dp, dc;
  TU_OK(gen_launch_describe(&v, &s, &dp));
  TU_OK(gen_launch_describe(&c, &s, &dc));
  /* The same grid, splits and scratch; four arguments more, the paged metadata, last. */
  assert_memory_equal(dp.kernels[0].grid, dc.kernels[0].grid, sizeof dc.kernels[0].grid);
  assert_int_equal(dp.n_splits, dc.n_splits);
  assert_int_equal(dp.keys_per_split, dc.keys_per_split);
  assert_int_equal(dp.scratch_bytes, dc.scratch_bytes);
  const gen_kernel_launch *k = &dp.kernels[0];
  assert_int_equal(k->n_args, dc.kernels[0].n_args + 4);
  assert_int_equal(k->args[k->n_args - 4], GEN_ARG_BLOCK_TABLE);
  assert_int_equal(k->args[k->n_args - 3], GEN_ARG_SEQLENS_KV);
  assert_int_equal(k->args[k->n_args - 2], GEN_ARG_MAX_PAGES_PER_SEQ);
  assert_int_equal(k->args[k->n_args - 1], GEN_ARG_NUM_PAGES);
  /* The ring of page ids adds a little shared memory. */
  assert_true(gen_smem_bytes(&v) > gen_smem_bytes(&c));
  assert_true(gen_smem_bytes(&v) - gen_smem_bytes(&c) <= 4096);
  char *src = NULL;
  TU_OK(gen_emit(&v, &t, &src));
  assert_non_null(strstr(src, "#define DEC_PAGE_SIZE 16 "));
  free(src);
  TU_OK(gen_emit(&c, &t, &src));
  assert_null(strstr(src, "#define DEC_PAGE_SIZE 16"));
  free(src);

  /* fa2's paged prefill: the same grid as contiguous, the four paged arguments last (after a
   * ragged variant's offsets), the ring of page ids in shared memory. */
  const at_shape pre = decode_shape(1024, 4096, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_KV_SAME);
  const char *fa2_keys[] = {"fa2.bf16.pg16.d128.causal-br.g4.bm128.bn64.w8.s3.lse",
                            "fa2.bf16.pg1.rgq.d128.causal-br.g4.bm128.bn64.w8.s3.lse"};
  for (int i = 0; i < 2; i++) {
    TU_OK(gen_variant_parse(fa2_keys[i], &v));
    c = v;
    c.spec.page_size = 0;
    TU_OK(gen_launch_describe(&v, &pre, &dp));
    TU_OK(gen_launch_describe(&c, &pre, &dc));
    assert_memory_equal(dp.kernels[0].grid, dc.kernels[0].grid, sizeof dc.kernels[0].grid);
    k = &dp.kernels[0];
    assert_int_equal(k->n_args, dc.kernels[0].n_args + 4);
    assert_int_equal(k->args[k->n_args - 4], GEN_ARG_BLOCK_TABLE);
    assert_int_equal(k->args[k->n_args - 1], GEN_ARG_NUM_PAGES);
    /* 4 slots (2*3 - 2) of 64/16 = 4 ids (page 16) or 64 (page 1), in 128-byte lines */
    const int ids = i == 0 ? 4 : 64;
    assert_int_equal(gen_smem_bytes(&v) - gen_smem_bytes(&c), (4 * ids * 4 + 127) / 128 * 128);
    TU_OK(gen_emit(&v, &t, &src));
    assert_non_null(strstr(src, i == 0 ? "#define FA2_PAGE_SIZE 16 " : "#define FA2_PAGE_SIZE 1 "));
    free(src);
  }

  /* fa3's paged prefill: the same grid and shared memory as contiguous; the four paged arguments
   * after fa2's (and a ragged variant's offsets), then the three tensor maps (the kernel's
   * order); K's and V's boxes one page's rows, or block_n where a page holds several tiles. */
  static const struct {
    const char *key;
    int box_rows;
  } fa3_keys[] = {{"fa3.bf16.pg16.d128.causal-br.g4.bm128.bn176.w8.s2.ws", 16},
                  {"fa3.bf16.pg64.rgq.d128.causal-br.g4.bm128.bn128.w8.s2.wspp.lse", 64},
                  {"fa3.f16.pg256.d64.none.g4.bm192.bn128.w12.s3.ws", 128}};
  for (size_t i = 0; i < sizeof fa3_keys / sizeof *fa3_keys; i++) {
    TU_OK(gen_variant_parse(fa3_keys[i].key, &v));
    TU_OK(gen_variant_check(&v, &t));
    c = v;
    c.spec.page_size = 0;
    at_shape sh = pre;
    sh.head_dim = v.spec.head_dim, sh.mask = v.spec.mask, sh.with_lse = v.spec.with_lse, sh.dtype = v.spec.dtype;
    TU_OK(gen_launch_describe(&v, &sh, &dp));
    TU_OK(gen_launch_describe(&c, &sh, &dc));
    assert_memory_equal(dp.kernels[0].grid, dc.kernels[0].grid, sizeof dc.kernels[0].grid);
    assert_int_equal(gen_smem_bytes(&v), gen_smem_bytes(&c));
    k = &dp.kernels[0];
    assert_int_equal(k->n_args, dc.kernels[0].n_args + 4);
    assert_int_equal(k->args[k->n_args - 7], GEN_ARG_BLOCK_TABLE);
    assert_int_equal(k->args[k->n_args - 6], GEN_ARG_SEQLENS_KV);
    assert_int_equal(k->args[k->n_args - 5], GEN_ARG_MAX_PAGES_PER_SEQ);
    assert_int_equal(k->args[k->n_args - 4], GEN_ARG_NUM_PAGES);
    assert_int_equal(k->args[k->n_args - 3], GEN_ARG_TMAP_Q);
    assert_int_equal(k->args[k->n_args - 1], GEN_ARG_TMAP_V);
    assert_int_equal(dp.tmap_rows[0], v.block_m);
    assert_int_equal(dp.tmap_rows[1], fa3_keys[i].box_rows);
    assert_int_equal(dp.tmap_rows[2], fa3_keys[i].box_rows);
    assert_int_equal(dc.tmap_rows[1], v.block_n);
    TU_OK(gen_emit(&v, &t, &src));
    char define[48];
    snprintf(define, sizeof define, "#define FA3_PAGE_SIZE %d ", v.spec.page_size);
    assert_non_null(strstr(src, define));
    free(src);
  }
}

/* The lookup chain of a serving plan: padded Q with paged K/V gets the paged decode default
 * first, then cuDNN's paged graph, then naive; longer queries fa3's paged default, and ragged
 * Q with paged K/V fa3's .pg<N>.rgq default (cuDNN skipped with its reason). */
static void test_lookup_chain(void **state)
{
  (void)state;
  const gen_target t = tu_sm90();
  const cache_env now = tu_h200_env(""); /* no cache: only the GPU model matters */
  const at_shape s = decode_shape(1, 4096, 32, 8, 128, AT_MASK_NONE, AT_KV_SAME);
  at_serving_layout paged = at_serving_layout_make(&s, AT_SEQ_PADDED, AT_SEQ_PAGED, 16);
  rt_lookup l;
  TU_OK(rt_lookup_chain_serving(NULL, &now, &t, &s, &paged, 0, &l));
  printf("  skipped: %s\n", l.skipped);
  assert_int_equal(l.n_steps, 3);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);
  assert_non_null(strstr(l.steps[0].impl, "decode.bf16.pg16."));
  assert_string_equal(l.steps[1].impl, "cudnn");
  assert_non_null(strstr(l.steps[1].why, "paged graph"));
  assert_string_equal(l.steps[2].impl, "naive");
  TU_OK(rt_lookup_chain_serving(NULL, &now, &t, &s, &paged, 1, &l)); /* "fused" */
  assert_int_equal(l.n_steps, 1);
  assert_int_equal(l.steps[0].choice, AT_CHOICE_DEFAULT);

  const at_shape prefill = decode_shape(64, 4096, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_KV_SAME);
  at_serving_layout paged_prefill = at_serving_layout_make(&prefill, AT_SEQ_PADDED, AT_SEQ_PAGED, 16);
  TU_OK(rt_lookup_chain_serving(NULL, &now, &t, &prefill, &paged_prefill, 0, &l));
  assert_int_equal(l.n_steps, 3);
  assert_non_null(strstr(l.steps[0].impl, "fa3.bf16.pg16.d128.causal-br."));
  assert_non_null(strstr(l.steps[0].why, "paged prefill default"));
  assert_string_equal(l.steps[1].impl, "cudnn");
  assert_string_equal(l.steps[2].impl, "naive");

  /* Ragged Q with paged K/V: fa3's .pg<N>.rgq default (chunked prefill on a paged cache). */
  at_serving_layout ragged = at_serving_layout_make(&prefill, AT_SEQ_RAGGED, AT_SEQ_PAGED, 16);
  TU_OK(rt_lookup_chain_serving(NULL, &now, &t, &prefill, &ragged, 0, &l));
  assert_int_equal(l.n_steps, 2);
  assert_non_null(strstr(l.steps[0].impl, "fa3.bf16.pg16.rgq.d128.causal-br."));
  assert_string_equal(l.steps[1].impl, "naive");
  assert_non_null(strstr(l.skipped, "cuDNN: unsupported"));
}

/* Keeps one split count per kernel: the split count is a launch argument, so variants that differ
 * only in it (but for the cluster merge, whose cluster size is compiled in) are one kernel.
 * Returns the new count. */
static int one_per_kernel(gen_variant *vs, int n)
{
  int kept = 0;
  for (int i = 0; i < n; i++) {
    int dup = 0;
    for (int j = 0; j < kept && !dup; j++) {
      gen_variant a = vs[i], b = vs[j];
      if (a.merge != GEN_MERGE_CLUSTER) a.splits = b.splits = 1;
      dup = memcmp(&a, &b, sizeof a) == 0;
    }
    if (!dup) vs[kept++] = vs[i];
  }
  return kept;
}

/* Every listed paged kernel of a few shapes compiles with no spill and no stack (sm_90a): the
 * register boundary (d256, 128 packed rows), GQA and MQA, T = 1 and 16, FP8 K/V, page sizes 1,
 * 16, 64, 256. */
static void test_compile_no_spills(void **state)
{
  (void)state;
  const gen_target t = tu_sm90();
  typedef struct pcase {
    at_shape s;
    int page_size;
  } pcase;
  const pcase cases[] = {
      {decode_shape(16, 8192, 64, 8, 256, AT_MASK_CAUSAL_BR, AT_KV_SAME), 16},
      {decode_shape(1, 16384, 32, 8, 128, AT_MASK_NONE, AT_KV_SAME), 1},
      {decode_shape(16, 8192, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_DTYPE_E4M3), 64},
      {decode_shape(1, 4096, 32, 1, 64, AT_MASK_NONE, AT_KV_SAME), 256},
  };
  const int n_cases = (int)(sizeof cases / sizeof *cases);
  gen_variant *all = calloc((size_t)n_cases * GEN_MAX_VARIANTS, sizeof *all);
  assert_non_null(all);
  int n = 0;
  for (int i = 0; i < n_cases; i++) {
    int k = 0;
    TU_OK(gen_enumerate_paged(&cases[i].s, cases[i].page_size, &t, all + n, GEN_MAX_VARIANTS, &k));
    assert_true(k > 0);
    n += one_per_kernel(all + n, k);
  }
  int bad = tu_compile_count_bad(all, n, &t, "paged decode");
  free(all);
  assert_int_equal(bad, 0);
}

/* The paged variants of prefill on a paged cache: fa2's at padded Q with head dims 128 and 96
 * (whose loads take the second path of fa2_load_tile_paged), ragged Q (.rgq) with lse, FP8, every
 * page size class (1: an id per row; 16, 64: several pages per tile; 256: one page per tile), and
 * fa3's warp-specialized ones where they run (16-bit, pages of 16 or more: listed first). */
static void test_compile_paged_prefill_no_spills(void **state)
{
  (void)state;
  const gen_target t = tu_sm90();
  typedef struct pcase {
    at_shape s;
    int page_size, ragged;
  } pcase;
  at_shape fp8 = decode_shape(2048, 4096, 32, 8, 128, AT_MASK_CAUSAL_TL, AT_KV_SAME);
  fp8.dtype = AT_DTYPE_E4M3;
  at_shape f16 = decode_shape(1024, 4096, 16, 16, 256, AT_MASK_NONE, AT_KV_SAME);
  f16.dtype = AT_DTYPE_F16;
  const pcase cases[] = {
      {decode_shape(2048, 4096, 32, 8, 128, AT_MASK_CAUSAL_BR, AT_KV_SAME), 16, GEN_RAGGED_NONE},
      {decode_shape(512, 4096, 32, 8, 96, AT_MASK_NONE, AT_KV_SAME), 1, GEN_RAGGED_Q},
      {fp8, 256, GEN_RAGGED_NONE},
      {f16, 64, GEN_RAGGED_Q},
  };
  const int n_cases = (int)(sizeof cases / sizeof *cases);
  gen_variant *all = calloc((size_t)n_cases * GEN_MAX_VARIANTS, sizeof *all);
  assert_non_null(all);
  int n = 0;
  for (int i = 0; i < n_cases; i++) {
    int k = 0;
    TU_OK(gen_enumerate_serving(&cases[i].s, cases[i].page_size, cases[i].ragged, &t, all + n, GEN_MAX_VARIANTS, &k));
    assert_true(k > 0);
    const int fa3_pages = cases[i].s.dtype != AT_DTYPE_E4M3 && cases[i].page_size >= 16;
    int n_fa3 = 0;
    for (int j = 0; j < k; j++) {
      const gen_variant *v = &all[n + j];
      if (v->family == GEN_FAMILY_FA3) {
        assert_true(fa3_pages && v->ws && !v->persistent);
        assert_true(v->block_n % cases[i].page_size == 0 || cases[i].page_size % v->block_n == 0);
        n_fa3++;
      } else {
        assert_int_equal(v->family, GEN_FAMILY_FA2);
      }
      assert_int_equal(v->spec.page_size, cases[i].page_size);
    }
    assert_true(fa3_pages ? n_fa3 > 0 : n_fa3 == 0);
    n += k;
  }
  int bad = tu_compile_count_bad(all, n, &t, "paged prefill");
  free(all);
  assert_int_equal(bad, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keys_round_trip),    cmocka_unit_test(test_keys_refused),
      cmocka_unit_test(test_specs_and_families), cmocka_unit_test(test_launch_and_source),
      cmocka_unit_test(test_lookup_chain),       cmocka_unit_test(test_compile_no_spills),
      cmocka_unit_test(test_compile_paged_prefill_no_spills),
  };
  return TU_RUN_GROUP(tests, NULL, NULL);
}
