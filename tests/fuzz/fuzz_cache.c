/*
 * fuzz_cache.c — libFuzzer target: the SQLite cache reader on corrupt and hostile files. Each input
 * is written to a temporary file, opened read-only (as applications and `attntune report` open a
 * cache), and everything is read back: the schema version, the GPU models, every best row and
 * every trial, and for each of them the lookups by shape (best, trial, count, done) and by
 * variant (cubin). Seeds: small caches written through cache.h by tests/fuzz/make_seeds.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_path[64], g_wal[80], g_shm[80];

static void check_shape(const at_shape *s)
{
  char key[160];
  at_shape_key(s, key, sizeof key); /* any ints a hostile row holds */
  (void)at_shape_check(s);
}

static int visit_best(void *user, const cache_best *b)
{
  cache_db *db = user;
  check_shape(&b->shape);
  if ((b->cubin == NULL) != (b->cubin_size == 0)) abort();
  if (b->cubin_size) {
    volatile const unsigned char *p = b->cubin; /* the whole blob is readable */
    (void)p[0], (void)p[b->cubin_size - 1];
  }
  cache_best again;
  int found = 0;
  if (cache_get_best(db, b->env.gpu_model, &b->shape, &again, &found) == AT_OK && found) cache_best_clear(&again);
  void *cubin = NULL;
  size_t n = 0;
  if (cache_get_cubin(db, b->impl, b->arch, b->env.template_version, &cubin, &n, &found) == AT_OK && found &&
      (!cubin || !n))
    abort();
  free(cubin);
  return 0;
}

static int visit_trial(void *user, const cache_env *env, const cache_trial *t)
{
  cache_db *db = user;
  check_shape(&t->shape);
  if (!strcmp(cache_status_name(t->status), "?")) abort(); /* the reader refuses unknown statuses */
  cache_trial again;
  int found = 0, count = 0, done = 0;
  (void)cache_find_trial(db, env, &t->shape, t->impl, &found, &again);
  (void)cache_count_trials(db, env, &t->shape, &count);
  (void)cache_is_done(db, env, &t->shape, &done);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (!g_path[0]) {
    /* Memory-backed where there is one: every input is a file write, an open and a few queries. */
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_path, sizeof g_path, "%s/attntune-fuzz-cache.%ld.db", dir, (long)getpid());
    snprintf(g_wal, sizeof g_wal, "%s-wal", g_path);
    snprintf(g_shm, sizeof g_shm, "%s-shm", g_path);
  }
  unlink(g_wal);
  unlink(g_shm);
  FILE *f = fopen(g_path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  if (fclose(f) != 0) abort();
  cache_db *db = NULL;
  if (cache_open(g_path, 1, &db) == AT_OK) {
    if (!cache_is_read_only(db)) abort();
    (void)cache_schema_version(db);
    char models[256];
    int n_models = 0;
    (void)cache_models(db, models, sizeof models, &n_models);
    (void)cache_models(db, models, 1, &n_models);
    (void)cache_each_best(db, NULL, visit_best, db);
    (void)cache_each_trial(db, NULL, visit_trial, db);
    (void)cache_each_best(db, "NVIDIA H200", visit_best, db);
    cache_close(db);
  } else if (db) {
    abort(); /* a failed open hands back no handle */
  }
  unlink(g_path);
  unlink(g_wal);
  unlink(g_shm);
  return 0;
}
