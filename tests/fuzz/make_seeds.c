/*
 * make_seeds.c — writes the binary seeds of tests/fuzz/corpus/: shape/ (at_shape structs of real
 * shapes) and cache/ (small valid caches: one as cache_open writes it, WAL mode, 4 KiB pages, and
 * one converted to a rollback journal with 512-byte pages, so mutations reach more of its bytes).
 * The text seeds (config/, variant/) are copied from configs/ and `attntune gen --list`.
 *
 *     make_seeds CORPUS_DIR     (e.g. build-fuzz/tests/fuzz/make_seeds tests/fuzz/corpus)
 */
#include <math.h>
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
  check(cache_mark_done(db, &env, s));
  check(cache_put_cubin(db, "fa2.f16.d128.none.g4.bm64.bn64.w4.s2", "sm_90a", "fa2-1", "13.0",
                        "fa2_f16_d128_none_g4_bm64_bn64_w4_s2", CUBIN, sizeof CUBIN));
  cache_close(db);
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
