/*
 * make_seeds.c — writes the binary seeds of tests/fuzz/corpus/: shape/ (at_shape structs of real
 * shapes) and cache/ (small valid caches: one as cache_open writes it, WAL mode, 4 KiB pages, and
 * one converted to a rollback journal with 512-byte pages, so mutations reach more of its bytes) and
 * serving/ (valid serving metadata in fuzz_serving.c's byte format: a ragged and a paged call).
 * The text seeds (config/, variant/) are copied from configs/ and `attntune gen --list`.
 *
 *     make_seeds CORPUS_DIR     (e.g. build-fuzz/tests/fuzz/make_seeds tests/fuzz/corpus)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache/cache.h"

static void write_file(const char *path, const void *data, size_t size)
{
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
    fprintf(stderr, "make_seeds: cannot write %s\n", path);
    exit(1);
  }
}

static void check(at_status rc)
{
  if (rc != AT_OK) {
    fprintf(stderr, "make_seeds: %s\n", at_last_error());
    exit(1);
  }
}

static const at_shape SHAPES[] = {
    {2, 8192, 8192, 16, 16, 128, AT_DTYPE_BF16, AT_MASK_CAUSAL_TL, 0.0f, 0, AT_KV_SAME},
    {1, 1, 4096, 32, 8, 128, AT_DTYPE_F16, AT_MASK_NONE, 0.0f, 1, AT_KV_SAME},
    {4, 512, 1024, 8, 1, 64, AT_DTYPE_E4M3, AT_MASK_CAUSAL_BR, 0.125f, 0, AT_KV_SAME},
    {1, 128, 128, 4, 4, 256, AT_DTYPE_F32, AT_MASK_NONE, 0.0f, 0, AT_KV_SAME},
    {8, 1, 16384, 32, 8, 128, AT_DTYPE_BF16, AT_MASK_NONE, 0.0f, 0, AT_DTYPE_E4M3}, /* an FP8 KV cache */
};

static void write_cache(const char *path)
{
  unlink(path);
  cache_db *db = NULL;
  check(cache_open(path, CACHE_WRITE, &db));
  cache_env env = {"NVIDIA H200", 9, 0, 132, "580.159.04", "13.0", "9.19.0", "fa2-1.fa3-1.decode-1"};
  const at_shape *s = &SHAPES[0];
  cache_trial t = {*s, "fa3.bf16.d128.causal.g1.bm128.bn128.w8.s2", CACHE_OK, 0.52, 506.0, 1e-3, 2e-3,
                   168, 0, 65536, 50, ""};
  check(cache_put_trial(db, &env, &t));
  cache_trial bad = {*s, "fa2.bf16.d128.causal.g1.bm128.bn64.w4.s3", CACHE_COMPILE_FAILED, NAN, NAN, NAN,
                     NAN, -1, -1, -1, 0, "ptxas error"};
  check(cache_put_trial(db, &env, &bad));
  cache_trial cudnn = {*s, "cudnn", CACHE_OK, 0.38, 693.0, 1e-3, 0.0, -1, -1, -1, 50, ""};
  check(cache_put_trial(db, &env, &cudnn));
  static const unsigned char CUBIN[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x33};
  cache_best b = {.shape = *s, .env = env, .impl = "fa3.bf16.d128.causal.g1.bm128.bn128.w8.s2", .time_ms = 0.52,
                  .tflops = 506.0, .cudnn_ms = 0.38, .err_naive = 1e-3, .err_cudnn = 2e-3, .arch = "sm_90a",
                  .entry = "fa3_bf16_d128_causal_g1_bm128_bn128_w8_s2", .cubin = (void *)CUBIN,
                  .cubin_size = sizeof CUBIN};
  int stored = 0;
  check(cache_put_best(db, &b, &stored));
  check(cache_mark_done(db, &env, s, NULL));
  check(cache_put_cubin(db, "fa2.f16.d128.none.g4.bm64.bn64.w4.s2", "sm_90a", "fa2-1", "13.0",
                        "fa2_f16_d128_none_g4_bm64_bn64_w4_s2", CUBIN, sizeof CUBIN));
  cache_close(db);
}

/* fuzz_serving.c's input: sizes, layout bytes, totals, which arrays, the arrays, a lengths spec. */
typedef struct seed_bytes {
  unsigned char b[512];
  size_t n;
} seed_bytes;

static void put_byte(seed_bytes *s, int v) { s->b[s->n++] = (unsigned char)v; }

static void put_int(seed_bytes *s, int32_t v)
{
  for (int i = 0; i < 4; i++) put_byte(s, (int)(((uint32_t)v >> (8 * i)) & 0xffu));
}

static void put_ints(seed_bytes *s, const int32_t *v, size_t n)
{
  for (size_t i = 0; i < n; i++) put_int(s, v[i]);
}

static void write_serving_seeds(const char *dir)
{
  char path[4096];
  /* B 3, T <= 8, S <= 20, ragged Q and K/V, lengths (8, 20) (1, 0) (0, 1). */
  seed_bytes ragged = {{0}, 0};
  const int32_t cu_q[] = {0, 8, 9, 9}, cu_kv[] = {0, 20, 20, 21};
  put_byte(&ragged, 2), put_byte(&ragged, 7), put_byte(&ragged, 19), put_byte(&ragged, 1), put_byte(&ragged, 1);
  put_byte(&ragged, 6), put_byte(&ragged, 2), put_byte(&ragged, 2); /* version byte 2: this one */
  put_int(&ragged, 9), put_int(&ragged, 21), put_int(&ragged, 0), put_byte(&ragged, 3);
  put_ints(&ragged, cu_q, 4), put_ints(&ragged, cu_kv, 4);
  put_byte(&ragged, 120);
  memcpy(ragged.b + ragged.n, "uniform:1:9:3", 13), ragged.n += 13;
  snprintf(path, sizeof path, "%s/serving/serving-ragged.bin", dir);
  write_file(path, ragged.b, ragged.n);
  /* B 2, T 1, S <= 40, padded Q, paged K/V at page size 16 (3 entries a row), 5 pages. */
  seed_bytes paged = {{0}, 0};
  const int32_t lens[] = {40, 17}, table[] = {4, 0, 2, 1, 3, -1};
  put_byte(&paged, 1), put_byte(&paged, 0), put_byte(&paged, 39), put_byte(&paged, 0), put_byte(&paged, 2);
  put_byte(&paged, 1), put_byte(&paged, 2), put_byte(&paged, 2);
  put_int(&paged, 0), put_int(&paged, 0), put_int(&paged, 5), put_byte(&paged, 12);
  put_ints(&paged, lens, 2), put_ints(&paged, table, 6);
  put_byte(&paged, 90);
  memcpy(paged.b + paged.n, "40,17", 5), paged.n += 5;
  snprintf(path, sizeof path, "%s/serving/serving-paged.bin", dir);
  write_file(path, paged.b, paged.n);
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
    return 2;
  }
  char path[4096];
  for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
    snprintf(path, sizeof path, "%s/shape/shape-%zu.bin", argv[1], i);
    write_file(path, &SHAPES[i], sizeof SHAPES[i]);
  }
  write_serving_seeds(argv[1]);
  snprintf(path, sizeof path, "%s/cache/cache-wal.db", argv[1]);
  write_cache(path);
  snprintf(path, sizeof path, "%s/cache/cache-small.db", argv[1]);
  write_cache(path);
  sqlite3 *db = NULL;
  if (sqlite3_open(path, &db) != SQLITE_OK ||
      sqlite3_exec(db, "PRAGMA journal_mode = DELETE; PRAGMA page_size = 512; VACUUM;", NULL, NULL, NULL) !=
          SQLITE_OK) {
    fprintf(stderr, "make_seeds: cannot shrink %s: %s\n", path, sqlite3_errmsg(db));
    return 1;
  }
  sqlite3_close(db);
  return 0;
}
